/*
 * oneDNN Conv: fp32, 2-D, NCHW, groups, strides, pads, dilations, auto_pad
 * and bias. The weights must be an initializer; when X's shape is static the
 * primitive is built at load with weights in the layout it prefers
 * (format_tag_any), reordered once. Other input shapes get the same treatment
 * on first use, cached per node (up to CONV_CACHE_MAX shapes, under a mutex;
 * primitives execute outside it); past that, a primitive is built per call
 * over the plain weights.
 */
#include <pthread.h>
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

/* Input shapes cached per node; further shapes build a primitive per call. */
#define CONV_CACHE_MAX 8

static const char *const conv_attrs[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                         "pads", "strides", NULL};

/* Attributes of one Conv node, parsed once. */
typedef struct conv_params {
    int64_t group;
    int64_t stride[2], dil[2], pads[4], kernel[2];
    int auto_pad; /* 0 NOTSET, 1 VALID, 2 SAME_UPPER, 3 SAME_LOWER */
} conv_params;

/* A built primitive for one input shape. wdata holds the weights in the
 * primitive's layout (owned) or points at the initializer (not owned). */
typedef struct conv_prim {
    dnnl_primitive_t prim;
    /* Activation layouts the primitive prefers, with reorders from / to
     * plain NCHW at the edges (NULL when the layout is plain already). */
    dnnl_memory_desc_t smd, dmd;
    dnnl_primitive_t src_reorder, dst_reorder;
    dnnl_memory_desc_t wmd;
    void *wdata;
    bool wdata_owned;
    int64_t in[4], out[4];
} conv_prim;

typedef struct conv_state {
    dnnl_engine_t eng;
    conv_params p;
    const mcp_tensor *w; /* the initializer; the graph outlives the state */
    bool has_bias;
    pthread_mutex_t lock;
    /* Entries [0, n_prims) never change once published; n_prims is read and
     * written under lock. */
    int n_prims;
    conv_prim prims[CONV_CACHE_MAX];
} conv_state;

static bool read_ints(const mcp_node *node, const char *name, int want, bool allow_zero,
                      int64_t *out)
{
    int64_t count = 0;
    const int64_t *v = mcp_node_attr_ints(node, name, &count);
    if (!v) return mcp_node_attr(node, name) == NULL;
    if (count != want) return false;
    for (int i = 0; i < want; i++) {
        if (v[i] < 0 || (v[i] == 0 && !allow_zero) || v[i] > INT32_MAX) return false;
        out[i] = v[i];
    }
    return true;
}

static bool parse_params(const mcp_node *node, const mcp_tensor *w, conv_params *p)
{
    memset(p, 0, sizeof *p);
    p->group = mcp_node_attr_int(node, "group", 1);
    for (int i = 0; i < 2; i++) {
        p->stride[i] = p->dil[i] = 1;
        p->kernel[i] = w->dims[i + 2];
    }
    if (!read_ints(node, "strides", 2, false, p->stride)) return false;
    if (!read_ints(node, "dilations", 2, false, p->dil)) return false;
    if (!read_ints(node, "pads", 4, true, p->pads)) return false;
    int64_t k[2] = {p->kernel[0], p->kernel[1]};
    if (!read_ints(node, "kernel_shape", 2, false, k)) return false;
    if (k[0] != p->kernel[0] || k[1] != p->kernel[1]) return false;
    const char *ap = mcp_node_attr_string(node, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0) p->auto_pad = 0;
    else if (strcmp(ap, "VALID") == 0) p->auto_pad = 1;
    else if (strcmp(ap, "SAME_UPPER") == 0) p->auto_pad = 2;
    else if (strcmp(ap, "SAME_LOWER") == 0) p->auto_pad = 3;
    else return false;
    return p->group > 0 && w->dims[0] % p->group == 0 && w->dims[0] > 0 && w->dims[1] > 0;
}

bool mcp__dnnl_conv_supported(const mcp_node *node, const mcp_graph *graph)
{
    if (node->n_inputs < 2 || node->n_inputs > 3 || node->n_outputs != 1) return false;
    if (!mcp__dnnl_attrs_within(node, conv_attrs)) return false;
    const mcp_graph_value *x = mcp__dnnl_input(node, graph, 0);
    const mcp_tensor *w = mcp__dnnl_initializer(node, graph, 1);
    if (!mcp__dnnl_is_f32(x, 4) || !w || w->dtype != MCP_DTYPE_FLOAT || w->rank != 4) return false;
    const mcp_graph_value *b = mcp__dnnl_input(node, graph, 2);
    if (b) {
        const mcp_tensor *bi = mcp__dnnl_initializer(node, graph, 2);
        if (bi ? (bi->dtype != MCP_DTYPE_FLOAT || bi->rank != 1 || bi->dims[0] != w->dims[0])
               : !mcp__dnnl_is_f32(b, 1))
            return false;
    }
    conv_params p;
    if (!parse_params(node, w, &p)) return false;
    if (x->type.dims[1] >= 0 && x->type.dims[1] != w->dims[1] * p.group) return false;
    return true;
}

/* Output size and pads for input in[4]; false when the window does not fit. */
static bool conv_geometry(const conv_params *p, const int64_t *in, int64_t *out, int64_t *pl,
                          int64_t *pr)
{
    for (int i = 0; i < 2; i++) {
        int64_t eff = (p->kernel[i] - 1) * p->dil[i] + 1, n = in[i + 2], s = p->stride[i];
        pl[i] = p->pads[i];
        pr[i] = p->pads[i + 2];
        if (p->auto_pad >= 2) {
            out[i + 2] = (n + s - 1) / s;
            int64_t total = (out[i + 2] - 1) * s + eff - n;
            if (total < 0) total = 0;
            int64_t small = total / 2, big = total - total / 2;
            pl[i] = p->auto_pad == 2 ? small : big;
            pr[i] = p->auto_pad == 2 ? big : small;
        } else {
            if (p->auto_pad == 1) pl[i] = pr[i] = 0;
            int64_t span = n + pl[i] + pr[i] - eff;
            if (span < 0) return false;
            out[i + 2] = span / s + 1;
        }
    }
    out[0] = in[0];
    out[1] = 0; /* filled by the caller */
    return true;
}

static void conv_prim_release(conv_prim *cp)
{
    if (cp->prim) dnnl_primitive_destroy(cp->prim);
    if (cp->src_reorder) dnnl_primitive_destroy(cp->src_reorder);
    if (cp->dst_reorder) dnnl_primitive_destroy(cp->dst_reorder);
    if (cp->wdata_owned) mcp_free(cp->wdata);
    memset(cp, 0, sizeof *cp);
}

/* Plain weights descriptor: oihw, or goihw for grouped convolutions. */
static dnnl_status_t plain_weights_md(const conv_state *st, dnnl_memory_desc_t *md,
                                      dnnl_format_tag_t tag_or_any)
{
    const mcp_tensor *w = st->w;
    int64_t g = st->p.group;
    if (g == 1) {
        dnnl_dims_t d = {w->dims[0], w->dims[1], w->dims[2], w->dims[3]};
        return dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32,
                                            tag_or_any == dnnl_format_tag_any ? tag_or_any : dnnl_oihw);
    }
    dnnl_dims_t d = {g, w->dims[0] / g, w->dims[1], w->dims[2], w->dims[3]};
    return dnnl_memory_desc_init_by_tag(md, 5, d, dnnl_f32,
                                        tag_or_any == dnnl_format_tag_any ? tag_or_any : dnnl_goihw);
}

static dnnl_status_t make_reorder(dnnl_engine_t eng, const dnnl_memory_desc_t *from,
                                  const dnnl_memory_desc_t *to, dnnl_primitive_t *out)
{
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    *out = NULL;
    dnnl_status_t s = mcp__dnnl_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, attr);
    if (s == dnnl_success) s = dnnl_primitive_create(out, rpd);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) *out = NULL;
    return s;
}

/*
 * Builds the primitive for input shape in[4]. With `prepack` the weights use
 * the layout the primitive prefers and are reordered into an owned buffer.
 */
static mcp_status conv_build(conv_state *st, const int64_t *in, bool has_bias, bool prepack,
                             conv_prim *cp, mcp_err *err)
{
    memset(cp, 0, sizeof *cp);
    int64_t out[4], pl[2], pr[2];
    if (!conv_geometry(&st->p, in, out, pl, pr))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is smaller than the kernel window");
    out[1] = st->w->dims[0];
    memcpy(cp->in, in, sizeof cp->in);
    memcpy(cp->out, out, sizeof cp->out);

    dnnl_memory_desc_t src_md, dst_md, bias_md, wplain_md, wany_md, src_any, dst_any;
    dnnl_dims_t sd = {in[0], in[1], in[2], in[3]}, dd = {out[0], out[1], out[2], out[3]};
    dnnl_dims_t bd = {out[1]};
    dnnl_dims_t strides = {st->p.stride[0], st->p.stride[1]};
    dnnl_dims_t dil = {st->p.dil[0] - 1, st->p.dil[1] - 1};
    dnnl_dims_t padl = {pl[0], pl[1]}, padr = {pr[0], pr[1]};
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&src_md, 4, sd, dnnl_f32, dnnl_nchw);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&dst_md, 4, dd, dnnl_f32, dnnl_nchw);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&src_any, 4, sd, dnnl_f32, dnnl_format_tag_any);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&dst_any, 4, dd, dnnl_f32, dnnl_format_tag_any);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, dnnl_f32, dnnl_a);
    if (s == dnnl_success) s = plain_weights_md(st, &wplain_md, dnnl_format_tag_undef);
    if (s == dnnl_success)
        s = prepack ? plain_weights_md(st, &wany_md, dnnl_format_tag_any) : dnnl_success;
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "memory descriptor");

    dnnl_convolution_desc_t cd;
    s = dnnl_dilated_convolution_forward_desc_init(
        &cd, dnnl_forward_inference, dnnl_convolution_direct, prepack ? &src_any : &src_md,
        prepack ? &wany_md : &wplain_md, has_bias ? &bias_md : NULL, prepack ? &dst_any : &dst_md,
        strides, dil, padl, padr);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "convolution descriptor");
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    s = mcp__dnnl_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &cd, attr, st->eng, NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "convolution primitive descriptor");
    cp->wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    cp->smd = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    cp->dmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    s = dnnl_primitive_create(&cp->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) {
        cp->prim = NULL;
        return mcp__dnnl_fail(err, s, "convolution primitive");
    }
    if (s == dnnl_success && !dnnl_memory_desc_equal(&cp->smd, &src_md))
        s = make_reorder(st->eng, &src_md, &cp->smd, &cp->src_reorder);
    if (s == dnnl_success && !dnnl_memory_desc_equal(&cp->dmd, &dst_md))
        s = make_reorder(st->eng, &cp->dmd, &dst_md, &cp->dst_reorder);
    if (s != dnnl_success) {
        conv_prim_release(cp);
        return mcp__dnnl_fail(err, s, "activation reorder");
    }
    cp->wdata = st->w->data;
    if (!prepack || dnnl_memory_desc_equal(&cp->wmd, &wplain_md)) return MCP_STATUS_OK;

    /* Reorder the weights once into the primitive's preferred layout. */
    size_t size = dnnl_memory_desc_get_size(&cp->wmd);
    cp->wdata = mcp_malloc(size ? size : 1);
    if (!cp->wdata) {
        conv_prim_release(cp);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for prepacked weights");
    }
    cp->wdata_owned = true;
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_stream_t stream = NULL;
    s = dnnl_memory_create(&from, &wplain_md, st->eng, st->w->data);
    if (s == dnnl_success) s = dnnl_memory_create(&to, &cp->wmd, st->eng, cp->wdata);
    if (s == dnnl_success)
        s = dnnl_reorder_primitive_desc_create(&rpd, &wplain_md, st->eng, &cp->wmd, st->eng, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(&reorder, rpd);
    /* Built and run here on one thread, so the library scratchpad is fine. */
    if (s == dnnl_success) s = dnnl_stream_create(&stream, st->eng, dnnl_stream_default_flags);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        s = dnnl_primitive_execute(reorder, stream, 2, args);
    }
    if (s == dnnl_success) s = dnnl_stream_wait(stream);
    if (stream) dnnl_stream_destroy(stream);
    if (reorder) dnnl_primitive_destroy(reorder);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (to) dnnl_memory_destroy(to);
    if (from) dnnl_memory_destroy(from);
    if (s != dnnl_success) {
        conv_prim_release(cp);
        return mcp__dnnl_fail(err, s, "weights reorder");
    }
    return MCP_STATUS_OK;
}

static void conv_release(void *state)
{
    conv_state *st = state;
    if (!st) return;
    for (int i = 0; i < st->n_prims; i++) conv_prim_release(&st->prims[i]);
    if (st->eng) dnnl_engine_destroy(st->eng);
    pthread_mutex_destroy(&st->lock);
    mcp_free(st);
}

static mcp_status conv_prepare(const mcp_node *node, const mcp_graph *graph, void **state,
                               mcp_err *err)
{
    *state = NULL;
    conv_state *st = mcp_calloc(1, sizeof *st);
    if (!st) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&st->lock, NULL);
    st->w = mcp__dnnl_initializer(node, graph, 1);
    st->has_bias = mcp__dnnl_input(node, graph, 2) != NULL;
    if (!st->w || !parse_params(node, st->w, &st->p)) {
        conv_release(st);
        return mcp_err_set(err, MCP_STATUS_INTERNAL, "oneDNN Conv: node is not supported");
    }
    dnnl_status_t s = dnnl_engine_create(&st->eng, dnnl_cpu, 0);
    if (s != dnnl_success) {
        st->eng = NULL;
        conv_release(st);
        return mcp__dnnl_fail(err, s, "engine creation");
    }
    const mcp_graph_value *x = mcp__dnnl_input(node, graph, 0);
    bool known = true;
    int64_t in[4];
    for (int i = 0; i < 4; i++) {
        in[i] = x->type.dims[i];
        known &= in[i] > 0;
    }
    int64_t out[4], pl[2], pr[2];
    if (known && conv_geometry(&st->p, in, out, pl, pr)) {
        /* A shape oneDNN cannot build here is left to the run path, which
         * reports the error when the node runs. */
        if (conv_build(st, in, st->has_bias, true, &st->prims[0], NULL) == MCP_STATUS_OK)
            st->n_prims = 1;
    }
    *state = st;
    return MCP_STATUS_OK;
}

static mcp_status conv_run(mcp_kernel_ctx *ctx)
{
    conv_state *st = ctx->state;
    const mcp_tensor *x = mcp_kin(ctx, 0), *b = mcp_kin(ctx, 2);
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    if (!x || x->dtype != MCP_DTYPE_FLOAT || x->rank != 4)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must be a 4-D float tensor");
    if (x->dims[1] != st->w->dims[1] * st->p.group)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' has %lld channels, expected %lld", (long long)x->dims[1],
                         (long long)(st->w->dims[1] * st->p.group));
    bool has_bias = st->has_bias;
    if (has_bias && (!b || b->dtype != MCP_DTYPE_FLOAT || mcp_tensor_numel(b) != st->w->dims[0]))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'B' must hold %lld floats",
                         (long long)st->w->dims[0]);
    int64_t out[4], pl[2], pr[2];
    if (!conv_geometry(&st->p, x->dims, out, pl, pr))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' spatial size is smaller than the kernel window");
    out[1] = st->w->dims[0];
    mcp_tensor *y = mcp_kout(ctx, 0, MCP_DTYPE_FLOAT, 4, out);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (mcp_tensor_numel(y) == 0 || mcp_tensor_numel(x) == 0) return MCP_STATUS_OK;

    conv_prim local;
    const conv_prim *cp = NULL;
    mcp_status rs = MCP_STATUS_OK;
    pthread_mutex_lock(&st->lock);
    for (int i = 0; i < st->n_prims && !cp; i++)
        if (memcmp(st->prims[i].in, x->dims, sizeof local.in) == 0) cp = &st->prims[i];
    if (!cp && st->n_prims < CONV_CACHE_MAX) {
        rs = conv_build(st, x->dims, has_bias, true, &st->prims[st->n_prims], ctx->err);
        if (rs == MCP_STATUS_OK) cp = &st->prims[st->n_prims++];
    }
    pthread_mutex_unlock(&st->lock);
    bool use_local = !cp;
    if (rs == MCP_STATUS_OK && use_local) {
        rs = conv_build(st, x->dims, has_bias, false, &local, ctx->err);
        if (rs == MCP_STATUS_OK) cp = &local;
    }
    if (rs != MCP_STATUS_OK) {
        mcp_err_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
        return rs;
    }
    dnnl_memory_desc_t src_md, dst_md, bias_md;
    dnnl_dims_t bd = {out[1]}, od = {out[0], out[1], out[2], out[3]};
    /* x, blocked x, weights, blocked y, y, bias */
    dnnl_memory_t mem[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    void *sbuf = NULL, *dbuf = NULL;
    if (dnnl_memory_desc_init_by_tag(&src_md, 4, x->dims, dnnl_f32, dnnl_nchw) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&dst_md, 4, od, dnnl_f32, dnnl_nchw) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, dnnl_f32, dnnl_a) != dnnl_success)
        rs = mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory descriptor failed");
    if (rs == MCP_STATUS_OK && cp->src_reorder) {
        sbuf = mcp_malloc(dnnl_memory_desc_get_size(&cp->smd));
        if (!sbuf) rs = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (rs == MCP_STATUS_OK && cp->dst_reorder) {
        dbuf = mcp_malloc(dnnl_memory_desc_get_size(&cp->dmd));
        if (!dbuf) rs = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, st->eng, &src_md, x->data, &mem[0]);
    if (rs == MCP_STATUS_OK && sbuf) rs = mcp__dnnl_wrap(ctx, st->eng, &cp->smd, sbuf, &mem[1]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, st->eng, &cp->wmd, cp->wdata, &mem[2]);
    if (rs == MCP_STATUS_OK && dbuf) rs = mcp__dnnl_wrap(ctx, st->eng, &cp->dmd, dbuf, &mem[3]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, st->eng, &dst_md, y->data, &mem[4]);
    if (rs == MCP_STATUS_OK && has_bias)
        rs = mcp__dnnl_wrap(ctx, st->eng, &bias_md, b->data, &mem[5]);
    if (rs == MCP_STATUS_OK) {
        dnnl_memory_t src = sbuf ? mem[1] : mem[0], dst = dbuf ? mem[3] : mem[4];
        if (sbuf) {
            dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, mem[0]}, {DNNL_ARG_TO, mem[1]}};
            rs = mcp__dnnl_execute(ctx, st->eng, cp->src_reorder, 2, ra);
        }
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src},
                                   {DNNL_ARG_WEIGHTS, mem[2]},
                                   {DNNL_ARG_DST, dst},
                                   {DNNL_ARG_BIAS, mem[5]}};
        if (rs == MCP_STATUS_OK)
            rs = mcp__dnnl_execute(ctx, st->eng, cp->prim, has_bias ? 4 : 3, args);
        if (rs == MCP_STATUS_OK && dbuf) {
            dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, mem[3]}, {DNNL_ARG_TO, mem[4]}};
            rs = mcp__dnnl_execute(ctx, st->eng, cp->dst_reorder, 2, ra);
        }
    }
    for (int i = 0; i < 6; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    mcp_free(sbuf);
    mcp_free(dbuf);
    if (use_local) conv_prim_release(&local);
    return rs;
}

const mcp_kernel_def mcp__dnnl_conv_kernel = {
    "", "Conv", 1, 0, conv_run, NULL, conv_prepare, conv_release,
};
