/* Unicode for the tokenizers: UTF-8 decoding and encoding that never read
 * past the input, and the character classes the pre-tokenizer regexes name.
 *
 * The class table is generated at build time by tools/gen_unicode_tables.py
 * (build/generated/unicode_tables.c) from Python's unicodedata; nothing here
 * allocates or keeps state. */
#ifndef MCP_LLM_UNICODE_H
#define MCP_LLM_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* General category, reduced to its first letter; unassigned code points
 * (Cn) are their own class. The generator reads these values from this
 * header, so the table and the enum cannot drift. */
typedef enum mcp_uclass {
    MCP_UCLASS_CN = 0, /* unassigned, and anything past U+10FFFF */
    MCP_UCLASS_L = 1,  /* letters, \p{L} */
    MCP_UCLASS_N = 2,  /* numbers, \p{N} */
    MCP_UCLASS_M = 3,  /* marks, \p{M} */
    MCP_UCLASS_P = 4,  /* punctuation, \p{P} */
    MCP_UCLASS_S = 5,  /* symbols, \p{S} */
    MCP_UCLASS_Z = 6,  /* separators, \p{Z} */
    MCP_UCLASS_C = 7,  /* control, format, private use, surrogates */
} mcp_uclass;

/* Generated (unicode_tables.c): sorted ranges, each start << 3 | class. */
extern const uint32_t mcp__ucd_class_ranges[];
extern const size_t mcp__ucd_class_ranges_count;
extern const char mcp__ucd_version[];

/* The class of a code point (MCP_UCLASS_CN past U+10FFFF). */
mcp_uclass mcp_unicode_class(uint32_t cp);

/* Regex \s: the White_Space property (the set Rust's and Python's regex
 * engines use, which the tokenizers' reference implementations ran). */
bool mcp_unicode_is_space(uint32_t cp);

/* A decoded byte that is not part of a well-formed UTF-8 sequence is
 * reported as MCP_UTF8_INVALID_BASE + the byte: above every code point, so
 * it has class CN and is neither a letter, a number nor a space. */
#define MCP_UTF8_INVALID_BASE 0x110000u

/* Decodes one character from s[0..n), n >= 1. Returns its length in bytes
 * (1 to 4) and writes the code point. Overlong forms, surrogates, values
 * past U+10FFFF and truncated sequences are not well formed: their first
 * byte comes back alone as MCP_UTF8_INVALID_BASE + byte, length 1. */
size_t mcp_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Writes the UTF-8 form of cp (<= U+10FFFF) into out; returns 1 to 4, or 0
 * for a value that is not a code point. */
size_t mcp_utf8_encode(uint32_t cp, uint8_t out[4]);

/* Length of the well-formed UTF-8 prefix of s[0..n). */
size_t mcp_utf8_valid_prefix(const uint8_t *s, size_t n);

#endif
