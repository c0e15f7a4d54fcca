/*
 * Reference kernels: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
 * MatMulInteger, QLinearMatMul.
 *
 * Rounding is half to even (nearbyint in the default rounding mode). Float
 * inputs with float scales are (de)quantized in float, the precision the
 * spec's reference formulas use, so ties round the same way.
 */
#include <math.h>
#include <string.h>

#include "ops/ref/nn_util.h"

/* Saturation range of a quantized dtype; false when d is not one. */
static bool q_range(mcp_dtype d, double *lo, double *hi) {
    switch (d) {
    case MCP_DTYPE_UINT8: *lo = 0; *hi = 255; return true;
    case MCP_DTYPE_INT8: *lo = -128; *hi = 127; return true;
    case MCP_DTYPE_UINT16: *lo = 0; *hi = 65535; return true;
    case MCP_DTYPE_INT16: *lo = -32768; *hi = 32767; return true;
    default: return false;
    }
}

static double saturate(double v, double lo, double hi) {
    if (isnan(v)) return 0.0;
    return v < lo ? lo : v > hi ? hi : v;
}

/*
 * Layout of a scale / zero point against x: one value for the tensor, or a
 * 1-D tensor with one value per index of x's `axis` dim. The value for
 * element i of x is at (i / inner) % axis_dim, or 0.
 */
typedef struct qaxis {
    bool per_axis;
    int64_t inner, axis_dim;
} qaxis;

static mcp_status qaxis_init(mcp_kernel_ctx *ctx, const mcp_tensor *x, const mcp_tensor *scale,
                             const mcp_tensor *zp, const char *scale_name, const char *zp_name,
                             qaxis *q) {
    memset(q, 0, sizeof(*q));
    int64_t ns = mcp_tensor_numel(scale);
    if (zp && (zp->rank != scale->rank || mcp_tensor_numel(zp) != ns))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must have the shape of '%s'", zp_name, scale_name);
    if (ns == 1) return MCP_STATUS_OK;
    if (scale->rank != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must be a scalar or a 1-D tensor", scale_name);
    int axis = 0;
    if (!mcp_axis_normalize(mcp_kattr_int(ctx, "axis", 1), x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' is out of range for rank %d", x->rank);
    if (ns != x->dims[axis])
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' has %lld values, expected %lld (dim %d of the input)",
                         scale_name, (long long)ns, (long long)x->dims[axis], axis);
    q->per_axis = true;
    q->axis_dim = ns;
    q->inner = mcp__nn_prod(x->rank - axis - 1, x->dims + axis + 1);
    return MCP_STATUS_OK;
}

static int64_t qaxis_at(const qaxis *q, int64_t i) {
    return q->per_axis ? (i / q->inner) % q->axis_dim : 0;
}

mcp_status mcp__nn_run_quantize_linear(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *ys = mcp_kin(ctx, 1), *yzp = mcp_kin(ctx, 2);
    if (!x || !ys)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'x' and 'y_scale' are required");
    if (!mcp__nn_is_float(x->dtype) && x->dtype != MCP_DTYPE_INT32)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'x' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (!mcp__nn_is_float(ys->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'y_scale' must be a float tensor");
    mcp_dtype ydt = yzp ? yzp->dtype : MCP_DTYPE_UINT8;
    double lo, hi;
    if (!q_range(ydt, &lo, &hi))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'y_zero_point' has unsupported type %s",
                         mcp_dtype_name(ydt));
    qaxis q;
    mcp_status st = qaxis_init(ctx, x, ys, yzp, "y_scale", "y_zero_point", &q);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor *y = mcp_kout(ctx, 0, ydt, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    bool in_float = x->dtype == MCP_DTYPE_FLOAT && ys->dtype == MCP_DTYPE_FLOAT;
    for (int64_t i = 0; i < n; i++) {
        int64_t pi = qaxis_at(&q, i);
        double zp = yzp ? mcp__nn_get_f64(yzp, pi) : 0.0;
        double r;
        if (in_float)
            r = nearbyintf(((const float *)x->data)[i] / ((const float *)ys->data)[pi]);
        else
            r = nearbyint(mcp__nn_get_f64(x, i) / mcp__nn_get_f64(ys, pi));
        mcp__nn_set_i64(y, i, (int64_t)saturate(r + zp, lo, hi));
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__nn_run_dequantize_linear(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *xs = mcp_kin(ctx, 1), *xzp = mcp_kin(ctx, 2);
    if (!x || !xs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'x' and 'x_scale' are required");
    double lo, hi;
    if (!q_range(x->dtype, &lo, &hi) && x->dtype != MCP_DTYPE_INT32)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'x' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (!mcp__nn_is_float(xs->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'x_scale' must be a float tensor");
    if (xzp && xzp->dtype != x->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'x_zero_point' must have the type of 'x'");
    qaxis q;
    mcp_status st = qaxis_init(ctx, x, xs, xzp, "x_scale", "x_zero_point", &q);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor *y = mcp_kout(ctx, 0, xs->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t pi = qaxis_at(&q, i);
        int64_t d = mcp__nn_get_i64(x, i) - (xzp ? mcp__nn_get_i64(xzp, pi) : 0);
        if (xs->dtype == MCP_DTYPE_DOUBLE)
            mcp__nn_set_f64(y, i, (double)d * mcp__nn_get_f64(xs, pi));
        else
            mcp__nn_set_f64(y, i, (double)((float)d * (float)mcp__nn_get_f64(xs, pi)));
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__nn_run_dynamic_quantize_linear(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'x' is required");
    if (!mcp__nn_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'x' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    mcp_tensor *y = mcp_kout(ctx, 0, MCP_DTYPE_UINT8, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    mcp_tensor *ys = mcp_kout(ctx, 1, MCP_DTYPE_FLOAT, 0, NULL);
    if (!ys) return MCP_STATUS_OUT_OF_MEMORY;
    mcp_tensor *yzp = mcp_kout(ctx, 2, MCP_DTYPE_UINT8, 0, NULL);
    if (!yzp) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    /* The range always includes 0 so that 0 is exactly representable. */
    float mn = 0.0f, mx = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float v = (float)mcp__nn_get_f64(x, i);
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    float scale = (mx - mn) / 255.0f;
    float zp = 0.0f;
    if (scale > 0.0f) zp = (float)saturate(nearbyintf(0.0f - mn / scale), 0.0, 255.0);
    ((float *)ys->data)[0] = scale;
    ((uint8_t *)yzp->data)[0] = (uint8_t)zp;
    uint8_t *yv = y->data;
    for (int64_t i = 0; i < n; i++) {
        float v = (float)mcp__nn_get_f64(x, i);
        /* An all-zero input has scale 0; every value then quantizes to 0. */
        double r = scale > 0.0f ? (double)nearbyintf(v / scale) + zp : zp;
        yv[i] = (uint8_t)saturate(r, 0.0, 255.0);
    }
    return MCP_STATUS_OK;
}

/* ---- quantized matrix products ---- */

/*
 * Layout of a zero point or scale of a MatMul operand: one value, one per
 * row of A / column of B (`lines` of them) shared by every batch, or one per
 * line per stored batch matrix.
 */
typedef struct qline {
    const mcp_tensor *t;
    int64_t lines; /* 0: per tensor */
    bool batched;
} qline;

static mcp_status qline_init(mcp_kernel_ctx *ctx, const mcp_tensor *t, const char *name,
                             int64_t lines, int64_t nbatch, qline *q) {
    q->t = t;
    q->lines = 0;
    q->batched = false;
    if (!t) return MCP_STATUS_OK;
    int64_t n = mcp_tensor_numel(t);
    if (n == 1) return MCP_STATUS_OK;
    if (n == lines) {
        q->lines = lines;
        return MCP_STATUS_OK;
    }
    if (n == lines * nbatch) {
        q->lines = lines;
        q->batched = true;
        return MCP_STATUS_OK;
    }
    return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                     "input '%s' has %lld values; expected 1 or one per %s", name, (long long)n,
                     lines == 0 ? "line" : "row/column");
}

static double qline_f64(const qline *q, int64_t batch, int64_t line, double dflt) {
    if (!q->t) return dflt;
    if (q->lines == 0) return mcp__nn_get_f64(q->t, 0);
    return mcp__nn_get_f64(q->t, (q->batched ? batch * q->lines : 0) + line);
}

static bool is_q8(mcp_dtype d) { return d == MCP_DTYPE_UINT8 || d == MCP_DTYPE_INT8; }

/*
 * Shared body of MatMulInteger and QLinearMatMul: plans the product, loads
 * A - a_zp and B - b_zp as int64 and multiplies into *acc (nbatch * m * n,
 * owned by the caller on success).
 */
static mcp_status qmm_accumulate(mcp_kernel_ctx *ctx, const mcp_tensor *a, const mcp_tensor *azp,
                                 const mcp_tensor *b, const mcp_tensor *bzp, mcp__nn_mm *p,
                                 int64_t **acc) {
    *acc = NULL;
    if (!is_q8(a->dtype) || !is_q8(b->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "inputs 'a' and 'b' must be int8 or uint8");
    if ((azp && azp->dtype != a->dtype) || (bzp && bzp->dtype != b->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "zero points must have the type of their input");
    mcp_status st = mcp__nn_mm_plan(ctx, a, b, p);
    if (st != MCP_STATUS_OK) return st;
    qline qa, qb;
    st = qline_init(ctx, azp, "a_zero_point", p->m, p->nbatch_a, &qa);
    if (st == MCP_STATUS_OK) st = qline_init(ctx, bzp, "b_zero_point", p->n, p->nbatch_b, &qb);
    if (st != MCP_STATUS_OK) return st;
    int64_t ny = p->nbatch * p->m * p->n;
    int64_t *av = mcp__nn_load_i64(a), *bv = mcp__nn_load_i64(b);
    int64_t *out = mcp__nn_alloc(ny, sizeof(int64_t));
    if (!av || !bv || !out) {
        mcp_free(av);
        mcp_free(bv);
        mcp_free(out);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    int64_t na = mcp_tensor_numel(a), nb = mcp_tensor_numel(b);
    int64_t mk = p->m * p->k, kn = p->k * p->n;
    for (int64_t i = 0; i < na; i++)
        av[i] -= (int64_t)qline_f64(&qa, i / mk, (i / p->k) % p->m, 0.0);
    for (int64_t i = 0; i < nb; i++)
        bv[i] -= (int64_t)qline_f64(&qb, i / kn, i % p->n, 0.0);
    mcp__nn_mm_i64(p, av, bv, out);
    mcp_free(av);
    mcp_free(bv);
    *acc = out;
    return MCP_STATUS_OK;
}

mcp_status mcp__nn_run_matmul_integer(mcp_kernel_ctx *ctx) {
    const mcp_tensor *a = mcp_kin(ctx, 0), *b = mcp_kin(ctx, 1);
    const mcp_tensor *azp = mcp_kin(ctx, 2), *bzp = mcp_kin(ctx, 3);
    if (!a || !b)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A' and 'B' are required");
    mcp__nn_mm p;
    int64_t *acc = NULL;
    mcp_status st = qmm_accumulate(ctx, a, azp, b, bzp, &p, &acc);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor *y = mcp_kout(ctx, 0, MCP_DTYPE_INT32, p.out_rank, p.out_dims);
    if (y) mcp__nn_store_i64(y, acc);
    mcp_free(acc);
    return y ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;
}

mcp_status mcp__nn_run_qlinear_matmul(mcp_kernel_ctx *ctx) {
    const mcp_tensor *a = mcp_kin(ctx, 0), *as = mcp_kin(ctx, 1), *azp = mcp_kin(ctx, 2);
    const mcp_tensor *b = mcp_kin(ctx, 3), *bs = mcp_kin(ctx, 4), *bzp = mcp_kin(ctx, 5);
    const mcp_tensor *ys = mcp_kin(ctx, 6), *yzp = mcp_kin(ctx, 7);
    if (!a || !as || !b || !bs || !ys)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'a', 'a_scale', 'b', 'b_scale' and 'y_scale' are required");
    if (!mcp__nn_is_float(as->dtype) || !mcp__nn_is_float(bs->dtype) ||
        !mcp__nn_is_float(ys->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "scales must be float tensors");
    mcp_dtype ydt = yzp ? yzp->dtype : a->dtype;
    double lo, hi;
    if (!q_range(ydt, &lo, &hi))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'y_zero_point' has unsupported type %s",
                         mcp_dtype_name(ydt));
    if (mcp_tensor_numel(ys) != 1 || (yzp && mcp_tensor_numel(yzp) != 1))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'y_scale' and 'y_zero_point' must hold one value");
    mcp__nn_mm p;
    int64_t *acc = NULL;
    mcp_status st = qmm_accumulate(ctx, a, azp, b, bzp, &p, &acc);
    if (st != MCP_STATUS_OK) return st;
    qline qa, qb;
    st = qline_init(ctx, as, "a_scale", p.m, p.nbatch_a, &qa);
    if (st == MCP_STATUS_OK) st = qline_init(ctx, bs, "b_scale", p.n, p.nbatch_b, &qb);
    mcp_tensor *y = NULL;
    if (st == MCP_STATUS_OK) {
        y = mcp_kout(ctx, 0, ydt, p.out_rank, p.out_dims);
        if (!y) st = MCP_STATUS_OUT_OF_MEMORY;
    }
    if (st != MCP_STATUS_OK) {
        mcp_free(acc);
        return st;
    }
    float y_scale = (float)mcp__nn_get_f64(ys, 0);
    double y_zp = yzp ? mcp__nn_get_f64(yzp, 0) : 0.0;
    for (int64_t bi = 0; bi < p.nbatch; bi++) {
        int64_t ba, bb;
        mcp__nn_mm_batch(&p, bi, &ba, &bb);
        for (int64_t i = 0; i < p.m; i++)
            for (int64_t j = 0; j < p.n; j++) {
                int64_t o = (bi * p.m + i) * p.n + j;
                /* Requantize in float, as the reference runtimes do. */
                float scale = (float)qline_f64(&qa, ba, i, 0.0) *
                              (float)qline_f64(&qb, bb, j, 0.0) / y_scale;
                double r = (double)nearbyintf((float)acc[o] * scale) + y_zp;
                mcp__nn_set_i64(y, o, (int64_t)saturate(r, lo, hi));
            }
    }
    mcp_free(acc);
    return MCP_STATUS_OK;
}
