/* Test driver of the LLM runtime, through the public API only.
 *
 *   llm_run MODEL.gguf OUT_DIR --tokens 1,2,3 [--precise] [--kv f16|f32] [--greedy N] [--threads N]
 *
 * Writes OUT_DIR/logits.f32 (the logits of every prompt position, from one
 * prefill batch, rows of n_vocab floats) and OUT_DIR/greedy.txt (N tokens
 * chosen greedily after the prompt, one decode each), then prints a JSON
 * line with two self-checks of the cache:
 *   "cache_max_rel": the prompt fed one token at a time (each step reading
 *     the cache) against the one-batch logits;
 *   "batch_max_rel": three sequences of different lengths decoded together
 *     in one batch (interleaved), against each decoded alone.
 * Each is max |a - b| / max |b| over every logit compared. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/llm.h"

static char err[1024];

static void die(const char *what)
{
    fprintf(stderr, "llm_run: %s: %s\n", what, err);
    exit(1);
}

static double max_rel(const float *a, const float *b, size_t n, double *den)
{
    double num = 0.0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        *den = fmax(*den, fabs((double)b[i]));
    }
    return num;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: llm_run MODEL OUT_DIR --tokens a,b,c [--precise] [--kv f16|f32] [--greedy N] [--threads N]\n");
        return 2;
    }
    mcp_llm_model_options mo = mcp_llm_model_options_default();
    mcp_llm_context_options co = mcp_llm_context_options_default();
    co.kv_type = MCP_LLM_KV_F32;
    int32_t prompt[512];
    int n_prompt = 0, greedy = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc) {
            for (char *p = argv[++i]; *p && n_prompt < 512;) {
                prompt[n_prompt++] = (int32_t)strtol(p, &p, 10);
                if (*p == ',') p++;
            }
        } else if (!strcmp(argv[i], "--precise")) {
            mo.precise = 1;
        } else if (!strcmp(argv[i], "--kv") && i + 1 < argc) {
            co.kv_type = !strcmp(argv[++i], "f16") ? MCP_LLM_KV_F16 : MCP_LLM_KV_F32;
        } else if (!strcmp(argv[i], "--greedy") && i + 1 < argc) {
            greedy = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            mo.threads = atoi(argv[++i]);
        } else {
            fprintf(stderr, "llm_run: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (n_prompt < 3) {
        fprintf(stderr, "llm_run: --tokens needs at least 3 ids\n");
        return 2;
    }
    mcp_llm_model *m = NULL;
    if (mcp_llm_model_load(argv[1], &mo, &m, err, sizeof err)) die("load");
    mcp_llm_info info;
    mcp_llm_model_info(m, &info);
    const size_t nv = (size_t)info.n_vocab;
    co.max_seqs = 4;
    co.n_ctx = n_prompt + greedy + 8;
    mcp_llm_context *c = NULL;
    if (mcp_llm_context_create(m, &co, &c, err, sizeof err)) die("context");

    /* One batch, every position's logits. */
    int8_t want[512];
    memset(want, 1, sizeof want);
    mcp_llm_batch b = {n_prompt, prompt, NULL, want};
    if (mcp_llm_decode(c, &b, err, sizeof err)) die("prefill");
    float *full = malloc(nv * (size_t)n_prompt * sizeof *full);
    for (int i = 0; i < n_prompt; i++) memcpy(full + nv * (size_t)i, mcp_llm_logits(c, i), nv * sizeof *full);
    char path[4096];
    snprintf(path, sizeof path, "%s/logits.f32", argv[2]);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(full, sizeof *full, nv * (size_t)n_prompt, f) != nv * (size_t)n_prompt) {
        fprintf(stderr, "llm_run: cannot write %s\n", path);
        return 1;
    }
    fclose(f);

    /* Greedy continuation, one token a step through the cache. */
    snprintf(path, sizeof path, "%s/greedy.txt", argv[2]);
    f = fopen(path, "w");
    mcp_llm_sampling sp = mcp_llm_sampling_default();
    mcp_llm_sampler *smp = NULL;
    if (mcp_llm_sampler_create(m, &sp, &smp, err, sizeof err)) die("sampler");
    mcp_llm_sample_result r;
    mcp_llm_sample(smp, mcp_llm_logits(c, n_prompt - 1), &r);
    for (int i = 0; i < greedy; i++) {
        fprintf(f, "%d\n", r.id);
        mcp_llm_batch one = {1, &r.id, NULL, NULL};
        if (i + 1 < greedy) {
            if (mcp_llm_decode(c, &one, err, sizeof err)) die("decode");
            mcp_llm_sample(smp, mcp_llm_logits(c, 0), &r);
        }
    }
    fclose(f);

    /* The cache: token by token in sequence 1 against the batch. */
    double cache_num = 0.0, cache_den = 0.0;
    const int32_t one_seq = 1;
    for (int i = 0; i < n_prompt; i++) {
        mcp_llm_batch one = {1, &prompt[i], &one_seq, NULL};
        if (mcp_llm_decode(c, &one, err, sizeof err)) die("stepwise");
        cache_num = fmax(cache_num, max_rel(mcp_llm_logits(c, 0), full + nv * (size_t)i, nv, &cache_den));
    }
    /* A batch of sequences 1..3 of different lengths (what is left of the
     * prompt after 0, 1 and 2 tokens), interleaved, after clearing them. */
    for (int s = 1; s <= 3; s++) mcp_llm_seq_truncate(c, s, 0);
    int32_t toks[1536], seqs[1536];
    int8_t lg[1536];
    int n = 0;
    for (int i = 0; i < n_prompt; i++)
        for (int s = 1; s <= 3; s++)
            if (i < n_prompt - (s - 1)) {
                toks[n] = prompt[i];
                seqs[n] = s;
                lg[n] = 1;
                n++;
            }
    double batch_num = 0.0, batch_den = 0.0;
    co.max_batch_tokens = n;
    mcp_llm_context *c2 = NULL;
    if (mcp_llm_context_create(m, &co, &c2, err, sizeof err)) die("context 2");
    mcp_llm_batch mixed = {n, toks, seqs, lg};
    if (mcp_llm_decode(c2, &mixed, err, sizeof err)) die("mixed batch");
    /* Sequence s holds prompt[0 .. n_prompt - s + 1): its logits at position i
     * must be the one-batch logits at i (the same prefix). */
    for (int j = 0, pos[4] = {0, 0, 0, 0}; j < n; j++) {
        int s = seqs[j], i = pos[s]++;
        batch_num = fmax(batch_num, max_rel(mcp_llm_logits(c2, j), full + nv * (size_t)i, nv, &batch_den));
    }
    int64_t used, total;
    mcp_llm_kv_usage(c2, &used, &total);
    printf("{\"n_vocab\": %zu, \"cache_max_rel\": %.3g, \"batch_max_rel\": %.3g, \"kv_blocks_used\": %lld, \"isa\": \"%s\"}\n",
           nv, cache_den > 0 ? cache_num / cache_den : 0.0, batch_den > 0 ? batch_num / batch_den : 0.0, (long long)used,
           info.isa);
    free(full);
    mcp_llm_sampler_free(smp);
    mcp_llm_context_free(c);
    mcp_llm_context_free(c2);
    mcp_llm_model_free(m);
    return 0;
}
