/*
 * Prefix caching over the paged KV cache (include/mcp/llm.h): reference
 * counts per block, the table of published blocks by prefix hash, and the
 * least-recently-used list of published blocks no sequence holds.
 *
 * A published block is full and immutable: sequences append only past
 * their last block, and a truncation that would write into a published
 * block copies it first. Partial blocks are never published, so a
 * sequence's next token always lands in a block it alone holds.
 */
#include <string.h>

#include "llm/llm_internal.h"

bool mcp__llm_cache_init(mcp_llm_context *c)
{
    const int64_t n = c->n_blocks;
    int64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    c->block_refs = mcp_calloc((size_t)n, sizeof *c->block_refs);
    c->block_hash = mcp_calloc((size_t)n, sizeof *c->block_hash);
    c->block_parent = mcp_calloc((size_t)n, sizeof *c->block_parent);
    c->block_toks = mcp_malloc((size_t)n * (size_t)c->o.block_tokens * sizeof *c->block_toks);
    c->lru_prev = mcp_malloc((size_t)n * sizeof *c->lru_prev);
    c->lru_next = mcp_malloc((size_t)n * sizeof *c->lru_next);
    c->table = mcp_malloc((size_t)cap * sizeof *c->table);
    if (!c->block_refs || !c->block_hash || !c->block_parent || !c->block_toks || !c->lru_prev || !c->lru_next ||
        !c->table)
        return false;
    for (int64_t i = 0; i < cap; i++) c->table[i] = -1;
    c->table_mask = cap - 1;
    c->lru_head = c->lru_tail = -1;
    return true;
}

void mcp__llm_cache_free(mcp_llm_context *c)
{
    mcp_free(c->block_refs);
    mcp_free(c->block_hash);
    mcp_free(c->block_parent);
    mcp_free(c->block_toks);
    mcp_free(c->lru_prev);
    mcp_free(c->lru_next);
    mcp_free(c->table);
}

int64_t mcp__llm_blocks_available(const mcp_llm_context *c) { return c->n_free + c->n_idle; }

static void lru_unlink(mcp_llm_context *c, int32_t id)
{
    int32_t p = c->lru_prev[id], n = c->lru_next[id];
    if (p >= 0) c->lru_next[p] = n;
    else c->lru_head = n;
    if (n >= 0) c->lru_prev[n] = p;
    else c->lru_tail = p;
    c->n_idle--;
}

static void lru_push(mcp_llm_context *c, int32_t id)
{
    c->lru_prev[id] = c->lru_tail;
    c->lru_next[id] = -1;
    if (c->lru_tail >= 0) c->lru_next[c->lru_tail] = id;
    else c->lru_head = id;
    c->lru_tail = id;
    c->n_idle++;
}

/* ---- the table: linear probing, deletion by backward shift ---- */

static int64_t slot_of(const mcp_llm_context *c, uint64_t h) { return (int64_t)(h * 0x9E3779B97F4A7C15ull >> 7) & c->table_mask; }

static int32_t table_find(const mcp_llm_context *c, uint64_t h)
{
    for (int64_t i = slot_of(c, h);; i = (i + 1) & c->table_mask) {
        int32_t id = c->table[i];
        if (id < 0) return -1;
        if (c->block_hash[id] == h) return id;
    }
}

static void table_insert(mcp_llm_context *c, int32_t id)
{
    int64_t i = slot_of(c, c->block_hash[id]);
    while (c->table[i] >= 0) i = (i + 1) & c->table_mask;
    c->table[i] = id;
}

static void table_remove(mcp_llm_context *c, int32_t id)
{
    int64_t i = slot_of(c, c->block_hash[id]);
    while (c->table[i] != id) i = (i + 1) & c->table_mask;
    for (int64_t j = (i + 1) & c->table_mask; c->table[j] >= 0; j = (j + 1) & c->table_mask) {
        int64_t home = slot_of(c, c->block_hash[c->table[j]]);
        /* Entry j may move into the hole at i when its home is not in (i, j]. */
        bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!between) {
            c->table[i] = c->table[j];
            i = j;
        }
    }
    c->table[i] = -1;
}

int32_t mcp__llm_block_take(mcp_llm_context *c)
{
    int32_t id;
    if (c->n_free > 0) {
        id = c->free_blocks[--c->n_free];
    } else if (c->lru_head >= 0) {
        id = c->lru_head;
        lru_unlink(c, id);
        table_remove(c, id);
        c->block_hash[id] = 0;
        c->n_published--;
        c->evictions++;
    } else {
        return -1;
    }
    c->block_refs[id] = 1;
    return id;
}

void mcp__llm_block_drop(mcp_llm_context *c, int32_t id)
{
    if (--c->block_refs[id] > 0) return;
    if (c->block_hash[id]) lru_push(c, id); /* kept for the next request with this prefix */
    else c->free_blocks[c->n_free++] = id;
}

/* ---- the public side ---- */

int mcp_llm_block_tokens(const mcp_llm_context *c) { return c->o.block_tokens; }

int64_t mcp_llm_seq_attach(mcp_llm_context *c, int seq, const uint64_t *hashes, const int32_t *tokens, int n_blocks)
{
    if (seq < 0 || seq >= c->o.max_seqs || !hashes || !tokens || n_blocks <= 0) return 0;
    llm_seq *s = &c->seqs[seq];
    if (s->n_tokens != 0) return 0;
    const int64_t bt = c->o.block_tokens;
    if (n_blocks > s->cap_blocks) {
        int32_t *grown = mcp_realloc(s->blocks, (size_t)n_blocks * sizeof *grown);
        if (!grown) return 0;
        s->blocks = grown;
        s->cap_blocks = n_blocks;
    }
    int k = 0;
    for (; k < n_blocks; k++) {
        if (!hashes[k]) break;
        int32_t id = table_find(c, hashes[k]);
        /* The hash names the whole prefix; parent and tokens are checked
         * all the same, so that only a true match is ever reused. */
        if (id < 0 || c->block_parent[id] != (k ? hashes[k - 1] : 0) ||
            memcmp(c->block_toks + (size_t)id * (size_t)bt, tokens + (size_t)k * (size_t)bt, (size_t)bt * sizeof *tokens))
            break;
        if (c->block_refs[id]++ == 0) lru_unlink(c, id);
        s->blocks[s->n_blocks++] = id;
    }
    s->n_tokens = (int64_t)k * bt;
    return s->n_tokens;
}

int mcp_llm_seq_publish(mcp_llm_context *c, int seq, const uint64_t *hashes, const int32_t *tokens, int n_blocks)
{
    if (seq < 0 || seq >= c->o.max_seqs || !hashes || !tokens) return 0;
    llm_seq *s = &c->seqs[seq];
    const int64_t bt = c->o.block_tokens;
    int full = (int)(s->n_tokens / bt), published = 0;
    if (n_blocks > full) n_blocks = full;
    for (int k = 0; k < n_blocks; k++) {
        int32_t id = s->blocks[k];
        uint64_t h = hashes[k];
        if (!h || c->block_hash[id] == h) continue;
        if (c->block_hash[id] || table_find(c, h) >= 0) continue; /* published already, or another block holds h */
        c->block_hash[id] = h;
        c->block_parent[id] = k ? hashes[k - 1] : 0;
        memcpy(c->block_toks + (size_t)id * (size_t)bt, tokens + (size_t)k * (size_t)bt, (size_t)bt * sizeof *tokens);
        table_insert(c, id);
        c->n_published++;
        published++;
    }
    return published;
}

void mcp_llm_cache_stats_get(const mcp_llm_context *c, mcp_llm_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    out->total_blocks = c->n_blocks;
    out->used_blocks = c->n_blocks - c->n_free - c->n_idle;
    out->cached_blocks = c->n_published;
    out->idle_blocks = c->n_idle;
    out->evictions = c->evictions;
    out->block_bytes = (int64_t)c->block_bytes;
}
