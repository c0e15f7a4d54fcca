/*
 * Attention (ONNX opsets 23 and 24): what a node's inputs and attributes
 * say, checked once per run and shared by the reference kernel
 * (ops/ref/transformer.c) and the oneDNN one (ops/dnnl/dnnl_attention.c).
 *
 * Q, K and V are 4-D (batch, heads, sequence, head size) or 3-D (batch,
 * sequence, heads * head size, with q_num_heads / kv_num_heads); either
 * way element (b, h, s, d) lies at b * s_b + h * s_h + s * s_s + d. Keys
 * and values at positions below `past` come from past_key / past_value,
 * the rest from K / V at position - past.
 *
 * The bias added to a score (before the softmax, after the softcap):
 * attn_mask broadcast to (batch, q heads, q sequence, total) and padded on
 * its last axis with -inf (bool: false is -inf, true 0; other types are
 * added), causal masking aligned to the bottom right (a query at row i may
 * see key j <= i + offset, offset being past_sequence_length, or
 * nonpad_kv_seqlen[b] - q_sequence when that input is given, else 0), and
 * keys at or past nonpad_kv_seqlen[b] masked.
 */
#ifndef MCP_OPS_ATTENTION_H
#define MCP_OPS_ATTENTION_H

#include "ops/ops.h"

typedef struct mcp_attention_plan {
    int64_t batch, hq, hkv, sq, skv, past, total, d, dv;
    bool rank3;
    /* Element strides over (batch, head, sequence) of Q, K, V and Y. */
    int64_t qs[3], ks[3], vs[3], ys[3];
    float scale, softcap; /* softcap 0: none */
    bool causal;
    int mode;             /* qk_matmul_output_mode, 0..3 */
    const mcp_tensor *q, *k, *v, *mask, *past_key, *past_value, *nonpad;
    /* attn_mask strides over (batch, q head, q row, key), 0 where broadcast,
     * and the length of its last axis (<= total). */
    int64_t ms[4], mask_len;
    /* Which optional outputs the node asks for. */
    bool want_present_k, want_present_v, want_qk;
} mcp_attention_plan;

/* Validates the node's inputs and attributes for this run (failing with a
 * message that names the input or attribute) and fills p. */
mcp_status mcp_attention_plan_init(mcp_kernel_ctx *ctx, mcp_attention_plan *p);

/* Whether Y and the qk output asked for are empty (then other dims may be
 * huge: nothing may loop over them). */
bool mcp_attention_nothing_to_do(const mcp_tensor *y, const mcp_tensor *qk);

/* The offset of causal alignment and the number of valid keys of batch b. */
int64_t mcp_attention_causal_offset(const mcp_attention_plan *p, int64_t b);
int64_t mcp_attention_valid_keys(const mcp_attention_plan *p, int64_t b);

/* The attn_mask's contribution at (b, h, row i, key t): 0, -inf or the
 * mask value (no causal or padding part). */
double mcp_attention_mask_at(const mcp_attention_plan *p, int64_t b, int64_t h, int64_t i, int64_t t);

/* Writes keys (value false) or values as (batch, kv heads, total, size):
 * the past, then the new ones. */
void mcp_attention_concat(const mcp_attention_plan *p, bool value, void *out);

/* Allocates the present_key / present_value outputs the node asks for and
 * fills them: past then the new keys / values, (batch, kv heads, total, d). */
mcp_status mcp_attention_write_present(mcp_kernel_ctx *ctx, const mcp_attention_plan *p);

/* Allocates Y (uninitialized) and, when the node asks for it,
 * qk_matmul_output (*qk, else NULL). */
mcp_status mcp_attention_outputs(mcp_kernel_ctx *ctx, const mcp_attention_plan *p, mcp_tensor **y,
                                      mcp_tensor **qk);

#endif
