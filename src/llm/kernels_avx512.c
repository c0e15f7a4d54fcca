/* The AVX-512 fast paths (see kernels.h). This file is compiled without
 * -mavx512 flags so the binary runs on any x86-64: every function carries a
 * target attribute, and the dispatcher (kernels.c) reaches them only on a
 * CPU with AVX-512 F/BW/VL. Within the table, the integer products use VNNI
 * (vpdpbusd) when __builtin_cpu_supports says so; an AVX-512 CPU without VNNI
 * (Skylake-SP) takes the AVX2 table's integer products instead, which need
 * no separate code path here and are tested on every AVX2 machine.
 *
 * Weight products work on tiles of rows x tokens held in registers: each
 * weight vector loaded (and converted) once serves every token of the tile,
 * each activation vector every row. Decode (one token) streams rows of 1 KB
 * or more one at a time, leaving the next to the hardware prefetcher, and
 * shorter rows in tiles of TILE_RD, prefetching the next tile as it goes (the
 * rows of a tile advance in step, more streams than the hardware prefetcher
 * follows well, and each tile restarts them); see run_tiles. Prefill visits
 * tokens in chunks whose activations fit in L2, so that the row tiles re-read
 * them from there.
 *
 * BF16 weights are widened to f32 by a shift (exact) and multiplied with f32
 * activations by FMA, not by vdpbf16ps: that would round the activations to
 * bf16 first, and gains little, since decode is bound by memory and prefill
 * by FMA throughput either way (32 MACs per instruction for both on Sapphire
 * Rapids, plus a conversion pass for vdpbf16ps). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "llm/gguf.h"
#include "llm/kernels.h"

#define ISA_512 "avx512f,avx512bw,avx512vl,avx512dq,fma,f16c"
#define ISA_VNNI ISA_512 ",avx512vnni"
#define K512 __attribute__((target(ISA_512)))
#define K512_INLINE static inline __attribute__((always_inline, target(ISA_512)))
#define KVNNI __attribute__((target(ISA_VNNI)))
#define KVNNI_INLINE static inline __attribute__((always_inline, target(ISA_VNNI)))

enum {
    TILE_RP = 4,  /* rows per prefill tile */
    TILE_RD = 8,  /* rows per decode tile */
    TILE_R = 8,   /* the larger of the two, for array sizes */
    TILE_T = 4,   /* tokens per prefill tile */
    QUAD = 4,     /* Q8_0/Q4_0 blocks per step of the integer product */
};
/* Decode takes rows at least this long one at a time (run_tiles, gemm_q_decode). */
#define DECODE_ROW_ALONE_BYTES 1024u
/* Activation bytes of a token chunk kept in L2 while its row tiles run. */
#define CHUNK_ACT_BYTES (256u * 1024u)

K512_INLINE __m512 bcast_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm512_cvtph_ps(_mm256_set1_epi16((short)h));
}

/* ---- Tiles and the loop over them, shared by both activation forms ---- */

typedef void (*tile_fn)(const mcp_llm_gemm_args *a, int64_t r, int t);
/* Prefill tiles of one row and of TILE_RP rows for 1..TILE_T tokens, and
 * the decode tile of TILE_RD rows by one token. */
typedef struct tile_set {
    tile_fn one[TILE_T];
    tile_fn rows[TILE_T];
    tile_fn decode;
} tile_set;

static void run_tiles(const mcp_llm_gemm_args *a, const tile_set *ts)
{
    if (a->n_tok == 1) {
        int64_t r = a->r0;
        /* Rows of a KB or more one at a time: a single stream through
         * contiguous rows outruns eight interleaved ones (measured on Zen 4:
         * about 1.5x on F16 decode, 1.9x on Q8_0); each row's arithmetic is
         * the same either way. Such a row leaves the next to the hardware
         * prefetcher: prefetching it by hand cost 20-25% of F16 and Q8_0
         * decode of a 1 B model on Zen 4 (Q4_0 10%). */
        if (a->row_bytes >= DECODE_ROW_ALONE_BYTES)
            for (; r < a->r1; r++) ts->one[0](a, r, 0);
        for (; r + TILE_RD <= a->r1; r += TILE_RD) ts->decode(a, r, 0);
        for (; r + TILE_RP <= a->r1; r += TILE_RP) ts->rows[0](a, r, 0);
        for (; r < a->r1; r++) ts->one[0](a, r, 0);
        return;
    }
    size_t xb = mcp_llm_act_row_bytes(a->act, a->k);
    int chunk = (int)(CHUNK_ACT_BYTES / (xb ? xb : 1)) / TILE_T * TILE_T;
    if (chunk < TILE_T) chunk = TILE_T;
    for (int t0 = 0; t0 < a->n_tok; t0 += chunk) {
        int t1 = a->n_tok - t0 > chunk ? t0 + chunk : a->n_tok;
        int64_t r = a->r0;
        for (; r + TILE_RP <= a->r1; r += TILE_RP)
            for (int t = t0; t < t1; t += TILE_T) ts->rows[(t1 - t < TILE_T ? t1 - t : TILE_T) - 1](a, r, t);
        for (; r < a->r1; r++)
            for (int t = t0; t < t1; t += TILE_T) ts->one[(t1 - t < TILE_T ? t1 - t : TILE_T) - 1](a, r, t);
    }
}

/* Instantiates tile_<kind>(a, wtype, r, t, R, T) for one weight type at
 * every tile shape, and the tile_set that lists them. */
#define TILE_DEF(attr, kind, ty, wt, R, T)                                                    \
    static attr void tile_##kind##_##ty##_##R##_##T(const mcp_llm_gemm_args *a, int64_t r, int t) \
    {                                                                                         \
        tile_##kind(a, wt, r, t, R, T);                                                       \
    }
#define TILE_SET(attr, kind, ty, wt)                                                          \
    TILE_DEF(attr, kind, ty, wt, 1, 1)                                                        \
    TILE_DEF(attr, kind, ty, wt, 1, 2)                                                        \
    TILE_DEF(attr, kind, ty, wt, 1, 3)                                                        \
    TILE_DEF(attr, kind, ty, wt, 1, 4)                                                        \
    TILE_DEF(attr, kind, ty, wt, 4, 1)                                                        \
    TILE_DEF(attr, kind, ty, wt, 4, 2)                                                        \
    TILE_DEF(attr, kind, ty, wt, 4, 3)                                                        \
    TILE_DEF(attr, kind, ty, wt, 4, 4)                                                        \
    TILE_DEF(attr, kind, ty, wt, 8, 1)                                                        \
    static const tile_set tiles_##kind##_##ty = {                                             \
        {tile_##kind##_##ty##_1_1, tile_##kind##_##ty##_1_2, tile_##kind##_##ty##_1_3, tile_##kind##_##ty##_1_4}, \
        {tile_##kind##_##ty##_4_1, tile_##kind##_##ty##_4_2, tile_##kind##_##ty##_4_3, tile_##kind##_##ty##_4_4}, \
        tile_##kind##_##ty##_8_1,                                                             \
    };
_Static_assert(TILE_RP == 4 && TILE_RD == 8 && TILE_T == 4, "TILE_SET lists these shapes");

/* ---- F32 activations: weights converted to floats in registers ---- */

/* Bytes of k elements of a row (k a multiple of 32 for quantized types). */
static inline size_t wrow_bytes(uint32_t wtype, int64_t k)
{
    switch (wtype) {
    case MCP_GGML_F32: return (size_t)k * 4;
    case MCP_GGML_F16:
    case MCP_GGML_BF16: return (size_t)k * 2;
    case MCP_GGML_Q8_0: return (size_t)(k / 32) * 34;
    default: return (size_t)(k / 32) * 18;
    }
}

/* Elements [e, e + 32) of a weight row as two vectors of floats. Exact for
 * every type: f16 and bf16 widen exactly, and a Q8_0/Q4_0 value times its
 * f16 scale needs at most 19 significant bits. */
K512_INLINE void load_w32(uint32_t wtype, const uint8_t *row, int64_t e, __m512 *w0, __m512 *w1)
{
    switch (wtype) {
    case MCP_GGML_F32:
        *w0 = _mm512_loadu_ps(row + 4 * e);
        *w1 = _mm512_loadu_ps(row + 4 * e + 64);
        return;
    case MCP_GGML_F16:
        *w0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * e)));
        *w1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * e + 32)));
        return;
    case MCP_GGML_BF16:
        *w0 = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(row + 2 * e))), 16));
        *w1 = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(row + 2 * e + 32))), 16));
        return;
    case MCP_GGML_Q8_0: {
        const uint8_t *blk = row + (e / 32) * 34;
        __m512 d = bcast_f16(blk);
        *w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)))), d);
        *w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 18)))), d);
        return;
    }
    default: { /* Q4_0 */
        const uint8_t *blk = row + (e / 32) * 18;
        __m512 d = bcast_f16(blk);
        __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
        const __m512i eight = _mm512_set1_epi32(8);
        __m512i lo = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0x0F)), eight);
        __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
        *w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d);
        *w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d);
        return;
    }
    }
}

/* acc[i][j] += dot(w[i][we..we+32), x[j][xe..xe+32)) for R rows, T tokens. */
K512_INLINE void step_f(uint32_t wtype, const uint8_t *const *w, int64_t we, const float *const *x, int64_t xe,
                        __m512 acc[TILE_R][TILE_T], const int R, const int T)
{
    __m512 w0[TILE_R], w1[TILE_R];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) load_w32(wtype, w[i], we, &w0[i], &w1[i]);
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
        __m512 x0 = _mm512_loadu_ps(x[j] + xe), x1 = _mm512_loadu_ps(x[j] + xe + 16);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) acc[i][j] = _mm512_fmadd_ps(w1[i], x1, _mm512_fmadd_ps(w0[i], x0, acc[i][j]));
    }
}

K512_INLINE void tile_f(const mcp_llm_gemm_args *a, uint32_t wtype, int64_t r, int t, const int R, const int T)
{
    const uint8_t *w[TILE_R];
    const float *x[TILE_T];
    __m512 acc[TILE_R][TILE_T];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) w[i] = a->w + (size_t)(r + i) * a->row_bytes;
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
        x[j] = (const float *)(a->x + (size_t)(t + j) * a->x_stride);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) acc[i][j] = _mm512_setzero_ps();
    }
    const int64_t k32 = a->k & ~(int64_t)31;
    int64_t e = 0;
    /* The next tile's rows are prefetched, except after a row streamed
     * alone (next 0; see run_tiles). */
    const size_t step_bytes = wrow_bytes(wtype, 32), next = R > 1 || T > 1 ? (size_t)R * a->row_bytes : 0;
    for (; e < k32; e += 32) {
        if (next)
#pragma GCC unroll 8
            for (int i = 0; i < R; i++)
                for (size_t o = 0; o < step_bytes; o += 64)
                    _mm_prefetch((const char *)w[i] + next + (size_t)e / 32 * step_bytes + o, _MM_HINT_T0);
        step_f(wtype, w, e, x, e, acc, R, T);
    }
    /* A float row's last k % 32 elements go through zero-padded copies
     * (quantized rows are whole blocks; the reference ignores a partial one). */
    if (e < a->k && (wtype == MCP_GGML_F32 || wtype == MCP_GGML_F16 || wtype == MCP_GGML_BF16)) {
        size_t es = wtype == MCP_GGML_F32 ? 4 : 2, n = (size_t)(a->k - e);
        uint8_t wb[TILE_R][32 * 4];
        float xb[TILE_T][32];
        const uint8_t *wp[TILE_R];
        const float *xp[TILE_T];
        memset(wb, 0, sizeof wb);
        memset(xb, 0, sizeof xb);
        for (int i = 0; i < R; i++) {
            memcpy(wb[i], w[i] + (size_t)e * es, n * es);
            wp[i] = wb[i];
        }
        for (int j = 0; j < T; j++) {
            memcpy(xb[j], x[j] + e, n * sizeof(float));
            xp[j] = xb[j];
        }
        step_f(wtype, wp, 0, xp, 0, acc, R, T);
    }
#pragma GCC unroll 4
    for (int j = 0; j < T; j++)
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) a->y[(int64_t)(t + j) * a->y_stride + r + i] = _mm512_reduce_add_ps(acc[i][j]);
}

TILE_SET(K512, f, f32, MCP_GGML_F32)
TILE_SET(K512, f, f16, MCP_GGML_F16)
TILE_SET(K512, f, bf16, MCP_GGML_BF16)
TILE_SET(K512, f, q8_0, MCP_GGML_Q8_0)
TILE_SET(K512, f, q4_0, MCP_GGML_Q4_0)

/* ---- Q8 activations: integer products with VNNI ----
 *
 * A step takes QUAD consecutive blocks. Weights and activations are arranged
 * alike: the low register holds elements 0-15 of each block (one 128-bit lane
 * per block), the high register elements 16-31, so that two vpdpbusd leave
 * each block's products summed in its own four int32 lanes, and one
 * conversion and one FMA per row and token apply the four blocks' scales.
 * vpdpbusd multiplies unsigned by signed bytes: Q4_0 nibbles are unsigned
 * already (value + 8); Q8_0 values are made so by flipping the sign bit
 * (value + 128). The excess, 8 or 128 times the activations' sum, is taken
 * off lane by lane (corr), so every lane holds the exact integer product of
 * its own eight elements and rounding starts only at the float scale. */

KVNNI_INLINE void split_quad(__m512i a01, __m512i a23, __m512i *lo, __m512i *hi)
{
    *lo = _mm512_permutex2var_epi64(a01, _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), a23);
    *hi = _mm512_permutex2var_epi64(a01, _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15), a23);
}

K512_INLINE __m512i load2x256(const void *p0, const void *p1)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}


/* ---- Q8 activations, prefill: weights repacked into the grouped form ----
 *
 * With many tokens, each row tile's weights are repacked once per call (per
 * token chunk) into the layout of the activations' grouped form (kernels.h),
 * in a buffer on the stack that stays in L1, and every token tile then
 * reuses them. There every lane of a vector belongs to one block, so eight
 * vpdpbusd (16 blocks, 512 products) go before the one conversion, multiply
 * and FMA that apply the scales; in the quad form above it is two before
 * three. vpdpbusd and the float work share ports 0 and 5 here (measured:
 * twelve independent vpdpbusd retire in 6.6 cycles, eight with four FMAs in
 * 6.5), so that is 11 instead of 20 vector uops per 512 products, and no
 * shuffles of activations at all. The integer sums start from the
 * activations' precomputed -8 or -128 times their sums, which takes the
 * weights' offset off in the same way as the quad form.
 *
 * Tiles are PF_R rows x PF_T tokens: PF_R * PF_T float and as many int32
 * accumulators, PF_R weight and PF_T activation vectors: 31 of the 32
 * registers. k is cut into segments of PF_SEG groups so that the repacked
 * rows of a tile fit in L1; later segments add to y. */

enum {
    DQ_R = 8, /* rows per decode tile */
    PF_R = 4,
    PF_T = 3,
    PF_SEG = 12,     /* groups of 16 blocks per segment of k */
};
#define PF_CHUNK_BYTES (1024u * 1024u) /* grouped activation bytes of a token chunk, kept in L2 */
/* Repacked bytes of one row's group of 16 blocks: 8 vectors and the scales. */
#define PF_GROUP_BYTES (9u * 64u)

/* The 16 x 8 transpose that turns x[j] (blocks 2j and 2j + 1, their eight
 * dwords each in order) into v[d] (dword d of the 16 blocks): three rounds
 * of two-source permutes, each halving the dwords a vector holds per block. */
K512_INLINE void transpose_group(const __m512i x[8], __m512i v[8])
{
    const __m512i lo1 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i lo2 = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
    const __m512i lo3 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i hi1 = _mm512_add_epi32(lo1, _mm512_set1_epi32(4)), hi2 = _mm512_add_epi32(lo2, _mm512_set1_epi32(2)),
                  hi3 = _mm512_add_epi32(lo3, _mm512_set1_epi32(1));
    __m512i y[4][2], z[2][2][2];
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        y[p][0] = _mm512_permutex2var_epi32(x[2 * p], lo1, x[2 * p + 1]);
        y[p][1] = _mm512_permutex2var_epi32(x[2 * p], hi1, x[2 * p + 1]);
    }
#pragma GCC unroll 2
    for (int q = 0; q < 2; q++)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            z[q][h][0] = _mm512_permutex2var_epi32(y[2 * q][h], lo2, y[2 * q + 1][h]);
            z[q][h][1] = _mm512_permutex2var_epi32(y[2 * q][h], hi2, y[2 * q + 1][h]);
        }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
        for (int e = 0; e < 2; e++) {
            v[4 * h + 2 * e] = _mm512_permutex2var_epi32(z[0][h][e], lo3, z[1][h][e]);
            v[4 * h + 2 * e + 1] = _mm512_permutex2var_epi32(z[0][h][e], hi3, z[1][h][e]);
        }
}

/* 16 blocks of a weight row (p the first) into their grouped form at out
 * (64-byte aligned): values made unsigned as in the quad form, then the scales. */
KVNNI_INLINE void repack_group16(uint32_t wtype, const uint8_t *p, uint8_t *out)
{
    const size_t bs = wtype == MCP_GGML_Q8_0 ? 34 : 18;
    __m512i x[8], v[8];
    if (wtype == MCP_GGML_Q8_0) {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) x[j] = _mm512_xor_si512(load2x256(p + 2 * j * bs + 2, p + (2 * j + 1) * bs + 2), flip);
    } else {
        /* Each block's 16 bytes twice, low nibbles from the first copy and
         * high ones from the second: elements 0-15, then 16-31. */
        const __m512i sh = _mm512_setr_epi64(0, 0, 0x0004000400040004ll, 0x0004000400040004ll, 0, 0,
                                             0x0004000400040004ll, 0x0004000400040004ll);
        const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m512i b = _mm512_castsi256_si512(_mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p + 2 * j * bs + 2))),
                _mm_loadu_si128((const __m128i *)(p + (2 * j + 1) * bs + 2)), 1));
            b = _mm512_shuffle_i64x2(b, b, _MM_SHUFFLE(1, 1, 0, 0));
            x[j] = _mm512_and_si512(_mm512_srlv_epi16(b, sh), m4);
        }
    }
    transpose_group(x, v);
#pragma GCC unroll 8
    for (int d = 0; d < 8; d++) _mm512_store_si512((__m512i *)(out + 64 * d), v[d]);
    uint16_t h[16];
    for (int l = 0; l < 16; l++) memcpy(&h[l], p + (size_t)l * bs, 2);
    _mm512_store_ps((float *)(void *)(out + 512), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h)));
}

/* A tail group of g < 16 blocks (first its first, of nb in the row) in the
 * same form, byte by byte: D = g / 2 vectors, then the scales. */
static K512 void repack_tail(uint32_t wtype, const uint8_t *row, int64_t nb, int64_t first, int g, uint8_t *out)
{
    const size_t bs = wtype == MCP_GGML_Q8_0 ? 34 : 18;
    const int D = g / 2;
    float *dw = (float *)(void *)(out + (size_t)D * 64);
    for (int lane = 0; lane < 16; lane++) {
        const int64_t b = first + lane % g;
        const uint8_t *blk = row + (size_t)b * bs;
        for (int v = 0; v < D; v++)
            for (int c = 0; c < 4; c++) {
                int e = 4 * (v + D * (lane / g)) + c;
                uint8_t q = 0;
                if (b < nb)
                    q = wtype == MCP_GGML_Q8_0 ? (uint8_t)(blk[2 + e] ^ 0x80)
                                               : (uint8_t)(e < 16 ? blk[2 + e] & 0x0F : blk[2 + e - 16] >> 4);
                out[(size_t)v * 64 + (size_t)lane * 4 + (size_t)c] = q;
            }
        dw[lane] = b < nb ? bcast_f16(blk)[0] : 0.0f;
    }
}

/* One segment of k for a row tile: nf groups of 16 from group g0, then the
 * tail groups when it is the last. */
typedef struct pf_seg {
    const uint8_t *wbuf; /* the repacked rows */
    size_t xoff;         /* its first group's offset in an activation row */
    int nf;
    int tails; /* the tail groups' sizes, as bits (8, 4, 2); 0 but in the last */
} pf_seg;

/* The tile's rows r..r+nr (the rest zero) of segment sg into buf: per
 * group, PF_R rows of D vectors and the scales each. */
static KVNNI void pf_repack(const mcp_llm_gemm_args *a, int64_t r, int nr, int64_t g0, const pf_seg *sg, uint8_t *buf)
{
    const size_t bs = a->wtype == MCP_GGML_Q8_0 ? 34 : 18;
    const int64_t nb = a->k / 32;
    uint8_t *o = buf;
    for (int gi = 0; gi < sg->nf; gi++)
        for (int i = 0; i < PF_R; i++, o += PF_GROUP_BYTES) {
            if (i < nr) repack_group16(a->wtype, a->w + (size_t)(r + i) * a->row_bytes + (size_t)(g0 + gi) * 16 * bs, o);
            else memset(o, 0, PF_GROUP_BYTES);
        }
    int64_t first = (g0 + sg->nf) * 16;
    for (int g = 8; g >= 2; g /= 2) {
        if (!(sg->tails & g)) continue;
        const size_t gb = (size_t)(g / 2 + 1) * 64;
        for (int i = 0; i < PF_R; i++, o += gb) {
            if (i < nr) repack_tail(a->wtype, a->w + (size_t)(r + i) * a->row_bytes, nb, first, g, o);
            else memset(o, 0, gb);
        }
        first += g;
    }
}

/* acc[i][j] += one group (D vectors) of rows i against tokens j; coff: the
 * offset of the correction for this weight type in the activations' group. */
KVNNI_INLINE void pf_group(const uint8_t *wg, const uint8_t *const *xg, size_t coff, __m512 acc[PF_R][PF_T], const int D,
                           const int T)
{
    __m512i s[PF_R][PF_T];
#pragma GCC unroll 4
    for (int i = 0; i < PF_R; i++)
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) s[i][j] = _mm512_loadu_si512(xg[j] + coff);
#pragma GCC unroll 8
    for (int v = 0; v < D; v++) {
        __m512i w[PF_R], x[PF_T];
#pragma GCC unroll 4
        for (int i = 0; i < PF_R; i++) w[i] = _mm512_load_si512(wg + ((size_t)i * (D + 1) + v) * 64);
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) x[j] = _mm512_loadu_si512(xg[j] + (size_t)v * 64);
#pragma GCC unroll 4
        for (int i = 0; i < PF_R; i++)
#pragma GCC unroll 4
            for (int j = 0; j < T; j++) s[i][j] = _mm512_dpbusd_epi32(s[i][j], w[i], x[j]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < PF_R; i++) {
        __m512 dw = _mm512_load_ps(wg + ((size_t)i * (D + 1) + D) * 64);
#pragma GCC unroll 4
        for (int j = 0; j < T; j++)
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][j]),
                                        _mm512_mul_ps(dw, _mm512_loadu_ps(xg[j] + (size_t)D * 64)), acc[i][j]);
    }
}

/* The sums of four vectors, in order: halving rounds of two-source
 * permutes (14 uops where four separate reductions take about 32). */
K512_INLINE __m128 reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
    const __m512i e1 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i o1 = _mm512_add_epi32(e1, _mm512_set1_epi32(8));
    const __m512i e2 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i o2 = _mm512_add_epi32(e2, _mm512_set1_epi32(4));
    __m512 c01 = _mm512_add_ps(_mm512_permutex2var_ps(a0, e1, a1), _mm512_permutex2var_ps(a0, o1, a1));
    __m512 c23 = _mm512_add_ps(_mm512_permutex2var_ps(a2, e1, a3), _mm512_permutex2var_ps(a2, o1, a3));
    __m512 c = _mm512_add_ps(_mm512_permutex2var_ps(c01, e2, c23), _mm512_permutex2var_ps(c01, o2, c23));
    c = _mm512_add_ps(c, _mm512_permute_ps(c, _MM_SHUFFLE(1, 0, 3, 2)));
    c = _mm512_add_ps(c, _mm512_permute_ps(c, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), c));
}

KVNNI_INLINE void pf_tile(const mcp_llm_gemm_args *a, const pf_seg *sg, size_t coff, int64_t r, int nr, int t, bool add,
                          const int T)
{
    const uint8_t *xg[PF_T];
    __m512 acc[PF_R][PF_T];
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
        xg[j] = a->x + (size_t)(t + j) * a->x_stride + sg->xoff;
#pragma GCC unroll 4
        for (int i = 0; i < PF_R; i++) acc[i][j] = _mm512_setzero_ps();
    }
    const uint8_t *wg = sg->wbuf;
    for (int gi = 0; gi < sg->nf; gi++) {
        pf_group(wg, xg, 8 * 64 + coff, acc, 8, T);
        wg += PF_R * PF_GROUP_BYTES;
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) xg[j] += MCP_LLM_Q8_GROUP_BYTES(16);
    }
    if (sg->tails & 8) {
        pf_group(wg, xg, 4 * 64 + coff, acc, 4, T);
        wg += PF_R * 5 * 64;
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) xg[j] += MCP_LLM_Q8_GROUP_BYTES(8);
    }
    if (sg->tails & 4) {
        pf_group(wg, xg, 2 * 64 + coff, acc, 2, T);
        wg += PF_R * 3 * 64;
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) xg[j] += MCP_LLM_Q8_GROUP_BYTES(4);
    }
    if (sg->tails & 2) pf_group(wg, xg, 1 * 64 + coff, acc, 1, T);
    const __mmask8 m = (__mmask8)((1u << nr) - 1u);
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
        float *y = a->y + (int64_t)(t + j) * a->y_stride + r;
        __m128 v = reduce4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]);
        if (add) v = _mm_add_ps(v, _mm_maskz_loadu_ps(m, y));
        _mm_mask_storeu_ps(y, m, v);
    }
}

static KVNNI void pf_tile_3(const mcp_llm_gemm_args *a, const pf_seg *sg, size_t coff, int64_t r, int nr, int t, bool add)
{
    pf_tile(a, sg, coff, r, nr, t, add, 3);
}
static KVNNI void pf_tile_2(const mcp_llm_gemm_args *a, const pf_seg *sg, size_t coff, int64_t r, int nr, int t, bool add)
{
    pf_tile(a, sg, coff, r, nr, t, add, 2);
}
static KVNNI void pf_tile_1(const mcp_llm_gemm_args *a, const pf_seg *sg, size_t coff, int64_t r, int nr, int t, bool add)
{
    pf_tile(a, sg, coff, r, nr, t, add, 1);
}
_Static_assert(PF_T == 3, "gemm_q_prefill calls pf_tile_1..3");

/* ---- Q8 activations, decode: the prefill's sums from weights as they lie ----
 *
 * One token reuses nothing, so repacking rows would only add work; but a
 * token decoded alone must give the bits it gets inside a prompt (the KV
 * cache and batching tests compare them), so the float arithmetic is the
 * prefill's: per group, one conversion, multiply and FMA of the same
 * per-lane integer sums, the same reductions, the same segments. The
 * integer sums are exact, so they may come another way: vpdpbusd in the
 * quad form on weights as they lie, then lane sums that gather each
 * block's (or each lane's part of a block's) products into its grouped
 * lane. Activations in the quad form come from the row's blocks, once per
 * group for the whole tile of rows. */

/* Lane L: the sum of lanes 4(L%4)..4(L%4)+3 of q[L/4]. */
KVNNI_INLINE __m512i sum_quads(__m512i q0, __m512i q1, __m512i q2, __m512i q3)
{
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    __m512i c01 = _mm512_add_epi32(_mm512_permutex2var_epi32(q0, ev, q1), _mm512_permutex2var_epi32(q0, od, q1));
    __m512i c23 = _mm512_add_epi32(_mm512_permutex2var_epi32(q2, ev, q3), _mm512_permutex2var_epi32(q2, od, q3));
    return _mm512_add_epi32(_mm512_permutex2var_epi32(c01, ev, c23), _mm512_permutex2var_epi32(c01, od, c23));
}

/* n (1, 2 or 4) blocks of weights at p in the quad form (unsigned);
 * lanes of missing blocks zero. */
KVNNI_INLINE void dq_w(uint32_t wtype, const uint8_t *p, const int n, __m512i *wl, __m512i *wh)
{
    if (wtype == MCP_GGML_Q8_0) {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        __m512i a01, a23 = _mm512_setzero_si512();
        if (n >= 2) a01 = _mm512_xor_si512(load2x256(p + 2, p + 36), flip);
        else a01 = _mm512_maskz_xor_epi64(0x0F, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(p + 2))), flip);
        if (n == 4) a23 = _mm512_xor_si512(load2x256(p + 70, p + 104), flip);
        split_quad(a01, a23, wl, wh);
    } else {
        __m512i v = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)(p + 2)));
        if (n >= 2) v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 20)), 1);
        if (n == 4) {
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 38)), 2);
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 56)), 3);
        }
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        *wl = _mm512_and_si512(v, m4);
        *wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
}

/* The weights' scales of a group of g blocks (n of them real) in its lanes. */
KVNNI_INLINE __m512 dq_scales(const uint8_t *p, size_t bs, const int n, const int g)
{
    const unsigned rep = g == 16 ? 1u : g == 8 ? 0x0101u : g == 4 ? 0x1111u : 0x5555u;
    __m256i h = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int j = 0; j < n; j++) {
        uint16_t v;
        memcpy(&v, p + (size_t)j * bs, 2);
        h = _mm256_mask_set1_epi16(h, (__mmask16)(rep << j), (short)v);
    }
    return _mm512_cvtph_ps(h);
}

/* acc[i] += the group of g blocks from block b (n real) of rows w[i], as
 * pf_group does it; xb the token's blocks, xgg its grouped group. */
KVNNI_INLINE void dq_group(uint32_t wtype, const uint8_t *const *w, size_t next, int64_t b, const int n, const int g,
                           const mcp_llm_q8_block *xb, const uint8_t *xgg, size_t coff, __m512 *acc, const int R)
{
    const size_t bs = wtype == MCP_GGML_Q8_0 ? 34 : 18;
    const int nq = g == 16 ? 4 : g == 8 ? 2 : 1, D = g / 2;
    __m512i al[4], ah[4];
#pragma GCC unroll 4
    for (int q = 0; q < nq; q++)
        split_quad(load2x256(xb[b + 4 * q].qs, xb[b + 4 * q + 1].qs), load2x256(xb[b + 4 * q + 2].qs, xb[b + 4 * q + 3].qs),
                   &al[q], &ah[q]);
    const __m512 dx = _mm512_loadu_ps(xgg + (size_t)D * 64);
    const __m512i corr = _mm512_loadu_si512(xgg + (size_t)D * 64 + coff);
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        const uint8_t *p = w[i] + (size_t)b * bs;
        for (size_t o = 0; next && o < (size_t)g * bs; o += 64) _mm_prefetch((const char *)p + next + o, _MM_HINT_T0);
        __m512i wl, wh, s;
        if (g == 16) {
            __m512i q[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                dq_w(wtype, p + (size_t)k * 4 * bs, 4, &wl, &wh);
                q[k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wl, al[k]), wh, ah[k]);
            }
            s = sum_quads(q[0], q[1], q[2], q[3]);
        } else if (g == 8) {
            __m512i lo[2], hi[2];
#pragma GCC unroll 2
            for (int k = 0; k < 2; k++) {
                dq_w(wtype, p + (size_t)k * 4 * bs, 4, &wl, &wh);
                lo[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wl, al[k]);
                hi[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wh, ah[k]);
            }
            s = sum_quads(lo[0], lo[1], hi[0], hi[1]);
        } else {
            dq_w(wtype, p, n, &wl, &wh);
            __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wl, al[0]);
            __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wh, ah[0]);
            if (g == 4) {
                /* Lane L: block L % 4, elements 8 (L / 4) to 8 (L / 4) + 7. */
                const __m512i e4 = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 16, 20, 24, 28, 18, 22, 26, 30);
                s = _mm512_add_epi32(_mm512_permutex2var_epi32(lo, e4, hi),
                                     _mm512_permutex2var_epi32(lo, _mm512_add_epi32(e4, _mm512_set1_epi32(1)), hi));
            } else {
                /* Lane L: block L % 2, elements 4 (L / 2) to 4 (L / 2) + 3. */
                const __m512i e2 = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 16, 20, 17, 21, 18, 22, 19, 23);
                s = _mm512_permutex2var_epi32(lo, e2, hi);
            }
        }
        s = _mm512_add_epi32(s, corr);
        const __m512 dw = dq_scales(p, bs, n, g);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx), acc[i]);
    }
}

/* Full groups of 16 blocks go faster with the token's blocks rearranged
 * once per call (dv_prepare) instead of once per group of every row:
 * activations in the quad form, and each group's scales and corrections
 * in the lane order the sums come out in. The sums of a group's four
 * quads are then gathered by in-lane unpacks (which run at twice the rate
 * of the two-source permutes): lane 4j + q gets block 4q + j, the
 * transpose of the grouped order. Each lane's float arithmetic is the
 * prefill's lane for that block, and a segment's accumulators are put
 * back in grouped order before the tail groups and the reductions, so the
 * bits stay those of the prefill. */
enum { DV_GROUPS = 32 }; /* rows of up to 16384 elements take this path */

typedef struct dv_group {
    __m512i lo[4], hi[4]; /* the quad form of blocks 4q..4q+3 */
    __m512 dx;            /* the activations' scales, transposed */
    __m512i corr;         /* the weight type's correction, transposed */
} dv_group;

K512_INLINE __m512i dv_transpose(void)
{
    return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

static KVNNI void dv_prepare(const mcp_llm_gemm_args *a, dv_group *dv, int64_t nfull)
{
    const mcp_llm_q8_block *xb = (const mcp_llm_q8_block *)a->x;
    const uint8_t *xg = a->x + mcp_llm_q8_grouped_offset(a->k);
    const size_t coff = a->wtype == MCP_GGML_Q8_0 ? 128 : 64;
    for (int64_t g = 0; g < nfull; g++, xg += MCP_LLM_Q8_GROUP_BYTES(16)) {
        const mcp_llm_q8_block *b = xb + g * 16;
        for (int q = 0; q < 4; q++)
            split_quad(load2x256(b[4 * q].qs, b[4 * q + 1].qs), load2x256(b[4 * q + 2].qs, b[4 * q + 3].qs), &dv[g].lo[q],
                       &dv[g].hi[q]);
        dv[g].dx = _mm512_permutexvar_ps(dv_transpose(), _mm512_loadu_ps(xg + 512));
        dv[g].corr = _mm512_permutexvar_epi32(dv_transpose(), _mm512_loadu_si512(xg + 512 + coff));
    }
}

/* Quad q of the 16 blocks at p in the quad form (unsigned), and the
 * group's weight scales in transposed order. Q4_0: the four blocks' values
 * start at even offsets, so a word permute of the quad's 128 bytes
 * gathers them (the second load masked to the quad's last 8 bytes, never
 * past the row), and the same loads hold the scales. */
KVNNI_INLINE void dv_weights(uint32_t wtype, const uint8_t *p, __m512i wl[4], __m512i wh[4], __m512 *dw)
{
    if (wtype == MCP_GGML_Q4_0) {
        const __m512i pick = _mm512_setr_epi32(0x00020001, 0x00040003, 0x00060005, 0x00080007, 0x000B000A, 0x000D000C,
                                               0x000F000E, 0x00110010, 0x00140013, 0x00160015, 0x00180017, 0x001A0019,
                                               0x001D001C, 0x001F001E, 0x00210020, 0x00230022);
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        __m512i head[4];
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            head[q] = _mm512_loadu_si512(p + 72 * q);
            __m512i v = _mm512_permutex2var_epi16(head[q], pick, _mm512_maskz_loadu_epi8(0xFF, p + 72 * q + 64));
            wl[q] = _mm512_and_si512(v, m4);
            wh[q] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
        /* Word 4j + q: the scale of block j of quad q, at word 9j of its head. */
        const __m512i s01 = _mm512_setr_epi32(0x00200000, 0x00200000, 0x00290009, 0x00290009, 0x00320012, 0x00320012,
                                              0x003B001B, 0x003B001B, 0, 0, 0, 0, 0, 0, 0, 0);
        __m512i h = _mm512_mask_blend_epi16(0xCCCCu, _mm512_permutex2var_epi16(head[0], s01, head[1]),
                                            _mm512_permutex2var_epi16(head[2], s01, head[3]));
        *dw = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
        return;
    }
    __m256i h = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        dq_w(wtype, p + (size_t)q * 136, 4, &wl[q], &wh[q]);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            uint16_t v;
            memcpy(&v, p + (size_t)(4 * q + j) * 34, 2);
            h = _mm256_mask_set1_epi16(h, (__mmask16)(1u << (4 * j + q)), (short)v);
        }
    }
    *dw = _mm512_cvtph_ps(h);
}

/* acc[i] (transposed order) += the full group at block b of rows w[i]. */
KVNNI_INLINE void dv_group_rows(uint32_t wtype, const uint8_t *const *w, size_t next, int64_t b, const dv_group *x,
                                __m512 *acc, const int R)
{
    const size_t bs = wtype == MCP_GGML_Q8_0 ? 34 : 18;
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        const uint8_t *p = w[i] + (size_t)b * bs;
        for (size_t o = 0; next && o < 16 * bs; o += 64) _mm_prefetch((const char *)p + next + o, _MM_HINT_T0);
        __m512i wl[4], wh[4], q[4];
        __m512 dw;
        dv_weights(wtype, p, wl, wh, &dw);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            q[k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wl[k], x->lo[k]), wh[k], x->hi[k]);
        __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(q[0], q[1]), _mm512_unpackhi_epi32(q[0], q[1]));
        __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(q[2], q[3]), _mm512_unpackhi_epi32(q[2], q[3]));
        __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
        s = _mm512_add_epi32(s, x->corr);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, x->dx), acc[i]);
    }
}

KVNNI_INLINE void dq_tile(const mcp_llm_gemm_args *a, int64_t r, const dv_group *dv, const int R)
{
    const uint32_t wt = a->wtype;
    const int64_t nb = a->k / 32, nfull = nb / 16;
    const int tails = (int)((nb % 16 + 1) & ~(int64_t)1);
    const size_t coff = wt == MCP_GGML_Q8_0 ? 128 : 64;
    const mcp_llm_q8_block *xb = (const mcp_llm_q8_block *)a->x;
    const uint8_t *w[DQ_R];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) w[i] = a->w + (size_t)(r + i) * a->row_bytes;
    /* The next tile's rows are prefetched, except after a row alone (next
     * 0; see run_tiles). */
    const size_t next = R > 1 ? (size_t)R * a->row_bytes : 0;
    const uint8_t *xg = a->x + mcp_llm_q8_grouped_offset(a->k);
    for (int64_t g0 = 0;; g0 += PF_SEG) {
        const int nf = (int)(nfull - g0 < PF_SEG ? nfull - g0 : PF_SEG);
        const bool last = g0 + nf >= nfull;
        __m512 acc[DQ_R];
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) acc[i] = _mm512_setzero_ps();
        int64_t b = g0 * 16;
        if (dv) {
            for (int gi = 0; gi < nf; gi++, b += 16, xg += MCP_LLM_Q8_GROUP_BYTES(16))
                dv_group_rows(wt, w, next, b, &dv[g0 + gi], acc, R);
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) acc[i] = _mm512_permutexvar_ps(dv_transpose(), acc[i]);
        } else {
            for (int gi = 0; gi < nf; gi++, b += 16, xg += MCP_LLM_Q8_GROUP_BYTES(16))
                dq_group(wt, w, next, b, 16, 16, xb, xg, coff, acc, R);
        }
        if (last) {
            if (tails & 8) {
                dq_group(wt, w, next, b, 8, 8, xb, xg, coff, acc, R);
                b += 8;
                xg += MCP_LLM_Q8_GROUP_BYTES(8);
            }
            if (tails & 4) {
                dq_group(wt, w, next, b, 4, 4, xb, xg, coff, acc, R);
                b += 4;
                xg += MCP_LLM_Q8_GROUP_BYTES(4);
            }
            if (tails & 2) {
                if (nb - b >= 2) dq_group(wt, w, next, b, 2, 2, xb, xg, coff, acc, R);
                else dq_group(wt, w, next, b, 1, 2, xb, xg, coff, acc, R);
            }
        }
        float *y = a->y + r;
        if (R == 1) {
            __m128 v = reduce4(acc[0], acc[0], acc[0], acc[0]);
            float f = _mm_cvtss_f32(v);
            y[0] = g0 > 0 ? y[0] + f : f;
        } else {
#pragma GCC unroll 2
            for (int i = 0; i < R; i += 4) {
                __m128 v = reduce4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]);
                if (g0 > 0) v = _mm_add_ps(v, _mm_loadu_ps(y + i));
                _mm_storeu_ps(y + i, v);
            }
        }
        if (last) break;
    }
}

static KVNNI void dq_tile_8(const mcp_llm_gemm_args *a, int64_t r, const dv_group *dv)
{
    dq_tile(a, r, dv, 8);
}
static KVNNI void dq_tile_4(const mcp_llm_gemm_args *a, int64_t r, const dv_group *dv)
{
    dq_tile(a, r, dv, 4);
}
static KVNNI void dq_tile_1(const mcp_llm_gemm_args *a, int64_t r, const dv_group *dv)
{
    dq_tile(a, r, dv, 1);
}

static KVNNI void gemm_q_decode(const mcp_llm_gemm_args *a)
{
    const int64_t nfull = a->k / 32 / 16;
    _Alignas(64) dv_group dvbuf[DV_GROUPS];
    const dv_group *dv = NULL;
    if (nfull > 0 && nfull <= DV_GROUPS) {
        dv_prepare(a, dvbuf, nfull);
        dv = dvbuf;
    }
    int64_t r = a->r0;
    if (a->row_bytes >= DECODE_ROW_ALONE_BYTES)
        for (; r < a->r1; r++) dq_tile_1(a, r, dv);
    for (; r + 8 <= a->r1; r += 8) dq_tile_8(a, r, dv);
    for (; r + 4 <= a->r1; r += 4) dq_tile_4(a, r, dv);
    for (; r < a->r1; r++) dq_tile_1(a, r, dv);
}

static KVNNI void gemm_q_prefill(const mcp_llm_gemm_args *a)
{
    const int64_t nb = a->k / 32, nfull = nb / 16;
    const int tails = (int)((nb % 16 + 1) & ~(int64_t)1);
    /* The corrections follow the scales: -8 x sum first, then -128 x sum. */
    const size_t coff = a->wtype == MCP_GGML_Q8_0 ? 128 : 64;
    const size_t gbytes = mcp_llm_q8_grouped_bytes(a->k), xoff0 = mcp_llm_q8_grouped_offset(a->k);
    int chunk = (int)(PF_CHUNK_BYTES / gbytes) / PF_T * PF_T;
    if (chunk < PF_T) chunk = PF_T;
    _Alignas(64) uint8_t wbuf[PF_R * (PF_SEG * PF_GROUP_BYTES + (5 + 3 + 2) * 64)];
    for (int t0 = 0; t0 < a->n_tok; t0 += chunk) {
        const int t1 = a->n_tok - t0 > chunk ? t0 + chunk : a->n_tok;
        for (int64_t r = a->r0; r < a->r1; r += PF_R) {
            const int nr = a->r1 - r < PF_R ? (int)(a->r1 - r) : PF_R;
            for (int64_t g0 = 0;; g0 += PF_SEG) {
                pf_seg sg = {wbuf, xoff0 + (size_t)g0 * MCP_LLM_Q8_GROUP_BYTES(16),
                             (int)(nfull - g0 < PF_SEG ? nfull - g0 : PF_SEG), 0};
                const bool last = g0 + sg.nf >= nfull;
                if (last) sg.tails = tails;
                pf_repack(a, r, nr, g0, &sg, wbuf);
                int t = t0;
                for (; t + 3 <= t1; t += 3) pf_tile_3(a, &sg, coff, r, nr, t, g0 > 0);
                if (t1 - t == 2) pf_tile_2(a, &sg, coff, r, nr, t, g0 > 0);
                else if (t1 - t == 1) pf_tile_1(a, &sg, coff, r, nr, t, g0 > 0);
                if (last) break;
            }
        }
    }
}

static bool gemm_has(uint32_t wtype, mcp_llm_act act)
{
    return mcp_llm_gemm_direct(wtype, act);
}

static void gemm(const mcp_llm_gemm_args *a)
{
    if (a->r1 <= a->r0 || a->n_tok <= 0) return;
    if (a->act == MCP_LLM_ACT_Q8) {
        if (!__builtin_cpu_supports("avx512vnni")) {
            mcp_llm_kernels_avx2.gemm(a);
            return;
        }
        /* Every token count must give the same bits (see the decode
         * section): one token streams weights, more repack them. */
        if (a->n_tok > 1) gemm_q_prefill(a);
        else gemm_q_decode(a);
        return;
    }
    switch (a->wtype) {
    case MCP_GGML_F32: run_tiles(a, &tiles_f_f32); return;
    case MCP_GGML_F16: run_tiles(a, &tiles_f_f16); return;
    case MCP_GGML_BF16: run_tiles(a, &tiles_f_bf16); return;
    case MCP_GGML_Q8_0: run_tiles(a, &tiles_f_q8_0); return;
    default: run_tiles(a, &tiles_f_q4_0); return;
    }
}

/* ---- Activation quantization: the reference's arithmetic, 16 lanes at a time ---- */

static K512 void act_quantize_q8(const float *x, int64_t k, mcp_llm_q8_block *out)
{
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127), bad = _mm512_set1_epi32(INT32_MIN);
    for (int64_t b = 0; b < k / MCP_LLM_QK; b++) {
        const float *v = x + b * MCP_LLM_QK;
        __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
        /* vmaxps returns its second operand when either is NaN: NaNs are
         * skipped, as fmaxf does. */
        __m512 m = _mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_setzero_ps());
        m = _mm512_max_ps(_mm512_and_ps(v1, absmask), m);
        float amax = _mm512_reduce_max_ps(m);
        float d = amax / 127.0f;
        float id = d > 0.0f ? 1.0f / d : 0.0f;
        __m512 s = _mm512_set1_ps(id);
        __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, s)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, s));
        /* An infinite or NaN product converts to INT32_MIN here; the
         * reference's (int)lrintf gives 0 for it. */
        q0 = _mm512_mask_mov_epi32(q0, _mm512_cmpeq_epi32_mask(q0, bad), _mm512_setzero_si512());
        q1 = _mm512_mask_mov_epi32(q1, _mm512_cmpeq_epi32_mask(q1, bad), _mm512_setzero_si512());
        q0 = _mm512_max_epi32(_mm512_min_epi32(q0, lim), nlim);
        q1 = _mm512_max_epi32(_mm512_min_epi32(q1, lim), nlim);
        _mm_storeu_si128((__m128i *)out[b].qs, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(out[b].qs + 16), _mm512_cvtepi32_epi8(q1));
        out[b].d = d;
        out[b].sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    }
    /* The grouped form: groups of 16 by the transpose the weights take,
     * whose every lane is a whole block (its sum is the block's); the tail
     * groups byte by byte. */
    const int64_t nb = k / MCP_LLM_QK;
    const size_t go = mcp_llm_q8_grouped_offset(k);
    uint8_t *row = (uint8_t *)out, *p = row + go;
    memset(row + (size_t)nb * sizeof *out, 0, go - (size_t)nb * sizeof *out);
    int64_t b = 0;
    for (; b + 16 <= nb; b += 16, p += MCP_LLM_Q8_GROUP_BYTES(16)) {
        __m512i xv[8], v[8];
        for (int j = 0; j < 8; j++) xv[j] = load2x256(out[b + 2 * j].qs, out[b + 2 * j + 1].qs);
        transpose_group(xv, v);
        for (int d = 0; d < 8; d++) _mm512_storeu_si512(p + 64 * d, v[d]);
        float *dd = (float *)(void *)(p + 512);
        int32_t *c8 = (int32_t *)(void *)(p + 576), *c128 = c8 + 16;
        for (int l = 0; l < 16; l++) {
            dd[l] = out[b + l].d;
            c8[l] = -8 * out[b + l].sum;
            c128[l] = -128 * out[b + l].sum;
        }
    }
    const int64_t rest = (nb - b + 1) & ~(int64_t)1;
    for (int g = 8; g >= 2; g /= 2)
        if (rest & g) {
            mcp_llm_q8_group_ref(out, nb, b, g, p);
            b += g;
            p += MCP_LLM_Q8_GROUP_BYTES(g);
        }
}

/* ---- f32 to f16 (the KV cache) ---- */

static K512 void f32_to_f16_row(const float *x, uint16_t *out, int64_t n)
{
    const __m256i sign = _mm256_set1_epi16((short)0x8000), qnan = _mm256_set1_epi16(0x7e00);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        /* Rounding, overflow and subnormals agree with the reference; a NaN
         * keeps payload bits here, where the reference gives the quiet NaN. */
        __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        h = _mm256_mask_blend_epi16(nan, h, _mm256_or_si256(_mm256_and_si256(h, sign), qnan));
        _mm256_mask_storeu_epi16(out + i, k, h);
    }
}

/* ---- Per-token operations ---- */

/* e^x to about 1e-7 relative (Cephes' expf polynomial), 0 below -150,
 * infinity above 88.73, NaN for NaN. */
K512_INLINE __m512 exp512(__m512 x)
{
    /* vminps/vmaxps return the second operand for a NaN: x goes second. */
    x = _mm512_max_ps(_mm512_set1_ps(-150.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __mmask16 tail_mask(int64_t n)
{
    return (__mmask16)((1u << n) - 1u);
}

static K512 void rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out)
{
    /* Squares summed in double like the reference (a float's square is exact
     * in double), only in another order. */
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v)), hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
        s0 = _mm512_fmadd_pd(lo, lo, s0);
        s1 = _mm512_fmadd_pd(hi, hi, s1);
    }
    double ss = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    __m512 sc = _mm512_set1_ps(scale);
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), sc), _mm512_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = x[i] * scale * w[i];
}

static K512 void softmax(float *x, int64_t n)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m = ninf;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
    if (i < n) m = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i), m);
    __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(m));
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : tail_mask(n - i);
        __m512 e = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm)));
        _mm512_mask_storeu_ps(x + i, k, e);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    __m512 inv = _mm512_set1_ps((float)(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(s0, s1))));
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
    }
}

static K512 void swiglu(const float *gate, const float *up, int64_t n, float *out)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : tail_mask(n - i);
        __m512 g = _mm512_maskz_loadu_ps(k, gate + i);
        __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 v = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(k, up + i));
        _mm512_mask_storeu_ps(out + i, k, v);
    }
}

/* ---- Attention ---- */

/* Elements [i, i + 16) of a cached key or value row, masked. */
K512_INLINE __m512 kv_load16(const uint8_t *row, int64_t i, __mmask16 k, bool f16)
{
    if (f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, row + 2 * i));
    return _mm512_maskz_loadu_ps(k, row + 4 * i);
}

K512_INLINE float dot_q(const float *q, const uint8_t *key, int64_t hd, bool f16)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= hd; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), kv_load16(key, i, 0xFFFF, f16), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 16), kv_load16(key, i + 16, 0xFFFF, f16), a1);
    }
    for (; i < hd; i += 16) {
        __mmask16 k = hd - i >= 16 ? (__mmask16)0xFFFF : tail_mask(hd - i);
        a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, q + i), kv_load16(key, i, k, f16), a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* out[c, c + 16 * NV) (the last vector masked by `last`) = sum over positions
 * of weight times value, accumulated in registers. */
K512_INLINE void attend_chunk(const mcp_llm_kv_view *kv, int64_t n_pos, const float *wgt, int64_t c, const int NV,
                              __mmask16 last, float *out)
{
    __m512 acc[8];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) acc[v] = _mm512_setzero_ps();
    int64_t p = 0;
    for (int64_t j = 0; p < n_pos; j++) {
        const uint8_t *base = kv->blocks[j] + kv->offset + kv->v_offset;
        int64_t n = n_pos - p < kv->block_tokens ? n_pos - p : kv->block_tokens;
        for (int64_t i = 0; i < n; i++, p++) {
            const uint8_t *val = base + (size_t)i * kv->token_stride;
            __m512 wv = _mm512_set1_ps(wgt[p]);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++)
                acc[v] = _mm512_fmadd_ps(wv, kv_load16(val, c + 16 * v, v == NV - 1 ? last : 0xFFFF, kv->f16), acc[v]);
        }
    }
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(out + c + 16 * v, v == NV - 1 ? last : 0xFFFF, acc[v]);
}

static K512 void attend(const float *q, const mcp_llm_kv_view *kv, int64_t head_dim, int64_t n_pos, float scale,
                        float *scratch, float *out)
{
    int64_t p = 0;
    for (int64_t j = 0; p < n_pos; j++) {
        const uint8_t *base = kv->blocks[j] + kv->offset;
        int64_t n = n_pos - p < kv->block_tokens ? n_pos - p : kv->block_tokens;
        for (int64_t i = 0; i < n; i++, p++)
            scratch[p] = dot_q(q, base + (size_t)i * kv->token_stride, head_dim, kv->f16) * scale;
    }
    softmax(scratch, n_pos);
    /* Values in chunks of up to 128 floats (8 registers), each chunk one
     * pass over the positions. */
    for (int64_t c = 0; c < head_dim; c += 128) {
        int64_t m = head_dim - c < 128 ? head_dim - c : 128;
        int nv = (int)((m + 15) / 16);
        __mmask16 last = m % 16 ? tail_mask(m % 16) : (__mmask16)0xFFFF;
        switch (nv) {
        case 1: attend_chunk(kv, n_pos, scratch, c, 1, last, out); break;
        case 2: attend_chunk(kv, n_pos, scratch, c, 2, last, out); break;
        case 3: attend_chunk(kv, n_pos, scratch, c, 3, last, out); break;
        case 4: attend_chunk(kv, n_pos, scratch, c, 4, last, out); break;
        case 5: attend_chunk(kv, n_pos, scratch, c, 5, last, out); break;
        case 6: attend_chunk(kv, n_pos, scratch, c, 6, last, out); break;
        case 7: attend_chunk(kv, n_pos, scratch, c, 7, last, out); break;
        default: attend_chunk(kv, n_pos, scratch, c, 8, last, out); break;
        }
    }
}

const mcp_llm_kernels mcp_llm_kernels_avx512 = {
    .gemm_has = gemm_has,
    .gemm = gemm,
    .act_quantize_q8 = act_quantize_q8,
    .attend = attend,
    .rmsnorm = rmsnorm,
    .swiglu = swiglu,
    .softmax = softmax,
    .f32_to_f16_row = f32_to_f16_row,
};
