/*
 * graph: our IR (graph, node, value, attribute) and the ONNX importer.
 * The importer decodes the protobuf once; nothing downstream sees protobuf.
 */
#ifndef MCP_GRAPH_H
#define MCP_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "tensor/tensor.h"

typedef struct mcp_graph mcp_graph;

/*
 * Operators the graph passes create, in their own domain (opset 1). They
 * never appear in a model as written; `mcpctl inspect` shows the model
 * before passes.
 *
 *   FusedConv(X, W, [B], [Sum]) -> Y
 *       Conv's attributes, plus `activation` (string, absent = none) and
 *       `activation_params` (floats). Y = act(Conv(X, W, B) + Sum).
 *   FusedGemm(A, B, [C]) -> Y
 *       Gemm's attributes plus the same two. Y = act(Gemm(A, B, C)).
 *   FusedMatMul(A, B, [Bias]) -> Y
 *       B 2-D, Bias 1-D of B's columns; `activation` / `activation_params`.
 *       Y = act(MatMul(A, B) + Bias).
 *   Gelu(X) -> Y                       Y = 0.5 X (1 + erf(X / sqrt 2))
 *   LayerNormalization(X, Scale, [B]) -> Y
 *       ONNX LayerNormalization over the last axis (`axis` -1, `epsilon`).
 *   Attention(Q, K, V, [Mask]) -> Y
 *       ONNX Attention-23 without its past / present and qk outputs: float
 *       `scale`, 3-D inputs with `q_num_heads` = `kv_num_heads` = 1 or 4-D
 *       ones; a float Mask of the scores' shape or broadcast to it.
 *       Y = Softmax(scale Q K^T + Mask) V (a scaled dot-product subgraph).
 *   QLinearAdd(A, A_scale, A_zp, B, B_scale, B_zp, Y_scale, Y_zp) -> Y
 *       8-bit A and B of one shape, one scale and zero point each; int
 *       `relu` (0/1). Y = QuantizeLinear([Relu](DequantizeLinear(A) +
 *       DequantizeLinear(B)), Y_scale, Y_zp), computed as those ops do.
 *   QLinearConvAdd(X, X_scale, X_zp, W, W_scale, W_zp, Y_scale, Y_zp, [B],
 *                  S, S_scale, S_zp) -> Y
 *       QLinearConv's inputs and attributes, plus an 8-bit S of Y's shape
 *       and int `relu`: Y = QuantizeLinear([Relu](X_scale * W_scale[c] *
 *       (sum + B) + DequantizeLinear(S)), Y_scale, Y_zp), the convolution
 *       not rounded to 8 bits before the sum (a residual join after a
 *       QLinearConv whose output only the join reads).
 *   MatMulIntegerScaled(A, B, A_zp, B_zp, A_scale, B_scale, [Bias]) -> Y
 *       Y = float(MatMulInteger(A, B, A_zp, B_zp)) * (A_scale * B_scale)
 *       [+ Bias], rounded as Cast, Mul and Add round it: a dynamically
 *       quantized MatMul's tail. Scales and zero points are scalars, Bias
 *       1-D of B's columns.
 *
 * Activations and their params (MCP_ACTIVATIONS): Relu; LeakyRelu [alpha];
 * Clip [min, max]; Sigmoid; Tanh; HardSigmoid [alpha, beta]; Silu
 * (X * sigmoid(X)); Gelu (the erf form, as the Gelu op).
 */
#define MCP_DOMAIN_INTERNAL "ai.mcp2026"

/* The fused ops' activations: X(id, contract name, parameter count). The
 * one list: the passes that write `activation`, and every backend that
 * reads it, go through mcp_activation. */
#define MCP_ACTIVATIONS(X)                                                    \
    X(RELU, "Relu", 0)                                                        \
    X(LEAKYRELU, "LeakyRelu", 1)                                              \
    X(CLIP, "Clip", 2)                                                        \
    X(SIGMOID, "Sigmoid", 0)                                                  \
    X(TANH, "Tanh", 0)                                                        \
    X(HARDSIGMOID, "HardSigmoid", 2)                                          \
    X(SILU, "Silu", 0)                                                        \
    X(GELU, "Gelu", 0)

typedef enum mcp_activation {
    MCP_ACTIVATION_NONE = 0,
#define MCP__ACT_ENUM(id, name, n_params) MCP_ACTIVATION_##id,
    MCP_ACTIVATIONS(MCP__ACT_ENUM)
#undef MCP__ACT_ENUM
        MCP_ACTIVATION_COUNT
} mcp_activation;

/* A node's activation as the fused ops carry it. */
typedef struct mcp_act {
    mcp_activation kind;
    float params[2];
} mcp_act;


typedef enum mcp_attr_type {
    MCP_ATTR_UNDEFINED = 0,
    MCP_ATTR_FLOAT = 1,
    MCP_ATTR_INT = 2,
    MCP_ATTR_STRING = 3,
    MCP_ATTR_TENSOR = 4,
    MCP_ATTR_GRAPH = 5,
    MCP_ATTR_FLOATS = 6,
    MCP_ATTR_INTS = 7,
    MCP_ATTR_STRINGS = 8,
    MCP_ATTR_TENSORS = 9,
    MCP_ATTR_GRAPHS = 10,
    MCP_ATTR_SPARSE_TENSOR = 11,
    MCP_ATTR_SPARSE_TENSORS = 12,
    MCP_ATTR_TYPE_PROTO = 13,
    MCP_ATTR_TYPE_PROTOS = 14,
} mcp_attr_type;

/* A node attribute. Strings are NUL-terminated copies (s_len keeps the
 * length for binary-safe use). Arrays have `count` elements. */
typedef struct mcp_attr {
    char *name;
    mcp_attr_type type;
    float f;
    int64_t i;
    char *s;
    size_t s_len;
    mcp_tensor t;
    mcp_graph *g;
    int64_t count;
    float *floats;
    int64_t *ints;
    char **strings;
    mcp_tensor *tensors;
    mcp_graph **graphs;
    /* TYPE_PROTO: the element type and kind it describes. */
    mcp_dtype tp_dtype;
    mcp_value_kind tp_kind;
} mcp_attr;

/* Static type of a value: kind, element dtype, shape with symbolic dims.
 * rank < 0 means unknown rank; dims[i] < 0 means unknown, and dim_params[i]
 * (if set) names a symbolic dimension. */
typedef struct mcp_type {
    mcp_value_kind kind; /* TENSOR, SEQUENCE, or NONE for optional */
    bool is_optional;
    mcp_dtype dtype;     /* tensor dtype or sequence element dtype */
    int rank;
    int64_t dims[MCP_MAX_RANK];
    char *dim_params[MCP_MAX_RANK];
} mcp_type;

/*
 * A value slot in a graph. `outer` >= 0 marks a value captured from the
 * enclosing graph (index into parent->values); its runtime value is borrowed
 * from the parent frame.
 */
typedef struct mcp_graph_value {
    char *name;
    mcp_type type;
    int outer;
    int initializer; /* index into graph->initializers or -1 */
    int producer;    /* node index or -1 */
} mcp_graph_value;

struct mcp_kernel_def;

typedef struct mcp_node {
    char *name;
    char *op_type;
    char *domain; /* "" for the default domain */
    int opset;    /* opset version of the node's domain in the model */
    int n_inputs;
    int *inputs;  /* value index, -1 for an omitted optional input */
    int n_outputs;
    int *outputs; /* value index, -1 for an omitted optional output */
    int n_attrs;
    mcp_attr *attrs;
    /* Resolved once at load by the session. */
    const struct mcp_kernel_def *kernel;
    const char *kernel_backend; /* the backend that kernel comes from ("ref", "dnnl") */
    void *kernel_state; /* from kernel->prepare, owned by the session */
} mcp_node;

typedef struct mcp_opset {
    char *domain;
    int64_t version;
} mcp_opset;

struct mcp_graph {
    char *name;
    mcp_graph *parent;
    int n_values, cap_values;
    mcp_graph_value *values;
    /* Names of values[0 .. name_index_n) hashed (open addressing, value
     * index + 1, 0 empty; the latest of equal names), so import looks names
     * up in constant time; values added later are scanned. */
    int *name_index;
    int name_index_cap, name_index_n;
    int n_nodes, cap_nodes;
    mcp_node *nodes;
    int n_inputs;
    int *inputs;          /* graph inputs, excluding ones that are initializers */
    int n_outputs;
    int *outputs;
    int n_initializers;
    mcp_tensor *initializers; /* owned constants (the weights) */
    int *initializer_values;  /* value index of each initializer */
    /* Value lifetimes (mcp_graph_plan_lifetimes): after node i runs, the
     * values free_vals[free_start[i] .. free_start[i+1]) are dead. */
    int *free_start;
    int *free_vals;
    /* Top-level graph only: */
    int n_opsets;
    mcp_opset *opsets;
    int64_t ir_version;
    char *producer_name;
    /* The ModelProto's metadata_props keys (values are not kept). */
    char **metadata_keys;
    int n_metadata_keys;
    /* Some tensor's data came from an external file (the compiler refuses
     * such models: a compiled model embeds only the .onnx bytes). */
    bool external_data;
    /* Set by the session before kernels are prepared (option bf16): float32
     * convolutions and matrix products may compute in bfloat16. */
    bool bf16;
    /* A compiled model's packed weights (engine/mcpir.c), for the kernels'
     * prepare to adopt (mcp_graph_prepacked); NULL otherwise. */
    const struct mcp_prepacked *prepacked;
    int n_prepacked;
};

/* Weights in a kernel's own layout: what a prepared kernel holds
 * (mcp_kernel_def.packed_weights) and what a compiled model carries for
 * top-graph node `node` (kernel-defined `slot`, 0 first): the backend's
 * layout descriptor and the data, 64-byte aligned. */
typedef struct mcp_prepacked {
    int node, slot;
    const void *desc;
    size_t desc_len;
    const void *data;
    size_t len;
} mcp_prepacked;

/* The compiled model's packed weights for node n (of g's top graph) and
 * slot; NULL when there are none. */
const mcp_prepacked *mcp_graph_prepacked(const mcp_graph *g, const mcp_node *n, int slot);

/* ONNX's name for TensorProto.DataType number n ("FLOAT", "FLOAT8E4M3FN",
 * "INT4", ...: every number in MCP_DTYPE_MAP); NULL for numbers past it,
 * which ONNX does not define. */
const char *mcp_onnx_dtype_name(int64_t n);
/* The message part for an element type number this engine does not
 * implement: "element type 27, which ONNX does not define" into buf.
 * Returns buf. */
const char *mcp_onnx_dtype_refusal(int64_t n, char *buf, size_t cap);

/* Import an ONNX ModelProto. `base_dir` resolves external data files (may be
 * NULL for in-memory models without external data). The graph is owned by
 * the caller (mcp_graph_free). */
mcp_status mcp_onnx_import(const uint8_t *buf, size_t len, const char *base_dir,
                           mcp_graph **out, mcp_err *err);
/* A compiled model's data area (src/engine/mcpir.c). Importing with one,
 * external data at MCP_BLOB_LOCATION (offset 64-byte aligned, length the
 * tensor's bytes) is read in place: the tensors borrow the area, which must
 * outlive the graph. MCP_RELEASED_LOCATION marks float weights whose plain
 * data the file leaves out (the kernel reading them has them packed): they
 * import with data NULL. Other external data is refused. */
#define MCP_BLOB_LOCATION "@mcpir-blob"
#define MCP_RELEASED_LOCATION "@mcpir-packed"
typedef struct mcp_import_blob {
    const uint8_t *data;
    size_t len;
} mcp_import_blob;
mcp_status mcp_onnx_import_blob(const uint8_t *buf, size_t len, const mcp_import_blob *blob, mcp_graph **out,
                                mcp_err *err);

/* Where mcp_onnx_export puts a top-level initializer's bytes: as external
 * data [offset, offset + length) of `location` (the caller writes them). */
typedef struct mcp_export_place {
    const char *location;
    uint64_t offset, length;
} mcp_export_place;
/* Returns false to write initializer k inline. */
typedef bool (*mcp_export_place_fn)(void *user, int k, const mcp_tensor *t, mcp_export_place *out);
/* Writes g (after the passes: internal ops included) as an ONNX ModelProto
 * into a new buffer (*out, freed with mcp_free): nodes, attributes,
 * subgraphs, initializers (inline, or where `place` says), every value's
 * known type (inputs, outputs, value_info), the opsets plus the internal
 * domain, and the metadata keys. Importing it and inferring shapes gives
 * the same graph. Fails with
 * UNSUPPORTED naming what cannot be written (sparse or type attributes, a
 * value name two values share, an initializer whose data is gone and that
 * `place` does not take). */
mcp_status mcp_onnx_export(const mcp_graph *g, mcp_export_place_fn place, void *user, uint8_t **out, size_t *len,
                           mcp_err *err);
/* Infers dtype and shape of every value it can, graph by graph (subgraphs
 * included), from graph inputs, initializers and op semantics. Declared
 * types (value_info, outputs) are kept and checked: a static dimension or
 * dtype that contradicts what a node produces fails with the node's name,
 * op type and the value's name. Unknown stays unknown (rank -1 / dim -1);
 * symbolic dims (dim_params) propagate through ops that preserve them. */
mcp_status mcp_graph_infer_shapes(mcp_graph *g, mcp_err *err);
void mcp_graph_free(mcp_graph *g);
/* Frees what an attribute owns (name, arrays, tensors, subgraphs). */
void mcp_attr_release(mcp_attr *a);

/* Backend-independent rewrites of the top graph (src/graph/passes.c):
 * Identity / inference Dropout elimination, BatchNormalization folded into
 * a preceding Conv with initializer weights, MatMul + bias Add -> Gemm (A
 * and B of known rank 2), GELU and LayerNorm patterns -> the internal Gelu
 * and LayerNormalization, Conv [+ Add] [+ activation] -> FusedConv, Gemm +
 * activation -> FusedGemm, MatMul [+ bias] [+ activation] -> FusedMatMul,
 * dead-node and unused-initializer removal. Fusions need float32 and an
 * intermediate with one reader that is not a graph output. Graph inputs,
 * outputs and their names are kept; subgraphs are left alone. Value
 * indices stay valid; node indices change. Call after
 * mcp_graph_infer_shapes (the fusions read static types) and before
 * kernels are resolved. */
mcp_status mcp_graph_optimize(mcp_graph *g, mcp_err *err);
/* QDQ graphs to quantized operators (src/graph/passes.c): DequantizeLinear
 * -> Conv / MatMul -> [Relu] -> QuantizeLinear, with 8-bit weight
 * initializers, becomes QLinearConv / QLinearMatMul on the quantized
 * values; residual DequantizeLinear + Add + [Relu] + QuantizeLinear
 * becomes QLinearAdd, or with fuse_sums (when one operand comes from such
 * a QLinearConv alone) QLinearConvAdd; MatMulInteger -> Cast -> Mul by the
 * scales [-> Add of a bias] (dynamic quantization) becomes
 * MatMulIntegerScaled. Call after mcp_graph_infer_shapes
 * and before constant folding (which would fold the weights'
 * DequantizeLinear into float). */
mcp_status mcp_graph_fuse_quantized(mcp_graph *g, bool fuse_sums, mcp_err *err);
/* Releases the nodes with drop[i] set (their subgraphs included), closes
 * the gaps and relinks every value's producer. */
void mcp_graph_remove_nodes(mcp_graph *g, const bool *drop);

/* Computes value lifetimes for g and its subgraphs: a value dies after the
 * last node that reads it, directly or through a subgraph's capture. Graph
 * outputs, graph inputs and initializers never die. */
mcp_status mcp_graph_plan_lifetimes(mcp_graph *g, mcp_err *err);

/* Decode a serialized TensorProto / SequenceProto / OptionalProto (as found
 * in the ONNX test suite's .pb files) into a runtime value. */
mcp_status mcp_onnx_decode_tensor(const uint8_t *buf, size_t len, mcp_value *out, mcp_err *err);
mcp_status mcp_onnx_decode_sequence(const uint8_t *buf, size_t len, mcp_value *out,
                                    mcp_err *err);
mcp_status mcp_onnx_decode_optional(const uint8_t *buf, size_t len, mcp_value *out,
                                    mcp_err *err);

/* Opset version of `domain` ("" or "ai.onnx" = default) in the model, 0 if
 * not imported. */
int64_t mcp_graph_opset(const mcp_graph *g, const char *domain);

/* Attribute lookup on a node; NULL when absent. */
const mcp_attr *mcp_node_attr(const mcp_node *n, const char *name);
int64_t mcp_node_attr_int(const mcp_node *n, const char *name, int64_t dflt);
float mcp_node_attr_float(const mcp_node *n, const char *name, float dflt);
/* Returns the string attribute or dflt. */
const char *mcp_node_attr_string(const mcp_node *n, const char *name, const char *dflt);

/* Contract name ("Relu"), or NULL for NONE and out-of-range values. */
const char *mcp_activation_name(mcp_activation a);
int mcp_activation_n_params(mcp_activation a);
/* The activation named `name`; MCP_ACTIVATION_NONE when there is none. */
mcp_activation mcp_activation_from_name(const char *name);
/* Reads node n's `activation` / `activation_params` (absent = NONE); the
 * parameter count must be the one the list gives. Errors name the node. */
mcp_status mcp_node_activation(const mcp_node *n, mcp_act *out, mcp_err *err);
/* Returns the ints array (count in *count) or NULL with *count = 0. */
const int64_t *mcp_node_attr_ints(const mcp_node *n, const char *name, int64_t *count);
const float *mcp_node_attr_floats(const mcp_node *n, const char *name, int64_t *count);

/* Value index by name, searching this graph only; -1 if absent. */
int mcp_graph_find_value(const mcp_graph *g, const char *name);

#endif
