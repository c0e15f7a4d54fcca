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
#include <pthread.h>
#include <stdatomic.h>

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
/* mcp__dnnl_static_dims with unknown dims taken as 1 (false only when the
 * rank is unknown). */
bool mcp__dnnl_dims_or_one(const mcp_node *node, const mcp_graph *graph, int i, int64_t *dims);
/* Reads ints attribute `name` into out when present: exactly `want`
 * values, each in [min, INT32_MAX]. True when absent (out untouched). */
bool mcp__dnnl_attr_ints(const mcp_node *node, const char *name, int want, int64_t min, int64_t *out);
/* True when every attribute of node is named in `names` (NULL-terminated). */
bool mcp__dnnl_attrs_within(const mcp_node *node, const char *const *names);

/* Sets err from a failed oneDNN call; returns UNSUPPORTED for
 * dnnl_unimplemented, OUT_OF_MEMORY or INTERNAL otherwise. */
mcp_status mcp__dnnl_fail(mcp_err *err, dnnl_status_t s, const char *what);
/* The process-wide CPU engine (created on first use, never destroyed). NULL
 * when oneDNN cannot create one. */
dnnl_engine_t mcp__dnnl_engine(void);
/* Creates primitive attributes with a user-managed scratchpad. oneDNN's
 * library scratchpad is shared, and primitives using it must run on the
 * thread that created them; ours run on whatever thread runs the session. */
dnnl_status_t mcp__dnnl_attr_create(dnnl_primitive_attr_t *attr);
/* Small problems are built and run on one thread: splitting them costs
 * more in fork, join and imbalance than it gains. mcp__dnnl_serial_begin
 * sets this thread's OpenMP budget to 1 when macs < below and returns the
 * budget to restore (0: unchanged); primitives must be built and run under
 * the same budget. MatMul/Gemm: under 1M multiply-adds (the MLP's layers at
 * batch 1). Conv: under 256K (EfficientNet's squeeze-and-excitation convs;
 * depthwise convs of 0.4M at 7x7 still gained from a second thread). */
#define MCP_DNNL_SERIAL_MM_MACS (1 << 20)
#define MCP_DNNL_SERIAL_CONV_MACS (1 << 18)
int mcp__dnnl_serial_begin(int64_t macs, int64_t below);
void mcp__dnnl_serial_end(int prev);
/* Runs prim (nargs <= 7, built with mcp__dnnl_attr_create) on a fresh stream
 * with a scratchpad allocated for this call, and waits for it. */
mcp_status mcp__dnnl_run(dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args,
                         mcp_err *err);
/* mcp__dnnl_run with the scratchpad in the kernel's scratch slot 0 and the
 * error prefixed by the kernel's node. */
mcp_status mcp__dnnl_execute(mcp_kernel_ctx *ctx, dnnl_primitive_t prim, int nargs,
                             const dnnl_exec_arg_t *args);
/* Makes a memory object of md over caller-owned data (read-only use allowed). */
mcp_status mcp__dnnl_wrap(mcp_kernel_ctx *ctx, const dnnl_memory_desc_t *md, const void *data,
                          dnnl_memory_t *out);
/* Creates a reorder primitive between two descriptors of one tensor. */
dnnl_status_t mcp__dnnl_reorder_create(const dnnl_memory_desc_t *from,
                                       const dnnl_memory_desc_t *to, dnnl_primitive_t *out);

/*
 * A oneDNN memory format as a tensor format (see mcp_format): tensors a
 * oneDNN kernel writes in a blocked layout carry one, owned by the kernel's
 * state. `is_plain` marks a descriptor equal to the plain row-major one, for
 * which kernels write plain tensors and no format is attached.
 */
typedef struct mcp_dnnl_format {
    mcp_format base;
    dnnl_memory_desc_t md, plain_md;
    /* md -> plain_md, built on first use (most formats never leave the
     * oneDNN kernels; building each at load cost 1.5 ms of ResNet-50's). */
    _Atomic(dnnl_primitive_t) to_plain;
    bool is_plain;
} mcp_dnnl_format;

/* oneDNN's data type for d; dnnl_data_type_undef where it has none. */
dnnl_data_type_t mcp__dnnl_dt(mcp_dtype d);
/* Plain row-major descriptor for (rank, dims): f32, or of type dt. */
dnnl_status_t mcp__dnnl_plain_md(dnnl_memory_desc_t *md, int rank, const int64_t *dims);
dnnl_status_t mcp__dnnl_plain_md_dt(dnnl_memory_desc_t *md, int rank, const int64_t *dims, dnnl_data_type_t dt);
/* Initializes f for md, a layout of the tensor (rank, dims) of md's type. */
mcp_status mcp__dnnl_format_init(mcp_dnnl_format *f, const dnnl_memory_desc_t *md, int rank,
                                 const int64_t *dims, mcp_err *err);
void mcp__dnnl_format_release(mcp_dnnl_format *f);
/* The format to attach to an output in f's layout: NULL when it is plain. */
const mcp_format *mcp__dnnl_format_of(const mcp_dnnl_format *f);
/* The descriptor of t's data: its oneDNN format, or plain. False when t
 * carries a format that is not oneDNN's (never, today) or a bad shape. */
bool mcp__dnnl_tensor_md(const mcp_tensor *t, dnnl_memory_desc_t *md);
/* A descriptor for the tensor (rank, dims) of ref's type in the same layout family
 * as ref (plain, channels-last, or channel-blocked by 16/8/4); false when
 * ref's layout is none of those. */
bool mcp__dnnl_like(const dnnl_memory_desc_t *ref, int rank, const int64_t *dims, dnnl_memory_desc_t *out);
/* Writes t (any layout) into dst laid out as `to`. */
mcp_status mcp__dnnl_reorder_into(mcp_kernel_ctx *ctx, const mcp_tensor *t,
                                  const dnnl_memory_desc_t *to, void *dst);

/*
 * A small per-node cache of primitives keyed by their inputs' descriptors
 * (shape and layout), for kernels whose inputs arrive in whatever layout the
 * producer chose. Entries [0, n) never change once published; n is read and
 * written under lock; primitives execute outside it. Past MCP_DNNL_CACHE
 * entries a primitive is built per call into the caller's `local`.
 */
#define MCP_DNNL_KEYS 4
#define MCP_DNNL_CACHE 4

typedef struct mcp_dnnl_entry {
    int n_keys;
    dnnl_memory_desc_t keys[MCP_DNNL_KEYS];
    int threads; /* the OpenMP budget it was built under: part of the key */
    dnnl_primitive_t prim;
    mcp_dnnl_format dst;
} mcp_dnnl_entry;

typedef struct mcp_dnnl_cache {
    pthread_mutex_t lock;
    int n;
    mcp_dnnl_entry e[MCP_DNNL_CACHE];
} mcp_dnnl_cache;

/* Builds e->prim and e->dst for e->keys (filled by the cache). */
typedef mcp_status (*mcp_dnnl_build_fn)(const void *state, mcp_dnnl_entry *e, mcp_err *err);

void mcp__dnnl_cache_init(mcp_dnnl_cache *c);
void mcp__dnnl_cache_release(mcp_dnnl_cache *c);
void mcp__dnnl_entry_release(mcp_dnnl_entry *e);
/* The entry for keys, built on first use; when it is `local` the caller
 * releases it. Errors are prefixed with the node. */
mcp_status mcp__dnnl_cache_get(mcp_kernel_ctx *ctx, mcp_dnnl_cache *c, const void *state,
                               const dnnl_memory_desc_t *keys, int n_keys,
                               mcp_dnnl_build_fn build, mcp_dnnl_entry *local,
                               const mcp_dnnl_entry **out);

/* Executes e's primitive with n memory arguments (arg id, descriptor,
 * data), then releases e when it is the per-call `local` one. */
mcp_status mcp__dnnl_exec_entry(mcp_kernel_ctx *ctx, const mcp_dnnl_entry *e, mcp_dnnl_entry *local, int n,
                                const int *ids, const dnnl_memory_desc_t *const *mds, void *const *data);
/* Runs entry e over the n inputs `in` (laid out as md, passed as arg_ids)
 * into a new output 0 in e's destination layout, then releases e when it
 * is the caller's `local`. */
mcp_status mcp__dnnl_run_entry(mcp_kernel_ctx *ctx, const mcp_dnnl_entry *e, mcp_dnnl_entry *local, int n,
                               const mcp_tensor *const *in, const dnnl_memory_desc_t *md, const int *arg_ids);

/*
 * The reference kernel for a node, for the shapes a oneDNN kernel declines
 * at run time. mcp__dnnl_fallback_run makes the inputs plain (in place, as
 * the executor would) and runs it.
 */
typedef struct mcp_dnnl_fallback {
    const mcp_kernel_def *k;
    void *state;
} mcp_dnnl_fallback;

mcp_status mcp__dnnl_fallback_init(mcp_dnnl_fallback *fb, const mcp_node *node,
                                   const mcp_graph *graph, mcp_err *err);
void mcp__dnnl_fallback_release(mcp_dnnl_fallback *fb);
mcp_status mcp__dnnl_fallback_run(mcp_kernel_ctx *ctx, const mcp_dnnl_fallback *fb);

/* The state every cache-and-fallback kernel starts with (its first member):
 * cached_init sets both up (always leaving the cache valid for release). */
typedef struct mcp_dnnl_cached {
    mcp_dnnl_cache cache;
    mcp_dnnl_fallback fb;
} mcp_dnnl_cached;

mcp_status mcp__dnnl_cached_init(mcp_dnnl_cached *c, const mcp_node *node, const mcp_graph *graph,
                                 mcp_err *err);
void mcp__dnnl_cached_release(mcp_dnnl_cached *c);
/* The release function of kernels whose state starts with mcp_dnnl_cached
 * and owns nothing else. */
void mcp__dnnl_cached_free(void *state);

/* Creates e->prim from an operation descriptor (default attributes with a
 * user scratchpad) and e->dst from its destination layout for the logical
 * shape (rank, dims). */
mcp_status mcp__dnnl_entry_build(const void *op_desc, mcp_dnnl_entry *e, int rank, const int64_t *dims,
                                 const char *what, mcp_err *err);

/*
 * Weights from an initializer, reordered once per node into the layout the
 * first primitive built for the node preferred. Primitives built later (other
 * input shapes) that prefer the same layout share it; one that prefers
 * another packs its own copy (asking for the node's layout instead can land
 * on oneDNN's reference kernels).
 */
typedef struct mcp_dnnl_packed {
    bool have;
    dnnl_memory_desc_t md;
    void *data; /* owned, unless borrowed */
    /* Borrowed from a compiled model (mcp__dnnl_packed_adopt). Until a
     * primitive built here chose exactly md (`verified`), nothing is
     * reordered from it: the file's descriptor is not trusted before. */
    bool borrowed, verified;
    size_t borrowed_len; /* the file's byte count, checked against md's once verified */
} mcp_dnnl_packed;

/* Takes node's compiled packed weights (slot 0), when the graph has them
 * with a descriptor of oneDNN's size; the plain weights are then not
 * needed (the file may not hold them). Nothing reads the descriptor until
 * mcp__dnnl_weights_for verifies it (and the data's size). */
bool mcp__dnnl_packed_adopt(mcp_dnnl_packed *pk, const mcp_graph *graph, const mcp_node *node);
/* After a node's load-time build: compiled weights the build did not
 * verify are dropped when the plain ones are there (they serve instead),
 * else the load fails (FAILED_PRECONDITION; the session then loads the
 * embedded ONNX). *plain_gone follows. */
mcp_status mcp__dnnl_packed_settle(mcp_dnnl_packed *pk, bool have_plain, bool *plain_gone, mcp_err *err);
/* What pk holds, for compiled models (mcp_kernel_def.packed_weights). */
bool mcp__dnnl_packed_view(const mcp_dnnl_packed *pk, mcp_prepacked *out);

/* Reorders the weights (plain_md over plain) into a new buffer laid out as
 * `want`, and records it in pk. */
mcp_status mcp__dnnl_pack(mcp_dnnl_packed *pk, const dnnl_memory_desc_t *plain_md, const void *plain,
                          const dnnl_memory_desc_t *want, mcp_err *err);
void mcp__dnnl_packed_release(mcp_dnnl_packed *pk);
/* Weights laid out as wmd for one primitive: the plain weights when wmd is
 * their layout (and they are still there), the node's packed copy (packed
 * now when the node has none), or a copy in `own`, reordered from the plain
 * weights or, once those are gone, from the packed copy. */
mcp_status mcp__dnnl_weights_for(mcp_dnnl_packed *node_pk, bool plain_gone, const dnnl_memory_desc_t *plain_md,
                                 const void *plain, const dnnl_memory_desc_t *wmd, mcp_dnnl_packed *own,
                                 const void **data, mcp_err *err);
/* int8 kernels (QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger).
 * They run only where the CPU has VNNI (mcp__dnnl_has_vnni): without it
 * oneDNN multiplies u8 by s8 into saturating 16-bit pairs, or halves the
 * weights to avoid that, and results would depend on the CPU. */
bool mcp__dnnl_has_vnni(void);
bool mcp__dnnl_is_int8(mcp_dtype d);
/*
 * bfloat16 compute (the session option bf16, graph->bf16): float32 Conv,
 * FusedConv, MatMul, Gemm and their fused forms run with bf16 weights and
 * activations and float32 accumulation, only where the CPU has bf16 dot
 * products (mcp__dnnl_has_bf16). Their outputs stay bf16 in a oneDNN
 * format (plain form float32), so the next convolution, pooling or
 * elementwise kernel reads them without a conversion; kernels that do not
 * take bf16 see float32 (the executor's or their own conversion).
 */
bool mcp__dnnl_has_bf16(void);
/* Whether node's float32 kernel computes in bf16 (see above). */
bool mcp__dnnl_bf16_for(const mcp_graph *graph);
/* A positive, finite float32 initializer of 1 value, or of n when n > 1. */
bool mcp__dnnl_scale_ok(const mcp_tensor *t, int64_t n);
/* Input i is absent or a one-value tensor of type dt. */
bool mcp__dnnl_zp_input_ok(const mcp_node *node, const mcp_graph *graph, int i, mcp_dtype dt);
/* A zero point's value as int32 (z NULL: 0); false unless it is one value
 * of oneDNN type dt. */
bool mcp__dnnl_zp_value(const mcp_tensor *z, dnnl_data_type_t dt, int32_t *out);

/* Post-ops for an internal op's `activation` / `activation_params`
 * (see graph.h). Returns false when the activation is not one oneDNN runs;
 * with po NULL it only checks. */
bool mcp__dnnl_append_activation(const mcp_node *node, dnnl_post_ops_t po);

/* Kernels and their capability checks (dnnl_conv.c, dnnl_matmul.c). */
extern const mcp_kernel_def mcp__dnnl_conv_kernel;
extern const mcp_kernel_def mcp__dnnl_gemm_kernel;
extern const mcp_kernel_def mcp__dnnl_matmul_kernel;
extern const mcp_kernel_def mcp__dnnl_fused_conv_kernel;
extern const mcp_kernel_def mcp__dnnl_qlinear_conv_kernel;
extern const mcp_kernel_def mcp__dnnl_conv_integer_kernel;
extern const mcp_kernel_def mcp__dnnl_qlinear_conv_add_kernel;
extern const mcp_kernel_def mcp__dnnl_qlinear_matmul_kernel;
extern const mcp_kernel_def mcp__dnnl_matmul_integer_kernel;
extern const mcp_kernel_def mcp__dnnl_matmul_integer_scaled_kernel;
extern const mcp_kernel_def mcp__dnnl_fused_gemm_kernel;
extern const mcp_kernel_def mcp__dnnl_fused_matmul_kernel;
extern const mcp_kernel_def mcp__dnnl_pool_kernel;
extern const mcp_kernel_def mcp__dnnl_binary_kernel;
extern const mcp_kernel_def mcp__dnnl_concat_kernel;
bool mcp__dnnl_pool_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_binary_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_concat_supported(const mcp_node *node, const mcp_graph *graph);
extern const mcp_kernel_def mcp__dnnl_deconv_kernel;
bool mcp__dnnl_deconv_supported(const mcp_node *node, const mcp_graph *graph);
extern const mcp_kernel_def mcp__dnnl_eltwise_kernel;
extern const mcp_kernel_def mcp__dnnl_layernorm_kernel;
extern const mcp_kernel_def mcp__dnnl_softmax_kernel;
extern const mcp_kernel_def mcp__dnnl_transpose_kernel;
bool mcp__dnnl_eltwise_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_layernorm_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_softmax_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_transpose_supported(const mcp_node *node, const mcp_graph *graph);
extern const mcp_kernel_def mcp__dnnl_attention_kernel;
bool mcp__dnnl_attention_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_conv_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_qmatmul_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_gemm_supported(const mcp_node *node, const mcp_graph *graph);
bool mcp__dnnl_matmul_supported(const mcp_node *node, const mcp_graph *graph);

#endif
