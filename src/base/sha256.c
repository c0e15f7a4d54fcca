/*
 * SHA-256 through OpenSSL's libcrypto (EVP), for content-addressed blobs:
 * incremental hashing, whole files, and the "sha256:<hex>" digest strings
 * of the OCI image layout.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"

mcp_status mcp_sha256_begin(mcp_sha256 *h, mcp_err *err)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        h->ctx = NULL;
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot start a SHA-256 digest");
    }
    h->ctx = ctx;
    return MCP_STATUS_OK;
}

void mcp_sha256_update(mcp_sha256 *h, const void *data, size_t len)
{
    if (h->ctx && len) EVP_DigestUpdate(h->ctx, data, len);
}

void mcp_sha256_end(mcp_sha256 *h, char digest[MCP_DIGEST_LEN + 1])
{
    unsigned char md[32];
    unsigned int n = 0;
    digest[0] = '\0';
    if (!h->ctx) return;
    if (EVP_DigestFinal_ex(h->ctx, md, &n) == 1 && n == 32) {
        static const char hex[] = "0123456789abcdef";
        memcpy(digest, "sha256:", 7);
        for (int i = 0; i < 32; i++) {
            digest[7 + 2 * i] = hex[md[i] >> 4];
            digest[8 + 2 * i] = hex[md[i] & 15];
        }
        digest[MCP_DIGEST_LEN] = '\0';
    }
    EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
}

mcp_status mcp_sha256_bytes(const void *data, size_t len, char digest[MCP_DIGEST_LEN + 1], mcp_err *err)
{
    mcp_sha256 h;
    mcp_status st = mcp_sha256_begin(&h, err);
    if (st != MCP_STATUS_OK) return st;
    mcp_sha256_update(&h, data, len);
    mcp_sha256_end(&h, digest);
    return digest[0] ? MCP_STATUS_OK : mcp_err_set(err, MCP_STATUS_INTERNAL, "SHA-256 failed");
}

mcp_status mcp_sha256_file(const char *path, char digest[MCP_DIGEST_LEN + 1], int64_t *size, mcp_err *err)
{
    digest[0] = '\0';
    if (size) *size = 0;
    FILE *f;
    mcp_status st = mcp_file_open_regular(path, &f, err);
    if (st != MCP_STATUS_OK) return st;
    mcp_sha256 h;
    st = mcp_sha256_begin(&h, err);
    unsigned char buf[1 << 16];
    int64_t total = 0;
    size_t n;
    while (st == MCP_STATUS_OK && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        mcp_sha256_update(&h, buf, n);
        total += (int64_t)n;
    }
    if (st == MCP_STATUS_OK && ferror(f)) st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot read '%s': %s", path, strerror(errno));
    fclose(f);
    if (st != MCP_STATUS_OK) {
        EVP_MD_CTX_free(h.ctx);
        return st;
    }
    mcp_sha256_end(&h, digest);
    if (!digest[0]) return mcp_err_set(err, MCP_STATUS_INTERNAL, "SHA-256 of '%s' failed", path);
    if (size) *size = total;
    return MCP_STATUS_OK;
}

bool mcp_digest_valid(const char *s)
{
    if (!s || strncmp(s, "sha256:", 7) != 0) return false;
    for (int i = 0; i < 64; i++) {
        char c = s[7 + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return s[MCP_DIGEST_LEN] == '\0';
}
