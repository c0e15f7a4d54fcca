/* The reference kernels: plain C, the definition every fast path is tested
 * against. Sums of products accumulate in double where the fast paths use
 * several float accumulators, so the reference is the more exact of the two. */
#include <math.h>
#include <string.h>

#include "llm/gguf.h"
#include "llm/kernels.h"
#include "tensor/tensor.h"

static float load_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return mcp_f16_to_f32(h);
}

/* Q4_K, 256 elements in 144 bytes: f16 d, f16 dmin, 12 bytes packing eight
 * 6-bit scales and eight 6-bit mins (one pair per 32 elements), then 128
 * bytes of 4-bit values. Sub-block j: element = d * scale_j * q - dmin * min_j;
 * the 64 elements of chunk c are the low nibbles of bytes 32c..32c+31 (sub-block
 * 2c), then their high nibbles (sub-block 2c + 1). */
static void q4_k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void dequant_q4_k(const uint8_t *blk, float *out)
{
    const float d = load_f16(blk), dmin = load_f16(blk + 2);
    const uint8_t *q = blk + 16;
    for (int c = 0; c < 4; c++, q += 32, out += 64) {
        int sc0, m0, sc1, m1;
        q4_k_scale_min(blk + 4, 2 * c, &sc0, &m0);
        q4_k_scale_min(blk + 4, 2 * c + 1, &sc1, &m1);
        const float d0 = d * (float)sc0, o0 = dmin * (float)m0, d1 = d * (float)sc1, o1 = dmin * (float)m1;
        for (int l = 0; l < 32; l++) {
            out[l] = d0 * (float)(q[l] & 0x0F) - o0;
            out[32 + l] = d1 * (float)(q[l] >> 4) - o1;
        }
    }
}

/* Q6_K, 256 elements in 210 bytes: 128 bytes of low 4 bits, 64 bytes of
 * high 2 bits, sixteen int8 scales (one per 16 elements), f16 d. Element =
 * d * scale * (q - 32). Each half of 128 elements takes 64 low bytes, 32
 * high bytes and 8 scales: element l + 32i (l < 32, i < 4) has low bits from
 * byte l (i even) or l + 32 (i odd), low nibble for i < 2, high for i >= 2,
 * and high bits 2i..2i+1 of high byte l; its scale is l / 16 + 2i. */
static void dequant_q6_k(const uint8_t *blk, float *out)
{
    const uint8_t *ql = blk, *qh = blk + 128;
    const int8_t *sc = (const int8_t *)(const void *)(blk + 192);
    const float d = load_f16(blk + 208);
    for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, out += 128) {
        for (int l = 0; l < 32; l++) {
            for (int i = 0; i < 4; i++) {
                const uint8_t lo = ql[l + (i & 1) * 32];
                const int q = ((i < 2 ? lo & 0x0F : lo >> 4) | (((qh[l] >> (2 * i)) & 3) << 4)) - 32;
                out[l + 32 * i] = d * (float)sc[l / 16 + 2 * i] * (float)q;
            }
        }
    }
}

void mcp_llm_dequantize_row(uint32_t wtype, const uint8_t *row, int64_t k, float *out)
{
    switch (wtype) {
    case MCP_GGML_F32:
        memcpy(out, row, (size_t)k * 4);
        return;
    case MCP_GGML_F16:
        for (int64_t i = 0; i < k; i++) out[i] = load_f16(row + 2 * i);
        return;
    case MCP_GGML_BF16:
        for (int64_t i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, row + 2 * i, 2);
            out[i] = mcp_bf16_to_f32(h);
        }
        return;
    case MCP_GGML_Q8_0:
        for (int64_t b = 0; b < k / 32; b++) {
            const uint8_t *blk = row + b * 34;
            float d = load_f16(blk);
            for (int i = 0; i < 32; i++) out[b * 32 + i] = d * (float)(int8_t)blk[2 + i];
        }
        return;
    case MCP_GGML_Q4_0:
        for (int64_t b = 0; b < k / 32; b++) {
            const uint8_t *blk = row + b * 18;
            float d = load_f16(blk);
            for (int i = 0; i < 16; i++) {
                out[b * 32 + i] = d * (float)((blk[2 + i] & 0x0F) - 8);
                out[b * 32 + i + 16] = d * (float)((blk[2 + i] >> 4) - 8);
            }
        }
        return;
    case MCP_GGML_Q4_K:
        for (int64_t b = 0; b < k / 256; b++) dequant_q4_k(row + b * 144, out + b * 256);
        return;
    case MCP_GGML_Q6_K:
        for (int64_t b = 0; b < k / 256; b++) dequant_q6_k(row + b * 210, out + b * 256);
        return;
    default:
        /* Callers check mcp_llm_gemm_supported first. */
        memset(out, 0, (size_t)k * sizeof *out);
        return;
    }
}

bool mcp_llm_gemm_supported(uint32_t wtype, mcp_llm_act act)
{
    switch (wtype) {
    case MCP_GGML_F32:
    case MCP_GGML_F16:
    case MCP_GGML_BF16:
        return act == MCP_LLM_ACT_F32;
    case MCP_GGML_Q8_0:
    case MCP_GGML_Q4_0:
        return act == MCP_LLM_ACT_F32 || act == MCP_LLM_ACT_Q8;
    case MCP_GGML_Q4_K:
    case MCP_GGML_Q6_K:
        return act == MCP_LLM_ACT_F32;
    default:
        return false;
    }
}

bool mcp_llm_gemm_direct(uint32_t wtype, mcp_llm_act act)
{
    return wtype != MCP_GGML_Q4_K && wtype != MCP_GGML_Q6_K && mcp_llm_gemm_supported(wtype, act);
}

mcp_llm_act mcp_llm_act_for(uint32_t wtype)
{
    return wtype == MCP_GGML_Q8_0 || wtype == MCP_GGML_Q4_0 ? MCP_LLM_ACT_Q8 : MCP_LLM_ACT_F32;
}

size_t mcp_llm_q8_grouped_offset(int64_t k)
{
    return ((size_t)(k / MCP_LLM_QK) * sizeof(mcp_llm_q8_block) + 63u) & ~(size_t)63u;
}

size_t mcp_llm_q8_grouped_bytes(int64_t k)
{
    const int64_t nb = k / MCP_LLM_QK, rest = (nb % 16 + 1) & ~(int64_t)1;
    size_t n = (size_t)(nb / 16) * MCP_LLM_Q8_GROUP_BYTES(16);
    for (int g = 8; g >= 2; g /= 2)
        if (rest & g) n += MCP_LLM_Q8_GROUP_BYTES(g);
    return n;
}

size_t mcp_llm_act_row_bytes(mcp_llm_act act, int64_t k)
{
    return act == MCP_LLM_ACT_Q8 ? mcp_llm_q8_grouped_offset(k) + mcp_llm_q8_grouped_bytes(k) : (size_t)k * sizeof(float);
}

void mcp_llm_q8_group_ref(const mcp_llm_q8_block *blocks, int64_t nb, int64_t first, int g, uint8_t *out)
{
    const int D = g / 2;
    float *d = (float *)(void *)(out + (size_t)g * 32);
    int32_t *c8 = (int32_t *)(void *)(out + (size_t)g * 32 + 64), *c128 = c8 + 16;
    for (int lane = 0; lane < 16; lane++) {
        const int64_t b = first + lane % g;
        int32_t sum = 0;
        for (int v = 0; v < D; v++)
            for (int c = 0; c < 4; c++) {
                int8_t q = b < nb ? blocks[b].qs[4 * (v + D * (lane / g)) + c] : 0;
                out[(size_t)v * 64 + (size_t)lane * 4 + (size_t)c] = (uint8_t)q;
                sum += q;
            }
        d[lane] = b < nb ? blocks[b].d : 0.0f;
        c8[lane] = -8 * sum;
        c128[lane] = -128 * sum;
    }
}

void mcp_llm_q8_group_row_ref(mcp_llm_q8_block *out, int64_t k)
{
    const int64_t nb = k / MCP_LLM_QK;
    uint8_t *row = (uint8_t *)out, *p = row + mcp_llm_q8_grouped_offset(k);
    memset(row + (size_t)nb * sizeof *out, 0, mcp_llm_q8_grouped_offset(k) - (size_t)nb * sizeof *out);
    int64_t b = 0;
    for (; b + 16 <= nb; b += 16, p += MCP_LLM_Q8_GROUP_BYTES(16)) mcp_llm_q8_group_ref(out, nb, b, 16, p);
    const int64_t rest = (nb - b + 1) & ~(int64_t)1;
    for (int g = 8; g >= 2; g /= 2)
        if (rest & g) {
            mcp_llm_q8_group_ref(out, nb, b, g, p);
            b += g;
            p += MCP_LLM_Q8_GROUP_BYTES(g);
        }
}

void mcp_llm_act_quantize_q8_ref(const float *x, int64_t k, mcp_llm_q8_block *out)
{
    for (int64_t b = 0; b < k / MCP_LLM_QK; b++) {
        const float *v = x + b * MCP_LLM_QK;
        float amax = 0.0f;
        for (int i = 0; i < MCP_LLM_QK; i++) amax = fmaxf(amax, fabsf(v[i]));
        float d = amax / 127.0f;
        float id = d > 0.0f ? 1.0f / d : 0.0f;
        int32_t sum = 0;
        for (int i = 0; i < MCP_LLM_QK; i++) {
            int q = (int)lrintf(v[i] * id);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            out[b].qs[i] = (int8_t)q;
            sum += q;
        }
        out[b].d = d;
        out[b].sum = sum;
    }
    mcp_llm_q8_group_row_ref(out, k);
}

/* dot(weight row, float activations) over k elements. */
static double dot_row_f32(uint32_t wtype, const uint8_t *w, const float *x, int64_t k)
{
    double acc = 0.0;
    switch (wtype) {
    case MCP_GGML_F32:
        for (int64_t i = 0; i < k; i++) {
            float v;
            memcpy(&v, w + 4 * i, 4);
            acc += (double)v * x[i];
        }
        return acc;
    case MCP_GGML_F16:
        for (int64_t i = 0; i < k; i++) acc += (double)load_f16(w + 2 * i) * x[i];
        return acc;
    case MCP_GGML_BF16:
        for (int64_t i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, w + 2 * i, 2);
            acc += (double)mcp_bf16_to_f32(h) * x[i];
        }
        return acc;
    case MCP_GGML_Q8_0:
        for (int64_t b = 0; b < k / 32; b++) {
            const uint8_t *blk = w + b * 34;
            double s = 0.0;
            for (int i = 0; i < 32; i++) s += (double)(int8_t)blk[2 + i] * x[b * 32 + i];
            acc += s * load_f16(blk);
        }
        return acc;
    case MCP_GGML_Q4_0:
        for (int64_t b = 0; b < k / 32; b++) {
            const uint8_t *blk = w + b * 18;
            double s = 0.0;
            for (int i = 0; i < 16; i++) {
                s += (double)((blk[2 + i] & 0x0F) - 8) * x[b * 32 + i];
                s += (double)((blk[2 + i] >> 4) - 8) * x[b * 32 + i + 16];
            }
            acc += s * load_f16(blk);
        }
        return acc;
    case MCP_GGML_Q4_K:
    case MCP_GGML_Q6_K: {
        const size_t bs = wtype == MCP_GGML_Q4_K ? 144 : 210;
        float f[256];
        for (int64_t b = 0; b < k / 256; b++) {
            mcp_llm_dequantize_row(wtype, w + (size_t)b * bs, 256, f);
            for (int i = 0; i < 256; i++) acc += (double)f[i] * x[b * 256 + i];
        }
        return acc;
    }
    default:
        return 0.0;
    }
}

/* dot(weight row, Q8 activations): integer sums per block, then scales. */
static double dot_row_q8(uint32_t wtype, const uint8_t *w, const mcp_llm_q8_block *x, int64_t k)
{
    double acc = 0.0;
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t s = 0;
        float dw;
        if (wtype == MCP_GGML_Q8_0) {
            const uint8_t *blk = w + b * 34;
            dw = load_f16(blk);
            for (int i = 0; i < 32; i++) s += (int32_t)(int8_t)blk[2 + i] * x[b].qs[i];
        } else {
            const uint8_t *blk = w + b * 18;
            dw = load_f16(blk);
            /* (q - 8) * a summed = q * a summed - 8 * sum(a). */
            for (int i = 0; i < 16; i++) {
                s += (int32_t)(blk[2 + i] & 0x0F) * x[b].qs[i];
                s += (int32_t)(blk[2 + i] >> 4) * x[b].qs[i + 16];
            }
            s -= 8 * x[b].sum;
        }
        acc += (double)dw * (double)x[b].d * (double)s;
    }
    return acc;
}

void mcp_llm_gemm_ref(const mcp_llm_gemm_args *a)
{
    for (int t = 0; t < a->n_tok; t++) {
        const uint8_t *x = a->x + (size_t)t * a->x_stride;
        float *y = a->y + (int64_t)t * a->y_stride;
        for (int64_t r = a->r0; r < a->r1; r++) {
            const uint8_t *w = a->w + (size_t)r * a->row_bytes;
            double v = a->act == MCP_LLM_ACT_Q8 ? dot_row_q8(a->wtype, w, (const mcp_llm_q8_block *)x, a->k)
                                                : dot_row_f32(a->wtype, w, (const float *)x, a->k);
            y[r] = (float)v;
        }
    }
}

void mcp_llm_rmsnorm_ref(const float *x, const float *w, int64_t n, float eps, float *out)
{
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * w[i];
}

void mcp_llm_layernorm(const float *x, const float *w, const float *b, int64_t n, float eps, float *out)
{
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < n; i++) mean += x[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
    var /= (double)n;
    float scale = (float)(1.0 / sqrt(var + eps));
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(x[i] - mean) * scale * w[i];
        out[i] = b ? v + b[i] : v;
    }
}

void mcp_llm_rope_angles(int64_t n_rot, int64_t pos, const float *inv_freq, float *cs)
{
    for (int64_t i = 0; i < n_rot / 2; i++) {
        double theta = (double)pos * (double)inv_freq[i];
        cs[2 * i] = (float)cos(theta);
        cs[2 * i + 1] = (float)sin(theta);
    }
}

void mcp_llm_rope(float *x, int64_t n_rot, const float *cs, bool neox)
{
    const int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

void mcp_llm_f32_to_f16_row_ref(const float *x, uint16_t *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = mcp_f32_to_f16(x[i]);
}

void mcp_llm_softmax_ref(float *x, int64_t n)
{
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, x[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void mcp_llm_swiglu_ref(const float *gate, const float *up, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void mcp_llm_gelu(const float *x, int64_t n, float *out)
{
    const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
    }
}

void mcp_llm_add(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

static float kv_load(const uint8_t *p, int64_t i, bool f16)
{
    if (f16) return load_f16(p + 2 * i);
    float v;
    memcpy(&v, p + 4 * i, 4);
    return v;
}

void mcp_llm_attend_ref(const float *q, const mcp_llm_kv_view *kv, int64_t head_dim, int64_t n_pos, float scale,
                        float *scratch, float *out)
{
    for (int64_t p = 0; p < n_pos; p++) {
        const uint8_t *key =
            kv->blocks[p / kv->block_tokens] + kv->offset + (size_t)(p % kv->block_tokens) * kv->token_stride;
        double s = 0.0;
        for (int64_t i = 0; i < head_dim; i++) s += (double)q[i] * kv_load(key, i, kv->f16);
        scratch[p] = (float)s * scale;
    }
    mcp_llm_softmax_ref(scratch, n_pos);
    for (int64_t i = 0; i < head_dim; i++) out[i] = 0.0f;
    for (int64_t p = 0; p < n_pos; p++) {
        const uint8_t *val =
            kv->blocks[p / kv->block_tokens] + kv->offset + (size_t)(p % kv->block_tokens) * kv->token_stride + kv->v_offset;
        float a = scratch[p];
        for (int64_t i = 0; i < head_dim; i++) out[i] += a * kv_load(val, i, kv->f16);
    }
}
