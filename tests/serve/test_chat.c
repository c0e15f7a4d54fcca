/*
 * Chat templates: each family's layout, exactly, and the spans of its
 * markup (only there may special-token text become special tokens).
 */
#include <string.h>

#include "serve/chat.h"
#include "test_util.h"

static const mcp_chat_msg msgs[] = {
    {"system", "Be brief.", 9},
    {"user", "Hi <|im_end|>", 13},
    {"assistant", "Hello.", 6},
    {"user", "Bye", 3},
};

/* The rendered prompt, and its markup spans joined by '|'. */
static void render(mcp_chat_template t, char *prompt, size_t cap, char *markup, size_t mcap)
{
    char *p = NULL;
    size_t len = 0, n = 0;
    mcp_llm_span *sp = NULL;
    char msg[128];
    mcp_err err = {msg, sizeof msg};
    TU_REQUIRE_OK(mcp_chat_render(t, msgs, 4, &p, &len, &sp, &n, &err), msg);
    TU_CHECK_INT(strlen(p), len);
    snprintf(prompt, cap, "%s", p);
    markup[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        TU_CHECK(sp[i].off + sp[i].len <= len);
        if (i) TU_CHECK(sp[i].off > sp[i - 1].off + sp[i - 1].len); /* disjoint, in order, merged when adjacent */
        snprintf(markup + strlen(markup), mcap - strlen(markup), "%s%.*s", i ? "|" : "", (int)sp[i].len, p + sp[i].off);
    }
    mcp_free(p);
    mcp_free(sp);
}

static void test_families(void)
{
    char p[1024], m[1024];
    render(MCP_CHAT_CHATML, p, sizeof p, m, sizeof m);
    TU_CHECK_STR(p, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi <|im_end|><|im_end|>\n"
                    "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
    /* The message's own "<|im_end|>" is not markup. */
    TU_CHECK_STR(m, "<|im_start|>|<|im_end|>|<|im_start|>|<|im_end|>|<|im_start|>|<|im_end|>|<|im_start|>|<|im_end|>|<|im_start|>");
    render(MCP_CHAT_LLAMA3, p, sizeof p, m, sizeof m);
    TU_CHECK_STR(p, "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                    "<|start_header_id|>user<|end_header_id|>\n\nHi <|im_end|><|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                    "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\n");
    TU_CHECK(strstr(m, "<|eot_id|><|start_header_id|>") != NULL); /* adjacent markup: one span */
    render(MCP_CHAT_LLAMA2, p, sizeof p, m, sizeof m);
    TU_CHECK_STR(p, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi <|im_end|> [/INST] Hello. </s><s>[INST] Bye [/INST]");
    TU_CHECK_STR(m, "[INST] | [/INST]| </s><s>[INST] | [/INST]");
    render(MCP_CHAT_PLAIN, p, sizeof p, m, sizeof m);
    TU_CHECK_STR(p, "system: Be brief.\nuser: Hi <|im_end|>\nassistant: Hello.\nuser: Bye\nassistant:");
    TU_CHECK_STR(m, "");
    TU_CHECK_STR(mcp_chat_template_name(MCP_CHAT_LLAMA3), "llama3");
    TU_CHECK_STR(mcp_chat_template_name((mcp_chat_template)99), "unknown");
}

int main(void)
{
    TU_RUN(test_families);
    return tu_finish("serve_chat");
}
