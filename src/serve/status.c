/*
 * The live status page (issue 13): its embedded assets and GET /v2/status.
 *
 * The document the page refreshes from:
 *
 *   {"server": {"name", "version", "ready", "time_ms", "snapshot_ns"},
 *    "totals": {"models_loaded", "model_memory_bytes", "process_resident_bytes",
 *               "queue_depth", "requests", "errors"},
 *    "latency_bounds_s": [upper bounds of the latency buckets],
 *    "models": [{"name", "state", "reason",
 *                "rollout": null | {"primary", "canary": null | {"version", "weight", "stopped"},
 *                                   "shadow": null | {"version", "sample", "stopped"}, "previous"},
 *                "versions": [{"version", "role", "state", "requests", "errors",
 *                              "inference_count", "queue_depth", "memory_bytes",
 *                              "latency": {"count", "sum_s", "p50_s", "p99_s", "buckets"},
 *                              "drift"}]}]}
 *
 * Counts are cumulative since the server started, the same figures as
 * /metrics (requests, errors: mcp_requests_total, code >= 400; latency:
 * mcp_request_duration_seconds) and /v2/models/{m}/stats
 * (inference_count). The page computes rates between two refreshes, as
 * Prometheus's rate() does between two scrapes, instead of the server
 * keeping a window: the server then holds no state per viewer and no timer,
 * any number of pages (and curl) read the same consistent counters, a
 * page's refresh interval is its own choice, and a missed refresh only
 * widens the next interval instead of losing requests. The interval is
 * measured with snapshot_ns (the server's monotonic clock, read before any
 * count), so neither clock skew nor the network's delay bends a rate.
 * p50_s and p99_s are since the start; `buckets` (cumulative, the last is
 * +Inf) lets the page compute both over its own interval the same way.
 *
 * Strings go through mcp_buf_json_string; model names and versions are the
 * repository's own (no client can mint one: requests to unknown names
 * count under "" and only show in the totals), and reasons are the
 * repository's, which name files relative to their model root.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve/monitor.h"
#include "serve/status.h"

/* Generated from src/serve/status/ by cmake/embed.cmake (each NUL-ended). */
extern const char mcp__status_html[], mcp__status_css[], mcp__status_js[];
extern const size_t mcp__status_html_len, mcp__status_css_len, mcp__status_js_len;

mcp__status_asset mcp__status_asset_get(mcp__status_asset_id id)
{
    MCP_ASSERT(id >= 0 && id < MCP__STATUS_ASSET_COUNT);
    switch (id) {
    case MCP__STATUS_ASSET_CSS:
        return (mcp__status_asset){"text/css; charset=utf-8", mcp__status_css, mcp__status_css_len};
    case MCP__STATUS_ASSET_JS:
        return (mcp__status_asset){"text/javascript; charset=utf-8", mcp__status_js, mcp__status_js_len};
    default:
        return (mcp__status_asset){"text/html; charset=utf-8", mcp__status_html, mcp__status_html_len};
    }
}

/* Nothing but this origin's own script, style and fetch; no inline script
 * or style (the page has none), no frames, no forms, no base. */
#define STATUS_CSP                                                                                                   \
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; " \
    "form-action 'none'; frame-ancestors 'none'"

/* The assets are compiled in, so a new binary may bring new ones under the
 * same URLs: no-cache makes the browser ask again each load (a few KB). */
const char *const mcp__status_page_headers[] = {
    "Content-Security-Policy", STATUS_CSP,
    "X-Content-Type-Options", "nosniff",
    "Cache-Control", "no-cache",
    "Referrer-Policy", "no-referrer",
    NULL,
};

const char *const mcp__status_json_headers[] = {
    "X-Content-Type-Options", "nosniff",
    "Cache-Control", "no-store",
    NULL,
};

/* ---- figures ---- */

/* Prometheus's histogram_quantile over one histogram (per-bucket counts,
 * the last above every bound): find the bucket holding the q-th
 * observation and interpolate linearly inside it, from 0 for the first
 * bucket; the overflow bucket answers the highest finite bound. NAN when
 * there are no observations. In seconds. */
static double latency_quantile(const uint64_t *per_bucket, double q)
{
    const int64_t *bounds = mcp_metrics_latency_bounds_ns();
    enum { N = MCP_METRICS_LATENCY_BUCKETS };
    uint64_t total = 0;
    for (int b = 0; b <= N; b++) total += per_bucket[b];
    if (total == 0) return NAN;
    double rank = q * (double)total;
    uint64_t below = 0;
    for (int b = 0; b < N; b++) {
        if ((double)(below + per_bucket[b]) >= rank) {
            double lo = b ? (double)bounds[b - 1] * 1e-9 : 0.0, hi = (double)bounds[b] * 1e-9;
            return lo + (hi - lo) * (rank - (double)below) / (double)per_bucket[b];
        }
        below += per_bucket[b];
    }
    return (double)bounds[N - 1] * 1e-9;
}

static void put_number_or_null(mcp_buf *b, double x)
{
    if (isnan(x)) mcp_buf_puts(b, "null");
    else mcp_buf_printf(b, "%.9g", x);
}

/* Resident memory of the process, from /proc/self/statm; 0 when unreadable. */
static long long process_resident_bytes(void)
{
    long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%*s %lld", &pages) != 1) pages = 0;
        fclose(f);
    }
    return pages * (long long)sysconf(_SC_PAGESIZE);
}

static int snapshot_cmp(const void *a, const void *b)
{
    const mcp_metrics_version_snapshot *x = a, *y = b;
    int c = strcmp(x->model, y->model);
    return c ? c : strcmp(x->version, y->version);
}

static const mcp_metrics_version_snapshot *snapshot_find(const mcp_metrics_version_snapshot *snap, int n,
                                                         const char *model, const char *version)
{
    mcp_metrics_version_snapshot key = {.model = model, .version = version};
    return n > 0 ? bsearch(&key, snap, (size_t)n, sizeof *snap, snapshot_cmp) : NULL;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const mcp_repository_entry *)a)->name, ((const mcp_repository_entry *)b)->name);
}

/* ---- one model ---- */

/* What the page shows of one version of a model. */
typedef struct status_row {
    char version[MCP_ROLLOUT_VERSION_LEN];
    const char *role; /* primary, canary, shadow, previous (kept warm for undo), served (a Triton policy's) */
} status_row;

#define STATUS_ROWS_MAX (MCP_MAX_SERVED + 3)

static int row_add(status_row *rows, int n, const char *version, const char *role)
{
    if (!version[0] || n == STATUS_ROWS_MAX) return n;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].version, version)) return n;
    /* Versions are at most MCP_ROLLOUT_VERSION_LEN - 1 bytes everywhere the
     * repository keeps them. */
    size_t len = strnlen(version, sizeof rows[n].version - 1);
    memcpy(rows[n].version, version, len);
    rows[n].version[len] = '\0';
    rows[n].role = role;
    return n + 1;
}

static void put_version(mcp_buf *b, mcp_repository *repo, const mcp_repository_entry *e, const status_row *row,
                        const mcp_metrics_version_snapshot *snap, int n_snap)
{
    mcp_model_version *v = mcp_repository_get(repo, e->name, row->version);
    /* The entry's own version shows the entry's state (LOADING while a new
     * one loads beside the one serving, UNAVAILABLE after a failure);
     * every other loaded version is ready to serve. */
    mcp_model_state state = !strcmp(row->version, e->version) ? e->state
                            : v                                 ? MCP_MODEL_READY
                                                                : MCP_MODEL_UNAVAILABLE;
    mcp_scheduler_stats st = {0};
    int64_t queue_depth = 0;
    if (v && v->serving) {
        mcp_scheduler_stats_get(v->serving, &st);
        queue_depth = st.queue_depth;
    } else if (v && v->generator) {
        mcp_gen_stats g;
        mcp_gen_stats_get(v->generator, &g);
        queue_depth = g.waiting;
    }
    const mcp_metrics_version_snapshot *m = snapshot_find(snap, n_snap, e->name, row->version);
    static const mcp_metrics_version_snapshot none;
    if (!m) m = &none;

    mcp_buf_puts(b, "{\"version\":");
    mcp_buf_json_string(b, row->version);
    mcp_buf_printf(b, ",\"role\":\"%s\",\"state\":", row->role);
    mcp_buf_json_string(b, mcp_model_state_name(state));
    mcp_buf_printf(b, ",\"requests\":%llu,\"errors\":%llu,\"inference_count\":%lld,\"queue_depth\":%lld,"
                      "\"memory_bytes\":%zu,\"latency\":{\"count\":",
                   (unsigned long long)m->requests, (unsigned long long)m->errors, (long long)st.inference_count,
                   (long long)queue_depth, v ? mcp_model_version_bytes(v) : (size_t)0);
    uint64_t cumulative = 0;
    for (int i = 0; i <= MCP_METRICS_LATENCY_BUCKETS; i++) cumulative += m->latency[i];
    mcp_buf_printf(b, "%llu,\"sum_s\":%.9g,\"p50_s\":", (unsigned long long)cumulative,
                   (double)m->latency_sum_ns * 1e-9);
    put_number_or_null(b, latency_quantile(m->latency, 0.50));
    mcp_buf_puts(b, ",\"p99_s\":");
    put_number_or_null(b, latency_quantile(m->latency, 0.99));
    mcp_buf_puts(b, ",\"buckets\":[");
    cumulative = 0;
    for (int i = 0; i <= MCP_METRICS_LATENCY_BUCKETS; i++) {
        cumulative += m->latency[i];
        mcp_buf_printf(b, "%s%llu", i ? "," : "", (unsigned long long)cumulative);
    }
    /* Output monitoring: {"score", "threshold", "drifted", ...} for a
     * monitored version, null for the others. */
    mcp_buf_puts(b, "]},\"drift\":");
    if (v && v->monitor) mcp_monitor_json(v->monitor, b);
    else mcp_buf_puts(b, "null");
    mcp_buf_puts(b, "}");
    mcp_model_version_release(v);
}

static void put_rollout_side(mcp_buf *b, const char *key, const char *version, const char *amount_key, double amount,
                             bool stopped)
{
    mcp_buf_printf(b, ",\"%s\":", key);
    if (!version[0]) {
        mcp_buf_puts(b, "null");
        return;
    }
    mcp_buf_puts(b, "{\"version\":");
    mcp_buf_json_string(b, version);
    mcp_buf_printf(b, ",\"%s\":%g,\"stopped\":%s}", amount_key, amount, stopped ? "true" : "false");
}

static void put_model(mcp_buf *b, mcp_repository *repo, const mcp_repository_entry *e,
                      const mcp_metrics_version_snapshot *snap, int n_snap)
{
    mcp_buf_puts(b, "{\"name\":");
    mcp_buf_json_string(b, e->name);
    mcp_buf_puts(b, ",\"state\":");
    mcp_buf_json_string(b, mcp_model_state_name(e->state));
    mcp_buf_puts(b, ",\"reason\":");
    mcp_buf_json_string(b, e->reason ? e->reason : "");

    /* The versions: the rollout's roles first, then the rest it serves,
     * then the entry's version when none of those is it (a failed or
     * loading one). A model that serves nothing has no rollout. */
    status_row rows[STATUS_ROWS_MAX];
    int n = 0;
    char msg[256];
    mcp_err err = {msg, sizeof msg};
    mcp_rollout_state rs;
    mcp_buf_puts(b, ",\"rollout\":");
    if (mcp_repository_rollout(repo, e->name, &rs, &err) == MCP_STATUS_OK) {
        bool canary_off = rs.watch && atomic_load(&rs.watch->canary_off);
        bool shadow_off = rs.watch && atomic_load(&rs.watch->shadow_off);
        mcp_buf_puts(b, "{\"primary\":");
        mcp_buf_json_string(b, rs.primary);
        put_rollout_side(b, "canary", rs.canary, "weight", rs.canary_weight, canary_off);
        put_rollout_side(b, "shadow", rs.shadow, "sample", rs.shadow_sample, shadow_off);
        mcp_buf_puts(b, ",\"previous\":");
        if (rs.previous[0]) mcp_buf_json_string(b, rs.previous);
        else mcp_buf_puts(b, "null");
        mcp_buf_puts(b, "}");
        n = row_add(rows, n, rs.primary, "primary");
        n = row_add(rows, n, rs.canary, "canary");
        n = row_add(rows, n, rs.shadow, "shadow");
        char served[MCP_MAX_SERVED][64];
        int n_served = mcp_repository_versions(repo, e->name, served, MCP_MAX_SERVED);
        for (int i = 0; i < n_served; i++) n = row_add(rows, n, served[i], "served");
        n = row_add(rows, n, rs.previous, "previous");
        mcp_route_watch_release(rs.watch);
    } else {
        mcp_buf_puts(b, "null");
    }
    n = row_add(rows, n, e->version, "primary");
    mcp_buf_puts(b, ",\"versions\":[");
    for (int i = 0; i < n; i++) {
        if (i) mcp_buf_puts(b, ",");
        put_version(b, repo, e, &rows[i], snap, n_snap);
    }
    mcp_buf_puts(b, "]}");
}

void mcp__status_json(mcp_frontend *fe, mcp_metrics_keep_fn keep, void *user, mcp_buf *out)
{
    /* The clock first: every count below was read after it, so a reader
     * that finished its requests before another snapshot's clock knows
     * this snapshot holds them. */
    int64_t snapshot_ns = mcp_now_ns();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    mcp_repository *repo = mcp_frontend_repository(fe);

    mcp_metrics_version_snapshot *snap = NULL;
    int n_snap = mcp_metrics_snapshot(mcp_frontend_metrics(fe), &snap);
    if (n_snap < 0) {
        out->failed = true;
        return;
    }
    uint64_t requests = 0, errors = 0;
    for (int i = 0; i < n_snap; i++) {
        if (keep && !keep(user, "model", snap[i].model)) continue;
        requests += snap[i].requests;
        errors += snap[i].errors;
    }
    mcp_repository_entry *list;
    int n = mcp_repository_index(repo, &list);
    /* One caller's view: the models it may see, and totals over them. */
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (keep && !keep(user, "model", list[i].name)) {
            mcp_free(list[i].name);
            mcp_free(list[i].version);
            mcp_free(list[i].reason);
            memset(&list[i], 0, sizeof list[i]);
            continue;
        }
        if (kept != i) {
            list[kept] = list[i];
            memset(&list[i], 0, sizeof list[i]);
        }
        kept++;
    }
    if (kept > 1) qsort(list, (size_t)kept, sizeof *list, entry_cmp);
    int loaded = 0;
    size_t model_bytes = 0;
    if (!keep) mcp_repository_totals(repo, &loaded, &model_bytes);
    for (int i = 0; keep && i < kept; i++) {
        mcp_model_version *v = mcp_repository_get(repo, list[i].name, NULL);
        if (v) {
            loaded++;
            model_bytes += v->memory_bytes;
        }
        mcp_model_version_release(v);
    }
    int64_t queue_depth = 0;
    for (int i = 0; i < kept; i++) {
        mcp_model_version *v = mcp_repository_get(repo, list[i].name, NULL);
        mcp_scheduler_stats st = {0};
        if (v && v->serving) mcp_scheduler_stats_get(v->serving, &st);
        queue_depth += st.queue_depth;
        mcp_model_version_release(v);
    }

    mcp_buf_printf(out, "{\"server\":{\"name\":\"mcp2026\",\"version\":\"%s\",\"ready\":%s,\"time_ms\":%lld,"
                        "\"snapshot_ns\":%lld},",
                   MCP_VERSION_STRING, mcp_frontend_stopping(fe) ? "false" : "true",
                   (long long)wall.tv_sec * 1000 + wall.tv_nsec / 1000000, (long long)snapshot_ns);
    mcp_buf_printf(out, "\"totals\":{\"models_loaded\":%d,\"model_memory_bytes\":%zu,\"process_resident_bytes\":%lld,"
                        "\"queue_depth\":%lld,\"requests\":%llu,\"errors\":%llu},\"latency_bounds_s\":[",
                   loaded, model_bytes, process_resident_bytes(), (long long)queue_depth, (unsigned long long)requests,
                   (unsigned long long)errors);
    const int64_t *bounds = mcp_metrics_latency_bounds_ns();
    for (int i = 0; i < MCP_METRICS_LATENCY_BUCKETS; i++)
        mcp_buf_printf(out, "%s%.9g", i ? "," : "", (double)bounds[i] * 1e-9);
    mcp_buf_puts(out, "],\"models\":[");
    for (int i = 0; i < kept; i++) {
        if (i) mcp_buf_puts(out, ",");
        put_model(out, repo, &list[i], snap, n_snap);
    }
    mcp_buf_puts(out, "]}");
    mcp_repository_entries_free(list, n);
    mcp_free(snap);
}
