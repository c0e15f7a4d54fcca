/*
 * The oneDNN backend: capability query and helpers shared by its kernels.
 */
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

const mcp_graph_value *mcp__dnnl_input(const mcp_node *node, const mcp_graph *graph, int i)
{
    if (i < 0 || i >= node->n_inputs || node->inputs[i] < 0) return NULL;
    return &graph->values[node->inputs[i]];
}

const mcp_tensor *mcp__dnnl_initializer(const mcp_node *node, const mcp_graph *graph, int i)
{
    const mcp_graph_value *v = mcp__dnnl_input(node, graph, i);
    if (!v || v->outer >= 0 || v->initializer < 0 || v->initializer >= graph->n_initializers)
        return NULL;
    return &graph->initializers[v->initializer];
}

bool mcp__dnnl_is_f32(const mcp_graph_value *v, int rank)
{
    return v && v->type.kind == MCP_VALUE_TENSOR && !v->type.is_optional &&
           v->type.dtype == MCP_DTYPE_FLOAT && v->type.rank == rank;
}

int mcp__dnnl_f32_rank(const mcp_node *node, const mcp_graph *graph, int i)
{
    const mcp_tensor *t = mcp__dnnl_initializer(node, graph, i);
    if (t) return t->dtype == MCP_DTYPE_FLOAT ? t->rank : -1;
    const mcp_graph_value *v = mcp__dnnl_input(node, graph, i);
    if (!v || v->type.kind != MCP_VALUE_TENSOR || v->type.is_optional ||
        v->type.dtype != MCP_DTYPE_FLOAT)
        return -1;
    return v->type.rank;
}

bool mcp__dnnl_static_dims(const mcp_node *node, const mcp_graph *graph, int i, int64_t *dims)
{
    const mcp_tensor *t = mcp__dnnl_initializer(node, graph, i);
    const mcp_graph_value *v = mcp__dnnl_input(node, graph, i);
    if (!v) return false;
    int rank = t ? t->rank : v->type.rank;
    if (rank < 0 || rank > MCP_MAX_RANK) return false;
    for (int d = 0; d < rank; d++) {
        dims[d] = t ? t->dims[d] : v->type.dims[d];
        if (dims[d] < 0) return false;
    }
    return true;
}

bool mcp__dnnl_attrs_within(const mcp_node *node, const char *const *names)
{
    for (int a = 0; a < node->n_attrs; a++) {
        bool known = false;
        for (int i = 0; names[i] && !known; i++) known = strcmp(node->attrs[a].name, names[i]) == 0;
        if (!known) return false;
    }
    return true;
}

mcp_status mcp__dnnl_fail(mcp_err *err, dnnl_status_t s, const char *what)
{
    mcp_status st = s == dnnl_unimplemented ? MCP_STATUS_UNSUPPORTED
                    : s == dnnl_out_of_memory ? MCP_STATUS_OUT_OF_MEMORY
                                              : MCP_STATUS_INTERNAL;
    return mcp_err_set(err, st, "oneDNN %s failed (status %d)", what, (int)s);
}

dnnl_status_t mcp__dnnl_attr_create(dnnl_primitive_attr_t *attr)
{
    dnnl_status_t s = dnnl_primitive_attr_create(attr);
    if (s != dnnl_success) {
        *attr = NULL;
        return s;
    }
    s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (s != dnnl_success) {
        dnnl_primitive_attr_destroy(*attr);
        *attr = NULL;
    }
    return s;
}

mcp_status mcp__dnnl_execute(mcp_kernel_ctx *ctx, dnnl_engine_t eng, dnnl_primitive_t prim,
                             int nargs, const dnnl_exec_arg_t *args)
{
    dnnl_exec_arg_t all[8];
    MCP_ASSERT(nargs >= 0 && nargs < 8);
    memcpy(all, args, sizeof(*args) * (size_t)nargs);
    const_dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_primitive_get_primitive_desc(prim, &pd);
    if (s != dnnl_success) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN query failed (status %d)", (int)s);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t ssize = smd ? dnnl_memory_desc_get_size(smd) : 0;
    void *sbuf = NULL;
    dnnl_memory_t smem = NULL;
    if (ssize) {
        sbuf = mcp_malloc(ssize);
        if (!sbuf) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory for oneDNN scratchpad");
        s = dnnl_memory_create(&smem, smd, eng, sbuf);
        if (s != dnnl_success) {
            mcp_free(sbuf);
            return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory creation failed (status %d)", (int)s);
        }
        all[nargs].arg = DNNL_ARG_SCRATCHPAD;
        all[nargs++].memory = smem;
    }
    dnnl_stream_t stream = NULL;
    s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
    if (s == dnnl_success) s = dnnl_primitive_execute(prim, stream, nargs, all);
    if (s == dnnl_success) s = dnnl_stream_wait(stream);
    if (stream) dnnl_stream_destroy(stream);
    if (smem) dnnl_memory_destroy(smem);
    mcp_free(sbuf);
    if (s != dnnl_success) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN execution failed (status %d)", (int)s);
    return MCP_STATUS_OK;
}

mcp_status mcp__dnnl_wrap(mcp_kernel_ctx *ctx, dnnl_engine_t eng, const dnnl_memory_desc_t *md,
                          const void *data, dnnl_memory_t *out)
{
    /* oneDNN takes a non-const handle; inputs are only read by the primitives. */
    dnnl_status_t s = dnnl_memory_create(out, md, eng, (void *)data);
    if (s != dnnl_success) {
        *out = NULL;
        return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory creation failed (status %d)", (int)s);
    }
    return MCP_STATUS_OK;
}

static const mcp_kernel_def *dnnl_supports(const mcp_node *node, const mcp_graph *graph)
{
    if (!graph || strcmp(node->domain, "") != 0) return NULL;
    if (strcmp(node->op_type, "Conv") == 0)
        return mcp__dnnl_conv_supported(node, graph) ? &mcp__dnnl_conv_kernel : NULL;
    if (strcmp(node->op_type, "Gemm") == 0)
        return mcp__dnnl_gemm_supported(node, graph) ? &mcp__dnnl_gemm_kernel : NULL;
    if (strcmp(node->op_type, "MatMul") == 0)
        return mcp__dnnl_matmul_supported(node, graph) ? &mcp__dnnl_matmul_kernel : NULL;
    return NULL;
}

const mcp_backend mcp__dnnl_backend = {
    .api_version = MCP_KERNEL_API_VERSION,
    .name = "dnnl",
    .priority = 10,
    .supports = dnnl_supports,
};
