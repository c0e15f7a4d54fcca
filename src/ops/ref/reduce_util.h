/*
 * Private helpers of the reduce family (reduce*.c): element access that keeps
 * integer math exact, shape helpers, and the run functions each file exports
 * to the table in reduce.c.
 */
#ifndef MCP_OPS_REF_REDUCE_UTIL_H
#define MCP_OPS_REF_REDUCE_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ops/ref/ref.h"

/* How an element type is computed on: floats in double, signed integers in
 * int64, unsigned integers and bool in uint64. */
typedef enum mcp__red_kind {
    MCP__RED_FLOAT = 0,
    MCP__RED_SIGNED,
    MCP__RED_UNSIGNED,
    MCP__RED_OTHER, /* strings, complex, undefined */
} mcp__red_kind;

static inline mcp__red_kind mcp__red_kind_of(mcp_dtype d)
{
    switch (d) {
    case MCP_DTYPE_FLOAT:
    case MCP_DTYPE_DOUBLE:
    case MCP_DTYPE_FLOAT16:
    case MCP_DTYPE_BFLOAT16:
        return MCP__RED_FLOAT;
    case MCP_DTYPE_INT8:
    case MCP_DTYPE_INT16:
    case MCP_DTYPE_INT32:
    case MCP_DTYPE_INT64:
        return MCP__RED_SIGNED;
    case MCP_DTYPE_UINT8:
    case MCP_DTYPE_UINT16:
    case MCP_DTYPE_UINT32:
    case MCP_DTYPE_UINT64:
    case MCP_DTYPE_BOOL:
        return MCP__RED_UNSIGNED;
    default:
        return MCP__RED_OTHER;
    }
}

static inline bool mcp__red_is_float(mcp_dtype d)
{
    return mcp__red_kind_of(d) == MCP__RED_FLOAT;
}

/* Element i of a numeric buffer as double. */
static inline double mcp__red_ld_f64(mcp_dtype d, const void *p, int64_t i)
{
    switch (d) {
    case MCP_DTYPE_FLOAT: return ((const float *)p)[i];
    case MCP_DTYPE_DOUBLE: return ((const double *)p)[i];
    case MCP_DTYPE_FLOAT16: return mcp_f16_to_f32(((const uint16_t *)p)[i]);
    case MCP_DTYPE_BFLOAT16: return mcp_bf16_to_f32(((const uint16_t *)p)[i]);
    case MCP_DTYPE_INT8: return ((const int8_t *)p)[i];
    case MCP_DTYPE_INT16: return ((const int16_t *)p)[i];
    case MCP_DTYPE_INT32: return ((const int32_t *)p)[i];
    case MCP_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case MCP_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case MCP_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case MCP_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case MCP_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    case MCP_DTYPE_BOOL: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    default: return 0.0;
    }
}

/* Element i as int64 (integers exact; uint64 reinterpreted; floats truncated
 * with saturation). */
static inline int64_t mcp__red_ld_i64(mcp_dtype d, const void *p, int64_t i)
{
    switch (d) {
    case MCP_DTYPE_INT8: return ((const int8_t *)p)[i];
    case MCP_DTYPE_INT16: return ((const int16_t *)p)[i];
    case MCP_DTYPE_INT32: return ((const int32_t *)p)[i];
    case MCP_DTYPE_INT64: return ((const int64_t *)p)[i];
    case MCP_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case MCP_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case MCP_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case MCP_DTYPE_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case MCP_DTYPE_BOOL: return ((const uint8_t *)p)[i] ? 1 : 0;
    default: {
        double v = mcp__red_ld_f64(d, p, i);
        if (v != v) return 0;
        if (v >= 9.2233720368547758e18) return INT64_MAX;
        if (v <= -9.2233720368547758e18) return INT64_MIN;
        return (int64_t)v;
    }
    }
}

/* Element i as uint64 (unsigned types exact; signed reinterpreted). */
static inline uint64_t mcp__red_ld_u64(mcp_dtype d, const void *p, int64_t i)
{
    if (d == MCP_DTYPE_UINT64) return ((const uint64_t *)p)[i];
    return (uint64_t)mcp__red_ld_i64(d, p, i);
}

/* Stores an integer with C wrap-around into the element type (floats get the
 * nearest value, bool gets v != 0). */
static inline void mcp__red_st_i64(mcp_dtype d, void *p, int64_t i, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (d) {
    case MCP_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)u; break;
    case MCP_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)u; break;
    case MCP_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)u; break;
    case MCP_DTYPE_INT64: ((int64_t *)p)[i] = v; break;
    case MCP_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)u; break;
    case MCP_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)u; break;
    case MCP_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)u; break;
    case MCP_DTYPE_UINT64: ((uint64_t *)p)[i] = u; break;
    case MCP_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case MCP_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case MCP_DTYPE_DOUBLE: ((double *)p)[i] = (double)v; break;
    case MCP_DTYPE_FLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_f16((float)v); break;
    case MCP_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_bf16((float)v); break;
    default: break;
    }
}

static inline void mcp__red_st_u64(mcp_dtype d, void *p, int64_t i, uint64_t v)
{
    switch (d) {
    case MCP_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case MCP_DTYPE_DOUBLE: ((double *)p)[i] = (double)v; break;
    case MCP_DTYPE_FLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_f16((float)v); break;
    case MCP_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_bf16((float)v); break;
    default: mcp__red_st_i64(d, p, i, (int64_t)v); break;
    }
}

/* Stores a double: floats rounded, integers truncated toward zero with
 * saturation at the int64 range (NaN becomes 0), then wrapped. */
static inline void mcp__red_st_f64(mcp_dtype d, void *p, int64_t i, double v)
{
    switch (d) {
    case MCP_DTYPE_FLOAT: ((float *)p)[i] = (float)v; return;
    case MCP_DTYPE_DOUBLE: ((double *)p)[i] = v; return;
    case MCP_DTYPE_FLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_f16((float)v); return;
    case MCP_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_bf16((float)v); return;
    case MCP_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0.0; return;
    case MCP_DTYPE_UINT64:
        if (v != v || v <= 0.0) ((uint64_t *)p)[i] = 0;
        else if (v >= 1.8446744073709552e19) ((uint64_t *)p)[i] = UINT64_MAX;
        else ((uint64_t *)p)[i] = (uint64_t)v;
        return;
    default: {
        int64_t iv;
        if (v != v) iv = 0;
        else if (v >= 9.2233720368547758e18) iv = INT64_MAX;
        else if (v <= -9.2233720368547758e18) iv = INT64_MIN;
        else iv = (int64_t)v;
        mcp__red_st_i64(d, p, i, iv);
        return;
    }
    }
}

/* Product of dims[lo..hi). */
static inline int64_t mcp__red_span(const int64_t *dims, int lo, int hi)
{
    int64_t n = 1;
    for (int i = lo; i < hi; i++) n *= dims[i];
    return n;
}

/* Reads an integer scalar or one-element tensor (int32/int64). */
static inline bool mcp__red_scalar_int(const mcp_tensor *t, int64_t *out)
{
    if (!t || mcp_tensor_numel(t) != 1) return false;
    if (t->dtype != MCP_DTYPE_INT64 && t->dtype != MCP_DTYPE_INT32) return false;
    *out = mcp__red_ld_i64(t->dtype, t->data, 0);
    return true;
}

/* Whether optional output i is wired to a value in the graph. */
static inline bool mcp__red_output_used(const mcp_kernel_ctx *ctx, int i)
{
    return i < ctx->n_outputs && i < ctx->node->n_outputs && ctx->node->outputs[i] >= 0;
}

/*
 * Walks the input in row-major order while tracking the offset of the
 * matching element of the reduced output (reduced axes have output stride 0).
 */
typedef struct mcp__red_walk {
    int rank;
    int64_t dims[MCP_MAX_RANK];
    int64_t ostride[MCP_MAX_RANK]; /* 0 on reduced axes */
    int64_t idx[MCP_MAX_RANK];
    int64_t off;
} mcp__red_walk;

static inline void mcp__red_walk_init(mcp__red_walk *w, const mcp_tensor *x,
                                      const bool *mask)
{
    int64_t s = 1;
    w->rank = x->rank;
    for (int i = x->rank - 1; i >= 0; i--) {
        w->dims[i] = x->dims[i];
        w->ostride[i] = mask[i] ? 0 : s;
        if (!mask[i]) s *= x->dims[i];
        w->idx[i] = 0;
    }
    w->off = 0;
}

static inline void mcp__red_walk_next(mcp__red_walk *w)
{
    for (int i = w->rank - 1; i >= 0; i--) {
        w->idx[i]++;
        w->off += w->ostride[i];
        if (w->idx[i] < w->dims[i]) return;
        w->off -= w->ostride[i] * w->idx[i];
        w->idx[i] = 0;
    }
}

/* ---- float32 row helpers ---- */


/* Sum of n floats in double, over four interleaved partial sums (one
 * running sum would wait on each add's latency). The order is fixed, so
 * the result does not depend on how rows are split over threads; it can
 * differ from a sequential sum in the last bits of the double. */
static inline double mcp__red_sum_f32(const float *x, int64_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i];
        s1 += x[i + 1];
        s2 += x[i + 2];
        s3 += x[i + 3];
    }
    for (; i < n; i++) s0 += x[i];
    return (s0 + s1) + (s2 + s3);
}

/* The affine parameters of a normalization over X.shape[axis:]
 * (LayerNormalization, RMSNormalization): Scale (named scale_name in
 * messages) and B (may be NULL), broadcast by numpy's rules to that shape,
 * get their strides over it (failing with a message naming the input);
 * mcp__red_norm_expand then expands them into `inner` doubles each (bv =
 * sv + inner) in scratch or, when the host has none, in *owned, which the
 * caller frees. */
mcp_status mcp__red_norm_strides(mcp_kernel_ctx *ctx, const mcp_tensor *x, int axis, const mcp_tensor *scale,
                                 const char *scale_name, const mcp_tensor *bias, int64_t *sstr, int64_t *bstr);
double *mcp__red_norm_expand(mcp_kernel_ctx *ctx, const mcp_tensor *scale, const mcp_tensor *bias,
                             const int64_t *sstr, const int64_t *bstr, int nr, const int64_t *nd, int64_t inner,
                             double **owned);

/* Run functions defined in reduce_*.c and listed in reduce.c. */
mcp_status mcp__ref_reduce_softmax_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_logsoftmax_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_hardmax_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_cumsum_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_cumprod_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_topk_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_batchnorm_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_layernorm_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_instancenorm_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_lrn_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_mvn_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_lpnorm_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_dropout_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_sce_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_nll_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_einsum_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_reduce_det_run(mcp_kernel_ctx *ctx);

#endif
