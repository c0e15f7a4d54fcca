/*
 * TLS for the TCP listeners (private to src/serve/): HTTPS through
 * libmicrohttpd's GnuTLS, and gRPC core's TLS credentials. One set of
 * files serves both: the server's certificate chain and key, and
 * optionally a client CA whose certificates identify callers (their
 * subject's common name, mapped to an identity by auth.client_certificates).
 *
 * mcp_tls_reload reads the files again (SIGHUP): new handshakes use the
 * new certificate at once; files that do not load leave the old ones in
 * force. The Unix sockets stay plain (their file mode guards them).
 */
#ifndef MCP_SERVE_TLS_H
#define MCP_SERVE_TLS_H

#include <stdbool.h>

#include "base/base.h"

typedef enum mcp_tls_clients {
    MCP_TLS_CLIENTS_NONE = 0, /* no client certificates asked for */
    MCP_TLS_CLIENTS_OPTIONAL, /* asked for; one given must verify */
    MCP_TLS_CLIENTS_REQUIRE,  /* every caller must give one that verifies */
} mcp_tls_clients;

typedef struct mcp_tls_options {
    const char *cert_file;      /* PEM: the server's certificate, then its chain */
    const char *key_file;       /* PEM: its private key */
    const char *client_ca_file; /* PEM: CAs of client certificates; NULL = none asked for */
    mcp_tls_clients clients;    /* with a client CA: OPTIONAL or REQUIRE */
} mcp_tls_options;

typedef struct mcp_tls mcp_tls;

/* Reads and checks the files (errors name the file and what is wrong:
 * unreadable, not PEM, key does not match the certificate, expired). */
mcp_status mcp_tls_create(const mcp_tls_options *o, mcp_tls **out, mcp_err *err);
mcp_status mcp_tls_reload(mcp_tls *t, mcp_err *err);
void mcp_tls_destroy(mcp_tls *t);
mcp_tls_clients mcp_tls_client_mode(const mcp_tls *t);

/* A caller's certificate as its transport saw it. */
typedef struct mcp_tls_peer {
    bool presented;  /* the caller gave a certificate */
    bool verified;   /* it chains to the client CA and is valid now */
    char cn[129];    /* its subject's common name (verified only) */
    char why[200];   /* when presented and not verified: why not */
} mcp_tls_peer;

/* ---- HTTPS (libmicrohttpd) ---- */

/* The client CA's PEM text (MHD_OPTION_HTTPS_MEM_TRUST, which makes the
 * handshake ask for client certificates), or NULL. */
const char *mcp_tls_client_ca_pem(const mcp_tls *t);
/* The GnuTLS certificate callback for MHD_OPTION_HTTPS_CERT_CALLBACK
 * (a gnutls_certificate_retrieve_function2), serving t's current
 * certificate: one TLS configuration per process. */
void *mcp_tls_gnutls_callback(mcp_tls *t);
/* The caller's certificate on a GnuTLS session (a gnutls_session_t),
 * verified against the current client CA. */
void mcp_tls_gnutls_peer(mcp_tls *t, void *session, mcp_tls_peer *out);

/* ---- gRPC ---- */

/* Server credentials (grpc_server_credentials *) whose certificates
 * follow reloads; released by the caller. NULL when gRPC refuses them. */
void *mcp_tls_grpc_credentials(mcp_tls *t);
/* The caller's verified certificate on a call (a grpc_call *): gRPC
 * verified it during the handshake, so presented implies verified. */
void mcp_tls_grpc_peer(void *call, mcp_tls_peer *out);

#endif
