/*
 * Pieces every protocol codec shares: OIP datatype names, JSON parsing with
 * byte-offset errors, JSON scalars <-> tensor elements, the binary tensor
 * layout, and number formatting that round-trips exactly.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/codec_util.h"

/* Binary tensor data is little-endian on the wire and is copied as-is. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the binary tensor codec assumes a little-endian host"
#endif

/* ---- datatypes ---- */

const char *mcp_oip_datatype(mcp_dtype d)
{
    return mcp_dtype_oip_name(d);
}

mcp_dtype mcp_oip_dtype(const char *datatype)
{
    mcp_dtype d = mcp_dtype_from_name(datatype);
    return mcp_dtype_oip_name(d) && strcmp(mcp_dtype_oip_name(d), datatype) == 0 ? d : MCP_DTYPE_UNDEFINED;
}

static const char *dtype_text(mcp_dtype d)
{
    const char *n = mcp_oip_datatype(d);
    return n ? n : mcp_dtype_name(d);
}

/* ---- errors ---- */

void mcp_codec_error(const char *message, mcp_buf *out)
{
    mcp_buf_puts(out, "{\"error\":");
    mcp__codec_put_string(out, message && *message ? message : "unknown error");
    mcp_buf_puts(out, "}");
}

const char *mcp__codec_ctx(char *ctx, size_t cap, const char *kind, const char *name)
{
    snprintf(ctx, cap, "%s '%.100s'", kind, name ? name : "");
    return ctx;
}

const char *mcp__codec_model_name(const mcp_model_version *m)
{
    return m && m->name ? m->name : "(unnamed)";
}

int mcp__codec_find_input(const mcp_model_version *m, const char *name)
{
    for (int i = 0; m && i < m->n_inputs; i++)
        if (m->inputs[i].name && strcmp(m->inputs[i].name, name) == 0) return i;
    return -1;
}

int mcp__codec_find_output(const mcp_model_version *m, const char *name)
{
    for (int i = 0; m && i < m->n_outputs; i++)
        if (m->outputs[i].name && strcmp(m->outputs[i].name, name) == 0) return i;
    return -1;
}

/* ---- parsing ---- */

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

mcp_status mcp__codec_parse_object(const uint8_t *body, size_t len, json_t **out, mcp_err *err)
{
    *out = NULL;
    if (len == 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the request body is empty; expected a JSON object");
    json_error_t je;
    /* Duplicate keys are rejected: which of two "inputs" would we honour? */
    json_t *j = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        /* jansson's position counts the bytes it consumed, so the byte it
         * stopped at is position - 1 (matching its 1-based column); running
         * out of input is reported at the end. */
        size_t off = je.position > 0 ? (size_t)je.position - 1 : 0;
        if (strstr(je.text, "near end of file") || strstr(je.text, "premature end of input") || off > len) off = len;
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "malformed JSON at byte offset %zu (line %d, column %d): %s", off, je.line,
                           je.column, je.text);
    }
    if (!json_is_object(j)) {
        mcp_status s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "request body must be a JSON object, got %s",
                                   json_kind(j));
        json_decref(j);
        return s;
    }
    *out = j;
    return MCP_STATUS_OK;
}

bool mcp__codec_numel(int rank, const int64_t *dims, int64_t *numel)
{
    /* Zero-sized dims are skipped in the overflow check rather than ending
     * it, so no shape whose other dims overflow ever passes. */
    int64_t n = 1;
    bool zero = false;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return false;
        if (dims[i] == 0)
            zero = true;
        else if (__builtin_mul_overflow(n, dims[i], &n))
            return false;
    }
    *numel = zero ? 0 : n;
    return true;
}

mcp_status mcp__codec_get_int(const json_t *v, const char *what, bool non_negative, int64_t *out, mcp_err *err)
{
    /* A real with an integral value (1.0) is accepted: some clients write
     * every number as a double. */
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) >= -9223372036854775808.0 &&
               json_real_value(v) < 9223372036854775808.0 && json_real_value(v) == trunc(json_real_value(v))) {
        *out = (int64_t)json_real_value(v);
    } else {
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s must be an integer", what);
    }
    if (non_negative && *out < 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s must not be negative (got %lld)", what,
                           (long long)*out);
    return MCP_STATUS_OK;
}

mcp_status mcp__codec_get_shape(const json_t *shape, const char *ctx, int *rank, int64_t *dims, int64_t *numel,
                               mcp_err *err)
{
    if (!shape) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: missing field 'shape'", ctx);
    if (!json_is_array(shape))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: 'shape' must be an array of integers", ctx);
    size_t n = json_array_size(shape);
    if (n > MCP_MAX_RANK)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: shape has %zu dimensions, at most %d are supported",
                           ctx, n, MCP_MAX_RANK);
    for (size_t k = 0; k < n; k++) {
        char what[MCP__CODEC_CTX_CAP + 32];
        snprintf(what, sizeof what, "%s: shape[%zu]", ctx, k);
        mcp_status s = mcp__codec_get_int(json_array_get(shape, k), what, true, &dims[k], err);
        if (s) return s;
    }
    *rank = (int)n;
    if (!mcp__codec_numel(*rank, dims, numel)) {
        char sh[256];
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: shape %s has too many elements", ctx,
                           mcp_shape_str(*rank, dims, sh, sizeof sh));
    }
    return MCP_STATUS_OK;
}

static mcp_status count_rec(const json_t *v, int depth, int max_depth, const char *ctx, int64_t *count,
                            mcp_err *err)
{
    if (json_is_array(v)) {
        if (depth >= max_depth)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "%s: data is nested %d levels deep, more than its shape's %d dimensions", ctx,
                               depth + 1, max_depth);
        size_t n = json_array_size(v);
        for (size_t i = 0; i < n; i++) {
            mcp_status s = count_rec(json_array_get(v, i), depth + 1, max_depth, ctx, count, err);
            if (s) return s;
        }
        return MCP_STATUS_OK;
    }
    if (json_is_object(v) || json_is_null(v))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: element %lld is %s, expected a value", ctx,
                           (long long)*count, json_kind(v));
    (*count)++;
    return MCP_STATUS_OK;
}

mcp_status mcp__codec_count_leaves(const json_t *v, int max_depth, bool allow_scalar, const char *ctx,
                                   int64_t *count, mcp_err *err)
{
    *count = 0;
    if (!json_is_array(v) && !allow_scalar)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: 'data' must be an array, got %s", ctx,
                           json_kind(v));
    return count_rec(v, 0, max_depth, ctx, count, err);
}

mcp_status mcp__codec_alloc_data(mcp_pool *pool, mcp_dtype dtype, int64_t numel, const char *ctx, void **out,
                                 mcp_err *err)
{
    size_t es = dtype == MCP_DTYPE_STRING ? sizeof(char *) : (size_t)mcp_dtype_size(dtype);
    size_t bytes;
    if (es == 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: datatype %s cannot be carried", ctx,
                           dtype_text(dtype));
    if (numel < 0 || !mcp_mul_overflow_size((size_t)numel, es, &bytes))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: %lld elements are too many", ctx,
                           (long long)numel);
    *out = mcp_pool_alloc(pool, bytes ? bytes : 1);
    if (!*out)
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "%s: out of memory for %zu bytes of data", ctx, bytes);
    return MCP_STATUS_OK;
}

/* Integer ranges per dtype; UINT64 is capped by what JSON integers reach. */
static bool int_range(mcp_dtype d, int64_t *lo, int64_t *hi)
{
    switch (d) {
    case MCP_DTYPE_INT8: *lo = INT8_MIN, *hi = INT8_MAX; return true;
    case MCP_DTYPE_INT16: *lo = INT16_MIN, *hi = INT16_MAX; return true;
    case MCP_DTYPE_INT32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    case MCP_DTYPE_INT64: *lo = INT64_MIN, *hi = INT64_MAX; return true;
    case MCP_DTYPE_UINT8: *lo = 0, *hi = UINT8_MAX; return true;
    case MCP_DTYPE_UINT16: *lo = 0, *hi = UINT16_MAX; return true;
    case MCP_DTYPE_UINT32: *lo = 0, *hi = UINT32_MAX; return true;
    case MCP_DTYPE_UINT64: *lo = 0, *hi = INT64_MAX; return true;
    default: return false;
    }
}

static void store_int(mcp_dtype d, void *data, int64_t i, int64_t v)
{
    switch (d) {
    case MCP_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
    case MCP_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
    case MCP_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
    case MCP_DTYPE_INT64: ((int64_t *)data)[i] = v; break;
    case MCP_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
    case MCP_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)v; break;
    case MCP_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)v; break;
    case MCP_DTYPE_UINT64: ((uint64_t *)data)[i] = (uint64_t)v; break;
    default: break;
    }
}

typedef struct fill_state {
    mcp_pool *pool;
    mcp_dtype dtype;
    void *data;
    int64_t i;
    int flags;
    const char *ctx;
    mcp_err *err;
} fill_state;

static mcp_status bad_elem(fill_state *st, const json_t *v, const char *expected)
{
    return mcp_err_set(st->err, MCP_STATUS_INVALID_ARGUMENT, "%s: element %lld is %s, expected %s (%s)", st->ctx,
                       (long long)st->i, json_kind(v), expected, dtype_text(st->dtype));
}

static mcp_status out_of_range(fill_state *st, const json_t *v)
{
    if (json_is_integer(v))
        return mcp_err_set(st->err, MCP_STATUS_INVALID_ARGUMENT, "%s: element %lld (%lld) is out of range for %s",
                           st->ctx, (long long)st->i, (long long)json_integer_value(v), dtype_text(st->dtype));
    char num[48];
    mcp__codec_format_f64(json_real_value(v), num, sizeof num);
    return mcp_err_set(st->err, MCP_STATUS_INVALID_ARGUMENT, "%s: element %lld (%s) is out of range for %s", st->ctx,
                       (long long)st->i, num, dtype_text(st->dtype));
}

static mcp_status put_scalar(fill_state *st, const json_t *v)
{
    mcp_dtype d = st->dtype;
    int64_t i = st->i;
    if (d == MCP_DTYPE_STRING) {
        if (!json_is_string(v)) return bad_elem(st, v, "a string");
        /* jansson refuses \u0000 unless asked, so the copy holds no NUL. */
        char *s = mcp_pool_strndup(st->pool, json_string_value(v), json_string_length(v));
        if (!s) return mcp_err_set(st->err, MCP_STATUS_OUT_OF_MEMORY, "%s: out of memory", st->ctx);
        ((char **)st->data)[i] = s;
        return MCP_STATUS_OK;
    }
    if (d == MCP_DTYPE_BOOL) {
        if (json_is_boolean(v)) {
            ((uint8_t *)st->data)[i] = json_is_true(v) ? 1 : 0;
            return MCP_STATUS_OK;
        }
        if ((st->flags & MCP__CODEC_BOOL_FROM_NUMBER) && json_is_integer(v) &&
            (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
            ((uint8_t *)st->data)[i] = (uint8_t)json_integer_value(v);
            return MCP_STATUS_OK;
        }
        return bad_elem(st, v, (st->flags & MCP__CODEC_BOOL_FROM_NUMBER) ? "true, false, 0 or 1" : "true or false");
    }
    if (!json_is_number(v)) return bad_elem(st, v, "a number");
    int64_t lo, hi;
    if (int_range(d, &lo, &hi)) {
        int64_t iv;
        if (json_is_integer(v)) {
            iv = json_integer_value(v);
        } else {
            double x = json_real_value(v);
            if (x != trunc(x)) {
                char num[48];
                mcp__codec_format_f64(x, num, sizeof num);
                return mcp_err_set(st->err, MCP_STATUS_INVALID_ARGUMENT, "%s: element %lld (%s) is not an integer (%s)",
                                   st->ctx, (long long)i, num, dtype_text(d));
            }
            /* 2^63 is exact in double; everything below it converts. */
            if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) return out_of_range(st, v);
            iv = (int64_t)x;
        }
        if (iv < lo || iv > hi) return out_of_range(st, v);
        store_int(d, st->data, i, iv);
        return MCP_STATUS_OK;
    }
    double x = json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
    /* Limits are the midpoints above each format's largest finite value:
     * anything at or past them would round to infinity. */
    switch (d) {
    case MCP_DTYPE_DOUBLE: ((double *)st->data)[i] = x; return MCP_STATUS_OK;
    case MCP_DTYPE_FLOAT:
        if (fabs(x) >= 0x1.ffffffp+127) return out_of_range(st, v);
        ((float *)st->data)[i] = (float)x;
        return MCP_STATUS_OK;
    case MCP_DTYPE_FLOAT16:
        if (fabs(x) >= 65520.0) return out_of_range(st, v);
        ((uint16_t *)st->data)[i] = mcp_f32_to_f16((float)x);
        return MCP_STATUS_OK;
    case MCP_DTYPE_BFLOAT16:
        if (fabs(x) >= 0x1.ffp+127) return out_of_range(st, v);
        ((uint16_t *)st->data)[i] = mcp_f32_to_bf16((float)x);
        return MCP_STATUS_OK;
    default:
        return mcp_err_set(st->err, MCP_STATUS_INVALID_ARGUMENT, "%s: datatype %s cannot be carried in JSON",
                           st->ctx, dtype_text(d));
    }
}

static mcp_status fill_rec(fill_state *st, const json_t *v)
{
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        for (size_t k = 0; k < n; k++) {
            mcp_status s = fill_rec(st, json_array_get(v, k));
            if (s) return s;
        }
        return MCP_STATUS_OK;
    }
    mcp_status s = put_scalar(st, v);
    st->i++;
    return s;
}

mcp_status mcp__codec_fill(mcp_pool *pool, mcp_dtype dtype, void *data, int64_t first, const json_t *v, int flags,
                           const char *ctx, mcp_err *err)
{
    fill_state st = {pool, dtype, data, first, flags, ctx, err};
    return fill_rec(&st, v);
}

static mcp_status check_rect(const json_t *v, int level, int rank, const int64_t *dims, const char *ctx,
                             mcp_err *err)
{
    if (level == rank) {
        if (json_is_array(v))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "%s: ragged data: a list appears at depth %d where a value was expected", ctx, level);
        if (json_is_object(v) || json_is_null(v))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: an element is %s, expected a value", ctx,
                               json_kind(v));
        return MCP_STATUS_OK;
    }
    if (!json_is_array(v))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "%s: ragged data: %s appears at depth %d where a list of %lld was expected", ctx,
                           json_kind(v), level, (long long)dims[level]);
    size_t n = json_array_size(v);
    if ((int64_t)n != dims[level])
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "%s: ragged data: a list at depth %d has %zu elements, expected %lld", ctx, level, n,
                           (long long)dims[level]);
    for (size_t k = 0; k < n; k++) {
        mcp_status s = check_rect(json_array_get(v, k), level + 1, rank, dims, ctx, err);
        if (s) return s;
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__codec_check_layout(const json_t *v, int rank, const int64_t *dims, const char *ctx, mcp_err *err)
{
    bool nested = false;
    for (size_t k = 0; json_is_array(v) && k < json_array_size(v) && !nested; k++)
        nested = json_is_array(json_array_get(v, k));
    return nested ? check_rect(v, 0, rank, dims, ctx, err) : MCP_STATUS_OK;
}

mcp_status mcp__codec_infer_shape(const json_t *v, const char *ctx, int *rank, int64_t *dims, mcp_err *err)
{
    int r = 0;
    const json_t *c = v;
    while (json_is_array(c)) {
        if (r == MCP_MAX_RANK)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: data is nested more than %d levels deep",
                               ctx, MCP_MAX_RANK);
        size_t n = json_array_size(c);
        dims[r++] = (int64_t)n;
        if (n == 0) break;
        c = json_array_get(c, 0);
    }
    *rank = r;
    return check_rect(v, 0, r, dims, ctx, err);
}

/* ---- binary tensor data ---- */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t mcp__codec_wire_size(mcp_dtype dtype)
{
    if (dtype == MCP_DTYPE_STRING || !mcp_oip_datatype(dtype)) return 0;
    return (size_t)mcp_dtype_size(dtype);
}

mcp_status mcp__codec_from_binary(mcp_pool *pool, mcp_dtype dtype, int64_t numel, const uint8_t *p, size_t n,
                                  const char *name, void **out, mcp_err *err)
{
    char ctx[MCP__CODEC_CTX_CAP];
    mcp__codec_ctx(ctx, sizeof ctx, "input", name);
    if (dtype == MCP_DTYPE_STRING) {
        /* First pass checks the framing and counts; nothing is allocated
         * until the count matches the shape. */
        size_t off = 0;
        int64_t count = 0;
        while (off < n) {
            if (n - off < 4)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                   "binary data for %s: BYTES element %lld is cut short (%zu bytes left, its 4-byte "
                                   "length needs 4)",
                                   ctx, (long long)count, n - off);
            uint32_t l = le32(p + off);
            off += 4;
            if (l > n - off)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                   "binary data for %s: BYTES element %lld claims %u bytes but only %zu remain", ctx,
                                   (long long)count, l, n - off);
            if (memchr(p + off, 0, l))
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                   "binary data for %s: BYTES element %lld contains a NUL byte, which string "
                                   "tensors cannot hold",
                                   ctx, (long long)count);
            off += l;
            count++;
        }
        if (count != numel)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "binary data for %s holds %lld BYTES elements, expected %lld", ctx, (long long)count,
                               (long long)numel);
        mcp_status s = mcp__codec_alloc_data(pool, dtype, numel, ctx, out, err);
        if (s) return s;
        char **strs = *out;
        off = 0;
        for (int64_t k = 0; k < numel; k++) {
            uint32_t l = le32(p + off);
            strs[k] = mcp_pool_strndup(pool, (const char *)p + off + 4, l);
            if (!strs[k]) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "%s: out of memory", ctx);
            off += 4 + (size_t)l;
        }
        return MCP_STATUS_OK;
    }
    size_t es = mcp__codec_wire_size(dtype), expect;
    if (es == 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: datatype %s cannot be carried", ctx,
                           dtype_text(dtype));
    if (numel < 0 || !mcp_mul_overflow_size((size_t)numel, es, &expect))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "binary data for %s is %zu bytes, expected more than fits",
                           ctx, n);
    if (n != expect)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "binary data for %s is %zu bytes, expected %zu", ctx, n,
                           expect);
    mcp_status s = mcp__codec_alloc_data(pool, dtype, numel, ctx, out, err);
    if (s) return s;
    if (n) memcpy(*out, p, n);
    if (dtype == MCP_DTYPE_BOOL) {
        uint8_t *b = *out;
        for (size_t k = 0; k < n; k++) b[k] = b[k] != 0;
    }
    return MCP_STATUS_OK;
}

size_t mcp__codec_binary_size(const mcp_tensor *t)
{
    int64_t numel = mcp_tensor_numel(t);
    if (t->dtype == MCP_DTYPE_STRING) {
        size_t total = 0;
        char *const *s = t->data;
        for (int64_t k = 0; k < numel; k++) total += 4 + (s[k] ? strlen(s[k]) : 0);
        return total;
    }
    return (size_t)numel * (size_t)mcp_dtype_size(t->dtype);
}

void mcp__codec_put_binary(mcp_buf *b, const mcp_tensor *t)
{
    int64_t numel = mcp_tensor_numel(t);
    if (t->dtype == MCP_DTYPE_STRING) {
        char *const *s = t->data;
        for (int64_t k = 0; k < numel; k++) {
            size_t l = s[k] ? strlen(s[k]) : 0;
            uint8_t h[4] = {(uint8_t)l, (uint8_t)(l >> 8), (uint8_t)(l >> 16), (uint8_t)(l >> 24)};
            mcp_buf_append(b, h, 4);
            mcp_buf_append(b, s[k], l);
        }
        return;
    }
    size_t n = (size_t)numel * (size_t)mcp_dtype_size(t->dtype);
    if (n) mcp_buf_append(b, t->data, n);
}

/* ---- JSON output ---- */

/* Length of the valid UTF-8 sequence starting at p, or 0. */
static int utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c >= 0xC2 && c <= 0xDF) return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}

void mcp__codec_put_string(mcp_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(s ? s : ""), *run = p;
    mcp_buf_append(b, "\"", 1);
    while (*p) {
        unsigned c = *p;
        const char *esc = NULL;
        char tmp[8];
        int step = 1;
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c < 0x20) {
            memcpy(tmp, "\\u00", 4);
            tmp[4] = hex[c >> 4];
            tmp[5] = hex[c & 15];
            tmp[6] = 0;
            esc = tmp;
        } else if (c >= 0x80) {
            /* A NUL terminator fails the continuation test, so this never
             * reads past the string. */
            step = utf8_len(p);
            if (!step) {
                esc = "\\ufffd";
                step = 1;
            }
        }
        if (esc) {
            mcp_buf_append(b, run, (size_t)(p - run));
            mcp_buf_puts(b, esc);
            run = p + step;
        }
        p += step;
    }
    mcp_buf_append(b, run, (size_t)(p - run));
    mcp_buf_append(b, "\"", 1);
}

static int fmt_u64(uint64_t v, char *out)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int k = 0; k < n; k++) out[k] = tmp[n - 1 - k];
    return n;
}

static int fmt_i64(int64_t v, char *out)
{
    if (v < 0) {
        out[0] = '-';
        return 1 + fmt_u64((uint64_t)0 - (uint64_t)v, out + 1);
    }
    return fmt_u64((uint64_t)v, out);
}

/* Writes sign, the significant digits dig[0..nd) and decimal exponent e
 * (value = d.ddd x 10^e) the way a person reads numbers: plain between
 * 1e-5 and 1e16, scientific outside; always with a '.' or an 'e' so the
 * text reads back as a float. */
static int fmt_decimal(bool neg, const char *dig, int nd, int e, char *out)
{
    int n = 0;
    if (neg) out[n++] = '-';
    if (e >= -5 && e < 16) {
        if (e >= 0) {
            for (int k = 0; k <= e; k++) out[n++] = k < nd ? dig[k] : '0';
            out[n++] = '.';
            if (nd > e + 1)
                for (int k = e + 1; k < nd; k++) out[n++] = dig[k];
            else
                out[n++] = '0';
        } else {
            out[n++] = '0';
            out[n++] = '.';
            for (int k = 0; k < -e - 1; k++) out[n++] = '0';
            for (int k = 0; k < nd; k++) out[n++] = dig[k];
        }
    } else {
        out[n++] = dig[0];
        if (nd > 1) {
            out[n++] = '.';
            for (int k = 1; k < nd; k++) out[n++] = dig[k];
        }
        out[n++] = 'e';
        out[n++] = e < 0 ? '-' : '+';
        int ae = e < 0 ? -e : e;
        if (ae < 10) out[n++] = '0';
        n += fmt_u64((uint64_t)ae, out + n);
    }
    out[n] = '\0';
    return n;
}

/* Powers of ten 1e-64 .. 1e64 as the compiler rounds them (pow() costs
 * ~50 ns a call on the output path). */
static const double pow10_table[] = {
    1e-64, 1e-63, 1e-62, 1e-61, 1e-60, 1e-59, 1e-58, 1e-57, 1e-56, 1e-55, 1e-54, 1e-53, 1e-52, 1e-51, 1e-50,
    1e-49, 1e-48, 1e-47, 1e-46, 1e-45, 1e-44, 1e-43, 1e-42, 1e-41, 1e-40, 1e-39, 1e-38, 1e-37, 1e-36, 1e-35,
    1e-34, 1e-33, 1e-32, 1e-31, 1e-30, 1e-29, 1e-28, 1e-27, 1e-26, 1e-25, 1e-24, 1e-23, 1e-22, 1e-21, 1e-20,
    1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4,
    1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31, 1e32, 1e33,
    1e34, 1e35, 1e36, 1e37, 1e38, 1e39, 1e40, 1e41, 1e42, 1e43, 1e44, 1e45, 1e46, 1e47, 1e48, 1e49, 1e50, 1e51,
    1e52, 1e53, 1e54, 1e55, 1e56, 1e57, 1e58, 1e59, 1e60, 1e61, 1e62, 1e63, 1e64,
};

static double pow10i(int k)
{
    return k >= -64 && k <= 64 ? pow10_table[k + 64] : pow(10.0, k);
}

/* Writes "[-]DIGITSe<exp>" for a candidate check. */
static int fmt_candidate(bool neg, const char *dig, int len, int exp, char *out)
{
    int n = 0;
    if (neg) out[n++] = '-';
    memcpy(out + n, dig, (size_t)len);
    n += len;
    out[n++] = 'e';
    n += fmt_i64(exp, out + n);
    out[n] = '\0';
    return n;
}

/*
 * Shortest round-trip text. `mant` holds the value's first `prec`
 * significant digits (value ~ mant x 10^(e10 - prec + 1), within `slack`
 * units of the last digit), enough to round-trip on their own. Shorter
 * roundings of those digits are tried, shortest first, both neighbours at
 * each length. A candidate whose distance from the value is surely more
 * than half the gap to the next float is skipped, one surely less is
 * taken, and only the ones in between are read back with strtod, the way
 * JSON readers read numbers (a double, then narrowed for float32).
 * Reading back costs ~100 ns a call, so the bounds keep it rare.
 */
static int fmt_shortest_digits(double v, bool single, uint64_t mant, int e10, int prec, double slack, char *out)
{
    bool neg = v < 0;
    double av = fabs(v), lo_gap, hi_gap;
    if (single) {
        float f = (float)av;
        hi_gap = ((double)nextafterf(f, INFINITY) - av) / 2;
        lo_gap = (av - (double)nextafterf(f, 0)) / 2;
    } else {
        hi_gap = (nextafter(av, INFINITY) - av) / 2;
        lo_gap = (av - nextafter(av, 0)) / 2;
    }
    double gap_min = fmin(hi_gap, lo_gap) * (1 - 1e-9), gap_max = fmax(hi_gap, lo_gap) * (1 + 1e-9);
    double unit = pow10i(e10 - (prec - 1)); /* value of the last digit of mant */
    bool bounds = isfinite(unit) && unit > 0 && isfinite(gap_max) && gap_min > 0;

    uint64_t div = 1;
    for (int k = 1; k < prec; k++) div *= 10;
    char dig[24], cand[48];
    for (int nd = 1; nd < prec; nd++, div /= 10) {
        uint64_t q = mant / div, rem = mant % div;
        if (rem == 0) break; /* the full digits end here anyway */
        bool up_first = rem * 2 >= div;
        for (int side = 0; side < 2; side++) {
            bool up = side == 0 ? up_first : !up_first;
            double dist = (double)(up ? div - rem : rem);
            if (bounds && (dist - slack) * unit > gap_max) continue;
            uint64_t cq = up ? q + 1 : q;
            int e = e10, len = fmt_u64(cq, dig);
            if (len > nd) { /* 9.99 rounded up to 10.0 */
                len = nd;
                e++;
            }
            bool ok = bounds && (dist + slack) * unit < gap_min;
            if (!ok) {
                fmt_candidate(neg, dig, len, e - (len - 1), cand);
                double back = fabs(strtod(cand, NULL));
                ok = single ? back < 0x1.ffffffp+127 && (float)back == (float)av : back == av;
            }
            if (ok) {
                while (len > 1 && dig[len - 1] == '0') len--;
                return fmt_decimal(neg, dig, len, e, out);
            }
        }
    }
    int len = fmt_u64(mant, dig);
    while (len > 1 && dig[len - 1] == '0') len--;
    return fmt_decimal(neg, dig, len, e10, out);
}

/* float32: nine significant digits always round-trip, and they need not be
 * exact: within a unit of the ninth digit the value is still closer to f
 * than to either neighbour (relative error 1e-8 against a half-gap of at
 * least 3e-8). So they come from double arithmetic instead of printf. */
static int fmt_f32(float f, char *out)
{
    double av = fabs((double)f);
    int e2;
    frexp(av, &e2); /* av in [2^(e2-1), 2^e2): log10 within one of this */
    int e10 = (int)floor((e2 - 1) * 0.30102999566398120);
    uint64_t mant = 0;
    for (int tries = 0; tries < 3; tries++) {
        double scaled = av * pow10i(8 - e10);
        mant = (uint64_t)(scaled + 0.5);
        if (mant >= 1000000000u)
            e10++;
        else if (mant < 100000000u)
            e10--;
        else
            break;
    }
    if (mant < 100000000u || mant >= 1000000000u) {
        /* The estimate was off by more than one: take printf's digits. */
        char buf[48];
        snprintf(buf, sizeof buf, "%.8e", av);
        mant = 0;
        const char *p = buf;
        for (; *p && *p != 'e'; p++)
            if (*p >= '0' && *p <= '9') mant = mant * 10 + (uint64_t)(*p - '0');
        e10 = *p == 'e' ? atoi(p + 1) : 0;
    }
    return fmt_shortest_digits((double)f, true, mant, e10, 9, 1.01, out);
}

/* double: seventeen digits round-trip only when exact, so printf makes them. */
static int fmt_f64(double d, char *out)
{
    char buf[48];
    snprintf(buf, sizeof buf, "%.16e", fabs(d));
    uint64_t mant = 0;
    const char *p = buf;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') mant = mant * 10 + (uint64_t)(*p - '0');
    int e10 = *p == 'e' ? atoi(p + 1) : 0;
    return fmt_shortest_digits(d, false, mant, e10, 17, 0.51, out);
}

int mcp__codec_format_f32(float f, char *out, size_t cap)
{
    char tmp[48];
    int n = f == 0 ? fmt_decimal(signbit(f), "0", 1, 0, tmp) : fmt_f32(f, tmp);
    snprintf(out, cap, "%s", tmp);
    return n;
}

int mcp__codec_format_f64(double d, char *out, size_t cap)
{
    char tmp[48];
    int n = d == 0 ? fmt_decimal(signbit(d), "0", 1, 0, tmp) : fmt_f64(d, tmp);
    snprintf(out, cap, "%s", tmp);
    return n;
}

static void put_f64(mcp_buf *b, double v, bool single)
{
    char tmp[48];
    if (!isfinite(v)) {
        /* JSON has no NaN or infinity; null is what JSON.stringify writes
         * and what numpy reads back as NaN. */
        mcp_buf_append(b, "null", 4);
        return;
    }
    if (v == 0) {
        mcp_buf_puts(b, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    int n = single ? fmt_f32((float)v, tmp) : fmt_f64(v, tmp);
    mcp_buf_append(b, tmp, (size_t)n);
}

void mcp__codec_put_elem(mcp_buf *b, mcp_dtype dtype, const void *data, int64_t i)
{
    char tmp[32];
    int n;
    switch (dtype) {
    case MCP_DTYPE_FLOAT: put_f64(b, ((const float *)data)[i], true); return;
    case MCP_DTYPE_FLOAT16: put_f64(b, mcp_f16_to_f32(((const uint16_t *)data)[i]), true); return;
    case MCP_DTYPE_BFLOAT16: put_f64(b, mcp_bf16_to_f32(((const uint16_t *)data)[i]), true); return;
    case MCP_DTYPE_DOUBLE: put_f64(b, ((const double *)data)[i], false); return;
    case MCP_DTYPE_INT8: n = fmt_i64(((const int8_t *)data)[i], tmp); break;
    case MCP_DTYPE_INT16: n = fmt_i64(((const int16_t *)data)[i], tmp); break;
    case MCP_DTYPE_INT32: n = fmt_i64(((const int32_t *)data)[i], tmp); break;
    case MCP_DTYPE_INT64: n = fmt_i64(((const int64_t *)data)[i], tmp); break;
    case MCP_DTYPE_UINT8: n = fmt_u64(((const uint8_t *)data)[i], tmp); break;
    case MCP_DTYPE_UINT16: n = fmt_u64(((const uint16_t *)data)[i], tmp); break;
    case MCP_DTYPE_UINT32: n = fmt_u64(((const uint32_t *)data)[i], tmp); break;
    case MCP_DTYPE_UINT64: n = fmt_u64(((const uint64_t *)data)[i], tmp); break;
    case MCP_DTYPE_BOOL: mcp_buf_puts(b, ((const uint8_t *)data)[i] ? "true" : "false"); return;
    case MCP_DTYPE_STRING: mcp__codec_put_string(b, ((char *const *)data)[i]); return;
    default: mcp_buf_append(b, "null", 4); return;
    }
    mcp_buf_append(b, tmp, (size_t)n);
}

void mcp__codec_put_nested(mcp_buf *b, mcp_dtype dtype, const void *data, int64_t first, int rank,
                           const int64_t *dims)
{
    if (rank == 0) {
        mcp__codec_put_elem(b, dtype, data, first);
        return;
    }
    int64_t inner = 1;
    for (int k = 1; k < rank; k++) inner *= dims[k];
    mcp_buf_append(b, "[", 1);
    for (int64_t j = 0; j < dims[0]; j++) {
        if (j) mcp_buf_append(b, ",", 1);
        mcp__codec_put_nested(b, dtype, data, first + j * inner, rank - 1, dims + 1);
    }
    mcp_buf_append(b, "]", 1);
}

void mcp__codec_put_shape(mcp_buf *b, int rank, const int64_t *dims)
{
    char tmp[32];
    mcp_buf_append(b, "[", 1);
    for (int k = 0; k < rank; k++) {
        if (k) mcp_buf_append(b, ",", 1);
        mcp_buf_append(b, tmp, (size_t)fmt_i64(dims[k], tmp));
    }
    mcp_buf_append(b, "]", 1);
}

bool mcp__codec_output_wanted(const mcp_request *r, const mcp_req_tensor *o)
{
    if (r->n_requested == 0 || !r->requested) return true;
    for (int k = 0; k < r->n_requested; k++)
        if (r->requested[k] && o->name && strcmp(r->requested[k], o->name) == 0) return true;
    return false;
}
