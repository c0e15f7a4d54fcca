/*
 * The scheduler of one model version: a priority queue of requests, one
 * batcher thread that forms batches of compatible requests, a bounded queue
 * of formed batches (prefetch), and `instances` worker threads that run the
 * session and split the outputs back per request.
 *
 * Locking: one mutex guards the queue, the formed batches, the counters and
 * the statistics. Nothing runs a session, copies tensors or calls a
 * completion callback while holding it. The tensor cache has its own small
 * mutex so workers do not contend with the batcher for buffers.
 *
 * Order: the queue serves by priority (lower first) and, within a level,
 * by a weighted-fair-queuing tag (serve/qos.h) given at submit from the
 * request's tenant, weight and rows: while several tenants have requests
 * waiting, each gets rows in proportion to its weight. One tenant's tags
 * only grow, so with a single tenant (every anonymous caller, say) the
 * order is priority, then arrival, as it was before tenants. Equal tags
 * keep arrival order. The tag is fixed at submit; the clock moves when a
 * request leaves the queue for a batch (mu guards both).
 *
 * References: a queued or batched request holds one reference taken by
 * submit; whoever finishes it (batcher for timeouts and cancellations, a
 * worker otherwise) completes it and drops that reference before the
 * scheduler counts it as done, so drain() returning means the scheduler
 * holds no request. The scheduler does not retain the model version (the
 * version owns its scheduler through `serving`); it must be destroyed before
 * the version goes away.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "serve/qos.h"
#include "serve/sandbox.h"
#include "serve/scheduler_util.h"
#include "serve/serve.h"

#define MAX_INSTANCES 1024
#define MAX_PREFETCH 4096
#define DEFAULT_QUEUE_SIZE 1024
/* A batch's request array starts this large and grows on demand. */
#define BATCH_INITIAL_CAP 64

typedef struct qnode {
    struct qnode *prev, *next;
    mcp_request *r;
    int64_t enq_ns;
    int64_t rows;
    double tag; /* fair-queuing tag (mcp_wfq_tag) */
} qnode;

typedef struct sched_batch {
    struct sched_batch *next;
    int n, cap;
    int64_t rows;
    mcp_request **reqs;
    int64_t *enq_ns;
    int64_t *req_rows;
    int64_t formed_ns; /* when it was formed (for traces) */
} sched_batch;

typedef struct cache_buf {
    void *p;
    size_t cap;
} cache_buf;

typedef struct sched_worker {
    mcp_scheduler *s;
    pthread_t thread;
    bool started;
    mcp_value *in_vals;  /* one view per model input */
    mcp_value **in_ptrs; /* per graph input */
    mcp_value *out_vals; /* per graph output, filled by the session */
    mcp_value **out_ptrs;
    void **bufs;         /* per model input: the batch buffer in use, or NULL */
    size_t *buf_caps;
    char msg[512];
} sched_worker;

struct mcp_scheduler {
    mcp_model_version *v; /* borrowed; outlives the scheduler */
    mcp_scheduler_options o;
    mcp_metrics *metrics;
    int64_t max_rows;       /* rows per batch; 1 = no batching */
    int64_t max_preferred;  /* largest preferred size, else max_rows */
    int64_t queue_limit;
    bool model_batches;     /* the model has a batch dimension */
    int n_graph_in, n_graph_out;
    int *in_map, *out_map;  /* model input/output i -> graph input/output index */

    pthread_mutex_t mu;
    pthread_cond_t cv_batcher; /* monotonic clock: timed waits */
    pthread_cond_t cv_worker, cv_idle;
    qnode *head, *tail, *free_nodes; /* (priority, tag), then arrival */
    mcp_wfq *wfq;                    /* the tenants' fair-queuing clock (mu) */
    bool tenants_seen;               /* a request of a tenant came (mu): see prefetch_depth */
    int64_t queue_len;
    int64_t ready_requests; /* requests in formed batches not yet running */
    int64_t next_deadline_ns; /* earliest deadline among queued requests */
    int64_t batcher_wake_ns;  /* the batcher sleeps until then (INT64_MAX: until
                               * signalled); INT64_MIN while it runs */
    sched_batch *ready_head, *ready_tail, *free_batches;
    int n_ready, n_idle, n_running, n_finishing;
    bool draining, stop;
    mcp_scheduler_stats stats;
    mcp_batch_stat *batch_stats; /* by batch size, ascending (mu) */
    int n_batch_stats, cap_batch_stats;

    pthread_mutex_t cache_mu;
    cache_buf *cache;
    int n_cache, cache_cap;
    int64_t cache_hits, cache_misses;

    pthread_t batcher;
    bool batcher_started;
    int n_workers;
    sched_worker *workers;
    int n_batches;
    sched_batch *batches; /* all batch slots, for freeing */
};

/* ---- options ---- */

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* The descriptor was validated; clamping only keeps odd values (0 instances
 * from a hand-made descriptor) from reaching create() as errors. */
mcp_scheduler_options mcp_scheduler_options_from(const mcp_descriptor *d)
{
    mcp_scheduler_options o;
    memset(&o, 0, sizeof o);
    const mcp_batching *b = &d->batching;
    int64_t model_max = d->max_batch_size > 0 ? d->max_batch_size : 0;
    /* Without batching, requests run one at a time (each may still carry
     * several rows of a model with a batch dimension). */
    o.max_batch_size = b->enabled ? model_max : (model_max > 0 ? 1 : 0);
    o.max_queue_delay_us = b->max_queue_delay_us > 0 ? b->max_queue_delay_us : 0;
    for (int i = 0; i < b->n_preferred && i < 16; i++)
        if (b->preferred[i] > 0 && b->preferred[i] <= o.max_batch_size) o.preferred[o.n_preferred++] = b->preferred[i];
    o.max_queue_size = b->max_queue_size > 0 ? b->max_queue_size : DEFAULT_QUEUE_SIZE;
    o.default_timeout_us = b->default_timeout_us > 0 ? b->default_timeout_us : 0;
    o.instances = (int)clamp64(d->instance_count, 1, MAX_INSTANCES);
    o.threads_per_instance = (int)clamp64(d->instance_threads, 1, 1024);
    o.prefetch_queue_depth = (int)clamp64(b->prefetch_queue_depth, 0, MAX_PREFETCH);
    o.enable_tensor_cache = b->enable_tensor_cache;
    return o;
}

/* ---- time ---- */

static struct timespec abs_monotonic(int64_t ns)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- tensor cache: batch input buffers reused across batches ---- */

static size_t round_capacity(size_t need)
{
    if (need < 64) return 64;
    /* Powers of two up to 64 MiB, so batches of varying rows reuse buffers. */
    if (need > ((size_t)64 << 20)) return need;
    size_t c = 64;
    while (c < need) c <<= 1;
    return c;
}

static void *cache_get(mcp_scheduler *s, size_t need, size_t *cap)
{
    if (s->o.enable_tensor_cache) {
        pthread_mutex_lock(&s->cache_mu);
        int best = -1;
        for (int i = 0; i < s->n_cache; i++)
            if (s->cache[i].cap >= need && (best < 0 || s->cache[i].cap < s->cache[best].cap)) best = i;
        if (best >= 0) {
            void *p = s->cache[best].p;
            *cap = s->cache[best].cap;
            s->cache[best] = s->cache[--s->n_cache];
            s->cache_hits++;
            pthread_mutex_unlock(&s->cache_mu);
            return p;
        }
        s->cache_misses++;
        pthread_mutex_unlock(&s->cache_mu);
        *cap = round_capacity(need);
    } else {
        *cap = need ? need : 1;
    }
    return mcp_malloc(*cap);
}

static void cache_put(mcp_scheduler *s, void *p, size_t cap)
{
    if (!p) return;
    if (s->o.enable_tensor_cache) {
        pthread_mutex_lock(&s->cache_mu);
        if (s->n_cache < s->cache_cap) {
            s->cache[s->n_cache++] = (cache_buf){p, cap};
            p = NULL;
        } else {
            /* Full: keep the larger buffer, which serves more batches. */
            int smallest = 0;
            for (int i = 1; i < s->n_cache; i++)
                if (s->cache[i].cap < s->cache[smallest].cap) smallest = i;
            if (s->n_cache > 0 && s->cache[smallest].cap < cap) {
                void *evict = s->cache[smallest].p;
                s->cache[smallest] = (cache_buf){p, cap};
                p = evict;
            }
        }
        pthread_mutex_unlock(&s->cache_mu);
    }
    mcp_free(p);
}

void mcp__scheduler_cache_counts(mcp_scheduler *s, int64_t *hits, int64_t *misses)
{
    pthread_mutex_lock(&s->cache_mu);
    *hits = s->cache_hits;
    *misses = s->cache_misses;
    pthread_mutex_unlock(&s->cache_mu);
}

/* ---- queue (mu held) ---- */

static void queue_unlink(mcp_scheduler *s, qnode *n)
{
    if (n->prev) n->prev->next = n->next;
    else s->head = n->next;
    if (n->next) n->next->prev = n->prev;
    else s->tail = n->prev;
    n->prev = n->next = NULL;
    s->queue_len--;
}

/* Whether a goes after b: a larger priority number, or the same and a
 * larger tag. */
static bool queue_after(const qnode *a, const qnode *b)
{
    if (a->r->priority != b->r->priority) return a->r->priority > b->r->priority;
    return a->tag > b->tag;
}

/* Priority (lower first), then tag, then arrival: walk back from the tail
 * past requests that go after n; equal ones keep their arrival order. A
 * new request usually has the largest tag of its level (always with one
 * tenant), so the walk is short. */
static void queue_insert(mcp_scheduler *s, qnode *n)
{
    qnode *after = s->tail;
    while (after && queue_after(after, n)) after = after->prev;
    n->prev = after;
    n->next = after ? after->next : s->head;
    if (n->next) n->next->prev = n;
    else s->tail = n;
    if (after) after->next = n;
    else s->head = n;
    s->queue_len++;
}

static void node_free(mcp_scheduler *s, qnode *n)
{
    n->r = NULL;
    n->next = s->free_nodes;
    s->free_nodes = n;
}

/* Batches formed ahead of busy workers leave in the order they were
 * formed, outside fair queuing: once tenants share this queue, a worker's
 * next batch is formed only when it is about to be free (at most one per
 * instance ahead), so the order tenants are served in is decided as late
 * as it can be. */
static int prefetch_depth(const mcp_scheduler *s)
{
    if (!s->tenants_seen) return s->o.prefetch_queue_depth;
    return s->o.prefetch_queue_depth < s->o.instances ? s->o.prefetch_queue_depth : s->o.instances;
}

static bool is_idle(const mcp_scheduler *s)
{
    return s->queue_len == 0 && s->n_ready == 0 && s->n_running == 0 && s->n_finishing == 0;
}

static void note_progress(mcp_scheduler *s)
{
    if (is_idle(s)) pthread_cond_broadcast(&s->cv_idle);
}

/* ---- finishing requests that never run ---- */

/* Takes r (Pending) to Cancelled or TimedOut, completes it and drops the
 * scheduler's reference. A request another thread already finished is only
 * released. */
static void finish_early(mcp_scheduler *s, mcp_request *r, int64_t now);

static void finish_unrun(mcp_scheduler *s, mcp_request *r, int64_t now)
{
    finish_early(s, r, now);
    mcp_request_release(r);
}

/* finish_unrun without dropping a reference: for requests a formed batch
 * still points to (its worker drops that reference when it takes them). */
static void finish_early(mcp_scheduler *s, mcp_request *r, int64_t now)
{
    bool cancelled = atomic_load(&r->cancel);
    bool expired = r->deadline_ns > 0 && now >= r->deadline_ns;
    mcp_request_state to = cancelled ? MCP_REQUEST_CANCELLED : MCP_REQUEST_TIMED_OUT;
    if ((cancelled || expired) && mcp_request_transition(r, to)) {
        if (cancelled) {
            r->status = MCP_STATUS_CANCELLED;
            snprintf(r->error, sizeof r->error, "request to model '%s' was cancelled before it ran", s->v->name);
        } else {
            r->status = MCP_STATUS_DEADLINE_EXCEEDED;
            snprintf(r->error, sizeof r->error,
                     "request to model '%s' timed out after %lld us in the queue, before it ran", s->v->name,
                     (long long)((now - r->t_arrival_ns) / 1000));
        }
        pthread_mutex_lock(&s->mu);
        s->stats.fail_count++;
        pthread_mutex_unlock(&s->mu);
        mcp_request_complete(r);
    }
}

/* Requests already formed into batches that wait for a busy worker are
 * answered as soon as they are cancelled or pass their deadline, not when
 * a worker reaches their batch. Call with mu held; returns true when it
 * finished some (it unlocked meanwhile). *next_deadline: the earliest
 * deadline still waiting there. */
#define SWEEP_AT_ONCE 64
static bool sweep_ready(mcp_scheduler *s, int64_t now, int64_t *next_deadline)
{
    mcp_request *gone[SWEEP_AT_ONCE];
    int n = 0;
    int64_t next = INT64_MAX;
    for (sched_batch *b = s->ready_head; b; b = b->next)
        for (int i = 0; i < b->n; i++) {
            mcp_request *r = b->reqs[i];
            if (atomic_load(&r->state) != MCP_REQUEST_PENDING) continue;
            bool due = atomic_load(&r->cancel) || (r->deadline_ns > 0 && now >= r->deadline_ns);
            if (due && n < SWEEP_AT_ONCE) gone[n++] = mcp_request_retain(r);
            else if (due) next = now; /* the rest at the next turn */
            else if (r->deadline_ns > 0 && r->deadline_ns < next) next = r->deadline_ns;
        }
    *next_deadline = next;
    if (n == 0) return false;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++) {
        finish_early(s, gone[i], now);
        mcp_request_release(gone[i]);
    }
    pthread_mutex_lock(&s->mu);
    return true;
}

/* Moves every queued request that is cancelled, past its deadline or no
 * longer Pending onto *out (linked through next) and recomputes the
 * earliest deadline. Returns how many. */
static int collect_unrunnable(mcp_scheduler *s, int64_t now, qnode **out)
{
    int count = 0;
    int64_t next_deadline = INT64_MAX;
    qnode *n = s->head;
    while (n) {
        qnode *nx = n->next;
        mcp_request *r = n->r;
        if (atomic_load(&r->cancel) || (r->deadline_ns > 0 && now >= r->deadline_ns) ||
            atomic_load(&r->state) != MCP_REQUEST_PENDING) {
            queue_unlink(s, n);
            n->next = *out;
            *out = n;
            count++;
        } else if (r->deadline_ns > 0 && r->deadline_ns < next_deadline) {
            next_deadline = r->deadline_ns;
        }
        n = nx;
    }
    s->next_deadline_ns = next_deadline;
    s->n_finishing += count;
    return count;
}

/* ---- batch formation (mu held) ---- */

static bool is_preferred(const mcp_scheduler *s, int64_t rows)
{
    for (int i = 0; i < s->o.n_preferred; i++)
        if (s->o.preferred[i] == rows) return true;
    return false;
}

/* Same input dtypes and shapes outside dim 0, same requested outputs. */
static bool compatible(const mcp_request *a, const mcp_request *b)
{
    if (a->n_inputs != b->n_inputs || a->n_requested != b->n_requested) return false;
    for (int i = 0; i < a->n_inputs; i++) {
        const mcp_tensor *x = &a->inputs[i].t, *y = &b->inputs[i].t;
        if (x->dtype != y->dtype || x->rank != y->rank || x->rank < 1) return false;
        for (int k = 1; k < x->rank; k++)
            if (x->dims[k] != y->dims[k]) return false;
    }
    for (int i = 0; i < a->n_requested; i++)
        if (strcmp(a->requested[i], b->requested[i]) != 0) return false;
    return true;
}

static bool batch_reserve(sched_batch *b, int need)
{
    if (need <= b->cap) return true;
    int cap = b->cap ? b->cap : 1;
    while (cap < need) cap *= 2;
    mcp_request **reqs = mcp_realloc(b->reqs, (size_t)cap * sizeof *reqs);
    if (!reqs) return false;
    b->reqs = reqs;
    int64_t *enq = mcp_realloc(b->enq_ns, (size_t)cap * sizeof *enq);
    if (!enq) return false;
    b->enq_ns = enq;
    int64_t *rows = mcp_realloc(b->req_rows, (size_t)cap * sizeof *rows);
    if (!rows) return false;
    b->req_rows = rows;
    b->cap = cap;
    return true;
}

static void batch_add(mcp_scheduler *s, sched_batch *b, qnode *n)
{
    queue_unlink(s, n);
    mcp_wfq_served(s->wfq, n->tag);
    b->reqs[b->n] = n->r;
    b->enq_ns[b->n] = n->enq_ns;
    b->req_rows[b->n] = n->rows;
    b->rows += n->rows;
    b->n++;
    node_free(s, n);
}

/*
 * Tries to form a batch from the head of the queue. Returns true when one
 * was dispatched; otherwise *wake_ns is when the head's delay window ends.
 *
 * The head always goes; compatible requests behind it join while their rows
 * fit max_rows. The batch leaves at once when it reaches the largest
 * preferred size (or max_rows); otherwise it waits until max_queue_delay_us
 * after the head arrived (or a drain), and then leaves as is. Either way it
 * is cut back to the largest preferred size it passed, when there is one.
 */
static bool try_dispatch(mcp_scheduler *s, int64_t now, int64_t *wake_ns)
{
    qnode *head = s->head;
    sched_batch *b = s->free_batches;
    MCP_ASSERT(head && b);
    /* Pass 1: count what could join, without moving anything. */
    int64_t rows = head->rows;
    int count = 1, cut = is_preferred(s, rows) ? 1 : 0;
    /* compatible(x, x) says whether x can batch at all (every input has a
     * batch dimension). */
    bool batchable = s->max_rows > 1 && head->rows < s->max_rows && compatible(head->r, head->r);
    if (batchable) {
        for (qnode *n = head->next; n && rows < s->max_rows; n = n->next) {
            if (rows + n->rows > s->max_rows || !compatible(head->r, n->r)) continue;
            rows += n->rows;
            count++;
            if (is_preferred(s, rows)) cut = count;
        }
        int64_t window_end = head->enq_ns + s->o.max_queue_delay_us * 1000;
        bool full = rows >= s->max_preferred || rows >= s->max_rows;
        /* Never hold a batch back while an instance would sit idle: waiting
         * only pays when every worker is busy, and then requests pile up on
         * their own. At low load this removes the delay window from the
         * latency (measured: queue time at concurrency 1 went from ~0.8 ms,
         * the window plus hand-offs, to tens of microseconds). */
        bool worker_waiting = s->n_idle > s->n_ready;
        if (!full && !s->draining && now < window_end && !worker_waiting) {
            *wake_ns = window_end;
            return false;
        }
    }
    if (cut > 0) count = cut;
    if (!batch_reserve(b, count)) count = b->cap; /* out of memory: a smaller batch still runs */
    MCP_ASSERT(count >= 1);
    /* Pass 2: move the same requests, in the same order, into the batch. */
    s->free_batches = b->next;
    b->next = NULL;
    b->n = 0;
    b->rows = 0;
    b->formed_ns = now;
    batch_add(s, b, head);
    qnode *n = s->head;
    while (b->n < count && n) {
        qnode *nx = n->next;
        if (b->rows + n->rows <= s->max_rows && compatible(b->reqs[0], n->r)) batch_add(s, b, n);
        n = nx;
    }
    if (s->ready_tail) s->ready_tail->next = b;
    else s->ready_head = b;
    s->ready_tail = b;
    s->n_ready++;
    s->ready_requests += b->n;
    pthread_cond_signal(&s->cv_worker);
    return true;
}

/* Waits (mu held) until signalled or, unless wake is INT64_MAX, until wake. */
static void batcher_sleep(mcp_scheduler *s, int64_t wake)
{
    s->batcher_wake_ns = wake;
    if (wake == INT64_MAX) {
        pthread_cond_wait(&s->cv_batcher, &s->mu);
    } else {
        struct timespec ts = abs_monotonic(wake);
        pthread_cond_timedwait(&s->cv_batcher, &s->mu, &ts);
    }
    s->batcher_wake_ns = INT64_MIN;
}

/*
 * Whether the batcher has work after a request arrived or a worker took a
 * batch (mu held). With batching, it forms batches (delay windows, batches
 * formed ahead of busy workers). Without, submitters and workers coming
 * free form every batch themselves, and the batcher only answers requests
 * whose deadline passes while they wait: it is woken when one arrives with
 * a deadline earlier than the one it sleeps until. Waking it for nothing
 * cost a context switch per request under load.
 */
static bool batcher_needed(const mcp_scheduler *s, int64_t deadline_ns)
{
    if (s->max_rows > 1) return s->head != NULL;
    return deadline_ns > 0 && deadline_ns < s->batcher_wake_ns;
}

static void *batcher_main(void *arg)
{
    mcp_scheduler *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        int64_t now = mcp_now_ns();
        qnode *gone = NULL;
        if (s->head && collect_unrunnable(s, now, &gone) > 0) {
            pthread_mutex_unlock(&s->mu);
            int count = 0;
            for (qnode *n = gone; n; n = n->next, count++) finish_unrun(s, n->r, now);
            pthread_mutex_lock(&s->mu);
            while (gone) {
                qnode *nx = gone->next;
                node_free(s, gone);
                gone = nx;
            }
            s->n_finishing -= count;
            note_progress(s);
            continue;
        }
        int64_t ready_deadline = INT64_MAX;
        if (s->ready_head && sweep_ready(s, now, &ready_deadline)) {
            note_progress(s);
            continue;
        }
        if (!s->head) {
            note_progress(s);
            batcher_sleep(s, ready_deadline);
            continue;
        }
        int64_t wake = s->next_deadline_ns < ready_deadline ? s->next_deadline_ns : ready_deadline;
        /* Form a batch only while it would wait ahead of busy workers in a
         * queue of at most prefetch_queue_depth, or go to an idle one. */
        if (s->n_ready < prefetch_depth(s) + s->n_idle) {
            int64_t window_end = INT64_MAX;
            if (try_dispatch(s, now, &window_end)) continue;
            if (window_end < wake) wake = window_end;
        }
        batcher_sleep(s, wake);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- running a batch (no lock held) ---- */

static bool output_is_batched(const mcp_scheduler *s, const mcp_tensor_meta *meta, const mcp_tensor *t, int64_t rows)
{
    return s->model_batches && t->rank >= 1 && t->dims[0] == rows && (meta->rank < 0 || meta->dims[0] < 0);
}

/* Rows [first, first + n) of t, as a new owning tensor. */
static mcp_status slice_rows(const mcp_tensor *t, int64_t first, int64_t n, mcp_tensor *out, mcp_err *err)
{
    int64_t dims[MCP_MAX_RANK];
    memcpy(dims, t->dims, sizeof dims);
    dims[0] = n;
    mcp_status st = mcp_tensor_alloc(out, t->dtype, t->rank, dims, err);
    if (st != MCP_STATUS_OK) return st;
    int64_t row_elems = t->dims[0] > 0 ? mcp_tensor_numel(t) / t->dims[0] : 0;
    if (t->dtype == MCP_DTYPE_STRING) {
        char *const *src = (char *const *)t->data + first * row_elems;
        for (int64_t i = 0; i < n * row_elems; i++) {
            const char *e = src[i] ? src[i] : "";
            if (mcp_tensor_set_string(out, i, e, strlen(e)) != MCP_STATUS_OK) {
                mcp_tensor_release(out);
                return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory splitting a batch output");
            }
        }
    } else {
        size_t row_bytes = (size_t)row_elems * (size_t)mcp_dtype_size(t->dtype);
        if (n > 0 && row_bytes > 0)
            memcpy(out->data, (const char *)t->data + (size_t)first * row_bytes, (size_t)n * row_bytes);
    }
    return MCP_STATUS_OK;
}

static int find_output(const mcp_model_version *v, const char *name)
{
    for (int i = 0; i < v->n_outputs; i++)
        if (strcmp(v->outputs[i].name, name) == 0) return i;
    return -1;
}

/*
 * Fills r->outputs from the batch outputs: the request's rows [first,
 * first + rows) of every batched output, whole copies of the rest. With
 * `single`, the request is the whole batch and takes the tensors over.
 */
static mcp_status deliver_outputs(mcp_scheduler *s, sched_worker *w, mcp_request *r, int64_t first, int64_t rows,
                                  int64_t batch_rows, bool single, mcp_err *err)
{
    const mcp_model_version *v = s->v;
    int n_sel = r->n_requested > 0 ? r->n_requested : v->n_outputs;
    r->n_outputs = 0;
    r->outputs = n_sel > 0 ? mcp_pool_calloc(r->pool, (size_t)n_sel * sizeof *r->outputs) : NULL;
    if (n_sel > 0 && !r->outputs) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for outputs");
    for (int q = 0; q < n_sel; q++) {
        int mi = r->n_requested > 0 ? find_output(v, r->requested[q]) : q;
        if (mi < 0) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "unknown output '%s' requested", r->requested[q]);
        const mcp_tensor_meta *meta = &v->outputs[mi];
        mcp_value *val = w->out_ptrs[s->out_map[mi]];
        if (val->kind != MCP_VALUE_TENSOR)
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "output '%s' is a %s, which cannot be returned", meta->name,
                               val->kind == MCP_VALUE_SEQUENCE ? "sequence" : "missing optional value");
        mcp_req_tensor *o = &r->outputs[q];
        o->name = mcp_pool_strndup(r->pool, meta->name, strlen(meta->name));
        if (!o->name) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for output names");
        o->binary = r->raw_binary || (r->n_requested > 0 && r->requested_binary ? r->requested_binary[q] : r->binary_default);
        mcp_tensor *t = &val->tensor;
        mcp_status st;
        if (single && t->owns_data) {
            /* Take the tensor over; what stays behind is a view, so an
             * output listed twice under two names is still copied. */
            o->t = *t;
            t->owns_data = false;
            st = MCP_STATUS_OK;
        } else if (!single && output_is_batched(s, meta, t, batch_rows)) {
            st = slice_rows(t, first, rows, &o->t, err);
        } else {
            st = mcp_tensor_copy(&o->t, t, err);
        }
        if (st != MCP_STATUS_OK) {
            mcp_err_prefix(err, "output '%s'", meta->name);
            return st;
        }
        r->n_outputs = q + 1;
    }
    return MCP_STATUS_OK;
}

/* Views (one request) or concatenations (several) of the batch inputs. */
static mcp_status gather_inputs(mcp_scheduler *s, sched_worker *w, const sched_batch *b, mcp_err *err)
{
    const mcp_model_version *v = s->v;
    for (int g = 0; g < s->n_graph_in; g++) w->in_ptrs[g] = NULL;
    for (int i = 0; i < v->n_inputs; i++) {
        mcp_value *val = &w->in_vals[i];
        memset(val, 0, sizeof *val);
        val->kind = MCP_VALUE_TENSOR;
        const mcp_tensor *first = &b->reqs[0]->inputs[i].t;
        val->tensor = *first;
        val->tensor.owns_data = false;
        if (b->n > 1) {
            size_t total = 0;
            for (int k = 0; k < b->n; k++) total += mcp_tensor_nbytes(&b->reqs[k]->inputs[i].t);
            char *buf = cache_get(s, total, &w->buf_caps[i]);
            if (!buf)
                return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory batching input '%s' (%zu bytes)",
                                   v->inputs[i].name, total);
            w->bufs[i] = buf;
            size_t off = 0;
            for (int k = 0; k < b->n; k++) {
                const mcp_tensor *t = &b->reqs[k]->inputs[i].t;
                size_t n = mcp_tensor_nbytes(t);
                /* Strings are arrays of char *: the batch borrows the
                 * requests' strings, which outlive the run. */
                if (n) memcpy(buf + off, t->data, n);
                off += n;
            }
            val->tensor.data = buf;
            val->tensor.dims[0] = b->rows;
        }
        w->in_ptrs[s->in_map[i]] = val;
    }
    return MCP_STATUS_OK;
}

static void release_inputs(mcp_scheduler *s, sched_worker *w)
{
    for (int i = 0; i < s->v->n_inputs; i++) {
        cache_put(s, w->bufs[i], w->buf_caps[i]);
        w->bufs[i] = NULL;
    }
}

/* The descriptor's preprocess steps on one Running request; a request
 * they fail is completed here (Failed) and leaves the batch. */
static bool preprocess(mcp_scheduler *s, mcp_request *r)
{
    const char *names[64];
    int n = r->n_inputs < 64 ? r->n_inputs : 64;
    for (int i = 0; i < n; i++) names[i] = r->inputs[i].name;
    mcp_tensor ts[64];
    for (int i = 0; i < n; i++) ts[i] = r->inputs[i].t;
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_steps_apply_pre(s->v, n, names, ts, r->pool, &err);
    if (st == MCP_STATUS_OK) {
        for (int i = 0; i < n; i++) r->inputs[i].t = ts[i];
        return true;
    }
    bool moved = mcp_request_transition(r, MCP_REQUEST_FAILED);
    MCP_ASSERT(moved);
    r->status = st;
    snprintf(r->error, sizeof r->error, "%s", msg);
    mcp_request_complete(r);
    mcp_request_release(r);
    return false;
}

/* Adds one execution of `rows` to the per-size table (mu held); out of
 * memory leaves the table as it was (the totals above still count it). */
static void batch_stat_add(mcp_scheduler *s, int64_t rows, int64_t in_ns, int64_t infer_ns, int64_t out_ns)
{
    int lo = 0, hi = s->n_batch_stats;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->batch_stats[mid].batch_size < rows) lo = mid + 1;
        else hi = mid;
    }
    if (lo == s->n_batch_stats || s->batch_stats[lo].batch_size != rows) {
        if (s->n_batch_stats == s->cap_batch_stats) {
            int cap = s->cap_batch_stats ? s->cap_batch_stats * 2 : 8;
            mcp_batch_stat *grown = mcp_realloc(s->batch_stats, (size_t)cap * sizeof *grown);
            if (!grown) return;
            s->batch_stats = grown;
            s->cap_batch_stats = cap;
        }
        memmove(&s->batch_stats[lo + 1], &s->batch_stats[lo], (size_t)(s->n_batch_stats - lo) * sizeof *s->batch_stats);
        s->batch_stats[lo] = (mcp_batch_stat){.batch_size = rows};
        s->n_batch_stats++;
    }
    mcp_batch_stat *e = &s->batch_stats[lo];
    e->count++;
    e->compute_input_ns += in_ns;
    e->compute_infer_ns += infer_ns;
    e->compute_output_ns += out_ns;
}

static void run_batch(mcp_scheduler *s, sched_worker *w, sched_batch *b)
{
    const mcp_model_version *v = s->v;
    /* Requests cancelled or expired while the batch waited do not run;
     * neither do those another thread already finished. */
    int64_t now = mcp_now_ns();
    int k = 0;
    b->rows = 0;
    for (int i = 0; i < b->n; i++) {
        mcp_request *r = b->reqs[i];
        bool gone = atomic_load(&r->cancel) || (r->deadline_ns > 0 && now >= r->deadline_ns);
        if (gone || !mcp_request_transition(r, MCP_REQUEST_RUNNING)) {
            finish_unrun(s, r, now);
            continue;
        }
        if (v->desc && v->desc->n_pre > 0 && !preprocess(s, r)) continue;
        b->reqs[k] = r;
        b->enq_ns[k] = b->enq_ns[i];
        b->req_rows[k] = b->req_rows[i];
        b->rows += b->req_rows[i];
        k++;
    }
    b->n = k;
    if (k == 0) return;

    mcp_err err = {w->msg, sizeof w->msg};
    w->msg[0] = '\0';
    for (int g = 0; g < s->n_graph_out; g++) mcp_value_clear(&w->out_vals[g]);
    int64_t t0 = mcp_now_ns();
    int64_t refusals = mcp_mem_account_refusals(v->account);
    mcp_status st = gather_inputs(s, w, b, &err);
    int64_t tg = mcp_now_ns();
    if (st == MCP_STATUS_OK) st = mcp__session_run(v->session, w->in_ptrs, w->out_ptrs, &err);
    int64_t t1 = mcp_now_ns();
    release_inputs(s, w);
    if (st != MCP_STATUS_OK && mcp_mem_account_refusals(v->account) != refusals) {
        /* An allocation this version's resources.memory refused. */
        mcp_err_prefix(&err, "the model's memory limit (resources.memory, %lld bytes) is reached",
                       (long long)mcp_mem_account_limit(v->account));
        st = MCP_STATUS_OUT_OF_MEMORY;
    }
    if (st != MCP_STATUS_OK) mcp_err_prefix(&err, "model '%s' version '%s'", v->name, v->version ? v->version : "");

    /* Outcomes first (Succeeded or Failed), then statistics, then the
     * completions, so a completion callback sees its request counted. */
    int64_t ok_rows = 0, ok_count = 0, queue_sum = 0;
    int64_t first = 0;
    for (int i = 0; i < k; i++) {
        mcp_request *r = b->reqs[i];
        r->t_start_ns = t0;
        r->t_end_ns = t1;
        r->t_queued_ns = b->enq_ns[i];
        r->t_batched_ns = b->formed_ns;
        r->t_gathered_ns = tg;
        r->batch_size = (int)b->rows;
        queue_sum += t0 - b->enq_ns[i];
        mcp_status rst = st;
        char rmsg[512];
        mcp_err rerr = {rmsg, sizeof rmsg};
        rmsg[0] = '\0';
        if (rst == MCP_STATUS_OK) rst = deliver_outputs(s, w, r, first, b->req_rows[i], b->rows, k == 1, &rerr);
        if (rst == MCP_STATUS_OK && v->desc && v->desc->n_post > 0) {
            const char *names[64];
            mcp_tensor ts[64];
            int n = r->n_outputs < 64 ? r->n_outputs : 64;
            for (int q = 0; q < n; q++) {
                names[q] = r->outputs[q].name;
                ts[q] = r->outputs[q].t;
            }
            rst = mcp_steps_apply_post(v, n, names, ts, &rerr);
            for (int q = 0; q < n; q++) r->outputs[q].t = ts[q];
        }
        first += b->req_rows[i];
        if (rst == MCP_STATUS_OK) {
            bool moved = mcp_request_transition(r, MCP_REQUEST_SUCCEEDED);
            MCP_ASSERT(moved); /* a Running request belongs to this worker */
            r->status = MCP_STATUS_OK;
            ok_rows += b->req_rows[i];
            ok_count++;
            continue;
        }
        for (int q = 0; q < r->n_outputs; q++) mcp_tensor_release(&r->outputs[q].t);
        r->n_outputs = 0;
        bool moved = mcp_request_transition(r, MCP_REQUEST_FAILED);
        MCP_ASSERT(moved);
        r->status = rst;
        snprintf(r->error, sizeof r->error, "%s", st != MCP_STATUS_OK ? w->msg : rmsg);
    }
    for (int g = 0; g < s->n_graph_out; g++) mcp_value_clear(&w->out_vals[g]);
    int64_t t2 = mcp_now_ns();
    for (int i = 0; i < k; i++) b->reqs[i]->t_done_ns = t2;

    /* Triton's stages: input (preprocessing from `now`, gathering), infer
     * (the engine), output (splitting, postprocessing); per request. */
    pthread_mutex_lock(&s->mu);
    s->stats.execution_count++;
    s->stats.inference_count += ok_rows;
    s->stats.success_count += ok_count;
    s->stats.fail_count += k - ok_count;
    s->stats.queue_ns += queue_sum;
    s->stats.compute_input_ns += (tg - now) * k;
    s->stats.compute_ns += (t1 - tg) * k;
    s->stats.compute_output_ns += (t2 - t1) * k;
    s->stats.last_inference_ms = wall_ms();
    batch_stat_add(s, b->rows, tg - now, t1 - tg, t2 - t1);
    pthread_mutex_unlock(&s->mu);

    if (s->metrics) {
        mcp_metrics_batch(s->metrics, v->name, v->version, (int)b->rows);
        for (int i = 0; i < k; i++) {
            const mcp_request *r = b->reqs[i];
            if (r->status != MCP_STATUS_OK) continue;
            int64_t arrival = r->t_arrival_ns > 0 ? r->t_arrival_ns : b->enq_ns[i];
            mcp_metrics_latency(s->metrics, v->name, v->version, t0 - b->enq_ns[i], t1 - t0, t1 - arrival);
        }
    }
    /* What the transports allocate to answer (the encoded responses) is
     * theirs, not the model's. */
    mcp_mem_account *acct = mcp_mem_account_use(NULL);
    for (int i = 0; i < k; i++) {
        mcp_request_complete(b->reqs[i]);
        mcp_request_release(b->reqs[i]);
    }
    mcp_mem_account_use(acct);
}

static void *worker_main(void *arg)
{
    mcp_sandbox_enter_inference_or_warn();
    sched_worker *w = arg;
    mcp_scheduler *s = w->s;
    /* What the runs allocate counts as the model's memory. */
    mcp_mem_account_use(s->v->account);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->ready_head && !s->stop) {
            /* A worker coming free forms the next batch itself when one can
             * leave now (no hand-off through the batcher). The slot is there:
             * this worker holds none. */
            int64_t window_end;
            if (s->head && try_dispatch(s, mcp_now_ns(), &window_end)) continue;
            s->n_idle++;
            /* An idle worker lets the batcher form one more batch. */
            if (s->head) pthread_cond_signal(&s->cv_batcher);
            pthread_cond_wait(&s->cv_worker, &s->mu);
            s->n_idle--;
        }
        if (!s->ready_head) break; /* stopping, nothing left */
        sched_batch *b = s->ready_head;
        s->ready_head = b->next;
        if (!s->ready_head) s->ready_tail = NULL;
        s->n_ready--;
        s->ready_requests -= b->n;
        s->n_running++;
        if (batcher_needed(s, 0)) pthread_cond_signal(&s->cv_batcher);
        pthread_mutex_unlock(&s->mu);

        run_batch(s, w, b);

        pthread_mutex_lock(&s->mu);
        b->n = 0;
        b->next = s->free_batches;
        s->free_batches = b;
        s->n_running--;
        note_progress(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- lifecycle ---- */

static int find_graph_io(const mcp_session *ses, bool input, const char *name)
{
    int n = input ? mcp_session_input_count(ses) : mcp_session_output_count(ses);
    for (int i = 0; i < n; i++) {
        mcp_io_info info;
        mcp_status st = input ? mcp_session_input_info(ses, i, &info) : mcp_session_output_info(ses, i, &info);
        if (st == MCP_STATUS_OK && info.name && strcmp(info.name, name) == 0) return i;
    }
    return -1;
}

static mcp_status check_options(const mcp_scheduler_options *o, mcp_err *err)
{
    if (o->max_batch_size < 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "max_batch_size is %lld, expected 0 or more",
                           (long long)o->max_batch_size);
    if (o->max_queue_delay_us < 0 || o->max_queue_delay_us > 60LL * 1000 * 1000)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "max_queue_delay_us is %lld, expected 0 to 60000000",
                           (long long)o->max_queue_delay_us);
    if (o->n_preferred < 0 || o->n_preferred > 16)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%d preferred batch sizes, expected at most 16", o->n_preferred);
    for (int i = 0; i < o->n_preferred; i++)
        if (o->preferred[i] < 1)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "preferred batch size [%d] is %lld, expected 1 or more", i,
                               (long long)o->preferred[i]);
    if (o->max_queue_size < 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "max_queue_size is %lld, expected 0 (default) or more",
                           (long long)o->max_queue_size);
    if (o->default_timeout_us < 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "default_timeout_us is %lld, expected 0 or more",
                           (long long)o->default_timeout_us);
    if (o->instances < 1 || o->instances > MAX_INSTANCES)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "instances is %d, expected 1 to %d", o->instances, MAX_INSTANCES);
    if (o->prefetch_queue_depth < 0 || o->prefetch_queue_depth > MAX_PREFETCH)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "prefetch_queue_depth is %d, expected 0 to %d",
                           o->prefetch_queue_depth, MAX_PREFETCH);
    return MCP_STATUS_OK;
}

static void worker_free_arrays(sched_worker *w, int n_graph_out)
{
    if (w->out_vals)
        for (int g = 0; g < n_graph_out; g++) mcp_value_clear(&w->out_vals[g]);
    mcp_free(w->in_vals);
    mcp_free(w->in_ptrs);
    mcp_free(w->out_vals);
    mcp_free(w->out_ptrs);
    mcp_free(w->bufs);
    mcp_free(w->buf_caps);
}

static void scheduler_free(mcp_scheduler *s)
{
    for (int i = 0; s->workers && i < s->n_workers; i++) worker_free_arrays(&s->workers[i], s->n_graph_out);
    mcp_free(s->workers);
    mcp_free(s->batch_stats);
    for (int i = 0; s->batches && i < s->n_batches; i++) {
        mcp_free(s->batches[i].reqs);
        mcp_free(s->batches[i].enq_ns);
        mcp_free(s->batches[i].req_rows);
    }
    mcp_free(s->batches);
    while (s->free_nodes) {
        qnode *n = s->free_nodes;
        s->free_nodes = n->next;
        mcp_free(n);
    }
    for (int i = 0; i < s->n_cache; i++) mcp_free(s->cache[i].p);
    mcp_free(s->cache);
    mcp_free(s->in_map);
    mcp_free(s->out_map);
    mcp_wfq_destroy(s->wfq);
    pthread_cond_destroy(&s->cv_batcher);
    pthread_cond_destroy(&s->cv_worker);
    pthread_cond_destroy(&s->cv_idle);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->cache_mu);
    mcp_free(s);
}

static void stop_threads(mcp_scheduler *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv_batcher);
    pthread_cond_broadcast(&s->cv_worker);
    pthread_mutex_unlock(&s->mu);
    if (s->batcher_started) pthread_join(s->batcher, NULL);
    s->batcher_started = false;
    for (int i = 0; i < s->n_workers; i++)
        if (s->workers[i].started) {
            pthread_join(s->workers[i].thread, NULL);
            s->workers[i].started = false;
        }
}

static mcp_status alloc_arrays(mcp_scheduler *s, mcp_err *err)
{
    const mcp_model_version *v = s->v;
    int n_in = v->n_inputs, n_out = v->n_outputs;
    s->in_map = mcp_calloc((size_t)n_in + 1, sizeof *s->in_map);
    s->out_map = mcp_calloc((size_t)n_out + 1, sizeof *s->out_map);
    s->n_batches = s->o.instances + s->o.prefetch_queue_depth;
    s->batches = mcp_calloc((size_t)s->n_batches, sizeof *s->batches);
    s->workers = mcp_calloc((size_t)s->o.instances, sizeof *s->workers);
    s->cache_cap = 2 * s->o.instances * (n_in > 0 ? n_in : 1);
    s->cache = mcp_calloc((size_t)s->cache_cap, sizeof *s->cache);
    s->wfq = mcp_wfq_create();
    if (!s->in_map || !s->out_map || !s->batches || !s->workers || !s->cache || !s->wfq)
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory creating a scheduler");
    int64_t cap = s->max_rows < BATCH_INITIAL_CAP ? s->max_rows : BATCH_INITIAL_CAP;
    for (int i = 0; i < s->n_batches; i++) {
        sched_batch *b = &s->batches[i];
        if (!batch_reserve(b, (int)cap))
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory creating a scheduler");
        b->next = s->free_batches;
        s->free_batches = b;
    }
    s->n_workers = s->o.instances;
    for (int i = 0; i < s->n_workers; i++) {
        sched_worker *w = &s->workers[i];
        w->s = s;
        w->in_vals = mcp_calloc((size_t)n_in + 1, sizeof *w->in_vals);
        w->in_ptrs = mcp_calloc((size_t)s->n_graph_in + 1, sizeof *w->in_ptrs);
        w->out_vals = mcp_calloc((size_t)s->n_graph_out + 1, sizeof *w->out_vals);
        w->out_ptrs = mcp_calloc((size_t)s->n_graph_out + 1, sizeof *w->out_ptrs);
        w->bufs = mcp_calloc((size_t)n_in + 1, sizeof *w->bufs);
        w->buf_caps = mcp_calloc((size_t)n_in + 1, sizeof *w->buf_caps);
        if (!w->in_vals || !w->in_ptrs || !w->out_vals || !w->out_ptrs || !w->bufs || !w->buf_caps)
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory creating a scheduler");
        for (int g = 0; g < s->n_graph_out; g++) w->out_ptrs[g] = &w->out_vals[g];
    }
    return MCP_STATUS_OK;
}

mcp_status mcp_scheduler_create(mcp_model_version *v, const mcp_scheduler_options *o, mcp_metrics *metrics,
                                mcp_scheduler **out, mcp_err *err)
{
    *out = NULL;
    if (!v || !v->session) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "scheduler: the model version has no session");
    const char *model = v->name ? v->name : "(unnamed)";
    mcp_status st = check_options(o, err);
    if (st != MCP_STATUS_OK) {
        mcp_err_prefix(err, "model '%s': scheduler", model);
        return st;
    }
    mcp_scheduler *s = mcp_calloc(1, sizeof *s);
    if (!s) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory creating a scheduler");
    s->v = v;
    s->o = *o;
    s->metrics = metrics;
    int64_t model_max = v->desc && v->desc->max_batch_size > 0 ? v->desc->max_batch_size : 0;
    s->model_batches = model_max > 0;
    s->max_rows = 1;
    if (s->model_batches && o->max_batch_size > 1) s->max_rows = o->max_batch_size < model_max ? o->max_batch_size : model_max;
    s->max_preferred = 0;
    for (int i = 0; i < o->n_preferred; i++)
        if (o->preferred[i] <= s->max_rows && o->preferred[i] > s->max_preferred) s->max_preferred = o->preferred[i];
    if (s->max_preferred == 0) s->max_preferred = s->max_rows;
    s->queue_limit = o->max_queue_size > 0 ? o->max_queue_size : DEFAULT_QUEUE_SIZE;
    s->next_deadline_ns = INT64_MAX;
    s->batcher_wake_ns = INT64_MIN;
    s->n_graph_in = mcp_session_input_count(v->session);
    s->n_graph_out = mcp_session_output_count(v->session);

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->cache_mu, NULL);
    pthread_cond_init(&s->cv_batcher, &ca);
    pthread_cond_init(&s->cv_worker, NULL);
    pthread_cond_init(&s->cv_idle, NULL);
    pthread_condattr_destroy(&ca);

    st = alloc_arrays(s, err);
    for (int i = 0; st == MCP_STATUS_OK && i < v->n_inputs; i++) {
        const mcp_tensor_meta *m = &v->inputs[i];
        const char *g = m->graph_name ? m->graph_name : m->name;
        s->in_map[i] = find_graph_io(v->session, true, g);
        if (s->in_map[i] < 0)
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' maps to graph input '%s', which the model does not have",
                             m->name, g);
    }
    for (int i = 0; st == MCP_STATUS_OK && i < v->n_outputs; i++) {
        const mcp_tensor_meta *m = &v->outputs[i];
        const char *g = m->graph_name ? m->graph_name : m->name;
        s->out_map[i] = find_graph_io(v->session, false, g);
        if (s->out_map[i] < 0)
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                             "output '%s' maps to graph output '%s', which the model does not have", m->name, g);
    }
    if (st == MCP_STATUS_OK) {
        if (pthread_create(&s->batcher, NULL, batcher_main, s) != 0)
            st = mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot start the batcher thread");
        else
            s->batcher_started = true;
    }
    for (int i = 0; st == MCP_STATUS_OK && i < s->n_workers; i++) {
        if (pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]) != 0)
            st = mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot start worker thread %d of %d", i + 1, s->n_workers);
        else
            s->workers[i].started = true;
    }
    if (st != MCP_STATUS_OK) {
        mcp_err_prefix(err, "model '%s': scheduler", model);
        stop_threads(s);
        scheduler_free(s);
        return st;
    }
    *out = s;
    return MCP_STATUS_OK;
}

/* Whether the inputs line up with the model's, as mcp_request_validate
 * leaves them. */
static bool validated(const mcp_scheduler *s, const mcp_request *r)
{
    if (r->n_inputs != s->v->n_inputs) return false;
    for (int i = 0; i < r->n_inputs; i++)
        if (!r->inputs[i].name || strcmp(r->inputs[i].name, s->v->inputs[i].name) != 0) return false;
    for (int i = 0; i < r->n_requested; i++)
        if (!r->requested || !r->requested[i]) return false;
    return true;
}

/* Whether `tenant` already has `cap` requests waiting (queued, or in a
 * formed batch no worker took yet), mu held. A walk: it runs only for
 * tenants with a cap, and stops at the cap. */
static bool tenant_at_cap(const mcp_scheduler *s, const char *tenant, int64_t cap)
{
    int64_t n = 0;
    for (const qnode *q = s->head; q && n < cap; q = q->next)
        if (strncmp(q->r->tenant, tenant, sizeof q->r->tenant) == 0) n++;
    for (const sched_batch *b = s->ready_head; b && n < cap; b = b->next)
        for (int i = 0; i < b->n; i++)
            if (strncmp(b->reqs[i]->tenant, tenant, sizeof b->reqs[i]->tenant) == 0) n++;
    return n >= cap;
}

/* A refusal for the tenant's cap also leaves a message in r->error (the
 * caller's mcp_request_fail may use it or write its own); a full queue
 * leaves r as it was. */
mcp_status mcp_scheduler_submit(mcp_scheduler *s, mcp_request *r)
{
    if (!s || !r || !validated(s, r)) return MCP_STATUS_INVALID_ARGUMENT;
    int64_t now = mcp_now_ns();
    if (r->deadline_ns <= 0) {
        int64_t us = r->timeout_us > 0 ? r->timeout_us : s->o.default_timeout_us;
        int64_t base = r->t_arrival_ns > 0 ? r->t_arrival_ns : now;
        /* A timeout too large to represent is no timeout. */
        if (us > 0 && us < (INT64_MAX - base) / 1000) r->deadline_ns = base + us * 1000;
    }
    int64_t rows = mcp__request_rows(r, s->v);
    pthread_mutex_lock(&s->mu);
    if (s->draining || s->stop) {
        pthread_mutex_unlock(&s->mu);
        return MCP_STATUS_UNAVAILABLE;
    }
    /* Requests already formed into batches still wait: they count. */
    if (s->queue_len + s->ready_requests >= s->queue_limit) {
        pthread_mutex_unlock(&s->mu);
        return MCP_STATUS_RESOURCE_EXHAUSTED;
    }
    if (r->tenant_max_queued > 0 && tenant_at_cap(s, r->tenant, r->tenant_max_queued)) {
        pthread_mutex_unlock(&s->mu);
        snprintf(r->error, sizeof r->error,
                 "tenant '%s' already has %lld requests waiting for model '%s' (its max_queued); retry later",
                 r->tenant[0] ? r->tenant : "anonymous", (long long)r->tenant_max_queued, s->v->name);
        return MCP_STATUS_RESOURCE_EXHAUSTED;
    }
    qnode *n = s->free_nodes;
    if (n) s->free_nodes = n->next;
    else n = mcp_malloc(sizeof *n);
    if (!n) {
        pthread_mutex_unlock(&s->mu);
        return MCP_STATUS_OUT_OF_MEMORY;
    }
    n->r = mcp_request_retain(r);
    n->enq_ns = now;
    n->rows = rows;
    /* Tagged only once accepted: a refused request costs its tenant nothing. */
    n->tag = mcp_wfq_tag(s->wfq, r->tenant, r->weight, (double)(rows > 0 ? rows : 1));
    if (r->tenant[0]) s->tenants_seen = true;
    queue_insert(s, n);
    if (r->deadline_ns > 0 && r->deadline_ns < s->next_deadline_ns) s->next_deadline_ns = r->deadline_ns;
    /* A batch that can leave now (no batching, or a full batch) goes
     * straight to an idle worker from here, saving a hand-off through the
     * batcher thread; the batcher still handles delay windows, deadlines
     * and cancellations. */
    int64_t window_end;
    if (s->n_ready < prefetch_depth(s) + s->n_idle) try_dispatch(s, now, &window_end);
    if (batcher_needed(s, r->deadline_ns)) pthread_cond_signal(&s->cv_batcher);
    pthread_mutex_unlock(&s->mu);
    return MCP_STATUS_OK;
}

void mcp_scheduler_stats_get(mcp_scheduler *s, mcp_scheduler_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    out->queue_depth = s->queue_len + s->ready_requests;
    out->queue_capacity = s->queue_limit;
    pthread_mutex_unlock(&s->mu);
}

int mcp_scheduler_batch_stats_copy(mcp_scheduler *s, mcp_batch_stat **out)
{
    *out = NULL;
    pthread_mutex_lock(&s->mu);
    int n = s->n_batch_stats;
    if (n > 0) {
        *out = mcp_malloc((size_t)n * sizeof **out);
        if (*out) memcpy(*out, s->batch_stats, (size_t)n * sizeof **out);
        else n = -1;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

void mcp_scheduler_drain(mcp_scheduler *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->draining = true;
    /* The batcher stops waiting for fuller batches. */
    pthread_cond_signal(&s->cv_batcher);
    while (!is_idle(s)) pthread_cond_wait(&s->cv_idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

void mcp_scheduler_destroy(mcp_scheduler *s)
{
    if (!s) return;
    /* Joining would wait for the calling thread itself. */
    pthread_t self = pthread_self();
    MCP_ASSERT(!pthread_equal(self, s->batcher));
    for (int i = 0; i < s->n_workers; i++) MCP_ASSERT(!pthread_equal(self, s->workers[i].thread));
    mcp_scheduler_drain(s);
    stop_threads(s);
    scheduler_free(s);
}
