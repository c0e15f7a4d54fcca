/* libFuzzer target: the tokenizers (src/llm/tokenizer*.c).
 *
 * Input: one control byte, then the payload.
 *   control & 0x80 clear: the payload is text. It is encoded by every
 *     tokenizer (tiny vocabularies built here, one per family and
 *     pre-tokenizer, plus llama.cpp's vocab files when MCP_LLAMA_CPP_DIR
 *     names a fetched llama.cpp tree), with add_special = bit 0 and
 *     parse_special = bit 1; every id must be in range, decoding must give
 *     the text back where the family promises it, and the streaming decoder
 *     must only ever emit well-formed UTF-8 and agree with the one-shot
 *     decoder.
 *   control & 0x80 set: the payload is a GGUF file; a tokenizer read from
 *     it must load or fail with a message, and then encode and decode. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../llm/gguf_build.h"
#include "base/base.h"
#include "llm/gguf.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TOKENIZERS 16

static mcp_tokenizer *g_toks[MAX_TOKENIZERS];
static bool g_lossless[MAX_TOKENIZERS];
static mcp_gguf *g_files[MAX_TOKENIZERS];
static mcp_buf g_images[MAX_TOKENIZERS];
static int g_n;
static bool g_ready;

/* Whether every byte has a token (byte-level character or <0xXX>), so no
 * text can lose bytes. */
static bool covers_bytes(const mcp_tokenizer *t)
{
    for (unsigned b = 0, next = 0x100; b < 256; b++) {
        char s[8];
        size_t n;
        if (mcp_tokenizer_family_of(t) == MCP_TOKENIZER_FAMILY_SPM) {
            n = (size_t)snprintf(s, sizeof s, "<0x%02X>", b);
        } else {
            bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
            n = mcp_utf8_encode(printable ? b : next++, (uint8_t *)s);
        }
        if (mcp_tokenizer_find(t, s, n) < 0) return false;
    }
    return true;
}

static void add_image(mcp_buf *b)
{
    char msg[256];
    mcp_err err = {msg, sizeof msg};
    int i = g_n;
    g_images[i] = *b;
    MCP_ASSERT(!b->failed);
    MCP_ASSERT(mcp_gguf_parse(g_images[i].data, g_images[i].len, &g_files[i], &err) == MCP_STATUS_OK);
    MCP_ASSERT(mcp_tokenizer_from_gguf(g_files[i], &g_toks[i], &err) == MCP_STATUS_OK);
    g_lossless[i] = covers_bytes(g_toks[i]);
    g_n++;
}

/* A tiny byte-level BPE vocabulary: the 256 byte characters, a few merges
 * and a control token. */
static void tiny_bpe(const char *pre)
{
    static const char *const extra[] = {"Ġt", "he", "Ġthe", "in", "Ġa", "<|endoftext|>", "<|im_start|>", "[PAD0]"};
    static const char *const merges[] = {"Ġ t", "h e", "Ġt he", "i n", "Ġ a"};
    const char *tokens[256 + 8];
    char chars[256][3];
    for (unsigned b = 0, next = 0x100; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        uint8_t u[4];
        size_t n = mcp_utf8_encode(printable ? b : next++, u);
        memcpy(chars[b], u, n);
        chars[b][n] = 0;
        tokens[b] = chars[b];
    }
    for (int i = 0; i < 8; i++) tokens[256 + i] = extra[i];
    int32_t types[256 + 8];
    for (int i = 0; i < 256 + 8; i++) types[i] = i == 256 + 7 ? 4 : i >= 256 + 5 ? 3 : 1;
    mcp_buf b = {0};
    gb_header(&b, 3, 0, 7);
    gb_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    gb_kv_str(&b, "tokenizer.ggml.pre", pre);
    gb_kv_strs(&b, "tokenizer.ggml.tokens", tokens, 256 + 8);
    gb_kv_i32s(&b, "tokenizer.ggml.token_type", types, 256 + 8);
    gb_kv_strs(&b, "tokenizer.ggml.merges", merges, 5);
    gb_kv_u32(&b, "tokenizer.ggml.eos_token_id", 256 + 5);
    gb_kv_u32(&b, "tokenizer.ggml.bos_token_id", 256 + 6); /* Llama 3 adds a BOS */
    add_image(&b);
}

/* A tiny SentencePiece vocabulary with byte fallback. */
static void tiny_spm(void)
{
    static const char *const extra[] = {"<unk>", "<s>", "</s>", "▁", "▁t", "he", "▁the", "▁a", "in", "<|user|>"};
    const char *tokens[10 + 256];
    char hex[256][7];
    float scores[10 + 256];
    int32_t types[10 + 256];
    for (int i = 0; i < 10; i++) {
        tokens[i] = extra[i];
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : (i <= 2 || i == 9) ? 3 : 1;
    }
    for (int b = 0; b < 256; b++) {
        snprintf(hex[b], sizeof hex[b], "<0x%02X>", b);
        tokens[10 + b] = hex[b];
        scores[10 + b] = 0;
        types[10 + b] = 6;
    }
    mcp_buf b = {0};
    gb_header(&b, 3, 0, 4);
    gb_kv_str(&b, "tokenizer.ggml.model", "llama");
    gb_kv_strs(&b, "tokenizer.ggml.tokens", tokens, 10 + 256);
    gb_kv_f32s(&b, "tokenizer.ggml.scores", scores, 10 + 256);
    gb_kv_i32s(&b, "tokenizer.ggml.token_type", types, 10 + 256);
    add_image(&b);
}

static void setup(void)
{
    g_ready = true;
    tiny_bpe("gpt-2");
    tiny_bpe("llama-bpe");
    tiny_bpe("qwen2");
    tiny_bpe("qwen35");
    tiny_spm();
#ifdef MCP_LLAMA_CPP_DIR
    /* The real vocabularies, when fetched; absent files are skipped. */
    static const char *const names[] = {"gpt-2", "llama-bpe", "qwen2", "qwen35", "llama-spm", "phi-3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && g_n < MAX_TOKENIZERS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/models/ggml-vocab-%s.gguf", MCP_LLAMA_CPP_DIR, names[i]);
        if (mcp_gguf_open(path, &g_files[g_n], NULL) != MCP_STATUS_OK) continue;
        if (mcp_tokenizer_from_gguf(g_files[g_n], &g_toks[g_n], NULL) != MCP_STATUS_OK) {
            mcp_gguf_close(g_files[g_n]);
            continue;
        }
        g_lossless[g_n] = covers_bytes(g_toks[g_n]);
        g_n++;
    }
#endif
}

static bool has_lower_one_eighth_block(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i + 3 <= n; i++)
        if (s[i] == 0xe2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) return true;
    return false;
}

static void check_text(const mcp_tokenizer *t, bool lossless, const uint8_t *text, size_t len, bool add_special,
                       bool parse_special)
{
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    int32_t *ids = NULL;
    size_t n = 0;
    msg[0] = 0;
    if (mcp_tokenizer_encode(t, (const char *)text, len, add_special, parse_special, &ids, &n, &err) != MCP_STATUS_OK) {
        MCP_ASSERT(msg[0] != 0);
        return;
    }
    bool specials = false;
    int32_t n_vocab = mcp_tokenizer_n_vocab(t);
    for (size_t i = 0; i < n; i++) {
        MCP_ASSERT(ids[i] >= 0 && ids[i] < n_vocab);
        mcp_token_type ty = mcp_tokenizer_token_type(t, ids[i]);
        if (ty == MCP_TOKEN_TYPE_CONTROL || ty == MCP_TOKEN_TYPE_USER_DEFINED || ty == MCP_TOKEN_TYPE_UNKNOWN)
            specials = true;
    }
    mcp_buf once = {0}, streamed = {0};
    MCP_ASSERT(mcp_tokenizer_decode(t, ids, n, false, &once, &err) == MCP_STATUS_OK);
    /* Exact round trip: byte-level BPE always keeps every byte;
     * SentencePiece does when no special token cut the text (after one
     * the encoder adds a space, as llama.cpp does). BOS and EOS decode to
     * nothing. A vocabulary without every byte's token drops what it
     * cannot spell; SentencePiece's space character U+2581 written in the
     * text decodes as a space. */
    bool spm = mcp_tokenizer_family_of(t) == MCP_TOKENIZER_FAMILY_SPM;
    if (lossless && !parse_special && (!spm || (!specials && !has_lower_one_eighth_block(text, len))))
        MCP_ASSERT(once.len == len && (len == 0 || memcmp(once.data, text, len) == 0));

    mcp_tokenizer_stream s;
    mcp_tokenizer_stream_init(&s, t, false);
    for (size_t i = 0; i < n; i++) {
        size_t before = streamed.len;
        MCP_ASSERT(mcp_tokenizer_stream_feed(&s, ids[i], &streamed, &err) == MCP_STATUS_OK);
        if (streamed.len > before)
            MCP_ASSERT(mcp_utf8_valid_prefix(streamed.data + before, streamed.len - before) == streamed.len - before);
    }
    MCP_ASSERT(mcp_tokenizer_stream_flush(&s, &streamed, &err) == MCP_STATUS_OK);
    /* Where the one-shot text is well-formed, the stream is the same. */
    if (once.len == 0 || mcp_utf8_valid_prefix(once.data, once.len) == once.len)
        MCP_ASSERT(streamed.len == once.len && (once.len == 0 || memcmp(streamed.data, once.data, once.len) == 0));
    mcp_tokenizer_stream_free(&s);
    mcp_buf_free(&once);
    mcp_buf_free(&streamed);
    mcp_free(ids);
}

static void check_gguf(const uint8_t *data, size_t size)
{
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_gguf *g = NULL;
    if (mcp_gguf_parse(data, size, &g, &err) != MCP_STATUS_OK) return;
    mcp_tokenizer *t = NULL;
    msg[0] = 0;
    if (mcp_tokenizer_from_gguf(g, &t, &err) == MCP_STATUS_OK) {
        static const char text[] = "Hello <|endoftext|> world 🦙 \xff 123 </s>";
        bool lossless = covers_bytes(t);
        check_text(t, lossless, (const uint8_t *)text, sizeof text - 1, true, true);
        check_text(t, lossless, (const uint8_t *)text, sizeof text - 1, false, false);
        mcp_buf piece = {0};
        for (int32_t id = -1; id <= mcp_tokenizer_n_vocab(t) && id < 64; id++)
            (void)mcp_tokenizer_piece(t, id, true, &piece, NULL);
        mcp_buf_free(&piece);
        mcp_tokenizer_free(t);
    } else {
        MCP_ASSERT(msg[0] != 0);
    }
    mcp_gguf_close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_ready) setup();
    if (size == 0) return 0;
    uint8_t control = data[0];
    if (control & 0x80) {
        check_gguf(data + 1, size - 1);
        return 0;
    }
    for (int i = 0; i < g_n; i++) check_text(g_toks[i], g_lossless[i], data + 1, size - 1, control & 1, control & 2);
    return 0;
}
