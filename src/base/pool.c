/* Chunked bump allocator for per-request memory. */
#include <string.h>
#include <time.h>

#include "base/base.h"

typedef struct pool_block {
    struct pool_block *next;
    size_t size, used;
    /* data follows, 16-byte aligned */
} pool_block;

struct mcp_pool {
    pool_block *head;  /* current chunk (first in list) */
    pool_block *big;   /* oversized blocks */
    size_t chunk;
    size_t bytes;
};

#define BLOCK_HDR ((sizeof(pool_block) + 15) & ~(size_t)15)

static pool_block *block_new(size_t size)
{
    pool_block *b = mcp_malloc(BLOCK_HDR + size);
    if (!b) return NULL;
    b->next = NULL;
    b->size = size;
    b->used = 0;
    return b;
}

mcp_pool *mcp_pool_create(size_t chunk_bytes)
{
    mcp_pool *p = mcp_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->chunk = chunk_bytes < 256 ? 256 : chunk_bytes;
    return p;
}

void *mcp_pool_alloc(mcp_pool *p, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (n > p->chunk / 2) {
        pool_block *b = block_new(n);
        if (!b) return NULL;
        b->next = p->big;
        p->big = b;
        p->bytes += n;
        return (char *)b + BLOCK_HDR;
    }
    if (!p->head || p->head->size - p->head->used < n) {
        pool_block *b = block_new(p->chunk);
        if (!b) return NULL;
        b->next = p->head;
        p->head = b;
    }
    void *r = (char *)p->head + BLOCK_HDR + p->head->used;
    p->head->used += n;
    p->bytes += n;
    return r;
}

void *mcp_pool_calloc(mcp_pool *p, size_t n)
{
    void *r = mcp_pool_alloc(p, n);
    if (r) memset(r, 0, n);
    return r;
}

char *mcp_pool_strndup(mcp_pool *p, const char *s, size_t n)
{
    char *r = mcp_pool_alloc(p, n + 1);
    if (!r) return NULL;
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}

static void free_list(pool_block *b)
{
    while (b) {
        pool_block *n = b->next;
        mcp_free(b);
        b = n;
    }
}

void mcp_pool_reset(mcp_pool *p)
{
    free_list(p->big);
    p->big = NULL;
    if (p->head) {
        free_list(p->head->next);
        p->head->next = NULL;
        p->head->used = 0;
    }
    p->bytes = 0;
}

size_t mcp_pool_bytes(const mcp_pool *p) { return p->bytes; }

void mcp_pool_destroy(mcp_pool *p)
{
    if (!p) return;
    free_list(p->big);
    free_list(p->head);
    mcp_free(p);
}

int64_t mcp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t mcp_now_us(void) { return mcp_now_ns() / 1000; }
