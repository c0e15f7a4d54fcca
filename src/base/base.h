/*
 * base: status codes, error messages, assertions and small utilities shared by
 * every layer. Nothing here knows about tensors or graphs.
 */
#ifndef MCP_BASE_H
#define MCP_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mcp/status.h"

/* Bugs abort; bad input returns a status. */
#define MCP_ASSERT(cond)                                                     \
    do {                                                                     \
        if (!(cond)) mcp__assert_fail(#cond, __FILE__, __LINE__);            \
    } while (0)

_Noreturn void mcp__assert_fail(const char *expr, const char *file, int line);

/*
 * An error sink: a caller-owned buffer that receives the first failure's
 * message. Functions that fail write a sentence naming what was wrong and
 * where, then return a status. A NULL sink discards messages.
 */
typedef struct mcp_err {
    char *buf;
    size_t cap;
} mcp_err;

/* Formats into err (if any) and returns status, so callers can
 * `return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "...")`. */
mcp_status mcp_err_set(mcp_err *err, mcp_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
mcp_status mcp_err_vset(mcp_err *err, mcp_status status, const char *fmt, va_list ap);

/* Prepends "prefix: " to whatever message err already holds. */
void mcp_err_prefix(mcp_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Allocation wrappers: they return NULL on failure (never abort), so a
 * tensor-sized allocation failure becomes MCP_STATUS_OUT_OF_MEMORY. */
void *mcp_malloc(size_t n);
/* mcp_malloc for a large buffer the model load fills once and does not keep
 * for the runs (huge pages where the kernel allows them; see base.c). */
void *mcp_malloc_load(size_t n);
void *mcp_calloc(size_t count, size_t size);
void *mcp_realloc(void *p, size_t n);
void mcp_free(void *p);
char *mcp_strdup(const char *s);
/* Memory accounts: while a thread uses an account, the blocks it
 * allocates through these wrappers are charged to it until they are freed
 * (on any thread). A model version's account is its real bytes. */
typedef struct mcp_mem_account mcp_mem_account;
mcp_mem_account *mcp_mem_account_create(void);
/* The owner's reference; the account itself goes with its last block. */
void mcp_mem_account_release(mcp_mem_account *a);
int64_t mcp_mem_account_bytes(const mcp_mem_account *a);
/* Charges the calling thread's allocations to a (NULL: none) from now on;
 * returns the account it used before. */
mcp_mem_account *mcp_mem_account_use(mcp_mem_account *a);
/* A ceiling on the account's bytes (0: none, the default): an allocation
 * or growth charged to it that would pass the ceiling fails as if memory
 * had run out, and is counted among the refusals. */
void mcp_mem_account_set_limit(mcp_mem_account *a, int64_t bytes);
int64_t mcp_mem_account_limit(const mcp_mem_account *a);
int64_t mcp_mem_account_refusals(const mcp_mem_account *a);
/* Number of live allocations made through these wrappers (for tests). */
int64_t mcp_alloc_live_count(void);
/* Allocations (and reallocations) made so far, freed or not. */
int64_t mcp_alloc_total_count(void);

/* Overflow-checked size arithmetic: returns 0 on overflow. */
int mcp_mul_overflow_size(size_t a, size_t b, size_t *out);

/* Compares a presented secret with the expected one in time that does not
 * depend on where they differ. */
bool mcp_secret_equal(const char *given, const char *want);

/* Reads a whole file. *data is owned by the caller (mcp_free). */
mcp_status mcp_file_read(const char *path, uint8_t **data, size_t *len, mcp_err *err);
/* Opens a regular file for reading; a FIFO, device or folder is refused
 * without blocking (NOT_FOUND when missing, INVALID_ARGUMENT when not a
 * regular file). */
mcp_status mcp_file_open_regular(const char *path, FILE **out, mcp_err *err);

/* ---- SHA-256 (OpenSSL libcrypto) ----
 * Digests are written as the OCI image layout names them:
 * "sha256:" and 64 lowercase hex digits (MCP_DIGEST_LEN characters). */
#define MCP_DIGEST_LEN 71
typedef struct mcp_sha256 {
    void *ctx; /* EVP_MD_CTX *, freed by mcp_sha256_end */
} mcp_sha256;
mcp_status mcp_sha256_begin(mcp_sha256 *h, mcp_err *err);
void mcp_sha256_update(mcp_sha256 *h, const void *data, size_t len);
/* Writes the digest ("" when hashing failed) and frees the context. */
void mcp_sha256_end(mcp_sha256 *h, char digest[MCP_DIGEST_LEN + 1]);
mcp_status mcp_sha256_bytes(const void *data, size_t len, char digest[MCP_DIGEST_LEN + 1], mcp_err *err);
/* A regular file's digest and size (*size may be NULL). */
mcp_status mcp_sha256_file(const char *path, char digest[MCP_DIGEST_LEN + 1], int64_t *size, mcp_err *err);
/* Exactly "sha256:" + 64 lowercase hex digits: safe to use as a file name. */
bool mcp_digest_valid(const char *s);

/* ---- memory pool: many small allocations freed in one go ----
 * Used per request: the request's tensors and strings live in its pool and
 * are released with it. Not thread-safe; one owner at a time. */
typedef struct mcp_pool mcp_pool;
mcp_pool *mcp_pool_create(size_t chunk_bytes);
/* 16-byte aligned; NULL on out-of-memory. Blocks larger than the chunk size
 * get their own allocation. */
void *mcp_pool_alloc(mcp_pool *p, size_t n);
void *mcp_pool_calloc(mcp_pool *p, size_t n);
char *mcp_pool_strndup(mcp_pool *p, const char *s, size_t n);
/* Releases every block but keeps the first chunk for reuse. */
void mcp_pool_reset(mcp_pool *p);
size_t mcp_pool_bytes(const mcp_pool *p);
void mcp_pool_destroy(mcp_pool *p);

/* ---- growable byte buffer ---- */
typedef struct mcp_buf {
    uint8_t *data;
    size_t len, cap;
    bool failed; /* an append ran out of memory; contents are incomplete */
} mcp_buf;

void mcp_buf_append(mcp_buf *b, const void *data, size_t n);
void mcp_buf_puts(mcp_buf *b, const char *s);
void mcp_buf_printf(mcp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quotes and escapes included). */
void mcp_buf_json_string(mcp_buf *b, const char *s);
/* The same for n bytes that may hold NUL (written \u0000). */
void mcp_buf_json_stringn(mcp_buf *b, const char *s, size_t n);
void mcp_buf_reset(mcp_buf *b);  /* len = 0, keeps memory */
void mcp_buf_free(mcp_buf *b);

/* Monotonic clock in microseconds / nanoseconds. */
int64_t mcp_now_us(void);
int64_t mcp_now_ns(void);

/* Vector loops whose float comparisons may become vector selects: gcc
 * needs -fno-trapping-math for that (nothing here runs with floating-point
 * traps enabled, so no result changes); clang does it by itself. */
#if defined(__clang__)
#define MCP_NO_TRAPPING_MATH
#else
#define MCP_NO_TRAPPING_MATH __attribute__((optimize("no-trapping-math")))
#endif
/* A function compiled for AVX-512, AVX2 and the baseline, the variant
 * picked at load by the CPU (the distributed binary targets baseline
 * x86-64). */
#if defined(__x86_64__)
#define MCP_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MCP_MULTIVERSION
#endif

#endif
