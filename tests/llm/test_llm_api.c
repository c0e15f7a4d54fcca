/* The LLM runtime's public API: bad files, bad batches and bad options are
 * refused with a message that names what was wrong and change nothing; the
 * KV budget and the context length hold; the sampler's choices follow its
 * options and its seed. Usage: test_llm_api MODELS_DIR (from
 * tools/make_llm_test_models.py). */
#include <math.h>
#include <string.h>

#include "../unit/test_util.h"
#include "gguf_build.h"
#include "mcp/llm.h"

static char msg[1024];
static char dir[256];
static const char *models;

static mcp_llm_model *load(const char *name, int precise)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", models, name);
    mcp_llm_model_options o = mcp_llm_model_options_default();
    o.precise = precise;
    mcp_llm_model *m = NULL;
    if (mcp_llm_model_load(path, &o, &m, msg, sizeof msg) != MCP_STATUS_OK) {
        fprintf(stderr, "load %s: %s\n", path, msg);
        return NULL;
    }
    return m;
}

/* Writes b to dir/name and loads it; returns the status, message in msg. */
static mcp_status load_bytes(const mcp_buf *b, const char *name)
{
    char path[512];
    tu_path(path, sizeof path, dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return MCP_STATUS_IO_ERROR;
    fwrite(b->data, 1, b->len, f);
    fclose(f);
    mcp_llm_model *m = NULL;
    mcp_status st = mcp_llm_model_load(path, NULL, &m, msg, sizeof msg);
    mcp_llm_model_free(m);
    unlink(path);
    return st;
}

static void llama_hparams(mcp_buf *b, const char *arch)
{
    char key[96];
    gb_kv_str(b, "general.architecture", arch);
#define K(s) (snprintf(key, sizeof key, "%s." s, arch), key)
    gb_kv_u32(b, K("embedding_length"), 64);
    gb_kv_u32(b, K("block_count"), 1);
    gb_kv_u32(b, K("attention.head_count"), 4);
    gb_kv_u32(b, K("feed_forward_length"), 128);
#undef K
}

static void test_bad_files(void)
{
    mcp_llm_model *m = NULL;
    TU_CHECK_STATUS(mcp_llm_model_load("/nonexistent.gguf", NULL, &m, msg, sizeof msg), MCP_STATUS_NOT_FOUND, msg);
    TU_CHECK(m == NULL);
    mcp_buf b = {0};
    gb_header(&b, 3, 0, 1);
    gb_kv_str(&b, "general.architecture", "mamba");
    TU_CHECK_STATUS(load_bytes(&b, "mamba.gguf"), MCP_STATUS_UNSUPPORTED, msg);
    TU_CHECK_CONTAINS(msg, "architecture 'mamba' is not supported");

    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 2);
    gb_kv_str(&b, "general.architecture", "llama");
    gb_kv_u32(&b, "llama.block_count", 1);
    TU_CHECK_STATUS(load_bytes(&b, "nokey.gguf"), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "key 'llama.embedding_length' is missing");

    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 5);
    llama_hparams(&b, "llama");
    TU_CHECK_STATUS(load_bytes(&b, "notensor.gguf"), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "tensor 'token_embd.weight' is missing");

    /* A tensor of a type the runtime does not run. */
    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 5);
    llama_hparams(&b, "llama");
    gb_tensor(&b, "token_embd.weight", 2, (const uint64_t[]){256, 10}, MCP_GGML_Q4_K, 0);
    gb_pad(&b, 32);
    uint8_t zero[1440] = {0};
    mcp_buf_append(&b, zero, sizeof zero);
    TU_CHECK_STATUS(load_bytes(&b, "q4k.gguf"), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "token_embd.weight");

    mcp_buf_reset(&b);
    gb_header(&b, 3, 1, 5);
    llama_hparams(&b, "llama");
    gb_tensor(&b, "token_embd.weight", 2, (const uint64_t[]){64, 10}, MCP_GGML_Q4_1, 0);
    gb_pad(&b, 32);
    mcp_buf_append(&b, zero, 400);
    TU_CHECK_STATUS(load_bytes(&b, "q41.gguf"), MCP_STATUS_UNSUPPORTED, msg);
    TU_CHECK_CONTAINS(msg, "tensor 'token_embd.weight' has type Q4_1, which this runtime does not run");

    /* Hyperparameters out of range and inconsistent. */
    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 5);
    gb_kv_str(&b, "general.architecture", "llama");
    gb_kv_u32(&b, "llama.embedding_length", 64);
    gb_kv_u32(&b, "llama.block_count", 1);
    gb_kv_u32(&b, "llama.attention.head_count", 3);
    gb_kv_u32(&b, "llama.feed_forward_length", 128);
    TU_CHECK_STATUS(load_bytes(&b, "heads.gguf"), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "embedding length 64 is not a multiple of 3 heads");
    mcp_buf_reset(&b);
    gb_header(&b, 3, 0, 5);
    gb_kv_str(&b, "general.architecture", "llama");
    gb_kv_u32(&b, "llama.embedding_length", 64);
    gb_kv_u32(&b, "llama.block_count", 100000);
    gb_kv_u32(&b, "llama.attention.head_count", 4);
    gb_kv_u32(&b, "llama.feed_forward_length", 128);
    TU_CHECK_STATUS(load_bytes(&b, "layers.gguf"), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "key 'llama.block_count' is 100000");
    mcp_buf_free(&b);
}

static void test_decode_refusals(void)
{
    mcp_llm_model *m = load("llama-Q4_0", 0);
    TU_REQUIRE(m);
    mcp_llm_info info;
    mcp_llm_model_info(m, &info);
    mcp_llm_context_options co = mcp_llm_context_options_default();
    co.n_ctx = 40;
    co.max_seqs = 2;
    co.max_batch_tokens = 64;
    co.block_tokens = 16;
    mcp_llm_context *c = NULL;
    TU_REQUIRE_OK(mcp_llm_context_create(m, &co, &c, msg, sizeof msg), msg);
    int32_t toks[64];
    for (int i = 0; i < 64; i++) toks[i] = 100 + i;
    mcp_llm_batch b = {0, toks, NULL, NULL};
    TU_CHECK_STATUS(mcp_llm_decode(c, &b, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    b.n = 3;
    toks[1] = (int32_t)info.n_vocab;
    TU_CHECK_STATUS(mcp_llm_decode(c, &b, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "token 1 of the batch is id 32000, outside the vocabulary of 32000");
    toks[1] = -5;
    TU_CHECK_STATUS(mcp_llm_decode(c, &b, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    toks[1] = 101;
    const int32_t bad_seq[3] = {0, 7, 0};
    b.seq = bad_seq;
    TU_CHECK_STATUS(mcp_llm_decode(c, &b, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "sequence 7 (0 to 1 allowed)");
    b.seq = NULL;
    b.n = 65;
    TU_CHECK_STATUS(mcp_llm_decode(c, &b, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "more than this context's 64 a step");
    /* Past the context: refused, the sequence untouched. */
    b.n = 41;
    TU_CHECK_STATUS(mcp_llm_decode(c, &b, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_CONTAINS(msg, "context of 40 tokens");
    TU_CHECK_INT(mcp_llm_seq_len(c, 0), 0);
    int64_t used, total;
    mcp_llm_kv_usage(c, &used, &total);
    TU_CHECK_INT(used, 0);
    TU_CHECK_INT(total, 2 * 3); /* two sequences of ceil(40 / 16) blocks */
    b.n = 20;
    TU_REQUIRE_OK(mcp_llm_decode(c, &b, msg, sizeof msg), msg);
    TU_CHECK_INT(mcp_llm_seq_len(c, 0), 20);
    mcp_llm_kv_usage(c, &used, &total);
    TU_CHECK_INT(used, 2);
    TU_CHECK(mcp_llm_logits(c, 0) != NULL);
    TU_CHECK(mcp_llm_logits(c, 1) == NULL);
    TU_CHECK(mcp_llm_logits(c, -1) == NULL);
    mcp_llm_seq_truncate(c, 0, 5);
    TU_CHECK_INT(mcp_llm_seq_len(c, 0), 5);
    mcp_llm_kv_usage(c, &used, &total);
    TU_CHECK_INT(used, 1);
    mcp_llm_seq_truncate(c, 0, 0);
    mcp_llm_kv_usage(c, &used, &total);
    TU_CHECK_INT(used, 0);
    mcp_llm_context_free(c);

    /* A byte budget of two blocks: the third is refused, nothing changes. */
    co.kv_budget_bytes = 1;
    TU_CHECK_STATUS(mcp_llm_context_create(m, &co, &c, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "holds 0 blocks");
    /* Block bytes: 2 (K, V) x 2 layers x 16 tokens x 32 (2 KV heads of 16) x 2 (F16). */
    co.kv_budget_bytes = 2 * (2 * 2 * 16 * 32 * 2);
    TU_REQUIRE_OK(mcp_llm_context_create(m, &co, &c, msg, sizeof msg), msg);
    b.n = 20;
    TU_REQUIRE_OK(mcp_llm_decode(c, &b, msg, sizeof msg), msg);
    const int32_t seq1[20] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    b.seq = seq1;
    TU_CHECK_STATUS(mcp_llm_decode(c, &b, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_CONTAINS(msg, "needs 2 more blocks; 0 of 2 are free");
    TU_CHECK_INT(mcp_llm_seq_len(c, 1), 0);
    TU_CHECK_INT(mcp_llm_seq_len(c, 0), 20);
    mcp_llm_seq_truncate(c, 0, 0);
    TU_REQUIRE_OK(mcp_llm_decode(c, &b, msg, sizeof msg), msg);
    TU_CHECK_INT(mcp_llm_seq_len(c, 1), 20);
    mcp_llm_context_free(c);
    mcp_llm_model_free(m);
}

static void test_sampler(void)
{
    mcp_llm_model *m = load("llama-Q4_0", 0);
    TU_REQUIRE(m);
    mcp_llm_info info;
    mcp_llm_model_info(m, &info);
    const int64_t n = info.n_vocab;
    float *logits = malloc((size_t)n * sizeof *logits);
    TU_REQUIRE(logits);
    for (int64_t i = 0; i < n; i++) logits[i] = -30.0f - (float)(i % 7);
    /* Four likely tokens: probabilities about 0.5, 0.25, 0.125, 0.125. */
    logits[10] = 3.0f;
    logits[20] = 3.0f - logf(2.0f);
    logits[30] = 3.0f - logf(4.0f);
    logits[40] = 3.0f - logf(4.0f);

    mcp_llm_sampling s = mcp_llm_sampling_default();
    mcp_llm_sampler *r = NULL;
    s.top_p = 0.0f;
    TU_CHECK_STATUS(mcp_llm_sampler_create(m, &s, &r, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "top_p 0 is outside (0, 1]");
    s = mcp_llm_sampling_default();
    s.temperature = -1.0f;
    TU_CHECK_STATUS(mcp_llm_sampler_create(m, &s, &r, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    s = mcp_llm_sampling_default();
    s.n_logprobs = 21;
    TU_CHECK_STATUS(mcp_llm_sampler_create(m, &s, &r, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK(r == NULL);

    /* Greedy, with log-probabilities. */
    s = mcp_llm_sampling_default();
    s.n_logprobs = 5;
    TU_REQUIRE_OK(mcp_llm_sampler_create(m, &s, &r, msg, sizeof msg), msg);
    mcp_llm_sample_result res;
    mcp_llm_sample(r, logits, &res);
    TU_CHECK_INT(res.id, 10);
    TU_CHECK_NEAR(res.logprob, logf(0.5f), 1e-3);
    TU_CHECK_INT(res.n_top, 5);
    TU_CHECK_INT(res.top[0].id, 10);
    TU_CHECK_INT(res.top[1].id, 20);
    TU_CHECK_INT(res.top[2].id, 30); /* ties: the lower id first */
    TU_CHECK_INT(res.top[3].id, 40);
    TU_CHECK_NEAR(res.top[1].logprob, logf(0.25f), 1e-3);
    mcp_llm_sampler_free(r);

    /* A repeat penalty steers greedy away from what was said. */
    s = mcp_llm_sampling_default();
    s.repeat_penalty = 10.0f;
    TU_REQUIRE_OK(mcp_llm_sampler_create(m, &s, &r, msg, sizeof msg), msg);
    mcp_llm_sampler_accept(r, 10);
    mcp_llm_sample(r, logits, &res);
    TU_CHECK_INT(res.id, 20);
    TU_CHECK_NEAR(res.logprob, logf(0.25f), 1e-3); /* the model's own probability */
    mcp_llm_sampler_free(r);
    s = mcp_llm_sampling_default();
    s.presence_penalty = 2.0f;
    s.frequency_penalty = 2.0f;
    TU_REQUIRE_OK(mcp_llm_sampler_create(m, &s, &r, msg, sizeof msg), msg);
    mcp_llm_sampler_accept(r, 10);
    mcp_llm_sample(r, logits, &res);
    TU_CHECK_INT(res.id, 20);
    mcp_llm_sampler_free(r);

    /* Temperature 1: frequencies follow the distribution; the seed repeats them. */
    int counts[4] = {0, 0, 0, 0}, ids[4] = {10, 20, 30, 40};
    int32_t first[32];
    for (int pass = 0; pass < 2; pass++) {
        s = mcp_llm_sampling_default();
        s.temperature = 1.0f;
        s.seed = 42;
        TU_REQUIRE_OK(mcp_llm_sampler_create(m, &s, &r, msg, sizeof msg), msg);
        for (int i = 0; i < 4000; i++) {
            mcp_llm_sample(r, logits, &res);
            if (i < 32) {
                if (pass == 0) first[i] = res.id;
                else TU_CHECK_INT(res.id, first[i]);
            }
            for (int k = 0; k < 4 && pass == 0; k++) counts[k] += res.id == ids[k];
        }
        mcp_llm_sampler_free(r);
    }
    TU_CHECK(abs(counts[0] - 2000) < 150);
    TU_CHECK(abs(counts[1] - 1000) < 120);
    TU_CHECK(abs(counts[2] - 500) < 90);
    TU_CHECK(abs(counts[3] - 500) < 90);
    /* Another seed, another sequence. */
    s.seed = 43;
    TU_REQUIRE_OK(mcp_llm_sampler_create(m, &s, &r, msg, sizeof msg), msg);
    int same = 0;
    for (int i = 0; i < 32; i++) {
        mcp_llm_sample(r, logits, &res);
        same += res.id == first[i];
    }
    TU_CHECK(same < 32);
    mcp_llm_sampler_free(r);

    /* top-k 2, top-p 0.6 and min-p 0.4 each leave only the likeliest tokens. */
    struct {
        int top_k;
        float top_p, min_p;
        int allowed; /* how many of ids[] may come out */
    } cuts[] = {{2, 1.0f, 0.0f, 2}, {0, 0.6f, 0.0f, 2}, {0, 0.4f, 0.0f, 1}, {0, 1.0f, 0.4f, 2}, {1, 1.0f, 0.0f, 1}};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        s = mcp_llm_sampling_default();
        s.temperature = 1.0f;
        s.top_k = cuts[c].top_k;
        s.top_p = cuts[c].top_p;
        s.min_p = cuts[c].min_p;
        s.seed = 7;
        TU_REQUIRE_OK(mcp_llm_sampler_create(m, &s, &r, msg, sizeof msg), msg);
        int seen[4] = {0, 0, 0, 0}, other = 0;
        for (int i = 0; i < 2000; i++) {
            mcp_llm_sample(r, logits, &res);
            int k = 0;
            while (k < 4 && ids[k] != res.id) k++;
            if (k == 4) other++;
            else seen[k]++;
        }
        TU_CHECK_INT(other, 0);
        for (int k = 0; k < 4; k++) TU_CHECK((seen[k] > 0) == (k < cuts[c].allowed));
        mcp_llm_sampler_free(r);
    }
    free(logits);
    mcp_llm_model_free(m);
}

static void test_tokens_round_trip(void)
{
    mcp_llm_model *m = load("qwen2-Q8_0", 0);
    TU_REQUIRE(m);
    const char *text = "Hello, world! Grüße, 世界 🙂";
    int32_t ids[64];
    size_t n = 0;
    TU_REQUIRE_OK(mcp_llm_tokenize(m, text, strlen(text), false, false, ids, 64, &n, msg, sizeof msg), msg);
    TU_CHECK(n > 5 && n < 64);
    size_t n_small = 0;
    int32_t small[2];
    TU_REQUIRE_OK(mcp_llm_tokenize(m, text, strlen(text), false, false, small, 2, &n_small, msg, sizeof msg), msg);
    TU_CHECK_INT(n_small, n); /* the full count, with a short buffer */
    mcp_llm_detok *d = mcp_llm_detok_create(m, false);
    TU_REQUIRE(d);
    char out[256] = {0}, piece[256];
    for (size_t i = 0; i < n; i++) {
        int k = mcp_llm_detok_push(d, ids[i], piece, sizeof piece);
        TU_CHECK(k >= 0);
        if (k > 0) strncat(out, piece, sizeof out - strlen(out) - 1);
    }
    TU_CHECK(mcp_llm_detok_flush(d, piece, sizeof piece) == 0);
    TU_CHECK_STR(out, text);
    TU_CHECK(mcp_llm_detok_push(d, -1, piece, sizeof piece) == -1);
    TU_CHECK(mcp_llm_token_piece(m, 1 << 30, false, piece, sizeof piece) == -1);
    mcp_llm_detok_free(d);
    mcp_llm_model_free(m);
}

/* The logits of the last token of `n` tokens decoded into sequence seq. */
static void decode_into(mcp_llm_context *c, int seq, const int32_t *toks, int n, float *logits, int64_t n_vocab)
{
    int32_t seqs[64];
    for (int i = 0; i < n; i++) seqs[i] = seq;
    mcp_llm_batch b = {n, toks, seqs, NULL};
    TU_REQUIRE_OK(mcp_llm_decode(c, &b, msg, sizeof msg), msg);
    memcpy(logits, mcp_llm_logits(c, 0), (size_t)n_vocab * sizeof *logits);
}

static float max_diff(const float *a, const float *b, int64_t n)
{
    float d = 0;
    for (int64_t i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

/* Prefix caching: published blocks are attached only on a full match,
 * give the logits computing them gives, survive their sequences until
 * evicted least recently used first, and are copied before a truncated
 * sequence writes into one. */
static void test_prefix_cache(void)
{
    mcp_llm_model *m = load("llama-F16", 0);
    TU_REQUIRE(m);
    mcp_llm_info info;
    mcp_llm_model_info(m, &info);
    mcp_llm_context_options co = mcp_llm_context_options_default();
    co.n_ctx = 64;
    co.max_seqs = 3;
    co.max_batch_tokens = 64;
    co.block_tokens = 16;
    co.kv_type = MCP_LLM_KV_F32;
    co.kv_budget_bytes = 6 * (2 * 2 * 16 * 32 * 4); /* six blocks */
    mcp_llm_context *c = NULL;
    TU_REQUIRE_OK(mcp_llm_context_create(m, &co, &c, msg, sizeof msg), msg);
    TU_CHECK_INT(mcp_llm_block_tokens(c), 16);
    int32_t toks[64], other[64];
    for (int i = 0; i < 64; i++) toks[i] = 200 + 7 * i, other[i] = 300 + i;
    float *ref = mcp_malloc((size_t)info.n_vocab * sizeof *ref), *got = mcp_malloc((size_t)info.n_vocab * sizeof *got);
    TU_REQUIRE(ref && got);
    const uint64_t h[3] = {11, 22, 33};

    decode_into(c, 0, toks, 40, ref, info.n_vocab);
    TU_CHECK_INT(mcp_llm_seq_publish(c, 0, h, toks, 3), 2); /* two full blocks of 40 tokens */
    TU_CHECK_INT(mcp_llm_seq_publish(c, 0, h, toks, 3), 0); /* once */
    mcp_llm_cache_stats cs;
    mcp_llm_cache_stats_get(c, &cs);
    TU_CHECK_INT(cs.cached_blocks, 2);
    TU_CHECK_INT(cs.used_blocks, 3);

    /* A full match: 32 tokens attached, the rest computed, the same logits. */
    TU_CHECK_INT(mcp_llm_seq_attach(c, 1, h, toks, 2), 32);
    TU_CHECK_INT(mcp_llm_seq_len(c, 1), 32);
    mcp_llm_cache_stats_get(c, &cs);
    TU_CHECK_INT(cs.used_blocks, 3); /* shared, not copied */
    decode_into(c, 1, toks + 32, 8, got, info.n_vocab);
    TU_CHECK(max_diff(ref, got, info.n_vocab) < 1e-3f);
    TU_CHECK_INT(mcp_llm_seq_attach(c, 1, h, toks, 2), 0); /* not empty */
    /* Other tokens under the same hashes, or a block out of its place: no match. */
    TU_CHECK_INT(mcp_llm_seq_attach(c, 2, h, other, 2), 0);
    TU_CHECK_INT(mcp_llm_seq_attach(c, 2, h + 1, toks + 16, 1), 0);
    const uint64_t half[2] = {11, 99};
    TU_CHECK_INT(mcp_llm_seq_attach(c, 2, half, toks, 2), 16); /* up to the first miss */
    mcp_llm_seq_truncate(c, 2, 0);

    /* Sequences gone: the published blocks stay, held by none. */
    mcp_llm_seq_truncate(c, 0, 0);
    mcp_llm_seq_truncate(c, 1, 0);
    mcp_llm_cache_stats_get(c, &cs);
    TU_CHECK_INT(cs.used_blocks, 0);
    TU_CHECK_INT(cs.cached_blocks, 2);
    TU_CHECK_INT(cs.idle_blocks, 2);
    int64_t used, total;
    mcp_llm_kv_usage(c, &used, &total);
    TU_CHECK_INT(used, 0);

    /* Copy on write: truncated into a published block, the sequence writes
     * into its own copy; the published one still gives the same logits. */
    TU_CHECK_INT(mcp_llm_seq_attach(c, 0, h, toks, 2), 32);
    mcp_llm_seq_truncate(c, 0, 20);
    TU_CHECK_INT(mcp_llm_seq_len(c, 0), 20);
    decode_into(c, 0, other, 5, got, info.n_vocab);
    TU_CHECK_INT(mcp_llm_seq_attach(c, 1, h, toks, 2), 32);
    decode_into(c, 1, toks + 32, 8, got, info.n_vocab);
    TU_CHECK(max_diff(ref, got, info.n_vocab) < 1e-3f);
    mcp_llm_seq_truncate(c, 0, 0);
    mcp_llm_seq_truncate(c, 1, 0);

    /* Eviction: a sequence needing every block takes the published ones,
     * least recently used first; a lookup then misses. */
    decode_into(c, 2, other, 64, got, info.n_vocab); /* four blocks: the free ones */
    mcp_llm_cache_stats_get(c, &cs);
    TU_CHECK_INT(cs.evictions, 0);
    decode_into(c, 1, other + 1, 32, got, info.n_vocab); /* two more: the published ones */
    mcp_llm_cache_stats_get(c, &cs);
    TU_CHECK_INT(cs.evictions, 2);
    TU_CHECK_INT(cs.used_blocks, 6);
    TU_CHECK_INT(cs.cached_blocks, 0);
    mcp_llm_seq_truncate(c, 2, 0);
    mcp_llm_seq_truncate(c, 1, 0);
    TU_CHECK_INT(mcp_llm_seq_attach(c, 0, h, toks, 2), 0);

    /* Many publications through a small pool: the table keeps finding the
     * live ones as evicted ones leave it. */
    for (int round = 0; round < 200; round++) {
        int32_t t[16];
        for (int i = 0; i < 16; i++) t[i] = 1000 + round * 16 + i;
        uint64_t hh = 0x9E3779B97F4A7C15ull * (uint64_t)(round + 1);
        decode_into(c, 0, t, 16, got, info.n_vocab);
        TU_CHECK_INT(mcp_llm_seq_publish(c, 0, &hh, t, 1), 1);
        mcp_llm_seq_truncate(c, 0, 0);
        TU_CHECK_INT(mcp_llm_seq_attach(c, 1, &hh, t, 1), 16);
        mcp_llm_seq_truncate(c, 1, 0);
    }
    mcp_llm_cache_stats_get(c, &cs);
    TU_CHECK(cs.cached_blocks <= 6 && cs.cached_blocks >= 1);
    TU_CHECK(cs.evictions >= 190);
    TU_CHECK_INT(cs.used_blocks, 0);
    mcp_free(ref);
    mcp_free(got);
    mcp_llm_context_free(c);
    mcp_llm_model_free(m);
}

/* Special-token text counts only inside the spans given: a chat
 * template's markup, never what a client wrote. */
static void test_tokenize_spans(void)
{
    mcp_llm_model *m = load("gpt2-F32", 0);
    TU_REQUIRE(m);
    const char *text = "a<|endoftext|>b<|endoftext|>";
    int32_t all[64], none[64], some[64];
    size_t n_all, n_none, n_some;
    TU_REQUIRE_OK(mcp_llm_tokenize(m, text, strlen(text), false, true, all, 64, &n_all, msg, sizeof msg), msg);
    TU_REQUIRE_OK(mcp_llm_tokenize(m, text, strlen(text), false, false, none, 64, &n_none, msg, sizeof msg), msg);
    const mcp_llm_span second = {15, 13};
    TU_REQUIRE_OK(mcp_llm_tokenize_spans(m, text, strlen(text), false, &second, 1, some, 64, &n_some, msg, sizeof msg), msg);
    TU_CHECK_INT(n_all, 4); /* a, <|endoftext|>, b, <|endoftext|> */
    TU_CHECK(n_none > n_all);
    TU_CHECK(n_some > n_all && n_some < n_none);
    TU_CHECK_INT(some[n_some - 1], all[3]);             /* inside the span: the control token */
    TU_CHECK(memcmp(some, none, (n_some - 1) * sizeof *some) == 0); /* before it: plain text */
    /* A span that cuts the token's text: plain text. */
    const mcp_llm_span cut = {15, 12};
    TU_REQUIRE_OK(mcp_llm_tokenize_spans(m, text, strlen(text), false, &cut, 1, some, 64, &n_some, msg, sizeof msg), msg);
    TU_CHECK_INT(n_some, n_none);
    /* No spans: no special tokens at all. */
    TU_REQUIRE_OK(mcp_llm_tokenize_spans(m, text, strlen(text), false, NULL, 0, some, 64, &n_some, msg, sizeof msg), msg);
    TU_CHECK_INT(n_some, n_none);
    size_t len = 0;
    TU_CHECK(mcp_llm_model_meta_str(m, "general.architecture", &len) != NULL);
    TU_CHECK_INT(len, 4);
    TU_CHECK(mcp_llm_model_meta_str(m, "no.such.key", &len) == NULL);
    TU_CHECK(mcp_llm_model_meta_str(m, "gpt2.block_count", &len) == NULL); /* not a string */
    mcp_llm_model_free(m);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_llm_api MODELS_DIR\n");
        return 2;
    }
    models = argv[1];
    if (tu_make_temp_dir(dir, sizeof dir, "llm") != 0) return 1;
    TU_RUN(test_bad_files);
    TU_RUN(test_decode_refusals);
    TU_RUN(test_prefix_cache);
    TU_RUN(test_tokenize_spans);
    TU_RUN(test_sampler);
    TU_RUN(test_tokens_round_trip);
    rmdir(dir);
    return tu_finish("llm_api");
}
