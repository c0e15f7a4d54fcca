/*
 * Private to mcpctl's server commands: the HTTP client (libcurl easy
 * handle, reused for keep-alive), model metadata, and the Open Inference
 * Protocol v2 wire codec on the client side (binary tensor data extension).
 * Nothing here prints; failures return a status with a one-line message.
 */
#ifndef MCP_APP_MCPCTL_HTTP_H
#define MCP_APP_MCPCTL_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "tensor/tensor.h"

/* ---- HTTP ---- */

typedef struct mcpctl_http {
    void *curl;          /* CURL *, one per thread; reused so connections stay open */
    char base[1024];     /* server URL without a trailing '/' */
    mcp_buf resp;        /* body of the last response */
    long code;           /* HTTP status of the last response */
    int64_t header_len;  /* its Inference-Header-Content-Length; -1 when absent */
    long timeout_ms;     /* whole-exchange limit; 0 = none */
    void *headers;       /* struct curl_slist * of the prepared request */
    char curl_err[256];
} mcpctl_http;

/* base: "http://host:port" (a trailing '/' is dropped). */
mcp_status mcpctl_http_init(mcpctl_http *h, const char *base, long timeout_ms, mcp_err *err);
void mcpctl_http_cleanup(mcpctl_http *h);
/*
 * One exchange. method "GET" or "POST"; body may be NULL (an empty POST);
 * content_type NULL = application/json; header_len >= 0 adds
 * Inference-Header-Content-Length. Returns OK whenever the server answered
 * (any status: see h->code); IO_ERROR naming the URL when it could not be
 * reached or the exchange failed.
 */
mcp_status mcpctl_http_do(mcpctl_http *h, const char *method, const char *path, const void *body, size_t len,
                          const char *content_type, int64_t header_len, mcp_err *err);
/* The same in two steps, for load loops: prepare sets URL, method, body
 * (borrowed: it must outlive every perform) and headers once; perform sends
 * it again and again on the same connection. */
mcp_status mcpctl_http_prepare(mcpctl_http *h, const char *method, const char *path, const void *body, size_t len,
                               const char *content_type, int64_t header_len, mcp_err *err);
mcp_status mcpctl_http_perform(mcpctl_http *h, mcp_err *err);
/* After a non-2xx answer: "HTTP <code>: <server's error message>" into err;
 * returns a status matching the code (NOT_FOUND for 404, ...). */
mcp_status mcpctl_http_fail(const mcpctl_http *h, mcp_err *err);
/* Percent-encodes one path segment (a model name) into out. */
void mcpctl_path_segment(const char *s, char *out, size_t cap);

/* ---- model metadata (GET /v2/models/NAME) ---- */

typedef struct mcpctl_tensor_meta {
    char *name;
    char datatype[16];    /* as the server wrote it, e.g. "FP32" */
    mcp_dtype dtype;      /* UNDEFINED when the datatype is unknown */
    int rank;
    int64_t dims[MCP_MAX_RANK]; /* -1 = variable */
} mcpctl_tensor_meta;

typedef struct mcpctl_model_meta {
    char *name;
    char *platform;
    int n_versions;
    char **versions;
    int n_inputs, n_outputs;
    mcpctl_tensor_meta *inputs, *outputs;
} mcpctl_model_meta;

mcp_status mcpctl_model_meta_parse(const uint8_t *json, size_t len, mcpctl_model_meta *out, mcp_err *err);
/* GET /v2/models/NAME (NULL version = current) and parse. */
mcp_status mcpctl_model_meta_fetch(mcpctl_http *h, const char *name, const char *version, mcpctl_model_meta *out,
                                   mcp_err *err);
void mcpctl_model_meta_free(mcpctl_model_meta *m);

/* ---- OIP v2 wire codec, client side (mcpctl_wire.c: no libcurl, so the
 * fuzz target can link it; datatype names come from the serve codecs'
 * mcp_oip_datatype / mcp_oip_dtype) ---- */

/* A named tensor; both name and tensor data are owned. */
typedef struct mcpctl_named {
    char *name;
    mcp_tensor t;
} mcpctl_named;

void mcpctl_named_free(mcpctl_named *v, int n);

/*
 * Builds a binary-extension request body: JSON header (inputs with
 * binary_data_size; requested outputs with binary_data true, or, when
 * n_outputs is 0, the binary_data_output parameter) followed by the raw
 * bytes of each input. *json_len receives the header length.
 */
mcp_status mcpctl_v2_encode(const mcpctl_named *inputs, int n_inputs, const char *const *outputs, int n_outputs,
                            mcp_buf *body, size_t *json_len, mcp_err *err);
/*
 * Decodes an inference response: header_len < 0 means the whole body is
 * JSON; otherwise the first header_len bytes are JSON and binary outputs
 * follow in order. Outputs come as JSON `data` (flat or nested) or binary.
 * *outs (n entries) is owned by the caller (mcpctl_named_free). Errors name
 * the output and what was wrong; never reads past len.
 */
mcp_status mcpctl_v2_decode(const uint8_t *body, size_t len, int64_t header_len, mcpctl_named **outs, int *n,
                            mcp_err *err);
/* KServe v1 predict body {"instances": [...]} for batch-1 inputs: one row
 * each (the first dimension dropped). One input gives bare rows; several
 * give {"name": row} objects. */
mcp_status mcpctl_v1_encode(const mcpctl_named *inputs, int n_inputs, mcp_buf *body, mcp_err *err);

/* OIP v2 request body in JSON form: every input as flat "data" (what a
 * client without the binary extension sends). */
mcp_status mcpctl_v2_encode_json(const mcpctl_named *inputs, int n_inputs, mcp_buf *body, mcp_err *err);

/* ---- gRPC (mcpctl_grpc.c): the clients of bench ---- */

typedef struct mcpctl_grpc {
    void *channel; /* grpc_channel * */
    void *cq;      /* grpc_completion_queue * (pluck) */
    char target[512];
    mcp_buf resp;  /* message of the last answer */
    void *stream;    /* grpc_call * of an open stream, or NULL */
    void *stream_md; /* its grpc_metadata_array * (initial metadata) */
    bool stream_md_pending; /* received with the next round trip */
} mcpctl_grpc;

/* target: "host:port" or "unix:/path". grpc_init() must have run. */
mcp_status mcpctl_grpc_init(mcpctl_grpc *g, const char *target, mcp_err *err);
void mcpctl_grpc_cleanup(mcpctl_grpc *g);
/* A stream of `method` (ModelStreamInfer) that sends one request and waits
 * for its answer at a time; closed by stream_close or cleanup. */
mcp_status mcpctl_grpc_stream_open(mcpctl_grpc *g, const char *method, long timeout_ms, mcp_err *err);
mcp_status mcpctl_grpc_stream_roundtrip(mcpctl_grpc *g, const mcp_buf *req, mcp_err *err);
void mcpctl_grpc_stream_close(mcpctl_grpc *g);
/* Unary calls of many slots in flight at once on one channel (one HTTP/2
 * connection), completed through one queue: what an asynchronous gRPC
 * client does. A slot holds one call at a time; its request bytes are
 * copied once and then sent by reference. */
typedef struct mcpctl_grpc_async mcpctl_grpc_async;
mcp_status mcpctl_grpc_async_create(const char *target, int n_slots, mcpctl_grpc_async **out, mcp_err *err);
mcp_status mcpctl_grpc_async_start(mcpctl_grpc_async *a, int slot, const char *method, const mcp_buf *req, long timeout_ms,
                                   mcp_err *err);
/* The slot of a call that finished within timeout_ms (*st: OK when the
 * server answered OK), or -1 when none did. */
int mcpctl_grpc_async_next(mcpctl_grpc_async *a, long timeout_ms, mcp_status *st, mcp_err *err);
/* Cancels the calls still in flight, then frees everything. */
void mcpctl_grpc_async_destroy(mcpctl_grpc_async *a);
/* A ModelInferRequest for model with every input in raw_input_contents. */
mcp_status mcpctl_grpc_encode(const char *model, const mcpctl_named *inputs, int n, mcp_buf *out, mcp_err *err);

/* ---- server metrics (Prometheus text from GET /metrics) ---- */

/* Sums over every series labelled model="<model>" (all versions). */
typedef struct mcpctl_server_sums {
    bool ok; /* /metrics answered */
    double queue_sum, queue_count, compute_sum, compute_count, total_sum, total_count, batch_sum, batch_count;
} mcpctl_server_sums;

/* Adds the queue, compute, request-duration and batch-size histogram sums
 * and counts of `model` found in text into *s. Malformed lines are skipped. */
void mcpctl_metrics_parse(const char *text, size_t len, const char *model, mcpctl_server_sums *s);

/* ---- output files, shared with `mcpctl run`'s conventions ---- */

/* Output file stem: every character outside [A-Za-z0-9_.-] becomes '_'. */
void mcpctl_sanitize(const char *name, char *out, size_t cap);
/* "name: float32 [1,10] -> DIR/name.npy {v0, v1, ...}" */
void mcpctl_print_summary(const char *outdir, const char *name, const mcp_tensor *t);

/* ---- commands ---- */

int mcpctl_cmd_infer(const char *server, int argc, char **argv);
int mcpctl_cmd_bench(const char *server, int argc, char **argv);

#endif
