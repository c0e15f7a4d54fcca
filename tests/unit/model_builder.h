/*
 * A small ONNX model builder for the unit tests: fills protobuf-c structs
 * (onnx.pb-c.h) and packs them into ModelProto bytes, so the tests need no
 * Python and no model files checked in.
 *
 * Ownership: every struct and string the builder makes belongs to the
 * mb_model and is freed by mb_model_free() in one go. The builder allocates
 * with plain malloc, never through libmcp's counted allocator, so tests of
 * mcp_alloc_live_count() are not disturbed. Allocation failure aborts (this
 * is test code). Returned proto pointers stay valid until mb_model_free and
 * may be edited directly to craft malformed models.
 */
#ifndef MCP_TEST_MODEL_BUILDER_H
#define MCP_TEST_MODEL_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "mcp/dtype.h"
#include "onnx.pb-c.h"

typedef struct mb_model mb_model;

/* A model with an empty main graph named "main". opset > 0 adds an
 * opset_import entry for the default domain; opset <= 0 adds none. */
mb_model *mb_model_new(int64_t opset);
void mb_model_free(mb_model *m);

/* The ModelProto and its main graph, for direct edits. */
Onnx__ModelProto *mb_model_proto(mb_model *m);
Onnx__GraphProto *mb_main_graph(mb_model *m);

/* Adds an opset_import entry (domain "" is the default domain). */
void mb_add_opset(mb_model *m, const char *domain, int64_t version);

/* A new empty graph (for If/Loop bodies), owned by the model. */
Onnx__GraphProto *mb_new_graph(mb_model *m, const char *name);

/*
 * Graph inputs and outputs. g NULL means the main graph. rank < 0 leaves
 * the shape out; dims[i] < 0 makes dimension i unknown, named by
 * dim_params[i] when dim_params and dim_params[i] are non-NULL.
 * dtype MCP_DTYPE_UNDEFINED leaves the type out entirely.
 */
Onnx__ValueInfoProto *mb_add_input(mb_model *m, Onnx__GraphProto *g, const char *name,
                                   mcp_dtype dtype, int rank, const int64_t *dims,
                                   const char *const *dim_params);
Onnx__ValueInfoProto *mb_add_output(mb_model *m, Onnx__GraphProto *g, const char *name,
                                    mcp_dtype dtype, int rank, const int64_t *dims,
                                    const char *const *dim_params);

/* A node. inputs and outputs are comma-separated names ("X,W"); an empty
 * piece ("X,,Z") is an omitted optional input; NULL or "" means none.
 * name may be NULL (unnamed node). */
Onnx__NodeProto *mb_add_node(mb_model *m, Onnx__GraphProto *g, const char *op_type,
                             const char *name, const char *inputs, const char *outputs);
void mb_node_set_domain(mb_model *m, Onnx__NodeProto *n, const char *domain);
void mb_attr_int(mb_model *m, Onnx__NodeProto *n, const char *name, int64_t v);
void mb_attr_float(mb_model *m, Onnx__NodeProto *n, const char *name, float v);
void mb_attr_ints(mb_model *m, Onnx__NodeProto *n, const char *name, const int64_t *v,
                  size_t count);
void mb_attr_string(mb_model *m, Onnx__NodeProto *n, const char *name, const char *s);
void mb_attr_graph(mb_model *m, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *body);
void mb_attr_tensor(mb_model *m, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t);

/* A tensor holding `nbytes` bytes of raw_data (numeric dtypes only; the
 * byte count need not match the shape, so mismatches can be tested). */
Onnx__TensorProto *mb_new_tensor(mb_model *m, const char *name, mcp_dtype dtype, int rank,
                                 const int64_t *dims, const void *data, size_t nbytes);
/* Adds such a tensor as an initializer of g (NULL = main graph). */
Onnx__TensorProto *mb_add_initializer(mb_model *m, Onnx__GraphProto *g, const char *name,
                                      mcp_dtype dtype, int rank, const int64_t *dims,
                                      const void *data, size_t nbytes);
/* Moves a tensor's data to an external file: drops raw_data, sets
 * data_location EXTERNAL and the keys location, offset (when offset >= 0)
 * and length (when length >= 0). */
void mb_tensor_set_external(mb_model *m, Onnx__TensorProto *t, const char *location,
                            long long offset, long long length);
/* Adds an external_data entry with any key and value (for odd values). */
void mb_tensor_add_external_key(mb_model *m, Onnx__TensorProto *t, const char *key,
                                const char *value);

/* Fills p[0 .. n) with small multiples of scale in a fixed pattern (seed
 * shifts it): weights and inputs whose results stay well scaled. */
void mb_fill_pattern(float *p, int n, int seed, float scale);

/* Serializes the model. The bytes are malloc'd; the caller frees them with
 * free(). */
uint8_t *mb_pack(mb_model *m, size_t *len);
/* Serializes the model into a file. Returns 0 on success. */
int mb_write_file(mb_model *m, const char *path);

/* Writes len bytes to path (creating or truncating it). Returns 0 on success. */
int mb_write_bytes(const char *path, const void *data, size_t len);

/*
 * The shared example model (opset 13), used by several tests:
 *   XW = MatMul(X, W)   node "matmul"
 *   Y  = Add(XW, B)     node "add"
 *   Z  = Relu(Y)        node "relu"
 * X is float [batch, 3] with "batch" symbolic; W float [3, 2] and B float [2]
 * are initializers holding mb_mlp_w and mb_mlp_b. Graph outputs, in order:
 * Z then Y, both declared float [batch, 2]. The weights are small binary
 * fractions, so results on small integer or half-integer inputs are exact in
 * float whatever the summation order.
 */
extern const float mb_mlp_w[6];
extern const float mb_mlp_b[2];
mb_model *mb_example_mlp(void);
/* Computes Y and Z for `batch` rows of x by hand (y, z: batch * 2 floats). */
void mb_mlp_reference(const float *x, int64_t batch, float *y, float *z);

#endif
