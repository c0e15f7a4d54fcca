/*
 * Reference kernels: reduce family. This file holds the table, the Reduce*
 * ops and ArgMax/ArgMin; the other ops of the family live in reduce_*.c.
 */
#include "ops/ref/reduce_util.h"

typedef enum red_op {
    RED_SUM = 0,
    RED_MEAN,
    RED_MAX,
    RED_MIN,
    RED_PROD,
    RED_L1,
    RED_L2,
    RED_LOGSUM,
    RED_LOGSUMEXP,
    RED_SUMSQUARE,
} red_op;

/* Smallest / largest value of an integer element type, as int64 (signed) or
 * uint64 (unsigned). */
static int64_t red_smin(mcp_dtype d)
{
    switch (d) {
    case MCP_DTYPE_INT8: return INT8_MIN;
    case MCP_DTYPE_INT16: return INT16_MIN;
    case MCP_DTYPE_INT32: return INT32_MIN;
    default: return INT64_MIN;
    }
}

static int64_t red_smax(mcp_dtype d)
{
    switch (d) {
    case MCP_DTYPE_INT8: return INT8_MAX;
    case MCP_DTYPE_INT16: return INT16_MAX;
    case MCP_DTYPE_INT32: return INT32_MAX;
    default: return INT64_MAX;
    }
}

static uint64_t red_umax(mcp_dtype d)
{
    switch (d) {
    case MCP_DTYPE_BOOL: return 1;
    case MCP_DTYPE_UINT8: return UINT8_MAX;
    case MCP_DTYPE_UINT16: return UINT16_MAX;
    case MCP_DTYPE_UINT32: return UINT32_MAX;
    default: return UINT64_MAX;
    }
}

/*
 * Reads the axes of a Reduce node into mask[] (true = reduced). Returns
 * *noop = true when the node asks for identity (empty axes with
 * noop_with_empty_axes). Axes come from input 1 for ReduceSum since opset 13
 * and for every Reduce op since opset 18, from the attribute before.
 */
static mcp_status red_axes(mcp_kernel_ctx *ctx, bool from_input, int rank, bool *mask,
                           bool *noop)
{
    int64_t n = 0;
    const int64_t *attr_axes = NULL;
    const mcp_tensor *at = NULL;
    *noop = false;
    if (from_input) {
        at = mcp_kin(ctx, 1);
        if (at) {
            if (at->dtype != MCP_DTYPE_INT64 && at->dtype != MCP_DTYPE_INT32)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'axes' must be int64, got %s", mcp_dtype_name(at->dtype));
            if (at->rank > 1)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'axes' must be 1-D, got rank %d", at->rank);
            n = mcp_tensor_numel(at);
        }
    } else {
        attr_axes = mcp_kattr_ints(ctx, "axes", &n);
    }
    for (int i = 0; i < rank; i++) mask[i] = false;
    if (n == 0) {
        if (from_input && mcp_kattr_int(ctx, "noop_with_empty_axes", 0) != 0) {
            *noop = true;
            return MCP_STATUS_OK;
        }
        for (int i = 0; i < rank; i++) mask[i] = true;
        return MCP_STATUS_OK;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t a = at ? mcp__red_ld_i64(at->dtype, at->data, k) : attr_axes[k];
        int ax;
        if (!mcp_axis_normalize(a, rank, &ax))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "axis %lld of 'axes' is out of range for rank %d", (long long)a,
                             rank);
        if (mask[ax])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "'axes' names axis %lld more than once", (long long)a);
        mask[ax] = true;
    }
    return MCP_STATUS_OK;
}

static double red_finish_f(red_op op, double acc, int64_t count)
{
    switch (op) {
    case RED_MEAN: return acc / (double)count;
    case RED_L2: return sqrt(acc);
    case RED_LOGSUM: return log(acc);
    default: return acc;
    }
}

/* Float path: accumulate in double. */
static void red_float(red_op op, const mcp_tensor *x, const bool *mask, double *acc,
                      int64_t n_out, int64_t count)
{
    int64_t n = mcp_tensor_numel(x);
    mcp__red_walk w;
    double init = 0.0;
    if (op == RED_PROD) init = 1.0;
    if (op == RED_MAX || op == RED_LOGSUMEXP) init = -INFINITY;
    if (op == RED_MIN) init = INFINITY;
    for (int64_t o = 0; o < n_out; o++) acc[o] = init;

    mcp__red_walk_init(&w, x, mask);
    for (int64_t i = 0; i < n; i++, mcp__red_walk_next(&w)) {
        double v = mcp__red_ld_f64(x->dtype, x->data, i);
        double *a = &acc[w.off];
        switch (op) {
        case RED_SUM:
        case RED_MEAN:
        case RED_LOGSUM: *a += v; break;
        case RED_MAX:
        case RED_LOGSUMEXP:
            if (v > *a || v != v) {
                if (*a == *a) *a = v;
            }
            break;
        case RED_MIN:
            if (v < *a || v != v) {
                if (*a == *a) *a = v;
            }
            break;
        case RED_PROD: *a *= v; break;
        case RED_L1: *a += fabs(v); break;
        case RED_L2:
        case RED_SUMSQUARE: *a += v * v; break;
        }
    }
    if (op == RED_LOGSUMEXP) {
        /* Second pass: log(sum(exp(x - max))) + max keeps large inputs finite. */
        double *sum = (double *)mcp_calloc((size_t)(n_out ? n_out : 1), sizeof(double));
        if (sum) {
            mcp__red_walk_init(&w, x, mask);
            for (int64_t i = 0; i < n; i++, mcp__red_walk_next(&w)) {
                double m = acc[w.off];
                if (isinf(m) || m != m) continue;
                sum[w.off] += exp(mcp__red_ld_f64(x->dtype, x->data, i) - m);
            }
            for (int64_t o = 0; o < n_out; o++)
                if (!isinf(acc[o]) && acc[o] == acc[o]) acc[o] += log(sum[o]);
            mcp_free(sum);
        } else {
            /* Without scratch, fall back to the direct formula. */
            for (int64_t o = 0; o < n_out; o++) acc[o] = 0.0;
            mcp__red_walk_init(&w, x, mask);
            for (int64_t i = 0; i < n; i++, mcp__red_walk_next(&w))
                acc[w.off] += exp(mcp__red_ld_f64(x->dtype, x->data, i));
            for (int64_t o = 0; o < n_out; o++) acc[o] = log(acc[o]);
        }
        return;
    }
    for (int64_t o = 0; o < n_out; o++) acc[o] = red_finish_f(op, acc[o], count);
}

/*
 * Integer path. Sums and products wrap in uint64 (two's complement, so the
 * result is the same for signed data); max/min compare in the element's
 * signedness; mean divides exactly; ops that leave the integers (L2, LogSum,
 * LogSumExp) compute in double and truncate like numpy's astype.
 */
static mcp_status red_int(mcp_kernel_ctx *ctx, red_op op, const mcp_tensor *x, const bool *mask,
                          mcp_tensor *y, int64_t n_out, int64_t count)
{
    int64_t n = mcp_tensor_numel(x);
    bool sgn = mcp__red_kind_of(x->dtype) == MCP__RED_SIGNED;
    mcp__red_walk w;

    if (op == RED_LOGSUM || op == RED_LOGSUMEXP) {
        double *acc = (double *)mcp_calloc((size_t)(n_out ? n_out : 1), sizeof(double));
        if (!acc) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        mcp__red_walk_init(&w, x, mask);
        for (int64_t i = 0; i < n; i++, mcp__red_walk_next(&w)) {
            double v = mcp__red_ld_f64(x->dtype, x->data, i);
            acc[w.off] += op == RED_LOGSUMEXP ? exp(v) : v;
        }
        for (int64_t o = 0; o < n_out; o++) mcp__red_st_f64(y->dtype, y->data, o, log(acc[o]));
        mcp_free(acc);
        return MCP_STATUS_OK;
    }

    uint64_t *acc = (uint64_t *)mcp_calloc((size_t)(n_out ? n_out : 1), sizeof(uint64_t));
    if (!acc) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    uint64_t init = 0;
    if (op == RED_PROD) init = 1;
    if (op == RED_MAX) init = sgn ? (uint64_t)red_smin(x->dtype) : 0;
    if (op == RED_MIN) init = sgn ? (uint64_t)red_smax(x->dtype) : red_umax(x->dtype);
    for (int64_t o = 0; o < n_out; o++) acc[o] = init;

    mcp__red_walk_init(&w, x, mask);
    for (int64_t i = 0; i < n; i++, mcp__red_walk_next(&w)) {
        uint64_t v = mcp__red_ld_u64(x->dtype, x->data, i);
        uint64_t *a = &acc[w.off];
        switch (op) {
        case RED_SUM:
        case RED_MEAN: *a += v; break;
        case RED_PROD: *a *= v; break;
        case RED_L1: *a += (sgn && (int64_t)v < 0) ? 0 - v : v; break;
        case RED_L2:
        case RED_SUMSQUARE: *a += v * v; break;
        case RED_MAX:
            if (sgn ? (int64_t)v > (int64_t)*a : v > *a) *a = v;
            break;
        case RED_MIN:
            if (sgn ? (int64_t)v < (int64_t)*a : v < *a) *a = v;
            break;
        default: break;
        }
    }
    for (int64_t o = 0; o < n_out; o++) {
        uint64_t a = acc[o];
        if (op == RED_MEAN) {
            if (count == 0) a = 0;
            else if (sgn) a = (uint64_t)((int64_t)a / count);
            else a = a / (uint64_t)count;
        }
        if (op == RED_L2) {
            double s = sgn ? (double)(int64_t)a : (double)a;
            mcp__red_st_f64(y->dtype, y->data, o, sqrt(s));
        } else if (sgn) {
            mcp__red_st_i64(y->dtype, y->data, o, (int64_t)a);
        } else {
            mcp__red_st_u64(y->dtype, y->data, o, a);
        }
    }
    mcp_free(acc);
    return MCP_STATUS_OK;
}

/* Whether the reduced axes are exactly the trailing ones, so that each
 * output element reduces one contiguous row of the input. */
static bool red_mask_is_suffix(const bool *mask, int rank)
{
    int i = rank;
    while (i > 0 && mask[i - 1]) i--;
    for (int k = 0; k < i; k++)
        if (mask[k]) return false;
    return true;
}

/* ReduceSum / ReduceMean of float32 rows of `count` elements (trailing
 * axes), summed in double (mcp__red_sum_f32), rows split over threads. */
static void red_rows_f32(const mcp_kernel_ctx *ctx, bool mean, const float *x, float *y,
                         int64_t rows, int64_t count)
{
    int nt = mcp_kthreads(ctx, rows * count);
    const int chunk = mcp_kchunk(count);
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (int64_t r = 0; r < rows; r++) {
        double s = mcp__red_sum_f32(x + r * count, count);
        y[r] = (float)(mean ? s / (double)count : s);
    }
}

static mcp_status red_run(mcp_kernel_ctx *ctx, red_op op)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    bool mask[MCP_MAX_RANK];
    bool noop = false;
    int64_t odims[MCP_MAX_RANK];
    int orank = 0;
    int64_t count = 1, n_out = 1;
    mcp_status st;

    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'data' is missing");
    mcp__red_kind kind = mcp__red_kind_of(x->dtype);
    if (kind == MCP__RED_OTHER)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'data' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    bool from_input = (op == RED_SUM && ctx->opset >= 13) || ctx->opset >= 18;
    st = red_axes(ctx, from_input, x->rank, mask, &noop);
    if (st != MCP_STATUS_OK) return st;
    if (noop) {
        mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
        if (!y) return MCP_STATUS_OUT_OF_MEMORY;
        if (mcp_tensor_nbytes(x)) memcpy(y->data, x->data, mcp_tensor_nbytes(x));
        return MCP_STATUS_OK;
    }
    bool keepdims = mcp_kattr_int(ctx, "keepdims", 1) != 0;
    for (int i = 0; i < x->rank; i++) {
        if (mask[i]) {
            count *= x->dims[i];
            if (keepdims) odims[orank++] = 1;
        } else {
            n_out *= x->dims[i];
            odims[orank++] = x->dims[i];
        }
    }
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, orank, odims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (kind != MCP__RED_FLOAT) return red_int(ctx, op, x, mask, y, n_out, count);
    if (x->dtype == MCP_DTYPE_FLOAT && (op == RED_SUM || op == RED_MEAN) &&
        red_mask_is_suffix(mask, x->rank)) {
        red_rows_f32(ctx, op == RED_MEAN, x->data, y->data, n_out, count);
        return MCP_STATUS_OK;
    }

    double *acc = (double *)mcp_calloc((size_t)(n_out ? n_out : 1), sizeof(double));
    if (!acc) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    red_float(op, x, mask, acc, n_out, count);
    for (int64_t o = 0; o < n_out; o++) mcp__red_st_f64(y->dtype, y->data, o, acc[o]);
    mcp_free(acc);
    return MCP_STATUS_OK;
}

static mcp_status run_reduce_sum(mcp_kernel_ctx *ctx) { return red_run(ctx, RED_SUM); }
static mcp_status run_reduce_mean(mcp_kernel_ctx *ctx) { return red_run(ctx, RED_MEAN); }
static mcp_status run_reduce_max(mcp_kernel_ctx *ctx) { return red_run(ctx, RED_MAX); }
static mcp_status run_reduce_min(mcp_kernel_ctx *ctx) { return red_run(ctx, RED_MIN); }
static mcp_status run_reduce_prod(mcp_kernel_ctx *ctx) { return red_run(ctx, RED_PROD); }
static mcp_status run_reduce_l1(mcp_kernel_ctx *ctx) { return red_run(ctx, RED_L1); }
static mcp_status run_reduce_l2(mcp_kernel_ctx *ctx) { return red_run(ctx, RED_L2); }
static mcp_status run_reduce_logsum(mcp_kernel_ctx *ctx) { return red_run(ctx, RED_LOGSUM); }
static mcp_status run_reduce_logsumexp(mcp_kernel_ctx *ctx)
{
    return red_run(ctx, RED_LOGSUMEXP);
}
static mcp_status run_reduce_sumsquare(mcp_kernel_ctx *ctx)
{
    return red_run(ctx, RED_SUMSQUARE);
}

/* ---- ArgMax / ArgMin ---- */

/* Whether element value v replaces the current best. NaN wins (numpy's
 * argmax/argmin return the first NaN); ties go to the first index unless
 * select_last_index asks for the last. */
static bool arg_better_f(double v, double best, bool is_max, bool last)
{
    if (best != best) return last && v != v;
    if (v != v) return true;
    if (last) return is_max ? v >= best : v <= best;
    return is_max ? v > best : v < best;
}

static mcp_status arg_run(mcp_kernel_ctx *ctx, bool is_max)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'data' is missing");
    mcp__red_kind kind = mcp__red_kind_of(x->dtype);
    if (kind == MCP__RED_OTHER)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'data' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    int64_t axis_attr = mcp_kattr_int(ctx, "axis", 0);
    int axis;
    if (x->rank == 0 || !mcp_axis_normalize(axis_attr, x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' %lld is out of range for rank %d",
                         (long long)axis_attr, x->rank);
    bool keepdims = mcp_kattr_int(ctx, "keepdims", 1) != 0;
    bool last = mcp_kattr_int(ctx, "select_last_index", 0) != 0;
    int64_t odims[MCP_MAX_RANK];
    int orank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i == axis) {
            if (keepdims) odims[orank++] = 1;
        } else {
            odims[orank++] = x->dims[i];
        }
    }
    int64_t outer = mcp__red_span(x->dims, 0, axis);
    int64_t n = x->dims[axis];
    int64_t inner = mcp__red_span(x->dims, axis + 1, x->rank);
    if (n == 0 && outer * inner > 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'data' has an empty reduction axis %d", axis);
    mcp_tensor *y = mcp_kout(ctx, 0, MCP_DTYPE_INT64, orank, odims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t *out = (int64_t *)y->data;
    bool sgn = kind == MCP__RED_SIGNED;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            int64_t best_i = 0;
            if (kind == MCP__RED_FLOAT) {
                double best = mcp__red_ld_f64(x->dtype, x->data, base);
                for (int64_t k = 1; k < n; k++) {
                    double v = mcp__red_ld_f64(x->dtype, x->data, base + k * inner);
                    if (arg_better_f(v, best, is_max, last)) {
                        best = v;
                        best_i = k;
                    }
                }
            } else {
                uint64_t best = mcp__red_ld_u64(x->dtype, x->data, base);
                for (int64_t k = 1; k < n; k++) {
                    uint64_t v = mcp__red_ld_u64(x->dtype, x->data, base + k * inner);
                    int c;
                    if (sgn) {
                        int64_t sv = (int64_t)v, sb = (int64_t)best;
                        c = sv > sb ? 1 : (sv < sb ? -1 : 0);
                    } else {
                        c = v > best ? 1 : (v < best ? -1 : 0);
                    }
                    if (!is_max) c = -c;
                    if (c > 0 || (c == 0 && last)) {
                        best = v;
                        best_i = k;
                    }
                }
            }
            out[o * inner + in] = best_i;
        }
    }
    return MCP_STATUS_OK;
}

static mcp_status run_argmax(mcp_kernel_ctx *ctx) { return arg_run(ctx, true); }
static mcp_status run_argmin(mcp_kernel_ctx *ctx) { return arg_run(ctx, false); }

const mcp_kernel_def mcp__ref_reduce_kernels[] = {
    MCP_KERNEL_ENTRY("", "ReduceSum", 1, 0, run_reduce_sum, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReduceMean", 1, 0, run_reduce_mean, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReduceMax", 1, 0, run_reduce_max, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReduceMin", 1, 0, run_reduce_min, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReduceProd", 1, 0, run_reduce_prod, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReduceL1", 1, 0, run_reduce_l1, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReduceL2", 1, 0, run_reduce_l2, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReduceLogSum", 1, 0, run_reduce_logsum, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReduceLogSumExp", 1, 0, run_reduce_logsumexp, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReduceSumSquare", 1, 0, run_reduce_sumsquare, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ArgMax", 1, 0, run_argmax, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ArgMin", 1, 0, run_argmin, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Softmax", 1, 0, mcp__ref_reduce_softmax_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "LogSoftmax", 1, 0, mcp__ref_reduce_logsoftmax_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Hardmax", 1, 0, mcp__ref_reduce_hardmax_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "CumSum", 11, 0, mcp__ref_reduce_cumsum_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "CumProd", 26, 0, mcp__ref_reduce_cumprod_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "TopK", 1, 0, mcp__ref_reduce_topk_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "BatchNormalization", 1, 0, mcp__ref_reduce_batchnorm_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "LayerNormalization", 17, 0, mcp__ref_reduce_layernorm_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "InstanceNormalization", 1, 0, mcp__ref_reduce_instancenorm_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "LRN", 1, 0, mcp__ref_reduce_lrn_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "MeanVarianceNormalization", 9, 0, mcp__ref_reduce_mvn_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "LpNormalization", 1, 0, mcp__ref_reduce_lpnorm_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Dropout", 1, 0, mcp__ref_reduce_dropout_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "SoftmaxCrossEntropyLoss", 12, 0, mcp__ref_reduce_sce_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "NegativeLogLikelihoodLoss", 12, 0, mcp__ref_reduce_nll_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Einsum", 12, 0, mcp__ref_reduce_einsum_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Det", 11, 0, mcp__ref_reduce_det_run, NULL, NULL, NULL),
};
const int mcp__ref_reduce_kernel_count =
    (int)(sizeof(mcp__ref_reduce_kernels) / sizeof(mcp__ref_reduce_kernels[0]));
