/* UTF-8 and character classes for the tokenizers (see unicode.h). */
#include "llm/unicode.h"

mcp_uclass mcp_unicode_class(uint32_t cp)
{
    if (cp >= 0x110000u) return MCP_UCLASS_CN;
    /* The last range whose start is <= cp. The table starts at U+0000. */
    size_t lo = 0, hi = mcp__ucd_class_ranges_count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((mcp__ucd_class_ranges[mid] >> 3) <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return (mcp_uclass)(mcp__ucd_class_ranges[lo] & 7u);
}

bool mcp_unicode_is_space(uint32_t cp)
{
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0d);
    if (cp < 0x85) return false;
    switch (cp) {
    case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202f: case 0x205f: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200a;
    }
}

size_t mcp_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    size_t len;
    uint32_t v;
    /* The second byte's bounds exclude overlong forms, surrogates and
     * values past U+10FFFF up front (Unicode table 3-7). */
    uint8_t lo = 0x80, hi = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        len = 2, v = b0 & 0x1fu;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        len = 3, v = b0 & 0x0fu;
        if (b0 == 0xe0) lo = 0xa0;
        if (b0 == 0xed) hi = 0x9f;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        len = 4, v = b0 & 0x07u;
        if (b0 == 0xf0) lo = 0x90;
        if (b0 == 0xf4) hi = 0x8f;
    } else {
        goto invalid;
    }
    if (n < len) goto invalid;
    if (s[1] < lo || s[1] > hi) goto invalid;
    v = v << 6 | (s[1] & 0x3fu);
    for (size_t i = 2; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) goto invalid;
        v = v << 6 | (s[i] & 0x3fu);
    }
    *cp = v;
    return len;
invalid:
    *cp = MCP_UTF8_INVALID_BASE + b0;
    return 1;
}

size_t mcp_utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xc0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        if (cp >= 0xd800 && cp <= 0xdfff) return 0;
        out[0] = (uint8_t)(0xe0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    if (cp < 0x110000) {
        out[0] = (uint8_t)(0xf0 | cp >> 18);
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (uint8_t)(0x80 | (cp & 0x3f));
        return 4;
    }
    return 0;
}

size_t mcp_utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = mcp_utf8_decode(s + i, n - i, &cp);
        if (cp >= MCP_UTF8_INVALID_BASE) break;
        i += len;
    }
    return i;
}
