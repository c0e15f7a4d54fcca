/*
 * serve: requests and their state machine, the scheduler (queues, dynamic
 * batcher, instance workers), protocol codecs, metrics and the HTTP
 * transport. Transports fill a request through a codec and get it back
 * through one completion callback; the scheduler never parses a protocol.
 */
#ifndef MCP_SERVE_H
#define MCP_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "registry/registry.h"
#include "tensor/tensor.h"

/* ---- requests ---- */

typedef enum mcp_protocol {
    MCP_PROTOCOL_V2 = 0, /* Open Inference Protocol v2 (KServe v2 / Triton) */
    MCP_PROTOCOL_V1,     /* KServe v1 */
    MCP_PROTOCOL_SIMPLE, /* quickstart POST /v1/infer */
    MCP_PROTOCOL_GRPC,   /* Open Inference Protocol v2 over gRPC (ModelInfer) */
    MCP_PROTOCOL_COUNT,
} mcp_protocol;

const char *mcp_protocol_name(mcp_protocol p); /* "v2", "v1", "simple", "grpc" */

/* Pending -> Running -> Succeeded | Failed -> Completed; Pending -> Cancelled |
 * TimedOut | Failed (rejected before running) -> Completed. */
typedef enum mcp_request_state {
    MCP_REQUEST_PENDING = 0,
    MCP_REQUEST_RUNNING,
    MCP_REQUEST_SUCCEEDED,
    MCP_REQUEST_FAILED,
    MCP_REQUEST_CANCELLED,
    MCP_REQUEST_TIMED_OUT,
    MCP_REQUEST_COMPLETED,
} mcp_request_state;

const char *mcp_request_state_name(mcp_request_state s);

/* A tensor of a request. Input data lives in the request's pool (the tensor
 * does not own it); output tensors own their data. */
typedef struct mcp_req_tensor {
    const char *name; /* external name (pool) */
    mcp_tensor t;
    bool binary;      /* outputs: send in binary form */
} mcp_req_tensor;

typedef struct mcp_request mcp_request;
typedef void (*mcp_request_done_fn)(mcp_request *r, void *user);

/*
 * One inference request. Reference-counted: the transport holds one
 * reference, the scheduler one while it is queued or running. Everything
 * the request carries (names, input data, ids) lives in `pool` and goes away
 * with the last reference.
 */
struct mcp_request {
    atomic_int refs;
    _Atomic int state;        /* mcp_request_state; change only via mcp_request_transition */
    atomic_bool cancel;       /* set by the transport when the client goes away */
    mcp_pool *pool;
    mcp_protocol protocol;
    const char *id;           /* may be NULL */
    const char *model_name;
    const char *model_version;/* NULL = current */
    mcp_model_version *model; /* retained once routed */
    int64_t priority;         /* lower = more urgent; 0 = default level */
    /* The caller's tenant ("" = anonymous; the identity's, never the
     * request's say) and its fair-queuing weight (> 0) and queued cap
     * (0 = none): the model queue serves tenants by weight. */
    char tenant[65];
    double weight;
    int64_t tenant_max_queued;
    int64_t timeout_us;       /* 0 = none */
    int64_t deadline_ns;      /* absolute mcp_now_ns() deadline, 0 = none */
    int n_inputs;
    mcp_req_tensor *inputs;
    /* Requested outputs (NULL names = all outputs). */
    int n_requested;
    const char **requested;
    bool *requested_binary;
    bool binary_default;      /* request parameter binary_data_output */
    bool raw_binary;          /* Inference-Header-Content-Length: 0 form */
    /* Results. */
    int n_outputs;
    mcp_req_tensor *outputs;
    mcp_status status;
    char error[512];
    /* Timing (mcp_now_ns): arrival, compute start and end; batch it ran in. */
    int64_t t_arrival_ns, t_start_ns, t_end_ns;
    /* The scheduler's stamps for traces: queued, formed into a batch, its
     * inputs gathered (the engine starts), outputs delivered. */
    int64_t t_queued_ns, t_batched_ns, t_gathered_ns, t_done_ns;
    int batch_size;
    /* The rollout it was routed under (retained; NULL = none) and its role
     * there, so its outcome counts in the right window. */
    mcp_route_watch *watch;
    mcp_route_role route_role;
    /* Completion: called exactly once, from whichever thread finishes it. */
    mcp_request_done_fn done;
    void *done_user;
};

mcp_request *mcp_request_create(mcp_protocol protocol);
mcp_request *mcp_request_retain(mcp_request *r);
void mcp_request_release(mcp_request *r);

/* Moves the request to `to`; an illegal transition is a bug and asserts.
 * Returns false (and changes nothing) when the request is already in a
 * final state, so racing completers (timeout vs worker) resolve safely. */
bool mcp_request_transition(mcp_request *r, mcp_request_state to);

/* Fails the request (status + message) and completes it: Failed ->
 * Completed, then calls done. Use for errors before or after scheduling. */
void mcp_request_fail(mcp_request *r, mcp_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Succeeded/Failed/Cancelled/TimedOut -> Completed, then calls done. */
void mcp_request_complete(mcp_request *r);

/* Checks the request's inputs against the model (names, dtypes, shapes,
 * batch size) and maps external names to graph names. The message names the
 * tensor. */
mcp_status mcp_request_validate(mcp_request *r, const mcp_model_version *m, mcp_err *err);

/* HTTP status for a request status: 400, 404, 413, 429, 499, 500, 501, 503, 504. */
int mcp_status_http_code(mcp_status s);

/* ---- metrics ---- */

typedef struct mcp_metrics mcp_metrics;

mcp_metrics *mcp_metrics_create(void);
void mcp_metrics_destroy(mcp_metrics *m);
/* Every finished request (HTTP code per protocol) */
void mcp_metrics_request(mcp_metrics *m, const char *model, const char *version, mcp_protocol p, int code);
/* mcp_inference_errors_total{model,reason}; reason e.g. "invalid_input", "queue_full", "timeout". */
/* The reason a status counts as ("internal" for any other). */
const char *mcp_metrics_reason(mcp_status st);
void mcp_metrics_error(mcp_metrics *m, const char *model, const char *reason);
void mcp_metrics_latency(mcp_metrics *m, const char *model, const char *version, int64_t queue_ns,
                         int64_t compute_ns, int64_t total_ns);
void mcp_metrics_batch(mcp_metrics *m, const char *model, const char *version, int batch_size);
void mcp_metrics_inflight_add(mcp_metrics *m, int delta);
/* mcp_shadow_comparisons_total{model,version,outcome} and
 * mcp_rollout_gate_trips_total{model,version,gate}. */
typedef enum mcp_rollout_event {
    MCP_SHADOW_AGREED,
    MCP_SHADOW_DISAGREED,
    MCP_SHADOW_FAILED,  /* the shadow's answer was an error */
    MCP_SHADOW_DROPPED, /* its queue was full: no copy ran */
    MCP_GATE_CANARY_ERRORS,
    MCP_GATE_CANARY_P99,
    MCP_GATE_SHADOW_DEVIATION,
    MCP_MODEL_COLD_START, /* mcp_cold_starts_total{model} */
    MCP_MODEL_EVICTED,    /* mcp_model_evictions_total{model} */
    MCP_ROLLOUT_EVENT_COUNT,
} mcp_rollout_event;
void mcp_metrics_rollout(mcp_metrics *m, const char *model, const char *version, mcp_rollout_event ev);
/* The series of a new canary (shadow false) or shadow, at 0. */
void mcp_metrics_declare_rollout(mcp_metrics *m, const char *model, const char *version, bool shadow);
/* An evicted model loaded again for a request, and how long it took. */
void mcp_metrics_cold_start(mcp_metrics *m, const char *model, int64_t ns);
/* The memory policy unloaded an idle model. */
void mcp_metrics_evicted(mcp_metrics *m, const char *model);
/* Creates a ready model's series at 0: requests per protocol (code 200),
 * errors per reason, and its histograms. */
void mcp_metrics_declare_model(mcp_metrics *m, const char *model, const char *version);
/* Gauges sampled at render time through this callback. */
/* Body bytes of one inference request and its answer. */
void mcp_metrics_bytes(mcp_metrics *m, const char *model, const char *version, int64_t request, int64_t response);
/* A model load (apply, hot swap) or unload and how long it took. */
void mcp_metrics_model_op(mcp_metrics *m, const char *model, bool unload, bool ok, int64_t ns);
/* A generative model version's histograms (seconds). */
typedef enum mcp_gen_metric { MCP_GEN_METRIC_TTFT, MCP_GEN_METRIC_ITL, MCP_GEN_METRIC_E2E } mcp_gen_metric;
void mcp_metrics_generation(mcp_metrics *m, const char *model, const char *version, mcp_gen_metric which, int64_t ns);
void mcp_metrics_declare_generation(mcp_metrics *m, const char *model, const char *version);
/* What a generative version's engine counts, sampled at render time. */
typedef struct mcp_metrics_gen_gauges {
    char model[256], version[128];
    int64_t running, waiting, requests, prompt_tokens, generated_tokens, preemptions;
    int64_t kv_used_blocks, kv_total_blocks, kv_cached_blocks, kv_block_bytes, kv_evictions;
    int64_t cache_queries, cache_hits;
} mcp_metrics_gen_gauges;
/* A served version's queue and memory, sampled at render time. */
typedef struct mcp_metrics_version_gauges {
    char model[256], version[128];
    int64_t queue_depth, queue_capacity, memory_bytes;
} mcp_metrics_version_gauges;
typedef struct mcp_metrics_gauges {
    mcp_metrics_gen_gauges *gen; /* n_gen of them (mcp_malloc; the renderer frees) */
    int n_gen;
    mcp_metrics_version_gauges *versions; /* n_versions of them (mcp_malloc; the renderer frees) */
    int n_versions;
    int loaded_models;
    size_t model_memory_bytes;
    int64_t queue_depth; /* all models */
    int64_t http_requests_open; /* HTTP requests whose headers arrived, not yet answered */
    int64_t http_connections;   /* open HTTP connections */
    int64_t body_bytes_held;    /* request body bytes read and held, counted against the cap */
} mcp_metrics_gauges;
typedef void (*mcp_metrics_sample_fn)(void *user, mcp_metrics_gauges *g);
void mcp_metrics_set_sampler(mcp_metrics *m, mcp_metrics_sample_fn fn, void *user);
/* Prometheus text format 0.0.4. */
void mcp_metrics_render(mcp_metrics *m, mcp_buf *out);
/* A rendered exposition with the samples whose `model` or `tenant` label
 * keep() refuses left out (one caller's view of a multi-tenant server). */
typedef bool (*mcp_metrics_keep_fn)(void *user, const char *label, const char *value);
void mcp_metrics_filter(const char *text, size_t len, mcp_metrics_keep_fn keep, void *user, mcp_buf *out);
/* A request of an authenticated tenant (cls: its priority class). */
void mcp_metrics_tenant_request(mcp_metrics *m, const char *tenant, const char *cls, int code);
/* A label value in quotes, escaped as the text format requires (backslash,
 * double quote, line feed; bytes that are not UTF-8 become U+FFFD): for
 * families rendered beside these (output monitoring). */
void mcp_metrics_label_value(mcp_buf *out, const char *s);
/* A read-only snapshot of one model version's series, for views other than
 * Prometheus (the status page): requests answered (every protocol and
 * code, as mcp_requests_total counts them), those answered with a code of
 * 400 or more, and the mcp_request_duration_seconds histogram per bucket
 * (not cumulative; the last holds what passed every bound). model and
 * version point into the registry and stay valid until
 * mcp_metrics_destroy. */
#define MCP_METRICS_LATENCY_BUCKETS 19
typedef struct mcp_metrics_version_snapshot {
    const char *model, *version;
    uint64_t requests, errors;
    uint64_t latency[MCP_METRICS_LATENCY_BUCKETS + 1];
    uint64_t latency_sum_ns;
} mcp_metrics_version_snapshot;
/* The latency buckets' upper bounds in ns, MCP_METRICS_LATENCY_BUCKETS of them. */
const int64_t *mcp_metrics_latency_bounds_ns(void);
/* Every {model, version} with a series (unknown names count under ""),
 * sorted by model then version, into *out (caller mcp_frees; NULL when
 * none). Returns how many, or -1 when out of memory. */
int mcp_metrics_snapshot(mcp_metrics *m, mcp_metrics_version_snapshot **out);

/* ---- scheduler: one per model version ---- */

typedef struct mcp_scheduler mcp_scheduler;

typedef struct mcp_scheduler_options {
    int64_t max_batch_size;     /* 0 or 1 = no batching */
    int64_t max_queue_delay_us; /* how long the batcher waits to fill a batch */
    int n_preferred;
    int64_t preferred[16];
    int64_t max_queue_size;     /* queued requests beyond this are refused (429) */
    int64_t default_timeout_us; /* applied when a request carries none; 0 = none */
    int instances;              /* worker threads running the session */
    int threads_per_instance;
    int prefetch_queue_depth;   /* batches formed ahead of busy workers */
    bool enable_tensor_cache;   /* reuse batch buffers */
} mcp_scheduler_options;

mcp_scheduler_options mcp_scheduler_options_from(const mcp_descriptor *d);

/* Statistics for the OIP statistics extension. */
typedef struct mcp_scheduler_stats {
    int64_t inference_count;   /* requests that ran */
    int64_t execution_count;   /* batches run */
    int64_t success_count, fail_count;
    int64_t queue_ns, compute_ns; /* cumulative; compute = the engine run (compute_infer) */
    int64_t compute_input_ns;    /* preprocessing and gathering a batch's inputs */
    int64_t compute_output_ns;   /* splitting outputs per request and postprocessing */
    int64_t last_inference_ms;   /* wall clock ms since epoch, 0 = never */
    int64_t queue_depth;
    int64_t queue_capacity;      /* requests it holds before 429 (max_queue_size) */
} mcp_scheduler_stats;

mcp_status mcp_scheduler_create(mcp_model_version *v, const mcp_scheduler_options *o, mcp_metrics *metrics,
                                mcp_scheduler **out, mcp_err *err);
/* Queues a validated request (takes a reference), ordered by priority,
 * then its tenant's fair-queuing tag (weight), then arrival. Returns
 * RESOURCE_EXHAUSTED at once when the queue is full, or when the request's
 * tenant already has tenant_max_queued waiting (then r->error says so),
 * and UNAVAILABLE when draining; the caller then fails the request itself. */
mcp_status mcp_scheduler_submit(mcp_scheduler *s, mcp_request *r);
void mcp_scheduler_stats_get(mcp_scheduler *s, mcp_scheduler_stats *out);
/* Per batch size (Triton's batch_stats): executions and their time in each
 * stage. Sizes ascending. */
typedef struct mcp_batch_stat {
    int64_t batch_size, count;
    int64_t compute_input_ns, compute_infer_ns, compute_output_ns;
} mcp_batch_stat;
/* Every size seen, into *out (caller frees; NULL when none); returns how
 * many, or -1 when out of memory. */
int mcp_scheduler_batch_stats_copy(mcp_scheduler *s, mcp_batch_stat **out);
/* Stops accepting and waits until queued and running requests finish. */
void mcp_scheduler_drain(mcp_scheduler *s);
void mcp_scheduler_destroy(mcp_scheduler *s);

/* ---- codecs ---- */

/* OIP datatype names ("FP32", "BYTES", ...) <-> dtypes; NULL / UNDEFINED when unknown. */
const char *mcp_oip_datatype(mcp_dtype d);
mcp_dtype mcp_oip_dtype(const char *datatype);

/*
 * Decoders fill r (inputs, requested outputs, parameters) from a body, in
 * the request's pool. `m` supplies input names/dtypes where a protocol omits
 * them (v1 rows, simple, raw binary). Errors name the byte offset (JSON
 * syntax) or the tensor / field. Encoders write the success response body;
 * *json_len receives the JSON header length when the body carries binary
 * tensors (Inference-Header-Content-Length), else 0.
 */
mcp_status mcp_codec_v2_decode(mcp_request *r, const uint8_t *body, size_t len, int64_t header_len,
                               const mcp_model_version *m, mcp_err *err);
void mcp_codec_v2_encode(const mcp_request *r, mcp_buf *out, size_t *json_len);
mcp_status mcp_codec_v1_decode(mcp_request *r, const uint8_t *body, size_t len, const mcp_model_version *m,
                               mcp_err *err);
void mcp_codec_v1_encode(const mcp_request *r, mcp_buf *out);
/* Simple: {"input": [...], "shape": [...], "model"?: name}; model name is
 * read by mcp_codec_simple_model() before routing. */
mcp_status mcp_codec_simple_model(const uint8_t *body, size_t len, char *name, size_t cap, mcp_err *err);
mcp_status mcp_codec_simple_decode(mcp_request *r, const uint8_t *body, size_t len, const mcp_model_version *m,
                                   mcp_err *err);
/* The same in two steps, parsing once: peek parses the body and names its
 * model; *doc (a parsed document, freed with mcp_codec_simple_release) is
 * decoded by decode_doc. */
mcp_status mcp_codec_simple_peek(const uint8_t *body, size_t len, char *name, size_t cap, void **doc, mcp_err *err);
mcp_status mcp_codec_simple_decode_doc(mcp_request *r, void *doc, const mcp_model_version *m, mcp_err *err);
void mcp_codec_simple_release(void *doc);
void mcp_codec_simple_encode(const mcp_request *r, mcp_buf *out);
/* {"error": "<message>"} */
void mcp_codec_error(const char *message, mcp_buf *out);
/* gRPC: a serialized ModelInferRequest (typed contents or raw_input_contents)
 * in; a serialized ModelInferResponse with raw_output_contents out. Errors
 * travel in the gRPC status, so grpc_error writes nothing. */
mcp_status mcp_codec_grpc_decode(mcp_request *r, const uint8_t *body, size_t len, const mcp_model_version *m,
                                 mcp_err *err);
void mcp_codec_grpc_encode(const mcp_request *r, mcp_buf *out, size_t *json_len);
/* Parse once: peek unpacks the message and names its model and version;
 * decode_msg fills the request from it; release frees it. */
mcp_status mcp_codec_grpc_peek(const uint8_t *body, size_t len, char *name, size_t cap, char *version, size_t vcap,
                               void **msg, mcp_err *err);
mcp_status mcp_codec_grpc_decode_msg(mcp_request *r, const void *msg, mcp_err *err);
void mcp_codec_grpc_release(void *msg);
/* Packs a protobuf-c message (a ProtobufCMessage *) onto out. */
void mcp_codec_grpc_pack(const void *msg, mcp_buf *out);
void mcp_codec_grpc_error(const char *message, mcp_buf *out);


/* ---- the serving core (serve/frontend.h has its request path) ---- */

/* What every transport shares: the request path, codecs, the metrics
 * observer, the registry hooks (schedulers attach to every version the
 * repository makes current), model control on a loader thread, and the
 * shutdown drain. One per process, given to each transport. */
typedef struct mcp_frontend mcp_frontend;

mcp_status mcp_frontend_create(mcp_repository *repo, mcp_metrics *metrics, mcp_frontend **out, mcp_err *err);
/* Model control (load, unload) on or off, and the bearer token it needs
 * (NULL = none; the string must outlive the frontend). Default: on, none. */
void mcp_frontend_set_control(mcp_frontend *fe, bool enabled, const char *admin_token);
/* The store and catalog model control records into (borrowed; NULL: none);
 * with one, management actions and denied calls go to its event log. */
void mcp_frontend_set_plane(mcp_frontend *fe, mcp_plane *plane);
/* The access rules (serve/auth.h; the frontend owns them, and a new set
 * replaces the old at once, as SIGHUP does). */
typedef struct mcp_auth mcp_auth;
void mcp_frontend_set_auth(mcp_frontend *fe, mcp_auth *a);
/* The server's log (serve/log.h; borrowed, it must outlive the
 * transports): the serving core's messages (a gate trip, an eviction, a
 * record not written), the access log and internal failures; without one
 * it is quiet. */
typedef struct mcp_logger mcp_logger;
void mcp_frontend_set_logger(mcp_frontend *fe, mcp_logger *lg);
/* The loads made before serving (--model-path, the repository, the
 * store's restore) into the load metrics, from their lifecycle times
 * (millisecond precision); the control API's are counted as they run. */
void mcp_frontend_count_startup_loads(mcp_frontend *fe);
mcp_logger *mcp_frontend_logger(const mcp_frontend *fe);
/* The tracer every transport's calls report to (serve/trace.h; borrowed,
 * it must outlive the transports; NULL = no tracing). */
typedef struct mcp_tracer mcp_tracer;
void mcp_frontend_set_tracer(mcp_frontend *fe, mcp_tracer *t);
/* The memory policy (off while budget is 0): a budget for all loaded
 * models in real bytes; the smoothed memory pressure (bytes / budget, an
 * exponential average with half-life smoothing_ms) must reach `pressure`
 * and a model's smoothed queue depth stay under `queue_depth` with no
 * request for idle_ms before it is unloaded, least recently used first,
 * until the pressure is down to `floor`. Its next request loads it again. */
typedef struct mcp_memory_policy {
    size_t budget;
    double pressure, floor, queue_depth;
    int64_t idle_ms, smoothing_ms, tick_ms;
} mcp_memory_policy;
mcp_memory_policy mcp_memory_policy_default(void);
void mcp_frontend_set_memory_policy(mcp_frontend *fe, const mcp_memory_policy *p);

mcp_plane *mcp_frontend_plane(const mcp_frontend *fe);
/* Request bytes all transports together may hold at once (HTTP bodies,
 * gRPC messages); 0 = no cap. Default 1 GiB. */
void mcp_frontend_set_body_cap(mcp_frontend *fe, size_t bytes);
/* Stops admitting, waits (bounded) for admitted requests to be routed, then
 * for every model's scheduler and every retired version to drain; queued
 * model control still runs, new control is refused. Idempotent. Each
 * transport then sends what is left and stops. */
void mcp_frontend_drain(mcp_frontend *fe);
/* Stops the loader and retire threads; the repository retires its versions
 * by itself afterwards. Destroy the transports first. NULL is a no-op. */
void mcp_frontend_destroy(mcp_frontend *fe);

/* ---- HTTP content codings (compress.c, zlib) ---- */

typedef enum mcp_content_coding {
    MCP_CODING_IDENTITY,
    MCP_CODING_GZIP,
    MCP_CODING_DEFLATE,
    MCP_CODING_UNKNOWN,
} mcp_content_coding;

/* A Content-Encoding value (NULL = identity). */
mcp_content_coding mcp_content_coding_parse(const char *value);
/* Inflates a gzip or deflate body into out, stopping with TOO_LARGE as soon
 * as it would pass `limit` bytes; INVALID_ARGUMENT for corrupt data. */
mcp_status mcp_inflate_body(mcp_content_coding coding, const uint8_t *in, size_t n, size_t limit, mcp_buf *out,
                            mcp_err *err);
/* Whether an Accept-Encoding value accepts gzip (q > 0, or "*"). */
bool mcp_accepts_gzip(const char *accept_encoding);
/* gzip of in into out; false when it cannot. */
bool mcp_gzip(const uint8_t *in, size_t n, mcp_buf *out);

/* ---- listening sockets, shared by the transports ---- */

/* A TCP listening socket for host (IPv4 or IPv6 address, or a name that
 * resolves to one) and port (0 = any free one; *bound_port tells). */
mcp_status mcp_tcp_listen(const char *host, int port, int *fd, int *bound_port, bool *ipv6, mcp_err *err);
/* A Unix listening socket at path, mode 0660. A stale socket left there is
 * replaced; any other kind of file is refused, never removed. */
mcp_status mcp_unix_listen(const char *path, int *fd, mcp_err *err);
/* Removes a stale socket at path (not a regular file or a live socket);
 * for transports whose library binds the path itself (gRPC). */
mcp_status mcp_unix_prepare(const char *path, mcp_err *err);

/* ---- HTTP server (libmicrohttpd) ---- */

typedef struct mcp_server mcp_server;

typedef struct mcp_server_options {
    const char *host;            /* "127.0.0.1"; an IPv6 address ("::1") or a host name too */
    int port;                    /* 8080; 0 = any free port (see mcp_server_port); -1 = no TCP */
    const char *socket_path;     /* also serve on this Unix socket (mode 0660); NULL = none */
    int http_threads;            /* transport threads (never run kernels); default 2 */
    size_t max_body_bytes;       /* 413 beyond; default 64 MiB */
    size_t max_header_bytes;     /* per-connection header memory; default 16 KiB */
    unsigned max_connections;    /* default 1024 */
    unsigned connection_timeout_s; /* idle/slow client limit; default 30 */
    unsigned header_timeout_s;   /* a request's headers must arrive within this of connect or the previous
                                    response (idle keep-alive ends then too); default 10 */
    unsigned min_body_rate;      /* bytes/s a body must average after header_timeout_s of upload; default 1024 */
    unsigned max_connections_per_client; /* per client address; default 256 */
    unsigned reserve_connections; /* beyond max_connections, for health and metrics only; default 16 */
    unsigned max_query_params;   /* more in a URL get 414; default 64 */
    struct mcp_tls *tls;         /* HTTPS on the TCP port (serve/tls.h; borrowed); NULL = plain HTTP */
} mcp_server_options;

mcp_server_options mcp_server_options_default(void);

/* The HTTP transport of a frontend (which it borrows): OIP v2, KServe v1,
 * the quickstart, repository and metrics routes. */
mcp_status mcp_server_create(const mcp_server_options *o, mcp_frontend *fe, mcp_server **out, mcp_err *err);
mcp_status mcp_server_start(mcp_server *s, mcp_err *err);
int mcp_server_port(const mcp_server *s);
/* Graceful: stop accepting, drain the frontend, send what is left, stop. */
void mcp_server_shutdown(mcp_server *s);
void mcp_server_destroy(mcp_server *s);

/* ---- gRPC server (gRPC core) ---- */

typedef struct mcp_grpc_server mcp_grpc_server;

typedef struct mcp_grpc_options {
    const char *host;              /* "127.0.0.1"; "::1" and host names too */
    int port;                      /* 8081; 0 = any free port (mcp_grpc_port); -1 = no TCP */
    const char *socket_path;       /* also listen on this Unix socket; NULL = none */
    int threads;                   /* completion-queue pollers; default 2 */
    size_t max_message_bytes;      /* larger messages fail RESOURCE_EXHAUSTED; default 64 MiB */
    int keepalive_time_ms;         /* server pings an idle connection this often; default 2 h */
    int keepalive_timeout_ms;      /* and waits this long for the answer; default 20 s */
    int min_client_ping_interval_ms; /* clients may ping no more often without data; default 5 min */
    struct mcp_tls *tls;           /* TLS on the TCP port (serve/tls.h; borrowed); NULL = plaintext */
} mcp_grpc_options;

mcp_grpc_options mcp_grpc_options_default(void);
/* grpc_init(), with abseil's mutex deadlock detector (a debug aid that
 * Debian's build leaves on) switched off; for servers and clients alike.
 * Pair with grpc_shutdown(). */
void mcp_grpc_library_init(void);
/* inference.GRPCInferenceService and grpc.health.v1.Health on a frontend
 * (borrowed). */
mcp_status mcp_grpc_create(const mcp_grpc_options *o, mcp_frontend *fe, mcp_grpc_server **out, mcp_err *err);
mcp_status mcp_grpc_start(mcp_grpc_server *s, mcp_err *err);
int mcp_grpc_port(const mcp_grpc_server *s);
/* Graceful: no new RPCs, drain the frontend, let answers be written
 * (bounded), cancel what is left, stop. */
void mcp_grpc_shutdown(mcp_grpc_server *s);
void mcp_grpc_destroy(mcp_grpc_server *s);

#endif
