/*
 * Requests: creation and reference counting, the state machine, validation
 * against a model version's metadata, and status -> HTTP code mapping.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "serve/scheduler_util.h"
#include "serve/serve.h"

/* Each request's pool starts with one chunk this size: enough for the names,
 * parameters and small tensors of a typical request in one allocation. */
#define REQUEST_POOL_CHUNK 4096

static const char *const protocol_names[] = {
    [MCP_PROTOCOL_V2] = "v2",
    [MCP_PROTOCOL_V1] = "v1",
    [MCP_PROTOCOL_SIMPLE] = "simple",
    [MCP_PROTOCOL_GRPC] = "grpc",
};
static_assert(sizeof protocol_names / sizeof protocol_names[0] == MCP_PROTOCOL_COUNT,
              "one name per protocol");

const char *mcp_protocol_name(mcp_protocol p)
{
    if ((int)p < 0 || p >= MCP_PROTOCOL_COUNT) return "unknown";
    return protocol_names[p];
}

#define STATE_COUNT (MCP_REQUEST_COMPLETED + 1)

static const char *const state_names[] = {
    [MCP_REQUEST_PENDING] = "Pending",     [MCP_REQUEST_RUNNING] = "Running",
    [MCP_REQUEST_SUCCEEDED] = "Succeeded", [MCP_REQUEST_FAILED] = "Failed",
    [MCP_REQUEST_CANCELLED] = "Cancelled", [MCP_REQUEST_TIMED_OUT] = "TimedOut",
    [MCP_REQUEST_COMPLETED] = "Completed",
};
static_assert(sizeof state_names / sizeof state_names[0] == STATE_COUNT, "one name per state");

const char *mcp_request_state_name(mcp_request_state s)
{
    if ((int)s < 0 || (int)s >= STATE_COUNT) return "unknown";
    return state_names[s];
}

/* The state machine as a table: legal[from] is the set of states `from` may
 * move to, as a bit mask. */
#define BIT(s) (1u << (s))
static const unsigned legal[STATE_COUNT] = {
    [MCP_REQUEST_PENDING] = BIT(MCP_REQUEST_RUNNING) | BIT(MCP_REQUEST_CANCELLED) |
                            BIT(MCP_REQUEST_TIMED_OUT) | BIT(MCP_REQUEST_FAILED),
    [MCP_REQUEST_RUNNING] = BIT(MCP_REQUEST_SUCCEEDED) | BIT(MCP_REQUEST_FAILED),
    [MCP_REQUEST_SUCCEEDED] = BIT(MCP_REQUEST_COMPLETED),
    [MCP_REQUEST_FAILED] = BIT(MCP_REQUEST_COMPLETED),
    [MCP_REQUEST_CANCELLED] = BIT(MCP_REQUEST_COMPLETED),
    [MCP_REQUEST_TIMED_OUT] = BIT(MCP_REQUEST_COMPLETED),
    [MCP_REQUEST_COMPLETED] = 0,
};

bool mcp__request_transition_legal(mcp_request_state from, mcp_request_state to)
{
    if ((int)from < 0 || (int)from >= STATE_COUNT || (int)to < 0 || (int)to >= STATE_COUNT) return false;
    return (legal[from] & BIT(to)) != 0;
}

bool mcp__request_state_is_final(mcp_request_state s)
{
    return s == MCP_REQUEST_SUCCEEDED || s == MCP_REQUEST_FAILED || s == MCP_REQUEST_CANCELLED ||
           s == MCP_REQUEST_TIMED_OUT || s == MCP_REQUEST_COMPLETED;
}

mcp_request *mcp_request_create(mcp_protocol protocol)
{
    mcp_request *r = mcp_calloc(1, sizeof *r);
    if (!r) return NULL;
    r->pool = mcp_pool_create(REQUEST_POOL_CHUNK);
    if (!r->pool) {
        mcp_free(r);
        return NULL;
    }
    atomic_init(&r->refs, 1);
    atomic_init(&r->state, MCP_REQUEST_PENDING);
    atomic_init(&r->cancel, false);
    r->protocol = protocol;
    r->status = MCP_STATUS_OK;
    r->weight = 1.0;
    r->t_arrival_ns = mcp_now_ns();
    return r;
}

mcp_request *mcp_request_retain(mcp_request *r)
{
    if (r) {
        int before = atomic_fetch_add(&r->refs, 1);
        MCP_ASSERT(before > 0);
    }
    return r;
}

void mcp_request_release(mcp_request *r)
{
    if (!r) return;
    int before = atomic_fetch_sub(&r->refs, 1);
    MCP_ASSERT(before > 0);
    if (before != 1) return;
    /* Output tensors own their data; the outputs array itself is pool memory.
     * Inputs normally borrow pool memory, but release any a codec made owning. */
    for (int i = 0; i < r->n_outputs; i++) mcp_tensor_release(&r->outputs[i].t);
    for (int i = 0; i < r->n_inputs; i++)
        if (r->inputs[i].t.owns_data) mcp_tensor_release(&r->inputs[i].t);
    if (r->model) mcp_model_version_release(r->model);
    mcp_route_watch_release(r->watch);
    mcp_pool_destroy(r->pool);
    mcp_free(r);
}

/* How far along the lifecycle a state is: Pending, Running, the four
 * outcomes, Completed. */
static int state_rank(mcp_request_state s)
{
    switch (s) {
    case MCP_REQUEST_PENDING: return 0;
    case MCP_REQUEST_RUNNING: return 1;
    case MCP_REQUEST_COMPLETED: return 3;
    default: return 2;
    }
}

/* Whether `cur` lies past a state from which `to` is legal: the caller
 * meant to leave a state that another thread has already left. */
static bool already_left(mcp_request_state cur, mcp_request_state to)
{
    for (int from = 0; from < STATE_COUNT; from++)
        if (mcp__request_transition_legal((mcp_request_state)from, to) &&
            state_rank(cur) > state_rank((mcp_request_state)from))
            return true;
    return false;
}

bool mcp_request_transition(mcp_request *r, mcp_request_state to)
{
    int cur = atomic_load(&r->state);
    for (;;) {
        if (!mcp__request_transition_legal((mcp_request_state)cur, to)) {
            /* Another thread moved the request on first (the batcher timed
             * it out while a worker picked it up, say): the loser changes
             * nothing. Anything else (Pending -> Succeeded, Running ->
             * Completed, ...) is a bug. */
            if (already_left((mcp_request_state)cur, to)) return false;
            MCP_ASSERT(!"illegal request state transition");
        }
        if (atomic_compare_exchange_weak(&r->state, &cur, (int)to)) return true;
    }
}

void mcp_request_complete(mcp_request *r)
{
    if (!mcp_request_transition(r, MCP_REQUEST_COMPLETED)) return;
    if (r->done) r->done(r, r->done_user);
}

void mcp_request_fail(mcp_request *r, mcp_status status, const char *fmt, ...)
{
    if (!mcp_request_transition(r, MCP_REQUEST_FAILED)) return;
    /* The transition made this thread the request's only writer. */
    r->status = status == MCP_STATUS_OK ? MCP_STATUS_INTERNAL : status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    mcp_request_complete(r);
}

/* ---- validation ---- */

static const char *dtype_label(mcp_dtype d)
{
    const char *s = mcp_oip_datatype(d);
    return s ? s : mcp_dtype_name(d);
}

static int64_t model_max_batch(const mcp_model_version *m)
{
    return m->desc && m->desc->max_batch_size > 0 ? m->desc->max_batch_size : 0;
}

int64_t mcp__request_rows(const mcp_request *r, const mcp_model_version *m)
{
    if (model_max_batch(m) == 0 || r->n_inputs == 0 || r->inputs[0].t.rank < 1) return 1;
    return r->inputs[0].t.dims[0];
}

static const char *model_label(const mcp_model_version *m) { return m->name ? m->name : "(unnamed)"; }

/* "'a', 'b', 'c'" into buf (truncated with "..." when long). */
static void list_names(const mcp_tensor_meta *t, int n, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        int w = snprintf(buf + off, cap - off, "%s'%s'", i ? ", " : "", t[i].name);
        if (w < 0 || (size_t)w >= cap - off) {
            if (cap > 4) memcpy(buf + cap - 4, "...", 4);
            return;
        }
        off += (size_t)w;
    }
    if (n == 0) snprintf(buf, cap, "none");
}

static int find_meta(const mcp_tensor_meta *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (t[i].name && name && strcmp(t[i].name, name) == 0) return i;
    return -1;
}

static mcp_status check_input(const mcp_req_tensor *in, const mcp_tensor_meta *meta, const mcp_model_version *m,
                              mcp_err *err)
{
    char got[160], want[160];
    const mcp_tensor *t = &in->t;
    if (meta->dtype != MCP_DTYPE_UNDEFINED && t->dtype != meta->dtype)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has datatype %s, model '%s' expects %s",
                           in->name, dtype_label(t->dtype), model_label(m), dtype_label(meta->dtype));
    if (t->rank < 0 || t->rank > MCP_MAX_RANK)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has an invalid rank %d", in->name, t->rank);
    for (int k = 0; k < t->rank; k++)
        if (t->dims[k] < 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has a negative dimension %lld at index %d",
                               in->name, (long long)t->dims[k], k);
    int64_t max_batch = model_max_batch(m);
    if (meta->rank >= 0) {
        bool ok = t->rank == meta->rank;
        /* With batching, dim 0 is the batch dimension, checked below. */
        for (int k = max_batch > 0 ? 1 : 0; ok && k < t->rank; k++)
            ok = meta->dims[k] < 0 || meta->dims[k] == t->dims[k];
        if (!ok)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has shape %s, model '%s' expects %s",
                               in->name, mcp_shape_str(t->rank, t->dims, got, sizeof got), model_label(m),
                               mcp_shape_str(meta->rank, meta->dims, want, sizeof want));
    }
    if (max_batch > 0) {
        if (t->rank < 1)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "input '%s' is a scalar, model '%s' expects a batch dimension first", in->name,
                               model_label(m));
        if (t->dims[0] < 1)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has batch size 0, expected 1 to %lld",
                               in->name, (long long)max_batch);
        if (t->dims[0] > max_batch)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "input '%s' has batch size %lld, model '%s' allows at most %lld", in->name,
                               (long long)t->dims[0], model_label(m), (long long)max_batch);
    }
    if (mcp_tensor_numel(t) > 0 && !t->data)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has no data", in->name);
    if (t->dtype == MCP_DTYPE_STRING) {
        char *const *s = t->data;
        for (int64_t i = 0, n = mcp_tensor_numel(t); i < n; i++)
            if (!s[i])
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s': element %lld has no string", in->name,
                                   (long long)i);
    }
    return MCP_STATUS_OK;
}

mcp_status mcp_request_validate(mcp_request *r, const mcp_model_version *m, mcp_err *err)
{
    char names[256];
    /* The narrow types (float8, int4, ...) have no Open Inference Protocol
     * or gRPC datatype: a model that takes or gives one loads and describes
     * itself, but no request reaches it, so no client ever reads codes as
     * some other type. */
    for (int k = 0; k < m->n_inputs + m->n_outputs; k++) {
        const mcp_tensor_meta *t = k < m->n_inputs ? &m->inputs[k] : &m->outputs[k - m->n_inputs];
        if (mcp_dtype_is_narrow(t->dtype))
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                               "model '%s' %s '%s' has element type %s, which no serving protocol carries (wrap the model "
                               "with a Cast to a wider type)",
                               model_label(m), k < m->n_inputs ? "input" : "output", t->name ? t->name : "",
                               mcp_dtype_name(t->dtype));
    }
    /* Every input is known and given once. */
    for (int i = 0; i < r->n_inputs; i++) {
        const char *name = r->inputs[i].name;
        if (!name) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input %d has no name", i);
        if (find_meta(m->inputs, m->n_inputs, name) < 0) {
            list_names(m->inputs, m->n_inputs, names, sizeof names);
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "unknown input '%s': model '%s' has inputs %s", name,
                               model_label(m), names);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(r->inputs[j].name, name) == 0)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is given more than once", name);
    }
    /* Nothing missing; reorder into the model's input order, so inputs[i]
     * is m->inputs[i] (whose graph_name the scheduler feeds). The names are
     * distinct and known, so this is a permutation. */
    for (int i = 0; i < m->n_inputs; i++) {
        int found = -1;
        for (int j = i; j < r->n_inputs && found < 0; j++)
            if (strcmp(r->inputs[j].name, m->inputs[i].name) == 0) found = j;
        if (found < 0) {
            char want[160];
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "missing input '%s' (%s %s) for model '%s'",
                               m->inputs[i].name, dtype_label(m->inputs[i].dtype),
                               mcp_shape_str(m->inputs[i].rank < 0 ? 0 : m->inputs[i].rank, m->inputs[i].dims, want,
                                             sizeof want),
                               model_label(m));
        }
        if (found != i) {
            mcp_req_tensor tmp = r->inputs[i];
            r->inputs[i] = r->inputs[found];
            r->inputs[found] = tmp;
        }
    }
    MCP_ASSERT(r->n_inputs == m->n_inputs);
    for (int i = 0; i < r->n_inputs; i++) {
        mcp_status st = check_input(&r->inputs[i], &m->inputs[i], m, err);
        if (st != MCP_STATUS_OK) return st;
    }
    /* With a batch dimension, every input carries the same number of rows,
     * so outputs can be split back along dim 0. */
    if (model_max_batch(m) > 0)
        for (int i = 1; i < r->n_inputs; i++)
            if (r->inputs[i].t.dims[0] != r->inputs[0].t.dims[0])
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                   "inputs '%s' and '%s' have different batch sizes %lld and %lld",
                                   r->inputs[0].name, r->inputs[i].name, (long long)r->inputs[0].t.dims[0],
                                   (long long)r->inputs[i].t.dims[0]);
    if (r->n_requested > 0 && !r->requested)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "requested outputs have no names");
    for (int i = 0; i < r->n_requested; i++) {
        const char *name = r->requested[i];
        if (!name) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "requested output %d has no name", i);
        if (find_meta(m->outputs, m->n_outputs, name) < 0) {
            list_names(m->outputs, m->n_outputs, names, sizeof names);
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "unknown output '%s' requested: model '%s' has outputs %s",
                               name, model_label(m), names);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(r->requested[j], name) == 0)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s' is requested more than once", name);
    }
    return MCP_STATUS_OK;
}

int mcp_status_http_code(mcp_status s)
{
    switch (s) {
    case MCP_STATUS_OK: return 200;
    case MCP_STATUS_INVALID_ARGUMENT: return 400;
    case MCP_STATUS_INVALID_MODEL: return 400;
    case MCP_STATUS_NOT_FOUND: return 404;
    case MCP_STATUS_TOO_LARGE: return 413;
    case MCP_STATUS_UNAUTHENTICATED: return 401;
    case MCP_STATUS_FAILED_PRECONDITION: return 409;
    case MCP_STATUS_PERMISSION_DENIED: return 403;
    case MCP_STATUS_RESOURCE_EXHAUSTED: return 429;
    case MCP_STATUS_CANCELLED: return 499;
    case MCP_STATUS_UNSUPPORTED: return 501;
    /* Out of memory is a passing condition of the server, not a fault of
     * the request: retrying later may succeed. */
    case MCP_STATUS_OUT_OF_MEMORY: return 503;
    case MCP_STATUS_UNAVAILABLE: return 503;
    case MCP_STATUS_DEADLINE_EXCEEDED: return 504;
    case MCP_STATUS_IO_ERROR:
    case MCP_STATUS_RUNTIME_ERROR:
    case MCP_STATUS_INTERNAL:
    case MCP_STATUS_COUNT: break;
    }
    return 500;
}
