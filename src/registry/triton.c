/*
 * Triton model folders: DIR/config.pbtxt (protobuf text format) plus
 * DIR/<integer version>/model.onnx, loaded as they are.
 *
 * protobuf-c has no text-format parser, so this file has its own: a
 * tokenizer, a parser into a small generic tree (field name, position,
 * scalar or nested message), then a walk over that tree that knows Triton's
 * ModelConfig fields (the ones PROTOCOLS.md lists). Fields we do not honour
 * get a warning that names them, never a silent ignore. Syntax errors stop
 * the parse (the rest cannot be read reliably); every other problem is
 * reported and the walk goes on.
 *
 * Triton's `dims` leave out the batch dimension when max_batch_size > 0;
 * the descriptor holds full model shapes, so a leading -1 is added there.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "registry/descriptor_util.h"

#define PB_MAX_DEPTH 32
#define PB_MAX_NODES 100000
#define PB_MAX_VERSIONS 4096

/* ---- tokenizer ---- */

typedef enum ptype { P_EOF, P_IDENT, P_NUMBER, P_STRING, P_PUNCT } ptype;

typedef struct ptok {
    ptype type;
    const char *s; /* raw text */
    size_t n;
    int line, col;
} ptok;

typedef struct plex {
    const char *text;
    size_t len, pos;
    int line, col;
} plex;

typedef struct pnode {
    char *name;
    int line, col; /* of the field name */
    bool is_msg;
    ptype vtype;   /* scalars: P_IDENT, P_NUMBER or P_STRING */
    char *text;    /* scalars: decoded string, or the raw token */
    size_t text_len;
    int vline, vcol;
    struct pnode *kids;
    int n_kids, cap_kids;
} pnode;

typedef struct pparse {
    plex lx;
    ptok tok; /* current (peeked) token */
    bool failed;
    int nodes;
    mcp_diags *diags;
} pparse;

static void lex_advance(plex *lx, size_t n)
{
    for (size_t i = 0; i < n && lx->pos < lx->len; i++) {
        if (lx->text[lx->pos] == '\n') {
            lx->line++;
            lx->col = 1;
        } else {
            lx->col++;
        }
        lx->pos++;
    }
}

static void perr(pparse *p, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void perr(pparse *p, int line, int col, const char *fmt, ...)
{
    if (p->failed) return; /* after a syntax error the rest is noise */
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->failed = true;
    mcp_diags_add(p->diags, "", line, col, "syntax error: %s", msg);
}

/* Reads the next token into p->tok. Comments (#...) and whitespace are
 * skipped. */
static void lex_next(pparse *p)
{
    plex *lx = &p->lx;
    for (;;) {
        while (lx->pos < lx->len && isspace((unsigned char)lx->text[lx->pos])) lex_advance(lx, 1);
        if (lx->pos < lx->len && lx->text[lx->pos] == '#') {
            while (lx->pos < lx->len && lx->text[lx->pos] != '\n') lex_advance(lx, 1);
            continue;
        }
        break;
    }
    ptok t = {.s = lx->text + lx->pos, .line = lx->line, .col = lx->col};
    if (lx->pos >= lx->len) {
        t.type = P_EOF;
        p->tok = t;
        return;
    }
    const char *s = lx->text;
    size_t i = lx->pos;
    char ch = s[i];
    if (isalpha((unsigned char)ch) || ch == '_') {
        size_t j = i;
        while (j < lx->len && (isalnum((unsigned char)s[j]) || s[j] == '_')) j++;
        t.type = P_IDENT;
        t.n = j - i;
    } else if (isdigit((unsigned char)ch) || ((ch == '-' || ch == '.') && i + 1 < lx->len &&
                                              (isalnum((unsigned char)s[i + 1]) || s[i + 1] == '.'))) {
        size_t j = i + 1;
        bool hex = ch == '0' && j < lx->len && (s[j] == 'x' || s[j] == 'X');
        while (j < lx->len) {
            char c = s[j];
            if (isalnum((unsigned char)c) || c == '.' || c == '_') {
                j++;
            } else if ((c == '+' || c == '-') && !hex && (s[j - 1] == 'e' || s[j - 1] == 'E')) {
                j++;
            } else {
                break;
            }
        }
        t.type = P_NUMBER;
        t.n = j - i;
    } else if (ch == '"' || ch == '\'') {
        size_t j = i + 1;
        while (j < lx->len && s[j] != ch && s[j] != '\n') j += (s[j] == '\\' && j + 1 < lx->len) ? 2 : 1;
        if (j >= lx->len || s[j] != ch) {
            perr(p, t.line, t.col, "unterminated string");
            t.type = P_EOF;
            p->tok = t;
            lx->pos = lx->len;
            return;
        }
        t.type = P_STRING;
        t.n = j + 1 - i;
    } else if (strchr("{}[]<>:,;", ch)) {
        t.type = P_PUNCT;
        t.n = 1;
    } else {
        perr(p, t.line, t.col, "unexpected character '%c'", isprint((unsigned char)ch) ? ch : '?');
        t.type = P_EOF;
        p->tok = t;
        lx->pos = lx->len;
        return;
    }
    lex_advance(lx, t.n);
    p->tok = t;
}

static bool tok_is(const ptok *t, char punct) { return t->type == P_PUNCT && t->s[0] == punct; }

static const char *tok_describe(const ptok *t, char *buf, size_t cap)
{
    if (t->type == P_EOF) return "the end of the file";
    snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
    return buf;
}

/* Decodes one quoted string token (C-style escapes) and appends it to b. */
static bool decode_string(pparse *p, const ptok *t, mcp_buf *b)
{
    const char *s = t->s + 1;
    size_t n = t->n - 2;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch != '\\') {
            mcp_buf_append(b, &ch, 1);
            continue;
        }
        if (++i >= n) break;
        char e = s[i], out;
        switch (e) {
        case 'n': out = '\n'; break;
        case 't': out = '\t'; break;
        case 'r': out = '\r'; break;
        case 'a': out = '\a'; break;
        case 'b': out = '\b'; break;
        case 'f': out = '\f'; break;
        case 'v': out = '\v'; break;
        case '\\': case '\'': case '"': case '?': out = e; break;
        case 'x': case 'X': {
            int v = 0, k = 0;
            while (k < 2 && i + 1 < n && isxdigit((unsigned char)s[i + 1])) {
                char h = s[++i];
                v = v * 16 + (isdigit((unsigned char)h) ? h - '0' : (tolower((unsigned char)h) - 'a' + 10));
                k++;
            }
            if (k == 0) {
                perr(p, t->line, t->col, "\\x needs hex digits in string");
                return false;
            }
            out = (char)v;
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                int v = e - '0', k = 1;
                while (k < 3 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7') v = v * 8 + (s[++i] - '0'), k++;
                out = (char)(v & 0xff);
                break;
            }
            perr(p, t->line, t->col, "unknown escape '\\%c' in string", isprint((unsigned char)e) ? e : '?');
            return false;
        }
        mcp_buf_append(b, &out, 1);
    }
    return true;
}

static pnode *node_add(pparse *p, pnode *parent, const ptok *name)
{
    if (++p->nodes > PB_MAX_NODES) {
        perr(p, name->line, name->col, "more than %d fields", PB_MAX_NODES);
        return NULL;
    }
    if (parent->n_kids == parent->cap_kids) {
        int cap = parent->cap_kids ? parent->cap_kids * 2 : 4;
        pnode *k = mcp_realloc(parent->kids, (size_t)cap * sizeof *k);
        if (!k) {
            perr(p, name->line, name->col, "out of memory");
            return NULL;
        }
        parent->kids = k;
        parent->cap_kids = cap;
    }
    pnode *n = &parent->kids[parent->n_kids];
    *n = (pnode){.line = name->line, .col = name->col};
    n->name = mcp_malloc(name->n + 1);
    if (!n->name) {
        perr(p, name->line, name->col, "out of memory");
        return NULL;
    }
    memcpy(n->name, name->s, name->n);
    n->name[name->n] = '\0';
    parent->n_kids++;
    return n;
}

static void node_free(pnode *n)
{
    for (int i = 0; i < n->n_kids; i++) node_free(&n->kids[i]);
    mcp_free(n->kids);
    mcp_free(n->name);
    mcp_free(n->text);
}

static void parse_message(pparse *p, pnode *msg, int depth, char close);

/* One value after "name:" (or inside a list): a scalar or a message. */
static void parse_value(pparse *p, pnode *parent, const ptok *name, int depth)
{
    pnode *n = node_add(p, parent, name);
    if (!n) return;
    ptok t = p->tok;
    n->vline = t.line;
    n->vcol = t.col;
    if (tok_is(&t, '{') || tok_is(&t, '<')) {
        n->is_msg = true;
        lex_next(p);
        parse_message(p, n, depth + 1, t.s[0] == '{' ? '}' : '>');
        return;
    }
    if (t.type == P_IDENT || t.type == P_NUMBER) {
        n->vtype = t.type;
        n->text = mcp_malloc(t.n + 1);
        if (!n->text) {
            perr(p, t.line, t.col, "out of memory");
            return;
        }
        memcpy(n->text, t.s, t.n);
        n->text[t.n] = '\0';
        n->text_len = t.n;
        lex_next(p);
        return;
    }
    if (t.type == P_STRING) {
        mcp_buf b = {0};
        bool ok = true;
        while (ok && p->tok.type == P_STRING) { /* "a" "b" concatenate */
            ptok s = p->tok;
            ok = decode_string(p, &s, &b);
            if (ok) lex_next(p);
        }
        mcp_buf_append(&b, "", 1);
        if (b.failed) perr(p, t.line, t.col, "out of memory");
        n->vtype = P_STRING;
        n->text_len = b.len ? b.len - 1 : 0;
        n->text = (char *)b.data;
        if (!n->text) n->text = mcp_strdup("");
        return;
    }
    char buf[64];
    perr(p, t.line, t.col, "expected a value for '%s', got %s", n->name, tok_describe(&t, buf, sizeof buf));
}

/* Fields until `close` ('}' or '>'; 0 = end of file). */
static void parse_message(pparse *p, pnode *msg, int depth, char close)
{
    if (depth > PB_MAX_DEPTH) {
        perr(p, p->tok.line, p->tok.col, "messages nested deeper than %d", PB_MAX_DEPTH);
        return;
    }
    char buf[64];
    while (!p->failed) {
        ptok t = p->tok;
        if (close && tok_is(&t, close)) {
            lex_next(p);
            return;
        }
        if (t.type == P_EOF) {
            if (close) perr(p, t.line, t.col, "missing '%c' to close '%s' (line %d)", close, msg->name, msg->line);
            return;
        }
        if (tok_is(&t, '[')) {
            perr(p, t.line, t.col, "extension and Any fields ([...]) are not supported");
            return;
        }
        if (t.type != P_IDENT) {
            perr(p, t.line, t.col, "expected a field name, got %s", tok_describe(&t, buf, sizeof buf));
            return;
        }
        ptok name = t;
        lex_next(p);
        bool colon = tok_is(&p->tok, ':');
        if (colon) lex_next(p);
        if (tok_is(&p->tok, '[')) {
            lex_next(p);
            if (tok_is(&p->tok, ']')) {
                /* An empty list still says the field is there ("dims: []"
                 * is a scalar's shape); it becomes one marker node. */
                pnode *e = node_add(p, msg, &name);
                if (!e) return;
                e->vtype = P_PUNCT;
                e->vline = p->tok.line;
                e->vcol = p->tok.col;
                e->text = mcp_strdup("[]");
                e->text_len = 2;
                if (!e->text) perr(p, name.line, name.col, "out of memory");
                lex_next(p);
            } else {
                for (int guard = 0; !p->failed; guard++) {
                    bool is_msg = tok_is(&p->tok, '{') || tok_is(&p->tok, '<');
                    if (!colon && !is_msg) {
                        perr(p, p->tok.line, p->tok.col, "expected ':' after '%.*s' before a list of values", (int)name.n,
                             name.s);
                        return;
                    }
                    parse_value(p, msg, &name, depth);
                    if (p->failed) return;
                    if (tok_is(&p->tok, ',')) {
                        lex_next(p);
                        continue;
                    }
                    if (tok_is(&p->tok, ']')) {
                        lex_next(p);
                        break;
                    }
                    perr(p, p->tok.line, p->tok.col, "expected ',' or ']' in the list '%.*s', got %s", (int)name.n, name.s,
                         tok_describe(&p->tok, buf, sizeof buf));
                    return;
                }
            }
        } else if (tok_is(&p->tok, '{') || tok_is(&p->tok, '<')) {
            parse_value(p, msg, &name, depth);
        } else if (colon) {
            parse_value(p, msg, &name, depth);
        } else {
            perr(p, p->tok.line, p->tok.col, "expected ':' or '{' after '%.*s', got %s", (int)name.n, name.s,
                 tok_describe(&p->tok, buf, sizeof buf));
            return;
        }
        if (tok_is(&p->tok, ',') || tok_is(&p->tok, ';')) lex_next(p);
    }
}

/* ---- the walk over ModelConfig ---- */

typedef struct tctx {
    mcp_diags *diags;
    const mcp_model_roots *roots; /* where the folder's files may be; NULL = anywhere */
    bool from_json; /* the text came from a JSON ModelConfig: quoted integers and enum names are its spelling */
    int64_t pin_version; /* read this version folder alone (0 = the policy) */
    int errors;
    char path[512];
    size_t path_len;
} tctx;

static void tdiag(tctx *t, bool warning, int line, int col, const char *fmt, va_list ap)
{
    char msg[800];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!warning) t->errors++;
    mcp_diags_add(t->diags, t->path, line, col, "%s%s", warning ? "warning: " : "", msg);
}

static void terr(tctx *t, const pnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void terr(tctx *t, const pnode *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tdiag(t, false, at ? (at->is_msg || !at->vline ? at->line : at->vline) : 0,
          at ? (at->is_msg || !at->vline ? at->col : at->vcol) : 0, fmt, ap);
    va_end(ap);
}

static void twarn(tctx *t, const pnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void twarn(tctx *t, const pnode *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tdiag(t, true, at ? at->line : 0, at ? at->col : 0, fmt, ap);
    va_end(ap);
}

/* A file the folder names: a regular file, inside the model roots when
 * there are roots (then *path becomes its resolved form). */
static bool file_ok(tctx *t, char **path, const char *what, char *why, size_t cap)
{
    mcp_err err = {why, cap};
    if (t->roots) {
        char *real = NULL;
        if (mcp_model_roots_resolve(t->roots, *path, what, false, &real, &err) != MCP_STATUS_OK) return false;
        mcp_free(*path);
        *path = real;
        return true;
    }
    struct stat sb;
    if (stat(*path, &sb) == 0 && S_ISREG(sb.st_mode)) return true;
    mcp_err_set(&err, MCP_STATUS_NOT_FOUND, "%s '%s' not found", what, *path);
    return false;
}


static size_t tpush(tctx *t, const char *key, int index)
{
    size_t old = t->path_len;
    int n = index >= 0 ? snprintf(t->path + old, sizeof t->path - old, "%s%s[%d]", old ? "." : "", key, index)
                       : snprintf(t->path + old, sizeof t->path - old, "%s%s", old ? "." : "", key);
    if (n > 0) t->path_len = old + (size_t)n < sizeof t->path ? old + (size_t)n : sizeof t->path - 1;
    return old;
}

static void tpop(tctx *t, size_t old)
{
    t->path_len = old;
    t->path[old] = '\0';
}

static bool want_msg(tctx *t, const pnode *n)
{
    if (n->is_msg) return true;
    terr(t, n, "expected a message ({ ... }), got '%.40s'", n->text ? n->text : "");
    return false;
}

/* "name: []" leaves one marker node: the field is there with no values. */
static bool is_empty_list(const pnode *n) { return !n->is_msg && n->vtype == P_PUNCT; }

static bool want_scalar(tctx *t, const pnode *n, const char *expected)
{
    if (is_empty_list(n)) {
        terr(t, n, "expected %s, got an empty list []", expected);
        return false;
    }
    if (!n->is_msg) return true;
    terr(t, n, "expected %s, got a message", expected);
    return false;
}

static bool get_string(tctx *t, const pnode *n, const char **out)
{
    if (!want_scalar(t, n, "a quoted string")) return false;
    if (n->vtype != P_STRING) {
        terr(t, n, "expected a quoted string, got %.40s", n->text);
        return false;
    }
    if (strlen(n->text) != n->text_len) {
        terr(t, n, "the string contains a NUL character");
        return false;
    }
    *out = n->text;
    return true;
}

static bool get_int(tctx *t, const pnode *n, int64_t lo, int64_t hi, int64_t *out)
{
    if (!want_scalar(t, n, "an integer")) return false;
    if (n->vtype != P_NUMBER && !(t->from_json && n->vtype == P_STRING)) {
        terr(t, n, "expected an integer, got %s%.40s%s", n->vtype == P_STRING ? "\"" : "", n->text,
             n->vtype == P_STRING ? "\"" : "");
        return false;
    }
    errno = 0;
    char *end;
    long long v = strtoll(n->text, &end, 0);
    if (*end || end == n->text) {
        terr(t, n, "expected an integer, got %.40s", n->text);
        return false;
    }
    if (errno == ERANGE || v < lo || v > hi) {
        terr(t, n, "%.40s is out of range (%lld..%lld)", n->text, (long long)lo, (long long)hi);
        return false;
    }
    *out = v;
    return true;
}

static bool get_bool(tctx *t, const pnode *n, bool *out)
{
    if (!want_scalar(t, n, "true or false")) return false;
    static const char *const yes[] = {"true", "True", "t", "1"}, *const no[] = {"false", "False", "f", "0"};
    for (int i = 0; i < 4; i++) {
        if (n->vtype != P_STRING && strcmp(n->text, yes[i]) == 0) return *out = true, true;
        if (n->vtype != P_STRING && strcmp(n->text, no[i]) == 0) return *out = false, true;
    }
    terr(t, n, "expected true or false, got %.40s", n->text);
    return false;
}

/* An enum value (an identifier) that must be one of names[]; returns its
 * index or -1 (reported). */
static int get_enum(tctx *t, const pnode *n, const char *const *names, int count)
{
    if (!want_scalar(t, n, "an enum value")) return -1;
    if (n->vtype == P_IDENT || (t->from_json && n->vtype == P_STRING))
        for (int i = 0; i < count; i++)
            if (strcmp(n->text, names[i]) == 0) return i;
    char list[400] = "";
    for (int i = 0; i < count; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    const char *near = mcp__desc_closest(n->text, names, count);
    terr(t, n, "unknown value '%.60s'%s%s%s; expected one of %s", n->text, near ? " (did you mean '" : "",
         near ? near : "", near ? "'?)" : "", list);
    return -1;
}

/* Reports a field set twice when the proto says it is singular. */
static bool singular(tctx *t, const pnode *msg, int index)
{
    const pnode *n = &msg->kids[index];
    for (int i = 0; i < index; i++) {
        if (strcmp(msg->kids[i].name, n->name) == 0) {
            terr(t, n, "'%s' is given more than once (first at line %d)", n->name, msg->kids[i].line);
            return false;
        }
    }
    return true;
}

/* How many earlier siblings share n's name: the index for repeated fields. */
static int occurrence(const pnode *msg, int index)
{
    int k = 0;
    for (int i = 0; i < index; i++)
        k += !is_empty_list(&msg->kids[i]) && strcmp(msg->kids[i].name, msg->kids[index].name) == 0;
    return k;
}

static void unknown_field(tctx *t, const pnode *n, const char *const *known, int count, const char *where)
{
    const char *near = mcp__desc_closest(n->name, known, count);
    twarn(t, n, "unknown field '%s' in %s is ignored%s%s%s", n->name, where, near ? " (did you mean '" : "",
          near ? near : "", near ? "'?)" : "");
}

/* Triton settings that exist but this server does not act on. */
static void unsupported_field(tctx *t, const pnode *n)
{
    twarn(t, n, "'%s' is a Triton setting this server does not support; it is ignored", n->name);
}

/* ---- inputs and outputs ---- */

typedef struct tio {
    int rank; /* -1 = dims not given */
    int64_t dims[MCP_MAX_RANK];
    int reshape_rank; /* -1 = none */
    int64_t reshape[MCP_MAX_RANK];
    const pnode *at;
} tio;

static const char *const data_types[] = {"TYPE_BOOL",  "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64",
                                         "TYPE_INT8",  "TYPE_INT16", "TYPE_INT32",  "TYPE_INT64",  "TYPE_FP16",
                                         "TYPE_FP32",  "TYPE_FP64",  "TYPE_STRING", "TYPE_BF16"};
static const mcp_dtype data_type_values[] = {MCP_DTYPE_BOOL,    MCP_DTYPE_UINT8,  MCP_DTYPE_UINT16, MCP_DTYPE_UINT32,
                                             MCP_DTYPE_UINT64,  MCP_DTYPE_INT8,   MCP_DTYPE_INT16,  MCP_DTYPE_INT32,
                                             MCP_DTYPE_INT64,   MCP_DTYPE_FLOAT16, MCP_DTYPE_FLOAT, MCP_DTYPE_DOUBLE,
                                             MCP_DTYPE_STRING,  MCP_DTYPE_BFLOAT16};
_Static_assert(sizeof data_types / sizeof data_types[0] == sizeof data_type_values / sizeof data_type_values[0],
               "data type tables differ in length");

static void get_dims(tctx *t, const pnode *msg, int index, int *rank, int64_t *dims)
{
    const pnode *n = &msg->kids[index];
    if (*rank >= MCP_MAX_RANK) {
        terr(t, n, "more than %d dimensions", MCP_MAX_RANK);
        return;
    }
    int64_t v;
    if (get_int(t, n, -1, MCP__DESC_MAX_DIM, &v)) {
        if (v == 0) {
            terr(t, n, "a dimension cannot be 0 (use -1 for a variable one)");
            return;
        }
        dims[(*rank)++] = v;
    }
}

static void map_io(tctx *t, const pnode *msg, bool output, const char *model_dir, mcp_io_spec *io, tio *x)
{
    static const char *const in_known[] = {"name",     "data_type",          "format", "dims",
                                           "reshape",  "is_shape_tensor",    "allow_ragged_batch", "optional"};
    static const char *const out_known[] = {"name", "data_type", "dims", "reshape", "label_filename", "is_shape_tensor"};
    const char *const *known = output ? out_known : in_known;
    int n_known = output ? 6 : 8;
    x->rank = -1;
    x->reshape_rank = -1;
    x->at = msg;
    io->rank = -1;
    bool has_name = false, has_type = false, has_dims = false;
    for (int i = 0; i < msg->n_kids; i++) {
        const pnode *n = &msg->kids[i];
        const char *k = n->name;
        size_t old = tpush(t, k, -1);
        if (strcmp(k, "name") == 0) {
            const char *s;
            if (singular(t, msg, i) && get_string(t, n, &s)) {
                has_name = true;
                if (!s[0] || strlen(s) > MCP__DESC_MAX_TENSOR_NAME)
                    terr(t, n, "a tensor name has 1 to %d characters", MCP__DESC_MAX_TENSOR_NAME);
                else if (!(io->name = mcp_strdup(s)))
                    terr(t, n, "out of memory");
            }
        } else if (strcmp(k, "data_type") == 0) {
            int e = singular(t, msg, i) ? get_enum(t, n, data_types, (int)(sizeof data_types / sizeof data_types[0])) : -1;
            if (e >= 0) {
                io->dtype = data_type_values[e];
                has_type = true;
            }
        } else if (strcmp(k, "dims") == 0) {
            if (x->rank < 0) x->rank = 0;
            has_dims = true;
            if (!is_empty_list(n)) get_dims(t, msg, i, &x->rank, x->dims);
        } else if (strcmp(k, "reshape") == 0) {
            if (singular(t, msg, i) && want_msg(t, n)) {
                x->reshape_rank = 0;
                for (int j = 0; j < n->n_kids; j++) {
                    size_t o2 = tpush(t, n->kids[j].name, -1);
                    if (strcmp(n->kids[j].name, "shape") == 0) {
                        if (!is_empty_list(&n->kids[j])) get_dims(t, n, j, &x->reshape_rank, x->reshape);
                    }
                    else unknown_field(t, &n->kids[j], (const char *const[]){"shape"}, 1, "reshape");
                    tpop(t, o2);
                }
            }
        } else if (output && strcmp(k, "label_filename") == 0) {
            const char *s;
            if (singular(t, msg, i) && get_string(t, n, &s) && model_dir) {
                char *p = mcp__desc_path_join(model_dir, s);
                char why[600];
                if (!p) terr(t, n, "out of memory");
                else if (!file_ok(t, &p, "labels file", why, sizeof why)) terr(t, n, "%s", why);
                else twarn(t, n, "label_filename is checked but not applied: the classification extension is not served");
                mcp_free(p);
            }
        } else if (strcmp(k, "format") == 0 && !output) {
            static const char *const formats[] = {"FORMAT_NONE", "FORMAT_NHWC", "FORMAT_NCHW"};
            int e = get_enum(t, n, formats, 3);
            if (e > 0) twarn(t, n, "format %s is informational here; the model's own layout is used", formats[e]);
        } else if (strcmp(k, "is_shape_tensor") == 0) {
            bool b;
            if (get_bool(t, n, &b) && b) terr(t, n, "shape tensors are not supported");
        } else if (!output && (strcmp(k, "allow_ragged_batch") == 0 || strcmp(k, "optional") == 0)) {
            bool b;
            if (get_bool(t, n, &b) && b) unsupported_field(t, n);
        } else {
            unknown_field(t, n, known, n_known, output ? "an output" : "an input");
        }
        tpop(t, old);
    }
    if (!has_name) terr(t, msg, "missing 'name'");
    if (!has_type) terr(t, msg, "missing 'data_type' (e.g. TYPE_FP32)");
    if (!has_dims) terr(t, msg, "missing 'dims' (e.g. dims: [ 3, 224, 224 ])");
}

/* ---- the other sections ---- */

typedef struct tpolicy {
    int kind; /* 0 latest, 1 all, 2 specific */
    int64_t num_versions;
    int n_versions;
    int64_t versions[64];
} tpolicy;

static void map_version_policy(tctx *t, const pnode *n, tpolicy *pol)
{
    static const char *const kinds[] = {"latest", "all", "specific"};
    if (!want_msg(t, n)) return;
    if (n->n_kids != 1) {
        terr(t, n, "give exactly one of latest { num_versions: N }, all { } or specific { versions: [...] }");
        return;
    }
    const pnode *k = &n->kids[0];
    size_t old = tpush(t, k->name, -1);
    int kind = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(k->name, kinds[i]) == 0) kind = i;
    if (kind < 0) {
        const char *near = mcp__desc_closest(k->name, kinds, 3);
        terr(t, k, "unknown version policy '%s'%s%s%s; use latest, all or specific", k->name,
             near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
    } else if (want_msg(t, k)) {
        pol->kind = kind;
        for (int i = 0; i < k->n_kids; i++) {
            const pnode *f = &k->kids[i];
            size_t o2 = tpush(t, f->name, -1);
            if (kind == 0 && strcmp(f->name, "num_versions") == 0) {
                if (singular(t, k, i)) get_int(t, f, 1, 1000000, &pol->num_versions);
            } else if (kind == 2 && strcmp(f->name, "versions") == 0) {
                int64_t v;
                if (is_empty_list(f)) {
                    /* no entries */
                } else if (pol->n_versions >= 64) terr(t, f, "more than 64 versions listed");
                else if (get_int(t, f, 1, 999999999, &v)) pol->versions[pol->n_versions++] = v;
            } else {
                const char *known = kind == 0 ? "num_versions" : "versions";
                unknown_field(t, f, &known, kind == 1 ? 0 : 1, kinds[kind]);
            }
            tpop(t, o2);
        }
        if (kind == 2 && pol->n_versions == 0) terr(t, k, "specific needs at least one entry in 'versions'");
    }
    tpop(t, old);
}

static void map_instance_group(tctx *t, const pnode *g, int64_t *total)
{
    static const char *const known[] = {"name",    "kind",     "count",       "gpus",       "profile",
                                        "passive", "host_policy", "secondary_devices", "rate_limiter"};
    static const char *const kinds[] = {"KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"};
    if (!want_msg(t, g)) return;
    int64_t count = 1;
    for (int i = 0; i < g->n_kids; i++) {
        const pnode *n = &g->kids[i];
        size_t old = tpush(t, n->name, -1);
        if (strcmp(n->name, "name") == 0) {
            const char *s;
            if (singular(t, g, i)) get_string(t, n, &s);
        } else if (strcmp(n->name, "kind") == 0) {
            int e = singular(t, g, i) ? get_enum(t, n, kinds, 4) : -1;
            if (e == 1) terr(t, n, "KIND_GPU is not supported: this server runs models on the CPU (use KIND_CPU)");
            else if (e == 3) terr(t, n, "KIND_MODEL is not supported (use KIND_CPU)");
        } else if (strcmp(n->name, "count") == 0) {
            if (singular(t, g, i)) get_int(t, n, 1, MCP__DESC_MAX_INSTANCES, &count);
        } else if (strcmp(n->name, "gpus") == 0) {
            if (!is_empty_list(n)) terr(t, n, "GPUs are not supported: this server runs models on the CPU");
        } else if (strcmp(n->name, "profile") == 0 || strcmp(n->name, "passive") == 0 ||
                   strcmp(n->name, "host_policy") == 0 || strcmp(n->name, "secondary_devices") == 0 ||
                   strcmp(n->name, "rate_limiter") == 0) {
            unsupported_field(t, n);
        } else {
            unknown_field(t, n, known, 9, "an instance_group");
        }
        tpop(t, old);
    }
    *total += count;
}

static void map_queue_policy(tctx *t, const pnode *q, mcp_batching *b)
{
    static const char *const known[] = {"timeout_action", "default_timeout_microseconds", "allow_timeout_override",
                                        "max_queue_size"};
    static const char *const actions[] = {"REJECT", "DELAY"};
    if (!want_msg(t, q)) return;
    for (int i = 0; i < q->n_kids; i++) {
        const pnode *n = &q->kids[i];
        size_t old = tpush(t, n->name, -1);
        if (!singular(t, q, i)) {
            tpop(t, old);
            continue;
        }
        if (strcmp(n->name, "timeout_action") == 0) {
            if (get_enum(t, n, actions, 2) == 1)
                twarn(t, n, "timeout_action DELAY is not supported; requests past their timeout are rejected (REJECT)");
        } else if (strcmp(n->name, "default_timeout_microseconds") == 0) {
            get_int(t, n, 0, MCP__DESC_MAX_TIMEOUT_US, &b->default_timeout_us);
        } else if (strcmp(n->name, "allow_timeout_override") == 0) {
            bool v;
            get_bool(t, n, &v);
        } else if (strcmp(n->name, "max_queue_size") == 0) {
            /* Triton's 0 means unbounded; nothing here waits unbounded, so
             * 0 keeps the server's default limit. */
            int64_t v;
            if (get_int(t, n, 0, MCP__DESC_MAX_QUEUE_SIZE, &v) && v > 0) b->max_queue_size = v;
        } else {
            unknown_field(t, n, known, 4, "default_queue_policy");
        }
        tpop(t, old);
    }
}

static void map_dynamic_batching(tctx *t, const pnode *db, mcp_batching *b)
{
    static const char *const known[] = {"preferred_batch_size", "max_queue_delay_microseconds", "preserve_ordering",
                                        "priority_levels",      "default_priority_level",       "default_queue_policy",
                                        "priority_queue_policy"};
    if (!want_msg(t, db)) return;
    b->enabled = true;
    int64_t levels = 0, def_level = 0;
    const pnode *def_level_at = NULL;
    int max_pref = (int)(sizeof b->preferred / sizeof b->preferred[0]);
    for (int i = 0; i < db->n_kids; i++) {
        const pnode *n = &db->kids[i];
        const char *k = n->name;
        size_t old = tpush(t, k, -1);
        if (strcmp(k, "preferred_batch_size") == 0) {
            int64_t v;
            if (is_empty_list(n)) {
                /* no entries */
            } else if (b->n_preferred >= max_pref) terr(t, n, "more than %d preferred batch sizes", max_pref);
            else if (get_int(t, n, 1, MCP__DESC_MAX_BATCH, &v)) b->preferred[b->n_preferred++] = v;
        } else if (strcmp(k, "max_queue_delay_microseconds") == 0) {
            if (singular(t, db, i)) get_int(t, n, 0, MCP__DESC_MAX_QUEUE_DELAY_US, &b->max_queue_delay_us);
        } else if (strcmp(k, "preserve_ordering") == 0) {
            bool v; /* responses always leave in request order per connection */
            if (singular(t, db, i)) get_bool(t, n, &v);
        } else if (strcmp(k, "priority_levels") == 0) {
            if (singular(t, db, i)) get_int(t, n, 0, 1000000, &levels);
        } else if (strcmp(k, "default_priority_level") == 0) {
            if (singular(t, db, i) && get_int(t, n, 0, 1000000, &def_level)) def_level_at = n;
        } else if (strcmp(k, "default_queue_policy") == 0) {
            if (singular(t, db, i)) map_queue_policy(t, n, b);
        } else if (strcmp(k, "priority_queue_policy") == 0) {
            unsupported_field(t, n);
        } else {
            unknown_field(t, n, known, 7, "dynamic_batching");
        }
        tpop(t, old);
    }
    if (def_level_at && def_level > levels) {
        size_t old = tpush(t, "default_priority_level", -1);
        terr(t, def_level_at, "default_priority_level %lld is above priority_levels %lld", (long long)def_level,
             (long long)levels);
        tpop(t, old);
    }
}

static void map_parameters(tctx *t, const pnode *p)
{
    if (!want_msg(t, p)) return;
    bool has_key = false;
    for (int i = 0; i < p->n_kids; i++) {
        const pnode *n = &p->kids[i];
        size_t old = tpush(t, n->name, -1);
        if (strcmp(n->name, "key") == 0) {
            const char *s;
            if (singular(t, p, i) && get_string(t, n, &s)) has_key = true;
        } else if (strcmp(n->name, "value") == 0) {
            if (singular(t, p, i) && want_msg(t, n)) {
                for (int j = 0; j < n->n_kids; j++) {
                    const pnode *v = &n->kids[j];
                    size_t o2 = tpush(t, v->name, -1);
                    const char *s;
                    if (strcmp(v->name, "string_value") == 0) get_string(t, v, &s);
                    else unknown_field(t, v, (const char *const[]){"string_value"}, 1, "a parameter value");
                    tpop(t, o2);
                }
            }
        } else {
            unknown_field(t, n, (const char *const[]){"key", "value"}, 2, "parameters");
        }
        tpop(t, old);
    }
    if (!has_key) terr(t, p, "a parameter needs a 'key'");
}

/* ---- versions on disk ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Lists DIR's integer-named subfolders, ascending. */
static int list_versions(const char *dir, int64_t *out, int cap)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        size_t len = strlen(s);
        if (len == 0 || len > 9) continue;
        bool digits = true;
        for (size_t i = 0; i < len; i++) digits &= s[i] >= '0' && s[i] <= '9';
        if (!digits) continue;
        char p[4096];
        struct stat sb;
        if (snprintf(p, sizeof p, "%s/%s", dir, s) >= (int)sizeof p || stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        int64_t v = strtoll(s, NULL, 10);
        if (v <= 0) continue;
        if (n == cap) { /* reported, never cut silently */
            closedir(d);
            return -2;
        }
        out[n++] = v;
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof out[0], cmp_i64);
    return n;
}

static void choose_version(tctx *t, const char *model_dir, const tpolicy *pol, int64_t pin, const char *filename,
                           mcp_descriptor *d)
{
    int64_t *vers = mcp_malloc(PB_MAX_VERSIONS * sizeof *vers);
    if (!vers) {
        terr(t, NULL, "out of memory");
        return;
    }
    int n = list_versions(model_dir, vers, PB_MAX_VERSIONS);
    int64_t chosen = -1;
    int64_t selected[65];
    int n_sel = 0;
    if (pin > 0) {
        /* One version folder, named by the caller (the others of a policy). */
        if (n >= 0 && bsearch(&pin, vers, (size_t)n, sizeof vers[0], cmp_i64)) chosen = pin;
        else terr(t, NULL, "version folder %lld is not in '%s'", (long long)pin, model_dir);
    } else if (n == -2) {
        terr(t, NULL, "model folder '%s' has more than %d version folders", model_dir, PB_MAX_VERSIONS);
    } else if (n < 0) {
        terr(t, NULL, "cannot list model folder '%s': %s", model_dir, strerror(errno));
    } else if (pol->kind == 2) {
        for (int i = 0; i < pol->n_versions; i++) {
            bool present = bsearch(&pol->versions[i], vers, (size_t)n, sizeof vers[0], cmp_i64) != NULL;
            if (present && pol->versions[i] > chosen) chosen = pol->versions[i];
        }
        if (chosen < 0) terr(t, NULL, "none of the versions the policy names has a folder in '%s'", model_dir);
    } else {
        if (n > 0) chosen = vers[n - 1];
        else terr(t, NULL, "no version folders (1/, 2/, ...) in '%s'", model_dir);
    }
    /* Every version the policy serves, highest first. */
    if (chosen >= 0 && pin <= 0) {
        if (pol->kind == 2) {
            for (int i = n - 1; i >= 0; i--)
                for (int j = 0; j < pol->n_versions; j++)
                    if (vers[i] == pol->versions[j] && n_sel < 65) {
                        selected[n_sel++] = vers[i];
                        break;
                    }
        } else {
            int64_t want = pol->kind == 0 ? pol->num_versions : n;
            for (int i = n - 1; i >= 0 && n_sel < want && n_sel < 65; i--) selected[n_sel++] = vers[i];
        }
        if (n_sel > 64)
            terr(t, NULL, "version_policy selects more than 64 versions; this server serves at most 64 of a model at once");
        d->n_also = 0;
        for (int i = 1; i < n_sel && i < 64; i++) d->also[d->n_also++] = selected[i];
    }
    mcp_free(vers);
    if (chosen < 0) return;
    char num[24]; /* Triton names a version by its folder */
    snprintf(num, sizeof num, "%lld", (long long)chosen);
    char *vdir = mcp__desc_path_join(model_dir, num);
    char *path = vdir ? mcp__desc_path_join(vdir, filename) : NULL;
    mcp_free(vdir);
    char *version = mcp_strdup(num);
    if (!path || !version) {
        mcp_free(path);
        mcp_free(version);
        terr(t, NULL, "out of memory");
        return;
    }
    mcp_free(d->version);
    d->version = version;
    d->semver[0] = (int)chosen;
    d->semver[1] = d->semver[2] = 0;
    mcp_free(d->path);
    d->path = path;
    char why[600];
    if (!file_ok(t, &d->path, "model file", why, sizeof why)) terr(t, NULL, "%s", why);
}

/* ---- ModelConfig ---- */

static const char *const config_known[] = {
    "name",        "platform",          "backend",       "runtime",           "version_policy",
    "max_batch_size", "input",          "output",        "batch_input",       "batch_output",
    "optimization",   "dynamic_batching", "sequence_batching", "ensemble_scheduling", "instance_group",
    "default_model_filename", "cc_model_filenames", "metric_tags", "parameters", "model_warmup",
    "model_operations", "model_transaction_policy", "model_repository_agents", "response_cache",
};
#define N_CONFIG_KNOWN ((int)(sizeof config_known / sizeof config_known[0]))

static bool dir_basename(const char *dir, char *out, size_t cap)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && dir[s - 1] != '/') s--;
    if (n - s == 0 || n - s >= cap) return false;
    memcpy(out, dir + s, n - s);
    out[n - s] = '\0';
    return true;
}

static void map_config(tctx *t, const pnode *root, const char *model_dir, mcp_descriptor *d)
{
    const pnode *name_at = NULL;
    const char *config_name = NULL, *filename = "model.onnx";
    int n_in = 0, n_out = 0;
    tpolicy pol = {.kind = 0, .num_versions = 1};
    int64_t instances = 0;
    bool has_groups = false;
    const pnode *batching_at = NULL;
    d->max_batch_size = 0; /* Triton's default: no batch dimension */
    d->batching.enabled = false;

    for (int i = 0; i < root->n_kids; i++) {
        const char *k = root->kids[i].name;
        if (is_empty_list(&root->kids[i])) continue;
        n_in += strcmp(k, "input") == 0;
        n_out += strcmp(k, "output") == 0;
    }
    if (n_in > MCP__DESC_MAX_IO || n_out > MCP__DESC_MAX_IO) {
        terr(t, root->n_kids ? &root->kids[0] : NULL, "more than %d inputs or outputs", MCP__DESC_MAX_IO);
        return;
    }
    tio *xin = n_in ? mcp_calloc((size_t)n_in, sizeof *xin) : NULL;
    tio *xout = n_out ? mcp_calloc((size_t)n_out, sizeof *xout) : NULL;
    d->inputs = n_in ? mcp_calloc((size_t)n_in, sizeof *d->inputs) : NULL;
    d->outputs = n_out ? mcp_calloc((size_t)n_out, sizeof *d->outputs) : NULL;
    if ((n_in && (!xin || !d->inputs)) || (n_out && (!xout || !d->outputs))) {
        terr(t, NULL, "out of memory");
        mcp_free(xin);
        mcp_free(xout);
        return;
    }
    for (int i = 0; i < root->n_kids; i++) {
        const pnode *n = &root->kids[i];
        const char *k = n->name;
        bool repeated = strcmp(k, "input") == 0 || strcmp(k, "output") == 0 || strcmp(k, "instance_group") == 0 ||
                        strcmp(k, "parameters") == 0 || strcmp(k, "model_warmup") == 0;
        if (repeated && is_empty_list(n)) continue; /* "input: []": no entries */
        size_t old = tpush(t, k, repeated ? occurrence(root, i) : -1);
        if (!repeated && !singular(t, root, i)) {
            tpop(t, old);
            continue;
        }
        if (strcmp(k, "name") == 0) {
            if (get_string(t, n, &config_name)) name_at = n;
        } else if (strcmp(k, "platform") == 0) {
            const char *s;
            if (get_string(t, n, &s) && strcmp(s, "onnxruntime_onnx") != 0)
                terr(t, n, "platform '%.60s' is not supported; this server runs ONNX models (onnxruntime_onnx)", s);
        } else if (strcmp(k, "backend") == 0) {
            const char *s;
            if (get_string(t, n, &s) && strcmp(s, "onnxruntime") != 0)
                terr(t, n, "backend '%.60s' is not supported; this server runs ONNX models (onnxruntime)%s", s,
                     strcmp(s, "python") == 0 ? "; no user code runs inside the server" : "");
        } else if (strcmp(k, "max_batch_size") == 0) {
            get_int(t, n, 0, MCP__DESC_MAX_BATCH, &d->max_batch_size);
        } else if (strcmp(k, "input") == 0 || strcmp(k, "output") == 0) {
            bool out = k[0] == 'o';
            int idx = occurrence(root, i);
            if (want_msg(t, n))
                map_io(t, n, out, model_dir, out ? &d->outputs[idx] : &d->inputs[idx], out ? &xout[idx] : &xin[idx]);
            else
                (out ? &d->outputs[idx] : &d->inputs[idx])->rank = -1;
        } else if (strcmp(k, "version_policy") == 0) {
            map_version_policy(t, n, &pol);
        } else if (strcmp(k, "instance_group") == 0) {
            has_groups = true;
            map_instance_group(t, n, &instances);
        } else if (strcmp(k, "dynamic_batching") == 0) {
            batching_at = n;
            map_dynamic_batching(t, n, &d->batching);
        } else if (strcmp(k, "parameters") == 0) {
            map_parameters(t, n);
        } else if (strcmp(k, "model_warmup") == 0) {
            want_msg(t, n); /* the server always warms a model up itself */
        } else if (strcmp(k, "default_model_filename") == 0) {
            const char *s;
            if (get_string(t, n, &s)) {
                if (!s[0] || strchr(s, '/') || strcmp(s, "..") == 0 || strcmp(s, ".") == 0)
                    terr(t, n, "default_model_filename must be a plain file name, got '%.60s'", s);
                else
                    filename = s;
            }
        } else {
            bool known = false;
            for (int j = 0; j < N_CONFIG_KNOWN; j++) known |= strcmp(k, config_known[j]) == 0;
            if (known) unsupported_field(t, n);
            else unknown_field(t, n, config_known, N_CONFIG_KNOWN, "the model configuration");
        }
        tpop(t, old);
    }
    d->n_inputs = n_in;
    d->n_outputs = n_out;

    /* Shapes: Triton's dims leave the batch dimension out. */
    for (int side = 0; side < 2; side++) {
        tio *xs = side ? xout : xin;
        mcp_io_spec *ios = side ? d->outputs : d->inputs;
        int count = side ? n_out : n_in;
        for (int i = 0; i < count; i++) {
            tio *x = &xs[i];
            if (!x->at) continue;
            size_t old = tpush(t, side ? "output" : "input", i);
            int rank = x->reshape_rank >= 0 ? x->reshape_rank : x->rank;
            const int64_t *dims = x->reshape_rank >= 0 ? x->reshape : x->dims;
            if (x->reshape_rank >= 0)
                twarn(t, x->at, "reshape is applied by declaring the model's shape; clients send that shape, not dims");
            int extra = d->max_batch_size > 0 ? 1 : 0;
            if (rank >= 0 && rank + extra > MCP_MAX_RANK) {
                terr(t, x->at, "more than %d dimensions with the batch dimension", MCP_MAX_RANK);
            } else if (rank >= 0) {
                ios[i].rank = rank + extra;
                if (extra) ios[i].dims[0] = -1;
                for (int k = 0; k < rank; k++) ios[i].dims[k + extra] = dims[k];
            }
            for (int j = 0; j < i; j++) {
                if (ios[i].name && ios[j].name && strcmp(ios[i].name, ios[j].name) == 0) {
                    terr(t, x->at, "duplicate %s name '%s'", side ? "output" : "input", ios[i].name);
                    break;
                }
            }
            tpop(t, old);
        }
    }
    mcp_free(xin);
    mcp_free(xout);

    if (batching_at && d->max_batch_size == 0) {
        size_t old = tpush(t, "dynamic_batching", -1);
        terr(t, batching_at, "dynamic_batching needs max_batch_size > 0");
        tpop(t, old);
    }
    for (int i = 0; i < d->batching.n_preferred && d->max_batch_size > 0; i++) {
        if (d->batching.preferred[i] > d->max_batch_size) {
            size_t old = tpush(t, "dynamic_batching.preferred_batch_size", i);
            terr(t, batching_at, "preferred batch size %lld is larger than max_batch_size %lld",
                 (long long)d->batching.preferred[i], (long long)d->max_batch_size);
            tpop(t, old);
        }
    }
    if (has_groups) {
        if (instances > MCP__DESC_MAX_INSTANCES) {
            size_t old = tpush(t, "instance_group", -1);
            terr(t, NULL, "%lld instances in all; the limit is %d", (long long)instances, MCP__DESC_MAX_INSTANCES);
            tpop(t, old);
        } else {
            d->instance_count = instances;
        }
    }

    char base[MCP__DESC_MAX_NAME + 2];
    const char *name = NULL;
    if (model_dir) {
        if (!dir_basename(model_dir, base, sizeof base) || !mcp__desc_plain_name_valid(base))
            terr(t, NULL, "the model folder's name cannot be a model name: use 1 to %d letters, digits, '_', '.' or '-'",
                 MCP__DESC_MAX_NAME);
        else name = base;
        if (name && config_name && strcmp(config_name, name) != 0) {
            size_t old = tpush(t, "name", -1);
            terr(t, name_at, "name '%.60s' does not match the model folder '%s'", config_name, name);
            tpop(t, old);
        }
    } else if (config_name) {
        if (!mcp__desc_plain_name_valid(config_name)) {
            size_t old = tpush(t, "name", -1);
            terr(t, name_at, "invalid model name '%.60s': use letters, digits, '_', '.' or '-'", config_name);
            tpop(t, old);
        } else {
            name = config_name;
        }
    } else {
        terr(t, NULL, "missing 'name'");
    }
    if (name && !(d->name = mcp_strdup(name))) terr(t, NULL, "out of memory");

    char *fmt = mcp_strdup("triton");
    if (fmt) {
        mcp_free(d->format);
        d->format = fmt;
    }
    if (model_dir) choose_version(t, model_dir, &pol, t->pin_version, filename, d);
}

static mcp_status parse_config(const char *text, size_t len, const char *model_dir, const mcp_descriptor_defaults *defaults,
                               bool from_json, mcp_descriptor **out, mcp_diags *diags);

mcp_status mcp__triton_parse_config(const char *text, size_t len, const char *model_dir,
                                    const mcp_descriptor_defaults *defaults, mcp_descriptor **out,
                                    mcp_diags *diags)
{
    return parse_config(text, len, model_dir, defaults, false, out, diags);
}

/* ---- ModelConfig in JSON (Triton's load parameters.config) ---- */

/* Protobuf text format for a JSON value, field by field: objects become
 * messages, arrays repeated fields, strings quoted (C escapes). */
static bool json_to_text(const char *key, const json_t *v, mcp_buf *b, int depth);

static void text_string(mcp_buf *b, const char *s)
{
    mcp_buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') mcp_buf_printf(b, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f) mcp_buf_printf(b, "\\%03o", *p);
        else mcp_buf_append(b, p, 1);
    }
    mcp_buf_puts(b, "\"");
}

static bool text_value(const json_t *v, mcp_buf *b, int depth)
{
    if (json_is_object(v)) {
        mcp_buf_puts(b, "{ ");
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) if (!json_to_text(k, x, b, depth + 1)) return false;
        mcp_buf_puts(b, "}");
    } else if (json_is_string(v)) {
        text_string(b, json_string_value(v));
    } else if (json_is_integer(v)) {
        mcp_buf_printf(b, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        mcp_buf_printf(b, "%.17g", json_real_value(v));
    } else if (json_is_boolean(v)) {
        mcp_buf_puts(b, json_is_true(v) ? "true" : "false");
    } else {
        return false;
    }
    return true;
}

static bool json_to_text(const char *key, const json_t *v, mcp_buf *b, int depth)
{
    if (depth > 32) return false;
    for (const char *p = key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
    if (!key[0] || json_is_null(v)) return key[0] != '\0';
    if (json_is_array(v)) {
        if (json_array_size(v) == 0) { /* e.g. dims: [] for a scalar */
            mcp_buf_printf(b, "%s: [ ]\n", key);
            return true;
        }
        mcp_buf_printf(b, json_is_object(json_array_get(v, 0)) ? "%s [ " : "%s: [ ", key);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) mcp_buf_puts(b, ", ");
            if (json_is_array(json_array_get(v, i)) || !text_value(json_array_get(v, i), b, depth)) return false;
        }
        mcp_buf_puts(b, " ]\n");
        return true;
    }
    mcp_buf_printf(b, json_is_object(v) ? "%s " : "%s: ", key);
    if (!text_value(v, b, depth)) return false;
    mcp_buf_puts(b, "\n");
    return true;
}

mcp_status mcp__triton_json_to_text(const char *json, size_t len, mcp_buf *text, mcp_diags *diags)
{
    if (len > MCP__DESC_MAX_TEXT) {
        mcp_diags_add(diags, "", 0, 0, "the model configuration is %zu bytes; the limit is %u", len, MCP__DESC_MAX_TEXT);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        if (root) mcp_diags_add(diags, "", 0, 0, "the model configuration must be a JSON object");
        else mcp_diags_add(diags, "", je.line, je.column, "malformed JSON: %s", je.text);
        json_decref(root);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    const char *k;
    json_t *v;
    bool ok = true;
    json_object_foreach(root, k, v) if (ok && !json_to_text(k, v, text, 0)) {
        mcp_diags_add(diags, k, 0, 0, "this field cannot be read as part of a ModelConfig");
        ok = false;
    }
    json_decref(root);
    if (!ok) return MCP_STATUS_INVALID_ARGUMENT;
    return text->failed ? MCP_STATUS_OUT_OF_MEMORY : MCP_STATUS_OK;
}

mcp_status mcp__triton_parse_json_config(const char *text, size_t len, const mcp_descriptor_defaults *defaults,
                                         mcp_descriptor **out, mcp_diags *diags)
{
    return parse_config(text, len, NULL, defaults, true, out, diags);
}

mcp_status mcp_descriptor_from_triton_json(const char *name, const char *json, size_t len,
                                           const mcp_descriptor_defaults *defaults, mcp_descriptor **out, mcp_diags *diags)
{
    *out = NULL;
    if (!mcp__desc_plain_name_valid(name)) {
        mcp_diags_add(diags, "", 0, 0, "'%.60s' cannot be a model name", name);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    mcp_buf text = {0};
    mcp_status tst = mcp__triton_json_to_text(json, len, &text, diags);
    if (tst != MCP_STATUS_OK) {
        mcp_buf_free(&text);
        return tst;
    }
    /* The model's files are where Triton keeps them: a folder named after
     * the model in a model root, with its version folders. */
    char *dir = NULL;
    const mcp_model_roots *roots = defaults ? defaults->roots : NULL;
    for (int i = 0; i < mcp_model_roots_count(roots) && !dir; i++) {
        char candidate[4200];
        snprintf(candidate, sizeof candidate, "%s/%s", mcp_model_roots_get(roots, i), name);
        struct stat sb;
        if (stat(candidate, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            char msg[600];
            mcp_err err = {msg, sizeof msg};
            if (mcp_model_roots_resolve(roots, candidate, "model folder", true, &dir, &err) != MCP_STATUS_OK) dir = NULL;
        }
    }
    if (!dir) {
        mcp_buf_free(&text);
        mcp_diags_add(diags, "", 0, 0,
                      "no model folder '%s' (with version folders) in the model roots for this configuration", name);
        return MCP_STATUS_NOT_FOUND;
    }
    mcp_status st = parse_config((const char *)text.data, text.len, dir, defaults, true, out, diags);
    mcp_buf_free(&text);
    if (st == MCP_STATUS_OK && strcmp((*out)->name, name) != 0) {
        mcp_diags_add(diags, "name", 0, 0, "the configuration names model '%s', the request '%s'", (*out)->name, name);
        mcp_descriptor_free(*out);
        *out = NULL;
        st = MCP_STATUS_INVALID_ARGUMENT;
    }
    if (st == MCP_STATUS_OK) {
        mcp_free((*out)->source);
        (*out)->source = dir;
    } else {
        mcp_free(dir);
    }
    return st;
}

static mcp_status parse_config(const char *text, size_t len, const char *model_dir, const mcp_descriptor_defaults *defaults,
                               bool from_json, mcp_descriptor **out, mcp_diags *diags)
{
    *out = NULL;
    if (!text) text = "";
    if (len > MCP__DESC_MAX_TEXT) {
        mcp_diags_add(diags, "", 0, 0, "config.pbtxt is %zu bytes; the limit is %u", len, MCP__DESC_MAX_TEXT);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    pparse p = {.lx = {.text = text, .len = len, .line = 1, .col = 1}, .diags = diags};
    pnode root = {.name = NULL, .line = 1, .col = 1, .is_msg = true};
    lex_next(&p);
    parse_message(&p, &root, 0, 0);
    if (p.failed) {
        node_free(&root);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    mcp_descriptor *d = mcp__descriptor_new(defaults);
    if (!d) {
        node_free(&root);
        mcp_diags_add(diags, "", 0, 0, "out of memory");
        return MCP_STATUS_OUT_OF_MEMORY;
    }
    tctx t = {.diags = diags, .roots = defaults ? defaults->roots : NULL, .from_json = from_json,
              .pin_version = defaults ? defaults->pin_version : 0};
    int first_diag = diags ? diags->count : 0;
    map_config(&t, &root, model_dir, d);
    node_free(&root);
    mcp__diags_sort(diags, first_diag);
    if (t.errors) {
        mcp_descriptor_free(d);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    *out = d;
    return MCP_STATUS_OK;
}

mcp_status mcp_descriptor_load_triton(const char *model_dir, const mcp_descriptor_defaults *defaults,
                                      mcp_descriptor **out, mcp_diags *diags)
{
    *out = NULL;
    char *cfg = mcp__desc_path_join(model_dir, "config.pbtxt");
    if (!cfg) {
        mcp_diags_add(diags, "", 0, 0, "out of memory");
        return MCP_STATUS_OUT_OF_MEMORY;
    }
    uint8_t *data;
    size_t len;
    char msg[600];
    mcp_err err = {msg, sizeof msg};
    mcp_status st = MCP_STATUS_OK;
    /* With roots (a folder named over the network), config.pbtxt itself
     * must resolve inside them: a link out of them is not followed. */
    if (defaults && defaults->roots) {
        char *real = NULL;
        st = mcp_model_roots_resolve(defaults->roots, cfg, "Triton config", false, &real, &err);
        mcp_free(real);
    }
    if (st == MCP_STATUS_OK) st = mcp_file_read(cfg, &data, &len, &err);
    if (st != MCP_STATUS_OK) {
        mcp_diags_add(diags, "", 0, 0, "%s", msg);
        mcp_free(cfg);
        return st;
    }
    st = mcp__triton_parse_config((const char *)data, len, model_dir, defaults, out, diags);
    mcp_free(data);
    if (st == MCP_STATUS_OK) {
        mcp_free((*out)->source);
        (*out)->source = cfg;
    } else {
        mcp_free(cfg);
    }
    return st;
}
