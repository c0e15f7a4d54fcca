/*
 * Private helpers of the elementwise reference kernels (elementwise*.c):
 * element loads and stores for every numeric dtype with exact integer paths,
 * and the run functions that live in elementwise_cast.c.
 *
 * Values travel as one of three "kinds": double for float dtypes (float16 and
 * bfloat16 included), int64 for signed integers and uint64 for unsigned
 * integers and bool. Stores wrap integers to the destination width (two's
 * complement, like numpy) and round floats to nearest even.
 */
#ifndef MCP_OPS_REF_ELEMENTWISE_UTIL_H
#define MCP_OPS_REF_ELEMENTWISE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops/ops.h"

typedef enum ew_kind {
    EW_KIND_FLOAT = 0, /* float16, bfloat16, float, double */
    EW_KIND_INT,       /* int8..int64 */
    EW_KIND_UINT,      /* uint8..uint64 and bool */
    EW_KIND_OTHER,     /* string, complex, undefined */
} ew_kind;

static inline ew_kind ew_kind_of(mcp_dtype dt)
{
    switch (dt) {
    case MCP_DTYPE_FLOAT:
    case MCP_DTYPE_DOUBLE:
    case MCP_DTYPE_FLOAT16:
    case MCP_DTYPE_BFLOAT16:
        return EW_KIND_FLOAT;
    case MCP_DTYPE_INT8:
    case MCP_DTYPE_INT16:
    case MCP_DTYPE_INT32:
    case MCP_DTYPE_INT64:
        return EW_KIND_INT;
    case MCP_DTYPE_UINT8:
    case MCP_DTYPE_UINT16:
    case MCP_DTYPE_UINT32:
    case MCP_DTYPE_UINT64:
    case MCP_DTYPE_BOOL:
        return EW_KIND_UINT;
    default:
        return EW_KIND_OTHER;
    }
}

/* Rounds a double to IEEE half precision, nearest even, in one step (going
 * through float would round twice). */
static inline uint16_t ew_f64_to_f16(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000u);
    int bexp = (int)((b >> 52) & 0x7ff);
    uint64_t man = b & ((UINT64_C(1) << 52) - 1);
    if (bexp == 0x7ff) return (uint16_t)(sign | (man ? 0x7e00u : 0x7c00u));
    if (bexp == 0) return sign; /* double subnormals are far below half's range */
    int e = bexp - 1023;
    if (e > 15) return (uint16_t)(sign | 0x7c00u);
    uint64_t sig = man | (UINT64_C(1) << 52);
    int shift;
    uint64_t result;
    if (e >= -14) {
        /* The implicit bit of q adds one to the exponent field, hence e + 14. */
        shift = 42;
        result = ((uint64_t)(e + 14) << 10) + (sig >> shift);
    } else {
        shift = 42 + (-14 - e);
        if (shift > 60) return sign;
        result = sig >> shift;
    }
    uint64_t rem = sig & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (result & 1u))) result++;
    return (uint16_t)(sign | (uint16_t)result);
}

/* Float to int64 the way C casts do, made total: NaN gives 0 and values out
 * of range saturate (C leaves both undefined). */
static inline int64_t ew_f64_to_i64(double v)
{
    if (isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static inline uint64_t ew_f64_to_u64(double v)
{
    if (isnan(v)) return 0;
    if (v >= 18446744073709551616.0) return UINT64_MAX;
    if (v < 0) return (uint64_t)ew_f64_to_i64(v); /* wraps like numpy */
    return (uint64_t)v;
}

static inline double ew_load_f64(mcp_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case MCP_DTYPE_FLOAT: return ((const float *)p)[i];
    case MCP_DTYPE_DOUBLE: return ((const double *)p)[i];
    case MCP_DTYPE_FLOAT16: return mcp_f16_to_f32(((const uint16_t *)p)[i]);
    case MCP_DTYPE_BFLOAT16: return mcp_bf16_to_f32(((const uint16_t *)p)[i]);
    case MCP_DTYPE_INT8: return ((const int8_t *)p)[i];
    case MCP_DTYPE_INT16: return ((const int16_t *)p)[i];
    case MCP_DTYPE_INT32: return ((const int32_t *)p)[i];
    case MCP_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case MCP_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case MCP_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case MCP_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case MCP_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    case MCP_DTYPE_BOOL: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    default: return 0.0;
    }
}

static inline int64_t ew_load_i64(mcp_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case MCP_DTYPE_INT8: return ((const int8_t *)p)[i];
    case MCP_DTYPE_INT16: return ((const int16_t *)p)[i];
    case MCP_DTYPE_INT32: return ((const int32_t *)p)[i];
    case MCP_DTYPE_INT64: return ((const int64_t *)p)[i];
    case MCP_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case MCP_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case MCP_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case MCP_DTYPE_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case MCP_DTYPE_BOOL: return ((const uint8_t *)p)[i] ? 1 : 0;
    default: return ew_f64_to_i64(ew_load_f64(dt, p, i));
    }
}

static inline uint64_t ew_load_u64(mcp_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case MCP_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case MCP_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case MCP_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case MCP_DTYPE_UINT64: return ((const uint64_t *)p)[i];
    case MCP_DTYPE_BOOL: return ((const uint8_t *)p)[i] ? 1 : 0;
    case MCP_DTYPE_INT8:
    case MCP_DTYPE_INT16:
    case MCP_DTYPE_INT32:
    case MCP_DTYPE_INT64: return (uint64_t)ew_load_i64(dt, p, i);
    default: return ew_f64_to_u64(ew_load_f64(dt, p, i));
    }
}

/* Integer stores wrap to the destination width. */
static inline void ew_store_u64(mcp_dtype dt, void *p, int64_t i, uint64_t v)
{
    switch (dt) {
    case MCP_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case MCP_DTYPE_DOUBLE: ((double *)p)[i] = (double)v; break;
    case MCP_DTYPE_FLOAT16: ((uint16_t *)p)[i] = ew_f64_to_f16((double)v); break;
    case MCP_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_bf16((float)v); break;
    case MCP_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case MCP_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case MCP_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case MCP_DTYPE_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case MCP_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case MCP_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case MCP_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case MCP_DTYPE_UINT64: ((uint64_t *)p)[i] = v; break;
    case MCP_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: break;
    }
}

static inline void ew_store_i64(mcp_dtype dt, void *p, int64_t i, int64_t v)
{
    switch (dt) {
    case MCP_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case MCP_DTYPE_DOUBLE: ((double *)p)[i] = (double)v; break;
    case MCP_DTYPE_FLOAT16: ((uint16_t *)p)[i] = ew_f64_to_f16((double)v); break;
    case MCP_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_bf16((float)v); break;
    default: ew_store_u64(dt, p, i, (uint64_t)v); break;
    }
}

/* Float to integer stores truncate toward zero (see ew_f64_to_i64). */
static inline void ew_store_f64(mcp_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case MCP_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case MCP_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
    case MCP_DTYPE_FLOAT16: ((uint16_t *)p)[i] = ew_f64_to_f16(v); break;
    case MCP_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_bf16((float)v); break;
    case MCP_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case MCP_DTYPE_UINT64: ((uint64_t *)p)[i] = ew_f64_to_u64(v); break;
    default: ew_store_i64(dt, p, i, ew_f64_to_i64(v)); break;
    }
}

/* ---- float32 fast paths ---- */

static inline float mcp__ew_f32_from_bits(uint32_t u)
{
    union {
        uint32_t u;
        float f;
    } v = {.u = u};
    return v.f;
}

static inline uint32_t mcp__ew_f32_bits(float f)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = f};
    return v.u;
}

/*
 * exp(x) in float without calls or branches, so that loops over it
 * vectorize: Sigmoid over a float tensor takes 2.1 ns per element this way
 * against 8.7 with libm's expf (one call per element) and 11.5 for the
 * double path (x86-64 baseline SSE2). Also used by Softmax (reduce family).
 *
 * x = k ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 is split so that
 * k * ln2_hi is exact); exp(r) by its degree-7 Taylor polynomial
 * (truncation below 6e-9 relative); 2^k applied as two factors so that
 * subnormal results round once. At most 1 ulp from the correctly rounded
 * value (checked on every seventh float in [-110, 90]); +inf above 88.73,
 * 0 below -103.98, NaN stays NaN.
 *
 * The form is chosen for GCC's vectorizer. A float select (x < lo ? lo : x)
 * lets jump threading split the loop body into paths, and a select whose
 * arm computes is not if-converted because float ops may trap. So x is
 * clamped to [-104, 88.8] on its bits (an integer min, which has no
 * branch), k is read from the bits of the rounding sum rather than by a
 * float to int conversion, and NaN, which the clamp turns into a number, is
 * added back at the end.
 */
static inline float mcp__ew_expf(float x)
{
    uint32_t ix = mcp__ew_f32_bits(x);
    uint32_t sign = ix & 0x80000000u, mag = ix & 0x7fffffffu;
    uint32_t lim = sign ? 0x42d00000u /* 104 */ : 0x42b1999au /* 88.8 */;
    mag = mag < lim ? mag : lim;
    float xc = mcp__ew_f32_from_bits(sign | mag);
    /* Adding 1.5 * 2^23 rounds to an integer held in the low mantissa bits. */
    float t = xc * 1.44269504088896341f + 12582912.0f;
    float kf = t - 12582912.0f;
    int32_t k = (int32_t)(mcp__ew_f32_bits(t) - mcp__ew_f32_bits(12582912.0f));
    float r = xc - kf * 0.693145751953125f;
    r = r - kf * 1.42860682030941723212e-6f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t k1 = k / 2, k2 = k - k1;
    float s1 = mcp__ew_f32_from_bits((uint32_t)(k1 + 127) << 23);
    float s2 = mcp__ew_f32_from_bits((uint32_t)(k2 + 127) << 23);
    return p * s1 * s2 + (x != x ? x : 0.0f);
}

/*
 * exp(x) for x <= 0 (or NaN), as Softmax needs after subtracting the row
 * maximum; cheaper than mcp__ew_expf and still branch-free so that loops
 * over it vectorize at the baseline SSE2. x = k ln2 + r as there; exp(r) as
 * 1 + r q(r), q of degree 4 fitted to (exp(r) - 1) / r on [-ln2/2, ln2/2]
 * (Chebyshev fit), so that exp(0) is exactly 1; 2^k is one factor, a
 * normal float because x is clamped at -87.3365, where exp(x) is FLT_MIN;
 * below that the result is 0 (no subnormals). Measured: at most 2.9e-7
 * relative (2.4 ulp) from exp in double on every seventh float in
 * [-87.3, 0]; in a loop over 64K floats, 1.4 ns per element against 2.2
 * for mcp__ew_expf (same machine and build flags). exp(-inf) = 0, NaN
 * stays NaN. Positive x gives wrong results: callers guarantee x <= 0.
 */
static inline float mcp__ew_expf_nonpos(float x)
{
    uint32_t mag = mcp__ew_f32_bits(x) & 0x7fffffffu;
    const uint32_t lim = 0x42aeac50u; /* 87.3365 */
    /* Integer selects: see mcp__ew_expf for why not float ones. */
    uint32_t keep = mag < lim ? 0xffffffffu : 0u;
    mag = mag < lim ? mag : lim;
    float xc = mcp__ew_f32_from_bits(0x80000000u | mag);
    float t = xc * 1.44269504088896341f + 12582912.0f;
    float kf = t - 12582912.0f;
    uint32_t k = mcp__ew_f32_bits(t) - mcp__ew_f32_bits(12582912.0f); /* -126 .. 0 */
    float r = xc - kf * 0.693145751953125f;
    r = r - kf * 1.42860682030941723212e-6f;
    float p = 0.0083631730745137109f;
    p = p * r + 0.041875644452337369f;
    p = p * r + 0.16666577025597988f;
    p = p * r + 0.49999372138625482f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    float y = p * mcp__ew_f32_from_bits((k + 127u) << 23);
    return mcp__ew_f32_from_bits(mcp__ew_f32_bits(y) & keep) + (x != x ? x : 0.0f);
}

/* Run functions defined in elementwise_cast.c. */
mcp_status mcp__ew_run_cast(mcp_kernel_ctx *ctx);
mcp_status mcp__ew_run_castlike(mcp_kernel_ctx *ctx);

#endif
