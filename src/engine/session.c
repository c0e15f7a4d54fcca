/* Sessions: load-time preparation and the public C API. */
#include <libgen.h>
#include <stdatomic.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/fold.h"
#include "engine/mcpir.h"

static mcp_err err_of(char *buf, size_t len)
{
    if (buf && len) buf[0] = '\0';
    return (mcp_err){buf, len};
}

mcp_session_options mcp_session_options_default(void)
{
    return (mcp_session_options){.threads = 0, .backend = NULL};
}

static void release_kernel_state(mcp_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        mcp_node *n = &g->nodes[i];
        if (n->kernel && n->kernel->release && n->kernel_state) n->kernel->release(n->kernel_state);
        n->kernel_state = NULL;
        for (int a = 0; a < n->n_attrs; a++) {
            if (n->attrs[a].g) release_kernel_state(n->attrs[a].g);
            for (int64_t k = 0; n->attrs[a].graphs && k < n->attrs[a].count; k++)
                release_kernel_state(n->attrs[a].graphs[k]);
        }
    }
}

/* True when graph g has subgraph attributes (captures are readers the
 * kernels cannot vouch for). */
static bool has_subgraphs(const mcp_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++)
        for (int a = 0; a < g->nodes[i].n_attrs; a++)
            if (g->nodes[i].attrs[a].g || g->nodes[i].attrs[a].graphs) return true;
    return false;
}

/* Frees initializer k's data when it is float, not a graph output, and every
 * reader (all among nodes [0, prepared)) keeps its own packed copy. */
static void release_if_packed(mcp_graph *g, int k, int prepared)
{
    mcp_tensor *t = &g->initializers[k];
    int v = g->initializer_values[k];
    if (!t->data || !t->owns_data || t->dtype != MCP_DTYPE_FLOAT) return;
    for (int o = 0; o < g->n_outputs; o++)
        if (g->outputs[o] == v) return;
    int readers = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++) {
            if (g->nodes[i].inputs[j] != v) continue;
            if (i >= prepared || !mcp_kernel_release_plain_input(&g->nodes[i], j, false)) return;
            readers++;
        }
    if (readers == 0) return;
    for (int i = 0; i < prepared; i++)
        for (int j = 0; j < g->nodes[i].n_inputs; j++)
            if (g->nodes[i].inputs[j] == v) mcp_kernel_release_plain_input(&g->nodes[i], j, true);
    mcp_free(t->data);
    t->data = NULL;
    t->owns_data = false;
}

/*
 * Weights resident once: after node `node` of the top graph is prepared,
 * the initializers it reads whose every reader is prepared and keeps its own
 * packed copy (oneDNN Conv and MatMul weights) lose their plain data. Done
 * node by node, so the load never holds both copies of all the weights.
 */
static void release_packed_inputs(mcp_graph *g, int node)
{
    const mcp_node *n = &g->nodes[node];
    for (int j = 0; j < n->n_inputs; j++) {
        int v = n->inputs[j];
        if (v < 0 || g->values[v].initializer < 0 || g->values[v].outer >= 0) continue;
        release_if_packed(g, g->values[v].initializer, node + 1);
    }
}

/* Chooses every node's kernel once, subgraphs included; with prepare,
 * also builds each kernel's constant state. */
static mcp_status resolve_kernels(mcp_graph *g, const char *backend, bool prepare, mcp_err *err);

/* resolve_kernels for node i alone (its subgraphs included). */
static mcp_status resolve_node(mcp_graph *g, int i, const char *backend, bool prepare, mcp_err *err)
{
    mcp_node *n = &g->nodes[i];
    for (int a = 0; a < n->n_attrs; a++) {
        mcp_status st = MCP_STATUS_OK;
        if (n->attrs[a].g) st = resolve_kernels(n->attrs[a].g, backend, prepare, err);
        for (int64_t k = 0; st == MCP_STATUS_OK && n->attrs[a].graphs && k < n->attrs[a].count; k++)
            st = resolve_kernels(n->attrs[a].graphs[k], backend, prepare, err);
        if (st != MCP_STATUS_OK) return st;
    }
    mcp_status st = mcp_ops_resolve(n, g, backend, &n->kernel, &n->kernel_backend, err);
    if (st != MCP_STATUS_OK) return st;
    if (prepare && n->kernel->prepare) {
        st = n->kernel->prepare(n, g, &n->kernel_state, err);
        if (st != MCP_STATUS_OK) mcp_err_prefix(err, "node '%s' (%s)", n->name, n->op_type);
    }
    return st;
}

static mcp_status resolve_kernels(mcp_graph *g, const char *backend, bool prepare, mcp_err *err)
{
    bool top_has_subgraphs = !g->parent && has_subgraphs(g);
    for (int i = 0; i < g->n_nodes; i++) {
        mcp_status st = resolve_node(g, i, backend, prepare, err);
        if (st != MCP_STATUS_OK) return st;
        if (prepare && !g->parent && !top_has_subgraphs) release_packed_inputs(g, i);
    }
    return MCP_STATUS_OK;
}

/*
 * Kernel preparation on several threads, for compiled models: their weights
 * are packed already, so preparing is mostly building the backend's
 * primitives (oneDNN generates their code then: 0.2-0.3 ms per convolution),
 * and nodes are independent. The workers are plain threads, not an OpenMP
 * team, each with the session's OpenMP budget: a primitive is built exactly
 * as on the loading thread (oneDNN sizes its work split by the budget and
 * would see a team as nesting). Nothing is released between nodes (the
 * compiled model holds no plain copies of packed weights).
 */
typedef struct prepare_job {
    mcp_graph *g;
    const char *backend;
    int threads;
    atomic_int next;
    atomic_bool failed;
    pthread_mutex_t lock;
    mcp_status st;
    mcp_err *err;
} prepare_job;

static void *prepare_worker(void *arg)
{
    prepare_job *job = arg;
    omp_set_num_threads(job->threads);
    char msg[1024];
    for (;;) {
        int i = atomic_fetch_add(&job->next, 1);
        if (i >= job->g->n_nodes || atomic_load(&job->failed)) break;
        mcp_err e = {msg, sizeof msg};
        msg[0] = '\0';
        mcp_status st = resolve_node(job->g, i, job->backend, true, &e);
        if (st == MCP_STATUS_OK) continue;
        pthread_mutex_lock(&job->lock);
        if (!atomic_exchange(&job->failed, true)) {
            job->st = st;
            mcp_err_set(job->err, st, "%s", msg);
        }
        pthread_mutex_unlock(&job->lock);
        break;
    }
    return NULL;
}

static mcp_status prepare_parallel(mcp_graph *g, const char *backend, int threads, mcp_err *err)
{
    enum { MAX_WORKERS = 8 };
    prepare_job job = {.g = g, .backend = backend, .threads = threads, .st = MCP_STATUS_OK, .err = err};
    atomic_init(&job.next, 0);
    atomic_init(&job.failed, false);
    pthread_mutex_init(&job.lock, NULL);
    int n = threads < MAX_WORKERS ? threads : MAX_WORKERS;
    pthread_t tid[MAX_WORKERS];
    int started = 0;
    for (int i = 1; i < n && i < g->n_nodes; i++)
        if (pthread_create(&tid[started], NULL, prepare_worker, &job) == 0) started++;
    prepare_worker(&job);
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&job.lock);
    return job.st;
}

/* Ops whose weights (input 1) a kernel may hold packed only. */
static bool packs_input(const mcp_node *n, int j)
{
    static const char *const ops[] = {"Conv", "MatMul", "Gemm", NULL};
    static const char *const internal[] = {"FusedConv", "FusedMatMul", "FusedGemm", NULL};
    const char *const *list = n->domain[0] == '\0' ? ops : strcmp(n->domain, MCP_DOMAIN_INTERNAL) == 0 ? internal : NULL;
    for (int i = 0; j == 1 && list && list[i]; i++)
        if (strcmp(n->op_type, list[i]) == 0) return true;
    return false;
}

/* When check_released looks: right after import, before kernels are
 * prepared, and after. */
enum { RELEASED_IMPORTED, RELEASED_RESOLVED, RELEASED_PREPARED };

/* A compiled model imports float weights without their plain data when its
 * kernels hold them packed: nothing but such kernels may read them (no
 * graph output, no subgraph capture). After import, each reader must be
 * the weights input of a Conv or matrix product (nothing looks at data
 * before that check); once kernels are chosen, each reader's kernel must
 * take packed weights and the file must have them for that node; once
 * prepared, each must have adopted them. */
static mcp_status check_released(const mcp_graph *g, int stage, mcp_err *err)
{
    for (int k = 0; k < g->n_initializers; k++) {
        const mcp_tensor *t = &g->initializers[k];
        if (t->data || mcp_tensor_nbytes(t) == 0) continue;
        int v = g->initializer_values[k];
        const char *name = g->values[v].name;
        bool bad = has_subgraphs(g);
        for (int o = 0; o < g->n_outputs; o++) bad |= g->outputs[o] == v;
        for (int i = 0; !bad && i < g->n_nodes; i++)
            for (int j = 0; j < g->nodes[i].n_inputs; j++)
                if (g->nodes[i].inputs[j] == v &&
                    !(stage == RELEASED_PREPARED   ? mcp_kernel_release_plain_input(&g->nodes[i], j, false)
                      : stage == RELEASED_RESOLVED ? g->nodes[i].kernel && g->nodes[i].kernel->packed_weights &&
                                                         mcp_graph_prepacked(g, &g->nodes[i], 0)
                                                   : packs_input(&g->nodes[i], j))) {
                    return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                                       "initializer '%s' is held packed only, and node '%s' (%s) does not read the packed copy",
                                       name, g->nodes[i].name, g->nodes[i].op_type);
                }
        if (bad)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                               "initializer '%s' is held packed only, yet a graph output or a subgraph reads it", name);
    }
    return MCP_STATUS_OK;
}

static void fill_io(mcp_io_info *info, const mcp_graph_value *v)
{
    info->name = v->name;
    info->kind = v->type.kind == MCP_VALUE_SEQUENCE ? MCP_KIND_SEQUENCE : MCP_KIND_TENSOR;
    info->optional = v->type.is_optional;
    info->dtype = v->type.dtype;
    info->rank = v->type.rank;
    info->dims = v->type.dims;
    info->dim_params = (const char *const *)v->type.dim_params;
}

/* The backend options name (or MCP_BACKEND, or "auto"). */
static const char *effective_backend(const mcp_session_options *o)
{
    const char *backend = o->backend;
    if (!backend) backend = getenv("MCP_BACKEND");
    return backend && *backend ? backend : "auto";
}

static int effective_threads(const mcp_session_options *o)
{
    /* The default intra-op budget is every online core (as ONNX Runtime's);
     * servers running several instances pass their share. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return o->threads > 0 ? o->threads : cores > 0 ? (int)cores : 1;
}

/* Creates a session from the model bytes; with `owned_buf` the bytes are
 * freed as soon as they are decoded (before the weights are transformed, so
 * the file's copy does not add to the load's peak memory). With `ir`, from
 * a compiled model instead: its graph is already optimized (no passes) and
 * its kernels adopt its packed weights; the caller keeps ir's bytes alive
 * for the session (see mcp_session.ir_map). */
static mcp_status session_create(const uint8_t *buf, uint8_t *owned_buf, size_t len, const char *base_dir,
                                 const mcpir_file *ir, const mcp_session_options *opts, mcp_session **out,
                                 mcp_err *err)
{
    *out = NULL;
    mcp_session_options o = opts ? *opts : mcp_session_options_default();
    const char *backend = effective_backend(&o);
    if (strcmp(backend, "auto") != 0 && strcmp(backend, "ref") != 0 && strcmp(backend, "dnnl") != 0) {
        mcp_free(owned_buf);
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "unknown backend '%s' (use auto, ref or dnnl)", backend);
    }
    mcp_session *s = mcp_calloc(1, sizeof *s);
    if (!s) {
        mcp_free(owned_buf);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    pthread_mutex_init(&s->ctx_lock, NULL);
    s->threads = effective_threads(&o);
    s->adaptive_threads = o.adaptive_threads != 0;
    s->max_tensor_bytes = o.max_tensor_bytes;
    snprintf(s->backend, sizeof s->backend, "%s", backend);
    mcp_status st = ir ? mcp_onnx_import_blob(ir->graph, ir->graph_len, &ir->blob, &s->graph, err)
                       : mcp_onnx_import(buf, len, base_dir, &s->graph, err);
    mcp_free(owned_buf);
    if (st == MCP_STATUS_OK && ir) st = check_released(s->graph, RELEASED_IMPORTED, err);
    /* Shapes first (the passes need ranks), then the graph passes, then
     * shapes again for the nodes the passes created. */
    if (st == MCP_STATUS_OK) st = mcp_graph_infer_shapes(s->graph, err);
    /* Every node must be supported, dead ones included: a model that names
     * an op we cannot run fails at load whatever the passes remove. */
    if (st == MCP_STATUS_OK) st = resolve_kernels(s->graph, s->backend, false, err);
    if (st == MCP_STATUS_OK && !o.no_graph_passes && !ir) {
        st = mcp_graph_fuse_quantized(s->graph, o.fuse_quantized_sums != 0, err);
        if (st == MCP_STATUS_OK) st = mcp__fold_constants(s->graph, err);
        if (st == MCP_STATUS_OK) st = mcp_graph_optimize(s->graph, err);
        if (st == MCP_STATUS_OK) st = mcp_graph_infer_shapes(s->graph, err);
    }
    if (st == MCP_STATUS_OK) {
        s->graph->bf16 = o.bf16 != 0;
        if (ir) {
            s->graph->prepacked = ir->packed;
            s->graph->n_prepacked = ir->n_packed;
            st = check_released(s->graph, RELEASED_RESOLVED, err);
        }
    }
    /* Kernels built at load see the thread budget they will run with. */
    int prev_threads = omp_get_max_threads();
    omp_set_num_threads(s->threads);
    if (st == MCP_STATUS_OK)
        st = ir ? prepare_parallel(s->graph, s->backend, s->threads, err) : resolve_kernels(s->graph, s->backend, true, err);
    omp_set_num_threads(prev_threads);
    if (s->graph) {
        /* The kernels took what they adopt; the table goes with ir. */
        s->graph->prepacked = NULL;
        s->graph->n_prepacked = 0;
    }
    if (st == MCP_STATUS_OK && ir) st = check_released(s->graph, RELEASED_PREPARED, err);
    if (st == MCP_STATUS_OK) st = mcp_graph_plan_lifetimes(s->graph, err);
    if (st == MCP_STATUS_OK && o.profile) {
        size_t n = (size_t)s->graph->n_nodes + 1;
        s->prof_ns = mcp_calloc(n, sizeof *s->prof_ns);
        s->prof_calls = mcp_calloc(n, sizeof *s->prof_calls);
        if (!s->prof_ns || !s->prof_calls) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (st == MCP_STATUS_OK) {
        const mcp_graph *g = s->graph;
        s->inputs = mcp_calloc((size_t)g->n_inputs + 1, sizeof *s->inputs);
        s->outputs = mcp_calloc((size_t)g->n_outputs + 1, sizeof *s->outputs);
        if (!s->inputs || !s->outputs) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        for (int i = 0; st == MCP_STATUS_OK && i < g->n_inputs; i++) fill_io(&s->inputs[i], &g->values[g->inputs[i]]);
        for (int i = 0; st == MCP_STATUS_OK && i < g->n_outputs; i++) fill_io(&s->outputs[i], &g->values[g->outputs[i]]);
    }
    if (st != MCP_STATUS_OK) {
        mcp_session_destroy(s);
        return st;
    }
    *out = s;
    return MCP_STATUS_OK;
}

mcp_status mcp__session_create(const uint8_t *buf, size_t len, const char *base_dir,
                               const mcp_session_options *opts, mcp_session **out, mcp_err *err)
{
    return session_create(buf, NULL, len, base_dir, NULL, opts, out, err);
}

void mcp_session_trim(mcp_session *s)
{
    mcp__runctx *rc;
    while ((rc = mcp__runctx_take(s, false)) != NULL) mcp__runctx_free(rc);
}

void mcp_session_destroy(mcp_session *s)
{
    if (!s) return;
    if (s->graph) {
        release_kernel_state(s->graph);
        mcp_graph_free(s->graph);
    }
    mcp_session_trim(s);
    pthread_mutex_destroy(&s->ctx_lock);
    mcp_free(s->inputs);
    mcp_free(s->outputs);
    mcp_free((void *)s->prof_ns);
    mcp_free((void *)s->prof_calls);
    /* Last: the weights and kernels above borrowed these bytes. */
    if (s->ir_map) munmap(s->ir_map, s->ir_map_len);
    mcp_free(s->ir_heap);
    mcp_free(s->note);
    mcp_free(s);
}

const char *mcp_session_load_note(const mcp_session *s) { return s->note; }

/*
 * A compiled model whose stamp matches this machine and these options
 * loads from its own graph and packed weights; otherwise, or when that
 * fails, from the ONNX it embeds, and the session's note says why. `f` is
 * closed here, or its bytes move into the session.
 */
static mcp_status create_from_ir(mcpir_file *f, void *heap, const char *base_dir, const mcp_session_options *opts,
                                 mcp_session **out, mcp_err *err)
{
    mcp_session_options o = opts ? *opts : mcp_session_options_default();
    char want[MCPIR_STAMP_MAX], note[1200] = "", why[700] = "";
    mcp__mcpir_stamp(effective_backend(&o), effective_threads(&o), mcp__mcpir_options(&o), want, sizeof want);
    mcp_status st;
    if (strcmp(want, f->stamp) == 0) {
        mcp_err e2 = {why, sizeof why};
        st = session_create(NULL, NULL, 0, NULL, f, &o, out, &e2);
        if (st == MCP_STATUS_OK) {
            (*out)->ir_map = f->map;
            (*out)->ir_map_len = f->map_len;
            (*out)->ir_heap = heap;
            f->map = NULL;
            mcp__mcpir_close(f);
            return MCP_STATUS_OK;
        }
        if (st == MCP_STATUS_OUT_OF_MEMORY) {
            mcp__mcpir_close(f);
            mcp_free(heap);
            return mcp_err_set(err, st, "%s", why);
        }
        snprintf(note, sizeof note, "the compiled graph could not be used (%s); recompiled from the embedded ONNX", why);
    } else {
        snprintf(note, sizeof note, "compiled for \"%s\", not for this machine and these options (\"%s\"); recompiled from the embedded ONNX",
                 f->stamp, want);
    }
    st = session_create(f->source, NULL, f->source_len, base_dir, NULL, &o, out, err);
    mcp__mcpir_close(f);
    mcp_free(heap);
    if (st == MCP_STATUS_OK && !((*out)->note = mcp_strdup(note))) {
        mcp_session_destroy(*out);
        *out = NULL;
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (st != MCP_STATUS_OK) mcp_err_prefix(err, "embedded ONNX");
    return st;
}

/* Whether the file at path starts with the .mcpir magic. */
static bool file_is_mcpir(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    uint8_t head[8];
    bool is = fread(head, 1, sizeof head, fp) == sizeof head && mcp__mcpir_is(head, sizeof head);
    fclose(fp);
    return is;
}

mcp_status mcp_compile(const char *onnx_path, const char *out_path, const mcp_session_options *opts, char *err,
                       size_t err_len)
{
    mcp_err e = err_of(err, err_len);
    if (file_is_mcpir(onnx_path)) return mcp_err_set(&e, MCP_STATUS_INVALID_ARGUMENT, "%s is compiled already", onnx_path);
    uint8_t *buf;
    size_t len;
    mcp_status st = mcp_file_read(onnx_path, &buf, &len, &e);
    if (st != MCP_STATUS_OK) return st;
    char *copy = mcp_strdup(onnx_path);
    mcp_session *s = NULL;
    if (!copy) st = mcp_err_set(&e, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    else st = session_create(buf, NULL, len, dirname(copy), NULL, opts, &s, &e);
    mcp_free(copy);
    if (st != MCP_STATUS_OK) mcp_err_prefix(&e, "%s", onnx_path);
    else if (s->graph->external_data)
        /* The fallback loads the embedded .onnx bytes: their external
         * files would have to travel beside every copy of the .mcpir. */
        st = mcp_err_set(&e, MCP_STATUS_UNSUPPORTED,
                         "%s keeps tensor data in external files; compile a model with its data inline", onnx_path);
    else st = mcp__mcpir_write(s, mcp__mcpir_options(opts), buf, len, out_path, &e);
    mcp_session_destroy(s);
    mcp_free(buf);
    return st;
}

int mcp_session_profile(const mcp_session *s, mcp_node_profile *out, int cap)
{
    if (!s->prof_ns) return -1;
    const mcp_graph *g = s->graph;
    for (int i = 0; i < g->n_nodes && i < cap; i++) {
        const mcp_node *n = &g->nodes[i];
        out[i] = (mcp_node_profile){
            .name = n->name,
            .op_type = n->op_type,
            .backend = n->kernel_backend ? n->kernel_backend : "",
            .calls = atomic_load(&s->prof_calls[i]),
            .total_ms = (double)atomic_load(&s->prof_ns[i]) / 1e6,
        };
    }
    return g->n_nodes;
}

const char *mcp_session_precision(const mcp_session *s)
{
    const mcp_graph *g = s->graph;
    for (int i = 0; g->bf16 && i < g->n_nodes; i++)
        if (mcp_ops_node_bf16(&g->nodes[i])) return "bf16";
    return "fp32";
}

void mcp_session_profile_reset(const mcp_session *s)
{
    for (int i = 0; s->prof_ns && i < s->graph->n_nodes; i++) {
        atomic_store(&s->prof_ns[i], 0);
        atomic_store(&s->prof_calls[i], 0);
    }
}

/* Checks a caller's value against the graph input's declared type. */
static mcp_status check_input(const mcp_graph_value *gv, const mcp_value *v, mcp_err *err)
{
    const mcp_type *t = &gv->type;
    if (v->kind == MCP_VALUE_NONE) {
        if (!t->is_optional)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s': an empty optional was given for a non-optional input", gv->name);
        return MCP_STATUS_OK;
    }
    if (t->kind == MCP_VALUE_SEQUENCE) {
        if (v->kind != MCP_VALUE_SEQUENCE)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must be a sequence", gv->name);
        for (int64_t i = 0; i < v->seq_len; i++)
            if (t->dtype != MCP_DTYPE_UNDEFINED && v->seq[i].dtype != t->dtype)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s': sequence element %lld has dtype %s, expected %s",
                                   gv->name, (long long)i, mcp_dtype_name(v->seq[i].dtype), mcp_dtype_name(t->dtype));
        return MCP_STATUS_OK;
    }
    if (v->kind != MCP_VALUE_TENSOR)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must be a tensor", gv->name);
    const mcp_tensor *x = &v->tensor;
    if (t->dtype != MCP_DTYPE_UNDEFINED && x->dtype != t->dtype)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has dtype %s, the model expects %s", gv->name,
                           mcp_dtype_name(x->dtype), mcp_dtype_name(t->dtype));
    if (t->rank >= 0) {
        char a[128], b[128];
        bool ok = x->rank == t->rank;
        for (int i = 0; ok && i < t->rank; i++) ok = t->dims[i] < 0 || t->dims[i] == x->dims[i];
        if (!ok) {
            /* Print the expected shape with '?' for dynamic dims. */
            size_t off = 0;
            off += (size_t)snprintf(b + off, sizeof b - off, "[");
            for (int i = 0; i < t->rank && off < sizeof b; i++) {
                if (t->dims[i] >= 0) off += (size_t)snprintf(b + off, sizeof b - off, i ? ",%lld" : "%lld", (long long)t->dims[i]);
                else off += (size_t)snprintf(b + off, sizeof b - off, i ? ",%s" : "%s", t->dim_params[i] ? t->dim_params[i] : "?");
            }
            if (off < sizeof b) snprintf(b + off, sizeof b - off, "]");
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has shape %s, the model expects %s", gv->name,
                               mcp_shape_str(x->rank, x->dims, a, sizeof a), b);
        }
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__session_run(const mcp_session *s, mcp_value *const *inputs, mcp_value **outputs, mcp_err *err)
{
    const mcp_graph *g = s->graph;
    for (int i = 0; i < g->n_inputs; i++) {
        const mcp_graph_value *gv = &g->values[g->inputs[i]];
        if (!inputs[i]) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "missing input '%s'", gv->name);
        mcp_status st = check_input(gv, inputs[i], err);
        if (st != MCP_STATUS_OK) return st;
    }
    /* The session's intra-op budget applies to this thread's parallel
     * regions, ours and oneDNN's, for the length of the run. */
    int prev_threads = omp_get_max_threads();
    if (prev_threads != s->threads) omp_set_num_threads(s->threads);
    /* The idle list lives in a session that is otherwise read-only. */
    mcp_session *ms = (mcp_session *)s;
    mcp__runctx *rc = mcp__runctx_take(ms, true);
    mcp_status st = rc ? mcp__exec_top(s, rc, inputs, outputs, err)
                       : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for a run context");
    if (rc) mcp__runctx_give(ms, rc);
    if (prev_threads != s->threads) omp_set_num_threads(prev_threads);
    return st;
}

/* ---- public API ---- */

mcp_status mcp_session_create_from_memory(const void *buf, size_t len, const char *base_dir,
                                          const mcp_session_options *opts, mcp_session **out,
                                          char *err, size_t err_len)
{
    mcp_err e = err_of(err, err_len);
    if (mcp__mcpir_is(buf, len)) {
        /* The weights borrow the bytes: a 64-byte aligned copy the session
         * keeps. */
        *out = NULL;
        uint8_t *heap = mcp_malloc(len + 64);
        if (!heap) return mcp_err_set(&e, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        uint8_t *copy = heap + (64 - (uintptr_t)heap % 64) % 64;
        memcpy(copy, buf, len);
        mcpir_file f;
        mcp_status st = mcp__mcpir_parse(copy, len, &f, &e);
        if (st != MCP_STATUS_OK) {
            mcp_free(heap);
            return st;
        }
        return create_from_ir(&f, heap, base_dir, opts, out, &e);
    }
    return mcp__session_create(buf, len, base_dir, opts, out, &e);
}

mcp_status mcp_session_create_from_file(const char *path, const mcp_session_options *opts,
                                        mcp_session **out, char *err, size_t err_len)
{
    mcp_err e = err_of(err, err_len);
    *out = NULL;
    if (file_is_mcpir(path)) {
        mcpir_file f;
        char *copy = mcp_strdup(path);
        mcp_status st = copy ? mcp__mcpir_open(path, &f, &e) : mcp_err_set(&e, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (st == MCP_STATUS_OK) st = create_from_ir(&f, NULL, dirname(copy), opts, out, &e);
        mcp_free(copy);
        if (st != MCP_STATUS_OK) mcp_err_prefix(&e, "%s", path);
        return st;
    }
    uint8_t *buf;
    size_t len;
    mcp_status st = mcp_file_read(path, &buf, &len, &e);
    if (st != MCP_STATUS_OK) return st;
    char *copy = mcp_strdup(path);
    if (!copy) {
        mcp_free(buf);
        return mcp_err_set(&e, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    st = session_create(buf, buf, len, dirname(copy), NULL, opts, out, &e);
    mcp_free(copy);
    if (st != MCP_STATUS_OK) mcp_err_prefix(&e, "%s", path);
    return st;
}

int mcp_session_input_count(const mcp_session *s) { return s->graph->n_inputs; }
int mcp_session_output_count(const mcp_session *s) { return s->graph->n_outputs; }

mcp_status mcp_session_input_info(const mcp_session *s, int i, mcp_io_info *info)
{
    if (i < 0 || i >= s->graph->n_inputs) return MCP_STATUS_NOT_FOUND;
    *info = s->inputs[i];
    return MCP_STATUS_OK;
}

mcp_status mcp_session_output_info(const mcp_session *s, int i, mcp_io_info *info)
{
    if (i < 0 || i >= s->graph->n_outputs) return MCP_STATUS_NOT_FOUND;
    *info = s->outputs[i];
    return MCP_STATUS_OK;
}

mcp_status mcp_session_run(const mcp_session *s, int n_inputs, const char *const *names,
                           mcp_value *const *inputs, int n_outputs, const char *const *out_names,
                           mcp_value **out_values, char *err, size_t err_len)
{
    mcp_err e = err_of(err, err_len);
    const mcp_graph *g = s->graph;
    mcp_status st = MCP_STATUS_OK;
    mcp_value **ins = mcp_calloc((size_t)g->n_inputs + 1, sizeof *ins);
    mcp_value **outs = mcp_calloc((size_t)g->n_outputs + 1, sizeof *outs);
    if (!ins || !outs) {
        st = mcp_err_set(&e, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int k = 0; k < n_inputs; k++) {
        int found = -1;
        for (int i = 0; i < g->n_inputs; i++)
            if (strcmp(g->values[g->inputs[i]].name, names[k]) == 0) found = i;
        if (found < 0) {
            char list[512] = "";
            size_t off = 0;
            for (int i = 0; i < g->n_inputs && off < sizeof list; i++)
                off += (size_t)snprintf(list + off, sizeof list - off, "%s'%s'", i ? ", " : "", g->values[g->inputs[i]].name);
            st = mcp_err_set(&e, MCP_STATUS_INVALID_ARGUMENT, "unknown input '%s' (the model's inputs are %s)", names[k], list);
            goto done;
        }
        if (ins[found]) {
            st = mcp_err_set(&e, MCP_STATUS_INVALID_ARGUMENT, "input '%s' given twice", names[k]);
            goto done;
        }
        ins[found] = inputs[k];
    }
    int *sel = NULL;
    int n_sel = out_names ? n_outputs : g->n_outputs;
    if (out_names) {
        sel = mcp_calloc((size_t)n_sel + 1, sizeof *sel);
        if (!sel) {
            st = mcp_err_set(&e, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        for (int k = 0; k < n_sel; k++) {
            sel[k] = -1;
            for (int i = 0; i < g->n_outputs; i++)
                if (strcmp(g->values[g->outputs[i]].name, out_names[k]) == 0) sel[k] = i;
            if (sel[k] < 0) {
                st = mcp_err_set(&e, MCP_STATUS_INVALID_ARGUMENT, "unknown output '%s'", out_names[k]);
                mcp_free(sel);
                goto done;
            }
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        outs[i] = mcp_value_new();
        if (!outs[i]) st = mcp_err_set(&e, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (st == MCP_STATUS_OK) st = mcp__session_run(s, ins, outs, &e);
    for (int k = 0; k < n_sel; k++) out_values[k] = NULL;
    if (st == MCP_STATUS_OK) {
        for (int k = 0; k < n_sel; k++) {
            int i = sel ? sel[k] : k;
            if (outs[i]) {
                out_values[k] = outs[i];
                outs[i] = NULL;
            } else {
                /* The same output selected twice: copy the earlier slot. */
                int first = 0;
                while (first < k && (sel ? sel[first] : first) != i) first++;
                out_values[k] = mcp_value_new();
                if (!out_values[k] || mcp_value_copy(out_values[k], out_values[first], &e) != MCP_STATUS_OK)
                    st = mcp_err_set(&e, MCP_STATUS_OUT_OF_MEMORY, "out of memory copying output");
            }
        }
    }
    mcp_free(sel);
done:
    if (outs)
        for (int i = 0; i < g->n_outputs; i++) mcp_value_free(outs[i]);
    mcp_free(ins);
    mcp_free(outs);
    return st;
}

mcp_value *mcp_value_create_tensor(mcp_dtype dtype, int rank, const int64_t *dims, const void *data,
                                   char *err, size_t err_len)
{
    mcp_err e = err_of(err, err_len);
    mcp_value *v = mcp_value_new();
    if (!v) return NULL;
    if (mcp_tensor_alloc(&v->tensor, dtype, rank, dims, &e) != MCP_STATUS_OK) {
        mcp_value_free(v);
        return NULL;
    }
    int64_t n = mcp_tensor_numel(&v->tensor);
    if (data && dtype == MCP_DTYPE_STRING) {
        const char *const *s = data;
        for (int64_t i = 0; i < n; i++)
            if (mcp_tensor_set_string(&v->tensor, i, s[i], strlen(s[i])) != MCP_STATUS_OK) {
                mcp_value_free(v);
                return NULL;
            }
    } else if (data && n) {
        memcpy(v->tensor.data, data, mcp_tensor_nbytes(&v->tensor));
    }
    return v;
}

void mcp_value_destroy(mcp_value *v) { mcp_value_free(v); }

int mcp_value_get_kind(const mcp_value *v) { return (int)v->kind; }

mcp_status mcp_value_get_tensor(const mcp_value *v, mcp_dtype *dtype, int *rank, const int64_t **dims,
                                const void **data)
{
    if (!v || v->kind != MCP_VALUE_TENSOR) return MCP_STATUS_INVALID_ARGUMENT;
    if (dtype) *dtype = v->tensor.dtype;
    if (rank) *rank = v->tensor.rank;
    if (dims) *dims = v->tensor.dims;
    if (data) *data = v->tensor.data;
    return MCP_STATUS_OK;
}

int64_t mcp_value_sequence_length(const mcp_value *v) { return v->kind == MCP_VALUE_SEQUENCE ? v->seq_len : -1; }
