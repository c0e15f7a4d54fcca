/* GGUF reader (see gguf.h). The file is read through a cursor that never
 * moves past the end; every count is checked against the bytes that could
 * hold it before anything is allocated for it. */
#include "llm/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
/* Names and keys longer than this are not names. */
#define GGUF_MAX_NAME 65535

const char *mcp_ggml_type_name(uint32_t type)
{
    switch (type) {
#define X(name, num, block, bytes) \
    case num:                      \
        return #name;
        MCP_GGML_TYPES(X)
#undef X
    default:
        return NULL;
    }
}

bool mcp_ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    switch (type) {
#define X(name, num, block, bytes) \
    case num:                      \
        *block_elems = block;      \
        *block_bytes = bytes;      \
        return true;
        MCP_GGML_TYPES(X)
#undef X
    default:
        return false;
    }
}

static const char *value_type_name(uint32_t t)
{
    static const char *const names[] = {"uint8", "int8",  "uint16", "int16", "uint32", "int32",  "float32",
                                        "bool",  "string", "array", "uint64", "int64", "float64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

/* Bytes of one scalar of type t; 0 for strings, arrays and unknown types. */
static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case MCP_GGUF_UINT8:
    case MCP_GGUF_INT8:
    case MCP_GGUF_BOOL:
        return 1;
    case MCP_GGUF_UINT16:
    case MCP_GGUF_INT16:
        return 2;
    case MCP_GGUF_UINT32:
    case MCP_GGUF_INT32:
    case MCP_GGUF_FLOAT32:
        return 4;
    case MCP_GGUF_UINT64:
    case MCP_GGUF_INT64:
    case MCP_GGUF_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

typedef struct cursor {
    const uint8_t *base;
    size_t size, pos;
    mcp_err *err;
} cursor;

static mcp_status truncated(cursor *c, const char *what)
{
    return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL, "GGUF: truncated at byte %zu of %zu reading %s", c->pos,
                       c->size, what);
}

static mcp_status read_bytes(cursor *c, void *out, size_t n, const char *what)
{
    if (c->size - c->pos < n) return truncated(c, what);
    memcpy(out, c->base + c->pos, n);
    c->pos += n;
    return MCP_STATUS_OK;
}

static mcp_status read_u32(cursor *c, uint32_t *v, const char *what) { return read_bytes(c, v, 4, what); }
static mcp_status read_u64(cursor *c, uint64_t *v, const char *what) { return read_bytes(c, v, 8, what); }

/* A string: u64 length, then the bytes (not NUL-terminated). */
static mcp_status read_str(cursor *c, mcp_gguf_str *s, const char *what)
{
    size_t at = c->pos;
    uint64_t len = 0;
    mcp_status st = read_u64(c, &len, what);
    if (st != MCP_STATUS_OK) return st;
    if (len > c->size - c->pos)
        return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL,
                           "GGUF: %s at byte %zu says %llu bytes, but only %zu are left in the file", what, at,
                           (unsigned long long)len, c->size - c->pos);
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return MCP_STATUS_OK;
}

bool mcp_gguf_str_eq(mcp_gguf_str s, const char *z)
{
    size_t n = strlen(z);
    return s.len == n && memcmp(s.ptr, z, n) == 0;
}

static mcp_status read_kv(cursor *c, mcp_gguf_kv *kv, uint64_t index)
{
    size_t at = c->pos;
    mcp_status st = read_str(c, &kv->key, "a metadata key");
    if (st != MCP_STATUS_OK) return st;
    if (kv->key.len == 0 || kv->key.len > GGUF_MAX_NAME)
        return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL, "GGUF: metadata entry %llu at byte %zu has a key of %llu bytes",
                           (unsigned long long)index, at, (unsigned long long)kv->key.len);
    uint32_t type = 0;
    st = read_u32(c, &type, "a metadata type");
    if (st != MCP_STATUS_OK) return st;
    const int klen = (int)kv->key.len;
    kv->type = (mcp_gguf_type)type;
    kv->elem_type = kv->type;
    kv->n = 1;
    if (type == MCP_GGUF_STRING) {
        mcp_gguf_str s;
        kv->data = c->base + c->pos;
        return read_str(c, &s, "a metadata string");
    }
    if (type == MCP_GGUF_ARRAY) {
        uint32_t et = 0;
        st = read_u32(c, &et, "an array's element type");
        if (st == MCP_STATUS_OK) st = read_u64(c, &kv->n, "an array's length");
        if (st != MCP_STATUS_OK) return st;
        kv->elem_type = (mcp_gguf_type)et;
        kv->data = c->base + c->pos;
        if (et == MCP_GGUF_STRING) {
            /* Each string takes at least its 8-byte length. */
            if (kv->n > (c->size - c->pos) / 8)
                return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL,
                                   "GGUF: key '%.*s' is an array of %llu strings, more than the file can hold", klen,
                                   kv->key.ptr, (unsigned long long)kv->n);
            kv->strs = mcp_malloc((size_t)(kv->n ? kv->n : 1) * sizeof *kv->strs);
            if (!kv->strs) return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            for (uint64_t i = 0; i < kv->n; i++) {
                st = read_str(c, &kv->strs[i], "an array string");
                if (st != MCP_STATUS_OK) {
                    mcp_err_prefix(c->err, "key '%.*s' element %llu", klen, kv->key.ptr, (unsigned long long)i);
                    return st;
                }
            }
            return MCP_STATUS_OK;
        }
        size_t es = scalar_size(et);
        if (es == 0)
            return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL, "GGUF: key '%.*s' is an array of %s (type %u), which GGUF does not allow",
                               klen, kv->key.ptr, value_type_name(et), et);
        if (kv->n > (c->size - c->pos) / es)
            return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL,
                               "GGUF: key '%.*s' is an array of %llu %s, more than the file can hold", klen, kv->key.ptr,
                               (unsigned long long)kv->n, value_type_name(et));
        c->pos += (size_t)kv->n * es;
        return MCP_STATUS_OK;
    }
    size_t es = scalar_size(type);
    if (es == 0)
        return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL, "GGUF: key '%.*s' has unknown value type %u", klen,
                           kv->key.ptr, type);
    kv->data = c->base + c->pos;
    if (c->size - c->pos < es) return truncated(c, "a metadata value");
    c->pos += es;
    return MCP_STATUS_OK;
}

static mcp_status read_tensor_info(cursor *c, mcp_gguf_tensor *t, uint64_t index)
{
    size_t at = c->pos;
    mcp_status st = read_str(c, &t->name, "a tensor name");
    if (st != MCP_STATUS_OK) return st;
    if (t->name.len == 0 || t->name.len > GGUF_MAX_NAME)
        return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL, "GGUF: tensor %llu at byte %zu has a name of %llu bytes",
                           (unsigned long long)index, at, (unsigned long long)t->name.len);
    const int nlen = (int)t->name.len;
    st = read_u32(c, &t->n_dims, "a tensor's rank");
    if (st != MCP_STATUS_OK) return st;
    if (t->n_dims == 0 || t->n_dims > MCP_GGUF_MAX_DIMS)
        return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL, "GGUF: tensor '%.*s' has %u dimensions (1 to %d allowed)", nlen,
                           t->name.ptr, t->n_dims, MCP_GGUF_MAX_DIMS);
    uint64_t n = 1;
    for (uint32_t d = 0; d < MCP_GGUF_MAX_DIMS; d++) {
        uint64_t v = 1;
        if (d < t->n_dims) {
            st = read_u64(c, &v, "a tensor dimension");
            if (st != MCP_STATUS_OK) return st;
        }
        /* No tensor has 2^48 elements along one axis or in all. */
        if (v == 0 || v > ((uint64_t)1 << 48) || n > (((uint64_t)1 << 48) / v))
            return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL, "GGUF: tensor '%.*s' dimension %u is %llu (absurd size)", nlen,
                               t->name.ptr, d, (unsigned long long)v);
        t->ne[d] = (int64_t)v;
        n *= v;
    }
    t->n_elems = n;
    st = read_u32(c, &t->type, "a tensor's type");
    if (st == MCP_STATUS_OK) st = read_u64(c, &t->offset, "a tensor's offset");
    if (st != MCP_STATUS_OK) return st;
    uint32_t be = 1, bb = 0;
    if (!mcp_ggml_type_block(t->type, &be, &bb))
        return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL, "GGUF: tensor '%.*s' has unknown type %u", nlen, t->name.ptr,
                           t->type);
    if (t->ne[0] % be != 0)
        return mcp_err_set(c->err, MCP_STATUS_INVALID_MODEL,
                           "GGUF: tensor '%.*s' of type %s has rows of %lld elements, not a multiple of its block of %u",
                           nlen, t->name.ptr, mcp_ggml_type_name(t->type), (long long)t->ne[0], be);
    t->nbytes = n / be * bb;
    return MCP_STATUS_OK;
}

const mcp_gguf_kv *mcp_gguf_find(const mcp_gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (mcp_gguf_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const mcp_gguf_tensor *mcp_gguf_tensor_find(const mcp_gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (mcp_gguf_str_eq(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

void mcp_gguf_close(mcp_gguf *g)
{
    if (!g) return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) mcp_free(g->kv[i].strs);
    mcp_free(g->kv);
    mcp_free(g->tensors);
    if (g->map) munmap(g->map, g->map_len);
    mcp_free(g);
}

/* Duplicate keys or tensor names would make lookups depend on order. The
 * lists are short (hundreds), so a quadratic scan at open is fine. */
static mcp_status check_unique(const mcp_gguf *g, mcp_err *err)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        for (uint64_t j = i + 1; j < g->n_kv; j++)
            if (g->kv[i].key.len == g->kv[j].key.len && !memcmp(g->kv[i].key.ptr, g->kv[j].key.ptr, g->kv[i].key.len))
                return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: metadata key '%.*s' appears twice",
                                   (int)g->kv[i].key.len, g->kv[i].key.ptr);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        for (uint64_t j = i + 1; j < g->n_tensors; j++)
            if (g->tensors[i].name.len == g->tensors[j].name.len &&
                !memcmp(g->tensors[i].name.ptr, g->tensors[j].name.ptr, g->tensors[i].name.len))
                return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: tensor '%.*s' appears twice",
                                   (int)g->tensors[i].name.len, g->tensors[i].name.ptr);
    return MCP_STATUS_OK;
}

static mcp_status parse(mcp_gguf *g, const uint8_t *buf, size_t size, mcp_err *err)
{
    cursor c = {buf, size, 0, err};
    char magic[4] = {0};
    mcp_status st = read_bytes(&c, magic, 4, "the magic");
    if (st != MCP_STATUS_OK) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "not a GGUF file: %zu bytes", size);
    if (memcmp(magic, GGUF_MAGIC, 4) != 0) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "not a GGUF file: no GGUF magic");
    st = read_u32(&c, &g->version, "the version");
    if (st != MCP_STATUS_OK) return st;
    if (g->version != 2 && g->version != 3)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "GGUF version %u is not supported (versions 2 and 3 are)", g->version);
    st = read_u64(&c, &g->n_tensors, "the tensor count");
    if (st == MCP_STATUS_OK) st = read_u64(&c, &g->n_kv, "the metadata count");
    if (st != MCP_STATUS_OK) return st;
    /* A metadata entry takes at least 12 bytes (key length, type), a
     * tensor's info at least 24: counts beyond what the file holds are lies. */
    if (g->n_kv > (size - c.pos) / 12)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: %llu metadata entries cannot fit in %zu bytes",
                           (unsigned long long)g->n_kv, size);
    if (g->n_tensors > (size - c.pos) / 24)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: %llu tensors cannot fit in %zu bytes",
                           (unsigned long long)g->n_tensors, size);
    g->kv = mcp_calloc((size_t)(g->n_kv ? g->n_kv : 1), sizeof *g->kv);
    g->tensors = mcp_calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *g->tensors);
    if (!g->kv || !g->tensors) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (uint64_t i = 0; i < g->n_kv; i++) {
        st = read_kv(&c, &g->kv[i], i);
        if (st != MCP_STATUS_OK) return st;
    }
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    bool found = false;
    st = mcp_gguf_get_u32(g, "general.alignment", &g->alignment, &found, err);
    if (st != MCP_STATUS_OK) return st;
    if (g->alignment == 0 || (g->alignment & (g->alignment - 1)) != 0 || g->alignment > (1u << 20))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: general.alignment is %u (a power of two up to 1 MiB is allowed)",
                           g->alignment);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        st = read_tensor_info(&c, &g->tensors[i], i);
        if (st != MCP_STATUS_OK) return st;
    }
    st = check_unique(g, err);
    if (st != MCP_STATUS_OK) return st;
    uint64_t data = ((uint64_t)c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors > 0 && data > size)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: the data section starts at byte %llu, past the end (%zu bytes)",
                           (unsigned long long)data, size);
    g->data_offset = data;
    const uint64_t data_len = data <= size ? size - data : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        mcp_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: tensor '%.*s' offset %llu is not a multiple of the alignment %u",
                               (int)t->name.len, t->name.ptr, (unsigned long long)t->offset, g->alignment);
        if (t->offset > data_len || t->nbytes > data_len - t->offset)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                               "GGUF: tensor '%.*s' (%llu bytes at offset %llu) runs past the end of the file (data section of %llu bytes)",
                               (int)t->name.len, t->name.ptr, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                               (unsigned long long)data_len);
        t->data = buf + data + t->offset;
    }
    g->base = buf;
    g->size = size;
    return MCP_STATUS_OK;
}

mcp_status mcp_gguf_parse(const uint8_t *buf, size_t size, mcp_gguf **out, mcp_err *err)
{
    *out = NULL;
    mcp_gguf *g = mcp_calloc(1, sizeof *g);
    if (!g) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = parse(g, buf, size, err);
    if (st != MCP_STATUS_OK) {
        mcp_gguf_close(g);
        return st;
    }
    *out = g;
    return MCP_STATUS_OK;
}

mcp_status mcp_gguf_open(const char *path, mcp_gguf **out, mcp_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return mcp_err_set(err, MCP_STATUS_IO_ERROR, "%s: mmap: %s", path, strerror(e));
        }
    }
    close(fd);
    mcp_gguf *g = mcp_calloc(1, sizeof *g);
    if (!g) {
        if (map) munmap(map, size);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    g->map = map;
    g->map_len = size;
    mcp_status st = parse(g, map ? map : (const uint8_t *)"", size, err);
    if (st != MCP_STATUS_OK) {
        mcp_err_prefix(err, "%s", path);
        mcp_gguf_close(g);
        return st;
    }
    *out = g;
    return MCP_STATUS_OK;
}

/* Typed reads. */

static mcp_status wrong_type(const mcp_gguf_kv *kv, const char *want, mcp_err *err)
{
    return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: key '%.*s' is %s%s, expected %s", (int)kv->key.len, kv->key.ptr,
                       kv->type == MCP_GGUF_ARRAY ? "an array of " : "", value_type_name(kv->elem_type), want);
}

/* Any integer scalar as a signed 128-bit-safe pair: value and sign. */
static bool int_value(const mcp_gguf_kv *kv, uint64_t *mag, bool *neg)
{
    const uint8_t *p = kv->data;
    *neg = false;
    switch (kv->type) {
    case MCP_GGUF_UINT8: *mag = p[0]; return true;
    case MCP_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *mag = v; return true; }
    case MCP_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *mag = v; return true; }
    case MCP_GGUF_UINT64: { uint64_t v; memcpy(&v, p, 8); *mag = v; return true; }
    case MCP_GGUF_INT8: { int8_t v; memcpy(&v, p, 1); *neg = v < 0; *mag = (uint64_t)(v < 0 ? -(int64_t)v : v); return true; }
    case MCP_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *neg = v < 0; *mag = (uint64_t)(v < 0 ? -(int64_t)v : v); return true; }
    case MCP_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *neg = v < 0; *mag = (uint64_t)(v < 0 ? -(int64_t)v : v); return true; }
    case MCP_GGUF_INT64: {
        int64_t v;
        memcpy(&v, p, 8);
        *neg = v < 0;
        *mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
        return true;
    }
    default: return false;
    }
}

mcp_status mcp_gguf_get_u64(const mcp_gguf *g, const char *key, uint64_t *out, bool *found, mcp_err *err)
{
    const mcp_gguf_kv *kv = mcp_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return MCP_STATUS_OK;
    uint64_t mag;
    bool neg;
    if (!int_value(kv, &mag, &neg)) return wrong_type(kv, "an integer", err);
    if (neg)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: key '%s' is -%llu, expected a count", key, (unsigned long long)mag);
    *out = mag;
    return MCP_STATUS_OK;
}

mcp_status mcp_gguf_get_u32(const mcp_gguf *g, const char *key, uint32_t *out, bool *found, mcp_err *err)
{
    uint64_t v = 0;
    mcp_status st = mcp_gguf_get_u64(g, key, &v, found, err);
    if (st != MCP_STATUS_OK || !*found) return st;
    if (v > UINT32_MAX)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "GGUF: key '%s' is %llu, more than 32 bits hold", key, (unsigned long long)v);
    *out = (uint32_t)v;
    return MCP_STATUS_OK;
}

mcp_status mcp_gguf_get_f32(const mcp_gguf *g, const char *key, float *out, bool *found, mcp_err *err)
{
    const mcp_gguf_kv *kv = mcp_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return MCP_STATUS_OK;
    if (kv->type == MCP_GGUF_FLOAT32) {
        memcpy(out, kv->data, 4);
    } else if (kv->type == MCP_GGUF_FLOAT64) {
        double d;
        memcpy(&d, kv->data, 8);
        *out = (float)d;
    } else {
        uint64_t mag;
        bool neg;
        if (!int_value(kv, &mag, &neg)) return wrong_type(kv, "a number", err);
        *out = neg ? -(float)mag : (float)mag;
    }
    return MCP_STATUS_OK;
}

mcp_status mcp_gguf_get_bool(const mcp_gguf *g, const char *key, bool *out, bool *found, mcp_err *err)
{
    const mcp_gguf_kv *kv = mcp_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return MCP_STATUS_OK;
    if (kv->type != MCP_GGUF_BOOL) return wrong_type(kv, "bool", err);
    *out = kv->data[0] != 0;
    return MCP_STATUS_OK;
}

mcp_status mcp_gguf_get_str(const mcp_gguf *g, const char *key, mcp_gguf_str *out, bool *found, mcp_err *err)
{
    const mcp_gguf_kv *kv = mcp_gguf_find(g, key);
    *found = kv != NULL;
    if (!kv) return MCP_STATUS_OK;
    if (kv->type != MCP_GGUF_STRING) return wrong_type(kv, "string", err);
    uint64_t len = 0;
    memcpy(&len, kv->data, 8);
    out->ptr = (const char *)kv->data + 8;
    out->len = len;
    return MCP_STATUS_OK;
}

mcp_status mcp_gguf_get_array(const mcp_gguf *g, const char *key, mcp_gguf_type elem_type, const mcp_gguf_kv **out,
                              mcp_err *err)
{
    const mcp_gguf_kv *kv = mcp_gguf_find(g, key);
    *out = NULL;
    if (!kv) return MCP_STATUS_OK;
    if (kv->type != MCP_GGUF_ARRAY || kv->elem_type != elem_type) {
        char want[48];
        snprintf(want, sizeof want, "an array of %s", value_type_name(elem_type));
        return wrong_type(kv, want, err);
    }
    *out = kv;
    return MCP_STATUS_OK;
}

int32_t mcp_gguf_arr_i32(const mcp_gguf_kv *kv, uint64_t i)
{
    int32_t v;
    memcpy(&v, kv->data + i * 4, 4);
    return v;
}

float mcp_gguf_arr_f32(const mcp_gguf_kv *kv, uint64_t i)
{
    float v;
    memcpy(&v, kv->data + i * 4, 4);
    return v;
}
