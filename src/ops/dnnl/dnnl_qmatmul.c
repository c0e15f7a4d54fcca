/*
 * oneDNN int8 matrix products: QLinearMatMul and MatMulInteger.
 *
 * A [..., M, K] (u8 or s8, its zero point read at run time) times B, either
 * [K, N] (A's leading dims flattened into M) or of A's rank with the same
 * leading dims (batched: one product per leading index, no broadcasting).
 * B must be s8 with zero point 0, or u8 with one zero point per tensor
 * (B - 128 is then s8 with zero point zp - 128: the same products); an
 * initializer B is shifted once at load and packed per problem, a B given
 * at run time is shifted into scratch. MatMulInteger writes the s32
 * products; QLinearMatMul requantizes with the output scales
 * a_scale * b_scale[n] / y_scale (per tensor or per column of B) and y's
 * zero point. Scales must be initializers. VNNI CPUs only (see
 * mcp__dnnl_has_vnni).
 *
 * MatMulIntegerScaled (internal, graph.h) is MatMulInteger whose s32
 * products, written into Y's own memory, become float in place: times
 * A_scale (given at run time) * B_scale, plus the bias.
 */
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

#define QMM_CACHE_MAX 8

typedef struct qmm_key {
    int64_t batch, m, k, n; /* batch 0: 2-D */
    int64_t threads;        /* the OpenMP budget it is built and run under */
} qmm_key;

typedef struct qmm_prim {
    qmm_key key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t wmd; /* B as the primitive reads it */
    const void *wdata;      /* packed initializer B, or NULL: B given at run */
    mcp_dnnl_packed own;
} qmm_prim;

typedef struct qmm_state {
    bool requant;
    bool scaled;          /* MatMulIntegerScaled */
    float b_scale;        /* scaled: B's scale */
    const mcp_tensor *bias; /* scaled: the bias initializer, or NULL */
    int b_in, a_zp_in, b_zp_in, y_zp_in; /* -1: absent */
    dnnl_data_type_t a_dt, y_dt;
    bool b_u8;         /* B is u8, shifted to s8 */
    int32_t b_zp;      /* B's zero point after the shift (initializer or absent B zp) */
    bool b_zp_known;   /* b_zp holds it (else read at run) */
    const mcp_tensor *b_init;
    mcp_tensor b8;     /* shifted initializer, owned */
    mcp_dnnl_packed packed;
    int n_scales;
    float *scales;
    pthread_mutex_t lock;
    int n_prims;
    qmm_prim prims[QMM_CACHE_MAX];
} qmm_state;

/* The zero point input zi of B (dtype bt): one value, or per column all
 * equal; the value in *out when it is an initializer. */
static bool b_zp_ok(const mcp_node *node, const mcp_graph *graph, int zi, mcp_dtype bt, bool *known, int32_t *out)
{
    *known = true;
    *out = 0;
    const mcp_graph_value *v = mcp__dnnl_input(node, graph, zi);
    if (!v) return true;
    const mcp_tensor *z = mcp__dnnl_initializer(node, graph, zi);
    if (!z) {
        *known = false;
        return mcp__dnnl_zp_input_ok(node, graph, zi, bt);
    }
    if (z->dtype != bt || z->rank > 1) return false;
    int64_t c = mcp_tensor_numel(z);
    for (int64_t i = 0; i < c; i++) {
        int32_t x = bt == MCP_DTYPE_UINT8 ? ((const uint8_t *)z->data)[i] : ((const int8_t *)z->data)[i];
        if (i > 0 && x != *out) return false;
        *out = x;
    }
    return c >= 1;
}

bool mcp__dnnl_qmatmul_supported(const mcp_node *node, const mcp_graph *graph)
{
    bool ql = strcmp(node->op_type, "QLinearMatMul") == 0;
    bool scaled = strcmp(node->op_type, "MatMulIntegerScaled") == 0;
    if (strcmp(node->domain, scaled ? MCP_DOMAIN_INTERNAL : "") != 0 || node->n_outputs != 1 || node->n_attrs != 0)
        return false;
    if (ql ? node->n_inputs != 8 : scaled ? node->n_inputs < 6 || node->n_inputs > 7 : node->n_inputs < 2 || node->n_inputs > 4)
        return false;
    if (scaled) {
        const mcp_graph_value *as = mcp__dnnl_input(node, graph, 4);
        const mcp_tensor *bias = mcp__dnnl_initializer(node, graph, 6), *bs = mcp__dnnl_initializer(node, graph, 5);
        const mcp_graph_value *b = mcp__dnnl_input(node, graph, 1);
        if (!as || as->type.dtype != MCP_DTYPE_FLOAT || !bs || bs->dtype != MCP_DTYPE_FLOAT || mcp_tensor_numel(bs) != 1)
            return false;
        if (mcp__dnnl_input(node, graph, 6) &&
            (!bias || bias->dtype != MCP_DTYPE_FLOAT || !b || b->type.rank < 1 || b->type.dims[b->type.rank - 1] < 0 ||
             mcp_tensor_numel(bias) != b->type.dims[b->type.rank - 1]))
            return false;
    }
    if (!mcp__dnnl_has_vnni()) return false;
    int bi = ql ? 3 : 1;
    const mcp_graph_value *a = mcp__dnnl_input(node, graph, 0), *b = mcp__dnnl_input(node, graph, bi);
    if (!a || !b || a->type.kind != MCP_VALUE_TENSOR || b->type.kind != MCP_VALUE_TENSOR) return false;
    if (a->type.is_optional || b->type.is_optional) return false;
    if (!mcp__dnnl_is_int8(a->type.dtype) || !mcp__dnnl_is_int8(b->type.dtype)) return false;
    int ra = a->type.rank, rb = b->type.rank;
    if (ra < 2 || ra > MCP_MAX_RANK || !(rb == 2 || rb == ra)) return false;
    bool known;
    int32_t zp;
    if (!b_zp_ok(node, graph, bi + 2, b->type.dtype, &known, &zp)) return false;
    if (b->type.dtype == MCP_DTYPE_INT8 && (!known || zp != 0)) return false;
    if (!mcp__dnnl_zp_input_ok(node, graph, 2, a->type.dtype)) return false;
    if (ql) {
        int64_t n = rb >= 2 ? b->type.dims[rb - 1] : -1;
        const mcp_tensor *bs = mcp__dnnl_initializer(node, graph, 4);
        if (!mcp__dnnl_scale_ok(mcp__dnnl_initializer(node, graph, 1), 1) || !bs ||
            !mcp__dnnl_scale_ok(bs, mcp_tensor_numel(bs) > 1 ? n : 1) ||
            !mcp__dnnl_scale_ok(mcp__dnnl_initializer(node, graph, 6), 1))
            return false;
        if (mcp_tensor_numel(bs) > 1 && rb != 2) return false;
        const mcp_graph_value *yz = mcp__dnnl_input(node, graph, 7);
        if (!yz || !mcp__dnnl_is_int8(yz->type.dtype) || !mcp__dnnl_zp_input_ok(node, graph, 7, yz->type.dtype))
            return false;
    }
    return true;
}

static void qmm_prim_release(qmm_prim *p)
{
    if (p->prim) dnnl_primitive_destroy(p->prim);
    mcp__dnnl_packed_release(&p->own);
    memset(p, 0, sizeof *p);
}

static void qmm_release(void *state)
{
    qmm_state *st = state;
    if (!st) return;
    for (int i = 0; i < st->n_prims; i++) qmm_prim_release(&st->prims[i]);
    mcp__dnnl_packed_release(&st->packed);
    mcp_tensor_release(&st->b8);
    mcp_free(st->scales);
    pthread_mutex_destroy(&st->lock);
    mcp_free(st);
}

static mcp_status qmm_prepare(const mcp_node *node, const mcp_graph *graph, void **state, mcp_err *err)
{
    *state = NULL;
    if (!mcp__dnnl_engine()) return mcp_err_set(err, MCP_STATUS_INTERNAL, "oneDNN engine creation failed");
    qmm_state *st = mcp_calloc(1, sizeof *st);
    if (!st) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&st->lock, NULL);
    bool ql = strcmp(node->op_type, "QLinearMatMul") == 0;
    st->requant = ql;
    st->scaled = strcmp(node->op_type, "MatMulIntegerScaled") == 0;
    if (st->scaled) {
        st->b_scale = ((const float *)mcp__dnnl_initializer(node, graph, 5)->data)[0];
        st->bias = mcp__dnnl_initializer(node, graph, 6);
    }
    st->b_in = ql ? 3 : 1;
    st->a_zp_in = mcp__dnnl_input(node, graph, 2) ? 2 : -1;
    st->b_zp_in = mcp__dnnl_input(node, graph, st->b_in + 2) ? st->b_in + 2 : -1;
    st->y_zp_in = ql ? 7 : -1;
    st->a_dt = mcp__dnnl_dt(mcp__dnnl_input(node, graph, 0)->type.dtype);
    const mcp_graph_value *b = mcp__dnnl_input(node, graph, st->b_in);
    st->b_u8 = b->type.dtype == MCP_DTYPE_UINT8;
    b_zp_ok(node, graph, st->b_in + 2, b->type.dtype, &st->b_zp_known, &st->b_zp);
    if (st->b_u8) st->b_zp -= 128;
    st->y_dt = ql ? mcp__dnnl_dt(mcp__dnnl_input(node, graph, 7)->type.dtype) : dnnl_s32;
    const mcp_tensor *bi = mcp__dnnl_initializer(node, graph, st->b_in);
    st->b_init = bi;
    if (bi && st->b_u8) {
        mcp_status rs = mcp_tensor_alloc(&st->b8, MCP_DTYPE_INT8, bi->rank, bi->dims, err);
        if (rs != MCP_STATUS_OK) {
            qmm_release(st);
            return rs;
        }
        const uint8_t *from = bi->data;
        int8_t *to = st->b8.data;
        for (int64_t i = 0, n = mcp_tensor_numel(bi); i < n; i++) to[i] = (int8_t)((int)from[i] - 128);
        st->b_init = &st->b8;
    }
    if (ql) {
        const mcp_tensor *as = mcp__dnnl_initializer(node, graph, 1), *bs = mcp__dnnl_initializer(node, graph, 4),
                         *ys = mcp__dnnl_initializer(node, graph, 6);
        st->n_scales = (int)mcp_tensor_numel(bs);
        st->scales = mcp_malloc(sizeof *st->scales * (size_t)st->n_scales);
        if (!st->scales) {
            qmm_release(st);
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        /* As the reference kernel forms it: (a_scale * b_scale) / y_scale in float. */
        for (int i = 0; i < st->n_scales; i++)
            st->scales[i] = ((const float *)as->data)[0] * ((const float *)bs->data)[i] / ((const float *)ys->data)[0];
    }
    *state = st;
    return MCP_STATUS_OK;
}

/* Whether the primitive takes B's zero point: not when it is a constant 0
 * (oneDNN then skips the compensation it costs). */
static bool b_zp_wanted(const qmm_state *st)
{
    return st->b_u8 || (st->b_zp_in >= 0 && !(st->b_zp_known && st->b_zp == 0));
}

/* Descriptors of the problem: 2-D, or 3-D with the batch in front. */
static dnnl_status_t qmm_mds(const qmm_key *k, dnnl_data_type_t adt, dnnl_data_type_t ydt, bool b_any,
                             dnnl_memory_desc_t *a, dnnl_memory_desc_t *b, dnnl_memory_desc_t *y)
{
    int r = k->batch ? 3 : 2;
    dnnl_dims_t ad, bd, yd;
    if (r == 3) {
        ad[0] = bd[0] = yd[0] = k->batch;
    }
    ad[r - 2] = k->m, ad[r - 1] = k->k;
    bd[r - 2] = k->k, bd[r - 1] = k->n;
    yd[r - 2] = k->m, yd[r - 1] = k->n;
    dnnl_format_tag_t plain = r == 3 ? dnnl_abc : dnnl_ab;
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(a, r, ad, adt, plain);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(b, r, bd, dnnl_s8, b_any ? dnnl_format_tag_any : plain);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(y, r, yd, ydt, plain);
    return s;
}

static mcp_status qmm_build(qmm_state *st, const qmm_key *k, qmm_prim *p, mcp_err *err)
{
    memset(p, 0, sizeof *p);
    p->key = *k;
    bool packed = st->b_init != NULL;
    dnnl_memory_desc_t a, b, y;
    dnnl_status_t s = qmm_mds(k, st->a_dt, st->y_dt, packed, &a, &b, &y);
    dnnl_matmul_desc_t md;
    if (s == dnnl_success) s = dnnl_matmul_desc_init(&md, &a, &b, NULL, &y);
    dnnl_primitive_attr_t attr = NULL;
    if (s == dnnl_success) s = mcp__dnnl_attr_create(&attr);
    const int32_t rt = DNNL_RUNTIME_S32_VAL;
    if (s == dnnl_success && st->requant)
        s = dnnl_primitive_attr_set_output_scales(attr, st->n_scales, st->n_scales > 1 ? 1 << (k->batch ? 2 : 1) : 0,
                                                  st->scales);
    if (s == dnnl_success && st->a_zp_in >= 0) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &rt);
    if (s == dnnl_success && b_zp_wanted(st))
        s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_WEIGHTS, 1, 0, &rt);
    if (s == dnnl_success && st->y_zp_in >= 0) s = dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &rt);
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &md, attr, mcp__dnnl_engine(), NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_success) {
        p->wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        s = dnnl_primitive_create(&p->prim, pd);
        if (s != dnnl_success) p->prim = NULL;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "int8 matmul primitive");
    if (!packed) return MCP_STATUS_OK;
    dnnl_memory_desc_t plain;
    s = qmm_mds(k, st->a_dt, st->y_dt, false, &a, &plain, &y);
    mcp_status rs = s == dnnl_success ? MCP_STATUS_OK : mcp__dnnl_fail(err, s, "memory descriptor");
    if (rs == MCP_STATUS_OK)
        rs = mcp__dnnl_weights_for(&st->packed, false, &plain, st->b_init->data, &p->wmd, &p->own, &p->wdata, err);
    if (rs != MCP_STATUS_OK) qmm_prim_release(p);
    return rs;
}

static mcp_status qmm_lookup(mcp_kernel_ctx *ctx, qmm_state *st, const qmm_key *k, qmm_prim *local,
                             const qmm_prim **out)
{
    *out = NULL;
    mcp_status rs = MCP_STATUS_OK;
    pthread_mutex_lock(&st->lock);
    for (int i = 0; i < st->n_prims && !*out; i++)
        if (memcmp(&st->prims[i].key, k, sizeof *k) == 0) *out = &st->prims[i];
    if (!*out && st->n_prims < QMM_CACHE_MAX) {
        rs = qmm_build(st, k, &st->prims[st->n_prims], ctx->err);
        if (rs == MCP_STATUS_OK) *out = &st->prims[st->n_prims++];
    }
    pthread_mutex_unlock(&st->lock);
    if (rs == MCP_STATUS_OK && !*out) {
        rs = qmm_build(st, k, local, ctx->err);
        if (rs == MCP_STATUS_OK) *out = local;
    }
    if (rs != MCP_STATUS_OK) mcp_err_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    return rs;
}

/* The same memory read as int32 and written as float. */
typedef int32_t __attribute__((may_alias)) alias_i32;
typedef float __attribute__((may_alias)) alias_f32;

/* s32 products to float in place: (float)acc * scale [+ bias[column]],
 * rounded as Cast, Mul and Add round them (two roundings: the build does
 * not contract a * b + c). */
MCP_MULTIVERSION static void
scale_rows(void *data, int64_t row0, int64_t rows, int64_t cols, float scale, const float *bias)
{
    for (int64_t r = row0; r < row0 + rows; r++) {
        const alias_i32 *acc = (const alias_i32 *)data + r * cols;
        alias_f32 *y = (alias_f32 *)data + r * cols;
        if (bias) {
#pragma omp simd
            for (int64_t j = 0; j < cols; j++) {
                float t = (float)acc[j] * scale;
                y[j] = t + bias[j];
            }
        } else {
#pragma omp simd
            for (int64_t j = 0; j < cols; j++) y[j] = (float)acc[j] * scale;
        }
    }
}

static void scale_in_place(mcp_kernel_ctx *ctx, void *data, int64_t n, int64_t cols, float scale, const float *bias)
{
    int64_t rows = n / cols, per = cols >= 16384 ? 1 : 16384 / cols, nblocks = (rows + per - 1) / per;
    int nt = mcp_kthreads(ctx, n);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t b = 0; b < nblocks; b++) scale_rows(data, b * per, (b + 1) * per < rows ? per : rows - b * per, cols, scale, bias);
}

static mcp_dtype mcp_of(dnnl_data_type_t dt)
{
    return dt == dnnl_u8 ? MCP_DTYPE_UINT8 : dt == dnnl_s8 ? MCP_DTYPE_INT8 : MCP_DTYPE_INT32;
}

static mcp_status qmm_run(mcp_kernel_ctx *ctx)
{
    qmm_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    const mcp_tensor *a = mcp_kin(ctx, 0), *b = mcp_kin(ctx, st->b_in);
    mcp_dtype adt = mcp_of(st->a_dt), bdt = st->b_u8 ? MCP_DTYPE_UINT8 : MCP_DTYPE_INT8;
    mcp_dtype ydt = st->scaled ? MCP_DTYPE_FLOAT : mcp_of(st->y_dt);
    float scale = 0.0f;
    if (st->scaled) {
        const mcp_tensor *as = mcp_kin(ctx, 4);
        if (!as || as->dtype != MCP_DTYPE_FLOAT || mcp_tensor_numel(as) != 1)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'A_scale' must be one float");
        scale = ((const float *)as->data)[0] * st->b_scale;
    }
    if (!a || a->dtype != adt || a->rank < 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'A' must be a %s tensor of rank 2 or more",
                         mcp_dtype_name(adt));
    if (!b || b->dtype != bdt || !(b->rank == 2 || b->rank == a->rank))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'B' must be a %s tensor of rank 2 or %d",
                         mcp_dtype_name(bdt), a->rank);
    int32_t zp[3] = {0, st->b_zp, 0}; /* a, b, y */
    if (!mcp__dnnl_zp_value(st->a_zp_in >= 0 ? mcp_kin(ctx, st->a_zp_in) : NULL, st->a_dt, &zp[0]))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "A's zero point must be one %s value", mcp_dtype_name(adt));
    if (!st->b_zp_known) {
        if (!mcp__dnnl_zp_value(mcp_kin(ctx, st->b_zp_in), st->b_u8 ? dnnl_u8 : dnnl_s8, &zp[1]))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "B's zero point must be one %s value",
                             mcp_dtype_name(bdt));
        if (st->b_u8) zp[1] -= 128;
    }
    if (st->y_zp_in >= 0 && !mcp__dnnl_zp_value(mcp_kin(ctx, st->y_zp_in), st->y_dt, &zp[2]))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "y's zero point must be one %s value", mcp_dtype_name(ydt));

    qmm_key k = {0, 1, a->dims[a->rank - 1], b->dims[b->rank - 1], 0};
    int64_t out[MCP_MAX_RANK];
    for (int d = 0; d < a->rank - 1; d++) out[d] = a->dims[d];
    out[a->rank - 1] = k.n;
    if (b->dims[b->rank - 2] != k.k)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "A has %lld columns but B has %lld rows", (long long)k.k,
                         (long long)b->dims[b->rank - 2]);
    if (b->rank == 2) {
        for (int d = 0; d < a->rank - 1; d++) k.m *= a->dims[d];
    } else {
        k.m = a->dims[a->rank - 2];
        k.batch = 1;
        for (int d = 0; d < a->rank - 2; d++) {
            if (a->dims[d] != b->dims[d])
                return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "batch dims of A and B differ (no broadcasting here)");
            k.batch *= a->dims[d];
        }
    }
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, ydt, a->rank, out);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    if (k.k == 0) {
        /* Empty sums: 0, requantized to y's zero point. */
        int64_t n = mcp_tensor_numel(y);
        for (int64_t i = 0; i < n; i++) {
            if (ydt == MCP_DTYPE_FLOAT) ((float *)y->data)[i] = st->bias ? ((const float *)st->bias->data)[i % k.n] : 0.0f;
            else if (ydt == MCP_DTYPE_INT32) ((int32_t *)y->data)[i] = 0;
            else if (ydt == MCP_DTYPE_UINT8) ((uint8_t *)y->data)[i] = (uint8_t)zp[2];
            else ((int8_t *)y->data)[i] = (int8_t)zp[2];
        }
        return MCP_STATUS_OK;
    }

    int prev = mcp__dnnl_serial_begin((k.batch ? k.batch : 1) * k.m * k.k * k.n, MCP_DNNL_SERIAL_MM_MACS);
    k.threads = omp_get_max_threads();
    qmm_prim local;
    const qmm_prim *p = NULL;
    mcp_status rs = qmm_lookup(ctx, st, &k, &local, &p);
    const void *bdata = p ? p->wdata : NULL;
    if (rs == MCP_STATUS_OK && !bdata) {
        if (st->b_u8) {
            int64_t n = mcp_tensor_numel(b);
            int8_t *s8 = mcp_kscratch(ctx, 1, (size_t)n);
            if (!s8) rs = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            for (int64_t i = 0; s8 && i < n; i++) s8[i] = (int8_t)((int)((const uint8_t *)b->data)[i] - 128);
            bdata = s8;
        } else {
            bdata = b->data;
        }
    }
    dnnl_memory_desc_t amd, bmd, ymd, zmd;
    dnnl_dims_t one = {1};
    dnnl_memory_t mem[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    if (rs == MCP_STATUS_OK &&
        (qmm_mds(&k, st->a_dt, st->y_dt, false, &amd, &bmd, &ymd) != dnnl_success ||
         dnnl_memory_desc_init_by_tag(&zmd, 1, one, dnnl_s32, dnnl_a) != dnnl_success))
        rs = mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory descriptor failed");
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &amd, a->data, &mem[0]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &p->wmd, bdata, &mem[1]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &ymd, y->data, &mem[2]);
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
    int nargs = 3;
    if (rs == MCP_STATUS_OK && st->a_zp_in >= 0) {
        rs = mcp__dnnl_wrap(ctx, &zmd, &zp[0], &mem[3]);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, mem[3]};
    }
    if (rs == MCP_STATUS_OK && b_zp_wanted(st)) {
        rs = mcp__dnnl_wrap(ctx, &zmd, &zp[1], &mem[4]);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_WEIGHTS, mem[4]};
    }
    if (rs == MCP_STATUS_OK && st->y_zp_in >= 0) {
        rs = mcp__dnnl_wrap(ctx, &zmd, &zp[2], &mem[5]);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, mem[5]};
    }
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_execute(ctx, p->prim, nargs, args);
    if (rs == MCP_STATUS_OK && st->scaled)
        scale_in_place(ctx, y->data, mcp_tensor_numel(y), k.n, scale, st->bias ? st->bias->data : NULL);
    for (int i = 0; i < 6; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    if (p == &local) qmm_prim_release(&local);
    mcp__dnnl_serial_end(prev);
    return rs;
}

/* An initializer B, once shifted or packed, is read no more. */
static bool qmm_release_plain(void *state, int input, bool commit)
{
    qmm_state *st = state;
    (void)commit;
    if (!st || input != st->b_in || !st->b_init) return false;
    return st->b_init == &st->b8;
}

const mcp_kernel_def mcp__dnnl_qlinear_matmul_kernel = {
    MCP_KERNEL_FIELDS("", "QLinearMatMul", 10, 0, qmm_run, NULL, qmm_prepare, qmm_release),
    .release_plain_input = qmm_release_plain,
};
const mcp_kernel_def mcp__dnnl_matmul_integer_kernel = {
    MCP_KERNEL_FIELDS("", "MatMulInteger", 10, 0, qmm_run, NULL, qmm_prepare, qmm_release),
    .release_plain_input = qmm_release_plain,
};
const mcp_kernel_def mcp__dnnl_matmul_integer_scaled_kernel = {
    MCP_KERNEL_FIELDS(MCP_DOMAIN_INTERNAL, "MatMulIntegerScaled", 1, 0, qmm_run, NULL, qmm_prepare, qmm_release),
    .release_plain_input = qmm_release_plain,
};
