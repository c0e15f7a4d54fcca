/* mcpctl's HTTP client: one libcurl easy handle per thread, reused so the
 * connection stays open between requests (keep-alive). */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/mcpctl_http.h"

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    mcpctl_http *h = user;
    mcp_buf_append(&h->resp, data, size * n);
    return h->resp.failed ? 0 : size * n;
}

static size_t on_header(char *data, size_t size, size_t n, void *user)
{
    mcpctl_http *h = user;
    static const char key[] = "inference-header-content-length:";
    size_t len = size * n;
    if (len > sizeof key - 1 && strncasecmp(data, key, sizeof key - 1) == 0) {
        char tmp[32];
        size_t vl = len - (sizeof key - 1);
        if (vl >= sizeof tmp) vl = sizeof tmp - 1;
        memcpy(tmp, data + sizeof key - 1, vl);
        tmp[vl] = '\0';
        char *end;
        long long v = strtoll(tmp, &end, 10);
        while (*end == ' ' || *end == '\r' || *end == '\n' || *end == '\t') end++;
        h->header_len = (*end || v < 0) ? -2 : v; /* -2: present but malformed */
    }
    return len;
}

mcp_status mcpctl_http_init(mcpctl_http *h, const char *base, long timeout_ms, mcp_err *err)
{
    memset(h, 0, sizeof *h);
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/') n--;
    if (n == 0 || n >= sizeof h->base) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "bad server URL '%s'", base);
    if (strncmp(base, "http://", 7) != 0 && strncmp(base, "https://", 8) != 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "server URL '%s' must start with http:// or https://", base);
    memcpy(h->base, base, n);
    h->base[n] = '\0';
    h->timeout_ms = timeout_ms;
    h->header_len = -1;
    CURL *c = curl_easy_init();
    if (!c) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot create an HTTP client");
    h->curl = c;
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->curl_err);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    /* The caller's credential: an API key or JWT of a server with access
     * rules ($MCP_TOKEN), or the --admin-token-file token. */
    const char *token = getenv("MCP_TOKEN");
    if (!token || !*token) token = getenv("MCP_ADMIN_TOKEN");
    if (token && *token) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, token);
    }
    return MCP_STATUS_OK;
}

void mcpctl_http_cleanup(mcpctl_http *h)
{
    if (h->curl) curl_easy_cleanup(h->curl);
    curl_slist_free_all(h->headers);
    mcp_buf_free(&h->resp);
    memset(h, 0, sizeof *h);
}

void mcpctl_path_segment(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < cap; p++) {
        unsigned char c = *p;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                     c == '.' || c == '~';
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (cap) out[o < cap ? o : cap - 1] = '\0';
}

mcp_status mcpctl_http_prepare(mcpctl_http *h, const char *method, const char *path, const void *body, size_t len,
                               const char *content_type, int64_t header_len, mcp_err *err)
{
    CURL *c = h->curl;
    char url[4096], line[128];
    if ((size_t)snprintf(url, sizeof url, "%s%s", h->base, path) >= sizeof url)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "URL too long: %s%s", h->base, path);
    curl_slist_free_all(h->headers);
    h->headers = NULL;
    struct curl_slist *hdrs = NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else {
        snprintf(line, sizeof line, "Content-Type: %s", content_type ? content_type : "application/json");
        hdrs = curl_slist_append(hdrs, line);
        /* No "Expect: 100-continue" round trip before large bodies. */
        if (hdrs) hdrs = curl_slist_append(hdrs, "Expect:");
        if (hdrs && header_len >= 0) {
            snprintf(line, sizeof line, "Inference-Header-Content-Length: %lld", (long long)header_len);
            hdrs = curl_slist_append(hdrs, line);
        }
        if (!hdrs) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
    }
    h->headers = hdrs;
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    return MCP_STATUS_OK;
}

mcp_status mcpctl_http_perform(mcpctl_http *h, mcp_err *err)
{
    CURL *c = h->curl;
    mcp_buf_reset(&h->resp);
    h->resp.failed = false;
    h->code = 0;
    h->header_len = -1;
    h->curl_err[0] = '\0';
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        const char *url = NULL;
        curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &url);
        if (h->resp.failed)
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory reading the answer from %s", url ? url : h->base);
        return mcp_err_set(err, rc == CURLE_OPERATION_TIMEDOUT ? MCP_STATUS_DEADLINE_EXCEEDED : MCP_STATUS_IO_ERROR,
                           "cannot reach %s: %s", url ? url : h->base, h->curl_err[0] ? h->curl_err : curl_easy_strerror(rc));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h->code);
    if (h->header_len == -2)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the server answered a malformed Inference-Header-Content-Length");
    return MCP_STATUS_OK;
}

mcp_status mcpctl_http_do(mcpctl_http *h, const char *method, const char *path, const void *body, size_t len,
                          const char *content_type, int64_t header_len, mcp_err *err)
{
    mcp_status st = mcpctl_http_prepare(h, method, path, body, len, content_type, header_len, err);
    return st == MCP_STATUS_OK ? mcpctl_http_perform(h, err) : st;
}

mcp_status mcpctl_http_fail(const mcpctl_http *h, mcp_err *err)
{
    char msg[400] = "";
    json_t *root = json_loadb((const char *)h->resp.data, h->resp.len, 0, NULL);
    const char *e = json_string_value(json_object_get(root, "error"));
    if (e) {
        snprintf(msg, sizeof msg, "%s", e);
    } else {
        /* Not our JSON error: show the start of the body on one line. */
        size_t n = h->resp.len < 200 ? h->resp.len : 200, o = 0;
        for (size_t i = 0; i < n && o + 1 < sizeof msg; i++) {
            unsigned char ch = h->resp.data[i];
            msg[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : ' ';
        }
        msg[o] = '\0';
    }
    json_decref(root);
    /* Multi-line server messages (lists of problems) stay on one line. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ';';
    mcp_status st = h->code == 404   ? MCP_STATUS_NOT_FOUND
                    : h->code == 400 ? MCP_STATUS_INVALID_ARGUMENT
                    : h->code == 413 ? MCP_STATUS_TOO_LARGE
                    : h->code == 429 ? MCP_STATUS_RESOURCE_EXHAUSTED
                    : h->code == 501 ? MCP_STATUS_UNSUPPORTED
                    : h->code == 503 ? MCP_STATUS_UNAVAILABLE
                    : h->code == 504 ? MCP_STATUS_DEADLINE_EXCEEDED
                                     : MCP_STATUS_RUNTIME_ERROR;
    return mcp_err_set(err, st, "HTTP %ld: %s", h->code, msg[0] ? msg : "(empty body)");
}

mcp_status mcpctl_model_meta_fetch(mcpctl_http *h, const char *name, const char *version, mcpctl_model_meta *out,
                                   mcp_err *err)
{
    char seg[1024], vseg[256], path[1400];
    mcpctl_path_segment(name, seg, sizeof seg);
    if (version) {
        mcpctl_path_segment(version, vseg, sizeof vseg);
        snprintf(path, sizeof path, "/v2/models/%s/versions/%s", seg, vseg);
    } else {
        snprintf(path, sizeof path, "/v2/models/%s", seg);
    }
    memset(out, 0, sizeof *out);
    mcp_status st = mcpctl_http_do(h, "GET", path, NULL, 0, NULL, -1, err);
    if (st != MCP_STATUS_OK) return st;
    if (h->code != 200) {
        st = mcpctl_http_fail(h, err);
        mcp_err_prefix(err, "model '%s' metadata", name);
        return st;
    }
    return mcpctl_model_meta_parse(h->resp.data, h->resp.len, out, err);
}
