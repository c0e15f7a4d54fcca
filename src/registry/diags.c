/*
 * Diagnostics: a list of problems, each with the field path and the
 * line:column it was found at, so a validator can report every problem in a
 * descriptor at once instead of stopping at the first.
 */
#include <stdio.h>
#include <string.h>

#include "registry/registry.h"

/* A hostile input could produce one problem per byte; past this many the
 * list ends with one line saying so, which keeps reports readable and
 * memory bounded. */
#define MCP_DIAGS_MAX 1000

static void diags_push(mcp_diags *d, const char *path, int line, int col, const char *msg)
{
    if (d->count >= d->cap) {
        int cap = d->cap ? d->cap * 2 : 8;
        mcp_diag *items = mcp_realloc(d->items, (size_t)cap * sizeof *items);
        if (!items) return; /* out of memory: the problem is dropped, never a crash */
        d->items = items;
        d->cap = cap;
    }
    char *p = mcp_strdup(path ? path : "");
    char *m = mcp_strdup(msg);
    if (!p || !m) {
        mcp_free(p);
        mcp_free(m);
        return;
    }
    d->items[d->count++] = (mcp_diag){.path = p, .line = line, .col = col, .message = m};
}

void mcp_diags_add(mcp_diags *d, const char *path, int line, int col, const char *fmt, ...)
{
    if (!d) return;
    if (d->count >= MCP_DIAGS_MAX) return;
    if (d->count == MCP_DIAGS_MAX - 1) {
        diags_push(d, "", 0, 0, "too many problems; the rest are not listed");
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diags_push(d, path, line, col, msg);
}

void mcp_diags_clear(mcp_diags *d)
{
    if (!d) return;
    for (int i = 0; i < d->count; i++) {
        mcp_free(d->items[i].path);
        mcp_free(d->items[i].message);
    }
    mcp_free(d->items);
    d->items = NULL;
    d->count = d->cap = 0;
}

/* Appends to buf[*len..cap), always leaving it NUL-terminated. */
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    *len = (size_t)n >= cap - *len ? cap - 1 : *len + (size_t)n;
}

void mcp_diags_format(const mcp_diags *d, const char *file, char *buf, size_t cap)
{
    if (!buf || cap == 0) return;
    buf[0] = '\0';
    if (!d) return;
    size_t len = 0;
    bool has_file = file && file[0];
    for (int i = 0; i < d->count; i++) {
        const mcp_diag *g = &d->items[i];
        if (has_file && g->line > 0) put(buf, cap, &len, "%s:%d:%d: ", file, g->line, g->col);
        else if (has_file) put(buf, cap, &len, "%s: ", file);
        else if (g->line > 0) put(buf, cap, &len, "%d:%d: ", g->line, g->col);
        if (g->path && g->path[0]) put(buf, cap, &len, "%s: ", g->path);
        put(buf, cap, &len, "%s\n", g->message ? g->message : "");
    }
}
