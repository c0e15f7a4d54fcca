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
 * each activation vector every row. Decode (one token) streams rows in tiles
 * of TILE_RD, prefetching the next tile as it goes (the rows of a tile
 * advance in step, more streams than the hardware prefetcher follows well,
 * and each tile restarts them: 4096 x 4096 Q4_0 decode from DRAM went from
 * 7.7 to 10 GB/s with it). Prefill visits tokens in chunks whose activations
 * fit in L2, so that the row tiles re-read them from there.
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
    const size_t step_bytes = wrow_bytes(wtype, 32), next = (size_t)R * a->row_bytes;
    for (; e < k32; e += 32) {
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

K512_INLINE int32_t load_i32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Four f16 scales `stride` bytes apart, each repeated over its block's four
 * lanes. Dword broadcasts from memory cost no shuffle; gathering the four
 * halves with vpinsrw took seven more shuffle-port uops per row and step,
 * and decode is bound by those ports. */
K512_INLINE __m512 quad_scales(const uint8_t *p, size_t stride)
{
    __m512i v = _mm512_set1_epi32(load_i32(p));
    v = _mm512_mask_set1_epi32(v, 0x00F0, load_i32(p + stride));
    v = _mm512_mask_set1_epi32(v, 0x0F00, load_i32(p + 2 * stride));
    v = _mm512_mask_set1_epi32(v, 0xF000, load_i32(p + 3 * stride));
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

KVNNI_INLINE void quad_w(uint32_t wtype, const uint8_t *p, __m512i *wl, __m512i *wh, __m512 *dw)
{
    if (wtype == MCP_GGML_Q8_0) {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        split_quad(load2x256(p + 2, p + 36), load2x256(p + 70, p + 104), wl, wh);
        *wl = _mm512_xor_si512(*wl, flip);
        *wh = _mm512_xor_si512(*wh, flip);
        *dw = quad_scales(p, 34);
    } else {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(p + 2)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 20)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 38)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 56)), 3);
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        *wl = _mm512_and_si512(v, m4);
        *wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        *dw = quad_scales(p, 18);
    }
}

/* excess: the weights' offset (8 or 128) in every byte. */
KVNNI_INLINE void quad_a(const mcp_llm_q8_block *q, __m512i excess, __m512i *al, __m512i *ah, __m512i *corr,
                         __m512 *xd)
{
    split_quad(load2x256(q[0].qs, q[1].qs), load2x256(q[2].qs, q[3].qs), al, ah);
    __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), excess, *al), excess, *ah);
    *corr = _mm512_sub_epi32(_mm512_setzero_si512(), s);
    __m128 d = _mm_setr_ps(q[0].d, q[1].d, q[2].d, q[3].d);
    *xd = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                _mm512_castps128_ps512(d));
}

KVNNI_INLINE void step_q(uint32_t wtype, const uint8_t *const *w, const mcp_llm_q8_block *const *x,
                         __m512 acc[TILE_R][TILE_T], const int R, const int T)
{
    const __m512i excess = _mm512_set1_epi8(wtype == MCP_GGML_Q8_0 ? (char)0x80 : 8);
    __m512i wl[TILE_R], wh[TILE_R];
    __m512 dw[TILE_R];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) quad_w(wtype, w[i], &wl[i], &wh[i], &dw[i]);
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
        __m512i al, ah, corr;
        __m512 xd;
        quad_a(x[j], excess, &al, &ah, &corr, &xd);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(corr, wl[i], al), wh[i], ah);
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[i], xd), acc[i][j]);
        }
    }
}

KVNNI_INLINE void tile_q(const mcp_llm_gemm_args *a, uint32_t wtype, int64_t r, int t, const int R, const int T)
{
    const size_t bs = wtype == MCP_GGML_Q8_0 ? 34 : 18;
    const int64_t nb = a->k / 32, nq = nb / QUAD * QUAD;
    const uint8_t *w[TILE_R];
    const mcp_llm_q8_block *x[TILE_T];
    __m512 acc[TILE_R][TILE_T];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) w[i] = a->w + (size_t)(r + i) * a->row_bytes;
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
        x[j] = (const mcp_llm_q8_block *)(a->x + (size_t)(t + j) * a->x_stride);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) acc[i][j] = _mm512_setzero_ps();
    }
    const size_t next = (size_t)R * a->row_bytes;
    for (int64_t b = 0; b < nq; b += QUAD) {
        const uint8_t *wp[TILE_R];
        const mcp_llm_q8_block *xp[TILE_T];
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            wp[i] = w[i] + (size_t)b * bs;
            for (size_t o = 0; o < QUAD * bs; o += 64) _mm_prefetch((const char *)wp[i] + next + o, _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) xp[j] = x[j] + b;
        step_q(wtype, wp, xp, acc, R, T);
    }
    /* The last nb % QUAD blocks go through copies padded with zero blocks,
     * whose scales are zero. */
    if (nq < nb) {
        size_t n = (size_t)(nb - nq);
        uint8_t wb[TILE_R][QUAD * 34];
        mcp_llm_q8_block xb[TILE_T][QUAD];
        const uint8_t *wp[TILE_R];
        const mcp_llm_q8_block *xp[TILE_T];
        memset(wb, 0, sizeof wb);
        memset(xb, 0, sizeof xb);
        for (int i = 0; i < R; i++) {
            memcpy(wb[i], w[i] + (size_t)nq * bs, n * bs);
            wp[i] = wb[i];
        }
        for (int j = 0; j < T; j++) {
            memcpy(xb[j], x[j] + nq, n * sizeof(mcp_llm_q8_block));
            xp[j] = xb[j];
        }
        step_q(wtype, wp, xp, acc, R, T);
    }
#pragma GCC unroll 4
    for (int j = 0; j < T; j++)
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) a->y[(int64_t)(t + j) * a->y_stride + r + i] = _mm512_reduce_add_ps(acc[i][j]);
}

TILE_SET(KVNNI, q, q8_0, MCP_GGML_Q8_0)
TILE_SET(KVNNI, q, q4_0, MCP_GGML_Q4_0)

static bool gemm_has(uint32_t wtype, mcp_llm_act act)
{
    return mcp_llm_gemm_supported(wtype, act);
}

static void gemm(const mcp_llm_gemm_args *a)
{
    if (a->r1 <= a->r0 || a->n_tok <= 0) return;
    if (a->act == MCP_LLM_ACT_Q8) {
        if (!__builtin_cpu_supports("avx512vnni")) {
            mcp_llm_kernels_avx2.gemm(a);
            return;
        }
        run_tiles(a, a->wtype == MCP_GGML_Q8_0 ? &tiles_q_q8_0 : &tiles_q_q4_0);
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
};
