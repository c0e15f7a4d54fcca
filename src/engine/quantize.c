/*
 * Static QDQ quantization (quantize.h). Works on the protobuf of the model:
 * decode, add graph outputs for the activations to calibrate, run the
 * samples through a session of that copy, then insert the QuantizeLinear /
 * DequantizeLinear pairs and the quantized weights into the original graph
 * and encode it again. A session of the result then runs the samples once
 * more for the report.
 *
 * Everything added to the decoded message is allocated with the allocator
 * it was decoded with, so onnx__model_proto__free_unpacked frees it all.
 */
#include "engine/quantize.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "onnx.pb-c.h"

static void *q_malloc(void *unused, size_t n)
{
    (void)unused;
    return mcp_malloc(n ? n : 1);
}

static void q_free(void *unused, void *p)
{
    (void)unused;
    mcp_free(p);
}

static ProtobufCAllocator q_alloc = {q_malloc, q_free, NULL};

/* A quantized activation: its calibrated range and parameters. */
typedef struct q_act {
    char *name; /* owned */
    float lo, hi;
    float scale;
    uint8_t zp;
} q_act;

typedef struct q_ctx {
    Onnx__ModelProto *mp;
    mcp_err *err;
    bool oom;
    q_act *acts;
    int n_acts, cap_acts;
    /* Added to the graph: nodes (in order) and initializers. */
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    int n_weights;
    int opset;
} q_ctx;

static char *q_strdup(q_ctx *c, const char *s)
{
    char *d = mcp_strdup(s);
    if (!d) c->oom = true;
    return d;
}

/* "base" + "suffix" as a new string. */
static char *q_name(q_ctx *c, const char *base, const char *suffix)
{
    size_t a = strlen(base), b = strlen(suffix);
    char *d = mcp_malloc(a + b + 1);
    if (!d) {
        c->oom = true;
        return NULL;
    }
    memcpy(d, base, a);
    memcpy(d + a, suffix, b + 1);
    return d;
}

static const Onnx__TensorProto *find_init(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0) return g->initializer[i];
    return NULL;
}

static const Onnx__NodeProto *identity_producing(const Onnx__NodeProto *const *nodes, size_t n_nodes, const char *name)
{
    for (size_t i = 0; i < n_nodes; i++) {
        const Onnx__NodeProto *n = nodes[i];
        if (n && n->n_output == 1 && n->n_input == 1 && strcmp(n->output[0], name) == 0 && (!n->domain || !*n->domain) &&
            strcmp(n->op_type, "Identity") == 0)
            return n;
    }
    return NULL;
}

/* The initializer behind `name`: the initializer itself, or one reached
 * through Identity nodes (exporters alias shared weights that way), found
 * among the graph's nodes and those already moved to the new list. */
static const Onnx__TensorProto *weights_of(const q_ctx *c, const char *name)
{
    const Onnx__GraphProto *g = c->mp->graph;
    for (int depth = 0; name && depth < 8; depth++) {
        const Onnx__TensorProto *t = find_init(g, name);
        if (t) return t;
        const Onnx__NodeProto *n = identity_producing((const Onnx__NodeProto *const *)g->node, g->n_node, name);
        if (!n) n = identity_producing((const Onnx__NodeProto *const *)c->nodes, c->n_nodes, name);
        name = n ? n->input[0] : NULL;
    }
    return NULL;
}

static int find_act(const q_ctx *c, const char *name)
{
    for (int i = 0; i < c->n_acts; i++)
        if (strcmp(c->acts[i].name, name) == 0) return i;
    return -1;
}

static void want_act(q_ctx *c, const Onnx__GraphProto *g, const char *name)
{
    if (!name || !*name || find_init(g, name) || find_act(c, name) >= 0) return;
    if (c->n_acts == c->cap_acts) {
        int cap = c->cap_acts ? 2 * c->cap_acts : 64;
        q_act *a = mcp_realloc(c->acts, sizeof *a * (size_t)cap);
        if (!a) {
            c->oom = true;
            return;
        }
        c->acts = a;
        c->cap_acts = cap;
    }
    char *dup = q_strdup(c, name);
    if (dup) c->acts[c->n_acts++] = (q_act){.name = dup, .lo = INFINITY, .hi = -INFINITY};
}

/* The activations to quantize (quantize.h). */
static void choose_acts(q_ctx *c, const Onnx__GraphProto *g)
{
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (n->domain && *n->domain) continue;
        if ((strcmp(n->op_type, "Conv") == 0 || strcmp(n->op_type, "MatMul") == 0) && n->n_input >= 2) {
            want_act(c, g, n->input[0]);
        } else if (strcmp(n->op_type, "Add") == 0 && n->n_input == 2 && !find_init(g, n->input[0]) &&
                   !find_init(g, n->input[1])) {
            want_act(c, g, n->input[0]);
            want_act(c, g, n->input[1]);
        }
    }
}

/* The float32 values of an initializer (raw or float_data); NULL when it
 * is not a plain float32 tensor held in the model. */
static const float *init_floats(const Onnx__TensorProto *t, int64_t *count)
{
    if (!t->has_data_type || t->data_type != MCP_DTYPE_FLOAT) return NULL;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) return NULL;
    int64_t n = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0 || (t->dims[d] && n > INT64_MAX / t->dims[d])) return NULL;
        n *= t->dims[d];
    }
    *count = n;
    if (t->has_raw_data) return t->raw_data.len == (size_t)n * 4 ? (const float *)(const void *)t->raw_data.data : NULL;
    return t->n_float_data == (size_t)n ? t->float_data : NULL;
}

/* ---- building nodes and initializers ---- */

static void add_node(q_ctx *c, Onnx__NodeProto *n)
{
    if (!n) return;
    if (c->n_nodes == c->cap_nodes) {
        size_t cap = c->cap_nodes ? 2 * c->cap_nodes : 256;
        Onnx__NodeProto **a = mcp_realloc(c->nodes, sizeof *a * cap);
        if (!a) {
            c->oom = true;
            onnx__node_proto__free_unpacked(n, &q_alloc);
            return;
        }
        c->nodes = a;
        c->cap_nodes = cap;
    }
    c->nodes[c->n_nodes++] = n;
}

/* A new node op(ins) -> outs (NULL-terminated lists, at most 4 each);
 * `attr` (when not NULL) adds that int attribute with value attr_value. */
static Onnx__NodeProto *node_of(q_ctx *c, const char *op, const char *const *ins, const char *const *outs,
                                const char *attr, int64_t attr_value)
{
    size_t n_in = 0, n_out = 0;
    while (ins[n_in]) n_in++;
    while (outs[n_out]) n_out++;
    Onnx__NodeProto *n = mcp_malloc(sizeof *n);
    char **in = mcp_calloc(n_in + 1, sizeof *in), **out = mcp_calloc(n_out + 1, sizeof *out);
    if (!n || !in || !out) {
        mcp_free(n);
        mcp_free(in);
        mcp_free(out);
        c->oom = true;
        return NULL;
    }
    onnx__node_proto__init(n);
    n->input = in;
    n->n_input = n_in;
    n->output = out;
    n->n_output = n_out;
    for (size_t k = 0; k < n_in; k++) in[k] = q_strdup(c, ins[k]);
    for (size_t k = 0; k < n_out; k++) out[k] = q_strdup(c, outs[k]);
    n->op_type = q_strdup(c, op);
    if (attr) {
        Onnx__AttributeProto *a = mcp_malloc(sizeof *a);
        n->attribute = mcp_calloc(1, sizeof *n->attribute);
        if (!a || !n->attribute) {
            mcp_free(a);
            c->oom = true;
        } else {
            onnx__attribute_proto__init(a);
            a->name = q_strdup(c, attr);
            a->has_type = 1;
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
            a->has_i = 1;
            a->i = attr_value;
            n->attribute[0] = a;
            n->n_attribute = 1;
        }
    }
    return n;
}

/* op(in0, in1, in2) -> out, with `axis` when axis >= 0. */
static Onnx__NodeProto *new_node(q_ctx *c, const char *op, const char *in0, const char *in1, const char *in2,
                                 const char *out, int axis)
{
    const char *ins[] = {in0, in1, in2, NULL}, *outs[] = {out, NULL};
    return node_of(c, op, ins, outs, axis >= 0 ? "axis" : NULL, axis);
}

/* A new initializer `name` of type dtype, dims (rank 0 or 1: a scalar or
 * a vector of dims0), data copied. */
static void add_init(q_ctx *c, const char *name, mcp_dtype dtype, int rank, const int64_t *dims, const void *data,
                     size_t nbytes)
{
    Onnx__TensorProto *t = mcp_malloc(sizeof *t);
    int64_t *d = rank ? mcp_malloc(sizeof *d * (size_t)rank) : NULL;
    uint8_t *raw = mcp_malloc(nbytes ? nbytes : 1);
    char *nm = q_strdup(c, name);
    if (!t || (rank && !d) || !raw || !nm) {
        mcp_free(t);
        mcp_free(d);
        mcp_free(raw);
        mcp_free(nm);
        c->oom = true;
        return;
    }
    onnx__tensor_proto__init(t);
    t->name = nm;
    t->has_data_type = 1;
    t->data_type = dtype;
    for (int i = 0; i < rank; i++) d[i] = dims[i];
    t->dims = d;
    t->n_dims = (size_t)rank;
    memcpy(raw, data, nbytes);
    t->has_raw_data = 1;
    t->raw_data.data = raw;
    t->raw_data.len = nbytes;
    if (c->n_inits == c->cap_inits) {
        size_t cap = c->cap_inits ? 2 * c->cap_inits : 256;
        Onnx__TensorProto **a = mcp_realloc(c->inits, sizeof *a * cap);
        if (!a) {
            c->oom = true;
            onnx__tensor_proto__free_unpacked(t, &q_alloc);
            return;
        }
        c->inits = a;
        c->cap_inits = cap;
    }
    c->inits[c->n_inits++] = t;
}

/* Q -> DQ after activation a: a_q, then a_dq. */
static void add_qdq_pair(q_ctx *c, const q_act *a)
{
    char *s = q_name(c, a->name, "_scale"), *z = q_name(c, a->name, "_zero_point");
    char *q = q_name(c, a->name, "_quantized"), *dq = q_name(c, a->name, "_dequantized");
    if (s && z && q && dq) {
        add_init(c, s, MCP_DTYPE_FLOAT, 0, NULL, &a->scale, sizeof a->scale);
        add_init(c, z, MCP_DTYPE_UINT8, 0, NULL, &a->zp, 1);
        add_node(c, new_node(c, "QuantizeLinear", a->name, s, z, q, -1));
        add_node(c, new_node(c, "DequantizeLinear", q, s, z, dq, -1));
    }
    mcp_free(s);
    mcp_free(z);
    mcp_free(q);
    mcp_free(dq);
}

/* Weights w (float initializer, dims[0] = output channels for Conv) as
 * int8 with their DequantizeLinear: per channel along axis 0 when
 * `per_channel`, else per tensor. Writes the dequantized name to *wname
 * (replacing it) and the scales to ws (n_ws of them). */
static bool quantize_weights(q_ctx *c, const Onnx__TensorProto *w, bool per_channel, bool emit_dq, char **wname,
                             float *ws, int64_t *n_ws)
{
    int64_t n;
    const float *v = init_floats(w, &n);
    if (!v || w->n_dims < 1 || n == 0) return false;
    int64_t groups = per_channel ? w->dims[0] : 1, per = n / groups;
    int8_t *q = mcp_malloc((size_t)n);
    if (!q) {
        c->oom = true;
        return false;
    }
    for (int64_t g = 0; g < groups; g++) {
        float amax = 0.0f;
        for (int64_t i = 0; i < per; i++) amax = fmaxf(amax, fabsf(v[g * per + i]));
        float s = amax > 0.0f && isfinite(amax) ? amax / 127.0f : 1.0f;
        ws[g] = s;
        for (int64_t i = 0; i < per; i++) {
            float r = nearbyintf(v[g * per + i] / s);
            q[g * per + i] = (int8_t)(r < -127.0f ? -127.0f : r > 127.0f ? 127.0f : r);
        }
    }
    *n_ws = groups;
    int8_t *zeros = mcp_calloc((size_t)groups, 1);
    char *qn = q_name(c, w->name, "_quantized"), *sn = q_name(c, w->name, "_scale");
    char *zn = q_name(c, w->name, "_zero_point"), *dn = q_name(c, w->name, "_dequantized");
    bool ok = zeros && qn && sn && zn && dn;
    if (ok) {
        add_init(c, qn, MCP_DTYPE_INT8, (int)w->n_dims, w->dims, q, (size_t)n);
        add_init(c, sn, MCP_DTYPE_FLOAT, per_channel, &groups, ws, sizeof *ws * (size_t)groups);
        add_init(c, zn, MCP_DTYPE_INT8, per_channel, &groups, zeros, (size_t)groups);
        if (emit_dq) {
            add_node(c, new_node(c, "DequantizeLinear", qn, sn, zn, dn, per_channel ? 0 : -1));
            *wname = dn;
            dn = NULL;
        }
        c->n_weights++;
    } else {
        c->oom = true;
    }
    mcp_free(q);
    mcp_free(zeros);
    mcp_free(qn);
    mcp_free(sn);
    mcp_free(zn);
    mcp_free(dn);
    return ok;
}

/* A Conv's float bias as int32 in the scale x_scale * w_scale[c], with its
 * DequantizeLinear; *bname becomes the dequantized name. */
static bool quantize_bias(q_ctx *c, const Onnx__TensorProto *b, float xs, const float *ws, int64_t n_ws, char **bname)
{
    int64_t n;
    const float *v = init_floats(b, &n);
    if (!v || b->n_dims != 1 || (n_ws != 1 && n_ws != n)) return false;
    int32_t *q = mcp_malloc(sizeof *q * (size_t)n), *zeros = mcp_calloc((size_t)n, sizeof *zeros);
    float *s = mcp_malloc(sizeof *s * (size_t)n);
    char *qn = q_name(c, b->name, "_quantized"), *sn = q_name(c, b->name, "_scale");
    char *zn = q_name(c, b->name, "_zero_point"), *dn = q_name(c, b->name, "_dequantized");
    bool ok = q && zeros && s && qn && sn && zn && dn;
    for (int64_t i = 0; ok && i < n; i++) {
        s[i] = xs * ws[n_ws > 1 ? i : 0];
        double r = nearbyint((double)v[i] / (double)s[i]);
        ok = r >= INT32_MIN && r <= INT32_MAX;
        q[i] = ok ? (int32_t)r : 0;
    }
    if (ok) {
        add_init(c, qn, MCP_DTYPE_INT32, 1, &n, q, sizeof *q * (size_t)n);
        add_init(c, sn, MCP_DTYPE_FLOAT, 1, &n, s, sizeof *s * (size_t)n);
        add_init(c, zn, MCP_DTYPE_INT32, 1, &n, zeros, sizeof *zeros * (size_t)n);
        add_node(c, new_node(c, "DequantizeLinear", qn, sn, zn, dn, 0));
        *bname = dn;
        dn = NULL;
    } else if (q && zeros && s && qn && sn && zn && dn) {
        ok = false; /* a bias too large for int32 at this scale: left float */
    } else {
        c->oom = true;
    }
    mcp_free(q);
    mcp_free(zeros);
    mcp_free(s);
    mcp_free(qn);
    mcp_free(sn);
    mcp_free(zn);
    mcp_free(dn);
    return ok;
}

/* ---- calibration ---- */

/* Packs mp into a new buffer. */
static void *pack_model(const Onnx__ModelProto *mp, size_t *len, mcp_err *err)
{
    *len = onnx__model_proto__get_packed_size(mp);
    uint8_t *buf = mcp_malloc(*len ? *len : 1);
    if (!buf) {
        mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory encoding the model");
        return NULL;
    }
    onnx__model_proto__pack(mp, buf);
    return buf;
}

/* Runs every sample through session s; outputs[k][o] receives output o of
 * sample k (caller frees). */
static mcp_status run_samples(const mcp_session *s, int n_samples, mcp_value *const *const *samples,
                              mcp_value ***outputs, mcp_err *err)
{
    int n_out = mcp_session_output_count(s);
    mcp_status st = MCP_STATUS_OK;
    for (int k = 0; st == MCP_STATUS_OK && k < n_samples; k++) {
        outputs[k] = mcp_calloc((size_t)n_out + 1, sizeof **outputs);
        if (!outputs[k]) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        for (int o = 0; o < n_out && st == MCP_STATUS_OK; o++)
            if (!(outputs[k][o] = mcp_value_new())) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (st == MCP_STATUS_OK) st = mcp__session_run(s, samples[k], outputs[k], err);
        if (st != MCP_STATUS_OK) mcp_err_prefix(err, "calibration sample %d", k);
    }
    return st;
}

static void free_outputs(mcp_value ***outputs, int n_samples, int n_out)
{
    for (int k = 0; outputs && k < n_samples; k++) {
        for (int o = 0; outputs[k] && o < n_out; o++) mcp_value_free(outputs[k][o]);
        mcp_free(outputs[k]);
    }
    mcp_free(outputs);
}

/* Adds a graph output (name only, float tensor) for each activation, runs
 * the samples, records each activation's range, then takes the outputs off
 * again. fp32_out receives the model's own outputs per sample. */
static mcp_status calibrate(q_ctx *c, const char *base_dir, int threads, int n_samples,
                            mcp_value *const *const *samples, mcp_value ****fp32_out, int *n_model_out)
{
    Onnx__GraphProto *g = c->mp->graph;
    size_t n_orig = g->n_output;
    Onnx__ValueInfoProto **outs = mcp_calloc(n_orig + (size_t)c->n_acts + 1, sizeof *outs);
    Onnx__ValueInfoProto *extra = mcp_calloc((size_t)c->n_acts + 1, sizeof *extra);
    if (!outs || !extra) {
        mcp_free(outs);
        mcp_free(extra);
        return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < n_orig; i++) outs[i] = g->output[i];
    for (int i = 0; i < c->n_acts; i++) {
        onnx__value_info_proto__init(&extra[i]);
        extra[i].name = c->acts[i].name;
        outs[n_orig + (size_t)i] = &extra[i];
    }
    Onnx__ValueInfoProto **saved = g->output;
    g->output = outs;
    g->n_output = n_orig + (size_t)c->n_acts;
    size_t len;
    void *buf = pack_model(c->mp, &len, c->err);
    g->output = saved;
    g->n_output = n_orig;
    mcp_free(outs);
    mcp_free(extra);
    if (!buf) return MCP_STATUS_OUT_OF_MEMORY;

    char msg[1024] = "";
    mcp_session_options o = mcp_session_options_default();
    o.threads = threads;
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(buf, len, base_dir, &o, &s, msg, sizeof msg);
    mcp_free(buf);
    if (st != MCP_STATUS_OK) return mcp_err_set(c->err, st, "calibration model: %s", msg);
    if (mcp_session_input_count(s) < 1) {
        mcp_session_destroy(s);
        return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL, "the model has no inputs to calibrate with");
    }
    int n_out = mcp_session_output_count(s);
    mcp_value ***outputs = mcp_calloc((size_t)n_samples, sizeof *outputs);
    st = outputs ? run_samples(s, n_samples, samples, outputs, c->err)
                 : mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; st == MCP_STATUS_OK && k < n_samples; k++) {
        for (int i = 0; i < c->n_acts; i++) {
            const mcp_value *v = outputs[k][(int)n_orig + i];
            q_act *a = &c->acts[i];
            if (v->kind != MCP_VALUE_TENSOR || v->tensor.dtype != MCP_DTYPE_FLOAT) {
                a->lo = NAN; /* not a float tensor: not quantized */
                continue;
            }
            const float *d = v->tensor.data;
            for (int64_t e = 0, n = mcp_tensor_numel(&v->tensor); e < n; e++) {
                if (!isfinite(d[e])) continue;
                a->lo = fminf(a->lo, d[e]);
                a->hi = fmaxf(a->hi, d[e]);
            }
        }
    }
    /* Keep the model's own outputs for the report. */
    for (int k = 0; outputs && k < n_samples; k++)
        for (int i = (int)n_orig; outputs[k] && i < n_out; i++) {
            mcp_value_free(outputs[k][i]);
            outputs[k][i] = NULL;
        }
    mcp_session_destroy(s);
    if (st != MCP_STATUS_OK) {
        free_outputs(outputs, n_samples, (int)n_orig);
        return st;
    }
    *fp32_out = outputs;
    *n_model_out = (int)n_orig;
    for (int i = 0; i < c->n_acts; i++) {
        q_act *a = &c->acts[i];
        if (isnan(a->lo) || a->lo > a->hi) continue;
        float lo = fminf(a->lo, 0.0f), hi = fmaxf(a->hi, 0.0f);
        a->scale = hi > lo ? (hi - lo) / 255.0f : 1.0f;
        float z = nearbyintf(-lo / a->scale);
        a->zp = (uint8_t)(z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z);
    }
    return MCP_STATUS_OK;
}

/* ---- the rewrite ---- */

static bool act_ok(const q_act *a) { return a && !isnan(a->lo) && a->lo <= a->hi; }

static void rewrite(q_ctx *c)
{
    Onnx__GraphProto *g = c->mp->graph;
    /* Graph inputs quantized first. */
    for (size_t i = 0; i < g->n_input; i++) {
        int a = find_act(c, g->input[i]->name);
        if (a >= 0 && act_ok(&c->acts[a])) add_qdq_pair(c, &c->acts[a]);
    }
    for (size_t i = 0; i < g->n_node && !c->oom; i++) {
        Onnx__NodeProto *n = g->node[i];
        bool plain = !n->domain || !*n->domain;
        bool conv = plain && strcmp(n->op_type, "Conv") == 0, mm = plain && strcmp(n->op_type, "MatMul") == 0;
        bool add = plain && strcmp(n->op_type, "Add") == 0;
        /* The activation inputs read their DequantizeLinear: Conv's and
         * MatMul's first, both of an Add of two activations. */
        size_t n_act_in = conv || mm ? 1 : add ? 2 : 0;
        int x_act = -1; /* the quantized activation input 0 reads */
        for (size_t k = 0; k < n->n_input && k < n_act_in; k++) {
            int a = find_act(c, n->input[k]);
            if (a < 0 || !act_ok(&c->acts[a])) continue;
            char *dq = q_name(c, n->input[k], "_dequantized");
            if (!dq) break;
            q_free(NULL, n->input[k]);
            n->input[k] = dq;
            if (k == 0) x_act = a;
        }
        /* Weights: the activation input must be quantized for the
         * quantized op to form. */
        const Onnx__TensorProto *w = x_act >= 0 && (conv || mm) && n->n_input >= 2 ? weights_of(c, n->input[1]) : NULL;
        if (w && ((conv && w->n_dims >= 3) || (mm && w->n_dims == 2))) {
            int64_t m = w->dims[0];
            float *ws = mcp_malloc(sizeof *ws * (size_t)(m > 0 ? m : 1));
            int64_t n_ws = 0;
            char *wname = NULL;
            bool per_channel = conv && c->opset >= 13;
            if (ws && quantize_weights(c, w, per_channel, true, &wname, ws, &n_ws)) {
                q_free(NULL, n->input[1]);
                n->input[1] = wname;
                const Onnx__TensorProto *b = conv && n->n_input > 2 ? find_init(g, n->input[2]) : NULL;
                char *bname = NULL;
                if (b && quantize_bias(c, b, c->acts[x_act].scale, ws, n_ws, &bname)) {
                    q_free(NULL, n->input[2]);
                    n->input[2] = bname;
                }
            } else if (!ws) {
                c->oom = true;
            }
            mcp_free(ws);
        }
        add_node(c, n);
        g->node[i] = NULL;
        for (size_t k = 0; k < n->n_output; k++) {
            int a = find_act(c, n->output[k]);
            if (a >= 0 && act_ok(&c->acts[a])) add_qdq_pair(c, &c->acts[a]);
        }
    }
}

/* Whether an initializer named `name` was added already. */
static bool added_init(const q_ctx *c, const char *name)
{
    for (size_t i = 0; i < c->n_inits; i++)
        if (strcmp(c->inits[i]->name, name) == 0) return true;
    return false;
}

/* A Gemm that is A x B [+ C]: alpha 1, beta 1, A not transposed; *trans_b
 * says whether B is. */
static bool plain_gemm(const Onnx__NodeProto *n, bool *trans_b)
{
    *trans_b = false;
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (strcmp(a->name, "transB") == 0) *trans_b = a->i != 0;
        else if (strcmp(a->name, "transA") == 0 && a->i != 0) return false;
        else if ((strcmp(a->name, "alpha") == 0 || strcmp(a->name, "beta") == 0) && a->f != 1.0f) return false;
        else if (strcmp(a->name, "transA") != 0 && strcmp(a->name, "alpha") != 0 && strcmp(a->name, "beta") != 0)
            return false;
    }
    return n->n_input >= 2 && n->n_input <= 3;
}

/* w [N, K] transposed into a new float tensor named name + "_transposed"
 * (raw data owned by the caller through *buf). */
static bool transposed(q_ctx *c, const Onnx__TensorProto *w, Onnx__TensorProto *t, int64_t *dims, float **buf)
{
    int64_t n;
    const float *v = init_floats(w, &n);
    if (!v || w->n_dims != 2) return false;
    int64_t rows = w->dims[0], cols = w->dims[1];
    *buf = mcp_malloc(sizeof **buf * (size_t)(n ? n : 1));
    if (!*buf) {
        c->oom = true;
        return false;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < cols; k++) (*buf)[k * rows + r] = v[r * cols + k];
    onnx__tensor_proto__init(t);
    t->name = q_name(c, w->name, "_transposed");
    t->has_data_type = 1;
    t->data_type = MCP_DTYPE_FLOAT;
    dims[0] = cols, dims[1] = rows;
    t->dims = dims;
    t->n_dims = 2;
    t->has_raw_data = 1;
    t->raw_data.data = (uint8_t *)*buf;
    t->raw_data.len = sizeof **buf * (size_t)n;
    return t->name != NULL;
}

/*
 * Dynamic quantization (quantize.h): MatMul(A, B) with B a 2-D float
 * initializer, and Gemm(A, B[, C]) with B one too (transposed into [K, N]
 * when transB; C added after), becomes DynamicQuantizeLinear(A) -> MatMulInteger(A_q, B_q,
 * A_zp, B_zp) -> Cast to float -> Mul by A_scale * B_scale, writing the
 * MatMul's output. One DynamicQuantizeLinear per A however many MatMuls
 * read it (a transformer's Q, K and V projections).
 */
static void rewrite_dynamic(q_ctx *c)
{
    Onnx__GraphProto *g = c->mp->graph;
    for (size_t i = 0; i < g->n_node && !c->oom; i++) {
        Onnx__NodeProto *n = g->node[i];
        const Onnx__TensorProto *w = NULL;
        int64_t count;
        bool plain = !n->domain || !*n->domain, gemm = false, trans_b = false;
        if (plain && strcmp(n->op_type, "MatMul") == 0 && n->n_input == 2 && n->n_output == 1)
            w = weights_of(c, n->input[1]);
        else if (plain && strcmp(n->op_type, "Gemm") == 0 && n->n_output == 1 && plain_gemm(n, &trans_b))
            w = weights_of(c, n->input[1]), gemm = true;
        Onnx__TensorProto wt;
        int64_t wt_dims[2];
        float *wt_buf = NULL;
        if (w && trans_b) w = transposed(c, w, &wt, wt_dims, &wt_buf) ? &wt : NULL;
        if (!w || w->n_dims != 2 || !init_floats(w, &count)) {
            mcp_free(wt_buf);
            add_node(c, n);
            g->node[i] = NULL;
            continue;
        }
        const char *a = n->input[0], *y = n->output[0];
        /* A Gemm's C is added after the scaled product. */
        const char *bias = gemm && n->n_input > 2 && n->input[2][0] ? n->input[2] : NULL;
        char *aq = q_name(c, a, "_quantized"), *as = q_name(c, a, "_scale"), *az = q_name(c, a, "_zero_point");
        char *bq = q_name(c, w->name, "_quantized"), *bs = q_name(c, w->name, "_scale");
        char *bz = q_name(c, w->name, "_zero_point"), *yi = q_name(c, y, "_int32"), *yf = q_name(c, y, "_float");
        char *ys = q_name(c, y, "_scale");
        bool ok = aq && as && az && bq && bs && bz && yi && yf && ys;
        if (ok && find_act(c, a) < 0) {
            want_act(c, g, a); /* remembers that A has its DynamicQuantizeLinear */
            const char *ins[] = {a, NULL}, *outs[] = {aq, as, az, NULL};
            add_node(c, node_of(c, "DynamicQuantizeLinear", ins, outs, NULL, 0));
        }
        if (ok && !added_init(c, bq)) {
            float scale;
            int64_t n_ws;
            char *unused = NULL;
            ok = quantize_weights(c, w, false, false, &unused, &scale, &n_ws);
        }
        if (ok) {
            const char *mm_in[] = {aq, bq, az, bz, NULL}, *mm_out[] = {yi, NULL};
            add_node(c, node_of(c, "MatMulInteger", mm_in, mm_out, NULL, 0));
            const char *cast_in[] = {yi, NULL}, *cast_out[] = {yf, NULL};
            add_node(c, node_of(c, "Cast", cast_in, cast_out, "to", MCP_DTYPE_FLOAT));
            const char *sc_in[] = {as, bs, NULL}, *sc_out[] = {ys, NULL};
            add_node(c, node_of(c, "Mul", sc_in, sc_out, NULL, 0));
            char *yb = bias ? q_name(c, y, "_scaled") : NULL;
            const char *mul_in[] = {yf, ys, NULL}, *mul_out[] = {bias ? yb : y, NULL};
            if (!bias || yb) add_node(c, node_of(c, "Mul", mul_in, mul_out, NULL, 0));
            if (bias && yb) {
                const char *add_in[] = {yb, bias, NULL}, *add_out[] = {y, NULL};
                add_node(c, node_of(c, "Add", add_in, add_out, NULL, 0));
            }
            mcp_free(yb);
            onnx__node_proto__free_unpacked(n, &q_alloc);
        } else {
            add_node(c, n);
        }
        g->node[i] = NULL;
        if (wt_buf) {
            mcp_free(wt.name);
            mcp_free(wt_buf);
        }
        mcp_free(aq), mcp_free(as), mcp_free(az), mcp_free(bq), mcp_free(bs), mcp_free(bz);
        mcp_free(yi), mcp_free(yf), mcp_free(ys);
    }
}

/* Installs the new node list and initializers; drops float initializers
 * no node reads any more. */
static void install(q_ctx *c)
{
    Onnx__GraphProto *g = c->mp->graph;
    /* Nodes not moved yet (after a failure) go to the new list too. */
    for (size_t i = 0; i < g->n_node; i++)
        if (g->node[i]) add_node(c, g->node[i]), g->node[i] = NULL;
    q_free(NULL, g->node);
    g->node = c->nodes;
    g->n_node = c->n_nodes;
    c->nodes = NULL;
    c->n_nodes = c->cap_nodes = 0;
    size_t keep = 0;
    Onnx__TensorProto **all = mcp_calloc(g->n_initializer + c->n_inits + 1, sizeof *all);
    if (!all) {
        c->oom = true;
        return;
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        bool read = false;
        for (size_t k = 0; !read && k < g->n_node; k++)
            for (size_t j = 0; !read && j < g->node[k]->n_input; j++) read = strcmp(g->node[k]->input[j], t->name) == 0;
        for (size_t k = 0; !read && k < g->n_input; k++) read = strcmp(g->input[k]->name, t->name) == 0;
        for (size_t k = 0; !read && k < g->n_output; k++) read = strcmp(g->output[k]->name, t->name) == 0;
        if (read) all[keep++] = t;
        else onnx__tensor_proto__free_unpacked(t, &q_alloc);
    }
    for (size_t i = 0; i < c->n_inits; i++) all[keep++] = c->inits[i];
    q_free(NULL, g->initializer);
    g->initializer = all;
    g->n_initializer = keep;
    mcp_free(c->inits);
    c->inits = NULL;
    c->n_inits = c->cap_inits = 0;
}

/* ---- the report ---- */

static void report(mcp_quant_result *r, const mcp_session *q, mcp_value ***fp32, mcp_value ***int8, int n_samples,
                   int n_out)
{
    r->n_outputs = r->n_float_outputs = 0;
    for (int o = 0; o < n_out; o++) {
        const mcp_value *v0 = fp32[0][o];
        if (v0->kind != MCP_VALUE_TENSOR || v0->tensor.dtype != MCP_DTYPE_FLOAT) continue;
        if (r->n_float_outputs++ >= MCP_QUANT_MAX_OUTPUTS) continue;
        mcp_quant_output_report *p = &r->outputs[r->n_outputs++];
        memset(p, 0, sizeof *p);
        mcp_io_info info;
        if (mcp_session_output_info(q, o, &info) == MCP_STATUS_OK) snprintf(p->name, sizeof p->name, "%s", info.name);
        double sum = 0.0, sum2 = 0.0, sum_abs = 0.0;
        long count = 0;
        for (int k = 0; k < n_samples; k++) {
            const mcp_tensor *a = &fp32[k][o]->tensor, *b = &int8[k][o]->tensor;
            if (int8[k][o]->kind != MCP_VALUE_TENSOR || b->dtype != MCP_DTYPE_FLOAT ||
                mcp_tensor_numel(a) != mcp_tensor_numel(b))
                continue;
            const float *x = a->data, *y = b->data;
            int64_t n = mcp_tensor_numel(a);
            for (int64_t e = 0; e < n; e++) {
                double d = fabs((double)y[e] - x[e]);
                if (d > p->max_abs) p->max_abs = d;
                sum_abs += d;
                sum += x[e];
                sum2 += (double)x[e] * x[e];
                count++;
            }
            if (a->rank == 2 && a->dims[1] > 1) {
                for (int64_t row = 0; row < a->dims[0]; row++) {
                    int64_t ia = 0, ib = 0, w = a->dims[1];
                    for (int64_t j = 1; j < w; j++) {
                        if (x[row * w + j] > x[row * w + ia]) ia = j;
                        if (y[row * w + j] > y[row * w + ib]) ib = j;
                    }
                    p->rows++;
                    p->rows_same += ia == ib;
                }
            }
        }
        if (count) {
            p->mean_abs = sum_abs / (double)count;
            double mean = sum / (double)count;
            p->fp32_std = sqrt(fmax(0.0, sum2 / (double)count - mean * mean));
        }
    }
}

mcp_status mcp_quantize(const void *buf, size_t len, const char *base_dir, const mcp_quantize_options *opts,
                        int n_samples, mcp_value *const *const *samples, mcp_quant_result *out, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    bool dynamic = opts && opts->dynamic;
    int threads = opts ? opts->threads : 0;
    if (n_samples < (dynamic ? 0 : 1))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "static quantization needs at least one calibration sample");
    q_ctx c = {0};
    c.err = err;
    c.mp = onnx__model_proto__unpack(&q_alloc, len, buf);
    if (!c.mp || !c.mp->graph) {
        if (c.mp) onnx__model_proto__free_unpacked(c.mp, &q_alloc);
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "not an ONNX model (protobuf decoding failed)");
    }
    for (size_t i = 0; i < c.mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = c.mp->opset_import[i];
        if ((!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) && o->has_version) c.opset = (int)o->version;
    }
    mcp_status st = MCP_STATUS_OK;
    int need = dynamic ? 11 : 10;
    if (c.opset < need)
        st = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "opset %d: %s quantization needs opset %d or later", c.opset,
                         dynamic ? "dynamic" : "static", need);
    if (!dynamic) choose_acts(&c, c.mp->graph);
    if (st == MCP_STATUS_OK && c.oom) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_value ***fp32 = NULL, ***int8 = NULL;
    int n_out = 0;
    bool report_on = !(opts && opts->no_report);
    /* Dynamic quantization calibrates nothing: a run of the samples only
     * serves the report. */
    if (st == MCP_STATUS_OK && n_samples > 0 && (!dynamic || report_on))
        st = calibrate(&c, base_dir, threads, n_samples, samples, &fp32, &n_out);
    if (st == MCP_STATUS_OK) {
        if (dynamic) rewrite_dynamic(&c);
        else rewrite(&c);
        install(&c);
        if (c.oom) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory building the quantized model");
    }
    for (int i = 0; i < c.n_acts; i++) out->n_activations += dynamic || act_ok(&c.acts[i]);
    out->n_weights = c.n_weights;
    if (st == MCP_STATUS_OK) {
        out->model = pack_model(c.mp, &out->len, err);
        if (!out->model) st = MCP_STATUS_OUT_OF_MEMORY;
    }
    if (st == MCP_STATUS_OK && report_on) {
        /* The result must load; with samples it also runs them for the report. */
        char msg[1024] = "";
        mcp_session_options o = mcp_session_options_default();
        o.threads = threads;
        mcp_session *q = NULL;
        st = mcp_session_create_from_memory(out->model, out->len, base_dir, &o, &q, msg, sizeof msg);
        if (st != MCP_STATUS_OK) st = mcp_err_set(err, st, "the quantized model does not load: %s", msg);
        int8 = st == MCP_STATUS_OK ? mcp_calloc((size_t)n_samples + 1, sizeof *int8) : NULL;
        if (st == MCP_STATUS_OK && !int8) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (st == MCP_STATUS_OK && n_samples > 0) st = run_samples(q, n_samples, samples, int8, err);
        if (st == MCP_STATUS_OK && n_samples > 0) report(out, q, fp32, int8, n_samples, n_out);
        mcp_session_destroy(q);
    }
    free_outputs(fp32, n_samples, n_out);
    free_outputs(int8, n_samples, n_out);
    for (size_t i = 0; i < c.n_nodes; i++) onnx__node_proto__free_unpacked(c.nodes[i], &q_alloc);
    mcp_free(c.nodes);
    for (size_t i = 0; i < c.n_inits; i++) onnx__tensor_proto__free_unpacked(c.inits[i], &q_alloc);
    mcp_free(c.inits);
    for (int i = 0; i < c.n_acts; i++) mcp_free(c.acts[i].name);
    mcp_free(c.acts);
    onnx__model_proto__free_unpacked(c.mp, &q_alloc);
    if (st != MCP_STATUS_OK) mcp_quant_result_release(out);
    return st;
}

void mcp_quant_result_release(mcp_quant_result *r)
{
    mcp_free(r->model);
    r->model = NULL;
    r->len = 0;
}

/* ---- calibration folders ---- */

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The entries of dir, sorted: regular *.npy files when `npy`, else
 * subfolders; at most `max`. NULL when dir cannot be read. */
static char **list_dir(const char *dir, bool npy, int max, int *count)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = mcp_calloc((size_t)max + 1, sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d)) && *count < max) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path) continue;
        struct stat st;
        if (lstat(path, &st) != 0) continue; /* links are not followed out of the folder */
        size_t n = strlen(e->d_name);
        bool want = npy ? S_ISREG(st.st_mode) && n > 4 && strcmp(e->d_name + n - 4, ".npy") == 0 : S_ISDIR(st.st_mode);
        if (want && !(names[(*count)++] = mcp_strdup(e->d_name))) break;
    }
    closedir(d);
    if (names) qsort(names, (size_t)*count, sizeof *names, by_name);
    return names;
}

void mcp_quant_samples_free(mcp_quant_samples *q)
{
    for (int k = 0; q->values && k < q->n; k++) {
        for (int i = 0; q->values[k] && i < q->n_inputs; i++) mcp_value_free(q->values[k][i]);
        mcp_free(q->values[k]);
    }
    mcp_free(q->values);
    memset(q, 0, sizeof *q);
}

mcp_status mcp_quant_samples_load(const char *dir, int n_inputs, const char *const *names, int max_samples,
                                  size_t max_bytes, mcp_quant_samples *out, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    if (n_inputs < 1) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the model has no inputs to calibrate with");
    int n = 0;
    /* One entry past the limit tells a folder over it from one at it. */
    char **entries = list_dir(dir, n_inputs == 1, max_samples + 1, &n);
    if (!entries) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: cannot read the calibration folder", dir);
    mcp_status st = MCP_STATUS_OK;
    if (n > max_samples)
        st = mcp_err_set(err, MCP_STATUS_RESOURCE_EXHAUSTED, "%s: more than %d calibration samples; use fewer", dir,
                         max_samples);
    else if (n == 0)
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, n_inputs == 1 ? "%s: no .npy samples in the calibration folder"
                                                                         : "%s: no sample subfolders in the calibration folder",
                         dir);
    out->values = st == MCP_STATUS_OK ? mcp_calloc((size_t)n, sizeof *out->values) : NULL;
    if (st == MCP_STATUS_OK && !out->values) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    out->n_inputs = n_inputs;
    size_t total = 0;
    for (int k = 0; st == MCP_STATUS_OK && k < n; k++) {
        out->values[k] = mcp_calloc((size_t)n_inputs, sizeof **out->values);
        if (!out->values[k]) {
            st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            break;
        }
        out->n = k + 1;
        for (int i = 0; st == MCP_STATUS_OK && i < n_inputs; i++) {
            char path[4096];
            if (n_inputs == 1) snprintf(path, sizeof path, "%s/%s", dir, entries[k]);
            else snprintf(path, sizeof path, "%s/%s/%s.npy", dir, entries[k], names[i]);
            mcp_value *v = mcp_value_new();
            if (!v) {
                st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
                break;
            }
            v->kind = MCP_VALUE_TENSOR;
            out->values[k][i] = v;
            st = mcp_npy_read(path, &v->tensor, err);
            if (st != MCP_STATUS_OK) {
                mcp_err_prefix(err, "%s", path);
                break;
            }
            total += mcp_tensor_nbytes(&v->tensor);
            if (max_bytes && total > max_bytes)
                st = mcp_err_set(err, MCP_STATUS_RESOURCE_EXHAUSTED,
                                 "%s: the calibration samples exceed %zu bytes; use fewer or smaller ones", dir, max_bytes);
        }
    }
    for (int k = 0; k < n; k++) mcp_free(entries[k]);
    mcp_free(entries);
    if (st != MCP_STATUS_OK) mcp_quant_samples_free(out);
    return st;
}

mcp_status mcp_quantize_model_inputs(const void *buf, size_t len, int max, char **names, int *n, mcp_err *err)
{
    *n = 0;
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&q_alloc, len, buf);
    if (!mp || !mp->graph) {
        if (mp) onnx__model_proto__free_unpacked(mp, &q_alloc);
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "not an ONNX model (protobuf decoding failed)");
    }
    mcp_status st = MCP_STATUS_OK;
    for (size_t i = 0; st == MCP_STATUS_OK && i < mp->graph->n_input; i++) {
        const char *name = mp->graph->input[i]->name;
        if (!name || find_init(mp->graph, name)) continue;
        if (*n == max) st = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "the model has more than %d inputs", max);
        else if (!(names[*n] = mcp_strdup(name))) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        else (*n)++;
    }
    onnx__model_proto__free_unpacked(mp, &q_alloc);
    if (st != MCP_STATUS_OK) {
        for (int i = 0; i < *n; i++) mcp_free(names[i]);
        *n = 0;
    }
    return st;
}
