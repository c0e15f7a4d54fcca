/*
 * One session run from many threads at once: every result is checked
 * against the hand-computed value for that thread's own inputs. A bounded
 * loop with no timing assertions; data races show up as wrong numbers (and
 * under ThreadSanitizer, if one is used, as reports).
 */
#include <pthread.h>
#include <stdbool.h>

#include "base/base.h" /* mcp_alloc_live_count */
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
    mcp_status st = mcp_session_create_from_memory(buf, len, NULL, NULL, &s, msg, sizeof msg);
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

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_shared_session);
    TU_RUN(test_concurrent_sessions);
    /* The counted allocator stayed consistent under concurrency. */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("test_threads");
}
