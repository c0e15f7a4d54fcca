/*
 * Private helpers of the nn reference family (nn.c, nn_*.c): element
 * conversion to plain double / int64 buffers, spatial attribute parsing for
 * convolution and pooling, and the run functions the table in nn.c lists.
 */
#ifndef MCP_OPS_REF_NN_UTIL_H
#define MCP_OPS_REF_NN_UTIL_H

#include "ops/ops.h"

/* Spatial rank limit for Conv / pooling (N and C excluded). */
#define MCP__NN_MAX_SPATIAL (MCP_MAX_RANK - 2)

/* ---- element buffers ----
 * Each load returns a fresh buffer of numel elements (at least one slot is
 * allocated so an empty tensor still yields a non-NULL pointer), owned by
 * the caller (mcp_free). NULL means out of memory. */
double *mcp__nn_load_f64(const mcp_tensor *t);
int64_t *mcp__nn_load_i64(const mcp_tensor *t);
/* Reads / writes element i with the dtype's own conversion rules. */
double mcp__nn_get_f64(const mcp_tensor *t, int64_t i);
int64_t mcp__nn_get_i64(const mcp_tensor *t, int64_t i);
void mcp__nn_set_f64(mcp_tensor *t, int64_t i, double v);
void mcp__nn_set_i64(mcp_tensor *t, int64_t i, int64_t v);
/* Writes numel values into t (converted to its dtype). */
void mcp__nn_store_f64(mcp_tensor *t, const double *v);
void mcp__nn_store_i64(mcp_tensor *t, const int64_t *v);

/* Float dtypes this family computes in double. */
bool mcp__nn_is_float(mcp_dtype d);

/* ---- spatial attributes ----
 * The geometry of a convolution or pooling window over nd spatial dims. */
typedef struct mcp__nn_geom {
    int nd;
    int64_t in[MCP__NN_MAX_SPATIAL];
    int64_t kernel[MCP__NN_MAX_SPATIAL];
    int64_t stride[MCP__NN_MAX_SPATIAL];
    int64_t dil[MCP__NN_MAX_SPATIAL];
    int64_t pad_begin[MCP__NN_MAX_SPATIAL];
    int64_t pad_end[MCP__NN_MAX_SPATIAL];
    int64_t out[MCP__NN_MAX_SPATIAL];
} mcp__nn_geom;

/* Flags for mcp__nn_geom_init. */
enum {
    MCP__NN_GEOM_CEIL = 1,      /* honour the ceil_mode attribute */
    MCP__NN_GEOM_DILATIONS = 2, /* honour the dilations attribute */
    MCP__NN_GEOM_NO_OUT = 4,    /* parse only; leave auto_pad and out to the caller */
};

/*
 * Fills g from the node's kernel_shape (or `kernel` when kernel_shape is
 * absent; may be NULL), strides, dilations, pads and auto_pad, for input X of
 * rank nd + 2, and computes the output spatial size the way Conv and the
 * pooling ops define it. Fails with the error set on bad attributes.
 */
mcp_status mcp__nn_geom_init(mcp_kernel_ctx *ctx, const mcp_tensor *x, const int64_t *kernel,
                             int flags, mcp__nn_geom *g);

/* Product of dims[0..n) (non-negative), saturating at INT64_MAX. */
int64_t mcp__nn_prod(int n, const int64_t *dims);
/* a * b for non-negative a, b, saturating at INT64_MAX. */
int64_t mcp__nn_mul_sat(int64_t a, int64_t b);
/* Scratch for count elements of elem bytes (at least one element); NULL when
 * out of memory or when the size does not fit. Free with mcp_free. */
void *mcp__nn_alloc(int64_t count, size_t elem);


/* ---- batched matrix product (MatMul semantics) ----
 * A [batch_a..., M, K] times B [batch_b..., K, N] with numpy broadcasting of
 * the batch dims; 1-D operands are promoted (A to [1, K], B to [K, 1]). */
typedef struct mcp__nn_mm {
    int64_t m, k, n;
    int rbatch;                        /* broadcast batch rank */
    int64_t batch[MCP_MAX_RANK];
    int64_t stride_a[MCP_MAX_RANK];    /* in matrices; 0 where A broadcasts */
    int64_t stride_b[MCP_MAX_RANK];
    int64_t nbatch;                    /* output matrices */
    int64_t nbatch_a, nbatch_b;        /* matrices stored in A and B */
    int out_rank;
    int64_t out_dims[MCP_MAX_RANK];
} mcp__nn_mm;

mcp_status mcp__nn_mm_plan(mcp_kernel_ctx *ctx, const mcp_tensor *a, const mcp_tensor *b,
                           mcp__nn_mm *p);
/* Matrix index in A and in B that output matrix bi reads. */
void mcp__nn_mm_batch(const mcp__nn_mm *p, int64_t bi, int64_t *ba, int64_t *bb);
/* out: nbatch * m * n values, overwritten. The int64 variant wraps. */
void mcp__nn_mm_f64(const mcp__nn_mm *p, const double *a, const double *b, double *out);
void mcp__nn_mm_i64(const mcp__nn_mm *p, const int64_t *a, const int64_t *b, int64_t *out);

/* ---- run functions (the table in nn.c lists them) ---- */
mcp_status mcp__nn_run_conv(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_conv_transpose(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_conv_integer(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_qlinear_conv(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_deform_conv(mcp_kernel_ctx *ctx); /* nn_deform.c */

mcp_status mcp__nn_run_average_pool(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_max_pool(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_lp_pool(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_global_average_pool(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_global_max_pool(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_global_lp_pool(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_max_unpool(mcp_kernel_ctx *ctx);

mcp_status mcp__nn_run_roi_align(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_grid_sample(mcp_kernel_ctx *ctx);

mcp_status mcp__nn_run_matmul(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_gemm(mcp_kernel_ctx *ctx);

mcp_status mcp__nn_run_quantize_linear(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_qlinear_add(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_qlinear_conv_add(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_dequantize_linear(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_dynamic_quantize_linear(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_matmul_integer(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_matmul_integer_scaled(mcp_kernel_ctx *ctx);
mcp_status mcp__nn_run_qlinear_matmul(mcp_kernel_ctx *ctx);

#endif
