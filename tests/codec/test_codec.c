/*
 * Protocol codec tests (src/serve/codec_*.c): OIP v2 JSON and binary
 * bodies, the raw form, KServe v1, the quickstart protocol, and every
 * malformed input we can think of, each with the message it must give.
 * Model versions are built by hand; no session is needed.
 */
#include <float.h>
#include <jansson.h>
#include <math.h>

#include "serve/codec_util.h"
#include "serve/serve.h"
#include "test_util.h"

/* ---- fixtures ---- */

typedef struct fixture {
    mcp_model_version m;
    mcp_tensor_meta in[4], out[4];
} fixture;

static void fx_init(fixture *f, const char *name)
{
    memset(f, 0, sizeof *f);
    f->m.name = (char *)name;
    f->m.version = (char *)"1";
    f->m.inputs = f->in;
    f->m.outputs = f->out;
}

static void fx_tensor(mcp_tensor_meta *t, const char *name, mcp_dtype dt, int rank, int64_t d0, int64_t d1,
                      int64_t d2)
{
    t->name = name;
    t->graph_name = name;
    t->dtype = dt;
    t->rank = rank;
    int64_t d[3] = {d0, d1, d2};
    for (int k = 0; k < rank && k < 3; k++) t->dims[k] = d[k];
}

static void fx_in(fixture *f, const char *name, mcp_dtype dt, int rank, int64_t d0, int64_t d1, int64_t d2)
{
    fx_tensor(&f->in[f->m.n_inputs++], name, dt, rank, d0, d1, d2);
}

static void fx_out(fixture *f, const char *name, mcp_dtype dt, int rank, int64_t d0, int64_t d1, int64_t d2)
{
    fx_tensor(&f->out[f->m.n_outputs++], name, dt, rank, d0, d1, d2);
}

/* m1: x FP32 [-1,4] -> y FP32 [-1,4], z INT64 [-1] */
static void fx_m1(fixture *f)
{
    fx_init(f, "m1");
    fx_in(f, "x", MCP_DTYPE_FLOAT, 2, -1, 4, 0);
    fx_out(f, "y", MCP_DTYPE_FLOAT, 2, -1, 4, 0);
    fx_out(f, "z", MCP_DTYPE_INT64, 1, -1, 0, 0);
}

/* multi: a FP32 [-1,2], b INT64 [-1] -> p FP32 [-1,2], q BOOL [-1] */
static void fx_multi(fixture *f)
{
    fx_init(f, "multi");
    fx_in(f, "a", MCP_DTYPE_FLOAT, 2, -1, 2, 0);
    fx_in(f, "b", MCP_DTYPE_INT64, 1, -1, 0, 0);
    fx_out(f, "p", MCP_DTYPE_FLOAT, 2, -1, 2, 0);
    fx_out(f, "q", MCP_DTYPE_BOOL, 1, -1, 0, 0);
}

static mcp_request *req_new(void)
{
    mcp_request *r = mcp_calloc(1, sizeof *r);
    r->pool = mcp_pool_create(4096);
    return r;
}

static void req_free(mcp_request *r)
{
    mcp_pool_destroy(r->pool);
    mcp_free(r);
}

static char msg[1024];
static mcp_err err = {msg, sizeof msg};

static mcp_status v2_json(mcp_request *r, const char *json, const mcp_model_version *m)
{
    msg[0] = 0;
    return mcp_codec_v2_decode(r, (const uint8_t *)json, strlen(json), -1, m, &err);
}

/* JSON header + binary section, decoded with the header length set. */
static mcp_status v2_bin(mcp_request *r, const char *json, const void *bin, size_t blen, const mcp_model_version *m)
{
    size_t jl = strlen(json);
    uint8_t *body = mcp_malloc(jl + blen + 1);
    memcpy(body, json, jl);
    if (blen) memcpy(body + jl, bin, blen);
    msg[0] = 0;
    mcp_status s = mcp_codec_v2_decode(r, body, jl + blen, (int64_t)jl, m, &err);
    mcp_free(body);
    return s;
}

/* Decodes with a fresh request and checks status and message. */
#define EXPECT_V2(json, m, st, needle) expect_v2(__FILE__, __LINE__, json, m, st, needle)
static void expect_v2(const char *file, int line, const char *json, const mcp_model_version *m, mcp_status st,
                      const char *needle)
{
    mcp_request *r = req_new();
    mcp_status s = v2_json(r, json, m);
    tu_checks++;
    if (s != st || (needle && !strstr(msg, needle)))
        TU_FAIL_AT(file, line, "decode of %s: got '%s' \"%s\", expected '%s' \"%s\"", json, mcp_status_str(s), msg,
                   mcp_status_str(st), needle ? needle : "");
    if (st == MCP_STATUS_OK && s == MCP_STATUS_OK) TU_CHECK(r->n_inputs > 0);
    /* A failed decode must not leave a pool grown by the lie in a shape. */
    TU_CHECK(mcp_pool_bytes(r->pool) < (1u << 20));
    req_free(r);
}

#define EXPECT_V2_BIN(json, bin, blen, m, st, needle) expect_v2_bin(__FILE__, __LINE__, json, bin, blen, m, st, needle)
static void expect_v2_bin(const char *file, int line, const char *json, const void *bin, size_t blen,
                          const mcp_model_version *m, mcp_status st, const char *needle)
{
    mcp_request *r = req_new();
    mcp_status s = v2_bin(r, json, bin, blen, m);
    tu_checks++;
    if (s != st || (needle && !strstr(msg, needle)))
        TU_FAIL_AT(file, line, "decode of %s + %zu bytes: got '%s' \"%s\", expected '%s' \"%s\"", json, blen,
                   mcp_status_str(s), msg, mcp_status_str(st), needle ? needle : "");
    TU_CHECK(mcp_pool_bytes(r->pool) < (1u << 20));
    req_free(r);
}

static bool tensors_equal(const mcp_tensor *a, const mcp_tensor *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank) return false;
    for (int k = 0; k < a->rank; k++)
        if (a->dims[k] != b->dims[k]) return false;
    int64_t n = mcp_tensor_numel(a);
    if (a->dtype == MCP_DTYPE_STRING) {
        for (int64_t i = 0; i < n; i++)
            if (strcmp(((char **)a->data)[i], ((char **)b->data)[i]) != 0) return false;
        return true;
    }
    return n == 0 || memcmp(a->data, b->data, (size_t)n * (size_t)mcp_dtype_size(a->dtype)) == 0;
}

/* ---- datatypes ---- */

static void test_datatypes(void)
{
    const char *names[] = {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                           "INT32", "INT64", "FP16", "FP32", "FP64", "BF16", "BYTES"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        mcp_dtype d = mcp_oip_dtype(names[k]);
        TU_CHECK(d != MCP_DTYPE_UNDEFINED);
        TU_CHECK_STR(mcp_oip_datatype(d), names[k]);
    }
    TU_CHECK_INT(mcp_oip_dtype("FP32"), MCP_DTYPE_FLOAT);
    TU_CHECK_INT(mcp_oip_dtype("BYTES"), MCP_DTYPE_STRING);
    TU_CHECK_INT(mcp_oip_dtype("BF16"), MCP_DTYPE_BFLOAT16);
    TU_CHECK_INT(mcp_oip_dtype("fp32"), MCP_DTYPE_UNDEFINED);
    TU_CHECK_INT(mcp_oip_dtype("FP99"), MCP_DTYPE_UNDEFINED);
    TU_CHECK_INT(mcp_oip_dtype(""), MCP_DTYPE_UNDEFINED);
    TU_CHECK_INT(mcp_oip_dtype(NULL), MCP_DTYPE_UNDEFINED);
    TU_CHECK(mcp_oip_datatype(MCP_DTYPE_COMPLEX64) == NULL);
    TU_CHECK(mcp_oip_datatype(MCP_DTYPE_UNDEFINED) == NULL);
}

/* ---- float formatting ---- */

static void check_f32_text(float f)
{
    char buf[48];
    mcp__codec_format_f32(f, buf, sizeof buf);
    float back_narrow = (float)strtod(buf, NULL), back_direct = strtof(buf, NULL);
    tu_checks++;
    if (memcmp(&back_narrow, &f, 4) != 0 || memcmp(&back_direct, &f, 4) != 0)
        TU_FAIL_AT(__FILE__, __LINE__, "%.9g formatted as '%s' reads back as %.9g / %.9g", (double)f, buf,
                   (double)back_narrow, (double)back_direct);
    /* Never longer than the shortest %.Ng that round-trips. */
    int best = 9;
    for (int p = 1; p <= 9; p++) {
        char t[48];
        snprintf(t, sizeof t, "%.*g", p, (double)f);
        if (strtof(t, NULL) == f) {
            best = p;
            break;
        }
    }
    int digits = 0;
    bool leading = true;
    for (const char *c = buf; *c && *c != 'e'; c++) {
        if (*c >= '1' && *c <= '9') leading = false;
        if (*c >= '0' && *c <= '9' && !leading) digits++;
    }
    /* Trailing zeros of the integer part ("100.0") are not significant. */
    const char *dot = strchr(buf, '.');
    if (dot && strcmp(dot, ".0") == 0) {
        const char *e = dot;
        while (e > buf && e[-1] == '0') e--, digits--;
        digits--; /* the ".0" */
    }
    tu_checks++;
    if (digits > best)
        TU_FAIL_AT(__FILE__, __LINE__, "%.9g formatted as '%s' (%d digits), %%.%dg suffices", (double)f, buf, digits,
                   best);
}

static void test_float_format(void)
{
    const float specials[] = {0.1f, 1.0f / 3, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-45f, 16777216.0f, 123456789.0f, 3.14159265f,
                              1e10f, 1e-10f, 100.0f, 0.5f, -2.5f, 65504.0f, 1e16f, 1e15f, 9.99999e-6f, 1.0e-5f};
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) check_f32_text(specials[k]);
    char buf[48];
    mcp__codec_format_f32(0.1f, buf, sizeof buf);
    TU_CHECK_STR(buf, "0.1");
    mcp__codec_format_f32(100.0f, buf, sizeof buf);
    TU_CHECK_STR(buf, "100.0");
    mcp__codec_format_f32(-2.5f, buf, sizeof buf);
    TU_CHECK_STR(buf, "-2.5");
    mcp__codec_format_f32(1e20f, buf, sizeof buf);
    TU_CHECK_STR(buf, "1e+20");
    mcp__codec_format_f32(1.5e-7f, buf, sizeof buf);
    TU_CHECK_STR(buf, "1.5e-07");
    mcp__codec_format_f64(0.1, buf, sizeof buf);
    TU_CHECK_STR(buf, "0.1");
    mcp__codec_format_f64(1.0 / 3, buf, sizeof buf);
    TU_CHECK(strtod(buf, NULL) == 1.0 / 3);

    /* Random bit patterns over the whole finite range. */
    uint64_t st = 0x9E3779B97F4A7C15ULL;
    int fails_before = tu_failures;
    for (int k = 0; k < 300000 && tu_failures == fails_before; k++) {
        uint32_t bits = (uint32_t)tu_rand(&st);
        float f;
        memcpy(&f, &bits, 4);
        if (!isfinite(f)) continue;
        check_f32_text(f);
    }
    for (int k = 0; k < 100000 && tu_failures == fails_before; k++) {
        uint64_t bits = tu_rand(&st);
        double d;
        memcpy(&d, &bits, 8);
        if (!isfinite(d)) continue;
        mcp__codec_format_f64(d, buf, sizeof buf);
        double back = strtod(buf, NULL);
        tu_checks++;
        if (memcmp(&back, &d, 8) != 0) TU_FAIL_AT(__FILE__, __LINE__, "%.17g formatted as '%s'", d, buf);
    }
}

/* ---- v2 JSON ---- */

static void test_v2_json_fp32(void)
{
    fixture f;
    fx_m1(&f);
    mcp_request *r = req_new(), *r2 = req_new();
    TU_REQUIRE_OK(v2_json(r,
                          "{\"id\":\"abc\",\"inputs\":[{\"name\":\"x\",\"shape\":[2,4],\"datatype\":\"FP32\","
                          "\"data\":[1,2.5,-3,4e-3,0.1,6,7,3.4028234663852886e38]}],"
                          "\"parameters\":{\"priority\":2,\"timeout\":1500}}",
                          &f.m),
                  msg);
    TU_CHECK_STR(r->id, "abc");
    TU_CHECK_INT(r->priority, 2);
    TU_CHECK_INT(r->timeout_us, 1500);
    TU_CHECK_INT(r->n_inputs, 1);
    TU_CHECK_STR(r->inputs[0].name, "x");
    TU_CHECK_INT(r->inputs[0].t.dtype, MCP_DTYPE_FLOAT);
    TU_CHECK_INT(r->inputs[0].t.rank, 2);
    TU_CHECK_INT(r->inputs[0].t.dims[0], 2);
    TU_CHECK_INT(r->inputs[0].t.dims[1], 4);
    TU_CHECK(!r->inputs[0].t.owns_data);
    const float *x = r->inputs[0].t.data;
    TU_CHECK(x[1] == 2.5f && x[3] == 4e-3f && x[4] == 0.1f && x[7] == FLT_MAX);
    TU_CHECK_INT(r->n_requested, 0);
    TU_CHECK(!r->raw_binary && !r->binary_default);

    /* Nested data gives the same tensor. */
    TU_REQUIRE_OK(v2_json(r2,
                          "{\"inputs\":[{\"name\":\"x\",\"shape\":[2,4],\"datatype\":\"FP32\","
                          "\"data\":[[1,2.5,-3,4e-3],[0.1,6,7,3.4028234663852886e38]]}]}",
                          &f.m),
                  msg);
    TU_CHECK(tensors_equal(&r->inputs[0].t, &r2->inputs[0].t));
    TU_CHECK(r2->id == NULL);
    req_free(r);
    req_free(r2);
}

static void test_v2_json_types(void)
{
    mcp_request *r = req_new();
    TU_REQUIRE_OK(v2_json(r,
                          "{\"inputs\":["
                          "{\"name\":\"i\",\"shape\":[4],\"datatype\":\"INT64\","
                          "\"data\":[9223372036854775807,-9223372036854775808,9007199254740993,-1]},"
                          "{\"name\":\"b\",\"shape\":[1,3],\"datatype\":\"BOOL\",\"data\":[[true,false,true]]},"
                          "{\"name\":\"s\",\"shape\":[2],\"datatype\":\"BYTES\",\"data\":[\"h\\u00e9llo\",\"\"]},"
                          "{\"name\":\"u\",\"shape\":[2],\"datatype\":\"UINT8\",\"data\":[0,255.0]},"
                          "{\"name\":\"d\",\"shape\":[],\"datatype\":\"FP64\",\"data\":[0.1]},"
                          "{\"name\":\"e\",\"shape\":[0,3],\"datatype\":\"INT32\",\"data\":[]}"
                          "],\"outputs\":[{\"name\":\"y\"},{\"name\":\"z\",\"parameters\":{\"binary_data\":true}}],"
                          "\"parameters\":{\"binary_data_output\":false}}",
                          NULL),
                  msg);
    TU_REQUIRE(r->n_inputs == 6);
    const int64_t *i = r->inputs[0].t.data;
    TU_CHECK(i[0] == INT64_MAX && i[1] == INT64_MIN && i[2] == 9007199254740993LL && i[3] == -1);
    const uint8_t *b = r->inputs[1].t.data;
    TU_CHECK(b[0] == 1 && b[1] == 0 && b[2] == 1);
    TU_CHECK_INT(r->inputs[2].t.dtype, MCP_DTYPE_STRING);
    TU_CHECK_STR(((char **)r->inputs[2].t.data)[0], "h\xc3\xa9llo");
    TU_CHECK_STR(((char **)r->inputs[2].t.data)[1], "");
    TU_CHECK(((uint8_t *)r->inputs[3].t.data)[1] == 255);
    TU_CHECK_INT(r->inputs[4].t.rank, 0);
    TU_CHECK(((double *)r->inputs[4].t.data)[0] == 0.1);
    TU_CHECK_INT(mcp_tensor_numel(&r->inputs[5].t), 0);
    TU_CHECK_INT(r->n_requested, 2);
    TU_CHECK_STR(r->requested[0], "y");
    TU_CHECK(!r->requested_binary[0] && r->requested_binary[1]);
    req_free(r);

    /* binary_data_output sets the default; a per-output false wins. */
    r = req_new();
    TU_REQUIRE_OK(v2_json(r,
                          "{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]}],"
                          "\"outputs\":[{\"name\":\"y\"},{\"name\":\"z\",\"parameters\":{\"binary_data\":false}}],"
                          "\"parameters\":{\"binary_data_output\":true}}",
                          NULL),
                  msg);
    TU_CHECK(r->binary_default);
    TU_CHECK(r->requested_binary[0] && !r->requested_binary[1]);
    req_free(r);
}

/* ---- v2 binary ---- */

static void test_v2_binary(void)
{
    fixture f;
    fx_m1(&f);
    mcp_request *r = req_new();
    uint8_t bin[64];
    size_t off = 0;
    float xs[4] = {1.5f, -2.0f, 0.1f, 1e-45f};
    int64_t is[2] = {INT64_MIN, 42};
    memcpy(bin + off, xs, 16), off += 16;
    memcpy(bin + off, is, 16), off += 16;
    bin[off++] = 1, bin[off++] = 0, bin[off++] = 7; /* BOOL; 7 reads as true */
    const uint8_t strs[] = {2, 0, 0, 0, 'h', 'i', 0, 0, 0, 0, 3, 0, 0, 0, 0xe2, 0x82, 0xac};
    memcpy(bin + off, strs, sizeof strs), off += sizeof strs;
    uint16_t h[2] = {0x3c00, 0xc000}; /* FP16 1.0, -2.0 */
    memcpy(bin + off, h, 4), off += 4;
    TU_REQUIRE_OK(v2_bin(r,
                         "{\"inputs\":["
                         "{\"name\":\"x\",\"shape\":[1,4],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":16}},"
                         "{\"name\":\"i\",\"shape\":[2],\"datatype\":\"INT64\",\"parameters\":{\"binary_data_size\":16}},"
                         "{\"name\":\"j\",\"shape\":[1],\"datatype\":\"INT32\",\"data\":[5]},"
                         "{\"name\":\"b\",\"shape\":[3],\"datatype\":\"BOOL\",\"parameters\":{\"binary_data_size\":3}},"
                         "{\"name\":\"s\",\"shape\":[3],\"datatype\":\"BYTES\",\"parameters\":{\"binary_data_size\":17}},"
                         "{\"name\":\"h\",\"shape\":[2],\"datatype\":\"FP16\",\"parameters\":{\"binary_data_size\":4}}"
                         "]}",
                         bin, off, &f.m),
                  msg);
    TU_REQUIRE(r->n_inputs == 6);
    TU_CHECK(memcmp(r->inputs[0].t.data, xs, 16) == 0);
    TU_CHECK(memcmp(r->inputs[1].t.data, is, 16) == 0);
    TU_CHECK(((int32_t *)r->inputs[2].t.data)[0] == 5);
    const uint8_t *b = r->inputs[3].t.data;
    TU_CHECK(b[0] == 1 && b[1] == 0 && b[2] == 1);
    char **s = r->inputs[4].t.data;
    TU_CHECK_STR(s[0], "hi");
    TU_CHECK_STR(s[1], "");
    TU_CHECK_STR(s[2], "\xe2\x82\xac");
    TU_CHECK(memcmp(r->inputs[5].t.data, h, 4) == 0);
    /* The data was copied into the pool, not borrowed from the body. */
    TU_CHECK((void *)r->inputs[0].t.data != (void *)bin);
    req_free(r);
}

static void test_v2_raw(void)
{
    fixture f;
    fx_m1(&f);
    mcp_request *r = req_new();
    float xs[4] = {1, 2, 3, 4};
    TU_REQUIRE_OK(mcp_codec_v2_decode(r, (const uint8_t *)xs, sizeof xs, 0, &f.m, &err), msg);
    TU_CHECK(r->raw_binary);
    TU_REQUIRE(r->n_inputs == 1);
    TU_CHECK_STR(r->inputs[0].name, "x");
    TU_CHECK_INT(r->inputs[0].t.rank, 2);
    TU_CHECK_INT(r->inputs[0].t.dims[0], 1);
    TU_CHECK_INT(r->inputs[0].t.dims[1], 4);
    TU_CHECK(memcmp(r->inputs[0].t.data, xs, 16) == 0);
    req_free(r);

    r = req_new();
    TU_CHECK_STATUS(mcp_codec_v2_decode(r, (const uint8_t *)xs, 12, 0, &f.m, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "binary data for input 'x' is 12 bytes, expected 16");
    req_free(r);

    fixture mf;
    fx_multi(&mf);
    r = req_new();
    TU_CHECK_STATUS(mcp_codec_v2_decode(r, (const uint8_t *)xs, 16, 0, &mf.m, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "exactly one input; model 'multi' has 2");
    req_free(r);

    fixture vf;
    fx_init(&vf, "var");
    fx_in(&vf, "v", MCP_DTYPE_FLOAT, 2, -1, -1, 0);
    r = req_new();
    TU_CHECK_STATUS(mcp_codec_v2_decode(r, (const uint8_t *)xs, 16, 0, &vf.m, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "input 'v' has a variable dimension 1 in shape [-1,-1]");
    req_free(r);

    r = req_new();
    TU_CHECK_STATUS(mcp_codec_v2_decode(r, (const uint8_t *)xs, 16, 0, NULL, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    req_free(r);

    /* A raw BYTES input: length-prefixed elements. */
    fixture sf;
    fx_init(&sf, "str");
    fx_in(&sf, "s", MCP_DTYPE_STRING, 2, -1, 2, 0);
    const uint8_t sb[] = {1, 0, 0, 0, 'a', 2, 0, 0, 0, 'b', 'c'};
    r = req_new();
    TU_REQUIRE_OK(mcp_codec_v2_decode(r, sb, sizeof sb, 0, &sf.m, &err), msg);
    TU_CHECK_STR(((char **)r->inputs[0].t.data)[1], "bc");
    req_free(r);
    r = req_new();
    TU_CHECK_STATUS(mcp_codec_v2_decode(r, sb, 5, 0, &sf.m, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "holds 1 BYTES elements, expected 2");
    req_free(r);
}

/* ---- v2 round trips: encoder output read back by the decoder ---- */

/* A v2 response reads as a request once "outputs" is renamed "inputs". */
static mcp_status decode_response(mcp_request *r, const mcp_buf *resp, size_t json_len)
{
    size_t jl = json_len ? json_len : resp->len;
    json_error_t je;
    json_t *j = json_loadb((const char *)resp->data, jl, 0, &je);
    if (!j) return mcp_err_set(&err, MCP_STATUS_INTERNAL, "response is not JSON: %s at %d", je.text, je.position);
    json_object_set(j, "inputs", json_object_get(j, "outputs"));
    json_object_del(j, "outputs");
    char *hdr = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    size_t hl = strlen(hdr), bl = resp->len - jl;
    uint8_t *body = mcp_malloc(hl + bl + 1);
    memcpy(body, hdr, hl);
    if (bl) memcpy(body + hl, resp->data + jl, bl);
    free(hdr);
    mcp_status s = mcp_codec_v2_decode(r, body, hl + bl, json_len ? (int64_t)hl : -1, NULL, &err);
    mcp_free(body);
    return s;
}

static void round_trip(const char *json, bool binary_output)
{
    mcp_request *r = req_new(), *back = req_new();
    TU_REQUIRE_OK(v2_json(r, json, NULL), msg);
    /* The decoded inputs become the outputs of a response (borrowed). */
    r->outputs = r->inputs;
    r->n_outputs = r->n_inputs;
    r->binary_default = binary_output;
    r->model_name = "echo";
    mcp_buf out = {0};
    size_t json_len = 99;
    mcp_codec_v2_encode(r, &out, &json_len);
    TU_CHECK(!out.failed);
    bool has_fp16 = false;
    for (int k = 0; k < r->n_outputs; k++)
        has_fp16 |= r->outputs[k].t.dtype == MCP_DTYPE_FLOAT16 || r->outputs[k].t.dtype == MCP_DTYPE_BFLOAT16;
    if (binary_output || has_fp16)
        TU_CHECK(json_len > 0 && json_len < out.len);
    else
        TU_CHECK_INT(json_len, 0);
    TU_CHECK(memcmp(out.data, "{\"model_name\":\"echo\"", 20) == 0);
    mcp_status s = decode_response(back, &out, json_len);
    TU_CHECK_STATUS(s, MCP_STATUS_OK, msg);
    if (s == MCP_STATUS_OK) {
        TU_CHECK_INT(back->n_inputs, r->n_inputs);
        for (int k = 0; k < r->n_inputs && k < back->n_inputs; k++) {
            TU_CHECK_STR(back->inputs[k].name, r->inputs[k].name);
            tu_checks++;
            if (!tensors_equal(&back->inputs[k].t, &r->inputs[k].t))
                TU_FAIL_AT(__FILE__, __LINE__, "tensor '%s' changed in a round trip (binary %d): %.*s", r->inputs[k].name,
                           binary_output, (int)(json_len ? json_len : out.len), (const char *)out.data);
        }
    }
    mcp_buf_free(&out);
    req_free(r);
    req_free(back);
}

static void test_v2_round_trips(void)
{
    const char *cases[] = {
        "{\"inputs\":[{\"name\":\"f\",\"shape\":[2,5],\"datatype\":\"FP32\",\"data\":[0.1,0.333333343,"
        "3.4028234663852886e38,1.17549435e-38,1e-45,-0.0,16777216,123456792,3.14159274,-1e10]}]}",
        "{\"inputs\":[{\"name\":\"i\",\"shape\":[4],\"datatype\":\"INT64\",\"data\":[9223372036854775807,"
        "-9223372036854775808,0,-1]}]}",
        "{\"inputs\":[{\"name\":\"b\",\"shape\":[2,2],\"datatype\":\"BOOL\",\"data\":[[true,false],[false,true]]}]}",
        "{\"inputs\":[{\"name\":\"s\",\"shape\":[5],\"datatype\":\"BYTES\",\"data\":[\"\",\"hello\","
        "\"quote\\\"back\\\\slash\",\"\\u00fcn\\u00efcode \\u20ac\",\"\\n\\t\\u0001\"]}]}",
        "{\"inputs\":[{\"name\":\"d\",\"shape\":[3],\"datatype\":\"FP64\",\"data\":[0.1,1e308,-4.9e-324]},"
        "{\"name\":\"u\",\"shape\":[3],\"datatype\":\"UINT64\",\"data\":[0,1,9223372036854775807]},"
        "{\"name\":\"i8\",\"shape\":[2],\"datatype\":\"INT8\",\"data\":[-128,127]},"
        "{\"name\":\"u16\",\"shape\":[1],\"datatype\":\"UINT16\",\"data\":[65535]},"
        "{\"name\":\"e\",\"shape\":[0],\"datatype\":\"FP32\",\"data\":[]}]}",
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        round_trip(cases[k], false);
        round_trip(cases[k], true);
    }

    /* FP16 and BF16 only travel binary: forced so even when JSON is asked. */
    mcp_request *r = req_new(), *back = req_new();
    uint16_t h[3] = {0x3c00, 0x7bff, 0x8001};
    TU_REQUIRE_OK(v2_bin(r,
                         "{\"inputs\":[{\"name\":\"h\",\"shape\":[3],\"datatype\":\"FP16\","
                         "\"parameters\":{\"binary_data_size\":6}}]}",
                         h, 6, NULL),
                  msg);
    r->outputs = r->inputs;
    r->n_outputs = 1;
    mcp_buf out = {0};
    size_t jl;
    mcp_codec_v2_encode(r, &out, &jl);
    TU_CHECK(jl > 0);
    TU_CHECK(strstr((const char *)out.data, "\"binary_data_size\":6") != NULL);
    TU_REQUIRE_OK(decode_response(back, &out, jl), msg);
    TU_CHECK(tensors_equal(&back->inputs[0].t, &r->inputs[0].t));
    mcp_buf_free(&out);
    req_free(r);
    req_free(back);
}

static void test_v2_encode(void)
{
    fixture f;
    fx_m1(&f);
    mcp_request *r = req_new();
    mcp_req_tensor outs[2];
    memset(outs, 0, sizeof outs);
    int64_t d1[2] = {1, 4}, d2[1] = {1};
    TU_REQUIRE_OK(mcp_tensor_alloc(&outs[0].t, MCP_DTYPE_FLOAT, 2, d1, &err), msg);
    TU_REQUIRE_OK(mcp_tensor_alloc(&outs[1].t, MCP_DTYPE_INT64, 1, d2, &err), msg);
    outs[0].name = "y";
    outs[1].name = "z";
    float *y = outs[0].t.data;
    y[0] = 0.5f, y[1] = NAN, y[2] = INFINITY, y[3] = 1;
    ((int64_t *)outs[1].t.data)[0] = -7;
    r->outputs = outs;
    r->n_outputs = 2;
    r->model = &f.m;
    r->id = "req-1";
    mcp_buf out = {0};
    size_t jl = 5;
    mcp_codec_v2_encode(r, &out, &jl);
    TU_CHECK_INT(jl, 0);
    TU_CHECK_STR((const char *)out.data,
                 "{\"model_name\":\"m1\",\"model_version\":\"1\",\"id\":\"req-1\",\"outputs\":["
                 "{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[0.5,null,null,1.0]},"
                 "{\"name\":\"z\",\"datatype\":\"INT64\",\"shape\":[1],\"data\":[-7]}]}");

    /* Only requested outputs; a per-output binary flag. */
    const char *req[1] = {"z"};
    bool req_bin[1] = {true};
    r->requested = req;
    r->requested_binary = req_bin;
    r->n_requested = 1;
    mcp_buf_reset(&out);
    mcp_codec_v2_encode(r, &out, &jl);
    const char *hdr = "{\"model_name\":\"m1\",\"model_version\":\"1\",\"id\":\"req-1\",\"outputs\":["
                      "{\"name\":\"z\",\"datatype\":\"INT64\",\"shape\":[1],\"parameters\":{\"binary_data_size\":8}}]}";
    TU_CHECK_INT(jl, strlen(hdr));
    TU_CHECK_INT(out.len, strlen(hdr) + 8);
    TU_CHECK(memcmp(out.data, hdr, strlen(hdr)) == 0);
    int64_t z;
    memcpy(&z, out.data + jl, 8);
    TU_CHECK_INT(z, -7);

    /* The raw form answers everything binary. */
    r->n_requested = 0;
    r->raw_binary = true;
    mcp_buf_reset(&out);
    mcp_codec_v2_encode(r, &out, &jl);
    TU_CHECK(jl > 0);
    TU_CHECK_INT(out.len, jl + 16 + 8);
    TU_CHECK(memcmp(out.data + jl, y, 16) == 0);

    /* Appending to a buffer that already holds something. */
    r->raw_binary = false;
    r->id = NULL;
    r->model = NULL;
    r->model_name = "named";
    mcp_buf_reset(&out);
    mcp_buf_puts(&out, "XYZ");
    r->binary_default = true;
    mcp_codec_v2_encode(r, &out, &jl);
    /* A request without an id still gets "id": "" (the protocol requires it). */
    TU_CHECK(memcmp(out.data, "XYZ{\"model_name\":\"named\",", 25) == 0);
    TU_CHECK(strstr((const char *)out.data, ",\"id\":\"\",\"outputs\"") != NULL);
    TU_CHECK_INT(out.len, 3 + jl + 24);

    mcp_buf_free(&out);
    mcp_tensor_release(&outs[0].t);
    mcp_tensor_release(&outs[1].t);
    req_free(r);
}

/* ---- v2 malformed ---- */

static void test_v2_syntax_errors(void)
{
    EXPECT_V2("{\"inputs\": [}", NULL, MCP_STATUS_INVALID_ARGUMENT,
              "malformed JSON at byte offset 12 (line 1, column 13)");
    EXPECT_V2("{\n  \"inputs\": @\n}", NULL, MCP_STATUS_INVALID_ARGUMENT, "byte offset 14 (line 2, column 13)");
    EXPECT_V2("{\"inputs\": [", NULL, MCP_STATUS_INVALID_ARGUMENT, "byte offset 12 (line 1");
    EXPECT_V2("", NULL, MCP_STATUS_INVALID_ARGUMENT, "the request body is empty");
    EXPECT_V2("{} x", NULL, MCP_STATUS_INVALID_ARGUMENT, "byte offset 3");
    EXPECT_V2("{\"inputs\":1,\"inputs\":2}", NULL, MCP_STATUS_INVALID_ARGUMENT, "duplicate object key");
    EXPECT_V2("{\"a\":\"\\u0000\"}", NULL, MCP_STATUS_INVALID_ARGUMENT, "malformed JSON");
    EXPECT_V2("{\"a\":\"\xff\"}", NULL, MCP_STATUS_INVALID_ARGUMENT, "malformed JSON");
    EXPECT_V2("[1,2]", NULL, MCP_STATUS_INVALID_ARGUMENT, "request body must be a JSON object, got an array");

    /* The error body for a message with raw bytes stays valid JSON. */
    mcp_buf b = {0};
    mcp_codec_error("bad \"x\"\n near '\xff\xfe' \xe2\x82\xac", &b);
    json_error_t je;
    json_t *j = json_loadb((const char *)b.data, b.len, 0, &je);
    TU_REQUIRE(j != NULL);
    TU_CHECK_STR(json_string_value(json_object_get(j, "error")),
                 "bad \"x\"\n near '\xef\xbf\xbd\xef\xbf\xbd' \xe2\x82\xac");
    json_decref(j);
    mcp_buf_free(&b);
}

#define IN1_BODY(fields) "\"inputs\":[{\"name\":\"x\"," fields "}]"
#define IN1(fields) "{" IN1_BODY(fields) "}"

static void test_v2_field_errors(void)
{
    fixture f;
    fx_m1(&f);
    EXPECT_V2("{}", NULL, MCP_STATUS_INVALID_ARGUMENT, "missing field 'inputs'");
    EXPECT_V2("{\"inputs\":[]}", NULL, MCP_STATUS_INVALID_ARGUMENT, "'inputs' must be a non-empty array");
    EXPECT_V2("{\"inputs\":{}}", NULL, MCP_STATUS_INVALID_ARGUMENT, "'inputs' must be a non-empty array");
    EXPECT_V2("{\"inputs\":[3]}", NULL, MCP_STATUS_INVALID_ARGUMENT, "inputs[0] must be an object");
    EXPECT_V2("{\"inputs\":[{\"shape\":[1]}]}", NULL, MCP_STATUS_INVALID_ARGUMENT, "inputs[0]: missing field 'name'");
    EXPECT_V2("{\"inputs\":[{\"name\":7}]}", NULL, MCP_STATUS_INVALID_ARGUMENT, "'name' must be a non-empty string");
    EXPECT_V2(IN1("\"shape\":[1],\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT, "input 'x': missing field 'datatype'");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"FP99\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': datatype 'FP99' unknown");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":4,\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "'datatype' must be a string");
    EXPECT_V2(IN1("\"datatype\":\"FP32\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': missing field 'shape'");
    EXPECT_V2(IN1("\"shape\":3,\"datatype\":\"FP32\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "'shape' must be an array");
    EXPECT_V2(IN1("\"shape\":[2,-1],\"datatype\":\"FP32\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': shape[1] must not be negative (got -1)");
    EXPECT_V2(IN1("\"shape\":[1.5],\"datatype\":\"FP32\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': shape[0] must be an integer");
    EXPECT_V2(IN1("\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1],\"datatype\":\"FP32\",\"data\":[1]"), NULL,
              MCP_STATUS_INVALID_ARGUMENT, "shape has 13 dimensions, at most 12");
    EXPECT_V2(IN1("\"shape\":[2,3],\"datatype\":\"FP32\",\"data\":[1,2,3,4,5]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': shape [2,3] needs 6 elements, data has 5");
    EXPECT_V2(IN1("\"shape\":[2,3],\"datatype\":\"FP32\",\"data\":[[1,2,3],[4,5,6],[7]]"), NULL,
              MCP_STATUS_INVALID_ARGUMENT, "shape [2,3] needs 6 elements, data has 7");
    EXPECT_V2(IN1("\"shape\":[2],\"datatype\":\"FP32\",\"data\":[[1],[2]]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "nested 2 levels deep");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"FP32\",\"data\":5"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "'data' must be an array");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"FP32\""), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': missing field 'data'");
    /* Wrong element types and ranges. */
    EXPECT_V2(IN1("\"shape\":[2],\"datatype\":\"FP32\",\"data\":[1,\"2\"]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': element 1 is a string, expected a number (FP32)");
    EXPECT_V2(IN1("\"shape\":[2],\"datatype\":\"FP32\",\"data\":[1,null]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': element 1 is null");
    EXPECT_V2(IN1("\"shape\":[2],\"datatype\":\"FP32\",\"data\":[{},1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': element 0 is an object");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1e39]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': element 0 (1e+39) is out of range for FP32");
    EXPECT_V2(IN1("\"shape\":[2],\"datatype\":\"INT64\",\"data\":[1,1.5]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': element 1 (1.5) is not an integer (INT64)");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"INT64\",\"data\":[1e19]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "out of range for INT64");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"UINT8\",\"data\":[256]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': element 0 (256) is out of range for UINT8");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"UINT32\",\"data\":[-1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "(-1) is out of range for UINT32");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"INT8\",\"data\":[true]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "element 0 is a boolean, expected a number (INT8)");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"BOOL\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "element 0 is a number, expected true or false (BOOL)");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "element 0 is a number, expected a string (BYTES)");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"FP16\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': datatype FP16 travels only as binary data");
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"BF16\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "datatype BF16 travels only as binary data");
    /* Duplicates, ids, parameters. */
    EXPECT_V2("{\"inputs\":[{\"name\":\"x\",\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]},"
              "{\"name\":\"x\",\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]}]}",
              NULL, MCP_STATUS_INVALID_ARGUMENT, "input 'x' appears more than once");
    EXPECT_V2("{\"id\":5," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}", NULL,
              MCP_STATUS_INVALID_ARGUMENT, "'id' must be a string");
    EXPECT_V2("{\"parameters\":{\"priority\":-1}," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}", NULL,
              MCP_STATUS_INVALID_ARGUMENT, "parameters.priority must not be negative");
    EXPECT_V2("{\"parameters\":{\"timeout\":\"soon\"}," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}", NULL,
              MCP_STATUS_INVALID_ARGUMENT, "parameters.timeout (microseconds) must be an integer");
    EXPECT_V2("{\"parameters\":[]," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}", NULL,
              MCP_STATUS_INVALID_ARGUMENT, "'parameters' must be an object");
    EXPECT_V2("{\"parameters\":{\"k\":[1]}," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}", NULL,
              MCP_STATUS_INVALID_ARGUMENT, "parameters.k must be a string, number or boolean");
    EXPECT_V2("{\"parameters\":{\"binary_data_output\":1}," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}",
              NULL, MCP_STATUS_INVALID_ARGUMENT, "binary_data_output must be a boolean");
    EXPECT_V2("{\"parameters\":{\"sequence_id\":12}," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}", NULL,
              MCP_STATUS_UNSUPPORTED, "sequence batching");
    EXPECT_V2("{\"parameters\":{\"sequence_id\":0,\"other\":\"x\"}," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}",
              NULL, MCP_STATUS_OK, NULL);
    EXPECT_V2(IN1("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1],\"parameters\":{\"shared_memory_region\":\"r\"}"),
              NULL, MCP_STATUS_UNSUPPORTED, "shared-memory");
    /* Requested outputs. */
    EXPECT_V2("{\"outputs\":[{\"name\":\"nope\"}]," IN1_BODY("\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]") "}",
              &f.m, MCP_STATUS_INVALID_ARGUMENT, "requested output 'nope' is not an output of model 'm1'");
    EXPECT_V2("{\"outputs\":[{\"name\":\"y\"},{\"name\":\"y\"}]," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}",
              NULL, MCP_STATUS_INVALID_ARGUMENT, "requested output 'y' appears more than once");
    EXPECT_V2("{\"outputs\":[{}]," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}", NULL,
              MCP_STATUS_INVALID_ARGUMENT, "outputs[0]: missing field 'name'");
    EXPECT_V2("{\"outputs\":{}," IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}", NULL,
              MCP_STATUS_INVALID_ARGUMENT, "'outputs' must be an array");
    EXPECT_V2("{\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":\"yes\"}}],"
              IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}",
              NULL, MCP_STATUS_INVALID_ARGUMENT, "requested output 'y': parameters.binary_data must be a boolean");
    EXPECT_V2("{\"outputs\":[{\"name\":\"y\",\"parameters\":{\"classification\":3}}],"
              IN1_BODY("\"shape\":[1],\"datatype\":\"FP32\",\"data\":[1]") "}",
              NULL, MCP_STATUS_UNSUPPORTED, "classification is not supported");
}

static void test_v2_huge_shapes(void)
{
    /* Shapes that lie about their size are refused before any allocation
     * (expect_v2 checks the pool stayed small). */
    EXPECT_V2(IN1("\"shape\":[1000000000000],\"datatype\":\"FP32\",\"data\":[1]"), NULL, MCP_STATUS_INVALID_ARGUMENT,
              "shape [1000000000000] needs 1000000000000 elements, data has 1");
    EXPECT_V2(IN1("\"shape\":[4294967296,4294967296],\"datatype\":\"FP32\",\"data\":[1]"), NULL,
              MCP_STATUS_INVALID_ARGUMENT, "shape [4294967296,4294967296] has too many elements");
    EXPECT_V2(IN1("\"shape\":[0,4294967296,4294967296],\"datatype\":\"FP32\",\"data\":[]"), NULL,
              MCP_STATUS_INVALID_ARGUMENT, "has too many elements");
    EXPECT_V2(IN1("\"shape\":[9223372036854775807],\"datatype\":\"BYTES\",\"data\":[\"a\"]"), NULL,
              MCP_STATUS_INVALID_ARGUMENT, "needs 9223372036854775807 elements, data has 1");
    EXPECT_V2_BIN(IN1("\"shape\":[4611686018427387904],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":16}"),
                  "0123456789abcdef", 16, NULL, MCP_STATUS_INVALID_ARGUMENT, "has too many bytes");
    EXPECT_V2_BIN(IN1("\"shape\":[1000000000000],\"datatype\":\"INT64\",\"parameters\":{\"binary_data_size\":16}"),
                  "0123456789abcdef", 16, NULL, MCP_STATUS_INVALID_ARGUMENT,
                  "binary data for input 'x' is 16 bytes, expected 8000000000000");
    EXPECT_V2_BIN(IN1("\"shape\":[1000000000000],\"datatype\":\"BYTES\",\"parameters\":{\"binary_data_size\":16}"),
                  "\4\0\0\0abcd\4\0\0\0efgh", 16, NULL, MCP_STATUS_INVALID_ARGUMENT,
                  "holds 2 BYTES elements, expected 1000000000000");
    fixture f;
    fx_init(&f, "huge");
    fx_in(&f, "x", MCP_DTYPE_FLOAT, 3, -1, 4294967296, 4294967296);
    mcp_request *r = req_new();
    TU_CHECK_STATUS(mcp_codec_v2_decode(r, (const uint8_t *)"abcd", 4, 0, &f.m, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "too many elements");
    req_free(r);
}

static void test_v2_binary_errors(void)
{
    const char *x16 = IN1("\"shape\":[4],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":16}");
    const char bytes[32] = {0};
    EXPECT_V2_BIN(x16, bytes, 16, NULL, MCP_STATUS_OK, NULL);
    EXPECT_V2_BIN(IN1("\"shape\":[4],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":12}"), bytes, 12, NULL,
                  MCP_STATUS_INVALID_ARGUMENT, "binary data for input 'x' is 12 bytes, expected 16");
    EXPECT_V2_BIN(x16, bytes, 8, NULL, MCP_STATUS_INVALID_ARGUMENT,
                  "binary data for input 'x' is declared as 16 bytes, but only 8 bytes follow the JSON header");
    EXPECT_V2_BIN(x16, bytes, 20, NULL, MCP_STATUS_INVALID_ARGUMENT,
                  "holds 20 bytes of binary data after the JSON header, but the inputs declare 16");
    EXPECT_V2_BIN(IN1("\"shape\":[4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]"), bytes, 4, NULL,
                  MCP_STATUS_INVALID_ARGUMENT, "holds 4 bytes of binary data after the JSON header, but the inputs declare 0");
    EXPECT_V2_BIN(IN1("\"shape\":[4],\"datatype\":\"FP32\",\"data\":[1,2,3,4],\"parameters\":{\"binary_data_size\":16}"),
                  bytes, 16, NULL, MCP_STATUS_INVALID_ARGUMENT, "has both 'data' and parameters.binary_data_size");
    EXPECT_V2_BIN(IN1("\"shape\":[4],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":-16}"), bytes, 16, NULL,
                  MCP_STATUS_INVALID_ARGUMENT, "binary_data_size must not be negative");
    EXPECT_V2_BIN(IN1("\"shape\":[4],\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":\"16\"}"), bytes, 16,
                  NULL, MCP_STATUS_INVALID_ARGUMENT, "binary_data_size must be an integer");
    /* Binary declared but no header length given: nothing follows. */
    EXPECT_V2(x16, NULL, MCP_STATUS_INVALID_ARGUMENT, "no Inference-Header-Content-Length was given");
    /* Header length past the body. */
    mcp_request *r = req_new();
    TU_CHECK_STATUS(mcp_codec_v2_decode(r, (const uint8_t *)"{}", 2, 10, NULL, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "Inference-Header-Content-Length is 10 but the body has only 2 bytes");
    req_free(r);
    /* Header length cutting the JSON short gives a syntax error at its end. */
    r = req_new();
    const char *j = "{\"inputs\":[]}";
    TU_CHECK_STATUS(mcp_codec_v2_decode(r, (const uint8_t *)j, strlen(j), 5, NULL, &err), MCP_STATUS_INVALID_ARGUMENT,
                    msg);
    TU_CHECK_CONTAINS(msg, "malformed JSON at byte offset 5");
    req_free(r);
    /* BYTES framing. */
    const char *s8 = IN1("\"shape\":[2],\"datatype\":\"BYTES\",\"parameters\":{\"binary_data_size\":8}");
    EXPECT_V2_BIN(s8, "\1\0\0\0a\0\0\0", 8, NULL, MCP_STATUS_INVALID_ARGUMENT,
                  "BYTES element 1 is cut short (3 bytes left");
    EXPECT_V2_BIN(s8, "\1\0\0\0a\x09\0\0", 8, NULL, MCP_STATUS_INVALID_ARGUMENT,
                  "BYTES element 1 is cut short");
    EXPECT_V2_BIN(s8, "\5\0\0\0abcd", 8, NULL, MCP_STATUS_INVALID_ARGUMENT,
                  "BYTES element 0 claims 5 bytes but only 4 remain");
    EXPECT_V2_BIN(s8, "\4\0\0\0a\0cd", 8, NULL, MCP_STATUS_INVALID_ARGUMENT,
                  "BYTES element 0 contains a NUL byte");
    EXPECT_V2_BIN(s8, "\4\0\0\0abcd", 8, NULL, MCP_STATUS_INVALID_ARGUMENT, "holds 1 BYTES elements, expected 2");
    EXPECT_V2_BIN(s8, "\0\0\0\0\0\0\0\0", 8, NULL, MCP_STATUS_OK, NULL);
}

/* ---- KServe v1 ---- */

static mcp_status v1(mcp_request *r, const char *json, const mcp_model_version *m)
{
    msg[0] = 0;
    return mcp_codec_v1_decode(r, (const uint8_t *)json, strlen(json), m, &err);
}

#define EXPECT_V1(json, m, st, needle)                                                                              \
    do {                                                                                                            \
        mcp_request *r_ = req_new();                                                                                \
        mcp_status s_ = v1(r_, json, m);                                                                            \
        tu_checks++;                                                                                                \
        if (s_ != (st) || !strstr(msg, needle))                                                                     \
            TU_FAIL_AT(__FILE__, __LINE__, "v1 decode of %s: got '%s' \"%s\", expected \"%s\"", json,              \
                       mcp_status_str(s_), msg, needle);                                                            \
        req_free(r_);                                                                                               \
    } while (0)

static void test_v1_decode(void)
{
    fixture f, mf;
    fx_m1(&f);
    fx_multi(&mf);
    mcp_request *r = req_new();
    TU_REQUIRE_OK(v1(r, "{\"instances\":[[1,2,3,4],[5,6,7,8.5]]}", &f.m), msg);
    TU_REQUIRE(r->n_inputs == 1);
    TU_CHECK_STR(r->inputs[0].name, "x");
    TU_CHECK_INT(r->inputs[0].t.dtype, MCP_DTYPE_FLOAT);
    TU_CHECK_INT(r->inputs[0].t.rank, 2);
    TU_CHECK_INT(r->inputs[0].t.dims[0], 2);
    TU_CHECK_INT(r->inputs[0].t.dims[1], 4);
    TU_CHECK(((float *)r->inputs[0].t.data)[7] == 8.5f);
    req_free(r);

    /* Columnar form: the same tensor. */
    r = req_new();
    TU_REQUIRE_OK(v1(r, "{\"inputs\":[[1,2,3,4],[5,6,7,8.5]]}", &f.m), msg);
    TU_CHECK_INT(r->inputs[0].t.dims[0], 2);
    TU_CHECK(((float *)r->inputs[0].t.data)[7] == 8.5f);
    req_free(r);

    /* Named rows for a multi-input model. */
    r = req_new();
    TU_REQUIRE_OK(v1(r, "{\"instances\":[{\"b\":3,\"a\":[1,2]},{\"a\":[3,4],\"b\":-4}]}", &mf.m), msg);
    TU_REQUIRE(r->n_inputs == 2);
    TU_CHECK_STR(r->inputs[0].name, "a");
    TU_CHECK_INT(r->inputs[0].t.dims[0], 2);
    TU_CHECK_INT(r->inputs[0].t.dims[1], 2);
    TU_CHECK_STR(r->inputs[1].name, "b");
    TU_CHECK_INT(r->inputs[1].t.dtype, MCP_DTYPE_INT64);
    TU_CHECK_INT(r->inputs[1].t.rank, 1);
    TU_CHECK_INT(((int64_t *)r->inputs[1].t.data)[1], -4);
    TU_CHECK(((float *)r->inputs[0].t.data)[3] == 4.0f);
    req_free(r);

    /* Named columns. */
    r = req_new();
    TU_REQUIRE_OK(v1(r, "{\"inputs\":{\"a\":[[1,2]],\"b\":[7]}}", &mf.m), msg);
    TU_REQUIRE(r->n_inputs == 2);
    TU_CHECK_INT(((int64_t *)r->inputs[1].t.data)[0], 7);
    req_free(r);

    EXPECT_V1("{\"instances\":[[1]],\"inputs\":[[1]]}", &f.m, MCP_STATUS_INVALID_ARGUMENT, "has both 'instances'");
    EXPECT_V1("{\"signature_name\":\"x\"}", &f.m, MCP_STATUS_INVALID_ARGUMENT,
              "missing field 'instances' (row form) or 'inputs' (columnar form)");
    EXPECT_V1("{\"instances\":[]}", &f.m, MCP_STATUS_INVALID_ARGUMENT, "'instances' must be a non-empty array");
    EXPECT_V1("{\"instances\":[[1,2],[3]]}", &f.m, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': instances[1] has shape [1], instances[0] has [2]");
    EXPECT_V1("{\"instances\":[[[1,2],[3]]]}", &f.m, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': instances[0]: ragged data: a list at depth 1 has 1 elements, expected 2");
    EXPECT_V1("{\"instances\":[[1,\"a\"]]}", &f.m, MCP_STATUS_INVALID_ARGUMENT,
              "input 'x': element 1 is a string, expected a number (FP32)");
    EXPECT_V1("{\"instances\":[[1,null]]}", &f.m, MCP_STATUS_INVALID_ARGUMENT, "an element is null");
    EXPECT_V1("{\"instances\":[[1,2]]", &f.m, MCP_STATUS_INVALID_ARGUMENT, "malformed JSON at byte offset 20");
    EXPECT_V1("{\"instances\":[[1,2]]}", &mf.m, MCP_STATUS_INVALID_ARGUMENT,
              "model 'multi' has 2 inputs: each instance must be an object naming them");
    EXPECT_V1("{\"instances\":[{\"a\":[1,2],\"c\":1}]}", &mf.m, MCP_STATUS_INVALID_ARGUMENT,
              "instances[0]: 'c' is not an input of model 'multi'");
    EXPECT_V1("{\"instances\":[{\"a\":[1,2],\"b\":1},{\"a\":[1,2]}]}", &mf.m, MCP_STATUS_INVALID_ARGUMENT,
              "instances[1]: missing input 'b'");
    EXPECT_V1("{\"instances\":[{\"a\":[1,2]},{\"a\":[1,2],\"zz\":1}]}", &mf.m, MCP_STATUS_INVALID_ARGUMENT,
              "instances[1]: 'zz' is not an input of model 'multi'");
    EXPECT_V1("{\"instances\":[{\"a\":[1,2]},[1,2]]}", &mf.m, MCP_STATUS_INVALID_ARGUMENT,
              "instances[1] is not an object but instances[0] is one");
    EXPECT_V1("{\"inputs\":[[1,2]]}", &mf.m, MCP_STATUS_INVALID_ARGUMENT,
              "model 'multi' has 2 inputs: 'inputs' must be an object naming them");
    EXPECT_V1("{\"inputs\":{\"q\":1}}", &mf.m, MCP_STATUS_INVALID_ARGUMENT, "'q' is not an input of model 'multi'");
    EXPECT_V1("{\"inputs\":{}}", &mf.m, MCP_STATUS_INVALID_ARGUMENT, "names no inputs of model 'multi'");
    EXPECT_V1("{\"instances\":[{\"a\":[1,2],\"b\":1.5}]}", &mf.m, MCP_STATUS_INVALID_ARGUMENT,
              "input 'b': element 0 (1.5) is not an integer (INT64)");
    EXPECT_V1("{\"instances\":[[[[[[[[[[[[[1]]]]]]]]]]]]]}", &f.m, MCP_STATUS_INVALID_ARGUMENT, "levels deep");
    r = req_new();
    TU_CHECK_STATUS(v1(r, "{\"instances\":[[1]]}", NULL), MCP_STATUS_INVALID_ARGUMENT, msg);
    req_free(r);
}

static void test_v1_encode(void)
{
    mcp_request *r = req_new();
    mcp_req_tensor outs[2];
    memset(outs, 0, sizeof outs);
    int64_t d1[2] = {2, 3}, d2[1] = {2};
    TU_REQUIRE_OK(mcp_tensor_alloc(&outs[0].t, MCP_DTYPE_FLOAT, 2, d1, &err), msg);
    TU_REQUIRE_OK(mcp_tensor_alloc(&outs[1].t, MCP_DTYPE_BOOL, 1, d2, &err), msg);
    outs[0].name = "p";
    outs[1].name = "q";
    for (int k = 0; k < 6; k++) ((float *)outs[0].t.data)[k] = (float)k / 2;
    ((uint8_t *)outs[1].t.data)[1] = 1;
    r->outputs = outs;
    r->n_outputs = 1;
    mcp_buf out = {0};
    mcp_codec_v1_encode(r, &out);
    TU_CHECK_STR((const char *)out.data, "{\"predictions\":[[0.0,0.5,1.0],[1.5,2.0,2.5]]}");
    r->n_outputs = 2;
    mcp_buf_reset(&out);
    mcp_codec_v1_encode(r, &out);
    TU_CHECK_STR((const char *)out.data, "{\"predictions\":[{\"p\":[0.0,0.5,1.0],\"q\":false},"
                                         "{\"p\":[1.5,2.0,2.5],\"q\":true}]}");
    /* Outputs that disagree on the batch dimension: one prediction. */
    outs[1].t.dims[0] = 1;
    mcp_buf_reset(&out);
    mcp_codec_v1_encode(r, &out);
    TU_CHECK_STR((const char *)out.data, "{\"predictions\":[{\"p\":[[0.0,0.5,1.0],[1.5,2.0,2.5]],\"q\":[false]}]}");
    outs[1].t.dims[0] = 2;
    r->n_outputs = 0;
    mcp_buf_reset(&out);
    mcp_codec_v1_encode(r, &out);
    TU_CHECK_STR((const char *)out.data, "{\"predictions\":[]}");
    mcp_buf_free(&out);
    mcp_tensor_release(&outs[0].t);
    mcp_tensor_release(&outs[1].t);
    req_free(r);
}

/* ---- simple ---- */

static mcp_status simple(mcp_request *r, const char *json, const mcp_model_version *m)
{
    msg[0] = 0;
    return mcp_codec_simple_decode(r, (const uint8_t *)json, strlen(json), m, &err);
}

#define EXPECT_SIMPLE(json, m, needle)                                                                              \
    do {                                                                                                            \
        mcp_request *r_ = req_new();                                                                                \
        mcp_status s_ = simple(r_, json, m);                                                                        \
        tu_checks++;                                                                                                \
        if (s_ == MCP_STATUS_OK || !strstr(msg, needle))                                                            \
            TU_FAIL_AT(__FILE__, __LINE__, "simple decode of %s: got '%s' \"%s\", expected \"%s\"", json,          \
                       mcp_status_str(s_), msg, needle);                                                            \
        req_free(r_);                                                                                               \
    } while (0)

static void test_simple(void)
{
    char name[16];
    const char *b = "{\"input\":[1],\"model\":\"digits\"}";
    TU_REQUIRE_OK(mcp_codec_simple_model((const uint8_t *)b, strlen(b), name, sizeof name, &err), msg);
    TU_CHECK_STR(name, "digits");
    b = "{\"input\":[1]}";
    TU_REQUIRE_OK(mcp_codec_simple_model((const uint8_t *)b, strlen(b), name, sizeof name, &err), msg);
    TU_CHECK_STR(name, "");
    b = "{\"model\":3}";
    TU_CHECK_STATUS(mcp_codec_simple_model((const uint8_t *)b, strlen(b), name, sizeof name, &err),
                    MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'model' must be a string");
    b = "{\"model\":\"a-very-long-model-name\"}";
    TU_CHECK_STATUS(mcp_codec_simple_model((const uint8_t *)b, strlen(b), name, sizeof name, &err),
                    MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'model' is 22 bytes long, at most 15");
    b = "{\"model\":";
    TU_CHECK_STATUS(mcp_codec_simple_model((const uint8_t *)b, strlen(b), name, sizeof name, &err),
                    MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "malformed JSON at byte offset 9");

    fixture f;
    fx_m1(&f);
    mcp_request *r = req_new();
    TU_REQUIRE_OK(simple(r, "{\"input\":[1,2,3,4,5,6,7,8],\"shape\":[2,4],\"model\":\"m1\"}", &f.m), msg);
    TU_CHECK_INT(r->inputs[0].t.dims[0], 2);
    TU_CHECK(((float *)r->inputs[0].t.data)[7] == 8.0f);
    req_free(r);
    /* No shape: the model's, the batch dimension solved. */
    r = req_new();
    TU_REQUIRE_OK(simple(r, "{\"input\":[1,2,3,4,5,6,7,8]}", &f.m), msg);
    TU_CHECK_INT(r->inputs[0].t.rank, 2);
    TU_CHECK_INT(r->inputs[0].t.dims[0], 2);
    TU_CHECK_INT(r->inputs[0].t.dims[1], 4);
    req_free(r);

    fixture bf;
    fx_init(&bf, "flags");
    fx_in(&bf, "f", MCP_DTYPE_BOOL, 1, 3, 0, 0);
    r = req_new();
    TU_REQUIRE_OK(simple(r, "{\"input\":[1,0,true]}", &bf.m), msg);
    TU_CHECK(((uint8_t *)r->inputs[0].t.data)[0] == 1 && ((uint8_t *)r->inputs[0].t.data)[1] == 0);
    req_free(r);

    EXPECT_SIMPLE("{\"input\":[1,2,3]}", &f.m, "input 'x': 3 elements do not fill model shape [-1,4]");
    EXPECT_SIMPLE("{\"input\":[1,2,3],\"shape\":[1,4]}", &f.m, "input 'x': shape [1,4] needs 4 elements, 'input' has 3");
    EXPECT_SIMPLE("{\"inputs\":[1,2,3,4]}", &f.m, "unknown field 'inputs'");
    EXPECT_SIMPLE("{\"shape\":[1,4]}", &f.m, "missing field 'input'");
    EXPECT_SIMPLE("{\"input\":5}", &f.m, "'input' must be an array of numbers");
    EXPECT_SIMPLE("{\"input\":[1,2,3,\"4\"]}", &f.m, "input 'x': element 3 is a string, expected a number (FP32)");
    EXPECT_SIMPLE("{\"input\":[1,2,3,4],\"shape\":[1,-4]}", &f.m, "shape[1] must not be negative");
    EXPECT_SIMPLE("{\"input\":[1,2,3,4],\"model\":[]}", &f.m, "'model' must be a string");
    EXPECT_SIMPLE("{\"input\":[1,2]}", &bf.m, "model shape [3] needs 3 elements, 'input' has 2");
    EXPECT_SIMPLE("{\"input\":[1,2,3]}", NULL, "needs a model");
    fixture mf;
    fx_multi(&mf);
    EXPECT_SIMPLE("{\"input\":[1,2]}", &mf.m, "model 'multi' has 2 inputs; /v1/infer serves single-input models");
    fixture vf;
    fx_init(&vf, "var");
    fx_in(&vf, "v", MCP_DTYPE_FLOAT, 3, -1, -1, -1);
    EXPECT_SIMPLE("{\"input\":[1,2]}", &vf.m, "input 'v' has variable dimensions [-1,-1,-1]; give \"shape\"");
    r = req_new();
    TU_REQUIRE_OK(simple(r, "{\"input\":[1,2],\"shape\":[2,1,1]}", &vf.m), msg);
    req_free(r);

    /* Encode: first output, flat. */
    r = req_new();
    mcp_req_tensor o;
    memset(&o, 0, sizeof o);
    int64_t d[2] = {1, 3};
    TU_REQUIRE_OK(mcp_tensor_alloc(&o.t, MCP_DTYPE_INT32, 2, d, &err), msg);
    ((int32_t *)o.t.data)[2] = -9;
    o.name = "y";
    r->outputs = &o;
    r->n_outputs = 1;
    r->model = &f.m;
    mcp_buf out = {0};
    mcp_codec_simple_encode(r, &out);
    TU_CHECK_STR((const char *)out.data, "{\"output\":[0,0,-9],\"shape\":[1,3],\"model\":\"m1\"}");
    mcp_buf_free(&out);
    mcp_tensor_release(&o.t);
    req_free(r);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_datatypes);
    TU_RUN(test_float_format);
    TU_RUN(test_v2_json_fp32);
    TU_RUN(test_v2_json_types);
    TU_RUN(test_v2_binary);
    TU_RUN(test_v2_raw);
    TU_RUN(test_v2_round_trips);
    TU_RUN(test_v2_encode);
    TU_RUN(test_v2_syntax_errors);
    TU_RUN(test_v2_field_errors);
    TU_RUN(test_v2_huge_shapes);
    TU_RUN(test_v2_binary_errors);
    TU_RUN(test_v1_decode);
    TU_RUN(test_v1_encode);
    TU_RUN(test_simple);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("codec");
}
