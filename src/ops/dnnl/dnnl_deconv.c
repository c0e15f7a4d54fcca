/*
 * oneDNN ConvTranspose: fp32, 2-D, NCHW, groups, strides, dilations,
 * explicit pads and bias; W of static shape (an initializer or an input).
 * auto_pad other than NOTSET, output_shape and non-zero output_padding stay
 * with the reference kernel. X is read in whatever layout it arrives in and Y is
 * written in the layout oneDNN picks; the weights are read in place (ONNX's
 * [C, M/group, kH, kW] order is oneDNN's iohw / giohw).
 */
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

typedef struct deconv_state {
    mcp_dnnl_cached c;
    int64_t w[4]; /* W's static shape */
    bool has_bias;
    int64_t group, stride[2], dil[2], pads[4];
} deconv_state;

static const char *const deconv_attrs[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                           "output_padding", "pads", "strides", NULL};

static bool parse(const mcp_node *node, const int64_t *w, deconv_state *p)
{
    p->group = mcp_node_attr_int(node, "group", 1);
    for (int i = 0; i < 2; i++) p->stride[i] = p->dil[i] = 1;
    int64_t k[2] = {w[2], w[3]}, op[2] = {0, 0};
    memset(p->pads, 0, sizeof p->pads);
    if (!mcp__dnnl_attr_ints(node, "strides", 2, 1, p->stride) || !mcp__dnnl_attr_ints(node, "dilations", 2, 1, p->dil) ||
        !mcp__dnnl_attr_ints(node, "pads", 4, 0, p->pads) || !mcp__dnnl_attr_ints(node, "kernel_shape", 2, 1, k) ||
        !mcp__dnnl_attr_ints(node, "output_padding", 2, 0, op))
        return false;
    if (k[0] != w[2] || k[1] != w[3] || op[0] != 0 || op[1] != 0) return false;
    if (strcmp(mcp_node_attr_string(node, "auto_pad", "NOTSET"), "NOTSET") != 0) return false;
    memcpy(p->w, w, sizeof p->w);
    return p->group > 0 && w[0] > 0 && w[0] % p->group == 0 && w[1] > 0 && w[2] > 0 && w[3] > 0;
}

bool mcp__dnnl_deconv_supported(const mcp_node *node, const mcp_graph *graph)
{
    if (strcmp(node->op_type, "ConvTranspose") != 0 || strcmp(node->domain, "") != 0) return false;
    if (node->n_inputs < 2 || node->n_inputs > 3 || node->n_outputs != 1) return false;
    if (!mcp__dnnl_attrs_within(node, deconv_attrs)) return false;
    int64_t w[MCP_MAX_RANK];
    if (mcp__dnnl_f32_rank(node, graph, 0) != 4 || mcp__dnnl_f32_rank(node, graph, 1) != 4 ||
        !mcp__dnnl_static_dims(node, graph, 1, w))
        return false;
    if (mcp__dnnl_input(node, graph, 2) && mcp__dnnl_f32_rank(node, graph, 2) != 1) return false;
    deconv_state p;
    return parse(node, w, &p);
}

/* Output dims for X dims in; false when they are not positive. */
static bool geometry(const deconv_state *st, const int64_t *in, int64_t *out)
{
    out[0] = in[0];
    out[1] = st->w[1] * st->group;
    for (int i = 0; i < 2; i++) {
        int64_t eff = (st->w[i + 2] - 1) * st->dil[i] + 1;
        out[i + 2] = (in[i + 2] - 1) * st->stride[i] + eff - st->pads[i] - st->pads[i + 2];
        if (out[i + 2] < 1) return false;
    }
    return true;
}

static mcp_status deconv_build(const void *state, mcp_dnnl_entry *e, mcp_err *err)
{
    const deconv_state *st = state;
    const dnnl_memory_desc_t *xmd = &e->keys[0];
    int64_t out[4];
    if (!geometry(st, xmd->dims, out))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input 'X' gives an empty output");
    int64_t g = st->group, oc = out[1], ic = xmd->dims[1];
    dnnl_memory_desc_t wmd, bmd, dst_any;
    dnnl_status_t s;
    if (g == 1) {
        dnnl_dims_t wd = {oc, ic, st->w[2], st->w[3]};
        s = dnnl_memory_desc_init_by_tag(&wmd, 4, wd, dnnl_f32, dnnl_iohw);
    } else {
        dnnl_dims_t wd = {g, oc / g, ic / g, st->w[2], st->w[3]};
        s = dnnl_memory_desc_init_by_tag(&wmd, 5, wd, dnnl_f32, dnnl_giohw);
    }
    dnnl_dims_t bd = {oc}, od = {out[0], out[1], out[2], out[3]};
    dnnl_dims_t strides = {st->stride[0], st->stride[1]}, dil = {st->dil[0] - 1, st->dil[1] - 1};
    dnnl_dims_t pl = {st->pads[0], st->pads[1]}, pr = {st->pads[2], st->pads[3]};
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_a);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&dst_any, 4, od, dnnl_f32, dnnl_format_tag_any);
    dnnl_deconvolution_desc_t d;
    if (s == dnnl_success)
        s = dnnl_dilated_deconvolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_deconvolution_direct, xmd,
                                                         &wmd, st->has_bias ? &bmd : NULL, &dst_any, strides, dil,
                                                         pl, pr);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "deconvolution descriptor");
    return mcp__dnnl_entry_build(&d, e, 4, out, "deconvolution primitive", err);
}

static mcp_status deconv_prepare(const mcp_node *node, const mcp_graph *graph, void **state, mcp_err *err)
{
    *state = NULL;
    deconv_state *st = mcp_calloc(1, sizeof *st);
    if (!st) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status rs = mcp__dnnl_cached_init(&st->c, node, graph, err);
    int64_t w[MCP_MAX_RANK];
    st->has_bias = mcp__dnnl_input(node, graph, 2) != NULL;
    if (rs == MCP_STATUS_OK && (!mcp__dnnl_static_dims(node, graph, 1, w) || !parse(node, w, st)))
        rs = mcp_err_set(err, MCP_STATUS_INTERNAL, "oneDNN ConvTranspose: node is not supported");
    if (rs != MCP_STATUS_OK) {
        mcp__dnnl_cached_free(st);
        return rs;
    }
    *state = st;
    return MCP_STATUS_OK;
}

static mcp_status deconv_run(mcp_kernel_ctx *ctx)
{
    deconv_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    const mcp_tensor *x = mcp_kin(ctx, 0), *w = mcp_kin(ctx, 1), *b = mcp_kin(ctx, 2);
    int64_t out[4];
    dnnl_memory_desc_t xmd;
    /* Anything unusual (and every error message) is the reference kernel's. */
    if (!x || x->dtype != MCP_DTYPE_FLOAT || x->rank != 4 || mcp_tensor_numel(x) == 0 || !w ||
        w->dtype != MCP_DTYPE_FLOAT || w->rank != 4 || w->format || memcmp(w->dims, st->w, sizeof st->w) != 0 ||
        x->dims[1] != st->w[0] || !geometry(st, x->dims, out) ||
        (st->has_bias && (!b || b->dtype != MCP_DTYPE_FLOAT || mcp_tensor_numel(b) != out[1])) ||
        !mcp__dnnl_tensor_md(x, &xmd) || xmd.data_type != dnnl_f32)
        return mcp__dnnl_fallback_run(ctx, &st->c.fb);
    mcp_dnnl_entry local;
    const mcp_dnnl_entry *e = NULL;
    mcp_status rs = mcp__dnnl_cache_get(ctx, &st->c.cache, st, &xmd, 1, deconv_build, &local, &e);
    if (rs != MCP_STATUS_OK) return rs;
    /* A per-call primitive's format dies with it: its output is written
     * plain (through a temporary in its own layout). */
    const mcp_format *f = mcp__dnnl_format_of(&e->dst);
    bool via_tmp = e == &local && f;
    mcp_tensor *y = via_tmp ? mcp_kout_uninit(ctx, 0, MCP_DTYPE_FLOAT, 4, out)
                            : mcp_kout_format(ctx, 0, MCP_DTYPE_FLOAT, 4, out, f);
    void *tmp = via_tmp && y ? mcp_malloc(f->nbytes ? f->nbytes : 1) : NULL;
    const_dnnl_primitive_desc_t pd = NULL;
    if (!y || (via_tmp && !tmp) || dnnl_primitive_get_primitive_desc(e->prim, &pd) != dnnl_success) {
        if (e == &local) mcp__dnnl_entry_release(&local);
        mcp_free(tmp);
        return !y ? MCP_STATUS_OUT_OF_MEMORY
               : via_tmp && !tmp ? mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory")
                                 : mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN primitive query failed");
    }
    static const int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    const dnnl_memory_desc_t *mds[4] = {&xmd, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), &e->dst.md,
                                        dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1)};
    void *data[4] = {x->data, w->data, via_tmp ? tmp : y->data, st->has_bias ? b->data : NULL};
    if (!via_tmp) return mcp__dnnl_exec_entry(ctx, e, &local, st->has_bias ? 4 : 3, ids, mds, data);
    rs = mcp__dnnl_exec_entry(ctx, e, NULL, st->has_bias ? 4 : 3, ids, mds, data);
    if (rs == MCP_STATUS_OK) rs = f->to_plain(f, tmp, y->data, ctx->err);
    mcp_free(tmp);
    mcp__dnnl_entry_release(&local);
    return rs;
}

const mcp_kernel_def mcp__dnnl_deconv_kernel = {
    MCP_KERNEL_FIELDS("", "ConvTranspose", 1, 0, deconv_run, NULL, deconv_prepare, mcp__dnnl_cached_free),
    .reads_formats = true,
};
