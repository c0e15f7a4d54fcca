/*
 * Reference kernels: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
 * MatMulInteger, QLinearMatMul.
 *
 * Rounding is half to even (nearbyint in the default rounding mode). Float
 * inputs with float scales are (de)quantized in float, the precision the
 * spec's reference formulas use, so ties round the same way.
 *
 * The narrow types (ONNX 17-26) quantize as the spec says: int4 / uint4 /
 * int2 / uint2 like the 8-bit integers with their own ranges; float8 and
 * float4e2m1 by casting x / y_scale (+ zero point) with Cast's rounding
 * (saturate: the attribute, for float8). Scales may be float8e8m0 (24+).
 * Opset 21 adds blocked scales (block_size) and output_dtype, 23 the
 * precision of the division.
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
    case MCP_DTYPE_UINT4: *lo = 0; *hi = 15; return true;
    case MCP_DTYPE_INT4: *lo = -8; *hi = 7; return true;
    case MCP_DTYPE_UINT2: *lo = 0; *hi = 3; return true;
    case MCP_DTYPE_INT2: *lo = -2; *hi = 1; return true;
    default: return false;
    }
}

/* Element i of a float8 / float4e2m1 tensor from v, Cast's rounding. */
static void q_store_float(mcp_tensor *t, int64_t i, double v, bool sat)
{
    uint8_t code = mcp_narrow_from_f64(t->dtype, v, sat, MCP_E8M0_ROUND_UP);
    if (mcp_dtype_is_packed(t->dtype)) mcp_packed_set(t->data, mcp_dtype_bits(t->dtype), i, code);
    else ((uint8_t *)t->data)[i] = code;
}

static double saturate(double v, double lo, double hi) {
    if (isnan(v)) return 0.0;
    return v < lo ? lo : v > hi ? hi : v;
}

/* The float types a quantized value may have instead of an integer one. */
static bool q_float_out(mcp_dtype d)
{
    return d == MCP_DTYPE_FLOAT8E4M3FN || d == MCP_DTYPE_FLOAT8E4M3FNUZ || d == MCP_DTYPE_FLOAT8E5M2 ||
           d == MCP_DTYPE_FLOAT8E5M2FNUZ || d == MCP_DTYPE_FLOAT4E2M1;
}

/* A scale's type: float, or float8e8m0 (powers of two). */
static bool q_scale_ok(mcp_dtype d) { return mcp__nn_is_float(d) || d == MCP_DTYPE_FLOAT8E8M0; }

/*
 * Layout of a scale / zero point against x: one value for the tensor, a
 * 1-D tensor with one value per index of x's `axis` dim, or (block > 0)
 * x's shape with that dim cut into blocks of `block`. The value for element
 * i of x is at (i / inner) % axis_dim, at its block's place, or at 0.
 */
typedef struct qaxis {
    bool per_axis;
    int64_t inner, axis_dim;
    int64_t block, blocks; /* blocked: block size, blocks along the axis */
} qaxis;

static mcp_status qaxis_init_blocked(mcp_kernel_ctx *ctx, const mcp_tensor *x, const mcp_tensor *scale,
                                     const mcp_tensor *zp, const char *scale_name, const char *zp_name, int64_t block,
                                     qaxis *q)
{
    int axis = 0;
    if (!mcp_axis_normalize(mcp_kattr_int(ctx, "axis", 1), x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axis' is out of range for rank %d", x->rank);
    if (scale->rank != x->rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "blocked input '%s' must have the rank of the input (%d), not %d",
                         scale_name, x->rank, scale->rank);
    for (int d = 0; d < x->rank; d++) {
        int64_t want = d == axis ? (x->dims[d] + block - 1) / block : x->dims[d];
        if (scale->dims[d] != want)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "blocked input '%s' has %lld at dim %d, expected %lld (block_size %lld on axis %d)", scale_name,
                             (long long)scale->dims[d], d, (long long)want, (long long)block, axis);
        if (zp && zp->dims[d] != scale->dims[d])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must have the shape of '%s'", zp_name, scale_name);
    }
    q->per_axis = true;
    q->axis_dim = x->dims[axis];
    q->inner = mcp__nn_prod(x->rank - axis - 1, x->dims + axis + 1);
    q->block = block;
    q->blocks = scale->dims[axis];
    return MCP_STATUS_OK;
}

static mcp_status qaxis_init(mcp_kernel_ctx *ctx, const mcp_tensor *x, const mcp_tensor *scale,
                             const mcp_tensor *zp, const char *scale_name, const char *zp_name,
                             qaxis *q) {
    memset(q, 0, sizeof(*q));
    int64_t ns = mcp_tensor_numel(scale);
    if (zp && (zp->rank != scale->rank || mcp_tensor_numel(zp) != ns))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must have the shape of '%s'", zp_name, scale_name);
    int64_t block = ctx->opset >= 21 ? mcp_kattr_int(ctx, "block_size", 0) : 0;
    if (block < 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'block_size' must not be negative, not %lld",
                         (long long)block);
    if (block > 0) return qaxis_init_blocked(ctx, x, scale, zp, scale_name, zp_name, block, q);
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
    if (!q->per_axis) return 0;
    int64_t a = (i / q->inner) % q->axis_dim;
    if (!q->block) return a;
    int64_t outer = i / (q->inner * q->axis_dim);
    return (outer * q->blocks + a / q->block) * q->inner + i % q->inner;
}

/* x / scale rounded to the precision `p` (Quantize-23's attribute, else the
 * scale's type; float8e8m0 scales divide in float, where they are exact). */
static double q_divide(mcp_dtype p, double x, double scale)
{
    switch (p) {
    case MCP_DTYPE_DOUBLE: return x / scale;
    case MCP_DTYPE_FLOAT16: return mcp_f16_to_f32(mcp_f32_to_f16((float)x / (float)scale));
    case MCP_DTYPE_BFLOAT16: return mcp_bf16_to_f32(mcp_f32_to_bf16((float)x / (float)scale));
    default: return (float)x / (float)scale;
    }
}

/*
 * Fast paths: float32 <-> 8-bit with one scale and zero point, the form
 * every QDQ graph uses between its quantized operators. Same results as
 * the general loops: x / scale rounded half to even in float (adding and
 * subtracting 1.5 * 2^23 rounds in the default mode, exactly, for the
 * |v| < 2^22 that the clamp below leaves), saturation, NaN to zero.
 */
static bool q8_per_tensor(const mcp_tensor *scale, const mcp_tensor *zp, mcp_dtype q)
{
    return scale->dtype == MCP_DTYPE_FLOAT && mcp_tensor_numel(scale) == 1 && (q == MCP_DTYPE_UINT8 || q == MCP_DTYPE_INT8) &&
           (!zp || (zp->dtype == q && mcp_tensor_numel(zp) == 1));
}

static int q8_zero_point(const mcp_tensor *zp)
{
    if (!zp) return 0;
    return zp->dtype == MCP_DTYPE_UINT8 ? ((const uint8_t *)zp->data)[0] : ((const int8_t *)zp->data)[0];
}

/* The loops below are compiled for AVX-512, AVX2 and the baseline and
 * picked at load by the CPU; no-trapping-math lets the clamps become
 * vector selects (it changes no result: nothing here runs with
 * floating-point traps enabled). */
/* The rounding is written out in each loop (here and in qadd_loop) on
 * purpose: a shared inline helper measured 1.8x slower in these loops. */
MCP_MULTIVERSION MCP_NO_TRAPPING_MATH static void
quantize_chunk(const float *x, float scale, float zf, bool is_u8, void *y, int64_t begin, int64_t end)
{
    const float lo = is_u8 ? 0.0f : -128.0f, hi = is_u8 ? 255.0f : 127.0f, magic = 12582912.0f;
    if (is_u8) {
#pragma omp simd
        for (int64_t i = begin; i < end; i++) {
            float v = x[i] / scale;
            v = v < -4194304.0f ? -4194304.0f : v > 4194304.0f ? 4194304.0f : v;
            float r = (v + magic) - magic + zf;
            r = r < lo ? lo : r > hi ? hi : r;
            ((uint8_t *)y)[i] = (uint8_t)(x[i] == x[i] ? r : 0.0f);
        }
    } else {
#pragma omp simd
        for (int64_t i = begin; i < end; i++) {
            float v = x[i] / scale;
            v = v < -4194304.0f ? -4194304.0f : v > 4194304.0f ? 4194304.0f : v;
            float r = (v + magic) - magic + zf;
            r = r < lo ? lo : r > hi ? hi : r;
            ((int8_t *)y)[i] = (int8_t)(x[i] == x[i] ? r : 0.0f);
        }
    }
}

static void quantize_f32_q8(mcp_kernel_ctx *ctx, const float *x, float scale, int zp, bool is_u8, void *y, int64_t n)
{
    int64_t chunk = 16384, nchunks = (n + chunk - 1) / chunk;
    int nt = mcp_kthreads(ctx, n * 4);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t c = 0; c < nchunks; c++)
        quantize_chunk(x, scale, (float)zp, is_u8, y, c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n);
}

MCP_MULTIVERSION static void
dequantize_chunk(const void *x, float scale, int zp, bool is_u8, float *y, int64_t begin, int64_t end)
{
    if (is_u8) {
#pragma omp simd
        for (int64_t i = begin; i < end; i++) y[i] = (float)((int)((const uint8_t *)x)[i] - zp) * scale;
    } else {
#pragma omp simd
        for (int64_t i = begin; i < end; i++) y[i] = (float)((int)((const int8_t *)x)[i] - zp) * scale;
    }
}

static void dequantize_q8_f32(mcp_kernel_ctx *ctx, const void *x, float scale, int zp, bool is_u8, float *y, int64_t n)
{
    int64_t chunk = 16384, nchunks = (n + chunk - 1) / chunk;
    int nt = mcp_kthreads(ctx, n * 2);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t c = 0; c < nchunks; c++)
        dequantize_chunk(x, scale, zp, is_u8, y, c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n);
}

typedef struct qadd_params {
    float sa, sb, sy, za, zb, zy, lo, hi;
} qadd_params;

/* One chunk of QLinearAdd; inlined per combination of operand types and
 * relu, so each loop is straight-line and vectorizes. */
static inline __attribute__((always_inline)) MCP_NO_TRAPPING_MATH void qadd_loop(const void *a, const void *b, void *y, int64_t begin,
                                                             int64_t end, const qadd_params *p, bool au, bool bu,
                                                             bool yu, bool relu)
{
    const float magic = 12582912.0f, sa = p->sa, sb = p->sb, sy = p->sy, za = p->za, zb = p->zb, zy = p->zy;
    const float lo = p->lo, hi = p->hi;
#pragma omp simd
    for (int64_t i = begin; i < end; i++) {
        float fa = au ? (float)((const uint8_t *)a)[i] : (float)((const int8_t *)a)[i];
        float fb = bu ? (float)((const uint8_t *)b)[i] : (float)((const int8_t *)b)[i];
        float v = (fa - za) * sa + (fb - zb) * sb;
        if (relu) v = v > 0.0f ? v : 0.0f;
        v = v / sy;
        v = v < -4194304.0f ? -4194304.0f : v > 4194304.0f ? 4194304.0f : v;
        float r = (v + magic) - magic + zy;
        r = r < lo ? lo : r > hi ? hi : r;
        if (yu) ((uint8_t *)y)[i] = (uint8_t)r;
        else ((int8_t *)y)[i] = (int8_t)r;
    }
}

/* One chunk, compiled for AVX-512, AVX2 and the baseline, picked at load
 * by the CPU (the distributed binary targets baseline x86-64). */
MCP_MULTIVERSION MCP_NO_TRAPPING_MATH static void
qadd_chunk(int kind, const void *a, const void *b, void *y, int64_t lo_i, int64_t hi_i, const qadd_params *p)
{
    switch (kind) {
#define QADD_CASE(k) \
    case k: qadd_loop(a, b, y, lo_i, hi_i, p, (k) & 1, (k) & 2, (k) & 4, (k) & 8); break;
        QADD_CASE(0) QADD_CASE(1) QADD_CASE(2) QADD_CASE(3) QADD_CASE(4) QADD_CASE(5) QADD_CASE(6) QADD_CASE(7)
        QADD_CASE(8) QADD_CASE(9) QADD_CASE(10) QADD_CASE(11) QADD_CASE(12) QADD_CASE(13) QADD_CASE(14) QADD_CASE(15)
#undef QADD_CASE
    }
}

mcp_status mcp__nn_run_qlinear_add(mcp_kernel_ctx *ctx) {
    const mcp_tensor *a = mcp_kin(ctx, 0), *as = mcp_kin(ctx, 1), *az = mcp_kin(ctx, 2);
    const mcp_tensor *b = mcp_kin(ctx, 3), *bs = mcp_kin(ctx, 4), *bz = mcp_kin(ctx, 5);
    const mcp_tensor *ys = mcp_kin(ctx, 6), *yz = mcp_kin(ctx, 7);
    if (!a || !as || !b || !bs || !ys || !yz)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs a, a_scale, b, b_scale, y_scale and y_zero_point are required");
    if (!q8_per_tensor(as, az, a->dtype) || !q8_per_tensor(bs, bz, b->dtype) || !q8_per_tensor(ys, yz, yz->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "operands must be 8-bit with one float scale and zero point each");
    if (a->rank != b->rank || memcmp(a->dims, b->dims, sizeof *a->dims * (size_t)a->rank) != 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'a' and 'b' must have the same shape");
    mcp_dtype ydt = yz->dtype;
    /* Pointwise, so any layout serves when both operands share it (the
     * layout an int8 convolution wrote them in): Y keeps it, padding
     * included. Otherwise both become plain. */
    const mcp_format *fmt = NULL;
    if (a->format || b->format) {
        if (mcp_format_same(a->format, b->format) && a->dtype == ydt && b->dtype == ydt) {
            fmt = a->format;
        } else {
            for (int k = 0; k <= 3; k += 3) {
                mcp_status st = mcp_tensor_make_plain(&ctx->inputs[k]->tensor, ctx->err);
                if (st != MCP_STATUS_OK) return st;
            }
        }
    }
    mcp_tensor *y = fmt ? mcp_kout_format(ctx, 0, ydt, a->rank, a->dims, fmt)
                        : mcp_kout_uninit(ctx, 0, ydt, a->rank, a->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    bool relu = mcp_kattr_int(ctx, "relu", 0) != 0;
    float sa = ((const float *)as->data)[0], sb = ((const float *)bs->data)[0], sy = ((const float *)ys->data)[0];
    int za = q8_zero_point(az), zb = q8_zero_point(bz);
    float zy = (float)q8_zero_point(yz);
    const float lo = ydt == MCP_DTYPE_UINT8 ? 0.0f : -128.0f, hi = ydt == MCP_DTYPE_UINT8 ? 255.0f : 127.0f;
    qadd_params p = {sa, sb, sy, (float)za, (float)zb, zy, lo, hi};
    int kind = (a->dtype == MCP_DTYPE_UINT8) | (b->dtype == MCP_DTYPE_UINT8) << 1 | (ydt == MCP_DTYPE_UINT8) << 2 |
               relu << 3;
    int64_t n = fmt ? (int64_t)fmt->nbytes : mcp_tensor_numel(a), chunk = 16384, nchunks = (n + chunk - 1) / chunk;
    int nt = mcp_kthreads(ctx, n * 4);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t lo_i = c * chunk, hi_i = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        qadd_chunk(kind, a->data, b->data, y->data, lo_i, hi_i, &p);
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__nn_run_quantize_linear(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *ys = mcp_kin(ctx, 1), *yzp = mcp_kin(ctx, 2);
    if (!x || !ys)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'x' and 'y_scale' are required");
    if (!mcp__nn_is_float(x->dtype) && x->dtype != MCP_DTYPE_INT32)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'x' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (!q_scale_ok(ys->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'y_scale' must be a float tensor");
    int64_t odt = mcp_kattr_int(ctx, "output_dtype", 0);
    if (yzp && odt && odt != (int64_t)yzp->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'output_dtype' (%lld) is not the type of 'y_zero_point' (%s)",
                         (long long)odt, mcp_dtype_name(yzp->dtype));
    mcp_dtype ydt = yzp ? yzp->dtype : odt > 0 && odt < MCP_DTYPE_COUNT ? (mcp_dtype)odt : MCP_DTYPE_UINT8;
    double lo = 0, hi = 0;
    bool to_float = q_float_out(ydt);
    if (!to_float && !q_range(ydt, &lo, &hi))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "output type %s is not a quantized type",
                         mcp_dtype_name(ydt));
    qaxis q;
    mcp_status st = qaxis_init(ctx, x, ys, yzp, "y_scale", "y_zero_point", &q);
    if (st != MCP_STATUS_OK) return st;
    if (x->dtype == MCP_DTYPE_FLOAT && q8_per_tensor(ys, yzp, ydt)) {
        mcp_tensor *y = mcp_kout_uninit(ctx, 0, ydt, x->rank, x->dims);
        if (!y) return MCP_STATUS_OUT_OF_MEMORY;
        quantize_f32_q8(ctx, x->data, ((const float *)ys->data)[0], q8_zero_point(yzp), ydt == MCP_DTYPE_UINT8, y->data,
                        mcp_tensor_numel(x));
        return MCP_STATUS_OK;
    }
    mcp_tensor *y = mcp_kout(ctx, 0, ydt, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    bool in_float = x->dtype == MCP_DTYPE_FLOAT && ys->dtype == MCP_DTYPE_FLOAT;
    int64_t prec = ctx->opset >= 23 ? mcp_kattr_int(ctx, "precision", 0) : 0;
    if (prec && prec != MCP_DTYPE_FLOAT && prec != MCP_DTYPE_DOUBLE && prec != MCP_DTYPE_FLOAT16 && prec != MCP_DTYPE_BFLOAT16)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "attribute 'precision' (%lld) is not a float type", (long long)prec);
    if (to_float || mcp_dtype_is_narrow(ydt) || mcp_dtype_is_narrow(ys->dtype) || prec) {
        /* The narrow types, and any explicit precision: per element in
         * double with the division rounded to its precision. */
        mcp_dtype p = prec ? (mcp_dtype)prec : ys->dtype;
        bool sat = mcp_kattr_int(ctx, "saturate", 1) != 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t pi = qaxis_at(&q, i);
            double d = q_divide(p, mcp_tensor_get_f64(x, i), mcp_tensor_get_f64(ys, pi));
            double zp = yzp ? mcp_tensor_get_f64(yzp, pi) : 0.0;
            if (to_float) q_store_float(y, i, d + zp, sat);
            else mcp_tensor_set_i64(y, i, (int64_t)saturate(nearbyint(d) + zp, lo, hi));
        }
        return MCP_STATUS_OK;
    }
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
    bool from_float = q_float_out(x->dtype);
    if (!q_range(x->dtype, &lo, &hi) && x->dtype != MCP_DTYPE_INT32 && !from_float)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'x' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (!q_scale_ok(xs->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'x_scale' must be a float tensor");
    int64_t odt = mcp_kattr_int(ctx, "output_dtype", 0);
    mcp_dtype ydt = odt ? (mcp_dtype)odt : ctx->opset >= 19 ? xs->dtype : MCP_DTYPE_FLOAT;
    if (!mcp__nn_is_float(ydt))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "output type %s is not a float type (set output_dtype)",
                         odt > 0 && odt < MCP_DTYPE_COUNT ? mcp_dtype_name(ydt) : "unknown");
    if (xzp && xzp->dtype != x->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'x_zero_point' must have the type of 'x'");
    qaxis q;
    mcp_status st = qaxis_init(ctx, x, xs, xzp, "x_scale", "x_zero_point", &q);
    if (st != MCP_STATUS_OK) return st;
    if (q8_per_tensor(xs, xzp, x->dtype) && ydt == MCP_DTYPE_FLOAT) {
        mcp_tensor *y = mcp_kout_uninit(ctx, 0, MCP_DTYPE_FLOAT, x->rank, x->dims);
        if (!y) return MCP_STATUS_OUT_OF_MEMORY;
        dequantize_q8_f32(ctx, x->data, ((const float *)xs->data)[0], q8_zero_point(xzp), x->dtype == MCP_DTYPE_UINT8,
                          y->data, mcp_tensor_numel(x));
        return MCP_STATUS_OK;
    }
    mcp_tensor *y = mcp_kout(ctx, 0, ydt, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    if (mcp_dtype_is_narrow(x->dtype) || mcp_dtype_is_narrow(xs->dtype) || ydt != xs->dtype) {
        /* (x - zero point) * scale, in the output's precision (float for
         * float16 / bfloat16, as the 8-bit path below). */
        for (int64_t i = 0; i < n; i++) {
            int64_t pi = qaxis_at(&q, i);
            double s = mcp_tensor_get_f64(xs, pi), d;
            if (from_float) d = mcp_tensor_get_f64(x, i) - (xzp ? mcp_tensor_get_f64(xzp, pi) : 0.0);
            else d = (double)(mcp_tensor_get_i64(x, i) - (xzp ? mcp_tensor_get_i64(xzp, pi) : 0));
            mcp_tensor_set_f64(y, i, ydt == MCP_DTYPE_DOUBLE ? d * s : (double)((float)d * (float)s));
        }
        return MCP_STATUS_OK;
    }
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

/* The smallest and largest of x[begin, end), folded into *mn / *mx; NaN
 * is skipped (as `v < mn` does). */
MCP_MULTIVERSION MCP_NO_TRAPPING_MATH static void
range_chunk(const float *x, int64_t begin, int64_t end, float *mn, float *mx)
{
    float lo = *mn, hi = *mx;
#pragma omp simd reduction(min : lo) reduction(max : hi)
    for (int64_t i = begin; i < end; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *mn = lo, *mx = hi;
}

/* min(0, x) and max(0, x) over n floats. */
static void float_range(mcp_kernel_ctx *ctx, const float *x, int64_t n, float *mn, float *mx)
{
    int64_t chunk = 16384, nchunks = (n + chunk - 1) / chunk;
    int nt = mcp_kthreads(ctx, n);
    float lo = 0.0f, hi = 0.0f;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1) reduction(min : lo) reduction(max : hi)
    for (int64_t c = 0; c < nchunks; c++) {
        float a = 0.0f, b = 0.0f;
        range_chunk(x, c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n, &a, &b);
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
    }
    *mn = lo, *mx = hi;
}

mcp_status mcp__nn_run_dynamic_quantize_linear(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'x' is required");
    if (!mcp__nn_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'x' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, MCP_DTYPE_UINT8, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    mcp_tensor *ys = mcp_kout(ctx, 1, MCP_DTYPE_FLOAT, 0, NULL);
    if (!ys) return MCP_STATUS_OUT_OF_MEMORY;
    mcp_tensor *yzp = mcp_kout(ctx, 2, MCP_DTYPE_UINT8, 0, NULL);
    if (!yzp) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    if (x->dtype == MCP_DTYPE_FLOAT) {
        /* Float32 (dynamically quantized transformers): vector loops. */
        float mn = 0.0f, mx = 0.0f;
        float_range(ctx, x->data, n, &mn, &mx);
        float scale = (mx - mn) / 255.0f;
        float zp = scale > 0.0f ? (float)saturate(nearbyintf(0.0f - mn / scale), 0.0, 255.0) : 0.0f;
        ((float *)ys->data)[0] = scale;
        ((uint8_t *)yzp->data)[0] = (uint8_t)zp;
        if (scale > 0.0f) quantize_f32_q8(ctx, x->data, scale, (int)zp, true, y->data, n);
        else memset(y->data, (int)zp, (size_t)n);
        return MCP_STATUS_OK;
    }
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

/*
 * MatMulIntegerScaled (internal, graph.h): MatMulInteger into a temporary,
 * then the Cast, the Mul by the product of the scales and the Add of the
 * bias in one pass, each rounded as those ops round.
 */
mcp_status mcp__nn_run_matmul_integer_scaled(mcp_kernel_ctx *ctx) {
    const mcp_tensor *as = mcp_kin(ctx, 4), *bs = mcp_kin(ctx, 5), *bias = mcp_kin(ctx, 6);
    if (!as || !bs || as->dtype != MCP_DTYPE_FLOAT || bs->dtype != MCP_DTYPE_FLOAT || mcp_tensor_numel(as) != 1 ||
        mcp_tensor_numel(bs) != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A_scale' and 'B_scale' must be one float each");
    mcp_value acc = {0};
    mcp_value *outs[1] = {&acc};
    mcp_kernel_ctx sub = *ctx;
    sub.n_inputs = ctx->n_inputs < 4 ? ctx->n_inputs : 4;
    sub.outputs = outs;
    sub.n_outputs = 1;
    sub.host = NULL; /* the accumulator takes the heap, not Y's planned memory */
    mcp_status st = mcp__nn_run_matmul_integer(&sub);
    if (st != MCP_STATUS_OK) {
        mcp_value_clear(&acc);
        return st;
    }
    const mcp_tensor *a = &acc.tensor;
    int64_t n = mcp_tensor_numel(a), cols = a->rank > 0 ? a->dims[a->rank - 1] : 1;
    if (bias && (bias->dtype != MCP_DTYPE_FLOAT || mcp_tensor_numel(bias) != cols)) {
        mcp_value_clear(&acc);
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'Bias' must hold %lld floats", (long long)cols);
    }
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, MCP_DTYPE_FLOAT, a->rank, a->dims);
    if (y) {
        float scale = ((const float *)as->data)[0] * ((const float *)bs->data)[0];
        const int32_t *x = a->data;
        float *yv = y->data;
        const float *b = bias ? bias->data : NULL;
        for (int64_t i = 0; i < n; i++) {
            float v = (float)x[i] * scale;
            yv[i] = b ? v + b[i % cols] : v;
        }
    }
    mcp_value_clear(&acc);
    return y ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;
}
