/*
 * libmcp's LLM runtime: decoder-only language models from GGUF files.
 *
 *   char err[512];
 *   mcp_llm_model *m;
 *   mcp_llm_model_options mo = mcp_llm_model_options_default();
 *   if (mcp_llm_model_load("model.gguf", &mo, &m, err, sizeof err)) { puts(err); }
 *   mcp_llm_context *c;
 *   mcp_llm_context_options co = mcp_llm_context_options_default();
 *   mcp_llm_context_create(m, &co, &c, err, sizeof err);
 *   int32_t ids[256]; size_t n;
 *   mcp_llm_tokenize(m, "Hello", 5, true, false, ids, 256, &n, err, sizeof err);
 *   mcp_llm_batch b = {.n = (int)n, .tokens = ids};      // one sequence, id 0
 *   mcp_llm_decode(c, &b, err, sizeof err);               // logits of the last token
 *   const float *logits = mcp_llm_logits(c, 0);
 *
 * A model is immutable once loaded (its weights are mapped from the file,
 * nothing copied) and may back any number of contexts. A context holds the
 * paged KV cache of its sequences and is used by one thread at a time (its
 * decode calls use the model's thread count internally). Free functions
 * accept NULL.
 */
#ifndef MCP_LLM_H
#define MCP_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcp/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mcp_llm_model mcp_llm_model;
typedef struct mcp_llm_context mcp_llm_context;
typedef struct mcp_llm_sampler mcp_llm_sampler;

typedef struct mcp_llm_model_options {
    int threads; /* 0 = every online core */
    /* Nonzero: activations stay fp32 against quantized weights (exact
     * against the dequantized weights, slower); 0: Q8_0 / Q4_0 weights
     * multiply int8-quantized activations, as llama.cpp does. */
    int precise;
} mcp_llm_model_options;
mcp_llm_model_options mcp_llm_model_options_default(void);

/* Maps and checks a GGUF file: architecture, hyperparameters, every tensor
 * the architecture needs (name, shape, type), the tokenizer. On failure *out
 * is NULL and err names what was wrong (key, tensor, type). */
mcp_status mcp_llm_model_load(const char *path, const mcp_llm_model_options *opts, mcp_llm_model **out, char *err,
                              size_t err_len);
void mcp_llm_model_free(mcp_llm_model *m);

typedef struct mcp_llm_info {
    const char *arch;      /* "llama", "qwen2", "gpt2" */
    const char *name;      /* general.name, or "" */
    int64_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot;
    float rope_base, rope_freq_scale, norm_eps;
    bool rope_neox;
    int64_t n_params;      /* elements of every tensor */
    uint64_t weight_bytes; /* bytes of every tensor, as stored */
    uint64_t decode_bytes; /* bytes one decode step reads: every weight but the embedding table (unless tied to the output) */
    const char *tokenizer; /* "gpt2 (byte-level BPE, pre llama-bpe)", "llama (SentencePiece)" */
    int32_t bos, eos;      /* -1 when the model has none */
    int threads;
    const char *isa; /* the kernels in use: "avx512", "avx2", "ref" */
} mcp_llm_info;
void mcp_llm_model_info(const mcp_llm_model *m, mcp_llm_info *out);
/* A string in the file's metadata (e.g. "tokenizer.chat_template"): its
 * bytes in the mapped file (not NUL-terminated) and *len, or NULL when the
 * key is missing or not a string. Valid while the model is loaded. */
const char *mcp_llm_model_meta_str(const mcp_llm_model *m, const char *key, size_t *len);
/* The file's metadata keys: how many, and the i-th (bytes in the mapped
 * file, not NUL-terminated; NULL when i is out of range). */
int64_t mcp_llm_model_meta_count(const mcp_llm_model *m);
const char *mcp_llm_model_meta_key(const mcp_llm_model *m, int64_t i, size_t *len);

/* Tokenizes text with the model's own tokenizer. add_special: BOS / EOS as
 * the model's metadata asks; parse_special: special-token text in `text`
 * (e.g. "<|im_start|>") becomes that token. Writes up to cap ids; *n is the
 * full count (a second call with a larger buffer gets them all). */
mcp_status mcp_llm_tokenize(const mcp_llm_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t *ids, size_t cap, size_t *n, char *err, size_t err_len);
/* A byte range [off, off + len) of a text. */
typedef struct mcp_llm_span {
    size_t off, len;
} mcp_llm_span;
/* As mcp_llm_tokenize with parse_special, except that special-token text
 * becomes that token only where it lies wholly inside one of the n_spans
 * ranges (a chat template's own markup); elsewhere (what a client wrote)
 * it stays plain text, so a message cannot forge a turn. */
mcp_status mcp_llm_tokenize_spans(const mcp_llm_model *m, const char *text, size_t len, bool add_special,
                                  const mcp_llm_span *spans, size_t n_spans, int32_t *ids, size_t cap, size_t *n,
                                  char *err, size_t err_len);
/* The bytes of token `id` (control tokens give "" unless render_special).
 * Writes up to cap bytes, returns the full length, or -1 for an id outside
 * the vocabulary. The bytes of one token need not be valid UTF-8 alone: use
 * mcp_llm_detok to stream text. */
int mcp_llm_token_piece(const mcp_llm_model *m, int32_t id, bool render_special, char *buf, size_t cap);
bool mcp_llm_token_is_eog(const mcp_llm_model *m, int32_t id);

/* Streaming detokenization: token ids in, valid UTF-8 out; a character
 * split across tokens waits for its last byte; bytes that can never form
 * one come out as U+FFFD. */
typedef struct mcp_llm_detok mcp_llm_detok;
mcp_llm_detok *mcp_llm_detok_create(const mcp_llm_model *m, bool render_special);
/* Appends the text token `id` completes to out (up to cap bytes, then a
 * NUL); returns the bytes written, or -1 for a bad id or when cap is too
 * small (cap >= 256 is always enough for one token of a vocabulary whose
 * tokens are at most 128 bytes). */
int mcp_llm_detok_push(mcp_llm_detok *d, int32_t id, char *out, size_t cap);
/* Ends the stream: U+FFFD for a character left incomplete. */
int mcp_llm_detok_flush(mcp_llm_detok *d, char *out, size_t cap);
void mcp_llm_detok_free(mcp_llm_detok *d);

typedef enum mcp_llm_kv_type { MCP_LLM_KV_F16 = 0, MCP_LLM_KV_F32 = 1 } mcp_llm_kv_type;

typedef struct mcp_llm_context_options {
    int64_t n_ctx;          /* tokens per sequence at most; 0 = the model's training context */
    int max_seqs;           /* sequences at once (ids 0 .. max_seqs-1); default 1 */
    int max_batch_tokens;   /* tokens per decode call at most; default 512 */
    int64_t kv_budget_bytes;/* the KV cache pool; 0 = enough for max_seqs full sequences */
    int block_tokens;       /* tokens per KV block; default 16 */
    mcp_llm_kv_type kv_type;
} mcp_llm_context_options;
mcp_llm_context_options mcp_llm_context_options_default(void);

mcp_status mcp_llm_context_create(const mcp_llm_model *m, const mcp_llm_context_options *opts, mcp_llm_context **out,
                                  char *err, size_t err_len);
void mcp_llm_context_free(mcp_llm_context *c);

/* One decode step: tokens appended to their sequences (in order; a sequence
 * may appear many times in one batch, and several sequences may share one).
 * seq == NULL: every token belongs to sequence 0. logits == NULL: logits of
 * the last token only; otherwise logits[i] nonzero asks for token i's. */
typedef struct mcp_llm_batch {
    int n;
    const int32_t *tokens;
    const int32_t *seq;
    const int8_t *logits;
} mcp_llm_batch;
/* Fails without changing any sequence when a token id, a sequence id, the
 * context length or the KV budget is exceeded (MCP_STATUS_RESOURCE_EXHAUSTED
 * for the budget). */
mcp_status mcp_llm_decode(mcp_llm_context *c, const mcp_llm_batch *b, char *err, size_t err_len);
/* The logits asked for by the last decode, in batch order (i = 0 is the
 * first token that asked); n_vocab floats, valid until the next decode. */
const float *mcp_llm_logits(const mcp_llm_context *c, int i);
/* Tokens held by a sequence. */
int64_t mcp_llm_seq_len(const mcp_llm_context *c, int seq);
/* Drops a sequence's tokens from position `from` on (0: all), freeing its
 * KV blocks past that point. */
void mcp_llm_seq_truncate(mcp_llm_context *c, int seq, int64_t from);
/* KV blocks held by sequences, and in the pool. */
void mcp_llm_kv_usage(const mcp_llm_context *c, int64_t *used_blocks, int64_t *total_blocks);

/* Prefix caching. A sequence's full blocks can be published under hashes
 * that name their whole prefix: the caller chains them, each over the
 * previous block's hash and the block's tokens, keyed as it sees fit (a
 * salt per tenant keeps tenants apart). A new sequence then attaches
 * published blocks instead of computing them. Published blocks no
 * sequence holds stay in the pool until a block is needed, least recently
 * used first. Only full blocks are shared; a sequence writes only past
 * them (a truncation into one copies it first). Hash 0 means none. */
int mcp_llm_block_tokens(const mcp_llm_context *c);
/* For an empty sequence: attaches the published blocks matching
 * hashes[0..n_blocks) (each checked against its parent's hash and the
 * tokens it holds) up to the first miss; returns the tokens attached (a
 * multiple of the block size), which the sequence then holds. */
int64_t mcp_llm_seq_attach(mcp_llm_context *c, int seq, const uint64_t *hashes, const int32_t *tokens, int n_blocks);
/* Publishes the sequence's first n_blocks full blocks under hashes (tokens:
 * the sequence's tokens from position 0). A block published already, or a
 * hash another block holds, is left as it is. Returns the blocks published. */
int mcp_llm_seq_publish(mcp_llm_context *c, int seq, const uint64_t *hashes, const int32_t *tokens, int n_blocks);
typedef struct mcp_llm_cache_stats {
    int64_t used_blocks;   /* held by sequences */
    int64_t total_blocks;
    int64_t cached_blocks; /* published (held or not) */
    int64_t idle_blocks;   /* published, held by none: evictable */
    int64_t evictions;     /* published blocks taken back for new tokens */
    int64_t block_bytes;
} mcp_llm_cache_stats;
void mcp_llm_cache_stats_get(const mcp_llm_context *c, mcp_llm_cache_stats *out);

/* Sampling. */
typedef struct mcp_llm_sampling {
    float temperature;        /* 0 = greedy */
    int top_k;                /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repeat_penalty;     /* 1 = off */
    float presence_penalty;   /* 0 = off */
    float frequency_penalty;  /* 0 = off */
    int penalty_last_n;       /* tokens the penalties look back over; default 64 */
    uint64_t seed;            /* the same seed and inputs give the same tokens */
    int n_logprobs;           /* top tokens' log-probabilities to report, 0..20 */
} mcp_llm_sampling;
mcp_llm_sampling mcp_llm_sampling_default(void);

typedef struct mcp_llm_token_prob {
    int32_t id;
    float logprob;
} mcp_llm_token_prob;

typedef struct mcp_llm_sample_result {
    int32_t id;
    float logprob;                    /* of the chosen token, under the model's distribution */
    int n_top;
    mcp_llm_token_prob top[20];
} mcp_llm_sample_result;

mcp_status mcp_llm_sampler_create(const mcp_llm_model *m, const mcp_llm_sampling *s, mcp_llm_sampler **out, char *err,
                                  size_t err_len);
void mcp_llm_sampler_free(mcp_llm_sampler *s);
/* Records a token as part of the history (prompt tokens, chosen tokens). */
void mcp_llm_sampler_accept(mcp_llm_sampler *s, int32_t id);
/* Picks the next token from logits (not modified). */
void mcp_llm_sample(mcp_llm_sampler *s, const float *logits, mcp_llm_sample_result *out);

#ifdef __cplusplus
}
#endif
#endif
