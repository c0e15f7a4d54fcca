/*
 * ops: the kernel interface and registry.
 *
 * A kernel is a small versioned vtable chosen once per node at load
 * (mcp_ops_resolve). At run time the executor calls `run` with a context
 * that holds the node's input values and empty output values.
 *
 * Ownership: input values belong to the executor and are read-only for the
 * kernel. Output values are created empty by the executor (one for every
 * output slot, including omitted optional outputs, whose results are
 * discarded); the kernel fills them through mcp_kout() or by writing the
 * mcp_value directly (sequences, optionals). On failure the kernel returns a
 * status after mcp_kfail(); the executor frees partially written outputs.
 *
 * Kernels keep no mutable state between runs: one loaded session may run on
 * several threads at once. Per-node constant state built at load (prepacked
 * weights) lives in `state`, owned by the session.
 *
 * Kernels never call into the engine: what they need of whoever runs them
 * (planned memory, scratch, subgraphs) comes through the host vtable in the
 * context, which the executor and constant folding each fill. What a kernel
 * can do (run in place, read blocked layouts, give up plain weights) is
 * declared in its table entry, where the engine reads it.
 */
#ifndef MCP_OPS_H
#define MCP_OPS_H

#include "base/base.h"
#include "graph/graph.h"
#include "tensor/tensor.h"

#define MCP_KERNEL_API_VERSION 1

typedef struct mcp_kernel_ctx mcp_kernel_ctx;

/* What the caller of a kernel offers it. Every entry may be NULL (constant
 * folding has no memory plan and runs no subgraphs); the mcp_k* helpers
 * below then fall back to the heap or fail with a message. `self` is the
 * host's own frame, passed back to each entry. */
typedef struct mcp_kernel_host {
    /* Planned memory for output i of the running node, or NULL. */
    void *(*output_buffer)(void *self, const mcp_node *n, int i, size_t nbytes);
    /* Scratch buffer `slot` of at least nbytes, or NULL. */
    void *(*scratch)(void *self, int slot, size_t nbytes);
    /* See mcp_knote_concat_inplace. */
    void (*note_concat)(void *self);
    /* Runs an attribute subgraph of the running node (mcp_kernel_run_subgraph). */
    mcp_status (*run_subgraph)(void *self, const mcp_kernel_ctx *ctx, const mcp_graph *g,
                               mcp_value *const *inputs, mcp_value **outputs);
} mcp_kernel_host;

struct mcp_kernel_ctx {
    const mcp_node *node;
    int opset;                /* opset of the node's domain in the model */
    int n_inputs;
    mcp_value *const *inputs; /* NULL entries for omitted optional inputs */
    int n_outputs;
    mcp_value **outputs;      /* never NULL entries */
    void *state;              /* from prepare, or NULL */
    mcp_err *err;
    const mcp_kernel_host *host; /* NULL: nothing offered */
    void *host_self;
    int threads;              /* intra-op thread budget (>= 1) */
    size_t max_tensor_bytes;  /* largest output mcp_kout allocates (0: no limit) */
    /* Set by mcp_kout when it refused an output for that limit: the run's
     * status is then this one, whatever the kernel returned (kernels return
     * OUT_OF_MEMORY when mcp_kout gives NULL). */
    mcp_status refused;
};

typedef mcp_status (*mcp_kernel_run_fn)(mcp_kernel_ctx *ctx);

typedef struct mcp_kernel_def {
    const char *domain;  /* "" for the default ONNX domain */
    const char *op_type;
    int since_version;   /* first opset this entry handles */
    int until_version;   /* last opset it handles, 0 = open-ended */
    mcp_kernel_run_fn run;
    /* Optional: validates attributes and statically known input types at load
     * (return UNSUPPORTED or INVALID_MODEL with a message). */
    mcp_status (*check)(const mcp_node *node, const mcp_graph *graph, mcp_err *err);
    /* Optional: builds constant per-node state at load (e.g. prepacked
     * weights). `release` frees it. */
    mcp_status (*prepare)(const mcp_node *node, const mcp_graph *graph, void **state,
                          mcp_err *err);
    void (*release)(void *state);

    /* ---- capabilities (zero: none) ---- */
    /* In-place execution. Bit j set: the executor may give output 0 the
     * very storage of input j (same pointer, same byte size) when no later
     * node reads input j's value; the kernel then computes correctly with
     * y->data == x->data. mcp_kout does not zero an output that aliases an
     * input. */
    unsigned inplace_inputs;
    /* The kernel reads tensors in a backend format (tensor.format set), not
     * only plain ones; for other kernels the executor converts such inputs
     * first. */
    bool reads_formats;
    /* Whether the prepared state no longer reads the initializer feeding
     * input `input` (it holds its own packed copy). With `commit` the kernel
     * records that the session is about to free that data. NULL: never. */
    bool (*release_plain_input)(void *state, int input, bool commit);
    /* The packed weights the prepared state holds for `slot` (0 first), for
     * compiled models (node and slot of *out unset); false when none. A
     * kernel that offers them adopts a compiled model's in prepare
     * (mcp_graph_prepacked) when they are exactly the layout it chose. */
    bool (*packed_weights)(const void *state, int slot, mcp_prepacked *out);
    /* Whether the prepared state computes in bfloat16 (graph->bf16 applied;
     * see the session option bf16). NULL: never. */
    bool (*computes_bf16)(const void *state);
    /* Which narrow element types (ONNX 17-26: float8, float8e8m0, float4e2m1,
     * int4 / uint4, int2 / uint2; mcp_dtype_is_narrow) the kernel takes in or
     * out. MCP_NARROW_NONE: a node that a narrow value enters or leaves is
     * refused at load, naming it (any other loop would read the codes as
     * whatever it assumes); MCP_NARROW_BYTES: the one-byte types;
     * MCP_NARROW_ALL: the packed 4- and 2-bit ones too (the kernel moves a
     * tensor's bytes whole or unpacks them itself). */
    unsigned char narrow_types;
} mcp_kernel_def;

#define MCP_NARROW_NONE 0
#define MCP_NARROW_BYTES 1
#define MCP_NARROW_ALL 2

/* Table entries in the order of the fields above, capabilities left
 * out (zero); MCP_KERNEL_FIELDS for an entry that adds some after it. */
#define MCP_KERNEL_FIELDS(dom, op, since, until, run_, check_, prepare_, release_)                   \
    .domain = (dom), .op_type = (op), .since_version = (since), .until_version = (until), .run = (run_), \
    .check = (check_), .prepare = (prepare_), .release = (release_)
#define MCP_KERNEL_ENTRY(dom, op, since, until, run_, check_, prepare_, release_)                    \
    {MCP_KERNEL_FIELDS(dom, op, since, until, run_, check_, prepare_, release_)}

/* The capabilities of node n's chosen kernel (see mcp_kernel_def). */
bool mcp_kernel_release_plain_input(const mcp_node *n, int input, bool commit);
unsigned mcp_kernel_inplace_inputs(const mcp_node *n);

/* Called by a Concat-like kernel whose output 0 holds, in this run, its
 * inputs' bytes one after another (input j a contiguous range, in input
 * order, nothing else). When the run records sizes, the memory plan may
 * then place every input at its range of the output's block: the producers
 * write there, and the kernel must skip copying an input whose data already
 * is at its range. */
void mcp_knote_concat_inplace(mcp_kernel_ctx *ctx);

/* A backend: a set of kernels with a priority and a capability query. The
 * reference backend supports every op and is always consulted last. */
typedef struct mcp_backend {
    int api_version; /* MCP_KERNEL_API_VERSION */
    const char *name;
    int priority;    /* higher wins */
    /* Returns the kernel for the node or NULL when this backend can't run it. */
    const mcp_kernel_def *(*supports)(const mcp_node *node, const mcp_graph *graph);
    /* Optional: what the layouts of this backend's packed weights depend on
     * (library version, CPU features), for compiled models' stamps. */
    void (*stamp)(char *buf, size_t cap);
} mcp_backend;

/* Finds the kernel for a node among the enabled backends ("auto" = all,
 * "ref" = reference only); *backend_name (when not NULL) receives the
 * chosen backend's name. On failure the message names the node, op type,
 * domain and opset. */
mcp_status mcp_ops_resolve(const mcp_node *node, const mcp_graph *graph, const char *backend,
                           const mcp_kernel_def **out, const char **backend_name, mcp_err *err);

/* Every backend's stamp, "; "-separated, into buf. */
void mcp_ops_stamp(char *buf, size_t cap);

/* Whether node's prepared kernel computes in bfloat16. */
bool mcp_ops_node_bf16(const mcp_node *node);

/* The reference backend, and the oneDNN backend when built with it. */
extern const mcp_backend mcp__ref_backend;
#ifdef MCP_WITH_DNNL
extern const mcp_backend mcp__dnnl_backend;
#endif

/* ---- helpers for kernel authors ---- */

/* Input i as a tensor; NULL when omitted (or when it is not a tensor). */
const mcp_tensor *mcp_kin(const mcp_kernel_ctx *ctx, int i);
/* Allocates output i as a zero-filled tensor of the given type and shape
 * (in the run's planned memory when there is a plan for it). Returns NULL
 * with the error set on failure. */
mcp_tensor *mcp_kout(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank, const int64_t *dims);
/* As mcp_kout, for a kernel that writes every element of a numeric output:
 * planned memory is not zeroed first (it holds stale data). */
mcp_tensor *mcp_kout_uninit(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank, const int64_t *dims);
/* Temporary memory for the running kernel, valid until it returns; slots
 * 0 .. MCP_KSCRATCH_SLOTS-1 are distinct buffers. The buffers live in the
 * run's context and are reused by later runs, so steady-state runs do not
 * allocate. NULL when out of memory or outside a run (the caller then
 * allocates itself). */
#define MCP_KSCRATCH_SLOTS 2
void *mcp_kscratch(mcp_kernel_ctx *ctx, int slot, size_t nbytes);

/* Allocates output i in backend format f (f->nbytes bytes, not zeroed);
 * the logical shape is (rank, dims). NULL with the error set on failure. */
mcp_tensor *mcp_kout_format(mcp_kernel_ctx *ctx, int i, mcp_dtype dtype, int rank,
                            const int64_t *dims, const mcp_format *f);
/* Converts a tensor in a backend format to plain row-major in place. */
mcp_status mcp_tensor_make_plain(mcp_tensor *t, mcp_err *err);

/* Sets the error message prefixed with the node's name and op type, and
 * returns status. */
mcp_status mcp_kfail(mcp_kernel_ctx *ctx, mcp_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Attribute shorthands on ctx->node. */
int64_t mcp_kattr_int(const mcp_kernel_ctx *ctx, const char *name, int64_t dflt);
float mcp_kattr_float(const mcp_kernel_ctx *ctx, const char *name, float dflt);
const char *mcp_kattr_string(const mcp_kernel_ctx *ctx, const char *name, const char *dflt);
const int64_t *mcp_kattr_ints(const mcp_kernel_ctx *ctx, const char *name, int64_t *count);
const float *mcp_kattr_floats(const mcp_kernel_ctx *ctx, const char *name, int64_t *count);
const mcp_attr *mcp_kattr(const mcp_kernel_ctx *ctx, const char *name);

/*
 * Runs subgraph `g` (an attribute graph of ctx->node) with the given inputs
 * (n_in values, matching g->inputs; NULL allowed for omitted ones). Values
 * the subgraph captures from enclosing scopes are found by the host.
 * outputs must point to g->n_outputs caller-owned empty values; they receive
 * the results (moved, not shared).
 */
mcp_status mcp_kernel_run_subgraph(mcp_kernel_ctx *ctx, const mcp_graph *g, int n_in,
                                   mcp_value *const *inputs, mcp_value **outputs);

/* Below this many element operations a loop runs on the calling thread:
 * starting an OpenMP team costs a few microseconds, about what 32768 cheap
 * float operations take on one core. */
#define MCP_PAR_MIN 32768

/* Iterations per dynamically scheduled chunk for a loop whose iterations
 * each cost `per_iter` element operations: about 16384 per chunk. Chunks
 * are handed out as threads free up, so a thread that the OS preempts
 * holds back at most one chunk instead of a fixed share of the loop. */
static inline int mcp_kchunk(int64_t per_iter)
{
    if (per_iter >= 16384) return 1;
    return (int)(16384 / (per_iter > 0 ? per_iter : 1));
}

/* Threads for a kernel loop over `work` element operations: the session's
 * intra-op budget, fewer for small loops, one below MCP_PAR_MIN. */
static inline int mcp_kthreads(const mcp_kernel_ctx *ctx, int64_t work)
{
    if (ctx->threads <= 1 || work < MCP_PAR_MIN) return 1;
    int64_t most = work / (MCP_PAR_MIN / 2);
    return most < ctx->threads ? (int)most : ctx->threads;
}

/* Normalizes a possibly negative axis against rank; false if out of range. */
bool mcp_axis_normalize(int64_t axis, int rank, int *out);

#endif
