/*
 * Identities and access rules (src/serve/auth.c): API keys from a keys file
 * and inline; JWTs signed here with HMAC-SHA256 and with an RSA-2048 key
 * made at test time, accepted and refused for each reason (expiry and
 * skew, nbf, issuer, audience, a flipped signature byte, alg none, HS256
 * MACed with the RSA public key's PEM, HS512, padding, extra dots, length,
 * missing exp, unknown roles), with messages that never quote a secret or
 * a credential; the decision matrix over roles, actions and model
 * namespaces; anonymous callers by peer; the admin token; config errors
 * that name the key and line; a config without `auth`; policy-like keys.
 */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "serve/auth.h"
#include "test_util.h"

#define NOW 1700000000LL
#define HS_SECRET "an-hs256-secret-of-forty-bytes-0123456789"
#define KEY_OPERATOR "mcp_key_operator_0123456789abcdef"
#define KEY_INVOKER "mcp_key_invoker_0123456789abcdef"
#define KEY_VIEWER "mcp_key_viewer_0123456789abcdef"
#define KEY_ADMIN "mcp_key_admin_0123456789abcdef"
#define KEY_INLINE "mcp_key_inline_0123456789abcdef"
#define ADMIN_TOKEN "admin-token-0123456789abcdef"

/* ---- fixture: a folder with the config's files, an RSA key pair ---- */

typedef struct fixture {
    char dir[512];
    EVP_PKEY *rsa;  /* private; its public half is in jwt.pub.pem */
    char *pub_pem;  /* the public key's PEM text */
    mcp_auth *auth; /* built from CONFIG below */
} fixture;

static fixture fx;

static void write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[1024];
    tu_path(path, sizeof path, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *text) { write_file(dir, name, text, strlen(text)); }

static char *key_hash(const char *key)
{
    static char hex[8][65];
    static int next;
    char *h = hex[next++ % 8];
    mcp_auth_key_hash(key, strlen(key), h);
    return h;
}

static char *public_pem(EVP_PKEY *k)
{
    BIO *bio = BIO_new(BIO_s_mem());
    if (!bio || PEM_write_bio_PUBKEY(bio, k) != 1) abort();
    char *data;
    long n = BIO_get_mem_data(bio, &data);
    char *s = malloc((size_t)n + 1);
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    BIO_free(bio);
    return s;
}

static mcp_status parse_config(const char *yaml, mcp_auth **out, char *msg, size_t cap)
{
    mcp_err err = {msg, cap};
    msg[0] = '\0';
    return mcp_auth_parse(yaml, strlen(yaml), fx.dir, out, &err);
}

static void fixture_setup(void)
{
    if (tu_make_temp_dir(fx.dir, sizeof fx.dir, "auth") != 0) {
        fprintf(stderr, "cannot make a temporary folder\n");
        exit(1);
    }
    fx.rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    if (!fx.rsa) abort();
    fx.pub_pem = public_pem(fx.rsa);
    write_text(fx.dir, "jwt.pub.pem", fx.pub_pem);
    write_text(fx.dir, "jwt.secret", HS_SECRET "\n");
    write_text(fx.dir, "short.secret", "0123456789012345678901234567890\n\n");
    char keys[2048];
    char upper[65];
    snprintf(upper, sizeof upper, "%s", key_hash(KEY_OPERATOR));
    for (char *p = upper; *p; p++)
        if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 'a' + 'A');
    snprintf(keys, sizeof keys,
             "keys:\n"
             "  - sha256: %s\n"
             "    tenant: t1\n"
             "    subject: ci\n"
             "    roles: [operator]\n"
             "  - {sha256: %s, tenant: t1, roles: [invoker]}\n"
             "  - {sha256: %s, tenant: t1, subject: dashboards, roles: [viewer]}\n"
             "  - {sha256: %s, subject: root, roles: [admin]}\n",
             upper, key_hash(KEY_INVOKER), key_hash(KEY_VIEWER), key_hash(KEY_ADMIN));
    write_text(fx.dir, "keys.yaml", keys);
    char config[2048];
    snprintf(config, sizeof config,
             "listen: 0.0.0.0:8000\n"
             "auth:\n"
             "  api_keys_file: keys.yaml\n"
             "  api_keys:\n"
             "    - {sha256: %s, tenant: t2, subject: inline, roles: [viewer, invoker]}\n"
             "  jwt:\n"
             "    issuer: https://issuer.example\n"
             "    audience: mcp2026\n"
             "    hs256_secret_file: jwt.secret\n"
             "    rs256_public_key_file: jwt.pub.pem\n"
             "tenants:\n"
             "  t1: {weight: 2, max_concurrent: 64, rps: 500, burst: 100, max_queued: 32, tokens_per_s: 1000, "
             "class: critical}\n"
             "  t2: {rps: 0.5}\n"
             "shared_models:\n"
             "  digits: [t1, t2]\n"
             "  secret: [t2]\n",
             key_hash(KEY_INLINE));
    char msg[512];
    if (parse_config(config, &fx.auth, msg, sizeof msg) != MCP_STATUS_OK) {
        fprintf(stderr, "fixture config: %s\n", msg);
        exit(1);
    }
}

static void fixture_teardown(void)
{
    mcp_auth_destroy(fx.auth);
    EVP_PKEY_free(fx.rsa);
    free(fx.pub_pem);
    tu_remove_tree(fx.dir);
}

/* ---- tokens made here ---- */

static void b64url(const uint8_t *data, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t w = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2];
        out[w++] = a[v >> 18];
        out[w++] = a[(v >> 12) & 63];
        out[w++] = a[(v >> 6) & 63];
        out[w++] = a[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)data[i] << 16;
        out[w++] = a[v >> 18];
        out[w++] = a[(v >> 12) & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8;
        out[w++] = a[v >> 18];
        out[w++] = a[(v >> 12) & 63];
        out[w++] = a[(v >> 6) & 63];
    }
    out[w] = '\0';
}

typedef enum sig_kind { SIG_HS256, SIG_RS256, SIG_EMPTY, SIG_JUNK } sig_kind;

typedef struct token {
    char text[MCP_AUTH_TOKEN_MAX * 2];
} token;

/* "header64.payload64" for the given JSON texts. */
static size_t signing_input(token *t, const char *header, const char *payload)
{
    char *p = t->text;
    b64url((const uint8_t *)header, strlen(header), p);
    p += strlen(p);
    *p++ = '.';
    b64url((const uint8_t *)payload, strlen(payload), p);
    return strlen(t->text);
}

static void sign_with(token *t, size_t n, sig_kind kind, const void *secret, size_t secret_len)
{
    uint8_t sig[512];
    size_t sig_len = 0;
    if (kind == SIG_HS256) {
        unsigned int l = 0;
        HMAC(EVP_sha256(), secret, (int)secret_len, (const uint8_t *)t->text, n, sig, &l);
        sig_len = l;
    } else if (kind == SIG_RS256) {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        sig_len = sizeof sig;
        if (!ctx || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, fx.rsa) != 1 ||
            EVP_DigestSign(ctx, sig, &sig_len, (const uint8_t *)t->text, n) != 1)
            abort();
        EVP_MD_CTX_free(ctx);
    } else if (kind == SIG_JUNK) {
        memset(sig, 0x5a, 32);
        sig_len = 32;
    }
    t->text[n] = '.';
    b64url(sig, sig_len, t->text + n + 1);
}

static void make_token(token *t, const char *header, const char *payload, sig_kind kind)
{
    size_t n = signing_input(t, header, payload);
    sign_with(t, n, kind, HS_SECRET, strlen(HS_SECRET));
}

#define HS_HEADER "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"
#define RS_HEADER "{\"alg\":\"RS256\",\"typ\":\"JWT\"}"

/* A payload with the usual claims and `extra` (",\"k\":v" or ""). */
static const char *payload_with(const char *extra, long long exp)
{
    static char buf[MCP_AUTH_TOKEN_MAX * 2];
    snprintf(buf, sizeof buf,
             "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"sub\":\"alice\",\"tenant\":\"t1\","
             "\"roles\":[\"invoker\"],\"exp\":%lld%s}",
             exp, extra);
    return buf;
}

static const char *std_payload(void) { return payload_with("", NOW + 600); }

/* ---- authenticating ---- */

static char bearer[MCP_AUTH_TOKEN_MAX * 2 + 16];

static mcp_status auth_value(const mcp_auth *a, const char *value, int64_t now, mcp_identity *id, char *msg, size_t cap)
{
    mcp_err err = {msg, cap};
    msg[0] = '\0';
    return mcp_auth_authenticate(a, value, now, id, &err);
}

static mcp_status auth_bearer(const mcp_auth *a, const char *cred, int64_t now, mcp_identity *id, char *msg, size_t cap)
{
    snprintf(bearer, sizeof bearer, "Bearer %s", cred);
    return auth_value(a, bearer, now, id, msg, cap);
}

/* A refusal: UNAUTHENTICATED, anonymous identity, a message holding
 * `want` that quotes neither the credential, its parts nor any secret. */
static void check_refused_at(const char *file, int line, const mcp_auth *a, const char *cred, int64_t now,
                             const char *want)
{
    mcp_identity id;
    char msg[512];
    mcp_status st = auth_bearer(a, cred, now, &id, msg, sizeof msg);
    tu_checks++;
    if (st != MCP_STATUS_UNAUTHENTICATED) {
        TU_FAIL_AT(file, line, "expected unauthenticated, got '%s' (%s)", mcp_status_str(st), msg);
        return;
    }
    tu_checks++;
    if (!strstr(msg, want)) TU_FAIL_AT(file, line, "message '%s' lacks '%s'", msg, want);
    tu_checks++;
    if (id.authenticated || id.roles) TU_FAIL_AT(file, line, "a refused credential left an identity");
    char part[64];
    size_t n = strlen(cred);
    for (size_t i = 0; i + 12 <= n; i += 6) {
        snprintf(part, sizeof part, "%.12s", cred + i);
        if (strstr(msg, part)) {
            TU_FAIL_AT(file, line, "message '%s' quotes the credential ('%s')", msg, part);
            break;
        }
    }
    tu_checks++;
    if (strstr(msg, "secret-of") || strstr(msg, "BEGIN PUBLIC") || strstr(msg, "mcp_key_"))
        TU_FAIL_AT(file, line, "message '%s' quotes a secret", msg);
}
#define CHECK_REFUSED(a, cred, now, want) check_refused_at(__FILE__, __LINE__, (a), (cred), (now), (want))

/* ---- names ---- */

static void test_names(void)
{
    for (int i = 0; i < MCP_ACT_COUNT; i++) TU_CHECK_INT(mcp_action_parse(mcp_action_name((mcp_action)i)), i);
    TU_CHECK_STR(mcp_action_name(MCP_ACT_GENERATE), "generate");
    TU_CHECK_STR(mcp_action_name(MCP_ACT_SETTINGS), "settings");
    TU_CHECK_INT(mcp_action_parse("Infer"), -1);
    TU_CHECK_INT(mcp_action_parse(""), -1);
    TU_CHECK_INT(mcp_action_parse(NULL), -1);
    TU_CHECK_STR(mcp_qos_class_name(MCP_CLASS_CRITICAL), "critical");
    TU_CHECK_STR(mcp_qos_class_name(MCP_CLASS_STANDARD), "standard");
    TU_CHECK_STR(mcp_qos_class_name(MCP_CLASS_BATCH), "batch");
    TU_CHECK_STR(mcp_qos_class_name(MCP_CLASS_NONE), "");

    mcp_identity id;
    memset(&id, 0x7f, sizeof id);
    mcp_identity_anonymous(&id);
    TU_CHECK(!id.authenticated && id.roles == 0 && id.tenant[0] == '\0' && id.subject[0] == '\0');
    TU_CHECK_STR(id.via, "anonymous");
    TU_CHECK_INT(id.sla_class, MCP_CLASS_NONE);
    TU_CHECK_INT(id.sla_deadline_ms, 0);

    const char *t = NULL;
    TU_CHECK_INT(mcp_auth_model_tenant("t1/x", &t), 2);
    TU_CHECK(t && strncmp(t, "t1", 2) == 0);
    TU_CHECK_INT(mcp_auth_model_tenant("x", &t), 0);
    TU_CHECK_INT(mcp_auth_model_tenant("tenant-a/m/v", &t), 8);

    char hex[65];
    mcp_auth_key_hash("abc", 3, hex);
    TU_CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_policy_key(void)
{
    const char *yes[] = {"rbac", "x.policy", "mcp/roles", "ACL", "policy", "Policies", "acls", "permissions", "auth",
                         "Authorization", "tenants", "tenant_policy", "a:b:RBAC", "metadata.auth"};
    const char *no[] = {"name", "inputs", "tenant_name", "tenant", "role", "author", "policy_x", "x.policyname", "",
                        "roles_of", "authz"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        tu_checks++;
        if (!mcp_auth_policy_key(yes[i])) TU_FAIL_AT(__FILE__, __LINE__, "'%s' should be policy-like", yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        tu_checks++;
        if (mcp_auth_policy_key(no[i])) TU_FAIL_AT(__FILE__, __LINE__, "'%s' should not be policy-like", no[i]);
    }
    TU_CHECK(!mcp_auth_policy_key(NULL));
}

/* ---- API keys ---- */

static void test_api_keys(void)
{
    const mcp_auth *a = fx.auth;
    TU_CHECK(mcp_auth_enabled(a));
    TU_CHECK_INT(mcp_auth_key_count(a), 5);
    TU_CHECK(mcp_auth_jwt_hs256(a) && mcp_auth_jwt_rs256(a));
    mcp_identity id;
    char msg[512];
    TU_CHECK_STATUS(auth_bearer(a, KEY_OPERATOR, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK(id.authenticated);
    TU_CHECK_STR(id.tenant, "t1");
    TU_CHECK_STR(id.subject, "ci");
    TU_CHECK_INT(id.roles, MCP_ROLE_OPERATOR);
    TU_CHECK_STR(id.via, "api-key");
    TU_CHECK_INT(id.sla_class, MCP_CLASS_NONE);

    TU_CHECK_STATUS(auth_bearer(a, KEY_INVOKER, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    char want[32];
    snprintf(want, sizeof want, "key-%.8s", key_hash(KEY_INVOKER));
    TU_CHECK_STR(id.subject, want);
    TU_CHECK_INT(id.roles, MCP_ROLE_INVOKER);

    TU_CHECK_STATUS(auth_bearer(a, KEY_ADMIN, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STR(id.tenant, "");
    TU_CHECK_STR(id.subject, "root");
    TU_CHECK_INT(id.roles, MCP_ROLE_ADMIN);

    TU_CHECK_STATUS(auth_bearer(a, KEY_INLINE, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STR(id.tenant, "t2");
    TU_CHECK_STR(id.subject, "inline");
    TU_CHECK_INT(id.roles, MCP_ROLE_VIEWER | MCP_ROLE_INVOKER);

    /* The scheme is case-insensitive; nothing but one space follows it. */
    snprintf(bearer, sizeof bearer, "bEARER %s", KEY_VIEWER);
    TU_CHECK_STATUS(auth_value(a, bearer, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STR(id.subject, "dashboards");

    CHECK_REFUSED(a, "mcp_key_unknown_0123456789abcdef", NOW, "unknown API key");
    CHECK_REFUSED(a, KEY_VIEWER "x", NOW, "unknown API key");
    CHECK_REFUSED(a, " " KEY_VIEWER, NOW, "Bearer <API key or JWT>");
    const char *bad_values[] = {"Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Bearer\t" KEY_VIEWER, KEY_VIEWER,
                                "Token " KEY_VIEWER, "Bearer " KEY_VIEWER " extra"};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        TU_CHECK_STATUS(auth_value(a, bad_values[i], NOW, &id, msg, sizeof msg), MCP_STATUS_UNAUTHENTICATED, bad_values[i]);
        TU_CHECK_CONTAINS(msg, "authorization must be 'Bearer <API key or JWT>'");
        TU_CHECK(!strstr(msg, "mcp_key_") && !strstr(msg, "dXNlcjpwYXNz"));
        TU_CHECK(!id.authenticated);
    }

    /* No credential: anonymous, and OK. */
    TU_CHECK_STATUS(auth_value(a, NULL, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK(!id.authenticated);
    TU_CHECK_STR(id.via, "anonymous");
    TU_CHECK_STATUS(auth_value(a, "", NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK(!id.authenticated);

    /* Over the limit: refused without being read. */
    static char big[MCP_AUTH_TOKEN_MAX + 2];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_REFUSED(a, big, NOW, "longer than 8192 bytes");
    big[MCP_AUTH_TOKEN_MAX] = '\0';
    CHECK_REFUSED(a, big, NOW, "unknown API key");
}

static void test_admin_token(void)
{
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_auth *a = NULL;
    TU_REQUIRE_OK(parse_config("auth: {}\n", &a, msg, sizeof msg), msg);
    mcp_identity id;
    CHECK_REFUSED(a, ADMIN_TOKEN, NOW, "unknown API key");
    TU_CHECK_STATUS(mcp_auth_set_admin_token(a, "short", &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_STATUS(mcp_auth_set_admin_token(a, "with a space 0123456789", &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_STATUS(mcp_auth_set_admin_token(a, ADMIN_TOKEN, &err), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(auth_bearer(a, ADMIN_TOKEN, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK(id.authenticated);
    TU_CHECK_STR(id.subject, "admin-token");
    TU_CHECK_STR(id.tenant, "");
    TU_CHECK_STR(id.via, "admin-token");
    TU_CHECK_INT(id.roles, MCP_ROLE_ADMIN);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_LOAD, "digits"), MCP_DECIDE_ALLOW);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_SETTINGS, NULL), MCP_DECIDE_ALLOW);
    CHECK_REFUSED(a, ADMIN_TOKEN "x", NOW, "unknown API key");
    CHECK_REFUSED(a, "admin-token-0123456789abcdeF", NOW, "unknown API key");
    mcp_auth_destroy(a);
}

/* ---- JWTs ---- */

static void test_jwt_accepted(void)
{
    const mcp_auth *a = fx.auth;
    token t;
    mcp_identity id;
    char msg[512];
    make_token(&t, HS_HEADER, std_payload(), SIG_HS256);
    TU_CHECK_STATUS(auth_bearer(a, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK(id.authenticated);
    TU_CHECK_STR(id.via, "jwt");
    TU_CHECK_STR(id.tenant, "t1");
    TU_CHECK_STR(id.subject, "alice");
    TU_CHECK_INT(id.roles, MCP_ROLE_INVOKER);
    TU_CHECK_INT(id.sla_class, MCP_CLASS_NONE);
    TU_CHECK_INT(id.sla_deadline_ms, 0);

    make_token(&t, RS_HEADER, std_payload(), SIG_RS256);
    TU_CHECK_STATUS(auth_bearer(a, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STR(id.tenant, "t1");
    TU_CHECK_INT(id.roles, MCP_ROLE_INVOKER);

    /* Roles as a space-separated string; SLA claims; aud as a list; no typ. */
    make_token(&t, "{\"alg\":\"HS256\"}",
               "{\"iss\":\"https://issuer.example\",\"aud\":[\"other\",\"mcp2026\"],\"tenant\":\"t2\","
               "\"roles\":\"viewer  operator\",\"exp\":1700000600,\"nbf\":1699999000,\"iat\":1699999000,"
               "\"class\":\"batch\",\"deadline_ms\":2500}",
               SIG_HS256);
    TU_CHECK_STATUS(auth_bearer(a, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STR(id.tenant, "t2");
    TU_CHECK_STR(id.subject, "jwt");
    TU_CHECK_INT(id.roles, MCP_ROLE_VIEWER | MCP_ROLE_OPERATOR);
    TU_CHECK_INT(id.sla_class, MCP_CLASS_BATCH);
    TU_CHECK_INT(id.sla_deadline_ms, 2500);

    /* An admin needs no tenant; "typ" is case-insensitive. */
    make_token(&t, "{\"alg\":\"RS256\",\"typ\":\"jwt\",\"kid\":\"k1\"}",
               "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"roles\":[\"admin\"],\"exp\":1700000600}",
               SIG_RS256);
    TU_CHECK_STATUS(auth_bearer(a, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STR(id.tenant, "");
    TU_CHECK_INT(id.roles, MCP_ROLE_ADMIN);
}

static void test_jwt_refused(void)
{
    const mcp_auth *a = fx.auth;
    token t;

    make_token(&t, HS_HEADER, payload_with("", NOW - 1), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW + 60, "JWT expired");
    make_token(&t, RS_HEADER, payload_with("", NOW - 3600), SIG_RS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT expired");
    make_token(&t, HS_HEADER, payload_with(",\"nbf\":1700000300", NOW + 600), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT not yet valid");
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://evil.example\",\"aud\":\"mcp2026\",\"tenant\":\"t1\",\"roles\":[\"invoker\"],"
               "\"exp\":1700000600}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT issuer is not the configured one");
    mcp_identity id;
    char msg[512];
    auth_bearer(a, t.text, NOW, &id, msg, sizeof msg);
    TU_CHECK(!strstr(msg, "evil"));
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example\",\"aud\":[\"other\"],\"tenant\":\"t1\",\"roles\":[\"invoker\"],"
               "\"exp\":1700000600}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "audience");
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example\",\"tenant\":\"t1\",\"roles\":[\"invoker\"],\"exp\":1700000600}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "audience");

    /* One flipped byte in the signature, HS256 and RS256. */
    make_token(&t, HS_HEADER, std_payload(), SIG_HS256);
    char *sig = strrchr(t.text, '.') + 1;
    sig[5] = sig[5] == 'A' ? 'B' : 'A';
    CHECK_REFUSED(a, t.text, NOW, "JWT signature does not verify");
    make_token(&t, RS_HEADER, std_payload(), SIG_RS256);
    sig = strrchr(t.text, '.') + 1;
    sig[20] = sig[20] == 'A' ? 'B' : 'A';
    CHECK_REFUSED(a, t.text, NOW, "JWT signature does not verify");
    /* A claim changed after signing. */
    make_token(&t, HS_HEADER, std_payload(), SIG_HS256);
    token forged;
    signing_input(&forged, HS_HEADER, payload_with("", NOW + 999999));
    snprintf(forged.text + strlen(forged.text), sizeof forged.text - strlen(forged.text), "%s", strrchr(t.text, '.'));
    CHECK_REFUSED(a, forged.text, NOW, "JWT signature does not verify");
    /* A signature of the wrong size, or none, or junk. */
    make_token(&t, HS_HEADER, std_payload(), SIG_EMPTY);
    CHECK_REFUSED(a, t.text, NOW, "JWT signature does not verify");
    make_token(&t, RS_HEADER, std_payload(), SIG_JUNK);
    CHECK_REFUSED(a, t.text, NOW, "JWT signature does not verify");

    /* alg none, with an empty signature and with one. */
    make_token(&t, "{\"alg\":\"none\",\"typ\":\"JWT\"}", std_payload(), SIG_EMPTY);
    CHECK_REFUSED(a, t.text, NOW, "JWT alg 'none' is refused");
    make_token(&t, "{\"alg\":\"none\"}", std_payload(), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT alg 'none' is refused");
    make_token(&t, "{\"alg\":\"None\"}", std_payload(), SIG_EMPTY);
    CHECK_REFUSED(a, t.text, NOW, "JWT alg 'none' is refused");
    make_token(&t, "{\"typ\":\"JWT\"}", std_payload(), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "no 'alg'");
    make_token(&t, "{\"alg\":\"HS512\"}", std_payload(), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT alg 'HS512' is not accepted (accepted: HS256, RS256)");
    make_token(&t, "{\"alg\":\"hs256\"}", std_payload(), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "is not accepted");
    make_token(&t, "{\"alg\":\"HS256\",\"alg\":\"none\"}", std_payload(), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT header is malformed");
    make_token(&t, "{\"alg\":\"HS256\",\"crit\":[\"exp\"]}", std_payload(), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "crit");
    make_token(&t, "{\"alg\":\"HS256\",\"typ\":\"JWE\"}", std_payload(), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "typ");
    make_token(&t, "[\"HS256\"]", std_payload(), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT header is malformed");

    /* Padding and foreign characters, in each part (signed over as sent). */
    make_token(&t, HS_HEADER, std_payload(), SIG_HS256);
    strcat(t.text, "=");
    CHECK_REFUSED(a, t.text, NOW, "JWT signature is malformed");
    {
        const char *p = "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"tenant\":\"t1\",\"roles\":[\"invoker\"],"
                        "\"exp\":1700000600 }";
        TU_CHECK(strlen(p) % 3 != 0);
        size_t n = signing_input(&t, HS_HEADER, p);
        strcat(t.text, strlen(p) % 3 == 1 ? "==" : "=");
        sign_with(&t, n + (strlen(p) % 3 == 1 ? 2 : 1), SIG_HS256, HS_SECRET, strlen(HS_SECRET));
        CHECK_REFUSED(a, t.text, NOW, "JWT payload is malformed");
    }
    {
        const char *h = "{\"alg\":\"HS256\"}"; /* 15 bytes: 20 characters, no padding of its own */
        char text[sizeof t.text];
        b64url((const uint8_t *)h, strlen(h), text);
        strcat(text, "==.");
        size_t n = strlen(text);
        b64url((const uint8_t *)std_payload(), strlen(std_payload()), text + n);
        snprintf(t.text, sizeof t.text, "%s", text);
        sign_with(&t, strlen(t.text), SIG_HS256, HS_SECRET, strlen(HS_SECRET));
        CHECK_REFUSED(a, t.text, NOW, "JWT header is malformed");
    }
    make_token(&t, HS_HEADER, std_payload(), SIG_HS256);
    t.text[3] = '+';
    CHECK_REFUSED(a, t.text, NOW, "JWT header is malformed");
    CHECK_REFUSED(a, "..", NOW, "JWT header is malformed");
    CHECK_REFUSED(a, "e30..", NOW, "JWT header has no 'alg'");
    /* Three dots: not a JWT, and no API key either. */
    make_token(&t, HS_HEADER, std_payload(), SIG_HS256);
    strcat(t.text, ".e30");
    CHECK_REFUSED(a, t.text, NOW, "unknown API key");
    /* Over MCP_AUTH_TOKEN_MAX, signed or not. */
    {
        static char payload[MCP_AUTH_TOKEN_MAX * 2];
        char extra[6300] = ",\"pad\":\"";
        size_t n = strlen(extra);
        memset(extra + n, 'x', 6200);
        memcpy(extra + n + 6200, "\"", 2);
        snprintf(payload, sizeof payload, "%s", payload_with(extra, NOW + 600));
        make_token(&t, HS_HEADER, payload, SIG_HS256);
        TU_CHECK(strlen(t.text) > MCP_AUTH_TOKEN_MAX);
        CHECK_REFUSED(a, t.text, NOW, "longer than 8192 bytes");
    }

    /* Claims. */
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"tenant\":\"t1\",\"roles\":[\"invoker\"]}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT has no 'exp'");
    make_token(&t, HS_HEADER, payload_with(",\"x\":1", NOW + 600), SIG_HS256);
    mcp_identity ok_id;
    TU_CHECK_STATUS(auth_bearer(a, t.text, NOW, &ok_id, msg, sizeof msg), MCP_STATUS_OK, msg);
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"tenant\":\"t1\",\"roles\":[\"invoker\","
               "\"superuser\"],\"exp\":1700000600}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT role 'superuser' is unknown");
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"tenant\":\"t1\",\"roles\":\"invoker r<o>t\","
               "\"exp\":1700000600}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT carries an unknown role");
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"tenant\":\"t1\",\"roles\":[],"
               "\"exp\":1700000600}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT carries no roles");
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"tenant\":\"t1\",\"exp\":1700000600}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT carries no roles");
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"roles\":[\"invoker\"],\"exp\":1700000600}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT has no 'tenant' claim");
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"tenant\":\"../t1\",\"roles\":[\"invoker\"],"
               "\"exp\":1700000600}",
               SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "not a valid tenant name");
    make_token(&t, HS_HEADER, payload_with(",\"class\":\"gold\"", NOW + 600), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "'class'");
    make_token(&t, HS_HEADER, payload_with(",\"deadline_ms\":0", NOW + 600), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "'deadline_ms'");
    make_token(&t, HS_HEADER, payload_with(",\"deadline_ms\":86400001", NOW + 600), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "'deadline_ms'");
    make_token(&t, HS_HEADER, payload_with(",\"iat\":\"yesterday\"", NOW + 600), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "'iat'");
    make_token(&t, HS_HEADER, payload_with(",\"exp\":1", NOW + 600), SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT payload is malformed");
    make_token(&t, HS_HEADER, "{\"exp\":1700000600,", SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "JWT payload is malformed");
    make_token(&t, HS_HEADER, "{\"sub\":\"a\\nb\",\"iss\":\"https://issuer.example\",\"aud\":\"mcp2026\",\"tenant\":\"t1\","
               "\"roles\":[\"invoker\"],\"exp\":1700000600}", SIG_HS256);
    CHECK_REFUSED(a, t.text, NOW, "'sub'");
}

static void test_clock_skew(void)
{
    char config[1024], msg[512];
    mcp_auth *lenient = NULL, *strict = NULL;
    snprintf(config, sizeof config, "auth:\n  jwt:\n    hs256_secret_file: jwt.secret\n    clock_skew_s: 60\n");
    TU_REQUIRE_OK(parse_config(config, &lenient, msg, sizeof msg), msg);
    snprintf(config, sizeof config, "auth:\n  jwt:\n    hs256_secret_file: jwt.secret\n    clock_skew_s: 0\n");
    TU_REQUIRE_OK(parse_config(config, &strict, msg, sizeof msg), msg);
    token t;
    mcp_identity id;
    make_token(&t, HS_HEADER, "{\"tenant\":\"t1\",\"roles\":[\"viewer\"],\"exp\":1699999970}", SIG_HS256);
    TU_CHECK_STATUS(auth_bearer(lenient, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    CHECK_REFUSED(strict, t.text, NOW, "JWT expired");
    /* Exactly at exp + skew: expired. */
    CHECK_REFUSED(lenient, t.text, NOW + 30, "JWT expired");
    make_token(&t, HS_HEADER, "{\"tenant\":\"t1\",\"roles\":[\"viewer\"],\"exp\":1700000600,\"nbf\":1700000030}",
               SIG_HS256);
    TU_CHECK_STATUS(auth_bearer(lenient, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    CHECK_REFUSED(strict, t.text, NOW, "JWT not yet valid");
    /* Neither issuer nor audience configured: neither checked. */
    make_token(&t, HS_HEADER, "{\"iss\":\"x\",\"aud\":\"y\",\"tenant\":\"t1\",\"roles\":\"viewer\",\"exp\":1700000600}",
               SIG_HS256);
    TU_CHECK_STATUS(auth_bearer(strict, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_auth_destroy(lenient);
    mcp_auth_destroy(strict);

    /* require_exp: false accepts a token without exp. */
    mcp_auth *no_exp = NULL;
    snprintf(config, sizeof config, "auth:\n  jwt:\n    hs256_secret_file: jwt.secret\n    require_exp: false\n");
    TU_REQUIRE_OK(parse_config(config, &no_exp, msg, sizeof msg), msg);
    make_token(&t, HS_HEADER, "{\"tenant\":\"t1\",\"roles\":[\"viewer\"]}", SIG_HS256);
    TU_CHECK_STATUS(auth_bearer(no_exp, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_auth_destroy(no_exp);
}

/* An HS256 token MACed with the RSA public key's PEM as its secret: the
 * classic algorithm confusion. Refused with only RS256 configured (HS256 is
 * not accepted) and with both (the HS256 secret is not the PEM). */
static void test_algorithm_confusion(void)
{
    char config[1024], msg[512];
    mcp_auth *rs_only = NULL;
    snprintf(config, sizeof config,
             "auth:\n  jwt:\n    rs256_public_key_file: jwt.pub.pem\n    tenant_claim: org\n"
             "    roles_claim: https://mcp.example/roles\n");
    TU_REQUIRE_OK(parse_config(config, &rs_only, msg, sizeof msg), msg);
    TU_CHECK(!mcp_auth_jwt_hs256(rs_only) && mcp_auth_jwt_rs256(rs_only));
    const char *payload = "{\"org\":\"t1\",\"https://mcp.example/roles\":[\"admin\"],\"exp\":1700000600}";
    token t;
    for (int trailing = 0; trailing < 2; trailing++) {
        size_t n = signing_input(&t, HS_HEADER, payload);
        sign_with(&t, n, SIG_HS256, fx.pub_pem, strlen(fx.pub_pem) - (size_t)trailing);
        CHECK_REFUSED(rs_only, t.text, NOW, "JWT alg 'HS256' is not accepted (accepted: RS256)");
        CHECK_REFUSED(fx.auth, t.text, NOW, "JWT signature does not verify");
    }
    /* The same claims under RS256 pass, with the renamed claims. */
    make_token(&t, RS_HEADER, payload, SIG_RS256);
    mcp_identity id;
    TU_CHECK_STATUS(auth_bearer(rs_only, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STR(id.tenant, "t1");
    TU_CHECK_INT(id.roles, MCP_ROLE_ADMIN);
    mcp_auth_destroy(rs_only);

    /* With no auth.jwt, every JWT is refused. */
    mcp_auth *none = NULL;
    TU_REQUIRE_OK(parse_config("auth:\n  anonymous: []\n", &none, msg, sizeof msg), msg);
    make_token(&t, HS_HEADER, std_payload(), SIG_HS256);
    CHECK_REFUSED(none, t.text, NOW, "JWTs are not accepted here");
    mcp_auth_destroy(none);
}

/* ---- decisions ---- */

#define A(x) (1u << MCP_ACT_##x)
static unsigned default_grants(unsigned role)
{
    switch (role) {
    case MCP_ROLE_OPERATOR:
        return A(HEALTH) | A(SERVER) | A(METRICS) | A(METADATA) | A(STATS) | A(INFER) | A(GENERATE) | A(LOAD) |
               A(UNLOAD) | A(ROLLOUT) | A(EVENTS);
    case MCP_ROLE_INVOKER: return A(HEALTH) | A(SERVER) | A(METADATA) | A(INFER) | A(GENERATE);
    case MCP_ROLE_VIEWER: return A(HEALTH) | A(SERVER) | A(METADATA) | A(STATS) | A(METRICS);
    }
    return 0;
}

typedef enum model_kind { M_NONE, M_OWN, M_OTHER, M_SHARED, M_SHARED_LISTED, M_SHARED_UNLISTED, M_KINDS } model_kind;
static const char *const model_of[M_KINDS] = {NULL, "t1/resnet", "t2/resnet", "pub", "digits", "secret"};

static mcp_decision expected(unsigned role, mcp_action act, model_kind m)
{
    if (role == MCP_ROLE_ADMIN) return MCP_DECIDE_ALLOW;
    bool granted = default_grants(role) & (1u << act);
    bool admin_only = act == MCP_ACT_LOAD || act == MCP_ACT_UNLOAD || act == MCP_ACT_ROLLOUT;
    switch (m) {
    case M_NONE: return granted ? MCP_DECIDE_ALLOW : MCP_DECIDE_FORBIDDEN;
    case M_OWN: return granted ? MCP_DECIDE_ALLOW : MCP_DECIDE_FORBIDDEN;
    case M_OTHER: return MCP_DECIDE_HIDDEN;
    case M_SHARED:
    case M_SHARED_LISTED: return granted && !admin_only ? MCP_DECIDE_ALLOW : MCP_DECIDE_FORBIDDEN;
    case M_SHARED_UNLISTED: return MCP_DECIDE_HIDDEN;
    case M_KINDS: break;
    }
    return MCP_DECIDE_ALLOW;
}

static void test_decide_matrix(void)
{
    const mcp_auth *a = fx.auth;
    const unsigned roles[] = {MCP_ROLE_ADMIN, MCP_ROLE_OPERATOR, MCP_ROLE_INVOKER, MCP_ROLE_VIEWER};
    for (size_t r = 0; r < 4; r++) {
        mcp_identity id;
        mcp_identity_anonymous(&id);
        id.authenticated = true;
        id.via = "api-key";
        snprintf(id.tenant, sizeof id.tenant, "t1");
        id.roles = roles[r];
        for (int act = 0; act < MCP_ACT_COUNT; act++)
            for (int m = 0; m < M_KINDS; m++)
                for (int peer = MCP_PEER_REMOTE; peer <= MCP_PEER_LOCAL; peer++) {
                    mcp_decision got = mcp_auth_decide(a, &id, (mcp_peer)peer, (mcp_action)act, model_of[m]);
                    mcp_decision want = expected(roles[r], (mcp_action)act, (model_kind)m);
                    tu_checks++;
                    if (got != want)
                        TU_FAIL_AT(__FILE__, __LINE__, "role %u, %s on %s: got %d, expected %d", roles[r],
                                   mcp_action_name((mcp_action)act), model_of[m] ? model_of[m] : "(server)", got, want);
                }
        for (int m = 1; m < M_KINDS; m++) {
            bool want = roles[r] == MCP_ROLE_ADMIN || (m != M_OTHER && m != M_SHARED_UNLISTED);
            tu_checks++;
            if (mcp_auth_visible(a, &id, model_of[m]) != want)
                TU_FAIL_AT(__FILE__, __LINE__, "role %u: visible(%s) should be %d", roles[r], model_of[m], want);
        }
    }
    /* Several roles: the union of their actions. */
    mcp_identity id;
    mcp_identity_anonymous(&id);
    id.authenticated = true;
    snprintf(id.tenant, sizeof id.tenant, "t2");
    id.roles = MCP_ROLE_VIEWER | MCP_ROLE_INVOKER;
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_INFER, "t2/x"), MCP_DECIDE_ALLOW);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_STATS, "t2/x"), MCP_DECIDE_ALLOW);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_INFER, "secret"), MCP_DECIDE_ALLOW);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_INFER, "t1/x"), MCP_DECIDE_HIDDEN);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_EVENTS, NULL), MCP_DECIDE_FORBIDDEN);
    /* A tenant that is a prefix of another's is not that tenant. */
    snprintf(id.tenant, sizeof id.tenant, "t");
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_INFER, "t1/x"), MCP_DECIDE_HIDDEN);
    /* No tenant and no admin: shared models only. */
    id.tenant[0] = '\0';
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_INFER, "pub"), MCP_DECIDE_ALLOW);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_INFER, "digits"), MCP_DECIDE_HIDDEN);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_INFER, "t1/x"), MCP_DECIDE_HIDDEN);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_INFER, "/x"), MCP_DECIDE_HIDDEN);
    TU_CHECK(!mcp_auth_visible(a, &id, "/x"));
    /* No roles at all. */
    snprintf(id.tenant, sizeof id.tenant, "t1");
    id.roles = 0;
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_LOCAL, MCP_ACT_HEALTH, NULL), MCP_DECIDE_FORBIDDEN);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_LOCAL, MCP_ACT_INFER, "t1/x"), MCP_DECIDE_FORBIDDEN);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_LOCAL, MCP_ACT_COUNT, NULL), MCP_DECIDE_FORBIDDEN);
}

static void test_anonymous(void)
{
    mcp_identity anon;
    mcp_identity_anonymous(&anon);
    const mcp_auth *a = fx.auth;
    for (int act = 0; act < MCP_ACT_COUNT; act++) {
        bool dflt = act == MCP_ACT_HEALTH || act == MCP_ACT_METRICS;
        TU_CHECK_INT(mcp_auth_decide(a, &anon, MCP_PEER_REMOTE, (mcp_action)act, NULL), MCP_DECIDE_UNAUTHENTICATED);
        TU_CHECK_INT(mcp_auth_decide(a, &anon, MCP_PEER_LOOPBACK, (mcp_action)act, NULL),
                     dflt ? MCP_DECIDE_ALLOW : MCP_DECIDE_UNAUTHENTICATED);
        TU_CHECK_INT(mcp_auth_decide(a, &anon, MCP_PEER_LOCAL, (mcp_action)act, NULL),
                     dflt ? MCP_DECIDE_ALLOW : MCP_DECIDE_UNAUTHENTICATED);
        for (int m = 1; m < M_KINDS; m++)
            TU_CHECK_INT(mcp_auth_decide(a, &anon, MCP_PEER_LOCAL, (mcp_action)act, model_of[m]),
                         dflt && m == M_SHARED ? MCP_DECIDE_ALLOW : MCP_DECIDE_UNAUTHENTICATED);
    }
    TU_CHECK_INT(mcp_auth_decide(a, NULL, MCP_PEER_LOCAL, MCP_ACT_HEALTH, NULL), MCP_DECIDE_ALLOW);
    TU_CHECK_INT(mcp_auth_decide(a, NULL, MCP_PEER_LOCAL, MCP_ACT_COUNT, NULL), MCP_DECIDE_UNAUTHENTICATED);
    TU_CHECK(!mcp_auth_visible(a, &anon, "pub"));
    TU_CHECK(!mcp_auth_visible(a, &anon, "t1/x"));

    /* Configured explicitly: exactly those, from any peer; a model only
     * when shared with every tenant, and never load/unload/rollout. */
    char msg[512];
    mcp_auth *open = NULL;
    TU_REQUIRE_OK(parse_config("auth:\n  anonymous: [health, infer, load]\nshared_models:\n  digits: [t1]\n", &open,
                               msg, sizeof msg),
                  msg);
    for (int peer = MCP_PEER_REMOTE; peer <= MCP_PEER_LOCAL; peer++) {
        TU_CHECK_INT(mcp_auth_decide(open, &anon, (mcp_peer)peer, MCP_ACT_HEALTH, NULL), MCP_DECIDE_ALLOW);
        TU_CHECK_INT(mcp_auth_decide(open, &anon, (mcp_peer)peer, MCP_ACT_METRICS, NULL), MCP_DECIDE_UNAUTHENTICATED);
        TU_CHECK_INT(mcp_auth_decide(open, &anon, (mcp_peer)peer, MCP_ACT_INFER, "pub"), MCP_DECIDE_ALLOW);
        TU_CHECK_INT(mcp_auth_decide(open, &anon, (mcp_peer)peer, MCP_ACT_INFER, "digits"), MCP_DECIDE_UNAUTHENTICATED);
        TU_CHECK_INT(mcp_auth_decide(open, &anon, (mcp_peer)peer, MCP_ACT_INFER, "t1/x"), MCP_DECIDE_UNAUTHENTICATED);
        TU_CHECK_INT(mcp_auth_decide(open, &anon, (mcp_peer)peer, MCP_ACT_LOAD, "pub"), MCP_DECIDE_UNAUTHENTICATED);
        TU_CHECK_INT(mcp_auth_decide(open, &anon, (mcp_peer)peer, MCP_ACT_LOAD, NULL), MCP_DECIDE_ALLOW);
        TU_CHECK_INT(mcp_auth_decide(open, &anon, (mcp_peer)peer, MCP_ACT_METADATA, "pub"), MCP_DECIDE_UNAUTHENTICATED);
    }
    mcp_auth_destroy(open);

    mcp_auth *closed = NULL;
    TU_REQUIRE_OK(parse_config("auth:\n  anonymous: []\n", &closed, msg, sizeof msg), msg);
    TU_CHECK_INT(mcp_auth_decide(closed, &anon, MCP_PEER_LOCAL, MCP_ACT_HEALTH, NULL), MCP_DECIDE_UNAUTHENTICATED);
    mcp_auth_destroy(closed);
}

static void test_roles_configured(void)
{
    char msg[512];
    mcp_auth *a = NULL;
    TU_REQUIRE_OK(parse_config("auth:\n  roles:\n    viewer: [metadata, stats, metrics]\n    invoker: []\n", &a, msg,
                               sizeof msg),
                  msg);
    mcp_identity id;
    mcp_identity_anonymous(&id);
    id.authenticated = true;
    snprintf(id.tenant, sizeof id.tenant, "t1");
    id.roles = MCP_ROLE_VIEWER;
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_HEALTH, NULL), MCP_DECIDE_FORBIDDEN);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_STATS, "t1/m"), MCP_DECIDE_ALLOW);
    id.roles = MCP_ROLE_INVOKER;
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_INFER, "t1/m"), MCP_DECIDE_FORBIDDEN);
    id.roles = MCP_ROLE_OPERATOR;
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_ROLLOUT, "t1/m"), MCP_DECIDE_ALLOW);
    TU_CHECK_INT(mcp_auth_decide(a, &id, MCP_PEER_REMOTE, MCP_ACT_SETTINGS, NULL), MCP_DECIDE_FORBIDDEN);
    mcp_auth_destroy(a);
}

/* ---- tenants, disabled auth, loading from a file ---- */

static void test_tenant_limits(void)
{
    mcp_tenant_limits l = mcp_auth_tenant_limits(fx.auth, "t1");
    TU_CHECK_NEAR(l.weight, 2, 0);
    TU_CHECK_INT(l.max_concurrent, 64);
    TU_CHECK_NEAR(l.rps, 500, 0);
    TU_CHECK_NEAR(l.burst, 100, 0);
    TU_CHECK_INT(l.max_queued, 32);
    TU_CHECK_NEAR(l.tokens_per_s, 1000, 0);
    TU_CHECK_INT(l.class_, MCP_CLASS_CRITICAL);
    l = mcp_auth_tenant_limits(fx.auth, "t2");
    TU_CHECK_NEAR(l.weight, 1, 0);
    TU_CHECK_NEAR(l.rps, 0.5, 0);
    TU_CHECK_NEAR(l.burst, 1, 0);
    TU_CHECK_INT(l.class_, MCP_CLASS_NONE);
    l = mcp_auth_tenant_limits(fx.auth, "nobody");
    TU_CHECK_NEAR(l.weight, 1, 0);
    TU_CHECK_INT(l.max_concurrent, 0);
    TU_CHECK_NEAR(l.rps, 0, 0);
    TU_CHECK_INT(l.class_, MCP_CLASS_NONE);
    l = mcp_auth_tenant_limits(fx.auth, "");
    TU_CHECK_NEAR(l.weight, 1, 0);
    l = mcp_auth_tenant_limits(NULL, "t1");
    TU_CHECK_NEAR(l.weight, 1, 0);

    char msg[512];
    mcp_auth *a = NULL;
    TU_REQUIRE_OK(parse_config("tenants:\n  fast: {rps: 40}\n  idle:\n", &a, msg, sizeof msg), msg);
    TU_CHECK_NEAR(mcp_auth_tenant_limits(a, "fast").burst, 40, 0);
    TU_CHECK_NEAR(mcp_auth_tenant_limits(a, "idle").weight, 1, 0);
    mcp_auth_destroy(a);
}

static void test_disabled(void)
{
    char msg[512];
    mcp_auth *a = NULL;
    TU_REQUIRE_OK(parse_config("listen: 127.0.0.1:8000\ntenants:\n  t1: {weight: 3, class: batch}\n"
                               "shared_models:\n  digits: [t2]\n",
                               &a, msg, sizeof msg),
                  msg);
    TU_CHECK(!mcp_auth_enabled(a));
    TU_CHECK_INT(mcp_auth_key_count(a), 0);
    mcp_identity anon;
    mcp_identity_anonymous(&anon);
    for (int act = 0; act < MCP_ACT_COUNT; act++)
        for (int m = 0; m < M_KINDS; m++)
            TU_CHECK_INT(mcp_auth_decide(a, &anon, MCP_PEER_REMOTE, (mcp_action)act, model_of[m]), MCP_DECIDE_ALLOW);
    TU_CHECK(mcp_auth_visible(a, &anon, "digits"));
    TU_CHECK(mcp_auth_visible(a, &anon, "t9/x"));
    TU_CHECK_NEAR(mcp_auth_tenant_limits(a, "t1").weight, 3, 0);
    TU_CHECK_INT(mcp_auth_tenant_limits(a, "t1").class_, MCP_CLASS_BATCH);
    mcp_auth_destroy(a);

    TU_REQUIRE_OK(parse_config("", &a, msg, sizeof msg), msg);
    TU_CHECK(!mcp_auth_enabled(a));
    mcp_auth_destroy(a);
    TU_REQUIRE_OK(parse_config("# nothing but a comment\n", &a, msg, sizeof msg), msg);
    TU_CHECK(!mcp_auth_enabled(a));
    mcp_auth_destroy(a);
    TU_CHECK_INT(mcp_auth_decide(NULL, &anon, MCP_PEER_REMOTE, MCP_ACT_LOAD, "t1/x"), MCP_DECIDE_ALLOW);

    /* An empty auth section turns checking on (fail closed). */
    TU_REQUIRE_OK(parse_config("auth:\n", &a, msg, sizeof msg), msg);
    TU_CHECK(mcp_auth_enabled(a));
    TU_CHECK_INT(mcp_auth_decide(a, &anon, MCP_PEER_REMOTE, MCP_ACT_INFER, "pub"), MCP_DECIDE_UNAUTHENTICATED);
    mcp_auth_destroy(a);
}

static void test_load(void)
{
    char sub[600], path[700], msg[512];
    tu_path(sub, sizeof sub, fx.dir, "conf");
    TU_REQUIRE(mkdir(sub, 0700) == 0);
    char keys[256];
    snprintf(keys, sizeof keys, "- {sha256: %s, tenant: t3, roles: [invoker]}\n", key_hash(KEY_INLINE));
    write_text(sub, "k.yaml", keys);
    write_text(sub, "server.yaml", "auth:\n  api_keys_file: k.yaml\n");
    tu_path(path, sizeof path, sub, "server.yaml");
    mcp_err err = {msg, sizeof msg};
    mcp_auth *a = NULL;
    TU_REQUIRE_OK(mcp_auth_load(path, &a, &err), msg);
    mcp_identity id;
    TU_CHECK_STATUS(auth_bearer(a, KEY_INLINE, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STR(id.tenant, "t3");
    mcp_auth_destroy(a);
    tu_path(path, sizeof path, sub, "missing.yaml");
    TU_CHECK_STATUS(mcp_auth_load(path, &a, &err), MCP_STATUS_IO_ERROR, msg);
    TU_CHECK_CONTAINS(msg, "missing.yaml");
    TU_CHECK(a == NULL);
}

/* Quoted scalars read as YAML says, single-quoted ones included (the
 * parser decodes those itself: libfyaml 0.7.12 leaks on '' escapes). */
static void test_yaml_forms(void)
{
    char config[2048], msg[512];
    snprintf(config, sizeof config,
             "'''''''''''': ignored\n"
             "'auth':\n"
             "  'api_keys':\n"
             "    - {'sha256': '%s', \"tenant\": 't9', subject: 'o''brien ''''x''''', roles: ['viewer']}\n"
             "  jwt:\n"
             "    hs256_secret_file: 'jwt.secret'\n"
             "    issuer: 'https://issuer.example/a\n"
             "      b   \n"
             "\n"
             "      c'\n",
             key_hash(KEY_INLINE));
    mcp_auth *a = NULL;
    TU_REQUIRE_OK(parse_config(config, &a, msg, sizeof msg), msg);
    mcp_identity id;
    TU_CHECK_STATUS(auth_bearer(a, KEY_INLINE, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STR(id.tenant, "t9");
    TU_CHECK_STR(id.subject, "o'brien ''x''");
    token t;
    make_token(&t, HS_HEADER,
               "{\"iss\":\"https://issuer.example/a b\\nc\",\"tenant\":\"t9\",\"roles\":[\"viewer\"],"
               "\"exp\":1700000600}",
               SIG_HS256);
    TU_CHECK_STATUS(auth_bearer(a, t.text, NOW, &id, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_auth_destroy(a);

    TU_CHECK_STATUS(parse_config("tenants:\n  'a''b': {}\n", &a, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'a'b' is not a valid tenant name");
}

/* ---- config errors ---- */

typedef struct bad_config {
    const char *yaml;
    mcp_status status;
    const char *wants[3]; /* substrings of the message */
} bad_config;

static void test_config_errors(void)
{
    char dup[512], rsa_small[64] = "small.pem";
    snprintf(dup, sizeof dup, "auth:\n  api_keys_file: keys.yaml\n  api_keys:\n    - {sha256: %s, roles: [admin]}\n",
             key_hash(KEY_VIEWER));
    EVP_PKEY *small = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
    TU_REQUIRE(small != NULL);
    char *small_pem = public_pem(small);
    write_text(fx.dir, rsa_small, small_pem);
    free(small_pem);
    EVP_PKEY_free(small);
    write_text(fx.dir, "not.pem", "just text\n");
    write_text(fx.dir, "bad-role.yaml", "- {sha256: 0000000000000000000000000000000000000000000000000000000000000000, "
                                        "tenant: t1, roles: [viewer]}\n"
                                        "- sha256: 1111111111111111111111111111111111111111111111111111111111111111\n"
                                        "  tenant: t1\n"
                                        "  roles: [invokr]\n");

    const bad_config cases[] = {
        {"auth:\n  api_key_file: keys.yaml\n", MCP_STATUS_INVALID_ARGUMENT, {"auth (line 2:3)", "unknown key 'api_key_file'"}},
        {"auth:\n  jwt:\n    hs256_secret_file: jwt.secret\n    isuser: x\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.jwt (line 4:5)", "unknown key 'isuser'", "issuer"}},
        {"auth:\n  jwt:\n    hs256_secret_file: jwt.secret\n    clock_skew_s: 4000\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.jwt.clock_skew_s (line 4:19): must be 0 to 3600"}},
        {"auth:\n  jwt:\n    hs256_secret_file: jwt.secret\n    require_exp: maybe\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.jwt.require_exp (line 4:18)", "true or false"}},
        {"auth:\n  jwt:\n    issuer: x\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.jwt", "hs256_secret_file or rs256_public_key_file"}},
        {"auth:\n  jwt:\n    hs256_secret_file: short.secret\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.jwt.hs256_secret_file (line 3:24)", "shorter than 32 bytes"}},
        {"auth:\n  jwt:\n    hs256_secret_file: nowhere.secret\n", MCP_STATUS_IO_ERROR,
         {"auth.jwt.hs256_secret_file (line 3:24)", "nowhere.secret"}},
        {"auth:\n  jwt:\n    rs256_public_key_file: small.pem\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.jwt.rs256_public_key_file", "1024 bits", "2048"}},
        {"auth:\n  jwt:\n    rs256_public_key_file: not.pem\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.jwt.rs256_public_key_file", "PEM public key"}},
        {"auth:\n  jwt:\n    rs256_public_key_file: jwt.secret\n", MCP_STATUS_INVALID_ARGUMENT,
         {"PEM public key"}},
        {"auth:\n  api_keys_file: missing-keys.yaml\n", MCP_STATUS_IO_ERROR,
         {"auth.api_keys_file (line 2:18)", "missing-keys.yaml"}},
        {"auth:\n  api_keys_file: bad-role.yaml\n", MCP_STATUS_INVALID_ARGUMENT,
         {"bad-role.yaml entry 2 (line 4:11)", "roles: unknown role 'invokr'"}},
        {dup, MCP_STATUS_INVALID_ARGUMENT, {"duplicate sha256", "auth.api_keys entry 1", "keys.yaml entry 3"}},
        {"auth:\n  api_keys:\n    - {sha256: abc, tenant: t1, roles: [viewer]}\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.api_keys entry 1 (line 3:16)", "sha256", "64 hex digits"}},
        {"auth:\n  api_keys:\n    - {sha256: 2222222222222222222222222222222222222222222222222222222222222222, "
         "tenat: t1, roles: [viewer]}\n",
         MCP_STATUS_INVALID_ARGUMENT, {"auth.api_keys entry 1", "unknown key 'tenat'"}},
        {"auth:\n  api_keys:\n    - {sha256: 2222222222222222222222222222222222222222222222222222222222222222, "
         "tenant: 'a/b', roles: [viewer]}\n",
         MCP_STATUS_INVALID_ARGUMENT, {"auth.api_keys entry 1", "tenant: 'a/b' is not a valid tenant name"}},
        {"auth:\n  api_keys:\n    - {sha256: 2222222222222222222222222222222222222222222222222222222222222222, "
         "roles: [viewer]}\n",
         MCP_STATUS_INVALID_ARGUMENT, {"auth.api_keys entry 1", "tenant is required"}},
        {"auth:\n  api_keys:\n    - {sha256: 2222222222222222222222222222222222222222222222222222222222222222, "
         "tenant: t1, roles: []}\n",
         MCP_STATUS_INVALID_ARGUMENT, {"roles: needs at least one role"}},
        {"auth:\n  api_keys:\n    - {sha256: 2222222222222222222222222222222222222222222222222222222222222222, "
         "tenant: t1}\n",
         MCP_STATUS_INVALID_ARGUMENT, {"roles is required"}},
        {"auth:\n  anonymous: [health, everything]\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.anonymous (line 2:23)", "unknown action 'everything'"}},
        {"auth:\n  anonymous:\n", MCP_STATUS_INVALID_ARGUMENT, {"auth.anonymous", "list of actions"}},
        {"auth:\n  roles:\n    admin: [health]\n", MCP_STATUS_INVALID_ARGUMENT, {"auth.roles (line 3:5)", "admin"}},
        {"auth:\n  roles:\n    auditor: [events]\n", MCP_STATUS_INVALID_ARGUMENT, {"unknown role 'auditor'"}},
        {"auth:\n  roles:\n    viewer: [stats, deploy]\n", MCP_STATUS_INVALID_ARGUMENT,
         {"auth.roles.viewer", "unknown action 'deploy'"}},
        {"tenants:\n  t1: {weight: 0}\n", MCP_STATUS_INVALID_ARGUMENT, {"tenants.t1.weight (line 2:16)", "greater than 0"}},
        {"tenants:\n  t1: {weight: 1001}\n", MCP_STATUS_INVALID_ARGUMENT, {"tenants.t1.weight", "at most 1000"}},
        {"tenants:\n  t1: {wieght: 2}\n", MCP_STATUS_INVALID_ARGUMENT, {"tenants.t1 (line 2:8)", "unknown key 'wieght'"}},
        {"tenants:\n  t1: {class: gold}\n", MCP_STATUS_INVALID_ARGUMENT, {"tenants.t1.class", "critical, standard or batch"}},
        {"tenants:\n  t1: {rps: -1}\n", MCP_STATUS_INVALID_ARGUMENT, {"tenants.t1.rps", "must be 0 to"}},
        {"tenants:\n  t1: {max_concurrent: 1.5}\n", MCP_STATUS_INVALID_ARGUMENT, {"tenants.t1.max_concurrent", "integer"}},
        {"tenants:\n  ..: {}\n", MCP_STATUS_INVALID_ARGUMENT, {"tenants (line 2:3)", "'..' is not a valid tenant name"}},
        {"tenants:\n  a b: {}\n", MCP_STATUS_INVALID_ARGUMENT, {"'a b' is not a valid tenant name"}},
        {"shared_models:\n  t1/m: [t1]\n", MCP_STATUS_INVALID_ARGUMENT, {"shared_models (line 2:3)", "'t1/m'"}},
        {"shared_models:\n  m: [t1, 'x y']\n", MCP_STATUS_INVALID_ARGUMENT, {"shared_models.m", "'x y'"}},
        {"shared_models:\n  m: t1\n", MCP_STATUS_INVALID_ARGUMENT, {"shared_models.m", "list of tenants"}},
        {"tenants: [t1]\n", MCP_STATUS_INVALID_ARGUMENT, {"tenants (line 1:11)", "mapping"}},
        {"auth:\n  api_keys: &k []\n  anonymous: *k\n", MCP_STATUS_INVALID_ARGUMENT, {"auth.anonymous", "aliases"}},
        {"auth:\n  anonymous: !!set [health]\n", MCP_STATUS_INVALID_ARGUMENT, {"auth.anonymous", "tags"}},
        {"auth:\n  anonymous: [health\n", MCP_STATUS_INVALID_ARGUMENT, {"config (line", "YAML syntax error"}},
        {"auth: {}\nauth: {}\n", MCP_STATUS_INVALID_ARGUMENT, {"config (line 2", "duplicate key"}},
        {"auth: {}\n---\nauth: {}\n", MCP_STATUS_INVALID_ARGUMENT, {"more than one YAML document"}},
        {"- auth\n", MCP_STATUS_INVALID_ARGUMENT, {"config", "mapping"}},
        {"auth:\n  anonymous: [\"health\\0\"]\n", MCP_STATUS_INVALID_ARGUMENT, {"auth.anonymous", "NUL"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[1024];
        mcp_auth *a = (mcp_auth *)&a;
        mcp_status st = parse_config(cases[i].yaml, &a, msg, sizeof msg);
        tu_checks++;
        if (st != cases[i].status)
            TU_FAIL_AT(__FILE__, __LINE__, "case %zu: got '%s', expected '%s' (%s)", i, mcp_status_str(st),
                       mcp_status_str(cases[i].status), msg);
        TU_CHECK(a == NULL);
        for (int w = 0; w < 3 && cases[i].wants[w]; w++) {
            tu_checks++;
            if (!strstr(msg, cases[i].wants[w]))
                TU_FAIL_AT(__FILE__, __LINE__, "case %zu: message '%s' lacks '%s'", i, msg, cases[i].wants[w]);
        }
        tu_checks++;
        if (strstr(msg, "0123456789012345678901234567890") || strstr(msg, "secret-of") || strstr(msg, "just text"))
            TU_FAIL_AT(__FILE__, __LINE__, "case %zu: message '%s' quotes a file's contents", i, msg);
        mcp_auth_destroy(a);
    }

    /* Invalid UTF-8 and NUL bytes never reach the YAML parser. */
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_auth *a = NULL;
    static const char bad_utf8[] = "auth:\n  x: \xff\n";
    TU_CHECK_STATUS(mcp_auth_parse(bad_utf8, sizeof bad_utf8 - 1, fx.dir, &a, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "UTF-8");
    TU_CHECK_STATUS(mcp_auth_parse("auth: {}\n\0", 10, fx.dir, &a, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "NUL");
    TU_CHECK(a == NULL);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    fixture_setup();
    TU_RUN(test_names);
    TU_RUN(test_policy_key);
    TU_RUN(test_api_keys);
    TU_RUN(test_admin_token);
    TU_RUN(test_jwt_accepted);
    TU_RUN(test_jwt_refused);
    TU_RUN(test_clock_skew);
    TU_RUN(test_algorithm_confusion);
    TU_RUN(test_decide_matrix);
    TU_RUN(test_anonymous);
    TU_RUN(test_roles_configured);
    TU_RUN(test_tenant_limits);
    TU_RUN(test_disabled);
    TU_RUN(test_load);
    TU_RUN(test_yaml_forms);
    TU_RUN(test_config_errors);
    fixture_teardown();
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("serve_auth");
}
