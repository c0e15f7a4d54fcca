/*
 * libFuzzer target: identities and access rules (serve/auth.c). The first
 * byte picks the input: 0, an Authorization value checked against a fixed
 * config (two API keys, the admin token, JWTs with a static HS256 secret
 * and a static RS256 public key); 1, a JWT payload that the harness signs
 * with that secret, so the claims are read; 2, a server config parsed with
 * a base folder that does not exist (file references fail cleanly), then
 * decisions for a few identities. A credential that passes gives a whole
 * identity (roles, a valid tenant unless admin); one that fails gives a
 * message that does not quote it; a config either parses or says why.
 * The clock is fixed, so runs repeat.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "serve/auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NOW 1700000000LL
#define FUZZ_SECRET "fuzz-hs256-secret-0123456789abcdef0123456789"
#define FUZZ_KEY_INVOKER "fuzz-api-key-invoker-0001"
#define FUZZ_KEY_ADMIN "fuzz-api-key-admin-0001"
#define FUZZ_ADMIN_TOKEN "fuzz-admin-token-0123456789"

/* Made once with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`
 * and `openssl pkey -pubout`; the private half signed the RS256 seed and
 * was not kept. */
static const char fuzz_public_pem[] =
    "-----BEGIN PUBLIC KEY-----\n"
    "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwUp6YOeSBK5iZe+aLMXk\n"
    "OdPk+qNe2QXiZWyQhNB5q/6g4Mnox3eDN0bLU0gEhebEwUApGHiw7/EKtCKcRUqX\n"
    "dUvjUJtCxRHu6MFgrhBnC2ah0HNUzKME694SxHSsZW9bHRFOVbyMEPdT+J7Rm5r4\n"
    "gA+HuFhDh2B5JKclBUMiEUnEpASWueIbwhJ45EZ3gN4XB6gFHng2RxroJwBbgli4\n"
    "CsfLNt/KnxIkz68kMMu7cErPe/Nkfy97ja5gsFMPFyFNl1XKtXr3Yue2NRJNdTA+\n"
    "8CIhCx3UpP1ucGarbAHLhejiUtaEUfiYOw+8JCQkZYwQ9DSffPnUlRUb4wSgEMBo\n"
    "NwIDAQAB\n"
    "-----END PUBLIC KEY-----\n";

/* The fixed config's folder: its secret and public key files live there
 * only while it is parsed. */
static char fuzz_dir[512];

static void write_file(const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir, name);
    FILE *f = fopen(path, "wb");
    MCP_ASSERT(f && fwrite(text, 1, strlen(text), f) == strlen(text));
    fclose(f);
}

static void remove_file(const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir, name);
    unlink(path);
}

static mcp_auth *fixed_auth(void)
{
    static mcp_auth *a;
    if (a) return a;
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/mcp-fuzz-auth-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    MCP_ASSERT(mkdtemp(fuzz_dir));
    write_file("jwt.secret", FUZZ_SECRET "\n");
    write_file("jwt.pub.pem", fuzz_public_pem);
    char invoker[65], admin[65], yaml[2048];
    mcp_auth_key_hash(FUZZ_KEY_INVOKER, strlen(FUZZ_KEY_INVOKER), invoker);
    mcp_auth_key_hash(FUZZ_KEY_ADMIN, strlen(FUZZ_KEY_ADMIN), admin);
    snprintf(yaml, sizeof yaml,
             "auth:\n"
             "  api_keys:\n"
             "    - {sha256: %s, tenant: t1, subject: fuzz, roles: [invoker]}\n"
             "    - {sha256: %s, roles: [admin]}\n"
             "  jwt:\n"
             "    issuer: https://issuer.example\n"
             "    audience: mcp2026\n"
             "    hs256_secret_file: jwt.secret\n"
             "    rs256_public_key_file: jwt.pub.pem\n"
             "tenants:\n"
             "  t1: {weight: 2, rps: 10}\n"
             "shared_models:\n"
             "  digits: [t1]\n",
             invoker, admin);
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    if (mcp_auth_parse(yaml, strlen(yaml), fuzz_dir, &a, &err) != MCP_STATUS_OK) {
        fprintf(stderr, "fuzz_auth: the fixed config does not parse: %s\n", msg);
        abort();
    }
    MCP_ASSERT(mcp_auth_set_admin_token(a, FUZZ_ADMIN_TOKEN, &err) == MCP_STATUS_OK);
    remove_file("jwt.secret");
    remove_file("jwt.pub.pem");
    rmdir(fuzz_dir);
    return a;
}

static bool tenant_rule(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > MCP_AUTH_TENANT_MAX || !strcmp(t, ".") || !strcmp(t, "..")) return false;
    return strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static const char *const models[] = {NULL, "t1/m", "t2/m", "digits", "pub", "/x"};
#define N_MODELS (sizeof models / sizeof models[0])

/* Decisions agree with visibility: nothing hidden is allowed. */
static void check_decisions(const mcp_auth *a, const mcp_identity *id)
{
    for (int act = 0; act <= MCP_ACT_COUNT; act++)
        for (size_t m = 0; m < N_MODELS; m++)
            for (int peer = MCP_PEER_REMOTE; peer <= MCP_PEER_LOCAL; peer++) {
                mcp_decision d = mcp_auth_decide(a, id, (mcp_peer)peer, (mcp_action)act, models[m]);
                MCP_ASSERT(d >= MCP_DECIDE_ALLOW && d <= MCP_DECIDE_HIDDEN);
                if (!mcp_auth_enabled(a)) MCP_ASSERT(d == MCP_DECIDE_ALLOW);
                if (!id->authenticated) MCP_ASSERT(d == MCP_DECIDE_ALLOW || d == MCP_DECIDE_UNAUTHENTICATED);
                if (act == MCP_ACT_COUNT && mcp_auth_enabled(a)) MCP_ASSERT(d != MCP_DECIDE_ALLOW);
                if (d == MCP_DECIDE_ALLOW && models[m] && id->authenticated) MCP_ASSERT(mcp_auth_visible(a, id, models[m]));
            }
}

/* A passing credential is a whole identity; a failing one says why
 * without quoting itself. */
static void check_authenticate(const mcp_auth *a, const char *value)
{
    mcp_identity id;
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_auth_authenticate(a, value, FUZZ_NOW, &id, &err);
    if (st != MCP_STATUS_OK) {
        MCP_ASSERT(msg[0] && !id.authenticated && id.roles == 0);
        const char *cred = strncmp(value, "Bearer ", 7) == 0 ? value + 7 : value;
        if (strlen(cred) >= 24) MCP_ASSERT(!strstr(msg, cred));
        return;
    }
    if (!id.authenticated) {
        MCP_ASSERT(value[0] == '\0' && id.roles == 0);
    } else {
        MCP_ASSERT(id.roles != 0 && (id.roles & ~0xfu) == 0);
        MCP_ASSERT((id.roles & MCP_ROLE_ADMIN) || tenant_rule(id.tenant));
        MCP_ASSERT(id.tenant[0] == '\0' || tenant_rule(id.tenant));
        size_t sl = strlen(id.subject);
        MCP_ASSERT(sl > 0 && sl <= MCP_AUTH_SUBJECT_MAX);
        for (size_t i = 0; i < sl; i++) MCP_ASSERT((unsigned char)id.subject[i] >= 0x20 && id.subject[i] != 0x7f);
        MCP_ASSERT(id.via && id.sla_class >= MCP_CLASS_NONE && id.sla_class <= MCP_CLASS_BATCH);
        MCP_ASSERT(id.sla_deadline_ms >= 0 && id.sla_deadline_ms <= 86400000);
    }
    check_decisions(a, &id);
}

static void b64url(const uint8_t *in, size_t n, char *out)
{
    static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t w = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n) v |= in[i + 2];
        out[w++] = alpha[v >> 18];
        out[w++] = alpha[(v >> 12) & 63];
        if (i + 1 < n) out[w++] = alpha[(v >> 6) & 63];
        if (i + 2 < n) out[w++] = alpha[v & 63];
    }
    out[w] = '\0';
}

/* "Bearer " + an HS256 JWT of the given payload, signed with FUZZ_SECRET. */
static void check_signed_payload(const mcp_auth *a, const uint8_t *payload, size_t n)
{
    static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    size_t cap = 7 + (sizeof header + n + 32) * 4 / 3 + 16;
    char *value = malloc(cap);
    if (!value) return;
    memcpy(value, "Bearer ", 7);
    char *p = value + 7;
    b64url((const uint8_t *)header, sizeof header - 1, p);
    p += strlen(p);
    *p++ = '.';
    b64url(payload, n, p);
    p += strlen(p);
    uint8_t mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    MCP_ASSERT(HMAC(EVP_sha256(), FUZZ_SECRET, (int)strlen(FUZZ_SECRET), (const uint8_t *)value + 7,
                    (size_t)(p - value - 7), mac, &mac_len));
    *p++ = '.';
    b64url(mac, mac_len, p);
    check_authenticate(a, value);
    free(value);
}

static void check_config(const uint8_t *yaml, size_t n)
{
    mcp_auth *a = NULL;
    char msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_auth_parse((const char *)yaml, n, "/nonexistent/mcp-fuzz-auth", &a, &err);
    if (st != MCP_STATUS_OK) {
        MCP_ASSERT(a == NULL && msg[0]);
        MCP_ASSERT(st == MCP_STATUS_INVALID_ARGUMENT || st == MCP_STATUS_IO_ERROR || st == MCP_STATUS_OUT_OF_MEMORY);
        return;
    }
    MCP_ASSERT(!mcp_auth_jwt_hs256(a) && !mcp_auth_jwt_rs256(a));
    mcp_identity id;
    mcp_identity_anonymous(&id);
    check_decisions(a, &id);
    static const unsigned roles[] = {MCP_ROLE_ADMIN, MCP_ROLE_OPERATOR, MCP_ROLE_INVOKER, MCP_ROLE_VIEWER,
                                     MCP_ROLE_INVOKER | MCP_ROLE_VIEWER};
    static const char *const tenants[] = {"t1", "t2", ""};
    id.authenticated = true;
    id.via = "api-key";
    for (size_t r = 0; r < sizeof roles / sizeof roles[0]; r++)
        for (size_t t = 0; t < sizeof tenants / sizeof tenants[0]; t++) {
            id.roles = roles[r];
            snprintf(id.tenant, sizeof id.tenant, "%s", tenants[t]);
            check_decisions(a, &id);
        }
    for (size_t t = 0; t < sizeof tenants / sizeof tenants[0]; t++) {
        mcp_tenant_limits l = mcp_auth_tenant_limits(a, tenants[t]);
        MCP_ASSERT(l.weight > 0 && l.weight <= 1000 && l.burst >= 1 && l.rps >= 0 && l.max_concurrent >= 0);
        MCP_ASSERT(l.class_ >= MCP_CLASS_NONE && l.class_ <= MCP_CLASS_BATCH);
    }
    check_authenticate(a, "Bearer " FUZZ_KEY_INVOKER);
    check_authenticate(a, "Bearer a.b.c");
    mcp_auth_destroy(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int mode = data[0] % 3;
    if (mode == 2) {
        check_config(data + 1, size - 1);
        return 0;
    }
    const mcp_auth *a = fixed_auth();
    if (mode == 1) {
        check_signed_payload(a, data + 1, size - 1);
        return 0;
    }
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    check_authenticate(a, text);
    free(text);
    return 0;
}
