/*
 * mcpctl's generation client: `mcpctl generate --server URL MODEL ...`
 * streams a completion from a server, and `mcpctl bench --generate`
 * measures streams at a ladder of concurrency. Both speak the OpenAI
 * completions API with stream: true (POST /v1/completions, Server-Sent
 * Events), so the same client measures this server and others that speak
 * it (llama.cpp's llama-server).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app/mcpctl.h"
#include "base/base.h"

#define GEN_MAX_CONCURRENCY 256
#define GEN_MAX_LEVELS 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- one streamed completion ---- */

typedef struct stream_state {
    mcp_buf pending;       /* bytes of an event not yet complete */
    mcp_buf body;          /* a non-200 answer's body */
    long code;
    bool print;            /* write text to stdout as it comes */
    bool done, failed;
    char error[512];
    mcp_buf text;
    char finish[32];
    int64_t prompt_tokens, completion_tokens; /* from usage; -1 when absent */
    int64_t chunks;        /* chunks that carried text */
    double t0, t_first, t_last;
    double *itl;           /* gaps between text chunks, seconds (bench) */
    int64_t n_itl, cap_itl;
} stream_state;

static void on_chunk(stream_state *s, const char *data, size_t len)
{
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        s->done = true;
        return;
    }
    json_error_t jerr;
    json_t *o = json_loadb(data, len, 0, &jerr);
    if (!o) {
        snprintf(s->error, sizeof s->error, "a stream event is not JSON: %s", jerr.text);
        s->failed = true;
        return;
    }
    json_t *e = json_object_get(o, "error");
    if (e) {
        json_t *m = json_is_object(e) ? json_object_get(e, "message") : e;
        snprintf(s->error, sizeof s->error, "%s", json_is_string(m) ? json_string_value(m) : "the server sent an error");
        s->failed = true;
    }
    json_t *u = json_object_get(o, "usage");
    if (json_is_object(u)) {
        s->prompt_tokens = json_integer_value(json_object_get(u, "prompt_tokens"));
        s->completion_tokens = json_integer_value(json_object_get(u, "completion_tokens"));
    }
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
    json_t *t = json_object_get(ch, "text");
    if (!t) t = json_object_get(json_object_get(ch, "delta"), "content");
    if (json_is_string(t) && json_string_length(t)) {
        double now = now_s();
        if (s->chunks == 0) s->t_first = now;
        else {
            if (s->n_itl == s->cap_itl) {
                int64_t cap = s->cap_itl ? 2 * s->cap_itl : 256;
                double *p = mcp_realloc(s->itl, (size_t)cap * sizeof *p);
                if (p) s->itl = p, s->cap_itl = cap;
            }
            if (s->n_itl < s->cap_itl) s->itl[s->n_itl++] = now - s->t_last;
        }
        s->t_last = now;
        s->chunks++;
        mcp_buf_append(&s->text, json_string_value(t), json_string_length(t));
        if (s->print) {
            fwrite(json_string_value(t), 1, json_string_length(t), stdout);
            fflush(stdout);
        }
    }
    json_t *fr = json_object_get(ch, "finish_reason");
    if (json_is_string(fr)) snprintf(s->finish, sizeof s->finish, "%s", json_string_value(fr));
    json_decref(o);
}

static size_t on_bytes(char *data, size_t size, size_t n, void *user)
{
    stream_state *s = user;
    size_t len = size * n;
    mcp_buf_append(&s->pending, data, len);
    if (s->pending.failed) return 0;
    /* Events end with a blank line; each "data:" line is one payload. */
    for (;;) {
        const char *p = (const char *)s->pending.data;
        size_t plen = s->pending.len, end = 0, sep = 0;
        for (size_t i = 0; i + 1 < plen; i++) {
            if (p[i] == '\n' && p[i + 1] == '\n') { end = i, sep = 2; break; }
            if (i + 3 < plen && !memcmp(p + i, "\r\n\r\n", 4)) { end = i, sep = 4; break; }
        }
        if (!sep) break;
        for (size_t a = 0; a < end;) {
            size_t b = a;
            while (b < end && p[b] != '\n') b++;
            size_t l = b - a;
            if (l && p[a + l - 1] == '\r') l--;
            if (l >= 5 && !memcmp(p + a, "data:", 5)) {
                size_t off = a + 5 + (l > 5 && p[a + 5] == ' ');
                on_chunk(s, p + off, a + l - off);
            }
            a = b + 1;
        }
        memmove(s->pending.data, p + end + sep, plen - end - sep);
        s->pending.len = plen - end - sep;
    }
    return len;
}

/* The body of an error answer (not an event stream). */
static size_t on_error_bytes(char *data, size_t size, size_t n, void *user)
{
    stream_state *s = user;
    mcp_buf_append(&s->body, data, size * n);
    return size * n;
}

static size_t on_write(char *data, size_t size, size_t n, void *user)
{
    stream_state *s = user;
    return s->code == 200 ? on_bytes(data, size, n, user) : on_error_bytes(data, size, n, user);
}

typedef struct stream_client {
    CURL *curl;
    char url[1100];
    struct curl_slist *headers;
    char curl_err[CURL_ERROR_SIZE];
} stream_client;

static size_t on_header(char *data, size_t size, size_t n, void *user)
{
    stream_state *s = user;
    if (size * n > 9 && !memcmp(data, "HTTP/", 5)) {
        const char *sp = memchr(data, ' ', size * n);
        if (sp) s->code = strtol(sp + 1, NULL, 10);
    }
    return size * n;
}

static mcp_status client_init(stream_client *c, const char *server, const char *tenant, mcp_err *err)
{
    memset(c, 0, sizeof *c);
    size_t n = strlen(server);
    while (n && server[n - 1] == '/') n--;
    if (strncmp(server, "http://", 7) != 0 && strncmp(server, "https://", 8) != 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "server URL '%s' must start with http:// or https://", server);
    snprintf(c->url, sizeof c->url, "%.*s/v1/completions", (int)(n < 1000 ? n : 1000), server);
    c->curl = curl_easy_init();
    if (!c->curl) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot create an HTTP client");
    c->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (tenant) {
        char h[200];
        snprintf(h, sizeof h, "tenant: %s", tenant);
        c->headers = curl_slist_append(c->headers, h);
    }
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, 600000L);
    curl_easy_setopt(c->curl, CURLOPT_URL, c->url);
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->curl_err);
    curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
    return MCP_STATUS_OK;
}

static void client_free(stream_client *c)
{
    if (c->curl) curl_easy_cleanup(c->curl);
    curl_slist_free_all(c->headers);
}

/* Posts body and reads the stream into s. OK when the stream ended with
 * [DONE] and no error event; else err says what went wrong. */
static mcp_status client_stream(stream_client *c, const char *body, stream_state *s, mcp_err *err)
{
    s->code = 0;
    s->prompt_tokens = s->completion_tokens = -1;
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, s);
    s->t0 = now_s();
    CURLcode cc = curl_easy_perform(c->curl);
    if (cc != CURLE_OK && !(s->code && s->code != 200))
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "%s: %s", c->url, c->curl_err[0] ? c->curl_err : curl_easy_strerror(cc));
    if (s->code != 200) {
        json_error_t jerr;
        json_t *o = s->body.len ? json_loadb((const char *)s->body.data, s->body.len, 0, &jerr) : NULL;
        json_t *e = json_object_get(o, "error");
        json_t *m = json_is_object(e) ? json_object_get(e, "message") : e;
        mcp_err_set(err, s->code == 404 ? MCP_STATUS_NOT_FOUND : MCP_STATUS_INVALID_ARGUMENT, "HTTP %ld: %s", s->code,
                    json_is_string(m) ? json_string_value(m) : "no message");
        json_decref(o);
        return s->code == 404 ? MCP_STATUS_NOT_FOUND : s->code == 429 ? MCP_STATUS_RESOURCE_EXHAUSTED : MCP_STATUS_INVALID_ARGUMENT;
    }
    if (s->failed) return mcp_err_set(err, MCP_STATUS_INTERNAL, "%s", s->error);
    if (!s->done) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "the stream ended without data: [DONE]");
    return MCP_STATUS_OK;
}

static void state_reset(stream_state *s)
{
    mcp_buf_reset(&s->pending);
    mcp_buf_reset(&s->body);
    mcp_buf_reset(&s->text);
    s->done = s->failed = false;
    s->error[0] = s->finish[0] = '\0';
    s->chunks = 0;
    s->n_itl = 0;
}

static void state_free(stream_state *s)
{
    mcp_buf_free(&s->pending);
    mcp_buf_free(&s->body);
    mcp_buf_free(&s->text);
    mcp_free(s->itl);
}

/* ---- options shared by generate --server and bench --generate ---- */

typedef struct gen_opts {
    const char *server, *model, *prompt, *tenant;
    json_t *params; /* sampling keys the user gave, as the API names them */
    bool json, ignore_eos;
} gen_opts;

static bool num(const char *name, const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    double d = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !(d >= lo && d <= hi)) {
        fprintf(stderr, "mcpctl: %s wants a number from %g to %g, got '%s'\n", name, lo, hi, v ? v : "");
        return false;
    }
    *out = d;
    return true;
}

/* One sampling option into o->params; 1 taken (with its value), 0 not one, -1 bad. */
static int sampling_opt(gen_opts *o, const char *arg, const char *val)
{
    static const struct {
        const char *flag, *key;
        double lo, hi;
        bool integer;
    } opts[] = {
        {"--max-tokens", "max_tokens", 1, 1 << 20, true},  {"--temperature", "temperature", 0, 2, false},
        {"--top-k", "top_k", 0, 1 << 20, true},             {"--top-p", "top_p", 1e-6, 1, false},
        {"--min-p", "min_p", 0, 1, false},                  {"--repeat-penalty", "repetition_penalty", 0.01, 10, false},
        {"--presence-penalty", "presence_penalty", -2, 2, false},
        {"--frequency-penalty", "frequency_penalty", -2, 2, false},
        {"--seed", "seed", 0, 9e15, true},
    };
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        if (strcmp(arg, opts[i].flag) != 0) continue;
        double d;
        if (!num(arg, val, opts[i].lo, opts[i].hi, &d)) return -1;
        json_object_set_new(o->params, opts[i].key, opts[i].integer ? json_integer((json_int_t)d) : json_real(d));
        return 1;
    }
    if (!strcmp(arg, "--greedy")) {
        json_object_set_new(o->params, "temperature", json_real(0));
        return 2; /* no value */
    }
    if (!strcmp(arg, "--stop") && val) {
        json_t *stop = json_object_get(o->params, "stop");
        if (!stop) json_object_set_new(o->params, "stop", stop = json_array());
        json_array_append_new(stop, json_string(val));
        return 1;
    }
    return 0;
}

static char *request_body(const gen_opts *o, const char *prompt)
{
    json_t *b = json_deep_copy(o->params);
    json_object_set_new(b, "model", json_string(o->model));
    json_object_set_new(b, "prompt", json_string(prompt));
    json_object_set_new(b, "stream", json_true());
    json_t *so = json_object();
    json_object_set_new(so, "include_usage", json_true());
    json_object_set_new(b, "stream_options", so);
    if (o->ignore_eos) json_object_set_new(b, "ignore_eos", json_true());
    char *s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

/* ---- mcpctl generate --server URL MODEL --prompt TEXT ---- */

int mcpctl_generate_remote(const char *server, int argc, char **argv)
{
    gen_opts o = {.server = server, .params = json_object()};
    int rc = 0;
    for (int i = 0; i < argc && rc == 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int k = sampling_opt(&o, a, v);
        if (k < 0) rc = 2;
        else if (k == 1) i++;
        else if (k == 2) continue;
        else if (!strcmp(a, "--prompt") && v) o.prompt = argv[++i];
        else if (!strcmp(a, "--tenant") && v) o.tenant = argv[++i];
        else if (!strcmp(a, "--json")) o.json = true;
        else if (!strcmp(a, "--ignore-eos")) o.ignore_eos = true;
        else if (a[0] != '-' && !o.model) o.model = a;
        else {
            fprintf(stderr, "mcpctl: generate --server: unknown or incomplete argument '%s'\n", a);
            rc = 2;
        }
    }
    if (rc == 0 && (!o.model || !o.prompt)) {
        fprintf(stderr, "usage: mcpctl generate --server URL MODEL --prompt TEXT [--max-tokens N] [--temperature T]\n"
                        "       [--top-k K] [--top-p P] [--min-p P] [--seed S] [--stop STR]... [--greedy] [--tenant NAME]\n"
                        "       [--json]\n");
        rc = 2;
    }
    if (rc) {
        json_decref(o.params);
        return rc;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char msg[1024];
    mcp_err err = {msg, sizeof msg};
    stream_client c = {0};
    stream_state s = {.print = !o.json};
    char *body = request_body(&o, o.prompt);
    mcp_status st = body ? client_init(&c, server, o.tenant, &err) : mcp_err_set(&err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == MCP_STATUS_OK) st = client_stream(&c, body, &s, &err);
    if (!o.json && s.text.len) printf("\n");
    if (st != MCP_STATUS_OK) {
        fprintf(stderr, "mcpctl: generate %s: %s\n", o.model, msg);
        rc = 1;
    } else if (o.json) {
        json_t *r = json_object();
        json_object_set_new(r, "text", json_stringn(s.text.data ? (const char *)s.text.data : "", s.text.len));
        json_object_set_new(r, "finish_reason", json_string(s.finish));
        json_object_set_new(r, "prompt_tokens", json_integer(s.prompt_tokens));
        json_object_set_new(r, "completion_tokens", json_integer(s.completion_tokens));
        json_object_set_new(r, "ttft_ms", json_real(s.chunks ? (s.t_first - s.t0) * 1e3 : 0));
        json_object_set_new(r, "total_ms", json_real((now_s() - s.t0) * 1e3));
        char *t = json_dumps(r, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (t) printf("%s\n", t);
        free(t);
        json_decref(r);
    } else {
        fprintf(stderr, "[%s: %lld prompt tokens, %lld generated, first token after %.1f ms]\n", s.finish,
                (long long)s.prompt_tokens, (long long)s.completion_tokens, s.chunks ? (s.t_first - s.t0) * 1e3 : 0.0);
    }
    free(body);
    client_free(&c);
    state_free(&s);
    json_decref(o.params);
    curl_global_cleanup();
    return rc;
}

/* ---- mcpctl bench --generate ---- */

typedef struct bench_gen {
    gen_opts o;
    int levels[GEN_MAX_LEVELS], n_levels;
    int rounds; /* requests per stream and level */
    unsigned nonce; /* per run: no run reuses another's prompts either */
} bench_gen;

typedef struct stream_job {
    const bench_gen *b;
    int index, level;
    double *ttft; int64_t n_ttft;  /* one per request */
    double *itl; int64_t n_itl;
    int64_t tokens, errors, requests;
    double decode_rate_sum; /* tokens after the first over the time they took, summed over requests */
    int64_t n_decode;
    char first_error[300];
    double t_end;
} stream_job;

static void *stream_main(void *arg)
{
    stream_job *j = arg;
    const bench_gen *b = j->b;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    stream_client c = {0};
    stream_state s = {0};
    if (client_init(&c, b->o.server, b->o.tenant, &err) != MCP_STATUS_OK) {
        j->errors = j->requests = b->rounds;
        snprintf(j->first_error, sizeof j->first_error, "%.290s", msg);
        client_free(&c);
        return NULL;
    }
    j->ttft = mcp_calloc((size_t)b->rounds, sizeof *j->ttft);
    for (int r = 0; r < b->rounds; r++) {
        /* Each request its own prompt head: no engine reuses another's prefix. */
        char *prompt = mcp_malloc(strlen(b->o.prompt) + 64);
        if (!prompt) break;
        /* What varies comes first: no two requests share even a first block. */
        sprintf(prompt, "%d-%d-%d-%08x: %s", r, j->index, j->level, b->nonce, b->o.prompt);
        char *body = request_body(&b->o, prompt);
        mcp_free(prompt);
        state_reset(&s);
        mcp_status st = body ? client_stream(&c, body, &s, &err) : MCP_STATUS_OUT_OF_MEMORY;
        free(body);
        j->requests++;
        if (st != MCP_STATUS_OK || s.chunks == 0) {
            if (!j->errors++) snprintf(j->first_error, sizeof j->first_error, "%.290s", st != MCP_STATUS_OK ? msg : "no text");
            continue;
        }
        j->ttft[j->n_ttft++] = s.t_first - s.t0;
        j->tokens += s.chunks;
        if (s.chunks > 1 && s.t_last > s.t_first) {
            j->decode_rate_sum += (double)(s.chunks - 1) / (s.t_last - s.t_first);
            j->n_decode++;
        }
        double *grown = mcp_realloc(j->itl, (size_t)(j->n_itl + s.n_itl + 1) * sizeof *grown);
        if (grown) {
            j->itl = grown;
            memcpy(j->itl + j->n_itl, s.itl, (size_t)s.n_itl * sizeof *grown);
            j->n_itl += s.n_itl;
        }
    }
    j->t_end = now_s();
    state_free(&s);
    client_free(&c);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int64_t n, double p)
{
    if (n == 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int64_t i = (int64_t)ceil(p / 100.0 * (double)n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int mcpctl_bench_generate(const char *server, int argc, char **argv)
{
    bench_gen b = {.o = {.server = server, .params = json_object()}, .rounds = 2};
    b.levels[0] = 1, b.levels[1] = 8, b.levels[2] = 32;
    b.n_levels = 3;
    int rc = 0;
    for (int i = 0; i < argc && rc == 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int k = sampling_opt(&b.o, a, v);
        double d = 0;
        if (k < 0) rc = 2;
        else if (k == 1) i++;
        else if (k == 2) continue;
        else if (!strcmp(a, "--generate")) continue;
        else if (!strcmp(a, "--prompt") && v) b.o.prompt = argv[++i];
        else if (!strcmp(a, "--tenant") && v) b.o.tenant = argv[++i];
        else if (!strcmp(a, "--json")) b.o.json = true;
        else if (!strcmp(a, "--ignore-eos")) b.o.ignore_eos = true;
        else if (!strcmp(a, "--rounds") && v) {
            if (!num(a, argv[++i], 1, 1000, &d)) rc = 2;
            b.rounds = (int)d;
        } else if (!strcmp(a, "--concurrency") && v) {
            b.n_levels = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", argv[++i]);
            for (char *t = strtok(buf, ","); t && rc == 0; t = strtok(NULL, ",")) {
                if (b.n_levels == GEN_MAX_LEVELS || !num("--concurrency", t, 1, GEN_MAX_CONCURRENCY, &d)) rc = 2;
                else b.levels[b.n_levels++] = (int)d;
            }
            if (b.n_levels == 0) rc = 2;
        } else if (a[0] != '-' && !b.o.model) b.o.model = a;
        else {
            fprintf(stderr, "mcpctl: bench --generate: unknown or incomplete argument '%s'\n", a);
            rc = 2;
        }
    }
    if (rc == 0 && !b.o.model) {
        fprintf(stderr, "usage: mcpctl bench --generate MODEL [--server URL] [--concurrency 1,8,32] [--rounds N]\n"
                        "       [--prompt TEXT] [--max-tokens N] [--temperature T] [--ignore-eos] [--tenant NAME] [--json]\n");
        rc = 2;
    }
    if (!b.o.prompt)
        b.o.prompt = "The quick brown fox jumps over the lazy dog while the farmer watches from the porch and "
                     "wonders about the weather, the harvest, the price of grain and the long road to town.";
    if (!json_object_get(b.o.params, "max_tokens")) json_object_set_new(b.o.params, "max_tokens", json_integer(64));
    if (rc) {
        json_decref(b.o.params);
        return rc;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    b.nonce = (unsigned)(ts.tv_nsec ^ (ts.tv_sec * 2654435761u) ^ (unsigned)getpid() * 40503u);
    json_t *rows = json_array();
    if (!b.o.json)
        printf("%-6s %8s %8s %12s %12s %10s %10s %10s %10s %7s\n", "conc", "requests", "tokens", "tok/s (all)",
               "decode tok/s", "ttft p50", "ttft p99", "itl p50", "itl p99", "errors");
    for (int l = 0; l < b.n_levels && rc == 0; l++) {
        int n = b.levels[l];
        stream_job *jobs = mcp_calloc((size_t)n, sizeof *jobs);
        pthread_t *th = mcp_calloc((size_t)n, sizeof *th);
        if (!jobs || !th) {
            rc = 1;
            break;
        }
        double t0 = now_s();
        int started = 0;
        for (int i = 0; i < n; i++) {
            jobs[i] = (stream_job){.b = &b, .index = i, .level = l};
            if (pthread_create(&th[i], NULL, stream_main, &jobs[i]) == 0) started++;
            else break;
        }
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        double t_end = t0;
        int64_t tokens = 0, errors = 0, requests = 0, n_ttft = 0, n_itl = 0, n_decode = 0;
        double rate_sum = 0;
        for (int i = 0; i < started; i++) {
            tokens += jobs[i].tokens, errors += jobs[i].errors, requests += jobs[i].requests;
            rate_sum += jobs[i].decode_rate_sum, n_decode += jobs[i].n_decode;
            n_ttft += jobs[i].n_ttft, n_itl += jobs[i].n_itl;
            if (jobs[i].t_end > t_end) t_end = jobs[i].t_end;
        }
        double *ttft = mcp_calloc((size_t)n_ttft + 1, sizeof *ttft), *itl = mcp_calloc((size_t)n_itl + 1, sizeof *itl);
        int64_t a = 0, c = 0;
        for (int i = 0; i < started && ttft && itl; i++) {
            memcpy(ttft + a, jobs[i].ttft, (size_t)jobs[i].n_ttft * sizeof *ttft), a += jobs[i].n_ttft;
            memcpy(itl + c, jobs[i].itl, (size_t)jobs[i].n_itl * sizeof *itl), c += jobs[i].n_itl;
        }
        double wall = t_end - t0, all = wall > 0 ? (double)tokens / wall : 0;
        /* Decode alone: every stream at the mean rate of its requests'
         * tokens after the first (what the streams get while all decode). */
        double decode = n_decode ? (double)n * rate_sum / (double)n_decode : 0;
        double t50 = pct(ttft, a, 50) * 1e3, t99 = pct(ttft, a, 99) * 1e3, i50 = pct(itl, c, 50) * 1e3,
               i99 = pct(itl, c, 99) * 1e3;
        if (b.o.json) {
            json_t *r = json_object();
            json_object_set_new(r, "concurrency", json_integer(n));
            json_object_set_new(r, "requests", json_integer(requests));
            json_object_set_new(r, "errors", json_integer(errors));
            json_object_set_new(r, "tokens", json_integer(tokens));
            json_object_set_new(r, "seconds", json_real(wall));
            json_object_set_new(r, "tokens_per_s", json_real(all));
            json_object_set_new(r, "decode_tokens_per_s", json_real(decode));
            json_object_set_new(r, "ttft_p50_ms", json_real(t50));
            json_object_set_new(r, "ttft_p99_ms", json_real(t99));
            json_object_set_new(r, "itl_p50_ms", json_real(i50));
            json_object_set_new(r, "itl_p99_ms", json_real(i99));
            json_array_append_new(rows, r);
        } else {
            printf("%-6d %8lld %8lld %12.1f %12.1f %9.1fms %9.1fms %9.2fms %9.2fms %7lld\n", n, (long long)requests,
                   (long long)tokens, all, decode, t50, t99, i50, i99, (long long)errors);
            fflush(stdout);
        }
        for (int i = 0; i < started; i++) {
            if (jobs[i].errors && errors == jobs[i].errors)
                fprintf(stderr, "mcpctl: bench --generate %s: concurrency %d: %lld of %lld requests failed; first: %s\n",
                        b.o.model, n, (long long)errors, (long long)requests, jobs[i].first_error);
            mcp_free(jobs[i].ttft);
            mcp_free(jobs[i].itl);
        }
        if (errors == requests) rc = 1;
        mcp_free(ttft);
        mcp_free(itl);
        mcp_free(jobs);
        mcp_free(th);
    }
    if (b.o.json) {
        json_t *root = json_object();
        json_object_set_new(root, "model", json_string(b.o.model));
        json_object_set_new(root, "server", json_string(server));
        json_object_set_new(root, "levels", rows);
        char *t = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (t) printf("%s\n", t);
        free(t);
        json_decref(root);
    } else {
        json_decref(rows);
    }
    json_decref(b.o.params);
    curl_global_cleanup();
    return rc;
}
