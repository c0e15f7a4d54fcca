/* Tokenizers read from a GGUF file's own metadata (tokenizer.ggml.*).
 *
 * Two families, chosen by tokenizer.ggml.model:
 *   "gpt2"  byte-level BPE (GPT-2, Llama 3, Qwen2): the text is split by the
 *           pre-tokenizer that tokenizer.ggml.pre names, each piece's bytes
 *           are mapped to GPT-2's printable characters, and the merges of
 *           tokenizer.ggml.merges apply by rank.
 *   "llama" SentencePiece (Llama 2, TinyLlama, Phi-3): spaces become U+2581,
 *           the highest-scoring adjacent pair merges first, and characters
 *           no token covers fall back to the <0xXX> byte tokens.
 * Behaviour follows llama.cpp's vocabulary code (src/llama-vocab.cpp), which
 * llama.cpp's own test vectors check; where it differs it says so here.
 *
 * A tokenizer is immutable after mcp_tokenizer_from_gguf: any number of
 * threads may encode and decode with one at once. It copies what it needs,
 * so the GGUF may be closed afterwards. Every text, id and length passed in
 * is treated as hostile: bad ids and oversized inputs return
 * MCP_STATUS_INVALID_ARGUMENT / MCP_STATUS_TOO_LARGE, allocation failure
 * returns MCP_STATUS_OUT_OF_MEMORY, and nothing recurses on input size. */
#ifndef MCP_LLM_TOKENIZER_H
#define MCP_LLM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "llm/gguf.h"

typedef struct mcp_tokenizer mcp_tokenizer;

typedef enum mcp_tokenizer_family {
    MCP_TOKENIZER_FAMILY_BPE = 0, /* tokenizer.ggml.model "gpt2" */
    MCP_TOKENIZER_FAMILY_SPM = 1, /* tokenizer.ggml.model "llama" */
} mcp_tokenizer_family;

/* Token types, as tokenizer.ggml.token_type numbers them. */
typedef enum mcp_token_type {
    MCP_TOKEN_TYPE_UNDEFINED = 0,
    MCP_TOKEN_TYPE_NORMAL = 1,
    MCP_TOKEN_TYPE_UNKNOWN = 2,
    MCP_TOKEN_TYPE_CONTROL = 3,
    MCP_TOKEN_TYPE_USER_DEFINED = 4,
    MCP_TOKEN_TYPE_UNUSED = 5,
    MCP_TOKEN_TYPE_BYTE = 6,
} mcp_token_type;

/* Longest text encode accepts, in bytes: 1 GiB (MCP_STATUS_TOO_LARGE past
 * it). Token counts and offsets inside then fit 32 bits. */
#define MCP_TOKENIZER_TEXT_MAX ((size_t)1 << 30)

/* Reads the tokenizer of a GGUF file. A missing or malformed key fails with
 * MCP_STATUS_INVALID_MODEL and a message naming the key; an unknown
 * tokenizer.ggml.model or tokenizer.ggml.pre fails with
 * MCP_STATUS_UNSUPPORTED naming the value. Pre-tokenizers: "default" and
 * GPT-2's names ("gpt-2", "phi-2", ...), Llama 3's ("llama-bpe", "llama3",
 * ...), Qwen2's ("qwen2", "deepseek-r1-qwen", ...), Qwen3.5's ("qwen35");
 * a BPE file without tokenizer.ggml.pre gets GPT-2's, as in llama.cpp.
 * *out is the caller's (mcp_tokenizer_free). */
mcp_status mcp_tokenizer_from_gguf(const mcp_gguf *g, mcp_tokenizer **out, mcp_err *err);
/* NULL is a no-op. */
void mcp_tokenizer_free(mcp_tokenizer *t);

/* Text to ids. `text` is len bytes (not NUL-terminated; NUL is a character
 * like any other) and need not be valid UTF-8: a byte that is not part of a
 * well-formed sequence is a character of its own, neither letter, number
 * nor space, and is encoded as its byte token, so decode gives back exactly
 * the bytes given (llama.cpp replaces such bytes with U+FFFD first). A
 * byte the vocabulary has no token for becomes the unknown token, or is
 * dropped when there is none (byte-level BPE; llama.cpp drops it too) or
 * fails with MCP_STATUS_INVALID_MODEL (SentencePiece; llama.cpp aborts).
 *
 * Cost: O(n log n) in the longest pre-tokenized word (BPE) or the text
 * (SentencePiece), plus one scan of the text per special token that
 * parse_special can match.
 *
 * add_special: BOS / EOS around the text when the model asks for them
 * (tokenizer.ggml.add_bos_token / add_eos_token; defaults as llama.cpp's).
 * parse_special: control tokens written in the text ("<|im_start|>") become
 * their ids; user-defined tokens are matched whether or not it is set, as
 * in llama.cpp and Hugging Face. Longer tokens are matched first.
 *
 * *ids is allocated with mcp_malloc (caller mcp_free; NULL when *n_ids is
 * 0). On failure *ids is NULL and *n_ids 0. */
mcp_status mcp_tokenizer_encode(const mcp_tokenizer *t, const char *text, size_t len, bool add_special,
                                bool parse_special, int32_t **ids, size_t *n_ids, mcp_err *err);

/* A byte range of the text, [off, off + len). */
typedef struct mcp_tok_span {
    size_t off, len;
} mcp_tok_span;
/* As mcp_tokenizer_encode, except that with parse_special and spans, a
 * control token's text becomes that token only where it lies wholly inside
 * one of the n_spans ranges (a chat template's own markup); elsewhere (the
 * messages a client wrote) it is plain text. spans NULL: anywhere. */
mcp_status mcp_tokenizer_encode_spans(const mcp_tokenizer *t, const char *text, size_t len, bool add_special,
                                      bool parse_special, const mcp_tok_span *spans, size_t n_spans, int32_t **ids,
                                      size_t *n_ids, mcp_err *err);

/* Appends the bytes of one token to out. Control and unknown tokens append
 * nothing unless render_special (then their text, "<|eot_id|>"); unused and
 * undefined tokens append nothing. An id outside [0, n_vocab) is
 * MCP_STATUS_INVALID_ARGUMENT naming the id; out of memory (out->failed) is
 * MCP_STATUS_OUT_OF_MEMORY. A piece may end inside a UTF-8 character; use
 * the stream decoder to print as tokens arrive. */
mcp_status mcp_tokenizer_piece(const mcp_tokenizer *t, int32_t id, bool render_special, mcp_buf *out, mcp_err *err);

/* Appends the text of ids[0..n) to out: the pieces concatenated, except
 * that for a SentencePiece model with add_space_prefix the first token
 * that is not a control token (so the one after a BOS) loses one leading
 * space, the one encode added. decode(encode(s)) == s for every s that
 * holds no special-token text, except that SentencePiece's space mark
 * U+2581 written in the text comes back as a space (as in SentencePiece).
 * After a special token SentencePiece encodes the text with a space
 * before it, which decode keeps (as llama.cpp). llama.cpp's "clean_spaces"
 * clean-up (" ." to ".") is not applied: it loses information. */
mcp_status mcp_tokenizer_decode(const mcp_tokenizer *t, const int32_t *ids, size_t n, bool render_special, mcp_buf *out,
                                mcp_err *err);

/* Streaming detokenization: feed ids one at a time as a model produces
 * them; only whole, well-formed UTF-8 characters come out, so every append
 * may be printed or sent at once. A character split across tokens is held
 * (at most 3 bytes) until its last byte arrives. Bytes that can never form
 * a character come out as U+FFFD, one per maximal ill-formed subsequence
 * (Unicode's "substitution of maximal subparts"); flush ends the stream,
 * writing U+FFFD for a held incomplete character. Leading-space removal is
 * as in mcp_tokenizer_decode. The struct is the caller's (on the stack is
 * fine); its fields are private. */
typedef struct mcp_tokenizer_stream {
    const mcp_tokenizer *t;
    bool render_special;
    bool strip_space; /* the next text piece loses a leading space */
    uint8_t held[4];
    uint8_t n_held;
    mcp_buf scratch;
} mcp_tokenizer_stream;

void mcp_tokenizer_stream_init(mcp_tokenizer_stream *s, const mcp_tokenizer *t, bool render_special);
/* Appends whatever text `id` completes to out. A bad id leaves the stream
 * as it was. */
mcp_status mcp_tokenizer_stream_feed(mcp_tokenizer_stream *s, int32_t id, mcp_buf *out, mcp_err *err);
/* Appends U+FFFD if a character is incomplete, then resets the stream for
 * a new text. */
mcp_status mcp_tokenizer_stream_flush(mcp_tokenizer_stream *s, mcp_buf *out, mcp_err *err);
/* Frees the stream's scratch memory (not the tokenizer). */
void mcp_tokenizer_stream_free(mcp_tokenizer_stream *s);

/* ---- queries ---- */
int32_t mcp_tokenizer_n_vocab(const mcp_tokenizer *t);
mcp_tokenizer_family mcp_tokenizer_family_of(const mcp_tokenizer *t);
/* "gpt2" or "llama": the tokenizer.ggml.model value. */
const char *mcp_tokenizer_model_name(const mcp_tokenizer *t);
/* The tokenizer.ggml.pre value as written ("llama-bpe"; "default" when
 * absent). */
const char *mcp_tokenizer_pre_name(const mcp_tokenizer *t);
/* Special ids; -1 when the model has none. */
int32_t mcp_tokenizer_bos(const mcp_tokenizer *t);
int32_t mcp_tokenizer_eos(const mcp_tokenizer *t);
int32_t mcp_tokenizer_eot(const mcp_tokenizer *t);
int32_t mcp_tokenizer_eom(const mcp_tokenizer *t);
int32_t mcp_tokenizer_unk(const mcp_tokenizer *t);
int32_t mcp_tokenizer_pad(const mcp_tokenizer *t);
bool mcp_tokenizer_add_bos(const mcp_tokenizer *t);
bool mcp_tokenizer_add_eos(const mcp_tokenizer *t);
/* Whether generation stops at id: EOS, EOT, EOM, and the end-of-turn
 * tokens llama.cpp recognises by their text ("<|im_end|>", "<|end|>", ...).
 * False for an id out of range. */
bool mcp_tokenizer_is_eog(const mcp_tokenizer *t, int32_t id);
/* The token's type; MCP_TOKEN_TYPE_UNDEFINED for an id out of range. */
mcp_token_type mcp_tokenizer_token_type(const mcp_tokenizer *t, int32_t id);
/* The token's text as the vocabulary spells it ("Ġthe", "▁the"), not NUL
 * terminated; NULL for an id out of range. Valid while t lives. */
const char *mcp_tokenizer_token_text(const mcp_tokenizer *t, int32_t id, size_t *len);
/* The id of a token text, or -1. */
int32_t mcp_tokenizer_find(const mcp_tokenizer *t, const char *text, size_t len);

#endif
