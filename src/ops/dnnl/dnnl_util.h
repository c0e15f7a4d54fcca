/*
 * Private helpers of the oneDNN backend (src/ops/dnnl).
 *
 * The backend covers fp32 Conv (2-D, NCHW) and Gemm / MatMul. supports()
 * accepts a node only when every attribute is one we handle and the static
 * types say fp32 with the ranks we implement; everything else falls through
 * to the reference backend.
 *
 * Each node's state (built by prepare, owned by the session, shared by all
 * threads running it) holds a oneDNN CPU engine and primitives built for
 * the input shapes seen: at load when the shapes are static, else on first
 * use. Conv keeps a small per-shape cache under a mutex (weights reordered
 * once per cached shape into the layout that primitive prefers; primitives
 * execute outside the lock); Gemm / MatMul keep the load-time primitive and
 * build others per call (oneDNN's own primitive cache makes that cheap).
 * Primitives use a user scratchpad allocated per execution, so any thread
 * may run them.
 */
#ifndef MCP_OPS_DNNL_UTIL_H
#define MCP_OPS_DNNL_UTIL_H

#include <oneapi/dnnl/dnnl.h>

#include "ops/ops.h"

/* The graph value feeding input i of node, or NULL when omitted. */
const mcp_graph_value *mcp__dnnl_input(const mcp_node *node, const mcp_graph *graph, int i);
/* The initializer feeding input i, or NULL when the input is not one. */
const mcp_tensor *mcp__dnnl_initializer(const mcp_node *node, const mcp_graph *graph, int i);
/* True when v is statically a float32 tensor of the given rank. */
bool mcp__dnnl_is_f32(const mcp_graph_value *v, int rank);
/* Static rank of input i when it is statically float32 (initializers count),
 * else -1. */
int mcp__dnnl_f32_rank(const mcp_node *node, const mcp_graph *graph, int i);
/* Copies the static dims of input i into dims (rank from mcp__dnnl_f32_rank);
 * false when any is unknown. */
bool mcp__dnnl_static_dims(const mcp_node *node, const mcp_graph *graph, int i, int64_t *dims);
/* True when every attribute of node is named in `names` (NULL-terminated). */
bool mcp__dnnl_attrs_within(const mcp_node *node, const char *const *names);

/* Sets err from a failed oneDNN call; returns UNSUPPORTED for
 * dnnl_unimplemented, OUT_OF_MEMORY or INTERNAL otherwise. */
mcp_status mcp__dnnl_fail(mcp_err *err, dnnl_status_t s, const char *what);
/* Creates primitive attributes with a user-managed scratchpad. oneDNN's
 * library scratchpad is shared, and primitives using it must run on the
 * thread that created them; ours run on whatever thread runs the session. */
dnnl_status_t mcp__dnnl_attr_create(dnnl_primitive_attr_t *attr);
/* Runs prim (nargs <= 7, built with mcp__dnnl_attr_create) on a fresh stream
 * of eng with a scratchpad allocated for this call, and waits for it. */
mcp_status mcp__dnnl_execute(mcp_kernel_ctx *ctx, dnnl_engine_t eng, dnnl_primitive_t prim,
                             int nargs, const dnnl_exec_arg_t *args);
/* Makes a memory object of md over caller-owned data (read-only use allowed). */
mcp_status mcp__dnnl_wrap(mcp_kernel_ctx *ctx, dnnl_engine_t eng, const dnnl_memory_desc_t *md,
                          const void *data, dnnl_memory_t *out);

/* Kernels and their capability checks (dnnl_conv.c, dnnl_matmul.c). */
extern const mcp_kernel_def mcp__dnnl_conv_kernel;
extern const mcp_kernel_def mcp__dnnl_gemm_kernel;
extern const mcp_kernel_def mcp__dnnl_matmul_kernel;
bool mcp__dnnl_conv_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_gemm_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_matmul_supported(const mcp_node *node, const mcp_graph *graph);

#endif
