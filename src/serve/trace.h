/*
 * Request tracing with OpenTelemetry (private to src/serve/).
 *
 * A transport starts a call's trace when the request arrives, from the
 * W3C `traceparent` / `tracestate` it carries (HTTP headers, gRPC
 * metadata): mcp_trace_begin / mcp_trace_decide decide once whether the call is sampled
 * (parent-based or by trace-id ratio, Triton's trace settings on top) and
 * gives the call its server span id, which the transport echoes (the
 * decision waits until the model is known, so a model's own settings
 * apply). The
 * stages stamp their times into the call's context and the request's own
 * timing fields; mcp_tracer_finish copies one fixed-size record per
 * sampled call into a bounded queue (a full queue drops it, counted). A
 * background thread turns records into spans (server, receive, decode,
 * queue, batch, compute, encode, send) and posts them as an OTLP/HTTP
 * protobuf ExportTraceServiceRequest through libcurl. No request ever
 * waits for the collector: an unreachable one costs the exporter thread
 * its timeout and the queue its oldest records, nothing else.
 *
 * With tracing off (no endpoint, or trace_level OFF) mcp_trace_begin is
 * two atomic loads and the call carries nothing.
 */
#ifndef MCP_SERVE_TRACE_H
#define MCP_SERVE_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

typedef enum mcp_trace_sampler {
    MCP_TRACE_SAMPLER_ALWAYS_OFF,
    MCP_TRACE_SAMPLER_ALWAYS_ON,
    MCP_TRACE_SAMPLER_RATIO,            /* traceidratio */
    MCP_TRACE_SAMPLER_PARENT_ALWAYS_ON, /* parentbased_always_on (OpenTelemetry's default) */
    MCP_TRACE_SAMPLER_PARENT_ALWAYS_OFF,
    MCP_TRACE_SAMPLER_PARENT_RATIO,     /* parentbased_traceidratio */
    MCP_TRACE_SAMPLER_COUNT
} mcp_trace_sampler;

/* OTEL_TRACES_SAMPLER's spelling ("parentbased_traceidratio", ...). */
const char *mcp_trace_sampler_name(mcp_trace_sampler s);
bool mcp_trace_sampler_parse(const char *name, mcp_trace_sampler *out);

#define MCP_TRACE_STATE_MAX 512 /* W3C: tracestate is at most 512 characters */

/* A call's trace, kept in the call (transport-owned memory). All times are
 * mcp_now_ns(); 0 = the stage did not happen. */
typedef struct mcp_trace_ctx {
    bool pending; /* begun; the sampling decision waits for the model's name */
    bool active;  /* tracing applies to the call: echo our traceparent */
    bool sampled; /* this call's spans are recorded */
    bool has_parent;
    uint8_t flags; /* W3C trace-flags as received or decided (bit 0: sampled) */
    uint8_t trace_id[16], span_id[8], parent_id[8];
    char state[MCP_TRACE_STATE_MAX + 1];
    int64_t t_receive_ns, t_received_ns; /* first byte seen, body complete */
    int64_t t_decode_ns, t_decoded_ns;   /* decode and validate */
    int64_t t_encode_ns, t_encoded_ns;   /* the answer's bytes */
    int64_t t_send_ns;                   /* handed to the transport to send */
    char model[128], version[64];        /* what the call was routed to ("" = not routed) */
} mcp_trace_ctx;

/* What the transport knows when the call has been sent, for the spans. The
 * strings are copied (truncated to the record's fields). */
typedef struct mcp_trace_end {
    const char *name;       /* server span: "POST /v2/models/{mv}/infer", "inference.GRPCInferenceService/ModelInfer" */
    const char *transport;  /* "http" | "grpc" */
    const char *method;     /* HTTP method, or NULL */
    const char *route;      /* HTTP route pattern, or NULL */
    const char *rpc_method; /* gRPC method, or NULL */
    int code;               /* HTTP status, or gRPC status code */
    bool error;             /* the server failed (5xx, or a gRPC server-side code) */
    const char *message;    /* error message, or NULL */
    const char *model, *version, *request_id, *tenant, *protocol;
    const char *priority_class; /* an authenticated tenant's: critical, standard, batch; NULL = none */
    int64_t priority;
    int batch_size;
    /* The scheduler's stamps (0 when the request never got there). */
    int64_t t_queued_ns, t_batched_ns, t_compute_ns, t_done_ns;
    int64_t t_sent_ns; /* the transport finished sending (0: now) */
    /* A generation (t_queued_ns is its submission): first admitted, first
     * token, ended; its tokens (spans queue, prefill, decode). */
    bool generation;
    int64_t t_admitted_ns, t_first_token_ns, t_gen_done_ns;
    int64_t prompt_tokens, completion_tokens;
    int64_t t_start_ns; /* the call arrived (for the access log's duration) */
    bool internal;      /* an internal failure: logged as an error */
} mcp_trace_end;

typedef struct mcp_tracer_options {
    const char *endpoint;     /* OTLP/HTTP traces URL (http or https); NULL = off */
    const char *service_name; /* resource service.name; default "mcp2026-server" */
    const char *resource;     /* more resource attributes, "k=v,k=v" (OTEL_RESOURCE_ATTRIBUTES form) */
    mcp_trace_sampler sampler;
    double ratio;             /* for the ratio samplers, 0..1 */
    int queue_size;           /* sampled calls held for export; default 2048 */
    int batch_max;            /* calls per export request; default 256 */
    int64_t interval_ms;      /* export at least this often; default 1000 */
    int64_t timeout_ms;       /* one export request at most; default 3000 */
} mcp_tracer_options;
mcp_tracer_options mcp_tracer_options_default(void);

typedef struct mcp_tracer mcp_tracer;

/* Starts the exporter thread. The options' strings are copied. A resource
 * string that is not "k=v,..." is refused naming the entry. */
mcp_status mcp_tracer_create(const mcp_tracer_options *o, mcp_tracer **out, mcp_err *err);
/* Stops the exporter after one last export of what is queued (bounded by
 * the timeout). NULL does nothing. */
void mcp_tracer_destroy(mcp_tracer *t);

/* Parses a W3C traceparent ("00-<32 hex>-<16 hex>-<2 hex>"; a later
 * version's longer value is read by its first four fields). false for
 * anything else, all-zero ids, or version ff. */
bool mcp_trace_parse_traceparent(const char *s, uint8_t trace_id[16], uint8_t parent_id[8], uint8_t *flags);
/* The call's own traceparent (55 characters and NUL). */
void mcp_trace_format_traceparent(const mcp_trace_ctx *c, char out[56]);
/* The call's trace and span ids in lowercase hex, for log lines. */
void mcp_trace_format_ids(const mcp_trace_ctx *c, char trace_id[33], char span_id[17]);

/* At a call's arrival: reads its context when tracing may apply (t may be
 * NULL: off). traceparent / tracestate are the raw values (NULL when
 * absent); an invalid traceparent starts a new trace, as W3C asks; a
 * tracestate that is not printable ASCII within 512 characters is
 * dropped. Then, once the model the call addresses is known (NULL when it
 * never is), mcp_trace_decide samples it: a model's own trace settings
 * apply over the server's. */
void mcp_trace_begin(mcp_tracer *t, mcp_trace_ctx *c, const char *traceparent, const char *tracestate,
                     int64_t t_receive_ns);
void mcp_trace_decide(mcp_tracer *t, mcp_trace_ctx *c, const char *model);
/* The call was answered and sent: queue its record (sampled calls only). */
void mcp_tracer_finish(mcp_tracer *t, const mcp_trace_ctx *c, const mcp_trace_end *e);

/* ---- Triton's trace settings (GET/POST /v2[/models/{m}]/trace/setting) ---- */

/* The settings in force, as Triton writes them: {"trace_level": ["OFF" |
 * "TIMESTAMPS"], "trace_rate": "N", "trace_count": "N" | "-1",
 * "log_frequency": "0", "trace_file": "", "trace_mode": "opentelemetry"},
 * plus our sampler, ratio and endpoint. model NULL = the server's. */
void mcp_tracer_settings_json(mcp_tracer *t, const char *model, mcp_buf *out);
/* Applies a settings body (a JSON object of those keys; null resets a
 * model's key to the server's). INVALID_ARGUMENT names the key. trace_file
 * is refused (spans go to the configured collector, never to a path a
 * client names); TENSORS levels are refused (a span never carries request
 * data). */
mcp_status mcp_tracer_settings_update(mcp_tracer *t, const char *model, const char *body, size_t len, mcp_err *err);
/* Forgets a model's own settings (it was unloaded for good). */
void mcp_tracer_forget_model(mcp_tracer *t, const char *model);

/* Prometheus samples of the exporter: spans exported and dropped (queue
 * full, export failed), export requests by outcome; with # TYPE lines. */
void mcp_tracer_render_metrics(mcp_tracer *t, mcp_buf *out);

/* Counters for tests and stats. */
typedef struct mcp_tracer_stats {
    int64_t sampled, exported_spans, dropped_queue_full, dropped_export_failed, export_ok, export_failed;
} mcp_tracer_stats;
void mcp_tracer_get_stats(mcp_tracer *t, mcp_tracer_stats *s);

#endif
