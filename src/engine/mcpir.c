/* Compiled models (.mcpir): writer, reader and stamp (see mcpir.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/mcpir.h"

#define MCPIR_VERSION 1u
#define ALIGN 64u

/* Header fields (byte offsets). */
enum {
    H_MAGIC = 0,
    H_VERSION = 8,
    H_OPTIONS = 12,
    H_SECTIONS = 16, /* 4 x {u64 offset, u64 length}: graph, packed, blob, source */
    H_STAMP = 80,    /* MCPIR_STAMP_MAX bytes, NUL-terminated */
};
_Static_assert(H_STAMP + MCPIR_STAMP_MAX <= MCPIR_HEADER_SIZE, "the stamp fits the header");

enum { SEC_GRAPH, SEC_PACKED, SEC_BLOB, SEC_SOURCE, SEC_COUNT };
static const char *const section_names[SEC_COUNT] = {"graph", "packed weights", "data", "source"};

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t align_up(uint64_t v) { return (v + ALIGN - 1) / ALIGN * ALIGN; }

bool mcp__mcpir_is(const uint8_t *buf, size_t len)
{
    return len >= 8 && memcmp(buf, MCPIR_MAGIC, 8) == 0;
}

uint32_t mcp__mcpir_options(const mcp_session_options *o)
{
    return (o && o->bf16 ? MCPIR_OPT_BF16 : 0u) | (o && o->fuse_quantized_sums ? MCPIR_OPT_FUSE_SUMS : 0u);
}

void mcp__mcpir_stamp(const char *backend, int threads, uint32_t options, char *out, size_t cap)
{
    char be[200];
    mcp_ops_stamp(be, sizeof be);
    snprintf(out, cap, "mcp2026 %s ir%u; backend %s; threads %d; bf16 %d; fuse-quantized-sums %d; %s", MCP_VERSION_STRING,
             MCPIR_VERSION, backend, threads, (options & MCPIR_OPT_BF16) != 0, (options & MCPIR_OPT_FUSE_SUMS) != 0, be);
}

/* ---- reader ---- */

static mcp_status parse_packed(const uint8_t *p, size_t len, const mcp_import_blob *blob, mcpir_file *f, mcp_err *err)
{
    /* Count first, so the table is one allocation. */
    size_t at = 0;
    int n = 0;
    while (at < len) {
        if (len - at < 32) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "packed weights: record %d is cut short", n);
        uint32_t desc_len = get_u32(p + at + 8);
        if (desc_len == 0 || desc_len > MCPIR_MAX_DESC)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "packed weights: record %d has a %u-byte descriptor (1..%d)", n,
                               desc_len, MCPIR_MAX_DESC);
        size_t rec = 32 + ((size_t)desc_len + 7) / 8 * 8;
        if (rec > len - at) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "packed weights: record %d is cut short", n);
        if (++n > MCPIR_MAX_PACKED)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "packed weights: more than %d records", MCPIR_MAX_PACKED);
        at += rec;
    }
    f->packed = mcp_calloc((size_t)n + 1, sizeof *f->packed);
    if (!f->packed) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    at = 0;
    for (int i = 0; i < n; i++) {
        const uint8_t *r = p + at;
        uint32_t node = get_u32(r), slot = get_u32(r + 4), desc_len = get_u32(r + 8);
        uint64_t off = get_u64(r + 16), dlen = get_u64(r + 24);
        if (node > INT32_MAX || slot > 64)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "packed weights: record %d names node %u, slot %u", i, node, slot);
        if (off % ALIGN != 0 || off > blob->len || dlen > blob->len - off)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                               "packed weights: record %d (node %u) lies outside the data area or is not 64-byte aligned", i,
                               node);
        f->packed[i] = (mcp_prepacked){.node = (int)node, .slot = (int)slot, .desc = r + 32, .desc_len = desc_len,
                                       .data = blob->data + off, .len = (size_t)dlen};
        at += 32 + ((size_t)desc_len + 7) / 8 * 8;
    }
    f->n_packed = n;
    return MCP_STATUS_OK;
}

mcp_status mcp__mcpir_parse(const uint8_t *buf, size_t len, mcpir_file *f, mcp_err *err)
{
    memset(f, 0, sizeof *f);
    if (len < MCPIR_HEADER_SIZE || !mcp__mcpir_is(buf, len))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "not a compiled model: the .mcpir header is missing or cut short");
    uint32_t version = get_u32(buf + H_VERSION);
    if (version != MCPIR_VERSION)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "compiled model format %u; this engine reads format %u (compile it again)",
                           version, MCPIR_VERSION);
    f->options = get_u32(buf + H_OPTIONS);
    const char *stamp = (const char *)buf + H_STAMP;
    if (!memchr(stamp, '\0', MCPIR_STAMP_MAX))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "compiled model header: the stamp is not terminated");
    memcpy(f->stamp, stamp, strlen(stamp) + 1);
    const uint8_t *sec[SEC_COUNT];
    size_t sec_len[SEC_COUNT];
    for (int i = 0; i < SEC_COUNT; i++) {
        uint64_t off = get_u64(buf + H_SECTIONS + 16 * i), n = get_u64(buf + H_SECTIONS + 16 * i + 8);
        if (off < MCPIR_HEADER_SIZE || off % ALIGN != 0 || off > len || n > len - off)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                               "compiled model header: the %s section (offset %llu, %llu bytes) lies outside the %zu-byte file",
                               section_names[i], (unsigned long long)off, (unsigned long long)n, len);
        sec[i] = buf + off;
        sec_len[i] = (size_t)n;
    }
    if (sec_len[SEC_GRAPH] == 0 || sec_len[SEC_SOURCE] == 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "compiled model: the %s section is empty",
                           sec_len[SEC_GRAPH] == 0 ? "graph" : "source");
    f->graph = sec[SEC_GRAPH];
    f->graph_len = sec_len[SEC_GRAPH];
    f->blob = (mcp_import_blob){sec[SEC_BLOB], sec_len[SEC_BLOB]};
    f->source = sec[SEC_SOURCE];
    f->source_len = sec_len[SEC_SOURCE];
    mcp_status st = parse_packed(sec[SEC_PACKED], sec_len[SEC_PACKED], &f->blob, f, err);
    if (st != MCP_STATUS_OK) {
        mcp_free(f->packed);
        f->packed = NULL;
    }
    return st;
}

mcp_status mcp__mcpir_open(const char *path, mcpir_file *f, mcp_err *err)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "not a regular file");
    }
    if ((uint64_t)sb.st_size < MCPIR_HEADER_SIZE) {
        close(fd);
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "not a compiled model: %lld bytes", (long long)sb.st_size);
    }
    size_t len = (size_t)sb.st_size;
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot map: %s", strerror(errno));
    mcp_status st = mcp__mcpir_parse(map, len, f, err);
    if (st != MCP_STATUS_OK) {
        munmap(map, len);
        return st;
    }
    f->map = map;
    f->map_len = len;
    return MCP_STATUS_OK;
}

void mcp__mcpir_close(mcpir_file *f)
{
    if (f->map) munmap(f->map, f->map_len);
    mcp_free(f->packed);
    memset(f, 0, sizeof *f);
}

/* ---- writer ---- */

typedef struct place_ctx {
    const mcp_graph *g;
    uint64_t *init_off; /* per initializer: blob offset, or UINT64_MAX inline / released */
    uint64_t cursor;
} place_ctx;

static bool place_initializer(void *user, int k, const mcp_tensor *t, mcp_export_place *out)
{
    place_ctx *pc = user;
    size_t nb = mcp_tensor_nbytes(t);
    if (nb == 0) return false;
    if (!t->data) {
        /* Only float weights a kernel holds packed lose their data. */
        *out = (mcp_export_place){MCP_RELEASED_LOCATION, 0, 0};
        return true;
    }
    pc->cursor = align_up(pc->cursor);
    pc->init_off[k] = pc->cursor;
    *out = (mcp_export_place){MCP_BLOB_LOCATION, pc->cursor, nb};
    pc->cursor += nb;
    return true;
}

static bool write_all(FILE *fp, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, fp) == n; }

static bool pad_to(FILE *fp, uint64_t *at, uint64_t to)
{
    static const uint8_t zeros[ALIGN];
    while (*at < to) {
        size_t n = (size_t)(to - *at < ALIGN ? to - *at : ALIGN);
        if (!write_all(fp, zeros, n)) return false;
        *at += n;
    }
    return true;
}

mcp_status mcp__mcpir_write(const mcp_session *s, uint32_t options, const uint8_t *source, size_t source_len,
                            const char *path, mcp_err *err)
{
    const mcp_graph *g = s->graph;
    place_ctx pc = {g, mcp_malloc(sizeof(uint64_t) * ((size_t)g->n_initializers + 1)), 0};
    if (!pc.init_off) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; k < g->n_initializers; k++) pc.init_off[k] = UINT64_MAX;
    uint8_t *gbuf = NULL;
    size_t glen = 0;
    mcp_status st = mcp_onnx_export(g, place_initializer, &pc, &gbuf, &glen, err);
    /* The packed weights, after the initializers in the data area. */
    mcp_prepacked *pk = NULL;
    int npk = 0, cap = 0;
    uint64_t *pk_off = NULL;
    for (int i = 0; st == MCP_STATUS_OK && i < g->n_nodes; i++) {
        const mcp_node *n = &g->nodes[i];
        if (!n->kernel || !n->kernel->packed_weights || !n->kernel_state) continue;
        for (int slot = 0; st == MCP_STATUS_OK && slot < 8; slot++) {
            mcp_prepacked v;
            if (!n->kernel->packed_weights(n->kernel_state, slot, &v)) break;
            if (npk == cap) {
                cap = cap ? cap * 2 : 64;
                mcp_prepacked *np = mcp_realloc(pk, sizeof *pk * (size_t)cap);
                uint64_t *no = mcp_realloc(pk_off, sizeof *pk_off * (size_t)cap);
                if (np) pk = np;
                if (no) pk_off = no;
                if (!np || !no) {
                    st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
                    break;
                }
            }
            if (v.desc_len == 0 || v.desc_len > MCPIR_MAX_DESC) {
                st = mcp_err_set(err, MCP_STATUS_INTERNAL, "node '%s': a %zu-byte layout descriptor", n->name, v.desc_len);
                break;
            }
            v.node = i;
            v.slot = slot;
            pc.cursor = align_up(pc.cursor);
            pk_off[npk] = pc.cursor;
            pc.cursor += v.len;
            pk[npk++] = v;
        }
    }
    /* Every released initializer is read only by kernels that wrote theirs. */
    for (int k = 0; st == MCP_STATUS_OK && k < g->n_initializers; k++) {
        if (g->initializers[k].data || mcp_tensor_nbytes(&g->initializers[k]) == 0) continue;
        int v = g->initializer_values[k];
        for (int i = 0; st == MCP_STATUS_OK && i < g->n_nodes; i++)
            for (int j = 0; j < g->nodes[i].n_inputs; j++) {
                if (g->nodes[i].inputs[j] != v) continue;
                bool have = false;
                for (int p = 0; p < npk; p++) have |= pk[p].node == i;
                if (!have) {
                    st = mcp_err_set(err, MCP_STATUS_INTERNAL, "initializer '%s': node '%s' reads it, and neither its plain nor its packed form is held",
                                     g->values[v].name, g->nodes[i].name);
                    break;
                }
            }
    }
    size_t packed_len = 0;
    for (int p = 0; p < npk; p++) packed_len += 32 + (pk[p].desc_len + 7) / 8 * 8;
    uint64_t off[SEC_COUNT], len[SEC_COUNT] = {glen, packed_len, pc.cursor, source_len};
    off[0] = MCPIR_HEADER_SIZE;
    for (int i = 1; i < SEC_COUNT; i++) off[i] = align_up(off[i - 1] + len[i - 1]);

    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *fp = NULL;
    if (st == MCP_STATUS_OK && !(fp = fopen(tmp, "wb")))
        st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "%s: cannot create: %s", tmp, strerror(errno));
    if (st == MCP_STATUS_OK) {
        uint8_t h[MCPIR_HEADER_SIZE] = {0};
        memcpy(h + H_MAGIC, MCPIR_MAGIC, 8);
        put_u32(h + H_VERSION, MCPIR_VERSION);
        put_u32(h + H_OPTIONS, options);
        for (int i = 0; i < SEC_COUNT; i++) {
            put_u64(h + H_SECTIONS + 16 * i, off[i]);
            put_u64(h + H_SECTIONS + 16 * i + 8, len[i]);
        }
        mcp__mcpir_stamp(s->backend, s->threads, options, (char *)h + H_STAMP, MCPIR_STAMP_MAX);
        uint64_t at = 0;
        bool ok = write_all(fp, h, sizeof h);
        at += sizeof h;
        ok = ok && write_all(fp, gbuf, glen);
        at += glen;
        ok = ok && pad_to(fp, &at, off[SEC_PACKED]);
        for (int p = 0; ok && p < npk; p++) {
            uint8_t r[32] = {0};
            put_u32(r, (uint32_t)pk[p].node);
            put_u32(r + 4, (uint32_t)pk[p].slot);
            put_u32(r + 8, (uint32_t)pk[p].desc_len);
            put_u64(r + 16, pk_off[p]);
            put_u64(r + 24, pk[p].len);
            ok = write_all(fp, r, sizeof r) && write_all(fp, pk[p].desc, pk[p].desc_len);
            at += sizeof r + pk[p].desc_len;
            ok = ok && pad_to(fp, &at, (at + 7) / 8 * 8);
        }
        ok = ok && pad_to(fp, &at, off[SEC_BLOB]);
        /* The data area, in offset order: initializers, then packed weights. */
        for (int k = 0; ok && k < g->n_initializers; k++) {
            if (pc.init_off[k] == UINT64_MAX) continue;
            ok = pad_to(fp, &at, off[SEC_BLOB] + pc.init_off[k]) &&
                 write_all(fp, g->initializers[k].data, mcp_tensor_nbytes(&g->initializers[k]));
            at += mcp_tensor_nbytes(&g->initializers[k]);
        }
        for (int p = 0; ok && p < npk; p++) {
            ok = pad_to(fp, &at, off[SEC_BLOB] + pk_off[p]) && write_all(fp, pk[p].data, pk[p].len);
            at += pk[p].len;
        }
        ok = ok && pad_to(fp, &at, off[SEC_SOURCE]) && write_all(fp, source, source_len);
        if (fclose(fp) != 0) ok = false;
        fp = NULL;
        if (!ok) st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "%s: write failed: %s", tmp, strerror(errno));
        else if (rename(tmp, path) != 0)
            st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "%s: cannot rename into place: %s", path, strerror(errno));
        if (st != MCP_STATUS_OK) unlink(tmp);
    }
    mcp_free(gbuf);
    mcp_free(pk);
    mcp_free(pk_off);
    mcp_free(pc.init_off);
    return st;
}
