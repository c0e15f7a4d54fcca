#include "tensor/tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct dtype_info {
    int bits;
    const char *name;
    const char *oip;
    const char *onnx;
} dtype_info;

/* Indexed by the ONNX number, which MCP_DTYPE_MAP lists densely from 0. */
static const dtype_info dtypes[] = {
#define MCP__DTYPE_ROW(nm, num, bits, text, oip, onnx) [num] = {bits, text, oip, onnx},
    MCP_DTYPE_MAP(MCP__DTYPE_ROW)
#undef MCP__DTYPE_ROW
};
_Static_assert(sizeof dtypes / sizeof dtypes[0] == MCP_DTYPE_COUNT, "MCP_DTYPE_MAP must number its types 0..n-1");

static dtype_info dtype_lookup(mcp_dtype d)
{
    if ((int)d < 0 || (int)d >= MCP_DTYPE_COUNT) return (dtype_info){0, "invalid", NULL, NULL};
    return dtypes[d];
}

const char *mcp_dtype_name(mcp_dtype d) { return dtype_lookup(d).name; }
int mcp_dtype_size(mcp_dtype d) { return dtype_lookup(d).bits % 8 ? 0 : dtype_lookup(d).bits / 8; }
int mcp_dtype_bits(mcp_dtype d) { return dtype_lookup(d).bits; }

bool mcp_dtype_is_narrow(mcp_dtype d) { return d >= MCP_DTYPE_FLOAT8E4M3FN && d <= MCP_DTYPE_INT2; }
bool mcp_dtype_is_packed(mcp_dtype d) { return mcp_dtype_is_narrow(d) && mcp_dtype_bits(d) < 8; }

size_t mcp_dtype_nbytes(mcp_dtype d, int64_t n)
{
    if (n <= 0) return 0;
    if (d == MCP_DTYPE_STRING) return (size_t)n * sizeof(char *);
    if (mcp_dtype_is_packed(d)) return ((size_t)n * (size_t)mcp_dtype_bits(d) + 7) / 8;
    return (size_t)n * (size_t)mcp_dtype_size(d);
}
const char *mcp_dtype_oip_name(mcp_dtype d) { return dtype_lookup(d).oip; }

mcp_dtype mcp_dtype_from_name(const char *name)
{
    if (!name) return MCP_DTYPE_UNDEFINED;
    for (int d = 1; d < MCP_DTYPE_COUNT; d++)
        if (strcmp(dtypes[d].name, name) == 0 || (dtypes[d].oip && strcmp(dtypes[d].oip, name) == 0))
            return (mcp_dtype)d;
    return MCP_DTYPE_UNDEFINED;
}

mcp_dtype mcp_dtype_from_onnx_name(const char *name)
{
    for (int d = 1; name && d < MCP_DTYPE_COUNT; d++)
        if (strcmp(dtypes[d].onnx, name) == 0) return (mcp_dtype)d;
    return MCP_DTYPE_UNDEFINED;
}

bool mcp_format_same(const mcp_format *a, const mcp_format *b)
{
    if (a == b) return true;
    if (!a || !b || a->to_plain != b->to_plain || a->nbytes != b->nbytes) return false;
    return a->same_layout && a->same_layout(a, b);
}

bool mcp_dtype_is_float(mcp_dtype d)
{
    return d == MCP_DTYPE_FLOAT || d == MCP_DTYPE_DOUBLE || d == MCP_DTYPE_FLOAT16 ||
           d == MCP_DTYPE_BFLOAT16;
}

bool mcp_dtype_is_signed(mcp_dtype d)
{
    return d == MCP_DTYPE_INT8 || d == MCP_DTYPE_INT16 || d == MCP_DTYPE_INT32 ||
           d == MCP_DTYPE_INT64;
}

bool mcp_dtype_is_integer(mcp_dtype d)
{
    return mcp_dtype_is_signed(d) || d == MCP_DTYPE_UINT8 || d == MCP_DTYPE_UINT16 ||
           d == MCP_DTYPE_UINT32 || d == MCP_DTYPE_UINT64;
}

bool mcp_dtype_is_numeric(mcp_dtype d)
{
    return mcp_dtype_is_float(d) || mcp_dtype_is_integer(d) || d == MCP_DTYPE_BOOL;
}

int64_t mcp_shape_numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    return n;
}

int64_t mcp_tensor_numel(const mcp_tensor *t) { return mcp_shape_numel(t->rank, t->dims); }

size_t mcp_tensor_nbytes(const mcp_tensor *t) { return mcp_dtype_nbytes(t->dtype, mcp_tensor_numel(t)); }

mcp_status mcp_tensor_size_check(mcp_dtype dtype, int rank, const int64_t *dims, size_t *nbytes, mcp_err *err)
{
    if (rank < 0 || rank > MCP_MAX_RANK)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "rank %d outside 0..%d", rank,
                           MCP_MAX_RANK);
    bool packed = mcp_dtype_is_packed(dtype);
    /* Packed types count elements here and bytes at the end. */
    size_t es = dtype == MCP_DTYPE_STRING ? sizeof(char *) : packed ? 1 : (size_t)mcp_dtype_size(dtype);
    if (es == 0)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "cannot allocate a tensor of dtype %s",
                           mcp_dtype_name(dtype));
    size_t total = es;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "negative dimension %lld at axis %d",
                               (long long)dims[i], i);
        if (!mcp_mul_overflow_size(total, (size_t)dims[i], &total) || total > ((size_t)1 << 46))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tensor size overflows");
    }
    *nbytes = packed ? (total * (size_t)mcp_dtype_bits(dtype) + 7) / 8 : total;
    return MCP_STATUS_OK;
}

mcp_status mcp_tensor_alloc(mcp_tensor *t, mcp_dtype dtype, int rank, const int64_t *dims,
                            mcp_err *err)
{
    memset(t, 0, sizeof *t);
    size_t total = 0;
    mcp_status st = mcp_tensor_size_check(dtype, rank, dims, &total, err);
    if (st != MCP_STATUS_OK) return st;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    t->data = mcp_calloc(1, total);
    if (!t->data) {
        memset(t, 0, sizeof *t);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory allocating %zu bytes", total);
    }
    t->owns_data = true;
    if (dtype == MCP_DTYPE_STRING) {
        int64_t n = mcp_shape_numel(rank, dims);
        char **s = t->data;
        for (int64_t i = 0; i < n; i++) {
            s[i] = mcp_calloc(1, 1);
            if (!s[i]) {
                mcp_tensor_release(t);
                return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            }
        }
    }
    return MCP_STATUS_OK;
}

void mcp_tensor_release(mcp_tensor *t)
{
    if (!t) return;
    if (t->owns_data && t->data) {
        if (t->dtype == MCP_DTYPE_STRING) {
            int64_t n = mcp_tensor_numel(t);
            char **s = t->data;
            for (int64_t i = 0; i < n; i++) mcp_free(s[i]);
        }
        mcp_free(t->data);
    }
    memset(t, 0, sizeof *t);
}

mcp_status mcp_tensor_copy(mcp_tensor *dst, const mcp_tensor *src, mcp_err *err)
{
    mcp_status st = mcp_tensor_alloc(dst, src->dtype, src->rank, src->dims, err);
    if (st != MCP_STATUS_OK) return st;
    if (src->dtype == MCP_DTYPE_STRING) {
        int64_t n = mcp_tensor_numel(src);
        char *const *s = src->data;
        for (int64_t i = 0; i < n; i++) {
            st = mcp_tensor_set_string(dst, i, s[i], strlen(s[i]));
            if (st != MCP_STATUS_OK) {
                mcp_tensor_release(dst);
                return mcp_err_set(err, st, "out of memory copying strings");
            }
        }
    } else if (src->format) {
        /* A copy is always plain. */
        st = src->format->to_plain(src->format, src->data, dst->data, err);
        if (st != MCP_STATUS_OK) mcp_tensor_release(dst);
        return st;
    } else if (mcp_tensor_nbytes(src) > 0) {
        memcpy(dst->data, src->data, mcp_tensor_nbytes(src));
    }
    return MCP_STATUS_OK;
}

mcp_status mcp_tensor_set_string(mcp_tensor *t, int64_t i, const char *s, size_t len)
{
    char *c = mcp_malloc(len + 1);
    if (!c) return MCP_STATUS_OUT_OF_MEMORY;
    if (len) memcpy(c, s, len);
    c[len] = '\0';
    char **arr = t->data;
    mcp_free(arr[i]);
    arr[i] = c;
    return MCP_STATUS_OK;
}

/* ---- float16 / bfloat16 ---- */

float mcp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            /* Subnormal: normalize. */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t mcp_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
    if (absx >= 0x477ff000u) return sign | 0x7c00; /* overflow to inf (>= 65520) */
    if (absx < 0x38800000u) {
        /* Result is subnormal or zero: scale and round to nearest even. */
        float af;
        memcpy(&af, &absx, 4);
        float scaled = af * 16777216.0f; /* 2^24: units of the smallest subnormal */
        uint32_t r = (uint32_t)scaled;
        float frac = scaled - (float)r;
        if (frac > 0.5f || (frac == 0.5f && (r & 1))) r++;
        return sign | (uint16_t)r;
    }
    uint32_t exp = ((absx >> 23) - 127 + 15);
    uint32_t man = absx & 0x7fffff;
    uint32_t h = (exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

float mcp_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t mcp_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    uint32_t lsb = (x >> 16) & 1;
    x += 0x7fff + lsb;
    return (uint16_t)(x >> 16);
}

/* ---- narrow types (ONNX 17-26) ---- */

uint8_t mcp_packed_get(const void *data, int bits, int64_t i)
{
    int per = 8 / bits;
    unsigned shift = (unsigned)((i % per) * bits);
    return (uint8_t)((((const uint8_t *)data)[i / per] >> shift) & ((1u << bits) - 1));
}

void mcp_packed_set(void *data, int bits, int64_t i, uint8_t code)
{
    int per = 8 / bits;
    unsigned shift = (unsigned)((i % per) * bits), mask = ((1u << bits) - 1) << shift;
    uint8_t *b = (uint8_t *)data + i / per;
    *b = (uint8_t)((*b & ~mask) | (((unsigned)code << shift) & mask));
}

/*
 * The small float formats, described by their fields. `nan` says where a
 * format keeps NaN: S.1111.111 (E4M3FN), the negative-zero code 0x80 (the
 * FNUZ kinds, which have neither -0 nor infinities), IEEE's all-ones
 * exponent with infinities (E5M2), or nowhere (float4e2m1).
 */
typedef enum mini_nan { MINI_NAN_ALL_ONES, MINI_NAN_NEG_ZERO, MINI_NAN_IEEE, MINI_NAN_NONE } mini_nan;

typedef struct mini_fmt {
    int mbits;        /* mantissa bits */
    int bias;         /* exponent bias */
    uint8_t sign;     /* the sign bit */
    uint8_t max_code; /* the largest finite magnitude */
    mini_nan nan;
} mini_fmt;

static const mini_fmt *mini_of(mcp_dtype d)
{
    static const mini_fmt e4m3fn = {3, 7, 0x80, 0x7E, MINI_NAN_ALL_ONES};
    static const mini_fmt e4m3fnuz = {3, 8, 0x80, 0x7F, MINI_NAN_NEG_ZERO};
    static const mini_fmt e5m2 = {2, 15, 0x80, 0x7B, MINI_NAN_IEEE};
    static const mini_fmt e5m2fnuz = {2, 16, 0x80, 0x7F, MINI_NAN_NEG_ZERO};
    static const mini_fmt e2m1 = {1, 1, 0x08, 0x07, MINI_NAN_NONE};
    switch (d) {
    case MCP_DTYPE_FLOAT8E4M3FN: return &e4m3fn;
    case MCP_DTYPE_FLOAT8E4M3FNUZ: return &e4m3fnuz;
    case MCP_DTYPE_FLOAT8E5M2: return &e5m2;
    case MCP_DTYPE_FLOAT8E5M2FNUZ: return &e5m2fnuz;
    case MCP_DTYPE_FLOAT4E2M1: return &e2m1;
    default: return NULL;
    }
}

/* The magnitude a code (sign bit clear) stands for, specials aside. */
static double mini_magnitude(const mini_fmt *f, unsigned c)
{
    unsigned e = c >> f->mbits, m = c & ((1u << f->mbits) - 1);
    if (e == 0) return ldexp((double)m, 1 - f->bias - f->mbits);
    return ldexp((double)((1u << f->mbits) | m), (int)e - f->bias - f->mbits);
}

static double mini_decode(const mini_fmt *f, uint8_t c)
{
    unsigned mag = c & (unsigned)(f->sign - 1);
    bool neg = (c & f->sign) != 0;
    switch (f->nan) {
    case MINI_NAN_ALL_ONES:
        if (mag == 0x7F) return NAN;
        break;
    case MINI_NAN_NEG_ZERO:
        if (c == 0x80) return NAN;
        break;
    case MINI_NAN_IEEE:
        if ((mag >> f->mbits) == 0x1F) return (mag & 3) ? NAN : neg ? -INFINITY : INFINITY;
        break;
    case MINI_NAN_NONE: break;
    }
    double v = mini_magnitude(f, mag);
    return neg ? -v : v;
}

/* Rounds |v| to the format with an unbounded exponent (nearest, ties to
 * even: rint in the default rounding mode), then places it. */
static uint8_t mini_encode(const mini_fmt *f, double v, bool saturate)
{
    uint8_t s = signbit(v) ? f->sign : 0;
    if (isnan(v)) {
        switch (f->nan) {
        case MINI_NAN_ALL_ONES: return (uint8_t)(s | 0x7F);
        case MINI_NAN_NEG_ZERO: return 0x80;
        case MINI_NAN_IEEE: return (uint8_t)(s | 0x7F);
        case MINI_NAN_NONE: return f->max_code; /* float4e2m1: NaN gives 6 */
        }
    }
    double a = fabs(v), max = mini_magnitude(f, f->max_code);
    unsigned code = 0;
    bool over = isinf(a);
    if (!over) {
        int k = 0;
        (void)frexp(a, &k);
        int e = k - 1, emin = 1 - f->bias;
        if (e < emin) e = emin;
        double r = rint(ldexp(a, f->mbits - e)); /* exact scaling, one rounding */
        double one = (double)(1u << f->mbits);
        if (r >= 2 * one) { /* rounded up to the next binade */
            r /= 2;
            e++;
        }
        over = ldexp(r, e - f->mbits) > max;
        if (!over) code = r < one ? (unsigned)r : ((unsigned)(e + f->bias) << f->mbits) | (unsigned)(r - one);
    }
    if (over) {
        if (saturate || f->nan == MINI_NAN_NONE) return (uint8_t)(s | f->max_code);
        switch (f->nan) {
        case MINI_NAN_ALL_ONES: return (uint8_t)(s | 0x7F);
        case MINI_NAN_IEEE: return (uint8_t)(s | 0x7C);
        default: return 0x80;
        }
    }
    if (code == 0 && f->nan == MINI_NAN_NEG_ZERO) return 0; /* no -0 */
    return (uint8_t)(s | code);
}

static uint8_t e8m0_encode(double v, bool saturate, mcp_e8m0_round round)
{
    /* The sign is ignored (negative inputs are unspecified); zero is the
     * smallest value when saturating, NaN otherwise; infinity the largest
     * when saturating (Cast-24's table). */
    if (isnan(v)) return 0xFF;
    double a = fabs(v);
    if (isinf(a)) return saturate ? 0xFE : 0xFF;
    if (a == 0) return saturate ? 0x00 : 0xFF;
    int k = 0;
    double fr = frexp(a, &k); /* a = fr * 2^k, fr in [0.5, 1) */
    int e = k - 1;            /* a = (2 fr) * 2^e */
    double m = 2 * fr - 1;    /* fraction above the power of two */
    if (round == MCP_E8M0_ROUND_UP && m > 0) e++;
    else if (round == MCP_E8M0_ROUND_NEAREST && m >= 0.5) e++;
    int code = e + 127;
    if (code > 254) return saturate ? 0xFE : 0xFF;
    if (code < 0) return saturate ? 0x00 : 0xFF;
    return (uint8_t)code;
}

static bool narrow_int_range(mcp_dtype d, int *lo, int *hi)
{
    switch (d) {
    case MCP_DTYPE_UINT4: *lo = 0, *hi = 15; return true;
    case MCP_DTYPE_INT4: *lo = -8, *hi = 7; return true;
    case MCP_DTYPE_UINT2: *lo = 0, *hi = 3; return true;
    case MCP_DTYPE_INT2: *lo = -2, *hi = 1; return true;
    default: return false;
    }
}

double mcp_narrow_to_f64(mcp_dtype d, uint8_t code)
{
    const mini_fmt *f = mini_of(d);
    if (f) return mini_decode(f, code);
    switch (d) {
    case MCP_DTYPE_FLOAT8E8M0: return code == 0xFF ? NAN : ldexp(1.0, (int)code - 127);
    case MCP_DTYPE_UINT4: return code & 0xF;
    case MCP_DTYPE_INT4: return (code & 0x8) ? (double)(code & 0xF) - 16 : (double)(code & 0xF);
    case MCP_DTYPE_UINT2: return code & 0x3;
    case MCP_DTYPE_INT2: return (code & 0x2) ? (double)(code & 0x3) - 4 : (double)(code & 0x3);
    default: return 0.0;
    }
}

uint8_t mcp_narrow_from_f64(mcp_dtype d, double v, bool saturate, mcp_e8m0_round round)
{
    const mini_fmt *f = mini_of(d);
    if (f) return mini_encode(f, v, saturate);
    if (d == MCP_DTYPE_FLOAT8E8M0) return e8m0_encode(v, saturate, round);
    int lo = 0, hi = 0;
    if (!narrow_int_range(d, &lo, &hi) || isnan(v)) return 0;
    double r = v < lo ? lo : v > hi ? hi : rint(v);
    return (uint8_t)((int)r & ((1 << mcp_dtype_bits(d)) - 1));
}

/* A narrow element's code, unpacked. */
static uint8_t narrow_code(mcp_dtype d, const void *p, int64_t i)
{
    return mcp_dtype_is_packed(d) ? mcp_packed_get(p, mcp_dtype_bits(d), i) : ((const uint8_t *)p)[i];
}

static void narrow_store(mcp_dtype d, void *p, int64_t i, uint8_t code)
{
    if (mcp_dtype_is_packed(d)) mcp_packed_set(p, mcp_dtype_bits(d), i, code);
    else ((uint8_t *)p)[i] = code;
}

/* ---- generic element access ---- */

double mcp_elem_get_f64(mcp_dtype d, const void *p, int64_t i)
{
    switch (d) {
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
    default: return mcp_dtype_is_narrow(d) ? mcp_narrow_to_f64(d, narrow_code(d, p, i)) : 0.0;
    }
}

/* Float-to-integer conversion that saturates instead of invoking undefined
 * behaviour on out-of-range or NaN values. */
static int64_t f64_to_i64(double v)
{
    if (isnan(v)) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static uint64_t f64_to_u64(double v)
{
    if (isnan(v) || v <= 0) return v <= -1.0 ? (uint64_t)f64_to_i64(v) : 0;
    if (v >= 18446744073709551615.0) return UINT64_MAX;
    return (uint64_t)v;
}

void mcp_elem_set_f64(mcp_dtype d, void *p, int64_t i, double v)
{
    switch (d) {
    case MCP_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
    case MCP_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
    case MCP_DTYPE_FLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_f16((float)v); break;
    case MCP_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = mcp_f32_to_bf16((float)v); break;
    case MCP_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)f64_to_i64(v); break;
    case MCP_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)f64_to_i64(v); break;
    case MCP_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)f64_to_i64(v); break;
    case MCP_DTYPE_INT64: ((int64_t *)p)[i] = f64_to_i64(v); break;
    case MCP_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)f64_to_u64(v); break;
    case MCP_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)f64_to_u64(v); break;
    case MCP_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)f64_to_u64(v); break;
    case MCP_DTYPE_UINT64: ((uint64_t *)p)[i] = f64_to_u64(v); break;
    case MCP_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0.0; break;
    default:
        if (mcp_dtype_is_narrow(d)) narrow_store(d, p, i, mcp_narrow_from_f64(d, v, true, MCP_E8M0_ROUND_UP));
        break;
    }
}

int64_t mcp_elem_get_i64(mcp_dtype d, const void *p, int64_t i)
{
    switch (d) {
    case MCP_DTYPE_INT8: return ((const int8_t *)p)[i];
    case MCP_DTYPE_INT16: return ((const int16_t *)p)[i];
    case MCP_DTYPE_INT32: return ((const int32_t *)p)[i];
    case MCP_DTYPE_INT64: return ((const int64_t *)p)[i];
    case MCP_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case MCP_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case MCP_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case MCP_DTYPE_UINT64: return (int64_t)((const uint64_t *)p)[i];
    case MCP_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return f64_to_i64(mcp_elem_get_f64(d, p, i));
    }
}

void mcp_elem_set_i64(mcp_dtype d, void *p, int64_t i, int64_t v)
{
    switch (d) {
    case MCP_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case MCP_DTYPE_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case MCP_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case MCP_DTYPE_INT64: ((int64_t *)p)[i] = v; break;
    case MCP_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case MCP_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case MCP_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case MCP_DTYPE_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case MCP_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case MCP_DTYPE_UINT4: case MCP_DTYPE_INT4: case MCP_DTYPE_UINT2: case MCP_DTYPE_INT2:
        /* Exact for every int64: the clamp comes before any rounding. */
        mcp_elem_set_f64(d, p, i, v < -16 ? -16.0 : v > 16 ? 16.0 : (double)v);
        break;
    default: mcp_elem_set_f64(d, p, i, (double)v); break;
    }
}

double mcp_tensor_get_f64(const mcp_tensor *t, int64_t i) { return mcp_elem_get_f64(t->dtype, t->data, i); }
void mcp_tensor_set_f64(mcp_tensor *t, int64_t i, double v) { mcp_elem_set_f64(t->dtype, t->data, i, v); }
int64_t mcp_tensor_get_i64(const mcp_tensor *t, int64_t i) { return mcp_elem_get_i64(t->dtype, t->data, i); }
void mcp_tensor_set_i64(mcp_tensor *t, int64_t i, int64_t v) { mcp_elem_set_i64(t->dtype, t->data, i, v); }

/* ---- shapes ---- */

bool mcp_broadcast_shapes(int ra, const int64_t *a, int rb, const int64_t *b, int *rout,
                          int64_t *out)
{
    int r = ra > rb ? ra : rb;
    if (r > MCP_MAX_RANK) return false;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - ra), ib = i - (r - rb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da == db || db == 1) out[i] = da;
        else if (da == 1) out[i] = db;
        else return false;
    }
    *rout = r;
    return true;
}

void mcp_contiguous_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

void mcp_broadcast_strides(int rank, const int64_t *dims, int out_rank, const int64_t *out_dims,
                           int64_t *strides)
{
    int64_t own[MCP_MAX_RANK];
    mcp_contiguous_strides(rank, dims, own);
    for (int i = 0; i < out_rank; i++) {
        int j = i - (out_rank - rank);
        strides[i] = (j >= 0 && dims[j] == out_dims[i] && dims[j] != 1) ? own[j] : 0;
    }
}

char *mcp_shape_str(int rank, const int64_t *dims, char *buf, size_t cap)
{
    size_t off = 0;
    off += (size_t)snprintf(buf + off, cap > off ? cap - off : 0, "[");
    for (int i = 0; i < rank && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (off < cap) snprintf(buf + off, cap - off, "]");
    return buf;
}

/* ---- values ---- */

mcp_value *mcp_value_new(void) { return mcp_calloc(1, sizeof(mcp_value)); }

void mcp_value_clear(mcp_value *v)
{
    if (!v) return;
    mcp_tensor_release(&v->tensor);
    for (int64_t i = 0; i < v->seq_len; i++) mcp_tensor_release(&v->seq[i]);
    mcp_free(v->seq);
    memset(v, 0, sizeof *v);
}

void mcp_value_free(mcp_value *v)
{
    if (!v) return;
    mcp_value_clear(v);
    mcp_free(v);
}

static mcp_status seq_reserve(mcp_value *v, int64_t n, mcp_err *err)
{
    if (n <= v->seq_cap) return MCP_STATUS_OK;
    int64_t cap = v->seq_cap ? v->seq_cap * 2 : 4;
    while (cap < n) cap *= 2;
    mcp_tensor *s = mcp_realloc(v->seq, (size_t)cap * sizeof *s);
    if (!s) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory growing a sequence");
    v->seq = s;
    v->seq_cap = cap;
    return MCP_STATUS_OK;
}

mcp_status mcp_value_seq_push_move(mcp_value *v, mcp_tensor *t, mcp_err *err)
{
    mcp_status st = seq_reserve(v, v->seq_len + 1, err);
    if (st != MCP_STATUS_OK) return st;
    v->seq[v->seq_len++] = *t;
    memset(t, 0, sizeof *t);
    return MCP_STATUS_OK;
}

mcp_status mcp_value_seq_insert(mcp_value *v, int64_t pos, const mcp_tensor *t, mcp_err *err)
{
    if (pos < 0) pos = v->seq_len;
    if (pos > v->seq_len)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "sequence position %lld out of range",
                           (long long)pos);
    mcp_status st = seq_reserve(v, v->seq_len + 1, err);
    if (st != MCP_STATUS_OK) return st;
    mcp_tensor copy;
    st = mcp_tensor_copy(&copy, t, err);
    if (st != MCP_STATUS_OK) return st;
    memmove(&v->seq[pos + 1], &v->seq[pos], (size_t)(v->seq_len - pos) * sizeof(mcp_tensor));
    v->seq[pos] = copy;
    v->seq_len++;
    return MCP_STATUS_OK;
}

mcp_status mcp_value_copy(mcp_value *dst, const mcp_value *src, mcp_err *err)
{
    mcp_value_clear(dst);
    dst->kind = src->kind;
    dst->elem_dtype = src->elem_dtype;
    dst->elem_is_sequence = src->elem_is_sequence;
    if (src->kind == MCP_VALUE_TENSOR) return mcp_tensor_copy(&dst->tensor, &src->tensor, err);
    if (src->kind == MCP_VALUE_SEQUENCE) {
        for (int64_t i = 0; i < src->seq_len; i++) {
            mcp_status st = mcp_value_seq_insert(dst, -1, &src->seq[i], err);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    return MCP_STATUS_OK;
}
