/*
 * The HTTP transport on libmicrohttpd (epoll, internal thread pool).
 *
 * Transport threads parse, route and encode; they never run kernels. An
 * inference request is decoded, validated and queued on its model's
 * scheduler, and its connection is suspended; the worker that finishes the
 * request encodes the response and resumes the connection, and a transport
 * thread sends it. Routes are a table of small handlers tried in order.
 */
/* POLLRDHUP */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "registry/descriptor_util.h"
#include "serve/frontend.h"
#include "serve/log.h"
#include "serve/monitor.h"
#include "serve/openai.h"
#include "serve/status.h"
#include "serve/tls.h"

extern const char mcp__openapi_json[];
extern const size_t mcp__openapi_json_len;

typedef enum conn_phase { PHASE_RECEIVING = 0, PHASE_WAITING, PHASE_READY } conn_phase;

typedef struct conn {
    mcp_server *srv;
    struct MHD_Connection *mhd;
    mcp_buf body;
    bool too_large;
    size_t discarded;     /* bytes of a refused body read and dropped */
    _Atomic int phase;
    mcp_call call;        /* an inference through the frontend */
    mcp_control ctl;      /* a load or unload on the loader thread */
    bool suspended;       /* waiting for the call or the control to finish */
    int code;
    mcp_buf resp;
    size_t json_len;      /* binary responses: Inference-Header-Content-Length */
    const char *content_type;
    struct conn *next_waiting; /* list of suspended connections */
    bool counted;         /* admitted before any stop: counted in srv->open_requests */
    bool admitting;       /* counted in srv->admitting until routed */
    bool www_authenticate; /* a 401: say which scheme */
    char allow[64];       /* a 405: the methods the path takes */
    char answered_by[128]; /* an inference: the version that answered it */
    bool http11;          /* HTTP/1.1 or later: may be sent interim 1xx answers */
    bool started;         /* the access handler has seen the headers */
    bool close;           /* answer with Connection: close */
    int reject;           /* set before the headers: answer this status at once */
    char reject_msg[160];
    struct tcp_link *link;    /* the connection this request arrived on */
    size_t body_reserved; /* counted in srv->body_bytes until the request ends */
    mcp_content_coding coding; /* the body's Content-Encoding */
    bool gzip_ok;         /* the client accepts gzip answers */
    bool too_busy;        /* bodies in flight reached the server's cap */
    bool denied;          /* refused on its headers (401/403/404 in resp): its body is read and dropped */
    bool probed;          /* the hang-up watcher sent its 100 Continue probe */
    struct gen_link *gen; /* a generation in flight (its link to this connection) */
    bool streaming;       /* answered with a stream (SSE) built from gen */
    int64_t t_start_ns;   /* the headers arrived (a trace's receive span starts) */
    char method[16];      /* the request's method and route pattern, for its span */
    const char *pattern;
    const char *const *headers; /* more response headers: name, value pairs ending in NULL (static storage) */
    mcp_identity who;     /* the caller, from its Authorization header */
    mcp_peer peer;        /* where it called from */
    int64_t retry_after_s; /* a 429 for a tenant limit: Retry-After */
} conn;

struct mcp_server {
    mcp_server_options opts;
    mcp_frontend *fe;     /* borrowed */
    mcp_repository *repo; /* the frontend's */
    struct MHD_Daemon *daemon;     /* TCP */
    struct MHD_Daemon *daemon_uds; /* --http-socket */
    int port;
    int64_t started_s; /* wall clock at start: OpenAI's "created" of each model */
    atomic_int open_requests; /* admitted requests not yet answered and closed */
    /* Suspended connections, watched for client hang-ups. */
    pthread_mutex_t wait_mu;
    conn *waiting;
    pthread_t watcher;
    bool watcher_running;
    atomic_bool watcher_stop;
    /* Every open connection, for the header deadline, the body rate and
     * the reserve (guarded by link_mu). */
    pthread_mutex_t link_mu;
    struct tcp_link *links;
    int n_links;
};

/* One TCP connection (MHD's socket context). */
typedef struct tcp_link {
    struct tcp_link *prev, *next;
    int fd;
    int64_t boundary_ns;   /* connect, or the end of the previous request */
    int64_t body_start_ns; /* a body is arriving since then; 0 = none */
    uint64_t body_bytes;
    bool headers_done;
    bool reserve;          /* admitted beyond max_connections: health and metrics only */
    bool cut;
} tcp_link;


mcp_server_options mcp_server_options_default(void)
{
    return (mcp_server_options){
        .host = "127.0.0.1",
        .port = 8080,
        .http_threads = 2,
        .max_body_bytes = 64u << 20,
        .max_header_bytes = 16u << 10,
        .max_connections = 1024,
        .connection_timeout_s = 30,
        .header_timeout_s = 10,
        .min_body_rate = 1024,
        .max_connections_per_client = 256,
        .reserve_connections = 16,
        .max_query_params = 64,
    };
}

/* ---- replies ---- */

static void reply_buf(conn *k, int code, const char *content_type)
{
    k->code = code;
    k->content_type = content_type;
}

static void reply_error(conn *k, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_error(conn *k, int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mcp_buf_reset(&k->resp);
    mcp_codec_error(msg, &k->resp);
    k->json_len = 0;
    reply_buf(k, code, "application/json");
}

static void free_buffer(void *p) { mcp_free(p); }

static enum MHD_Result send_reply(conn *k)
{
    struct MHD_Response *r;
    if (k->resp.failed) {
        mcp_buf_free(&k->resp);
        mcp_codec_error("out of memory building the response", &k->resp);
        k->code = 500;
        k->json_len = 0;
        k->content_type = "application/json";
    }
    /* gzip for clients that accept it, when the body is worth it; not
     * above 1 MiB, which would hold this transport thread for tens of
     * milliseconds. */
    bool gzipped = false;
    if (k->gzip_ok && k->resp.len >= 1024 && k->resp.len <= ((size_t)1 << 20)) {
        mcp_buf z = {0};
        if (mcp_gzip(k->resp.data, k->resp.len, &z) && z.len < k->resp.len) {
            mcp_buf_free(&k->resp);
            k->resp = z;
            gzipped = true;
        } else {
            mcp_buf_free(&z);
        }
    }
    size_t len = k->resp.len;
    void *data = k->resp.data;
    if (data) {
        r = MHD_create_response_from_buffer_with_free_callback(len, data, free_buffer);
        memset(&k->resp, 0, sizeof k->resp); /* the response owns the bytes now */
    } else {
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", k->content_type ? k->content_type : "application/json");
    for (const char *const *h = k->headers; h && h[0]; h += 2) MHD_add_response_header(r, h[0], h[1]);
    if (k->www_authenticate) MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"mcp2026\"");
    if (k->allow[0]) MHD_add_response_header(r, "Allow", k->allow);
    if (k->retry_after_s > 0) {
        char secs[24];
        snprintf(secs, sizeof secs, "%lld", (long long)k->retry_after_s);
        MHD_add_response_header(r, "Retry-After", secs);
    }
    if (k->answered_by[0]) MHD_add_response_header(r, "Mcp-Model-Version", k->answered_by);
    if (k->call.trace.active) { /* our server span, for the client to link to */
        char tp[56];
        mcp_trace_format_traceparent(&k->call.trace, tp);
        MHD_add_response_header(r, "traceparent", tp);
    }
    if (gzipped) MHD_add_response_header(r, "Content-Encoding", "gzip");
    if (gzipped || k->gzip_ok) MHD_add_response_header(r, "Vary", "Accept-Encoding");
    if (k->json_len) {
        char hl[32];
        snprintf(hl, sizeof hl, "%zu", k->json_len);
        MHD_add_response_header(r, "Inference-Header-Content-Length", hl);
    }
    if (k->close || mcp_frontend_stopping(k->srv->fe)) MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(k->mhd, (unsigned)k->code, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- paths ---- */

typedef struct path {
    int n;
    char seg[8][256];
} path;

/* Splits "/v2/models/m/versions/1/infer" into segments (URL-decoded by MHD). */
static bool path_split(const char *url, path *p)
{
    p->n = 0;
    const char *s = url;
    while (*s) {
        while (*s == '/') s++;
        if (!*s) break;
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (p->n == 8 || len >= sizeof p->seg[0]) return false;
        memcpy(p->seg[p->n], s, len);
        p->seg[p->n][len] = '\0';
        p->n++;
        s += len;
    }
    return true;
}

static bool seg_is(const path *p, int i, const char *s) { return i < p->n && strcmp(p->seg[i], s) == 0; }

/* Whether the caller may know of a model (listings, stats, metrics). */
static bool conn_sees(conn *k, const char *model) { return mcp_frontend_visible(k->srv->fe, &k->who, model); }

static bool conn_keep(void *user, const char *label, const char *value)
{
    conn *k = user;
    if (!strcmp(label, "tenant")) return k->who.roles & MCP_ROLE_ADMIN || !strcmp(value, k->who.tenant);
    return !value[0] || conn_sees(k, value);
}

/* ---- model lookup ---- */

static mcp_model_version *find_model(conn *k, const char *name, const char *version)
{
    char msg[600];
    mcp_err err = {msg, sizeof msg};
    mcp_status st;
    mcp_model_version *v = mcp_frontend_route_model(k->srv->fe, name, version, &st, &err);
    if (!v) reply_error(k, mcp_status_http_code(st), "%s", msg);
    return v;
}

static void json_tensor_meta(mcp_buf *b, const mcp_tensor_meta *m, bool with_batch)
{
    mcp_buf_puts(b, "{\"name\":");
    mcp_buf_json_string(b, m->name);
    mcp_buf_puts(b, ",\"datatype\":");
    /* A type OIP has no name for shows as ONNX names it ("FLOAT8E4M3FN"),
     * so a client sees why its requests are refused. */
    mcp_buf_json_string(b, mcp_oip_datatype(m->dtype)            ? mcp_oip_datatype(m->dtype)
                           : mcp_dtype_is_narrow(m->dtype) ? mcp_onnx_dtype_name(m->dtype)
                                                           : "UNKNOWN");
    mcp_buf_puts(b, ",\"shape\":[");
    for (int d = with_batch ? 0 : 1; d < m->rank; d++)
        mcp_buf_printf(b, "%s%lld", d > (with_batch ? 0 : 1) ? "," : "", (long long)m->dims[d]);
    mcp_buf_puts(b, "]}");
}

/* ---- synchronous handlers ---- */

static void h_live(conn *k)
{
    mcp_buf_puts(&k->resp, "{\"live\":true}");
    reply_buf(k, 200, "application/json");
}

static void h_ready(conn *k)
{
    bool ready = !mcp_frontend_stopping(k->srv->fe);
    mcp_buf_puts(&k->resp, ready ? "{\"ready\":true}" : "{\"ready\":false}");
    reply_buf(k, ready ? 200 : 503, "application/json");
}

static void h_server_metadata(conn *k)
{
    mcp_buf_puts(&k->resp, "{\"name\":\"mcp2026\",\"version\":\"" MCP_VERSION_STRING "\",\"extensions\":"
                           "[\"binary_tensor_data\",\"model_repository\",\"statistics\",\"schedule_policy\",\"model_configuration\",\"trace\",\"logging\"]}");
    reply_buf(k, 200, "application/json");
}

/* ,"lifecycle":[...]: the model's versions' latest transitions (at most
 * `last`), oldest first. */
static void put_lifecycle(mcp_buf *b, mcp_repository *repo, const char *name, int last)
{
    mcp_lifecycle_step steps[MCP_LIFECYCLE_KEPT];
    int n_steps = mcp_repository_lifecycle(repo, name, steps, MCP_LIFECYCLE_KEPT);
    mcp_buf_puts(b, ",\"lifecycle\":[");
    for (int i = n_steps > last ? n_steps - last : 0, first = i; i < n_steps; i++) {
        mcp_buf_puts(b, i > first ? ",{\"version\":" : "{\"version\":");
        mcp_buf_json_string(b, steps[i].version);
        mcp_buf_puts(b, ",\"state\":");
        mcp_buf_json_string(b, mcp_version_state_name(steps[i].state));
        mcp_buf_printf(b, ",\"time_ms\":%lld", (long long)steps[i].time_ms);
        if (steps[i].reason[0]) {
            mcp_buf_puts(b, ",\"reason\":");
            mcp_buf_json_string(b, steps[i].reason);
        }
        mcp_buf_puts(b, "}");
    }
    mcp_buf_puts(b, "]");
}

static void h_model_metadata(conn *k, const char *name, const char *version)
{
    mcp_model_version *v = find_model(k, name, version);
    if (!v) return;
    mcp_buf *b = &k->resp;
    mcp_buf_puts(b, "{\"name\":");
    mcp_buf_json_string(b, v->name);
    /* Every version the model serves (a Triton folder's policy may serve
     * several), current first. */
    char versions[MCP_MAX_SERVED][64];
    int nv = mcp_repository_versions(k->srv->repo, v->name, versions, MCP_MAX_SERVED);
    mcp_buf_puts(b, ",\"versions\":[");
    if (nv == 0) mcp_buf_json_string(b, v->version);
    for (int i = 0; i < nv; i++) {
        if (i) mcp_buf_puts(b, ",");
        mcp_buf_json_string(b, versions[i]);
    }
    mcp_buf_printf(b, "],\"platform\":\"%s\",\"inputs\":[", v->llm ? "gguf" : "onnx_onnxv1");
    for (int i = 0; i < v->n_inputs; i++) {
        if (i) mcp_buf_puts(b, ",");
        json_tensor_meta(b, &v->inputs[i], true);
    }
    mcp_buf_puts(b, "],\"outputs\":[");
    for (int i = 0; i < v->n_outputs; i++) {
        if (i) mcp_buf_puts(b, ",");
        json_tensor_meta(b, &v->outputs[i], true);
    }
    mcp_buf_puts(b, "]");
    put_lifecycle(b, k->srv->repo, v->name, MCP_LIFECYCLE_KEPT);
    mcp_buf_puts(b, "}");
    reply_buf(k, 200, "application/json");
    mcp_model_version_release(v);
}

static void h_model_ready(conn *k, const char *name, const char *version)
{
    mcp_model_version *v = mcp_repository_get(k->srv->repo, name, version);
    mcp_buf_puts(&k->resp, v ? "{\"ready\":true}" : "{\"ready\":false}");
    reply_buf(k, v ? 200 : 404, "application/json");
    mcp_model_version_release(v);
}

static void json_duration(mcp_buf *b, const char *name, int64_t count, int64_t ns)
{
    mcp_buf_printf(b, "\"%s\":{\"count\":%lld,\"ns\":%lld}", name, (long long)count, (long long)ns);
}

/* Statistics in Triton's shape: every stage, and batch_stats per size. */
static void json_model_stats(mcp_buf *b, mcp_model_version *v)
{
    mcp_scheduler_stats st = {0};
    mcp_batch_stat *sizes = NULL;
    int n_sizes = 0;
    if (v->serving) {
        mcp_scheduler_stats_get(v->serving, &st);
        n_sizes = mcp_scheduler_batch_stats_copy(v->serving, &sizes);
        if (n_sizes < 0) {
            b->failed = true; /* out of memory: the answer says so, never a partial list */
            return;
        }
    }
    mcp_buf_puts(b, "{\"name\":");
    mcp_buf_json_string(b, v->name);
    mcp_buf_puts(b, ",\"version\":");
    mcp_buf_json_string(b, v->version);
    mcp_buf_printf(b, ",\"last_inference\":%lld,\"inference_count\":%lld,\"execution_count\":%lld,\"inference_stats\":{",
                   (long long)st.last_inference_ms, (long long)st.inference_count, (long long)st.execution_count);
    int64_t n = st.inference_count;
    json_duration(b, "success", st.success_count, st.queue_ns + st.compute_input_ns + st.compute_ns + st.compute_output_ns);
    mcp_buf_puts(b, ",");
    json_duration(b, "fail", st.fail_count, 0);
    mcp_buf_puts(b, ",");
    json_duration(b, "queue", n, st.queue_ns);
    mcp_buf_puts(b, ",");
    json_duration(b, "compute_input", n, st.compute_input_ns);
    mcp_buf_puts(b, ",");
    json_duration(b, "compute_infer", n, st.compute_ns);
    mcp_buf_puts(b, ",");
    json_duration(b, "compute_output", n, st.compute_output_ns);
    mcp_buf_puts(b, "},\"batch_stats\":[");
    for (int i = 0; i < n_sizes; i++) {
        mcp_buf_printf(b, "%s{\"batch_size\":%lld,", i ? "," : "", (long long)sizes[i].batch_size);
        json_duration(b, "compute_input", sizes[i].count, sizes[i].compute_input_ns);
        mcp_buf_puts(b, ",");
        json_duration(b, "compute_infer", sizes[i].count, sizes[i].compute_infer_ns);
        mcp_buf_puts(b, ",");
        json_duration(b, "compute_output", sizes[i].count, sizes[i].compute_output_ns);
        mcp_buf_puts(b, "}");
    }
    mcp_buf_printf(b, "],\"queue_depth\":%lld", (long long)st.queue_depth);
    if (v->generator) {
        mcp_gen_stats g;
        mcp_gen_stats_get(v->generator, &g);
        mcp_buf_printf(b,
                       ",\"generation\":{\"running\":%lld,\"waiting\":%lld,\"requests\":%lld,\"prompt_tokens\":%lld,"
                       "\"generated_tokens\":%lld,\"preemptions\":%lld,\"kv_cache\":{\"used_blocks\":%lld,"
                       "\"total_blocks\":%lld,\"cached_blocks\":%lld,\"block_bytes\":%lld,\"used_bytes\":%lld,"
                       "\"evictions\":%lld},\"prefix_cache\":{\"queries\":%lld,\"hits\":%lld,\"hit_ratio\":%.6g,"
                       "\"cached_prompt_tokens\":%lld}}",
                       (long long)g.running, (long long)g.waiting, (long long)g.requests, (long long)g.prompt_tokens,
                       (long long)g.generated_tokens, (long long)g.preemptions, (long long)g.kv_used_blocks,
                       (long long)g.kv_total_blocks, (long long)g.kv_cached_blocks, (long long)g.kv_block_bytes,
                       (long long)(g.kv_used_blocks * g.kv_block_bytes), (long long)g.kv_evictions,
                       (long long)g.cache_queries, (long long)g.cache_hits,
                       g.cache_queries ? (double)g.cache_hits / (double)g.cache_queries : 0.0,
                       (long long)g.cached_prompt_tokens);
    }
    mcp_buf_puts(b, "}");
    mcp_free(sizes);
}

static void h_stats(conn *k, const char *name, const char *version)
{
    mcp_buf *b = &k->resp;
    if (name) {
        mcp_model_version *v = find_model(k, name, version);
        if (!v) return;
        mcp_buf_puts(b, "{\"model_stats\":[");
        json_model_stats(b, v);
        mcp_buf_puts(b, "]}");
        mcp_model_version_release(v);
    } else {
        mcp_repository_entry *list;
        int n = mcp_repository_index(k->srv->repo, &list);
        mcp_buf_puts(b, "{\"model_stats\":[");
        int shown = 0;
        for (int i = 0; i < n; i++) {
            if (!conn_sees(k, list[i].name)) continue;
            mcp_model_version *v = mcp_repository_get(k->srv->repo, list[i].name, NULL);
            if (!v) continue;
            if (shown++) mcp_buf_puts(b, ",");
            json_model_stats(b, v);
            mcp_model_version_release(v);
        }
        mcp_buf_puts(b, "]}");
        mcp_repository_entries_free(list, n);
    }
    reply_buf(k, 200, "application/json");
}

static const char *triton_type(mcp_dtype d)
{
    switch (d) {
    case MCP_DTYPE_BOOL: return "TYPE_BOOL";
    case MCP_DTYPE_UINT8: return "TYPE_UINT8";
    case MCP_DTYPE_UINT16: return "TYPE_UINT16";
    case MCP_DTYPE_UINT32: return "TYPE_UINT32";
    case MCP_DTYPE_UINT64: return "TYPE_UINT64";
    case MCP_DTYPE_INT8: return "TYPE_INT8";
    case MCP_DTYPE_INT16: return "TYPE_INT16";
    case MCP_DTYPE_INT32: return "TYPE_INT32";
    case MCP_DTYPE_INT64: return "TYPE_INT64";
    case MCP_DTYPE_FLOAT16: return "TYPE_FP16";
    case MCP_DTYPE_FLOAT: return "TYPE_FP32";
    case MCP_DTYPE_DOUBLE: return "TYPE_FP64";
    case MCP_DTYPE_BFLOAT16: return "TYPE_BF16";
    case MCP_DTYPE_STRING: return "TYPE_STRING";
    default: return "TYPE_INVALID";
    }
}

/* Model configuration in Triton's JSON form (dims exclude the batch dim). */
static void json_model_config(mcp_buf *b, const mcp_model_version *v)
{
    const mcp_descriptor *d = v->desc;
    bool batched = d->max_batch_size > 0;
    mcp_buf_puts(b, "{\"name\":");
    mcp_buf_json_string(b, v->name);
    mcp_buf_printf(b, ",\"platform\":\"onnxruntime_onnx\",\"backend\":\"mcp\",\"max_batch_size\":%lld,\"input\":[",
                   (long long)d->max_batch_size);
    for (int io = 0; io < 2; io++) {
        const mcp_tensor_meta *m = io ? v->outputs : v->inputs;
        int n = io ? v->n_outputs : v->n_inputs;
        if (io) mcp_buf_puts(b, "],\"output\":[");
        for (int i = 0; i < n; i++) {
            mcp_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
            mcp_buf_json_string(b, m[i].name);
            mcp_buf_printf(b, ",\"data_type\":\"%s\",\"dims\":[", triton_type(m[i].dtype));
            for (int k = batched ? 1 : 0; k < m[i].rank; k++)
                mcp_buf_printf(b, "%s%lld", k > (batched ? 1 : 0) ? "," : "", (long long)m[i].dims[k]);
            mcp_buf_puts(b, "]}");
        }
    }
    mcp_buf_printf(b, "],\"instance_group\":[{\"kind\":\"KIND_CPU\",\"count\":%lld}]", (long long)d->instance_count);
    if (batched && d->batching.enabled) {
        mcp_buf_puts(b, ",\"dynamic_batching\":{\"preferred_batch_size\":[");
        for (int i = 0; i < d->batching.n_preferred; i++)
            mcp_buf_printf(b, "%s%lld", i ? "," : "", (long long)d->batching.preferred[i]);
        mcp_buf_printf(b, "],\"max_queue_delay_microseconds\":%lld,\"default_queue_policy\":{\"max_queue_size\":%lld,"
                          "\"default_timeout_microseconds\":%lld}}",
                       (long long)d->batching.max_queue_delay_us, (long long)d->batching.max_queue_size,
                       (long long)d->batching.default_timeout_us);
    }
    mcp_buf_puts(b, ",\"version\":");
    mcp_buf_json_string(b, v->version);
    mcp_buf_puts(b, "}");
}

static void h_model_config(conn *k, const char *name, const char *version)
{
    mcp_model_version *v = find_model(k, name, version);
    if (!v) return;
    json_model_config(&k->resp, v);
    reply_buf(k, 200, "application/json");
    mcp_model_version_release(v);
}

/* Parses the request body as a JSON object; on a syntax error replies 400
 * naming the byte offset, and on anything but an object 400 saying so, and
 * returns NULL. An empty body gives an empty object. */
static json_t *body_json(conn *k)
{
    if (k->body.len == 0) return json_object();
    json_error_t jerr;
    json_t *root = json_loadb((const char *)k->body.data, k->body.len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        reply_error(k, 400, "malformed JSON at byte offset %d (line %d, column %d): %s", jerr.position, jerr.line,
                    jerr.column, jerr.text);
    } else if (!json_is_object(root)) {
        reply_error(k, 400, "the request body must be a JSON object, not %s",
                    json_is_array(root) ? "an array" : "a scalar");
        json_decref(root);
        root = NULL;
    }
    return root;
}

static void h_repo_index(conn *k)
{
    /* Optional body {"ready": true}: only models ready for inference. */
    json_t *root = body_json(k);
    if (!root) return;
    json_t *ready = json_object_get(root, "ready");
    bool only_ready = ready && json_is_true(ready);
    bool bad = ready && !json_is_boolean(ready);
    json_decref(root);
    if (bad) {
        reply_error(k, 400, "field 'ready' must be true or false");
        return;
    }
    mcp_repository_entry *list;
    int n = mcp_repository_index(k->srv->repo, &list);
    mcp_buf *b = &k->resp;
    mcp_buf_puts(b, "[");
    int shown = 0;
    for (int i = 0; i < n; i++) {
        if ((only_ready && list[i].state != MCP_MODEL_READY) || !conn_sees(k, list[i].name)) continue;
        mcp_buf_puts(b, shown++ ? ",{\"name\":" : "{\"name\":");
        mcp_buf_json_string(b, list[i].name);
        mcp_buf_puts(b, ",\"version\":");
        mcp_buf_json_string(b, list[i].version);
        mcp_buf_puts(b, ",\"state\":");
        mcp_buf_json_string(b, mcp_model_state_name(list[i].state));
        mcp_buf_puts(b, ",\"reason\":");
        mcp_buf_json_string(b, list[i].reason);
        put_lifecycle(b, k->srv->repo, list[i].name, 4); /* the latest: the index stays small */
        mcp_buf_puts(b, "}");
    }
    mcp_buf_puts(b, "]");
    mcp_repository_entries_free(list, n);
    reply_buf(k, 200, "application/json");
}

static void json_io_specs(mcp_buf *b, const mcp_io_spec *io, int n)
{
    mcp_buf_puts(b, "[");
    for (int i = 0; i < n; i++) {
        mcp_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        mcp_buf_json_string(b, io[i].name);
        if (io[i].graph_name) {
            mcp_buf_puts(b, ",\"graph_name\":");
            mcp_buf_json_string(b, io[i].graph_name);
        }
        const char *dt = io[i].dtype == MCP_DTYPE_UNDEFINED ? "model" : mcp_oip_datatype(io[i].dtype);
        mcp_buf_puts(b, ",\"datatype\":");
        mcp_buf_json_string(b, dt ? dt : mcp_dtype_name(io[i].dtype));
        mcp_buf_puts(b, ",\"shape\":[");
        for (int d = 0; d < io[i].rank; d++) mcp_buf_printf(b, "%s%lld", d ? "," : "", (long long)io[i].dims[d]);
        mcp_buf_puts(b, "]}");
    }
    mcp_buf_puts(b, "]");
}

/* Every descriptor field as applied: defaults filled in, limits applied. */
static void json_descriptor(mcp_buf *b, const mcp_descriptor *d)
{
    const mcp_batching *bt = &d->batching;
    mcp_buf_puts(b, "{\"format\":");
    mcp_buf_json_string(b, d->format);
    mcp_buf_puts(b, ",\"device\":");
    mcp_buf_json_string(b, d->device);
    mcp_buf_puts(b, ",\"precision\":");
    mcp_buf_json_string(b, d->precision);
    if (d->precision && strcmp(d->precision, "int8") == 0)
        mcp_buf_printf(b, ",\"quantization\":\"%s\"", d->calibration ? "static" : "dynamic");
    mcp_buf_printf(b, ",\"max_batch_size\":%lld,\"batching\":{\"enabled\":%s,\"max_queue_delay_us\":%lld,"
                      "\"preferred_batch_sizes\":[",
                   (long long)d->max_batch_size, bt->enabled ? "true" : "false", (long long)bt->max_queue_delay_us);
    for (int i = 0; i < bt->n_preferred; i++) mcp_buf_printf(b, "%s%lld", i ? "," : "", (long long)bt->preferred[i]);
    mcp_buf_printf(b,
                   "],\"max_queue_size\":%lld,\"default_timeout_us\":%lld,\"prefetch_queue_depth\":%lld,"
                   "\"enable_tensor_cache\":%s},\"instances\":{\"count\":%lld,\"threads\":%lld},\"warmup\":%lld,",
                   (long long)bt->max_queue_size, (long long)bt->default_timeout_us, (long long)bt->prefetch_queue_depth,
                   bt->enable_tensor_cache ? "true" : "false", (long long)d->instance_count,
                   (long long)d->instance_threads, (long long)d->warmup_runs);
    if (d->cpus > 0 || d->memory_bytes > 0) {
        mcp_buf_puts(b, "\"resources\":{");
        if (d->cpus > 0) mcp_buf_printf(b, "\"cpus\":%.6g%s", d->cpus, d->memory_bytes > 0 ? "," : "");
        if (d->memory_bytes > 0) mcp_buf_printf(b, "\"memory\":%lld", (long long)d->memory_bytes);
        mcp_buf_puts(b, "},");
    }
    mcp_buf_puts(b, "\"inputs\":");
    json_io_specs(b, d->inputs, d->n_inputs);
    mcp_buf_puts(b, ",\"outputs\":");
    json_io_specs(b, d->outputs, d->n_outputs);
    for (int side = 0; side < 2; side++) {
        const mcp_step *st = side ? d->post : d->pre;
        int n = side ? d->n_post : d->n_pre;
        mcp_buf_puts(b, side ? "],\"postprocess\":[" : ",\"preprocess\":[");
        for (int i = 0; i < n; i++) {
            if (i) mcp_buf_puts(b, ",");
            mcp_buf_json_string(b, mcp_step_kind_name(st[i].kind));
        }
    }
    mcp_buf_puts(b, "]}");
}

static void h_repo_describe(conn *k, const char *name)
{
    mcp_repository_entry *list;
    int n = mcp_repository_index(k->srv->repo, &list);
    const mcp_repository_entry *e = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0) e = &list[i];
    if (!e) {
        reply_error(k, 404, "unknown model '%s'", name);
        mcp_repository_entries_free(list, n);
        return;
    }
    mcp_buf *b = &k->resp;
    mcp_buf_puts(b, "{\"name\":");
    mcp_buf_json_string(b, e->name);
    mcp_buf_puts(b, ",\"version\":");
    mcp_buf_json_string(b, e->version);
    mcp_buf_puts(b, ",\"state\":");
    mcp_buf_json_string(b, mcp_model_state_name(e->state));
    mcp_buf_puts(b, ",\"reason\":");
    mcp_buf_json_string(b, e->reason);
    mcp_model_version *cur = mcp_repository_get(k->srv->repo, name, NULL);
    if (cur && cur->fingerprint[0]) {
        mcp_buf_puts(b, ",\"fingerprint\":");
        mcp_buf_json_string(b, cur->fingerprint);
    }
    mcp_model_version_release(cur);
    put_lifecycle(b, k->srv->repo, name, MCP_LIFECYCLE_KEPT);
    mcp_model_version *v = mcp_repository_get(k->srv->repo, name, NULL);
    if (v) {
        /* Relative to its model root: no absolute host path leaves. */
        char shown[1024];
        mcp_buf_puts(b, ",\"path\":");
        mcp_buf_json_string(b, mcp_model_roots_display(mcp_repository_defaults(k->srv->repo)->roots, v->desc->path, shown,
                                                       sizeof shown));
        mcp_buf_puts(b, ",\"format\":");
        mcp_buf_json_string(b, v->desc->format);
        mcp_buf_puts(b, ",\"device\":");
        mcp_buf_json_string(b, v->desc->device);
        /* What it runs at; the descriptor below says what was asked. */
        mcp_buf_puts(b, ",\"precision\":");
        mcp_buf_json_string(b, v->precision ? v->precision : v->desc->precision);
        if (v->load_note) {
            mcp_buf_puts(b, ",\"load_note\":");
            mcp_buf_json_string(b, v->load_note);
        }
        mcp_buf_puts(b, ",\"descriptor\":");
        json_descriptor(b, v->desc);
        mcp_buf_printf(b, ",\"memory_bytes\":%zu,\"config\":", mcp_model_version_bytes(v));
        json_model_config(b, v);
        mcp_buf_puts(b, ",\"stats\":");
        json_model_stats(b, v);
        mcp_model_version_release(v);
    }
    mcp_buf_puts(b, "}");
    mcp_repository_entries_free(list, n);
    reply_buf(k, 200, "application/json");
}

/* Reads parameters.config (descriptor text) from a load request body, if
 * any, and parameters.descriptor_path: where the descriptor file lives, so
 * its relative `path` resolves as it would for a local file (mcpctl apply
 * sends both; a client on another machine sends only the text). */
static bool load_config_text(conn *k, char **text, char **source, bool *wait)
{
    *text = NULL;
    *source = NULL;
    *wait = true;
    json_t *root = body_json(k);
    if (!root) return false;
    json_t *params = json_object_get(root, "parameters");
    if (params && !json_is_object(params)) {
        reply_error(k, 400, "'parameters' must be an object");
        json_decref(root);
        return false;
    }
    /* Triton's "file:<path>" parameters carry model files in the request.
     * Refused rather than ignored: put the files in the repository. */
    const char *key;
    json_t *val;
    json_object_foreach(params, key, val) {
        (void)val;
        if (!strncmp(key, "file:", 5)) {
            reply_error(k, 400, "parameters.'%.100s': file overrides in a load request are not supported; put the model's "
                                "files under a model root of the server", key);
            json_decref(root);
            return false;
        }
    }
    json_t *w = json_object_get(params, "wait");
    if (w && !json_is_boolean(w)) {
        reply_error(k, 400, "parameters.wait must be true or false");
        json_decref(root);
        return false;
    }
    if (w) *wait = json_is_true(w);
    json_t *cfg = json_object_get(params, "config");
    if (cfg && !json_is_string(cfg)) {
        reply_error(k, 400, "parameters.config must be a string holding the model descriptor");
        json_decref(root);
        return false;
    }
    if (cfg && json_string_length(cfg) > MCP__DESC_MAX_TEXT) {
        reply_error(k, 413, "parameters.config is %zu bytes; a descriptor is at most %u bytes", json_string_length(cfg),
                    MCP__DESC_MAX_TEXT);
        json_decref(root);
        return false;
    }
    if (cfg) *text = mcp_strdup(json_string_value(cfg));
    json_t *src = json_object_get(params, "descriptor_path");
    if (src && json_is_string(src) && json_string_value(src)[0] == '/') *source = mcp_strdup(json_string_value(src));
    json_decref(root);
    return true;
}

/* Management calls (load, unload): the serving core decides. */
static bool admin_allowed(conn *k)
{
    char msg[300];
    mcp_err err = {msg, sizeof msg};
    const char *auth = MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "Authorization");
    /* Browsers send Origin with every cross-site POST; management clients
     * (curl, mcpctl, Triton's clients) do not. Refused, so a web page the
     * operator visits cannot load or unload models on a loopback server. */
    if (MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "Origin")) {
        reply_error(k, 403, "model control is not taken from web pages (the request has an Origin header)");
        return false;
    }
    mcp_status st = mcp_frontend_authorize_control(k->srv->fe, auth, &err);
    if (st == MCP_STATUS_OK) return true;
    reply_error(k, mcp_status_http_code(st), "%s", msg);
    k->www_authenticate = st == MCP_STATUS_UNAUTHENTICATED;
    return false;
}

/* ---- suspended connections: answers that come from another thread ---- */

static void waiting_remove(mcp_server *s, conn *k)
{
    pthread_mutex_lock(&s->wait_mu);
    for (conn **p = &s->waiting; *p; p = &(*p)->next_waiting)
        if (*p == k) {
            *p = k->next_waiting;
            break;
        }
    k->next_waiting = NULL;
    pthread_mutex_unlock(&s->wait_mu);
}

/* Suspends the connection until resume_answered; call before handing the
 * work to another thread (the answer may come at once). */
static void suspend(conn *k)
{
    mcp_server *s = k->srv;
    atomic_store(&k->phase, PHASE_WAITING);
    pthread_mutex_lock(&s->wait_mu);
    k->next_waiting = s->waiting;
    s->waiting = k;
    pthread_mutex_unlock(&s->wait_mu);
    k->suspended = true;
    MHD_suspend_connection(k->mhd);
}

/* The answer is in k->resp / k->code: a transport thread sends it. */
static void resume_answered(conn *k)
{
    waiting_remove(k->srv, k);
    atomic_store(&k->phase, PHASE_READY);
    MHD_resume_connection(k->mhd);
}

/* ---- model control: loads and unloads run on the frontend's loader ---- */

static void control_done(mcp_control *ctl)
{
    conn *k = ctl->user;
    mcp_free(ctl->descriptor);
    mcp_free(ctl->source);
    ctl->descriptor = ctl->source = NULL;
    mcp_buf_reset(&k->resp);
    k->json_len = 0;
    if (ctl->status != MCP_STATUS_OK) {
        mcp_codec_error(ctl->message[0] ? ctl->message : mcp_status_str(ctl->status), &k->resp);
        k->code = mcp_status_http_code(ctl->status);
    } else {
        if (ctl->answer) mcp_buf_puts(&k->resp, ctl->answer);
        k->code = 200;
    }
    mcp_free(ctl->answer);
    ctl->answer = NULL;
    k->content_type = "application/json";
    resume_answered(k);
}

/* Queues the control job of k; the connection waits for its answer while
 * every other request keeps flowing. */
static void start_control(conn *k)
{
    k->ctl.done = control_done;
    k->ctl.user = k;
    suspend(k);
    mcp_status st = mcp_frontend_control(k->srv->fe, &k->ctl);
    if (st != MCP_STATUS_OK) {
        k->ctl.status = st;
        snprintf(k->ctl.message, sizeof k->ctl.message, "%s",
                 st == MCP_STATUS_UNAVAILABLE            ? "server is shutting down"
                 : st == MCP_STATUS_RESOURCE_EXHAUSTED ? "too many model loads and unloads are queued; retry later"
                                                       : "out of memory");
        control_done(&k->ctl);
    }
}

/* A load the caller does not wait for: the job owns its control. */
static void detached_done(mcp_control *ctl)
{
    mcp_free(ctl->descriptor);
    mcp_free(ctl->source);
    mcp_free(ctl);
}

static void h_repo_load(conn *k, const char *name)
{
    if (!admin_allowed(k)) return;
    char *text, *source;
    bool wait;
    if (!load_config_text(k, &text, &source, &wait)) return;
    mcp_control *ctl = wait ? &k->ctl : mcp_calloc(1, sizeof *ctl);
    if (!ctl) {
        mcp_free(text);
        mcp_free(source);
        reply_error(k, 503, "out of memory");
        return;
    }
    memset(ctl, 0, sizeof *ctl);
    mcp_identity_describe(&k->who, k->peer, ctl->actor, sizeof ctl->actor);
    ctl->op = MCP_CONTROL_LOAD;
    snprintf(ctl->name, sizeof ctl->name, "%s", name);
    ctl->descriptor = text;
    ctl->source = source;
    if (wait) {
        start_control(k);
        return;
    }
    /* parameters.wait false: 202 now; the index shows how the load goes. */
    ctl->done = detached_done;
    mcp_status st = mcp_frontend_control(k->srv->fe, ctl);
    if (st != MCP_STATUS_OK) {
        detached_done(ctl);
        if (st == MCP_STATUS_RESOURCE_EXHAUSTED) reply_error(k, 429, "too many model loads and unloads are queued; retry later");
        else reply_error(k, 503, "server is shutting down");
        return;
    }
    mcp_buf_puts(&k->resp, "{\"state\":\"LOADING\"}");
    reply_buf(k, 202, "application/json");
}

static void h_repo_unload(conn *k, const char *name)
{
    if (!admin_allowed(k)) return;
    memset(&k->ctl, 0, sizeof k->ctl);
    mcp_identity_describe(&k->who, k->peer, k->ctl.actor, sizeof k->ctl.actor);
    k->ctl.op = MCP_CONTROL_UNLOAD;
    snprintf(k->ctl.name, sizeof k->ctl.name, "%s", name);
    start_control(k);
}

/* ---- rollout: GET and POST /v2/models/{m}/rollout (management calls) ---- */

static void h_rollout_get(conn *k, const char *name)
{
    if (!admin_allowed(k)) return;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_frontend_rollout_json(k->srv->fe, name, &k->resp, &err);
    if (st != MCP_STATUS_OK) {
        mcp_buf_free(&k->resp);
        reply_error(k, mcp_status_http_code(st), "%s", msg);
        return;
    }
    reply_buf(k, 200, "application/json");
}

static void h_rollout_post(conn *k, const char *name)
{
    if (!admin_allowed(k)) return;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    memset(&k->ctl, 0, sizeof k->ctl);
    mcp_identity_describe(&k->who, k->peer, k->ctl.actor, sizeof k->ctl.actor);
    mcp_status st = mcp_frontend_rollout_parse(k->srv->fe, name, (const char *)k->body.data, k->body.len, &k->ctl, &err);
    if (st != MCP_STATUS_OK) {
        reply_error(k, mcp_status_http_code(st), "%s", msg);
        return;
    }
    start_control(k);
}

/* GET /v1/models answers two protocols at once: KServe v1's "models" (the
 * names) and OpenAI's list object ("object", "data"), so that either
 * client reads it. */
static void h_v1_list(conn *k)
{
    mcp_repository_entry *list;
    int n = mcp_repository_index(k->srv->repo, &list);
    for (int pass = 0; pass < 2; pass++) {
        mcp_buf_puts(&k->resp, pass ? "],\"object\":\"list\",\"data\":[" : "{\"models\":[");
        int shown = 0;
        for (int i = 0; i < n; i++) {
            if (list[i].state != MCP_MODEL_READY || !conn_sees(k, list[i].name)) continue;
            if (shown++) mcp_buf_puts(&k->resp, ",");
            if (pass) mcp_buf_puts(&k->resp, "{\"id\":");
            mcp_buf_json_string(&k->resp, list[i].name);
            if (pass) mcp_buf_printf(&k->resp, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"mcp2026\"}",
                                     (long long)k->srv->started_s);
        }
    }
    mcp_buf_puts(&k->resp, "]}");
    mcp_repository_entries_free(list, n);
    reply_buf(k, 200, "application/json");
}

static void h_v1_model(conn *k, const char *name)
{
    mcp_model_version *v = find_model(k, name, NULL);
    if (!v) return;
    mcp_buf_puts(&k->resp, "{\"name\":");
    mcp_buf_json_string(&k->resp, name);
    mcp_buf_puts(&k->resp, ",\"ready\":true,\"id\":");
    mcp_buf_json_string(&k->resp, name);
    mcp_buf_printf(&k->resp, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"mcp2026\"}",
                   (long long)k->srv->started_s);
    reply_buf(k, 200, "application/json");
    mcp_model_version_release(v);
}

static void h_metrics(conn *k)
{
    mcp_metrics_render(mcp_frontend_metrics(k->srv->fe), &k->resp);
    mcp_monitor_set_render(mcp_frontend_monitors(k->srv->fe), &k->resp);
    mcp_tracer *t = mcp_frontend_tracer(k->srv->fe);
    if (t) mcp_tracer_render_metrics(t, &k->resp);
    /* A tenant's caller sees its own models' and tenant's series only. */
    if (mcp_frontend_auth_enabled(k->srv->fe) && !(k->who.roles & MCP_ROLE_ADMIN) && !k->resp.failed) {
        mcp_buf all = k->resp;
        memset(&k->resp, 0, sizeof k->resp);
        mcp_metrics_filter((const char *)all.data, all.len, conn_keep, k, &k->resp);
        mcp_buf_free(&all);
    }
    reply_buf(k, 200, "text/plain; version=0.0.4");
}

static void h_openapi(conn *k)
{
    mcp_buf_append(&k->resp, mcp__openapi_json, mcp__openapi_json_len);
    reply_buf(k, 200, "application/json");
}

/* ---- inference (asynchronous) ---- */

/* The frontend's answer to an inference (any thread). */
static void http_respond(mcp_call *c)
{
    conn *k = c->user;
    /* The answer's bytes move to the connection's response. */
    mcp_buf_free(&k->resp);
    k->resp = c->out;
    memset(&c->out, 0, sizeof c->out);
    k->json_len = c->json_len;
    k->code = c->status == MCP_STATUS_OK ? 200 : mcp_status_http_code(c->status);
    k->content_type = k->json_len ? "application/octet-stream" : "application/json";
    k->retry_after_s = c->retry_after_s;
    /* The version that answered, on every protocol (OIP v2 also has it in
     * the body): a client sees which one served it during a rollout. */
    k->answered_by[0] = '\0';
    if (c->req && c->req->model_version && c->status == MCP_STATUS_OK)
        snprintf(k->answered_by, sizeof k->answered_by, "%s", c->req->model_version);
    if (k->suspended) resume_answered(k);
}

/* Once per answer, however often it is told (a call parked for a cold
 * start is told when parked and again when queued). */
static void http_on_queued(mcp_call *c)
{
    conn *k = c->user;
    if (!k->suspended) suspend(k);
}

/* The call's trace context from its headers; without a tracer no header
 * is looked up. */
static void trace_start(conn *k)
{
    if (!mcp_frontend_tracer(k->srv->fe)) return;
    mcp_call *c = &k->call;
    mcp_frontend_trace_start(k->srv->fe, c, MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "traceparent"),
                             MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "tracestate"), k->t_start_ns);
    if (c->trace.pending) c->trace.t_received_ns = mcp_now_ns();
}

static void start_inference(conn *k, mcp_protocol proto, const char *model, const char *version)
{
    mcp_call *c = &k->call;
    c->codec = mcp_codec_get(proto);
    c->wire = (mcp_wire){.body = k->body.data, .len = k->body.len, .header_len = -1};
    c->model = model;
    c->version = version;
    c->on_queued = http_on_queued;
    c->respond = http_respond;
    c->user = k;
    c->who = k->who;
    c->peer = k->peer;
    trace_start(k);
    if (proto == MCP_PROTOCOL_V2) {
        const char *hl = MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "Inference-Header-Content-Length");
        if (hl) {
            char *end;
            errno = 0;
            long long x = strtoll(hl, &end, 10);
            if (errno || *end || x < 0 || !hl[0]) {
                reply_error(k, 400, "header Inference-Header-Content-Length '%.60s' is not a non-negative integer", hl);
                return;
            }
            c->wire.header_len = x;
        }
    }
    mcp_frontend_infer(k->srv->fe, c);
}


/* ---- text generation: OIP generate / generate_stream, OpenAI completions ---- */

/* What joins a connection and its generation requests: the step thread
 * writes into it, the transport reads from it. References: the
 * connection's (or its stream response's) and one per queued request,
 * dropped at its last event. */
typedef struct gen_link {
    atomic_int refs;
    pthread_mutex_t mu;
    conn *k;              /* NULL once the connection ended */
    struct MHD_Connection *mhd;
    bool stream;
    mcp_oai_answer *oai;  /* an OpenAI answer; NULL: the OIP generate extension */
    mcp_gen_request *reqs[MCP_OAI_MAX_CHOICES]; /* the link's references, to cancel them */
    int n_reqs;
    mcp_buf out;          /* stream: bytes not yet taken by libmicrohttpd */
    size_t taken;
    mcp_buf text;         /* the whole answer (OIP, not streamed) */
    bool done, suspended;
    char model[256], version[128];
} gen_link;

static gen_link *gen_link_create(conn *k, bool stream)
{
    gen_link *l = mcp_calloc(1, sizeof *l);
    if (!l) return NULL;
    atomic_init(&l->refs, 1);
    pthread_mutex_init(&l->mu, NULL);
    l->k = k;
    l->mhd = k->mhd;
    l->stream = stream;
    return l;
}

static void gen_link_release(gen_link *l)
{
    if (!l || atomic_fetch_sub(&l->refs, 1) != 1) return;
    pthread_mutex_destroy(&l->mu);
    for (int i = 0; i < l->n_reqs; i++) mcp_gen_request_release(l->reqs[i]);
    if (l->oai) mcp_oai_answer_free(l->oai);
    mcp_free(l->oai);
    mcp_buf_free(&l->out);
    mcp_buf_free(&l->text);
    mcp_free(l);
}

/* Ends every sequence of the link at its next step (harmless once ended). */
static void gen_link_cancel(gen_link *l)
{
    for (int i = 0; i < l->n_reqs; i++) atomic_store(&l->reqs[i]->cancel, true);
}

static void sse_event(gen_link *l, const char *text, size_t len, const char *error)
{
    mcp_buf *b = &l->out;
    mcp_buf_puts(b, "data: {\"model_name\":");
    mcp_buf_json_string(b, l->model);
    mcp_buf_puts(b, ",\"model_version\":");
    mcp_buf_json_string(b, l->version);
    if (error) {
        mcp_buf_puts(b, ",\"error\":");
        mcp_buf_json_string(b, error);
    } else {
        mcp_buf_puts(b, ",\"text_output\":");
        mcp_buf_json_stringn(b, text, len);
    }
    mcp_buf_puts(b, "}\n\n");
}

static void gen_answer(conn *k, gen_link *l, const mcp_gen_event *e);

/* The step thread's events (it holds no lock of ours). */
static void gen_on_event(mcp_gen_request *r, const mcp_gen_event *e)
{
    gen_link *l = r->user;
    pthread_mutex_lock(&l->mu);
    if (l->oai) {
        bool failed = l->oai->failed;
        bool complete = mcp_oai_event(l->oai, r->index, e, &l->out);
        if (!failed && l->oai->failed) gen_link_cancel(l); /* one choice failed: the answer is an error */
        if (complete) {
            l->done = true;
            if (!l->stream && l->k) {
                conn *k = l->k;
                mcp_buf_reset(&k->resp);
                k->json_len = 0;
                k->content_type = "application/json";
                mcp_oai_response(l->oai, &k->resp, &k->code);
                resume_answered(k);
            }
        }
    } else if (e->kind == MCP_GEN_TOKEN) {
        if (l->stream && e->len) sse_event(l, e->text, e->len, NULL);
        else if (!l->stream) mcp_buf_append(&l->text, e->text, e->len);
    } else {
        l->done = true;
        if (l->stream && e->status != MCP_STATUS_OK) sse_event(l, NULL, 0, e->message[0] ? e->message : mcp_status_str(e->status));
        if (!l->stream && l->k) gen_answer(l->k, l, e);
    }
    if (l->stream && l->suspended && l->k) {
        l->suspended = false;
        MHD_resume_connection(l->mhd);
    }
    pthread_mutex_unlock(&l->mu);
    if (e->kind == MCP_GEN_DONE) gen_link_release(l); /* the request's last event */
}
/* The libmicrohttpd side of a stream: what the step thread wrote, or a
 * pause until it writes more. */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    gen_link *l = cls;
    pthread_mutex_lock(&l->mu);
    ssize_t n = 0;
    size_t avail = l->out.len - l->taken;
    if (avail) {
        n = (ssize_t)(avail < max ? avail : max);
        memcpy(buf, l->out.data + l->taken, (size_t)n);
        l->taken += (size_t)n;
        if (l->taken == l->out.len) l->out.len = l->taken = 0;
    } else if (l->done || l->out.failed) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        l->suspended = true;
        MHD_suspend_connection(l->mhd);
    }
    pthread_mutex_unlock(&l->mu);
    return n;
}

static void sse_free(void *cls) { gen_link_release(cls); }

/* Reads the generate parameters (top level or under "parameters"). */
static bool gen_params(conn *k, json_t *body, const mcp_model_version *v, mcp_gen_request *r)
{
    json_t *params = json_object_get(body, "parameters");
    if (params && !json_is_object(params)) {
        reply_error(k, 400, "'parameters' must be an object");
        return false;
    }
    const mcp_generation *g = &v->desc->generation;
    for (int pass = 0; pass < 2; pass++) {
        json_t *o = pass ? params : body;
        if (!o) continue;
        const char *key;
        json_t *val;
        json_object_foreach(o, key, val) {
            char msg[300];
            mcp_err err = {msg, sizeof msg};
            int p = mcp_gen_param(!strcmp(key, "stop_words") ? "stop" : key, val, g, r, &err);
            if (p < 0) {
                reply_error(k, 400, "%s", msg);
                return false;
            }
            if (p > 0 || !strcmp(key, "text_input") || !strcmp(key, "parameters") || !strcmp(key, "stream") ||
                !strcmp(key, "id"))
                continue;
            reply_error(k, 400, "unknown generate parameter '%.100s' (known: text_input, max_tokens, temperature, top_p, "
                                "top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty, seed, stop, "
                                "ignore_eos, priority, timeout, stream)", key);
            return false;
        }
    }
    return true;
}

/* The whole answer of a generate call (not streamed), on the step thread. */
static void gen_answer(conn *k, gen_link *l, const mcp_gen_event *e)
{
    mcp_buf_reset(&k->resp);
    k->json_len = 0;
    k->content_type = "application/json";
    if (e->status != MCP_STATUS_OK) {
        mcp_codec_error(e->message[0] ? e->message : mcp_status_str(e->status), &k->resp);
        k->code = mcp_status_http_code(e->status);
    } else {
        mcp_buf_puts(&k->resp, "{\"model_name\":");
        mcp_buf_json_string(&k->resp, l->model);
        mcp_buf_puts(&k->resp, ",\"model_version\":");
        mcp_buf_json_string(&k->resp, l->version);
        mcp_buf_puts(&k->resp, ",\"text_output\":");
        mcp_buf_json_stringn(&k->resp, l->text.data ? (const char *)l->text.data : "", l->text.len);
        mcp_buf_printf(&k->resp, ",\"finish_reason\":\"%s\",\"prompt_tokens\":%lld,\"completion_tokens\":%lld}",
                       e->finish_reason ? e->finish_reason : "stop", (long long)e->prompt_tokens, (long long)e->completion_tokens);
        k->code = 200;
    }
    resume_answered(k);
}

/* The prefix-cache key of the request's tenant: the authenticated one's;
 * on a server without access rules, the `tenant` header (none: the
 * anonymous tenant). false when the header is malformed (answered). */
static bool tenant_key(conn *k, uint8_t key[32], void (*fail)(conn *k, mcp_status st, const char *msg))
{
    if (k->who.authenticated) return mcp_frontend_tenant_key(k->srv->fe, k->who.tenant, strlen(k->who.tenant), key);
    const char *t = mcp_frontend_auth_enabled(k->srv->fe) ? NULL : MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "tenant");
    if (!mcp_frontend_tenant_key(k->srv->fe, t ? t : "", t ? strlen(t) : 0, key)) {
        fail(k, MCP_STATUS_INVALID_ARGUMENT, "header 'tenant' must be " MCP_TENANT_RULE);
        return false;
    }
    return true;
}

/* Queues the link's requests on version v; false when the answer is an
 * error already written by fail (nothing of the link then reaches the
 * client). Takes over the caller's reference to l. */
static bool gen_submit(conn *k, gen_link *l, const mcp_model_version *v,
                       void (*fail)(conn *k, mcp_status st, const char *msg))
{
    uint8_t key[32];
    if (!tenant_key(k, key, fail)) {
        gen_link_release(l);
        return false;
    }
    for (int i = 0; i < l->n_reqs; i++) memcpy(l->reqs[i]->cache_key, key, sizeof key);
    snprintf(l->model, sizeof l->model, "%s", v->name);
    snprintf(l->version, sizeof l->version, "%s", v->version);
    atomic_fetch_add(&l->refs, l->n_reqs); /* each request's, until its last event */
    for (int i = 0; i < l->n_reqs; i++) {
        l->reqs[i]->on_event = gen_on_event;
        l->reqs[i]->user = l;
    }
    k->gen = l;
    if (!l->stream) suspend(k); /* the answer may come at once */
    char msg[400];
    mcp_err err = {msg, sizeof msg};
    int submitted = 0;
    mcp_status st = mcp_frontend_generate(k->srv->fe, &k->who, k->peer, v->name, v->version, l->reqs, l->n_reqs, &submitted,
                                          k->answered_by, sizeof k->answered_by, &err);
    if (st != MCP_STATUS_OK) {
        pthread_mutex_lock(&l->mu);
        l->k = NULL; /* the queued ones end cancelled, unheard */
        pthread_mutex_unlock(&l->mu);
        for (int i = submitted; i < l->n_reqs; i++) gen_link_release(l); /* never queued */
        fail(k, st, msg);
        if (!l->stream) resume_answered(k);
        return false;
    }
    if (l->stream) {
        k->streaming = true;
        pthread_mutex_lock(&k->srv->wait_mu);
        k->next_waiting = k->srv->waiting;
        k->srv->waiting = k;
        pthread_mutex_unlock(&k->srv->wait_mu);
    }
    return true;
}

static void oip_fail(conn *k, mcp_status st, const char *msg) { reply_error(k, mcp_status_http_code(st), "%s", msg); }

static json_t *gen_body(conn *k, void (*fail)(conn *k, mcp_status st, const char *msg))
{
    json_error_t jerr;
    json_t *body = json_loadb((const char *)k->body.data, k->body.len, JSON_REJECT_DUPLICATES, &jerr);
    if (!body || !json_is_object(body)) {
        char msg[300];
        if (body) snprintf(msg, sizeof msg, "the request body must be a JSON object");
        else snprintf(msg, sizeof msg, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        fail(k, MCP_STATUS_INVALID_ARGUMENT, msg);
        json_decref(body);
        return NULL;
    }
    return body;
}

/* A generation's trace: its context from the headers, sampled now that
 * the model is known (the answer echoes traceparent when traced). */
static void gen_trace(conn *k, const mcp_model_version *v)
{
    mcp_call *c = &k->call;
    trace_start(k);
    mcp_frontend_trace_routed(k->srv->fe, c, v);
}

static void start_generate(conn *k, const char *model, const char *version, bool stream)
{
    json_t *body = gen_body(k, oip_fail);
    if (!body) return;
    mcp_model_version *v = find_model(k, model, version);
    if (!v) {
        json_decref(body);
        return;
    }
    json_t *text = json_object_get(body, "text_input");
    mcp_gen_request *r = v->llm ? mcp_gen_request_create(v) : NULL;
    gen_link *l = r ? gen_link_create(k, stream) : NULL;
    bool ok = false;
    if (!v->llm) reply_error(k, 400, "model '%s' is not a generative model; use POST /v2/models/%s/infer", v->name, v->name);
    else if (!r || !l) reply_error(k, 503, "out of memory");
    else if (!json_is_string(text)) reply_error(k, 400, "'text_input' must be a string (the prompt)");
    else ok = gen_params(k, body, v, r);
    if (ok) {
        r->prompt_len = json_string_length(text);
        r->prompt = mcp_malloc(r->prompt_len + 1);
        if (!r->prompt) ok = false, reply_error(k, 503, "out of memory");
        else memcpy(r->prompt, json_string_value(text), r->prompt_len + 1);
    }
    json_decref(body);
    if (!ok) {
        mcp_gen_request_release(r);
        gen_link_release(l);
        mcp_model_version_release(v);
        return;
    }
    l->reqs[l->n_reqs++] = r;
    gen_trace(k, v);
    gen_submit(k, l, v, oip_fail);
    mcp_model_version_release(v);
}

/* OpenAI's error shape, with the field at fault. */
static void oai_fail_param(conn *k, mcp_status st, const char *msg, const char *param)
{
    mcp_buf_reset(&k->resp);
    mcp_oai_error(&k->resp, st, msg, param);
    k->json_len = 0;
    reply_buf(k, mcp_oai_http_code(st), "application/json");
}

static void oai_fail(conn *k, mcp_status st, const char *msg) { oai_fail_param(k, st, msg, NULL); }

/* POST /v1/completions and /v1/chat/completions. */
static void start_openai(conn *k, mcp_oai_kind kind)
{
    json_t *body = gen_body(k, oai_fail);
    if (!body) return;
    json_t *model = json_object_get(body, "model");
    if (!json_is_string(model) || json_string_length(model) == 0 || json_string_length(model) > 255) {
        oai_fail_param(k, MCP_STATUS_INVALID_ARGUMENT, "'model' must name a model (a string of 1 to 255 bytes)", "model");
        json_decref(body);
        return;
    }
    char msg[600], param[64];
    mcp_err err = {msg, sizeof msg};
    /* Access first: a model the caller may not know of is unknown. */
    mcp_status st = mcp_frontend_allow(k->srv->fe, &k->who, k->peer, MCP_ACT_GENERATE, json_string_value(model), &err);
    mcp_model_version *v =
        st == MCP_STATUS_OK ? mcp_frontend_route_model(k->srv->fe, json_string_value(model), NULL, &st, &err) : NULL;
    if (!v) {
        oai_fail_param(k, st, msg, "model");
        json_decref(body);
        return;
    }
    if (!v->llm) {
        snprintf(msg, sizeof msg, "model '%s' is not a generative model; use POST /v2/models/%s/infer", v->name, v->name);
        oai_fail_param(k, MCP_STATUS_INVALID_ARGUMENT, msg, "model");
        mcp_model_version_release(v);
        json_decref(body);
        return;
    }
    mcp_oai_request req;
    st = mcp_oai_parse(body, kind, v, &req, param, sizeof param, &err);
    json_decref(body);
    gen_link *l = st == MCP_STATUS_OK ? gen_link_create(k, req.stream) : NULL;
    if (l) l->oai = mcp_calloc(1, sizeof *l->oai);
    if (st != MCP_STATUS_OK || !l || !l->oai) {
        if (st == MCP_STATUS_OK) st = MCP_STATUS_OUT_OF_MEMORY, snprintf(msg, sizeof msg, "out of memory");
        oai_fail_param(k, st, msg, param);
        mcp_oai_request_clear(&req);
        gen_link_release(l);
        mcp_model_version_release(v);
        return;
    }
    snprintf(req.model, sizeof req.model, "%s", v->name);
    mcp_oai_answer_init(l->oai, &req, v->llm);
    for (int i = 0; i < req.n_choices; i++) l->reqs[l->n_reqs++] = req.choices[i]; /* the link's now */
    memset(req.choices, 0, sizeof req.choices);
    gen_trace(k, v);
    gen_submit(k, l, v, oai_fail);
    mcp_model_version_release(v);
}

static enum MHD_Result send_stream(conn *k)
{
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, k->gen, sse_free);
    if (!r) return MHD_NO;
    atomic_fetch_add(&k->gen->refs, 1); /* the response's */
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    if (k->answered_by[0]) MHD_add_response_header(r, "Mcp-Model-Version", k->answered_by);
    if (k->call.trace.active) {
        char tp[56];
        mcp_trace_format_traceparent(&k->call.trace, tp);
        MHD_add_response_header(r, "traceparent", tp);
    }
    enum MHD_Result ret = MHD_queue_response(k->mhd, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- routing ---- */

/* What a route's pattern captured: {m} and the optional /versions/{v}. */
typedef struct route_args {
    const char *model;
    const char *version;
    char cut[520];    /* a model segment without its ":predict" */
    char joined[520]; /* a namespaced model: "tenant/name" */
} route_args;

static void r_server_metadata(conn *k, const route_args *a) { (void)a, h_server_metadata(k); }
static void r_live(conn *k, const route_args *a) { (void)a, h_live(k); }
static void r_ready(conn *k, const route_args *a) { (void)a, h_ready(k); }
static void r_stats_all(conn *k, const route_args *a) { (void)a, h_stats(k, NULL, NULL); }
static void r_model_metadata(conn *k, const route_args *a) { h_model_metadata(k, a->model, a->version); }
static void r_model_ready(conn *k, const route_args *a) { h_model_ready(k, a->model, a->version); }
static void r_model_stats(conn *k, const route_args *a) { h_stats(k, a->model, a->version); }
static void r_model_config(conn *k, const route_args *a) { h_model_config(k, a->model, a->version); }
static void r_v2_infer(conn *k, const route_args *a) { start_inference(k, MCP_PROTOCOL_V2, a->model, a->version); }
static void r_repo_index(conn *k, const route_args *a) { (void)a, h_repo_index(k); }
static void r_generate(conn *k, const route_args *a) { start_generate(k, a->model, a->version, false); }
static void r_generate_stream(conn *k, const route_args *a) { start_generate(k, a->model, a->version, true); }
static void r_completions(conn *k, const route_args *a) { (void)a, start_openai(k, MCP_OAI_COMPLETION); }
static void r_chat_completions(conn *k, const route_args *a) { (void)a, start_openai(k, MCP_OAI_CHAT); }

/* GET /v2/events?model=NAME&after=ID&limit=N: the catalog's event log,
 * oldest first (a management call: the admin token when the server has
 * one). */
typedef struct events_out {
    mcp_buf *b;
    int n;
    int limit;
    bool denied_only;
    const char *tenant; /* NULL: every event; else only this tenant's ("t1/..." targets, or "t1") */
} events_out;

static bool event_json(void *user, const mcp_catalog_event *e)
{
    events_out *o = user;
    mcp_buf *b = o->b;
    if (o->denied_only && strcmp(e->action, "denied") != 0) return true;
    if (o->tenant) {
        size_t n = strlen(o->tenant);
        bool mine = n && !strncmp(e->target, o->tenant, n) && (e->target[n] == '/' || e->target[n] == '\0');
        if (!mine) return true;
    }
    mcp_buf_printf(b, "%s{\"id\":%lld,\"time_ms\":%lld", o->n++ ? "," : "", (long long)e->id, (long long)e->time_ms);
    const char *const keys[] = {"actor", "action", "target", "outcome", "reason"};
    const char *const vals[] = {e->actor, e->action, e->target, e->outcome, e->reason};
    for (int i = 0; i < 5; i++) {
        mcp_buf_printf(b, ",\"%s\":", keys[i]);
        mcp_buf_json_string(b, vals[i]);
    }
    mcp_buf_puts(b, "}");
    return o->n < o->limit;
}

static bool query_int(conn *k, const char *key, long long lo, long long hi, long long *out)
{
    const char *v = MHD_lookup_connection_value(k->mhd, MHD_GET_ARGUMENT_KIND, key);
    if (!v) return true;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        reply_error(k, 400, "query parameter '%s' must be an integer from %lld to %lld", key, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

static void r_events(conn *k, const route_args *a)
{
    (void)a;
    mcp_plane *p = mcp_frontend_plane(k->srv->fe);
    if (!p) {
        reply_error(k, 404, "this server keeps no event log (start it with --store DIR)");
        return;
    }
    if (!admin_allowed(k)) return;
    const char *model = MHD_lookup_connection_value(k->mhd, MHD_GET_ARGUMENT_KIND, "model");
    if (model && !mcp__desc_name_valid(model)) {
        reply_error(k, 400, "query parameter 'model' is not a model name");
        return;
    }
    long long after = 0, limit = 100;
    if (!query_int(k, "after", 0, INT64_MAX, &after) || !query_int(k, "limit", 1, 1000, &limit)) return;
    const char *denied = MHD_lookup_connection_value(k->mhd, MHD_GET_ARGUMENT_KIND, "denied");
    if (denied && strcmp(denied, "true") != 0 && strcmp(denied, "false") != 0) {
        reply_error(k, 400, "query parameter 'denied' must be true or false");
        return;
    }
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    bool all = !mcp_frontend_auth_enabled(k->srv->fe) || k->who.roles & MCP_ROLE_ADMIN;
    events_out o = {&k->resp, 0, (int)limit, denied && !strcmp(denied, "true"), all ? NULL : k->who.tenant};
    mcp_buf_puts(&k->resp, "[");
    /* Filtered views read on until they have `limit` events. */
    bool filtered = o.denied_only || o.tenant;
    mcp_status st = mcp_catalog_events(mcp_plane_catalog(p), model, after, filtered ? 0 : (int)limit, event_json, &o, &err);
    if (st != MCP_STATUS_OK) {
        mcp_buf_free(&k->resp);
        reply_error(k, mcp_status_http_code(st), "%s", msg);
        return;
    }
    mcp_buf_puts(&k->resp, "]");
    reply_buf(k, 200, "application/json");
}
/* Triton's trace settings: GET shows them, POST changes them (a
 * management call: the admin token when the server has one). A model's
 * settings exist only for models the repository knows. */
static void h_trace_setting(conn *k, const char *model, bool post)
{
    mcp_tracer *t = mcp_frontend_tracer(k->srv->fe);
    if (model) {
        mcp_status st;
        char msg[512];
        mcp_err err = {msg, sizeof msg};
        mcp_model_version *v = mcp_frontend_route_model(k->srv->fe, model, NULL, &st, &err);
        if (!v && st == MCP_STATUS_NOT_FOUND) {
            reply_error(k, 404, "%s", msg);
            return;
        }
        mcp_model_version_release(v);
    }
    if (post) {
        if (!admin_allowed(k)) return;
        char msg[512];
        mcp_err err = {msg, sizeof msg};
        mcp_status st = mcp_tracer_settings_update(t, model, (const char *)k->body.data, k->body.len, &err);
        if (st != MCP_STATUS_OK) {
            reply_error(k, mcp_status_http_code(st), "%s", msg);
            return;
        }
    }
    mcp_tracer_settings_json(t, model, &k->resp);
    reply_buf(k, 200, "application/json");
}
/* Triton's logging API: GET shows the levels and format, POST changes
 * them (a management call). */
static void h_logging(conn *k, bool post)
{
    mcp_logger *lg = mcp_frontend_logger(k->srv->fe);
    if (!lg) {
        reply_error(k, 404, "this server has no log to configure");
        return;
    }
    if (post) {
        if (!admin_allowed(k)) return;
        char msg[512];
        mcp_err err = {msg, sizeof msg};
        mcp_status st = mcp_logger_settings_update(lg, (const char *)k->body.data, k->body.len, &err);
        if (st != MCP_STATUS_OK) {
            reply_error(k, mcp_status_http_code(st), "%s", msg);
            return;
        }
    }
    mcp_logger_settings_json(lg, &k->resp);
    reply_buf(k, 200, "application/json");
}
static void r_logging_get(conn *k, const route_args *a) { (void)a, h_logging(k, false); }
static void r_logging_post(conn *k, const route_args *a) { (void)a, h_logging(k, true); }
static void r_trace_get(conn *k, const route_args *a) { (void)a, h_trace_setting(k, NULL, false); }
static void r_trace_post(conn *k, const route_args *a) { (void)a, h_trace_setting(k, NULL, true); }
static void r_model_trace_get(conn *k, const route_args *a) { h_trace_setting(k, a->model, false); }
static void r_model_trace_post(conn *k, const route_args *a) { h_trace_setting(k, a->model, true); }
static void r_repo_load(conn *k, const route_args *a) { h_repo_load(k, a->model); }
static void r_rollout_get(conn *k, const route_args *a) { h_rollout_get(k, a->model); }
static void r_rollout_post(conn *k, const route_args *a) { h_rollout_post(k, a->model); }
static void r_repo_unload(conn *k, const route_args *a) { h_repo_unload(k, a->model); }
static void r_repo_describe(conn *k, const route_args *a) { h_repo_describe(k, a->model); }
static void r_simple_infer(conn *k, const route_args *a) { (void)a, start_inference(k, MCP_PROTOCOL_SIMPLE, NULL, NULL); }
static void r_v1_list(conn *k, const route_args *a) { (void)a, h_v1_list(k); }
static void r_v1_model(conn *k, const route_args *a) { h_v1_model(k, a->model); }
static void r_v1_predict(conn *k, const route_args *a) { start_inference(k, MCP_PROTOCOL_V1, a->model, NULL); }
static void r_metrics(conn *k, const route_args *a) { (void)a, h_metrics(k); }
static void r_openapi(conn *k, const route_args *a) { (void)a, h_openapi(k); }

/* The status page (status.c): its compiled-in assets, and the JSON it
 * refreshes from. */
static void status_asset(conn *k, mcp__status_asset_id id)
{
    mcp__status_asset a = mcp__status_asset_get(id);
    mcp_buf_append(&k->resp, a.data, a.len);
    k->headers = mcp__status_page_headers;
    reply_buf(k, 200, a.content_type);
}
static void r_status_page(conn *k, const route_args *a) { (void)a, status_asset(k, MCP__STATUS_ASSET_HTML); }
static void r_status_css(conn *k, const route_args *a) { (void)a, status_asset(k, MCP__STATUS_ASSET_CSS); }
static void r_status_js(conn *k, const route_args *a) { (void)a, status_asset(k, MCP__STATUS_ASSET_JS); }
static void r_status_json(conn *k, const route_args *a)
{
    (void)a;
    bool all = !mcp_frontend_auth_enabled(k->srv->fe) || k->who.roles & MCP_ROLE_ADMIN;
    mcp__status_json(k->srv->fe, all ? NULL : conn_keep, k, &k->resp);
    k->headers = mcp__status_json_headers;
    reply_buf(k, 200, "application/json");
}

/*
 * The HTTP routes, tried in order (the first match wins, so
 * /v2/models/stats comes before /v2/models/{m}). In a pattern, {m} is a
 * model name segment, "{m}:predict" a segment ending in ":predict", and
 * {mv} a model name optionally followed by /versions/{v}. A path that
 * matches with another method gets 405 with Allow; HEAD is answered on
 * every GET route (libmicrohttpd sends the headers only).
 */
typedef struct http_route {
    const char *method;
    const char *pattern;
    void (*handler)(conn *k, const route_args *a);
    mcp_action act; /* what the caller needs to be allowed (on the path's model, when it names one) */
} http_route;

static const http_route routes[] = {
    {"GET", "/v2", r_server_metadata, MCP_ACT_SERVER},
    {"GET", "/v2/health/live", r_live, MCP_ACT_HEALTH},
    {"GET", "/v2/health/ready", r_ready, MCP_ACT_HEALTH},
    {"GET", "/v2/models/stats", r_stats_all, MCP_ACT_STATS},
    {"GET", "/v2/models/{mv}", r_model_metadata, MCP_ACT_METADATA},
    {"GET", "/v2/models/{mv}/ready", r_model_ready, MCP_ACT_METADATA},
    {"POST", "/v2/models/{mv}/infer", r_v2_infer, MCP_ACT_INFER},
    {"POST", "/v2/models/{mv}/generate", r_generate, MCP_ACT_GENERATE},
    {"POST", "/v2/models/{mv}/generate_stream", r_generate_stream, MCP_ACT_GENERATE},
    {"GET", "/v2/models/{mv}/stats", r_model_stats, MCP_ACT_STATS},
    {"GET", "/v2/models/{mv}/config", r_model_config, MCP_ACT_METADATA},
    {"GET", "/v2/models/{m}/rollout", r_rollout_get, MCP_ACT_STATS},
    {"POST", "/v2/models/{m}/rollout", r_rollout_post, MCP_ACT_ROLLOUT},
    {"GET", "/v2/models/{m}/trace/setting", r_model_trace_get, MCP_ACT_SETTINGS},
    {"POST", "/v2/models/{m}/trace/setting", r_model_trace_post, MCP_ACT_SETTINGS},
    {"GET", "/v2/trace/setting", r_trace_get, MCP_ACT_SETTINGS},
    {"POST", "/v2/trace/setting", r_trace_post, MCP_ACT_SETTINGS},
    {"GET", "/v2/logging", r_logging_get, MCP_ACT_SETTINGS},
    {"POST", "/v2/logging", r_logging_post, MCP_ACT_SETTINGS},
    {"POST", "/v2/repository/index", r_repo_index, MCP_ACT_METADATA},
    {"POST", "/v2/repository/models/{m}/load", r_repo_load, MCP_ACT_LOAD},
    {"POST", "/v2/repository/models/{m}/unload", r_repo_unload, MCP_ACT_UNLOAD},
    {"GET", "/v2/repository/models/{m}", r_repo_describe, MCP_ACT_METADATA},
    {"GET", "/v2/events", r_events, MCP_ACT_EVENTS},
    {"POST", "/v1/infer", r_simple_infer, MCP_ACT_INFER},
    {"GET", "/v1/models", r_v1_list, MCP_ACT_METADATA},
    {"GET", "/v1/models/{m}", r_v1_model, MCP_ACT_METADATA},
    {"POST", "/v1/models/{m}:predict", r_v1_predict, MCP_ACT_INFER},
    {"POST", "/v1/completions", r_completions, MCP_ACT_GENERATE},
    {"POST", "/v1/chat/completions", r_chat_completions, MCP_ACT_GENERATE},
    {"GET", "/metrics", r_metrics, MCP_ACT_METRICS},
    {"GET", "/openapi.json", r_openapi, MCP_ACT_SERVER},
    {"GET", "/", r_status_page, MCP_ACT_SERVER},
    {"GET", "/status/status.css", r_status_css, MCP_ACT_SERVER},
    {"GET", "/status/status.js", r_status_js, MCP_ACT_SERVER},
    {"GET", "/v2/status", r_status_json, MCP_ACT_STATS},
};

/* Matches path p against a pattern; fills a (pointing into p or a->cut).
 * join: the model is two segments, a tenant namespace and a name
 * ("t1/resnet"; tried when the one-segment reading matches no route). */
static bool route_match(const char *pattern, const path *p, route_args *a, bool join)
{
    a->model = a->version = NULL;
    int i = 0;
    const char *s = pattern;
    while (*s) {
        while (*s == '/') s++;
        if (!*s) break;
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (i >= p->n) return false;
        const char *seg = p->seg[i];
        bool model_seg = (n == 4 && !strncmp(s, "{mv}", 4)) || (n >= 3 && !strncmp(s, "{m}", 3));
        if (model_seg && join) {
            if (i + 1 >= p->n) return false;
            snprintf(a->joined, sizeof a->joined, "%s/%s", p->seg[i], p->seg[i + 1]);
            /* Only a name a tenant's model can have ("t1/ready" is not). */
            char *colon = strchr(a->joined, ':');
            if (colon) *colon = '\0';
            bool namespaced = mcp__desc_name_valid(a->joined);
            if (colon) *colon = ':';
            if (!namespaced) return false;
            seg = a->joined;
            i++;
        }
        if (n == 4 && !strncmp(s, "{mv}", 4)) {
            a->model = seg;
            if (seg_is(p, i + 1, "versions") && i + 2 < p->n) { /* the optional /versions/{v} */
                a->version = p->seg[i + 2];
                i += 2;
            }
        } else if (n == 3 && !strncmp(s, "{m}", 3)) {
            if (strchr(seg, ':')) return false;
            a->model = seg;
        } else if (n > 3 && !strncmp(s, "{m}:", 4)) {
            size_t suffix = n - 3, len = strlen(seg); /* ":predict" */
            if (len <= suffix || strncmp(seg + len - suffix, s + 3, suffix) != 0) return false;
            snprintf(a->cut, sizeof a->cut, "%.*s", (int)(len - suffix), seg);
            a->model = a->cut;
        } else if (strlen(seg) != n || strncmp(seg, s, n) != 0) {
            return false;
        }
        i++;
        s += n;
    }
    return i == p->n;
}

/* The route a method and path take: every route with one-segment model
 * names first, then with namespaced ones. */
static const http_route *route_find(const char *method, const path *p, route_args *a)
{
    bool head = !strcmp(method, "HEAD");
    for (int join = 0; join < 2; join++)
        for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
            const http_route *r = &routes[i];
            if (strcmp(r->method, method) != 0 && !(head && !strcmp(r->method, "GET"))) continue;
            if (route_match(r->pattern, p, a, join)) return r;
        }
    return NULL;
}

/* Where the connection comes from: a Unix socket, loopback, or elsewhere. */
static mcp_peer conn_peer(conn *k)
{
    const union MHD_ConnectionInfo *di = MHD_get_connection_info(k->mhd, MHD_CONNECTION_INFO_DAEMON);
    if (di && di->daemon && di->daemon == k->srv->daemon_uds) return MCP_PEER_LOCAL;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(k->mhd, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (!sa) return MCP_PEER_REMOTE;
    if (sa->sa_family == AF_UNIX) return MCP_PEER_LOCAL;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127 ? MCP_PEER_LOOPBACK : MCP_PEER_REMOTE;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return MCP_PEER_LOOPBACK;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127) return MCP_PEER_LOOPBACK;
    }
    return MCP_PEER_REMOTE;
}

/* Who is calling and whether it may take this route, decided on the
 * headers (before a body is read); false when it answered 401, 403 or
 * 404. A route that names its model in the body is checked again once
 * the model is known; one with no route is left to route(). */
static bool access_check(conn *k, const char *method, const char *url)
{
    mcp_server *s = k->srv;
    k->peer = conn_peer(k);
    char msg[400];
    mcp_err err = {msg, sizeof msg};
    const char *authz = MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "Authorization");
    /* HTTPS: a client certificate given must verify; one may be required. */
    mcp_tls_peer cert = {0};
    if (s->opts.tls && k->peer != MCP_PEER_LOCAL) {
        const union MHD_ConnectionInfo *ti = MHD_get_connection_info(k->mhd, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        mcp_tls_gnutls_peer(s->opts.tls, ti ? ti->tls_session : NULL, &cert);
        mcp_status cst = MCP_STATUS_OK;
        if (cert.presented && !cert.verified) cst = mcp_err_set(&err, MCP_STATUS_UNAUTHENTICATED, "%s", cert.why);
        else if (!cert.presented && mcp_tls_client_mode(s->opts.tls) == MCP_TLS_CLIENTS_REQUIRE)
            cst = mcp_err_set(&err, MCP_STATUS_UNAUTHENTICATED, "this server requires a client certificate");
        if (cst != MCP_STATUS_OK) {
            mcp_frontend_audit(s->fe, "anonymous (remote)", "denied", "(certificate)", "unauthenticated", msg);
            reply_error(k, 401, "%s", msg);
            return false;
        }
    }
    mcp_status st = mcp_frontend_authenticate(s->fe, authz, cert.verified ? cert.cn : NULL, k->peer, &k->who, &err);
    if (st == MCP_STATUS_OK && !mcp_frontend_auth_enabled(s->fe)) return true;
    if (st == MCP_STATUS_OK) {
        path p;
        route_args a;
        const http_route *r = path_split(url, &p) ? route_find(method, &p, &a) : NULL;
        if (!r) return true;
        st = mcp_frontend_allow(s->fe, &k->who, k->peer, r->act, a.model, &err);
    }
    if (st == MCP_STATUS_OK) return true;
    reply_error(k, mcp_status_http_code(st), "%s", msg);
    k->www_authenticate = st == MCP_STATUS_UNAUTHENTICATED;
    return false;
}

static void route(conn *k, const char *method, const char *url)
{
    path p;
    if (!path_split(url, &p)) {
        reply_error(k, 404, "no route for %s %.200s", method, url);
        return;
    }
    route_args a;
    const http_route *r = route_find(method, &p, &a);
    if (r) {
        k->pattern = r->pattern;
        r->handler(k, &a);
        return;
    }
    /* A known path with another method: 405 and the methods it takes. */
    char allow[64] = "";
    for (size_t i = 0; i < 2 * (sizeof routes / sizeof routes[0]); i++) {
        size_t at = i % (sizeof routes / sizeof routes[0]);
        if (!route_match(routes[at].pattern, &p, &a, i >= sizeof routes / sizeof routes[0]) || strstr(allow, routes[at].method)) continue;
        snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s%s", allow[0] ? ", " : "", routes[at].method,
                 strcmp(routes[at].method, "GET") ? "" : ", HEAD");
    }
    if (allow[0]) {
        reply_error(k, 405, "%s is not allowed on %.200s; use %s", method, url, allow);
        snprintf(k->allow, sizeof k->allow, "%s", allow);
        return;
    }
    reply_error(k, 404, "no route for %s %.200s", method, url);
}

/* ---- libmicrohttpd callbacks ---- */

/* Accepts connections until the server starts shutting down. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    const mcp_server *s = cls;
    (void)addr, (void)addrlen;
    return mcp_frontend_stopping(s->fe) ? MHD_NO : MHD_YES;
}

/* ---- connection guard ---- */

/* Every connection is tracked from accept to close, so the watcher can cut
 * those that send headers too slowly (slowloris), trickle a body, or hold a
 * reserve slot. Cutting is shutdown(2) on the socket: libmicrohttpd then
 * sees the connection end and closes it as usual. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    mcp_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        tcp_link *l = mcp_calloc(1, sizeof *l);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!l || !ci) {
            mcp_free(l);
            return;
        }
        l->fd = ci->connect_fd;
        l->boundary_ns = mcp_now_ns();
        pthread_mutex_lock(&s->link_mu);
        l->reserve = s->n_links >= (int)s->opts.max_connections;
        l->next = s->links;
        if (s->links) s->links->prev = l;
        s->links = l;
        s->n_links++;
        pthread_mutex_unlock(&s->link_mu);
        mcp_frontend_count_connections(s->fe, 1);
        *socket_context = l;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        tcp_link *l = *socket_context;
        if (!l) return;
        pthread_mutex_lock(&s->link_mu);
        if (l->prev) l->prev->next = l->next;
        else s->links = l->next;
        if (l->next) l->next->prev = l->prev;
        s->n_links--;
        pthread_mutex_unlock(&s->link_mu);
        mcp_frontend_count_connections(s->fe, -1);
        mcp_free(l);
        *socket_context = NULL;
    }
}

/* Cuts connections past their header deadline or below the body rate;
 * call from the watcher. Reserve connections get one second. */
static void guard_links(mcp_server *s, int64_t now)
{
    const mcp_server_options *o = &s->opts;
    int64_t header_ns = (int64_t)o->header_timeout_s * 1000000000;
    pthread_mutex_lock(&s->link_mu);
    for (tcp_link *l = s->links; l; l = l->next) {
        if (l->cut) continue;
        bool late = false;
        if (!l->headers_done) {
            late = now - l->boundary_ns > (l->reserve ? 1000000000 : header_ns);
        } else if (l->body_start_ns && o->min_body_rate) {
            /* The rate is judged over windows of the header timeout, not
             * since the body began: a fast start buys no idle hours. */
            int64_t t = now - l->body_start_ns;
            late = t > header_ns && (double)l->body_bytes < (double)o->min_body_rate * ((double)t / 1e9);
            if (t > header_ns && !late) {
                l->body_start_ns = now;
                l->body_bytes = 0;
            }
        }
        if (late) {
            l->cut = true;
            shutdown(l->fd, SHUT_RDWR);
        }
    }
    pthread_mutex_unlock(&s->link_mu);
}

/* Called once per request with its URI, before libmicrohttpd parses the
 * query string into its per-connection memory. A URL with more parameters
 * than that memory holds would leave the request unanswered (libmicrohttpd
 * 0.9.75 cannot even build its error reply then), so such a query is
 * emptied here, where the URI is still the connection's own buffer, and the
 * request is answered 414. Our routes take no query parameters. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    mcp_server *s = cls;
    conn *k = mcp_calloc(1, sizeof *k);
    if (!k) return NULL;
    k->srv = s;
    k->mhd = c;
    const char *q = strchr(uri, '?');
    if (q) {
        unsigned n = 1;
        for (const char *p = q + 1; *p; p++) n += *p == '&' || *p == ';';
        if (n > s->opts.max_query_params) {
            k->reject = 414;
            snprintf(k->reject_msg, sizeof k->reject_msg, "the URL has %u query parameters; the limit is %u", n,
                     s->opts.max_query_params);
            ((char *)q)[1] = '\0';
        }
    }
    return k;
}

/* Counts `more` body bytes against the server-wide cap; false (nothing
 * counted) when they would exceed it. */
static bool body_reserve(conn *k, size_t more)
{
    if (!mcp_frontend_reserve_body(k->srv->fe, more)) return false;
    k->body_reserved += more;
    return true;
}

typedef struct header_scan {
    int n_length;
    bool lengths_differ, chunked, length_too_long;
    char length[32];
} header_scan;

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    header_scan *h = cls;
    if (!strcasecmp(key, "Content-Length")) {
        const char *v = value ? value : "";
        /* A value too long to keep whole could hide a difference. */
        if (strlen(v) >= sizeof h->length) h->length_too_long = true;
        if (h->n_length++ && strcmp(h->length, v) != 0) h->lengths_differ = true;
        snprintf(h->length, sizeof h->length, "%s", v);
    } else if (!strcasecmp(key, "Transfer-Encoding")) {
        h->chunked = true;
    }
    return MHD_YES;
}

static bool reserve_route(const char *method, const char *url)
{
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    return get && (!strncmp(url, "/v2/health/", 11) || !strcmp(url, "/metrics"));
}

/* The first call for a request, with its headers: framing that could smuggle
 * a second request, bodies over the limit and requests beyond the
 * connection limit are answered here, before any body byte is read, and the
 * connection closes after the answer. Returns true when it answered. */
static bool screen_headers(conn *k, const char *method, const char *url)
{
    mcp_server *s = k->srv;
    header_scan h = {0};
    MHD_get_connection_values(k->mhd, MHD_HEADER_KIND, scan_header, &h);
    unsigned long long length = 0;
    char *end = NULL;
    if (h.n_length) {
        errno = 0;
        length = strtoull(h.length, &end, 10);
    }
    const char *ce = MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "Content-Encoding");
    k->coding = mcp_content_coding_parse(ce);
    k->gzip_ok = mcp_accepts_gzip(MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "Accept-Encoding"));
    if (k->reject) {
        reply_error(k, k->reject, "%s", k->reject_msg);
    } else if (k->coding == MCP_CODING_UNKNOWN) {
        reply_error(k, 415, "Content-Encoding '%.60s' is not supported; send gzip, deflate or identity", ce);
    } else if (h.lengths_differ) {
        reply_error(k, 400, "the request has Content-Length headers with different values");
    } else if (h.n_length && h.chunked) {
        reply_error(k, 400, "the request has both Content-Length and Transfer-Encoding");
    } else if (h.n_length && (h.length_too_long || !h.length[0] || *end || errno || h.length[0] == '-')) {
        reply_error(k, 400, "Content-Length '%s' is not a number of bytes", h.length);
    } else if (h.n_length && length > s->opts.max_body_bytes) {
        reply_error(k, 413, "request body of %llu bytes exceeds the limit of %zu bytes", length, s->opts.max_body_bytes);
    } else if (k->link && k->link->reserve && !reserve_route(method, url)) {
        reply_error(k, 503, "the server is at its connection limit; only health and metrics are answered");
    } else {
        return false;
    }
    k->close = true;
    return true;
}

/* Replaces a compressed body by its inflated bytes, which count against the
 * same limits as any body; false when it answered (413, 400, 503). */
static bool inflate_request(conn *k)
{
    mcp_server *s = k->srv;
    char msg[300];
    mcp_err err = {msg, sizeof msg};
    mcp_buf plain = {0};
    mcp_status st = mcp_inflate_body(k->coding, k->body.data, k->body.len, s->opts.max_body_bytes, &plain, &err);
    if (st == MCP_STATUS_OK && plain.len > k->body_reserved && !body_reserve(k, plain.len - k->body_reserved))
        st = mcp_err_set(&err, MCP_STATUS_UNAVAILABLE, "the server holds the most request body bytes it allows (%zu); retry later",
                         mcp_frontend_body_cap(s->fe));
    if (st != MCP_STATUS_OK) {
        mcp_buf_free(&plain);
        reply_error(k, mcp_status_http_code(st), "%s", msg);
        k->close = true;
        return false;
    }
    mcp_buf_free(&k->body);
    k->body = plain;
    return true;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    mcp_server *s = cls;
    conn *k = *con_cls;
    if (!k) { /* on_uri could not allocate */
        if (!(k = on_uri(s, "", c))) return MHD_NO;
        *con_cls = k;
    }
    if (!k->started) {
        k->started = true;
        k->t_start_ns = mcp_now_ns();
        snprintf(k->method, sizeof k->method, "%s", method);
        k->http11 = version && strcmp(version, MHD_HTTP_VERSION_1_0) != 0 && strncmp(version, "HTTP/1.", 7) == 0;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        k->link = ci ? ci->socket_context : NULL;
        if (screen_headers(k, method, url)) return send_reply(k);
        /* Admission: a request whose headers arrived before a stop is in
         * flight and the stop waits for its answer, whatever stage it is
         * in; one that arrives after is told so at once. */
        if (!mcp_frontend_admit(s->fe)) {
            reply_error(k, 503, "server is shutting down");
            k->close = true;
            return send_reply(k);
        }
        if (!access_check(k, method, url)) {
            mcp_frontend_routed(s->fe);
            /* A body on its way is read and dropped (bounded as a refused
             * one is), so the client hears the answer, not a reset. */
            k->denied = true;
            return MHD_YES;
        }
        k->admitting = true;
        k->counted = true;
        atomic_fetch_add(&s->open_requests, 1);
        mcp_frontend_count_open(s->fe, 1);
        if (k->link) {
            pthread_mutex_lock(&s->link_mu);
            k->link->headers_done = true;
            k->link->body_start_ns = mcp_now_ns();
            k->link->body_bytes = 0;
            pthread_mutex_unlock(&s->link_mu);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (k->link) {
            pthread_mutex_lock(&s->link_mu);
            k->link->body_bytes += *upload_size;
            pthread_mutex_unlock(&s->link_mu);
        }
        if (k->too_large || k->too_busy || k->denied) {
            /* A refused (chunked) body is read on and dropped only up to
             * twice the size limit and a MiB (so a client that sends a body
             * somewhat over the limit gets its 413); an endless one has its
             * connection closed. */
            k->discarded += *upload_size;
            if (k->discarded > 2 * s->opts.max_body_bytes + (1u << 20)) return MHD_NO;
        } else {
            size_t len = k->body.len + *upload_size;
            if (len > s->opts.max_body_bytes) {
                k->too_large = true;
                mcp_buf_free(&k->body);
            } else if (len > k->body_reserved && !body_reserve(k, len - k->body_reserved)) {
                k->too_busy = true; /* a chunked body past the server's cap */
                mcp_buf_free(&k->body);
            } else {
                mcp_buf_append(&k->body, upload_data, *upload_size);
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    int phase = atomic_load(&k->phase);
    if (phase == PHASE_READY) return send_reply(k);
    if (phase == PHASE_WAITING) return MHD_YES;
    if (k->link) { /* the body is complete */
        pthread_mutex_lock(&s->link_mu);
        k->link->body_start_ns = 0;
        pthread_mutex_unlock(&s->link_mu);
    }
    if (k->denied) return send_reply(k); /* the refusal access_check wrote */
    if (k->too_large) {
        reply_error(k, 413, "request body exceeds the limit of %zu bytes", s->opts.max_body_bytes);
        return send_reply(k);
    }
    if (k->too_busy) {
        reply_error(k, 503, "the server holds the most request body bytes it allows (%zu); retry later",
                    mcp_frontend_body_cap(s->fe));
        return send_reply(k);
    }
    if (k->body.failed) {
        reply_error(k, 500, "out of memory reading the request body");
        return send_reply(k);
    }
    if (k->coding != MCP_CODING_IDENTITY && k->body.len && !inflate_request(k)) return send_reply(k);
    route(k, method, url);
    if (k->admitting) { /* routed: answered, or queued on a scheduler */
        k->admitting = false;
        mcp_frontend_routed(s->fe);
    }
    if (k->streaming) return send_stream(k);
    if (atomic_load(&k->phase) == PHASE_WAITING) return MHD_YES;
    if (k->code == 0) reply_error(k, 500, "no response");
    return send_reply(k);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)c;
    mcp_server *s = cls;
    conn *k = *con_cls;
    if (!k) return;
    if (k->link) { /* the next request's headers are due from now */
        pthread_mutex_lock(&s->link_mu);
        k->link->headers_done = false;
        k->link->body_start_ns = 0;
        k->link->boundary_ns = mcp_now_ns();
        pthread_mutex_unlock(&s->link_mu);
    }
    if (k->started && mcp_frontend_call_end_wanted(s->fe, &k->call, k->code == 500)) { /* its spans, its access-log line */
        char name[96];
        snprintf(name, sizeof name, "%s %s", k->method, k->pattern ? k->pattern : "");
        const char *tenant = k->who.authenticated ? k->who.tenant : MHD_lookup_connection_value(k->mhd, MHD_HEADER_KIND, "tenant");
        mcp_trace_end e = {
            .name = name,
            .transport = "http",
            .method = k->method,
            .route = k->pattern ? k->pattern : "(no route)",
            .code = k->code,
            .error = k->code >= 500,
            .internal = k->code == 500,
            .message = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? NULL : "the connection ended before the answer was sent",
            .tenant = tenant && mcp_frontend_tenant_valid(tenant) ? tenant : NULL,
            .t_start_ns = k->t_start_ns,
        };
        if (k->gen && k->gen->n_reqs) { /* a generation: its first choice's steps, every choice's tokens */
            const mcp_gen_request *r0 = k->gen->reqs[0];
            e.generation = true;
            e.protocol = k->gen->oai ? "openai" : "generate";
            e.model = k->gen->model[0] ? k->gen->model : NULL;
            e.version = k->gen->version[0] ? k->gen->version : NULL;
            e.t_queued_ns = r0->submitted_ns;
            e.t_admitted_ns = atomic_load(&r0->admitted_ns);
            e.t_first_token_ns = atomic_load(&r0->first_token_ns);
            e.t_gen_done_ns = atomic_load(&r0->done_ns);
            e.prompt_tokens = atomic_load(&r0->prompt_tokens);
            e.priority = r0->priority;
            for (int i = 0; i < k->gen->n_reqs; i++) e.completion_tokens += atomic_load(&k->gen->reqs[i]->completion_tokens);
        }
        mcp_frontend_call_end(s->fe, &k->call, &e);
    }
    if (k->gen) {
        gen_link *l = k->gen;
        pthread_mutex_lock(&l->mu);
        l->k = NULL;
        pthread_mutex_unlock(&l->mu);
        gen_link_cancel(l); /* harmless once they ended */
        if (k->streaming) waiting_remove(s, k);
        gen_link_release(l);
        k->gen = NULL;
    }
    mcp_call_clear(&k->call);
    mcp_free(k->ctl.descriptor);
    mcp_free(k->ctl.source);
    mcp_buf_free(&k->body);
    mcp_buf_free(&k->resp);
    if (k->body_reserved) mcp_frontend_release_body(s->fe, k->body_reserved);
    if (k->admitting) mcp_frontend_routed(s->fe); /* the client left mid-upload */
    if (k->counted) {
        atomic_fetch_sub(&s->open_requests, 1);
        mcp_frontend_count_open(s->fe, -1);
    }
    mcp_free(k);
    *con_cls = NULL;
}

/* Suspended connections are not polled by libmicrohttpd, so a client that
 * hangs up while its request waits would go unnoticed: this thread watches
 * their sockets and cancels requests whose clients went away. */
static void *watch_hangups(void *arg)
{
    mcp_server *s = arg;
    for (unsigned tick = 0; !atomic_load(&s->watcher_stop); tick++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (tick % 5 == 0) guard_links(s, mcp_now_ns());
        pthread_mutex_lock(&s->wait_mu);
        for (conn *k = s->waiting; k; k = k->next_waiting) {
            const union MHD_ConnectionInfo *ci = MHD_get_connection_info(k->mhd, MHD_CONNECTION_INFO_CONNECTION_FD);
            if (!ci) continue;
            struct pollfd pfd = {.fd = ci->connect_fd, .events = POLLRDHUP};
            if (k->gen) {
                /* A generation: a client that hangs up (or half-closes:
                 * no generate client does) ends its sequence. No probe:
                 * it would land inside a stream. */
                if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLERR | POLLRDHUP))) gen_link_cancel(k->gen);
                continue;
            }
            mcp_request *req = k->call.req;
            if (poll(&pfd, 1, 0) <= 0 || !req) continue;
            if (pfd.revents & (POLLHUP | POLLERR)) {
                atomic_store(&req->cancel, true);
            } else if ((pfd.revents & POLLRDHUP) && !k->probed) {
                /* The client sent FIN: it either hung up or only half-closed
                 * after a complete request (legal HTTP/1.1; it still reads).
                 * An interim "100 Continue" tells them apart without
                 * disturbing the exchange (clients must skip 1xx answers): a
                 * closed socket answers it with RST, seen on the next poll.
                 * HTTP/1.0 clients may not be sent 1xx; for them FIN means
                 * gone. */
                k->probed = true;
                static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
                if (!k->http11 || send(ci->connect_fd, probe, sizeof probe - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                    atomic_store(&req->cancel, true);
            }
        }
        pthread_mutex_unlock(&s->wait_mu);
    }
    return NULL;
}

/* ---- lifecycle ---- */

mcp_status mcp_server_create(const mcp_server_options *o, mcp_frontend *fe, mcp_server **out, mcp_err *err)
{
    mcp_server *s = mcp_calloc(1, sizeof *s);
    if (!s) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    s->opts = o ? *o : mcp_server_options_default();
    if (!s->opts.host) s->opts.host = "127.0.0.1";
    if (s->opts.http_threads < 1) s->opts.http_threads = 1;
    s->fe = fe;
    s->repo = mcp_frontend_repository(fe);
    pthread_mutex_init(&s->wait_mu, NULL);
    pthread_mutex_init(&s->link_mu, NULL);
    *out = s;
    return MCP_STATUS_OK;
}

/* One libmicrohttpd daemon on a listening socket we made (TCP or Unix);
 * HTTPS on TCP with TLS settings. */
static struct MHD_Daemon *start_daemon(mcp_server *s, int listen_fd, bool tcp, bool ipv6)
{
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
    if (ipv6) flags |= MHD_USE_IPv6;
    /* A Unix socket has no client address: no per-client limit there
     * (its file mode decides who may connect). */
    unsigned per_client = tcp ? s->opts.max_connections_per_client : 0;
    /* HTTPS: the certificate comes from a callback (so a reload takes
     * effect at the next handshake); a client CA makes the handshake ask
     * for client certificates, which access_check verifies. */
    struct MHD_OptionItem tls_opts[3];
    int n_tls = 0;
    if (tcp && s->opts.tls) {
        flags |= MHD_USE_TLS;
        tls_opts[n_tls++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, mcp_tls_gnutls_callback(s->opts.tls)};
        const char *trust = mcp_tls_client_ca_pem(s->opts.tls);
        if (trust) tls_opts[n_tls++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, (void *)trust};
    }
    tls_opts[n_tls] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return MHD_start_daemon(flags, 0, accept_policy, s, on_access, s,
                            MHD_OPTION_ARRAY, tls_opts,
                            MHD_OPTION_LISTEN_SOCKET, listen_fd,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->opts.http_threads,
                            MHD_OPTION_CONNECTION_LIMIT, s->opts.max_connections + s->opts.reserve_connections,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_client,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, s->opts.connection_timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, s->opts.max_header_bytes,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_END);
}

mcp_status mcp_server_start(mcp_server *s, mcp_err *err)
{
    s->started_s = (int64_t)time(NULL);
    if (s->opts.socket_path) {
        int fd = -1;
        mcp_status st = mcp_unix_listen(s->opts.socket_path, &fd, err);
        if (st != MCP_STATUS_OK) return st;
        s->daemon_uds = start_daemon(s, fd, false, false);
        if (!s->daemon_uds) {
            close(fd);
            unlink(s->opts.socket_path);
            return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot serve HTTP on %s", s->opts.socket_path);
        }
    }
    if (s->opts.port >= 0) {
        int fd = -1;
        bool ipv6 = false;
        mcp_status st = mcp_tcp_listen(s->opts.host, s->opts.port, &fd, &s->port, &ipv6, err);
        if (st != MCP_STATUS_OK) return st;
        s->daemon = start_daemon(s, fd, true, ipv6);
        if (!s->daemon) {
            close(fd);
            return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot serve HTTP on %s:%d", s->opts.host, s->port);
        }
    }
    atomic_store(&s->watcher_stop, false);
    if (pthread_create(&s->watcher, NULL, watch_hangups, s) == 0) s->watcher_running = true;
    return MCP_STATUS_OK;
}

int mcp_server_port(const mcp_server *s) { return s->port; }

void mcp_server_shutdown(mcp_server *s)
{
    if (!s->daemon && !s->daemon_uds) return;
    /* Stop accepting: from here accept_policy closes every new connection
     * as soon as it is accepted, so a client learns at once instead of
     * waiting in the backlog until the drain ends. (MHD_quiesce_daemon is
     * not used: on an epoll daemon with its own threads it races the
     * event loop over removing the listening socket, and libmicrohttpd
     * aborts the process when it loses.) */
    mcp_frontend_drain(s->fe);
    /* Then give the transport up to 10 s to send those responses. */
    for (int i = 0; i < 1000 && atomic_load(&s->open_requests) > 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&s->watcher_stop, true);
    if (s->watcher_running) pthread_join(s->watcher, NULL);
    s->watcher_running = false;
    if (s->daemon) MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    if (s->daemon_uds) {
        MHD_stop_daemon(s->daemon_uds);
        unlink(s->opts.socket_path); /* removed at exit */
    }
    s->daemon_uds = NULL;
}

void mcp_server_destroy(mcp_server *s)
{
    if (!s) return;
    mcp_server_shutdown(s);
    pthread_mutex_destroy(&s->wait_mu);
    pthread_mutex_destroy(&s->link_mu);
    mcp_free(s);
}
