/* Helpers shared by the YAML and Triton descriptor parsers. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <libfyaml.h>
#include <sys/stat.h>

#include "registry/descriptor_util.h"

mcp_descriptor_defaults mcp_descriptor_defaults_default(void)
{
    return (mcp_descriptor_defaults){
        .max_batch_size = 32,
        .max_queue_delay_us = 500,
        .max_queue_size = 1024,
        .prefetch_queue_depth = 8,
        .enable_tensor_cache = true,
        .instance_count = 1,
        .instance_threads = 1,
    };
}

mcp_generation mcp_generation_default(void)
{
    return (mcp_generation){
        .max_sequences = 8,
        .kv_cache_bytes = 256LL << 20,
        .step_tokens = 512,
        .max_queue = 256,
        .max_tokens = 256,
        .max_tokens_limit = 4096,
        .temperature = 0.0,
        .top_p = 1.0,
        .repeat_penalty = 1.0,
        .prefix_cache = true,
    };
}

mcp_monitoring mcp_monitoring_default(void)
{
    return (mcp_monitoring){
        .sample_rate = 0.1,
        .window = 2000,
        .threshold = 0.3,
        .min_samples = 500,
        .classifier = MCP_CLASSIFIER_AUTO,
    };
}

mcp_descriptor *mcp__descriptor_new(const mcp_descriptor_defaults *defaults)
{
    mcp_descriptor_defaults dflt = defaults ? *defaults : mcp_descriptor_defaults_default();
    mcp_descriptor *d = mcp_calloc(1, sizeof *d);
    if (!d) return NULL;
    d->version = mcp_strdup("v1.0.0");
    d->format = mcp_strdup("onnx");
    d->device = mcp_strdup("cpu");
    d->precision = mcp_strdup("fp32");
    if (!d->version || !d->format || !d->device || !d->precision) {
        mcp_descriptor_free(d);
        return NULL;
    }
    d->semver[0] = 1;
    d->max_batch_size = dflt.max_batch_size;
    d->batching = (mcp_batching){
        .enabled = dflt.max_batch_size > 0,
        .max_queue_delay_us = dflt.max_queue_delay_us,
        .max_queue_size = dflt.max_queue_size,
        .prefetch_queue_depth = dflt.prefetch_queue_depth,
        .enable_tensor_cache = dflt.enable_tensor_cache,
    };
    d->instance_count = dflt.instance_count;
    d->instance_threads = dflt.instance_threads;
    d->warmup_runs = 1;
    d->rollout = mcp_rollout_spec_default();
    d->generation = mcp_generation_default();
    d->monitoring = mcp_monitoring_default(); /* present stays false: no section, no monitor */
    return d;
}

static void step_free(mcp_step *s)
{
    mcp_free(s->tensor);
    mcp_free(s->mean);
    mcp_free(s->std);
    mcp_free(s->labels_path);
    for (int i = 0; i < s->n_labels; i++) mcp_free(s->labels[i]);
    mcp_free(s->labels);
}

static void io_free(mcp_io_spec *io, int n)
{
    for (int i = 0; i < n; i++) {
        mcp_free(io[i].name);
        mcp_free(io[i].graph_name);
    }
    mcp_free(io);
}

void mcp_descriptor_free(mcp_descriptor *d)
{
    if (!d) return;
    mcp_free(d->source);
    mcp_free(d->name);
    mcp_free(d->version);
    mcp_free(d->format);
    mcp_free(d->path);
    mcp_free(d->device);
    mcp_free(d->precision);
    mcp_free(d->calibration);
    io_free(d->inputs, d->n_inputs);
    io_free(d->outputs, d->n_outputs);
    for (int i = 0; i < d->n_pre; i++) step_free(&d->pre[i]);
    for (int i = 0; i < d->n_post; i++) step_free(&d->post[i]);
    mcp_free(d->pre);
    mcp_free(d->post);
    for (int i = 0; i < d->monitoring.n_outputs; i++) mcp_free(d->monitoring.outputs[i]);
    mcp_free(d->monitoring.outputs);
    mcp_free(d);
}

bool mcp__desc_plain_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MCP__DESC_MAX_NAME) return false;
    if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '-';
        if (!ok) return false;
    }
    return true;
}

/*
 * The text of a single-quoted scalar, decoded from the source rather than
 * by libfyaml: libfyaml 0.7.12 leaks the buffer it builds for a
 * single-quoted scalar with '' escapes (found by fuzz_descriptor and
 * fuzz_auth). Rules (YAML 1.2, 7.3.2): '' is one quote; a line break with
 * the blanks around it folds to one space, or to n newlines when n empty
 * lines follow.
 */
const char *mcp__yaml_single_quoted(struct fy_node *n, const char *text, size_t text_len, mcp_pool *pool, size_t *out_len)
{
    struct fy_token *t = fy_node_get_scalar_token(n);
    const struct fy_mark *s = t ? fy_token_start_mark(t) : NULL, *e = t ? fy_token_end_mark(t) : NULL;
    if (!s || !e || e->input_pos < s->input_pos || e->input_pos > text_len) return NULL;
    const char *raw = text + s->input_pos;
    size_t n_raw = e->input_pos - s->input_pos;
    char *buf = mcp_pool_alloc(pool, n_raw + 1);
    if (!buf) return NULL;
    size_t w = 0;
    for (size_t i = 0; i < n_raw;) {
        char ch = raw[i];
        if (ch == '\'' && i + 1 < n_raw && raw[i + 1] == '\'') {
            buf[w++] = '\'';
            i += 2;
        } else if (ch == '\n' || ch == '\r') {
            while (w > 0 && (buf[w - 1] == ' ' || buf[w - 1] == '\t')) w--;
            int breaks = 0;
            while (i < n_raw && (raw[i] == '\n' || raw[i] == '\r' || raw[i] == ' ' || raw[i] == '\t')) {
                if (raw[i] == '\n' || (raw[i] == '\r' && !(i + 1 < n_raw && raw[i + 1] == '\n'))) breaks++;
                i++;
            }
            if (breaks <= 1) buf[w++] = ' ';
            else
                for (int k = 1; k < breaks; k++) buf[w++] = '\n';
        } else {
            buf[w++] = ch;
            i++;
        }
    }
    buf[w] = '\0';
    *out_len = w;
    return buf;
}

bool mcp__desc_policy_key(const char *key)
{
    static const char *const words[] = {"policy", "policies", "rbac", "acl", "acls", "roles", "permissions",
                                        "auth", "authorization", "tenants", "tenant_policy"};
    const char *last = key;
    for (const char *p = key; *p; p++)
        if (*p == '.' || *p == '/' || *p == ':') last = p + 1;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcasecmp(key, words[i]) || !strcasecmp(last, words[i])) return true;
    return false;
}

/* A namespaced name's own part may not be a word the HTTP routes use
 * after a model name (/v2/models/t1/ready would be ambiguous). */
static bool route_word(const char *s)
{
    static const char *const words[] = {"ready", "infer", "generate", "generate_stream", "stats", "config", "rollout",
                                        "trace", "versions", "load", "unload"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcmp(s, words[i])) return true;
    return false;
}

bool mcp__desc_name_valid(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash) return mcp__desc_plain_name_valid(s);
    size_t tn = (size_t)(slash - s);
    char tenant[MCP__DESC_MAX_NAME + 1];
    if (tn == 0 || tn > 64 || strlen(s) > MCP__DESC_MAX_NAME) return false;
    memcpy(tenant, s, tn);
    tenant[tn] = '\0';
    return mcp__desc_plain_name_valid(tenant) && mcp__desc_plain_name_valid(slash + 1) && !route_word(slash + 1);
}

/* One semver part: "0" or [1-9][0-9]{0,8}. Advances *p. */
static bool semver_part(const char **p, int *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9') return false;
    if (*s == '0' && s[1] >= '0' && s[1] <= '9') return false; /* leading zero */
    int v = 0, digits = 0;
    while (*s >= '0' && *s <= '9') {
        if (++digits > 9) return false;
        v = v * 10 + (*s - '0');
        s++;
    }
    *out = v;
    *p = s;
    return true;
}

bool mcp__desc_semver_parse(const char *s, int out[3])
{
    if (*s++ != 'v') return false;
    int v[3];
    for (int i = 0; i < 3; i++) {
        if (!semver_part(&s, &v[i])) return false;
        if (i < 2 && *s++ != '.') return false;
    }
    if (*s) return false;
    memcpy(out, v, sizeof v);
    return true;
}

mcp_dtype mcp__desc_dtype_parse(const char *s)
{
    mcp_dtype d = mcp_dtype_from_name(s);
    /* Only the types a descriptor can declare: those the protocol carries. */
    return mcp_dtype_oip_name(d) ? d : MCP_DTYPE_UNDEFINED;
}

/* Optimal string alignment distance (Levenshtein plus adjacent swaps), so
 * "bacth_size" is one edit from "batch_size". Words longer than 63 bytes
 * are never typos of our short keys. */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return 1000;
    int d[64][64];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[n][m];
}

/* Whether every character of `small` appears in `big` in order
 * ("dtype" in "datatype", "max_delay" in "max_queue_delay_us"). */
static bool is_subsequence(const char *small, const char *big)
{
    for (; *big && *small; big++)
        if (*big == *small) small++;
    return *small == '\0';
}

const char *mcp__desc_closest(const char *word, const char *const *candidates, int n)
{
    size_t len = strlen(word);
    int limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    const char *best = NULL;
    int best_d = 1000;
    for (int i = 0; i < n; i++) {
        const char *cand = candidates[i];
        int dist = edit_distance(word, cand);
        size_t cl = strlen(cand);
        bool near = dist <= limit || (len >= 4 && cl >= 4 && (is_subsequence(word, cand) || is_subsequence(cand, word)));
        if (near && dist < best_d) {
            best_d = dist;
            best = cand;
        }
    }
    return best;
}

char *mcp__desc_path_join(const char *dir, const char *rel)
{
    mcp_buf b = {0};
    if (rel[0] != '/' && dir && dir[0] && strcmp(dir, ".") != 0) {
        mcp_buf_puts(&b, dir);
        if (b.len && b.data[b.len - 1] != '/') mcp_buf_puts(&b, "/");
    }
    mcp_buf_puts(&b, rel);
    mcp_buf_append(&b, "", 1);
    if (b.failed) {
        mcp_buf_free(&b);
        return NULL;
    }
    /* Normalise in place: drop "./" segments and repeated slashes. ".." is
     * kept, since folding it lexically is wrong across symbolic links. */
    char *s = (char *)b.data;
    char *w = s;
    const char *r = s;
    bool absolute = r[0] == '/';
    if (absolute) *w++ = *r++;
    while (*r) {
        const char *seg = r;
        while (*r && *r != '/') r++;
        size_t n = (size_t)(r - seg);
        while (*r == '/') r++;
        if (n == 0 || (n == 1 && seg[0] == '.')) continue;
        if (w > s && w[-1] != '/') *w++ = '/';
        memmove(w, seg, n);
        w += n;
    }
    if (w == s) *w++ = '.';
    *w = '\0';
    char *out = mcp_strdup(s);
    mcp_buf_free(&b);
    return out;
}

char *mcp__desc_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return mcp_strdup(".");
    if (slash == path) return mcp_strdup("/");
    size_t n = (size_t)(slash - path);
    char *d = mcp_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

mcp_status mcp__desc_labels_read(const char *path, char ***labels, int *n, char *msg, size_t cap)
{
    *labels = NULL;
    *n = 0;
    uint8_t *data;
    size_t len;
    mcp_err err = {msg, cap};
    struct stat sb;
    if (stat(path, &sb) != 0)
        return mcp_err_set(&err, MCP_STATUS_NOT_FOUND, "cannot read labels file '%s': %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return mcp_err_set(&err, MCP_STATUS_INVALID_ARGUMENT, "labels file '%s' is not a regular file", path);
    if ((uint64_t)sb.st_size > MCP__DESC_MAX_LABELS_BYTES)
        return mcp_err_set(&err, MCP_STATUS_TOO_LARGE, "labels file '%s' is %lld bytes; the limit is %u", path,
                           (long long)sb.st_size, MCP__DESC_MAX_LABELS_BYTES);
    mcp_status st = mcp_file_read(path, &data, &len, &err);
    if (st != MCP_STATUS_OK) return st;
    if (len > MCP__DESC_MAX_LABELS_BYTES) {
        mcp_free(data);
        return mcp_err_set(&err, MCP_STATUS_TOO_LARGE, "labels file '%s' is %zu bytes; the limit is %u", path, len,
                           MCP__DESC_MAX_LABELS_BYTES);
    }
    int count = 0;
    for (size_t i = 0; i < len; i++) count += data[i] == '\n';
    if (len && data[len - 1] != '\n') count++;
    char **out = count ? mcp_calloc((size_t)count, sizeof *out) : NULL;
    if (count && !out) {
        mcp_free(data);
        return mcp_err_set(&err, MCP_STATUS_OUT_OF_MEMORY, "out of memory reading labels '%s'", path);
    }
    size_t start = 0;
    int k = 0;
    for (size_t i = 0; i <= len && k < count; i++) {
        if (i < len && data[i] != '\n') continue;
        if (i == len && start == len) break;
        size_t end = i;
        if (end > start && data[end - 1] == '\r') end--;
        out[k] = mcp_malloc(end - start + 1);
        if (!out[k]) {
            for (int j = 0; j < k; j++) mcp_free(out[j]);
            mcp_free(out);
            mcp_free(data);
            return mcp_err_set(&err, MCP_STATUS_OUT_OF_MEMORY, "out of memory reading labels '%s'", path);
        }
        memcpy(out[k], data + start, end - start);
        out[k][end - start] = '\0';
        k++;
        start = i + 1;
    }
    mcp_free(data);
    *labels = out;
    *n = k;
    return MCP_STATUS_OK;
}

static long diag_key(const mcp_diag *g) { return g->line > 0 ? (long)g->line * 100000L + g->col : 0x7fffffffL; }

void mcp__diags_sort(mcp_diags *diags, int first)
{
    if (!diags) return;
    /* Insertion sort: stable, and the list holds at most a thousand. */
    for (int i = first + 1; i < diags->count; i++) {
        mcp_diag g = diags->items[i];
        int j = i;
        while (j > first && diag_key(&diags->items[j - 1]) > diag_key(&g)) {
            diags->items[j] = diags->items[j - 1];
            j--;
        }
        diags->items[j] = g;
    }
}
