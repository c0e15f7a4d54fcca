/*
 * Reference kernels: index family (data movement by index).
 *
 * Gather, GatherElements, GatherND, Scatter, ScatterElements, ScatterND,
 * NonZero, Compress and Unique live here; Resize/Upsample in index_resize.c
 * and NonMaxSuppression in index_nms.c.
 *
 * The data-movement kernels work on raw elements (memcpy by element size, or
 * string duplication), so every dtype including STRING and bool moves
 * unchanged. Index tensors may be int32 or int64; negative indices count
 * from the end, and an index out of range fails with a message naming the
 * input.
 */
#include <string.h>

#include "ops/ref/index_util.h"

/* ---- shared helpers ---- */

mcp_status mcp__ref_index_copy(mcp_kernel_ctx *ctx, mcp_tensor *dst, int64_t di,
                               const mcp_tensor *src, int64_t si, int64_t n)
{
    if (n <= 0) return MCP_STATUS_OK;
    if (src->dtype == MCP_DTYPE_STRING) {
        char *const *s = (char *const *)src->data;
        for (int64_t k = 0; k < n; k++) {
            const char *p = s[si + k] ? s[si + k] : "";
            if (mcp_tensor_set_string(dst, di + k, p, strlen(p)) != MCP_STATUS_OK)
                return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory copying strings");
        }
        return MCP_STATUS_OK;
    }
    size_t es = (size_t)mcp_dtype_size(src->dtype);
    memcpy((char *)dst->data + (size_t)di * es, (const char *)src->data + (size_t)si * es,
           (size_t)n * es);
    return MCP_STATUS_OK;
}

static bool index_dtype_ok(const mcp_tensor *t)
{
    return t->dtype == MCP_DTYPE_INT32 || t->dtype == MCP_DTYPE_INT64;
}

static int64_t index_get(const mcp_tensor *t, int64_t i)
{
    if (t->dtype == MCP_DTYPE_INT32) return ((const int32_t *)t->data)[i];
    return ((const int64_t *)t->data)[i];
}

/* Reads index i of `ind`, wraps a negative value by len and checks the
 * range. On failure sets the error (naming `name`) and returns false. */
static bool index_resolve(mcp_kernel_ctx *ctx, const mcp_tensor *ind, const char *name, int64_t i,
                          int64_t len, int axis, int64_t *out)
{
    int64_t v = index_get(ind, i);
    if (v < -len || v >= len) {
        mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                  "input '%s' holds %lld, out of range [%lld, %lld) for axis %d of size %lld",
                  name, (long long)v, (long long)-len, (long long)len, axis, (long long)len);
        return false;
    }
    *out = v < 0 ? v + len : v;
    return true;
}

static bool same_shape(const mcp_tensor *a, const mcp_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

static int64_t dims_prod(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= dims[d];
    return p;
}

static mcp_status need_inputs(mcp_kernel_ctx *ctx, int n, const char *const *names)
{
    for (int i = 0; i < n; i++)
        if (!mcp_kin(ctx, i))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is missing", names[i]);
    return MCP_STATUS_OK;
}

/* Advances a row-major multi-index over dims; returns false after the last. */
static bool coords_next(int rank, const int64_t *dims, int64_t *c)
{
    for (int d = rank - 1; d >= 0; d--) {
        if (++c[d] < dims[d]) return true;
        c[d] = 0;
    }
    return false;
}

/* ---- Gather ---- */

static mcp_status gather_run(mcp_kernel_ctx *ctx)
{
    static const char *const names[] = {"data", "indices"};
    mcp_status st = need_inputs(ctx, 2, names);
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *data = mcp_kin(ctx, 0);
    const mcp_tensor *ind = mcp_kin(ctx, 1);
    if (data->rank < 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'data' must have rank >= 1");
    if (!index_dtype_ok(ind))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'indices' must be int32 or int64, not %s",
                         mcp_dtype_name(ind->dtype));
    int axis;
    if (!mcp_axis_normalize(mcp_kattr_int(ctx, "axis", 0), data->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' out of range for 'data' of rank %d", data->rank);
    int out_rank = data->rank - 1 + ind->rank;
    if (out_rank > MCP_MAX_RANK)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "output rank %d exceeds %d", out_rank,
                         MCP_MAX_RANK);
    int64_t dims[MCP_MAX_RANK];
    int r = 0;
    for (int d = 0; d < axis; d++) dims[r++] = data->dims[d];
    for (int d = 0; d < ind->rank; d++) dims[r++] = ind->dims[d];
    for (int d = axis + 1; d < data->rank; d++) dims[r++] = data->dims[d];

    int64_t len = data->dims[axis];
    int64_t outer = dims_prod(data->dims, 0, axis);
    int64_t inner = dims_prod(data->dims, axis + 1, data->rank);
    int64_t n_idx = mcp_tensor_numel(ind);
    for (int64_t j = 0; j < n_idx; j++) {
        int64_t v;
        if (!index_resolve(ctx, ind, "indices", j, len, axis, &v))
            return MCP_STATUS_INVALID_ARGUMENT;
    }
    mcp_tensor *out = mcp_kout(ctx, 0, data->dtype, out_rank, dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < n_idx; j++) {
            int64_t v = index_get(ind, j);
            if (v < 0) v += len;
            st = mcp__ref_index_copy(ctx, out, (o * n_idx + j) * inner, data, (o * len + v) * inner,
                                     inner);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    return MCP_STATUS_OK;
}

/* ---- GatherElements ---- */

/* Checks the shared shape rules of GatherElements / ScatterElements: same
 * rank as data and, off the axis, no dim larger than data's. */
static mcp_status elements_check(mcp_kernel_ctx *ctx, const mcp_tensor *data,
                                 const mcp_tensor *ind, int *axis)
{
    if (data->rank < 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'data' must have rank >= 1");
    if (!index_dtype_ok(ind))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'indices' must be int32 or int64, not %s",
                         mcp_dtype_name(ind->dtype));
    if (ind->rank != data->rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'indices' has rank %d but 'data' has rank %d", ind->rank,
                         data->rank);
    if (!mcp_axis_normalize(mcp_kattr_int(ctx, "axis", 0), data->rank, axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' out of range for 'data' of rank %d", data->rank);
    for (int d = 0; d < data->rank; d++) {
        if (d != *axis && ind->dims[d] > data->dims[d])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'indices' dim %d is %lld, larger than 'data' dim %lld", d,
                             (long long)ind->dims[d], (long long)data->dims[d]);
    }
    return MCP_STATUS_OK;
}

/* Element offset in data for the indices element at coords c whose value
 * along axis is v. */
static int64_t elements_offset(const mcp_tensor *data, const int64_t *c, int axis, int64_t v)
{
    int64_t off = 0;
    for (int d = 0; d < data->rank; d++) off = off * data->dims[d] + (d == axis ? v : c[d]);
    return off;
}

static mcp_status gather_elements_run(mcp_kernel_ctx *ctx)
{
    static const char *const names[] = {"data", "indices"};
    mcp_status st = need_inputs(ctx, 2, names);
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *data = mcp_kin(ctx, 0);
    const mcp_tensor *ind = mcp_kin(ctx, 1);
    int axis;
    st = elements_check(ctx, data, ind, &axis);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor *out = mcp_kout(ctx, 0, data->dtype, ind->rank, ind->dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(ind);
    if (n == 0) return MCP_STATUS_OK;
    int64_t c[MCP_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (!index_resolve(ctx, ind, "indices", i, data->dims[axis], axis, &v))
            return MCP_STATUS_INVALID_ARGUMENT;
        st = mcp__ref_index_copy(ctx, out, i, data, elements_offset(data, c, axis, v), 1);
        if (st != MCP_STATUS_OK) return st;
        coords_next(ind->rank, ind->dims, c);
    }
    return MCP_STATUS_OK;
}

/* ---- GatherND ---- */

static mcp_status gather_nd_run(mcp_kernel_ctx *ctx)
{
    static const char *const names[] = {"data", "indices"};
    mcp_status st = need_inputs(ctx, 2, names);
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *data = mcp_kin(ctx, 0);
    const mcp_tensor *ind = mcp_kin(ctx, 1);
    if (!index_dtype_ok(ind))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'indices' must be int32 or int64, not %s",
                         mcp_dtype_name(ind->dtype));
    int r = data->rank, q = ind->rank;
    if (r < 1 || q < 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'data' and 'indices' must have rank >= 1");
    int64_t b64 = mcp_kattr_int(ctx, "batch_dims", 0);
    if (b64 < 0 || b64 >= q || b64 >= r)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'batch_dims' %lld must be in [0, min(rank(data), "
                         "rank(indices)))",
                         (long long)b64);
    int b = (int)b64;
    int64_t k = ind->dims[q - 1];
    if (k < 0 || k > r - b)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'indices' last dim %lld exceeds rank(data) - batch_dims = %d",
                         (long long)k, r - b);
    for (int d = 0; d < b; d++)
        if (data->dims[d] != ind->dims[d])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "batch dim %d of 'indices' (%lld) differs from 'data' (%lld)", d,
                             (long long)ind->dims[d], (long long)data->dims[d]);
    int out_rank = q - 1 + r - b - (int)k;
    if (out_rank > MCP_MAX_RANK)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "output rank %d exceeds %d", out_rank,
                         MCP_MAX_RANK);
    int64_t dims[MCP_MAX_RANK];
    int o = 0;
    for (int d = 0; d < q - 1; d++) dims[o++] = ind->dims[d];
    for (int d = b + (int)k; d < r; d++) dims[o++] = data->dims[d];
    mcp_tensor *out = mcp_kout(ctx, 0, data->dtype, out_rank, dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;

    int64_t strides[MCP_MAX_RANK];
    mcp_contiguous_strides(r, data->dims, strides);
    int64_t n_batch = dims_prod(ind->dims, 0, b);
    int64_t per_batch = dims_prod(ind->dims, b, q - 1);
    int64_t slice = dims_prod(data->dims, b + (int)k, r);
    int64_t batch_stride = dims_prod(data->dims, b, r);
    for (int64_t bi = 0; bi < n_batch; bi++) {
        for (int64_t j = 0; j < per_batch; j++) {
            int64_t t = bi * per_batch + j;
            int64_t off = bi * batch_stride;
            for (int64_t e = 0; e < k; e++) {
                int64_t v;
                int d = b + (int)e;
                if (!index_resolve(ctx, ind, "indices", t * k + e, data->dims[d], d, &v))
                    return MCP_STATUS_INVALID_ARGUMENT;
                off += v * strides[d];
            }
            st = mcp__ref_index_copy(ctx, out, t * slice, data, off, slice);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    return MCP_STATUS_OK;
}

/* ---- Scatter reductions ---- */

typedef enum scatter_red {
    SCATTER_RED_NONE = 0,
    SCATTER_RED_ADD,
    SCATTER_RED_MUL,
    SCATTER_RED_MAX,
    SCATTER_RED_MIN,
} scatter_red;

static mcp_status scatter_reduction(mcp_kernel_ctx *ctx, mcp_dtype dtype, scatter_red *out)
{
    const char *s = mcp_kattr_string(ctx, "reduction", "none");
    if (strcmp(s, "none") == 0) *out = SCATTER_RED_NONE;
    else if (strcmp(s, "add") == 0) *out = SCATTER_RED_ADD;
    else if (strcmp(s, "mul") == 0) *out = SCATTER_RED_MUL;
    else if (strcmp(s, "max") == 0) *out = SCATTER_RED_MAX;
    else if (strcmp(s, "min") == 0) *out = SCATTER_RED_MIN;
    else
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'reduction' '%s' is unknown",
                         s);
    if (*out != SCATTER_RED_NONE && !mcp_dtype_is_numeric(dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                         "attribute 'reduction' '%s' needs numeric 'data', not %s", s,
                         mcp_dtype_name(dtype));
    return MCP_STATUS_OK;
}

/* Integer reduction in the element's own type; add and mul wrap around
 * (computed in uint64 so signed overflow is not undefined). */
#define MCP__SCATTER_RED_INT(T)                                               \
    do {                                                                      \
        T *o_ = (T *)out->data + oi;                                          \
        T u_ = ((const T *)upd->data)[ui];                                    \
        switch (red) {                                                        \
        case SCATTER_RED_ADD: *o_ = (T)((uint64_t)*o_ + (uint64_t)u_); break; \
        case SCATTER_RED_MUL: *o_ = (T)((uint64_t)*o_ * (uint64_t)u_); break; \
        case SCATTER_RED_MAX: if (u_ > *o_) *o_ = u_; break;                  \
        case SCATTER_RED_MIN: if (u_ < *o_) *o_ = u_; break;                  \
        default: *o_ = u_; break;                                             \
        }                                                                     \
    } while (0)

/* Combines updates element ui into out element oi (both of the same dtype). */
static void scatter_combine(mcp_tensor *out, int64_t oi, const mcp_tensor *upd, int64_t ui,
                            scatter_red red)
{
    switch (out->dtype) {
    case MCP_DTYPE_INT8: MCP__SCATTER_RED_INT(int8_t); return;
    case MCP_DTYPE_UINT8: MCP__SCATTER_RED_INT(uint8_t); return;
    case MCP_DTYPE_INT16: MCP__SCATTER_RED_INT(int16_t); return;
    case MCP_DTYPE_UINT16: MCP__SCATTER_RED_INT(uint16_t); return;
    case MCP_DTYPE_INT32: MCP__SCATTER_RED_INT(int32_t); return;
    case MCP_DTYPE_UINT32: MCP__SCATTER_RED_INT(uint32_t); return;
    case MCP_DTYPE_INT64: MCP__SCATTER_RED_INT(int64_t); return;
    case MCP_DTYPE_UINT64: MCP__SCATTER_RED_INT(uint64_t); return;
    case MCP_DTYPE_BOOL: {
        uint8_t *o = (uint8_t *)out->data + oi;
        uint8_t u = ((const uint8_t *)upd->data)[ui] != 0;
        bool acc = *o != 0;
        if (red == SCATTER_RED_ADD || red == SCATTER_RED_MAX) acc = acc || u;
        else if (red == SCATTER_RED_MUL || red == SCATTER_RED_MIN) acc = acc && u;
        else acc = u;
        *o = acc ? 1 : 0;
        return;
    }
    default: {
        /* Floats: one rounding from double is exact for float and the
         * 16-bit formats, since double holds their sums and products. */
        double a = mcp_tensor_get_f64(out, oi);
        double u = mcp_tensor_get_f64(upd, ui);
        switch (red) {
        case SCATTER_RED_ADD: a = a + u; break;
        case SCATTER_RED_MUL: a = a * u; break;
        case SCATTER_RED_MAX: a = u > a ? u : a; break;
        case SCATTER_RED_MIN: a = u < a ? u : a; break;
        default: a = u; break;
        }
        mcp_tensor_set_f64(out, oi, a);
        return;
    }
    }
}

static mcp_status scatter_put(mcp_kernel_ctx *ctx, mcp_tensor *out, int64_t oi,
                              const mcp_tensor *upd, int64_t ui, scatter_red red)
{
    if (red == SCATTER_RED_NONE) return mcp__ref_index_copy(ctx, out, oi, upd, ui, 1);
    scatter_combine(out, oi, upd, ui, red);
    return MCP_STATUS_OK;
}

/* ---- Scatter / ScatterElements ---- */

static mcp_status scatter_elements_run(mcp_kernel_ctx *ctx)
{
    static const char *const names[] = {"data", "indices", "updates"};
    mcp_status st = need_inputs(ctx, 3, names);
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *data = mcp_kin(ctx, 0);
    const mcp_tensor *ind = mcp_kin(ctx, 1);
    const mcp_tensor *upd = mcp_kin(ctx, 2);
    int axis;
    st = elements_check(ctx, data, ind, &axis);
    if (st != MCP_STATUS_OK) return st;
    if (!same_shape(ind, upd))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'updates' must have the shape of 'indices'");
    if (upd->dtype != data->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'updates' is %s but 'data' is %s", mcp_dtype_name(upd->dtype),
                         mcp_dtype_name(data->dtype));
    scatter_red red = SCATTER_RED_NONE;
    if (strcmp(ctx->node->op_type, "Scatter") != 0) {
        st = scatter_reduction(ctx, data->dtype, &red);
        if (st != MCP_STATUS_OK) return st;
    }
    mcp_tensor *out = mcp_kout(ctx, 0, data->dtype, data->rank, data->dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    st = mcp__ref_index_copy(ctx, out, 0, data, 0, mcp_tensor_numel(data));
    if (st != MCP_STATUS_OK) return st;
    int64_t n = mcp_tensor_numel(ind);
    if (n == 0) return MCP_STATUS_OK;
    int64_t c[MCP_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (!index_resolve(ctx, ind, "indices", i, data->dims[axis], axis, &v))
            return MCP_STATUS_INVALID_ARGUMENT;
        st = scatter_put(ctx, out, elements_offset(data, c, axis, v), upd, i, red);
        if (st != MCP_STATUS_OK) return st;
        coords_next(ind->rank, ind->dims, c);
    }
    return MCP_STATUS_OK;
}

/* ---- ScatterND ---- */

static mcp_status scatter_nd_run(mcp_kernel_ctx *ctx)
{
    static const char *const names[] = {"data", "indices", "updates"};
    mcp_status st = need_inputs(ctx, 3, names);
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *data = mcp_kin(ctx, 0);
    const mcp_tensor *ind = mcp_kin(ctx, 1);
    const mcp_tensor *upd = mcp_kin(ctx, 2);
    if (!index_dtype_ok(ind))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'indices' must be int32 or int64, not %s",
                         mcp_dtype_name(ind->dtype));
    int r = data->rank, q = ind->rank;
    if (r < 1 || q < 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'data' and 'indices' must have rank >= 1");
    int64_t k = ind->dims[q - 1];
    if (k < 0 || k > r)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'indices' last dim %lld exceeds rank(data) %d", (long long)k, r);
    if (upd->dtype != data->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'updates' is %s but 'data' is %s", mcp_dtype_name(upd->dtype),
                         mcp_dtype_name(data->dtype));
    /* updates.shape == indices.shape[:-1] + data.shape[k:] */
    bool ok = upd->rank == q - 1 + r - (int)k;
    for (int d = 0; ok && d < q - 1; d++) ok = upd->dims[d] == ind->dims[d];
    for (int d = (int)k; ok && d < r; d++) ok = upd->dims[q - 1 + d - (int)k] == data->dims[d];
    if (!ok)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'updates' must have shape indices.shape[:-1] + data.shape[k:]");
    scatter_red red;
    st = scatter_reduction(ctx, data->dtype, &red);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor *out = mcp_kout(ctx, 0, data->dtype, data->rank, data->dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    st = mcp__ref_index_copy(ctx, out, 0, data, 0, mcp_tensor_numel(data));
    if (st != MCP_STATUS_OK) return st;

    int64_t strides[MCP_MAX_RANK];
    mcp_contiguous_strides(r, data->dims, strides);
    int64_t n = dims_prod(ind->dims, 0, q - 1);
    int64_t slice = dims_prod(data->dims, (int)k, r);
    for (int64_t j = 0; j < n; j++) {
        int64_t off = 0;
        for (int64_t e = 0; e < k; e++) {
            int64_t v;
            if (!index_resolve(ctx, ind, "indices", j * k + e, data->dims[e], (int)e, &v))
                return MCP_STATUS_INVALID_ARGUMENT;
            off += v * strides[e];
        }
        if (red == SCATTER_RED_NONE) {
            st = mcp__ref_index_copy(ctx, out, off, upd, j * slice, slice);
            if (st != MCP_STATUS_OK) return st;
        } else {
            for (int64_t s = 0; s < slice; s++)
                scatter_combine(out, off + s, upd, j * slice + s, red);
        }
    }
    return MCP_STATUS_OK;
}

/* ---- NonZero ---- */

static bool elem_nonzero(const mcp_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case MCP_DTYPE_STRING: {
        const char *s = ((char *const *)t->data)[i];
        return s && s[0];
    }
    case MCP_DTYPE_INT64:
    case MCP_DTYPE_UINT64: return ((const int64_t *)t->data)[i] != 0;
    case MCP_DTYPE_COMPLEX64:
    case MCP_DTYPE_COMPLEX128: {
        mcp_dtype part = t->dtype == MCP_DTYPE_COMPLEX64 ? MCP_DTYPE_FLOAT : MCP_DTYPE_DOUBLE;
        return mcp_elem_get_f64(part, t->data, 2 * i) != 0.0 ||
               mcp_elem_get_f64(part, t->data, 2 * i + 1) != 0.0;
    }
    default: return mcp_tensor_get_f64(t, i) != 0.0;
    }
}

static mcp_status nonzero_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");
    if (!mcp_dtype_is_numeric(x->dtype) && x->dtype != MCP_DTYPE_STRING &&
        x->dtype != MCP_DTYPE_COMPLEX64 && x->dtype != MCP_DTYPE_COMPLEX128)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' of type %s is not supported",
                         mcp_dtype_name(x->dtype));
    int64_t n = mcp_tensor_numel(x);
    int64_t nnz = 0;
    for (int64_t i = 0; i < n; i++) nnz += elem_nonzero(x, i);
    /* A scalar behaves like a one-element vector (numpy's nonzero does). */
    int rank = x->rank > 0 ? x->rank : 1;
    int64_t dims[2] = {rank, nnz};
    mcp_tensor *out = mcp_kout(ctx, 0, MCP_DTYPE_INT64, 2, dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t *o = (int64_t *)out->data;
    int64_t c[MCP_MAX_RANK] = {0};
    int64_t col = 0;
    for (int64_t i = 0; i < n; i++) {
        if (elem_nonzero(x, i)) {
            for (int d = 0; d < x->rank; d++) o[d * nnz + col] = c[d];
            col++;
        }
        coords_next(x->rank, x->dims, c);
    }
    return MCP_STATUS_OK;
}

/* ---- Compress ---- */

static mcp_status compress_run(mcp_kernel_ctx *ctx)
{
    static const char *const names[] = {"input", "condition"};
    mcp_status st = need_inputs(ctx, 2, names);
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const mcp_tensor *cond = mcp_kin(ctx, 1);
    if (cond->rank != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'condition' must be 1-D, not rank %d", cond->rank);
    if (!mcp_dtype_is_numeric(cond->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'condition' must be bool, not %s",
                         mcp_dtype_name(cond->dtype));
    bool has_axis = mcp_kattr(ctx, "axis") != NULL;
    int axis = 0;
    int64_t outer, len, inner;
    if (has_axis) {
        if (!mcp_axis_normalize(mcp_kattr_int(ctx, "axis", 0), x->rank, &axis))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'axis' out of range for 'input' of rank %d", x->rank);
        outer = dims_prod(x->dims, 0, axis);
        len = x->dims[axis];
        inner = dims_prod(x->dims, axis + 1, x->rank);
    } else {
        outer = 1;
        len = mcp_tensor_numel(x);
        inner = 1;
    }
    int64_t clen = cond->dims[0];
    int64_t kept = 0;
    for (int64_t i = 0; i < clen; i++) {
        if (mcp_tensor_get_f64(cond, i) == 0.0) continue;
        if (i >= len)
            return mcp_kfail(
                ctx, MCP_STATUS_INVALID_ARGUMENT,
                "input 'condition' is true at position %lld, beyond the length %lld of 'input'",
                (long long)i, (long long)len);
        kept++;
    }
    int64_t dims[MCP_MAX_RANK];
    int rank;
    if (has_axis) {
        rank = x->rank;
        for (int d = 0; d < rank; d++) dims[d] = x->dims[d];
        dims[axis] = kept;
    } else {
        rank = 1;
        dims[0] = kept;
    }
    mcp_tensor *out = mcp_kout(ctx, 0, x->dtype, rank, dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    for (int64_t o = 0; o < outer; o++) {
        int64_t j = 0;
        for (int64_t i = 0; i < clen && i < len; i++) {
            if (mcp_tensor_get_f64(cond, i) == 0.0) continue;
            st = mcp__ref_index_copy(ctx, out, (o * kept + j) * inner, x, (o * len + i) * inner,
                                     inner);
            if (st != MCP_STATUS_OK) return st;
            j++;
        }
    }
    return MCP_STATUS_OK;
}

/* ---- Unique ---- */

/* Three-way comparison of elements a and b of t. NaNs sort last and equal
 * each other, so they form one group. */
#define MCP__CMP_TYPED(T)                                                     \
    do {                                                                      \
        T x_ = ((const T *)t->data)[a], y_ = ((const T *)t->data)[b];         \
        return x_ < y_ ? -1 : (x_ > y_ ? 1 : 0);                              \
    } while (0)

static int elem_cmp(const mcp_tensor *t, int64_t a, int64_t b)
{
    switch (t->dtype) {
    case MCP_DTYPE_STRING: {
        const char *x = ((char *const *)t->data)[a], *y = ((char *const *)t->data)[b];
        int c = strcmp(x ? x : "", y ? y : "");
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    case MCP_DTYPE_INT8: MCP__CMP_TYPED(int8_t);
    case MCP_DTYPE_UINT8: MCP__CMP_TYPED(uint8_t);
    case MCP_DTYPE_BOOL: MCP__CMP_TYPED(uint8_t);
    case MCP_DTYPE_INT16: MCP__CMP_TYPED(int16_t);
    case MCP_DTYPE_UINT16: MCP__CMP_TYPED(uint16_t);
    case MCP_DTYPE_INT32: MCP__CMP_TYPED(int32_t);
    case MCP_DTYPE_UINT32: MCP__CMP_TYPED(uint32_t);
    case MCP_DTYPE_INT64: MCP__CMP_TYPED(int64_t);
    case MCP_DTYPE_UINT64: MCP__CMP_TYPED(uint64_t);
    default: {
        double x = mcp_tensor_get_f64(t, a), y = mcp_tensor_get_f64(t, b);
        bool xn = x != x, yn = y != y;
        if (xn || yn) return xn && yn ? 0 : (xn ? 1 : -1);
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    }
}

typedef struct unique_view {
    const mcp_tensor *x;
    int64_t outer, len, inner;
} unique_view;

/* Compares slices a and b along the axis, lexicographically in row-major
 * order of the remaining dims (numpy's unique with axis). */
static int slice_cmp(const unique_view *v, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < v->outer; o++) {
        int64_t base = o * v->len;
        for (int64_t i = 0; i < v->inner; i++) {
            int c = elem_cmp(v->x, (base + a) * v->inner + i, (base + b) * v->inner + i);
            if (c) return c;
        }
    }
    return 0;
}

/* Stable merge sort of idx[0..n) by slice order; tmp has room for n. */
static void slice_sort(const unique_view *v, int64_t *idx, int64_t *tmp, int64_t n)
{
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = slice_cmp(v, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof(*idx));
    }
}

static mcp_status unique_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");
    bool sorted = mcp_kattr_int(ctx, "sorted", 1) != 0;
    bool has_axis = mcp_kattr(ctx, "axis") != NULL;
    unique_view v = {x, 1, mcp_tensor_numel(x), 1};
    int axis = 0;
    if (has_axis) {
        if (!mcp_axis_normalize(mcp_kattr_int(ctx, "axis", 0), x->rank, &axis))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'axis' out of range for 'X' of rank %d", x->rank);
        v.outer = dims_prod(x->dims, 0, axis);
        v.len = x->dims[axis];
        v.inner = dims_prod(x->dims, axis + 1, x->rank);
    }
    int64_t n = v.len;
    size_t cnt = n > 0 ? (size_t)n : 1;
    /* order: slices sorted; tmp: sort scratch, then group ids; first/count
     * per group; rank: output position per group. */
    int64_t *order = mcp_malloc(cnt * sizeof(int64_t));
    int64_t *tmp = mcp_malloc(cnt * sizeof(int64_t));
    int64_t *first = mcp_malloc(cnt * sizeof(int64_t));
    int64_t *count = mcp_malloc(cnt * sizeof(int64_t));
    int64_t *pos = mcp_malloc(cnt * sizeof(int64_t));
    mcp_status st = MCP_STATUS_OK;
    if (!order || !tmp || !first || !count || !pos) {
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory for %lld slices",
                       (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) order[i] = i;
    slice_sort(&v, order, tmp, n);

    /* Group equal neighbours. tmp[slice] = group id; groups numbered in
     * sorted order; the stable sort puts each group's first occurrence
     * first. */
    int64_t ng = 0;
    for (int64_t s = 0; s < n; s++) {
        if (s == 0 || slice_cmp(&v, order[s - 1], order[s]) != 0) {
            first[ng] = order[s];
            count[ng] = 0;
            ng++;
        }
        count[ng - 1]++;
        tmp[order[s]] = ng - 1;
    }
    /* pos[g]: output position of group g. Unsorted output lists groups by
     * first occurrence: walk the input and number groups as they appear. */
    if (sorted) {
        for (int64_t g = 0; g < ng; g++) pos[g] = g;
    } else {
        for (int64_t g = 0; g < ng; g++) pos[g] = -1;
        int64_t next = 0;
        for (int64_t i = 0; i < n; i++)
            if (pos[tmp[i]] < 0) pos[tmp[i]] = next++;
    }

    int64_t ydims[MCP_MAX_RANK];
    int yrank;
    if (has_axis) {
        yrank = x->rank;
        for (int d = 0; d < yrank; d++) ydims[d] = x->dims[d];
        ydims[axis] = ng;
    } else {
        yrank = 1;
        ydims[0] = ng;
    }
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, yrank, ydims);
    if (!y) {
        st = MCP_STATUS_OUT_OF_MEMORY;
        goto done;
    }
    for (int64_t g = 0; g < ng && st == MCP_STATUS_OK; g++) {
        for (int64_t o = 0; o < v.outer && st == MCP_STATUS_OK; o++)
            st = mcp__ref_index_copy(ctx, y, (o * ng + pos[g]) * v.inner, x,
                                     (o * v.len + first[g]) * v.inner, v.inner);
    }
    if (st != MCP_STATUS_OK) goto done;
    int64_t gdim = ng, ndim = n;
    mcp_tensor *t_idx = ctx->n_outputs > 1 ? mcp_kout(ctx, 1, MCP_DTYPE_INT64, 1, &gdim) : NULL;
    mcp_tensor *t_inv = ctx->n_outputs > 2 ? mcp_kout(ctx, 2, MCP_DTYPE_INT64, 1, &ndim) : NULL;
    mcp_tensor *t_cnt = ctx->n_outputs > 3 ? mcp_kout(ctx, 3, MCP_DTYPE_INT64, 1, &gdim) : NULL;
    if ((ctx->n_outputs > 1 && !t_idx) || (ctx->n_outputs > 2 && !t_inv) ||
        (ctx->n_outputs > 3 && !t_cnt)) {
        st = MCP_STATUS_OUT_OF_MEMORY;
        goto done;
    }
    for (int64_t g = 0; g < ng; g++) {
        if (t_idx) ((int64_t *)t_idx->data)[pos[g]] = first[g];
        if (t_cnt) ((int64_t *)t_cnt->data)[pos[g]] = count[g];
    }
    if (t_inv)
        for (int64_t i = 0; i < n; i++) ((int64_t *)t_inv->data)[i] = pos[tmp[i]];
done:
    mcp_free(order);
    mcp_free(tmp);
    mcp_free(first);
    mcp_free(count);
    mcp_free(pos);
    return st;
}

/* ---- table ---- */

const mcp_kernel_def mcp__ref_index_kernels[] = {
    MCP_KERNEL_ENTRY("", "Gather", 1, 0, gather_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "GatherElements", 11, 0, gather_elements_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "GatherND", 11, 0, gather_nd_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Scatter", 9, 0, scatter_elements_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ScatterElements", 11, 0, scatter_elements_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ScatterND", 11, 0, scatter_nd_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "NonZero", 9, 0, nonzero_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Compress", 9, 0, compress_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Unique", 11, 0, unique_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Resize", 10, 0, mcp__ref_index_resize_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Upsample", 7, 0, mcp__ref_index_upsample_run, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "NonMaxSuppression", 10, 0, mcp__ref_index_nms_run, NULL, NULL, NULL),
};
const int mcp__ref_index_kernel_count =
    (int)(sizeof(mcp__ref_index_kernels) / sizeof(mcp__ref_index_kernels[0]));
