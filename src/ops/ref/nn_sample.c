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

/* ---- GridSample ---- */

enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECTION };

/* Maps a normalized coordinate in [-1, 1] to pixel space. */
static double gs_unnormalize(double c, int64_t size, bool align) {
    return align ? (c + 1.0) / 2.0 * (double)(size - 1) : ((c + 1.0) * (double)size - 1.0) / 2.0;
}

static double gs_clip(double c, int64_t size) {
    return fmin((double)(size - 1), fmax(c, 0.0));
}

/* Reflects c into [twice_low / 2, twice_high / 2]. */
static double gs_reflect(double c, int64_t twice_low, int64_t twice_high) {
    if (twice_low == twice_high) return 0.0;
    double mn = (double)twice_low / 2.0, span = (double)(twice_high - twice_low) / 2.0;
    c = fabs(c - mn);
    double extra = fmod(c, span);
    double flips = floor(c / span);
    return fmod(flips, 2.0) == 0.0 ? extra + mn : span - extra + mn;
}

static double gs_pad_coord(double c, int64_t size, enum gs_pad pad, bool align) {
    if (pad == GS_BORDER) return gs_clip(c, size);
    if (pad == GS_REFLECTION) {
        c = align ? gs_reflect(c, 0, 2 * (size - 1)) : gs_reflect(c, -1, 2 * size - 1);
        return gs_clip(c, size);
    }
    return c;
}

/* Value at integer pixel (y, x) of a plane, 0 outside. */
static double gs_pixel(const double *plane, int64_t H, int64_t W, int64_t y, int64_t x) {
    if (y < 0 || y >= H || x < 0 || x >= W) return 0.0;
    return plane[y * W + x];
}

static void gs_cubic_coeffs(double t, double coeffs[4]) {
    const double A = -0.75;
    double x1 = t + 1.0, x2 = t, x3 = 1.0 - t, x4 = 2.0 - t;
    coeffs[0] = ((A * x1 - 5.0 * A) * x1 + 8.0 * A) * x1 - 4.0 * A;
    coeffs[1] = ((A + 2.0) * x2 - (A + 3.0)) * x2 * x2 + 1.0;
    coeffs[2] = ((A + 2.0) * x3 - (A + 3.0)) * x3 * x3 + 1.0;
    coeffs[3] = ((A * x4 - 5.0 * A) * x4 + 8.0 * A) * x4 - 4.0 * A;
}

mcp_status mcp__nn_run_grid_sample(mcp_kernel_ctx *ctx) {
    const mcp_tensor *x = mcp_kin(ctx, 0), *grid = mcp_kin(ctx, 1);
    if (!x || !grid)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'grid' are required");
    if (!mcp_dtype_is_numeric(x->dtype) || !mcp__nn_is_float(grid->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                         "input 'X' must be numeric and 'grid' a float tensor");
    if (x->rank != 4 || grid->rank != 4 || grid->dims[0] != x->dims[0] || grid->dims[3] != 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'X' (N, C, H, W) and 'grid' (N, H_out, W_out, 2) have bad shapes");
    const char *mode = mcp_kattr_string(ctx, "mode", "bilinear");
    int imode;
    if (strcmp(mode, "bilinear") == 0 || strcmp(mode, "linear") == 0)
        imode = 0;
    else if (strcmp(mode, "nearest") == 0)
        imode = 1;
    else if (strcmp(mode, "bicubic") == 0 || strcmp(mode, "cubic") == 0)
        imode = 2;
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
    bool align = mcp_kattr_int(ctx, "align_corners", 0) != 0;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t Ho = grid->dims[1], Wo = grid->dims[2];
    int64_t dims[4] = {N, C, Ho, Wo};
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, 4, dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    double *xv = mcp__nn_load_f64(x);
    if (!xv) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < Ho * Wo; o++) {
            double gx = mcp__nn_get_f64(grid, (n * Ho * Wo + o) * 2);
            double gy = mcp__nn_get_f64(grid, (n * Ho * Wo + o) * 2 + 1);
            double ix = gs_unnormalize(gx, W, align), iy = gs_unnormalize(gy, H, align);
            for (int64_t c = 0; c < C; c++) {
                const double *plane = xv + (n * C + c) * H * W;
                double v = 0.0;
                if (imode == 0) {
                    double px = gs_pad_coord(ix, W, pad, align);
                    double py = gs_pad_coord(iy, H, pad, align);
                    double fx = floor(px), fy = floor(py);
                    double tx = px - fx, ty = py - fy;
                    /* Points with no tap inside the image (NaN included)
                     * sample 0; the check also keeps the casts in range. */
                    if (!(fx >= -1.0 && fx < (double)W && fy >= -1.0 && fy < (double)H)) {
                        v = 0.0;
                    } else {
                        int64_t x0 = (int64_t)fx, y0 = (int64_t)fy;
                        v = gs_pixel(plane, H, W, y0, x0) * (1 - tx) * (1 - ty) +
                            gs_pixel(plane, H, W, y0, x0 + 1) * tx * (1 - ty) +
                            gs_pixel(plane, H, W, y0 + 1, x0) * (1 - tx) * ty +
                            gs_pixel(plane, H, W, y0 + 1, x0 + 1) * tx * ty;
                    }
                } else if (imode == 1) {
                    double px = nearbyint(gs_pad_coord(ix, W, pad, align));
                    double py = nearbyint(gs_pad_coord(iy, H, pad, align));
                    if (!isnan(px) && !isnan(py) && px >= 0 && px < (double)W && py >= 0 &&
                        py < (double)H)
                        v = plane[(int64_t)py * W + (int64_t)px];
                } else if (!isnan(ix) && !isnan(iy)) {
                    /* Bicubic reads a 4x4 neighbourhood; padding applies to
                     * each tap rather than to the sample point. */
                    double fx = floor(ix), fy = floor(iy);
                    double cx[4], cy[4];
                    gs_cubic_coeffs(ix - fx, cx);
                    gs_cubic_coeffs(iy - fy, cy);
                    for (int j = 0; j < 4; j++) {
                        double row = 0.0;
                        for (int i = 0; i < 4; i++) {
                            double tx = gs_pad_coord(fx - 1 + i, W, pad, align);
                            double ty = gs_pad_coord(fy - 1 + j, H, pad, align);
                            double pv = 0.0;
                            if (tx >= 0 && tx < (double)W && ty >= 0 && ty < (double)H)
                                pv = plane[(int64_t)ty * W + (int64_t)tx];
                            row += cx[i] * pv;
                        }
                        v += cy[j] * row;
                    }
                }
                mcp__nn_set_f64(y, (n * C + c) * Ho * Wo + o, v);
            }
        }
    mcp_free(xv);
    return MCP_STATUS_OK;
}
