/* Element types. The numbering is ONNX's TensorProto.DataType so values can
 * travel between the two without a table. */
#ifndef MCP_DTYPE_H
#define MCP_DTYPE_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, onnx number, element bits (0 = variable), npy-style short name,
 *   Open Inference Protocol datatype or NULL where it has none, ONNX's
 *   TensorProto.DataType name). This is the one list of element types and
 * their names: every table of names is made from it. The 4-bit and 2-bit
 * types are stored packed as ONNX stores them: two (four) elements a byte,
 * the first in the lowest bits, so n elements take ceil(n * bits / 8)
 * bytes. None of the types past BFLOAT16 has an Open Inference Protocol
 * datatype. */
#define MCP_DTYPE_MAP(X)                                                \
    X(UNDEFINED, 0, 0, "undefined", NULL, "UNDEFINED")                  \
    X(FLOAT, 1, 32, "float32", "FP32", "FLOAT")                         \
    X(UINT8, 2, 8, "uint8", "UINT8", "UINT8")                           \
    X(INT8, 3, 8, "int8", "INT8", "INT8")                               \
    X(UINT16, 4, 16, "uint16", "UINT16", "UINT16")                      \
    X(INT16, 5, 16, "int16", "INT16", "INT16")                          \
    X(INT32, 6, 32, "int32", "INT32", "INT32")                          \
    X(INT64, 7, 64, "int64", "INT64", "INT64")                          \
    X(STRING, 8, 0, "string", "BYTES", "STRING")                        \
    X(BOOL, 9, 8, "bool", "BOOL", "BOOL")                               \
    X(FLOAT16, 10, 16, "float16", "FP16", "FLOAT16")                    \
    X(DOUBLE, 11, 64, "float64", "FP64", "DOUBLE")                      \
    X(UINT32, 12, 32, "uint32", "UINT32", "UINT32")                     \
    X(UINT64, 13, 64, "uint64", "UINT64", "UINT64")                     \
    X(COMPLEX64, 14, 64, "complex64", NULL, "COMPLEX64")                \
    X(COMPLEX128, 15, 128, "complex128", NULL, "COMPLEX128")            \
    X(BFLOAT16, 16, 16, "bfloat16", "BF16", "BFLOAT16")                 \
    X(FLOAT8E4M3FN, 17, 8, "float8e4m3fn", NULL, "FLOAT8E4M3FN")        \
    X(FLOAT8E4M3FNUZ, 18, 8, "float8e4m3fnuz", NULL, "FLOAT8E4M3FNUZ")  \
    X(FLOAT8E5M2, 19, 8, "float8e5m2", NULL, "FLOAT8E5M2")              \
    X(FLOAT8E5M2FNUZ, 20, 8, "float8e5m2fnuz", NULL, "FLOAT8E5M2FNUZ")  \
    X(UINT4, 21, 4, "uint4", NULL, "UINT4")                             \
    X(INT4, 22, 4, "int4", NULL, "INT4")                                \
    X(FLOAT4E2M1, 23, 4, "float4e2m1", NULL, "FLOAT4E2M1")              \
    X(FLOAT8E8M0, 24, 8, "float8e8m0", NULL, "FLOAT8E8M0")              \
    X(UINT2, 25, 2, "uint2", NULL, "UINT2")                             \
    X(INT2, 26, 2, "int2", NULL, "INT2")

typedef enum mcp_dtype {
#define MCP__DTYPE_ENUM(name, num, bits, text, oip, onnx) MCP_DTYPE_##name = num,
    MCP_DTYPE_MAP(MCP__DTYPE_ENUM)
#undef MCP__DTYPE_ENUM
        MCP_DTYPE_COUNT
} mcp_dtype;

/* Name such as "float32"; "invalid" for numbers outside the enum. */
const char *mcp_dtype_name(mcp_dtype dtype);
/* Bytes per element; 0 for STRING (elements are char *), UNDEFINED and the
 * packed sub-byte types (UINT4, INT4, FLOAT4E2M1, UINT2, INT2: see
 * mcp_dtype_bits). */
int mcp_dtype_size(mcp_dtype dtype);
/* Bits per element (4 for INT4, 32 for FLOAT); 0 for STRING and UNDEFINED. */
int mcp_dtype_bits(mcp_dtype dtype);
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
