/*
 * Reference kernels: Cast and CastLike (elementwise family).
 *
 * Numeric casts follow numpy's astype: floats to integers truncate toward
 * zero (NaN gives 0 and out-of-range values saturate to int64 before
 * wrapping, where numpy is undefined), integers wrap, floats round to nearest
 * even. Casting to bfloat16 truncates the float32 bit pattern, which is what
 * the ONNX test data (onnx 1.12) expects.
 *
 * Casts to and from the narrow types (ONNX 17-26: float8, float8e8m0,
 * float4e2m1, int4/uint4, int2/uint2) follow the spec's own rules
 * (mcp_narrow_from_f64): round to nearest even, saturate (the attribute,
 * for float8), round_mode for float8e8m0, integers clamped.
 *
 * Strings parse as numbers (strtod syntax, so "NaN", "INF", "-inf" work) and
 * numbers print like numpy's str(): the shortest digits that round-trip in
 * the source type, positional for 1e-4 <= |x| < 1e16, scientific otherwise
 * ("1e-05", "1.5e+16").
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ref/elementwise_util.h"
#include "ops/ref/ref.h"

static bool ew_cast_dtype_ok(mcp_dtype dt)
{
    return dt == MCP_DTYPE_STRING || ew_kind_of(dt) != EW_KIND_OTHER;
}

/* float32 to bfloat16 by truncation (NaN stays a quiet NaN). */
static uint16_t ew_f32_to_bf16_trunc(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if (isnan(f)) return (uint16_t)((b >> 16) | 0x0040u);
    return (uint16_t)(b >> 16);
}

/* Does the decimal text s read back as exactly v in type dt? */
static bool ew_roundtrips(const char *s, double v, mcp_dtype dt)
{
    switch (dt) {
    case MCP_DTYPE_FLOAT: return strtof(s, NULL) == (float)v;
    case MCP_DTYPE_FLOAT16: return ew_f64_to_f16(strtod(s, NULL)) == ew_f64_to_f16(v);
    case MCP_DTYPE_BFLOAT16:
        return mcp_f32_to_bf16(strtof(s, NULL)) == mcp_f32_to_bf16((float)v);
    default: return strtod(s, NULL) == v;
    }
}

/* Formats a finite or non-finite float value held in double (exactly
 * representable in dt) like numpy's str(). */
static void ew_format_float(double v, mcp_dtype dt, char *buf, size_t cap)
{
    if (isnan(v)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == 0) {
        snprintf(buf, cap, signbit(v) ? "-0.0" : "0.0");
        return;
    }

    /* Shortest "%.*e" that round-trips: d.ddd...e+XX */
    char sci[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(sci, sizeof sci, "%.*e", p - 1, v);
        if (ew_roundtrips(sci, v, dt)) break;
    }

    /* Split into sign, significant digits and decimal exponent. */
    const char *s = sci;
    bool neg = false;
    if (*s == '-') {
        neg = true;
        s++;
    }
    char digits[32];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && nd < (int)sizeof digits - 1) digits[nd++] = *s;
    int exp10 = (*s == 'e') ? atoi(s + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';

    char out[96];
    size_t o = 0;
    if (neg) out[o++] = '-';
    double av = fabs(v);
    if (av >= 1e-4 && av < 1e16) {
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++) out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            if (nd > exp10 + 1) {
                for (int i = exp10 + 1; i < nd; i++) out[o++] = digits[i];
            } else {
                out[o++] = '0';
            }
        } else {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -exp10 - 1; i++) out[o++] = '0';
            for (int i = 0; i < nd; i++) out[o++] = digits[i];
        }
        out[o] = '\0';
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++) out[o++] = digits[i];
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    size_t len = strlen(out);
    if (len >= cap) len = cap - 1;
    memcpy(buf, out, len);
    buf[len] = '\0';
}

/* Element i of a numeric tensor as text. */
static void ew_format_elem(const mcp_tensor *t, int64_t i, char *buf, size_t cap)
{
    switch (ew_kind_of(t->dtype)) {
    case EW_KIND_FLOAT: ew_format_float(ew_load_f64(t->dtype, t->data, i), t->dtype, buf, cap); break;
    case EW_KIND_INT: snprintf(buf, cap, "%lld", (long long)ew_load_i64(t->dtype, t->data, i)); break;
    default:
        if (t->dtype == MCP_DTYPE_BOOL)
            snprintf(buf, cap, "%s", ew_load_u64(t->dtype, t->data, i) ? "True" : "False");
        else
            snprintf(buf, cap, "%llu", (unsigned long long)ew_load_u64(t->dtype, t->data, i));
        break;
    }
}

/* Parses s into element i of t (numeric dtype). Returns false when s is not a
 * number. */
static bool ew_parse_elem(const char *s, mcp_tensor *t, int64_t i)
{
    char *end = NULL;
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    ew_kind kind = ew_kind_of(t->dtype);
    if (t->dtype == MCP_DTYPE_BOOL) {
        if (strcmp(s, "True") == 0 || strcmp(s, "true") == 0) {
            ew_store_u64(t->dtype, t->data, i, 1);
            return true;
        }
        if (strcmp(s, "False") == 0 || strcmp(s, "false") == 0) {
            ew_store_u64(t->dtype, t->data, i, 0);
            return true;
        }
    }
    if (kind == EW_KIND_INT || kind == EW_KIND_UINT) {
        /* Exact for integers; fall back to a float parse for "1.5", "1e3". */
        errno = 0;
        if (kind == EW_KIND_INT) {
            long long v = strtoll(s, &end, 10);
            if (end != s && errno == 0 && (*end == '\0' || *end == ' ' || *end == '\n')) {
                ew_store_i64(t->dtype, t->data, i, (int64_t)v);
                return true;
            }
        } else if (*s != '-') {
            unsigned long long v = strtoull(s, &end, 10);
            if (end != s && errno == 0 && (*end == '\0' || *end == ' ' || *end == '\n')) {
                ew_store_u64(t->dtype, t->data, i, (uint64_t)v);
                return true;
            }
        }
    }
    double d;
    if (t->dtype == MCP_DTYPE_FLOAT) {
        float f = strtof(s, &end);
        if (end == s) return false;
        ((float *)t->data)[i] = f;
        return true;
    }
    d = strtod(s, &end);
    if (end == s) return false;
    if (t->dtype == MCP_DTYPE_BFLOAT16)
        ((uint16_t *)t->data)[i] = ew_f32_to_bf16_trunc((float)d);
    else
        ew_store_f64(t->dtype, t->data, i, d);
    return true;
}

MCP_MULTIVERSION static void cast_i32_f32_chunk(const int32_t *x, float *y,
                                                                                          int64_t begin, int64_t end)
{
#pragma omp simd
    for (int64_t i = begin; i < end; i++) y[i] = (float)x[i];
}

static void cast_i32_f32(mcp_kernel_ctx *ctx, const int32_t *x, float *y, int64_t n)
{
    int64_t chunk = 16384, nchunks = (n + chunk - 1) / chunk;
    int nt = mcp_kthreads(ctx, n);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t c = 0; c < nchunks; c++) cast_i32_f32_chunk(x, y, c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n);
}

/* How a cast to float8 / float8e8m0 treats values out of range. */
typedef struct ew_cast_opts {
    bool saturate;
    mcp_e8m0_round round;
} ew_cast_opts;

/*
 * Casts where either side is a narrow type. Values travel as double, which
 * holds every value of every source type exactly (int64 beyond 2^53 aside,
 * far outside every narrow range, where clamping gives the same result),
 * so each result is rounded once.
 */
static mcp_status ew_cast_narrow(mcp_kernel_ctx *ctx, const mcp_tensor *x, mcp_tensor *y, ew_cast_opts o)
{
    int64_t n = mcp_tensor_numel(x);
    mcp_dtype from = x->dtype, to = y->dtype;
    ew_kind ks = ew_kind_of(from), kt = ew_kind_of(to);
    bool int_narrow_src = from == MCP_DTYPE_INT4 || from == MCP_DTYPE_UINT4 || from == MCP_DTYPE_INT2 || from == MCP_DTYPE_UINT2;
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (from == MCP_DTYPE_STRING) {
            const char *s = ((char *const *)x->data)[i];
            char *end = NULL;
            v = strtod(s ? s : "", &end);
            if (!s || end == s)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' element %lld (\"%.40s\") is not a number",
                                 (long long)i, s ? s : "");
        } else if (ks == EW_KIND_INT) {
            v = (double)ew_load_i64(from, x->data, i);
        } else if (ks == EW_KIND_UINT) {
            v = (double)ew_load_u64(from, x->data, i);
        } else {
            v = mcp_elem_get_f64(from, x->data, i); /* float kinds and narrow codes, exact */
        }
        if (mcp_dtype_is_narrow(to)) {
            uint8_t code = mcp_narrow_from_f64(to, v, o.saturate, o.round);
            if (mcp_dtype_is_packed(to)) mcp_packed_set(y->data, mcp_dtype_bits(to), i, code);
            else ((uint8_t *)y->data)[i] = code;
        } else if (to == MCP_DTYPE_STRING) {
            char buf[64];
            if (int_narrow_src) snprintf(buf, sizeof buf, "%lld", (long long)v);
            else ew_format_float(v, MCP_DTYPE_DOUBLE, buf, sizeof buf);
            if (mcp_tensor_set_string(y, i, buf, strlen(buf)) != MCP_STATUS_OK)
                return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        } else if (int_narrow_src && kt != EW_KIND_FLOAT) {
            ew_store_i64(to, y->data, i, (int64_t)v);
        } else {
            /* Every narrow value is exact in bfloat16 too, so truncation
             * and rounding agree. */
            ew_store_f64(to, y->data, i, v);
        }
    }
    return MCP_STATUS_OK;
}

static mcp_status ew_cast_to(mcp_kernel_ctx *ctx, const mcp_tensor *x, mcp_dtype to, ew_cast_opts o)
{
    if (mcp_dtype_is_narrow(x->dtype) || mcp_dtype_is_narrow(to)) {
        bool ok_from = x->dtype == MCP_DTYPE_STRING || mcp_dtype_is_narrow(x->dtype) || ew_kind_of(x->dtype) != EW_KIND_OTHER;
        bool ok_to = to == MCP_DTYPE_STRING || mcp_dtype_is_narrow(to) || ew_kind_of(to) != EW_KIND_OTHER;
        if (!ok_from || !ok_to)
            return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "cannot cast %s to %s", mcp_dtype_name(x->dtype), mcp_dtype_name(to));
        mcp_tensor *y = mcp_kout(ctx, 0, to, x->rank, x->dims);
        if (!y) return MCP_STATUS_OUT_OF_MEMORY;
        return ew_cast_narrow(ctx, x, y, o);
    }
    if (!ew_cast_dtype_ok(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'input' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (!ew_cast_dtype_ok(to))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "cannot cast to type %s",
                         mcp_dtype_name(to));
    int64_t n = mcp_tensor_numel(x);
    if (x->dtype == MCP_DTYPE_INT32 && to == MCP_DTYPE_FLOAT) {
        /* int32 accumulators to float (dynamically quantized MatMuls):
         * one rounding, as the general path's, on vector loops. */
        mcp_tensor *y = mcp_kout_uninit(ctx, 0, to, x->rank, x->dims);
        if (!y) return MCP_STATUS_OUT_OF_MEMORY;
        cast_i32_f32(ctx, x->data, y->data, n);
        return MCP_STATUS_OK;
    }
    mcp_tensor *y = mcp_kout(ctx, 0, to, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    ew_kind ks = ew_kind_of(x->dtype);

    if (x->dtype == MCP_DTYPE_STRING) {
        for (int64_t i = 0; i < n; i++) {
            const char *s = ((char *const *)x->data)[i];
            if (!s) s = "";
            if (to == MCP_DTYPE_STRING) {
                if (mcp_tensor_set_string(y, i, s, strlen(s)) != MCP_STATUS_OK)
                    return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            } else if (!ew_parse_elem(s, y, i)) {
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'input' element %lld (\"%.40s\") is not a number",
                                 (long long)i, s);
            }
        }
        return MCP_STATUS_OK;
    }
    if (to == MCP_DTYPE_STRING) {
        char buf[64];
        for (int64_t i = 0; i < n; i++) {
            ew_format_elem(x, i, buf, sizeof buf);
            if (mcp_tensor_set_string(y, i, buf, strlen(buf)) != MCP_STATUS_OK)
                return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        return MCP_STATUS_OK;
    }
    if (x->dtype == to) {
        memcpy(y->data, x->data, mcp_tensor_nbytes(x));
        return MCP_STATUS_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        if (to == MCP_DTYPE_BFLOAT16) {
            float f = ks == EW_KIND_INT    ? (float)ew_load_i64(x->dtype, x->data, i)
                      : ks == EW_KIND_UINT ? (float)ew_load_u64(x->dtype, x->data, i)
                                           : (float)ew_load_f64(x->dtype, x->data, i);
            ((uint16_t *)y->data)[i] = ew_f32_to_bf16_trunc(f);
        } else if (ks == EW_KIND_FLOAT) {
            ew_store_f64(to, y->data, i, ew_load_f64(x->dtype, x->data, i));
        } else if (ks == EW_KIND_INT) {
            ew_store_i64(to, y->data, i, ew_load_i64(x->dtype, x->data, i));
        } else {
            ew_store_u64(to, y->data, i, ew_load_u64(x->dtype, x->data, i));
        }
    }
    return MCP_STATUS_OK;
}

/* Cast-19+'s saturate (default 1) and Cast-24+'s round_mode ("up"). An
 * unknown round_mode reads as "up"; the load-time check refuses it. */
static ew_cast_opts ew_cast_options(const mcp_kernel_ctx *ctx)
{
    ew_cast_opts o = {mcp_kattr_int(ctx, "saturate", 1) != 0, MCP_E8M0_ROUND_UP};
    const char *r = mcp_kattr_string(ctx, "round_mode", "up");
    if (r && strcmp(r, "down") == 0) o.round = MCP_E8M0_ROUND_DOWN;
    else if (r && strcmp(r, "nearest") == 0) o.round = MCP_E8M0_ROUND_NEAREST;
    return o;
}

mcp_status mcp__ew_run_cast(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is missing");
    const mcp_attr *a = mcp_kattr(ctx, "to");
    if (!a) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'to' is missing");
    mcp_dtype to = MCP_DTYPE_UNDEFINED;
    if (a->type == MCP_ATTR_STRING) {
        /* Cast-1 named the type. */
        /* Cast-1 named the type as ONNX's DataType enum does (MCP_DTYPE_MAP). */
        to = mcp_dtype_from_onnx_name(a->s);
        if (to == MCP_DTYPE_UNDEFINED)
            return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "attribute 'to' names unknown type \"%s\"",
                             a->s ? a->s : "");
    } else if (a->type == MCP_ATTR_INT) {
        if (a->i <= 0 || a->i >= MCP_DTYPE_COUNT)
            return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "attribute 'to' is unknown type %lld",
                             (long long)a->i);
        to = (mcp_dtype)a->i;
    } else {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'to' must be an int");
    }
    return ew_cast_to(ctx, x, to, ew_cast_options(ctx));
}

mcp_status mcp__ew_run_castlike(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const mcp_tensor *like = mcp_kin(ctx, 1);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is missing");
    if (!like) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'target_type' is missing");
    return ew_cast_to(ctx, x, like->dtype, ew_cast_options(ctx));
}
