/*
 * Metrics registry (src/serve/metrics.c): exact Prometheus text lines for
 * counters, cumulative histogram buckets, _sum, _count and gauges; label
 * escaping; the series cap; recording from many threads at once; and, with
 * `--promtool`, that `promtool check metrics` accepts the output (exits 77,
 * a ctest skip, when promtool is not installed).
 */
#include <time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "serve/serve.h"
#include "test_util.h"

/* Renders m into a NUL-terminated string owned by the caller (mcp_buf_free). */
static mcp_buf render(mcp_metrics *m)
{
    mcp_buf b = {0};
    mcp_metrics_render(m, &b);
    mcp_buf_append(&b, "", 1); /* a terminating NUL even when empty */
    return b;
}

/* Checks that `line` (without its newline) is a whole line of text. */
#define CHECK_LINE(text, line)                                                \
    do {                                                                      \
        tu_checks++;                                                          \
        if (!has_line((text), (line)))                                        \
            TU_FAIL_AT(__FILE__, __LINE__, "missing line: %s", (line));       \
    } while (0)

static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n') return true;
    return false;
}

static int count_prefix(const char *text, const char *prefix)
{
    int n = 0;
    size_t k = strlen(prefix);
    for (const char *p = text; *p;) {
        if (strncmp(p, prefix, k) == 0) n++;
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        p = nl + 1;
    }
    return n;
}

static const char *families[][2] = {
    {"mcp_requests_total", "counter"},
    {"mcp_inference_errors_total", "counter"},
    {"mcp_queue_duration_seconds", "histogram"},
    {"mcp_compute_duration_seconds", "histogram"},
    {"mcp_request_duration_seconds", "histogram"},
    {"mcp_batch_size", "histogram"},
    {"mcp_queue_depth", "gauge"},
    {"mcp_inflight_requests", "gauge"},
    {"mcp_http_requests_open", "gauge"},
    {"mcp_http_connections", "gauge"},
    {"mcp_request_body_bytes_held", "gauge"},
    {"mcp_models_loaded", "gauge"},
    {"mcp_model_memory_bytes", "gauge"},
    {"mcp_request_bytes", "histogram"},
    {"mcp_response_bytes", "histogram"},
    {"mcp_model_loads_total", "counter"},
    {"mcp_model_unloads_total", "counter"},
    {"mcp_model_load_duration_seconds", "histogram"},
    {"mcp_model_unload_duration_seconds", "histogram"},
    {"mcp_generation_time_to_first_token_seconds", "histogram"},
    {"mcp_generation_inter_token_latency_seconds", "histogram"},
    {"mcp_kv_cache_blocks", "gauge"},
    {"mcp_prefix_cache_hit_ratio", "gauge"},
    {"process_cpu_seconds_total", "counter"},
    {"process_resident_memory_bytes", "gauge"},
    {"process_open_fds", "gauge"},
    {"process_threads", "gauge"},
    {"process_start_time_seconds", "gauge"},
};

static void test_empty(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_metrics_destroy(NULL);
    mcp_metrics *m = mcp_metrics_create();
    TU_REQUIRE(m);
    mcp_buf b = render(m);
    const char *t = (const char *)b.data;
    TU_REQUIRE(t && !b.failed);
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        char line[256];
        snprintf(line, sizeof line, "# TYPE %s %s", families[i][0], families[i][1]);
        CHECK_LINE(t, line);
        snprintf(line, sizeof line, "# HELP %s ", families[i][0]);
        TU_CHECK_INT(count_prefix(t, line), 1);
    }
    /* No series yet; gauges read 0 without a sampler. */
    TU_CHECK_INT(count_prefix(t, "mcp_requests_total{"), 0);
    TU_CHECK_INT(count_prefix(t, "mcp_batch_size_bucket"), 0);
    CHECK_LINE(t, "mcp_queue_depth 0");
    CHECK_LINE(t, "mcp_inflight_requests 0");
    CHECK_LINE(t, "mcp_http_requests_open 0");
    CHECK_LINE(t, "mcp_http_connections 0");
    CHECK_LINE(t, "mcp_request_body_bytes_held 0");
    CHECK_LINE(t, "mcp_models_loaded 0");
    CHECK_LINE(t, "mcp_model_memory_bytes 0");
    /* Every line is a comment or a sample; the text ends with a newline. */
    TU_CHECK(b.len >= 2 && t[b.len - 2] == '\n');
    mcp_buf_free(&b);
    mcp_metrics_destroy(m);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_counters(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_metrics *m = mcp_metrics_create();
    TU_REQUIRE(m);
    for (int i = 0; i < 3; i++) mcp_metrics_request(m, "digits", "v1.0.0", MCP_PROTOCOL_V2, 200);
    mcp_metrics_request(m, "digits", "v1.0.0", MCP_PROTOCOL_V2, 400);
    mcp_metrics_request(m, "digits", "v1.0.0", MCP_PROTOCOL_V1, 200);
    mcp_metrics_request(m, "digits", "v2.0.0", MCP_PROTOCOL_SIMPLE, 200);
    mcp_metrics_request(m, NULL, NULL, MCP_PROTOCOL_V2, 404);
    mcp_metrics_error(m, "digits", "invalid_input");
    mcp_metrics_error(m, "digits", "invalid_input");
    mcp_metrics_error(m, "digits", "queue_full");
    mcp_metrics_request(NULL, "x", "y", MCP_PROTOCOL_V2, 200); /* no registry: ignored */
    mcp_metrics_error(NULL, "x", "y");

    mcp_buf b = render(m);
    const char *t = (const char *)b.data;
    TU_REQUIRE(t && !b.failed);
    /* Series sorted by labels, right after their family's TYPE line. */
    const char *expect =
        "# TYPE mcp_requests_total counter\n"
        "mcp_requests_total{model=\"\",version=\"\",protocol=\"v2\",code=\"404\"} 1\n"
        "mcp_requests_total{model=\"digits\",version=\"v1.0.0\",protocol=\"v2\",code=\"200\"} 3\n"
        "mcp_requests_total{model=\"digits\",version=\"v1.0.0\",protocol=\"v2\",code=\"400\"} 1\n"
        "mcp_requests_total{model=\"digits\",version=\"v1.0.0\",protocol=\"v1\",code=\"200\"} 1\n"
        "mcp_requests_total{model=\"digits\",version=\"v2.0.0\",protocol=\"simple\",code=\"200\"} 1\n"
        "# HELP mcp_inference_errors_total ";
    TU_CHECK_CONTAINS(t, expect);
    const char *errors =
        "# TYPE mcp_inference_errors_total counter\n"
        "mcp_inference_errors_total{model=\"digits\",reason=\"invalid_input\"} 2\n"
        "mcp_inference_errors_total{model=\"digits\",reason=\"queue_full\"} 1\n"
        "# HELP ";
    TU_CHECK_CONTAINS(t, errors);
    TU_CHECK_INT(count_prefix(t, "mcp_requests_total{"), 5);
    mcp_buf_free(&b);
    mcp_metrics_destroy(m);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static const char *latency_le[] = {"0.000025", "0.00005", "0.0001", "0.00025", "0.0005", "0.001",
                                   "0.0025",   "0.005",   "0.01",   "0.025",   "0.05",   "0.1",
                                   "0.25",     "0.5",     "1",      "2.5",     "5",      "10",
                                   "30",       "+Inf"};

static void test_histograms(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_metrics *m = mcp_metrics_create();
    TU_REQUIRE(m);
    /* queue: 100 us (on a bound: counts in le="0.0001") and 20 s (in le="30" only).
     * compute: 25 us exactly and 30 us. total: -5 (clamped to 0) and 1 s. */
    mcp_metrics_latency(m, "tiny", "v1.0.0", 100000, 25000, -5);
    mcp_metrics_latency(m, "tiny", "v1.0.0", 20000000000LL, 30000, 1000000000);
    mcp_metrics_batch(m, "tiny", "v1.0.0", 1);
    mcp_metrics_batch(m, "tiny", "v1.0.0", 3);
    mcp_metrics_batch(m, "tiny", "v1.0.0", 300);
    mcp_metrics_latency(NULL, "tiny", "v1.0.0", 1, 1, 1);
    mcp_metrics_batch(NULL, "tiny", "v1.0.0", 1);

    mcp_buf b = render(m);
    const char *t = (const char *)b.data;
    TU_REQUIRE(t && !b.failed);

    /* The whole queue histogram, cumulative. */
    mcp_buf want = {0};
    mcp_buf_puts(&want, "# TYPE mcp_queue_duration_seconds histogram\n");
    for (int i = 0; i < 20; i++)
        mcp_buf_printf(&want, "mcp_queue_duration_seconds_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"%s\"} %d\n",
                       latency_le[i], i < 2 ? 0 : i < 18 ? 1 : 2);
    mcp_buf_puts(&want, "mcp_queue_duration_seconds_sum{model=\"tiny\",version=\"v1.0.0\"} 20.0001\n"
                        "mcp_queue_duration_seconds_count{model=\"tiny\",version=\"v1.0.0\"} 2\n"
                        "# HELP mcp_compute_duration_seconds ");
    mcp_buf_append(&want, "", 1);
    TU_CHECK_CONTAINS(t, (const char *)want.data);
    mcp_buf_free(&want);

    CHECK_LINE(t, "mcp_compute_duration_seconds_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"0.000025\"} 1");
    CHECK_LINE(t, "mcp_compute_duration_seconds_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"0.00005\"} 2");
    CHECK_LINE(t, "mcp_compute_duration_seconds_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"+Inf\"} 2");
    CHECK_LINE(t, "mcp_compute_duration_seconds_sum{model=\"tiny\",version=\"v1.0.0\"} 0.000055");
    CHECK_LINE(t, "mcp_request_duration_seconds_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"0.000025\"} 1");
    CHECK_LINE(t, "mcp_request_duration_seconds_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"0.5\"} 1");
    CHECK_LINE(t, "mcp_request_duration_seconds_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"1\"} 2");
    CHECK_LINE(t, "mcp_request_duration_seconds_sum{model=\"tiny\",version=\"v1.0.0\"} 1");
    CHECK_LINE(t, "mcp_request_duration_seconds_count{model=\"tiny\",version=\"v1.0.0\"} 2");

    /* Batch sizes 1, 3 and 300. */
    static const char *batch_le[] = {"1", "2", "4", "8", "16", "32", "64", "128", "256", "+Inf"};
    static const int batch_cum[] = {1, 1, 2, 2, 2, 2, 2, 2, 2, 3};
    for (int i = 0; i < 10; i++) {
        char line[256];
        snprintf(line, sizeof line, "mcp_batch_size_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"%s\"} %d",
                 batch_le[i], batch_cum[i]);
        CHECK_LINE(t, line);
    }
    CHECK_LINE(t, "mcp_batch_size_sum{model=\"tiny\",version=\"v1.0.0\"} 304");
    CHECK_LINE(t, "mcp_batch_size_count{model=\"tiny\",version=\"v1.0.0\"} 3");
    TU_CHECK_INT(count_prefix(t, "mcp_batch_size_bucket{"), 10);
    TU_CHECK_INT(count_prefix(t, "mcp_queue_duration_seconds_bucket{"), 20);
    mcp_buf_free(&b);
    mcp_metrics_destroy(m);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_escaping(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_metrics *m = mcp_metrics_create();
    TU_REQUIRE(m);
    mcp_metrics_error(m, "a\"b\\c\nd", "caf\xC3\xA9");
    mcp_metrics_error(m, "bad\xFFutf\xC3", "\xED\xA0\x80"); /* stray byte, cut sequence, surrogate */
    mcp_buf b = render(m);
    const char *t = (const char *)b.data;
    TU_REQUIRE(t && !b.failed);
    CHECK_LINE(t, "mcp_inference_errors_total{model=\"a\\\"b\\\\c\\nd\",reason=\"caf\xC3\xA9\"} 1");
    CHECK_LINE(t, "mcp_inference_errors_total{model=\"bad\xEF\xBF\xBDutf\xEF\xBF\xBD\","
                  "reason=\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"} 1");
    mcp_buf_free(&b);
    mcp_metrics_destroy(m);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void sample(void *user, mcp_metrics_gauges *g)
{
    int *calls = user;
    (*calls)++;
    g->loaded_models = 2;
    g->model_memory_bytes = 123456789;
    g->queue_depth = 7;
}

static void test_gauges(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_metrics *m = mcp_metrics_create();
    TU_REQUIRE(m);
    int calls = 0;
    mcp_metrics_set_sampler(m, sample, &calls);
    mcp_metrics_inflight_add(m, 3);
    mcp_metrics_inflight_add(m, -1);
    mcp_buf b = render(m);
    const char *t = (const char *)b.data;
    TU_REQUIRE(t && !b.failed);
    TU_CHECK_INT(calls, 1);
    CHECK_LINE(t, "mcp_queue_depth 7");
    CHECK_LINE(t, "mcp_inflight_requests 2");
    CHECK_LINE(t, "mcp_models_loaded 2");
    CHECK_LINE(t, "mcp_model_memory_bytes 123456789");
    mcp_buf_free(&b);

    /* Removing the sampler brings back zeros. */
    mcp_metrics_set_sampler(m, NULL, NULL);
    b = render(m);
    t = (const char *)b.data;
    TU_CHECK_INT(calls, 1);
    CHECK_LINE(t, "mcp_models_loaded 0");
    mcp_buf_free(&b);
    mcp_metrics_destroy(m);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_overflow(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_metrics *m = mcp_metrics_create();
    TU_REQUIRE(m);
    /* 5000 distinct client-chosen names: the first 4096 label sets get their
     * own series, the rest share "_overflow". */
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof name, "model-%d", i);
        mcp_metrics_error(m, name, "not_found");
    }
    mcp_metrics_error(m, "model-7", "not_found"); /* a known one still counts as itself */
    mcp_buf b = render(m);
    const char *t = (const char *)b.data;
    TU_REQUIRE(t && !b.failed);
    TU_CHECK_INT(count_prefix(t, "mcp_inference_errors_total{"), 4097);
    CHECK_LINE(t, "mcp_inference_errors_total{model=\"_overflow\",reason=\"_overflow\"} 904");
    CHECK_LINE(t, "mcp_inference_errors_total{model=\"model-7\",reason=\"not_found\"} 2");
    mcp_buf_free(&b);
    mcp_metrics_destroy(m);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

/* ---- many threads at once ---- */

#define N_THREADS 8
#define N_ITERS 4000

typedef struct worker {
    mcp_metrics *m;
    int index;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    char own[32];
    snprintf(own, sizeof own, "own-%d", w->index);
    for (int i = 0; i < N_ITERS; i++) {
        /* Shared series (contended) and per-thread series created while
         * others read the table. */
        mcp_metrics_request(w->m, "shared", "v1.0.0", MCP_PROTOCOL_V2, i % 2 ? 200 : 503);
        mcp_metrics_latency(w->m, "shared", "v1.0.0", 1000, 2000, 3000);
        mcp_metrics_batch(w->m, "shared", "v1.0.0", 1 + i % 8);
        mcp_metrics_error(w->m, own, "timeout");
        mcp_metrics_inflight_add(w->m, 1);
        mcp_metrics_inflight_add(w->m, -1);
        if (i % 1000 == 0) {
            mcp_buf b = {0};
            mcp_metrics_render(w->m, &b); /* rendering while others record */
            mcp_buf_free(&b);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_metrics *m = mcp_metrics_create();
    TU_REQUIRE(m);
    pthread_t th[N_THREADS];
    worker w[N_THREADS];
    int started = 0;
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (worker){m, i};
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) break;
        started++;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    TU_CHECK_INT(started, N_THREADS);

    mcp_buf b = render(m);
    const char *t = (const char *)b.data;
    TU_REQUIRE(t && !b.failed);
    char line[256];
    int half = started * N_ITERS / 2;
    snprintf(line, sizeof line,
             "mcp_requests_total{model=\"shared\",version=\"v1.0.0\",protocol=\"v2\",code=\"200\"} %d", half);
    CHECK_LINE(t, line);
    snprintf(line, sizeof line,
             "mcp_requests_total{model=\"shared\",version=\"v1.0.0\",protocol=\"v2\",code=\"503\"} %d", half);
    CHECK_LINE(t, line);
    snprintf(line, sizeof line, "mcp_request_duration_seconds_count{model=\"shared\",version=\"v1.0.0\"} %d",
             started * N_ITERS);
    CHECK_LINE(t, line);
    /* 3 us each: exactly 0.000003 * count, summed in integer nanoseconds. */
    snprintf(line, sizeof line, "mcp_request_duration_seconds_sum{model=\"shared\",version=\"v1.0.0\"} 0.096");
    CHECK_LINE(t, line);
    /* Batch sizes 1..8 evenly: a quarter are <= 2, all are <= 8. */
    snprintf(line, sizeof line, "mcp_batch_size_bucket{model=\"shared\",version=\"v1.0.0\",le=\"2\"} %d",
             started * N_ITERS / 4);
    CHECK_LINE(t, line);
    snprintf(line, sizeof line, "mcp_batch_size_bucket{model=\"shared\",version=\"v1.0.0\",le=\"8\"} %d",
             started * N_ITERS);
    CHECK_LINE(t, line);
    for (int i = 0; i < started; i++) {
        snprintf(line, sizeof line, "mcp_inference_errors_total{model=\"own-%d\",reason=\"timeout\"} %d", i,
                 N_ITERS);
        CHECK_LINE(t, line);
    }
    TU_CHECK_INT(count_prefix(t, "mcp_inference_errors_total{"), started);
    CHECK_LINE(t, "mcp_inflight_requests 0");
    mcp_buf_free(&b);
    mcp_metrics_destroy(m);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

/* ---- promtool ---- */

/* Output with every family populated, odd label values and the overflow
 * series, checked by `promtool check metrics`. Returns 77 when promtool is
 * not installed (ctest reports a skip). */
static int run_promtool(void)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        fprintf(stderr, "promtool not installed (Debian package prometheus): skipped\n");
        return 77;
    }
    mcp_metrics *m = mcp_metrics_create();
    if (!m) return 1;
    int calls = 0;
    mcp_metrics_set_sampler(m, sample, &calls);
    mcp_metrics_inflight_add(m, 1);
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof name, "model-%d", i % 4200);
        mcp_metrics_request(m, name, "v1.0.0", (mcp_protocol)(i % MCP_PROTOCOL_COUNT), i % 3 ? 200 : 400);
    }
    mcp_metrics_error(m, "a\"b\\c\nd", "caf\xC3\xA9");
    mcp_metrics_error(m, "bad\xFFutf", "timeout");
    mcp_metrics_latency(m, "tiny", "v1.0.0", 100000, 25000, 20000000000LL);
    mcp_metrics_batch(m, "tiny", "v1.0.0", 300);
    mcp_metrics_batch(m, "tiny", NULL, 4);

    char dir[512], path[1024];
    int rc = 1;
    mcp_buf b = {0};
    mcp_metrics_render(m, &b);
    if (!b.failed && tu_make_temp_dir(dir, sizeof dir, "promtool") == 0) {
        tu_path(path, sizeof path, dir, "metrics.txt");
        FILE *f = fopen(path, "wb");
        if (f) {
            bool wrote = fwrite(b.data, 1, b.len, f) == b.len;
            if (fclose(f) == 0 && wrote) {
                char cmd[1200], out[4096];
                snprintf(cmd, sizeof cmd, "promtool check metrics < '%s' 2>&1", path);
                FILE *p = popen(cmd, "r");
                if (p) {
                    size_t n = fread(out, 1, sizeof out - 1, p);
                    out[n] = '\0';
                    int st = pclose(p);
                    rc = (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && n == 0) ? 0 : 1;
                    if (rc) fprintf(stderr, "promtool check metrics (status %d) said:\n%s\n", st, out);
                    else fprintf(stderr, "promtool check metrics: clean (%zu bytes checked)\n", b.len);
                }
            }
        }
        const char *names[] = {"metrics.txt"};
        tu_remove_dir(dir, names, 1);
    }
    mcp_buf_free(&b);
    mcp_metrics_destroy(m);
    return rc;
}

/* Body sizes, model loads and unloads, and the process's own gauges. */
static void test_bytes_loads_process(void)
{
    mcp_metrics *m = mcp_metrics_create();
    TU_REQUIRE(m);
    mcp_metrics_declare_model(m, "tiny", "v1.0.0");
    mcp_metrics_bytes(m, "tiny", "v1.0.0", 300, 64);
    mcp_metrics_bytes(m, "tiny", "v1.0.0", 5000000, 65);
    mcp_metrics_model_op(m, "tiny", false, true, 250000000);
    mcp_metrics_model_op(m, "tiny", false, false, 1000);
    mcp_metrics_model_op(m, "tiny", true, true, 20000000);
    mcp_buf b = render(m);
    const char *t = (const char *)b.data;
    TU_REQUIRE(t && !b.failed);
    CHECK_LINE(t, "mcp_request_bytes_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"256\"} 0");
    CHECK_LINE(t, "mcp_request_bytes_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"1024\"} 1");
    CHECK_LINE(t, "mcp_request_bytes_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"16777216\"} 2");
    CHECK_LINE(t, "mcp_request_bytes_sum{model=\"tiny\",version=\"v1.0.0\"} 5000300");
    CHECK_LINE(t, "mcp_response_bytes_bucket{model=\"tiny\",version=\"v1.0.0\",le=\"64\"} 1");
    CHECK_LINE(t, "mcp_response_bytes_count{model=\"tiny\",version=\"v1.0.0\"} 2");
    CHECK_LINE(t, "mcp_model_loads_total{model=\"tiny\",outcome=\"success\"} 1");
    CHECK_LINE(t, "mcp_model_loads_total{model=\"tiny\",outcome=\"failure\"} 1");
    CHECK_LINE(t, "mcp_model_unloads_total{model=\"tiny\",outcome=\"success\"} 1");
    CHECK_LINE(t, "mcp_model_unloads_total{model=\"tiny\",outcome=\"failure\"} 0");
    CHECK_LINE(t, "mcp_model_load_duration_seconds_bucket{model=\"tiny\",outcome=\"success\",le=\"0.25\"} 1");
    CHECK_LINE(t, "mcp_model_load_duration_seconds_sum{model=\"tiny\",outcome=\"success\"} 0.25");
    CHECK_LINE(t, "mcp_model_unload_duration_seconds_count{model=\"tiny\",outcome=\"success\"} 1");
    /* Declared at 0 for a ready model: every error reason the issue names. */
    const char *reasons[] = {"invalid_input", "timeout", "queue_full", "oom", "model_unavailable", "cancelled", "internal"};
    for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++) {
        char line[160];
        snprintf(line, sizeof line, "mcp_inference_errors_total{model=\"tiny\",reason=\"%s\"} 0", reasons[i]);
        CHECK_LINE(t, line);
    }
    TU_CHECK_STR(mcp_metrics_reason(MCP_STATUS_OUT_OF_MEMORY), "oom");
    TU_CHECK_STR(mcp_metrics_reason(MCP_STATUS_NOT_FOUND), "model_unavailable");
    TU_CHECK_STR(mcp_metrics_reason(MCP_STATUS_TOO_LARGE), "invalid_input");
    /* The process: at least this thread, some open files, a start in the past. */
    const char *p = strstr(t, "\nprocess_threads ");
    TU_REQUIRE(p);
    TU_CHECK(atoll(p + 17) >= 1);
    p = strstr(t, "\nprocess_open_fds ");
    TU_REQUIRE(p);
    TU_CHECK(atoll(p + 18) >= 3);
    p = strstr(t, "\nprocess_resident_memory_bytes ");
    TU_REQUIRE(p);
    TU_CHECK(atoll(p + 31) > 1000000);
    p = strstr(t, "\nprocess_start_time_seconds ");
    TU_REQUIRE(p);
    double start = atof(p + 28);
    TU_CHECK(start > 1.6e9 && start <= (double)time(NULL) + 1);
    mcp_buf_free(&b);
    mcp_metrics_destroy(m);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--promtool") == 0) return run_promtool();
    TU_RUN(test_bytes_loads_process);
    TU_RUN(test_empty);
    TU_RUN(test_counters);
    TU_RUN(test_histograms);
    TU_RUN(test_escaping);
    TU_RUN(test_gauges);
    TU_RUN(test_overflow);
    TU_RUN(test_threads);
    return tu_finish("test_metrics");
}
