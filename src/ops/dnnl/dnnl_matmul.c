/*
 * oneDNN Gemm and MatMul (fp32) on the matmul primitive with plain layouts;
 * transposes are expressed as strides, alpha as an output scale and beta * C
 * as a sum post-op over an output pre-filled with the broadcast C.
 *
 * MatMul covers A [..., M, K] x B [K, N] (A's leading dims flattened into M)
 * and equal-rank operands whose batch dims are statically equal (flattened
 * into one batch dim).
 */
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

/* One matmul problem: batch (0 = not batched), sizes and the node's scalars. */
typedef struct mm_problem {
    int64_t batch, m, k, n;
} mm_problem;

typedef struct mm_state {
    dnnl_engine_t eng;
    bool gemm;
    bool ta, tb, use_sum;
    float alpha, beta;
    bool have_prebuilt;
    mm_problem key;
    dnnl_primitive_t prebuilt;
} mm_state;

static const char *const gemm_attrs[] = {"alpha", "beta", "transA", "transB", NULL};

bool mcp__dnnl_gemm_supported(const mcp_node *node, const mcp_graph *graph)
{
    if (node->opset < 7 || node->n_inputs < 2 || node->n_inputs > 3 || node->n_outputs != 1)
        return false;
    if (!mcp__dnnl_attrs_within(node, gemm_attrs)) return false;
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
    if (node->n_inputs != 2 || node->n_outputs != 1 || node->n_attrs != 0) return false;
    int ra = mcp__dnnl_f32_rank(node, graph, 0), rb = mcp__dnnl_f32_rank(node, graph, 1);
    if (ra < 2 || ra > 6 || rb < 2) return false;
    if (rb == 2) return true;
    if (ra != rb) return false;
    int64_t a[MCP_MAX_RANK], b[MCP_MAX_RANK];
    if (!mcp__dnnl_static_dims(node, graph, 0, a) || !mcp__dnnl_static_dims(node, graph, 1, b))
        return false;
    for (int d = 0; d < ra - 2; d++)
        if (a[d] != b[d]) return false;
    return true;
}

/* Fills the problem for MatMul operand shapes; false when they do not match. */
static bool matmul_problem(int ra, const int64_t *a, int rb, const int64_t *b, mm_problem *p)
{
    if (ra < 2 || rb < 2) return false;
    p->k = a[ra - 1];
    p->n = b[rb - 1];
    if (b[rb - 2] != p->k) return false;
    if (rb == 2) {
        p->batch = 0;
        p->m = 1;
        for (int d = 0; d < ra - 1; d++) p->m *= a[d];
        return true;
    }
    if (ra != rb) return false;
    p->batch = 1;
    for (int d = 0; d < ra - 2; d++) {
        if (a[d] != b[d]) return false;
        p->batch *= a[d];
    }
    p->m = a[ra - 2];
    return true;
}

static bool gemm_problem(const mm_state *st, const int64_t *a, const int64_t *b, mm_problem *p)
{
    p->batch = 0;
    p->m = st->ta ? a[1] : a[0];
    p->k = st->ta ? a[0] : a[1];
    p->n = st->tb ? b[0] : b[1];
    return (st->tb ? b[1] : b[0]) == p->k;
}

/* Descriptor of a row-major [rows, cols] matrix (stored transposed when
 * `trans`), with an optional leading batch dim. */
static dnnl_status_t matrix_md(dnnl_memory_desc_t *md, int64_t batch, int64_t rows, int64_t cols,
                               bool trans)
{
    dnnl_dims_t dims = {0}, strides = {0};
    int nd = 0;
    if (batch > 0) {
        dims[nd] = batch;
        strides[nd++] = rows * cols;
    }
    dims[nd] = rows;
    strides[nd++] = trans ? 1 : cols;
    dims[nd] = cols;
    strides[nd++] = trans ? rows : 1;
    return dnnl_memory_desc_init_by_strides(md, nd, dims, dnnl_f32, strides);
}

static mcp_status mm_build(const mm_state *st, const mm_problem *p, dnnl_primitive_t *prim,
                           mcp_err *err)
{
    *prim = NULL;
    dnnl_memory_desc_t a_md, b_md, y_md;
    dnnl_status_t s = matrix_md(&a_md, p->batch, p->m, p->k, st->ta);
    if (s == dnnl_success) s = matrix_md(&b_md, p->batch, p->k, p->n, st->tb);
    if (s == dnnl_success) s = matrix_md(&y_md, p->batch, p->m, p->n, false);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "memory descriptor");
    dnnl_matmul_desc_t md;
    s = dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &y_md);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "matmul descriptor");
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    s = mcp__dnnl_attr_create(&attr);
    if (s == dnnl_success && st->alpha != 1.0f)
        s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &st->alpha);
    if (s == dnnl_success && st->use_sum) {
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success) s = dnnl_post_ops_append_sum(po, st->beta);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &md, attr, st->eng, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(prim, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) {
        *prim = NULL;
        return mcp__dnnl_fail(err, s, "matmul primitive");
    }
    return MCP_STATUS_OK;
}

static void mm_release(void *state)
{
    mm_state *st = state;
    if (!st) return;
    if (st->prebuilt) dnnl_primitive_destroy(st->prebuilt);
    if (st->eng) dnnl_engine_destroy(st->eng);
    mcp_free(st);
}

static mcp_status mm_prepare(const mcp_node *node, const mcp_graph *graph, void **state,
                             mcp_err *err)
{
    *state = NULL;
    mm_state *st = mcp_calloc(1, sizeof *st);
    if (!st) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    st->gemm = strcmp(node->op_type, "Gemm") == 0;
    st->alpha = 1.0f;
    if (st->gemm) {
        st->ta = mcp_node_attr_int(node, "transA", 0) != 0;
        st->tb = mcp_node_attr_int(node, "transB", 0) != 0;
        st->alpha = mcp_node_attr_float(node, "alpha", 1.0f);
        st->beta = mcp_node_attr_float(node, "beta", 1.0f);
        st->use_sum = mcp__dnnl_input(node, graph, 2) != NULL && st->beta != 0.0f;
    }
    dnnl_status_t s = dnnl_engine_create(&st->eng, dnnl_cpu, 0);
    if (s != dnnl_success) {
        st->eng = NULL;
        mm_release(st);
        return mcp__dnnl_fail(err, s, "engine creation");
    }
    int64_t a[MCP_MAX_RANK], b[MCP_MAX_RANK];
    int ra = mcp__dnnl_f32_rank(node, graph, 0), rb = mcp__dnnl_f32_rank(node, graph, 1);
    mm_problem p;
    if (mcp__dnnl_static_dims(node, graph, 0, a) && mcp__dnnl_static_dims(node, graph, 1, b) &&
        (st->gemm ? gemm_problem(st, a, b, &p) : matmul_problem(ra, a, rb, b, &p)) &&
        p.m > 0 && p.n > 0 && p.k > 0 && p.batch >= 0) {
        /* A shape oneDNN cannot build here is left to the per-call path. */
        if (mm_build(st, &p, &st->prebuilt, NULL) == MCP_STATUS_OK) {
            st->key = p;
            st->have_prebuilt = true;
        }
    }
    *state = st;
    return MCP_STATUS_OK;
}

/* Writes beta-free C broadcast into y [m, n]; false when C does not broadcast. */
static bool fill_c(const mcp_tensor *c, int64_t m, int64_t n, float *y)
{
    int64_t cm = 1, cn = 1;
    if (c->rank == 2) {
        cm = c->dims[0];
        cn = c->dims[1];
    } else if (c->rank == 1) {
        cn = c->dims[0];
    } else if (c->rank != 0) {
        return false;
    }
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n)) return false;
    const float *cv = c->data;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) y[i * n + j] = cv[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
    return true;
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
        if (st->use_sum && (!c || c->dtype != MCP_DTYPE_FLOAT))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'C' must be a float tensor");
        yrank = 2;
        ydims[0] = p.m;
        ydims[1] = p.n;
    } else {
        if (!matmul_problem(a->rank, a->dims, b->rank, b->dims, &p))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'A' and 'B' have incompatible shapes");
        yrank = a->rank;
        memcpy(ydims, a->dims, sizeof(int64_t) * (size_t)a->rank);
        ydims[yrank - 1] = p.n;
    }
    mcp_tensor *y = mcp_kout(ctx, 0, MCP_DTYPE_FLOAT, yrank, ydims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    float *yv = y->data;
    if (st->use_sum && !fill_c(c, p.m, p.n, yv))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'C' does not broadcast to (%lld, %lld)",
                         (long long)p.m, (long long)p.n);
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    if (p.k == 0) {
        /* An empty reduction: the product is zero and only beta * C remains. */
        if (st->use_sum)
            for (int64_t i = 0; i < p.m * p.n; i++) yv[i] *= st->beta;
        return MCP_STATUS_OK;
    }
    dnnl_primitive_t prim = st->prebuilt;
    bool use_local = !st->have_prebuilt || memcmp(&st->key, &p, sizeof p) != 0;
    if (use_local) {
        mcp_status rs = mm_build(st, &p, &prim, ctx->err);
        if (rs != MCP_STATUS_OK) {
            mcp_err_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
            return rs;
        }
    }
    dnnl_memory_desc_t a_md, b_md, y_md;
    dnnl_memory_t mem[3] = {NULL, NULL, NULL};
    mcp_status rs = MCP_STATUS_OK;
    if (matrix_md(&a_md, p.batch, p.m, p.k, st->ta) != dnnl_success ||
        matrix_md(&b_md, p.batch, p.k, p.n, st->tb) != dnnl_success ||
        matrix_md(&y_md, p.batch, p.m, p.n, false) != dnnl_success)
        rs = mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory descriptor failed");
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, st->eng, &a_md, a->data, &mem[0]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, st->eng, &b_md, b->data, &mem[1]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, st->eng, &y_md, y->data, &mem[2]);
    if (rs == MCP_STATUS_OK) {
        dnnl_exec_arg_t args[3] = {
            {DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
        rs = mcp__dnnl_execute(ctx, st->eng, prim, 3, args);
    }
    for (int i = 0; i < 3; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    if (use_local) dnnl_primitive_destroy(prim);
    return rs;
}

const mcp_kernel_def mcp__dnnl_gemm_kernel = {
    "", "Gemm", 7, 0, mm_run, NULL, mm_prepare, mm_release,
};
const mcp_kernel_def mcp__dnnl_matmul_kernel = {
    "", "MatMul", 1, 0, mm_run, NULL, mm_prepare, mm_release,
};
