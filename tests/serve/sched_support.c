/* Test support for the request and scheduler tests (see sched_support.h). */
#include "sched_support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "model_builder.h"

/*
 * Weak stand-ins for functions other parts of the serve layer define, so
 * these tests neither depend on src/registry/model.c (the tests never let a
 * hand-made version's count reach zero) nor record metrics (the scheduler
 * gets a NULL metrics object). Being defined here, they keep the linker from
 * pulling those archive members in.
 */
__attribute__((weak)) void mcp_model_version_release(mcp_model_version *v)
{
    if (v) atomic_fetch_sub(&v->refs, 1);
}
__attribute__((weak)) void mcp_metrics_batch(mcp_metrics *m, const char *model, const char *version, int batch_size)
{
    (void)m, (void)model, (void)version, (void)batch_size;
}
__attribute__((weak)) void mcp_metrics_latency(mcp_metrics *m, const char *model, const char *version,
                                               int64_t queue_ns, int64_t compute_ns, int64_t total_ns)
{
    (void)m, (void)model, (void)version, (void)queue_ns, (void)compute_ns, (void)total_ns;
}
/* NULL makes messages fall back to mcp_dtype_name ("float32"). */
__attribute__((weak)) const char *mcp_oip_datatype(mcp_dtype d)
{
    (void)d;
    return NULL;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "sched_support: %s: %s\n", what, detail ? detail : "");
    abort();
}

static void set_meta(mcp_tensor_meta *t, const char *name, const char *graph_name, mcp_dtype dt, int rank,
                     const int64_t *dims)
{
    t->name = name;
    t->graph_name = graph_name;
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
}

static tv_model *model_from_bytes(const void *bytes, size_t len, int64_t max_batch, const char *name)
{
    tv_model *m = calloc(1, sizeof *m);
    if (!m) die("calloc", NULL);
    char err[512];
    mcp_session_options o = mcp_session_options_default();
    if (mcp_session_create_from_memory(bytes, len, NULL, &o, &m->v.session, err, sizeof err) != MCP_STATUS_OK)
        die("session", err);
    atomic_init(&m->v.refs, 1);
    m->v.name = (char *)name;
    m->v.version = (char *)"v1.0.0";
    m->v.desc = &m->desc;
    m->desc.name = (char *)name;
    m->desc.max_batch_size = max_batch;
    return m;
}

tv_model *tv_model_create(int64_t max_batch_size)
{
    mb_model *mb = mb_model_new(13);
    const int64_t xdims[] = {-1, 3}, ydims[] = {-1, 2}, kdims[] = {-1}, wdims[] = {3, 2}, bdims[] = {2};
    const char *const params[] = {"batch", NULL};
    mb_add_input(mb, NULL, "X", MCP_DTYPE_FLOAT, 2, xdims, params);
    mb_add_input(mb, NULL, "K", MCP_DTYPE_INT64, 1, kdims, params);
    mb_add_initializer(mb, NULL, "W", MCP_DTYPE_FLOAT, 2, wdims, mb_mlp_w, sizeof mb_mlp_w);
    mb_add_initializer(mb, NULL, "B", MCP_DTYPE_FLOAT, 1, bdims, mb_mlp_b, sizeof mb_mlp_b);
    mb_add_node(mb, NULL, "MatMul", "matmul", "X,W", "XW");
    mb_add_node(mb, NULL, "Add", "add", "XW,B", "Y");
    mb_add_node(mb, NULL, "Relu", "relu", "Y", "Z");
    mb_add_node(mb, NULL, "Add", "add_k", "K,K", "K2");
    mb_add_node(mb, NULL, "Identity", "ident", "B", "C");
    mb_add_output(mb, NULL, "Z", MCP_DTYPE_FLOAT, 2, ydims, params);
    mb_add_output(mb, NULL, "Y", MCP_DTYPE_FLOAT, 2, ydims, params);
    mb_add_output(mb, NULL, "K2", MCP_DTYPE_INT64, 1, kdims, params);
    mb_add_output(mb, NULL, "C", MCP_DTYPE_FLOAT, 1, bdims, NULL);
    size_t len;
    uint8_t *bytes = mb_pack(mb, &len);
    tv_model *m = model_from_bytes(bytes, len, max_batch_size, "mlp");
    free(bytes);
    mb_model_free(mb);
    set_meta(&m->inputs[0], "x", "X", MCP_DTYPE_FLOAT, 2, xdims);
    set_meta(&m->inputs[1], "k", "K", MCP_DTYPE_INT64, 1, kdims);
    set_meta(&m->outputs[0], "y", "Y", MCP_DTYPE_FLOAT, 2, ydims);
    set_meta(&m->outputs[1], "z", "Z", MCP_DTYPE_FLOAT, 2, ydims);
    set_meta(&m->outputs[2], "k2", "K2", MCP_DTYPE_INT64, 1, kdims);
    set_meta(&m->outputs[3], "c", "C", MCP_DTYPE_FLOAT, 1, bdims);
    m->v.n_inputs = 2;
    m->v.inputs = m->inputs;
    m->v.n_outputs = 4;
    m->v.outputs = m->outputs;
    return m;
}

tv_model *tv_digits_create(const char *path, int64_t max_batch_size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *bytes = malloc(n > 0 ? (size_t)n : 1);
    if (!bytes || n <= 0 || fread(bytes, 1, (size_t)n, f) != (size_t)n) die("read", path);
    fclose(f);
    tv_model *m = model_from_bytes(bytes, (size_t)n, max_batch_size, "digits");
    free(bytes);
    const int64_t in[] = {-1, 64}, prob[] = {-1, 10}, label[] = {-1};
    set_meta(&m->inputs[0], "input", NULL, MCP_DTYPE_FLOAT, 2, in);
    set_meta(&m->outputs[0], "probabilities", NULL, MCP_DTYPE_FLOAT, 2, prob);
    set_meta(&m->outputs[1], "label", NULL, MCP_DTYPE_INT64, 1, label);
    m->v.n_inputs = 1;
    m->v.inputs = m->inputs;
    m->v.n_outputs = 2;
    m->v.outputs = m->outputs;
    return m;
}

void tv_model_free(tv_model *m)
{
    if (!m) return;
    if (atomic_load(&m->v.refs) != 1) die("tv_model_free", "a reference to the model version is still held");
    mcp_session_destroy(m->v.session);
    free(m);
}

static void add_input(mcp_request *r, const char *name, mcp_dtype dt, int rank, const int64_t *dims, const void *data,
                      size_t nbytes)
{
    mcp_req_tensor *t = &r->inputs[r->n_inputs++];
    t->name = mcp_pool_strndup(r->pool, name, strlen(name));
    t->t.dtype = dt;
    t->t.rank = rank;
    for (int i = 0; i < rank; i++) t->t.dims[i] = dims[i];
    t->t.data = mcp_pool_alloc(r->pool, nbytes);
    if (!t->name || !t->t.data) die("pool", name);
    memcpy(t->t.data, data, nbytes);
    t->t.owns_data = false;
}

mcp_request *tv_request(int64_t rows, int seed, bool reversed)
{
    mcp_request *r = mcp_request_create(MCP_PROTOCOL_V2);
    if (!r) die("mcp_request_create", NULL);
    r->inputs = mcp_pool_calloc(r->pool, 2 * sizeof *r->inputs);
    if (!r->inputs || rows > 64) die("inputs", NULL);
    float x[64 * 3];
    int64_t k[64];
    for (int64_t i = 0; i < rows; i++) {
        /* Small integers and halves: exact in float whatever the order of
         * summation, and distinct for distinct (seed, row). */
        x[i * 3 + 0] = (float)(seed % 101) - 50.0f;
        x[i * 3 + 1] = 0.5f * (float)i - 3.0f;
        x[i * 3 + 2] = (float)(seed / 101) + 0.5f * (float)(i % 3);
        k[i] = (int64_t)seed * 1000 + i;
    }
    const int64_t xd[] = {rows, 3}, kd[] = {rows};
    if (reversed) add_input(r, "k", MCP_DTYPE_INT64, 1, kd, k, (size_t)rows * sizeof *k);
    add_input(r, "x", MCP_DTYPE_FLOAT, 2, xd, x, (size_t)rows * 3 * sizeof *x);
    if (!reversed) add_input(r, "k", MCP_DTYPE_INT64, 1, kd, k, (size_t)rows * sizeof *k);
    return r;
}

mcp_request *tv_digits_request(int64_t rows, int seed)
{
    mcp_request *r = mcp_request_create(MCP_PROTOCOL_V2);
    if (!r) die("mcp_request_create", NULL);
    r->inputs = mcp_pool_calloc(r->pool, sizeof *r->inputs);
    if (!r->inputs || rows > 16) die("inputs", NULL);
    float x[16 * 64];
    uint64_t s = 0x9E3779B97F4A7C15ULL * (uint64_t)(seed + 1);
    for (int64_t i = 0; i < rows * 64; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)(s % 17); /* pixel intensities 0..16 like the dataset */
    }
    const int64_t d[] = {rows, 64};
    add_input(r, "input", MCP_DTYPE_FLOAT, 2, d, x, (size_t)rows * 64 * sizeof *x);
    return r;
}

static const mcp_tensor_meta *meta_by_name(const tv_model *m, const char *name)
{
    for (int i = 0; i < m->v.n_outputs; i++)
        if (strcmp(m->v.outputs[i].name, name) == 0) return &m->v.outputs[i];
    return NULL;
}

bool tv_check_outputs(const tv_model *m, const mcp_request *r, char *why, size_t cap)
{
    const mcp_session *ses = m->v.session;
    int n_in = mcp_session_input_count(ses), n_out = mcp_session_output_count(ses);
    mcp_value *ins[4] = {0}, *outs[8] = {0};
    const char *names[4] = {0};
    char err[512];
    bool ok = false;
    if (n_in > 4 || n_out > 8 || r->n_inputs != m->v.n_inputs) {
        snprintf(why, cap, "unexpected model or request");
        return false;
    }
    for (int i = 0; i < r->n_inputs; i++) {
        const mcp_tensor_meta *meta = &m->v.inputs[i];
        names[i] = meta->graph_name ? meta->graph_name : meta->name;
        const mcp_tensor *t = &r->inputs[i].t;
        ins[i] = mcp_value_create_tensor(t->dtype, t->rank, t->dims, t->data, err, sizeof err);
        if (!ins[i]) {
            snprintf(why, cap, "input copy: %s", err);
            goto done;
        }
    }
    if (mcp_session_run(ses, r->n_inputs, names, ins, 0, NULL, outs, err, sizeof err) != MCP_STATUS_OK) {
        snprintf(why, cap, "single run: %s", err);
        goto done;
    }
    int expect_n = r->n_requested > 0 ? r->n_requested : m->v.n_outputs;
    if (r->n_outputs != expect_n) {
        snprintf(why, cap, "%d outputs, expected %d", r->n_outputs, expect_n);
        goto done;
    }
    for (int q = 0; q < r->n_outputs; q++) {
        const mcp_req_tensor *o = &r->outputs[q];
        if (r->n_requested > 0 && strcmp(o->name, r->requested[q]) != 0) {
            snprintf(why, cap, "output %d is '%s', expected '%s'", q, o->name, r->requested[q]);
            goto done;
        }
        const mcp_tensor_meta *meta = meta_by_name(m, o->name);
        if (!meta) {
            snprintf(why, cap, "unknown output name '%s'", o->name);
            goto done;
        }
        const char *g = meta->graph_name ? meta->graph_name : meta->name;
        int gi = -1;
        for (int i = 0; i < n_out; i++) {
            mcp_io_info info;
            mcp_session_output_info(ses, i, &info);
            if (strcmp(info.name, g) == 0) gi = i;
        }
        const mcp_tensor *want = &outs[gi]->tensor, *got = &o->t;
        if (got->dtype != want->dtype || got->rank != want->rank ||
            memcmp(got->dims, want->dims, sizeof(int64_t) * (size_t)want->rank) != 0) {
            char a[64], b[64];
            snprintf(why, cap, "output '%s' has shape %s, single run gives %s", o->name,
                     mcp_shape_str(got->rank, got->dims, a, sizeof a), mcp_shape_str(want->rank, want->dims, b, sizeof b));
            goto done;
        }
        if (mcp_tensor_nbytes(want) && memcmp(got->data, want->data, mcp_tensor_nbytes(want)) != 0) {
            snprintf(why, cap, "output '%s' differs from the single run", o->name);
            goto done;
        }
    }
    ok = true;
done:
    for (int i = 0; i < 4; i++) mcp_value_destroy(ins[i]);
    for (int i = 0; i < 8; i++) mcp_value_destroy(outs[i]);
    return ok;
}

/* ---- trackers and gates ---- */

/* A bound on waiting for completions, so a broken scheduler fails the test
 * instead of hanging it. It is not a performance check. */
#define TV_WAIT_LIMIT_S 120

static struct timespec deadline_in(int seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    return ts;
}

void tv_tracker_init(tv_tracker *t, int cap)
{
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->done = 0;
    t->cap = cap;
    t->order = calloc((size_t)cap + 1, sizeof *t->order);
    if (!t->order) die("calloc", NULL);
}

void tv_tracker_destroy(tv_tracker *t)
{
    free(t->order);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}

void tv_track_done(mcp_request *r, void *user)
{
    tv_tracker *t = user;
    pthread_mutex_lock(&t->mu);
    if (t->done < t->cap) t->order[t->done] = r;
    t->done++;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

bool tv_tracker_wait(tv_tracker *t, int n)
{
    struct timespec limit = deadline_in(TV_WAIT_LIMIT_S);
    pthread_mutex_lock(&t->mu);
    int rc = 0;
    while (t->done < n && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&t->cv, &t->mu, &limit);
    bool ok = t->done >= n;
    pthread_mutex_unlock(&t->mu);
    return ok;
}

void tv_gate_init(tv_gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->entered = g->open = false;
    g->also = NULL;
}

void tv_gate_destroy(tv_gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

void tv_gate_done(mcp_request *r, void *user)
{
    tv_gate *g = user;
    pthread_mutex_lock(&g->mu);
    g->entered = true;
    pthread_cond_broadcast(&g->cv);
    struct timespec limit = deadline_in(TV_WAIT_LIMIT_S);
    int rc = 0;
    while (!g->open && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g->cv, &g->mu, &limit);
    pthread_mutex_unlock(&g->mu);
    if (g->also) tv_track_done(r, g->also);
}

bool tv_gate_wait_entered(tv_gate *g)
{
    struct timespec limit = deadline_in(TV_WAIT_LIMIT_S);
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    while (!g->entered && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g->cv, &g->mu, &limit);
    bool ok = g->entered;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

void tv_gate_open(tv_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}
