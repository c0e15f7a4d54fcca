/*
 * Constant folding at load: nodes whose inputs are all initializers run once
 * on the reference kernels and become initializers (see fold.h).
 *
 * Folded nodes are taken out of the node array in one compaction at the
 * end; value indices never change, so graph outputs, subgraph captures and
 * the values' names stay as they were.
 */
#include <stdint.h>
#include <string.h>

#include "engine/fold.h"
#include "ops/ops.h"

/* Outputs up to this size always fold; larger ones only when they are no
 * larger than the inputs the fold frees (see fold.h). */
#define FOLD_SMALL_BYTES ((size_t)64 * 1024)

/* Ops never folded: random ones, Dropout (random in training mode), and
 * Identity, which the graph passes remove by rewiring its readers instead
 * of copying the tensor. */
static bool is_skipped_op(const mcp_node *n)
{
    static const char *const ops[] = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                      "Bernoulli", "Multinomial", "Dropout", "Identity"};
    if (n->domain[0] != '\0') return false;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(n->op_type, ops[i]) == 0) return true;
    return false;
}

/* DequantizeLinear of constants folds whatever its size: quantized
 * weights that no quantized operator took (mcp_graph_fuse_quantized runs
 * first) are needed in float by a float operator, and computing them on
 * every run would cost that memory anyway, and the time. */
static bool is_dequantize(const mcp_node *n)
{
    return n->domain[0] == '\0' && strcmp(n->op_type, "DequantizeLinear") == 0;
}

static bool has_subgraph(const mcp_node *n)
{
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].g || n->attrs[a].graphs) return true;
    return false;
}

/* True when every input of n is an initializer (or omitted). */
static bool inputs_constant(const mcp_graph *g, const mcp_node *n)
{
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v >= 0 && (g->values[v].initializer < 0 || g->values[v].initializer >= g->n_initializers)) return false;
    }
    return true;
}

/* Bytes of the input initializers nothing but n reads: folding n lets the
 * graph passes drop them. uses[v] counts every read of v (node inputs,
 * graph outputs, subgraph captures). */
static size_t freed_bytes(const mcp_graph *g, const mcp_node *n, const int *uses)
{
    size_t bytes = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k], reads = 0;
        if (v < 0) continue;
        bool first = true;
        for (int j = 0; j < n->n_inputs; j++) {
            if (n->inputs[j] != v) continue;
            if (j < k) first = false;
            reads++;
        }
        if (first && uses[v] == reads) bytes += mcp_tensor_nbytes(&g->initializers[g->values[v].initializer]);
    }
    return bytes;
}

/* Counts the reads of every value of g (see freed_bytes). */
static void count_uses(const mcp_graph *g, int *uses)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const mcp_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) uses[n->inputs[k]]++;
        for (int a = 0; a < n->n_attrs; a++) {
            const mcp_attr *at = &n->attrs[a];
            int64_t count = at->graphs ? at->count : 0;
            for (int64_t j = -1; j < count; j++) {
                const mcp_graph *sub = j < 0 ? at->g : at->graphs[j];
                for (int v = 0; sub && v < sub->n_values; v++)
                    if (sub->values[v].outer >= 0 && sub->values[v].outer < g->n_values) uses[sub->values[v].outer]++;
            }
        }
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] >= 0) uses[g->outputs[i]]++;
}

/* Bytes of n's outputs by their static types (saturating at SIZE_MAX);
 * false when one is not a tensor, and *known false when a size is not
 * static. */
static bool outputs_static_size(const mcp_graph *g, const mcp_node *n, size_t *bytes, bool *known)
{
    *bytes = 0;
    *known = true;
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (v < 0) continue;
        const mcp_type *t = &g->values[v].type;
        if (t->kind != MCP_VALUE_TENSOR || t->is_optional) return false;
        if (t->rank < 0 || t->dtype == MCP_DTYPE_UNDEFINED) {
            *known = false;
            continue;
        }
        /* Packed 4- and 2-bit types: a byte an element bounds them. */
        size_t size = t->dtype == MCP_DTYPE_STRING      ? sizeof(char *)
                      : mcp_dtype_is_packed(t->dtype) ? 1
                                                      : (size_t)mcp_dtype_size(t->dtype);
        for (int d = 0; *known && d < t->rank; d++) {
            if (t->dims[d] < 0) *known = false;
            else if (t->dims[d] > 0 && size > SIZE_MAX / (size_t)t->dims[d]) size = SIZE_MAX;
            else size *= (size_t)t->dims[d];
        }
        *bytes = size > SIZE_MAX - *bytes ? SIZE_MAX : *bytes + size;
    }
    return true;
}

/* Room for `extra` more initializers, so that installing them cannot fail. */
static mcp_status reserve_initializers(mcp_graph *g, int extra, mcp_err *err)
{
    size_t n = (size_t)g->n_initializers + (size_t)extra;
    mcp_tensor *inits = mcp_realloc(g->initializers, n * sizeof *inits);
    if (inits) g->initializers = inits;
    int *ivals = mcp_realloc(g->initializer_values, n * sizeof *ivals);
    if (ivals) g->initializer_values = ivals;
    if (!inits || !ivals) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    return MCP_STATUS_OK;
}

/* Makes value v an initializer holding *t (moved: *t is reset), in room
 * made by reserve_initializers. */
static void install_initializer(mcp_graph *g, int v, mcp_tensor *t)
{
    g->initializers[g->n_initializers] = *t;
    g->initializer_values[g->n_initializers] = v;
    mcp_graph_value *gv = &g->values[v];
    gv->initializer = g->n_initializers++;
    gv->producer = -1;
    mcp_type *ty = &gv->type;
    for (int d = 0; d < MCP_MAX_RANK; d++) {
        mcp_free(ty->dim_params[d]);
        ty->dim_params[d] = NULL;
    }
    ty->kind = MCP_VALUE_TENSOR;
    ty->is_optional = false;
    ty->dtype = t->dtype;
    ty->rank = t->rank;
    memset(ty->dims, 0, sizeof ty->dims);
    memcpy(ty->dims, t->dims, (size_t)t->rank * sizeof t->dims[0]);
    memset(t, 0, sizeof *t);
}

/* A Constant node with a tensor `value`: the tensor moves from the
 * attribute into the initializer, without a copy. */
static mcp_status fold_constant_value(mcp_graph *g, mcp_node *n, bool *folded, mcp_err *err)
{
    mcp_attr *a = NULL;
    for (int k = 0; k < n->n_attrs; k++)
        if (strcmp(n->attrs[k].name, "value") == 0 && n->attrs[k].type == MCP_ATTR_TENSOR) a = &n->attrs[k];
    *folded = false;
    if (!a || n->n_outputs != 1 || n->outputs[0] < 0 || a->t.format) return MCP_STATUS_OK;
    if (!a->t.owns_data && a->t.data) {
        mcp_tensor copy;
        memset(&copy, 0, sizeof copy);
        mcp_status st = mcp_tensor_copy(&copy, &a->t, err);
        if (st != MCP_STATUS_OK) return st;
        a->t = copy;
    }
    mcp_status st = reserve_initializers(g, 1, err);
    if (st != MCP_STATUS_OK) return st;
    install_initializer(g, n->outputs[0], &a->t);
    *folded = true;
    return MCP_STATUS_OK;
}

/*
 * Runs node n on the reference kernels and, when every output is a plain
 * tensor within the size bound, makes its outputs initializers; *folded
 * tells whether it did. A node that cannot run is left for run time, where
 * it fails with the executor's full message; only running out of memory
 * here is an error.
 */
/* What folding offers the kernels it runs: scratch buffers that live for
 * the whole pass. There is no memory plan (outputs take the heap) and no
 * subgraph runs (nodes with subgraphs are not folded). */
typedef struct fold_host {
    void *buf[MCP_KSCRATCH_SLOTS];
    size_t cap[MCP_KSCRATCH_SLOTS];
} fold_host;

static void *fold_scratch(void *self, int slot, size_t nbytes)
{
    fold_host *h = self;
    if (nbytes > h->cap[slot]) {
        void *p = mcp_realloc(h->buf[slot], nbytes);
        if (!p) return NULL;
        h->buf[slot] = p;
        h->cap[slot] = nbytes;
    }
    return h->buf[slot];
}

static const mcp_kernel_host fold_kernel_host = {.scratch = fold_scratch};

static mcp_status fold_node(mcp_graph *g, mcp_node *n, fold_host *host, size_t free_bytes, bool *folded,
                            mcp_err *err)
{
    *folded = false;
    char msg[256];
    mcp_err scratch = {msg, sizeof msg};
    const mcp_kernel_def *k = NULL;
    if (mcp_ops_resolve(n, g, "ref", &k, NULL, &scratch) != MCP_STATUS_OK) return MCP_STATUS_OK;
    void *state = NULL;
    if (k->prepare && k->prepare(n, g, &state, &scratch) != MCP_STATUS_OK) return MCP_STATUS_OK;

    mcp_value **ins = mcp_calloc((size_t)n->n_inputs + 1, sizeof *ins);
    mcp_value **outs = mcp_calloc((size_t)n->n_outputs + 1, sizeof *outs);
    bool oom = !ins || !outs;
    for (int i = 0; !oom && i < n->n_inputs; i++) {
        int v = n->inputs[i];
        if (v < 0) continue;
        ins[i] = mcp_value_new();
        if (!ins[i]) {
            oom = true;
            break;
        }
        /* A borrowed view of the initializer, as the executor makes. */
        ins[i]->kind = MCP_VALUE_TENSOR;
        ins[i]->tensor = g->initializers[g->values[v].initializer];
        ins[i]->tensor.owns_data = false;
    }
    for (int i = 0; !oom && i < n->n_outputs; i++) oom = !(outs[i] = mcp_value_new());
    mcp_status st = MCP_STATUS_OK;
    if (oom) {
        st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "node '%s' (%s): out of memory folding constants", n->name,
                         n->op_type);
    } else {
        mcp_kernel_ctx ctx = {
            .node = n,
            .opset = n->opset,
            .n_inputs = n->n_inputs,
            .inputs = ins,
            .n_outputs = n->n_outputs,
            .outputs = outs,
            .state = state,
            .err = &scratch,
            .host = &fold_kernel_host,
            .host_self = host,
            .threads = 1,
        };
        bool ok = k->run(&ctx) == MCP_STATUS_OK;
        size_t out_bytes = 0;
        for (int i = 0; ok && i < n->n_outputs; i++) {
            if (n->outputs[i] < 0) continue;
            const mcp_value *o = outs[i];
            ok = o->kind == MCP_VALUE_TENSOR && !o->tensor.format;
            if (ok) out_bytes += mcp_tensor_nbytes(&o->tensor);
        }
        ok = ok && (out_bytes <= FOLD_SMALL_BYTES || out_bytes <= free_bytes);
        /* Initializers own their data: they outlive the inputs a kernel
         * may have returned a view of. */
        for (int i = 0; ok && st == MCP_STATUS_OK && i < n->n_outputs; i++) {
            mcp_tensor *t = &outs[i]->tensor;
            if (n->outputs[i] < 0 || t->owns_data || !t->data) continue;
            mcp_tensor copy;
            memset(&copy, 0, sizeof copy);
            st = mcp_tensor_copy(&copy, t, err);
            if (st == MCP_STATUS_OK) *t = copy;
        }
        if (ok && st == MCP_STATUS_OK) st = reserve_initializers(g, n->n_outputs, err);
        if (ok && st == MCP_STATUS_OK) {
            for (int i = 0; i < n->n_outputs; i++)
                if (n->outputs[i] >= 0) install_initializer(g, n->outputs[i], &outs[i]->tensor);
            *folded = true;
        }
    }
    if (k->release && state) k->release(state);
    for (int i = 0; ins && i < n->n_inputs; i++) mcp_value_free(ins[i]);
    for (int i = 0; outs && i < n->n_outputs; i++) mcp_value_free(outs[i]);
    mcp_free(ins);
    mcp_free(outs);
    return st;
}

mcp_status mcp__fold_constants(mcp_graph *g, mcp_err *err)
{
    if (!g || g->n_nodes == 0) return MCP_STATUS_OK;
    bool *folded = mcp_calloc((size_t)g->n_nodes, sizeof *folded);
    int *uses = mcp_calloc((size_t)g->n_values + 1, sizeof *uses);
    if (!folded || !uses) {
        mcp_free(folded);
        mcp_free(uses);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    count_uses(g, uses);
    fold_host host = {0};
    mcp_status st = MCP_STATUS_OK;
    for (int i = 0; st == MCP_STATUS_OK && i < g->n_nodes; i++) {
        mcp_node *n = &g->nodes[i];
        if (n->n_outputs < 1 || has_subgraph(n) || is_skipped_op(n) || !inputs_constant(g, n)) continue;
        size_t free_bytes = freed_bytes(g, n, uses), out_bytes;
        bool known;
        if (!outputs_static_size(g, n, &out_bytes, &known)) continue;
        if (n->domain[0] == '\0' && strcmp(n->op_type, "Constant") == 0) {
            st = fold_constant_value(g, n, &folded[i], err);
            if (st != MCP_STATUS_OK || folded[i]) continue;
            /* value_float, value_ints, ...: the kernel builds the tensor
             * from the attribute, which goes with the node. */
            free_bytes = SIZE_MAX;
        } else if (is_dequantize(n)) {
            free_bytes = SIZE_MAX;
        } else if (known && out_bytes > FOLD_SMALL_BYTES && out_bytes > free_bytes) {
            continue;
        }
        st = fold_node(g, n, &host, free_bytes, &folded[i], err);
        for (int k = 0; folded[i] && k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) uses[n->inputs[k]]--;
    }
    for (int k = 0; k < MCP_KSCRATCH_SLOTS; k++) mcp_free(host.buf[k]);
    mcp_graph_remove_nodes(g, folded);
    mcp_free(folded);
    mcp_free(uses);
    return st;
}
