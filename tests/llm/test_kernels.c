/* The LLM kernels: for every ISA this CPU has (ref, AVX2, AVX-512), each
 * kernel against the reference (kernels_ref.c) on the same random inputs.
 *
 * Tolerances: a weight product may differ from the reference by 1e-5 of the
 * sum of the absolute values of its terms (sum |w_i * a_i|, the activations
 * as the kernel sees them: f32, or d * qs for Q8), which bounds float
 * accumulation in any order; rows and tokens outside the requested range
 * must be left untouched. act_quantize_q8 must give the same bytes.
 * rmsnorm, softmax and swiglu are compared element by element (relative
 * 1e-6, 2e-6 and 2e-6: the fast exp is within about 1e-7), attention
 * relative to sum_p weight_p * |v_p| scaled by the size of the scores. */
#include <float.h>

#include "../unit/test_util.h"
#include "llm/gguf.h"
#include "llm/kernels.h"
#include "tensor/tensor.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* Uniform in [-1, 1). */
static float frand(void)
{
    return (float)((double)(tu_rand(&rng) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static uint32_t urand(uint32_t n)
{
    return (uint32_t)(tu_rand(&rng) >> 33) % n;
}

static void put_f16(uint8_t *p, float v)
{
    uint16_t h = mcp_f32_to_f16(v);
    memcpy(p, &h, 2);
}

static size_t wrow_bytes(uint32_t wtype, int64_t k)
{
    switch (wtype) {
    case MCP_GGML_F32: return (size_t)k * 4;
    case MCP_GGML_F16:
    case MCP_GGML_BF16: return (size_t)k * 2;
    case MCP_GGML_Q8_0: return (size_t)(k / 32) * 34;
    case MCP_GGML_Q4_K: return (size_t)(k / 256) * 144;
    case MCP_GGML_Q6_K: return (size_t)(k / 256) * 210;
    default: return (size_t)(k / 32) * 18;
    }
}

/* Magnitudes of a case: ordinary, huge, tiny. */
enum { MAG_NORMAL, MAG_HUGE, MAG_TINY, MAG_COUNT };

/* Random rows of a weight, with the special cases each format allows: a row
 * of zeros, zero elements, and for the quantized types blocks of zero
 * values, blocks with scale 0, blocks at the ends of the range (Q8_0 -128,
 * Q4_0 -8 and 7), and f16 scales down to subnormal ones. */
static void fill_weights(uint32_t wtype, uint8_t *w, int64_t rows, size_t row_bytes, int64_t k, int mag)
{
    memset(w, 0, (size_t)rows * row_bytes);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + (size_t)r * row_bytes;
        if (r == 5) continue; /* all zero */
        if (wtype == MCP_GGML_F32 || wtype == MCP_GGML_F16 || wtype == MCP_GGML_BF16) {
            float m = mag == MAG_NORMAL ? 1.0f : mag == MAG_HUGE ? (wtype == MCP_GGML_F16 ? 3e4f : 1e15f)
                                                                 : (wtype == MCP_GGML_F16 ? 1e-3f : 1e-15f);
            for (int64_t i = 0; i < k; i++) {
                float v = urand(13) == 0 ? 0.0f : frand() * m;
                if (wtype == MCP_GGML_F32) memcpy(row + 4 * i, &v, 4);
                else if (wtype == MCP_GGML_F16) put_f16(row + 2 * i, v);
                else {
                    uint16_t h = mcp_f32_to_bf16(v);
                    memcpy(row + 2 * i, &h, 2);
                }
            }
            continue;
        }
        float m = mag == MAG_NORMAL ? 0.05f : mag == MAG_HUGE ? 500.0f : 1e-6f;
        if (wtype == MCP_GGML_Q4_K || wtype == MCP_GGML_Q6_K) {
            /* Random bits, f16 scales set: every scale, min and value pattern. */
            const size_t bs = wtype == MCP_GGML_Q4_K ? 144 : 210;
            for (int64_t b = 0; b < k / 256; b++) {
                uint8_t *blk = row + (size_t)b * bs;
                for (size_t i = 0; i < bs; i++) blk[i] = (uint8_t)urand(256);
                if (wtype == MCP_GGML_Q4_K) {
                    put_f16(blk, (b + r) % 7 == 3 ? 0.0f : m / 64.0f);
                    put_f16(blk + 2, m / 128.0f);
                } else {
                    put_f16(blk + 208, (b + r) % 7 == 3 ? 0.0f : m / 512.0f);
                }
            }
            continue;
        }
        size_t bs = wtype == MCP_GGML_Q8_0 ? 34 : 18;
        for (int64_t b = 0; b < k / 32; b++) {
            uint8_t *blk = row + (size_t)b * bs;
            int kind = (int)((b + r) % 9);
            put_f16(blk, kind == 5 ? 0.0f : (0.1f + 0.9f * (frand() + 1.0f) / 2.0f) * m);
            for (size_t i = 2; i < bs; i++) {
                uint8_t v = (uint8_t)urand(256);
                if (kind == 3) v = wtype == MCP_GGML_Q8_0 ? 0x80 : 0x00; /* -128, -8 */
                if (kind == 4) v = wtype == MCP_GGML_Q8_0 ? 0x00 : 0x88; /* zero */
                if (kind == 6) v = wtype == MCP_GGML_Q8_0 ? 0x7F : 0xFF; /* 127, 7 */
                blk[i] = v;
            }
        }
    }
}

/* n_tok random activation rows of k floats, x_stride bytes apart: token 0
 * has a block of equal values, token 1 a block of zeros, token 2 is all one
 * value. */
static void fill_acts(float *x, size_t x_stride, int n_tok, int64_t k, int mag)
{
    float m = mag == MAG_NORMAL ? 1.0f : mag == MAG_HUGE ? 1e15f : 1e-15f;
    for (int t = 0; t < n_tok; t++) {
        float *row = (float *)((uint8_t *)x + (size_t)t * x_stride);
        for (int64_t i = 0; i < k; i++) row[i] = frand() * m;
        if (t == 0)
            for (int64_t i = 0; i < 32 && i < k; i++) row[i] = 0.75f * m;
        if (t == 1)
            for (int64_t i = k > 32 ? 32 : 0; i < k && i < 64; i++) row[i] = 0.0f;
        if (t == 2)
            for (int64_t i = 0; i < k; i++) row[i] = -0.37f * m;
    }
}

typedef struct combo {
    uint32_t wtype;
    mcp_llm_act act;
    const char *name;
} combo;

static const combo combos[] = {
    {MCP_GGML_F32, MCP_LLM_ACT_F32, "f32"},         {MCP_GGML_F16, MCP_LLM_ACT_F32, "f16"},
    {MCP_GGML_BF16, MCP_LLM_ACT_F32, "bf16"},       {MCP_GGML_Q8_0, MCP_LLM_ACT_F32, "q8_0/f32"},
    {MCP_GGML_Q4_0, MCP_LLM_ACT_F32, "q4_0/f32"},   {MCP_GGML_Q8_0, MCP_LLM_ACT_Q8, "q8_0/q8"},
    {MCP_GGML_Q4_0, MCP_LLM_ACT_Q8, "q4_0/q8"},
};

static const float sentinel = 12345.5f;

/* One product of rows 3..rows-3 of a weight of `rows` rows: fast (through
 * the dispatcher) against the reference. */
static void check_gemm_rows(mcp_llm_isa isa, const combo *c, int64_t k, int n_tok, int mag, int64_t rows)
{
    const int64_t r0 = 3, r1 = rows - 3, y_stride = rows + 5;
    const size_t row_bytes = wrow_bytes(c->wtype, k) + 4;
    const size_t fx_stride = (size_t)k * 4 + 24;
    const size_t x_stride = mcp_llm_act_row_bytes(c->act, k) + 40;
    uint8_t *w = malloc((size_t)rows * row_bytes);
    float *fx = malloc((size_t)n_tok * fx_stride);
    uint8_t *x = malloc((size_t)n_tok * x_stride);
    float *y = malloc((size_t)n_tok * (size_t)y_stride * sizeof *y);
    float *yr = malloc((size_t)n_tok * (size_t)y_stride * sizeof *yr);
    float *wf = malloc((size_t)k * sizeof *wf), *af = malloc((size_t)k * sizeof *af);
    TU_REQUIRE(w && fx && x && y && yr && wf && af);
    fill_weights(c->wtype, w, rows, row_bytes, k, mag);
    fill_acts(fx, fx_stride, n_tok, k, mag);
    for (int t = 0; t < n_tok; t++) {
        const float *src = (const float *)((const uint8_t *)fx + (size_t)t * fx_stride);
        uint8_t *dst = x + (size_t)t * x_stride;
        if (c->act == MCP_LLM_ACT_F32) {
            memcpy(dst, src, (size_t)k * 4);
            continue;
        }
        /* Extremes of what the quantizer makes: +-127 throughout a block. */
        if (t == 3 && k >= 64) {
            float *f = (float *)(void *)((uint8_t *)fx + (size_t)t * fx_stride);
            for (int i = 0; i < 32; i++) f[32 + i] = i % 3 == 0 ? -0.5f : 0.5f;
        }
        mcp_llm_act_quantize_q8_ref(src, k, (mcp_llm_q8_block *)dst);
    }
    for (int64_t i = 0; i < (int64_t)n_tok * y_stride; i++) y[i] = yr[i] = sentinel;
    mcp_llm_gemm_args a = {.wtype = c->wtype, .w = w, .row_bytes = row_bytes, .k = k, .r0 = r0, .r1 = r1,
                           .act = c->act, .x = x, .x_stride = x_stride, .n_tok = n_tok, .y = y, .y_stride = y_stride};
    mcp_llm_gemm(&a);
    /* A token alone gives the bits it gets among the others (the KV cache
     * and batching rely on it): prefill and decode paths agree exactly. */
    if (n_tok > 1) {
        float *y1 = malloc((size_t)y_stride * sizeof *y1);
        TU_REQUIRE(y1);
        for (int t = 0; t < n_tok; t++) {
            mcp_llm_gemm_args a1 = a;
            a1.x = x + (size_t)t * x_stride;
            a1.n_tok = 1;
            a1.y = y1;
            mcp_llm_gemm(&a1);
            tu_checks++;
            if (memcmp(y1 + r0, y + t * y_stride + r0, (size_t)(r1 - r0) * sizeof *y1) != 0) {
                TU_FAIL_AT(__FILE__, __LINE__, "%s %s k=%lld n_tok=%d: token %d alone differs", mcp_llm_isa_name(isa),
                           c->name, (long long)k, n_tok, t);
                break;
            }
        }
        free(y1);
    }
    a.y = yr;
    mcp_llm_gemm_ref(&a);
    int bad = 0;
    for (int t = 0; t < n_tok && bad < 3; t++) {
        const uint8_t *xt = x + (size_t)t * x_stride;
        if (c->act == MCP_LLM_ACT_F32) memcpy(af, xt, (size_t)k * 4);
        else {
            const mcp_llm_q8_block *q = (const mcp_llm_q8_block *)xt;
            for (int64_t i = 0; i < k; i++) af[i] = q[i / 32].d * (float)q[i / 32].qs[i % 32];
        }
        for (int64_t r = 0; r < rows; r++) {
            float got = y[t * y_stride + r], want = yr[t * y_stride + r];
            if (r < r0 || r >= r1) {
                if (memcmp(&got, &sentinel, sizeof got) != 0) {
                    TU_FAIL_AT(__FILE__, __LINE__, "%s %s k=%lld n_tok=%d: row %lld token %d outside the range written",
                               mcp_llm_isa_name(isa), c->name, (long long)k, n_tok, (long long)r, t);
                    bad++;
                }
                continue;
            }
            mcp_llm_dequantize_row(c->wtype, w + (size_t)r * row_bytes, k, wf);
            double mass = 0.0;
            for (int64_t i = 0; i < k; i++) mass += fabs((double)wf[i] * af[i]);
            double tol = 1e-5 * mass + FLT_MIN;
            tu_checks++;
            if (!(fabs((double)got - want) <= tol)) {
                TU_FAIL_AT(__FILE__, __LINE__, "%s %s k=%lld n_tok=%d mag=%d row %lld token %d: %.9g vs %.9g (tol %.3g)",
                           mcp_llm_isa_name(isa), c->name, (long long)k, n_tok, mag, (long long)r, t, got, want, tol);
                bad++;
            }
        }
    }
    for (int64_t r = 0; r < y_stride && !bad; r++) {
        /* Padding after the last row of each token's output is untouched too. */
        for (int t = 0; t < n_tok; t++)
            if (r >= rows && memcmp(&y[t * y_stride + r], &sentinel, sizeof(float)) != 0) bad++;
    }
    TU_CHECK(bad == 0);
    free(w);
    free(fx);
    free(x);
    free(y);
    free(yr);
    free(wf);
    free(af);
}

static void check_gemm(mcp_llm_isa isa, const combo *c, int64_t k, int n_tok, int mag)
{
    check_gemm_rows(isa, c, k, n_tok, mag, 40);
}

/* Q8 rows take groups of 16, 8, 4 and 2 blocks (576: 16 + 2, 960: 16 + 8 +
 * 4 + 2, 4128: 8 x 16 + 2 with one padding block); 8288 is more than one
 * segment of the AVX-512 prefill (12 groups). */
static const int64_t ks[] = {32, 64, 96, 128, 256, 576, 960, 4096, 4128, 8288};
static const int n_toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 33};

static void test_tables(void)
{
    /* A NULL entry would silently fall back to the reference and pass. */
    const mcp_llm_kernels *ts[] = {&mcp_llm_kernels_avx2, &mcp_llm_kernels_avx512};
    for (int i = 0; i < 2; i++) {
        const mcp_llm_kernels *t = ts[i];
        TU_CHECK(t->gemm_has && t->gemm && t->act_quantize_q8 && t->attend && t->rmsnorm && t->swiglu && t->softmax &&
                 t->f32_to_f16_row);
        for (size_t c = 0; c < sizeof combos / sizeof combos[0]; c++)
            TU_CHECK(t->gemm_has && t->gemm_has(combos[c].wtype, combos[c].act));
    }
}

static void test_gemm(void)
{
    for (int isa = MCP_LLM_ISA_REF; isa <= (int)mcp_llm_isa_best(); isa++) {
        TU_REQUIRE(mcp_llm_set_isa((mcp_llm_isa)isa));
        for (size_t c = 0; c < sizeof combos / sizeof combos[0]; c++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
                for (size_t ni = 0; ni < sizeof n_toks / sizeof n_toks[0]; ni++) {
                    check_gemm((mcp_llm_isa)isa, &combos[c], ks[ki], n_toks[ni], MAG_NORMAL);
                    /* Huge and tiny magnitudes at a few shapes. */
                    if (n_toks[ni] == 1 || n_toks[ni] == 5)
                        for (int mag = MAG_HUGE; mag < MAG_COUNT; mag++)
                            check_gemm((mcp_llm_isa)isa, &combos[c], ks[ki], n_toks[ni], mag);
                }
        /* Q8 prefill over more than one token chunk (1 MiB of grouped rows). */
        check_gemm((mcp_llm_isa)isa, &combos[5], 8288, 200, MAG_NORMAL);
        check_gemm((mcp_llm_isa)isa, &combos[6], 8288, 200, MAG_NORMAL);
        /* Prefill of about a hundred rows by seventy tokens, long enough
         * rows for any blocking over rows, tokens or elements to take more
         * than one step, with row and token remainders; float weights
         * also with an element tail. */
        for (size_t c = 0; c < sizeof combos / sizeof combos[0]; c++)
            check_gemm_rows((mcp_llm_isa)isa, &combos[c], 1056, 70, MAG_NORMAL, 110);
        for (size_t c = 0; c < 3; c++) check_gemm_rows((mcp_llm_isa)isa, &combos[c], 1000, 69, MAG_NORMAL, 109);
        /* Float weights take any k, not only whole blocks. */
        for (size_t c = 0; c < 3; c++) {
            check_gemm((mcp_llm_isa)isa, &combos[c], 7, 3, MAG_NORMAL);
            check_gemm((mcp_llm_isa)isa, &combos[c], 100, 5, MAG_NORMAL);
            check_gemm((mcp_llm_isa)isa, &combos[c], 1001, 1, MAG_NORMAL);
        }
    }
    mcp_llm_set_isa(mcp_llm_isa_best());
}

/* Q4_K and Q6_K blocks written from known elements by a packer (the
 * format's other direction), read back by dequantize_row. */
static void test_k_quant_layout(void)
{
    uint8_t blk[210];
    float out[256];
    /* Q4_K: d = 0.5, dmin = 0.25; sub-block j has scale 14 + 7j and min
     * 63 - 5j (6 bits, so the packing's high bits are used); element i
     * has value i * 7 % 16. */
    memset(blk, 0, sizeof blk);
    put_f16(blk, 0.5f);
    put_f16(blk + 2, 0.25f);
    int sc[8], mn[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = 14 + 7 * j;
        mn[j] = 63 - 5 * j;
        uint8_t *s = blk + 4;
        if (j < 4) {
            s[j] = (uint8_t)((s[j] & 0xC0) | sc[j]);
            s[j + 4] = (uint8_t)((s[j + 4] & 0xC0) | mn[j]);
        } else {
            s[j + 4] = (uint8_t)((sc[j] & 0x0F) | ((mn[j] & 0x0F) << 4));
            s[j - 4] = (uint8_t)(s[j - 4] | ((sc[j] >> 4) << 6));
            s[j] = (uint8_t)(s[j] | ((mn[j] >> 4) << 6));
        }
    }
    for (int i = 0; i < 256; i++) {
        const int q = i * 7 % 16, chunk = i / 64, hi = (i / 32) % 2, l = i % 32;
        uint8_t *byte = blk + 16 + 32 * chunk + l;
        *byte = (uint8_t)(hi ? (*byte & 0x0F) | (q << 4) : (*byte & 0xF0) | q);
    }
    mcp_llm_dequantize_row(MCP_GGML_Q4_K, blk, 256, out);
    for (int i = 0; i < 256; i++) {
        const int j = i / 32;
        TU_CHECK_NEAR(out[i], 0.5f * (float)sc[j] * (float)(i * 7 % 16) - 0.25f * (float)mn[j], 1e-6);
    }
    /* Q6_K: d = 0.125; the scale of elements 16s..16s+15 is s * 9 - 70;
     * element i has value (i * 11 % 64) - 32. */
    memset(blk, 0, sizeof blk);
    put_f16(blk + 208, 0.125f);
    for (int s16 = 0; s16 < 16; s16++) blk[192 + s16] = (uint8_t)(int8_t)(s16 * 9 - 70);
    for (int i = 0; i < 256; i++) {
        const int q = i * 11 % 64, half = i / 128, e = i % 128, quarter = e / 32, l = e % 32;
        uint8_t *lo = blk + 64 * half + l + (quarter & 1) * 32, *hb = blk + 128 + 32 * half + l;
        *lo = (uint8_t)(quarter < 2 ? (*lo & 0xF0) | (q & 0x0F) : (*lo & 0x0F) | ((q & 0x0F) << 4));
        *hb = (uint8_t)(*hb | ((q >> 4) << (2 * quarter)));
    }
    mcp_llm_dequantize_row(MCP_GGML_Q6_K, blk, 256, out);
    for (int i = 0; i < 256; i++)
        TU_CHECK_NEAR(out[i], 0.125f * (float)((i / 16) * 9 - 70) * (float)(i * 11 % 64 - 32), 1e-6);
}

/* K-quant products: the tables have none, so the dispatcher dequantizes
 * rows and runs the table's F32 product (rows up to 16384 elements a few at
 * a time on the stack, longer ones one at a time on the heap). */
static void test_gemm_k_quants(void)
{
    static const combo kc[] = {{MCP_GGML_Q4_K, MCP_LLM_ACT_F32, "q4_k/f32"}, {MCP_GGML_Q6_K, MCP_LLM_ACT_F32, "q6_k/f32"}};
    static const int64_t kk[] = {256, 512, 2048, 5632, 16384, 16640};
    static const int kn[] = {1, 3, 9};
    for (int isa = MCP_LLM_ISA_REF; isa <= (int)mcp_llm_isa_best(); isa++) {
        TU_REQUIRE(mcp_llm_set_isa((mcp_llm_isa)isa));
        for (size_t c = 0; c < 2; c++) {
            TU_CHECK(mcp_llm_gemm_supported(kc[c].wtype, MCP_LLM_ACT_F32));
            TU_CHECK(!mcp_llm_gemm_supported(kc[c].wtype, MCP_LLM_ACT_Q8));
            TU_CHECK(mcp_llm_act_for(kc[c].wtype) == MCP_LLM_ACT_F32);
            TU_CHECK(!mcp_llm_gemm_direct(kc[c].wtype, MCP_LLM_ACT_F32));
            for (size_t ki = 0; ki < sizeof kk / sizeof kk[0]; ki++)
                for (size_t ni = 0; ni < sizeof kn / sizeof kn[0]; ni++)
                    for (int mag = MAG_NORMAL; mag < MAG_COUNT; mag++)
                        check_gemm((mcp_llm_isa)isa, &kc[c], kk[ki], kn[ni], mag);
        }
    }
    mcp_llm_set_isa(mcp_llm_isa_best());
}

static void test_gemm_empty(void)
{
    float y[4] = {sentinel, sentinel, sentinel, sentinel};
    uint8_t w[64] = {0};
    float x[8] = {0};
    for (int isa = MCP_LLM_ISA_REF; isa <= (int)mcp_llm_isa_best(); isa++) {
        TU_REQUIRE(mcp_llm_set_isa((mcp_llm_isa)isa));
        mcp_llm_gemm_args a = {.wtype = MCP_GGML_F32, .w = w, .row_bytes = 32, .k = 8, .r0 = 1, .r1 = 1,
                               .act = MCP_LLM_ACT_F32, .x = (const uint8_t *)x, .x_stride = 32, .n_tok = 1, .y = y,
                               .y_stride = 4};
        mcp_llm_gemm(&a);
        a.r1 = 2;
        a.n_tok = 0;
        mcp_llm_gemm(&a);
        for (int i = 0; i < 4; i++) TU_CHECK(y[i] == sentinel);
    }
    mcp_llm_set_isa(mcp_llm_isa_best());
}

static void test_act_quantize(void)
{
    const int64_t k = 8288; /* the largest of ks */
    float *x = malloc((size_t)k * sizeof *x);
    const size_t rb_max = mcp_llm_act_row_bytes(MCP_LLM_ACT_Q8, k);
    /* The fast row 4 bytes off 64-byte alignment: nothing may assume more. */
    uint8_t *qbuf = malloc(rb_max + 4), *qrb = malloc(rb_max);
    mcp_llm_q8_block *q = (mcp_llm_q8_block *)(void *)(qbuf + 4), *qr = (mcp_llm_q8_block *)(void *)qrb;
    TU_REQUIRE(x && qbuf && qrb);
    for (int rep = 0; rep < 20; rep++) {
        for (int64_t b = 0; b < k / 32; b++) {
            float *v = x + b * 32;
            /* Each block its own magnitude, from subnormal to huge. */
            float m = powf(10.0f, (float)((int)urand(76) - 40));
            int kind = (int)urand(8);
            for (int i = 0; i < 32; i++) v[i] = frand() * m;
            if (kind == 0)
                for (int i = 0; i < 32; i++) v[i] = m; /* all equal */
            if (kind == 1)
                for (int i = 0; i < 32; i++) v[i] = 0.0f;
            if (kind == 2) { /* d = 1 exactly: every v + 0.5 is a tie, rounded to even */
                for (int i = 0; i < 32; i++) v[i] = (float)((int)urand(254) - 127) + 0.5f;
                v[7] = 127.0f;
            }
            if (kind == 3) v[urand(32)] = -m * 4.0f; /* one outlier */
            if (kind == 4)
                for (int i = 0; i < 32; i++) v[i] = frand() * 1e-40f; /* subnormal: 1/d overflows */
            if (kind == 5) v[urand(32)] = urand(2) ? INFINITY : -INFINITY; /* d infinite, id 0 */
            if (kind == 6) v[urand(32)] = NAN;                             /* skipped by the maximum */
        }
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            for (int isa = MCP_LLM_ISA_REF; isa <= (int)mcp_llm_isa_best(); isa++) {
                TU_REQUIRE(mcp_llm_set_isa((mcp_llm_isa)isa));
                int64_t n = ks[ki] / 32;
                const size_t rb = mcp_llm_act_row_bytes(MCP_LLM_ACT_Q8, ks[ki]);
                memset(q, 0xA5, rb);
                memset(qr, 0x5A, rb);
                mcp_llm_act_quantize(MCP_LLM_ACT_Q8, x, ks[ki], q);
                mcp_llm_act_quantize_q8_ref(x, ks[ki], qr);
                for (int64_t b = 0; b < n; b++) {
                    tu_checks++;
                    if (memcmp(&q[b], &qr[b], sizeof q[b]) != 0) {
                        TU_FAIL_AT(__FILE__, __LINE__, "%s: act_quantize_q8 block %lld of k=%lld differs (d %g vs %g, sum %d vs %d)",
                                   mcp_llm_isa_name((mcp_llm_isa)isa), (long long)b, (long long)ks[ki], q[b].d, qr[b].d,
                                   q[b].sum, qr[b].sum);
                        break;
                    }
                }
                /* The grouped form and the padding, byte for byte. */
                tu_checks++;
                if (memcmp((uint8_t *)q + n * (int64_t)sizeof *q, (uint8_t *)qr + n * (int64_t)sizeof *qr,
                           rb - (size_t)n * sizeof *q) != 0)
                    TU_FAIL_AT(__FILE__, __LINE__, "%s: act_quantize_q8 grouped form of k=%lld differs",
                               mcp_llm_isa_name((mcp_llm_isa)isa), (long long)ks[ki]);
            }
        }
    }
    mcp_llm_set_isa(mcp_llm_isa_best());
    free(x);
    free(qbuf);
    free(qrb);
}

static void test_rmsnorm(void)
{
    static const int64_t ns[] = {1, 7, 16, 100, 4096, 4099};
    float *x = malloc(4099 * sizeof *x), *w = malloc(4099 * sizeof *w), *o = malloc(4099 * sizeof *o),
          *orf = malloc(4099 * sizeof *orf);
    TU_REQUIRE(x && w && o && orf);
    for (int isa = MCP_LLM_ISA_REF; isa <= (int)mcp_llm_isa_best(); isa++) {
        TU_REQUIRE(mcp_llm_set_isa((mcp_llm_isa)isa));
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            int64_t n = ns[ni];
            for (int64_t i = 0; i < n; i++) {
                x[i] = frand() * 3.0f;
                w[i] = frand();
            }
            mcp_llm_rmsnorm_ref(x, w, n, 1e-5f, orf);
            mcp_llm_rmsnorm(x, w, n, 1e-5f, o);
            int bad = 0;
            for (int64_t i = 0; i < n; i++) bad += !(fabsf(o[i] - orf[i]) <= 1e-6f * fabsf(orf[i]) + FLT_MIN);
            /* In place. */
            mcp_llm_rmsnorm(x, w, n, 1e-5f, x);
            for (int64_t i = 0; i < n; i++) bad += !(fabsf(x[i] - orf[i]) <= 1e-6f * fabsf(orf[i]) + FLT_MIN);
            if (bad)
                TU_FAIL_AT(__FILE__, __LINE__, "%s: rmsnorm n=%lld: %d elements off", mcp_llm_isa_name((mcp_llm_isa)isa),
                           (long long)n, bad);
            tu_checks++;
        }
    }
    mcp_llm_set_isa(mcp_llm_isa_best());
    free(x);
    free(w);
    free(o);
    free(orf);
}

static void test_swiglu_softmax(void)
{
    static const int64_t ns[] = {1, 5, 8, 16, 17, 1000};
    static const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 89.0f, -89.0f, 100.0f, -100.0f, 20.0f, -20.0f};
    float g[1000], u[1000], o[1000], orf[1000], s[1000], sr[1000];
    for (int isa = MCP_LLM_ISA_REF; isa <= (int)mcp_llm_isa_best(); isa++) {
        TU_REQUIRE(mcp_llm_set_isa((mcp_llm_isa)isa));
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            int64_t n = ns[ni];
            for (int64_t i = 0; i < n; i++) {
                g[i] = frand() * 12.0f;
                u[i] = frand() * 2.0f;
                s[i] = sr[i] = frand() * 30.0f;
            }
            for (int64_t i = 0; i < n && i < 12; i++) g[(i * 7) % n] = specials[i];
            if (n > 4) s[1] = sr[1] = s[3] = sr[3] = -INFINITY; /* masked positions */
            if (n > 10) s[9] = sr[9] = s[0] - 95.0f;          /* a subnormal weight */
            mcp_llm_swiglu_ref(g, u, n, orf);
            mcp_llm_swiglu(g, u, n, o);
            int bad = 0;
            for (int64_t i = 0; i < n; i++) bad += !(fabsf(o[i] - orf[i]) <= 2e-6f * fabsf(orf[i]) + 1e-37f);
            if (bad)
                TU_FAIL_AT(__FILE__, __LINE__, "%s: swiglu n=%lld: %d elements off", mcp_llm_isa_name((mcp_llm_isa)isa),
                           (long long)n, bad);
            tu_checks++;
            mcp_llm_softmax_ref(sr, n);
            mcp_llm_softmax(s, n);
            bad = 0;
            for (int64_t i = 0; i < n; i++) bad += !(fabsf(s[i] - sr[i]) <= 2e-6f * sr[i] + 1e-37f);
            if (bad)
                TU_FAIL_AT(__FILE__, __LINE__, "%s: softmax n=%lld: %d elements off", mcp_llm_isa_name((mcp_llm_isa)isa),
                           (long long)n, bad);
            tu_checks++;
        }
    }
    mcp_llm_set_isa(mcp_llm_isa_best());
}

/* One head's attention over n_pos cached positions in blocks of 16 tokens,
 * each block its own allocation, keys and values interleaved per token. */
static void check_attend(mcp_llm_isa isa, bool f16, int64_t hd, int64_t n_pos, float scale)
{
    enum { BT = 16 };
    const size_t es = f16 ? 2 : 4, offset = 20, v_offset = (size_t)hd * es + 4;
    const size_t token_stride = 2 * (size_t)hd * es + 12;
    int nb = (int)((n_pos + BT - 1) / BT);
    uint8_t **blocks = calloc((size_t)nb, sizeof *blocks);
    float *q = malloc((size_t)hd * sizeof *q), *out = malloc((size_t)hd * sizeof *out),
          *outr = malloc((size_t)hd * sizeof *outr), *sc = malloc((size_t)n_pos * sizeof *sc),
          *scr = malloc((size_t)n_pos * sizeof *scr);
    double *wgt = malloc((size_t)n_pos * sizeof *wgt);
    TU_REQUIRE(blocks && q && out && outr && sc && scr && wgt);
    for (int j = 0; j < nb; j++) {
        blocks[j] = malloc(offset + BT * token_stride);
        TU_REQUIRE(blocks[j]);
        memset(blocks[j], 0xEE, offset + BT * token_stride);
    }
    for (int64_t i = 0; i < hd; i++) q[i] = frand();
    for (int64_t p = 0; p < n_pos; p++) {
        uint8_t *key = blocks[p / BT] + offset + (size_t)(p % BT) * token_stride;
        for (int64_t i = 0; i < 2 * hd; i++) {
            uint8_t *dst = i < hd ? key + (size_t)i * es : key + v_offset + (size_t)(i - hd) * es;
            float v = frand() * (i < hd ? 2.0f : 1.0f);
            if (f16) put_f16(dst, v);
            else memcpy(dst, &v, 4);
        }
    }
    mcp_llm_kv_view kv = {.blocks = (const uint8_t *const *)blocks, .block_tokens = BT, .offset = offset,
                          .token_stride = token_stride, .v_offset = v_offset, .f16 = f16};
    mcp_llm_attend(q, &kv, hd, n_pos, scale, sc, out);
    mcp_llm_attend_ref(q, &kv, hd, n_pos, scale, scr, outr);
    /* Weights in double for the bound: sum_p w_p |v_p,i| times the largest
     * |q.k| * scale, over which the score's rounding spreads. */
    float kf[2048];
    double smax = 0.0, wsum = 0.0, mass[2048] = {0};
    for (int64_t p = 0; p < n_pos; p++) {
        const uint8_t *key = blocks[p / BT] + offset + (size_t)(p % BT) * token_stride;
        mcp_llm_dequantize_row(f16 ? MCP_GGML_F16 : MCP_GGML_F32, key, hd, kf);
        double s = 0.0, sa = 0.0;
        for (int64_t i = 0; i < hd; i++) {
            s += (double)q[i] * kf[i];
            sa += fabs((double)q[i] * kf[i]);
        }
        wgt[p] = s * scale;
        if (sa * scale > smax) smax = sa * scale;
    }
    double wm = -INFINITY;
    for (int64_t p = 0; p < n_pos; p++) wm = wgt[p] > wm ? wgt[p] : wm;
    for (int64_t p = 0; p < n_pos; p++) wsum += (wgt[p] = exp(wgt[p] - wm));
    for (int64_t p = 0; p < n_pos; p++) {
        const uint8_t *val = blocks[p / BT] + offset + (size_t)(p % BT) * token_stride + v_offset;
        mcp_llm_dequantize_row(f16 ? MCP_GGML_F16 : MCP_GGML_F32, val, hd, kf);
        for (int64_t i = 0; i < hd; i++) mass[i] += wgt[p] / wsum * fabs(kf[i]);
    }
    int bad = 0;
    for (int64_t i = 0; i < hd; i++) bad += !(fabs((double)out[i] - outr[i]) <= 2e-5 * (1.0 + smax) * mass[i] + 1e-30);
    if (bad)
        TU_FAIL_AT(__FILE__, __LINE__, "%s: attend f16=%d hd=%lld n_pos=%lld: %d elements off (out[0] %.9g vs %.9g)",
                   mcp_llm_isa_name(isa), f16, (long long)hd, (long long)n_pos, bad, out[0], outr[0]);
    tu_checks++;
    for (int j = 0; j < nb; j++) free(blocks[j]);
    free(blocks);
    free(q);
    free(out);
    free(outr);
    free(sc);
    free(scr);
    free(wgt);
}

static void test_attend(void)
{
    static const int64_t hds[] = {7, 16, 64, 72, 80, 128, 136, 200, 256};
    static const int64_t nps[] = {1, 15, 16, 17, 100};
    for (int isa = MCP_LLM_ISA_REF; isa <= (int)mcp_llm_isa_best(); isa++) {
        TU_REQUIRE(mcp_llm_set_isa((mcp_llm_isa)isa));
        for (int f16 = 0; f16 < 2; f16++)
            for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++)
                for (size_t p = 0; p < sizeof nps / sizeof nps[0]; p++) {
                    float scale = 1.0f / sqrtf((float)hds[h]);
                    check_attend((mcp_llm_isa)isa, f16, hds[h], nps[p], scale);
                    check_attend((mcp_llm_isa)isa, f16, hds[h], nps[p], scale * 8.0f); /* peaked weights */
                }
    }
    mcp_llm_set_isa(mcp_llm_isa_best());
}

/* f32 to f16 must give the reference's bits exactly: rounding ties to even,
 * overflow to infinity (from 65520), subnormal results, infinities, NaNs
 * (quiet, sign kept, payload dropped), at every length of the tail. */
static void test_f32_to_f16(void)
{
    enum { N = 600 };
    static float x[N];
    static uint16_t h[N + 1], hr[N];
    const uint32_t bits[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu,
                             0x477fefffu, 0x477ff000u, 0x477fe000u, 0x38800000u, 0x387fffffu, 0x33000000u,
                             0x33000001u, 0x32ffffffu, 0x00000001u, 0x80000000u, 0x00000000u, 0x3f801000u,
                             0x3f803000u, 0x3f800fffu, 0x387fe000u, 0x38001000u, 0x37801000u, 0x7f7fffffu};
    for (int isa = MCP_LLM_ISA_REF; isa <= (int)mcp_llm_isa_best(); isa++) {
        TU_REQUIRE(mcp_llm_set_isa((mcp_llm_isa)isa));
        for (int rep = 0; rep < 4; rep++) {
            for (int i = 0; i < N; i++) {
                float m = powf(2.0f, (float)((int)urand(50) - 30));
                x[i] = frand() * m;
                if (urand(4) == 0) {
                    uint32_t b = bits[urand(sizeof bits / sizeof bits[0])];
                    memcpy(&x[i], &b, 4);
                }
            }
            for (int n = 0; n <= 40; n++) {
                const int64_t len = n == 40 ? N : n;
                h[len] = 0xBEEF;
                mcp_llm_f32_to_f16_row(x, h, len);
                mcp_llm_f32_to_f16_row_ref(x, hr, len);
                tu_checks++;
                if (memcmp(h, hr, (size_t)len * 2) != 0 || h[len] != 0xBEEF) {
                    int i = 0;
                    while (i < len && h[i] == hr[i]) i++;
                    uint32_t b;
                    memcpy(&b, &x[i < len ? i : 0], 4);
                    TU_FAIL_AT(__FILE__, __LINE__, "%s: f32_to_f16 n=%lld: element %d (0x%08x) 0x%04x vs 0x%04x",
                               mcp_llm_isa_name((mcp_llm_isa)isa), (long long)len, i, b, h[i], hr[i]);
                }
            }
        }
    }
    mcp_llm_set_isa(mcp_llm_isa_best());
}

int main(void)
{
    fprintf(stderr, "best ISA: %s\n", mcp_llm_isa_name(mcp_llm_isa_best()));
    TU_RUN(test_tables);
    TU_RUN(test_act_quantize);
    TU_RUN(test_gemm_empty);
    TU_RUN(test_gemm);
    TU_RUN(test_k_quant_layout);
    TU_RUN(test_gemm_k_quants);
    TU_RUN(test_rmsnorm);
    TU_RUN(test_swiglu_softmax);
    TU_RUN(test_attend);
    TU_RUN(test_f32_to_f16);
    return tu_finish("llm_kernels");
}
