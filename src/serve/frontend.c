/*
 * The serving core: the request path every transport shares, the codec
 * table, the metrics observer, the registry hooks, model control on a
 * loader thread, and the shutdown drain. See frontend.h for the chain.
 */
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/random.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "serve/frontend.h"
#include "serve/log.h"
#include "serve/qos.h"
#include "serve/monitor.h"
#include "serve/rollout.h"
#include "serve/sandbox.h"

/* Model control jobs waiting for a loader thread. */
#define MAX_CONTROL_JOBS 64

#define LOADER_THREADS 2

typedef struct retiring {
    struct retiring *next;
    mcp_model_version *v;
} retiring;

typedef struct control_job {
    struct control_job *next;
    mcp_control *ctl;
} control_job;

struct mcp_frontend {
    uint8_t tenant_secret[32]; /* per process: tenants' prefix-cache keys derive from it */
    mcp_repository *repo;
    mcp_metrics *metrics;
    mcp_observer observer;
    atomic_bool stopping;
    atomic_int admitting;      /* admitted, not yet answered or queued */
    atomic_int open_requests;  /* transports: admitted, not yet answered and sent */
    atomic_int connections;    /* transports: open connections */
    /* Versions that stopped being current, drained by the retire thread. */
    pthread_mutex_t retire_mu;
    pthread_cond_t retire_cv;
    retiring *retiring;
    int retire_busy;
    bool retire_stop;
    pthread_t retirer;
    bool retirer_running;
    /* Model control jobs, run by the loader threads: loads of different
     * models side by side, of one model one after another (the
     * repository's per-model lock). */
    pthread_mutex_t control_mu;
    pthread_cond_t control_cv;
    control_job *jobs, *jobs_tail;
    int n_jobs; /* queued, at most MAX_CONTROL_JOBS */
    bool control_stop;
    pthread_t loaders[LOADER_THREADS];
    int n_loaders;
    bool control_enabled;
    const char *admin_token; /* borrowed */
    mcp_plane *plane;        /* borrowed; NULL = no store */
    mcp_tracer *tracer;      /* borrowed; NULL = no tracing */
    mcp_monitor_set *monitors; /* every version's output monitor, for /metrics and drift events */
    mcp_logger *logger;      /* borrowed; NULL = quiet */
    size_t body_cap;
    _Atomic size_t body_bytes; /* request data held by every transport */
    /* Access: the rules (swapped whole on reload; readers hold auth_mu
     * shared while they use them), each tenant's admission state, and the
     * audit queue its thread writes to the event log. */
    pthread_rwlock_t auth_mu;
    mcp_auth *auth;
    mcp_qos *qos;
    pthread_mutex_t audit_mu;
    pthread_cond_t audit_cv;
    struct audit_rec *audit; /* ring of AUDIT_RING */
    int audit_head, audit_len;
    bool audit_stop;
    pthread_t audit_thread;
    bool audit_running;
    atomic_llong audit_dropped;
    /* Calls waiting for a cold start, and the memory policy's thread. */
    pthread_mutex_t park_mu;
    struct parked *parked;
    int n_parked;
    mcp_memory_policy policy;
    pthread_mutex_t policy_mu;
    pthread_cond_t policy_cv;
    bool policy_stop;
    pthread_t policy_thread;
    bool policy_running;
};

/* A retired version holding this much makes the retire thread give free
 * memory back to the system (malloc_trim). */
#define TRIM_BYTES ((size_t)1 << 20)

/* Calls parked at most, all models together; beyond, 503 at once. */
#define MAX_PARKED 1024

/* What the serving core has to say (a gate trip, an eviction, a record
 * that could not be written) goes to the server's log, never straight to
 * a stream. */
static void fe_log(mcp_frontend *fe, mcp_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fe_log(mcp_frontend *fe, mcp_log_level level, const char *fmt, ...)
{
    if (!mcp_logger_enabled(fe->logger, level)) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    mcp_logger_log(fe->logger, level, NULL, "%s", line);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- codecs ---- */

static mcp_status v2_decode(mcp_request *r, const mcp_wire *w, void *state, const mcp_model_version *m, mcp_err *err)
{
    (void)state;
    return mcp_codec_v2_decode(r, w->body, w->len, w->header_len, m, err);
}

static void v2_encode(const mcp_request *r, mcp_buf *out, size_t *json_len) { mcp_codec_v2_encode(r, out, json_len); }

static mcp_status v1_decode(mcp_request *r, const mcp_wire *w, void *state, const mcp_model_version *m, mcp_err *err)
{
    (void)state;
    return mcp_codec_v1_decode(r, w->body, w->len, m, err);
}

static void v1_encode(const mcp_request *r, mcp_buf *out, size_t *json_len)
{
    *json_len = 0;
    mcp_codec_v1_encode(r, out);
}

/* The quickstart body names its model: parsed once here, decoded from the
 * same document. */
static mcp_status simple_peek(const mcp_wire *w, char *name, size_t cap, char *version, size_t vcap, void **state,
                              mcp_err *err)
{
    if (vcap) version[0] = '\0';
    return mcp_codec_simple_peek(w->body, w->len, name, cap, state, err);
}

static mcp_status simple_decode(mcp_request *r, const mcp_wire *w, void *state, const mcp_model_version *m,
                                mcp_err *err)
{
    if (!state) return mcp_codec_simple_decode(r, w->body, w->len, m, err);
    return mcp_codec_simple_decode_doc(r, state, m, err);
}

static void simple_encode(const mcp_request *r, mcp_buf *out, size_t *json_len)
{
    *json_len = 0;
    mcp_codec_simple_encode(r, out);
}

/* gRPC names the model inside the message: unpacked once here, decoded
 * from the same message. */
static mcp_status grpc_peek(const mcp_wire *w, char *name, size_t cap, char *version, size_t vcap, void **state,
                            mcp_err *err)
{
    return mcp_codec_grpc_peek(w->body, w->len, name, cap, version, vcap, state, err);
}

static mcp_status grpc_decode(mcp_request *r, const mcp_wire *w, void *state, const mcp_model_version *m, mcp_err *err)
{
    if (!state) return mcp_codec_grpc_decode(r, w->body, w->len, m, err);
    return mcp_codec_grpc_decode_msg(r, state, err);
}

static const mcp_codec codecs[MCP_PROTOCOL_COUNT] = {
    [MCP_PROTOCOL_GRPC] = {1, MCP_PROTOCOL_GRPC, grpc_peek, mcp_codec_grpc_release, grpc_decode, mcp_codec_grpc_encode,
                           mcp_codec_grpc_error},
    [MCP_PROTOCOL_V2] = {1, MCP_PROTOCOL_V2, NULL, NULL, v2_decode, v2_encode, mcp_codec_error},
    [MCP_PROTOCOL_V1] = {1, MCP_PROTOCOL_V1, NULL, NULL, v1_decode, v1_encode, mcp_codec_error},
    [MCP_PROTOCOL_SIMPLE] = {1, MCP_PROTOCOL_SIMPLE, simple_peek, mcp_codec_simple_release, simple_decode,
                             simple_encode, mcp_codec_error},
};

const mcp_codec *mcp_codec_get(mcp_protocol p)
{
    return (int)p >= 0 && p < MCP_PROTOCOL_COUNT && codecs[p].decode ? &codecs[p] : NULL;
}

void mcp_call_clear(mcp_call *c)
{
    mcp_buf_free(&c->out);
    c->json_len = 0;
    if (c->req) mcp_request_release(c->req);
    c->req = NULL;
}

/* ---- tracing ---- */

void mcp_frontend_set_tracer(mcp_frontend *fe, mcp_tracer *t) { fe->tracer = t; }
mcp_tracer *mcp_frontend_tracer(const mcp_frontend *fe) { return fe->tracer; }

void mcp_frontend_trace_start(mcp_frontend *fe, mcp_call *c, const char *traceparent, const char *tracestate,
                              int64_t t_receive_ns)
{
    mcp_trace_begin(fe->tracer, &c->trace, traceparent, tracestate, t_receive_ns);
}

void mcp_frontend_trace_routed(mcp_frontend *fe, mcp_call *c, const mcp_model_version *v)
{
    if (c->trace.pending) mcp_trace_decide(fe->tracer, &c->trace, v->name);
    if (!c->trace.sampled) return;
    snprintf(c->trace.model, sizeof c->trace.model, "%s", v->name);
    snprintf(c->trace.version, sizeof c->trace.version, "%s", v->version);
}

bool mcp_frontend_call_end_wanted(const mcp_frontend *fe, const mcp_call *c, bool internal)
{
    return (c && c->trace.sampled) || mcp_logger_access_enabled(fe->logger) ||
           (internal && mcp_logger_enabled(fe->logger, MCP_LOG_ERROR));
}

void mcp_frontend_call_end(mcp_frontend *fe, mcp_call *c, mcp_trace_end *e)
{
    bool traced = c && c->trace.sampled;
    bool access = mcp_logger_access_enabled(fe->logger);
    bool log_error = e->internal && mcp_logger_enabled(fe->logger, MCP_LOG_ERROR);
    if (!traced && !access && !log_error) return;
    const mcp_request *r = c ? c->req : NULL;
    if (!e->model && c && c->trace.model[0]) e->model = c->trace.model;
    if (!e->model && r) e->model = r->model_name;
    if (!e->version && r && r->model_version) e->version = r->model_version;
    if (!e->version && c && c->trace.version[0]) e->version = c->trace.version;
    if (c && c->who.authenticated && c->who.tenant[0]) {
        e->tenant = c->who.tenant;
        e->priority_class = mcp_qos_class_name(c->grant.sla_class != MCP_CLASS_NONE ? c->grant.sla_class : MCP_CLASS_STANDARD);
    }
    if (r) {
        e->request_id = r->id;
        e->priority = r->priority;
        e->batch_size = r->batch_size;
        e->protocol = mcp_protocol_name(r->protocol);
        e->t_queued_ns = r->t_queued_ns;
        e->t_batched_ns = r->t_batched_ns;
        e->t_compute_ns = r->t_gathered_ns;
        e->t_done_ns = r->t_done_ns;
    } else if (c && c->codec) {
        e->protocol = mcp_protocol_name(c->codec->protocol);
    }
    if (c && c->codec && c->status != MCP_STATUS_OK) {
        /* OpenTelemetry's HTTP server convention: a 4xx is the caller's
         * fault, so only a 5xx makes the server span an error. */
        e->error = e->error || mcp_status_http_code(c->status) >= 500;
        if (!e->message) e->message = c->message;
    }
    if (!e->t_sent_ns) e->t_sent_ns = mcp_now_ns();
    if (traced) mcp_tracer_finish(fe->tracer, &c->trace, e);
    if (!access && !log_error) return;
    char trace_id[33] = "", span_id[17] = "";
    if (c && c->trace.active) mcp_trace_format_ids(&c->trace, trace_id, span_id);
    mcp_log_fields f = MCP_LOG_FIELDS_NONE;
    f.request_id = e->request_id;
    f.trace_id = trace_id;
    f.span_id = span_id;
    f.model = e->model;
    f.version = e->version && e->version[0] ? e->version : NULL;
    f.protocol = e->protocol;
    f.transport = e->transport;
    f.method = e->method ? e->method : e->rpc_method;
    f.route = e->route ? e->route : e->name;
    f.tenant = e->tenant;
    f.status = e->code;
    f.duration_us = e->t_start_ns ? (e->t_sent_ns - e->t_start_ns) / 1000 : -1;
    if (access) mcp_logger_access(fe->logger, &f);
    if (log_error) mcp_logger_log(fe->logger, MCP_LOG_ERROR, &f, "%s", e->message && e->message[0] ? e->message : "internal error");
}

/* ---- identity and access ---- */

/* Denied calls and management actions wait here for the event log's
 * writer, so no transport thread ever waits on the store. */
#define AUDIT_RING 1024

typedef struct audit_rec {
    int64_t time_ms;
    char actor[192];
    char action[24];
    char target[256];
    char outcome[16];
    char reason[256];
} audit_rec;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void mcp_frontend_audit(mcp_frontend *fe, const char *actor, const char *action, const char *target, const char *outcome,
                        const char *reason)
{
    if (!fe->audit_running) return;
    pthread_mutex_lock(&fe->audit_mu);
    if (fe->audit_len == AUDIT_RING) {
        pthread_mutex_unlock(&fe->audit_mu);
        atomic_fetch_add(&fe->audit_dropped, 1);
        return;
    }
    audit_rec *r = &fe->audit[(fe->audit_head + fe->audit_len) % AUDIT_RING];
    r->time_ms = wall_ms();
    snprintf(r->actor, sizeof r->actor, "%s", actor);
    snprintf(r->action, sizeof r->action, "%s", action);
    snprintf(r->target, sizeof r->target, "%s", target);
    snprintf(r->outcome, sizeof r->outcome, "%s", outcome);
    snprintf(r->reason, sizeof r->reason, "%s", reason ? reason : "");
    fe->audit_len++;
    pthread_cond_signal(&fe->audit_cv);
    pthread_mutex_unlock(&fe->audit_mu);
}

static void *audit_main(void *arg)
{
    mcp_frontend *fe = arg;
    audit_rec rec;
    pthread_mutex_lock(&fe->audit_mu);
    for (;;) {
        while (!fe->audit_len && !fe->audit_stop) pthread_cond_wait(&fe->audit_cv, &fe->audit_mu);
        if (!fe->audit_len) break; /* stopping, and all written */
        rec = fe->audit[fe->audit_head];
        fe->audit_head = (fe->audit_head + 1) % AUDIT_RING;
        fe->audit_len--;
        pthread_mutex_unlock(&fe->audit_mu);
        char msg[256];
        mcp_err err = {msg, sizeof msg};
        mcp_catalog_event e = {.time_ms = rec.time_ms, .actor = rec.actor, .action = rec.action, .target = rec.target,
                               .outcome = rec.outcome, .reason = rec.reason};
        if (mcp_catalog_add_event(mcp_plane_catalog(fe->plane), &e, &err) != MCP_STATUS_OK)
            fe_log(fe, MCP_LOG_WARN, "event log: %s", msg);
        pthread_mutex_lock(&fe->audit_mu);
    }
    pthread_mutex_unlock(&fe->audit_mu);
    return NULL;
}

static void start_audit(mcp_frontend *fe)
{
    if (fe->audit_running || !fe->plane) return;
    fe->audit = mcp_calloc(AUDIT_RING, sizeof *fe->audit);
    if (fe->audit && pthread_create(&fe->audit_thread, NULL, audit_main, fe) == 0) fe->audit_running = true;
}

static void stop_audit(mcp_frontend *fe)
{
    if (fe->audit_running) {
        pthread_mutex_lock(&fe->audit_mu);
        fe->audit_stop = true;
        pthread_cond_broadcast(&fe->audit_cv);
        pthread_mutex_unlock(&fe->audit_mu);
        pthread_join(fe->audit_thread, NULL);
        fe->audit_running = false;
    }
    mcp_free(fe->audit);
    fe->audit = NULL;
}

int64_t mcp_frontend_audit_dropped(const mcp_frontend *fe) { return atomic_load(&fe->audit_dropped); }

void mcp_frontend_set_auth(mcp_frontend *fe, mcp_auth *a)
{
    pthread_rwlock_wrlock(&fe->auth_mu);
    mcp_auth *old = fe->auth;
    fe->auth = a;
    pthread_rwlock_unlock(&fe->auth_mu);
    mcp_auth_destroy(old);
}

bool mcp_frontend_auth_enabled(mcp_frontend *fe)
{
    pthread_rwlock_rdlock(&fe->auth_mu);
    bool on = fe->auth && mcp_auth_enabled(fe->auth);
    pthread_rwlock_unlock(&fe->auth_mu);
    return on;
}

void mcp_identity_describe(const mcp_identity *who, mcp_peer peer, char *out, size_t cap)
{
    static const char *const peers[] = {"remote", "loopback", "unix socket"};
    if (!who->authenticated)
        snprintf(out, cap, "anonymous (%s)", peers[peer]);
    else
        snprintf(out, cap, "%s%s%s (%s)", who->tenant, who->tenant[0] ? "/" : "", who->subject, who->via);
}

mcp_status mcp_frontend_authenticate(mcp_frontend *fe, const char *authorization, const char *cert_cn, mcp_peer peer,
                                     mcp_identity *who, mcp_err *err)
{
    mcp_identity_anonymous(who);
    pthread_rwlock_rdlock(&fe->auth_mu);
    mcp_status st = MCP_STATUS_OK;
    bool on = fe->auth && mcp_auth_enabled(fe->auth);
    if (on && authorization && authorization[0])
        st = mcp_auth_authenticate(fe->auth, authorization, (int64_t)time(NULL), who, err);
    else if (on && cert_cn)
        st = mcp_auth_authenticate_certificate(fe->auth, cert_cn, who, err);
    pthread_rwlock_unlock(&fe->auth_mu);
    if (st != MCP_STATUS_OK) {
        char actor[256];
        mcp_identity_describe(who, peer, actor, sizeof actor);
        mcp_frontend_audit(fe, actor, "denied", "(credential)", "unauthenticated", err->buf);
        mcp_identity_anonymous(who);
    }
    return st;
}

mcp_status mcp_frontend_allow(mcp_frontend *fe, const mcp_identity *who, mcp_peer peer, mcp_action act,
                              const char *model, mcp_err *err)
{
    pthread_rwlock_rdlock(&fe->auth_mu);
    mcp_decision d = fe->auth ? mcp_auth_decide(fe->auth, who, peer, act, model) : MCP_DECIDE_ALLOW;
    pthread_rwlock_unlock(&fe->auth_mu);
    mcp_status st = MCP_STATUS_OK;
    switch (d) {
    case MCP_DECIDE_ALLOW: return MCP_STATUS_OK;
    case MCP_DECIDE_UNAUTHENTICATED:
        st = mcp_err_set(err, MCP_STATUS_UNAUTHENTICATED, "%s needs a credential: 'Authorization: Bearer <API key or JWT>'",
                         mcp_action_name(act));
        break;
    case MCP_DECIDE_FORBIDDEN:
        st = model ? mcp_err_set(err, MCP_STATUS_PERMISSION_DENIED, "your roles do not allow %s on model '%s'",
                                 mcp_action_name(act), model)
                   : mcp_err_set(err, MCP_STATUS_PERMISSION_DENIED, "your roles do not allow %s", mcp_action_name(act));
        break;
    case MCP_DECIDE_HIDDEN:
        /* The very answer a model that does not exist gets. */
        st = mcp_err_set(err, MCP_STATUS_NOT_FOUND, "unknown model '%s'", model ? model : "");
        break;
    }
    char actor[256];
    mcp_identity_describe(who, peer, actor, sizeof actor);
    char target[300];
    snprintf(target, sizeof target, "%s", model ? model : mcp_action_name(act));
    mcp_frontend_audit(fe, actor, "denied", target, mcp_action_name(act), err->buf);
    return st;
}

bool mcp_frontend_visible(mcp_frontend *fe, const mcp_identity *who, const char *model)
{
    pthread_rwlock_rdlock(&fe->auth_mu);
    bool yes = !fe->auth || mcp_auth_visible(fe->auth, who, model);
    pthread_rwlock_unlock(&fe->auth_mu);
    return yes;
}

bool mcp_frontend_may(mcp_frontend *fe, const mcp_identity *who, mcp_peer peer, mcp_action act, const char *model)
{
    pthread_rwlock_rdlock(&fe->auth_mu);
    bool yes = !fe->auth || mcp_auth_decide(fe->auth, who, peer, act, model) == MCP_DECIDE_ALLOW;
    pthread_rwlock_unlock(&fe->auth_mu);
    return yes;
}

bool mcp_frontend_is_namespace(mcp_frontend *fe, const char *seg, size_t len)
{
    if (!len || len > MCP_AUTH_TENANT_MAX) return false;
    char prefix[MCP_AUTH_TENANT_MAX + 2];
    memcpy(prefix, seg, len);
    prefix[len] = '/';
    prefix[len + 1] = '\0';
    mcp_repository_entry *list;
    int n = mcp_repository_index(fe->repo, &list);
    bool found = false;
    for (int i = 0; i < n && !found; i++) found = strncmp(list[i].name, prefix, len + 1) == 0;
    mcp_repository_entries_free(list, n);
    return found;
}

/* Priority classes are bands: every critical request before any standard
 * one, every standard before batch; the request's own priority orders
 * within its band. */
#define CLASS_BAND ((int64_t)1 << 40)

static int64_t class_priority(mcp_qos_class cls, int64_t priority)
{
    int64_t band = cls == MCP_CLASS_CRITICAL ? -CLASS_BAND : cls == MCP_CLASS_BATCH ? CLASS_BAND : 0;
    if (priority > CLASS_BAND / 2) priority = CLASS_BAND / 2;
    if (priority < -CLASS_BAND / 2) priority = -CLASS_BAND / 2;
    return band + priority;
}

mcp_status mcp_frontend_admit_tenant(mcp_frontend *fe, const mcp_identity *who, bool generate, mcp_tenant_grant *g,
                                     int64_t *retry_after_s, mcp_err *err)
{
    *retry_after_s = 0;
    memset(g, 0, sizeof *g);
    g->weight = 1.0;
    g->sla_class = MCP_CLASS_NONE;
    pthread_rwlock_rdlock(&fe->auth_mu);
    bool on = fe->auth && mcp_auth_enabled(fe->auth);
    mcp_tenant_limits lim = {0};
    if (on) lim = mcp_auth_tenant_limits(fe->auth, who->tenant);
    pthread_rwlock_unlock(&fe->auth_mu);
    /* Tenants are authenticated ones: without access rules there are none. */
    if (!on || !who->authenticated) return MCP_STATUS_OK;
    snprintf(g->tenant, sizeof g->tenant, "%s", who->tenant);
    g->weight = lim.weight > 0 ? lim.weight : 1.0;
    g->max_queued = lim.max_queued;
    g->tokens_per_s = lim.tokens_per_s;
    g->sla_class = who->sla_class != MCP_CLASS_NONE ? who->sla_class : lim.class_;
    g->deadline_ms = who->sla_deadline_ms;
    mcp_status st = mcp_qos_admit(fe->qos, g->tenant, &lim, generate, mcp_now_ns(), retry_after_s, err);
    if (st != MCP_STATUS_OK) {
        char actor[256];
        mcp_identity_describe(who, MCP_PEER_REMOTE, actor, sizeof actor);
        mcp_frontend_audit(fe, actor, "denied", g->tenant, "rate-limited", err->buf);
        return st;
    }
    g->held = true;
    return MCP_STATUS_OK;
}

void mcp_frontend_release_tenant(mcp_frontend *fe, mcp_tenant_grant *g)
{
    if (!g->held) return;
    g->held = false;
    mcp_qos_release(fe->qos, g->tenant);
}

void mcp_frontend_charge_tokens(mcp_frontend *fe, const char *tenant, int64_t tokens)
{
    if (!tenant[0]) return;
    pthread_rwlock_rdlock(&fe->auth_mu);
    mcp_tenant_limits lim = fe->auth ? mcp_auth_tenant_limits(fe->auth, tenant) : (mcp_tenant_limits){0};
    pthread_rwlock_unlock(&fe->auth_mu);
    if (lim.tokens_per_s > 0) mcp_qos_charge_tokens(fe->qos, tenant, &lim, tokens, mcp_now_ns());
}

/* A request's share of its tenant: fair queuing by weight, its class's
 * priority band, the SLA deadline when it is sooner. */
static void apply_grant(mcp_request *r, const mcp_tenant_grant *g)
{
    memcpy(r->tenant, g->tenant, sizeof r->tenant);
    r->weight = g->weight;
    r->tenant_max_queued = g->max_queued;
    r->priority = class_priority(g->sla_class, r->priority);
    if (g->deadline_ms > 0) {
        /* The SLA's deadline, or the request's own timeout when sooner. */
        int64_t d = r->t_arrival_ns + g->deadline_ms * 1000000;
        if (r->deadline_ns <= 0 && r->timeout_us > 0 && r->timeout_us < g->deadline_ms * 1000)
            d = r->t_arrival_ns + r->timeout_us * 1000;
        if (r->deadline_ns <= 0 || d < r->deadline_ns) r->deadline_ns = d;
    }
}

/* ---- the metrics observer ---- */

static void metrics_event(void *user, mcp_obs_event ev, const mcp_call *c, const char *model, const char *version,
                          mcp_status st)
{
    mcp_metrics *m = user;
    mcp_protocol p = c->codec->protocol;
    if (ev == MCP_OBS_QUEUED) {
        mcp_metrics_inflight_add(m, 1);
        return;
    }
    if (ev == MCP_OBS_COMPLETED) mcp_metrics_inflight_add(m, -1);
    /* Unknown names never become label values; known ones count errors. */
    if (st != MCP_STATUS_OK && model[0]) mcp_metrics_error(m, model, mcp_metrics_reason(st));
    if (ev == MCP_OBS_COMPLETED && model[0]) mcp_metrics_bytes(m, model, version, (int64_t)c->wire.len, (int64_t)c->out.len);
    mcp_metrics_request(m, model, version, p, mcp_status_http_code(st));
    if (c->who.authenticated && c->who.tenant[0])
        mcp_metrics_tenant_request(m, c->who.tenant,
                                   mcp_qos_class_name(c->grant.sla_class != MCP_CLASS_NONE ? c->grant.sla_class
                                                                                          : MCP_CLASS_STANDARD),
                                   mcp_status_http_code(st));
}

mcp_observer mcp_metrics_observer(mcp_metrics *m) { return (mcp_observer){1, metrics_event, m}; }

/* ---- the request path ---- */

static bool park(mcp_frontend *fe, mcp_call *c, const char *name);
static void unpark(mcp_frontend *fe, const char *name, mcp_status st, const char *why);

static void observe(mcp_frontend *fe, mcp_obs_event ev, const mcp_call *c, const mcp_model_version *v, mcp_status st)
{
    if (fe->observer.on_event)
        fe->observer.on_event(fe->observer.user, ev, c, v ? v->name : "", v ? v->version : "", st);
}

/* Answers a call that never reached a scheduler. */
static void reject(mcp_frontend *fe, mcp_call *c, const mcp_model_version *v, mcp_status st)
{
    c->status = st;
    mcp_buf_reset(&c->out);
    c->json_len = 0;
    if (c->trace.sampled) c->trace.t_encode_ns = mcp_now_ns();
    c->codec->error(c->message[0] ? c->message : mcp_status_str(st), &c->out);
    if (c->trace.sampled) c->trace.t_encoded_ns = c->trace.t_send_ns = mcp_now_ns();
    observe(fe, MCP_OBS_REJECTED, c, v, st);
    mcp_frontend_release_tenant(fe, &c->grant);
    c->respond(c);
}

/* peek_model: the model the call addresses. The route names it, or the
 * codec finds it in the body, or the only ready model is meant. */
static mcp_status peek_model(mcp_frontend *fe, mcp_call *c, char *name, size_t cap, char *version, size_t vcap,
                             void **state, mcp_err *err)
{
    if (c->model) {
        snprintf(name, cap, "%s", c->model);
        snprintf(version, vcap, "%s", c->version ? c->version : "");
        return MCP_STATUS_OK;
    }
    name[0] = version[0] = '\0';
    if (c->codec->peek_model) {
        mcp_status st = c->codec->peek_model(&c->wire, name, cap, version, vcap, state, err);
        if (st != MCP_STATUS_OK) return st;
    }
    if (name[0]) return MCP_STATUS_OK;
    mcp_repository_entry *list;
    int n = mcp_repository_index(fe->repo, &list), ready = 0;
    for (int i = 0; i < n; i++)
        if (list[i].state == MCP_MODEL_READY) {
            ready++;
            snprintf(name, cap, "%s", list[i].name);
        }
    mcp_repository_entries_free(list, n);
    if (ready != 1) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "field 'model' is required when %d models are loaded", ready);
    return MCP_STATUS_OK;
}

/* authorize: the caller's identity (which its transport established) may
 * infer on this model, and its tenant is within its limits; every
 * transport passes through here. A parked call that comes back keeps the
 * admission it had. */
static mcp_status authorize(mcp_frontend *fe, mcp_call *c, const char *model, mcp_err *err)
{
    mcp_status st = mcp_frontend_allow(fe, &c->who, c->peer, MCP_ACT_INFER, model, err);
    if (st == MCP_STATUS_OK && !c->grant.held)
        st = mcp_frontend_admit_tenant(fe, &c->who, false, &c->grant, &c->retry_after_s, err);
    return st;
}

mcp_model_version *mcp_frontend_route_model(mcp_frontend *fe, const char *name, const char *version, mcp_status *st,
                                            mcp_err *err)
{
    mcp_model_version *v = mcp_repository_get(fe->repo, name, version);
    if (v) {
        *st = MCP_STATUS_OK;
        return v;
    }
    mcp_repository_entry *list;
    int n = mcp_repository_index(fe->repo, &list);
    const mcp_repository_entry *e = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0) e = &list[i];
    if (!e)
        *st = mcp_err_set(err, MCP_STATUS_NOT_FOUND, "unknown model '%s'", name);
    else if (version && *version && e->state == MCP_MODEL_READY)
        *st = mcp_err_set(err, MCP_STATUS_NOT_FOUND, "model '%s' has no version '%s' (current: %s)", name, version,
                          e->version);
    else
        *st = mcp_err_set(err, MCP_STATUS_UNAVAILABLE, "model '%s' is not ready (%s%s%s)", name,
                          mcp_model_state_name(e->state), e->reason[0] ? ": " : "", e->reason);
    mcp_repository_entries_free(list, n);
    return NULL;
}

/* route_model: name and version to a loaded version, retained. */
static mcp_model_version *route_model(mcp_frontend *fe, const char *name, const char *version, mcp_status *st,
                                      mcp_err *err)
{
    return mcp_frontend_route_model(fe, name, version, st, err);
}

/* decode_request: the wire bytes into the request's tensors, in its pool. */
static mcp_status decode_request(mcp_call *c, mcp_request *r, void *state, const mcp_model_version *v, mcp_err *err)
{
    return c->codec->decode(r, &c->wire, state, v, err);
}

/* validate_request: names, dtypes, shapes and batch size against the model. */
static mcp_status validate_request(mcp_request *r, const mcp_model_version *v, mcp_err *err)
{
    return mcp_request_validate(r, v, err);
}

/* encode_response: the request's outcome into the call's answer. */
static void encode_response(mcp_call *c, mcp_request *r)
{
    mcp_buf_reset(&c->out);
    c->json_len = 0;
    c->status = r->status;
    if (r->status == MCP_STATUS_OK) {
        c->codec->encode(r, &c->out, &c->json_len);
    } else {
        snprintf(c->message, sizeof c->message, "%s", r->error[0] ? r->error : mcp_status_str(r->status));
        c->codec->error(c->message, &c->out);
    }
}

/* complete_request: a scheduler finished the request (any thread). */
static void complete_request(mcp_request *r, void *user)
{
    mcp_call *c = user;
    mcp_frontend *fe = c->frontend;
    if (r->watch) mcp_rollout_record(r->watch, r->route_role, r->status, mcp_now_ns() - r->t_arrival_ns);
    /* Output monitoring: one atomic add unless the request is sampled. */
    if (r->model && r->model->monitor) mcp_monitor_offer_request(r->model->monitor, r);
    if (c->trace.sampled) c->trace.t_encode_ns = mcp_now_ns();
    encode_response(c, r);
    if (c->trace.sampled) c->trace.t_encoded_ns = c->trace.t_send_ns = mcp_now_ns();
    observe(fe, MCP_OBS_COMPLETED, c, r->model, r->status);
    mcp_frontend_release_tenant(fe, &c->grant);
    c->respond(c);
}

/* ---- shadows: a copy of the request for a version whose answer is only
 * compared ---- */

typedef struct shadow_pair {
    atomic_int pending; /* the primary and the copy */
    mcp_call *call;
    mcp_request *primary, *copy; /* retained */
    mcp_route_watch *watch;      /* retained */
} shadow_pair;

static void pair_arrive(shadow_pair *p)
{
    if (atomic_fetch_sub(&p->pending, 1) != 1) return;
    if (p->copy) mcp_rollout_compare(p->watch, p->primary, p->copy);
    mcp_request_release(p->primary);
    mcp_request_release(p->copy);
    mcp_route_watch_release(p->watch);
    mcp_free(p);
}

/* The primary's answer goes to its client first; then it waits for (or
 * meets) the shadow's. */
static void complete_paired(mcp_request *r, void *user)
{
    shadow_pair *p = user;
    complete_request(r, p->call);
    pair_arrive(p);
}

static void shadow_done(mcp_request *r, void *user)
{
    (void)r;
    pair_arrive(user);
}

/* The request's inputs, copied into a new request for `to` (before any
 * preprocessing rewrites them); NULL when out of memory. */
static mcp_request *request_copy(const mcp_request *r, mcp_model_version *to)
{
    mcp_request *c = mcp_request_create(r->protocol);
    if (!c) return NULL;
    c->model = mcp_model_version_retain(to);
    c->model_name = mcp_pool_strndup(c->pool, to->name, strlen(to->name));
    c->model_version = mcp_pool_strndup(c->pool, to->version, strlen(to->version));
    c->id = r->id ? mcp_pool_strndup(c->pool, r->id, strlen(r->id)) : NULL;
    c->priority = r->priority;
    memcpy(c->tenant, r->tenant, sizeof c->tenant);
    c->weight = r->weight;
    c->tenant_max_queued = r->tenant_max_queued;
    c->timeout_us = r->timeout_us;
    c->deadline_ns = r->deadline_ns;
    c->n_inputs = r->n_inputs;
    c->inputs = mcp_pool_calloc(c->pool, sizeof *c->inputs * (size_t)(r->n_inputs ? r->n_inputs : 1));
    bool ok = c->model_name && c->model_version && c->inputs;
    for (int i = 0; ok && i < r->n_inputs; i++) {
        const mcp_tensor *t = &r->inputs[i].t;
        mcp_req_tensor *d = &c->inputs[i];
        d->name = mcp_pool_strndup(c->pool, r->inputs[i].name, strlen(r->inputs[i].name));
        d->t = *t;
        d->t.owns_data = false;
        size_t nbytes = mcp_tensor_nbytes(t);
        d->t.data = mcp_pool_alloc(c->pool, nbytes ? nbytes : 1);
        ok = d->name && d->t.data && !t->format;
        if (!ok) break;
        if (t->dtype == MCP_DTYPE_STRING) {
            const char *const *from = t->data;
            char **into = d->t.data;
            for (int64_t k = 0; ok && k < mcp_tensor_numel(t); k++)
                ok = (into[k] = mcp_pool_strndup(c->pool, from[k], strlen(from[k]))) != NULL;
        } else if (nbytes) {
            memcpy(d->t.data, t->data, nbytes);
        }
    }
    if (!ok) {
        mcp_request_release(c);
        return NULL;
    }
    return c;
}

/* Makes the pair for a shadowed request (before it is submitted); NULL
 * when the copy cannot be made or is not valid for the shadow. */
static shadow_pair *shadow_start(mcp_call *c, mcp_request *r, mcp_model_version *shadow, mcp_route_watch *watch)
{
    mcp_request *copy = request_copy(r, shadow);
    char msg[256];
    mcp_err err = {msg, sizeof msg};
    if (!copy || mcp_request_validate(copy, shadow, &err) != MCP_STATUS_OK) {
        mcp_request_release(copy);
        return NULL;
    }
    shadow_pair *p = mcp_calloc(1, sizeof *p);
    if (!p) {
        mcp_request_release(copy);
        return NULL;
    }
    atomic_init(&p->pending, 2);
    p->call = c;
    p->primary = mcp_request_retain(r);
    p->copy = copy;
    p->watch = mcp_route_watch_retain(watch);
    return p;
}

/* The copy goes to the shadow's queue once the primary is queued; a full
 * queue drops it (counted), and a primary refused at once takes no copy. */
static void shadow_submit(shadow_pair *p, bool primary_queued)
{
    mcp_request *copy = p->copy;
    copy->done = shadow_done;
    copy->done_user = p;
    mcp_model_version *v = copy->model;
    mcp_status st = primary_queued && v->serving ? mcp_scheduler_submit(v->serving, copy) : MCP_STATUS_UNAVAILABLE;
    if (st == MCP_STATUS_OK) return;
    if (primary_queued) mcp_rollout_dropped(p->watch);
    p->copy = NULL;
    mcp_request_release(copy);
    pair_arrive(p);
}

/* route_rollout: an unpinned request, once decoded (its id known), goes
 * to the canary by weight, and a sampled share is copied to the shadow. */
static shadow_pair *route_rollout(mcp_frontend *fe, mcp_call *c, mcp_request *r)
{
    mcp_route rt;
    if (!mcp_repository_route(fe->repo, r->model->name, r->id, &rt)) return NULL;
    if (rt.v != r->model) {
        char msg[256];
        mcp_err err = {msg, sizeof msg};
        if (mcp_request_validate(r, rt.v, &err) == MCP_STATUS_OK) {
            mcp_model_version_release(r->model);
            r->model = rt.v;
            rt.v = NULL;
            r->model_version = mcp_pool_strndup(r->pool, r->model->version, strlen(r->model->version));
            r->route_role = rt.role;
        } else {
            /* Not valid for the other version: it stays where it was
             * (put back in that version's input order). */
            mcp_request_validate(r, r->model, &err);
        }
    }
    r->watch = rt.watch;
    rt.watch = NULL;
    shadow_pair *pair = rt.shadow && r->watch ? shadow_start(c, r, rt.shadow, r->watch) : NULL;
    mcp_route_release(&rt);
    return pair;
}

/* submit_request: onto the model version's scheduler; a full queue or a
 * draining version answers at once. */
/* The scheduler of a version that was current when the request was routed
 * refuses it once the version is retired (a hot swap in between): a
 * request that asked for no version goes to the one current now, checked
 * against it again, rather than failing (a few times, for swaps back to
 * back). */
static mcp_status submit_to_current(mcp_frontend *fe, mcp_request *r, mcp_model_version **vp, bool pinned)
{
    mcp_model_version *v = *vp;
    mcp_status st = v->serving ? mcp_scheduler_submit(v->serving, r) : MCP_STATUS_UNAVAILABLE;
    for (int attempt = 0; st == MCP_STATUS_UNAVAILABLE && !pinned && attempt < 3; attempt++) {
        mcp_model_version *cur = mcp_repository_get(fe->repo, v->name, NULL);
        char msg[256];
        mcp_err err = {msg, sizeof msg};
        if (!cur || cur == r->model || !cur->serving || mcp_request_validate(r, cur, &err) != MCP_STATUS_OK) {
            mcp_model_version_release(cur);
            break;
        }
        mcp_model_version_release(r->model);
        r->model = cur; /* the request's reference */
        r->model_version = mcp_pool_strndup(r->pool, cur->version, strlen(cur->version));
        *vp = cur;
        st = mcp_scheduler_submit(cur->serving, r);
    }
    return st;
}

static mcp_status submit_request(mcp_frontend *fe, mcp_call *c, mcp_request *r, mcp_model_version *v, bool pinned,
                                 shadow_pair *pair)
{
    r->done = pair ? complete_paired : complete_request;
    r->done_user = pair ? (void *)pair : (void *)c;
    /* A deadline the transport knows (gRPC's) bounds the request too. */
    if (c->deadline_ns > 0) {
        int64_t own = r->timeout_us > 0 && r->timeout_us < INT64_MAX / 1000 ? mcp_now_ns() + r->timeout_us * 1000 : 0;
        r->deadline_ns = own > 0 && own < c->deadline_ns ? own : c->deadline_ns;
    }
    apply_grant(r, &c->grant);
    c->req = mcp_request_retain(r); /* the call's reference, for the transport */
    observe(fe, MCP_OBS_QUEUED, c, v, MCP_STATUS_OK);
    if (c->on_queued) c->on_queued(c);
    mcp_status st = submit_to_current(fe, r, &v, pinned);
    if (st == MCP_STATUS_RESOURCE_EXHAUSTED && r->error[0]) {
        /* The tenant's queued cap (the scheduler said so). */
        char why[sizeof r->error];
        memcpy(why, r->error, sizeof why);
        c->retry_after_s = 1;
        mcp_request_fail(r, st, "%s", why);
    } else if (st != MCP_STATUS_OK) {
        mcp_request_fail(r, st, st == MCP_STATUS_RESOURCE_EXHAUSTED ? "queue of model '%s' is full; retry later"
                                                                       : "model '%s' is not accepting requests",
                         v->name);
    }
    if (pair) shadow_submit(pair, st == MCP_STATUS_OK);
    return st;
}

void mcp_frontend_infer(mcp_frontend *fe, mcp_call *c)
{
    mcp_err err = {c->message, sizeof c->message};
    c->message[0] = '\0';
    c->status = MCP_STATUS_OK;
    c->frontend = fe;
    char name[256], version[128];
    void *state = NULL;
    if (c->trace.pending) c->trace.t_decode_ns = mcp_now_ns();
    mcp_status st = peek_model(fe, c, name, sizeof name, version, sizeof version, &state, &err);
    if (c->trace.pending) mcp_trace_decide(fe->tracer, &c->trace, st == MCP_STATUS_OK ? name : NULL);
    if (st == MCP_STATUS_OK) st = authorize(fe, c, name, &err);
    mcp_model_version *v = st == MCP_STATUS_OK ? route_model(fe, name, version[0] ? version : NULL, &st, &err) : NULL;
    if (!v) {
        if (state) c->codec->release_state(state);
        /* Unloaded by the memory policy: it loads again, and the call
         * waits for it off this thread. */
        if (st == MCP_STATUS_UNAVAILABLE && !version[0] && mcp_repository_evicted(fe->repo, name) && park(fe, c, name)) return;
        reject(fe, c, NULL, st);
        return;
    }
    atomic_store_explicit(&v->last_used_ns, mcp_now_ns(), memory_order_relaxed);
    if (c->trace.sampled) {
        snprintf(c->trace.model, sizeof c->trace.model, "%s", v->name);
        snprintf(c->trace.version, sizeof c->trace.version, "%s", v->version);
    }
    if (v->llm) {
        if (state) c->codec->release_state(state);
        mcp_err_set(&err, MCP_STATUS_INVALID_ARGUMENT,
                    "model '%s' is a generative model: it takes text through POST /v2/models/%s/generate, not tensors", v->name,
                    v->name);
        reject(fe, c, v, MCP_STATUS_INVALID_ARGUMENT);
        mcp_model_version_release(v);
        return;
    }
    mcp_request *r = mcp_request_create(c->codec->protocol);
    if (!r) {
        if (state) c->codec->release_state(state);
        mcp_err_set(&err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        reject(fe, c, v, MCP_STATUS_OUT_OF_MEMORY);
        mcp_model_version_release(v);
        return;
    }
    r->model = v; /* the request holds the reference now */
    r->model_name = mcp_pool_strndup(r->pool, v->name, strlen(v->name));
    r->model_version = mcp_pool_strndup(r->pool, v->version, strlen(v->version));
    st = decode_request(c, r, state, v, &err);
    if (state) c->codec->release_state(state);
    if (st == MCP_STATUS_OK) st = validate_request(r, v, &err);
    if (c->trace.sampled) c->trace.t_decoded_ns = mcp_now_ns();
    if (st != MCP_STATUS_OK) {
        reject(fe, c, v, st);
        mcp_request_release(r);
        return;
    }
    bool pinned = version[0] != '\0';
    shadow_pair *pair = pinned ? NULL : route_rollout(fe, c, r);
    submit_request(fe, c, r, r->model, pinned, pair);
    mcp_request_release(r); /* the scheduler and the call hold theirs */
}

/* ---- cold starts: calls for an evicted model wait for its load ---- */

typedef struct parked {
    struct parked *next;
    mcp_call *call;
    char name[256];
} parked;

static void free_control(mcp_control *ctl);

/* Parks c for `name`; the first call parked for a name queues its load.
 * false when it cannot (too many parked, no loader): answer at once. */
static bool park(mcp_frontend *fe, mcp_call *c, const char *name)
{
    parked *p = mcp_calloc(1, sizeof *p);
    if (!p) return false;
    p->call = c;
    snprintf(p->name, sizeof p->name, "%s", name);
    pthread_mutex_lock(&fe->park_mu);
    bool first = true;
    for (parked *q = fe->parked; q; q = q->next) first &= strcmp(q->name, name) != 0;
    bool room = fe->n_parked < MAX_PARKED;
    if (room) {
        p->next = fe->parked;
        fe->parked = p;
        fe->n_parked++;
    }
    pthread_mutex_unlock(&fe->park_mu);
    if (!room) {
        mcp_free(p);
        return false;
    }
    if (c->on_queued) c->on_queued(c); /* the transport waits for the answer */
    if (!first) return true;
    mcp_control *ctl = mcp_calloc(1, sizeof *ctl);
    if (ctl) {
        ctl->op = MCP_CONTROL_COLD_START;
        snprintf(ctl->name, sizeof ctl->name, "%s", name);
        ctl->done = free_control;
    }
    if (!ctl || mcp_frontend_control(fe, ctl) != MCP_STATUS_OK) {
        mcp_free(ctl);
        /* Nothing will load it: every call parked for it is answered. */
        unpark(fe, name, MCP_STATUS_UNAVAILABLE, "cannot load it again now (loaders busy or stopping); retry later");
    }
    return true;
}

/* The load of `name` ended: its parked calls run (st OK) or fail. */
static void unpark(mcp_frontend *fe, const char *name, mcp_status st, const char *why)
{
    pthread_mutex_lock(&fe->park_mu);
    parked *mine = NULL;
    for (parked **pp = &fe->parked; *pp;) {
        parked *p = *pp;
        if (strcmp(p->name, name) == 0) {
            *pp = p->next;
            p->next = mine;
            mine = p;
            fe->n_parked--;
        } else {
            pp = &p->next;
        }
    }
    pthread_mutex_unlock(&fe->park_mu);
    while (mine) {
        parked *p = mine;
        mine = p->next;
        mcp_call *c = p->call;
        if (st == MCP_STATUS_OK) {
            mcp_frontend_infer(fe, c);
        } else {
            snprintf(c->message, sizeof c->message, "model '%s' was unloaded to save memory and did not load again: %s", name,
                     why);
            reject(fe, c, NULL, st);
        }
        mcp_free(p);
    }
}

/* ---- registry hooks: schedulers attach when a version becomes current ---- */

static void serving_free(void *p) { mcp_scheduler_destroy(p); }
static void generator_free(void *p) { mcp_gen_engine_destroy(p); }

/* Drains whichever engine serves the version. */
static void version_drain(mcp_model_version *v)
{
    if (v->serving) mcp_scheduler_drain(v->serving);
    if (v->generator) mcp_gen_drain(v->generator);
}

static bool tenant_valid(const char *tenant, size_t len)
{
    bool ok = len <= MCP_TENANT_MAX;
    for (size_t i = 0; ok && i < len; i++) {
        char ch = tenant[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             (ch && strchr("._:@/-", ch));
    }
    return ok;
}

bool mcp_frontend_tenant_valid(const char *tenant) { return tenant_valid(tenant, strnlen(tenant, MCP_TENANT_MAX + 1)); }

bool mcp_frontend_tenant_key(const mcp_frontend *fe, const char *tenant, size_t len, uint8_t key[32])
{
    if (!tenant_valid(tenant, len)) return false;
    /* HMAC-SHA256(secret, "prefix-cache\0" tenant): a tenant's key is
     * unpredictable without the secret, and two tenants' keys differ. */
    unsigned char msg[13 + MCP_TENANT_MAX], md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (len > MCP_TENANT_MAX) len = MCP_TENANT_MAX;
    memcpy(msg, "prefix-cache", 13);
    if (len) memcpy(msg + 13, tenant, len);
    if (!HMAC(EVP_sha256(), fe->tenant_secret, sizeof fe->tenant_secret, msg, 13 + len, md, &mdlen) || mdlen < 32)
        memset(md, 0, 32);
    memcpy(key, md, 32);
    return true;
}

mcp_status mcp_frontend_generate(mcp_frontend *fe, const mcp_identity *who, mcp_peer peer, const char *name,
                                 const char *version, mcp_gen_request *const *rs, int n, int *submitted,
                                 char *answered_by, size_t cap, mcp_err *err)
{
    *submitted = 0;
    mcp_status st = mcp_frontend_allow(fe, who, peer, MCP_ACT_GENERATE, name, err);
    if (st != MCP_STATUS_OK) return st;
    mcp_tenant_grant g;
    int64_t retry = 0;
    st = mcp_frontend_admit_tenant(fe, who, true, &g, &retry, err);
    if (st != MCP_STATUS_OK) return st;
    /* Generation holds no admission slot past this call (its tokens are
     * charged as they come); it takes its tenant's share of the step loop. */
    mcp_frontend_release_tenant(fe, &g);
    for (int i = 0; i < n; i++) {
        memcpy(rs[i]->tenant, g.tenant, sizeof rs[i]->tenant);
        rs[i]->weight = g.weight;
        rs[i]->priority = class_priority(g.sla_class, rs[i]->priority);
        if (g.deadline_ms > 0) {
            int64_t d = mcp_now_ns() + g.deadline_ms * 1000000;
            if (rs[i]->deadline_ns <= 0 || d < rs[i]->deadline_ns) rs[i]->deadline_ns = d;
        }
    }
    mcp_model_version *v = route_model(fe, name, version, &st, err); /* once: every choice on one version */
    if (!v) return st;
    atomic_store_explicit(&v->last_used_ns, mcp_now_ns(), memory_order_relaxed);
    if (!v->generator) {
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model '%s' is not a generative model; use POST /v2/models/%s/infer",
                         v->name, v->name);
    } else {
        for (int i = 0; i < n && st == MCP_STATUS_OK; i++) {
            st = mcp_gen_submit(v->generator, rs[i]);
            if (st == MCP_STATUS_OK) (*submitted)++;
        }
        if (st == MCP_STATUS_RESOURCE_EXHAUSTED)
            mcp_err_set(err, st, "the queue of model '%s' is full (%lld waiting); retry later", v->name,
                        (long long)v->desc->generation.max_queue);
        else if (st != MCP_STATUS_OK) mcp_err_set(err, st, "model '%s' is not accepting requests", v->name);
        else if (answered_by) snprintf(answered_by, cap, "%s", v->version);
        for (int i = 0; st != MCP_STATUS_OK && i < *submitted; i++) atomic_store(&rs[i]->cancel, true);
    }
    mcp_model_version_release(v);
    return st;
}

static void monitor_free(void *mon) { mcp_monitor_destroy(mon); }

/* A step's generated tokens, per tenant, against its tokens_per_s. */
static void charge_tokens_hook(void *user, const char *tenant, int64_t tokens)
{
    mcp_frontend_charge_tokens(user, tenant, tokens);
}

static mcp_status hook_ready(mcp_model_version *v, void *user, mcp_err *err)
{
    mcp_frontend *fe = user;
    /* A generative model is served by its generation engine, which the
     * generate APIs reach; it has no tensor scheduler. */
    if (v->llm) {
        mcp_gen_engine *g = NULL;
        mcp_status st = mcp_gen_engine_create(v, fe->metrics, &g, err);
        if (st != MCP_STATUS_OK) return st;
        v->generator = g;
        v->generator_free = generator_free;
        mcp_gen_set_token_hook(g, charge_tokens_hook, fe);
        mcp_metrics_declare_model(fe->metrics, v->name, v->version);
        mcp_metrics_declare_generation(fe->metrics, v->name, v->version);
        return MCP_STATUS_OK;
    }
    /* The monitor first: its settings are checked against the version's
     * tensors, and a bad one fails the load before anything runs. */
    mcp_monitor_options mo;
    mcp_status st = mcp_monitor_options_from(v, &mo, err);
    if (st != MCP_STATUS_OK) return st;
    mcp_monitor *mon = NULL;
    if (mo.sample_rate > 0) {
        mo.set = fe->monitors;
        st = mcp_monitor_create(&mo, &mon, err);
        if (st != MCP_STATUS_OK) return st;
    }
    mcp_scheduler_options o = mcp_scheduler_options_from(v->desc);
    mcp_scheduler *sched = NULL;
    st = mcp_scheduler_create(v, &o, fe->metrics, &sched, err);
    if (st != MCP_STATUS_OK) {
        mcp_monitor_destroy(mon);
        return st;
    }
    v->monitor = mon;
    v->monitor_free = monitor_free;
    v->serving = sched;
    v->serving_free = serving_free;
    mcp_metrics_declare_model(fe->metrics, v->name, v->version);
    return MCP_STATUS_OK;
}

/* A version's outputs drifted from its reference window (or came back),
 * on the monitor's thread: the log, the control plane's event log, and a
 * drifted canary stops as for any other gate. */
static void on_drift(void *user, const char *model, const char *version, const char *output, const char *statistic,
                     double score, double threshold, bool drifted)
{
    mcp_frontend *fe = user;
    char reason[400];
    snprintf(reason, sizeof reason, "version %s: %s of '%s' %s %.3f, threshold %.3f", version, statistic, output,
             drifted ? "drifted to" : "is back to", score, threshold);
    fe_log(fe, drifted ? MCP_LOG_WARN : MCP_LOG_INFO, "%s: output %s", model, reason);
    if (fe->plane) mcp_plane_note(fe->plane, drifted ? "monitor.drift" : "monitor.recovered", model, "ok", reason, "monitor");
    if (!drifted) return;
    mcp_rollout_state rs;
    char msg[256];
    mcp_err err = {msg, sizeof msg};
    if (mcp_repository_rollout(fe->repo, model, &rs, &err) != MCP_STATUS_OK) return;
    if (rs.watch) mcp_rollout_drifted(rs.watch, version, reason);
    mcp_route_watch_release(rs.watch);
}

static void free_control(mcp_control *ctl) { mcp_free(ctl); }

/* A gate failed (on a worker, with the monitor's lock held): the version
 * is out of routing already; a control job makes it so in the route
 * table and records why. */
static void on_trip(void *user, mcp_rollout_monitor *m, bool canary, const char *reason)
{
    mcp_frontend *fe = user;
    mcp_route_watch *w = (mcp_route_watch *)m;
    mcp_control *ctl = mcp_calloc(1, sizeof *ctl);
    if (ctl) {
        ctl->op = MCP_CONTROL_ROLLOUT;
        ctl->action = MCP_ROLLOUT_TRIP;
        snprintf(ctl->name, sizeof ctl->name, "%s", mcp_rollout_model(w));
        snprintf(ctl->reason, sizeof ctl->reason, "%s", reason);
        ctl->watch = mcp_route_watch_retain(w);
        ctl->trip_canary = canary;
        ctl->done = free_control;
    }
    if (!ctl || mcp_frontend_control(fe, ctl) != MCP_STATUS_OK) {
        /* Routing keeps it off; the table keeps it until the next change. */
        fe_log(fe, MCP_LOG_WARN, "%s: %s (could not queue the rollout change)", mcp_rollout_model(w), reason);
        if (ctl) mcp_route_watch_release(ctl->watch);
        mcp_free(ctl);
    }
}

static mcp_route_watch *hook_route(const char *model, const mcp_rollout_spec *spec, const mcp_model_version *primary,
                                   const mcp_model_version *canary, const mcp_model_version *shadow, void *user)
{
    mcp_frontend *fe = user;
    return mcp_rollout_monitor_create(model, spec, primary->version, canary ? canary->version : NULL,
                                      shadow ? shadow->version : NULL, fe->metrics, on_trip, fe);
}

/* Unloading and reloading never wait on the caller's thread: the retired
 * version goes to the retire thread, which lets its in-flight requests
 * finish and drops the reference (scheduler and session go with the
 * version's last one). */
static void hook_retire(mcp_model_version *v, void *user)
{
    mcp_frontend *fe = user;
    retiring *item = mcp_malloc(sizeof *item);
    if (!item || !fe->retirer_running) {
        mcp_free(item);
        version_drain(v);
        return;
    }
    item->v = mcp_model_version_retain(v);
    pthread_mutex_lock(&fe->retire_mu);
    item->next = fe->retiring;
    fe->retiring = item;
    pthread_cond_broadcast(&fe->retire_cv);
    pthread_mutex_unlock(&fe->retire_mu);
}

static void *retire_main(void *arg)
{
    mcp_frontend *fe = arg;
    pthread_mutex_lock(&fe->retire_mu);
    for (;;) {
        retiring *item = fe->retiring;
        if (!item) {
            if (fe->retire_stop) break;
            pthread_cond_wait(&fe->retire_cv, &fe->retire_mu);
            continue;
        }
        fe->retiring = item->next;
        fe->retire_busy++;
        pthread_mutex_unlock(&fe->retire_mu);
        version_drain(item->v);
        char name[256], version[128];
        snprintf(name, sizeof name, "%s", item->v->name);
        snprintf(version, sizeof version, "%s", item->v->version ? item->v->version : "");
        size_t held = mcp_model_version_bytes(item->v);
        mcp_model_version_release(item->v);
        /* Its memory goes back to the system: the free pages of every
         * malloc arena (its workers' arenas included), not only the heap
         * top. Trimming walks every arena under its lock, so it is done
         * for versions big enough to matter, not for every small swap. */
        if (held >= TRIM_BYTES) malloc_trim(0);
        mcp_repository_note_unloaded(fe->repo, name, version);
        mcp_free(item);
        pthread_mutex_lock(&fe->retire_mu);
        fe->retire_busy--;
        pthread_cond_broadcast(&fe->retire_cv);
    }
    pthread_mutex_unlock(&fe->retire_mu);
    return NULL;
}

static void retire_wait(mcp_frontend *fe)
{
    pthread_mutex_lock(&fe->retire_mu);
    while (fe->retiring || fe->retire_busy) pthread_cond_wait(&fe->retire_cv, &fe->retire_mu);
    pthread_mutex_unlock(&fe->retire_mu);
}

/* ---- model control: the loader thread ---- */

static void control_apply(mcp_frontend *fe, mcp_control *ctl, mcp_err *err);
static void rollout_record(mcp_frontend *fe, mcp_control *ctl, const char *action);

/* A JSON object without "path" is Triton's ModelConfig for the model's
 * folder in the roots; anything else is our YAML descriptor (YAML reads
 * JSON too). */
static bool is_triton_json(const char *text)
{
    const char *t = text;
    while (*t == ' ' || *t == '\t' || *t == '\r' || *t == '\n') t++;
    if (*t != '{') return false;
    json_t *j = json_loads(t, 0, NULL);
    bool triton = j && json_is_object(j) && !json_object_get(j, "path");
    json_decref(j);
    return triton;
}

/* What a control call did goes into the store and the catalog (when the
 * server has them): an applied version is stored and made the model's
 * desired state; failures and unloads are events. A record that cannot be
 * written is said in the answer; the model serves as loaded. */
static void control_record(mcp_frontend *fe, mcp_control *ctl)
{
    mcp_plane *p = fe->plane;
    if (!p) return;
    const char *actor = ctl->actor[0] ? ctl->actor : "api";
    char msg[600];
    mcp_err err = {msg, sizeof msg};
    mcp_status st = MCP_STATUS_OK;
    const char *action = ctl->op == MCP_CONTROL_UNLOAD    ? "unload"
                         : ctl->op == MCP_CONTROL_ROLLOUT ? mcp_rollout_action_name(ctl->action)
                         : ctl->descriptor                ? "apply"
                                                          : "load";
    if (ctl->op == MCP_CONTROL_ROLLOUT) {
        rollout_record(fe, ctl, action);
        return;
    }
    if (ctl->status != MCP_STATUS_OK) {
        char why[sizeof ctl->message];
        mcp_model_roots_redact(mcp_repository_defaults(fe->repo)->roots, ctl->message, why, sizeof why);
        mcp_plane_note(p, action, ctl->name, "failed", why, actor);
        return;
    }
    if (ctl->op == MCP_CONTROL_UNLOAD) {
        st = mcp_plane_unloaded(p, ctl->name, actor, &err);
    } else if (ctl->descriptor && is_triton_json(ctl->descriptor)) {
        mcp_plane_note(p, action, ctl->name, "ok", "a Triton configuration: not kept in the store yet", actor);
    } else if (ctl->descriptor) {
        mcp_model_version *v = mcp_repository_get(fe->repo, ctl->name, ctl->applied_version);
        st = v ? mcp_plane_applied(p, v, ctl->descriptor, strlen(ctl->descriptor), ctl->applied_primary, actor, &err)
               : mcp_err_set(&err, MCP_STATUS_NOT_FOUND, "model '%s' is not loaded", ctl->name);
        mcp_model_version_release(v);
    } else {
        mcp_catalog_event e = {.actor = actor, .action = "load", .target = ctl->name, .outcome = "ok"};
        st = mcp_catalog_set_desired(mcp_plane_catalog(p), ctl->name, true, NULL, &e, &err);
    }
    if (st == MCP_STATUS_OK) st = mcp_plane_record_rollout(p, fe->repo, ctl->name, &err);
    if (st != MCP_STATUS_OK) {
        fe_log(fe, MCP_LOG_ERROR, "%s of '%s' not recorded in the store: %s", action, ctl->name, msg);
        snprintf(ctl->message, sizeof ctl->message, "%s done, but not recorded in the store: %.400s", action, msg);
    }
}

static void control_rollout(mcp_frontend *fe, mcp_control *ctl, mcp_err *err);

/* An evicted model's next request came: load it again, then let its
 * parked calls through. Counted as a cold start. */
static void control_cold_start(mcp_frontend *fe, mcp_control *ctl, mcp_err *err)
{
    bool loaded = false;
    int64_t t0 = mcp_now_ns();
    ctl->status = mcp_repository_cold_start(fe->repo, ctl->name, &loaded, err);
    if (loaded) {
        mcp_metrics_cold_start(fe->metrics, ctl->name, mcp_now_ns() - t0);
        char why[128];
        snprintf(why, sizeof why, "loaded again for a request in %.1f ms", (double)(mcp_now_ns() - t0) / 1e6);
        if (fe->plane) mcp_plane_note(fe->plane, "cold-start", ctl->name, "ok", why, "memory");
    } else if (ctl->status != MCP_STATUS_OK && fe->plane) {
        mcp_plane_note(fe->plane, "cold-start", ctl->name, "failed", ctl->message, "memory");
    }
    unpark(fe, ctl->name, ctl->status, ctl->message);
}

static void control_run(mcp_frontend *fe, mcp_control *ctl)
{
    mcp_err err = {ctl->message, sizeof ctl->message};
    ctl->message[0] = '\0';
    if (ctl->op == MCP_CONTROL_COLD_START) {
        control_cold_start(fe, ctl, &err);
        return;
    }
    int64_t t0 = mcp_now_ns();
    if (ctl->op == MCP_CONTROL_UNLOAD) ctl->status = mcp_repository_unload(fe->repo, ctl->name, &err);
    else if (ctl->op == MCP_CONTROL_ROLLOUT) control_rollout(fe, ctl, &err);
    else if (!ctl->descriptor) ctl->status = mcp_repository_load(fe->repo, ctl->name, &err);
    else control_apply(fe, ctl, &err);
    /* Only a model that is (or was just) served becomes a label value: a
     * failed load of a new name leaves no series behind. */
    mcp_model_version *known = ctl->op == MCP_CONTROL_ROLLOUT || ctl->status == MCP_STATUS_OK
                                   ? NULL
                                   : mcp_repository_get(fe->repo, ctl->name, NULL);
    if (ctl->op != MCP_CONTROL_ROLLOUT && (ctl->status == MCP_STATUS_OK || known))
        mcp_metrics_model_op(fe->metrics, ctl->name, ctl->op == MCP_CONTROL_UNLOAD, ctl->status == MCP_STATUS_OK,
                             mcp_now_ns() - t0);
    mcp_model_version_release(known);
    control_record(fe, ctl);
}

/* ---- rollout calls ---- */

const char *mcp_rollout_action_name(mcp_rollout_action a)
{
    static const char *const names[] = {
        [MCP_ROLLOUT_SET_WEIGHTS] = "rollout.set-weight", [MCP_ROLLOUT_SHADOW] = "rollout.shadow",
        [MCP_ROLLOUT_PROMOTE] = "rollout.promote",        [MCP_ROLLOUT_UNDO] = "rollout.undo",
        [MCP_ROLLOUT_TRIP] = "rollout.gate",
    };
    return (int)a >= 0 && a <= MCP_ROLLOUT_TRIP ? names[a] : "rollout";
}

static void control_rollout(mcp_frontend *fe, mcp_control *ctl, mcp_err *err)
{
    mcp_repository *r = fe->repo;
    const char *vs[2] = {ctl->versions[0], ctl->versions[1]};
    switch (ctl->action) {
    case MCP_ROLLOUT_SET_WEIGHTS:
        ctl->status = mcp_repository_set_weights(r, ctl->name, ctl->n_versions, vs, ctl->amounts, err);
        break;
    case MCP_ROLLOUT_SHADOW:
        ctl->status = mcp_repository_set_shadow(r, ctl->name, vs[0], ctl->amounts[0], ctl->has_spec ? &ctl->spec : NULL, err);
        break;
    case MCP_ROLLOUT_PROMOTE: ctl->status = mcp_repository_promote(r, ctl->name, vs[0], err); break;
    case MCP_ROLLOUT_UNDO: {
        ctl->status = mcp_repository_undo(r, ctl->name, err);
        mcp_rollout_state rs;
        char m2[256];
        mcp_err e2 = {m2, sizeof m2};
        /* Not kept warm: loaded again from the store by its digest. */
        if (ctl->status == MCP_STATUS_NOT_FOUND && fe->plane &&
            mcp_repository_rollout(r, ctl->name, &rs, &e2) == MCP_STATUS_OK && rs.previous_cold[0]) {
            mcp_route_watch_release(rs.watch);
            err->buf[0] = '\0';
            ctl->status = mcp_plane_load_version(fe->plane, r, ctl->name, rs.previous_cold, err);
            if (ctl->status == MCP_STATUS_OK)
                snprintf(ctl->reason, sizeof ctl->reason, "%s loaded again from the store", rs.previous_cold);
        }
        break;
    }
    case MCP_ROLLOUT_TRIP:
        ctl->status = mcp_repository_trip(r, ctl->name, ctl->watch, ctl->trip_canary, ctl->reason)
                          ? MCP_STATUS_OK
                          : mcp_err_set(err, MCP_STATUS_NOT_FOUND, "that rollout had ended already");
        mcp_route_watch_release(ctl->watch);
        ctl->watch = NULL;
        if (ctl->status == MCP_STATUS_OK) fe_log(fe, MCP_LOG_WARN, "%s: %s", ctl->name, ctl->reason);
        break;
    }
    if (ctl->status == MCP_STATUS_OK && ctl->action != MCP_ROLLOUT_TRIP) {
        mcp_buf b = {0};
        char m2[256];
        mcp_err e2 = {m2, sizeof m2};
        if (mcp_frontend_rollout_json(fe, ctl->name, &b, &e2) == MCP_STATUS_OK && !b.failed) {
            mcp_buf_append(&b, "", 1);
            ctl->answer = (char *)b.data;
            b.data = NULL;
        }
        mcp_buf_free(&b);
    }
}

/* A rollout call as an event (actor: the API, or the gate itself), and a
 * new primary as the model's desired version. */
static void rollout_record(mcp_frontend *fe, mcp_control *ctl, const char *action)
{
    mcp_plane *p = fe->plane;
    if (!p || (ctl->action == MCP_ROLLOUT_TRIP && ctl->status != MCP_STATUS_OK)) return;
    const char *actor = ctl->action == MCP_ROLLOUT_TRIP ? "gate" : ctl->actor[0] ? ctl->actor : "api";
    char what[400] = "";
    for (int i = 0; i < ctl->n_versions; i++)
        snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s=%g", i ? " " : "", ctl->versions[i],
                 ctl->amounts[i]);
    if (ctl->action == MCP_ROLLOUT_PROMOTE) snprintf(what, sizeof what, "%s", ctl->versions[0]);
    if (ctl->action == MCP_ROLLOUT_TRIP || (ctl->action == MCP_ROLLOUT_UNDO && ctl->reason[0]))
        snprintf(what, sizeof what, "%s", ctl->reason);
    if (ctl->status != MCP_STATUS_OK) {
        mcp_plane_note(p, action, ctl->name, "failed", ctl->message, actor);
        return;
    }
    mcp_rollout_state rs;
    char msg[600];
    mcp_err err = {msg, sizeof msg};
    if (mcp_repository_rollout(fe->repo, ctl->name, &rs, &err) != MCP_STATUS_OK) return;
    mcp_route_watch_release(rs.watch);
    mcp_catalog_event e = {.actor = actor, .action = action, .target = ctl->name, .outcome = "ok", .reason = what};
    if (mcp_catalog_set_desired(mcp_plane_catalog(p), ctl->name, true, rs.primary, &e, &err) != MCP_STATUS_OK ||
        mcp_plane_record_rollout(p, fe->repo, ctl->name, &err) != MCP_STATUS_OK) {
        fe_log(fe, MCP_LOG_ERROR, "%s of '%s' not recorded in the store: %s", action, ctl->name, msg);
        snprintf(ctl->message, sizeof ctl->message, "%s done, but not recorded in the store: %.400s", action, msg);
    }
}

/* ---- a rollout call's body (HTTP's POST, gRPC's Rollout): one parser ---- */

#define ROLLOUT_BODY_MAX 65536

/* A version named in a rollout body: a string of a sane length. */
static mcp_status rollout_version(json_t *v, const char *field, char *out, mcp_err *err)
{
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= MCP_ROLLOUT_VERSION_LEN)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s' must be a version string (1 to %d characters)", field,
                           MCP_ROLLOUT_VERSION_LEN - 1);
    snprintf(out, MCP_ROLLOUT_VERSION_LEN, "%s", json_string_value(v));
    return MCP_STATUS_OK;
}

/* The optional validator, window and gates of a shadow call, over the
 * rollout in force. */
static mcp_status rollout_spec_fields(json_t *root, mcp_control *ctl, mcp_err *err)
{
    char why[200];
    json_t *v = json_object_get(root, "validator"), *w = json_object_get(root, "window"), *g = json_object_get(root, "gates");
    if (!v && !w && !g) return MCP_STATUS_OK;
    ctl->has_spec = true;
    if (v && (!json_is_string(v) || !mcp_validator_parse(json_string_value(v), &ctl->spec.validator, &ctl->spec.threshold,
                                                          why, sizeof why)))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'validator': %s",
                           json_is_string(v) ? why : "must be a string like diff-threshold@0.02");
    int64_t us = 0;
    if (w) {
        bool parsed = json_is_string(w) && mcp_duration_parse(json_string_value(w), &us, why, sizeof why);
        if (!parsed || us < 100000)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'window': %s",
                               parsed || !json_is_string(w) ? "must be a duration of at least 100ms" : why);
        ctl->spec.window_ms = us / 1000;
    }
    if (g && !json_is_object(g)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'gates' must be an object");
    const char *key;
    json_t *val;
    json_object_foreach(g, key, val) {
        double x = json_is_number(val) ? json_number_value(val) : -1;
        if (!strcmp(key, "error_rate_margin") && x >= 0 && x <= 1) ctl->spec.error_rate_margin = x;
        else if (!strcmp(key, "agreement") && x > 0 && x <= 1) ctl->spec.agreement = x;
        else if (!strcmp(key, "min_samples") && json_is_integer(val) && x >= 1 && x <= 1000000) ctl->spec.min_samples = (int64_t)x;
        else if (!strcmp(key, "p99_budget") && json_is_string(val) &&
                 mcp_duration_parse(json_string_value(val), &ctl->spec.p99_budget_us, why, sizeof why)) {
        } else {
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "gates.'%.60s': unknown, or out of range (error_rate_margin 0..1, agreement (0..1], "
                               "min_samples 1..1000000, p99_budget a duration)",
                               key);
        }
    }
    return MCP_STATUS_OK;
}

static mcp_status rollout_fields(mcp_frontend *fe, const char *name, json_t *root, mcp_control *ctl, mcp_err *err)
{
    const char *action = json_string_value(json_object_get(root, "action"));
    json_t *version = json_object_get(root, "version");
    if (!action) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'action' must be one of set-weight, shadow, promote, undo");
    if (!strcmp(action, "set-weight")) {
        ctl->action = MCP_ROLLOUT_SET_WEIGHTS;
        json_t *weights = json_object_get(root, "weights");
        size_t n = json_is_object(weights) ? json_object_size(weights) : 0;
        if (n < 1 || n > 2)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "'weights' must be an object of one or two versions to percents, like {\"v1.3.0\": 10}");
        const char *key;
        json_t *val;
        json_object_foreach(weights, key, val) {
            if (!json_is_number(val) || strlen(key) == 0 || strlen(key) >= MCP_ROLLOUT_VERSION_LEN)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "weights.'%.60s' must be a percent from 0 to 100", key);
            snprintf(ctl->versions[ctl->n_versions], MCP_ROLLOUT_VERSION_LEN, "%s", key);
            ctl->amounts[ctl->n_versions++] = json_number_value(val);
        }
        return MCP_STATUS_OK;
    }
    if (!strcmp(action, "shadow")) {
        ctl->action = MCP_ROLLOUT_SHADOW;
        json_t *sample = json_object_get(root, "sample");
        mcp_status st = rollout_version(version, "version", ctl->versions[0], err);
        if (st != MCP_STATUS_OK) return st;
        if (!json_is_number(sample))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'sample' must be the share of requests copied, from 0 (off) to 1");
        ctl->amounts[0] = json_number_value(sample);
        ctl->n_versions = 1;
        /* The spec starts from the one in force. */
        mcp_rollout_state rs;
        char m2[256];
        mcp_err e2 = {m2, sizeof m2};
        ctl->spec = mcp_rollout_spec_default();
        if (mcp_repository_rollout(fe->repo, name, &rs, &e2) == MCP_STATUS_OK) {
            ctl->spec = rs.spec;
            mcp_route_watch_release(rs.watch);
        }
        return rollout_spec_fields(root, ctl, err);
    }
    if (!strcmp(action, "promote")) {
        ctl->action = MCP_ROLLOUT_PROMOTE;
        return rollout_version(version, "version", ctl->versions[0], err);
    }
    if (!strcmp(action, "undo")) {
        ctl->action = MCP_ROLLOUT_UNDO;
        return MCP_STATUS_OK;
    }
    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "unknown action '%.60s'; use set-weight, shadow, promote or undo",
                       action);
}

mcp_status mcp_frontend_rollout_parse(mcp_frontend *fe, const char *name, const char *body, size_t len, mcp_control *ctl,
                                      mcp_err *err)
{
    if (len > ROLLOUT_BODY_MAX)
        return mcp_err_set(err, MCP_STATUS_TOO_LARGE, "a rollout call is at most %d bytes", ROLLOUT_BODY_MAX);
    json_error_t jerr;
    json_t *root = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr) : json_object();
    if (!root)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "malformed JSON at byte offset %d (line %d, column %d): %s",
                           jerr.position, jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the request body must be a JSON object");
    }
    ctl->op = MCP_CONTROL_ROLLOUT;
    snprintf(ctl->name, sizeof ctl->name, "%s", name);
    mcp_status st = rollout_fields(fe, name, root, ctl, err);
    json_decref(root);
    return st;
}

static void put_spec(mcp_buf *b, const mcp_rollout_spec *sp)
{
    char v[64];
    mcp_validator_format(sp->validator, sp->threshold, v, sizeof v);
    mcp_buf_puts(b, ",\"validator\":");
    mcp_buf_json_string(b, v);
    mcp_buf_printf(b, ",\"window_ms\":%lld,\"gates\":{\"error_rate_margin\":", (long long)sp->window_ms);
    if (sp->error_rate_margin >= 0) mcp_buf_printf(b, "%g", sp->error_rate_margin);
    else mcp_buf_puts(b, "null");
    mcp_buf_puts(b, ",\"p99_budget_us\":");
    if (sp->p99_budget_us > 0) mcp_buf_printf(b, "%lld", (long long)sp->p99_budget_us);
    else mcp_buf_puts(b, "null");
    mcp_buf_printf(b, ",\"min_samples\":%lld,\"agreement\":%g}", (long long)sp->min_samples, sp->agreement);
}

static void put_version_or_null(mcp_buf *b, const char *key, const char *v)
{
    mcp_buf_printf(b, ",\"%s\":", key);
    if (v[0]) mcp_buf_json_string(b, v);
    else mcp_buf_puts(b, "null");
}

mcp_status mcp_frontend_rollout_json(mcp_frontend *fe, const char *name, mcp_buf *out, mcp_err *err)
{
    mcp_rollout_state rs;
    mcp_status st = mcp_repository_rollout(fe->repo, name, &rs, err);
    if (st != MCP_STATUS_OK) return st;
    mcp_buf_puts(out, "{\"model\":");
    mcp_buf_json_string(out, name);
    mcp_buf_puts(out, ",\"primary\":");
    mcp_buf_json_string(out, rs.primary);
    mcp_buf_puts(out, ",\"canary\":");
    if (rs.canary[0]) {
        mcp_buf_puts(out, "{\"version\":");
        mcp_buf_json_string(out, rs.canary);
        mcp_buf_printf(out, ",\"weight\":%g}", rs.canary_weight);
    } else {
        mcp_buf_puts(out, "null");
    }
    mcp_buf_puts(out, ",\"shadow\":");
    if (rs.shadow[0]) {
        mcp_buf_puts(out, "{\"version\":");
        mcp_buf_json_string(out, rs.shadow);
        mcp_buf_printf(out, ",\"sample\":%g}", rs.shadow_sample);
    } else {
        mcp_buf_puts(out, "null");
    }
    put_version_or_null(out, "previous", rs.previous);
    put_version_or_null(out, "previous_unloaded", rs.previous_cold);
    put_spec(out, &rs.spec);
    mcp_buf_puts(out, ",\"window\":");
    if (rs.watch) mcp_rollout_window_json(rs.watch, out);
    else mcp_buf_puts(out, "null");
    mcp_buf_puts(out, "}");
    mcp_route_watch_release(rs.watch);
    return MCP_STATUS_OK;
}

static void control_apply(mcp_frontend *fe, mcp_control *ctl, mcp_err *errp)
{
    mcp_err err = *errp;
    /* The server's defaults and model roots: a descriptor from the network
     * names files inside the roots only. */
    mcp_descriptor_defaults dd = *mcp_repository_defaults(fe->repo);
    const char *where = ctl->source ? ctl->source : "config";
    mcp_diags diags = {0};
    mcp_descriptor *desc = NULL;
    /* A JSON object is Triton's ModelConfig for the model's folder in the
     * roots; anything else is our YAML descriptor. */
    bool triton_json = is_triton_json(ctl->descriptor);
    mcp_status st = triton_json
                        ? mcp_descriptor_from_triton_json(ctl->name, ctl->descriptor, strlen(ctl->descriptor), &dd, &desc, &diags)
                        : mcp_descriptor_parse_yaml(ctl->descriptor, strlen(ctl->descriptor), where, &dd, &desc, &diags);
    if (triton_json && st == MCP_STATUS_NOT_FOUND) {
        char report[1800];
        mcp_diags_format(&diags, "parameters.config", report, sizeof report);
        mcp_diags_clear(&diags);
        ctl->status = mcp_err_set(&err, MCP_STATUS_NOT_FOUND, "%s", report);
        return;
    }
    if (st != MCP_STATUS_OK) {
        char report[1800];
        mcp_diags_format(&diags, where, report, sizeof report);
        mcp_diags_clear(&diags);
        ctl->status = mcp_err_set(&err, MCP_STATUS_INVALID_ARGUMENT, "invalid model descriptor: %s", report);
        return;
    }
    mcp_diags_clear(&diags);
    if (strcmp(desc->name, ctl->name) != 0) {
        ctl->status = mcp_err_set(&err, MCP_STATUS_INVALID_ARGUMENT, "descriptor names model '%s' but the URL names '%s'",
                                  desc->name, ctl->name);
        mcp_descriptor_free(desc);
        return;
    }
    snprintf(ctl->applied_version, sizeof ctl->applied_version, "%s", desc->version);
    ctl->applied_primary = !desc->rollout.present || (strcmp(desc->rollout.canary, desc->version) != 0 &&
                                                      strcmp(desc->rollout.shadow, desc->version) != 0);
    ctl->status = mcp_repository_apply_from(fe->repo, desc, triton_json ? MCP_SOURCE_TRITON_JSON : MCP_SOURCE_YAML_TEXT,
                                            ctl->source, ctl->descriptor, &err);
}

static void *loader_main(void *arg)
{
    mcp_sandbox_enter_loader_or_warn();
    mcp_frontend *fe = arg;
    pthread_mutex_lock(&fe->control_mu);
    for (;;) {
        control_job *job = fe->jobs;
        if (!job) {
            if (fe->control_stop) break;
            pthread_cond_wait(&fe->control_cv, &fe->control_mu);
            continue;
        }
        fe->jobs = job->next;
        if (!fe->jobs) fe->jobs_tail = NULL;
        fe->n_jobs--;
        pthread_mutex_unlock(&fe->control_mu);
        control_run(fe, job->ctl);
        job->ctl->done(job->ctl);
        mcp_free(job);
        pthread_mutex_lock(&fe->control_mu);
    }
    pthread_mutex_unlock(&fe->control_mu);
    return NULL;
}

void mcp_frontend_set_control(mcp_frontend *fe, bool enabled, const char *admin_token)
{
    fe->control_enabled = enabled;
    fe->admin_token = admin_token && admin_token[0] ? admin_token : NULL;
}

void mcp_frontend_set_plane(mcp_frontend *fe, mcp_plane *plane)
{
    fe->plane = plane;
    start_audit(fe);
}

static void repo_log(void *user, const char *line) { fe_log(user, MCP_LOG_INFO, "%s", line); }

void mcp_frontend_set_logger(mcp_frontend *fe, mcp_logger *lg) { fe->logger = lg; }
mcp_logger *mcp_frontend_logger(const mcp_frontend *fe) { return fe->logger; }

mcp_plane *mcp_frontend_plane(const mcp_frontend *fe) { return fe->plane; }

mcp_status mcp_frontend_authorize_control(const mcp_frontend *fe, const char *authorization, mcp_err *err)
{
    if (!fe->control_enabled)
        return mcp_err_set(err, MCP_STATUS_PERMISSION_DENIED, "model control is disabled on this server (--model-control none)");
    /* With access rules, the caller's roles decided already (the admin
     * token is one of their credentials). */
    if (!fe->admin_token || mcp_frontend_auth_enabled((mcp_frontend *)fe)) return MCP_STATUS_OK;
    if (authorization && !strncasecmp(authorization, "Bearer ", 7) && mcp_secret_equal(authorization + 7, fe->admin_token))
        return MCP_STATUS_OK;
    return mcp_err_set(err, MCP_STATUS_UNAUTHENTICATED, "%s",
                       authorization ? "the bearer token is not valid for model control"
                                     : "model control needs 'authorization: Bearer <token>' (the server's --admin-token-file)");
}

mcp_status mcp_frontend_control(mcp_frontend *fe, mcp_control *ctl)
{
    control_job *job = mcp_calloc(1, sizeof *job);
    if (!job) return MCP_STATUS_OUT_OF_MEMORY;
    job->ctl = ctl;
    pthread_mutex_lock(&fe->control_mu);
    if (fe->control_stop || !fe->n_loaders) {
        pthread_mutex_unlock(&fe->control_mu);
        mcp_free(job);
        return MCP_STATUS_UNAVAILABLE;
    }
    /* Loads that do not wait for their answer would otherwise queue without
     * bound, each holding its descriptor. */
    if (fe->n_jobs >= MAX_CONTROL_JOBS) {
        pthread_mutex_unlock(&fe->control_mu);
        mcp_free(job);
        return MCP_STATUS_RESOURCE_EXHAUSTED;
    }
    fe->n_jobs++;
    if (fe->jobs_tail) fe->jobs_tail->next = job;
    else fe->jobs = job;
    fe->jobs_tail = job;
    pthread_cond_signal(&fe->control_cv);
    pthread_mutex_unlock(&fe->control_mu);
    return MCP_STATUS_OK;
}

/* Queued jobs still run; then the loaders end. */
static void stop_loaders(mcp_frontend *fe)
{
    pthread_mutex_lock(&fe->control_mu);
    fe->control_stop = true;
    pthread_cond_broadcast(&fe->control_cv);
    pthread_mutex_unlock(&fe->control_mu);
    for (int i = 0; i < fe->n_loaders; i++) pthread_join(fe->loaders[i], NULL);
    fe->n_loaders = 0;
}

/* ---- admission and drain ---- */

void mcp_frontend_set_body_cap(mcp_frontend *fe, size_t bytes) { fe->body_cap = bytes; }

size_t mcp_frontend_body_cap(const mcp_frontend *fe) { return fe->body_cap; }

bool mcp_frontend_reserve_body(mcp_frontend *fe, size_t bytes)
{
    size_t before = atomic_fetch_add(&fe->body_bytes, bytes);
    if (fe->body_cap && before + bytes > fe->body_cap) {
        atomic_fetch_sub(&fe->body_bytes, bytes);
        return false;
    }
    return true;
}

void mcp_frontend_release_body(mcp_frontend *fe, size_t bytes) { atomic_fetch_sub(&fe->body_bytes, bytes); }

bool mcp_frontend_admit(mcp_frontend *fe)
{
    atomic_fetch_add(&fe->admitting, 1);
    if (atomic_load(&fe->stopping)) {
        atomic_fetch_sub(&fe->admitting, 1);
        return false;
    }
    return true;
}

void mcp_frontend_routed(mcp_frontend *fe) { atomic_fetch_sub(&fe->admitting, 1); }

bool mcp_frontend_stopping(const mcp_frontend *fe) { return atomic_load(&fe->stopping); }

void mcp_frontend_count_open(mcp_frontend *fe, int delta) { atomic_fetch_add(&fe->open_requests, delta); }

void mcp_frontend_count_connections(mcp_frontend *fe, int delta) { atomic_fetch_add(&fe->connections, delta); }

int mcp_frontend_open_requests(const mcp_frontend *fe) { return atomic_load(&fe->open_requests); }

static void stop_policy(mcp_frontend *fe);

void mcp_frontend_drain(mcp_frontend *fe)
{
    atomic_store(&fe->stopping, true);
    stop_policy(fe); /* nothing is evicted while the server drains */
    /* Requests admitted before the stop reach their scheduler first (their
     * bodies arriving or being decoded; bounded here by 10 s and by each
     * transport's body deadline), so the drain below covers them too. */
    for (int i = 0; i < 1000 && atomic_load(&fe->admitting) > 0; i++) sleep_ms(10);
    /* Model control waits for nothing more: queued jobs still run, new
     * ones are refused. */
    stop_loaders(fe);
    /* Every model finishes what it has queued and running. */
    mcp_repository_entry *list;
    int n = mcp_repository_index(fe->repo, &list);
    for (int i = 0; i < n; i++) {
        mcp_model_version *v = mcp_repository_get(fe->repo, list[i].name, NULL);
        if (v) version_drain(v);
        mcp_model_version_release(v);
    }
    mcp_repository_entries_free(list, n);
    retire_wait(fe); /* versions unloaded or replaced before the stop, too */
}

/* ---- the memory policy ---- */

mcp_memory_policy mcp_memory_policy_default(void)
{
    return (mcp_memory_policy){.budget = 0, .pressure = 0.9, .floor = 0.75, .queue_depth = 1, .idle_ms = 5000,
                               .smoothing_ms = 2000, .tick_ms = 100};
}

void mcp_frontend_set_memory_policy(mcp_frontend *fe, const mcp_memory_policy *p)
{
    pthread_mutex_lock(&fe->policy_mu);
    fe->policy = *p;
    if (fe->policy.tick_ms < 1) fe->policy.tick_ms = 100;
    if (fe->policy.smoothing_ms < fe->policy.tick_ms) fe->policy.smoothing_ms = fe->policy.tick_ms;
    pthread_cond_broadcast(&fe->policy_cv);
    pthread_mutex_unlock(&fe->policy_mu);
}

typedef struct model_signal {
    char name[256];
    double queue;   /* smoothed queue depth */
    int64_t tick;   /* last tick it was seen loaded */
} model_signal;

typedef struct policy_state {
    double pressure; /* smoothed bytes / budget */
    model_signal *models;
    int n, cap;
    int64_t tick;
} policy_state;

static model_signal *signal_of(policy_state *ps, const char *name)
{
    for (int i = 0; i < ps->n; i++)
        if (!strcmp(ps->models[i].name, name)) return &ps->models[i];
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 16;
        model_signal *m = mcp_realloc(ps->models, (size_t)cap * sizeof *m);
        if (!m) return NULL;
        ps->models = m;
        ps->cap = cap;
    }
    model_signal *m = &ps->models[ps->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    return m;
}

/* One tick: both signals smoothed; an idle model out when they agree. */
static void policy_tick(mcp_frontend *fe, policy_state *ps, const mcp_memory_policy *p)
{
    double alpha = 1.0 - exp2(-(double)p->tick_ms / (double)p->smoothing_ms);
    int ready;
    size_t bytes;
    mcp_repository_totals(fe->repo, &ready, &bytes);
    double raw = (double)bytes / (double)p->budget;
    ps->pressure += alpha * (raw - ps->pressure);
    ps->tick++;
    mcp_repository_entry *list;
    int n = mcp_repository_index(fe->repo, &list);
    int64_t now = mcp_now_ns();
    const char *victim = NULL;
    mcp_model_version *victim_v = NULL;
    int64_t victim_used = INT64_MAX;
    double victim_queue = 0;
    for (int i = 0; i < n; i++) {
        mcp_model_version *v = list[i].state == MCP_MODEL_READY ? mcp_repository_get(fe->repo, list[i].name, NULL) : NULL;
        model_signal *sg = v ? signal_of(ps, list[i].name) : NULL;
        if (!sg) {
            mcp_model_version_release(v);
            continue;
        }
        mcp_scheduler_stats st = {0};
        if (v->serving) mcp_scheduler_stats_get(v->serving, &st);
        if (sg->tick != ps->tick - 1) sg->queue = (double)st.queue_depth; /* newly seen */
        else sg->queue += alpha * ((double)st.queue_depth - sg->queue);
        sg->tick = ps->tick;
        int64_t used = atomic_load_explicit(&v->last_used_ns, memory_order_relaxed);
        bool idle = sg->queue < p->queue_depth && now - used >= p->idle_ms * 1000000;
        if (idle && used < victim_used) {
            mcp_model_version_release(victim_v);
            victim = list[i].name;
            victim_v = v;
            victim_used = used;
            victim_queue = sg->queue;
        } else {
            mcp_model_version_release(v);
        }
    }
    if (victim && ps->pressure >= p->pressure && raw > p->floor) {
        char why[300], msg[300];
        mcp_err err = {msg, sizeof msg};
        snprintf(why, sizeof why,
                 "idle %.1f s (queue %.2f) under memory pressure %.0f%% (smoothed %.0f%%) of a %zu-byte budget",
                 (double)(now - victim_used) / 1e9, victim_queue, 100 * raw, 100 * ps->pressure, p->budget);
        if (mcp_repository_evict(fe->repo, victim, victim_v, why, &err) == MCP_STATUS_OK) {
            mcp_metrics_evicted(fe->metrics, victim);
            if (fe->plane) mcp_plane_note(fe->plane, "evict", victim, "ok", why, "memory");
            fe_log(fe, MCP_LOG_INFO, "%s: unloaded, %s", victim, why);
        }
    }
    mcp_model_version_release(victim_v);
    mcp_repository_entries_free(list, n);
}

static void *policy_main(void *arg)
{
    mcp_frontend *fe = arg;
    policy_state ps = {0};
    pthread_mutex_lock(&fe->policy_mu);
    while (!fe->policy_stop) {
        mcp_memory_policy p = fe->policy;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = until.tv_nsec + (p.tick_ms > 0 ? p.tick_ms : 100) * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&fe->policy_cv, &fe->policy_mu, &until);
        if (fe->policy_stop) break;
        p = fe->policy;
        if (!p.budget) {
            ps.pressure = 0;
            continue;
        }
        pthread_mutex_unlock(&fe->policy_mu);
        policy_tick(fe, &ps, &p);
        pthread_mutex_lock(&fe->policy_mu);
    }
    pthread_mutex_unlock(&fe->policy_mu);
    mcp_free(ps.models);
    return NULL;
}

/* ---- gauges sampled at /metrics ---- */

static void sample_gauges(void *user, mcp_metrics_gauges *g)
{
    mcp_frontend *fe = user;
    mcp_repository_totals(fe->repo, &g->loaded_models, &g->model_memory_bytes);
    g->http_requests_open = atomic_load(&fe->open_requests);
    g->http_connections = atomic_load(&fe->connections);
    g->body_bytes_held = (int64_t)atomic_load(&fe->body_bytes);
    g->queue_depth = 0;
    mcp_repository_entry *list;
    int n = mcp_repository_index(fe->repo, &list);
    for (int i = 0; i < n; i++) {
        mcp_model_version *v = mcp_repository_get(fe->repo, list[i].name, NULL);
        if (!v) continue;
        mcp_scheduler_stats st = {0};
        if (v->serving) mcp_scheduler_stats_get(v->serving, &st);
        g->queue_depth += st.queue_depth;
        if (!g->versions) g->versions = mcp_calloc((size_t)n, sizeof *g->versions);
        if (g->versions) {
            mcp_metrics_version_gauges *e = &g->versions[g->n_versions++];
            snprintf(e->model, sizeof e->model, "%s", v->name);
            snprintf(e->version, sizeof e->version, "%s", v->version);
            e->queue_depth = st.queue_depth;
            e->queue_capacity = st.queue_capacity;
            e->memory_bytes = v->account ? mcp_mem_account_bytes(v->account) : 0;
        }
        if (v->generator) {
            if (!g->gen) g->gen = mcp_calloc((size_t)n, sizeof *g->gen);
            if (g->gen) {
                mcp_metrics_gen_gauges *e = &g->gen[g->n_gen++];
                mcp_gen_stats gs;
                mcp_gen_stats_get(v->generator, &gs);
                snprintf(e->model, sizeof e->model, "%s", v->name);
                snprintf(e->version, sizeof e->version, "%s", v->version);
                e->running = gs.running;
                e->waiting = gs.waiting;
                e->requests = gs.requests;
                e->prompt_tokens = gs.prompt_tokens;
                e->generated_tokens = gs.generated_tokens;
                e->preemptions = gs.preemptions;
                e->kv_used_blocks = gs.kv_used_blocks;
                e->kv_total_blocks = gs.kv_total_blocks;
                e->kv_cached_blocks = gs.kv_cached_blocks;
                e->kv_block_bytes = gs.kv_block_bytes;
                e->kv_evictions = gs.kv_evictions;
                e->cache_queries = gs.cache_queries;
                e->cache_hits = gs.cache_hits;
            }
        }
        mcp_model_version_release(v);
    }
    mcp_repository_entries_free(list, n);
}

/* ---- lifecycle ---- */

mcp_status mcp_frontend_create(mcp_repository *repo, mcp_metrics *metrics, mcp_frontend **out, mcp_err *err)
{
    *out = NULL;
    mcp_frontend *fe = mcp_calloc(1, sizeof *fe);
    if (!fe) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (getrandom(fe->tenant_secret, sizeof fe->tenant_secret, 0) != (ssize_t)sizeof fe->tenant_secret) {
        mcp_free(fe);
        return mcp_err_set(err, MCP_STATUS_INTERNAL, "no randomness for the tenant key secret");
    }
    fe->repo = repo;
    fe->metrics = metrics;
    fe->observer = mcp_metrics_observer(metrics);
    fe->monitors = mcp_monitor_set_create(on_drift, fe);
    if (!fe->monitors) {
        mcp_free(fe);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    fe->control_enabled = true;
    fe->body_cap = (size_t)1 << 30;
    fe->qos = mcp_qos_create();
    if (!fe->qos) {
        mcp_monitor_set_release(fe->monitors);
        mcp_free(fe);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    pthread_rwlock_init(&fe->auth_mu, NULL);
    pthread_mutex_init(&fe->audit_mu, NULL);
    pthread_cond_init(&fe->audit_cv, NULL);
    pthread_mutex_init(&fe->retire_mu, NULL);
    pthread_cond_init(&fe->retire_cv, NULL);
    pthread_mutex_init(&fe->control_mu, NULL);
    pthread_cond_init(&fe->control_cv, NULL);
    pthread_mutex_init(&fe->park_mu, NULL);
    pthread_mutex_init(&fe->policy_mu, NULL);
    pthread_cond_init(&fe->policy_cv, NULL);
    fe->policy = mcp_memory_policy_default();
    if (pthread_create(&fe->retirer, NULL, retire_main, fe) == 0) fe->retirer_running = true;
    if (pthread_create(&fe->policy_thread, NULL, policy_main, fe) == 0) fe->policy_running = true;
    for (int i = 0; i < LOADER_THREADS; i++)
        if (pthread_create(&fe->loaders[fe->n_loaders], NULL, loader_main, fe) == 0) fe->n_loaders++;
    mcp_repository_set_hooks(
        repo, (mcp_repository_hooks){.on_ready = hook_ready, .on_retire = hook_retire, .on_route = hook_route, .on_log = repo_log,
                               .user = fe});
    mcp_metrics_set_sampler(metrics, sample_gauges, fe);
    *out = fe;
    return MCP_STATUS_OK;
}

static void stop_policy(mcp_frontend *fe)
{
    if (!fe->policy_running) return;
    pthread_mutex_lock(&fe->policy_mu);
    fe->policy_stop = true;
    pthread_cond_broadcast(&fe->policy_cv);
    pthread_mutex_unlock(&fe->policy_mu);
    pthread_join(fe->policy_thread, NULL);
    fe->policy_running = false;
}

void mcp_frontend_destroy(mcp_frontend *fe)
{
    if (!fe) return;
    stop_policy(fe);
    stop_loaders(fe);
    /* The repository may outlive the frontend: it retires its versions
     * itself from here on. */
    mcp_repository_set_hooks(fe->repo, (mcp_repository_hooks){0});
    mcp_metrics_set_sampler(fe->metrics, NULL, NULL);
    if (fe->retirer_running) {
        pthread_mutex_lock(&fe->retire_mu);
        fe->retire_stop = true;
        pthread_cond_broadcast(&fe->retire_cv);
        pthread_mutex_unlock(&fe->retire_mu);
        pthread_join(fe->retirer, NULL); /* finishes what is queued first */
    }
    pthread_mutex_destroy(&fe->retire_mu);
    pthread_cond_destroy(&fe->retire_cv);
    pthread_mutex_destroy(&fe->control_mu);
    pthread_cond_destroy(&fe->control_cv);
    pthread_mutex_destroy(&fe->park_mu);
    pthread_mutex_destroy(&fe->policy_mu);
    pthread_cond_destroy(&fe->policy_cv);
    stop_audit(fe);
    pthread_mutex_destroy(&fe->audit_mu);
    pthread_cond_destroy(&fe->audit_cv);
    mcp_auth_destroy(fe->auth);
    pthread_rwlock_destroy(&fe->auth_mu);
    mcp_qos_destroy(fe->qos);
    /* Versions still draining keep the set; the drift callback is off. */
    mcp_monitor_set_release(fe->monitors);
    mcp_free(fe);
}

mcp_monitor_set *mcp_frontend_monitors(const mcp_frontend *fe) { return fe->monitors; }

void mcp_frontend_count_startup_loads(mcp_frontend *fe)
{
    mcp_repository_entry *list;
    int n = mcp_repository_index(fe->repo, &list);
    mcp_lifecycle_step *steps = mcp_calloc(MCP_LIFECYCLE_KEPT, sizeof *steps);
    for (int i = 0; steps && i < n; i++) {
        int k = mcp_repository_lifecycle(fe->repo, list[i].name, steps, MCP_LIFECYCLE_KEPT);
        /* Each Loading step and the Ready or Failed that ended it. */
        for (int a = 0; a < k; a++) {
            if (steps[a].state != MCP_VERSION_LOADING) continue;
            for (int b = a + 1; b < k; b++) {
                if (strcmp(steps[b].version, steps[a].version) != 0) continue;
                if (steps[b].state != MCP_VERSION_READY && steps[b].state != MCP_VERSION_FAILED) continue;
                int64_t ms = steps[b].time_ms - steps[a].time_ms;
                mcp_metrics_model_op(fe->metrics, list[i].name, false, steps[b].state == MCP_VERSION_READY,
                                     (ms > 0 ? ms : 0) * 1000000);
                break;
            }
        }
    }
    mcp_free(steps);
    mcp_repository_entries_free(list, n);
}

mcp_repository *mcp_frontend_repository(const mcp_frontend *fe) { return fe->repo; }

mcp_metrics *mcp_frontend_metrics(const mcp_frontend *fe) { return fe->metrics; }
