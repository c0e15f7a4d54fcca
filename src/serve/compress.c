/*
 * HTTP content codings (zlib): request bodies sent with Content-Encoding
 * gzip or deflate are inflated, bounded by the body limit after inflation
 * (a zip bomb stops at the limit, never past it); responses are gzipped for
 * clients that accept it.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "serve/serve.h"

mcp_content_coding mcp_content_coding_parse(const char *value)
{
    if (!value) return MCP_CODING_IDENTITY;
    while (*value == ' ' || *value == '\t') value++;
    size_t n = strlen(value);
    while (n && (value[n - 1] == ' ' || value[n - 1] == '\t')) n--;
    if (n == 0 || (n == 8 && !strncasecmp(value, "identity", 8))) return MCP_CODING_IDENTITY;
    if ((n == 4 && !strncasecmp(value, "gzip", 4)) || (n == 6 && !strncasecmp(value, "x-gzip", 6))) return MCP_CODING_GZIP;
    if (n == 7 && !strncasecmp(value, "deflate", 7)) return MCP_CODING_DEFLATE;
    return MCP_CODING_UNKNOWN;
}

static mcp_status inflate_with(const uint8_t *in, size_t n, int window_bits, size_t limit, mcp_buf *out, mcp_err *err)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, window_bits) != Z_OK) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory inflating the body");
    z.next_in = (Bytef *)in;
    mcp_status st = MCP_STATUS_OK;
    uint8_t chunk[16384];
    size_t left = n;
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        /* Feed at most 1 GiB at a time: avail_in is 32 bits. */
        if (z.avail_in == 0 && left) {
            z.avail_in = left > (1u << 30) ? 1u << 30 : (uInt)left;
            left -= z.avail_in;
        }
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && z.avail_out == 0)) {
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the body is not valid %s data (%s)",
                             window_bits > 15 ? "gzip" : "deflate", z.msg ? z.msg : "truncated");
            break;
        }
        size_t got = sizeof chunk - z.avail_out;
        if (out->len + got > limit) {
            st = mcp_err_set(err, MCP_STATUS_TOO_LARGE, "the body inflates to more than the limit of %zu bytes", limit);
            break;
        }
        mcp_buf_append(out, chunk, got);
        if (out->failed) {
            st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory inflating the body");
            break;
        }
        if (rc != Z_STREAM_END && got == 0 && z.avail_in == 0 && left == 0) {
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the %s body ends early", window_bits > 15 ? "gzip" : "deflate");
            break;
        }
    }
    inflateEnd(&z);
    return st;
}

mcp_status mcp_inflate_body(mcp_content_coding coding, const uint8_t *in, size_t n, size_t limit, mcp_buf *out, mcp_err *err)
{
    mcp_buf_reset(out);
    if (coding == MCP_CODING_GZIP) return inflate_with(in, n, 15 + 16, limit, out, err);
    /* "deflate" is the zlib format (RFC 9110); some clients send raw
     * deflate data, which the zlib header check tells apart. */
    bool zlib_header = n >= 2 && (in[0] & 0x0f) == 8 && ((in[0] << 8) | in[1]) % 31 == 0;
    return inflate_with(in, n, zlib_header ? 15 : -15, limit, out, err);
}

bool mcp_accepts_gzip(const char *accept_encoding)
{
    for (const char *p = accept_encoding; p && *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *end = p + strcspn(p, ",");
        size_t tok = strcspn(p, ";, ");
        bool gzip = (tok == 4 && !strncasecmp(p, "gzip", 4)) || (tok == 1 && *p == '*');
        const char *q = memchr(p, ';', (size_t)(end - p));
        bool zero = false;
        if (q) {
            const char *v = strstr(q, "q=");
            if (v && v < end) zero = strtod(v + 2, NULL) == 0.0;
        }
        if (gzip && !zero) return true;
        p = end;
    }
    return false;
}

bool mcp_gzip(const uint8_t *in, size_t n, mcp_buf *out)
{
    mcp_buf_reset(out);
    if (n > (1u << 30)) return false;
    z_stream z;
    memset(&z, 0, sizeof z);
    /* The state is sized to the answer: a window no larger than the body
     * (it could find nothing further back) and a hash table to match, so a
     * 2 KB answer takes about 16 KB instead of the 256 KB of the full
     * state, which churned the heap on every small compressed answer. */
    int window_bits = 9;
    while (window_bits < 15 && ((size_t)1 << window_bits) < n) window_bits++;
    int mem_level = window_bits - 7 < 1 ? 1 : window_bits - 7;
    /* Level 1: answers are made to go out now; the bandwidth saved by
     * harder compression rarely pays for its CPU here. */
    if (deflateInit2(&z, 1, Z_DEFLATED, window_bits + 16, mem_level, Z_DEFAULT_STRATEGY) != Z_OK) return false;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    uint8_t chunk[16384];
    int rc;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        rc = deflate(&z, Z_FINISH);
        mcp_buf_append(out, chunk, sizeof chunk - z.avail_out);
    } while (rc == Z_OK && !out->failed);
    deflateEnd(&z);
    return rc == Z_STREAM_END && !out->failed;
}
