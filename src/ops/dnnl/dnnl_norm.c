/*
 * oneDNN LayerNormalization (ONNX opset 17 and the graph passes' internal
 * op, last axis only, Y output only) and elementwise activations (Relu,
 * LeakyRelu, Sigmoid, Tanh, and Gelu: ONNX opset 20 and the internal op) on
 * fp32 tensors; Softmax and LogSoftmax on plain fp32 tensors (about 3x the
 * reference kernel's speed on BERT's [12, 128, 128] attention scores).
 *
 * The activations read any layout and write the same one, so they stay in
 * a convolution's blocked layout; LayerNorm reads plain [rows, last] data.
 * Primitives are cached per input descriptor.
 */
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

typedef struct elt_state {
    mcp_dnnl_cached c;
    dnnl_alg_kind_t alg;
    float alpha, beta;
    float epsilon;   /* LayerNorm */
    bool has_shift;  /* LayerNorm */
} elt_state;

static bool is_internal(const mcp_node *node) { return strcmp(node->domain, MCP_DOMAIN_INTERNAL) == 0; }

/* The eltwise algorithm for node, or 0 when it is not one we run. */
static dnnl_alg_kind_t elt_alg(const mcp_node *node, float *alpha)
{
    const char *op = node->op_type;
    *alpha = 0.0f;
    if (is_internal(node)) return strcmp(op, "Gelu") == 0 && node->n_attrs == 0 ? dnnl_eltwise_gelu_erf : 0;
    if (strcmp(node->domain, "") != 0) return 0;
    if (strcmp(op, "Relu") == 0 && node->opset >= 6 && node->n_attrs == 0) return dnnl_eltwise_relu;
    if (strcmp(op, "Sigmoid") == 0 && node->opset >= 6 && node->n_attrs == 0) return dnnl_eltwise_logistic;
    if (strcmp(op, "Tanh") == 0 && node->opset >= 6 && node->n_attrs == 0) return dnnl_eltwise_tanh;
    static const char *const leaky[] = {"alpha", NULL};
    if (strcmp(op, "LeakyRelu") == 0 && node->opset >= 6 && mcp__dnnl_attrs_within(node, leaky)) {
        *alpha = mcp_node_attr_float(node, "alpha", 0.01f);
        return dnnl_eltwise_relu;
    }
    static const char *const gelu[] = {"approximate", NULL};
    if (strcmp(op, "Gelu") == 0 && node->opset >= 20 && mcp__dnnl_attrs_within(node, gelu)) {
        const char *a = mcp_node_attr_string(node, "approximate", "none");
        return strcmp(a, "none") == 0 ? dnnl_eltwise_gelu_erf : strcmp(a, "tanh") == 0 ? dnnl_eltwise_gelu_tanh : 0;
    }
    return 0;
}

bool mcp__dnnl_eltwise_supported(const mcp_node *node, const mcp_graph *graph)
{
    float alpha;
    if (!elt_alg(node, &alpha) || node->n_inputs != 1 || node->n_outputs != 1) return false;
    int r = mcp__dnnl_f32_rank(node, graph, 0);
    return r >= 1 && r <= 6;
}

bool mcp__dnnl_layernorm_supported(const mcp_node *node, const mcp_graph *graph)
{
    if (strcmp(node->op_type, "LayerNormalization") != 0) return false;
    if (!is_internal(node) && (strcmp(node->domain, "") != 0 || node->opset < 17)) return false;
    static const char *const attrs[] = {"axis", "epsilon", "stash_type", NULL};
    if (!mcp__dnnl_attrs_within(node, attrs) || mcp_node_attr_int(node, "stash_type", 1) != 1) return false;
    if (node->n_inputs < 2 || node->n_inputs > 3 || node->n_outputs < 1) return false;
    for (int i = 1; i < node->n_outputs; i++)
        if (node->outputs[i] >= 0) return false; /* Mean / InvStdDev are the reference kernel's */
    int r = mcp__dnnl_f32_rank(node, graph, 0);
    if (r < 2 || r > 6) return false;
    int64_t axis = mcp_node_attr_int(node, "axis", -1);
    if (axis != -1 && axis != r - 1) return false;
    if (mcp__dnnl_f32_rank(node, graph, 1) != 1) return false;
    return !mcp__dnnl_input(node, graph, 2) || mcp__dnnl_f32_rank(node, graph, 2) == 1;
}

bool mcp__dnnl_softmax_supported(const mcp_node *node, const mcp_graph *graph)
{
    if (strcmp(node->domain, "") != 0 || node->n_inputs != 1 || node->n_outputs != 1) return false;
    if (strcmp(node->op_type, "Softmax") != 0 && strcmp(node->op_type, "LogSoftmax") != 0) return false;
    static const char *const attrs[] = {"axis", NULL};
    int r = mcp__dnnl_f32_rank(node, graph, 0);
    return mcp__dnnl_attrs_within(node, attrs) && r >= 1 && r <= 6;
}

/*
 * The softmax problem as [outer, n, inner] with the reduction over n: from
 * opset 13 along `axis`; before it, over the input coerced to 2-D at `axis`
 * (every dim from axis on). False for an axis out of range.
 */
static bool softmax_split(const mcp_node *node, const mcp_tensor *x, int64_t *outer, int64_t *n, int64_t *inner)
{
    int64_t axis = mcp_node_attr_int(node, "axis", node->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis >= x->rank) return false;
    *outer = *n = *inner = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < axis) *outer *= x->dims[d];
        else if (d == axis || node->opset < 13) *n *= x->dims[d];
        else *inner *= x->dims[d];
    }
    return true;
}

static mcp_status softmax_build(const void *state, mcp_dnnl_entry *e, mcp_err *err)
{
    const elt_state *st = state;
    dnnl_softmax_v2_desc_t d;
    dnnl_status_t s = dnnl_softmax_v2_forward_desc_init(&d, dnnl_forward_inference, st->alg, &e->keys[0],
                                                        &e->keys[0], 1);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "softmax descriptor");
    return mcp__dnnl_entry_build(&d, e, e->keys[0].ndims, e->keys[0].dims, "softmax primitive", err);
}

static mcp_status elt_build(const void *state, mcp_dnnl_entry *e, mcp_err *err)
{
    const elt_state *st = state;
    dnnl_eltwise_desc_t d;
    dnnl_status_t s = dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, st->alg, &e->keys[0], st->alpha,
                                                     st->beta);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "eltwise descriptor");
    return mcp__dnnl_entry_build(&d, e, e->keys[0].ndims, e->keys[0].dims, "eltwise primitive", err);
}

static mcp_status ln_build(const void *state, mcp_dnnl_entry *e, mcp_err *err)
{
    const elt_state *st = state;
    dnnl_layer_normalization_desc_t d;
    unsigned flags = dnnl_use_scale | (st->has_shift ? dnnl_use_shift : 0u);
    dnnl_status_t s = dnnl_layer_normalization_forward_desc_init(&d, dnnl_forward_inference, &e->keys[0], NULL,
                                                                 st->epsilon, flags);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "layer normalization descriptor");
    return mcp__dnnl_entry_build(&d, e, 2, e->keys[0].dims, "layer normalization primitive", err);
}

static mcp_status elt_prepare(const mcp_node *node, const mcp_graph *graph, void **state, mcp_err *err)
{
    *state = NULL;
    elt_state *st = mcp_calloc(1, sizeof *st);
    if (!st) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status rs = mcp__dnnl_cached_init(&st->c, node, graph, err);
    st->alg = strcmp(node->op_type, "Softmax") == 0      ? dnnl_softmax_accurate
              : strcmp(node->op_type, "LogSoftmax") == 0 ? dnnl_softmax_log
                                                         : elt_alg(node, &st->alpha);
    st->epsilon = mcp_node_attr_float(node, "epsilon", 1e-5f);
    st->has_shift = mcp__dnnl_input(node, graph, 2) != NULL;
    if (rs != MCP_STATUS_OK) {
        mcp__dnnl_cached_free(st);
        return rs;
    }
    *state = st;
    return MCP_STATUS_OK;
}

static mcp_status elt_run(mcp_kernel_ctx *ctx)
{
    elt_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    const mcp_tensor *x = mcp_kin(ctx, 0);
    dnnl_memory_desc_t md;
    if (!x || x->dtype != MCP_DTYPE_FLOAT || x->rank < 1 || x->rank > 6 || mcp_tensor_numel(x) == 0 ||
        !mcp__dnnl_tensor_md(x, &md))
        return mcp__dnnl_fallback_run(ctx, &st->c.fb);
    mcp_dnnl_entry local;
    const mcp_dnnl_entry *e = NULL;
    mcp_status rs = mcp__dnnl_cache_get(ctx, &st->c.cache, st, &md, 1, elt_build, &local, &e);
    if (rs != MCP_STATUS_OK) return rs;
    static const int ids[1] = {DNNL_ARG_SRC};
    return mcp__dnnl_run_entry(ctx, e, &local, 1, &x, &md, ids);
}

static mcp_status ln_run(mcp_kernel_ctx *ctx)
{
    elt_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    const mcp_tensor *x = mcp_kin(ctx, 0), *scale = mcp_kin(ctx, 1), *shift = mcp_kin(ctx, 2);
    if (!x || x->dtype != MCP_DTYPE_FLOAT || x->rank < 2 || mcp_tensor_numel(x) == 0)
        return mcp__dnnl_fallback_run(ctx, &st->c.fb);
    int64_t n = x->dims[x->rank - 1], rows = mcp_tensor_numel(x) / n;
    if (!scale || scale->dtype != MCP_DTYPE_FLOAT || mcp_tensor_numel(scale) != n ||
        (st->has_shift && (!shift || shift->dtype != MCP_DTYPE_FLOAT || mcp_tensor_numel(shift) != n)))
        return mcp__dnnl_fallback_run(ctx, &st->c.fb); /* reports the mismatch */
    int64_t d2[2] = {rows, n}, d1[1] = {n};
    dnnl_memory_desc_t md, vmd;
    if (mcp__dnnl_plain_md(&md, 2, d2) != dnnl_success || mcp__dnnl_plain_md(&vmd, 1, d1) != dnnl_success)
        return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory descriptor failed");
    mcp_dnnl_entry local;
    const mcp_dnnl_entry *e = NULL;
    mcp_status rs = mcp__dnnl_cache_get(ctx, &st->c.cache, st, &md, 1, ln_build, &local, &e);
    if (rs != MCP_STATUS_OK) return rs;
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, MCP_DTYPE_FLOAT, x->rank, x->dims);
    if (!y) {
        if (e == &local) mcp__dnnl_entry_release(&local);
        return MCP_STATUS_OUT_OF_MEMORY;
    }
    static const int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT};
    const dnnl_memory_desc_t *mds[4] = {&md, &md, &vmd, &vmd};
    void *data[4] = {x->data, y->data, scale->data, st->has_shift ? shift->data : NULL};
    return mcp__dnnl_exec_entry(ctx, e, &local, st->has_shift ? 4 : 3, ids, mds, data);
}

static mcp_status softmax_run(mcp_kernel_ctx *ctx)
{
    elt_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    const mcp_tensor *x = mcp_kin(ctx, 0);
    int64_t outer, n, inner;
    if (!x || x->dtype != MCP_DTYPE_FLOAT || x->format || mcp_tensor_numel(x) == 0 ||
        !softmax_split(ctx->node, x, &outer, &n, &inner))
        return mcp__dnnl_fallback_run(ctx, &st->c.fb); /* empty tensors, and the errors */
    int64_t d3[3] = {outer, n, inner};
    dnnl_memory_desc_t md;
    if (mcp__dnnl_plain_md(&md, 3, d3) != dnnl_success)
        return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory descriptor failed");
    mcp_dnnl_entry local;
    const mcp_dnnl_entry *e = NULL;
    mcp_status rs = mcp__dnnl_cache_get(ctx, &st->c.cache, st, &md, 1, softmax_build, &local, &e);
    if (rs != MCP_STATUS_OK) return rs;
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, MCP_DTYPE_FLOAT, x->rank, x->dims);
    if (!y) {
        if (e == &local) mcp__dnnl_entry_release(&local);
        return MCP_STATUS_OUT_OF_MEMORY;
    }
    static const int ids[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    const dnnl_memory_desc_t *mds[2] = {&md, &md};
    void *data[2] = {x->data, y->data};
    return mcp__dnnl_exec_entry(ctx, e, &local, 2, ids, mds, data);
}

const mcp_kernel_def mcp__dnnl_eltwise_kernel = {
    MCP_KERNEL_FIELDS("", "Eltwise", 1, 0, elt_run, NULL, elt_prepare, mcp__dnnl_cached_free),
    .reads_formats = true,
};
const mcp_kernel_def mcp__dnnl_layernorm_kernel = {
    MCP_KERNEL_FIELDS("", "LayerNormalization", 1, 0, ln_run, NULL, elt_prepare, mcp__dnnl_cached_free),
};
const mcp_kernel_def mcp__dnnl_softmax_kernel = {
    MCP_KERNEL_FIELDS("", "Softmax", 1, 0, softmax_run, NULL, elt_prepare, mcp__dnnl_cached_free),
};
