/*
 * mcpctl's side of the Open Inference Protocol v2 wire format: model
 * metadata, binary-extension request bodies, response decoding, KServe v1
 * predict bodies. Everything read here comes from a server, so it is
 * treated as untrusted: sizes are checked before anything is allocated.
 */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/mcpctl_http.h"
#include "serve/codec_util.h"
#include "serve/serve.h"

/* ---- small helpers ---- */

static char *dup_or_null(const char *s) { return s ? mcp_strdup(s) : NULL; }

void mcpctl_named_free(mcpctl_named *v, int n)
{
    if (!v) return;
    for (int i = 0; i < n; i++) {
        mcp_free(v[i].name);
        mcp_tensor_release(&v[i].t);
    }
    mcp_free(v);
}

void mcpctl_sanitize(const char *name, char *out, size_t cap)
{
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
        out[i] = ok ? c : '_';
    }
    out[i] = '\0';
    if (strcmp(out, ".") == 0 || strcmp(out, "..") == 0 || !out[0]) snprintf(out, cap, "_");
}

void mcpctl_print_summary(const char *outdir, const char *name, const mcp_tensor *t)
{
    char stem[512], shape[256];
    mcpctl_sanitize(name, stem, sizeof stem);
    printf("%s: %s %s -> %s/%s.npy", name, mcp_dtype_name(t->dtype), mcp_shape_str(t->rank, t->dims, shape, sizeof shape), outdir,
           stem);
    int64_t n = mcp_tensor_numel(t), show = n < 10 ? n : 10;
    printf(" {");
    for (int64_t i = 0; i < show; i++) {
        if (t->dtype == MCP_DTYPE_STRING) printf("%s\"%.40s\"", i ? ", " : "", ((char **)t->data)[i]);
        else if (mcp_dtype_is_float(t->dtype)) printf("%s%.4g", i ? ", " : "", mcp_tensor_get_f64(t, i));
        else if (mcp_dtype_is_numeric(t->dtype)) printf("%s%lld", i ? ", " : "", (long long)mcp_tensor_get_i64(t, i));
    }
    printf("%s}\n", n > show ? ", ..." : "");
}

/* Bytes a tensor takes on the wire (BYTES: 4-byte length + bytes each). */
static bool wire_size(const mcp_tensor *t, size_t *out)
{
    int64_t n = mcp_tensor_numel(t);
    if (n < 0) return false;
    if (t->dtype != MCP_DTYPE_STRING) return mcp_mul_overflow_size((size_t)n, (size_t)mcp_dtype_size(t->dtype), out);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t l = strlen(((char **)t->data)[i]);
        if (l > UINT32_MAX || total > SIZE_MAX - 4 - l) return false;
        total += 4 + l;
    }
    *out = total;
    return true;
}

static void put_shape(mcp_buf *b, int rank, const int64_t *dims)
{
    mcp_buf_puts(b, "[");
    for (int d = 0; d < rank; d++) mcp_buf_printf(b, "%s%lld", d ? "," : "", (long long)dims[d]);
    mcp_buf_puts(b, "]");
}

/* ---- model metadata ---- */

static mcp_status parse_tensor_meta(json_t *j, const char *what, int idx, mcpctl_tensor_meta *m, mcp_err *err)
{
    const char *name = json_string_value(json_object_get(j, "name"));
    const char *dt = json_string_value(json_object_get(j, "datatype"));
    json_t *shape = json_object_get(j, "shape");
    if (!json_is_object(j) || !name || !dt || !json_is_array(shape))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model metadata: %s[%d] needs a name, datatype and shape", what,
                           idx);
    if (json_array_size(shape) > MCP_MAX_RANK)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model metadata: %s '%s' has rank %zu, more than %d", what, name,
                           json_array_size(shape), MCP_MAX_RANK);
    m->name = mcp_strdup(name);
    snprintf(m->datatype, sizeof m->datatype, "%s", dt);
    m->dtype = mcp_oip_dtype(dt);
    m->rank = (int)json_array_size(shape);
    for (int d = 0; d < m->rank; d++) {
        json_t *v = json_array_get(shape, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < -1)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model metadata: %s '%s': shape[%d] is not an integer >= -1", what,
                               name, d);
        m->dims[d] = json_integer_value(v);
    }
    return m->name ? MCP_STATUS_OK : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
}

static mcp_status parse_tensor_list(json_t *root, const char *key, mcpctl_tensor_meta **out, int *n, mcp_err *err)
{
    json_t *a = json_object_get(root, key);
    if (!json_is_array(a)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model metadata has no '%s' list", key);
    size_t count = json_array_size(a);
    *out = mcp_calloc(count + 1, sizeof **out);
    if (!*out) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    *n = (int)count;
    for (size_t i = 0; i < count; i++) {
        mcp_status st = parse_tensor_meta(json_array_get(a, i), key, (int)i, &(*out)[i], err);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

mcp_status mcpctl_model_meta_parse(const uint8_t *json, size_t len, mcpctl_model_meta *out, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)json, len, 0, &jerr);
    if (!root)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model metadata is not JSON (byte %d: %s)", jerr.position, jerr.text);
    mcp_status st = MCP_STATUS_OK;
    if (!json_is_object(root)) st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model metadata is not a JSON object");
    if (st == MCP_STATUS_OK) {
        out->name = dup_or_null(json_string_value(json_object_get(root, "name")));
        out->platform = dup_or_null(json_string_value(json_object_get(root, "platform")));
        json_t *vs = json_object_get(root, "versions");
        if (json_is_array(vs)) {
            out->versions = mcp_calloc(json_array_size(vs) + 1, sizeof *out->versions);
            for (size_t i = 0; out->versions && i < json_array_size(vs); i++) {
                const char *v = json_string_value(json_array_get(vs, i));
                if (v) out->versions[out->n_versions++] = mcp_strdup(v);
            }
        }
        st = parse_tensor_list(root, "inputs", &out->inputs, &out->n_inputs, err);
    }
    if (st == MCP_STATUS_OK) st = parse_tensor_list(root, "outputs", &out->outputs, &out->n_outputs, err);
    json_decref(root);
    if (st != MCP_STATUS_OK) mcpctl_model_meta_free(out);
    return st;
}

void mcpctl_model_meta_free(mcpctl_model_meta *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_inputs; i++) mcp_free(m->inputs[i].name);
    for (int i = 0; i < m->n_outputs; i++) mcp_free(m->outputs[i].name);
    for (int i = 0; i < m->n_versions; i++) mcp_free(m->versions[i]);
    mcp_free(m->inputs);
    mcp_free(m->outputs);
    mcp_free(m->versions);
    mcp_free(m->name);
    mcp_free(m->platform);
    memset(m, 0, sizeof *m);
}

/* ---- requests ---- */

mcp_status mcpctl_v2_encode_json(const mcpctl_named *inputs, int n_inputs, mcp_buf *body, mcp_err *err)
{
    mcp_buf_reset(body);
    mcp_buf_puts(body, "{\"inputs\":[");
    for (int i = 0; i < n_inputs; i++) {
        const mcp_tensor *t = &inputs[i].t;
        const char *dt = mcp_oip_datatype(t->dtype);
        if (!dt || t->dtype == MCP_DTYPE_FLOAT16 || t->dtype == MCP_DTYPE_BFLOAT16)
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "input '%s': %s cannot travel as JSON", inputs[i].name,
                               mcp_dtype_name(t->dtype));
        mcp_buf_puts(body, i ? ",{\"name\":" : "{\"name\":");
        mcp_buf_json_string(body, inputs[i].name);
        mcp_buf_puts(body, ",\"shape\":");
        put_shape(body, t->rank, t->dims);
        mcp_buf_printf(body, ",\"datatype\":\"%s\",\"data\":[", dt);
        int64_t n = mcp_tensor_numel(t);
        for (int64_t k = 0; k < n; k++) {
            if (k) mcp_buf_puts(body, ",");
            mcp__codec_put_elem(body, t->dtype, t->data, k);
        }
        mcp_buf_puts(body, "]}");
    }
    mcp_buf_puts(body, "]}");
    return body->failed ? mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory") : MCP_STATUS_OK;
}

mcp_status mcpctl_v2_encode(const mcpctl_named *inputs, int n_inputs, const char *const *outputs, int n_outputs,
                            mcp_buf *body, size_t *json_len, mcp_err *err)
{
    mcp_buf_reset(body);
    mcp_buf_puts(body, "{\"inputs\":[");
    for (int i = 0; i < n_inputs; i++) {
        const mcp_tensor *t = &inputs[i].t;
        const char *dt = mcp_oip_datatype(t->dtype);
        size_t size;
        if (!dt)
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "input '%s': %s has no Open Inference Protocol datatype",
                               inputs[i].name, mcp_dtype_name(t->dtype));
        if (!wire_size(t, &size)) return mcp_err_set(err, MCP_STATUS_TOO_LARGE, "input '%s' is too large", inputs[i].name);
        mcp_buf_puts(body, i ? ",{\"name\":" : "{\"name\":");
        mcp_buf_json_string(body, inputs[i].name);
        mcp_buf_puts(body, ",\"shape\":");
        put_shape(body, t->rank, t->dims);
        mcp_buf_printf(body, ",\"datatype\":\"%s\",\"parameters\":{\"binary_data_size\":%zu}}", dt, size);
    }
    mcp_buf_puts(body, "]");
    if (n_outputs > 0) {
        mcp_buf_puts(body, ",\"outputs\":[");
        for (int i = 0; i < n_outputs; i++) {
            mcp_buf_puts(body, i ? ",{\"name\":" : "{\"name\":");
            mcp_buf_json_string(body, outputs[i]);
            mcp_buf_puts(body, ",\"parameters\":{\"binary_data\":true}}");
        }
        mcp_buf_puts(body, "]");
    } else {
        mcp_buf_puts(body, ",\"parameters\":{\"binary_data_output\":true}");
    }
    mcp_buf_puts(body, "}");
    *json_len = body->len;
    for (int i = 0; i < n_inputs; i++) {
        const mcp_tensor *t = &inputs[i].t;
        if (t->dtype != MCP_DTYPE_STRING) {
            size_t size = 0;
            wire_size(t, &size);
            mcp_buf_append(body, t->data, size);
            continue;
        }
        int64_t n = mcp_tensor_numel(t);
        for (int64_t k = 0; k < n; k++) {
            const char *s = ((char **)t->data)[k];
            uint32_t l = (uint32_t)strlen(s);
            uint8_t le[4] = {(uint8_t)l, (uint8_t)(l >> 8), (uint8_t)(l >> 16), (uint8_t)(l >> 24)};
            mcp_buf_append(body, le, 4);
            mcp_buf_append(body, s, l);
        }
    }
    return body->failed ? mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory building the request") : MCP_STATUS_OK;
}

static mcp_status put_elem_json(mcp_buf *b, const mcp_tensor *t, int64_t i, const char *name, mcp_err *err)
{
    if (t->dtype == MCP_DTYPE_STRING) {
        mcp_buf_json_string(b, ((char **)t->data)[i]);
    } else if (t->dtype == MCP_DTYPE_BOOL) {
        mcp_buf_puts(b, mcp_tensor_get_i64(t, i) ? "true" : "false");
    } else if (mcp_dtype_is_float(t->dtype)) {
        double v = mcp_tensor_get_f64(t, i);
        if (!isfinite(v))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "input '%s': element %lld is not finite; JSON cannot carry it",
                               name, (long long)i);
        mcp_buf_printf(b, t->dtype == MCP_DTYPE_DOUBLE ? "%.17g" : "%.9g", v);
    } else if (t->dtype == MCP_DTYPE_UINT64) {
        mcp_buf_printf(b, "%llu", (unsigned long long)((const uint64_t *)t->data)[i]);
    } else if (mcp_dtype_is_integer(t->dtype)) {
        mcp_buf_printf(b, "%lld", (long long)mcp_tensor_get_i64(t, i));
    } else {
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "input '%s': %s cannot travel as JSON", name, mcp_dtype_name(t->dtype));
    }
    return MCP_STATUS_OK;
}

/* Elements [*pos, ...) of t as a nested array over dims[d..rank). */
static mcp_status put_nested(mcp_buf *b, const mcp_tensor *t, int d, int64_t *pos, const char *name, mcp_err *err)
{
    if (d == t->rank) return put_elem_json(b, t, (*pos)++, name, err);
    mcp_buf_puts(b, "[");
    for (int64_t k = 0; k < t->dims[d]; k++) {
        if (k) mcp_buf_puts(b, ",");
        mcp_status st = put_nested(b, t, d + 1, pos, name, err);
        if (st != MCP_STATUS_OK) return st;
    }
    mcp_buf_puts(b, "]");
    return MCP_STATUS_OK;
}

mcp_status mcpctl_v1_encode(const mcpctl_named *inputs, int n_inputs, mcp_buf *body, mcp_err *err)
{
    mcp_buf_reset(body);
    mcp_buf_puts(body, "{\"instances\":[");
    if (n_inputs > 1) mcp_buf_puts(body, "{");
    for (int i = 0; i < n_inputs; i++) {
        const mcp_tensor *t = &inputs[i].t;
        if (n_inputs > 1) {
            if (i) mcp_buf_puts(body, ",");
            mcp_buf_json_string(body, inputs[i].name);
            mcp_buf_puts(body, ":");
        }
        int64_t pos = 0;
        /* One instance: the batch dimension (size 1) is the list itself. */
        mcp_status st = put_nested(body, t, t->rank > 0 ? 1 : 0, &pos, inputs[i].name, err);
        if (st != MCP_STATUS_OK) return st;
    }
    if (n_inputs > 1) mcp_buf_puts(body, "}");
    mcp_buf_puts(body, "]}");
    return body->failed ? mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory building the request") : MCP_STATUS_OK;
}

/* ---- responses ---- */

/* Counts the leaves of a (possibly nested) JSON data array; false when it
 * nests deeper than a tensor can or holds something other than scalars. */
static bool count_leaves(json_t *a, int depth, int64_t *n)
{
    if (!json_is_array(a)) {
        if (json_is_object(a) || json_is_null(a)) return false;
        (*n)++;
        return true;
    }
    if (depth > MCP_MAX_RANK) return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!count_leaves(json_array_get(a, i), depth + 1, n)) return false;
    return true;
}

static mcp_status set_leaf(mcp_tensor *t, int64_t i, json_t *v, const char *name, mcp_err *err)
{
    if (t->dtype == MCP_DTYPE_STRING) {
        if (!json_is_string(v))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': element %lld is not a string", name, (long long)i);
        return mcp_tensor_set_string(t, i, json_string_value(v), json_string_length(v)) == MCP_STATUS_OK
                   ? MCP_STATUS_OK
                   : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (json_is_boolean(v)) {
        mcp_tensor_set_i64(t, i, json_is_true(v) ? 1 : 0);
    } else if (json_is_integer(v)) {
        if (t->dtype == MCP_DTYPE_UINT64) ((uint64_t *)t->data)[i] = (uint64_t)json_integer_value(v);
        else if (mcp_dtype_is_float(t->dtype)) mcp_tensor_set_f64(t, i, (double)json_integer_value(v));
        else mcp_tensor_set_i64(t, i, json_integer_value(v));
    } else if (json_is_real(v) && mcp_dtype_is_float(t->dtype)) {
        mcp_tensor_set_f64(t, i, json_real_value(v));
    } else {
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': element %lld is not a %s number", name, (long long)i,
                           mcp_dtype_name(t->dtype));
    }
    return MCP_STATUS_OK;
}

static mcp_status fill_leaves(mcp_tensor *t, json_t *a, int64_t *pos, const char *name, mcp_err *err)
{
    if (!json_is_array(a)) return set_leaf(t, (*pos)++, a, name, err);
    for (size_t i = 0; i < json_array_size(a); i++) {
        mcp_status st = fill_leaves(t, json_array_get(a, i), pos, name, err);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* Reads `size` bytes of binary data for t (already shaped, not allocated). */
static mcp_status take_binary(mcp_tensor *t, const char *name, const uint8_t *p, size_t size, mcp_err *err)
{
    int64_t n = mcp_tensor_numel(t);
    if (t->dtype != MCP_DTYPE_STRING) {
        size_t want;
        if (!mcp_mul_overflow_size((size_t)n, (size_t)mcp_dtype_size(t->dtype), &want) || want != size)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "output '%s': binary_data_size is %zu bytes, its shape and datatype need %zu", name, size, want);
        mcp_tensor shaped = *t;
        mcp_status st = mcp_tensor_alloc(t, shaped.dtype, shaped.rank, shaped.dims, err);
        if (st == MCP_STATUS_OK && size) memcpy(t->data, p, size);
        return st;
    }
    /* BYTES: every element needs at least its 4-byte length. */
    if (n < 0 || (uint64_t)n > size / 4)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': %zu bytes cannot hold %lld BYTES elements", name, size,
                           (long long)n);
    mcp_tensor shaped = *t;
    mcp_status st = mcp_tensor_alloc(t, shaped.dtype, shaped.rank, shaped.dims, err);
    size_t off = 0;
    for (int64_t i = 0; st == MCP_STATUS_OK && i < n; i++) {
        if (size - off < 4)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': BYTES element %lld is cut short", name, (long long)i);
        uint32_t l = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
        off += 4;
        if (l > size - off)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "output '%s': BYTES element %lld says %u bytes, %zu are left", name, (long long)i, l, size - off);
        if (mcp_tensor_set_string(t, i, (const char *)p + off, l) != MCP_STATUS_OK)
            st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        off += l;
    }
    if (st == MCP_STATUS_OK && off != size)
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': %zu bytes left over after its BYTES elements", name,
                         size - off);
    return st;
}

static mcp_status decode_output(json_t *o, int idx, const uint8_t *bin, size_t bin_len, size_t *bin_off, mcpctl_named *out,
                                mcp_err *err)
{
    const char *name = json_string_value(json_object_get(o, "name"));
    if (!json_is_object(o) || !name)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "response: outputs[%d] has no name", idx);
    out->name = mcp_strdup(name);
    if (!out->name) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    const char *dt = json_string_value(json_object_get(o, "datatype"));
    mcp_dtype dtype = dt ? mcp_oip_dtype(dt) : MCP_DTYPE_UNDEFINED;
    if (dtype == MCP_DTYPE_UNDEFINED)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': unknown datatype '%s'", name, dt ? dt : "(none)");
    json_t *shape = json_object_get(o, "shape");
    if (!json_is_array(shape) || json_array_size(shape) > MCP_MAX_RANK)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': shape must be a list of at most %d sizes", name,
                           MCP_MAX_RANK);
    mcp_tensor *t = &out->t;
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->rank = (int)json_array_size(shape);
    for (int d = 0; d < t->rank; d++) {
        json_t *v = json_array_get(shape, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': shape[%d] is not a size", name, d);
        t->dims[d] = json_integer_value(v);
    }
    /* numel with an overflow check: a hostile shape must not wrap. */
    uint64_t numel = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d] && numel > (uint64_t)INT64_MAX / (uint64_t)t->dims[d])
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': shape is too large", name);
        numel *= (uint64_t)t->dims[d];
    }
    json_t *params = json_object_get(o, "parameters");
    json_t *bsize = json_is_object(params) ? json_object_get(params, "binary_data_size") : NULL;
    if (bsize) {
        if (!json_is_integer(bsize) || json_integer_value(bsize) < 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': binary_data_size is not a byte count", name);
        uint64_t size = (uint64_t)json_integer_value(bsize);
        if (size > bin_len - *bin_off)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "output '%s': binary_data_size %llu runs past the end of the body (%zu bytes left)", name,
                               (unsigned long long)size, bin_len - *bin_off);
        mcp_status st = take_binary(t, name, bin + *bin_off, (size_t)size, err);
        *bin_off += (size_t)size;
        return st;
    }
    json_t *data = json_object_get(o, "data");
    int64_t leaves = 0;
    if (!data) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s' has neither data nor binary_data_size", name);
    if (!count_leaves(data, 0, &leaves))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': data must be a (nested) list of scalars", name);
    if ((uint64_t)leaves != numel)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "output '%s': data holds %lld values, shape needs %llu", name,
                           (long long)leaves, (unsigned long long)numel);
    mcp_tensor shaped = *t;
    mcp_status st = mcp_tensor_alloc(t, shaped.dtype, shaped.rank, shaped.dims, err);
    int64_t pos = 0;
    if (st == MCP_STATUS_OK) st = fill_leaves(t, data, &pos, name, err);
    return st;
}

mcp_status mcpctl_v2_decode(const uint8_t *body, size_t len, int64_t header_len, mcpctl_named **outs, int *n, mcp_err *err)
{
    *outs = NULL;
    *n = 0;
    size_t jlen = len;
    if (header_len >= 0) {
        if ((uint64_t)header_len > len || header_len == 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "response: Inference-Header-Content-Length is %lld, the body has %zu bytes", (long long)header_len,
                               len);
        jlen = (size_t)header_len;
    }
    json_error_t jerr;
    json_t *root = json_loadb((const char *)body, jlen, 0, &jerr);
    if (!root)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "response is not JSON (byte %d: %s)", jerr.position, jerr.text);
    mcp_status st = MCP_STATUS_OK;
    json_t *list = json_object_get(root, "outputs");
    if (!json_is_object(root) || !json_is_array(list))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "response has no 'outputs' list");
    size_t count = st == MCP_STATUS_OK ? json_array_size(list) : 0;
    mcpctl_named *v = st == MCP_STATUS_OK ? mcp_calloc(count + 1, sizeof *v) : NULL;
    if (st == MCP_STATUS_OK && !v) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    const uint8_t *bin = body + jlen;
    size_t bin_len = len - jlen, bin_off = 0;
    size_t done = 0; /* entries of v that may hold something to free */
    while (st == MCP_STATUS_OK && done < count) {
        st = decode_output(json_array_get(list, done), (int)done, bin, bin_len, &bin_off, &v[done], err);
        done++;
    }
    if (st == MCP_STATUS_OK && bin_off != bin_len)
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "response: %zu bytes after the last binary output", bin_len - bin_off);
    json_decref(root);
    if (st != MCP_STATUS_OK) {
        /* Tensors that failed half-way hold shape but no data: release is safe. */
        for (size_t i = 0; v && i < done; i++)
            if (!v[i].t.data) memset(&v[i].t, 0, sizeof v[i].t);
        mcpctl_named_free(v, (int)done);
        return st;
    }
    *outs = v;
    *n = (int)count;
    return MCP_STATUS_OK;
}

/* ---- server metrics (Prometheus text) ---- */

/* Value of label `key` in a label block `{a="x",b="y"}` (escapes undone). */
static bool label_value(const char *labels, const char *end, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    const char *p = labels;
    while (p < end) {
        while (p < end && (*p == '{' || *p == ',' || *p == ' ')) p++;
        const char *k = p;
        while (p < end && *p != '=') p++;
        if (p >= end || p + 1 >= end || p[1] != '"') return false;
        bool match = (size_t)(p - k) == klen && strncmp(k, key, klen) == 0;
        p += 2;
        size_t o = 0;
        while (p < end && *p != '"') {
            char ch = *p++;
            if (ch == '\\' && p < end) {
                ch = *p++;
                if (ch == 'n') ch = '\n';
            }
            if (match && o + 1 < cap) out[o++] = ch;
        }
        p++;
        if (match) {
            out[o] = '\0';
            return true;
        }
    }
    return false;
}

void mcpctl_metrics_parse(const char *text, size_t len, const char *model, mcpctl_server_sums *s)
{
    static const struct {
        const char *name;
        size_t offset;
    } wanted[] = {
        {"mcp_queue_duration_seconds_sum", offsetof(mcpctl_server_sums, queue_sum)},
        {"mcp_queue_duration_seconds_count", offsetof(mcpctl_server_sums, queue_count)},
        {"mcp_compute_duration_seconds_sum", offsetof(mcpctl_server_sums, compute_sum)},
        {"mcp_compute_duration_seconds_count", offsetof(mcpctl_server_sums, compute_count)},
        {"mcp_request_duration_seconds_sum", offsetof(mcpctl_server_sums, total_sum)},
        {"mcp_request_duration_seconds_count", offsetof(mcpctl_server_sums, total_count)},
        {"mcp_batch_size_sum", offsetof(mcpctl_server_sums, batch_sum)},
        {"mcp_batch_size_count", offsetof(mcpctl_server_sums, batch_count)},
    };
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const char *line = p;
        p = eol + 1;
        if (line == eol || *line == '#') continue;
        const char *n_end = line;
        while (n_end < eol && *n_end != '{' && *n_end != ' ') n_end++;
        const char *lab = NULL, *lab_end = NULL, *val = n_end;
        if (n_end < eol && *n_end == '{') {
            lab = n_end;
            bool quoted = false;
            for (lab_end = n_end; lab_end < eol; lab_end++) {
                if (*lab_end == '\\' && quoted) lab_end++;
                else if (*lab_end == '"') quoted = !quoted;
                else if (*lab_end == '}' && !quoted) break;
            }
            if (lab_end >= eol) continue;
            val = lab_end + 1;
        }
        for (size_t w = 0; w < sizeof wanted / sizeof wanted[0]; w++) {
            size_t nl = strlen(wanted[w].name);
            if ((size_t)(n_end - line) != nl || strncmp(line, wanted[w].name, nl) != 0) continue;
            char m[512];
            if (!lab || !label_value(lab, lab_end, "model", m, sizeof m) || strcmp(m, model) != 0) continue;
            char num[64];
            size_t vl = (size_t)(eol - val);
            if (vl >= sizeof num) vl = sizeof num - 1;
            memcpy(num, val, vl);
            num[vl] = '\0';
            *(double *)((char *)s + wanted[w].offset) += strtod(num, NULL);
        }
    }
}
