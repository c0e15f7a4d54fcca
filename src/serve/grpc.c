/*
 * The gRPC transport on gRPC core's C API (completion queue, registered
 * methods): inference.GRPCInferenceService and grpc.health.v1.Health.
 *
 * Poller threads wait on one completion queue. Each RPC is an rpc_call
 * whose completions arrive as tags; every RPC first posts
 * RECV_CLOSE_ON_SERVER, so a client's cancel (or its deadline) is seen at
 * once and cancels the request it made. Inference goes through the serving
 * core (mcp_frontend_infer with the gRPC codec) and is answered from
 * whichever thread completes it; model control runs on the frontend's
 * loader. Metadata answers are built on the poller thread: they only read
 * the repository.
 *
 * ModelStreamInfer reads requests one after another while earlier ones
 * run (at most STREAM_INFLIGHT at once, then reading waits), writes one
 * response per request as each completes (matched by id, as Triton's
 * clients do), one write in flight at a time, and ends with OK after the
 * client half-closes and every response is written. A request that fails
 * answers with error_message in its stream response; the stream goes on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grpc_service.pb-c.h"
#include "control.pb-c.h"
#include "health.pb-c.h"
#include "registry/descriptor_util.h"
#include "serve/frontend.h"
#include "serve/tls.h"
#include "serve/openai.h"

#define STREAM_INFLIGHT 64   /* requests of one stream in flight before reading waits */
#define CALLS_PER_METHOD 8   /* calls requested ahead per method */
/* ModelInfer calls requested ahead: as many as clients commonly keep in
 * flight, so an arriving call finds one waiting (with 8, concurrency 64
 * queued inside gRPC for a free slot). */
#define INFER_CALLS_AHEAD 128

typedef enum rpc_kind {
    RPC_LIVE,
    RPC_READY,
    RPC_MODEL_READY,
    RPC_SERVER_METADATA,
    RPC_MODEL_METADATA,
    RPC_INFER,
    RPC_STREAM_INFER,
    RPC_CONFIG,
    RPC_STATISTICS,
    RPC_INDEX,
    RPC_LOAD,
    RPC_UNLOAD,
    RPC_HEALTH_CHECK,
    RPC_HEALTH_WATCH,
    RPC_ROLLOUT_STATUS,
    RPC_ROLLOUT,
    RPC_COUNT,
} rpc_kind;

/* act: what a caller must be allowed (checked server-wide when the call
 * arrives, and on the model once the message names it). A stream's
 * requests are inferences or generations, each checked on its model. */
static const struct {
    const char *path;
    bool streaming; /* the request is read by RECV_MESSAGE, not as the call's payload */
    mcp_action act;
    bool on_model;  /* the message names a model the action is decided on */
} rpcs[RPC_COUNT] = {
    [RPC_LIVE] = {"/inference.GRPCInferenceService/ServerLive", false, MCP_ACT_HEALTH},
    [RPC_READY] = {"/inference.GRPCInferenceService/ServerReady", false, MCP_ACT_HEALTH},
    [RPC_MODEL_READY] = {"/inference.GRPCInferenceService/ModelReady", false, MCP_ACT_METADATA, true},
    [RPC_SERVER_METADATA] = {"/inference.GRPCInferenceService/ServerMetadata", false, MCP_ACT_SERVER},
    [RPC_MODEL_METADATA] = {"/inference.GRPCInferenceService/ModelMetadata", false, MCP_ACT_METADATA, true},
    [RPC_INFER] = {"/inference.GRPCInferenceService/ModelInfer", false, MCP_ACT_INFER, true},
    [RPC_STREAM_INFER] = {"/inference.GRPCInferenceService/ModelStreamInfer", true, MCP_ACT_METADATA, true},
    [RPC_CONFIG] = {"/inference.GRPCInferenceService/ModelConfig", false, MCP_ACT_METADATA, true},
    [RPC_STATISTICS] = {"/inference.GRPCInferenceService/ModelStatistics", false, MCP_ACT_STATS, true},
    [RPC_INDEX] = {"/inference.GRPCInferenceService/RepositoryIndex", false, MCP_ACT_METADATA},
    [RPC_LOAD] = {"/inference.GRPCInferenceService/RepositoryModelLoad", false, MCP_ACT_LOAD, true},
    [RPC_UNLOAD] = {"/inference.GRPCInferenceService/RepositoryModelUnload", false, MCP_ACT_UNLOAD, true},
    [RPC_HEALTH_CHECK] = {"/grpc.health.v1.Health/Check", false, MCP_ACT_HEALTH},
    [RPC_HEALTH_WATCH] = {"/grpc.health.v1.Health/Watch", true, MCP_ACT_HEALTH},
    [RPC_ROLLOUT_STATUS] = {"/mcp.control.v1.Control/RolloutStatus", false, MCP_ACT_STATS, true},
    [RPC_ROLLOUT] = {"/mcp.control.v1.Control/Rollout", false, MCP_ACT_ROLLOUT, true},
};

typedef enum tag_kind { TAG_NEW, TAG_UNKNOWN, TAG_CLOSE, TAG_FINISH, TAG_RECV, TAG_WRITE, TAG_SHUTDOWN } tag_kind;

typedef struct rpc_call rpc_call;

typedef struct rpc_tag {
    tag_kind kind;
    rpc_call *rc;
} rpc_tag;

/* One request of a stream, from its arrival to its written response. */
typedef struct stream_item {
    struct stream_item *next;
    rpc_call *rc;
    mcp_call call;
    bool queued; /* call.req is set (under rc->mu) */
    grpc_slice body;
    size_t reserved; /* body bytes counted against the server-wide cap */
    mcp_gen_request *gen; /* a generative model's request: one response per token */
    char id[128], model[256], version[128];
    int64_t t_recv_ns; /* the request arrived */
} stream_item;

/* A response waiting to be written on a stream. */
typedef struct stream_out {
    struct stream_out *next;
    grpc_byte_buffer *msg;
} stream_out;

struct rpc_call {
    mcp_grpc_server *s;
    rpc_kind kind;
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_call_details details; /* unknown methods */
    grpc_byte_buffer *payload; /* unary request */
    rpc_tag t_new, t_close, t_finish, t_recv, t_write;
    int cancelled;
    atomic_int refs;           /* completions still to come, plus work in flight */
    pthread_mutex_t mu;        /* everything below */
    bool closed;               /* RECV_CLOSE_ON_SERVER completed */
    /* unary */
    grpc_slice body;
    size_t reserved; /* body bytes counted against the server-wide cap */
    mcp_call infer;
    bool infer_queued; /* infer.req is set (under mu) */
    int64_t t_new_ns;  /* the call arrived (its trace's receive span starts) */
    grpc_status_code code; /* the status sent (for the trace) */
    grpc_metadata out_md;  /* traceparent of our span, sent with the answer */
    char traceparent[56];
    mcp_control ctl;
    grpc_slice details_slice;
    grpc_byte_buffer *reply;
    mcp_identity who;  /* the caller, from its authorization metadata */
    mcp_peer peer;
    grpc_metadata trail_md; /* retry-after, for a tenant over its limits */
    char retry_after[24];
    /* stream */
    grpc_byte_buffer *recv_buf;
    bool read_done, reading, md_sent, writing, finished;
    int inflight;
    int n_out; /* responses waiting in out_head (they count in the window too) */
    stream_item *items;
    stream_out *out_head, *out_tail;
};

struct mcp_grpc_server {
    mcp_grpc_options opts;
    mcp_frontend *fe;
    grpc_server *server;
    grpc_completion_queue *cq;
    void *methods[RPC_COUNT];
    pthread_t threads[64];
    int n_threads;
    int port;
    atomic_bool shutting_down;
    atomic_int live; /* rpc_calls that have arrived and not finished */
    rpc_tag t_shutdown;
    atomic_bool shutdown_done;
    /* Held for reading around every grpc_call_start_batch; shutdown takes
     * it for writing to close the queue, so an answer a worker finishes
     * after that never reaches gRPC (which would abort). */
    pthread_rwlock_t ops_lock;
    bool cq_closed;
};

mcp_grpc_options mcp_grpc_options_default(void)
{
    return (mcp_grpc_options){
        .host = "127.0.0.1",
        .port = 8081,
        .threads = 2,
        .max_message_bytes = 64u << 20,
        /* gRPC's server guidance: keepalive pings every 2 h, 20 s to
         * answer; clients may ping at most every 5 min without data, two
         * strikes before the connection goes. */
        .keepalive_time_ms = 7200000,
        .keepalive_timeout_ms = 20000,
        .min_client_ping_interval_ms = 300000,
    };
}

/* ---- status mapping ---- */

static grpc_status_code grpc_code(mcp_status st)
{
    switch (st) {
    case MCP_STATUS_OK: return GRPC_STATUS_OK;
    case MCP_STATUS_INVALID_ARGUMENT:
    case MCP_STATUS_INVALID_MODEL: return GRPC_STATUS_INVALID_ARGUMENT;
    case MCP_STATUS_NOT_FOUND: return GRPC_STATUS_NOT_FOUND;
    case MCP_STATUS_RESOURCE_EXHAUSTED:
    case MCP_STATUS_TOO_LARGE:
    case MCP_STATUS_OUT_OF_MEMORY: return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case MCP_STATUS_DEADLINE_EXCEEDED: return GRPC_STATUS_DEADLINE_EXCEEDED;
    case MCP_STATUS_UNAVAILABLE: return GRPC_STATUS_UNAVAILABLE;
    case MCP_STATUS_UNSUPPORTED: return GRPC_STATUS_UNIMPLEMENTED;
    case MCP_STATUS_CANCELLED: return GRPC_STATUS_CANCELLED;
    case MCP_STATUS_PERMISSION_DENIED: return GRPC_STATUS_PERMISSION_DENIED;
    case MCP_STATUS_UNAUTHENTICATED: return GRPC_STATUS_UNAUTHENTICATED;
    case MCP_STATUS_FAILED_PRECONDITION: return GRPC_STATUS_FAILED_PRECONDITION;
    default: return GRPC_STATUS_INTERNAL;
    }
}

/* ---- byte buffers ---- */

static grpc_slice read_payload(grpc_byte_buffer *bb)
{
    if (!bb) return grpc_empty_slice();
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, bb)) return grpc_empty_slice();
    grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    return all;
}

static grpc_byte_buffer *buffer_of(const mcp_buf *b)
{
    grpc_slice sl = grpc_slice_from_copied_buffer(b->len ? (const char *)b->data : "", b->len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    return bb;
}

static grpc_byte_buffer *buffer_of_message(const void *m)
{
    mcp_buf b = {0};
    mcp_codec_grpc_pack(m, &b);
    grpc_byte_buffer *bb = b.failed ? NULL : buffer_of(&b);
    mcp_buf_free(&b);
    return bb;
}

/* ---- calls ---- */

static grpc_call_error start_batch(rpc_call *rc, const grpc_op *ops, size_t n, void *tag)
{
    mcp_grpc_server *s = rc->s;
    pthread_rwlock_rdlock(&s->ops_lock);
    grpc_call_error e = s->cq_closed ? GRPC_CALL_ERROR : grpc_call_start_batch(rc->call, ops, n, tag, NULL);
    pthread_rwlock_unlock(&s->ops_lock);
    return e;
}

static void rc_unref(rpc_call *rc)
{
    if (atomic_fetch_sub(&rc->refs, 1) != 1) return;
    mcp_grpc_server *s = rc->s;
    if (rc->call) grpc_call_unref(rc->call);
    grpc_metadata_array_destroy(&rc->md);
    grpc_call_details_destroy(&rc->details);
    if (rc->traceparent[0]) grpc_slice_unref(rc->out_md.value);
    if (rc->payload) grpc_byte_buffer_destroy(rc->payload);
    if (rc->recv_buf) grpc_byte_buffer_destroy(rc->recv_buf);
    if (rc->reply) grpc_byte_buffer_destroy(rc->reply);
    grpc_slice_unref(rc->body);
    if (rc->reserved) mcp_frontend_release_body(s->fe, rc->reserved);
    grpc_slice_unref(rc->details_slice);
    mcp_call_clear(&rc->infer);
    mcp_free(rc->ctl.descriptor);
    mcp_free(rc->ctl.source);
    for (stream_out *o = rc->out_head, *n; o; o = n) {
        n = o->next;
        grpc_byte_buffer_destroy(o->msg);
        mcp_free(o);
    }
    pthread_mutex_destroy(&rc->mu);
    mcp_free(rc);
    atomic_fetch_sub(&s->live, 1);
}

static rpc_call *rc_new(mcp_grpc_server *s, rpc_kind kind)
{
    rpc_call *rc = mcp_calloc(1, sizeof *rc);
    if (!rc) return NULL;
    rc->s = s;
    rc->kind = kind;
    rc->t_new = (rpc_tag){TAG_NEW, rc};
    rc->t_close = (rpc_tag){TAG_CLOSE, rc};
    rc->t_finish = (rpc_tag){TAG_FINISH, rc};
    rc->t_recv = (rpc_tag){TAG_RECV, rc};
    rc->t_write = (rpc_tag){TAG_WRITE, rc};
    rc->body = grpc_empty_slice();
    rc->details_slice = grpc_empty_slice();
    grpc_metadata_array_init(&rc->md);
    grpc_call_details_init(&rc->details);
    pthread_mutex_init(&rc->mu, NULL);
    atomic_init(&rc->refs, 1); /* the pending TAG_NEW */
    atomic_fetch_add(&s->live, 1);
    return rc;
}

/* Asks gRPC for the next call of this method. */
static void request_call(mcp_grpc_server *s, rpc_kind kind)
{
    if (atomic_load(&s->shutting_down)) return;
    rpc_call *rc = rc_new(s, kind);
    if (!rc) return;
    grpc_call_error e = grpc_server_request_registered_call(s->server, s->methods[kind], &rc->call, &rc->deadline, &rc->md,
                                                            rpcs[kind].streaming ? NULL : &rc->payload, s->cq, s->cq,
                                                            &rc->t_new);
    if (e != GRPC_CALL_OK) rc_unref(rc);
}

static void request_unknown(mcp_grpc_server *s)
{
    if (atomic_load(&s->shutting_down)) return;
    rpc_call *rc = rc_new(s, RPC_COUNT);
    if (!rc) return;
    rc->t_new.kind = TAG_UNKNOWN;
    if (grpc_server_request_call(s->server, &rc->call, &rc->details, &rc->md, s->cq, s->cq, &rc->t_new) != GRPC_CALL_OK)
        rc_unref(rc);
}

/* Sends a unary answer: initial metadata, the message (when OK), status. */
static void finish_unary(rpc_call *rc, grpc_status_code code, grpc_byte_buffer *msg, const char *details)
{
    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    int n = 0;
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (rc->infer.trace.active && !rc->traceparent[0]) { /* our server span, for the client to link to */
        mcp_trace_format_traceparent(&rc->infer.trace, rc->traceparent);
        rc->out_md.key = grpc_slice_from_static_string("traceparent");
        rc->out_md.value = grpc_slice_from_copied_string(rc->traceparent);
        ops[n].data.send_initial_metadata.count = 1;
        ops[n].data.send_initial_metadata.metadata = &rc->out_md;
    }
    n++;
    rc->code = code;
    if (msg && code == GRPC_STATUS_OK) {
        rc->reply = msg;
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = msg;
    } else if (msg) {
        grpc_byte_buffer_destroy(msg);
    }
    rc->details_slice = grpc_slice_from_copied_string(details ? details : "");
    if (code == GRPC_STATUS_RESOURCE_EXHAUSTED && rc->infer.retry_after_s > 0) {
        snprintf(rc->retry_after, sizeof rc->retry_after, "%lld", (long long)rc->infer.retry_after_s);
        rc->trail_md.key = grpc_slice_from_static_string("retry-after");
        rc->trail_md.value = grpc_slice_from_static_string(rc->retry_after);
        ops[n].data.send_status_from_server.trailing_metadata_count = 1;
        ops[n].data.send_status_from_server.trailing_metadata = &rc->trail_md;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n].data.send_status_from_server.status_details = code == GRPC_STATUS_OK ? NULL : &rc->details_slice;
    n++;
    atomic_fetch_add(&rc->refs, 1);
    if (start_batch(rc, ops, (size_t)n, &rc->t_finish) != GRPC_CALL_OK) rc_unref(rc);
}

static void finish_message(rpc_call *rc, const void *m)
{
    grpc_byte_buffer *bb = buffer_of_message(m);
    if (!bb) finish_unary(rc, GRPC_STATUS_RESOURCE_EXHAUSTED, NULL, "out of memory building the response");
    else finish_unary(rc, GRPC_STATUS_OK, bb, NULL);
}

static void finish_status(rpc_call *rc, mcp_status st, const char *message)
{
    finish_unary(rc, grpc_code(st), NULL, message && message[0] ? message : mcp_status_str(st));
}

/* ---- metadata answers ---- */

static mcp_model_version *route(rpc_call *rc, const char *name, const char *version)
{
    char msg[600];
    mcp_err err = {msg, sizeof msg};
    mcp_status st;
    if (!name || !name[0]) {
        finish_status(rc, MCP_STATUS_INVALID_ARGUMENT, "a model name is required");
        return NULL;
    }
    st = mcp_frontend_allow(rc->s->fe, &rc->who, rc->peer, rpcs[rc->kind].act, name, &err);
    mcp_model_version *v =
        st == MCP_STATUS_OK ? mcp_frontend_route_model(rc->s->fe, name, version && version[0] ? version : NULL, &st, &err) : NULL;
    if (!v) finish_status(rc, st, msg);
    return v;
}

/* Whether the caller may do the call's action on a model it names;
 * answered (403, or 404 as for an unknown model) when not. */
static bool model_allowed(rpc_call *rc, const char *name)
{
    char msg[400];
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_frontend_allow(rc->s->fe, &rc->who, rc->peer, rpcs[rc->kind].act, name, &err);
    if (st == MCP_STATUS_OK) return true;
    finish_status(rc, st, msg);
    return false;
}

#define UNPACK_OR_FAIL(type, fn, var)                                                                                  \
    type *var = fn##__unpack(NULL, GRPC_SLICE_LENGTH(rc->body), GRPC_SLICE_START_PTR(rc->body));                       \
    if (!var) {                                                                                                        \
        finish_status(rc, MCP_STATUS_INVALID_ARGUMENT, "the request message cannot be parsed");                       \
        return;                                                                                                        \
    }

static void do_live(rpc_call *rc)
{
    Inference__ServerLiveResponse m = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
    m.live = true;
    finish_message(rc, &m.base);
}

static void do_ready(rpc_call *rc)
{
    Inference__ServerReadyResponse m = INFERENCE__SERVER_READY_RESPONSE__INIT;
    m.ready = !mcp_frontend_stopping(rc->s->fe);
    finish_message(rc, &m.base);
}

static void do_model_ready(rpc_call *rc)
{
    UNPACK_OR_FAIL(Inference__ModelReadyRequest, inference__model_ready_request, req);
    Inference__ModelReadyResponse m = INFERENCE__MODEL_READY_RESPONSE__INIT;
    /* A model the caller may not know of is not ready, as an unknown one. */
    char msg[400];
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_frontend_allow(rc->s->fe, &rc->who, rc->peer, MCP_ACT_METADATA, req->name ? req->name : "", &err);
    if (st != MCP_STATUS_OK && st != MCP_STATUS_NOT_FOUND) {
        inference__model_ready_request__free_unpacked(req, NULL);
        finish_status(rc, st, msg);
        return;
    }
    mcp_model_version *v = st != MCP_STATUS_OK ? NULL
                           : mcp_repository_get(mcp_frontend_repository(rc->s->fe), req->name,
                                                req->version && req->version[0] ? req->version : NULL);
    m.ready = v != NULL;
    mcp_model_version_release(v);
    inference__model_ready_request__free_unpacked(req, NULL);
    finish_message(rc, &m.base);
}

static void do_server_metadata(rpc_call *rc)
{
    static char *extensions[] = {"binary_tensor_data", "model_repository", "statistics", "schedule_policy",
                                 "model_configuration"};
    Inference__ServerMetadataResponse m = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
    m.name = "mcp2026";
    m.version = MCP_VERSION_STRING;
    m.n_extensions = sizeof extensions / sizeof extensions[0];
    m.extensions = extensions;
    finish_message(rc, &m.base);
}

static void fill_tensor_meta(Inference__ModelMetadataResponse__TensorMetadata *t, const mcp_tensor_meta *m, int64_t *dims)
{
    Inference__ModelMetadataResponse__TensorMetadata init = INFERENCE__MODEL_METADATA_RESPONSE__TENSOR_METADATA__INIT;
    *t = init;
    const char *dt = mcp_oip_datatype(m->dtype);
    t->name = (char *)m->name;
    t->datatype = (char *)(dt ? dt : mcp_dtype_is_narrow(m->dtype) ? mcp_onnx_dtype_name(m->dtype) : "UNKNOWN");
    t->n_shape = (size_t)(m->rank > 0 ? m->rank : 0);
    memcpy(dims, m->dims, sizeof(int64_t) * t->n_shape);
    t->shape = dims;
}

static void do_model_metadata(rpc_call *rc)
{
    UNPACK_OR_FAIL(Inference__ModelMetadataRequest, inference__model_metadata_request, req);
    mcp_model_version *v = route(rc, req->name, req->version);
    inference__model_metadata_request__free_unpacked(req, NULL);
    if (!v) return;
    int n = v->n_inputs + v->n_outputs;
    Inference__ModelMetadataResponse__TensorMetadata *t = mcp_calloc((size_t)n + 1, sizeof *t);
    Inference__ModelMetadataResponse__TensorMetadata **p = mcp_calloc((size_t)n + 1, sizeof *p);
    int64_t *dims = mcp_calloc((size_t)n * MCP_MAX_RANK + 1, sizeof *dims);
    if (!t || !p || !dims) {
        finish_status(rc, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    } else {
        for (int i = 0; i < n; i++) {
            fill_tensor_meta(&t[i], i < v->n_inputs ? &v->inputs[i] : &v->outputs[i - v->n_inputs], dims + i * MCP_MAX_RANK);
            p[i] = &t[i];
        }
        Inference__ModelMetadataResponse m = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
        char names[MCP_MAX_SERVED][64], *versions[MCP_MAX_SERVED];
        int nv = mcp_repository_versions(mcp_frontend_repository(rc->s->fe), v->name, names, MCP_MAX_SERVED);
        for (int i = 0; i < nv; i++) versions[i] = names[i];
        if (nv == 0) versions[nv++] = v->version;
        m.name = v->name;
        m.n_versions = (size_t)nv;
        m.versions = versions;
        m.platform = v->llm ? "gguf" : "onnx_onnxv1";
        m.n_inputs = (size_t)v->n_inputs;
        m.inputs = p;
        m.n_outputs = (size_t)v->n_outputs;
        m.outputs = p + v->n_inputs;
        finish_message(rc, &m.base);
    }
    mcp_free(dims);
    mcp_free(p);
    mcp_free(t);
    mcp_model_version_release(v);
}

static Inference__DataType triton_data_type(mcp_dtype d)
{
    switch (d) {
    case MCP_DTYPE_BOOL: return INFERENCE__DATA_TYPE__TYPE_BOOL;
    case MCP_DTYPE_UINT8: return INFERENCE__DATA_TYPE__TYPE_UINT8;
    case MCP_DTYPE_UINT16: return INFERENCE__DATA_TYPE__TYPE_UINT16;
    case MCP_DTYPE_UINT32: return INFERENCE__DATA_TYPE__TYPE_UINT32;
    case MCP_DTYPE_UINT64: return INFERENCE__DATA_TYPE__TYPE_UINT64;
    case MCP_DTYPE_INT8: return INFERENCE__DATA_TYPE__TYPE_INT8;
    case MCP_DTYPE_INT16: return INFERENCE__DATA_TYPE__TYPE_INT16;
    case MCP_DTYPE_INT32: return INFERENCE__DATA_TYPE__TYPE_INT32;
    case MCP_DTYPE_INT64: return INFERENCE__DATA_TYPE__TYPE_INT64;
    case MCP_DTYPE_FLOAT16: return INFERENCE__DATA_TYPE__TYPE_FP16;
    case MCP_DTYPE_FLOAT: return INFERENCE__DATA_TYPE__TYPE_FP32;
    case MCP_DTYPE_DOUBLE: return INFERENCE__DATA_TYPE__TYPE_FP64;
    case MCP_DTYPE_STRING: return INFERENCE__DATA_TYPE__TYPE_STRING;
    case MCP_DTYPE_BFLOAT16: return INFERENCE__DATA_TYPE__TYPE_BF16;
    default: return INFERENCE__DATA_TYPE__TYPE_INVALID;
    }
}

static void do_config(rpc_call *rc)
{
    UNPACK_OR_FAIL(Inference__ModelConfigRequest, inference__model_config_request, req);
    mcp_model_version *v = route(rc, req->name, req->version);
    inference__model_config_request__free_unpacked(req, NULL);
    if (!v) return;
    const mcp_descriptor *d = v->desc;
    bool batched = d->max_batch_size > 0;
    int ni = v->n_inputs, no = v->n_outputs;
    Inference__ModelInput *in = mcp_calloc((size_t)ni + 1, sizeof *in);
    Inference__ModelInput **pin = mcp_calloc((size_t)ni + 1, sizeof *pin);
    Inference__ModelOutput *out = mcp_calloc((size_t)no + 1, sizeof *out);
    Inference__ModelOutput **pout = mcp_calloc((size_t)no + 1, sizeof *pout);
    int64_t *dims = mcp_calloc((size_t)(ni + no) * MCP_MAX_RANK + 1, sizeof *dims);
    int32_t preferred[16];
    if (!in || !pin || !out || !pout || !dims) {
        finish_status(rc, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int i = 0; i < ni + no; i++) {
        const mcp_tensor_meta *m = i < ni ? &v->inputs[i] : &v->outputs[i - ni];
        int first = batched ? 1 : 0, rank = m->rank > first ? m->rank - first : 0;
        int64_t *dst = dims + i * MCP_MAX_RANK;
        memcpy(dst, m->dims + first, sizeof(int64_t) * (size_t)rank);
        if (i < ni) {
            Inference__ModelInput init = INFERENCE__MODEL_INPUT__INIT;
            in[i] = init;
            in[i].name = (char *)m->name;
            in[i].data_type = triton_data_type(m->dtype);
            in[i].n_dims = (size_t)rank;
            in[i].dims = dst;
            pin[i] = &in[i];
        } else {
            Inference__ModelOutput init = INFERENCE__MODEL_OUTPUT__INIT;
            out[i - ni] = init;
            out[i - ni].name = (char *)m->name;
            out[i - ni].data_type = triton_data_type(m->dtype);
            out[i - ni].n_dims = (size_t)rank;
            out[i - ni].dims = dst;
            pout[i - ni] = &out[i - ni];
        }
    }
    Inference__ModelInstanceGroup group = INFERENCE__MODEL_INSTANCE_GROUP__INIT;
    group.count = (int32_t)d->instance_count;
    group.kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU;
    Inference__ModelInstanceGroup *groups[1] = {&group};
    Inference__ModelQueuePolicy policy = INFERENCE__MODEL_QUEUE_POLICY__INIT;
    policy.default_timeout_microseconds = (uint64_t)d->batching.default_timeout_us;
    policy.max_queue_size = (int32_t)d->batching.max_queue_size;
    Inference__ModelDynamicBatching dyn = INFERENCE__MODEL_DYNAMIC_BATCHING__INIT;
    for (int i = 0; i < d->batching.n_preferred && i < 16; i++) preferred[i] = (int32_t)d->batching.preferred[i];
    dyn.n_preferred_batch_size = (size_t)(d->batching.n_preferred < 16 ? d->batching.n_preferred : 16);
    dyn.preferred_batch_size = preferred;
    dyn.max_queue_delay_microseconds = (uint64_t)d->batching.max_queue_delay_us;
    dyn.default_queue_policy = &policy;
    Inference__ModelConfig cfg = INFERENCE__MODEL_CONFIG__INIT;
    cfg.name = v->name;
    cfg.platform = "onnxruntime_onnx";
    cfg.backend = "mcp";
    cfg.max_batch_size = (int32_t)d->max_batch_size;
    cfg.n_input = (size_t)ni;
    cfg.input = pin;
    cfg.n_output = (size_t)no;
    cfg.output = pout;
    cfg.n_instance_group = 1;
    cfg.instance_group = groups;
    if (batched && d->batching.enabled) cfg.dynamic_batching = &dyn;
    Inference__ModelConfigResponse m = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    m.config = &cfg;
    finish_message(rc, &m.base);
done:
    mcp_free(dims);
    mcp_free(pout);
    mcp_free(out);
    mcp_free(pin);
    mcp_free(in);
    mcp_model_version_release(v);
}

/* Statistics in Triton's shape for one version (durations cumulative). */
typedef struct stats_msg {
    Inference__ModelStatistics m;
    Inference__InferStatistics is;
    Inference__StatisticDuration success, fail, queue, cin, cinfer, cout;
    mcp_batch_stat *sizes;
    Inference__InferBatchStatistics *bs;
    Inference__InferBatchStatistics **pbs;
    Inference__StatisticDuration *bd; /* 3 per size */
} stats_msg;

static void fill_stats(stats_msg *sm, mcp_model_version *v)
{
    mcp_scheduler_stats st = {0};
    if (v->serving) mcp_scheduler_stats_get(v->serving, &st);
    Inference__ModelStatistics m = INFERENCE__MODEL_STATISTICS__INIT;
    Inference__InferStatistics is = INFERENCE__INFER_STATISTICS__INIT;
    Inference__StatisticDuration d = INFERENCE__STATISTIC_DURATION__INIT;
    sm->m = m;
    sm->is = is;
    sm->success = sm->fail = sm->queue = sm->cin = sm->cinfer = sm->cout = d;
    sm->success.count = (uint64_t)st.success_count;
    sm->success.ns = (uint64_t)(st.queue_ns + st.compute_input_ns + st.compute_ns + st.compute_output_ns);
    sm->fail.count = (uint64_t)st.fail_count;
    sm->queue.count = (uint64_t)st.inference_count;
    sm->queue.ns = (uint64_t)st.queue_ns;
    sm->cinfer.count = (uint64_t)st.inference_count;
    sm->cinfer.ns = (uint64_t)st.compute_ns;
    sm->cin.count = sm->cout.count = (uint64_t)st.inference_count;
    sm->cin.ns = (uint64_t)st.compute_input_ns;
    sm->cout.ns = (uint64_t)st.compute_output_ns;
    int n = v->serving ? mcp_scheduler_batch_stats_copy(v->serving, &sm->sizes) : 0;
    if (n > 0) {
        sm->bs = mcp_calloc((size_t)n, sizeof *sm->bs);
        sm->pbs = mcp_calloc((size_t)n, sizeof *sm->pbs);
        sm->bd = mcp_calloc((size_t)n * 3, sizeof *sm->bd);
    }
    for (int i = 0; n > 0 && sm->bs && sm->pbs && sm->bd && i < n; i++) {
        Inference__InferBatchStatistics bi = INFERENCE__INFER_BATCH_STATISTICS__INIT;
        sm->bs[i] = bi;
        Inference__StatisticDuration *d3 = &sm->bd[i * 3];
        for (int k = 0; k < 3; k++) d3[k] = d;
        d3[0].count = d3[1].count = d3[2].count = (uint64_t)sm->sizes[i].count;
        d3[0].ns = (uint64_t)sm->sizes[i].compute_input_ns;
        d3[1].ns = (uint64_t)sm->sizes[i].compute_infer_ns;
        d3[2].ns = (uint64_t)sm->sizes[i].compute_output_ns;
        sm->bs[i].batch_size = (uint64_t)sm->sizes[i].batch_size;
        sm->bs[i].compute_input = &d3[0];
        sm->bs[i].compute_infer = &d3[1];
        sm->bs[i].compute_output = &d3[2];
        sm->pbs[i] = &sm->bs[i];
        sm->m.n_batch_stats = (size_t)i + 1;
    }
    sm->m.batch_stats = sm->pbs;
    sm->is.success = &sm->success;
    sm->is.fail = &sm->fail;
    sm->is.queue = &sm->queue;
    sm->is.compute_input = &sm->cin;
    sm->is.compute_infer = &sm->cinfer;
    sm->is.compute_output = &sm->cout;
    sm->m.name = v->name;
    sm->m.version = v->version;
    sm->m.last_inference = (uint64_t)st.last_inference_ms;
    sm->m.inference_count = (uint64_t)st.inference_count;
    sm->m.execution_count = (uint64_t)st.execution_count;
    sm->m.inference_stats = &sm->is;
}

static void do_statistics(rpc_call *rc)
{
    UNPACK_OR_FAIL(Inference__ModelStatisticsRequest, inference__model_statistics_request, req);
    mcp_repository *repo = mcp_frontend_repository(rc->s->fe);
    mcp_model_version **vs = NULL;
    int nv = 0;
    if (req->name && req->name[0]) {
        mcp_model_version *v = route(rc, req->name, req->version);
        inference__model_statistics_request__free_unpacked(req, NULL);
        if (!v) return;
        vs = mcp_calloc(1, sizeof *vs);
        if (vs) vs[nv++] = v;
        else mcp_model_version_release(v);
    } else {
        inference__model_statistics_request__free_unpacked(req, NULL);
        char msg[300];
        mcp_err err = {msg, sizeof msg};
        mcp_status st = mcp_frontend_allow(rc->s->fe, &rc->who, rc->peer, MCP_ACT_STATS, NULL, &err);
        if (st != MCP_STATUS_OK) {
            finish_status(rc, st, msg);
            return;
        }
        mcp_repository_entry *list;
        int n = mcp_repository_index(repo, &list);
        vs = mcp_calloc((size_t)n + 1, sizeof *vs);
        for (int i = 0; vs && i < n; i++)
            if (mcp_frontend_visible(rc->s->fe, &rc->who, list[i].name) && (vs[nv] = mcp_repository_get(repo, list[i].name, NULL)))
                nv++;
        mcp_repository_entries_free(list, n);
    }
    stats_msg *sm = mcp_calloc((size_t)nv + 1, sizeof *sm);
    Inference__ModelStatistics **p = mcp_calloc((size_t)nv + 1, sizeof *p);
    if (!vs || !sm || !p) {
        finish_status(rc, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    } else {
        for (int i = 0; i < nv; i++) {
            fill_stats(&sm[i], vs[i]);
            p[i] = &sm[i].m;
        }
        Inference__ModelStatisticsResponse m = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
        m.n_model_stats = (size_t)nv;
        m.model_stats = p;
        finish_message(rc, &m.base);
    }
    for (int i = 0; i < nv; i++) mcp_model_version_release(vs[i]);
    for (int i = 0; sm && i < nv; i++) {
        mcp_free(sm[i].sizes);
        mcp_free(sm[i].bs);
        mcp_free(sm[i].pbs);
        mcp_free(sm[i].bd);
    }
    mcp_free(p);
    mcp_free(sm);
    mcp_free(vs);
}

static void do_index(rpc_call *rc)
{
    UNPACK_OR_FAIL(Inference__RepositoryIndexRequest, inference__repository_index_request, req);
    bool only_ready = req->ready;
    inference__repository_index_request__free_unpacked(req, NULL);
    mcp_repository_entry *list;
    int n = mcp_repository_index(mcp_frontend_repository(rc->s->fe), &list);
    Inference__RepositoryIndexResponse__ModelIndex *e = mcp_calloc((size_t)n + 1, sizeof *e);
    Inference__RepositoryIndexResponse__ModelIndex **p = mcp_calloc((size_t)n + 1, sizeof *p);
    if (!e || !p) {
        finish_status(rc, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    } else {
        int k = 0;
        for (int i = 0; i < n; i++) {
            if ((only_ready && list[i].state != MCP_MODEL_READY) || !mcp_frontend_visible(rc->s->fe, &rc->who, list[i].name))
                continue;
            Inference__RepositoryIndexResponse__ModelIndex init = INFERENCE__REPOSITORY_INDEX_RESPONSE__MODEL_INDEX__INIT;
            e[k] = init;
            e[k].name = list[i].name;
            e[k].version = list[i].version;
            e[k].state = (char *)mcp_model_state_name(list[i].state);
            e[k].reason = list[i].reason;
            p[k] = &e[k];
            k++;
        }
        Inference__RepositoryIndexResponse m = INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT;
        m.n_models = (size_t)k;
        m.models = p;
        finish_message(rc, &m.base);
    }
    mcp_free(p);
    mcp_free(e);
    mcp_repository_entries_free(list, n);
}

static void do_health(rpc_call *rc)
{
    UNPACK_OR_FAIL(Grpc__Health__V1__HealthCheckRequest, grpc__health__v1__health_check_request, req);
    Grpc__Health__V1__HealthCheckResponse m = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    const char *svc = req->service ? req->service : "";
    bool stopping = mcp_frontend_stopping(rc->s->fe);
    bool unknown = false;
    if (!svc[0] || !strcmp(svc, "inference.GRPCInferenceService")) {
        m.status = stopping ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
                            : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    } else {
        /* A model's name asks about that model. */
        char msg[600];
        mcp_err err = {msg, sizeof msg};
        mcp_status st;
        mcp_model_version *v = mcp_frontend_route_model(rc->s->fe, svc, NULL, &st, &err);
        unknown = !v && st == MCP_STATUS_NOT_FOUND;
        m.status = v && !stopping ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                                  : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
        mcp_model_version_release(v);
    }
    grpc__health__v1__health_check_request__free_unpacked(req, NULL);
    /* The health protocol: an unknown service fails with NOT_FOUND. */
    if (unknown) finish_unary(rc, GRPC_STATUS_NOT_FOUND, NULL, "unknown service (no such model)");
    else finish_message(rc, &m.base);
}

/* ---- model control ---- */

static const char *md_value(const grpc_metadata_array *md, const char *key, char *buf, size_t cap)
{
    for (size_t i = 0; i < md->count; i++) {
        const grpc_slice *k = &md->metadata[i].key;
        size_t n = GRPC_SLICE_LENGTH(*k);
        if (n == strlen(key) && !strncasecmp((const char *)GRPC_SLICE_START_PTR(*k), key, n)) {
            size_t vl = GRPC_SLICE_LENGTH(md->metadata[i].value);
            if (vl >= cap) vl = cap - 1;
            memcpy(buf, GRPC_SLICE_START_PTR(md->metadata[i].value), vl);
            buf[vl] = '\0';
            return buf;
        }
    }
    return NULL;
}

/* Model control: the serving core decides (metadata "authorization"). */
static bool control_allowed(rpc_call *rc)
{
    char auth[512], msg[300];
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_frontend_authorize_control(rc->s->fe, md_value(&rc->md, "authorization", auth, sizeof auth), &err);
    explicit_bzero(auth, sizeof auth);
    if (st == MCP_STATUS_OK) {
        mcp_identity_describe(&rc->who, rc->peer, rc->ctl.actor, sizeof rc->ctl.actor);
        return true;
    }
    finish_status(rc, st, msg);
    return false;
}

static void control_done(mcp_control *ctl)
{
    rpc_call *rc = ctl->user;
    if (ctl->status != MCP_STATUS_OK) {
        finish_status(rc, ctl->status, ctl->message);
    } else if (ctl->op == MCP_CONTROL_ROLLOUT) {
        Mcp__Control__V1__RolloutResponse m = MCP__CONTROL__V1__ROLLOUT_RESPONSE__INIT;
        m.status_json = ctl->answer ? ctl->answer : "";
        finish_message(rc, &m.base);
    } else if (ctl->op == MCP_CONTROL_LOAD) {
        Inference__RepositoryModelLoadResponse m = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
        finish_message(rc, &m.base);
    } else {
        Inference__RepositoryModelUnloadResponse m = INFERENCE__REPOSITORY_MODEL_UNLOAD_RESPONSE__INIT;
        finish_message(rc, &m.base);
    }
    mcp_free(ctl->answer);
    ctl->answer = NULL;
    rc_unref(rc); /* the control's reference */
}

static void start_control(rpc_call *rc)
{
    rc->ctl.done = control_done;
    rc->ctl.user = rc;
    atomic_fetch_add(&rc->refs, 1);
    mcp_status st = mcp_frontend_control(rc->s->fe, &rc->ctl);
    if (st != MCP_STATUS_OK) {
        rc->ctl.status = st;
        snprintf(rc->ctl.message, sizeof rc->ctl.message, "%s",
                 st == MCP_STATUS_UNAVAILABLE            ? "server is shutting down"
                 : st == MCP_STATUS_RESOURCE_EXHAUSTED ? "too many model loads and unloads are queued; retry later"
                                                       : "out of memory");
        control_done(&rc->ctl);
    }
}

static void do_load(rpc_call *rc)
{
    if (!control_allowed(rc)) return;
    UNPACK_OR_FAIL(Inference__RepositoryModelLoadRequest, inference__repository_model_load_request, req);
    rc->ctl.op = MCP_CONTROL_LOAD;
    snprintf(rc->ctl.name, sizeof rc->ctl.name, "%s", req->model_name ? req->model_name : "");
    const char *bad = NULL;
    for (size_t i = 0; i < req->n_parameters && !bad; i++) {
        const char *k = req->parameters[i]->key ? req->parameters[i]->key : "";
        const Inference__ModelRepositoryParameter *p = req->parameters[i]->value;
        bool str = p && p->parameter_choice_case == INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
        if (!strncmp(k, "file:", 5)) bad = "file overrides in a load request are not supported; put the model's files under a model root";
        else if (!strcmp(k, "config") && str && p->string_param && strlen(p->string_param) > MCP__DESC_MAX_TEXT)
            bad = "parameters.config is larger than a descriptor may be (1 MiB)";
        else if (!strcmp(k, "config") && str) mcp_free(rc->ctl.descriptor), rc->ctl.descriptor = mcp_strdup(p->string_param);
        else if (!strcmp(k, "config")) bad = "parameters.config must be a string_param holding the model descriptor";
    }
    bool unnamed = !rc->ctl.name[0];
    inference__repository_model_load_request__free_unpacked(req, NULL);
    if (unnamed) bad = "model_name is required";
    if (bad) {
        finish_status(rc, MCP_STATUS_INVALID_ARGUMENT, bad);
        return;
    }
    if (!model_allowed(rc, rc->ctl.name)) return;
    start_control(rc);
}

static void do_unload(rpc_call *rc)
{
    if (!control_allowed(rc)) return;
    UNPACK_OR_FAIL(Inference__RepositoryModelUnloadRequest, inference__repository_model_unload_request, req);
    rc->ctl.op = MCP_CONTROL_UNLOAD;
    snprintf(rc->ctl.name, sizeof rc->ctl.name, "%s", req->model_name ? req->model_name : "");
    inference__repository_model_unload_request__free_unpacked(req, NULL);
    if (!rc->ctl.name[0]) {
        finish_status(rc, MCP_STATUS_INVALID_ARGUMENT, "model_name is required");
        return;
    }
    if (!model_allowed(rc, rc->ctl.name)) return;
    start_control(rc);
}

/* ---- mcp.control.v1.Control: rollouts (the same JSON as over HTTP) ---- */

static void do_rollout_status(rpc_call *rc)
{
    if (!control_allowed(rc)) return;
    UNPACK_OR_FAIL(Mcp__Control__V1__RolloutStatusRequest, mcp__control__v1__rollout_status_request, req);
    char name[256], msg[512];
    snprintf(name, sizeof name, "%s", req->model_name ? req->model_name : "");
    mcp__control__v1__rollout_status_request__free_unpacked(req, NULL);
    if (!model_allowed(rc, name)) return;
    mcp_err err = {msg, sizeof msg};
    mcp_buf b = {0};
    mcp_status st = mcp_frontend_rollout_json(rc->s->fe, name, &b, &err);
    if (st == MCP_STATUS_OK && !b.failed) {
        mcp_buf_append(&b, "", 1);
        Mcp__Control__V1__RolloutResponse m = MCP__CONTROL__V1__ROLLOUT_RESPONSE__INIT;
        m.status_json = b.failed ? "" : (char *)b.data;
        finish_message(rc, &m.base);
    } else {
        finish_status(rc, st == MCP_STATUS_OK ? MCP_STATUS_OUT_OF_MEMORY : st, msg);
    }
    mcp_buf_free(&b);
}

static void do_rollout(rpc_call *rc)
{
    if (!control_allowed(rc)) return;
    UNPACK_OR_FAIL(Mcp__Control__V1__RolloutRequest, mcp__control__v1__rollout_request, req);
    char name[256], msg[512];
    snprintf(name, sizeof name, "%s", req->model_name ? req->model_name : "");
    mcp_err err = {msg, sizeof msg};
    const char *body = req->request_json ? req->request_json : "";
    memset(&rc->ctl, 0, sizeof rc->ctl);
    mcp_status st = !name[0] ? mcp_err_set(&err, MCP_STATUS_INVALID_ARGUMENT, "model_name is required")
                    : mcp_frontend_allow(rc->s->fe, &rc->who, rc->peer, MCP_ACT_ROLLOUT, name, &err);
    if (st == MCP_STATUS_OK) st = mcp_frontend_rollout_parse(rc->s->fe, name, body, strlen(body), &rc->ctl, &err);
    mcp__control__v1__rollout_request__free_unpacked(req, NULL);
    mcp_identity_describe(&rc->who, rc->peer, rc->ctl.actor, sizeof rc->ctl.actor);
    if (st != MCP_STATUS_OK) {
        finish_status(rc, st, msg);
        return;
    }
    start_control(rc);
}

/* ---- ModelInfer ---- */

static int64_t deadline_ns_of(gpr_timespec deadline)
{
    gpr_timespec mono = gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC);
    gpr_timespec now = gpr_now(GPR_CLOCK_MONOTONIC);
    if (gpr_time_cmp(mono, gpr_inf_future(GPR_CLOCK_MONOTONIC)) == 0) return 0;
    gpr_timespec left = gpr_time_sub(mono, now);
    /* Beyond ten years is no deadline (and would overflow below). */
    if (left.tv_sec > 10LL * 366 * 86400) return 0;
    int64_t ns = (int64_t)left.tv_sec * 1000000000 + left.tv_nsec;
    return mcp_now_ns() + (ns > 0 ? ns : 1);
}

/* A client that cancels (or whose deadline passes) cancels its request;
 * the close may come before or after the request is queued. */
static void infer_on_queued(mcp_call *c)
{
    rpc_call *rc = c->user;
    pthread_mutex_lock(&rc->mu);
    rc->infer_queued = true;
    if (rc->closed && rc->cancelled && c->req) atomic_store(&c->req->cancel, true);
    pthread_mutex_unlock(&rc->mu);
}

static void stream_on_queued(mcp_call *c)
{
    stream_item *it = c->user;
    pthread_mutex_lock(&it->rc->mu);
    it->queued = true;
    if (it->rc->closed && it->rc->cancelled && c->req) atomic_store(&c->req->cancel, true);
    pthread_mutex_unlock(&it->rc->mu);
}

static void infer_respond(mcp_call *c)
{
    rpc_call *rc = c->user;
    /* The request's bytes are not needed once it is answered (its tensors
     * were copied at decode): they stop counting against the server-wide
     * cap now, not when a client that reads slowly takes the answer. */
    grpc_slice_unref(rc->body);
    rc->body = grpc_empty_slice();
    if (rc->reserved) mcp_frontend_release_body(rc->s->fe, rc->reserved);
    rc->reserved = 0;
    if (c->status == MCP_STATUS_OK) {
        grpc_byte_buffer *bb = c->out.failed ? NULL : buffer_of(&c->out);
        mcp_buf_free(&c->out);
        if (bb) finish_unary(rc, GRPC_STATUS_OK, bb, NULL);
        else finish_unary(rc, GRPC_STATUS_RESOURCE_EXHAUSTED, NULL, "out of memory building the response");
    } else {
        finish_status(rc, c->status, c->message);
    }
    rc_unref(rc); /* the inference's reference */
}

/* The call's trace context from its metadata; the body has been read. */
static void trace_start(rpc_call *rc, mcp_call *c, int64_t t_receive_ns)
{
    mcp_frontend *fe = rc->s->fe;
    if (!mcp_frontend_tracer(fe)) return;
    char tp[64], ts[MCP_TRACE_STATE_MAX + 2]; /* one more than allowed: too long is seen, not cut */
    mcp_frontend_trace_start(fe, c, md_value(&rc->md, "traceparent", tp, sizeof tp),
                             md_value(&rc->md, "tracestate", ts, sizeof ts), t_receive_ns);
    if (c->trace.pending) c->trace.t_received_ns = mcp_now_ns();
}

/* The call was sent (or, for a stream's request, queued for writing):
 * its spans and its access-log line. c is NULL for calls other than
 * inferences. */
static void call_end(rpc_call *rc, mcp_call *c, grpc_status_code code, int64_t t_start_ns, const mcp_gen_request *gen,
                     const stream_item *it)
{
    bool internal = code == GRPC_STATUS_INTERNAL || code == GRPC_STATUS_UNKNOWN || code == GRPC_STATUS_DATA_LOSS;
    if (!mcp_frontend_call_end_wanted(rc->s->fe, c, internal)) return;
    char tenant[MCP_TENANT_MAX + 2];
    const char *t = md_value(&rc->md, "tenant", tenant, sizeof tenant);
    const char *method = rc->kind < RPC_COUNT ? rpcs[rc->kind].path : "(unknown method)";
    const char *short_name = strrchr(method, '/') ? strrchr(method, '/') + 1 : method;
    mcp_trace_end e = {
        .name = method[0] == '/' ? method + 1 : method,
        .transport = "grpc",
        .rpc_method = short_name,
        .code = (int)code,
        /* gRPC's server-side failures (OpenTelemetry's convention for
         * server spans). */
        .error = code == GRPC_STATUS_UNKNOWN || code == GRPC_STATUS_DEADLINE_EXCEEDED || code == GRPC_STATUS_UNIMPLEMENTED ||
                 code == GRPC_STATUS_INTERNAL || code == GRPC_STATUS_UNAVAILABLE || code == GRPC_STATUS_DATA_LOSS,
        .internal = internal,
        .tenant = rc->who.authenticated ? rc->who.tenant : t && mcp_frontend_tenant_valid(t) ? t : NULL,
        .t_start_ns = t_start_ns,
    };
    if (gen) { /* a generation on the stream: its steps and tokens */
        e.generation = true;
        e.protocol = "grpc";
        e.model = it->model;
        e.version = it->version;
        e.request_id = it->id;
        e.priority = gen->priority;
        e.t_queued_ns = gen->submitted_ns;
        e.t_admitted_ns = atomic_load(&gen->admitted_ns);
        e.t_first_token_ns = atomic_load(&gen->first_token_ns);
        e.t_gen_done_ns = atomic_load(&gen->done_ns);
        e.prompt_tokens = atomic_load(&gen->prompt_tokens);
        e.completion_tokens = atomic_load(&gen->completion_tokens);
    }
    mcp_frontend_call_end(rc->s->fe, c, &e);
}

static void do_infer(rpc_call *rc)
{
    mcp_frontend *fe = rc->s->fe;
    if (!mcp_frontend_admit(fe)) {
        finish_status(rc, MCP_STATUS_UNAVAILABLE, "server is shutting down");
        return;
    }
    mcp_call *c = &rc->infer;
    trace_start(rc, c, rc->t_new_ns);
    c->codec = mcp_codec_get(MCP_PROTOCOL_GRPC);
    c->wire = (mcp_wire){.body = GRPC_SLICE_START_PTR(rc->body), .len = GRPC_SLICE_LENGTH(rc->body), .header_len = -1};
    c->deadline_ns = deadline_ns_of(rc->deadline);
    c->on_queued = infer_on_queued;
    c->respond = infer_respond;
    c->user = rc;
    c->who = rc->who;
    c->peer = rc->peer;
    atomic_fetch_add(&rc->refs, 1);
    mcp_frontend_count_open(fe, 1);
    mcp_frontend_infer(fe, c);
    mcp_frontend_routed(fe);
    mcp_frontend_count_open(fe, -1);
}

/* ---- ModelStreamInfer ---- */

static void stream_post_recv(rpc_call *rc);
static void stream_try_write(rpc_call *rc);

/* Reads the next request when the stream has room (mu held): requests in
 * flight and answers not yet written together stay under STREAM_INFLIGHT,
 * so a client that stops reading its answers stops being read. */
static void stream_maybe_read(rpc_call *rc)
{
    if (!rc->reading && !rc->read_done && !rc->closed && !rc->finished && rc->inflight + rc->n_out < STREAM_INFLIGHT)
        stream_post_recv(rc);
}

/* The stream's initial metadata goes with its first write (mu held):
 * puts the op in ops[0] when still due; returns how many it put. */
static int stream_initial_metadata(rpc_call *rc, grpc_op *ops)
{
    if (rc->md_sent) return 0;
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    rc->md_sent = true;
    return 1;
}

/* Sends the stream's final status once the client has half-closed and
 * every response is written (mu held). */
static void stream_maybe_finish(rpc_call *rc)
{
    if (rc->finished || !rc->read_done || rc->inflight || rc->writing || rc->out_head) return;
    rc->finished = true;
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    int n = stream_initial_metadata(rc, ops);
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = GRPC_STATUS_OK;
    n++;
    atomic_fetch_add(&rc->refs, 1);
    if (start_batch(rc, ops, (size_t)n, &rc->t_finish) != GRPC_CALL_OK) rc_unref(rc);
}

/* One ModelStreamInferResponse: field 1 error_message, or field 2 the
 * packed ModelInferResponse, written on the wire directly. */
static grpc_byte_buffer *stream_message(const mcp_call *c)
{
    mcp_buf b = {0};
    const uint8_t *payload = c->status == MCP_STATUS_OK ? c->out.data : (const uint8_t *)c->message;
    size_t len = c->status == MCP_STATUS_OK ? c->out.len : strlen(c->message);
    uint8_t head[11];
    size_t h = 0;
    head[h++] = c->status == MCP_STATUS_OK ? 0x12 : 0x0a; /* (2 << 3) | 2, (1 << 3) | 2 */
    for (size_t v = len;; v >>= 7) {
        head[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        if (v <= 0x7f) break;
    }
    mcp_buf_append(&b, head, h);
    if (len) mcp_buf_append(&b, payload, len);
    grpc_byte_buffer *bb = b.failed ? NULL : buffer_of(&b);
    mcp_buf_free(&b);
    return bb;
}

/* Queues one response for writing (mu held); takes bb. */
static void stream_push(rpc_call *rc, grpc_byte_buffer *bb)
{
    stream_out *o = bb ? mcp_calloc(1, sizeof *o) : NULL;
    if (o) {
        o->msg = bb;
        if (rc->out_tail) rc->out_tail->next = o;
        else rc->out_head = o;
        rc->out_tail = o;
        rc->n_out++;
    } else if (bb) {
        grpc_byte_buffer_destroy(bb);
    }
    stream_try_write(rc);
}

/* An item's last response (bb, taken): the item leaves the stream. */
static void stream_item_end(stream_item *it, grpc_byte_buffer *bb)
{
    rpc_call *rc = it->rc;
    pthread_mutex_lock(&rc->mu);
    for (stream_item **p = &rc->items; *p; p = &(*p)->next)
        if (*p == it) {
            *p = it->next;
            break;
        }
    rc->inflight--;
    stream_push(rc, bb);
    stream_maybe_read(rc);
    stream_maybe_finish(rc);
    pthread_mutex_unlock(&rc->mu);
    /* A stream's answer is traced once queued for writing (its own write
     * is not waited for). */
    call_end(rc, &it->call, it->call.status == MCP_STATUS_OK ? GRPC_STATUS_OK : grpc_code(it->call.status), it->t_recv_ns,
             it->gen, it);
    mcp_call_clear(&it->call);
    grpc_slice_unref(it->body);
    if (it->reserved) mcp_frontend_release_body(rc->s->fe, it->reserved);
    mcp_gen_request_release(it->gen);
    mcp_free(it);
    rc_unref(rc); /* the item's reference */
}

static void stream_respond(mcp_call *c)
{
    stream_item *it = c->user;
    if (c->status != MCP_STATUS_OK && !c->message[0]) snprintf(c->message, sizeof c->message, "%s", mcp_status_str(c->status));
    stream_item_end(it, stream_message(c));
}

/* ---- ModelStreamInfer for generative models ----
 *
 * A request to a generative model (text_input, BYTES, one element; the
 * sampling settings as request parameters) gets one response per piece of
 * text, each with output text_output, then a last response without outputs
 * whose parameters say triton_final_response, finish_reason and the token
 * counts; an error ends it with error_message instead. */

/* The top-level model_name (1) and model_version (2) of a packed
 * ModelInferRequest, without unpacking the rest; false when malformed. */
static bool peek_model(const uint8_t *p, size_t n, char *name, size_t ncap, char *version, size_t vcap)
{
    name[0] = version[0] = '\0';
    size_t i = 0;
    while (i < n) {
        uint64_t key = 0;
        for (int sh = 0; i < n && sh < 64; sh += 7) {
            key |= (uint64_t)(p[i] & 0x7f) << sh;
            if (!(p[i++] & 0x80)) break;
        }
        unsigned wt = key & 7, field = (unsigned)(key >> 3);
        uint64_t len = 0;
        if (wt == 0) {
            while (i < n && (p[i++] & 0x80)) {}
            continue;
        }
        if (wt == 1 || wt == 5) {
            i += wt == 1 ? 8 : 4;
            continue;
        }
        if (wt != 2) return false;
        for (int sh = 0; i < n && sh < 64; sh += 7) {
            len |= (uint64_t)(p[i] & 0x7f) << sh;
            if (!(p[i++] & 0x80)) break;
        }
        if (len > n - i) return false;
        if (field == 1 || field == 2) {
            char *dst = field == 1 ? name : version;
            size_t cap = field == 1 ? ncap : vcap;
            if (len >= cap) return false;
            memcpy(dst, p + i, len);
            dst[len] = '\0';
        }
        i += len;
    }
    return name[0] != '\0';
}

static void set_param(Inference__ModelInferResponse__ParametersEntry *e, Inference__InferParameter *v, const char *key)
{
    inference__model_infer_response__parameters_entry__init(e);
    e->key = (char *)key;
    e->value = v;
}

/* A token's text, or the last response (text NULL): a packed
 * ModelStreamInferResponse. */
static grpc_byte_buffer *gen_message(const stream_item *it, const char *text, size_t len, const mcp_gen_event *done)
{
    Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    r.model_name = (char *)it->model;
    r.model_version = (char *)it->version;
    r.id = (char *)it->id;
    Inference__ModelInferResponse__InferOutputTensor out = INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
    Inference__ModelInferResponse__InferOutputTensor *outs[1] = {&out};
    int64_t shape[1] = {1};
    uint8_t *raw = NULL;
    ProtobufCBinaryData raw_bd;
    Inference__InferParameter pv[4];
    Inference__ModelInferResponse__ParametersEntry pe[4];
    Inference__ModelInferResponse__ParametersEntry *pp[4];
    if (text) {
        out.name = (char *)"text_output";
        out.datatype = (char *)"BYTES";
        out.n_shape = 1;
        out.shape = shape;
        raw = mcp_malloc(len + 4);
        if (!raw) return NULL;
        uint32_t l32 = (uint32_t)len;
        memcpy(raw, &l32, 4); /* little-endian length, then the bytes */
        if (len) memcpy(raw + 4, text, len);
        raw_bd.data = raw;
        raw_bd.len = len + 4;
        r.n_outputs = 1;
        r.outputs = outs;
        r.n_raw_output_contents = 1;
        r.raw_output_contents = &raw_bd;
    } else {
        for (int i = 0; i < 4; i++) {
            inference__infer_parameter__init(&pv[i]);
            pp[i] = &pe[i];
        }
        pv[0].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
        pv[0].bool_param = 1;
        set_param(&pe[0], &pv[0], "triton_final_response");
        pv[1].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
        pv[1].string_param = (char *)(done->finish_reason ? done->finish_reason : "stop");
        set_param(&pe[1], &pv[1], "finish_reason");
        pv[2].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
        pv[2].int64_param = done->prompt_tokens;
        set_param(&pe[2], &pv[2], "prompt_tokens");
        pv[3].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
        pv[3].int64_param = done->completion_tokens;
        set_param(&pe[3], &pv[3], "completion_tokens");
        r.n_parameters = 4;
        r.parameters = pp;
    }
    Inference__ModelStreamInferResponse m = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    m.infer_response = &r;
    grpc_byte_buffer *bb = buffer_of_message(&m);
    mcp_free(raw);
    return bb;
}

static grpc_byte_buffer *error_message(const char *msg)
{
    Inference__ModelStreamInferResponse m = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    m.error_message = (char *)msg;
    return buffer_of_message(&m);
}

/* The step thread's events. */
static void gen_event(mcp_gen_request *r, const mcp_gen_event *e)
{
    stream_item *it = r->user;
    rpc_call *rc = it->rc;
    if (e->kind == MCP_GEN_TOKEN) {
        if (!e->len) return;
        grpc_byte_buffer *bb = gen_message(it, e->text, e->len, NULL);
        pthread_mutex_lock(&rc->mu);
        stream_push(rc, bb);
        pthread_mutex_unlock(&rc->mu);
        return;
    }
    char msg[600];
    if (e->status != MCP_STATUS_OK)
        snprintf(msg, sizeof msg, "%s", e->message && e->message[0] ? e->message : mcp_status_str(e->status));
    stream_item_end(it, e->status == MCP_STATUS_OK ? gen_message(it, NULL, 0, e) : error_message(msg));
}

/* One generation parameter as JSON, for the checks the HTTP APIs share. */
static json_t *param_json(const Inference__InferParameter *p)
{
    switch (p->parameter_choice_case) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM: return json_boolean(p->bool_param);
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM: return json_integer(p->int64_param);
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM:
        return p->uint64_param <= INT64_MAX ? json_integer((json_int_t)p->uint64_param) : json_real((double)p->uint64_param);
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM: return json_real(p->double_param);
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM: return json_string(p->string_param);
    default: return json_null();
    }
}

/* Reads the request into r; false with msg set when it is not one. */
static bool gen_request(const Inference__ModelInferRequest *q, const mcp_model_version *v, mcp_gen_request *r, char *msg,
                        size_t cap)
{
    const ProtobufCBinaryData *text = NULL;
    ProtobufCBinaryData tail;
    for (size_t i = 0; i < q->n_inputs; i++) {
        const Inference__ModelInferRequest__InferInputTensor *t = q->inputs[i];
        if (strcmp(t->name, "text_input") != 0) {
            snprintf(msg, cap, "input '%.100s' is not an input of generative model '%s' (its input is text_input)", t->name,
                     v->name);
            return false;
        }
        int64_t elems = 1;
        for (size_t d = 0; d < t->n_shape; d++) elems *= t->shape[d] >= 0 ? t->shape[d] : 2;
        if (strcmp(t->datatype, "BYTES") != 0 || elems != 1) {
            snprintf(msg, cap, "input 'text_input' must be BYTES with one element (the prompt)");
            return false;
        }
        if (q->n_raw_input_contents > i) {
            const ProtobufCBinaryData *raw = &q->raw_input_contents[i];
            uint32_t l32 = 0;
            if (raw->len < 4 || (memcpy(&l32, raw->data, 4), (size_t)l32 != raw->len - 4)) {
                snprintf(msg, cap, "input 'text_input': raw contents must be one 4-byte length and that many bytes");
                return false;
            }
            tail.data = raw->data + 4;
            tail.len = raw->len - 4;
            text = &tail;
            r->prompt_len = tail.len;
            r->prompt = mcp_malloc(tail.len + 1);
            if (r->prompt) memcpy(r->prompt, tail.data, tail.len), r->prompt[tail.len] = '\0';
        } else if (t->contents && t->contents->n_bytes_contents == 1) {
            text = &t->contents->bytes_contents[0];
            r->prompt_len = text->len;
            r->prompt = mcp_malloc(text->len + 1);
            if (r->prompt) memcpy(r->prompt, text->data, text->len), r->prompt[text->len] = '\0';
        }
    }
    if (!text) {
        snprintf(msg, cap, "input 'text_input' (BYTES, the prompt) is missing");
        return false;
    }
    if (!r->prompt) {
        snprintf(msg, cap, "out of memory");
        return false;
    }
    for (size_t i = 0; i < q->n_parameters; i++) {
        const char *key = q->parameters[i]->key;
        if (!q->parameters[i]->value) continue;
        json_t *val = param_json(q->parameters[i]->value);
        mcp_err err = {msg, cap};
        int p = val ? mcp_gen_param(!strcmp(key, "stop_words") ? "stop" : key, val, &v->desc->generation, r, &err) : -1;
        json_decref(val);
        if (p < 0) return false;
        if (p == 0 && strcmp(key, "stream") != 0) {
            snprintf(msg, cap, "unknown generate parameter '%.100s' (known: max_tokens, temperature, top_p, top_k, min_p, "
                               "repetition_penalty, presence_penalty, frequency_penalty, seed, stop)", key);
            return false;
        }
    }
    return true;
}

/* Starts a stream item for a generative model; its responses come from
 * the step thread. */
/* The prefix-cache key of the caller's tenant: the authenticated one's;
 * on a server without access rules, the `tenant` metadata t (NULL: the
 * anonymous tenant). false when t is malformed. */
static bool cache_key(rpc_call *rc, const char *t, uint8_t key[32])
{
    mcp_frontend *fe = rc->s->fe;
    if (rc->who.authenticated) return mcp_frontend_tenant_key(fe, rc->who.tenant, strlen(rc->who.tenant), key);
    if (mcp_frontend_auth_enabled(fe)) t = NULL;
    return mcp_frontend_tenant_key(fe, t ? t : "", t ? strlen(t) : 0, key);
}

static void stream_generate(rpc_call *rc, stream_item *it, mcp_model_version *v)
{
    mcp_frontend *fe = rc->s->fe;
    char msg[600] = "";
    snprintf(it->model, sizeof it->model, "%s", v->name);
    snprintf(it->version, sizeof it->version, "%s", v->version);
    trace_start(rc, &it->call, it->t_recv_ns);
    mcp_frontend_trace_routed(fe, &it->call, v);
    Inference__ModelInferRequest *q = inference__model_infer_request__unpack(
        NULL, GRPC_SLICE_LENGTH(it->body), GRPC_SLICE_START_PTR(it->body));
    mcp_gen_request *r = mcp_gen_request_create(v);
    char tenant[MCP_TENANT_MAX + 2];
    const char *t = md_value(&rc->md, "tenant", tenant, sizeof tenant);
    bool ok = false;
    if (!q) snprintf(msg, sizeof msg, "the message is not a valid ModelInferRequest");
    else if (!r) snprintf(msg, sizeof msg, "out of memory");
    else if (!cache_key(rc, t, r->cache_key)) snprintf(msg, sizeof msg, "metadata 'tenant' must be " MCP_TENANT_RULE);
    else ok = gen_request(q, v, r, msg, sizeof msg);
    if (q) snprintf(it->id, sizeof it->id, "%s", q->id);
    if (q) inference__model_infer_request__free_unpacked(q, NULL);
    mcp_model_version_release(v);
    if (!ok) {
        mcp_gen_request_release(r);
        stream_item_end(it, error_message(msg));
        return;
    }
    int64_t call_deadline = deadline_ns_of(rc->deadline);
    if (call_deadline && (!r->deadline_ns || call_deadline < r->deadline_ns)) r->deadline_ns = call_deadline;
    r->on_event = gen_event;
    r->user = it;
    pthread_mutex_lock(&rc->mu);
    it->gen = mcp_gen_request_retain(r); /* for a cancel */
    pthread_mutex_unlock(&rc->mu);
    int submitted = 0;
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_frontend_generate(fe, &rc->who, rc->peer, it->model, it->version, &r, 1, &submitted, NULL, 0, &err);
    mcp_gen_request_release(r);
    if (st != MCP_STATUS_OK) stream_item_end(it, error_message(msg));
}

/* Starts the next write when none is in flight (mu held). */
static void stream_try_write(rpc_call *rc)
{
    if (rc->writing || !rc->out_head || rc->finished) return;
    stream_out *o = rc->out_head;
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    int n = stream_initial_metadata(rc, ops);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = o->msg;
    rc->writing = true;
    atomic_fetch_add(&rc->refs, 1);
    if (start_batch(rc, ops, (size_t)n, &rc->t_write) != GRPC_CALL_OK) {
        rc->writing = false;
        atomic_fetch_sub(&rc->refs, 1);
    }
}

static void stream_post_recv(rpc_call *rc)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &rc->recv_buf;
    rc->reading = true;
    atomic_fetch_add(&rc->refs, 1);
    if (start_batch(rc, &op, 1, &rc->t_recv) != GRPC_CALL_OK) {
        rc->reading = false;
        rc->read_done = true;
        atomic_fetch_sub(&rc->refs, 1);
    }
}

/* A message arrived on the stream (or the client half-closed: NULL). */
static void stream_on_recv(rpc_call *rc, bool ok)
{
    int64_t t_recv = mcp_now_ns();
    pthread_mutex_lock(&rc->mu);
    rc->reading = false;
    grpc_byte_buffer *bb = rc->recv_buf;
    rc->recv_buf = NULL;
    if (!ok || !bb) {
        rc->read_done = true;
        stream_maybe_finish(rc);
        pthread_mutex_unlock(&rc->mu);
        if (bb) grpc_byte_buffer_destroy(bb);
        return;
    }
    stream_item *it = mcp_calloc(1, sizeof *it);
    if (!it) {
        /* No item to answer through: end the stream rather than leave the
         * client waiting for an answer that never comes. */
        rc->read_done = true;
        rc->finished = true;
        pthread_mutex_unlock(&rc->mu);
        grpc_byte_buffer_destroy(bb);
        grpc_call_cancel_with_status(rc->call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL);
        return;
    }
    it->rc = rc;
    it->t_recv_ns = t_recv;
    it->body = read_payload(bb);
    it->next = rc->items;
    rc->items = it;
    rc->inflight++;
    atomic_fetch_add(&rc->refs, 1);
    stream_maybe_read(rc);
    pthread_mutex_unlock(&rc->mu);
    grpc_byte_buffer_destroy(bb);
    mcp_frontend *fe = rc->s->fe;
    char name[256], version[128];
    if (peek_model(GRPC_SLICE_START_PTR(it->body), GRPC_SLICE_LENGTH(it->body), name, sizeof name, version,
                   sizeof version)) {
        mcp_status st;
        char msg[300];
        mcp_err err = {msg, sizeof msg};
        /* A model the caller may neither infer nor generate on goes the
         * inference way, which answers as for an unknown model. */
        bool may = mcp_frontend_may(fe, &rc->who, rc->peer, MCP_ACT_GENERATE, name);
        mcp_model_version *v = may ? mcp_frontend_route_model(fe, name, version[0] ? version : NULL, &st, &err) : NULL;
        if (v && v->llm) {
            stream_generate(rc, it, v);
            return;
        }
        mcp_model_version_release(v);
    }
    mcp_call *c = &it->call;
    trace_start(rc, c, t_recv);
    c->codec = mcp_codec_get(MCP_PROTOCOL_GRPC);
    c->wire = (mcp_wire){.body = GRPC_SLICE_START_PTR(it->body), .len = GRPC_SLICE_LENGTH(it->body), .header_len = -1};
    c->deadline_ns = deadline_ns_of(rc->deadline);
    c->respond = stream_respond;
    c->on_queued = stream_on_queued;
    c->user = it;
    c->who = rc->who;
    c->peer = rc->peer;
    size_t len = GRPC_SLICE_LENGTH(it->body);
    if (len && !mcp_frontend_reserve_body(fe, len)) {
        c->status = MCP_STATUS_RESOURCE_EXHAUSTED;
        snprintf(c->message, sizeof c->message, "the server holds the most request bytes it allows; retry later");
        stream_respond(c);
        return;
    }
    it->reserved = len;
    if (!mcp_frontend_admit(fe)) {
        c->status = MCP_STATUS_UNAVAILABLE;
        snprintf(c->message, sizeof c->message, "server is shutting down");
        stream_respond(c);
        return;
    }
    mcp_frontend_count_open(fe, 1);
    mcp_frontend_infer(fe, c);
    mcp_frontend_routed(fe);
    mcp_frontend_count_open(fe, -1);
}

static void stream_on_write(rpc_call *rc, bool ok)
{
    pthread_mutex_lock(&rc->mu);
    rc->writing = false;
    stream_out *o = rc->out_head;
    if (o) {
        rc->out_head = o->next;
        if (!rc->out_head) rc->out_tail = NULL;
        rc->n_out--;
        grpc_byte_buffer_destroy(o->msg);
        mcp_free(o);
    }
    if (!ok) { /* the client is gone: nothing more will be written */
        for (stream_out *x = rc->out_head, *n; x; x = n) {
            n = x->next;
            grpc_byte_buffer_destroy(x->msg);
            mcp_free(x);
        }
        rc->out_head = rc->out_tail = NULL;
        rc->n_out = 0;
        rc->finished = true;
    }
    stream_try_write(rc);
    stream_maybe_read(rc);
    stream_maybe_finish(rc);
    pthread_mutex_unlock(&rc->mu);
}

static void do_stream(rpc_call *rc)
{
    pthread_mutex_lock(&rc->mu);
    stream_post_recv(rc);
    pthread_mutex_unlock(&rc->mu);
}

/* ---- the poller ---- */

static void on_close(rpc_call *rc)
{
    pthread_mutex_lock(&rc->mu);
    rc->closed = true;
    if (rc->cancelled) {
        if (rc->infer_queued && rc->infer.req) atomic_store(&rc->infer.req->cancel, true);
        for (stream_item *it = rc->items; it; it = it->next) {
            if (it->queued && it->call.req) atomic_store(&it->call.req->cancel, true);
            if (it->gen) atomic_store(&it->gen->cancel, true);
        }
    }
    pthread_mutex_unlock(&rc->mu);
}

/* RECV_CLOSE_ON_SERVER first: a cancel is seen whatever happens next. Its
 * completion gets a reference of its own (it may come on another poller
 * while this one still handles the call). False when the call is gone
 * (the TAG_NEW reference is dropped then). */
static bool post_close(rpc_call *rc)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &rc->cancelled;
    atomic_fetch_add(&rc->refs, 1);
    if (start_batch(rc, &op, 1, &rc->t_close) == GRPC_CALL_OK) return true;
    atomic_fetch_sub(&rc->refs, 1);
    rc_unref(rc);
    return false;
}

static void handle_new(rpc_call *rc);

static void on_new(rpc_call *rc, bool ok)
{
    mcp_grpc_server *s = rc->s;
    if (!ok) { /* the server is shutting down */
        rc_unref(rc);
        return;
    }
    rc->t_new_ns = mcp_now_ns();
    request_call(s, rc->kind); /* keep CALLS_PER_METHOD requested */
    if (!post_close(rc)) return;
    handle_new(rc);
    rc_unref(rc); /* the TAG_NEW reference, held while handling */
}

/* Where a call comes from, by gRPC's peer string ("ipv4:127.0.0.1:5000",
 * "ipv6:[::1]:5000", "unix:/run/mcp.sock"). */
static mcp_peer call_peer(grpc_call *call)
{
    char *p = grpc_call_get_peer(call);
    mcp_peer peer = MCP_PEER_REMOTE;
    if (!p) return peer;
    if (!strncmp(p, "unix:", 5) || !strncmp(p, "unix-abstract:", 14)) peer = MCP_PEER_LOCAL;
    else if (!strncmp(p, "ipv4:127.", 9) || !strncmp(p, "ipv6:[::1]:", 11) || !strncmp(p, "ipv6:[::ffff:127.", 17))
        peer = MCP_PEER_LOOPBACK;
    gpr_free(p);
    return peer;
}

/* Who is calling (its authorization metadata) and whether its roles allow
 * the method at all, before its message is read; false when answered.
 * Calls that name a model are checked on it too, once it is known. */
static bool call_access(rpc_call *rc)
{
    mcp_frontend *fe = rc->s->fe;
    rc->peer = call_peer(rc->call);
    char auth[MCP_AUTH_TOKEN_MAX + 16], msg[400];
    mcp_err err = {msg, sizeof msg};
    /* A client certificate gRPC verified during the handshake. */
    mcp_tls_peer cert = {0};
    if (rc->s->opts.tls && rc->peer != MCP_PEER_LOCAL) mcp_tls_grpc_peer(rc->call, &cert);
    mcp_status st = mcp_frontend_authenticate(fe, md_value(&rc->md, "authorization", auth, sizeof auth),
                                              cert.verified ? cert.cn : NULL, rc->peer, &rc->who, &err);
    explicit_bzero(auth, sizeof auth);
    /* Methods on a model are decided on it (a model the caller may not
     * know of answers NOT_FOUND whatever its roles); the others here, and
     * the anonymous caller for all. */
    if (st == MCP_STATUS_OK && mcp_frontend_auth_enabled(fe) && (!rpcs[rc->kind].on_model || !rc->who.authenticated))
        st = mcp_frontend_allow(fe, &rc->who, rc->peer, rpcs[rc->kind].act, NULL, &err);
    if (st == MCP_STATUS_OK) return true;
    finish_status(rc, st, msg);
    return false;
}

/* The call's first answer-independent work, on the poller (a reference held). */
static void handle_new(rpc_call *rc)
{
    mcp_grpc_server *s = rc->s;
    if (!call_access(rc)) return;
    if (!rpcs[rc->kind].streaming) {
        rc->body = read_payload(rc->payload);
        if (rc->payload) grpc_byte_buffer_destroy(rc->payload);
        rc->payload = NULL;
        /* Request bytes held count against the same cap as HTTP bodies. */
        size_t len = GRPC_SLICE_LENGTH(rc->body);
        if (len && !mcp_frontend_reserve_body(s->fe, len)) {
            finish_status(rc, MCP_STATUS_RESOURCE_EXHAUSTED, "the server holds the most request bytes it allows; retry later");
            return;
        }
        rc->reserved = len;
    }
    switch (rc->kind) {
    case RPC_LIVE: do_live(rc); break;
    case RPC_READY: do_ready(rc); break;
    case RPC_MODEL_READY: do_model_ready(rc); break;
    case RPC_SERVER_METADATA: do_server_metadata(rc); break;
    case RPC_MODEL_METADATA: do_model_metadata(rc); break;
    case RPC_INFER: do_infer(rc); break;
    case RPC_STREAM_INFER: do_stream(rc); break;
    case RPC_CONFIG: do_config(rc); break;
    case RPC_STATISTICS: do_statistics(rc); break;
    case RPC_INDEX: do_index(rc); break;
    case RPC_LOAD: do_load(rc); break;
    case RPC_UNLOAD: do_unload(rc); break;
    case RPC_ROLLOUT_STATUS: do_rollout_status(rc); break;
    case RPC_ROLLOUT: do_rollout(rc); break;
    case RPC_HEALTH_CHECK: do_health(rc); break;
    case RPC_HEALTH_WATCH:
    case RPC_COUNT: finish_unary(rc, GRPC_STATUS_UNIMPLEMENTED, NULL, "not implemented by this server"); break;
    }
}

static void on_unknown(rpc_call *rc, bool ok)
{
    mcp_grpc_server *s = rc->s;
    if (!ok) {
        rc_unref(rc);
        return;
    }
    request_unknown(s);
    if (!post_close(rc)) return;
    char msg[512];
    snprintf(msg, sizeof msg, "unknown method %.*s", (int)GRPC_SLICE_LENGTH(rc->details.method),
             (const char *)GRPC_SLICE_START_PTR(rc->details.method));
    finish_unary(rc, GRPC_STATUS_UNIMPLEMENTED, NULL, msg);
    rc_unref(rc); /* the TAG_NEW reference */
}

static void *poll_main(void *arg)
{
    mcp_grpc_server *s = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
        if (ev.type != GRPC_OP_COMPLETE) continue;
        rpc_tag *t = ev.tag;
        rpc_call *rc = t->rc;
        switch (t->kind) {
        case TAG_NEW: on_new(rc, ev.success); break;
        case TAG_UNKNOWN: on_unknown(rc, ev.success); break;
        case TAG_CLOSE:
            on_close(rc);
            rc_unref(rc);
            break;
        case TAG_FINISH:
            call_end(rc, rc->kind == RPC_INFER ? &rc->infer : NULL, rc->code, rc->t_new_ns, NULL, NULL);
            rc_unref(rc);
            break;
        case TAG_RECV:
            stream_on_recv(rc, ev.success);
            rc_unref(rc);
            break;
        case TAG_WRITE:
            stream_on_write(rc, ev.success);
            rc_unref(rc);
            break;
        case TAG_SHUTDOWN: atomic_store(&s->shutdown_done, true); break;
        }
    }
    return NULL;
}

/* ---- lifecycle ---- */

void mcp_grpc_library_init(void)
{
    /* Debian builds abseil, which gRPC core locks with, without NDEBUG, so
     * absl::Mutex runs its deadlock detector: every lock and unlock updates
     * a global lock-order graph (measured: about 15% of the server's CPU
     * per unary call), and a cycle it suspects aborts the process. Builds
     * of gRPC for production have it off; so does this server, through
     * abseil's own switch (absl::SetMutexDeadlockDetectionMode(kIgnore),
     * kIgnore = 0), when the library exports it under one of these names. */
    static const char *const names[] = {
        "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE",
        "_ZN4absl29SetMutexDeadlockDetectionModeENS_15OnDeadlockCycleE",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *sym = dlsym(RTLD_DEFAULT, names[i]);
        if (!sym) continue;
        void (*set_mode)(int);
        memcpy(&set_mode, &sym, sizeof set_mode);
        set_mode(0);
        break;
    }
    grpc_init();
}

mcp_status mcp_grpc_create(const mcp_grpc_options *o, mcp_frontend *fe, mcp_grpc_server **out, mcp_err *err)
{
    *out = NULL;
    mcp_grpc_server *s = mcp_calloc(1, sizeof *s);
    if (!s) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    s->opts = o ? *o : mcp_grpc_options_default();
    if (s->opts.threads < 1) s->opts.threads = 1;
    if (s->opts.threads > 64) s->opts.threads = 64;
    s->fe = fe;
    s->t_shutdown = (rpc_tag){TAG_SHUTDOWN, NULL};
    pthread_rwlock_init(&s->ops_lock, NULL);
    mcp_grpc_library_init();
    *out = s;
    return MCP_STATUS_OK;
}

mcp_status mcp_grpc_start(mcp_grpc_server *s, mcp_err *err)
{
    int max_msg = s->opts.max_message_bytes > INT32_MAX ? INT32_MAX : (int)s->opts.max_message_bytes;
    /* gRPC reads a message before a call for it is matched and before the
     * serving core counts it: its own memory is bounded too, by a quota of
     * the core's cap on request bytes plus room for connections. */
    size_t cap = mcp_frontend_body_cap(s->fe);
    grpc_resource_quota *quota = grpc_resource_quota_create("mcp2026-grpc");
    if (!quota) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot create the gRPC server");
    grpc_resource_quota_resize(quota, (cap ? cap : (size_t)1 << 30) + ((size_t)256 << 20));
    grpc_arg args[] = {
        {GRPC_ARG_POINTER, GRPC_ARG_RESOURCE_QUOTA, {.pointer = {quota, grpc_resource_quota_arg_vtable()}}},
        /* Streams per connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_CONCURRENT_STREAMS, {.integer = 1024}},
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = max_msg}},
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = max_msg}},
        {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIME_MS, {.integer = s->opts.keepalive_time_ms}},
        {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIMEOUT_MS, {.integer = s->opts.keepalive_timeout_ms}},
        {GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
         {.integer = s->opts.min_client_ping_interval_ms}},
        {GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_MAX_PING_STRIKES, {.integer = 2}},
        /* A port in use is an error, not a port shared with whoever has it. */
        {GRPC_ARG_INTEGER, GRPC_ARG_ALLOW_REUSEPORT, {.integer = 0}},
    };
    grpc_channel_args ca = {sizeof args / sizeof args[0], args};
    s->server = grpc_server_create(&ca, NULL);
    grpc_resource_quota_unref(quota); /* the server holds its own reference */
    s->cq = grpc_completion_queue_create_for_next(NULL);
    if (!s->server || !s->cq) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot create the gRPC server");
    grpc_server_register_completion_queue(s->server, s->cq, NULL);
    for (int k = 0; k < RPC_COUNT; k++) {
        s->methods[k] = grpc_server_register_method(s->server, rpcs[k].path, NULL,
                                                    rpcs[k].streaming ? GRPC_SRM_PAYLOAD_NONE
                                                                      : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
                                                    0);
        if (!s->methods[k]) return mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot register gRPC method %s", rpcs[k].path);
    }
    char addr[1200];
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    int bound = 0;
    if (s->opts.socket_path) {
        mcp_status st = mcp_unix_prepare(s->opts.socket_path, err);
        if (st != MCP_STATUS_OK) {
            grpc_server_credentials_release(creds);
            return st;
        }
        snprintf(addr, sizeof addr, "unix:%s", s->opts.socket_path);
        bound = grpc_server_add_http2_port(s->server, addr, creds);
        if (bound <= 0) {
            grpc_server_credentials_release(creds);
            return mcp_err_set(err, MCP_STATUS_IO_ERROR, "gRPC cannot listen on %s", addr);
        }
    }
    if (s->opts.port >= 0 && (!s->opts.socket_path || s->opts.port > 0)) {
        const char *h = s->opts.host ? s->opts.host : "127.0.0.1";
        snprintf(addr, sizeof addr, strchr(h, ':') ? "[%s]:%d" : "%s:%d", h, s->opts.port);
        /* TLS on TCP when the server has certificates (the Unix socket
         * stays plain: its file mode guards it). */
        grpc_server_credentials *tcp_creds = s->opts.tls ? mcp_tls_grpc_credentials(s->opts.tls) : creds;
        if (!tcp_creds) {
            grpc_server_credentials_release(creds);
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "gRPC refused the TLS certificates");
        }
        s->port = grpc_server_add_http2_port(s->server, addr, tcp_creds);
        if (tcp_creds != creds) grpc_server_credentials_release(tcp_creds);
        bound = s->port;
    }
    grpc_server_credentials_release(creds);
    if (bound <= 0)
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "gRPC cannot listen on %s (port in use?)", addr);
    grpc_server_start(s->server);
    if (s->opts.socket_path) chmod(s->opts.socket_path, 0660);
    for (int k = 0; k < RPC_COUNT; k++)
        for (int i = 0; i < (k == RPC_INFER ? INFER_CALLS_AHEAD : CALLS_PER_METHOD); i++) request_call(s, (rpc_kind)k);
    for (int i = 0; i < 2; i++) request_unknown(s);
    for (int i = 0; i < s->opts.threads; i++)
        if (pthread_create(&s->threads[s->n_threads], NULL, poll_main, s) == 0) s->n_threads++;
    if (!s->n_threads) return mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot start gRPC threads");
    return MCP_STATUS_OK;
}

int mcp_grpc_port(const mcp_grpc_server *s) { return s->port; }

void mcp_grpc_shutdown(mcp_grpc_server *s)
{
    if (!s->server || atomic_exchange(&s->shutting_down, true)) return;
    /* No new RPCs; those in flight go on. The frontend's drain (by the
     * caller, or here) answers every admitted request, then up to 10 s
     * let the answers be written before the rest are cancelled. */
    grpc_server_shutdown_and_notify(s->server, s->cq, &s->t_shutdown);
    mcp_frontend_drain(s->fe);
    for (int i = 0; i < 1000 && !atomic_load(&s->shutdown_done); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    grpc_server_cancel_all_calls(s->server);
    for (int i = 0; i < 1000 && !atomic_load(&s->shutdown_done); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* Calls still live (a stream the client keeps open) end when cancelled. */
    for (int i = 0; i < 500 && atomic_load(&s->live) > 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* Answers still to come (a request the drain gave up on) are dropped
     * from here on instead of reaching a closed queue. */
    pthread_rwlock_wrlock(&s->ops_lock);
    s->cq_closed = true;
    pthread_rwlock_unlock(&s->ops_lock);
    grpc_completion_queue_shutdown(s->cq);
    for (int i = 0; i < s->n_threads; i++) pthread_join(s->threads[i], NULL);
    s->n_threads = 0;
    grpc_server_destroy(s->server);
    s->server = NULL;
    grpc_completion_queue_destroy(s->cq);
    s->cq = NULL;
    if (s->opts.socket_path) unlink(s->opts.socket_path); /* removed at exit */
}

void mcp_grpc_destroy(mcp_grpc_server *s)
{
    if (!s) return;
    if (s->server && !s->n_threads) { /* start failed before any thread ran */
        grpc_server_shutdown_and_notify(s->server, s->cq, &s->t_shutdown);
        grpc_server_cancel_all_calls(s->server);
        atomic_store(&s->shutting_down, true);
        /* Drain the queue here: requested calls come back unsuccessful. */
        for (;;) {
            grpc_event ev = grpc_completion_queue_next(s->cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                                                           gpr_time_from_millis(2000, GPR_TIMESPAN)),
                                                       NULL);
            if (ev.type != GRPC_OP_COMPLETE) break;
            rpc_tag *t = ev.tag;
            if (t->kind == TAG_SHUTDOWN) break;
            if (t->rc) rc_unref(t->rc);
        }
        grpc_server_destroy(s->server);
        s->server = NULL;
    }
    mcp_grpc_shutdown(s);
    if (s->cq) {
        grpc_completion_queue_shutdown(s->cq);
        while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(s->cq);
    }
    pthread_rwlock_destroy(&s->ops_lock);
    mcp_free(s);
    grpc_shutdown();
}
