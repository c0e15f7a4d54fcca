/*
 * Private helpers shared by the protocol codecs (codec_v2.c, codec_v1.c,
 * codec_simple.c); implemented in codec_common.c. Everything a decoder makes
 * lives in the request's pool; nothing here keeps state between calls.
 */
#ifndef MCP_SERVE_CODEC_UTIL_H
#define MCP_SERVE_CODEC_UTIL_H

#include <jansson.h>

#include "serve/serve.h"

/* Tensors per request / requested outputs per request. Far above any real
 * model; it bounds the quadratic duplicate-name checks. */
#define MCP__CODEC_MAX_TENSORS 4096

/* Room for an error-message prefix naming a tensor, e.g. "input 'x'". */
#define MCP__CODEC_CTX_CAP 160

/*
 * Parses body[0, len) as one JSON value that must be an object. A syntax
 * error becomes INVALID_ARGUMENT with "malformed JSON at byte offset N
 * (line L, column C): <text>", N being the 0-based offset of the byte where
 * the parser stopped (len at end of input). *out is owned by the caller
 * (json_decref).
 */
mcp_status mcp__codec_parse_object(const uint8_t *body, size_t len, json_t **out, mcp_err *err);

/* Formats "input 'NAME'" (name cut to fit) into ctx. Returns ctx. */
const char *mcp__codec_ctx(char *ctx, size_t cap, const char *kind, const char *name);

/* Product of dims with overflow and sign checks: false when a dim is
 * negative or the product does not fit in int64. */
bool mcp__codec_numel(int rank, const int64_t *dims, int64_t *numel);

/* An integer field (an integral real such as 1.0 passes too); `what`
 * names it in the message. */
mcp_status mcp__codec_get_int(const json_t *v, const char *what, bool non_negative, int64_t *out, mcp_err *err);
/* A "shape" array: non-negative integers, at most MCP_MAX_RANK of them,
 * whose element count fits in int64 (checked before anything is
 * allocated). Missing (NULL) is an error. Messages start with ctx. */
mcp_status mcp__codec_get_shape(const json_t *shape, const char *ctx, int *rank, int64_t *dims, int64_t *numel,
                                mcp_err *err);

/* Conversion flags for JSON scalars. */
enum {
    MCP__CODEC_BOOL_FROM_NUMBER = 1, /* BOOL accepts 0 and 1 as well as true/false */
};

/*
 * Counts the scalar leaves of `v` (arrays nested at most max_depth deep; a
 * bare scalar counts as 1 when allow_scalar). Objects and nulls are errors
 * naming ctx. No allocation.
 */
mcp_status mcp__codec_count_leaves(const json_t *v, int max_depth, bool allow_scalar, const char *ctx,
                                   int64_t *count, mcp_err *err);

/*
 * Converts the leaves of `v` (row-major) into data[first, first + count) of
 * dtype; strings (STRING) are copied into pool. Assumes count_leaves has
 * vouched for the count and depth. Element errors name ctx and the flat
 * element index.
 */
mcp_status mcp__codec_fill(mcp_pool *pool, mcp_dtype dtype, void *data, int64_t first, const json_t *v,
                           int flags, const char *ctx, mcp_err *err);

/*
 * Data for a declared shape is either flat (a list of values) or nested
 * exactly as the shape says: a nested list must be rectangular with those
 * dimensions (ragged data is an error naming ctx and the depth).
 */
mcp_status mcp__codec_check_layout(const json_t *v, int rank, const int64_t *dims, const char *ctx, mcp_err *err);

/*
 * Shape of a rectangular nested array: rank = nesting depth, dims = list
 * lengths. A scalar has rank 0. Ragged nesting, objects, nulls and more than
 * MCP_MAX_RANK levels are errors naming ctx.
 */
mcp_status mcp__codec_infer_shape(const json_t *v, const char *ctx, int *rank, int64_t *dims, mcp_err *err);

/* Allocates numel elements of dtype in pool (char * slots for STRING)
 * into *out; OUT_OF_MEMORY / INVALID_ARGUMENT naming ctx when it cannot. */
mcp_status mcp__codec_alloc_data(mcp_pool *pool, mcp_dtype dtype, int64_t numel, const char *ctx, void **out,
                                 mcp_err *err);

/* Element size on the wire: 1 for BOOL, mcp_dtype_size otherwise, 0 for
 * STRING (variable) and for dtypes without an OIP name. */
size_t mcp__codec_wire_size(mcp_dtype dtype);

/*
 * Decodes `n` binary bytes into a freshly pooled tensor payload of numel
 * elements: little-endian fixed-size elements (BOOL normalised to 0/1), or
 * for STRING a sequence of 4-byte little-endian lengths each followed by its
 * bytes. Errors: "binary data for input 'x' is 12 bytes, expected 16", a
 * BYTES element running past the end, NUL bytes inside a BYTES element
 * (string tensors are NUL-terminated). No allocation before the sizes check.
 */
mcp_status mcp__codec_from_binary(mcp_pool *pool, mcp_dtype dtype, int64_t numel, const uint8_t *p, size_t n,
                                  const char *name, void **out, mcp_err *err);

/* Bytes a tensor takes in binary form (STRING: 4 + strlen per element). */
size_t mcp__codec_binary_size(const mcp_tensor *t);
/* Appends the tensor in binary form. */
void mcp__codec_put_binary(mcp_buf *b, const mcp_tensor *t);

/* Appends s as a JSON string; invalid UTF-8 bytes become U+FFFD so the
 * output is always valid JSON. */
void mcp__codec_put_string(mcp_buf *b, const char *s);
/* Appends element i of (dtype, data) as a JSON value. Floats use the
 * shortest text that reads back to the same value; NaN and infinities,
 * which JSON cannot spell, become null. FP16/BF16 print as their float
 * value. */
void mcp__codec_put_elem(mcp_buf *b, mcp_dtype dtype, const void *data, int64_t i);
/* Appends elements [first, first + prod(dims)) as nested arrays of the
 * given dims (rank 0: one bare value). */
void mcp__codec_put_nested(mcp_buf *b, mcp_dtype dtype, const void *data, int64_t first, int rank,
                           const int64_t *dims);
/* Appends "[d0,d1,...]". */
void mcp__codec_put_shape(mcp_buf *b, int rank, const int64_t *dims);

/* Shortest decimal text for a finite float32 that reads back exactly the
 * way JSON readers read it (as a double, then narrowed); the double
 * version likewise. Always has a '.' or an exponent. Returns the length
 * (the text is cut to cap - 1). */
int mcp__codec_format_f32(float f, char *out, size_t cap);
int mcp__codec_format_f64(double d, char *out, size_t cap);

/* Name of the model for messages (never NULL). */
const char *mcp__codec_model_name(const mcp_model_version *m);
/* Index of the model input / output named `name`, or -1. */
int mcp__codec_find_input(const mcp_model_version *m, const char *name);
int mcp__codec_find_output(const mcp_model_version *m, const char *name);

/* Whether an output goes into the answer: the request named it, or named
 * none (then every output does). */
bool mcp__codec_output_wanted(const mcp_request *r, const mcp_req_tensor *o);

#endif
