/*
 * Reference kernel: DeformConv (opsets 19 and 22, which differ only in the
 * types they list), nn family. Computed in double.
 *
 * A deformable convolution is a grouped convolution whose kernel taps read
 * the input at shifted, fractional positions: tap k of output position p
 * reads X at p * stride - pad_begin + k * dilation + offset[k, p], with
 * N-linear interpolation and zeros outside the input, scaled by mask[k, p].
 * The channels are split into offset_group groups, each with its own
 * offsets and mask. The specification's reference samples through
 * GridSample with align_corners (pixel coordinates as they are), which is
 * what we do without the round trip through normalized coordinates.
 *
 * Like Conv (nn_conv.c) the sampled values are gathered into a column
 * matrix per group, then multiplied by that group's weights.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/ref/nn_util.h"

/* N-linear sample of one channel plane at pos (pixel coordinates); corners
 * outside the input read 0. in / stride describe the plane. */
static double deform_sample(const double *plane, int nd, const int64_t *in, const int64_t *stride,
                            const double *pos) {
    int64_t lo[MCP__NN_MAX_SPATIAL];
    double frac[MCP__NN_MAX_SPATIAL];
    for (int d = 0; d < nd; d++) {
        /* Every corner is outside (NaN included): the sample is 0. */
        if (!(pos[d] > -1.0 && pos[d] < (double)in[d])) return 0.0;
        double f = floor(pos[d]);
        lo[d] = (int64_t)f;
        frac[d] = pos[d] - f;
    }
    double acc = 0.0;
    for (int corner = 0; corner < (1 << nd); corner++) {
        double w = 1.0;
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < nd && inside; d++) {
            int bit = (corner >> d) & 1;
            int64_t i = lo[d] + bit;
            if (i < 0 || i >= in[d]) inside = false;
            w *= bit ? frac[d] : 1.0 - frac[d];
            off += i * stride[d];
        }
        if (inside && w != 0.0) acc += w * plane[off];
    }
    return acc;
}

/* Checks that t (named name) has shape (N, channels, out...). */
static mcp_status deform_check_map(mcp_kernel_ctx *ctx, const mcp_tensor *t, const char *name,
                                   int64_t N, int64_t channels, const mcp__nn_geom *g) {
    bool ok = t->rank == g->nd + 2 && t->dims[0] == N && t->dims[1] == channels;
    for (int d = 0; ok && d < g->nd; d++) ok = t->dims[d + 2] == g->out[d];
    if (ok) return MCP_STATUS_OK;
    char want[160];
    int len = snprintf(want, sizeof want, "(%lld, %lld", (long long)N, (long long)channels);
    for (int d = 0; d < g->nd && len > 0 && (size_t)len < sizeof want; d++)
        len += snprintf(want + len, sizeof want - (size_t)len, ", %lld", (long long)g->out[d]);
    return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must have shape %s)", name,
                     want);
}

/* The inputs, attributes and geometry of one DeformConv call. */
typedef struct deform_args {
    mcp__nn_geom g;
    int64_t N, C, M, group, offset_group, K;
    int64_t in_stride[MCP__NN_MAX_SPATIAL];
} deform_args;

static mcp_status deform_setup(mcp_kernel_ctx *ctx, deform_args *a) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *w = mcp_kin(ctx, 1), *offset = mcp_kin(ctx, 2);
    const mcp_tensor *b = mcp_kin(ctx, 3), *mask = mcp_kin(ctx, 4);
    if (!x || !w || !offset)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'X', 'W' and 'offset' are required");
    if (!mcp__nn_is_float(x->dtype) || w->dtype != x->dtype || offset->dtype != x->dtype ||
        (b && b->dtype != x->dtype) || (mask && mask->dtype != x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                         "inputs 'X', 'W', 'offset', 'B', 'mask' must share one float type (got %s)",
                         mcp_dtype_name(x->dtype));
    if (x->rank < 3)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' has rank %d, expected at least 3 (N, C, spatial...)", x->rank);
    if (w->rank != x->rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'W' has rank %d, expected %d like 'X'", w->rank, x->rank);
    a->group = mcp_kattr_int(ctx, "group", 1);
    a->offset_group = mcp_kattr_int(ctx, "offset_group", 1);
    a->N = x->dims[0];
    a->C = x->dims[1];
    a->M = w->dims[0];
    if (a->group <= 0 || a->offset_group <= 0 || a->group > INT32_MAX ||
        a->offset_group > INT32_MAX)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attributes 'group' (%lld) and 'offset_group' (%lld) must be positive "
                         "and below 2^31",
                         (long long)a->group, (long long)a->offset_group);
    if (a->C % a->group != 0 || a->M % a->group != 0 || w->dims[1] != a->C / a->group)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'W' shape does not match 'X' channels %lld with group %lld",
                         (long long)a->C, (long long)a->group);
    if (a->C % a->offset_group != 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' channels %lld are not divisible by attribute 'offset_group' "
                         "%lld",
                         (long long)a->C, (long long)a->offset_group);
    mcp_status st = mcp__nn_geom_init(ctx, x, w->dims + 2, MCP__NN_GEOM_DILATIONS, &a->g);
    if (st != MCP_STATUS_OK) return st;
    int nd = a->g.nd;
    for (int d = 0; d < nd; d++)
        if (a->g.kernel[d] != w->dims[d + 2])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'kernel_shape' does not match input 'W'");
    a->K = mcp__nn_prod(nd, a->g.kernel);
    /* Offsets per output position: offset_group * K * nd, a few million at
     * most for any sane model; the bound keeps the products exact. */
    if (a->K > (INT64_C(1) << 32) / (a->offset_group * nd))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "kernel of %lld taps with offset_group %lld is too large", (long long)a->K,
                         (long long)a->offset_group);
    st = deform_check_map(ctx, offset, "offset", a->N, a->offset_group * a->K * nd, &a->g);
    if (st == MCP_STATUS_OK && mask)
        st = deform_check_map(ctx, mask, "mask", a->N, a->offset_group * a->K, &a->g);
    if (st != MCP_STATUS_OK) return st;
    if (b && (b->rank != 1 || b->dims[0] != a->M))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'B' must have shape (%lld)",
                         (long long)a->M);
    a->in_stride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) a->in_stride[d] = a->in_stride[d + 1] * a->g.in[d + 1];
    return MCP_STATUS_OK;
}

/*
 * Gathers group gi of batch n into col [Cg * K, OS]: row (c, k) holds tap k
 * of channel c sampled at every output position, times the mask.
 */
static void deform_gather(const deform_args *a, int64_t n, int64_t gi, const double *x,
                          const double *offset, const double *mask, double *col) {
    const mcp__nn_geom *g = &a->g;
    int nd = g->nd;
    int64_t IS = mcp__nn_prod(nd, g->in), OS = mcp__nn_prod(nd, g->out);
    int64_t Cg = a->C / a->group, per_og = a->C / a->offset_group;
    for (int64_t cg = 0; cg < Cg; cg++) {
        int64_t c = gi * Cg + cg, og = c / per_og;
        const double *plane = x + (n * a->C + c) * IS;
        int64_t kidx[MCP__NN_MAX_SPATIAL] = {0};
        for (int64_t k = 0; k < a->K; k++) {
            /* offset channel ((og * K + k) * nd + d), mask channel og * K + k */
            const double *off_k = offset + ((n * a->offset_group + og) * a->K + k) * nd * OS;
            const double *mask_k = mask ? mask + ((n * a->offset_group + og) * a->K + k) * OS : NULL;
            double *row = col + (cg * a->K + k) * OS;
            int64_t pidx[MCP__NN_MAX_SPATIAL] = {0};
            for (int64_t p = 0; p < OS; p++) {
                double pos[MCP__NN_MAX_SPATIAL];
                for (int d = 0; d < nd; d++)
                    pos[d] = (double)(pidx[d] * g->stride[d] - g->pad_begin[d] +
                                      kidx[d] * g->dil[d]) +
                             off_k[d * OS + p];
                double v = deform_sample(plane, nd, g->in, a->in_stride, pos);
                row[p] = mask_k ? v * mask_k[p] : v;
                for (int d = nd - 1; d >= 0; d--) {
                    if (++pidx[d] < g->out[d]) break;
                    pidx[d] = 0;
                }
            }
            for (int d = nd - 1; d >= 0; d--) {
                if (++kidx[d] < g->kernel[d]) break;
                kidx[d] = 0;
            }
        }
    }
}

mcp_status mcp__nn_run_deform_conv(mcp_kernel_ctx *ctx) {
    deform_args a;
    memset(&a, 0, sizeof a);
    mcp_status st = deform_setup(ctx, &a);
    if (st != MCP_STATUS_OK) return st;
    const mcp__nn_geom *g = &a.g;
    int64_t dims[MCP_MAX_RANK];
    dims[0] = a.N;
    dims[1] = a.M;
    for (int d = 0; d < g->nd; d++) dims[d + 2] = g->out[d];
    mcp_tensor *y = mcp_kout(ctx, 0, mcp_kin(ctx, 0)->dtype, g->nd + 2, dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    const mcp_tensor *b = mcp_kin(ctx, 3), *mask = mcp_kin(ctx, 4);
    int64_t OS = mcp__nn_prod(g->nd, g->out), Cg = a.C / a.group, Mg = a.M / a.group;
    double *xv = mcp__nn_load_f64(mcp_kin(ctx, 0)), *wv = mcp__nn_load_f64(mcp_kin(ctx, 1));
    double *ov = mcp__nn_load_f64(mcp_kin(ctx, 2));
    double *bv = b ? mcp__nn_load_f64(b) : NULL, *mv = mask ? mcp__nn_load_f64(mask) : NULL;
    double *yv = mcp__nn_alloc(mcp_tensor_numel(y), sizeof(double));
    double *col = mcp__nn_alloc(mcp__nn_mul_sat(mcp__nn_mul_sat(Cg, a.K), OS), sizeof(double));
    if (!xv || !wv || !ov || (b && !bv) || (mask && !mv) || !yv || !col) {
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    } else {
        for (int64_t n = 0; n < a.N; n++)
            for (int64_t gi = 0; gi < a.group; gi++) {
                deform_gather(&a, n, gi, xv, ov, mv, col);
                for (int64_t mg = 0; mg < Mg; mg++) {
                    int64_t m = gi * Mg + mg;
                    double *yrow = yv + (n * a.M + m) * OS;
                    double bias = bv ? bv[m] : 0.0;
                    for (int64_t p = 0; p < OS; p++) yrow[p] = bias;
                    const double *wrow = wv + m * Cg * a.K;
                    for (int64_t ck = 0; ck < Cg * a.K; ck++) {
                        double wk = wrow[ck];
                        if (wk == 0.0) continue;
                        const double *crow = col + ck * OS;
                        for (int64_t p = 0; p < OS; p++) yrow[p] += wk * crow[p];
                    }
                }
            }
        mcp__nn_store_f64(y, yv);
    }
    mcp_free(xv);
    mcp_free(wv);
    mcp_free(ov);
    mcp_free(bv);
    mcp_free(mv);
    mcp_free(yv);
    mcp_free(col);
    return st;
}
