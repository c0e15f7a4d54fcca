/* Loading one model version: session, protocol metadata, warm-up. */
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/quantize.h"
#include "mcp/llm.h"
#include "registry/descriptor_util.h"
#include "registry/registry.h"

const char *mcp_model_state_name(mcp_model_state s)
{
    switch (s) {
    case MCP_MODEL_LOADING: return "LOADING";
    case MCP_MODEL_READY: return "READY";
    case MCP_MODEL_UNLOADING: return "UNLOADING";
    case MCP_MODEL_UNAVAILABLE: return "UNAVAILABLE";
    }
    return "UNKNOWN";
}

static const mcp_io_spec *find_spec(const mcp_io_spec *specs, int n, const char *graph_name)
{
    for (int i = 0; i < n; i++) {
        const char *g = specs[i].graph_name ? specs[i].graph_name : specs[i].name;
        if (strcmp(g, graph_name) == 0) return &specs[i];
    }
    return NULL;
}

static void why_add(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_add(char *why, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(why);
    if (n + 3 >= cap) return;
    if (n) {
        snprintf(why + n, cap - n, "; ");
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + n, cap - n, fmt, ap);
    va_end(ap);
}

/* A Triton folder's config.pbtxt against the graph: every input and
 * output it declares exists, with its dtype and shape (both sides named). */
static void config_vs_graph(const mcp_descriptor *cfg, const mcp_session *s, char *why, size_t cap, mcp_status *st)
{
    char a[128], b[128];
    for (int side = 0; side < 2; side++) {
        const mcp_io_spec *specs = side ? cfg->outputs : cfg->inputs;
        int n = side ? cfg->n_outputs : cfg->n_inputs;
        const mcp_io_info *io = side ? s->outputs : s->inputs;
        int n_io = side ? s->graph->n_outputs : s->graph->n_inputs;
        const char *kind = side ? "output" : "input";
        for (int i = 0; i < n; i++) {
            const char *gname = specs[i].graph_name ? specs[i].graph_name : specs[i].name;
            const mcp_io_info *x = NULL;
            for (int k = 0; k < n_io && !x; k++)
                if (!strcmp(io[k].name, gname)) x = &io[k];
            if (!x) {
                why_add(why, cap, "config.pbtxt %s '%s' is not an %s of the model", kind, gname, kind);
                *st = MCP_STATUS_INVALID_ARGUMENT;
                continue;
            }
            bool dtype_ok = specs[i].dtype == MCP_DTYPE_UNDEFINED || x->dtype == MCP_DTYPE_UNDEFINED || specs[i].dtype == x->dtype;
            bool shape_ok = specs[i].rank < 0 || x->rank < 0 || specs[i].rank == x->rank;
            for (int d = 0; shape_ok && specs[i].rank >= 0 && d < specs[i].rank; d++)
                shape_ok = specs[i].dims[d] < 0 || x->dims[d] < 0 || specs[i].dims[d] == x->dims[d];
            if (dtype_ok && shape_ok) continue;
            why_add(why, cap, "%s '%s': config.pbtxt says %s %s, the model has %s %s", kind, gname,
                    mcp_dtype_name(specs[i].dtype), mcp_shape_str(specs[i].rank < 0 ? 0 : specs[i].rank, specs[i].dims, a, sizeof a),
                    mcp_dtype_name(x->dtype), mcp_shape_str(x->rank < 0 ? 0 : x->rank, x->dims, b, sizeof b));
            *st = MCP_STATUS_INVALID_ARGUMENT;
        }
    }
}

/* Fills protocol metadata for one graph input/output, applying the
 * descriptor's mapping and checking what it declares. */
static mcp_status fill_meta(mcp_tensor_meta *m, const mcp_io_info *io, const mcp_io_spec *spec, bool casted,
                            const char *what, mcp_err *err)
{
    m->graph_name = io->name;
    m->name = spec ? spec->name : io->name;
    if (io->kind != MCP_KIND_TENSOR)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "%s '%s' is a sequence or optional; only tensors can be served", what,
                           io->name);
    m->dtype = io->dtype;
    if (spec && spec->dtype != MCP_DTYPE_UNDEFINED && !casted) {
        if (io->dtype != MCP_DTYPE_UNDEFINED && spec->dtype != io->dtype)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s '%s': the descriptor says %s, the model has %s", what,
                               m->name, mcp_dtype_name(spec->dtype), mcp_dtype_name(io->dtype));
        m->dtype = spec->dtype;
    }
    m->rank = io->rank;
    for (int d = 0; d < io->rank && d < MCP_MAX_RANK; d++) m->dims[d] = io->dims[d] >= 0 ? io->dims[d] : -1;
    if (spec && spec->rank >= 0) {
        if (io->rank >= 0 && spec->rank != io->rank)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s '%s': the descriptor gives rank %d, the model has rank %d",
                               what, m->name, spec->rank, io->rank);
        for (int d = 0; d < spec->rank; d++) {
            if (io->rank >= 0 && io->dims[d] >= 0 && spec->dims[d] >= 0 && io->dims[d] != spec->dims[d])
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s '%s': dimension %d is %lld in the descriptor, %lld in the model",
                                   what, m->name, d, (long long)spec->dims[d], (long long)io->dims[d]);
            if (spec->dims[d] >= 0) m->dims[d] = spec->dims[d];
        }
        m->rank = spec->rank;
    }
    if (m->dtype == MCP_DTYPE_UNDEFINED)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s '%s' has no dtype in the model; give one in the descriptor", what,
                           m->name);
    if (m->rank < 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s '%s' has no shape in the model; give one in the descriptor", what,
                           m->name);
    return MCP_STATUS_OK;
}

/* One run on zeros (batch 1) so the first request does not pay for lazy
 * work, and so a model that cannot run fails at load, not per request.
 * Shapes come from the model's own static dimensions; a dimension the model
 * leaves open takes the descriptor's value when it gives one (a model may
 * need it), else 1; the batch dimension is always 1. The inputs' bytes are
 * capped by the server (max_bytes), so a descriptor cannot make the load
 * allocate or compute without bound. */
static mcp_status warm_up(mcp_model_version *v, int64_t max_bytes, mcp_err *err)
{
    const mcp_graph *g = v->session->graph;
    mcp_value **ins = mcp_calloc((size_t)g->n_inputs + 1, sizeof *ins);
    mcp_value **outs = mcp_calloc((size_t)g->n_outputs + 1, sizeof *outs);
    mcp_status st = ins && outs ? MCP_STATUS_OK : MCP_STATUS_OUT_OF_MEMORY;
    bool batched = v->desc->max_batch_size > 0;
    double total = 0;
    for (int i = 0; st == MCP_STATUS_OK && i < v->n_inputs; i++) {
        const mcp_tensor_meta *m = &v->inputs[i];
        const mcp_io_info *io = &v->session->inputs[i];
        int64_t dims[MCP_MAX_RANK];
        double bytes = mcp_dtype_size(m->dtype) > 0 ? mcp_dtype_size(m->dtype) : 8;
        for (int d = 0; d < m->rank; d++) {
            int64_t own = d < io->rank ? io->dims[d] : -1;
            dims[d] = own >= 0 ? own : (d == 0 && batched) || m->dims[d] < 0 ? 1 : m->dims[d];
            bytes *= (double)dims[d];
        }
        total += bytes;
        if (max_bytes > 0 && total > (double)max_bytes) {
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                             "warm-up inputs would take %.0f bytes (input '%s' and those before it); this server allows %lld "
                             "(check the shapes the descriptor declares)",
                             total, m->name, (long long)max_bytes);
            break;
        }
        ins[i] = mcp_value_new();
        if (!ins[i]) st = MCP_STATUS_OUT_OF_MEMORY;
        else st = mcp_tensor_alloc(&ins[i]->tensor, m->dtype, m->rank, dims, err);
    }
    for (int i = 0; st == MCP_STATUS_OK && i < g->n_outputs; i++)
        if (!(outs[i] = mcp_value_new())) st = MCP_STATUS_OUT_OF_MEMORY;
    if (st == MCP_STATUS_OK) st = mcp__session_run(v->session, ins, outs, err);
    if (st != MCP_STATUS_OK) mcp_err_prefix(err, "warm-up run on zeros (batch 1) failed");
    for (int i = 0; ins && i < g->n_inputs; i++) mcp_value_free(ins[i]);
    for (int i = 0; outs && i < g->n_outputs; i++) mcp_value_free(outs[i]);
    mcp_free(ins);
    mcp_free(outs);
    return st;
}

mcp_status mcp_model_version_load(mcp_descriptor *desc, const mcp_descriptor_defaults *server, mcp_model_version **out,
                                  mcp_err *err)
{
    return mcp_model_version_load_phased(desc, server, NULL, NULL, out, err);
}

static mcp_status load_charged(mcp_model_version *v, mcp_descriptor *desc, const mcp_descriptor_defaults *server,
                               mcp_load_phase_fn phase, void *phase_user, mcp_err *err);

mcp_status mcp_model_version_load_phased(mcp_descriptor *desc, const mcp_descriptor_defaults *server,
                                         mcp_load_phase_fn phase, void *phase_user, mcp_model_version **out, mcp_err *err)
{
    *out = NULL;
    mcp_model_version *v = mcp_calloc(1, sizeof *v);
    if (!v) {
        mcp_descriptor_free(desc);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    atomic_init(&v->refs, 1);
    /* Everything the load allocates on this thread is the model's. */
    v->account = mcp_mem_account_create();
    if (v->account && desc->memory_bytes > 0) mcp_mem_account_set_limit(v->account, desc->memory_bytes);
    mcp_mem_account *prev = mcp_mem_account_use(v->account);
    mcp_status st = load_charged(v, desc, server, phase, phase_user, err);
    mcp_mem_account_use(prev);
    if (st != MCP_STATUS_OK && mcp_mem_account_refusals(v->account) > 0) {
        /* Whatever the failure looked like from inside (an import sees a
         * failed allocation as a corrupt file), the limit is why. */
        char inner[1024], prefix[300];
        snprintf(inner, sizeof inner, "%s", err && err->buf ? err->buf : "");
        int pn = snprintf(prefix, sizeof prefix, "model '%s': ", desc->name ? desc->name : "");
        size_t skip = pn > 0 && strncmp(inner, prefix, (size_t)pn) == 0 ? (size_t)pn : 0;
        st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY,
                         "model '%s': loading needs more than resources.memory allows (%lld bytes); the allocation "
                         "that would pass it failed: %s",
                         desc->name, (long long)desc->memory_bytes, inner + skip);
    }
    if (st != MCP_STATUS_OK) {
        mcp_model_version_release(v);
        return st;
    }
    v->memory_bytes = (size_t)mcp_mem_account_bytes(v->account);
    atomic_store(&v->last_used_ns, mcp_now_ns());
    *out = v;
    return MCP_STATUS_OK;
}

/* A generative model: text in, text out, as the OIP generate extension
 * names them; its serving is the generation engine, not a session. */
static const mcp_tensor_meta gen_inputs[] = {{"text_input", "text_input", MCP_DTYPE_STRING, 1, {1}}};
static const mcp_tensor_meta gen_outputs[] = {{"text_output", "text_output", MCP_DTYPE_STRING, 1, {1}}};

/* Calibration at load: at most this many samples and bytes of them. */
#define LOAD_CALIB_SAMPLES 64
#define LOAD_CALIB_BYTES ((size_t)256 << 20)

/* precision: int8 on an fp32 ONNX model: quantized here (static with the
 * descriptor's calibration folder, else dynamic; engine/quantize.h), then
 * loaded from the quantized bytes. */
static mcp_status load_int8(const mcp_descriptor *desc, const char *model_path, const mcp_session_options *o,
                            mcp_session **out, char *msg, size_t cap)
{
    mcp_err err = {msg, cap};
    uint8_t *buf = NULL;
    size_t n = 0;
    mcp_status rs = mcp_file_read(model_path, &buf, &n, &err);
    if (rs != MCP_STATUS_OK) return rs;
    char *names[64];
    int n_in = 0;
    mcp_quant_samples samples = {0};
    mcp_status st = MCP_STATUS_OK;
    if (desc->calibration) {
        st = mcp_quantize_model_inputs(buf, n, 64, names, &n_in, &err);
        if (st == MCP_STATUS_OK)
            st = mcp_quant_samples_load(desc->calibration, n_in, (const char *const *)names, LOAD_CALIB_SAMPLES,
                                        LOAD_CALIB_BYTES, &samples, &err);
        if (st != MCP_STATUS_OK) mcp_err_prefix(&err, "calibration");
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", model_path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    mcp_quant_result r;
    memset(&r, 0, sizeof r);
    if (st == MCP_STATUS_OK) {
        /* No report: the server loads the result right after, and nobody
         * reads the error figures at load. */
        mcp_quantize_options qo = {.threads = o->threads, .dynamic = desc->calibration == NULL, .no_report = true};
        st = mcp_quantize(buf, n, dir, &qo, samples.n, (mcp_value *const *const *)samples.values, &r, &err);
        if (st != MCP_STATUS_OK) mcp_err_prefix(&err, "precision int8");
    }
    mcp_free(buf);
    mcp_quant_samples_free(&samples);
    for (int i = 0; i < n_in; i++) mcp_free(names[i]);
    if (st == MCP_STATUS_OK) st = mcp_session_create_from_memory(r.model, r.len, dir, o, out, msg, cap);
    mcp_quant_result_release(&r);
    return st;
}

static mcp_status load_gguf(mcp_model_version *v, mcp_descriptor *desc, int64_t thread_limit, mcp_load_phase_fn phase,
                            void *phase_user, mcp_err *err)
{
    if (phase) phase(phase_user, "mapping and checking the GGUF file");
    mcp_llm_model_options mo = mcp_llm_model_options_default();
    int64_t threads = desc->instance_threads;
    if (thread_limit > 0 && (threads == 0 || threads > thread_limit)) threads = thread_limit;
    mo.threads = (int)threads; /* 0: every online core */
    char msg[1024] = "";
    mcp_status st = mcp_llm_model_load(desc->path, &mo, &v->llm, msg, sizeof msg);
    if (st != MCP_STATUS_OK) return mcp_err_set(err, st, "model '%s': %s", desc->name, msg);
    for (int64_t i = 0; i < mcp_llm_model_meta_count(v->llm); i++) {
        size_t len = 0;
        const char *k = mcp_llm_model_meta_key(v->llm, i, &len);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(len < 255 ? len : 255), k ? k : "");
        if (mcp__desc_policy_key(key))
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                               "model '%s': the GGUF metadata key '%.100s' is a policy field: " MCP__DESC_POLICY_RULE,
                               desc->name, key);
    }
    mcp_llm_info info;
    mcp_llm_model_info(v->llm, &info);
    desc->instance_count = 1;
    desc->instance_threads = info.threads; /* what was applied, for describe */
    v->n_inputs = v->n_outputs = 1;
    v->inputs = mcp_calloc(1, sizeof *v->inputs);
    v->outputs = mcp_calloc(1, sizeof *v->outputs);
    if (!v->inputs || !v->outputs) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    v->inputs[0] = gen_inputs[0];
    v->outputs[0] = gen_outputs[0];
    st = mcp_model_fingerprint(v, err);
    if (st != MCP_STATUS_OK) mcp_err_prefix(err, "model '%s'", desc->name);
    return st;
}

static mcp_status load_charged(mcp_model_version *v, mcp_descriptor *desc, const mcp_descriptor_defaults *server,
                               mcp_load_phase_fn phase, void *phase_user, mcp_err *err)
{
    v->desc = desc;
    v->name = desc->name;
    v->version = desc->version;
    v->loaded_at_us = mcp_now_us();
    /* Threads within the server's limit: more instances than the limit are
     * refused; threads per instance shrink to fit (at least 1), and the
     * descriptor records what was applied, so `describe` shows it. */
    int64_t limit = server ? server->max_model_threads : 0;
    /* resources.cpus: cores' worth, so at most ceil(cpus) threads. */
    if (desc->cpus > 0) {
        int64_t cores = (int64_t)ceil(desc->cpus);
        if (limit <= 0 || cores < limit) limit = cores;
    }
    if (limit > 0 && desc->instance_count > limit) {
        mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                    "model '%s': %lld instances; %s allows %lld threads per model", desc->name,
                    (long long)desc->instance_count,
                    desc->cpus > 0 && limit == (int64_t)ceil(desc->cpus) ? "resources.cpus" : "this server (--max-model-threads)",
                    (long long)limit);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    if (limit > 0 && desc->instance_count * desc->instance_threads > limit)
        desc->instance_threads = limit / desc->instance_count;
    if (desc->format && strcmp(desc->format, "gguf") == 0) return load_gguf(v, desc, limit, phase, phase_user, err);
    mcp_session_options o = mcp_session_options_default();
    o.threads = (int)(desc->instance_threads > 0 ? desc->instance_threads : 1);
    o.adaptive_threads = server && server->adaptive_threads;
    o.max_tensor_bytes = server && server->max_tensor_bytes > 0 ? (size_t)server->max_tensor_bytes : 0;
    char msg[1024] = "";
    /* format: triton names a Triton model folder: serve the model file its
     * config.pbtxt and version policy select. */
    char model_path[4096];
    snprintf(model_path, sizeof model_path, "%s", desc->path);
    struct stat sb;
    mcp_descriptor *triton_config = NULL; /* the folder's config.pbtxt, checked against the graph too */
    if (desc->format && strcmp(desc->format, "triton") == 0 && stat(desc->path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        mcp_diags diags = {0};
        mcp_descriptor *t = NULL;
        mcp_descriptor_defaults dd = mcp_descriptor_defaults_default();
        dd.roots = server ? server->roots : NULL;
        if (mcp_descriptor_load_triton(desc->path, &dd, &t, &diags) != MCP_STATUS_OK) {
            mcp_diags_format(&diags, desc->path, msg, sizeof msg);
            mcp_diags_clear(&diags);
            mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model '%s': Triton folder: %s", desc->name, msg);
            return MCP_STATUS_INVALID_ARGUMENT;
        }
        mcp_diags_clear(&diags);
        snprintf(model_path, sizeof model_path, "%s", t->path);
        triton_config = t;
    }
    bool int8 = desc->precision && strcmp(desc->precision, "int8") == 0;
    o.bf16 = desc->precision && strcmp(desc->precision, "bf16") == 0;
    /* format: mcpir names a compiled model, and only a compiled model does:
     * an ONNX descriptor naming one (or the reverse) is a mistake to say. */
    char head[8] = {0};
    FILE *fp = fopen(model_path, "rb");
    bool opened = fp != NULL;
    bool compiled = fp && fread(head, 1, sizeof head, fp) == sizeof head && memcmp(head, MCP_COMPILED_MAGIC, 8) == 0;
    if (fp) fclose(fp);
    bool want_compiled = desc->format && strcmp(desc->format, "mcpir") == 0;
    if (opened && compiled != want_compiled) {
        mcp_descriptor_free(triton_config);
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           compiled ? "model '%s': the file is a compiled model (.mcpir); set format: mcpir"
                                    : "model '%s': format mcpir needs a compiled model (mcpctl compile makes one)",
                           desc->name);
    }
    if (phase) phase(phase_user, int8 ? "quantizing to int8, importing and preparing" : "importing and preparing");
    mcp_status st = int8 ? load_int8(desc, model_path, &o, &v->session, msg, sizeof msg)
                         : mcp_session_create_from_file(model_path, &o, &v->session, msg, sizeof msg);
    if (st != MCP_STATUS_OK) {
        mcp_err_set(err, st, "model '%s': %s", desc->name, msg);
        mcp_descriptor_free(triton_config);
        return st;
    }
    /* bf16 where the CPU has no bf16 dot products runs fp32; the version's
     * history says so (repository.c). */
    v->precision = int8 ? "int8" : mcp_session_precision(v->session);
    if (mcp_session_load_note(v->session) && !(v->load_note = mcp_strdup(mcp_session_load_note(v->session)))) {
        mcp_descriptor_free(triton_config);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    const mcp_graph *g = v->session->graph;
    for (int i = 0; i < g->n_metadata_keys; i++)
        if (mcp__desc_policy_key(g->metadata_keys[i])) {
            mcp_descriptor_free(triton_config);
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                               "model '%s': the ONNX metadata_props key '%.100s' is a policy field: " MCP__DESC_POLICY_RULE,
                               desc->name, g->metadata_keys[i]);
        }
    v->n_inputs = g->n_inputs;
    v->n_outputs = g->n_outputs;
    v->inputs = mcp_calloc((size_t)v->n_inputs + 1, sizeof *v->inputs);
    v->outputs = mcp_calloc((size_t)v->n_outputs + 1, sizeof *v->outputs);
    if (!v->inputs || !v->outputs) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    /* The topology check: the descriptor (and a Triton folder's
     * config.pbtxt) against the graph, every mismatch reported with both
     * sides, not only the first. */
    char topo[1500] = "";
    mcp_status topo_st = MCP_STATUS_OK;
    for (int i = 0; st == MCP_STATUS_OK && i < v->n_inputs + v->n_outputs; i++) {
        bool is_in = i < v->n_inputs;
        int j = is_in ? i : i - v->n_inputs;
        const mcp_io_info *io = is_in ? &v->session->inputs[j] : &v->session->outputs[j];
        const mcp_io_spec *spec = is_in ? find_spec(desc->inputs, desc->n_inputs, io->name)
                                        : find_spec(desc->outputs, desc->n_outputs, io->name);
        /* A preprocess cast lets clients send another dtype than the graph's. */
        bool casted = false;
        for (int k = 0; is_in && k < desc->n_pre; k++)
            casted |= desc->pre[k].kind == MCP_STEP_CAST &&
                      (!desc->pre[k].tensor || (spec && !strcmp(desc->pre[k].tensor, spec->name)) ||
                       !strcmp(desc->pre[k].tensor, io->name));
        char one[400];
        mcp_err e1 = {one, sizeof one};
        mcp_status s1 = fill_meta(is_in ? &v->inputs[j] : &v->outputs[j], io, spec, casted, is_in ? "input" : "output", &e1);
        if (s1 == MCP_STATUS_OUT_OF_MEMORY) st = mcp_err_set(err, s1, "%s", one);
        else if (s1 != MCP_STATUS_OK) {
            if (topo_st == MCP_STATUS_OK) topo_st = s1;
            why_add(topo, sizeof topo, "%s", one);
        }
    }
    /* Every tensor the descriptor names must exist in the model. */
    for (int side = 0; st == MCP_STATUS_OK && side < 2; side++) {
        const mcp_io_spec *specs = side ? desc->outputs : desc->inputs;
        int n = side ? desc->n_outputs : desc->n_inputs;
        const mcp_tensor_meta *have = side ? v->outputs : v->inputs;
        int n_have = side ? v->n_outputs : v->n_inputs;
        for (int i = 0; i < n; i++) {
            const char *gname = specs[i].graph_name ? specs[i].graph_name : specs[i].name;
            bool found = false;
            for (int k = 0; k < n_have; k++) found |= have[k].graph_name && strcmp(have[k].graph_name, gname) == 0;
            if (found) continue;
            char names[300] = "";
            for (int k = 0; k < n_have; k++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", k ? ", " : "",
                         side ? v->session->outputs[k].name : v->session->inputs[k].name);
            if (topo_st == MCP_STATUS_OK) topo_st = MCP_STATUS_INVALID_ARGUMENT;
            why_add(topo, sizeof topo, "descriptor %s '%s' is not an %s of the model (it has %s)", side ? "output" : "input",
                    gname, side ? "output" : "input", names);
        }
    }
    if (st == MCP_STATUS_OK && triton_config) config_vs_graph(triton_config, v->session, topo, sizeof topo, &topo_st);
    mcp_descriptor_free(triton_config);
    triton_config = NULL;
    if (st == MCP_STATUS_OK && topo_st != MCP_STATUS_OK) st = mcp_err_set(err, topo_st, "%s", topo);
    /* Batching needs a variable first dimension on every input and output. */
    if (st == MCP_STATUS_OK && desc->max_batch_size > 0) {
        bool batchable = true;
        for (int i = 0; i < v->n_inputs; i++) batchable &= v->inputs[i].rank >= 1 && v->inputs[i].dims[0] < 0;
        for (int i = 0; i < v->n_outputs; i++) batchable &= v->outputs[i].rank >= 1 && v->outputs[i].dims[0] < 0;
        if (!batchable) desc->max_batch_size = 0;
    }
    if (st == MCP_STATUS_OK && phase && desc->warmup_runs > 0) phase(phase_user, "warm-up");
    for (int64_t i = 0; st == MCP_STATUS_OK && i < desc->warmup_runs; i++)
        st = warm_up(v, server ? server->max_warmup_bytes : 0, err);
    /* After the warm-up (which feeds the graph's own view): what clients
     * send and receive once the descriptor's steps apply. */
    if (st == MCP_STATUS_OK) st = mcp_steps_adjust_meta(v, err);
    if (st == MCP_STATUS_OK) st = mcp_model_fingerprint(v, err);
    if (st != MCP_STATUS_OK) mcp_err_prefix(err, "model '%s'", desc->name);
    return st;
}

mcp_model_version *mcp_model_version_retain(mcp_model_version *v)
{
    if (v) atomic_fetch_add(&v->refs, 1);
    return v;
}

void mcp_model_version_release(mcp_model_version *v)
{
    if (!v || atomic_fetch_sub(&v->refs, 1) != 1) return;
    if (v->serving && v->serving_free) v->serving_free(v->serving);
    if (v->monitor && v->monitor_free) v->monitor_free(v->monitor);
    if (v->generator && v->generator_free) v->generator_free(v->generator);
    mcp_llm_model_free(v->llm);
    mcp_session_destroy(v->session);
    mcp_free(v->load_note);
    mcp_free(v->inputs);
    mcp_free(v->outputs);
    mcp_descriptor_free(v->desc);
    mcp_mem_account_release(v->account);
    mcp_free(v);
}

size_t mcp_model_version_bytes(const mcp_model_version *v)
{
    int64_t b = mcp_mem_account_bytes(v->account);
    return b > 0 ? (size_t)b : 0;
}

/* ---- the clients' contract between versions ---- */

static int meta_find(const mcp_tensor_meta *m, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].name, name) == 0) return i;
    return -1;
}

/* One side's tensors against the other's; extra_ok: b may have more. */
static void io_compare(const char *kind, const mcp_tensor_meta *a, int na, const mcp_tensor_meta *b, int nb, bool extra_ok,
                       const char *va, const char *vb, char *why, size_t cap)
{
    char sa[128], sb[128];
    for (int i = 0; i < na; i++) {
        int j = meta_find(b, nb, a[i].name);
        if (j < 0) {
            why_add(why, cap, "%s '%s' of %s is missing in %s", kind, a[i].name, va, vb);
            continue;
        }
        const mcp_tensor_meta *x = &a[i], *y = &b[j];
        bool same = x->dtype == y->dtype && x->rank == y->rank;
        for (int d = 0; same && d < x->rank; d++)
            if (x->dims[d] >= 0 && y->dims[d] >= 0 && x->dims[d] != y->dims[d]) same = false;
        if (!same)
            why_add(why, cap, "%s '%s': %s %s in %s, %s %s in %s", kind, x->name, mcp_dtype_name(x->dtype),
                    mcp_shape_str(x->rank < 0 ? 0 : x->rank, x->dims, sa, sizeof sa), va, mcp_dtype_name(y->dtype),
                    mcp_shape_str(y->rank < 0 ? 0 : y->rank, y->dims, sb, sizeof sb), vb);
    }
    if (extra_ok) return;
    for (int j = 0; j < nb; j++)
        if (meta_find(a, na, b[j].name) < 0) why_add(why, cap, "%s '%s' of %s is not in %s", kind, b[j].name, vb, va);
}

bool mcp_model_io_compatible(const mcp_model_version *a, const mcp_model_version *b, char *why, size_t cap)
{
    why[0] = '\0';
    io_compare("input", a->inputs, a->n_inputs, b->inputs, b->n_inputs, false, a->version, b->version, why, cap);
    io_compare("output", a->outputs, a->n_outputs, b->outputs, b->n_outputs, true, a->version, b->version, why, cap);
    return why[0] == '\0';
}
