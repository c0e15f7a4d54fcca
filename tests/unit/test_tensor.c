/*
 * Unit tests for src/tensor: dtype table, float16/bfloat16 conversions,
 * broadcasting, tensor allocation and values, .npy read/write (round trips
 * and malformed files).
 */
#include <float.h>
#include <math.h>

#include "tensor/tensor.h"
#include "test_util.h"

/* ---- dtypes ---- */

static void test_dtype_table(void)
{
    static const struct {
        mcp_dtype d;
        int size;
        const char *name;
    } expect[] = {
        {MCP_DTYPE_UNDEFINED, 0, "undefined"}, {MCP_DTYPE_FLOAT, 4, "float32"},
        {MCP_DTYPE_UINT8, 1, "uint8"},         {MCP_DTYPE_INT8, 1, "int8"},
        {MCP_DTYPE_UINT16, 2, "uint16"},       {MCP_DTYPE_INT16, 2, "int16"},
        {MCP_DTYPE_INT32, 4, "int32"},         {MCP_DTYPE_INT64, 8, "int64"},
        {MCP_DTYPE_STRING, 0, "string"},       {MCP_DTYPE_BOOL, 1, "bool"},
        {MCP_DTYPE_FLOAT16, 2, "float16"},     {MCP_DTYPE_DOUBLE, 8, "float64"},
        {MCP_DTYPE_UINT32, 4, "uint32"},       {MCP_DTYPE_UINT64, 8, "uint64"},
        {MCP_DTYPE_COMPLEX64, 8, "complex64"}, {MCP_DTYPE_COMPLEX128, 16, "complex128"},
        {MCP_DTYPE_BFLOAT16, 2, "bfloat16"},
        {MCP_DTYPE_FLOAT8E4M3FN, 1, "float8e4m3fn"},     {MCP_DTYPE_FLOAT8E4M3FNUZ, 1, "float8e4m3fnuz"},
        {MCP_DTYPE_FLOAT8E5M2, 1, "float8e5m2"},         {MCP_DTYPE_FLOAT8E5M2FNUZ, 1, "float8e5m2fnuz"},
        {MCP_DTYPE_UINT4, 0, "uint4"},                   {MCP_DTYPE_INT4, 0, "int4"},
        {MCP_DTYPE_FLOAT4E2M1, 0, "float4e2m1"},         {MCP_DTYPE_FLOAT8E8M0, 1, "float8e8m0"},
        {MCP_DTYPE_UINT2, 0, "uint2"},                   {MCP_DTYPE_INT2, 0, "int2"},
    };
    int n = (int)(sizeof expect / sizeof expect[0]);
    TU_CHECK_INT(n, MCP_DTYPE_COUNT);
    for (int i = 0; i < n; i++) {
        TU_CHECK_INT((int)expect[i].d, i); /* ONNX numbering */
        TU_CHECK_INT(mcp_dtype_size(expect[i].d), expect[i].size);
        TU_CHECK_STR(mcp_dtype_name(expect[i].d), expect[i].name);
    }
    TU_CHECK_STR(mcp_dtype_name((mcp_dtype)99), "invalid");
    TU_CHECK_STR(mcp_dtype_name((mcp_dtype)-1), "invalid");
    /* The other names from the same list: the protocol's and ONNX's. */
    TU_CHECK_STR(mcp_dtype_oip_name(MCP_DTYPE_FLOAT), "FP32");
    TU_CHECK_STR(mcp_dtype_oip_name(MCP_DTYPE_STRING), "BYTES");
    TU_CHECK(mcp_dtype_oip_name(MCP_DTYPE_COMPLEX64) == NULL && mcp_dtype_oip_name((mcp_dtype)99) == NULL);
    TU_CHECK_INT(mcp_dtype_from_name("FP16"), MCP_DTYPE_FLOAT16);
    TU_CHECK_INT(mcp_dtype_from_name("bfloat16"), MCP_DTYPE_BFLOAT16);
    TU_CHECK_INT(mcp_dtype_from_name("undefined"), MCP_DTYPE_UNDEFINED);
    TU_CHECK_INT(mcp_dtype_from_name("fp32"), MCP_DTYPE_UNDEFINED);
    TU_CHECK_INT(mcp_dtype_from_name(NULL), MCP_DTYPE_UNDEFINED);
    TU_CHECK_INT(mcp_dtype_from_onnx_name("DOUBLE"), MCP_DTYPE_DOUBLE);
    TU_CHECK_INT(mcp_dtype_from_onnx_name("BFLOAT16"), MCP_DTYPE_BFLOAT16);
    TU_CHECK_INT(mcp_dtype_from_onnx_name("UNDEFINED"), MCP_DTYPE_UNDEFINED);
    TU_CHECK_INT(mcp_dtype_from_onnx_name("float"), MCP_DTYPE_UNDEFINED);
    TU_CHECK_INT(mcp_dtype_size((mcp_dtype)99), 0);

    TU_CHECK(mcp_dtype_is_float(MCP_DTYPE_FLOAT16) && mcp_dtype_is_float(MCP_DTYPE_BFLOAT16));
    TU_CHECK(mcp_dtype_is_float(MCP_DTYPE_DOUBLE) && !mcp_dtype_is_float(MCP_DTYPE_INT32));
    TU_CHECK(mcp_dtype_is_integer(MCP_DTYPE_UINT64) && !mcp_dtype_is_integer(MCP_DTYPE_BOOL));
    TU_CHECK(mcp_dtype_is_signed(MCP_DTYPE_INT8) && !mcp_dtype_is_signed(MCP_DTYPE_UINT8));
    TU_CHECK(mcp_dtype_is_numeric(MCP_DTYPE_BOOL) && !mcp_dtype_is_numeric(MCP_DTYPE_STRING));
    TU_CHECK(!mcp_dtype_is_numeric(MCP_DTYPE_UNDEFINED));
    /* The narrow types count as none of those. */
    for (int d = MCP_DTYPE_FLOAT8E4M3FN; d <= MCP_DTYPE_INT2; d++)
        TU_CHECK(mcp_dtype_is_narrow((mcp_dtype)d) && !mcp_dtype_is_numeric((mcp_dtype)d));
    TU_CHECK(!mcp_dtype_is_narrow(MCP_DTYPE_BFLOAT16) && !mcp_dtype_is_narrow((mcp_dtype)27));
    TU_CHECK_INT(mcp_dtype_from_onnx_name("FLOAT8E5M2FNUZ"), MCP_DTYPE_FLOAT8E5M2FNUZ);
    TU_CHECK(mcp_dtype_oip_name(MCP_DTYPE_INT4) == NULL);

    TU_CHECK_STR(mcp_status_str(MCP_STATUS_OK), "ok");
    TU_CHECK_STR(mcp_status_str(MCP_STATUS_INVALID_MODEL), "invalid model");
    TU_CHECK_STR(mcp_status_str((mcp_status)1000), "unknown status");
}

/* ---- float16 ---- */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Independent reference: float16 value of bit pattern h, computed in double. */
static double ref_f16_value(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exp == 0) return sign * ldexp(man, -24);
    if (exp == 31) return man ? NAN : sign * INFINITY;
    return sign * ldexp(1024 + man, exp - 25);
}

/* Independent reference for float -> float16, round to nearest even, using
 * double arithmetic and rint() instead of bit manipulation. */
static uint16_t ref_f32_to_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double v = fabs((double)f);
    if (isinf(f) || v >= 65520.0) return sign | 0x7c00;
    if (v < ldexp(1.0, -14)) return sign | (uint16_t)rint(ldexp(v, 24));
    int e;
    frexp(v, &e);
    int E = e - 1; /* v in [2^E, 2^(E+1)) */
    double u = rint(ldexp(v, 10 - E));
    if (u == 2048.0) {
        E++;
        u = 1024.0;
    }
    if (E + 15 >= 31) return sign | 0x7c00;
    return sign | (uint16_t)(((E + 15) << 10) | ((int)u - 1024));
}

static bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

static void test_f16_known_values(void)
{
    TU_CHECK_INT(mcp_f32_to_f16(0.0f), 0x0000);
    TU_CHECK_INT(mcp_f32_to_f16(-0.0f), 0x8000);
    TU_CHECK_INT(mcp_f32_to_f16(1.0f), 0x3c00);
    TU_CHECK_INT(mcp_f32_to_f16(-2.0f), 0xc000);
    TU_CHECK_INT(mcp_f32_to_f16(65504.0f), 0x7bff);           /* largest finite */
    TU_CHECK_INT(mcp_f32_to_f16(ldexpf(1.0f, -14)), 0x0400);  /* smallest normal */
    TU_CHECK_INT(mcp_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);  /* smallest subnormal */
    TU_CHECK_INT(mcp_f32_to_f16(-ldexpf(1.0f, -24)), 0x8001);
    TU_CHECK_INT(mcp_f32_to_f16(ldexpf(1023.0f, -24)), 0x03ff); /* largest subnormal */
    TU_CHECK_INT(mcp_f32_to_f16(INFINITY), 0x7c00);
    TU_CHECK_INT(mcp_f32_to_f16(-INFINITY), 0xfc00);
    TU_CHECK(f16_is_nan(mcp_f32_to_f16(NAN)));
    TU_CHECK(f16_is_nan(mcp_f32_to_f16(bits_f32(0x7f800001u)))); /* signalling NaN stays NaN */
    TU_CHECK(f16_is_nan(mcp_f32_to_f16(bits_f32(0xffc00000u))));

    /* Overflow: 65519 rounds down to 65504, 65520 (the midpoint to 2^16) goes to inf. */
    TU_CHECK_INT(mcp_f32_to_f16(65519.0f), 0x7bff);
    TU_CHECK_INT(mcp_f32_to_f16(65520.0f), 0x7c00);
    TU_CHECK_INT(mcp_f32_to_f16(1e6f), 0x7c00);
    TU_CHECK_INT(mcp_f32_to_f16(-1e6f), 0xfc00);
    TU_CHECK_INT(mcp_f32_to_f16(FLT_MAX), 0x7c00);

    /* Ties to even in the normal range: 1 + 2^-11 lies halfway between
     * 0x3c00 and 0x3c01 and goes to the even 0x3c00; 1 + 3*2^-11 lies
     * between 0x3c01 and 0x3c02 and goes to 0x3c02. */
    TU_CHECK_INT(mcp_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
    TU_CHECK_INT(mcp_f32_to_f16(1.0f + 3.0f * ldexpf(1.0f, -11)), 0x3c02);
    TU_CHECK_INT(mcp_f32_to_f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), 0x3c01);
    TU_CHECK_INT(mcp_f32_to_f16(1.0f + ldexpf(1.0f, -11) - ldexpf(1.0f, -20)), 0x3c00);
    /* Rounding that carries into the exponent: just under 2 rounds to 2. */
    TU_CHECK_INT(mcp_f32_to_f16(2.0f - ldexpf(1.0f, -12)), 0x4000);

    /* Ties to even among subnormals: 2^-25 is half the smallest subnormal
     * (goes to 0), 3*2^-25 is 1.5 units (goes to 2 units). */
    TU_CHECK_INT(mcp_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);
    TU_CHECK_INT(mcp_f32_to_f16(-ldexpf(1.0f, -25)), 0x8000);
    TU_CHECK_INT(mcp_f32_to_f16(3.0f * ldexpf(1.0f, -25)), 0x0002);
    TU_CHECK_INT(mcp_f32_to_f16(ldexpf(1.0f, -25) + ldexpf(1.0f, -40)), 0x0001);
    /* Largest subnormal plus half a unit: tie between 0x03ff and 0x0400. */
    TU_CHECK_INT(mcp_f32_to_f16(ldexpf(2047.0f, -25)), 0x0400);
    TU_CHECK_INT(mcp_f32_to_f16(1e-30f), 0x0000);
    TU_CHECK_INT(mcp_f32_to_f16(bits_f32(0x00000001u)), 0x0000); /* float subnormal */

    TU_CHECK(mcp_f16_to_f32(0x3c00) == 1.0f);
    TU_CHECK(mcp_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    TU_CHECK(mcp_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    TU_CHECK(mcp_f16_to_f32(0x7bff) == 65504.0f);
    TU_CHECK(signbit(mcp_f16_to_f32(0x8000)) && mcp_f16_to_f32(0x8000) == 0.0f);
    TU_CHECK(isinf(mcp_f16_to_f32(0xfc00)) && mcp_f16_to_f32(0xfc00) < 0);
    TU_CHECK(isnan(mcp_f16_to_f32(0x7e00)) && isnan(mcp_f16_to_f32(0x7c01)));
}

static void test_f16_exhaustive(void)
{
    int bad_decode = 0, bad_roundtrip = 0, bad_ties = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = mcp_f16_to_f32((uint16_t)h);
        double ref = ref_f16_value((uint16_t)h);
        if (f16_is_nan((uint16_t)h)) {
            if (!isnan(f) || !f16_is_nan(mcp_f32_to_f16(f))) bad_roundtrip++;
            continue;
        }
        if ((double)f != ref || (signbit(f) != 0) != ((h & 0x8000) != 0)) bad_decode++;
        if (mcp_f32_to_f16(f) != h) bad_roundtrip++;
        /* The float32 values just around the midpoint above this half. */
        if ((h & 0x7c00) != 0x7c00) {
            uint32_t b = f32_bits(f);
            for (int d = -2; d <= 2; d++) {
                float g = bits_f32(b + 0x1000u + (uint32_t)d);
                if (isnan(g)) continue;
                if (mcp_f32_to_f16(g) != ref_f32_to_f16(g)) bad_ties++;
            }
        }
    }
    TU_CHECK_INT(bad_decode, 0);
    TU_CHECK_INT(bad_roundtrip, 0);
    TU_CHECK_INT(bad_ties, 0);

    /* A strided sweep over all float32 bit patterns against the reference. */
    int bad_sweep = 0;
    uint32_t first_bad = 0;
    for (uint64_t b = 0; b <= 0xffffffffu; b += 4093) {
        float g = bits_f32((uint32_t)b);
        uint16_t got = mcp_f32_to_f16(g);
        bool ok = isnan(g) ? f16_is_nan(got) : got == ref_f32_to_f16(g);
        if (!ok && bad_sweep++ == 0) first_bad = (uint32_t)b;
    }
    if (bad_sweep) fprintf(stderr, "first float16 mismatch at float bits 0x%08x\n", first_bad);
    TU_CHECK_INT(bad_sweep, 0);
}

/* ---- bfloat16 ---- */

static bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

static uint16_t ref_f32_to_bf16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double v = fabs((double)f);
    if (isinf(f)) return sign | 0x7f80;
    if (v < ldexp(1.0, -126)) return sign | (uint16_t)rint(ldexp(v, 133));
    int e;
    frexp(v, &e);
    int E = e - 1;
    double u = rint(ldexp(v, 7 - E));
    if (u == 256.0) {
        E++;
        u = 128.0;
    }
    if (E + 127 >= 255) return sign | 0x7f80;
    return sign | (uint16_t)(((E + 127) << 7) | ((int)u - 128));
}

static void test_bf16(void)
{
    TU_CHECK_INT(mcp_f32_to_bf16(1.0f), 0x3f80);
    TU_CHECK_INT(mcp_f32_to_bf16(-2.0f), 0xc000);
    TU_CHECK_INT(mcp_f32_to_bf16(0.0f), 0x0000);
    TU_CHECK_INT(mcp_f32_to_bf16(-0.0f), 0x8000);
    TU_CHECK_INT(mcp_f32_to_bf16(INFINITY), 0x7f80);
    TU_CHECK_INT(mcp_f32_to_bf16(-INFINITY), 0xff80);
    TU_CHECK_INT(mcp_f32_to_bf16(FLT_MAX), 0x7f80); /* above the last midpoint */
    TU_CHECK(bf16_is_nan(mcp_f32_to_bf16(NAN)));
    TU_CHECK(bf16_is_nan(mcp_f32_to_bf16(bits_f32(0x7f800001u)))); /* must not become inf */
    TU_CHECK(bf16_is_nan(mcp_f32_to_bf16(bits_f32(0xff800001u))));
    /* Ties to even: 1 + 2^-8 halfway between 0x3f80 and 0x3f81. */
    TU_CHECK_INT(mcp_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);
    TU_CHECK_INT(mcp_f32_to_bf16(1.0f + 3.0f * ldexpf(1.0f, -8)), 0x3f82);
    TU_CHECK_INT(mcp_f32_to_bf16(bits_f32(0x3f808001u)), 0x3f81);
    /* Subnormals. */
    TU_CHECK_INT(mcp_f32_to_bf16(bits_f32(0x00010000u)), 0x0001);
    TU_CHECK_INT(mcp_f32_to_bf16(bits_f32(0x00008000u)), 0x0000); /* tie to even 0 */
    TU_CHECK_INT(mcp_f32_to_bf16(bits_f32(0x00018000u)), 0x0002); /* tie to even 2 */
    TU_CHECK(mcp_bf16_to_f32(0x0001) == ldexpf(1.0f, -133));
    TU_CHECK(mcp_bf16_to_f32(0x3f80) == 1.0f);
    TU_CHECK(isnan(mcp_bf16_to_f32(0x7fc0)));

    int bad = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = mcp_bf16_to_f32((uint16_t)h);
        if (bf16_is_nan((uint16_t)h)) {
            if (!isnan(f) || !bf16_is_nan(mcp_f32_to_bf16(f))) bad++;
            continue;
        }
        if (f32_bits(f) != h << 16) bad++;
        if (mcp_f32_to_bf16(f) != h) bad++;
        if ((h & 0x7f80) != 0x7f80) {
            for (int d = -2; d <= 2; d++) {
                float g = bits_f32((h << 16) + 0x8000u + (uint32_t)d);
                if (!isnan(g) && mcp_f32_to_bf16(g) != ref_f32_to_bf16(g)) bad++;
            }
        }
    }
    TU_CHECK_INT(bad, 0);
    int bad_sweep = 0;
    for (uint64_t b = 0; b <= 0xffffffffu; b += 4093) {
        float g = bits_f32((uint32_t)b);
        uint16_t got = mcp_f32_to_bf16(g);
        if (isnan(g) ? !bf16_is_nan(got) : got != ref_f32_to_bf16(g)) bad_sweep++;
    }
    TU_CHECK_INT(bad_sweep, 0);
}

/* ---- broadcasting and shapes ---- */

static bool shape_eq(int ra, const int64_t *a, int rb, const int64_t *b)
{
    if (ra != rb) return false;
    for (int i = 0; i < ra; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static void test_broadcast(void)
{
    int64_t out[MCP_MAX_RANK + 4], strides[MCP_MAX_RANK];
    int r = -1;

    const int64_t a1[] = {2, 3, 4}, b1[] = {3, 1}, e1[] = {2, 3, 4};
    TU_CHECK(mcp_broadcast_shapes(3, a1, 2, b1, &r, out) && shape_eq(r, out, 3, e1));
    TU_CHECK(mcp_broadcast_shapes(2, b1, 3, a1, &r, out) && shape_eq(r, out, 3, e1));

    const int64_t a2[] = {1}, b2[] = {5}, e2[] = {5};
    TU_CHECK(mcp_broadcast_shapes(1, a2, 1, b2, &r, out) && shape_eq(r, out, 1, e2));

    const int64_t b3[] = {2, 2};
    TU_CHECK(mcp_broadcast_shapes(0, NULL, 2, b3, &r, out) && shape_eq(r, out, 2, b3));
    TU_CHECK(mcp_broadcast_shapes(0, NULL, 0, NULL, &r, out) && r == 0);

    /* Zero-size dims broadcast against 1 but not against other sizes. */
    const int64_t a4[] = {0, 3}, b4[] = {1, 3}, e4[] = {0, 3};
    TU_CHECK(mcp_broadcast_shapes(2, a4, 2, b4, &r, out) && shape_eq(r, out, 2, e4));
    TU_CHECK(mcp_broadcast_shapes(2, b4, 2, a4, &r, out) && shape_eq(r, out, 2, e4));
    const int64_t a5[] = {0}, b5[] = {2};
    TU_CHECK(!mcp_broadcast_shapes(1, a5, 1, b5, &r, out));

    /* Incompatible shapes. */
    const int64_t a6[] = {2, 3}, b6[] = {3, 2};
    TU_CHECK(!mcp_broadcast_shapes(2, a6, 2, b6, &r, out));
    const int64_t a7[] = {4}, b7[] = {2, 3};
    TU_CHECK(!mcp_broadcast_shapes(1, a7, 2, b7, &r, out));
    const int64_t a8[] = {5, 1, 7}, b8[] = {1, 6, 1}, e8[] = {5, 6, 7};
    TU_CHECK(mcp_broadcast_shapes(3, a8, 3, b8, &r, out) && shape_eq(r, out, 3, e8));

    /* A rank above the maximum is refused rather than overflowing out. */
    int64_t big[MCP_MAX_RANK + 1];
    for (int i = 0; i < MCP_MAX_RANK + 1; i++) big[i] = 1;
    TU_CHECK(!mcp_broadcast_shapes(MCP_MAX_RANK + 1, big, 1, a2, &r, out));

    /* Strides. */
    mcp_contiguous_strides(3, a1, strides);
    const int64_t s1[] = {12, 4, 1};
    TU_CHECK(shape_eq(3, strides, 3, s1));
    mcp_broadcast_strides(2, b1, 3, e1, strides);
    const int64_t s2[] = {0, 1, 0};
    TU_CHECK(shape_eq(3, strides, 3, s2));
    mcp_broadcast_strides(3, a1, 3, e1, strides);
    TU_CHECK(shape_eq(3, strides, 3, s1));
    mcp_broadcast_strides(0, NULL, 2, b3, strides);
    const int64_t s3[] = {0, 0};
    TU_CHECK(shape_eq(2, strides, 2, s3));
    const int64_t a9[] = {1, 4}, o9[] = {3, 4}, s9[] = {0, 1};
    mcp_broadcast_strides(2, a9, 2, o9, strides);
    TU_CHECK(shape_eq(2, strides, 2, s9));
    mcp_broadcast_strides(3, b8, 3, e8, strides);
    const int64_t s8[] = {0, 1, 0};
    TU_CHECK(shape_eq(3, strides, 3, s8));

    char buf[64];
    TU_CHECK_STR(mcp_shape_str(3, a1, buf, sizeof buf), "[2,3,4]");
    TU_CHECK_STR(mcp_shape_str(0, NULL, buf, sizeof buf), "[]");
    /* A small buffer truncates and stays terminated. */
    char tiny[5];
    memset(tiny, 'x', sizeof tiny);
    mcp_shape_str(3, a1, tiny, sizeof tiny);
    TU_CHECK(memchr(tiny, '\0', sizeof tiny) != NULL);
    TU_CHECK(strncmp(tiny, "[2,3", 4) == 0);

    TU_CHECK_INT(mcp_shape_numel(3, a1), 24);
    TU_CHECK_INT(mcp_shape_numel(0, NULL), 1);
    TU_CHECK_INT(mcp_shape_numel(2, a4), 0);
}

/* ---- tensors and values ---- */

static void test_tensor_alloc(void)
{
    char msg[256] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_tensor t;

    const int64_t neg[] = {2, -1};
    TU_CHECK_STATUS(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT, 2, neg, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "negative");
    TU_CHECK(t.data == NULL);

    int64_t ones[MCP_MAX_RANK + 1];
    for (int i = 0; i <= MCP_MAX_RANK; i++) ones[i] = 1;
    TU_CHECK_STATUS(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT, MCP_MAX_RANK + 1, ones, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_STATUS(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT, -1, ones, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_STATUS(mcp_tensor_alloc(&t, MCP_DTYPE_UNDEFINED, 1, ones, &err), MCP_STATUS_UNSUPPORTED, msg);

    const int64_t huge[] = {INT64_MAX / 2, 4};
    TU_CHECK_STATUS(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT, 2, huge, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK(t.data == NULL && t.rank == 0);

    /* Rank 0 holds one element; zero-size holds none. */
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_DOUBLE, 0, NULL, &err), msg);
    TU_CHECK_INT(mcp_tensor_numel(&t), 1);
    TU_CHECK_INT(mcp_tensor_nbytes(&t), 8);
    TU_CHECK(((double *)t.data)[0] == 0.0);
    mcp_tensor_release(&t);
    TU_CHECK(t.data == NULL);
    mcp_tensor_release(&t); /* twice is fine */
    mcp_tensor_release(NULL);

    const int64_t z[] = {3, 0};
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_INT64, 2, z, &err), msg);
    TU_CHECK_INT(mcp_tensor_numel(&t), 0);
    TU_CHECK_INT(mcp_tensor_nbytes(&t), 0);
    mcp_tensor_release(&t);

    /* Strings start empty, copy deeply. */
    const int64_t d3[] = {3};
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_STRING, 1, d3, &err), msg);
    char **s = t.data;
    TU_CHECK(s[0] && s[0][0] == '\0' && s[2] && s[2][0] == '\0');
    TU_CHECK_STATUS(mcp_tensor_set_string(&t, 1, "abc\0def", 7), MCP_STATUS_OK, NULL);
    TU_CHECK_STATUS(mcp_tensor_set_string(&t, 2, "xyz", 2), MCP_STATUS_OK, NULL);
    TU_CHECK_STR(s[1], "abc");
    TU_CHECK_STR(s[2], "xy");
    mcp_tensor c;
    TU_CHECK_STATUS(mcp_tensor_copy(&c, &t, &err), MCP_STATUS_OK, msg);
    char **cs = c.data;
    TU_CHECK(cs != s && cs[2] != s[2]);
    TU_CHECK_STR(cs[2], "xy");
    mcp_tensor_release(&t);
    TU_CHECK_STR(cs[2], "xy");
    mcp_tensor_release(&c);

    /* Element access across dtypes. */
    const int64_t d4[] = {4};
    mcp_dtype all[] = {MCP_DTYPE_FLOAT,  MCP_DTYPE_DOUBLE, MCP_DTYPE_FLOAT16, MCP_DTYPE_BFLOAT16,
                       MCP_DTYPE_INT8,   MCP_DTYPE_INT16,  MCP_DTYPE_INT32,   MCP_DTYPE_INT64,
                       MCP_DTYPE_UINT8,  MCP_DTYPE_UINT16, MCP_DTYPE_UINT32,  MCP_DTYPE_UINT64,
                       MCP_DTYPE_BOOL};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        TU_REQUIRE_OK(mcp_tensor_alloc(&t, all[k], 1, d4, &err), msg);
        mcp_tensor_set_f64(&t, 0, 3.0);
        mcp_tensor_set_i64(&t, 1, 5);
        mcp_tensor_set_f64(&t, 2, 0.0);
        if (all[k] == MCP_DTYPE_BOOL) {
            TU_CHECK(mcp_tensor_get_f64(&t, 0) == 1.0 && mcp_tensor_get_i64(&t, 1) == 1);
        } else {
            TU_CHECK(mcp_tensor_get_f64(&t, 0) == 3.0);
            TU_CHECK_INT(mcp_tensor_get_i64(&t, 1), 5);
        }
        TU_CHECK(mcp_tensor_get_f64(&t, 2) == 0.0);
        /* NaN and huge values into integers must not be undefined
         * behaviour (UBSan would abort here). */
        mcp_tensor_set_f64(&t, 3, NAN);
        mcp_tensor_set_f64(&t, 3, 1e300);
        mcp_tensor_set_f64(&t, 3, -1e300);
        mcp_tensor_release(&t);
    }
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_INT64, 1, d4, &err), msg);
    mcp_tensor_set_f64(&t, 0, 1e300);
    mcp_tensor_set_f64(&t, 1, -1e300);
    mcp_tensor_set_f64(&t, 2, NAN);
    mcp_tensor_set_i64(&t, 3, INT64_MIN);
    TU_CHECK(mcp_tensor_get_i64(&t, 0) == INT64_MAX);
    TU_CHECK(mcp_tensor_get_i64(&t, 1) == INT64_MIN);
    TU_CHECK(mcp_tensor_get_i64(&t, 2) == 0);
    TU_CHECK(mcp_tensor_get_i64(&t, 3) == INT64_MIN);
    mcp_tensor_release(&t);
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT16, 1, d4, &err), msg);
    mcp_tensor_set_f64(&t, 0, 0.1);
    TU_CHECK(mcp_tensor_get_f64(&t, 0) == (double)mcp_f16_to_f32(mcp_f32_to_f16(0.1f)));
    TU_CHECK_INT(((uint16_t *)t.data)[0], 0x2e66);
    mcp_tensor_release(&t);
}

static void test_values(void)
{
    char msg[256] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_value_free(NULL);
    mcp_value_clear(NULL);

    mcp_value *v = mcp_value_new();
    TU_REQUIRE(v != NULL);
    TU_CHECK(v->kind == MCP_VALUE_TENSOR);
    v->kind = MCP_VALUE_SEQUENCE;
    v->elem_dtype = MCP_DTYPE_INT32;

    mcp_tensor t;
    const int64_t d1[] = {1};
    for (int i = 0; i < 10; i++) {
        TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_INT32, 1, d1, &err), msg);
        ((int32_t *)t.data)[0] = i;
        if (i % 2 == 0) {
            TU_CHECK_STATUS(mcp_value_seq_insert(v, -1, &t, &err), MCP_STATUS_OK, msg);
            mcp_tensor_release(&t);
        } else {
            TU_CHECK_STATUS(mcp_value_seq_push_move(v, &t, &err), MCP_STATUS_OK, msg);
            TU_CHECK(t.data == NULL); /* moved */
        }
    }
    TU_CHECK_INT(v->seq_len, 10);
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_INT32, 1, d1, &err), msg);
    ((int32_t *)t.data)[0] = -1;
    TU_CHECK_STATUS(mcp_value_seq_insert(v, 0, &t, &err), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(mcp_value_seq_insert(v, 99, &t, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "99");
    mcp_tensor_release(&t);
    TU_CHECK_INT(v->seq_len, 11);
    TU_CHECK_INT(((int32_t *)v->seq[0].data)[0], -1);
    for (int i = 0; i < 10; i++) TU_CHECK_INT(((int32_t *)v->seq[i + 1].data)[0], i);

    mcp_value *c = mcp_value_new();
    TU_REQUIRE(c != NULL);
    TU_CHECK_STATUS(mcp_value_copy(c, v, &err), MCP_STATUS_OK, msg);
    TU_CHECK(c->kind == MCP_VALUE_SEQUENCE && c->seq_len == 11 && c->elem_dtype == MCP_DTYPE_INT32);
    TU_CHECK(c->seq[5].data != v->seq[5].data);
    TU_CHECK_INT(((int32_t *)c->seq[5].data)[0], 4);
    mcp_value_free(v);

    /* An empty optional copies as such. */
    mcp_value none = {0};
    none.kind = MCP_VALUE_NONE;
    none.elem_is_sequence = true;
    TU_CHECK_STATUS(mcp_value_copy(c, &none, &err), MCP_STATUS_OK, msg);
    TU_CHECK(c->kind == MCP_VALUE_NONE && c->elem_is_sequence && c->seq == NULL);
    mcp_value_free(c);
}

/* ---- .npy ---- */

static char tmp_dir[1024];

static bool tensors_equal(const mcp_tensor *a, const mcp_tensor *b)
{
    if (a->dtype != b->dtype || !shape_eq(a->rank, a->dims, b->rank, b->dims)) return false;
    int64_t n = mcp_tensor_numel(a);
    if (a->dtype == MCP_DTYPE_STRING) {
        char *const *x = a->data, *const *y = b->data;
        for (int64_t i = 0; i < n; i++)
            if (strcmp(x[i], y[i]) != 0) return false;
        return true;
    }
    return mcp_tensor_nbytes(a) == 0 || memcmp(a->data, b->data, mcp_tensor_nbytes(a)) == 0;
}

/* Writes t to a .npy file, reads it back and compares. */
static void npy_roundtrip(const char *file, const mcp_tensor *t, mcp_dtype read_dtype)
{
    char path[2048], msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    tu_path(path, sizeof path, tmp_dir, file);
    TU_CHECK_STATUS(mcp_npy_write(path, t, &err), MCP_STATUS_OK, msg);
    mcp_tensor back;
    mcp_status st = mcp_npy_read(path, &back, &err);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
    if (st != MCP_STATUS_OK) return;
    mcp_tensor expect = *t;
    expect.dtype = read_dtype;
    if (!tensors_equal(&back, &expect)) TU_FAIL_AT(__FILE__, __LINE__, "%s: round trip differs", file);
    mcp_tensor_release(&back);
    unlink(path);
}

static void test_npy_roundtrip(void)
{
    char msg[256] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_tensor t;

    const int64_t d23[] = {2, 3};
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT, 2, d23, &err), msg);
    float fv[] = {1.5f, -2.0f, 0.0f, 3.25e-5f, -INFINITY, 65504.0f};
    memcpy(t.data, fv, sizeof fv);
    npy_roundtrip("f32.npy", &t, MCP_DTYPE_FLOAT);
    mcp_tensor_release(&t);

    const int64_t d4[] = {4};
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_INT64, 1, d4, &err), msg);
    int64_t iv[] = {INT64_MIN, -1, 0, INT64_MAX};
    memcpy(t.data, iv, sizeof iv);
    npy_roundtrip("i64.npy", &t, MCP_DTYPE_INT64);
    mcp_tensor_release(&t);

    const int64_t d3[] = {3};
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_BOOL, 1, d3, &err), msg);
    ((uint8_t *)t.data)[0] = 1;
    ((uint8_t *)t.data)[2] = 1;
    npy_roundtrip("bool.npy", &t, MCP_DTYPE_BOOL);
    mcp_tensor_release(&t);

    const int64_t d22[] = {2, 2};
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT16, 2, d22, &err), msg);
    uint16_t hv[] = {0x3c00, 0xc000, 0x7bff, 0x0001};
    memcpy(t.data, hv, sizeof hv);
    npy_roundtrip("f16.npy", &t, MCP_DTYPE_FLOAT16);
    mcp_tensor_release(&t);

    /* bfloat16 has no numpy dtype: written as uint16 bit patterns. */
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_BFLOAT16, 1, d3, &err), msg);
    uint16_t bv[] = {0x3f80, 0xc000, 0x7f80};
    memcpy(t.data, bv, sizeof bv);
    npy_roundtrip("bf16.npy", &t, MCP_DTYPE_UINT16);
    mcp_tensor_release(&t);

    mcp_dtype others[] = {MCP_DTYPE_DOUBLE, MCP_DTYPE_INT8, MCP_DTYPE_INT16, MCP_DTYPE_INT32,
                          MCP_DTYPE_UINT8, MCP_DTYPE_UINT16, MCP_DTYPE_UINT32, MCP_DTYPE_UINT64};
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
        TU_REQUIRE_OK(mcp_tensor_alloc(&t, others[k], 2, d23, &err), msg);
        for (int64_t i = 0; i < 6; i++) mcp_tensor_set_i64(&t, i, i * 7 + 1);
        npy_roundtrip("other.npy", &t, others[k]);
        mcp_tensor_release(&t);
    }

    /* Unicode strings: 2-, 3- and 4-byte UTF-8 sequences and an empty one. */
    const int64_t d5[] = {5};
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_STRING, 1, d5, &err), msg);
    const char *sv[] = {"h\xc3\xa9llo", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "",
                        "\xf0\x9f\x98\x80x", "plain ascii"};
    for (int i = 0; i < 5; i++) mcp_tensor_set_string(&t, i, sv[i], strlen(sv[i]));
    npy_roundtrip("str.npy", &t, MCP_DTYPE_STRING);
    /* Width in code points: "plain ascii" has 11. */
    char path[2048];
    tu_path(path, sizeof path, tmp_dir, "str2.npy");
    TU_CHECK_STATUS(mcp_npy_write(path, &t, &err), MCP_STATUS_OK, msg);
    FILE *f = fopen(path, "rb");
    char head[128] = "";
    if (f) {
        size_t got = fread(head, 1, sizeof head - 1, f);
        head[got] = '\0';
        fclose(f);
    }
    TU_CHECK(memcmp(head, "\x93NUMPY\x01\x00", 8) == 0);
    TU_CHECK_CONTAINS(head + 10, "'descr': '<U11'");
    TU_CHECK_CONTAINS(head + 10, "'shape': (5,)");
    unlink(path);
    mcp_tensor_release(&t);

    /* Rank 0. */
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT, 0, NULL, &err), msg);
    ((float *)t.data)[0] = 3.5f;
    npy_roundtrip("scalar.npy", &t, MCP_DTYPE_FLOAT);
    mcp_tensor_release(&t);
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_STRING, 0, NULL, &err), msg);
    mcp_tensor_set_string(&t, 0, "\xc3\xbc", 2);
    npy_roundtrip("scalar_str.npy", &t, MCP_DTYPE_STRING);
    mcp_tensor_release(&t);

    /* Zero-size. */
    const int64_t z03[] = {0, 3};
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT, 2, z03, &err), msg);
    npy_roundtrip("empty.npy", &t, MCP_DTYPE_FLOAT);
    mcp_tensor_release(&t);
    const int64_t z0[] = {0};
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_STRING, 1, z0, &err), msg);
    npy_roundtrip("empty_str.npy", &t, MCP_DTYPE_STRING);
    mcp_tensor_release(&t);
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_INT64, 2, (const int64_t[]){2, 0}, &err), msg);
    npy_roundtrip("empty_i64.npy", &t, MCP_DTYPE_INT64);
    mcp_tensor_release(&t);

    /* A dtype .npy cannot hold is refused, and nothing is written. */
    mcp_tensor und = {0};
    tu_path(path, sizeof path, tmp_dir, "undefined.npy");
    TU_CHECK_STATUS(mcp_npy_write(path, &und, &err), MCP_STATUS_UNSUPPORTED, msg);
    TU_CHECK(access(path, F_OK) != 0);
    /* An unwritable path. */
    tu_path(path, sizeof path, tmp_dir, "no/such/dir/x.npy");
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT, 0, NULL, &err), msg);
    TU_CHECK_STATUS(mcp_npy_write(path, &t, &err), MCP_STATUS_IO_ERROR, msg);
    mcp_tensor_release(&t);
    /* A missing file names its path. */
    tu_path(path, sizeof path, tmp_dir, "missing.npy");
    TU_CHECK_STATUS(mcp_npy_read(path, &t, &err), MCP_STATUS_NOT_FOUND, msg);
    TU_CHECK_CONTAINS(msg, "missing.npy");
}

/* Builds a .npy image: magic, version, header (padded with spaces to a
 * multiple of 64 and a newline, as numpy writes it), then body. Returns the
 * length; buf must be large enough. */
static size_t make_npy(uint8_t *buf, int version, const char *header, const void *body,
                       size_t body_len)
{
    size_t pre = version == 1 ? 10 : 12;
    size_t hl = strlen(header);
    size_t total = pre + hl + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = hl + pad + 1;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)version;
    buf[7] = 0;
    if (version == 1) {
        buf[8] = (uint8_t)(hlen & 0xff);
        buf[9] = (uint8_t)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; i++) buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    }
    memcpy(buf + pre, header, hl);
    memset(buf + pre + hl, ' ', pad);
    buf[pre + hl + pad] = '\n';
    if (body_len) memcpy(buf + pre + hlen, body, body_len);
    return pre + hlen + body_len;
}

/* Expects mcp_npy_read_mem to fail with `expected` (or any error when
 * expected is OK) and to leave the output tensor empty. */
static void expect_npy_error(int line, const uint8_t *buf, size_t len, mcp_status expected,
                             const char *needle)
{
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_tensor t;
    memset(&t, 0x5a, sizeof t);
    /* An exact-size copy, so ASan reports any read past the end. */
    uint8_t *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, buf, len);
    mcp_status st = mcp_npy_read_mem(copy, len, &t, &err);
    free(copy);
    tu_checks++;
    if (st == MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, line, "malformed .npy was accepted");
        mcp_tensor_release(&t);
        return;
    }
    if (expected != MCP_STATUS_OK && st != expected)
        TU_FAIL_AT(__FILE__, line, "status '%s', expected '%s' (%s)", mcp_status_str(st),
                   mcp_status_str(expected), msg);
    if (!msg[0]) TU_FAIL_AT(__FILE__, line, "no error message");
    if (needle && !strstr(msg, needle)) TU_FAIL_AT(__FILE__, line, "message '%s' lacks '%s'", msg, needle);
    if (t.data != NULL || t.rank != 0) TU_FAIL_AT(__FILE__, line, "output tensor not left empty");
}

static void test_npy_malformed(void)
{
    static uint8_t buf[4096];
    float body[6] = {1, 2, 3, 4, 5, 6};
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_tensor t;

    /* A good file in every header version parses. */
    for (int v = 1; v <= 3; v++) {
        size_t len = make_npy(buf, v, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
        TU_CHECK_STATUS(mcp_npy_read_mem(buf, len, &t, &err), MCP_STATUS_OK, msg);
        TU_CHECK(t.rank == 2 && t.dims[0] == 2 && t.dims[1] == 3 && ((float *)t.data)[5] == 6.0f);
        mcp_tensor_release(&t);
    }
    /* Single-byte big-endian data is byte-order free and allowed. */
    size_t len = make_npy(buf, 1, "{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", "\x07\x09", 2);
    TU_CHECK_STATUS(mcp_npy_read_mem(buf, len, &t, &err), MCP_STATUS_OK, msg);
    TU_CHECK(t.dtype == MCP_DTYPE_UINT8 && ((uint8_t *)t.data)[1] == 9);
    mcp_tensor_release(&t);

    /* Bad magic, too short, unknown version. */
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
    buf[1] = 'X';
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "magic");
    expect_npy_error(__LINE__, (const uint8_t *)"", 0, MCP_STATUS_INVALID_ARGUMENT, NULL);
    expect_npy_error(__LINE__, (const uint8_t *)"\x93NUMPY\x01", 7, MCP_STATUS_INVALID_ARGUMENT, NULL);
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
    buf[6] = 9;
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_UNSUPPORTED, "version");

    /* Truncated header: the declared header length runs past the end. */
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, 40, MCP_STATUS_INVALID_ARGUMENT, "header");
    expect_npy_error(__LINE__, buf, 11, MCP_STATUS_INVALID_ARGUMENT, "header");
    len = make_npy(buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, 11, MCP_STATUS_INVALID_ARGUMENT, "header");
    buf[11] = 0x7f; /* a 2 GB header length */
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "header");

    /* Truncated data. */
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body - 1);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "truncated");
    len = make_npy(buf, 1, "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", "a\0\0\0", 4);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "truncated");

    /* Every prefix of a good file is refused without crashing. */
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
    int accepted = 0;
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, buf, cut);
        if (mcp_npy_read_mem(copy, cut, &t, &err) == MCP_STATUS_OK) {
            accepted++;
            mcp_tensor_release(&t);
        }
        free(copy);
    }
    TU_CHECK_INT(accepted, 0);

    /* Layout and byte order. */
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_UNSUPPORTED, "Fortran");
    len = make_npy(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_UNSUPPORTED, "big-endian");
    len = make_npy(buf, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_UNSUPPORTED, "big-endian");
    len = make_npy(buf, 1, "{'descr': '>U2', 'fortran_order': False, 'shape': (1,), }", "a\0\0\0b\0\0\0", 8);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_UNSUPPORTED, "big-endian");

    /* Unsupported or missing dtype, missing or malformed shape. */
    len = make_npy(buf, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_UNSUPPORTED, "<c8");
    len = make_npy(buf, 1, "{'descr': '<f3', 'fortran_order': False, 'shape': (2,), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_UNSUPPORTED, NULL);
    len = make_npy(buf, 1, "{'descr': '<U0', 'fortran_order': False, 'shape': (2,), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, NULL);
    len = make_npy(buf, 1, "{'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "descr");
    len = make_npy(buf, 1, "{'descr': <f4, 'shape': (2, 3), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "descr");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "shape");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "shape");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "shape");
    /* Header text that ends inside the shape (no padding, no newline): the
     * parser must stop at the header's end. */
    {
        const char *h = "{'descr': '<f4', 'shape': (2, 3";
        size_t hl = strlen(h);
        memcpy(buf, "\x93NUMPY\x01\x00", 8);
        buf[8] = (uint8_t)hl;
        buf[9] = 0;
        memcpy(buf + 10, h, hl);
        expect_npy_error(__LINE__, buf, 10 + hl, MCP_STATUS_OK, NULL);
        h = "{'descr': '<f4', 'shape': (2, 3";
        memcpy(buf + 10, h, hl);
        buf[8] = (uint8_t)(hl - 9); /* header ends right after "'shape'" */
        expect_npy_error(__LINE__, buf, 10 + hl - 9, MCP_STATUS_INVALID_ARGUMENT, "shape");
        buf[8] = 8; /* header ends inside "'descr'" */
        expect_npy_error(__LINE__, buf, 10 + 8, MCP_STATUS_INVALID_ARGUMENT, "descr");
    }

    /* Absurd shapes: a dimension too large to parse, a product that
     * overflows, a rank above the maximum, and a large string count. */
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "too large");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776, 1099511627776), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, NULL);
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1), }", body, sizeof body);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_UNSUPPORTED, "rank");
    len = make_npy(buf, 1, "{'descr': '<U1', 'fortran_order': False, 'shape': (100000,), }", NULL, 0);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "truncated");
    /* A short file declaring a huge shape is refused before anything that
     * size is allocated (a 4 TB calloc would abort under ASan), for numbers
     * and for strings (one allocation per element). */
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", NULL, 0);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "truncated");
    len = make_npy(buf, 1, "{'descr': '<U1', 'fortran_order': False, 'shape': (1000000000000,), }", NULL, 0);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, "truncated");
    len = make_npy(buf, 1, "{'descr': '<U1000000', 'fortran_order': False, 'shape': (1000000000000,), }", NULL, 0);
    expect_npy_error(__LINE__, buf, len, MCP_STATUS_INVALID_ARGUMENT, NULL);

    /* Random mutations of a good file never crash (outcome not checked). */
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    size_t good_len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", body, sizeof body);
    static uint8_t mutated[4096];
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(mutated, buf, good_len);
        int flips = 1 + (int)(tu_rand(&rng) % 4);
        for (int k = 0; k < flips; k++) {
            size_t pos = (size_t)(tu_rand(&rng) % good_len);
            uint64_t r = tu_rand(&rng);
            /* Mostly printable header characters, sometimes any byte. */
            static const char interesting[] = "0123456789(),' <>|fiubUSc:True";
            mutated[pos] = (r & 1) ? (uint8_t)(r >> 8) : (uint8_t)interesting[(r >> 8) % (sizeof interesting - 1)];
        }
        size_t mlen = good_len - (size_t)(tu_rand(&rng) % 8);
        uint8_t *copy = malloc(mlen);
        memcpy(copy, mutated, mlen);
        if (mcp_npy_read_mem(copy, mlen, &t, &err) == MCP_STATUS_OK) mcp_tensor_release(&t);
        free(copy);
    }
}

/* ---- narrow types: packing, sizes, conversions ---- */

static void test_narrow_packing(void)
{
    /* Byte sizes: ceil(n * bits / 8). */
    TU_CHECK_INT(mcp_dtype_bits(MCP_DTYPE_INT4), 4);
    TU_CHECK_INT(mcp_dtype_bits(MCP_DTYPE_UINT2), 2);
    TU_CHECK_INT(mcp_dtype_bits(MCP_DTYPE_FLOAT8E8M0), 8);
    TU_CHECK_INT((int)mcp_dtype_nbytes(MCP_DTYPE_INT4, 5), 3);
    TU_CHECK_INT((int)mcp_dtype_nbytes(MCP_DTYPE_FLOAT4E2M1, 4), 2);
    TU_CHECK_INT((int)mcp_dtype_nbytes(MCP_DTYPE_INT2, 5), 2);
    TU_CHECK_INT((int)mcp_dtype_nbytes(MCP_DTYPE_UINT2, 8), 2);
    TU_CHECK_INT((int)mcp_dtype_nbytes(MCP_DTYPE_FLOAT8E4M3FN, 5), 5);
    TU_CHECK_INT((int)mcp_dtype_nbytes(MCP_DTYPE_INT4, 0), 0);
    const int64_t d3[] = {3, 1, 3};
    mcp_tensor t;
    TU_CHECK_STATUS(mcp_tensor_alloc(&t, MCP_DTYPE_INT4, 3, d3, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK_INT((int)mcp_tensor_nbytes(&t), 5); /* 9 elements */
    /* First element in the low nibble; setting leaves neighbours alone. */
    for (int64_t i = 0; i < 9; i++) mcp_tensor_set_i64(&t, i, i - 4);
    TU_CHECK_INT(((uint8_t *)t.data)[0], 0xDC); /* -4 low, -3 high */
    TU_CHECK_INT(((uint8_t *)t.data)[4], 0x04); /* 4, then padding */
    for (int64_t i = 0; i < 9; i++) TU_CHECK_INT((int)mcp_tensor_get_i64(&t, i), (int)i - 4);
    /* Out of range saturates (Cast's clamp). */
    mcp_tensor_set_i64(&t, 0, 100);
    mcp_tensor_set_f64(&t, 1, -9.5);
    mcp_tensor_set_f64(&t, 2, 2.5); /* ties to even */
    TU_CHECK_INT((int)mcp_tensor_get_i64(&t, 0), 7);
    TU_CHECK_INT((int)mcp_tensor_get_i64(&t, 1), -8);
    TU_CHECK_INT((int)mcp_tensor_get_i64(&t, 2), 2);
    TU_CHECK_INT((int)mcp_tensor_get_i64(&t, 3), -1);
    mcp_tensor c;
    TU_CHECK_STATUS(mcp_tensor_copy(&c, &t, NULL), MCP_STATUS_OK, NULL);
    TU_CHECK(memcmp(c.data, t.data, 5) == 0);
    mcp_tensor_release(&c);
    mcp_tensor_release(&t);

    uint8_t two[2] = {0, 0};
    for (int i = 0; i < 5; i++) mcp_packed_set(two, 2, i, (uint8_t)(i & 3));
    TU_CHECK_INT(two[0], 0xE4); /* 0,1,2,3 from the low bits up */
    TU_CHECK_INT(two[1], 0x00);
    TU_CHECK_INT(mcp_packed_get(two, 2, 3), 3);
    TU_CHECK_INT((int)mcp_narrow_to_f64(MCP_DTYPE_INT2, 3), -1);
    TU_CHECK_INT((int)mcp_narrow_to_f64(MCP_DTYPE_INT4, 8), -8);
}

static void test_narrow_conversions(void)
{
    /* float8e4m3fn: max 448, 464 ties to 448, past it NaN without
     * saturation; -0 kept; NaN keeps its sign. */
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, 448, true, 0), 0x7E);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, 464, false, 0), 0x7E);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, 465, false, 0), 0x7F);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, -INFINITY, true, 0), 0xFE);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, -0.0, true, 0), 0x80);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, -NAN, true, 0), 0xFF);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, 1.0625, true, 0), 0x38); /* tie to even: 1.0 */
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, 1.1875, true, 0), 0x3A); /* tie to even: 1.25 */
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, 0x1p-10, true, 0), 0x00); /* half the smallest: to 0 */
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FN, 0x1.8p-9, true, 0), 0x02); /* 1.5 smallest: to 2 */
    /* fnuz: no -0, NaN is 0x80, overflow without saturation is NaN. */
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FNUZ, -0.0, true, 0), 0x00);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FNUZ, -1e-9, true, 0), 0x00);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FNUZ, NAN, true, 0), 0x80);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E4M3FNUZ, 1e6, false, 0), 0x80);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E5M2FNUZ, -1e6, true, 0), 0xFF);
    TU_CHECK(isnan(mcp_narrow_to_f64(MCP_DTYPE_FLOAT8E5M2FNUZ, 0x80)));
    /* e5m2: infinities stay without saturation. */
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E5M2, INFINITY, false, 0), 0x7C);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E5M2, INFINITY, true, 0), 0x7B);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E5M2, 61440, false, 0), 0x7C); /* tie past max */
    TU_CHECK(mcp_narrow_to_f64(MCP_DTYPE_FLOAT8E5M2, 0x7B) == 57344.0);
    TU_CHECK(mcp_narrow_to_f64(MCP_DTYPE_FLOAT8E4M3FNUZ, 0x7F) == 240.0);
    /* Every code of every float8 decodes and encodes back to itself. */
    for (int d = MCP_DTYPE_FLOAT8E4M3FN; d <= MCP_DTYPE_FLOAT8E5M2FNUZ; d++)
        for (int c = 0; c < 256; c++) {
            double v = mcp_narrow_to_f64((mcp_dtype)d, (uint8_t)c);
            if (isnan(v) || isinf(v)) continue;
            TU_CHECK_INT(mcp_narrow_from_f64((mcp_dtype)d, v, true, 0), c);
        }
    /* float4e2m1: saturating, NaN to 6, ties to even. */
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT4E2M1, NAN, false, 0), 0x7);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT4E2M1, -100, false, 0), 0xF);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT4E2M1, 2.5, true, 0), 0x4);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT4E2M1, 0.25, true, 0), 0x0);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT4E2M1, 0.75, true, 0), 0x2);
    /* float8e8m0: powers of two, rounding by mode. */
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E8M0, 1.0, true, MCP_E8M0_ROUND_UP), 127);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E8M0, 1.25, true, MCP_E8M0_ROUND_UP), 128);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E8M0, 1.75, true, MCP_E8M0_ROUND_DOWN), 127);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E8M0, 1.5, true, MCP_E8M0_ROUND_NEAREST), 128);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E8M0, 1.25, true, MCP_E8M0_ROUND_NEAREST), 127);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E8M0, 0x1.8p127, true, MCP_E8M0_ROUND_UP), 254);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E8M0, 0x1.8p127, false, MCP_E8M0_ROUND_UP), 255);
    TU_CHECK_INT(mcp_narrow_from_f64(MCP_DTYPE_FLOAT8E8M0, NAN, true, MCP_E8M0_ROUND_UP), 255);
    TU_CHECK(mcp_narrow_to_f64(MCP_DTYPE_FLOAT8E8M0, 0) == 0x1p-127);
    TU_CHECK(isnan(mcp_narrow_to_f64(MCP_DTYPE_FLOAT8E8M0, 0xFF)));
}

int main(void)
{
    if (tu_make_temp_dir(tmp_dir, sizeof tmp_dir, "tensor") != 0) {
        perror("mkdtemp");
        return 1;
    }
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_dtype_table);
    TU_RUN(test_narrow_packing);
    TU_RUN(test_narrow_conversions);
    TU_RUN(test_f16_known_values);
    TU_RUN(test_f16_exhaustive);
    TU_RUN(test_bf16);
    TU_RUN(test_broadcast);
    TU_RUN(test_tensor_alloc);
    TU_RUN(test_values);
    TU_RUN(test_npy_roundtrip);
    TU_RUN(test_npy_malformed);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    rmdir(tmp_dir);
    return tu_finish("test_tensor");
}
