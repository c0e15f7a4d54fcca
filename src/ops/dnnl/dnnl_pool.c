/*
 * oneDNN pooling: MaxPool (one output), AveragePool, GlobalAveragePool and
 * GlobalMaxPool on 4-D fp32 tensors (MaxPool also on u8 / s8 ones, which
 * a maximum leaves exact: quantized CNNs), reading X in whatever layout it
 * arrives in and writing Y in the layout oneDNN picks for it (the blocked
 * layout of the producing convolution, typically), so pooling between
 * convolutions costs no reorders.
 *
 * Output sizes follow the reference kernels (src/graph/shape_infer.c): SAME
 * pads to ceil(in / stride); with ceil_mode the last window must start
 * inside the input or the leading padding, and the extra trailing padding
 * that ceil_mode adds is expressed as right padding. AveragePool with
 * count_include_pad must not count that extra padding, which oneDNN would;
 * such shapes run on the reference kernel.
 */
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

typedef struct pool_params {
    bool global, max, include_pad, ceil_mode;
    int auto_pad; /* 0 NOTSET, 1 VALID, 2 SAME_UPPER, 3 SAME_LOWER */
    int64_t kernel[2], stride[2], dil[2], pads[4];
} pool_params;

typedef struct pool_state {
    mcp_dnnl_cached c;
    pool_params p;
} pool_state;

/* Geometry for one input shape, the pooling key besides the layout. */
typedef struct pool_geom {
    int64_t out[4], pl[2], pr[2], kernel[2];
    bool extra_pad; /* ceil_mode padding past the declared pads */
} pool_geom;

static const char *const maxpool_attrs[] = {"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                            "pads", "storage_order", "strides", NULL};
static const char *const avgpool_attrs[] = {"auto_pad", "ceil_mode", "count_include_pad", "dilations",
                                            "kernel_shape", "pads", "strides", NULL};

static bool parse_params(const mcp_node *node, pool_params *p)
{
    memset(p, 0, sizeof *p);
    const char *op = node->op_type;
    p->global = strncmp(op, "Global", 6) == 0;
    p->max = strcmp(op, "MaxPool") == 0 || strcmp(op, "GlobalMaxPool") == 0;
    for (int i = 0; i < 2; i++) p->stride[i] = p->dil[i] = 1;
    if (p->global) return node->n_attrs == 0;
    if (!mcp__dnnl_attrs_within(node, p->max ? maxpool_attrs : avgpool_attrs)) return false;
    if (!mcp_node_attr(node, "kernel_shape") || !mcp__dnnl_attr_ints(node, "kernel_shape", 2, 1, p->kernel)) return false;
    if (!mcp__dnnl_attr_ints(node, "strides", 2, 1, p->stride) || !mcp__dnnl_attr_ints(node, "dilations", 2, 1, p->dil) ||
        !mcp__dnnl_attr_ints(node, "pads", 4, 0, p->pads))
        return false;
    p->ceil_mode = mcp_node_attr_int(node, "ceil_mode", 0) != 0;
    p->include_pad = mcp_node_attr_int(node, "count_include_pad", 0) != 0;
    const char *ap = mcp_node_attr_string(node, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0) p->auto_pad = 0;
    else if (strcmp(ap, "VALID") == 0) p->auto_pad = 1;
    else if (strcmp(ap, "SAME_UPPER") == 0) p->auto_pad = 2;
    else if (strcmp(ap, "SAME_LOWER") == 0) p->auto_pad = 3;
    else return false;
    return true;
}

bool mcp__dnnl_pool_supported(const mcp_node *node, const mcp_graph *graph)
{
    const char *op = node->op_type;
    if (strcmp(op, "MaxPool") != 0 && strcmp(op, "AveragePool") != 0 && strcmp(op, "GlobalAveragePool") != 0 &&
        strcmp(op, "GlobalMaxPool") != 0)
        return false;
    if (node->n_inputs != 1 || node->n_outputs < 1) return false;
    /* MaxPool's Indices output is the reference kernel's. */
    for (int i = 1; i < node->n_outputs; i++)
        if (node->outputs[i] >= 0) return false;
    pool_params p;
    if (!parse_params(node, &p)) return false;
    const mcp_graph_value *x = mcp__dnnl_input(node, graph, 0);
    if (p.max && !p.global && x && x->type.kind == MCP_VALUE_TENSOR && mcp__dnnl_is_int8(x->type.dtype))
        return x->type.rank == 4;
    return mcp__dnnl_f32_rank(node, graph, 0) == 4;
}

static bool pool_geometry(const pool_params *p, const int64_t *in, pool_geom *g)
{
    memset(g, 0, sizeof *g);
    g->out[0] = in[0];
    g->out[1] = in[1];
    for (int i = 0; i < 2; i++) {
        int64_t n = in[i + 2];
        if (p->global) {
            g->kernel[i] = n;
            g->out[i + 2] = 1;
            if (n < 1) return false;
            continue;
        }
        int64_t k = p->kernel[i], s = p->stride[i], eff = (k - 1) * p->dil[i] + 1;
        g->kernel[i] = k;
        int64_t pb = p->pads[i], pe = p->pads[i + 2], o;
        if (p->auto_pad >= 2) {
            o = (n + s - 1) / s;
            int64_t total = (o - 1) * s + eff - n;
            if (total < 0) total = 0;
            pb = p->auto_pad == 2 ? total / 2 : total - total / 2;
            pe = total - pb;
        } else {
            if (p->auto_pad == 1) pb = pe = 0;
            int64_t span = n + pb + pe - eff;
            if (span < 0) return false;
            o = span / s + 1;
            if (p->ceil_mode) {
                o = (span + s - 1) / s + 1;
                if ((o - 1) * s >= n + pb) o--;
            }
        }
        /* Right padding that makes oneDNN produce exactly o windows. */
        int64_t need = (o - 1) * s + eff - n - pb;
        if (need > pe) g->extra_pad = true;
        g->pl[i] = pb;
        g->pr[i] = need > 0 ? need : 0;
        if (g->pr[i] < 0 || o < 1) return false;
        g->out[i + 2] = o;
    }
    return true;
}

static mcp_status pool_build(const void *state, mcp_dnnl_entry *e, mcp_err *err)
{
    const pool_state *st = state;
    const dnnl_memory_desc_t *xmd = &e->keys[0];
    pool_geom g;
    if (!pool_geometry(&st->p, xmd->dims, &g))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is smaller than the pooling window");
    dnnl_memory_desc_t dst_any;
    dnnl_dims_t od = {g.out[0], g.out[1], g.out[2], g.out[3]};
    dnnl_dims_t strides = {st->p.stride[0], st->p.stride[1]}, kernel = {g.kernel[0], g.kernel[1]};
    dnnl_dims_t dil = {st->p.dil[0] - 1, st->p.dil[1] - 1}, pl = {g.pl[0], g.pl[1]}, pr = {g.pr[0], g.pr[1]};
    if (st->p.global) strides[0] = strides[1] = 1;
    dnnl_alg_kind_t alg = st->p.max           ? dnnl_pooling_max
                          : st->p.include_pad ? dnnl_pooling_avg_include_padding
                                              : dnnl_pooling_avg_exclude_padding;
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&dst_any, 4, od, xmd->data_type, dnnl_format_tag_any);
    dnnl_pooling_v2_desc_t pdesc;
    if (s == dnnl_success)
        s = dnnl_pooling_v2_forward_desc_init(&pdesc, dnnl_forward_inference, alg, xmd, &dst_any, strides, kernel,
                                              dil, pl, pr);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "pooling descriptor");
    return mcp__dnnl_entry_build(&pdesc, e, 4, g.out, "pooling primitive", err);
}

static mcp_status pool_prepare(const mcp_node *node, const mcp_graph *graph, void **state, mcp_err *err)
{
    *state = NULL;
    pool_state *st = mcp_calloc(1, sizeof *st);
    if (!st) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status rs = mcp__dnnl_cached_init(&st->c, node, graph, err);
    if (rs == MCP_STATUS_OK && !parse_params(node, &st->p))
        rs = mcp_err_set(err, MCP_STATUS_INTERNAL, "oneDNN pooling: node is not supported");
    if (rs != MCP_STATUS_OK) {
        mcp__dnnl_cached_free(st);
        return rs;
    }
    *state = st;
    return MCP_STATUS_OK;
}

static mcp_status pool_run(mcp_kernel_ctx *ctx)
{
    pool_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    const mcp_tensor *x = mcp_kin(ctx, 0);
    pool_geom g;
    bool int8_max = x && st->p.max && !st->p.global && mcp__dnnl_is_int8(x->dtype);
    if (!x || (x->dtype != MCP_DTYPE_FLOAT && !int8_max) || x->rank != 4 || mcp_tensor_numel(x) == 0 ||
        !pool_geometry(&st->p, x->dims, &g) || (g.extra_pad && st->p.include_pad && !st->p.max))
        return mcp__dnnl_fallback_run(ctx, &st->c.fb);
    dnnl_memory_desc_t xmd;
    if (!mcp__dnnl_tensor_md(x, &xmd)) return mcp__dnnl_fallback_run(ctx, &st->c.fb);
    mcp_dnnl_entry local;
    const mcp_dnnl_entry *e = NULL;
    mcp_status rs = mcp__dnnl_cache_get(ctx, &st->c.cache, st, &xmd, 1, pool_build, &local, &e);
    if (rs != MCP_STATUS_OK) return rs;
    static const int ids[1] = {DNNL_ARG_SRC};
    return mcp__dnnl_run_entry(ctx, e, &local, 1, &x, &xmd, ids);
}

const mcp_kernel_def mcp__dnnl_pool_kernel = {
    MCP_KERNEL_FIELDS("", "*Pool", 1, 0, pool_run, NULL, pool_prepare, mcp__dnnl_cached_free),
    .reads_formats = true,
};
