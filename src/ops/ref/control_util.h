/* Private helpers of the control family (control.c, control_seq.c). */
#ifndef MCP_OPS_REF_CONTROL_UTIL_H
#define MCP_OPS_REF_CONTROL_UTIL_H

#include <string.h>

#include "ops/ref/ref.h"

/* Input value i, or NULL when omitted or out of range. */
static inline mcp_value *mcp__ctl_in(const mcp_kernel_ctx *ctx, int i)
{
    return (i >= 0 && i < ctx->n_inputs) ? ctx->inputs[i] : NULL;
}

/* Resets a value whose contents were moved elsewhere (frees nothing). */
static inline void mcp__ctl_forget(mcp_value *v)
{
    memset(v, 0, sizeof(*v));
    v->kind = MCP_VALUE_TENSOR;
}

/* Moves src into dst (releasing what dst held); src becomes empty. */
static inline void mcp__ctl_move(mcp_value *dst, mcp_value *src)
{
    if (dst == src) return;
    mcp_value_clear(dst);
    *dst = *src;
    mcp__ctl_forget(src);
}

/* Turns v into an empty sequence of elem. */
static inline void mcp__ctl_make_seq(mcp_value *v, mcp_dtype elem)
{
    mcp_value_clear(v);
    v->kind = MCP_VALUE_SEQUENCE;
    v->seq = NULL;
    v->seq_len = 0;
    v->seq_cap = 0;
    v->elem_dtype = elem;
}

/* Copies n elements from src[src_off..] to dst[dst_off..] (same dtype;
 * strings are duplicated). */
mcp_status mcp__ctl_copy_elems(mcp_tensor *dst, int64_t dst_off, const mcp_tensor *src,
                               int64_t src_off, int64_t n);

/* Reads a one-element tensor as int64; false when it has not one element
 * or is not numeric. */
bool mcp__ctl_scalar_i64(const mcp_tensor *t, int64_t *out);

/* Sequence family kernels (control_seq.c). */
mcp_status mcp__ctl_sequence_empty(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_sequence_construct(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_sequence_insert(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_sequence_at(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_sequence_erase(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_sequence_length(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_split_to_sequence(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_concat_from_sequence(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_sequence_map(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_optional(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_optional_has_element(mcp_kernel_ctx *ctx);
mcp_status mcp__ctl_optional_get_element(mcp_kernel_ctx *ctx);

#endif
