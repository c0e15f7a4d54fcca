/* Private helpers shared by the index family's files (index*.c). */
#ifndef MCP_OPS_REF_INDEX_UTIL_H
#define MCP_OPS_REF_INDEX_UTIL_H

#include "ops/ref/ref.h"

/* Copies n consecutive elements from src (starting at element si) into dst
 * (starting at di). Strings are duplicated into dst, which owns them. Both
 * tensors have the same dtype. Returns OK or a failed status after
 * mcp_kfail (out of memory). */
mcp_status mcp__ref_index_copy(mcp_kernel_ctx *ctx, mcp_tensor *dst, int64_t di,
                               const mcp_tensor *src, int64_t si, int64_t n);

/* Run functions that live in index_resize.c and index_nms.c. */
mcp_status mcp__ref_index_resize_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_index_upsample_run(mcp_kernel_ctx *ctx);
mcp_status mcp__ref_index_nms_run(mcp_kernel_ctx *ctx);

#endif
