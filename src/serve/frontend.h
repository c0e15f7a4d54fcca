/*
 * The serving core every transport shares (private to src/serve/).
 *
 * A transport (HTTP, gRPC, their Unix sockets) turns bytes into an
 * mcp_call and hands it to mcp_frontend_infer, which runs the request path
 * as one named function per arrow:
 *
 *   peek_model -> authorize -> route_model -> decode_request
 *     -> validate_request -> submit_request           (transport thread)
 *   complete_request -> encode_response -> respond     (whoever finishes)
 *
 * and answers through the call's respond callback exactly once. Codecs are
 * a vtable per protocol; metrics hear every step through one observer,
 * and traces and the access log hear a call once its transport has sent
 * it (mcp_frontend_call_end: only the transport knows when that is). The frontend also owns the registry hooks that attach and
 * drain schedulers, the loader thread for model control, and the shutdown
 * drain, so transports hold only their library's glue.
 */
#ifndef MCP_SERVE_FRONTEND_H
#define MCP_SERVE_FRONTEND_H

#include "serve/auth.h"
#include "serve/generate.h"
#include "serve/serve.h"
#include "serve/trace.h"

/* What a transport received for one inference. */
typedef struct mcp_wire {
    const uint8_t *body;
    size_t len;
    int64_t header_len; /* OIP binary extension: Inference-Header-Content-Length; -1 = none */
} mcp_wire;

/*
 * A protocol's codec. peek_model (optional) names the model when the route
 * does not (the quickstart body carries it); what it parsed may stay in
 * *state for decode, so a body is parsed once; release_state frees it.
 * decode fills the request (errors name the tensor or byte offset); encode
 * writes a success body (*json_len: the JSON header length of a binary
 * body, else 0); error writes an error body for a message.
 */
typedef struct mcp_codec {
    int version; /* 1 */
    mcp_protocol protocol;
    /* name and version (version "" = current) */
    mcp_status (*peek_model)(const mcp_wire *w, char *name, size_t cap, char *version, size_t vcap, void **state,
                             mcp_err *err); /* optional */
    void (*release_state)(void *state);                                                            /* optional */
    mcp_status (*decode)(mcp_request *r, const mcp_wire *w, void *state, const mcp_model_version *m, mcp_err *err);
    void (*encode)(const mcp_request *r, mcp_buf *out, size_t *json_len);
    void (*error)(const char *message, mcp_buf *out);
} mcp_codec;

const mcp_codec *mcp_codec_get(mcp_protocol p);

typedef struct mcp_call mcp_call;

/* A call's admission under its tenant's limits (mcp_frontend_admit_tenant):
 * held until mcp_frontend_release_tenant; the request's share of the
 * model queue (weight, class, queued cap, SLA deadline). */
typedef struct mcp_tenant_grant {
    bool held;
    char tenant[MCP_AUTH_TENANT_MAX + 1]; /* "" = anonymous (no tenant limits) */
    double weight;
    int64_t max_queued;
    double tokens_per_s;
    mcp_qos_class sla_class;
    int64_t deadline_ms;
} mcp_tenant_grant;

/*
 * One inference call, owned by its transport until `respond` runs. Before
 * respond: status OK and `out` holds the encoded answer (json_len as
 * encode set it), or status and `message` say what failed and `out` holds
 * the codec's error body. `req` is the request when one was made (retained
 * by the call until mcp_call_clear), for transports that read its tensors.
 */
struct mcp_call {
    /* Set by the transport. */
    const mcp_codec *codec;
    mcp_wire wire;
    /* model and version: read during mcp_frontend_infer only. */
    const char *model;   /* from the route; NULL: the codec peeks it */
    const char *version; /* NULL = current */
    int64_t deadline_ns;   /* absolute mcp_now_ns() deadline the transport knows (gRPC's); 0 = none */
    /* Called once the request is queued, before it can complete (a
     * transport suspends its connection here); optional. */
    void (*on_queued)(mcp_call *c);
    /* Called exactly once with the outcome, on the transport thread for
     * answers before queueing, on a worker otherwise. */
    void (*respond)(mcp_call *c);
    void *user;
    /* Set by the frontend. */
    mcp_frontend *frontend;
    /* Outcome. */
    mcp_status status;
    char message[1024];
    mcp_buf out;
    size_t json_len;
    mcp_request *req;
    /* The call's trace (mcp_frontend_trace_start); inactive = not traced. */
    mcp_trace_ctx trace;
    /* Who is calling, as its transport established it
     * (mcp_frontend_authenticate), and from where. */
    mcp_identity who;
    mcp_peer peer;
    /* Set by the frontend: the tenant's admission, and when refused for a
     * tenant limit, the seconds to wait (HTTP Retry-After). */
    mcp_tenant_grant grant;
    int64_t retry_after_s;
};

/* Frees the outcome (body, request reference); the call may be reused. */
void mcp_call_clear(mcp_call *c);

/* ---- observer: one interface fed by every step of a request ---- */

typedef enum mcp_obs_event {
    MCP_OBS_REJECTED,  /* answered before queueing (unknown model, bad body, full queue) */
    MCP_OBS_QUEUED,    /* accepted by a scheduler */
    MCP_OBS_COMPLETED, /* answered after queueing, successfully or not */
} mcp_obs_event;

typedef struct mcp_observer {
    int version; /* 1 */
    /* model/version: what the call was routed to ("" when unknown, so a
     * client cannot mint label values); st: the outcome (OK for QUEUED). */
    void (*on_event)(void *user, mcp_obs_event ev, const mcp_call *c, const char *model, const char *version,
                     mcp_status st);
    void *user;
} mcp_observer;

/* The metrics observer: requests by model, version, protocol and code;
 * errors by reason; requests in flight. */
mcp_observer mcp_metrics_observer(mcp_metrics *m);

/* ---- tracing: the call's spans, started and ended by its transport ---- */

/* Every version's output monitor (serve/monitor.h): /metrics renders
 * them, the status page shows their drift. */
typedef struct mcp_monitor_set mcp_monitor_set;
mcp_monitor_set *mcp_frontend_monitors(const mcp_frontend *fe);
/* The tracer (mcp_frontend_set_tracer); NULL = off. */
mcp_tracer *mcp_frontend_tracer(const mcp_frontend *fe);
/* At the call's arrival (its headers or metadata): the W3C values it
 * carried (NULL when absent). mcp_frontend_infer samples it once the
 * model is known. Cheap when tracing is off. */
void mcp_frontend_trace_start(mcp_frontend *fe, mcp_call *c, const char *traceparent, const char *tracestate,
                              int64_t t_receive_ns);
/* A call that does not go through mcp_frontend_infer (a generation):
 * sampled once its transport routed it to v. */
void mcp_frontend_trace_routed(mcp_frontend *fe, mcp_call *c, const mcp_model_version *v);
/* Every call a transport finished (sent, or the client left), inference
 * or not (c NULL, or a call never started): its spans when it was traced,
 * its access-log line, and an error line for an internal failure. e says
 * what the transport knows; the request's own fields fill the rest. Call
 * it before mcp_call_clear. Cheap when none of the three applies. */
void mcp_frontend_call_end(mcp_frontend *fe, mcp_call *c, mcp_trace_end *e);
/* Whether mcp_frontend_call_end would do anything for c (internal: the
 * call failed inside the server): a transport asks first, so a call that
 * is neither traced nor logged costs it no header lookups. */
bool mcp_frontend_call_end_wanted(const mcp_frontend *fe, const mcp_call *c, bool internal);

/* ---- identity and access (serve/auth.h) ---- */

/* Whether access rules are on (mcp_frontend_set_auth). Off: everything
 * is allowed and model control answers to the admin token alone. */
bool mcp_frontend_auth_enabled(mcp_frontend *fe);
/* The identity an `authorization` value gives (NULL = none); without one,
 * the identity of a client certificate the TLS layer verified (its
 * subject's common name, NULL = none); else anonymous. UNAUTHENTICATED
 * (audited) when a credential is given and not good. */
mcp_status mcp_frontend_authenticate(mcp_frontend *fe, const char *authorization, const char *cert_cn, mcp_peer peer,
                                     mcp_identity *who, mcp_err *err);
/* Whether who may do act on model (NULL: server-wide): OK, or
 * UNAUTHENTICATED, PERMISSION_DENIED, or NOT_FOUND with the very message
 * a model that does not exist gets (a model the caller may not know of).
 * Refusals go to the event log with the identity. */
mcp_status mcp_frontend_allow(mcp_frontend *fe, const mcp_identity *who, mcp_peer peer, mcp_action act,
                              const char *model, mcp_err *err);
/* mcp_frontend_allow without an answer or an audit record (listings). */
bool mcp_frontend_may(mcp_frontend *fe, const mcp_identity *who, mcp_peer peer, mcp_action act, const char *model);
/* Whether who may know that model exists (listings, stats, metrics). */
bool mcp_frontend_visible(mcp_frontend *fe, const mcp_identity *who, const char *model);
/* Whether seg[0..len) is a tenant namespace some model lives in, so a
 * path's "t1/resnet" names one model. */
bool mcp_frontend_is_namespace(mcp_frontend *fe, const char *seg, size_t len);
/* "t1/ci (api-key)", "anonymous (loopback)": an identity for events. */
void mcp_identity_describe(const mcp_identity *who, mcp_peer peer, char *out, size_t cap);
/* Admits a call of who's tenant under its limits (generate: also its
 * generated tokens); RESOURCE_EXHAUSTED with *retry_after_s otherwise. */
mcp_status mcp_frontend_admit_tenant(mcp_frontend *fe, const mcp_identity *who, bool generate, mcp_tenant_grant *g,
                                     int64_t *retry_after_s, mcp_err *err);
void mcp_frontend_release_tenant(mcp_frontend *fe, mcp_tenant_grant *g);
/* Generated tokens of a tenant, against its tokens_per_s. */
void mcp_frontend_charge_tokens(mcp_frontend *fe, const char *tenant, int64_t tokens);
/* An event for the event log (when the server has a store), written off
 * the caller's thread; dropped (and counted) when the queue is full. */
void mcp_frontend_audit(mcp_frontend *fe, const char *actor, const char *action, const char *target,
                        const char *outcome, const char *reason);
int64_t mcp_frontend_audit_dropped(const mcp_frontend *fe);

/* ---- the frontend ---- */

mcp_repository *mcp_frontend_repository(const mcp_frontend *fe);
mcp_metrics *mcp_frontend_metrics(const mcp_frontend *fe);

/* The request path: answers through c->respond exactly once. */
void mcp_frontend_infer(mcp_frontend *fe, mcp_call *c);
/* The prefix-cache key of a tenant (its name as the request's `tenant`
 * header or, once it exists, the authenticated identity gives it; "" is
 * the anonymous tenant): derived with a per-process secret, never taken
 * from the request. */
#define MCP_TENANT_MAX 128
/* false (and no key) when the name is not 0 to MCP_TENANT_MAX of
 * A-Z a-z 0-9 . _ : @ / - */
bool mcp_frontend_tenant_key(const mcp_frontend *fe, const char *tenant, size_t len, uint8_t key[32]);
#define MCP_TENANT_RULE "1 to 128 of the characters A-Z a-z 0-9 . _ : @ / -"
/* Whether a tenant name follows MCP_TENANT_RULE (NUL-terminated). */
bool mcp_frontend_tenant_valid(const char *tenant);

/* Text generation (who may generate on name, within its tenant's limits;
 * its requests take its tenant's share): routes name (version NULL = current) once to a version's
 * generation engine and queues rs[0..n) there; their events come on the
 * step thread. *submitted says how many were queued (each sends its events,
 * however the call ends); when not all were, those are cancelled and the
 * status says why. On OK, answered_by holds the version that took them. */
mcp_status mcp_frontend_generate(mcp_frontend *fe, const mcp_identity *who, mcp_peer peer, const char *name,
                                 const char *version, mcp_gen_request *const *rs, int n, int *submitted,
                                 char *answered_by, size_t cap, mcp_err *err);

/* The model a name (and version) routes to, retained; NULL with status and
 * a message saying why (unknown: NOT_FOUND; known but not ready:
 * UNAVAILABLE). Used by the metadata routes of every transport too. */
mcp_model_version *mcp_frontend_route_model(mcp_frontend *fe, const char *name, const char *version, mcp_status *st,
                                            mcp_err *err);

/* ---- admission and the shutdown drain ---- */

/* A transport admits each request when it starts arriving; false once the
 * server is stopping (answer "shutting down" then). mcp_frontend_routed
 * says it has been answered or queued. */
bool mcp_frontend_admit(mcp_frontend *fe);
void mcp_frontend_routed(mcp_frontend *fe);
bool mcp_frontend_stopping(const mcp_frontend *fe);

/* Counts `bytes` of request data a transport holds against the server-wide
 * cap; false (nothing counted) when they would pass it: answer "retry
 * later" (HTTP 503, gRPC RESOURCE_EXHAUSTED). mcp_frontend_release_body
 * gives them back. */
bool mcp_frontend_reserve_body(mcp_frontend *fe, size_t bytes);
void mcp_frontend_release_body(mcp_frontend *fe, size_t bytes);
size_t mcp_frontend_body_cap(const mcp_frontend *fe);

/* Transport counters sampled by /metrics. */
void mcp_frontend_count_open(mcp_frontend *fe, int delta);
void mcp_frontend_count_connections(mcp_frontend *fe, int delta);
int mcp_frontend_open_requests(const mcp_frontend *fe);

/* ---- model control, off the transport threads ---- */

/* Whether a caller may load and unload: control must be on, and with an
 * admin token configured the caller's `authorization` value (HTTP header
 * or gRPC metadata; NULL when absent) must be "Bearer <token>". OK, or
 * PERMISSION_DENIED (control off) / UNAUTHENTICATED with a message. */
mcp_status mcp_frontend_authorize_control(const mcp_frontend *fe, const char *authorization, mcp_err *err);

typedef enum mcp_control_op {
    MCP_CONTROL_LOAD,
    MCP_CONTROL_UNLOAD,
    MCP_CONTROL_ROLLOUT,
    MCP_CONTROL_COLD_START, /* an evicted model's next request: load it again */
} mcp_control_op;

/* What a rollout call does (MCP_CONTROL_ROLLOUT). */
typedef enum mcp_rollout_action {
    MCP_ROLLOUT_SET_WEIGHTS, /* versions[] at amounts[] percent */
    MCP_ROLLOUT_SHADOW,      /* versions[0] at amounts[0] sample; spec when has_spec */
    MCP_ROLLOUT_PROMOTE,     /* versions[0] */
    MCP_ROLLOUT_UNDO,
    MCP_ROLLOUT_TRIP,        /* a gate failed: watch, trip_canary, reason */
} mcp_rollout_action;
const char *mcp_rollout_action_name(mcp_rollout_action a); /* "set-weight", ... */

typedef struct mcp_control mcp_control;
/*
 * One load or unload, run on the loader thread. `descriptor` (YAML text, or
 * NULL to load the known entry by name) and `source` (where a descriptor
 * file lives, for relative paths; may be NULL) are copied. done runs on
 * the loader thread with the outcome in ctl->status / ctl->message.
 */
struct mcp_control {
    mcp_control_op op;
    char name[256];
    char actor[192];  /* who asked (the event log's actor); "" = "api" */
    char *descriptor;
    char *source;
    /* MCP_CONTROL_ROLLOUT */
    mcp_rollout_action action;
    int n_versions;
    char versions[2][MCP_ROLLOUT_VERSION_LEN];
    double amounts[2];
    bool has_spec;
    mcp_rollout_spec spec;
    mcp_route_watch *watch; /* TRIP: retained, released when run */
    bool trip_canary;
    char reason[320];
    /* Set when run: what an apply loaded (its role in a rollout), and
     * for a rollout call its state afterwards as JSON (mcp_free). */
    char applied_version[MCP_ROLLOUT_VERSION_LEN];
    bool applied_primary;
    char *answer;
    void (*done)(mcp_control *ctl);
    void *user;
    mcp_status status;
    char message[2048];
};
/* Queues ctl (the caller keeps it alive until done). UNAVAILABLE when
 * stopping; then done is not called. */
mcp_status mcp_frontend_control(mcp_frontend *fe, mcp_control *ctl);

/* A rollout call's JSON body ({"action": "set-weight" | "shadow" |
 * "promote" | "undo", ...}) into ctl, for mcp_frontend_control: the one
 * parser HTTP's POST /v2/models/{m}/rollout and gRPC's Rollout share.
 * INVALID_ARGUMENT (or TOO_LARGE) names the field that is wrong. */
mcp_status mcp_frontend_rollout_parse(mcp_frontend *fe, const char *name, const char *body, size_t len, mcp_control *ctl,
                                      mcp_err *err);

/* A model's rollout as JSON: versions and their roles, weights, the
 * validator and gates, the window's figures, and what a gate stopped. */
mcp_status mcp_frontend_rollout_json(mcp_frontend *fe, const char *name, mcp_buf *out, mcp_err *err);

#endif
