/*
 * libFuzzer target: the JSON request decoders (OIP v2 without binary data,
 * KServe v1, the quickstart protocol) and, on success, their encoders.
 * Input: one selector byte (protocol and fixture model), then the body.
 * Checks: no crash or leak; a failure always has a message; a decoded
 * request is well formed; every encoder writes valid JSON.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "serve/serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_MODELS 4

/* Fixture models: single FP32 input with a batch dim; two inputs; one
 * BYTES input; one fixed-shape BOOL input. */
static void fixture(int which, mcp_model_version *m, mcp_tensor_meta *in, mcp_tensor_meta *out)
{
    memset(m, 0, sizeof *m);
    memset(in, 0, 2 * sizeof *in);
    memset(out, 0, 2 * sizeof *out);
    m->name = (char *)"fuzz";
    m->version = (char *)"1";
    m->inputs = in;
    m->outputs = out;
    m->n_outputs = 2;
    out[0] = (mcp_tensor_meta){.name = "y", .dtype = MCP_DTYPE_FLOAT, .rank = 2, .dims = {-1, 4}};
    out[1] = (mcp_tensor_meta){.name = "z", .dtype = MCP_DTYPE_INT64, .rank = 1, .dims = {-1}};
    switch (which) {
    case 0:
        m->n_inputs = 1;
        in[0] = (mcp_tensor_meta){.name = "x", .dtype = MCP_DTYPE_FLOAT, .rank = 2, .dims = {-1, 4}};
        break;
    case 1:
        m->n_inputs = 2;
        in[0] = (mcp_tensor_meta){.name = "a", .dtype = MCP_DTYPE_FLOAT16, .rank = 2, .dims = {-1, 2}};
        in[1] = (mcp_tensor_meta){.name = "b", .dtype = MCP_DTYPE_UINT8, .rank = 1, .dims = {-1}};
        break;
    case 2:
        m->n_inputs = 1;
        in[0] = (mcp_tensor_meta){.name = "s", .dtype = MCP_DTYPE_STRING, .rank = 2, .dims = {-1, -1}};
        break;
    default:
        m->n_inputs = 1;
        in[0] = (mcp_tensor_meta){.name = "f", .dtype = MCP_DTYPE_BOOL, .rank = 1, .dims = {3}};
        break;
    }
}

static void check_json(const mcp_buf *b, size_t len)
{
    MCP_ASSERT(!b->failed);
    json_error_t je;
    json_t *j = json_loadb((const char *)b->data, len, 0, &je);
    MCP_ASSERT(j != NULL);
    json_decref(j);
}

static void check_request(const mcp_request *r)
{
    MCP_ASSERT(r->n_inputs > 0 && r->inputs);
    for (int k = 0; k < r->n_inputs; k++) {
        const mcp_tensor *t = &r->inputs[k].t;
        MCP_ASSERT(r->inputs[k].name && t->data && !t->owns_data);
        MCP_ASSERT(t->rank >= 0 && t->rank <= MCP_MAX_RANK);
        int64_t n = mcp_tensor_numel(t);
        MCP_ASSERT(n >= 0);
        if (t->dtype == MCP_DTYPE_STRING)
            for (int64_t i = 0; i < n; i++) MCP_ASSERT(((char **)t->data)[i] != NULL);
        else if (t->dtype == MCP_DTYPE_BOOL)
            for (int64_t i = 0; i < n; i++) MCP_ASSERT(((uint8_t *)t->data)[i] <= 1);
    }
    for (int k = 0; k < r->n_requested; k++) MCP_ASSERT(r->requested[k] != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int proto = data[0] % 3, which = (data[0] / 3) % N_MODELS;
    const uint8_t *body = data + 1;
    size_t len = size - 1;

    mcp_model_version m;
    mcp_tensor_meta in[2], out[2];
    fixture(which, &m, in, out);
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    msg[0] = '\0';
    mcp_request r;
    memset(&r, 0, sizeof r);
    r.pool = mcp_pool_create(4096);
    MCP_ASSERT(r.pool);

    mcp_status s;
    if (proto == 0) {
        s = mcp_codec_v2_decode(&r, body, len, -1, (data[0] & 0x80) ? NULL : &m, &err);
    } else if (proto == 1) {
        s = mcp_codec_v1_decode(&r, body, len, &m, &err);
    } else {
        char name[64];
        mcp_status sm = mcp_codec_simple_model(body, len, name, sizeof name, &err);
        MCP_ASSERT(sm == MCP_STATUS_OK || msg[0]);
        if (sm == MCP_STATUS_OK) MCP_ASSERT(strlen(name) < sizeof name);
        s = mcp_codec_simple_decode(&r, body, len, &m, &err);
    }

    mcp_buf b = {0};
    if (s == MCP_STATUS_OK) {
        check_request(&r);
        /* Echo the inputs back as outputs through every encoder. */
        r.outputs = r.inputs;
        r.n_outputs = r.n_inputs;
        r.model = &m;
        size_t json_len = 0;
        mcp_codec_v2_encode(&r, &b, &json_len);
        MCP_ASSERT(json_len <= b.len);
        check_json(&b, json_len ? json_len : b.len);
        mcp_buf_reset(&b);
        mcp_codec_v1_encode(&r, &b);
        check_json(&b, b.len);
        mcp_buf_reset(&b);
        mcp_codec_simple_encode(&r, &b);
        check_json(&b, b.len);
    } else {
        MCP_ASSERT(msg[0] != '\0');
        mcp_codec_error(msg, &b);
        check_json(&b, b.len);
    }
    mcp_buf_free(&b);
    mcp_pool_destroy(r.pool);
    return 0;
}
