/*
 * mcp2026-server: argument parsing and wiring only.
 *
 *   mcp2026-server --model-path ./models/resnet50.onnx --workers 4
 *   mcp2026-server --model-repository ./models --config server.yaml
 *
 * Every option is a flag and a key of the --config YAML file (flags win);
 * one table below defines both and --help.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libfyaml.h>
#include <netdb.h>
#include <netinet/in.h>
#include <limits.h>
#include <signal.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "serve/auth.h"
#include "serve/serve.h"
#include "serve/log.h"
#include "serve/tls.h"
#include "serve/sandbox.h"
#include "serve/trace.h"

typedef enum opt_kind { OPT_STRING, OPT_INT, OPT_BOOL, OPT_PATHS } opt_kind;

typedef struct server_config {
    const char *config;
    const char *model_paths[64];
    int n_model_paths;
    const char *model_roots[64];
    int n_model_roots;
    const char *model_repository;
    const char *admin_token_file;
    const char *store;
    const char *host;
    const char *http_socket;
    const char *grpc_socket;
    int64_t port;
    int64_t grpc_port;
    int64_t grpc_threads;
    int64_t grpc_max_message_bytes;
    int64_t workers;
    int64_t threads;
    int64_t max_model_threads;
    int64_t http_threads;
    int64_t max_body_bytes;
    int64_t max_tensor_bytes;
    int64_t max_inflight_body_bytes;
    int64_t max_header_bytes;
    int64_t max_connections;
    int64_t connection_timeout_s;
    int64_t header_timeout_s;
    int64_t min_body_rate;
    int64_t max_connections_per_client;
    int64_t max_batch_size;
    int64_t max_queue_delay_us;
    int64_t max_queue_size;
    int64_t prefetch_queue_depth;
    bool enable_tensor_cache;
    bool keep_previous;
    bool adaptive_threads;
    bool sandbox;
    int64_t memory_budget;
    int64_t unload_pressure, unload_floor, unload_queue_depth, unload_idle_ms, unload_smoothing_ms;
    int64_t repository_poll_ms;
    const char *model_control;
    const char *log_level, *log_format, *access_log;
    const char *trace_endpoint, *trace_sampler, *trace_sampler_arg, *trace_service_name, *trace_resource;
    int64_t trace_queue_size;
    const char *tls_cert, *tls_key, *tls_client_ca, *tls_client_auth;
} server_config;

typedef struct opt {
    const char *name; /* flag without "--"; config key with '-' as '_' */
    opt_kind kind;
    size_t offset;
    size_t count_offset; /* OPT_PATHS: the int counting the array's entries */
    int64_t min, max;
    const char *help;
} opt;

#define OFF(f) offsetof(server_config, f)
static const opt options[] = {
    {"config", OPT_STRING, OFF(config), 0, 0, 0, "YAML file with any of these options (flags override it)"},
    {"model-path", OPT_PATHS, OFF(model_paths), OFF(n_model_paths), 0, 0, "serve this .onnx file, named after the file (repeatable)"},
    {"model-repository", OPT_STRING, OFF(model_repository), 0, 0, 0, "load every *.yaml descriptor and Triton model folder in DIR (a model root)"},
    {"model-root", OPT_PATHS, OFF(model_roots), OFF(n_model_roots), 0, 0, "a folder descriptors loaded at run time may name files in (repeatable)"},
    {"admin-token-file", OPT_STRING, OFF(admin_token_file), 0, 0, 0, "file holding the bearer token that load/unload calls must send (required off loopback)"},
    {"store", OPT_STRING, OFF(store), 0, 0, 0, "model store (OCI layout + catalog.db) that records applied models and restores them at start (a model root)"},
    {"host", OPT_STRING, OFF(host), 0, 0, 0, "address or host name to listen on, IPv4 or IPv6 (default 127.0.0.1)"},
    {"http-socket", OPT_STRING, OFF(http_socket), 0, 0, 0, "also serve HTTP on this Unix socket (mode 0660; a stale one is replaced)"},
    {"grpc-socket", OPT_STRING, OFF(grpc_socket), 0, 0, 0, "also serve gRPC on this Unix socket (mode 0660; a stale one is replaced)"},
    {"port", OPT_INT, OFF(port), 0, 0, 65535, "HTTP port (default 8080; 0 = any free port)"},
    {"grpc-port", OPT_INT, OFF(grpc_port), 0, 0, 65535, "gRPC port, inference.GRPCInferenceService and grpc.health.v1 (default 8081; 0 = no gRPC)"},
    {"grpc-threads", OPT_INT, OFF(grpc_threads), 0, 1, 64, "gRPC completion-queue threads; they never run kernels (default 2)"},
    {"grpc-max-message-bytes", OPT_INT, OFF(grpc_max_message_bytes), 0, 1024, INT32_MAX, "largest gRPC message in or out (default: --max-body-bytes)"},
    {"workers", OPT_INT, OFF(workers), 0, 1, 256, "instance workers per model (default 1)"},
    {"threads", OPT_INT, OFF(threads), 0, 0, 256, "intra-op threads per instance (default 0: cores / workers, at least 1)"},
    {"max-model-threads", OPT_INT, OFF(max_model_threads), 0, 0, 1 << 16, "threads one model may start, instances x threads (default 0: cores, or --workers x --threads when larger)"},
    {"http-threads", OPT_INT, OFF(http_threads), 0, 1, 256, "transport threads; they never run kernels (default 2)"},
    {"max-body-bytes", OPT_INT, OFF(max_body_bytes), 0, 1024, INT64_MAX, "largest request body; larger gets 413 (default 67108864)"},
    {"max-tensor-bytes", OPT_INT, OFF(max_tensor_bytes), 0, 0, INT64_MAX, "largest tensor one node of a model may produce in a run; a request that would make a larger one fails (0 = no limit; default 4294967296)"},
    {"max-inflight-body-bytes", OPT_INT, OFF(max_inflight_body_bytes), 0, 1024, INT64_MAX, "request bytes held at once, HTTP bodies and gRPC messages of all clients together; beyond, 503 or RESOURCE_EXHAUSTED (default 1073741824)"},
    {"max-header-bytes", OPT_INT, OFF(max_header_bytes), 0, 1024, 1 << 24, "memory for one connection's headers (default 16384)"},
    {"max-connections", OPT_INT, OFF(max_connections), 0, 1, 1 << 20, "concurrent connections (default 1024)"},
    {"connection-timeout", OPT_INT, OFF(connection_timeout_s), 0, 1, 86400, "seconds an idle or slow connection may hold a slot (default 30)"},
    {"header-timeout", OPT_INT, OFF(header_timeout_s), 0, 1, 3600, "seconds a client has to send a request's headers, from connect or the previous response (default 10)"},
    {"min-body-rate", OPT_INT, OFF(min_body_rate), 0, 0, 1 << 30, "bytes/s a request body must arrive at, over each window of header-timeout seconds (default 1024; 0 = off)"},
    {"max-connections-per-client", OPT_INT, OFF(max_connections_per_client), 0, 1, 1 << 20, "concurrent connections from one client address (default 256)"},
    {"max-batch-size", OPT_INT, OFF(max_batch_size), 0, 0, 1 << 20, "default max_batch_size for models (default 32; 0 = no batching)"},
    {"max-queue-delay-us", OPT_INT, OFF(max_queue_delay_us), 0, 0, 10000000, "default time the batcher waits to fill a batch (default 500)"},
    {"max-queue-size", OPT_INT, OFF(max_queue_size), 0, 1, 1 << 24, "default queued requests per model before 429 (default 1024)"},
    {"prefetch-queue-depth", OPT_INT, OFF(prefetch_queue_depth), 0, 0, 1024, "batches formed ahead of busy workers (default 8)"},
    {"sandbox", OPT_BOOL, OFF(sandbox), 0, 0, 0, "run models on threads under a system call filter (seccomp) and load them with file access limited to the model roots and the store (Landlock); --no-sandbox is --sandbox false (default true)"},
    {"enable-tensor-cache", OPT_BOOL, OFF(enable_tensor_cache), 0, 0, 0, "reuse request and batch tensors from a pool (default true)"},
    {"adaptive-threads", OPT_BOOL, OFF(adaptive_threads), 0, 0, 0, "while other work takes some of a model's cores, run it on half its threads when that is faster, and on all again once the cores are free (default true)"},
    {"keep-previous", OPT_BOOL, OFF(keep_previous), 0, 0, 0, "keep a replaced version loaded for an instant undo while --memory-budget allows (default true)"},
    {"memory-budget", OPT_INT, OFF(memory_budget), 0, 0, INT64_MAX, "real bytes all loaded models may hold: idle models are unloaded under sustained pressure and load again on their next request; a replaced version stays loaded only within it (default 0: no limit)"},
    {"unload-pressure", OPT_INT, OFF(unload_pressure), 0, 1, 1000, "percent of --memory-budget the smoothed memory pressure must reach before idle models are unloaded (default 90)"},
    {"unload-floor", OPT_INT, OFF(unload_floor), 0, 0, 1000, "percent of --memory-budget unloading stops at (default 75)"},
    {"unload-queue-depth", OPT_INT, OFF(unload_queue_depth), 0, 1, 1 << 20, "a model is idle while its smoothed queue depth stays below this (default 1)"},
    {"unload-idle-ms", OPT_INT, OFF(unload_idle_ms), 0, 0, 86400000, "and it has had no request for this long (default 5000)"},
    {"unload-smoothing-ms", OPT_INT, OFF(unload_smoothing_ms), 0, 1, 3600000, "half-life of the smoothed memory pressure and queue depth (default 2000)"},
    {"model-control", OPT_STRING, OFF(model_control), 0, 0, 0, "explicit (load/unload API on, default), poll (also watch --model-repository: new and changed models load once their files stop changing, removed ones unload) or none"},
    {"repository-poll-ms", OPT_INT, OFF(repository_poll_ms), 0, 10, 86400000, "with --model-control poll: how often the repository is listed (default 5000)"},
    {"log-level", OPT_STRING, OFF(log_level), 0, 0, 0, "error, warn, info or verbose (default info; POST /v2/logging changes it at run time)"},
    {"log-format", OPT_STRING, OFF(log_format), 0, 0, 0, "text (default) or json: one JSON object per line with time, level, message and the request's fields"},
    {"access-log", OPT_STRING, OFF(access_log), 0, 0, 0, "also log every request (method, route, status, duration, model, version, request and trace ids) to this file, or - for stderr (default: none)"},
    {"trace-endpoint", OPT_STRING, OFF(trace_endpoint), 0, 0, 0, "OTLP/HTTP collector URL spans are posted to (default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or $OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces; none: tracing off)"},
    {"trace-sampler", OPT_STRING, OFF(trace_sampler), 0, 0, 0, "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio (default $OTEL_TRACES_SAMPLER, else parentbased_always_on)"},
    {"trace-sampler-arg", OPT_STRING, OFF(trace_sampler_arg), 0, 0, 0, "the ratio samplers' ratio, 0 to 1 (default $OTEL_TRACES_SAMPLER_ARG, else 1)"},
    {"trace-service-name", OPT_STRING, OFF(trace_service_name), 0, 0, 0, "service.name of the spans (default $OTEL_SERVICE_NAME, else mcp2026-server)"},
    {"trace-resource", OPT_STRING, OFF(trace_resource), 0, 0, 0, "more resource attributes, key=value,... (default $OTEL_RESOURCE_ATTRIBUTES)"},
    {"trace-queue-size", OPT_INT, OFF(trace_queue_size), 0, 1, 1 << 20, "traced calls waiting for export; beyond, their spans are dropped and counted (default 2048)"},
    {"tls-cert", OPT_STRING, OFF(tls_cert), 0, 0, 0, "PEM certificate (then its chain): HTTPS and gRPC over TLS on the TCP ports (the Unix sockets stay plain); read again on SIGHUP"},
    {"tls-key", OPT_STRING, OFF(tls_key), 0, 0, 0, "PEM private key of --tls-cert"},
    {"tls-client-ca", OPT_STRING, OFF(tls_client_ca), 0, 0, 0, "PEM CAs whose client certificates identify callers (subject CN, mapped by the config's auth.client_certificates)"},
    {"tls-client-auth", OPT_STRING, OFF(tls_client_auth), 0, 0, 0, "optional (a client certificate given must verify; default) or require (every TCP caller gives one)"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: mcp2026-server [--model-path FILE.onnx]... [--model-repository DIR] [options]\n\noptions:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const char *arg = options[i].kind == OPT_INT ? " N" : options[i].kind == OPT_BOOL ? " true|false" : " VALUE";
        char flag[64];
        snprintf(flag, sizeof flag, "--%s%s", options[i].name, arg);
        fprintf(f, "  %-32s %s\n", flag, options[i].help);
    }
    fprintf(f, "  %-32s %s\n  %-32s %s\n", "--help", "print this help", "--version", "print the version");
}

static const opt *find_opt(const char *name, bool config_key)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const char *n = options[i].name;
        if (!config_key) {
            if (!strcmp(n, name)) return &options[i];
            continue;
        }
        /* Config keys spell '-' as '_' (max_body_bytes). */
        size_t k = 0;
        for (; n[k] && name[k]; k++)
            if (!(n[k] == name[k] || (n[k] == '-' && name[k] == '_'))) break;
        if (!n[k] && !name[k]) return &options[i];
    }
    return NULL;
}

/* Sets one option from text; where says where the text came from. */
static bool set_opt(server_config *c, const opt *o, const char *value, const char *where)
{
    char *field = (char *)c + o->offset;
    switch (o->kind) {
    case OPT_STRING: *(const char **)field = value; return true;
    case OPT_PATHS: {
        int *count = (int *)((char *)c + o->count_offset);
        if (*count == 64) {
            fprintf(stderr, "mcp2026-server: %s: too many --%s values (64 at most)\n", where, o->name);
            return false;
        }
        ((const char **)field)[(*count)++] = value;
        return true;
    }
    case OPT_BOOL:
        if (!strcmp(value, "true") || !strcmp(value, "1") || !strcmp(value, "yes")) *(bool *)field = true;
        else if (!strcmp(value, "false") || !strcmp(value, "0") || !strcmp(value, "no")) *(bool *)field = false;
        else {
            fprintf(stderr, "mcp2026-server: %s: '%s' must be true or false, not '%s'\n", where, o->name, value);
            return false;
        }
        return true;
    case OPT_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end || v < o->min || v > o->max) {
            fprintf(stderr, "mcp2026-server: %s: '%s' must be an integer in %lld..%lld, not '%s'\n", where, o->name,
                    (long long)o->min, (long long)o->max, value);
            return false;
        }
        *(int64_t *)field = v;
        return true;
    }
    }
    return false;
}

/* Reads the --config YAML: a flat mapping of option keys. Strings it keeps
 * point into the document, which lives until exit. */
static bool load_config(server_config *c, const char *path, struct fy_document **doc_out)
{
    struct fy_document *doc = fy_document_build_from_file(NULL, path);
    if (!doc) {
        fprintf(stderr, "mcp2026-server: --config %s: cannot read or parse the YAML file\n", path);
        return false;
    }
    *doc_out = doc;
    struct fy_node *root = fy_document_root(doc);
    if (!root) return true;
    if (!fy_node_is_mapping(root)) {
        fprintf(stderr, "mcp2026-server: %s: the top level must be a mapping of option: value\n", path);
        return false;
    }
    bool ok = true;
    void *iter = NULL;
    struct fy_node_pair *pair;
    while ((pair = fy_node_mapping_iterate(root, &iter))) {
        struct fy_node *key = fy_node_pair_key(pair), *val = fy_node_pair_value(pair);
        struct fy_token *tok = fy_node_get_scalar_token(key);
        const struct fy_mark *mark = tok ? fy_token_start_mark(tok) : NULL;
        char where[4200];
        snprintf(where, sizeof where, "%s:%d:%d", path, mark ? mark->line + 1 : 0, mark ? mark->column + 1 : 0);
        const char *name = fy_node_get_scalar0(key);
        /* Access rules: sections read by serve/auth.c (at start and on SIGHUP). */
        if (name && (!strcmp(name, "auth") || !strcmp(name, "tenants") || !strcmp(name, "shared_models"))) continue;
        const opt *o = name ? find_opt(name, true) : NULL;
        if (!o || !strcmp(o->name, "config")) {
            fprintf(stderr, "mcp2026-server: %s: unknown option '%s' (see --help; keys use '_' for '-')\n", where,
                    name ? name : "?");
            ok = false;
            continue;
        }
        if (o->kind == OPT_PATHS && fy_node_is_sequence(val)) {
            void *it2 = NULL;
            struct fy_node *item;
            while ((item = fy_node_sequence_iterate(val, &it2))) {
                const char *s = fy_node_get_scalar0(item);
                ok &= s && set_opt(c, o, s, where);
            }
            continue;
        }
        const char *s = fy_node_is_scalar(val) ? fy_node_get_scalar0(val) : NULL;
        if (!s) {
            fprintf(stderr, "mcp2026-server: %s: '%s' needs a scalar value\n", where, name);
            ok = false;
            continue;
        }
        ok &= set_opt(c, o, s, where);
    }
    return ok;
}

/* TLS from --tls-cert/-key/-client-ca/-client-auth (none given: *out
 * NULL); false (logged) when they do not load. */
static bool tls_setup(const server_config *c, mcp_logger *lg, mcp_tls **out)
{
    *out = NULL;
    if (!c->tls_cert && !c->tls_key && !c->tls_client_ca && !c->tls_client_auth) return true;
    mcp_tls_options to = {c->tls_cert, c->tls_key, c->tls_client_ca, MCP_TLS_CLIENTS_NONE};
    if (c->tls_client_auth && !strcmp(c->tls_client_auth, "require")) {
        to.clients = MCP_TLS_CLIENTS_REQUIRE;
    } else if (c->tls_client_auth && !strcmp(c->tls_client_auth, "optional")) {
        to.clients = MCP_TLS_CLIENTS_OPTIONAL;
    } else if (c->tls_client_auth) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "--tls-client-auth must be optional or require, not '%s'", c->tls_client_auth);
        return false;
    }
    char msg[600];
    mcp_err err = {msg, sizeof msg};
    if (mcp_tls_create(&to, out, &err) == MCP_STATUS_OK) return true;
    mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "%s", msg);
    return false;
}

/* Builds the access rules from the config file (none: a disabled set)
 * and gives them to the frontend; false (logged) when they are not valid. */
static void sandbox_say(void *user, bool warning, const char *msg)
{
    mcp_logger_log(user, warning ? MCP_LOG_WARN : MCP_LOG_INFO, NULL, "%s", msg);
}

/* The sandbox, before any model loads: loaders may read the model roots
 * and the --model-path files (loaded again after an unload) and write the
 * store. */
static void sandbox_setup(const server_config *c, const mcp_model_roots *roots, mcp_logger *lg)
{
    const char *paths[64 + 64];
    int n = 0;
    for (int i = 0; i < mcp_model_roots_count(roots) && n < 64; i++) paths[n++] = mcp_model_roots_get(roots, i);
    for (int i = 0; i < c->n_model_paths; i++) paths[n++] = c->model_paths[i];
    mcp_sandbox_configure(c->sandbox, paths, n, c->store, sandbox_say, lg);
    mcp_sandbox_report(sandbox_say, lg);
}

static bool auth_setup(mcp_logger *lg, const char *config_path, const char *admin_token, mcp_frontend *fe)
{
    char msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_auth *a = NULL;
    mcp_status st = config_path ? mcp_auth_load(config_path, &a, &err) : mcp_auth_parse("", 0, ".", &a, &err);
    if (st == MCP_STATUS_OK && admin_token[0]) st = mcp_auth_set_admin_token(a, admin_token, &err);
    if (st != MCP_STATUS_OK) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "--config %s: %s", config_path ? config_path : "", msg);
        mcp_auth_destroy(a);
        return false;
    }
    if (mcp_auth_enabled(a))
        mcp_logger_log(lg, MCP_LOG_INFO, NULL, "access rules: %d API keys, JWT %s%s%s", mcp_auth_key_count(a),
                       mcp_auth_jwt_hs256(a) ? "HS256" : "", mcp_auth_jwt_hs256(a) && mcp_auth_jwt_rs256(a) ? " and " : "",
                       mcp_auth_jwt_rs256(a) ? "RS256" : !mcp_auth_jwt_hs256(a) ? "off" : "");
    mcp_frontend_set_auth(fe, a);
    return true;
}

/* SIGHUP: the access rules and the files they name are read again; new
 * ones replace the old at once, and bad ones leave the old in force. */
static void reload(mcp_logger *lg, const char *config_path, const char *admin_token, mcp_frontend *fe, mcp_tls *tls)
{
    mcp_logger_log(lg, MCP_LOG_INFO, NULL, "SIGHUP received, reading the access rules%s again", tls ? " and certificates" : "");
    if (!auth_setup(lg, config_path, admin_token, fe))
        mcp_logger_log(lg, MCP_LOG_WARN, NULL, "the access rules did not change (see above)");
    char msg[600];
    mcp_err err = {msg, sizeof msg};
    if (tls && mcp_tls_reload(tls, &err) != MCP_STATUS_OK)
        mcp_logger_log(lg, MCP_LOG_WARN, NULL, "the certificates did not change: %s", msg);
}

/* Reads the admin token: the file's first line, 16 to 255 printable
 * characters. The file should be readable by the server's user only. */
static bool read_token(mcp_logger *lg, const char *path, char *out, size_t cap)
{
    uint8_t *data = NULL;
    size_t len = 0;
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    if (mcp_file_read(path, &data, &len, &err) != MCP_STATUS_OK) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "--admin-token-file: %s", msg);
        return false;
    }
    size_t n = 0;
    while (n < len && data[n] != '\n' && data[n] != '\r') n++;
    bool printable = true;
    for (size_t i = 0; i < n; i++) printable &= data[i] > 0x20 && data[i] < 0x7f;
    bool ok = n >= 16 && n < cap && printable;
    if (ok) {
        memcpy(out, data, n);
        out[n] = '\0';
    } else {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL,
                       "--admin-token-file %s: the first line must be a token of 16 to %zu printable characters "
                       "without spaces",
                       path, cap - 1);
    }
    explicit_bzero(data, len);
    mcp_free(data);
    return ok;
}

/* 127.0.0.0/8, ::1 and localhost: reachable from this machine only. */
static bool addr_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family != AF_INET6) return false;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

/* Every address the host stands for is a loopback one (a name is
 * resolved: "127.0.0.1.example.com" is not loopback; one that does not
 * resolve is not either). */
static bool host_is_loopback(const char *host)
{
    char h[300];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof h) {
        memcpy(h, host + 1, n - 2);
        h[n - 2] = '\0';
    } else {
        snprintf(h, sizeof h, "%s", host);
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(h, NULL, &hints, &res) != 0 || !res) return false;
    bool all = true;
    for (struct addrinfo *a = res; a; a = a->ai_next) all = all && addr_is_loopback(a->ai_addr);
    freeaddrinfo(res);
    return all;
}

/* glibc gives threads their own malloc arenas (up to 8 per core) and each
 * keeps pages its threads freed; models start and stop worker threads with
 * every load, so a long-running server's memory would creep with loads
 * that are long gone. Two arenas hold it steady; the hot path allocates
 * from per-request pools, not malloc. MALLOC_ARENA_MAX, when set, wins. */
static void malloc_setup(void)
{
    const char *env = getenv("MALLOC_ARENA_MAX");
    if (!env || !*env) mallopt(M_ARENA_MAX, 2);
}

/* Tracing from the flags, else OpenTelemetry's standard variables. An
 * empty endpoint leaves tracing off (*out stays NULL). */
static bool tracer_setup(const server_config *c, mcp_logger *lg, mcp_tracer **out)
{
    *out = NULL;
    char endpoint[2048] = "";
    const char *e;
    const char *disabled = getenv("OTEL_SDK_DISABLED");
    bool env_ok = !(disabled && !strcasecmp(disabled, "true"));
    if (c->trace_endpoint) snprintf(endpoint, sizeof endpoint, "%s", c->trace_endpoint);
    else if (env_ok && (e = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) && *e) snprintf(endpoint, sizeof endpoint, "%s", e);
    else if (env_ok && (e = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) && *e) /* the signal's path is appended */
        snprintf(endpoint, sizeof endpoint, "%.*s/v1/traces", (int)(strlen(e) - (e[strlen(e) - 1] == '/')), e);
    if (!endpoint[0]) return true;
    mcp_tracer_options o = mcp_tracer_options_default();
    o.endpoint = endpoint;
    const char *sampler = c->trace_sampler ? c->trace_sampler : env_ok ? getenv("OTEL_TRACES_SAMPLER") : NULL;
    if (sampler && *sampler && !mcp_trace_sampler_parse(sampler, &o.sampler)) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "%s '%s' is not always_on, always_off, traceidratio, parentbased_always_on, "
                        "parentbased_always_off or parentbased_traceidratio",
                c->trace_sampler ? "--trace-sampler" : "OTEL_TRACES_SAMPLER", sampler);
        return false;
    }
    const char *arg = c->trace_sampler_arg ? c->trace_sampler_arg : env_ok ? getenv("OTEL_TRACES_SAMPLER_ARG") : NULL;
    if (arg && *arg) {
        char *end;
        o.ratio = strtod(arg, &end);
        if (*end || !(o.ratio >= 0.0 && o.ratio <= 1.0)) {
            mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "%s '%s' must be a number from 0 to 1",
                    c->trace_sampler_arg ? "--trace-sampler-arg" : "OTEL_TRACES_SAMPLER_ARG", arg);
            return false;
        }
    }
    const char *name = c->trace_service_name ? c->trace_service_name : env_ok ? getenv("OTEL_SERVICE_NAME") : NULL;
    if (name && *name) o.service_name = name;
    o.resource = c->trace_resource ? c->trace_resource : env_ok ? getenv("OTEL_RESOURCE_ATTRIBUTES") : NULL;
    if (c->trace_queue_size > 0) o.queue_size = (int)c->trace_queue_size;
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    if (mcp_tracer_create(&o, out, &err) != MCP_STATUS_OK) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "tracing: %s", msg);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    malloc_setup();
    server_config cli = {0}, c = {
        .host = "127.0.0.1", .port = 8080, .grpc_port = 8081, .grpc_threads = 2, .workers = 1, .threads = 0, .http_threads = 2,
        .max_body_bytes = 64 << 20, .max_tensor_bytes = (int64_t)4 << 30, .max_inflight_body_bytes = (int64_t)1 << 30, .max_header_bytes = 16 << 10, .max_connections = 1024,
        .connection_timeout_s = 30, .header_timeout_s = 10, .min_body_rate = 1024,
        .max_connections_per_client = 256, .max_batch_size = 32, .max_queue_delay_us = 500,
        .max_queue_size = 1024, .prefetch_queue_depth = 8, .enable_tensor_cache = true, .keep_previous = true, .adaptive_threads = true, .sandbox = true,
        .unload_pressure = 90, .unload_floor = 75, .unload_queue_depth = 1, .unload_idle_ms = 5000, .unload_smoothing_ms = 2000,
        .repository_poll_ms = 5000,
        .model_control = "explicit", .log_level = "info", .log_format = "text",
    };
    /* Flags first into their own record, so the config file can be read
     * before them and flags still win. */
    const char *flag_values[N_OPTIONS][64];
    int flag_count[N_OPTIONS] = {0};
    (void)cli;
    for (int i = 1; i < argc; i++) {
        const char *a = strcmp(argv[i], "--no-sandbox") == 0 ? "--sandbox=false" : argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--version")) {
            printf("mcp2026-server %s\n", MCP_VERSION_STRING);
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "mcp2026-server: unexpected argument '%s' (see --help)\n", a);
            return 2;
        }
        char name[128];
        const char *eq = strchr(a + 2, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        snprintf(name, sizeof name, "%.*s", (int)nl, a + 2);
        const opt *o = find_opt(name, false);
        if (!o) {
            fprintf(stderr, "mcp2026-server: unknown option '--%s' (see --help)\n", name);
            return 2;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "mcp2026-server: --%s needs a value\n", name);
                return 2;
            }
            value = argv[++i];
        }
        size_t idx = (size_t)(o - options);
        if (flag_count[idx] < 64) flag_values[idx][flag_count[idx]++] = value;
    }
    struct fy_document *cfg_doc = NULL;
    size_t cfg_idx = (size_t)(find_opt("config", false) - options);
    if (flag_count[cfg_idx] && !load_config(&c, flag_values[cfg_idx][0], &cfg_doc)) return 2;
    for (size_t i = 0; i < N_OPTIONS; i++)
        for (int k = 0; k < flag_count[i]; k++) {
            if (options[i].kind == OPT_PATHS && k == 0)
                *(int *)((char *)&c + options[i].count_offset) = 0; /* flags replace the config file's list */
            char where[160];
            snprintf(where, sizeof where, "--%s", options[i].name);
            if (!set_opt(&c, &options[i], flag_values[i][k], where)) return 2;
        }
    bool poll = strcmp(c.model_control, "poll") == 0;
    if (poll && !c.model_repository) {
        fprintf(stderr, "mcp2026-server: --model-control poll watches --model-repository DIR; give one\n");
        return 2;
    }
    if (strcmp(c.model_control, "explicit") != 0 && strcmp(c.model_control, "none") != 0 && !poll) {
        fprintf(stderr, "mcp2026-server: --model-control must be explicit, poll or none, not '%s'\n", c.model_control);
        return 2;
    }

    /* The log: every line from here on goes through it. */
    mcp_logger_options lo = mcp_logger_options_default();
    if (!mcp_log_level_parse(c.log_level, &lo.level)) {
        fprintf(stderr, "mcp2026-server: --log-level must be error, warn, info or verbose, not '%s'\n", c.log_level);
        return 2;
    }
    if (!mcp_log_format_parse(c.log_format, &lo.format)) {
        fprintf(stderr, "mcp2026-server: --log-format must be text or json, not '%s'\n", c.log_format);
        return 2;
    }
    if (c.access_log && !strcmp(c.access_log, "-")) {
        lo.access_fd = 2;
    } else if (c.access_log) {
        lo.access_fd = open(c.access_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (lo.access_fd < 0) {
            fprintf(stderr, "mcp2026-server: --access-log %s: %s\n", c.access_log, strerror(errno));
            return 2;
        }
    }
    char lmsg[256] = "";
    mcp_err lerr = {lmsg, sizeof lmsg};
    mcp_logger *lg = NULL;
    if (mcp_logger_create(&lo, &lg, &lerr) != MCP_STATUS_OK) {
        fprintf(stderr, "mcp2026-server: %s\n", lmsg);
        if (lo.access_fd > 2) close(lo.access_fd);
        return 1;
    }
    FILE *log_info = mcp_logger_stream(lg, MCP_LOG_INFO), *log_warn = mcp_logger_stream(lg, MCP_LOG_WARN);
    if (!log_info || !log_warn) log_info = log_warn = stderr;

    /* One descriptor per connection: allow as many as the hard limit. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }

    /* Signals go to sigwait below, never to a worker thread. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    mcp_descriptor_defaults dd = mcp_descriptor_defaults_default();
    dd.max_batch_size = c.max_batch_size;
    dd.max_queue_delay_us = c.max_queue_delay_us;
    dd.max_queue_size = c.max_queue_size;
    dd.prefetch_queue_depth = c.prefetch_queue_depth;
    dd.enable_tensor_cache = c.enable_tensor_cache;
    dd.instance_count = c.workers;
    /* By default instances share the cores: threads x workers <= cores. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    dd.instance_threads = c.threads > 0 ? c.threads : cores / c.workers > 1 ? cores / c.workers : 1;
    /* No descriptor starts more threads than the server was given (its
     * cores, or what the operator's own flags ask for), nor warms up on
     * inputs larger than any request the server would accept. */
    dd.max_model_threads = c.max_model_threads > 0                         ? c.max_model_threads
                           : dd.instance_count * dd.instance_threads > cores ? dd.instance_count * dd.instance_threads
                                                                              : cores;
    dd.max_warmup_bytes = c.max_body_bytes;
    dd.adaptive_threads = c.adaptive_threads;
    dd.max_tensor_bytes = c.max_tensor_bytes;

    /* Model roots: the repository and every --model-root. Descriptors that
     * arrive over the load API may name files inside them only. */
    mcp_model_roots *roots = mcp_model_roots_create();
    char rmsg[1024] = "";
    mcp_err rerr = {rmsg, sizeof rmsg};
    if (!roots) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "out of memory");
        mcp_logger_destroy(lg);
        return 1;
    }
    if (c.model_repository && mcp_model_roots_add(roots, c.model_repository, &rerr) != MCP_STATUS_OK) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "--model-repository: %s", rmsg);
        mcp_model_roots_destroy(roots);
        mcp_logger_destroy(lg);
        return 2;
    }
    for (int i = 0; i < c.n_model_roots; i++)
        if (mcp_model_roots_add(roots, c.model_roots[i], &rerr) != MCP_STATUS_OK) {
            mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "--model-root: %s", rmsg);
            mcp_model_roots_destroy(roots);
            mcp_logger_destroy(lg);
            return 2;
        }
    /* The store: what was applied is recorded there and comes back at the
     * next start; its checkouts are a model root. */
    mcp_plane *plane = NULL;
    if (c.store && (mcp_plane_open(c.store, &plane, &rerr) != MCP_STATUS_OK ||
                    mcp_model_roots_add(roots, mcp_store_root(mcp_plane_store(plane)), &rerr) != MCP_STATUS_OK)) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "--store %s: %s", c.store, rmsg);
        mcp_plane_close(plane);
        mcp_model_roots_destroy(roots);
        mcp_logger_destroy(lg);
        return 2;
    }
    dd.roots = roots;
    dd.check_load = true;
    sandbox_setup(&c, roots, lg);

    /* Management calls off loopback need a credential. */
    char token[256] = "";
    bool control = strcmp(c.model_control, "none") != 0;
    if (c.admin_token_file && !read_token(lg, c.admin_token_file, token, sizeof token)) {
        mcp_plane_close(plane);
        mcp_model_roots_destroy(roots);
        mcp_logger_destroy(lg);
        return 2;
    }
    if (control && !token[0] && !host_is_loopback(c.host)) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL,
                       "--host %s is not a loopback address, so the model load/unload API would be open to the "
                       "network: give --admin-token-file FILE (a bearer token clients must send) or --model-control none",
                       c.host);
        mcp_plane_close(plane);
        mcp_model_roots_destroy(roots);
        mcp_logger_destroy(lg);
        return 2;
    }

    mcp_tracer *tracer = NULL;
    if (!tracer_setup(&c, lg, &tracer)) {
        mcp_plane_close(plane);
        mcp_model_roots_destroy(roots);
        mcp_logger_destroy(lg);
        return 2;
    }
    /* TLS on the TCP listeners. */
    mcp_tls *tls = NULL;
    if (!tls_setup(&c, lg, &tls)) {
        mcp_tracer_destroy(tracer);
        mcp_plane_close(plane);
        mcp_model_roots_destroy(roots);
        mcp_logger_destroy(lg);
        return 2;
    }
    mcp_metrics *metrics = mcp_metrics_create();
    mcp_repository *repo = mcp_repository_create(&dd);
    if (repo) mcp_repository_set_keep_previous(repo, c.keep_previous, (size_t)c.memory_budget);
    mcp_server_options so = mcp_server_options_default();
    so.host = c.host;
    so.socket_path = c.http_socket;
    so.port = (int)c.port;
    so.http_threads = (int)c.http_threads;
    so.max_body_bytes = (size_t)c.max_body_bytes;
    so.max_header_bytes = (size_t)c.max_header_bytes;
    so.max_connections = (unsigned)c.max_connections;
    so.connection_timeout_s = (unsigned)c.connection_timeout_s;
    so.header_timeout_s = (unsigned)c.header_timeout_s;
    so.min_body_rate = (unsigned)c.min_body_rate;
    so.max_connections_per_client = (unsigned)c.max_connections_per_client;
    so.tls = tls;

    mcp_grpc_options go = mcp_grpc_options_default();
    go.host = c.host;
    go.port = c.grpc_port > 0 ? (int)c.grpc_port : -1;
    go.socket_path = c.grpc_socket;
    go.threads = (int)c.grpc_threads;
    go.max_message_bytes = (size_t)(c.grpc_max_message_bytes ? c.grpc_max_message_bytes : c.max_body_bytes);
    go.tls = tls;

    char msg[4096] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_server *srv = NULL;
    mcp_grpc_server *grpc = NULL;
    mcp_frontend *fe = NULL;
    int rc = 0;
    if (!metrics || !repo || mcp_frontend_create(repo, metrics, &fe, &err) != MCP_STATUS_OK) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "%s", msg[0] ? msg : "out of memory");
        rc = 1;
        goto out;
    }
    mcp_frontend_set_control(fe, control, token[0] ? token : NULL);
    /* Access rules: from the config's auth, tenants and shared_models
     * sections and the files they name, again on each SIGHUP. */
    const char *config_path = flag_count[cfg_idx] ? flag_values[cfg_idx][0] : NULL;
    if (!auth_setup(lg, config_path, token, fe)) {
        rc = 2;
        goto out;
    }
    mcp_frontend_set_plane(fe, plane);
    mcp_frontend_set_tracer(fe, tracer);
    mcp_frontend_set_logger(fe, lg);
    mcp_memory_policy mp = mcp_memory_policy_default();
    mp.budget = (size_t)c.memory_budget;
    mp.pressure = (double)c.unload_pressure / 100.0;
    mp.floor = (double)c.unload_floor / 100.0;
    mp.queue_depth = (double)c.unload_queue_depth;
    mp.idle_ms = c.unload_idle_ms;
    mp.smoothing_ms = c.unload_smoothing_ms;
    mcp_frontend_set_memory_policy(fe, &mp);
    mcp_frontend_set_body_cap(fe, (size_t)c.max_inflight_body_bytes);
    if (mcp_server_create(&so, fe, &srv, &err) != MCP_STATUS_OK) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "%s", msg[0] ? msg : "out of memory");
        rc = 1;
        goto out;
    }
    for (int i = 0; i < c.n_model_paths; i++) {
        mcp_descriptor *d = NULL;
        if (mcp_descriptor_for_model(c.model_paths[i], &dd, &d, &err) != MCP_STATUS_OK ||
            mcp_repository_apply_from(repo, d, MCP_SOURCE_MODEL_FILE, c.model_paths[i], NULL, &err) != MCP_STATUS_OK) {
            mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "--model-path %s: %s", c.model_paths[i], msg);
            rc = 1;
            goto out;
        }
    }
    if (c.model_repository) {
        mcp_diags diags = {0};
        mcp_status st = mcp_repository_scan(repo, c.model_repository, true, &diags);
        if (diags.count) {
            char report[8192];
            mcp_diags_format(&diags, c.model_repository, report, sizeof report);
            fputs(report, log_warn);
        }
        mcp_diags_clear(&diags);
        if (st != MCP_STATUS_OK)
            mcp_logger_log(lg, MCP_LOG_WARN, NULL, "some models in %s did not load (see above); serving the rest", c.model_repository);
    }
    /* Models applied before come back as they were last wanted. */
    if (plane && mcp_plane_restore(plane, repo, log_info) != 0)
        mcp_logger_log(lg, MCP_LOG_WARN, NULL, "some models in the store did not come back (see above); serving the rest");
    mcp_frontend_count_startup_loads(fe);
    /* gRPC listens before HTTP does: once HTTP answers ready (what
     * clients and probes wait for), every transport takes calls. */
    if ((c.grpc_port > 0 || c.grpc_socket) &&
        (mcp_grpc_create(&go, fe, &grpc, &err) != MCP_STATUS_OK || mcp_grpc_start(grpc, &err) != MCP_STATUS_OK)) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "gRPC: %s", msg);
        rc = 1;
        goto out;
    }
    if (mcp_server_start(srv, &err) != MCP_STATUS_OK) {
        mcp_logger_log(lg, MCP_LOG_ERROR, NULL, "%s", msg);
        rc = 1;
        goto out;
    }
    int port = mcp_server_port(srv);
    /* An IPv6 address goes in brackets in a URL. */
    char shown[300];
    snprintf(shown, sizeof shown, strchr(c.host, ':') ? "[%s]" : "%s", c.host);
    mcp_logger_log(lg, MCP_LOG_INFO, NULL, "mcp2026-server %s listening on %s://%s:%d", MCP_VERSION_STRING, tls ? "https" : "http",
                   shown, port);
    if (grpc && c.grpc_port > 0)
        mcp_logger_log(lg, MCP_LOG_INFO, NULL, "mcp2026-server %s listening on %s://%s:%d", MCP_VERSION_STRING,
                       tls ? "grpcs" : "grpc", shown, mcp_grpc_port(grpc));
    if (c.http_socket) mcp_logger_log(lg, MCP_LOG_INFO, NULL, "mcp2026-server %s listening on http+unix://%s", MCP_VERSION_STRING, c.http_socket);
    if (c.grpc_socket) mcp_logger_log(lg, MCP_LOG_INFO, NULL, "mcp2026-server %s listening on unix:%s (gRPC)", MCP_VERSION_STRING, c.grpc_socket);
    mcp_repository_entry *list;
    int n = mcp_repository_index(repo, &list);
    for (int i = 0; i < n; i++) {
        mcp_model_version *v = mcp_repository_get(repo, list[i].name, NULL);
        mcp_logger_log(lg, MCP_LOG_INFO, NULL, "model %s %s %s: POST %s://%s:%d/v2/models/%s/%s", list[i].name, list[i].version,
                mcp_model_state_name(list[i].state), tls ? "https" : "http", shown, port, list[i].name,
                v && v->llm ? "generate" : "infer");
        mcp_model_version_release(v);
    }
    mcp_repository_entries_free(list, n);

    int sig = 0;
    if (poll) {
        /* Poll mode: this thread lists the repository every interval and
         * still answers the stop signals in between. */
        mcp_repository_poll *rp = mcp_repository_poll_create(c.model_repository);
        if (rp) mcp_repository_poll_seed(rp, repo);
        struct timespec every = {c.repository_poll_ms / 1000, (long)(c.repository_poll_ms % 1000) * 1000000L};
        for (;;) {
            while (rp && (sig = sigtimedwait(&sigs, NULL, &every)) < 0) {
                mcp_repository_poll_once(rp, repo, log_info);
                fflush(log_info);
            }
            if (!rp) sigwait(&sigs, &sig);
            if (sig != SIGHUP) break;
            reload(lg, config_path, token, fe, tls);
        }
        mcp_repository_poll_destroy(rp);
    } else {
        while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP) reload(lg, config_path, token, fe, tls);
    }
    mcp_logger_log(lg, MCP_LOG_INFO, NULL, "%s received, draining in-flight requests", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    /* Both transports refuse new work from here; what was admitted is
     * answered, then each sends what is left and stops. */
    mcp_frontend_drain(fe);
    if (grpc) mcp_grpc_shutdown(grpc);
    mcp_server_shutdown(srv);
    mcp_logger_log(lg, MCP_LOG_INFO, NULL, "stopped");
out:
    mcp_grpc_destroy(grpc);
    mcp_server_destroy(srv);
    mcp_frontend_destroy(fe);
    mcp_repository_destroy(repo);
    mcp_metrics_destroy(metrics);
    mcp_tracer_destroy(tracer); /* after the transports: the last spans go out */
    mcp_tls_destroy(tls);
    mcp_logger_destroy(lg);
    if (lo.access_fd > 2) close(lo.access_fd);
    mcp_plane_close(plane);
    mcp_model_roots_destroy(roots);
    explicit_bzero(token, sizeof token);
    if (cfg_doc) fy_document_destroy(cfg_doc);
    return rc;
}
