/*
 * Identity and access: who a caller is and what it may do (private to
 * src/serve/).
 *
 * An mcp_auth is built from the server's own configuration only (the
 * `auth`, `tenants` and `shared_models` sections of --config, and the
 * files they name): nothing a request, a descriptor or a model carries
 * can add a key, a role or a rule. It is immutable once built; SIGHUP
 * builds a new one and the frontend swaps it in.
 *
 *   authenticate: "Bearer <API key | JWT>" -> identity (tenant, subject, roles)
 *   decide:       identity x action x model  -> allow | 401 | 403 | 404
 *
 * Models live in tenant namespaces: "t1/resnet" belongs to tenant t1;
 * a name without '/' is shared (every tenant's callers may use it, unless
 * `shared_models` lists the tenants that may). `admin` is global; every
 * other role acts within its own tenant.
 */
#ifndef MCP_SERVE_AUTH_H
#define MCP_SERVE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define MCP_AUTH_TENANT_MAX 64   /* bytes of a tenant name: A-Z a-z 0-9 _ . - (no '/') */
#define MCP_AUTH_SUBJECT_MAX 128
#define MCP_AUTH_TOKEN_MAX 8192  /* bytes of a credential; longer is refused unread */

typedef enum mcp_role {
    MCP_ROLE_ADMIN = 1u << 0,
    MCP_ROLE_OPERATOR = 1u << 1,
    MCP_ROLE_INVOKER = 1u << 2,
    MCP_ROLE_VIEWER = 1u << 3,
} mcp_role;

/* What a call does; every route of every transport names one. */
typedef enum mcp_action {
    MCP_ACT_HEALTH = 0, /* liveness, readiness, gRPC health */
    MCP_ACT_SERVER,     /* server metadata, openapi.json, the status page's files */
    MCP_ACT_METRICS,    /* GET /metrics */
    MCP_ACT_METADATA,   /* a model's metadata, config, readiness; model listings */
    MCP_ACT_STATS,      /* statistics, rollout state, the status page's data */
    MCP_ACT_INFER,
    MCP_ACT_GENERATE,
    MCP_ACT_LOAD,       /* apply / load (a name that may not exist yet) */
    MCP_ACT_UNLOAD,
    MCP_ACT_ROLLOUT,
    MCP_ACT_EVENTS,     /* the event log (audit) */
    MCP_ACT_SETTINGS,   /* server-wide trace and log settings */
    MCP_ACT_COUNT,
} mcp_action;

const char *mcp_action_name(mcp_action a); /* "health", "server", ... */
/* -1 when s names no action. */
int mcp_action_parse(const char *s);

/* Priority classes an SLA claim or a tenant's config may carry. */
typedef enum mcp_qos_class {
    MCP_CLASS_NONE = -1,
    MCP_CLASS_CRITICAL = 0,
    MCP_CLASS_STANDARD = 1,
    MCP_CLASS_BATCH = 2,
} mcp_qos_class;
const char *mcp_qos_class_name(mcp_qos_class c); /* "critical", "standard", "batch", "" */

/* Where a call came from: anonymous access defaults to local callers. */
typedef enum mcp_peer {
    MCP_PEER_REMOTE = 0,
    MCP_PEER_LOOPBACK, /* 127.0.0.0/8, ::1 */
    MCP_PEER_LOCAL,    /* a Unix socket */
} mcp_peer;

typedef struct mcp_identity {
    bool authenticated;                     /* false: anonymous (no credential) */
    char tenant[MCP_AUTH_TENANT_MAX + 1];   /* "" : none (admin may have none) */
    char subject[MCP_AUTH_SUBJECT_MAX + 1]; /* key entry's subject, JWT sub, cert CN */
    unsigned roles;                         /* mcp_role bits */
    const char *via;                        /* "api-key", "jwt", "admin-token", "certificate", "anonymous" */
    mcp_qos_class sla_class;                /* from a JWT `class` claim; NONE when absent */
    int64_t sla_deadline_ms;                /* from a JWT `deadline_ms` claim; 0 when absent */
} mcp_identity;

/* The anonymous identity (authenticated false, no roles). */
void mcp_identity_anonymous(mcp_identity *id);

/* A tenant's limits (`tenants:` in the config); 0 = no limit. */
typedef struct mcp_tenant_limits {
    double weight;          /* fair-queuing share; default 1 */
    int64_t max_concurrent; /* requests admitted and not yet answered */
    double rps;             /* requests per second (token bucket) ... */
    double burst;           /* ... of this depth (default max(1, rps)) */
    int64_t max_queued;     /* requests waiting in model queues */
    double tokens_per_s;    /* generated tokens per second */
    mcp_qos_class class_;   /* default priority class; NONE = standard */
} mcp_tenant_limits;

typedef struct mcp_auth mcp_auth;

/*
 * Builds the access rules from a server config document (YAML text; the
 * whole --config file: only `auth`, `tenants` and `shared_models` are
 * read, other keys are ignored). base_dir resolves relative file names
 * (api_keys_file, hs256_secret_file, rs256_public_key_file); the files are
 * read now. Errors name the key and line:column, or the file and entry.
 * A document without an `auth` section gives a disabled mcp_auth
 * (mcp_auth_enabled false) whose tenant limits still apply.
 */
mcp_status mcp_auth_parse(const char *yaml, size_t len, const char *base_dir, mcp_auth **out, mcp_err *err);
/* mcp_auth_parse of a file (base_dir: the file's folder). */
mcp_status mcp_auth_load(const char *config_path, mcp_auth **out, mcp_err *err);
void mcp_auth_destroy(mcp_auth *a);

bool mcp_auth_enabled(const mcp_auth *a);
/* Number of API keys, and whether HS256 / RS256 tokens are accepted. */
int mcp_auth_key_count(const mcp_auth *a);
bool mcp_auth_jwt_hs256(const mcp_auth *a);
bool mcp_auth_jwt_rs256(const mcp_auth *a);

/* An extra credential that is the admin (the server's --admin-token-file):
 * "Bearer <token>" authenticates as subject "admin-token", role admin. */
mcp_status mcp_auth_set_admin_token(mcp_auth *a, const char *token, mcp_err *err);

/*
 * The identity of an `Authorization` value (HTTP header or gRPC metadata;
 * NULL or "" = none, giving the anonymous identity and OK). "Bearer X":
 * X with two dots is a JWT, anything else an API key. now_s: the clock
 * (seconds since the epoch) for exp/nbf. UNAUTHENTICATED with a message
 * that says why (unknown key, expired, not yet valid, wrong issuer, wrong
 * audience, bad signature, alg refused, malformed: which part) and never
 * echoes the credential.
 */
mcp_status mcp_auth_authenticate(const mcp_auth *a, const char *authorization, int64_t now_s, mcp_identity *id,
                                 mcp_err *err);

/* The identity of a client certificate the transport's TLS verified
 * (against --tls-client-ca), by its subject's common name as
 * `auth.client_certificates` maps it; UNAUTHENTICATED when none does. */
mcp_status mcp_auth_authenticate_certificate(const mcp_auth *a, const char *cn, mcp_identity *id, mcp_err *err);

typedef enum mcp_decision {
    MCP_DECIDE_ALLOW = 0,
    MCP_DECIDE_UNAUTHENTICATED, /* 401: needs an identity */
    MCP_DECIDE_FORBIDDEN,       /* 403: the caller may know the model exists, but not do this */
    MCP_DECIDE_HIDDEN,          /* 404: the caller may not know the model exists */
} mcp_decision;

/*
 * Whether id may do act, on model (NULL for server-wide actions). A
 * disabled mcp_auth allows everything. Anonymous callers get only the
 * actions `auth.anonymous` lists (default: health and metrics, from
 * loopback or a Unix socket only). model's namespace decides visibility:
 * another tenant's model (or a shared one `shared_models` keeps from the
 * caller's tenant) is HIDDEN; a visible one the caller's roles do not
 * allow the action on is FORBIDDEN; shared models are loaded, unloaded
 * and rolled out by admin only.
 */
mcp_decision mcp_auth_decide(const mcp_auth *a, const mcp_identity *id, mcp_peer peer, mcp_action act,
                             const char *model);
/* Whether id may see that model exists (listings, stats, metrics). */
bool mcp_auth_visible(const mcp_auth *a, const mcp_identity *id, const char *model);

/* The tenant a model name belongs to ("t1/x" -> "t1", len 2); 0 = shared. */
size_t mcp_auth_model_tenant(const char *model, const char **tenant);

/* A tenant's limits (defaults for one the config does not name). */
mcp_tenant_limits mcp_auth_tenant_limits(const mcp_auth *a, const char *tenant);

/* Whether a key found in a descriptor, a model's metadata or a request's
 * parameters is policy-like (policy, policies, rbac, acl, roles,
 * permissions, auth, authorization, tenants; as the whole key or its last
 * dotted or slashed component, any case): such keys are refused, since
 * policies come only from the server's configuration. */
bool mcp_auth_policy_key(const char *key);

/* The lowercase hex SHA-256 of an API key, as a keys file stores it. */
void mcp_auth_key_hash(const char *key, size_t len, char hex[65]);

#endif
