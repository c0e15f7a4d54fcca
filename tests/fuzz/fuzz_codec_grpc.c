/*
 * libFuzzer target: the gRPC ModelInferRequest decoder (protobuf-c), both
 * ways in: decode from bytes, and peek (model name and version) then decode
 * from the unpacked message. Byte 0 picks the path; the rest is the
 * message. On success the inputs are sent back through the encoder as
 * outputs and the ModelInferResponse is unpacked again: every raw output
 * must decode to the input it came from, bit for bit.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grpc_service.pb-c.h"
#include "serve/codec_util.h"
#include "fuzz_util.h"
#include "serve/serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(mcp_request *r)
{
    r->outputs = r->inputs;
    r->n_outputs = r->n_inputs;
    mcp_buf b = {0};
    size_t json_len = 1;
    mcp_codec_grpc_encode(r, &b, &json_len);
    MCP_ASSERT(!b.failed && json_len == 0);
    Inference__ModelInferResponse *resp = inference__model_infer_response__unpack(NULL, b.len, b.data);
    MCP_ASSERT(resp != NULL);
    int wanted = 0;
    for (int k = 0; k < r->n_inputs; k++) {
        bool asked = r->n_requested == 0;
        for (int j = 0; j < r->n_requested; j++) asked |= strcmp(r->requested[j], r->inputs[k].name) == 0;
        if (!asked) continue;
        MCP_ASSERT((size_t)wanted < resp->n_raw_output_contents && (size_t)wanted < resp->n_outputs);
        const ProtobufCBinaryData *raw = &resp->raw_output_contents[wanted];
        mcp_pool *pool = mcp_pool_create(4096);
        MCP_ASSERT(pool);
        mcp_tensor back = r->inputs[k].t;
        char msg[256];
        mcp_err err = {msg, sizeof msg};
        mcp_status s = mcp__codec_from_binary(pool, back.dtype, mcp_tensor_numel(&back), raw->data, raw->len, "x",
                                              &back.data, &err);
        MCP_ASSERT(s == MCP_STATUS_OK);
        MCP_ASSERT(fuzz_tensor_same(&back, &r->inputs[k].t));
        MCP_ASSERT(strcmp(resp->outputs[wanted]->name, r->inputs[k].name) == 0);
        mcp_pool_destroy(pool);
        wanted++;
    }
    MCP_ASSERT((size_t)wanted == resp->n_outputs);
    inference__model_infer_response__free_unpacked(resp, NULL);
    mcp_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    bool peek = data[0] & 1;
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_request r;
    memset(&r, 0, sizeof r);
    r.pool = mcp_pool_create(4096);
    MCP_ASSERT(r.pool);
    mcp_status s;
    if (peek) {
        char name[256], version[128];
        void *m = NULL;
        s = mcp_codec_grpc_peek(body, len, name, sizeof name, version, sizeof version, &m, &err);
        if (s == MCP_STATUS_OK) {
            MCP_ASSERT(m && name[0]);
            s = mcp_codec_grpc_decode_msg(&r, m, &err);
            mcp_codec_grpc_release(m);
        } else {
            MCP_ASSERT(!m);
        }
    } else {
        s = mcp_codec_grpc_decode(&r, body, len, NULL, &err);
    }
    if (s == MCP_STATUS_OK) {
        MCP_ASSERT(r.n_inputs > 0);
        round_trip(&r);
    } else {
        MCP_ASSERT(msg[0] != '\0');
    }
    mcp_pool_destroy(r.pool);
    return 0;
}
