/*
 * Model descriptors in YAML (parsed with libfyaml's document API).
 *
 * The walk never stops at the first problem: every field is checked and
 * every problem lands in the caller's diagnostics with its field path
 * ("batching.max_queue_delay_us", "inputs[1].dtype") and line:column, so
 * `mcpctl validate` can list them all in one run. Plain scalars are typed
 * with the YAML 1.2 core schema (true/false, integers, floats, null);
 * quoted scalars are always strings. schemas/model.schema.json describes
 * the same format and tests/registry checks that the two agree.
 *
 * Shapes in `inputs`/`outputs` are the model's full shapes, batch
 * dimension included (e.g. [-1, 3, 224, 224]), matching the graph.
 */
#include <ctype.h>
#include <errno.h>
#include <libfyaml.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/descriptor_util.h"

/* ---- context: diagnostics, the current field path, error count ---- */

typedef struct yloc {
    int line, col; /* 1-based; 0 = unknown */
} yloc;

typedef struct yctx {
    mcp_diags *diags;
    int errors;
    char path[512];
    size_t path_len;
    const char *dir; /* descriptor's folder, for relative paths; NULL = cwd */
    const mcp_model_roots *roots; /* where named files may be; NULL = anywhere */
    bool check_load;              /* files exist, precision implemented */
    bool files_elsewhere;         /* labels are read later, from elsewhere */
    /* The declared inputs (preprocess) or outputs (postprocess) that a
     * step's `tensor` must name; none declared = any name. */
    const mcp_io_spec *step_io;
    int step_n_io;
    const char *step_io_key;
    const char *text; /* the source, for marks' byte offsets */
    size_t text_len;
    mcp_pool *pool;   /* decoded scalars; freed with the parse */
} yctx;

/* With model roots, replaces *path by its resolved form inside them; false
 * (message in msg) when it is outside or not a file. Without roots the path
 * stays as written (a local descriptor the operator reads). */
static bool confine_path(yctx *c, char **path, const char *what, bool allow_dir, char *msg, size_t cap)
{
    if (!c->roots) return true;
    char *real = NULL;
    mcp_err err = {msg, cap};
    if (mcp_model_roots_resolve(c->roots, *path, what, allow_dir, &real, &err) != MCP_STATUS_OK) return false;
    mcp_free(*path);
    *path = real;
    return true;
}

/* With check_load: the file exists and is a regular file or folder (a
 * Triton model folder), readable by this process. */
static bool path_usable(yctx *c, const char *path, const char *what, char *msg, size_t cap)
{
    if (!c->check_load) return true;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(msg, cap, "%s '%s' cannot be read: %s", what, path, strerror(errno));
        return false;
    }
    if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        snprintf(msg, cap, "%s '%s' is not a regular file or folder", what, path);
        return false;
    }
    if (access(path, R_OK) != 0) {
        snprintf(msg, cap, "%s '%s' is not readable: %s", what, path, strerror(errno));
        return false;
    }
    return true;
}

static void yerr(yctx *c, yloc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void yerr(yctx *c, yloc at, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->errors++;
    mcp_diags_add(c->diags, c->path, at.line, at.col, "%s", msg);
}

/* Appends ".key" (or "key" at the root) to the path; returns the old length
 * for path_pop. An over-long path is cut, never overflowed. */
static size_t path_push(yctx *c, const char *key)
{
    size_t old = c->path_len;
    int n = snprintf(c->path + old, sizeof c->path - old, "%s%s", old ? "." : "", key);
    if (n > 0) c->path_len = old + (size_t)n < sizeof c->path ? old + (size_t)n : sizeof c->path - 1;
    return old;
}

static size_t path_push_index(yctx *c, int i)
{
    size_t old = c->path_len;
    int n = snprintf(c->path + old, sizeof c->path - old, "[%d]", i);
    if (n > 0) c->path_len = old + (size_t)n < sizeof c->path ? old + (size_t)n : sizeof c->path - 1;
    return old;
}

static void path_pop(yctx *c, size_t old)
{
    c->path_len = old;
    c->path[old] = '\0';
}

/* ---- nodes: where they are and what they hold ---- */

static yloc token_loc(struct fy_token *t)
{
    const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
    if (!m) return (yloc){0, 0};
    return (yloc){m->line + 1, m->column + 1};
}

/* A node's position: a scalar's own token, or for a collection the first
 * scalar inside it (where a block collection starts). Empty collections
 * have no token of their own; they get `fallback` (usually their key). */
static yloc node_loc(struct fy_node *n, yloc fallback)
{
    for (int depth = 0; n && depth < 64; depth++) {
        /* A tagged value starts at its tag ("!!python/object ..."). */
        struct fy_token *tag = fy_node_get_tag_token(n);
        if (tag) {
            yloc l = token_loc(tag);
            if (l.line) return l;
        }
        if (fy_node_is_scalar(n)) {
            yloc l = token_loc(fy_node_get_scalar_token(n));
            /* libfyaml marks a quoted scalar at its first character inside
             * the quotes, an alias after its '*'; point at where they start. */
            enum fy_node_style st = fy_node_get_style(n);
            if ((st == FYNS_SINGLE_QUOTED || st == FYNS_DOUBLE_QUOTED || st == FYNS_ALIAS) && l.col > 1) l.col--;
            return l.line ? l : fallback;
        }
        void *it = NULL;
        if (fy_node_is_mapping(n)) {
            struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);
            n = p ? fy_node_pair_key(p) : NULL;
        } else if (fy_node_is_sequence(n)) {
            n = fy_node_sequence_iterate(n, &it);
        } else {
            break;
        }
    }
    return fallback;
}

typedef enum ykind { YK_NULL, YK_BOOL, YK_INT, YK_FLOAT, YK_STR, YK_MAP, YK_SEQ, YK_ALIAS, YK_TAGGED } ykind;

typedef struct yval {
    ykind kind;
    const char *text; /* scalars: not NUL-terminated */
    size_t len;
    bool b;
    bool int_in_range; /* YK_INT: fits int64 */
    int64_t i;
    double f;
} yval;

static bool all_digits(const char *s, size_t n, int base)
{
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = base == 16 ? isxdigit((unsigned char)ch) : base == 8 ? (ch >= '0' && ch <= '7') : isdigit((unsigned char)ch);
        if (!ok) return false;
    }
    return true;
}

static bool is_yaml_float(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t int_digits = 0, frac_digits = 0;
    while (i < n && isdigit((unsigned char)s[i])) i++, int_digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && isdigit((unsigned char)s[i])) i++, frac_digits++;
    }
    if (int_digits == 0 && frac_digits == 0) return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t exp_digits = 0;
        while (i < n && isdigit((unsigned char)s[i])) i++, exp_digits++;
        if (exp_digits == 0) return false;
    }
    return i == n;
}

static bool text_is(const char *s, size_t n, const char *w) { return strlen(w) == n && memcmp(s, w, n) == 0; }

/* Types a plain scalar by the YAML 1.2 core schema. */
static void classify_plain(yval *v)
{
    const char *s = v->text;
    size_t n = v->len;
    v->kind = YK_STR;
    if (n == 0 || text_is(s, n, "~") || text_is(s, n, "null") || text_is(s, n, "Null") || text_is(s, n, "NULL")) {
        v->kind = YK_NULL;
        return;
    }
    if (text_is(s, n, "true") || text_is(s, n, "True") || text_is(s, n, "TRUE")) {
        v->kind = YK_BOOL;
        v->b = true;
        return;
    }
    if (text_is(s, n, "false") || text_is(s, n, "False") || text_is(s, n, "FALSE")) {
        v->kind = YK_BOOL;
        v->b = false;
        return;
    }
    char buf[128];
    if (n >= sizeof buf) return; /* too long for a number: a string */
    memcpy(buf, s, n);
    buf[n] = '\0';
    size_t sign = (buf[0] == '+' || buf[0] == '-') ? 1 : 0;
    int base = 0;
    size_t digits_at = 0;
    if (all_digits(buf + sign, n - sign, 10)) {
        base = 10;
        digits_at = sign;
    } else if (n > 2 && buf[0] == '0' && buf[1] == 'o' && all_digits(buf + 2, n - 2, 8)) {
        base = 8;
        digits_at = 2;
    } else if (n > 2 && buf[0] == '0' && buf[1] == 'x' && all_digits(buf + 2, n - 2, 16)) {
        base = 16;
        digits_at = 2;
    }
    if (base) {
        v->kind = YK_INT;
        errno = 0;
        char *end;
        if (base == 10) {
            long long x = strtoll(buf, &end, 10);
            v->int_in_range = errno == 0;
            v->i = x;
        } else {
            unsigned long long x = strtoull(buf + digits_at, &end, base);
            v->int_in_range = errno == 0 && x <= (unsigned long long)INT64_MAX;
            v->i = (int64_t)(x <= (unsigned long long)INT64_MAX ? x : 0);
        }
        v->f = v->int_in_range ? (double)v->i : strtod(buf, NULL);
        return;
    }
    size_t k = sign;
    if (n - k == 4 && buf[k] == '.' &&
        (strcmp(buf + k, ".inf") == 0 || strcmp(buf + k, ".Inf") == 0 || strcmp(buf + k, ".INF") == 0)) {
        v->kind = YK_FLOAT;
        v->f = buf[0] == '-' ? -INFINITY : INFINITY;
        return;
    }
    if (strcmp(buf, ".nan") == 0 || strcmp(buf, ".NaN") == 0 || strcmp(buf, ".NAN") == 0) {
        v->kind = YK_FLOAT;
        v->f = NAN;
        return;
    }
    if (is_yaml_float(buf, n)) {
        v->kind = YK_FLOAT;
        v->f = strtod(buf, NULL);
    }
}

static bool tag_is_str(const char *t, size_t n)
{
    return text_is(t, n, "!!str") || text_is(t, n, "tag:yaml.org,2002:str");
}

static yval node_val(yctx *c, struct fy_node *n)
{
    yval v = {0};
    if (!n) {
        v.kind = YK_NULL;
        return v;
    }
    if (fy_node_is_alias(n)) {
        v.kind = YK_ALIAS;
        return v;
    }
    size_t tlen = 0;
    const char *tag = fy_node_get_tag(n, &tlen);
    bool explicit_str = tag && tag_is_str(tag, tlen);
    if (tag && tlen && !explicit_str) {
        v.kind = YK_TAGGED;
        v.text = tag;
        v.len = tlen;
        return v;
    }
    if (fy_node_is_mapping(n)) {
        v.kind = YK_MAP;
        return v;
    }
    if (fy_node_is_sequence(n)) {
        v.kind = YK_SEQ;
        return v;
    }
    if (fy_node_get_style(n) == FYNS_SINGLE_QUOTED) {
        if (!(v.text = mcp__yaml_single_quoted(n, c->text, c->text_len, c->pool, &v.len))) v.text = NULL;
    } else {
        v.text = fy_node_get_scalar(n, &v.len);
    }
    if (!v.text) {
        v.text = "";
        v.len = 0;
    }
    if (explicit_str || fy_node_get_style(n) != FYNS_PLAIN) v.kind = YK_STR;
    else classify_plain(&v);
    return v;
}

/* "integer 12", "string 'abc'", "a list"... for messages. */
static const char *describe(const yval *v, char *buf, size_t cap)
{
    switch (v->kind) {
    case YK_NULL: return "nothing (null)";
    case YK_BOOL: return v->b ? "boolean true" : "boolean false";
    case YK_INT: snprintf(buf, cap, "integer %.*s", (int)(v->len > 40 ? 40 : v->len), v->text); return buf;
    case YK_FLOAT: snprintf(buf, cap, "number %.*s", (int)(v->len > 40 ? 40 : v->len), v->text); return buf;
    case YK_STR: snprintf(buf, cap, "string '%.*s%s'", (int)(v->len > 40 ? 40 : v->len), v->text, v->len > 40 ? "..." : ""); return buf;
    case YK_MAP: return "a mapping";
    case YK_SEQ: return "a list";
    case YK_ALIAS: return "an alias";
    case YK_TAGGED: snprintf(buf, cap, "a value tagged '%.*s'", (int)(v->len > 60 ? 60 : v->len), v->text); return buf;
    }
    return "?";
}

static bool tag_names_code(const yval *v)
{
    static const char *const langs[] = {"python", "ruby", "perl", "java", "js", "lua", "php"};
    for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++) {
        size_t l = strlen(langs[i]);
        for (size_t k = 0; k + l <= v->len; k++)
            if (strncmp(v->text + k, langs[i], l) == 0) return true;
    }
    return false;
}

/* Reports a value of the wrong kind. Aliases and tags get their own,
 * clearer, messages. */
static void wrong_kind(yctx *c, yloc at, const yval *v, const char *expected)
{
    char b[128];
    if (v->kind == YK_ALIAS)
        yerr(c, at, "YAML aliases are not accepted in descriptors; write the value out (expected %s)", expected);
    else if (v->kind == YK_TAGGED && tag_names_code(v))
        yerr(c, at, "the tag '%.*s' would construct code or objects, and no user code runs inside the server; "
                    "write plain values and declarative preprocess/postprocess steps",
             (int)(v->len > 60 ? 60 : v->len), v->text);
    else if (v->kind == YK_TAGGED)
        yerr(c, at, "YAML tags are not accepted ('%.*s'); write a plain value (expected %s)", (int)(v->len > 60 ? 60 : v->len),
             v->text, expected);
    else
        yerr(c, at, "expected %s, got %s", expected, describe(v, b, sizeof b));
}

/* ---- typed getters: each reports its own problem and returns false ---- */

static bool want_string(yctx *c, struct fy_node *n, yloc key_at, const char *expected, char **out)
{
    yloc at = node_loc(n, key_at);
    yval v = node_val(c, n);
    if (v.kind != YK_STR) {
        wrong_kind(c, at, &v, expected);
        return false;
    }
    if (memchr(v.text, '\0', v.len)) {
        yerr(c, at, "the string contains a NUL character");
        return false;
    }
    if (v.len == 0) {
        yerr(c, at, "expected %s, got an empty string", expected);
        return false;
    }
    char *s = mcp_malloc(v.len + 1);
    if (!s) {
        yerr(c, at, "out of memory");
        return false;
    }
    memcpy(s, v.text, v.len);
    s[v.len] = '\0';
    *out = s;
    return true;
}

/* Integers; a float with no fractional part counts, as in JSON Schema. */
static bool want_int(yctx *c, struct fy_node *n, yloc key_at, int64_t lo, int64_t hi, int64_t *out)
{
    yloc at = node_loc(n, key_at);
    yval v = node_val(c, n);
    int64_t x;
    if (v.kind == YK_INT && v.int_in_range) {
        x = v.i;
    } else if (v.kind == YK_INT || (v.kind == YK_FLOAT && isfinite(v.f) && v.f == floor(v.f))) {
        if (!(v.f >= -9.2e18 && v.f <= 9.2e18)) {
            yerr(c, at, "integer %.*s is out of range (%lld..%lld)", (int)(v.len > 40 ? 40 : v.len), v.text, (long long)lo,
                 (long long)hi);
            return false;
        }
        x = (int64_t)v.f;
    } else {
        wrong_kind(c, at, &v, "an integer");
        return false;
    }
    if (x < lo || x > hi) {
        yerr(c, at, "%lld is out of range (%lld..%lld)", (long long)x, (long long)lo, (long long)hi);
        return false;
    }
    *out = x;
    return true;
}

static bool want_number(yctx *c, struct fy_node *n, yloc key_at, double *out)
{
    yloc at = node_loc(n, key_at);
    yval v = node_val(c, n);
    if (v.kind != YK_INT && v.kind != YK_FLOAT) {
        wrong_kind(c, at, &v, "a number");
        return false;
    }
    if (!isfinite(v.f)) {
        yerr(c, at, "expected a finite number, got %.*s", (int)(v.len > 40 ? 40 : v.len), v.text);
        return false;
    }
    *out = v.f;
    return true;
}

static bool want_bool(yctx *c, struct fy_node *n, yloc key_at, bool *out)
{
    yloc at = node_loc(n, key_at);
    yval v = node_val(c, n);
    if (v.kind != YK_BOOL) {
        wrong_kind(c, at, &v, "true or false");
        return false;
    }
    *out = v.b;
    return true;
}

/* Checks that n is a sequence of at most max items; reports otherwise. */
static bool want_seq(yctx *c, struct fy_node *n, yloc key_at, int max, const char *expected, int *count)
{
    yloc at = node_loc(n, key_at);
    yval v = node_val(c, n);
    if (v.kind != YK_SEQ) {
        wrong_kind(c, at, &v, expected);
        return false;
    }
    int k = fy_node_sequence_item_count(n);
    if (k > max) {
        yerr(c, at, "has %d items; at most %d are allowed", k, max);
        return false;
    }
    *count = k;
    return true;
}

/* ---- mappings: known keys, unknown keys, code keys, duplicates ---- */

typedef struct yfield {
    struct fy_node *val;
    yloc key_at;
    bool present;
} yfield;

static const char *const code_keys[] = {
    "python", "py",       "script",   "code",     "handler",     "lambda",     "exec", "eval",
    "command", "cmd",     "shell",    "bash",     "module",      "function",   "callable",
    "entrypoint", "entry_point", "import", "javascript", "js", "lua", "wasm",
};

static bool is_code_key(const char *k)
{
    for (size_t i = 0; i < sizeof code_keys / sizeof code_keys[0]; i++)
        if (strcmp(k, code_keys[i]) == 0) return true;
    return false;
}

#define STEPS_HINT "declarative steps under preprocess/postprocess (scale, normalize, cast, transpose, softmax, topk)"

static void code_key_error(yctx *c, yloc at, const char *key)
{
    yerr(c, at, "'%s' would carry user code, and no user code runs inside the server; describe the processing with "
                STEPS_HINT,
         key);
}

/* Copies a key scalar into buf; false (reported) when the key is not a
 * plain string. */
static bool key_text(yctx *c, struct fy_node *key, yloc at, char *buf, size_t cap)
{
    yval kv = node_val(c, key);
    if (kv.kind == YK_NULL || kv.kind == YK_MAP || kv.kind == YK_SEQ || kv.kind == YK_ALIAS || kv.kind == YK_TAGGED ||
        !kv.text) {
        char b[128];
        yerr(c, at, "keys must be strings, got %s", describe(&kv, b, sizeof b));
        return false;
    }
    size_t n = kv.len < cap - 1 ? kv.len : cap - 1;
    memcpy(buf, kv.text, n);
    buf[n] = '\0';
    if (memchr(buf, '\0', n) || kv.len >= cap) {
        yerr(c, at, "key '%.40s...' is not a known key", buf);
        return false;
    }
    return true;
}

/*
 * Collects a mapping's known keys into f[] (indexed like keys[]); reports
 * every unknown key (with a did-you-mean), code-carrying key and duplicate.
 * Returns false when n is not a mapping (reported as such).
 */
static bool map_fields(yctx *c, struct fy_node *n, yloc key_at, const char *expected, const char *const *keys, int nkeys,
                       yfield *f)
{
    for (int i = 0; i < nkeys; i++) f[i] = (yfield){0};
    yval v = node_val(c, n);
    if (v.kind != YK_MAP) {
        wrong_kind(c, node_loc(n, key_at), &v, expected);
        return false;
    }
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *key = fy_node_pair_key(p);
        yloc at = node_loc(key, node_loc(fy_node_pair_value(p), key_at));
        char k[128];
        if (!key_text(c, key, at, k, sizeof k)) continue;
        int idx = -1;
        for (int i = 0; i < nkeys; i++)
            if (strcmp(k, keys[i]) == 0) idx = i;
        size_t old = path_push(c, k);
        if (idx < 0) {
            const char *near = mcp__desc_closest(k, keys, nkeys);
            if (is_code_key(k)) code_key_error(c, at, k);
            else if (mcp__desc_policy_key(k)) yerr(c, at, "'%s' is a policy field: " MCP__DESC_POLICY_RULE, k);
            else if (near) yerr(c, at, "unknown key '%s' (did you mean '%s'?)", k, near);
            else yerr(c, at, "unknown key '%s'", k);
        } else if (f[idx].present) {
            yerr(c, at, "duplicate key '%s' (first given at line %d, column %d)", k, f[idx].key_at.line, f[idx].key_at.col);
        } else {
            f[idx] = (yfield){.val = fy_node_pair_value(p), .key_at = at, .present = true};
        }
        path_pop(c, old);
    }
    return true;
}

/* The location of a mapping itself, for "missing key" messages. */
static yloc map_loc(struct fy_node *n, yloc fallback) { return node_loc(n, fallback); }

/* ---- inputs / outputs ---- */

enum { IO_NAME, IO_DTYPE, IO_SHAPE, IO_GRAPH_NAME, IO_COUNT };
static const char *const io_keys[IO_COUNT] = {"name", "dtype", "shape", "graph_name"};

static bool want_dtype(yctx *c, struct fy_node *n, yloc key_at, mcp_dtype *out)
{
    char *s = NULL;
    if (!want_string(c, n, key_at, "a dtype name such as FP32 or float32", &s)) return false;
    mcp_dtype dt = mcp__desc_dtype_parse(s);
    if (dt == MCP_DTYPE_UNDEFINED) {
        const char *names[2 * MCP_DTYPE_COUNT];
        int n_names = 0;
        for (int d = 0; d < MCP_DTYPE_COUNT; d++) {
            if (!mcp_dtype_oip_name((mcp_dtype)d)) continue;
            names[n_names++] = mcp_dtype_oip_name((mcp_dtype)d);
            names[n_names++] = mcp_dtype_name((mcp_dtype)d);
        }
        const char *near = mcp__desc_closest(s, names, n_names);
        yerr(c, node_loc(n, key_at), "unknown dtype '%s'%s%s%s; use an Open Inference Protocol name (BOOL, UINT8..UINT64, "
                                     "INT8..INT64, FP16, FP32, FP64, BF16, BYTES) or a numpy-style one (float32, int64...)",
             s, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        mcp_free(s);
        return false;
    }
    mcp_free(s);
    *out = dt;
    return true;
}

static void parse_io_item(yctx *c, struct fy_node *n, yloc at, mcp_io_spec *io)
{
    yfield f[IO_COUNT];
    io->rank = -1;
    if (!map_fields(c, n, at, "a mapping with name, dtype, shape", io_keys, IO_COUNT, f)) return;
    size_t old;
    if (!f[IO_NAME].present) {
        yerr(c, map_loc(n, at), "missing required key 'name'");
    } else {
        old = path_push(c, "name");
        if (want_string(c, f[IO_NAME].val, f[IO_NAME].key_at, "a tensor name", &io->name) &&
            strlen(io->name) > MCP__DESC_MAX_TENSOR_NAME)
            yerr(c, node_loc(f[IO_NAME].val, f[IO_NAME].key_at), "name is longer than %d characters",
                 MCP__DESC_MAX_TENSOR_NAME);
        path_pop(c, old);
    }
    if (f[IO_DTYPE].present) {
        old = path_push(c, "dtype");
        want_dtype(c, f[IO_DTYPE].val, f[IO_DTYPE].key_at, &io->dtype);
        path_pop(c, old);
    }
    if (f[IO_GRAPH_NAME].present) {
        old = path_push(c, "graph_name");
        if (want_string(c, f[IO_GRAPH_NAME].val, f[IO_GRAPH_NAME].key_at, "the tensor's name in the model graph",
                        &io->graph_name) &&
            strlen(io->graph_name) > MCP__DESC_MAX_TENSOR_NAME)
            yerr(c, node_loc(f[IO_GRAPH_NAME].val, f[IO_GRAPH_NAME].key_at), "graph_name is longer than %d characters",
                 MCP__DESC_MAX_TENSOR_NAME);
        path_pop(c, old);
    }
    if (f[IO_SHAPE].present) {
        old = path_push(c, "shape");
        int k;
        if (want_seq(c, f[IO_SHAPE].val, f[IO_SHAPE].key_at, MCP_MAX_RANK, "a list of dimensions (-1 = variable)", &k)) {
            void *it = NULL;
            struct fy_node *item;
            int i = 0;
            bool ok = true;
            while ((item = fy_node_sequence_iterate(f[IO_SHAPE].val, &it)) && i < k) {
                size_t o2 = path_push_index(c, i);
                ok &= want_int(c, item, f[IO_SHAPE].key_at, -1, MCP__DESC_MAX_DIM, &io->dims[i]);
                path_pop(c, o2);
                i++;
            }
            if (ok) io->rank = k;
        }
        path_pop(c, old);
    }
}

static void parse_io_list(yctx *c, struct fy_node *n, yloc key_at, mcp_io_spec **out, int *count)
{
    int k;
    if (!want_seq(c, n, key_at, MCP__DESC_MAX_IO, "a list of tensors ({name, dtype, shape})", &k)) return;
    if (k == 0) return;
    mcp_io_spec *io = mcp_calloc((size_t)k, sizeof *io);
    if (!io) {
        yerr(c, key_at, "out of memory");
        return;
    }
    *out = io;
    *count = k;
    void *it = NULL;
    struct fy_node *item;
    for (int i = 0; i < k && (item = fy_node_sequence_iterate(n, &it)); i++) {
        size_t old = path_push_index(c, i);
        parse_io_item(c, item, node_loc(item, key_at), &io[i]);
        path_pop(c, old);
    }
    for (int i = 0; i < k; i++) {
        if (!io[i].name) continue;
        for (int j = 0; j < i; j++) {
            if (io[j].name && strcmp(io[i].name, io[j].name) == 0) {
                size_t old = path_push_index(c, i);
                size_t o2 = path_push(c, "name");
                yerr(c, key_at, "duplicate tensor name '%s' (also entry %d)", io[i].name, j);
                path_pop(c, o2);
                path_pop(c, old);
                break;
            }
        }
    }
}

/* ---- preprocess / postprocess steps ---- */

static const char *const step_names[] = {"scale", "normalize", "cast", "transpose", "softmax", "topk"};
#define N_STEP_NAMES ((int)(sizeof step_names / sizeof step_names[0]))
_Static_assert(N_STEP_NAMES == MCP_STEP_KIND_COUNT, "step name table out of sync with mcp_step_kind");

const char *mcp_step_kind_name(mcp_step_kind k) { return (int)k >= 0 && k < MCP_STEP_KIND_COUNT ? step_names[k] : "unknown"; }

enum { S_TENSOR, S_FACTOR, S_MEAN, S_STD, S_AXIS, S_DTYPE, S_PERM, S_LAYOUT, S_K, S_LABELS, S_COUNT };
static const char *const step_keys_all[S_COUNT] = {"tensor", "factor", "mean", "std", "axis",
                                                   "dtype",  "perm",   "layout", "k", "labels"};

/* Which of step_keys_all each step type accepts. */
static const bool step_accepts[6][S_COUNT] = {
    /* scale */ {true, true, false, false, false, false, false, false, false, false},
    /* normalize */ {true, false, true, true, true, false, false, false, false, false},
    /* cast */ {true, false, false, false, false, true, false, false, false, false},
    /* transpose */ {true, false, false, false, false, false, true, true, false, false},
    /* softmax */ {true, false, false, false, true, false, false, false, false, false},
    /* topk */ {true, false, false, false, false, false, false, false, true, true},
};

static bool want_number_list(yctx *c, struct fy_node *n, yloc key_at, bool positive, double **out, int *count)
{
    int k;
    if (!want_seq(c, n, key_at, MCP__DESC_MAX_VALUES, "a list of numbers", &k)) return false;
    if (k == 0) {
        yerr(c, node_loc(n, key_at), "expected at least one number");
        return false;
    }
    double *vals = mcp_calloc((size_t)k, sizeof *vals);
    if (!vals) {
        yerr(c, key_at, "out of memory");
        return false;
    }
    void *it = NULL;
    struct fy_node *item;
    bool ok = true;
    for (int i = 0; i < k && (item = fy_node_sequence_iterate(n, &it)); i++) {
        size_t old = path_push_index(c, i);
        if (!want_number(c, item, key_at, &vals[i])) {
            ok = false;
        } else if (positive && !(vals[i] > 0)) {
            yerr(c, node_loc(item, key_at), "must be greater than 0 (it divides)");
            ok = false;
        }
        path_pop(c, old);
    }
    if (!ok) {
        mcp_free(vals);
        return false;
    }
    *out = vals;
    *count = k;
    return true;
}

/* "NHWC->NCHW" into a permutation: out[i] = position in the source layout
 * of the target layout's i-th letter. */
static bool layout_perm(const char *s, int64_t *perm, int *n, char *why, size_t cap)
{
    const char *arrow = strstr(s, "->");
    if (!arrow) {
        snprintf(why, cap, "expected a layout change like \"NHWC->NCHW\", got '%s'", s);
        return false;
    }
    size_t a = (size_t)(arrow - s), b = strlen(arrow + 2);
    const char *src = s, *dst = arrow + 2;
    if (a == 0 || a > MCP_MAX_RANK || a != b) {
        snprintf(why, cap, "layout '%s': both sides need the same number of axes (1 to %d)", s, MCP_MAX_RANK);
        return false;
    }
    for (size_t i = 0; i < a; i++) {
        if (src[i] < 'A' || src[i] > 'Z' || dst[i] < 'A' || dst[i] > 'Z') {
            snprintf(why, cap, "layout '%s': axes are upper-case letters such as N, C, H, W", s);
            return false;
        }
        for (size_t j = 0; j < i; j++) {
            if (src[j] == src[i] || dst[j] == dst[i]) {
                snprintf(why, cap, "layout '%s': an axis letter appears twice on one side", s);
                return false;
            }
        }
    }
    for (size_t i = 0; i < a; i++) {
        const char *at = memchr(src, dst[i], a);
        if (!at) {
            snprintf(why, cap, "layout '%s': axis '%c' is not in the source layout", s, dst[i]);
            return false;
        }
        perm[i] = at - src;
    }
    *n = (int)a;
    return true;
}

static void parse_step_args(yctx *c, int kind, struct fy_node *args, yloc key_at, mcp_step *s)
{
    yfield f[S_COUNT];
    const char *kname = step_names[kind];
    /* map_fields checks against every step key; keys the type does not take
     * are reported just after, naming the type. */
    yval v = node_val(c, args);
    if (v.kind == YK_NULL) {
        yerr(c, key_at, "expected a mapping of %s's settings (write %s: {} for the defaults)", kname, kname);
        return;
    }
    if (!map_fields(c, args, key_at, "a mapping of the step's settings", step_keys_all, S_COUNT, f)) return;
    yloc here = map_loc(args, key_at);
    const char *accepted[S_COUNT];
    int n_acc = 0;
    for (int i = 0; i < S_COUNT; i++)
        if (step_accepts[kind][i]) accepted[n_acc++] = step_keys_all[i];
    for (int i = 0; i < S_COUNT; i++) {
        if (!f[i].present || step_accepts[kind][i]) continue;
        size_t old = path_push(c, step_keys_all[i]);
        char list[128] = "";
        for (int j = 0; j < n_acc; j++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", accepted[j]);
        const char *near = mcp__desc_closest(step_keys_all[i], accepted, n_acc);
        yerr(c, f[i].key_at, "unknown key '%s' for a %s step (it takes %s)%s%s%s", step_keys_all[i], kname, list,
             near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        path_pop(c, old);
        f[i].present = false;
    }
    size_t old;
#define STEP_FIELD(idx, name) (f[idx].present ? (old = path_push(c, name), true) : false)
    if (STEP_FIELD(S_TENSOR, "tensor")) {
        if (want_string(c, f[S_TENSOR].val, f[S_TENSOR].key_at, "a tensor name", &s->tensor) && c->step_n_io > 0) {
            bool found = false;
            for (int j = 0; j < c->step_n_io; j++)
                found |= c->step_io[j].name && strcmp(c->step_io[j].name, s->tensor) == 0;
            if (!found)
                yerr(c, node_loc(f[S_TENSOR].val, f[S_TENSOR].key_at), "'%.100s' is not one of the declared %s",
                     s->tensor, c->step_io_key);
        }
        path_pop(c, old);
    } else if (c->step_n_io > 1) {
        yerr(c, here, "the descriptor declares %d %s, so this step needs 'tensor' to say which one it applies to",
             c->step_n_io, c->step_io_key);
    }
    switch (s->kind) {
    case MCP_STEP_SCALE:
        if (!f[S_FACTOR].present) yerr(c, here, "missing required key 'factor'");
        if (STEP_FIELD(S_FACTOR, "factor")) {
            want_number(c, f[S_FACTOR].val, f[S_FACTOR].key_at, &s->factor);
            path_pop(c, old);
        }
        break;
    case MCP_STEP_NORMALIZE: {
        s->axis = 1;
        int nm = 0, ns = 0;
        if (!f[S_MEAN].present) yerr(c, here, "missing required key 'mean'");
        if (!f[S_STD].present) yerr(c, here, "missing required key 'std'");
        if (STEP_FIELD(S_MEAN, "mean")) {
            want_number_list(c, f[S_MEAN].val, f[S_MEAN].key_at, false, &s->mean, &nm);
            path_pop(c, old);
        }
        if (STEP_FIELD(S_STD, "std")) {
            want_number_list(c, f[S_STD].val, f[S_STD].key_at, true, &s->std, &ns);
            path_pop(c, old);
        }
        if (s->mean && s->std && nm != ns) {
            old = path_push(c, "std");
            yerr(c, f[S_STD].key_at, "has %d values but mean has %d; give one per channel in both", ns, nm);
            path_pop(c, old);
        }
        s->n_values = nm < ns ? nm : ns;
        if (STEP_FIELD(S_AXIS, "axis")) {
            want_int(c, f[S_AXIS].val, f[S_AXIS].key_at, -MCP_MAX_RANK, MCP_MAX_RANK - 1, &s->axis);
            path_pop(c, old);
        }
        break;
    }
    case MCP_STEP_CAST:
        if (!f[S_DTYPE].present) yerr(c, here, "missing required key 'dtype'");
        if (STEP_FIELD(S_DTYPE, "dtype")) {
            want_dtype(c, f[S_DTYPE].val, f[S_DTYPE].key_at, &s->dtype);
            path_pop(c, old);
        }
        break;
    case MCP_STEP_TRANSPOSE:
        if (f[S_PERM].present == f[S_LAYOUT].present)
            yerr(c, here, "give exactly one of 'perm' (e.g. [0, 3, 1, 2]) or 'layout' (e.g. \"NHWC->NCHW\")");
        if (STEP_FIELD(S_PERM, "perm")) {
            int k;
            if (want_seq(c, f[S_PERM].val, f[S_PERM].key_at, MCP_MAX_RANK, "a list of axis indices", &k)) {
                void *it = NULL;
                struct fy_node *item;
                bool ok = k > 0, seen[MCP_MAX_RANK] = {false};
                if (k == 0) yerr(c, node_loc(f[S_PERM].val, f[S_PERM].key_at), "expected at least one axis");
                for (int i = 0; i < k && (item = fy_node_sequence_iterate(f[S_PERM].val, &it)); i++) {
                    size_t o2 = path_push_index(c, i);
                    if (want_int(c, item, f[S_PERM].key_at, 0, MCP_MAX_RANK - 1, &s->perm[i])) {
                        if (s->perm[i] >= k || seen[s->perm[i]]) {
                            yerr(c, node_loc(item, f[S_PERM].key_at),
                                 "perm must list each axis 0..%d exactly once", k - 1);
                            ok = false;
                        } else {
                            seen[s->perm[i]] = true;
                        }
                    } else {
                        ok = false;
                    }
                    path_pop(c, o2);
                }
                if (ok) s->n_perm = k;
            }
            path_pop(c, old);
        }
        if (STEP_FIELD(S_LAYOUT, "layout")) {
            char *lay = NULL;
            if (want_string(c, f[S_LAYOUT].val, f[S_LAYOUT].key_at, "a layout change like \"NHWC->NCHW\"", &lay)) {
                char why[200];
                if (!layout_perm(lay, s->perm, &s->n_perm, why, sizeof why))
                    yerr(c, node_loc(f[S_LAYOUT].val, f[S_LAYOUT].key_at), "%s", why);
                mcp_free(lay);
            }
            path_pop(c, old);
        }
        break;
    case MCP_STEP_SOFTMAX:
        s->axis = -1;
        if (STEP_FIELD(S_AXIS, "axis")) {
            want_int(c, f[S_AXIS].val, f[S_AXIS].key_at, -MCP_MAX_RANK, MCP_MAX_RANK - 1, &s->axis);
            path_pop(c, old);
        }
        break;
    case MCP_STEP_TOPK:
        if (!f[S_K].present) yerr(c, here, "missing required key 'k'");
        if (STEP_FIELD(S_K, "k")) {
            want_int(c, f[S_K].val, f[S_K].key_at, 1, MCP__DESC_MAX_TOPK, &s->k);
            path_pop(c, old);
        }
        if (STEP_FIELD(S_LABELS, "labels")) {
            char *rel = NULL;
            if (want_string(c, f[S_LABELS].val, f[S_LABELS].key_at, "a labels file path", &rel)) {
                s->labels_path = mcp__desc_path_join(c->dir, rel);
                char msg[600];
                if (!s->labels_path)
                    yerr(c, key_at, "out of memory");
                else if (c->files_elsewhere)
                    ; /* the caller points it at its copy and reads it */
                else if (!confine_path(c, &s->labels_path, "labels file", false, msg, sizeof msg) ||
                         mcp__desc_labels_read(s->labels_path, &s->labels, &s->n_labels, msg, sizeof msg) != MCP_STATUS_OK)
                    yerr(c, node_loc(f[S_LABELS].val, f[S_LABELS].key_at), "%s", msg);
                mcp_free(rel);
            }
            path_pop(c, old);
        }
        break;
    }
#undef STEP_FIELD
}

static void parse_step(yctx *c, struct fy_node *n, yloc at, bool post, mcp_step *s)
{
    yval v = node_val(c, n);
    if (v.kind == YK_STR) {
        char word[64];
        snprintf(word, sizeof word, "%.*s", (int)(v.len < 63 ? v.len : 63), v.text);
        for (int i = 0; i < N_STEP_NAMES; i++) {
            if (strcmp(word, step_names[i]) == 0) {
                yerr(c, at, "a step is a single-key mapping; write `- %s: {}` (with its settings inside the braces)", word);
                return;
            }
        }
        yerr(c, at, "a step is a single-key mapping such as `- scale: {factor: 0.0039}`, got %s; no user code runs "
                    "inside the server, so steps are declarative (scale, normalize, cast, transpose, softmax, topk)",
             describe(&v, word, sizeof word));
        return;
    }
    if (v.kind != YK_MAP) {
        wrong_kind(c, at, &v, "a single-key mapping such as `- scale: {factor: 0.0039}`");
        return;
    }
    int kind = -1, pairs = 0;
    struct fy_node *args = NULL;
    yloc args_key_at = at;
    char first[64] = "", second[64] = "";
    void *it = NULL;
    struct fy_node_pair *p;
    while ((p = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *key = fy_node_pair_key(p);
        yloc kat = node_loc(key, at);
        char k[128];
        pairs++;
        if (!key_text(c, key, kat, k, sizeof k)) continue;
        if (pairs == 1) snprintf(first, sizeof first, "%.60s", k);
        if (pairs == 2) snprintf(second, sizeof second, "%.60s", k);
        int idx = -1;
        for (int i = 0; i < N_STEP_NAMES; i++)
            if (strcmp(k, step_names[i]) == 0) idx = i;
        if (idx < 0) {
            size_t old = path_push(c, k);
            const char *near = mcp__desc_closest(k, step_names, N_STEP_NAMES);
            if (is_code_key(k))
                yerr(c, kat, "a '%s' step would run user code, and no user code runs inside the server; use the "
                             "declarative steps scale, normalize, cast, transpose, softmax and topk",
                     k);
            else
                yerr(c, kat, "unknown step type '%s'%s%s%s; steps are declarative (scale, normalize, cast, transpose, "
                             "softmax, topk) because no user code runs inside the server",
                     k, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
            path_pop(c, old);
            continue;
        }
        if (idx == 5 && !post) {
            size_t old = path_push(c, k);
            yerr(c, kat, "topk is a postprocess step");
            path_pop(c, old);
            continue;
        }
        if (kind < 0) {
            kind = idx;
            args = fy_node_pair_value(p);
            args_key_at = kat;
        }
    }
    if (pairs != 1) {
        if (pairs == 0) yerr(c, at, "empty step; write e.g. `- scale: {factor: 0.0039}`");
        else
            yerr(c, at, "a step has exactly one key, its type; this one has %d ('%s', '%s'%s); check the indentation of "
                        "the step's settings",
                 pairs, first, second, pairs > 2 ? ", ..." : "");
        return;
    }
    if (kind < 0) return;
    static const mcp_step_kind kinds[] = {MCP_STEP_SCALE,     MCP_STEP_NORMALIZE, MCP_STEP_CAST,
                                          MCP_STEP_TRANSPOSE, MCP_STEP_SOFTMAX,   MCP_STEP_TOPK};
    s->kind = kinds[kind];
    size_t old = path_push(c, step_names[kind]);
    parse_step_args(c, kind, args, args_key_at, s);
    path_pop(c, old);
}

static void parse_steps(yctx *c, struct fy_node *n, yloc key_at, bool post, mcp_step **out, int *count)
{
    yval v = node_val(c, n);
    if (v.kind == YK_STR || v.kind == YK_TAGGED) {
        yerr(c, node_loc(n, key_at), "expected a list of declarative steps, got %s; no user code runs inside the server: "
                                     "write steps such as `- scale: {factor: 0.0039}` (scale, normalize, cast, transpose%s)",
             v.kind == YK_STR ? "a string" : "a tagged value", post ? ", softmax, topk" : ", softmax");
        return;
    }
    int k;
    if (!want_seq(c, n, key_at, MCP__DESC_MAX_STEPS, "a list of steps", &k) || k == 0) return;
    mcp_step *steps = mcp_calloc((size_t)k, sizeof *steps);
    if (!steps) {
        yerr(c, key_at, "out of memory");
        return;
    }
    *out = steps;
    *count = k;
    void *it = NULL;
    struct fy_node *item;
    for (int i = 0; i < k && (item = fy_node_sequence_iterate(n, &it)); i++) {
        size_t old = path_push_index(c, i);
        parse_step(c, item, node_loc(item, key_at), post, &steps[i]);
        path_pop(c, old);
    }
}

/* ---- batching, instances ---- */

enum { B_ENABLED, B_DELAY, B_PREFERRED, B_QUEUE, B_TIMEOUT, B_PREFETCH, B_CACHE, B_COUNT };
static const char *const batching_keys[B_COUNT] = {"enabled",        "max_queue_delay_us",   "preferred_batch_sizes",
                                                   "max_queue_size", "timeout_us",           "prefetch_queue_depth",
                                                   "enable_tensor_cache"};

static void parse_batching(yctx *c, struct fy_node *n, yloc key_at, mcp_batching *b, bool *enabled_given)
{
    yfield f[B_COUNT];
    if (!map_fields(c, n, key_at, "a mapping of batching settings", batching_keys, B_COUNT, f)) return;
    for (int i = 0; i < B_COUNT; i++) {
        if (!f[i].present) continue;
        size_t old = path_push(c, batching_keys[i]);
        struct fy_node *v = f[i].val;
        yloc at = f[i].key_at;
        switch (i) {
        case B_ENABLED: *enabled_given = want_bool(c, v, at, &b->enabled); break;
        case B_DELAY: want_int(c, v, at, 0, MCP__DESC_MAX_QUEUE_DELAY_US, &b->max_queue_delay_us); break;
        case B_QUEUE: want_int(c, v, at, 1, MCP__DESC_MAX_QUEUE_SIZE, &b->max_queue_size); break;
        case B_TIMEOUT: want_int(c, v, at, 0, MCP__DESC_MAX_TIMEOUT_US, &b->default_timeout_us); break;
        case B_PREFETCH: want_int(c, v, at, 0, MCP__DESC_MAX_PREFETCH, &b->prefetch_queue_depth); break;
        case B_CACHE: want_bool(c, v, at, &b->enable_tensor_cache); break;
        case B_PREFERRED: {
            int k;
            int max = (int)(sizeof b->preferred / sizeof b->preferred[0]);
            if (!want_seq(c, v, at, max, "a list of batch sizes", &k)) break;
            void *it = NULL;
            struct fy_node *item;
            int got = 0;
            bool ok = true;
            for (int j = 0; j < k && (item = fy_node_sequence_iterate(v, &it)); j++) {
                size_t o2 = path_push_index(c, j);
                int64_t x;
                if (want_int(c, item, at, 1, MCP__DESC_MAX_BATCH, &x)) {
                    for (int q = 0; q < got; q++) {
                        if (b->preferred[q] == x) {
                            yerr(c, node_loc(item, at), "batch size %lld is listed twice", (long long)x);
                            ok = false;
                        }
                    }
                    b->preferred[got++] = x;
                } else {
                    ok = false;
                }
                path_pop(c, o2);
            }
            b->n_preferred = ok ? got : 0;
            break;
        }
        }
        path_pop(c, old);
    }
}

enum { I_COUNT_KEY, I_THREADS, I_COUNT };
static const char *const instance_keys[I_COUNT] = {"count", "threads"};

static void parse_instances(yctx *c, struct fy_node *n, yloc key_at, mcp_descriptor *d)
{
    yfield f[I_COUNT];
    if (!map_fields(c, n, key_at, "a mapping with count and threads", instance_keys, I_COUNT, f)) return;
    size_t old;
    if (f[I_COUNT_KEY].present) {
        old = path_push(c, "count");
        want_int(c, f[I_COUNT_KEY].val, f[I_COUNT_KEY].key_at, 1, MCP__DESC_MAX_INSTANCES, &d->instance_count);
        path_pop(c, old);
    }
    if (f[I_THREADS].present) {
        old = path_push(c, "threads");
        want_int(c, f[I_THREADS].val, f[I_THREADS].key_at, 1, MCP__DESC_MAX_THREADS, &d->instance_threads);
        path_pop(c, old);
    }
}

/* ---- resources ---- */

static void want_number_in(yctx *c, struct fy_node *n, yloc key_at, double lo, double hi, double *out);

enum { RS_CPUS, RS_MEMORY, RS_COUNT };
static const char *const resource_keys[RS_COUNT] = {"cpus", "memory"};

/* A byte count: an integer, or a string with a binary (Ki, Mi, Gi, Ti) or
 * decimal (k, M, G, T) suffix, as Kubernetes writes memory. */
static void want_bytes(yctx *c, struct fy_node *n, yloc key_at, int64_t lo, int64_t hi, int64_t *out)
{
    yval v = node_val(c, n);
    if (v.kind != YK_STR) {
        want_int(c, n, key_at, lo, hi, out);
        return;
    }
    yloc at = node_loc(n, key_at);
    static const struct { const char *suffix; int64_t mult; } units[] = {
        {"Ki", 1LL << 10}, {"Mi", 1LL << 20}, {"Gi", 1LL << 30}, {"Ti", 1LL << 40},
        {"k", 1000LL}, {"M", 1000000LL}, {"G", 1000000000LL}, {"T", 1000000000000LL}, {"", 1},
    };
    size_t digits = 0;
    while (digits < v.len && digits < 20 && isdigit((unsigned char)v.text[digits])) digits++;
    int64_t mult = 0;
    for (size_t u = 0; digits > 0 && !mult && u < sizeof units / sizeof units[0]; u++) {
        size_t sl = strlen(units[u].suffix);
        if (v.len - digits == sl && memcmp(v.text + digits, units[u].suffix, sl) == 0) mult = units[u].mult;
    }
    int64_t num = 0;
    bool fits = digits > 0 && digits < 19;
    for (size_t i = 0; fits && i < digits; i++) num = num * 10 + (v.text[i] - '0');
    if (!mult || !fits) {
        yerr(c, at, "expected bytes as an integer or a string like 512Mi or 2Gi (suffix Ki, Mi, Gi, Ti, k, M, G or T), got '%.*s'",
             (int)(v.len > 40 ? 40 : v.len), v.text);
        return;
    }
    if (num > hi / mult || num * mult < lo) {
        yerr(c, at, "%.*s is out of range (%lld..%lld bytes)", (int)(v.len > 40 ? 40 : v.len), v.text, (long long)lo,
             (long long)hi);
        return;
    }
    *out = num * mult;
}

static void parse_resources(yctx *c, struct fy_node *n, yloc key_at, mcp_descriptor *d)
{
    yfield f[RS_COUNT];
    if (!map_fields(c, n, key_at, "a mapping with cpus and memory", resource_keys, RS_COUNT, f)) return;
    size_t old;
    if (f[RS_CPUS].present) {
        old = path_push(c, "cpus");
        double cpus = 0;
        want_number_in(c, f[RS_CPUS].val, f[RS_CPUS].key_at, 0.01, MCP__DESC_MAX_CPUS, &cpus);
        d->cpus = cpus;
        path_pop(c, old);
    }
    if (f[RS_MEMORY].present) {
        old = path_push(c, "memory");
        want_bytes(c, f[RS_MEMORY].val, f[RS_MEMORY].key_at, MCP__DESC_MIN_MEMORY, MCP__DESC_MAX_MEMORY, &d->memory_bytes);
        path_pop(c, old);
    }
}

/* ---- generation (format gguf) ---- */

enum {
    GEN_CONTEXT, GEN_SEQS, GEN_KV_BYTES, GEN_CACHE_TYPE, GEN_STEP_TOKENS, GEN_QUEUE, GEN_MAX_TOKENS, GEN_MAX_TOKENS_LIMIT,
    GEN_TEMPERATURE, GEN_TOP_P, GEN_TOP_K, GEN_MIN_P, GEN_REPEAT, GEN_TEMPLATE, GEN_PREFIX_CACHE, GEN_COUNT
};
static const char *const generation_keys[GEN_COUNT] = {
    "context_length", "max_sequences", "kv_cache_bytes", "cache_type",     "step_tokens", "max_queue_size",
    "max_tokens",     "max_tokens_limit", "temperature", "top_p",          "top_k",       "min_p",
    "repeat_penalty", "chat_template", "prefix_cache",
};

/* A number within [lo, hi]. */
static void want_number_in(yctx *c, struct fy_node *n, yloc key_at, double lo, double hi, double *out)
{
    double x;
    if (!want_number(c, n, key_at, &x)) return;
    if (x < lo || x > hi) {
        yerr(c, node_loc(n, key_at), "%g is out of range (%g..%g)", x, lo, hi);
        return;
    }
    *out = x;
}

/* A string that must be one of names; its index, or -1 (reported). */
static int want_choice(yctx *c, struct fy_node *n, yloc key_at, const char *what, const char *const *names, int count)
{
    char *s = NULL;
    if (!want_string(c, n, key_at, what, &s)) return -1;
    for (int i = 0; i < count; i++) {
        if (strcmp(s, names[i]) == 0) {
            mcp_free(s);
            return i;
        }
    }
    char list[200] = "";
    for (int i = 0; i < count; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    yerr(c, node_loc(n, key_at), "%s '%.60s' is not supported; supported: %s", what, s, list);
    mcp_free(s);
    return -1;
}

static void parse_generation(yctx *c, struct fy_node *n, yloc key_at, mcp_generation *g)
{
    yfield f[GEN_COUNT];
    if (!map_fields(c, n, key_at, "a mapping of generation settings", generation_keys, GEN_COUNT, f)) return;
    for (int i = 0; i < GEN_COUNT; i++) {
        if (!f[i].present) continue;
        size_t old = path_push(c, generation_keys[i]);
        struct fy_node *v = f[i].val;
        yloc at = f[i].key_at;
        switch (i) {
        case GEN_CONTEXT: want_int(c, v, at, 0, MCP__DESC_MAX_CONTEXT, &g->context_length); break;
        case GEN_SEQS: want_int(c, v, at, 1, MCP__DESC_MAX_SEQS, &g->max_sequences); break;
        case GEN_KV_BYTES: want_int(c, v, at, 1 << 16, MCP__DESC_MAX_KV_BYTES, &g->kv_cache_bytes); break;
        case GEN_STEP_TOKENS: want_int(c, v, at, 16, MCP__DESC_MAX_STEP_TOKENS, &g->step_tokens); break;
        case GEN_QUEUE: want_int(c, v, at, 1, MCP__DESC_MAX_QUEUE_SIZE, &g->max_queue); break;
        case GEN_MAX_TOKENS: want_int(c, v, at, 1, MCP__DESC_MAX_GEN_TOKENS, &g->max_tokens); break;
        case GEN_MAX_TOKENS_LIMIT: want_int(c, v, at, 1, MCP__DESC_MAX_GEN_TOKENS, &g->max_tokens_limit); break;
        case GEN_TEMPERATURE: want_number_in(c, v, at, 0, 2, &g->temperature); break;
        case GEN_TOP_P: want_number_in(c, v, at, 0, 1, &g->top_p); break;
        case GEN_MIN_P: want_number_in(c, v, at, 0, 1, &g->min_p); break;
        case GEN_REPEAT: want_number_in(c, v, at, 0.01, 10, &g->repeat_penalty); break;
        case GEN_TOP_K: want_int(c, v, at, 0, MCP__DESC_MAX_TOPK, &g->top_k); break;
        case GEN_PREFIX_CACHE: want_bool(c, v, at, &g->prefix_cache); break;
        case GEN_CACHE_TYPE: {
            static const char *const types[] = {"f16", "f32"};
            int k = want_choice(c, v, at, "cache type", types, 2);
            if (k >= 0) g->kv_f32 = k == 1;
            break;
        }
        case GEN_TEMPLATE: {
            static const char *const names[] = {"auto", "chatml", "llama3", "llama2", "plain"};
            int k = want_choice(c, v, at, "chat template", names, 5);
            if (k >= 0) g->chat_template = (mcp_chat_template)k;
            break;
        }
        }
        path_pop(c, old);
    }
    if (f[GEN_MAX_TOKENS].present && f[GEN_MAX_TOKENS_LIMIT].present && g->max_tokens > g->max_tokens_limit) {
        size_t old = path_push(c, "max_tokens");
        yerr(c, f[GEN_MAX_TOKENS].key_at, "max_tokens %lld is above max_tokens_limit %lld", (long long)g->max_tokens,
             (long long)g->max_tokens_limit);
        path_pop(c, old);
    }
    if (g->max_tokens > g->max_tokens_limit) g->max_tokens = g->max_tokens_limit;
}

/* ---- rollout ---- */

/* A version named by the rollout: vMAJOR.MINOR.PATCH, or a Triton folder's
 * number. */
static bool want_version(yctx *c, struct fy_node *n, yloc key_at, char *out, size_t cap)
{
    char *s = NULL;
    yloc at = node_loc(n, key_at);
    yval v = node_val(c, n);
    if (v.kind == YK_INT && v.int_in_range && v.i >= 0) {
        snprintf(out, cap, "%lld", (long long)v.i);
        return true;
    }
    if (!want_string(c, n, key_at, "a version like v1.2.0", &s)) return false;
    int sv[3];
    bool ok = mcp__desc_semver_parse(s, sv) || all_digits(s, strlen(s), 10);
    if (ok && strlen(s) < cap) snprintf(out, cap, "%s", s);
    else yerr(c, at, "version '%.60s' is not vMAJOR.MINOR.PATCH (like v1.3.0) or a version folder number", s);
    mcp_free(s);
    return ok && strlen(out) > 0;
}

enum { RO_PRIMARY, RO_CANARY, RO_SHADOW, RO_VALIDATOR, RO_WINDOW, RO_GATES, RO_COUNT };
static const char *const rollout_keys[RO_COUNT] = {"primary", "canary", "shadow", "validator", "window", "gates"};
enum { RV_VERSION, RV_AMOUNT, RV_COUNT };
enum { G_ERROR_MARGIN, G_P99, G_MIN_SAMPLES, G_AGREEMENT, G_COUNT };
static const char *const gate_keys[G_COUNT] = {"error_rate_margin", "p99_budget", "min_samples", "agreement"};

static bool want_duration(yctx *c, struct fy_node *n, yloc key_at, int64_t *us)
{
    char *s = NULL;
    if (!want_string(c, n, key_at, "a duration like 60s or 800ms", &s)) return false;
    char why[160];
    bool ok = mcp_duration_parse(s, us, why, sizeof why);
    if (!ok) yerr(c, node_loc(n, key_at), "%s", why);
    mcp_free(s);
    return ok;
}

/* canary: {version, weight} and shadow: {version, sample}. */
static void parse_rollout_target(yctx *c, struct fy_node *n, yloc key_at, const char *amount_key, double lo, double hi,
                                 char *version, double *amount)
{
    const char *keys[RV_COUNT] = {"version", amount_key};
    yfield f[RV_COUNT];
    char expected[80];
    snprintf(expected, sizeof expected, "a mapping with version and %s", amount_key);
    if (!map_fields(c, n, key_at, expected, keys, RV_COUNT, f)) return;
    yloc here = node_loc(n, key_at);
    if (!f[RV_VERSION].present) yerr(c, here, "missing required key 'version'");
    else {
        size_t old = path_push(c, "version");
        want_version(c, f[RV_VERSION].val, f[RV_VERSION].key_at, version, MCP_ROLLOUT_VERSION_LEN);
        path_pop(c, old);
    }
    if (!f[RV_AMOUNT].present) {
        yerr(c, here, "missing required key '%s'", amount_key);
        return;
    }
    size_t old = path_push(c, amount_key);
    double x;
    if (want_number(c, f[RV_AMOUNT].val, f[RV_AMOUNT].key_at, &x)) {
        if (x < lo || x > hi) yerr(c, node_loc(f[RV_AMOUNT].val, f[RV_AMOUNT].key_at), "%g is out of range (%g..%g)", x, lo, hi);
        else *amount = x;
    }
    path_pop(c, old);
}

static void parse_rollout(yctx *c, struct fy_node *n, yloc key_at, const mcp_descriptor *d, mcp_rollout_spec *ro)
{
    yfield f[RO_COUNT];
    if (!map_fields(c, n, key_at, "a mapping of rollout settings (primary, canary, shadow, ...)", rollout_keys, RO_COUNT, f))
        return;
    ro->present = true;
    size_t old;
    if (f[RO_PRIMARY].present) {
        old = path_push(c, "primary");
        want_version(c, f[RO_PRIMARY].val, f[RO_PRIMARY].key_at, ro->primary, sizeof ro->primary);
        path_pop(c, old);
    }
    if (f[RO_CANARY].present) {
        old = path_push(c, "canary");
        parse_rollout_target(c, f[RO_CANARY].val, f[RO_CANARY].key_at, "weight", 0, 100, ro->canary, &ro->canary_weight);
        path_pop(c, old);
    }
    if (f[RO_SHADOW].present) {
        old = path_push(c, "shadow");
        parse_rollout_target(c, f[RO_SHADOW].val, f[RO_SHADOW].key_at, "sample", 0, 1, ro->shadow, &ro->shadow_sample);
        path_pop(c, old);
    }
    if (f[RO_VALIDATOR].present) {
        old = path_push(c, "validator");
        char *s = NULL;
        char why[200];
        if (want_string(c, f[RO_VALIDATOR].val, f[RO_VALIDATOR].key_at, "a validator like diff-threshold@0.02", &s) &&
            !mcp_validator_parse(s, &ro->validator, &ro->threshold, why, sizeof why))
            yerr(c, node_loc(f[RO_VALIDATOR].val, f[RO_VALIDATOR].key_at), "%s", why);
        mcp_free(s);
        path_pop(c, old);
    }
    if (f[RO_WINDOW].present) {
        old = path_push(c, "window");
        int64_t us;
        if (want_duration(c, f[RO_WINDOW].val, f[RO_WINDOW].key_at, &us)) {
            if (us < 100000) yerr(c, node_loc(f[RO_WINDOW].val, f[RO_WINDOW].key_at), "the window must be at least 100ms");
            else ro->window_ms = us / 1000;
        }
        path_pop(c, old);
    }
    if (f[RO_GATES].present) {
        old = path_push(c, "gates");
        yfield g[G_COUNT];
        if (map_fields(c, f[RO_GATES].val, f[RO_GATES].key_at, "a mapping of gates (error_rate_margin, p99_budget)",
                       gate_keys, G_COUNT, g)) {
            for (int i = 0; i < G_COUNT; i++) {
                if (!g[i].present) continue;
                size_t o2 = path_push(c, gate_keys[i]);
                yloc at = node_loc(g[i].val, g[i].key_at);
                double x;
                int64_t k;
                switch (i) {
                case G_ERROR_MARGIN:
                    if (want_number(c, g[i].val, g[i].key_at, &x)) {
                        if (x < 0 || x > 1) yerr(c, at, "%g is out of range (0..1)", x);
                        else ro->error_rate_margin = x;
                    }
                    break;
                case G_P99: want_duration(c, g[i].val, g[i].key_at, &ro->p99_budget_us); break;
                case G_MIN_SAMPLES:
                    if (want_int(c, g[i].val, g[i].key_at, 1, 1000000, &k)) ro->min_samples = k;
                    break;
                case G_AGREEMENT:
                    if (want_number(c, g[i].val, g[i].key_at, &x)) {
                        if (!(x > 0 && x <= 1)) yerr(c, at, "%g is out of range (0..1]", x);
                        else ro->agreement = x;
                    }
                    break;
                }
                path_pop(c, o2);
            }
        }
        path_pop(c, old);
    }
    /* The versions' roles must be distinct, and this descriptor's version
     * must have one: it is the primary unless it is the canary or shadow. */
    yloc here = node_loc(n, key_at);
    const char *mine = d->version ? d->version : "";
    if (ro->canary[0] && ro->shadow[0] && !strcmp(ro->canary, ro->shadow))
        yerr(c, here, "version %s cannot be both the canary and the shadow", ro->canary);
    if (ro->primary[0] && (!strcmp(ro->primary, ro->canary) || !strcmp(ro->primary, ro->shadow)))
        yerr(c, here, "version %s cannot be both the primary and the %s", ro->primary,
             !strcmp(ro->primary, ro->canary) ? "canary" : "shadow");
    if (ro->primary[0] && strcmp(ro->primary, mine) != 0 && strcmp(ro->canary, mine) != 0 && strcmp(ro->shadow, mine) != 0)
        yerr(c, here, "this descriptor's version %s has no role in the rollout (primary %s%s%s%s%s)", mine, ro->primary,
             ro->canary[0] ? ", canary " : "", ro->canary, ro->shadow[0] ? ", shadow " : "", ro->shadow);
}

/* ---- monitoring ---- */

enum { MO_SAMPLE_RATE, MO_WINDOW, MO_THRESHOLD, MO_MIN_SAMPLES, MO_CLASSIFIER, MO_INPUTS, MO_OUTPUTS, MO_COUNT };
static const char *const monitoring_keys[MO_COUNT] = {"sample_rate", "window",  "threshold", "min_samples",
                                                      "classifier",  "inputs",  "outputs"};

/* classifier: auto, true or false (plain booleans; "auto" the only string). */
static void want_classifier(yctx *c, struct fy_node *n, yloc key_at, mcp_classifier_mode *out)
{
    yval v = node_val(c, n);
    if (v.kind == YK_BOOL) {
        *out = v.b ? MCP_CLASSIFIER_ON : MCP_CLASSIFIER_OFF;
        return;
    }
    if (v.kind != YK_STR) {
        wrong_kind(c, node_loc(n, key_at), &v, "auto, true or false");
        return;
    }
    static const char *const names[] = {"auto"};
    if (want_choice(c, n, key_at, "classifier mode (or true / false)", names, 1) == 0) *out = MCP_CLASSIFIER_AUTO;
}

/* outputs: a list of distinct output names; with declared outputs, each
 * must be one of them. */
static void parse_monitor_outputs(yctx *c, struct fy_node *n, yloc key_at, const mcp_descriptor *d, mcp_monitoring *m)
{
    int count = 0;
    if (!want_seq(c, n, key_at, MCP__DESC_MAX_MONITOR_OUTPUTS, "a list of output names", &count) || count == 0) {
        if (fy_node_is_sequence(n) && count == 0)
            yerr(c, node_loc(n, key_at), "an empty list watches nothing; leave 'outputs' out to watch every output");
        return;
    }
    m->outputs = mcp_calloc((size_t)count, sizeof *m->outputs);
    if (!m->outputs) {
        yerr(c, key_at, "out of memory");
        return;
    }
    void *it = NULL;
    struct fy_node *item;
    for (int i = 0; (item = fy_node_sequence_iterate(n, &it)); i++) {
        size_t old = path_push_index(c, i);
        yloc at = node_loc(item, key_at);
        char *name = NULL;
        if (want_string(c, item, key_at, "an output name", &name)) {
            bool declared = d->n_outputs == 0, twice = false;
            for (int k = 0; k < d->n_outputs; k++) declared |= d->outputs[k].name && !strcmp(d->outputs[k].name, name);
            for (int k = 0; k < m->n_outputs; k++) twice |= !strcmp(m->outputs[k], name);
            if (strlen(name) > MCP__DESC_MAX_TENSOR_NAME)
                yerr(c, at, "the name is %zu bytes long; at most %d", strlen(name), MCP__DESC_MAX_TENSOR_NAME);
            else if (twice) yerr(c, at, "output '%.100s' is listed twice", name);
            else if (!declared) {
                char list[300] = "";
                for (int k = 0; k < d->n_outputs && strlen(list) < sizeof list - 80; k++)
                    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.60s", k ? ", " : "", d->outputs[k].name);
                yerr(c, at, "'%.100s' is not a declared output (outputs: %s)", name, list);
            } else {
                m->outputs[m->n_outputs++] = name;
                name = NULL;
            }
        }
        mcp_free(name);
        path_pop(c, old);
    }
}

static void parse_monitoring(yctx *c, struct fy_node *n, yloc key_at, const mcp_descriptor *d, mcp_monitoring *m)
{
    yfield f[MO_COUNT];
    if (!map_fields(c, n, key_at, "a mapping of monitoring settings (sample_rate, window, threshold, ...)", monitoring_keys,
                    MO_COUNT, f))
        return;
    m->present = true;
    for (int i = 0; i < MO_COUNT; i++) {
        if (!f[i].present) continue;
        size_t old = path_push(c, monitoring_keys[i]);
        struct fy_node *v = f[i].val;
        yloc at = f[i].key_at;
        switch (i) {
        case MO_SAMPLE_RATE: want_number_in(c, v, at, 0, 1, &m->sample_rate); break;
        case MO_WINDOW:
            want_int(c, v, at, MCP__DESC_MIN_MONITOR_WINDOW, MCP__DESC_MAX_MONITOR_WINDOW, &m->window);
            break;
        case MO_THRESHOLD: {
            double x;
            if (!want_number(c, v, at, &x)) break;
            if (!(x > 0 && x <= 1)) yerr(c, node_loc(v, at), "%g is out of range (0..1]: scores run from 0 (the same) to 1", x);
            else m->threshold = x;
            break;
        }
        case MO_MIN_SAMPLES: want_int(c, v, at, 1, MCP__DESC_MAX_MONITOR_WINDOW, &m->min_samples); break;
        case MO_CLASSIFIER: want_classifier(c, v, at, &m->classifier); break;
        case MO_INPUTS: want_bool(c, v, at, &m->inputs); break;
        case MO_OUTPUTS: parse_monitor_outputs(c, v, at, d, m); break;
        }
        path_pop(c, old);
    }
    /* A current window never holds more than `window` samples, so a
     * larger minimum would never be met and drift never judged. */
    if (m->min_samples > m->window) {
        bool given = f[MO_MIN_SAMPLES].present;
        size_t old = path_push(c, given ? "min_samples" : "window");
        yerr(c, given ? node_loc(f[MO_MIN_SAMPLES].val, f[MO_MIN_SAMPLES].key_at) : node_loc(f[MO_WINDOW].val, f[MO_WINDOW].key_at),
             "min_samples %lld is above window %lld: the current window would never hold enough samples to judge",
             (long long)m->min_samples, (long long)m->window);
        path_pop(c, old);
    }
}

/* ---- the root ---- */

enum {
    R_NAME, R_VERSION, R_FORMAT, R_PATH, R_DEVICE, R_MAX_BATCH, R_BATCH_SIZE, R_PRECISION,
    R_INPUTS, R_OUTPUTS, R_BATCHING, R_INSTANCES, R_PRE, R_POST, R_WARMUP, R_ROLLOUT, R_GENERATION, R_MONITORING,
    R_RESOURCES, R_CALIBRATION, R_COUNT
};
static const char *const root_keys[R_COUNT] = {
    "name",    "version",  "format",   "path",      "device",     "max_batch_size", "batch_size", "precision",
    "inputs",  "outputs",  "batching", "instances", "preprocess", "postprocess",    "warmup",     "rollout",
    "generation", "monitoring", "resources", "calibration",
};

/* Replaces *slot (a default) with a string field that must be one of
 * `allowed`. */
static void enum_field(yctx *c, yfield *f, const char *key, const char *what, const char *const *allowed, int n,
                       char **slot)
{
    if (!f->present) return;
    size_t old = path_push(c, key);
    char *s = NULL;
    char expected[160];
    snprintf(expected, sizeof expected, "a %s name", what);
    if (want_string(c, f->val, f->key_at, expected, &s)) {
        bool ok = false;
        for (int i = 0; i < n; i++) ok |= strcmp(s, allowed[i]) == 0;
        if (ok) {
            mcp_free(*slot);
            *slot = s;
            s = NULL;
        } else {
            char list[200] = "";
            for (int i = 0; i < n; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", allowed[i]);
            const char *near = mcp__desc_closest(s, allowed, n);
            yerr(c, node_loc(f->val, f->key_at), "%s '%s' is not supported%s%s%s; supported: %s", what, s,
                 near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "", list);
        }
        mcp_free(s);
    }
    path_pop(c, old);
}

static void parse_root(yctx *c, struct fy_node *root, const char *source_dir, mcp_descriptor *d)
{
    yfield f[R_COUNT];
    yloc top = {1, 1};
    yval rv = node_val(c, root);
    if (rv.kind == YK_NULL) {
        yerr(c, top, "the descriptor is empty; it needs at least 'name' and 'path'");
        return;
    }
    if (!map_fields(c, root, top, "a mapping of descriptor fields (name, path, ...)", root_keys, R_COUNT, f)) return;
    yloc here = node_loc(root, top);
    size_t old;

    if (!f[R_NAME].present) {
        yerr(c, here, "missing required key 'name'");
    } else {
        old = path_push(c, "name");
        if (want_string(c, f[R_NAME].val, f[R_NAME].key_at, "a model name", &d->name) && !mcp__desc_name_valid(d->name))
            yerr(c, node_loc(f[R_NAME].val, f[R_NAME].key_at),
                 "invalid model name '%.100s': use 1 to %d letters, digits, '_', '.' or '-' (not '.' or '..'), "
                 "optionally after a tenant namespace 'tenant/'", d->name, MCP__DESC_MAX_NAME);
        path_pop(c, old);
    }
    if (f[R_VERSION].present) {
        old = path_push(c, "version");
        char *s = NULL;
        if (want_string(c, f[R_VERSION].val, f[R_VERSION].key_at, "a version like v1.2.0", &s)) {
            if (mcp__desc_semver_parse(s, d->semver)) {
                mcp_free(d->version);
                d->version = s;
                s = NULL;
            } else {
                yerr(c, node_loc(f[R_VERSION].val, f[R_VERSION].key_at),
                     "version '%.60s' is not vMAJOR.MINOR.PATCH (like v1.2.0)%s", s,
                     s[0] >= '0' && s[0] <= '9' ? "; it needs the leading 'v'" : "");
            }
            mcp_free(s);
        }
        path_pop(c, old);
    }
    static const char *const formats[] = {"onnx", "triton", "gguf", "mcpir"};
    enum_field(c, &f[R_FORMAT], "format", "format", formats, 4, &d->format);
    static const char *const devices[] = {"cpu"};
    enum_field(c, &f[R_DEVICE], "device", "device", devices, 1, &d->device);
    static const char *const precisions[] = {"fp32", "fp16", "bf16", "int8"};
    enum_field(c, &f[R_PRECISION], "precision", "precision", precisions, 4, &d->precision);
    bool onnx = !d->format || strcmp(d->format, "gguf") != 0;
    if (c->check_load && f[R_PRECISION].present && d->precision && strcmp(d->precision, "fp32") != 0 &&
        !(onnx && (strcmp(d->precision, "int8") == 0 || strcmp(d->precision, "bf16") == 0))) {
        old = path_push(c, "precision");
        yerr(c, node_loc(f[R_PRECISION].val, f[R_PRECISION].key_at),
             "precision '%s' is not implemented by this engine yet (it runs fp32, bf16 and int8); set precision: fp32, "
             "bf16 or int8",
             d->precision);
        path_pop(c, old);
    }
    if (f[R_PRECISION].present && d->precision && strcmp(d->precision, "int8") == 0 && d->format &&
        strcmp(d->format, "mcpir") == 0) {
        old = path_push(c, "precision");
        yerr(c, node_loc(f[R_PRECISION].val, f[R_PRECISION].key_at),
             "precision int8 quantizes an ONNX model at load; a compiled model is compiled as it is: quantize first "
             "(mcpctl quantize), then compile the result");
        path_pop(c, old);
    }
    if (f[R_CALIBRATION].present) {
        old = path_push(c, "calibration");
        char *rel = NULL;
        if (!d->precision || strcmp(d->precision, "int8") != 0) {
            yerr(c, f[R_CALIBRATION].key_at,
                 "calibration samples quantize a model at load; they need precision: int8");
        } else if (want_string(c, f[R_CALIBRATION].val, f[R_CALIBRATION].key_at, "a folder of .npy samples", &rel)) {
            d->calibration = mcp__desc_path_join(source_dir, rel);
            char msg[600];
            if (!d->calibration) yerr(c, f[R_CALIBRATION].key_at, "out of memory");
            else if (!confine_path(c, &d->calibration, "calibration folder", true, msg, sizeof msg) ||
                     !path_usable(c, d->calibration, "calibration folder", msg, sizeof msg))
                yerr(c, node_loc(f[R_CALIBRATION].val, f[R_CALIBRATION].key_at), "%s", msg);
        }
        mcp_free(rel);
        path_pop(c, old);
    }

    if (!f[R_PATH].present) {
        yerr(c, here, "missing required key 'path' (the model file, relative to this descriptor)");
    } else {
        old = path_push(c, "path");
        char *rel = NULL;
        if (want_string(c, f[R_PATH].val, f[R_PATH].key_at, "a model file path", &rel)) {
            d->path = mcp__desc_path_join(source_dir, rel);
            char msg[600];
            if (!d->path) yerr(c, f[R_PATH].key_at, "out of memory");
            else if (!confine_path(c, &d->path, "model file", true, msg, sizeof msg) ||
                     !path_usable(c, d->path, "model file", msg, sizeof msg))
                yerr(c, node_loc(f[R_PATH].val, f[R_PATH].key_at), "%s", msg);
            mcp_free(rel);
        }
        path_pop(c, old);
    }

    if (f[R_MAX_BATCH].present && f[R_BATCH_SIZE].present) {
        old = path_push(c, "batch_size");
        yerr(c, f[R_BATCH_SIZE].key_at, "batch_size is an alias of max_batch_size (line %d); give only one of them",
             f[R_MAX_BATCH].key_at.line);
        path_pop(c, old);
    }
    for (int k = R_MAX_BATCH; k <= R_BATCH_SIZE; k++) {
        if (!f[k].present) continue;
        old = path_push(c, root_keys[k]);
        want_int(c, f[k].val, f[k].key_at, 0, MCP__DESC_MAX_BATCH, &d->max_batch_size);
        path_pop(c, old);
    }

    if (f[R_INPUTS].present) {
        old = path_push(c, "inputs");
        parse_io_list(c, f[R_INPUTS].val, f[R_INPUTS].key_at, &d->inputs, &d->n_inputs);
        path_pop(c, old);
    }
    if (f[R_OUTPUTS].present) {
        old = path_push(c, "outputs");
        parse_io_list(c, f[R_OUTPUTS].val, f[R_OUTPUTS].key_at, &d->outputs, &d->n_outputs);
        path_pop(c, old);
    }
    bool enabled_given = false;
    if (f[R_BATCHING].present) {
        old = path_push(c, "batching");
        parse_batching(c, f[R_BATCHING].val, f[R_BATCHING].key_at, &d->batching, &enabled_given);
        path_pop(c, old);
    }
    if (!enabled_given) d->batching.enabled = d->max_batch_size > 0;
    if (enabled_given && d->batching.enabled && d->max_batch_size == 0) {
        old = path_push(c, "batching.enabled");
        yerr(c, f[R_BATCHING].key_at, "dynamic batching needs max_batch_size > 0 (the model has no batch dimension)");
        path_pop(c, old);
    }
    for (int i = 0; i < d->batching.n_preferred; i++) {
        if (d->batching.preferred[i] > d->max_batch_size) {
            old = path_push(c, "batching.preferred_batch_sizes");
            size_t o2 = path_push_index(c, i);
            yerr(c, f[R_BATCHING].key_at, "preferred batch size %lld is larger than max_batch_size %lld",
                 (long long)d->batching.preferred[i], (long long)d->max_batch_size);
            path_pop(c, o2);
            path_pop(c, old);
        }
    }
    if (f[R_INSTANCES].present) {
        old = path_push(c, "instances");
        parse_instances(c, f[R_INSTANCES].val, f[R_INSTANCES].key_at, d);
        path_pop(c, old);
    }
    /* A generative model runs one step loop on every core unless told. */
    if (d->format && strcmp(d->format, "gguf") == 0) {
        yfield *inst = &f[R_INSTANCES];
        bool threads_given = false;
        if (inst->present && fy_node_is_mapping(inst->val)) threads_given = fy_node_mapping_lookup_by_string(inst->val, "threads", FY_NT) != NULL;
        if (!threads_given) d->instance_threads = 0;
        if (d->instance_count > 1) {
            old = path_push(c, "instances.count");
            yerr(c, f[R_INSTANCES].key_at, "a generative model runs one instance (its step loop batches every sequence); count is %lld",
                 (long long)d->instance_count);
            path_pop(c, old);
        }
    }
    if (f[R_RESOURCES].present) {
        old = path_push(c, "resources");
        parse_resources(c, f[R_RESOURCES].val, f[R_RESOURCES].key_at, d);
        path_pop(c, old);
    }
    if (f[R_WARMUP].present) {
        old = path_push(c, "warmup");
        yval v = node_val(c, f[R_WARMUP].val);
        if (v.kind == YK_BOOL) d->warmup_runs = v.b ? 1 : 0;
        else want_int(c, f[R_WARMUP].val, f[R_WARMUP].key_at, 0, MCP__DESC_MAX_WARMUP, &d->warmup_runs);
        path_pop(c, old);
    }
    if (f[R_ROLLOUT].present) {
        old = path_push(c, "rollout");
        parse_rollout(c, f[R_ROLLOUT].val, f[R_ROLLOUT].key_at, d, &d->rollout);
        path_pop(c, old);
    }
    bool gguf = d->format && strcmp(d->format, "gguf") == 0;
    if (f[R_GENERATION].present) {
        old = path_push(c, "generation");
        if (!gguf)
            yerr(c, f[R_GENERATION].key_at, "a generation section is for generative models (format: gguf); this one is format %s",
                 d->format ? d->format : "onnx");
        else parse_generation(c, f[R_GENERATION].val, f[R_GENERATION].key_at, &d->generation);
        path_pop(c, old);
    }
    /* A generative model takes text, not tensors: none of the tensor
     * settings apply to it. */
    static const int tensor_only[] = {R_MAX_BATCH, R_BATCH_SIZE, R_INPUTS, R_OUTPUTS,  R_BATCHING,
                                      R_PRE,       R_POST,       R_PRECISION, R_MONITORING};
    for (size_t i = 0; gguf && i < sizeof tensor_only / sizeof tensor_only[0]; i++) {
        if (!f[tensor_only[i]].present) continue;
        old = path_push(c, root_keys[tensor_only[i]]);
        yerr(c, f[tensor_only[i]].key_at, "'%s' does not apply to a generative model (format: gguf); %s",
             root_keys[tensor_only[i]],
             tensor_only[i] == R_MONITORING ? "output monitoring watches tensor outputs"
                                            : "its settings go in 'generation'");
        path_pop(c, old);
    }
    if (gguf) d->max_batch_size = 0, d->batching.enabled = false;
    /* A generative model's KV pool is mapped memory outside its account,
     * reserved whole: it must fit the limit by itself. */
    if (gguf && d->memory_bytes > 0 && d->generation.kv_cache_bytes > d->memory_bytes) {
        old = path_push(c, "resources.memory");
        yerr(c, f[R_RESOURCES].key_at, "%lld bytes cannot hold the KV cache (generation.kv_cache_bytes: %lld)",
             (long long)d->memory_bytes, (long long)d->generation.kv_cache_bytes);
        path_pop(c, old);
    }
    if (f[R_MONITORING].present && !gguf) {
        old = path_push(c, "monitoring");
        parse_monitoring(c, f[R_MONITORING].val, f[R_MONITORING].key_at, d, &d->monitoring);
        path_pop(c, old);
    }
    if (f[R_PRE].present) {
        c->step_io = d->inputs;
        c->step_n_io = d->n_inputs;
        c->step_io_key = "inputs";
        old = path_push(c, "preprocess");
        parse_steps(c, f[R_PRE].val, f[R_PRE].key_at, false, &d->pre, &d->n_pre);
        path_pop(c, old);
    }
    if (f[R_POST].present) {
        c->step_io = d->outputs;
        c->step_n_io = d->n_outputs;
        c->step_io_key = "outputs";
        old = path_push(c, "postprocess");
        parse_steps(c, f[R_POST].val, f[R_POST].key_at, true, &d->post, &d->n_post);
        path_pop(c, old);
    }
}

/* ---- libfyaml plumbing ---- */

typedef struct fy_capture {
    char last[256];
} fy_capture;

/* libfyaml prints through this hook; we keep the last line for a message
 * and print nothing (library code never prints). */
static void fy_output(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
    (void)diag;
    fy_capture *cap = user;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' ')) len--;
    if (len == 0) return;
    snprintf(cap->last, sizeof cap->last, "%.*s", (int)(len < 255 ? len : 255), buf);
}

/* Moves libfyaml's collected errors into diags; returns how many. */
static int take_yaml_errors(yctx *c, struct fy_diag *fd)
{
    int n = 0;
    void *it = NULL;
    struct fy_diag_error *e;
    while ((e = fy_diag_errors_iterate(fd, &it))) {
        if (e->type < FYET_ERROR) continue;
        yerr(c, (yloc){e->line > 0 ? e->line : 0, e->line > 0 ? e->column : 0}, "YAML syntax error: %s",
             e->msg ? e->msg : "unknown");
        n++;
    }
    return n;
}

/* Offset of the first byte that is not part of well-formed UTF-8, or len.
 * YAML text is Unicode; checking up front also keeps malformed bytes away
 * from libfyaml, whose 0.7 scanner can loop forever on them in a directive
 * line (found by fuzz_descriptor). */
static size_t utf8_invalid_at(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return i;
        }
        if (len - i <= n) return i;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += n + 1;
    }
    return len;
}

static yloc offset_loc(const char *text, size_t off)
{
    yloc l = {1, 1};
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') l.line++, l.col = 1;
        else if (((unsigned char)text[i] & 0xc0) != 0x80) l.col++;
    }
    return l;
}

static bool text_blank(const char *text, size_t len)
{
    bool comment = false;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (ch == '\n') comment = false;
        else if (ch == '#') comment = true;
        else if (!comment && ch != ' ' && ch != '\t' && ch != '\r') return false;
    }
    return true;
}

mcp_status mcp_descriptor_parse_yaml(const char *text, size_t len, const char *source_path,
                                     const mcp_descriptor_defaults *defaults, mcp_descriptor **out,
                                     mcp_diags *diags)
{
    *out = NULL;
    yctx c = {.diags = diags};
    int first_diag = diags ? diags->count : 0;
    if (!text) text = "";
    if (len > MCP__DESC_MAX_TEXT) {
        yerr(&c, (yloc){0, 0}, "the descriptor is %zu bytes; the limit is %u", len, MCP__DESC_MAX_TEXT);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    if (memchr(text, '\0', len)) {
        const char *z = memchr(text, '\0', len);
        yerr(&c, offset_loc(text, (size_t)(z - text)), "the descriptor contains a NUL byte (is it a binary file?)");
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    size_t bad = utf8_invalid_at((const unsigned char *)text, len);
    if (bad < len) {
        yerr(&c, offset_loc(text, bad), "the descriptor is not valid UTF-8 (byte 0x%02x at offset %zu)",
             (unsigned char)text[bad], bad);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    if (text_blank(text, len)) {
        yerr(&c, (yloc){1, 1}, "the descriptor is empty; it needs at least 'name' and 'path'");
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    mcp_descriptor *d = mcp__descriptor_new(defaults);
    char *dir = source_path ? mcp__desc_dirname(source_path) : NULL;
    if (!d || (source_path && !dir) || (source_path && !(d->source = mcp_strdup(source_path)))) {
        mcp_descriptor_free(d);
        mcp_free(dir);
        yerr(&c, (yloc){0, 0}, "out of memory");
        return MCP_STATUS_OUT_OF_MEMORY;
    }
    c.roots = defaults ? defaults->roots : NULL;
    c.check_load = defaults && defaults->check_load;
    c.files_elsewhere = defaults && defaults->files_elsewhere;
    /* A descriptor sent without a folder of its own ("config") names files
     * relative to the first model root, never to the server's working
     * folder. */
    c.dir = (!dir || !strcmp(dir, ".")) && c.roots ? mcp_model_roots_first(c.roots) : dir;
    c.text = text;
    c.text_len = len;
    c.pool = mcp_pool_create(4096);
    if (!c.pool) {
        mcp_descriptor_free(d);
        mcp_free(dir);
        yerr(&c, (yloc){0, 0}, "out of memory");
        return MCP_STATUS_OUT_OF_MEMORY;
    }

    fy_capture cap = {{0}};
    struct fy_diag_cfg dc;
    fy_diag_cfg_default(&dc);
    dc.fp = NULL;
    dc.output_fn = fy_output;
    dc.user = &cap;
    dc.level = FYET_ERROR;
    dc.colorize = false;
    struct fy_diag *fd = fy_diag_create(&dc);
    if (fd) fy_diag_set_collect_errors(fd, true);
    /* Duplicate keys are allowed through so that the walk reports them
     * along with every other problem, instead of libfyaml stopping. */
    struct fy_parse_cfg pc = {
        .flags = FYPCF_QUIET | FYPCF_ALLOW_DUPLICATE_KEYS | FYPCF_DEFAULT_VERSION_1_2 | FYPCF_JSON_NONE,
        .diag = fd,
    };
    struct fy_parser *fp = fd ? fy_parser_create(&pc) : NULL;
    if (!fp || fy_parser_set_string(fp, text, len) != 0) {
        if (fp) fy_parser_destroy(fp);
        if (fd) fy_diag_destroy(fd);
        mcp_pool_destroy(c.pool);
        mcp_descriptor_free(d);
        mcp_free(dir);
        yerr(&c, (yloc){0, 0}, "cannot start the YAML parser (out of memory?)");
        return MCP_STATUS_OUT_OF_MEMORY;
    }
    /* Pass 1 reads the whole stream as events: syntax errors anywhere,
     * and how many documents there are. (Loading a second document
     * instead leaks inside libfyaml 0.7 when that document is malformed;
     * found by fuzz_descriptor.) */
    int docs = 0;
    bool want_second_at = false;
    yloc second_at = {0, 0};
    struct fy_event *ev;
    while ((ev = fy_parser_parse(fp))) {
        if (ev->type == FYET_DOCUMENT_START && ++docs == 2) want_second_at = true;
        const struct fy_mark *m = want_second_at ? fy_event_start_mark(ev) : NULL;
        if (m) {
            second_at = (yloc){m->line + 1, m->column + 1};
            want_second_at = false;
        }
        fy_parser_event_free(fp, ev);
    }
    int syntax = take_yaml_errors(&c, fd);
    fy_parser_destroy(fp);
    fp = NULL;
    struct fy_document *doc = NULL;
    if (!syntax && docs == 0) {
        yerr(&c, (yloc){1, 1}, "the descriptor is empty; it needs at least 'name' and 'path'");
    } else if (!syntax) {
        if (docs > 1)
            yerr(&c, second_at, "the file holds more than one YAML document ('---'); a descriptor is one document");
        /* Pass 2 builds the (first) document and walks it. */
        fp = fy_parser_create(&pc);
        if (fp && fy_parser_set_string(fp, text, len) == 0) doc = fy_parse_load_document(fp);
        if (doc && !take_yaml_errors(&c, fd)) parse_root(&c, fy_document_root(doc), c.dir, d);
        else if (!doc && !take_yaml_errors(&c, fd))
            yerr(&c, (yloc){0, 0}, "YAML syntax error: %s", cap.last[0] ? cap.last : "the document could not be read");
    }
    if (doc) fy_parse_document_destroy(fp, doc);
    if (fp) fy_parser_destroy(fp);
    fy_diag_destroy(fd);
    mcp_pool_destroy(c.pool);
    mcp_free(dir);
    mcp__diags_sort(diags, first_diag);
    if (c.errors) {
        mcp_descriptor_free(d);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    *out = d;
    return MCP_STATUS_OK;
}

mcp_status mcp_descriptor_load_file(const char *path, const mcp_descriptor_defaults *defaults, mcp_descriptor **out,
                                    mcp_diags *diags)
{
    *out = NULL;
    uint8_t *data;
    size_t len;
    char msg[600];
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_file_read(path, &data, &len, &err);
    if (st != MCP_STATUS_OK) {
        mcp_diags_add(diags, "", 0, 0, "%s", msg);
        return st;
    }
    st = mcp_descriptor_parse_yaml((const char *)data, len, path, defaults, out, diags);
    mcp_free(data);
    return st;
}

mcp_status mcp_descriptor_for_model(const char *model_path, const mcp_descriptor_defaults *defaults,
                                    mcp_descriptor **out, mcp_err *err)
{
    *out = NULL;
    if (!model_path || !model_path[0])
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "no model path given");
    struct stat sb;
    if (stat(model_path, &sb) != 0)
        return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "model file '%s': %s", model_path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model path '%s' is not a regular file", model_path);
    /* The name is the file's stem ("./models/resnet50.onnx" -> "resnet50"),
     * with characters a URL path cannot carry plainly replaced by '_'. */
    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base) n = (size_t)(dot - base);
    if (n > MCP__DESC_MAX_NAME) n = MCP__DESC_MAX_NAME;
    char name[MCP__DESC_MAX_NAME + 1];
    for (size_t i = 0; i < n; i++) {
        char ch = base[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                  ch == '.' || ch == '-';
        name[i] = ok ? ch : '_';
    }
    name[n] = '\0';
    if (!mcp__desc_name_valid(name))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "cannot name a model after '%s'; use a descriptor with a 'name'",
                           model_path);
    mcp_descriptor *d = mcp__descriptor_new(defaults);
    if (!d) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    d->name = mcp_strdup(name);
    d->path = mcp_strdup(model_path);
    d->source = mcp_strdup(model_path);
    /* A GGUF file (by its magic, whatever its name) is a generative model;
     * a compiled model is one by its magic too. */
    char magic[8] = {0};
    FILE *fp = fopen(model_path, "rb");
    size_t got = fp ? fread(magic, 1, 8, fp) : 0;
    bool gguf = got >= 4 && memcmp(magic, "GGUF", 4) == 0;
    if (fp) fclose(fp);
    if (got == 8 && memcmp(magic, MCP_COMPILED_MAGIC, 8) == 0) {
        mcp_free(d->format);
        d->format = mcp_strdup("mcpir");
    }
    if (gguf) {
        mcp_free(d->format);
        d->format = mcp_strdup("gguf");
        d->max_batch_size = 0;
        d->batching.enabled = false;
        d->warmup_runs = 0;
        d->instance_threads = 0;
    }
    if (!d->name || !d->path || !d->source || !d->format) {
        mcp_descriptor_free(d);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    *out = d;
    return MCP_STATUS_OK;
}
