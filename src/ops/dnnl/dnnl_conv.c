/*
 * oneDNN Conv and FusedConv: fp32, 2-D, NCHW, groups, strides, pads,
 * dilations, auto_pad and bias; FusedConv adds the residual Sum input as a
 * sum post-op and its activation as eltwise post-ops (see graph.h).
 *
 * QLinearConv and ConvInteger run as oneDNN int8 convolutions: u8 or s8
 * activations with their zero point (read at run time), s8 weights (u8
 * weights with zero point 128 become s8 at load, exactly), s32 bias, and
 * for QLinearConv the requantization x_scale * w_scale[c] / y_scale as
 * output scales (per tensor or per output channel) with y's zero point;
 * ConvInteger writes the s32 accumulator. Only where the CPU has VNNI
 * (vpdpbusd): elsewhere oneDNN multiplies u8 by s8 into saturating 16-bit
 * pairs, or halves the weights to avoid it, and the answers would depend on
 * the CPU; those machines use the reference kernels. Nonzero weight zero
 * points (after the u8 shift) also stay with the reference kernels.
 *
 * The weights must be an initializer. Primitives are built per input shape
 * (at load when X's shape is static, else on first use; up to CONV_CACHE_MAX
 * shapes per node, under a mutex; primitives execute outside it) with
 * format_tag_any, so oneDNN picks its blocked layouts: the weights are
 * reordered once per cached shape, and Y is written in the primitive's
 * destination layout with a tensor format attached. X is read in place when
 * it arrives in the layout the primitive wants (another oneDNN kernel's
 * output), else reordered. Past the cache, a primitive over plain layouts is
 * built per call.
 */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

/* Input shapes cached per node; further shapes build a primitive per call. */
#define CONV_CACHE_MAX 8

static const char *const conv_attrs[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                         "pads", "strides", NULL};
static const char *const qconv_add_attrs[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                              "pads", "strides", "relu", NULL};
static const char *const fused_conv_attrs[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                               "pads", "strides", "activation",
                                               "activation_params", NULL};

/* QLinearConv / ConvInteger: what differs from an fp32 convolution. */
typedef struct conv_quant {
    bool on;
    bool requant;                    /* QLinearConv: scaled to y's type */
    dnnl_data_type_t src_dt, dst_dt; /* u8/s8; u8/s8 or s32 */
    int x_zp_in, y_zp_in;            /* inputs holding the zero points, -1: none */
    int n_scales;                    /* 1, or one per output channel */
    float *scales;                   /* x_scale * w_scale[c] / y_scale */
    mcp_tensor w8;                   /* s8 weights shifted from u8, owned; else unset */
    /* QLinearConvAdd: S dequantized and added before y's quantization
     * (a sum post-op over Y pre-filled with S), then Relu. */
    float s_scale; /* S_scale / y_scale */
    int32_t s_zp;
    dnnl_data_type_t s_dt;
    bool relu;
} conv_quant;

/* Attributes of one Conv node, parsed once. */
typedef struct conv_params {
    int64_t group;
    int64_t stride[2], dil[2], pads[4], kernel[2];
    int auto_pad; /* 0 NOTSET, 1 VALID, 2 SAME_UPPER, 3 SAME_LOWER */
} conv_params;

/* A built primitive for one input shape. */
typedef struct conv_prim {
    dnnl_primitive_t prim;
    dnnl_memory_desc_t smd;       /* the source layout the primitive reads */
    /* plain X -> smd, built when a plain X first comes (most convolutions
     * read another oneDNN kernel's output in place) */
    _Atomic(dnnl_primitive_t) src_reorder;
    mcp_dnnl_format dst;          /* Y's layout */
    dnnl_memory_desc_t wmd;
    const void *wdata; /* the node's packed weights, own, or the initializer */
    mcp_dnnl_packed own; /* weights in a layout other than the node's packed one */
    int64_t in[4], out[4];
    int threads; /* the OpenMP budget it is built and run under (oneDNN fixes its split then) */
} conv_prim;

typedef struct conv_state {
    const mcp_node *node; /* for the post-ops; the graph outlives the state */
    conv_params p;
    const mcp_tensor *w;
    int w_in, b_in, sum_in; /* inputs holding the weights, the bias and the sum */
    conv_quant q;
    bool has_bias, has_sum;
    bool bf16; /* float32 computed in bf16 (see dnnl_util.h) */
    bool blocked_batch1; /* the graph concatenates convolutions' channels */
    mcp_dnnl_packed packed; /* written under lock (or at load), before publishing */
    bool plain_gone;        /* the session freed the plain weights (after load) */
    pthread_mutex_t lock;
    /* Entries [0, n_prims) never change once published; n_prims is read and
     * written under lock. */
    int n_prims;
    conv_prim prims[CONV_CACHE_MAX];
} conv_state;

static bool parse_params(const mcp_node *node, const mcp_tensor *w, conv_params *p)
{
    memset(p, 0, sizeof *p);
    p->group = mcp_node_attr_int(node, "group", 1);
    for (int i = 0; i < 2; i++) {
        p->stride[i] = p->dil[i] = 1;
        p->kernel[i] = w->dims[i + 2];
    }
    if (!mcp__dnnl_attr_ints(node, "strides", 2, 1, p->stride)) return false;
    if (!mcp__dnnl_attr_ints(node, "dilations", 2, 1, p->dil)) return false;
    if (!mcp__dnnl_attr_ints(node, "pads", 4, 0, p->pads)) return false;
    int64_t k[2] = {p->kernel[0], p->kernel[1]};
    if (!mcp__dnnl_attr_ints(node, "kernel_shape", 2, 1, k)) return false;
    if (k[0] != p->kernel[0] || k[1] != p->kernel[1]) return false;
    const char *ap = mcp_node_attr_string(node, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0) p->auto_pad = 0;
    else if (strcmp(ap, "VALID") == 0) p->auto_pad = 1;
    else if (strcmp(ap, "SAME_UPPER") == 0) p->auto_pad = 2;
    else if (strcmp(ap, "SAME_LOWER") == 0) p->auto_pad = 3;
    else return false;
    return p->group > 0 && w->dims[0] % p->group == 0 && w->dims[0] > 0 && w->dims[1] > 0;
}

static bool qconv_supported(const mcp_node *node, const mcp_graph *graph);

bool mcp__dnnl_conv_supported(const mcp_node *node, const mcp_graph *graph)
{
    if (strcmp(node->op_type, "QLinearConv") == 0 || strcmp(node->op_type, "ConvInteger") == 0)
        return node->domain[0] == '\0' && qconv_supported(node, graph);
    if (strcmp(node->op_type, "QLinearConvAdd") == 0)
        return strcmp(node->domain, MCP_DOMAIN_INTERNAL) == 0 && qconv_supported(node, graph);
    bool fused = strcmp(node->op_type, "FusedConv") == 0;
    if (node->n_inputs < 2 || node->n_inputs > (fused ? 4 : 3) || node->n_outputs != 1) return false;
    if (!mcp__dnnl_attrs_within(node, fused ? fused_conv_attrs : conv_attrs)) return false;
    if (fused && !mcp__dnnl_append_activation(node, NULL)) return false;
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
    if (mcp__dnnl_input(node, graph, 3) && mcp__dnnl_f32_rank(node, graph, 3) != 4) return false;
    conv_params p;
    if (!parse_params(node, w, &p)) return false;
    if (x->type.dims[1] >= 0 && x->type.dims[1] != w->dims[1] * p.group) return false;
    return true;
}

/* The weights' zero point (input zi, an initializer or absent) is 0 for s8
 * weights, 128 for u8 ones (then shifted to s8), per tensor or channel. */
static bool weight_zp_ok(const mcp_node *node, const mcp_graph *graph, int zi, const mcp_tensor *w)
{
    const mcp_tensor *z = mcp__dnnl_initializer(node, graph, zi);
    if (!z) return mcp__dnnl_input(node, graph, zi) == NULL && w->dtype == MCP_DTYPE_INT8;
    if (z->dtype != w->dtype || z->rank > 1) return false;
    int64_t c = mcp_tensor_numel(z);
    if (c != 1 && c != w->dims[0]) return false;
    for (int64_t i = 0; i < c; i++) {
        int v = w->dtype == MCP_DTYPE_UINT8 ? ((const uint8_t *)z->data)[i] : ((const int8_t *)z->data)[i];
        if (v != (w->dtype == MCP_DTYPE_UINT8 ? 128 : 0)) return false;
    }
    return true;
}

static bool qconv_supported(const mcp_node *node, const mcp_graph *graph)
{
    bool add = strcmp(node->op_type, "QLinearConvAdd") == 0;
    bool ql = add || strcmp(node->op_type, "QLinearConv") == 0;
    if (node->n_outputs != 1 || (add ? node->n_inputs != 12
                                     : ql ? node->n_inputs < 8 || node->n_inputs > 9
                                          : node->n_inputs < 2 || node->n_inputs > 4))
        return false;
    if (!mcp__dnnl_attrs_within(node, add ? qconv_add_attrs : conv_attrs) || !mcp__dnnl_has_vnni()) return false;
    if (add) {
        /* S: 8-bit, 4-D, with a constant scale and zero point (the sum
         * post-op takes them when the primitive is built). */
        const mcp_graph_value *sv = mcp__dnnl_input(node, graph, 9);
        const mcp_tensor *sz = mcp__dnnl_initializer(node, graph, 11);
        if (!sv || sv->type.kind != MCP_VALUE_TENSOR || !mcp__dnnl_is_int8(sv->type.dtype) || sv->type.rank != 4)
            return false;
        if (!mcp__dnnl_scale_ok(mcp__dnnl_initializer(node, graph, 10), 1) || !sz || sz->dtype != sv->type.dtype ||
            mcp_tensor_numel(sz) != 1)
            return false;
        const mcp_graph_value *yz = mcp__dnnl_input(node, graph, 7);
        if (!yz) return false;
    }
    int wi = ql ? 3 : 1;
    const mcp_graph_value *x = mcp__dnnl_input(node, graph, 0);
    const mcp_tensor *w = mcp__dnnl_initializer(node, graph, wi);
    if (!x || x->type.kind != MCP_VALUE_TENSOR || x->type.is_optional || !mcp__dnnl_is_int8(x->type.dtype) || x->type.rank != 4)
        return false;
    if (!w || !mcp__dnnl_is_int8(w->dtype) || w->rank != 4 || !weight_zp_ok(node, graph, wi + 2, w)) return false;
    if (!mcp__dnnl_zp_input_ok(node, graph, 2, x->type.dtype)) return false;
    if (ql) {
        if (!mcp__dnnl_scale_ok(mcp__dnnl_initializer(node, graph, 1), 1) ||
            !mcp__dnnl_scale_ok(mcp__dnnl_initializer(node, graph, 4), w->dims[0]) ||
            !mcp__dnnl_scale_ok(mcp__dnnl_initializer(node, graph, 6), 1))
            return false;
        const mcp_graph_value *yz = mcp__dnnl_input(node, graph, 7);
        if (yz && !mcp__dnnl_zp_input_ok(node, graph, 7, yz->type.dtype)) return false;
        if (yz && !mcp__dnnl_is_int8(yz->type.dtype)) return false;
        const mcp_graph_value *b = mcp__dnnl_input(node, graph, 8);
        if (b && (b->type.kind != MCP_VALUE_TENSOR || b->type.dtype != MCP_DTYPE_INT32 || b->type.rank != 1))
            return false;
    }
    conv_params p;
    if (!parse_params(node, w, &p)) return false;
    return x->type.dims[1] < 0 || x->type.dims[1] == w->dims[1] * p.group;
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
    dnnl_primitive_t r = atomic_load(&cp->src_reorder);
    if (r) dnnl_primitive_destroy(r);
    mcp__dnnl_format_release(&cp->dst);
    mcp__dnnl_packed_release(&cp->own);
    memset(cp, 0, sizeof *cp);
}

/* Plain weights descriptor: oihw, or goihw for grouped convolutions. */
static dnnl_status_t plain_weights_md(const conv_state *st, dnnl_memory_desc_t *md,
                                      dnnl_format_tag_t tag_or_any)
{
    const mcp_tensor *w = st->w;
    int64_t g = st->p.group;
    /* bf16 packs the float32 weights as bf16 (the plain ones stay f32). */
    dnnl_data_type_t dt = st->q.on ? dnnl_s8 : st->bf16 && tag_or_any == dnnl_format_tag_any ? dnnl_bf16 : dnnl_f32;
    if (g == 1) {
        dnnl_dims_t d = {w->dims[0], w->dims[1], w->dims[2], w->dims[3]};
        return dnnl_memory_desc_init_by_tag(md, 4, d, dt,
                                            tag_or_any == dnnl_format_tag_any ? tag_or_any : dnnl_oihw);
    }
    dnnl_dims_t d = {g, w->dims[0] / g, w->dims[1], w->dims[2], w->dims[3]};
    return dnnl_memory_desc_init_by_tag(md, 5, d, dt,
                                        tag_or_any == dnnl_format_tag_any ? tag_or_any : dnnl_goihw);
}

/* Primitive attributes: user scratchpad, then Sum and the activation; for
 * the int8 convolutions the output scales and the zero points (given at
 * run time). */
static dnnl_status_t conv_attr(const conv_state *st, dnnl_primitive_attr_t *attr)
{
    dnnl_status_t s = mcp__dnnl_attr_create(attr);
    if (s == dnnl_success && st->q.on) {
        const int32_t rt = DNNL_RUNTIME_S32_VAL;
        if (st->q.requant)
            s = dnnl_primitive_attr_set_output_scales(*attr, st->q.n_scales, st->q.n_scales > 1 ? 1 << 1 : 0,
                                                      st->q.scales);
        if (s == dnnl_success && st->q.x_zp_in >= 0)
            s = dnnl_primitive_attr_set_zero_points(*attr, DNNL_ARG_SRC, 1, 0, &rt);
        if (s == dnnl_success && st->q.y_zp_in >= 0)
            s = dnnl_primitive_attr_set_zero_points(*attr, DNNL_ARG_DST, 1, 0, &rt);
        if (s == dnnl_success && st->has_sum) {
            dnnl_post_ops_t po = NULL;
            s = dnnl_post_ops_create(&po);
            if (s == dnnl_success) s = dnnl_post_ops_append_sum_v3(po, st->q.s_scale, st->q.s_zp, st->q.s_dt);
            if (s == dnnl_success && st->q.relu)
                s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
            if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(*attr, po);
            if (po) dnnl_post_ops_destroy(po);
        }
        if (s != dnnl_success) {
            dnnl_primitive_attr_destroy(*attr);
            *attr = NULL;
        }
        return s;
    }
    if (s != dnnl_success || strcmp(st->node->op_type, "FusedConv") != 0) return s;
    dnnl_post_ops_t po = NULL;
    s = dnnl_post_ops_create(&po);
    if (s == dnnl_success && st->has_sum) s = dnnl_post_ops_append_sum(po, 1.0f);
    if (s == dnnl_success && !mcp__dnnl_append_activation(st->node, po)) s = dnnl_unimplemented;
    if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(*attr, po);
    if (po) dnnl_post_ops_destroy(po);
    if (s != dnnl_success) {
        dnnl_primitive_attr_destroy(*attr);
        *attr = NULL;
    }
    return s;
}

/* Multiply-adds of the convolution of input shape in[4]. */
static int64_t conv_macs(const conv_state *st, const int64_t *in)
{
    int64_t out[4], pl[2], pr[2];
    if (!conv_geometry(&st->p, in, out, pl, pr)) return 0;
    const int64_t *w = st->w->dims;
    return in[0] * w[0] * out[2] * out[3] * w[1] * w[2] * w[3];
}

/* Creates cp->prim from the descriptors; fills cp->smd, cp->wmd and dmd. */
static dnnl_status_t conv_create(const conv_state *st, const dnnl_convolution_desc_t *cd, conv_prim *cp,
                                 dnnl_memory_desc_t *dmd)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_status_t s = conv_attr(st, &attr);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, cd, attr, mcp__dnnl_engine(), NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return s;
    cp->wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    cp->smd = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    *dmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    s = dnnl_primitive_create(&cp->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) cp->prim = NULL;
    return s;
}

/*
 * Builds the primitive for input shape in[4]. With `prepack` oneDNN picks
 * the activation and weight layouts (format_tag_any); the weights are
 * packed once per node for the first shape built, and again per primitive
 * only for a shape whose primitive wants another layout (forcing the node's
 * layout on it can select oneDNN's slow reference kernel). Without
 * `prepack` everything is plain.
 */
static mcp_status conv_build(conv_state *st, const int64_t *in, bool prepack, conv_prim *cp,
                             mcp_err *err)
{
    memset(cp, 0, sizeof *cp);
    int64_t out[4], pl[2], pr[2];
    if (!conv_geometry(&st->p, in, out, pl, pr))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is smaller than the kernel window");
    out[1] = st->w->dims[0];
    memcpy(cp->in, in, sizeof cp->in);
    memcpy(cp->out, out, sizeof cp->out);
    cp->threads = omp_get_max_threads();

    dnnl_memory_desc_t src_md, dst_md, bias_md, wplain_md, wany_md, src_any, dst_any;
    dnnl_dims_t sd = {in[0], in[1], in[2], in[3]}, dd = {out[0], out[1], out[2], out[3]};
    dnnl_dims_t bd = {out[1]};
    dnnl_dims_t strides = {st->p.stride[0], st->p.stride[1]};
    dnnl_dims_t dil = {st->p.dil[0] - 1, st->p.dil[1] - 1};
    dnnl_dims_t padl = {pl[0], pl[1]}, padr = {pr[0], pr[1]};
    dnnl_data_type_t sdt = st->q.on ? st->q.src_dt : dnnl_f32, ddt = st->q.on ? st->q.dst_dt : dnnl_f32;
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&src_md, 4, sd, sdt, dnnl_nchw);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&dst_md, 4, dd, ddt, dnnl_nchw);
    /* bf16: activations in and out as bf16 in the primitive's layouts (a
     * float32 X is converted by the source reorder). */
    if (st->bf16) sdt = ddt = dnnl_bf16;
    /* With a batch, the channel-blocked layout's kernels beat what oneDNN
     * picks by itself (channels-last brgconv) by 5-20% on the bench CNNs at
     * batch 8. At batch 1 oneDNN's own pick is as fast (ResNet-50: 4%
     * faster), except in graphs that concatenate convolutions' channels:
     * there the blocked layout makes each input of the Concat one contiguous
     * range of its output, which the memory plan can have the convolutions
     * write in place (SqueezeNet's Concats: 0.40 ms to 0.04 ms per run).
     * Grouped convolutions take it only when each group's channels fill
     * whole blocks, or when depthwise: otherwise oneDNN 2.6 has only its
     * reference kernel for the blocked layout. */
    int64_t g = st->p.group, icg = in[1] / g, ocg = out[1] / g;
    bool group_ok = g == 1 || (icg == 1 && ocg == 1) || (icg % 16 == 0 && ocg % 16 == 0);
    /* int8: oneDNN's own pick (channels-last). */
    bool blocked = group_ok && !st->q.on && !st->bf16 && (in[0] >= 2 || st->blocked_batch1);
    dnnl_format_tag_t src_tag = blocked && in[1] % 16 == 0 ? dnnl_aBcd16b : dnnl_format_tag_any;
    dnnl_format_tag_t dst_tag = blocked && out[1] % 16 == 0 ? dnnl_aBcd16b : dnnl_format_tag_any;
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&src_any, 4, sd, sdt, src_tag);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&dst_any, 4, dd, ddt, dst_tag);
    if (s == dnnl_success) s = dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, st->q.on ? dnnl_s32 : dnnl_f32, dnnl_a);
    if (s == dnnl_success) s = plain_weights_md(st, &wplain_md, dnnl_format_tag_undef);
    if (s == dnnl_success) s = plain_weights_md(st, &wany_md, dnnl_format_tag_any);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "memory descriptor");

    dnnl_memory_desc_t dmd;
    dnnl_convolution_desc_t cd;
    s = dnnl_dilated_convolution_forward_desc_init(
        &cd, dnnl_forward_inference, dnnl_convolution_direct, prepack ? &src_any : &src_md,
        prepack ? &wany_md : &wplain_md, st->has_bias ? &bias_md : NULL, prepack ? &dst_any : &dst_md,
        strides, dil, padl, padr);
    if (s == dnnl_success) s = conv_create(st, &cd, cp, &dmd);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "convolution primitive");
    mcp_status rs = mcp__dnnl_format_init(&cp->dst, &dmd, 4, out, err);
    if (rs == MCP_STATUS_OK)
        rs = mcp__dnnl_weights_for(&st->packed, st->plain_gone, &wplain_md, st->w->data, &cp->wmd, &cp->own,
                                   &cp->wdata, err);
    if (rs != MCP_STATUS_OK) conv_prim_release(cp);
    return rs;
}

/* The plain weights (input 1) may go once the packed copy exists: it
 * serves every later primitive. */
static bool conv_release_plain(void *state, int input, bool commit)
{
    conv_state *st = state;
    if (!st || input != st->w_in) return false;
    if (st->q.w8.data) return true; /* the shifted copy serves */
    if (!st->packed.have) return false;
    if (commit) st->plain_gone = true;
    return true;
}

static bool conv_packed_weights(const void *state, int slot, mcp_prepacked *out)
{
    const conv_state *st = state;
    return st && slot == 0 && mcp__dnnl_packed_view(&st->packed, out);
}

static bool conv_computes_bf16(const void *state)
{
    const conv_state *st = state;
    return st->bf16;
}

static void conv_release(void *state)
{
    conv_state *st = state;
    if (!st) return;
    for (int i = 0; i < st->n_prims; i++) conv_prim_release(&st->prims[i]);
    mcp__dnnl_packed_release(&st->packed);
    mcp_free(st->q.scales);
    mcp_tensor_release(&st->q.w8);
    pthread_mutex_destroy(&st->lock);
    mcp_free(st);
}

/* True when some Concat along axis 1 (or -3 of a 4-D tensor) joins a
 * convolution's output. */
static bool concatenates_convs(const mcp_graph *graph)
{
    for (int i = 0; i < graph->n_nodes; i++) {
        const mcp_node *n = &graph->nodes[i];
        if (strcmp(n->op_type, "Concat") != 0 || n->domain[0] != '\0') continue;
        int64_t axis = mcp_node_attr_int(n, "axis", 0);
        if (axis != 1 && axis != -3) continue;
        for (int j = 0; j < n->n_inputs; j++) {
            int v = n->inputs[j];
            int p = v >= 0 ? graph->values[v].producer : -1;
            if (p < 0) continue;
            const char *op = graph->nodes[p].op_type;
            if (strcmp(op, "Conv") == 0 || strcmp(op, "FusedConv") == 0) return true;
        }
    }
    return false;
}

/* Input i is an initializer holding the single value 0. */
static bool zero_constant(const mcp_node *node, const mcp_graph *graph, int i)
{
    const mcp_tensor *t = mcp__dnnl_initializer(node, graph, i);
    int32_t v;
    return t && mcp__dnnl_zp_value(t, mcp__dnnl_dt(t->dtype), &v) && v == 0;
}

/* The int8 convolutions' part of the state (see qconv_supported). */
static mcp_status qconv_prepare(conv_state *st, const mcp_node *node, const mcp_graph *graph, mcp_err *err)
{
    bool add = strcmp(node->op_type, "QLinearConvAdd") == 0;
    bool ql = add || strcmp(node->op_type, "QLinearConv") == 0;
    conv_quant *q = &st->q;
    q->on = true;
    q->requant = ql;
    st->w_in = ql ? 3 : 1;
    st->b_in = ql ? 8 : -1;
    const mcp_tensor *w = mcp__dnnl_initializer(node, graph, st->w_in);
    const mcp_graph_value *x = mcp__dnnl_input(node, graph, 0);
    q->src_dt = mcp__dnnl_dt(x->type.dtype);
    /* A zero point that is a constant 0 is left out of the primitive:
     * oneDNN's fastest int8 kernels (brgconv) take none. */
    q->x_zp_in = mcp__dnnl_input(node, graph, 2) && !zero_constant(node, graph, 2) ? 2 : -1;
    if (ql) {
        const mcp_graph_value *yz = mcp__dnnl_input(node, graph, 7);
        q->y_zp_in = yz && !zero_constant(node, graph, 7) ? 7 : -1;
        q->dst_dt = yz ? mcp__dnnl_dt(yz->type.dtype) : dnnl_u8;
        const mcp_tensor *xs = mcp__dnnl_initializer(node, graph, 1), *ws = mcp__dnnl_initializer(node, graph, 4),
                         *ys = mcp__dnnl_initializer(node, graph, 6);
        q->n_scales = (int)mcp_tensor_numel(ws);
        q->scales = mcp_malloc(sizeof *q->scales * (size_t)q->n_scales);
        if (!q->scales) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        /* As the reference kernel forms it: (x_scale * w_scale) / y_scale in float. */
        for (int c = 0; c < q->n_scales; c++)
            q->scales[c] = ((const float *)xs->data)[0] * ((const float *)ws->data)[c] / ((const float *)ys->data)[0];
        if (add) {
            const mcp_tensor *ss = mcp__dnnl_initializer(node, graph, 10), *sz = mcp__dnnl_initializer(node, graph, 11);
            st->has_sum = true;
            st->sum_in = 9;
            q->s_scale = ((const float *)ss->data)[0] / ((const float *)ys->data)[0];
            q->s_dt = mcp__dnnl_dt(sz->dtype);
            mcp__dnnl_zp_value(sz, q->s_dt, &q->s_zp);
            q->relu = mcp_node_attr_int(node, "relu", 0) != 0;
        }
    } else {
        q->dst_dt = dnnl_s32;
    }
    st->w = w;
    if (w->dtype == MCP_DTYPE_UINT8) {
        /* w - 128 with zero point 0: the same products, as s8. */
        if (mcp_tensor_alloc(&q->w8, MCP_DTYPE_INT8, w->rank, w->dims, err) != MCP_STATUS_OK) return MCP_STATUS_OUT_OF_MEMORY;
        const uint8_t *from = w->data;
        int8_t *to = q->w8.data;
        for (int64_t i = 0, n = mcp_tensor_numel(w); i < n; i++) to[i] = (int8_t)((int)from[i] - 128);
        st->w = &q->w8;
    }
    return MCP_STATUS_OK;
}

static mcp_status conv_prepare(const mcp_node *node, const mcp_graph *graph, void **state,
                               mcp_err *err)
{
    *state = NULL;
    if (!mcp__dnnl_engine()) return mcp_err_set(err, MCP_STATUS_INTERNAL, "oneDNN engine creation failed");
    conv_state *st = mcp_calloc(1, sizeof *st);
    if (!st) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&st->lock, NULL);
    st->node = node;
    st->w_in = 1;
    st->b_in = 2;
    st->sum_in = 3;
    st->q.x_zp_in = st->q.y_zp_in = -1;
    if (strcmp(node->op_type, "QLinearConv") == 0 || strcmp(node->op_type, "ConvInteger") == 0 ||
        strcmp(node->op_type, "QLinearConvAdd") == 0) {
        mcp_status qs = qconv_prepare(st, node, graph, err);
        if (qs != MCP_STATUS_OK) {
            conv_release(st);
            return qs;
        }
    } else {
        st->w = mcp__dnnl_initializer(node, graph, 1);
        st->has_sum = mcp__dnnl_input(node, graph, 3) != NULL;
        st->bf16 = mcp__dnnl_bf16_for(graph);
    }
    st->has_bias = mcp__dnnl_input(node, graph, st->b_in) != NULL;
    st->blocked_batch1 = concatenates_convs(graph);
    if (!st->w || !parse_params(node, st->w, &st->p)) {
        conv_release(st);
        return mcp_err_set(err, MCP_STATUS_INTERNAL, "oneDNN Conv: node is not supported");
    }
    /* A compiled model's packed weights; the plain ones may be gone. */
    if (mcp__dnnl_packed_adopt(&st->packed, graph, node)) st->plain_gone = st->w->data == NULL;
    if (!st->w->data && mcp_tensor_numel(st->w) > 0 && !st->packed.have) {
        conv_release(st);
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "the weights are held packed only, and no packed copy fits");
    }
    /* Built at load for X's static shape, unknown dims taken as 1 (the
     * batch-1 shape): that also packs the weights. */
    int64_t in[4], out[4], pl[2], pr[2];
    bool known = mcp__dnnl_dims_or_one(node, graph, 0, in);
    for (int i = 0; i < 4; i++) known &= in[i] > 0;
    if (known && conv_geometry(&st->p, in, out, pl, pr)) {
        /* A shape oneDNN cannot build here is left to the run path, which
         * reports the error when the node runs. */
        int prev = mcp__dnnl_serial_begin(conv_macs(st, in), MCP_DNNL_SERIAL_CONV_MACS);
        if (conv_build(st, in, true, &st->prims[0], NULL) == MCP_STATUS_OK) st->n_prims = 1;
        mcp__dnnl_serial_end(prev);
    }
    mcp_status rs = mcp__dnnl_packed_settle(&st->packed, st->w->data != NULL, &st->plain_gone, err);
    if (rs != MCP_STATUS_OK) {
        conv_release(st);
        return rs;
    }
    *state = st;
    return MCP_STATUS_OK;
}

/* The cached primitive for X's shape, built on first use; *local receives a
 * per-call one once the cache is full (the caller releases it). */
static mcp_status conv_lookup(mcp_kernel_ctx *ctx, conv_state *st, const int64_t *in,
                              conv_prim *local, const conv_prim **out)
{
    *out = NULL;
    mcp_status rs = MCP_STATUS_OK;
    pthread_mutex_lock(&st->lock);
    int threads = omp_get_max_threads();
    for (int i = 0; i < st->n_prims && !*out; i++)
        if (memcmp(st->prims[i].in, in, sizeof st->prims[i].in) == 0 && st->prims[i].threads == threads)
            *out = &st->prims[i];
    if (!*out && st->n_prims < CONV_CACHE_MAX) {
        rs = conv_build(st, in, true, &st->prims[st->n_prims], ctx->err);
        if (rs == MCP_STATUS_OK) *out = &st->prims[st->n_prims++];
    }
    /* A per-call primitive once the cache is full, also under the lock:
     * its weights may be reordered from the node's packed copy, whose
     * verification it may write. */
    if (rs == MCP_STATUS_OK && !*out) {
        rs = conv_build(st, in, false, local, ctx->err);
        if (rs == MCP_STATUS_OK) *out = local;
    }
    pthread_mutex_unlock(&st->lock);
    if (rs != MCP_STATUS_OK) mcp_err_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    return rs;
}

static mcp_status conv_run(mcp_kernel_ctx *ctx)
{
    conv_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    const mcp_tensor *x = mcp_kin(ctx, 0), *b = st->has_bias ? mcp_kin(ctx, st->b_in) : NULL;
    const mcp_tensor *sum = st->has_sum ? mcp_kin(ctx, st->sum_in) : NULL;
    const conv_quant *q = &st->q;
    mcp_dtype in_dt = MCP_DTYPE_FLOAT, out_dt = MCP_DTYPE_FLOAT, bias_dt = MCP_DTYPE_FLOAT;
    int32_t zp[2] = {0, 0}; /* x's, y's */
    if (q->on) {
        in_dt = q->src_dt == dnnl_u8 ? MCP_DTYPE_UINT8 : MCP_DTYPE_INT8;
        out_dt = q->dst_dt == dnnl_u8 ? MCP_DTYPE_UINT8 : q->dst_dt == dnnl_s8 ? MCP_DTYPE_INT8 : MCP_DTYPE_INT32;
        bias_dt = MCP_DTYPE_INT32;
        if (!mcp__dnnl_zp_value(q->x_zp_in >= 0 ? mcp_kin(ctx, q->x_zp_in) : NULL, q->src_dt, &zp[0]))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'x_zero_point' must be one %s value",
                             mcp_dtype_name(in_dt));
        if (!mcp__dnnl_zp_value(q->y_zp_in >= 0 ? mcp_kin(ctx, q->y_zp_in) : NULL, q->dst_dt, &zp[1]))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'y_zero_point' must be one %s value",
                             mcp_dtype_name(out_dt));
    }
    if (!x || x->dtype != in_dt || x->rank != 4)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must be a 4-D %s tensor", mcp_dtype_name(in_dt));
    if (x->dims[1] != st->w->dims[1] * st->p.group)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' has %lld channels, expected %lld", (long long)x->dims[1],
                         (long long)(st->w->dims[1] * st->p.group));
    if (st->has_bias && (!b || b->dtype != bias_dt || mcp_tensor_numel(b) != st->w->dims[0]))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'B' must hold %lld %s values",
                         (long long)st->w->dims[0], mcp_dtype_name(bias_dt));
    int64_t out[4], pl[2], pr[2];
    if (!conv_geometry(&st->p, x->dims, out, pl, pr))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' spatial size is smaller than the kernel window");
    out[1] = st->w->dims[0];
    mcp_dtype sum_dt = q->on ? (q->s_dt == dnnl_u8 ? MCP_DTYPE_UINT8 : MCP_DTYPE_INT8) : MCP_DTYPE_FLOAT;
    if (st->has_sum && (!sum || sum->dtype != sum_dt || sum->rank != 4 || memcmp(sum->dims, out, sizeof out) != 0))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must be a %s tensor of the output's shape",
                         q->on ? "S" : "Sum", mcp_dtype_name(sum_dt));
    if (mcp_shape_numel(4, out) == 0) return mcp_kout(ctx, 0, out_dt, 4, out) ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;

    conv_prim local;
    const conv_prim *cp = NULL;
    int prev_threads = mcp__dnnl_serial_begin(conv_macs(st, x->dims), MCP_DNNL_SERIAL_CONV_MACS);
    mcp_status rs = conv_lookup(ctx, st, x->dims, &local, &cp);
    if (rs != MCP_STATUS_OK) {
        mcp__dnnl_serial_end(prev_threads);
        return rs;
    }
    mcp_tensor *y = mcp_kout_format(ctx, 0, out_dt, 4, out, mcp__dnnl_format_of(&cp->dst));
    if (!y) rs = MCP_STATUS_OUT_OF_MEMORY;
    if (rs == MCP_STATUS_OK && st->has_sum) {
        /* S goes into Y in Y's layout and type (bf16 included); int8: as
         * s8 / u8 bytes when S's type differs from Y's (the sum post-op
         * reads them as S's type). */
        dnnl_memory_desc_t to = cp->dst.md;
        if (q->on) to.data_type = mcp__dnnl_dt(sum->dtype);
        rs = mcp__dnnl_reorder_into(ctx, sum, &to, y->data);
    }

    /* X as the primitive reads it: in place, or reordered into sbuf. */
    const void *src = x->data;
    void *sbuf = NULL, *heap = NULL;
    dnnl_memory_desc_t xmd;
    if (rs == MCP_STATUS_OK && !mcp__dnnl_tensor_md(x, &xmd))
        rs = mcp_kfail(ctx, MCP_STATUS_INTERNAL, "input 'X' is in a format oneDNN cannot read");
    if (rs == MCP_STATUS_OK && !dnnl_memory_desc_equal(&xmd, &cp->smd)) {
        size_t ssize = dnnl_memory_desc_get_size(&cp->smd);
        sbuf = mcp_kscratch(ctx, 1, ssize);
        if (!sbuf) sbuf = heap = mcp_malloc(ssize);
        if (!sbuf) rs = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        else if (!x->format) {
            /* The primitive's own reorder, built on first use; a thread
             * that loses the race drops its copy. */
            conv_prim *shared = (conv_prim *)cp;
            dnnl_primitive_t r = atomic_load(&shared->src_reorder);
            if (!r) {
                dnnl_status_t s = mcp__dnnl_reorder_create(&xmd, &cp->smd, &r);
                if (s != dnnl_success) rs = mcp__dnnl_fail(ctx->err, s, "activation reorder");
                dnnl_primitive_t none = NULL;
                if (r && !atomic_compare_exchange_strong(&shared->src_reorder, &none, r)) {
                    dnnl_primitive_destroy(r);
                    r = none;
                }
            }
            dnnl_memory_t m[2] = {NULL, NULL};
            if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &xmd, x->data, &m[0]);
            if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &cp->smd, sbuf, &m[1]);
            if (rs == MCP_STATUS_OK) {
                dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, m[0]}, {DNNL_ARG_TO, m[1]}};
                rs = mcp__dnnl_execute(ctx, r, 2, ra);
            }
            for (int i = 0; i < 2; i++)
                if (m[i]) dnnl_memory_destroy(m[i]);
        } else {
            rs = mcp__dnnl_reorder_into(ctx, x, &cp->smd, sbuf);
        }
        src = sbuf;
    }

    dnnl_memory_desc_t bias_md, zp_md;
    dnnl_dims_t bd = {out[1]}, one = {1};
    dnnl_memory_t mem[6] = {NULL, NULL, NULL, NULL, NULL, NULL}; /* src, weights, dst, bias, zero points */
    if (rs == MCP_STATUS_OK &&
        (dnnl_memory_desc_init_by_tag(&bias_md, 1, bd, mcp__dnnl_dt(bias_dt), dnnl_a) != dnnl_success ||
         dnnl_memory_desc_init_by_tag(&zp_md, 1, one, dnnl_s32, dnnl_a) != dnnl_success))
        rs = mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory descriptor failed");
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &cp->smd, src, &mem[0]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &cp->wmd, cp->wdata, &mem[1]);
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_wrap(ctx, &cp->dst.md, y->data, &mem[2]);
    dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
    int nargs = 3;
    if (rs == MCP_STATUS_OK && st->has_bias) {
        rs = mcp__dnnl_wrap(ctx, &bias_md, b->data, &mem[3]);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem[3]};
    }
    if (rs == MCP_STATUS_OK && q->x_zp_in >= 0) {
        rs = mcp__dnnl_wrap(ctx, &zp_md, &zp[0], &mem[4]);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, mem[4]};
    }
    if (rs == MCP_STATUS_OK && q->y_zp_in >= 0) {
        rs = mcp__dnnl_wrap(ctx, &zp_md, &zp[1], &mem[5]);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, mem[5]};
    }
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_execute(ctx, cp->prim, nargs, args);
    for (int i = 0; i < 6; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    mcp_free(heap);
    if (cp == &local) conv_prim_release(&local);
    mcp__dnnl_serial_end(prev_threads);
    return rs;
}

const mcp_kernel_def mcp__dnnl_conv_kernel = {
    MCP_KERNEL_FIELDS("", "Conv", 1, 0, conv_run, NULL, conv_prepare, conv_release),
    .reads_formats = true, .release_plain_input = conv_release_plain, .packed_weights = conv_packed_weights,
    .computes_bf16 = conv_computes_bf16,
};
const mcp_kernel_def mcp__dnnl_fused_conv_kernel = {
    MCP_KERNEL_FIELDS(MCP_DOMAIN_INTERNAL, "FusedConv", 1, 0, conv_run, NULL, conv_prepare, conv_release),
    .reads_formats = true, .release_plain_input = conv_release_plain, .packed_weights = conv_packed_weights,
    .computes_bf16 = conv_computes_bf16,
};
const mcp_kernel_def mcp__dnnl_qlinear_conv_kernel = {
    MCP_KERNEL_FIELDS("", "QLinearConv", 10, 0, conv_run, NULL, conv_prepare, conv_release),
    .reads_formats = true, .release_plain_input = conv_release_plain, .packed_weights = conv_packed_weights,
    .computes_bf16 = conv_computes_bf16,
};
const mcp_kernel_def mcp__dnnl_conv_integer_kernel = {
    MCP_KERNEL_FIELDS("", "ConvInteger", 10, 0, conv_run, NULL, conv_prepare, conv_release),
    .reads_formats = true, .release_plain_input = conv_release_plain, .packed_weights = conv_packed_weights,
    .computes_bf16 = conv_computes_bf16,
};
const mcp_kernel_def mcp__dnnl_qlinear_conv_add_kernel = {
    MCP_KERNEL_FIELDS(MCP_DOMAIN_INTERNAL, "QLinearConvAdd", 1, 0, conv_run, NULL, conv_prepare, conv_release),
    .reads_formats = true, .release_plain_input = conv_release_plain, .packed_weights = conv_packed_weights,
    .computes_bf16 = conv_computes_bf16,
};
