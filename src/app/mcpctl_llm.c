/* mcpctl's language-model commands, on the LLM runtime's public API:
 *   generate MODEL.gguf --prompt TEXT ...   streams text to the terminal
 *   inspect MODEL.gguf                      architecture, sizes, types, tokenizer
 *   perf MODEL.gguf ...                     load time, prefill and decode tokens/s */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "llm/gguf.h"
#include "mcp/llm.h"
#include "mcpctl.h"

#define MAX_STOPS 8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int llm_fail(const char *msg)
{
    fprintf(stderr, "mcpctl: %s\n", msg);
    return 1;
}

/* A number option's value, checked. */
static bool num_arg(const char *opt, const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double d = v ? strtod(v, &end) : 0.0;
    if (!v || end == v || *end || errno || !(d >= lo && d <= hi)) {
        fprintf(stderr, "mcpctl: %s needs a number from %g to %g (got '%s')\n", opt, lo, hi, v ? v : "");
        return false;
    }
    *out = d;
    return true;
}

bool mcpctl_is_gguf(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char magic[4] = {0};
    bool yes = fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    fclose(f);
    return yes;
}

typedef struct gen_args {
    const char *model, *prompt;
    int max_tokens, threads;
    bool precise, raw, json, no_special;
    mcp_llm_sampling s;
    const char *stops[MAX_STOPS];
    int n_stops;
} gen_args;

static int parse_gen(int argc, char **argv, gen_args *a)
{
    memset(a, 0, sizeof *a);
    a->s = mcp_llm_sampling_default();
    a->s.temperature = 0.8f;
    a->s.top_k = 40;
    a->s.top_p = 0.95f;
    a->s.min_p = 0.05f;
    a->s.seed = (uint64_t)time(NULL);
    a->max_tokens = 128;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d = 0;
#define NUM(name, lo, hi, dst)                                \
    if (!strcmp(o, name)) {                                   \
        if (!num_arg(name, v, lo, hi, &d)) return 2;         \
        dst;                                                  \
        i++;                                                  \
        continue;                                             \
    }
        NUM("--max-tokens", 1, 1 << 20, a->max_tokens = (int)d)
        NUM("--temperature", 0, 100, a->s.temperature = (float)d)
        NUM("--top-k", 0, 1 << 20, a->s.top_k = (int)d)
        NUM("--top-p", 1e-6, 1, a->s.top_p = (float)d)
        NUM("--min-p", 0, 1, a->s.min_p = (float)d)
        NUM("--repeat-penalty", 1e-3, 10, a->s.repeat_penalty = (float)d)
        NUM("--presence-penalty", -2, 2, a->s.presence_penalty = (float)d)
        NUM("--frequency-penalty", -2, 2, a->s.frequency_penalty = (float)d)
        NUM("--seed", 0, 1.8e19, a->s.seed = (uint64_t)d)
        NUM("--threads", 0, 1024, a->threads = (int)d)
#undef NUM
        if (!strcmp(o, "--prompt") && v) {
            a->prompt = v;
            i++;
        } else if (!strcmp(o, "--stop") && v) {
            if (a->n_stops == MAX_STOPS) {
                fprintf(stderr, "mcpctl: at most %d --stop strings\n", MAX_STOPS);
                return 2;
            }
            if (!*v) {
                fprintf(stderr, "mcpctl: --stop needs a non-empty string\n");
                return 2;
            }
            a->stops[a->n_stops++] = v;
            i++;
        } else if (!strcmp(o, "--greedy")) {
            a->s.temperature = 0.0f;
        } else if (!strcmp(o, "--precise")) {
            a->precise = true;
        } else if (!strcmp(o, "--json")) {
            a->json = true;
        } else if (!strcmp(o, "--no-special")) {
            a->no_special = true;
        } else if (o[0] == '-' || a->model) {
            fprintf(stderr, "mcpctl: generate: unknown or incomplete argument '%s'\n", o);
            return 2;
        } else {
            a->model = o;
        }
    }
    if (!a->model || !a->prompt) {
        fprintf(stderr,
                "usage: mcpctl generate MODEL.gguf --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K]\n"
                "       [--top-p P] [--min-p P] [--repeat-penalty R] [--presence-penalty P] [--frequency-penalty F]\n"
                "       [--seed S] [--stop STR]... [--greedy] [--threads N] [--precise] [--no-special] [--json]\n");
        return 2;
    }
    return 0;
}

/* Streaming with stop strings: text is held back while it could still be
 * the start of a stop string; a stop string found ends the output before it. */
typedef struct stop_stream {
    mcp_buf held;
    const char *const *stops;
    int n_stops;
    bool json;
    mcp_buf all; /* --json: everything, printed at the end */
} stop_stream;

static void emit(stop_stream *st, const char *s, size_t n)
{
    if (!n) return;
    if (st->json) {
        mcp_buf_append(&st->all, s, n);
        return;
    }
    fwrite(s, 1, n, stdout);
    fflush(stdout);
}

/* Returns true when a stop string was reached. */
static bool stop_push(stop_stream *st, const char *text, size_t n)
{
    mcp_buf_append(&st->held, text, n);
    const char *h = (const char *)st->held.data;
    size_t len = st->held.len, cut = len, keep = 0;
    bool stopped = false;
    for (int i = 0; i < st->n_stops; i++) {
        const char *p = memmem(h, len, st->stops[i], strlen(st->stops[i]));
        if (p && (size_t)(p - h) < cut) {
            cut = (size_t)(p - h);
            stopped = true;
        }
    }
    if (stopped) {
        emit(st, h, cut);
        st->held.len = 0;
        return true;
    }
    /* Keep the longest tail that begins some stop string. */
    for (int i = 0; i < st->n_stops; i++) {
        size_t sl = strlen(st->stops[i]);
        for (size_t k = sl - 1; k > keep; k--)
            if (k <= len && !memcmp(h + len - k, st->stops[i], k)) {
                keep = k;
                break;
            }
    }
    emit(st, h, len - keep);
    memmove(st->held.data, h + len - keep, keep);
    st->held.len = keep;
    return false;
}

static int cmd_generate(int argc, char **argv)
{
    gen_args a;
    int pr = parse_gen(argc, argv, &a);
    if (pr) return pr;
    char err[1024];
    mcp_llm_model_options mo = mcp_llm_model_options_default();
    mo.threads = a.threads;
    mo.precise = a.precise;
    mcp_llm_model *m = NULL;
    double t0 = now_s();
    if (mcp_llm_model_load(a.model, &mo, &m, err, sizeof err)) return llm_fail(err);
    double t_load = now_s() - t0;
    mcp_llm_info info;
    mcp_llm_model_info(m, &info);
    size_t n_prompt = 0, plen = strlen(a.prompt);
    int rc = 0;
    int32_t *ids = NULL;
    mcp_llm_context *c = NULL;
    mcp_llm_sampler *smp = NULL;
    mcp_llm_detok *dt = NULL;
    stop_stream ss = {{0}, a.stops, a.n_stops, a.json, {0}};
    if (mcp_llm_tokenize(m, a.prompt, plen, true, !a.no_special, NULL, 0, &n_prompt, err, sizeof err)) {
        rc = llm_fail(err);
        goto done;
    }
    ids = mcp_malloc((n_prompt + 1) * sizeof *ids);
    if (!ids || mcp_llm_tokenize(m, a.prompt, plen, true, !a.no_special, ids, n_prompt, &n_prompt, err, sizeof err)) {
        rc = llm_fail(ids ? err : "out of memory");
        goto done;
    }
    if (n_prompt == 0) {
        rc = llm_fail("the prompt has no tokens");
        goto done;
    }
    mcp_llm_context_options co = mcp_llm_context_options_default();
    co.n_ctx = (int64_t)n_prompt + a.max_tokens;
    if (co.n_ctx > info.n_ctx_train) co.n_ctx = info.n_ctx_train;
    if ((int64_t)n_prompt >= co.n_ctx) {
        snprintf(err, sizeof err, "the prompt's %zu tokens fill the model's context of %lld", n_prompt,
                 (long long)info.n_ctx_train);
        rc = llm_fail(err);
        goto done;
    }
    if (mcp_llm_context_create(m, &co, &c, err, sizeof err) || mcp_llm_sampler_create(m, &a.s, &smp, err, sizeof err)) {
        rc = llm_fail(err);
        goto done;
    }
    dt = mcp_llm_detok_create(m, false);
    if (!dt) {
        rc = llm_fail("out of memory");
        goto done;
    }
    double t1 = now_s();
    /* The prompt in steps of the context's batch size. */
    for (size_t at = 0; at < n_prompt;) {
        int n = (int)(n_prompt - at > (size_t)co.max_batch_tokens ? (size_t)co.max_batch_tokens : n_prompt - at);
        mcp_llm_batch b = {n, ids + at, NULL, NULL};
        if (mcp_llm_decode(c, &b, err, sizeof err)) {
            rc = llm_fail(err);
            goto done;
        }
        at += (size_t)n;
    }
    for (size_t i = 0; i < n_prompt; i++) mcp_llm_sampler_accept(smp, ids[i]);
    double t2 = now_s();
    int n_gen = 0;
    const char *finish = "length";
    char piece[512];
    while (n_gen < a.max_tokens) {
        mcp_llm_sample_result r;
        mcp_llm_sample(smp, mcp_llm_logits(c, 0), &r);
        if (mcp_llm_token_is_eog(m, r.id)) {
            finish = "stop";
            break;
        }
        n_gen++;
        mcp_llm_sampler_accept(smp, r.id);
        int n = mcp_llm_detok_push(dt, r.id, piece, sizeof piece);
        if (n > 0 && stop_push(&ss, piece, (size_t)n)) {
            finish = "stop";
            break;
        }
        if (n_gen == a.max_tokens || mcp_llm_seq_len(c, 0) + 1 >= co.n_ctx) break;
        mcp_llm_batch one = {1, &r.id, NULL, NULL};
        if (mcp_llm_decode(c, &one, err, sizeof err)) {
            rc = llm_fail(err);
            goto done;
        }
    }
    if (strcmp(finish, "stop") != 0) {
        int n = mcp_llm_detok_flush(dt, piece, sizeof piece);
        if (n > 0) stop_push(&ss, piece, (size_t)n);
        emit(&ss, (const char *)ss.held.data, ss.held.len);
    }
    double t3 = now_s();
    const double pp = (double)n_prompt / (t2 - t1), tg = n_gen > 1 ? (double)(n_gen - 1) / (t3 - t2) : 0.0;
    if (a.json) {
        mcp_buf out = {0};
        mcp_buf_puts(&out, "{\"text\":");
        mcp_buf_append(&ss.all, "", 1);
        ss.all.len--;
        mcp_buf_json_string(&out, ss.all.data ? (const char *)ss.all.data : "");
        mcp_buf_printf(&out,
                       ",\"finish_reason\":\"%s\",\"prompt_tokens\":%zu,\"completion_tokens\":%d,"
                       "\"load_ms\":%.1f,\"prompt_tokens_per_s\":%.1f,\"tokens_per_s\":%.1f}\n",
                       finish, n_prompt, n_gen, t_load * 1e3, pp, tg);
        fwrite(out.data, 1, out.len, stdout);
        mcp_buf_free(&out);
    } else {
        printf("\n");
        fprintf(stderr, "mcpctl: %zu prompt tokens (%.1f tokens/s), %d generated (%.1f tokens/s), %s, load %.1f ms\n",
                n_prompt, pp, n_gen, tg, finish, t_load * 1e3);
    }
done:
    mcp_buf_free(&ss.held);
    mcp_buf_free(&ss.all);
    mcp_llm_detok_free(dt);
    mcp_llm_sampler_free(smp);
    mcp_llm_context_free(c);
    mcp_free(ids);
    mcp_llm_model_free(m);
    return rc;
}

static int cmd_inspect_gguf(const char *path)
{
    char err[1024];
    mcp_err e = {err, sizeof err};
    mcp_gguf *g = NULL;
    if (mcp_gguf_open(path, &g, &e)) return llm_fail(err);
    printf("model: %s\n", path);
    printf("gguf: version %u, %llu metadata keys, %llu tensors, alignment %u\n", g->version, (unsigned long long)g->n_kv,
           (unsigned long long)g->n_tensors, g->alignment);
    /* Tensor types by count and bytes. */
    uint64_t count[64] = {0}, bytes[64] = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].type < 64) {
            count[g->tensors[i].type]++;
            bytes[g->tensors[i].type] += g->tensors[i].nbytes;
        }
    printf("tensor types:\n");
    for (int t = 0; t < 64; t++)
        if (count[t]) printf("  %-6s %5llu tensors  %12llu bytes\n", mcp_ggml_type_name((uint32_t)t), (unsigned long long)count[t],
                             (unsigned long long)bytes[t]);
    mcp_gguf_close(g);
    mcp_llm_model *m = NULL;
    if (mcp_llm_model_load(path, NULL, &m, err, sizeof err)) {
        printf("runtime: cannot run it: %s\n", err);
        return 1;
    }
    mcp_llm_info i;
    mcp_llm_model_info(m, &i);
    printf("architecture: %s%s%s\n", i.arch, *i.name ? "  name: " : "", i.name);
    printf("parameters: %lld (%.1f M), weights %llu bytes (%.2f bits per parameter)\n", (long long)i.n_params,
           (double)i.n_params / 1e6, (unsigned long long)i.weight_bytes,
           i.n_params ? 8.0 * (double)i.weight_bytes / (double)i.n_params : 0.0);
    printf("layers: %lld  embedding: %lld  feed-forward: %lld\n", (long long)i.n_layer, (long long)i.n_embd, (long long)i.n_ff);
    printf("attention: %lld heads, %lld KV heads, head size %lld\n", (long long)i.n_head, (long long)i.n_head_kv,
           (long long)i.head_dim);
    if (i.n_rot)
        printf("rope: %lld dims, base %g, %s, frequency scale %g\n", (long long)i.n_rot, (double)i.rope_base,
               i.rope_neox ? "neox (halves)" : "normal (pairs)", (double)i.rope_freq_scale);
    else printf("positions: learned\n");
    printf("norm epsilon: %g\n", (double)i.norm_eps);
    printf("context: %lld tokens (training)\n", (long long)i.n_ctx_train);
    printf("tokenizer: %s, %lld tokens", i.tokenizer, (long long)i.n_vocab);
    char piece[256];
    if (i.bos >= 0 && mcp_llm_token_piece(m, i.bos, true, piece, sizeof piece) >= 0) printf(", bos %d %s", i.bos, piece);
    if (i.eos >= 0 && mcp_llm_token_piece(m, i.eos, true, piece, sizeof piece) >= 0) printf(", eos %d %s", i.eos, piece);
    printf("\nkernels: %s, %d threads\n", i.isa, i.threads);
    mcp_llm_model_free(m);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmd_perf_gguf(int argc, char **argv)
{
    const char *path = NULL;
    int pp = 512, tg = 128, threads = 0, reps = 3;
    bool json = false, precise = false;
    for (int i = 0; i < argc; i++) {
        double d = 0;
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--prompt-tokens")) {
            if (!num_arg("--prompt-tokens", v, 1, 65536, &d)) return 2;
            pp = (int)d, i++;
        } else if (!strcmp(argv[i], "--gen-tokens")) {
            if (!num_arg("--gen-tokens", v, 1, 65536, &d)) return 2;
            tg = (int)d, i++;
        } else if (!strcmp(argv[i], "--threads")) {
            if (!num_arg("--threads", v, 0, 1024, &d)) return 2;
            threads = (int)d, i++;
        } else if (!strcmp(argv[i], "--repeat")) {
            if (!num_arg("--repeat", v, 1, 100, &d)) return 2;
            reps = (int)d, i++;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--precise")) {
            precise = true;
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            fprintf(stderr, "mcpctl: perf: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: mcpctl perf MODEL.gguf [--prompt-tokens 512] [--gen-tokens 128] [--threads N] [--repeat 3] [--precise] [--json]\n");
        return 2;
    }
    char err[1024];
    mcp_llm_model_options mo = mcp_llm_model_options_default();
    mo.threads = threads;
    mo.precise = precise;
    mcp_llm_model *m = NULL;
    double t0 = now_s();
    if (mcp_llm_model_load(path, &mo, &m, err, sizeof err)) return llm_fail(err);
    double load_ms = (now_s() - t0) * 1e3;
    mcp_llm_info info;
    mcp_llm_model_info(m, &info);
    mcp_llm_context_options co = mcp_llm_context_options_default();
    co.n_ctx = pp > tg ? pp : tg;
    co.max_batch_tokens = pp;
    if (co.n_ctx > info.n_ctx_train) {
        mcp_llm_model_free(m);
        return llm_fail("--prompt-tokens or --gen-tokens exceed the model's context");
    }
    mcp_llm_context *c = NULL;
    if (mcp_llm_context_create(m, &co, &c, err, sizeof err)) {
        mcp_llm_model_free(m);
        return llm_fail(err);
    }
    int32_t *toks = mcp_malloc((size_t)pp * sizeof *toks);
    double *pp_s = mcp_calloc((size_t)reps, sizeof *pp_s), *tg_s = mcp_calloc((size_t)reps, sizeof *tg_s);
    int rc = 0;
    if (!toks || !pp_s || !tg_s) rc = llm_fail("out of memory");
    uint64_t x = 0x4D435032303236ull;
    for (int i = 0; rc == 0 && i < pp; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((x >> 33) % (uint64_t)info.n_vocab);
    }
    /* One untimed pass first: the weights' pages come in from the file. */
    for (int r = -1; rc == 0 && r < reps; r++) {
        mcp_llm_seq_truncate(c, 0, 0);
        mcp_llm_batch b = {r < 0 ? (pp < 32 ? pp : 32) : pp, toks, NULL, NULL};
        double a0 = now_s();
        if (mcp_llm_decode(c, &b, err, sizeof err)) {
            rc = llm_fail(err);
            break;
        }
        const double prefill_s = now_s() - a0;
        /* Decoding starts from an empty sequence, as llama-bench's tg does. */
        mcp_llm_seq_truncate(c, 0, 0);
        int32_t t = toks[0];
        if (r < 0) {
            for (int i = 0; i < 4 && rc == 0; i++) {
                mcp_llm_batch one = {1, &t, NULL, NULL};
                if (mcp_llm_decode(c, &one, err, sizeof err)) rc = llm_fail(err);
            }
            continue;
        }
        const double a1 = now_s();
        for (int i = 0; i < tg && rc == 0; i++) {
            mcp_llm_batch one = {1, &t, NULL, NULL};
            if (mcp_llm_decode(c, &one, err, sizeof err)) rc = llm_fail(err);
            t = (t + 7919) % (int32_t)info.n_vocab;
        }
        double a2 = now_s();
        pp_s[r] = pp / (prefill_s > 0 ? prefill_s : 1e-9);
        tg_s[r] = tg / (a2 - a1);
    }
    if (rc == 0) {
        qsort(pp_s, (size_t)reps, sizeof *pp_s, cmp_double);
        qsort(tg_s, (size_t)reps, sizeof *tg_s, cmp_double);
        const double pp_med = pp_s[reps / 2], tg_med = tg_s[reps / 2];
        if (json)
            printf("{\"model\":\"%s\",\"threads\":%d,\"isa\":\"%s\",\"load_ms\":%.2f,\"prompt_tokens\":%d,\"gen_tokens\":%d,"
                   "\"prefill_tokens_per_s\":%.2f,\"prefill_min\":%.2f,\"prefill_max\":%.2f,"
                   "\"decode_tokens_per_s\":%.2f,\"decode_min\":%.2f,\"decode_max\":%.2f,\"weight_bytes\":%llu,"
                   "\"decode_bytes\":%llu}\n",
                   path, info.threads, info.isa, load_ms, pp, tg, pp_med, pp_s[0], pp_s[reps - 1], tg_med, tg_s[0],
                   tg_s[reps - 1], (unsigned long long)info.weight_bytes, (unsigned long long)info.decode_bytes);
        else
            printf("%s: load %.1f ms, %d threads (%s)\n  prefill %d tokens: %.1f tokens/s (%.1f-%.1f)\n"
                   "  decode %d tokens: %.1f tokens/s (%.1f-%.1f), %.2f GB/s of weights\n",
                   path, load_ms, info.threads, info.isa, pp, pp_med, pp_s[0], pp_s[reps - 1], tg, tg_med, tg_s[0],
                   tg_s[reps - 1], tg_med * (double)info.decode_bytes / 1e9);
    }
    mcp_free(toks);
    mcp_free(pp_s);
    mcp_free(tg_s);
    mcp_llm_context_free(c);
    mcp_llm_model_free(m);
    return rc;
}

int mcpctl_llm_main(const char *cmd, int argc, char **argv, bool *handled)
{
    *handled = true;
    if (!strcmp(cmd, "generate")) {
        /* --server URL (or --server=URL): stream from a server instead. */
        for (int i = 0; i < argc; i++) {
            const char *url = !strcmp(argv[i], "--server") && i + 1 < argc ? argv[i + 1]
                              : !strncmp(argv[i], "--server=", 9)         ? argv[i] + 9
                                                                          : NULL;
            if (!url) continue;
            int skip = argv[i][8] == '=' ? 1 : 2;
            for (int k = i; k + skip < argc; k++) argv[k] = argv[k + skip];
            return mcpctl_generate_remote(url, argc - skip, argv);
        }
        return cmd_generate(argc, argv);
    }
    if (!strcmp(cmd, "inspect") && argc >= 1 && mcpctl_is_gguf(argv[0])) return cmd_inspect_gguf(argv[0]);
    if (!strcmp(cmd, "perf")) {
        for (int i = 0; i < argc; i++)
            if (argv[i][0] != '-' && mcpctl_is_gguf(argv[i])) return cmd_perf_gguf(argc, argv);
    }
    *handled = false;
    return 0;
}
