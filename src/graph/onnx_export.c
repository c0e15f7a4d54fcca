/*
 * ONNX export: writes a graph of our IR (after the passes: internal ops in
 * the MCP_DOMAIN_INTERNAL domain included) back as a ModelProto, for
 * compiled models (.mcpir). Every value's known type is written (inputs,
 * outputs, value_info), so importing the result and inferring shapes gives
 * the graph the passes left, types included.
 *
 * The message is built from heap copies (mcp_malloc) and freed with
 * protobuf-c's free_unpacked through the same allocator, so every pointer
 * in it is owned by it.
 */
#include <string.h>

#include "graph/graph.h"
#include "onnx.pb-c.h"

static void *pb_malloc(void *unused, size_t n)
{
    (void)unused;
    return mcp_malloc(n);
}

static void pb_free(void *unused, void *p)
{
    (void)unused;
    mcp_free(p);
}

static ProtobufCAllocator pb_alloc = {pb_malloc, pb_free, NULL};

typedef struct export_ctx {
    mcp_export_place_fn place;
    void *user;
    mcp_err *err;
    bool oom;
    const char *bad; /* what could not be written, for the error */
} export_ctx;

static void *xcalloc(export_ctx *x, size_t n, size_t size)
{
    void *p = mcp_calloc(n ? n : 1, size);
    if (!p) x->oom = true;
    return p;
}

static char *xstrdup(export_ctx *x, const char *s)
{
    char *p = mcp_strdup(s ? s : "");
    if (!p) x->oom = true;
    return p;
}

static Onnx__TypeProto *type_to_proto(export_ctx *x, const mcp_type *t)
{
    Onnx__TypeProto *tp = xcalloc(x, 1, sizeof *tp);
    if (!tp) return NULL;
    onnx__type_proto__init(tp);
    if (t->kind == MCP_VALUE_NONE && !t->is_optional) return tp; /* unknown */
    Onnx__TypeProto__Tensor *tt = xcalloc(x, 1, sizeof *tt);
    if (!tt) return tp;
    onnx__type_proto__tensor__init(tt);
    if (t->dtype != MCP_DTYPE_UNDEFINED) {
        tt->has_elem_type = true;
        tt->elem_type = (int32_t)t->dtype;
    }
    if (t->rank >= 0) {
        tt->shape = xcalloc(x, 1, sizeof *tt->shape);
        if (tt->shape) {
            onnx__tensor_shape_proto__init(tt->shape);
            tt->shape->dim = xcalloc(x, (size_t)t->rank, sizeof *tt->shape->dim);
            for (int i = 0; tt->shape->dim && i < t->rank; i++) {
                Onnx__TensorShapeProto__Dimension *d = xcalloc(x, 1, sizeof *d);
                if (!d) break;
                onnx__tensor_shape_proto__dimension__init(d);
                if (t->dims[i] >= 0) {
                    d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                    d->dim_value = t->dims[i];
                } else if (t->dim_params[i]) {
                    d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                    d->dim_param = xstrdup(x, t->dim_params[i]);
                }
                tt->shape->dim[tt->shape->n_dim++] = d;
            }
        }
    }
    Onnx__TypeProto *inner = tp;
    if (t->kind == MCP_VALUE_SEQUENCE) {
        Onnx__TypeProto__Sequence *sq = xcalloc(x, 1, sizeof *sq);
        Onnx__TypeProto *elem = xcalloc(x, 1, sizeof *elem);
        if (!sq || !elem) {
            mcp_free(sq);
            mcp_free(elem);
            protobuf_c_message_free_unpacked(&tt->base, &pb_alloc);
            return tp;
        }
        onnx__type_proto__sequence__init(sq);
        onnx__type_proto__init(elem);
        elem->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        elem->tensor_type = tt;
        sq->elem_type = elem;
        if (!t->is_optional) {
            tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
            tp->sequence_type = sq;
            return tp;
        }
        inner = xcalloc(x, 1, sizeof *inner);
        if (!inner) {
            protobuf_c_message_free_unpacked(&sq->base, &pb_alloc);
            return tp;
        }
        onnx__type_proto__init(inner);
        inner->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        inner->sequence_type = sq;
    } else if (t->is_optional) {
        inner = xcalloc(x, 1, sizeof *inner);
        if (!inner) {
            protobuf_c_message_free_unpacked(&tt->base, &pb_alloc);
            return tp;
        }
        onnx__type_proto__init(inner);
        inner->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        inner->tensor_type = tt;
    } else {
        tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        tp->tensor_type = tt;
        return tp;
    }
    Onnx__TypeProto__Optional *op = xcalloc(x, 1, sizeof *op);
    if (!op) {
        onnx__type_proto__free_unpacked(inner, &pb_alloc);
        return tp;
    }
    onnx__type_proto__optional__init(op);
    op->elem_type = inner;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
    tp->optional_type = op;
    return tp;
}

static Onnx__ValueInfoProto *value_info(export_ctx *x, const mcp_graph_value *v)
{
    Onnx__ValueInfoProto *vi = xcalloc(x, 1, sizeof *vi);
    if (!vi) return NULL;
    onnx__value_info_proto__init(vi);
    vi->name = xstrdup(x, v->name);
    vi->type = type_to_proto(x, &v->type);
    return vi;
}

/* A tensor inline (raw_data, or string_data), or where `place` puts it. */
static Onnx__TensorProto *tensor_to_proto(export_ctx *x, const char *name, const mcp_tensor *t, int init_index)
{
    Onnx__TensorProto *tp = xcalloc(x, 1, sizeof *tp);
    if (!tp) return NULL;
    onnx__tensor_proto__init(tp);
    tp->name = xstrdup(x, name);
    tp->has_data_type = true;
    tp->data_type = (int32_t)t->dtype;
    tp->dims = xcalloc(x, (size_t)t->rank, sizeof *tp->dims);
    if (tp->dims) {
        memcpy(tp->dims, t->dims, sizeof *tp->dims * (size_t)t->rank);
        tp->n_dims = (size_t)t->rank;
    }
    mcp_export_place pl = {0};
    if (init_index >= 0 && x->place && t->dtype != MCP_DTYPE_STRING && x->place(x->user, init_index, t, &pl)) {
        char off[32], len[32];
        snprintf(off, sizeof off, "%llu", (unsigned long long)pl.offset);
        snprintf(len, sizeof len, "%llu", (unsigned long long)pl.length);
        const char *kv[3][2] = {{"location", pl.location}, {"offset", off}, {"length", len}};
        tp->has_data_location = true;
        tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        tp->external_data = xcalloc(x, 3, sizeof *tp->external_data);
        for (int i = 0; tp->external_data && i < 3; i++) {
            Onnx__StringStringEntryProto *e = xcalloc(x, 1, sizeof *e);
            if (!e) break;
            onnx__string_string_entry_proto__init(e);
            e->key = xstrdup(x, kv[i][0]);
            e->value = xstrdup(x, kv[i][1]);
            tp->external_data[tp->n_external_data++] = e;
        }
        return tp;
    }
    int64_t n = mcp_tensor_numel(t);
    if (t->dtype == MCP_DTYPE_STRING) {
        tp->string_data = xcalloc(x, (size_t)n, sizeof *tp->string_data);
        for (int64_t i = 0; tp->string_data && i < n; i++) {
            const char *s = ((char *const *)t->data)[i];
            size_t l = s ? strlen(s) : 0;
            tp->string_data[i].data = xcalloc(x, l + 1, 1);
            if (!tp->string_data[i].data) break;
            if (l) memcpy(tp->string_data[i].data, s, l);
            tp->string_data[i].len = l;
            tp->n_string_data = (size_t)i + 1;
        }
        return tp;
    }
    if (!t->data && n > 0) {
        x->bad = name;
        return tp;
    }
    size_t nb = mcp_tensor_nbytes(t);
    tp->has_raw_data = true;
    tp->raw_data.data = xcalloc(x, nb ? nb : 1, 1);
    if (tp->raw_data.data && nb) memcpy(tp->raw_data.data, t->data, nb);
    /* A packed type's unused high bits in the last byte are written as
     * zero, as ONNX pads them. */
    size_t used_bits = (size_t)n * (size_t)mcp_dtype_bits(t->dtype) % 8;
    if (tp->raw_data.data && nb && mcp_dtype_is_packed(t->dtype) && used_bits)
        tp->raw_data.data[nb - 1] &= (uint8_t)((1u << used_bits) - 1);
    tp->raw_data.len = tp->raw_data.data ? nb : 0;
    return tp;
}

static Onnx__GraphProto *graph_to_proto(export_ctx *x, const mcp_graph *g);

static Onnx__AttributeProto *attr_to_proto(export_ctx *x, const mcp_attr *a)
{
    Onnx__AttributeProto *ap = xcalloc(x, 1, sizeof *ap);
    if (!ap) return NULL;
    onnx__attribute_proto__init(ap);
    ap->name = xstrdup(x, a->name);
    ap->has_type = true;
    ap->type = (Onnx__AttributeProto__AttributeType)a->type;
    switch (a->type) {
    case MCP_ATTR_FLOAT:
        ap->has_f = true;
        ap->f = a->f;
        break;
    case MCP_ATTR_INT:
        ap->has_i = true;
        ap->i = a->i;
        break;
    case MCP_ATTR_STRING:
        ap->has_s = true;
        ap->s.data = xcalloc(x, a->s_len + 1, 1);
        if (ap->s.data && a->s_len) memcpy(ap->s.data, a->s, a->s_len);
        ap->s.len = ap->s.data ? a->s_len : 0;
        break;
    case MCP_ATTR_TENSOR: ap->t = tensor_to_proto(x, "", &a->t, -1); break;
    case MCP_ATTR_GRAPH: ap->g = graph_to_proto(x, a->g); break;
    case MCP_ATTR_FLOATS:
        ap->floats = xcalloc(x, (size_t)a->count, sizeof *ap->floats);
        if (ap->floats) {
            if (a->count) memcpy(ap->floats, a->floats, sizeof *ap->floats * (size_t)a->count);
            ap->n_floats = (size_t)a->count;
        }
        break;
    case MCP_ATTR_INTS:
        ap->ints = xcalloc(x, (size_t)a->count, sizeof *ap->ints);
        if (ap->ints) {
            if (a->count) memcpy(ap->ints, a->ints, sizeof *ap->ints * (size_t)a->count);
            ap->n_ints = (size_t)a->count;
        }
        break;
    case MCP_ATTR_STRINGS:
        ap->strings = xcalloc(x, (size_t)a->count, sizeof *ap->strings);
        for (int64_t i = 0; ap->strings && i < a->count; i++) {
            size_t l = strlen(a->strings[i]);
            ap->strings[i].data = xcalloc(x, l + 1, 1);
            if (!ap->strings[i].data) break;
            memcpy(ap->strings[i].data, a->strings[i], l);
            ap->strings[i].len = l;
            ap->n_strings = (size_t)i + 1;
        }
        break;
    case MCP_ATTR_TENSORS:
        ap->tensors = xcalloc(x, (size_t)a->count, sizeof *ap->tensors);
        for (int64_t i = 0; ap->tensors && i < a->count; i++) {
            if (!(ap->tensors[i] = tensor_to_proto(x, "", &a->tensors[i], -1))) break;
            ap->n_tensors = (size_t)i + 1;
        }
        break;
    case MCP_ATTR_GRAPHS:
        ap->graphs = xcalloc(x, (size_t)a->count, sizeof *ap->graphs);
        for (int64_t i = 0; ap->graphs && i < a->count; i++) {
            if (!(ap->graphs[i] = graph_to_proto(x, a->graphs[i]))) break;
            ap->n_graphs = (size_t)i + 1;
        }
        break;
    default:
        /* Sparse tensors and type protos are not kept by the importer's IR
         * in a form that can be written back. */
        x->bad = a->name;
        break;
    }
    return ap;
}

/* The name of value v in g as a node input or output ("" when omitted); NULL
 * when another value of g shadows the name (the export would not import as
 * the same graph). */
static const char *value_name(export_ctx *x, const mcp_graph *g, int v)
{
    if (v < 0) return "";
    const char *name = g->values[v].name;
    if (mcp_graph_find_value(g, name) != v) {
        x->bad = name;
        return NULL;
    }
    return name;
}

static Onnx__GraphProto *graph_to_proto(export_ctx *x, const mcp_graph *g)
{
    Onnx__GraphProto *gp = xcalloc(x, 1, sizeof *gp);
    if (!gp) return NULL;
    onnx__graph_proto__init(gp);
    gp->name = xstrdup(x, g->name);
    gp->node = xcalloc(x, (size_t)g->n_nodes, sizeof *gp->node);
    for (int i = 0; gp->node && i < g->n_nodes && !x->oom; i++) {
        const mcp_node *n = &g->nodes[i];
        Onnx__NodeProto *np = xcalloc(x, 1, sizeof *np);
        if (!np) break;
        onnx__node_proto__init(np);
        gp->node[gp->n_node++] = np;
        np->name = xstrdup(x, n->name);
        np->op_type = xstrdup(x, n->op_type);
        np->domain = xstrdup(x, n->domain);
        np->input = xcalloc(x, (size_t)n->n_inputs, sizeof *np->input);
        for (int j = 0; np->input && j < n->n_inputs; j++) {
            const char *nm = value_name(x, g, n->inputs[j]);
            if (!nm || !(np->input[j] = xstrdup(x, nm))) break;
            np->n_input = (size_t)j + 1;
        }
        np->output = xcalloc(x, (size_t)n->n_outputs, sizeof *np->output);
        for (int j = 0; np->output && j < n->n_outputs; j++) {
            const char *nm = value_name(x, g, n->outputs[j]);
            if (!nm || !(np->output[j] = xstrdup(x, nm))) break;
            np->n_output = (size_t)j + 1;
        }
        np->attribute = xcalloc(x, (size_t)n->n_attrs, sizeof *np->attribute);
        for (int a = 0; np->attribute && a < n->n_attrs; a++) {
            if (!(np->attribute[a] = attr_to_proto(x, &n->attrs[a]))) break;
            np->n_attribute = (size_t)a + 1;
        }
    }
    gp->initializer = xcalloc(x, (size_t)g->n_initializers, sizeof *gp->initializer);
    for (int k = 0; gp->initializer && k < g->n_initializers && !x->oom; k++) {
        const mcp_graph_value *v = &g->values[g->initializer_values[k]];
        Onnx__TensorProto *tp = tensor_to_proto(x, v->name, &g->initializers[k], g->parent ? -1 : k);
        if (!tp) break;
        gp->initializer[gp->n_initializer++] = tp;
    }
    gp->input = xcalloc(x, (size_t)g->n_inputs, sizeof *gp->input);
    for (int i = 0; gp->input && i < g->n_inputs && !x->oom; i++) {
        Onnx__ValueInfoProto *vi = value_info(x, &g->values[g->inputs[i]]);
        if (!vi) break;
        gp->input[gp->n_input++] = vi;
    }
    gp->output = xcalloc(x, (size_t)g->n_outputs, sizeof *gp->output);
    for (int i = 0; gp->output && i < g->n_outputs && !x->oom; i++) {
        Onnx__ValueInfoProto *vi = value_info(x, &g->values[g->outputs[i]]);
        if (!vi) break;
        gp->output[gp->n_output++] = vi;
    }
    /* Every other value's known type: the passes' ops get theirs from the
     * values they took over, which shape inference alone would not give
     * back. */
    gp->value_info = xcalloc(x, (size_t)g->n_values, sizeof *gp->value_info);
    for (int v = 0; gp->value_info && v < g->n_values && !x->oom; v++) {
        const mcp_graph_value *gv = &g->values[v];
        if (gv->outer >= 0 || gv->initializer >= 0 || gv->producer < 0) continue;
        if (gv->type.dtype == MCP_DTYPE_UNDEFINED && gv->type.rank < 0) continue;
        if (mcp_graph_find_value(g, gv->name) != v) continue;
        bool io = false;
        for (int o = 0; o < g->n_outputs; o++) io |= g->outputs[o] == v;
        if (io) continue;
        Onnx__ValueInfoProto *vi = value_info(x, gv);
        if (!vi) break;
        gp->value_info[gp->n_value_info++] = vi;
    }
    return gp;
}

mcp_status mcp_onnx_export(const mcp_graph *g, mcp_export_place_fn place, void *user, uint8_t **out, size_t *len,
                           mcp_err *err)
{
    *out = NULL;
    *len = 0;
    export_ctx x = {place, user, err, false, NULL};
    Onnx__ModelProto *mp = xcalloc(&x, 1, sizeof *mp);
    if (!mp) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    onnx__model_proto__init(mp);
    mp->has_ir_version = true;
    mp->ir_version = g->ir_version ? g->ir_version : 8;
    mp->producer_name = xstrdup(&x, "mcp2026 compile");
    /* The model's opsets, and the internal domain the passes' ops live in. */
    bool has_internal = false;
    mp->opset_import = xcalloc(&x, (size_t)g->n_opsets + 1, sizeof *mp->opset_import);
    for (int i = 0; mp->opset_import && i <= g->n_opsets; i++) {
        if (i == g->n_opsets && has_internal) break;
        const char *dom = i < g->n_opsets ? g->opsets[i].domain : MCP_DOMAIN_INTERNAL;
        has_internal |= strcmp(dom, MCP_DOMAIN_INTERNAL) == 0;
        Onnx__OperatorSetIdProto *op = xcalloc(&x, 1, sizeof *op);
        if (!op) break;
        onnx__operator_set_id_proto__init(op);
        op->domain = xstrdup(&x, dom);
        op->has_version = true;
        op->version = i < g->n_opsets ? g->opsets[i].version : 1;
        mp->opset_import[mp->n_opset_import++] = op;
    }
    /* Metadata keys (the IR keeps no values). */
    mp->metadata_props = xcalloc(&x, (size_t)g->n_metadata_keys, sizeof *mp->metadata_props);
    for (int i = 0; mp->metadata_props && i < g->n_metadata_keys; i++) {
        Onnx__StringStringEntryProto *e = xcalloc(&x, 1, sizeof *e);
        if (!e) break;
        onnx__string_string_entry_proto__init(e);
        e->key = xstrdup(&x, g->metadata_keys[i]);
        e->value = xstrdup(&x, "");
        mp->metadata_props[mp->n_metadata_props++] = e;
    }
    mp->graph = graph_to_proto(&x, g);
    mcp_status st = MCP_STATUS_OK;
    if (x.oom || !mp->graph) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    else if (x.bad) st = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "'%s' cannot be written back as ONNX (a sparse or type attribute, "
                                     "a name two values share, or data no longer held)", x.bad);
    if (st == MCP_STATUS_OK) {
        size_t n = onnx__model_proto__get_packed_size(mp);
        *out = mcp_malloc(n ? n : 1);
        if (!*out) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        else *len = onnx__model_proto__pack(mp, *out);
    }
    onnx__model_proto__free_unpacked(mp, &pb_alloc);
    return st;
}
