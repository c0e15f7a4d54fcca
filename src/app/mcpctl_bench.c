/*
 * mcpctl bench NAME [--concurrency 1,8,64] [--duration 10s] [--protocol v2|v1]
 *                   [--rate R] [--input IN=FILE.npy ...] [--json]
 *
 * A closed-loop load generator in the manner of Triton's perf_analyzer: for
 * each concurrency level N, N clients send requests back to back for the
 * duration. Over HTTP (and gRPC streams) each client is a thread with its
 * own connection (libcurl easy handle, keep-alive); unary gRPC clients are
 * asynchronous, 16 to a thread and its channel (see driver_main). Inputs are random tensors of the model's dtypes and shapes
 * (batch 1, every variable dimension 1; one set per thread) unless --input
 * gives files. Latency is measured per request on the client; the server's
 * own split (queue, compute, total) comes from GET /metrics before and
 * after each level, so the server's overhead is total minus compute.
 *
 * --rate R paces the clients instead (open loop, as perf_analyzer's
 * --request-rate-range): together they start R requests per second, each
 * client on a fixed schedule of its share, so a slow answer does not slow
 * the offered load; a client that falls behind sends at once until it is
 * back on schedule. Latency is then measured from each request's scheduled
 * start, so time spent waiting behind a slow answer counts (no coordinated
 * omission). Not for unary gRPC, whose asynchronous drivers are closed loops.
 */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>

#include "app/mcpctl_http.h"
#include "serve/serve.h"

#define BENCH_MAX_LEVELS 32
#define BENCH_MAX_CONCURRENCY 1024
#define BENCH_MAX_DURATION_NS (600LL * 1000000000LL)
#define BENCH_REQUEST_TIMEOUT_MS 60000L

static const char *USAGE = "bench NAME [--concurrency 1,8,64] [--duration 10s] [--rate R] [--protocol v2|v2-json|v1|grpc|grpc-stream] [--grpc HOST:PORT] "
                           "[--input IN=FILE.npy ...] [--json]";

/* ---- latency histogram ----
 * Log-linear buckets (128 per power of two: under 0.8% relative error) from
 * 1 ns to 2^42 ns (73 minutes), so memory per thread is fixed (36 KiB)
 * however long the run. */
#define HIST_SUB_BITS 7
#define HIST_SUB (1 << HIST_SUB_BITS)
#define HIST_MAX_EXP 42
#define HIST_BUCKETS (HIST_SUB + (HIST_MAX_EXP - HIST_SUB_BITS) * HIST_SUB)

static int hist_index(int64_t ns)
{
    if (ns < 0) ns = 0;
    if (ns >= (1LL << HIST_MAX_EXP)) ns = (1LL << HIST_MAX_EXP) - 1;
    if (ns < HIST_SUB) return (int)ns;
    int e = 63 - __builtin_clzll((unsigned long long)ns);
    int shift = e - HIST_SUB_BITS;
    return HIST_SUB + shift * HIST_SUB + (int)((ns >> shift) - HIST_SUB);
}

/* Midpoint of a bucket, in ns. */
static double hist_value(int idx)
{
    if (idx < HIST_SUB) return idx;
    int shift = (idx - HIST_SUB) / HIST_SUB, sub = (idx - HIST_SUB) % HIST_SUB;
    double lo = (double)((int64_t)(HIST_SUB + sub) << shift);
    return lo + (double)(1LL << shift) / 2.0;
}

static double hist_quantile(const int64_t *h, int64_t total, double q)
{
    if (total <= 0) return NAN;
    int64_t rank = (int64_t)ceil(q * (double)total), seen = 0;
    if (rank < 1) rank = 1;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        seen += h[i];
        if (seen >= rank) return hist_value(i);
    }
    return hist_value(HIST_BUCKETS - 1);
}

/* ---- server metrics ---- */

static void metrics_fetch(mcpctl_http *h, const char *model, mcpctl_server_sums *s)
{
    memset(s, 0, sizeof *s);
    char msg[256];
    mcp_err err = {msg, sizeof msg};
    if (mcpctl_http_do(h, "GET", "/metrics", NULL, 0, NULL, -1, &err) != MCP_STATUS_OK || h->code != 200) return;
    s->ok = true;
    mcpctl_metrics_parse((const char *)h->resp.data, h->resp.len, model, s);
}

/* ---- configuration ---- */

/* What the workers send: OIP v2 with binary tensors, OIP v2 JSON, KServe
 * v1, or OIP v2 over gRPC (ModelInfer, raw contents). */
typedef enum bench_proto { PROTO_V2, PROTO_V2_JSON, PROTO_V1, PROTO_GRPC, PROTO_GRPC_STREAM } bench_proto;
static const char *const proto_names[] = {"v2", "v2-json", "v1", "grpc", "grpc-stream"};
#define IS_GRPC(p) ((p) == PROTO_GRPC || (p) == PROTO_GRPC_STREAM)

typedef struct bench_cfg {
    const char *server, *model;
    bench_proto proto;
    const char *grpc_target; /* host:port of the server's gRPC port */
    bool json;
    int n_levels;
    int levels[BENCH_MAX_LEVELS];
    int64_t duration_ns;
    double rate; /* requests per second in all, open loop; 0: closed loop */
    mcpctl_model_meta meta;
    mcpctl_named *files; /* --input tensors, n_files */
    int n_files;
    char path[1400];     /* inference URL path */
} bench_cfg;

static bool parse_duration(const char *s, int64_t *ns)
{
    char *end;
    double v = strtod(s, &end);
    double scale = 1e9;
    if (end == s) return false;
    if (!strcmp(end, "ms")) scale = 1e6;
    else if (!strcmp(end, "m") || !strcmp(end, "min")) scale = 60e9;
    else if (*end && strcmp(end, "s")) return false;
    double total = v * scale;
    if (!(total >= 1e6) || total > (double)BENCH_MAX_DURATION_NS) return false;
    *ns = (int64_t)total;
    return true;
}

static bool parse_levels(const char *s, bench_cfg *c)
{
    c->n_levels = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > BENCH_MAX_CONCURRENCY || c->n_levels == BENCH_MAX_LEVELS) return false;
        c->levels[c->n_levels++] = (int)v;
        if (*end == ',') end++;
        else if (*end) return false;
        p = end;
    }
    return c->n_levels > 0;
}

/* ---- workers ---- */

typedef struct bench_run bench_run;

typedef struct bench_worker {
    bench_run *run;
    int id;
    pthread_t thread;
    mcpctl_http http;
    mcpctl_grpc grpc;
    mcpctl_named *inputs; /* this worker's random inputs (n = meta.n_inputs) */
    mcp_buf body;
    int64_t hist[HIST_BUCKETS];
    int64_t requests, errors;
    char first_error[400];
    char msg[400];
} bench_worker;

struct bench_run {
    const bench_cfg *cfg;
    int concurrency;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ready;    /* workers set up and warmed */
    bool go;      /* start the timed loop (or stop at once when abort) */
    bool abort;
    int64_t end_ns;
};

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64*: fast and good enough for filler data. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static mcp_status random_inputs(const mcpctl_model_meta *m, uint64_t seed, mcpctl_named **out, mcp_err *err)
{
    mcpctl_named *v = mcp_calloc((size_t)m->n_inputs + 1, sizeof *v);
    if (!v) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    *out = v;
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int i = 0; i < m->n_inputs; i++) {
        const mcpctl_tensor_meta *t = &m->inputs[i];
        if (t->dtype == MCP_DTYPE_UNDEFINED)
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "input '%s' has datatype %s, which bench cannot generate", t->name,
                               t->datatype);
        int64_t dims[MCP_MAX_RANK];
        for (int d = 0; d < t->rank; d++) dims[d] = t->dims[d] >= 0 ? t->dims[d] : 1;
        v[i].name = mcp_strdup(t->name);
        mcp_status st = mcp_tensor_alloc(&v[i].t, t->dtype, t->rank, dims, err);
        if (st != MCP_STATUS_OK) return st;
        int64_t n = mcp_tensor_numel(&v[i].t);
        for (int64_t k = 0; k < n; k++) {
            uint64_t r = rng_next(&s);
            if (t->dtype == MCP_DTYPE_STRING) mcp_tensor_set_string(&v[i].t, k, "bench", 5);
            else if (mcp_dtype_is_float(t->dtype)) mcp_tensor_set_f64(&v[i].t, k, (double)(r >> 11) / 9007199254740992.0);
            else if (t->dtype == MCP_DTYPE_BOOL) mcp_tensor_set_i64(&v[i].t, k, (int64_t)(r & 1));
            else mcp_tensor_set_i64(&v[i].t, k, (int64_t)(r % 10));
        }
        if (!v[i].name) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    return MCP_STATUS_OK;
}

/* Builds the worker's body and prepares its connection. */
static mcp_status worker_setup(bench_worker *w, mcp_err *err)
{
    const bench_cfg *c = w->run->cfg;
    /* Unary gRPC slots share their driver's channel. */
    mcp_status st = c->proto == PROTO_GRPC      ? MCP_STATUS_OK
                    : c->proto == PROTO_GRPC_STREAM ? mcpctl_grpc_init(&w->grpc, c->grpc_target, err)
                                                    : mcpctl_http_init(&w->http, c->server, BENCH_REQUEST_TIMEOUT_MS, err);
    if (st != MCP_STATUS_OK) return st;
    /* Files given with --input replace the random tensor of that name. */
    st = random_inputs(&c->meta, (uint64_t)w->id + 1, &w->inputs, err);
    if (st != MCP_STATUS_OK) return st;
    mcpctl_named *list = mcp_calloc((size_t)c->meta.n_inputs + 1, sizeof *list);
    if (!list) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; st == MCP_STATUS_OK && i < c->meta.n_inputs; i++) {
        list[i] = w->inputs[i];
        for (int f = 0; f < c->n_files; f++)
            if (!strcmp(c->files[f].name, w->inputs[i].name)) list[i] = c->files[f];
    }
    size_t json_len = 0;
    if (st == MCP_STATUS_OK) {
        switch (c->proto) {
        case PROTO_V1: st = mcpctl_v1_encode(list, c->meta.n_inputs, &w->body, err); break;
        case PROTO_V2_JSON: st = mcpctl_v2_encode_json(list, c->meta.n_inputs, &w->body, err); break;
        case PROTO_GRPC:
        case PROTO_GRPC_STREAM: st = mcpctl_grpc_encode(c->model, list, c->meta.n_inputs, &w->body, err); break;
        case PROTO_V2: st = mcpctl_v2_encode(list, c->meta.n_inputs, NULL, 0, &w->body, &json_len, err); break;
        }
    }
    mcp_free(list); /* it borrowed its tensors */
    /* A stream per worker, open for the whole run: one request in flight
     * on it at a time, as a closed-loop client of ModelStreamInfer. */
    if (st == MCP_STATUS_OK && c->proto == PROTO_GRPC_STREAM)
        st = mcpctl_grpc_stream_open(&w->grpc, "/inference.GRPCInferenceService/ModelStreamInfer",
                                     (long)(c->duration_ns / 1000000) + 120000, err);
    if (st != MCP_STATUS_OK || IS_GRPC(c->proto)) return st;
    bool binary = c->proto == PROTO_V2;
    return mcpctl_http_prepare(&w->http, "POST", c->path, w->body.data, w->body.len,
                               binary ? "application/octet-stream" : "application/json", binary ? (int64_t)json_len : -1, err);
}

/* One request; true when the server answered 200. */
static bool worker_send(bench_worker *w)
{
    mcp_err err = {w->msg, sizeof w->msg};
    if (w->run->cfg->proto == PROTO_GRPC_STREAM) {
        mcp_status gs = mcpctl_grpc_stream_roundtrip(&w->grpc, &w->body, &err);
        if (gs == MCP_STATUS_OK) return true;
        if (!w->first_error[0]) snprintf(w->first_error, sizeof w->first_error, "%s", w->msg);
        return false;
    }
    mcp_status st = mcpctl_http_perform(&w->http, &err);
    if (st == MCP_STATUS_OK && w->http.code == 200) return true;
    if (st == MCP_STATUS_OK) mcpctl_http_fail(&w->http, &err);
    if (!w->first_error[0]) snprintf(w->first_error, sizeof w->first_error, "%s", w->msg);
    return false;
}

/* A thread is set up (ok or not): waits for the start; false when the
 * level was aborted, else *end_ns is when to stop. */
static bool wait_for_start(bench_run *run, bool ok, int64_t *end_ns)
{
    pthread_mutex_lock(&run->lock);
    run->ready++;
    if (!ok) run->abort = true;
    pthread_cond_broadcast(&run->cond);
    while (!run->go) pthread_cond_wait(&run->cond, &run->lock);
    bool stop = run->abort;
    *end_ns = run->end_ns;
    pthread_mutex_unlock(&run->lock);
    return !stop;
}

static void *worker_main(void *arg)
{
    bench_worker *w = arg;
    bench_run *run = w->run;
    mcp_err err = {w->msg, sizeof w->msg};
    bool ok = worker_setup(w, &err) == MCP_STATUS_OK;
    if (!ok) snprintf(w->first_error, sizeof w->first_error, "%s", w->msg);
    /* One untimed request opens the connection and warms the path. */
    if (ok) worker_send(w);
    int64_t end_ns;
    if (!wait_for_start(run, ok, &end_ns)) return NULL;
    w->first_error[0] = '\0'; /* warm-up errors show up again in the timed loop */
    /* Open loop: this client's share of --rate, the clients' first sends
     * spread over one interval. */
    int64_t interval = 0, next = 0;
    if (run->cfg->rate > 0) {
        interval = (int64_t)((double)run->concurrency * 1e9 / run->cfg->rate);
        if (interval < 1) interval = 1;
        next = mcp_now_ns() + interval * w->id / run->concurrency;
    }
    while (mcp_now_ns() < end_ns) {
        int64_t t0 = mcp_now_ns();
        if (interval) {
            if (next >= end_ns) break;
            if (next > t0) {
                struct timespec ts = {(time_t)((next - t0) / 1000000000LL), (long)((next - t0) % 1000000000LL)};
                nanosleep(&ts, NULL);
            }
            t0 = next;
            next += interval;
        }
        bool good = worker_send(w);
        int64_t t1 = mcp_now_ns();
        w->requests++;
        if (good) w->hist[hist_index(t1 - t0)]++;
        else w->errors++;
    }
    return NULL;
}

/* ---- unary gRPC: asynchronous drivers ----
 * As asynchronous gRPC clients (perf_analyzer's async mode, ghz) do: one
 * thread keeps up to GRPC_CALLS_PER_DRIVER calls in flight on one channel,
 * each slot a closed loop of its own (a new call as its last finishes). */
#define GRPC_CALLS_PER_DRIVER 16
#define GRPC_INFER "/inference.GRPCInferenceService/ModelInfer"

typedef struct bench_driver {
    bench_run *run;
    bench_worker *slots;
    int n;
    pthread_t thread;
} bench_driver;

static void slot_failed(bench_worker *w, const char *msg)
{
    w->errors++;
    if (!w->first_error[0]) snprintf(w->first_error, sizeof w->first_error, "%s", msg);
}

static void *driver_main(void *arg)
{
    bench_driver *d = arg;
    const bench_cfg *c = d->run->cfg;
    char msg[400];
    mcp_err err = {msg, sizeof msg};
    mcpctl_grpc_async *a = NULL;
    int64_t *t0 = mcp_calloc((size_t)d->n, sizeof *t0);
    bool ok = t0 != NULL;
    for (int i = 0; ok && i < d->n; i++) ok = worker_setup(&d->slots[i], &err) == MCP_STATUS_OK;
    if (ok) ok = mcpctl_grpc_async_create(c->grpc_target, d->n, &a, &err) == MCP_STATUS_OK;
    if (!ok) snprintf(d->slots[0].first_error, sizeof d->slots[0].first_error, "%s", t0 ? msg : "out of memory");
    /* One untimed call per slot opens the connection and warms the path. */
    int pending = 0;
    mcp_status st;
    for (int i = 0; ok && i < d->n; i++)
        if (mcpctl_grpc_async_start(a, i, GRPC_INFER, &d->slots[i].body, BENCH_REQUEST_TIMEOUT_MS, &err) == MCP_STATUS_OK) pending++;
    while (pending > 0 && mcpctl_grpc_async_next(a, BENCH_REQUEST_TIMEOUT_MS, &st, &err) >= 0) pending--;
    if (pending > 0) { /* warm-up calls still in flight hold their slots: no level */
        ok = false;
        snprintf(d->slots[0].first_error, sizeof d->slots[0].first_error, "warm-up calls did not finish");
    }
    int64_t end_ns;
    if (wait_for_start(d->run, ok, &end_ns)) {
        for (int i = 0; i < d->n; i++) {
            t0[i] = mcp_now_ns();
            if (mcpctl_grpc_async_start(a, i, GRPC_INFER, &d->slots[i].body, BENCH_REQUEST_TIMEOUT_MS, &err) == MCP_STATUS_OK)
                pending++;
            else d->slots[i].requests++, slot_failed(&d->slots[i], msg);
        }
        while (pending > 0) {
            int k = mcpctl_grpc_async_next(a, BENCH_REQUEST_TIMEOUT_MS + 10000, &st, &err);
            if (k < 0) break; /* the calls' own deadlines have passed: cancelled below */
            pending--;
            int64_t t1 = mcp_now_ns();
            bench_worker *w = &d->slots[k];
            w->requests++;
            if (st == MCP_STATUS_OK) w->hist[hist_index(t1 - t0[k])]++;
            else slot_failed(w, msg);
            if (t1 >= end_ns) continue;
            t0[k] = t1;
            if (mcpctl_grpc_async_start(a, k, GRPC_INFER, &w->body, BENCH_REQUEST_TIMEOUT_MS, &err) == MCP_STATUS_OK) pending++;
            else w->requests++, slot_failed(w, msg);
        }
    }
    mcpctl_grpc_async_destroy(a);
    mcp_free(t0);
    return NULL;
}

/* ---- one level ---- */

typedef struct level_result {
    int concurrency;
    int64_t requests, errors;
    double seconds, rps, p50_us, p90_us, p99_us;
    mcpctl_server_sums before, after;
    char first_error[400];
    bool aborted;
} level_result;

static double avg_us(double sum_a, double sum_b, double cnt_a, double cnt_b)
{
    double n = cnt_b - cnt_a;
    return n > 0 ? (sum_b - sum_a) / n * 1e6 : NAN;
}

static void server_split(const level_result *r, double *queue, double *compute, double *total, double *overhead, double *batch)
{
    const mcpctl_server_sums *a = &r->before, *b = &r->after;
    bool ok = a->ok && b->ok;
    *queue = ok ? avg_us(a->queue_sum, b->queue_sum, a->queue_count, b->queue_count) : NAN;
    *compute = ok ? avg_us(a->compute_sum, b->compute_sum, a->compute_count, b->compute_count) : NAN;
    *total = ok ? avg_us(a->total_sum, b->total_sum, a->total_count, b->total_count) : NAN;
    *overhead = *total - *compute;
    double bn = b->batch_count - a->batch_count;
    *batch = ok && bn > 0 ? (b->batch_sum - a->batch_sum) / bn : NAN;
}

static mcp_status run_level(const bench_cfg *cfg, mcpctl_http *ctl, int concurrency, level_result *r, mcp_err *err)
{
    memset(r, 0, sizeof *r);
    r->concurrency = concurrency;
    bench_run run = {.cfg = cfg, .concurrency = concurrency};
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.cond, NULL);
    bench_worker *w = mcp_calloc((size_t)concurrency, sizeof *w);
    if (!w) {
        pthread_mutex_destroy(&run.lock);
        pthread_cond_destroy(&run.cond);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for %d workers", concurrency);
    }
    for (int i = 0; i < concurrency; i++) w[i].run = &run, w[i].id = i;
    bool async = cfg->proto == PROTO_GRPC;
    int n_threads = async ? (concurrency + GRPC_CALLS_PER_DRIVER - 1) / GRPC_CALLS_PER_DRIVER : concurrency;
    bench_driver *d = async ? mcp_calloc((size_t)n_threads, sizeof *d) : NULL;
    if (async && !d) n_threads = 0;
    int created = 0;
    for (; created < n_threads; created++) {
        int rc;
        if (async) {
            d[created] = (bench_driver){&run, w + created * GRPC_CALLS_PER_DRIVER, 0, 0};
            int left = concurrency - created * GRPC_CALLS_PER_DRIVER;
            d[created].n = left < GRPC_CALLS_PER_DRIVER ? left : GRPC_CALLS_PER_DRIVER;
            rc = pthread_create(&d[created].thread, NULL, driver_main, &d[created]);
        } else {
            rc = pthread_create(&w[created].thread, NULL, worker_main, &w[created]);
        }
        if (rc != 0) break;
    }
    pthread_mutex_lock(&run.lock);
    if (created < n_threads || n_threads == 0) run.abort = true;
    while (run.ready < created) pthread_cond_wait(&run.cond, &run.lock);
    pthread_mutex_unlock(&run.lock);

    metrics_fetch(ctl, cfg->model, &r->before);
    int64_t t_start = mcp_now_ns();
    pthread_mutex_lock(&run.lock);
    run.end_ns = t_start + cfg->duration_ns;
    run.go = true;
    bool aborted = run.abort;
    pthread_cond_broadcast(&run.cond);
    pthread_mutex_unlock(&run.lock);
    for (int i = 0; i < created; i++) pthread_join(async ? d[i].thread : w[i].thread, NULL);
    int64_t t_end = mcp_now_ns();
    mcp_free(d);
    if (async) created = concurrency; /* every slot's counts are summed below */
    metrics_fetch(ctl, cfg->model, &r->after);

    int64_t *hist = mcp_calloc(HIST_BUCKETS, sizeof *hist);
    for (int i = 0; i < created; i++) {
        r->requests += w[i].requests;
        r->errors += w[i].errors;
        for (int b = 0; hist && b < HIST_BUCKETS; b++) hist[b] += w[i].hist[b];
        if (!r->first_error[0] && w[i].first_error[0]) snprintf(r->first_error, sizeof r->first_error, "%s", w[i].first_error);
    }
    r->aborted = aborted;
    if (aborted && !r->first_error[0]) snprintf(r->first_error, sizeof r->first_error, "cannot start %d threads", concurrency);
    r->seconds = (double)(t_end - t_start) / 1e9;
    r->rps = r->seconds > 0 ? (double)(r->requests - r->errors) / r->seconds : 0;
    int64_t good = r->requests - r->errors;
    r->p50_us = hist ? hist_quantile(hist, good, 0.50) / 1e3 : NAN;
    r->p90_us = hist ? hist_quantile(hist, good, 0.90) / 1e3 : NAN;
    r->p99_us = hist ? hist_quantile(hist, good, 0.99) / 1e3 : NAN;
    mcp_free(hist);
    for (int i = 0; i < concurrency; i++) {
        mcpctl_http_cleanup(&w[i].http);
        if (IS_GRPC(cfg->proto)) mcpctl_grpc_cleanup(&w[i].grpc);
        mcpctl_named_free(w[i].inputs, cfg->meta.n_inputs);
        mcp_buf_free(&w[i].body);
    }
    mcp_free(w);
    pthread_mutex_destroy(&run.lock);
    pthread_cond_destroy(&run.cond);
    return MCP_STATUS_OK;
}

/* ---- output ---- */

static void print_num(double v, int width, int prec)
{
    if (isnan(v)) printf(" %*s", width, "-");
    else printf(" %*.*f", width, prec, v);
}

static void print_header(const bench_cfg *c)
{
    printf("model %s, protocol %s, %.3g s per level, batch 1, %s inputs, server %s", c->model, proto_names[c->proto],
           (double)c->duration_ns / 1e9, c->n_files ? "given" : "random", c->server);
    if (c->rate > 0) printf(", open loop at %.6g req/s", c->rate);
    printf("\n");
    printf("client latency p50/p90/p99 in us; queue, compute, total: the server's per-request averages from /metrics "
           "(us); overhead = total - compute; batch = average batch size\n");
    printf("%11s %9s %10s %9s %9s %9s %7s | %9s %9s %9s %9s %6s\n", "concurrency", "requests", "req/s", "p50", "p90", "p99",
           "errors", "queue", "compute", "total", "overhead", "batch");
    fflush(stdout);
}

static void print_row(const level_result *r)
{
    double q, cpt, tot, ovh, bat;
    server_split(r, &q, &cpt, &tot, &ovh, &bat);
    printf("%11d %9lld", r->concurrency, (long long)r->requests);
    print_num(r->rps, 10, 1);
    print_num(r->p50_us, 9, 1);
    print_num(r->p90_us, 9, 1);
    print_num(r->p99_us, 9, 1);
    printf(" %7lld |", (long long)r->errors);
    print_num(q, 9, 1);
    print_num(cpt, 9, 1);
    print_num(tot, 9, 1);
    print_num(ovh, 9, 1);
    print_num(bat, 6, 2);
    printf("\n");
    fflush(stdout);
}

static json_t *num_or_null(double v) { return isnan(v) ? json_null() : json_real(round(v * 1000.0) / 1000.0); }

static void print_json(const bench_cfg *c, const level_result *r, int n)
{
    json_t *root = json_object(), *levels = json_array();
    json_object_set_new(root, "model", json_string(c->model));
    json_object_set_new(root, "protocol", json_string(proto_names[c->proto]));
    json_object_set_new(root, "server", json_string(c->server));
    json_object_set_new(root, "duration_s", json_real((double)c->duration_ns / 1e9));
    json_object_set_new(root, "rate", c->rate > 0 ? json_real(c->rate) : json_null());
    json_object_set_new(root, "inputs", json_string(c->n_files ? "given" : "random"));
    for (int i = 0; i < n; i++) {
        double q, cpt, tot, ovh, bat;
        server_split(&r[i], &q, &cpt, &tot, &ovh, &bat);
        json_t *l = json_object(), *s = json_object();
        json_object_set_new(l, "concurrency", json_integer(r[i].concurrency));
        json_object_set_new(l, "requests", json_integer(r[i].requests));
        json_object_set_new(l, "errors", json_integer(r[i].errors));
        json_object_set_new(l, "seconds", num_or_null(r[i].seconds));
        json_object_set_new(l, "req_per_s", num_or_null(r[i].rps));
        json_object_set_new(l, "p50_us", num_or_null(r[i].p50_us));
        json_object_set_new(l, "p90_us", num_or_null(r[i].p90_us));
        json_object_set_new(l, "p99_us", num_or_null(r[i].p99_us));
        json_object_set_new(s, "metrics", json_boolean(r[i].before.ok && r[i].after.ok));
        json_object_set_new(s, "queue_us", num_or_null(q));
        json_object_set_new(s, "compute_us", num_or_null(cpt));
        json_object_set_new(s, "total_us", num_or_null(tot));
        json_object_set_new(s, "overhead_us", num_or_null(ovh));
        json_object_set_new(s, "avg_batch", num_or_null(bat));
        json_object_set_new(l, "server", s);
        if (r[i].first_error[0]) json_object_set_new(l, "first_error", json_string(r[i].first_error));
        json_array_append_new(levels, l);
    }
    json_object_set_new(root, "levels", levels);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    if (text) printf("%s\n", text);
    free(text);
    json_decref(root);
}

/* ---- command ---- */

static int bench_usage(void)
{
    fprintf(stderr, "mcpctl: bench: usage: mcpctl %s\n", USAGE);
    return 2;
}

static int bench_fail(const char *model, const char *msg)
{
    fprintf(stderr, "mcpctl: bench %s: %s\n", model ? model : "", msg);
    return 1;
}

static mcp_status load_input_file(bench_cfg *c, char *arg, mcp_err *err)
{
    char *eq = strchr(arg, '=');
    if (!eq) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "--input '%s' is not NAME=FILE.npy", arg);
    *eq = '\0';
    const mcpctl_tensor_meta *m = NULL;
    for (int i = 0; i < c->meta.n_inputs; i++)
        if (!strcmp(c->meta.inputs[i].name, arg)) m = &c->meta.inputs[i];
    if (!m) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model has no input named '%s'", arg);
    for (int f = 0; f < c->n_files; f++)
        if (!strcmp(c->files[f].name, arg)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' given twice", arg);
    mcpctl_named *v = &c->files[c->n_files];
    mcp_status st = mcp_npy_read(eq + 1, &v->t, err);
    if (st != MCP_STATUS_OK) {
        mcp_err_prefix(err, "input '%s'", arg);
        return st;
    }
    if (m->dtype == MCP_DTYPE_BFLOAT16 && v->t.dtype == MCP_DTYPE_UINT16) v->t.dtype = MCP_DTYPE_BFLOAT16;
    c->n_files++;
    v->name = mcp_strdup(arg);
    return v->name ? MCP_STATUS_OK : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
}

int mcpctl_cmd_bench(const char *server, int argc, char **argv)
{
    bench_cfg *c = mcp_calloc(1, sizeof *c);
    char **files = mcp_calloc((size_t)argc + 1, sizeof *files);
    int n_file_args = 0, rc = 0;
    if (!c || !files) {
        mcp_free(c);
        mcp_free(files);
        return bench_fail(NULL, "out of memory");
    }
    c->server = server;
    c->duration_ns = 10LL * 1000000000LL;
    c->levels[0] = 1;
    c->n_levels = 1;
    for (int a = 0; a < argc && rc == 0; a++) {
        const char *arg = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(arg, "--json")) {
            c->json = true;
        } else if (!strcmp(arg, "--concurrency") && val) {
            a++;
            if (!parse_levels(val, c)) {
                fprintf(stderr, "mcpctl: bench: --concurrency wants a list like 1,8,64 (each 1..%d, at most %d levels), got '%s'\n",
                        BENCH_MAX_CONCURRENCY, BENCH_MAX_LEVELS, val);
                rc = 2;
            }
        } else if (!strcmp(arg, "--duration") && val) {
            a++;
            if (!parse_duration(val, &c->duration_ns)) {
                fprintf(stderr, "mcpctl: bench: --duration wants 1ms..600s (e.g. 10s, 500ms, 2m), got '%s'\n", val);
                rc = 2;
            }
        } else if (!strcmp(arg, "--rate") && val) {
            a++;
            char *end = NULL;
            c->rate = strtod(val, &end);
            if (end == val || *end || !(c->rate >= 0.1 && c->rate <= 1e6)) {
                fprintf(stderr, "mcpctl: bench: --rate wants requests per second, 0.1..1000000, got '%s'\n", val);
                rc = 2;
            }
        } else if (!strcmp(arg, "--protocol") && val) {
            a++;
            bool known = false;
            for (int p = 0; p < 5; p++)
                if (!strcmp(val, proto_names[p])) c->proto = (bench_proto)p, known = true;
            if (!known) {
                fprintf(stderr, "mcpctl: bench: --protocol is v2, v2-json, v1, grpc or grpc-stream, got '%s'\n", val);
                rc = 2;
            }
        } else if (!strcmp(arg, "--grpc") && val) {
            c->grpc_target = argv[++a];
        } else if (!strcmp(arg, "--input") && val) {
            files[n_file_args++] = argv[++a];
        } else if (arg[0] != '-' && !c->model) {
            c->model = arg;
        } else {
            rc = bench_usage();
        }
    }
    if (rc == 0 && !c->model) rc = bench_usage();
    if (rc == 0 && c->rate > 0 && c->proto == PROTO_GRPC) {
        fprintf(stderr, "mcpctl: bench: --rate paces HTTP and grpc-stream clients; unary grpc's are closed loops\n");
        rc = 2;
    }

    char msg[1024];
    mcp_err err = {msg, sizeof msg};
    mcpctl_http ctl = {0};
    level_result *results = NULL;
    if (rc == 0 && mcpctl_http_init(&ctl, server, BENCH_REQUEST_TIMEOUT_MS, &err) != MCP_STATUS_OK) rc = bench_fail(c->model, msg);
    if (rc == 0 && mcpctl_model_meta_fetch(&ctl, c->model, NULL, &c->meta, &err) != MCP_STATUS_OK) rc = bench_fail(c->model, msg);
    if (rc == 0) {
        c->files = mcp_calloc((size_t)n_file_args + 1, sizeof *c->files);
        for (int f = 0; c->files && f < n_file_args && rc == 0; f++)
            if (load_input_file(c, files[f], &err) != MCP_STATUS_OK) rc = bench_fail(c->model, msg);
        if (!c->files) rc = bench_fail(c->model, "out of memory");
    }
    if (rc == 0) {
        char seg[1024];
        mcpctl_path_segment(c->model, seg, sizeof seg);
        if (c->proto == PROTO_V1) snprintf(c->path, sizeof c->path, "/v1/models/%s:predict", seg);
        else snprintf(c->path, sizeof c->path, "/v2/models/%s/infer", seg);
        results = mcp_calloc((size_t)c->n_levels, sizeof *results);
        if (!results) rc = bench_fail(c->model, "out of memory");
    }
    /* gRPC: the server's gRPC port on the same host unless --grpc says. */
    char target[300];
    if (rc == 0 && IS_GRPC(c->proto) && !c->grpc_target) {
        const char *h = strstr(server, "://");
        h = h ? h + 3 : server;
        size_t n = strcspn(h, "/");
        const char *colon = memchr(h, ']', n) ? memchr(h, ']', n) + 1 : memchr(h, ':', n);
        size_t hn = colon && *colon == ':' ? (size_t)(colon - h) : n;
        snprintf(target, sizeof target, "%.*s:8081", (int)hn, h);
        c->grpc_target = target;
    }
    bool grpc_started = rc == 0 && IS_GRPC(c->proto);
    if (grpc_started) mcp_grpc_library_init();
    if (rc == 0 && !c->json) print_header(c);
    int n_done = 0;
    for (int i = 0; rc == 0 && i < c->n_levels; i++) {
        if (run_level(c, &ctl, c->levels[i], &results[i], &err) != MCP_STATUS_OK) {
            rc = bench_fail(c->model, msg);
            break;
        }
        const level_result *r = &results[i];
        n_done++;
        if (!c->json) print_row(r);
        if (r->errors || r->aborted)
            fprintf(stderr, "mcpctl: bench %s: concurrency %d: %lld of %lld requests failed; first: %s\n", c->model,
                    r->concurrency, (long long)r->errors, (long long)r->requests, r->first_error);
        /* A level where nothing succeeded means the numbers say nothing. */
        if (r->aborted || r->requests == r->errors) rc = 1;
    }
    if (results && c->json && n_done) print_json(c, results, n_done);
    if (grpc_started) grpc_shutdown();
    mcp_free(results);
    mcpctl_http_cleanup(&ctl);
    mcpctl_named_free(c->files, c->n_files);
    mcpctl_model_meta_free(&c->meta);
    mcp_free(files);
    mcp_free(c);
    return rc;
}
