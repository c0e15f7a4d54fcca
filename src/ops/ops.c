/* Kernel registry and helpers shared by all kernels. */
#include <stdio.h>
#include <string.h>

#include "ops/ops.h"
#include "ops/ref/ref.h"

/* ---- reference backend ---- */

typedef struct ref_family {
    const mcp_kernel_def *table;
    const int *count;
} ref_family;

static const ref_family ref_families[] = {
#define MCP__REF_ENTRY(fam) {mcp__ref_##fam##_kernels, &mcp__ref_##fam##_kernel_count},
    MCP__REF_FAMILIES(MCP__REF_ENTRY)
#undef MCP__REF_ENTRY
};

static const mcp_kernel_def *ref_supports(const mcp_node *node, const mcp_graph *graph)
{
    (void)graph;
    const mcp_kernel_def *best = NULL;
    for (size_t f = 0; f < sizeof ref_families / sizeof ref_families[0]; f++) {
        const mcp_kernel_def *t = ref_families[f].table;
        for (int i = 0; i < *ref_families[f].count; i++) {
            const mcp_kernel_def *k = &t[i];
            if (!k->op_type || strcmp(k->op_type, node->op_type) != 0) continue;
            if (strcmp(k->domain, node->domain) != 0) continue;
            if (node->opset < k->since_version) continue;
            if (k->until_version && node->opset > k->until_version) continue;
            if (!best || k->since_version > best->since_version) best = k;
        }
    }
    return best;
}

const mcp_backend mcp__ref_backend = {
    .api_version = MCP_KERNEL_API_VERSION,
    .name = "ref",
    .priority = 0,
    .supports = ref_supports,
};

/* Kernels only a test build links in (tests/sandbox/probe_kernel.c): the
 * shipped binaries define no such backend, so the weak reference is NULL
 * there and the entry is skipped. */
extern const mcp_backend mcp__test_backend __attribute__((weak));

/* Backends in priority order; the reference backend is always last. */
static const mcp_backend *const backends[] = {
    &mcp__test_backend,
#ifdef MCP_WITH_DNNL
    &mcp__dnnl_backend,
#endif
    &mcp__ref_backend,
};

/* The first narrow type among node's inputs and outputs (sequence and
 * optional elements included) into *dt and the value's name; false when
 * there is none. */
static bool node_narrow_value(const mcp_node *node, const mcp_graph *graph, mcp_dtype *dt, const char **name)
{
    for (int k = 0; graph && k < node->n_inputs + node->n_outputs; k++) {
        int v = k < node->n_inputs ? node->inputs[k] : node->outputs[k - node->n_inputs];
        if (v < 0 || v >= graph->n_values) continue;
        const mcp_type *t = &graph->values[v].type;
        mcp_dtype d = t->dtype;
        if (mcp_dtype_is_narrow(d)) {
            *dt = d;
            *name = graph->values[v].name;
            return true;
        }
    }
    return false;
}

/* Whether kernel k takes narrow type dt (its narrow_types). */
static bool narrow_ok(const mcp_kernel_def *k, mcp_dtype dt)
{
    return k->narrow_types == MCP_NARROW_ALL || (k->narrow_types == MCP_NARROW_BYTES && !mcp_dtype_is_packed(dt));
}

mcp_status mcp_ops_resolve(const mcp_node *node, const mcp_graph *graph, const char *backend,
                           const mcp_kernel_def **out, const char **backend_name, mcp_err *err)
{
    mcp_dtype narrow = MCP_DTYPE_UNDEFINED;
    const char *narrow_name = NULL;
    bool has_narrow = node_narrow_value(node, graph, &narrow, &narrow_name);
    *out = NULL;
    bool any = !backend || !*backend || strcmp(backend, "auto") == 0;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        const mcp_backend *b = backends[i];
        if (!b) continue;
        MCP_ASSERT(b->api_version == MCP_KERNEL_API_VERSION);
        if (!any && strcmp(b->name, backend) != 0) continue;
        const mcp_kernel_def *k = b->supports(node, graph);
        if (!k) continue;
        if (has_narrow && !narrow_ok(k, narrow)) {
            if (b != &mcp__ref_backend) continue; /* the reference kernels may take it */
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                               "node '%s' (%s): value '%s' has element type %s, which this engine moves and converts "
                               "(Cast, CastLike, QuantizeLinear, DequantizeLinear, BitCast, Identity, Reshape, Flatten, "
                               "Squeeze, Unsqueeze, Shape, Size%s) but does not compute with in %s",
                               node->name, node->op_type, narrow_name, mcp_dtype_name(narrow),
                               mcp_dtype_is_packed(narrow) ? "" : ", Transpose, If, Loop", node->op_type);
        }
        if (k->check) {
            mcp_status st = k->check(node, graph, err);
            if (st != MCP_STATUS_OK) {
                mcp_err_prefix(err, "node '%s' (%s)", node->name, node->op_type);
                return st;
            }
        }
        *out = k;
        if (backend_name) *backend_name = b->name;
        return MCP_STATUS_OK;
    }
    if (!any) {
        bool known = false;
        for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
            known |= backends[i] && strcmp(backends[i]->name, backend) == 0;
        if (!known) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "unknown or unavailable backend '%s' (use auto, ref or dnnl)", backend);
    }
    return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                       "node '%s': op %s (domain '%s', opset %d) is not supported", node->name,
                       node->op_type, *node->domain ? node->domain : "ai.onnx", node->opset);
}

void mcp_ops_stamp(char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof backends / sizeof backends[0] && at + 1 < cap; i++) {
        const mcp_backend *b = backends[i];
        if (!b || !b->stamp) continue;
        char one[160];
        b->stamp(one, sizeof one);
        int n = snprintf(buf + at, cap - at, "%s%s", at ? "; " : "", one);
        if (n < 0) break;
        at += (size_t)n < cap - at ? (size_t)n : cap - at - 1;
    }
}

bool mcp_ops_node_bf16(const mcp_node *node)
{
    return node->kernel && node->kernel->computes_bf16 && node->kernel_state &&
           node->kernel->computes_bf16(node->kernel_state);
}

/* ---- kernel helpers ---- */

const mcp_tensor *mcp_kin(const mcp_kernel_ctx *ctx, int i)
{
    if (i < 0 || i >= ctx->n_inputs || !ctx->inputs[i]) return NULL;
    if (ctx->inputs[i]->kind != MCP_VALUE_TENSOR) return NULL;
    return &ctx->inputs[i]->tensor;
}

static void *host_output(const mcp_kernel_ctx *ctx, int i, size_t nbytes)
{
    const mcp_kernel_host *h = ctx->host;
    return h && h->output_buffer ? h->output_buffer(ctx->host_self, ctx->node, i, nbytes) : NULL;
}

static mcp_tensor *kout(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank, const int64_t *dims, bool zero)
{
    if (i < 0 || i >= ctx->n_outputs) {
        mcp_kfail(ctx, MCP_STATUS_INVALID_MODEL, "node has no output #%d", i);
        return NULL;
    }
    mcp_value *v = ctx->outputs[i];
    mcp_value_clear(v);
    v->kind = MCP_VALUE_TENSOR;
    mcp_tensor *t = &v->tensor;
    size_t nbytes = 0;
    mcp_status st = mcp_tensor_size_check(dtype, rank, dims, &nbytes, ctx->err);
    if (st == MCP_STATUS_OK && ctx->max_tensor_bytes && nbytes > ctx->max_tensor_bytes) {
        /* The inputs asked for it: INVALID_ARGUMENT (400), not a retry. */
        ctx->refused = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "output #%d would take %zu bytes, over this session's limit of %zu "
                                 "(max_tensor_bytes)", i, nbytes, ctx->max_tensor_bytes);
        return NULL;
    }
    void *p = st == MCP_STATUS_OK && dtype != MCP_DTYPE_STRING && nbytes ? host_output(ctx, i, nbytes) : NULL;
    if (p) {
        /* Planned memory may be an input's very storage (in-place
         * execution): the output keeps its data. Any other overlap with an
         * input (a run whose shapes differ from the recorded ones) takes the
         * heap instead. */
        bool alias = false, overlap = false;
        for (int j = 0; j < ctx->n_inputs; j++) {
            const mcp_tensor *x = mcp_kin(ctx, j);
            if (!x || !x->data) continue;
            const uint8_t *a = x->data, *b = p;
            size_t xn = mcp_tensor_nbytes(x);
            if (a == b && xn == nbytes) alias = true;
            else if (a < b + nbytes && b < a + xn) overlap = true;
        }
        if (!overlap) {
            if (zero && !alias) memset(p, 0, nbytes);
            t->dtype = dtype;
            t->rank = rank;
            if (rank > 0) memcpy(t->dims, dims, sizeof *dims * (size_t)rank);
            t->data = p;
            t->owns_data = false;
            return t;
        }
    }
    if (st == MCP_STATUS_OK) st = mcp_tensor_alloc(t, dtype, rank, dims, ctx->err);
    if (st != MCP_STATUS_OK) {
        mcp_err_prefix(ctx->err, "node '%s' (%s): output #%d", ctx->node->name, ctx->node->op_type, i);
        return NULL;
    }
    return t;
}

mcp_tensor *mcp_kout(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank, const int64_t *dims)
{
    return kout(ctx, i, dtype, rank, dims, true);
}

mcp_tensor *mcp_kout_uninit(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank, const int64_t *dims)
{
    return kout(ctx, i, dtype, rank, dims, false);
}

void *mcp_kscratch(mcp_kernel_ctx *ctx, int slot, size_t nbytes)
{
    const mcp_kernel_host *h = ctx->host;
    if (slot < 0 || slot >= MCP_KSCRATCH_SLOTS) return NULL;
    return h && h->scratch ? h->scratch(ctx->host_self, slot, nbytes) : NULL;
}

void mcp_knote_concat_inplace(mcp_kernel_ctx *ctx)
{
    const mcp_kernel_host *h = ctx->host;
    if (h && h->note_concat) h->note_concat(ctx->host_self);
}

mcp_status mcp_kernel_run_subgraph(mcp_kernel_ctx *ctx, const mcp_graph *g, int n_in,
                                   mcp_value *const *inputs, mcp_value **outputs)
{
    const mcp_kernel_host *h = ctx->host;
    if (n_in != g->n_inputs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_MODEL, "subgraph '%s' takes %d inputs, given %d", g->name,
                         g->n_inputs, n_in);
    if (!h || !h->run_subgraph)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "subgraph '%s' cannot run here", g->name);
    for (int i = 0; i < g->n_outputs; i++) mcp_value_clear(outputs[i]);
    return h->run_subgraph(ctx->host_self, ctx, g, inputs, outputs);
}

unsigned mcp_kernel_inplace_inputs(const mcp_node *n)
{
    return n->kernel ? n->kernel->inplace_inputs : 0;
}

bool mcp_kernel_release_plain_input(const mcp_node *n, int input, bool commit)
{
    const mcp_kernel_def *k = n->kernel;
    return k && k->release_plain_input && k->release_plain_input(n->kernel_state, input, commit);
}

mcp_tensor *mcp_kout_format(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank,
                            const int64_t *dims, const mcp_format *f)
{
    if (!f) return mcp_kout(ctx, i, dtype, rank, dims);
    if (i < 0 || i >= ctx->n_outputs || rank < 0 || rank > MCP_MAX_RANK) {
        mcp_kfail(ctx, MCP_STATUS_INTERNAL, "bad formatted output #%d", i);
        return NULL;
    }
    mcp_value *v = ctx->outputs[i];
    mcp_value_clear(v);
    v->kind = MCP_VALUE_TENSOR;
    mcp_tensor *t = &v->tensor;
    t->dtype = dtype;
    t->rank = rank;
    for (int d = 0; d < rank; d++) t->dims[d] = dims[d];
    t->format = f;
    t->data = host_output(ctx, i, f->nbytes);
    if (t->data) return t;
    t->data = mcp_malloc(f->nbytes ? f->nbytes : 1);
    if (!t->data) {
        mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory for output #%d (%zu bytes)", i, f->nbytes);
        return NULL;
    }
    t->owns_data = true;
    return t;
}

mcp_status mcp_tensor_make_plain(mcp_tensor *t, mcp_err *err)
{
    if (!t->format) return MCP_STATUS_OK;
    mcp_tensor plain = {0};
    mcp_status st = mcp_tensor_alloc(&plain, t->dtype, t->rank, t->dims, err);
    if (st != MCP_STATUS_OK) return st;
    st = t->format->to_plain(t->format, t->data, plain.data, err);
    if (st != MCP_STATUS_OK) {
        mcp_tensor_release(&plain);
        return st;
    }
    t->format = NULL;
    mcp_tensor_release(t);
    *t = plain;
    return MCP_STATUS_OK;
}

mcp_status mcp_kfail(mcp_kernel_ctx *ctx, mcp_status status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mcp_err_set(ctx->err, status, "node '%s' (%s): %s", ctx->node->name, ctx->node->op_type, msg);
}

int64_t mcp_kattr_int(const mcp_kernel_ctx *ctx, const char *name, int64_t dflt) { return mcp_node_attr_int(ctx->node, name, dflt); }
float mcp_kattr_float(const mcp_kernel_ctx *ctx, const char *name, float dflt) { return mcp_node_attr_float(ctx->node, name, dflt); }
const char *mcp_kattr_string(const mcp_kernel_ctx *ctx, const char *name, const char *dflt) { return mcp_node_attr_string(ctx->node, name, dflt); }
const int64_t *mcp_kattr_ints(const mcp_kernel_ctx *ctx, const char *name, int64_t *count) { return mcp_node_attr_ints(ctx->node, name, count); }
const float *mcp_kattr_floats(const mcp_kernel_ctx *ctx, const char *name, int64_t *count) { return mcp_node_attr_floats(ctx->node, name, count); }
const mcp_attr *mcp_kattr(const mcp_kernel_ctx *ctx, const char *name) { return mcp_node_attr(ctx->node, name); }

bool mcp_axis_normalize(int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}
