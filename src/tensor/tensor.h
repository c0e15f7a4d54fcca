/*
 * tensor: dense tensors, sequences and optionals (runtime values), element
 * conversion helpers and .npy read/write.
 */
#ifndef MCP_TENSOR_H
#define MCP_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "mcp/dtype.h"

#define MCP_MAX_RANK 12

/*
 * A backend's memory format for a tensor's data, e.g. oneDNN's channel-blocked
 * layouts. Plain row-major tensors have none (format NULL); only plain tensors
 * cross the public API, leave a run, or reach a kernel that does not declare
 * MCP_KERNEL_ACCEPTS_FORMATS (the executor converts at those edges). The
 * format object belongs to the kernel state that produced the tensor and
 * outlives it.
 */
typedef struct mcp_format mcp_format;
struct mcp_format {
    const char *name;
    size_t nbytes; /* bytes of data in this format (padding included) */
    /* Writes the plain row-major form of src (in this format) into dst. */
    mcp_status (*to_plain)(const mcp_format *f, const void *src, void *dst, mcp_err *err);
    /* Whether `other` lays out the same logical tensor the same way, byte
     * for byte (formats are owned by the kernels that write them, so two
     * alike layouts are usually two objects). NULL: only the same object. */
    bool (*same_layout)(const mcp_format *f, const mcp_format *other);
};

/* Whether tensors in formats a and b (NULL: plain) have their bytes in the
 * same places. */
bool mcp_format_same(const mcp_format *a, const mcp_format *b);

/*
 * A dense tensor. `data` holds numel() elements of dtype, row-major. For
 * STRING, data is an array of numel() NUL-terminated char * (each owned by the
 * tensor when owns_data is set). When owns_data is false the tensor is a
 * borrowed view and destroying it leaves data alone.
 */
typedef struct mcp_tensor {
    mcp_dtype dtype;
    const mcp_format *format; /* NULL: plain row-major */
    int rank;
    int64_t dims[MCP_MAX_RANK];
    void *data;
    bool owns_data;
} mcp_tensor;

int64_t mcp_tensor_numel(const mcp_tensor *t);
int64_t mcp_shape_numel(int rank, const int64_t *dims);
/* Bytes of data (numel * element size; numel * sizeof(char *) for strings;
 * ceil(numel * bits / 8) for the packed types). */
size_t mcp_tensor_nbytes(const mcp_tensor *t);

/* The byte size of a tensor of this dtype and shape into *nbytes; fails
 * with INVALID_ARGUMENT (negative dims, rank too large, over 2^46 bytes or
 * overflowing) or UNSUPPORTED (a dtype without storage). */
mcp_status mcp_tensor_size_check(mcp_dtype dtype, int rank, const int64_t *dims, size_t *nbytes, mcp_err *err);
/* Allocates zeroed storage for the given dtype and shape into *t (strings
 * start as empty strings). Fails with OUT_OF_MEMORY or INVALID_ARGUMENT
 * (negative dims, rank too large, size overflow). */
mcp_status mcp_tensor_alloc(mcp_tensor *t, mcp_dtype dtype, int rank, const int64_t *dims,
                            mcp_err *err);
/* Frees owned storage and resets *t to an empty tensor. NULL is a no-op. */
void mcp_tensor_release(mcp_tensor *t);
/* Deep copy (strings duplicated). dst must not hold owned data. */
mcp_status mcp_tensor_copy(mcp_tensor *dst, const mcp_tensor *src, mcp_err *err);
/* Replaces string element i with a copy of s. */
mcp_status mcp_tensor_set_string(mcp_tensor *t, int64_t i, const char *s, size_t len);

/* Element access as double / int64 for every numeric dtype (incl. bool,
 * float16, bfloat16) and the narrow types (mcp_narrow_to_f64 /
 * mcp_narrow_from_f64 with saturation and rounding up). Slow, for
 * reference kernels. */
double mcp_tensor_get_f64(const mcp_tensor *t, int64_t i);
void mcp_tensor_set_f64(mcp_tensor *t, int64_t i, double v);
int64_t mcp_tensor_get_i64(const mcp_tensor *t, int64_t i);
void mcp_tensor_set_i64(mcp_tensor *t, int64_t i, int64_t v);
/* Reads element i of a raw buffer of dtype as double / int64 (same rules). */
double mcp_elem_get_f64(mcp_dtype dtype, const void *data, int64_t i);
void mcp_elem_set_f64(mcp_dtype dtype, void *data, int64_t i, double v);
int64_t mcp_elem_get_i64(mcp_dtype dtype, const void *data, int64_t i);
void mcp_elem_set_i64(mcp_dtype dtype, void *data, int64_t i, int64_t v);

bool mcp_dtype_is_float(mcp_dtype d);    /* float16, bfloat16, float, double */
bool mcp_dtype_is_integer(mcp_dtype d);  /* signed and unsigned ints */
bool mcp_dtype_is_signed(mcp_dtype d);
bool mcp_dtype_is_numeric(mcp_dtype d);  /* floats, ints and bool */

/* The element types ONNX numbers 17-26 (float8 in its four kinds, the
 * float8e8m0 scale type, 4-bit and 2-bit integers, float4e2m1): the engine
 * stores, moves, converts and (de)quantizes them, but no arithmetic
 * operator computes on them, so none of them counts as float, integer or
 * numeric above. */
bool mcp_dtype_is_narrow(mcp_dtype d);
/* Narrow types of fewer than 8 bits, stored packed (see MCP_DTYPE_MAP). */
bool mcp_dtype_is_packed(mcp_dtype d);
/* Bytes that n elements of dtype take: n * size, ceil(n * bits / 8) for the
 * packed types, n * sizeof(char *) for strings. */
size_t mcp_dtype_nbytes(mcp_dtype d, int64_t n);

/* Element i of a packed array of `bits`-bit codes (2 or 4), first element
 * in the lowest bits of byte 0; set writes the low `bits` bits of code and
 * leaves the neighbours alone. */
uint8_t mcp_packed_get(const void *data, int bits, int64_t i);
void mcp_packed_set(void *data, int bits, int64_t i, uint8_t code);

/* float8e8m0 rounding (Cast-24 round_mode): up (to the next power of two,
 * the default), down, or to the nearest power of two with ties up. */
typedef enum mcp_e8m0_round {
    MCP_E8M0_ROUND_UP = 0,
    MCP_E8M0_ROUND_DOWN,
    MCP_E8M0_ROUND_NEAREST,
} mcp_e8m0_round;

/* The value of a narrow-type code as double (exact; NaN for the NaN codes,
 * 2^(e-127) for float8e8m0, the integer for int4/uint4/int2/uint2). */
double mcp_narrow_to_f64(mcp_dtype d, uint8_t code);
/* v as the code of a narrow type, ONNX's Cast rules: round to nearest even;
 * float8 out of range gives the largest finite value with saturate, else
 * NaN (E5M2: infinity); -0 and NaN as each kind defines them; float4e2m1
 * always saturates (NaN gives 6); float8e8m0 rounds by `round`; the
 * integer types round to nearest even and clamp to their range (NaN: 0). */
uint8_t mcp_narrow_from_f64(mcp_dtype d, double v, bool saturate, mcp_e8m0_round round);

float mcp_f16_to_f32(uint16_t h);
uint16_t mcp_f32_to_f16(float f);        /* round to nearest even */
float mcp_bf16_to_f32(uint16_t h);
uint16_t mcp_f32_to_bf16(float f);       /* round to nearest even */

/* Numpy broadcasting of two shapes into out (rank = max). Fails when a pair
 * of dims is neither equal nor 1. */
bool mcp_broadcast_shapes(int ra, const int64_t *a, int rb, const int64_t *b, int *rout,
                          int64_t *out);
/* Strides (in elements) to read a tensor of shape (rank, dims) broadcast to
 * (out_rank, out_dims): 0 for broadcast dims. */
void mcp_broadcast_strides(int rank, const int64_t *dims, int out_rank, const int64_t *out_dims,
                           int64_t *strides);
/* Row-major contiguous strides. */
void mcp_contiguous_strides(int rank, const int64_t *dims, int64_t *strides);

/* Formats a shape as "[2,3,4]" into buf. Returns buf. */
char *mcp_shape_str(int rank, const int64_t *dims, char *buf, size_t cap);

/* ---- runtime values: tensor, sequence of tensors, optional ---- */

typedef enum mcp_value_kind {
    MCP_VALUE_TENSOR = 0,
    MCP_VALUE_SEQUENCE,
    MCP_VALUE_NONE, /* an empty optional */
} mcp_value_kind;

/*
 * A value flowing through a graph. A value owns its tensor (or its sequence
 * elements). For sequences, `elem_dtype` records the element type so empty
 * sequences still carry it; for NONE it records the type the optional would
 * hold (elem_is_sequence tells whether that is a sequence).
 */
typedef struct mcp_value {
    mcp_value_kind kind;
    mcp_tensor tensor;        /* kind == TENSOR */
    mcp_tensor *seq;          /* kind == SEQUENCE: seq_len tensors */
    int64_t seq_len;
    int64_t seq_cap;
    mcp_dtype elem_dtype;     /* SEQUENCE / NONE */
    bool elem_is_sequence;    /* NONE: optional(sequence) */
} mcp_value;

mcp_value *mcp_value_new(void);
/* Frees everything the value owns, then the value. NULL is a no-op. */
void mcp_value_free(mcp_value *v);
/* Releases contents, leaving an empty TENSOR value. */
void mcp_value_clear(mcp_value *v);
mcp_status mcp_value_copy(mcp_value *dst, const mcp_value *src, mcp_err *err);
/* Appends a copy of t to a SEQUENCE value (position -1 = end). */
mcp_status mcp_value_seq_insert(mcp_value *v, int64_t pos, const mcp_tensor *t, mcp_err *err);
/* Moves t into the sequence without copying; *t is reset. */
mcp_status mcp_value_seq_push_move(mcp_value *v, mcp_tensor *t, mcp_err *err);

/* ---- .npy ---- */

/* Reads a .npy file (version 1/2/3, little-endian, C order). Unicode ('<U')
 * arrays become STRING tensors (UTF-8). */
mcp_status mcp_npy_read(const char *path, mcp_tensor *out, mcp_err *err);
mcp_status mcp_npy_read_mem(const uint8_t *buf, size_t len, mcp_tensor *out, mcp_err *err);
/* Writes a tensor as .npy. bfloat16 is written as uint16 bit patterns;
 * strings as fixed-width unicode; the narrow types one element a byte:
 * float8 / float8e8m0 / float4e2m1 / uint4 / uint2 as their codes ('|u1'),
 * int4 / int2 as int8 values ('|i1'). */
mcp_status mcp_npy_write(const char *path, const mcp_tensor *t, mcp_err *err);
/* Turns a tensor read from .npy in that layout (uint8, int8 for int4 /
 * int2) into the narrow type `narrow`, packing 4-bit and 2-bit elements;
 * fails, naming the element, on a value outside the type's codes. */
mcp_status mcp_npy_to_narrow(mcp_tensor *t, mcp_dtype narrow, mcp_err *err);

#endif
