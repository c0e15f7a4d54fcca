/*
 * Reference kernels: Resize (opsets 10, 11, 13, 18+ attributes) and
 * Upsample (opsets 7, 9), index family.
 *
 * Each output coordinate of each dim maps to an input coordinate by the
 * coordinate transformation mode; from it we build, once per dim, a small
 * list of taps (input index, weight): 1 for nearest, 2 for linear, 4 for
 * cubic. An output element is the sum over the product of its dims' taps,
 * which is the separable N-D interpolation of the ONNX reference. Taps with
 * zero weight are dropped, so dims that are not resized cost nothing.
 *
 * With antialias (Resize-18+, linear and cubic), a dim that shrinks by
 * scale < 1 stretches its filter by 1 / scale: the taps are every input
 * index whose distance d from the mapped coordinate has kernel(d * scale)
 * nonzero, weights normalized to sum 1, as the specification defines it.
 *
 * Upsample and Resize-10 follow the pre-opset-11 behaviour (asymmetric
 * coordinates; nearest takes floor when upsampling a dim and ceil when
 * downsampling it), as onnxruntime does.
 */
#include <math.h>
#include <string.h>

#include "ops/ref/index_util.h"

typedef enum rs_mode {
    RS_MODE_NEAREST = 0,
    RS_MODE_LINEAR,
    RS_MODE_CUBIC,
} rs_mode;

typedef enum rs_coord {
    RS_COORD_HALF_PIXEL = 0,
    RS_COORD_HALF_PIXEL_SYMMETRIC,
    RS_COORD_PYTORCH_HALF_PIXEL,
    RS_COORD_ALIGN_CORNERS,
    RS_COORD_ASYMMETRIC,
    RS_COORD_TF_HALF_PIXEL_FOR_NN,
    RS_COORD_TF_CROP_AND_RESIZE,
} rs_coord;

typedef enum rs_nearest {
    RS_NEAREST_ROUND_PREFER_FLOOR = 0,
    RS_NEAREST_ROUND_PREFER_CEIL,
    RS_NEAREST_FLOOR,
    RS_NEAREST_CEIL,
    RS_NEAREST_LEGACY, /* Upsample / Resize-10: floor up, ceil down */
} rs_nearest;

typedef struct rs_params {
    rs_mode mode;
    rs_coord coord;
    rs_nearest nearest;
    double cubic_a;
    bool exclude_outside;
    bool antialias; /* linear / cubic only; nearest ignores it */
    double extrapolation;
    int rank;
    int64_t in[MCP_MAX_RANK];
    int64_t out[MCP_MAX_RANK];
    double scale[MCP_MAX_RANK]; /* the scale the coordinate transform uses */
    double roi_start[MCP_MAX_RANK];
    double roi_end[MCP_MAX_RANK];
} rs_params;

/* Taps of one output coordinate of one dim; n == 0 marks a coordinate
 * outside the crop (tf_crop_and_resize), which takes extrapolation_value.
 * idx and w point into rs_compute's pools, rs_tap_width() entries each. */
typedef struct rs_tap {
    int64_t n;
    int64_t *idx;
    double *w;
} rs_tap;

/* ---- parameters ---- */

static mcp_status rs_parse_mode(mcp_kernel_ctx *ctx, const char *s, rs_mode *out)
{
    if (strcmp(s, "nearest") == 0) *out = RS_MODE_NEAREST;
    else if (strcmp(s, "linear") == 0 || strcmp(s, "bilinear") == 0) *out = RS_MODE_LINEAR;
    else if (strcmp(s, "cubic") == 0) *out = RS_MODE_CUBIC;
    else return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'mode' '%s' is unknown", s);
    return MCP_STATUS_OK;
}

static mcp_status rs_parse_attrs(mcp_kernel_ctx *ctx, rs_params *p)
{
    mcp_status st = rs_parse_mode(ctx, mcp_kattr_string(ctx, "mode", "nearest"), &p->mode);
    if (st != MCP_STATUS_OK) return st;
    static const struct {
        const char *name;
        rs_coord value;
    } coords[] = {
        {"half_pixel", RS_COORD_HALF_PIXEL},
        {"half_pixel_symmetric", RS_COORD_HALF_PIXEL_SYMMETRIC},
        {"pytorch_half_pixel", RS_COORD_PYTORCH_HALF_PIXEL},
        {"align_corners", RS_COORD_ALIGN_CORNERS},
        {"asymmetric", RS_COORD_ASYMMETRIC},
        {"tf_half_pixel_for_nn", RS_COORD_TF_HALF_PIXEL_FOR_NN},
        {"tf_crop_and_resize", RS_COORD_TF_CROP_AND_RESIZE},
    };
    static const struct {
        const char *name;
        rs_nearest value;
    } nearests[] = {
        {"round_prefer_floor", RS_NEAREST_ROUND_PREFER_FLOOR},
        {"round_prefer_ceil", RS_NEAREST_ROUND_PREFER_CEIL},
        {"floor", RS_NEAREST_FLOOR},
        {"ceil", RS_NEAREST_CEIL},
    };
    const char *s = mcp_kattr_string(ctx, "coordinate_transformation_mode", "half_pixel");
    size_t i;
    for (i = 0; i < sizeof(coords) / sizeof(coords[0]); i++)
        if (strcmp(s, coords[i].name) == 0) break;
    if (i == sizeof(coords) / sizeof(coords[0]))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'coordinate_transformation_mode' '%s' is unknown", s);
    p->coord = coords[i].value;
    s = mcp_kattr_string(ctx, "nearest_mode", "round_prefer_floor");
    for (i = 0; i < sizeof(nearests) / sizeof(nearests[0]); i++)
        if (strcmp(s, nearests[i].name) == 0) break;
    if (i == sizeof(nearests) / sizeof(nearests[0]))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'nearest_mode' '%s' is unknown", s);
    p->nearest = nearests[i].value;
    p->cubic_a = mcp_kattr_float(ctx, "cubic_coeff_a", -0.75f);
    p->exclude_outside = mcp_kattr_int(ctx, "exclude_outside", 0) != 0;
    p->extrapolation = mcp_kattr_float(ctx, "extrapolation_value", 0.0f);
    int64_t antialias = mcp_kattr_int(ctx, "antialias", 0);
    if (antialias != 0 && antialias != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'antialias' is %lld, not 0 or 1",
                         (long long)antialias);
    p->antialias = antialias == 1 && p->mode != RS_MODE_NEAREST;
    return MCP_STATUS_OK;
}

/* Sets output sizes from per-dim scales: floor(in * scale). */
static mcp_status rs_from_scales(mcp_kernel_ctx *ctx, rs_params *p, const char *name)
{
    for (int d = 0; d < p->rank; d++) {
        if (!(p->scale[d] > 0.0) || !isfinite(p->scale[d]))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input '%s' must hold positive finite scales (dim %d has %g)", name,
                             d, p->scale[d]);
        double o = floor(p->scale[d] * (double)p->in[d]);
        if (o > 9.0e15)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' gives a huge output",
                             name);
        p->out[d] = (int64_t)o;
    }
    return MCP_STATUS_OK;
}

static void rs_defaults(rs_params *p, const mcp_tensor *x)
{
    p->rank = x->rank;
    for (int d = 0; d < x->rank; d++) {
        p->in[d] = x->dims[d];
        p->out[d] = x->dims[d];
        p->scale[d] = 1.0;
        p->roi_start[d] = 0.0;
        p->roi_end[d] = 1.0;
    }
}

/* ---- taps ---- */

static double rs_map_coord(const rs_params *p, int d, int64_t xo)
{
    double x = (double)xo, scale = p->scale[d];
    double in = (double)p->in[d];
    /* The resized length as the reference sees it: scale * in, not
     * rounded, even when the output length was floored. */
    double len = scale * in;
    switch (p->coord) {
    case RS_COORD_HALF_PIXEL: return (x + 0.5) / scale - 0.5;
    case RS_COORD_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)p->out[d] / len;
        double offset = in / 2.0 * (1.0 - adjustment);
        return offset + (x + 0.5) / scale - 0.5;
    }
    case RS_COORD_PYTORCH_HALF_PIXEL: return len > 1.0 ? (x + 0.5) / scale - 0.5 : 0.0;
    case RS_COORD_ALIGN_CORNERS: return len == 1.0 ? 0.0 : x * (in - 1.0) / (len - 1.0);
    case RS_COORD_ASYMMETRIC: return x / scale;
    case RS_COORD_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / scale;
    case RS_COORD_TF_CROP_AND_RESIZE: {
        double s = p->roi_start[d], e = p->roi_end[d];
        if (len > 1.0) return s * (in - 1.0) + x * (e - s) * (in - 1.0) / (len - 1.0);
        return 0.5 * (s + e) * (in - 1.0);
    }
    }
    return x;
}

static int64_t rs_clamp(int64_t i, int64_t n)
{
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

/* Half-width of the interpolation kernel in input pixels at scale 1. */
static double rs_support(const rs_params *p)
{
    return p->mode == RS_MODE_LINEAR ? 1.0 : 2.0;
}

/* First tap offset of an antialiased filter, relative to the pixel left of
 * the coordinate: the leftmost i with |i - ratio| * scale < support for
 * every ratio in (0, 1]. The filter spans 2 - 2 * start taps. */
static int64_t rs_aa_start(const rs_params *p, int d)
{
    double s = p->scale[d] < 1.0 ? p->scale[d] : 1.0;
    return (int64_t)floor(-rs_support(p) / s) + 1;
}

/* Taps one output coordinate of dim d can have. */
static int64_t rs_tap_width(const rs_params *p, int d)
{
    if (p->mode == RS_MODE_NEAREST) return 1;
    if (p->antialias) return 2 - 2 * rs_aa_start(p, d);
    return p->mode == RS_MODE_LINEAR ? 2 : 4;
}

/* The filters the antialiased modes stretch: the triangle and Keys' cubic
 * convolution kernel with coefficient a. */
static double rs_aa_kernel(const rs_params *p, double x)
{
    x = fabs(x);
    if (p->mode == RS_MODE_LINEAR) return x < 1.0 ? 1.0 - x : 0.0;
    double a = p->cubic_a, x2 = x * x, x3 = x2 * x;
    if (x <= 1.0) return (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0;
    if (x < 2.0) return a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a;
    return 0.0;
}

static void rs_make_tap(const rs_params *p, int d, int64_t xo, rs_tap *t)
{
    int64_t in = p->in[d];
    double x = rs_map_coord(p, d, xo);
    if (p->coord == RS_COORD_TF_CROP_AND_RESIZE && (x < 0.0 || x > (double)(in - 1))) {
        t->n = 0;
        return;
    }
    double f = floor(x);
    double r = x - f;
    int64_t base = (int64_t)f;
    if (p->mode == RS_MODE_NEAREST) {
        int64_t i = base;
        switch (p->nearest) {
        case RS_NEAREST_ROUND_PREFER_FLOOR: i = r <= 0.5 ? base : base + 1; break;
        case RS_NEAREST_ROUND_PREFER_CEIL: i = r < 0.5 ? base : base + 1; break;
        case RS_NEAREST_FLOOR: i = base; break;
        case RS_NEAREST_CEIL: i = r > 0.0 ? base + 1 : base; break;
        case RS_NEAREST_LEGACY: i = (p->scale[d] < 1.0 && r > 0.0) ? base + 1 : base; break;
        }
        t->n = 1;
        t->idx[0] = rs_clamp(i, in);
        t->w[0] = 1.0;
        return;
    }
    /* Weights go to t->w[0..n) for input indices first .. first + n - 1. */
    int64_t n, first;
    double *w = t->w;
    if (p->antialias) {
        /* The reference takes the pixel left of x, so a coordinate on a
         * pixel centre has ratio 1 and that pixel is the right one; the
         * window is then symmetric about x. */
        double ratio = r;
        if (r == 0.0) {
            ratio = 1.0;
            base -= 1;
        }
        double s = p->scale[d] < 1.0 ? p->scale[d] : 1.0, sum = 0.0;
        int64_t start = rs_aa_start(p, d);
        n = 2 - 2 * start;
        first = base + start;
        for (int64_t k = 0; k < n; k++) {
            w[k] = rs_aa_kernel(p, ((double)(start + k) - ratio) * s);
            sum += w[k];
        }
        if (sum != 0.0)
            for (int64_t k = 0; k < n; k++) w[k] /= sum;
    } else if (p->mode == RS_MODE_LINEAR) {
        n = 2;
        first = base;
        w[0] = 1.0 - r;
        w[1] = r;
    } else {
        double a = p->cubic_a, r1 = r + 1.0, q = 1.0 - r, q1 = q + 1.0;
        n = 4;
        first = base - 1;
        w[0] = ((a * r1 - 5.0 * a) * r1 + 8.0 * a) * r1 - 4.0 * a;
        w[1] = ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0;
        w[2] = ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0;
        w[3] = ((a * q1 - 5.0 * a) * q1 + 8.0 * a) * q1 - 4.0 * a;
    }
    if (p->exclude_outside) {
        double sum = 0.0;
        for (int64_t k = 0; k < n; k++) {
            int64_t i = first + k;
            if (i < 0 || i >= in) w[k] = 0.0;
            sum += w[k];
        }
        if (sum != 0.0)
            for (int64_t k = 0; k < n; k++) w[k] /= sum;
    }
    /* Compact in place (the write index never passes the read index);
     * taps past an edge read the edge pixel, as edge padding does. */
    t->n = 0;
    for (int64_t k = 0; k < n; k++) {
        if (w[k] == 0.0) continue;
        t->idx[t->n] = rs_clamp(first + k, in);
        t->w[t->n] = w[k];
        t->n++;
    }
    if (t->n == 0) {
        /* All weights vanished (degenerate exclude_outside): keep one tap of
         * weight zero so the element is 0, not extrapolated. */
        t->n = 1;
        t->idx[0] = rs_clamp(base, in);
        t->w[0] = 0.0;
    }
}

/* ---- element access ---- */

static double rs_load(const mcp_tensor *x, int64_t i)
{
    switch (x->dtype) {
    case MCP_DTYPE_FLOAT: return ((const float *)x->data)[i];
    case MCP_DTYPE_DOUBLE: return ((const double *)x->data)[i];
    case MCP_DTYPE_INT64: return (double)((const int64_t *)x->data)[i];
    case MCP_DTYPE_UINT64: return (double)((const uint64_t *)x->data)[i];
    default: return mcp_tensor_get_f64(x, i);
    }
}

static double rs_round_clamp(double v, double lo, double hi)
{
    if (v != v) return 0.0;
    v = round(v);
    return v < lo ? lo : (v > hi ? hi : v);
}

/* Stores v into element i; integer outputs round to nearest and saturate. */
static void rs_store(mcp_tensor *y, int64_t i, double v)
{
    switch (y->dtype) {
    case MCP_DTYPE_FLOAT: ((float *)y->data)[i] = (float)v; return;
    case MCP_DTYPE_DOUBLE: ((double *)y->data)[i] = v; return;
    case MCP_DTYPE_INT8: ((int8_t *)y->data)[i] = (int8_t)rs_round_clamp(v, -128.0, 127.0); return;
    case MCP_DTYPE_UINT8: ((uint8_t *)y->data)[i] = (uint8_t)rs_round_clamp(v, 0.0, 255.0); return;
    case MCP_DTYPE_INT16:
        ((int16_t *)y->data)[i] = (int16_t)rs_round_clamp(v, -32768.0, 32767.0);
        return;
    case MCP_DTYPE_UINT16:
        ((uint16_t *)y->data)[i] = (uint16_t)rs_round_clamp(v, 0.0, 65535.0);
        return;
    case MCP_DTYPE_INT32:
        ((int32_t *)y->data)[i] = (int32_t)rs_round_clamp(v, -2147483648.0, 2147483647.0);
        return;
    case MCP_DTYPE_UINT32:
        ((uint32_t *)y->data)[i] = (uint32_t)rs_round_clamp(v, 0.0, 4294967295.0);
        return;
    case MCP_DTYPE_INT64:
        ((int64_t *)y->data)[i] =
            (int64_t)rs_round_clamp(v, -9223372036854775808.0, 9223372036854774784.0);
        return;
    case MCP_DTYPE_UINT64:
        ((uint64_t *)y->data)[i] = (uint64_t)rs_round_clamp(v, 0.0, 18446744073709549568.0);
        return;
    case MCP_DTYPE_BOOL: ((uint8_t *)y->data)[i] = v != 0.0; return;
    default: mcp_tensor_set_f64(y, i, v); return;
    }
}

/* ---- the resize itself ---- */

static mcp_status rs_compute(mcp_kernel_ctx *ctx, const mcp_tensor *x, const rs_params *p)
{
    bool numeric = mcp_dtype_is_numeric(x->dtype);
    if (p->mode != RS_MODE_NEAREST && !numeric)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                         "input 'X' of type %s needs mode 'nearest'", mcp_dtype_name(x->dtype));
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, p->rank, p->out);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n_out = mcp_tensor_numel(y);
    if (n_out == 0) return MCP_STATUS_OK;
    for (int d = 0; d < p->rank; d++)
        if (p->in[d] == 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'X' has an empty dim %d but the output does not", d);

    /* taps[d] points into one block: off[d] is dim d's first entry; their
     * indices and weights share two pools, width[d] slots per tap. */
    int64_t total = 0, slots = 0, off[MCP_MAX_RANK], width[MCP_MAX_RANK];
    for (int d = 0; d < p->rank; d++) {
        /* A nonempty output keeps scale * in near 1 or more, so the widest
         * filter spans a few times the input; only a corrupt scale gets
         * here, and the bound keeps the arithmetic below exact. */
        if (p->antialias && !(rs_support(p) / p->scale[d] <= 1.0e9))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'antialias' with scale %g on dim %d needs a filter "
                             "too wide to compute", p->scale[d], d);
        width[d] = rs_tap_width(p, d);
        off[d] = total;
        total += p->out[d];
        if ((double)p->out[d] * (double)width[d] + (double)slots > 1.0e15)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "output dim %d (%lld) needs too many interpolation taps", d,
                             (long long)p->out[d]);
        slots += p->out[d] * width[d];
    }
    rs_tap *taps = mcp_malloc((size_t)(total > 0 ? total : 1) * sizeof(rs_tap));
    int64_t *idx_pool = mcp_malloc((size_t)(slots > 0 ? slots : 1) * sizeof(int64_t));
    double *w_pool = mcp_malloc((size_t)(slots > 0 ? slots : 1) * sizeof(double));
    if (!taps || !idx_pool || !w_pool) {
        mcp_free(taps);
        mcp_free(idx_pool);
        mcp_free(w_pool);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory for taps");
    }
    int64_t slot = 0;
    for (int d = 0; d < p->rank; d++)
        for (int64_t i = 0; i < p->out[d]; i++) {
            rs_tap *t = &taps[off[d] + i];
            t->idx = idx_pool + slot;
            t->w = w_pool + slot;
            slot += width[d];
            rs_make_tap(p, d, i, t);
        }

    int64_t stride[MCP_MAX_RANK];
    mcp_contiguous_strides(p->rank, p->in, stride);
    int64_t c[MCP_MAX_RANK] = {0};
    const rs_tap *cur[MCP_MAX_RANK];
    mcp_status st = MCP_STATUS_OK;
    for (int64_t e = 0; e < n_out && st == MCP_STATUS_OK; e++) {
        bool outside = false;
        for (int d = 0; d < p->rank; d++) {
            cur[d] = &taps[off[d] + c[d]];
            if (cur[d]->n == 0) outside = true;
        }
        if (outside) {
            if (numeric) rs_store(y, e, p->extrapolation);
        } else if (p->mode == RS_MODE_NEAREST) {
            int64_t src = 0;
            for (int d = 0; d < p->rank; d++) src += cur[d]->idx[0] * stride[d];
            st = mcp__ref_index_copy(ctx, y, e, x, src, 1);
        } else {
            /* Sum over every combination of the dims' taps. */
            int64_t t[MCP_MAX_RANK] = {0};
            double acc = 0.0;
            for (;;) {
                double w = 1.0;
                int64_t src = 0;
                for (int d = 0; d < p->rank; d++) {
                    w *= cur[d]->w[t[d]];
                    src += cur[d]->idx[t[d]] * stride[d];
                }
                acc += w * rs_load(x, src);
                int d = p->rank - 1;
                while (d >= 0 && ++t[d] == cur[d]->n) t[d--] = 0;
                if (d < 0) break;
            }
            rs_store(y, e, acc);
        }
        for (int d = p->rank - 1; d >= 0; d--) {
            if (++c[d] < p->out[d]) break;
            c[d] = 0;
        }
    }
    mcp_free(taps);
    mcp_free(idx_pool);
    mcp_free(w_pool);
    return st;
}

/* Reads a float tensor's element (float, double or 16-bit floats). */
static double rs_get(const mcp_tensor *t, int64_t i)
{
    return mcp_tensor_get_f64(t, i);
}

/* ---- Resize ---- */

static mcp_status resize_axes(mcp_kernel_ctx *ctx, int rank, int *axes, int *n_axes)
{
    int64_t count = 0;
    const int64_t *a = mcp_kattr_ints(ctx, "axes", &count);
    if (!a || count == 0) {
        for (int d = 0; d < rank; d++) axes[d] = d;
        *n_axes = rank;
        return MCP_STATUS_OK;
    }
    if (count > rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axes' has %lld entries for rank %d", (long long)count, rank);
    for (int64_t i = 0; i < count; i++) {
        if (!mcp_axis_normalize(a[i], rank, &axes[i]))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'axes' entry %lld out of range for rank %d",
                             (long long)a[i], rank);
        for (int64_t j = 0; j < i; j++)
            if (axes[j] == axes[i])
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "attribute 'axes' repeats axis %d", axes[i]);
    }
    *n_axes = (int)count;
    return MCP_STATUS_OK;
}

static const mcp_tensor *nonempty_input(mcp_kernel_ctx *ctx, int i)
{
    const mcp_tensor *t = mcp_kin(ctx, i);
    return t && mcp_tensor_numel(t) > 0 ? t : NULL;
}

mcp_status mcp__ref_index_resize_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");
    rs_params p;
    memset(&p, 0, sizeof(p));
    rs_defaults(&p, x);
    mcp_status st;

    if (ctx->opset < 11) {
        /* Resize-10: X, scales; asymmetric coordinates. */
        st = rs_parse_mode(ctx, mcp_kattr_string(ctx, "mode", "nearest"), &p.mode);
        if (st != MCP_STATUS_OK) return st;
        if (p.mode == RS_MODE_CUBIC)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'mode' 'cubic' needs opset 11");
        p.coord = RS_COORD_ASYMMETRIC;
        p.nearest = RS_NEAREST_LEGACY;
        const mcp_tensor *scales = mcp_kin(ctx, 1);
        if (!scales)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'scales' is missing");
        if (mcp_tensor_numel(scales) != x->rank || !mcp_dtype_is_float(scales->dtype))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'scales' must hold %d floats", x->rank);
        for (int d = 0; d < x->rank; d++) p.scale[d] = rs_get(scales, d);
        st = rs_from_scales(ctx, &p, "scales");
        if (st != MCP_STATUS_OK) return st;
        return rs_compute(ctx, x, &p);
    }

    st = rs_parse_attrs(ctx, &p);
    if (st != MCP_STATUS_OK) return st;
    int axes[MCP_MAX_RANK], na = 0;
    st = resize_axes(ctx, x->rank, axes, &na);
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *roi = nonempty_input(ctx, 1);
    const mcp_tensor *scales = nonempty_input(ctx, 2);
    const mcp_tensor *sizes = nonempty_input(ctx, 3);
    if ((scales != NULL) == (sizes != NULL))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "exactly one of inputs 'scales' and 'sizes' must be given");
    if (roi && p.coord == RS_COORD_TF_CROP_AND_RESIZE) {
        if (mcp_tensor_numel(roi) != 2 * na || !mcp_dtype_is_float(roi->dtype))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'roi' must hold %d floats",
                             2 * na);
        for (int i = 0; i < na; i++) {
            p.roi_start[axes[i]] = rs_get(roi, i);
            p.roi_end[axes[i]] = rs_get(roi, na + i);
        }
    }
    if (scales) {
        if (mcp_tensor_numel(scales) != na || !mcp_dtype_is_float(scales->dtype))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'scales' must hold %d floats", na);
        for (int i = 0; i < na; i++) p.scale[axes[i]] = rs_get(scales, i);
        st = rs_from_scales(ctx, &p, "scales");
        if (st != MCP_STATUS_OK) return st;
        return rs_compute(ctx, x, &p);
    }

    if (mcp_tensor_numel(sizes) != na || sizes->dtype != MCP_DTYPE_INT64)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'sizes' must hold %d int64 values", na);
    const int64_t *sz = (const int64_t *)sizes->data;
    for (int i = 0; i < na; i++)
        if (sz[i] < 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'sizes' holds a negative size %lld", (long long)sz[i]);
    const char *policy = mcp_kattr_string(ctx, "keep_aspect_ratio_policy", "stretch");
    if (strcmp(policy, "stretch") == 0) {
        for (int i = 0; i < na; i++) {
            int d = axes[i];
            p.out[d] = sz[i];
            p.scale[d] = p.in[d] > 0 ? (double)sz[i] / (double)p.in[d] : 1.0;
        }
    } else if (strcmp(policy, "not_larger") == 0 || strcmp(policy, "not_smaller") == 0) {
        bool larger = policy[4] == 's';
        double s = 0.0;
        for (int i = 0; i < na; i++) {
            int d = axes[i];
            if (p.in[d] == 0) continue;
            double r = (double)sz[i] / (double)p.in[d];
            if (i == 0 || (larger ? r > s : r < s)) s = r;
        }
        for (int i = 0; i < na; i++) {
            int d = axes[i];
            p.scale[d] = s;
            p.out[d] = (int64_t)floor(s * (double)p.in[d] + 0.5);
        }
    } else {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'keep_aspect_ratio_policy' '%s' is unknown", policy);
    }
    return rs_compute(ctx, x, &p);
}

/* ---- Upsample ---- */

mcp_status mcp__ref_index_upsample_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");
    rs_params p;
    memset(&p, 0, sizeof(p));
    rs_defaults(&p, x);
    mcp_status st = rs_parse_mode(ctx, mcp_kattr_string(ctx, "mode", "nearest"), &p.mode);
    if (st != MCP_STATUS_OK) return st;
    if (p.mode == RS_MODE_CUBIC)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'mode' 'cubic' is not valid");
    p.coord = RS_COORD_ASYMMETRIC;
    p.nearest = RS_NEAREST_LEGACY;
    if (ctx->opset < 9) {
        int64_t count = 0;
        const float *sc = mcp_kattr_floats(ctx, "scales", &count);
        if (!sc || count != x->rank)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'scales' must hold %d floats", x->rank);
        for (int d = 0; d < x->rank; d++) p.scale[d] = sc[d];
        st = rs_from_scales(ctx, &p, "scales");
    } else {
        const mcp_tensor *scales = mcp_kin(ctx, 1);
        if (!scales)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'scales' is missing");
        if (mcp_tensor_numel(scales) != x->rank || !mcp_dtype_is_float(scales->dtype))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'scales' must hold %d floats", x->rank);
        for (int d = 0; d < x->rank; d++) p.scale[d] = rs_get(scales, d);
        st = rs_from_scales(ctx, &p, "scales");
    }
    if (st != MCP_STATUS_OK) return st;
    return rs_compute(ctx, x, &p);
}
