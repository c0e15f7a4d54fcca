/*
 * libmcp: the MCP 2026 inference engine, embeddable without the server.
 *
 *   mcp_session *s;
 *   char err[512];
 *   mcp_session_options o = mcp_session_options_default();
 *   if (mcp_session_create_from_file("model.onnx", &o, &s, err, sizeof err)) { puts(err); }
 *   mcp_value *x = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, dims, data, err, sizeof err);
 *   const char *names[] = {"input"};
 *   mcp_value *y = NULL;
 *   mcp_session_run(s, 1, names, &x, 0, NULL, &y, err, sizeof err);
 *
 * Ownership: every mcp_value returned to the caller belongs to the caller
 * (mcp_value_destroy). A session is immutable after creation and may be run
 * from any number of threads at once. Destroy functions accept NULL.
 */
#ifndef MCP_MCP_H
#define MCP_MCP_H

#include <stddef.h>
#include <stdint.h>

#include "mcp/dtype.h"
#include "mcp/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MCP_VERSION_STRING "0.1.0"

typedef struct mcp_session mcp_session;
typedef struct mcp_value mcp_value;

typedef struct mcp_session_options {
    int threads;         /* intra-op threads per run; 0 = every online core */
    const char *backend; /* "auto" (default), "ref" or "dnnl"; the MCP_BACKEND environment variable overrides NULL */
    int no_graph_passes; /* nonzero: run the graph as written (no fusion, folding, dead-code removal) */
    int profile;         /* nonzero: time every node of every run (see mcp_session_profile) */
    /* nonzero: in QDQ models, a quantized Conv whose result only feeds a
     * quantized residual Add adds before rounding to 8 bits (one int8
     * convolution with a sum; about 20% faster on ResNet-50). Results then
     * differ from the graph as written by up to half a quantization step
     * of the skipped rounding, and by the clipping it would have done. */
    int fuse_quantized_sums;
    /* nonzero: float32 convolutions and matrix products compute in bfloat16
     * (bf16 weights and activations, float32 accumulation), where the CPU
     * has bf16 dot products (avx512_bf16, AMX); elsewhere the option has no
     * effect. mcp_session_precision says which applied. Results differ from
     * float32 by bfloat16's rounding (8 significant bits). */
    int bf16;
    /* nonzero: when other work takes some of the cores (neighbours, CPU
     * limits), runs drop to half the threads while that is faster, and go
     * back when the cores are free again (measured per input shape; see
     * docs/architecture.md). Results may then differ in the last bits, as
     * between thread counts. mcp2026-server sets it (--adaptive-threads). */
    int adaptive_threads;
    /* Largest tensor a node may produce, in bytes (0: no limit beyond the
     * engine's own, 64 TiB). A node whose output would be larger fails the
     * run with a message naming it: a model whose output sizes follow input
     * values (ConstantOfShape, Expand, StringSplit, ...) cannot be made to
     * allocate what the caller chooses. mcp2026-server sets it
     * (--max-tensor-bytes). */
    size_t max_tensor_bytes;
} mcp_session_options;

mcp_session_options mcp_session_options_default(void);

/* Loads and prepares a model: import, shape checks, kernel resolution. On
 * failure *out is NULL and err holds a message naming the node or tensor. */
mcp_status mcp_session_create_from_file(const char *path, const mcp_session_options *opts,
                                        mcp_session **out, char *err, size_t err_len);
/* The buffer is only read during the call. Models with external data need a
 * folder: pass it in base_dir (or NULL). */
mcp_status mcp_session_create_from_memory(const void *buf, size_t len, const char *base_dir,
                                          const mcp_session_options *opts, mcp_session **out,
                                          char *err, size_t err_len);
void mcp_session_destroy(mcp_session *s);
/* Frees the session's idle run contexts (their arenas, scratch buffers and
 * memory plans; see docs/architecture.md). The next runs rebuild them: the
 * first run of each input shape plans again. Safe at any time, from any
 * thread; runs in flight keep theirs. */
void mcp_session_trim(mcp_session *s);

/* Time spent in one node of the optimized graph, summed over the runs since
 * the session was created or last reset. A node's time includes converting
 * its inputs out of a backend's blocked layout; subgraph nodes count in the
 * node that runs them. The strings live as long as the session. */
typedef struct mcp_node_profile {
    const char *name;
    const char *op_type; /* fused nodes show the internal op, e.g. FusedConv */
    const char *backend; /* "dnnl" or "ref" */
    uint64_t calls;
    double total_ms;
} mcp_node_profile;

/* Fills out[0 .. min(cap, count)) in graph order and returns count, the
 * number of nodes the session runs; -1 when the session was not created
 * with options.profile. Safe while runs are in flight (their nodes may be
 * partly counted). */
int mcp_session_profile(const mcp_session *s, mcp_node_profile *out, int cap);
void mcp_session_profile_reset(const mcp_session *s);

/* Compiles the ONNX model at onnx_path into a .mcpir file at out_path
 * (through a temporary file renamed into place): the optimized graph, its
 * weights packed in the layouts this machine's kernels chose (64-byte
 * aligned), a stamp of the engine, the backend and CPU features, the
 * threads and the options (bf16, fuse_quantized_sums) it was packed for,
 * and the ONNX bytes themselves. mcp_session_create_from_file maps such a
 * file and copies nothing when the stamp matches the session's machine and
 * options; otherwise it compiles the embedded ONNX again and
 * mcp_session_load_note says so. A model whose tensors live in external
 * data files is refused (the fallback would need them beside every copy).
 * The file stays mapped while the session lives: replace a compiled model
 * by renaming a new file over it, never by writing into it. */
#define MCP_COMPILED_MAGIC "\x89MCPIR\r\n" /* the first 8 bytes of a .mcpir */
mcp_status mcp_compile(const char *onnx_path, const char *out_path, const mcp_session_options *opts, char *err,
                       size_t err_len);
/* NULL, or what the load did other than asked (a compiled model loaded
 * from its embedded ONNX, and why). Lives as long as the session. */
const char *mcp_session_load_note(const mcp_session *s);

/* "bf16" when options.bf16 took effect (some node computes in bfloat16),
 * else "fp32". Quantized models report fp32 here: their int8 operators are
 * the model's own. */
const char *mcp_session_precision(const mcp_session *s);

typedef enum mcp_value_kind_public {
    MCP_KIND_TENSOR = 0,
    MCP_KIND_SEQUENCE = 1,
    MCP_KIND_NONE = 2, /* an empty optional */
} mcp_value_kind_public;

/* Static description of a graph input or output. dims[i] is -1 for a
 * dimension unknown until run time (dim_params[i] then names it, or NULL);
 * rank is -1 when unknown. Pointers stay valid while the session lives. */
typedef struct mcp_io_info {
    const char *name;
    int kind;          /* mcp_value_kind_public */
    int optional;      /* nonzero for optional(...) types */
    mcp_dtype dtype;   /* tensor dtype, or element dtype of a sequence */
    int rank;
    const int64_t *dims;
    const char *const *dim_params;
} mcp_io_info;

int mcp_session_input_count(const mcp_session *s);
int mcp_session_output_count(const mcp_session *s);
mcp_status mcp_session_input_info(const mcp_session *s, int i, mcp_io_info *info);
mcp_status mcp_session_output_info(const mcp_session *s, int i, mcp_io_info *info);

/*
 * Runs the model. Inputs are matched by name; every graph input without a
 * default must be given. out_names selects outputs (NULL = all, in graph
 * order, n_outputs then ignored); out_values receives one new value per
 * selected output, owned by the caller.
 */
mcp_status mcp_session_run(const mcp_session *s, int n_inputs, const char *const *names,
                           mcp_value *const *inputs, int n_outputs, const char *const *out_names,
                           mcp_value **out_values, char *err, size_t err_len);

/* Creates a tensor value holding a copy of data (numel * element size bytes;
 * for MCP_DTYPE_STRING, data is an array of const char *). */
mcp_value *mcp_value_create_tensor(mcp_dtype dtype, int rank, const int64_t *dims,
                                   const void *data, char *err, size_t err_len);
void mcp_value_destroy(mcp_value *v);
int mcp_value_get_kind(const mcp_value *v);
/* Tensor accessors: pointers stay valid until the value is destroyed; any
 * out pointer may be NULL when that part is not wanted. */
mcp_status mcp_value_get_tensor(const mcp_value *v, mcp_dtype *dtype, int *rank,
                                const int64_t **dims, const void **data);
int64_t mcp_value_sequence_length(const mcp_value *v);

#ifdef __cplusplus
}
#endif
#endif
