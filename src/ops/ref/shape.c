/*
 * Reference kernels: shape family (data movement without arithmetic).
 *
 * Most ops here are expressed as a strided copy (copy_view): the output is
 * walked in row-major order and every output dimension carries a stride into
 * the input. Transpose permutes strides, Slice scales them by the step,
 * Expand zeroes broadcast ones, Tile and DepthToSpace use a higher-rank view
 * of the same memory. Every dtype works, strings included: string elements
 * are duplicated through mcp_tensor_set_string, everything else is memcpy.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops/ref/ref.h"

/* Views may split every dimension in two (Tile), hence twice the rank. */
#define VIEW_MAX_RANK (2 * MCP_MAX_RANK)

/* ---- small helpers ---- */

/* Allocates output i after checking the shape, so that a bad shape is
 * reported as bad input and only a failed allocation as OOM; zero-filled
 * when `zero`. */
static mcp_status out_tensor_fill(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank,
                                  const int64_t *dims, bool zero, mcp_tensor **out)
{
    int64_t numel = 1;
    *out = NULL;
    if (rank < 0 || rank > MCP_MAX_RANK)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "output %d: rank %d exceeds %d", i,
                         rank, MCP_MAX_RANK);
    for (int k = 0; k < rank; k++) {
        if (dims[k] < 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "output %d: negative dimension %lld", i, (long long)dims[k]);
        if (dims[k] != 0 && numel > INT64_MAX / 16 / dims[k])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "output %d: shape too large", i);
        numel *= dims[k];
    }
    *out = zero ? mcp_kout(ctx, i, dtype, rank, dims) : mcp_kout_uninit(ctx, i, dtype, rank, dims);
    return *out ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;
}

/* Allocates output i (zero-filled) after checking the shape, so that a bad
 * shape is reported as bad input and only a failed allocation as OOM. */
static mcp_status out_tensor(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank,
                             const int64_t *dims, mcp_tensor **out)
{
    return out_tensor_fill(ctx, i, dtype, rank, dims, true, out);
}

/* As out_tensor, for a kernel that writes every element: planned memory is
 * not zeroed first. */
static mcp_status out_tensor_uninit(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank,
                                    const int64_t *dims, mcp_tensor **out)
{
    return out_tensor_fill(ctx, i, dtype, rank, dims, false, out);
}

static mcp_status need_input(mcp_kernel_ctx *ctx, int i, const char *name,
                             const mcp_tensor **out)
{
    *out = mcp_kin(ctx, i);
    if (!*out)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is missing", name);
    if ((*out)->dtype != MCP_DTYPE_STRING && mcp_dtype_size((*out)->dtype) == 0)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input '%s' has unsupported dtype %s",
                         name, mcp_dtype_name((*out)->dtype));
    return MCP_STATUS_OK;
}

/* As need_input, also for the packed sub-byte types (int4, uint4,
 * float4e2m1, int2, uint2): for the kernels that move their bytes whole
 * (Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze); the others address
 * elements by bytes and refuse them here. */
static mcp_status need_input_packed(mcp_kernel_ctx *ctx, int i, const char *name, const mcp_tensor **out)
{
    *out = mcp_kin(ctx, i);
    if (*out && mcp_dtype_is_packed((*out)->dtype)) return MCP_STATUS_OK;
    return need_input(ctx, i, name, out);
}

/* Reads a 1-D (or scalar) integer tensor into vals (at most cap values). */
static mcp_status read_ints(mcp_kernel_ctx *ctx, const mcp_tensor *t, const char *name,
                            int64_t cap, int64_t *vals, int64_t *n)
{
    *n = 0;
    if (!mcp_dtype_is_integer(t->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must be an integer tensor, got %s", name,
                         mcp_dtype_name(t->dtype));
    if (t->rank > 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must be 1-D, got rank %d",
                         name, t->rank);
    int64_t count = mcp_tensor_numel(t);
    if (count > cap)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' has %lld values, at most %lld allowed", name,
                         (long long)count, (long long)cap);
    for (int64_t i = 0; i < count; i++) vals[i] = mcp_tensor_get_i64(t, i);
    *n = count;
    return MCP_STATUS_OK;
}

/* Reads a one-element integer tensor. */
static mcp_status read_scalar_int(mcp_kernel_ctx *ctx, const mcp_tensor *t, const char *name,
                                  int64_t *v)
{
    *v = 0;
    if (!mcp_dtype_is_integer(t->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must be an integer tensor, got %s", name,
                         mcp_dtype_name(t->dtype));
    if (mcp_tensor_numel(t) != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must hold exactly one value", name);
    *v = mcp_tensor_get_i64(t, 0);
    return MCP_STATUS_OK;
}

/* Copies n consecutive elements src[si..] to dst[di..] (same dtype). */
static mcp_status copy_elems(mcp_tensor *dst, int64_t di, const mcp_tensor *src, int64_t si,
                             int64_t n)
{
    if (n <= 0) return MCP_STATUS_OK;
    if (dst->dtype == MCP_DTYPE_STRING) {
        char *const *s = (char *const *)src->data;
        for (int64_t i = 0; i < n; i++) {
            const char *e = s[si + i] ? s[si + i] : "";
            mcp_status st = mcp_tensor_set_string(dst, di + i, e, strlen(e));
            if (st != MCP_STATUS_OK) return st;
        }
        return MCP_STATUS_OK;
    }
    if (mcp_dtype_is_packed(dst->dtype)) {
        int bits = mcp_dtype_bits(dst->dtype);
        if (di == 0 && si == 0) {
            memcpy(dst->data, src->data, mcp_dtype_nbytes(dst->dtype, n));
        } else {
            for (int64_t i = 0; i < n; i++)
                mcp_packed_set(dst->data, bits, di + i, mcp_packed_get(src->data, bits, si + i));
        }
        return MCP_STATUS_OK;
    }
    size_t es = (size_t)mcp_dtype_size(dst->dtype);
    memcpy((char *)dst->data + (size_t)di * es, (const char *)src->data + (size_t)si * es,
           (size_t)n * es);
    return MCP_STATUS_OK;
}

/* Writes element si of src into dst[di..di+n). */
static mcp_status fill_elems(mcp_tensor *dst, int64_t di, int64_t n, const mcp_tensor *src,
                             int64_t si)
{
    if (n <= 0) return MCP_STATUS_OK;
    if (dst->dtype == MCP_DTYPE_STRING) {
        const char *e = ((char *const *)src->data)[si];
        if (!e) e = "";
        size_t len = strlen(e);
        for (int64_t i = 0; i < n; i++) {
            mcp_status st = mcp_tensor_set_string(dst, di + i, e, len);
            if (st != MCP_STATUS_OK) return st;
        }
        return MCP_STATUS_OK;
    }
    size_t es = (size_t)mcp_dtype_size(dst->dtype);
    const char *v = (const char *)src->data + (size_t)si * es;
    char *d = (char *)dst->data + (size_t)di * es;
    for (int64_t i = 0; i < n; i++) memcpy(d + (size_t)i * es, v, es);
    return MCP_STATUS_OK;
}

/*
 * Strided copy: for every index (i_0..i_{r-1}) within dims,
 *   dst[doff + sum i_k * dst_st[k]] = src[soff + sum i_k * src_st[k]].
 * Strides are in elements and may be zero or negative.
 */
static mcp_status copy_view(mcp_tensor *dst, int64_t doff, const int64_t *dst_st,
                            const mcp_tensor *src, int64_t soff, const int64_t *src_st,
                            int rank, const int64_t *dims)
{
    int64_t idx[VIEW_MAX_RANK] = {0};
    if (rank == 0) return copy_elems(dst, doff, src, soff, 1);
    for (int k = 0; k < rank; k++)
        if (dims[k] == 0) return MCP_STATUS_OK;
    int last = rank - 1;
    int64_t n = dims[last], ds = dst_st[last], ss = src_st[last];
    for (;;) {
        mcp_status st = MCP_STATUS_OK;
        if (ds == 1 && ss == 1) {
            st = copy_elems(dst, doff, src, soff, n);
        } else {
            for (int64_t j = 0; j < n && st == MCP_STATUS_OK; j++)
                st = copy_elems(dst, doff + j * ds, src, soff + j * ss, 1);
        }
        if (st != MCP_STATUS_OK) return st;
        int k = last - 1;
        for (; k >= 0; k--) {
            idx[k]++;
            doff += dst_st[k];
            soff += src_st[k];
            if (idx[k] < dims[k]) break;
            doff -= dims[k] * dst_st[k];
            soff -= dims[k] * src_st[k];
            idx[k] = 0;
        }
        if (k < 0) return MCP_STATUS_OK;
    }
}

static void contiguous_strides(int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int k = rank - 1; k >= 0; k--) {
        st[k] = s;
        s *= dims[k] > 0 ? dims[k] : 1;
    }
}

/*
 * ---- fast strided copy (Transpose, Slice) ----
 * A view copy of a numeric tensor into a fresh contiguous output is first
 * collapsed: output axes of size 1 are dropped and neighbouring axes that
 * stay adjacent and in order in the input are merged, so that a Transpose
 * that moves only size-1 axes, or a Slice of whole inner rows, becomes one
 * memcpy. Then either the innermost axis is contiguous in the input too and
 * the copy is a sequence of row memcpys, or the last two axes are swapped
 * somewhere and the copy is a batch of 2-D transposes done in square tiles
 * so that both reads and writes stay within a few cache lines. On the
 * bert_like model (one thread, batch 1) the 24 Transposes went from 2.6 ms
 * to 0.84 ms per run this way, at batch 8 from 26 ms to 11.7 ms.
 */

/* Tile side of the 2-D transposes: 32 x 32 floats is 4 KB per side. */
#define FC_TILE 32

/* A collapsed view copy: output axis k has dims[k] elements and stride
 * ist[k] (elements) in the source; the output is contiguous. */
typedef struct fc_plan {
    int rank;
    int64_t dims[MCP_MAX_RANK];
    int64_t ist[MCP_MAX_RANK];
} fc_plan;

static void fc_collapse(int rank, const int64_t *dims, const int64_t *ist, fc_plan *p)
{
    p->rank = 0;
    for (int k = 0; k < rank; k++) {
        if (dims[k] == 1) continue;
        int r = p->rank;
        /* Axis k continues the previous one when one step along the
         * previous axis skips exactly all of axis k in the source. */
        if (r > 0 && p->ist[r - 1] == ist[k] * dims[k]) {
            p->dims[r - 1] *= dims[k];
            p->ist[r - 1] = ist[k];
            continue;
        }
        p->dims[r] = dims[k];
        p->ist[r] = ist[k];
        p->rank++;
    }
}

/* Source offset of the first element of output row `row`, where rows run
 * over axes 0 .. nax-1 (row-major) of the given axes. */
static int64_t fc_offset(int nax, const int64_t *dims, const int64_t *ist, int64_t row)
{
    int64_t off = 0;
    for (int k = nax - 1; k >= 0; k--) {
        off += (row % dims[k]) * ist[k];
        row /= dims[k];
    }
    return off;
}

/* Rows of `len` contiguous source elements: output row r (of the axes
 * before the last) is copied from its source offset. */
static void fc_rows(const fc_plan *p, const char *src, char *dst, size_t es, int nt)
{
    int nax = p->rank - 1;
    int64_t len = p->dims[nax], rows = 1;
    for (int k = 0; k < nax; k++) rows *= p->dims[k];
    size_t row_bytes = (size_t)len * es;
    /* Each task restarts its source offset with divisions, then steps. */
    int64_t per_task = rows / (nt * 4) > 1 ? rows / (nt * 4) : 1;
    int64_t ntask = (rows + per_task - 1) / per_task;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t t = 0; t < ntask; t++) {
        int64_t r0 = t * per_task, r1 = r0 + per_task < rows ? r0 + per_task : rows;
        int64_t idx[MCP_MAX_RANK];
        int64_t rem = r0, off = 0;
        for (int k = nax - 1; k >= 0; k--) {
            idx[k] = rem % p->dims[k];
            rem /= p->dims[k];
            off += idx[k] * p->ist[k];
        }
        for (int64_t r = r0; r < r1; r++) {
            memcpy(dst + (size_t)r * row_bytes, src + off * (ptrdiff_t)es, row_bytes);
            for (int k = nax - 1; k >= 0; k--) {
                off += p->ist[k];
                if (++idx[k] < p->dims[k]) break;
                off -= p->dims[k] * p->ist[k];
                idx[k] = 0;
            }
        }
    }
}

/* One tile of a 2-D transpose: d[i * dstride + j] = s[j * sstride + i] for
 * i < ni, j < nj, for elements of type T. */
#define FC_TILE_T(T)                                                          \
    do {                                                                      \
        const T *s_ = (const T *)s;                                           \
        T *d_ = (T *)d;                                                       \
        for (int64_t i = 0; i < ni; i++)                                      \
            for (int64_t j = 0; j < nj; j++)                                  \
                d_[i * dstride + j] = s_[j * sstride + i];                    \
    } while (0)

static void fc_tile(const char *s, int64_t sstride, char *d, int64_t dstride, int64_t ni,
                    int64_t nj, size_t es)
{
    switch (es) {
    case 1: FC_TILE_T(uint8_t); break;
    case 2: FC_TILE_T(uint16_t); break;
    case 4: FC_TILE_T(uint32_t); break;
    case 8: FC_TILE_T(uint64_t); break;
    default:
        for (int64_t i = 0; i < ni; i++)
            for (int64_t j = 0; j < nj; j++)
                memcpy(d + (size_t)(i * dstride + j) * es, s + (size_t)(j * sstride + i) * es,
                       es);
        break;
    }
}

#undef FC_TILE_T

/*
 * The source's contiguous axis is output axis q < rank-1 and the output's
 * last axis has source stride > 1: for every combination of the other axes,
 * a 2-D transpose of (axis q, last axis), in tiles. Tasks are a combination
 * and a band of FC_TILE rows along axis q.
 */
static void fc_transpose(const fc_plan *p, int q, const char *src, char *dst, size_t es, int nt)
{
    int last = p->rank - 1;
    int64_t n1 = p->dims[q], n2 = p->dims[last], s2 = p->ist[last];
    int64_t ost[MCP_MAX_RANK];
    contiguous_strides(p->rank, p->dims, ost);
    int64_t od1 = ost[q];
    /* The remaining axes, in output order. */
    int nax = 0;
    int64_t adims[MCP_MAX_RANK], aist[MCP_MAX_RANK], aost[MCP_MAX_RANK];
    int64_t combos = 1;
    for (int k = 0; k < last; k++) {
        if (k == q) continue;
        adims[nax] = p->dims[k];
        aist[nax] = p->ist[k];
        aost[nax] = ost[k];
        combos *= p->dims[k];
        nax++;
    }
    int64_t bands = (n1 + FC_TILE - 1) / FC_TILE;
    int64_t ntask = combos * bands;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t t = 0; t < ntask; t++) {
        int64_t c = t / bands, i0 = (t % bands) * FC_TILE;
        int64_t ni = n1 - i0 < FC_TILE ? n1 - i0 : FC_TILE;
        int64_t soff = fc_offset(nax, adims, aist, c) + i0;
        int64_t doff = fc_offset(nax, adims, aost, c) + i0 * od1;
        for (int64_t j0 = 0; j0 < n2; j0 += FC_TILE) {
            int64_t nj = n2 - j0 < FC_TILE ? n2 - j0 : FC_TILE;
            fc_tile(src + (size_t)(soff + j0 * s2) * es, s2, dst + (size_t)(doff + j0) * es,
                    od1, ni, nj, es);
        }
    }
}

/*
 * Copies the view (rank, dims, source strides ist from src's element soff)
 * of a numeric src into the contiguous dst of the view's shape, on up to
 * ctx->threads threads. False when the view has no contiguous source axis
 * (negative or step > 1 strides throughout): the caller then uses
 * copy_view.
 */
static bool fast_copy(const mcp_kernel_ctx *ctx, mcp_tensor *dst, const mcp_tensor *src,
                      int64_t soff, int rank, const int64_t *dims, const int64_t *ist)
{
    if (src->dtype == MCP_DTYPE_STRING) return false;
    size_t es = (size_t)mcp_dtype_size(src->dtype);
    int64_t numel = mcp_shape_numel(rank, dims);
    if (numel == 0) return true;
    fc_plan p;
    fc_collapse(rank, dims, ist, &p);
    const char *s = (const char *)src->data + (size_t)soff * es;
    char *d = (char *)dst->data;
    if (p.rank == 0 || (p.rank == 1 && p.ist[0] == 1)) {
        if (d != s) memcpy(d, s, (size_t)numel * es);
        return true;
    }
    /* A memory-bound copy: one unit of work per element. */
    int nt = mcp_kthreads(ctx, numel);
    if (p.ist[p.rank - 1] == 1) {
        fc_rows(&p, s, d, es, nt);
        return true;
    }
    for (int q = 0; q < p.rank - 1; q++)
        if (p.ist[q] == 1) {
            fc_transpose(&p, q, s, d, es, nt);
            return true;
        }
    return false;
}

/* Output 0 = the data of x under a new shape of the same element count. */
static mcp_status copy_reshaped(mcp_kernel_ctx *ctx, const mcp_tensor *x, int rank,
                                const int64_t *dims)
{
    mcp_tensor *y = NULL;
    mcp_status st = out_tensor_uninit(ctx, 0, x->dtype, rank, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    if (mcp_tensor_numel(y) != mcp_tensor_numel(x))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "element count mismatch");
    /* Executed in place (mcp_kernel_inplace_inputs), y already holds the
     * data; memcpy onto itself would be undefined. */
    if (y->data == x->data) return MCP_STATUS_OK;
    return copy_elems(y, 0, x, 0, mcp_tensor_numel(x));
}

/* ---- Identity, Constant, ConstantOfShape, Shape, Size ---- */

static mcp_status run_identity(mcp_kernel_ctx *ctx)
{
    if (ctx->n_inputs < 1 || !ctx->inputs[0])
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is missing");
    mcp_value_clear(ctx->outputs[0]);
    return mcp_value_copy(ctx->outputs[0], ctx->inputs[0], ctx->err);
}

static mcp_status run_constant(mcp_kernel_ctx *ctx)
{
    const mcp_attr *a;
    mcp_tensor *y = NULL;
    mcp_status st;
    if ((a = mcp_kattr(ctx, "value")) != NULL) {
        if (a->type != MCP_ATTR_TENSOR)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'value' must be a tensor");
        st = out_tensor(ctx, 0, a->t.dtype, a->t.rank, a->t.dims, &y);
        if (st != MCP_STATUS_OK) return st;
        if (a->t.dtype != MCP_DTYPE_STRING && mcp_dtype_size(a->t.dtype) == 0 && !mcp_dtype_is_packed(a->t.dtype))
            return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "attribute 'value' has dtype %s",
                             mcp_dtype_name(a->t.dtype));
        return copy_elems(y, 0, &a->t, 0, mcp_tensor_numel(&a->t));
    }
    if ((a = mcp_kattr(ctx, "value_float")) != NULL) {
        st = out_tensor(ctx, 0, MCP_DTYPE_FLOAT, 0, NULL, &y);
        if (st != MCP_STATUS_OK) return st;
        ((float *)y->data)[0] = a->f;
        return MCP_STATUS_OK;
    }
    if ((a = mcp_kattr(ctx, "value_floats")) != NULL) {
        st = out_tensor(ctx, 0, MCP_DTYPE_FLOAT, 1, &a->count, &y);
        if (st != MCP_STATUS_OK) return st;
        if (a->count > 0) memcpy(y->data, a->floats, (size_t)a->count * sizeof(float));
        return MCP_STATUS_OK;
    }
    if ((a = mcp_kattr(ctx, "value_int")) != NULL) {
        st = out_tensor(ctx, 0, MCP_DTYPE_INT64, 0, NULL, &y);
        if (st != MCP_STATUS_OK) return st;
        ((int64_t *)y->data)[0] = a->i;
        return MCP_STATUS_OK;
    }
    if ((a = mcp_kattr(ctx, "value_ints")) != NULL) {
        st = out_tensor(ctx, 0, MCP_DTYPE_INT64, 1, &a->count, &y);
        if (st != MCP_STATUS_OK) return st;
        if (a->count > 0) memcpy(y->data, a->ints, (size_t)a->count * sizeof(int64_t));
        return MCP_STATUS_OK;
    }
    if ((a = mcp_kattr(ctx, "value_string")) != NULL) {
        st = out_tensor(ctx, 0, MCP_DTYPE_STRING, 0, NULL, &y);
        if (st != MCP_STATUS_OK) return st;
        return mcp_tensor_set_string(y, 0, a->s ? a->s : "", a->s ? a->s_len : 0);
    }
    if ((a = mcp_kattr(ctx, "value_strings")) != NULL) {
        st = out_tensor(ctx, 0, MCP_DTYPE_STRING, 1, &a->count, &y);
        if (st != MCP_STATUS_OK) return st;
        for (int64_t i = 0; i < a->count; i++) {
            const char *s = a->strings[i] ? a->strings[i] : "";
            st = mcp_tensor_set_string(y, i, s, strlen(s));
            if (st != MCP_STATUS_OK) return st;
        }
        return MCP_STATUS_OK;
    }
    if (mcp_kattr(ctx, "sparse_value"))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "attribute 'sparse_value' is not supported");
    return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "no value attribute");
}

static mcp_status run_constant_of_shape(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *shape;
    int64_t dims[MCP_MAX_RANK], n;
    mcp_status st = need_input(ctx, 0, "input", &shape);
    if (st != MCP_STATUS_OK) return st;
    st = read_ints(ctx, shape, "input", MCP_MAX_RANK, dims, &n);
    if (st != MCP_STATUS_OK) return st;
    for (int64_t k = 0; k < n; k++)
        if (dims[k] < 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'input' has negative dimension %lld", (long long)dims[k]);
    const mcp_attr *a = mcp_kattr(ctx, "value");
    mcp_tensor *y = NULL;
    if (!a) return out_tensor(ctx, 0, MCP_DTYPE_FLOAT, (int)n, dims, &y);
    if (a->type != MCP_ATTR_TENSOR || mcp_tensor_numel(&a->t) != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'value' must be a one-element tensor");
    if (a->t.dtype != MCP_DTYPE_STRING && mcp_dtype_size(a->t.dtype) == 0)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "attribute 'value' has dtype %s",
                         mcp_dtype_name(a->t.dtype));
    st = out_tensor(ctx, 0, a->t.dtype, (int)n, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    return fill_elems(y, 0, mcp_tensor_numel(y), &a->t, 0);
}

static mcp_status run_shape(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    mcp_tensor *y = NULL;
    mcp_status st = need_input_packed(ctx, 0, "data", &x);
    if (st != MCP_STATUS_OK) return st;
    int64_t r = x->rank, start = 0, end = r;
    if (ctx->opset >= 15) {
        start = mcp_kattr_int(ctx, "start", 0);
        end = mcp_kattr_int(ctx, "end", r);
    }
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : (start > r ? r : start);
    end = end < 0 ? 0 : (end > r ? r : end);
    int64_t n = end > start ? end - start : 0;
    st = out_tensor(ctx, 0, MCP_DTYPE_INT64, 1, &n, &y);
    if (st != MCP_STATUS_OK) return st;
    for (int64_t i = 0; i < n; i++) ((int64_t *)y->data)[i] = x->dims[start + i];
    return MCP_STATUS_OK;
}

static mcp_status run_size(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    mcp_tensor *y = NULL;
    mcp_status st = need_input_packed(ctx, 0, "data", &x);
    if (st != MCP_STATUS_OK) return st;
    st = out_tensor(ctx, 0, MCP_DTYPE_INT64, 0, NULL, &y);
    if (st != MCP_STATUS_OK) return st;
    ((int64_t *)y->data)[0] = mcp_tensor_numel(x);
    return MCP_STATUS_OK;
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze ---- */

static mcp_status run_reshape(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    int64_t req[MCP_MAX_RANK], n, dims[MCP_MAX_RANK];
    mcp_status st = need_input_packed(ctx, 0, "data", &x);
    if (st != MCP_STATUS_OK) return st;
    if (ctx->opset < 5) {
        const int64_t *s = mcp_kattr_ints(ctx, "shape", &n);
        if (n > MCP_MAX_RANK)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'shape' too long");
        for (int64_t k = 0; k < n; k++) req[k] = s[k];
    } else {
        const mcp_tensor *shape;
        st = need_input(ctx, 1, "shape", &shape);
        if (st != MCP_STATUS_OK) return st;
        st = read_ints(ctx, shape, "shape", MCP_MAX_RANK, req, &n);
        if (st != MCP_STATUS_OK) return st;
    }
    int allowzero = ctx->opset >= 14 ? (int)mcp_kattr_int(ctx, "allowzero", 0) : 0;
    int infer = -1;
    int64_t known = 1, total = mcp_tensor_numel(x);
    for (int k = 0; k < (int)n; k++) {
        int64_t d = req[k];
        if (d == 0 && !allowzero) {
            if (k >= x->rank)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'shape': 0 at position %d exceeds the data rank %d", k,
                                 x->rank);
            d = x->dims[k];
        } else if (d == -1) {
            if (infer >= 0)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'shape' has more than one -1");
            infer = k;
            d = 1;
        } else if (d < 0) {
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'shape' has invalid value %lld", (long long)d);
        }
        dims[k] = d;
        if (d != 0 && known > INT64_MAX / d)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'shape' too large");
        known *= d;
    }
    if (infer >= 0) {
        if (known == 0 || total % known != 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'shape': cannot infer -1 for %lld elements",
                             (long long)total);
        dims[infer] = total / known;
        known = total;
    }
    if (known != total)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'shape' gives %lld elements, data has %lld", (long long)known,
                         (long long)total);
    return copy_reshaped(ctx, x, (int)n, dims);
}

static mcp_status run_flatten(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    mcp_status st = need_input_packed(ctx, 0, "input", &x);
    if (st != MCP_STATUS_OK) return st;
    int64_t axis = mcp_kattr_int(ctx, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axis' %lld out of range",
                         (long long)mcp_kattr_int(ctx, "axis", 1));
    int64_t dims[2] = {1, 1};
    for (int k = 0; k < x->rank; k++) dims[k < axis ? 0 : 1] *= x->dims[k];
    return copy_reshaped(ctx, x, 2, dims);
}

/* Axes for Squeeze/Unsqueeze: the attribute before opset 13, input 1 after. */
static mcp_status read_axes(mcp_kernel_ctx *ctx, int64_t *axes, int64_t *n, bool *given)
{
    *n = 0;
    *given = false;
    if (ctx->opset < 13) {
        const int64_t *a = mcp_kattr_ints(ctx, "axes", n);
        if (*n > MCP_MAX_RANK)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axes' too long");
        for (int64_t k = 0; k < *n; k++) axes[k] = a[k];
        *given = mcp_kattr(ctx, "axes") != NULL;
        return MCP_STATUS_OK;
    }
    const mcp_tensor *t = mcp_kin(ctx, 1);
    if (!t) return MCP_STATUS_OK;
    *given = true;
    return read_ints(ctx, t, "axes", MCP_MAX_RANK, axes, n);
}

static mcp_status run_squeeze(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    int64_t axes[MCP_MAX_RANK], n, dims[MCP_MAX_RANK];
    bool given, drop[MCP_MAX_RANK] = {false};
    mcp_status st = need_input_packed(ctx, 0, "data", &x);
    if (st != MCP_STATUS_OK) return st;
    st = read_axes(ctx, axes, &n, &given);
    if (st != MCP_STATUS_OK) return st;
    if (!given || n == 0) {
        for (int k = 0; k < x->rank; k++) drop[k] = x->dims[k] == 1;
    } else {
        for (int64_t i = 0; i < n; i++) {
            int a;
            if (!mcp_axis_normalize(axes[i], x->rank, &a))
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "axis %lld out of range",
                                 (long long)axes[i]);
            if (x->dims[a] != 1)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "cannot squeeze axis %d of size %lld", a,
                                 (long long)x->dims[a]);
            drop[a] = true;
        }
    }
    int r = 0;
    for (int k = 0; k < x->rank; k++)
        if (!drop[k]) dims[r++] = x->dims[k];
    return copy_reshaped(ctx, x, r, dims);
}

static mcp_status run_unsqueeze(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    int64_t axes[MCP_MAX_RANK], n, dims[MCP_MAX_RANK];
    bool given, ins[MCP_MAX_RANK] = {false};
    mcp_status st = need_input_packed(ctx, 0, "data", &x);
    if (st != MCP_STATUS_OK) return st;
    st = read_axes(ctx, axes, &n, &given);
    if (st != MCP_STATUS_OK) return st;
    if (!given)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "axes are required");
    int r = x->rank + (int)n;
    if (r > MCP_MAX_RANK)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "output rank %d too large", r);
    for (int64_t i = 0; i < n; i++) {
        int a;
        if (!mcp_axis_normalize(axes[i], r, &a))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "axis %lld out of range",
                             (long long)axes[i]);
        if (ins[a])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "axis %d repeated", a);
        ins[a] = true;
    }
    for (int k = 0, j = 0; k < r; k++) dims[k] = ins[k] ? 1 : x->dims[j++];
    return copy_reshaped(ctx, x, r, dims);
}

/* ---- Transpose, Concat, Split, Slice ---- */

static mcp_status run_transpose(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    mcp_tensor *y = NULL;
    int64_t perm[MCP_MAX_RANK], n, xst[MCP_MAX_RANK], sst[MCP_MAX_RANK], dims[MCP_MAX_RANK],
        yst[MCP_MAX_RANK];
    bool seen[MCP_MAX_RANK] = {false};
    mcp_status st = need_input(ctx, 0, "data", &x);
    if (st != MCP_STATUS_OK) return st;
    const int64_t *p = mcp_kattr_ints(ctx, "perm", &n);
    if (!p || n == 0) {
        n = x->rank;
        for (int k = 0; k < x->rank; k++) perm[k] = x->rank - 1 - k;
    } else {
        if (n != x->rank)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'perm' has %lld entries for rank %d", (long long)n,
                             x->rank);
        for (int k = 0; k < x->rank; k++) {
            int a;
            if (!mcp_axis_normalize(p[k], x->rank, &a) || seen[a])
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "attribute 'perm' is not a permutation");
            seen[a] = true;
            perm[k] = a;
        }
    }
    contiguous_strides(x->rank, x->dims, xst);
    for (int k = 0; k < x->rank; k++) {
        dims[k] = x->dims[perm[k]];
        sst[k] = xst[perm[k]];
    }
    st = out_tensor_uninit(ctx, 0, x->dtype, x->rank, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    if (fast_copy(ctx, y, x, 0, x->rank, dims, sst)) return MCP_STATUS_OK;
    contiguous_strides(x->rank, dims, yst);
    return copy_view(y, 0, yst, x, 0, sst, x->rank, dims);
}

static mcp_status run_concat(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *first = NULL;
    mcp_tensor *y = NULL;
    int64_t dims[MCP_MAX_RANK], yst[MCP_MAX_RANK], xst[MCP_MAX_RANK];
    for (int i = 0; i < ctx->n_inputs && !first; i++) first = mcp_kin(ctx, i);
    if (!first) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "no inputs");
    int64_t axis_attr = mcp_kattr_int(ctx, "axis", ctx->opset < 4 ? 1 : INT64_MIN);
    if (axis_attr == INT64_MIN)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axis' is required");
    int rank = first->rank, axis;
    if (rank == 0 || !mcp_axis_normalize(axis_attr, rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axis' %lld out of range",
                         (long long)axis_attr);
    for (int k = 0; k < rank; k++) dims[k] = first->dims[k];
    dims[axis] = 0;
    for (int i = 0; i < ctx->n_inputs; i++) {
        const mcp_tensor *x = mcp_kin(ctx, i);
        if (!x) continue;
        if (x->dtype != first->dtype || x->rank != rank)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input %d: dtype or rank differs from the first input", i);
        for (int k = 0; k < rank; k++)
            if (k != axis && x->dims[k] != dims[k])
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input %d: dimension %d is %lld, expected %lld", i, k,
                                 (long long)x->dims[k], (long long)dims[k]);
        dims[axis] += x->dims[axis];
    }
    mcp_status st = out_tensor(ctx, 0, first->dtype, rank, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    contiguous_strides(rank, dims, yst);
    int64_t off = 0;
    for (int i = 0; i < ctx->n_inputs; i++) {
        const mcp_tensor *x = mcp_kin(ctx, i);
        if (!x) continue;
        contiguous_strides(rank, x->dims, xst);
        st = copy_view(y, off * yst[axis], yst, x, 0, xst, rank, x->dims);
        if (st != MCP_STATUS_OK) return st;
        off += x->dims[axis];
    }
    return MCP_STATUS_OK;
}

static mcp_status run_split(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    int64_t xst[MCP_MAX_RANK], dims[MCP_MAX_RANK], yst[MCP_MAX_RANK];
    mcp_status st = need_input(ctx, 0, "input", &x);
    if (st != MCP_STATUS_OK) return st;
    int nout = ctx->n_outputs, axis;
    int64_t axis_attr = mcp_kattr_int(ctx, "axis", 0);
    if (!mcp_axis_normalize(axis_attr, x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axis' %lld out of range",
                         (long long)axis_attr);
    int64_t total = x->dims[axis];
    int64_t *sizes = mcp_calloc((size_t)(nout > 0 ? nout : 1), sizeof(int64_t));
    if (!sizes) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");

    /* The split sizes come from input 1 (opset 13+, also allowed in opset 1),
     * else the attribute (before 13), else equal parts. */
    const mcp_tensor *sp = ctx->n_inputs > 1 ? mcp_kin(ctx, 1) : NULL;
    const int64_t *spa = NULL;
    int64_t nsp = 0;
    if (!sp && ctx->opset < 13) spa = mcp_kattr_ints(ctx, "split", &nsp);
    if (sp) {
        if (!mcp_dtype_is_integer(sp->dtype) || sp->rank > 1) {
            st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'split' must be 1-D int");
            goto done;
        }
        nsp = mcp_tensor_numel(sp);
    }
    if (sp || (spa && nsp > 0)) {
        int64_t sum = 0;
        if (nsp != nout) {
            st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                           "'split' has %lld entries for %d outputs", (long long)nsp, nout);
            goto done;
        }
        for (int i = 0; i < nout; i++) {
            sizes[i] = sp ? mcp_tensor_get_i64(sp, i) : spa[i];
            if (sizes[i] < 0 || sizes[i] > total) {
                st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "'split' has invalid entry %lld",
                               (long long)sizes[i]);
                goto done;
            }
            sum += sizes[i];
        }
        if (sum != total) {
            st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                           "'split' sums to %lld, axis has %lld", (long long)sum,
                           (long long)total);
            goto done;
        }
    } else {
        /* Equal parts; when the axis does not divide evenly the last part is
         * smaller (opset 18 num_outputs semantics). */
        int64_t parts = mcp_kattr_int(ctx, "num_outputs", nout);
        if (parts != nout || nout <= 0) {
            st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                           "attribute 'num_outputs' %lld does not match %d outputs",
                           (long long)parts, nout);
            goto done;
        }
        int64_t chunk = (total + nout - 1) / nout, left = total;
        for (int i = 0; i < nout; i++) {
            sizes[i] = left < chunk ? left : chunk;
            left -= sizes[i];
        }
    }
    contiguous_strides(x->rank, x->dims, xst);
    for (int k = 0; k < x->rank; k++) dims[k] = x->dims[k];
    int64_t off = 0;
    for (int i = 0; i < nout; i++) {
        mcp_tensor *y = NULL;
        dims[axis] = sizes[i];
        st = out_tensor(ctx, i, x->dtype, x->rank, dims, &y);
        if (st != MCP_STATUS_OK) goto done;
        contiguous_strides(x->rank, dims, yst);
        st = copy_view(y, 0, yst, x, off * xst[axis], xst, x->rank, dims);
        if (st != MCP_STATUS_OK) goto done;
        off += sizes[i];
    }
    st = MCP_STATUS_OK;
done:
    mcp_free(sizes);
    return st;
}

static mcp_status run_slice(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    mcp_tensor *y = NULL;
    int64_t starts[MCP_MAX_RANK], ends[MCP_MAX_RANK], axes[MCP_MAX_RANK], steps[MCP_MAX_RANK];
    int64_t ns, ne, na, nst;
    int64_t beg[MCP_MAX_RANK], step[MCP_MAX_RANK], dims[MCP_MAX_RANK];
    int64_t xst[MCP_MAX_RANK], sst[MCP_MAX_RANK], yst[MCP_MAX_RANK];
    bool seen[MCP_MAX_RANK] = {false};
    mcp_status st = need_input(ctx, 0, "data", &x);
    if (st != MCP_STATUS_OK) return st;
    bool have_axes = false;
    if (ctx->opset < 10) {
        /* Slice-1: starts, ends and axes are attributes. */
        static const char *const names[3] = {"starts", "ends", "axes"};
        int64_t *dst[3] = {starts, ends, axes}, *cnt[3] = {&ns, &ne, &na};
        for (int w = 0; w < 3; w++) {
            const int64_t *a = mcp_kattr_ints(ctx, names[w], cnt[w]);
            if (*cnt[w] > MCP_MAX_RANK)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute '%s' too long",
                                 names[w]);
            for (int64_t i = 0; i < *cnt[w]; i++) dst[w][i] = a[i];
        }
        have_axes = na > 0;
        nst = 0;
    } else {
        const mcp_tensor *t;
        st = need_input(ctx, 1, "starts", &t);
        if (st != MCP_STATUS_OK) return st;
        st = read_ints(ctx, t, "starts", MCP_MAX_RANK, starts, &ns);
        if (st != MCP_STATUS_OK) return st;
        st = need_input(ctx, 2, "ends", &t);
        if (st != MCP_STATUS_OK) return st;
        st = read_ints(ctx, t, "ends", MCP_MAX_RANK, ends, &ne);
        if (st != MCP_STATUS_OK) return st;
        na = 0;
        if ((t = mcp_kin(ctx, 3)) != NULL) {
            st = read_ints(ctx, t, "axes", MCP_MAX_RANK, axes, &na);
            if (st != MCP_STATUS_OK) return st;
            have_axes = true;
        }
        nst = 0;
        if ((t = mcp_kin(ctx, 4)) != NULL) {
            st = read_ints(ctx, t, "steps", MCP_MAX_RANK, steps, &nst);
            if (st != MCP_STATUS_OK) return st;
            if (nst != ns)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'steps' has %lld entries, 'starts' %lld", (long long)nst,
                                 (long long)ns);
        }
    }
    if (ne != ns || (have_axes && na != ns))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "'starts', 'ends' and 'axes' differ in length");
    if (!have_axes) {
        if (ns > x->rank)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "'starts' has %lld entries for rank %d", (long long)ns, x->rank);
        for (int64_t i = 0; i < ns; i++) axes[i] = i;
    }
    for (int k = 0; k < x->rank; k++) {
        beg[k] = 0;
        step[k] = 1;
        dims[k] = x->dims[k];
    }
    for (int64_t i = 0; i < ns; i++) {
        int a;
        if (!mcp_axis_normalize(axes[i], x->rank, &a))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "axis %lld out of range",
                             (long long)axes[i]);
        if (seen[a]) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "axis %d repeated", a);
        seen[a] = true;
        int64_t d = x->dims[a], s = starts[i], e = ends[i], p = nst ? steps[i] : 1, n;
        if (p == 0) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "step is zero");
        if (d == 0) {
            dims[a] = 0;
            continue;
        }
        if (s < 0) s += d;
        if (e < 0) e += d;
        if (p > 0) {
            s = s < 0 ? 0 : (s > d ? d : s);
            e = e < 0 ? 0 : (e > d ? d : e);
            n = e > s ? (e - s - 1) / p + 1 : 0;
        } else {
            s = s < 0 ? 0 : (s > d - 1 ? d - 1 : s);
            e = e < -1 ? -1 : (e > d - 1 ? d - 1 : e);
            /* p is negative and e < s here, so (s - e - 1) / -p is safe:
             * p = INT64_MIN would overflow on negation, hence the guard. */
            if (s > e)
                n = p == INT64_MIN ? 1 : (s - e - 1) / (-p) + 1;
            else
                n = 0;
        }
        beg[a] = s;
        step[a] = p;
        dims[a] = n;
    }
    contiguous_strides(x->rank, x->dims, xst);
    int64_t off = 0;
    for (int k = 0; k < x->rank; k++) {
        off += beg[k] * xst[k];
        sst[k] = step[k] * xst[k];
    }
    st = out_tensor_uninit(ctx, 0, x->dtype, x->rank, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    if (fast_copy(ctx, y, x, off, x->rank, dims, sst)) return MCP_STATUS_OK;
    contiguous_strides(x->rank, dims, yst);
    return copy_view(y, 0, yst, x, off, sst, x->rank, dims);
}

/* ---- Pad ---- */

/* Maps padded coordinate j (relative to the kept region of size n) into
 * [0, n) for the non-constant modes; -1 when it falls in constant padding. */
static int64_t pad_map(int mode, int64_t j, int64_t n)
{
    if (j >= 0 && j < n) return j;
    switch (mode) {
    case 1: /* edge */
        return j < 0 ? 0 : n - 1;
    case 2: { /* reflect (no edge repeat), periodic with period 2(n-1) */
        if (n == 1) return 0;
        int64_t p = 2 * (n - 1);
        int64_t m = j % p;
        if (m < 0) m += p;
        return m < n ? m : p - m;
    }
    case 3: { /* wrap */
        int64_t m = j % n;
        return m < 0 ? m + n : m;
    }
    default:
        return -1;
    }
}

static mcp_status run_pad(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    mcp_tensor *y = NULL;
    int64_t pads[2 * MCP_MAX_RANK], np = 0, axes[MCP_MAX_RANK], na = 0;
    int64_t pb[MCP_MAX_RANK] = {0}, pe[MCP_MAX_RANK] = {0}, dims[MCP_MAX_RANK];
    mcp_tensor cval = {0};
    double cval_attr = 0.0;
    const mcp_tensor *cv = NULL;
    mcp_status st = need_input(ctx, 0, "data", &x);
    if (st != MCP_STATUS_OK) return st;
    int r = x->rank;

    const char *mode_s = mcp_kattr_string(ctx, "mode", "constant");
    int mode;
    if (strcmp(mode_s, "constant") == 0)
        mode = 0;
    else if (strcmp(mode_s, "edge") == 0)
        mode = 1;
    else if (strcmp(mode_s, "reflect") == 0)
        mode = 2;
    else if (strcmp(mode_s, "wrap") == 0)
        mode = 3;
    else
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'mode' '%s' is unknown",
                         mode_s);

    if (ctx->opset < 11) {
        const char *name = ctx->opset < 2 ? "paddings" : "pads";
        const int64_t *a = mcp_kattr_ints(ctx, name, &np);
        if (!a && ctx->opset < 2) a = mcp_kattr_ints(ctx, name = "pads", &np);
        if (np > 2 * MCP_MAX_RANK)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute '%s' too long", name);
        for (int64_t i = 0; i < np; i++) pads[i] = a[i];
        cval_attr = mcp_kattr_float(ctx, "value", 0.0f);
    } else {
        const mcp_tensor *t;
        st = need_input(ctx, 1, "pads", &t);
        if (st != MCP_STATUS_OK) return st;
        st = read_ints(ctx, t, "pads", 2 * MCP_MAX_RANK, pads, &np);
        if (st != MCP_STATUS_OK) return st;
        cv = mcp_kin(ctx, 2);
        if (cv && mcp_tensor_numel(cv) == 0) cv = NULL;
        if (cv && (cv->dtype != x->dtype || mcp_tensor_numel(cv) != 1))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'constant_value' must be one %s value",
                             mcp_dtype_name(x->dtype));
        if ((t = mcp_kin(ctx, 3)) != NULL) {
            st = read_ints(ctx, t, "axes", MCP_MAX_RANK, axes, &na);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    if (na == 0) {
        na = r;
        for (int k = 0; k < r; k++) axes[k] = k;
    }
    if (np != 2 * na)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "'pads' has %lld entries for %lld axes",
                         (long long)np, (long long)na);
    bool seen[MCP_MAX_RANK] = {false};
    for (int64_t i = 0; i < na; i++) {
        int a;
        if (!mcp_axis_normalize(axes[i], r, &a) || seen[a])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'axes' entry %lld invalid",
                             (long long)axes[i]);
        seen[a] = true;
        pb[a] = pads[i];
        pe[a] = pads[i + na];
    }

    /* Per axis: the kept input region [c0, c0 + kept) after negative pads
     * crop, then a table from output coordinate to input coordinate. */
    int64_t c0[MCP_MAX_RANK], kept[MCP_MAX_RANK], lead[MCP_MAX_RANK], total_map = 0;
    for (int k = 0; k < r; k++) {
        int64_t d = x->dims[k];
        if (pb[k] < -d || pe[k] < -d || pb[k] > INT64_MAX / 4 || pe[k] > INT64_MAX / 4)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "'pads' out of range on axis %d",
                             k);
        dims[k] = d + pb[k] + pe[k];
        if (dims[k] < 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "'pads' give a negative size on axis %d", k);
        c0[k] = pb[k] < 0 ? -pb[k] : 0;
        kept[k] = d - c0[k] - (pe[k] < 0 ? -pe[k] : 0);
        lead[k] = pb[k] > 0 ? pb[k] : 0;
        if (mode != 0 && kept[k] <= 0 && dims[k] > 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "cannot %s-pad an empty axis %d", mode_s, k);
        total_map += dims[k];
    }
    st = out_tensor(ctx, 0, x->dtype, r, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    int64_t ynum = mcp_tensor_numel(y);
    if (ynum == 0) return MCP_STATUS_OK;

    /* The fill value as a one-element tensor of the data's dtype. */
    if (mode == 0 && !cv && x->dtype != MCP_DTYPE_STRING) {
        int64_t one = 1;
        st = mcp_tensor_alloc(&cval, x->dtype, 1, &one, ctx->err);
        if (st != MCP_STATUS_OK) return st;
        if (mcp_dtype_is_numeric(x->dtype)) mcp_tensor_set_f64(&cval, 0, cval_attr);
        cv = &cval;
    }

    int64_t *map = mcp_malloc((size_t)(total_map > 0 ? total_map : 1) * sizeof(int64_t));
    if (!map) {
        mcp_tensor_release(&cval);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    int64_t *mk[MCP_MAX_RANK], xst[MCP_MAX_RANK], idx[MCP_MAX_RANK] = {0};
    contiguous_strides(r, x->dims, xst);
    int64_t moff = 0;
    for (int k = 0; k < r; k++) {
        mk[k] = map + moff;
        for (int64_t o = 0; o < dims[k]; o++) {
            int64_t j = pad_map(mode, o - lead[k], kept[k]);
            mk[k][o] = j < 0 ? -1 : (c0[k] + j) * xst[k];
        }
        moff += dims[k];
    }
    /* Walk the output in order; an element reads the input unless one of
     * its coordinates lands in constant padding. */
    for (int64_t i = 0; i < ynum && st == MCP_STATUS_OK; i++) {
        int64_t src = 0;
        bool pad = false;
        for (int k = 0; k < r; k++) {
            int64_t m = mk[k][idx[k]];
            if (m < 0) pad = true;
            src += m;
        }
        if (pad) {
            if (cv) st = fill_elems(y, i, 1, cv, 0);
        } else {
            st = copy_elems(y, i, x, src, 1);
        }
        for (int k = r - 1; k >= 0; k--) {
            if (++idx[k] < dims[k]) break;
            idx[k] = 0;
        }
    }
    mcp_free(map);
    mcp_tensor_release(&cval);
    return st;
}

/* ---- Expand, Tile ---- */

static mcp_status run_expand(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x, *shape;
    mcp_tensor *y = NULL;
    int64_t req[MCP_MAX_RANK], n, dims[MCP_MAX_RANK], xst[MCP_MAX_RANK], sst[MCP_MAX_RANK],
        yst[MCP_MAX_RANK];
    mcp_status st = need_input(ctx, 0, "input", &x);
    if (st != MCP_STATUS_OK) return st;
    st = need_input(ctx, 1, "shape", &shape);
    if (st != MCP_STATUS_OK) return st;
    st = read_ints(ctx, shape, "shape", MCP_MAX_RANK, req, &n);
    if (st != MCP_STATUS_OK) return st;
    int r = x->rank > (int)n ? x->rank : (int)n;
    contiguous_strides(x->rank, x->dims, xst);
    for (int k = 0; k < r; k++) {
        int xi = k - (r - x->rank), si = k - (r - (int)n);
        int64_t a = xi >= 0 ? x->dims[xi] : 1, b = si >= 0 ? req[si] : 1;
        if (b < 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'shape' has negative value %lld", (long long)b);
        if (a != b && a != 1 && b != 1)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'shape' dimension %lld does not broadcast with %lld",
                             (long long)b, (long long)a);
        dims[k] = a == 1 ? b : a;
        sst[k] = (xi >= 0 && a != 1) ? xst[xi] : 0;
    }
    st = out_tensor(ctx, 0, x->dtype, r, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    contiguous_strides(r, dims, yst);
    return copy_view(y, 0, yst, x, 0, sst, r, dims);
}

static mcp_status run_tile(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x, *rt;
    mcp_tensor *y = NULL;
    int64_t reps[MCP_MAX_RANK], n, dims[MCP_MAX_RANK], xst[MCP_MAX_RANK];
    int64_t vdims[VIEW_MAX_RANK], vsst[VIEW_MAX_RANK], vdst[VIEW_MAX_RANK];
    mcp_status st = need_input(ctx, 0, "input", &x);
    if (st != MCP_STATUS_OK) return st;
    st = need_input(ctx, 1, "repeats", &rt);
    if (st != MCP_STATUS_OK) return st;
    if (ctx->opset < 6) {
        /* Tile-1: a scalar count of copies along one axis (input 2). */
        const mcp_tensor *at;
        int64_t cnt = 0, ax = 0;
        int a;
        st = need_input(ctx, 2, "axis", &at);
        if (st != MCP_STATUS_OK) return st;
        st = read_scalar_int(ctx, rt, "tiles", &cnt);
        if (st != MCP_STATUS_OK) return st;
        st = read_scalar_int(ctx, at, "axis", &ax);
        if (st != MCP_STATUS_OK) return st;
        if (!mcp_axis_normalize(ax, x->rank, &a))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'axis' out of range");
        n = x->rank;
        for (int k = 0; k < x->rank; k++) reps[k] = k == a ? cnt : 1;
    } else {
        st = read_ints(ctx, rt, "repeats", MCP_MAX_RANK, reps, &n);
        if (st != MCP_STATUS_OK) return st;
    }
    if (n != x->rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'repeats' has %lld entries for rank %d", (long long)n, x->rank);
    contiguous_strides(x->rank, x->dims, xst);
    for (int k = 0; k < x->rank; k++) {
        if (reps[k] < 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'repeats' has negative value %lld", (long long)reps[k]);
        if (x->dims[k] != 0 && reps[k] > INT64_MAX / 16 / x->dims[k])
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'repeats' too large");
        dims[k] = reps[k] * x->dims[k];
        /* Output axis k viewed as (reps, dim): the repeat index reads stride 0. */
        vdims[2 * k] = reps[k];
        vdims[2 * k + 1] = x->dims[k];
        vsst[2 * k] = 0;
        vsst[2 * k + 1] = xst[k];
    }
    st = out_tensor(ctx, 0, x->dtype, x->rank, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    if (x->rank == 0) return copy_elems(y, 0, x, 0, 1);
    contiguous_strides(2 * x->rank, vdims, vdst);
    return copy_view(y, 0, vdst, x, 0, vsst, 2 * x->rank, vdims);
}

/* ---- Range, EyeLike, Trilu, OneHot ---- */

static mcp_status run_range(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *t[3];
    static const char *const names[3] = {"start", "limit", "delta"};
    mcp_tensor *y = NULL;
    for (int i = 0; i < 3; i++) {
        mcp_status st = need_input(ctx, i, names[i], &t[i]);
        if (st != MCP_STATUS_OK) return st;
        if (mcp_tensor_numel(t[i]) != 1 || !mcp_dtype_is_numeric(t[i]->dtype) ||
            t[i]->dtype == MCP_DTYPE_BOOL || t[i]->dtype != t[0]->dtype)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input '%s' must be one numeric value of the start's dtype",
                             names[i]);
    }
    mcp_dtype dt = t[0]->dtype;
    int64_t n;
    if (mcp_dtype_is_float(dt)) {
        double s = mcp_tensor_get_f64(t[0], 0), l = mcp_tensor_get_f64(t[1], 0),
               d = mcp_tensor_get_f64(t[2], 0);
        if (d == 0.0) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'delta' is 0");
        double c = ceil((l - s) / d);
        if (!(c > 0.0))
            c = 0.0;
        if (c > (double)(INT64_C(1) << 40))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "range has too many elements");
        n = (int64_t)c;
        mcp_status st = out_tensor(ctx, 0, dt, 1, &n, &y);
        if (st != MCP_STATUS_OK) return st;
        for (int64_t i = 0; i < n; i++) mcp_tensor_set_f64(y, i, s + (double)i * d);
        return MCP_STATUS_OK;
    }
    if (dt == MCP_DTYPE_UINT64)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "uint64 Range is not supported");
    int64_t s = mcp_tensor_get_i64(t[0], 0), l = mcp_tensor_get_i64(t[1], 0),
            d = mcp_tensor_get_i64(t[2], 0);
    if (d == 0) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'delta' is 0");
    /* Unsigned arithmetic keeps the distance exact for any int64 pair. */
    uint64_t dist, step;
    if (d > 0 && l > s) {
        dist = (uint64_t)l - (uint64_t)s;
        step = (uint64_t)d;
    } else if (d < 0 && l < s) {
        dist = (uint64_t)s - (uint64_t)l;
        step = (uint64_t)0 - (uint64_t)d;
    } else {
        dist = 0;
        step = 1;
    }
    uint64_t cnt = dist / step + (dist % step != 0);
    if (cnt > ((uint64_t)1 << 40))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "range has too many elements");
    n = (int64_t)cnt;
    mcp_status st = out_tensor(ctx, 0, dt, 1, &n, &y);
    if (st != MCP_STATUS_OK) return st;
    for (int64_t i = 0; i < n; i++)
        mcp_tensor_set_i64(y, i, (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)d));
    return MCP_STATUS_OK;
}

static mcp_status run_eyelike(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x;
    mcp_tensor *y = NULL;
    mcp_status st = need_input(ctx, 0, "input", &x);
    if (st != MCP_STATUS_OK) return st;
    if (x->rank != 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' must be 2-D, got %d",
                         x->rank);
    mcp_dtype dt = (mcp_dtype)mcp_kattr_int(ctx, "dtype", (int64_t)x->dtype);
    if ((int)dt <= 0 || (int)dt >= MCP_DTYPE_COUNT || !mcp_dtype_is_numeric(dt))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "attribute 'dtype' %d is not supported",
                         (int)dt);
    int64_t k = mcp_kattr_int(ctx, "k", 0);
    st = out_tensor(ctx, 0, dt, 2, x->dims, &y);
    if (st != MCP_STATUS_OK) return st;
    int64_t rows = x->dims[0], cols = x->dims[1];
    for (int64_t i = 0; i < rows; i++) {
        /* Compare without forming i + k, which may overflow for huge k. */
        if (k >= cols - i || k < -i) continue;
        mcp_tensor_set_i64(y, i * cols + i + k, 1);
    }
    return MCP_STATUS_OK;
}

static mcp_status run_trilu(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x, *kt;
    mcp_tensor *y = NULL;
    int64_t k = 0;
    mcp_status st = need_input(ctx, 0, "input", &x);
    if (st != MCP_STATUS_OK) return st;
    if (x->rank < 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'input' must have rank >= 2, got %d", x->rank);
    if ((kt = mcp_kin(ctx, 1)) != NULL) {
        st = read_scalar_int(ctx, kt, "k", &k);
        if (st != MCP_STATUS_OK) return st;
    }
    bool upper = mcp_kattr_int(ctx, "upper", 1) != 0;
    st = out_tensor(ctx, 0, x->dtype, x->rank, x->dims, &y);
    if (st != MCP_STATUS_OK) return st;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    int64_t mat = rows * cols, nmat = mat ? mcp_tensor_numel(x) / mat : 0;
    /* Clamping k keeps i + k in range; beyond +-(rows+cols) nothing changes. */
    int64_t lim = rows + cols;
    if (k > lim) k = lim;
    if (k < -lim) k = -lim;
    for (int64_t b = 0; b < nmat && st == MCP_STATUS_OK; b++) {
        for (int64_t i = 0; i < rows && st == MCP_STATUS_OK; i++) {
            int64_t lo, hi; /* kept columns [lo, hi) */
            if (upper) {
                lo = i + k < 0 ? 0 : i + k;
                hi = cols;
            } else {
                lo = 0;
                hi = i + k + 1 > cols ? cols : i + k + 1;
            }
            if (lo < hi) {
                int64_t base = b * mat + i * cols;
                st = copy_elems(y, base + lo, x, base + lo, hi - lo);
            }
        }
    }
    return st;
}

static mcp_status run_onehot(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *ind, *dt, *vals;
    mcp_tensor *y = NULL;
    int64_t dims[MCP_MAX_RANK];
    mcp_status st = need_input(ctx, 0, "indices", &ind);
    if (st != MCP_STATUS_OK) return st;
    st = need_input(ctx, 1, "depth", &dt);
    if (st != MCP_STATUS_OK) return st;
    st = need_input(ctx, 2, "values", &vals);
    if (st != MCP_STATUS_OK) return st;
    if (!mcp_dtype_is_numeric(ind->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'indices' must be numeric");
    if (!mcp_dtype_is_numeric(dt->dtype) || mcp_tensor_numel(dt) != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'depth' must be one numeric value");
    if (mcp_tensor_numel(vals) != 2 || vals->rank > 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'values' must hold two values [off, on]");
    int64_t depth;
    if (mcp_dtype_is_float(dt->dtype)) {
        double dd = mcp_tensor_get_f64(dt, 0);
        if (!(dd >= 0.0 && dd < 9.0e15))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'depth' out of range");
        depth = (int64_t)dd;
    } else {
        depth = mcp_tensor_get_i64(dt, 0);
    }
    if (depth < 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'depth' is negative");
    int r = ind->rank + 1, axis;
    int64_t axis_attr = mcp_kattr_int(ctx, "axis", -1);
    if (r > MCP_MAX_RANK || !mcp_axis_normalize(axis_attr, r, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axis' %lld out of range",
                         (long long)axis_attr);
    int64_t outer = 1, inner = 1;
    for (int k = 0, j = 0; k < r; k++) {
        if (k == axis) {
            dims[k] = depth;
            continue;
        }
        dims[k] = ind->dims[j];
        if (k < axis)
            outer *= ind->dims[j];
        else
            inner *= ind->dims[j];
        j++;
    }
    st = out_tensor(ctx, 0, vals->dtype, r, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    st = fill_elems(y, 0, mcp_tensor_numel(y), vals, 0);
    if (st != MCP_STATUS_OK) return st;
    bool fl = mcp_dtype_is_float(ind->dtype);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t e = o * inner + i, v;
            if (fl) {
                double dv = mcp_tensor_get_f64(ind, e);
                if (!(dv > -9.0e15 && dv < 9.0e15)) continue;
                v = (int64_t)dv;
            } else {
                v = mcp_tensor_get_i64(ind, e);
            }
            if (v < 0 && v >= -depth) v += depth;
            if (v < 0 || v >= depth) continue;
            st = copy_elems(y, (o * depth + v) * inner + i, vals, 1, 1);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    return MCP_STATUS_OK;
}

/* ---- DepthToSpace, SpaceToDepth, ReverseSequence ---- */

static mcp_status run_depth_space(mcp_kernel_ctx *ctx, bool to_space)
{
    const mcp_tensor *x;
    mcp_tensor *y = NULL;
    mcp_status st = need_input(ctx, 0, "input", &x);
    if (st != MCP_STATUS_OK) return st;
    if (x->rank != 4)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' must be 4-D, got %d",
                         x->rank);
    int64_t b = mcp_kattr_int(ctx, "blocksize", 0);
    if (b <= 0 || b > (INT64_C(1) << 20))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'blocksize' %lld invalid",
                         (long long)b);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t dims[4], vd[6], vs[6], vdst[6];
    if (to_space) {
        const char *mode = mcp_kattr_string(ctx, "mode", "DCR");
        bool dcr = strcmp(mode, "DCR") == 0;
        if (!dcr && strcmp(mode, "CRD") != 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'mode' '%s' unknown",
                             mode);
        if (C % (b * b) != 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "channels %lld not divisible by blocksize^2", (long long)C);
        int64_t c = C / (b * b);
        dims[0] = N;
        dims[1] = c;
        dims[2] = H * b;
        dims[3] = W * b;
        /* Output viewed as [N, c, H, b1, W, b2]; the input channel index is
         * (b1, b2, c) for DCR and (c, b1, b2) for CRD. */
        int64_t sc = dcr ? H * W : b * b * H * W, sb1 = dcr ? b * c * H * W : b * H * W,
                sb2 = dcr ? c * H * W : H * W;
        int64_t v[6] = {N, c, H, b, W, b}, s[6] = {C * H * W, sc, W, sb1, 1, sb2};
        memcpy(vd, v, sizeof(v));
        memcpy(vs, s, sizeof(s));
    } else {
        if (H % b != 0 || W % b != 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "spatial size %lldx%lld not divisible by blocksize", (long long)H,
                             (long long)W);
        int64_t h = H / b, w = W / b;
        dims[0] = N;
        dims[1] = C * b * b;
        dims[2] = h;
        dims[3] = w;
        /* Output viewed as [N, b1, b2, C, h, w]; input is [N, C, h, b1, w, b2]. */
        int64_t v[6] = {N, b, b, C, h, w}, s[6] = {C * H * W, W, 1, H * W, b * W, b};
        memcpy(vd, v, sizeof(v));
        memcpy(vs, s, sizeof(s));
    }
    st = out_tensor(ctx, 0, x->dtype, 4, dims, &y);
    if (st != MCP_STATUS_OK) return st;
    contiguous_strides(6, vd, vdst);
    return copy_view(y, 0, vdst, x, 0, vs, 6, vd);
}

static mcp_status run_depth_to_space(mcp_kernel_ctx *ctx) { return run_depth_space(ctx, true); }
static mcp_status run_space_to_depth(mcp_kernel_ctx *ctx) { return run_depth_space(ctx, false); }

static mcp_status run_reverse_sequence(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x, *lens;
    mcp_tensor *y = NULL;
    int64_t xst[MCP_MAX_RANK], sub[MCP_MAX_RANK];
    mcp_status st = need_input(ctx, 0, "input", &x);
    if (st != MCP_STATUS_OK) return st;
    st = need_input(ctx, 1, "sequence_lens", &lens);
    if (st != MCP_STATUS_OK) return st;
    if (x->rank < 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' must have rank >= 2");
    int64_t ba = mcp_kattr_int(ctx, "batch_axis", 1), ta = mcp_kattr_int(ctx, "time_axis", 0);
    if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attributes 'batch_axis' and 'time_axis' must be 0 and 1");
    int64_t B = x->dims[ba], T = x->dims[ta];
    if (!mcp_dtype_is_integer(lens->dtype) || lens->rank != 1 || lens->dims[0] != B)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'sequence_lens' must be 1-D int of the batch size %lld",
                         (long long)B);
    st = out_tensor(ctx, 0, x->dtype, x->rank, x->dims, &y);
    if (st != MCP_STATUS_OK) return st;
    contiguous_strides(x->rank, x->dims, xst);
    for (int k = 0; k < x->rank; k++) sub[k] = x->dims[k];
    sub[ba] = 1;
    sub[ta] = 1;
    for (int64_t b = 0; b < B; b++) {
        int64_t len = mcp_tensor_get_i64(lens, b);
        if (len < 0 || len > T)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'sequence_lens' value %lld out of [0, %lld]", (long long)len,
                             (long long)T);
        for (int64_t t = 0; t < T; t++) {
            int64_t src_t = t < len ? len - 1 - t : t;
            st = copy_view(y, b * xst[ba] + t * xst[ta], xst, x,
                           b * xst[ba] + src_t * xst[ta], xst, x->rank, sub);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    return MCP_STATUS_OK;
}

const mcp_kernel_def mcp__ref_shape_kernels[] = {
    /* The byte movers take the narrow types: whole tensors' bytes, or (Transpose) one byte an element. */
    {MCP_KERNEL_FIELDS("", "Identity", 1, 0, run_identity, NULL, NULL, NULL), .narrow_types = MCP_NARROW_ALL},
    {MCP_KERNEL_FIELDS("", "Constant", 1, 0, run_constant, NULL, NULL, NULL), .narrow_types = MCP_NARROW_ALL},
    MCP_KERNEL_ENTRY("", "ConstantOfShape", 9, 0, run_constant_of_shape, NULL, NULL, NULL),
    {MCP_KERNEL_FIELDS("", "Shape", 1, 0, run_shape, NULL, NULL, NULL), .narrow_types = MCP_NARROW_ALL},
    {MCP_KERNEL_FIELDS("", "Size", 1, 0, run_size, NULL, NULL, NULL), .narrow_types = MCP_NARROW_ALL},
    {MCP_KERNEL_FIELDS("", "Reshape", 1, 0, run_reshape, NULL, NULL, NULL), .inplace_inputs = 1u,
     .narrow_types = MCP_NARROW_ALL},
    {MCP_KERNEL_FIELDS("", "Flatten", 1, 0, run_flatten, NULL, NULL, NULL), .inplace_inputs = 1u,
     .narrow_types = MCP_NARROW_ALL},
    {MCP_KERNEL_FIELDS("", "Squeeze", 1, 0, run_squeeze, NULL, NULL, NULL), .inplace_inputs = 1u,
     .narrow_types = MCP_NARROW_ALL},
    {MCP_KERNEL_FIELDS("", "Unsqueeze", 1, 0, run_unsqueeze, NULL, NULL, NULL), .inplace_inputs = 1u,
     .narrow_types = MCP_NARROW_ALL},
    {MCP_KERNEL_FIELDS("", "Transpose", 1, 0, run_transpose, NULL, NULL, NULL), .narrow_types = MCP_NARROW_BYTES},
    MCP_KERNEL_ENTRY("", "Concat", 1, 0, run_concat, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Split", 1, 0, run_split, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Slice", 1, 0, run_slice, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Pad", 1, 0, run_pad, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Expand", 8, 0, run_expand, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Tile", 1, 0, run_tile, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Range", 11, 0, run_range, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "EyeLike", 9, 0, run_eyelike, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "Trilu", 14, 0, run_trilu, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "OneHot", 9, 0, run_onehot, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "DepthToSpace", 1, 0, run_depth_to_space, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "SpaceToDepth", 1, 0, run_space_to_depth, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "ReverseSequence", 10, 0, run_reverse_sequence, NULL, NULL, NULL),
};
const int mcp__ref_shape_kernel_count =
    (int)(sizeof(mcp__ref_shape_kernels) / sizeof(mcp__ref_shape_kernels[0]));
