/* The LLM runtime's internal types: a loaded model (hyperparameters and
 * weights pointing into the GGUF mapping), the paged KV cache, a context. */
#ifndef MCP_LLM_INTERNAL_H
#define MCP_LLM_INTERNAL_H

#include "base/base.h"
#include "llm/gguf.h"
#include "llm/kernels.h"
#include "mcp/llm.h"

struct mcp_tokenizer;

typedef enum llm_arch { LLM_ARCH_LLAMA, LLM_ARCH_QWEN2, LLM_ARCH_GPT2 } llm_arch;

/* A weight matrix: rows of k elements in the file's type, in place. */
typedef struct llm_weight {
    const char *name; /* in the model's name pool */
    uint32_t type;
    int64_t k, rows;
    size_t row_bytes;
    const uint8_t *data;
    mcp_llm_act act; /* the activation form its products use */
} llm_weight;

/* A vector (norm weight, bias) as floats: copied when stored in another type. */
typedef struct llm_vec {
    const float *data;
    float *owned;
    int64_t n;
} llm_vec;

typedef struct llm_layer {
    llm_vec attn_norm, attn_norm_b;
    llm_weight wq, wk, wv, wqkv, wo;
    llm_vec bq, bk, bv, bqkv, bo;
    llm_vec ffn_norm, ffn_norm_b;
    llm_weight ffn_gate, ffn_up, ffn_down;
    llm_vec ffn_up_b, ffn_down_b;
} llm_layer;

struct mcp_llm_model {
    mcp_gguf *gguf;
    llm_arch arch;
    char arch_name[16];
    char name[128];
    char tokenizer_desc[96];
    int64_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot;
    float norm_eps, rope_base, rope_freq_scale;
    bool rope_neox;
    float *inv_freq; /* n_rot / 2 */
    llm_weight tok_embd, pos_embd, output;
    llm_vec output_norm, output_norm_b;
    llm_layer *layers;
    char *name_pool; /* the layers' tensor names */
    int threads;
    bool precise;
    int64_t n_params;
    uint64_t weight_bytes, decode_bytes;
    struct mcp_tokenizer *tok;
};

/* A sequence's place in the cache: its blocks, in order, and its length. */
typedef struct llm_seq {
    int32_t *blocks;
    int n_blocks, cap_blocks;
    int64_t n_tokens;
} llm_seq;

struct mcp_llm_context {
    const mcp_llm_model *m;
    mcp_llm_context_options o;
    /* The block pool: n_blocks blocks of block_bytes, each holding every
     * layer's keys and values of block_tokens tokens, laid out
     * [layer][K, V][token][kv head][dim]. */
    uint8_t *pool;
    size_t pool_len, block_bytes;
    int64_t n_blocks;
    int32_t *free_blocks;  /* unreferenced blocks that hold no published prefix */
    int64_t n_free;
    /* Prefix caching (prefix.c): per block, the sequences holding it, the
     * prefix hash it is published under (0: none), its parent's hash and
     * tokens (checked on a hit), and a place in the LRU list of published
     * blocks no sequence holds (evicted oldest first when a block is due). */
    int32_t *block_refs;
    uint64_t *block_hash, *block_parent;
    int32_t *block_toks;           /* block_tokens per block */
    int32_t *lru_prev, *lru_next;  /* -1 ends */
    int32_t lru_head, lru_tail;
    int64_t n_idle;                /* published and unreferenced: evictable */
    int64_t n_published, evictions;
    int32_t *table;                /* open addressing by hash: block id or -1 */
    int64_t table_mask;
    llm_seq *seqs;
    /* Per-step buffers, sized for max_batch_tokens. */
    float *x, *h, *q, *k, *v, *att, *ff_a, *ff_b, *logits, *scores;
    uint8_t *act;
    size_t act_cap;
    int n_logits, logits_cap;
    int64_t scores_stride; /* floats per thread in scores: attention weights, RoPE angles */
    int64_t *seq_add; /* per sequence: tokens this step adds */
    int32_t *tok_pos; /* each batch token's position */
    const uint8_t **block_ptrs; /* per thread: one sequence's block pointers */
};

/* prefix.c: the block pool's bookkeeping. */
bool mcp__llm_cache_init(mcp_llm_context *c);
void mcp__llm_cache_free(mcp_llm_context *c);
/* Blocks a decode can take: free ones and evictable published ones. */
int64_t mcp__llm_blocks_available(const mcp_llm_context *c);
/* A block for a sequence (ref 1): a free one, else the least recently
 * used evictable one (unpublished first). -1 when none is left. */
int32_t mcp__llm_block_take(mcp_llm_context *c);
/* A sequence lets go of a block. */
void mcp__llm_block_drop(mcp_llm_context *c, int32_t id);

#endif
