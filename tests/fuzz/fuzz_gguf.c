/* libFuzzer target: the GGUF reader (LLM model files). Whatever it accepts
 * must be self-consistent: every tensor inside the image, every string of a
 * string array inside it, every lookup answering. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "llm/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int inside(const uint8_t *base, size_t size, const void *p, uint64_t n)
{
    const uint8_t *q = p;
    return q >= base && q <= base + size && n <= (uint64_t)(base + size - q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_gguf *g = NULL;
    msg[0] = 0;
    if (mcp_gguf_parse(data, size, &g, &err) != MCP_STATUS_OK) {
        MCP_ASSERT(g == NULL && strlen(msg) > 0);
        return 0;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const mcp_gguf_tensor *t = &g->tensors[i];
        MCP_ASSERT(inside(data, size, t->data, t->nbytes));
        MCP_ASSERT(inside(data, size, t->name.ptr, t->name.len));
        MCP_ASSERT(mcp_ggml_type_name(t->type) != NULL);
    }
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const mcp_gguf_kv *kv = &g->kv[i];
        MCP_ASSERT(inside(data, size, kv->key.ptr, kv->key.len));
        if (kv->type == MCP_GGUF_ARRAY && kv->elem_type == MCP_GGUF_STRING)
            for (uint64_t j = 0; j < kv->n; j++) MCP_ASSERT(inside(data, size, kv->strs[j].ptr, kv->strs[j].len));
        /* Every typed read answers (value or a named error) without harm. */
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 255 ? kv->key.len : 255), kv->key.ptr);
        bool found;
        uint64_t u;
        float f;
        bool b;
        mcp_gguf_str s;
        (void)mcp_gguf_get_u64(g, key, &u, &found, &err);
        (void)mcp_gguf_get_f32(g, key, &f, &found, &err);
        (void)mcp_gguf_get_bool(g, key, &b, &found, &err);
        if (mcp_gguf_get_str(g, key, &s, &found, &err) == MCP_STATUS_OK && found)
            MCP_ASSERT(inside(data, size, s.ptr, s.len));
    }
    mcp_gguf_close(g);
    return 0;
}
