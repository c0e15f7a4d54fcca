/*
 * oneDNN Gemm, FusedGemm and MatMul (fp32) on the matmul primitive.
 *
 * Gemm: transposes are expressed as strides of the plain operands, alpha as
 * an output scale. C goes in as the primitive's bias when it is a row
 * vector and alpha and beta are 1, else as a sum post-op over an output
 * pre-filled with the broadcast C (beta is the sum's scale).
 * FusedGemm appends its activation as eltwise post-ops; FusedMatMul is a
 * MatMul with a 2-D B, a bias row and an activation.
 *
 * MatMul covers A [..., M, K] x B [K, N] (A's leading dims flattened into M)
 * and operands of rank >= 2 whose batch dims broadcast numpy-style.
 *
 * Primitives are cached per problem (up to MM_CACHE_MAX per node, under a
 * mutex; execution is outside it). When B is an initializer, each cached
 * primitive reads it in the layout oneDNN prefers, reordered once.
 *
 * bf16 (see dnnl_util.h): a product with a constant 2-D B packs B as bf16
 * and converts A to bf16 per call (a reorder built with the primitive); Y
 * stays float32. Products of two activations stay float32.
 */
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

#define MM_CACHE_MAX 8
#define MM_MAX_RANK 6

/* One matmul problem. Batch dims are the broadcast output's; a_batch and
 * b_batch are each operand's own (1 where it broadcasts). nb = 0 when
 * unbatched (2-D). */
typedef struct mm_problem {
    int nb;
    int64_t batch[MM_MAX_RANK], a_batch[MM_MAX_RANK], b_batch[MM_MAX_RANK];
    int64_t m, k, n;
    int c_kind; /* Gemm: 0 none, 1 bias row, 2 sum over pre-filled C */
    int threads; /* the OpenMP budget it is built and run under (oneDNN fixes its split then) */
} mm_problem;

typedef struct mm_prim {
    mm_problem key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t wmd; /* B as the primitive reads it */
    const void *wdata;      /* the node's packed B, own, or NULL: read B in place */
    mcp_dnnl_packed own;    /* B in a layout other than the node's packed one */
    dnnl_primitive_t a_to_bf16; /* bf16 products: A's conversion, else NULL */
} mm_prim;

typedef struct mm_state {
    const mcp_node *node;
    bool gemm, fused;
    bool ta, tb;
    float alpha, beta;
    bool has_c;
    bool bf16; /* constant-B products compute in bf16 */
    const mcp_tensor *b_init; /* B when it is an initializer */
    mcp_dnnl_packed packed;   /* written under lock (or at load), before publishing */
    bool plain_gone;          /* the session freed B's plain data (after load) */
    pthread_mutex_t lock;
    int n_prims; /* entries [0, n_prims) never change once published */
    mm_prim prims[MM_CACHE_MAX];
} mm_state;

static const char *const gemm_attrs[] = {"alpha", "beta", "transA", "transB", NULL};
static const char *const fused_gemm_attrs[] = {"alpha", "beta", "transA", "transB",
                                               "activation", "activation_params", NULL};

bool mcp__dnnl_gemm_supported(const mcp_node *node, const mcp_graph *graph)
{
    bool fused = strcmp(node->op_type, "FusedGemm") == 0;
    if ((!fused && node->opset < 7) || node->n_inputs < 2 || node->n_inputs > 3 || node->n_outputs != 1)
        return false;
    if (!mcp__dnnl_attrs_within(node, fused ? fused_gemm_attrs : gemm_attrs)) return false;
    if (fused && !mcp__dnnl_append_activation(node, NULL)) return false;
    if (mcp__dnnl_f32_rank(node, graph, 0) != 2 || mcp__dnnl_f32_rank(node, graph, 1) != 2)
        return false;
    if (mcp__dnnl_input(node, graph, 2)) {
        int rc = mcp__dnnl_f32_rank(node, graph, 2);
        if (rc < 0 || rc > 2) return false;
    }
    return true;
}

bool mcp__dnnl_matmul_supported(const mcp_node *node, const mcp_graph *graph)
{
    if (strcmp(node->op_type, "FusedMatMul") == 0) {
        static const char *const attrs[] = {"activation", "activation_params", NULL};
        if (node->n_inputs < 2 || node->n_inputs > 3 || node->n_outputs != 1) return false;
        if (!mcp__dnnl_attrs_within(node, attrs) || !mcp__dnnl_append_activation(node, NULL)) return false;
        int ra = mcp__dnnl_f32_rank(node, graph, 0);
        if (ra < 2 || ra > MM_MAX_RANK + 2 || mcp__dnnl_f32_rank(node, graph, 1) != 2) return false;
        return !mcp__dnnl_input(node, graph, 2) || mcp__dnnl_f32_rank(node, graph, 2) == 1;
    }
    if (node->n_inputs != 2 || node->n_outputs != 1 || node->n_attrs != 0) return false;
    int ra = mcp__dnnl_f32_rank(node, graph, 0), rb = mcp__dnnl_f32_rank(node, graph, 1);
    return ra >= 2 && rb >= 2 && ra <= MM_MAX_RANK + 2 && rb <= MM_MAX_RANK + 2;
}

/* Fills the problem for MatMul operand shapes; false when they do not match. */
static bool matmul_problem(int ra, const int64_t *a, int rb, const int64_t *b, mm_problem *p)
{
    memset(p, 0, sizeof *p);
    if (ra < 2 || rb < 2 || ra > MM_MAX_RANK + 2 || rb > MM_MAX_RANK + 2) return false;
    p->k = a[ra - 1];
    p->n = b[rb - 1];
    if (b[rb - 2] != p->k) return false;
    if (rb == 2) {
        p->m = 1;
        for (int d = 0; d < ra - 1; d++) p->m *= a[d];
        return true;
    }
    p->m = a[ra - 2];
    int r = (ra > rb ? ra : rb) - 2;
    p->nb = r;
    for (int d = 0; d < r; d++) {
        int da = d - (r - (ra - 2)), db = d - (r - (rb - 2));
        int64_t x = da >= 0 ? a[da] : 1, y = db >= 0 ? b[db] : 1;
        if (x != y && x != 1 && y != 1) return false;
        p->a_batch[d] = x;
        p->b_batch[d] = y;
        p->batch[d] = x == 1 ? y : x;
    }
    return true;
}

static bool gemm_problem(const mm_state *st, const int64_t *a, const int64_t *b, mm_problem *p)
{
    memset(p, 0, sizeof *p);
    p->m = st->ta ? a[1] : a[0];
    p->k = st->ta ? a[0] : a[1];
    p->n = st->tb ? b[0] : b[1];
    return (st->tb ? b[1] : b[0]) == p->k;
}

/* How Gemm applies C of the given shape: 1 bias row, 2 sum, 0 none; -1
 * when it does not broadcast to [m, n]. */
static int gemm_c_kind(const mm_state *st, const mcp_tensor *c, const mm_problem *p)
{
    if (!st->has_c || st->beta == 0.0f) return 0;
    if (!c || c->dtype != MCP_DTYPE_FLOAT || c->rank > 2) return -1;
    int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
    if ((cm != 1 && cm != p->m) || (cn != 1 && cn != p->n)) return -1;
    return cm == 1 && cn == p->n && st->alpha == 1.0f && st->beta == 1.0f ? 1 : 2;
}

/* Descriptor of a row-major [batch..., rows, cols] operand (the matrix
 * stored transposed when `trans`). */
static dnnl_status_t matrix_md(dnnl_memory_desc_t *md, int nb, const int64_t *batch, int64_t rows,
                               int64_t cols, bool trans, dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {0}, strides = {0};
    int nd = nb + 2;
    dims[nb] = rows;
    dims[nb + 1] = cols;
    strides[nb] = trans ? 1 : cols;
    strides[nb + 1] = trans ? rows : 1;
    int64_t step = rows * cols;
    for (int d = nb - 1; d >= 0; d--) {
        dims[d] = batch[d];
        strides[d] = step;
        step *= batch[d];
    }
    return dnnl_memory_desc_init_by_strides(md, nd, dims, dt, strides);
}

static dnnl_status_t bias_md(dnnl_memory_desc_t *md, int64_t n)
{
    dnnl_dims_t d = {1, n};
    return dnnl_memory_desc_init_by_tag(md, 2, d, dnnl_f32, dnnl_ab);
}

static void mm_prim_release(mm_prim *mp)
{
    if (mp->prim) dnnl_primitive_destroy(mp->prim);
    if (mp->a_to_bf16) dnnl_primitive_destroy(mp->a_to_bf16);
    mcp__dnnl_packed_release(&mp->own);
    memset(mp, 0, sizeof *mp);
}

/* Creates mp->prim for p with B described by wmd (may be format_tag_any). */
static dnnl_status_t mm_create(const mm_state *st, const mm_problem *p, const dnnl_memory_desc_t *wmd,
                               mm_prim *mp)
{
    dnnl_memory_desc_t a_md, y_md, c_md;
    dnnl_status_t s = matrix_md(&a_md, p->nb, p->a_batch, p->m, p->k, st->ta, wmd->data_type);
    if (s == dnnl_success) s = matrix_md(&y_md, p->nb, p->batch, p->m, p->n, false, dnnl_f32);
    if (s == dnnl_success && p->c_kind == 1) s = bias_md(&c_md, p->n);
    dnnl_matmul_desc_t md;
    if (s == dnnl_success) s = dnnl_matmul_desc_init(&md, &a_md, wmd, p->c_kind == 1 ? &c_md : NULL, &y_md);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if (s == dnnl_success) s = mcp__dnnl_attr_create(&attr);
    if (s == dnnl_success && st->alpha != 1.0f)
        s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &st->alpha);
    if (s == dnnl_success) s = dnnl_post_ops_create(&po);
    if (s == dnnl_success && p->c_kind == 2) s = dnnl_post_ops_append_sum(po, st->beta);
    if (s == dnnl_success && st->fused && !mcp__dnnl_append_activation(st->node, po))
        s = dnnl_unimplemented;
    if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &md, attr, mcp__dnnl_engine(), NULL);
    if (s == dnnl_success) {
        mp->wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        s = dnnl_primitive_create(&mp->prim, pd);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) mp->prim = NULL;
    return s;
}

/*
 * Builds the primitive for p. With `prepack` (B an initializer, not
 * batched) oneDNN picks B's layout; B is packed once per node for the first
 * problem built, and again per primitive only when a problem wants another
 * layout (see mcp__dnnl_weights_for).
 */
static mcp_status mm_build(mm_state *st, const mm_problem *p, bool prepack, mm_prim *mp, mcp_err *err)
{
    memset(mp, 0, sizeof *mp);
    mp->key = *p;
    dnnl_memory_desc_t b_md, b_any, a_md, a16_md;
    dnnl_dims_t bd = {p->k, p->n};
    bool bf16 = st->bf16 && prepack;
    dnnl_status_t s = matrix_md(&b_md, p->nb, p->b_batch, p->k, p->n, st->tb, dnnl_f32);
    if (s == dnnl_success)
        s = dnnl_memory_desc_init_by_tag(&b_any, 2, bd, bf16 ? dnnl_bf16 : dnnl_f32, dnnl_format_tag_any);
    if (s == dnnl_success && bf16) s = matrix_md(&a_md, p->nb, p->a_batch, p->m, p->k, st->ta, dnnl_f32);
    if (s == dnnl_success && bf16) s = matrix_md(&a16_md, p->nb, p->a_batch, p->m, p->k, st->ta, dnnl_bf16);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "memory descriptor");
    s = mm_create(st, p, prepack ? &b_any : &b_md, mp);
    if (s == dnnl_success && bf16) s = mcp__dnnl_reorder_create(&a_md, &a16_md, &mp->a_to_bf16);
    if (s != dnnl_success) {
        mm_prim_release(mp);
        return mcp__dnnl_fail(err, s, "matmul primitive");
    }
    if (!prepack) mp->wmd = b_md;
    if (!st->b_init) return MCP_STATUS_OK; /* B is read in place */
    mcp_status rs = mcp__dnnl_weights_for(&st->packed, st->plain_gone, &b_md, st->b_init->data, &mp->wmd, &mp->own,
                                          &mp->wdata, err);
    if (rs != MCP_STATUS_OK) mm_prim_release(mp);
    return rs;
}

static bool mm_release_plain(void *state, int input, bool commit)
{
    mm_state *st = state;
    /* Batched (3-D and up) initializers are read plain. */
    if (!st || input != 1 || !st->b_init || st->b_init->rank != 2 || !st->packed.have) return false;
    if (commit) st->plain_gone = true;
    return true;
}

static bool mm_packed_weights(const void *state, int slot, mcp_prepacked *out)
{
    const mm_state *st = state;
    return st && slot == 0 && mcp__dnnl_packed_view(&st->packed, out);
}

/* Products with a constant B that is not batched (see mm_build). */
static bool mm_computes_bf16(const void *state)
{
    const mm_state *st = state;
    return st->bf16 && st->b_init && st->b_init->rank <= 2;
}

static void mm_release(void *state)
{
    mm_state *st = state;
    if (!st) return;
    for (int i = 0; i < st->n_prims; i++) mm_prim_release(&st->prims[i]);
    mcp__dnnl_packed_release(&st->packed);
    pthread_mutex_destroy(&st->lock);
    mcp_free(st);
}

/* Small problems run on one thread (mcp__dnnl_serial_begin). */
static int mm_serial_begin(const mm_problem *p)
{
    int64_t macs = p->m * p->n * p->k;
    for (int d = 0; d < p->nb; d++) macs *= p->batch[d];
    return mcp__dnnl_serial_begin(macs, MCP_DNNL_SERIAL_MM_MACS);
}

/* The row count a 2-D problem of m rows (A not transposed) runs with on
 * `threads` threads. Without AVX-512, oneDNN's fp32 matmul is its gemm,
 * whose kernel takes rows six at a time; a tail of one to three rows goes
 * through narrower kernels that sum in another order (a tail of four or
 * five does not), and with several threads each thread's share of the rows
 * has its own tail. The same row would then come out with other last bits
 * depending on what it is batched with. So a tail of one to three rows is
 * padded to four, and rows that several threads share are padded to a
 * multiple of six per thread (oneDNN gives the threads equal shares); every
 * row then gets the full kernel's bits and a request's answer does not
 * depend on its batch. The padding rows are zeros, their results dropped.
 * With AVX-512 (brgemm matmul) rows are independent already.
 *
 * Not padded, so not batch-independent yet: one to three rows of a large
 * product (at least MCP_DNNL_SERIAL_MM_MACS multiply-adds), which oneDNN
 * runs as matrix-vector products four to five times faster than as four
 * rows (a 2048 x 2048 weight at one row: 0.2 ms against 1.0 ms); and a
 * share large enough for oneDNN to block its rows again (about a thousand
 * rows of a short reduction), whose blocks have tails of their own. */
static int64_t mm_rows(const mm_state *st, const mm_problem *p, int threads)
{
    if (p->nb != 0 || st->ta) return p->m;
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if ((isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core) return p->m;
    if (p->m < 4 && p->m * p->n * p->k >= MCP_DNNL_SERIAL_MM_MACS) return p->m;
    const int64_t unit = 6 * (int64_t)threads;
    if (threads > 1 && p->m >= unit) return (p->m + unit - 1) / unit * unit;
    const int64_t t = p->m % 6;
    return t >= 1 && t <= 3 ? p->m + 4 - t : p->m;
}

static bool can_prepack(const mm_state *st, const mm_problem *p)
{
    return st->b_init && p->nb == 0;
}

static mcp_status mm_prepare(const mcp_node *node, const mcp_graph *graph, void **state,
                             mcp_err *err)
{
    *state = NULL;
    if (!mcp__dnnl_engine()) return mcp_err_set(err, MCP_STATUS_INTERNAL, "oneDNN engine creation failed");
    mm_state *st = mcp_calloc(1, sizeof *st);
    if (!st) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&st->lock, NULL);
    st->node = node;
    st->fused = strcmp(node->op_type, "FusedGemm") == 0 || strcmp(node->op_type, "FusedMatMul") == 0;
    st->gemm = strcmp(node->op_type, "FusedGemm") == 0 || strcmp(node->op_type, "Gemm") == 0;
    st->alpha = 1.0f;
    st->b_init = mcp__dnnl_initializer(node, graph, 1);
    if (st->gemm) {
        st->ta = mcp_node_attr_int(node, "transA", 0) != 0;
        st->tb = mcp_node_attr_int(node, "transB", 0) != 0;
        st->alpha = mcp_node_attr_float(node, "alpha", 1.0f);
        st->beta = mcp_node_attr_float(node, "beta", 1.0f);
        st->has_c = mcp__dnnl_input(node, graph, 2) != NULL;
    } else {
        st->beta = 1.0f;
        st->has_c = mcp__dnnl_input(node, graph, 2) != NULL; /* FusedMatMul's bias */
    }
    st->bf16 = mcp__dnnl_bf16_for(graph);
    /* A compiled model's packed B replaces the plain one (2-D B only: a
     * batched B is read in place). */
    if (st->b_init && st->b_init->rank == 2 && mcp__dnnl_packed_adopt(&st->packed, graph, node))
        st->plain_gone = st->b_init->data == NULL;
    if (st->b_init && !st->b_init->data && mcp_tensor_numel(st->b_init) > 0 && !st->packed.have) {
        mm_release(st);
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "input 'B' is held packed only, and no packed copy fits");
    }
    /* Built at load for the static shapes, unknown dims taken as 1 (the
     * batch-1 problem): that also packs B. */
    int64_t a[MCP_MAX_RANK], b[MCP_MAX_RANK], c[MCP_MAX_RANK];
    int ra = mcp__dnnl_f32_rank(node, graph, 0), rb = mcp__dnnl_f32_rank(node, graph, 1);
    mm_problem p;
    bool known = mcp__dnnl_dims_or_one(node, graph, 0, a) && mcp__dnnl_dims_or_one(node, graph, 1, b) &&
                 (st->gemm ? gemm_problem(st, a, b, &p) : matmul_problem(ra, a, rb, b, &p)) &&
                 p.m > 0 && p.n > 0 && p.k > 0;
    if (known && st->gemm && st->has_c) {
        mcp_tensor ct = {.dtype = MCP_DTYPE_FLOAT, .rank = mcp__dnnl_f32_rank(node, graph, 2)};
        known = mcp__dnnl_dims_or_one(node, graph, 2, c);
        memcpy(ct.dims, c, sizeof c);
        p.c_kind = known ? gemm_c_kind(st, &ct, &p) : -1;
        known = p.c_kind >= 0;
    }
    if (known && !st->gemm && st->has_c) p.c_kind = p.nb == 0 ? 1 : -1;
    known = known && p.c_kind >= 0;
    /* A shape oneDNN cannot build here is left to the run path. */
    if (known) {
        int prev = mm_serial_begin(&p);
        p.m = mm_rows(st, &p, omp_get_max_threads()); /* the shape mm_run gives it */
        p.threads = omp_get_max_threads();
        if (mm_build(st, &p, can_prepack(st, &p), &st->prims[0], NULL) == MCP_STATUS_OK) st->n_prims = 1;
        mcp__dnnl_serial_end(prev);
    }
    mcp_status rs = MCP_STATUS_OK;
    if (st->b_init) rs = mcp__dnnl_packed_settle(&st->packed, st->b_init->data != NULL, &st->plain_gone, err);
    if (rs != MCP_STATUS_OK) {
        mm_release(st);
        return rs;
    }
    *state = st;
    return MCP_STATUS_OK;
}

/* Writes the broadcast C into y [m, n] (the sum post-op scales it). */
static void fill_c(const mcp_tensor *c, int64_t m, int64_t n, float *y)
{
    int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
    const float *cv = c->data;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) y[i * n + j] = cv[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
}

static mcp_status mm_lookup(mcp_kernel_ctx *ctx, mm_state *st, const mm_problem *p, mm_prim *local,
                            const mm_prim **out)
{
    *out = NULL;
    mcp_status rs = MCP_STATUS_OK;
    pthread_mutex_lock(&st->lock);
    for (int i = 0; i < st->n_prims && !*out; i++)
        if (memcmp(&st->prims[i].key, p, sizeof *p) == 0) *out = &st->prims[i];
    if (!*out && st->n_prims < MM_CACHE_MAX) {
        rs = mm_build(st, p, can_prepack(st, p), &st->prims[st->n_prims], ctx->err);
        if (rs == MCP_STATUS_OK) *out = &st->prims[st->n_prims++];
    }
    /* A per-call primitive once the cache is full, also under the lock:
     * packing for it may write the node's packed weights. */
    if (rs == MCP_STATUS_OK && !*out) {
        rs = mm_build(st, p, can_prepack(st, p), local, ctx->err);
        if (rs == MCP_STATUS_OK) *out = local;
    }
    pthread_mutex_unlock(&st->lock);
    if (rs != MCP_STATUS_OK) mcp_err_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    return rs;
}

static mcp_status mm_run(mcp_kernel_ctx *ctx)
{
    mm_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    const mcp_tensor *a = mcp_kin(ctx, 0), *b = mcp_kin(ctx, 1), *c = mcp_kin(ctx, 2);
    if (!a || !b || a->dtype != MCP_DTYPE_FLOAT || b->dtype != MCP_DTYPE_FLOAT)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A' and 'B' must be float tensors");
    mm_problem p;
    int64_t ydims[MCP_MAX_RANK];
    int yrank;
    if (st->gemm) {
        if (a->rank != 2 || b->rank != 2 || !gemm_problem(st, a->dims, b->dims, &p))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A' and 'B' have incompatible shapes");
        p.c_kind = gemm_c_kind(st, c, &p);
        if (p.c_kind < 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'C' must be a float tensor broadcasting to (%lld, %lld)",
                             (long long)p.m, (long long)p.n);
        yrank = 2;
        ydims[0] = p.m;
        ydims[1] = p.n;
    } else {
        if (!matmul_problem(a->rank, a->dims, b->rank, b->dims, &p))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A' and 'B' have incompatible shapes");
        if (st->has_c) {
            if (!c || c->dtype != MCP_DTYPE_FLOAT || c->rank != 1 || c->dims[0] != p.n || p.nb != 0)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'Bias' must be a float vector of %lld",
                                 (long long)p.n);
            p.c_kind = 1;
        }
        if (p.nb == 0) {
            yrank = a->rank;
            memcpy(ydims, a->dims, sizeof(int64_t) * (size_t)a->rank);
        } else {
            yrank = p.nb + 2;
            memcpy(ydims, p.batch, sizeof(int64_t) * (size_t)p.nb);
            ydims[p.nb] = p.m;
        }
        ydims[yrank - 1] = p.n;
    }
    mcp_tensor *y = mcp_kout(ctx, 0, MCP_DTYPE_FLOAT, yrank, ydims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    float *yv = y->data;
    if (p.c_kind == 2) fill_c(c, p.m, p.n, yv);
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    if (p.k == 0) {
        /* An empty reduction: the product is zero and only beta * C remains,
         * then the activation. Rare enough for the reference path. */
        if (p.c_kind == 1) fill_c(c, p.m, p.n, yv);
        float scale = p.c_kind == 2 ? st->beta : 1.0f;
        for (int64_t i = 0; i < p.m * p.n; i++) yv[i] *= scale;
        if (st->fused && mcp_node_attr_string(st->node, "activation", NULL))
            return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "an empty reduction with an activation");
        return MCP_STATUS_OK;
    }
    /* Rows padded as mm_rows says (zeros), run through scratch. */
    float *ya = yv, *pad = NULL;
    const float *av = a->data;
    int prev_threads = mm_serial_begin(&p);
    const int64_t m = p.m, rows = mm_rows(st, &p, omp_get_max_threads());
    if (rows != m) {
        size_t an = (size_t)(rows * p.k), yn = (size_t)(rows * p.n);
        pad = mcp_kscratch(ctx, 1, sizeof(float) * (an + yn));
        if (!pad) {
            mcp__dnnl_serial_end(prev_threads);
            return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(pad, a->data, sizeof(float) * (size_t)(m * p.k));
        memset(pad + m * p.k, 0, sizeof(float) * (size_t)((rows - m) * p.k));
        av = pad;
        ya = pad + an;
        if (p.c_kind == 2) {
            memcpy(ya, yv, sizeof(float) * (size_t)(m * p.n));
            memset(ya + m * p.n, 0, sizeof(float) * (size_t)((rows - m) * p.n));
        }
        p.m = rows;
    }
    mm_prim local;
    const mm_prim *mp = NULL;
    p.threads = omp_get_max_threads();
    mcp_status rs = mm_lookup(ctx, st, &p, &local, &mp);
    if (rs != MCP_STATUS_OK) {
        mcp__dnnl_serial_end(prev_threads);
        return rs;
    }
    dnnl_memory_desc_t a_md, y_md, c_md;
    dnnl_memory_t mem[4] = {NULL, NULL, NULL, NULL};
    if (matrix_md(&a_md, p.nb, p.a_batch, p.m, p.k, st->ta, dnnl_f32) != dnnl_success ||
        matrix_md(&y_md, p.nb, p.batch, p.m, p.n, false, dnnl_f32) != dnnl_success ||
        bias_md(&c_md, p.n) != dnnl_success)
        rs = mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory descriptor failed");
    if (rs == MCP_STATUS_OK && mp->a_to_bf16) {
        /* bf16: A converted into scratch (rows are never padded here: bf16
         * needs AVX-512, where mm_rows pads none). */
        MCP_ASSERT(!pad);
        dnnl_memory_desc_t a16_md;
        void *a16 = NULL;
        if (matrix_md(&a16_md, p.nb, p.a_batch, p.m, p.k, st->ta, dnnl_bf16) != dnnl_success)
            rs = mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory descriptor failed");
        else if (!(a16 = mcp_kscratch(ctx, 1, dnnl_memory_desc_get_size(&a16_md))))
            rs = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        dnnl_memory_t ra[2] = {NULL, NULL};
        if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &a_md, av, &ra[0]);
        if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &a16_md, a16, &ra[1]);
        if (rs == MCP_STATUS_OK) {
            dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, ra[0]}, {DNNL_ARG_TO, ra[1]}};
            rs = mcp__dnnl_execute(ctx, mp->a_to_bf16, 2, args);
        }
        for (int i = 0; i < 2; i++)
            if (ra[i]) dnnl_memory_destroy(ra[i]);
        a_md = a16_md;
        av = a16;
    }
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &a_md, (void *)av, &mem[0]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &mp->wmd, mp->wdata ? mp->wdata : b->data, &mem[1]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &y_md, ya, &mem[2]);
    if (rs == MCP_STATUS_OK && p.c_kind == 1) rs = mcp__dnnl_wrap(ctx, &c_md, c->data, &mem[3]);
    if (rs == MCP_STATUS_OK) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mem[0]},
                                   {DNNL_ARG_WEIGHTS, mem[1]},
                                   {DNNL_ARG_DST, mem[2]},
                                   {DNNL_ARG_BIAS, mem[3]}};
        rs = mcp__dnnl_execute(ctx, mp->prim, p.c_kind == 1 ? 4 : 3, args);
    }
    mcp__dnnl_serial_end(prev_threads);
    for (int i = 0; i < 4; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    if (mp == &local) mm_prim_release(&local);
    if (rs == MCP_STATUS_OK && pad) memcpy(yv, ya, sizeof(float) * (size_t)(m * p.n));
    return rs;
}

const mcp_kernel_def mcp__dnnl_gemm_kernel = {
    MCP_KERNEL_FIELDS("", "Gemm", 7, 0, mm_run, NULL, mm_prepare, mm_release),
    .release_plain_input = mm_release_plain,
    .packed_weights = mm_packed_weights,
    .computes_bf16 = mm_computes_bf16,
};
const mcp_kernel_def mcp__dnnl_fused_gemm_kernel = {
    MCP_KERNEL_FIELDS(MCP_DOMAIN_INTERNAL, "FusedGemm", 1, 0, mm_run, NULL, mm_prepare, mm_release),
    .release_plain_input = mm_release_plain,
    .packed_weights = mm_packed_weights,
    .computes_bf16 = mm_computes_bf16,
};
const mcp_kernel_def mcp__dnnl_fused_matmul_kernel = {
    MCP_KERNEL_FIELDS(MCP_DOMAIN_INTERNAL, "FusedMatMul", 1, 0, mm_run, NULL, mm_prepare, mm_release),
    .release_plain_input = mm_release_plain,
    .packed_weights = mm_packed_weights,
    .computes_bf16 = mm_computes_bf16,
};
const mcp_kernel_def mcp__dnnl_matmul_kernel = {
    MCP_KERNEL_FIELDS("", "MatMul", 1, 0, mm_run, NULL, mm_prepare, mm_release),
    .release_plain_input = mm_release_plain,
    .packed_weights = mm_packed_weights,
    .computes_bf16 = mm_computes_bf16,
};
