/*
 * Open Inference Protocol v2 (KServe v2 / Triton) request and response
 * bodies, JSON and the binary tensor data extension, including the
 * Inference-Header-Content-Length: 0 raw form. The HTTP side (headers,
 * routing) is the transport's; it hands us the body and the header value.
 */
#include <math.h>
#include <string.h>

#include "registry/descriptor_util.h"
#include "serve/codec_util.h"

/* Checks that every value of a `parameters` object is a string, number or
 * boolean, as the protocol defines them. */
static mcp_status check_params(const json_t *params, const char *where, mcp_err *err)
{
    if (!json_is_object(params))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s'parameters' must be an object", where);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)params, key, v)
    {
        if (mcp__desc_policy_key(key))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%sparameters.%.100s is a policy field: " MCP__DESC_POLICY_RULE,
                               where, key);
        if (!json_is_string(v) && !json_is_number(v) && !json_is_boolean(v))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "%sparameters.%s must be a string, number or boolean", where, key);
    }
    return MCP_STATUS_OK;
}

static mcp_status decode_request_params(mcp_request *r, const json_t *params, mcp_err *err)
{
    mcp_status s = check_params(params, "", err);
    if (s) return s;
    const json_t *v;
    if ((v = json_object_get(params, "priority"))) {
        s = mcp__codec_get_int(v, "parameters.priority", true, &r->priority, err);
        if (s) return s;
    }
    if ((v = json_object_get(params, "timeout"))) {
        s = mcp__codec_get_int(v, "parameters.timeout (microseconds)", true, &r->timeout_us, err);
        if (s) return s;
    }
    if ((v = json_object_get(params, "binary_data_output"))) {
        if (!json_is_boolean(v))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "parameters.binary_data_output must be a boolean");
        r->binary_default = json_is_true(v);
    }
    /* Stateful (sequence) models are not served; a client relying on
     * sequence semantics must hear so rather than get stateless answers. */
    if ((v = json_object_get(params, "sequence_id")) &&
        !((json_is_integer(v) && json_integer_value(v) == 0) || (json_is_string(v) && !json_string_length(v))))
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                           "parameters.sequence_id: sequence batching (stateful models) is not supported");
    if (((v = json_object_get(params, "sequence_start")) && json_is_true(v)) ||
        ((v = json_object_get(params, "sequence_end")) && json_is_true(v)))
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                           "parameters.sequence_start/sequence_end: sequence batching (stateful models) is not "
                           "supported");
    return MCP_STATUS_OK;
}

typedef struct binary_cursor {
    const uint8_t *p; /* binary section (after the JSON header) */
    size_t len;       /* its length */
    size_t off;       /* bytes consumed by earlier inputs */
    bool header;      /* an Inference-Header-Content-Length was given */
} binary_cursor;

static mcp_status decode_input(mcp_request *r, const json_t *in, int idx, binary_cursor *bin, mcp_err *err)
{
    mcp_req_tensor *rt = &r->inputs[idx];
    if (!json_is_object(in))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "inputs[%d] must be an object", idx);
    const json_t *name = json_object_get(in, "name");
    if (!name) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "inputs[%d]: missing field 'name'", idx);
    if (!json_is_string(name) || json_string_length(name) == 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "inputs[%d]: 'name' must be a non-empty string", idx);
    rt->name = mcp_pool_strndup(r->pool, json_string_value(name), json_string_length(name));
    if (!rt->name) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    char ctx[MCP__CODEC_CTX_CAP];
    mcp__codec_ctx(ctx, sizeof ctx, "input", rt->name);
    for (int k = 0; k < idx; k++)
        if (strcmp(r->inputs[k].name, rt->name) == 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s appears more than once", ctx);

    const json_t *dt = json_object_get(in, "datatype");
    if (!dt) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: missing field 'datatype'", ctx);
    if (!json_is_string(dt))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: 'datatype' must be a string", ctx);
    mcp_dtype dtype = mcp_oip_dtype(json_string_value(dt));
    if (dtype == MCP_DTYPE_UNDEFINED)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: datatype '%.40s' unknown", ctx,
                           json_string_value(dt));

    mcp_tensor *t = &rt->t;
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->format = NULL;
    int64_t numel;
    mcp_status s = mcp__codec_get_shape(json_object_get(in, "shape"), ctx, &t->rank, t->dims, &numel, err);
    if (s) return s;

    const json_t *params = json_object_get(in, "parameters");
    const json_t *bsize = NULL;
    if (params) {
        char where[MCP__CODEC_CTX_CAP + 4];
        snprintf(where, sizeof where, "%s: ", ctx);
        if ((s = check_params(params, where, err))) return s;
        if (json_object_get(params, "shared_memory_region"))
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                               "%s: parameters.shared_memory_region: the shared-memory extension is not supported",
                               ctx);
        bsize = json_object_get(params, "binary_data_size");
    }
    const json_t *data = json_object_get(in, "data");
    char sh[256];
    mcp_shape_str(t->rank, t->dims, sh, sizeof sh);

    if (bsize) {
        if (data)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "%s has both 'data' and parameters.binary_data_size; send one", ctx);
        char what[MCP__CODEC_CTX_CAP + 40];
        snprintf(what, sizeof what, "%s: parameters.binary_data_size", ctx);
        int64_t size;
        if ((s = mcp__codec_get_int(bsize, what, true, &size, err))) return s;
        /* The declared size must fit the shape before it is checked against
         * what the body holds, so the message says which one is wrong. */
        size_t es = mcp__codec_wire_size(dtype), expect = 0;
        if (es && !mcp_mul_overflow_size((size_t)numel, es, &expect))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: shape %s has too many bytes of %s", ctx, sh,
                               json_string_value(dt));
        if (es && (uint64_t)size != expect)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "binary data for %s is %lld bytes, expected %zu (shape %s, %s)", ctx, (long long)size,
                               expect, sh, json_string_value(dt));
        size_t left = bin->len - bin->off;
        if ((uint64_t)size > left)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "binary data for %s is declared as %lld bytes, but only %zu bytes follow the JSON "
                               "header%s",
                               ctx, (long long)size, left,
                               bin->header ? "" : " (no Inference-Header-Content-Length was given)");
        s = mcp__codec_from_binary(r->pool, dtype, numel, bin->p + bin->off, (size_t)size, rt->name, &t->data, err);
        if (s) return s;
        bin->off += (size_t)size;
        return MCP_STATUS_OK;
    }
    if (!data)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "%s: missing field 'data' (or parameters.binary_data_size for binary data)", ctx);
    if (dtype == MCP_DTYPE_FLOAT16 || dtype == MCP_DTYPE_BFLOAT16)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "%s: datatype %s travels only as binary data (parameters.binary_data_size); JSON "
                           "cannot carry it faithfully",
                           ctx, json_string_value(dt));
    int64_t count;
    if ((s = mcp__codec_count_leaves(data, t->rank > 0 ? t->rank : 1, false, ctx, &count, err))) return s;
    if (count != numel)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: shape %s needs %lld elements, data has %lld", ctx,
                           sh, (long long)numel, (long long)count);
    if ((s = mcp__codec_check_layout(data, t->rank, t->dims, ctx, err))) return s;
    if ((s = mcp__codec_alloc_data(r->pool, dtype, numel, ctx, &t->data, err))) return s;
    return mcp__codec_fill(r->pool, dtype, t->data, 0, data, 0, ctx, err);
}

static mcp_status decode_outputs(mcp_request *r, const json_t *outs, const mcp_model_version *m, mcp_err *err)
{
    if (!json_is_array(outs))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'outputs' must be an array");
    size_t n = json_array_size(outs);
    if (n == 0) return MCP_STATUS_OK; /* none named: all of them */
    if (n > MCP__CODEC_MAX_TENSORS)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'outputs' names %zu tensors, at most %d are supported", n,
                           MCP__CODEC_MAX_TENSORS);
    r->requested = mcp_pool_calloc(r->pool, n * sizeof *r->requested);
    r->requested_binary = mcp_pool_calloc(r->pool, n * sizeof *r->requested_binary);
    if (!r->requested || !r->requested_binary) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t k = 0; k < n; k++) {
        const json_t *o = json_array_get(outs, k);
        if (!json_is_object(o))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "outputs[%zu] must be an object", k);
        const json_t *name = json_object_get(o, "name");
        if (!json_is_string(name) || json_string_length(name) == 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "outputs[%zu]: %s", k,
                               name ? "'name' must be a non-empty string" : "missing field 'name'");
        const char *nm = mcp_pool_strndup(r->pool, json_string_value(name), json_string_length(name));
        if (!nm) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        char ctx[MCP__CODEC_CTX_CAP];
        mcp__codec_ctx(ctx, sizeof ctx, "requested output", nm);
        for (size_t j = 0; j < k; j++)
            if (strcmp(r->requested[j], nm) == 0)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s appears more than once", ctx);
        if (m && mcp__codec_find_output(m, nm) < 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s is not an output of model '%s'", ctx,
                               mcp__codec_model_name(m));
        bool binary = r->binary_default; /* the per-output setting wins when present */
        const json_t *params = json_object_get(o, "parameters");
        if (params) {
            char where[MCP__CODEC_CTX_CAP + 4];
            snprintf(where, sizeof where, "%s: ", ctx);
            mcp_status s = check_params(params, where, err);
            if (s) return s;
            const json_t *b = json_object_get(params, "binary_data");
            if (b) {
                if (!json_is_boolean(b))
                    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: parameters.binary_data must be a boolean",
                                       ctx);
                binary = json_is_true(b);
            }
            if (json_object_get(params, "classification"))
                return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                                   "%s: parameters.classification is not supported; use a top-k postprocess step in "
                                   "the model descriptor",
                                   ctx);
            if (json_object_get(params, "shared_memory_region"))
                return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                                   "%s: parameters.shared_memory_region: the shared-memory extension is not supported",
                                   ctx);
        }
        r->requested[k] = nm;
        r->requested_binary[k] = binary;
    }
    r->n_requested = (int)n;
    return MCP_STATUS_OK;
}

/* Inference-Header-Content-Length: 0: the body is the raw bytes of the
 * model's only input, batch 1. */
static mcp_status decode_raw(mcp_request *r, const uint8_t *body, size_t len, const mcp_model_version *m,
                             mcp_err *err)
{
    if (!m)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "a raw binary request (Inference-Header-Content-Length: 0) needs a model to take its input "
                           "from");
    if (m->n_inputs != 1)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "a raw binary request (Inference-Header-Content-Length: 0) needs a model with exactly one "
                           "input; model '%s' has %d",
                           mcp__codec_model_name(m), m->n_inputs);
    const mcp_tensor_meta *meta = &m->inputs[0];
    char ctx[MCP__CODEC_CTX_CAP], sh[256];
    mcp__codec_ctx(ctx, sizeof ctx, "input", meta->name);
    if (meta->rank < 0 || meta->rank > MCP_MAX_RANK)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "raw binary request: %s has no fixed rank; send a JSON header with its shape", ctx);
    if (!mcp_oip_datatype(meta->dtype))
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                           "raw binary request: %s has datatype %s, which OIP cannot carry", ctx,
                           mcp_dtype_name(meta->dtype));
    mcp_req_tensor *rt = mcp_pool_calloc(r->pool, sizeof *rt);
    if (!rt) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    rt->name = mcp_pool_strndup(r->pool, meta->name ? meta->name : "", meta->name ? strlen(meta->name) : 0);
    if (!rt->name) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_tensor *t = &rt->t;
    t->dtype = meta->dtype;
    t->format = NULL;
    t->rank = meta->rank;
    for (int k = 0; k < meta->rank; k++) {
        t->dims[k] = meta->dims[k];
        if (t->dims[k] < 0 && k == 0) t->dims[k] = 1; /* batch 1 */
    }
    for (int k = 0; k < meta->rank; k++)
        if (t->dims[k] < 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "raw binary request: %s has a variable dimension %d in shape %s; send a JSON header "
                               "with its shape",
                               ctx, k, mcp_shape_str(meta->rank, meta->dims, sh, sizeof sh));
    int64_t numel;
    if (!mcp__codec_numel(t->rank, t->dims, &numel))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "raw binary request: %s: shape %s has too many elements",
                           ctx, mcp_shape_str(t->rank, t->dims, sh, sizeof sh));
    mcp_status s = mcp__codec_from_binary(r->pool, t->dtype, numel, body, len, rt->name, &t->data, err);
    if (s) return s;
    r->inputs = rt;
    r->n_inputs = 1;
    r->raw_binary = true;
    return MCP_STATUS_OK;
}

mcp_status mcp_codec_v2_decode(mcp_request *r, const uint8_t *body, size_t len, int64_t header_len,
                               const mcp_model_version *m, mcp_err *err)
{
    if (header_len == 0) return decode_raw(r, body, len, m, err);
    size_t jlen = len;
    if (header_len > 0) {
        if ((uint64_t)header_len > len)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "Inference-Header-Content-Length is %lld but the body has only %zu bytes",
                               (long long)header_len, len);
        jlen = (size_t)header_len;
    }
    json_t *root;
    mcp_status s = mcp__codec_parse_object(body, jlen, &root, err);
    if (s) return s;

    const json_t *v;
    if ((v = json_object_get(root, "id"))) {
        if (!json_is_string(v)) {
            s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'id' must be a string");
            goto done;
        }
        if (!(r->id = mcp_pool_strndup(r->pool, json_string_value(v), json_string_length(v)))) {
            s = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
    }
    if ((v = json_object_get(root, "parameters")) && (s = decode_request_params(r, v, err))) goto done;

    const json_t *inputs = json_object_get(root, "inputs");
    if (!inputs) {
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "missing field 'inputs'");
        goto done;
    }
    size_t n = json_array_size(inputs);
    if (!json_is_array(inputs) || n == 0) {
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'inputs' must be a non-empty array");
        goto done;
    }
    if (n > MCP__CODEC_MAX_TENSORS) {
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'inputs' has %zu tensors, at most %d are supported", n,
                        MCP__CODEC_MAX_TENSORS);
        goto done;
    }
    r->inputs = mcp_pool_calloc(r->pool, n * sizeof *r->inputs);
    if (!r->inputs) {
        s = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    binary_cursor bin = {body + jlen, len - jlen, 0, header_len > 0};
    for (size_t k = 0; k < n; k++) {
        if ((s = decode_input(r, json_array_get(inputs, k), (int)k, &bin, err))) {
            r->n_inputs = 0;
            goto done;
        }
    }
    r->n_inputs = (int)n;
    if (bin.off != bin.len) {
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                        "the body holds %zu bytes of binary data after the JSON header, but the inputs declare %zu",
                        bin.len, bin.off);
        goto done;
    }
    if ((v = json_object_get(root, "outputs")) && (s = decode_outputs(r, v, m, err))) goto done;
    s = MCP_STATUS_OK;
done:
    json_decref(root);
    return s;
}

/* ---- response ---- */

/* Whether output o goes out in binary form: the raw form sends everything
 * binary; FP16/BF16 cannot be JSON; a producer may force it with
 * o->binary; otherwise the request's per-output setting, else its
 * binary_data_output default. */
static bool output_binary(const mcp_request *r, const mcp_req_tensor *o)
{
    if (r->raw_binary || o->binary) return true;
    mcp_dtype d = o->t.dtype;
    if (d == MCP_DTYPE_FLOAT16 || d == MCP_DTYPE_BFLOAT16 || !mcp_oip_datatype(d)) return true;
    for (int k = 0; k < r->n_requested; k++)
        if (r->requested[k] && o->name && strcmp(r->requested[k], o->name) == 0)
            return r->requested_binary ? r->requested_binary[k] : r->binary_default;
    return r->binary_default;
}

void mcp_codec_v2_encode(const mcp_request *r, mcp_buf *out, size_t *json_len)
{
    size_t base = out->len;
    bool any_binary = false;
    const char *model = r->model && r->model->name ? r->model->name : r->model_name;
    const char *version = r->model && r->model->version ? r->model->version : r->model_version;
    mcp_buf_puts(out, "{\"model_name\":");
    mcp__codec_put_string(out, model ? model : "");
    if (version) {
        mcp_buf_puts(out, ",\"model_version\":");
        mcp__codec_put_string(out, version);
    }
    /* The protocol's response always carries an id: the request's, or "". */
    mcp_buf_puts(out, ",\"id\":");
    mcp__codec_put_string(out, r->id ? r->id : "");
    mcp_buf_puts(out, ",\"outputs\":[");
    bool first = true;
    for (int k = 0; k < r->n_outputs; k++) {
        const mcp_req_tensor *o = &r->outputs[k];
        if (!mcp__codec_output_wanted(r, o)) continue;
        const char *dt = mcp_oip_datatype(o->t.dtype);
        if (!first) mcp_buf_append(out, ",", 1);
        first = false;
        mcp_buf_puts(out, "{\"name\":");
        mcp__codec_put_string(out, o->name ? o->name : "");
        mcp_buf_puts(out, ",\"datatype\":");
        mcp__codec_put_string(out, dt ? dt : mcp_dtype_name(o->t.dtype));
        mcp_buf_puts(out, ",\"shape\":");
        mcp__codec_put_shape(out, o->t.rank, o->t.dims);
        if (output_binary(r, o)) {
            any_binary = true;
            mcp_buf_printf(out, ",\"parameters\":{\"binary_data_size\":%zu}}", mcp__codec_binary_size(&o->t));
        } else {
            /* Flat, row-major, as Triton answers. */
            int64_t numel = mcp_tensor_numel(&o->t);
            mcp_buf_puts(out, ",\"data\":[");
            for (int64_t i = 0; i < numel; i++) {
                if (i) mcp_buf_append(out, ",", 1);
                mcp__codec_put_elem(out, o->t.dtype, o->t.data, i);
            }
            mcp_buf_puts(out, "]}");
        }
    }
    mcp_buf_puts(out, "]}");
    *json_len = any_binary ? out->len - base : 0;
    if (!any_binary) return;
    for (int k = 0; k < r->n_outputs; k++) {
        const mcp_req_tensor *o = &r->outputs[k];
        if (mcp__codec_output_wanted(r, o) && output_binary(r, o)) mcp__codec_put_binary(out, &o->t);
    }
}
