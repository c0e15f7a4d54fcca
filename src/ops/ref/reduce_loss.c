/* Reference kernels: reduce family, part (loss): NegativeLogLikelihoodLoss
 * and SoftmaxCrossEntropyLoss (log-softmax over axis 1, then NLL). */
#include "ops/ref/reduce_util.h"

typedef enum loss_red { LOSS_NONE = 0, LOSS_SUM, LOSS_MEAN } loss_red;

/* Checks the shared inputs: `x` is (N, C, d1..dk) float, `t` (N, d1..dk)
 * int32/int64, `w` (C) float or omitted. Reads the attributes. */
static mcp_status loss_check(mcp_kernel_ctx *ctx, const mcp_tensor *x, const mcp_tensor *t,
                             const mcp_tensor *w, const char *xname, const char *tname,
                             loss_red *red)
{
    if (!x || !t)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs '%s' and '%s' are required",
                         xname, tname);
    if (!mcp__red_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input '%s' has unsupported type %s",
                         xname, mcp_dtype_name(x->dtype));
    if (t->dtype != MCP_DTYPE_INT32 && t->dtype != MCP_DTYPE_INT64)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must be int32 or int64",
                         tname);
    if (x->rank < 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must have rank >= 2 (N x C x ...), got %d", xname, x->rank);
    bool ok = t->rank == x->rank - 1 && t->dims[0] == x->dims[0];
    for (int i = 1; ok && i < t->rank; i++) ok = t->dims[i] == x->dims[i + 1];
    if (!ok)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must have shape (N, d1, ..., dk) matching '%s'", tname,
                         xname);
    if (w) {
        if (!mcp__red_is_float(w->dtype) || w->rank != 1 || w->dims[0] != x->dims[1])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'weight' must be a float tensor of shape (C)");
    }
    const char *r = mcp_kattr_string(ctx, "reduction", "mean");
    if (strcmp(r, "none") == 0) *red = LOSS_NONE;
    else if (strcmp(r, "sum") == 0) *red = LOSS_SUM;
    else if (strcmp(r, "mean") == 0) *red = LOSS_MEAN;
    else
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'reduction' must be none, sum or mean, got '%s'", r);
    return MCP_STATUS_OK;
}

/*
 * The NLL itself on log-probabilities lp (N x C x D, row-major, as double):
 * loss[n,d] = -lp[n, t[n,d], d] * w[t[n,d]], zero where t == ignore_index.
 * "mean" divides by the summed weights of the counted elements.
 */
static mcp_status loss_nll(mcp_kernel_ctx *ctx, const double *lp, const mcp_tensor *x,
                           const mcp_tensor *t, const mcp_tensor *w, loss_red red,
                           const char *tname)
{
    int64_t N = x->dims[0], C = x->dims[1];
    int64_t D = mcp__red_span(x->dims, 2, x->rank);
    bool has_ii = mcp_kattr(ctx, "ignore_index") != NULL;
    int64_t ii = mcp_kattr_int(ctx, "ignore_index", 0);
    mcp_tensor *out;
    if (red == LOSS_NONE) out = mcp_kout(ctx, 0, x->dtype, t->rank, t->dims);
    else out = mcp_kout(ctx, 0, x->dtype, 0, x->dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    double sum = 0.0, wsum = 0.0;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t d = 0; d < D; d++) {
            int64_t i = n * D + d;
            int64_t c = mcp__red_ld_i64(t->dtype, t->data, i);
            double l = 0.0, wt = 0.0;
            if (!(has_ii && c == ii)) {
                if (c < 0 || c >= C)
                    return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                     "input '%s' holds class %lld outside [0, %lld)", tname,
                                     (long long)c, (long long)C);
                wt = w ? mcp__red_ld_f64(w->dtype, w->data, c) : 1.0;
                l = -lp[(n * C + c) * D + d] * wt;
            }
            if (red == LOSS_NONE) mcp__red_st_f64(out->dtype, out->data, i, l);
            sum += l;
            wsum += wt;
        }
    }
    if (red == LOSS_SUM) {
        mcp__red_st_f64(out->dtype, out->data, 0, sum);
    } else if (red == LOSS_MEAN) {
        /* Without weights or ignore_index, numpy's mean divides by N*D. */
        double den = (w || has_ii) ? wsum : (double)(N * D);
        mcp__red_st_f64(out->dtype, out->data, 0, sum / den);
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__ref_reduce_nll_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const mcp_tensor *t = mcp_kin(ctx, 1);
    const mcp_tensor *w = mcp_kin(ctx, 2);
    loss_red red;
    mcp_status st = loss_check(ctx, x, t, w, "input", "target", &red);
    if (st != MCP_STATUS_OK) return st;
    int64_t n = mcp_tensor_numel(x);
    double *lp = (double *)mcp_malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!lp) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++) lp[i] = mcp__red_ld_f64(x->dtype, x->data, i);
    st = loss_nll(ctx, lp, x, t, w, red, "target");
    mcp_free(lp);
    return st;
}

mcp_status mcp__ref_reduce_sce_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const mcp_tensor *t = mcp_kin(ctx, 1);
    const mcp_tensor *w = mcp_kin(ctx, 2);
    loss_red red;
    mcp_status st = loss_check(ctx, x, t, w, "scores", "labels", &red);
    if (st != MCP_STATUS_OK) return st;
    int64_t N = x->dims[0], C = x->dims[1];
    int64_t D = mcp__red_span(x->dims, 2, x->rank);
    int64_t n = mcp_tensor_numel(x);
    double *lp = (double *)mcp_malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!lp) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++) lp[i] = mcp__red_ld_f64(x->dtype, x->data, i);
    /* log_softmax over the class axis */
    for (int64_t b = 0; b < N; b++) {
        for (int64_t d = 0; d < D; d++) {
            double *p = lp + b * C * D + d;
            double mx = -INFINITY, s = 0.0;
            for (int64_t c = 0; c < C; c++)
                if (p[c * D] > mx) mx = p[c * D];
            if (isinf(mx)) mx = 0.0;
            for (int64_t c = 0; c < C; c++) s += exp(p[c * D] - mx);
            double ls = log(s);
            for (int64_t c = 0; c < C; c++) p[c * D] = p[c * D] - mx - ls;
        }
    }
    st = loss_nll(ctx, lp, x, t, w, red, "labels");
    if (st == MCP_STATUS_OK && ctx->n_outputs > 1) {
        mcp_tensor *lo = mcp_kout(ctx, 1, x->dtype, x->rank, x->dims);
        if (!lo) st = MCP_STATUS_OUT_OF_MEMORY;
        for (int64_t i = 0; lo && i < n; i++) mcp__red_st_f64(lo->dtype, lo->data, i, lp[i]);
    }
    mcp_free(lp);
    return st;
}
