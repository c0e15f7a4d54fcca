/*
 * Reference kernels: RoiAlign and GridSample (the ops that sample an image
 * at fractional positions). Computed in double.
 */
#include <math.h>
#include <string.h>

#include "ops/ref/nn_util.h"

/* ---- RoiAlign ---- */

/* Bilinear taps of one sample point: four flat offsets into an H x W plane
 * and their weights (all zero for a point outside the image). */
typedef struct roi_taps {
    int64_t pos[4];
    double w[4];
} roi_taps;

static void roi_bilinear(double y, double x, int64_t height, int64_t width, roi_taps *t) {
    memset(t, 0, sizeof(*t));
    if (y < -1.0 || y > (double)height || x < -1.0 || x > (double)width) return;
    if (y <= 0) y = 0;
    if (x <= 0) x = 0;
    int64_t y_low = (int64_t)y, x_low = (int64_t)x, y_high, x_high;
    if (y_low >= height - 1) {
        y_high = y_low = height - 1;
        y = (double)y_low;
    } else {
        y_high = y_low + 1;
    }
    if (x_low >= width - 1) {
        x_high = x_low = width - 1;
        x = (double)x_low;
    } else {
        x_high = x_low + 1;
    }
    double ly = y - (double)y_low, lx = x - (double)x_low, hy = 1.0 - ly, hx = 1.0 - lx;
    t->pos[0] = y_low * width + x_low;
    t->pos[1] = y_low * width + x_high;
    t->pos[2] = y_high * width + x_low;
    t->pos[3] = y_high * width + x_high;
    t->w[0] = hy * hx;
    t->w[1] = hy * lx;
    t->w[2] = ly * hx;
    t->w[3] = ly * lx;
}

mcp_status mcp__nn_run_roi_align(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *rois = mcp_kin(ctx, 1), *bidx = mcp_kin(ctx, 2);
    if (!x || !rois || !bidx)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'X', 'rois' and 'batch_indices' are required");
    if (!mcp__nn_is_float(x->dtype) || rois->dtype != x->dtype)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                         "inputs 'X' and 'rois' must share one float type");
    if (!mcp_dtype_is_integer(bidx->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'batch_indices' must be int64");
    if (x->rank != 4)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' has rank %d, expected 4",
                         x->rank);
    if (rois->rank != 2 || rois->dims[1] != 4)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'rois' must have shape (R, 4)");
    int64_t R = rois->dims[0];
    if (bidx->rank != 1 || bidx->dims[0] != R)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'batch_indices' must have shape (%lld)", (long long)R);
    const char *mode = mcp_kattr_string(ctx, "mode", "avg");
    bool is_max = strcmp(mode, "max") == 0;
    if (!is_max && strcmp(mode, "avg") != 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'mode' has unknown value '%s'",
                         mode);
    /* Opset 10 had no attribute and behaved as output_half_pixel. */
    const char *ctm = mcp_kattr_string(ctx, "coordinate_transformation_mode",
                                       ctx->opset >= 16 ? "half_pixel" : "output_half_pixel");
    bool half_pixel = strcmp(ctm, "half_pixel") == 0;
    if (!half_pixel && strcmp(ctm, "output_half_pixel") != 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'coordinate_transformation_mode' has unknown value '%s'", ctm);
    int64_t oh = mcp_kattr_int(ctx, "output_height", 1);
    int64_t ow = mcp_kattr_int(ctx, "output_width", 1);
    int64_t sampling = mcp_kattr_int(ctx, "sampling_ratio", 0);
    double scale = mcp_kattr_float(ctx, "spatial_scale", 1.0f);
    if (oh <= 0 || ow <= 0 || sampling < 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attributes 'output_height', 'output_width' must be positive and "
                         "'sampling_ratio' non-negative");
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t dims[4] = {R, C, oh, ow};
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, 4, dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    for (int64_t r = 0; r < R; r++) {
        int64_t b = mcp__nn_get_i64(bidx, r);
        if (b < 0 || b >= N)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'batch_indices' value %lld is out of range [0, %lld)",
                             (long long)b, (long long)N);
    }
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    double offset = half_pixel ? 0.5 : 0.0;
    /* Taps of one ROI's sample points, reused across its channels. */
    int64_t max_grid = 0;
    roi_taps *taps = NULL;
    mcp_status st = MCP_STATUS_OK;
    for (int64_t r = 0; r < R && st == MCP_STATUS_OK; r++) {
        int64_t b = mcp__nn_get_i64(bidx, r);
        double x1 = mcp__nn_get_f64(rois, r * 4 + 0) * scale - offset;
        double y1 = mcp__nn_get_f64(rois, r * 4 + 1) * scale - offset;
        double x2 = mcp__nn_get_f64(rois, r * 4 + 2) * scale - offset;
        double y2 = mcp__nn_get_f64(rois, r * 4 + 3) * scale - offset;
        double rw = x2 - x1, rh = y2 - y1;
        if (!half_pixel) {
            /* Force malformed ROIs to be 1x1. */
            if (rw < 1.0) rw = 1.0;
            if (rh < 1.0) rh = 1.0;
        }
        double bin_h = rh / (double)oh, bin_w = rw / (double)ow;
        double dgh = sampling > 0 ? (double)sampling : ceil(rh / (double)oh);
        double dgw = sampling > 0 ? (double)sampling : ceil(rw / (double)ow);
        /* A sampling grid this fine means a corrupt ROI (or NaN). */
        if (!(dgh <= 65536.0 && dgw <= 65536.0)) {
            st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                           "input 'rois' row %lld needs a sampling grid too large to compute",
                           (long long)r);
            break;
        }
        int64_t gh = dgh > 0 ? (int64_t)dgh : 0, gw = dgw > 0 ? (int64_t)dgw : 0;
        double count = (double)(gh * gw > 1 ? gh * gw : 1);
        int64_t ntaps = mcp__nn_mul_sat(mcp__nn_mul_sat(oh, ow), gh * gw);
        if (ntaps > max_grid) {
            mcp_free(taps);
            taps = mcp__nn_alloc(ntaps, sizeof(roi_taps));
            max_grid = taps ? ntaps : 0;
            if (!taps) {
                st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
                break;
            }
        }
        int64_t t = 0;
        for (int64_t ph = 0; ph < oh; ph++)
            for (int64_t pw = 0; pw < ow; pw++)
                for (int64_t iy = 0; iy < gh; iy++) {
                    double yy = y1 + (double)ph * bin_h + ((double)iy + 0.5) * bin_h / (double)gh;
                    for (int64_t ix = 0; ix < gw; ix++) {
                        double xx =
                            x1 + (double)pw * bin_w + ((double)ix + 0.5) * bin_w / (double)gw;
                        roi_bilinear(yy, xx, H, W, &taps[t++]);
                    }
                }
        int64_t per_bin = gh * gw;
        for (int64_t c = 0; c < C; c++) {
            int64_t plane = (b * C + c) * H * W;
            for (int64_t o = 0; o < oh * ow; o++) {
                double acc = 0.0;
                bool first = true;
                for (int64_t s = 0; s < per_bin; s++) {
                    const roi_taps *tp = &taps[o * per_bin + s];
                    double v[4];
                    for (int q = 0; q < 4; q++)
                        v[q] = tp->w[q] * mcp__nn_get_f64(x, plane + tp->pos[q]);
                    if (is_max) {
                        /* Max mode takes the largest weighted tap, as the
                         * reference runtimes do. */
                        double m = fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
                        acc = first ? m : fmax(acc, m);
                        first = false;
                    } else {
                        acc += v[0] + v[1] + v[2] + v[3];
                    }
                }
                if (!is_max) acc /= count;
                mcp__nn_set_f64(y, (r * C + c) * oh * ow + o, acc);
            }
        }
    }
    mcp_free(taps);
    return st;
}

/* ---- GridSample ----
 *
 * Any number r >= 1 of spatial dims (opset 16 defines 4-D X, opset 20 and
 * up any rank): X (N, C, d_0 .. d_r-1), grid (N, o_0 .. o_r-1, r) whose
 * last axis lists coordinates innermost dim first (x, y, z ...). Follows
 * the specification's reference: the sample point is mapped to pixel
 * space, rounded to nearest even for "nearest", then brought inside the
 * borders (border: clamped to [0, d - 1]; reflection: reflected about the
 * borders) when it lies outside them; linear and cubic then read 2 or 4
 * taps per dim, each tap resolved by the padding mode again (zeros: 0
 * outside). The borders are pixel centres 0 and d - 1 with align_corners,
 * else the image edges -0.5 and d - 0.5. A NaN coordinate samples 0.
 */

enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECTION };
enum gs_mode { GS_LINEAR, GS_NEAREST, GS_CUBIC };

/* Maps a normalized coordinate in [-1, 1] to pixel space. */
static double gs_unnormalize(double c, int64_t size, bool align) {
    return align ? (c + 1.0) / 2.0 * (double)(size - 1) : ((c + 1.0) * (double)size - 1.0) / 2.0;
}

/* Reflects c about lo and hi until it lies in [lo, hi]. */
static double gs_reflect(double c, double lo, double hi) {
    double span = hi - lo;
    if (!(span > 0.0)) return lo;
    if (c >= lo && c <= hi) return c;
    double dist = c < lo ? lo - c : c - hi;
    double flips = floor(dist / span), rest = dist - flips * span;
    bool even = fmod(flips, 2.0) == 0.0;
    double v = (c < lo) == even ? lo + rest : hi - rest;
    /* Far-out coordinates lose the fraction to rounding; stay inside. */
    return v < lo ? lo : (v > hi ? hi : v);
}

static void gs_cubic_coeffs(double t, double coeffs[4]) {
    const double A = -0.75;
    double x1 = t + 1.0, x2 = t, x3 = 1.0 - t, x4 = 2.0 - t;
    coeffs[0] = ((A * x1 - 5.0 * A) * x1 + 8.0 * A) * x1 - 4.0 * A;
    coeffs[1] = ((A + 2.0) * x2 - (A + 3.0)) * x2 * x2 + 1.0;
    coeffs[2] = ((A + 2.0) * x3 - (A + 3.0)) * x3 * x3 + 1.0;
    coeffs[3] = ((A * x4 - 5.0 * A) * x4 + 8.0 * A) * x4 - 4.0 * A;
}

/* The taps of one sample point along one dim: element offsets (index times
 * the dim's stride) and weights; n == 0 when every tap reads zero padding. */
typedef struct gs_taps {
    int n;
    int64_t off[4];
    double w[4];
} gs_taps;

/* Resolves integer index i of a dim of `size` by the padding mode; false
 * when it reads zero padding. */
static bool gs_index(double i, int64_t size, enum gs_pad pad, double lo, double hi, int64_t *out) {
    if (pad == GS_BORDER) {
        i = i < 0.0 ? 0.0 : (i > (double)(size - 1) ? (double)(size - 1) : i);
    } else if (pad == GS_REFLECTION) {
        i = trunc(gs_reflect(i, lo, hi));
        if (i > (double)(size - 1)) i = (double)(size - 1);
    } else if (i < 0.0 || i >= (double)size) {
        return false;
    }
    *out = (int64_t)i;
    return true;
}

/* Fills t for coordinate c (already in pixel space) along a dim of `size`.
 * False when the coordinate is NaN. */
static bool gs_dim_taps(double c, int64_t size, int64_t stride, enum gs_mode mode, enum gs_pad pad,
                        bool align, gs_taps *t) {
    double lo = align ? 0.0 : -0.5, hi = align ? (double)(size - 1) : (double)size - 0.5;
    if (isnan(c)) return false;
    if (mode == GS_NEAREST) c = nearbyint(c);
    if (c < lo || c > hi) {
        if (pad == GS_BORDER) c = c < 0.0 ? 0.0 : (c > (double)(size - 1) ? (double)(size - 1) : c);
        else if (pad == GS_REFLECTION) c = gs_reflect(c, lo, hi);
    }
    t->n = 0;
    /* Beyond this every tap is zero padding (only zeros mode leaves such
     * points); the check also keeps the casts below in range. */
    if (!(fabs(c) < 4.0e15)) return true;
    double f = floor(c), w[4], first;
    int count;
    if (mode == GS_NEAREST) {
        count = 1;
        first = c;
        w[0] = 1.0;
    } else if (mode == GS_LINEAR) {
        count = 2;
        first = f;
        w[0] = 1.0 - (c - f);
        w[1] = c - f;
    } else {
        count = 4;
        first = f - 1.0;
        gs_cubic_coeffs(c - f, w);
    }
    for (int k = 0; k < count; k++) {
        int64_t idx;
        if (!gs_index(first + k, size, pad, lo, hi, &idx)) continue;
        t->off[t->n] = idx * stride;
        t->w[t->n] = w[k];
        t->n++;
    }
    return true;
}

mcp_status mcp__nn_run_grid_sample(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *grid = mcp_kin(ctx, 1);
    if (!x || !grid)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'grid' are required");
    if (!mcp_dtype_is_numeric(x->dtype) || !mcp__nn_is_float(grid->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                         "input 'X' must be numeric and 'grid' a float tensor");
    int r = x->rank - 2;
    if (r < 1 || (ctx->opset < 20 && r != 2))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' has rank %d; GridSample-%d takes %s", x->rank, ctx->opset,
                         ctx->opset < 20 ? "4 (N, C, H, W)" : "3 or more (N, C, spatial...)");
    if (grid->rank != x->rank || grid->dims[0] != x->dims[0] || grid->dims[r + 1] != r)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'grid' must have shape (N, out spatial..., %d) for 'X' of rank %d "
                         "with N = %lld",
                         r, x->rank, (long long)x->dims[0]);
    const char *mode = mcp_kattr_string(ctx, "mode", ctx->opset < 20 ? "bilinear" : "linear");
    enum gs_mode imode;
    /* Opset 16 names the modes bilinear and bicubic, opset 20 linear and
     * cubic; both spellings are accepted at any opset. */
    if (strcmp(mode, "bilinear") == 0 || strcmp(mode, "linear") == 0)
        imode = GS_LINEAR;
    else if (strcmp(mode, "nearest") == 0)
        imode = GS_NEAREST;
    else if (strcmp(mode, "bicubic") == 0 || strcmp(mode, "cubic") == 0)
        imode = GS_CUBIC;
    else
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'mode' has unknown value '%s'",
                         mode);
    const char *pm = mcp_kattr_string(ctx, "padding_mode", "zeros");
    enum gs_pad pad;
    if (strcmp(pm, "zeros") == 0)
        pad = GS_ZEROS;
    else if (strcmp(pm, "border") == 0)
        pad = GS_BORDER;
    else if (strcmp(pm, "reflection") == 0)
        pad = GS_REFLECTION;
    else
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'padding_mode' has unknown value '%s'", pm);
    int64_t align_attr = mcp_kattr_int(ctx, "align_corners", 0);
    if (align_attr != 0 && align_attr != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'align_corners' is %lld, not 0 or 1", (long long)align_attr);
    bool align = align_attr == 1;
    int64_t N = x->dims[0], C = x->dims[1];
    int64_t dims[MCP_MAX_RANK], in_stride[MCP_MAX_RANK];
    dims[0] = N;
    dims[1] = C;
    for (int i = 0; i < r; i++) dims[2 + i] = grid->dims[1 + i];
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    const int64_t *in = x->dims + 2;
    for (int i = 0; i < r; i++)
        if (in[i] == 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'X' has an empty spatial dim %d but the output does not", i);
    in_stride[r - 1] = 1;
    for (int i = r - 2; i >= 0; i--) in_stride[i] = in_stride[i + 1] * in[i + 1];
    int64_t plane = in_stride[0] * in[0];
    int64_t n_out = mcp__nn_prod(r, grid->dims + 1);
    double *xv = mcp__nn_load_f64(x);
    if (!xv) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    gs_taps taps[MCP_MAX_RANK];
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < n_out; o++) {
            /* Grid entry k addresses spatial dim r - 1 - k. */
            bool zero = false;
            for (int i = 0; i < r && !zero; i++) {
                double g = mcp__nn_get_f64(grid, (n * n_out + o) * r + (r - 1 - i));
                if (!gs_dim_taps(gs_unnormalize(g, in[i], align), in[i], in_stride[i], imode, pad,
                                 align, &taps[i]) ||
                    taps[i].n == 0)
                    zero = true;
            }
            for (int64_t c = 0; c < C; c++) {
                const double *src = xv + (n * C + c) * plane;
                double v = 0.0;
                if (!zero) {
                    /* Sum over every combination of the dims' taps. */
                    int t[MCP_MAX_RANK] = {0};
                    for (;;) {
                        double w = 1.0;
                        int64_t off = 0;
                        for (int i = 0; i < r; i++) {
                            w *= taps[i].w[t[i]];
                            off += taps[i].off[t[i]];
                        }
                        v += w * src[off];
                        int i = r - 1;
                        while (i >= 0 && ++t[i] == taps[i].n) t[i--] = 0;
                        if (i < 0) break;
                    }
                }
                mcp__nn_set_f64(y, (n * C + c) * n_out + o, v);
            }
        }
    mcp_free(xv);
    return MCP_STATUS_OK;
}
