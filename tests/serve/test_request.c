/*
 * Requests: names, the state machine (legal and illegal edges through the
 * table; racing completers through compare-exchange), fail/complete calling
 * done exactly once, validation messages naming the tensor, HTTP codes and
 * release freeing what a request owns.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "sched_support.h"
#include "serve/scheduler_util.h"
#include "test_util.h"

static void test_names(void)
{
    TU_CHECK_STR(mcp_protocol_name(MCP_PROTOCOL_V2), "v2");
    TU_CHECK_STR(mcp_protocol_name(MCP_PROTOCOL_V1), "v1");
    TU_CHECK_STR(mcp_protocol_name(MCP_PROTOCOL_SIMPLE), "simple");
    TU_CHECK_STR(mcp_protocol_name(MCP_PROTOCOL_COUNT), "unknown");
    TU_CHECK_STR(mcp_request_state_name(MCP_REQUEST_PENDING), "Pending");
    TU_CHECK_STR(mcp_request_state_name(MCP_REQUEST_TIMED_OUT), "TimedOut");
    TU_CHECK_STR(mcp_request_state_name(MCP_REQUEST_COMPLETED), "Completed");
    TU_CHECK_STR(mcp_request_state_name((mcp_request_state)42), "unknown");
}

static void test_transition_table(void)
{
    enum { P = MCP_REQUEST_PENDING, R = MCP_REQUEST_RUNNING, S = MCP_REQUEST_SUCCEEDED, F = MCP_REQUEST_FAILED,
           X = MCP_REQUEST_CANCELLED, T = MCP_REQUEST_TIMED_OUT, C = MCP_REQUEST_COMPLETED, N = C + 1 };
    /* expected[from][to] */
    static const bool expected[N][N] = {
        [P] = {[R] = true, [X] = true, [T] = true, [F] = true},
        [R] = {[S] = true, [F] = true},
        [S] = {[C] = true},
        [F] = {[C] = true},
        [X] = {[C] = true},
        [T] = {[C] = true},
    };
    int legal = 0;
    for (int from = 0; from < N; from++)
        for (int to = 0; to < N; to++) {
            bool got = mcp__request_transition_legal((mcp_request_state)from, (mcp_request_state)to);
            if (got != expected[from][to])
                TU_FAIL_AT(__FILE__, __LINE__, "%s -> %s: table says %d", mcp_request_state_name((mcp_request_state)from),
                           mcp_request_state_name((mcp_request_state)to), got);
            legal += got;
        }
    TU_CHECK_INT(legal, 10);
    /* Illegal by construction, among them the ones a careless caller might try. */
    TU_CHECK(!mcp__request_transition_legal(MCP_REQUEST_PENDING, MCP_REQUEST_SUCCEEDED));
    TU_CHECK(!mcp__request_transition_legal(MCP_REQUEST_PENDING, MCP_REQUEST_COMPLETED));
    TU_CHECK(!mcp__request_transition_legal(MCP_REQUEST_RUNNING, MCP_REQUEST_CANCELLED));
    TU_CHECK(!mcp__request_transition_legal(MCP_REQUEST_RUNNING, MCP_REQUEST_TIMED_OUT));
    TU_CHECK(!mcp__request_transition_legal(MCP_REQUEST_COMPLETED, MCP_REQUEST_PENDING));
    TU_CHECK(!mcp__request_transition_legal((mcp_request_state)-1, MCP_REQUEST_RUNNING));
    TU_CHECK(!mcp__request_transition_legal(MCP_REQUEST_PENDING, (mcp_request_state)99));
    TU_CHECK(mcp__request_state_is_final(MCP_REQUEST_TIMED_OUT));
    TU_CHECK(!mcp__request_state_is_final(MCP_REQUEST_RUNNING));
}

/* An illegal transition is a bug: it aborts (checked in a child process). */
static void test_illegal_transition_asserts(void)
{
    static const mcp_request_state steps[][3] = {
        /* states to reach first (PENDING = none), then the illegal one */
        {MCP_REQUEST_PENDING, MCP_REQUEST_PENDING, MCP_REQUEST_SUCCEEDED},
        {MCP_REQUEST_PENDING, MCP_REQUEST_PENDING, MCP_REQUEST_COMPLETED},
        {MCP_REQUEST_RUNNING, MCP_REQUEST_PENDING, MCP_REQUEST_COMPLETED},
        {MCP_REQUEST_RUNNING, MCP_REQUEST_SUCCEEDED, MCP_REQUEST_PENDING},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        fflush(stderr);
        pid_t pid = fork();
        TU_REQUIRE(pid >= 0);
        if (pid == 0) {
            /* The child's message would look like a failure in the log. */
            if (!freopen("/dev/null", "w", stderr)) _exit(3);
            mcp_request *r = mcp_request_create(MCP_PROTOCOL_V2);
            for (int k = 0; k < 2; k++)
                if (steps[i][k] != MCP_REQUEST_PENDING && !mcp_request_transition(r, steps[i][k])) _exit(2);
            mcp_request_transition(r, steps[i][2]);
            _exit(0); /* not reached when the transition asserts */
        }
        int status = 0;
        TU_REQUIRE(waitpid(pid, &status, 0) == pid);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT))
            TU_FAIL_AT(__FILE__, __LINE__, "case %zu: the illegal transition to %s did not abort (status %d)", i,
                       mcp_request_state_name(steps[i][2]), status);
        tu_checks++;
    }
}

typedef struct done_count {
    atomic_int calls;
} done_count;

static void count_done(mcp_request *r, void *user)
{
    (void)r;
    done_count *d = user;
    atomic_fetch_add(&d->calls, 1);
}

static void test_transitions(void)
{
    int64_t live = mcp_alloc_live_count();
    done_count d = {0};
    mcp_request *r = mcp_request_create(MCP_PROTOCOL_V1);
    TU_REQUIRE(r);
    r->done = count_done;
    r->done_user = &d;
    TU_CHECK_INT(atomic_load(&r->state), MCP_REQUEST_PENDING);
    TU_CHECK(r->t_arrival_ns > 0);
    TU_CHECK(mcp_request_transition(r, MCP_REQUEST_RUNNING));
    /* Losers of the race out of Pending: a timeout, a cancel, a second worker. */
    TU_CHECK(!mcp_request_transition(r, MCP_REQUEST_TIMED_OUT));
    TU_CHECK(!mcp_request_transition(r, MCP_REQUEST_CANCELLED));
    TU_CHECK(!mcp_request_transition(r, MCP_REQUEST_RUNNING));
    TU_CHECK_INT(atomic_load(&r->state), MCP_REQUEST_RUNNING);
    TU_CHECK(mcp_request_transition(r, MCP_REQUEST_SUCCEEDED));
    /* A racing loser (say a timeout) finds a final state: false, no change. */
    TU_CHECK(!mcp_request_transition(r, MCP_REQUEST_TIMED_OUT));
    TU_CHECK(!mcp_request_transition(r, MCP_REQUEST_FAILED));
    TU_CHECK_INT(atomic_load(&r->state), MCP_REQUEST_SUCCEEDED);
    mcp_request_complete(r);
    TU_CHECK_INT(atomic_load(&r->state), MCP_REQUEST_COMPLETED);
    TU_CHECK_INT(atomic_load(&d.calls), 1);
    mcp_request_complete(r); /* second completer: nothing happens */
    mcp_request_fail(r, MCP_STATUS_INTERNAL, "late failure");
    TU_CHECK_INT(atomic_load(&d.calls), 1);
    TU_CHECK_INT(r->status, MCP_STATUS_OK);
    mcp_request_release(r);

    /* fail() from Pending: Failed -> Completed, status and message set. */
    r = mcp_request_create(MCP_PROTOCOL_V2);
    TU_REQUIRE(r);
    atomic_store(&d.calls, 0);
    r->done = count_done;
    r->done_user = &d;
    mcp_request_fail(r, MCP_STATUS_RESOURCE_EXHAUSTED, "queue of model '%s' is full", "m");
    TU_CHECK_INT(atomic_load(&r->state), MCP_REQUEST_COMPLETED);
    TU_CHECK_INT(r->status, MCP_STATUS_RESOURCE_EXHAUSTED);
    TU_CHECK_STR(r->error, "queue of model 'm' is full");
    TU_CHECK_INT(atomic_load(&d.calls), 1);
    mcp_request_fail(r, MCP_STATUS_INTERNAL, "again");
    TU_CHECK_INT(atomic_load(&d.calls), 1);
    TU_CHECK_INT(r->status, MCP_STATUS_RESOURCE_EXHAUSTED);

    /* Retain/release: the last reference frees. */
    TU_CHECK(mcp_request_retain(r) == r);
    mcp_request_release(r);
    mcp_request_release(r);

    /* Pending -> Cancelled and TimedOut, then a late Running loses. */
    mcp_request_state finals[] = {MCP_REQUEST_CANCELLED, MCP_REQUEST_TIMED_OUT, MCP_REQUEST_FAILED};
    for (int i = 0; i < 3; i++) {
        r = mcp_request_create(MCP_PROTOCOL_SIMPLE);
        TU_REQUIRE(r);
        TU_CHECK(mcp_request_transition(r, finals[i]));
        TU_CHECK(!mcp_request_transition(r, MCP_REQUEST_RUNNING));
        TU_CHECK(mcp_request_transition(r, MCP_REQUEST_COMPLETED));
        TU_CHECK(!mcp_request_transition(r, MCP_REQUEST_COMPLETED));
        mcp_request_release(r);
    }
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

/* Two threads race Running against TimedOut on the same request; exactly
 * one may win each round. */
enum { RACE_ROUNDS = 300 };

typedef struct racer {
    pthread_barrier_t *start;
    mcp_request **slot;
    mcp_request_state to;
    int wins;
} racer;

static void *race_main(void *arg)
{
    racer *x = arg;
    for (int i = 0; i < RACE_ROUNDS; i++) {
        pthread_barrier_wait(x->start);
        x->wins += mcp_request_transition(x->slot[i], x->to);
        pthread_barrier_wait(x->start);
    }
    return NULL;
}

static void test_transition_race(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_request *reqs[RACE_ROUNDS];
    for (int i = 0; i < RACE_ROUNDS; i++) {
        reqs[i] = mcp_request_create(MCP_PROTOCOL_V2);
        TU_REQUIRE(reqs[i]);
    }
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    racer a = {&start, reqs, MCP_REQUEST_RUNNING, 0}, b = {&start, reqs, MCP_REQUEST_TIMED_OUT, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race_main, &a);
    pthread_create(&tb, NULL, race_main, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&start);
    TU_CHECK_INT(a.wins + b.wins, RACE_ROUNDS);
    int running = 0;
    for (int i = 0; i < RACE_ROUNDS; i++) {
        int s = atomic_load(&reqs[i]->state);
        TU_CHECK(s == MCP_REQUEST_RUNNING || s == MCP_REQUEST_TIMED_OUT);
        running += s == MCP_REQUEST_RUNNING;
        mcp_request_release(reqs[i]);
    }
    TU_CHECK_INT(running, a.wins);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_http_codes(void)
{
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_OK), 200);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_INVALID_ARGUMENT), 400);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_NOT_FOUND), 404);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_TOO_LARGE), 413);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_RESOURCE_EXHAUSTED), 429);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_CANCELLED), 499);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_INTERNAL), 500);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_RUNTIME_ERROR), 500);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_UNSUPPORTED), 501);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_UNAVAILABLE), 503);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_DEADLINE_EXCEEDED), 504);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_UNAUTHENTICATED), 401);
    TU_CHECK_INT(mcp_status_http_code(MCP_STATUS_PERMISSION_DENIED), 403);
    for (int s = 0; s < MCP_STATUS_COUNT; s++) {
        int code = mcp_status_http_code((mcp_status)s);
        TU_CHECK(s == MCP_STATUS_OK ? code == 200 : code >= 400 && code < 600);
    }
}

/* Validates r against m; expects INVALID_ARGUMENT with every needle in the
 * message. */
static void expect_invalid(mcp_request *r, const tv_model *m, const char *n1, const char *n2, int line)
{
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_request_validate(r, &m->v, &err);
    if (st != MCP_STATUS_INVALID_ARGUMENT)
        TU_FAIL_AT(__FILE__, line, "validate gave '%s' (%s), expected invalid argument", mcp_status_str(st), msg);
    if (n1 && !strstr(msg, n1)) TU_FAIL_AT(__FILE__, line, "message '%s' lacks '%s'", msg, n1);
    if (n2 && !strstr(msg, n2)) TU_FAIL_AT(__FILE__, line, "message '%s' lacks '%s'", msg, n2);
    tu_checks++;
    TU_CHECK_INT(mcp_status_http_code(st), 400);
    mcp_request_release(r);
}

static void test_validate(void)
{
    tv_model *m = tv_model_create(8);
    int64_t live = mcp_alloc_live_count();
    char msg[512];
    mcp_err err = {msg, sizeof msg};

    /* Valid, given out of order: reordered to the model's order. */
    mcp_request *r = tv_request(2, 7, true);
    TU_CHECK_STR(r->inputs[0].name, "k");
    TU_CHECK_STATUS(mcp_request_validate(r, &m->v, &err), MCP_STATUS_OK, msg);
    TU_CHECK_STR(r->inputs[0].name, "x");
    TU_CHECK_STR(r->inputs[1].name, "k");
    TU_CHECK_INT(mcp__request_rows(r, &m->v), 2);
    mcp_request_release(r);

    /* Unknown input name. */
    r = tv_request(1, 1, false);
    r->inputs[1].name = "kk";
    expect_invalid(r, m, "unknown input 'kk'", "'x', 'k'", __LINE__);

    /* Missing input. */
    r = tv_request(1, 1, false);
    r->n_inputs = 1;
    expect_invalid(r, m, "missing input 'k'", "[-1]", __LINE__);

    /* Given twice. */
    r = tv_request(1, 1, false);
    r->inputs[1].name = "x";
    expect_invalid(r, m, "input 'x'", "more than once", __LINE__);

    /* Wrong dtype. */
    r = tv_request(1, 1, false);
    r->inputs[1].t.dtype = MCP_DTYPE_INT32;
    expect_invalid(r, m, "input 'k' has datatype", "expects", __LINE__);

    /* Wrong rank. */
    r = tv_request(2, 1, false);
    r->inputs[0].t.rank = 1;
    expect_invalid(r, m, "input 'x' has shape [2]", "expects [-1,3]", __LINE__);

    /* Wrong shape outside the batch dimension. */
    r = tv_request(2, 1, false);
    r->inputs[0].t.dims[1] = 2;
    expect_invalid(r, m, "input 'x' has shape [2,2]", "expects [-1,3]", __LINE__);

    /* Batch larger than max_batch_size. */
    r = tv_request(9, 1, false);
    expect_invalid(r, m, "input 'x' has batch size 9", "at most 8", __LINE__);

    /* Inputs disagreeing on the batch size. */
    r = tv_request(3, 1, false);
    r->inputs[1].t.dims[0] = 2;
    expect_invalid(r, m, "different batch sizes", "'k'", __LINE__);

    /* Unknown requested output. */
    r = tv_request(1, 1, false);
    static const char *bad_out[] = {"y", "w"};
    r->requested = bad_out;
    r->n_requested = 2;
    expect_invalid(r, m, "unknown output 'w'", "'y', 'z', 'k2', 'c'", __LINE__);

    /* A requested output twice. */
    r = tv_request(1, 1, false);
    static const char *dup_out[] = {"z", "z"};
    r->requested = dup_out;
    r->n_requested = 2;
    expect_invalid(r, m, "output 'z'", "more than once", __LINE__);

    /* No data behind a non-empty tensor. */
    r = tv_request(1, 1, false);
    r->inputs[0].t.data = NULL;
    expect_invalid(r, m, "input 'x'", "no data", __LINE__);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);

    /* Without a batch dimension, dim 0 is checked like any other and there
     * is no batch limit. */
    m = tv_model_create(0);
    m->inputs[0].dims[0] = 2;
    r = tv_request(3, 1, false);
    expect_invalid(r, m, "input 'x' has shape [3,3]", "expects [2,3]", __LINE__);
    r = tv_request(2, 1, false);
    TU_CHECK_STATUS(mcp_request_validate(r, &m->v, &err), MCP_STATUS_OK, msg);
    TU_CHECK_INT(mcp__request_rows(r, &m->v), 1);
    mcp_request_release(r);
    tv_model_free(m);
}

/* Release frees owned outputs and drops the model reference. */
static void test_release_frees(void)
{
    tv_model *m = tv_model_create(4);
    int64_t live = mcp_alloc_live_count();
    mcp_request *r = tv_request(1, 3, false);
    r->model = &m->v;
    atomic_fetch_add(&m->v.refs, 1);
    r->outputs = mcp_pool_calloc(r->pool, 2 * sizeof *r->outputs);
    TU_REQUIRE(r->outputs);
    const int64_t d[] = {4, 5};
    TU_REQUIRE_OK(mcp_tensor_alloc(&r->outputs[0].t, MCP_DTYPE_FLOAT, 2, d, NULL), NULL);
    TU_REQUIRE_OK(mcp_tensor_alloc(&r->outputs[1].t, MCP_DTYPE_STRING, 1, d, NULL), NULL);
    TU_REQUIRE_OK(mcp_tensor_set_string(&r->outputs[1].t, 2, "owned", 5), NULL);
    r->n_outputs = 2;
    mcp_request_retain(r);
    mcp_request_release(r);
    TU_CHECK_INT(atomic_load(&m->v.refs), 2);
    mcp_request_release(r);
    TU_CHECK_INT(atomic_load(&m->v.refs), 1);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    tv_model_free(m);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_names);
    TU_RUN(test_transition_table);
    TU_RUN(test_transitions);
    TU_RUN(test_illegal_transition_asserts);
    TU_RUN(test_transition_race);
    TU_RUN(test_http_codes);
    TU_RUN(test_validate);
    TU_RUN(test_release_frees);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("serve_request");
}
