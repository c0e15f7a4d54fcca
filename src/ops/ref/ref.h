/* Reference (portable C) kernel tables, one per op family. Each family file
 * defines its table and its length; registry.c lists the families. */
#ifndef MCP_OPS_REF_H
#define MCP_OPS_REF_H

#include "ops/ops.h"

#define MCP__REF_FAMILIES(X)                                                  \
    X(elementwise)                                                            \
    X(reduce)                                                                 \
    X(nn)                                                                     \
    X(shape)                                                                  \
    X(index)                                                                  \
    X(control)                                                                \
    X(rnn)                                                                    \
    X(signal)                                                                 \
    X(fused)                                                                  \
    X(transformer)                                                            \
    X(newer)                                                                  \
    X(ml)

#define MCP__REF_DECLARE(fam)                                                 \
    extern const mcp_kernel_def mcp__ref_##fam##_kernels[];                   \
    extern const int mcp__ref_##fam##_kernel_count;
MCP__REF_FAMILIES(MCP__REF_DECLARE)
#undef MCP__REF_DECLARE

#endif
