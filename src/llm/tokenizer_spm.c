/* SentencePiece-style BPE (tokenizer.ggml.model "llama"), as llama.cpp runs
 * it: spaces become U+2581, the text splits into characters, and the
 * adjacent pair whose joined text is the highest-scoring token merges
 * first (ties: the leftmost), until no pair is a token. Characters left
 * over that are no token fall back to their <0xXX> byte tokens. A binary
 * heap of candidate pairs makes it O(n log n) in the text's length. */
#include <string.h>

#include "llm/tokenizer_impl.h"
#include "llm/unicode.h"

typedef mcp__sym sym;

typedef struct spm_work {
    const mcp_tokenizer *t;
    char *text;
    sym *syms;
    mcp__heap heap;
} spm_work;

/* Adjacent symbols are adjacent in the text, so their joined text is one
 * slice of it. */
static bool add_bigram(spm_work *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return true;
    const sym *a = &w->syms[l], *b = &w->syms[r];
    int32_t id = mcp__tok_lookup(w->t, w->text + a->off, a->len + b->len);
    if (id < 0) return true;
    return mcp__heap_push(&w->heap, (mcp__bigram){-(double)w->t->tokens[id].score, l, r, a->len + b->len});
}

static mcp_status spm_run(spm_work *w, size_t n, mcp__ids *out, mcp_err *err)
{
    const mcp_tokenizer *t = w->t;
    /* One symbol per character; a byte outside any well-formed character is
     * a symbol of its own (it can only come out as its byte token). */
    size_t n_sym = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = mcp_utf8_decode((const uint8_t *)w->text + i, n - i, &cp);
        w->syms[n_sym] = (sym){(uint32_t)i, (uint32_t)len, (int32_t)n_sym - 1, -1};
        if (n_sym) w->syms[n_sym - 1].next = (int32_t)n_sym;
        n_sym++;
        i += len;
    }
    bool ok = true;
    for (size_t i = 1; i < n_sym && ok; i++) ok = add_bigram(w, (int32_t)i - 1, (int32_t)i);
    mcp__bigram g;
    while (ok && mcp__merge_next(&w->heap, w->syms, &g)) {
        const sym *l = &w->syms[g.left];
        ok = add_bigram(w, l->prev, g.left) && add_bigram(w, g.left, l->next);
    }
    if (!ok) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory encoding %zu bytes", n);
    for (int32_t i = n_sym ? 0 : -1; i >= 0; i = w->syms[i].next) {
        const sym *s = &w->syms[i];
        int32_t id = mcp__tok_lookup(t, w->text + s->off, s->len);
        if (id >= 0) {
            mcp__ids_push(out, id);
            continue;
        }
        /* Merged symbols are always tokens, so this is one character. */
        for (uint32_t b = 0; b < s->len; b++) {
            uint8_t byte = (uint8_t)w->text[s->off + b];
            int32_t bid = t->byte_token[byte] >= 0 ? t->byte_token[byte] : t->unk;
            if (bid < 0)
                return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                                   "the vocabulary has no token <0x%02X> for byte fallback and no unknown token "
                                   "(tokenizer.ggml.unknown_token_id)",
                                   byte);
            mcp__ids_push(out, bid);
        }
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__spm_encode(const mcp_tokenizer *t, const char *text, size_t len, bool space_prefix, mcp__ids *out,
                           mcp_err *err)
{
    /* The text with spaces escaped: at most 3 bytes per input byte, plus the
     * prefix; len <= 2^30 keeps that within 32 bits. */
    size_t n_spaces = space_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) n_spaces += text[i] == ' ';
    size_t n = len + (space_prefix ? 1 : 0) + 2 * n_spaces;
    spm_work w = {t, NULL, NULL, {NULL, 0, 0}};
    size_t sym_bytes;
    w.text = mcp_malloc(n ? n : 1);
    w.syms = mcp_mul_overflow_size(n ? n : 1, sizeof *w.syms, &sym_bytes) ? mcp_malloc(sym_bytes) : NULL;
    mcp_status st;
    if (!w.text || !w.syms) {
        st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory encoding %zu bytes", len);
    } else {
        size_t o = 0;
        if (space_prefix) memcpy(w.text + o, "\xe2\x96\x81", 3), o += 3;
        for (size_t i = 0; i < len; i++) {
            if (text[i] == ' ')
                memcpy(w.text + o, "\xe2\x96\x81", 3), o += 3;
            else
                w.text[o++] = text[i];
        }
        MCP_ASSERT(o == n);
        st = spm_run(&w, n, out, err);
    }
    mcp_free(w.text);
    mcp_free(w.syms);
    mcp_free(w.heap.v);
    return st;
}
