/*
 * Backend-independent graph passes (mcp_graph_optimize): Identity and
 * inference Dropout elimination, BatchNormalization folded into Conv,
 * MatMul + bias Add rewritten as Gemm, the fusions into the internal ops of
 * graph.h (FusedConv, FusedGemm, FusedMatMul, Gelu, LayerNormalization,
 * Attention),
 * dead-node removal and unused initializer removal. mcp_graph_optimize runs
 * them in that order, except that Gelu and LayerNormalization come before
 * the other fusions, which take a Gelu as their activation.
 *
 * Every pass is conservative: it rewrites only patterns whose result is the
 * same on every input, and leaves a node alone whenever a value it would
 * touch is a graph output or is captured by a subgraph. Only the top graph
 * is rewritten; subgraphs are left as imported (their captures are honoured
 * as uses of the outer values).
 *
 * Removed nodes are marked during the passes and the node array is
 * compacted once at the end; value indices never change (values of removed
 * nodes stay in g->values with producer -1), so indices held by subgraph
 * captures stay valid. The passes keep `producer` exact for live nodes (the
 * fusions follow it upstream); it is recomputed after compaction.
 *
 * A fusion applies only when every value inside the pattern is float32, is
 * read only by nodes of the pattern (never by another node, a subgraph or as
 * a graph output), and the attributes and constants are ones the fused op
 * expresses exactly. The fused node takes the slot of the
 * pattern's last node: every input it reads is computed by then (the Sum of
 * a FusedConv may be computed after the Conv, as in ResNet's shortcut).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"

typedef struct pass_ctx {
    mcp_graph *g;
    mcp_err *err;
    bool *removed;   /* per node */
    int *uses;       /* per value: node inputs + subgraph captures + graph outputs */
    bool *is_output; /* per value: a graph output */
    bool *captured;  /* per value: captured by some node's subgraph */
    int cap_values;  /* size of the per-value arrays */
} pass_ctx;

/* ---- small helpers ---- */

static bool is_op(const mcp_node *n, const char *op)
{
    return n->domain[0] == '\0' && strcmp(n->op_type, op) == 0;
}

/* Adds delta to the use count of every outer value captured by one of node
 * n's subgraphs (direct children only: deeper captures go through them). */
static void node_captures(pass_ctx *c, const mcp_node *n, int delta)
{
    for (int a = 0; a < n->n_attrs; a++) {
        const mcp_attr *at = &n->attrs[a];
        int64_t count = at->graphs ? at->count : 0;
        for (int64_t k = -1; k < count; k++) {
            const mcp_graph *sub = k < 0 ? at->g : at->graphs[k];
            if (!sub) continue;
            for (int v = 0; v < sub->n_values; v++) {
                int o = sub->values[v].outer;
                if (o < 0 || o >= c->g->n_values) continue;
                c->uses[o] += delta;
                if (delta > 0) c->captured[o] = true;
            }
        }
    }
}

/* Recounts uses, graph outputs and captures from scratch over live nodes. */
static mcp_status count_uses(pass_ctx *c)
{
    mcp_graph *g = c->g;
    if (g->n_values > c->cap_values) {
        int cap = g->n_values;
        int *u = mcp_realloc(c->uses, (size_t)cap * sizeof *u);
        if (u) c->uses = u;
        bool *o = mcp_realloc(c->is_output, (size_t)cap * sizeof *o);
        if (o) c->is_output = o;
        bool *cp = mcp_realloc(c->captured, (size_t)cap * sizeof *cp);
        if (cp) c->captured = cp;
        if (!u || !o || !cp) return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        c->cap_values = cap;
    }
    size_t nv = (size_t)g->n_values;
    if (nv) {
        memset(c->uses, 0, nv * sizeof *c->uses);
        memset(c->is_output, 0, nv * sizeof *c->is_output);
        memset(c->captured, 0, nv * sizeof *c->captured);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && n->inputs[k] < g->n_values) c->uses[n->inputs[k]]++;
        node_captures(c, n, 1);
    }
    for (int i = 0; i < g->n_outputs; i++) {
        int v = g->outputs[i];
        if (v < 0 || v >= g->n_values) continue;
        c->uses[v]++;
        c->is_output[v] = true;
    }
    return MCP_STATUS_OK;
}

/* True when v is read only by node inputs (no graph output, no capture)
 * and exactly `n` times. */
static bool only_node_uses(const pass_ctx *c, int v, int n)
{
    return v >= 0 && v < c->g->n_values && !c->is_output[v] && !c->captured[v] && c->uses[v] == n;
}

/* The live node reading value v (the first one), or -1. */
static int consumer_of(const pass_ctx *c, int v, int after)
{
    const mcp_graph *g = c->g;
    for (int i = after + 1; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == v) return i;
    }
    return -1;
}

static const mcp_tensor *init_of(const mcp_graph *g, int v)
{
    if (v < 0 || v >= g->n_values) return NULL;
    int i = g->values[v].initializer;
    return i >= 0 && i < g->n_initializers ? &g->initializers[i] : NULL;
}

static int node_input(const mcp_node *n, int k)
{
    return k < n->n_inputs ? n->inputs[k] : -1;
}

/* True when all outputs of n but the first are omitted or unread. */
static bool extra_outputs_unused(const pass_ctx *c, const mcp_node *n)
{
    for (int k = 1; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (v >= 0 && c->uses[v] != 0) return false;
    }
    return true;
}

static void node_release(mcp_node *n)
{
    mcp_free(n->name);
    mcp_free(n->op_type);
    mcp_free(n->domain);
    mcp_free(n->inputs);
    mcp_free(n->outputs);
    for (int i = 0; i < n->n_attrs; i++) mcp_attr_release(&n->attrs[i]);
    mcp_free(n->attrs);
    memset(n, 0, sizeof *n);
}

/* Marks node i removed and drops its uses of its inputs and captures. */
static void remove_node(pass_ctx *c, int i)
{
    const mcp_node *n = &c->g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0) c->uses[n->inputs[k]]--;
    node_captures(c, n, -1);
    c->removed[i] = true;
}

/* Makes every live node that reads `from` read `to` instead. */
static void replace_uses(pass_ctx *c, int from, int to)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        mcp_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == from) {
                n->inputs[k] = to;
                c->uses[from]--;
                c->uses[to]++;
            }
    }
}

/* Adds a new initializer value named after `base` (made unique), taking
 * ownership of *t. Returns its value index, or -1 on allocation failure
 * (then *t is released). */
static int add_initializer(pass_ctx *c, const char *base, mcp_tensor *t)
{
    mcp_graph *g = c->g;
    char name[256];
    snprintf(name, sizeof name, "%s", base);
    for (int k = 1; mcp_graph_find_value(g, name) >= 0; k++) snprintf(name, sizeof name, "%s_%d", base, k);

    mcp_tensor *inits = mcp_realloc(g->initializers, ((size_t)g->n_initializers + 1) * sizeof *inits);
    if (inits) g->initializers = inits;
    int *ivals = mcp_realloc(g->initializer_values, ((size_t)g->n_initializers + 1) * sizeof *ivals);
    if (ivals) g->initializer_values = ivals;
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 16;
        mcp_graph_value *v = mcp_realloc(g->values, (size_t)cap * sizeof *v);
        if (v) {
            g->values = v;
            g->cap_values = cap;
        }
    }
    char *dup = mcp_strdup(name);
    if (!inits || !ivals || g->n_values == g->cap_values || !dup) {
        mcp_free(dup);
        mcp_tensor_release(t);
        return -1;
    }
    int idx = g->n_values++;
    mcp_graph_value *v = &g->values[idx];
    memset(v, 0, sizeof *v);
    v->name = dup;
    v->outer = -1;
    v->producer = -1;
    v->initializer = g->n_initializers;
    v->type.kind = MCP_VALUE_TENSOR;
    v->type.dtype = t->dtype;
    v->type.rank = t->rank;
    memcpy(v->type.dims, t->dims, sizeof v->type.dims);
    g->initializers[g->n_initializers] = *t;
    g->initializer_values[g->n_initializers] = idx;
    g->n_initializers++;
    memset(t, 0, sizeof *t);
    return idx;
}

/* Adds a new value computed by a node (no producer yet): named after
 * `base` (made unique), of tensor type dtype with like's shape. Returns its
 * index, or -1 on allocation failure. The per-value counts must then grow
 * (count_uses). */
static int add_value(pass_ctx *c, const char *base, mcp_dtype dtype, const mcp_type *like)
{
    mcp_graph *g = c->g;
    char name[256];
    snprintf(name, sizeof name, "%s", base);
    for (int k = 1; mcp_graph_find_value(g, name) >= 0; k++) snprintf(name, sizeof name, "%s_%d", base, k);
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 16;
        mcp_graph_value *v = mcp_realloc(g->values, (size_t)cap * sizeof *v);
        if (!v) return -1;
        g->values = v;
        g->cap_values = cap;
    }
    char *dup = mcp_strdup(name);
    if (!dup) return -1;
    int idx = g->n_values++;
    mcp_graph_value *v = &g->values[idx];
    memset(v, 0, sizeof *v);
    v->name = dup;
    v->outer = -1;
    v->producer = -1;
    v->initializer = -1;
    v->type.kind = MCP_VALUE_TENSOR;
    v->type.dtype = dtype;
    v->type.rank = like->rank;
    memcpy(v->type.dims, like->dims, sizeof v->type.dims);
    return idx;
}

/* ---- Identity and inference Dropout ---- */

/* True when Dropout node n is the identity on its first input. */
static bool dropout_is_identity(const pass_ctx *c, const mcp_node *n)
{
    if (n->opset < 7) {
        /* Dropout-1/6 runs in training mode unless is_test is set. */
        if (mcp_node_attr_int(n, "is_test", 0) == 0) return false;
    }
    /* Opset 12+: a training_mode input may turn dropout on; keep those. */
    if (node_input(n, 2) >= 0) return false;
    return extra_outputs_unused(c, n);
}

static void pass_identity(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        mcp_node *n = &g->nodes[i];
        bool identity = is_op(n, "Identity") || (is_op(n, "Dropout") && dropout_is_identity(c, n));
        if (!identity || n->n_outputs < 1) continue;
        int in = node_input(n, 0), out = n->outputs[0];
        if (in < 0 || out < 0) continue;
        /* The output keeps its name when it is a graph output; a captured
         * value is read by index from a subgraph, so it stays too. */
        if (c->is_output[out] || c->captured[out]) continue;
        replace_uses(c, out, in);
        remove_node(c, i);
    }
}

/* ---- BatchNormalization folded into Conv ---- */

static bool is_f32_vector(const mcp_tensor *t, int64_t n)
{
    return t && t->dtype == MCP_DTYPE_FLOAT && t->rank == 1 && t->dims[0] == n && t->data;
}

static mcp_status fold_bn(pass_ctx *c, int ci, int bi)
{
    mcp_graph *g = c->g;
    mcp_node *conv = &g->nodes[ci];
    const mcp_node *bn = &g->nodes[bi];
    const mcp_tensor *w = init_of(g, conv->inputs[1]);
    const mcp_tensor *b = init_of(g, node_input(conv, 2));
    const mcp_tensor *scale = init_of(g, bn->inputs[1]);
    const mcp_tensor *bias = init_of(g, bn->inputs[2]);
    const mcp_tensor *mean = init_of(g, bn->inputs[3]);
    const mcp_tensor *var = init_of(g, bn->inputs[4]);
    int64_t m = w->dims[0];
    int64_t per = mcp_tensor_numel(w) / m;
    double eps = mcp_node_attr_float(bn, "epsilon", 1e-5f);

    mcp_tensor nw, nb;
    memset(&nb, 0, sizeof nb);
    mcp_status st = mcp_tensor_alloc(&nw, MCP_DTYPE_FLOAT, w->rank, w->dims, c->err);
    if (st != MCP_STATUS_OK) return st;
    st = mcp_tensor_alloc(&nb, MCP_DTYPE_FLOAT, 1, &m, c->err);
    if (st != MCP_STATUS_OK) {
        mcp_tensor_release(&nw);
        return st;
    }
    const float *wd = w->data, *sd = scale->data, *bd = bias->data, *md = mean->data, *vd = var->data;
    const float *cb = b ? b->data : NULL;
    float *nwd = nw.data, *nbd = nb.data;
    for (int64_t o = 0; o < m; o++) {
        /* y = (conv + cb - mean) * s + bias with s = scale / sqrt(var + eps). */
        double s = (double)sd[o] / sqrt((double)vd[o] + eps);
        for (int64_t k = 0; k < per; k++) nwd[o * per + k] = (float)((double)wd[o * per + k] * s);
        nbd[o] = (float)(((cb ? (double)cb[o] : 0.0) - (double)md[o]) * s + (double)bd[o]);
    }

    char base[200];
    snprintf(base, sizeof base, "%.180s_bnfold_W", conv->name);
    int wv = add_initializer(c, base, &nw);
    snprintf(base, sizeof base, "%.180s_bnfold_B", conv->name);
    int bv = wv >= 0 ? add_initializer(c, base, &nb) : -1;
    if (wv < 0) mcp_tensor_release(&nb);
    if (wv < 0 || bv < 0) return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    /* add_initializer may have moved g->values and g->initializers (w, b
     * and the BN tensors are stale now); g->nodes is untouched. */
    if (conv->n_inputs < 3) {
        int *ins = mcp_realloc(conv->inputs, 3 * sizeof *ins);
        if (!ins) return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        conv->inputs = ins;
        while (conv->n_inputs < 3) conv->inputs[conv->n_inputs++] = -1;
    }
    /* Recount so the per-value arrays cover the two new values. */
    st = count_uses(c);
    if (st != MCP_STATUS_OK) return st;
    for (int k = 1; k < 3; k++)
        if (conv->inputs[k] >= 0) c->uses[conv->inputs[k]]--;
    conv->inputs[1] = wv;
    conv->inputs[2] = bv;
    c->uses[wv]++;
    c->uses[bv]++;
    int old_out = conv->outputs[0];
    conv->outputs[0] = bn->outputs[0];
    remove_node(c, bi);
    g->values[old_out].producer = -1;
    g->values[conv->outputs[0]].producer = ci;
    return MCP_STATUS_OK;
}

static mcp_status pass_fold_bn(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *conv = &g->nodes[i];
        if (!is_op(conv, "Conv") || conv->n_outputs != 1 || conv->n_inputs < 2) continue;
        const mcp_tensor *w = init_of(g, conv->inputs[1]);
        if (!w || w->dtype != MCP_DTYPE_FLOAT || w->rank < 3 || w->dims[0] <= 0 || !w->data) continue;
        int64_t m = w->dims[0];
        int bias_in = node_input(conv, 2);
        if (bias_in >= 0 && !is_f32_vector(init_of(g, bias_in), m)) continue;
        int out = conv->outputs[0];
        if (!only_node_uses(c, out, 1)) continue;
        int bi = consumer_of(c, out, i);
        if (bi < 0) continue;
        const mcp_node *bn = &g->nodes[bi];
        if (!is_op(bn, "BatchNormalization") || bn->n_inputs != 5 || bn->inputs[0] != out) continue;
        /* Opsets before 7 carry is_test/consumed_inputs; 7..8 a spatial
         * flag; 14+ a training mode. Fold only plain inference. */
        if (bn->opset < 7 || mcp_node_attr_int(bn, "spatial", 1) != 1) continue;
        if (mcp_node_attr_int(bn, "training_mode", 0) != 0) continue;
        if (bn->n_outputs < 1 || bn->outputs[0] < 0 || !extra_outputs_unused(c, bn)) continue;
        bool ok = true;
        for (int k = 1; k < 5 && ok; k++) ok = is_f32_vector(init_of(g, bn->inputs[k]), m);
        if (!ok) continue;
        mcp_status st = fold_bn(c, i, bi);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* ---- MatMul + Add(bias) -> Gemm ---- */

static bool type_is(const mcp_type *t, mcp_dtype dtype, int rank)
{
    return t->kind == MCP_VALUE_TENSOR && !t->is_optional && t->dtype == dtype && t->rank == rank;
}

static mcp_status pass_matmul_add(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        mcp_node *mm = &g->nodes[i];
        /* Gemm broadcasts C without the `broadcast` attribute from opset 7. */
        if (!is_op(mm, "MatMul") || mm->opset < 7 || mm->n_inputs != 2 || mm->n_outputs != 1) continue;
        int a = mm->inputs[0], b = mm->inputs[1], out = mm->outputs[0];
        if (a < 0 || b < 0 || out < 0) continue;
        const mcp_type *ta = &g->values[a].type, *tb = &g->values[b].type;
        mcp_dtype dt = ta->dtype;
        if (dt != MCP_DTYPE_FLOAT && dt != MCP_DTYPE_DOUBLE) continue;
        if (!type_is(ta, dt, 2) || !type_is(tb, dt, 2) || tb->dims[1] < 0) continue;
        if (!only_node_uses(c, out, 1)) continue;
        int ai = consumer_of(c, out, i);
        if (ai < 0) continue;
        mcp_node *add = &g->nodes[ai];
        if (!is_op(add, "Add") || add->opset < 7 || add->n_inputs != 2 || add->n_outputs != 1 || add->outputs[0] < 0) continue;
        int bias = add->inputs[0] == out ? add->inputs[1] : add->inputs[0];
        if (bias == out) continue;
        const mcp_tensor *bt = init_of(g, bias);
        if (!bt || bt->dtype != dt || bt->rank != 1 || bt->dims[0] != tb->dims[1]) continue;

        int *ins = mcp_realloc(mm->inputs, 3 * sizeof *ins);
        char *op = mcp_strdup("Gemm");
        if (!ins || !op) {
            if (ins) mm->inputs = ins;
            mcp_free(op);
            return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        mm->inputs = ins;
        mm->inputs[2] = bias;
        mm->n_inputs = 3;
        mcp_free(mm->op_type);
        mm->op_type = op;
        mm->outputs[0] = add->outputs[0];
        c->uses[bias]++;
        remove_node(c, ai);
        g->values[out].producer = -1;
        g->values[mm->outputs[0]].producer = i;
    }
    return MCP_STATUS_OK;
}

/* ---- fusion helpers ---- */

static bool is_f32(const pass_ctx *c, int v)
{
    if (v < 0 || v >= c->g->n_values) return false;
    const mcp_type *t = &c->g->values[v].type;
    return t->kind == MCP_VALUE_TENSOR && !t->is_optional && t->dtype == MCP_DTYPE_FLOAT;
}

static const mcp_type *type_of(const pass_ctx *c, int v) { return &c->g->values[v].type; }

/* True when v is a float32 vector of n elements by its static type. */
static bool is_f32_vec(const pass_ctx *c, int v, int64_t n)
{
    if (!is_f32(c, v)) return false;
    const mcp_type *t = type_of(c, v);
    return t->rank == 1 && t->dims[0] == n;
}

/* Equal static shapes: known rank, every dim the same static size or the
 * same symbolic name (a batch dim called "N" on both sides). */
static bool same_shape(const mcp_type *a, const mcp_type *b)
{
    if (a->rank < 0 || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++) {
        if (a->dims[i] >= 0 || b->dims[i] >= 0) {
            if (a->dims[i] != b->dims[i]) return false;
        } else if (!a->dim_params[i] || !b->dim_params[i] || strcmp(a->dim_params[i], b->dim_params[i]) != 0) {
            return false;
        }
    }
    return true;
}

/* The live node producing v, or -1. */
static int producer_of(const pass_ctx *c, int v)
{
    const mcp_graph *g = c->g;
    if (v < 0 || v >= g->n_values) return -1;
    int p = g->values[v].producer;
    if (p < 0 || p >= g->n_nodes || c->removed[p]) return -1;
    const mcp_node *n = &g->nodes[p];
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] == v) return p;
    return -1;
}

/* The constant tensor behind v: an initializer or the `value` of a live
 * Constant node; NULL otherwise. */
static const mcp_tensor *const_tensor(const pass_ctx *c, int v)
{
    const mcp_tensor *t = init_of(c->g, v);
    if (t) return t;
    int p = producer_of(c, v);
    if (p < 0 || !is_op(&c->g->nodes[p], "Constant")) return NULL;
    const mcp_attr *a = mcp_node_attr(&c->g->nodes[p], "value");
    return a && a->type == MCP_ATTR_TENSOR ? &a->t : NULL;
}

/*
 * Reads v as a float32 constant of at most one element and rank at most
 * max_rank (so that, as an operand, it cannot widen the other operand's
 * shape). Returns 1 with *out set, 0 for an empty tensor, -1 when v is not
 * such a constant.
 */
static int const_f32(const pass_ctx *c, int v, int max_rank, double *out)
{
    const mcp_tensor *t = const_tensor(c, v);
    if (t) {
        int64_t n = mcp_tensor_numel(t);
        if (t->dtype != MCP_DTYPE_FLOAT || t->format || t->rank > max_rank || n > 1) return -1;
        if (n == 0) return 0;
        if (!t->data) return -1;
        *out = ((const float *)t->data)[0];
        return 1;
    }
    int p = producer_of(c, v);
    if (p < 0 || !is_op(&c->g->nodes[p], "Constant")) return -1;
    const mcp_attr *a = mcp_node_attr(&c->g->nodes[p], "value_float");
    if (!a || a->type != MCP_ATTR_FLOAT) return -1;
    *out = a->f;
    return 1;
}

/* True when v is a one-element float32 constant within tol of want. */
static bool const_near(const pass_ctx *c, int v, int max_rank, double want, double tol)
{
    double x;
    return const_f32(c, v, max_rank, &x) == 1 && fabs(x - want) <= tol;
}

/* Rank of v usable as max_rank for its constant operands: a constant of
 * rank 0 never widens anything, higher ranks only up to v's known rank. */
static int rank_bound(const pass_ctx *c, int v)
{
    int r = type_of(c, v)->rank;
    return r > 0 ? r : 0;
}

/* A default-domain node of op type `op` with one output; binary ops from
 * opset 7 (numpy broadcasting, no legacy broadcast attributes). */
static bool node_is(const mcp_node *n, const char *op, int n_inputs)
{
    if (!is_op(n, op) || n->n_inputs != n_inputs || n->n_outputs != 1 || n->outputs[0] < 0) return false;
    for (int k = 0; k < n_inputs; k++)
        if (n->inputs[k] < 0) return false;
    return n_inputs != 2 || n->opset >= 7;
}

/* The operand of binary node n that is not v; -1 when n does not read v or
 * reads it twice. */
static int other_input(const mcp_node *n, int v)
{
    if (n->n_inputs != 2) return -1;
    if (n->inputs[0] == v && n->inputs[1] != v) return n->inputs[1];
    if (n->inputs[1] == v && n->inputs[0] != v) return n->inputs[0];
    return -1;
}

/* The single live reader of v when it is node `op` (checked by node_is with
 * n_inputs), or -1. v must have exactly one use (only_node_uses). */
static int sole_reader(const pass_ctx *c, int v, int after, const char *op, int n_inputs)
{
    if (!only_node_uses(c, v, 1)) return -1;
    int r = consumer_of(c, v, after);
    return r >= 0 && node_is(&c->g->nodes[r], op, n_inputs) ? r : -1;
}

/* Up to max live readers of v after node `after` (a node reading v twice
 * counts once); returns how many were found. */
static int readers_of(const pass_ctx *c, int v, int after, int *out, int max)
{
    int found = 0;
    for (int i = after + 1; i < c->g->n_nodes && found < max; i++) {
        if (c->removed[i]) continue;
        const mcp_node *n = &c->g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == v) {
                out[found++] = i;
                break;
            }
    }
    return found;
}

/* Marks node i removed (remove_node) and clears the producer of its outputs. */
static void drop_node(pass_ctx *c, int i)
{
    remove_node(c, i);
    const mcp_node *n = &c->g->nodes[i];
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (v >= 0 && c->g->values[v].producer == i) c->g->values[v].producer = -1;
    }
}

/*
 * The new form of a rewritten node, built completely before the graph
 * changes, so that a failed allocation leaves the graph as it was. The
 * attribute list starts with the node's own attributes (moved, when kept)
 * followed by the ones added with form_attr.
 */
typedef struct node_form {
    char *op_type;
    char *domain;
    int n_inputs;
    int *inputs;
    bool keep_attrs;
    int n_attrs, cap_attrs;
    mcp_attr *attrs;
} node_form;

static void form_abort(node_form *f, const mcp_node *n)
{
    mcp_free(f->op_type);
    mcp_free(f->domain);
    mcp_free(f->inputs);
    int first_new = f->keep_attrs ? n->n_attrs : 0;
    for (int i = first_new; i < f->n_attrs; i++) mcp_attr_release(&f->attrs[i]);
    mcp_free(f->attrs);
    memset(f, 0, sizeof *f);
}

static mcp_status form_begin(pass_ctx *c, const mcp_node *n, const char *op_type, int n_inputs,
                             const int *inputs, bool keep_attrs, int extra_attrs, node_form *f)
{
    memset(f, 0, sizeof *f);
    f->keep_attrs = keep_attrs;
    f->op_type = mcp_strdup(op_type);
    f->domain = mcp_strdup(MCP_DOMAIN_INTERNAL);
    f->n_inputs = n_inputs;
    f->inputs = mcp_malloc((size_t)n_inputs * sizeof *f->inputs);
    f->cap_attrs = (keep_attrs ? n->n_attrs : 0) + extra_attrs;
    f->attrs = mcp_calloc(f->cap_attrs ? (size_t)f->cap_attrs : 1, sizeof *f->attrs);
    if (!f->op_type || !f->domain || !f->inputs || !f->attrs) {
        form_abort(f, n);
        return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    memcpy(f->inputs, inputs, (size_t)n_inputs * sizeof *inputs);
    if (keep_attrs) {
        for (int i = 0; i < n->n_attrs; i++) f->attrs[i] = n->attrs[i];
        f->n_attrs = n->n_attrs;
    }
    return MCP_STATUS_OK;
}

/* Appends an attribute named `name`; NULL when out of memory. */
static mcp_attr *form_attr(node_form *f, const char *name, mcp_attr_type type)
{
    MCP_ASSERT(f->n_attrs < f->cap_attrs);
    mcp_attr *a = &f->attrs[f->n_attrs];
    memset(a, 0, sizeof *a);
    a->name = mcp_strdup(name);
    if (!a->name) return NULL;
    a->type = type;
    f->n_attrs++;
    return a;
}

/* Installs f into node i: input uses move to the new inputs, the old
 * attributes are released unless kept, and the node joins the internal
 * domain at opset 1. */
static void form_commit(pass_ctx *c, int i, node_form *f)
{
    mcp_node *n = &c->g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0) c->uses[n->inputs[k]]--;
    for (int k = 0; k < f->n_inputs; k++)
        if (f->inputs[k] >= 0) c->uses[f->inputs[k]]++;
    mcp_free(n->inputs);
    n->inputs = f->inputs;
    n->n_inputs = f->n_inputs;
    if (!f->keep_attrs)
        for (int k = 0; k < n->n_attrs; k++) mcp_attr_release(&n->attrs[k]);
    mcp_free(n->attrs);
    n->attrs = f->attrs;
    n->n_attrs = f->n_attrs;
    mcp_free(n->op_type);
    n->op_type = f->op_type;
    mcp_free(n->domain);
    n->domain = f->domain;
    n->opset = 1;
    memset(f, 0, sizeof *f);
}

/* Drops the tail nodes and installs f into node h, now writing `out`, in
 * the slot of the last tail node: an extra input the rewrite added (a
 * residual sum) may be computed after h, never after the tail. The
 * dropped node that was there goes to slot h and is released at
 * compaction. */
static void commit_in_last_slot(pass_ctx *c, int h, node_form *f, const int *tail, int n_tail, int out)
{
    mcp_graph *g = c->g;
    int last = tail[0];
    for (int k = 0; k < n_tail; k++) {
        if (tail[k] > last) last = tail[k];
        drop_node(c, tail[k]);
    }
    form_commit(c, h, f);
    mcp_node *fused = &g->nodes[h];
    g->values[fused->outputs[0]].producer = -1;
    fused->outputs[0] = out;
    mcp_node tmp = g->nodes[last];
    g->nodes[last] = g->nodes[h];
    g->nodes[h] = tmp;
    c->removed[last] = false;
    c->removed[h] = true;
    g->values[out].producer = last;
}

/* ---- activations after Conv, Gemm or MatMul ---- */

/* An activation the fused ops express (graph.h), found after value v. */
typedef struct act_match {
    mcp_activation kind;
    float params[2];
    int n_params;
    int nodes[2]; /* the nodes it replaces */
    int n_nodes;
    int out;      /* the value it produces */
} act_match;

/* Clip's bound input k (opset 11+): absent or empty -> dflt, a float32
 * scalar constant -> its value; false for anything computed at run time. */
static bool clip_bound(const pass_ctx *c, const mcp_node *n, int k, float dflt, float *out)
{
    *out = dflt;
    int v = node_input(n, k);
    if (v < 0) return true;
    double x;
    int r = const_f32(c, v, MCP_MAX_RANK, &x);
    if (r < 0) return false;
    if (r == 1) *out = (float)x;
    return true;
}

/* Matches an activation reading v (float32, produced by node `after`):
 * one unary node (Gelu: the internal op pass_gelu makes, or ONNX Gelu in
 * its erf form), or Silu as Sigmoid(v) and Mul(v, that) in either order. */
static bool match_activation(const pass_ctx *c, int v, int after, act_match *m)
{
    memset(m, 0, sizeof *m);
    if (!is_f32(c, v)) return false;
    const mcp_graph *g = c->g;
    if (only_node_uses(c, v, 1)) {
        int ai = consumer_of(c, v, after);
        if (ai < 0) return false;
        const mcp_node *a = &g->nodes[ai];
        if (a->n_inputs < 1 || a->inputs[0] != v || a->n_outputs != 1 || a->outputs[0] < 0) return false;
        const char *op = a->op_type;
        if (strcmp(a->domain, MCP_DOMAIN_INTERNAL) == 0) {
            if (strcmp(op, "Gelu") != 0 || a->n_inputs != 1) return false;
            m->kind = MCP_ACTIVATION_GELU;
        } else if (a->domain[0] != '\0') {
            return false;
        } else if (a->n_inputs == 1 && strcmp(op, "Gelu") == 0) {
            if (strcmp(mcp_node_attr_string(a, "approximate", "none"), "none") != 0) return false;
            m->kind = MCP_ACTIVATION_GELU;
        } else if (a->n_inputs == 1 && (strcmp(op, "Relu") == 0 || strcmp(op, "Sigmoid") == 0 || strcmp(op, "Tanh") == 0)) {
            m->kind = mcp_activation_from_name(op);
        } else if (a->n_inputs == 1 && strcmp(op, "LeakyRelu") == 0) {
            m->kind = MCP_ACTIVATION_LEAKYRELU;
            m->params[m->n_params++] = mcp_node_attr_float(a, "alpha", 0.01f);
        } else if (a->n_inputs == 1 && strcmp(op, "HardSigmoid") == 0) {
            m->kind = MCP_ACTIVATION_HARDSIGMOID;
            m->params[m->n_params++] = mcp_node_attr_float(a, "alpha", 0.2f);
            m->params[m->n_params++] = mcp_node_attr_float(a, "beta", 0.5f);
        } else if (strcmp(op, "Clip") == 0) {
            float lo, hi;
            if (a->opset < 11) {
                /* Bounds are attributes, defaulting to float's lowest / max. */
                if (a->n_inputs != 1) return false;
                lo = mcp_node_attr_float(a, "min", -FLT_MAX);
                hi = mcp_node_attr_float(a, "max", FLT_MAX);
            } else if (a->n_inputs > 3 || !clip_bound(c, a, 1, -INFINITY, &lo) || !clip_bound(c, a, 2, INFINITY, &hi)) {
                return false;
            }
            m->kind = MCP_ACTIVATION_CLIP;
            m->params[m->n_params++] = lo;
            m->params[m->n_params++] = hi;
        } else {
            return false;
        }
        m->nodes[m->n_nodes++] = ai;
        m->out = a->outputs[0];
        return true;
    }
    if (!only_node_uses(c, v, 2)) return false;
    int r[2];
    if (readers_of(c, v, after, r, 2) != 2) return false;
    for (int k = 0; k < 2; k++) {
        const mcp_node *sig = &g->nodes[r[k]], *mul = &g->nodes[r[1 - k]];
        if (!node_is(sig, "Sigmoid", 1) || sig->inputs[0] != v) continue;
        int s = sig->outputs[0];
        if (!node_is(mul, "Mul", 2) || other_input(mul, v) != s || !only_node_uses(c, s, 1)) continue;
        m->kind = MCP_ACTIVATION_SILU;
        m->nodes[m->n_nodes++] = r[k];
        m->nodes[m->n_nodes++] = r[1 - k];
        m->out = mul->outputs[0];
        return true;
    }
    return false;
}

/*
 * Rewrites node h (Conv, Gemm or MatMul) into `op_type` of the internal
 * domain, with value `extra` (-1: none) as input number extra_at (the Sum
 * of FusedConv, the Bias of FusedMatMul) and activation m (NULL: none),
 * replacing the tail nodes; the result is `out` and the fused node moves
 * into the slot of the last tail node.
 */
static mcp_status fuse_head(pass_ctx *c, int h, const char *op_type, int extra, int extra_at, const int *tail,
                            int n_tail, const act_match *m, int out)
{
    mcp_graph *g = c->g;
    const mcp_node *n = &g->nodes[h];
    int ins[4] = {-1, -1, -1, -1};
    MCP_ASSERT(n->n_inputs <= 3 && extra_at < 4);
    MCP_ASSERT(!m || m->n_params == mcp_activation_n_params(m->kind));
    for (int k = 0; k < n->n_inputs; k++) ins[k] = n->inputs[k];
    int n_ins = n->n_inputs;
    if (extra >= 0) {
        ins[extra_at] = extra;
        if (n_ins < extra_at + 1) n_ins = extra_at + 1;
    }
    node_form f;
    mcp_status st = form_begin(c, n, op_type, n_ins, ins, true, m ? 2 : 0, &f);
    if (st != MCP_STATUS_OK) return st;
    if (m) {
        mcp_attr *a = form_attr(&f, "activation", MCP_ATTR_STRING);
        if (a) {
            a->s = mcp_strdup(mcp_activation_name(m->kind));
            a->s_len = a->s ? strlen(a->s) : 0;
        }
        mcp_attr *p = a && a->s && m->n_params ? form_attr(&f, "activation_params", MCP_ATTR_FLOATS) : NULL;
        if (p) {
            p->floats = mcp_malloc((size_t)m->n_params * sizeof *p->floats);
            if (p->floats) memcpy(p->floats, m->params, (size_t)m->n_params * sizeof *p->floats);
            p->count = m->n_params;
        }
        if (!a || !a->s || (m->n_params && (!p || !p->floats))) {
            form_abort(&f, n);
            return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
    }
    commit_in_last_slot(c, h, &f, tail, n_tail, out);
    return MCP_STATUS_OK;
}

/* ---- Conv -> [Add] -> [activation] => FusedConv ---- */

static mcp_status pass_fuse_conv(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *conv = &g->nodes[i];
        if (!is_op(conv, "Conv") || conv->n_outputs != 1 || conv->n_inputs < 2 || conv->n_inputs > 3) continue;
        int y = conv->outputs[0];
        if (y < 0 || conv->inputs[0] < 0 || conv->inputs[1] < 0) continue;
        if (!is_f32(c, conv->inputs[0]) || !is_f32(c, y)) continue;
        int tail[3], n_tail = 0, sum = -1, cur = y, cur_node = i;
        int ai = sole_reader(c, y, i, "Add", 2);
        if (ai >= 0) {
            const mcp_node *add = &g->nodes[ai];
            int other = other_input(add, y);
            if (other >= 0 && is_f32(c, other) && same_shape(type_of(c, other), type_of(c, y))) {
                sum = other;
                tail[n_tail++] = ai;
                cur = add->outputs[0];
                cur_node = ai;
            }
        }
        act_match m;
        bool act = match_activation(c, cur, cur_node, &m);
        for (int k = 0; act && k < m.n_nodes; k++) tail[n_tail++] = m.nodes[k];
        if (n_tail == 0) continue;
        mcp_status st = fuse_head(c, i, "FusedConv", sum, 3, tail, n_tail, act ? &m : NULL, act ? m.out : cur);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* ---- Gemm -> activation => FusedGemm ---- */

static mcp_status pass_fuse_gemm(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *gemm = &g->nodes[i];
        /* From opset 7 Gemm has no `broadcast` attribute: the fused op's
         * attributes are exactly Gemm's. */
        if (!is_op(gemm, "Gemm") || gemm->opset < 7 || gemm->n_outputs != 1 || gemm->n_inputs < 2 || gemm->n_inputs > 3)
            continue;
        int y = gemm->outputs[0];
        if (y < 0 || gemm->inputs[0] < 0 || gemm->inputs[1] < 0 || !is_f32(c, gemm->inputs[0])) continue;
        act_match m;
        if (!match_activation(c, y, i, &m)) continue;
        mcp_status st = fuse_head(c, i, "FusedGemm", -1, 0, m.nodes, m.n_nodes, &m, m.out);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* ---- MatMul -> [Add(bias)] -> [activation] => FusedMatMul ---- */

/* What MatMul + Add(bias) -> Gemm leaves: A of rank 2 or more (a
 * transformer's [batch, seq, hidden] among them), B a matrix; the bias is a float32
 * vector of B's columns, so the Add does not widen the product. A MatMul
 * fuses when it takes a bias, an activation or both. */
static mcp_status pass_fuse_matmul(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *mm = &g->nodes[i];
        if (!node_is(mm, "MatMul", 2)) continue;
        int a = mm->inputs[0], b = mm->inputs[1], y = mm->outputs[0];
        if (!is_f32(c, a) || !is_f32(c, b) || !is_f32(c, y)) continue;
        const mcp_type *tb = type_of(c, b);
        if (type_of(c, a)->rank < 2 || tb->rank != 2 || tb->dims[1] < 0) continue;
        int tail[3], n_tail = 0, bias = -1, cur = y, cur_node = i;
        int ai = sole_reader(c, y, i, "Add", 2);
        if (ai >= 0) {
            int other = other_input(&g->nodes[ai], y);
            if (is_f32_vec(c, other, tb->dims[1])) {
                bias = other;
                tail[n_tail++] = ai;
                cur = g->nodes[ai].outputs[0];
                cur_node = ai;
            }
        }
        act_match m;
        bool act = match_activation(c, cur, cur_node, &m);
        for (int k = 0; act && k < m.n_nodes; k++) tail[n_tail++] = m.nodes[k];
        if (n_tail == 0) continue;
        mcp_status st = fuse_head(c, i, "FusedMatMul", bias, 2, tail, n_tail, act ? &m : NULL, act ? m.out : cur);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* ---- rewriting a pattern's last node ---- */

/* Rewrites node `last` into f (built by the caller) and drops the other
 * pattern nodes. */
static void replace_pattern(pass_ctx *c, int last, node_form *f, const int *others, int n_others)
{
    for (int k = 0; k < n_others; k++) drop_node(c, others[k]);
    form_commit(c, last, f);
}

/* ---- GELU => Gelu ---- */

/*
 * torch exports gelu(x) as  d = x / 1.4142135 (or x * 0.70710677);
 * e = Erf(d); a = e + 1; then the product x * a * 0.5 in one of three
 * association orders: (x * a) * 0.5, (x * 0.5) * a or x * (a * 0.5).
 * Exporters write sqrt 2 with as few as 6 digits (1.41421 is off by
 * 3.6e-6); 1 and 0.5 are exact in float. Gelu uses the exact constants.
 */
#define GELU_SQRT2_TOL 1e-5
#define GELU_EXACT_TOL 1e-6

static mcp_status pass_gelu(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *erf = &g->nodes[i];
        if (!node_is(erf, "Erf", 1)) continue;
        int d = erf->inputs[0];
        int di = producer_of(c, d);
        if (di < 0 || !only_node_uses(c, d, 1)) continue;
        const mcp_node *dn = &g->nodes[di];
        int x = -1;
        if (node_is(dn, "Div", 2)) {
            if (const_near(c, dn->inputs[1], rank_bound(c, dn->inputs[0]), M_SQRT2, GELU_SQRT2_TOL)) x = dn->inputs[0];
        } else if (node_is(dn, "Mul", 2)) {
            for (int k = 0; k < 2 && x < 0; k++)
                if (const_near(c, dn->inputs[1 - k], rank_bound(c, dn->inputs[k]), M_SQRT1_2, GELU_SQRT2_TOL))
                    x = dn->inputs[k];
        }
        if (x < 0 || x == d || !is_f32(c, x)) continue;
        int rb = rank_bound(c, x);
        int ai = sole_reader(c, erf->outputs[0], i, "Add", 2);
        if (ai < 0 || !const_near(c, other_input(&g->nodes[ai], erf->outputs[0]), rb, 1.0, GELU_EXACT_TOL)) continue;
        int av = g->nodes[ai].outputs[0];
        int p1 = sole_reader(c, av, ai, "Mul", 2);
        if (p1 < 0) continue;
        int o1 = other_input(&g->nodes[p1], av), p1v = g->nodes[p1].outputs[0];
        int last = -1, others[5] = {di, i, ai, -1, -1}, n_others = 3;
        if (o1 == x || const_near(c, o1, rb, 0.5, GELU_EXACT_TOL)) {
            /* (x * a) * 0.5 or x * (a * 0.5) */
            int p2 = sole_reader(c, p1v, p1, "Mul", 2);
            if (p2 < 0) continue;
            int o2 = other_input(&g->nodes[p2], p1v);
            if (o1 == x ? !const_near(c, o2, rb, 0.5, GELU_EXACT_TOL) : o2 != x) continue;
            last = p2;
            others[n_others++] = p1;
        } else {
            /* (x * 0.5) * a */
            int hi = producer_of(c, o1);
            if (hi < 0 || !only_node_uses(c, o1, 1) || !node_is(&g->nodes[hi], "Mul", 2)) continue;
            int o = other_input(&g->nodes[hi], x);
            if (o < 0 || !const_near(c, o, rb, 0.5, GELU_EXACT_TOL)) continue;
            last = p1;
            others[n_others++] = hi;
        }
        node_form f;
        mcp_status st = form_begin(c, &g->nodes[last], "Gelu", 1, &x, false, 0, &f);
        if (st != MCP_STATUS_OK) return st;
        replace_pattern(c, last, &f, others, n_others);
    }
    return MCP_STATUS_OK;
}

/* ---- LayerNorm => LayerNormalization ---- */

/* A ReduceMean over the last axis of a rank-r input, keeping dims; axes from
 * the attribute before opset 18, from a constant input since. */
static bool reduce_mean_last(const pass_ctx *c, const mcp_node *n, int r)
{
    if (!is_op(n, "ReduceMean") || n->n_outputs != 1 || n->outputs[0] < 0 || n->n_inputs < 1 || n->inputs[0] < 0)
        return false;
    if (mcp_node_attr_int(n, "keepdims", 1) != 1) return false;
    int64_t axis;
    if (n->opset < 18) {
        int64_t count;
        const int64_t *axes = mcp_node_attr_ints(n, "axes", &count);
        if (n->n_inputs != 1 || !axes || count != 1) return false;
        axis = axes[0];
    } else {
        const mcp_tensor *t = n->n_inputs == 2 ? const_tensor(c, n->inputs[1]) : NULL;
        if (!t || t->dtype != MCP_DTYPE_INT64 || t->format || mcp_tensor_numel(t) != 1 || t->rank > 1 || !t->data)
            return false;
        axis = ((const int64_t *)t->data)[0];
    }
    return axis == -1 || axis == r - 1;
}

/*
 * torch exports layer_norm (opset < 17) as  m = ReduceMean(X, [-1]);
 * d = X - m; v = ReduceMean(Pow(d, 2), [-1]); s = Sqrt(v + eps); n = d / s;
 * y = n * scale [+ bias]. Scale and bias are float32 vectors of X's last
 * dimension (static), so the products do not broadcast beyond X's shape.
 */
static mcp_status pass_layernorm(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *r1 = &g->nodes[i];
        if (!is_op(r1, "ReduceMean") || r1->n_inputs < 1) continue;
        int x = r1->inputs[0];
        if (!is_f32(c, x)) continue;
        const mcp_type *xt = type_of(c, x);
        int rank = xt->rank;
        if (rank < 1 || xt->dims[rank - 1] <= 0 || !reduce_mean_last(c, r1, rank)) continue;
        int64_t width = xt->dims[rank - 1];
        int mv = r1->outputs[0];
        int si = sole_reader(c, mv, i, "Sub", 2);
        if (si < 0 || g->nodes[si].inputs[0] != x || g->nodes[si].inputs[1] != mv) continue;
        int dv = g->nodes[si].outputs[0];
        int r[2];
        if (!only_node_uses(c, dv, 2) || readers_of(c, dv, si, r, 2) != 2) continue;
        int pi = -1, qi = -1; /* Pow(d, 2) and Div(d, s) */
        for (int k = 0; k < 2; k++) {
            const mcp_node *n = &g->nodes[r[k]];
            if (node_is(n, "Pow", 2) && n->inputs[0] == dv) pi = r[k];
            else if (node_is(n, "Div", 2) && n->inputs[0] == dv) qi = r[k];
        }
        if (pi < 0 || qi < 0) continue;
        double two;
        if (const_f32(c, g->nodes[pi].inputs[1], rank, &two) != 1 || two != 2.0) continue;
        int pv = g->nodes[pi].outputs[0];
        if (!only_node_uses(c, pv, 1)) continue;
        int r2 = consumer_of(c, pv, pi);
        if (r2 < 0 || g->nodes[r2].inputs[0] != pv || !reduce_mean_last(c, &g->nodes[r2], rank)) continue;
        int ei = sole_reader(c, g->nodes[r2].outputs[0], r2, "Add", 2);
        double eps;
        if (ei < 0 || const_f32(c, other_input(&g->nodes[ei], g->nodes[r2].outputs[0]), rank, &eps) != 1 || !(eps >= 0))
            continue;
        int qs = sole_reader(c, g->nodes[ei].outputs[0], ei, "Sqrt", 1);
        if (qs < 0 || !only_node_uses(c, g->nodes[qs].outputs[0], 1) || g->nodes[qi].inputs[1] != g->nodes[qs].outputs[0])
            continue;
        int nv = g->nodes[qi].outputs[0];
        int mi = sole_reader(c, nv, qi, "Mul", 2);
        if (mi < 0) continue;
        int scale = other_input(&g->nodes[mi], nv);
        if (!is_f32_vec(c, scale, width)) continue;
        int last = mi, bias = -1;
        int others[9] = {i, si, pi, r2, ei, qs, qi}, n_others = 7;
        int bi = sole_reader(c, g->nodes[mi].outputs[0], mi, "Add", 2);
        if (bi >= 0) {
            int b = other_input(&g->nodes[bi], g->nodes[mi].outputs[0]);
            if (is_f32_vec(c, b, width)) {
                bias = b;
                others[n_others++] = mi;
                last = bi;
            }
        }
        int ins[3] = {x, scale, bias};
        node_form f;
        mcp_status st = form_begin(c, &g->nodes[last], "LayerNormalization", bias >= 0 ? 3 : 2, ins, false, 2, &f);
        if (st != MCP_STATUS_OK) return st;
        mcp_attr *ax = form_attr(&f, "axis", MCP_ATTR_INT);
        if (ax) ax->i = -1;
        mcp_attr *ep = ax ? form_attr(&f, "epsilon", MCP_ATTR_FLOAT) : NULL;
        if (!ep) {
            form_abort(&f, &g->nodes[last]);
            return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        ep->f = (float)eps;
        replace_pattern(c, last, &f, others, n_others);
    }
    return MCP_STATUS_OK;
}

/* ---- scaled dot-product attention => Attention ---- */

/*
 * K for a pattern reading KT = Transpose(X, perm), KT's last two axes being
 * K's swapped: X itself when the swap undoes the perm (the Transpose then
 * goes with the pattern: *drop set), else KT once the Transpose is
 * rewritten to produce K (*rewrite set; only when the pattern is its sole
 * reader; untranspose() does it). -1 when KT is not such a Transpose.
 */
static int untransposed(const pass_ctx *c, int kt, int r, int *drop, int *rewrite)
{
    *drop = *rewrite = -1;
    int t = producer_of(c, kt);
    if (t < 0 || !node_is(&c->g->nodes[t], "Transpose", 1) || !only_node_uses(c, kt, 1)) return -1;
    const mcp_node *n = &c->g->nodes[t];
    const mcp_attr *pa = mcp_node_attr(n, "perm");
    if (!pa || pa->type != MCP_ATTR_INTS || pa->count != r) return -1;
    bool identity = true;
    for (int i = 0; i < r; i++) identity = identity && pa->ints[i < r - 2 ? i : 2 * r - 3 - i] == i;
    if (identity) {
        *drop = t;
        return n->inputs[0];
    }
    *rewrite = t;
    return kt;
}

/* Swaps the last two entries of Transpose t's perm and of its output's
 * declared dims. */
static void untranspose(pass_ctx *c, int t)
{
    mcp_node *n = &c->g->nodes[t];
    /* The attribute untransposed() checked: mcp_node_attr's (the first of the name). */
    mcp_attr *pa = (mcp_attr *)mcp_node_attr(n, "perm");
    int r = (int)pa->count;
    int64_t last = pa->ints[r - 1];
    pa->ints[r - 1] = pa->ints[r - 2];
    pa->ints[r - 2] = last;
    mcp_type *ty = &c->g->values[n->outputs[0]].type;
    int64_t d = ty->dims[r - 1];
    char *sym = ty->dim_params[r - 1];
    ty->dims[r - 1] = ty->dims[r - 2];
    ty->dim_params[r - 1] = ty->dim_params[r - 2];
    ty->dims[r - 2] = d;
    ty->dim_params[r - 2] = sym;
}

/*
 * MatMul(Q, Transpose(K)) [-> Mul / Div by scalar constants] [-> Add of a
 * float mask] -> Softmax(last axis) -> MatMul(., V), on 3-D (batch, seq,
 * size: one head) or 4-D (batch, heads, seq, size) float32 tensors, becomes
 * the internal Attention (ops/attention.h; leading dims broadcast as the
 * MatMuls broadcast them): the fused kernel never writes the score tensor. The mask must have static
 * dims, 1 or the scores' own on each axis and the key count on the last
 * (Attention pads a shorter one instead of broadcasting it).
 */
static mcp_status pass_attention(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *sm = &g->nodes[i];
        if (!node_is(sm, "Softmax", 1)) continue;
        int sv = sm->inputs[0], pv = sm->outputs[0];
        if (!is_f32(c, sv)) continue;
        const mcp_type *st = type_of(c, sv);
        int r = st->rank;
        int64_t axis = mcp_node_attr_int(sm, "axis", sm->opset >= 13 ? -1 : 1);
        if ((r != 3 && r != 4) || (axis != -1 && axis != r - 1)) continue;
        int m2 = sole_reader(c, pv, i, "MatMul", 2);
        if (m2 < 0 || g->nodes[m2].inputs[0] != pv) continue;
        int v = g->nodes[m2].inputs[1];
        /* Up the chain: an optional mask Add, then scalar scales. */
        int others[10], n_others = 0, x = sv, mask = -1; /* mask Add + 5 scales + MatMul, Softmax, Transpose */
        double scale = 1.0;
        int p = producer_of(c, x);
        if (p >= 0 && node_is(&g->nodes[p], "Add", 2) && only_node_uses(c, x, 1)) {
            const mcp_node *add = &g->nodes[p];
            for (int k = 0; k < 2 && mask < 0; k++) {
                int m = add->inputs[k], up = add->inputs[1 - k];
                const mcp_type *mt = type_of(c, m);
                int q = producer_of(c, up);
                if (!same_shape(type_of(c, up), st)) continue; /* the mask would widen the scores */
                /* 3-D scores are (batch, q, keys) with one head: a mask of
                 * rank 3 would be read as (heads, q, keys). */
                if (!is_f32(c, m) || mt->rank < 1 || mt->rank > (r == 3 ? 2 : r) || q < 0 ||
                    (!is_op(&g->nodes[q], "MatMul") && !is_op(&g->nodes[q], "Mul") && !is_op(&g->nodes[q], "Div")))
                    continue;
                bool fits = mt->dims[mt->rank - 1] >= 0 && mt->dims[mt->rank - 1] == st->dims[r - 1];
                for (int d = 0; fits && d < mt->rank - 1; d++) {
                    int64_t want = st->dims[r - mt->rank + d];
                    fits = mt->dims[d] == 1 || (mt->dims[d] >= 0 && mt->dims[d] == want);
                }
                if (fits) mask = m, x = up;
            }
            if (mask < 0) continue;
            others[n_others++] = p;
        }
        for (p = producer_of(c, x); p >= 0 && n_others < 6 && only_node_uses(c, x, 1); p = producer_of(c, x)) {
            /* at most 5 scales after a mask Add, 6 without: 3 more entries follow */
            const mcp_node *n = &g->nodes[p];
            double f;
            if (!node_is(n, "Mul", 2) && !node_is(n, "Div", 2)) break;
            int k = const_f32(c, n->inputs[1], 0, &f) == 1 ? 1 : is_op(n, "Mul") && const_f32(c, n->inputs[0], 0, &f) == 1 ? 0 : -1;
            if (k < 0 || f == 0.0 || !isfinite(f)) break;
            scale = is_op(n, "Div") ? scale / f : scale * f;
            others[n_others++] = p;
            x = n->inputs[1 - k];
        }
        int m1 = producer_of(c, x);
        if (m1 < 0 || !node_is(&g->nodes[m1], "MatMul", 2) || !only_node_uses(c, x, 1)) continue;
        int q = g->nodes[m1].inputs[0], kt = g->nodes[m1].inputs[1];
        if (!is_f32(c, q) || !is_f32(c, kt) || !is_f32(c, v) || type_of(c, q)->rank != r ||
            type_of(c, kt)->rank != r || type_of(c, v)->rank != r || !isfinite(scale) || fabs(scale) > FLT_MAX)
            continue;
        int drop, rewrite;
        int k = untransposed(c, kt, r, &drop, &rewrite);
        if (k < 0) continue;
        others[n_others++] = m1;
        others[n_others++] = i;
        if (drop >= 0) others[n_others++] = drop;
        int ins[4] = {q, k, v, mask};
        node_form f;
        mcp_status st2 = form_begin(c, &g->nodes[m2], "Attention", mask >= 0 ? 4 : 3, ins, false, 3, &f);
        if (st2 != MCP_STATUS_OK) return st2;
        mcp_attr *sa = form_attr(&f, "scale", MCP_ATTR_FLOAT);
        mcp_attr *qh = sa && r == 3 ? form_attr(&f, "q_num_heads", MCP_ATTR_INT) : NULL;
        mcp_attr *kh = qh ? form_attr(&f, "kv_num_heads", MCP_ATTR_INT) : NULL;
        if (!sa || (r == 3 && !kh)) {
            form_abort(&f, &g->nodes[m2]);
            return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        sa->f = (float)scale;
        if (qh) qh->i = kh->i = 1;
        if (rewrite >= 0) untranspose(c, rewrite);
        replace_pattern(c, m2, &f, others, n_others);
    }
    return MCP_STATUS_OK;
}

/* ---- dead nodes ---- */

static void pass_dead_nodes(pass_ctx *c)
{
    mcp_graph *g = c->g;
    /* Consumers follow producers, so one backward sweep reaches a fixpoint. */
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        if (c->removed[i]) continue;
        const mcp_node *n = &g->nodes[i];
        bool any = false, used = false;
        for (int k = 0; k < n->n_outputs; k++) {
            int v = n->outputs[k];
            if (v < 0) continue;
            any = true;
            if (c->uses[v] != 0) used = true;
        }
        /* A node without outputs is kept: it is odd, not ours to judge. */
        if (!any || used) continue;
        remove_node(c, i);
    }
}

/* ---- QDQ: DequantizeLinear -> Conv / MatMul -> [Relu] -> QuantizeLinear ---- */

/* A one-element constant of type dt (u8 / s8 zero points, f32 scales) or,
 * with `n` > 1, of n elements; NULL otherwise. */
static const mcp_tensor *qconst(const pass_ctx *c, int v, mcp_dtype dt, int64_t n)
{
    const mcp_tensor *t = init_of(c->g, v);
    if (!t || t->dtype != dt || t->format || t->rank > 1 || !t->data) return NULL;
    int64_t k = mcp_tensor_numel(t);
    return k == 1 || (n > 1 && k == n) ? t : NULL;
}

/* A DequantizeLinear (opset 10+) of an 8-bit value with one scale and zero
 * point, whose output is v: fills *q (the quantized value), *scale, *zp. */
static bool dq_of(const pass_ctx *c, int v, int *q, int *scale, int *zp)
{
    int p = producer_of(c, v);
    if (p < 0) return false;
    const mcp_node *n = &c->g->nodes[p];
    if (!is_op(n, "DequantizeLinear") || n->n_inputs != 3 || n->n_outputs != 1 || n->opset < 10) return false;
    mcp_dtype dt = type_of(c, n->inputs[0])->dtype;
    if (dt != MCP_DTYPE_UINT8 && dt != MCP_DTYPE_INT8) return false;
    if (!qconst(c, n->inputs[1], MCP_DTYPE_FLOAT, 0) || !qconst(c, n->inputs[2], dt, 0)) return false;
    *q = n->inputs[0], *scale = n->inputs[1], *zp = n->inputs[2];
    return true;
}

/* Weights as DequantizeLinear(w_q, scale, zero point) of an 8-bit
 * initializer, per tensor or per output channel (axis 0 of rank-r W). */
static bool dq_weights(const pass_ctx *c, int v, int *q, int *scale, int *zp)
{
    int p = producer_of(c, v);
    if (p < 0) return false;
    const mcp_node *n = &c->g->nodes[p];
    if (!is_op(n, "DequantizeLinear") || n->n_inputs != 3 || n->n_outputs != 1 || n->opset < 10) return false;
    const mcp_tensor *w = init_of(c->g, n->inputs[0]);
    if (!w || (w->dtype != MCP_DTYPE_UINT8 && w->dtype != MCP_DTYPE_INT8) || w->rank < 1) return false;
    const mcp_tensor *s = qconst(c, n->inputs[1], MCP_DTYPE_FLOAT, w->dims[0]);
    const mcp_tensor *z = qconst(c, n->inputs[2], w->dtype, w->dims[0]);
    if (!s || !z || mcp_tensor_numel(s) != mcp_tensor_numel(z)) return false;
    if (mcp_tensor_numel(s) > 1 && mcp_node_attr_int(n, "axis", 1) != 0) return false;
    *q = n->inputs[0], *scale = n->inputs[1], *zp = n->inputs[2];
    return true;
}

/* The bias of a quantized Conv as int32 in the accumulator's scale
 * x_scale * w_scale[c]: DequantizeLinear of an int32 initializer whose
 * scale is that (within float rounding) and zero point 0, used as is;
 * otherwise a float32 initializer, rounded into a new one. -1 when
 * neither. */
static int q_bias(pass_ctx *c, int v, const mcp_tensor *xs, const mcp_tensor *ws, int64_t m)
{
    float x_scale = ((const float *)xs->data)[0];
    int64_t nws = mcp_tensor_numel(ws);
    int p = producer_of(c, v);
    if (p >= 0) {
        const mcp_node *n = &c->g->nodes[p];
        if (!is_op(n, "DequantizeLinear") || n->n_inputs < 2 || n->n_outputs != 1) return -1;
        const mcp_tensor *b = init_of(c->g, n->inputs[0]);
        const mcp_tensor *bs = init_of(c->g, n->inputs[1]);
        const mcp_tensor *bz = n->n_inputs > 2 ? init_of(c->g, n->inputs[2]) : NULL;
        if (!b || b->dtype != MCP_DTYPE_INT32 || b->rank != 1 || b->dims[0] != m) return -1;
        if (!bs || bs->dtype != MCP_DTYPE_FLOAT || (mcp_tensor_numel(bs) != 1 && mcp_tensor_numel(bs) != m)) return -1;
        if (n->n_inputs > 2 && n->inputs[2] >= 0) {
            if (!bz || bz->dtype != MCP_DTYPE_INT32) return -1;
            for (int64_t k = 0; k < mcp_tensor_numel(bz); k++)
                if (((const int32_t *)bz->data)[k] != 0) return -1;
        }
        for (int64_t k = 0; k < m; k++) {
            double want = (double)x_scale * ((const float *)ws->data)[nws > 1 ? k : 0];
            double got = ((const float *)bs->data)[mcp_tensor_numel(bs) > 1 ? k : 0];
            if (fabs(got - want) > 1e-6 * fabs(want)) return -1;
        }
        return n->inputs[0];
    }
    const mcp_tensor *b = init_of(c->g, v);
    if (!b || b->dtype != MCP_DTYPE_FLOAT || b->rank != 1 || b->dims[0] != m) return -1;
    mcp_tensor t = {0};
    const int64_t dims[1] = {m};
    if (mcp_tensor_alloc(&t, MCP_DTYPE_INT32, 1, dims, NULL) != MCP_STATUS_OK) return -1;
    for (int64_t k = 0; k < m; k++) {
        double q = nearbyint((double)((const float *)b->data)[k] /
                             ((double)x_scale * ((const float *)ws->data)[nws > 1 ? k : 0]));
        if (!(q >= INT32_MIN && q <= INT32_MAX)) {
            mcp_tensor_release(&t);
            return -1;
        }
        ((int32_t *)t.data)[k] = (int32_t)q;
    }
    return add_initializer(c, "quantized_bias", &t);
}

/* Installs form f into node h (at `opset`), now writing `out`; drops the
 * nodes in tail. */
static mcp_status q_commit(pass_ctx *c, int h, node_form *f, int opset, const int *tail, int n_tail, int out)
{
    mcp_graph *g = c->g;
    for (int k = 0; k < n_tail; k++) drop_node(c, tail[k]);
    form_commit(c, h, f);
    mcp_node *n = &g->nodes[h];
    n->opset = opset;
    g->values[n->outputs[0]].producer = -1;
    n->outputs[0] = out;
    g->values[out].producer = h;
    return MCP_STATUS_OK;
}

/* Rewrites node h in place into `op_type` (default domain, the quantize
 * node's opset) reading `inputs` and writing `out`; drops the nodes in
 * tail (the Relu, the QuantizeLinear). */
static mcp_status q_rewrite(pass_ctx *c, int h, const char *op_type, int opset, const int *inputs, int n_inputs,
                            const int *tail, int n_tail, int out)
{
    mcp_graph *g = c->g;
    node_form f;
    mcp_status st = form_begin(c, &g->nodes[h], op_type, n_inputs, inputs, true, 0, &f);
    if (st != MCP_STATUS_OK) return st;
    char *domain = mcp_strdup("");
    if (!domain) {
        form_abort(&f, &g->nodes[h]);
        return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    mcp_free(f.domain);
    f.domain = domain;
    return q_commit(c, h, &f, opset, tail, n_tail, out);
}

/* QLinearAdd (internal) with `relu` set when a Relu is folded in. */
static mcp_status q_rewrite_add(pass_ctx *c, int h, const int *inputs, bool relu, const int *tail, int n_tail, int out)
{
    mcp_graph *g = c->g;
    node_form f;
    mcp_status st = form_begin(c, &g->nodes[h], "QLinearAdd", 8, inputs, false, 1, &f);
    if (st != MCP_STATUS_OK) return st;
    mcp_attr *a = form_attr(&f, "relu", MCP_ATTR_INT);
    if (!a) {
        form_abort(&f, &g->nodes[h]);
        return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    a->i = relu;
    return q_commit(c, h, &f, 1, tail, n_tail, out);
}


/* Node n as a clamp [lo, hi]: Relu, or Clip with constant bounds (its
 * attributes before opset 11); false for anything else. */
static bool activation_bounds(const pass_ctx *c, const mcp_node *n, float *lo, float *hi)
{
    if (node_is(n, "Relu", 1)) {
        *lo = 0.0f, *hi = INFINITY;
        return true;
    }
    if (!is_op(n, "Clip") || n->n_outputs != 1 || n->n_inputs < 1 || n->inputs[0] < 0) return false;
    if (n->opset < 11) {
        if (n->n_inputs != 1) return false;
        *lo = mcp_node_attr_float(n, "min", -FLT_MAX);
        *hi = mcp_node_attr_float(n, "max", FLT_MAX);
        return true;
    }
    return n->n_inputs <= 3 && clip_bound(c, n, 1, -INFINITY, lo) && clip_bound(c, n, 2, INFINITY, hi);
}

/* The QLinearConv node producing v (read only by the DequantizeLinear
 * whose output dq is, in turn, read only once), or -1. Fusing skips the
 * rounding and saturation of v; a zero point at the type's lowest value
 * says that saturation is a Relu (one the rewrite above may have dropped),
 * so such a convolution is left alone. */
static int qconv_feeding(const pass_ctx *c, int v, int dq)
{
    if (!only_node_uses(c, v, 1) || !only_node_uses(c, dq, 1)) return -1;
    int p = producer_of(c, v);
    if (p < 0) return -1;
    const mcp_node *n = &c->g->nodes[p];
    if (!is_op(n, "QLinearConv") || n->n_outputs != 1) return -1;
    const mcp_tensor *z = init_of(c->g, node_input(n, 7));
    if (!z || mcp_tensor_numel(z) != 1) return -1;
    int zp = z->dtype == MCP_DTYPE_UINT8 ? ((const uint8_t *)z->data)[0]
           : z->dtype == MCP_DTYPE_INT8  ? ((const int8_t *)z->data)[0]
                                          : -1000;
    int lowest = z->dtype == MCP_DTYPE_UINT8 ? 0 : -128;
    return zp != -1000 && zp != lowest ? p : -1;
}

/* QLinearConv h + (its output's DequantizeLinear dq_node) + Add (+ Relu) +
 * QuantizeLinear => QLinearConvAdd (internal) with S = the Add's other
 * operand. The fused node takes the QuantizeLinear's slot (the last), so S
 * is computed before it whatever the order of the graph. */
static mcp_status q_rewrite_conv_add(pass_ctx *c, int h, int dq_node, int s_q, int s_scale, int s_zp, int y_scale,
                                     int y_zp, bool relu, const int *tail, int n_tail, int out)
{
    mcp_graph *g = c->g;
    const mcp_node *conv = &g->nodes[h];
    int ins[12];
    for (int k = 0; k < 9; k++) ins[k] = node_input(conv, k);
    ins[6] = y_scale, ins[7] = y_zp, ins[9] = s_q, ins[10] = s_scale, ins[11] = s_zp;
    node_form f;
    mcp_status st = form_begin(c, conv, "QLinearConvAdd", 12, ins, true, 1, &f);
    if (st != MCP_STATUS_OK) return st;
    mcp_attr *a = form_attr(&f, "relu", MCP_ATTR_INT);
    if (!a) {
        form_abort(&f, conv);
        return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    a->i = relu;
    drop_node(c, dq_node);
    commit_in_last_slot(c, h, &f, tail, n_tail, out);
    return MCP_STATUS_OK;
}

/*
 * Quantized operators from QDQ graphs: a Conv or MatMul whose float
 * operands come from DequantizeLinear (weights an 8-bit initializer) and
 * whose result goes only to a QuantizeLinear (through a Relu when y's zero
 * point is the type's lowest value, where Relu changes nothing after
 * saturation) becomes QLinearConv / QLinearMatMul reading the quantized
 * values directly, so activations stay 8-bit between such operators.
 */
static mcp_status pass_qdq(pass_ctx *c, bool fuse_sums)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *q = &g->nodes[i];
        if (!is_op(q, "QuantizeLinear") || q->n_inputs != 3 || q->n_outputs != 1 || q->opset < 10) continue;
        int out = q->outputs[0], v = q->inputs[0];
        if (out < 0 || v < 0 || !only_node_uses(c, v, 1)) continue;
        mcp_dtype ydt = type_of(c, out)->dtype;
        const mcp_tensor *ys = qconst(c, q->inputs[1], MCP_DTYPE_FLOAT, 0);
        const mcp_tensor *yz = qconst(c, q->inputs[2], ydt, 0);
        if (!ys || !yz || (ydt != MCP_DTYPE_UINT8 && ydt != MCP_DTYPE_INT8)) continue;
        int tail[2] = {i, -1}, n_tail = 1;
        int h = producer_of(c, v);
        /* A MaxPool between: Q(MaxPool(t)) = MaxPool(Q(t)), Q being
         * monotonic, so the pooling runs on the 8-bit values. */
        int pool = -1;
        if (h >= 0 && is_op(&g->nodes[h], "MaxPool") && g->nodes[h].n_inputs == 1 && extra_outputs_unused(c, &g->nodes[h]) &&
            g->nodes[h].opset >= 12 && only_node_uses(c, g->nodes[h].inputs[0], 1)) {
            pool = h;
            h = producer_of(c, g->nodes[h].inputs[0]);
        }
        /* A Relu or Clip in between is free when y's quantized range lies
         * within its bounds: saturation then does all it did. The margin
         * of a quarter step keeps x / y_scale away from a rounding tie. */
        bool relu = false, relu_free = true;
        float lo, hi;
        if (h >= 0 && activation_bounds(c, &g->nodes[h], &lo, &hi)) {
            int zp = ydt == MCP_DTYPE_UINT8 ? ((const uint8_t *)yz->data)[0] : ((const int8_t *)yz->data)[0];
            double qmin = ydt == MCP_DTYPE_UINT8 ? 0 : -128, qmax = ydt == MCP_DTYPE_UINT8 ? 255 : 127;
            double sc = ((const float *)ys->data)[0];
            int r = g->nodes[h].inputs[0];
            if (!only_node_uses(c, r, 1)) continue;
            relu = is_op(&g->nodes[h], "Relu");
            relu_free = lo <= sc * (qmin - zp + 0.25) && hi >= sc * (qmax - zp - 0.25);
            /* QLinearAdd applies a Relu itself; a Clip it does not. */
            if (!relu && !relu_free) continue;
            tail[n_tail++] = h;
            h = producer_of(c, r);
        }
        if (h < 0) continue;
        const mcp_node *n = &g->nodes[h];
        if (n->n_outputs != 1) continue;
        int xq, xs, xz, wq, ws, wz;
        if (node_is(n, "Add", 2) && pool < 0) {
            int bq, bs, bz;
            if (!dq_of(c, n->inputs[0], &xq, &xs, &xz) || !dq_of(c, n->inputs[1], &bq, &bs, &bz)) continue;
            const mcp_type *ta = type_of(c, xq), *tb = type_of(c, bq);
            /* One shape (dims equal, or named alike): no broadcasting. */
            if (!same_shape(ta, tb)) continue;
            /* A QLinearConv feeding one operand takes the sum in. */
            for (int side = 0; fuse_sums && side < 2; side++) {
                int cq = side ? bq : xq, dq = n->inputs[side];
                int ch = qconv_feeding(c, cq, dq);
                if (ch < 0) continue;
                int sq = side ? xq : bq, ss = side ? xs : bs, sz = side ? xz : bz;
                mcp_status st = q_rewrite_conv_add(c, ch, producer_of(c, dq), sq, ss, sz, q->inputs[1], q->inputs[2],
                                                   relu, tail, n_tail, out);
                if (st != MCP_STATUS_OK) return st;
                /* The Add itself goes too. */
                drop_node(c, h);
                h = -1;
                break;
            }
            if (h < 0) continue;
            int ins[8] = {xq, xs, xz, bq, bs, bz, q->inputs[1], q->inputs[2]};
            mcp_status st = q_rewrite_add(c, h, ins, relu, tail, n_tail, out);
            if (st != MCP_STATUS_OK) return st;
            continue;
        }
        if (!relu_free) continue;
        if (is_op(n, "Conv") && n->n_inputs >= 2 && n->n_inputs <= 3) {
            if (!dq_of(c, n->inputs[0], &xq, &xs, &xz) || !dq_weights(c, n->inputs[1], &wq, &ws, &wz)) continue;
            const mcp_tensor *w = init_of(g, wq);
            if (w->rank < 3) continue;
            int b = -1;
            if (node_input(n, 2) >= 0) {
                b = q_bias(c, n->inputs[2], init_of(g, xs), init_of(g, ws), w->dims[0]);
                if (b < 0) continue;
                /* A new initializer value: the per-value counts grow. */
                if (b >= c->cap_values) {
                    mcp_status st = count_uses(c);
                    if (st != MCP_STATUS_OK) return st;
                }
            }
            int ins[9] = {xq, xs, xz, wq, ws, wz, q->inputs[1], q->inputs[2], b};
            int conv_out = out;
            if (pool >= 0) {
                /* The convolution writes a new 8-bit value the MaxPool
                 * reads; the MaxPool writes the QuantizeLinear's output. */
                conv_out = add_value(c, "quantized_conv", ydt, type_of(c, n->outputs[0]));
                if (conv_out < 0) return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
                mcp_status st = count_uses(c);
                if (st != MCP_STATUS_OK) return st;
            }
            mcp_status st = q_rewrite(c, h, "QLinearConv", q->opset, ins, b >= 0 ? 9 : 8, tail, n_tail, conv_out);
            if (st != MCP_STATUS_OK) return st;
            if (pool >= 0) {
                mcp_node *p = &g->nodes[pool];
                c->uses[p->inputs[0]]--;
                p->inputs[0] = conv_out;
                c->uses[conv_out]++;
                g->values[p->outputs[0]].producer = -1;
                p->outputs[0] = out;
                g->values[out].producer = pool;
            }
        } else if (is_op(n, "MatMul") && n->n_inputs == 2 && pool < 0) {
            if (!dq_of(c, n->inputs[0], &xq, &xs, &xz) || !dq_weights(c, n->inputs[1], &wq, &ws, &wz)) continue;
            const mcp_tensor *w = init_of(g, wq);
            /* Per-column scales of a 2-D B only (axis 1 of B [K, N]). */
            if (w->rank != 2 || mcp_tensor_numel(init_of(g, ws)) != 1) continue;
            int ins[8] = {xq, xs, xz, wq, ws, wz, q->inputs[1], q->inputs[2]};
            mcp_status st = q_rewrite(c, h, "QLinearMatMul", q->opset, ins, 8, tail, n_tail, out);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    return MCP_STATUS_OK;
}

/* ---- unused initializers ---- */

static void pass_unused_initializers(pass_ctx *c)
{
    mcp_graph *g = c->g;
    int kept = 0;
    for (int i = 0; i < g->n_initializers; i++) {
        int v = g->initializer_values[i];
        if (c->uses[v] == 0) {
            mcp_tensor_release(&g->initializers[i]);
            g->values[v].initializer = -1;
            continue;
        }
        g->initializers[kept] = g->initializers[i];
        g->initializer_values[kept] = v;
        g->values[v].initializer = kept;
        kept++;
    }
    g->n_initializers = kept;
}

/* ---- driver ---- */

void mcp_graph_remove_nodes(mcp_graph *g, const bool *drop)
{
    int kept = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (drop[i]) {
            node_release(&g->nodes[i]);
            continue;
        }
        if (kept != i) g->nodes[kept] = g->nodes[i];
        kept++;
    }
    g->n_nodes = kept;
    for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0) g->values[g->nodes[i].outputs[k]].producer = i;
}

/* ---- dynamically quantized MatMul tails ---- */

/* The node producing v when it is `op` (default domain) and v has one
 * reader; -1 otherwise. */
static int sole_producer(const pass_ctx *c, int v, const char *op)
{
    if (!only_node_uses(c, v, 1)) return -1;
    int p = producer_of(c, v);
    return p >= 0 && is_op(&c->g->nodes[p], op) && c->g->nodes[p].n_outputs == 1 ? p : -1;
}

/*
 * MatMulInteger -> Cast(float) -> Mul by Mul(A_scale, B_scale) [-> Add of a
 * bias initializer], the tail ONNX Runtime's dynamic quantizer writes after
 * each MatMul, becomes the internal MatMulIntegerScaled: the products are
 * scaled (and the bias added) where they are made, with no int32 tensor
 * between.
 */
static mcp_status pass_matmul_integer_tail(pass_ctx *c)
{
    mcp_graph *g = c->g;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) continue;
        const mcp_node *mul = &g->nodes[i];
        if (!node_is(mul, "Mul", 2)) continue;
        int cast = -1, smul = -1;
        for (int side = 0; side < 2 && cast < 0; side++) {
            int ci = sole_producer(c, mul->inputs[side], "Cast");
            int si = sole_producer(c, mul->inputs[1 - side], "Mul");
            if (ci < 0 || si < 0 || mcp_node_attr_int(&g->nodes[ci], "to", 0) != MCP_DTYPE_FLOAT) continue;
            cast = ci, smul = si;
        }
        if (cast < 0) continue;
        int mmi = sole_producer(c, g->nodes[cast].inputs[0], "MatMulInteger");
        const mcp_node *sm = &g->nodes[smul];
        if (mmi < 0 || sm->n_inputs != 2) continue;
        const mcp_node *mm = &g->nodes[mmi];
        if (mm->n_inputs < 2 || mm->n_inputs > 4) continue;
        /* A_scale is a float scalar; B_scale a float scalar initializer. */
        int a_s = -1, b_s = -1;
        for (int side = 0; side < 2; side++) {
            const mcp_tensor *t = init_of(g, sm->inputs[side]);
            if (t && t->dtype == MCP_DTYPE_FLOAT && mcp_tensor_numel(t) == 1 && b_s < 0) b_s = sm->inputs[side], a_s = sm->inputs[1 - side];
        }
        if (b_s < 0 || a_s < 0 || type_of(c, a_s)->dtype != MCP_DTYPE_FLOAT) continue;
        int out = mul->outputs[0], bias = -1, add = -1;
        int ai = sole_reader(c, out, i, "Add", 2);
        if (ai >= 0) {
            int other = other_input(&g->nodes[ai], out);
            const mcp_tensor *b = init_of(g, other);
            const mcp_type *bt = type_of(c, node_input(mm, 1));
            if (b && b->dtype == MCP_DTYPE_FLOAT && b->rank == 1 && bt->rank >= 1 && b->dims[0] == bt->dims[bt->rank - 1]) {
                bias = other;
                add = ai;
                out = g->nodes[ai].outputs[0];
            }
        }
        int ins[7] = {mm->inputs[0], mm->inputs[1], node_input(mm, 2), node_input(mm, 3), a_s, b_s, bias};
        int tail[4] = {cast, smul, i, add}, n_tail = add >= 0 ? 4 : 3;
        node_form f;
        mcp_status st = form_begin(c, mm, "MatMulIntegerScaled", bias >= 0 ? 7 : 6, ins, false, 0, &f);
        if (st != MCP_STATUS_OK) return st;
        st = q_commit(c, mmi, &f, 1, tail, n_tail, out);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* Sets up c for g; on failure nothing is left to free but c->removed. */
static mcp_status pass_begin(pass_ctx *c, mcp_graph *g, mcp_err *err)
{
    memset(c, 0, sizeof *c);
    c->g = g;
    c->err = err;
    c->removed = mcp_calloc((size_t)g->n_nodes, sizeof *c->removed);
    if (!c->removed) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    return count_uses(c);
}

static void pass_end(pass_ctx *c)
{
    mcp_graph_remove_nodes(c->g, c->removed);
    mcp_free(c->removed);
    mcp_free(c->uses);
    mcp_free(c->is_output);
    mcp_free(c->captured);
}

mcp_status mcp_graph_fuse_quantized(mcp_graph *g, bool fuse_sums, mcp_err *err)
{
    if (!g || g->n_nodes == 0) return MCP_STATUS_OK;
    pass_ctx c;
    mcp_status st = pass_begin(&c, g, err);
    if (st == MCP_STATUS_OK) st = pass_qdq(&c, fuse_sums);
    if (st == MCP_STATUS_OK) st = pass_matmul_integer_tail(&c);
    if (st == MCP_STATUS_OK) pass_dead_nodes(&c);
    if (st == MCP_STATUS_OK) pass_unused_initializers(&c);
    pass_end(&c);
    return st;
}

mcp_status mcp_graph_optimize(mcp_graph *g, mcp_err *err)
{
    if (!g || g->n_nodes == 0) return MCP_STATUS_OK;
    pass_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.err = err;
    c.removed = mcp_calloc((size_t)g->n_nodes, sizeof *c.removed);
    if (!c.removed) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = count_uses(&c);
    if (st == MCP_STATUS_OK) pass_identity(&c);
    if (st == MCP_STATUS_OK) st = pass_fold_bn(&c);
    if (st == MCP_STATUS_OK) st = pass_matmul_add(&c);
    /* Gelu first: the fusions below take it as an activation. */
    if (st == MCP_STATUS_OK) st = pass_gelu(&c);
    if (st == MCP_STATUS_OK) st = pass_layernorm(&c);
    if (st == MCP_STATUS_OK) st = pass_attention(&c);
    if (st == MCP_STATUS_OK) st = pass_fuse_conv(&c);
    if (st == MCP_STATUS_OK) st = pass_fuse_gemm(&c);
    if (st == MCP_STATUS_OK) st = pass_fuse_matmul(&c);
    if (st == MCP_STATUS_OK) pass_dead_nodes(&c);
    if (st == MCP_STATUS_OK) pass_unused_initializers(&c);
    /* Compaction runs on failure too: every rewrite above leaves the graph
     * consistent, so a half-optimized graph is still a valid graph. */
    mcp_graph_remove_nodes(c.g, c.removed);
    mcp_free(c.removed);
    mcp_free(c.uses);
    mcp_free(c.is_output);
    mcp_free(c.captured);
    return st;
}
