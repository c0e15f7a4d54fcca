/*
 * The Open Inference Protocol v2 over gRPC: ModelInferRequest into a
 * request, a request's outputs into ModelInferResponse (protobuf-c, from
 * proto/grpc_service.proto).
 *
 * Inputs come as typed `contents` or as `raw_input_contents` (one entry per
 * input, in order, as Triton's clients send them: all inputs raw or none);
 * outputs always go back in `raw_output_contents`, which is what Triton's
 * own client reads. The message is parsed once and copied into the
 * request's pool, so nothing points into the wire buffer afterwards.
 */
#include <string.h>

#include "grpc_service.pb-c.h"
#include "registry/descriptor_util.h"
#include "serve/codec_util.h"

static const char *param_name_ok(const char *k) { return k ? k : ""; }

/* Request parameters: priority and timeout (µs), as in the HTTP protocol. */
static mcp_status decode_parameters(mcp_request *r, const Inference__ModelInferRequest *m, mcp_err *err)
{
    for (size_t i = 0; i < m->n_parameters; i++) {
        const Inference__ModelInferRequest__ParametersEntry *e = m->parameters[i];
        const char *key = param_name_ok(e->key);
        if (mcp__desc_policy_key(key))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "parameters.%.100s is a policy field: " MCP__DESC_POLICY_RULE, key);
        const Inference__InferParameter *p = e->value;
        bool is_int = p && p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
        bool is_uint = p && p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
        int64_t v = is_int ? p->int64_param : is_uint && p->uint64_param <= INT64_MAX ? (int64_t)p->uint64_param : -1;
        if (!strcmp(key, "priority") || !strcmp(key, "timeout")) {
            if ((!is_int && !is_uint) || v < 0)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "parameters.%s must be a non-negative int64_param", key);
            if (!strcmp(key, "priority")) r->priority = v;
            else r->timeout_us = v;
        }
        /* Other parameters (binary_data_output, sequence ids, ...) do not
         * change a gRPC answer here; Triton's clients send some always. */
    }
    return MCP_STATUS_OK;
}

/* Typed contents of one input into pooled data of numel elements. */
static mcp_status decode_contents(mcp_request *r, mcp_dtype dt, int64_t numel, const Inference__InferTensorContents *c,
                                  const char *ctx, void **out, mcp_err *err)
{
    size_t n = 0;
    const char *field = NULL;
    switch (dt) {
    case MCP_DTYPE_BOOL: n = c ? c->n_bool_contents : 0, field = "bool_contents"; break;
    case MCP_DTYPE_INT8:
    case MCP_DTYPE_INT16:
    case MCP_DTYPE_INT32: n = c ? c->n_int_contents : 0, field = "int_contents"; break;
    case MCP_DTYPE_INT64: n = c ? c->n_int64_contents : 0, field = "int64_contents"; break;
    case MCP_DTYPE_UINT8:
    case MCP_DTYPE_UINT16:
    case MCP_DTYPE_UINT32: n = c ? c->n_uint_contents : 0, field = "uint_contents"; break;
    case MCP_DTYPE_UINT64: n = c ? c->n_uint64_contents : 0, field = "uint64_contents"; break;
    case MCP_DTYPE_FLOAT: n = c ? c->n_fp32_contents : 0, field = "fp32_contents"; break;
    case MCP_DTYPE_DOUBLE: n = c ? c->n_fp64_contents : 0, field = "fp64_contents"; break;
    case MCP_DTYPE_STRING: n = c ? c->n_bytes_contents : 0, field = "bytes_contents"; break;
    case MCP_DTYPE_FLOAT16:
    case MCP_DTYPE_BFLOAT16:
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: %s travels only in raw_input_contents", ctx,
                           mcp_oip_datatype(dt));
    default: return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: unsupported datatype", ctx);
    }
    if ((int64_t)n != numel)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: the shape needs %lld elements, contents.%s has %zu", ctx,
                           (long long)numel, field, n);
    mcp_status s = mcp__codec_alloc_data(r->pool, dt, numel, ctx, out, err);
    if (s) return s;
    void *d = *out;
    for (int64_t i = 0; i < numel; i++) {
        switch (dt) {
        case MCP_DTYPE_BOOL: ((uint8_t *)d)[i] = c->bool_contents[i] != 0; break;
        case MCP_DTYPE_INT8:
        case MCP_DTYPE_INT16:
        case MCP_DTYPE_INT32: {
            int32_t v = c->int_contents[i];
            int64_t lo = dt == MCP_DTYPE_INT8 ? INT8_MIN : dt == MCP_DTYPE_INT16 ? INT16_MIN : INT32_MIN;
            int64_t hi = dt == MCP_DTYPE_INT8 ? INT8_MAX : dt == MCP_DTYPE_INT16 ? INT16_MAX : INT32_MAX;
            if (v < lo || v > hi)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: element %lld (%d) is out of range for %s", ctx,
                                   (long long)i, (int)v, mcp_oip_datatype(dt));
            mcp_elem_set_i64(dt, d, i, v);
            break;
        }
        case MCP_DTYPE_UINT8:
        case MCP_DTYPE_UINT16:
        case MCP_DTYPE_UINT32: {
            uint32_t v = c->uint_contents[i];
            uint32_t hi = dt == MCP_DTYPE_UINT8 ? UINT8_MAX : dt == MCP_DTYPE_UINT16 ? UINT16_MAX : UINT32_MAX;
            if (v > hi)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: element %lld (%u) is out of range for %s", ctx,
                                   (long long)i, (unsigned)v, mcp_oip_datatype(dt));
            mcp_elem_set_i64(dt, d, i, v);
            break;
        }
        case MCP_DTYPE_INT64: ((int64_t *)d)[i] = c->int64_contents[i]; break;
        case MCP_DTYPE_UINT64: ((uint64_t *)d)[i] = c->uint64_contents[i]; break;
        case MCP_DTYPE_FLOAT: ((float *)d)[i] = c->fp32_contents[i]; break;
        case MCP_DTYPE_DOUBLE: ((double *)d)[i] = c->fp64_contents[i]; break;
        case MCP_DTYPE_STRING: {
            const ProtobufCBinaryData *b = &c->bytes_contents[i];
            if (b->len && memchr(b->data, 0, b->len))
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: element %lld holds a NUL byte", ctx, (long long)i);
            char *e = mcp_pool_strndup(r->pool, b->len ? (const char *)b->data : "", b->len);
            if (!e) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            ((char **)d)[i] = e;
            break;
        }
        default: break;
        }
    }
    return MCP_STATUS_OK;
}

static mcp_status decode_inputs(mcp_request *r, const Inference__ModelInferRequest *m, mcp_err *err)
{
    if (m->n_inputs == 0) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the request has no inputs");
    if (m->n_inputs > MCP__CODEC_MAX_TENSORS)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the request has %zu inputs, at most %d are supported",
                           m->n_inputs, MCP__CODEC_MAX_TENSORS);
    bool raw = m->n_raw_input_contents > 0;
    if (raw && m->n_raw_input_contents != m->n_inputs)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "raw_input_contents has %zu entries for %zu inputs; send every input raw or none",
                           m->n_raw_input_contents, m->n_inputs);
    r->inputs = mcp_pool_calloc(r->pool, m->n_inputs * sizeof *r->inputs);
    if (!r->inputs) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < m->n_inputs; i++) {
        const Inference__ModelInferRequest__InferInputTensor *in = m->inputs[i];
        char ctx[MCP__CODEC_CTX_CAP];
        const char *name = in->name ? in->name : "";
        if (!name[0]) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "inputs[%zu]: 'name' must be a non-empty string", i);
        mcp__codec_ctx(ctx, sizeof ctx, "input", name);
        mcp_req_tensor *rt = &r->inputs[i];
        rt->name = mcp_pool_strndup(r->pool, name, strlen(name));
        if (!rt->name) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        mcp_dtype dt = mcp_oip_dtype(in->datatype ? in->datatype : "");
        if (dt == MCP_DTYPE_UNDEFINED)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: unknown datatype '%.40s'", ctx,
                               in->datatype ? in->datatype : "");
        if (in->n_shape > MCP_MAX_RANK)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: shape has %zu dimensions, at most %d are supported", ctx,
                               in->n_shape, MCP_MAX_RANK);
        mcp_tensor *t = &rt->t;
        t->dtype = dt;
        t->rank = (int)in->n_shape;
        for (size_t d = 0; d < in->n_shape; d++) {
            if (in->shape[d] < 0)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: shape[%zu] is %lld", ctx, d, (long long)in->shape[d]);
            t->dims[d] = in->shape[d];
        }
        int64_t numel;
        if (!mcp__codec_numel(t->rank, t->dims, &numel))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: the shape has too many elements", ctx);
        mcp_status s;
        if (raw) {
            if (in->contents)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: both contents and raw_input_contents", ctx);
            const ProtobufCBinaryData *b = &m->raw_input_contents[i];
            s = mcp__codec_from_binary(r->pool, dt, numel, b->data, b->len, name, &t->data, err);
        } else {
            s = decode_contents(r, dt, numel, in->contents, ctx, &t->data, err);
        }
        if (s) return s;
        r->n_inputs++;
    }
    return MCP_STATUS_OK;
}

mcp_status mcp_codec_grpc_peek(const uint8_t *body, size_t len, char *name, size_t cap, char *version, size_t vcap,
                               void **out, mcp_err *err)
{
    *out = NULL;
    Inference__ModelInferRequest *msg = inference__model_infer_request__unpack(NULL, len, body);
    if (!msg) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the message is not a ModelInferRequest (%zu bytes)", len);
    const char *n = msg->model_name ? msg->model_name : "", *v = msg->model_version ? msg->model_version : "";
    mcp_status s = MCP_STATUS_OK;
    if (!n[0]) s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model_name is required");
    else if (strlen(n) >= cap || strlen(v) >= vcap)
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model_name or model_version is too long");
    if (s) {
        inference__model_infer_request__free_unpacked(msg, NULL);
        return s;
    }
    snprintf(name, cap, "%s", n);
    snprintf(version, vcap, "%s", v);
    *out = msg;
    return MCP_STATUS_OK;
}

void mcp_codec_grpc_release(void *msg) { inference__model_infer_request__free_unpacked(msg, NULL); }

mcp_status mcp_codec_grpc_decode(mcp_request *r, const uint8_t *body, size_t len, const mcp_model_version *m,
                                 mcp_err *err)
{
    (void)m;
    Inference__ModelInferRequest *msg = inference__model_infer_request__unpack(NULL, len, body);
    if (!msg) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the message is not a ModelInferRequest (%zu bytes)", len);
    mcp_status s = mcp_codec_grpc_decode_msg(r, msg, err);
    inference__model_infer_request__free_unpacked(msg, NULL);
    return s;
}

mcp_status mcp_codec_grpc_decode_msg(mcp_request *r, const void *m, mcp_err *err)
{
    const Inference__ModelInferRequest *msg = m;
    mcp_status s = MCP_STATUS_OK;
    if (msg->id && msg->id[0] && !(r->id = mcp_pool_strndup(r->pool, msg->id, strlen(msg->id))))
        s = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (!s) s = decode_parameters(r, msg, err);
    if (!s) s = decode_inputs(r, msg, err);
    if (!s && msg->n_outputs) {
        if (msg->n_outputs > MCP__CODEC_MAX_TENSORS) {
            s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'outputs' names %zu tensors, at most %d are supported",
                            msg->n_outputs, MCP__CODEC_MAX_TENSORS);
        } else {
            r->requested = mcp_pool_calloc(r->pool, msg->n_outputs * sizeof *r->requested);
            r->requested_binary = mcp_pool_calloc(r->pool, msg->n_outputs * sizeof *r->requested_binary);
            if (!r->requested || !r->requested_binary) s = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            for (size_t i = 0; !s && i < msg->n_outputs; i++) {
                const char *name = msg->outputs[i]->name ? msg->outputs[i]->name : "";
                if (!name[0]) s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "outputs[%zu]: 'name' must be a non-empty string", i);
                else if (!(r->requested[i] = mcp_pool_strndup(r->pool, name, strlen(name))))
                    s = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
                r->requested_binary[i] = true;
                r->n_requested++;
            }
        }
    }
    return s;
}

/* protobuf-c writes packed messages through this straight into an mcp_buf. */
typedef struct buf_sink {
    ProtobufCBuffer base;
    mcp_buf *b;
} buf_sink;

static void sink_append(ProtobufCBuffer *pb, size_t len, const uint8_t *data) { mcp_buf_append(((buf_sink *)pb)->b, data, len); }

void mcp_codec_grpc_pack(const void *msg, mcp_buf *out)
{
    buf_sink sink = {{sink_append}, out};
    protobuf_c_message_pack_to_buffer(msg, &sink.base);
}

void mcp_codec_grpc_encode(const mcp_request *r, mcp_buf *out, size_t *json_len)
{
    *json_len = 0;
    Inference__ModelInferResponse resp = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    const char *model = r->model && r->model->name ? r->model->name : r->model_name;
    const char *version = r->model && r->model->version ? r->model->version : r->model_version;
    resp.model_name = (char *)(model ? model : "");
    resp.model_version = (char *)(version ? version : "");
    resp.id = (char *)(r->id ? r->id : "");
    int n = 0;
    for (int k = 0; k < r->n_outputs; k++) n += mcp__codec_output_wanted(r, &r->outputs[k]);
    Inference__ModelInferResponse__InferOutputTensor *tensors = mcp_calloc((size_t)n + 1, sizeof *tensors);
    Inference__ModelInferResponse__InferOutputTensor **ptrs = mcp_calloc((size_t)n + 1, sizeof *ptrs);
    ProtobufCBinaryData *raw = mcp_calloc((size_t)n + 1, sizeof *raw);
    int64_t *shapes = mcp_calloc((size_t)n * MCP_MAX_RANK + 1, sizeof *shapes);
    mcp_buf bytes = {0}; /* every output's binary form, one after another */
    size_t *offs = mcp_calloc((size_t)n + 1, sizeof *offs);
    if (!tensors || !ptrs || !raw || !shapes || !offs) {
        out->failed = true;
        goto done;
    }
    int j = 0;
    for (int k = 0; k < r->n_outputs; k++) {
        const mcp_req_tensor *o = &r->outputs[k];
        if (!mcp__codec_output_wanted(r, o)) continue;
        Inference__ModelInferResponse__InferOutputTensor init = INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
        tensors[j] = init;
        const char *dt = mcp_oip_datatype(o->t.dtype);
        tensors[j].name = (char *)(o->name ? o->name : "");
        tensors[j].datatype = (char *)(dt ? dt : mcp_dtype_name(o->t.dtype));
        tensors[j].n_shape = (size_t)o->t.rank;
        tensors[j].shape = &shapes[j * MCP_MAX_RANK];
        memcpy(tensors[j].shape, o->t.dims, sizeof(int64_t) * (size_t)o->t.rank);
        ptrs[j] = &tensors[j];
        /* Fixed-size elements go out straight from the tensor (the host is
         * little-endian, as the wire is); strings take the 4-byte-length
         * form in a side buffer. */
        if (o->t.dtype == MCP_DTYPE_STRING) {
            offs[j] = bytes.len;
            mcp__codec_put_binary(&bytes, &o->t);
            raw[j].len = bytes.len - offs[j];
        } else {
            raw[j].data = o->t.data;
            raw[j].len = mcp_tensor_nbytes(&o->t);
        }
        j++;
    }
    if (bytes.failed) {
        out->failed = true;
        goto done;
    }
    j = 0;
    for (int k = 0; k < r->n_outputs; k++) {
        const mcp_req_tensor *o = &r->outputs[k];
        if (!mcp__codec_output_wanted(r, o)) continue;
        if (o->t.dtype == MCP_DTYPE_STRING) raw[j].data = bytes.data ? bytes.data + offs[j] : NULL;
        j++;
    }
    resp.n_outputs = (size_t)n;
    resp.outputs = ptrs;
    resp.n_raw_output_contents = (size_t)n;
    resp.raw_output_contents = raw;
    mcp_codec_grpc_pack(&resp.base, out);
done:
    mcp_buf_free(&bytes);
    mcp_free(offs);
    mcp_free(shapes);
    mcp_free(raw);
    mcp_free(ptrs);
    mcp_free(tensors);
}

/* gRPC carries errors in the status, not the body. */
void mcp_codec_grpc_error(const char *message, mcp_buf *out)
{
    (void)message;
    (void)out;
}
