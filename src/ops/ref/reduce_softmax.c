/* Reference kernels: reduce family, part (softmax): Softmax, LogSoftmax,
 * Hardmax, CumSum, TopK. */
#include "ops/ref/elementwise_util.h" /* mcp__ew_expf */
#include "ops/ref/reduce_util.h"

typedef enum sm_kind { SM_SOFTMAX = 0, SM_LOGSOFTMAX, SM_HARDMAX } sm_kind;

/*
 * Splits the input into outer x n x inner around the softmax axis. Before
 * opset 13 the input is coerced to 2-D at `axis` (default 1), so n covers
 * every dimension from axis on; since opset 13 only dimension `axis`
 * (default -1) is normalized.
 */
static mcp_status sm_split(mcp_kernel_ctx *ctx, const mcp_tensor *x, int64_t *outer, int64_t *n,
                           int64_t *inner)
{
    bool coerce = ctx->opset < 13;
    int64_t a = mcp_kattr_int(ctx, "axis", coerce ? 1 : -1);
    int axis;
    if (x->rank == 0 || !mcp_axis_normalize(a, x->rank, &axis)) {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' %lld is out of range for input of rank %d",
                         (long long)a, x->rank);
    }
    *outer = mcp__red_span(x->dims, 0, axis);
    if (coerce) {
        *n = mcp__red_span(x->dims, axis, x->rank);
        *inner = 1;
    } else {
        *n = x->dims[axis];
        *inner = mcp__red_span(x->dims, axis + 1, x->rank);
    }
    return MCP_STATUS_OK;
}

/*
 * Softmax / LogSoftmax of float32 rows of n contiguous elements (the last
 * axis, or the flattened tail before opset 13), rows split over threads.
 * Same steps as the generic loop: the maximum ignores NaN and is replaced
 * by 0 when infinite, so NaN and infinities give the same results. exp is
 * the vectorizable mcp__ew_expf_nonpos (its argument x - max is never
 * positive); the sum is in double (mcp__red_sum_f32); Softmax stores exp
 * values in y first and scales them in place by the sum's reciprocal (a
 * multiply instead of a divide per element: at most one more rounding).
 * Every element of y is written, so y need not be zeroed first.
 */
static void sm_rows_f32(const mcp_kernel_ctx *ctx, bool log_form, const float *x, float *y,
                        int64_t rows, int64_t n)
{
    /* An exp costs about as much as 8 cheap ops per element. */
    int nt = mcp_kthreads(ctx, rows * n * 8);
    const int chunk = mcp_kchunk(n * 8);
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        /* Four running maxima, so the compares do not wait on each other;
         * max is order-free, so the result is the sequential one. */
        float m4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        int64_t k = 0;
        for (; k + 4 <= n; k += 4)
            for (int j = 0; j < 4; j++) m4[j] = xr[k + j] > m4[j] ? xr[k + j] : m4[j];
        for (; k < n; k++) m4[0] = xr[k] > m4[0] ? xr[k] : m4[0];
        float mx = m4[0];
        for (int j = 1; j < 4; j++) mx = m4[j] > mx ? m4[j] : mx;
        if (mx == INFINITY) {
            /* The generic path's double arithmetic for this rare row: with
             * the shift at 0 the inputs may be positive (outside
             * mcp__ew_expf_nonpos), and values above 88.7 overflow expf but
             * not exp, which decides between 0 and NaN. */
            double dsum = 0.0;
            for (k = 0; k < n; k++) dsum += exp((double)xr[k]);
            double lsum = log(dsum);
            for (k = 0; k < n; k++)
                yr[k] = (float)(log_form ? (double)xr[k] - lsum : exp((double)xr[k]) / dsum);
            continue;
        }
        if (isinf(mx)) mx = 0.0f; /* all -inf (or +inf present): keep IEEE results */
        for (k = 0; k < n; k++) yr[k] = mcp__ew_expf_nonpos(xr[k] - mx);
        double sum = mcp__red_sum_f32(yr, n);
        if (log_form) {
            float lsum = (float)log(sum);
            for (k = 0; k < n; k++) yr[k] = (xr[k] - mx) - lsum;
        } else {
            float inv = (float)(1.0 / sum);
            for (k = 0; k < n; k++) yr[k] = yr[k] * inv;
        }
    }
}

static mcp_status sm_run(mcp_kernel_ctx *ctx, sm_kind kind)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    int64_t outer = 0, n = 0, inner = 0;
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is missing");
    if (!mcp__red_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'input' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    mcp_status st = sm_split(ctx, x, &outer, &n, &inner);
    if (st != MCP_STATUS_OK) return st;
    /* Every path below writes every output element. */
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (n == 0 || outer == 0 || inner == 0) return MCP_STATUS_OK;
    if (x->dtype == MCP_DTYPE_FLOAT && inner == 1 && kind != SM_HARDMAX) {
        sm_rows_f32(ctx, kind == SM_LOGSOFTMAX, x->data, y->data, outer, n);
        return MCP_STATUS_OK;
    }
    double *buf = (double *)mcp_malloc((size_t)n * sizeof(double));
    if (!buf) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");

    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            double mx = -INFINITY;
            int64_t arg = 0;
            for (int64_t k = 0; k < n; k++) {
                buf[k] = mcp__red_ld_f64(x->dtype, x->data, base + k * inner);
                if (buf[k] > mx) {
                    mx = buf[k];
                    arg = k;
                }
            }
            if (kind == SM_HARDMAX) {
                for (int64_t k = 0; k < n; k++)
                    mcp__red_st_f64(y->dtype, y->data, base + k * inner, k == arg ? 1.0 : 0.0);
                continue;
            }
            if (isinf(mx)) mx = 0.0; /* all -inf (or +inf present): keep IEEE results */
            double sum = 0.0;
            for (int64_t k = 0; k < n; k++) sum += exp(buf[k] - mx);
            double lsum = log(sum);
            for (int64_t k = 0; k < n; k++) {
                double v = kind == SM_SOFTMAX ? exp(buf[k] - mx) / sum : buf[k] - mx - lsum;
                mcp__red_st_f64(y->dtype, y->data, base + k * inner, v);
            }
        }
    }
    mcp_free(buf);
    return MCP_STATUS_OK;
}

mcp_status mcp__ref_reduce_softmax_run(mcp_kernel_ctx *ctx) { return sm_run(ctx, SM_SOFTMAX); }

mcp_status mcp__ref_reduce_logsoftmax_run(mcp_kernel_ctx *ctx)
{
    return sm_run(ctx, SM_LOGSOFTMAX);
}

mcp_status mcp__ref_reduce_hardmax_run(mcp_kernel_ctx *ctx) { return sm_run(ctx, SM_HARDMAX); }

/* ---- CumSum, CumProd ---- */

/* Running sum (prod false) or product along input 'axis'. Integer running
 * values wrap in uint64 (two's complement, so signed types wrap too). */
static mcp_status cum_run(mcp_kernel_ctx *ctx, bool prod)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const mcp_tensor *at = mcp_kin(ctx, 1);
    int64_t a = 0;
    int axis;
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'x' is missing");
    mcp__red_kind kind = mcp__red_kind_of(x->dtype);
    if (kind == MCP__RED_OTHER || x->dtype == MCP_DTYPE_BOOL)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'x' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (!at || at->rank > 1 || !mcp__red_scalar_int(at, &a))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'axis' must be an int32/int64 scalar");
    if (x->rank == 0 || !mcp_axis_normalize(a, x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'axis' %lld is out of range for rank %d", (long long)a, x->rank);
    bool exclusive = mcp_kattr_int(ctx, "exclusive", 0) != 0;
    bool reverse = mcp_kattr_int(ctx, "reverse", 0) != 0;
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    /* An empty tensor may still have a huge dim (0 x 2^62 passes the size
     * check): the loops below would run over it touching no element. */
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    int64_t outer = mcp__red_span(x->dims, 0, axis);
    int64_t n = x->dims[axis];
    int64_t inner = mcp__red_span(x->dims, axis + 1, x->rank);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            double facc = prod ? 1.0 : 0.0;
            uint64_t iacc = prod ? 1 : 0;
            for (int64_t j = 0; j < n; j++) {
                int64_t k = reverse ? n - 1 - j : j;
                int64_t i = base + k * inner;
                if (kind == MCP__RED_FLOAT) {
                    double v = mcp__red_ld_f64(x->dtype, x->data, i);
                    double next = prod ? facc * v : facc + v;
                    mcp__red_st_f64(y->dtype, y->data, i, exclusive ? facc : next);
                    facc = next;
                } else {
                    uint64_t v = mcp__red_ld_u64(x->dtype, x->data, i);
                    uint64_t next = prod ? iacc * v : iacc + v;
                    mcp__red_st_u64(y->dtype, y->data, i, exclusive ? iacc : next);
                    iacc = next;
                }
            }
        }
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__ref_reduce_cumsum_run(mcp_kernel_ctx *ctx) { return cum_run(ctx, false); }

mcp_status mcp__ref_reduce_cumprod_run(mcp_kernel_ctx *ctx) { return cum_run(ctx, true); }

/* ---- TopK ---- */

/* Sort keys of one slice, in the element's own domain so int64 stays exact. */
typedef struct topk_keys {
    mcp__red_kind kind;
    const double *f;
    const int64_t *s;
    const uint64_t *u;
    bool largest;
} topk_keys;

/* Whether slice element a sorts strictly before b. NaN counts as the largest
 * value; equal keys keep index order because the merge sort is stable. */
static bool topk_before(const topk_keys *k, int64_t a, int64_t b)
{
    int c;
    if (k->kind == MCP__RED_FLOAT) {
        double x = k->f[a], y = k->f[b];
        bool xn = x != x, yn = y != y;
        if (xn || yn) c = xn && yn ? 0 : (xn ? 1 : -1);
        else c = x > y ? 1 : (x < y ? -1 : 0);
    } else if (k->kind == MCP__RED_SIGNED) {
        c = k->s[a] > k->s[b] ? 1 : (k->s[a] < k->s[b] ? -1 : 0);
    } else {
        c = k->u[a] > k->u[b] ? 1 : (k->u[a] < k->u[b] ? -1 : 0);
    }
    return k->largest ? c > 0 : c < 0;
}

/* Stable bottom-up merge sort of idx[0..n) using tmp[0..n). */
static void topk_sort(const topk_keys *k, int64_t *idx, int64_t *tmp, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n;
            int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                if (topk_before(k, idx[j], idx[i])) tmp[o++] = idx[j++];
                else tmp[o++] = idx[i++];
            }
            while (i < mid) tmp[o++] = idx[i++];
            while (j < hi) tmp[o++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof(int64_t));
    }
}

mcp_status mcp__ref_reduce_topk_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    int64_t k = 0;
    int axis;
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");
    mcp__red_kind kind = mcp__red_kind_of(x->dtype);
    if (kind == MCP__RED_OTHER)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (ctx->opset >= 10) {
        const mcp_tensor *kt = mcp_kin(ctx, 1);
        if (!kt || kt->rank > 1 || !mcp__red_scalar_int(kt, &k))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'K' must be a 1-D int64 tensor with one element");
    } else {
        if (!mcp_kattr(ctx, "k"))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'k' is missing");
        k = mcp_kattr_int(ctx, "k", 0);
    }
    int64_t a = mcp_kattr_int(ctx, "axis", -1);
    if (x->rank == 0 || !mcp_axis_normalize(a, x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' %lld is out of range for rank %d", (long long)a,
                         x->rank);
    int64_t n = x->dims[axis];
    if (k < 0 || k > n)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'K' (%lld) must be in [0, %lld]", (long long)k, (long long)n);
    topk_keys keys;
    keys.kind = kind;
    keys.largest = ctx->opset < 11 || mcp_kattr_int(ctx, "largest", 1) != 0;
    /* sorted=0 leaves the order unspecified; sorted order is a valid choice. */

    int64_t odims[MCP_MAX_RANK];
    memcpy(odims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    odims[axis] = k;
    mcp_tensor *vals = mcp_kout(ctx, 0, x->dtype, x->rank, odims);
    if (!vals) return MCP_STATUS_OUT_OF_MEMORY;
    mcp_tensor *inds = mcp_kout(ctx, 1, MCP_DTYPE_INT64, x->rank, odims);
    if (!inds) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t outer = mcp__red_span(x->dims, 0, axis);
    int64_t inner = mcp__red_span(x->dims, axis + 1, x->rank);
    if (n == 0 || k == 0 || outer == 0 || inner == 0) return MCP_STATUS_OK;

    size_t nn = (size_t)n;
    int64_t *idx = (int64_t *)mcp_malloc(nn * sizeof(int64_t));
    int64_t *tmp = (int64_t *)mcp_malloc(nn * sizeof(int64_t));
    void *kbuf = mcp_malloc(nn * 8);
    if (!idx || !tmp || !kbuf) {
        mcp_free(idx);
        mcp_free(tmp);
        mcp_free(kbuf);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    keys.f = (const double *)kbuf;
    keys.s = (const int64_t *)kbuf;
    keys.u = (const uint64_t *)kbuf;
    int esz = mcp_dtype_size(x->dtype);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            for (int64_t j = 0; j < n; j++) {
                int64_t i = base + j * inner;
                idx[j] = j;
                if (kind == MCP__RED_FLOAT)
                    ((double *)kbuf)[j] = mcp__red_ld_f64(x->dtype, x->data, i);
                else if (kind == MCP__RED_SIGNED)
                    ((int64_t *)kbuf)[j] = mcp__red_ld_i64(x->dtype, x->data, i);
                else
                    ((uint64_t *)kbuf)[j] = mcp__red_ld_u64(x->dtype, x->data, i);
            }
            topk_sort(&keys, idx, tmp, n);
            int64_t obase = o * k * inner + in;
            for (int64_t j = 0; j < k; j++) {
                int64_t src = base + idx[j] * inner;
                int64_t dst = obase + j * inner;
                memcpy((char *)vals->data + dst * esz, (const char *)x->data + src * esz,
                       (size_t)esz);
                ((int64_t *)inds->data)[dst] = idx[j];
            }
        }
    }
    mcp_free(idx);
    mcp_free(tmp);
    mcp_free(kbuf);
    return MCP_STATUS_OK;
}
