#include "base/base.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const status_names[] = {
#define MCP__STATUS_NAME(name, text) text,
    MCP_STATUS_MAP(MCP__STATUS_NAME)
#undef MCP__STATUS_NAME
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) == MCP_STATUS_COUNT,
               "status name table out of sync");

const char *mcp_status_str(mcp_status status)
{
    if ((int)status < 0 || status >= MCP_STATUS_COUNT) return "unknown status";
    return status_names[status];
}

void mcp__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "mcp: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

mcp_status mcp_err_vset(mcp_err *err, mcp_status status, const char *fmt, va_list ap)
{
    if (err && err->buf && err->cap > 0) vsnprintf(err->buf, err->cap, fmt, ap);
    return status;
}

mcp_status mcp_err_set(mcp_err *err, mcp_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mcp_err_vset(err, status, fmt, ap);
    va_end(ap);
    return status;
}

void mcp_err_prefix(mcp_err *err, const char *fmt, ...)
{
    if (!err || !err->buf || err->cap == 0) return;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t cap = err->cap;
    size_t mlen = strnlen(err->buf, cap - 1);
    char *msg = malloc(mlen + 1);
    if (!msg) return;
    memcpy(msg, err->buf, mlen);
    msg[mlen] = '\0';
    /* When everything does not fit, keep the end of the message: the cause
     * is there, and each enclosing context only adds a prefix. */
    size_t plen = strlen(prefix);
    if (plen + 2 + mlen + 1 <= cap) {
        snprintf(err->buf, cap, "%s: %s", prefix, msg);
    } else {
        size_t keep_msg = cap / 2 < mlen ? cap / 2 : mlen;
        size_t room = cap - 1 - keep_msg;
        size_t keep_prefix = room > 5 ? room - 5 : 0; /* "...: " */
        if (keep_prefix > plen) keep_prefix = plen;
        snprintf(err->buf, cap, "%.*s...: %s", (int)keep_prefix, prefix, msg + (mlen - keep_msg));
    }
    free(msg);
}

static atomic_llong alloc_live, alloc_total;

/*
 * Blocks the model load fills once (the file's bytes, the decoded tensors)
 * ask for transparent huge pages on their 2 MiB-aligned part before first
 * touch (mcp_malloc_load). Touching fresh memory costs a page fault per
 * 4 KiB page, and on virtual machines a fault is expensive: loading
 * ResNet-50 took 79 000 faults and 1.1-1.4 s, with huge pages 31 000 and
 * 0.5-0.8 s. Memory that every run touches (packed weights, arenas) stays
 * on small pages (except plain weights of 2 MiB and more that the import
 * takes over and a kernel keeps reading, e.g. on --backend ref): on the bench VM, runs over huge pages took 10-25% longer
 * at the median and up to 2x at p90 (the guest saw no faults; the cost is
 * in the hypervisor's handling of the guest's large pages). Where the
 * kernel's policy is "never" the advice is ignored.
 */
#define HUGE_PAGE ((uintptr_t)2 << 20)

static void advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    if (!p || n < HUGE_PAGE) return;
    uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
    if (end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

/*
 * Memory accounts: every block carries a 16-byte header naming the account
 * it was charged to (the one the allocating thread was using, or none) and
 * its size, so a model's real bytes are what its load and its runs hold
 * now, wherever they are freed. An account lives while its owner or any
 * block charged to it does (one reference each).
 */
struct mcp_mem_account {
    atomic_llong bytes;
    atomic_llong refs;
    atomic_llong limit;    /* 0: none */
    atomic_llong refusals; /* allocations the limit refused */
};

typedef struct block_hdr {
    mcp_mem_account *acct;
    size_t size;
} block_hdr;
_Static_assert(sizeof(block_hdr) == 16, "the header keeps malloc's 16-byte alignment");

static _Thread_local mcp_mem_account *tl_account;

mcp_mem_account *mcp_mem_account_create(void)
{
    mcp_mem_account *a = malloc(sizeof *a);
    if (!a) return NULL;
    atomic_init(&a->bytes, 0);
    atomic_init(&a->refs, 1);
    atomic_init(&a->limit, 0);
    atomic_init(&a->refusals, 0);
    return a;
}

static void account_unref(mcp_mem_account *a)
{
    if (a && atomic_fetch_sub(&a->refs, 1) == 1) free(a);
}

void mcp_mem_account_release(mcp_mem_account *a) { account_unref(a); }

int64_t mcp_mem_account_bytes(const mcp_mem_account *a) { return a ? atomic_load(&a->bytes) : 0; }

void mcp_mem_account_set_limit(mcp_mem_account *a, int64_t bytes) { atomic_store(&a->limit, bytes > 0 ? bytes : 0); }
int64_t mcp_mem_account_limit(const mcp_mem_account *a) { return a ? atomic_load(&a->limit) : 0; }
int64_t mcp_mem_account_refusals(const mcp_mem_account *a) { return a ? atomic_load(&a->refusals) : 0; }

/* Adds n bytes to a (when there is one) before the block exists; false,
 * adding nothing, when that passes a's limit. Concurrent reservations
 * each see the others' bytes, so together they never pass it. */
static bool reserve(mcp_mem_account *a, long long n)
{
    if (!a) return true;
    long long limit = atomic_load(&a->limit);
    long long now = atomic_fetch_add(&a->bytes, n) + n;
    if (limit > 0 && n > 0 && now > limit) {
        atomic_fetch_sub(&a->bytes, n);
        atomic_fetch_add(&a->refusals, 1);
        return false;
    }
    return true;
}

static void unreserve(mcp_mem_account *a, long long n)
{
    if (a) atomic_fetch_sub(&a->bytes, n);
}

mcp_mem_account *mcp_mem_account_use(mcp_mem_account *a)
{
    mcp_mem_account *prev = tl_account;
    tl_account = a;
    return prev;
}

/* A new block of n bytes, already reserved on acct. */
static void *charge(block_hdr *h, mcp_mem_account *acct, size_t n)
{
    h->acct = acct;
    h->size = n;
    if (acct) atomic_fetch_add(&acct->refs, 1);
    atomic_fetch_add(&alloc_live, 1);
    atomic_fetch_add(&alloc_total, 1);
    return h + 1;
}

void *mcp_malloc_load(size_t n)
{
    void *p = mcp_malloc(n);
    advise_huge(p, n);
    return p;
}

void *mcp_malloc(size_t n)
{
    if (n > SIZE_MAX - sizeof(block_hdr) || n > (size_t)LLONG_MAX) return NULL;
    mcp_mem_account *acct = tl_account;
    if (!reserve(acct, (long long)n)) return NULL;
    block_hdr *h = malloc(sizeof *h + n);
    if (!h) unreserve(acct, (long long)n);
    return h ? charge(h, acct, n) : NULL;
}

void *mcp_calloc(size_t count, size_t size)
{
    size_t n;
    if (!mcp_mul_overflow_size(count ? count : 1, size ? size : 1, &n) || n > SIZE_MAX - sizeof(block_hdr) ||
        n > (size_t)LLONG_MAX)
        return NULL;
    mcp_mem_account *acct = tl_account;
    if (!reserve(acct, (long long)n)) return NULL;
    block_hdr *h = calloc(1, sizeof *h + n);
    if (!h) unreserve(acct, (long long)n);
    return h ? charge(h, acct, n) : NULL;
}

void *mcp_realloc(void *p, size_t n)
{
    if (!p) return mcp_malloc(n);
    if (n > SIZE_MAX - sizeof(block_hdr) || n > (size_t)LLONG_MAX) return NULL;
    block_hdr *h = (block_hdr *)p - 1;
    size_t old = h->size;
    mcp_mem_account *acct = h->acct; /* the block stays with the account it was charged to */
    long long delta = (long long)n - (long long)old;
    if (!reserve(acct, delta)) return NULL;
    block_hdr *q = realloc(h, sizeof *q + n);
    if (!q) {
        unreserve(acct, delta);
        return NULL;
    }
    q->size = n;
    atomic_fetch_add(&alloc_total, 1);
    return q + 1;
}

void mcp_free(void *p)
{
    if (!p) return;
    block_hdr *h = (block_hdr *)p - 1;
    if (h->acct) {
        atomic_fetch_sub(&h->acct->bytes, (long long)h->size);
        account_unref(h->acct);
    }
    atomic_fetch_sub(&alloc_live, 1);
    free(h);
}

char *mcp_strdup(const char *s)
{
    size_t n = strlen(s);
    char *d = mcp_malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

int64_t mcp_alloc_live_count(void) { return atomic_load(&alloc_live); }
int64_t mcp_alloc_total_count(void) { return atomic_load(&alloc_total); }

int mcp_mul_overflow_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

bool mcp_secret_equal(const char *given, const char *want)
{
    size_t n = strlen(want), m = strlen(given);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(want[i] ^ (i < m ? given[i] : 0));
    return diff == 0;
}

mcp_status mcp_file_open_regular(const char *path, FILE **out, mcp_err *err)
{
    *out = NULL;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer forever; it is refused below, before anything is read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return mcp_err_set(err, errno == ENOENT ? MCP_STATUS_NOT_FOUND : MCP_STATUS_IO_ERROR, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "cannot read '%s': not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot open '%s': out of memory", path);
    }
    *out = f;
    return MCP_STATUS_OK;
}

mcp_status mcp_file_read(const char *path, uint8_t **data, size_t *len, mcp_err *err)
{
    *data = NULL;
    *len = 0;
    FILE *f;
    mcp_status st = mcp_file_open_regular(path, &f, err);
    if (st != MCP_STATUS_OK) return st;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot seek '%s'", path);
    }
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot size '%s' (not a regular file?)", path);
    }
    uint8_t *buf = mcp_malloc_load((size_t)size);
    if (!buf) {
        fclose(f);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory reading '%s' (%ld bytes)", path, size);
    }
    size_t got = size ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    if (got != (size_t)size) {
        mcp_free(buf);
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "short read on '%s'", path);
    }
    *data = buf;
    *len = (size_t)size;
    return MCP_STATUS_OK;
}
