/*
 * Reference kernels: control family. This file holds If, Loop and Scan, the
 * helpers the family shares, and the kernel table; the sequence and optional
 * kernels live in control_seq.c.
 *
 * Subgraphs run through mcp_kernel_run_subgraph(): we hand it the formal
 * inputs and empty values for the results, which it fills by moving.
 */
#include <string.h>

#include "ops/ref/control_util.h"

/* ---- shared helpers ---- */

mcp_status mcp__ctl_copy_elems(mcp_tensor *dst, int64_t dst_off, const mcp_tensor *src,
                               int64_t src_off, int64_t n)
{
    if (n <= 0) return MCP_STATUS_OK;
    if (src->dtype == MCP_DTYPE_STRING) {
        char *const *s = src->data;
        for (int64_t i = 0; i < n; i++) {
            const char *str = s[src_off + i] ? s[src_off + i] : "";
            mcp_status st = mcp_tensor_set_string(dst, dst_off + i, str, strlen(str));
            if (st != MCP_STATUS_OK) return st;
        }
        return MCP_STATUS_OK;
    }
    size_t es = (size_t)mcp_dtype_size(src->dtype);
    memcpy((char *)dst->data + (size_t)dst_off * es, (const char *)src->data + (size_t)src_off * es,
           (size_t)n * es);
    return MCP_STATUS_OK;
}

bool mcp__ctl_scalar_i64(const mcp_tensor *t, int64_t *out)
{
    if (!t || mcp_tensor_numel(t) != 1 || !mcp_dtype_is_numeric(t->dtype)) return false;
    *out = mcp_tensor_get_i64(t, 0);
    return true;
}

/* The graph attribute `name` of the node, or NULL. */
static const mcp_graph *graph_attr(const mcp_kernel_ctx *ctx, const char *name)
{
    const mcp_attr *a = mcp_kattr(ctx, name);
    if (!a || a->type != MCP_ATTR_GRAPH) return NULL;
    return a->g;
}

/* Static type of output i of subgraph g. */
static const mcp_type *graph_output_type(const mcp_graph *g, int i)
{
    if (!g || i < 0 || i >= g->n_outputs) return NULL;
    int v = g->outputs[i];
    if (v < 0 || v >= g->n_values) return NULL;
    return &g->values[v].type;
}

/* Static dtype of output slot i of the node that owns subgraph g (looked up
 * in g's parent), or UNDEFINED. */
static mcp_dtype node_output_dtype(const mcp_kernel_ctx *ctx, const mcp_graph *g, int i)
{
    const mcp_graph *p = g ? g->parent : NULL;
    if (!p || i < 0 || i >= ctx->node->n_outputs) return MCP_DTYPE_UNDEFINED;
    int v = ctx->node->outputs[i];
    if (v < 0 || v >= p->n_values) return MCP_DTYPE_UNDEFINED;
    return p->values[v].type.dtype;
}

/* An array of n empty values and an array of pointers to them. */
typedef struct value_set {
    int n;
    mcp_value *vals;
    mcp_value **ptrs;
} value_set;

static bool value_set_init(value_set *s, int n)
{
    s->n = n;
    s->vals = mcp_calloc((size_t)(n > 0 ? n : 1), sizeof(mcp_value));
    s->ptrs = mcp_calloc((size_t)(n > 0 ? n : 1), sizeof(mcp_value *));
    if (!s->vals || !s->ptrs) {
        mcp_free(s->vals);
        mcp_free(s->ptrs);
        s->vals = NULL;
        s->ptrs = NULL;
        return false;
    }
    for (int i = 0; i < n; i++) s->ptrs[i] = &s->vals[i];
    return true;
}

static void value_set_clear(value_set *s)
{
    for (int i = 0; i < s->n; i++) mcp_value_clear(&s->vals[i]);
}

static void value_set_free(value_set *s)
{
    if (s->vals) value_set_clear(s);
    mcp_free(s->vals);
    mcp_free(s->ptrs);
    s->vals = NULL;
    s->ptrs = NULL;
}

/* A growing list of tensors owned by the list (per-iteration scan outputs). */
typedef struct tensor_list {
    mcp_tensor *items;
    int64_t len, cap;
} tensor_list;

static mcp_status tensor_list_push_move(mcp_kernel_ctx *ctx, tensor_list *l, mcp_tensor *t)
{
    if (l->len == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 8;
        mcp_tensor *p = mcp_realloc(l->items, (size_t)cap * sizeof(mcp_tensor));
        if (!p) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory collecting outputs");
        l->items = p;
        l->cap = cap;
    }
    l->items[l->len++] = *t;
    memset(t, 0, sizeof(*t));
    return MCP_STATUS_OK;
}

static void tensor_list_free(tensor_list *l)
{
    for (int64_t i = 0; i < l->len; i++) mcp_tensor_release(&l->items[i]);
    mcp_free(l->items);
    memset(l, 0, sizeof(*l));
}

static bool same_shape(const mcp_tensor *a, const mcp_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/*
 * Stacks items (prod(lead) tensors of one dtype and shape S, row-major over
 * the lead dims; NULL items read as zeros) into output out_idx of shape S
 * with the lead dims inserted at `axis` (in [-(rank(S)+1), rank(S)]).
 * When every item is NULL, S and the dtype come from `fallback` (unknown
 * dims read as 0) and `fallback_dtype`.
 */
static mcp_status stack_items(mcp_kernel_ctx *ctx, int out_idx, const char *what,
                              mcp_tensor *const *items, int n_lead, const int64_t *lead,
                              int64_t axis, const mcp_type *fallback, mcp_dtype fallback_dtype)
{
    int64_t n_items = mcp_shape_numel(n_lead, lead);
    const mcp_tensor *ref = NULL;
    for (int64_t k = 0; k < n_items && !ref; k++)
        if (items[k]) ref = items[k];

    mcp_dtype dtype;
    int rank;
    int64_t shape[MCP_MAX_RANK];
    if (ref) {
        dtype = ref->dtype;
        rank = ref->rank;
        memcpy(shape, ref->dims, sizeof(shape));
        for (int64_t k = 0; k < n_items; k++) {
            if (!items[k]) continue;
            if (items[k]->dtype != dtype || !same_shape(items[k], ref))
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "%s: per-iteration values differ in dtype or shape", what);
        }
    } else {
        dtype = (fallback && fallback->dtype != MCP_DTYPE_UNDEFINED) ? fallback->dtype
                                                                     : fallback_dtype;
        if (dtype == MCP_DTYPE_UNDEFINED) dtype = MCP_DTYPE_FLOAT;
        rank = (fallback && fallback->rank > 0) ? fallback->rank : 0;
        if (rank > MCP_MAX_RANK) rank = MCP_MAX_RANK;
        for (int i = 0; i < rank; i++) shape[i] = fallback->dims[i] > 0 ? fallback->dims[i] : 0;
    }
    if (rank + n_lead > MCP_MAX_RANK)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "%s: stacked rank %d too large", what,
                         rank + n_lead);
    if (axis < -(int64_t)(rank + 1) || axis > rank)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "%s: axis %lld out of range for rank %d", what, (long long)axis, rank);
    if (axis < 0) axis += rank + 1;
    int a = (int)axis;

    int64_t out_dims[MCP_MAX_RANK];
    int r = 0;
    for (int i = 0; i < a; i++) out_dims[r++] = shape[i];
    for (int i = 0; i < n_lead; i++) out_dims[r++] = lead[i];
    for (int i = a; i < rank; i++) out_dims[r++] = shape[i];

    mcp_tensor *out = mcp_kout(ctx, out_idx, dtype, r, out_dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    if (!ref) return MCP_STATUS_OK;

    int64_t outer = mcp_shape_numel(a, shape);
    int64_t inner = mcp_shape_numel(rank - a, shape + a);
    for (int64_t k = 0; k < n_items; k++) {
        if (!items[k]) continue;
        for (int64_t o = 0; o < outer; o++) {
            mcp_status st = mcp__ctl_copy_elems(out, (o * n_items + k) * inner, items[k],
                                                o * inner, inner);
            if (st != MCP_STATUS_OK)
                return mcp_kfail(ctx, st, "%s: out of memory copying strings", what);
        }
    }
    return MCP_STATUS_OK;
}

/* Copies index idx along `axis` of src into dst (allocated by the caller with
 * src's shape minus that axis). */
static mcp_status take_slice(mcp_tensor *dst, const mcp_tensor *src, int axis, int64_t idx)
{
    int64_t outer = mcp_shape_numel(axis, src->dims);
    int64_t len = src->dims[axis];
    int64_t inner = mcp_shape_numel(src->rank - axis - 1, src->dims + axis + 1);
    for (int64_t o = 0; o < outer; o++) {
        mcp_status st = mcp__ctl_copy_elems(dst, o * inner, src, (o * len + idx) * inner, inner);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* Allocates dst with src's shape minus `axis`. */
static mcp_status alloc_slice(mcp_kernel_ctx *ctx, mcp_tensor *dst, const mcp_tensor *src,
                              int axis)
{
    int64_t dims[MCP_MAX_RANK];
    int r = 0;
    for (int i = 0; i < src->rank; i++)
        if (i != axis) dims[r++] = src->dims[i];
    return mcp_tensor_alloc(dst, src->dtype, r, dims, ctx->err);
}

/* ---- If ---- */

static mcp_status run_if(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *cond = mcp_kin(ctx, 0);
    if (!cond) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'cond' is missing");
    int64_t c;
    if (!mcp__ctl_scalar_i64(cond, &c))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'cond' must hold exactly one boolean");
    const char *which = c ? "then_branch" : "else_branch";
    const mcp_graph *g = graph_attr(ctx, which);
    if (!g) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute '%s' is missing", which);
    if (g->n_outputs < ctx->n_outputs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute '%s' has %d outputs, the node %d", which, g->n_outputs,
                         ctx->n_outputs);
    if (g->n_outputs == ctx->n_outputs)
        return mcp_kernel_run_subgraph(ctx, g, 0, NULL, ctx->outputs);

    value_set res;
    if (!value_set_init(&res, g->n_outputs))
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = mcp_kernel_run_subgraph(ctx, g, 0, NULL, res.ptrs);
    if (st == MCP_STATUS_OK)
        for (int i = 0; i < ctx->n_outputs; i++) mcp__ctl_move(ctx->outputs[i], &res.vals[i]);
    value_set_free(&res);
    return st;
}

/* ---- Loop ---- */

typedef struct loop_state {
    value_set body_in;  /* iteration number, cond, carried values */
    value_set carried;  /* loop-carried values after an iteration */
    value_set body_out; /* cond, carried..., scan outputs... */
    tensor_list *scans; /* per scan output */
    mcp_tensor **stack; /* scratch pointer array for stacking */
    int n_scan;
} loop_state;

static void loop_state_free(loop_state *s)
{
    /* body_in borrows the carried / input values except its first two. */
    for (int i = 2; i < s->body_in.n; i++) mcp__ctl_forget(&s->body_in.vals[i]);
    value_set_free(&s->body_in);
    value_set_free(&s->carried);
    value_set_free(&s->body_out);
    if (s->scans)
        for (int k = 0; k < s->n_scan; k++) tensor_list_free(&s->scans[k]);
    mcp_free(s->scans);
    mcp_free(s->stack);
}

static mcp_status run_loop(mcp_kernel_ctx *ctx)
{
    const mcp_graph *body = graph_attr(ctx, "body");
    if (!body) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'body' is missing");
    int n_carried = ctx->n_inputs > 2 ? ctx->n_inputs - 2 : 0;
    if (body->n_inputs != n_carried + 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'body' takes %d inputs, expected %d (iteration, cond and "
                         "%d loop-carried values)",
                         body->n_inputs, n_carried + 2, n_carried);
    int n_scan = body->n_outputs - 1 - n_carried;
    if (n_scan < 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'body' has %d outputs, expected at least %d",
                         body->n_outputs, n_carried + 1);
    if (ctx->n_outputs > n_carried + n_scan)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "node has %d outputs but the body yields %d", ctx->n_outputs,
                         n_carried + n_scan);

    int64_t max_trip = -1; /* -1: no trip count */
    const mcp_tensor *m = mcp_kin(ctx, 0);
    if (m) {
        if (!mcp__ctl_scalar_i64(m, &max_trip))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'M' must hold exactly one integer");
        if (max_trip < 0) max_trip = 0;
    }
    bool has_cond = false;
    int64_t cond = 1;
    const mcp_tensor *cond_t = mcp_kin(ctx, 1);
    if (cond_t) {
        has_cond = true;
        if (!mcp__ctl_scalar_i64(cond_t, &cond))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'cond' must hold exactly one boolean");
    }
    for (int j = 0; j < n_carried; j++)
        if (!mcp__ctl_in(ctx, 2 + j))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "loop-carried input %d is missing", j);

    loop_state s;
    memset(&s, 0, sizeof(s));
    s.n_scan = n_scan;
    mcp_status st = MCP_STATUS_OK;
    if (!value_set_init(&s.body_in, n_carried + 2) || !value_set_init(&s.carried, n_carried) ||
        !value_set_init(&s.body_out, body->n_outputs) ||
        !(s.scans = mcp_calloc((size_t)(n_scan > 0 ? n_scan : 1), sizeof(tensor_list)))) {
        loop_state_free(&s);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    mcp_value *iter_v = &s.body_in.vals[0];
    mcp_value *cond_v = &s.body_in.vals[1];
    st = mcp_tensor_alloc(&iter_v->tensor, MCP_DTYPE_INT64, 0, NULL, ctx->err);
    if (st == MCP_STATUS_OK) st = mcp_tensor_alloc(&cond_v->tensor, MCP_DTYPE_BOOL, 0, NULL, ctx->err);
    if (st != MCP_STATUS_OK) {
        loop_state_free(&s);
        return st;
    }
    /* The first iteration reads the node's inputs directly. */
    for (int j = 0; j < n_carried; j++) s.body_in.ptrs[2 + j] = ctx->inputs[2 + j];

    int64_t it = 0;
    for (; (max_trip < 0 || it < max_trip) && cond; it++) {
        *(int64_t *)iter_v->tensor.data = it;
        *(uint8_t *)cond_v->tensor.data = 1;
        value_set_clear(&s.body_out);
        st = mcp_kernel_run_subgraph(ctx, body, n_carried + 2, s.body_in.ptrs, s.body_out.ptrs);
        if (st != MCP_STATUS_OK) break;

        if (has_cond) {
            mcp_value *c = &s.body_out.vals[0];
            if (c->kind != MCP_VALUE_TENSOR || !mcp__ctl_scalar_i64(&c->tensor, &cond)) {
                st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                               "body output 'cond' must hold exactly one boolean");
                break;
            }
        }
        for (int j = 0; j < n_carried; j++) {
            mcp__ctl_move(&s.carried.vals[j], &s.body_out.vals[1 + j]);
            s.body_in.ptrs[2 + j] = &s.carried.vals[j];
        }
        for (int k = 0; k < n_scan; k++) {
            mcp_value *v = &s.body_out.vals[1 + n_carried + k];
            if (v->kind != MCP_VALUE_TENSOR) {
                st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                               "body scan output %d must be a tensor", k);
                break;
            }
            st = tensor_list_push_move(ctx, &s.scans[k], &v->tensor);
            if (st != MCP_STATUS_OK) break;
        }
        if (st != MCP_STATUS_OK) break;
    }

    for (int j = 0; st == MCP_STATUS_OK && j < n_carried && j < ctx->n_outputs; j++) {
        if (it > 0)
            mcp__ctl_move(ctx->outputs[j], &s.carried.vals[j]);
        else
            st = mcp_value_copy(ctx->outputs[j], ctx->inputs[2 + j], ctx->err);
    }
    if (st == MCP_STATUS_OK && n_scan > 0) {
        s.stack = mcp_calloc((size_t)(it > 0 ? it : 1), sizeof(mcp_tensor *));
        if (!s.stack) st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (int k = 0; st == MCP_STATUS_OK && k < n_scan && n_carried + k < ctx->n_outputs; k++) {
        for (int64_t i = 0; i < it; i++) s.stack[i] = &s.scans[k].items[i];
        int64_t lead = it;
        st = stack_items(ctx, n_carried + k, "Loop scan output", s.stack, 1, &lead, 0,
                         graph_output_type(body, 1 + n_carried + k),
                         node_output_dtype(ctx, body, n_carried + k));
    }
    loop_state_free(&s);
    return st;
}

/* ---- Scan ---- */

/* Reads an optional ints attribute of `n` entries (default 0) into out,
 * checking the length. */
static mcp_status ints_attr(mcp_kernel_ctx *ctx, const char *name, int n, int64_t *out)
{
    int64_t count = 0;
    const int64_t *v = mcp_kattr_ints(ctx, name, &count);
    for (int i = 0; i < n; i++) out[i] = 0;
    if (!v) return MCP_STATUS_OK;
    if (count != n)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute '%s' has %lld entries, expected %d", name, (long long)count, n);
    for (int i = 0; i < n; i++) out[i] = v[i];
    return MCP_STATUS_OK;
}

typedef struct scan_state {
    value_set body_in;  /* states (borrowed or owned in `states`) and slices */
    value_set states;
    value_set body_out;
    tensor_list *scans;
    mcp_tensor **stack;
    int64_t *attrs; /* axes / directions scratch */
    int n_state, n_scan_out;
} scan_state;

static void scan_state_free(scan_state *s)
{
    for (int i = 0; i < s->n_state && i < s->body_in.n; i++) mcp__ctl_forget(&s->body_in.vals[i]);
    value_set_free(&s->body_in);
    value_set_free(&s->states);
    value_set_free(&s->body_out);
    if (s->scans)
        for (int k = 0; k < s->n_scan_out; k++) tensor_list_free(&s->scans[k]);
    mcp_free(s->scans);
    mcp_free(s->stack);
    mcp_free(s->attrs);
}

static mcp_status scan_state_init(mcp_kernel_ctx *ctx, scan_state *s, const mcp_graph *body,
                                  int n_state, int n_scan_out, int n_attrs)
{
    memset(s, 0, sizeof(*s));
    s->n_state = n_state;
    s->n_scan_out = n_scan_out;
    if (!value_set_init(&s->body_in, body->n_inputs) || !value_set_init(&s->states, n_state) ||
        !value_set_init(&s->body_out, body->n_outputs) ||
        !(s->scans = mcp_calloc((size_t)(n_scan_out > 0 ? n_scan_out : 1), sizeof(tensor_list))) ||
        !(s->attrs = mcp_calloc((size_t)(n_attrs > 0 ? n_attrs : 1), sizeof(int64_t)))) {
        scan_state_free(s);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    return MCP_STATUS_OK;
}

/* Runs one body iteration: states in body_in[0..n_state) (pointers), slices
 * already in place. Moves new states into s->states and appends scan
 * outputs to s->scans. */
static mcp_status scan_step(mcp_kernel_ctx *ctx, scan_state *s, const mcp_graph *body)
{
    value_set_clear(&s->body_out);
    mcp_status st = mcp_kernel_run_subgraph(ctx, body, body->n_inputs, s->body_in.ptrs,
                                            s->body_out.ptrs);
    if (st != MCP_STATUS_OK) return st;
    for (int j = 0; j < s->n_state; j++) {
        mcp__ctl_move(&s->states.vals[j], &s->body_out.vals[j]);
        s->body_in.ptrs[j] = &s->states.vals[j];
    }
    for (int k = 0; k < s->n_scan_out; k++) {
        mcp_value *v = &s->body_out.vals[s->n_state + k];
        if (v->kind != MCP_VALUE_TENSOR)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "body scan output %d must be a tensor",
                             k);
        st = tensor_list_push_move(ctx, &s->scans[k], &v->tensor);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* Scan 9+: no batch axis; axes and directions per scan input / output. */
static mcp_status run_scan9(mcp_kernel_ctx *ctx)
{
    const mcp_graph *body = graph_attr(ctx, "body");
    if (!body) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'body' is missing");
    int64_t m = mcp_kattr_int(ctx, "num_scan_inputs", -1);
    if (m < 1 || m > ctx->n_inputs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'num_scan_inputs' (%lld) must be in [1, %d]", (long long)m,
                         ctx->n_inputs);
    int n_in = (int)m;
    int n_state = ctx->n_inputs - n_in;
    if (body->n_inputs != ctx->n_inputs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'body' takes %d inputs, the node has %d", body->n_inputs,
                         ctx->n_inputs);
    int n_out = body->n_outputs - n_state;
    if (n_out < 0 || ctx->n_outputs > body->n_outputs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'body' has %d outputs, expected %d states and the scan "
                         "outputs",
                         body->n_outputs, n_state);

    scan_state s;
    mcp_status st = scan_state_init(ctx, &s, body, n_state, n_out, 2 * n_in + 2 * n_out);
    if (st != MCP_STATUS_OK) return st;
    int64_t *in_axes = s.attrs, *in_dirs = s.attrs + n_in;
    int64_t *out_axes = in_dirs + n_in, *out_dirs = out_axes + n_out;
    if ((st = ints_attr(ctx, "scan_input_axes", n_in, in_axes)) != MCP_STATUS_OK ||
        (st = ints_attr(ctx, "scan_input_directions", n_in, in_dirs)) != MCP_STATUS_OK ||
        (st = ints_attr(ctx, "scan_output_axes", n_out, out_axes)) != MCP_STATUS_OK ||
        (st = ints_attr(ctx, "scan_output_directions", n_out, out_dirs)) != MCP_STATUS_OK) {
        scan_state_free(&s);
        return st;
    }

    for (int j = 0; j < n_state; j++) {
        if (!mcp__ctl_in(ctx, j)) {
            scan_state_free(&s);
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "state input %d is missing", j);
        }
        s.body_in.ptrs[j] = ctx->inputs[j];
    }
    int64_t len = -1;
    for (int i = 0; i < n_in; i++) {
        const mcp_tensor *x = mcp_kin(ctx, n_state + i);
        int axis;
        if (!x || x->rank < 1 || !mcp_axis_normalize(in_axes[i], x->rank, &axis)) {
            st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                           "scan input %d is missing, a scalar, or has no axis %lld", i,
                           (long long)in_axes[i]);
            scan_state_free(&s);
            return st;
        }
        in_axes[i] = axis;
        if (len >= 0 && x->dims[axis] != len) {
            scan_state_free(&s);
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "scan input %d has %lld iterations, another %lld", i,
                             (long long)x->dims[axis], (long long)len);
        }
        len = x->dims[axis];
        st = alloc_slice(ctx, &s.body_in.vals[n_state + i].tensor, x, axis);
        if (st != MCP_STATUS_OK) {
            scan_state_free(&s);
            return st;
        }
    }

    for (int64_t t = 0; st == MCP_STATUS_OK && t < len; t++) {
        for (int i = 0; i < n_in && st == MCP_STATUS_OK; i++) {
            const mcp_tensor *x = mcp_kin(ctx, n_state + i);
            int64_t idx = in_dirs[i] ? len - 1 - t : t;
            st = take_slice(&s.body_in.vals[n_state + i].tensor, x, (int)in_axes[i], idx);
            if (st != MCP_STATUS_OK) st = mcp_kfail(ctx, st, "out of memory slicing scan input");
        }
        if (st == MCP_STATUS_OK) st = scan_step(ctx, &s, body);
    }

    for (int j = 0; st == MCP_STATUS_OK && j < n_state && j < ctx->n_outputs; j++) {
        if (len > 0)
            mcp__ctl_move(ctx->outputs[j], &s.states.vals[j]);
        else
            st = mcp_value_copy(ctx->outputs[j], ctx->inputs[j], ctx->err);
    }
    if (st == MCP_STATUS_OK && n_out > 0) {
        s.stack = mcp_calloc((size_t)(len > 0 ? len : 1), sizeof(mcp_tensor *));
        if (!s.stack) st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (int k = 0; st == MCP_STATUS_OK && k < n_out && n_state + k < ctx->n_outputs; k++) {
        for (int64_t t = 0; t < len; t++)
            s.stack[out_dirs[k] ? len - 1 - t : t] = &s.scans[k].items[t];
        int64_t lead = len > 0 ? len : 0;
        st = stack_items(ctx, n_state + k, "Scan output", s.stack, 1, &lead, out_axes[k],
                         graph_output_type(body, n_state + k),
                         node_output_dtype(ctx, body, n_state + k));
    }
    scan_state_free(&s);
    return st;
}

/* Scan 8: inputs (sequence_lens?, states..., scan inputs...), every input
 * with a leading batch axis, scan inputs with the sequence on axis 1. */
static mcp_status run_scan8(mcp_kernel_ctx *ctx)
{
    const mcp_graph *body = graph_attr(ctx, "body");
    if (!body) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'body' is missing");
    int64_t m = mcp_kattr_int(ctx, "num_scan_inputs", -1);
    if (m < 1 || m > ctx->n_inputs - 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'num_scan_inputs' (%lld) must be in [1, %d]", (long long)m,
                         ctx->n_inputs - 1);
    int n_in = (int)m;
    int n_state = ctx->n_inputs - 1 - n_in;
    if (body->n_inputs != n_state + n_in)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'body' takes %d inputs, expected %d", body->n_inputs,
                         n_state + n_in);
    int n_out = body->n_outputs - n_state;
    if (n_out < 0 || ctx->n_outputs > body->n_outputs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'body' has %d outputs, expected %d states and the scan "
                         "outputs",
                         body->n_outputs, n_state);

    /* Shapes: batch from the first scan input, sequence length from axis 1. */
    int64_t batch = -1, len = -1;
    for (int i = 0; i < n_in; i++) {
        const mcp_tensor *x = mcp_kin(ctx, 1 + n_state + i);
        if (!x || x->rank < 2)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "scan input %d must be a tensor of rank >= 2 [batch, sequence, ...]",
                             i);
        if ((batch >= 0 && x->dims[0] != batch) || (len >= 0 && x->dims[1] != len))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "scan inputs disagree on batch size or sequence length");
        batch = x->dims[0];
        len = x->dims[1];
    }
    for (int j = 0; j < n_state; j++) {
        const mcp_tensor *x = mcp_kin(ctx, 1 + j);
        if (!x || x->rank < 1 || x->dims[0] != batch)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "state input %d must be a tensor with batch size %lld", j,
                             (long long)batch);
    }
    const mcp_tensor *lens = mcp_kin(ctx, 0);
    if (lens) {
        if (lens->rank != 1 || lens->dims[0] != batch || !mcp_dtype_is_integer(lens->dtype))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'sequence_lens' must be an integer tensor of shape [%lld]",
                             (long long)batch);
        for (int64_t b = 0; b < batch; b++) {
            int64_t l = mcp_tensor_get_i64(lens, b);
            if (l < 0 || l > len)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'sequence_lens' value %lld out of range [0, %lld]",
                                 (long long)l, (long long)len);
        }
    }

    scan_state s;
    mcp_status st = scan_state_init(ctx, &s, body, n_state, n_out, n_in);
    if (st != MCP_STATUS_OK) return st;
    int64_t *dirs = s.attrs;
    st = ints_attr(ctx, "directions", n_in, dirs);
    /* Per batch: the sliced initial states; their final values. */
    value_set init_states, finals;
    memset(&init_states, 0, sizeof(init_states));
    memset(&finals, 0, sizeof(finals));
    int64_t total = batch * len;
    mcp_tensor **all = NULL; /* [batch * len] per-iteration outputs, per scan output */
    int64_t *first = NULL;   /* index into s.scans[k] where batch b starts */
    if (st == MCP_STATUS_OK) {
        if (!value_set_init(&init_states, n_state) ||
            !value_set_init(&finals, (int)(n_state * (batch > 0 ? batch : 0))) ||
            !(all = mcp_calloc((size_t)(total > 0 ? total : 1), sizeof(mcp_tensor *))) ||
            !(first = mcp_calloc((size_t)(batch > 0 ? batch : 1), sizeof(int64_t))))
            st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    /* One slice of [batch, seq, rest...] per scan input: shape [rest...]. */
    for (int i = 0; st == MCP_STATUS_OK && i < n_in; i++) {
        mcp_tensor *t = &s.body_in.vals[n_state + i].tensor;
        const mcp_tensor *x = mcp_kin(ctx, 1 + n_state + i);
        st = mcp_tensor_alloc(t, x->dtype, x->rank - 2, x->dims + 2, ctx->err);
    }
    for (int j = 0; st == MCP_STATUS_OK && j < n_state; j++)
        st = alloc_slice(ctx, &init_states.vals[j].tensor, mcp_kin(ctx, 1 + j), 0);

    for (int64_t b = 1; st == MCP_STATUS_OK && b < batch; b++)
        first[b] = first[b - 1] + (lens ? mcp_tensor_get_i64(lens, b - 1) : len);
    for (int64_t b = 0; st == MCP_STATUS_OK && b < batch; b++) {
        int64_t l = lens ? mcp_tensor_get_i64(lens, b) : len;
        for (int j = 0; j < n_state && st == MCP_STATUS_OK; j++) {
            st = take_slice(&init_states.vals[j].tensor, mcp_kin(ctx, 1 + j), 0, b);
            s.body_in.ptrs[j] = &init_states.vals[j];
        }
        for (int64_t t = 0; st == MCP_STATUS_OK && t < l; t++) {
            for (int i = 0; i < n_in && st == MCP_STATUS_OK; i++) {
                const mcp_tensor *x = mcp_kin(ctx, 1 + n_state + i);
                int64_t idx = dirs[i] ? l - 1 - t : t;
                /* element (b, idx) of [batch, seq, rest...] */
                int64_t rest = mcp_shape_numel(x->rank - 2, x->dims + 2);
                st = mcp__ctl_copy_elems(&s.body_in.vals[n_state + i].tensor, 0, x,
                                         (b * len + idx) * rest, rest);
            }
            if (st == MCP_STATUS_OK) st = scan_step(ctx, &s, body);
        }
        if (st != MCP_STATUS_OK) break;
        for (int j = 0; j < n_state; j++) {
            mcp_value *dst = &finals.vals[b * n_state + j];
            if (l > 0)
                mcp__ctl_move(dst, &s.states.vals[j]);
            else
                st = mcp_value_copy(dst, &init_states.vals[j], ctx->err);
        }
    }

    /* Final states: stack the per-batch values along axis 0. */
    for (int j = 0; st == MCP_STATUS_OK && j < n_state && j < ctx->n_outputs; j++) {
        for (int64_t b = 0; b < batch; b++) {
            mcp_value *v = &finals.vals[b * n_state + j];
            all[b] = v->kind == MCP_VALUE_TENSOR ? &v->tensor : NULL;
        }
        const mcp_tensor *x = mcp_kin(ctx, 1 + j);
        mcp_type t;
        memset(&t, 0, sizeof(t));
        t.dtype = x->dtype;
        t.rank = x->rank - 1;
        for (int i = 0; i < t.rank; i++) t.dims[i] = x->dims[i + 1];
        st = stack_items(ctx, j, "Scan state", all, 1, &batch, 0, &t, x->dtype);
    }
    /* Scan outputs: [batch, seq, ...], zeros past each batch's length. */
    for (int k = 0; st == MCP_STATUS_OK && k < n_out && n_state + k < ctx->n_outputs; k++) {
        for (int64_t b = 0; b < batch; b++) {
            int64_t l = lens ? mcp_tensor_get_i64(lens, b) : len;
            for (int64_t t = 0; t < len; t++)
                all[b * len + t] = t < l ? &s.scans[k].items[first[b] + t] : NULL;
        }
        int64_t lead[2] = {batch, len};
        st = stack_items(ctx, n_state + k, "Scan output", all, 2, lead, 0,
                         graph_output_type(body, n_state + k),
                         node_output_dtype(ctx, body, n_state + k));
    }
    value_set_free(&init_states);
    value_set_free(&finals);
    mcp_free(all);
    mcp_free(first);
    scan_state_free(&s);
    return st;
}

/* ---- table ---- */

#define K(op, since, until, fn)                                                                   \
    {                                                                                             \
        .domain = "", .op_type = op, .since_version = since, .until_version = until, .run = fn    \
    }

const mcp_kernel_def mcp__ref_control_kernels[] = {
    /* A narrow value passes through a body's outputs as bytes. */
    {.domain = "", .op_type = "If", .since_version = 1, .run = run_if, .narrow_types = MCP_NARROW_BYTES},
    {.domain = "", .op_type = "Loop", .since_version = 1, .run = run_loop, .narrow_types = MCP_NARROW_BYTES},
    K("Scan", 8, 8, run_scan8),
    K("Scan", 9, 0, run_scan9),
    K("SequenceEmpty", 11, 0, mcp__ctl_sequence_empty),
    K("SequenceConstruct", 11, 0, mcp__ctl_sequence_construct),
    K("SequenceInsert", 11, 0, mcp__ctl_sequence_insert),
    K("SequenceAt", 11, 0, mcp__ctl_sequence_at),
    K("SequenceErase", 11, 0, mcp__ctl_sequence_erase),
    K("SequenceLength", 11, 0, mcp__ctl_sequence_length),
    K("SplitToSequence", 11, 0, mcp__ctl_split_to_sequence),
    K("ConcatFromSequence", 11, 0, mcp__ctl_concat_from_sequence),
    K("SequenceMap", 17, 0, mcp__ctl_sequence_map),
    K("Optional", 15, 0, mcp__ctl_optional),
    K("OptionalHasElement", 15, 0, mcp__ctl_optional_has_element),
    K("OptionalGetElement", 15, 0, mcp__ctl_optional_get_element),
};
const int mcp__ref_control_kernel_count =
    (int)(sizeof(mcp__ref_control_kernels) / sizeof(mcp__ref_control_kernels[0]));
