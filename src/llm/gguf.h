/* GGUF reader: the file format of llama.cpp, Ollama and LM Studio.
 *
 * A file is opened by mapping it read-only (nothing is copied: tensor data
 * and metadata strings point into the mapping) or parsed from a caller's
 * buffer. Every count, length, offset and dimension is checked against the
 * file before it is used; a bad file gives MCP_STATUS_INVALID_MODEL with
 * what was wrong and where (the key, the tensor, the byte offset). */
#ifndef MCP_LLM_GGUF_H
#define MCP_LLM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Metadata value types, as the format numbers them. */
typedef enum mcp_gguf_type {
    MCP_GGUF_UINT8 = 0,
    MCP_GGUF_INT8 = 1,
    MCP_GGUF_UINT16 = 2,
    MCP_GGUF_INT16 = 3,
    MCP_GGUF_UINT32 = 4,
    MCP_GGUF_INT32 = 5,
    MCP_GGUF_FLOAT32 = 6,
    MCP_GGUF_BOOL = 7,
    MCP_GGUF_STRING = 8,
    MCP_GGUF_ARRAY = 9,
    MCP_GGUF_UINT64 = 10,
    MCP_GGUF_INT64 = 11,
    MCP_GGUF_FLOAT64 = 12,
} mcp_gguf_type;

/* Tensor element types (ggml's numbering). The reader knows the block size
 * of every type it names, so it checks every tensor's extent; which types a
 * model may use is the model loader's business. */
#define MCP_GGML_TYPES(X)                 \
    X(F32, 0, 1, 4)                       \
    X(F16, 1, 1, 2)                       \
    X(Q4_0, 2, 32, 18)                    \
    X(Q4_1, 3, 32, 20)                    \
    X(Q5_0, 6, 32, 22)                    \
    X(Q5_1, 7, 32, 24)                    \
    X(Q8_0, 8, 32, 34)                    \
    X(Q8_1, 9, 32, 36)                    \
    X(Q2_K, 10, 256, 84)                  \
    X(Q3_K, 11, 256, 110)                 \
    X(Q4_K, 12, 256, 144)                 \
    X(Q5_K, 13, 256, 176)                 \
    X(Q6_K, 14, 256, 210)                 \
    X(Q8_K, 15, 256, 292)                 \
    X(IQ2_XXS, 16, 256, 66)               \
    X(IQ2_XS, 17, 256, 74)                \
    X(IQ3_XXS, 18, 256, 98)               \
    X(IQ1_S, 19, 256, 50)                 \
    X(IQ4_NL, 20, 32, 18)                 \
    X(IQ3_S, 21, 256, 110)                \
    X(IQ2_S, 22, 256, 82)                 \
    X(IQ4_XS, 23, 256, 136)               \
    X(I8, 24, 1, 1)                       \
    X(I16, 25, 1, 2)                      \
    X(I32, 26, 1, 4)                      \
    X(I64, 27, 1, 8)                      \
    X(F64, 28, 1, 8)                      \
    X(IQ1_M, 29, 256, 56)                 \
    X(BF16, 30, 1, 2)                     \
    X(TQ1_0, 34, 256, 54)                 \
    X(TQ2_0, 35, 256, 66)                 \
    X(MXFP4, 39, 32, 17)

typedef enum mcp_ggml_type {
#define X(name, num, block, bytes) MCP_GGML_##name = num,
    MCP_GGML_TYPES(X)
#undef X
} mcp_ggml_type;

/* The type's name ("Q4_0"), or NULL for a number ggml does not define. */
const char *mcp_ggml_type_name(uint32_t type);
/* Elements per block and bytes per block; false for an unknown type. */
bool mcp_ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);

/* A string inside the file: not NUL-terminated. */
typedef struct mcp_gguf_str {
    const char *ptr;
    uint64_t len;
} mcp_gguf_str;

typedef struct mcp_gguf_kv {
    mcp_gguf_str key;
    mcp_gguf_type type;
    /* Arrays: the element type and count; scalars: n = 1. */
    mcp_gguf_type elem_type;
    uint64_t n;
    /* Scalars and arrays of numbers: the (little-endian) values in the
     * file. Arrays of strings: the first string's length field. */
    const uint8_t *data;
    /* Arrays of strings: each string, indexed at parse time. */
    mcp_gguf_str *strs;
} mcp_gguf_kv;

#define MCP_GGUF_MAX_DIMS 4

typedef struct mcp_gguf_tensor {
    mcp_gguf_str name;
    uint32_t n_dims;
    /* ne[0] is the innermost (contiguous) dimension, as in ggml; dimensions
     * past n_dims are 1. */
    int64_t ne[MCP_GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t offset; /* from the start of the data section */
    uint64_t n_elems;
    uint64_t nbytes;
    const uint8_t *data; /* in the mapping (or the caller's buffer) */
} mcp_gguf_tensor;

typedef struct mcp_gguf {
    uint32_t version; /* 2 or 3 */
    uint64_t n_kv, n_tensors;
    mcp_gguf_kv *kv;
    mcp_gguf_tensor *tensors;
    uint32_t alignment; /* general.alignment, default 32 */
    uint64_t data_offset; /* where the data section starts */
    const uint8_t *base;
    size_t size;
    /* Set when the file is mapped (mcp_gguf_open). */
    void *map;
    size_t map_len;
} mcp_gguf;

/* Maps `path` read-only and parses it; the mapping lives until close. A
 * regular file only (no FIFOs, devices or directories). */
mcp_status mcp_gguf_open(const char *path, mcp_gguf **out, mcp_err *err);
/* Parses a file image in memory; `buf` must outlive the result. */
mcp_status mcp_gguf_parse(const uint8_t *buf, size_t size, mcp_gguf **out, mcp_err *err);
void mcp_gguf_close(mcp_gguf *g);

/* Lookups; NULL when absent. */
const mcp_gguf_kv *mcp_gguf_find(const mcp_gguf *g, const char *key);
const mcp_gguf_tensor *mcp_gguf_tensor_find(const mcp_gguf *g, const char *name);

/* Typed reads of a metadata key: false when the key is absent. A present key
 * of the wrong type (a string where a number belongs, a negative count) is
 * an error that names the key. Integers of any width convert when the value
 * fits. */
mcp_status mcp_gguf_get_u32(const mcp_gguf *g, const char *key, uint32_t *out, bool *found, mcp_err *err);
mcp_status mcp_gguf_get_u64(const mcp_gguf *g, const char *key, uint64_t *out, bool *found, mcp_err *err);
mcp_status mcp_gguf_get_f32(const mcp_gguf *g, const char *key, float *out, bool *found, mcp_err *err);
mcp_status mcp_gguf_get_bool(const mcp_gguf *g, const char *key, bool *out, bool *found, mcp_err *err);
mcp_status mcp_gguf_get_str(const mcp_gguf *g, const char *key, mcp_gguf_str *out, bool *found, mcp_err *err);
/* An array of `elem_type` (strings: use kv->strs); NULL when absent, an
 * error when the key holds something else. */
mcp_status mcp_gguf_get_array(const mcp_gguf *g, const char *key, mcp_gguf_type elem_type, const mcp_gguf_kv **out,
                              mcp_err *err);
/* Element i of a numeric array, as the type it is stored. */
int32_t mcp_gguf_arr_i32(const mcp_gguf_kv *kv, uint64_t i);
float mcp_gguf_arr_f32(const mcp_gguf_kv *kv, uint64_t i);

/* Whether the string equals a C string. */
bool mcp_gguf_str_eq(mcp_gguf_str s, const char *c);

#endif
