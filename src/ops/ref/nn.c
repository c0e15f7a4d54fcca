/*
 * Reference kernels: nn family (convolution, pooling, matrix products,
 * quantization, RoiAlign, GridSample).
 *
 * This file holds the kernel table, the family's element and geometry
 * helpers (nn_util.h) and MatMul / Gemm. Convolutions live in nn_conv.c,
 * pooling in nn_pool.c, quantization in nn_quant.c and the sampling ops in
 * nn_sample.c.
 *
 * Float dtypes (float16, bfloat16, float, double) are computed in double and
 * rounded once on store. Integer MatMul / Gemm use wrapping 64-bit integer
 * arithmetic so int64 and uint64 results are exact.
 */
#include <math.h>
#include <string.h>

#include "ops/ref/nn_util.h"
#include "ops/ref/ref.h"

/* ---- element helpers ---- */

bool mcp__nn_is_float(mcp_dtype d) {
    return d == MCP_DTYPE_FLOAT || d == MCP_DTYPE_DOUBLE || d == MCP_DTYPE_FLOAT16 ||
           d == MCP_DTYPE_BFLOAT16;
}

double mcp__nn_get_f64(const mcp_tensor *t, int64_t i) {
    const void *p = t->data;
    switch (t->dtype) {
    case MCP_DTYPE_FLOAT: return ((const float *)p)[i];
    case MCP_DTYPE_DOUBLE: return ((const double *)p)[i];
    case MCP_DTYPE_FLOAT16: return mcp_f16_to_f32(((const uint16_t *)p)[i]);
    case MCP_DTYPE_BFLOAT16: return mcp_bf16_to_f32(((const uint16_t *)p)[i]);
    case MCP_DTYPE_INT8: return ((const int8_t *)p)[i];
    case MCP_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case MCP_DTYPE_INT16: return ((const int16_t *)p)[i];
    case MCP_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case MCP_DTYPE_INT32: return ((const int32_t *)p)[i];
    case MCP_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case MCP_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case MCP_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    case MCP_DTYPE_BOOL: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    default: return 0.0;
    }
}

/* Converts a double to int64 without undefined behaviour: NaN becomes 0 and
 * values outside the range saturate. Fractions truncate toward zero. */
static int64_t f64_to_i64(double v) {
    if (isnan(v)) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static uint64_t f64_to_u64(double v) {
    if (isnan(v) || v <= 0.0) return 0;
    if (v >= 18446744073709551615.0) return UINT64_MAX;
    return (uint64_t)v;
}

int64_t mcp__nn_get_i64(const mcp_tensor *t, int64_t i) {
    const void *p = t->data;
    switch (t->dtype) {
    case MCP_DTYPE_INT8: return ((const int8_t *)p)[i];
    case MCP_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case MCP_DTYPE_INT16: return ((const int16_t *)p)[i];
    case MCP_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case MCP_DTYPE_INT32: return ((const int32_t *)p)[i];
    case MCP_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case MCP_DTYPE_INT64: return ((const int64_t *)p)[i];
    /* uint64 travels as its bit pattern; wrapping arithmetic keeps it exact. */
    case MCP_DTYPE_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case MCP_DTYPE_BOOL: return ((const uint8_t *)p)[i] ? 1 : 0;
    default: return f64_to_i64(mcp__nn_get_f64(t, i));
    }
}

void mcp__nn_set_f64(mcp_tensor *t, int64_t i, double v) {
    void *p = t->data;
    switch (t->dtype) {
    case MCP_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case MCP_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
    case MCP_DTYPE_FLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_f16((float)v); break;
    case MCP_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_bf16((float)v); break;
    case MCP_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    case MCP_DTYPE_UINT64: ((uint64_t *)p)[i] = f64_to_u64(v); break;
    default: mcp__nn_set_i64(t, i, f64_to_i64(v)); break;
    }
}

void mcp__nn_set_i64(mcp_tensor *t, int64_t i, int64_t v) {
    void *p = t->data;
    switch (t->dtype) {
    case MCP_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case MCP_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case MCP_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case MCP_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case MCP_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case MCP_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case MCP_DTYPE_INT64: ((int64_t *)p)[i] = v; break;
    case MCP_DTYPE_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case MCP_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: mcp__nn_set_f64(t, i, (double)v); break;
    }
}

double *mcp__nn_load_f64(const mcp_tensor *t) {
    int64_t n = mcp_tensor_numel(t);
    double *buf = mcp__nn_alloc(n, sizeof(double));
    if (!buf) return NULL;
    if (t->dtype == MCP_DTYPE_DOUBLE) {
        if (n > 0) memcpy(buf, t->data, (size_t)n * sizeof(double));
    } else if (t->dtype == MCP_DTYPE_FLOAT) {
        const float *src = t->data;
        for (int64_t i = 0; i < n; i++) buf[i] = src[i];
    } else {
        for (int64_t i = 0; i < n; i++) buf[i] = mcp__nn_get_f64(t, i);
    }
    return buf;
}

int64_t *mcp__nn_load_i64(const mcp_tensor *t) {
    int64_t n = mcp_tensor_numel(t);
    int64_t *buf = mcp__nn_alloc(n, sizeof(int64_t));
    if (!buf) return NULL;
    for (int64_t i = 0; i < n; i++) buf[i] = mcp__nn_get_i64(t, i);
    return buf;
}

void mcp__nn_store_f64(mcp_tensor *t, const double *v) {
    int64_t n = mcp_tensor_numel(t);
    if (t->dtype == MCP_DTYPE_FLOAT) {
        float *dst = t->data;
        for (int64_t i = 0; i < n; i++) dst[i] = (float)v[i];
    } else {
        for (int64_t i = 0; i < n; i++) mcp__nn_set_f64(t, i, v[i]);
    }
}

void mcp__nn_store_i64(mcp_tensor *t, const int64_t *v) {
    int64_t n = mcp_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) mcp__nn_set_i64(t, i, v[i]);
}

int64_t mcp__nn_mul_sat(int64_t a, int64_t b) {
    if (a <= 0 || b <= 0) return 0;
    if (a > INT64_MAX / b) return INT64_MAX;
    return a * b;
}

int64_t mcp__nn_prod(int n, const int64_t *dims) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p = mcp__nn_mul_sat(p, dims[i]);
    return p;
}

void *mcp__nn_alloc(int64_t count, size_t elem) {
    if (count < 1) count = 1;
    if ((uint64_t)count > SIZE_MAX / elem) return NULL;
    return mcp_malloc((size_t)count * elem);
}

/* ---- geometry ---- */

/* Reads an ints attribute of exactly `want` positive (or, with allow_zero,
 * non-negative) values into out; absent leaves out untouched. */
static mcp_status geom_ints(mcp_kernel_ctx *ctx, const char *name, int want, bool allow_zero,
                            int64_t *out) {
    int64_t count = 0;
    const int64_t *v = mcp_kattr_ints(ctx, name, &count);
    if (!v) return MCP_STATUS_OK;
    if (count != want)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute '%s' has %lld values, expected %d", name, (long long)count,
                         want);
    for (int i = 0; i < want; i++) {
        /* The bound keeps window arithmetic far from int64 overflow. */
        if (v[i] < 0 || (v[i] == 0 && !allow_zero) || v[i] > INT32_MAX)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute '%s' value %lld is out of range", name,
                             (long long)v[i]);
        out[i] = v[i];
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__nn_geom_init(mcp_kernel_ctx *ctx, const mcp_tensor *x, const int64_t *kernel,
                             int flags, mcp__nn_geom *g) {
    memset(g, 0, sizeof(*g));
    if (x->rank < 3)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' has rank %d, expected at least 3 (N, C, spatial...)",
                         x->rank);
    int nd = x->rank - 2;
    g->nd = nd;
    for (int i = 0; i < nd; i++) {
        g->in[i] = x->dims[i + 2];
        g->stride[i] = 1;
        g->dil[i] = 1;
        g->kernel[i] = kernel ? kernel[i] : 0;
    }
    int64_t kcount = 0;
    if (mcp_kattr_ints(ctx, "kernel_shape", &kcount)) {
        mcp_status st = geom_ints(ctx, "kernel_shape", nd, false, g->kernel);
        if (st != MCP_STATUS_OK) return st;
    } else if (!kernel) {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'kernel_shape' is missing");
    }
    mcp_status st = geom_ints(ctx, "strides", nd, false, g->stride);
    if (st != MCP_STATUS_OK) return st;
    if (flags & MCP__NN_GEOM_DILATIONS) {
        st = geom_ints(ctx, "dilations", nd, false, g->dil);
        if (st != MCP_STATUS_OK) return st;
    }
    int64_t pads[2 * MCP__NN_MAX_SPATIAL] = {0};
    st = geom_ints(ctx, "pads", 2 * nd, true, pads);
    if (st != MCP_STATUS_OK) return st;
    for (int i = 0; i < nd; i++) {
        g->pad_begin[i] = pads[i];
        g->pad_end[i] = pads[i + nd];
    }
    if (flags & MCP__NN_GEOM_NO_OUT) return MCP_STATUS_OK;
    const char *auto_pad = mcp_kattr_string(ctx, "auto_pad", "NOTSET");
    bool ceil_mode = (flags & MCP__NN_GEOM_CEIL) && mcp_kattr_int(ctx, "ceil_mode", 0) != 0;
    for (int i = 0; i < nd; i++) {
        int64_t eff = (g->kernel[i] - 1) * g->dil[i] + 1;
        int64_t in = g->in[i], s = g->stride[i];
        if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
            g->out[i] = (in + s - 1) / s;
            int64_t total = (g->out[i] - 1) * s + eff - in;
            if (total < 0) total = 0;
            if (auto_pad[5] == 'U') {
                g->pad_begin[i] = total / 2;
                g->pad_end[i] = total - total / 2;
            } else {
                g->pad_end[i] = total / 2;
                g->pad_begin[i] = total - total / 2;
            }
        } else if (strcmp(auto_pad, "VALID") == 0) {
            g->pad_begin[i] = g->pad_end[i] = 0;
            if (in < eff)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'X' spatial dim %d (%lld) is smaller than the kernel "
                                 "window (%lld)",
                                 i, (long long)in, (long long)eff);
            g->out[i] = (in - eff) / s + 1;
        } else if (strcmp(auto_pad, "NOTSET") == 0) {
            int64_t span = in + g->pad_begin[i] + g->pad_end[i] - eff;
            if (span < 0)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'X' spatial dim %d (%lld plus pads) is smaller than the "
                                 "kernel window (%lld)",
                                 i, (long long)in, (long long)eff);
            if (ceil_mode) {
                g->out[i] = (span + s - 1) / s + 1;
                /* The last window must start inside the input or the
                 * leading padding (the rule PyTorch and opset 19 use). */
                if ((g->out[i] - 1) * s >= in + g->pad_begin[i]) g->out[i]--;
            } else {
                g->out[i] = span / s + 1;
            }
        } else {
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'auto_pad' has unknown value '%s'", auto_pad);
        }
    }
    return MCP_STATUS_OK;
}

/* ---- MatMul ---- */

/* out (m x n) = a (m x k) * b (k x n), in double or wrapping 64-bit ints. */
static void matmul_f64(const double *a, const double *b, double *out, int64_t m, int64_t k,
                       int64_t n) {
    for (int64_t i = 0; i < m * n; i++) out[i] = 0.0;
    for (int64_t i = 0; i < m; i++) {
        double *orow = out + i * n;
        for (int64_t p = 0; p < k; p++) {
            double av = a[i * k + p];
            const double *brow = b + p * n;
            for (int64_t j = 0; j < n; j++) orow[j] += av * brow[j];
        }
    }
}

static void matmul_i64(const int64_t *a, const int64_t *b, int64_t *out, int64_t m, int64_t k,
                       int64_t n) {
    uint64_t *o = (uint64_t *)out;
    for (int64_t i = 0; i < m * n; i++) o[i] = 0;
    for (int64_t i = 0; i < m; i++) {
        uint64_t *orow = o + i * n;
        for (int64_t p = 0; p < k; p++) {
            uint64_t av = (uint64_t)a[i * k + p];
            const int64_t *brow = b + p * n;
            for (int64_t j = 0; j < n; j++) orow[j] += av * (uint64_t)brow[j];
        }
    }
}

mcp_status mcp__nn_mm_plan(mcp_kernel_ctx *ctx, const mcp_tensor *a, const mcp_tensor *b,
                           mcp__nn_mm *p) {
    memset(p, 0, sizeof(*p));
    if (a->rank < 1 || b->rank < 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A' and 'B' must not be scalars");
    /* Promote 1-D operands to matrices; the output drops those dims again. */
    int64_t ad[MCP_MAX_RANK + 1], bd[MCP_MAX_RANK + 1];
    int ra = a->rank, rb = b->rank;
    if (ra == 1) {
        ad[0] = 1;
        ad[1] = a->dims[0];
        ra = 2;
    } else {
        memcpy(ad, a->dims, sizeof(int64_t) * (size_t)ra);
    }
    if (rb == 1) {
        bd[0] = b->dims[0];
        bd[1] = 1;
        rb = 2;
    } else {
        memcpy(bd, b->dims, sizeof(int64_t) * (size_t)rb);
    }
    p->m = ad[ra - 2];
    p->k = ad[ra - 1];
    p->n = bd[rb - 1];
    if (bd[rb - 2] != p->k)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'A' and 'B' have mismatched inner dims (%lld vs %lld)",
                         (long long)p->k, (long long)bd[rb - 2]);
    /* Numpy broadcasting of the batch dims, with strides (in matrices) for
     * each operand: 0 where it broadcasts. */
    int rbatch = (ra > rb ? ra : rb) - 2;
    int64_t stride_a = 1, stride_b = 1;
    for (int d = rbatch - 1; d >= 0; d--) {
        int ia = d - (rbatch - (ra - 2)), ib = d - (rbatch - (rb - 2));
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "inputs 'A' and 'B' have batch dims that do not broadcast");
        p->batch[d] = da == 1 ? db : da;
        p->stride_a[d] = da == 1 ? 0 : stride_a;
        p->stride_b[d] = db == 1 ? 0 : stride_b;
        stride_a *= da;
        stride_b *= db;
    }
    p->rbatch = rbatch;
    p->nbatch = mcp__nn_prod(rbatch, p->batch);
    p->nbatch_a = stride_a;
    p->nbatch_b = stride_b;
    int orank = 0;
    for (int i = 0; i < rbatch; i++) p->out_dims[orank++] = p->batch[i];
    if (a->rank > 1) p->out_dims[orank++] = p->m;
    if (b->rank > 1) p->out_dims[orank++] = p->n;
    if (orank > MCP_MAX_RANK)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "output rank is too large");
    p->out_rank = orank;
    return MCP_STATUS_OK;
}

void mcp__nn_mm_batch(const mcp__nn_mm *p, int64_t bi, int64_t *ba, int64_t *bb) {
    int64_t oa = 0, ob = 0;
    for (int d = p->rbatch - 1; d >= 0; d--) {
        int64_t c = bi % p->batch[d];
        bi /= p->batch[d];
        oa += c * p->stride_a[d];
        ob += c * p->stride_b[d];
    }
    *ba = oa;
    *bb = ob;
}

void mcp__nn_mm_f64(const mcp__nn_mm *p, const double *a, const double *b, double *out) {
    for (int64_t bi = 0; bi < p->nbatch; bi++) {
        int64_t ba, bb;
        mcp__nn_mm_batch(p, bi, &ba, &bb);
        matmul_f64(a + ba * p->m * p->k, b + bb * p->k * p->n, out + bi * p->m * p->n, p->m,
                   p->k, p->n);
    }
}

void mcp__nn_mm_i64(const mcp__nn_mm *p, const int64_t *a, const int64_t *b, int64_t *out) {
    for (int64_t bi = 0; bi < p->nbatch; bi++) {
        int64_t ba, bb;
        mcp__nn_mm_batch(p, bi, &ba, &bb);
        matmul_i64(a + ba * p->m * p->k, b + bb * p->k * p->n, out + bi * p->m * p->n, p->m,
                   p->k, p->n);
    }
}

static bool matmul_dtype_ok(mcp_dtype d) {
    return mcp__nn_is_float(d) || d == MCP_DTYPE_INT32 || d == MCP_DTYPE_INT64 ||
           d == MCP_DTYPE_UINT32 || d == MCP_DTYPE_UINT64 || d == MCP_DTYPE_INT8 ||
           d == MCP_DTYPE_UINT8 || d == MCP_DTYPE_INT16 || d == MCP_DTYPE_UINT16;
}

mcp_status mcp__nn_run_matmul(mcp_kernel_ctx *ctx) {
    const mcp_tensor *a = mcp_kin(ctx, 0), *b = mcp_kin(ctx, 1);
    if (!a || !b)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A' and 'B' are required");
    if (a->dtype != b->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'A' (%s) and 'B' (%s) differ in type", mcp_dtype_name(a->dtype),
                         mcp_dtype_name(b->dtype));
    if (!matmul_dtype_ok(a->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'A' has unsupported type %s",
                         mcp_dtype_name(a->dtype));
    mcp__nn_mm p;
    mcp_status st = mcp__nn_mm_plan(ctx, a, b, &p);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor *y = mcp_kout(ctx, 0, a->dtype, p.out_rank, p.out_dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t ny = mcp_tensor_numel(y);
    if (ny == 0) return MCP_STATUS_OK;
    bool is_float = mcp__nn_is_float(a->dtype);
    void *abuf = is_float ? (void *)mcp__nn_load_f64(a) : (void *)mcp__nn_load_i64(a);
    void *bbuf = is_float ? (void *)mcp__nn_load_f64(b) : (void *)mcp__nn_load_i64(b);
    /* double and int64 have the same size, so one scratch serves both. */
    void *obuf = mcp__nn_alloc(ny, sizeof(double));
    if (!abuf || !bbuf || !obuf) {
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    } else if (is_float) {
        mcp__nn_mm_f64(&p, abuf, bbuf, obuf);
        mcp__nn_store_f64(y, obuf);
    } else {
        mcp__nn_mm_i64(&p, abuf, bbuf, obuf);
        mcp__nn_store_i64(y, obuf);
    }
    mcp_free(abuf);
    mcp_free(bbuf);
    mcp_free(obuf);
    return st;
}

/* ---- Gemm ---- */

mcp_status mcp__nn_run_gemm(mcp_kernel_ctx *ctx) {
    const mcp_tensor *a = mcp_kin(ctx, 0), *b = mcp_kin(ctx, 1), *c = mcp_kin(ctx, 2);
    if (!a || !b)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A' and 'B' are required");
    if (a->dtype != b->dtype || (c && c->dtype != a->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A', 'B' and 'C' differ in type");
    if (!matmul_dtype_ok(a->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'A' has unsupported type %s",
                         mcp_dtype_name(a->dtype));
    if (a->rank != 2 || b->rank != 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A' and 'B' must be 2-D");
    bool ta = mcp_kattr_int(ctx, "transA", 0) != 0;
    bool tb = mcp_kattr_int(ctx, "transB", 0) != 0;
    double alpha = mcp_kattr_float(ctx, "alpha", 1.0f);
    double beta = mcp_kattr_float(ctx, "beta", 1.0f);
    int64_t m = ta ? a->dims[1] : a->dims[0];
    int64_t k = ta ? a->dims[0] : a->dims[1];
    int64_t kb = tb ? b->dims[1] : b->dims[0];
    int64_t n = tb ? b->dims[0] : b->dims[1];
    if (k != kb)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'A' and 'B' have mismatched inner dims (%lld vs %lld)",
                         (long long)k, (long long)kb);
    /* C broadcasts unidirectionally to (M, N). */
    int64_t cs0 = 0, cs1 = 0;
    if (c) {
        if (c->rank > 2)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'C' has rank %d, expected <= 2",
                             c->rank);
        int64_t c0 = c->rank == 2 ? c->dims[0] : 1;
        int64_t c1 = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        if ((c0 != 1 && c0 != m) || (c1 != 1 && c1 != n))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'C' does not broadcast to (%lld, %lld)", (long long)m,
                             (long long)n);
        cs0 = c0 == 1 ? 0 : c1;
        cs1 = c1 == 1 ? 0 : 1;
    }
    int64_t odims[2] = {m, n};
    mcp_tensor *y = mcp_kout(ctx, 0, a->dtype, 2, odims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (m * n == 0) return MCP_STATUS_OK;
    /* Strides of op(A) and op(B) in the stored matrices. */
    int64_t a_si = ta ? 1 : k, a_sp = ta ? m : 1;
    int64_t b_sp = tb ? 1 : n, b_sj = tb ? k : 1;
    if (mcp__nn_is_float(a->dtype)) {
        double *av = mcp__nn_load_f64(a), *bv = mcp__nn_load_f64(b);
        double *cv = c ? mcp__nn_load_f64(c) : NULL;
        double *ov = mcp__nn_alloc(m * n, sizeof(double));
        if (!av || !bv || (c && !cv) || !ov) {
            mcp_free(av);
            mcp_free(bv);
            mcp_free(cv);
            mcp_free(ov);
            return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        for (int64_t i = 0; i < m * n; i++) ov[i] = 0.0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++) {
                double x = av[i * a_si + p * a_sp];
                for (int64_t j = 0; j < n; j++) ov[i * n + j] += x * bv[p * b_sp + j * b_sj];
            }
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double v = alpha * ov[i * n + j];
                if (cv) v += beta * cv[i * cs0 + j * cs1];
                ov[i * n + j] = v;
            }
        mcp__nn_store_f64(y, ov);
        mcp_free(av);
        mcp_free(bv);
        mcp_free(cv);
        mcp_free(ov);
        return MCP_STATUS_OK;
    }
    int64_t *av = mcp__nn_load_i64(a), *bv = mcp__nn_load_i64(b);
    int64_t *cv = c ? mcp__nn_load_i64(c) : NULL;
    uint64_t *ov = mcp__nn_alloc(m * n, sizeof(uint64_t));
    if (!av || !bv || (c && !cv) || !ov) {
        mcp_free(av);
        mcp_free(bv);
        mcp_free(cv);
        mcp_free(ov);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (int64_t i = 0; i < m * n; i++) ov[i] = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++) {
            uint64_t x = (uint64_t)av[i * a_si + p * a_sp];
            for (int64_t j = 0; j < n; j++) ov[i * n + j] += x * (uint64_t)bv[p * b_sp + j * b_sj];
        }
    /* Integer Gemm stays exact when alpha and beta are 1 (the common case);
     * other scales go through double. */
    bool unit = alpha == 1.0 && beta == 1.0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            uint64_t acc = ov[i * n + j];
            int64_t cval = cv ? cv[i * cs0 + j * cs1] : 0;
            if (unit) {
                mcp__nn_set_i64(y, i * n + j, (int64_t)(acc + (uint64_t)cval));
            } else {
                double base = a->dtype == MCP_DTYPE_UINT64 ? (double)acc : (double)(int64_t)acc;
                double cd = a->dtype == MCP_DTYPE_UINT64 ? (double)(uint64_t)cval : (double)cval;
                mcp__nn_set_f64(y, i * n + j, alpha * base + beta * cd);
            }
        }
    mcp_free(av);
    mcp_free(bv);
    mcp_free(cv);
    mcp_free(ov);
    return MCP_STATUS_OK;
}

/* ---- table ---- */

/* One entry per op; run functions read ctx->opset where versions differ. */
const mcp_kernel_def mcp__ref_nn_kernels[] = {
    {"", "Conv", 1, 0, mcp__nn_run_conv, NULL, NULL, NULL},
    {"", "ConvTranspose", 1, 0, mcp__nn_run_conv_transpose, NULL, NULL, NULL},
    {"", "ConvInteger", 10, 0, mcp__nn_run_conv_integer, NULL, NULL, NULL},
    {"", "QLinearConv", 10, 0, mcp__nn_run_qlinear_conv, NULL, NULL, NULL},
    {"", "AveragePool", 1, 0, mcp__nn_run_average_pool, NULL, NULL, NULL},
    {"", "MaxPool", 1, 0, mcp__nn_run_max_pool, NULL, NULL, NULL},
    {"", "LpPool", 1, 0, mcp__nn_run_lp_pool, NULL, NULL, NULL},
    {"", "GlobalAveragePool", 1, 0, mcp__nn_run_global_average_pool, NULL, NULL, NULL},
    {"", "GlobalMaxPool", 1, 0, mcp__nn_run_global_max_pool, NULL, NULL, NULL},
    {"", "GlobalLpPool", 1, 0, mcp__nn_run_global_lp_pool, NULL, NULL, NULL},
    {"", "MaxUnpool", 9, 0, mcp__nn_run_max_unpool, NULL, NULL, NULL},
    {"", "RoiAlign", 10, 0, mcp__nn_run_roi_align, NULL, NULL, NULL},
    {"", "GridSample", 16, 0, mcp__nn_run_grid_sample, NULL, NULL, NULL},
    {"", "MatMul", 1, 0, mcp__nn_run_matmul, NULL, NULL, NULL},
    {"", "Gemm", 1, 0, mcp__nn_run_gemm, NULL, NULL, NULL},
    {"", "MatMulInteger", 10, 0, mcp__nn_run_matmul_integer, NULL, NULL, NULL},
    {"", "QLinearMatMul", 10, 0, mcp__nn_run_qlinear_matmul, NULL, NULL, NULL},
    {"", "QuantizeLinear", 10, 0, mcp__nn_run_quantize_linear, NULL, NULL, NULL},
    {"", "DequantizeLinear", 10, 0, mcp__nn_run_dequantize_linear, NULL, NULL, NULL},
    {"", "DynamicQuantizeLinear", 11, 0, mcp__nn_run_dynamic_quantize_linear, NULL, NULL, NULL},
};
const int mcp__ref_nn_kernel_count = (int)(sizeof(mcp__ref_nn_kernels) /
                                           sizeof(mcp__ref_nn_kernels[0]));
