/*
 * Reference kernels: the optimizers of the ai.onnx.preview.training domain
 * (Adagrad, Adam, Momentum), part of the signal family.
 *
 * Each takes a learning rate R, an iteration count T, then n groups of
 * tensors laid out group by group (all X, then all G, ...), and returns the
 * updated tensors in the same grouped order. Math runs in double.
 */
#include <math.h>
#include <string.h>

#include "ops/ref/signal_util.h"

static bool train_is_float(mcp_dtype d) { return d == MCP_DTYPE_FLOAT || d == MCP_DTYPE_DOUBLE; }

static bool train_same_shape(const mcp_tensor *a, const mcp_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/*
 * Reads R and T, and checks that the n_groups * n tensors after them exist,
 * are float or double, and match the shape and dtype of their group's X.
 */
static mcp_status train_prepare(mcp_kernel_ctx *ctx, int n_groups, int *n_out, double *r,
                                int64_t *t)
{
    const mcp_tensor *R = mcp_kin(ctx, 0), *T = mcp_kin(ctx, 1);
    if (!R || !T) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'R' and 'T' are required");
    if (!train_is_float(R->dtype) || mcp_tensor_numel(R) != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'R' must be a float or double scalar");
    if (T->dtype != MCP_DTYPE_INT64 || mcp_tensor_numel(T) != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'T' must be an int64 scalar");
    *r = mcp_tensor_get_f64(R, 0);
    *t = mcp_tensor_get_i64(T, 0);
    int rest = ctx->n_inputs - 2;
    if (rest <= 0 || rest % n_groups != 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "expected 2 + %d * n inputs, got %d", n_groups, ctx->n_inputs);
    int n = rest / n_groups;
    if (ctx->n_outputs > (n_groups - 1) * n)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "too many outputs (%d) for %d tensors",
                         ctx->n_outputs, n);
    for (int i = 0; i < n; i++) {
        const mcp_tensor *X = mcp_kin(ctx, 2 + i);
        if (!X) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input %d is missing", 2 + i);
        if (!train_is_float(X->dtype))
            return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input %d has unsupported dtype %s",
                             2 + i, mcp_dtype_name(X->dtype));
        for (int g = 1; g < n_groups; g++) {
            const mcp_tensor *O = mcp_kin(ctx, 2 + g * n + i);
            if (!O)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input %d is missing",
                                 2 + g * n + i);
            if (O->dtype != X->dtype || !train_same_shape(O, X))
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input %d must match the dtype and shape of input %d",
                                 2 + g * n + i, 2 + i);
        }
    }
    *n_out = n;
    return MCP_STATUS_OK;
}

/* Allocates output `slot` like `like` when the node has that output. */
static mcp_status train_out(mcp_kernel_ctx *ctx, int slot, const mcp_tensor *like,
                            mcp_tensor **out)
{
    *out = NULL;
    if (slot >= ctx->n_outputs) return MCP_STATUS_OK;
    *out = mcp_kout(ctx, slot, like->dtype, like->rank, like->dims);
    return *out ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;
}

mcp_status mcp__signal_run_adagrad(mcp_kernel_ctx *ctx)
{
    double r = 0;
    int64_t t = 0;
    int n;
    mcp_status st = train_prepare(ctx, 3, &n, &r, &t);
    if (st != MCP_STATUS_OK) return st;
    double norm = mcp_kattr_float(ctx, "norm_coefficient", 0.0f);
    double eps = mcp_kattr_float(ctx, "epsilon", 0.0f);
    double decay = mcp_kattr_float(ctx, "decay_factor", 0.0f);
    double lr = r / (1.0 + (double)t * decay);
    for (int i = 0; i < n; i++) {
        const mcp_tensor *X = mcp_kin(ctx, 2 + i), *G = mcp_kin(ctx, 2 + n + i);
        const mcp_tensor *H = mcp_kin(ctx, 2 + 2 * n + i);
        mcp_tensor *Xn, *Hn;
        if ((st = train_out(ctx, i, X, &Xn)) != MCP_STATUS_OK ||
            (st = train_out(ctx, n + i, X, &Hn)) != MCP_STATUS_OK)
            return st;
        int64_t cnt = mcp_tensor_numel(X);
        for (int64_t k = 0; k < cnt; k++) {
            double x = mcp_tensor_get_f64(X, k);
            double g = norm * x + mcp_tensor_get_f64(G, k);
            double h = mcp_tensor_get_f64(H, k) + g * g;
            if (Xn) mcp_tensor_set_f64(Xn, k, x - lr * g / (sqrt(h) + eps));
            if (Hn) mcp_tensor_set_f64(Hn, k, h);
        }
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__signal_run_adam(mcp_kernel_ctx *ctx)
{
    double r = 0;
    int64_t t = 0;
    int n;
    mcp_status st = train_prepare(ctx, 4, &n, &r, &t);
    if (st != MCP_STATUS_OK) return st;
    double alpha = mcp_kattr_float(ctx, "alpha", 0.9f);
    double beta = mcp_kattr_float(ctx, "beta", 0.999f);
    double eps = mcp_kattr_float(ctx, "epsilon", 1e-6f);
    double norm = mcp_kattr_float(ctx, "norm_coefficient", 0.0f);
    double norm_post = mcp_kattr_float(ctx, "norm_coefficient_post", 0.0f);
    /* Bias correction only once the iteration count is positive. */
    double lr = r;
    if (t > 0) lr = r * sqrt(1.0 - pow(beta, (double)t)) / (1.0 - pow(alpha, (double)t));
    for (int i = 0; i < n; i++) {
        const mcp_tensor *X = mcp_kin(ctx, 2 + i), *G = mcp_kin(ctx, 2 + n + i);
        const mcp_tensor *V = mcp_kin(ctx, 2 + 2 * n + i), *H = mcp_kin(ctx, 2 + 3 * n + i);
        mcp_tensor *Xn, *Vn, *Hn;
        if ((st = train_out(ctx, i, X, &Xn)) != MCP_STATUS_OK ||
            (st = train_out(ctx, n + i, X, &Vn)) != MCP_STATUS_OK ||
            (st = train_out(ctx, 2 * n + i, X, &Hn)) != MCP_STATUS_OK)
            return st;
        int64_t cnt = mcp_tensor_numel(X);
        for (int64_t k = 0; k < cnt; k++) {
            double x = mcp_tensor_get_f64(X, k);
            double g = norm * x + mcp_tensor_get_f64(G, k);
            double v = alpha * mcp_tensor_get_f64(V, k) + (1.0 - alpha) * g;
            double h = beta * mcp_tensor_get_f64(H, k) + (1.0 - beta) * g * g;
            double xn = x - lr * v / (sqrt(h) + eps);
            if (Xn) mcp_tensor_set_f64(Xn, k, (1.0 - norm_post) * xn);
            if (Vn) mcp_tensor_set_f64(Vn, k, v);
            if (Hn) mcp_tensor_set_f64(Hn, k, h);
        }
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__signal_run_momentum(mcp_kernel_ctx *ctx)
{
    double r = 0;
    int64_t t = 0;
    int n;
    mcp_status st = train_prepare(ctx, 3, &n, &r, &t);
    if (st != MCP_STATUS_OK) return st;
    const char *names[3] = {"alpha", "beta", "norm_coefficient"};
    for (int i = 0; i < 3; i++)
        if (!mcp_kattr(ctx, names[i]))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute '%s' is required",
                             names[i]);
    double alpha = mcp_kattr_float(ctx, "alpha", 0.0f);
    double beta = mcp_kattr_float(ctx, "beta", 0.0f);
    double norm = mcp_kattr_float(ctx, "norm_coefficient", 0.0f);
    const char *mode = mcp_kattr_string(ctx, "mode", NULL);
    bool nesterov;
    if (mode && strcmp(mode, "standard") == 0) {
        nesterov = false;
    } else if (mode && strcmp(mode, "nesterov") == 0) {
        nesterov = true;
    } else {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'mode' must be 'standard' or 'nesterov'");
    }
    /* The gradient's coefficient is 1 on the first iteration. */
    double beta_t = t > 0 ? beta : 1.0;
    for (int i = 0; i < n; i++) {
        const mcp_tensor *X = mcp_kin(ctx, 2 + i), *G = mcp_kin(ctx, 2 + n + i);
        const mcp_tensor *V = mcp_kin(ctx, 2 + 2 * n + i);
        mcp_tensor *Xn, *Vn;
        if ((st = train_out(ctx, i, X, &Xn)) != MCP_STATUS_OK ||
            (st = train_out(ctx, n + i, X, &Vn)) != MCP_STATUS_OK)
            return st;
        int64_t cnt = mcp_tensor_numel(X);
        for (int64_t k = 0; k < cnt; k++) {
            double x = mcp_tensor_get_f64(X, k);
            double g = norm * x + mcp_tensor_get_f64(G, k);
            double v = alpha * mcp_tensor_get_f64(V, k) + beta_t * g;
            double xn = nesterov ? x - r * (g + alpha * v) : x - r * v;
            if (Xn) mcp_tensor_set_f64(Xn, k, xn);
            if (Vn) mcp_tensor_set_f64(Vn, k, v);
        }
    }
    return MCP_STATUS_OK;
}
