/*
 * The quickstart protocol, POST /v1/infer:
 *   {"input": [flat numbers], "shape": [...], "model"?: name}
 *   -> {"output": [flat numbers], "shape": [...], "model": name}
 * The input is the model's single input, numbers converted to its dtype;
 * the answer is the model's first output. Being our own protocol it is
 * strict: unknown fields are errors. "shape" may be left out when the
 * model's input shape leaves at most one dimension to infer.
 */
#include <string.h>

#include "serve/codec_util.h"

/* The model name a parsed body gives ("" when none). */
static mcp_status doc_model(const json_t *root, char *name, size_t cap, mcp_err *err)
{
    mcp_status s = MCP_STATUS_OK;
    const json_t *model = json_object_get(root, "model");
    if (cap) name[0] = '\0';
    if (model) {
        size_t n = json_string_length(model);
        if (!json_is_string(model))
            s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'model' must be a string");
        else if (n >= cap)
            s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'model' is %zu bytes long, at most %zu are accepted", n,
                            cap ? cap - 1 : 0);
        else
            memcpy(name, json_string_value(model), n + 1);
    }
    return s;
}

mcp_status mcp_codec_simple_model(const uint8_t *body, size_t len, char *name, size_t cap, mcp_err *err)
{
    json_t *root;
    mcp_status s = mcp__codec_parse_object(body, len, &root, err);
    if (s) return s;
    s = doc_model(root, name, cap, err);
    json_decref(root);
    return s;
}

mcp_status mcp_codec_simple_peek(const uint8_t *body, size_t len, char *name, size_t cap, void **doc, mcp_err *err)
{
    *doc = NULL;
    json_t *root;
    mcp_status s = mcp__codec_parse_object(body, len, &root, err);
    if (s) return s;
    s = doc_model(root, name, cap, err);
    if (s) json_decref(root);
    else *doc = root;
    return s;
}

void mcp_codec_simple_release(void *doc) { json_decref(doc); }

/* The shape to use when the request gives none: the model's, with at most
 * one variable dimension solved from the element count (a variable batch
 * dimension counts as 1 when another one is variable too). */
static mcp_status infer_shape(const mcp_tensor_meta *meta, int64_t count, const char *ctx, int *rank, int64_t *dims,
                              mcp_err *err)
{
    char sh[256];
    if (meta->rank < 0 || meta->rank > MCP_MAX_RANK) {
        *rank = 1;
        dims[0] = count;
        return MCP_STATUS_OK;
    }
    *rank = meta->rank;
    memcpy(dims, meta->dims, (size_t)meta->rank * sizeof dims[0]);
    mcp_shape_str(meta->rank, meta->dims, sh, sizeof sh);
    int unknown = 0, at = -1;
    for (int k = 0; k < *rank; k++)
        if (dims[k] < 0) unknown++, at = k;
    if (unknown > 1 && dims[0] < 0) {
        dims[0] = 1;
        unknown--;
    }
    if (unknown > 1)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s has variable dimensions %s; give \"shape\"", ctx, sh);
    int64_t known = 1;
    for (int k = 0; k < *rank; k++)
        if (dims[k] >= 0 && __builtin_mul_overflow(known, dims[k], &known))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: model shape %s has too many elements", ctx, sh);
    if (unknown == 0) {
        if (known != count)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "%s: model shape %s needs %lld elements, 'input' has %lld", ctx, sh, (long long)known,
                               (long long)count);
        return MCP_STATUS_OK;
    }
    if (known == 0 || count % known != 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "%s: %lld elements do not fill model shape %s; give \"shape\"", ctx, (long long)count, sh);
    dims[at] = count / known;
    return MCP_STATUS_OK;
}

mcp_status mcp_codec_simple_decode(mcp_request *r, const uint8_t *body, size_t len, const mcp_model_version *m,
                                   mcp_err *err)
{
    if (!m) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "a /v1/infer request needs a model");
    json_t *root;
    mcp_status s = mcp__codec_parse_object(body, len, &root, err);
    if (s) return s;
    s = mcp_codec_simple_decode_doc(r, root, m, err);
    json_decref(root);
    return s;
}

mcp_status mcp_codec_simple_decode_doc(mcp_request *r, void *doc, const mcp_model_version *m, mcp_err *err)
{
    if (!m) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "a /v1/infer request needs a model");
    json_t *root = doc;
    mcp_status s = MCP_STATUS_OK;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "input") && strcmp(key, "shape") && strcmp(key, "model")) {
            s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                            "unknown field '%.100s' (a /v1/infer request has \"input\", \"shape\" and optionally "
                            "\"model\")",
                            key);
            goto done;
        }
    }
    if ((val = json_object_get(root, "model")) && !json_is_string(val)) {
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'model' must be a string");
        goto done;
    }
    if (m->n_inputs != 1) {
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                        "model '%s' has %d inputs; /v1/infer serves single-input models (use "
                        "/v2/models/%s/infer)",
                        mcp__codec_model_name(m), m->n_inputs, mcp__codec_model_name(m));
        goto done;
    }
    const mcp_tensor_meta *meta = &m->inputs[0];
    char ctx[MCP__CODEC_CTX_CAP], sh[256];
    mcp__codec_ctx(ctx, sizeof ctx, "input", meta->name);
    if (!mcp_oip_datatype(meta->dtype)) {
        s = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "%s has datatype %s, which JSON cannot carry", ctx,
                        mcp_dtype_name(meta->dtype));
        goto done;
    }
    const json_t *input = json_object_get(root, "input");
    if (!input) {
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "missing field 'input'");
        goto done;
    }
    if (!json_is_array(input)) {
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'input' must be an array of numbers");
        goto done;
    }
    int64_t count;
    if ((s = mcp__codec_count_leaves(input, MCP_MAX_RANK, false, ctx, &count, err))) goto done;

    mcp_req_tensor *rt = mcp_pool_calloc(r->pool, sizeof *rt);
    if (!rt) {
        s = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    const char *nm = meta->name ? meta->name : "";
    rt->name = mcp_pool_strndup(r->pool, nm, strlen(nm));
    if (!rt->name) {
        s = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    mcp_tensor *t = &rt->t;
    t->dtype = meta->dtype;
    t->format = NULL;
    const json_t *shape = json_object_get(root, "shape");
    if (shape) {
        int64_t numel;
        if ((s = mcp__codec_get_shape(shape, ctx, &t->rank, t->dims, &numel, err))) goto done;
        if (numel != count) {
            s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: shape %s needs %lld elements, 'input' has %lld", ctx,
                            mcp_shape_str(t->rank, t->dims, sh, sizeof sh), (long long)numel, (long long)count);
            goto done;
        }
        if ((s = mcp__codec_check_layout(input, t->rank, t->dims, ctx, err))) goto done;
    } else if ((s = infer_shape(meta, count, ctx, &t->rank, t->dims, err))) {
        goto done;
    }
    if ((s = mcp__codec_alloc_data(r->pool, t->dtype, count, ctx, &t->data, err))) goto done;
    if ((s = mcp__codec_fill(r->pool, t->dtype, t->data, 0, input, MCP__CODEC_BOOL_FROM_NUMBER, ctx, err))) goto done;
    r->inputs = rt;
    r->n_inputs = 1;
done:
    return s;
}

void mcp_codec_simple_encode(const mcp_request *r, mcp_buf *out)
{
    const char *model = r->model && r->model->name ? r->model->name : r->model_name;
    mcp_buf_puts(out, "{\"output\":[");
    if (r->n_outputs > 0) {
        const mcp_tensor *t = &r->outputs[0].t;
        int64_t numel = mcp_tensor_numel(t);
        for (int64_t i = 0; i < numel; i++) {
            if (i) mcp_buf_append(out, ",", 1);
            mcp__codec_put_elem(out, t->dtype, t->data, i);
        }
        mcp_buf_puts(out, "],\"shape\":");
        mcp__codec_put_shape(out, t->rank, t->dims);
    } else {
        mcp_buf_puts(out, "],\"shape\":[0]");
    }
    mcp_buf_puts(out, ",\"model\":");
    mcp__codec_put_string(out, model ? model : "");
    mcp_buf_puts(out, "}");
}
