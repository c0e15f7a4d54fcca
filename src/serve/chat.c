/*
 * Chat templates (see chat.h): each family's layout, and how a file's
 * Jinja template or its vocabulary picks the family.
 */
#include "serve/chat.h"

#include <string.h>

static bool contains(const char *h, size_t hn, const char *needle)
{
    size_t nn = strlen(needle);
    for (size_t i = 0; h && nn <= hn && i <= hn - nn; i++)
        if (memcmp(h + i, needle, nn) == 0) return true;
    return false;
}

/* Whether `text` is one control token of the model's vocabulary. */
static bool has_control_token(const mcp_llm_model *m, const char *text)
{
    int32_t ids[4];
    size_t n = 0;
    char err[128];
    if (mcp_llm_tokenize(m, text, strlen(text), false, true, ids, 4, &n, err, sizeof err) != MCP_STATUS_OK || n != 1)
        return false;
    return mcp_llm_token_piece(m, ids[0], false, NULL, 0) == 0; /* control tokens render as "" */
}

mcp_chat_template mcp_chat_resolve(const mcp_llm_model *m, mcp_chat_template choice)
{
    if (choice != MCP_CHAT_AUTO) return choice;
    size_t len = 0;
    const char *tpl = mcp_llm_model_meta_str(m, "tokenizer.chat_template", &len);
    if (tpl) {
        if (contains(tpl, len, "<|im_start|>")) return MCP_CHAT_CHATML;
        if (contains(tpl, len, "<|start_header_id|>")) return MCP_CHAT_LLAMA3;
        if (contains(tpl, len, "[INST]")) return MCP_CHAT_LLAMA2;
    }
    if (has_control_token(m, "<|im_start|>") && has_control_token(m, "<|im_end|>")) return MCP_CHAT_CHATML;
    if (has_control_token(m, "<|start_header_id|>") && has_control_token(m, "<|eot_id|>")) return MCP_CHAT_LLAMA3;
    return MCP_CHAT_PLAIN;
}

const char *mcp_chat_template_name(mcp_chat_template t)
{
    switch (t) {
    case MCP_CHAT_AUTO: return "auto";
    case MCP_CHAT_CHATML: return "chatml";
    case MCP_CHAT_LLAMA3: return "llama3";
    case MCP_CHAT_LLAMA2: return "llama2";
    case MCP_CHAT_PLAIN: return "plain";
    }
    return "unknown";
}

/* The prompt as it is written: markup (its spans recorded) and text. */
typedef struct render {
    mcp_buf out;
    mcp_llm_span *spans;
    size_t n_spans, cap_spans;
    bool failed;
} render;

static void markup(render *r, const char *s)
{
    size_t n = strlen(s);
    if (!n) return;
    if (r->n_spans && r->spans[r->n_spans - 1].off + r->spans[r->n_spans - 1].len == r->out.len) {
        r->spans[r->n_spans - 1].len += n; /* adjacent markup: one span */
    } else {
        if (r->n_spans == r->cap_spans) {
            size_t cap = r->cap_spans ? 2 * r->cap_spans : 16;
            mcp_llm_span *p = mcp_realloc(r->spans, cap * sizeof *p);
            if (!p) {
                r->failed = true;
                return;
            }
            r->spans = p;
            r->cap_spans = cap;
        }
        r->spans[r->n_spans++] = (mcp_llm_span){r->out.len, n};
    }
    mcp_buf_append(&r->out, s, n);
}

static void text(render *r, const char *s, size_t n) { mcp_buf_append(&r->out, s, n); }
static void text_s(render *r, const char *s) { text(r, s, strlen(s)); }

static bool is_role(const mcp_chat_msg *m, const char *role) { return strcmp(m->role, role) == 0; }

mcp_status mcp_chat_render(mcp_chat_template t, const mcp_chat_msg *msgs, size_t n, char **prompt, size_t *prompt_len,
                           mcp_llm_span **spans, size_t *n_spans, mcp_err *err)
{
    *prompt = NULL;
    *spans = NULL;
    *prompt_len = *n_spans = 0;
    render r = {0};
    switch (t) {
    case MCP_CHAT_AUTO: /* resolved by the caller; plain if not */
    case MCP_CHAT_PLAIN:
        for (size_t i = 0; i < n; i++) {
            text_s(&r, msgs[i].role);
            text_s(&r, ": ");
            text(&r, msgs[i].content, msgs[i].content_len);
            text_s(&r, "\n");
        }
        text_s(&r, "assistant:");
        break;
    case MCP_CHAT_CHATML:
        for (size_t i = 0; i < n; i++) {
            markup(&r, "<|im_start|>");
            text_s(&r, msgs[i].role);
            text_s(&r, "\n");
            text(&r, msgs[i].content, msgs[i].content_len);
            markup(&r, "<|im_end|>");
            text_s(&r, "\n");
        }
        markup(&r, "<|im_start|>");
        text_s(&r, "assistant\n");
        break;
    case MCP_CHAT_LLAMA3: /* the BOS comes from the tokenizer */
        for (size_t i = 0; i < n; i++) {
            markup(&r, "<|start_header_id|>");
            text_s(&r, msgs[i].role);
            markup(&r, "<|end_header_id|>");
            text_s(&r, "\n\n");
            text(&r, msgs[i].content, msgs[i].content_len);
            markup(&r, "<|eot_id|>");
        }
        markup(&r, "<|start_header_id|>");
        text_s(&r, "assistant");
        markup(&r, "<|end_header_id|>");
        text_s(&r, "\n\n");
        break;
    case MCP_CHAT_LLAMA2: {
        /* [INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer</s><s>[INST] user [/INST]
         * (the first BOS from the tokenizer); system messages join the next user turn. */
        bool open = false, first = true;
        for (size_t i = 0; i < n; i++) {
            const mcp_chat_msg *m = &msgs[i];
            if (is_role(m, "assistant")) {
                if (open) markup(&r, " [/INST]"), open = false;
                text_s(&r, " ");
                text(&r, m->content, m->content_len);
                markup(&r, " </s>");
                continue;
            }
            if (!open) {
                if (!first) markup(&r, "<s>");
                markup(&r, "[INST] ");
                open = true;
            }
            first = false;
            if (is_role(m, "system") || is_role(m, "developer")) {
                text_s(&r, "<<SYS>>\n");
                text(&r, m->content, m->content_len);
                text_s(&r, "\n<</SYS>>\n\n");
            } else {
                text(&r, m->content, m->content_len);
            }
        }
        if (open) markup(&r, " [/INST]");
        break;
    }
    }
    text(&r, "", 1); /* the NUL */
    if (r.failed || r.out.failed) {
        mcp_buf_free(&r.out);
        mcp_free(r.spans);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory rendering %zu chat messages", n);
    }
    *prompt = (char *)r.out.data;
    *prompt_len = r.out.len - 1;
    *spans = r.spans;
    *n_spans = r.n_spans;
    return MCP_STATUS_OK;
}
