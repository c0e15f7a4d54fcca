/*
 * Backend-independent graph passes (mcp_graph_optimize): Identity and
 * inference Dropout elimination, BatchNormalization folded into Conv,
 * MatMul + bias Add rewritten as Gemm, dead-node removal and unused
 * initializer removal.
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
 * captures stay valid. Producers are recomputed after compaction.
 */
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
    for (int i = 0; i < n->n_attrs; i++) {
        mcp_attr *a = &n->attrs[i];
        mcp_free(a->name);
        mcp_free(a->s);
        mcp_tensor_release(&a->t);
        mcp_graph_free(a->g);
        mcp_free(a->floats);
        mcp_free(a->ints);
        if (a->strings)
            for (int64_t k = 0; k < a->count; k++) mcp_free(a->strings[k]);
        mcp_free(a->strings);
        if (a->tensors)
            for (int64_t k = 0; k < a->count; k++) mcp_tensor_release(&a->tensors[k]);
        mcp_free(a->tensors);
        if (a->graphs)
            for (int64_t k = 0; k < a->count; k++) mcp_graph_free(a->graphs[k]);
        mcp_free(a->graphs);
    }
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

/* ---- pass 1: Identity and inference Dropout ---- */

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

/* ---- pass 2: BatchNormalization folded into Conv ---- */

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

/* ---- pass 3: MatMul + Add(bias) -> Gemm ---- */

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
    }
    return MCP_STATUS_OK;
}

/* ---- pass 4: dead nodes ---- */

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

/* ---- pass 5: unused initializers ---- */

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

static void compact_nodes(pass_ctx *c)
{
    mcp_graph *g = c->g;
    int kept = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->removed[i]) {
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
    if (st == MCP_STATUS_OK) pass_dead_nodes(&c);
    if (st == MCP_STATUS_OK) pass_unused_initializers(&c);
    /* Compaction runs on failure too: every rewrite above leaves the graph
     * consistent, so a half-optimized graph is still a valid graph. */
    compact_nodes(&c);
    mcp_free(c.removed);
    mcp_free(c.uses);
    mcp_free(c.is_output);
    mcp_free(c.captured);
    return st;
}
