/* Growable byte buffer for building responses. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"

static bool buf_reserve(mcp_buf *b, size_t extra)
{
    if (b->failed) return false;
    if (b->len + extra <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    uint8_t *d = mcp_realloc(b->data, cap);
    if (!d) {
        b->failed = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void mcp_buf_append(mcp_buf *b, const void *data, size_t n)
{
    if (!n || !buf_reserve(b, n + 1)) return;
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mcp_buf_puts(mcp_buf *b, const char *s) { mcp_buf_append(b, s, strlen(s)); }

void mcp_buf_printf(mcp_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        mcp_buf_append(b, small, (size_t)n);
        return;
    }
    if (!buf_reserve(b, (size_t)n + 1)) return;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void mcp_buf_json_string(mcp_buf *b, const char *s) { mcp_buf_json_stringn(b, s, strlen(s)); }

void mcp_buf_json_stringn(mcp_buf *b, const char *s, size_t n)
{
    mcp_buf_append(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    const unsigned char *run = p;
    for (; p < end; p++) {
        const char *esc = NULL;
        char tmp[8];
        switch (*p) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (*p < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", *p);
                esc = tmp;
            }
        }
        if (esc) {
            mcp_buf_append(b, run, (size_t)(p - run));
            mcp_buf_puts(b, esc);
            run = p + 1;
        }
    }
    mcp_buf_append(b, run, (size_t)(p - run));
    mcp_buf_append(b, "\"", 1);
}

void mcp_buf_reset(mcp_buf *b)
{
    b->len = 0;
    b->failed = false;
}

void mcp_buf_free(mcp_buf *b)
{
    mcp_free(b->data);
    memset(b, 0, sizeof *b);
}
