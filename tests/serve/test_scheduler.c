/*
 * The scheduler: batching (real batches, each request gets exactly its own
 * rows back, checked against single runs), split and whole-copied outputs,
 * preferred sizes, priority order, tenants served by weight and held to
 * their queued cap, timeouts and cancellation without running, a full
 * queue, drain, the tensor cache and leaks. And the generation engine's
 * tenants (serve/generate.c, on models/demo/fortunes.gguf): two tenants of
 * weights 1 and 2 saturating it get tokens 1:2, as its token hook tells.
 *
 * Determinism without timing: a "gate" request whose completion callback
 * blocks holds the only worker busy, so the test decides what is queued
 * when the worker comes free. With prefetch_queue_depth 0 the batcher forms
 * a batch only for an idle worker. Waits are bounded (hang guards only).
 */
#include <pthread.h>
#include <time.h>

#include "sched_support.h"
#include "serve/generate.h"
#include "serve/scheduler_util.h"
#include "test_util.h"

#ifndef MCP_DIGITS_MODEL
#define MCP_DIGITS_MODEL "models/demo/digits.onnx"
#endif

static mcp_scheduler_options opts(int64_t max_batch, int prefetch)
{
    mcp_scheduler_options o;
    memset(&o, 0, sizeof o);
    o.max_batch_size = max_batch;
    o.max_queue_delay_us = 1000;
    o.max_queue_size = 64;
    o.instances = 1;
    o.threads_per_instance = 1;
    o.prefetch_queue_depth = prefetch;
    o.enable_tensor_cache = true;
    return o;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Validates and submits r with the given completion; returns the submit
 * status (the request is failed by the caller when it is not OK). */
static mcp_status submit(mcp_scheduler *s, const tv_model *m, mcp_request *r, mcp_request_done_fn done, void *user)
{
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    if (mcp_request_validate(r, &m->v, &err) != MCP_STATUS_OK) {
        fprintf(stderr, "validate: %s\n", msg);
        return MCP_STATUS_INTERNAL;
    }
    r->done = done;
    r->done_user = user;
    return mcp_scheduler_submit(s, r);
}

/* Submits a request that blocks the worker in its completion until the
 * gate opens; returns it once the worker is inside. */
static mcp_request *hold_worker_rows(mcp_scheduler *s, const tv_model *m, tv_gate *g, int64_t rows)
{
    mcp_request *r = m->v.n_inputs == 2 ? tv_request(rows, 999, false) : tv_digits_request(rows, 999);
    r->timeout_us = 600LL * 1000 * 1000; /* overrides any default timeout */
    if (submit(s, m, r, tv_gate_done, g) != MCP_STATUS_OK || !tv_gate_wait_entered(g)) {
        TU_FAIL_AT(__FILE__, __LINE__, "the gate request did not reach the worker");
        tv_gate_open(g);
    }
    return r;
}

static mcp_request *hold_worker(mcp_scheduler *s, const tv_model *m, tv_gate *g)
{
    return hold_worker_rows(s, m, g, 1);
}

static void check_succeeded(const tv_model *m, mcp_request *r, int line)
{
    char why[512] = "";
    tu_checks++;
    if (atomic_load(&r->state) != MCP_REQUEST_COMPLETED || r->status != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, line, "request state %s status %s: %s", mcp_request_state_name(atomic_load(&r->state)),
                   mcp_status_str(r->status), r->error);
        return;
    }
    if (!tv_check_outputs(m, r, why, sizeof why)) TU_FAIL_AT(__FILE__, line, "%s", why);
    if (!(r->t_start_ns > 0 && r->t_end_ns >= r->t_start_ns)) TU_FAIL_AT(__FILE__, line, "timing fields not set");
}

static void test_batch_and_split(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(8, 0);
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_gate g;
    tv_gate_init(&g);
    tv_tracker t;
    tv_tracker_init(&t, 8);
    mcp_request *a = hold_worker(s, m, &g);

    /* Queued behind the gate: B, C, D batch together (1 + 2 + 3 rows); E
     * asks for other outputs, so it runs in a batch of its own. */
    mcp_request *b = tv_request(1, 11, false), *c = tv_request(2, 22, true), *d = tv_request(3, 33, false);
    mcp_request *e = tv_request(2, 44, false);
    static const char *e_out[] = {"k2", "y"};
    static bool e_bin[] = {true, false};
    e->requested = e_out;
    e->requested_binary = e_bin;
    e->n_requested = 2;
    TU_CHECK_STATUS(submit(s, m, b, tv_track_done, &t), MCP_STATUS_OK, NULL);
    TU_CHECK_STATUS(submit(s, m, c, tv_track_done, &t), MCP_STATUS_OK, NULL);
    TU_CHECK_STATUS(submit(s, m, e, tv_track_done, &t), MCP_STATUS_OK, NULL);
    TU_CHECK_STATUS(submit(s, m, d, tv_track_done, &t), MCP_STATUS_OK, NULL);
    mcp_scheduler_stats st;
    mcp_scheduler_stats_get(s, &st);
    TU_CHECK_INT(st.queue_depth, 4);
    tv_gate_open(&g);
    TU_CHECK(tv_tracker_wait(&t, 4));
    mcp_scheduler_drain(s);

    check_succeeded(m, a, __LINE__);
    check_succeeded(m, b, __LINE__);
    check_succeeded(m, c, __LINE__);
    check_succeeded(m, d, __LINE__);
    check_succeeded(m, e, __LINE__);
    TU_CHECK_INT(a->batch_size, 1);
    TU_CHECK_INT(b->batch_size, 6);
    TU_CHECK_INT(c->batch_size, 6);
    TU_CHECK_INT(d->batch_size, 6);
    TU_CHECK_INT(e->batch_size, 2);
    TU_CHECK(b->t_start_ns == d->t_start_ns);
    /* Split outputs: D's rows of y, k2 keep D's batch of 3; c is whole. */
    TU_REQUIRE(d->n_outputs == 4);
    TU_CHECK_STR(d->outputs[0].name, "y");
    TU_CHECK_INT(d->outputs[0].t.dims[0], 3);
    TU_CHECK_STR(d->outputs[2].name, "k2");
    TU_CHECK_INT(d->outputs[2].t.dims[0], 3);
    TU_CHECK_INT(((const int64_t *)d->outputs[2].t.data)[2], 2 * (33 * 1000 + 2));
    TU_CHECK_STR(d->outputs[3].name, "c");
    TU_CHECK_INT(d->outputs[3].t.rank, 1);
    TU_CHECK_INT(d->outputs[3].t.dims[0], 2);
    TU_CHECK_INT(c->outputs[0].t.dims[0], 2);
    TU_CHECK(!b->outputs[0].binary);
    /* E: only the requested outputs, in its order, with its binary flags. */
    TU_REQUIRE(e->n_outputs == 2);
    TU_CHECK_STR(e->outputs[0].name, "k2");
    TU_CHECK(e->outputs[0].binary);
    TU_CHECK_STR(e->outputs[1].name, "y");
    TU_CHECK(!e->outputs[1].binary);

    mcp_scheduler_stats_get(s, &st);
    TU_CHECK_INT(st.execution_count, 3);
    TU_CHECK_INT(st.inference_count, 1 + 6 + 2);
    TU_CHECK_INT(st.success_count, 5);
    TU_CHECK_INT(st.fail_count, 0);
    TU_CHECK_INT(st.queue_depth, 0);
    TU_CHECK(st.last_inference_ms > 0);
    TU_CHECK(st.compute_ns > 0);
    mcp_scheduler_destroy(s);
    mcp_request *all[] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++) {
        TU_CHECK_INT(atomic_load(&all[i]->refs), 1); /* the scheduler let go */
        mcp_request_release(all[i]);
    }
    tv_tracker_destroy(&t);
    tv_gate_destroy(&g);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

/* ---- N concurrent clients with distinct inputs ---- */

enum { N_CLIENTS = 8, N_ROUNDS = 25 };

typedef struct client {
    mcp_scheduler *s;
    const tv_model *m;
    int index;
    int max_batch_seen, ok, failures;
    char first_failure[512];
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    tv_tracker t;
    tv_tracker_init(&t, N_ROUNDS);
    for (int i = 0; i < N_ROUNDS; i++) {
        int seed = c->index * 1000 + i;
        int64_t rows = 1 + (c->index + i) % 3;
        mcp_request *r = c->m->v.n_inputs == 2 ? tv_request(rows, seed, i % 2 == 1) : tv_digits_request(rows, seed);
        char why[512] = "";
        mcp_status st = submit(c->s, c->m, r, tv_track_done, &t);
        if (st != MCP_STATUS_OK) {
            snprintf(why, sizeof why, "submit: %s", mcp_status_str(st));
        } else if (!tv_tracker_wait(&t, i + 1)) {
            snprintf(why, sizeof why, "no completion");
        } else if (r->status != MCP_STATUS_OK) {
            snprintf(why, sizeof why, "status %s: %.400s", mcp_status_str(r->status), r->error);
        } else if (tv_check_outputs(c->m, r, why, sizeof why)) {
            c->ok++;
            if (r->batch_size > c->max_batch_seen) c->max_batch_seen = r->batch_size;
        }
        if (why[0] && c->failures++ == 0)
            snprintf(c->first_failure, sizeof c->first_failure, "client %d round %d: %.480s", c->index, i, why);
        if (st != MCP_STATUS_OK) {
            mcp_request_release(r);
            break; /* never completes: the wait would be pointless */
        }
        mcp_request_release(r);
    }
    tv_tracker_destroy(&t);
    return NULL;
}

static void run_clients(tv_model *m, int instances, int prefetch)
{
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(8, prefetch);
    o.instances = instances;
    o.max_queue_size = 256;
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    /* Hold the workers until every client has its first request queued, so
     * the first batch is surely larger than one; later rounds batch as the
     * timing allows. */
    tv_gate g;
    tv_gate_init(&g);
    mcp_request *held = NULL;
    if (prefetch == 0) {
        TU_CHECK_INT(instances, 1);
        held = hold_worker(s, m, &g);
    }
    client c[N_CLIENTS];
    pthread_t th[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].s = s;
        c[i].m = m;
        c[i].index = i;
        pthread_create(&th[i], NULL, client_main, &c[i]);
    }
    if (prefetch == 0) {
        mcp_scheduler_stats st;
        for (int i = 0; i < 60000; i++) {
            mcp_scheduler_stats_get(s, &st);
            if (st.queue_depth >= N_CLIENTS) break;
            sleep_ms(1);
        }
        TU_CHECK_INT(st.queue_depth, N_CLIENTS);
        tv_gate_open(&g);
    }
    int ok = 0, max_batch = 0;
    for (int i = 0; i < N_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        ok += c[i].ok;
        if (c[i].max_batch_seen > max_batch) max_batch = c[i].max_batch_seen;
        if (c[i].failures) TU_FAIL_AT(__FILE__, __LINE__, "%d failures; first: %s", c[i].failures, c[i].first_failure);
    }
    TU_CHECK_INT(ok, N_CLIENTS * N_ROUNDS);
    if (prefetch == 0) TU_CHECK(max_batch > 1);
    mcp_scheduler_drain(s);
    mcp_scheduler_stats st;
    mcp_scheduler_stats_get(s, &st);
    TU_CHECK_INT(st.success_count, N_CLIENTS * N_ROUNDS + (held ? 1 : 0));
    TU_CHECK(st.execution_count <= st.success_count);
    if (prefetch == 0) TU_CHECK(st.execution_count < st.success_count);
    mcp_scheduler_destroy(s);
    mcp_request_release(held);
    tv_gate_destroy(&g);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_clients_mlp(void)
{
    tv_model *m = tv_model_create(8);
    run_clients(m, 1, 0);
    run_clients(m, 3, 2);
    tv_model_free(m);
}

static void test_clients_digits(void)
{
    tv_model *m = tv_digits_create(MCP_DIGITS_MODEL, 8);
    TU_REQUIRE(m);
    run_clients(m, 1, 0);
    run_clients(m, 2, 8);
    tv_model_free(m);
}

/* ---- preferred sizes, priorities ---- */

static void test_preferred(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(8, 0);
    o.n_preferred = 1;
    o.preferred[0] = 4;
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_gate g;
    tv_gate_init(&g);
    tv_tracker t;
    tv_tracker_init(&t, 8);
    mcp_request *a = hold_worker(s, m, &g), *r[6];
    for (int i = 0; i < 6; i++) {
        r[i] = tv_request(1, 100 + i, false);
        TU_CHECK_STATUS(submit(s, m, r[i], tv_track_done, &t), MCP_STATUS_OK, NULL);
    }
    tv_gate_open(&g);
    TU_CHECK(tv_tracker_wait(&t, 6));
    mcp_scheduler_destroy(s);
    /* Six queued: the largest preferred size (4) leaves first, then the
     * rest when its window ends. */
    for (int i = 0; i < 6; i++) {
        check_succeeded(m, r[i], __LINE__);
        TU_CHECK_INT(r[i]->batch_size, i < 4 ? 4 : 2);
        mcp_request_release(r[i]);
    }
    mcp_request_release(a);
    tv_tracker_destroy(&t);
    tv_gate_destroy(&g);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

static void test_priority(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(1, 0); /* no batching: one request per run */
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_gate g;
    tv_gate_init(&g);
    tv_tracker t;
    tv_tracker_init(&t, 8);
    mcp_request *a = hold_worker(s, m, &g);
    static const int64_t prio[] = {5, 1, 5, 0, 1, -2};
    /* Expected completion order: by priority, then arrival. */
    static const int expect[] = {5, 3, 1, 4, 0, 2};
    mcp_request *r[6];
    for (int i = 0; i < 6; i++) {
        r[i] = tv_request(1, 200 + i, false);
        r[i]->priority = prio[i];
        TU_CHECK_STATUS(submit(s, m, r[i], tv_track_done, &t), MCP_STATUS_OK, NULL);
    }
    tv_gate_open(&g);
    TU_CHECK(tv_tracker_wait(&t, 6));
    mcp_scheduler_destroy(s);
    for (int i = 0; i < 6; i++) {
        if (t.order[i] != r[expect[i]])
            TU_FAIL_AT(__FILE__, __LINE__, "completion %d is not request %d (priority %lld)", i, expect[i],
                       (long long)prio[expect[i]]);
        tu_checks++;
        check_succeeded(m, r[i], __LINE__);
        TU_CHECK_INT(r[i]->batch_size, 1);
        mcp_request_release(r[i]);
    }
    mcp_request_release(a);
    tv_tracker_destroy(&t);
    tv_gate_destroy(&g);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

/* ---- tenants ---- */

static void set_tenant(mcp_request *r, const char *tenant, double weight, int64_t max_queued)
{
    snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
    r->weight = weight;
    r->tenant_max_queued = max_queued;
}

/* Two tenants' backlogs, weights 1 and 2, queued behind the held worker:
 * the first completions go 1:2 although every request of "a" arrived
 * before any of "b"; each tenant's own requests keep their order. */
static void test_tenant_fairness(void)
{
    enum { PER_TENANT = 300, FIRST = 150 };
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(1, 0); /* no batching: one request per run */
    o.max_queue_size = 2 * PER_TENANT;
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_gate g;
    tv_gate_init(&g);
    tv_tracker t;
    tv_tracker_init(&t, 2 * PER_TENANT);
    mcp_request *held = hold_worker(s, m, &g);
    mcp_request *r[2 * PER_TENANT];
    for (int i = 0; i < 2 * PER_TENANT; i++) {
        bool b = i >= PER_TENANT;
        r[i] = tv_request(1, 2000 + i, false);
        set_tenant(r[i], b ? "b" : "a", b ? 2 : 1, 0);
        TU_CHECK_STATUS(submit(s, m, r[i], tv_track_done, &t), MCP_STATUS_OK, NULL);
    }
    mcp_scheduler_stats st;
    mcp_scheduler_stats_get(s, &st);
    TU_CHECK_INT(st.queue_depth, 2 * PER_TENANT);
    tv_gate_open(&g);
    TU_CHECK(tv_tracker_wait(&t, 2 * PER_TENANT));
    mcp_scheduler_destroy(s);
    int n_a = 0, n_b = 0;
    for (int i = 0; i < FIRST; i++) {
        if (strcmp(t.order[i]->tenant, "b") == 0) n_b++;
        else n_a++;
    }
    TU_CHECK_INT(n_a + n_b, FIRST);
    if (!(n_b >= 1.8 * n_a && n_b <= 2.2 * n_a))
        TU_FAIL_AT(__FILE__, __LINE__, "first %d completions: a %d, b %d; expected 1:2 within 10%%", FIRST, n_a, n_b);
    tu_checks++;
    /* Within a tenant, arrival order. */
    const mcp_request *last_a = NULL, *last_b = NULL;
    bool ordered = true;
    for (int i = 0; i < 2 * PER_TENANT; i++) {
        const mcp_request *x = t.order[i];
        const mcp_request **last = strcmp(x->tenant, "b") == 0 ? &last_b : &last_a;
        if (*last && x->t_arrival_ns < (*last)->t_arrival_ns) ordered = false;
        *last = x;
    }
    TU_CHECK(ordered);
    for (int i = 0; i < 2 * PER_TENANT; i++) {
        if (i % 50 == 0) check_succeeded(m, r[i], __LINE__);
        mcp_request_release(r[i]);
    }
    mcp_request_release(held);
    tv_tracker_destroy(&t);
    tv_gate_destroy(&g);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

/* A tenant's cap on waiting requests refuses its excess as a full queue
 * would (nothing kept, nothing changed but the message), and only its. */
static void test_tenant_cap(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    for (int variant = 0; variant < 2; variant++) {
        /* variant 1 batches ahead: waiting requests in formed batches count too. */
        mcp_scheduler_options o = variant == 0 ? opts(1, 0) : opts(1, 4);
        TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
        tv_gate g;
        tv_gate_init(&g);
        tv_tracker t;
        tv_tracker_init(&t, 8);
        mcp_request *held = hold_worker(s, m, &g);
        mcp_request *c1 = tv_request(1, 3000, false), *c2 = tv_request(1, 3001, false);
        mcp_request *c3 = tv_request(1, 3002, false), *d = tv_request(1, 3003, false);
        mcp_request *c4 = tv_request(1, 3004, false);
        set_tenant(c1, "c", 1, 2);
        set_tenant(c2, "c", 1, 2);
        set_tenant(c3, "c", 1, 2);
        set_tenant(d, "d", 1, 2);
        set_tenant(c4, "c", 1, 2);
        TU_CHECK_STATUS(submit(s, m, c1, tv_track_done, &t), MCP_STATUS_OK, NULL);
        TU_CHECK_STATUS(submit(s, m, c2, tv_track_done, &t), MCP_STATUS_OK, NULL);
        mcp_status st = submit(s, m, c3, tv_track_done, &t);
        TU_CHECK_STATUS(st, MCP_STATUS_RESOURCE_EXHAUSTED, NULL);
        TU_CHECK_INT(mcp_status_http_code(st), 429);
        TU_CHECK_INT(atomic_load(&c3->refs), 1);
        TU_CHECK_INT(atomic_load(&c3->state), MCP_REQUEST_PENDING);
        TU_CHECK_CONTAINS(c3->error, "tenant 'c'");
        TU_CHECK_CONTAINS(c3->error, "2 requests waiting");
        char why[sizeof c3->error];
        snprintf(why, sizeof why, "%s", c3->error);
        mcp_request_fail(c3, st, "%s", why);
        /* Another tenant still gets in. */
        TU_CHECK_STATUS(submit(s, m, d, tv_track_done, &t), MCP_STATUS_OK, NULL);
        mcp_scheduler_stats ss;
        mcp_scheduler_stats_get(s, &ss);
        TU_CHECK_INT(ss.queue_depth, 3);
        tv_gate_open(&g);
        TU_CHECK(tv_tracker_wait(&t, 4)); /* c3 (failed by the caller), c1, c2, d */
        /* Its requests ran: room again. */
        TU_CHECK_STATUS(submit(s, m, c4, tv_track_done, &t), MCP_STATUS_OK, NULL);
        TU_CHECK(tv_tracker_wait(&t, 5));
        mcp_scheduler_destroy(s);
        check_succeeded(m, c1, __LINE__);
        check_succeeded(m, c2, __LINE__);
        check_succeeded(m, d, __LINE__);
        check_succeeded(m, c4, __LINE__);
        TU_CHECK_INT(c3->status, MCP_STATUS_RESOURCE_EXHAUSTED);
        mcp_request *all[] = {held, c1, c2, c3, d, c4};
        for (int i = 0; i < 6; i++) mcp_request_release(all[i]);
        tv_tracker_destroy(&t);
        tv_gate_destroy(&g);
    }
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

/* ---- the generation engine's tenants ---- */

/* What the token hook heard per tenant ("a", "b", "z"), and the share
 * when a's and b's tokens first reached `at` (both still backlogged). */
typedef struct gen_tally {
    pthread_mutex_t mu;
    int64_t tokens[3], calls, at, done, completion_tokens;
    double share;  /* b's tokens / a's, at `at`; < 0 until then */
    bool stranger; /* another tenant */
} gen_tally;

static void gen_hook(void *user, const char *tenant, int64_t tokens)
{
    gen_tally *t = user;
    pthread_mutex_lock(&t->mu);
    int k = strcmp(tenant, "a") == 0 ? 0 : strcmp(tenant, "b") == 0 ? 1 : 2;
    if (k == 2 && strcmp(tenant, "z") != 0) t->stranger = true;
    t->tokens[k] += tokens;
    t->calls++;
    if (t->share < 0 && t->tokens[0] + t->tokens[1] >= t->at && t->tokens[0] > 0)
        t->share = (double)t->tokens[1] / (double)t->tokens[0];
    pthread_mutex_unlock(&t->mu);
}

static void gen_event(mcp_gen_request *r, const mcp_gen_event *e)
{
    if (e->kind != MCP_GEN_DONE) return;
    gen_tally *t = r->user;
    pthread_mutex_lock(&t->mu);
    if (e->status == MCP_STATUS_OK) t->completion_tokens += e->completion_tokens;
    t->done++;
    pthread_mutex_unlock(&t->mu);
}

static mcp_gen_request *gen_request(const mcp_model_version *v, const char *tenant, double weight, int64_t max_tokens,
                                    gen_tally *t)
{
    mcp_gen_request *r = mcp_gen_request_create(v);
    r->prompt = mcp_strdup("Once upon a time");
    r->prompt_len = strlen(r->prompt);
    r->max_tokens = max_tokens;
    r->ignore_eos = true;
    snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
    r->weight = weight;
    r->on_event = gen_event;
    r->user = t;
    return r;
}

/* Four sequences; "z" holds all four while the backlogs of "a" (weight 1)
 * and then "b" (weight 2) queue up, so the order of admissions is the
 * queue's alone. */
static void test_generate_fairness(void)
{
    enum { PER_TENANT = 40, MAX_TOKENS = 32, SLOTS = 4, HOLD_TOKENS = 200 };
    /* The demo models share a folder. */
    char path[1024];
    snprintf(path, sizeof path, "%s", MCP_DIGITS_MODEL);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "fortunes.gguf");
    int64_t live = mcp_alloc_live_count();
    char msg[512];
    mcp_llm_model *lm;
    mcp_llm_model_options mo = mcp_llm_model_options_default();
    mo.threads = 2;
    TU_REQUIRE_OK(mcp_llm_model_load(path, &mo, &lm, msg, sizeof msg), msg);
    mcp_descriptor d;
    memset(&d, 0, sizeof d);
    d.generation = mcp_generation_default();
    d.generation.context_length = 256;
    d.generation.max_sequences = SLOTS;
    d.generation.max_queue = 2 * PER_TENANT;
    d.generation.prefix_cache = false;
    mcp_model_version v;
    memset(&v, 0, sizeof v);
    v.name = "fortunes";
    v.version = "1";
    v.desc = &d;
    v.llm = lm;
    mcp_gen_engine *g = NULL;
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_gen_engine_create(&v, NULL, &g, &err);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
    gen_tally t = {.share = -1, .at = PER_TENANT * MAX_TOKENS * 3 / 4};
    pthread_mutex_init(&t.mu, NULL);
    mcp_gen_request *rs[SLOTS + 2 * PER_TENANT];
    int n = 0;
    bool held = false;
    if (st == MCP_STATUS_OK) {
        mcp_gen_set_token_hook(g, gen_hook, &t);
        for (; n < SLOTS; n++) {
            rs[n] = gen_request(&v, "z", 1, HOLD_TOKENS, &t);
            TU_CHECK_STATUS(mcp_gen_submit(g, rs[n]), MCP_STATUS_OK, NULL);
        }
        mcp_gen_stats gs;
        for (int i = 0; i < 60000 && !held; i++) {
            mcp_gen_stats_get(g, &gs);
            held = gs.running == SLOTS && gs.waiting == 0;
            if (!held) sleep_ms(1);
        }
        TU_CHECK(held);
        /* Every request of "a" arrives before any of "b". */
        for (int i = 0; held && i < 2 * PER_TENANT; i++, n++) {
            bool b = i >= PER_TENANT;
            mcp_gen_request *r = rs[n] = gen_request(&v, b ? "b" : "a", b ? 2 : 1, MAX_TOKENS, &t);
            if (mcp_gen_submit(g, r) != MCP_STATUS_OK) {
                TU_FAIL_AT(__FILE__, __LINE__, "request %d was refused", n);
                mcp_gen_request_release(r);
                break;
            }
        }
        mcp_gen_drain(g);
        mcp_gen_engine_destroy(g);
    }
    TU_CHECK_INT(t.done, n);
    TU_CHECK_INT(t.completion_tokens, (int64_t)(n - SLOTS) * MAX_TOKENS + SLOTS * HOLD_TOKENS);
    TU_CHECK_INT(t.tokens[2], SLOTS * HOLD_TOKENS);
    TU_CHECK_INT(t.tokens[0] + t.tokens[1] + t.tokens[2], t.completion_tokens); /* every token reported once */
    TU_CHECK(t.calls < t.completion_tokens); /* per tenant and step, not per token */
    TU_CHECK(!t.stranger);
    if (!(t.share >= 1.8 && t.share <= 2.2))
        TU_FAIL_AT(__FILE__, __LINE__, "b's tokens / a's at %lld tokens: %.3f, expected 2 within 10%%", (long long)t.at,
                   t.share);
    tu_checks++;
    for (int i = 0; i < n; i++) mcp_gen_request_release(rs[i]);
    pthread_mutex_destroy(&t.mu);
    mcp_llm_model_free(lm);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

/* ---- requests that never run ---- */

static void check_unrun(mcp_request *r, mcp_status status, const char *needle, int line)
{
    tu_checks++;
    if (atomic_load(&r->state) != MCP_REQUEST_COMPLETED || r->status != status || r->t_start_ns != 0 ||
        r->n_outputs != 0 || !strstr(r->error, needle))
        TU_FAIL_AT(__FILE__, line, "state %s status %s t_start %lld outputs %d error '%s'",
                   mcp_request_state_name(atomic_load(&r->state)), mcp_status_str(r->status), (long long)r->t_start_ns,
                   r->n_outputs, r->error);
}

static void test_timeout(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    for (int variant = 0; variant < 4; variant++) {
        /* variant 0: the request's own timeout; 1: the default timeout;
         * 2 and 3: without batching (the batcher sleeps until the earliest
         * deadline it knows, here the patient request's, and must be woken
         * by the late one), without and with batches formed ahead. */
        mcp_scheduler *s;
        mcp_scheduler_options o = variant < 2 ? opts(8, 0) : opts(1, variant == 3 ? 8 : 0);
        if (variant == 1) o.default_timeout_us = 2000;
        TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
        tv_gate g;
        tv_gate_init(&g);
        tv_tracker t;
        tv_tracker_init(&t, 4);
        mcp_request *a = hold_worker(s, m, &g);
        mcp_request *late = tv_request(1, 300, false), *patient = tv_request(1, 301, false);
        if (variant != 1) late->timeout_us = 1000;
        patient->timeout_us = 600LL * 1000 * 1000;
        if (variant >= 2) {
            TU_CHECK_STATUS(submit(s, m, patient, tv_track_done, &t), MCP_STATUS_OK, NULL);
            sleep_ms(5); /* the batcher is asleep until the patient one's deadline */
        }
        TU_CHECK_STATUS(submit(s, m, late, tv_track_done, &t), MCP_STATUS_OK, NULL);
        if (variant < 2) TU_CHECK_STATUS(submit(s, m, patient, tv_track_done, &t), MCP_STATUS_OK, NULL);
        /* The worker is held, yet the late request completes: the batcher
         * times it out on its own. */
        TU_CHECK(tv_tracker_wait(&t, 1));
        TU_CHECK(t.order[0] == late);
        check_unrun(late, MCP_STATUS_DEADLINE_EXCEEDED, "timed out", __LINE__);
        TU_CHECK_INT(mcp_status_http_code(late->status), 504);
        tv_gate_open(&g);
        TU_CHECK(tv_tracker_wait(&t, 2));
        mcp_scheduler_destroy(s);
        check_succeeded(m, patient, __LINE__);
        mcp_request_release(late);
        mcp_request_release(patient);
        mcp_request_release(a);
        tv_tracker_destroy(&t);
        tv_gate_destroy(&g);
    }
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

static void test_cancel(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(8, 0);
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_gate g;
    tv_gate_init(&g);
    tv_tracker t;
    tv_tracker_init(&t, 4);
    mcp_request *a = hold_worker(s, m, &g);
    mcp_request *gone = tv_request(1, 400, false), *stays = tv_request(1, 401, false);
    mcp_request *early = tv_request(1, 402, false);
    atomic_store(&early->cancel, true); /* cancelled before it was even queued */
    TU_CHECK_STATUS(submit(s, m, gone, tv_track_done, &t), MCP_STATUS_OK, NULL);
    TU_CHECK_STATUS(submit(s, m, early, tv_track_done, &t), MCP_STATUS_OK, NULL);
    TU_CHECK_STATUS(submit(s, m, stays, tv_track_done, &t), MCP_STATUS_OK, NULL);
    atomic_store(&gone->cancel, true); /* the client went away while queued */
    tv_gate_open(&g);
    TU_CHECK(tv_tracker_wait(&t, 3));
    mcp_scheduler_destroy(s);
    check_unrun(gone, MCP_STATUS_CANCELLED, "cancelled", __LINE__);
    check_unrun(early, MCP_STATUS_CANCELLED, "cancelled", __LINE__);
    TU_CHECK_INT(mcp_status_http_code(gone->status), 499);
    check_succeeded(m, stays, __LINE__);
    TU_CHECK_INT(stays->batch_size, 1);
    mcp_request_release(gone);
    mcp_request_release(early);
    mcp_request_release(stays);
    mcp_request_release(a);
    tv_tracker_destroy(&t);
    tv_gate_destroy(&g);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

static void test_queue_full(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(1, 0);
    o.max_queue_size = 2;
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_gate g;
    tv_gate_init(&g);
    tv_tracker t;
    tv_tracker_init(&t, 4);
    mcp_request *a = hold_worker(s, m, &g);
    mcp_request *b = tv_request(1, 500, false), *c = tv_request(1, 501, false), *d = tv_request(1, 502, false);
    TU_CHECK_STATUS(submit(s, m, b, tv_track_done, &t), MCP_STATUS_OK, NULL);
    TU_CHECK_STATUS(submit(s, m, c, tv_track_done, &t), MCP_STATUS_OK, NULL);
    mcp_status st = submit(s, m, d, tv_track_done, &t);
    TU_CHECK_STATUS(st, MCP_STATUS_RESOURCE_EXHAUSTED, NULL);
    TU_CHECK_INT(mcp_status_http_code(st), 429);
    /* Refused at once: the scheduler kept no reference and changed nothing. */
    TU_CHECK_INT(atomic_load(&d->refs), 1);
    TU_CHECK_INT(atomic_load(&d->state), MCP_REQUEST_PENDING);
    mcp_request_fail(d, st, "queue of model '%s' is full", m->v.name);
    TU_CHECK_INT(atomic_load(&d->state), MCP_REQUEST_COMPLETED);
    mcp_scheduler_stats ss;
    mcp_scheduler_stats_get(s, &ss);
    TU_CHECK_INT(ss.queue_depth, 2);
    tv_gate_open(&g);
    TU_CHECK(tv_tracker_wait(&t, 3)); /* d (failed by the caller), b, c */
    mcp_scheduler_drain(s);
    check_succeeded(m, b, __LINE__);
    check_succeeded(m, c, __LINE__);
    /* Room again once drained? No: a drained scheduler refuses. */
    mcp_request *e = tv_request(1, 503, false);
    TU_CHECK_STATUS(submit(s, m, e, tv_track_done, &t), MCP_STATUS_UNAVAILABLE, NULL);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_UNAVAILABLE), 503);
    mcp_scheduler_destroy(s);
    mcp_request *all[] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++) mcp_request_release(all[i]);
    tv_tracker_destroy(&t);
    tv_gate_destroy(&g);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

/* ---- drain ---- */

typedef struct prober {
    mcp_scheduler *s;
    const tv_model *m;
    tv_gate *g;
    tv_tracker *t;
    int accepted;
    bool saw_unavailable;
} prober;

/* Submits probes until the scheduler says it is draining, then lets the
 * held worker go. */
static void *probe_main(void *arg)
{
    prober *p = arg;
    for (int i = 0; i < 20000 && !p->saw_unavailable; i++) {
        mcp_request *r = tv_request(1, 600 + i % 100, false);
        mcp_status st = submit(p->s, p->m, r, tv_track_done, p->t);
        if (st == MCP_STATUS_OK) p->accepted++;
        else p->saw_unavailable = st == MCP_STATUS_UNAVAILABLE;
        mcp_request_release(r); /* accepted ones live on in the scheduler */
        if (!p->saw_unavailable) sleep_ms(1);
    }
    tv_gate_open(p->g);
    return NULL;
}

static void test_drain(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(2, 0);
    o.max_queue_size = 1024;
    o.max_queue_delay_us = 60LL * 1000 * 1000; /* only the drain makes partial batches leave */
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_gate g;
    tv_gate_init(&g);
    tv_tracker t;
    tv_tracker_init(&t, 2048);
    /* A full batch (2 rows), so it leaves without waiting out the delay. */
    mcp_request *a = hold_worker_rows(s, m, &g, 2);
    mcp_request *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = tv_request(1, 700 + i, false);
        TU_CHECK_STATUS(submit(s, m, r[i], tv_track_done, &t), MCP_STATUS_OK, NULL);
    }
    prober p = {s, m, &g, &t, 0, false};
    pthread_t th;
    pthread_create(&th, NULL, probe_main, &p);
    mcp_scheduler_drain(s); /* returns once everything queued has finished */
    pthread_mutex_lock(&t.mu);
    int done = t.done;
    pthread_mutex_unlock(&t.mu);
    pthread_join(th, NULL);
    TU_CHECK(p.saw_unavailable);
    TU_CHECK_INT(done, 3 + p.accepted);
    for (int i = 0; i < 3; i++) check_succeeded(m, r[i], __LINE__);
    check_succeeded(m, a, __LINE__);
    mcp_scheduler_stats st;
    mcp_scheduler_stats_get(s, &st);
    TU_CHECK_INT(st.success_count, 4 + p.accepted);
    TU_CHECK_INT(st.queue_depth, 0);
    mcp_scheduler_destroy(s);
    for (int i = 0; i < 3; i++) mcp_request_release(r[i]);
    mcp_request_release(a);
    tv_tracker_destroy(&t);
    tv_gate_destroy(&g);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

/* Destroy without an explicit drain finishes queued work first. */
static void test_destroy_drains(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(4, 2);
    o.max_queue_delay_us = 60LL * 1000 * 1000;
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_tracker t;
    tv_tracker_init(&t, 16);
    mcp_request *r[5];
    for (int i = 0; i < 5; i++) {
        r[i] = tv_request(1 + i % 2, 800 + i, false);
        TU_CHECK_STATUS(submit(s, m, r[i], tv_track_done, &t), MCP_STATUS_OK, NULL);
    }
    mcp_scheduler_destroy(s);
    TU_CHECK_INT(t.done, 5);
    for (int i = 0; i < 5; i++) {
        check_succeeded(m, r[i], __LINE__);
        mcp_request_release(r[i]);
    }
    tv_tracker_destroy(&t);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

/* ---- tensor cache ---- */

/* Three rounds of one 4-row batch each on one scheduler: the first
 * allocates a buffer per input, the later ones reuse them. */
static void cache_rounds(bool enabled, int64_t *hits, int64_t *misses)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(4, 0);
    o.enable_tensor_cache = enabled;
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    for (int round = 0; round < 3; round++) {
        tv_gate g;
        tv_gate_init(&g);
        tv_tracker t;
        tv_tracker_init(&t, 4);
        mcp_request *a = hold_worker(s, m, &g), *r[4];
        for (int i = 0; i < 4; i++) {
            r[i] = tv_request(1, 900 + round * 10 + i, false);
            TU_CHECK_STATUS(submit(s, m, r[i], tv_track_done, &t), MCP_STATUS_OK, NULL);
        }
        tv_gate_open(&g);
        TU_CHECK(tv_tracker_wait(&t, 4));
        for (int i = 0; i < 4; i++) {
            check_succeeded(m, r[i], __LINE__);
            TU_CHECK_INT(r[i]->batch_size, 4);
        }
        mcp_request_release(a);
        for (int i = 0; i < 4; i++) mcp_request_release(r[i]);
        tv_tracker_destroy(&t);
        tv_gate_destroy(&g);
    }
    mcp_scheduler_drain(s);
    mcp__scheduler_cache_counts(s, hits, misses);
    mcp_scheduler_destroy(s);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

static void test_tensor_cache(void)
{
    int64_t hits = -1, misses = -1;
    cache_rounds(true, &hits, &misses);
    TU_CHECK_INT(misses, 2); /* one buffer per input, first batch only */
    TU_CHECK_INT(hits, 4);   /* two later batches, two inputs each */
    cache_rounds(false, &hits, &misses);
    TU_CHECK_INT(misses, 0);
    TU_CHECK_INT(hits, 0);
}

/* ---- failures and options ---- */

static void test_run_failure(void)
{
    /* Metadata looser than the graph: validation passes, the session
     * rejects the input, and the request fails with the engine's message. */
    tv_model *m = tv_digits_create(MCP_DIGITS_MODEL, 8);
    TU_REQUIRE(m);
    m->inputs[0].dims[1] = -1;
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(8, 0);
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_tracker t;
    tv_tracker_init(&t, 2);
    mcp_request *r = tv_digits_request(2, 1);
    r->inputs[0].t.dims[1] = 32; /* 2 x 32 of the 2 x 64 floats */
    TU_CHECK_STATUS(submit(s, m, r, tv_track_done, &t), MCP_STATUS_OK, NULL);
    TU_CHECK(tv_tracker_wait(&t, 1));
    mcp_scheduler_destroy(s);
    TU_CHECK_INT(atomic_load(&r->state), MCP_REQUEST_COMPLETED);
    TU_CHECK_INT(r->status, MCP_STATUS_INVALID_ARGUMENT);
    TU_CHECK_CONTAINS(r->error, "digits");
    TU_CHECK_CONTAINS(r->error, "input");
    TU_CHECK_INT(r->n_outputs, 0);
    mcp_request_release(r);
    tv_tracker_destroy(&t);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

static void test_create_errors(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s = (mcp_scheduler *)&s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(8, 0);
    o.instances = 0;
    TU_CHECK_STATUS(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK(s == NULL);
    TU_CHECK_CONTAINS(msg, "instances");
    TU_CHECK_CONTAINS(msg, "mlp");
    o = opts(8, -1);
    TU_CHECK_STATUS(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "prefetch_queue_depth");
    o = opts(8, 0);
    o.n_preferred = 1;
    o.preferred[0] = 0;
    TU_CHECK_STATUS(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "preferred");
    o = opts(8, 0);
    m->outputs[1].graph_name = "ZZ";
    TU_CHECK_STATUS(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "output 'z'");
    TU_CHECK_CONTAINS(msg, "'ZZ'");
    m->outputs[1].graph_name = "Z";
    /* A request that skipped validation is refused, not run. */
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    mcp_request *r = tv_request(1, 1, true);
    TU_CHECK_STATUS(mcp_scheduler_submit(s, r), MCP_STATUS_INVALID_ARGUMENT, NULL);
    mcp_scheduler_destroy(s);
    mcp_scheduler_destroy(NULL);
    mcp_request_release(r);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

static void test_options_from(void)
{
    mcp_descriptor d;
    memset(&d, 0, sizeof d);
    d.max_batch_size = 16;
    d.instance_count = 3;
    d.instance_threads = 2;
    d.batching.enabled = true;
    d.batching.max_queue_delay_us = 250;
    d.batching.n_preferred = 3;
    d.batching.preferred[0] = 4;
    d.batching.preferred[1] = 64; /* above max_batch_size: dropped */
    d.batching.preferred[2] = 8;
    d.batching.max_queue_size = 100;
    d.batching.default_timeout_us = 5000;
    d.batching.prefetch_queue_depth = 8;
    d.batching.enable_tensor_cache = true;
    mcp_scheduler_options o = mcp_scheduler_options_from(&d);
    TU_CHECK_INT(o.max_batch_size, 16);
    TU_CHECK_INT(o.max_queue_delay_us, 250);
    TU_CHECK_INT(o.n_preferred, 2);
    TU_CHECK_INT(o.preferred[0], 4);
    TU_CHECK_INT(o.preferred[1], 8);
    TU_CHECK_INT(o.max_queue_size, 100);
    TU_CHECK_INT(o.default_timeout_us, 5000);
    TU_CHECK_INT(o.instances, 3);
    TU_CHECK_INT(o.threads_per_instance, 2);
    TU_CHECK_INT(o.prefetch_queue_depth, 8);
    TU_CHECK(o.enable_tensor_cache);
    d.batching.enabled = false;
    o = mcp_scheduler_options_from(&d);
    TU_CHECK_INT(o.max_batch_size, 1);
    TU_CHECK_INT(o.n_preferred, 0);
    d.max_batch_size = 0;
    d.instance_count = 0;
    o = mcp_scheduler_options_from(&d);
    TU_CHECK_INT(o.max_batch_size, 0);
    TU_CHECK_INT(o.instances, 1);
}

/* A model without a batch dimension: each request runs alone. */
static void test_no_batch_dim(void)
{
    tv_model *m = tv_model_create(0);
    int64_t live = mcp_alloc_live_count();
    mcp_scheduler *s;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_scheduler_options o = opts(8, 0);
    TU_REQUIRE_OK(mcp_scheduler_create(&m->v, &o, NULL, &s, &err), msg);
    tv_gate g;
    tv_gate_init(&g);
    tv_tracker t;
    tv_tracker_init(&t, 4);
    mcp_request *a = hold_worker(s, m, &g), *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = tv_request(2, 1000 + i, false);
        TU_CHECK_STATUS(submit(s, m, r[i], tv_track_done, &t), MCP_STATUS_OK, NULL);
    }
    tv_gate_open(&g);
    TU_CHECK(tv_tracker_wait(&t, 3));
    mcp_scheduler_destroy(s);
    for (int i = 0; i < 3; i++) {
        check_succeeded(m, r[i], __LINE__);
        TU_CHECK_INT(r[i]->batch_size, 1);
        mcp_request_release(r[i]);
    }
    mcp_request_release(a);
    tv_tracker_destroy(&t);
    tv_gate_destroy(&g);
    mcp_session_trim(m->v.session); /* run contexts are the session's */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_options_from);
    TU_RUN(test_create_errors);
    TU_RUN(test_batch_and_split);
    TU_RUN(test_preferred);
    TU_RUN(test_priority);
    TU_RUN(test_tenant_fairness);
    TU_RUN(test_tenant_cap);
    TU_RUN(test_generate_fairness);
    TU_RUN(test_timeout);
    TU_RUN(test_cancel);
    TU_RUN(test_queue_full);
    TU_RUN(test_drain);
    TU_RUN(test_destroy_drains);
    TU_RUN(test_tensor_cache);
    TU_RUN(test_run_failure);
    TU_RUN(test_no_batch_dim);
    TU_RUN(test_clients_mlp);
    TU_RUN(test_clients_digits);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("serve_scheduler");
}
