/* Element types. The numbering is ONNX's TensorProto.DataType so values can
 * travel between the two without a table. */
#ifndef MCP_DTYPE_H
#define MCP_DTYPE_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, onnx number, element bytes (0 = variable), npy-style short name) */
#define MCP_DTYPE_MAP(X)                                                      \
    X(UNDEFINED, 0, 0, "undefined")                                           \
    X(FLOAT, 1, 4, "float32")                                                 \
    X(UINT8, 2, 1, "uint8")                                                   \
    X(INT8, 3, 1, "int8")                                                     \
    X(UINT16, 4, 2, "uint16")                                                 \
    X(INT16, 5, 2, "int16")                                                   \
    X(INT32, 6, 4, "int32")                                                   \
    X(INT64, 7, 8, "int64")                                                   \
    X(STRING, 8, 0, "string")                                                 \
    X(BOOL, 9, 1, "bool")                                                     \
    X(FLOAT16, 10, 2, "float16")                                              \
    X(DOUBLE, 11, 8, "float64")                                               \
    X(UINT32, 12, 4, "uint32")                                                \
    X(UINT64, 13, 8, "uint64")                                                \
    X(COMPLEX64, 14, 8, "complex64")                                          \
    X(COMPLEX128, 15, 16, "complex128")                                       \
    X(BFLOAT16, 16, 2, "bfloat16")

typedef enum mcp_dtype {
#define MCP__DTYPE_ENUM(name, num, size, text) MCP_DTYPE_##name = num,
    MCP_DTYPE_MAP(MCP__DTYPE_ENUM)
#undef MCP__DTYPE_ENUM
        MCP_DTYPE_COUNT
} mcp_dtype;

/* Name such as "float32"; "invalid" for numbers outside the enum. */
const char *mcp_dtype_name(mcp_dtype dtype);
/* Bytes per element; 0 for STRING (elements are char *) and UNDEFINED. */
int mcp_dtype_size(mcp_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
