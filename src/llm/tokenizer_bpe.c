/* Byte-level BPE (tokenizer.ggml.model "gpt2"): the pre-tokenizers, GPT-2's
 * byte-to-character mapping and the merge loop.
 *
 * The pre-tokenizer regexes are scanners written out by hand over UTF-8,
 * each alternative in the regex's order, so a split is exactly the regex's
 * leftmost match at each position. The merge loop keeps the candidate pairs
 * of a word in a binary heap keyed by (rank, position): O(n log n) in the
 * word's length, as llama.cpp's. */
#include <string.h>

#include "llm/tokenizer_impl.h"
#include "llm/unicode.h"

/* ---- GPT-2's byte mapping ----
 * Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves;
 * the other 68 take the code points from U+0100 up, in byte order. */

static bool byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
}

void mcp__bpe_init_bytes(mcp_tokenizer *t)
{
    for (size_t i = 0; i < sizeof t->char_byte / sizeof t->char_byte[0]; i++) t->char_byte[i] = -1;
    uint32_t next = 0x100;
    for (unsigned b = 0; b < 256; b++) {
        uint32_t cp = byte_is_printable(b) ? b : next++;
        uint8_t u[4];
        size_t n = mcp_utf8_encode(cp, u); /* below U+0144: 1 or 2 bytes */
        memcpy(t->byte_char[b], u, n);
        t->byte_char_len[b] = (uint8_t)n;
        t->char_byte[cp] = (int16_t)b;
    }
    MCP_ASSERT(next == 0x144);
}

/* ---- merges ---- */

static uint64_t pair_hash(const char *l, size_t ln, const char *r, size_t rn)
{
    uint64_t h = mcp__tok_hash(l, ln, MCP__TOK_HASH_SEED);
    h = (h ^ ln) * 0x100000001b3ull; /* the split point is part of the key */
    return mcp__tok_mix(mcp__tok_hash(r, rn, h));
}

static bool pair_eq(const mcp_tokenizer *t, const mcp__tok_merge *m, const char *l, size_t ln, const char *r, size_t rn)
{
    const char *p = t->merge_text + m->off;
    return m->left_len == ln && m->right_len == rn && memcmp(p, l, ln) == 0 && memcmp(p + ln, r, rn) == 0;
}

/* The rank of merging l and r, or -1. */
static int32_t merge_rank(const mcp_tokenizer *t, const char *l, size_t ln, const char *r, size_t rn)
{
    uint64_t h = pair_hash(l, ln, r, rn);
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint32_t pos = (uint32_t)h & t->merge_mask;; pos = (pos + 1) & t->merge_mask) {
        uint64_t slot = t->merge_slots[pos];
        if (!slot) return -1;
        if ((uint32_t)(slot >> 32) != tag) continue;
        uint32_t i = (uint32_t)slot - 1;
        if (pair_eq(t, &t->merges[i], l, ln, r, rn)) return (int32_t)i;
    }
}

mcp_status mcp__bpe_load_merges(mcp_tokenizer *t, const mcp_gguf_kv *kv, mcp_err *err)
{
    if (kv->n > (1u << 30))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.merges has %llu entries, more than 2^30",
                           (unsigned long long)kv->n);
    uint32_t n = (uint32_t)kv->n;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += kv->strs[i].len;
    if (total > UINT32_MAX)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.merges holds %llu bytes, more than 4 GiB",
                           (unsigned long long)total);
    t->n_merges = n;
    t->merges = mcp_calloc(n ? n : 1, sizeof *t->merges);
    t->merge_text = mcp_malloc((size_t)total + 1);
    t->merge_mask = 16;
    while (t->merge_mask < 2 * (uint64_t)n) t->merge_mask *= 2;
    t->merge_slots = mcp_calloc(t->merge_mask, sizeof *t->merge_slots);
    t->merge_mask -= 1;
    if (!t->merges || !t->merge_text || !t->merge_slots)
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for %u merges", n);
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        mcp_gguf_str s = kv->strs[i];
        /* "left right", split at the first space after the first byte (a
         * left part may itself be a space in some vocabularies). */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', (size_t)s.len - 1) : NULL;
        mcp__tok_merge *m = &t->merges[i];
        m->off = off;
        if (!sp) continue; /* no pair: llama.cpp keeps ("", ""), which never matches */
        size_t ln = (size_t)(sp - s.ptr), rn = (size_t)s.len - ln - 1;
        memcpy(t->merge_text + off, s.ptr, ln);
        memcpy(t->merge_text + off + ln, sp + 1, rn);
        m->left_len = (uint32_t)ln;
        m->right_len = (uint32_t)rn;
        off += (uint32_t)(ln + rn);
        const char *l = t->merge_text + m->off, *r = l + ln;
        uint64_t h = pair_hash(l, ln, r, rn);
        uint32_t tag = (uint32_t)(h >> 32);
        for (uint32_t pos = (uint32_t)h & t->merge_mask;; pos = (pos + 1) & t->merge_mask) {
            uint64_t slot = t->merge_slots[pos];
            if (!slot) {
                t->merge_slots[pos] = (uint64_t)tag << 32 | (i + 1);
                break;
            }
            /* A repeated pair keeps its first (best) rank. */
            if ((uint32_t)(slot >> 32) == tag && pair_eq(t, &t->merges[(uint32_t)slot - 1], l, ln, r, rn)) break;
        }
    }
    return MCP_STATUS_OK;
}

/* ---- pre-tokenizers ---- */

enum { CH_L = 1, CH_N = 2, CH_S = 4 }; /* letter, number, \s; none of them: "other" */

typedef struct scan {
    const uint8_t *s;
    size_t n;
    bool marks_are_letters; /* Qwen3.5: [\p{L}\p{M}]+ where the others have \p{L}+ */
} scan;

/* The character at byte pos (pos < n): its length, code point and class. */
static size_t ch_at(const scan *sc, size_t pos, uint32_t *cp, unsigned *cls)
{
    uint8_t b = sc->s[pos];
    if (b < 0x80) {
        *cp = b;
        if ((b | 0x20) >= 'a' && (b | 0x20) <= 'z')
            *cls = CH_L;
        else if (b >= '0' && b <= '9')
            *cls = CH_N;
        else
            *cls = (b == ' ' || (b >= 0x09 && b <= 0x0d)) ? CH_S : 0;
        return 1;
    }
    size_t len = mcp_utf8_decode(sc->s + pos, sc->n - pos, cp);
    if (mcp_unicode_is_space(*cp)) {
        *cls = CH_S;
    } else {
        mcp_uclass c = mcp_unicode_class(*cp);
        *cls = c == MCP_UCLASS_L || (c == MCP_UCLASS_M && sc->marks_are_letters) ? CH_L : c == MCP_UCLASS_N ? CH_N : 0;
    }
    return len;
}

/* The class at pos, or -1 past the end. */
static int cls_at(const scan *sc, size_t pos)
{
    if (pos >= sc->n) return -1;
    uint32_t cp;
    unsigned cls;
    ch_at(sc, pos, &cp, &cls);
    return (int)cls;
}

/* Skips characters of class `want` (0: "other") from pos; returns the end. */
static size_t run_of(const scan *sc, size_t pos, unsigned want)
{
    while (pos < sc->n) {
        uint32_t cp;
        unsigned cls;
        size_t len = ch_at(sc, pos, &cp, &cls);
        if (cls != want) break;
        pos += len;
    }
    return pos;
}

static uint8_t ascii_lower(uint8_t b) { return (b >= 'A' && b <= 'Z') ? (uint8_t)(b | 0x20) : b; }

/* 's 't 're 've 'm 'll 'd at pos (after the apostrophe): the end, or 0. */
static size_t contraction(const scan *sc, size_t pos, bool fold)
{
    if (pos + 1 >= sc->n) return 0;
    uint8_t a = sc->s[pos + 1];
    if (fold) a = ascii_lower(a);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
    if (pos + 2 >= sc->n) return 0;
    uint8_t b = sc->s[pos + 2];
    if (fold) b = ascii_lower(b);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
    return 0;
}

/* \s+(?!\S) then \s+ at pos, where a space starts. With rn, first
 * \s*[\r\n]+ (Llama 3): up to the last \r or \n of the run. */
static size_t spaces(const scan *sc, size_t pos, bool rn)
{
    size_t p = pos, last = pos, k = 0, rn_end = 0;
    while (p < sc->n) {
        uint32_t cp;
        unsigned cls;
        size_t len = ch_at(sc, p, &cp, &cls);
        if (cls != CH_S) break;
        if (cp == '\r' || cp == '\n') rn_end = p + len;
        last = p;
        p += len;
        k++;
    }
    if (rn && rn_end) return rn_end;
    /* Followed by a non-space: leave the last space to start the next word. */
    if (k > 1 && p < sc->n) return last;
    return p;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t next_gpt2(const scan *sc, size_t pos)
{
    uint32_t cp;
    unsigned cls;
    size_t len = ch_at(sc, pos, &cp, &cls);
    if (cp == '\'') {
        size_t end = contraction(sc, pos, false);
        if (end) return end;
    }
    size_t p = cp == ' ' ? pos + 1 : pos;
    int c = cls_at(sc, p);
    if (c == CH_L || c == CH_N || c == 0) return run_of(sc, p, (unsigned)c);
    if (cls == CH_S) return spaces(sc, pos, false);
    return pos + len;
}

/* Llama 3 (max_digits 3) and Qwen2 (1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Qwen3.5 is Qwen2's with [\p{L}\p{M}]+ for \p{L}+ and [^\s\p{L}\p{M}\p{N}]
 * for [^\s\p{L}\p{N}]: the same scanner with marks read as letters (a mark
 * before letters is also what the optional [^\r\n\p{L}\p{N}] would take). */
static size_t next_llama3(const scan *sc, size_t pos, unsigned max_digits)
{
    uint32_t cp;
    unsigned cls;
    size_t len = ch_at(sc, pos, &cp, &cls);
    if (cp == '\'') {
        size_t end = contraction(sc, pos, true);
        if (end) return end;
    }
    if (cp != '\r' && cp != '\n' && cls != CH_N) {
        if (cls == CH_L) return run_of(sc, pos + len, CH_L);
        if (cls_at(sc, pos + len) == CH_L) return run_of(sc, pos + len, CH_L);
    }
    if (cls == CH_N) {
        size_t p = pos + len;
        for (unsigned k = 1; k < max_digits && p < sc->n; k++) {
            uint32_t cp2;
            unsigned cls2;
            size_t len2 = ch_at(sc, p, &cp2, &cls2);
            if (cls2 != CH_N) break;
            p += len2;
        }
        return p;
    }
    size_t p = cp == ' ' ? pos + 1 : pos;
    if (cls_at(sc, p) == 0) {
        p = run_of(sc, p, 0);
        while (p < sc->n && (sc->s[p] == '\r' || sc->s[p] == '\n')) p++;
        return p;
    }
    if (cls == CH_S) return spaces(sc, pos, true);
    return pos + len;
}

/* ---- merging ---- */

typedef mcp__sym sym;

typedef struct bpe_work {
    uint8_t *enc;
    size_t enc_cap;
    sym *syms;
    size_t syms_cap;
    mcp__heap heap;
} bpe_work;

static bool add_bigram(const mcp_tokenizer *t, bpe_work *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return true;
    const sym *a = &w->syms[l], *b = &w->syms[r];
    int32_t rank = merge_rank(t, (const char *)w->enc + a->off, a->len, (const char *)w->enc + b->off, b->len);
    if (rank < 0) return true;
    return mcp__heap_push(&w->heap, (mcp__bigram){(double)rank, l, r, a->len + b->len});
}

/* One pre-tokenized word, word[0..m), m >= 1. */
static mcp_status bpe_word(const mcp_tokenizer *t, bpe_work *w, const uint8_t *word, size_t m, mcp__ids *out,
                           mcp_err *err)
{
    if (!mcp__grow((void **)&w->enc, &w->enc_cap, 2 * m, 1) || !mcp__grow((void **)&w->syms, &w->syms_cap, m, sizeof *w->syms))
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory encoding a %zu-byte word", m);
    /* One symbol per byte: the byte's GPT-2 character. */
    size_t e = 0;
    for (size_t i = 0; i < m; i++) {
        size_t n = t->byte_char_len[word[i]];
        memcpy(w->enc + e, t->byte_char[word[i]], n);
        w->syms[i] = (sym){(uint32_t)e, (uint32_t)n, (int32_t)i - 1, i + 1 < m ? (int32_t)i + 1 : -1};
        e += n;
    }
    if (t->ignore_merges) {
        int32_t id = mcp__tok_lookup(t, (const char *)w->enc, e);
        if (id >= 0) {
            mcp__ids_push(out, id);
            return MCP_STATUS_OK;
        }
    }
    w->heap.n = 0;
    bool ok = true;
    for (size_t i = 1; i < m && ok; i++) ok = add_bigram(t, w, (int32_t)i - 1, (int32_t)i);
    mcp__bigram g;
    while (ok && mcp__merge_next(&w->heap, w->syms, &g)) {
        const sym *l = &w->syms[g.left];
        ok = add_bigram(t, w, l->prev, g.left) && add_bigram(t, w, g.left, l->next);
    }
    if (!ok) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory encoding a %zu-byte word", m);
    for (int32_t i = 0; i >= 0; i = w->syms[i].next) {
        const sym *s = &w->syms[i];
        int32_t id = mcp__tok_lookup(t, (const char *)w->enc + s->off, s->len);
        if (id >= 0) {
            mcp__ids_push(out, id);
            continue;
        }
        /* A merge whose result is no token: its bytes one by one. */
        size_t end = s->next >= 0 ? (size_t)s->next : m;
        for (size_t b = (size_t)i; b < end; b++) {
            int32_t bid = t->byte_token[word[b]];
            if (bid < 0) bid = t->unk;
            if (bid >= 0) mcp__ids_push(out, bid);
        }
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__bpe_encode(const mcp_tokenizer *t, const char *text, size_t len, mcp__ids *out, mcp_err *err)
{
    scan sc = {(const uint8_t *)text, len, t->pretok == MCP__PRETOK_QWEN35};
    bpe_work w = {0};
    mcp_status st = MCP_STATUS_OK;
    for (size_t pos = 0; pos < len && st == MCP_STATUS_OK;) {
        size_t end;
        switch (t->pretok) {
        case MCP__PRETOK_LLAMA3: end = next_llama3(&sc, pos, 3); break;
        case MCP__PRETOK_QWEN2:
        case MCP__PRETOK_QWEN35: end = next_llama3(&sc, pos, 1); break;
        default: end = next_gpt2(&sc, pos); break;
        }
        MCP_ASSERT(end > pos && end <= len);
        st = bpe_word(t, &w, sc.s + pos, end - pos, out, err);
        pos = end;
    }
    mcp_free(w.enc);
    mcp_free(w.syms);
    mcp_free(w.heap.v);
    return st;
}
