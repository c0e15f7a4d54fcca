/*
 * Identity and access (see auth.h): the config walk, API keys, JWTs
 * (HS256, RS256) and the decisions.
 *
 * Credentials are hostile input: nothing of one is echoed in a message, a
 * JWT's claims are read only after its signature verifies, and an HS256
 * token is checked with the HS256 secret alone, so a token MACed with the
 * RSA public key's text (algorithm confusion) never verifies.
 */
#include <errno.h>
#include <jansson.h>
#include <libfyaml.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "registry/descriptor_util.h"
#include "serve/auth.h"

#define AUTH_HASH_LEN 32                   /* SHA-256 */
#define AUTH_CLAIM_NAME_MAX 128            /* tenant_claim, roles_claim */
#define AUTH_URI_MAX 1024                  /* issuer, audience */
#define AUTH_KEYS_MAX 100000               /* API keys, file and inline together */
#define AUTH_NAMES_MAX 65536               /* tenants, shared models */
#define AUTH_MODEL_NAME_MAX 128
#define AUTH_CONFIG_MAX_BYTES (16u << 20)
#define AUTH_KEYS_FILE_MAX_BYTES (32u << 20)
#define AUTH_SECRET_FILE_MAX_BYTES 4096u
#define AUTH_PEM_FILE_MAX_BYTES 65536u
#define AUTH_SECRET_MIN 32
#define AUTH_RSA_BITS_MIN 2048
#define AUTH_SKEW_MAX 3600
#define AUTH_DEADLINE_MS_MAX 86400000
#define AUTH_WEIGHT_MAX 1000.0
#define AUTH_LIMIT_MAX 1e9
#define AUTH_ADMIN_TOKEN_MIN 16

#define BEARER "Bearer "
#define BEARER_LEN 7
#define MSG_SCHEME "authorization must be 'Bearer <API key or JWT>'"

/* ---- names: actions, roles, classes ---- */

#define ACT_BIT(a) (1u << (a))
#define ACTIONS_ALL (ACT_BIT(MCP_ACT_COUNT) - 1u)
#define ACTIONS_ADMIN_ONLY_ON_SHARED (ACT_BIT(MCP_ACT_LOAD) | ACT_BIT(MCP_ACT_UNLOAD) | ACT_BIT(MCP_ACT_ROLLOUT))
#define ACTIONS_ANONYMOUS_DEFAULT (ACT_BIT(MCP_ACT_HEALTH) | ACT_BIT(MCP_ACT_METRICS))

static const char *const action_names[] = {
    [MCP_ACT_HEALTH] = "health", [MCP_ACT_SERVER] = "server",     [MCP_ACT_METRICS] = "metrics",
    [MCP_ACT_METADATA] = "metadata", [MCP_ACT_STATS] = "stats",   [MCP_ACT_INFER] = "infer",
    [MCP_ACT_GENERATE] = "generate", [MCP_ACT_LOAD] = "load",     [MCP_ACT_UNLOAD] = "unload",
    [MCP_ACT_ROLLOUT] = "rollout", [MCP_ACT_EVENTS] = "events",   [MCP_ACT_SETTINGS] = "settings",
};
_Static_assert(sizeof action_names / sizeof action_names[0] == MCP_ACT_COUNT, "one name per action");
#define ACTION_NAMES_TEXT "health, server, metrics, metadata, stats, infer, generate, load, unload, rollout, events, settings"

typedef struct role_info {
    mcp_role bit;
    const char *name;
    unsigned actions; /* the default; auth.roles replaces it (admin excepted) */
} role_info;

#define ROLE_COUNT 4
static const role_info role_table[ROLE_COUNT] = {
    {MCP_ROLE_ADMIN, "admin", ACTIONS_ALL},
    {MCP_ROLE_OPERATOR, "operator",
     ACT_BIT(MCP_ACT_HEALTH) | ACT_BIT(MCP_ACT_SERVER) | ACT_BIT(MCP_ACT_METRICS) | ACT_BIT(MCP_ACT_METADATA) |
         ACT_BIT(MCP_ACT_STATS) | ACT_BIT(MCP_ACT_INFER) | ACT_BIT(MCP_ACT_GENERATE) | ACT_BIT(MCP_ACT_LOAD) |
         ACT_BIT(MCP_ACT_UNLOAD) | ACT_BIT(MCP_ACT_ROLLOUT) | ACT_BIT(MCP_ACT_EVENTS)},
    {MCP_ROLE_INVOKER, "invoker",
     ACT_BIT(MCP_ACT_HEALTH) | ACT_BIT(MCP_ACT_SERVER) | ACT_BIT(MCP_ACT_METADATA) | ACT_BIT(MCP_ACT_INFER) |
         ACT_BIT(MCP_ACT_GENERATE)},
    {MCP_ROLE_VIEWER, "viewer",
     ACT_BIT(MCP_ACT_HEALTH) | ACT_BIT(MCP_ACT_SERVER) | ACT_BIT(MCP_ACT_METADATA) | ACT_BIT(MCP_ACT_STATS) |
         ACT_BIT(MCP_ACT_METRICS)},
};
#define ROLE_NAMES_TEXT "admin, operator, invoker, viewer"

const char *mcp_action_name(mcp_action a)
{
    if ((int)a < 0 || a >= MCP_ACT_COUNT) return "";
    return action_names[a];
}

int mcp_action_parse(const char *s)
{
    if (!s) return -1;
    for (int i = 0; i < MCP_ACT_COUNT; i++)
        if (strcmp(s, action_names[i]) == 0) return i;
    return -1;
}

const char *mcp_qos_class_name(mcp_qos_class c)
{
    switch (c) {
    case MCP_CLASS_CRITICAL: return "critical";
    case MCP_CLASS_STANDARD: return "standard";
    case MCP_CLASS_BATCH: return "batch";
    case MCP_CLASS_NONE: break;
    }
    return "";
}

static bool class_parse(const char *s, mcp_qos_class *out)
{
    for (mcp_qos_class c = MCP_CLASS_CRITICAL; c <= MCP_CLASS_BATCH; c++)
        if (strcmp(s, mcp_qos_class_name(c)) == 0) {
            *out = c;
            return true;
        }
    return false;
}

/* The role bit of a name; 0 when it names none. */
static unsigned role_parse(const char *s, size_t len)
{
    for (int i = 0; i < ROLE_COUNT; i++)
        if (strlen(role_table[i].name) == len && memcmp(s, role_table[i].name, len) == 0) return role_table[i].bit;
    return 0;
}

static int role_index(unsigned bit)
{
    for (int i = 0; i < ROLE_COUNT; i++)
        if (role_table[i].bit == bit) return i;
    return -1;
}

/* 1 to 64 of A-Z a-z 0-9 _ . -, not "." or "..". */
static bool tenant_valid(const char *s, size_t len)
{
    if (len == 0 || len > MCP_AUTH_TENANT_MAX) return false;
    if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                  c == '-';
        if (!ok) return false;
    }
    return true;
}
#define TENANT_RULE "1 to 64 of A-Z a-z 0-9 _ . -, not '.' or '..'"

/* A shared model's name: the tenant rule's characters, up to 128. */
static bool shared_model_name_valid(const char *s, size_t len)
{
    if (len == 0 || len > AUTH_MODEL_NAME_MAX) return false;
    if (len <= MCP_AUTH_TENANT_MAX) return tenant_valid(s, len);
    return tenant_valid(s, MCP_AUTH_TENANT_MAX) && tenant_valid(s + MCP_AUTH_TENANT_MAX, len - MCP_AUTH_TENANT_MAX);
}

/* A subject: 1 to 128 bytes, no control characters (it is logged). */
static bool subject_valid(const char *s, size_t len)
{
    if (len == 0 || len > MCP_AUTH_SUBJECT_MAX) return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return false;
    return true;
}

void mcp_identity_anonymous(mcp_identity *id)
{
    memset(id, 0, sizeof *id);
    id->via = "anonymous";
    id->sla_class = MCP_CLASS_NONE;
}

/* ---- the rules ---- */

typedef struct auth_key {
    uint8_t hash[AUTH_HASH_LEN];
    char tenant[MCP_AUTH_TENANT_MAX + 1];
    char subject[MCP_AUTH_SUBJECT_MAX + 1];
    unsigned roles;
    /* Where it was written, for the duplicate message. */
    bool from_file;
    int entry, line, col;
} auth_key;

/* A client certificate's identity: its subject's common name, verified
 * by the transport's TLS against the client CA. */
typedef struct auth_cert {
    char cn[MCP_AUTH_SUBJECT_MAX + 1];
    char tenant[MCP_AUTH_TENANT_MAX + 1];
    char subject[MCP_AUTH_SUBJECT_MAX + 1];
    unsigned roles;
} auth_cert;

typedef struct auth_tenant {
    char name[MCP_AUTH_TENANT_MAX + 1];
    mcp_tenant_limits limits;
} auth_tenant;

typedef struct auth_shared {
    char name[AUTH_MODEL_NAME_MAX + 1];
    char (*tenants)[MCP_AUTH_TENANT_MAX + 1];
    int n_tenants;
} auth_shared;

struct mcp_auth {
    bool enabled;
    auth_key *keys; /* sorted by hash */
    int n_keys, cap_keys;
    auth_cert *certs; /* auth.client_certificates */
    int n_certs;
    /* JWTs: accepted when a secret or a public key is configured. */
    uint8_t *hs256_secret;
    size_t hs256_secret_len;
    EVP_PKEY *rs256_key;
    char *issuer, *audience; /* NULL: not checked */
    char tenant_claim[AUTH_CLAIM_NAME_MAX + 1];
    char roles_claim[AUTH_CLAIM_NAME_MAX + 1];
    int64_t clock_skew_s;
    bool require_exp;
    bool anonymous_set; /* auth.anonymous given: exactly those, from any peer */
    unsigned anonymous_actions;
    unsigned role_actions[ROLE_COUNT];
    auth_tenant *tenants; /* sorted by name */
    int n_tenants;
    auth_shared *shared; /* sorted by name */
    int n_shared;
    bool admin_token_set;
    uint8_t admin_token_hash[AUTH_HASH_LEN];
};

/* What a NULL mcp_auth stands for: disabled, nothing configured. */
static const mcp_auth auth_none = {.enabled = false};

static mcp_auth *auth_new(void)
{
    mcp_auth *a = mcp_calloc(1, sizeof *a);
    if (!a) return NULL;
    snprintf(a->tenant_claim, sizeof a->tenant_claim, "tenant");
    snprintf(a->roles_claim, sizeof a->roles_claim, "roles");
    a->clock_skew_s = 60;
    a->require_exp = true;
    for (int i = 0; i < ROLE_COUNT; i++) a->role_actions[i] = role_table[i].actions;
    return a;
}

void mcp_auth_destroy(mcp_auth *a)
{
    if (!a) return;
    mcp_free(a->keys);
    mcp_free(a->certs);
    if (a->hs256_secret) {
        OPENSSL_cleanse(a->hs256_secret, a->hs256_secret_len);
        mcp_free(a->hs256_secret);
    }
    EVP_PKEY_free(a->rs256_key);
    mcp_free(a->issuer);
    mcp_free(a->audience);
    mcp_free(a->tenants);
    for (int i = 0; i < a->n_shared; i++) mcp_free(a->shared[i].tenants);
    mcp_free(a->shared);
    OPENSSL_cleanse(a->admin_token_hash, sizeof a->admin_token_hash);
    mcp_free(a);
}

bool mcp_auth_enabled(const mcp_auth *a) { return a && a->enabled; }
int mcp_auth_key_count(const mcp_auth *a) { return a ? a->n_keys : 0; }
bool mcp_auth_jwt_hs256(const mcp_auth *a) { return a && a->hs256_secret; }
bool mcp_auth_jwt_rs256(const mcp_auth *a) { return a && a->rs256_key; }

static bool sha256(const void *data, size_t len, uint8_t out[AUTH_HASH_LEN])
{
    unsigned int n = 0;
    return EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) == 1 && n == AUTH_HASH_LEN;
}

static void hex_encode(const uint8_t *b, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[b[i] >> 4];
        hex[2 * i + 1] = digits[b[i] & 15];
    }
    hex[2 * n] = '\0';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void mcp_auth_key_hash(const char *key, size_t len, char hex[65])
{
    uint8_t h[AUTH_HASH_LEN];
    if (!sha256(key, len, h)) {
        hex[0] = '\0';
        return;
    }
    hex_encode(h, sizeof h, hex);
}

/* ---- YAML documents ---- */

/* Offset of the first byte that is not well-formed UTF-8, or len. libfyaml
 * 0.7's scanner can loop on malformed bytes, so they never reach it. */
static size_t utf8_invalid_at(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) n = 1, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) n = 2, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) n = 3, cp = c & 0x07;
        else return i;
        if (len - i <= n) return i;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += n + 1;
    }
    return len;
}

static void fy_quiet(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
    (void)diag, (void)user, (void)buf, (void)len;
}

typedef struct ydoc {
    struct fy_diag *diag;
    struct fy_parser *parser;
    struct fy_document *doc;
    const char *text; /* the source, for single-quoted scalars */
    size_t len;
    mcp_pool *pool;   /* their decoded text */
} ydoc;

static void ydoc_free(ydoc *d)
{
    if (d->doc) fy_parse_document_destroy(d->parser, d->doc);
    if (d->parser) fy_parser_destroy(d->parser);
    if (d->diag) fy_diag_destroy(d->diag);
    mcp_pool_destroy(d->pool);
    *d = (ydoc){0};
}

static mcp_status yaml_syntax_error(ydoc *d, const char *what, mcp_err *err)
{
    void *it = NULL;
    struct fy_diag_error *e;
    while ((e = fy_diag_errors_iterate(d->diag, &it))) {
        if (e->type < FYET_ERROR) continue;
        if (e->line > 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s (line %d:%d): YAML syntax error: %s", what, e->line,
                               e->column, e->msg ? e->msg : "unknown");
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: YAML syntax error: %s", what, e->msg ? e->msg : "unknown");
    }
    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: YAML syntax error", what);
}

static bool ydoc_start(ydoc *d, const char *text, size_t len, const struct fy_parse_cfg *pc)
{
    d->parser = fy_parser_create(pc);
    return d->parser && fy_parser_set_string(d->parser, text, len) == 0;
}

/*
 * Parses the first document of text (d->doc NULL for an empty stream).
 * Pass 1 reads the whole stream as events, so a syntax error anywhere is
 * found without building a second document (which leaks in libfyaml 0.7
 * when that document is malformed); pass 2 builds the first document.
 * Duplicate keys are syntax errors.
 */
static mcp_status ydoc_load(ydoc *d, const char *text, size_t len, size_t max, const char *what, mcp_err *err)
{
    *d = (ydoc){0};
    if (len > max) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s is %zu bytes; the limit is %zu", what, len, max);
    if (memchr(text, '\0', len))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s holds a NUL byte (is it a binary file?)", what);
    size_t bad = utf8_invalid_at((const unsigned char *)text, len);
    if (bad < len)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s is not valid UTF-8 (at byte offset %zu)", what, bad);
    d->text = text;
    d->len = len;
    d->pool = mcp_pool_create(1024);
    if (!d->pool) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "%s: out of memory", what);
    struct fy_diag_cfg dc;
    fy_diag_cfg_default(&dc);
    dc.fp = NULL;
    dc.output_fn = fy_quiet;
    dc.level = FYET_ERROR;
    dc.colorize = false;
    d->diag = fy_diag_create(&dc);
    if (!d->diag) {
        ydoc_free(d);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "%s: out of memory starting the YAML parser", what);
    }
    fy_diag_set_collect_errors(d->diag, true);
    struct fy_parse_cfg pc = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_1_2 | FYPCF_JSON_NONE, .diag = d->diag};
    if (!ydoc_start(d, text, len, &pc)) {
        ydoc_free(d);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "%s: out of memory starting the YAML parser", what);
    }
    int docs = 0;
    struct fy_event *ev;
    while ((ev = fy_parser_parse(d->parser))) {
        docs += ev->type == FYET_DOCUMENT_START;
        fy_parser_event_free(d->parser, ev);
    }
    mcp_status st = MCP_STATUS_OK;
    if (fy_parser_get_stream_error(d->parser)) st = yaml_syntax_error(d, what, err);
    else if (docs > 1) st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s holds more than one YAML document ('---')", what);
    fy_parser_destroy(d->parser);
    d->parser = NULL;
    if (st != MCP_STATUS_OK || docs == 0) {
        ydoc_free(d);
        return st;
    }
    if (!ydoc_start(d, text, len, &pc)) {
        ydoc_free(d);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "%s: out of memory starting the YAML parser", what);
    }
    d->doc = fy_parse_load_document(d->parser);
    if (!d->doc || fy_parser_get_stream_error(d->parser)) {
        st = yaml_syntax_error(d, what, err);
        ydoc_free(d);
        return st;
    }
    return MCP_STATUS_OK;
}

/* A scalar's text (NULL when it has none); never libfyaml's for a
 * single-quoted one. */
static const char *scalar_text(ydoc *d, struct fy_node *n, size_t *len)
{
    *len = 0;
    if (fy_node_get_style(n) == FYNS_SINGLE_QUOTED) return mcp__yaml_single_quoted(n, d->text, d->len, d->pool, len);
    return fy_node_get_scalar(n, len);
}

/* ---- YAML: locations and typed values ---- */

typedef struct yloc {
    int line, col; /* 1-based; 0 = unknown */
} yloc;

static yloc token_loc(struct fy_token *t)
{
    const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
    if (!m) return (yloc){0, 0};
    return (yloc){m->line + 1, m->column + 1};
}

/* A scalar's own position, or a collection's first scalar (empty values
 * have no token: {0, 0}). */
static yloc node_loc(struct fy_node *n)
{
    for (int depth = 0; n && depth < 64; depth++) {
        struct fy_token *tag = fy_node_get_tag_token(n);
        if (tag) return token_loc(tag);
        if (fy_node_is_scalar(n)) {
            yloc l = token_loc(fy_node_get_scalar_token(n));
            /* libfyaml marks a quoted scalar inside its quotes; point at the quote. */
            enum fy_node_style st = fy_node_get_style(n);
            if ((st == FYNS_SINGLE_QUOTED || st == FYNS_DOUBLE_QUOTED || st == FYNS_ALIAS) && l.col > 1) l.col--;
            return l;
        }
        void *it = NULL;
        if (fy_node_is_mapping(n)) {
            struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);
            n = p ? fy_node_pair_key(p) : NULL;
        } else if (fy_node_is_sequence(n)) {
            n = fy_node_sequence_iterate(n, &it);
        } else {
            break;
        }
    }
    return (yloc){0, 0};
}

/*
 * Where a value sits, for messages. A mapping's field prints as
 * "auth.jwt.clock_skew_s (line 7:19): ..."; a field of a list entry as
 * "keys.yaml entry 3 (line 12:5): roles: ...".
 */
typedef struct yscope {
    char name[320];
    bool entry;
    ydoc *doc;
} yscope;

typedef struct yfield {
    const yscope *scope;
    const char *name;    /* the key; NULL: the scope's own node */
    struct fy_node *key; /* NULL when absent or unnamed */
    struct fy_node *val; /* NULL when absent */
} yfield;

static mcp_status vferr(mcp_err *err, mcp_status st, const yfield *f, const char *fmt, va_list ap)
{
    char msg[600];
    vsnprintf(msg, sizeof msg, fmt, ap);
    yloc at = node_loc(f->val);
    if (!at.line) at = node_loc(f->key);
    char where[48] = "";
    if (at.line) snprintf(where, sizeof where, " (line %d:%d)", at.line, at.col);
    const char *scope = f->scope->name;
    if (!f->name) return mcp_err_set(err, st, "%s%s: %s", scope, where, msg);
    if (f->scope->entry) return mcp_err_set(err, st, "%s%s: %s: %s", scope, where, f->name, msg);
    return mcp_err_set(err, st, "%s%s%s%s: %s", scope, scope[0] ? "." : "", f->name, where, msg);
}

static mcp_status ferr(mcp_err *err, const yfield *f, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static mcp_status ferr(mcp_err *err, const yfield *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mcp_status st = vferr(err, MCP_STATUS_INVALID_ARGUMENT, f, fmt, ap);
    va_end(ap);
    return st;
}

static mcp_status ferr_status(mcp_err *err, mcp_status st, const yfield *f, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mcp_status ferr_status(mcp_err *err, mcp_status st, const yfield *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    st = vferr(err, st, f, fmt, ap);
    va_end(ap);
    return st;
}

/* The scope of a mapping field's value ("auth" + "jwt" -> "auth.jwt"). */
static void scope_child(yscope *out, const yfield *f)
{
    const char *parent = f->scope->name;
    snprintf(out->name, sizeof out->name, "%.200s%s%.100s", parent, parent[0] ? "." : "", f->name ? f->name : "");
    out->entry = false;
    out->doc = f->scope->doc;
}

static void scope_entry(yscope *out, ydoc *doc, const char *list, int index)
{
    snprintf(out->name, sizeof out->name, "%.256s entry %d", list, index);
    out->entry = true;
    out->doc = doc;
}

static bool is_plain_null(struct fy_node *n)
{
    if (!n) return true;
    if (!fy_node_is_scalar(n) || fy_node_is_alias(n) || fy_node_get_style(n) != FYNS_PLAIN) return false;
    if (fy_node_get_tag_token(n)) return false;
    size_t len = 0;
    const char *s = fy_node_get_scalar(n, &len);
    if (!s || len == 0) return true;
    return (len == 1 && s[0] == '~') || (len == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

static bool field_null(const yfield *f) { return is_plain_null(f->val); }

/* Refuses aliases and tags, which no part of the access rules needs. */
static mcp_status want_plain_node(mcp_err *err, const yfield *f, const char *expected)
{
    struct fy_node *n = f->val;
    if (n && fy_node_is_alias(n)) return ferr(err, f, "YAML aliases are not accepted here; write the value out (%s)", expected);
    if (n && fy_node_get_tag_token(n)) return ferr(err, f, "YAML tags are not accepted here; write a plain value (%s)", expected);
    return MCP_STATUS_OK;
}

/* The text of a scalar value (owned by the document). */
static mcp_status want_text(mcp_err *err, const yfield *f, const char *expected, const char **out, size_t *len)
{
    mcp_status st = want_plain_node(err, f, expected);
    if (st != MCP_STATUS_OK) return st;
    if (field_null(f)) return ferr(err, f, "expected %s, got nothing", expected);
    if (fy_node_is_mapping(f->val)) return ferr(err, f, "expected %s, got a mapping", expected);
    if (fy_node_is_sequence(f->val)) return ferr(err, f, "expected %s, got a list", expected);
    const char *s = scalar_text(f->scope->doc, f->val, len);
    if (!s) return ferr(err, f, "expected %s", expected);
    if (memchr(s, '\0', *len)) return ferr(err, f, "expected %s; the value holds a NUL byte", expected);
    *out = s;
    return MCP_STATUS_OK;
}

/* A non-empty string of at most max bytes, copied into buf (cap > max). */
static mcp_status want_string(mcp_err *err, const yfield *f, const char *expected, size_t max, char *buf, size_t cap)
{
    const char *s = NULL;
    size_t len = 0;
    mcp_status st = want_text(err, f, expected, &s, &len);
    if (st != MCP_STATUS_OK) return st;
    if (len == 0) return ferr(err, f, "expected %s, got an empty string", expected);
    if (len > max || len >= cap) return ferr(err, f, "is longer than %zu bytes", max);
    memcpy(buf, s, len);
    buf[len] = '\0';
    return MCP_STATUS_OK;
}

static mcp_status want_string_dup(mcp_err *err, const yfield *f, const char *expected, size_t max, char **out)
{
    const char *s = NULL;
    size_t len = 0;
    mcp_status st = want_text(err, f, expected, &s, &len);
    if (st != MCP_STATUS_OK) return st;
    if (len == 0) return ferr(err, f, "expected %s, got an empty string", expected);
    if (len > max) return ferr(err, f, "is longer than %zu bytes", max);
    char *copy = mcp_malloc(len + 1);
    if (!copy) return ferr_status(err, MCP_STATUS_OUT_OF_MEMORY, f, "out of memory");
    memcpy(copy, s, len);
    copy[len] = '\0';
    mcp_free(*out);
    *out = copy;
    return MCP_STATUS_OK;
}

/* Decimal text (no YAML hex or octal), whole. */
static bool text_int(const char *s, size_t len, int64_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    size_t i = buf[0] == '+' || buf[0] == '-';
    if (i == len) return false;
    for (size_t k = i; k < len; k++)
        if (buf[k] < '0' || buf[k] > '9') return false;
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno) return false;
    *out = v;
    return true;
}

static bool text_number(const char *s, size_t len, double *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    for (size_t k = 0; k < len; k++) {
        char c = buf[k];
        if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')) return false;
    }
    char *end;
    double v = strtod(buf, &end);
    if (*end || !isfinite(v)) return false;
    *out = v;
    return true;
}

static mcp_status want_int(mcp_err *err, const yfield *f, int64_t lo, int64_t hi, int64_t *out)
{
    const char *s = NULL;
    size_t len = 0;
    mcp_status st = want_text(err, f, "an integer", &s, &len);
    if (st != MCP_STATUS_OK) return st;
    int64_t v = 0;
    if (!text_int(s, len, &v)) return ferr(err, f, "expected an integer");
    if (v < lo || v > hi) return ferr(err, f, "must be %lld to %lld", (long long)lo, (long long)hi);
    *out = v;
    return MCP_STATUS_OK;
}

static mcp_status want_number(mcp_err *err, const yfield *f, double lo, double hi, double *out)
{
    const char *s = NULL;
    size_t len = 0;
    mcp_status st = want_text(err, f, "a number", &s, &len);
    if (st != MCP_STATUS_OK) return st;
    double v = 0;
    if (!text_number(s, len, &v)) return ferr(err, f, "expected a number");
    if (v < lo || v > hi) return ferr(err, f, "must be %.15g to %.15g", lo, hi);
    *out = v;
    return MCP_STATUS_OK;
}

static mcp_status want_bool(mcp_err *err, const yfield *f, bool *out)
{
    const char *s = NULL;
    size_t len = 0;
    mcp_status st = want_text(err, f, "true or false", &s, &len);
    if (st != MCP_STATUS_OK) return st;
    if ((len == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "True", 4) || !memcmp(s, "TRUE", 4)))) *out = true;
    else if (len == 5 && (!memcmp(s, "false", 5) || !memcmp(s, "False", 5) || !memcmp(s, "FALSE", 5))) *out = false;
    else return ferr(err, f, "expected true or false");
    return MCP_STATUS_OK;
}

static mcp_status want_seq(mcp_err *err, const yfield *f, const char *expected, int max, int *count)
{
    mcp_status st = want_plain_node(err, f, expected);
    if (st != MCP_STATUS_OK) return st;
    if (!f->val || !fy_node_is_sequence(f->val)) return ferr(err, f, "expected %s", expected);
    int n = fy_node_sequence_item_count(f->val);
    if (n > max) return ferr(err, f, "has %d items; at most %d are allowed", n, max);
    *count = n;
    return MCP_STATUS_OK;
}

/* A mapping's key text, for a key that is a plain or quoted scalar. */
static bool key_text(ydoc *doc, struct fy_node *key, const char **s, size_t *len)
{
    *s = "";
    *len = 0;
    if (!key || !fy_node_is_scalar(key) || fy_node_is_alias(key) || fy_node_get_tag_token(key)) return false;
    const char *text = scalar_text(doc, key, len);
    if (!text || memchr(text, '\0', *len)) {
        *len = 0;
        return false;
    }
    *s = text;
    return true;
}

/*
 * Collects a mapping's fields: out[i] for keys[i] (val NULL when absent).
 * A null value counts as an empty mapping. An unknown key is an error that
 * names it, so a typo never silently turns a check off.
 */
static mcp_status map_fields(mcp_err *err, const yfield *f, const yscope *scope, const char *const *keys, int nkeys,
                             const char *known_text, yfield *out)
{
    for (int i = 0; i < nkeys; i++) out[i] = (yfield){.scope = scope, .name = keys[i]};
    if (field_null(f)) return MCP_STATUS_OK;
    mcp_status st = want_plain_node(err, f, "a mapping");
    if (st != MCP_STATUS_OK) return st;
    if (!fy_node_is_mapping(f->val)) return ferr(err, f, "expected a mapping (key: value)");
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(f->val, &it))) {
        struct fy_node *key = fy_node_pair_key(p);
        yfield at = {.scope = scope, .key = key};
        const char *k = NULL;
        size_t klen = 0;
        if (!key_text(scope->doc, key, &k, &klen)) return ferr(err, &at, "keys must be plain strings");
        int idx = -1;
        for (int i = 0; i < nkeys && idx < 0; i++)
            if (strlen(keys[i]) == klen && memcmp(keys[i], k, klen) == 0) idx = i;
        if (idx < 0)
            return ferr(err, &at, "unknown key '%.*s' (known: %s)", (int)(klen > 64 ? 64 : klen), k, known_text);
        out[idx].key = key;
        out[idx].val = fy_node_pair_value(p);
    }
    return MCP_STATUS_OK;
}

/* ---- files the config names ---- */

typedef struct auth_build {
    mcp_auth *a;
    const char *base_dir;
    mcp_err *err;
    char keys_file_label[4096]; /* api_keys_file as written */
} auth_build;

static char *path_resolve(const char *base_dir, const char *rel)
{
    if (rel[0] == '/' || !base_dir || !base_dir[0]) return mcp_strdup(rel);
    size_t bl = strlen(base_dir), rl = strlen(rel);
    char *p = mcp_malloc(bl + 1 + rl + 1);
    if (!p) return NULL;
    memcpy(p, base_dir, bl);
    p[bl] = '/';
    memcpy(p + bl + 1, rel, rl + 1);
    return p;
}

/* Reads a regular file of at most max bytes. Messages name the file and
 * never quote what it holds. */
static mcp_status read_bounded(const char *path, size_t max, uint8_t **data, size_t *len, char *msg, size_t cap)
{
    *data = NULL;
    *len = 0;
    mcp_err inner = {msg, cap};
    FILE *fp;
    if (mcp_file_open_regular(path, &fp, &inner) != MCP_STATUS_OK) return MCP_STATUS_IO_ERROR;
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || sb.st_size < 0 || (uint64_t)sb.st_size > max) {
        fclose(fp);
        snprintf(msg, cap, "'%s' is larger than %zu bytes", path, max);
        return MCP_STATUS_IO_ERROR;
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = mcp_malloc(n + 1);
    if (!buf) {
        fclose(fp);
        snprintf(msg, cap, "out of memory reading '%s'", path);
        return MCP_STATUS_OUT_OF_MEMORY;
    }
    size_t got = n ? fread(buf, 1, n, fp) : 0;
    fclose(fp);
    if (got != n) {
        mcp_free(buf);
        snprintf(msg, cap, "cannot read '%s': short read", path);
        return MCP_STATUS_IO_ERROR;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return MCP_STATUS_OK;
}

/* Reads the file a field names (relative to base_dir). */
static mcp_status read_named_file(auth_build *b, const yfield *f, size_t max, char **path, uint8_t **data, size_t *len)
{
    char rel[4096];
    mcp_status st = want_string(b->err, f, "a file name", sizeof rel - 1, rel, sizeof rel);
    if (st != MCP_STATUS_OK) return st;
    *path = path_resolve(b->base_dir, rel);
    if (!*path) return ferr_status(b->err, MCP_STATUS_OUT_OF_MEMORY, f, "out of memory");
    char msg[600];
    st = read_bounded(*path, max, data, len, msg, sizeof msg);
    if (st != MCP_STATUS_OK) return ferr_status(b->err, st, f, "%s", msg);
    return MCP_STATUS_OK;
}

/* ---- API keys ---- */

enum { KE_SHA256, KE_TENANT, KE_SUBJECT, KE_ROLES, KE_COUNT };
static const char *const key_entry_keys[KE_COUNT] = {"sha256", "tenant", "subject", "roles"};
#define KEY_ENTRY_KEYS_TEXT "sha256, tenant, subject, roles"

static mcp_status want_sha256(mcp_err *err, const yfield *f, uint8_t out[AUTH_HASH_LEN])
{
    const char *s = NULL;
    size_t len = 0;
    mcp_status st = want_text(err, f, "64 hex digits (the SHA-256 of the key)", &s, &len);
    if (st != MCP_STATUS_OK) return st;
    if (len != 2 * AUTH_HASH_LEN) return ferr(err, f, "expected 64 hex digits (the SHA-256 of the key), got %zu characters", len);
    for (size_t i = 0; i < AUTH_HASH_LEN; i++) {
        int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return ferr(err, f, "expected 64 hex digits (the SHA-256 of the key)");
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return MCP_STATUS_OK;
}

/* A list of role names as bits; an unknown one is an error. */
static mcp_status want_roles(mcp_err *err, const yfield *f, unsigned *roles)
{
    int n = 0;
    mcp_status st = want_seq(err, f, "a list of roles (" ROLE_NAMES_TEXT ")", 64, &n);
    if (st != MCP_STATUS_OK) return st;
    if (n == 0) return ferr(err, f, "needs at least one role (" ROLE_NAMES_TEXT ")");
    *roles = 0;
    void *it = NULL;
    struct fy_node *item;
    while ((item = fy_node_sequence_iterate(f->val, &it))) {
        yfield r = {.scope = f->scope, .name = f->name, .key = f->key, .val = item};
        const char *s = NULL;
        size_t len = 0;
        st = want_text(err, &r, "a role name", &s, &len);
        if (st != MCP_STATUS_OK) return st;
        unsigned bit = role_parse(s, len);
        if (!bit) return ferr(err, &r, "unknown role '%.*s' (known: " ROLE_NAMES_TEXT ")", (int)(len > 64 ? 64 : len), s);
        *roles |= bit;
    }
    return MCP_STATUS_OK;
}

static mcp_status key_slot(auth_build *b, const yfield *f, auth_key **out)
{
    mcp_auth *a = b->a;
    if (a->n_keys >= AUTH_KEYS_MAX) return ferr(b->err, f, "more than %d API keys", AUTH_KEYS_MAX);
    if (a->n_keys == a->cap_keys) {
        int cap = a->cap_keys ? a->cap_keys * 2 : 16;
        if (cap > AUTH_KEYS_MAX) cap = AUTH_KEYS_MAX;
        auth_key *k = mcp_realloc(a->keys, (size_t)cap * sizeof *k);
        if (!k) return ferr_status(b->err, MCP_STATUS_OUT_OF_MEMORY, f, "out of memory");
        a->keys = k;
        a->cap_keys = cap;
    }
    *out = &a->keys[a->n_keys];
    memset(*out, 0, sizeof **out);
    return MCP_STATUS_OK;
}

static mcp_status parse_key_entry(auth_build *b, ydoc *doc, struct fy_node *n, const char *list, int index,
                                  bool from_file)
{
    yscope scope;
    scope_entry(&scope, doc, list, index);
    yfield self = {.scope = &scope, .val = n};
    if (field_null(&self)) return ferr(b->err, &self, "expected a mapping with sha256, tenant, subject and roles");
    yfield f[KE_COUNT];
    mcp_status st = map_fields(b->err, &self, &scope, key_entry_keys, KE_COUNT, KEY_ENTRY_KEYS_TEXT, f);
    if (st != MCP_STATUS_OK) return st;
    auth_key *k = NULL;
    if ((st = key_slot(b, &self, &k)) != MCP_STATUS_OK) return st;
    if (!f[KE_SHA256].val) return ferr(b->err, &self, "sha256 is required (the SHA-256 of the key, 64 hex digits)");
    if ((st = want_sha256(b->err, &f[KE_SHA256], k->hash)) != MCP_STATUS_OK) return st;
    if (!f[KE_ROLES].val) return ferr(b->err, &self, "roles is required (" ROLE_NAMES_TEXT ")");
    if ((st = want_roles(b->err, &f[KE_ROLES], &k->roles)) != MCP_STATUS_OK) return st;
    bool admin = k->roles & MCP_ROLE_ADMIN;
    if (f[KE_TENANT].val) {
        st = want_string(b->err, &f[KE_TENANT], "a tenant name", MCP_AUTH_TENANT_MAX, k->tenant, sizeof k->tenant);
        if (st != MCP_STATUS_OK) return st;
        if (!tenant_valid(k->tenant, strlen(k->tenant)))
            return ferr(b->err, &f[KE_TENANT], "'%s' is not a valid tenant name (" TENANT_RULE ")", k->tenant);
    } else if (!admin) {
        return ferr(b->err, &self, "tenant is required (every role but admin acts within a tenant)");
    }
    if (f[KE_SUBJECT].val) {
        st = want_string(b->err, &f[KE_SUBJECT], "a subject", MCP_AUTH_SUBJECT_MAX, k->subject, sizeof k->subject);
        if (st != MCP_STATUS_OK) return st;
        if (!subject_valid(k->subject, strlen(k->subject)))
            return ferr(b->err, &f[KE_SUBJECT], "must not hold control characters");
    } else {
        char hex[2 * AUTH_HASH_LEN + 1];
        hex_encode(k->hash, AUTH_HASH_LEN, hex);
        snprintf(k->subject, sizeof k->subject, "key-%.8s", hex);
    }
    yloc at = node_loc(n);
    k->from_file = from_file;
    k->entry = index;
    k->line = at.line;
    k->col = at.col;
    b->a->n_keys++;
    return MCP_STATUS_OK;
}

static mcp_status parse_key_list(auth_build *b, const yfield *f, const char *list, bool from_file)
{
    int n = 0;
    mcp_status st = want_seq(b->err, f, "a list of API key entries", AUTH_KEYS_MAX, &n);
    if (st != MCP_STATUS_OK) return st;
    void *it = NULL;
    struct fy_node *item;
    for (int i = 1; (item = fy_node_sequence_iterate(f->val, &it)); i++)
        if ((st = parse_key_entry(b, f->scope->doc, item, list, i, from_file)) != MCP_STATUS_OK) return st;
    return MCP_STATUS_OK;
}

/* The keys file: a list of entries, or a mapping whose `keys` is one. */
static mcp_status parse_keys_doc(auth_build *b, ydoc *d)
{
    struct fy_node *root = d->doc ? fy_document_root(d->doc) : NULL;
    const char *label = b->keys_file_label;
    yscope top = {.entry = false, .doc = d};
    snprintf(top.name, sizeof top.name, "%.256s", label);
    yfield self = {.scope = &top, .val = root};
    if (root && fy_node_is_mapping(root) && !fy_node_get_tag_token(root)) {
        static const char *const keys[] = {"keys"};
        yfield f;
        mcp_status st = map_fields(b->err, &self, &top, keys, 1, "keys", &f);
        if (st != MCP_STATUS_OK) return st;
        if (!f.val) return ferr(b->err, &self, "expected a list of key entries, or 'keys:' holding one");
        yfield list = {.scope = &top, .val = f.val, .key = f.key};
        return parse_key_list(b, &list, label, true);
    }
    if (!root) return MCP_STATUS_OK;
    return parse_key_list(b, &self, label, true);
}

static mcp_status parse_keys_file(auth_build *b, const yfield *f)
{
    char *path = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    mcp_status st = want_string(b->err, f, "a file name", sizeof b->keys_file_label - 1, b->keys_file_label,
                                sizeof b->keys_file_label);
    if (st == MCP_STATUS_OK) st = read_named_file(b, f, AUTH_KEYS_FILE_MAX_BYTES, &path, &data, &len);
    if (st == MCP_STATUS_OK) {
        ydoc d;
        st = ydoc_load(&d, (const char *)data, len, AUTH_KEYS_FILE_MAX_BYTES, b->keys_file_label, b->err);
        if (st == MCP_STATUS_OK) st = parse_keys_doc(b, &d);
        ydoc_free(&d);
    }
    mcp_free(data);
    mcp_free(path);
    return st;
}

static int key_cmp(const void *x, const void *y)
{
    const auth_key *p = x, *q = y;
    int c = memcmp(p->hash, q->hash, AUTH_HASH_LEN);
    if (c) return c;
    if (p->from_file != q->from_file) return p->from_file ? 1 : -1;
    return (p->entry > q->entry) - (p->entry < q->entry);
}

/* Sorts the keys for lookups; the same key twice is an error that names
 * both places. */
static mcp_status keys_finish(auth_build *b)
{
    mcp_auth *a = b->a;
    if (a->n_keys > 1) qsort(a->keys, (size_t)a->n_keys, sizeof *a->keys, key_cmp);
    for (int i = 1; i < a->n_keys; i++) {
        const auth_key *first = &a->keys[i - 1], *again = &a->keys[i];
        if (memcmp(first->hash, again->hash, AUTH_HASH_LEN) != 0) continue;
        const char *again_list = again->from_file ? b->keys_file_label : "auth.api_keys";
        const char *first_list = first->from_file ? b->keys_file_label : "auth.api_keys";
        return mcp_err_set(b->err, MCP_STATUS_INVALID_ARGUMENT,
                           "%s entry %d (line %d:%d): sha256: the same key as %s entry %d (duplicate sha256)", again_list,
                           again->entry, again->line, again->col, first_list, first->entry);
    }
    return MCP_STATUS_OK;
}

/* ---- client certificates ---- */

enum { CE_CN, CE_TENANT, CE_SUBJECT, CE_ROLES, CE_COUNT };
static const char *const cert_entry_keys[CE_COUNT] = {"cn", "tenant", "subject", "roles"};
#define CERT_ENTRY_KEYS_TEXT "cn, tenant, subject, roles"
#define AUTH_CERTS_MAX 4096

static mcp_status parse_cert_entry(auth_build *b, const yfield *self, auth_cert *c)
{
    yscope scope;
    scope_child(&scope, self);
    yfield f[CE_COUNT];
    mcp_status st = map_fields(b->err, self, &scope, cert_entry_keys, CE_COUNT, CERT_ENTRY_KEYS_TEXT, f);
    if (st != MCP_STATUS_OK) return st;
    if (!f[CE_CN].val) return ferr(b->err, self, "cn is required (the certificate subject's common name)");
    st = want_string(b->err, &f[CE_CN], "a common name", MCP_AUTH_SUBJECT_MAX, c->cn, sizeof c->cn);
    if (st != MCP_STATUS_OK) return st;
    if (!c->cn[0] || !subject_valid(c->cn, strlen(c->cn))) return ferr(b->err, &f[CE_CN], "must be a non-empty name without control characters");
    if (!f[CE_ROLES].val) return ferr(b->err, self, "roles is required (" ROLE_NAMES_TEXT ")");
    if ((st = want_roles(b->err, &f[CE_ROLES], &c->roles)) != MCP_STATUS_OK) return st;
    if (f[CE_TENANT].val) {
        st = want_string(b->err, &f[CE_TENANT], "a tenant name", MCP_AUTH_TENANT_MAX, c->tenant, sizeof c->tenant);
        if (st != MCP_STATUS_OK) return st;
        if (!tenant_valid(c->tenant, strlen(c->tenant)))
            return ferr(b->err, &f[CE_TENANT], "'%s' is not a valid tenant name (" TENANT_RULE ")", c->tenant);
    } else if (!(c->roles & MCP_ROLE_ADMIN)) {
        return ferr(b->err, self, "tenant is required (every role but admin acts within a tenant)");
    }
    if (f[CE_SUBJECT].val) {
        st = want_string(b->err, &f[CE_SUBJECT], "a subject", MCP_AUTH_SUBJECT_MAX, c->subject, sizeof c->subject);
        if (st != MCP_STATUS_OK) return st;
        if (!subject_valid(c->subject, strlen(c->subject))) return ferr(b->err, &f[CE_SUBJECT], "must not hold control characters");
    } else {
        snprintf(c->subject, sizeof c->subject, "%s", c->cn);
    }
    for (int i = 0; i < b->a->n_certs; i++)
        if (!strcmp(b->a->certs[i].cn, c->cn)) return ferr(b->err, &f[CE_CN], "common name '%s' is listed twice", c->cn);
    return MCP_STATUS_OK;
}

static mcp_status parse_certs(auth_build *b, const yfield *f)
{
    int n = 0;
    mcp_status st = want_seq(b->err, f, "a list of client certificate entries", AUTH_CERTS_MAX, &n);
    if (st != MCP_STATUS_OK) return st;
    b->a->certs = mcp_calloc(n > 0 ? (size_t)n : 1, sizeof *b->a->certs);
    if (!b->a->certs) return ferr_status(b->err, MCP_STATUS_OUT_OF_MEMORY, f, "out of memory");
    void *it = NULL;
    struct fy_node *item;
    for (int i = 1; (item = fy_node_sequence_iterate(f->val, &it)); i++) {
        yscope scope;
        scope_entry(&scope, f->scope->doc, "auth.client_certificates", i);
        yfield self = {.scope = &scope, .val = item};
        if ((st = parse_cert_entry(b, &self, &b->a->certs[b->a->n_certs])) != MCP_STATUS_OK) return st;
        b->a->n_certs++;
    }
    return MCP_STATUS_OK;
}

/* ---- JWT settings ---- */

enum { JW_ISSUER, JW_AUDIENCE, JW_HS256, JW_RS256, JW_TENANT_CLAIM, JW_ROLES_CLAIM, JW_SKEW, JW_REQUIRE_EXP, JW_COUNT };
static const char *const jwt_keys[JW_COUNT] = {"issuer",       "audience",     "hs256_secret_file", "rs256_public_key_file",
                                               "tenant_claim", "roles_claim",  "clock_skew_s",      "require_exp"};
#define JWT_KEYS_TEXT                                                                                              \
    "issuer, audience, hs256_secret_file, rs256_public_key_file, tenant_claim, roles_claim, clock_skew_s, " \
    "require_exp"

static mcp_status parse_hs256_secret(auth_build *b, const yfield *f)
{
    char *path = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    mcp_status st = read_named_file(b, f, AUTH_SECRET_FILE_MAX_BYTES, &path, &data, &len);
    if (st == MCP_STATUS_OK) {
        size_t n = len;
        while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == '\r')) n--;
        if (n < AUTH_SECRET_MIN) {
            st = ferr(b->err, f, "the secret in '%s' is shorter than %d bytes (not counting trailing newlines)", path,
                      AUTH_SECRET_MIN);
        } else {
            b->a->hs256_secret = data;
            b->a->hs256_secret_len = n;
            data = NULL;
        }
    }
    if (data) {
        OPENSSL_cleanse(data, len);
        mcp_free(data);
    }
    mcp_free(path);
    return st;
}

static mcp_status parse_rs256_key(auth_build *b, const yfield *f)
{
    char *path = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    mcp_status st = read_named_file(b, f, AUTH_PEM_FILE_MAX_BYTES, &path, &data, &len);
    if (st == MCP_STATUS_OK) {
        BIO *bio = BIO_new_mem_buf(data, (int)len);
        EVP_PKEY *key = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
        BIO_free(bio);
        ERR_clear_error();
        if (!key) st = ferr(b->err, f, "'%s' does not hold a PEM public key (BEGIN PUBLIC KEY)", path);
        else if (EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA) st = ferr(b->err, f, "the key in '%s' is not an RSA key", path);
        else if (EVP_PKEY_get_bits(key) < AUTH_RSA_BITS_MIN)
            st = ferr(b->err, f, "the RSA key in '%s' has %d bits; at least %d are needed", path, EVP_PKEY_get_bits(key),
                      AUTH_RSA_BITS_MIN);
        if (st == MCP_STATUS_OK) b->a->rs256_key = key;
        else EVP_PKEY_free(key);
    }
    mcp_free(data);
    mcp_free(path);
    return st;
}

/* A claim's name: printable, no spaces ("tenant", "https://x.example/roles"). */
static mcp_status want_claim_name(mcp_err *err, const yfield *f, char *buf, size_t cap)
{
    mcp_status st = want_string(err, f, "a claim name", AUTH_CLAIM_NAME_MAX, buf, cap);
    if (st != MCP_STATUS_OK) return st;
    for (const char *p = buf; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return ferr(err, f, "a claim name is printable ASCII without spaces");
    return MCP_STATUS_OK;
}

static mcp_status parse_jwt(auth_build *b, const yfield *self)
{
    yscope scope;
    scope_child(&scope, self);
    yfield f[JW_COUNT];
    mcp_status st = map_fields(b->err, self, &scope, jwt_keys, JW_COUNT, JWT_KEYS_TEXT, f);
    if (st != MCP_STATUS_OK) return st;
    mcp_auth *a = b->a;
    if (!f[JW_HS256].val && !f[JW_RS256].val)
        return ferr(b->err, self, "needs hs256_secret_file or rs256_public_key_file (or both)");
    if (f[JW_ISSUER].val && (st = want_string_dup(b->err, &f[JW_ISSUER], "an issuer", AUTH_URI_MAX, &a->issuer)))
        return st;
    if (f[JW_AUDIENCE].val &&
        (st = want_string_dup(b->err, &f[JW_AUDIENCE], "an audience", AUTH_URI_MAX, &a->audience)))
        return st;
    if (f[JW_TENANT_CLAIM].val &&
        (st = want_claim_name(b->err, &f[JW_TENANT_CLAIM], a->tenant_claim, sizeof a->tenant_claim)))
        return st;
    if (f[JW_ROLES_CLAIM].val &&
        (st = want_claim_name(b->err, &f[JW_ROLES_CLAIM], a->roles_claim, sizeof a->roles_claim)))
        return st;
    if (f[JW_SKEW].val && (st = want_int(b->err, &f[JW_SKEW], 0, AUTH_SKEW_MAX, &a->clock_skew_s))) return st;
    if (f[JW_REQUIRE_EXP].val && (st = want_bool(b->err, &f[JW_REQUIRE_EXP], &a->require_exp))) return st;
    if (f[JW_HS256].val && (st = parse_hs256_secret(b, &f[JW_HS256]))) return st;
    if (f[JW_RS256].val && (st = parse_rs256_key(b, &f[JW_RS256]))) return st;
    return MCP_STATUS_OK;
}

/* ---- actions: auth.anonymous and auth.roles ---- */

static mcp_status want_actions(mcp_err *err, const yfield *f, unsigned *actions)
{
    int n = 0;
    mcp_status st = want_seq(err, f, "a list of actions ([] for none)", 64, &n);
    if (st != MCP_STATUS_OK) return st;
    *actions = 0;
    void *it = NULL;
    struct fy_node *item;
    while ((item = fy_node_sequence_iterate(f->val, &it))) {
        yfield e = {.scope = f->scope, .name = f->name, .key = f->key, .val = item};
        char name[32];
        const char *s = NULL;
        size_t len = 0;
        if ((st = want_text(err, &e, "an action name", &s, &len)) != MCP_STATUS_OK) return st;
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), s);
        int act = len < sizeof name ? mcp_action_parse(name) : -1;
        if (act < 0)
            return ferr(err, &e, "unknown action '%.*s' (known: " ACTION_NAMES_TEXT ")", (int)(len > 64 ? 64 : len), s);
        *actions |= ACT_BIT(act);
    }
    return MCP_STATUS_OK;
}

static mcp_status parse_roles(auth_build *b, const yfield *self)
{
    if (field_null(self)) return MCP_STATUS_OK;
    mcp_status st = want_plain_node(b->err, self, "a mapping of role: [actions]");
    if (st != MCP_STATUS_OK) return st;
    if (!fy_node_is_mapping(self->val)) return ferr(b->err, self, "expected a mapping of role: [actions]");
    yscope scope;
    scope_child(&scope, self);
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(self->val, &it))) {
        yfield at = {.scope = &scope, .key = fy_node_pair_key(p)};
        const char *k = NULL;
        size_t klen = 0;
        if (!key_text(scope.doc, at.key, &k, &klen)) return ferr(b->err, &at, "keys must be role names");
        unsigned bit = role_parse(k, klen);
        if (!bit)
            return ferr(b->err, &at, "unknown role '%.*s' (configurable: operator, invoker, viewer)",
                        (int)(klen > 64 ? 64 : klen), k);
        if (bit == MCP_ROLE_ADMIN) return ferr(b->err, &at, "admin always has every action; it cannot be configured");
        yfield val = {.scope = &scope, .name = role_table[role_index(bit)].name, .key = at.key, .val = fy_node_pair_value(p)};
        if ((st = want_actions(b->err, &val, &b->a->role_actions[role_index(bit)])) != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* ---- the auth section ---- */

enum { AU_KEYS_FILE, AU_KEYS, AU_JWT, AU_ANONYMOUS, AU_ROLES, AU_CERTS, AU_COUNT };
static const char *const auth_keys[AU_COUNT] = {"api_keys_file", "api_keys", "jwt", "anonymous", "roles", "client_certificates"};
#define AUTH_KEYS_TEXT "api_keys_file, api_keys, jwt, anonymous, roles, client_certificates"

static mcp_status parse_auth(auth_build *b, const yfield *self)
{
    yscope scope;
    scope_child(&scope, self);
    yfield f[AU_COUNT];
    mcp_status st = map_fields(b->err, self, &scope, auth_keys, AU_COUNT, AUTH_KEYS_TEXT, f);
    if (st != MCP_STATUS_OK) return st;
    b->a->enabled = true;
    if (f[AU_KEYS].val && (st = parse_key_list(b, &f[AU_KEYS], "auth.api_keys", false))) return st;
    if (f[AU_KEYS_FILE].val && (st = parse_keys_file(b, &f[AU_KEYS_FILE]))) return st;
    if (f[AU_JWT].val && (st = parse_jwt(b, &f[AU_JWT]))) return st;
    if (f[AU_ANONYMOUS].val) {
        if ((st = want_actions(b->err, &f[AU_ANONYMOUS], &b->a->anonymous_actions))) return st;
        b->a->anonymous_set = true;
    }
    if (f[AU_ROLES].val && (st = parse_roles(b, &f[AU_ROLES]))) return st;
    if (f[AU_CERTS].val && (st = parse_certs(b, &f[AU_CERTS]))) return st;
    return keys_finish(b);
}

/* ---- tenants and shared models ---- */

enum { TE_WEIGHT, TE_MAX_CONCURRENT, TE_RPS, TE_BURST, TE_MAX_QUEUED, TE_TOKENS_PER_S, TE_CLASS, TE_COUNT };
static const char *const tenant_keys[TE_COUNT] = {"weight",     "max_concurrent", "rps",  "burst",
                                                  "max_queued", "tokens_per_s",   "class"};
#define TENANT_KEYS_TEXT "weight, max_concurrent, rps, burst, max_queued, tokens_per_s, class"

static mcp_tenant_limits limits_default(void)
{
    return (mcp_tenant_limits){.weight = 1, .burst = 1, .class_ = MCP_CLASS_NONE};
}

static mcp_status parse_tenant_limits(auth_build *b, const yfield *self, mcp_tenant_limits *lim)
{
    yscope scope;
    scope_child(&scope, self);
    yfield f[TE_COUNT];
    mcp_status st = map_fields(b->err, self, &scope, tenant_keys, TE_COUNT, TENANT_KEYS_TEXT, f);
    if (st != MCP_STATUS_OK) return st;
    *lim = limits_default();
    if (f[TE_WEIGHT].val) {
        if ((st = want_number(b->err, &f[TE_WEIGHT], -HUGE_VAL, HUGE_VAL, &lim->weight))) return st;
        if (!(lim->weight > 0 && lim->weight <= AUTH_WEIGHT_MAX))
            return ferr(b->err, &f[TE_WEIGHT], "must be greater than 0 and at most %g", AUTH_WEIGHT_MAX);
    }
    if (f[TE_MAX_CONCURRENT].val &&
        (st = want_int(b->err, &f[TE_MAX_CONCURRENT], 0, (int64_t)AUTH_LIMIT_MAX, &lim->max_concurrent)))
        return st;
    if (f[TE_RPS].val && (st = want_number(b->err, &f[TE_RPS], 0, AUTH_LIMIT_MAX, &lim->rps))) return st;
    lim->burst = lim->rps > 1 ? lim->rps : 1;
    if (f[TE_BURST].val && (st = want_number(b->err, &f[TE_BURST], 1, AUTH_LIMIT_MAX, &lim->burst))) return st;
    if (f[TE_MAX_QUEUED].val &&
        (st = want_int(b->err, &f[TE_MAX_QUEUED], 0, (int64_t)AUTH_LIMIT_MAX, &lim->max_queued)))
        return st;
    if (f[TE_TOKENS_PER_S].val &&
        (st = want_number(b->err, &f[TE_TOKENS_PER_S], 0, AUTH_LIMIT_MAX, &lim->tokens_per_s)))
        return st;
    if (f[TE_CLASS].val) {
        char name[16];
        const char *s = NULL;
        size_t len = 0;
        if ((st = want_text(b->err, &f[TE_CLASS], "critical, standard or batch", &s, &len))) return st;
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), s);
        if (len >= sizeof name || !class_parse(name, &lim->class_))
            return ferr(b->err, &f[TE_CLASS], "must be critical, standard or batch");
    }
    return MCP_STATUS_OK;
}

static int tenant_cmp(const void *x, const void *y)
{
    return strcmp(((const auth_tenant *)x)->name, ((const auth_tenant *)y)->name);
}

static mcp_status parse_tenants(auth_build *b, const yfield *self)
{
    if (field_null(self)) return MCP_STATUS_OK;
    mcp_status st = want_plain_node(b->err, self, "a mapping of tenant: limits");
    if (st != MCP_STATUS_OK) return st;
    if (!fy_node_is_mapping(self->val)) return ferr(b->err, self, "expected a mapping of tenant: limits");
    int n = fy_node_mapping_item_count(self->val);
    if (n > AUTH_NAMES_MAX) return ferr(b->err, self, "names %d tenants; at most %d are allowed", n, AUTH_NAMES_MAX);
    mcp_auth *a = b->a;
    a->tenants = mcp_calloc(n > 0 ? (size_t)n : 1, sizeof *a->tenants);
    if (!a->tenants) return ferr_status(b->err, MCP_STATUS_OUT_OF_MEMORY, self, "out of memory");
    yscope scope;
    scope_child(&scope, self);
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(self->val, &it)) && a->n_tenants < n) {
        yfield at = {.scope = &scope, .key = fy_node_pair_key(p)};
        const char *k = NULL;
        size_t klen = 0;
        if (!key_text(scope.doc, at.key, &k, &klen) || !tenant_valid(k, klen))
            return ferr(b->err, &at, "'%.*s' is not a valid tenant name (" TENANT_RULE ")", (int)(klen > 64 ? 64 : klen), k);
        auth_tenant *t = &a->tenants[a->n_tenants];
        memcpy(t->name, k, klen);
        t->name[klen] = '\0';
        yfield val = {.scope = &scope, .name = t->name, .key = at.key, .val = fy_node_pair_value(p)};
        if ((st = parse_tenant_limits(b, &val, &t->limits)) != MCP_STATUS_OK) return st;
        a->n_tenants++;
    }
    qsort(a->tenants, (size_t)a->n_tenants, sizeof *a->tenants, tenant_cmp);
    for (int i = 1; i < a->n_tenants; i++)
        if (strcmp(a->tenants[i - 1].name, a->tenants[i].name) == 0)
            return ferr(b->err, self, "names tenant '%s' twice", a->tenants[i].name);
    return MCP_STATUS_OK;
}

static int shared_cmp(const void *x, const void *y)
{
    return strcmp(((const auth_shared *)x)->name, ((const auth_shared *)y)->name);
}

static mcp_status parse_shared_entry(auth_build *b, const yfield *f, auth_shared *s)
{
    int n = 0;
    mcp_status st = want_seq(b->err, f, "a list of tenants", AUTH_NAMES_MAX, &n);
    if (st != MCP_STATUS_OK) return st;
    s->tenants = mcp_calloc(n > 0 ? (size_t)n : 1, sizeof *s->tenants);
    if (!s->tenants) return ferr_status(b->err, MCP_STATUS_OUT_OF_MEMORY, f, "out of memory");
    void *it = NULL;
    struct fy_node *item;
    while ((item = fy_node_sequence_iterate(f->val, &it)) && s->n_tenants < n) {
        yfield e = {.scope = f->scope, .name = f->name, .key = f->key, .val = item};
        const char *t = NULL;
        size_t len = 0;
        if ((st = want_text(b->err, &e, "a tenant name", &t, &len)) != MCP_STATUS_OK) return st;
        if (!tenant_valid(t, len))
            return ferr(b->err, &e, "'%.*s' is not a valid tenant name (" TENANT_RULE ")", (int)(len > 64 ? 64 : len), t);
        memcpy(s->tenants[s->n_tenants], t, len);
        s->tenants[s->n_tenants][len] = '\0';
        s->n_tenants++;
    }
    return MCP_STATUS_OK;
}

static mcp_status parse_shared(auth_build *b, const yfield *self)
{
    if (field_null(self)) return MCP_STATUS_OK;
    mcp_status st = want_plain_node(b->err, self, "a mapping of model: [tenants]");
    if (st != MCP_STATUS_OK) return st;
    if (!fy_node_is_mapping(self->val)) return ferr(b->err, self, "expected a mapping of model: [tenants]");
    int n = fy_node_mapping_item_count(self->val);
    if (n > AUTH_NAMES_MAX) return ferr(b->err, self, "names %d models; at most %d are allowed", n, AUTH_NAMES_MAX);
    mcp_auth *a = b->a;
    a->shared = mcp_calloc(n > 0 ? (size_t)n : 1, sizeof *a->shared);
    if (!a->shared) return ferr_status(b->err, MCP_STATUS_OUT_OF_MEMORY, self, "out of memory");
    yscope scope;
    scope_child(&scope, self);
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(self->val, &it)) && a->n_shared < n) {
        yfield at = {.scope = &scope, .key = fy_node_pair_key(p)};
        const char *k = NULL;
        size_t klen = 0;
        if (!key_text(scope.doc, at.key, &k, &klen) || !shared_model_name_valid(k, klen))
            return ferr(b->err, &at,
                        "'%.*s' is not a shared model's name (no '/': 1 to 128 of A-Z a-z 0-9 _ . -, not '.' or '..')",
                        (int)(klen > 128 ? 128 : klen), k);
        auth_shared *s = &a->shared[a->n_shared++];
        memcpy(s->name, k, klen);
        s->name[klen] = '\0';
        yfield val = {.scope = &scope, .name = s->name, .key = at.key, .val = fy_node_pair_value(p)};
        if ((st = parse_shared_entry(b, &val, s)) != MCP_STATUS_OK) return st;
    }
    qsort(a->shared, (size_t)a->n_shared, sizeof *a->shared, shared_cmp);
    for (int i = 1; i < a->n_shared; i++)
        if (strcmp(a->shared[i - 1].name, a->shared[i].name) == 0)
            return ferr(b->err, self, "names model '%s' twice", a->shared[i].name);
    return MCP_STATUS_OK;
}

/* ---- the config ---- */

static const struct {
    const char *name;
    mcp_status (*parse)(auth_build *b, const yfield *self);
} sections[] = {{"auth", parse_auth}, {"tenants", parse_tenants}, {"shared_models", parse_shared}};

/* Reads `auth`, `tenants` and `shared_models`; other keys belong to the
 * rest of the server. */
static mcp_status parse_root(auth_build *b, ydoc *d, const char *what)
{
    struct fy_node *root = d->doc ? fy_document_root(d->doc) : NULL;
    if (!root) return MCP_STATUS_OK;
    yscope top = {.name = "", .doc = d};
    if (!fy_node_is_mapping(root) || fy_node_get_tag_token(root)) {
        yscope whole = {.doc = d};
        snprintf(whole.name, sizeof whole.name, "%.300s", what);
        yfield self = {.scope = &whole, .val = root};
        return ferr(b->err, &self, "the config must be a mapping (key: value)");
    }
    bool seen[sizeof sections / sizeof sections[0]] = {false};
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(root, &it))) {
        const char *k = NULL;
        size_t klen = 0;
        if (!key_text(d, fy_node_pair_key(p), &k, &klen)) continue;
        for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
            if (strlen(sections[i].name) != klen || memcmp(k, sections[i].name, klen) != 0) continue;
            yfield f = {.scope = &top, .name = sections[i].name, .key = fy_node_pair_key(p), .val = fy_node_pair_value(p)};
            if (seen[i]) return ferr(b->err, &f, "is given twice");
            seen[i] = true;
            mcp_status st = sections[i].parse(b, &f);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    return MCP_STATUS_OK;
}

static mcp_status auth_parse_as(const char *yaml, size_t len, const char *base_dir, const char *what, mcp_auth **out,
                                mcp_err *err)
{
    *out = NULL;
    mcp_auth *a = auth_new();
    if (!a) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "%s: out of memory", what);
    auth_build b = {.a = a, .base_dir = base_dir, .err = err};
    ydoc d;
    mcp_status st = ydoc_load(&d, yaml ? yaml : "", yaml ? len : 0, AUTH_CONFIG_MAX_BYTES, what, err);
    if (st == MCP_STATUS_OK) st = parse_root(&b, &d, what);
    ydoc_free(&d);
    if (st != MCP_STATUS_OK) {
        mcp_auth_destroy(a);
        return st;
    }
    *out = a;
    return MCP_STATUS_OK;
}

mcp_status mcp_auth_parse(const char *yaml, size_t len, const char *base_dir, mcp_auth **out, mcp_err *err)
{
    return auth_parse_as(yaml, len, base_dir, "config", out, err);
}

mcp_status mcp_auth_load(const char *config_path, mcp_auth **out, mcp_err *err)
{
    *out = NULL;
    char msg[600];
    uint8_t *data;
    size_t len;
    mcp_status st = read_bounded(config_path, AUTH_CONFIG_MAX_BYTES, &data, &len, msg, sizeof msg);
    if (st != MCP_STATUS_OK) return mcp_err_set(err, st, "config: %s", msg);
    char *dir = mcp_strdup(config_path);
    if (!dir) {
        mcp_free(data);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "config: out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, strlen(dir) + 1, ".");
    st = auth_parse_as((const char *)data, len, dir, config_path, out, err);
    mcp_free(dir);
    mcp_free(data);
    return st;
}

mcp_status mcp_auth_set_admin_token(mcp_auth *a, const char *token, mcp_err *err)
{
    if (!a) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "admin token: no access rules to add it to");
    size_t len = token ? strnlen(token, MCP_AUTH_TOKEN_MAX + 1) : 0;
    if (len < AUTH_ADMIN_TOKEN_MIN || len > MCP_AUTH_TOKEN_MAX)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the admin token must be %d to %d characters", AUTH_ADMIN_TOKEN_MIN,
                           MCP_AUTH_TOKEN_MAX);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)token[i] <= 0x20 || (unsigned char)token[i] >= 0x7f)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "the admin token must be printable ASCII without spaces");
    if (!sha256(token, len, a->admin_token_hash))
        return mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot hash the admin token (SHA-256 failed)");
    a->admin_token_set = true;
    return MCP_STATUS_OK;
}

/* ---- authentication ---- */

static mcp_status refuse(mcp_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mcp_status refuse(mcp_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mcp_status st = mcp_err_vset(err, MCP_STATUS_UNAUTHENTICATED, fmt, ap);
    va_end(ap);
    return st;
}

/* A credential's text as a message may quote it: short and of a plain
 * alphabet, else NULL (an attacker's bytes stay out of logs). */
static const char *echo_safe(const char *s, size_t len, char *buf, size_t cap)
{
    if (len == 0 || len >= cap || len > 32) return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                  c == '.';
        if (!ok) return NULL;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    return buf;
}

static void identity_fill(mcp_identity *id, const char *via, const char *tenant, const char *subject, unsigned roles)
{
    mcp_identity_anonymous(id);
    id->authenticated = true;
    id->via = via;
    snprintf(id->tenant, sizeof id->tenant, "%s", tenant);
    snprintf(id->subject, sizeof id->subject, "%s", subject);
    id->roles = roles;
}

static mcp_status key_authenticate(const mcp_auth *a, const uint8_t hash[AUTH_HASH_LEN], mcp_identity *id, mcp_err *err)
{
    int lo = 0, hi = a->n_keys - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const auth_key *k = &a->keys[mid];
        int c = memcmp(k->hash, hash, AUTH_HASH_LEN);
        if (c == 0) {
            if (CRYPTO_memcmp(k->hash, hash, AUTH_HASH_LEN) != 0) break;
            identity_fill(id, "api-key", k->tenant, k->subject, k->roles);
            return MCP_STATUS_OK;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return refuse(err, "unknown API key");
}

mcp_status mcp_auth_authenticate_certificate(const mcp_auth *a, const char *cn, mcp_identity *id, mcp_err *err)
{
    mcp_identity_anonymous(id);
    if (!a) a = &auth_none;
    for (int i = 0; cn && i < a->n_certs; i++)
        if (!strcmp(a->certs[i].cn, cn)) {
            identity_fill(id, "certificate", a->certs[i].tenant, a->certs[i].subject, a->certs[i].roles);
            return MCP_STATUS_OK;
        }
    return refuse(err, "the client certificate's subject is not one auth.client_certificates names");
}

static int b64url_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

/*
 * Unpadded base64url (RFC 7515, section 2) into out (room for n * 3 / 4
 * bytes). Refuses '=' padding, characters outside the alphabet, a length
 * that leaves one character over, and leftover bits that are not zero, so
 * each byte string has exactly one text.
 */
static bool b64url_decode(const char *s, size_t n, uint8_t *out, size_t *out_len)
{
    if (n % 4 == 1) return false;
    uint32_t acc = 0;
    int bits = 0;
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64url_value((unsigned char)s[i]);
        if (v < 0) return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[w++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1u;
        }
    }
    if (acc != 0) return false;
    *out_len = w;
    return true;
}

typedef enum jwt_alg { JWT_HS256, JWT_RS256 } jwt_alg;

/* A JWT's parts as they arrived, and the header and signature decoded. */
typedef struct jwt_parts {
    const char *header64, *payload64, *sig64;
    size_t header64_len, payload64_len, sig64_len;
    uint8_t *buf; /* decoded bytes, one allocation */
    uint8_t *sig;
    size_t sig_len;
} jwt_parts;

static mcp_status jwt_decode_json(const char *part, const char *s, size_t n, uint8_t *buf, json_t **out, mcp_err *err)
{
    size_t len = 0;
    if (n == 0 || !b64url_decode(s, n, buf, &len))
        return refuse(err, "JWT %s is malformed: not base64url without '=' padding", part);
    json_error_t jerr;
    json_t *j = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return refuse(err, "JWT %s is malformed: not a JSON object (without duplicate keys)", part);
    }
    *out = j;
    return MCP_STATUS_OK;
}

static void accepted_algs(const mcp_auth *a, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s", a->hs256_secret ? "HS256" : "", a->hs256_secret && a->rs256_key ? ", " : "",
             a->rs256_key ? "RS256" : "");
}

/* The header's alg, typ and crit: which verifier, or why none. */
static mcp_status jwt_header(const mcp_auth *a, json_t *h, jwt_alg *alg, mcp_err *err)
{
    json_t *v = json_object_get(h, "alg");
    if (!v) return refuse(err, "JWT header has no 'alg'");
    if (!json_is_string(v)) return refuse(err, "JWT header's 'alg' is not a string");
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    char accepted[32], echo[40];
    accepted_algs(a, accepted, sizeof accepted);
    if (len == 4 && strncasecmp(s, "none", 4) == 0) return refuse(err, "JWT alg 'none' is refused");
    if (len == 5 && !memcmp(s, "HS256", 5) && a->hs256_secret) *alg = JWT_HS256;
    else if (len == 5 && !memcmp(s, "RS256", 5) && a->rs256_key) *alg = JWT_RS256;
    else if (echo_safe(s, len, echo, sizeof echo)) return refuse(err, "JWT alg '%s' is not accepted (accepted: %s)", echo, accepted);
    else return refuse(err, "JWT alg is not accepted (accepted: %s)", accepted);
    json_t *typ = json_object_get(h, "typ");
    if (typ && !(json_is_string(typ) && strcasecmp(json_string_value(typ), "JWT") == 0))
        return refuse(err, "JWT header's 'typ' must be 'JWT'");
    if (json_object_get(h, "crit")) return refuse(err, "JWT header has 'crit' extensions, which are not supported");
    return MCP_STATUS_OK;
}

static bool hs256_verify(const mcp_auth *a, const uint8_t *data, size_t len, const uint8_t *sig, size_t sig_len)
{
    uint8_t mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (!HMAC(EVP_sha256(), a->hs256_secret, (int)a->hs256_secret_len, data, len, mac, &mac_len)) return false;
    bool ok = mac_len == AUTH_HASH_LEN && sig_len == AUTH_HASH_LEN && CRYPTO_memcmp(mac, sig, AUTH_HASH_LEN) == 0;
    OPENSSL_cleanse(mac, sizeof mac);
    return ok;
}

static bool rs256_verify(const mcp_auth *a, const uint8_t *data, size_t len, const uint8_t *sig, size_t sig_len)
{
    if (sig_len != (size_t)EVP_PKEY_get_size(a->rs256_key)) return false;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, a->rs256_key) == 1 &&
              EVP_DigestVerify(ctx, sig, sig_len, data, len) == 1;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return ok;
}

static bool claim_number(json_t *c, const char *name, bool *present, double *out)
{
    json_t *v = json_object_get(c, name);
    *present = v != NULL;
    if (!v) return true;
    if (!json_is_number(v)) return false;
    *out = json_number_value(v);
    return true;
}

static mcp_status jwt_times(const mcp_auth *a, json_t *c, int64_t now_s, mcp_err *err)
{
    double now = (double)now_s, skew = (double)a->clock_skew_s, exp = 0, nbf = 0, iat = 0;
    bool has_exp, has_nbf, has_iat;
    if (!claim_number(c, "exp", &has_exp, &exp)) return refuse(err, "JWT 'exp' is not a number");
    if (!claim_number(c, "nbf", &has_nbf, &nbf)) return refuse(err, "JWT 'nbf' is not a number");
    if (!claim_number(c, "iat", &has_iat, &iat)) return refuse(err, "JWT 'iat' is not a number");
    if (!has_exp && a->require_exp) return refuse(err, "JWT has no 'exp' (expiry) claim");
    if (has_exp && now >= exp + skew) return refuse(err, "JWT expired");
    if (has_nbf && now + skew < nbf) return refuse(err, "JWT not yet valid");
    return MCP_STATUS_OK;
}

static bool audience_matches(json_t *aud, const char *want)
{
    if (json_is_string(aud)) return strcmp(json_string_value(aud), want) == 0;
    if (!json_is_array(aud)) return false;
    size_t i;
    json_t *v;
    json_array_foreach(aud, i, v) if (json_is_string(v) && strcmp(json_string_value(v), want) == 0) return true;
    return false;
}

static mcp_status jwt_role_name(const char *s, size_t len, unsigned *roles, mcp_err *err)
{
    unsigned bit = role_parse(s, len);
    char echo[40];
    if (!bit) {
        if (echo_safe(s, len, echo, sizeof echo)) return refuse(err, "JWT role '%s' is unknown", echo);
        return refuse(err, "JWT carries an unknown role");
    }
    *roles |= bit;
    return MCP_STATUS_OK;
}

/* The roles claim: a list of names, or one space-separated string. */
static mcp_status jwt_roles(const mcp_auth *a, json_t *c, unsigned *roles, mcp_err *err)
{
    *roles = 0;
    json_t *v = json_object_get(c, a->roles_claim);
    mcp_status st = MCP_STATUS_OK;
    if (json_is_string(v)) {
        const char *s = json_string_value(v), *end = s + json_string_length(v);
        while (s < end && st == MCP_STATUS_OK) {
            while (s < end && *s == ' ') s++;
            const char *w = s;
            while (s < end && *s != ' ') s++;
            if (s > w) st = jwt_role_name(w, (size_t)(s - w), roles, err);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *r;
        json_array_foreach(v, i, r)
        {
            if (!json_is_string(r)) return refuse(err, "JWT '%s' claim must hold strings", a->roles_claim);
            if ((st = jwt_role_name(json_string_value(r), json_string_length(r), roles, err))) return st;
        }
    } else if (v) {
        return refuse(err, "JWT '%s' claim must be a list of roles or a space-separated string", a->roles_claim);
    }
    if (st == MCP_STATUS_OK && *roles == 0) return refuse(err, "JWT carries no roles");
    return st;
}

static mcp_status jwt_claims(const mcp_auth *a, json_t *c, int64_t now_s, mcp_identity *id, mcp_err *err)
{
    mcp_status st = jwt_times(a, c, now_s, err);
    if (st != MCP_STATUS_OK) return st;
    if (a->issuer) {
        json_t *iss = json_object_get(c, "iss");
        if (!json_is_string(iss) || strcmp(json_string_value(iss), a->issuer) != 0)
            return refuse(err, "JWT issuer is not the configured one");
    }
    if (a->audience && !audience_matches(json_object_get(c, "aud"), a->audience))
        return refuse(err, "JWT audience does not include the configured one");
    unsigned roles = 0;
    if ((st = jwt_roles(a, c, &roles, err)) != MCP_STATUS_OK) return st;
    const char *tenant = "";
    json_t *t = json_object_get(c, a->tenant_claim);
    if (t && !(json_is_string(t) && tenant_valid(json_string_value(t), json_string_length(t))))
        return refuse(err, "JWT '%s' claim is not a valid tenant name (" TENANT_RULE ")", a->tenant_claim);
    if (t) tenant = json_string_value(t);
    else if (!(roles & MCP_ROLE_ADMIN)) return refuse(err, "JWT has no '%s' claim", a->tenant_claim);
    const char *subject = "jwt";
    json_t *sub = json_object_get(c, "sub");
    if (sub && !(json_is_string(sub) && subject_valid(json_string_value(sub), json_string_length(sub))))
        return refuse(err, "JWT 'sub' must be a string of 1 to %d bytes without control characters", MCP_AUTH_SUBJECT_MAX);
    if (sub) subject = json_string_value(sub);
    mcp_qos_class cls = MCP_CLASS_NONE;
    json_t *k = json_object_get(c, "class");
    if (k && !(json_is_string(k) && class_parse(json_string_value(k), &cls)))
        return refuse(err, "JWT 'class' must be critical, standard or batch");
    int64_t deadline_ms = 0;
    json_t *d = json_object_get(c, "deadline_ms");
    if (d && !(json_is_integer(d) && json_integer_value(d) > 0 && json_integer_value(d) <= AUTH_DEADLINE_MS_MAX))
        return refuse(err, "JWT 'deadline_ms' must be an integer from 1 to %d", AUTH_DEADLINE_MS_MAX);
    if (d) deadline_ms = json_integer_value(d);
    identity_fill(id, "jwt", tenant, subject, roles);
    id->sla_class = cls;
    id->sla_deadline_ms = deadline_ms;
    return MCP_STATUS_OK;
}

/* Splits "h.p.s" (exactly two dots, checked by the caller). */
static void jwt_split(const char *tok, size_t n, jwt_parts *p)
{
    const char *d1 = memchr(tok, '.', n);
    const char *d2 = memchr(d1 + 1, '.', n - (size_t)(d1 + 1 - tok));
    p->header64 = tok;
    p->header64_len = (size_t)(d1 - tok);
    p->payload64 = d1 + 1;
    p->payload64_len = (size_t)(d2 - p->payload64);
    p->sig64 = d2 + 1;
    p->sig64_len = n - (size_t)(p->sig64 - tok);
}

/* Header, then signature, then (only for a verified token) the claims. */
static mcp_status jwt_check(const mcp_auth *a, jwt_parts *p, int64_t now_s, mcp_identity *id, mcp_err *err)
{
    json_t *h = NULL;
    mcp_status st = jwt_decode_json("header", p->header64, p->header64_len, p->buf, &h, err);
    if (st != MCP_STATUS_OK) return st;
    jwt_alg alg = JWT_HS256;
    st = jwt_header(a, h, &alg, err);
    json_decref(h);
    if (st != MCP_STATUS_OK) return st;
    p->sig = p->buf;
    if (!b64url_decode(p->sig64, p->sig64_len, p->sig, &p->sig_len))
        return refuse(err, "JWT signature is malformed: not base64url without '=' padding");
    const uint8_t *signed_part = (const uint8_t *)p->header64;
    size_t signed_len = p->header64_len + 1 + p->payload64_len;
    bool ok = alg == JWT_HS256 ? hs256_verify(a, signed_part, signed_len, p->sig, p->sig_len)
                               : rs256_verify(a, signed_part, signed_len, p->sig, p->sig_len);
    if (!ok) return refuse(err, "JWT signature does not verify");
    json_t *claims = NULL;
    st = jwt_decode_json("payload", p->payload64, p->payload64_len, p->buf, &claims, err);
    if (st != MCP_STATUS_OK) return st;
    st = jwt_claims(a, claims, now_s, id, err);
    json_decref(claims);
    return st;
}

static mcp_status jwt_authenticate(const mcp_auth *a, const char *tok, size_t n, int64_t now_s, mcp_identity *id,
                                   mcp_err *err)
{
    if (!a->hs256_secret && !a->rs256_key) return refuse(err, "JWTs are not accepted here (no auth.jwt is configured)");
    jwt_parts p = {0};
    jwt_split(tok, n, &p);
    p.buf = mcp_malloc(n + 1);
    if (!p.buf) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory checking a JWT");
    mcp_status st = jwt_check(a, &p, now_s, id, err);
    mcp_free(p.buf);
    if (st != MCP_STATUS_OK) mcp_identity_anonymous(id);
    return st;
}

/* Printable ASCII without spaces (RFC 6750's b64token is narrower still;
 * API keys and the admin token keep to this). */
static bool credential_chars_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) return false;
    return true;
}

mcp_status mcp_auth_authenticate(const mcp_auth *a, const char *authorization, int64_t now_s, mcp_identity *id,
                                 mcp_err *err)
{
    mcp_identity_anonymous(id);
    if (!authorization || !authorization[0]) return MCP_STATUS_OK;
    if (!a) a = &auth_none;
    size_t n = strnlen(authorization, BEARER_LEN + MCP_AUTH_TOKEN_MAX + 1);
    if (n <= BEARER_LEN || strncasecmp(authorization, BEARER, BEARER_LEN) != 0) return refuse(err, MSG_SCHEME);
    const char *cred = authorization + BEARER_LEN;
    size_t len = n - BEARER_LEN;
    if (len > MCP_AUTH_TOKEN_MAX) return refuse(err, "the credential is longer than %d bytes", MCP_AUTH_TOKEN_MAX);
    if (!credential_chars_ok(cred, len)) return refuse(err, MSG_SCHEME);
    uint8_t hash[AUTH_HASH_LEN];
    if (!sha256(cred, len, hash)) return mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot hash the credential (SHA-256 failed)");
    if (a->admin_token_set && CRYPTO_memcmp(hash, a->admin_token_hash, AUTH_HASH_LEN) == 0) {
        identity_fill(id, "admin-token", "", "admin-token", MCP_ROLE_ADMIN);
        return MCP_STATUS_OK;
    }
    int dots = 0;
    for (size_t i = 0; i < len; i++) dots += cred[i] == '.';
    if (dots == 2) return jwt_authenticate(a, cred, len, now_s, id, err);
    return key_authenticate(a, hash, id, err);
}

/* ---- decisions ---- */

size_t mcp_auth_model_tenant(const char *model, const char **tenant)
{
    if (tenant) *tenant = model;
    if (!model) return 0;
    const char *slash = strchr(model, '/');
    return slash ? (size_t)(slash - model) : 0;
}

static const auth_shared *shared_find(const mcp_auth *a, const char *model)
{
    int lo = 0, hi = a->n_shared - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(a->shared[mid].name, model);
        if (c == 0) return &a->shared[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static bool shared_lists(const auth_shared *s, const char *tenant)
{
    if (!tenant[0]) return false;
    for (int i = 0; i < s->n_tenants; i++)
        if (strcmp(s->tenants[i], tenant) == 0) return true;
    return false;
}

static bool model_shared(const char *model) { return !strchr(model, '/'); }

/* Visibility for a non-admin: its own namespace, and the shared models
 * shared_models does not keep from its tenant. A name with an empty
 * namespace ("/x") belongs to nobody. */
static bool visible_to_tenant(const mcp_auth *a, const char *tenant, const char *model)
{
    const char *ns;
    size_t ns_len = mcp_auth_model_tenant(model, &ns);
    if (!model_shared(model))
        return ns_len > 0 && tenant[0] && strlen(tenant) == ns_len && memcmp(ns, tenant, ns_len) == 0;
    const auth_shared *s = shared_find(a, model);
    return !s || shared_lists(s, tenant);
}

bool mcp_auth_visible(const mcp_auth *a, const mcp_identity *id, const char *model)
{
    if (!a || !a->enabled) return true;
    if (!id || !id->authenticated) return false;
    if (id->roles & MCP_ROLE_ADMIN) return true;
    if (!model) return true;
    return visible_to_tenant(a, id->tenant, model);
}

static unsigned roles_actions(const mcp_auth *a, unsigned roles)
{
    unsigned acts = 0;
    for (int i = 0; i < ROLE_COUNT; i++)
        if (roles & role_table[i].bit) acts |= a->role_actions[i];
    return acts;
}

/* Anonymous callers: the configured actions (or the default, from this
 * machine only), on server-wide routes and on the shared models every
 * tenant may use; anything else asks for a credential, so an anonymous
 * caller learns nothing of which models exist. */
static mcp_decision decide_anonymous(const mcp_auth *a, mcp_peer peer, mcp_action act, const char *model)
{
    bool local = peer == MCP_PEER_LOOPBACK || peer == MCP_PEER_LOCAL;
    unsigned allowed = a->anonymous_set ? a->anonymous_actions : local ? ACTIONS_ANONYMOUS_DEFAULT : 0u;
    if (!(allowed & ACT_BIT(act))) return MCP_DECIDE_UNAUTHENTICATED;
    if (!model) return MCP_DECIDE_ALLOW;
    if (model_shared(model) && !shared_find(a, model) && !(ACTIONS_ADMIN_ONLY_ON_SHARED & ACT_BIT(act)))
        return MCP_DECIDE_ALLOW;
    return MCP_DECIDE_UNAUTHENTICATED;
}

mcp_decision mcp_auth_decide(const mcp_auth *a, const mcp_identity *id, mcp_peer peer, mcp_action act,
                             const char *model)
{
    if (!a || !a->enabled) return MCP_DECIDE_ALLOW;
    bool authenticated = id && id->authenticated;
    if ((int)act < 0 || act >= MCP_ACT_COUNT) return authenticated ? MCP_DECIDE_FORBIDDEN : MCP_DECIDE_UNAUTHENTICATED;
    if (!authenticated) return decide_anonymous(a, peer, act, model);
    if (id->roles & MCP_ROLE_ADMIN) return MCP_DECIDE_ALLOW;
    bool granted = roles_actions(a, id->roles) & ACT_BIT(act);
    if (!model) return granted ? MCP_DECIDE_ALLOW : MCP_DECIDE_FORBIDDEN;
    if (!visible_to_tenant(a, id->tenant, model)) return MCP_DECIDE_HIDDEN;
    if (!granted) return MCP_DECIDE_FORBIDDEN;
    if (model_shared(model) && (ACTIONS_ADMIN_ONLY_ON_SHARED & ACT_BIT(act))) return MCP_DECIDE_FORBIDDEN;
    return MCP_DECIDE_ALLOW;
}

mcp_tenant_limits mcp_auth_tenant_limits(const mcp_auth *a, const char *tenant)
{
    if (a && tenant) {
        int lo = 0, hi = a->n_tenants - 1;
        while (lo <= hi) {
            int mid = lo + (hi - lo) / 2;
            int c = strcmp(a->tenants[mid].name, tenant);
            if (c == 0) return a->tenants[mid].limits;
            if (c < 0) lo = mid + 1;
            else hi = mid - 1;
        }
    }
    return limits_default();
}

/* ---- policy-like keys (one rule for the registry and the server) ---- */

bool mcp_auth_policy_key(const char *key) { return key && mcp__desc_policy_key(key); }
