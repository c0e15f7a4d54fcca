/* Weight-product kernels alone: decode (one token) and prefill (a batch of
 * tokens) through mcp_llm_gemm on one thread, for each ISA the CPU has and
 * each weight type with a direct product. Two matrix sizes: one that stays
 * in L2 (what the arithmetic alone sustains) and one far larger than the
 * last-level cache (what streaming from memory gives). Random weights; the
 * figure is the median of the repetitions with the lowest and highest.
 *
 *   build/bin/llm_gemv_bench [--reps N] [--k K]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/gguf.h"
#include "llm/kernels.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t row_bytes(uint32_t wt, int64_t k)
{
    uint32_t be = 1, bb = 0;
    mcp_ggml_type_block(wt, &be, &bb);
    return (size_t)(k / be) * bb;
}

/* Random bytes, with every 16-bit scale a small normal f16 (0x2c00 +- a
 * little: about 0.06) so no product overflows or goes subnormal. */
static void fill(uint32_t wt, uint8_t *w, size_t n_rows, size_t rb)
{
    uint64_t s = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < n_rows * rb; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        w[i] = (uint8_t)(s >> 56);
    }
    size_t es = wt == MCP_GGML_F32 ? 4 : 2, bs = wt == MCP_GGML_Q8_0 ? 34 : 18;
    for (size_t r = 0; r < n_rows; r++) {
        uint8_t *row = w + r * rb;
        if (wt == MCP_GGML_Q8_0 || wt == MCP_GGML_Q4_0) {
            for (size_t o = 0; o < rb; o += bs) row[o + 1] = 0x2c;
        } else if (wt == MCP_GGML_F32) {
            for (size_t o = 0; o < rb; o += es) {
                float f = (float)((int)row[o] - 128) / 128.0f;
                memcpy(row + o, &f, 4);
            }
        } else {
            for (size_t o = 0; o < rb; o += es) row[o + 1] = (uint8_t)(0x2c | (row[o + 1] & 0x80));
        }
    }
}

typedef struct result {
    double med, lo, hi;
} result;

/* Seconds of one call for n_tok tokens over the rows: median, fastest, slowest. */
static result run(uint32_t wt, int64_t k, int64_t rows, int n_tok, int reps, const uint8_t *w, const uint8_t *x,
                  size_t xs, float *y)
{
    mcp_llm_gemm_args a = {wt, w, row_bytes(wt, k), k, 0, rows, mcp_llm_act_for(wt), x, xs, n_tok, y, rows};
    double t[64];
    int inner = 1;
    /* Enough calls per repetition for about 20 ms. */
    double t0 = now();
    mcp_llm_gemm(&a);
    double one = now() - t0;
    if (one < 0.02) inner = (int)(0.02 / (one > 1e-7 ? one : 1e-7)) + 1;
    for (int r = 0; r < reps; r++) {
        t0 = now();
        for (int i = 0; i < inner; i++) mcp_llm_gemm(&a);
        t[r] = (now() - t0) / inner;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    return (result){t[reps / 2], t[0], t[reps - 1]};
}

int main(int argc, char **argv)
{
    int reps = 9;
    int64_t k = 2048;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--k") && i + 1 < argc) k = atoll(argv[++i]) / 64 * 64;
        else {
            fprintf(stderr, "usage: %s [--reps N] [--k K (a multiple of 64)]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (k < 64 || k > 65536) k = 2048;
    const uint32_t types[] = {MCP_GGML_F32, MCP_GGML_F16, MCP_GGML_BF16, MCP_GGML_Q8_0, MCP_GGML_Q4_0};
    const char *names[] = {"f32", "f16", "bf16", "q8_0", "q4_0"};
    const int64_t n_tok = 64;
    /* L2-resident: 256 KB of weights; streaming: 512 MB. */
    const struct {
        const char *what;
        size_t bytes;
    } sizes[] = {{"in L2", (size_t)256 << 10}, {"streamed", (size_t)512 << 20}};
    float *xf = malloc((size_t)n_tok * k * sizeof *xf);
    size_t xs = mcp_llm_act_row_bytes(MCP_LLM_ACT_Q8, k);
    if (xs < (size_t)k * 4) xs = (size_t)k * 4;
    uint8_t *xq = aligned_alloc(64, (size_t)n_tok * xs);
    float *y = malloc((size_t)n_tok * 262144 * sizeof *y);
    if (!xf || !xq || !y) return 1;
    for (int64_t i = 0; i < n_tok * k; i++) xf[i] = sinf((float)i * 0.37f);
    printf("%-7s %-5s %-9s %26s %26s\n", "isa", "type", "weights", "decode GB/s (lo-hi)", "prefill 64 GMAC/s (lo-hi)");
    for (int isa = MCP_LLM_ISA_AVX2; isa <= (int)mcp_llm_isa_best(); isa++) {
        mcp_llm_set_isa((mcp_llm_isa)isa);
        for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
            uint32_t wt = types[ti];
            mcp_llm_act act = mcp_llm_act_for(wt);
            for (int t = 0; t < n_tok; t++) mcp_llm_act_quantize(act, xf + t * k, k, xq + (size_t)t * xs);
            for (size_t si = 0; si < 2; si++) {
                size_t rb = row_bytes(wt, k);
                int64_t rows = (int64_t)(sizes[si].bytes / rb);
                if (rows > 262144) rows = 262144;
                uint8_t *w = aligned_alloc(64, ((size_t)rows * rb + 63) / 64 * 64);
                if (!w) return 1;
                fill(wt, w, (size_t)rows, rb);
                result d = run(wt, k, rows, 1, reps, w, xq, xs, y);
                result p = run(wt, k, rows, (int)n_tok, si ? 3 : reps, w, xq, xs, y);
                /* Decode as weight bytes per second, prefill as multiply-adds per second. */
                double gb = (double)rows * (double)rb / 1e9, gmac = (double)rows * (double)k * (double)n_tok / 1e9;
                printf("%-7s %-5s %-9s %10.2f (%6.2f-%6.2f) %10.2f (%6.2f-%6.2f)\n", mcp_llm_isa_name((mcp_llm_isa)isa),
                       names[ti], sizes[si].what, gb / d.med, gb / d.hi, gb / d.lo, gmac / p.med, gmac / p.hi, gmac / p.lo);
                free(w);
            }
        }
    }
    free(xf);
    free(xq);
    free(y);
    return 0;
}
