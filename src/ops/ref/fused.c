/*
 * Reference kernels for the operators the graph passes create (domain
 * MCP_DOMAIN_INTERNAL; graph/graph.h holds their contract): FusedConv,
 * FusedGemm, FusedMatMul, Gelu and LayerNormalization.
 *
 * The fused ops run the reference Conv, Gemm, MatMul and LayerNormalization
 * kernels on the same node (found by op type in their family tables, so
 * this file needs no family's private header), then add Sum or the bias row
 * and apply the activation in place. Values are rounded to float where the
 * unfused graph rounds them (after the product, after the Add, after the
 * activation), so the fused graph reproduces the unfused one on this
 * backend.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "ops/ref/ref.h"

/* ---- activations ---- */

/* The formulas of the reference elementwise kernels, in double. */
static double sigmoid(double x)
{
    /* Two forms so neither exp() overflows. */
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    return exp(x) / (1.0 + exp(x));
}

static double gelu(double x) { return 0.5 * x * (1.0 + erf(x * M_SQRT1_2)); }

static float fused_act_apply(const mcp_act *a, float xf)
{
    double x = xf, p0 = a->params[0], p1 = a->params[1];
    switch (a->kind) {
    case MCP_ACTIVATION_NONE: return xf;
    case MCP_ACTIVATION_RELU: return (float)(x > 0 ? x : (x == x ? 0.0 : x));
    case MCP_ACTIVATION_LEAKYRELU: return (float)(x < 0 ? p0 * x : x);
    case MCP_ACTIVATION_CLIP:
        /* min(max(x, lo), hi) as Clip computes it; NaN passes through. */
        if (x < p0) x = p0;
        if (x > p1) x = p1;
        return (float)x;
    case MCP_ACTIVATION_SIGMOID: return (float)sigmoid(x);
    case MCP_ACTIVATION_TANH: return (float)tanh(x);
    case MCP_ACTIVATION_HARDSIGMOID: {
        double h = p0 * x + p1;
        return (float)(h < 0 ? 0.0 : h > 1 ? 1.0 : h);
    }
    case MCP_ACTIVATION_SILU: {
        /* Sigmoid's float result times x, as Sigmoid then Mul round it. */
        float s = (float)sigmoid(x);
        return (float)(x * (double)s);
    }
    case MCP_ACTIVATION_GELU: return (float)gelu(x);
    case MCP_ACTIVATION_COUNT: break;
    }
    return xf;
}

/* Load-time check shared by FusedConv, FusedGemm and FusedMatMul: a known
 * activation and a float input where the type is known. */
static mcp_status fused_check(const mcp_node *node, const mcp_graph *graph, mcp_err *err)
{
    mcp_act a;
    mcp_status st = mcp_node_activation(node, &a, err);
    if (st != MCP_STATUS_OK) return st;
    if (graph && node->n_inputs > 0 && node->inputs[0] >= 0 && node->inputs[0] < graph->n_values) {
        mcp_dtype dt = graph->values[node->inputs[0]].type.dtype;
        if (dt != MCP_DTYPE_UNDEFINED && dt != MCP_DTYPE_FLOAT)
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "node '%s' (%s): input has type %s, only float is supported",
                               node->name, node->op_type, mcp_dtype_name(dt));
    }
    return MCP_STATUS_OK;
}

/* ---- the kernels this file builds on ---- */

/* The entry for op_type in a reference family table (default domain, the
 * highest since_version: these ops have one entry each). */
static const mcp_kernel_def *family_kernel(const mcp_kernel_def *table, int count, const char *op_type)
{
    const mcp_kernel_def *best = NULL;
    for (int i = 0; i < count; i++) {
        const mcp_kernel_def *k = &table[i];
        if (!k->op_type || k->domain[0] != '\0' || strcmp(k->op_type, op_type) != 0) continue;
        if (!best || k->since_version > best->since_version) best = k;
    }
    return best;
}

/* Runs the reference kernel `op_type` on ctx's node with its first n_inputs
 * inputs, writing output 0 of ctx. */
static mcp_status run_base(mcp_kernel_ctx *ctx, const mcp_kernel_def *k, const char *op_type, int n_inputs)
{
    if (!k) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "no reference %s kernel", op_type);
    mcp_kernel_ctx sub = *ctx;
    sub.n_inputs = ctx->n_inputs < n_inputs ? ctx->n_inputs : n_inputs;
    sub.state = NULL;
    return k->run(&sub);
}

/*
 * Finishes output 0 in place: adds `sum` (same shape, may be NULL) or
 * `bias` (a vector along the last dimension, may be NULL), then applies the
 * node's activation.
 */
static mcp_status finish(mcp_kernel_ctx *ctx, const mcp_tensor *sum, const mcp_tensor *bias)
{
    mcp_act a;
    mcp_status st = mcp_node_activation(ctx->node, &a, ctx->err);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor *y = &ctx->outputs[0]->tensor;
    if (y->dtype != MCP_DTYPE_FLOAT)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "output has type %s, only float is supported",
                         mcp_dtype_name(y->dtype));
    char a1[128], a2[128];
    if (sum) {
        bool same = sum->dtype == y->dtype && sum->rank == y->rank;
        for (int i = 0; same && i < y->rank; i++) same = sum->dims[i] == y->dims[i];
        if (!same)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'Sum' is %s %s, the convolution gives %s %s",
                             mcp_dtype_name(sum->dtype), mcp_shape_str(sum->rank, sum->dims, a1, sizeof a1),
                             mcp_dtype_name(y->dtype), mcp_shape_str(y->rank, y->dims, a2, sizeof a2));
    }
    int64_t row = y->rank > 0 ? y->dims[y->rank - 1] : 1;
    if (bias && (bias->dtype != MCP_DTYPE_FLOAT || bias->rank != 1 || bias->dims[0] != row))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'Bias' is %s %s, expected float [%lld]",
                         mcp_dtype_name(bias->dtype), mcp_shape_str(bias->rank, bias->dims, a1, sizeof a1),
                         (long long)row);
    float *yd = y->data;
    const float *sd = sum ? sum->data : bias ? bias->data : NULL;
    int64_t n = mcp_tensor_numel(y);
    for (int64_t i = 0; i < n; i++) {
        float v = yd[i];
        if (sd) v = (float)((double)v + (double)sd[sum ? i : i % row]);
        yd[i] = fused_act_apply(&a, v);
    }
    return MCP_STATUS_OK;
}

static mcp_status require_float(mcp_kernel_ctx *ctx, const char *name)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is missing", name);
    if (x->dtype != MCP_DTYPE_FLOAT)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input '%s' has type %s, only float is supported", name,
                         mcp_dtype_name(x->dtype));
    return MCP_STATUS_OK;
}

/* ---- FusedConv(X, W, [B], [Sum]) ---- */

static mcp_status run_fused_conv(mcp_kernel_ctx *ctx)
{
    mcp_status st = require_float(ctx, "X");
    if (st != MCP_STATUS_OK) return st;
    const mcp_kernel_def *k = family_kernel(mcp__ref_nn_kernels, mcp__ref_nn_kernel_count, "Conv");
    st = run_base(ctx, k, "Conv", 3);
    if (st != MCP_STATUS_OK) return st;
    return finish(ctx, mcp_kin(ctx, 3), NULL);
}

/* ---- FusedGemm(A, B, [C]) ---- */

static mcp_status run_fused_gemm(mcp_kernel_ctx *ctx)
{
    mcp_status st = require_float(ctx, "A");
    if (st != MCP_STATUS_OK) return st;
    const mcp_kernel_def *k = family_kernel(mcp__ref_nn_kernels, mcp__ref_nn_kernel_count, "Gemm");
    st = run_base(ctx, k, "Gemm", 3);
    if (st != MCP_STATUS_OK) return st;
    return finish(ctx, NULL, NULL);
}

/* ---- FusedMatMul(A, B, [Bias]) ---- */

static mcp_status run_fused_matmul(mcp_kernel_ctx *ctx)
{
    mcp_status st = require_float(ctx, "A");
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *b = mcp_kin(ctx, 1);
    if (!b || b->rank != 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'B' must be a matrix (rank %d)", b ? b->rank : -1);
    const mcp_kernel_def *k = family_kernel(mcp__ref_nn_kernels, mcp__ref_nn_kernel_count, "MatMul");
    st = run_base(ctx, k, "MatMul", 2);
    if (st != MCP_STATUS_OK) return st;
    return finish(ctx, NULL, mcp_kin(ctx, 2));
}

/* ---- Gelu(X) ---- */

static mcp_status run_gelu(mcp_kernel_ctx *ctx)
{
    mcp_status st = require_float(ctx, "X");
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *x = mcp_kin(ctx, 0);
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    const float *xd = x->data;
    float *yd = y->data;
    int64_t n = mcp_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) yd[i] = (float)gelu(xd[i]);
    return MCP_STATUS_OK;
}

/* ---- LayerNormalization(X, Scale, [B]) ---- */

static mcp_status run_layernorm(mcp_kernel_ctx *ctx)
{
    mcp_status st = require_float(ctx, "X");
    if (st != MCP_STATUS_OK) return st;
    const mcp_kernel_def *k =
        family_kernel(mcp__ref_reduce_kernels, mcp__ref_reduce_kernel_count, "LayerNormalization");
    if (!k) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "no reference LayerNormalization kernel");
    /* The ONNX kernel computes Mean and InvStdDev only for a node that
     * lists them; this op has Y alone. */
    mcp_kernel_ctx sub = *ctx;
    sub.n_inputs = ctx->n_inputs < 3 ? ctx->n_inputs : 3;
    sub.n_outputs = 1;
    sub.state = NULL;
    return k->run(&sub);
}

const mcp_kernel_def mcp__ref_fused_kernels[] = {
    {.domain = MCP_DOMAIN_INTERNAL, .op_type = "FusedConv", .since_version = 1, .run = run_fused_conv,
     .check = fused_check},
    {.domain = MCP_DOMAIN_INTERNAL, .op_type = "FusedGemm", .since_version = 1, .run = run_fused_gemm,
     .check = fused_check},
    {.domain = MCP_DOMAIN_INTERNAL, .op_type = "FusedMatMul", .since_version = 1, .run = run_fused_matmul,
     .check = fused_check},
    {.domain = MCP_DOMAIN_INTERNAL, .op_type = "Gelu", .since_version = 1, .run = run_gelu},
    {.domain = MCP_DOMAIN_INTERNAL, .op_type = "LayerNormalization", .since_version = 1, .run = run_layernorm},
};
const int mcp__ref_fused_kernel_count = (int)(sizeof mcp__ref_fused_kernels / sizeof mcp__ref_fused_kernels[0]);
