/* The AVX2 fast paths (see kernels.h), for CPUs with AVX2, FMA and F16C.
 * This file is compiled without -mavx2 so the binary runs on any x86-64:
 * every function carries a target attribute, and the dispatcher (kernels.c)
 * reaches them only on a CPU that has the instructions. The AVX-512 table
 * also calls this gemm for Q8 activations on CPUs without VNNI.
 *
 * Weight products work on tiles of rows x tokens held in registers: each
 * weight vector loaded (and converted) once serves every token of the tile,
 * each activation vector every row of it. With 16 registers, prefill tiles
 * are TILE_RPF (float activations) or TILE_RPQ (Q8) rows x TILE_T tokens;
 * decode (one token) has nothing to keep across tokens and streams TILE_RD
 * rows at a time. Prefill visits tokens in chunks whose activations fit in
 * L2, so the row tiles re-read them there.
 *
 * Integer products use vpmaddubsw, which multiplies unsigned by signed bytes:
 * Q8_0 with the sign trick (|w| times a with w's sign), Q4_0 with its
 * nibbles as they are less 8 x a (see q_unpack); each pair of products is
 * exact in int16 (at most 2 * 128 * 127) as long as activations stay in
 * [-127, 127], which act_quantize_q8 guarantees. */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "llm/gguf.h"
#include "llm/kernels.h"

#define ISA_AVX2 "avx2,fma,f16c"
#define KAVX2 __attribute__((target(ISA_AVX2)))
#define KAVX2_INLINE static inline __attribute__((always_inline, target(ISA_AVX2)))

enum {
    TILE_RPF = 3, /* rows per prefill tile, float activations */
    TILE_RPQ = 2, /* rows per prefill tile, Q8 activations */
    TILE_RD = 4,  /* rows per decode tile */
    TILE_R = 4,   /* the largest of them, for array sizes */
    TILE_T = 4,   /* tokens per prefill tile */
};
/* Activation bytes of a token chunk kept in L2 while its row tiles run. */
#define CHUNK_ACT_BYTES (256u * 1024u)

KAVX2_INLINE __m256 bcast_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

/* Every f16 as a float, for the weights' block scales of the integer
 * products: a scalar load and a broadcast from here keep vcvtph2ps (two
 * vector uops) off the vector pipes, which bound those products. Built once,
 * exactly (F16C), before the first Q8 product. */
static float f16_table[65536];
static pthread_once_t f16_table_once = PTHREAD_ONCE_INIT;

static KAVX2 void f16_table_build(void)
{
    for (uint32_t h = 0; h < 65536; h += 8) {
        __m128i v = _mm_add_epi16(_mm_set1_epi16((short)h), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_storeu_ps(f16_table + h, _mm256_cvtph_ps(v));
    }
}

KAVX2_INLINE __m256 bcast_f16_table(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm256_broadcast_ss(f16_table + h);
}

KAVX2_INLINE float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- Tiles and the loop over them, shared by both activation forms ---- */

typedef void (*tile_fn)(const mcp_llm_gemm_args *a, int64_t r, int t);
/* Prefill tiles of one row and of nr rows for 1..TILE_T tokens, and the
 * decode tile of TILE_RD rows by one token. */
typedef struct tile_set {
    tile_fn one[TILE_T];
    tile_fn rows[TILE_T];
    tile_fn decode;
    int nr;
} tile_set;

static void run_tiles(const mcp_llm_gemm_args *a, const tile_set *ts)
{
    if (a->n_tok == 1) {
        int64_t r = a->r0;
        for (; r + TILE_RD <= a->r1; r += TILE_RD) ts->decode(a, r, 0);
        for (; r < a->r1; r++) ts->one[0](a, r, 0);
        return;
    }
    size_t xb = mcp_llm_act_row_bytes(a->act, a->k);
    int chunk = (int)(CHUNK_ACT_BYTES / (xb ? xb : 1)) / TILE_T * TILE_T;
    if (chunk < TILE_T) chunk = TILE_T;
    for (int t0 = 0; t0 < a->n_tok; t0 += chunk) {
        int t1 = a->n_tok - t0 > chunk ? t0 + chunk : a->n_tok;
        int64_t r = a->r0;
        for (; r + ts->nr <= a->r1; r += ts->nr)
            for (int t = t0; t < t1; t += TILE_T) ts->rows[(t1 - t < TILE_T ? t1 - t : TILE_T) - 1](a, r, t);
        for (; r < a->r1; r++)
            for (int t = t0; t < t1; t += TILE_T) ts->one[(t1 - t < TILE_T ? t1 - t : TILE_T) - 1](a, r, t);
    }
}

/* Instantiates tile_<kind>(a, wtype, r, t, R, T) for one weight type at
 * every tile shape, and the tile_set that lists them. */
#define TILE_DEF(kind, ty, wt, R, T)                                                          \
    static KAVX2 void tile_##kind##_##ty##_##R##_##T(const mcp_llm_gemm_args *a, int64_t r, int t) \
    {                                                                                         \
        tile_##kind(a, wt, r, t, R, T);                                                       \
    }
#define TILE_SET(kind, ty, wt, RP)                                                            \
    TILE_DEF(kind, ty, wt, 1, 1)                                                              \
    TILE_DEF(kind, ty, wt, 1, 2)                                                              \
    TILE_DEF(kind, ty, wt, 1, 3)                                                              \
    TILE_DEF(kind, ty, wt, 1, 4)                                                              \
    TILE_DEF(kind, ty, wt, RP, 1)                                                             \
    TILE_DEF(kind, ty, wt, RP, 2)                                                             \
    TILE_DEF(kind, ty, wt, RP, 3)                                                             \
    TILE_DEF(kind, ty, wt, RP, 4)                                                             \
    TILE_DEF(kind, ty, wt, 4, 1)                                                              \
    static const tile_set tiles_##kind##_##ty = {                                             \
        {tile_##kind##_##ty##_1_1, tile_##kind##_##ty##_1_2, tile_##kind##_##ty##_1_3, tile_##kind##_##ty##_1_4}, \
        {tile_##kind##_##ty##_##RP##_1, tile_##kind##_##ty##_##RP##_2, tile_##kind##_##ty##_##RP##_3,   \
         tile_##kind##_##ty##_##RP##_4},                                                      \
        tile_##kind##_##ty##_4_1,                                                             \
        RP,                                                                                   \
    };
_Static_assert(TILE_RD == 4 && TILE_T == 4, "TILE_SET lists these shapes");
_Static_assert(TILE_RPF == 3 && TILE_RPQ == 2 && TILE_R >= TILE_RPF, "the TILE_SET lines below give these");

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

/* Elements [e, e + 16) of a weight row (e a multiple of 16) as two vectors
 * of floats. Exact for every type: f16 and bf16 widen exactly, and a
 * Q8_0/Q4_0 value times its f16 scale needs at most 19 significant bits. */
KAVX2_INLINE void load_w16(uint32_t wtype, const uint8_t *row, int64_t e, __m256 *w0, __m256 *w1)
{
    switch (wtype) {
    case MCP_GGML_F32:
        *w0 = _mm256_loadu_ps((const float *)(row + 4 * e));
        *w1 = _mm256_loadu_ps((const float *)(row + 4 * e + 32));
        return;
    case MCP_GGML_F16:
        *w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * e)));
        *w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * e + 16)));
        return;
    case MCP_GGML_BF16:
        *w0 = _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * e))), 16));
        *w1 = _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * e + 16))), 16));
        return;
    case MCP_GGML_Q8_0: {
        const uint8_t *blk = row + (e / 32) * 34, *q = blk + 2 + (e & 16);
        __m256 d = bcast_f16(blk);
        *w0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q))), d);
        *w1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8)))), d);
        return;
    }
    default: { /* Q4_0: elements 0-15 of a block are the low nibbles, 16-31 the high ones. */
        const uint8_t *blk = row + (e / 32) * 18;
        __m256 d = bcast_f16(blk);
        __m256i q0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2)));
        __m256i q1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 10)));
        if (e & 16) {
            q0 = _mm256_srli_epi32(q0, 4);
            q1 = _mm256_srli_epi32(q1, 4);
        } else {
            q0 = _mm256_and_si256(q0, _mm256_set1_epi32(0x0F));
            q1 = _mm256_and_si256(q1, _mm256_set1_epi32(0x0F));
        }
        const __m256i eight = _mm256_set1_epi32(8);
        *w0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q0, eight)), d);
        *w1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q1, eight)), d);
        return;
    }
    }
}

/* Elements [e + 8h, e + 8h + 8) of a float row (e a multiple of 16). */
KAVX2_INLINE __m256 load_w8(uint32_t wtype, const uint8_t *row, int64_t e, int h)
{
    const int64_t o = e + 8 * h;
    switch (wtype) {
    case MCP_GGML_F32: return _mm256_loadu_ps((const float *)(row + 4 * o));
    case MCP_GGML_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * o)));
    default:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * o))), 16));
    }
}

/* acc[i][j] += dot(w[i][we..we+16), x[j][xe..xe+16)) for R rows, T tokens:
 * each pair's two FMAs in order (first eight elements, then the next), but
 * every pair's first before any pair's second, so that all the tile's
 * pairs are in flight at once. Each token's vector is loaded once into a
 * register (the asm keeps the compiler from folding it into every FMA,
 * which doubles the loads), so a tile of 3 x 4 holds 12 sums, 3 weight
 * vectors and one token vector: the 16 registers. */
KAVX2_INLINE void step_f(uint32_t wtype, const uint8_t *const *w, int64_t we, const float *const *x, int64_t xe,
                         __m256 acc[TILE_R][TILE_T], const int R, const int T)
{
    const bool plain = wtype == MCP_GGML_F32 || wtype == MCP_GGML_F16 || wtype == MCP_GGML_BF16;
    __m256 wv[2][TILE_R];
    if (!plain)
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) load_w16(wtype, w[i], we, &wv[0][i], &wv[1][i]);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        if (plain)
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) wv[h][i] = load_w8(wtype, w[i], we, h);
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) {
            __m256 xv = _mm256_loadu_ps(x[j] + xe + 8 * h);
            __asm__("" : "+x"(xv));
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) acc[i][j] = _mm256_fmadd_ps(wv[h][i], xv, acc[i][j]);
        }
    }
}

KAVX2_INLINE void tile_f(const mcp_llm_gemm_args *a, uint32_t wtype, int64_t r, int t, const int R, const int T)
{
    const uint8_t *w[TILE_R];
    const float *x[TILE_T];
    __m256 acc[TILE_R][TILE_T];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) w[i] = a->w + (size_t)(r + i) * a->row_bytes;
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
        x[j] = (const float *)(a->x + (size_t)(t + j) * a->x_stride);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) acc[i][j] = _mm256_setzero_ps();
    }
    const int64_t k16 = a->k & ~(int64_t)15;
    int64_t e = 0;
    /* Each step prefetches the same bytes of the next row tile (the rows of
     * a tile advance in step, more streams than the hardware prefetcher
     * follows well, and each tile restarts them). */
    const size_t step_bytes = wrow_bytes(wtype, 32), next = (size_t)R * a->row_bytes;
    for (; e < k16; e += 16) {
        if (!(e & 16))
#pragma GCC unroll 4
            for (int i = 0; i < R; i++)
                for (size_t o = 0; o < step_bytes; o += 64)
                    _mm_prefetch((const char *)w[i] + next + (size_t)e / 32 * step_bytes + o, _MM_HINT_T0);
        step_f(wtype, w, e, x, e, acc, R, T);
    }
    /* A float row's last k % 16 elements go through zero-padded copies
     * (quantized rows are whole blocks; the reference ignores a partial one). */
    if (e < a->k && (wtype == MCP_GGML_F32 || wtype == MCP_GGML_F16 || wtype == MCP_GGML_BF16)) {
        size_t es = wtype == MCP_GGML_F32 ? 4 : 2, n = (size_t)(a->k - e);
        uint8_t wb[TILE_R][16 * 4];
        float xb[TILE_T][16];
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
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) a->y[(int64_t)(t + j) * a->y_stride + r + i] = hsum(acc[i][j]);
}

TILE_SET(f, f32, MCP_GGML_F32, 3)
TILE_SET(f, f16, MCP_GGML_F16, 3)
TILE_SET(f, bf16, MCP_GGML_BF16, 3)
TILE_SET(f, q8_0, MCP_GGML_Q8_0, 3)
TILE_SET(f, q4_0, MCP_GGML_Q4_0, 3)

/* ---- Q8 activations: integer products, one block per step ---- */

/* A block of weights as vpmaddubsw's unsigned operand u (and sg, what the
 * token's bytes take the sign of), and its products with a token's block
 * as int16 pairs, exact: Q8_0 by the sign trick; Q4_0 with its nibbles as
 * they are, 0..15, less the token's pairs of 8 x a (c8, once per token for
 * every row): u0 a0 + u1 a1 - 8 a0 - 8 a1 is the pair of (u - 8) a, so the
 * int32 sums are those of the signed values lane for lane. */
KAVX2_INLINE void q_unpack(uint32_t wtype, const uint8_t *blk, __m256i *u, __m256i *sg)
{
    if (wtype == MCP_GGML_Q8_0) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 2));
        *u = _mm256_sign_epi8(v, v);
        *sg = v;
        return;
    }
    __m128i n = _mm_loadu_si128((const __m128i *)(blk + 2));
    *u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(n, 4), n), _mm256_set1_epi8(0x0F));
    *sg = *u;
}

KAVX2_INLINE __m256i q_c8(uint32_t wtype, __m256i av)
{
    return wtype == MCP_GGML_Q8_0 ? _mm256_setzero_si256() : _mm256_maddubs_epi16(_mm256_set1_epi8(8), av);
}

/* acc + the block's product with the token's: int32 sums times the product
 * of the two scales, the one float step of every Q8 path of this file. */
KAVX2_INLINE __m256 q_acc(uint32_t wtype, __m256i u, __m256i sg, __m256 dw, __m256i av, __m256i c8, __m256 xd,
                          __m256 acc)
{
    __m256i pairs = wtype == MCP_GGML_Q8_0 ? _mm256_maddubs_epi16(u, _mm256_sign_epi8(av, sg))
                                           : _mm256_sub_epi16(_mm256_maddubs_epi16(u, av), c8);
    __m256i p = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, xd), acc);
}

KAVX2_INLINE void step_q(uint32_t wtype, const uint8_t *const *w, const mcp_llm_q8_block *const *x,
                         __m256 acc[TILE_R][TILE_T], const int R, const int T)
{
    __m256i u[TILE_R], sg[TILE_R];
    __m256 dw[TILE_R];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
        q_unpack(wtype, w[i], &u[i], &sg[i]);
        dw[i] = bcast_f16_table(w[i]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
        __m256i av = _mm256_loadu_si256((const __m256i *)x[j]->qs);
        __m256i c8 = q_c8(wtype, av);
        __m256 xd = _mm256_set1_ps(x[j]->d);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) acc[i][j] = q_acc(wtype, u[i], sg[i], dw[i], av, c8, xd, acc[i][j]);
    }
}

KAVX2_INLINE void tile_q(const mcp_llm_gemm_args *a, uint32_t wtype, int64_t r, int t, const int R, const int T)
{
    const size_t bs = wtype == MCP_GGML_Q8_0 ? 34 : 18;
    const int64_t nb = a->k / 32;
    const uint8_t *w[TILE_R];
    const mcp_llm_q8_block *x[TILE_T];
    __m256 acc[TILE_R][TILE_T];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) w[i] = a->w + (size_t)(r + i) * a->row_bytes;
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
        x[j] = (const mcp_llm_q8_block *)(a->x + (size_t)(t + j) * a->x_stride);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) acc[i][j] = _mm256_setzero_ps();
    }
    const size_t next = (size_t)R * a->row_bytes; /* prefetch as in tile_f */
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wp[TILE_R];
        const mcp_llm_q8_block *xp[TILE_T];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            wp[i] = w[i] + (size_t)b * bs;
            /* Q4_0: every other block is enough to touch each line. */
            if (wtype == MCP_GGML_Q8_0 || !(b & 1)) _mm_prefetch((const char *)wp[i] + next, _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int j = 0; j < T; j++) xp[j] = x[j] + b;
        step_q(wtype, wp, xp, acc, R, T);
    }
#pragma GCC unroll 4
    for (int j = 0; j < T; j++)
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) a->y[(int64_t)(t + j) * a->y_stride + r + i] = hsum(acc[i][j]);
}

TILE_SET(q, q8_0, MCP_GGML_Q8_0, 2)
TILE_SET(q, q4_0, MCP_GGML_Q4_0, 2)

static bool gemm_has(uint32_t wtype, mcp_llm_act act)
{
    return mcp_llm_gemm_direct(wtype, act);
}

static void gemm(const mcp_llm_gemm_args *a)
{
    if (a->r1 <= a->r0 || a->n_tok <= 0) return;
    if (a->act == MCP_LLM_ACT_Q8) {
        pthread_once(&f16_table_once, f16_table_build);
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

/* ---- Activation quantization: the reference's arithmetic, 8 lanes at a time ---- */

static KAVX2 void act_quantize_q8(const float *x, int64_t k, mcp_llm_q8_block *out)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127), bad = _mm256_set1_epi32(INT32_MIN);
    for (int64_t b = 0; b < k / MCP_LLM_QK; b++) {
        const float *v = x + b * MCP_LLM_QK;
        __m256 vv[4];
        /* vmaxps returns its second operand when either is NaN: NaNs are
         * skipped, as fmaxf does. */
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            vv[i] = _mm256_loadu_ps(v + 8 * i);
            m = _mm256_max_ps(_mm256_and_ps(vv[i], absmask), m);
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        float amax = _mm_cvtss_f32(h);
        float d = amax / 127.0f;
        float id = d > 0.0f ? 1.0f / d : 0.0f;
        __m256 s = _mm256_set1_ps(id);
        __m256i q[4], sum = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(vv[i], s));
            /* An infinite or NaN product converts to INT32_MIN here; the
             * reference's (int)lrintf gives 0 for it. */
            q[i] = _mm256_andnot_si256(_mm256_cmpeq_epi32(q[i], bad), q[i]);
            q[i] = _mm256_max_epi32(_mm256_min_epi32(q[i], lim), nlim);
            sum = _mm256_add_epi32(sum, q[i]);
        }
        /* The packs work within 128-bit lanes; the permute puts the four
         * groups of eight back in order. */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)out[b].qs, p);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        out[b].d = d;
        out[b].sum = _mm_cvtsi128_si32(s4);
    }
    /* The grouped form serves only the AVX-512 VNNI products; a portable
     * copy of bytes is enough here. */
    mcp_llm_q8_group_row_ref(out, k);
}

/* ---- f32 to f16 (the KV cache) ---- */

KAVX2_INLINE __m128i f16x8(__m256 v)
{
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* Rounding, overflow and subnormals agree with the reference; a NaN
     * keeps payload bits here, where the reference gives the quiet NaN. */
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    __m128i n16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
    __m128i q = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7e00));
    return _mm_blendv_epi8(h, q, n16);
}

static KAVX2 void f32_to_f16_row(const float *x, uint16_t *out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(out + i), f16x8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float b[8] = {0};
        uint16_t h[8];
        memcpy(b, x + i, (size_t)(n - i) * sizeof *x);
        _mm_storeu_si128((__m128i *)h, f16x8(_mm256_loadu_ps(b)));
        memcpy(out + i, h, (size_t)(n - i) * sizeof *out);
    }
}

/* ---- Per-token operations ---- */

/* e^x to about 1e-7 relative (Cephes' expf polynomial), infinity above
 * 88.73, subnormal results down to -103.9 and 0 below, NaN for NaN. The
 * power of two is applied in two halves so that neither overflows. */
KAVX2_INLINE __m256 exp256(__m256 x)
{
    /* vminps/vmaxps return the second operand for a NaN: x goes second. */
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

static KAVX2 void rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out)
{
    /* Squares summed in double like the reference (a float's square is exact
     * in double), only in another order. */
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        s0 = _mm256_fmadd_pd(lo, lo, s0);
        s1 = _mm256_fmadd_pd(hi, hi, s1);
    }
    __m256d s = _mm256_add_pd(s0, s1);
    __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    double ss = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    __m256 sc = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sc), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = x[i] * scale * w[i];
}

/* Up to 8 floats from p, zero-padded. */
KAVX2_INLINE __m256 load_part(const float *p, int64_t n)
{
    float b[8] = {0};
    memcpy(b, p, (size_t)n * sizeof *p);
    return _mm256_loadu_ps(b);
}

KAVX2_INLINE void store_part(float *p, __m256 v, int64_t n)
{
    float b[8];
    _mm256_storeu_ps(b, v);
    memcpy(p, b, (size_t)n * sizeof *p);
}

static KAVX2 void softmax(float *x, int64_t n)
{
    __m256 m = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float mx = _mm_cvtss_f32(h);
    for (; i < n; i++) mx = fmaxf(mx, x[i]);
    __m256 vm = _mm256_set1_ps(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    __m256d s = _mm256_add_pd(s0, s1);
    __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    if (i < n) {
        __m256 e = exp256(_mm256_sub_ps(load_part(x + i, n - i), vm));
        store_part(x + i, e, n - i);
        for (int64_t j = i; j < n; j++) sum += x[j];
    }
    __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    float fi = _mm_cvtss_f32(_mm256_castps256_ps128(inv));
    for (; i < n; i++) x[i] *= fi;
}

KAVX2_INLINE __m256 swiglu8(__m256 g, __m256 u)
{
    __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

static KAVX2 void swiglu(const float *gate, const float *up, int64_t n, float *out)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, swiglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) store_part(out + i, swiglu8(load_part(gate + i, n - i), load_part(up + i, n - i)), n - i);
}

/* ---- Attention ---- */

/* Elements [i, i + 8) of a cached key or value row. */
KAVX2_INLINE __m256 kv_load8(const uint8_t *row, int64_t i, bool f16)
{
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * i)));
    return _mm256_loadu_ps((const float *)(row + 4 * i));
}

KAVX2_INLINE float kv_load1(const uint8_t *row, int64_t i, bool f16)
{
    if (f16) {
        uint16_t h;
        memcpy(&h, row + 2 * i, 2);
        return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
    }
    float v;
    memcpy(&v, row + 4 * i, 4);
    return v;
}

KAVX2_INLINE float dot_q(const float *q, const uint8_t *key, int64_t hd, bool f16)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= hd; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv_load8(key, i, f16), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), kv_load8(key, i + 8, f16), a1);
    }
    if (i + 8 <= hd) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv_load8(key, i, f16), a0);
        i += 8;
    }
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; i < hd; i++) s += q[i] * kv_load1(key, i, f16);
    return s;
}

/* out[c, c + 8 * NV) = sum over positions of weight times value, in registers. */
KAVX2_INLINE void attend_chunk(const mcp_llm_kv_view *kv, int64_t n_pos, const float *wgt, int64_t c, const int NV,
                               float *out)
{
    __m256 acc[8];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) acc[v] = _mm256_setzero_ps();
    int64_t p = 0;
    for (int64_t j = 0; p < n_pos; j++) {
        const uint8_t *base = kv->blocks[j] + kv->offset + kv->v_offset;
        int64_t n = n_pos - p < kv->block_tokens ? n_pos - p : kv->block_tokens;
        for (int64_t i = 0; i < n; i++, p++) {
            const uint8_t *val = base + (size_t)i * kv->token_stride;
            __m256 wv = _mm256_set1_ps(wgt[p]);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[v] = _mm256_fmadd_ps(wv, kv_load8(val, c + 8 * v, kv->f16), acc[v]);
        }
    }
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) _mm256_storeu_ps(out + c + 8 * v, acc[v]);
}

static KAVX2 void attend(const float *q, const mcp_llm_kv_view *kv, int64_t head_dim, int64_t n_pos, float scale,
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
    /* Values in chunks of up to 64 floats (8 registers), each chunk one pass
     * over the positions; the last head_dim % 8 elements one by one. */
    const int64_t hd8 = head_dim & ~(int64_t)7;
    for (int64_t c = 0; c < hd8; c += 64) {
        switch ((hd8 - c < 64 ? hd8 - c : 64) / 8) {
        case 1: attend_chunk(kv, n_pos, scratch, c, 1, out); break;
        case 2: attend_chunk(kv, n_pos, scratch, c, 2, out); break;
        case 3: attend_chunk(kv, n_pos, scratch, c, 3, out); break;
        case 4: attend_chunk(kv, n_pos, scratch, c, 4, out); break;
        case 5: attend_chunk(kv, n_pos, scratch, c, 5, out); break;
        case 6: attend_chunk(kv, n_pos, scratch, c, 6, out); break;
        case 7: attend_chunk(kv, n_pos, scratch, c, 7, out); break;
        default: attend_chunk(kv, n_pos, scratch, c, 8, out); break;
        }
    }
    for (int64_t i = hd8; i < head_dim; i++) {
        float s = 0.0f;
        p = 0;
        for (int64_t j = 0; p < n_pos; j++) {
            const uint8_t *base = kv->blocks[j] + kv->offset + kv->v_offset;
            int64_t n = n_pos - p < kv->block_tokens ? n_pos - p : kv->block_tokens;
            for (int64_t t = 0; t < n; t++, p++) s += scratch[p] * kv_load1(base + (size_t)t * kv->token_stride, i, kv->f16);
        }
        out[i] = s;
    }
}

const mcp_llm_kernels mcp_llm_kernels_avx2 = {
    .gemm_has = gemm_has,
    .gemm = gemm,
    .act_quantize_q8 = act_quantize_q8,
    .attend = attend,
    .rmsnorm = rmsnorm,
    .swiglu = swiglu,
    .softmax = softmax,
    .f32_to_f16_row = f32_to_f16_row,
};
