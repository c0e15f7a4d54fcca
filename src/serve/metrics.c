/*
 * Metrics: a thread-safe registry of labelled counters and histograms,
 * rendered in the Prometheus text exposition format 0.0.4.
 *
 * Recording is on the hot path (several calls per request), so it takes no
 * lock once a label set has been seen: label sets live in a fixed-size hash
 * table whose chains only grow; a new series is linked in under the mutex
 * and published with a release store on the chain head, and lookups walk
 * the chains with acquire loads. Counts and sums are relaxed atomics.
 * Series are never removed before mcp_metrics_destroy (Prometheus expects a
 * counter to stay once it has appeared).
 *
 * Label values can come from clients (the model name in a URL), so the
 * number of series is capped: past METRICS_SERIES_MAX, new label sets are
 * counted under the label value "_overflow" instead of growing without
 * bound. Label values are stored as given and made valid for the format
 * (escaped, invalid UTF-8 replaced by U+FFFD) only when rendered.
 */
#include <dirent.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "serve/serve.h"

#define METRICS_TABLE_SIZE 1024 /* hash chains; a power of two */
#define METRICS_SERIES_MAX 4096 /* distinct label sets before "_overflow" */
#define METRICS_OVERFLOW "_overflow"

/* Latency buckets, upper bounds in nanoseconds: 25 us to 10 s in 1-2.5-5 steps, then 30 s. */
static const int64_t latency_bounds_ns[] = {
    25000,     50000,     100000,     250000,     500000,     1000000,
    2500000,   5000000,   10000000,   25000000,   50000000,   100000000,
    250000000, 500000000, 1000000000, 2500000000, 5000000000, 10000000000, 30000000000,
};
#define LATENCY_BUCKETS ((int)(sizeof latency_bounds_ns / sizeof latency_bounds_ns[0]))

static const int64_t batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
/* Body sizes: 64 B to 256 MiB, x4 steps. */
static const int64_t bytes_bounds[] = {64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
                                       67108864, 268435456};
#define BYTES_BUCKETS ((int)(sizeof bytes_bounds / sizeof bytes_bounds[0]))
#define BATCH_BUCKETS ((int)(sizeof batch_bounds / sizeof batch_bounds[0]))
_Static_assert(sizeof batch_bounds / sizeof batch_bounds[0] <= sizeof latency_bounds_ns / sizeof latency_bounds_ns[0],
               "metrics_hist holds the longest bucket list");

/* One histogram: per-bucket (not cumulative) counts, the last slot for
 * observations above every bound; the sum in the unit recorded (ns or
 * requests). The count is derived from the buckets at render time, so
 * `_count` always equals the `+Inf` bucket even while others record. */
typedef struct metrics_hist {
    atomic_uint_fast64_t buckets[LATENCY_BUCKETS + 1];
    atomic_uint_fast64_t sum;
} metrics_hist;

typedef enum metrics_hist_kind {
    METRICS_HIST_QUEUE = 0,
    METRICS_HIST_COMPUTE,
    METRICS_HIST_REQUEST,
    METRICS_HIST_BATCH,
    METRICS_HIST_TTFT,    /* SERIES_GEN: time to first token */
    METRICS_HIST_ITL,     /* SERIES_GEN: between one token and the next */
    METRICS_HIST_GEN_E2E, /* SERIES_GEN: a generation, end to end */
    METRICS_HIST_REQ_BYTES,  /* SERIES_MODEL: request body bytes */
    METRICS_HIST_RESP_BYTES, /* SERIES_MODEL: response body bytes */
    METRICS_HIST_LOAD,       /* SERIES_LOAD: load or unload duration */
    METRICS_HIST_COUNT,
} metrics_hist_kind;

typedef enum series_kind {
    SERIES_MODEL = 0, /* {model, version}: the histograms */
    SERIES_REQUESTS,  /* {model, version, protocol, code}: mcp_requests_total */
    SERIES_ERRORS,    /* {model, reason}: mcp_inference_errors_total */
    SERIES_ROLLOUT,   /* {model, version, event}: shadow comparisons and gate trips */
    SERIES_GEN,       /* {model, version} of a generative model: its latency histograms */
    SERIES_LOAD,      /* {model, op (load|unload), outcome in code}: counts and durations */
    SERIES_TENANT,    /* {tenant in model, class, code}: mcp_tenant_requests_total */
    SERIES_KIND_COUNT,
} series_kind;

/* A label set and its values. Everything but the atomics is immutable once
 * the series is published in the table. */
typedef struct metrics_series {
    struct metrics_series *next_chain; /* hash chain */
    struct metrics_series *next_kind;  /* all series of one kind (render) */
    uint64_t hash;
    series_kind kind;
    char *model;
    char *label2; /* version (model, requests) or reason (errors); owned */
    int protocol;
    int code;
    atomic_uint_fast64_t count;  /* requests, errors */
    metrics_hist *hists;         /* SERIES_MODEL: METRICS_HIST_COUNT of them */
} metrics_series;

struct mcp_metrics {
    _Atomic(metrics_series *) table[METRICS_TABLE_SIZE];
    pthread_mutex_t lock; /* inserts, kind lists, sampler, n_series */
    metrics_series *kinds[SERIES_KIND_COUNT];
    int kind_counts[SERIES_KIND_COUNT];
    int n_series;
    atomic_int_fast64_t inflight;
    mcp_metrics_sample_fn sampler;
    void *sampler_user;
};

/* ---- the label-set table ---- */

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL; /* FNV-1a */
    }
    return h;
}

static uint64_t series_hash(series_kind kind, const char *model, const char *label2, int protocol, int code)
{
    uint64_t h = 14695981039346656037ULL;
    int ints[3] = {(int)kind, protocol, code};
    h = hash_bytes(h, ints, sizeof ints);
    h = hash_bytes(h, model, strlen(model) + 1); /* the NUL separates the two strings */
    return hash_bytes(h, label2, strlen(label2) + 1);
}

static bool series_matches(const metrics_series *s, uint64_t hash, series_kind kind, const char *model,
                           const char *label2, int protocol, int code)
{
    return s->hash == hash && s->kind == kind && s->protocol == protocol && s->code == code &&
           strcmp(s->model, model) == 0 && strcmp(s->label2, label2) == 0;
}

static metrics_series *table_find(mcp_metrics *m, uint64_t hash, series_kind kind, const char *model,
                                  const char *label2, int protocol, int code)
{
    metrics_series *s = atomic_load_explicit(&m->table[hash & (METRICS_TABLE_SIZE - 1)], memory_order_acquire);
    for (; s; s = s->next_chain)
        if (series_matches(s, hash, kind, model, label2, protocol, code)) return s;
    return NULL;
}

static void series_free(metrics_series *s)
{
    if (!s) return;
    mcp_free(s->model);
    mcp_free(s->label2);
    mcp_free(s->hists);
    mcp_free(s);
}

/* Creates and publishes a series; the caller holds m->lock. NULL when out of
 * memory (the observation is then dropped: metrics must never fail a request). */
static metrics_series *table_insert(mcp_metrics *m, uint64_t hash, series_kind kind, const char *model,
                                    const char *label2, int protocol, int code)
{
    metrics_series *s = mcp_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->hash = hash;
    s->kind = kind;
    s->protocol = protocol;
    s->code = code;
    s->model = mcp_strdup(model);
    s->label2 = mcp_strdup(label2);
    bool hists = kind == SERIES_MODEL || kind == SERIES_GEN || kind == SERIES_LOAD;
    if (hists) s->hists = mcp_calloc(METRICS_HIST_COUNT, sizeof *s->hists);
    if (!s->model || !s->label2 || (hists && !s->hists)) {
        series_free(s);
        return NULL;
    }
    atomic_init(&s->count, 0);
    size_t slot = hash & (METRICS_TABLE_SIZE - 1);
    s->next_chain = atomic_load_explicit(&m->table[slot], memory_order_relaxed);
    s->next_kind = m->kinds[kind];
    m->kinds[kind] = s;
    m->kind_counts[kind]++;
    m->n_series++;
    atomic_store_explicit(&m->table[slot], s, memory_order_release);
    return s;
}

/* The series for a label set, created on first use. NULL strings stand for
 * the empty label value. */
static metrics_series *series_get(mcp_metrics *m, series_kind kind, const char *model, const char *label2,
                                  int protocol, int code)
{
    if (!model) model = "";
    if (!label2) label2 = "";
    uint64_t hash = series_hash(kind, model, label2, protocol, code);
    metrics_series *s = table_find(m, hash, kind, model, label2, protocol, code);
    if (s) return s;

    pthread_mutex_lock(&m->lock);
    s = table_find(m, hash, kind, model, label2, protocol, code); /* another thread may have won */
    if (!s && m->n_series >= METRICS_SERIES_MAX) {
        model = METRICS_OVERFLOW;
        label2 = METRICS_OVERFLOW;
        hash = series_hash(kind, model, label2, protocol, code);
        s = table_find(m, hash, kind, model, label2, protocol, code);
    }
    if (!s) s = table_insert(m, hash, kind, model, label2, protocol, code);
    pthread_mutex_unlock(&m->lock);
    return s;
}

/* ---- recording ---- */

mcp_metrics *mcp_metrics_create(void)
{
    mcp_metrics *m = mcp_calloc(1, sizeof *m);
    if (!m) return NULL;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        mcp_free(m);
        return NULL;
    }
    for (int i = 0; i < METRICS_TABLE_SIZE; i++) atomic_init(&m->table[i], NULL);
    atomic_init(&m->inflight, 0);
    return m;
}

void mcp_metrics_destroy(mcp_metrics *m)
{
    if (!m) return;
    for (int k = 0; k < SERIES_KIND_COUNT; k++) {
        metrics_series *s = m->kinds[k];
        while (s) {
            metrics_series *next = s->next_kind;
            series_free(s);
            s = next;
        }
    }
    pthread_mutex_destroy(&m->lock);
    mcp_free(m);
}

static void counter_add(atomic_uint_fast64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static void hist_observe(metrics_hist *h, const int64_t *bounds, int n_bounds, int64_t v)
{
    if (v < 0) v = 0; /* a clock that went backwards is not a negative duration */
    int i = 0;
    while (i < n_bounds && v > bounds[i]) i++;
    counter_add(&h->buckets[i], 1);
    counter_add(&h->sum, (uint64_t)v);
}

void mcp_metrics_request(mcp_metrics *m, const char *model, const char *version, mcp_protocol p, int code)
{
    if (!m) return;
    MCP_ASSERT(p >= 0 && p < MCP_PROTOCOL_COUNT);
    metrics_series *s = series_get(m, SERIES_REQUESTS, model, version, (int)p, code);
    if (s) counter_add(&s->count, 1);
}

void mcp_metrics_tenant_request(mcp_metrics *m, const char *tenant, const char *cls, int code)
{
    if (!m) return;
    metrics_series *s = series_get(m, SERIES_TENANT, tenant, cls, 0, code);
    if (s) counter_add(&s->count, 1);
}

void mcp_metrics_error(mcp_metrics *m, const char *model, const char *reason)
{
    if (!m) return;
    metrics_series *s = series_get(m, SERIES_ERRORS, model, reason, 0, 0);
    if (s) counter_add(&s->count, 1);
}

void mcp_metrics_latency(mcp_metrics *m, const char *model, const char *version, int64_t queue_ns,
                         int64_t compute_ns, int64_t total_ns)
{
    if (!m) return;
    metrics_series *s = series_get(m, SERIES_MODEL, model, version, 0, 0);
    if (!s) return;
    hist_observe(&s->hists[METRICS_HIST_QUEUE], latency_bounds_ns, LATENCY_BUCKETS, queue_ns);
    hist_observe(&s->hists[METRICS_HIST_COMPUTE], latency_bounds_ns, LATENCY_BUCKETS, compute_ns);
    hist_observe(&s->hists[METRICS_HIST_REQUEST], latency_bounds_ns, LATENCY_BUCKETS, total_ns);
}

void mcp_metrics_batch(mcp_metrics *m, const char *model, const char *version, int batch_size)
{
    if (!m) return;
    metrics_series *s = series_get(m, SERIES_MODEL, model, version, 0, 0);
    if (s) hist_observe(&s->hists[METRICS_HIST_BATCH], batch_bounds, BATCH_BUCKETS, batch_size);
}

void mcp_metrics_bytes(mcp_metrics *m, const char *model, const char *version, int64_t request, int64_t response)
{
    if (!m) return;
    metrics_series *s = series_get(m, SERIES_MODEL, model, version, 0, 0);
    if (!s) return;
    hist_observe(&s->hists[METRICS_HIST_REQ_BYTES], bytes_bounds, BYTES_BUCKETS, request);
    hist_observe(&s->hists[METRICS_HIST_RESP_BYTES], bytes_bounds, BYTES_BUCKETS, response);
}

void mcp_metrics_model_op(mcp_metrics *m, const char *model, bool unload, bool ok, int64_t ns)
{
    if (!m) return;
    metrics_series *s = series_get(m, SERIES_LOAD, model, unload ? "unload" : "load", 0, ok ? 0 : 1);
    if (!s) return;
    counter_add(&s->count, 1);
    hist_observe(&s->hists[METRICS_HIST_LOAD], latency_bounds_ns, LATENCY_BUCKETS, ns);
}

void mcp_metrics_generation(mcp_metrics *m, const char *model, const char *version, mcp_gen_metric which, int64_t ns)
{
    if (!m) return;
    metrics_series *s = series_get(m, SERIES_GEN, model, version, 0, 0);
    if (!s) return;
    metrics_hist_kind k = which == MCP_GEN_METRIC_TTFT  ? METRICS_HIST_TTFT
                          : which == MCP_GEN_METRIC_ITL ? METRICS_HIST_ITL
                                                        : METRICS_HIST_GEN_E2E;
    hist_observe(&s->hists[k], latency_bounds_ns, LATENCY_BUCKETS, ns);
}

/* The error reasons, one table: what a status counts as, and the series a
 * ready model starts with. The last entry is the catch-all. */
static const struct {
    mcp_status status;
    const char *reason;
} reasons[] = {
    {MCP_STATUS_INVALID_ARGUMENT, "invalid_input"},    {MCP_STATUS_TOO_LARGE, "invalid_input"},
    {MCP_STATUS_DEADLINE_EXCEEDED, "timeout"},         {MCP_STATUS_RESOURCE_EXHAUSTED, "queue_full"},
    {MCP_STATUS_OUT_OF_MEMORY, "oom"},                 {MCP_STATUS_UNAVAILABLE, "model_unavailable"},
    {MCP_STATUS_NOT_FOUND, "model_unavailable"},       {MCP_STATUS_CANCELLED, "cancelled"},
    {MCP_STATUS_INTERNAL, "internal"},
};
#define N_REASONS (sizeof reasons / sizeof reasons[0])

const char *mcp_metrics_reason(mcp_status st)
{
    for (size_t i = 0; i + 1 < N_REASONS; i++)
        if (reasons[i].status == st) return reasons[i].reason;
    return reasons[N_REASONS - 1].reason;
}

void mcp_metrics_declare_generation(mcp_metrics *m, const char *model, const char *version)
{
    if (m) series_get(m, SERIES_GEN, model, version, 0, 0);
}

void mcp_metrics_declare_model(mcp_metrics *m, const char *model, const char *version)
{
    if (!m) return;
    /* The label sets a ready model's first requests will touch, at 0, so
     * rate() and increase() see those requests (a series that appears
     * with its first sample hides it). */
    series_get(m, SERIES_MODEL, model, version, 0, 0);
    for (int ok = 0; ok < 2; ok++) {
        series_get(m, SERIES_LOAD, model, "load", 0, ok);
        series_get(m, SERIES_LOAD, model, "unload", 0, ok);
    }
    for (int p = 0; p < MCP_PROTOCOL_COUNT; p++) series_get(m, SERIES_REQUESTS, model, version, p, 200);
    for (size_t i = 0; i < N_REASONS; i++) series_get(m, SERIES_ERRORS, model, reasons[i].reason, 0, 0);
}

static const char *const rollout_events[MCP_ROLLOUT_EVENT_COUNT] = {
    [MCP_SHADOW_AGREED] = "agreed",           [MCP_SHADOW_DISAGREED] = "disagreed",
    [MCP_SHADOW_FAILED] = "failed",           [MCP_SHADOW_DROPPED] = "dropped",
    [MCP_GATE_CANARY_ERRORS] = "error_rate", [MCP_GATE_CANARY_P99] = "p99",
    [MCP_GATE_SHADOW_DEVIATION] = "deviation", [MCP_MODEL_COLD_START] = "cold_start",
    [MCP_MODEL_EVICTED] = "evicted",
};

void mcp_metrics_cold_start(mcp_metrics *m, const char *model, int64_t ns)
{
    (void)ns; /* the duration is in the event log and the lifecycle */
    mcp_metrics_rollout(m, model, "", MCP_MODEL_COLD_START);
}

void mcp_metrics_evicted(mcp_metrics *m, const char *model)
{
    if (!m) return;
    series_get(m, SERIES_ROLLOUT, model, "", MCP_MODEL_COLD_START, 0); /* at 0 from its first eviction */
    mcp_metrics_rollout(m, model, "", MCP_MODEL_EVICTED);
}

void mcp_metrics_rollout(mcp_metrics *m, const char *model, const char *version, mcp_rollout_event ev)
{
    if (!m || (int)ev < 0 || ev >= MCP_ROLLOUT_EVENT_COUNT) return;
    metrics_series *s = series_get(m, SERIES_ROLLOUT, model, version, (int)ev, 0);
    if (s) counter_add(&s->count, 1);
}

void mcp_metrics_declare_rollout(mcp_metrics *m, const char *model, const char *version, bool shadow)
{
    if (!m) return;
    if (shadow) {
        for (int e = MCP_SHADOW_AGREED; e <= MCP_SHADOW_DROPPED; e++) series_get(m, SERIES_ROLLOUT, model, version, e, 0);
        series_get(m, SERIES_ROLLOUT, model, version, MCP_GATE_SHADOW_DEVIATION, 0);
    } else {
        series_get(m, SERIES_ROLLOUT, model, version, MCP_GATE_CANARY_ERRORS, 0);
        series_get(m, SERIES_ROLLOUT, model, version, MCP_GATE_CANARY_P99, 0);
    }
}

static void put_model_labels(mcp_buf *out, const metrics_series *s);

/* family 0: shadow comparisons, 1: gate trips, 2: cold starts, 3: evictions. */
static int rollout_family(int ev)
{
    return ev <= MCP_SHADOW_DROPPED ? 0 : ev <= MCP_GATE_SHADOW_DEVIATION ? 1 : ev == MCP_MODEL_COLD_START ? 2 : 3;
}

static void render_rollout(mcp_buf *out, metrics_series **list, int n, int family)
{
    static const char *const names[] = {"mcp_shadow_comparisons_total", "mcp_rollout_gate_trips_total",
                                        "mcp_cold_starts_total", "mcp_model_evictions_total"};
    for (int i = 0; i < n; i++) {
        const metrics_series *s = list[i];
        if (rollout_family(s->protocol) != family) continue;
        mcp_buf_printf(out, "%s{", names[family]);
        if (family < 2) {
            put_model_labels(out, s);
            mcp_buf_printf(out, ",%s=\"%s\"", family ? "gate" : "outcome", rollout_events[s->protocol]);
        } else {
            mcp_buf_puts(out, "model=");
            mcp_metrics_label_value(out, s->model);
        }
        mcp_buf_printf(out, "} %llu\n", (unsigned long long)atomic_load_explicit(&s->count, memory_order_relaxed));
    }
}

void mcp_metrics_inflight_add(mcp_metrics *m, int delta)
{
    if (m) atomic_fetch_add_explicit(&m->inflight, delta, memory_order_relaxed);
}

void mcp_metrics_set_sampler(mcp_metrics *m, mcp_metrics_sample_fn fn, void *user)
{
    if (!m) return;
    pthread_mutex_lock(&m->lock);
    m->sampler = fn;
    m->sampler_user = user;
    pthread_mutex_unlock(&m->lock);
}

/* ---- rendering ---- */

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid. */
static size_t utf8_seq_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (len > n) return 0;
    unsigned cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* A label value between quotes: backslash, double quote and line feed
 * escaped as the format requires; bytes that are not UTF-8 become U+FFFD. */
void mcp_metrics_label_value(mcp_buf *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    mcp_buf_puts(out, "\"");
    size_t run = 0, i = 0;
    while (i < n) {
        const char *esc = NULL;
        size_t len = 1;
        if (p[i] == '\\') esc = "\\\\";
        else if (p[i] == '"') esc = "\\\"";
        else if (p[i] == '\n') esc = "\\n";
        else if ((len = utf8_seq_len(p + i, n - i)) == 0) {
            esc = "\xEF\xBF\xBD"; /* U+FFFD */
            len = 1;
        }
        if (esc) {
            mcp_buf_append(out, p + run, i - run);
            mcp_buf_puts(out, esc);
            run = i + len;
        }
        i += len;
    }
    mcp_buf_append(out, p + run, n - run);
    mcp_buf_puts(out, "\"");
}

/* Nanoseconds as decimal seconds, exactly and without trailing zeros
 * (25000 -> "0.000025", 10000000000 -> "10"). */
static void put_seconds(mcp_buf *out, uint64_t ns)
{
    char frac[16];
    int n = (int)snprintf(frac, sizeof frac, "%09llu", (unsigned long long)(ns % 1000000000ULL));
    while (n > 0 && frac[n - 1] == '0') frac[--n] = '\0';
    mcp_buf_printf(out, "%llu", (unsigned long long)(ns / 1000000000ULL));
    if (n > 0) mcp_buf_printf(out, ".%s", frac);
}

static void put_family(mcp_buf *out, const char *name, const char *type, const char *help)
{
    mcp_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int series_cmp(const void *a, const void *b)
{
    const metrics_series *x = *(const metrics_series *const *)a, *y = *(const metrics_series *const *)b;
    int c = strcmp(x->model, y->model);
    if (!c) c = strcmp(x->label2, y->label2);
    if (!c) c = (x->protocol > y->protocol) - (x->protocol < y->protocol);
    if (!c) c = (x->code > y->code) - (x->code < y->code);
    return c;
}

/* The series of one kind sorted by labels, so output is stable. Takes the
 * lock only to copy the list; the series themselves outlive the render.
 * *list is owned by the caller (mcp_free); NULL with *n = -1 when out of
 * memory. */
static metrics_series **series_sorted(mcp_metrics *m, series_kind kind, int *n)
{
    pthread_mutex_lock(&m->lock);
    int count = m->kind_counts[kind];
    metrics_series **list = mcp_malloc((size_t)(count ? count : 1) * sizeof *list);
    if (list) {
        int i = 0;
        for (metrics_series *s = m->kinds[kind]; s; s = s->next_kind) list[i++] = s;
        MCP_ASSERT(i == count);
    }
    pthread_mutex_unlock(&m->lock);
    if (!list) {
        *n = -1;
        return NULL;
    }
    qsort(list, (size_t)count, sizeof *list, series_cmp);
    *n = count;
    return list;
}

static void put_model_labels(mcp_buf *out, const metrics_series *s)
{
    mcp_buf_puts(out, "model=");
    mcp_metrics_label_value(out, s->model);
    mcp_buf_puts(out, ",version=");
    mcp_metrics_label_value(out, s->label2);
}

static void render_counters(mcp_buf *out, metrics_series **list, int n, series_kind kind)
{
    for (int i = 0; i < n; i++) {
        const metrics_series *s = list[i];
        if (kind == SERIES_TENANT) {
            mcp_buf_puts(out, "mcp_tenant_requests_total{tenant=");
            mcp_metrics_label_value(out, s->model);
            mcp_buf_puts(out, ",class=");
            mcp_metrics_label_value(out, s->label2);
            mcp_buf_printf(out, ",code=\"%d\"} ", s->code);
        } else if (kind == SERIES_REQUESTS) {
            mcp_buf_puts(out, "mcp_requests_total{");
            put_model_labels(out, s);
            mcp_buf_printf(out, ",protocol=\"%s\",code=\"%d\"} ", mcp_protocol_name((mcp_protocol)s->protocol),
                           s->code);
        } else {
            mcp_buf_puts(out, "mcp_inference_errors_total{model=");
            mcp_metrics_label_value(out, s->model);
            mcp_buf_puts(out, ",reason=");
            mcp_metrics_label_value(out, s->label2);
            mcp_buf_puts(out, "} ");
        }
        mcp_buf_printf(out, "%llu\n", (unsigned long long)atomic_load_explicit(&s->count, memory_order_relaxed));
    }
}

typedef void (*labels_fn)(mcp_buf *out, const metrics_series *s);

static void render_histogram_with(mcp_buf *out, metrics_series **list, int n, metrics_hist_kind kind, const char *name,
                                  labels_fn put_labels, const char *only_op)
{
    bool bytes = kind == METRICS_HIST_REQ_BYTES || kind == METRICS_HIST_RESP_BYTES;
    bool seconds = kind != METRICS_HIST_BATCH && !bytes;
    const int64_t *bounds = seconds ? latency_bounds_ns : bytes ? bytes_bounds : batch_bounds;
    int n_bounds = seconds ? LATENCY_BUCKETS : bytes ? BYTES_BUCKETS : BATCH_BUCKETS;
    for (int i = 0; i < n; i++) {
        if (only_op && strcmp(list[i]->label2, only_op) != 0) continue;
        metrics_hist *h = &list[i]->hists[kind];
        uint64_t cumulative = 0;
        for (int b = 0; b <= n_bounds; b++) {
            cumulative += atomic_load_explicit(&h->buckets[b], memory_order_relaxed);
            mcp_buf_printf(out, "%s_bucket{", name);
            put_labels(out, list[i]);
            mcp_buf_puts(out, ",le=\"");
            if (b == n_bounds) mcp_buf_puts(out, "+Inf");
            else if (seconds) put_seconds(out, (uint64_t)bounds[b]);
            else mcp_buf_printf(out, "%lld", (long long)bounds[b]);
            mcp_buf_printf(out, "\"} %llu\n", (unsigned long long)cumulative);
        }
        uint64_t sum = atomic_load_explicit(&h->sum, memory_order_relaxed);
        mcp_buf_printf(out, "%s_sum{", name);
        put_labels(out, list[i]);
        mcp_buf_puts(out, "} ");
        if (seconds) put_seconds(out, sum);
        else mcp_buf_printf(out, "%llu", (unsigned long long)sum);
        mcp_buf_printf(out, "\n%s_count{", name);
        put_labels(out, list[i]);
        mcp_buf_printf(out, "} %llu\n", (unsigned long long)cumulative);
    }
}

static void render_histogram(mcp_buf *out, metrics_series **list, int n, metrics_hist_kind kind, const char *name)
{
    render_histogram_with(out, list, n, kind, name, put_model_labels, NULL);
}

static void put_load_labels(mcp_buf *out, const metrics_series *s)
{
    mcp_buf_puts(out, "model=");
    mcp_metrics_label_value(out, s->model);
    mcp_buf_printf(out, ",outcome=\"%s\"", s->code ? "failure" : "success");
}

/* Model loads and unloads: counts by outcome, and how long they took. */
static void render_loads(mcp_buf *out, metrics_series **list, int n)
{
    static const char *const ops[2] = {"load", "unload"};
    static const char *const counters[2] = {"mcp_model_loads_total", "mcp_model_unloads_total"};
    static const char *const hists[2] = {"mcp_model_load_duration_seconds", "mcp_model_unload_duration_seconds"};
    for (int o = 0; o < 2; o++) {
        put_family(out, counters[o], "counter", o ? "Model unloads, by model and outcome." : "Model loads (load, apply, hot swap), by model and outcome.");
        for (int i = 0; i < n; i++) {
            if (strcmp(list[i]->label2, ops[o]) != 0) continue;
            mcp_buf_printf(out, "%s{", counters[o]);
            put_load_labels(out, list[i]);
            mcp_buf_printf(out, "} %llu\n", (unsigned long long)atomic_load_explicit(&list[i]->count, memory_order_relaxed));
        }
        put_family(out, hists[o], "histogram", o ? "Time model unloads took (draining included)." : "Time model loads took (reading, optimizing, warming).");
        render_histogram_with(out, list, n, METRICS_HIST_LOAD, hists[o], put_load_labels, ops[o]);
    }
}

/* The process, as Prometheus client libraries name it (from /proc/self). */
static void render_process(mcp_buf *out)
{
    double cpu = 0, start = 0;
    long long rss = 0, vsz = 0, threads = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        /* After the command's closing parenthesis: state is field 3. */
        char *p = strrchr(buf, ')');
        unsigned long long ut = 0, st = 0, starttime = 0, vsize = 0;
        long long nthreads = 0, rss_pages = 0;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %lld %*d %llu %llu %lld",
                        &ut, &st, &nthreads, &starttime, &vsize, &rss_pages) == 6) {
            double tck = (double)sysconf(_SC_CLK_TCK);
            cpu = (double)(ut + st) / tck;
            threads = nthreads;
            vsz = (long long)vsize;
            rss = rss_pages * (long long)sysconf(_SC_PAGESIZE);
            FILE *sf = fopen("/proc/stat", "r");
            char line[256];
            long long btime = 0;
            while (sf && fgets(line, sizeof line, sf))
                if (sscanf(line, "btime %lld", &btime) == 1) break;
            if (sf) fclose(sf);
            start = (double)btime + (double)starttime / tck;
        }
    }
    long long fds = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') fds++;
    if (d) {
        closedir(d);
        fds--; /* the one opendir holds */
    }
    struct rlimit rl;
    long long max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (long long)rl.rlim_cur : 0;
    put_family(out, "process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.");
    mcp_buf_printf(out, "process_cpu_seconds_total %.2f\n", cpu);
    put_family(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    mcp_buf_printf(out, "process_resident_memory_bytes %lld\n", rss);
    put_family(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
    mcp_buf_printf(out, "process_virtual_memory_bytes %lld\n", vsz);
    put_family(out, "process_open_fds", "gauge", "Open file descriptors.");
    mcp_buf_printf(out, "process_open_fds %lld\n", fds);
    put_family(out, "process_max_fds", "gauge", "The most file descriptors the process may open.");
    mcp_buf_printf(out, "process_max_fds %lld\n", max_fds);
    put_family(out, "process_threads", "gauge", "Threads of the process.");
    mcp_buf_printf(out, "process_threads %lld\n", threads);
    put_family(out, "process_start_time_seconds", "gauge", "When the process started, in seconds since the epoch.");
    mcp_buf_printf(out, "process_start_time_seconds %.2f\n", start);
}

/* Generative models: latency histograms, and what their engines count. */
/* Each served version's queue (depth and capacity, so saturation is a
 * ratio) and the real bytes it holds. */
static void render_versions(mcp_buf *out, const mcp_metrics_gauges *g)
{
    static const struct {
        const char *name, *help;
        size_t offset;
    } fams[] = {
        {"mcp_model_queue_depth", "Requests waiting in a model version's scheduler queue.",
         offsetof(mcp_metrics_version_gauges, queue_depth)},
        {"mcp_model_queue_capacity", "Requests a model version's queue holds before answering 429 (max_queue_size).",
         offsetof(mcp_metrics_version_gauges, queue_capacity)},
        {"mcp_model_resident_bytes", "Memory a loaded model version holds (its load and its runs), in bytes.",
         offsetof(mcp_metrics_version_gauges, memory_bytes)},
    };
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        put_family(out, fams[f].name, "gauge", fams[f].help);
        for (int i = 0; i < g->n_versions; i++) {
            const mcp_metrics_version_gauges *e = &g->versions[i];
            mcp_buf_printf(out, "%s{model=", fams[f].name);
            mcp_metrics_label_value(out, e->model);
            mcp_buf_puts(out, ",version=");
            mcp_metrics_label_value(out, e->version);
            mcp_buf_printf(out, "} %lld\n", (long long)*(const int64_t *)((const char *)e + fams[f].offset));
        }
    }
}

static void render_generation(mcp_buf *out, metrics_series **list, int n, const mcp_metrics_gauges *g)
{
    put_family(out, "mcp_generation_time_to_first_token_seconds", "histogram",
               "Time from a generation request's arrival to its first token.");
    render_histogram(out, list, n, METRICS_HIST_TTFT, "mcp_generation_time_to_first_token_seconds");
    put_family(out, "mcp_generation_inter_token_latency_seconds", "histogram",
               "Time between one generated token and the next of the same sequence.");
    render_histogram(out, list, n, METRICS_HIST_ITL, "mcp_generation_inter_token_latency_seconds");
    put_family(out, "mcp_generation_request_duration_seconds", "histogram",
               "Time from a generation request's arrival to its last token.");
    render_histogram(out, list, n, METRICS_HIST_GEN_E2E, "mcp_generation_request_duration_seconds");
    static const struct {
        const char *name, *type, *help, *label;
    } fam[] = {
        {"mcp_generation_prompt_tokens_total", "counter", "Prompt tokens of generation requests.", NULL},
        {"mcp_generation_tokens_total", "counter", "Tokens generated.", NULL},
        {"mcp_generation_requests_total", "counter", "Generation requests that ended (any way).", NULL},
        {"mcp_generation_preemptions_total", "counter",
         "Sequences that gave their KV blocks back for older ones and were computed again.", NULL},
        {"mcp_generation_sequences", "gauge", "Generation sequences running in the step loop, and waiting in the queue.",
         "state"},
        {"mcp_kv_cache_blocks", "gauge",
         "KV cache blocks: held by sequences (used), in the pool (total), holding a published prefix (cached).", "state"},
        {"mcp_kv_cache_bytes", "gauge", "KV cache bytes: held by sequences (used), and the pool (total).", "state"},
        {"mcp_kv_cache_evictions_total", "counter", "Cached prefix blocks taken back, least recently used first.", NULL},
        {"mcp_prefix_cache_queries_total", "counter", "Full prompt blocks looked up in the prefix cache.", NULL},
        {"mcp_prefix_cache_hits_total", "counter", "Full prompt blocks found in the prefix cache (not computed).", NULL},
        {"mcp_prefix_cache_hit_ratio", "gauge", "Prefix cache hits over queries since the version loaded.", NULL},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        put_family(out, fam[f].name, fam[f].type, fam[f].help);
        for (int i = 0; i < g->n_gen; i++) {
            const mcp_metrics_gen_gauges *e = &g->gen[i];
            const int64_t states[][3] = {{e->running, e->waiting, -1},
                                         {e->kv_used_blocks, e->kv_total_blocks, e->kv_cached_blocks},
                                         {e->kv_used_blocks * e->kv_block_bytes, e->kv_total_blocks * e->kv_block_bytes, -1}};
            static const char *const state_names[][3] = {{"running", "waiting", NULL}, {"used", "total", "cached"},
                                                         {"used", "total", NULL}};
            const int64_t plain[] = {e->prompt_tokens, e->generated_tokens, e->requests, e->preemptions, 0, 0, 0,
                                     e->kv_evictions, e->cache_queries, e->cache_hits};
            int row = f == 4 ? 0 : f == 5 ? 1 : f == 6 ? 2 : -1;
            for (int k = 0; k < (row >= 0 ? 3 : 1); k++) {
                if (row >= 0 && !state_names[row][k]) continue;
                mcp_buf_printf(out, "%s{model=", fam[f].name);
                mcp_metrics_label_value(out, e->model);
                mcp_buf_puts(out, ",version=");
                mcp_metrics_label_value(out, e->version);
                if (row >= 0) mcp_buf_printf(out, ",state=\"%s\"} %lld\n", state_names[row][k], (long long)states[row][k]);
                else if (f == 10)
                    mcp_buf_printf(out, "} %.6g\n", e->cache_queries ? (double)e->cache_hits / (double)e->cache_queries : 0.0);
                else mcp_buf_printf(out, "} %lld\n", (long long)plain[f]);
            }
        }
    }
}

void mcp_metrics_render(mcp_metrics *m, mcp_buf *out)
{
    if (!m) return;
    /* The sampler reads other components' state under their locks; call it
     * without ours so the two lock orders can never meet. */
    mcp_metrics_gauges g = {0};
    pthread_mutex_lock(&m->lock);
    mcp_metrics_sample_fn fn = m->sampler;
    void *user = m->sampler_user;
    pthread_mutex_unlock(&m->lock);
    if (fn) fn(user, &g);

    int n_req, n_err, n_model;
    metrics_series **req = series_sorted(m, SERIES_REQUESTS, &n_req);
    metrics_series **err = series_sorted(m, SERIES_ERRORS, &n_err);
    metrics_series **model = series_sorted(m, SERIES_MODEL, &n_model);
    int n_ro, n_gen, n_load;
    metrics_series **ro = series_sorted(m, SERIES_ROLLOUT, &n_ro);
    metrics_series **gen = series_sorted(m, SERIES_GEN, &n_gen);
    metrics_series **load = series_sorted(m, SERIES_LOAD, &n_load);
    int n_ten;
    metrics_series **ten = series_sorted(m, SERIES_TENANT, &n_ten);
    if (!req || !err || !model || !ro || !gen || !load || !ten) {
        out->failed = true;
    } else {
        put_family(out, "mcp_requests_total", "counter",
                   "Inference requests answered, by model, version, protocol and HTTP status code.");
        render_counters(out, req, n_req, SERIES_REQUESTS);
        put_family(out, "mcp_inference_errors_total", "counter", "Failed inference requests, by model and reason.");
        render_counters(out, err, n_err, SERIES_ERRORS);
        put_family(out, "mcp_tenant_requests_total", "counter",
                   "Requests of authenticated tenants, by tenant, priority class and HTTP status code (429: over a "
                   "tenant limit).");
        render_counters(out, ten, n_ten, SERIES_TENANT);
        put_family(out, "mcp_shadow_comparisons_total", "counter",
                   "Shadow copies of requests, by the shadow version and how its answer compared with the primary's.");
        render_rollout(out, ro, n_ro, 0);
        put_family(out, "mcp_rollout_gate_trips_total", "counter",
                   "Canaries and shadows turned off by an analysis gate, by version and gate.");
        render_rollout(out, ro, n_ro, 1);
        put_family(out, "mcp_cold_starts_total", "counter",
                   "Models unloaded by the memory policy and loaded again for a request.");
        render_rollout(out, ro, n_ro, 2);
        put_family(out, "mcp_model_evictions_total", "counter",
                   "Idle models the memory policy unloaded under sustained memory pressure.");
        render_rollout(out, ro, n_ro, 3);
        put_family(out, "mcp_queue_duration_seconds", "histogram",
                   "Time requests waited in the scheduler queue before their batch started.");
        render_histogram(out, model, n_model, METRICS_HIST_QUEUE, "mcp_queue_duration_seconds");
        put_family(out, "mcp_compute_duration_seconds", "histogram",
                   "Time the engine spent running the batch each request was part of.");
        render_histogram(out, model, n_model, METRICS_HIST_COMPUTE, "mcp_compute_duration_seconds");
        put_family(out, "mcp_request_duration_seconds", "histogram",
                   "Time from a request's arrival to its completion.");
        render_histogram(out, model, n_model, METRICS_HIST_REQUEST, "mcp_request_duration_seconds");
        put_family(out, "mcp_batch_size", "histogram", "Requests in each batch run by the engine.");
        render_histogram(out, model, n_model, METRICS_HIST_BATCH, "mcp_batch_size");
        put_family(out, "mcp_request_bytes", "histogram", "Bytes of each inference request's body.");
        render_histogram(out, model, n_model, METRICS_HIST_REQ_BYTES, "mcp_request_bytes");
        put_family(out, "mcp_response_bytes", "histogram", "Bytes of each inference answer's body.");
        render_histogram(out, model, n_model, METRICS_HIST_RESP_BYTES, "mcp_response_bytes");
        render_loads(out, load, n_load);
        put_family(out, "mcp_queue_depth", "gauge", "Requests waiting in the scheduler queues of all models.");
        mcp_buf_printf(out, "mcp_queue_depth %lld\n", (long long)g.queue_depth);
        put_family(out, "mcp_inflight_requests", "gauge", "Inference requests received and not yet answered.");
        mcp_buf_printf(out, "mcp_inflight_requests %lld\n",
                       (long long)atomic_load_explicit(&m->inflight, memory_order_relaxed));
        put_family(out, "mcp_http_requests_open", "gauge",
                   "HTTP requests whose headers arrived and whose answer is not yet sent (any route, any stage).");
        mcp_buf_printf(out, "mcp_http_requests_open %lld\n", (long long)g.http_requests_open);
        put_family(out, "mcp_http_connections", "gauge", "Open HTTP connections.");
        mcp_buf_printf(out, "mcp_http_connections %lld\n", (long long)g.http_connections);
        put_family(out, "mcp_request_body_bytes_held", "gauge",
                   "Request body bytes read and held before their request runs (capped by --max-inflight-body-bytes).");
        mcp_buf_printf(out, "mcp_request_body_bytes_held %lld\n", (long long)g.body_bytes_held);
        put_family(out, "mcp_models_loaded", "gauge", "Model versions loaded.");
        mcp_buf_printf(out, "mcp_models_loaded %d\n", g.loaded_models);
        put_family(out, "mcp_model_memory_bytes", "gauge", "Memory held by loaded models, in bytes.");
        mcp_buf_printf(out, "mcp_model_memory_bytes %zu\n", g.model_memory_bytes);
        render_versions(out, &g);
        render_generation(out, gen, n_gen, &g);
        render_process(out);
    }
    mcp_free(g.gen);
    mcp_free(g.versions);
    mcp_free(ten);
    mcp_free(gen);
    mcp_free(load);
    mcp_free(req);
    mcp_free(err);
    mcp_free(model);
    mcp_free(ro);
}

/* ---- one caller's view ---- */

/* The value of a label in a sample line's label set, unescaped into val;
 * false when absent. p points just after '{'. */
static bool label_find(const char *p, const char *end, const char *name, char *val, size_t cap)
{
    size_t nlen = strlen(name);
    while (p < end && *p != '}') {
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq || eq + 1 >= end || eq[1] != '"') return false;
        bool match = (size_t)(eq - p) == nlen && memcmp(p, name, nlen) == 0;
        size_t n = 0;
        const char *q = eq + 2;
        for (; q < end && *q != '"'; q++) {
            char ch = *q;
            if (ch == '\\' && q + 1 < end) {
                ch = *++q;
                if (ch == 'n') ch = '\n';
            }
            if (match && n + 1 < cap) val[n++] = ch;
        }
        if (match) {
            val[n] = '\0';
            return true;
        }
        p = q + 1;
        if (p < end && *p == ',') p++;
    }
    return false;
}

void mcp_metrics_filter(const char *text, size_t len, mcp_metrics_keep_fn keep, void *user, mcp_buf *out)
{
    const char *p = text, *end = text + len;
    char val[512];
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl + 1 : end;
        const char *brace = p[0] != '#' ? memchr(p, '{', (size_t)(eol - p)) : NULL;
        bool ok = true;
        if (brace) {
            if (label_find(brace + 1, eol, "model", val, sizeof val)) ok = keep(user, "model", val);
            if (ok && label_find(brace + 1, eol, "tenant", val, sizeof val)) ok = keep(user, "tenant", val);
        }
        if (ok) mcp_buf_append(out, p, (size_t)(eol - p));
        p = eol;
    }
}

/* ---- snapshots for other views (the status page) ---- */

_Static_assert(MCP_METRICS_LATENCY_BUCKETS == LATENCY_BUCKETS, "serve.h names the latency bucket count");

const int64_t *mcp_metrics_latency_bounds_ns(void) { return latency_bounds_ns; }

static int pair_cmp(const metrics_series *a, const metrics_series *b)
{
    int c = strcmp(a->model, b->model);
    return c ? c : strcmp(a->label2, b->label2);
}

int mcp_metrics_snapshot(mcp_metrics *m, mcp_metrics_version_snapshot **out)
{
    *out = NULL;
    if (!m) return 0;
    /* Both lists are sorted by model then version, so one merge pass
     * visits every pair once; a pair's request series (one per protocol
     * and code) lie next to each other. */
    int n_req, n_model, n = -1;
    metrics_series **req = series_sorted(m, SERIES_REQUESTS, &n_req);
    metrics_series **model = series_sorted(m, SERIES_MODEL, &n_model);
    mcp_metrics_version_snapshot *snap = NULL;
    if (req && model) snap = mcp_calloc((size_t)(n_req + n_model > 0 ? n_req + n_model : 1), sizeof *snap);
    if (snap) {
        n = 0;
        int i = 0, j = 0;
        while (i < n_req || j < n_model) {
            const metrics_series *key;
            if (i == n_req) key = model[j];
            else if (j == n_model || pair_cmp(req[i], model[j]) <= 0) key = req[i];
            else key = model[j];
            mcp_metrics_version_snapshot *e = &snap[n++];
            e->model = key->model;
            e->version = key->label2;
            for (; i < n_req && pair_cmp(req[i], key) == 0; i++) {
                uint64_t v = atomic_load_explicit(&req[i]->count, memory_order_relaxed);
                e->requests += v;
                if (req[i]->code >= 400) e->errors += v;
            }
            if (j < n_model && pair_cmp(model[j], key) == 0) {
                const metrics_hist *h = &model[j]->hists[METRICS_HIST_REQUEST];
                for (int b = 0; b <= LATENCY_BUCKETS; b++)
                    e->latency[b] = atomic_load_explicit(&h->buckets[b], memory_order_relaxed);
                e->latency_sum_ns = atomic_load_explicit(&h->sum, memory_order_relaxed);
                j++;
            }
        }
    }
    mcp_free(req);
    mcp_free(model);
    *out = snap;
    return n;
}
