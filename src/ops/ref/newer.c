/*
 * Reference kernels for operators added after opset 17 that belong to no
 * older family: BitCast-26, Col2Im-18, CenterCropPad-18, AffineGrid-20,
 * TensorScatter-24 and the string ops StringConcat-20, StringSplit-20 and
 * RegexFullMatch-20. Data movement is done element by element on bytes (so
 * every fixed-size type works, strings through copies); arithmetic in
 * double, or in wrapping 64-bit integers for integer Col2Im.
 *
 * Every size computed from input data (block counts, cropped or padded
 * extents, scatter positions) is range-checked before it is used; output
 * allocation checks the total size (mcp_kout).
 */
#include <math.h>
#include <regex.h>
#include <stdint.h>
#include <string.h>

#include "ops/ref/ref.h"

/* Sizes read from inputs and attributes are kept below this, so sums and
 * differences of a few of them never overflow int64. */
#define NEWER_DIM_MAX ((int64_t)1 << 40)

/* Reads a 1-D (or scalar) integer input into out[0 .. *n), at most cap. */
static mcp_status newer_read_ints(mcp_kernel_ctx *ctx, const mcp_tensor *t, const char *name,
                                  int64_t cap, int64_t *out, int64_t *n)
{
    if (!t) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is required", name);
    if (t->rank > 1 || !mcp_dtype_is_integer(t->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must be a 1-D integer tensor, got rank %d %s", name, t->rank,
                         mcp_dtype_name(t->dtype));
    int64_t count = mcp_tensor_numel(t);
    if (count > cap)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has %lld entries, at most %lld",
                         name, (long long)count, (long long)cap);
    for (int64_t i = 0; i < count; i++) out[i] = mcp_tensor_get_i64(t, i);
    *n = count;
    return MCP_STATUS_OK;
}

/* Copies element si of src to element di of dst (same dtype). */
static mcp_status newer_copy_elem(mcp_tensor *dst, int64_t di, const mcp_tensor *src, int64_t si)
{
    if (dst->dtype == MCP_DTYPE_STRING) {
        const char *s = ((char *const *)src->data)[si];
        return mcp_tensor_set_string(dst, di, s, strlen(s));
    }
    size_t es = (size_t)mcp_dtype_size(dst->dtype);
    memcpy((char *)dst->data + (size_t)di * es, (const char *)src->data + (size_t)si * es, es);
    return MCP_STATUS_OK;
}

/* ---- BitCast ---- */

/* The target type of `to`: a defined type of fixed width (strings have no
 * bit pattern to keep). Widths are compared in bits, since the packed
 * sub-byte types (int4, uint4, float4e2m1, int2, uint2) have no byte size. */
static mcp_status bitcast_target(const mcp_node *node, mcp_dtype *out, mcp_err *err)
{
    const mcp_attr *a = mcp_node_attr(node, "to");
    if (!a) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'to' is required");
    int64_t to = mcp_node_attr_int(node, "to", 0);
    if (to <= 0 || to >= MCP_DTYPE_COUNT || mcp_dtype_bits((mcp_dtype)to) == 0)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                           "attribute 'to' (%lld) is not a fixed-width type this engine implements",
                           (long long)to);
    *out = (mcp_dtype)to;
    return MCP_STATUS_OK;
}

static mcp_status bitcast_check(const mcp_node *node, const mcp_graph *graph, mcp_err *err)
{
    mcp_dtype to = MCP_DTYPE_UNDEFINED;
    mcp_status st = bitcast_target(node, &to, err);
    if (st != MCP_STATUS_OK) return st;
    if (graph && node->n_inputs > 0 && node->inputs[0] >= 0 && node->inputs[0] < graph->n_values) {
        mcp_dtype from = graph->values[node->inputs[0]].type.dtype;
        if (from != MCP_DTYPE_UNDEFINED && mcp_dtype_bits(from) != mcp_dtype_bits(to))
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                               "input type %s and attribute 'to' %s differ in bit width",
                               mcp_dtype_name(from), mcp_dtype_name(to));
    }
    return MCP_STATUS_OK;
}

/* The same bytes under another type. Both types have the same width, so a
 * byte copy keeps every element's bit pattern on any host byte order
 * (packed types included: both pack the same number of elements a byte). */
static mcp_status run_bitcast(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    int64_t to_num = mcp_kattr_int(ctx, "to", 0);
    if (to_num <= 0 || to_num >= MCP_DTYPE_COUNT)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'to' (%lld) is not a type", (long long)to_num);
    mcp_dtype to = (mcp_dtype)to_num;
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is required");
    if (mcp_dtype_bits(x->dtype) == 0 || mcp_dtype_bits(x->dtype) != mcp_dtype_bits(to))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input type %s and attribute 'to' %s differ in bit width",
                         mcp_dtype_name(x->dtype), mcp_dtype_name(to));
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, to, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    size_t nbytes = mcp_tensor_nbytes(y);
    if (nbytes && y->data != x->data) memcpy(y->data, x->data, nbytes);
    return MCP_STATUS_OK;
}

/* ---- Col2Im ---- */

/* Attribute `name` with one entry per spatial dim, each at least `min`;
 * `dflt` for every entry when absent. */
static mcp_status col2im_attr(mcp_kernel_ctx *ctx, const char *name, int64_t want, int64_t min,
                              int64_t dflt, int64_t *out)
{
    int64_t n = 0;
    const int64_t *v = mcp_kattr_ints(ctx, name, &n);
    if (!v) {
        for (int64_t i = 0; i < want; i++) out[i] = dflt;
        return MCP_STATUS_OK;
    }
    if (n != want)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute '%s' has %lld entries, expected %lld",
                         name, (long long)n, (long long)want);
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < min || v[i] > NEWER_DIM_MAX)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute '%s'[%lld] is %lld, out of range",
                             name, (long long)i, (long long)v[i]);
        out[i] = v[i];
    }
    return MCP_STATUS_OK;
}

/* Sums sliding blocks (columns of input) back into an image: the inverse
 * layout of im2col, overlapping taps added. */
static mcp_status run_col2im(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    int64_t img[MCP_MAX_RANK], blk[MCP_MAX_RANK], nd = 0, nb = 0;
    int64_t dil[MCP_MAX_RANK], str[MCP_MAX_RANK], pads[2 * MCP_MAX_RANK], cols[MCP_MAX_RANK];
    mcp_status st;
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is required");
    if (!mcp_dtype_is_numeric(x->dtype) || x->dtype == MCP_DTYPE_BOOL)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'input' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (x->rank != 3)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'input' must have shape [N, C * prod(block_shape), L], got rank %d", x->rank);
    if ((st = newer_read_ints(ctx, mcp_kin(ctx, 1), "image_shape", MCP_MAX_RANK - 2, img, &nd)) != MCP_STATUS_OK ||
        (st = newer_read_ints(ctx, mcp_kin(ctx, 2), "block_shape", MCP_MAX_RANK - 2, blk, &nb)) != MCP_STATUS_OK)
        return st;
    if (nd == 0 || nd != nb)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'image_shape' (%lld entries) and 'block_shape' (%lld) must be equally long and non-empty",
                         (long long)nd, (long long)nb);
    if ((st = col2im_attr(ctx, "dilations", nd, 1, 1, dil)) != MCP_STATUS_OK ||
        (st = col2im_attr(ctx, "strides", nd, 1, 1, str)) != MCP_STATUS_OK ||
        (st = col2im_attr(ctx, "pads", 2 * nd, 0, 0, pads)) != MCP_STATUS_OK)
        return st;
    int64_t kernel = 1, ncols = 1;
    for (int64_t i = 0; i < nd; i++) {
        if (img[i] <= 0 || img[i] > NEWER_DIM_MAX || blk[i] <= 0 || blk[i] > NEWER_DIM_MAX)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "dim %lld: image size %lld and block size %lld must be positive", (long long)i,
                             (long long)img[i], (long long)blk[i]);
        /* dil * (blk - 1) stays below 2^80 only in a double; check first. */
        if (blk[i] - 1 > NEWER_DIM_MAX / dil[i])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "dim %lld: dilated block is too large",
                             (long long)i);
        int64_t span = dil[i] * (blk[i] - 1) + 1;
        int64_t room = img[i] + pads[i] + pads[nd + i] - span;
        if (room < 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "dim %lld: the dilated block (%lld) is larger than the padded image (%lld)",
                             (long long)i, (long long)span, (long long)(img[i] + pads[i] + pads[nd + i]));
        cols[i] = room / str[i] + 1;
        if (blk[i] > NEWER_DIM_MAX / kernel || cols[i] > NEWER_DIM_MAX / ncols)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "block or column count is too large");
        kernel *= blk[i];
        ncols *= cols[i];
    }
    if (x->dims[1] % kernel != 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input dim 1 (%lld) is not a multiple of prod(block_shape) (%lld)",
                         (long long)x->dims[1], (long long)kernel);
    if (x->dims[2] != ncols)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input dim 2 (%lld) differs from the number of sliding blocks (%lld)",
                         (long long)x->dims[2], (long long)ncols);
    int64_t N = x->dims[0], C = x->dims[1] / kernel;
    int64_t odims[MCP_MAX_RANK] = {N, C};
    int64_t plane = 1;
    for (int64_t i = 0; i < nd; i++) {
        odims[2 + i] = img[i];
        plane *= img[i]; /* bounded: mcp_kout checks the total below */
    }
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, (int)nd + 2, odims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (mcp_tensor_numel(y) == 0 || mcp_tensor_numel(x) == 0) return MCP_STATUS_OK;
    bool fl = mcp_dtype_is_float(x->dtype);
    for (int64_t nc = 0; nc < N * C; nc++) {
        for (int64_t k = 0; k < kernel; k++) {
            int64_t off[MCP_MAX_RANK];
            for (int64_t i = nd - 1, r = k; i >= 0; i--) {
                off[i] = r % blk[i];
                r /= blk[i];
            }
            for (int64_t col = 0; col < ncols; col++) {
                int64_t pos = 0, r = col;
                bool inside = true;
                int64_t at[MCP_MAX_RANK];
                for (int64_t i = nd - 1; i >= 0; i--) {
                    at[i] = (r % cols[i]) * str[i] - pads[i] + off[i] * dil[i];
                    r /= cols[i];
                    inside &= at[i] >= 0 && at[i] < img[i];
                }
                if (!inside) continue;
                for (int64_t i = 0; i < nd; i++) pos = pos * img[i] + at[i];
                int64_t src = (nc * kernel + k) * ncols + col, dst = nc * plane + pos;
                if (fl) {
                    mcp_tensor_set_f64(y, dst, mcp_tensor_get_f64(y, dst) + mcp_tensor_get_f64(x, src));
                } else {
                    uint64_t s = (uint64_t)mcp_tensor_get_i64(y, dst) + (uint64_t)mcp_tensor_get_i64(x, src);
                    mcp_tensor_set_i64(y, dst, (int64_t)s);
                }
            }
        }
    }
    return MCP_STATUS_OK;
}

/* ---- CenterCropPad ---- */

static mcp_status run_center_crop_pad(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    int64_t shape[MCP_MAX_RANK], ns = 0;
    mcp_status st;
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input_data' is required");
    if (mcp_dtype_size(x->dtype) == 0 && x->dtype != MCP_DTYPE_STRING)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'input_data' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if ((st = newer_read_ints(ctx, mcp_kin(ctx, 1), "shape", MCP_MAX_RANK, shape, &ns)) != MCP_STATUS_OK)
        return st;
    int r = x->rank;
    int axes[MCP_MAX_RANK];
    int64_t na = 0;
    const int64_t *a = mcp_kattr_ints(ctx, "axes", &na);
    if (!a) {
        na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
    } else {
        if (na > r)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axes' has %lld entries for rank %d",
                             (long long)na, r);
        bool seen[MCP_MAX_RANK] = {false};
        for (int64_t i = 0; i < na; i++) {
            if (!mcp_axis_normalize(a[i], r, &axes[i]))
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axes' entry %lld is out of range for rank %d",
                                 (long long)a[i], r);
            if (seen[axes[i]])
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axes' repeats axis %d", axes[i]);
            seen[axes[i]] = true;
        }
    }
    if (ns != na)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'shape' has %lld entries for %lld axes",
                         (long long)ns, (long long)na);
    /* Output index j along dim d reads input index j + shift[d]: a crop
     * starts at floor(excess / 2), a pad puts floor(excess / 2) before. */
    int64_t odims[MCP_MAX_RANK], shift[MCP_MAX_RANK];
    for (int i = 0; i < r; i++) {
        odims[i] = x->dims[i];
        shift[i] = 0;
    }
    for (int64_t i = 0; i < na; i++) {
        int d = axes[i];
        if (shape[i] < 0 || shape[i] > NEWER_DIM_MAX)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'shape'[%lld] is %lld, out of range",
                             (long long)i, (long long)shape[i]);
        odims[d] = shape[i];
        shift[d] = shape[i] <= x->dims[d] ? (x->dims[d] - shape[i]) / 2 : -((shape[i] - x->dims[d]) / 2);
    }
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, r, odims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t total = mcp_tensor_numel(y);
    int64_t idx[MCP_MAX_RANK] = {0};
    for (int64_t o = 0; o < total; o++) {
        int64_t src = 0;
        bool inside = true;
        for (int i = 0; i < r; i++) {
            int64_t s = idx[i] + shift[i];
            inside &= s >= 0 && s < x->dims[i];
            src = src * x->dims[i] + s;
        }
        if (inside && (st = newer_copy_elem(y, o, x, src)) != MCP_STATUS_OK)
            return mcp_kfail(ctx, st, "out of memory");
        for (int i = r - 1; i >= 0 && ++idx[i] == odims[i]; i--) idx[i] = 0;
    }
    return MCP_STATUS_OK;
}

/* ---- AffineGrid ---- */

/* Normalized coordinate of sample i of n in [-1, 1]: the centres of the
 * corner pixels at -1 and 1 with align_corners, else the pixels' outer
 * edges. */
static double affine_coord(int64_t i, int64_t n, bool align)
{
    if (align) return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)n;
}

static mcp_status run_affine_grid(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *theta = mcp_kin(ctx, 0);
    int64_t size[5], ns = 0;
    mcp_status st;
    if (!theta) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'theta' is required");
    if (!mcp_dtype_is_float(theta->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'theta' has unsupported type %s",
                         mcp_dtype_name(theta->dtype));
    if ((st = newer_read_ints(ctx, mcp_kin(ctx, 1), "size", 5, size, &ns)) != MCP_STATUS_OK) return st;
    if (ns != 4 && ns != 5)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'size' must be [N, C, H, W] or [N, C, D, H, W], got %lld entries", (long long)ns);
    int sd = (int)ns - 2; /* spatial dims: 2 or 3 */
    if (theta->rank != 3 || theta->dims[1] != sd || theta->dims[2] != sd + 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'theta' must have shape [N, %d, %d]", sd, sd + 1);
    if (theta->dims[0] != size[0])
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'theta' has batch %lld but 'size' says %lld",
                         (long long)theta->dims[0], (long long)size[0]);
    bool align = mcp_kattr_int(ctx, "align_corners", 0) != 0;
    int64_t odims[5];
    odims[0] = size[0];
    for (int i = 0; i < sd; i++) {
        if (size[2 + i] <= 0 || size[2 + i] > NEWER_DIM_MAX)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'size'[%d] is %lld, must be positive",
                             2 + i, (long long)size[2 + i]);
        odims[1 + i] = size[2 + i];
    }
    odims[1 + sd] = sd;
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, theta->dtype, sd + 2, odims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t D = sd == 3 ? size[2] : 1, H = size[ns - 2], W = size[ns - 1];
    int64_t o = 0;
    for (int64_t n = 0; n < size[0]; n++) {
        double t[12];
        for (int i = 0; i < sd * (sd + 1); i++) t[i] = mcp_tensor_get_f64(theta, n * sd * (sd + 1) + i);
        for (int64_t d = 0; d < D; d++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++) {
                    /* Homogeneous base point (x, y[, z], 1), x along W. */
                    double p[4] = {affine_coord(w, W, align), affine_coord(h, H, align), 1.0, 1.0};
                    if (sd == 3) p[2] = affine_coord(d, D, align);
                    for (int i = 0; i < sd; i++) {
                        double v = 0.0;
                        for (int j = 0; j <= sd; j++) v += t[i * (sd + 1) + j] * p[j];
                        mcp_tensor_set_f64(y, o++, v);
                    }
                }
    }
    return MCP_STATUS_OK;
}

/* ---- TensorScatter ---- */

static mcp_status tensor_scatter_check(const mcp_node *node, const mcp_graph *graph, mcp_err *err)
{
    (void)graph;
    const char *mode = mcp_node_attr_string(node, "mode", "linear");
    if (strcmp(mode, "linear") != 0 && strcmp(mode, "circular") != 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'mode' '%s' is not linear or circular", mode);
    return MCP_STATUS_OK;
}

/* A copy of past_cache with update written along `axis` at each batch
 * entry's write index (modulo the cache length in circular mode). */
static mcp_status run_tensor_scatter(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *past = mcp_kin(ctx, 0), *upd = mcp_kin(ctx, 1), *wi = mcp_kin(ctx, 2);
    if (!past || !upd) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'past_cache' and 'update' are required");
    if (upd->dtype != past->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'update' is %s but 'past_cache' is %s",
                         mcp_dtype_name(upd->dtype), mcp_dtype_name(past->dtype));
    if (mcp_dtype_size(past->dtype) == 0 && past->dtype != MCP_DTYPE_STRING)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'past_cache' has unsupported type %s",
                         mcp_dtype_name(past->dtype));
    const char *mode = mcp_kattr_string(ctx, "mode", "linear");
    bool circular = strcmp(mode, "circular") == 0;
    if (!circular && strcmp(mode, "linear") != 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'mode' '%s' is not linear or circular", mode);
    int r = past->rank, axis;
    int64_t a = mcp_kattr_int(ctx, "axis", -2);
    if (r < 2 || !mcp_axis_normalize(a, r, &axis) || axis == 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' %lld must name a non-batch axis of rank %d", (long long)a, r);
    if (upd->rank != r)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'update' has rank %d, 'past_cache' %d", upd->rank, r);
    for (int i = 0; i < r; i++)
        if (i == axis ? upd->dims[i] > past->dims[i] : upd->dims[i] != past->dims[i])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'update' dim %d (%lld) does not fit 'past_cache' (%lld)",
                             i, (long long)upd->dims[i], (long long)past->dims[i]);
    int64_t batch = past->dims[0];
    if (wi && (wi->rank != 1 || wi->dims[0] != batch || !mcp_dtype_is_integer(wi->dtype)))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'write_indices' must be an integer tensor of shape [%lld]",
                         (long long)batch);
    mcp_tensor *y = mcp_kout(ctx, 0, past->dtype, r, past->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    /* An empty cache may still have a huge dim (a 0 after the axis, huge
     * dims before it): the loop over those would run without writing. */
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    int64_t total = mcp_tensor_numel(past);
    mcp_status st;
    if (past->dtype == MCP_DTYPE_STRING) {
        for (int64_t i = 0; i < total; i++)
            if ((st = newer_copy_elem(y, i, past, i)) != MCP_STATUS_OK) return mcp_kfail(ctx, st, "out of memory");
    } else if (total && y->data != past->data) {
        memcpy(y->data, past->data, mcp_tensor_nbytes(past));
    }
    int64_t max_len = past->dims[axis], len = upd->dims[axis];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= past->dims[i];
    for (int i = axis + 1; i < r; i++) inner *= past->dims[i];
    int64_t per_batch = batch ? outer / batch : 0;
    for (int64_t o = 0; o < outer; o++) {
        int64_t b = o / per_batch;
        int64_t w = wi ? mcp_tensor_get_i64(wi, b) : 0;
        if (!circular && (w < 0 || w > max_len - len)) {
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "write index %lld of batch %lld with %lld updates exceeds the cache length %lld",
                             (long long)w, (long long)b, (long long)len, (long long)max_len);
        }
        for (int64_t s = 0; s < len; s++) {
            int64_t at = circular ? ((w % max_len + max_len) % max_len + s) % max_len : w + s;
            for (int64_t i = 0; i < inner; i++) {
                int64_t di = (o * max_len + at) * inner + i, si = (o * len + s) * inner + i;
                if ((st = newer_copy_elem(y, di, upd, si)) != MCP_STATUS_OK) return mcp_kfail(ctx, st, "out of memory");
            }
        }
    }
    return MCP_STATUS_OK;
}

/* ---- StringConcat, StringSplit ---- */

static mcp_status run_string_concat(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *a = mcp_kin(ctx, 0), *b = mcp_kin(ctx, 1);
    if (!a || !b) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'Y' are required");
    if (a->dtype != MCP_DTYPE_STRING || b->dtype != MCP_DTYPE_STRING)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'Y' must be strings, got %s and %s",
                         mcp_dtype_name(a->dtype), mcp_dtype_name(b->dtype));
    int rank;
    int64_t dims[MCP_MAX_RANK], sa[MCP_MAX_RANK], sb[MCP_MAX_RANK];
    if (!mcp_broadcast_shapes(a->rank, a->dims, b->rank, b->dims, &rank, dims))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'Y' do not broadcast");
    mcp_broadcast_strides(a->rank, a->dims, rank, dims, sa);
    mcp_broadcast_strides(b->rank, b->dims, rank, dims, sb);
    mcp_tensor *y = mcp_kout(ctx, 0, MCP_DTYPE_STRING, rank, dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(y), idx[MCP_MAX_RANK] = {0};
    char *buf = NULL;
    size_t cap = 0;
    mcp_status st = MCP_STATUS_OK;
    for (int64_t o = 0; o < n && st == MCP_STATUS_OK; o++) {
        int64_t ia = 0, ib = 0;
        for (int i = 0; i < rank; i++) {
            ia += idx[i] * sa[i];
            ib += idx[i] * sb[i];
        }
        const char *x = ((char *const *)a->data)[ia], *z = ((char *const *)b->data)[ib];
        size_t lx = strlen(x), lz = strlen(z);
        if (lx + lz + 1 > cap) {
            char *nb = mcp_realloc(buf, lx + lz + 1);
            if (!nb) {
                st = MCP_STATUS_OUT_OF_MEMORY;
                break;
            }
            buf = nb;
            cap = lx + lz + 1;
        }
        memcpy(buf, x, lx);
        memcpy(buf + lx, z, lz);
        st = mcp_tensor_set_string(y, o, buf, lx + lz);
        for (int i = rank - 1; i >= 0 && ++idx[i] == dims[i]; i--) idx[i] = 0;
    }
    mcp_free(buf);
    return st == MCP_STATUS_OK ? st : mcp_kfail(ctx, st, "out of memory");
}

/* The most elements StringSplit's output 'Y' may hold (2^26: half a GiB of
 * pointers plus one allocation each). */
#define STRING_SPLIT_OUT_MAX ((int64_t)1 << 26)

/* Python's str.split() whitespace, ASCII part (no Unicode spaces). */
static bool split_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

/* Splits s as Python's str.split(sep, maxsplit) does (sep NULL: runs of
 * whitespace, ends trimmed). With out NULL only counts; else stores each
 * piece's start and length. Returns the number of pieces. */
static int64_t split_one(const char *s, const char *sep, int64_t maxsplit, const char **start, size_t *len)
{
    int64_t n = 0;
    size_t ls = strlen(s);
    if (sep) {
        size_t lsep = strlen(sep);
        const char *p = s;
        for (;;) {
            const char *hit = maxsplit >= 0 && n >= maxsplit ? NULL : strstr(p, sep);
            const char *end = hit ? hit : s + ls;
            if (start) {
                start[n] = p;
                len[n] = (size_t)(end - p);
            }
            n++;
            if (!hit) return n;
            p = hit + lsep;
        }
    }
    const char *p = s, *e = s + ls;
    while (p < e && split_space(*p)) p++;
    while (p < e) {
        const char *q = p;
        if (maxsplit >= 0 && n >= maxsplit) {
            /* The rest, trailing whitespace kept, is the last piece. */
            q = e;
        } else {
            while (q < e && !split_space(*q)) q++;
        }
        if (start) {
            start[n] = p;
            len[n] = (size_t)(q - p);
        }
        n++;
        p = q;
        while (p < e && split_space(*p)) p++;
    }
    return n;
}

static mcp_status run_string_split(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is required");
    if (x->dtype != MCP_DTYPE_STRING)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must be strings, got %s", mcp_dtype_name(x->dtype));
    if (x->rank >= MCP_MAX_RANK)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' has rank %d, at most %d", x->rank, MCP_MAX_RANK - 1);
    const char *sep = mcp_kattr_string(ctx, "delimiter", "");
    if (!*sep) sep = NULL;
    int64_t maxsplit = mcp_kattr(ctx, "maxsplit") ? mcp_kattr_int(ctx, "maxsplit", -1) : -1;
    if (maxsplit < 0 && mcp_kattr(ctx, "maxsplit"))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'maxsplit' is %lld, must be >= 0", (long long)maxsplit);
    int64_t n = mcp_tensor_numel(x), most = 0;
    mcp_tensor *z = mcp_kout(ctx, 1, MCP_DTYPE_INT64, x->rank, x->dims);
    if (!z) return MCP_STATUS_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = split_one(((char *const *)x->data)[i], sep, maxsplit, NULL, NULL);
        ((int64_t *)z->data)[i] = k;
        most = k > most ? k : most;
    }
    /* The output pads every row to the longest split, so one string with many
     * delimiters among many strings asks for numel(X) x most slots, each
     * its own allocation (string tensors free every element, so padding
     * cannot share one empty string). Refuse rather than allocate that. */
    if (most > 0 && n > STRING_SPLIT_OUT_MAX / most)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "output 'Y' would hold %lld strings x %lld pieces, over the limit of %lld elements",
                         (long long)n, (long long)most, (long long)STRING_SPLIT_OUT_MAX);
    int64_t dims[MCP_MAX_RANK];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    dims[x->rank] = most;
    mcp_tensor *y = mcp_kout(ctx, 0, MCP_DTYPE_STRING, x->rank + 1, dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (most == 0) return MCP_STATUS_OK;
    const char **start = mcp_malloc(sizeof(char *) * (size_t)most);
    size_t *len = mcp_malloc(sizeof(size_t) * (size_t)most);
    mcp_status st = start && len ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n && st == MCP_STATUS_OK; i++) {
        int64_t k = split_one(((char *const *)x->data)[i], sep, maxsplit, start, len);
        for (int64_t j = 0; j < k && st == MCP_STATUS_OK; j++) st = mcp_tensor_set_string(y, i * most + j, start[j], len[j]);
    }
    mcp_free(start);
    mcp_free(len);
    return st == MCP_STATUS_OK ? st : mcp_kfail(ctx, st, "out of memory");
}

/* ---- RegexFullMatch ---- */

/*
 * Patterns are RE2 syntax; they run on POSIX extended regular expressions
 * (regcomp, C locale: bytes). The pattern is translated for the subset
 * where the two agree on whether a whole string matches, and anything
 * outside it is refused at load rather than answered differently:
 *   - ASCII patterns only;
 *   - \d \w \s and their negations become bracket classes, \n \t \r \f \v
 *     the characters, an escaped punctuation mark the mark itself;
 *   - `.` becomes "anything but newline" (RE2's default), (?:...) a group,
 *     and lazy quantifiers greedy ones (greediness cannot change whether a
 *     full match exists);
 *   - refused: other (?...) groups and flags, \b \A \z \p \Q \x and other
 *     escapes, backreferences, backslashes inside brackets, a quantifier
 *     with nothing to repeat, stacked quantifiers, repeat counts over 1000
 *     (RE2's limit), and `{` not starting a count;
 *   - refused as well, because glibc's regcomp expands every repeat into
 *     copies and its cost grows with them (measured, glibc 2.3x: 2,000
 *     chained optional copies such as (a?){1000}(a?){1000} take 0.5 s,
 *     20,000 alternatives 47 s, 20,000 nested groups overflow the stack):
 *     nested repeat counts whose product exceeds 1000 (RE2 refuses those
 *     too), over RX_SIZE_MAX atoms or RX_EPS_MAX optional copies and
 *     alternatives once repeats are expanded, and groups nested deeper
 *     than RX_DEPTH_MAX.
 * Where a pattern can match one arbitrary character (., [^...], \D \W \S),
 * bytes and code points differ on non-ASCII text, so such inputs fail the
 * run with a message instead of a wrong answer.
 */
typedef struct regex_state {
    regex_t re;
    bool any_char; /* the pattern can match one arbitrary character */
} regex_state;

#define RX_REPEAT_PRODUCT_MAX 1000
#define RX_SIZE_MAX 100000
#define RX_EPS_MAX 2000
#define RX_DEPTH_MAX 100

/* What a piece of the pattern costs regcomp once repeats are expanded:
 * atoms, optional copies and alternatives (the epsilon moves whose
 * closures grow quadratically), the largest product of nested repeat
 * counts, and whether it can match the empty string. */
typedef struct rx_cost {
    int64_t size, eps, prod;
    bool nullable;
} rx_cost;

/* One open group: its finished alternatives, the current alternative's
 * finished elements, and the last element, which a quantifier may still
 * repeat. */
typedef struct rx_frame {
    rx_cost done, alt, last;
    bool has_last;
} rx_frame;

static const rx_cost rx_atom = {1, 0, 1, false};

/* Adds the last element to the current alternative. */
static void rx_commit(rx_frame *f)
{
    if (!f->has_last) return;
    f->alt.size += f->last.size;
    f->alt.eps += f->last.eps;
    f->alt.prod = f->last.prod > f->alt.prod ? f->last.prod : f->alt.prod;
    f->alt.nullable = f->alt.nullable && f->last.nullable;
    f->has_last = false;
}

/* Ends the current alternative (bar: a '|' follows, one more epsilon). */
static void rx_end_alt(rx_frame *f, bool bar)
{
    rx_commit(f);
    f->done.size += f->alt.size;
    f->done.eps += f->alt.eps + (bar ? 1 : 0);
    f->done.prod = f->alt.prod > f->done.prod ? f->alt.prod : f->done.prod;
    f->done.nullable = f->done.nullable || f->alt.nullable;
    f->alt = (rx_cost){0, 0, 1, true};
}

static void rx_push_atom(rx_frame *f, rx_cost c)
{
    rx_commit(f);
    f->last = c;
    f->has_last = true;
}

/* Applies a repeat {lo, hi} (hi < 0: unbounded) to the last element the
 * way glibc expands it: lo copies, then hi - lo optional ones (or one
 * starred copy). RE2 multiplies nested counts by hi, or lo if unbounded. */
static void rx_repeat(rx_frame *f, int64_t lo, int64_t hi)
{
    rx_cost *c = &f->last;
    int64_t copies = hi < 0 ? lo + 1 : hi, optional = hi < 0 ? 1 : hi - lo, count = hi < 0 ? lo : hi;
    if (copies < 1) copies = 1;
    c->size *= copies;
    c->eps = c->eps * copies + optional;
    if (count > 0) c->prod *= count;
    c->nullable = c->nullable || lo == 0;
}

static mcp_status rx_check_cost(const rx_cost *c, mcp_err *err)
{
    if (c->prod > RX_REPEAT_PRODUCT_MAX)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                           "attribute 'pattern': nested repeat counts multiply to over %d (RE2's limit)",
                           RX_REPEAT_PRODUCT_MAX);
    if (c->size > RX_SIZE_MAX || c->eps > RX_EPS_MAX)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                           "attribute 'pattern' expands to over %d atoms or %d optional parts and alternatives "
                           "once repeats are counted",
                           RX_SIZE_MAX, RX_EPS_MAX);
    return MCP_STATUS_OK;
}

typedef struct rx_buf {
    char *s;
    size_t n, cap;
    bool oom;
} rx_buf;

static void rx_put(rx_buf *b, const char *s)
{
    size_t l = strlen(s);
    if (b->oom) return;
    if (b->n + l + 1 > b->cap) {
        size_t cap = (b->n + l + 1) * 2;
        char *p = mcp_realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, l + 1);
    b->n += l;
}

/* Translates pat into out, tracking the cost of each open group in fr
 * (RX_DEPTH_MAX + 1 frames). */
static mcp_status rx_translate_in(const char *pat, rx_buf *out, bool *any_char, rx_frame *fr, mcp_err *err)
{
    bool atom = false; /* the last thing emitted can take a quantifier */
    int depth = 0;
    mcp_status st;
    fr[0] = (rx_frame){.done = {0, 0, 1, false}, .alt = {0, 0, 1, true}};
    rx_put(out, "^(");
    for (const char *p = pat; *p; p++) {
        unsigned char c = (unsigned char)*p;
        char lit[3] = {(char)c, 0, 0};
        if (c >= 0x80 || (c < 0x20 && c != '\t' && c != '\n'))
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': only printable ASCII patterns are supported");
        switch (c) {
        case '\\': {
            char e = *++p;
            if (!e) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'pattern' ends in a backslash");
            const char *cls = NULL;
            switch (e) {
            case 'd': cls = "[0-9]"; break;
            case 'w': cls = "[0-9A-Za-z_]"; break;
            case 's': cls = "[\t\n\f\r ]"; break;
            case 'D': cls = "[^0-9]"; *any_char = true; break;
            case 'W': cls = "[^0-9A-Za-z_]"; *any_char = true; break;
            case 'S': cls = "[^\t\n\f\r ]"; *any_char = true; break;
            case 'n': cls = "\n"; break;
            case 't': cls = "\t"; break;
            case 'r': cls = "\r"; break;
            case 'f': cls = "\f"; break;
            case 'v': cls = "\v"; break;
            default:
                if (!((e >= '!' && e <= '/') || (e >= ':' && e <= '@') || (e >= '[' && e <= '`') || (e >= '{' && e <= '~')))
                    return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': escape '\\%c' is not supported", e);
                /* Metacharacters stay escaped; other marks are literal. */
                lit[0] = strchr(".[]{}()*+?^$|\\", e) ? '\\' : e;
                lit[1] = strchr(".[]{}()*+?^$|\\", e) ? e : 0;
                cls = lit;
            }
            rx_put(out, cls);
            rx_push_atom(&fr[depth], rx_atom);
            atom = true;
            break;
        }
        case '.':
            rx_put(out, "[^\n]");
            rx_push_atom(&fr[depth], rx_atom);
            *any_char = true;
            atom = true;
            break;
        case '[': {
            const char *q = p + 1;
            if (*q == '^') {
                *any_char = true;
                q++;
            }
            if (*q == ']') return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': ']' first in a class is not supported");
            for (; *q && *q != ']'; q++) {
                if (*q == '\\')
                    return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': backslashes inside [...] are not supported");
                if (*q == '[' && q[1] == ':') {
                    const char *e = strstr(q + 2, ":]");
                    if (!e) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'pattern' has an unclosed [: class");
                    q = e + 1;
                } else if ((unsigned char)*q >= 0x80 || (unsigned char)*q < 0x20) {
                    return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': only printable ASCII patterns are supported");
                }
            }
            if (*q != ']') return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'pattern' has an unclosed [");
            size_t l = (size_t)(q - p) + 1;
            char cls[256];
            if (l >= sizeof cls) return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern' has a class over 255 characters");
            memcpy(cls, p, l);
            cls[l] = 0;
            rx_put(out, cls);
            rx_push_atom(&fr[depth], rx_atom);
            p = q;
            atom = true;
            break;
        }
        case '(':
            if (p[1] == '?') {
                if (p[2] != ':')
                    return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': '(?' groups other than '(?:' are not supported");
                p += 2;
            }
            if (p[1] == ')') return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': empty groups are not supported");
            /* regcomp parses groups recursively: deep nesting overflows
             * the (thread's) stack. */
            if (depth == RX_DEPTH_MAX)
                return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern' nests groups deeper than %d",
                                   RX_DEPTH_MAX);
            rx_commit(&fr[depth]);
            depth++;
            fr[depth] = (rx_frame){.done = {0, 0, 1, false}, .alt = {0, 0, 1, true}};
            rx_put(out, "(");
            atom = false;
            break;
        case ')':
            if (depth == 0) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'pattern' has an unmatched ')'");
            rx_end_alt(&fr[depth], false);
            depth--;
            rx_push_atom(&fr[depth], fr[depth + 1].done);
            rx_put(out, ")");
            atom = true;
            break;
        case '|':
            if (p[1] == '|' || p[1] == ')' || p[1] == 0 || p == pat || p[-1] == '(' || p[-1] == '|')
                return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': empty alternatives are not supported");
            rx_end_alt(&fr[depth], true);
            rx_put(out, "|");
            atom = false;
            break;
        case '*':
        case '+':
        case '?':
        case '{': {
            if (!atom) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'pattern': '%c' has nothing to repeat", c);
            if (c == '{') {
                const char *q = p + 1;
                long lo = 0, hi = -1;
                if (*q < '0' || *q > '9')
                    return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': '{' must start a repeat count");
                while (*q >= '0' && *q <= '9' && lo <= 1000) lo = lo * 10 + (*q++ - '0');
                if (*q == ',') {
                    q++;
                    if (*q >= '0' && *q <= '9') {
                        hi = 0;
                        while (*q >= '0' && *q <= '9' && hi <= 1000) hi = hi * 10 + (*q++ - '0');
                    }
                } else {
                    hi = lo;
                }
                if (*q != '}' || lo > 1000 || hi > 1000 || (hi >= 0 && hi < lo))
                    return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': bad or too large repeat count");
                char rep[32];
                size_t l = (size_t)(q - p) + 1;
                if (l >= sizeof rep)
                    return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': repeat count is too long");
                memcpy(rep, p, l);
                rep[l] = 0;
                rx_put(out, rep);
                rx_repeat(&fr[depth], lo, hi);
                p = q;
            } else {
                rx_put(out, lit);
                rx_repeat(&fr[depth], c == '+' ? 1 : 0, c == '?' ? 1 : -1);
            }
            if (p[1] == '?') p++; /* lazy: the same full matches */
            if (p[1] == '*' || p[1] == '+' || p[1] == '?' || p[1] == '{')
                return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern': stacked repeat operators are not supported");
            atom = false;
            break;
        }
        case ']':
        case '}':
            rx_put(out, c == ']' ? "\\]" : "\\}");
            rx_push_atom(&fr[depth], rx_atom);
            atom = true;
            break;
        case '^':
        case '$':
            rx_put(out, lit);
            rx_push_atom(&fr[depth], rx_atom);
            atom = false;
            break;
        default:
            rx_put(out, lit);
            rx_push_atom(&fr[depth], rx_atom);
            atom = true;
        }
        /* Only the innermost open group changed; checking it after every
         * step also keeps the counts far from overflowing. */
        if ((st = rx_check_cost(&fr[depth].last, err)) != MCP_STATUS_OK ||
            (st = rx_check_cost(&fr[depth].alt, err)) != MCP_STATUS_OK ||
            (st = rx_check_cost(&fr[depth].done, err)) != MCP_STATUS_OK)
            return st;
    }
    if (depth != 0) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'pattern' has an unclosed '('");
    rx_end_alt(&fr[0], false);
    if ((st = rx_check_cost(&fr[0].done, err)) != MCP_STATUS_OK) return st;
    rx_put(out, ")$");
    return out->oom ? mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory") : MCP_STATUS_OK;
}

/* Translates pattern pat to a POSIX ERE in out (the caller frees out->s),
 * refusing what regcomp would answer differently or too slowly. */
static mcp_status rx_translate(const char *pat, rx_buf *out, bool *any_char, mcp_err *err)
{
    rx_frame *fr = mcp_malloc(sizeof *fr * (RX_DEPTH_MAX + 1));
    if (!fr) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = rx_translate_in(pat, out, any_char, fr, err);
    mcp_free(fr);
    return st;
}

static void regex_release(void *state)
{
    regex_state *s = state;
    if (!s) return;
    regfree(&s->re);
    mcp_free(s);
}

/* The `pattern` attribute, translated into b (the caller frees b->s). */
static mcp_status regex_translate(const mcp_node *node, rx_buf *b, bool *any_char, const char **pattern, mcp_err *err)
{
    const mcp_attr *a = mcp_node_attr(node, "pattern");
    if (!a || a->type != MCP_ATTR_STRING)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'pattern' is required");
    if (strlen(a->s) != a->s_len)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern' holds a NUL byte");
    *pattern = a->s;
    return rx_translate(a->s, b, any_char, err);
}

/* Compiles the pattern once, at load; the runs share the compiled form
 * (regexec only reads it). */
static mcp_status regex_prepare(const mcp_node *node, const mcp_graph *graph, void **state, mcp_err *err)
{
    (void)graph;
    *state = NULL;
    regex_state *s = mcp_calloc(1, sizeof *s);
    rx_buf b = {0};
    const char *pattern = "";
    if (!s) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = regex_translate(node, &b, &s->any_char, &pattern, err);
    if (st == MCP_STATUS_OK) {
        int rc = regcomp(&s->re, b.s, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char why[128];
            regerror(rc, &s->re, why, sizeof why);
            st = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute 'pattern' '%s' is not supported: %s", pattern, why);
        }
    }
    mcp_free(b.s);
    if (st != MCP_STATUS_OK) {
        mcp_free(s);
        return st;
    }
    *state = s;
    return MCP_STATUS_OK;
}

/* Translation only: what it refuses (syntax, sizes) fails the load here;
 * regcomp runs once, in regex_prepare. */
static mcp_status regex_check(const mcp_node *node, const mcp_graph *graph, mcp_err *err)
{
    (void)graph;
    rx_buf b = {0};
    bool any_char = false;
    const char *pattern = "";
    mcp_status st = regex_translate(node, &b, &any_char, &pattern, err);
    mcp_free(b.s);
    return st;
}

static mcp_status run_regex_full_match(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const regex_state *s = ctx->state;
    if (!s) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "pattern was not compiled at load");
    if (!x || x->dtype != MCP_DTYPE_STRING)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must be a string tensor");
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, MCP_DTYPE_BOOL, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        const char *str = ((char *const *)x->data)[i];
        if (s->any_char)
            for (const char *q = str; *q; q++)
                if ((unsigned char)*q >= 0x80)
                    return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                                     "element %lld is not ASCII and the pattern can match any one character "
                                     "(byte and code point matching differ)", (long long)i);
        ((uint8_t *)y->data)[i] = regexec(&s->re, str, 0, NULL, 0) == 0;
    }
    return MCP_STATUS_OK;
}

/* ---- kernel table ---- */

const mcp_kernel_def mcp__ref_newer_kernels[] = {
    {MCP_KERNEL_FIELDS("", "BitCast", 26, 0, run_bitcast, bitcast_check, NULL, NULL), .narrow_types = MCP_NARROW_ALL},
    MCP_KERNEL_ENTRY("", "Col2Im", 18, 0, run_col2im, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "CenterCropPad", 18, 0, run_center_crop_pad, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "AffineGrid", 20, 0, run_affine_grid, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "TensorScatter", 24, 0, run_tensor_scatter, tensor_scatter_check, NULL, NULL),
    MCP_KERNEL_ENTRY("", "StringConcat", 20, 0, run_string_concat, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "StringSplit", 20, 0, run_string_split, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "RegexFullMatch", 20, 0, run_regex_full_match, regex_check, regex_prepare, regex_release),
};
const int mcp__ref_newer_kernel_count = (int)(sizeof(mcp__ref_newer_kernels) / sizeof(mcp__ref_newer_kernels[0]));
