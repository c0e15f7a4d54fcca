/* libFuzzer target: the OpenAI-compatible API's request parser and chat
 * rendering (POST /v1/completions, /v1/chat/completions), then the answer
 * built from events whose text and tokens come from the input too. The
 * first byte picks completions or chat; the rest is the JSON body. The
 * model is the demo's (models/demo/fortunes.gguf), loaded once. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mcp/llm.h"
#include "registry/descriptor_util.h"
#include "serve/openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mcp_model_version *version(void)
{
    static mcp_model_version v;
    static mcp_descriptor *d;
    if (!v.llm) {
        char err[256];
        mcp_llm_model_options mo = mcp_llm_model_options_default();
        mo.threads = 1;
        MCP_ASSERT(mcp_llm_model_load(MCP_DEMO_GGUF, &mo, &v.llm, err, sizeof err) == MCP_STATUS_OK);
        mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
        d = mcp__descriptor_new(&defaults);
        MCP_ASSERT(d);
        v.name = (char *)"fortunes";
        v.version = (char *)"v1.0.0";
        v.desc = d;
    }
    return &v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    mcp_model_version *v = version();
    mcp_oai_kind kind = data[0] & 1 ? MCP_OAI_CHAT : MCP_OAI_COMPLETION;
    json_error_t jerr;
    json_t *body = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    char msg[600], param[64];
    mcp_err err = {msg, sizeof msg};
    mcp_oai_request req;
    mcp_status st = mcp_oai_parse(body, kind, v, &req, param, sizeof param, &err);
    json_decref(body);
    if (st != MCP_STATUS_OK) {
        MCP_ASSERT(msg[0] != '\0' && req.n_choices == 0);
        mcp_buf b = {0};
        mcp_oai_error(&b, st, msg, param);
        json_t *o = json_loadb((const char *)b.data, b.len, 0, &jerr);
        MCP_ASSERT(json_is_object(json_object_get(o, "error")));
        json_decref(o);
        mcp_buf_free(&b);
        return 0;
    }
    MCP_ASSERT(req.n_choices >= 1 && req.n_choices <= MCP_OAI_MAX_CHOICES && req.n_per_prompt >= 1);
    for (int i = 0; i < req.n_choices; i++) {
        const mcp_gen_request *r = req.choices[i];
        MCP_ASSERT(r->prompt && strlen(r->prompt) <= r->prompt_len && r->index == i);
        MCP_ASSERT(r->max_tokens >= 1 && r->n_stop <= MCP_GEN_MAX_STOP);
        for (size_t k = 0; k < r->n_spans; k++) MCP_ASSERT(r->spans[k].off + r->spans[k].len <= r->prompt_len);
    }
    /* The answer, fed with events made of the prompt's own bytes. */
    snprintf(req.model, sizeof req.model, "fortunes");
    mcp_oai_answer *a = mcp_calloc(1, sizeof *a);
    MCP_ASSERT(a);
    mcp_oai_answer_init(a, &req, v->llm);
    mcp_buf out = {0};
    for (int i = 0; i < req.n_choices; i++) {
        const mcp_gen_request *r = req.choices[i];
        for (size_t k = 0; k < r->prompt_len && k < 8; k++) {
            mcp_llm_sample_result tok = {.id = (unsigned char)r->prompt[k], .logprob = -1.5f, .n_top = 2,
                                         .top = {{(unsigned char)r->prompt[k], -1.5f}, {200 + (int32_t)k, -2.0f}}};
            mcp_gen_event e = {.kind = MCP_GEN_TOKEN, .text = r->prompt + k, .len = 1, .token = &tok};
            MCP_ASSERT(!mcp_oai_event(a, i, &e, &out));
        }
        mcp_gen_event done = {.kind = MCP_GEN_DONE, .status = (i == 1 && r->prompt_len > 3) ? MCP_STATUS_INVALID_ARGUMENT : MCP_STATUS_OK,
                              .message = "failed", .finish_reason = "length", .prompt_tokens = 3, .completion_tokens = 8};
        bool last = mcp_oai_event(a, i, &done, &out);
        MCP_ASSERT(last == (i == req.n_choices - 1));
    }
    if (req.stream) {
        /* Every event is one JSON object (or [DONE], last). */
        const char *p = (const char *)out.data, *end = p + out.len;
        MCP_ASSERT(out.len > 14 && !memcmp(end - 14, "data: [DONE]\n\n", 14));
        while (p < end - 14) {
            MCP_ASSERT(!memcmp(p, "data: ", 6));
            const char *e = strstr(p, "\n\n");
            MCP_ASSERT(e);
            json_t *o = json_loadb(p + 6, (size_t)(e - p - 6), 0, &jerr);
            if (!json_is_object(o)) fprintf(stderr, "bad event: %.*s (%s)\n", (int)(e - p), p, jerr.text);
            MCP_ASSERT(json_is_object(o));
            json_decref(o);
            p = e + 2;
        }
    } else {
        mcp_buf resp = {0};
        int code = 0;
        mcp_oai_response(a, &resp, &code);
        json_t *o = json_loadb((const char *)resp.data, resp.len, 0, &jerr);
        MCP_ASSERT(json_is_object(o) && (code == 200) == (json_object_get(o, "choices") != NULL));
        json_decref(o);
        mcp_buf_free(&resp);
    }
    mcp_buf_free(&out);
    mcp_oai_answer_free(a);
    mcp_free(a);
    mcp_oai_request_clear(&req);
    return 0;
}
