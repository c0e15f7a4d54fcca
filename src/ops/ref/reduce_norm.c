/* Reference kernels: reduce family, part (norm): BatchNormalization,
 * LayerNormalization, InstanceNormalization, LRN, MeanVarianceNormalization
 * and Dropout. Statistics are computed in double. */
#include "ops/ref/reduce_util.h"

/* ---- BatchNormalization ---- */

/*
 * Per-channel parameter p (scale, B, mean or var): before opset 9 with
 * spatial=0 the parameters have shape X.shape[1:] and are indexed per
 * element; otherwise per channel.
 */
static double bn_param(const mcp_tensor *p, int64_t c, int64_t s, int64_t spatial_size,
                       bool per_elem)
{
    return mcp__red_ld_f64(p->dtype, p->data, per_elem ? c * spatial_size + s : c);
}

mcp_status mcp__ref_reduce_batchnorm_run(mcp_kernel_ctx *ctx)
{
    static const char *const names[5] = {"X", "scale", "B", "input_mean", "input_var"};
    const mcp_tensor *in[5];
    for (int i = 0; i < 5; i++) {
        in[i] = mcp_kin(ctx, i);
        if (!in[i])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is missing", names[i]);
        if (!mcp__red_is_float(in[i]->dtype))
            return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input '%s' has unsupported type %s",
                             names[i], mcp_dtype_name(in[i]->dtype));
    }
    const mcp_tensor *x = in[0];
    if (x->rank < 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' must have rank >= 2 (N x C x ...), got %d", x->rank);
    int64_t nb = x->dims[0], C = x->dims[1];
    int64_t S = mcp__red_span(x->dims, 2, x->rank);
    bool per_elem = ctx->opset < 9 && mcp_kattr_int(ctx, "spatial", 1) == 0;
    int64_t want = per_elem ? C * S : C;
    for (int i = 1; i < 5; i++)
        if (mcp_tensor_numel(in[i]) != want)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input '%s' must have %lld elements, got %lld", names[i],
                             (long long)want, (long long)mcp_tensor_numel(in[i]));
    double eps = mcp_kattr_float(ctx, "epsilon", 1e-5f);
    double momentum = mcp_kattr_float(ctx, "momentum", 0.9f);
    bool training;
    if (ctx->opset >= 14) {
        training = mcp_kattr_int(ctx, "training_mode", 0) != 0;
    } else {
        /* Older opsets are in training mode exactly when the statistics
         * outputs are requested. */
        training = false;
        for (int i = 1; i < ctx->n_outputs; i++)
            if (mcp__red_output_used(ctx, i)) training = true;
        if (ctx->opset < 7 && mcp_kattr_int(ctx, "is_test", 0) != 0) training = false;
    }

    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (!training) {
        for (int64_t n = 0; n < nb; n++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t s = 0; s < S; s++) {
                    double sc = bn_param(in[1], c, s, S, per_elem);
                    double b = bn_param(in[2], c, s, S, per_elem);
                    double m = bn_param(in[3], c, s, S, per_elem);
                    double v = bn_param(in[4], c, s, S, per_elem);
                    int64_t i = (n * C + c) * S + s;
                    double xv = mcp__red_ld_f64(x->dtype, x->data, i);
                    mcp__red_st_f64(y->dtype, y->data, i, (xv - m) / sqrt(v + eps) * sc + b);
                }
        return MCP_STATUS_OK;
    }

    /* Training: batch statistics over every axis but the channel one (over
     * N only for per-element parameters). */
    int64_t G = want, cnt = per_elem ? nb : nb * S;
    double *bm = (double *)mcp_calloc((size_t)(2 * G + 1), sizeof(double));
    if (!bm) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    double *bv = bm + G;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                int64_t g = per_elem ? c * S + s : c;
                bm[g] += mcp__red_ld_f64(x->dtype, x->data, (n * C + c) * S + s);
            }
    for (int64_t g = 0; g < G; g++) bm[g] = cnt ? bm[g] / (double)cnt : 0.0;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                int64_t g = per_elem ? c * S + s : c;
                double d = mcp__red_ld_f64(x->dtype, x->data, (n * C + c) * S + s) - bm[g];
                bv[g] += d * d;
            }
    for (int64_t g = 0; g < G; g++) bv[g] = cnt ? bv[g] / (double)cnt : 0.0;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t s = 0; s < S; s++) {
                int64_t g = per_elem ? c * S + s : c;
                int64_t i = (n * C + c) * S + s;
                double xv = mcp__red_ld_f64(x->dtype, x->data, i);
                double sc = bn_param(in[1], c, s, S, per_elem);
                double b = bn_param(in[2], c, s, S, per_elem);
                mcp__red_st_f64(y->dtype, y->data, i, (xv - bm[g]) / sqrt(bv[g] + eps) * sc + b);
            }
    /* Outputs 1, 2: running mean / var; before opset 14 also 3, 4: the batch
     * mean / var. */
    mcp_status st = MCP_STATUS_OK;
    mcp_dtype sdt = in[3]->dtype;
    for (int o = 1; o < ctx->n_outputs && o < 5 && st == MCP_STATUS_OK; o++) {
        if (ctx->opset >= 14 && o > 2) break;
        mcp_tensor *t = mcp_kout(ctx, o, sdt, in[3]->rank, in[3]->dims);
        if (!t) {
            st = MCP_STATUS_OUT_OF_MEMORY;
            break;
        }
        for (int64_t g = 0; g < G; g++) {
            double v;
            if (o == 1)
                v = mcp__red_ld_f64(sdt, in[3]->data, g) * momentum + bm[g] * (1.0 - momentum);
            else if (o == 2)
                v = mcp__red_ld_f64(in[4]->dtype, in[4]->data, g) * momentum +
                    bv[g] * (1.0 - momentum);
            else
                v = o == 3 ? bm[g] : bv[g];
            mcp__red_st_f64(sdt, t->data, g, v);
        }
    }
    mcp_free(bm);
    return st;
}

/* ---- LayerNormalization ---- */

mcp_status mcp__red_norm_strides(mcp_kernel_ctx *ctx, const mcp_tensor *x, int axis, const mcp_tensor *scale,
                                 const char *scale_name, const mcp_tensor *bias, int64_t *sstr, int64_t *bstr)
{
    int nr = x->rank - axis;
    const int64_t *nd = x->dims + axis;
    for (int k = 0; k < 2; k++) {
        const mcp_tensor *p = k == 0 ? scale : bias;
        const char *name = k == 0 ? scale_name : "B";
        int64_t *str = k == 0 ? sstr : bstr;
        if (!p) continue;
        if (p->rank > nr)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has rank %d, more than the normalized rank %d",
                             name, p->rank, nr);
        int64_t s = 1;
        for (int i = nr - 1; i >= 0; i--) {
            int pi = i - (nr - p->rank);
            int64_t pd = pi >= 0 ? p->dims[pi] : 1;
            if (pd != nd[i] && pd != 1)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input '%s' does not broadcast to the normalized shape", name);
            str[i] = pd == 1 ? 0 : s;
            s *= pd;
        }
    }
    return MCP_STATUS_OK;
}

/*
 * Scale and B expanded to one row of `inner` doubles each (their broadcast
 * walk over the normalized dims nd, once instead of per row): sb[0, inner)
 * and sb[inner, 2 * inner) (0 without B). The buffer is the run's scratch
 * when there is one, so steady-state runs do not allocate; else *owned,
 * which the caller frees.
 */
double *mcp__red_norm_expand(mcp_kernel_ctx *ctx, const mcp_tensor *scale, const mcp_tensor *bias,
                             const int64_t *sstr, const int64_t *bstr, int nr, const int64_t *nd, int64_t inner,
                             double **owned)
{
    size_t sb_bytes = (size_t)inner * 2 * sizeof(double) + 1;
    double *sb = (double *)mcp_kscratch(ctx, 0, sb_bytes);
    *owned = NULL;
    if (!sb) sb = *owned = (double *)mcp_malloc(sb_bytes);
    if (!sb) return NULL;
    double *sv = sb, *bv = sb + inner;
    int64_t idx[MCP_MAX_RANK] = {0};
    int64_t so = 0, bo = 0;
    for (int64_t j = 0; j < inner; j++) {
        sv[j] = mcp__red_ld_f64(scale->dtype, scale->data, so);
        bv[j] = bias ? mcp__red_ld_f64(bias->dtype, bias->data, bo) : 0.0;
        for (int i = nr - 1; i >= 0; i--) {
            idx[i]++;
            so += sstr[i];
            if (bias) bo += bstr[i];
            if (idx[i] < nd[i]) break;
            so -= sstr[i] * idx[i];
            if (bias) bo -= bstr[i] * idx[i];
            idx[i] = 0;
        }
    }
    return sb;
}

/*
 * LayerNormalization of float32 X: `outer` rows of `inner` contiguous
 * elements, rows split over threads; mo and io (Mean, InvStdDev) may be
 * NULL; sv and bv are Scale and B expanded (mcp__red_norm_expand). Mean and variance
 * are double sums in a fixed order (as mcp__red_sum_f32), and the
 * normalization is the generic path's double arithmetic.
 */
static void ln_rows_f32(const mcp_kernel_ctx *ctx, const mcp_tensor *x, const double *sv, const double *bv,
                        bool has_bias, double eps, mcp_tensor *y, mcp_tensor *mo, mcp_tensor *io, int64_t outer,
                        int64_t inner)
{
    const float *xv = x->data;
    float *yv = y->data;
    int nt = mcp_kthreads(ctx, outer * inner * 3);
    const int chunk = mcp_kchunk(inner * 3);
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (int64_t o = 0; o < outer; o++) {
        const float *xr = xv + o * inner;
        float *yr = yv + o * inner;
        double mean = mcp__red_sum_f32(xr, inner) / (double)inner;
        double v0 = 0.0, v1 = 0.0, v2 = 0.0, v3 = 0.0;
        int64_t j = 0;
        for (; j + 4 <= inner; j += 4) {
            double d0 = xr[j] - mean, d1 = xr[j + 1] - mean;
            double d2 = xr[j + 2] - mean, d3 = xr[j + 3] - mean;
            v0 += d0 * d0;
            v1 += d1 * d1;
            v2 += d2 * d2;
            v3 += d3 * d3;
        }
        for (; j < inner; j++) {
            double d = xr[j] - mean;
            v0 += d * d;
        }
        double var = ((v0 + v1) + (v2 + v3)) / (double)inner;
        double inv = 1.0 / sqrt(var + eps);
        if (mo) mcp__red_st_f64(mo->dtype, mo->data, o, mean);
        if (io) mcp__red_st_f64(io->dtype, io->data, o, inv);
        if (has_bias) {
            for (j = 0; j < inner; j++) yr[j] = (float)((xr[j] - mean) * inv * sv[j] + bv[j]);
        } else {
            for (j = 0; j < inner; j++) yr[j] = (float)((xr[j] - mean) * inv * sv[j]);
        }
    }
}

mcp_status mcp__ref_reduce_layernorm_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const mcp_tensor *scale = mcp_kin(ctx, 1);
    const mcp_tensor *bias = mcp_kin(ctx, 2);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");
    if (!scale) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'Scale' is missing");
    if (!mcp__red_is_float(x->dtype) || !mcp__red_is_float(scale->dtype) ||
        (bias && !mcp__red_is_float(bias->dtype)))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "inputs must be float tensors, 'X' is %s",
                         mcp_dtype_name(x->dtype));
    int64_t a = mcp_kattr_int(ctx, "axis", -1);
    int axis;
    if (x->rank == 0 || !mcp_axis_normalize(a, x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' %lld is out of range for rank %d", (long long)a,
                         x->rank);
    double eps = mcp_kattr_float(ctx, "epsilon", 1e-5f);
    mcp_dtype ut = (mcp_dtype)mcp_kattr_int(ctx, "stash_type", MCP_DTYPE_FLOAT);
    if (!mcp__red_is_float(ut)) ut = MCP_DTYPE_FLOAT;

    int nr = x->rank - axis;
    const int64_t *nd = x->dims + axis;
    int64_t sstr[MCP_MAX_RANK], bstr[MCP_MAX_RANK];
    mcp_status bst = mcp__red_norm_strides(ctx, x, axis, scale, "Scale", bias, sstr, bstr);
    if (bst != MCP_STATUS_OK) return bst;

    int64_t outer = mcp__red_span(x->dims, 0, axis);
    int64_t inner = mcp__red_span(x->dims, axis, x->rank);
    int64_t sdims[MCP_MAX_RANK];
    for (int i = 0; i < x->rank; i++) sdims[i] = i < axis ? x->dims[i] : 1;
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    /* Mean and InvStdDev are optional outputs; a node may list Y alone. */
    mcp_tensor *mo = NULL, *io = NULL;
    if (ctx->n_outputs > 1 && !(mo = mcp_kout(ctx, 1, ut, x->rank, sdims)))
        return MCP_STATUS_OUT_OF_MEMORY;
    if (ctx->n_outputs > 2 && !(io = mcp_kout(ctx, 2, ut, x->rank, sdims)))
        return MCP_STATUS_OUT_OF_MEMORY;
    if (outer == 0) return MCP_STATUS_OK;
    double *owned;
    const double *sv = mcp__red_norm_expand(ctx, scale, bias, sstr, bstr, nr, nd, inner, &owned), *bv = sv + inner;
    if (!sv) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (x->dtype == MCP_DTYPE_FLOAT && inner > 0) {
        ln_rows_f32(ctx, x, sv, bv, bias != NULL, eps, y, mo, io, outer, inner);
        mcp_free(owned);
        return MCP_STATUS_OK;
    }
    for (int64_t o = 0; o < outer; o++) {
        int64_t base = o * inner;
        double mean = 0.0, var = 0.0;
        for (int64_t j = 0; j < inner; j++) mean += mcp__red_ld_f64(x->dtype, x->data, base + j);
        mean = inner ? mean / (double)inner : 0.0;
        for (int64_t j = 0; j < inner; j++) {
            double d = mcp__red_ld_f64(x->dtype, x->data, base + j) - mean;
            var += d * d;
        }
        var = inner ? var / (double)inner : 0.0;
        double inv = 1.0 / sqrt(var + eps);
        if (mo) mcp__red_st_f64(ut, mo->data, o, mean);
        if (io) mcp__red_st_f64(ut, io->data, o, inv);
        for (int64_t j = 0; j < inner; j++) {
            double v = (mcp__red_ld_f64(x->dtype, x->data, base + j) - mean) * inv * sv[j];
            if (bias) v += bv[j];
            mcp__red_st_f64(y->dtype, y->data, base + j, v);
        }
    }
    mcp_free(owned);
    return MCP_STATUS_OK;
}

/* ---- InstanceNormalization ---- */

mcp_status mcp__ref_reduce_instancenorm_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const mcp_tensor *scale = mcp_kin(ctx, 1);
    const mcp_tensor *bias = mcp_kin(ctx, 2);
    if (!x || !scale || !bias)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'input', 'scale' and 'B' are required");
    if (!mcp__red_is_float(x->dtype) || !mcp__red_is_float(scale->dtype) ||
        !mcp__red_is_float(bias->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'input' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (x->rank < 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'input' must have rank >= 2, got %d", x->rank);
    int64_t nb = x->dims[0], C = x->dims[1];
    int64_t S = mcp__red_span(x->dims, 2, x->rank);
    if (mcp_tensor_numel(scale) != C || mcp_tensor_numel(bias) != C)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'scale' and 'B' must have C=%lld elements", (long long)C);
    double eps = mcp_kattr_float(ctx, "epsilon", 1e-5f);
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    for (int64_t n = 0; n < nb; n++) {
        for (int64_t c = 0; c < C; c++) {
            int64_t base = (n * C + c) * S;
            double mean = 0.0, var = 0.0;
            for (int64_t s = 0; s < S; s++) mean += mcp__red_ld_f64(x->dtype, x->data, base + s);
            mean = S ? mean / (double)S : 0.0;
            for (int64_t s = 0; s < S; s++) {
                double d = mcp__red_ld_f64(x->dtype, x->data, base + s) - mean;
                var += d * d;
            }
            var = S ? var / (double)S : 0.0;
            double k = mcp__red_ld_f64(scale->dtype, scale->data, c) / sqrt(var + eps);
            double b = mcp__red_ld_f64(bias->dtype, bias->data, c);
            for (int64_t s = 0; s < S; s++) {
                double v = (mcp__red_ld_f64(x->dtype, x->data, base + s) - mean) * k + b;
                mcp__red_st_f64(y->dtype, y->data, base + s, v);
            }
        }
    }
    return MCP_STATUS_OK;
}

/* ---- LRN ---- */

mcp_status mcp__ref_reduce_lrn_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");
    if (!mcp__red_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (x->rank < 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' must have rank >= 2, got %d", x->rank);
    int64_t size = mcp_kattr_int(ctx, "size", 0);
    if (size <= 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'size' must be a positive integer");
    double alpha = mcp_kattr_float(ctx, "alpha", 1e-4f);
    double beta = mcp_kattr_float(ctx, "beta", 0.75f);
    double bias = mcp_kattr_float(ctx, "bias", 1.0f);
    int64_t nb = x->dims[0], C = x->dims[1];
    int64_t S = mcp__red_span(x->dims, 2, x->rank);
    int64_t lo_off = (size - 1) / 2, hi_off = size - 1 - lo_off; /* floor and ceil */
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    for (int64_t n = 0; n < nb; n++)
        for (int64_t c = 0; c < C; c++) {
            int64_t lo = c - lo_off < 0 ? 0 : c - lo_off;
            int64_t hi = c + hi_off > C - 1 ? C - 1 : c + hi_off;
            for (int64_t s = 0; s < S; s++) {
                double sq = 0.0;
                for (int64_t j = lo; j <= hi; j++) {
                    double v = mcp__red_ld_f64(x->dtype, x->data, (n * C + j) * S + s);
                    sq += v * v;
                }
                int64_t i = (n * C + c) * S + s;
                double v = mcp__red_ld_f64(x->dtype, x->data, i);
                mcp__red_st_f64(y->dtype, y->data, i,
                                v / pow(bias + alpha / (double)size * sq, beta));
            }
        }
    return MCP_STATUS_OK;
}

/* ---- MeanVarianceNormalization ---- */

/* Y = (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over `axes` (default
 * [0, 2, 3]), as the op's function body defines it. */
mcp_status mcp__ref_reduce_mvn_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    static const int64_t dflt_axes[3] = {0, 2, 3};
    bool mask[MCP_MAX_RANK];
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");
    if (!mcp__red_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    int64_t na = 0;
    const int64_t *axes = mcp_kattr_ints(ctx, "axes", &na);
    if (!mcp_kattr(ctx, "axes")) {
        axes = dflt_axes;
        na = 3;
    }
    for (int i = 0; i < x->rank; i++) mask[i] = false;
    for (int64_t k = 0; k < na; k++) {
        int ax;
        if (!mcp_axis_normalize(axes[k], x->rank, &ax))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'axes' entry %lld is out of range for rank %d",
                             (long long)axes[k], x->rank);
        mask[ax] = true;
    }
    int64_t n_out = 1, cnt = 1;
    for (int i = 0; i < x->rank; i++) {
        if (mask[i]) cnt *= x->dims[i];
        else n_out *= x->dims[i];
    }
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    if (n == 0) return MCP_STATUS_OK;
    double *m1 = (double *)mcp_calloc((size_t)(2 * n_out), sizeof(double));
    if (!m1) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    double *m2 = m1 + n_out;
    mcp__red_walk w;
    mcp__red_walk_init(&w, x, mask);
    for (int64_t i = 0; i < n; i++, mcp__red_walk_next(&w)) {
        double v = mcp__red_ld_f64(x->dtype, x->data, i);
        m1[w.off] += v;
        m2[w.off] += v * v;
    }
    for (int64_t o = 0; o < n_out; o++) {
        m1[o] /= (double)cnt;
        double var = m2[o] / (double)cnt - m1[o] * m1[o];
        m2[o] = sqrt(var > 0.0 ? var : 0.0) + 1e-9;
    }
    mcp__red_walk_init(&w, x, mask);
    for (int64_t i = 0; i < n; i++, mcp__red_walk_next(&w)) {
        double v = mcp__red_ld_f64(x->dtype, x->data, i);
        mcp__red_st_f64(y->dtype, y->data, i, (v - m1[w.off]) / m2[w.off]);
    }
    mcp_free(m1);
    return MCP_STATUS_OK;
}

/* ---- LpNormalization ---- */

/* Y = X / ||X||_p along `axis` (p 1 or 2). A slice whose norm is zero is
 * all zeros and stays zeros rather than becoming 0/0. */
mcp_status mcp__ref_reduce_lpnorm_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is missing");
    if (!mcp__red_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'input' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    int64_t p = mcp_kattr_int(ctx, "p", 2), a = mcp_kattr_int(ctx, "axis", -1);
    int axis;
    if (p != 1 && p != 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'p' is %lld, only 1 and 2 are defined",
                         (long long)p);
    if (x->rank == 0 || !mcp_axis_normalize(a, x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axis' %lld is out of range for rank %d",
                         (long long)a, x->rank);
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    /* An empty tensor may still have a huge dim (0 x 2^62 passes the size
     * check): the loops below would run over it touching no element. */
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    int64_t outer = mcp__red_span(x->dims, 0, axis), n = x->dims[axis];
    int64_t inner = mcp__red_span(x->dims, axis + 1, x->rank);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            double norm = 0.0;
            for (int64_t j = 0; j < n; j++) {
                double v = mcp__red_ld_f64(x->dtype, x->data, base + j * inner);
                norm += p == 1 ? fabs(v) : v * v;
            }
            if (p == 2) norm = sqrt(norm);
            for (int64_t j = 0; j < n; j++) {
                double v = mcp__red_ld_f64(x->dtype, x->data, base + j * inner);
                mcp__red_st_f64(y->dtype, y->data, base + j * inner, norm == 0.0 ? 0.0 : v / norm);
            }
        }
    return MCP_STATUS_OK;
}

/* ---- Dropout ---- */

/*
 * MT19937 with numpy's legacy seeding and 53-bit doubles, so that training
 * Dropout with a `seed` attribute reproduces numpy's
 * `np.random.seed(seed); np.random.uniform(0, 1, shape)` mask, which is how
 * the ONNX reference defines it.
 */
typedef struct dr_mt {
    uint32_t s[624];
    int pos;
} dr_mt;

static void dr_mt_seed(dr_mt *m, uint32_t seed)
{
    m->s[0] = seed;
    for (int i = 1; i < 624; i++)
        m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
    m->pos = 624;
}

static uint32_t dr_mt_next(dr_mt *m)
{
    if (m->pos >= 624) {
        for (int i = 0; i < 624; i++) {
            uint32_t y = (m->s[i] & 0x80000000u) | (m->s[(i + 1) % 624] & 0x7fffffffu);
            m->s[i] = m->s[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->pos = 0;
    }
    uint32_t y = m->s[m->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

static double dr_mt_double(dr_mt *m)
{
    uint32_t a = dr_mt_next(m) >> 5, b = dr_mt_next(m) >> 6;
    return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

mcp_status mcp__ref_reduce_dropout_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'data' is missing");
    if (!mcp__red_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'data' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    double ratio = mcp_kattr_float(ctx, "ratio", 0.5f);
    bool training = false;
    if (ctx->opset >= 12) {
        const mcp_tensor *rt = mcp_kin(ctx, 1);
        const mcp_tensor *tt = mcp_kin(ctx, 2);
        if (rt) {
            if (mcp_tensor_numel(rt) != 1 || !mcp__red_is_float(rt->dtype))
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'ratio' must be a float scalar");
            ratio = mcp__red_ld_f64(rt->dtype, rt->data, 0);
        }
        if (tt) {
            if (mcp_tensor_numel(tt) != 1 || tt->dtype != MCP_DTYPE_BOOL)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'training_mode' must be a bool scalar");
            training = ((const uint8_t *)tt->data)[0] != 0;
        }
    }
    /* Before opset 12 Dropout is an identity at inference (is_test is
     * ignored: this engine only runs inference graphs for those opsets). */
    if (training && !(ratio >= 0.0 && ratio < 1.0))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'ratio' must be in [0, 1), got %g", ratio);
    if (training && ratio == 0.0) training = false;

    mcp_dtype mdt = ctx->opset >= 10 ? MCP_DTYPE_BOOL : x->dtype;
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    mcp_tensor *mask = NULL;
    if (ctx->n_outputs > 1) {
        mask = mcp_kout(ctx, 1, mdt, x->rank, x->dims);
        if (!mask) return MCP_STATUS_OUT_OF_MEMORY;
    }
    int64_t n = mcp_tensor_numel(x);
    if (!training) {
        if (n) memcpy(y->data, x->data, mcp_tensor_nbytes(x));
        for (int64_t i = 0; mask && i < n; i++) mcp__red_st_i64(mdt, mask->data, i, 1);
        return MCP_STATUS_OK;
    }
    /* Without a seed the mask is still deterministic (seed 0): kernels keep
     * no state between runs. */
    int64_t seed = mcp_kattr_int(ctx, "seed", 0);
    dr_mt *mt = (dr_mt *)mcp_malloc(sizeof(dr_mt));
    if (!mt) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    dr_mt_seed(mt, (uint32_t)(uint64_t)seed);
    double scale = 1.0 / (1.0 - ratio);
    for (int64_t i = 0; i < n; i++) {
        bool keep = dr_mt_double(mt) >= ratio;
        double v = keep ? mcp__red_ld_f64(x->dtype, x->data, i) * scale : 0.0;
        mcp__red_st_f64(y->dtype, y->data, i, v);
        if (mask) mcp__red_st_i64(mdt, mask->data, i, keep ? 1 : 0);
    }
    mcp_free(mt);
    return MCP_STATUS_OK;
}
