/* Tokenizers from GGUF metadata: loading, special tokens, the encode
 * driver, decoding and the streaming decoder. The BPE and SentencePiece
 * algorithms are in tokenizer_bpe.c and tokenizer_spm.c. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "llm/tokenizer_impl.h"
#include "llm/unicode.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"
#define KEY_MERGES "tokenizer.ggml.merges"

/* ---- small helpers ---- */

void mcp__ids_push(mcp__ids *o, int32_t id)
{
    if (o->failed) return;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        int32_t *v = cap > SIZE_MAX / sizeof *v ? NULL : mcp_realloc(o->v, cap * sizeof *v);
        if (!v) {
            o->failed = true;
            return;
        }
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
}

/* FNV-1a; callers finish with mcp__tok_mix. */
uint64_t mcp__tok_hash(const void *p, size_t n, uint64_t h)
{
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

uint64_t mcp__tok_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static const char *tok_text(const mcp_tokenizer *t, int32_t id, size_t *len)
{
    *len = t->tokens[id].text_len;
    return t->text + t->tokens[id].text_off;
}

int32_t mcp__tok_lookup(const mcp_tokenizer *t, const char *s, size_t n)
{
    uint64_t h = mcp__tok_mix(mcp__tok_hash(s, n, MCP__TOK_HASH_SEED));
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint32_t pos = (uint32_t)h & t->tok_mask;; pos = (pos + 1) & t->tok_mask) {
        uint64_t slot = t->tok_slots[pos];
        if (!slot) return -1;
        if ((uint32_t)(slot >> 32) != tag) continue;
        int32_t id = (int32_t)(uint32_t)slot - 1;
        size_t len;
        const char *txt = tok_text(t, id, &len);
        if (len == n && memcmp(txt, s, n) == 0) return id;
    }
}

/* Inserts token `id` (its text already in t->text); a later duplicate
 * replaces an earlier one, as in llama.cpp's token_to_id map. */
static void tok_insert(mcp_tokenizer *t, int32_t id)
{
    size_t n;
    const char *s = tok_text(t, id, &n);
    uint64_t h = mcp__tok_mix(mcp__tok_hash(s, n, MCP__TOK_HASH_SEED));
    uint32_t tag = (uint32_t)(h >> 32);
    uint64_t mine = (uint64_t)tag << 32 | (uint32_t)(id + 1);
    for (uint32_t pos = (uint32_t)h & t->tok_mask;; pos = (pos + 1) & t->tok_mask) {
        uint64_t slot = t->tok_slots[pos];
        if (!slot) {
            t->tok_slots[pos] = mine;
            return;
        }
        if ((uint32_t)(slot >> 32) != tag) continue;
        size_t len;
        const char *txt = tok_text(t, (int32_t)(uint32_t)slot - 1, &len);
        if (len == n && memcmp(txt, s, n) == 0) {
            t->tok_slots[pos] = mine;
            return;
        }
    }
}

/* A power of two >= 2 * n (n < 2^30 here). */
static uint32_t table_cap(uint32_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

static bool str_in(mcp_gguf_str s, const char *const *names)
{
    for (size_t i = 0; names[i]; i++)
        if (mcp_gguf_str_eq(s, names[i])) return true;
    return false;
}

static char *str_dup(const char *p, size_t n)
{
    char *s = mcp_malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

/* ---- loading ---- */

/* tokenizer.ggml.pre names, grouped by the regex they mean (llama.cpp's
 * llama-vocab.cpp lists the same names). */
static const char *const pre_gpt2[] = {"default", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
                                       "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais",
                                       "trillion", "granite-docling", NULL};
static const char *const pre_llama3[] = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                                         "midm-2.0", "lfm2", "jina-v5-nano", "dbrx", "smaug-bpe", "chatglm-bpe", NULL};
static const char *const pre_qwen2[] = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan",
                                        "solar-open", NULL};
static const char *const pre_qwen35[] = {"qwen35", NULL};

static mcp_status load_pre(mcp_tokenizer *t, const mcp_gguf *g, mcp_err *err)
{
    mcp_gguf_str pre = {"default", 7};
    bool found = false;
    mcp_status st = mcp_gguf_get_str(g, KEY_PRE, &pre, &found, err);
    if (st != MCP_STATUS_OK) return st;
    if (!found) pre = (mcp_gguf_str){"default", 7};
    if (pre.len > 256) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s is %llu bytes long", KEY_PRE,
                                          (unsigned long long)pre.len);
    t->pre_name = str_dup(pre.ptr, (size_t)pre.len);
    if (!t->pre_name) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory reading %s", KEY_PRE);
    if (t->family != MCP_TOKENIZER_FAMILY_BPE) return MCP_STATUS_OK; /* SentencePiece has no pre-tokenizer */
    if (str_in(pre, pre_gpt2)) {
        t->pretok = MCP__PRETOK_GPT2;
    } else if (str_in(pre, pre_llama3)) {
        t->pretok = MCP__PRETOK_LLAMA3;
        /* Llama 3's tokenizer.json sets ignore_merges and a BOS. */
        t->ignore_merges = true;
        t->add_bos = true;
    } else if (str_in(pre, pre_qwen2)) {
        t->pretok = MCP__PRETOK_QWEN2;
    } else if (str_in(pre, pre_qwen35)) {
        t->pretok = MCP__PRETOK_QWEN35;
    } else {
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                           "%s '%s' is not a supported pre-tokenizer (supported: default, gpt-2, llama-bpe, qwen2, "
                           "qwen35 and their aliases)",
                           KEY_PRE, t->pre_name);
    }
    return MCP_STATUS_OK;
}

static mcp_status load_tokens(mcp_tokenizer *t, const mcp_gguf *g, mcp_err *err)
{
    const mcp_gguf_kv *tokens;
    mcp_status st = mcp_gguf_get_array(g, KEY_TOKENS, MCP_GGUF_STRING, &tokens, err);
    if (st != MCP_STATUS_OK) return st;
    if (!tokens) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s is missing: the file has no vocabulary", KEY_TOKENS);
    if (tokens->n == 0) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s is empty", KEY_TOKENS);
    if (tokens->n > (1u << 30))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s has %llu tokens, more than 2^30", KEY_TOKENS,
                           (unsigned long long)tokens->n);
    uint32_t n = (uint32_t)tokens->n;

    /* Scores: float32 (or int32, which llama.cpp also reads). */
    const mcp_gguf_kv *scores = mcp_gguf_find(g, KEY_SCORES);
    if (scores) {
        if (scores->type != MCP_GGUF_ARRAY ||
            (scores->elem_type != MCP_GGUF_FLOAT32 && scores->elem_type != MCP_GGUF_INT32))
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s is not an array of float32", KEY_SCORES);
        if (scores->n < n)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s has %llu entries for %u tokens", KEY_SCORES,
                               (unsigned long long)scores->n, n);
    }
    const mcp_gguf_kv *types;
    st = mcp_gguf_get_array(g, KEY_TYPES, MCP_GGUF_INT32, &types, err);
    if (st != MCP_STATUS_OK) return st;
    if (types && types->n < n)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s has %llu entries for %u tokens", KEY_TYPES,
                           (unsigned long long)types->n, n);

    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += tokens->strs[i].len;
    if (total > UINT32_MAX)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s holds %llu bytes of text, more than 4 GiB", KEY_TOKENS,
                           (unsigned long long)total);
    t->n_vocab = (int32_t)n;
    t->tokens = mcp_calloc(n, sizeof *t->tokens);
    t->text = mcp_malloc((size_t)total + 1);
    t->tok_mask = table_cap(n) - 1;
    t->tok_slots = mcp_calloc((size_t)t->tok_mask + 1, sizeof *t->tok_slots);
    if (!t->tokens || !t->text || !t->tok_slots)
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for %u tokens", n);

    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        mcp__tok_token *tk = &t->tokens[i];
        mcp_gguf_str s = tokens->strs[i];
        if (s.len) memcpy(t->text + off, s.ptr, (size_t)s.len);
        tk->text_off = off;
        tk->text_len = (uint32_t)s.len;
        off += (uint32_t)s.len;
        if (scores)
            tk->score = scores->elem_type == MCP_GGUF_FLOAT32 ? mcp_gguf_arr_f32(scores, i)
                                                              : (float)mcp_gguf_arr_i32(scores, i);
        int32_t type = types ? mcp_gguf_arr_i32(types, i) : MCP_TOKEN_TYPE_NORMAL;
        switch (type) {
        case MCP_TOKEN_TYPE_NORMAL: tk->attr = MCP__TOK_NORMAL; break;
        case MCP_TOKEN_TYPE_UNKNOWN: tk->attr = MCP__TOK_UNKNOWN; break;
        case MCP_TOKEN_TYPE_CONTROL: tk->attr = MCP__TOK_CONTROL; break;
        case MCP_TOKEN_TYPE_USER_DEFINED: tk->attr = MCP__TOK_USER; break;
        case MCP_TOKEN_TYPE_UNUSED: tk->attr = MCP__TOK_UNUSED; break;
        case MCP_TOKEN_TYPE_BYTE: tk->attr = MCP__TOK_BYTE; break;
        default: type = MCP_TOKEN_TYPE_UNDEFINED; tk->attr = 0; break;
        }
        tk->type = (uint8_t)type;
        /* An empty token can never match text; llama.cpp renames it. */
        if (s.len) tok_insert(t, (int32_t)i);
    }
    return MCP_STATUS_OK;
}

static mcp_status load_bool(const mcp_gguf *g, const char *key, bool *v, mcp_err *err)
{
    bool found, b = false;
    mcp_status st = mcp_gguf_get_bool(g, key, &b, &found, err);
    if (st == MCP_STATUS_OK && found) *v = b;
    return st;
}

/* A special id key: absent keeps the default; an id outside the
 * vocabulary is ignored as llama.cpp does (files with a padding id one
 * past the end are common); the wrong type is an error naming the key. */
static mcp_status load_id(const mcp_tokenizer *t, const mcp_gguf *g, const char *key, int32_t *id, mcp_err *err)
{
    if (*id >= t->n_vocab) *id = -1;
    uint32_t v = 0;
    bool found;
    mcp_status st = mcp_gguf_get_u32(g, key, &v, &found, err);
    if (st != MCP_STATUS_OK) return st;
    if (found && v < (uint32_t)t->n_vocab) *id = (int32_t)v;
    return MCP_STATUS_OK;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static mcp_status load_specials(mcp_tokenizer *t, const mcp_gguf *g, mcp_err *err)
{
    static const struct {
        const char *key;
        size_t field;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(mcp_tokenizer, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(mcp_tokenizer, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(mcp_tokenizer, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(mcp_tokenizer, eom)},
        {"tokenizer.ggml.unknown_token_id", offsetof(mcp_tokenizer, unk)},
        {"tokenizer.ggml.padding_token_id", offsetof(mcp_tokenizer, pad)},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        mcp_status st = load_id(t, g, ids[i].key, (int32_t *)((char *)t + ids[i].field), err);
        if (st != MCP_STATUS_OK) return st;
    }
    mcp_status st = load_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err);
    if (st == MCP_STATUS_OK) st = load_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err);
    if (st == MCP_STATUS_OK && t->family == MCP_TOKENIZER_FAMILY_SPM)
        st = load_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err);
    if (st != MCP_STATUS_OK) return st;

    /* End-of-turn tokens llama.cpp recognises by their text, since converters
     * rarely write eot_token_id; each becomes a control token. */
    static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|end_of_text|>", "<EOT>", "_<EOT>", "<end_of_utterance>", NULL};
    static const char *const eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
                                            NULL};
    if (t->eot < 0)
        for (size_t i = 0; eot_texts[i] && t->eot < 0; i++) t->eot = mcp__tok_lookup(t, eot_texts[i], strlen(eot_texts[i]));
    if (t->eom < 0) t->eom = mcp__tok_lookup(t, "<|eom_id|>", 10);
    size_t cap = sizeof eog_texts / sizeof eog_texts[0] + 3;
    t->eog = mcp_malloc(cap * sizeof *t->eog);
    if (!t->eog) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for the end-of-generation tokens");
    for (size_t i = 0; eog_texts[i]; i++) {
        int32_t id = mcp__tok_lookup(t, eog_texts[i], strlen(eog_texts[i]));
        if (id >= 0) t->eog[t->n_eog++] = id;
    }
    if (t->eot >= 0) t->eog[t->n_eog++] = t->eot;
    if (t->eom >= 0) t->eog[t->n_eog++] = t->eom;
    for (uint32_t i = 0; i < t->n_eog; i++) t->tokens[t->eog[i]].attr |= MCP__TOK_CONTROL;
    if (t->eos >= 0) t->eog[t->n_eog++] = t->eos;
    qsort(t->eog, t->n_eog, sizeof *t->eog, cmp_i32);
    uint32_t k = 0;
    for (uint32_t i = 0; i < t->n_eog; i++)
        if (k == 0 || t->eog[k - 1] != t->eog[i]) t->eog[k++] = t->eog[i];
    t->n_eog = k;

    if (t->add_bos && t->bos < 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                           "tokenizer.ggml.add_bos_token is set but tokenizer.ggml.bos_token_id names no token");
    if (t->add_eos && t->eos < 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                           "tokenizer.ggml.add_eos_token is set but tokenizer.ggml.eos_token_id names no token");

    /* The tokens matched in the text. */
    uint32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->tokens[i].attr & (MCP__TOK_CONTROL | MCP__TOK_USER | MCP__TOK_UNKNOWN)) && t->tokens[i].text_len) n++;
    t->special = mcp_malloc((n ? n : 1) * sizeof *t->special);
    if (!t->special) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for %u special tokens", n);
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->tokens[i].attr & (MCP__TOK_CONTROL | MCP__TOK_USER | MCP__TOK_UNKNOWN)) && t->tokens[i].text_len)
            t->special[t->n_special++] = i;
    /* Longest text first, ties in id order (a stable merge sort, so the
     * order never depends on the C library's qsort). */
    int32_t *tmp = mcp_malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for %u special tokens", n);
    for (uint32_t width = 1; width < n; width *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * width) {
            uint32_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            uint32_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) {
                /* Stable: equal lengths keep id order. */
                if (t->tokens[t->special[b]].text_len > t->tokens[t->special[a]].text_len)
                    tmp[o++] = t->special[b++];
                else
                    tmp[o++] = t->special[a++];
            }
            while (a < mid) tmp[o++] = t->special[a++];
            while (b < hi) tmp[o++] = t->special[b++];
        }
        memcpy(t->special, tmp, n * sizeof *tmp);
    }
    mcp_free(tmp);

    /* Phi-3's special tokens eat the spaces after them (llama.cpp keys this
     * on the model's name, as the file does not say it). */
    mcp_gguf_str name;
    bool found;
    st = mcp_gguf_get_str(g, "general.name", &name, &found, err);
    if (st != MCP_STATUS_OK) return st;
    if (found) {
        char low[64];
        size_t len = name.len < sizeof low - 1 ? (size_t)name.len : sizeof low - 1;
        for (size_t i = 0; i < len; i++) low[i] = (char)tolower((unsigned char)name.ptr[i]);
        low[len] = 0;
        if (strstr(low, "phi-3") || strstr(low, "phi3")) {
            for (uint32_t i = 0; i < t->n_special; i++) t->tokens[t->special[i]].attr |= MCP__TOK_RSTRIP;
            int32_t id = mcp__tok_lookup(t, "</s>", 4);
            if (id >= 0) t->tokens[id].attr |= MCP__TOK_RSTRIP;
            static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
            for (size_t i = 0; i < 3; i++) {
                id = mcp__tok_lookup(t, keep[i], strlen(keep[i]));
                if (id >= 0) t->tokens[id].attr &= (uint8_t)~MCP__TOK_RSTRIP;
            }
        }
    }
    return MCP_STATUS_OK;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xXX>" -> the byte, else -1. */
static int byte_token_value(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static void load_byte_tokens(mcp_tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        int32_t id = -1;
        if (t->family == MCP_TOKENIZER_FAMILY_BPE) {
            id = mcp__tok_lookup(t, (const char *)t->byte_char[b], t->byte_char_len[b]);
        } else {
            static const char hex[] = "0123456789ABCDEF";
            char s[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            id = mcp__tok_lookup(t, s, 6);
            if (id < 0) {
                char c = (char)b;
                id = mcp__tok_lookup(t, &c, 1);
            }
        }
        t->byte_token[b] = id;
    }
}

/* Every token's bytes, computed once (render_special form). */
static mcp_status load_pieces(mcp_tokenizer *t, mcp_err *err)
{
    mcp_buf b = {0};
    for (int32_t id = 0; id < t->n_vocab; id++) {
        mcp__tok_token *tk = &t->tokens[id];
        const char *s = t->text + tk->text_off;
        size_t n = tk->text_len;
        size_t start = b.len;
        if (tk->attr & (MCP__TOK_CONTROL | MCP__TOK_UNKNOWN | MCP__TOK_USER)) {
            mcp_buf_append(&b, s, n);
        } else if (tk->attr & MCP__TOK_NORMAL) {
            for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t len = mcp_utf8_decode((const uint8_t *)s + i, n - i, &cp);
                if (t->family == MCP_TOKENIZER_FAMILY_BPE) {
                    int byte = cp < 0x144 ? t->char_byte[cp] : -1;
                    if (byte >= 0) {
                        uint8_t c = (uint8_t)byte;
                        mcp_buf_append(&b, &c, 1);
                    } else {
                        /* Not one of the 256 byte characters (a hand-added
                         * token): its text as written. */
                        mcp_buf_append(&b, s + i, len);
                    }
                } else if (cp == 0x2581) {
                    mcp_buf_append(&b, " ", 1);
                } else {
                    mcp_buf_append(&b, s + i, len);
                }
                i += len;
            }
        } else if (tk->attr & MCP__TOK_BYTE) {
            int v = byte_token_value(s, n);
            if (v >= 0) {
                uint8_t c = (uint8_t)v;
                mcp_buf_append(&b, &c, 1);
            } else {
                mcp_buf_append(&b, s, n);
            }
        }
        /* Unused and undefined tokens decode to nothing. */
        if (b.len - start > UINT32_MAX || b.len > UINT32_MAX) b.failed = true;
        if (b.failed) break;
        tk->piece_off = (uint32_t)start;
        tk->piece_len = (uint32_t)(b.len - start);
    }
    if (b.failed) {
        mcp_buf_free(&b);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory decoding %d tokens", t->n_vocab);
    }
    t->pieces = (char *)b.data; /* NULL when every piece is empty */
    return MCP_STATUS_OK;
}

mcp_status mcp_tokenizer_from_gguf(const mcp_gguf *g, mcp_tokenizer **out, mcp_err *err)
{
    if (!out) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tokenizer: no output pointer");
    *out = NULL;
    if (!g) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tokenizer: no GGUF file");
    mcp_gguf_str model;
    bool found;
    mcp_status st = mcp_gguf_get_str(g, KEY_MODEL, &model, &found, err);
    if (st != MCP_STATUS_OK) return st;
    if (!found) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s is missing: the file names no tokenizer", KEY_MODEL);
    mcp_tokenizer_family family;
    if (mcp_gguf_str_eq(model, "gpt2")) {
        family = MCP_TOKENIZER_FAMILY_BPE;
    } else if (mcp_gguf_str_eq(model, "llama")) {
        family = MCP_TOKENIZER_FAMILY_SPM;
    } else {
        int shown = model.len > 64 ? 64 : (int)model.len;
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "%s '%.*s' is not supported (supported: gpt2, llama)", KEY_MODEL,
                           shown, model.ptr);
    }

    mcp_tokenizer *t = mcp_calloc(1, sizeof *t);
    if (!t) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for the tokenizer");
    t->family = family;
    t->bos = t->eos = t->eot = t->eom = t->unk = t->pad = -1;
    mcp__bpe_init_bytes(t);
    if (family == MCP_TOKENIZER_FAMILY_SPM) {
        /* SentencePiece's defaults, as llama.cpp's. */
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_bos = true;
        t->add_space_prefix = true;
    }
    st = load_pre(t, g, err);
    if (st == MCP_STATUS_OK) st = load_tokens(t, g, err);
    if (st == MCP_STATUS_OK) st = load_specials(t, g, err);
    if (st == MCP_STATUS_OK && family == MCP_TOKENIZER_FAMILY_BPE) {
        const mcp_gguf_kv *merges;
        st = mcp_gguf_get_array(g, KEY_MERGES, MCP_GGUF_STRING, &merges, err);
        if (st == MCP_STATUS_OK && !merges)
            st = mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "%s is missing: a gpt2 tokenizer needs its merges", KEY_MERGES);
        if (st == MCP_STATUS_OK) st = mcp__bpe_load_merges(t, merges, err);
    }
    if (st == MCP_STATUS_OK) {
        load_byte_tokens(t);
        st = load_pieces(t, err);
    }
    if (st != MCP_STATUS_OK) {
        mcp_tokenizer_free(t);
        return st;
    }
    *out = t;
    return MCP_STATUS_OK;
}

void mcp_tokenizer_free(mcp_tokenizer *t)
{
    if (!t) return;
    mcp_free(t->pre_name);
    mcp_free(t->tokens);
    mcp_free(t->text);
    mcp_free(t->pieces);
    mcp_free(t->tok_slots);
    mcp_free(t->merges);
    mcp_free(t->merge_text);
    mcp_free(t->merge_slots);
    mcp_free(t->special);
    mcp_free(t->eog);
    mcp_free(t);
}

/* ---- encoding ---- */

/* A run of the input: plain text (id < 0) or a special token matched in it. */
typedef struct frag {
    int32_t id;
    uint32_t off, len;
} frag;

typedef struct frags {
    frag *v;
    size_t n, cap;
    bool failed;
} frags;

static void frags_push(frags *f, int32_t id, size_t off, size_t len)
{
    if (f->failed) return;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        frag *v = cap > SIZE_MAX / sizeof *v ? NULL : mcp_realloc(f->v, cap * sizeof *v);
        if (!v) {
            f->failed = true;
            return;
        }
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (frag){id, (uint32_t)off, (uint32_t)len};
}

/* The first occurrence of s[0..sn) in h[0..hn), or NULL (memmem is a GNU
 * extension). Worst case hn * sn; sn is a special token's length. */
static const char *find_bytes(const char *h, size_t hn, const char *s, size_t sn)
{
    if (sn == 0 || hn < sn) return NULL;
    const char *end = h + (hn - sn) + 1;
    for (const char *p = h; p < end;) {
        p = memchr(p, s[0], (size_t)(end - p));
        if (!p) return NULL;
        if (p[sn - 1] == s[sn - 1] && memcmp(p, s, sn) == 0) return p;
        p++;
    }
    return NULL;
}

/* Splits the text at special tokens as llama.cpp's tokenizer_st_partition
 * does: each token in turn, longest first, cuts every plain run at each of
 * its occurrences, left to right. */
/* Whether [at, at + n) lies inside one of the spans (none given: anywhere). */
static bool in_spans(const mcp_tok_span *spans, size_t n_spans, size_t at, size_t n)
{
    if (!spans) return true;
    for (size_t i = 0; i < n_spans; i++)
        if (at >= spans[i].off && n <= spans[i].len && at - spans[i].off <= spans[i].len - n) return true;
    return false;
}

static mcp_status partition(const mcp_tokenizer *t, const char *text, size_t len, bool parse_special,
                            const mcp_tok_span *spans, size_t n_spans, frags *out, mcp_err *err)
{
    frags cur = {0}, next = {0};
    if (len) frags_push(&cur, -1, 0, len);
    /* Which byte pairs occur in the text: a special token whose first two
     * bytes never do is skipped without a scan (most of them, in most
     * texts; Qwen2 has some 300 special tokens). */
    uint64_t pairs[65536 / 64] = {0};
    for (size_t i = 0; i + 1 < len; i++) {
        unsigned pr = (unsigned)(uint8_t)text[i] << 8 | (uint8_t)text[i + 1];
        pairs[pr / 64] |= 1ull << (pr % 64);
    }
    for (uint32_t k = 0; k < t->n_special && !cur.failed; k++) {
        int32_t id = t->special[k];
        const mcp__tok_token *tk = &t->tokens[id];
        if (!parse_special && (tk->attr & (MCP__TOK_CONTROL | MCP__TOK_UNKNOWN))) continue;
        const char *s = t->text + tk->text_off;
        size_t sn = tk->text_len;
        if (sn > len) continue;
        if (sn >= 2) {
            unsigned pr = (unsigned)(uint8_t)s[0] << 8 | (uint8_t)s[1];
            if (!(pairs[pr / 64] >> (pr % 64) & 1)) continue;
        }
        bool any = false;
        for (size_t i = 0; i < cur.n && !any; i++) {
            const frag *f = &cur.v[i];
            if (f->id < 0 && find_bytes(text + f->off, f->len, s, sn)) any = true;
        }
        if (!any) continue;
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            frag f = cur.v[i];
            if (f.id >= 0) {
                frags_push(&next, f.id, f.off, f.len);
                continue;
            }
            bool gated = (tk->attr & (MCP__TOK_CONTROL | MCP__TOK_UNKNOWN)) != 0;
            size_t base = f.off, rest = f.len;
            while (rest > 0) {
                /* A control token's text outside the spans is plain text. */
                const char *m = find_bytes(text + base, rest, s, sn);
                while (m && gated && !in_spans(spans, n_spans, (size_t)(m - text), sn)) {
                    size_t past = (size_t)(m - text) + 1;
                    m = past < f.off + f.len ? find_bytes(text + past, f.off + f.len - past, s, sn) : NULL;
                }
                if (!m) {
                    frags_push(&next, -1, base, rest);
                    break;
                }
                size_t at = (size_t)(m - text);
                size_t left = at - base;
                if (left) frags_push(&next, -1, base, left);
                frags_push(&next, id, at, sn);
                base = at + sn;
                rest = f.off + f.len - base;
                if (tk->attr & MCP__TOK_RSTRIP)
                    while (rest > 0 && isspace((unsigned char)text[base])) base++, rest--;
            }
        }
        frags tmp = cur;
        cur = next;
        next = tmp;
    }
    mcp_free(next.v);
    if (cur.failed || next.failed) {
        mcp_free(cur.v);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory splitting %zu bytes at special tokens", len);
    }
    *out = cur;
    return MCP_STATUS_OK;
}

mcp_status mcp_tokenizer_encode(const mcp_tokenizer *t, const char *text, size_t len, bool add_special,
                                bool parse_special, int32_t **ids, size_t *n_ids, mcp_err *err)
{
    return mcp_tokenizer_encode_spans(t, text, len, add_special, parse_special, NULL, 0, ids, n_ids, err);
}

mcp_status mcp_tokenizer_encode_spans(const mcp_tokenizer *t, const char *text, size_t len, bool add_special,
                                      bool parse_special, const mcp_tok_span *spans, size_t n_spans, int32_t **ids,
                                      size_t *n_ids, mcp_err *err)
{
    if (!ids || !n_ids) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tokenizer: no output pointers");
    *ids = NULL;
    *n_ids = 0;
    if (!t) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tokenizer: no tokenizer");
    if (!text && len) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tokenizer: NULL text of %zu bytes", len);
    if (len > MCP_TOKENIZER_TEXT_MAX)
        return mcp_err_set(err, MCP_STATUS_TOO_LARGE, "tokenizer: text of %zu bytes is longer than the %zu-byte limit",
                           len, MCP_TOKENIZER_TEXT_MAX);
    frags fr = {0};
    mcp_status st = partition(t, text, len, parse_special, spans, n_spans, &fr, err);
    if (st != MCP_STATUS_OK) return st;

    mcp__ids o = {0};
    if (add_special && t->add_bos) mcp__ids_push(&o, t->bos);
    bool prev_special = true; /* SentencePiece: the first run gets the space prefix */
    for (size_t i = 0; i < fr.n && st == MCP_STATUS_OK; i++) {
        const frag *f = &fr.v[i];
        if (f->id >= 0) {
            mcp__ids_push(&o, f->id);
            prev_special = true;
        } else if (t->family == MCP_TOKENIZER_FAMILY_BPE) {
            st = mcp__bpe_encode(t, text + f->off, f->len, &o, err);
        } else {
            st = mcp__spm_encode(t, text + f->off, f->len, t->add_space_prefix && prev_special, &o, err);
            prev_special = false;
        }
    }
    if (add_special && t->add_eos) mcp__ids_push(&o, t->eos);
    mcp_free(fr.v);
    if (st == MCP_STATUS_OK && o.failed)
        st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory encoding %zu bytes", len);
    if (st != MCP_STATUS_OK) {
        mcp_free(o.v);
        return st;
    }
    if (o.n == 0) {
        mcp_free(o.v);
        o.v = NULL;
    }
    *ids = o.v;
    *n_ids = o.n;
    return MCP_STATUS_OK;
}

/* ---- decoding ---- */

static mcp_status bad_id(const mcp_tokenizer *t, int32_t id, mcp_err *err)
{
    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "token id %d is outside the vocabulary (0..%d)", (int)id,
                       (int)t->n_vocab - 1);
}

/* The bytes of token id as they print; NULL-safe for empty pieces. */
static const char *piece_of(const mcp_tokenizer *t, int32_t id, bool render_special, size_t *n)
{
    const mcp__tok_token *tk = &t->tokens[id];
    if (!render_special && (tk->attr & (MCP__TOK_CONTROL | MCP__TOK_UNKNOWN))) {
        *n = 0;
        return "";
    }
    *n = tk->piece_len;
    return tk->piece_len ? t->pieces + tk->piece_off : "";
}

mcp_status mcp_tokenizer_piece(const mcp_tokenizer *t, int32_t id, bool render_special, mcp_buf *out, mcp_err *err)
{
    if (!t || !out) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tokenizer: no tokenizer or buffer");
    if (id < 0 || id >= t->n_vocab) return bad_id(t, id, err);
    size_t n;
    const char *p = piece_of(t, id, render_special, &n);
    mcp_buf_append(out, p, n);
    if (out->failed) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory decoding token %d", (int)id);
    return MCP_STATUS_OK;
}

/* The piece, less the leading space SentencePiece's encoder added, while
 * that removal is pending (*strip). */
static const char *piece_stripped(const mcp_tokenizer *t, int32_t id, bool render_special, bool *strip, size_t *n)
{
    const char *p = piece_of(t, id, render_special, n);
    if (*strip && *n > 0) {
        if (p[0] == ' ') p++, (*n)--;
        *strip = false;
    } else if (*strip && !(t->tokens[id].attr & MCP__TOK_CONTROL)) {
        *strip = false;
    }
    return p;
}

mcp_status mcp_tokenizer_decode(const mcp_tokenizer *t, const int32_t *ids, size_t n, bool render_special, mcp_buf *out,
                                mcp_err *err)
{
    if (!t || !out || (!ids && n)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tokenizer: bad decode arguments");
    bool strip = t->add_space_prefix;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) return bad_id(t, ids[i], err);
        size_t len;
        const char *p = piece_stripped(t, ids[i], render_special, &strip, &len);
        mcp_buf_append(out, p, len);
    }
    if (out->failed) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory decoding %zu tokens", n);
    return MCP_STATUS_OK;
}

/* ---- streaming ---- */

void mcp_tokenizer_stream_init(mcp_tokenizer_stream *s, const mcp_tokenizer *t, bool render_special)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    s->render_special = render_special;
    s->strip_space = t && t->add_space_prefix;
}

void mcp_tokenizer_stream_free(mcp_tokenizer_stream *s)
{
    if (s) mcp_buf_free(&s->scratch);
}

/* How many bytes at s[0..n) could begin a well-formed sequence (0 when s[0]
 * cannot), and the length that sequence needs. */
static size_t utf8_prefix(const uint8_t *s, size_t n, size_t *need)
{
    uint8_t b0 = s[0], lo = 0x80, hi = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        *need = 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        *need = 3;
        if (b0 == 0xe0) lo = 0xa0;
        if (b0 == 0xed) hi = 0x9f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        *need = 4;
        if (b0 == 0xf0) lo = 0x90;
        if (b0 == 0xf4) hi = 0x8f;
    } else {
        *need = 1;
        return 0;
    }
    size_t k = 1;
    if (k < n && k < *need && s[1] >= lo && s[1] <= hi) k++;
    else return k;
    while (k < n && k < *need && (s[k] & 0xc0) == 0x80) k++;
    return k;
}

static const char replacement[3] = {'\xef', '\xbf', '\xbd'};

mcp_status mcp_tokenizer_stream_feed(mcp_tokenizer_stream *s, int32_t id, mcp_buf *out, mcp_err *err)
{
    if (!s || !s->t || !out) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tokenizer: bad stream arguments");
    const mcp_tokenizer *t = s->t;
    if (id < 0 || id >= t->n_vocab) return bad_id(t, id, err);
    bool strip = s->strip_space;
    size_t n;
    const char *p = piece_stripped(t, id, s->render_special, &strip, &n);
    s->strip_space = strip;

    mcp_buf *b = &s->scratch;
    mcp_buf_reset(b);
    mcp_buf_append(b, s->held, s->n_held);
    mcp_buf_append(b, p, n);
    if (b->failed) {
        mcp_buf_free(b);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory decoding token %d", (int)id);
    }
    s->n_held = 0;
    const uint8_t *d = b->data;
    size_t len = b->len, i = 0;
    while (i < len) {
        size_t run = mcp_utf8_valid_prefix(d + i, len - i);
        mcp_buf_append(out, d + i, run);
        i += run;
        if (i == len) break;
        size_t need, k = utf8_prefix(d + i, len - i, &need);
        if (k > 0 && i + k == len && k < need) {
            /* An incomplete character at the end: wait for its rest. */
            memcpy(s->held, d + i, k);
            s->n_held = (uint8_t)k;
            break;
        }
        mcp_buf_append(out, replacement, 3);
        i += k ? k : 1;
    }
    if (out->failed) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory decoding token %d", (int)id);
    return MCP_STATUS_OK;
}

mcp_status mcp_tokenizer_stream_flush(mcp_tokenizer_stream *s, mcp_buf *out, mcp_err *err)
{
    if (!s || !out) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tokenizer: bad stream arguments");
    if (s->n_held) mcp_buf_append(out, replacement, 3);
    s->n_held = 0;
    s->strip_space = s->t && s->t->add_space_prefix;
    if (out->failed) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory flushing the decoder");
    return MCP_STATUS_OK;
}

/* ---- queries ---- */

int32_t mcp_tokenizer_n_vocab(const mcp_tokenizer *t) { return t->n_vocab; }
mcp_tokenizer_family mcp_tokenizer_family_of(const mcp_tokenizer *t) { return t->family; }
const char *mcp_tokenizer_model_name(const mcp_tokenizer *t)
{
    return t->family == MCP_TOKENIZER_FAMILY_BPE ? "gpt2" : "llama";
}
const char *mcp_tokenizer_pre_name(const mcp_tokenizer *t) { return t->pre_name; }
int32_t mcp_tokenizer_bos(const mcp_tokenizer *t) { return t->bos; }
int32_t mcp_tokenizer_eos(const mcp_tokenizer *t) { return t->eos; }
int32_t mcp_tokenizer_eot(const mcp_tokenizer *t) { return t->eot; }
int32_t mcp_tokenizer_eom(const mcp_tokenizer *t) { return t->eom; }
int32_t mcp_tokenizer_unk(const mcp_tokenizer *t) { return t->unk; }
int32_t mcp_tokenizer_pad(const mcp_tokenizer *t) { return t->pad; }
bool mcp_tokenizer_add_bos(const mcp_tokenizer *t) { return t->add_bos; }
bool mcp_tokenizer_add_eos(const mcp_tokenizer *t) { return t->add_eos; }

bool mcp_tokenizer_is_eog(const mcp_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_vocab) return false;
    return bsearch(&id, t->eog, t->n_eog, sizeof *t->eog, cmp_i32) != NULL;
}

mcp_token_type mcp_tokenizer_token_type(const mcp_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_vocab) return MCP_TOKEN_TYPE_UNDEFINED;
    return (mcp_token_type)t->tokens[id].type;
}

const char *mcp_tokenizer_token_text(const mcp_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    size_t n;
    const char *s = tok_text(t, id, &n);
    if (len) *len = n;
    return s;
}

int32_t mcp_tokenizer_find(const mcp_tokenizer *t, const char *text, size_t len)
{
    if (!t || (!text && len)) return -1;
    return mcp__tok_lookup(t, text ? text : "", len);
}

bool mcp__grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) {
        if (cap2 > SIZE_MAX / 2) return false;
        cap2 *= 2;
    }
    size_t bytes;
    if (!mcp_mul_overflow_size(cap2, elem, &bytes)) return false;
    void *q = mcp_realloc(*p, bytes);
    if (!q) return false;
    *p = q;
    *cap = cap2;
    return true;
}

static bool bigram_before(const mcp__bigram *a, const mcp__bigram *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

bool mcp__heap_push(mcp__heap *h, mcp__bigram g)
{
    if (!mcp__grow((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v)) return false;
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!bigram_before(&g, &h->v[up])) break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = g;
    return true;
}

mcp__bigram mcp__heap_pop(mcp__heap *h)
{
    mcp__bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n) h->v[i] = last;
    return top;
}

bool mcp__merge_next(mcp__heap *h, mcp__sym *syms, mcp__bigram *g)
{
    while (h->n) {
        *g = mcp__heap_pop(h);
        mcp__sym *l = &syms[g->left], *r = &syms[g->right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != g->size) continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) syms[r->next].prev = g->left;
        return true;
    }
    return false;
}
