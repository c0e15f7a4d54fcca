/*
 * KServe v1 (TensorFlow Serving style) predict bodies:
 *   {"instances": [...]}  row form: each instance is one batch row of the
 *                         model's single input, or an object of named inputs;
 *   {"inputs": ...}       columnar form: the whole tensor, or an object of
 *                         named tensors;
 * answered with {"predictions": [...]}, one entry per row. Datatypes come
 * from the model (the protocol carries none); shapes from the nesting.
 */
#include <string.h>

#include "serve/codec_util.h"

/* Builds one request input from `n` JSON values that each hold one row
 * (rows == true) or from one value that holds the whole tensor. */
static mcp_status decode_tensor(mcp_request *r, mcp_req_tensor *rt, const mcp_tensor_meta *meta,
                                const json_t *const *vals, size_t n, bool rows, mcp_err *err)
{
    char ctx[MCP__CODEC_CTX_CAP], sh[256], sh0[256];
    mcp__codec_ctx(ctx, sizeof ctx, "input", meta->name);
    if (!mcp_oip_datatype(meta->dtype) || meta->dtype == MCP_DTYPE_UNDEFINED)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "%s has datatype %s, which JSON cannot carry", ctx,
                           mcp_dtype_name(meta->dtype));
    const char *nm = meta->name ? meta->name : "";
    rt->name = mcp_pool_strndup(r->pool, nm, strlen(nm));
    if (!rt->name) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_tensor *t = &rt->t;
    memset(t, 0, sizeof *t);
    t->dtype = meta->dtype;
    t->format = NULL;

    int rrank;
    int64_t rdims[MCP_MAX_RANK];
    mcp_status s;
    if (!rows) {
        if ((s = mcp__codec_infer_shape(vals[0], ctx, &t->rank, t->dims, err))) return s;
    } else {
        char ictx[MCP__CODEC_CTX_CAP + 48];
        snprintf(ictx, sizeof ictx, "%s: instances[0]", ctx);
        if ((s = mcp__codec_infer_shape(vals[0], ictx, &rrank, rdims, err))) return s;
        if (rrank + 1 > MCP_MAX_RANK)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: instances are nested more than %d levels deep",
                               ctx, MCP_MAX_RANK - 1);
        for (size_t j = 1; j < n; j++) {
            int jr;
            int64_t jd[MCP_MAX_RANK];
            snprintf(ictx, sizeof ictx, "%s: instances[%zu]", ctx, j);
            if ((s = mcp__codec_infer_shape(vals[j], ictx, &jr, jd, err))) return s;
            if (jr != rrank || memcmp(jd, rdims, (size_t)jr * sizeof jd[0]) != 0)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                   "%s: instances[%zu] has shape %s, instances[0] has %s", ctx, j,
                                   mcp_shape_str(jr, jd, sh, sizeof sh), mcp_shape_str(rrank, rdims, sh0, sizeof sh0));
        }
        t->rank = rrank + 1;
        t->dims[0] = (int64_t)n;
        memcpy(t->dims + 1, rdims, (size_t)rrank * sizeof rdims[0]);
    }
    int64_t numel;
    if (!mcp__codec_numel(t->rank, t->dims, &numel))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: shape %s has too many elements", ctx,
                           mcp_shape_str(t->rank, t->dims, sh, sizeof sh));
    if ((s = mcp__codec_alloc_data(r->pool, t->dtype, numel, ctx, &t->data, err))) return s;
    if (!rows) return mcp__codec_fill(r->pool, t->dtype, t->data, 0, vals[0], 0, ctx, err);
    int64_t per_row = n ? numel / (int64_t)n : 0;
    for (size_t j = 0; j < n; j++)
        if ((s = mcp__codec_fill(r->pool, t->dtype, t->data, (int64_t)j * per_row, vals[j], 0, ctx, err))) return s;
    return MCP_STATUS_OK;
}

/* Which model inputs an object names (in model order); an unknown name is
 * an error naming `where`. */
static mcp_status named_inputs(const json_t *obj, const mcp_model_version *m, const char *where, int *idx, int *count,
                               mcp_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (mcp__codec_find_input(m, key) < 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s: '%.100s' is not an input of model '%s'", where,
                               key, mcp__codec_model_name(m));
    }
    *count = 0;
    for (int i = 0; i < m->n_inputs; i++)
        if (m->inputs[i].name && json_object_get(obj, m->inputs[i].name)) idx[(*count)++] = i;
    if (*count == 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s names no inputs of model '%s'", where,
                           mcp__codec_model_name(m));
    return MCP_STATUS_OK;
}

static mcp_status decode_rows(mcp_request *r, const json_t *inst, const mcp_model_version *m, mcp_err *err)
{
    size_t n = json_array_size(inst);
    if (!json_is_array(inst) || n == 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'instances' must be a non-empty array");
    const json_t *first = json_array_get(inst, 0);
    bool named = json_is_object(first);
    /* Room for two lists of input indices: instances[0]'s and a scratch one. */
    int *idx = mcp_pool_alloc(r->pool, 2 * (size_t)(m->n_inputs > 0 ? m->n_inputs : 1) * sizeof *idx), count = 1;
    if (!idx) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status s;
    if (named) {
        if ((s = named_inputs(first, m, "instances[0]", idx, &count, err))) return s;
    } else {
        if (m->n_inputs != 1)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "model '%s' has %d inputs: each instance must be an object naming them",
                               mcp__codec_model_name(m), m->n_inputs);
        idx[0] = 0;
    }
    for (size_t j = 1; j < n; j++) {
        const json_t *e = json_array_get(inst, j);
        if (json_is_object(e) != named)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "instances[%zu] is %san object but instances[0] is %s",
                               j, named ? "not " : "", named ? "one" : "not");
        if (!named) continue;
        for (int c = 0; c < count; c++)
            if (!json_object_get(e, m->inputs[idx[c]].name))
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "instances[%zu]: missing input '%.100s'", j,
                                   m->inputs[idx[c]].name);
        if (json_object_size(e) != (size_t)count) {
            char where[48];
            int cj;
            snprintf(where, sizeof where, "instances[%zu]", j);
            /* The same check as for instances[0] names the stray key. */
            if ((s = named_inputs(e, m, where, idx + count, &cj, err))) return s;
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "instances[%zu] names %d inputs, instances[0] names %d", j, cj, count);
        }
    }
    const json_t **vals = mcp_pool_alloc(r->pool, n * sizeof *vals);
    r->inputs = mcp_pool_calloc(r->pool, (size_t)count * sizeof *r->inputs);
    if (!vals || !r->inputs) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int c = 0; c < count; c++) {
        const mcp_tensor_meta *meta = &m->inputs[idx[c]];
        for (size_t j = 0; j < n; j++) {
            const json_t *e = json_array_get(inst, j);
            vals[j] = named ? json_object_get(e, meta->name) : e;
        }
        if ((s = decode_tensor(r, &r->inputs[c], meta, vals, n, true, err))) return s;
    }
    r->n_inputs = count;
    return MCP_STATUS_OK;
}

static mcp_status decode_columns(mcp_request *r, const json_t *inputs, const mcp_model_version *m, mcp_err *err)
{
    mcp_status s;
    if (!json_is_object(inputs)) {
        if (m->n_inputs != 1)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "model '%s' has %d inputs: 'inputs' must be an object naming them",
                               mcp__codec_model_name(m), m->n_inputs);
        r->inputs = mcp_pool_calloc(r->pool, sizeof *r->inputs);
        if (!r->inputs) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if ((s = decode_tensor(r, &r->inputs[0], &m->inputs[0], &inputs, 1, false, err))) return s;
        r->n_inputs = 1;
        return MCP_STATUS_OK;
    }
    int *idx = mcp_pool_alloc(r->pool, (size_t)(m->n_inputs > 0 ? m->n_inputs : 1) * sizeof *idx), count;
    if (!idx) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if ((s = named_inputs(inputs, m, "'inputs'", idx, &count, err))) return s;
    r->inputs = mcp_pool_calloc(r->pool, (size_t)count * sizeof *r->inputs);
    if (!r->inputs) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int c = 0; c < count; c++) {
        const json_t *v = json_object_get(inputs, m->inputs[idx[c]].name);
        if ((s = decode_tensor(r, &r->inputs[c], &m->inputs[idx[c]], &v, 1, false, err))) return s;
    }
    r->n_inputs = count;
    return MCP_STATUS_OK;
}

mcp_status mcp_codec_v1_decode(mcp_request *r, const uint8_t *body, size_t len, const mcp_model_version *m,
                               mcp_err *err)
{
    if (!m)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "a KServe v1 request needs a model to type its inputs");
    json_t *root;
    mcp_status s = mcp__codec_parse_object(body, len, &root, err);
    if (s) return s;
    const json_t *inst = json_object_get(root, "instances"), *cols = json_object_get(root, "inputs");
    if (inst && cols)
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                        "the request has both 'instances' (row form) and 'inputs' (columnar form); send one");
    else if (!inst && !cols)
        s = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                        "missing field 'instances' (row form) or 'inputs' (columnar form)");
    else
        s = inst ? decode_rows(r, inst, m, err) : decode_columns(r, cols, m, err);
    if (s) r->n_inputs = 0;
    json_decref(root);
    return s;
}

/* ---- response ---- */

/* Row j of tensor t as nested JSON (a bare value for 1-D tensors). */
static void put_row(mcp_buf *b, const mcp_tensor *t, int64_t j)
{
    int64_t inner = 1;
    for (int k = 1; k < t->rank; k++) inner *= t->dims[k];
    mcp__codec_put_nested(b, t->dtype, t->data, j * inner, t->rank - 1, t->dims + 1);
}

void mcp_codec_v1_encode(const mcp_request *r, mcp_buf *out)
{
    int n = r->n_outputs;
    const mcp_req_tensor *o = r->outputs;
    /* One prediction per row when every output has the same leading (batch)
     * dimension; otherwise a single prediction holding the whole tensors. */
    bool by_rows = n > 0;
    for (int k = 0; k < n; k++)
        if (o[k].t.rank < 1 || o[k].t.dims[0] != o[0].t.dims[0]) by_rows = false;
    mcp_buf_puts(out, "{\"predictions\":[");
    if (by_rows) {
        for (int64_t j = 0; j < o[0].t.dims[0]; j++) {
            if (j) mcp_buf_append(out, ",", 1);
            if (n == 1) {
                put_row(out, &o[0].t, j);
                continue;
            }
            mcp_buf_append(out, "{", 1);
            for (int k = 0; k < n; k++) {
                if (k) mcp_buf_append(out, ",", 1);
                mcp__codec_put_string(out, o[k].name ? o[k].name : "");
                mcp_buf_append(out, ":", 1);
                put_row(out, &o[k].t, j);
            }
            mcp_buf_append(out, "}", 1);
        }
    } else if (n == 1) {
        mcp__codec_put_nested(out, o[0].t.dtype, o[0].t.data, 0, o[0].t.rank, o[0].t.dims);
    } else if (n > 1) {
        mcp_buf_append(out, "{", 1);
        for (int k = 0; k < n; k++) {
            if (k) mcp_buf_append(out, ",", 1);
            mcp__codec_put_string(out, o[k].name ? o[k].name : "");
            mcp_buf_append(out, ":", 1);
            mcp__codec_put_nested(out, o[k].t.dtype, o[k].t.data, 0, o[k].t.rank, o[k].t.dims);
        }
        mcp_buf_append(out, "}", 1);
    }
    mcp_buf_puts(out, "]}");
}
