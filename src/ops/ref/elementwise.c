/*
 * Reference kernels: elementwise family (unary math and activations,
 * broadcasting binary arithmetic, comparisons and logic, the variadic
 * Max/Min/Sum/Mean, Clip, Where). Cast and CastLike live in
 * elementwise_cast.c.
 *
 * Every binary op goes through one numpy-style broadcasting iterator
 * (ew_iter) and one element dispatcher per value kind (double, int64,
 * uint64; see elementwise_util.h), so integer results are exact and wrap like
 * numpy. float16 and bfloat16 are computed in double and rounded on store.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ops/ref/elementwise_util.h"
#include "ops/ref/ref.h"

/* ---- broadcasting iteration ---- */

#define EW_ITER_MAX 4

/*
 * Walks an output shape in row-major order while tracking, for up to
 * EW_ITER_MAX operands, the element offset that numpy broadcasting maps each
 * output element to (stride 0 along broadcast dims).
 */
typedef struct ew_iter {
    int rank;
    int n;
    int64_t dims[MCP_MAX_RANK];
    int64_t idx[MCP_MAX_RANK];
    int64_t strides[EW_ITER_MAX][MCP_MAX_RANK];
    int64_t off[EW_ITER_MAX];
} ew_iter;

static void ew_iter_init(ew_iter *it, int rank, const int64_t *dims)
{
    memset(it, 0, sizeof *it);
    it->rank = rank;
    for (int d = 0; d < rank; d++) it->dims[d] = dims[d];
}

/* Adds an operand of shape (rank, dims), which must broadcast to the
 * iterator's shape. */
static void ew_iter_add(ew_iter *it, int rank, const int64_t *dims)
{
    MCP_ASSERT(it->n < EW_ITER_MAX);
    mcp_broadcast_strides(rank, dims, it->rank, it->dims, it->strides[it->n]);
    it->off[it->n] = 0;
    it->n++;
}

static void ew_iter_next(ew_iter *it)
{
    for (int d = it->rank - 1; d >= 0; d--) {
        it->idx[d]++;
        for (int k = 0; k < it->n; k++) it->off[k] += it->strides[k][d];
        if (it->idx[d] < it->dims[d]) return;
        for (int k = 0; k < it->n; k++) it->off[k] -= it->strides[k][d] * it->dims[d];
        it->idx[d] = 0;
    }
}

/* A read-only operand: a tensor's data seen through a (possibly reshaped)
 * shape, e.g. for legacy axis broadcasting. */
typedef struct ew_arg {
    mcp_dtype dtype;
    const void *data;
    int rank;
    int64_t dims[MCP_MAX_RANK];
} ew_arg;

static ew_arg ew_arg_of(const mcp_tensor *t)
{
    ew_arg a;
    memset(&a, 0, sizeof a);
    a.dtype = t->dtype;
    a.data = t->data;
    a.rank = t->rank;
    for (int d = 0; d < t->rank; d++) a.dims[d] = t->dims[d];
    return a;
}

static mcp_status ew_out(mcp_kernel_ctx *ctx, int i, mcp_dtype dt, int rank, const int64_t *dims,
                         mcp_tensor **out)
{
    *out = mcp_kout(ctx, i, dt, rank, dims);
    return *out ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;
}

static const char *ew_str_at(const void *data, int64_t i)
{
    const char *s = ((char *const *)data)[i];
    return s ? s : "";
}

/* ---- unary ops ---- */

enum {
    EW_UF_FLOAT = 1 << 0,    /* float inputs */
    EW_UF_INT = 1 << 1,      /* integer inputs, exact integer path */
    EW_UF_INT_F64 = 1 << 2,  /* integer inputs, computed in double */
    EW_UF_BOOL_OUT = 1 << 3, /* output is bool */
    EW_UF_BOOL_IN = 1 << 4,  /* input must be bool (and nothing else) */
};

/* The unary ops: X(id, op type, first opset, in-place inputs (see
 * mcp_kernel_def), flags). Their enum, their table and their kernel entries
 * are all made from this list. */
#define EW_UNARY_OPS(X) \
    X(ABS, "Abs", 1, 1u, EW_UF_FLOAT | EW_UF_INT) \
    X(NEG, "Neg", 1, 1u, EW_UF_FLOAT | EW_UF_INT) \
    X(SIGN, "Sign", 9, 0u, EW_UF_FLOAT | EW_UF_INT) \
    X(RECIPROCAL, "Reciprocal", 1, 1u, EW_UF_FLOAT) \
    X(FLOOR, "Floor", 1, 0u, EW_UF_FLOAT) \
    X(CEIL, "Ceil", 1, 0u, EW_UF_FLOAT) \
    X(ROUND, "Round", 11, 0u, EW_UF_FLOAT) \
    X(SQRT, "Sqrt", 1, 1u, EW_UF_FLOAT) \
    X(EXP, "Exp", 1, 1u, EW_UF_FLOAT) \
    X(LOG, "Log", 1, 1u, EW_UF_FLOAT) \
    X(ERF, "Erf", 9, 1u, EW_UF_FLOAT | EW_UF_INT_F64) \
    X(SIN, "Sin", 7, 0u, EW_UF_FLOAT) \
    X(COS, "Cos", 7, 0u, EW_UF_FLOAT) \
    X(TAN, "Tan", 7, 0u, EW_UF_FLOAT) \
    X(ASIN, "Asin", 7, 0u, EW_UF_FLOAT) \
    X(ACOS, "Acos", 7, 0u, EW_UF_FLOAT) \
    X(ATAN, "Atan", 7, 0u, EW_UF_FLOAT) \
    X(SINH, "Sinh", 9, 0u, EW_UF_FLOAT) \
    X(COSH, "Cosh", 9, 0u, EW_UF_FLOAT) \
    X(ASINH, "Asinh", 9, 0u, EW_UF_FLOAT) \
    X(ACOSH, "Acosh", 9, 0u, EW_UF_FLOAT) \
    X(ATANH, "Atanh", 9, 0u, EW_UF_FLOAT) \
    X(TANH, "Tanh", 1, 1u, EW_UF_FLOAT) \
    X(RELU, "Relu", 1, 1u, EW_UF_FLOAT | EW_UF_INT) \
    X(LEAKYRELU, "LeakyRelu", 1, 1u, EW_UF_FLOAT) \
    X(ELU, "Elu", 1, 1u, EW_UF_FLOAT) \
    X(SELU, "Selu", 1, 0u, EW_UF_FLOAT) \
    X(CELU, "Celu", 12, 0u, EW_UF_FLOAT) \
    X(SIGMOID, "Sigmoid", 1, 1u, EW_UF_FLOAT) \
    X(HARDSIGMOID, "HardSigmoid", 1, 1u, EW_UF_FLOAT) \
    X(HARDSWISH, "HardSwish", 14, 1u, EW_UF_FLOAT) \
    X(MISH, "Mish", 18, 1u, EW_UF_FLOAT) \
    X(SWISH, "Swish", 24, 1u, EW_UF_FLOAT) \
    X(SOFTPLUS, "Softplus", 1, 1u, EW_UF_FLOAT) \
    X(SOFTSIGN, "Softsign", 1, 0u, EW_UF_FLOAT) \
    X(THRESHOLDEDRELU, "ThresholdedRelu", 10, 0u, EW_UF_FLOAT) \
    X(SHRINK, "Shrink", 9, 0u, EW_UF_FLOAT | EW_UF_INT_F64) \
    X(GELU, "Gelu", 20, 1u, EW_UF_FLOAT) \
    X(ISINF, "IsInf", 10, 0u, EW_UF_FLOAT | EW_UF_BOOL_OUT) \
    X(ISNAN, "IsNaN", 9, 0u, EW_UF_FLOAT | EW_UF_BOOL_OUT) \
    X(NOT, "Not", 1, 0u, EW_UF_BOOL_IN) \
    X(BITWISENOT, "BitwiseNot", 18, 0u, EW_UF_INT)

typedef enum ew_unary_op {
#define EW_U_ENUM(id, name, since, inplace, flags) EW_U_##id,
    EW_UNARY_OPS(EW_U_ENUM)
#undef EW_U_ENUM
} ew_unary_op;
#define EW_U_ONE(...) +1
enum { EW_U_COUNT = 0 EW_UNARY_OPS(EW_U_ONE) };
#undef EW_U_ONE

typedef struct ew_unary_info {
    const char *name;
    ew_unary_op op;
    int flags;
} ew_unary_info;

static const ew_unary_info ew_unary_ops[] = {
#define EW_U_ROW(id, nm, since, inplace, fl) {nm, EW_U_##id, fl},
    EW_UNARY_OPS(EW_U_ROW)
#undef EW_U_ROW
};
_Static_assert(sizeof ew_unary_ops / sizeof ew_unary_ops[0] == EW_U_COUNT, "one row per unary op");

/* Attribute values of the parametrized activations (all default to the
 * spec's defaults; attributes are float32 in ONNX). */
typedef struct ew_uparams {
    double alpha;
    double beta;
    double gamma;
    double bias;
    double lambd;
    bool detect_positive;
    bool detect_negative;
    bool gelu_tanh;
} ew_uparams;

static mcp_status ew_uparams_read(mcp_kernel_ctx *ctx, ew_unary_op op, ew_uparams *p)
{
    memset(p, 0, sizeof *p);
    switch (op) {
    case EW_U_LEAKYRELU: p->alpha = mcp_kattr_float(ctx, "alpha", 0.01f); break;
    case EW_U_ELU:
    case EW_U_CELU:
    case EW_U_THRESHOLDEDRELU: p->alpha = mcp_kattr_float(ctx, "alpha", 1.0f); break;
    case EW_U_SELU:
        p->alpha = mcp_kattr_float(ctx, "alpha", 1.67326319217681884765625f);
        p->gamma = mcp_kattr_float(ctx, "gamma", 1.05070102214813232421875f);
        break;
    case EW_U_HARDSIGMOID:
        p->alpha = mcp_kattr_float(ctx, "alpha", 0.2f);
        p->beta = mcp_kattr_float(ctx, "beta", 0.5f);
        break;
    case EW_U_HARDSWISH:
        p->alpha = 1.0 / 6.0;
        p->beta = 0.5;
        break;
    case EW_U_SWISH: p->alpha = mcp_kattr_float(ctx, "alpha", 1.0f); break;
    case EW_U_SHRINK:
        p->bias = mcp_kattr_float(ctx, "bias", 0.0f);
        p->lambd = mcp_kattr_float(ctx, "lambd", 0.5f);
        break;
    case EW_U_ISINF:
        p->detect_positive = mcp_kattr_int(ctx, "detect_positive", 1) != 0;
        p->detect_negative = mcp_kattr_int(ctx, "detect_negative", 1) != 0;
        break;
    case EW_U_GELU: {
        const char *mode = mcp_kattr_string(ctx, "approximate", "none");
        if (strcmp(mode, "tanh") == 0) {
            p->gelu_tanh = true;
        } else if (strcmp(mode, "none") != 0) {
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'approximate' must be \"none\" or \"tanh\", got \"%s\"",
                             mode);
        }
        break;
    }
    default: break;
    }
    if (op == EW_U_CELU && p->alpha == 0.0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'alpha' must not be 0");
    return MCP_STATUS_OK;
}

/* Round half to even, independent of the current rounding mode. */
static double ew_round_half_even(double x)
{
    if (!isfinite(x)) return x;
    double r = floor(x);
    double diff = x - r;
    if (diff > 0.5) return r + 1.0;
    if (diff < 0.5) return r;
    return fmod(r, 2.0) == 0.0 ? r : r + 1.0;
}

static double ew_unary_f64(ew_unary_op op, double x, const ew_uparams *p)
{
    switch (op) {
    case EW_U_ABS: return fabs(x);
    case EW_U_NEG: return -x;
    case EW_U_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
    case EW_U_RECIPROCAL: return 1.0 / x;
    case EW_U_FLOOR: return floor(x);
    case EW_U_CEIL: return ceil(x);
    case EW_U_ROUND: return ew_round_half_even(x);
    case EW_U_SQRT: return sqrt(x);
    case EW_U_EXP: return exp(x);
    case EW_U_LOG: return log(x);
    case EW_U_ERF: return erf(x);
    case EW_U_SIN: return sin(x);
    case EW_U_COS: return cos(x);
    case EW_U_TAN: return tan(x);
    case EW_U_ASIN: return asin(x);
    case EW_U_ACOS: return acos(x);
    case EW_U_ATAN: return atan(x);
    case EW_U_SINH: return sinh(x);
    case EW_U_COSH: return cosh(x);
    case EW_U_ASINH: return asinh(x);
    case EW_U_ACOSH: return acosh(x);
    case EW_U_ATANH: return atanh(x);
    case EW_U_TANH: return tanh(x);
    case EW_U_RELU: return x > 0 ? x : (x == x ? 0.0 : x);
    case EW_U_LEAKYRELU: return x < 0 ? p->alpha * x : x;
    case EW_U_ELU: return x < 0 ? p->alpha * (exp(x) - 1.0) : x;
    case EW_U_SELU: return x <= 0 ? p->gamma * (p->alpha * exp(x) - p->alpha) : p->gamma * x;
    case EW_U_CELU: return fmax(0.0, x) + fmin(0.0, p->alpha * (exp(x / p->alpha) - 1.0));
    case EW_U_SIGMOID:
        /* Two forms so neither exp() overflows. */
        if (x >= 0) return 1.0 / (1.0 + exp(-x));
        return exp(x) / (1.0 + exp(x));
    case EW_U_HARDSIGMOID:
    case EW_U_HARDSWISH: {
        double h = p->alpha * x + p->beta;
        h = h < 0 ? 0.0 : h > 1 ? 1.0 : h;
        return op == EW_U_HARDSWISH ? x * h : h;
    }
    case EW_U_SOFTPLUS:
        /* log(1 + exp(x)) without overflow for large x. */
        if (x > 0) return x + log1p(exp(-x));
        return log1p(exp(x));
    case EW_U_MISH: {
        /* x tanh(softplus(x)), softplus as above. */
        double sp = x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
        return x * tanh(sp);
    }
    case EW_U_SWISH: {
        /* x sigmoid(alpha x), the sigmoid's two forms as above. */
        double a = p->alpha * x;
        return x * (a >= 0 ? 1.0 / (1.0 + exp(-a)) : exp(a) / (1.0 + exp(a)));
    }
    case EW_U_SOFTSIGN: return x / (1.0 + fabs(x));
    case EW_U_THRESHOLDEDRELU: return x > p->alpha ? x : 0.0;
    case EW_U_SHRINK:
        if (x < -p->lambd) return x + p->bias;
        if (x > p->lambd) return x - p->bias;
        return 0.0;
    case EW_U_GELU:
        if (p->gelu_tanh) {
            double k = sqrt(2.0 / 3.14159265358979323846);
            return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
        }
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case EW_U_ISINF:
        return ((isinf(x) && x > 0 && p->detect_positive) ||
                (isinf(x) && x < 0 && p->detect_negative))
                   ? 1.0
                   : 0.0;
    case EW_U_ISNAN: return isnan(x) ? 1.0 : 0.0;
    case EW_U_NOT: return x == 0 ? 1.0 : 0.0;
    case EW_U_BITWISENOT: return x;
    }
    return x;
}

/* Signed integer ops wrap like numpy (computed on uint64 to avoid UB). */
static int64_t ew_unary_i64(ew_unary_op op, int64_t x)
{
    switch (op) {
    case EW_U_ABS: return x < 0 ? (int64_t)(0u - (uint64_t)x) : x;
    case EW_U_NEG: return (int64_t)(0u - (uint64_t)x);
    case EW_U_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case EW_U_RELU: return x > 0 ? x : 0;
    case EW_U_BITWISENOT: return ~x;
    default: return x;
    }
}

static uint64_t ew_unary_u64(ew_unary_op op, uint64_t x)
{
    switch (op) {
    case EW_U_NEG: return 0u - x;
    case EW_U_SIGN: return x != 0;
    case EW_U_NOT: return x == 0;
    case EW_U_BITWISENOT: return ~x;
    default: return x; /* Abs, Relu */
    }
}

/*
 * ---- float32 unary fast path ----
 * Float tensors skip the per-element dtype dispatch and the round trip
 * through double. Where the double result rounds to the same float (Abs,
 * Neg, Relu, LeakyRelu, ThresholdedRelu, Sign, Reciprocal, Floor, Ceil,
 * Sqrt) the results are identical, as they are for HardSigmoid and
 * HardSwish, still computed in double; the others use float functions
 * (mcp__ew_expf for Exp, Sigmoid and Gelu's tanh form, libm's erff, tanhf,
 * logf, ... for the rest), within an ulp or two of the double path.
 *
 * Where it costs nothing, selects pick between values already computed and
 * constants: GCC does not if-convert, so does not vectorize, a select whose
 * arm computes, since float ops may trap. LeakyRelu and PRelu keep such a
 * select (x < 0 ? a * x : x); forms without one change the result for an
 * infinite or NaN slope.
 */

/* Elements per parallel chunk: large enough to amortize scheduling, small
 * enough that two threads split tensors of a few hundred KB. */
#define EW_F32_BLOCK 16384

/* Relative cost per element of the float32 unary ops: 1 for a few
 * instructions, 8 for an exp or a libm call. Scales the work that decides
 * threading. */
static int ew_unary_f32_cost(ew_unary_op op)
{
    switch (op) {
    case EW_U_ABS:
    case EW_U_NEG:
    case EW_U_SIGN:
    case EW_U_RECIPROCAL:
    case EW_U_FLOOR:
    case EW_U_CEIL:
    case EW_U_SQRT:
    case EW_U_RELU:
    case EW_U_LEAKYRELU:
    case EW_U_THRESHOLDEDRELU:
    case EW_U_HARDSIGMOID:
    case EW_U_HARDSWISH:
    case EW_U_SOFTSIGN:
        return 1;
    case EW_U_EXP:
    case EW_U_LOG:
    case EW_U_ERF:
    case EW_U_TANH:
    case EW_U_ELU:
    case EW_U_SELU:
    case EW_U_SIGMOID:
    case EW_U_SOFTPLUS:
    case EW_U_GELU:
        return 8;
    default:
        return 0; /* no float32 fast path */
    }
}

/* y[i] = op(x[i]) for i < n. Each element is read before its own output
 * is written and no other element is read, so x == y (in-place execution)
 * is fine; callers pass either distinct or equal pointers, never
 * overlapping ones (see ew_unary_f32_run). */
static inline __attribute__((always_inline)) void
ew_unary_f32(ew_unary_op op, const ew_uparams *p, const float *x, float *y, int64_t n)
{
    const float alpha = (float)p->alpha, gamma = (float)p->gamma;
    switch (op) {
    case EW_U_ABS:
        for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]);
        break;
    case EW_U_NEG:
        for (int64_t i = 0; i < n; i++) y[i] = -x[i];
        break;
    case EW_U_SIGN:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = v > 0 ? 1.0f : v < 0 ? -1.0f : v;
        }
        break;
    case EW_U_RECIPROCAL:
        for (int64_t i = 0; i < n; i++) y[i] = 1.0f / x[i];
        break;
    case EW_U_FLOOR:
        for (int64_t i = 0; i < n; i++) y[i] = floorf(x[i]);
        break;
    case EW_U_CEIL:
        for (int64_t i = 0; i < n; i++) y[i] = ceilf(x[i]);
        break;
    case EW_U_SQRT:
        for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
        break;
    case EW_U_EXP:
        for (int64_t i = 0; i < n; i++) y[i] = mcp__ew_expf(x[i]);
        break;
    case EW_U_LOG:
        for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]);
        break;
    case EW_U_ERF:
        for (int64_t i = 0; i < n; i++) y[i] = erff(x[i]);
        break;
    case EW_U_TANH:
        for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
        break;
    case EW_U_RELU:
        /* NaN passes through and -0 becomes +0, as in the double path. */
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = (v > 0 || v != v) ? v : 0.0f;
        }
        break;
    case EW_U_LEAKYRELU:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = v < 0 ? alpha * v : v;
        }
        break;
    case EW_U_THRESHOLDEDRELU:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = v > alpha ? v : 0.0f;
        }
        break;
    case EW_U_ELU:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = v < 0 ? alpha * expm1f(v) : v;
        }
        break;
    case EW_U_SELU:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = v <= 0 ? gamma * alpha * expm1f(v) : gamma * v;
        }
        break;
    case EW_U_SIGMOID:
        /* exp of -|x| only, so it never overflows; NaN stays NaN. */
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            float e = mcp__ew_expf(-fabsf(v));
            y[i] = (v >= 0 ? 1.0f : e) / (1.0f + e);
        }
        break;
    case EW_U_HARDSIGMOID:
    case EW_U_HARDSWISH:
        /* In double like the generic path: alpha * x + beta cancels near
         * the lower corner, where float would lose most digits. */
        for (int64_t i = 0; i < n; i++) {
            double v = x[i];
            double h = p->alpha * v + p->beta;
            h = h < 0 ? 0.0 : h;
            h = h > 1 ? 1.0 : h;
            y[i] = (float)(op == EW_U_HARDSWISH ? v * h : h);
        }
        break;
    case EW_U_SOFTPLUS:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = v > 0 ? v + log1pf(expf(-v)) : log1pf(expf(v));
        }
        break;
    case EW_U_SOFTSIGN:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + fabsf(x[i]));
        break;
    case EW_U_GELU:
        /* 1 + erf(z) = erfc(-z) and 1 + tanh(u) = 2 / (1 + exp(-2u)) keep
         * the negative tail accurate, where 1 + erff(z) would cancel. */
        if (p->gelu_tanh) {
            const float k = 0.797884560802865355f; /* sqrt(2 / pi) */
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                y[i] = v / (1.0f + mcp__ew_expf(-2.0f * k * (v + 0.044715f * v * v * v)));
            }
        } else {
            for (int64_t i = 0; i < n; i++) {
                float v = x[i];
                y[i] = 0.5f * v * erfcf(v * -0.707106781186547524f);
            }
        }
        break;
    default:
        break;
    }
}

/* The two instances of ew_unary_f32: distinct buffers, where restrict lets
 * GCC vectorize without a runtime overlap check, and one buffer read and
 * written in place, where the single pointer tells GCC the same. */
static void ew_unary_f32_apart(ew_unary_op op, const ew_uparams *p, const float *restrict x,
                               float *restrict y, int64_t n)
{
    ew_unary_f32(op, p, x, y, n);
}

static void ew_unary_f32_inplace(ew_unary_op op, const ew_uparams *p, float *y, int64_t n)
{
    ew_unary_f32(op, p, y, y, n);
}

/* y = op(x) over n floats in chunks, on up to ctx->threads threads. y is
 * either x itself (in-place execution) or a buffer that does not overlap
 * it. */
static void ew_unary_f32_run(const mcp_kernel_ctx *ctx, ew_unary_op op, const ew_uparams *p,
                             const float *x, float *y, int64_t n)
{
    int nt = mcp_kthreads(ctx, n * ew_unary_f32_cost(op));
    int64_t nblk = (n + EW_F32_BLOCK - 1) / EW_F32_BLOCK;
    bool same = x == y;
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
    for (int64_t b = 0; b < nblk; b++) {
        int64_t lo = b * EW_F32_BLOCK;
        int64_t len = n - lo < EW_F32_BLOCK ? n - lo : EW_F32_BLOCK;
        if (same)
            ew_unary_f32_inplace(op, p, y + lo, len);
        else
            ew_unary_f32_apart(op, p, x + lo, y + lo, len);
    }
}

static const ew_unary_info *ew_unary_find(const char *name)
{
    for (size_t i = 0; i < sizeof ew_unary_ops / sizeof ew_unary_ops[0]; i++)
        if (strcmp(ew_unary_ops[i].name, name) == 0) return &ew_unary_ops[i];
    return NULL;
}

static mcp_status ew_run_unary(mcp_kernel_ctx *ctx)
{
    const ew_unary_info *info = ew_unary_find(ctx->node->op_type);
    if (!info) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "not an elementwise unary op");
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");

    ew_kind kind = ew_kind_of(x->dtype);
    bool is_bool = x->dtype == MCP_DTYPE_BOOL;
    bool ok;
    if (info->flags & EW_UF_BOOL_IN)
        ok = is_bool;
    else if (kind == EW_KIND_FLOAT)
        ok = (info->flags & EW_UF_FLOAT) != 0;
    else if (kind == EW_KIND_INT || (kind == EW_KIND_UINT && !is_bool))
        ok = (info->flags & (EW_UF_INT | EW_UF_INT_F64)) != 0;
    else
        ok = false;
    if (!ok)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(x->dtype));

    ew_uparams p;
    mcp_status st = ew_uparams_read(ctx, info->op, &p);
    if (st != MCP_STATUS_OK) return st;

    mcp_dtype odt = (info->flags & EW_UF_BOOL_OUT) ? MCP_DTYPE_BOOL : x->dtype;
    mcp_tensor *y;
    st = ew_out(ctx, 0, odt, x->rank, x->dims, &y);
    if (st != MCP_STATUS_OK) return st;

    int64_t n = mcp_tensor_numel(x);
    if (x->dtype == MCP_DTYPE_FLOAT && odt == MCP_DTYPE_FLOAT && ew_unary_f32_cost(info->op) > 0) {
        ew_unary_f32_run(ctx, info->op, &p, x->data, y->data, n);
        return MCP_STATUS_OK;
    }
    bool exact_int = (info->flags & EW_UF_INT) != 0 || (info->flags & EW_UF_BOOL_IN) != 0;
    for (int64_t i = 0; i < n; i++) {
        if (kind == EW_KIND_FLOAT || !exact_int) {
            double v = ew_unary_f64(info->op, ew_load_f64(x->dtype, x->data, i), &p);
            ew_store_f64(odt, y->data, i, v);
        } else if (kind == EW_KIND_INT) {
            ew_store_i64(odt, y->data, i, ew_unary_i64(info->op, ew_load_i64(x->dtype, x->data, i)));
        } else {
            ew_store_u64(odt, y->data, i, ew_unary_u64(info->op, ew_load_u64(x->dtype, x->data, i)));
        }
    }
    return MCP_STATUS_OK;
}

/* ---- binary ops ---- */

typedef enum ew_binary_op {
    EW_B_ADD,
    EW_B_SUB,
    EW_B_MUL,
    EW_B_DIV,
    EW_B_MOD,
    EW_B_POW,
    EW_B_MAX,
    EW_B_MIN,
    EW_B_PRELU,
    EW_B_SHL,
    EW_B_SHR,
    EW_B_BITAND,
    EW_B_BITOR,
    EW_B_BITXOR,
    /* Ops from here on produce bool. */
    EW_B_AND,
    EW_B_OR,
    EW_B_XOR,
    EW_B_EQ,
    EW_B_LT,
    EW_B_LE,
    EW_B_GT,
    EW_B_GE,
} ew_binary_op;

enum {
    EW_BF_FLOAT = 1 << 0,  /* float inputs */
    EW_BF_INT = 1 << 1,    /* integer inputs (signed and unsigned) */
    EW_BF_UINT = 1 << 2,   /* unsigned integer inputs only (with EW_BF_INT unset) */
    EW_BF_BOOL = 1 << 3,   /* bool inputs */
    EW_BF_STRING = 1 << 4, /* string inputs */
    EW_BF_MIXED = 1 << 5,  /* the two inputs may have different types (Pow) */
    EW_BF_LEGACY = 1 << 6, /* before opset 7: `broadcast` / `axis` attributes */
};

typedef struct ew_binary_info {
    const char *name;
    ew_binary_op op;
    int flags;
    const char *in0;
    const char *in1;
} ew_binary_info;

#define EW_BF_NUM (EW_BF_FLOAT | EW_BF_INT)

/* The binary ops with a table row: X(id, op type, first opset, in-place
 * inputs, flags, input names). Their table and kernel entries are made from
 * this list. */
#define EW_BINARY_OPS(X) \
    X(ADD, "Add", 1, 3u, EW_BF_NUM | EW_BF_LEGACY, "A", "B") \
    X(SUB, "Sub", 1, 3u, EW_BF_NUM | EW_BF_LEGACY, "A", "B") \
    X(MUL, "Mul", 1, 3u, EW_BF_NUM | EW_BF_LEGACY, "A", "B") \
    X(DIV, "Div", 1, 3u, EW_BF_NUM | EW_BF_LEGACY, "A", "B") \
    X(MOD, "Mod", 10, 0u, EW_BF_NUM, "A", "B") \
    X(POW, "Pow", 1, 0u, EW_BF_NUM | EW_BF_MIXED | EW_BF_LEGACY, "X", "Y") \
    X(PRELU, "PRelu", 1, 0u, EW_BF_NUM, "X", "slope") \
    X(SHL, "BitShift", 11, 0u, EW_BF_UINT, "X", "Y") \
    X(BITAND, "BitwiseAnd", 18, 0u, EW_BF_INT, "A", "B") \
    X(BITOR, "BitwiseOr", 18, 0u, EW_BF_INT, "A", "B") \
    X(BITXOR, "BitwiseXor", 18, 0u, EW_BF_INT, "A", "B") \
    X(AND, "And", 1, 0u, EW_BF_BOOL | EW_BF_LEGACY, "A", "B") \
    X(OR, "Or", 1, 0u, EW_BF_BOOL | EW_BF_LEGACY, "A", "B") \
    X(XOR, "Xor", 1, 0u, EW_BF_BOOL | EW_BF_LEGACY, "A", "B") \
    X(EQ, "Equal", 1, 0u, EW_BF_NUM | EW_BF_BOOL | EW_BF_STRING | EW_BF_LEGACY, "A", "B") \
    X(LT, "Less", 1, 0u, EW_BF_NUM | EW_BF_BOOL | EW_BF_LEGACY, "A", "B") \
    X(LE, "LessOrEqual", 12, 0u, EW_BF_NUM | EW_BF_BOOL, "A", "B") \
    X(GT, "Greater", 1, 0u, EW_BF_NUM | EW_BF_BOOL | EW_BF_LEGACY, "A", "B") \
    X(GE, "GreaterOrEqual", 12, 0u, EW_BF_NUM | EW_BF_BOOL, "A", "B")

static const ew_binary_info ew_binary_ops[] = {
#define EW_B_ROW(id, nm, since, inplace, fl, a, b) {nm, EW_B_##id, fl, a, b},
    EW_BINARY_OPS(EW_B_ROW)
#undef EW_B_ROW
};

static bool ew_binary_bool_out(ew_binary_op op) { return op >= EW_B_AND; }

static double ew_binary_f64(ew_binary_op op, double a, double b, bool fmod_mode)
{
    switch (op) {
    case EW_B_ADD: return a + b;
    case EW_B_SUB: return a - b;
    case EW_B_MUL: return a * b;
    case EW_B_DIV: return a / b;
    case EW_B_MOD: {
        double r = fmod(a, b);
        /* fmod=0 follows the divisor's sign (numpy.mod). */
        if (!fmod_mode && r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
    }
    case EW_B_POW: return pow(a, b);
    case EW_B_MAX: return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b);
    case EW_B_MIN: return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b);
    case EW_B_PRELU: return a < 0 ? a * b : a;
    case EW_B_AND: return (a != 0) && (b != 0);
    case EW_B_OR: return (a != 0) || (b != 0);
    case EW_B_XOR: return (a != 0) != (b != 0);
    case EW_B_EQ: return a == b;
    case EW_B_LT: return a < b;
    case EW_B_LE: return a <= b;
    case EW_B_GT: return a > b;
    case EW_B_GE: return a >= b;
    default: return 0.0; /* bit ops have no float form; rejected earlier */
    }
}

/* Integer power by squaring, wrapping modulo 2^64. */
static uint64_t ew_ipow_u64(uint64_t base, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1u) r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}

static int64_t ew_ipow_i64(int64_t base, int64_t e)
{
    if (e < 0) {
        /* Only 1 and -1 have integer reciprocals; the rest truncate to 0. */
        if (base == 1) return 1;
        if (base == -1) return (e & 1) ? -1 : 1;
        return 0;
    }
    return (int64_t)ew_ipow_u64((uint64_t)base, (uint64_t)e);
}

static int64_t ew_binary_i64(ew_binary_op op, int64_t a, int64_t b, bool fmod_mode)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case EW_B_ADD: return (int64_t)(ua + ub);
    case EW_B_SUB: return (int64_t)(ua - ub);
    case EW_B_MUL: return (int64_t)(ua * ub);
    case EW_B_DIV:
        /* C truncation; numpy gives 0 for division by zero. */
        if (b == 0) return 0;
        if (b == -1) return (int64_t)(0u - ua);
        return a / b;
    case EW_B_MOD: {
        if (b == 0 || b == -1) return 0;
        int64_t r = a % b;
        if (!fmod_mode && r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
    }
    case EW_B_POW: return ew_ipow_i64(a, b);
    case EW_B_MAX: return a > b ? a : b;
    case EW_B_MIN: return a < b ? a : b;
    case EW_B_PRELU: return a < 0 ? (int64_t)(ua * ub) : a;
    case EW_B_SHL: return (b < 0 || b >= 64) ? 0 : (int64_t)(ua << b);
    case EW_B_SHR: return (b < 0 || b >= 64) ? 0 : (int64_t)(ua >> b);
    case EW_B_BITAND: return a & b;
    case EW_B_BITOR: return a | b;
    case EW_B_BITXOR: return a ^ b;
    case EW_B_AND: return (a != 0) && (b != 0);
    case EW_B_OR: return (a != 0) || (b != 0);
    case EW_B_XOR: return (a != 0) != (b != 0);
    case EW_B_EQ: return a == b;
    case EW_B_LT: return a < b;
    case EW_B_LE: return a <= b;
    case EW_B_GT: return a > b;
    case EW_B_GE: return a >= b;
    }
    return 0;
}

static uint64_t ew_binary_u64(ew_binary_op op, uint64_t a, uint64_t b, bool fmod_mode)
{
    (void)fmod_mode; /* both modes agree when nothing is negative */
    switch (op) {
    case EW_B_ADD: return a + b;
    case EW_B_SUB: return a - b;
    case EW_B_MUL: return a * b;
    case EW_B_DIV: return b == 0 ? 0 : a / b;
    case EW_B_MOD: return b == 0 ? 0 : a % b;
    case EW_B_POW: return ew_ipow_u64(a, b);
    case EW_B_MAX: return a > b ? a : b;
    case EW_B_MIN: return a < b ? a : b;
    case EW_B_PRELU: return a;
    case EW_B_SHL: return b >= 64 ? 0 : a << b;
    case EW_B_SHR: return b >= 64 ? 0 : a >> b;
    case EW_B_BITAND: return a & b;
    case EW_B_BITOR: return a | b;
    case EW_B_BITXOR: return a ^ b;
    case EW_B_AND: return (a != 0) && (b != 0);
    case EW_B_OR: return (a != 0) || (b != 0);
    case EW_B_XOR: return (a != 0) != (b != 0);
    case EW_B_EQ: return a == b;
    case EW_B_LT: return a < b;
    case EW_B_LE: return a <= b;
    case EW_B_GT: return a > b;
    case EW_B_GE: return a >= b;
    }
    return 0;
}

/* Pow with an exponent whose type may differ from the base's; the result
 * has the base's type. */
static void ew_pow_elem(const ew_arg *a, int64_t ia, const ew_arg *b, int64_t ib, mcp_tensor *out,
                        int64_t io)
{
    ew_kind ka = ew_kind_of(a->dtype), kb = ew_kind_of(b->dtype);
    if (ka == EW_KIND_FLOAT || kb == EW_KIND_FLOAT) {
        double v = pow(ew_load_f64(a->dtype, a->data, ia), ew_load_f64(b->dtype, b->data, ib));
        ew_store_f64(out->dtype, out->data, io, v);
    } else if (ka == EW_KIND_INT) {
        int64_t e;
        if (kb == EW_KIND_UINT) {
            uint64_t ue = ew_load_u64(b->dtype, b->data, ib);
            e = ue > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)ue;
        } else {
            e = ew_load_i64(b->dtype, b->data, ib);
        }
        ew_store_i64(out->dtype, out->data, io, ew_ipow_i64(ew_load_i64(a->dtype, a->data, ia), e));
    } else {
        uint64_t base = ew_load_u64(a->dtype, a->data, ia);
        uint64_t r;
        if (kb == EW_KIND_INT && ew_load_i64(b->dtype, b->data, ib) < 0)
            r = base == 1 ? 1 : 0;
        else
            r = ew_ipow_u64(base, ew_load_u64(b->dtype, b->data, ib));
        ew_store_u64(out->dtype, out->data, io, r);
    }
}

/*
 * ---- float32 binary fast path ----
 * The output is seen as rows x inner, where `inner` is the longest suffix of
 * the output shape over which each operand is either contiguous (FULL) or a
 * single repeated value (ONE): same shapes give one row, a scalar operand
 * gives ONE over everything, [N,C,H,W] * [N,C,1,1] gives rows of H*W with
 * the second operand ONE per row, [B,S,D] + [D] gives rows of D with both
 * FULL. Each row is then a plain loop the compiler vectorizes. Add, Sub,
 * Mul, Div, Max, Min and PRelu give exactly the double path's results
 * (their double result rounds to the same float); Pow uses powf except for
 * the exponents 1, 2 and 0.5.
 */

enum { EW_F32_FULL = 0, EW_F32_ONE = 1 };

typedef struct ew_rows {
    int64_t inner;               /* elements per row */
    int64_t rows;
    int mode_a, mode_b;          /* EW_F32_FULL or EW_F32_ONE over a row */
    int orank;                   /* dims before the row */
    int64_t odims[MCP_MAX_RANK];
    int64_t sa[MCP_MAX_RANK];    /* element strides of a and b over those dims */
    int64_t sb[MCP_MAX_RANK];
} ew_rows;

static void ew_rows_plan(const ew_arg *a, const ew_arg *b, int rank, const int64_t *dims,
                         ew_rows *r)
{
    int64_t sa[MCP_MAX_RANK], sb[MCP_MAX_RANK];
    mcp_broadcast_strides(a->rank, a->dims, rank, dims, sa);
    mcp_broadcast_strides(b->rank, b->dims, rank, dims, sb);
    int64_t inner = 1;
    int ma = -1, mb = -1;
    int d = rank - 1;
    for (; d >= 0; d--) {
        if (dims[d] == 1) continue;
        /* A FULL operand's stride here equals the elements already in the
         * row; a broadcast one has stride 0. */
        int da = sa[d] == 0 ? EW_F32_ONE : sa[d] == inner ? EW_F32_FULL : -1;
        int db = sb[d] == 0 ? EW_F32_ONE : sb[d] == inner ? EW_F32_FULL : -1;
        if (da < 0 || db < 0) break;
        if (ma < 0) {
            ma = da;
            mb = db;
        } else if (da != ma || db != mb) {
            break;
        }
        inner *= dims[d];
    }
    r->inner = inner;
    r->mode_a = ma < 0 ? EW_F32_FULL : ma;
    r->mode_b = mb < 0 ? EW_F32_FULL : mb;
    r->orank = d + 1;
    r->rows = 1;
    for (int k = 0; k <= d; k++) {
        r->odims[k] = dims[k];
        r->sa[k] = sa[k];
        r->sb[k] = sb[k];
        r->rows *= dims[k];
    }
}

/* Offsets in a and b of the first element of row `row`. */
static void ew_rows_at(const ew_rows *r, int64_t row, int64_t *oa, int64_t *ob)
{
    int64_t a = 0, b = 0;
    for (int k = r->orank - 1; k >= 0; k--) {
        int64_t c = row % r->odims[k];
        row /= r->odims[k];
        a += c * r->sa[k];
        b += c * r->sb[k];
    }
    *oa = a;
    *ob = b;
}

/* Which exponent a Pow with one exponent value gets a cheaper form for. */
enum { EW_POW_ANY = 0, EW_POW_ONE, EW_POW_TWO, EW_POW_HALF };

/* Loops over n elements for each operand mode: a[i] or *a, b[i] or *b
 * (EXPR may leave one of x, y unused). */
#define EW_F32_LOOPS(EXPR)                                                    \
    do {                                                                      \
        if (ma == EW_F32_FULL && mb == EW_F32_FULL) {                         \
            for (int64_t i = 0; i < n; i++) {                                 \
                float x = a[i], y = b[i];                                     \
                o[i] = (EXPR);                                                \
                (void)x, (void)y;                                             \
            }                                                                 \
        } else if (ma == EW_F32_FULL) {                                       \
            const float y = b[0];                                             \
            for (int64_t i = 0; i < n; i++) {                                 \
                float x = a[i];                                               \
                o[i] = (EXPR);                                                \
                (void)x, (void)y;                                             \
            }                                                                 \
        } else {                                                              \
            const float x = a[0];                                             \
            for (int64_t i = 0; i < n; i++) {                                 \
                float y = b[i];                                               \
                o[i] = (EXPR);                                                \
                (void)x, (void)y;                                             \
            }                                                                 \
        }                                                                     \
    } while (0)

/*
 * o[i] = op(a, b) for one row of n elements. `a` may be `o` itself (the
 * variadic folds); GCC's runtime alias check lets equal pointers take the
 * vector loop.
 */
static void ew_binary_f32_row(ew_binary_op op, int ma, int mb, int pow_kind, const float *a,
                              const float *b, float *o, int64_t n)
{
    switch (op) {
    case EW_B_ADD: EW_F32_LOOPS(x + y); break;
    case EW_B_SUB: EW_F32_LOOPS(x - y); break;
    case EW_B_MUL: EW_F32_LOOPS(x * y); break;
    case EW_B_DIV: EW_F32_LOOPS(x / y); break;
    /* NaN in either operand gives NaN; ties give the second, as in the
     * double path. */
    case EW_B_MAX: EW_F32_LOOPS((x > y || x != x) ? x : y); break;
    case EW_B_MIN: EW_F32_LOOPS((x < y || x != x) ? x : y); break;
    case EW_B_PRELU: EW_F32_LOOPS(x < 0 ? x * y : x); break;
    case EW_B_POW:
        if (pow_kind == EW_POW_ONE) {
            EW_F32_LOOPS(x);
        } else if (pow_kind == EW_POW_TWO) {
            /* x * x is exact before its one rounding, like pow in double. */
            EW_F32_LOOPS(x * x);
        } else if (pow_kind == EW_POW_HALF) {
            /* pow(x, 0.5) is sqrt(x) except pow(-0, 0.5) = +0 (the + 0.0f)
             * and pow(-inf, 0.5) = +inf. */
            EW_F32_LOOPS(x == -INFINITY ? INFINITY : sqrtf(x) + 0.0f);
        } else {
            EW_F32_LOOPS(powf(x, y));
        }
        break;
    default: break;
    }
}

#undef EW_F32_LOOPS

static bool ew_binary_f32_op(ew_binary_op op)
{
    switch (op) {
    case EW_B_ADD:
    case EW_B_SUB:
    case EW_B_MUL:
    case EW_B_DIV:
    case EW_B_MAX:
    case EW_B_MIN:
    case EW_B_PRELU:
    case EW_B_POW:
        return true;
    default:
        return false;
    }
}

/* out = op(a, b) on float32 tensors, tasks spread over up to ctx->threads
 * threads (each element is computed the same way whatever the split). */
static void ew_binary_f32(const mcp_kernel_ctx *ctx, ew_binary_op op, const ew_arg *a,
                          const ew_arg *b, mcp_tensor *out)
{
    int64_t n = mcp_tensor_numel(out);
    if (n == 0) return;
    ew_rows r;
    ew_rows_plan(a, b, out->rank, out->dims, &r);
    int pow_kind = EW_POW_ANY;
    if (op == EW_B_POW && mcp_shape_numel(b->rank, b->dims) == 1) {
        float e = ((const float *)b->data)[0];
        pow_kind = e == 1.0f ? EW_POW_ONE : e == 2.0f ? EW_POW_TWO : e == 0.5f ? EW_POW_HALF
                                                                              : EW_POW_ANY;
    }
    /* Tasks cover whole rows, or pieces of one long row, of about
     * EW_F32_BLOCK elements. */
    int64_t inner = r.inner;
    int64_t pieces = inner > EW_F32_BLOCK ? (inner + EW_F32_BLOCK - 1) / EW_F32_BLOCK : 1;
    int64_t piece_len = (inner + pieces - 1) / pieces;
    int64_t rows_per_task = inner >= EW_F32_BLOCK ? 1 : EW_F32_BLOCK / (inner ? inner : 1);
    int64_t ntask = pieces > 1 ? r.rows * pieces : (r.rows + rows_per_task - 1) / rows_per_task;
    int64_t cost = op == EW_B_POW && pow_kind == EW_POW_ANY ? 8 : 1;
    int nt = mcp_kthreads(ctx, n * cost);
    if (nt > ntask) nt = (int)ntask;
    const float *av = a->data, *bv = b->data;
    float *ov = out->data;
    int ma = r.mode_a, mb = r.mode_b;
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
    for (int64_t t = 0; t < ntask; t++) {
        int64_t row0, row1, j0, j1;
        if (pieces > 1) {
            row0 = t / pieces;
            row1 = row0 + 1;
            j0 = (t % pieces) * piece_len;
            j1 = j0 + piece_len < inner ? j0 + piece_len : inner;
        } else {
            row0 = t * rows_per_task;
            row1 = row0 + rows_per_task < r.rows ? row0 + rows_per_task : r.rows;
            j0 = 0;
            j1 = inner;
        }
        for (int64_t row = row0; row < row1; row++) {
            int64_t oa, ob;
            ew_rows_at(&r, row, &oa, &ob);
            const float *pa = av + oa + (ma == EW_F32_FULL ? j0 : 0);
            const float *pb = bv + ob + (mb == EW_F32_FULL ? j0 : 0);
            ew_binary_f32_row(op, ma, mb, pow_kind, pa, pb, ov + row * inner + j0, j1 - j0);
        }
    }
}

/*
 * out = op(a, b) with numpy broadcasting of a and b to out's shape. `a` or
 * `b` may alias out when it has out's shape (the variadic folds and
 * in-place execution rely on this: each element is read before it is
 * written, at the same index).
 */
static void ew_binary_apply(const mcp_kernel_ctx *ctx, ew_binary_op op, bool fmod_mode,
                            const ew_arg *a, const ew_arg *b, mcp_tensor *out)
{
    if (a->dtype == MCP_DTYPE_FLOAT && b->dtype == MCP_DTYPE_FLOAT &&
        out->dtype == MCP_DTYPE_FLOAT && ew_binary_f32_op(op)) {
        ew_binary_f32(ctx, op, a, b, out);
        return;
    }
    ew_iter it;
    ew_iter_init(&it, out->rank, out->dims);
    ew_iter_add(&it, a->rank, a->dims);
    ew_iter_add(&it, b->rank, b->dims);
    int64_t n = mcp_tensor_numel(out);
    ew_kind kind = ew_kind_of(a->dtype);
    for (int64_t i = 0; i < n; i++, ew_iter_next(&it)) {
        int64_t ia = it.off[0], ib = it.off[1];
        if (op == EW_B_POW) {
            ew_pow_elem(a, ia, b, ib, out, i);
        } else if (a->dtype == MCP_DTYPE_STRING) {
            bool eq = strcmp(ew_str_at(a->data, ia), ew_str_at(b->data, ib)) == 0;
            ew_store_u64(out->dtype, out->data, i, eq);
        } else if (kind == EW_KIND_FLOAT) {
            double v = ew_binary_f64(op, ew_load_f64(a->dtype, a->data, ia),
                                     ew_load_f64(b->dtype, b->data, ib), fmod_mode);
            ew_store_f64(out->dtype, out->data, i, v);
        } else if (kind == EW_KIND_INT) {
            int64_t v = ew_binary_i64(op, ew_load_i64(a->dtype, a->data, ia),
                                      ew_load_i64(b->dtype, b->data, ib), fmod_mode);
            ew_store_i64(out->dtype, out->data, i, v);
        } else {
            uint64_t v = ew_binary_u64(op, ew_load_u64(a->dtype, a->data, ia),
                                       ew_load_u64(b->dtype, b->data, ib), fmod_mode);
            ew_store_u64(out->dtype, out->data, i, v);
        }
    }
}

/* Checks that a dtype suits a binary op's flags. */
static bool ew_binary_dtype_ok(const ew_binary_info *info, mcp_dtype dt)
{
    switch (ew_kind_of(dt)) {
    case EW_KIND_FLOAT: return (info->flags & EW_BF_FLOAT) != 0;
    case EW_KIND_INT: return (info->flags & EW_BF_INT) != 0;
    case EW_KIND_UINT:
        if (dt == MCP_DTYPE_BOOL) return (info->flags & EW_BF_BOOL) != 0;
        return (info->flags & (EW_BF_INT | EW_BF_UINT)) != 0;
    default: return dt == MCP_DTYPE_STRING && (info->flags & EW_BF_STRING) != 0;
    }
}

/*
 * Before opset 7, Add/Sub/Mul/Div/Pow/And/Or/Xor/Equal/Less/Greater
 * broadcast only B onto A, and only with broadcast=1; `axis` says where B's
 * dims start within A's. Reshapes `b` so numpy broadcasting gives that
 * result.
 */
static mcp_status ew_legacy_broadcast(mcp_kernel_ctx *ctx, const ew_binary_info *info,
                                      const ew_arg *a, ew_arg *b)
{
    if (!(info->flags & EW_BF_LEGACY) || ctx->opset >= 7) return MCP_STATUS_OK;
    if (mcp_kattr_int(ctx, "broadcast", 0) == 0) return MCP_STATUS_OK;
    if (!mcp_kattr(ctx, "axis")) return MCP_STATUS_OK; /* suffix alignment = numpy */
    if (b->rank > a->rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' has rank %d, more than input '%s' (rank %d)", info->in1,
                         b->rank, info->in0, a->rank);
    int axis;
    if (!mcp_axis_normalize(mcp_kattr_int(ctx, "axis", 0), a->rank, &axis) ||
        axis + b->rank > a->rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' does not place input '%s' (rank %d) within rank %d",
                         info->in1, b->rank, a->rank);
    int64_t dims[MCP_MAX_RANK];
    for (int d = 0; d < a->rank; d++) dims[d] = 1;
    for (int d = 0; d < b->rank; d++) dims[axis + d] = b->dims[d];
    b->rank = a->rank;
    for (int d = 0; d < a->rank; d++) b->dims[d] = dims[d];
    return MCP_STATUS_OK;
}

/* Before opset 7, PRelu's 1-D slope of size C applies per channel (axis 1). */
static void ew_prelu_legacy_slope(const mcp_kernel_ctx *ctx, const ew_arg *x, ew_arg *slope)
{
    if (ctx->opset >= 7 || slope->rank != 1 || x->rank < 2) return;
    if (slope->dims[0] == 1 || slope->dims[0] != x->dims[1]) return;
    int64_t c = slope->dims[0];
    slope->rank = x->rank - 1;
    slope->dims[0] = c;
    for (int d = 1; d < slope->rank; d++) slope->dims[d] = 1;
}

static bool ew_shapes_equal(int ra, const int64_t *a, int rb, const int64_t *b)
{
    if (ra != rb) return false;
    for (int d = 0; d < ra; d++)
        if (a[d] != b[d]) return false;
    return true;
}

static mcp_status ew_bcast_fail(mcp_kernel_ctx *ctx, const char *n0, const ew_arg *a, const char *n1,
                                const ew_arg *b)
{
    char sa[128], sb[128];
    mcp_shape_str(a->rank, a->dims, sa, sizeof sa);
    mcp_shape_str(b->rank, b->dims, sb, sizeof sb);
    return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                     "inputs '%s' %s and '%s' %s do not broadcast", n0, sa, n1, sb);
}

static const ew_binary_info *ew_binary_find(const char *name)
{
    for (size_t i = 0; i < sizeof ew_binary_ops / sizeof ew_binary_ops[0]; i++)
        if (strcmp(ew_binary_ops[i].name, name) == 0) return &ew_binary_ops[i];
    return NULL;
}

static mcp_status ew_run_binary(mcp_kernel_ctx *ctx)
{
    const ew_binary_info *info = ew_binary_find(ctx->node->op_type);
    if (!info) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "not an elementwise binary op");
    const mcp_tensor *ta = mcp_kin(ctx, 0);
    const mcp_tensor *tb = mcp_kin(ctx, 1);
    if (!ta) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is missing", info->in0);
    if (!tb) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is missing", info->in1);
    if (!ew_binary_dtype_ok(info, ta->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input '%s' has unsupported type %s",
                         info->in0, mcp_dtype_name(ta->dtype));
    if (info->flags & EW_BF_MIXED) {
        if (ew_kind_of(tb->dtype) == EW_KIND_OTHER || tb->dtype == MCP_DTYPE_BOOL)
            return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input '%s' has unsupported type %s",
                             info->in1, mcp_dtype_name(tb->dtype));
    } else if (ta->dtype != tb->dtype) {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs '%s' (%s) and '%s' (%s) must have the same type", info->in0,
                         mcp_dtype_name(ta->dtype), info->in1, mcp_dtype_name(tb->dtype));
    }

    ew_binary_op op = info->op;
    bool fmod_mode = false;
    if (op == EW_B_MOD) {
        fmod_mode = mcp_kattr_int(ctx, "fmod", 0) != 0;
    } else if (op == EW_B_SHL) {
        const char *dir = mcp_kattr_string(ctx, "direction", "");
        if (strcmp(dir, "LEFT") == 0)
            op = EW_B_SHL;
        else if (strcmp(dir, "RIGHT") == 0)
            op = EW_B_SHR;
        else
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"%s\"",
                             dir);
    }

    ew_arg a = ew_arg_of(ta), b = ew_arg_of(tb);
    mcp_status st = ew_legacy_broadcast(ctx, info, &a, &b);
    if (st != MCP_STATUS_OK) return st;
    if (op == EW_B_PRELU) ew_prelu_legacy_slope(ctx, &a, &b);

    int rank;
    int64_t dims[MCP_MAX_RANK];
    if (!mcp_broadcast_shapes(a.rank, a.dims, b.rank, b.dims, &rank, dims))
        return ew_bcast_fail(ctx, info->in0, &a, info->in1, &b);
    if (op == EW_B_PRELU && !ew_shapes_equal(rank, dims, a.rank, a.dims))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'slope' must broadcast to the shape of input 'X'");

    mcp_dtype odt = ew_binary_bool_out(op) ? MCP_DTYPE_BOOL : ta->dtype;
    mcp_tensor *out;
    st = ew_out(ctx, 0, odt, rank, dims, &out);
    if (st != MCP_STATUS_OK) return st;
    ew_binary_apply(ctx, op, fmod_mode, &a, &b, out);
    return MCP_STATUS_OK;
}

/* ---- variadic Max / Min / Sum / Mean ---- */

static mcp_status ew_run_variadic(mcp_kernel_ctx *ctx)
{
    const char *name = ctx->node->op_type;
    ew_binary_op op;
    bool mean = false;
    if (strcmp(name, "Max") == 0) {
        op = EW_B_MAX;
    } else if (strcmp(name, "Min") == 0) {
        op = EW_B_MIN;
    } else if (strcmp(name, "Sum") == 0) {
        op = EW_B_ADD;
    } else if (strcmp(name, "Mean") == 0) {
        op = EW_B_ADD;
        mean = true;
    } else {
        return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "not a variadic elementwise op");
    }
    if (ctx->n_inputs < 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "needs at least one input");

    const mcp_tensor *t0 = mcp_kin(ctx, 0);
    if (!t0) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 0 is missing");
    ew_kind kind = ew_kind_of(t0->dtype);
    if (kind == EW_KIND_OTHER || t0->dtype == MCP_DTYPE_BOOL || (mean && kind != EW_KIND_FLOAT))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 0 has unsupported type %s",
                         mcp_dtype_name(t0->dtype));

    int rank = t0->rank;
    int64_t dims[MCP_MAX_RANK];
    for (int d = 0; d < rank; d++) dims[d] = t0->dims[d];
    for (int k = 1; k < ctx->n_inputs; k++) {
        const mcp_tensor *t = mcp_kin(ctx, k);
        if (!t) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input %d is missing", k);
        if (t->dtype != t0->dtype)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input %d has type %s, input 0 has %s", k, mcp_dtype_name(t->dtype),
                             mcp_dtype_name(t0->dtype));
        int64_t nd[MCP_MAX_RANK];
        int nr;
        if (!mcp_broadcast_shapes(rank, dims, t->rank, t->dims, &nr, nd)) {
            char s0[128], s1[128];
            mcp_shape_str(rank, dims, s0, sizeof s0);
            mcp_shape_str(t->rank, t->dims, s1, sizeof s1);
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input %d %s does not broadcast with the inputs before it %s", k, s1,
                             s0);
        }
        rank = nr;
        for (int d = 0; d < rank; d++) dims[d] = nd[d];
    }

    mcp_tensor *out;
    mcp_status st = ew_out(ctx, 0, t0->dtype, rank, dims, &out);
    if (st != MCP_STATUS_OK) return st;

    /* out = input 0 broadcast, then fold the others in. */
    int64_t n = mcp_tensor_numel(out);
    size_t es = (size_t)mcp_dtype_size(t0->dtype);
    ew_iter it;
    ew_iter_init(&it, rank, dims);
    ew_iter_add(&it, t0->rank, t0->dims);
    for (int64_t i = 0; i < n; i++, ew_iter_next(&it))
        memcpy((char *)out->data + (size_t)i * es, (const char *)t0->data + (size_t)it.off[0] * es,
               es);

    ew_arg acc = ew_arg_of(out);
    for (int k = 1; k < ctx->n_inputs; k++) {
        ew_arg b = ew_arg_of(mcp_kin(ctx, k));
        ew_binary_apply(ctx, op, false, &acc, &b, out);
    }
    if (mean && out->dtype == MCP_DTYPE_FLOAT) {
        /* Float division rounds to the float that the double path stores. */
        float cnt = (float)ctx->n_inputs;
        float *ov = out->data;
        for (int64_t i = 0; i < n; i++) ov[i] = ov[i] / cnt;
    } else if (mean) {
        double cnt = (double)ctx->n_inputs;
        for (int64_t i = 0; i < n; i++)
            ew_store_f64(out->dtype, out->data, i, ew_load_f64(out->dtype, out->data, i) / cnt);
    }
    return MCP_STATUS_OK;
}

/* ---- Clip ---- */

/* A bound of Clip in the input's kind. */
typedef struct ew_bound {
    bool set;
    double f;
    int64_t i;
    uint64_t u;
} ew_bound;

static mcp_status ew_clip_bound_input(mcp_kernel_ctx *ctx, int idx, const char *name,
                                      const mcp_tensor *x, ew_bound *bd)
{
    const mcp_tensor *t = mcp_kin(ctx, idx);
    if (!t || mcp_tensor_numel(t) == 0) return MCP_STATUS_OK;
    if (mcp_tensor_numel(t) != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must be a scalar, it has %lld elements", name,
                         (long long)mcp_tensor_numel(t));
    if (t->dtype != x->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' has type %s, input 'input' has %s", name,
                         mcp_dtype_name(t->dtype), mcp_dtype_name(x->dtype));
    bd->set = true;
    bd->f = ew_load_f64(t->dtype, t->data, 0);
    bd->i = ew_load_i64(t->dtype, t->data, 0);
    bd->u = ew_load_u64(t->dtype, t->data, 0);
    return MCP_STATUS_OK;
}

static void ew_clip_bound_attr(double v, ew_bound *bd)
{
    bd->set = true;
    bd->f = v;
    bd->i = ew_f64_to_i64(v);
    bd->u = ew_f64_to_u64(v);
}

/* Clip on float32: the same comparisons as the generic loop (NaN passes
 * through), in chunks on up to ctx->threads threads. y is x itself
 * (in-place execution) or does not overlap it; element i is read before it
 * is written, and no pointer is restrict, so both are defined (GCC checks
 * the overlap at run time and still vectorizes). */
static void ew_clip_f32(const mcp_kernel_ctx *ctx, const float *x, float *y, int64_t n, float lo,
                        float hi)
{
    int nt = mcp_kthreads(ctx, n);
    int64_t nblk = (n + EW_F32_BLOCK - 1) / EW_F32_BLOCK;
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
    for (int64_t b = 0; b < nblk; b++) {
        int64_t lo_i = b * EW_F32_BLOCK;
        int64_t hi_i = n - lo_i < EW_F32_BLOCK ? n : lo_i + EW_F32_BLOCK;
        for (int64_t i = lo_i; i < hi_i; i++) {
            float v = x[i];
            v = v < lo ? lo : v;
            y[i] = v > hi ? hi : v;
        }
    }
}

static mcp_status ew_run_clip(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is missing");
    ew_kind kind = ew_kind_of(x->dtype);
    if (kind == EW_KIND_OTHER || x->dtype == MCP_DTYPE_BOOL)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'input' has unsupported type %s",
                         mcp_dtype_name(x->dtype));

    ew_bound lo, hi;
    memset(&lo, 0, sizeof lo);
    memset(&hi, 0, sizeof hi);
    if (ctx->opset < 11) {
        /* Bounds are attributes, defaulting to float's lowest / max. */
        ew_clip_bound_attr(mcp_kattr_float(ctx, "min", -FLT_MAX), &lo);
        ew_clip_bound_attr(mcp_kattr_float(ctx, "max", FLT_MAX), &hi);
    } else {
        mcp_status st = ew_clip_bound_input(ctx, 1, "min", x, &lo);
        if (st != MCP_STATUS_OK) return st;
        st = ew_clip_bound_input(ctx, 2, "max", x, &hi);
        if (st != MCP_STATUS_OK) return st;
    }

    mcp_tensor *y;
    mcp_status st = ew_out(ctx, 0, x->dtype, x->rank, x->dims, &y);
    if (st != MCP_STATUS_OK) return st;
    int64_t n = mcp_tensor_numel(x);
    if (x->dtype == MCP_DTYPE_FLOAT) {
        /* The bounds came from float values, so they convert exactly. */
        ew_clip_f32(ctx, x->data, y->data, n, lo.set ? (float)lo.f : -INFINITY,
                    hi.set ? (float)hi.f : INFINITY);
        return MCP_STATUS_OK;
    }
    /* min(max(x, lo), hi), as numpy.clip; NaN passes through. */
    for (int64_t i = 0; i < n; i++) {
        if (kind == EW_KIND_FLOAT) {
            double v = ew_load_f64(x->dtype, x->data, i);
            if (lo.set && v < lo.f) v = lo.f;
            if (hi.set && v > hi.f) v = hi.f;
            ew_store_f64(x->dtype, y->data, i, v);
        } else if (kind == EW_KIND_INT) {
            int64_t v = ew_load_i64(x->dtype, x->data, i);
            if (lo.set && v < lo.i) v = lo.i;
            if (hi.set && v > hi.i) v = hi.i;
            ew_store_i64(x->dtype, y->data, i, v);
        } else {
            uint64_t v = ew_load_u64(x->dtype, x->data, i);
            if (lo.set && v < lo.u) v = lo.u;
            if (hi.set && v > hi.u) v = hi.u;
            ew_store_u64(x->dtype, y->data, i, v);
        }
    }
    return MCP_STATUS_OK;
}

/* ---- Where ---- */

static mcp_status ew_run_where(mcp_kernel_ctx *ctx)
{
    static const char *const names[3] = {"condition", "X", "Y"};
    const mcp_tensor *t[3];
    for (int k = 0; k < 3; k++) {
        t[k] = mcp_kin(ctx, k);
        if (!t[k])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is missing", names[k]);
    }
    if (t[0]->dtype != MCP_DTYPE_BOOL)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'condition' must be bool, got %s",
                         mcp_dtype_name(t[0]->dtype));
    if (t[1]->dtype != t[2]->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'X' (%s) and 'Y' (%s) must have the same type",
                         mcp_dtype_name(t[1]->dtype), mcp_dtype_name(t[2]->dtype));
    mcp_dtype dt = t[1]->dtype;
    bool is_str = dt == MCP_DTYPE_STRING;
    if (!is_str && mcp_dtype_size(dt) <= 0)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(dt));

    int rank = t[0]->rank;
    int64_t dims[MCP_MAX_RANK];
    for (int d = 0; d < rank; d++) dims[d] = t[0]->dims[d];
    for (int k = 1; k < 3; k++) {
        int64_t nd[MCP_MAX_RANK];
        int nr;
        if (!mcp_broadcast_shapes(rank, dims, t[k]->rank, t[k]->dims, &nr, nd))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input '%s' does not broadcast with the inputs before it", names[k]);
        rank = nr;
        for (int d = 0; d < rank; d++) dims[d] = nd[d];
    }

    mcp_tensor *out;
    mcp_status st = ew_out(ctx, 0, dt, rank, dims, &out);
    if (st != MCP_STATUS_OK) return st;

    ew_iter it;
    ew_iter_init(&it, rank, dims);
    for (int k = 0; k < 3; k++) ew_iter_add(&it, t[k]->rank, t[k]->dims);
    int64_t n = mcp_tensor_numel(out);
    size_t es = is_str ? 0 : (size_t)mcp_dtype_size(dt);
    const uint8_t *cond = (const uint8_t *)t[0]->data;
    for (int64_t i = 0; i < n; i++, ew_iter_next(&it)) {
        int src = cond[it.off[0]] ? 1 : 2;
        int64_t off = it.off[src];
        if (is_str) {
            const char *s = ew_str_at(t[src]->data, off);
            if (mcp_tensor_set_string(out, i, s, strlen(s)) != MCP_STATUS_OK)
                return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory copying strings");
        } else {
            memcpy((char *)out->data + (size_t)i * es,
                   (const char *)t[src]->data + (size_t)off * es, es);
        }
    }
    return MCP_STATUS_OK;
}

/* ---- kernel table ---- */

#define EW_K(op, since, fn)                                                    \
    {                                                                         \
        .domain = "", .op_type = op, .since_version = since, .until_version = 0, \
        .run = fn                                                             \
    }
/* A pointwise kernel whose output element i depends only on input element
 * i (and on broadcast operands, which are never the aliased one: the
 * executor aliases only inputs of the output's byte size): output 0 may
 * take the storage of the inputs in `mask`. */
#define EW_KI(op, since, fn, mask)                                              \
    {                                                                         \
        .domain = "", .op_type = op, .since_version = since, .until_version = 0, \
        .run = fn, .inplace_inputs = mask                                     \
    }

const mcp_kernel_def mcp__ref_elementwise_kernels[] = {
#define EW_U_KERNEL(id, nm, since, inplace, fl) EW_KI(nm, since, ew_run_unary, inplace),
#define EW_B_KERNEL(id, nm, since, inplace, fl, a, b) EW_KI(nm, since, ew_run_binary, inplace),
    EW_UNARY_OPS(EW_U_KERNEL)
    EW_BINARY_OPS(EW_B_KERNEL)
#undef EW_U_KERNEL
#undef EW_B_KERNEL
    /* variadic */
    EW_K("Max", 1, ew_run_variadic),
    EW_K("Min", 1, ew_run_variadic),
    EW_K("Sum", 1, ew_run_variadic),
    EW_K("Mean", 1, ew_run_variadic),
    /* others */
    EW_KI("Clip", 1, ew_run_clip, 1u),
    EW_K("Where", 9, ew_run_where),
    /* The conversions take every narrow type. */
    {.domain = "", .op_type = "Cast", .since_version = 1, .run = mcp__ew_run_cast, .narrow_types = MCP_NARROW_ALL},
    {.domain = "", .op_type = "CastLike", .since_version = 15, .run = mcp__ew_run_castlike,
     .narrow_types = MCP_NARROW_ALL},
};
const int mcp__ref_elementwise_kernel_count =
    (int)(sizeof(mcp__ref_elementwise_kernels) / sizeof(mcp__ref_elementwise_kernels[0]));
