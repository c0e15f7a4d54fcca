/*
 * mcpctl perf: load time, latency and peak memory of one model.
 *
 *   mcpctl perf MODEL.onnx [--batch N] [--threads N] [--warmup N]
 *               [--iterations N] [--backend auto|ref|dnnl] [--profile] [--fuse-quantized-sums] [--bf16] [--adaptive-threads] [--json]
 *
 * Inputs are random, generated once with a fixed seed: a dynamic first
 * dimension becomes the batch size, other dynamic dimensions 1 (an input of
 * unknown rank becomes a vector of batch elements). Floats are uniform in
 * [-1, 1), integers small non-negative (0..3), bools random, strings "a".
 * Sequence inputs get one such tensor.
 *
 * Load time is session creation from the file (read, import, shape
 * inference, kernel resolution, planning). Latency is measured per run
 * (mcp__session_run only; freeing the outputs happens outside the clock).
 * Peak RSS is getrusage's ru_maxrss for the whole process, so it includes
 * the model, the inputs and the runs.
 *
 * --profile times every node of the timed runs (the session's profile
 * option) and prints the time per op type and backend and the slowest
 * nodes, per run; with --json they are the "ops" array and the "nodes"
 * array (every node, slowest first).
 *
 * --fuse-quantized-sums sets the session option of that name (QDQ models:
 * residual sums inside the int8 convolutions; see mcp.h). --bf16 sets the
 * session option bf16 (float32 convolutions and matrix products in
 * bfloat16 where the CPU has it); the output says which precision applied.
 * --adaptive-threads sets the session option of that name (fewer threads
 * while other work takes some of the cores), as mcp2026-server does.
 *
 * --json prints exactly one JSON object on stdout. Every failure prints one
 * line on stderr and exits non-zero.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "app/mcpctl.h"
#include "engine/engine.h"

typedef struct perf_args {
    const char *model;
    int batch;
    int threads;
    int warmup;
    int iterations;
    const char *backend; /* NULL: session default (MCP_BACKEND or auto) */
    bool json;
    bool profile;
    bool fuse_sums;
    bool bf16;
    bool adaptive;
    bool no_passes; /* --no-graph-passes */
} perf_args;

static const char perf_usage[] =
    "usage: mcpctl perf MODEL.onnx [--batch N] [--threads N] [--warmup N] [--iterations N] "
    "[--backend auto|ref|dnnl] [--profile] [--fuse-quantized-sums] [--bf16] [--adaptive-threads] [--no-graph-passes] [--json]";

static int perf_fail(const char *what, const char *detail)
{
    fprintf(stderr, "mcpctl perf: %s%s\n", what, detail ? detail : "");
    return 1;
}

/* Parses a whole decimal integer in [lo, hi]. */
static bool parse_int(const char *s, int lo, int hi, int *out)
{
    if (!s || !*s) return false;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

/* Fills *a from argv. Returns 0 to go on, 1 after printing help, -1 after
 * printing one line about a bad argument. */
static int parse_args(int argc, char **argv, perf_args *a)
{
    *a = (perf_args){.batch = 1, .threads = 0, .warmup = 3, .iterations = 20};
    static const struct {
        const char *name;
        int lo;
        size_t off;
    } int_flags[] = {
        {"--batch", 1, offsetof(perf_args, batch)},
        {"--threads", 0, offsetof(perf_args, threads)},
        {"--warmup", 0, offsetof(perf_args, warmup)},
        {"--iterations", 1, offsetof(perf_args, iterations)},
    };
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
            continue;
        }
        if (strcmp(arg, "--profile") == 0) {
            a->profile = true;
            continue;
        }
        if (strcmp(arg, "--fuse-quantized-sums") == 0) {
            a->fuse_sums = true;
            continue;
        }
        if (strcmp(arg, "--bf16") == 0) {
            a->bf16 = true;
            continue;
        }
        if (strcmp(arg, "--adaptive-threads") == 0) {
            a->adaptive = true;
            continue;
        }
        if (strcmp(arg, "--no-graph-passes") == 0) { /* the graph as written: no folding, no fusion */
            a->no_passes = true;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            printf("%s\n", perf_usage);
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0) {
            if (a->model) {
                perf_fail("more than one model given: ", arg);
                return -1;
            }
            a->model = arg;
            continue;
        }
        /* --flag VALUE or --flag=VALUE */
        char name[64];
        const char *eq = strchr(arg, '=');
        size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, arg, n);
        name[n] = '\0';
        const char *val = NULL;
        bool known = strcmp(name, "--backend") == 0;
        for (size_t k = 0; k < sizeof int_flags / sizeof int_flags[0]; k++)
            if (strcmp(name, int_flags[k].name) == 0) known = true;
        if (!known) {
            perf_fail("unknown option ", arg);
            return -1;
        }
        if (eq) val = eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else {
            perf_fail("missing value after ", name);
            return -1;
        }
        if (strcmp(name, "--backend") == 0) {
            if (strcmp(val, "auto") != 0 && strcmp(val, "ref") != 0 && strcmp(val, "dnnl") != 0) {
                char m[200];
                snprintf(m, sizeof m, "unknown backend '%.100s' (use auto, ref or dnnl)", val);
                perf_fail(m, NULL);
                return -1;
            }
            a->backend = val;
            continue;
        }
        for (size_t k = 0; k < sizeof int_flags / sizeof int_flags[0]; k++) {
            if (strcmp(name, int_flags[k].name) != 0) continue;
            int *dst = (int *)((char *)a + int_flags[k].off);
            if (!parse_int(val, int_flags[k].lo, 1000000, dst)) {
                char m[200];
                snprintf(m, sizeof m, "%s wants an integer from %d to 1000000, got '%.60s'", name, int_flags[k].lo, val);
                perf_fail(m, NULL);
                return -1;
            }
        }
    }
    if (!a->model) {
        perf_fail("no model given; ", perf_usage);
        return -1;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* splitmix64: a small deterministic generator. */
static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A tensor for graph-input type t, filled with random data. */
static mcp_status make_tensor(const mcp_type *t, int batch, uint64_t *rng, mcp_tensor *out, mcp_err *err)
{
    int64_t dims[MCP_MAX_RANK];
    int rank = t->rank;
    if (rank < 0) {
        rank = 1;
        dims[0] = batch;
    } else {
        for (int d = 0; d < rank; d++) dims[d] = t->dims[d] >= 0 ? t->dims[d] : (d == 0 ? batch : 1);
    }
    mcp_dtype dt = t->dtype == MCP_DTYPE_UNDEFINED ? MCP_DTYPE_FLOAT : t->dtype;
    mcp_status st = mcp_tensor_alloc(out, dt, rank, dims, err);
    if (st != MCP_STATUS_OK) return st;
    int64_t n = mcp_tensor_numel(out);
    if (dt == MCP_DTYPE_STRING) {
        for (int64_t i = 0; i < n; i++)
            if (mcp_tensor_set_string(out, i, "a", 1) != MCP_STATUS_OK) {
                mcp_tensor_release(out);
                return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            }
        return MCP_STATUS_OK;
    }
    if (!mcp_dtype_is_numeric(dt)) {
        mcp_tensor_release(out);
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "cannot make random data of dtype %s", mcp_dtype_name(dt));
    }
    if (dt == MCP_DTYPE_FLOAT) {
        float *p = out->data;
        for (int64_t i = 0; i < n; i++) p[i] = (float)((double)(next_rand(rng) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    } else if (mcp_dtype_is_float(dt)) {
        for (int64_t i = 0; i < n; i++) mcp_tensor_set_f64(out, i, (double)(next_rand(rng) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    } else if (dt == MCP_DTYPE_BOOL) {
        for (int64_t i = 0; i < n; i++) mcp_tensor_set_i64(out, i, (int64_t)(next_rand(rng) >> 63));
    } else {
        for (int64_t i = 0; i < n; i++) mcp_tensor_set_i64(out, i, (int64_t)(next_rand(rng) >> 62));
    }
    return MCP_STATUS_OK;
}

static mcp_status make_input(const mcp_graph_value *gv, int batch, uint64_t *rng, mcp_value *v, mcp_err *err)
{
    mcp_status st;
    if (gv->type.kind == MCP_VALUE_SEQUENCE) {
        v->kind = MCP_VALUE_SEQUENCE;
        v->elem_dtype = gv->type.dtype;
        mcp_tensor t;
        st = make_tensor(&gv->type, batch, rng, &t, err);
        if (st == MCP_STATUS_OK) {
            st = mcp_value_seq_push_move(v, &t, err);
            if (st != MCP_STATUS_OK) mcp_tensor_release(&t);
        }
    } else {
        v->kind = MCP_VALUE_TENSOR;
        st = make_tensor(&gv->type, batch, rng, &v->tensor, err);
    }
    if (st != MCP_STATUS_OK) mcp_err_prefix(err, "input '%s'", gv->name);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile q of sorted v[0..n) with linear interpolation (numpy's default). */
static double quantile(const double *v, int n, double q)
{
    double pos = q * (double)(n - 1);
    int lo = (int)pos;
    if (lo >= n - 1) return v[n - 1];
    double frac = pos - (double)lo;
    return v[lo] + (v[lo + 1] - v[lo]) * frac;
}

static double peak_rss_mb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux reports kilobytes */
}

/* Resident set size now, from /proc/self/statm (0 when unreadable). */
static double current_rss_mb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (!f) return 0.0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

typedef struct op_total {
    const char *op_type, *backend;
    int nodes;
    double ms;
} op_total;

static int by_ms_desc(const void *a, const void *b)
{
    double x = ((const op_total *)a)->ms, y = ((const op_total *)b)->ms;
    return (x < y) - (x > y);
}

static int node_by_ms_desc(const void *a, const void *b)
{
    double x = ((const mcp_node_profile *)a)->total_ms, y = ((const mcp_node_profile *)b)->total_ms;
    return (x < y) - (x > y);
}

/* Prints the session's profile per run: op types (with their backend) by
 * time, then the slowest nodes. In JSON, the "ops" and "nodes" members. */
static void print_profile(const mcp_session *s, int runs, bool json)
{
    enum { TOP_NODES = 15 };
    int n = mcp_session_profile(s, NULL, 0);
    mcp_node_profile *np = n > 0 ? mcp_calloc((size_t)n, sizeof *np) : NULL;
    op_total *ops = n > 0 ? mcp_calloc((size_t)n, sizeof *ops) : NULL;
    if (!np || !ops) {
        mcp_free(np);
        mcp_free(ops);
        if (json) printf(", \"ops\": [], \"nodes\": []");
        return;
    }
    mcp_session_profile(s, np, n);
    int n_ops = 0;
    double total = 0;
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < n_ops && (strcmp(ops[k].op_type, np[i].op_type) != 0 || strcmp(ops[k].backend, np[i].backend) != 0)) k++;
        if (k == n_ops) ops[n_ops++] = (op_total){np[i].op_type, np[i].backend, 0, 0};
        ops[k].nodes++;
        ops[k].ms += np[i].total_ms / runs;
        total += np[i].total_ms / runs;
    }
    qsort(ops, (size_t)n_ops, sizeof *ops, by_ms_desc);
    qsort(np, (size_t)n, sizeof *np, node_by_ms_desc);
    int top = n < TOP_NODES ? n : TOP_NODES;
    if (json) {
        mcp_buf b = {0};
        mcp_buf_puts(&b, ", \"ops\": [");
        for (int k = 0; k < n_ops; k++) {
            mcp_buf_puts(&b, k ? ", {\"op_type\": " : "{\"op_type\": ");
            mcp_buf_json_string(&b, ops[k].op_type);
            mcp_buf_puts(&b, ", \"backend\": ");
            mcp_buf_json_string(&b, ops[k].backend);
            mcp_buf_printf(&b, ", \"nodes\": %d, \"ms\": %.6g}", ops[k].nodes, ops[k].ms);
        }
        mcp_buf_puts(&b, "], \"nodes\": [");
        for (int i = 0; i < n; i++) {
            mcp_buf_puts(&b, i ? ", {\"name\": " : "{\"name\": ");
            mcp_buf_json_string(&b, np[i].name);
            mcp_buf_puts(&b, ", \"op_type\": ");
            mcp_buf_json_string(&b, np[i].op_type);
            mcp_buf_puts(&b, ", \"backend\": ");
            mcp_buf_json_string(&b, np[i].backend);
            mcp_buf_printf(&b, ", \"ms\": %.6g}", np[i].total_ms / runs);
        }
        mcp_buf_puts(&b, "]");
        if (b.failed) printf(", \"ops\": [], \"nodes\": []");
        else printf("%.*s", (int)b.len, (const char *)b.data);
        mcp_buf_free(&b);
    } else {
        printf("profile, per run (%d nodes, %.3f ms in nodes):\n", n, total);
        printf("  %-24s %-8s %6s %10s %7s\n", "op type", "backend", "nodes", "ms", "share");
        for (int k = 0; k < n_ops; k++)
            printf("  %-24s %-8s %6d %10.3f %6.1f%%\n", ops[k].op_type, ops[k].backend, ops[k].nodes, ops[k].ms,
                   total > 0 ? 100.0 * ops[k].ms / total : 0.0);
        printf("slowest nodes:\n");
        for (int i = 0; i < top; i++) {
            /* Long names (paths from the exporter) keep their distinctive tail. */
            size_t len = strlen(np[i].name);
            const char *tail = len > 44 ? np[i].name + len - 41 : np[i].name;
            printf("  %s%-*s %-20s %-6s %10.3f ms\n", len > 44 ? "..." : "", len > 44 ? 41 : 44, tail, np[i].op_type,
                   np[i].backend, np[i].total_ms / runs);
        }
    }
    mcp_free(np);
    mcp_free(ops);
}

int mcpctl_cmd_perf(int argc, char **argv)
{
    perf_args a;
    int pr = parse_args(argc, argv, &a);
    if (pr != 0) return pr > 0 ? 0 : 2;

    char msg[2048];
    mcp_err err = {msg, sizeof msg};
    msg[0] = '\0';
    mcp_session_options o = mcp_session_options_default();
    o.threads = a.threads;
    o.backend = a.backend;
    o.profile = a.profile;
    o.fuse_quantized_sums = a.fuse_sums;
    o.bf16 = a.bf16;
    o.adaptive_threads = a.adaptive;
    o.no_graph_passes = a.no_passes;
    mcp_session *s = NULL;
    double t0 = now_ms();
    mcp_status st = mcp_session_create_from_file(a.model, &o, &s, msg, sizeof msg);
    double load_ms = now_ms() - t0;
    if (st != MCP_STATUS_OK) return perf_fail(msg, NULL);
    if (mcp_session_load_note(s)) fprintf(stderr, "mcpctl perf: warning: %s\n", mcp_session_load_note(s));
    double loaded_rss = current_rss_mb();

    const mcp_graph *g = s->graph;
    mcp_value **ins = mcp_calloc((size_t)g->n_inputs + 1, sizeof *ins);
    mcp_value **outs = mcp_calloc((size_t)g->n_outputs + 1, sizeof *outs);
    double *lat = mcp_calloc((size_t)a.iterations, sizeof *lat);
    int rc = 0;
    if (!ins || !outs || !lat) rc = perf_fail("out of memory", NULL);
    uint64_t rng = 0x4D435032303236ull; /* fixed seed: runs are comparable */
    for (int i = 0; rc == 0 && i < g->n_inputs; i++) {
        ins[i] = mcp_value_new();
        if (!ins[i]) rc = perf_fail("out of memory", NULL);
        else if (make_input(&g->values[g->inputs[i]], a.batch, &rng, ins[i], &err) != MCP_STATUS_OK) rc = perf_fail(msg, NULL);
    }
    for (int i = 0; rc == 0 && i < g->n_outputs; i++)
        if (!(outs[i] = mcp_value_new())) rc = perf_fail("out of memory", NULL);

    /* Outputs are kept between runs: the engine copies into tensors of the
     * right shape, as a serving loop reusing its buffers would. */
    int64_t allocs = 0;
    for (int it = 0; rc == 0 && it < a.warmup + a.iterations; it++) {
        if (it == a.warmup) {
            allocs = mcp_alloc_total_count();
            mcp_session_profile_reset(s);
        }
        double r0 = now_ms();
        st = mcp__session_run(s, ins, outs, &err);
        double dt = now_ms() - r0;
        if (st != MCP_STATUS_OK) {
            rc = perf_fail(msg, NULL);
            break;
        }
        if (it >= a.warmup) lat[it - a.warmup] = dt;
    }
    double allocs_per_run = a.iterations > 0 ? (double)(mcp_alloc_total_count() - allocs) / a.iterations : 0.0;

    if (rc == 0) {
        double sum = 0;
        for (int i = 0; i < a.iterations; i++) sum += lat[i];
        qsort(lat, (size_t)a.iterations, sizeof *lat, cmp_double);
        double median = quantile(lat, a.iterations, 0.5), p90 = quantile(lat, a.iterations, 0.9);
        double mean = sum / a.iterations, rss = peak_rss_mb();
        if (a.json) {
            printf("{\"load_ms\": %.6g, \"median_ms\": %.6g, \"p90_ms\": %.6g, \"peak_rss_mb\": %.6g, "
                   "\"min_ms\": %.6g, \"mean_ms\": %.6g, \"max_ms\": %.6g, \"iterations\": %d, \"warmup\": %d, "
                   "\"batch\": %d, \"threads\": %d, \"backend\": \"%s\", \"precision\": \"%s\", \"allocs_per_run\": %.6g, \"loaded_rss_mb\": %.6g",
                   load_ms, median, p90, rss, lat[0], mean, lat[a.iterations - 1], a.iterations, a.warmup, a.batch,
                   s->threads, s->backend, mcp_session_precision(s), allocs_per_run, loaded_rss);
            if (a.profile) print_profile(s, a.iterations, true);
            printf("}\n");
        } else {
            printf("model: %s\n", a.model);
            printf("backend: %s  precision: %s  threads: %d  batch: %d  warmup: %d  iterations: %d\n", s->backend,
                   mcp_session_precision(s), s->threads, a.batch, a.warmup, a.iterations);
            printf("load: %.3f ms\n", load_ms);
            printf("latency: median %.3f ms  p90 %.3f ms  min %.3f ms  mean %.3f ms  max %.3f ms\n", median, p90,
                   lat[0], mean, lat[a.iterations - 1]);
            printf("peak RSS: %.1f MB (%.1f MB once loaded)\n", rss, loaded_rss);
            printf("heap allocations per run: %.1f\n", allocs_per_run);
            if (a.profile) print_profile(s, a.iterations, false);
        }
        fflush(stdout);
    }

    for (int i = 0; ins && i < g->n_inputs; i++) mcp_value_free(ins[i]);
    for (int i = 0; outs && i < g->n_outputs; i++) mcp_value_free(outs[i]);
    mcp_free(ins);
    mcp_free(outs);
    mcp_free(lat);
    mcp_session_destroy(s);
    return rc;
}
