/* Private to the signal family: run functions defined in signal_*.c and
 * listed in the family table in signal.c. */
#ifndef MCP_OPS_REF_SIGNAL_UTIL_H
#define MCP_OPS_REF_SIGNAL_UTIL_H

#include "ops/ref/ref.h"

/* signal_text.c */
mcp_status mcp__signal_run_string_normalizer(mcp_kernel_ctx *ctx);
mcp_status mcp__signal_run_tfidf_vectorizer(mcp_kernel_ctx *ctx);

/* signal_train.c (domain ai.onnx.preview.training) */
mcp_status mcp__signal_run_adagrad(mcp_kernel_ctx *ctx);
mcp_status mcp__signal_run_adam(mcp_kernel_ctx *ctx);
mcp_status mcp__signal_run_momentum(mcp_kernel_ctx *ctx);

#endif
