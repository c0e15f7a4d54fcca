/* .npy read/write (NumPy format versions 1.0, 2.0 and 3.0). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

/* Finds `'key':` in the header dict and returns a pointer just past the
 * colon and any spaces, or NULL. */
static const char *dict_find(const char *hdr, size_t len, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    size_t pl = strlen(pat);
    for (size_t i = 0; i + pl <= len; i++) {
        if (memcmp(hdr + i, pat, pl) == 0) {
            const char *p = hdr + i + pl;
            const char *end = hdr + len;
            while (p < end && (*p == ' ' || *p == ':')) p++;
            return p < end ? p : NULL;
        }
    }
    return NULL;
}

static int utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f)); return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Decodes one UTF-8 code point; invalid bytes decode as themselves. */
static uint32_t utf8_decode(const unsigned char **pp, const unsigned char *end)
{
    const unsigned char *p = *pp;
    uint32_t c = *p++;
    int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
    if (extra) c &= (uint32_t)(0x3f >> extra);
    for (int i = 0; i < extra && p < end && (*p & 0xc0) == 0x80; i++) c = (c << 6) | (*p++ & 0x3f);
    *pp = p;
    return c;
}

mcp_status mcp_npy_read_mem(const uint8_t *buf, size_t len, mcp_tensor *out, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "not a .npy file (bad magic)");
    int major = buf[6];
    size_t hlen, hoff;
    if (major == 1) {
        hlen = (size_t)buf[8] | ((size_t)buf[9] << 8);
        hoff = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy header truncated");
        hlen = (size_t)buf[8] | ((size_t)buf[9] << 8) | ((size_t)buf[10] << 16) | ((size_t)buf[11] << 24);
        hoff = 12;
    } else {
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, ".npy format version %d not supported", major);
    }
    if (hlen > len - hoff) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy header truncated");
    const char *hdr = (const char *)buf + hoff;

    const char *d = dict_find(hdr, hlen, "descr");
    if (!d || (*d != '\'' && *d != '"'))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy header has no 'descr'");
    char descr[32] = {0};
    size_t di = 0;
    for (const char *p = d + 1; p < hdr + hlen && *p != '\'' && *p != '"' && di < sizeof descr - 1; p++)
        descr[di++] = *p;

    const char *fo = dict_find(hdr, hlen, "fortran_order");
    if (fo && (size_t)(hdr + hlen - fo) >= 4 && memcmp(fo, "True", 4) == 0)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, ".npy arrays in Fortran order are not supported; save with C order");

    const char *sh = dict_find(hdr, hlen, "shape");
    if (!sh || *sh != '(') return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy header has no 'shape'");
    int64_t dims[MCP_MAX_RANK];
    int rank = 0;
    const char *p = sh + 1, *hend = hdr + hlen;
    while (p < hend && *p != ')') {
        while (p < hend && (*p == ' ' || *p == ',')) p++;
        if (p < hend && *p == ')') break;
        if (p >= hend || !isdigit((unsigned char)*p))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy shape is malformed");
        if (rank == MCP_MAX_RANK)
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, ".npy rank above %d", MCP_MAX_RANK);
        int64_t v = 0;
        while (p < hend && isdigit((unsigned char)*p)) {
            if (v > ((int64_t)1 << 40)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy dimension too large");
            v = v * 10 + (*p++ - '0');
        }
        dims[rank++] = v;
    }

    char endian = descr[0];
    if (endian == '>' && !(descr[1] == 'i' || descr[1] == 'u' || descr[1] == 'b') )
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, ".npy big-endian data ('%s') not supported", descr);
    char kind = descr[1];
    int size = atoi(descr + 2);
    if (endian == '>' && size > 1)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, ".npy big-endian data ('%s') not supported", descr);
    mcp_dtype dt = MCP_DTYPE_UNDEFINED;
    switch (kind) {
    case 'f': dt = size == 4 ? MCP_DTYPE_FLOAT : size == 8 ? MCP_DTYPE_DOUBLE : size == 2 ? MCP_DTYPE_FLOAT16 : 0; break;
    case 'i': dt = size == 1 ? MCP_DTYPE_INT8 : size == 2 ? MCP_DTYPE_INT16 : size == 4 ? MCP_DTYPE_INT32 : size == 8 ? MCP_DTYPE_INT64 : 0; break;
    case 'u': dt = size == 1 ? MCP_DTYPE_UINT8 : size == 2 ? MCP_DTYPE_UINT16 : size == 4 ? MCP_DTYPE_UINT32 : size == 8 ? MCP_DTYPE_UINT64 : 0; break;
    case 'b': dt = size == 1 ? MCP_DTYPE_BOOL : 0; break;
    case 'U': case 'S': dt = MCP_DTYPE_STRING; break;
    default: break;
    }
    if (dt == MCP_DTYPE_UNDEFINED)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, ".npy dtype '%s' not supported", descr);
    if (dt == MCP_DTYPE_STRING && (size <= 0 || size > (1 << 20)))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy string width in '%s' invalid", descr);

    const uint8_t *body = buf + hoff + hlen;
    size_t body_len = len - hoff - hlen;
    /* Check the claimed size against the bytes present before allocating,
     * so a lying header cannot request a huge allocation. */
    size_t elem = dt == MCP_DTYPE_STRING ? (kind == 'U' ? (size_t)size * 4 : (size_t)size) : (size_t)mcp_dtype_size(dt);
    size_t claimed = elem;
    for (int i = 0; i < rank; i++)
        if (!mcp_mul_overflow_size(claimed, (size_t)dims[i], &claimed))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy shape overflows");
    if (claimed > body_len)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy data truncated: need %zu bytes, have %zu", claimed, body_len);
    mcp_status st = mcp_tensor_alloc(out, dt, rank, dims, err);
    if (st != MCP_STATUS_OK) return st;
    int64_t n = mcp_tensor_numel(out);
    if (dt == MCP_DTYPE_STRING) {
        size_t width = kind == 'U' ? (size_t)size * 4 : (size_t)size;
        size_t need;
        if (!mcp_mul_overflow_size(width, (size_t)n, &need) || need > body_len) {
            mcp_tensor_release(out);
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy data truncated: need %zu bytes, have %zu", need, body_len);
        }
        char *tmp = mcp_malloc((size_t)size * 4 + 1);
        if (!tmp) { mcp_tensor_release(out); return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory"); }
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *e = body + (size_t)i * width;
            size_t tl = 0;
            if (kind == 'U') {
                for (int k = 0; k < size; k++) {
                    uint32_t cp = (uint32_t)e[4 * k] | ((uint32_t)e[4 * k + 1] << 8) |
                                  ((uint32_t)e[4 * k + 2] << 16) | ((uint32_t)e[4 * k + 3] << 24);
                    if (cp == 0) break;
                    tl += (size_t)utf8_encode(cp > 0x10ffff ? 0xfffd : cp, tmp + tl);
                }
            } else {
                while (tl < (size_t)size && e[tl]) { tmp[tl] = (char)e[tl]; tl++; }
            }
            if (mcp_tensor_set_string(out, i, tmp, tl) != MCP_STATUS_OK) {
                mcp_free(tmp);
                mcp_tensor_release(out);
                return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            }
        }
        mcp_free(tmp);
        return MCP_STATUS_OK;
    }
    size_t nbytes = mcp_tensor_nbytes(out);
    if (nbytes > body_len) {
        mcp_tensor_release(out);
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, ".npy data truncated: need %zu bytes, have %zu", nbytes, body_len);
    }
    if (nbytes) memcpy(out->data, body, nbytes);
    return MCP_STATUS_OK;
}

mcp_status mcp_npy_read(const char *path, mcp_tensor *out, mcp_err *err)
{
    uint8_t *buf;
    size_t len;
    mcp_status st = mcp_file_read(path, &buf, &len, err);
    if (st != MCP_STATUS_OK) return st;
    st = mcp_npy_read_mem(buf, len, out, err);
    mcp_free(buf);
    if (st != MCP_STATUS_OK) mcp_err_prefix(err, "%s", path);
    return st;
}

static const char *npy_descr(mcp_dtype d)
{
    switch (d) {
    case MCP_DTYPE_FLOAT: return "<f4";
    case MCP_DTYPE_DOUBLE: return "<f8";
    case MCP_DTYPE_FLOAT16: return "<f2";
    case MCP_DTYPE_BFLOAT16: return "<u2";
    case MCP_DTYPE_INT8: return "|i1";
    case MCP_DTYPE_INT16: return "<i2";
    case MCP_DTYPE_INT32: return "<i4";
    case MCP_DTYPE_INT64: return "<i8";
    case MCP_DTYPE_UINT8: return "|u1";
    case MCP_DTYPE_UINT16: return "<u2";
    case MCP_DTYPE_UINT32: return "<u4";
    case MCP_DTYPE_UINT64: return "<u8";
    case MCP_DTYPE_BOOL: return "|b1";
    case MCP_DTYPE_COMPLEX64: return "<c8";
    case MCP_DTYPE_COMPLEX128: return "<c16";
    default: return NULL;
    }
}

/* The signed narrow types, written as int8 values rather than codes. */
static bool npy_narrow_signed(mcp_dtype d) { return d == MCP_DTYPE_INT4 || d == MCP_DTYPE_INT2; }

mcp_status mcp_npy_to_narrow(mcp_tensor *t, mcp_dtype narrow, mcp_err *err)
{
    bool sgn = npy_narrow_signed(narrow);
    mcp_dtype want = sgn ? MCP_DTYPE_INT8 : MCP_DTYPE_UINT8;
    if (!mcp_dtype_is_narrow(narrow) || t->dtype != want)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s data comes as .npy %s (one element a byte), not %s",
                           mcp_dtype_name(narrow), sgn ? "int8 '|i1'" : "uint8 '|u1'", mcp_dtype_name(t->dtype));
    int bits = mcp_dtype_bits(narrow);
    int64_t n = mcp_tensor_numel(t);
    for (int64_t i = 0; bits < 8 && i < n; i++) {
        int v = sgn ? ((const int8_t *)t->data)[i] : ((const uint8_t *)t->data)[i];
        int lo = sgn ? -(1 << (bits - 1)) : 0, hi = sgn ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
        if (v < lo || v > hi)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "element %lld (%d) is outside %s's codes %d..%d", (long long)i,
                               v, mcp_dtype_name(narrow), lo, hi);
    }
    if (bits == 8) {
        t->dtype = narrow;
        return MCP_STATUS_OK;
    }
    mcp_tensor packed;
    mcp_status st = mcp_tensor_alloc(&packed, narrow, t->rank, t->dims, err);
    if (st != MCP_STATUS_OK) return st;
    for (int64_t i = 0; i < n; i++) mcp_packed_set(packed.data, bits, i, ((const uint8_t *)t->data)[i]);
    mcp_tensor_release(t);
    *t = packed;
    return MCP_STATUS_OK;
}

mcp_status mcp_npy_write(const char *path, const mcp_tensor *t, mcp_err *err)
{
    char descr[32];
    int64_t n = mcp_tensor_numel(t);
    size_t width = 0; /* code points per string element */
    if (t->dtype == MCP_DTYPE_STRING) {
        char *const *s = t->data;
        for (int64_t i = 0; i < n; i++) {
            const unsigned char *p = (const unsigned char *)s[i], *end = p + strlen(s[i]);
            size_t cps = 0;
            while (p < end) { utf8_decode(&p, end); cps++; }
            if (cps > width) width = cps;
        }
        if (width == 0) width = 1;
        snprintf(descr, sizeof descr, "<U%zu", width);
    } else if (mcp_dtype_is_narrow(t->dtype)) {
        snprintf(descr, sizeof descr, "%s", npy_narrow_signed(t->dtype) ? "|i1" : "|u1");
    } else {
        const char *d = npy_descr(t->dtype);
        if (!d) return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "cannot write dtype %s as .npy", mcp_dtype_name(t->dtype));
        snprintf(descr, sizeof descr, "%s", d);
    }
    char shape[512];
    size_t off = (size_t)snprintf(shape, sizeof shape, "(");
    for (int i = 0; i < t->rank; i++)
        off += (size_t)snprintf(shape + off, sizeof shape - off, "%lld,%s", (long long)t->dims[i],
                                i + 1 < t->rank ? " " : "");
    if (t->rank > 1) shape[--off] = '\0'; /* "(2, 3)" not "(2, 3,)" */
    snprintf(shape + off, sizeof shape - off, ")");
    char header[1024];
    int hl = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    size_t total = 10 + (size_t)hl + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot create '%s'", path);
    size_t hlen = (size_t)hl + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    fwrite(pre, 1, 10, f);
    fwrite(header, 1, (size_t)hl, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    if (t->dtype == MCP_DTYPE_STRING) {
        char *const *s = t->data;
        for (int64_t i = 0; i < n; i++) {
            const unsigned char *p = (const unsigned char *)s[i], *end = p + strlen(s[i]);
            size_t k = 0;
            for (; p < end; k++) {
                uint32_t cp = utf8_decode(&p, end);
                unsigned char b[4] = {(unsigned char)cp, (unsigned char)(cp >> 8), (unsigned char)(cp >> 16), (unsigned char)(cp >> 24)};
                fwrite(b, 1, 4, f);
            }
            for (; k < width; k++) fwrite("\0\0\0\0", 1, 4, f);
        }
    } else if (n > 0 && mcp_dtype_is_packed(t->dtype)) {
        /* One element a byte: the code, sign-extended for int4 / int2. */
        int bits = mcp_dtype_bits(t->dtype);
        for (int64_t i = 0; i < n; i++) {
            unsigned c = mcp_packed_get(t->data, bits, i);
            if (npy_narrow_signed(t->dtype) && (c >> (bits - 1))) c |= 0xFFu << bits;
            fputc((int)(c & 0xFF), f);
        }
    } else if (n > 0) {
        fwrite(t->data, 1, mcp_tensor_nbytes(t), f);
    }
    if (fclose(f) != 0) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "write to '%s' failed", path);
    return MCP_STATUS_OK;
}
