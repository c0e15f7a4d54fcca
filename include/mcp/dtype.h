/* Element types. The numbering is ONNX's TensorProto.DataType so values can
 * travel between the two without a table. */
#ifndef MCP_DTYPE_H
#define MCP_DTYPE_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, onnx number, element bytes (0 = variable), npy-style short name,
 *   Open Inference Protocol datatype or NULL where it has none, ONNX's
 *   TensorProto.DataType name). This is the one list of element types and
 * their names: every table of names is made from it. */
#define MCP_DTYPE_MAP(X)                                                      \
    X(UNDEFINED, 0, 0, "undefined", NULL, "UNDEFINED")                       \
    X(FLOAT, 1, 4, "float32", "FP32", "FLOAT")                               \
    X(UINT8, 2, 1, "uint8", "UINT8", "UINT8")                                \
    X(INT8, 3, 1, "int8", "INT8", "INT8")                                    \
    X(UINT16, 4, 2, "uint16", "UINT16", "UINT16")                            \
    X(INT16, 5, 2, "int16", "INT16", "INT16")                                \
    X(INT32, 6, 4, "int32", "INT32", "INT32")                                \
    X(INT64, 7, 8, "int64", "INT64", "INT64")                                \
    X(STRING, 8, 0, "string", "BYTES", "STRING")                             \
    X(BOOL, 9, 1, "bool", "BOOL", "BOOL")                                    \
    X(FLOAT16, 10, 2, "float16", "FP16", "FLOAT16")                          \
    X(DOUBLE, 11, 8, "float64", "FP64", "DOUBLE")                            \
    X(UINT32, 12, 4, "uint32", "UINT32", "UINT32")                           \
    X(UINT64, 13, 8, "uint64", "UINT64", "UINT64")                           \
    X(COMPLEX64, 14, 8, "complex64", NULL, "COMPLEX64")                      \
    X(COMPLEX128, 15, 16, "complex128", NULL, "COMPLEX128")                  \
    X(BFLOAT16, 16, 2, "bfloat16", "BF16", "BFLOAT16")

typedef enum mcp_dtype {
#define MCP__DTYPE_ENUM(name, num, size, text, oip, onnx) MCP_DTYPE_##name = num,
    MCP_DTYPE_MAP(MCP__DTYPE_ENUM)
#undef MCP__DTYPE_ENUM
        MCP_DTYPE_COUNT
} mcp_dtype;

/* Name such as "float32"; "invalid" for numbers outside the enum. */
const char *mcp_dtype_name(mcp_dtype dtype);
/* Bytes per element; 0 for STRING (elements are char *) and UNDEFINED. */
int mcp_dtype_size(mcp_dtype dtype);
/* Open Inference Protocol datatype such as "FP32"; NULL where there is none. */
const char *mcp_dtype_oip_name(mcp_dtype dtype);
/* The type named `name`, either way ("FP32" or "float32"); UNDEFINED for
 * any other text, "undefined" included. */
mcp_dtype mcp_dtype_from_name(const char *name);
/* The type whose ONNX TensorProto.DataType name is `name` ("FLOAT",
 * "BFLOAT16": Cast-1's `to`); UNDEFINED for any other text. */
mcp_dtype mcp_dtype_from_onnx_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif
