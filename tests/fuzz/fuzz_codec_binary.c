/*
 * libFuzzer target: the OIP v2 decoder with the binary tensor data
 * extension, including the raw (header length 0) form.
 * Input: byte 0 picks the fixture model and flags, bytes 1-2 are the
 * Inference-Header-Content-Length (little-endian; 0xFFFF = header absent),
 * the rest is the body. On success the request is echoed through the
 * encoder with every output binary and decoded again: the tensors must come
 * back bit for bit.
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "serve/serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fixture(int which, mcp_model_version *m, mcp_tensor_meta *in)
{
    memset(m, 0, sizeof *m);
    memset(in, 0, sizeof *in);
    m->name = (char *)"fuzz";
    m->version = (char *)"1";
    m->inputs = in;
    m->n_inputs = 1;
    static const mcp_dtype types[] = {MCP_DTYPE_FLOAT, MCP_DTYPE_STRING, MCP_DTYPE_BOOL, MCP_DTYPE_FLOAT16,
                                      MCP_DTYPE_INT64, MCP_DTYPE_UINT8};
    *in = (mcp_tensor_meta){.name = "x", .dtype = types[which % 6], .rank = 2, .dims = {-1, 2}};
    if (which >= 6) in->dims[1] = -1; /* raw form must refuse this */
}

/* Re-reads a binary v2 response as a request ("outputs" -> "inputs"). */
static void round_trip(const mcp_request *r, const mcp_buf *resp, size_t json_len)
{
    MCP_ASSERT(json_len > 0 && json_len <= resp->len);
    json_error_t je;
    json_t *j = json_loadb((const char *)resp->data, json_len, 0, &je);
    MCP_ASSERT(j != NULL);
    json_object_set(j, "inputs", json_object_get(j, "outputs"));
    json_object_del(j, "outputs");
    char *hdr = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    MCP_ASSERT(hdr);
    size_t hl = strlen(hdr), bl = resp->len - json_len;
    uint8_t *body = mcp_malloc(hl + bl + 1);
    MCP_ASSERT(body);
    memcpy(body, hdr, hl);
    if (bl) memcpy(body + hl, resp->data + json_len, bl);
    free(hdr);

    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_request back;
    memset(&back, 0, sizeof back);
    back.pool = mcp_pool_create(4096);
    MCP_ASSERT(back.pool);
    mcp_status s = mcp_codec_v2_decode(&back, body, hl + bl, (int64_t)hl, NULL, &err);
    MCP_ASSERT(s == MCP_STATUS_OK);
    MCP_ASSERT(back.n_inputs == r->n_inputs);
    for (int k = 0; k < r->n_inputs; k++) {
        MCP_ASSERT(strcmp(back.inputs[k].name, r->inputs[k].name) == 0);
        MCP_ASSERT(fuzz_tensor_same(&back.inputs[k].t, &r->inputs[k].t));
    }
    mcp_pool_destroy(back.pool);
    mcp_free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    int which = data[0] % 12;
    unsigned hl = (unsigned)data[1] | (unsigned)data[2] << 8;
    int64_t header_len = hl == 0xFFFF ? -1 : (int64_t)hl;
    const uint8_t *body = data + 3;
    size_t len = size - 3;

    mcp_model_version m;
    mcp_tensor_meta in;
    fixture(which, &m, &in);
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    msg[0] = '\0';
    mcp_request r;
    memset(&r, 0, sizeof r);
    r.pool = mcp_pool_create(4096);
    MCP_ASSERT(r.pool);

    mcp_status s = mcp_codec_v2_decode(&r, body, len, header_len, (data[0] & 0x80) ? NULL : &m, &err);
    if (s == MCP_STATUS_OK) {
        MCP_ASSERT(r.n_inputs > 0);
        if (header_len == 0) MCP_ASSERT(r.raw_binary && r.n_inputs == 1);
        r.outputs = r.inputs;
        r.n_outputs = r.n_inputs;
        r.n_requested = 0;
        r.binary_default = true;
        mcp_buf b = {0};
        size_t json_len = 0;
        mcp_codec_v2_encode(&r, &b, &json_len);
        MCP_ASSERT(!b.failed);
        round_trip(&r, &b, json_len);
        mcp_buf_free(&b);
    } else {
        MCP_ASSERT(msg[0] != '\0');
    }
    mcp_pool_destroy(r.pool);
    return 0;
}
