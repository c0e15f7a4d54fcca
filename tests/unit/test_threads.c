/*
 * One session run from many threads at once: every result is checked
 * against the hand-computed value for that thread's own inputs. A bounded
 * loop with no timing assertions; data races show up as wrong numbers (and
 * under ThreadSanitizer, if one is used, as reports). And the thread budget
 * tuner (engine/tune.c) on synthetic runs: an idle machine never probes, a
 * neighbour present from the start or arriving later is met with half the
 * threads within a few runs, its leaving is noticed within the probe
 * period, and a slowdown that fewer threads do not cure is accepted after
 * one probe, or probed ever more rarely. A session with adaptive_threads
 * still gives the right numbers from many threads.
 */
#include <pthread.h>
#include <stdbool.h>

#include "base/base.h" /* mcp_alloc_live_count */
#include "engine/tune.h"
#include "mcp/mcp.h"
#include "model_builder.h"
#include "test_util.h"

enum { N_THREADS = 8, N_RUNS = 200, N_SESSIONS_PER_THREAD = 10 };

typedef struct worker {
    const mcp_session *session;
    const uint8_t *model; /* for the create/destroy test */
    size_t model_len;
    pthread_barrier_t *start;
    int index;
    int runs_ok;
    int failures;
    char first_failure[512];
} worker;

static void worker_fail(worker *w, const char *fmt, const char *detail, int run)
{
    if (w->failures++ == 0)
        snprintf(w->first_failure, sizeof w->first_failure, "thread %d run %d: %.64s %.400s",
                 w->index, run, fmt, detail ? detail : "");
}

/* Thread t's input for run i: integers and halves only, distinct per
 * (t, i), so exact results tell the threads' data apart. */
static void make_input(int t, int i, int64_t batch, float *x)
{
    for (int64_t r = 0; r < batch; r++) {
        x[r * 3 + 0] = (float)t;
        x[r * 3 + 1] = (float)(i % 17) - 8.0f + (float)r;
        x[r * 3 + 2] = 0.5f * (float)((i / 17) % 9) - (float)t;
    }
}

static bool check_output(const mcp_value *v, int64_t batch, const float *expect)
{
    mcp_dtype dt;
    int rank;
    const int64_t *dims;
    const void *data;
    if (!v || mcp_value_get_tensor(v, &dt, &rank, &dims, &data) != MCP_STATUS_OK) return false;
    if (dt != MCP_DTYPE_FLOAT || rank != 2 || dims[0] != batch || dims[1] != 2) return false;
    const float *f = data;
    for (int64_t i = 0; i < batch * 2; i++)
        if (f[i] != expect[i]) return false;
    return true;
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    char msg[512];
    const char *in_names[] = {"X"}, *only_y[] = {"Y"};
    for (int i = 0; i < N_RUNS; i++) {
        int64_t batch = 1 + (w->index + i) % 4;
        float x[12], y[8], z[8];
        make_input(w->index, i, batch, x);
        mb_mlp_reference(x, batch, y, z);
        const int64_t xd[] = {batch, 3};
        mcp_value *xv = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, xd, x, msg, sizeof msg);
        if (!xv) {
            worker_fail(w, "create input:", msg, i);
            continue;
        }
        mcp_value *outs[2] = {NULL, NULL};
        /* Every third run selects only Y, to vary the path through run. */
        bool select = i % 3 == 2;
        mcp_status st = mcp_session_run(w->session, 1, in_names, &xv, select ? 1 : 0,
                                        select ? only_y : NULL, outs, msg, sizeof msg);
        if (st != MCP_STATUS_OK) {
            worker_fail(w, "run failed:", msg, i);
        } else if (select ? !check_output(outs[0], batch, y)
                          : !(check_output(outs[0], batch, z) && check_output(outs[1], batch, y))) {
            worker_fail(w, "wrong result", NULL, i);
        } else {
            w->runs_ok++;
        }
        mcp_value_destroy(outs[0]);
        mcp_value_destroy(outs[1]);
        mcp_value_destroy(xv);
    }
    return NULL;
}

static void test_shared_session(void)
{
    char msg[1024] = "";
    mb_model *m = mb_example_mlp();
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    mcp_session *s = NULL;
    /* Two threads a run, tuned: 8 callers on few cores are contention, so
     * runs move between one and two threads while the results stay right. */
    mcp_session_options o = mcp_session_options_default();
    o.threads = 2;
    o.adaptive_threads = 1;
    mcp_status st = mcp_session_create_from_memory(buf, len, NULL, &o, &s, msg, sizeof msg);
    free(buf);
    TU_REQUIRE_OK(st, msg);

    pthread_barrier_t start;
    TU_REQUIRE(pthread_barrier_init(&start, NULL, N_THREADS) == 0);
    worker w[N_THREADS];
    pthread_t th[N_THREADS];
    int started = 0;
    for (int t = 0; t < N_THREADS; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].session = s;
        w[t].start = &start;
        w[t].index = t;
    }
    for (int t = 0; t < N_THREADS; t++) {
        if (pthread_create(&th[t], NULL, run_worker, &w[t]) != 0) break;
        started++;
    }
    TU_CHECK_INT(started, N_THREADS);
    /* If a thread failed to start the others would wait forever at the
     * barrier, so only join when all started. */
    if (started == N_THREADS) {
        for (int t = 0; t < N_THREADS; t++) pthread_join(th[t], NULL);
        for (int t = 0; t < N_THREADS; t++) {
            if (w[t].failures) fprintf(stderr, "%s (%d failures)\n", w[t].first_failure, w[t].failures);
            TU_CHECK_INT(w[t].failures, 0);
            TU_CHECK_INT(w[t].runs_ok, N_RUNS);
        }
    }
    pthread_barrier_destroy(&start);
    mcp_session_destroy(s);
}

/* Separate sessions created, run and destroyed on many threads at once: no
 * hidden global state in loading. */
static void *create_worker(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    char msg[512];
    const char *in_names[] = {"X"};
    for (int k = 0; k < N_SESSIONS_PER_THREAD; k++) {
        mcp_session *s = NULL;
        if (mcp_session_create_from_memory(w->model, w->model_len, NULL, NULL, &s, msg, sizeof msg) != MCP_STATUS_OK) {
            worker_fail(w, "create session:", msg, k);
            continue;
        }
        float x[3], y[2], z[2];
        make_input(w->index, k, 1, x);
        mb_mlp_reference(x, 1, y, z);
        const int64_t xd[] = {1, 3};
        mcp_value *xv = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, xd, x, msg, sizeof msg);
        mcp_value *outs[2] = {NULL, NULL};
        if (!xv || mcp_session_run(s, 1, in_names, &xv, 0, NULL, outs, msg, sizeof msg) != MCP_STATUS_OK)
            worker_fail(w, "run:", msg, k);
        else if (!check_output(outs[0], 1, z) || !check_output(outs[1], 1, y))
            worker_fail(w, "wrong result", NULL, k);
        else
            w->runs_ok++;
        mcp_value_destroy(outs[0]);
        mcp_value_destroy(outs[1]);
        mcp_value_destroy(xv);
        mcp_session_destroy(s);
    }
    return NULL;
}

static void test_concurrent_sessions(void)
{
    mb_model *m = mb_example_mlp();
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);

    pthread_barrier_t start;
    TU_REQUIRE(pthread_barrier_init(&start, NULL, N_THREADS) == 0);
    worker w[N_THREADS];
    pthread_t th[N_THREADS];
    int started = 0;
    for (int t = 0; t < N_THREADS; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].model = buf;
        w[t].model_len = len;
        w[t].start = &start;
        w[t].index = t;
    }
    for (int t = 0; t < N_THREADS; t++) {
        if (pthread_create(&th[t], NULL, create_worker, &w[t]) != 0) break;
        started++;
    }
    TU_CHECK_INT(started, N_THREADS);
    if (started == N_THREADS) {
        for (int t = 0; t < N_THREADS; t++) pthread_join(th[t], NULL);
        for (int t = 0; t < N_THREADS; t++) {
            if (w[t].failures) fprintf(stderr, "%s (%d failures)\n", w[t].first_failure, w[t].failures);
            TU_CHECK_INT(w[t].failures, 0);
            TU_CHECK_INT(w[t].runs_ok, N_SESSIONS_PER_THREAD);
        }
    }
    pthread_barrier_destroy(&start);
    free(buf);
}

/* A phase of runs: latency on T = 2 threads and on alt = 1, and the share
 * of a core each of the 2 threads gets (1: idle; 0.75: a neighbour on one
 * core). The first run on one thread builds primitives (slower). */
typedef struct phase {
    double at2, at1, share2;
    int runs;
} phase;

typedef struct tune_log {
    int probes, runs_at1, last_switch_run, cur_end;
} tune_log;

static tune_log drive(mcp__tune *t, const phase *ph, bool *first1)
{
    tune_log log = {0, 0, -1, 0};
    for (int r = 0; r < ph->runs; r++) {
        bool probe;
        int before = t->cur;
        int n = mcp__tune_threads(t, 2, &probe);
        TU_CHECK(n == 1 || n == 2);
        double ms = n == 2 ? ph->at2 : ph->at1;
        if (n == 1 && *first1) {
            ms *= 3;
            *first1 = false;
        }
        mcp__tune_update(t, 2, n, probe, ms, n == 2 ? ms * 2 * ph->share2 : ms);
        log.probes += probe;
        log.runs_at1 += n == 1;
        if (before && t->cur != before) log.last_switch_run = r;
    }
    log.cur_end = t->cur;
    return log;
}

static void test_tune_state_machine(void)
{
    /* Idle: no probe in 500 runs. */
    mcp__tune t = {0};
    bool first1 = true;
    phase idle = {10.0, 19.0, 1.0, 500};
    tune_log log = drive(&t, &idle, &first1);
    TU_CHECK_INT(log.probes, 0);
    TU_CHECK_INT(log.cur_end, 2);
    /* A neighbour arrives: two threads now take 21 ms and wait for a core,
     * one takes 18.5 ms. Within ten runs the plan runs on one thread. */
    phase busy = {21.0, 18.5, 0.75, 300};
    log = drive(&t, &busy, &first1);
    TU_CHECK_INT(log.cur_end, 1);
    TU_CHECK(log.last_switch_run >= 0 && log.last_switch_run < 10);
    /* Probes back at two threads lose and grow apart (every 8, 16, ...
     * 128 runs): a handful in 300. */
    TU_CHECK(log.probes <= 12);
    TU_CHECK(log.runs_at1 > 280);
    /* The neighbour leaves: two threads win again within the probe period
     * (128 runs) and stay. */
    log = drive(&t, &idle, &first1);
    TU_CHECK_INT(log.cur_end, 2);
    TU_CHECK(log.last_switch_run >= 0 && log.last_switch_run <= 130);
    TU_CHECK(log.runs_at1 <= 130);

    /* A neighbour there from the start: the starved threads say so. */
    mcp__tune u = {0};
    first1 = true;
    log = drive(&u, &busy, &first1);
    TU_CHECK_INT(log.cur_end, 1);
    TU_CHECK(log.last_switch_run >= 0 && log.last_switch_run < 10);

    /* Slower at both counts and not starved (a bigger input, memory
     * bandwidth): one probe (two runs), accepted as the new normal. */
    mcp__tune v = {0};
    first1 = true;
    drive(&v, &idle, &first1);
    phase heavier = {15.0, 28.0, 1.0, 400};
    log = drive(&v, &heavier, &first1);
    TU_CHECK_INT(log.cur_end, 2);
    TU_CHECK(log.probes <= 2);

    /* Starved, but one thread is no faster: probes back off (3, 6, 12 ...
     * signalling runs apart). */
    mcp__tune x = {0};
    first1 = true;
    phase shared = {20.0, 25.0, 0.75, 400};
    log = drive(&x, &shared, &first1);
    TU_CHECK_INT(log.cur_end, 2);
    TU_CHECK(log.probes <= 16);

    /* A single thread's budget is never tuned. */
    mcp__tune w = {0};
    bool probe = true;
    TU_CHECK_INT(mcp__tune_threads(&w, 1, &probe), 1);
    TU_CHECK(!probe);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_shared_session);
    TU_RUN(test_concurrent_sessions);
    TU_RUN(test_tune_state_machine);
    /* The counted allocator stayed consistent under concurrency. */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("test_threads");
}
