/*
 * TLS for the TCP listeners: one set of certificate files for HTTPS
 * (libmicrohttpd over GnuTLS) and gRPC (gRPC core's TLS), reloadable.
 *
 * Every load builds a complete, immutable set (tls_creds) and publishes it
 * with one atomic store; handshakes take whatever set is current. Sets are
 * never freed before mcp_tls_destroy, since a handshake may still hold the
 * previous one's certificate (a reload is an operator's SIGHUP, so they are
 * few).
 */
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "serve/tls.h"

#define TLS_FILE_MAX_BYTES (1u << 20)
#define TLS_CHAIN_MAX 16

typedef struct tls_creds {
    struct tls_creds *older;
    gnutls_pcert_st pcerts[TLS_CHAIN_MAX];
    unsigned n_pcerts;
    gnutls_privkey_t key;
    gnutls_x509_trust_list_t trust; /* client CAs; NULL = none */
    char *cert_pem, *key_pem, *ca_pem;
} tls_creds;

struct mcp_tls {
    char *cert_file, *key_file, *ca_file;
    mcp_tls_clients clients;
    _Atomic(tls_creds *) current;
    pthread_mutex_t mu;   /* reloads, and the list of sets */
    tls_creds *served_grpc; /* the set gRPC has (its fetcher's; under mu) */
};

/* libmicrohttpd's certificate callback has no user pointer: the one TLS
 * configuration of the process. */
static _Atomic(mcp_tls *) process_tls;

static char *read_text(const char *path, const char *what, mcp_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        mcp_err_set(err, MCP_STATUS_IO_ERROR, "%s %s: cannot read it", what, path);
        return NULL;
    }
    char *buf = mcp_malloc(TLS_FILE_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, TLS_FILE_MAX_BYTES + 1, f) : 0;
    bool failed = buf && ferror(f);
    fclose(f);
    if (!buf) {
        mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    if (failed || n > TLS_FILE_MAX_BYTES) {
        mcp_free(buf);
        mcp_err_set(err, MCP_STATUS_IO_ERROR, "%s %s: %s", what, path, failed ? "cannot read it" : "larger than 1 MiB");
        return NULL;
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        mcp_free(buf);
        mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s %s: not a PEM file (it holds NUL bytes)", what, path);
        return NULL;
    }
    return buf;
}

static void creds_free(tls_creds *c)
{
    while (c) {
        tls_creds *older = c->older;
        for (unsigned i = 0; i < c->n_pcerts; i++) gnutls_pcert_deinit(&c->pcerts[i]);
        if (c->key) gnutls_privkey_deinit(c->key);
        if (c->trust) gnutls_x509_trust_list_deinit(c->trust, 1);
        if (c->key_pem) explicit_bzero(c->key_pem, strlen(c->key_pem));
        mcp_free(c->cert_pem);
        mcp_free(c->key_pem);
        mcp_free(c->ca_pem);
        mcp_free(c);
        c = older;
    }
}

static gnutls_datum_t datum(const char *text) { return (gnutls_datum_t){(unsigned char *)text, (unsigned)strlen(text)}; }

/* The certificate's validity now: "" when valid, else why not. */
static void validity(const gnutls_datum_t *der, char *why, size_t cap)
{
    why[0] = '\0';
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0) return;
    if (gnutls_x509_crt_import(crt, der, GNUTLS_X509_FMT_DER) == 0) {
        time_t now = time(NULL), until = gnutls_x509_crt_get_expiration_time(crt),
               from = gnutls_x509_crt_get_activation_time(crt);
        if (until != (time_t)-1 && until < now) snprintf(why, cap, "it expired");
        else if (from != (time_t)-1 && from > now) snprintf(why, cap, "it is not valid yet");
    }
    gnutls_x509_crt_deinit(crt);
}

/* Whether the private key is the certificate's (same public key id). */
static bool key_matches(gnutls_pcert_st *pc, gnutls_privkey_t key)
{
    gnutls_pubkey_t pub;
    if (gnutls_pubkey_init(&pub) < 0) return false;
    unsigned char a[64], b[64];
    size_t la = sizeof a, lb = sizeof b;
    bool same = gnutls_pubkey_import_privkey(pub, key, 0, 0) == 0 && gnutls_pubkey_get_key_id(pub, 0, a, &la) == 0 &&
                gnutls_pubkey_get_key_id(pc->pubkey, 0, b, &lb) == 0 && la == lb && memcmp(a, b, la) == 0;
    gnutls_pubkey_deinit(pub);
    return same;
}

static mcp_status creds_load(const mcp_tls *t, tls_creds **out, mcp_err *err)
{
    *out = NULL;
    tls_creds *c = mcp_calloc(1, sizeof *c);
    if (!c) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = MCP_STATUS_OK;
    if (!(c->cert_pem = read_text(t->cert_file, "--tls-cert", err)) || !(c->key_pem = read_text(t->key_file, "--tls-key", err)) ||
        (t->ca_file && !(c->ca_pem = read_text(t->ca_file, "--tls-client-ca", err)))) {
        creds_free(c);
        return MCP_STATUS_IO_ERROR;
    }
    gnutls_datum_t cert = datum(c->cert_pem), key = datum(c->key_pem);
    c->n_pcerts = TLS_CHAIN_MAX;
    int rc = gnutls_pcert_list_import_x509_raw(c->pcerts, &c->n_pcerts, &cert, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0 || c->n_pcerts == 0) {
        c->n_pcerts = 0;
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "--tls-cert %s: not a PEM certificate chain (%s)", t->cert_file,
                         gnutls_strerror(rc));
    }
    char why[64];
    if (st == MCP_STATUS_OK) {
        validity(&c->pcerts[0].cert, why, sizeof why);
        if (why[0]) st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "--tls-cert %s: %s", t->cert_file, why);
    }
    if (st == MCP_STATUS_OK && (gnutls_privkey_init(&c->key) < 0 ||
                                (rc = gnutls_privkey_import_x509_raw(c->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "--tls-key %s: not an unencrypted PEM private key (%s)",
                         t->key_file, gnutls_strerror(rc));
    if (st == MCP_STATUS_OK && !key_matches(&c->pcerts[0], c->key))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "--tls-key %s is not the key of the certificate in %s",
                         t->key_file, t->cert_file);
    if (st == MCP_STATUS_OK && c->ca_pem) {
        gnutls_datum_t ca = datum(c->ca_pem);
        if (gnutls_x509_trust_list_init(&c->trust, 0) < 0 ||
            (rc = gnutls_x509_trust_list_add_trust_mem(c->trust, &ca, NULL, GNUTLS_X509_FMT_PEM, 0, 0)) <= 0)
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "--tls-client-ca %s: no PEM certificate in it",
                             t->ca_file);
    }
    if (st != MCP_STATUS_OK) {
        creds_free(c);
        return st;
    }
    *out = c;
    return MCP_STATUS_OK;
}

mcp_status mcp_tls_create(const mcp_tls_options *o, mcp_tls **out, mcp_err *err)
{
    *out = NULL;
    if (!o->cert_file || !o->key_file)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "TLS needs both --tls-cert and --tls-key");
    if (o->clients != MCP_TLS_CLIENTS_NONE && !o->client_ca_file)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "client certificates need --tls-client-ca (the CAs that issue them)");
    mcp_tls *t = mcp_calloc(1, sizeof *t);
    if (!t) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    t->cert_file = mcp_strdup(o->cert_file);
    t->key_file = mcp_strdup(o->key_file);
    t->ca_file = o->client_ca_file ? mcp_strdup(o->client_ca_file) : NULL;
    t->clients = o->client_ca_file && o->clients == MCP_TLS_CLIENTS_NONE ? MCP_TLS_CLIENTS_OPTIONAL : o->clients;
    tls_creds *c = NULL;
    mcp_status st = !t->cert_file || !t->key_file || (o->client_ca_file && !t->ca_file)
                        ? mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory")
                        : creds_load(t, &c, err);
    if (st != MCP_STATUS_OK) {
        mcp_tls_destroy(t);
        return st;
    }
    atomic_store(&t->current, c);
    *out = t;
    return MCP_STATUS_OK;
}

mcp_status mcp_tls_reload(mcp_tls *t, mcp_err *err)
{
    tls_creds *c = NULL;
    mcp_status st = creds_load(t, &c, err);
    if (st != MCP_STATUS_OK) return st;
    pthread_mutex_lock(&t->mu);
    c->older = atomic_load(&t->current);
    atomic_store(&t->current, c);
    pthread_mutex_unlock(&t->mu);
    return MCP_STATUS_OK;
}

void mcp_tls_destroy(mcp_tls *t)
{
    if (!t) return;
    mcp_tls *self = t;
    atomic_compare_exchange_strong(&process_tls, &self, NULL);
    creds_free(atomic_load(&t->current));
    pthread_mutex_destroy(&t->mu);
    mcp_free(t->cert_file);
    mcp_free(t->key_file);
    mcp_free(t->ca_file);
    mcp_free(t);
}

mcp_tls_clients mcp_tls_client_mode(const mcp_tls *t) { return t->clients; }

/* ---- HTTPS ---- */

const char *mcp_tls_client_ca_pem(const mcp_tls *t)
{
    tls_creds *c = atomic_load(&((mcp_tls *)t)->current);
    return c->ca_pem;
}

static int gnutls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                           const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                           unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
    (void)session, (void)req_ca_rdn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
    mcp_tls *t = atomic_load(&process_tls);
    tls_creds *c = t ? atomic_load(&t->current) : NULL;
    if (!c) return -1;
    *pcert = c->pcerts;
    *pcert_length = c->n_pcerts;
    *pkey = c->key;
    return 0;
}

void *mcp_tls_gnutls_callback(mcp_tls *t)
{
    atomic_store(&process_tls, t);
    return (void *)gnutls_retrieve;
}

static void verify_failure(unsigned status, char *why, size_t cap)
{
    if (status & GNUTLS_CERT_EXPIRED) snprintf(why, cap, "the client certificate expired");
    else if (status & GNUTLS_CERT_NOT_ACTIVATED) snprintf(why, cap, "the client certificate is not valid yet");
    else if (status & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA))
        snprintf(why, cap, "the client certificate is not issued by a CA of --tls-client-ca");
    else if (status & GNUTLS_CERT_REVOKED) snprintf(why, cap, "the client certificate is revoked");
    else snprintf(why, cap, "the client certificate does not verify (status 0x%x)", status);
}

void mcp_tls_gnutls_peer(mcp_tls *t, void *session, mcp_tls_peer *out)
{
    memset(out, 0, sizeof *out);
    unsigned n = 0;
    const gnutls_datum_t *list = session ? gnutls_certificate_get_peers(session, &n) : NULL;
    if (!list || n == 0) return;
    out->presented = true;
    tls_creds *c = atomic_load(&t->current);
    if (!c->trust) {
        snprintf(out->why, sizeof out->why, "the server takes no client certificates (no --tls-client-ca)");
        return;
    }
    if (n > TLS_CHAIN_MAX) n = TLS_CHAIN_MAX;
    gnutls_x509_crt_t crts[TLS_CHAIN_MAX];
    unsigned got = 0;
    for (; got < n; got++) {
        if (gnutls_x509_crt_init(&crts[got]) < 0) break;
        if (gnutls_x509_crt_import(crts[got], &list[got], GNUTLS_X509_FMT_DER) < 0) {
            gnutls_x509_crt_deinit(crts[got]);
            break;
        }
    }
    unsigned status = 0;
    if (got == 0) {
        snprintf(out->why, sizeof out->why, "the client certificate cannot be read");
    } else if (gnutls_x509_trust_list_verify_crt2(c->trust, crts, got, NULL, 0, 0, &status, NULL) < 0 || status) {
        verify_failure(status, out->why, sizeof out->why);
    } else {
        size_t size = sizeof out->cn - 1;
        if (gnutls_x509_crt_get_dn_by_oid(crts[0], GNUTLS_OID_X520_COMMON_NAME, 0, 0, out->cn, &size) < 0) {
            out->cn[0] = '\0';
            snprintf(out->why, sizeof out->why, "the client certificate's subject has no common name");
        } else {
            out->cn[size < sizeof out->cn ? size : sizeof out->cn - 1] = '\0';
            out->verified = true;
        }
    }
    for (unsigned i = 0; i < got; i++) gnutls_x509_crt_deinit(crts[i]);
}

/* ---- gRPC ---- */

static grpc_ssl_certificate_config_reload_status grpc_fetch(void *user, grpc_ssl_server_certificate_config **config)
{
    mcp_tls *t = user;
    pthread_mutex_lock(&t->mu);
    tls_creds *c = atomic_load(&t->current);
    grpc_ssl_certificate_config_reload_status st = GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
    if (c != t->served_grpc) {
        grpc_ssl_pem_key_cert_pair pair = {c->key_pem, c->cert_pem};
        *config = grpc_ssl_server_certificate_config_create(c->ca_pem, &pair, 1);
        if (*config) {
            t->served_grpc = c;
            st = GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
        } else {
            st = GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_FAIL;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

void *mcp_tls_grpc_credentials(mcp_tls *t)
{
    grpc_ssl_client_certificate_request_type req =
        t->clients == MCP_TLS_CLIENTS_REQUIRE    ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
        : t->clients == MCP_TLS_CLIENTS_OPTIONAL ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                                                 : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    grpc_ssl_server_credentials_options *o = grpc_ssl_server_credentials_create_options_using_config_fetcher(req, grpc_fetch, t);
    return o ? grpc_ssl_server_credentials_create_with_options(o) : NULL;
}

void mcp_tls_grpc_peer(void *call, mcp_tls_peer *out)
{
    memset(out, 0, sizeof *out);
    grpc_auth_context *ctx = call ? grpc_call_auth_context(call) : NULL;
    if (!ctx) return;
    grpc_auth_property_iterator it = grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_CN_PROPERTY_NAME);
    const grpc_auth_property *p = grpc_auth_property_iterator_next(&it);
    if (p && p->value && p->value_length > 0) {
        size_t n = p->value_length < sizeof out->cn - 1 ? p->value_length : sizeof out->cn - 1;
        memcpy(out->cn, p->value, n);
        out->cn[n] = '\0';
        out->presented = out->verified = strlen(out->cn) == n; /* no NUL inside */
    }
    grpc_auth_context_release(ctx);
}
