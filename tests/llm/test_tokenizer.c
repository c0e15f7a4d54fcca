/* Tokenizer tests: test_tokenizer PATH/ggml-vocab-X.gguf
 *
 * Checks every test vector of llama.cpp's PATH.inp / PATH.out pair the way
 * its tests/test-tokenizer-0.cpp does (encode with add_special = false and
 * parse_special = false; ids exactly equal), that decoding gives the text
 * back, special-token parsing, streaming detokenization, invalid UTF-8,
 * bad ids, and vocabularies with missing or malformed keys (built in
 * memory). The vocab files come from tools/fetch-llama-cpp.sh. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../unit/test_util.h"
#include "base/base.h"
#include "gguf_build.h"
#include "llm/gguf.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"

static const char *g_path;
static mcp_gguf *g_gguf;
static mcp_tokenizer *g_tok;

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool utf8_valid(const uint8_t *s, size_t n) { return n == 0 || mcp_utf8_valid_prefix(s, n) == n; }

/* Encodes, or records a failure and returns false. */
static bool encode(const mcp_tokenizer *t, const char *s, size_t n, bool add_special, bool parse_special, int32_t **ids,
                   size_t *n_ids)
{
    char msg[256] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_tokenizer_encode(t, s, n, add_special, parse_special, ids, n_ids, &err);
    if (st != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, __LINE__, "encode of %zu bytes: %s: %s", n, mcp_status_str(st), msg);
        return false;
    }
    return true;
}

static void print_ids(const char *label, const int32_t *ids, size_t n)
{
    fprintf(stderr, "    %s:", label);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
    fputc('\n', stderr);
}

/* ---- llama.cpp's test vectors ---- */

static void test_vectors(void)
{
    char inp_path[4096], out_path[4096];
    snprintf(inp_path, sizeof inp_path, "%s.inp", g_path);
    snprintf(out_path, sizeof out_path, "%s.out", g_path);
    uint8_t *inp = NULL, *outp = NULL;
    size_t inp_len = 0, out_len = 0;
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    TU_REQUIRE_OK(mcp_file_read(inp_path, &inp, &inp_len, &err), msg);
    mcp_status st = mcp_file_read(out_path, &outp, &out_len, &err);
    if (st != MCP_STATUS_OK) {
        mcp_free(inp);
        TU_REQUIRE_OK(st, msg);
    }

    /* Inputs: separated (and ended) by "\n__ggml_vocab_test__\n". Outputs:
     * one line of space-separated ids per input. */
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    size_t n_cases = 0, n_exact = 0, n_round = 0, pos = 0, opos = 0;
    while (pos < inp_len) {
        const char *start = (const char *)inp + pos;
        const char *next = NULL;
        for (size_t i = pos; i + sep_len <= inp_len; i++)
            if (memcmp(inp + i, sep, sep_len) == 0) {
                next = (const char *)inp + i;
                break;
            }
        size_t len = next ? (size_t)(next - start) : inp_len - pos;
        pos = next ? (size_t)(next - (const char *)inp) + sep_len : inp_len;

        /* The expected ids. */
        int32_t want[4096];
        size_t n_want = 0;
        if (opos >= out_len) {
            TU_FAIL_AT(__FILE__, __LINE__, "%s has fewer lines than %s has tests", out_path, inp_path);
            break;
        }
        size_t line_end = opos;
        while (line_end < out_len && outp[line_end] != '\n') line_end++;
        for (size_t i = opos; i < line_end;) {
            while (i < line_end && (outp[i] == ' ' || outp[i] == '\r')) i++;
            if (i >= line_end) break;
            long v = strtol((const char *)outp + i, NULL, 10);
            while (i < line_end && outp[i] != ' ') i++;
            if (n_want < sizeof want / sizeof want[0]) want[n_want++] = (int32_t)v;
        }
        opos = line_end + 1;
        n_cases++;

        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (!encode(g_tok, start, len, false, false, &ids, &n_ids)) continue;
        bool same = n_ids == n_want && (n_ids == 0 || memcmp(ids, want, n_ids * sizeof *ids) == 0);
        tu_checks++;
        if (same) {
            n_exact++;
        } else {
            TU_FAIL_AT(__FILE__, __LINE__, "test %zu: '%.*s' encodes differently", n_cases, (int)len, start);
            print_ids("want", want, n_want);
            print_ids("got ", ids, n_ids);
        }
        mcp_buf text = {0};
        st = mcp_tokenizer_decode(g_tok, ids, n_ids, false, &text, &err);
        tu_checks++;
        if (st == MCP_STATUS_OK && text.len == len && (len == 0 || memcmp(text.data, start, len) == 0)) {
            n_round++;
        } else {
            TU_FAIL_AT(__FILE__, __LINE__, "test %zu: '%.*s' decodes to '%.*s' (%s)", n_cases, (int)len, start,
                       (int)text.len, text.data ? (const char *)text.data : "", msg);
        }
        mcp_buf_free(&text);
        mcp_free(ids);
    }
    TU_CHECK(n_cases > 0);
    fprintf(stderr, "    %s: %zu/%zu test vectors exact, %zu/%zu round trips exact\n", g_path, n_exact, n_cases, n_round,
            n_cases);
    mcp_free(inp);
    mcp_free(outp);
}

/* The vectors joined into one long text: the same ids as their parts is not
 * guaranteed (words join), but the round trip is, and it times the encoder
 * on a few hundred KiB. */
static void test_long_text(void)
{
    mcp_buf text = {0};
    static const char *const parts[] = {"Hello, y'all! How are you 😁 ?我想在apple工作1314151天～ ",
                                        "нещо на Български កាន់តែពិសេសអាចខលចេញ 3333333 ",
                                        "\n\n   \t Cửa Việt 🦙.cpp 'RE you sure? "};
    for (int r = 0; r < 2000; r++) mcp_buf_puts(&text, parts[r % 3]);
    TU_REQUIRE(!text.failed);
    int64_t t0 = mcp_now_us();
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!encode(g_tok, (const char *)text.data, text.len, false, false, &ids, &n_ids)) {
        mcp_buf_free(&text);
        return;
    }
    int64_t t1 = mcp_now_us();
    mcp_buf back = {0};
    TU_CHECK_STATUS(mcp_tokenizer_decode(g_tok, ids, n_ids, false, &back, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK(back.len == text.len && memcmp(back.data, text.data, text.len) == 0);
    fprintf(stderr, "    %zu bytes -> %zu tokens in %.1f ms\n", text.len, n_ids, (double)(t1 - t0) / 1000.0);
    mcp_buf_free(&back);
    mcp_buf_free(&text);
    mcp_free(ids);
}

/* ---- special tokens ---- */

static bool contains(const int32_t *ids, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

static void test_special(void)
{
    int32_t eos = mcp_tokenizer_eos(g_tok);
    TU_REQUIRE(eos >= 0);
    TU_CHECK(mcp_tokenizer_is_eog(g_tok, eos));
    TU_CHECK(!mcp_tokenizer_is_eog(g_tok, -1));
    TU_CHECK(!mcp_tokenizer_is_eog(g_tok, mcp_tokenizer_n_vocab(g_tok)));
    size_t eos_len;
    const char *eos_text = mcp_tokenizer_token_text(g_tok, eos, &eos_len);
    TU_REQUIRE(eos_text && eos_len > 0);
    TU_CHECK_INT(mcp_tokenizer_token_type(g_tok, eos), MCP_TOKEN_TYPE_CONTROL);
    TU_CHECK_INT(mcp_tokenizer_find(g_tok, eos_text, eos_len), eos);

    /* "Hello<eos> world": parsed when asked, plain text otherwise. */
    char text[256];
    int n = snprintf(text, sizeof text, "Hello%.*s world", (int)eos_len, eos_text);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!encode(g_tok, text, (size_t)n, false, true, &ids, &n_ids)) return;
    TU_CHECK(contains(ids, n_ids, eos));
    mcp_buf out = {0};
    /* SentencePiece puts a space before the text after a special token too
     * (llama.cpp and SentencePiece both do), and only the first one is
     * removed when decoding, as in llama.cpp: " world" comes back with two. */
    bool spm = mcp_tokenizer_family_of(g_tok) == MCP_TOKENIZER_FAMILY_SPM;
    char want[256];
    snprintf(want, sizeof want, "Hello%.*s%s world", (int)eos_len, eos_text, spm ? " " : "");
    TU_CHECK_STATUS(mcp_tokenizer_decode(g_tok, ids, n_ids, true, &out, NULL), MCP_STATUS_OK, NULL);
    mcp_buf_append(&out, "", 1);
    TU_CHECK_STR((const char *)out.data, want);
    mcp_buf_reset(&out);
    TU_CHECK_STATUS(mcp_tokenizer_decode(g_tok, ids, n_ids, false, &out, NULL), MCP_STATUS_OK, NULL);
    mcp_buf_append(&out, "", 1);
    TU_CHECK_STR((const char *)out.data, spm ? "Hello  world" : "Hello world");
    mcp_free(ids);

    if (!encode(g_tok, text, (size_t)n, false, false, &ids, &n_ids)) {
        mcp_buf_free(&out);
        return;
    }
    TU_CHECK(!contains(ids, n_ids, eos));
    mcp_buf_reset(&out);
    TU_CHECK_STATUS(mcp_tokenizer_decode(g_tok, ids, n_ids, false, &out, NULL), MCP_STATUS_OK, NULL);
    mcp_buf_append(&out, "", 1);
    TU_CHECK_STR((const char *)out.data, text);
    mcp_free(ids);

    /* add_special: BOS first when the model asks for it; decoding skips it
     * (a control token) and, for SentencePiece, still drops the space the
     * encoder put before the text. */
    if (!encode(g_tok, "Hello", 5, true, false, &ids, &n_ids)) {
        mcp_buf_free(&out);
        return;
    }
    if (mcp_tokenizer_add_bos(g_tok)) {
        TU_CHECK(n_ids >= 2 && ids[0] == mcp_tokenizer_bos(g_tok));
    } else {
        TU_CHECK(n_ids >= 1 && ids[0] != mcp_tokenizer_bos(g_tok));
    }
    mcp_buf_reset(&out);
    TU_CHECK_STATUS(mcp_tokenizer_decode(g_tok, ids, n_ids, false, &out, NULL), MCP_STATUS_OK, NULL);
    mcp_buf_append(&out, "", 1);
    TU_CHECK_STR((const char *)out.data, "Hello");
    mcp_free(ids);

    /* Two specials in a row and one at the very end. */
    n = snprintf(text, sizeof text, "%.*s%.*sa%.*s", (int)eos_len, eos_text, (int)eos_len, eos_text, (int)eos_len,
                 eos_text);
    if (!encode(g_tok, text, (size_t)n, false, true, &ids, &n_ids)) {
        mcp_buf_free(&out);
        return;
    }
    TU_CHECK(n_ids >= 4 && ids[0] == eos && ids[1] == eos && ids[n_ids - 1] == eos);
    mcp_free(ids);
    mcp_buf_free(&out);
}

/* ---- streaming ---- */

static void stream_all(const int32_t *ids, size_t n, const char *want, size_t want_len, bool *split_seen)
{
    mcp_tokenizer_stream s;
    mcp_tokenizer_stream_init(&s, g_tok, false);
    mcp_buf out = {0};
    char msg[256] = "";
    mcp_err err = {msg, sizeof msg};
    for (size_t i = 0; i < n; i++) {
        size_t before = out.len;
        TU_CHECK_STATUS(mcp_tokenizer_stream_feed(&s, ids[i], &out, &err), MCP_STATUS_OK, msg);
        /* Every append on its own is whole characters. */
        if (out.len > before) TU_CHECK(utf8_valid(out.data + before, out.len - before));
        if (s.n_held) *split_seen = true;
    }
    TU_CHECK_STATUS(mcp_tokenizer_stream_flush(&s, &out, &err), MCP_STATUS_OK, msg);
    TU_CHECK(out.len == want_len && memcmp(out.data, want, want_len) == 0);
    if (out.len != want_len || memcmp(out.data, want, want_len) != 0)
        fprintf(stderr, "    streamed '%.*s'\n    wanted   '%.*s'\n", (int)out.len, (const char *)out.data,
                (int)want_len, want);
    mcp_buf_free(&out);
    mcp_tokenizer_stream_free(&s);
}

/* The token that stands for one byte: the GPT-2 character or <0xXX>. */
static int32_t byte_token(uint8_t b)
{
    char s[8];
    size_t n;
    if (mcp_tokenizer_family_of(g_tok) == MCP_TOKENIZER_FAMILY_SPM) {
        n = (size_t)snprintf(s, sizeof s, "<0x%02X>", b);
    } else {
        /* GPT-2's mapping: printable bytes are themselves, others from U+0100. */
        uint32_t cp = b;
        bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        if (!printable) {
            uint32_t k = 0;
            for (unsigned c = 0; c < b; c++)
                if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae)) k++;
            cp = 0x100 + k;
        }
        n = mcp_utf8_encode(cp, (uint8_t *)s);
    }
    return mcp_tokenizer_find(g_tok, s, n);
}

/* Whether every byte has its token, so no text loses bytes (true of the
 * vocabularies ctest runs; some others, MPT's, lack a few). */
static bool covers_bytes(void)
{
    for (unsigned b = 0; b < 256; b++)
        if (byte_token((uint8_t)b) < 0) return false;
    return true;
}

static void test_stream(void)
{
    static const char text[] = "Grüße, 世界! 🦙🚀 naïve café 日本語の テキスト 😶‍🌫️ ✅ Ελληνικά";
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!encode(g_tok, text, sizeof text - 1, true, false, &ids, &n_ids)) return;
    bool split = false;
    stream_all(ids, n_ids, text, sizeof text - 1, &split);
    mcp_free(ids);

    /* A character split over byte tokens: nothing comes out until its last
     * byte, then all of it. */
    if (!covers_bytes()) {
        fprintf(stderr, "    the vocabulary lacks byte tokens: byte-level stream checks skipped\n");
        return;
    }
    static const uint8_t llama[] = {0xf0, 0x9f, 0xa6, 0x99}; /* 🦙 */
    int32_t bt[4];
    for (int i = 0; i < 4; i++) bt[i] = byte_token(llama[i]);
    TU_REQUIRE(bt[0] >= 0 && bt[1] >= 0 && bt[2] >= 0 && bt[3] >= 0);
    mcp_tokenizer_stream s;
    mcp_tokenizer_stream_init(&s, g_tok, false);
    mcp_buf out = {0};
    for (int i = 0; i < 3; i++) {
        TU_CHECK_STATUS(mcp_tokenizer_stream_feed(&s, bt[i], &out, NULL), MCP_STATUS_OK, NULL);
        TU_CHECK_INT(out.len, 0);
    }
    TU_CHECK_STATUS(mcp_tokenizer_stream_feed(&s, bt[3], &out, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK(out.len == 4 && memcmp(out.data, llama, 4) == 0);

    /* Bytes that cannot form a character: U+FFFD, once per maximal
     * ill-formed subsequence, and the next character is kept. */
    mcp_buf_reset(&out);
    int32_t bad = byte_token(0xff), a = byte_token('A');
    TU_REQUIRE(bad >= 0 && a >= 0);
    TU_CHECK_STATUS(mcp_tokenizer_stream_feed(&s, bad, &out, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK(out.len == 3 && memcmp(out.data, "\xef\xbf\xbd", 3) == 0);
    mcp_buf_reset(&out);
    TU_CHECK_STATUS(mcp_tokenizer_stream_feed(&s, bt[0], &out, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK_STATUS(mcp_tokenizer_stream_feed(&s, bt[1], &out, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK_INT(out.len, 0);
    TU_CHECK_STATUS(mcp_tokenizer_stream_feed(&s, a, &out, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK(out.len == 4 && memcmp(out.data, "\xef\xbf\xbd" "A", 4) == 0);
    /* An incomplete character at the end of the stream: U+FFFD on flush. */
    mcp_buf_reset(&out);
    TU_CHECK_STATUS(mcp_tokenizer_stream_feed(&s, bt[0], &out, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK_INT(out.len, 0);
    TU_CHECK_STATUS(mcp_tokenizer_stream_flush(&s, &out, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK(out.len == 3 && memcmp(out.data, "\xef\xbf\xbd", 3) == 0);
    /* A bad id is an error and leaves the stream usable. */
    char msg[256] = "";
    mcp_err err = {msg, sizeof msg};
    TU_CHECK_STATUS(mcp_tokenizer_stream_feed(&s, -5, &out, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "-5");
    mcp_buf_free(&out);
    mcp_tokenizer_stream_free(&s);

    /* Each emoji and CJK character of the text, encoded alone and streamed:
     * byte-level BPE splits most of them over tokens. */
    static const char *const pieces[] = {"🦙", "😶‍🌫️", "我想在", "🚀", "テキスト", "ក"};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        if (!encode(g_tok, pieces[i], strlen(pieces[i]), false, false, &ids, &n_ids)) return;
        stream_all(ids, n_ids, pieces[i], strlen(pieces[i]), &split);
        mcp_free(ids);
    }
    if (mcp_tokenizer_family_of(g_tok) == MCP_TOKENIZER_FAMILY_BPE) TU_CHECK(split);
}

/* ---- hostile input ---- */

static void test_invalid_utf8(void)
{
    bool lossless = covers_bytes();
#define LIT(s) {s, sizeof s - 1}
    static const struct {
        const char *s;
        size_t n;
    } cases[] = {
        LIT("\xff"),
        LIT("\xc3"),
        LIT("a\xe2\x82"),
        LIT("\xed\xa0\x80 surrogate"),
        LIT("\xc0\xaf overlong"),
        LIT("\xf4\x90\x80\x80 too big"),
        LIT("Hello \x80\x80\x80 world\xfe"),
        LIT("nul\0inside"),
        LIT("\xe4\xb8"),
        LIT("'\xff's \xf0\x9f\xa6"),
    };
#undef LIT
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (!encode(g_tok, cases[i].s, cases[i].n, false, false, &ids, &n_ids)) continue;
        for (size_t k = 0; k < n_ids; k++) TU_CHECK(ids[k] >= 0 && ids[k] < mcp_tokenizer_n_vocab(g_tok));
        /* Defined result: the bytes come back exactly. */
        mcp_buf out = {0};
        TU_CHECK_STATUS(mcp_tokenizer_decode(g_tok, ids, n_ids, false, &out, NULL), MCP_STATUS_OK, NULL);
        if (lossless) TU_CHECK(out.len == cases[i].n && memcmp(out.data, cases[i].s, cases[i].n) == 0);
        mcp_buf_free(&out);
        mcp_free(ids);
    }
    /* Pseudo-random bytes. */
    uint32_t x = 12345;
    char buf[512];
    for (int r = 0; r < 50; r++) {
        size_t n = (size_t)(r * 10 + 1);
        for (size_t i = 0; i < n; i++) {
            x = x * 1664525u + 1013904223u;
            buf[i] = (char)(x >> 24);
        }
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (!encode(g_tok, buf, n, r & 1, r & 2, &ids, &n_ids)) continue;
        mcp_buf out = {0};
        TU_CHECK_STATUS(mcp_tokenizer_decode(g_tok, ids, n_ids, false, &out, NULL), MCP_STATUS_OK, NULL);
        if (lossless && !(r & 2)) TU_CHECK(out.len == n && memcmp(out.data, buf, n) == 0);
        mcp_buf_free(&out);
        mcp_free(ids);
    }
}

static void test_bad_args(void)
{
    char msg[256] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_buf out = {0};
    int32_t n = mcp_tokenizer_n_vocab(g_tok);
    TU_CHECK_STATUS(mcp_tokenizer_piece(g_tok, n, false, &out, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    char want[32];
    snprintf(want, sizeof want, "%d", (int)n);
    TU_CHECK_CONTAINS(msg, want);
    TU_CHECK_STATUS(mcp_tokenizer_piece(g_tok, -1, false, &out, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "-1");
    int32_t ids[] = {0, 1, INT32_MAX};
    TU_CHECK_STATUS(mcp_tokenizer_decode(g_tok, ids, 3, false, &out, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "2147483647");
    mcp_buf_free(&out);

    int32_t *res = (int32_t *)&res;
    size_t n_res = 7;
    const char dummy = 'x';
    TU_CHECK_STATUS(mcp_tokenizer_encode(g_tok, &dummy, MCP_TOKENIZER_TEXT_MAX + 1, false, false, &res, &n_res, &err),
                    MCP_STATUS_TOO_LARGE, msg);
    TU_CHECK(res == NULL && n_res == 0);
    TU_CHECK_STATUS(mcp_tokenizer_encode(g_tok, NULL, 3, false, false, &res, &n_res, &err), MCP_STATUS_INVALID_ARGUMENT,
                    msg);
    TU_CHECK_STATUS(mcp_tokenizer_encode(g_tok, NULL, 0, false, false, &res, &n_res, &err), MCP_STATUS_OK, msg);
    TU_CHECK(res == NULL && n_res == 0);
    mcp_tokenizer_free(NULL);
}

static void test_queries(void)
{
    const char *model = mcp_tokenizer_model_name(g_tok);
    const char *pre = mcp_tokenizer_pre_name(g_tok);
    TU_REQUIRE(model && pre);
    mcp_gguf_str want;
    bool found;
    TU_REQUIRE_OK(mcp_gguf_get_str(g_gguf, "tokenizer.ggml.model", &want, &found, NULL), NULL);
    TU_CHECK(found && mcp_gguf_str_eq(want, model));
    fprintf(stderr, "    model %s, pre %s, %d tokens, bos %d, eos %d, eot %d, unk %d\n", model, pre,
            (int)mcp_tokenizer_n_vocab(g_tok), (int)mcp_tokenizer_bos(g_tok), (int)mcp_tokenizer_eos(g_tok),
            (int)mcp_tokenizer_eot(g_tok), (int)mcp_tokenizer_unk(g_tok));
}

/* ---- vocabularies built in memory ---- */

typedef struct kvs {
    mcp_buf body;
    uint64_t n;
} kvs;

/* The file: header, then the key/values written so far. */
static mcp_status parse_kvs(kvs *k, mcp_buf *file, mcp_gguf **g, mcp_err *err)
{
    mcp_buf_reset(file);
    gb_header(file, 3, 0, k->n);
    mcp_buf_append(file, k->body.data, k->body.len);
    return mcp_gguf_parse(file->data, file->len, g, err);
}

/* Loads the vocab from the key/values; checks the status and that the
 * message names `key`; returns the tokenizer on success. */
static mcp_tokenizer *load_kvs(kvs *k, mcp_status want, const char *key, int line)
{
    mcp_buf file = {0};
    mcp_gguf *g = NULL;
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_tokenizer *t = NULL;
    mcp_status st = parse_kvs(k, &file, &g, &err);
    if (st != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, line, "building the GGUF: %s", msg);
    } else {
        st = mcp_tokenizer_from_gguf(g, &t, &err);
        tu_checks++;
        if (st != want)
            TU_FAIL_AT(__FILE__, line, "got '%s', expected '%s' (%s)", mcp_status_str(st), mcp_status_str(want), msg);
        if (key && st != MCP_STATUS_OK) {
            tu_checks++;
            if (!strstr(msg, key)) TU_FAIL_AT(__FILE__, line, "message '%s' does not name '%s'", msg, key);
        }
        mcp_gguf_close(g);
    }
    mcp_buf_free(&file);
    mcp_buf_free(&k->body);
    k->n = 0;
    return t;
}

static const char *const tiny_spm_tokens[] = {"<unk>", "<s>", "</s>", "<0x41>", "<0xC3>", "<0xA9>", "▁", "a", "b",
                                              "ab", "▁ab", "c"};
static const float tiny_spm_scores[] = {0, 0, 0, 0, 0, 0, -1, -2, -3, -1.5f, -0.5f, -4};
static const int32_t tiny_spm_types[] = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1};
#define TINY_SPM_N (sizeof tiny_spm_tokens / sizeof tiny_spm_tokens[0])

static void tiny_spm(kvs *k, unsigned skip)
{
    if (!(skip & 1)) gb_kv_str(&k->body, "tokenizer.ggml.model", "llama"), k->n++;
    if (!(skip & 2)) gb_kv_strs(&k->body, "tokenizer.ggml.tokens", tiny_spm_tokens, TINY_SPM_N), k->n++;
    if (!(skip & 4)) gb_kv_f32s(&k->body, "tokenizer.ggml.scores", tiny_spm_scores, TINY_SPM_N), k->n++;
    if (!(skip & 8)) gb_kv_i32s(&k->body, "tokenizer.ggml.token_type", tiny_spm_types, TINY_SPM_N), k->n++;
}

static const char *const tiny_bpe_tokens[] = {"a", "b", "c", "ab", "Ġ", "Ġab", "<|end|>"};
static const char *const tiny_bpe_merges[] = {"a b", "Ġ ab"};

static void tiny_bpe(kvs *k, const char *pre, bool merges)
{
    gb_kv_str(&k->body, "tokenizer.ggml.model", "gpt2"), k->n++;
    if (pre) gb_kv_str(&k->body, "tokenizer.ggml.pre", pre), k->n++;
    gb_kv_strs(&k->body, "tokenizer.ggml.tokens", tiny_bpe_tokens, 7), k->n++;
    if (merges) gb_kv_strs(&k->body, "tokenizer.ggml.merges", tiny_bpe_merges, 2), k->n++;
}

static void test_malformed(void)
{
    kvs k = {{0}, 0};

    /* A good tiny SentencePiece vocab first. */
    tiny_spm(&k, 0);
    mcp_tokenizer *t = load_kvs(&k, MCP_STATUS_OK, NULL, __LINE__);
    TU_REQUIRE(t);
    int32_t *ids = NULL;
    size_t n = 0;
    /* " ab" merges to ▁ab; "é" is no token: its bytes; "A" is <0x41>. */
    if (encode(t, "ab\xc3\xa9" "A", 5, true, false, &ids, &n)) {
        int32_t want[] = {1, 10, 4, 5, 3};
        TU_CHECK(n == 5 && memcmp(ids, want, sizeof want) == 0);
        mcp_buf out = {0};
        TU_CHECK_STATUS(mcp_tokenizer_decode(t, ids, n, false, &out, NULL), MCP_STATUS_OK, NULL);
        TU_CHECK(out.len == 5 && memcmp(out.data, "ab\xc3\xa9" "A", 5) == 0);
        mcp_buf_free(&out);
        mcp_free(ids);
    }
    /* "z" has no token and no byte token: the unknown token. */
    if (encode(t, "z", 1, false, false, &ids, &n)) {
        TU_CHECK(n == 2 && ids[0] == 6 && ids[1] == 0);
        mcp_free(ids);
    }
    mcp_tokenizer_free(t);

    /* A good tiny BPE vocab. */
    tiny_bpe(&k, "gpt-2", true);
    t = load_kvs(&k, MCP_STATUS_OK, NULL, __LINE__);
    TU_REQUIRE(t);
    if (encode(t, "ab ab<|end|>", 12, false, true, &ids, &n)) {
        int32_t want[] = {3, 5, 6};
        TU_CHECK(n == 3 && memcmp(ids, want, sizeof want) == 0);
        mcp_free(ids);
    }
    TU_CHECK(mcp_tokenizer_is_eog(t, 6)); /* "<|end|>" by its text */
    mcp_tokenizer_free(t);

    /* Missing and malformed keys, each named. */
    tiny_spm(&k, 1);
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.model", __LINE__);
    gb_kv_str(&k.body, "tokenizer.ggml.model", "bogus-model"), k.n++;
    load_kvs(&k, MCP_STATUS_UNSUPPORTED, "bogus-model", __LINE__);
    gb_kv_u32(&k.body, "tokenizer.ggml.model", 7), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.model", __LINE__);
    tiny_spm(&k, 2);
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.tokens", __LINE__);
    tiny_spm(&k, 2);
    gb_kv_u32(&k.body, "tokenizer.ggml.tokens", 3), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.tokens", __LINE__);
    tiny_spm(&k, 4);
    gb_kv_f32s(&k.body, "tokenizer.ggml.scores", tiny_spm_scores, TINY_SPM_N - 1), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.scores", __LINE__);
    tiny_spm(&k, 4);
    gb_kv_strs(&k.body, "tokenizer.ggml.scores", tiny_spm_tokens, TINY_SPM_N), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.scores", __LINE__);
    tiny_spm(&k, 8);
    gb_kv_f32s(&k.body, "tokenizer.ggml.token_type", tiny_spm_scores, TINY_SPM_N), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.token_type", __LINE__);
    tiny_spm(&k, 8);
    gb_kv_i32s(&k.body, "tokenizer.ggml.token_type", tiny_spm_types, 3), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.token_type", __LINE__);
    tiny_spm(&k, 0);
    gb_kv_str(&k.body, "tokenizer.ggml.bos_token_id", "one"), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.bos_token_id", __LINE__);
    tiny_spm(&k, 0);
    gb_kv_u32(&k.body, "tokenizer.ggml.add_bos_token", 1), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.add_bos_token", __LINE__);
    tiny_bpe(&k, "gpt-2", false);
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.merges", __LINE__);
    tiny_bpe(&k, "no-such-pre", true);
    load_kvs(&k, MCP_STATUS_UNSUPPORTED, "no-such-pre", __LINE__);
    /* BPE with add_bos but no BOS id. */
    tiny_bpe(&k, "gpt-2", true);
    gb_kv_bool(&k.body, "tokenizer.ggml.add_bos_token", 1), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.bos_token_id", __LINE__);
    /* An out-of-range special id is ignored (as llama.cpp); BPE without a
     * pre-tokenizer gets GPT-2's. */
    tiny_bpe(&k, NULL, true);
    gb_kv_u32(&k.body, "tokenizer.ggml.padding_token_id", 99), k.n++;
    t = load_kvs(&k, MCP_STATUS_OK, NULL, __LINE__);
    if (t) {
        TU_CHECK_INT(mcp_tokenizer_pad(t), -1);
        TU_CHECK_STR(mcp_tokenizer_pre_name(t), "default");
    }
    mcp_tokenizer_free(t);
    /* Empty vocabulary. */
    gb_kv_str(&k.body, "tokenizer.ggml.model", "llama"), k.n++;
    gb_kv_strs(&k.body, "tokenizer.ggml.tokens", tiny_spm_tokens, 0), k.n++;
    load_kvs(&k, MCP_STATUS_INVALID_MODEL, "tokenizer.ggml.tokens", __LINE__);
    mcp_buf_free(&k.body);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_tokenizer PATH/ggml-vocab-X.gguf\n");
        return 2;
    }
    g_path = argv[1];
    char inp[4096], outp[4096];
    snprintf(inp, sizeof inp, "%s.inp", g_path);
    snprintf(outp, sizeof outp, "%s.out", g_path);
    const char *missing = !file_exists(g_path) ? g_path : !file_exists(inp) ? inp : !file_exists(outp) ? outp : NULL;
    if (missing) {
        fprintf(stderr, "test_tokenizer: FAILED: %s is missing; run tools/fetch-llama-cpp.sh to fetch llama.cpp's "
                        "vocab files and test vectors\n", missing);
        return 1;
    }
    int64_t live = mcp_alloc_live_count();
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_gguf_open(g_path, &g_gguf, &err);
    if (st == MCP_STATUS_OK) st = mcp_tokenizer_from_gguf(g_gguf, &g_tok, &err);
    if (st != MCP_STATUS_OK) {
        fprintf(stderr, "test_tokenizer: FAILED: loading %s: %s: %s\n", g_path, mcp_status_str(st), msg);
        mcp_gguf_close(g_gguf);
        return 1;
    }
    TU_RUN(test_queries);
    TU_RUN(test_vectors);
    TU_RUN(test_long_text);
    TU_RUN(test_special);
    TU_RUN(test_stream);
    TU_RUN(test_invalid_utf8);
    TU_RUN(test_bad_args);
    TU_RUN(test_malformed);
    mcp_tokenizer_free(g_tok);
    mcp_gguf_close(g_gguf);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("test_tokenizer");
}
