/*
 * Reference kernels: Conv, ConvTranspose, ConvInteger, QLinearConv.
 *
 * All four share one grouped N-D core computed in double: Conv gathers the
 * input through an im2col index table and multiplies by the weights with a
 * plain GEMM loop; ConvTranspose multiplies first and scatters through the
 * same kind of table (col2im). The integer variants subtract their zero
 * points while converting to double; products of 8-bit values summed in
 * double stay exact far beyond any realistic reduction length.
 */
#include <math.h>
#include <string.h>

#include "ops/ref/nn_util.h"

/* ---- index tables ---- */

/*
 * For every kernel offset kk (K of them) and every position p of the
 * iterated grid (P of them), the linear index in the other grid, or -1 when
 * it falls outside: tab[kk * P + p].
 *   forward (Conv):  other = p * stride - pad_begin + kk * dil, other grid = in
 *   transpose:       same formula, p over the input, other grid = out
 */
static int64_t *make_index_table(const mcp__nn_geom *g, const int64_t *iter_dims,
                                 const int64_t *other_dims) {
    int nd = g->nd;
    int64_t K = mcp__nn_prod(nd, g->kernel), P = mcp__nn_prod(nd, iter_dims);
    int64_t *tab = mcp__nn_alloc(mcp__nn_mul_sat(K, P), sizeof(int64_t));
    if (!tab) return NULL;
    int64_t kidx[MCP__NN_MAX_SPATIAL] = {0};
    for (int64_t kk = 0; kk < K; kk++) {
        int64_t pidx[MCP__NN_MAX_SPATIAL] = {0};
        for (int64_t p = 0; p < P; p++) {
            int64_t lin = 0;
            for (int d = 0; d < nd; d++) {
                int64_t c = pidx[d] * g->stride[d] - g->pad_begin[d] + kidx[d] * g->dil[d];
                if (c < 0 || c >= other_dims[d]) {
                    lin = -1;
                    break;
                }
                lin = lin * other_dims[d] + c;
            }
            tab[kk * P + p] = lin;
            for (int d = nd - 1; d >= 0; d--) {
                if (++pidx[d] < iter_dims[d]) break;
                pidx[d] = 0;
            }
        }
        for (int d = nd - 1; d >= 0; d--) {
            if (++kidx[d] < g->kernel[d]) break;
            kidx[d] = 0;
        }
    }
    return tab;
}

/*
 * Grouped convolution: x [N, C, in...], w [M, C/group, k...], bias [M] or
 * NULL, y [N, M, out...] (written, not accumulated).
 */
static mcp_status conv_core(mcp_kernel_ctx *ctx, const mcp__nn_geom *g, int64_t N, int64_t C,
                            int64_t M, int64_t group, const double *x, const double *w,
                            const double *bias, double *y) {
    int nd = g->nd;
    int64_t K = mcp__nn_prod(nd, g->kernel);
    int64_t IS = mcp__nn_prod(nd, g->in), OS = mcp__nn_prod(nd, g->out);
    int64_t Cg = C / group, Mg = M / group;
    int64_t *tab = make_index_table(g, g->out, g->in);
    double *col = mcp__nn_alloc(mcp__nn_mul_sat(mcp__nn_mul_sat(Cg, K), OS), sizeof(double));
    if (!tab || !col) {
        mcp_free(tab);
        mcp_free(col);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t gi = 0; gi < group; gi++) {
            const double *xg = x + (n * C + gi * Cg) * IS;
            for (int64_t c = 0; c < Cg; c++)
                for (int64_t kk = 0; kk < K; kk++) {
                    double *crow = col + (c * K + kk) * OS;
                    const int64_t *trow = tab + kk * OS;
                    const double *xc = xg + c * IS;
                    for (int64_t p = 0; p < OS; p++) crow[p] = trow[p] >= 0 ? xc[trow[p]] : 0.0;
                }
            for (int64_t mg = 0; mg < Mg; mg++) {
                int64_t m = gi * Mg + mg;
                double *yrow = y + (n * M + m) * OS;
                double b = bias ? bias[m] : 0.0;
                for (int64_t p = 0; p < OS; p++) yrow[p] = b;
                const double *wrow = w + m * Cg * K;
                for (int64_t ck = 0; ck < Cg * K; ck++) {
                    double wv = wrow[ck];
                    if (wv == 0.0) continue;
                    const double *crow = col + ck * OS;
                    for (int64_t p = 0; p < OS; p++) yrow[p] += wv * crow[p];
                }
            }
        }
    }
    mcp_free(tab);
    mcp_free(col);
    return MCP_STATUS_OK;
}

/*
 * Checks X / W of a convolution and fills the geometry. W is [M, C/group,
 * k...]; kernel_shape, when present, must match W.
 */
static mcp_status conv_setup(mcp_kernel_ctx *ctx, const mcp_tensor *x, const mcp_tensor *w,
                             int64_t *group_out, mcp__nn_geom *g) {
    if (x->rank < 3 || x->rank > MCP_MAX_RANK)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' has rank %d, expected at least 3 (N, C, spatial...)",
                         x->rank);
    if (w->rank != x->rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'W' has rank %d, expected %d like 'X'", w->rank, x->rank);
    int64_t group = mcp_kattr_int(ctx, "group", 1);
    if (group <= 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'group' must be positive");
    int64_t C = x->dims[1], M = w->dims[0];
    if (C % group != 0 || M % group != 0 || w->dims[1] * group != C)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'W' shape does not match 'X' channels %lld with group %lld",
                         (long long)C, (long long)group);
    mcp_status st = mcp__nn_geom_init(ctx, x, w->dims + 2, MCP__NN_GEOM_DILATIONS, g);
    if (st != MCP_STATUS_OK) return st;
    for (int d = 0; d < g->nd; d++)
        if (g->kernel[d] != w->dims[d + 2])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'kernel_shape' does not match input 'W'");
    *group_out = group;
    return MCP_STATUS_OK;
}

static mcp_status alloc_out(mcp_kernel_ctx *ctx, mcp_dtype dtype, int64_t N, int64_t M,
                            const mcp__nn_geom *g, mcp_tensor **y) {
    int64_t dims[MCP_MAX_RANK];
    dims[0] = N;
    dims[1] = M;
    for (int d = 0; d < g->nd; d++) dims[d + 2] = g->out[d];
    *y = mcp_kout(ctx, 0, dtype, g->nd + 2, dims);
    return *y ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;
}

/* ---- Conv ---- */

mcp_status mcp__nn_run_conv(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *w = mcp_kin(ctx, 1), *b = mcp_kin(ctx, 2);
    if (!x || !w)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'W' are required");
    if (!mcp__nn_is_float(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                         "inputs 'X', 'W', 'B' must share one float type (got %s)",
                         mcp_dtype_name(x->dtype));
    int64_t group = 1;
    mcp__nn_geom g;
    mcp_status st = conv_setup(ctx, x, w, &group, &g);
    if (st != MCP_STATUS_OK) return st;
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
    if (b && mcp_tensor_numel(b) != M)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'B' has %lld elements, expected %lld",
                         (long long)mcp_tensor_numel(b), (long long)M);
    mcp_tensor *y = NULL;
    st = alloc_out(ctx, x->dtype, N, M, &g, &y);
    if (st != MCP_STATUS_OK) return st;
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    double *xv = mcp__nn_load_f64(x), *wv = mcp__nn_load_f64(w);
    double *bv = b ? mcp__nn_load_f64(b) : NULL;
    double *yv = mcp__nn_alloc(mcp_tensor_numel(y), sizeof(double));
    if (!xv || !wv || (b && !bv) || !yv) {
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    } else {
        st = conv_core(ctx, &g, N, C, M, group, xv, wv, bv, yv);
        if (st == MCP_STATUS_OK) mcp__nn_store_f64(y, yv);
    }
    mcp_free(xv);
    mcp_free(wv);
    mcp_free(bv);
    mcp_free(yv);
    return st;
}

/* ---- quantized convolutions ---- */

static bool is_q8(mcp_dtype d) { return d == MCP_DTYPE_UINT8 || d == MCP_DTYPE_INT8; }

/*
 * Reads an optional zero point / scale that is either per tensor (one
 * element) or per output channel (M elements) into out[M]. `name` is for
 * messages; dflt fills out when t is NULL.
 */
static mcp_status per_channel(mcp_kernel_ctx *ctx, const mcp_tensor *t, const char *name,
                              int64_t M, bool allow_per_channel, double dflt, double *out) {
    if (!t) {
        for (int64_t m = 0; m < M; m++) out[m] = dflt;
        return MCP_STATUS_OK;
    }
    int64_t n = mcp_tensor_numel(t);
    if (t->rank > 1 || (n != 1 && !(allow_per_channel && n == M)))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must be a scalar%s", name,
                         allow_per_channel ? " or a 1-D tensor with one value per output channel"
                                           : "");
    for (int64_t m = 0; m < M; m++) out[m] = mcp__nn_get_f64(t, n == 1 ? 0 : m);
    return MCP_STATUS_OK;
}

/*
 * Shared body of ConvInteger and QLinearConv: converts x - x_zp and
 * w - w_zp[m] to double and runs the core into acc (numel of the output).
 */
static mcp_status qconv_accumulate(mcp_kernel_ctx *ctx, const mcp_tensor *x, const mcp_tensor *w,
                                   double x_zp, const double *w_zp, int64_t group,
                                   const mcp__nn_geom *g, const double *bias, double *acc) {
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
    double *xv = mcp__nn_load_f64(x), *wv = mcp__nn_load_f64(w);
    mcp_status st;
    if (!xv || !wv) {
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    } else {
        int64_t nx = mcp_tensor_numel(x), nw = mcp_tensor_numel(w);
        for (int64_t i = 0; i < nx; i++) xv[i] -= x_zp;
        int64_t per_m = M > 0 ? nw / M : 0;
        for (int64_t i = 0; i < nw; i++) wv[i] -= w_zp[i / per_m];
        st = conv_core(ctx, g, N, C, M, group, xv, wv, bias, acc);
    }
    mcp_free(xv);
    mcp_free(wv);
    return st;
}

mcp_status mcp__nn_run_conv_integer(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *w = mcp_kin(ctx, 1);
    const mcp_tensor *xzp = mcp_kin(ctx, 2), *wzp = mcp_kin(ctx, 3);
    if (!x || !w)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'x' and 'w' are required");
    if (!is_q8(x->dtype) || !is_q8(w->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "inputs 'x' and 'w' must be int8 or uint8");
    if ((xzp && xzp->dtype != x->dtype) || (wzp && wzp->dtype != w->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "zero points must have the type of their input");
    int64_t group = 1;
    mcp__nn_geom g;
    mcp_status st = conv_setup(ctx, x, w, &group, &g);
    if (st != MCP_STATUS_OK) return st;
    int64_t N = x->dims[0], M = w->dims[0];
    double x_zp = 0.0;
    st = per_channel(ctx, xzp, "x_zero_point", 1, false, 0.0, &x_zp);
    if (st != MCP_STATUS_OK) return st;
    double *w_zp = mcp__nn_alloc(M, sizeof(double));
    if (!w_zp) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    st = per_channel(ctx, wzp, "w_zero_point", M, true, 0.0, w_zp);
    mcp_tensor *y = NULL;
    if (st == MCP_STATUS_OK) st = alloc_out(ctx, MCP_DTYPE_INT32, N, M, &g, &y);
    if (st != MCP_STATUS_OK || mcp_tensor_numel(y) == 0) {
        mcp_free(w_zp);
        return st;
    }
    int64_t ny = mcp_tensor_numel(y);
    double *acc = mcp__nn_alloc(ny, sizeof(double));
    if (!acc) {
        mcp_free(w_zp);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    st = qconv_accumulate(ctx, x, w, x_zp, w_zp, group, &g, NULL, acc);
    if (st == MCP_STATUS_OK) {
        int32_t *yv = y->data;
        for (int64_t i = 0; i < ny; i++) yv[i] = (int32_t)(int64_t)acc[i];
    }
    mcp_free(acc);
    mcp_free(w_zp);
    return st;
}

/* Rounds half to even and saturates to the range of a quantized dtype. */
static int64_t saturate_q(mcp_dtype d, double v) {
    double lo = d == MCP_DTYPE_INT8 ? -128.0 : 0.0, hi = d == MCP_DTYPE_INT8 ? 127.0 : 255.0;
    if (isnan(v)) return 0;
    v = nearbyint(v);
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return (int64_t)v;
}

/* QLinearConv, and with `sum` the internal QLinearConvAdd (graph.h): the
 * unrounded convolution plus S dequantized, [Relu], quantized to y. */
static mcp_status qlinear_conv(mcp_kernel_ctx *ctx, bool sum) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *xs = mcp_kin(ctx, 1), *xzp = mcp_kin(ctx, 2);
    const mcp_tensor *w = mcp_kin(ctx, 3), *ws = mcp_kin(ctx, 4), *wzp = mcp_kin(ctx, 5);
    const mcp_tensor *ys = mcp_kin(ctx, 6), *yzp = mcp_kin(ctx, 7), *b = mcp_kin(ctx, 8);
    if (!x || !xs || !w || !ws || !ys)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'x', 'x_scale', 'w', 'w_scale' and 'y_scale' are required");
    if (!is_q8(x->dtype) || !is_q8(w->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "inputs 'x' and 'w' must be int8 or uint8");
    if ((xzp && xzp->dtype != x->dtype) || (wzp && wzp->dtype != w->dtype) ||
        (yzp && !is_q8(yzp->dtype)))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "zero points must have the type of their tensor");
    if (!mcp__nn_is_float(xs->dtype) || !mcp__nn_is_float(ws->dtype) ||
        !mcp__nn_is_float(ys->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "scales must be float tensors");
    if (b && b->dtype != MCP_DTYPE_INT32)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'B' must be int32");
    int64_t group = 1;
    mcp__nn_geom g;
    mcp_status st = conv_setup(ctx, x, w, &group, &g);
    if (st != MCP_STATUS_OK) return st;
    int64_t N = x->dims[0], M = w->dims[0];
    mcp_dtype ydt = yzp ? yzp->dtype : x->dtype;
    if (b && mcp_tensor_numel(b) != M)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'B' has %lld elements, expected %lld",
                         (long long)mcp_tensor_numel(b), (long long)M);
    double x_zp = 0.0, x_scale = 0.0, y_scale = 0.0, y_zp = 0.0;
    /* Per-channel arrays: w_zp, w_scale, bias. */
    double *buf = mcp__nn_alloc(mcp__nn_mul_sat(M, 3), sizeof(double));
    if (!buf) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    double *w_zp = buf, *w_scale = buf + M, *bias = buf + 2 * M;
    st = per_channel(ctx, xzp, "x_zero_point", 1, false, 0.0, &x_zp);
    if (st == MCP_STATUS_OK) st = per_channel(ctx, xs, "x_scale", 1, false, 0.0, &x_scale);
    if (st == MCP_STATUS_OK) st = per_channel(ctx, ys, "y_scale", 1, false, 0.0, &y_scale);
    if (st == MCP_STATUS_OK) st = per_channel(ctx, yzp, "y_zero_point", 1, false, 0.0, &y_zp);
    if (st == MCP_STATUS_OK) st = per_channel(ctx, wzp, "w_zero_point", M, true, 0.0, w_zp);
    if (st == MCP_STATUS_OK) st = per_channel(ctx, ws, "w_scale", M, true, 0.0, w_scale);
    if (st == MCP_STATUS_OK) st = per_channel(ctx, b, "B", M, true, 0.0, bias);
    mcp_tensor *y = NULL;
    if (st == MCP_STATUS_OK) st = alloc_out(ctx, ydt, N, M, &g, &y);
    if (st != MCP_STATUS_OK || mcp_tensor_numel(y) == 0) {
        mcp_free(buf);
        return st;
    }
    int64_t ny = mcp_tensor_numel(y);
    double *acc = mcp__nn_alloc(ny, sizeof(double));
    if (!acc) {
        mcp_free(buf);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    const mcp_tensor *sv = sum ? mcp_kin(ctx, 9) : NULL, *ss = sum ? mcp_kin(ctx, 10) : NULL;
    const mcp_tensor *szp = sum ? mcp_kin(ctx, 11) : NULL;
    double s_scale = 0.0, s_zp = 0.0;
    if (sum && (!sv || !ss || !is_q8(sv->dtype) || (szp && szp->dtype != sv->dtype) || sv->rank != y->rank ||
                memcmp(sv->dims, y->dims, sizeof *y->dims * (size_t)y->rank) != 0))
        st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'S' must be an 8-bit tensor of the output's shape");
    if (st == MCP_STATUS_OK && sum) st = per_channel(ctx, ss, "S_scale", 1, false, 0.0, &s_scale);
    if (st == MCP_STATUS_OK && sum) st = per_channel(ctx, szp, "S_zero_point", 1, false, 0.0, &s_zp);
    bool relu = sum && mcp_kattr_int(ctx, "relu", 0) != 0;
    if (st == MCP_STATUS_OK) st = qconv_accumulate(ctx, x, w, x_zp, w_zp, group, &g, bias, acc);
    if (st == MCP_STATUS_OK) {
        int64_t per_m = ny / (N * M);
        for (int64_t i = 0; i < ny; i++) {
            int64_t m = (i / per_m) % M;
            float v;
            if (sum) {
                float f = (float)acc[i] * ((float)x_scale * (float)w_scale[m]) +
                          (float)(mcp__nn_get_f64(sv, i) - s_zp) * (float)s_scale;
                if (relu && !(f > 0.0f)) f = 0.0f;
                v = f / (float)y_scale;
            } else {
                /* Requantize in float, the way the reference runtimes do. */
                float scale = (float)x_scale * (float)w_scale[m] / (float)y_scale;
                v = (float)acc[i] * scale;
            }
            mcp__nn_set_i64(y, i, saturate_q(ydt, (double)nearbyintf(v) + y_zp));
        }
    }
    mcp_free(acc);
    mcp_free(buf);
    return st;
}

mcp_status mcp__nn_run_qlinear_conv(mcp_kernel_ctx *ctx) { return qlinear_conv(ctx, false); }
mcp_status mcp__nn_run_qlinear_conv_add(mcp_kernel_ctx *ctx) { return qlinear_conv(ctx, true); }

/* ---- ConvTranspose ---- */

mcp_status mcp__nn_run_conv_transpose(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *w = mcp_kin(ctx, 1), *b = mcp_kin(ctx, 2);
    if (!x || !w)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'W' are required");
    if (!mcp__nn_is_float(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                         "inputs 'X', 'W', 'B' must share one float type (got %s)",
                         mcp_dtype_name(x->dtype));
    if (x->rank < 3 || w->rank != x->rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'X' (rank %d) and 'W' (rank %d) must share a rank of at least 3",
                         x->rank, w->rank);
    int64_t group = mcp_kattr_int(ctx, "group", 1);
    if (group <= 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'group' must be positive");
    int64_t N = x->dims[0], C = x->dims[1];
    if (w->dims[0] != C || C % group != 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'W' dim 0 (%lld) must equal the channels of 'X' (%lld), "
                         "divisible by group %lld",
                         (long long)w->dims[0], (long long)C, (long long)group);
    int64_t Mg = w->dims[1], M = Mg * group;
    if (b && mcp_tensor_numel(b) != M)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'B' has %lld elements, expected %lld",
                         (long long)mcp_tensor_numel(b), (long long)M);
    /* Parse kernel, strides, dilations and pads; output size and auto_pad
     * follow ConvTranspose's own rules below. */
    mcp__nn_geom g;
    const char *auto_pad = mcp_kattr_string(ctx, "auto_pad", "NOTSET");
    mcp_status st = mcp__nn_geom_init(ctx, x, w->dims + 2,
                                      MCP__NN_GEOM_DILATIONS | MCP__NN_GEOM_NO_OUT, &g);
    if (st != MCP_STATUS_OK) return st;
    int nd = g.nd;
    for (int d = 0; d < nd; d++)
        if (g.kernel[d] != w->dims[d + 2])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'kernel_shape' does not match input 'W'");
    int64_t outpad[MCP__NN_MAX_SPATIAL] = {0};
    int64_t cnt = 0;
    const int64_t *op = mcp_kattr_ints(ctx, "output_padding", &cnt);
    if (op) {
        if (cnt != nd)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'output_padding' has %lld values, expected %d",
                             (long long)cnt, nd);
        for (int d = 0; d < nd; d++) {
            if (op[d] < 0 || op[d] > INT32_MAX)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "attribute 'output_padding' is out of range");
            outpad[d] = op[d];
        }
    }
    const int64_t *oshape = mcp_kattr_ints(ctx, "output_shape", &cnt);
    if (oshape) {
        if (cnt == nd + 2)
            oshape += 2;
        else if (cnt != nd)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'output_shape' has %lld values, expected %d",
                             (long long)cnt, nd);
    }
    bool same = strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0;
    bool valid = strcmp(auto_pad, "VALID") == 0;
    if (!same && !valid && strcmp(auto_pad, "NOTSET") != 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'auto_pad' has unknown value '%s'", auto_pad);
    for (int d = 0; d < nd; d++) {
        if (g.in[d] > 1 && g.stride[d] > (INT64_MAX / 4) / g.in[d])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'X' spatial dim %d is too large for the strides", d);
        int64_t eff = (g.kernel[d] - 1) * g.dil[d] + 1;
        int64_t full = g.stride[d] * (g.in[d] - 1) + outpad[d] + eff;
        if (oshape || same) {
            int64_t out = oshape ? oshape[d] : g.in[d] * g.stride[d];
            if (out < 0)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "attribute 'output_shape' must be non-negative");
            int64_t total = full - out;
            if (total < 0) {
                /* A larger requested output extends past the end. */
                g.pad_begin[d] = 0;
                g.pad_end[d] = total;
            } else if (strcmp(auto_pad, "SAME_UPPER") == 0) {
                g.pad_begin[d] = total / 2;
                g.pad_end[d] = total - total / 2;
            } else {
                g.pad_begin[d] = total - total / 2;
                g.pad_end[d] = total / 2;
            }
            g.out[d] = out;
        } else {
            if (valid) g.pad_begin[d] = g.pad_end[d] = 0;
            g.out[d] = full - g.pad_begin[d] - g.pad_end[d];
            if (g.out[d] < 0)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "attribute 'pads' exceeds the output size");
        }
    }
    mcp_tensor *y = NULL;
    st = alloc_out(ctx, x->dtype, N, M, &g, &y);
    if (st != MCP_STATUS_OK) return st;
    int64_t ny = mcp_tensor_numel(y);
    if (ny == 0) return MCP_STATUS_OK;
    int64_t K = mcp__nn_prod(nd, g.kernel), IS = mcp__nn_prod(nd, g.in);
    int64_t OS = mcp__nn_prod(nd, g.out), Cg = C / group;
    double *xv = mcp__nn_load_f64(x), *wv = mcp__nn_load_f64(w);
    double *bv = b ? mcp__nn_load_f64(b) : NULL;
    double *yv = mcp__nn_alloc(ny, sizeof(double));
    int64_t ncol = mcp__nn_mul_sat(K, IS);
    double *col = mcp__nn_alloc(ncol, sizeof(double));
    int64_t *tab = make_index_table(&g, g.in, g.out);
    if (!xv || !wv || (b && !bv) || !yv || !col || !tab) {
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t gi = 0; gi < group; gi++)
            for (int64_t mg = 0; mg < Mg; mg++) {
                int64_t m = gi * Mg + mg;
                /* col[kk][p] = sum_c W[c, mg, kk] * X[n, c, p] over the group's c. */
                for (int64_t i = 0; i < ncol; i++) col[i] = 0.0;
                for (int64_t c = 0; c < Cg; c++) {
                    int64_t ci = gi * Cg + c;
                    const double *xc = xv + (n * C + ci) * IS;
                    const double *wc = wv + (ci * Mg + mg) * K;
                    for (int64_t kk = 0; kk < K; kk++) {
                        double wk = wc[kk];
                        if (wk == 0.0) continue;
                        double *crow = col + kk * IS;
                        for (int64_t p = 0; p < IS; p++) crow[p] += wk * xc[p];
                    }
                }
                double *yrow = yv + (n * M + m) * OS;
                double bias = bv ? bv[m] : 0.0;
                for (int64_t p = 0; p < OS; p++) yrow[p] = bias;
                for (int64_t i = 0; i < ncol; i++)
                    if (tab[i] >= 0) yrow[tab[i]] += col[i];
            }
    mcp__nn_store_f64(y, yv);
done:
    mcp_free(xv);
    mcp_free(wv);
    mcp_free(bv);
    mcp_free(yv);
    mcp_free(col);
    mcp_free(tab);
    return st;
}
