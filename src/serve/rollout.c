/*
 * Watching a rollout: sliding windows of what the primary, the canary and
 * the shadow did, the validator that compares a shadow's answer with the
 * primary's request by request, and the analysis gates that turn a canary
 * or shadow off the moment its window says so.
 *
 * A window is ROLLOUT_BUCKETS time buckets of window/ROLLOUT_BUCKETS each,
 * with running totals over the live ones, so a gate reads its figures in
 * O(latency bins) whatever the traffic. Latencies fall into bins of 1/8
 * of a power of two (about 9% wide); a p99 is the upper edge of its bin.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/rollout.h"

#define ROLLOUT_BUCKETS 20
#define LAT_BINS 200 /* 8 per power of two up to 2^25 us (about 33 s) */

typedef struct role_stats {
    int64_t n, errors;
    int64_t lat[LAT_BINS];
} role_stats;

typedef struct shadow_stats {
    int64_t compared, agreed, failed, dropped;
} shadow_stats;

typedef struct bucket {
    int64_t slot; /* which bucket_us-long stretch of time it holds; -1 = empty */
    role_stats role[2];
    shadow_stats shadow;
} bucket;

struct mcp_rollout_monitor {
    mcp_route_watch watch; /* first: the registry holds it as this */
    char model[256], primary[MCP_ROLLOUT_VERSION_LEN], canary[MCP_ROLLOUT_VERSION_LEN], shadow[MCP_ROLLOUT_VERSION_LEN];
    mcp_rollout_spec spec;
    int64_t bucket_us;
    mcp_metrics *metrics;
    mcp_rollout_trip_fn trip;
    void *trip_user;
    pthread_mutex_t mu;
    bucket buckets[ROLLOUT_BUCKETS];
    role_stats total[2];
    shadow_stats shadow_total;
    double max_deviation; /* of the shadow, since it started */
    char tripped[2][300]; /* why the canary [0] / shadow [1] stopped */
};

/* ---- windows ---- */

static int lat_bin(int64_t us)
{
    if (us < 1) us = 1;
    int b = (int)(8.0 * log2((double)us));
    return b < 0 ? 0 : b >= LAT_BINS ? LAT_BINS - 1 : b;
}

static int64_t bin_upper_us(int b) { return (int64_t)ceil(exp2((double)(b + 1) / 8.0)); }

static void role_sub(role_stats *t, const role_stats *x)
{
    t->n -= x->n;
    t->errors -= x->errors;
    for (int i = 0; i < LAT_BINS; i++) t->lat[i] -= x->lat[i];
}

/* The bucket for now, expiring the ones that left the window (mu held). */
static bucket *bucket_now(mcp_rollout_monitor *m)
{
    int64_t slot = mcp_now_us() / m->bucket_us;
    for (int i = 0; i < ROLLOUT_BUCKETS; i++) {
        bucket *b = &m->buckets[i];
        if (b->slot < 0 || b->slot > slot - ROLLOUT_BUCKETS) continue;
        role_sub(&m->total[0], &b->role[0]);
        role_sub(&m->total[1], &b->role[1]);
        m->shadow_total.compared -= b->shadow.compared;
        m->shadow_total.agreed -= b->shadow.agreed;
        m->shadow_total.failed -= b->shadow.failed;
        m->shadow_total.dropped -= b->shadow.dropped;
        memset(b, 0, sizeof *b);
        b->slot = -1;
    }
    bucket *b = &m->buckets[slot % ROLLOUT_BUCKETS];
    if (b->slot != slot) {
        memset(b, 0, sizeof *b);
        b->slot = slot;
    }
    return b;
}

static int64_t p99_us(const role_stats *s)
{
    if (s->n <= 0) return 0;
    int64_t want = s->n - s->n / 100; /* the 99th percentile's rank */
    int64_t seen = 0;
    for (int i = 0; i < LAT_BINS; i++)
        if ((seen += s->lat[i]) >= want) return bin_upper_us(i);
    return bin_upper_us(LAT_BINS - 1);
}

/* ---- gates ---- */

/* Stops the canary [which 0] or shadow [1] (mu held): at once in routing,
 * then through the control plane. */
static void trip(mcp_rollout_monitor *m, int which, mcp_rollout_event gate, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void trip(mcp_rollout_monitor *m, int which, mcp_rollout_event gate, const char *fmt, ...)
{
    atomic_bool *off = which ? &m->watch.shadow_off : &m->watch.canary_off;
    if (atomic_exchange(off, true)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->tripped[which], sizeof m->tripped[which], fmt, ap);
    va_end(ap);
    mcp_metrics_rollout(m->metrics, m->model, which ? m->shadow : m->canary, gate);
    if (m->trip) m->trip(m->trip_user, m, which == 0, m->tripped[which]);
}

bool mcp_rollout_drifted(mcp_route_watch *w, const char *version, const char *reason)
{
    mcp_rollout_monitor *m = (mcp_rollout_monitor *)w;
    if (!m || !version || !m->canary[0] || strcmp(version, m->canary) != 0) return false;
    pthread_mutex_lock(&m->mu);
    bool was_off = atomic_load(&m->watch.canary_off);
    /* MCP_ROLLOUT_EVENT_COUNT: no gate-trip series (metrics ignores it);
     * the monitor counts drift events itself. */
    if (!was_off) trip(m, 0, MCP_ROLLOUT_EVENT_COUNT, "gate drift: canary %s: %s", m->canary, reason ? reason : "drifted");
    pthread_mutex_unlock(&m->mu);
    return !was_off;
}

static void judge(mcp_rollout_monitor *m)
{
    const mcp_rollout_spec *sp = &m->spec;
    double secs = (double)sp->window_ms / 1000.0;
    const role_stats *p = &m->total[MCP_ROUTE_PRIMARY], *c = &m->total[MCP_ROUTE_CANARY];
    if (m->canary[0] && !atomic_load(&m->watch.canary_off) && c->n >= sp->min_samples) {
        double ce = (double)c->errors / (double)c->n, pe = p->n ? (double)p->errors / (double)p->n : 0;
        int64_t p99 = p99_us(c);
        if (sp->error_rate_margin >= 0 && ce > pe + sp->error_rate_margin)
            trip(m, 0, MCP_GATE_CANARY_ERRORS,
                 "gate error_rate: canary %s failed %.1f%% of %lld requests in %gs, the primary %.1f%% (margin %.1f%%)",
                 m->canary, 100 * ce, (long long)c->n, secs, 100 * pe, 100 * sp->error_rate_margin);
        else if (sp->p99_budget_us > 0 && p99 > sp->p99_budget_us)
            trip(m, 0, MCP_GATE_CANARY_P99, "gate p99: canary %s p99 %.3f ms over %lld requests in %gs, budget %.3f ms",
                 m->canary, (double)p99 / 1000.0, (long long)c->n, secs, (double)sp->p99_budget_us / 1000.0);
    }
    const shadow_stats *s = &m->shadow_total;
    if (m->shadow[0] && !atomic_load(&m->watch.shadow_off) && s->compared >= sp->min_samples) {
        double need = sp->validator == MCP_VALIDATOR_TOP1 ? sp->threshold : sp->agreement;
        double got = (double)s->agreed / (double)s->compared;
        char v[64];
        mcp_validator_format(sp->validator, sp->threshold, v, sizeof v);
        if (got < need)
            trip(m, 1, MCP_GATE_SHADOW_DEVIATION,
                 "gate deviation: shadow %s agreed with %s on %.1f%% of %lld requests in %gs (%s needs %.1f%%; "
                 "largest deviation %g)",
                 m->shadow, m->primary, 100 * got, (long long)s->compared, secs, v, 100 * need, m->max_deviation);
    }
}

void mcp_rollout_record(mcp_route_watch *w, mcp_route_role role, mcp_status st, int64_t latency_ns)
{
    mcp_rollout_monitor *m = (mcp_rollout_monitor *)w;
    int code = mcp_status_http_code(st);
    bool failed = code >= 500 || code == 429; /* the server's failures, not the client's */
    pthread_mutex_lock(&m->mu);
    bucket *b = bucket_now(m);
    int bin = lat_bin(latency_ns / 1000);
    role_stats *const parts[2] = {&b->role[role], &m->total[role]};
    for (int i = 0; i < 2; i++) {
        parts[i]->n++;
        parts[i]->errors += failed;
        parts[i]->lat[bin]++;
    }
    if (role == MCP_ROUTE_CANARY) judge(m);
    pthread_mutex_unlock(&m->mu);
}

/* ---- the validator ---- */

static const mcp_req_tensor *output_named(const mcp_request *r, const char *name)
{
    for (int i = 0; i < r->n_outputs; i++)
        if (r->outputs[i].name && !strcmp(r->outputs[i].name, name)) return &r->outputs[i];
    return NULL;
}

/* "score:index:label" (a topk step's answer): the score and where the
 * rest begins. */
static double topk_score(const char *s, const char **rest)
{
    char *end;
    double x = strtod(s, &end);
    *rest = *end == ':' ? end + 1 : s;
    return end == s ? NAN : x;
}

/* Largest difference between two tensors under the validator; INFINITY
 * when they cannot be compared (shape, type, a different class). */
static double tensor_deviation(mcp_validator_kind kind, const mcp_tensor *a, const mcp_tensor *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank) return INFINITY;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return INFINITY;
    int64_t n = mcp_tensor_numel(a);
    double worst = 0;
    if (a->dtype == MCP_DTYPE_STRING) {
        const char *const *sa = a->data, *const *sb = b->data;
        /* top1: the first of each row (the best class); otherwise all. */
        int64_t step = kind == MCP_VALIDATOR_TOP1 && a->rank ? a->dims[a->rank - 1] : 1;
        for (int64_t i = 0; step > 0 && i < n; i += step) {
            const char *ra, *rb;
            double x = topk_score(sa[i], &ra), y = topk_score(sb[i], &rb);
            if (strcmp(ra, rb) != 0) return INFINITY;
            if (kind == MCP_VALIDATOR_TOP1) continue;
            double dev = isnan(x) || isnan(y) ? (strcmp(sa[i], sb[i]) ? INFINITY : 0) : fabs(x - y);
            if (kind == MCP_VALIDATOR_MAX_REL && isfinite(dev)) {
                double scale = fmax(fabs(x), fabs(y));
                if (scale > 1e-6) dev /= scale;
            }
            if (dev > worst) worst = dev;
        }
        return worst;
    }
    if (kind == MCP_VALIDATOR_TOP1) {
        /* The class: the largest value along the last axis, per row. */
        int64_t cols = a->rank ? a->dims[a->rank - 1] : 1;
        if (cols <= 0) return 0;
        for (int64_t row = 0; row < n / cols; row++) {
            int64_t ia = 0, ib = 0;
            for (int64_t k = 1; k < cols; k++) {
                if (mcp_tensor_get_f64(a, row * cols + k) > mcp_tensor_get_f64(a, row * cols + ia)) ia = k;
                if (mcp_tensor_get_f64(b, row * cols + k) > mcp_tensor_get_f64(b, row * cols + ib)) ib = k;
            }
            if (ia != ib) return INFINITY;
        }
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        double x = mcp_tensor_get_f64(a, i), y = mcp_tensor_get_f64(b, i);
        double dev = fabs(x - y);
        if (isnan(x) != isnan(y)) dev = INFINITY;
        else if (isnan(x)) dev = 0;
        if (kind == MCP_VALIDATOR_MAX_REL && isfinite(dev)) {
            double scale = fmax(fabs(x), fabs(y));
            if (scale > 1e-6) dev /= scale;
        }
        if (dev > worst) worst = dev;
    }
    return worst;
}

/* Whether the shadow agrees with the primary on one request, and by how
 * much they differ (the worst output). */
static bool agrees(const mcp_rollout_spec *sp, const mcp_request *p, const mcp_request *s, double *deviation)
{
    double worst = 0;
    int compared = 0;
    for (int i = 0; i < p->n_outputs; i++) {
        const mcp_req_tensor *a = &p->outputs[i], *b = a->name ? output_named(s, a->name) : NULL;
        if (!b) continue;
        double dev = tensor_deviation(sp->validator, &a->t, &b->t);
        if (dev > worst) worst = dev;
        compared++;
    }
    if (!compared) worst = INFINITY; /* nothing in common to compare */
    *deviation = worst;
    return sp->validator == MCP_VALIDATOR_TOP1 ? isfinite(worst) : worst <= sp->threshold;
}

void mcp_rollout_compare(mcp_route_watch *w, const mcp_request *primary, const mcp_request *shadow)
{
    mcp_rollout_monitor *m = (mcp_rollout_monitor *)w;
    if (primary->status != MCP_STATUS_OK) return; /* nothing to compare with */
    double dev = INFINITY;
    bool ok = shadow->status == MCP_STATUS_OK && agrees(&m->spec, primary, shadow, &dev);
    mcp_metrics_rollout(m->metrics, m->model, m->shadow,
                        shadow->status != MCP_STATUS_OK ? MCP_SHADOW_FAILED : ok ? MCP_SHADOW_AGREED : MCP_SHADOW_DISAGREED);
    pthread_mutex_lock(&m->mu);
    bucket *b = bucket_now(m);
    b->shadow.compared++;
    m->shadow_total.compared++;
    b->shadow.agreed += ok;
    m->shadow_total.agreed += ok;
    if (shadow->status != MCP_STATUS_OK) {
        b->shadow.failed++;
        m->shadow_total.failed++;
    } else if (dev > m->max_deviation) {
        m->max_deviation = dev;
    }
    judge(m);
    pthread_mutex_unlock(&m->mu);
}

void mcp_rollout_dropped(mcp_route_watch *w)
{
    mcp_rollout_monitor *m = (mcp_rollout_monitor *)w;
    mcp_metrics_rollout(m->metrics, m->model, m->shadow, MCP_SHADOW_DROPPED);
    pthread_mutex_lock(&m->mu);
    bucket_now(m)->shadow.dropped++;
    m->shadow_total.dropped++;
    pthread_mutex_unlock(&m->mu);
}

/* ---- life and status ---- */

static void monitor_destroy(mcp_route_watch *w)
{
    mcp_rollout_monitor *m = (mcp_rollout_monitor *)w;
    pthread_mutex_destroy(&m->mu);
    mcp_free(m);
}

mcp_route_watch *mcp_rollout_monitor_create(const char *model, const mcp_rollout_spec *spec, const char *primary,
                                            const char *canary, const char *shadow, mcp_metrics *metrics,
                                            mcp_rollout_trip_fn trip_fn, void *user)
{
    mcp_rollout_monitor *m = mcp_calloc(1, sizeof *m);
    if (!m) return NULL;
    atomic_init(&m->watch.refs, 1);
    m->watch.destroy = monitor_destroy;
    snprintf(m->model, sizeof m->model, "%s", model);
    snprintf(m->primary, sizeof m->primary, "%s", primary ? primary : "");
    snprintf(m->canary, sizeof m->canary, "%s", canary ? canary : "");
    snprintf(m->shadow, sizeof m->shadow, "%s", shadow ? shadow : "");
    m->spec = *spec;
    m->bucket_us = spec->window_ms * 1000 / ROLLOUT_BUCKETS;
    if (m->bucket_us < 1) m->bucket_us = 1;
    m->metrics = metrics;
    m->trip = trip_fn;
    m->trip_user = user;
    pthread_mutex_init(&m->mu, NULL);
    for (int i = 0; i < ROLLOUT_BUCKETS; i++) m->buckets[i].slot = -1;
    if (canary) mcp_metrics_declare_rollout(metrics, model, canary, false);
    if (shadow) mcp_metrics_declare_rollout(metrics, model, shadow, true);
    return &m->watch;
}

static void role_json(mcp_buf *b, const char *key, const char *version, const role_stats *s)
{
    mcp_buf_printf(b, ",\"%s\":{\"version\":", key);
    mcp_buf_json_string(b, version);
    mcp_buf_printf(b, ",\"requests\":%lld,\"errors\":%lld,\"error_rate\":%.6g,\"p99_us\":%lld}", (long long)s->n,
                   (long long)s->errors, s->n ? (double)s->errors / (double)s->n : 0.0, (long long)p99_us(s));
}

void mcp_rollout_window_json(mcp_route_watch *w, mcp_buf *b)
{
    mcp_rollout_monitor *m = (mcp_rollout_monitor *)w;
    pthread_mutex_lock(&m->mu);
    bucket_now(m);
    mcp_buf_printf(b, "{\"seconds\":%g", (double)m->spec.window_ms / 1000.0);
    role_json(b, "primary", m->primary, &m->total[MCP_ROUTE_PRIMARY]);
    if (m->canary[0]) role_json(b, "canary", m->canary, &m->total[MCP_ROUTE_CANARY]);
    if (m->shadow[0]) {
        const shadow_stats *s = &m->shadow_total;
        mcp_buf_puts(b, ",\"shadow\":{\"version\":");
        mcp_buf_json_string(b, m->shadow);
        mcp_buf_printf(b, ",\"compared\":%lld,\"agreed\":%lld,\"failed\":%lld,\"dropped\":%lld,\"agreement\":%.6g",
                       (long long)s->compared, (long long)s->agreed, (long long)s->failed, (long long)s->dropped,
                       s->compared ? (double)s->agreed / (double)s->compared : 1.0);
        if (isfinite(m->max_deviation)) mcp_buf_printf(b, ",\"max_deviation\":%.6g}", m->max_deviation);
        else mcp_buf_puts(b, ",\"max_deviation\":null}");
    }
    const char *const which[2] = {"canary", "shadow"};
    mcp_buf_puts(b, ",\"tripped\":[");
    int n = 0;
    for (int i = 0; i < 2; i++) {
        if (!m->tripped[i][0]) continue;
        mcp_buf_printf(b, "%s{\"role\":\"%s\",\"reason\":", n++ ? "," : "", which[i]);
        mcp_buf_json_string(b, m->tripped[i]);
        mcp_buf_puts(b, "}");
    }
    mcp_buf_puts(b, "]}");
    pthread_mutex_unlock(&m->mu);
}

const char *mcp_rollout_model(const mcp_route_watch *w) { return ((const mcp_rollout_monitor *)w)->model; }
