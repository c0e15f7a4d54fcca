/*
 * Reference kernels: AveragePool, MaxPool, LpPool, their Global variants and
 * MaxUnpool.
 *
 * The windowed pools walk one index table per node: for each kernel offset
 * and output position, the input's linear spatial index, or a marker for a
 * tap that falls into the padding (-1, counted by count_include_pad) or past
 * it (-2, which only ceil_mode produces and nothing counts).
 */
#include <math.h>
#include <string.h>

#include "ops/ref/nn_util.h"

#define TAP_PAD (-1)
#define TAP_OUTSIDE (-2)

/* tab[p * K + kk]: the window of output position p is contiguous. */
static int64_t *pool_table(const mcp__nn_geom *g) {
    int nd = g->nd;
    int64_t K = mcp__nn_prod(nd, g->kernel), P = mcp__nn_prod(nd, g->out);
    int64_t *tab = mcp__nn_alloc(mcp__nn_mul_sat(K, P), sizeof(int64_t));
    if (!tab) return NULL;
    int64_t pidx[MCP__NN_MAX_SPATIAL] = {0};
    for (int64_t p = 0; p < P; p++) {
        int64_t kidx[MCP__NN_MAX_SPATIAL] = {0};
        for (int64_t kk = 0; kk < K; kk++) {
            int64_t lin = 0;
            bool pad = false, outside = false;
            for (int d = 0; d < nd; d++) {
                int64_t c = pidx[d] * g->stride[d] - g->pad_begin[d] + kidx[d] * g->dil[d];
                if (c < -g->pad_begin[d] || c >= g->in[d] + g->pad_end[d])
                    outside = true;
                else if (c < 0 || c >= g->in[d])
                    pad = true;
                else
                    lin = lin * g->in[d] + c;
            }
            if (outside)
                lin = TAP_OUTSIDE;
            else if (pad)
                lin = TAP_PAD;
            tab[p * K + kk] = lin;
            for (int d = nd - 1; d >= 0; d--) {
                if (++kidx[d] < g->kernel[d]) break;
                kidx[d] = 0;
            }
        }
        for (int d = nd - 1; d >= 0; d--) {
            if (++pidx[d] < g->out[d]) break;
            pidx[d] = 0;
        }
    }
    return tab;
}

static mcp_status pool_out(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, const mcp_tensor *x,
                           const mcp__nn_geom *g, mcp_tensor **y) {
    int64_t dims[MCP_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int d = 0; d < g->nd; d++) dims[d + 2] = g->out[d];
    *y = mcp_kout(ctx, i, dtype, x->rank, dims);
    return *y ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;
}

/* Reads the p attribute of LpPool / GlobalLpPool (float in opset 1, int
 * later; default 2). */
static mcp_status lp_p(mcp_kernel_ctx *ctx, double *p) {
    const mcp_attr *a = mcp_kattr(ctx, "p");
    *p = 2.0;
    if (a) *p = a->type == MCP_ATTR_FLOAT ? (double)a->f : (double)a->i;
    if (!(*p > 0.0))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'p' must be positive");
    return MCP_STATUS_OK;
}

static double lp_finish(double sum, double p) {
    if (p == 1.0) return sum;
    if (p == 2.0) return sqrt(sum);
    return pow(sum, 1.0 / p);
}

static double lp_term(double v, double p) {
    v = fabs(v);
    if (p == 1.0) return v;
    if (p == 2.0) return v * v;
    return pow(v, p);
}

/*
 * ---- float32 2-D fast paths ----
 * NCHW float tensors with two spatial dims walk each window directly (the
 * range of valid taps per output row and column) instead of through the
 * index table and double buffers, one N*C plane per task. They visit the
 * same taps in the same order and accumulate averages in double like the
 * generic path, so results are identical.
 */

/* The taps k in [0, K) with lo_b <= start + k * d < hi_b, as [*lo, *hi). */
static void pool_taps(int64_t start, int64_t d, int64_t K, int64_t lo_b, int64_t hi_b,
                      int64_t *lo, int64_t *hi) {
    int64_t l = start < lo_b ? (lo_b - start + d - 1) / d : 0;
    int64_t h = hi_b - start <= 0 ? 0 : (hi_b - 1 - start) / d + 1;
    if (h > K) h = K;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

static void avg_pool_f32_2d(const mcp__nn_geom *g, bool include_pad, const float *x, float *y,
                            int64_t NC, int nt) {
    const int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
    const int64_t KH = g->kernel[0], KW = g->kernel[1];
    const int64_t sh = g->stride[0], sw = g->stride[1], dh = g->dil[0], dw = g->dil[1];
    const int chunk = mcp_kchunk(OH * OW * KH * KW);
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (int64_t nc = 0; nc < NC; nc++) {
        const float *xs = x + nc * H * W;
        float *ys = y + nc * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t hs = oh * sh - g->pad_begin[0], h0, h1, ph0, ph1;
            pool_taps(hs, dh, KH, 0, H, &h0, &h1);
            pool_taps(hs, dh, KH, -g->pad_begin[0], H + g->pad_end[0], &ph0, &ph1);
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t ws = ow * sw - g->pad_begin[1], w0, w1, pw0, pw1;
                pool_taps(ws, dw, KW, 0, W, &w0, &w1);
                pool_taps(ws, dw, KW, -g->pad_begin[1], W + g->pad_end[1], &pw0, &pw1);
                double sum = 0.0;
                for (int64_t kh = h0; kh < h1; kh++) {
                    const float *row = xs + (hs + kh * dh) * W + ws;
                    for (int64_t kw = w0; kw < w1; kw++) sum += row[kw * dw];
                }
                /* count_include_pad counts taps in the padding but not past
                 * it (only ceil_mode reaches past it). */
                int64_t count = include_pad ? (ph1 - ph0) * (pw1 - pw0) : (h1 - h0) * (w1 - w0);
                ys[oh * OW + ow] = (float)(sum / (double)count);
            }
        }
    }
}

enum pool_kind { POOL_AVG, POOL_LP };

/* AveragePool and LpPool: float inputs, one output. */
static mcp_status run_float_pool(mcp_kernel_ctx *ctx, enum pool_kind kind) {
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is required");
    if (!mcp__nn_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    double p = 2.0;
    if (kind == POOL_LP) {
        mcp_status st = lp_p(ctx, &p);
        if (st != MCP_STATUS_OK) return st;
    }
    bool include_pad = kind == POOL_AVG && mcp_kattr_int(ctx, "count_include_pad", 0) != 0;
    mcp__nn_geom g;
    mcp_status st =
        mcp__nn_geom_init(ctx, x, NULL, MCP__NN_GEOM_CEIL | MCP__NN_GEOM_DILATIONS, &g);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor *y = NULL;
    st = pool_out(ctx, 0, x->dtype, x, &g, &y);
    if (st != MCP_STATUS_OK) return st;
    int64_t ny = mcp_tensor_numel(y);
    if (ny == 0) return MCP_STATUS_OK;
    int64_t K = mcp__nn_prod(g.nd, g.kernel), IS = mcp__nn_prod(g.nd, g.in);
    int64_t OS = mcp__nn_prod(g.nd, g.out), NC = x->dims[0] * x->dims[1];
    if (kind == POOL_AVG && x->dtype == MCP_DTYPE_FLOAT && g.nd == 2) {
        avg_pool_f32_2d(&g, include_pad, x->data, y->data, NC,
                        mcp_kthreads(ctx, mcp__nn_mul_sat(ny, K)));
        return MCP_STATUS_OK;
    }
    double *xv = mcp__nn_load_f64(x);
    double *yv = mcp__nn_alloc(ny, sizeof(double));
    int64_t *tab = pool_table(&g);
    if (!xv || !yv || !tab) {
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    } else {
        for (int64_t nc = 0; nc < NC; nc++) {
            const double *xs = xv + nc * IS;
            for (int64_t o = 0; o < OS; o++) {
                const int64_t *win = tab + o * K;
                double sum = 0.0;
                int64_t count = 0;
                for (int64_t kk = 0; kk < K; kk++) {
                    if (win[kk] >= 0) {
                        sum += kind == POOL_AVG ? xs[win[kk]] : lp_term(xs[win[kk]], p);
                        count++;
                    } else if (win[kk] == TAP_PAD && include_pad) {
                        count++;
                    }
                }
                yv[nc * OS + o] = kind == POOL_AVG ? sum / (double)count : lp_finish(sum, p);
            }
        }
        mcp__nn_store_f64(y, yv);
    }
    mcp_free(xv);
    mcp_free(yv);
    mcp_free(tab);
    return st;
}

mcp_status mcp__nn_run_average_pool(mcp_kernel_ctx *ctx) { return run_float_pool(ctx, POOL_AVG); }

mcp_status mcp__nn_run_lp_pool(mcp_kernel_ctx *ctx) { return run_float_pool(ctx, POOL_LP); }

/* ---- MaxPool ---- */

/* Linear index of input element (nc, spatial lin) for the Indices output;
 * storage_order 1 counts the spatial dims column-major. */
static int64_t max_index(const mcp__nn_geom *g, int64_t nc, int64_t IS, int64_t lin,
                         bool col_major) {
    if (!col_major) return nc * IS + lin;
    int64_t coord[MCP__NN_MAX_SPATIAL];
    for (int d = g->nd - 1; d >= 0; d--) {
        coord[d] = lin % g->in[d];
        lin /= g->in[d];
    }
    int64_t idx = 0, mul = 1;
    for (int d = 0; d < g->nd; d++) {
        idx += coord[d] * mul;
        mul *= g->in[d];
    }
    return nc * IS + idx;
}

/* MaxPool on float32 NCHW: the first tap in the input starts the maximum,
 * later ones replace it only when greater (padding never wins, ties keep
 * the first tap, a leading NaN stays), as in the generic loop; ind (may be
 * NULL) receives the Indices output. */
static void max_pool_f32_2d(const mcp__nn_geom *g, bool col_major, const float *x, float *y,
                            int64_t *ind, int64_t NC, int nt) {
    const int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
    const int64_t KH = g->kernel[0], KW = g->kernel[1];
    const int64_t sh = g->stride[0], sw = g->stride[1], dh = g->dil[0], dw = g->dil[1];
    const int chunk = mcp_kchunk(OH * OW * KH * KW);
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (int64_t nc = 0; nc < NC; nc++) {
        const float *xs = x + nc * H * W;
        float *ys = y + nc * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t hs = oh * sh - g->pad_begin[0], h0, h1;
            pool_taps(hs, dh, KH, 0, H, &h0, &h1);
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t ws = ow * sw - g->pad_begin[1], w0, w1;
                pool_taps(ws, dw, KW, 0, W, &w0, &w1);
                float best = -INFINITY;
                if (h0 == h1 || w0 == w1) {
                    /* Only padding: -inf, and index -1. */
                    ys[oh * OW + ow] = best;
                    if (ind) ind[nc * OH * OW + oh * OW + ow] = -1;
                    continue;
                }
                best = xs[(hs + h0 * dh) * W + ws + w0 * dw];
                if (!ind) {
                    /* A select on values, not a branch: which tap wins is
                     * data-dependent and would mispredict. */
                    for (int64_t kh = h0; kh < h1; kh++) {
                        const float *row = xs + (hs + kh * dh) * W + ws;
                        for (int64_t kw = w0; kw < w1; kw++) {
                            float v = row[kw * dw];
                            best = v > best ? v : best;
                        }
                    }
                    ys[oh * OW + ow] = best;
                    continue;
                }
                int64_t at = (hs + h0 * dh) * W + ws + w0 * dw; /* spatial index of the best */
                for (int64_t kh = h0; kh < h1; kh++) {
                    int64_t rowat = (hs + kh * dh) * W + ws;
                    for (int64_t kw = w0; kw < w1; kw++) {
                        float v = xs[rowat + kw * dw];
                        if (v > best) {
                            best = v;
                            at = rowat + kw * dw;
                        }
                    }
                }
                ys[oh * OW + ow] = best;
                ind[nc * OH * OW + oh * OW + ow] = max_index(g, nc, H * W, at, col_major);
            }
        }
    }
}

static bool max_pool_dtype_ok(mcp_dtype d) {
    return mcp__nn_is_float(d) || d == MCP_DTYPE_INT8 || d == MCP_DTYPE_UINT8;
}

mcp_status mcp__nn_run_max_pool(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is required");
    if (!max_pool_dtype_ok(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    int64_t order = mcp_kattr_int(ctx, "storage_order", 0);
    if (order != 0 && order != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'storage_order' must be 0 or 1");
    mcp__nn_geom g;
    mcp_status st =
        mcp__nn_geom_init(ctx, x, NULL, MCP__NN_GEOM_CEIL | MCP__NN_GEOM_DILATIONS, &g);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor *y = NULL, *ind = NULL;
    st = pool_out(ctx, 0, x->dtype, x, &g, &y);
    if (st == MCP_STATUS_OK && ctx->n_outputs > 1)
        st = pool_out(ctx, 1, MCP_DTYPE_INT64, x, &g, &ind);
    if (st != MCP_STATUS_OK) return st;
    int64_t ny = mcp_tensor_numel(y);
    if (ny == 0) return MCP_STATUS_OK;
    int64_t K = mcp__nn_prod(g.nd, g.kernel), IS = mcp__nn_prod(g.nd, g.in);
    int64_t OS = mcp__nn_prod(g.nd, g.out), NC = x->dims[0] * x->dims[1];
    int64_t *iv = ind ? ind->data : NULL;
    if (x->dtype == MCP_DTYPE_FLOAT && g.nd == 2) {
        max_pool_f32_2d(&g, order == 1, x->data, y->data, iv, NC,
                        mcp_kthreads(ctx, mcp__nn_mul_sat(ny, K)));
        return MCP_STATUS_OK;
    }
    int64_t *tab = pool_table(&g);
    if (!tab) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    bool is_float = mcp__nn_is_float(x->dtype);
    for (int64_t nc = 0; nc < NC; nc++) {
        for (int64_t o = 0; o < OS; o++) {
            const int64_t *win = tab + o * K;
            int64_t best = -1;
            double bf = -INFINITY;
            int64_t bi = INT64_MIN;
            /* Padding never wins; ties keep the first tap. */
            for (int64_t kk = 0; kk < K; kk++) {
                if (win[kk] < 0) continue;
                int64_t at = nc * IS + win[kk];
                if (is_float) {
                    double v = mcp__nn_get_f64(x, at);
                    if (best < 0 || v > bf) {
                        bf = v;
                        best = win[kk];
                    }
                } else {
                    int64_t v = mcp__nn_get_i64(x, at);
                    if (best < 0 || v > bi) {
                        bi = v;
                        best = win[kk];
                    }
                }
            }
            int64_t yi = nc * OS + o;
            if (is_float)
                mcp__nn_set_f64(y, yi, bf);
            else
                mcp__nn_set_i64(y, yi, best < 0 ? 0 : bi);
            if (iv) iv[yi] = best < 0 ? -1 : max_index(&g, nc, IS, best, order == 1);
        }
    }
    mcp_free(tab);
    return MCP_STATUS_OK;
}

/* ---- global pools ---- */

enum global_kind { GLOBAL_AVG, GLOBAL_MAX, GLOBAL_LP };

/*
 * GlobalAveragePool / GlobalMaxPool on float32, one plane of IS elements
 * per output, planes split over nt threads. The mean sums in double over
 * four interleaved partial sums (a single running sum waits on each add's
 * latency), so the double sum can differ from the generic sequential one in
 * its last bits, which the rounding to float almost always hides. The max
 * is the generic loop: NaN anywhere gives NaN.
 */
static void global_pool_f32(bool is_max, const float *x, float *y, int64_t NC, int64_t IS,
                            int nt) {
    const int chunk = mcp_kchunk(IS);
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (int64_t nc = 0; nc < NC; nc++) {
        const float *xs = x + nc * IS;
        if (is_max) {
            float acc = -INFINITY;
            for (int64_t i = 0; i < IS; i++) {
                float v = xs[i];
                if (v > acc || v != v) acc = v;
            }
            y[nc] = acc;
            continue;
        }
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        int64_t i = 0;
        for (; i + 4 <= IS; i += 4) {
            s0 += xs[i];
            s1 += xs[i + 1];
            s2 += xs[i + 2];
            s3 += xs[i + 3];
        }
        for (; i < IS; i++) s0 += xs[i];
        y[nc] = (float)(((s0 + s1) + (s2 + s3)) / (double)IS);
    }
}

static mcp_status run_global_pool(mcp_kernel_ctx *ctx, enum global_kind kind) {
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is required");
    bool is_float = mcp__nn_is_float(x->dtype);
    if (!is_float && !(kind == GLOBAL_MAX && max_pool_dtype_ok(x->dtype)))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (x->rank < 3)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' has rank %d, expected at least 3", x->rank);
    double p = 2.0;
    if (kind == GLOBAL_LP) {
        mcp_status st = lp_p(ctx, &p);
        if (st != MCP_STATUS_OK) return st;
    }
    int64_t dims[MCP_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int d = 2; d < x->rank; d++) dims[d] = 1;
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t NC = x->dims[0] * x->dims[1];
    int64_t IS = mcp__nn_prod(x->rank - 2, x->dims + 2);
    if (x->dtype == MCP_DTYPE_FLOAT && kind != GLOBAL_LP) {
        global_pool_f32(kind == GLOBAL_MAX, x->data, y->data, NC, IS,
                        mcp_kthreads(ctx, mcp__nn_mul_sat(NC, IS)));
        return MCP_STATUS_OK;
    }
    for (int64_t nc = 0; nc < NC; nc++) {
        if (kind == GLOBAL_MAX && !is_float) {
            int64_t best = 0;
            for (int64_t i = 0; i < IS; i++) {
                int64_t v = mcp__nn_get_i64(x, nc * IS + i);
                if (i == 0 || v > best) best = v;
            }
            mcp__nn_set_i64(y, nc, best);
            continue;
        }
        double acc = kind == GLOBAL_MAX ? -INFINITY : 0.0;
        for (int64_t i = 0; i < IS; i++) {
            double v = mcp__nn_get_f64(x, nc * IS + i);
            if (kind == GLOBAL_MAX) {
                if (v > acc || isnan(v)) acc = v;
            } else if (kind == GLOBAL_AVG) {
                acc += v;
            } else {
                acc += lp_term(v, p);
            }
        }
        if (kind == GLOBAL_AVG) acc /= (double)IS;
        if (kind == GLOBAL_LP) acc = lp_finish(acc, p);
        mcp__nn_set_f64(y, nc, acc);
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__nn_run_global_average_pool(mcp_kernel_ctx *ctx) {
    return run_global_pool(ctx, GLOBAL_AVG);
}

mcp_status mcp__nn_run_global_max_pool(mcp_kernel_ctx *ctx) {
    return run_global_pool(ctx, GLOBAL_MAX);
}

mcp_status mcp__nn_run_global_lp_pool(mcp_kernel_ctx *ctx) {
    return run_global_pool(ctx, GLOBAL_LP);
}

/* ---- MaxUnpool ---- */

/*
 * Scatters X into a zero tensor of the inferred shape
 * (in - 1) * stride + kernel - pads at the positions I names (flat indices
 * over that whole tensor, as MaxPool produces them). A larger output_shape
 * keeps that result in the leading corner of each spatial block, which is
 * what the ONNX test data expects.
 */
mcp_status mcp__nn_run_max_unpool(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *ind = mcp_kin(ctx, 1), *osh = mcp_kin(ctx, 2);
    if (!x || !ind)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'I' are required");
    if (ind->dtype != MCP_DTYPE_INT64)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'I' must be int64");
    if (!mcp_dtype_is_numeric(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (ind->rank != x->rank || memcmp(ind->dims, x->dims, sizeof(int64_t) * (size_t)x->rank))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'I' must have the shape of 'X'");
    mcp__nn_geom g;
    mcp_status st = mcp__nn_geom_init(ctx, x, NULL, MCP__NN_GEOM_NO_OUT, &g);
    if (st != MCP_STATUS_OK) return st;
    int nd = g.nd;
    int64_t inf_dims[MCP_MAX_RANK], out_dims[MCP_MAX_RANK];
    inf_dims[0] = x->dims[0];
    inf_dims[1] = x->dims[1];
    for (int d = 0; d < nd; d++) {
        if (g.in[d] > 1 && g.stride[d] > (INT64_MAX / 4) / g.in[d])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'X' spatial dim %d is too large for the strides", d);
        inf_dims[d + 2] =
            (g.in[d] - 1) * g.stride[d] + g.kernel[d] - g.pad_begin[d] - g.pad_end[d];
        if (inf_dims[d + 2] < 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'pads' is too large");
    }
    memcpy(out_dims, inf_dims, sizeof(inf_dims));
    if (osh) {
        if (osh->rank != 1 || osh->dims[0] != x->rank || !mcp_dtype_is_integer(osh->dtype))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'output_shape' must be a 1-D integer tensor of %d values",
                             x->rank);
        for (int d = 0; d < x->rank; d++) {
            out_dims[d] = mcp__nn_get_i64(osh, d);
            if (d < 2 ? out_dims[d] != inf_dims[d] : out_dims[d] < inf_dims[d])
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'output_shape' dim %d (%lld) is incompatible with the "
                                 "unpooled size %lld",
                                 d, (long long)out_dims[d], (long long)inf_dims[d]);
        }
    }
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, out_dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n_inf = mcp_shape_numel(x->rank, inf_dims);
    int64_t nx = mcp_tensor_numel(x);
    const int64_t *iv = ind->data;
    size_t esz = (size_t)mcp_dtype_size(x->dtype);
    for (int64_t i = 0; i < nx; i++) {
        int64_t at = iv[i];
        if (at < 0 || at >= n_inf)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'I' value %lld is out of range [0, %lld)", (long long)at,
                             (long long)n_inf);
        /* Map the flat index in the inferred shape to the output shape. */
        int64_t rem = at, lin = 0, mul = 1;
        for (int d = x->rank - 1; d >= 0; d--) {
            int64_t c = rem % inf_dims[d];
            rem /= inf_dims[d];
            lin += c * mul;
            mul *= out_dims[d];
        }
        memcpy((char *)y->data + (size_t)lin * esz, (const char *)x->data + (size_t)i * esz, esz);
    }
    return MCP_STATUS_OK;
}
