/*
 * Model roots: the folders a model's files may come from.
 *
 * A descriptor that arrives over the network names files (the model, a
 * labels file); each must resolve, after symbolic links, inside one of the
 * roots the operator configured (the model repository, the store,
 * --model-root folders). The check runs in two steps so that a refusal never
 * tells the caller whether a file exists outside the roots:
 *
 *   1. lexical: the absolute path has no ".." segment and lies under a root,
 *      decided without touching the file system;
 *   2. resolved: realpath() of it lies under a root's realpath(), and it is a
 *      regular file (or a folder where the caller allows one), so a symbolic
 *      link cannot lead out and a FIFO or device is never opened.
 *
 * Only step 2 looks at the disk, and only for paths already inside a root.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/registry.h"

#define MCP__ROOTS_MAX 64

struct mcp_model_roots {
    int n;
    char *given[MCP__ROOTS_MAX]; /* absolute, as configured (lexical check) */
    char *real[MCP__ROOTS_MAX];  /* realpath() of each (resolved check) */
};

mcp_model_roots *mcp_model_roots_create(void) { return mcp_calloc(1, sizeof(mcp_model_roots)); }

void mcp_model_roots_destroy(mcp_model_roots *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        mcp_free(r->given[i]);
        mcp_free(r->real[i]);
    }
    mcp_free(r);
}

int mcp_model_roots_count(const mcp_model_roots *r) { return r ? r->n : 0; }

const char *mcp_model_roots_first(const mcp_model_roots *r) { return r && r->n ? r->real[0] : NULL; }

const char *mcp_model_roots_get(const mcp_model_roots *r, int i) { return r && i >= 0 && i < r->n ? r->real[i] : NULL; }

/* Makes `path` absolute (against the working folder) with "." segments and
 * repeated slashes removed; false when it has a ".." segment or does not
 * fit. Touches nothing on disk. */
static bool lexical_abs(const char *path, char *out, size_t cap, bool *dotdot)
{
    char tmp[PATH_MAX * 2];
    *dotdot = false;
    if (path[0] == '/') {
        if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return false;
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) return false;
        if (snprintf(tmp, sizeof tmp, "%s/%s", cwd, path) >= (int)sizeof tmp) return false;
    }
    size_t w = 0;
    const char *s = tmp;
    while (*s) {
        while (*s == '/') s++;
        if (!*s) break;
        const char *e = s;
        while (*e && *e != '/') e++;
        size_t n = (size_t)(e - s);
        if (n == 2 && s[0] == '.' && s[1] == '.') *dotdot = true;
        if (!(n == 1 && s[0] == '.')) {
            if (w + 1 + n + 1 > cap) return false;
            out[w++] = '/';
            memcpy(out + w, s, n);
            w += n;
        }
        s = e;
    }
    if (w == 0) {
        if (cap < 2) return false;
        out[w++] = '/';
    }
    out[w] = '\0';
    return !*dotdot;
}

/* `path` is `root` or lies under it. */
static bool under(const char *path, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/') return true;
    return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

mcp_status mcp_model_roots_add(mcp_model_roots *r, const char *dir, mcp_err *err)
{
    if (r->n == MCP__ROOTS_MAX)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "too many model roots (%d at most)", MCP__ROOTS_MAX);
    char given[PATH_MAX], real[PATH_MAX];
    bool dotdot;
    if (!lexical_abs(dir, given, sizeof given, &dotdot) && !dotdot)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model root '%s': path too long", dir);
    if (!realpath(dir, real))
        return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "model root '%s': %s", dir, strerror(errno));
    struct stat sb;
    if (stat(real, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model root '%s' is not a folder", dir);
    /* A ".." in the configured form is the operator's own choice: the
     * lexical check then uses the resolved form only. */
    r->given[r->n] = mcp_strdup(dotdot ? real : given);
    r->real[r->n] = mcp_strdup(real);
    if (!r->given[r->n] || !r->real[r->n]) {
        mcp_free(r->given[r->n]);
        mcp_free(r->real[r->n]);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    r->n++;
    return MCP_STATUS_OK;
}

static mcp_status outside(mcp_err *err, const char *what, const char *path)
{
    return mcp_err_set(err, MCP_STATUS_PERMISSION_DENIED,
                       "%s '%s' is outside the model roots: files a model reads must resolve, after symbolic links and "
                       "without '..', inside --model-repository or a --model-root folder of the server",
                       what, path);
}

mcp_status mcp_model_roots_resolve(const mcp_model_roots *r, const char *path, const char *what, bool allow_dir,
                                   char **resolved, mcp_err *err)
{
    *resolved = NULL;
    if (!r || r->n == 0)
        return mcp_err_set(err, MCP_STATUS_PERMISSION_DENIED,
                           "%s '%s' cannot be loaded: this server has no model roots (start it with --model-repository DIR or "
                           "--model-root DIR to allow models from there)",
                           what, path);
    char lex[PATH_MAX];
    bool dotdot;
    if (!lexical_abs(path, lex, sizeof lex, &dotdot)) return outside(err, what, path);
    bool inside = false;
    for (int i = 0; i < r->n && !inside; i++) inside = under(lex, r->given[i]) || under(lex, r->real[i]);
    if (!inside) return outside(err, what, path);
    char real[PATH_MAX];
    if (!realpath(lex, real)) {
        int e = errno;
        /* The deepest folder on the way that exists says where the path
         * leads: through a link out of the roots, a missing file gets the
         * same answer as an existing one (else the answer would tell what
         * exists outside). Inside a root, saying that nothing is there
         * tells no secret. */
        char up[PATH_MAX];
        snprintf(up, sizeof up, "%s", lex);
        for (char *slash = strrchr(up, '/'); slash && slash > up; slash = strrchr(up, '/')) {
            *slash = '\0';
            if (!realpath(up, real)) continue;
            bool in = false;
            for (int i = 0; i < r->n && !in; i++) in = under(real, r->real[i]);
            if (!in) return outside(err, what, path);
            break;
        }
        return mcp_err_set(err, e == ENOENT || e == ENOTDIR ? MCP_STATUS_NOT_FOUND : MCP_STATUS_IO_ERROR,
                           "%s '%s' not found in the model roots", what, path);
    }
    inside = false;
    for (int i = 0; i < r->n && !inside; i++) inside = under(real, r->real[i]);
    if (!inside) return outside(err, what, path);
    struct stat sb;
    if (stat(real, &sb) != 0)
        return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "%s '%s' not found in the model roots", what, path);
    if (!S_ISREG(sb.st_mode) && !(allow_dir && S_ISDIR(sb.st_mode)))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s '%s' is not a regular file%s", what, path,
                           allow_dir ? " or folder" : "");
    *resolved = mcp_strdup(real);
    return *resolved ? MCP_STATUS_OK : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
}

void mcp_model_roots_redact(const mcp_model_roots *r, const char *text, char *out, size_t cap)
{
    size_t o = 0;
    if (!cap) return;
    for (const char *p = text ? text : ""; *p && o + 1 < cap;) {
        size_t skip = 0;
        for (int i = 0; r && i < r->n; i++) {
            const char *forms[2] = {r->given[i], r->real[i]};
            for (int f = 0; f < 2; f++) {
                size_t n = strlen(forms[f]);
                if (n > skip && !strncmp(p, forms[f], n) && (p[n] == '/' || p[n] == '\0' || p[n] == '\'' || p[n] == ' '))
                    skip = n;
            }
        }
        if (skip) {
            p += skip;
            while (*p == '/') p++; /* root-relative from here */
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = '\0';
}

const char *mcp_model_roots_display(const mcp_model_roots *r, const char *path, char *buf, size_t cap)
{
    for (int i = 0; r && path && i < r->n; i++) {
        const char *root = r->real[i];
        if (!under(path, root)) continue;
        const char *rel = path + strlen(root);
        while (*rel == '/') rel++;
        snprintf(buf, cap, "%s", *rel ? rel : ".");
        return buf;
    }
    /* Not under a root (a --model-path file): the file name alone. */
    const char *slash = path ? strrchr(path, '/') : NULL;
    snprintf(buf, cap, "%s", slash ? slash + 1 : path ? path : "");
    return buf;
}
