/* Private to the tokenizer sources (tokenizer.c, tokenizer_bpe.c,
 * tokenizer_spm.c): the tokenizer's tables and the shared helpers. */
#ifndef MCP_LLM_TOKENIZER_IMPL_H
#define MCP_LLM_TOKENIZER_IMPL_H

#include "llm/tokenizer.h"

/* Token attributes, as llama.cpp derives them from the token type and a
 * few name rules (an end-of-turn text makes a token CONTROL). */
enum {
    MCP__TOK_NORMAL = 1u << 0,
    MCP__TOK_UNKNOWN = 1u << 1,
    MCP__TOK_CONTROL = 1u << 2,
    MCP__TOK_USER = 1u << 3,
    MCP__TOK_UNUSED = 1u << 4,
    MCP__TOK_BYTE = 1u << 5,
    MCP__TOK_RSTRIP = 1u << 6, /* matched in the text, it eats the spaces after it */
};

/* Pre-tokenizers: each is a hand-written scanner for one regex. */
typedef enum mcp__pretok {
    MCP__PRETOK_GPT2,   /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    MCP__PRETOK_LLAMA3, /* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
                           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    MCP__PRETOK_QWEN2,  /* Llama 3's with \p{N} for \p{N}{1,3} */
    MCP__PRETOK_QWEN35, /* Qwen2's with [\p{L}\p{M}]+ for \p{L}+ */
} mcp__pretok;

typedef struct mcp__tok_token {
    uint32_t text_off, text_len;   /* in mcp_tokenizer.text */
    uint32_t piece_off, piece_len; /* in mcp_tokenizer.pieces: the bytes it decodes to */
    float score;
    uint8_t type; /* mcp_token_type */
    uint8_t attr; /* MCP__TOK_* */
} mcp__tok_token;

/* A BPE merge; its rank is its index. The pair's text is `left_len` bytes
 * at `off` in merge_text, then `right_len` bytes (without the space). */
typedef struct mcp__tok_merge {
    uint32_t off, left_len, right_len;
} mcp__tok_merge;

struct mcp_tokenizer {
    mcp_tokenizer_family family;
    mcp__pretok pretok;
    char *pre_name;
    int32_t n_vocab;
    mcp__tok_token *tokens;
    char *text;   /* every token's text, back to back */
    char *pieces; /* every token's decoded bytes, back to back */
    /* Open-addressing maps: each slot is hash tag << 32 | (index + 1), 0 when
     * empty; capacity is a power of two at least twice the entries. */
    uint64_t *tok_slots;
    uint32_t tok_mask;
    mcp__tok_merge *merges;
    uint32_t n_merges;
    char *merge_text;
    uint64_t *merge_slots;
    uint32_t merge_mask;
    int32_t bos, eos, eot, eom, unk, pad;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    /* Tokens matched in the text (control, user-defined, unknown), longest
     * text first. */
    int32_t *special;
    uint32_t n_special;
    int32_t *eog; /* sorted */
    uint32_t n_eog;
    /* The token for each byte when nothing longer covers it: BPE, the token
     * of the byte's GPT-2 character; SPM, <0xXX> (else the one-byte text);
     * -1 when the vocabulary has none. */
    int32_t byte_token[256];
    /* BPE: GPT-2's character for each byte (UTF-8, 1 or 2 bytes), and the
     * byte of each character below U+0144 (-1: none). */
    uint8_t byte_char[256][2];
    uint8_t byte_char_len[256];
    int16_t char_byte[0x144];
};

/* A growable id array; `failed` once an append ran out of memory. */
typedef struct mcp__ids {
    int32_t *v;
    size_t n, cap;
    bool failed;
} mcp__ids;

void mcp__ids_push(mcp__ids *o, int32_t id);

/* A candidate merge of two adjacent symbols, for both merge loops: lower
 * key first (BPE: the merge's rank; SentencePiece: minus the score of the
 * joined token), then the leftmost pair. */
typedef struct mcp__bigram {
    double key;
    int32_t left, right;
    uint32_t size;
} mcp__bigram;

/* A symbol of a word being merged: its bytes, and its neighbours in a
 * linked list (-1 at the ends); len 0 once merged into its left neighbour. */
typedef struct mcp__sym {
    uint32_t off, len;
    int32_t prev, next;
} mcp__sym;

/* A binary min-heap of bigrams. */
typedef struct mcp__heap {
    mcp__bigram *v;
    size_t n, cap;
} mcp__heap;

/* false when out of memory. */
bool mcp__heap_push(mcp__heap *h, mcp__bigram g);
/* The first bigram (h->n > 0). */
mcp__bigram mcp__heap_pop(mcp__heap *h);
/* Pops bigrams until one whose two symbols are still as they were (sizes
 * only grow, so equal sizes mean unchanged), merges them and returns it in
 * *g; false when the heap is empty. The caller then offers the merged
 * symbol's new pairs (g->left with its neighbours). */
bool mcp__merge_next(mcp__heap *h, mcp__sym *syms, mcp__bigram *g);
/* Grows *p to hold `need` elements of `elem` bytes (doubling); false when out of memory. */
bool mcp__grow(void **p, size_t *cap, size_t need, size_t elem);

/* Hashing for the maps: mcp__tok_mix(mcp__tok_hash(p, n, MCP__TOK_HASH_SEED)).
 * The hash is unseeded: the tables are built from the model file, and text
 * only looks up, so input cannot lengthen the probe chains. */
uint64_t mcp__tok_hash(const void *p, size_t n, uint64_t h);
uint64_t mcp__tok_mix(uint64_t h);
#define MCP__TOK_HASH_SEED 0xcbf29ce484222325ull
/* The id of a token text, or -1. */
int32_t mcp__tok_lookup(const mcp_tokenizer *t, const char *s, size_t n);

/* Fills byte_char, byte_char_len and char_byte (GPT-2's mapping). */
void mcp__bpe_init_bytes(mcp_tokenizer *t);

/* Load-time setup of the BPE merges (tokenizer_bpe.c). */
mcp_status mcp__bpe_load_merges(mcp_tokenizer *t, const mcp_gguf_kv *merges, mcp_err *err);

/* Encode one run of plain text (no special tokens in it) and append the
 * ids. text[0..len), len <= MCP_TOKENIZER_TEXT_MAX. */
mcp_status mcp__bpe_encode(const mcp_tokenizer *t, const char *text, size_t len, mcp__ids *out, mcp_err *err);
mcp_status mcp__spm_encode(const mcp_tokenizer *t, const char *text, size_t len, bool space_prefix, mcp__ids *out,
                           mcp_err *err);

#endif
