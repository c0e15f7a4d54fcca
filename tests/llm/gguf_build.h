/* Builds GGUF file images in memory for the tests: a header, metadata and
 * tensor infos written field by field, so a test can also write them wrong. */
#ifndef MCP_TEST_GGUF_BUILD_H
#define MCP_TEST_GGUF_BUILD_H

#include <stdint.h>
#include <string.h>

#include "base/base.h"
#include "llm/gguf.h"

static inline void gb_u32(mcp_buf *b, uint32_t v) { mcp_buf_append(b, &v, 4); }
static inline void gb_u64(mcp_buf *b, uint64_t v) { mcp_buf_append(b, &v, 8); }
static inline void gb_str(mcp_buf *b, const char *s)
{
    gb_u64(b, strlen(s));
    mcp_buf_append(b, s, strlen(s));
}
static inline void gb_header(mcp_buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    mcp_buf_append(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, n_tensors);
    gb_u64(b, n_kv);
}
static inline void gb_kv_u32(mcp_buf *b, const char *key, uint32_t v)
{
    gb_str(b, key);
    gb_u32(b, MCP_GGUF_UINT32);
    gb_u32(b, v);
}
static inline void gb_kv_f32(mcp_buf *b, const char *key, float v)
{
    gb_str(b, key);
    gb_u32(b, MCP_GGUF_FLOAT32);
    mcp_buf_append(b, &v, 4);
}
static inline void gb_kv_bool(mcp_buf *b, const char *key, int v)
{
    uint8_t x = (uint8_t)(v != 0);
    gb_str(b, key);
    gb_u32(b, MCP_GGUF_BOOL);
    mcp_buf_append(b, &x, 1);
}
static inline void gb_kv_str(mcp_buf *b, const char *key, const char *v)
{
    gb_str(b, key);
    gb_u32(b, MCP_GGUF_STRING);
    gb_str(b, v);
}
static inline void gb_kv_strs(mcp_buf *b, const char *key, const char *const *v, uint64_t n)
{
    gb_str(b, key);
    gb_u32(b, MCP_GGUF_ARRAY);
    gb_u32(b, MCP_GGUF_STRING);
    gb_u64(b, n);
    for (uint64_t i = 0; i < n; i++) gb_str(b, v[i]);
}
static inline void gb_kv_i32s(mcp_buf *b, const char *key, const int32_t *v, uint64_t n)
{
    gb_str(b, key);
    gb_u32(b, MCP_GGUF_ARRAY);
    gb_u32(b, MCP_GGUF_INT32);
    gb_u64(b, n);
    mcp_buf_append(b, v, n * 4);
}
static inline void gb_kv_f32s(mcp_buf *b, const char *key, const float *v, uint64_t n)
{
    gb_str(b, key);
    gb_u32(b, MCP_GGUF_ARRAY);
    gb_u32(b, MCP_GGUF_FLOAT32);
    gb_u64(b, n);
    mcp_buf_append(b, v, n * 4);
}
/* A tensor info: ne[0] innermost, n_dims of them. */
static inline void gb_tensor(mcp_buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t offset)
{
    gb_str(b, name);
    gb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) gb_u64(b, ne[d]);
    gb_u32(b, type);
    gb_u64(b, offset);
}
/* Zero bytes up to a multiple of `align`. */
static inline void gb_pad(mcp_buf *b, size_t align)
{
    static const uint8_t zero[64] = {0};
    while (b->len % align) mcp_buf_append(b, zero, 1);
}

#endif
