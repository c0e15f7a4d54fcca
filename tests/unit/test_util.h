/*
 * Minimal test harness for the unit tests: check macros that report
 * file:line and count failures, plus temporary-folder helpers.
 *
 * Each test executable includes this header once (it defines static state),
 * runs its cases with TU_RUN and returns tu_finish() from main. CHECK-style
 * macros record a failure and continue; REQUIRE-style macros record it and
 * return from the current (void) test function, for when going on would
 * dereference something that is not there. The macros are not thread-safe:
 * worker threads count their own failures and report them to main.
 */
#ifndef MCP_TEST_UTIL_H
#define MCP_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp/status.h"

static int tu_failures __attribute__((unused));
static int tu_checks __attribute__((unused));

#define TU_FAIL_AT(file, line, ...)                                           \
    do {                                                                      \
        fprintf(stderr, "%s:%d: FAILED: ", (file), (line));                   \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        tu_failures++;                                                        \
    } while (0)

#define TU_CHECK(cond)                                                        \
    do {                                                                      \
        tu_checks++;                                                          \
        if (!(cond)) TU_FAIL_AT(__FILE__, __LINE__, "%s", #cond);             \
    } while (0)

#define TU_REQUIRE(cond)                                                      \
    do {                                                                      \
        tu_checks++;                                                          \
        if (!(cond)) {                                                        \
            TU_FAIL_AT(__FILE__, __LINE__, "required: %s", #cond);            \
            return;                                                           \
        }                                                                     \
    } while (0)

#define TU_CHECK_INT(a, b)                                                    \
    do {                                                                      \
        long long tu_a_ = (long long)(a), tu_b_ = (long long)(b);             \
        tu_checks++;                                                          \
        if (tu_a_ != tu_b_)                                                   \
            TU_FAIL_AT(__FILE__, __LINE__, "%s == %s (%lld vs %lld)", #a, #b, \
                       tu_a_, tu_b_);                                         \
    } while (0)

#define TU_CHECK_NEAR(a, b, tol)                                              \
    do {                                                                      \
        double tu_a_ = (double)(a), tu_b_ = (double)(b);                      \
        tu_checks++;                                                          \
        if (!(fabs(tu_a_ - tu_b_) <= (tol)))                                  \
            TU_FAIL_AT(__FILE__, __LINE__, "%s ~= %s (%.9g vs %.9g)", #a, #b, \
                       tu_a_, tu_b_);                                         \
    } while (0)

#define TU_CHECK_STR(a, b)                                                    \
    do {                                                                      \
        const char *tu_a_ = (a), *tu_b_ = (b);                                \
        tu_checks++;                                                          \
        if (!tu_a_ || !tu_b_ || strcmp(tu_a_, tu_b_) != 0)                    \
            TU_FAIL_AT(__FILE__, __LINE__, "%s == %s ('%s' vs '%s')", #a, #b, \
                       tu_a_ ? tu_a_ : "(null)", tu_b_ ? tu_b_ : "(null)");   \
    } while (0)

/* Checks that a status expression has the expected value; `msg` (may be
 * NULL) is printed on failure, usually the error buffer. */
#define TU_CHECK_STATUS(expr, expected, msg)                                  \
    do {                                                                      \
        mcp_status tu_s_ = (expr), tu_e_ = (expected);                        \
        const char *tu_m_ = (msg);                                            \
        tu_checks++;                                                          \
        if (tu_s_ != tu_e_)                                                   \
            TU_FAIL_AT(__FILE__, __LINE__, "%s: got '%s', expected '%s' (%s)", \
                       #expr, mcp_status_str(tu_s_), mcp_status_str(tu_e_),   \
                       tu_m_ ? tu_m_ : "");                                   \
    } while (0)

#define TU_REQUIRE_OK(expr, msg)                                              \
    do {                                                                      \
        mcp_status tu_s_ = (expr);                                            \
        const char *tu_m_ = (msg);                                            \
        tu_checks++;                                                          \
        if (tu_s_ != MCP_STATUS_OK) {                                         \
            TU_FAIL_AT(__FILE__, __LINE__, "required ok: %s: '%s' (%s)", #expr, \
                       mcp_status_str(tu_s_), tu_m_ ? tu_m_ : "");            \
            return;                                                           \
        }                                                                     \
    } while (0)

/* Checks that string `hay` contains `needle`. */
#define TU_CHECK_CONTAINS(hay, needle)                                        \
    do {                                                                      \
        const char *tu_h_ = (hay), *tu_n_ = (needle);                         \
        tu_checks++;                                                          \
        if (!tu_h_ || !strstr(tu_h_, tu_n_))                                  \
            TU_FAIL_AT(__FILE__, __LINE__, "message '%s' lacks '%s'",         \
                       tu_h_ ? tu_h_ : "(null)", tu_n_);                      \
    } while (0)

#define TU_RUN(fn)                                                            \
    do {                                                                      \
        int tu_before_ = tu_failures;                                         \
        fn();                                                                 \
        fprintf(stderr, "%s %s\n", tu_failures == tu_before_ ? "ok  " : "FAIL", #fn); \
    } while (0)

static inline int tu_finish(const char *suite)
{
    fprintf(stderr, "%s: %d checks, %d failures\n", suite, tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}

/* Makes a fresh temporary folder under $TMPDIR (or /tmp) into buf. Returns
 * 0 on success. */
static inline int tu_make_temp_dir(char *buf, size_t cap, const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    int n = snprintf(buf, cap, "%s/mcp-unit-%s-XXXXXX", base, tag);
    if (n < 0 || (size_t)n >= cap) return -1;
    return mkdtemp(buf) ? 0 : -1;
}

/* buf = dir + "/" + name. Returns buf. */
static inline char *tu_path(char *buf, size_t cap, const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    if (dl + 1 + nl >= cap) {
        fprintf(stderr, "tu_path: path too long\n");
        abort();
    }
    memcpy(buf, dir, dl);
    buf[dl] = '/';
    memcpy(buf + dl + 1, name, nl + 1);
    return buf;
}

/* Removes dir/name for each name (files or empty folders, in the order
 * given), then dir itself. */
static inline void tu_remove_dir(const char *dir, const char *const *names, int n)
{
    char p[4096];
    for (int i = 0; i < n; i++) {
        tu_path(p, sizeof p, dir, names[i]);
        if (unlink(p) != 0) rmdir(p);
    }
    rmdir(dir);
}

/* Removes a folder and everything under it (rm -rf). */
static inline void tu_remove_tree(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", path);
}

/* Deterministic pseudo-random numbers (xorshift64*). */
static inline uint64_t tu_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

#endif
