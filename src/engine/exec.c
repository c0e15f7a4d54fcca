/*
 * The executor: runs a graph's nodes in topological order in a frame that
 * holds this run's values. A frame borrows graph inputs from its caller and
 * captured outer values from its parent frame; everything else it owns.
 *
 * Top-level runs use a run context (mcp__runctx) taken from the session's
 * pool: it keeps the frame's arrays and one mcp_value slot per graph value
 * between runs, scratch buffers for kernels, and memory plans. The first
 * run with a given input-shape signature records the bytes every node output
 * takes; from those sizes and the value lifetimes a plan assigns each
 * intermediate tensor an offset in one arena (greedy by size, best fit among
 * the gaps of values alive at the same time). Later runs with that signature
 * place node outputs in the arena, so a steady-state run makes no heap
 * allocations of its own. Graph outputs are copied out of the arena: into
 * the caller's output values when they already hold tensors of the right
 * dtype and shape (so a caller reusing its outputs allocates nothing
 * either), else into new tensors. A kernel asking for more than its planned
 * size falls back to the heap. Subgraph frames (Loop, If, Scan bodies)
 * allocate as they go.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/tune.h"

#define RC_PLANS 4        /* input-shape signatures planned per context */

#define RC_DISCARD 16     /* slots for omitted outputs of one node */
#define ARENA_ALIGN 64

typedef struct rc_plan {
    bool valid;
    int64_t *sig; /* input signature: for each input, dtype, rank, dims */
    int sig_len;
    int64_t *off;  /* per value (2 * n_values: then plain shadows); -1 unplanned */
    size_t *bytes; /* planned capacity per entry */
    size_t arena_bytes;
    uint64_t used; /* tick of last use, for replacement */
    mcp__tune tune;
} rc_plan;

struct mcp__runctx {
    mcp__runctx *next; /* the session's free list */
    const mcp_graph *graph;
    int n_values;
    mcp_value *slots; /* n_values + RC_DISCARD */
    mcp_value **vals;
    bool *owned;
    size_t *rec;  /* bytes recorded this run per entry (2 * n_values) */
    int *rec_birth; /* node that allocated each shadow entry */
    bool *rec_concat; /* per node: its output was its inputs one after another */
    int64_t *sig;     /* the running inputs' signature (room for the longest) */
    rc_plan plans[RC_PLANS];
    rc_plan *cur; /* the plan this run follows, or NULL while recording */
    uint64_t tick;
    uint8_t *arena;
    size_t arena_cap;
    void *scratch[MCP_KSCRATCH_SLOTS];
    size_t scratch_cap[MCP_KSCRATCH_SLOTS];
    int threads; /* the running run's budget (the session's, or the tuner's) */
};

typedef struct mcp_exec mcp_exec;

/* One graph's frame: a run of the top graph, or of a subgraph (whose
 * parent frame holds the values it captures). */
struct mcp_exec {
    const mcp_session *session;
    const mcp_graph *graph;
    mcp_exec *parent;
    mcp__runctx *rc;   /* top-level frames only */
    mcp__runctx *root; /* the run's context, for scratch (any frame) */
    int node;          /* index of the running node */
    mcp_value **vals;
    bool *owned;
    mcp_err *err;
};

/* ---- run contexts ---- */

static mcp__runctx *runctx_new(const mcp_graph *g)
{
    mcp__runctx *rc = mcp_calloc(1, sizeof *rc);
    if (!rc) return NULL;
    rc->graph = g;
    rc->n_values = g->n_values;
    size_t n = (size_t)g->n_values;
    rc->slots = mcp_calloc(n + RC_DISCARD, sizeof *rc->slots);
    rc->vals = mcp_calloc(n + 1, sizeof *rc->vals);
    rc->owned = mcp_calloc(n + 1, sizeof *rc->owned);
    rc->rec = mcp_calloc(2 * n + 1, sizeof *rc->rec);
    rc->rec_birth = mcp_calloc(n + 1, sizeof *rc->rec_birth);
    rc->rec_concat = mcp_calloc((size_t)g->n_nodes + 1, sizeof *rc->rec_concat);
    rc->sig = mcp_calloc((size_t)g->n_inputs * (2 + MCP_MAX_RANK) + 1, sizeof *rc->sig);
    if (!rc->slots || !rc->vals || !rc->owned || !rc->rec || !rc->rec_birth || !rc->rec_concat || !rc->sig) {
        mcp__runctx_free(rc);
        return NULL;
    }
    return rc;
}

static void plan_clear(rc_plan *p)
{
    mcp_free(p->sig);
    mcp_free(p->off);
    mcp_free(p->bytes);
    memset(p, 0, sizeof *p);
}

void mcp__runctx_free(mcp__runctx *rc)
{
    if (!rc) return;
    for (int i = 0; i < RC_PLANS; i++) plan_clear(&rc->plans[i]);
    mcp_free(rc->slots);
    mcp_free(rc->vals);
    mcp_free(rc->owned);
    mcp_free(rc->rec);
    mcp_free(rc->rec_birth);
    mcp_free(rc->rec_concat);
    mcp_free(rc->sig);
    mcp_free(rc->arena);
    for (int i = 0; i < MCP_KSCRATCH_SLOTS; i++) mcp_free(rc->scratch[i]);
    mcp_free(rc);
}

size_t mcp__runctx_arena_bytes(const mcp__runctx *rc)
{
    const rc_plan *best = NULL;
    for (int i = 0; i < RC_PLANS; i++)
        if (rc->plans[i].valid && (!best || rc->plans[i].used > best->used)) best = &rc->plans[i];
    return best ? best->arena_bytes : 0;
}

mcp__runctx *mcp__runctx_take(mcp_session *s, bool make)
{
    pthread_mutex_lock(&s->ctx_lock);
    mcp__runctx *rc = s->idle;
    if (rc) s->idle = rc->next;
    pthread_mutex_unlock(&s->ctx_lock);
    if (!rc && make) rc = runctx_new(s->graph);
    return rc;
}

void mcp__runctx_give(mcp_session *s, mcp__runctx *rc)
{
    pthread_mutex_lock(&s->ctx_lock);
    rc->next = s->idle;
    s->idle = rc;
    pthread_mutex_unlock(&s->ctx_lock);
}

/* Writes the signature of the inputs into sig (NULL: length only). */
static int signature(const mcp_graph *g, mcp_value *const *inputs, int64_t *sig)
{
    int n = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const mcp_value *v = inputs[i];
        if (sig) {
            sig[n] = v->kind * 1000 + (v->kind == MCP_VALUE_TENSOR ? (int64_t)v->tensor.dtype : 0);
            sig[n + 1] = v->kind == MCP_VALUE_TENSOR ? v->tensor.rank : -1;
        }
        n += 2;
        if (v->kind != MCP_VALUE_TENSOR) continue;
        for (int d = 0; d < v->tensor.rank; d++, n++)
            if (sig) sig[n] = v->tensor.dims[d];
    }
    return n;
}

static rc_plan *find_plan(mcp__runctx *rc, mcp_value *const *inputs)
{
    int len = signature(rc->graph, inputs, NULL);
    int64_t *sig = rc->sig;
    signature(rc->graph, inputs, sig);
    for (int i = 0; i < RC_PLANS; i++) {
        rc_plan *p = &rc->plans[i];
        if (p->valid && p->sig_len == len && memcmp(p->sig, sig, sizeof *sig * (size_t)len) == 0) return p;
    }
    return NULL;
}

typedef struct plan_item {
    int idx;
    int birth, death;
    size_t bytes;
    int64_t off;
} plan_item;

static int by_size_desc(const void *a, const void *b)
{
    const plan_item *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->idx - y->idx;
}

static int by_offset(const void *a, const void *b)
{
    const plan_item *const *x = a, *const *y = b;
    return (*x)->off < (*y)->off ? -1 : (*x)->off > (*y)->off;
}

static size_t align_up(size_t n) { return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

/*
 * In-place execution: where a node's kernel may write output 0 over input
 * j (mcp_kernel_inplace_inputs), the input dies at that node, and both
 * take the same recorded bytes and dtype, the output joins the input's
 * group: one arena block whose lifetime spans both. Chains (Reshape after
 * Add after ...) share one block.
 *
 * Concat in place: where the recording run found a Concat's output to be
 * its inputs' bytes one after another (mcp_knote_concat_inplace), each
 * input's group moves into the output's block at that input's range, so the
 * producers write there and the Concat copies nothing.
 *
 * group[v] is v's group root and suboff[v] its byte offset in the root's
 * block; the root's birth and death become the group's.
 */
static void alias_concat(const mcp__runctx *rc, int i, int *birth, int *death, int *group, int64_t *suboff)
{
    const mcp_graph *g = rc->graph;
    const mcp_node *n = &g->nodes[i];
    int nv = rc->n_values;
    int o = n->n_outputs > 0 ? n->outputs[0] : -1;
    if (o < 0 || !rc->rec[o] || rc->rec[o + nv] || group[o] != o || birth[o] != i) return;
    size_t total = 0;
    for (int j = 0; j < n->n_inputs; j++) {
        int in = n->inputs[j];
        if (in < 0 || !rc->rec[in] || rc->rec[in + nv] || total % ARENA_ALIGN) return;
        int root = group[in];
        if (root == o || birth[root] < 0 || suboff[in] != 0 || rc->rec[root] != rc->rec[in]) return;
        for (int k = 0; k < j; k++)
            if (group[n->inputs[k]] == root) return;
        total += rc->rec[in];
    }
    if (total != rc->rec[o]) return;
    int64_t at = 0;
    for (int j = 0; j < n->n_inputs; j++) {
        int in = n->inputs[j], root = group[in];
        if (birth[root] < birth[o]) birth[o] = birth[root];
        if (death[root] > death[o]) death[o] = death[root];
        for (int v = 0; v < 2 * nv; v++)
            if (group[v] == root) {
                group[v] = o;
                suboff[v] += at;
            }
        at += (int64_t)rc->rec[in];
    }
}

static void alias_inplace(const mcp__runctx *rc, int *birth, int *death, int *group, int64_t *suboff)
{
    const mcp_graph *g = rc->graph;
    int nv = rc->n_values;
    for (int i = 0; i < g->n_nodes; i++) {
        const mcp_node *n = &g->nodes[i];
        if (rc->rec_concat[i]) {
            alias_concat(rc, i, birth, death, group, suboff);
            continue;
        }
        unsigned mask = n->n_outputs > 0 ? mcp_kernel_inplace_inputs(n) : 0;
        int o = mask ? n->outputs[0] : -1;
        if (o < 0 || !rc->rec[o] || birth[o] != i) continue;
        for (int j = 0; j < n->n_inputs && j < 32; j++) {
            int in = n->inputs[j];
            if (!(mask & (1u << j)) || in < 0 || rc->rec[in] != rc->rec[o] || rc->rec[in + nv]) continue;
            int root = group[in];
            if (birth[root] < 0 || death[root] != i || death[in] != i) continue;
            if (g->values[in].type.dtype != g->values[o].type.dtype) continue;
            bool once = true;
            for (int k = 0; k < n->n_inputs; k++) once &= k == j || n->inputs[k] != in;
            if (!once) continue;
            group[o] = root;
            suboff[o] = suboff[in];
            death[root] = death[o];
            break;
        }
    }
}

/*
 * Builds a plan from this run's recorded sizes and installs it (replacing
 * the least recently used one). Failure to plan is not an error: the next
 * run records again.
 */
static void make_plan(mcp__runctx *rc, mcp_value *const *inputs)
{
    const mcp_graph *g = rc->graph;
    int nv = rc->n_values;
    int *birth = mcp_calloc((size_t)2 * nv + 1, sizeof *birth);
    int *death = mcp_calloc((size_t)2 * nv + 1, sizeof *death);
    int *group = mcp_calloc((size_t)2 * nv + 1, sizeof *group);
    int64_t *suboff = mcp_calloc((size_t)2 * nv + 1, sizeof *suboff);
    plan_item *items = mcp_calloc((size_t)2 * nv + 1, sizeof *items);
    plan_item **live = mcp_calloc((size_t)2 * nv + 1, sizeof *live);
    int len = signature(g, inputs, NULL);
    int64_t *sig = mcp_calloc((size_t)len + 1, sizeof *sig);
    int64_t *off = mcp_malloc(sizeof *off * (size_t)(2 * nv + 1));
    size_t *bytes = mcp_calloc((size_t)2 * nv + 1, sizeof *bytes);
    if (!birth || !death || !group || !suboff || !items || !live || !sig || !off || !bytes) goto done;
    signature(g, inputs, sig);
    for (int v = 0; v < 2 * nv; v++) {
        birth[v] = -1;
        death[v] = g->n_nodes;
        off[v] = -1;
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_outputs; k++)
            if (g->nodes[i].outputs[k] >= 0) birth[g->nodes[i].outputs[k]] = i;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = g->free_start[i]; k < g->free_start[i + 1]; k++) {
            death[g->free_vals[k]] = i;
            death[g->free_vals[k] + nv] = i;
        }
    for (int v = 0; v < nv; v++) birth[v + nv] = rc->rec[v + nv] ? rc->rec_birth[v] : -1;
    for (int v = 0; v < 2 * nv; v++) group[v] = v;
    alias_inplace(rc, birth, death, group, suboff);
    int n = 0;
    for (int v = 0; v < 2 * nv; v++) {
        if (!rc->rec[v] || birth[v] < 0 || group[v] != v) continue;
        items[n++] = (plan_item){.idx = v, .birth = birth[v], .death = death[v], .bytes = align_up(rc->rec[v])};
    }
    qsort(items, (size_t)n, sizeof *items, by_size_desc);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        int nl = 0;
        for (int j = 0; j < i; j++)
            if (items[j].birth <= items[i].death && items[i].birth <= items[j].death) live[nl++] = &items[j];
        qsort(live, (size_t)nl, sizeof *live, by_offset);
        /* Best fit: the smallest gap between overlapping values that holds it. */
        int64_t best = -1, best_gap = -1, at = 0;
        for (int j = 0; j <= nl; j++) {
            int64_t end = j < nl ? live[j]->off : INT64_MAX;
            int64_t gap = end - at;
            if (gap >= (int64_t)items[i].bytes && (best_gap < 0 || gap < best_gap)) {
                best = at;
                best_gap = gap;
            }
            if (j < nl && live[j]->off + (int64_t)live[j]->bytes > at) at = live[j]->off + (int64_t)live[j]->bytes;
        }
        items[i].off = best;
        off[items[i].idx] = best;
        bytes[items[i].idx] = items[i].bytes;
        if ((size_t)best + items[i].bytes > total) total = (size_t)best + items[i].bytes;
    }
    for (int v = 0; v < 2 * nv; v++)
        if (group[v] != v) {
            off[v] = off[group[v]] < 0 ? -1 : off[group[v]] + suboff[v];
            bytes[v] = rc->rec[v];
        }
    rc_plan *slot = &rc->plans[0];
    for (int i = 0; i < RC_PLANS; i++) {
        if (!rc->plans[i].valid) {
            slot = &rc->plans[i];
            break;
        }
        if (rc->plans[i].used < slot->used) slot = &rc->plans[i];
    }
    if (total > rc->arena_cap) {
        /* The other plans keep the old arena when a larger one cannot be had. */
        uint8_t *arena = mcp_malloc(total + ARENA_ALIGN);
        if (!arena) goto done;
        mcp_free(rc->arena);
        rc->arena = arena;
        rc->arena_cap = total;
    }
    plan_clear(slot);
    *slot = (rc_plan){.valid = true, .sig = sig, .sig_len = len, .off = off, .bytes = bytes,
                      .arena_bytes = total, .used = rc->tick};
    sig = NULL;
    off = NULL;
    bytes = NULL;
done:
    mcp_free(birth);
    mcp_free(death);
    mcp_free(group);
    mcp_free(suboff);
    mcp_free(items);
    mcp_free(live);
    mcp_free(sig);
    mcp_free(off);
    mcp_free(bytes);
}

/* The arena base, aligned. */
static uint8_t *arena_base(const mcp__runctx *rc)
{
    uintptr_t p = (uintptr_t)rc->arena;
    return (uint8_t *)((p + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN);
}

/* Planned storage for entry e (a value, or a value's plain shadow at
 * n_values + v); records the size while recording. */
static void *planned(mcp_exec *f, int e, size_t nbytes)
{
    mcp__runctx *rc = f->rc;
    if (!rc || e < 0) return NULL;
    if (!rc->cur) {
        if (nbytes > rc->rec[e]) rc->rec[e] = nbytes;
        if (e >= rc->n_values) rc->rec_birth[e - rc->n_values] = f->node;
        return NULL;
    }
    int64_t off = rc->cur->off[e];
    if (off < 0 || nbytes > rc->cur->bytes[e]) return NULL;
    return arena_base(rc) + off;
}

static void *host_output_buffer(void *self, const mcp_node *n, int i, size_t nbytes)
{
    mcp_exec *f = self;
    if (!f || i < 0 || i >= n->n_outputs) return NULL;
    return planned(f, n->outputs[i], nbytes);
}

static void host_note_concat(void *self)
{
    mcp_exec *f = self;
    if (f && f->rc && !f->rc->cur && f->node >= 0 && f->node < f->graph->n_nodes) f->rc->rec_concat[f->node] = true;
}

static void *host_scratch(void *self, int slot, size_t nbytes)
{
    mcp_exec *f = self;
    if (!f || slot < 0 || slot >= MCP_KSCRATCH_SLOTS) return NULL;
    mcp__runctx *rc = f->root;
    if (!rc) return NULL;
    if (nbytes > rc->scratch_cap[slot]) {
        size_t cap = align_up(nbytes);
        void *p = mcp_realloc(rc->scratch[slot], cap);
        if (!p) return NULL;
        rc->scratch[slot] = p;
        rc->scratch_cap[slot] = cap;
    }
    return rc->scratch[slot];
}

static mcp_status host_run_subgraph(void *self, const mcp_kernel_ctx *ctx, const mcp_graph *g,
                                    mcp_value *const *inputs, mcp_value **outputs);

/* What the executor offers its kernels: the run's memory plan, its scratch
 * buffers, and subgraphs run in a child frame. */
static const mcp_kernel_host exec_host = {
    .output_buffer = host_output_buffer,
    .scratch = host_scratch,
    .note_concat = host_note_concat,
    .run_subgraph = host_run_subgraph,
};

/* ---- frames ---- */

/* Releases a frame-owned value: slots are cleared, others freed. */
static void drop_value(mcp_exec *f, mcp_value *v)
{
    if (f->rc) mcp_value_clear(v);
    else mcp_value_free(v);
}

static void frame_free(mcp_exec *f)
{
    if (f->vals)
        for (int i = 0; i < f->graph->n_values; i++)
            if (f->owned[i]) drop_value(f, f->vals[i]);
    if (f->rc) {
        for (int i = 0; i < f->graph->n_values; i++) f->vals[i] = NULL;
        memset(f->owned, 0, sizeof *f->owned * (size_t)f->graph->n_values);
        return;
    }
    mcp_free(f->vals);
    mcp_free(f->owned);
}

static mcp_status frame_init(mcp_exec *f, const mcp_session *s, const mcp_graph *g, mcp_exec *parent,
                             mcp__runctx *rc, mcp_value *const *inputs, mcp_err *err)
{
    memset(f, 0, sizeof *f);
    f->session = s;
    f->graph = g;
    f->parent = parent;
    f->rc = rc;
    f->root = rc ? rc : parent ? parent->root : NULL;
    f->err = err;
    if (rc) {
        f->vals = rc->vals;
        f->owned = rc->owned;
    } else {
        f->vals = mcp_calloc((size_t)g->n_values + 1, sizeof(mcp_value *));
        f->owned = mcp_calloc((size_t)g->n_values + 1, sizeof(bool));
        if (!f->vals || !f->owned) {
            frame_free(f);
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory creating a run frame");
        }
    }
    for (int i = 0; i < g->n_initializers; i++) {
        int idx = g->initializer_values[i];
        mcp_value *v = rc ? &rc->slots[idx] : mcp_value_new();
        if (!v) {
            frame_free(f);
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        /* A borrowed view of the session's weights. */
        v->kind = MCP_VALUE_TENSOR;
        v->tensor = g->initializers[i];
        v->tensor.owns_data = false;
        f->vals[idx] = v;
        f->owned[idx] = true;
    }
    for (int i = 0; i < g->n_values; i++) {
        int outer = g->values[i].outer;
        if (outer < 0) continue;
        MCP_ASSERT(parent && parent->graph == g->parent);
        f->vals[i] = parent->vals[outer];
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (inputs && inputs[i]) f->vals[g->inputs[i]] = inputs[i];
    return MCP_STATUS_OK;
}

/* Converts frame value idx from a backend format to plain, in place, into
 * planned memory when there is a plan for it. */
static mcp_status make_plain(mcp_exec *f, int idx, mcp_value *v)
{
    mcp_tensor *t = &v->tensor;
    mcp_tensor plain = {.dtype = t->dtype, .rank = t->rank};
    memcpy(plain.dims, t->dims, sizeof plain.dims);
    size_t nbytes = mcp_tensor_nbytes(&plain);
    void *p = f->rc ? planned(f, f->rc->n_values + idx, nbytes) : NULL;
    if (!p) return mcp_tensor_make_plain(t, f->err);
    mcp_status st = t->format->to_plain(t->format, t->data, p, f->err);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor_release(t);
    plain.data = p;
    plain.owns_data = false;
    *t = plain;
    return MCP_STATUS_OK;
}

static mcp_status run_node(mcp_exec *f, const mcp_node *n)
{
    enum { SMALL = 16 };
    mcp_value *in_small[SMALL], *out_small[SMALL];
    mcp_value **ins = n->n_inputs <= SMALL ? in_small : mcp_calloc((size_t)n->n_inputs, sizeof *ins);
    mcp_value **outs = n->n_outputs <= SMALL ? out_small : mcp_calloc((size_t)n->n_outputs, sizeof *outs);
    mcp_status st = MCP_STATUS_OK;
    if (outs)
        for (int i = 0; i < n->n_outputs; i++) outs[i] = NULL;
    if (!ins || !outs) {
        st = mcp_err_set(f->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        int idx = n->inputs[i];
        ins[i] = idx >= 0 ? f->vals[idx] : NULL;
        if (idx >= 0 && !ins[i]) {
            st = mcp_err_set(f->err, MCP_STATUS_INVALID_ARGUMENT, "node '%s' (%s): input '%s' has no value",
                             n->name, n->op_type, f->graph->values[idx].name);
            goto done;
        }
    }
    /* Backend formats reach only kernels that read them; for the others the
     * frame's value becomes plain, so later readers convert no more. */
    if (!n->kernel->reads_formats)
        for (int i = 0; i < n->n_inputs && st == MCP_STATUS_OK; i++)
            if (ins[i] && ins[i]->kind == MCP_VALUE_TENSOR && ins[i]->tensor.format) {
                st = make_plain(f, n->inputs[i], ins[i]);
                if (st != MCP_STATUS_OK)
                    mcp_err_prefix(f->err, "node '%s' (%s): input '%s'", n->name, n->op_type,
                                   f->graph->values[n->inputs[i]].name);
            }
    if (st != MCP_STATUS_OK) goto done;
    int discard = 0;
    for (int i = 0; i < n->n_outputs; i++) {
        int idx = n->outputs[i];
        if (f->rc && idx >= 0) outs[i] = &f->rc->slots[idx];
        else if (f->rc && discard < RC_DISCARD) outs[i] = &f->rc->slots[f->rc->n_values + discard++];
        else outs[i] = mcp_value_new();
        if (!outs[i]) {
            st = mcp_err_set(f->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
    }
    mcp_kernel_ctx ctx = {
        .node = n,
        .opset = n->opset,
        .n_inputs = n->n_inputs,
        .inputs = ins,
        .n_outputs = n->n_outputs,
        .outputs = outs,
        .state = n->kernel_state,
        .err = f->err,
        .host = &exec_host,
        .host_self = f,
        .threads = f->root ? f->root->threads : f->session->threads,
        .max_tensor_bytes = f->session->max_tensor_bytes,
    };
    st = n->kernel->run(&ctx);
    if (st != MCP_STATUS_OK && ctx.refused != MCP_STATUS_OK) st = ctx.refused;
    if (st == MCP_STATUS_OK) {
        for (int i = 0; i < n->n_outputs; i++) {
            int idx = n->outputs[i];
            if (idx < 0) continue;
            if (f->owned[idx] && f->vals[idx] != outs[i]) drop_value(f, f->vals[idx]);
            f->vals[idx] = outs[i];
            f->owned[idx] = true;
            outs[i] = NULL;
        }
    }
done:
    if (outs)
        for (int i = 0; i < n->n_outputs; i++) {
            if (!outs[i]) continue;
            bool slot = f->rc && outs[i] >= f->rc->slots && outs[i] < f->rc->slots + f->rc->n_values + RC_DISCARD;
            if (slot) mcp_value_clear(outs[i]);
            else mcp_value_free(outs[i]);
        }
    if (ins != in_small) mcp_free(ins);
    if (outs != out_small) mcp_free(outs);
    return st;
}

/* Copies tensor v into dst when dst already holds an owned plain tensor of
 * the same dtype and shape (a caller reusing its output values across
 * runs); false otherwise. */
static bool copy_into(mcp_value *dst, const mcp_value *v)
{
    const mcp_tensor *a = &dst->tensor, *b = &v->tensor;
    if (dst->kind != MCP_VALUE_TENSOR || v->kind != MCP_VALUE_TENSOR || !a->owns_data || a->format ||
        b->format || a->dtype != b->dtype || a->dtype == MCP_DTYPE_STRING || a->rank != b->rank ||
        memcmp(a->dims, b->dims, sizeof *a->dims * (size_t)a->rank) != 0)
        return false;
    size_t n = mcp_tensor_nbytes(b);
    if (n) memcpy(a->data, b->data, n);
    return true;
}

static mcp_status exec_frame(const mcp_session *s, const mcp_graph *g, mcp_exec *parent, mcp__runctx *rc,
                             mcp_value *const *inputs, mcp_value **outputs, mcp_err *err)
{
    mcp_exec f;
    mcp_status st = frame_init(&f, s, g, parent, rc, inputs, err);
    if (st != MCP_STATUS_OK) return st;
    for (int i = 0; i < g->n_nodes && st == MCP_STATUS_OK; i++) {
        f.node = i;
        if (s->prof_ns && !parent) {
            int64_t t0 = mcp_now_ns();
            st = run_node(&f, &g->nodes[i]);
            atomic_fetch_add(&s->prof_ns[i], (uint64_t)(mcp_now_ns() - t0));
            atomic_fetch_add(&s->prof_calls[i], 1);
        } else {
            st = run_node(&f, &g->nodes[i]);
        }
        /* Release what no later node reads. */
        for (int k = g->free_start[i]; st == MCP_STATUS_OK && k < g->free_start[i + 1]; k++) {
            int idx = g->free_vals[k];
            if (!f.owned[idx]) continue;
            drop_value(&f, f.vals[idx]);
            f.vals[idx] = NULL;
            f.owned[idx] = false;
        }
    }
    for (int i = 0; i < g->n_outputs && st == MCP_STATUS_OK; i++) {
        int idx = g->outputs[i];
        mcp_value *v = f.vals[idx];
        if (!v) {
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "graph output '%s' has no value", g->values[idx].name);
            break;
        }
        if (v->kind == MCP_VALUE_TENSOR && v->tensor.format) {
            st = mcp_tensor_make_plain(&v->tensor, err);
            if (st != MCP_STATUS_OK) break;
        }
        /* Move on the last listing of a value; copy on earlier ones and
         * when the data is not the frame's to give (weights, arena). */
        bool listed_later = false;
        for (int j = i + 1; j < g->n_outputs; j++) listed_later |= g->outputs[j] == idx;
        bool movable = v->kind != MCP_VALUE_TENSOR || v->tensor.owns_data || v->tensor.data == NULL;
        if (copy_into(outputs[i], v)) {
            /* The caller's tensor of this dtype and shape took the data. */
        } else if (f.owned[idx] && !listed_later && g->values[idx].initializer < 0 && movable) {
            /* Move: the frame gives up the value. */
            mcp_value_clear(outputs[i]);
            *outputs[i] = *v;
            memset(v, 0, sizeof *v);
        } else {
            mcp_value_clear(outputs[i]);
            st = mcp_value_copy(outputs[i], v, err);
        }
    }
    frame_free(&f);
    return st;
}

static mcp_status exec_graph(const mcp_session *s, const mcp_graph *g, mcp_exec *parent,
                           mcp_value *const *inputs, mcp_value **outputs, mcp_err *err)
{
    return exec_frame(s, g, parent, NULL, inputs, outputs, err);
}

mcp_status mcp__exec_graph(const mcp_session *s, const mcp_graph *g, mcp_value *const *inputs,
                           mcp_value **outputs, mcp_err *err)
{
    return exec_frame(s, g, NULL, NULL, inputs, outputs, err);
}

mcp_status mcp__exec_top(const mcp_session *s, mcp__runctx *rc, mcp_value *const *inputs,
                         mcp_value **outputs, mcp_err *err)
{
    const mcp_graph *g = s->graph;
    rc->tick++;
    rc->cur = find_plan(rc, inputs);
    if (rc->cur) rc->cur->used = rc->tick;
    else {
        memset(rc->rec, 0, sizeof *rc->rec * (size_t)(2 * rc->n_values));
        memset(rc->rec_concat, 0, sizeof *rc->rec_concat * (size_t)g->n_nodes);
    }
    bool probe = false;
    rc_plan *plan = rc->cur;
    bool tuned = plan && s->adaptive_threads && s->threads > 1;
    rc->threads = tuned ? mcp__tune_threads(&plan->tune, s->threads, &probe) : s->threads;
    if (rc->threads != s->threads) omp_set_num_threads(rc->threads);
    struct timespec c0, c1;
    int64_t t0 = mcp_now_ns();
    if (tuned) clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    mcp_status st = exec_frame(s, g, NULL, rc, inputs, outputs, err);
    if (st == MCP_STATUS_OK && tuned) {
        double ms = (double)(mcp_now_ns() - t0) / 1e6;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        double cpu_ms = (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
        mcp__tune_update(&plan->tune, s->threads, rc->threads, probe, ms, cpu_ms);
    }
    if (rc->threads != s->threads) omp_set_num_threads(s->threads);
    if (st == MCP_STATUS_OK && !rc->cur) make_plan(rc, inputs);
    rc->cur = NULL;
    return st;
}

static mcp_status host_run_subgraph(void *self, const mcp_kernel_ctx *ctx, const mcp_graph *g,
                                    mcp_value *const *inputs, mcp_value **outputs)
{
    mcp_exec *f = self;
    if (g->parent != f->graph)
        return mcp_err_set(f->err, MCP_STATUS_INTERNAL, "node '%s' (%s): subgraph '%s' does not belong to this node's graph",
                           ctx->node->name, ctx->node->op_type, g->name);
    mcp_status st = exec_graph(f->session, g, f, inputs, outputs, f->err);
    if (st != MCP_STATUS_OK) mcp_err_prefix(f->err, "node '%s' (%s): subgraph '%s'", ctx->node->name, ctx->node->op_type, g->name);
    return st;
}
