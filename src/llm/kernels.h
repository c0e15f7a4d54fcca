/* The LLM runtime's kernels: products of weights (as GGUF stores them, read
 * in place from the mapping) with activations, and the per-token operations
 * of a decoder (norms, RoPE, softmax, gated activations, attention over the
 * paged KV cache).
 *
 * Every kernel has a portable C reference (kernels_ref.c), the definition
 * the fast paths are tested against; AVX2 and AVX-512 paths (with VNNI and
 * BF16 where the CPU has them) are chosen once at run time, and
 * mcp_llm_set_isa() forces one (the tests compare each with the reference).
 *
 * Layouts follow ggml: a weight is `rows` rows of `k` elements, each row
 * `row_bytes` long, stored in blocks of its type (Q8_0: f16 scale + 32 int8;
 * Q4_0: f16 scale + 16 bytes of 4-bit values, low nibbles first, offset 8).
 */
#ifndef MCP_LLM_KERNELS_H
#define MCP_LLM_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum mcp_llm_isa {
    MCP_LLM_ISA_REF = 0, /* portable C */
    MCP_LLM_ISA_AVX2,    /* AVX2 + FMA + F16C */
    MCP_LLM_ISA_AVX512,  /* AVX-512 F/BW/VL (+ VNNI, BF16 when present) */
} mcp_llm_isa;

/* The best the CPU has (cached). */
mcp_llm_isa mcp_llm_isa_best(void);
/* The one in use: the best, or what mcp_llm_set_isa / MCP_LLM_ISA=ref|avx2|avx512
 * chose. Setting one the CPU lacks returns false and changes nothing. */
mcp_llm_isa mcp_llm_isa_current(void);
bool mcp_llm_set_isa(mcp_llm_isa isa);
const char *mcp_llm_isa_name(mcp_llm_isa isa);

/* How activations are presented to a weight product. F32: as they are
 * (every weight type; exact against dequantized weights). Q8: quantized per
 * block of 32 to int8 with one float scale, for Q8_0 / Q4_0 weights: the fast
 * integer path. */
typedef enum mcp_llm_act {
    MCP_LLM_ACT_F32 = 0,
    MCP_LLM_ACT_Q8 = 1,
} mcp_llm_act;

/* One block of Q8 activations: x[i] ~= d * qs[i]; sum = sum of qs. */
#define MCP_LLM_QK 32
typedef struct mcp_llm_q8_block {
    float d;
    int32_t sum;
    int8_t qs[MCP_LLM_QK];
} mcp_llm_q8_block;

/* A Q8 activation row of k elements (k a multiple of 32, nb = k / 32
 * blocks) holds the same values twice, in two layouts:
 *
 * 1. At the start, the nb blocks in order (mcp_llm_q8_block): the form
 *    products that stream weights (decode) combine with GGUF blocks as
 *    they lie.
 * 2. At mcp_llm_q8_grouped_offset(k), the grouped form, which loads
 *    straight into vpdpbusd operands once the weights are repacked alike
 *    (prefill). The blocks are taken in groups of g: nb / 16 groups of 16,
 *    then one group each of 8, 4 and 2 as the binary digits of the rest say
 *    (the rest rounded up to even; the block that pads it has d = 0 and
 *    qs = 0). A group of g blocks is D = g / 2 vectors of 16 four-byte
 *    lanes: byte c of lane L of vector v is element 4 * (v + D * (L / g)) + c
 *    of block L % g, so every lane belongs to one block. After the vectors
 *    come 16 floats (lane L: d of its block), then 16 int32 (-8 times the
 *    sum of the lane's bytes), then 16 int32 (-128 times it): a group is
 *    MCP_LLM_Q8_GROUP_BYTES(g) bytes.
 *
 * Both parts are written in full by mcp_llm_act_quantize, padding included
 * (zero bytes), so rows compare with memcmp. */
#define MCP_LLM_Q8_GROUP_BYTES(g) ((size_t)(g) * 32u + 192u)
size_t mcp_llm_q8_grouped_offset(int64_t k);
size_t mcp_llm_q8_grouped_bytes(int64_t k);
/* The grouped form from the blocks, the reference's (the fast quantizers
 * call these for what they do not vectorize): of one group (`first` its
 * first block, g its size, out its start), and of a whole row whose blocks
 * are written (the pad before the grouped form zeroed, then every group). */
void mcp_llm_q8_group_ref(const mcp_llm_q8_block *blocks, int64_t nb, int64_t first, int g, uint8_t *out);
void mcp_llm_q8_group_row_ref(mcp_llm_q8_block *row, int64_t k);

/* Whether weights of GGUF type `wtype` multiply activations presented as `act`. */
bool mcp_llm_gemm_supported(uint32_t wtype, mcp_llm_act act);
/* Whether the ISA tables multiply them as they lie; the rest of what is
 * supported (the K-quants) the dispatcher dequantizes a few rows at a time
 * for the tables' F32 product. */
bool mcp_llm_gemm_direct(uint32_t wtype, mcp_llm_act act);
/* The activation form the fast path uses for `wtype`: Q8 for Q8_0/Q4_0, F32 otherwise. */
mcp_llm_act mcp_llm_act_for(uint32_t wtype);
/* Bytes of one activation row of k elements (k a multiple of 32 for Q8; a
 * multiple of 64 bytes for Q8). */
size_t mcp_llm_act_row_bytes(mcp_llm_act act, int64_t k);
/* x (k floats) into its `act` form at out (F32: copied; Q8: both layouts
 * above, act_row_bytes in all). */
void mcp_llm_act_quantize(mcp_llm_act act, const float *x, int64_t k, void *out);

/* y[t * y_stride + r] = dot(row r of W, activation row t), for r in
 * [r0, r1) and t in [0, n_tok). Activation row t starts at
 * x + t * x_stride bytes, in the form `act`. The kernel reuses each weight
 * row across the tokens it is given (prefill), so callers pass all tokens
 * of a step at once and split rows across threads. */
typedef struct mcp_llm_gemm_args {
    uint32_t wtype;
    const uint8_t *w;
    size_t row_bytes;
    int64_t k;
    int64_t r0, r1;
    mcp_llm_act act;
    const uint8_t *x;
    size_t x_stride;
    int n_tok;
    float *y;
    int64_t y_stride;
} mcp_llm_gemm_args;
void mcp_llm_gemm(const mcp_llm_gemm_args *a);

/* Row `r` of a weight (any supported type) as floats: embeddings lookup. */
void mcp_llm_dequantize_row(uint32_t wtype, const uint8_t *row, int64_t k, float *out);

/* Per-token operations (in place where out == x is allowed). */
/* out = x / sqrt(mean(x^2) + eps) * w */
void mcp_llm_rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out);
/* out = (x - mean) / sqrt(var + eps) * w + b (b may be NULL) */
void mcp_llm_layernorm(const float *x, const float *w, const float *b, int64_t n, float eps, float *out);
/* Rotary embedding: mcp_llm_rope_angles fills cs with (cos, sin) of
 * pos * inv_freq[i] for i < n_rot / 2, once per token; mcp_llm_rope rotates
 * the first n_rot dimensions of one head by them (the model computes
 * inv_freq from the base, the scaling and any per-dimension factors).
 * neox: pairs (i, i + n_rot/2); otherwise pairs (2i, 2i+1). */
void mcp_llm_rope_angles(int64_t n_rot, int64_t pos, const float *inv_freq, float *cs);
void mcp_llm_rope(float *x, int64_t n_rot, const float *cs, bool neox);
/* n floats to IEEE half precision (round to nearest even): the F16 KV cache. */
void mcp_llm_f32_to_f16_row(const float *x, uint16_t *out, int64_t n);
/* In-place softmax over n values. */
void mcp_llm_softmax(float *x, int64_t n);
/* out[i] = silu(gate[i]) * up[i] */
void mcp_llm_swiglu(const float *gate, const float *up, int64_t n, float *out);
/* out[i] = gelu(x[i]), tanh approximation (GPT-2's). */
void mcp_llm_gelu(const float *x, int64_t n, float *out);
/* y[i] += x[i] */
void mcp_llm_add(float *y, const float *x, int64_t n);

/* Attention of one query head over a sequence's cached keys and values.
 * The cache is in blocks of `block_tokens` tokens; `blocks[j]` points at the
 * j-th block of the sequence, its keys for this layer and KV head `offset`
 * bytes in, with `token_stride` bytes from one token to the next inside a
 * block and `v_offset` bytes from a key to its value. Keys and values are F32 or F16 (`f16`). The query attends to
 * positions [0, n_pos). out (head_dim floats) = softmax(q.K * scale) V;
 * scratch holds n_pos floats. */
typedef struct mcp_llm_kv_view {
    const uint8_t *const *blocks;
    int block_tokens;
    size_t offset;
    size_t token_stride;
    size_t v_offset;
    bool f16;
} mcp_llm_kv_view;
void mcp_llm_attend(const float *q, const mcp_llm_kv_view *kv, int64_t head_dim, int64_t n_pos, float scale, float *scratch,
                    float *out);

/* The fast paths an ISA provides; NULL entries fall back to the reference.
 * kernels_avx2.c and kernels_avx512.c define one table each, their
 * functions compiled for their ISA with target attributes. */
typedef struct mcp_llm_kernels {
    /* Whether gemm handles this weight type and activation form. */
    bool (*gemm_has)(uint32_t wtype, mcp_llm_act act);
    void (*gemm)(const mcp_llm_gemm_args *a);
    /* A whole Q8 row (both layouts) at out. */
    void (*act_quantize_q8)(const float *x, int64_t k, mcp_llm_q8_block *out);
    void (*attend)(const float *q, const mcp_llm_kv_view *kv, int64_t head_dim, int64_t n_pos, float scale, float *scratch,
                   float *out);
    void (*rmsnorm)(const float *x, const float *w, int64_t n, float eps, float *out);
    void (*swiglu)(const float *gate, const float *up, int64_t n, float *out);
    void (*softmax)(float *x, int64_t n);
    void (*f32_to_f16_row)(const float *x, uint16_t *out, int64_t n);
} mcp_llm_kernels;
extern const mcp_llm_kernels mcp_llm_kernels_avx2;
extern const mcp_llm_kernels mcp_llm_kernels_avx512;

/* The reference kernels themselves, for the tests. */
void mcp_llm_gemm_ref(const mcp_llm_gemm_args *a);
void mcp_llm_act_quantize_q8_ref(const float *x, int64_t k, mcp_llm_q8_block *out);
void mcp_llm_attend_ref(const float *q, const mcp_llm_kv_view *kv, int64_t head_dim, int64_t n_pos, float scale,
                        float *scratch, float *out);
void mcp_llm_rmsnorm_ref(const float *x, const float *w, int64_t n, float eps, float *out);
void mcp_llm_swiglu_ref(const float *gate, const float *up, int64_t n, float *out);
void mcp_llm_softmax_ref(float *x, int64_t n);
void mcp_llm_f32_to_f16_row_ref(const float *x, uint16_t *out, int64_t n);

#endif
