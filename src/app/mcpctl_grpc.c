/*
 * mcpctl's gRPC client for `bench`: unary ModelInfer calls of many slots
 * in flight on one channel (one HTTP/2 connection) through one completion
 * queue, and a ModelStreamInfer stream per worker driven synchronously on
 * a pluck queue; requests carry raw_input_contents as Triton's clients
 * send them.
 */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <string.h>

#include "app/mcpctl_http.h"
#include "grpc_service.pb-c.h"
#include "serve/codec_util.h"
#include "serve/serve.h"

/* A channel with a connection of its own (no subchannel sharing between
 * channels to the same target), as each HTTP worker has one. */
static grpc_channel *own_channel(const char *target)
{
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_arg arg = {GRPC_ARG_INTEGER, "grpc.use_local_subchannel_pool", {.integer = 1}};
    grpc_channel_args args = {1, &arg};
    grpc_channel *ch = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);
    return ch;
}

mcp_status mcpctl_grpc_init(mcpctl_grpc *g, const char *target, mcp_err *err)
{
    memset(g, 0, sizeof *g);
    g->channel = own_channel(target);
    g->cq = grpc_completion_queue_create_for_pluck(NULL);
    if (!g->channel || !g->cq) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot create a gRPC channel to %s", target);
    snprintf(g->target, sizeof g->target, "%s", target);
    return MCP_STATUS_OK;
}

void mcpctl_grpc_cleanup(mcpctl_grpc *g)
{
    mcpctl_grpc_stream_close(g);
    if (g->channel) grpc_channel_destroy(g->channel);
    if (g->cq) {
        grpc_completion_queue_shutdown(g->cq);
        while (grpc_completion_queue_pluck(g->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(g->cq);
    }
    mcp_buf_free(&g->resp);
    memset(g, 0, sizeof *g);
}

mcp_status mcpctl_grpc_encode(const char *model, const mcpctl_named *inputs, int n, mcp_buf *out, mcp_err *err)
{
    Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor *t = mcp_calloc((size_t)n + 1, sizeof *t);
    Inference__ModelInferRequest__InferInputTensor **p = mcp_calloc((size_t)n + 1, sizeof *p);
    ProtobufCBinaryData *raw = mcp_calloc((size_t)n + 1, sizeof *raw);
    mcp_buf bytes = {0};
    size_t *offs = mcp_calloc((size_t)n + 1, sizeof *offs);
    mcp_status st = t && p && raw && offs ? MCP_STATUS_OK : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; st == MCP_STATUS_OK && i < n; i++) {
        Inference__ModelInferRequest__InferInputTensor init = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
        t[i] = init;
        const char *dt = mcp_oip_datatype(inputs[i].t.dtype);
        t[i].name = inputs[i].name;
        t[i].datatype = (char *)(dt ? dt : "");
        t[i].n_shape = (size_t)inputs[i].t.rank;
        t[i].shape = (int64_t *)inputs[i].t.dims;
        p[i] = &t[i];
        offs[i] = bytes.len;
        mcp__codec_put_binary(&bytes, &inputs[i].t);
    }
    if (st == MCP_STATUS_OK && bytes.failed) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; st == MCP_STATUS_OK && i < n; i++) {
        raw[i].data = bytes.data + offs[i];
        raw[i].len = (i + 1 < n ? offs[i + 1] : bytes.len) - offs[i];
    }
    if (st == MCP_STATUS_OK) {
        req.model_name = (char *)model;
        req.n_inputs = (size_t)n;
        req.inputs = p;
        req.n_raw_input_contents = (size_t)n;
        req.raw_input_contents = raw;
        mcp_codec_grpc_pack(&req, out);
        if (out->failed) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    mcp_buf_free(&bytes);
    mcp_free(offs);
    mcp_free(raw);
    mcp_free(p);
    mcp_free(t);
    return st;
}

/* ---- a bidirectional stream (ModelStreamInfer), one request at a time ---- */

mcp_status mcpctl_grpc_stream_open(mcpctl_grpc *g, const char *method, long timeout_ms, mcp_err *err)
{
    grpc_slice m = grpc_slice_from_static_string(method);
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    grpc_call *call = grpc_channel_create_call(g->channel, NULL, GRPC_PROPAGATE_DEFAULTS, g->cq, m, NULL, deadline, NULL);
    if (!call) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot create a gRPC call");
    grpc_metadata_array *md = mcp_calloc(1, sizeof *md);
    if (!md) {
        grpc_call_unref(call);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    grpc_metadata_array_init(md);
    g->stream_md = md;
    /* The server's initial metadata comes with its first answer: it is
     * received with the first round trip. */
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    grpc_event ev = {0};
    if (grpc_call_start_batch(call, &op, 1, g, NULL) == GRPC_CALL_OK)
        ev = grpc_completion_queue_pluck(g->cq, g, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    g->stream = call;
    g->stream_md_pending = true;
    if (ev.type != GRPC_OP_COMPLETE || !ev.success)
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot open a gRPC stream to %s", g->target);
    return MCP_STATUS_OK;
}

mcp_status mcpctl_grpc_stream_roundtrip(mcpctl_grpc *g, const mcp_buf *req, mcp_err *err)
{
    grpc_slice body = grpc_slice_from_copied_buffer(req->len ? (const char *)req->data : "", req->len);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&body, 1);
    grpc_slice_unref(body);
    grpc_byte_buffer *recv = NULL;
    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = send;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &recv;
    if (g->stream_md_pending) {
        ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[n++].data.recv_initial_metadata.recv_initial_metadata = g->stream_md;
        g->stream_md_pending = false;
    }
    mcp_status st = MCP_STATUS_OK;
    grpc_event ev = {0};
    if (grpc_call_start_batch(g->stream, ops, n, g, NULL) == GRPC_CALL_OK)
        ev = grpc_completion_queue_pluck(g->cq, g, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type != GRPC_OP_COMPLETE || !ev.success || !recv) {
        st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "the gRPC stream to %s ended", g->target);
    } else {
        grpc_byte_buffer_reader reader;
        mcp_buf_reset(&g->resp);
        if (grpc_byte_buffer_reader_init(&reader, recv)) {
            grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
            mcp_buf_append(&g->resp, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
            grpc_slice_unref(all);
            grpc_byte_buffer_reader_destroy(&reader);
        }
        /* ModelStreamInferResponse: field 1 (0x0a) is an error message,
         * after its varint length. */
        if (g->resp.len && g->resp.data[0] == 0x0a) {
            size_t at = 1;
            while (at < g->resp.len && (g->resp.data[at] & 0x80)) at++;
            at = at < g->resp.len ? at + 1 : g->resp.len;
            size_t left = g->resp.len - at;
            st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "stream error: %.*s", (int)(left > 200 ? 200 : left),
                             (const char *)g->resp.data + at);
        }
    }
    if (recv) grpc_byte_buffer_destroy(recv);
    grpc_byte_buffer_destroy(send);
    return st;
}

void mcpctl_grpc_stream_close(mcpctl_grpc *g)
{
    if (!g->stream) return;
    grpc_metadata_array trail;
    grpc_metadata_array_init(&trail);
    grpc_status_code status;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[1].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[1].data.recv_status_on_client.trailing_metadata = &trail;
    ops[1].data.recv_status_on_client.status = &status;
    ops[1].data.recv_status_on_client.status_details = &details;
    if (grpc_call_start_batch(g->stream, ops, 2, g, NULL) == GRPC_CALL_OK) {
        grpc_event ev = grpc_completion_queue_pluck(
            g->cq, g, gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(10000, GPR_TIMESPAN)), NULL);
        /* The batch writes into this frame: it must complete before it ends. */
        if (ev.type == GRPC_QUEUE_TIMEOUT) {
            grpc_call_cancel(g->stream, NULL);
            grpc_completion_queue_pluck(g->cq, g, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        }
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&trail);
    if (g->stream_md) grpc_metadata_array_destroy(g->stream_md);
    mcp_free(g->stream_md);
    g->stream_md = NULL;
    grpc_call_unref(g->stream);
    g->stream = NULL;
}

/* ---- many unary calls in flight on one channel, one thread ---- */

typedef struct async_slot {
    grpc_call *call;
    grpc_slice body;       /* the slot's request, sent by reference */
    const mcp_buf *source; /* what body was made from */
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status;
    grpc_slice details;
} async_slot;

struct mcpctl_grpc_async {
    grpc_channel *channel;
    grpc_completion_queue *cq;
    char target[512];
    int n_slots;
    async_slot slots[];
};

mcp_status mcpctl_grpc_async_create(const char *target, int n_slots, mcpctl_grpc_async **out, mcp_err *err)
{
    *out = NULL;
    mcpctl_grpc_async *a = mcp_calloc(1, sizeof *a + (size_t)n_slots * sizeof(async_slot));
    if (!a) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    a->n_slots = n_slots;
    for (int i = 0; i < n_slots; i++) {
        a->slots[i].body = grpc_empty_slice();
        a->slots[i].details = grpc_empty_slice();
    }
    *out = a;
    a->channel = own_channel(target);
    a->cq = grpc_completion_queue_create_for_next(NULL);
    snprintf(a->target, sizeof a->target, "%s", target);
    if (!a->channel || !a->cq) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot create a gRPC channel to %s", target);
    return MCP_STATUS_OK;
}

mcp_status mcpctl_grpc_async_start(mcpctl_grpc_async *a, int slot, const char *method, const mcp_buf *req, long timeout_ms,
                                   mcp_err *err)
{
    async_slot *s = &a->slots[slot];
    if (s->source != req) {
        grpc_slice_unref(s->body);
        s->body = grpc_slice_from_copied_buffer(req->len ? (const char *)req->data : "", req->len);
        s->source = req;
    }
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    s->call = grpc_channel_create_call(a->channel, NULL, GRPC_PROPAGATE_DEFAULTS, a->cq, grpc_slice_from_static_string(method),
                                       NULL, deadline, NULL);
    if (!s->call) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot create a gRPC call");
    s->send = grpc_raw_byte_buffer_create(&s->body, 1);
    s->recv = NULL;
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trail_md);
    s->status = GRPC_STATUS_UNKNOWN;
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &s->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &s->trail_md;
    ops[5].data.recv_status_on_client.status = &s->status;
    ops[5].data.recv_status_on_client.status_details = &s->details;
    if (grpc_call_start_batch(s->call, ops, 6, s, NULL) != GRPC_CALL_OK) {
        grpc_byte_buffer_destroy(s->send);
        grpc_metadata_array_destroy(&s->init_md);
        grpc_metadata_array_destroy(&s->trail_md);
        grpc_call_unref(s->call);
        s->call = NULL;
        return mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot start a gRPC call");
    }
    return MCP_STATUS_OK;
}

int mcpctl_grpc_async_next(mcpctl_grpc_async *a, long timeout_ms, mcp_status *st, mcp_err *err)
{
    gpr_timespec until = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(a->cq, until, NULL);
    if (ev.type != GRPC_OP_COMPLETE) return -1;
    async_slot *s = ev.tag;
    *st = MCP_STATUS_OK;
    if (!ev.success) *st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "gRPC call to %s failed", a->target);
    else if (s->status != GRPC_STATUS_OK)
        *st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "gRPC status %d: %.*s", (int)s->status, (int)GRPC_SLICE_LENGTH(s->details),
                          (const char *)GRPC_SLICE_START_PTR(s->details));
    if (s->recv) grpc_byte_buffer_destroy(s->recv);
    grpc_byte_buffer_destroy(s->send);
    grpc_slice_unref(s->details);
    s->details = grpc_empty_slice();
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trail_md);
    grpc_call_unref(s->call);
    s->call = NULL;
    return (int)(s - a->slots);
}

void mcpctl_grpc_async_destroy(mcpctl_grpc_async *a)
{
    if (!a) return;
    /* Calls still in flight are cancelled and their completions taken. */
    int pending = 0;
    for (int i = 0; i < a->n_slots; i++)
        if (a->slots[i].call) {
            grpc_call_cancel(a->slots[i].call, NULL);
            pending++;
        }
    char msg[64];
    mcp_err err = {msg, sizeof msg};
    mcp_status st;
    while (pending > 0 && mcpctl_grpc_async_next(a, 10000, &st, &err) >= 0) pending--;
    if (a->channel) grpc_channel_destroy(a->channel);
    if (a->cq) {
        grpc_completion_queue_shutdown(a->cq);
        while (grpc_completion_queue_next(a->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type != GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(a->cq);
    }
    for (int i = 0; i < a->n_slots; i++) grpc_slice_unref(a->slots[i].body);
    mcp_free(a);
}
