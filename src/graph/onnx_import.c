/*
 * ONNX import: decodes a ModelProto once with protobuf-c and builds our IR.
 * Every failure names what was wrong and where (graph, node, tensor).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "onnx.pb-c.h"
#include "onnx_values.pb-c.h"

typedef struct import_ctx {
    const char *base_dir;
    mcp_err *err;
    int depth;
    /* The protobuf was decoded with pb_alloc (our allocator), so large
     * raw_data buffers can become tensor data without a copy. */
    bool steal_raw;
    /* A compiled model's data area (mcp_onnx_import_blob), else NULL. */
    const mcp_import_blob *blob;
    /* Set while the top graph's initializers import: only they may lie in
     * the data area (a compiled model writes everything else inline). */
    bool in_blob_ok;
    bool *read_external; /* set when a tensor's data came from an external file */
    /* The model's local functions (ModelProto.functions), inlined where a
     * node calls one; fn_scope: the function whose body is importing (its
     * opset_import binds its nodes), fn_depth: calls nested so far. */
    const struct fn_table *fns;
    const Onnx__FunctionProto *fn_scope;
    int fn_depth;
    size_t *fn_nodes; /* nodes inlined so far, against MAX_FN_NODES */
    size_t *fn_bytes; /* names made and attributes bound by inlining, against MAX_FN_BYTES */
} import_ctx;

/* Decoding with the counted allocator lets tensors take over raw_data. */
static void *pb_malloc(void *unused, size_t n)
{
    (void)unused;
    return mcp_malloc_load(n);
}

static void pb_free(void *unused, void *p)
{
    (void)unused;
    mcp_free(p);
}

static ProtobufCAllocator pb_alloc = {pb_malloc, pb_free, NULL};

/* raw_data at least this large is taken over rather than copied. */
#define STEAL_MIN_BYTES 4096

#define MAX_GRAPH_DEPTH 64

static char *dup_or_empty(const char *s) { return mcp_strdup(s ? s : ""); }

/* ---- tensors ---- */

static bool dtype_valid(int32_t dt)
{
    return dt > 0 && dt < MCP_DTYPE_COUNT;
}

const char *mcp_onnx_dtype_name(int64_t n)
{
    static const char *const known[] = {
#define MCP__ONNX_NAME(name, num, size, text, oip, onnx) onnx,
        MCP_DTYPE_MAP(MCP__ONNX_NAME)
#undef MCP__ONNX_NAME
    };
    if (n >= 0 && n < MCP_DTYPE_COUNT) return known[n];
    return NULL;
}

const char *mcp_onnx_dtype_refusal(int64_t n, char *buf, size_t cap)
{
    const char *name = mcp_onnx_dtype_name(n);
    if (name) snprintf(buf, cap, "element type %lld (%s), which this engine does not implement", (long long)n, name);
    else snprintf(buf, cap, "element type %lld, which ONNX does not define", (long long)n);
    return buf;
}

/* A declared element type the engine does not implement: UNSUPPORTED for
 * ONNX's own newer types, INVALID_MODEL for numbers ONNX does not define. */
static mcp_status refuse_dtype(const import_ctx *ic, const char *what, const char *name, int64_t n)
{
    char why[160];
    return mcp_err_set(ic->err, mcp_onnx_dtype_name(n) ? MCP_STATUS_UNSUPPORTED : MCP_STATUS_INVALID_MODEL,
                       "%s '%s': %s", what, name, mcp_onnx_dtype_refusal(n, why, sizeof why));
}

/* Rejects external data paths that could escape the model's folder. */
static bool external_path_safe(const char *loc)
{
    if (!loc || !*loc || loc[0] == '/') return false;
    const char *p = loc;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return false;
        if (!slash) break;
        p = slash + 1;
    }
    return true;
}

static mcp_status read_external(const Onnx__TensorProto *tp, const import_ctx *ic, uint8_t **out,
                                size_t *out_len)
{
    const char *loc = NULL;
    long long offset = 0, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key || !e->value) continue;
        if (strcmp(e->key, "location") == 0) loc = e->value;
        else if (strcmp(e->key, "offset") == 0) offset = strtoll(e->value, NULL, 10);
        else if (strcmp(e->key, "length") == 0) length = strtoll(e->value, NULL, 10);
    }
    const char *name = tp->name ? tp->name : "";
    if (!loc) return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': external data without a location", name);
    if (!external_path_safe(loc))
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                           "tensor '%s': external data location '%s' must be a relative path inside the model's folder", name, loc);
    if (!ic->base_dir)
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                           "tensor '%s': external data '%s' needs the model's folder (load the model from a file)", name, loc);
    if (offset < 0) return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': negative external data offset", name);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", ic->base_dir, loc);
    /* The file must stay inside the model's folder after symbolic links
     * too, and be a regular file (a FIFO would block the load). */
    char real[PATH_MAX], base_real[PATH_MAX];
    if (!realpath(ic->base_dir, base_real) || !realpath(path, real))
        return mcp_err_set(ic->err, MCP_STATUS_IO_ERROR, "tensor '%s': cannot open external data '%s': %s", name, loc, strerror(errno));
    size_t bl = strlen(base_real);
    if (strncmp(real, base_real, bl) != 0 || real[bl] != '/')
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                           "tensor '%s': external data location '%s' leads outside the model's folder (symbolic link)", name, loc);
    FILE *f;
    char why[512];
    mcp_err ferr = {why, sizeof why};
    if (mcp_file_open_regular(real, &f, &ferr) != MCP_STATUS_OK)
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': external data '%s': %s", name, loc, why);
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return mcp_err_set(ic->err, MCP_STATUS_IO_ERROR, "tensor '%s': cannot seek '%s'", name, path); }
    long size = ftell(f);
    if (size < 0 || offset > size) { fclose(f); return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': external data offset %lld beyond end of '%s'", name, offset, path); }
    if (length < 0) length = size - offset;
    if (length > size - offset) { fclose(f); return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': external data '%s' is shorter than offset+length", name, path); }
    uint8_t *buf = mcp_malloc((size_t)length);
    if (!buf) { fclose(f); return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "tensor '%s': out of memory for external data", name); }
    if (fseek(f, (long)offset, SEEK_SET) != 0 || (length && fread(buf, 1, (size_t)length, f) != (size_t)length)) {
        fclose(f);
        mcp_free(buf);
        return mcp_err_set(ic->err, MCP_STATUS_IO_ERROR, "tensor '%s': short read on '%s'", name, path);
    }
    fclose(f);
    *out = buf;
    *out_len = (size_t)length;
    return MCP_STATUS_OK;
}

/*
 * A compiled model's initializer: external data at MCP_BLOB_LOCATION is a
 * 64-byte aligned range of the blob the tensor borrows; at
 * MCP_RELEASED_LOCATION, float weights a kernel holds packed (no data). The
 * caller has checked the dtype and the shape's element count (`claimed`).
 */
static mcp_status tensor_in_blob(const Onnx__TensorProto *tp, const import_ctx *ic, size_t claimed, mcp_tensor *out)
{
    const char *name = tp->name ? tp->name : "", *loc = NULL;
    long long offset = -1, length = -1;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e->key || !e->value) continue;
        char *end = NULL;
        if (strcmp(e->key, "location") == 0) loc = e->value;
        else if (strcmp(e->key, "offset") == 0) offset = strtoll(e->value, &end, 10);
        else if (strcmp(e->key, "length") == 0) length = strtoll(e->value, &end, 10);
        if (end && (*end || end == e->value))
            return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': external data %s '%s' is not a number", name,
                               e->key, e->value);
    }
    mcp_dtype dt = (mcp_dtype)tp->data_type;
    int es = mcp_dtype_bits(dt);
    bool released = loc && strcmp(loc, MCP_RELEASED_LOCATION) == 0;
    if (!loc || (!released && strcmp(loc, MCP_BLOB_LOCATION) != 0))
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': a compiled model's data lies in its own file, not at '%s'",
                           name, loc ? loc : "(no location)");
    if (dt == MCP_DTYPE_STRING || es <= 0 || (released && dt != MCP_DTYPE_FLOAT))
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': %s data cannot be %s", name, mcp_dtype_name(dt),
                           released ? "held packed" : "mapped");
    size_t nbits;
    if (!mcp_mul_overflow_size(claimed, (size_t)es, &nbits))
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': shape overflows", name);
    size_t nbytes = nbits / 8 + (nbits % 8 != 0);
    memset(out, 0, sizeof *out);
    out->dtype = dt;
    out->rank = (int)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++) out->dims[i] = tp->dims[i];
    if (released) return MCP_STATUS_OK;
    if (offset < 0 || length < 0 || (unsigned long long)length != nbytes || offset % 64 != 0 ||
        (unsigned long long)offset > ic->blob->len || (unsigned long long)length > ic->blob->len - (unsigned long long)offset)
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                           "tensor '%s': data at offset %lld, %lld bytes, does not fit the data area (%zu bytes; %zu needed, "
                           "64-byte aligned)",
                           name, offset, length, ic->blob->len, nbytes);
    out->data = (void *)(ic->blob->data + offset);
    return MCP_STATUS_OK;
}

static mcp_status tensor_from_proto(const Onnx__TensorProto *tp, const import_ctx *ic, mcp_tensor *out)
{
    const char *name = tp->name ? tp->name : "";
    memset(out, 0, sizeof *out);
    if (!tp->has_data_type || tp->data_type == 0)
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': no element type", name);
    if (!dtype_valid(tp->data_type)) return refuse_dtype(ic, "tensor", name, tp->data_type);
    if (tp->n_dims > MCP_MAX_RANK)
        return mcp_err_set(ic->err, MCP_STATUS_UNSUPPORTED, "tensor '%s': rank %zu above the maximum %d", name, tp->n_dims, MCP_MAX_RANK);
    if (tp->segment) return mcp_err_set(ic->err, MCP_STATUS_UNSUPPORTED, "tensor '%s': segmented tensors are not supported", name);
    mcp_dtype dt = (mcp_dtype)tp->data_type;
    /* Check the element count against the data present before allocating, so
     * a corrupt shape cannot request a huge allocation. */
    size_t claimed = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': negative dimension %lld", name, (long long)tp->dims[i]);
        if (!mcp_mul_overflow_size(claimed, (size_t)tp->dims[i], &claimed))
            return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': shape overflows", name);
    }
    const uint8_t *raw = NULL;
    size_t raw_len = 0;
    uint8_t *ext = NULL;
    if (ic->blob && tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if (!ic->in_blob_ok)
            return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                               "tensor '%s': only the top graph's initializers lie in a compiled model's data area", name);
        return tensor_in_blob(tp, ic, claimed, out);
    }
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        mcp_status est = read_external(tp, ic, &ext, &raw_len);
        if (est != MCP_STATUS_OK) return est;
        if (ic->read_external) *ic->read_external = true;
        raw = ext;
    } else if (tp->has_raw_data) {
        raw = tp->raw_data.data;
        raw_len = tp->raw_data.len;
    }
    /* Elements the data can hold at most (packed types: per byte, and per
     * int32_data entry, which holds one packed byte as ONNX writes them). */
    size_t per_byte = mcp_dtype_is_packed(dt) ? (size_t)(8 / mcp_dtype_bits(dt)) : 1;
    size_t present = raw ? raw_len * per_byte / (size_t)(mcp_dtype_size(dt) ? mcp_dtype_size(dt) : 1)
                         : tp->n_float_data + tp->n_int32_data * per_byte + tp->n_string_data + tp->n_int64_data +
                               tp->n_double_data + tp->n_uint64_data;
    if (claimed > present) {
        mcp_free(ext);
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': shape needs %zu elements, the data holds %zu", name,
                           claimed, present);
    }
    mcp_status st = mcp_tensor_alloc(out, dt, (int)tp->n_dims, tp->dims, ic->err);
    if (st != MCP_STATUS_OK) {
        mcp_free(ext);
        mcp_err_prefix(ic->err, "tensor '%s'", name);
        return st;
    }
    int64_t n = mcp_tensor_numel(out);
    size_t nbytes = mcp_tensor_nbytes(out);
    int es = mcp_dtype_size(dt);


    if (dt == MCP_DTYPE_STRING) {
        if (raw) { mcp_tensor_release(out); mcp_free(ext); return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': string tensors cannot use raw_data", name); }
        if ((int64_t)tp->n_string_data != n) {
            mcp_tensor_release(out);
            return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': %zu strings for %lld elements", name, tp->n_string_data, (long long)n);
        }
        for (int64_t i = 0; i < n; i++) {
            if (mcp_tensor_set_string(out, i, (const char *)tp->string_data[i].data, tp->string_data[i].len) != MCP_STATUS_OK) {
                mcp_tensor_release(out);
                return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "tensor '%s': out of memory", name);
            }
        }
        return MCP_STATUS_OK;
    }
    if (raw) {
        if (raw_len != nbytes) {
            mcp_tensor_release(out);
            mcp_free(ext);
            return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': raw data has %zu bytes, shape and dtype need %zu", name, raw_len, nbytes);
        }
        if (!ext && ic->steal_raw && nbytes >= STEAL_MIN_BYTES) {
            /* Take protobuf-c's copy; the decoded model is ours and is
             * freed without it. */
            Onnx__TensorProto *own = (Onnx__TensorProto *)tp;
            mcp_free(out->data);
            out->data = own->raw_data.data;
            own->raw_data.data = NULL;
            own->raw_data.len = 0;
            return MCP_STATUS_OK;
        }
        if (nbytes) memcpy(out->data, raw, nbytes);
        mcp_free(ext);
        return MCP_STATUS_OK;
    }
    /* Typed fields. Complex types store two scalars per element; the
     * packed types one byte of packed elements per int32_data entry, the
     * float8 types one element per entry (ONNX's TensorProto comments). */
    int64_t scalars = (dt == MCP_DTYPE_COMPLEX64 || dt == MCP_DTYPE_COMPLEX128) ? 2 * n
                      : mcp_dtype_is_packed(dt)                                  ? (int64_t)nbytes
                                                                                 : n;
    size_t have = 0;
    switch (dt) {
    case MCP_DTYPE_FLOAT: case MCP_DTYPE_COMPLEX64: have = tp->n_float_data; break;
    case MCP_DTYPE_DOUBLE: case MCP_DTYPE_COMPLEX128: have = tp->n_double_data; break;
    case MCP_DTYPE_INT64: have = tp->n_int64_data; break;
    case MCP_DTYPE_UINT32: case MCP_DTYPE_UINT64: have = tp->n_uint64_data; break;
    default: have = tp->n_int32_data; break;
    }
    if ((int64_t)have != scalars) {
        mcp_tensor_release(out);
        if (mcp_dtype_is_packed(dt))
            return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                               "tensor '%s': %zu int32_data entries for %lld %s elements (%lld packed bytes, one an entry)", name,
                               have, (long long)n, mcp_dtype_name(dt), (long long)scalars);
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "tensor '%s': %zu values for %lld elements", name, have, (long long)n);
    }
    for (int64_t i = 0; i < scalars; i++) {
        uint8_t *dst = (uint8_t *)out->data;
        switch (dt) {
        case MCP_DTYPE_FLOAT: case MCP_DTYPE_COMPLEX64: ((float *)dst)[i] = tp->float_data[i]; break;
        case MCP_DTYPE_DOUBLE: case MCP_DTYPE_COMPLEX128: ((double *)dst)[i] = tp->double_data[i]; break;
        case MCP_DTYPE_INT64: ((int64_t *)dst)[i] = tp->int64_data[i]; break;
        case MCP_DTYPE_UINT32: ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i]; break;
        case MCP_DTYPE_UINT64: ((uint64_t *)dst)[i] = tp->uint64_data[i]; break;
        case MCP_DTYPE_FLOAT16: case MCP_DTYPE_BFLOAT16: case MCP_DTYPE_UINT16: ((uint16_t *)dst)[i] = (uint16_t)tp->int32_data[i]; break;
        case MCP_DTYPE_INT16: ((int16_t *)dst)[i] = (int16_t)tp->int32_data[i]; break;
        case MCP_DTYPE_INT32: ((int32_t *)dst)[i] = tp->int32_data[i]; break;
        case MCP_DTYPE_INT8: ((int8_t *)dst)[i] = (int8_t)tp->int32_data[i]; break;
        case MCP_DTYPE_UINT8: ((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i]; break;
        case MCP_DTYPE_BOOL: dst[i] = tp->int32_data[i] != 0; break;
        default:
            /* The narrow types: a code (float8), or a packed byte. */
            if (mcp_dtype_is_narrow(dt)) dst[i] = (uint8_t)tp->int32_data[i];
            (void)es;
            break;
        }
    }
    return MCP_STATUS_OK;
}

/* ---- types ---- */

static mcp_status type_from_proto(const Onnx__TypeProto *tp, const char *vname, const import_ctx *ic, mcp_type *out)
{
    memset(out, 0, sizeof *out);
    out->rank = -1;
    if (!tp) return MCP_STATUS_OK;
    switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: {
        const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
        out->kind = MCP_VALUE_TENSOR;
        /* An element type the engine does not implement is refused here:
         * left undefined, a value would take whatever type it was fed. */
        if (tt->has_elem_type && tt->elem_type != 0 && !dtype_valid(tt->elem_type))
            return refuse_dtype(ic, "value", vname, tt->elem_type);
        out->dtype = tt->has_elem_type ? (mcp_dtype)tt->elem_type : MCP_DTYPE_UNDEFINED;
        if (tt->shape) {
            if (tt->shape->n_dim > MCP_MAX_RANK)
                return mcp_err_set(ic->err, MCP_STATUS_UNSUPPORTED, "value '%s': rank %zu above the maximum %d", vname, tt->shape->n_dim, MCP_MAX_RANK);
            out->rank = (int)tt->shape->n_dim;
            for (size_t i = 0; i < tt->shape->n_dim; i++) {
                const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
                out->dims[i] = -1;
                if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0)
                    out->dims[i] = d->dim_value;
                else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param)
                    out->dim_params[i] = mcp_strdup(d->dim_param);
            }
        }
        return MCP_STATUS_OK;
    }
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: {
        mcp_type inner;
        mcp_status st = type_from_proto(tp->sequence_type->elem_type, vname, ic, &inner);
        if (st != MCP_STATUS_OK) return st;
        out->kind = MCP_VALUE_SEQUENCE;
        out->dtype = inner.dtype;
        for (int i = 0; i < MCP_MAX_RANK; i++) mcp_free(inner.dim_params[i]);
        return MCP_STATUS_OK;
    }
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: {
        mcp_status st = type_from_proto(tp->optional_type->elem_type, vname, ic, out);
        out->is_optional = true;
        return st;
    }
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        return mcp_err_set(ic->err, MCP_STATUS_UNSUPPORTED, "value '%s': map types are not supported", vname);
    default:
        return MCP_STATUS_OK;
    }
}

static void type_release(mcp_type *t)
{
    for (int i = 0; i < MCP_MAX_RANK; i++) {
        mcp_free(t->dim_params[i]);
        t->dim_params[i] = NULL;
    }
}

/* ---- graph building ---- */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

/* Indexes values[i], which then shadows an earlier value of the same name. */
static void name_index_put(mcp_graph *g, int i)
{
    int mask = g->name_index_cap - 1;
    for (int at = (int)(name_hash(g->values[i].name) & (uint64_t)mask);; at = (at + 1) & mask) {
        int e = g->name_index[at];
        if (e == 0 || strcmp(g->values[e - 1].name, g->values[i].name) == 0) {
            g->name_index[at] = i + 1;
            return;
        }
    }
}

/* Brings the index up to every value, growing it to stay under half full;
 * false when out of memory (lookups then scan). */
static bool name_index_update(mcp_graph *g)
{
    if (g->n_values * 2 >= g->name_index_cap) {
        int cap = g->name_index_cap ? g->name_index_cap : 64;
        while (g->n_values * 2 >= cap) cap *= 2;
        int *t = mcp_calloc((size_t)cap, sizeof *t);
        if (!t) return false;
        mcp_free(g->name_index);
        g->name_index = t;
        g->name_index_cap = cap;
        g->name_index_n = 0;
    }
    for (; g->name_index_n < g->n_values; g->name_index_n++) name_index_put(g, g->name_index_n);
    return true;
}

static int add_value(mcp_graph *g, const char *name, mcp_err *err)
{
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 16;
        mcp_graph_value *v = mcp_realloc(g->values, (size_t)cap * sizeof *v);
        if (!v) { mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory"); return -1; }
        g->values = v;
        g->cap_values = cap;
    }
    mcp_graph_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = mcp_strdup(name);
    if (!v->name) { mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory"); return -1; }
    v->type.rank = -1;
    v->outer = -1;
    v->initializer = -1;
    v->producer = -1;
    g->n_values++;
    name_index_update(g); /* best effort: without it lookups scan */
    return g->n_values - 1;
}

int mcp_graph_find_value(const mcp_graph *g, const char *name)
{
    /* Latest definition wins (a subgraph may shadow an outer name): the
     * values added since the index was brought up to date first. */
    int indexed = g->name_index ? g->name_index_n : 0;
    for (int i = g->n_values - 1; i >= indexed; i--)
        if (strcmp(g->values[i].name, name) == 0) return i;
    if (!indexed) return -1;
    int mask = g->name_index_cap - 1;
    for (int at = (int)(name_hash(name) & (uint64_t)mask);; at = (at + 1) & mask) {
        int e = g->name_index[at];
        if (e == 0) return -1;
        if (strcmp(g->values[e - 1].name, name) == 0) return e - 1;
    }
}

const mcp_prepacked *mcp_graph_prepacked(const mcp_graph *g, const mcp_node *n, int slot)
{
    if (g->parent || n < g->nodes || n >= g->nodes + g->n_nodes) return NULL;
    int node = (int)(n - g->nodes);
    for (int i = 0; i < g->n_prepacked; i++)
        if (g->prepacked[i].node == node && g->prepacked[i].slot == slot) return &g->prepacked[i];
    return NULL;
}

/* Finds `name` in g or, through captures, in an enclosing graph. Returns the
 * value index in g, -1 if undefined, -2 on allocation failure. */
static int lookup_value(mcp_graph *g, const char *name, mcp_err *err)
{
    int idx = mcp_graph_find_value(g, name);
    if (idx >= 0 || !g->parent) return idx;
    int pidx = lookup_value(g->parent, name, err);
    if (pidx < 0) return pidx;
    idx = add_value(g, name, err);
    if (idx < 0) return -2;
    g->values[idx].outer = pidx;
    mcp_type *dst = &g->values[idx].type;
    *dst = g->parent->values[pidx].type;
    for (int i = 0; i < MCP_MAX_RANK; i++)
        dst->dim_params[i] = dst->dim_params[i] ? mcp_strdup(dst->dim_params[i]) : NULL;
    return idx;
}

static mcp_status import_graph(const Onnx__GraphProto *gp, mcp_graph *parent, const import_ctx *ic, mcp_graph **out);

static mcp_status attr_from_proto(const Onnx__AttributeProto *ap, mcp_graph *owner, const import_ctx *ic, mcp_attr *a)
{
    memset(a, 0, sizeof *a);
    a->name = dup_or_empty(ap->name);
    if (!a->name) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (ap->ref_attr_name && *ap->ref_attr_name)
        return mcp_err_set(ic->err, MCP_STATUS_UNSUPPORTED, "attribute '%s' refers to a function attribute", a->name);
    int type = ap->has_type ? (int)ap->type : 0;
    if (type == 0) {
        /* Older writers leave the type unset: infer it from the field present. */
        if (ap->has_f) type = MCP_ATTR_FLOAT;
        else if (ap->has_i) type = MCP_ATTR_INT;
        else if (ap->has_s) type = MCP_ATTR_STRING;
        else if (ap->t) type = MCP_ATTR_TENSOR;
        else if (ap->g) type = MCP_ATTR_GRAPH;
        else if (ap->n_floats) type = MCP_ATTR_FLOATS;
        else if (ap->n_ints) type = MCP_ATTR_INTS;
        else if (ap->n_strings) type = MCP_ATTR_STRINGS;
        else if (ap->n_tensors) type = MCP_ATTR_TENSORS;
        else if (ap->n_graphs) type = MCP_ATTR_GRAPHS;
        else if (ap->tp) type = MCP_ATTR_TYPE_PROTO;
    }
    a->type = (mcp_attr_type)type;
    mcp_status st = MCP_STATUS_OK;
    switch (a->type) {
    case MCP_ATTR_FLOAT: a->f = ap->f; break;
    case MCP_ATTR_INT: a->i = ap->i; break;
    case MCP_ATTR_STRING:
        a->s = mcp_malloc(ap->s.len + 1);
        if (!a->s) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (ap->s.len) memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = '\0';
        a->s_len = ap->s.len;
        break;
    case MCP_ATTR_TENSOR:
        if (!ap->t) return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "attribute '%s' of type TENSOR has no tensor", a->name);
        st = tensor_from_proto(ap->t, ic, &a->t);
        break;
    case MCP_ATTR_GRAPH:
        if (!ap->g) return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "attribute '%s' of type GRAPH has no graph", a->name);
        st = import_graph(ap->g, owner, ic, &a->g);
        break;
    case MCP_ATTR_FLOATS:
        a->count = (int64_t)ap->n_floats;
        a->floats = mcp_malloc(ap->n_floats * sizeof(float));
        if (!a->floats) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (ap->n_floats) memcpy(a->floats, ap->floats, ap->n_floats * sizeof(float));
        break;
    case MCP_ATTR_INTS:
        a->count = (int64_t)ap->n_ints;
        a->ints = mcp_malloc(ap->n_ints * sizeof(int64_t));
        if (!a->ints) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (ap->n_ints) memcpy(a->ints, ap->ints, ap->n_ints * sizeof(int64_t));
        break;
    case MCP_ATTR_STRINGS:
        a->strings = mcp_calloc(ap->n_strings ? ap->n_strings : 1, sizeof(char *));
        if (!a->strings) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; i < ap->n_strings; i++) {
            a->strings[i] = mcp_malloc(ap->strings[i].len + 1);
            if (!a->strings[i]) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            a->count = (int64_t)i + 1;
            if (ap->strings[i].len) memcpy(a->strings[i], ap->strings[i].data, ap->strings[i].len);
            a->strings[i][ap->strings[i].len] = '\0';
        }
        break;
    case MCP_ATTR_TENSORS:
        a->tensors = mcp_calloc(ap->n_tensors ? ap->n_tensors : 1, sizeof(mcp_tensor));
        if (!a->tensors) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; i < ap->n_tensors && st == MCP_STATUS_OK; i++) {
            st = tensor_from_proto(ap->tensors[i], ic, &a->tensors[i]);
            if (st == MCP_STATUS_OK) a->count = (int64_t)i + 1;
        }
        break;
    case MCP_ATTR_GRAPHS:
        a->graphs = mcp_calloc(ap->n_graphs ? ap->n_graphs : 1, sizeof(mcp_graph *));
        if (!a->graphs) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; i < ap->n_graphs && st == MCP_STATUS_OK; i++) {
            st = import_graph(ap->graphs[i], owner, ic, &a->graphs[i]);
            if (st == MCP_STATUS_OK) a->count = (int64_t)i + 1;
        }
        break;
    case MCP_ATTR_TYPE_PROTO: {
        mcp_type t;
        st = type_from_proto(ap->tp, a->name, ic, &t);
        if (st == MCP_STATUS_OK) {
            a->tp_kind = t.kind;
            a->tp_dtype = t.dtype;
            type_release(&t);
        }
        break;
    }
    case MCP_ATTR_SPARSE_TENSOR:
    case MCP_ATTR_SPARSE_TENSORS:
        return mcp_err_set(ic->err, MCP_STATUS_UNSUPPORTED, "attribute '%s': sparse tensors are not supported", a->name);
    default:
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "attribute '%s' has unknown type %d", a->name, type);
    }
    if (st != MCP_STATUS_OK) mcp_err_prefix(ic->err, "attribute '%s'", a->name);
    return st;
}

void mcp_attr_release(mcp_attr *a)
{
    mcp_free(a->name);
    mcp_free(a->s);
    mcp_tensor_release(&a->t);
    mcp_graph_free(a->g);
    mcp_free(a->floats);
    mcp_free(a->ints);
    if (a->strings)
        for (int64_t i = 0; i < a->count; i++) mcp_free(a->strings[i]);
    mcp_free(a->strings);
    if (a->tensors)
        for (int64_t i = 0; i < a->count; i++) mcp_tensor_release(&a->tensors[i]);
    mcp_free(a->tensors);
    if (a->graphs)
        for (int64_t i = 0; i < a->count; i++) mcp_graph_free(a->graphs[i]);
    mcp_free(a->graphs);
}

static const mcp_graph *graph_root(const mcp_graph *g)
{
    while (g->parent) g = g->parent;
    return g;
}

int64_t mcp_graph_opset(const mcp_graph *g, const char *domain)
{
    g = graph_root(g);
    if (!domain || strcmp(domain, "ai.onnx") == 0) domain = "";
    for (int i = 0; i < g->n_opsets; i++)
        if (strcmp(g->opsets[i].domain, domain) == 0) return g->opsets[i].version;
    return 0;
}

static mcp_status import_node(mcp_graph *g, const Onnx__NodeProto *np, int index, const import_ctx *ic)
{
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 16;
        mcp_node *nn = mcp_realloc(g->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        g->nodes = nn;
        g->cap_nodes = cap;
    }
    mcp_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    char fallback[64];
    snprintf(fallback, sizeof fallback, "#%d", index);
    n->name = mcp_strdup(np->name && *np->name ? np->name : fallback);
    n->op_type = dup_or_empty(np->op_type);
    n->domain = mcp_strdup(np->domain && strcmp(np->domain, "ai.onnx") != 0 ? np->domain : "");
    if (!n->name || !n->op_type || !n->domain) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (!*n->op_type) return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "node '%s' has no op_type", n->name);
    n->opset = 0;
    for (size_t i = 0; ic->fn_scope && i < ic->fn_scope->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *op = ic->fn_scope->opset_import[i];
        const char *d = op->domain && strcmp(op->domain, "ai.onnx") != 0 ? op->domain : "";
        if (strcmp(d, n->domain) == 0 && op->has_version) n->opset = (int)op->version;
    }
    if (n->opset <= 0) n->opset = (int)mcp_graph_opset(g, n->domain);
    if (n->opset <= 0)
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "node '%s' (%s): domain '%s' is not in the model's opset_import",
                           n->name, n->op_type, n->domain);

    n->inputs = mcp_malloc((np->n_input ? np->n_input : 1) * sizeof(int));
    n->outputs = mcp_malloc((np->n_output ? np->n_output : 1) * sizeof(int));
    n->attrs = mcp_calloc(np->n_attribute ? np->n_attribute : 1, sizeof(mcp_attr));
    if (!n->inputs || !n->outputs || !n->attrs) return mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < np->n_input; i++) {
        const char *in = np->input[i];
        int idx = -1;
        if (in && *in) {
            idx = lookup_value(g, in, ic->err);
            if (idx == -2) return MCP_STATUS_OUT_OF_MEMORY;
            if (idx < 0)
                return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                                   "node '%s' (%s): input '%s' is not a graph input, initializer or output of an earlier node",
                                   n->name, n->op_type, in);
        }
        n->inputs[n->n_inputs++] = idx;
    }
    /* Attributes before outputs: a subgraph may only see values defined
     * before this node. */
    if (np->n_attribute > 1024)
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "node '%s' (%s) has %zu attributes; at most 1024 are taken",
                           n->name, n->op_type, np->n_attribute);
    for (size_t i = 0; i < np->n_attribute; i++) {
        /* One value a name: a kernel and a pass must not read different ones. */
        for (size_t j = 0; j < i; j++)
            if (np->attribute[i]->name && np->attribute[j]->name &&
                strcmp(np->attribute[i]->name, np->attribute[j]->name) == 0)
                return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "node '%s' (%s): attribute '%s' is given twice",
                                   n->name, n->op_type, np->attribute[i]->name);
        n->n_attrs++;
        mcp_status st = attr_from_proto(np->attribute[i], g, ic, &n->attrs[i]);
        if (st != MCP_STATUS_OK) {
            mcp_err_prefix(ic->err, "node '%s' (%s)", n->name, n->op_type);
            return st;
        }
    }
    for (size_t i = 0; i < np->n_output; i++) {
        const char *o = np->output[i];
        int idx = -1;
        if (o && *o) {
            int prev = mcp_graph_find_value(g, o);
            if (prev >= 0 && g->values[prev].outer < 0)
                return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL, "node '%s' (%s): output '%s' is already defined",
                                   n->name, n->op_type, o);
            idx = add_value(g, o, ic->err);
            if (idx < 0) return MCP_STATUS_OUT_OF_MEMORY;
            g->values[idx].producer = g->n_nodes - 1;
        }
        n->outputs[n->n_outputs++] = idx;
    }
    return MCP_STATUS_OK;
}

/* ---- model-local functions ----
 *
 * A node whose (domain, op_type, overload) names one of the model's local
 * functions (ModelProto.functions, IR 8+) is replaced by the function's
 * nodes: formal inputs and outputs become the call's values, every other
 * value and node name gets the call's name as a prefix, and an attribute
 * that refers to a function attribute (ref_attr_name) takes the call's
 * value, else the function's default, else is left out. Calls inside a
 * function inline in turn, to MAX_FN_DEPTH. Debian's onnx.proto predates
 * FunctionProto.attribute_proto (11) and overload (13) and
 * NodeProto.overload (8): they arrive as unknown fields and are read here.
 */
#define MAX_FN_DEPTH 32
/* Inlining multiplies: a function calling another twice, 32 levels deep,
 * would make 2^32 nodes. The nodes inlined in one model are bounded. */
#define MAX_FN_NODES ((size_t)1 << 18)
/* ... and so are the bytes of the names it makes and the attribute values
 * it binds (each inlined node gets its own copy), and the functions a model
 * may define (calls look them up by name). */
#define MAX_FN_BYTES ((size_t)64 << 20)
#define MAX_LOCAL_FNS 4096

typedef struct local_fn {
    const Onnx__FunctionProto *fp;
    const char *domain; /* "" for the default domain */
    char *overload;     /* "" when none */
    Onnx__AttributeProto **defaults;
    size_t n_defaults;
} local_fn;

typedef struct fn_table {
    local_fn *fns;
    size_t n;
} fn_table;

/* The payload of msg's k-th unknown length-delimited field `tag`: false
 * when there is none. protobuf-c keeps such a field with its length
 * prefix, which is read (and checked) here. */
static bool unknown_field(const ProtobufCMessage *msg, uint32_t tag, size_t k, const uint8_t **data, size_t *len)
{
    for (unsigned i = 0; i < msg->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *f = &msg->unknown_fields[i];
        if (f->tag != tag || f->wire_type != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED || k-- != 0) continue;
        uint64_t n = 0;
        size_t at = 0;
        for (int shift = 0; at < f->len && shift < 64; shift += 7) {
            uint8_t b = f->data[at++];
            n |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
        }
        if (n != f->len - at) return false;
        *data = f->data + at;
        *len = (size_t)n;
        return true;
    }
    return false;
}

/* A string field kept among msg's unknown fields (overload), or "". */
static char *unknown_string(const ProtobufCMessage *msg, uint32_t tag)
{
    const uint8_t *d = NULL;
    size_t n = 0;
    bool found = unknown_field(msg, tag, 0, &d, &n);
    char *s = mcp_malloc(found ? n + 1 : 1);
    if (!s) return NULL;
    if (found) memcpy(s, d, n);
    s[found ? n : 0] = '\0';
    return s;
}

static const char *norm_domain(const char *d) { return d && strcmp(d, "ai.onnx") != 0 ? d : ""; }

static void fn_table_free(fn_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        mcp_free(t->fns[i].overload);
        for (size_t k = 0; k < t->fns[i].n_defaults; k++)
            onnx__attribute_proto__free_unpacked(t->fns[i].defaults[k], &pb_alloc);
        mcp_free(t->fns[i].defaults);
    }
    mcp_free(t->fns);
    memset(t, 0, sizeof *t);
}

static mcp_status fn_table_init(const Onnx__ModelProto *mp, fn_table *t, mcp_err *err)
{
    memset(t, 0, sizeof *t);
    if (!mp->n_functions) return MCP_STATUS_OK;
    if (mp->n_functions > MAX_LOCAL_FNS)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "the model defines %zu local functions; at most %d are taken",
                           mp->n_functions, MAX_LOCAL_FNS);
    t->fns = mcp_calloc(mp->n_functions, sizeof *t->fns);
    if (!t->fns) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < mp->n_functions; i++) {
        const Onnx__FunctionProto *fp = mp->functions[i];
        local_fn *f = &t->fns[t->n++];
        f->fp = fp;
        f->domain = norm_domain(fp->domain);
        f->overload = unknown_string(&fp->base, 13);
        if (!f->overload) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (!fp->name || !*fp->name)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "local function #%zu has no name", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(t->fns[j].fp->name, fp->name) == 0 && strcmp(t->fns[j].domain, f->domain) == 0 &&
                strcmp(t->fns[j].overload, f->overload) == 0)
                return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "local function '%s' (domain '%s') is defined twice",
                                   fp->name, f->domain);
        /* Its opsets are the model's: inlined nodes keep them (a compiled
         * model writes the model's alone). */
        for (size_t k = 0; k < fp->n_opset_import; k++) {
            const Onnx__OperatorSetIdProto *op = fp->opset_import[k];
            const char *d = norm_domain(op->domain);
            bool same = false;
            for (size_t j = 0; j < mp->n_opset_import; j++)
                same = same || (strcmp(norm_domain(mp->opset_import[j]->domain), d) == 0 &&
                                mp->opset_import[j]->version == op->version);
            if (!same)
                return mcp_err_set(err, MCP_STATUS_UNSUPPORTED,
                                   "local function '%s' imports opset %lld of domain '%s', which the model does not "
                                   "import at that version", fp->name, (long long)op->version, d);
        }
        /* Attribute defaults (field 11), gathered in one pass. */
        size_t nd = 0;
        for (unsigned k = 0; k < fp->base.n_unknown_fields; k++) nd += fp->base.unknown_fields[k].tag == 11;
        if (nd && !(f->defaults = mcp_calloc(nd, sizeof *f->defaults)))
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        for (unsigned k = 0; k < fp->base.n_unknown_fields; k++) {
            const ProtobufCMessageUnknownField *u = &fp->base.unknown_fields[k];
            if (u->tag != 11) continue;
            const uint8_t *dd = NULL;
            size_t dlen = 0;
            ProtobufCMessage one = {.n_unknown_fields = 1, .unknown_fields = (ProtobufCMessageUnknownField *)u};
            if (!unknown_field(&one, 11, 0, &dd, &dlen))
                return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "local function '%s': an attribute default is corrupt",
                                   fp->name);
            Onnx__AttributeProto *ap = onnx__attribute_proto__unpack(&pb_alloc, dlen, dd);
            if (ap && !ap->name) {
                onnx__attribute_proto__free_unpacked(ap, &pb_alloc);
                ap = NULL;
            }
            if (!ap)
                return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "local function '%s': attribute default #%u is corrupt",
                                   fp->name, k);
            f->defaults[f->n_defaults++] = ap;
        }
    }
    return MCP_STATUS_OK;
}

static const local_fn *find_fn(const fn_table *t, const Onnx__NodeProto *np, mcp_err *err, bool *oom)
{
    *oom = false;
    if (!t || !t->n || !np->op_type) return NULL;
    const char *d = norm_domain(np->domain);
    char *overload = NULL;
    const local_fn *found = NULL;
    for (size_t i = 0; i < t->n && !found; i++) {
        if (strcmp(t->fns[i].fp->name, np->op_type) != 0 || strcmp(t->fns[i].domain, d) != 0) continue;
        if (!overload && !(overload = unknown_string(&np->base, 8))) {
            *oom = true;
            mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            return NULL;
        }
        if (strcmp(t->fns[i].overload, overload) == 0) found = &t->fns[i];
    }
    mcp_free(overload);
    return found;
}

/* Strings made for one inlined call, freed together. */
typedef struct name_pool {
    char **s;
    size_t n, cap;
    size_t bytes; /* of the strings made */
} name_pool;

static char *pool_add(name_pool *p, const char *a, const char *b)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 32;
        char **ns = mcp_realloc(p->s, cap * sizeof *ns);
        if (!ns) return NULL;
        p->s = ns;
        p->cap = cap;
    }
    size_t la = strlen(a), lb = strlen(b);
    char *r = mcp_malloc(la + lb + 1);
    if (!r) return NULL;
    p->bytes += la + lb + 1;
    memcpy(r, a, la);
    memcpy(r + la, b, lb + 1);
    return p->s[p->n++] = r;
}

static void pool_free(name_pool *p)
{
    for (size_t i = 0; i < p->n; i++) mcp_free(p->s[i]);
    mcp_free(p->s);
}

/* The call's value for a name in the function body: a formal input is the
 * call's (absent: ""), a formal output the call's (absent or unnamed: an
 * internal name), anything else prefix + name. NULL when out of memory. */
static const char *fn_value_name(const Onnx__FunctionProto *fp, const Onnx__NodeProto *call, const char *name,
                                 const char *prefix, name_pool *pool)
{
    if (!name || !*name) return "";
    for (size_t j = 0; j < fp->n_input; j++)
        if (fp->input[j] && strcmp(fp->input[j], name) == 0) return j < call->n_input ? call->input[j] : "";
    for (size_t j = 0; j < fp->n_output; j++)
        if (fp->output[j] && strcmp(fp->output[j], name) == 0 && j < call->n_output && call->output[j] &&
            *call->output[j])
            return call->output[j];
    return pool_add(pool, prefix, name);
}

static mcp_status import_call(mcp_graph *g, const Onnx__NodeProto *np, int index, const import_ctx *ic);

/* About the bytes an attribute's value takes once imported. */
static size_t attr_bytes(const Onnx__AttributeProto *a)
{
    size_t n = a->s.len + a->n_floats * sizeof(float) + a->n_ints * sizeof(int64_t);
    for (size_t i = 0; i < a->n_strings; i++) n += a->strings[i].len;
    const Onnx__TensorProto *t = a->t;
    if (t)
        n += t->raw_data.len + t->n_float_data * 4 + t->n_int32_data * 4 + t->n_int64_data * 8 + t->n_double_data * 8 +
             t->n_uint64_data * 8 + t->n_string_data;
    return n + a->n_tensors * 64;
}

static mcp_status inline_call(mcp_graph *g, const Onnx__NodeProto *call, int index, const local_fn *f,
                              const import_ctx *ic)
{
    const Onnx__FunctionProto *fp = f->fp;
    char cname[64];
    snprintf(cname, sizeof cname, "#%d", index);
    const char *caller = call->name && *call->name ? call->name : cname;
    if (ic->fn_depth >= MAX_FN_DEPTH)
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                           "node '%s': local function calls nested deeper than %d (does '%s' call itself?)", caller,
                           MAX_FN_DEPTH, fp->name);
    if (call->n_input > fp->n_input || call->n_output > fp->n_output)
        return mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                           "node '%s' calls local function '%s' with %zu inputs and %zu outputs; it has %zu and %zu",
                           caller, fp->name, call->n_input, call->n_output, fp->n_input, fp->n_output);
    import_ctx sub = *ic;
    sub.fn_scope = fp;
    sub.fn_depth = ic->fn_depth + 1;
    /* A function's body and attributes import once per call: their tensors
     * are copied, never taken (a second call would find them empty). */
    sub.steal_raw = false;
    name_pool pool = {0};
    mcp_status st = MCP_STATUS_OK;
    const int first_node = g->n_nodes;
    const char *prefix = pool_add(&pool, caller, "/");
    if (!prefix) st = mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t k = 0; st == MCP_STATUS_OK && k < fp->n_node; k++) {
        const Onnx__NodeProto *fnp = fp->node[k];
        Onnx__NodeProto copy = *fnp;
        char **ins = mcp_calloc(fnp->n_input + 1, sizeof *ins), **outs = mcp_calloc(fnp->n_output + 1, sizeof *outs);
        Onnx__AttributeProto **attrs = mcp_calloc(fnp->n_attribute + 1, sizeof *attrs);
        Onnx__AttributeProto *bound = mcp_calloc(fnp->n_attribute + 1, sizeof *bound);
        char nname[32];
        snprintf(nname, sizeof nname, "#%zu", k);
        copy.name = pool_add(&pool, prefix, fnp->name && *fnp->name ? fnp->name : nname);
        if (!ins || !outs || !attrs || !bound || !copy.name)
            st = mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; st == MCP_STATUS_OK && i < fnp->n_input; i++)
            if (!(ins[i] = (char *)fn_value_name(fp, call, fnp->input[i], prefix, &pool)))
                st = mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; st == MCP_STATUS_OK && i < fnp->n_output; i++)
            if (!(outs[i] = (char *)fn_value_name(fp, call, fnp->output[i], prefix, &pool)))
                st = mcp_err_set(ic->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        size_t na = 0;
        for (size_t i = 0; st == MCP_STATUS_OK && i < fnp->n_attribute; i++) {
            const Onnx__AttributeProto *ap = fnp->attribute[i];
            if (ap->g || ap->n_graphs)
                st = mcp_err_set(ic->err, MCP_STATUS_UNSUPPORTED,
                                 "local function '%s': node '%s' has a subgraph attribute '%s'; subgraphs inside local "
                                 "functions are not supported", fp->name, fnp->name ? fnp->name : nname,
                                 ap->name ? ap->name : "");
            if (st != MCP_STATUS_OK || !ap->ref_attr_name || !*ap->ref_attr_name) {
                attrs[na++] = (Onnx__AttributeProto *)ap;
                continue;
            }
            const Onnx__AttributeProto *v = NULL; /* the call's value, else the default */
            for (size_t j = 0; !v && j < call->n_attribute; j++)
                if (call->attribute[j]->name && strcmp(call->attribute[j]->name, ap->ref_attr_name) == 0)
                    v = call->attribute[j];
            for (size_t j = 0; !v && j < f->n_defaults; j++)
                if (strcmp(f->defaults[j]->name, ap->ref_attr_name) == 0) v = f->defaults[j];
            if (!v) continue;
            if (v->g || v->n_graphs)
                st = mcp_err_set(ic->err, MCP_STATUS_UNSUPPORTED,
                                 "node '%s' passes a subgraph to local function '%s' (attribute '%s'); subgraphs inside "
                                 "local functions are not supported", caller, fp->name, ap->ref_attr_name);
            *ic->fn_bytes += attr_bytes(v);
            bound[i] = *v;
            bound[i].name = ap->name;
            bound[i].ref_attr_name = NULL;
            attrs[na++] = &bound[i];
        }
        copy.input = ins;
        copy.output = outs;
        copy.attribute = attrs;
        copy.n_attribute = na;
        if (st == MCP_STATUS_OK && ++*ic->fn_nodes > MAX_FN_NODES)
            st = mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                             "inlining the model's local functions would make more than %zu nodes", MAX_FN_NODES);
        if (st == MCP_STATUS_OK && (*ic->fn_bytes += pool.bytes, pool.bytes = 0, *ic->fn_bytes > MAX_FN_BYTES))
            st = mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                             "inlining the model's local functions would copy more than %zu bytes of names and "
                             "attributes", MAX_FN_BYTES);
        if (st == MCP_STATUS_OK) st = import_call(g, &copy, (int)k, &sub);
        if (st != MCP_STATUS_OK && st != MCP_STATUS_OUT_OF_MEMORY)
            mcp_err_prefix(ic->err, "in local function '%s' called by node '%s'", fp->name, caller);
        mcp_free(ins);
        mcp_free(outs);
        mcp_free(attrs);
        mcp_free(bound);
    }
    /* Every output the call names must now be computed, by this call. */
    for (size_t j = 0; st == MCP_STATUS_OK && j < call->n_output; j++) {
        const char *o = call->output[j];
        int v = o && *o ? mcp_graph_find_value(g, o) : -2;
        if (v != -2 && (v < 0 || g->values[v].producer < first_node))
            st = mcp_err_set(ic->err, MCP_STATUS_INVALID_MODEL,
                             "node '%s': local function '%s' does not compute its output #%zu ('%s')", caller,
                             fp->name, j, fp->output[j] ? fp->output[j] : "");
    }
    pool_free(&pool);
    return st;
}

static mcp_status import_call(mcp_graph *g, const Onnx__NodeProto *np, int index, const import_ctx *ic)
{
    bool oom;
    const local_fn *f = find_fn(ic->fns, np, ic->err, &oom);
    if (oom) return MCP_STATUS_OUT_OF_MEMORY;
    return f ? inline_call(g, np, index, f, ic) : import_node(g, np, index, ic);
}

static mcp_status import_graph(const Onnx__GraphProto *gp, mcp_graph *parent, const import_ctx *ic_in, mcp_graph **out)
{
    import_ctx ic = *ic_in;
    ic.depth++;
    *out = NULL;
    if (ic.depth > MAX_GRAPH_DEPTH)
        return mcp_err_set(ic.err, MCP_STATUS_INVALID_MODEL, "subgraphs nested deeper than %d", MAX_GRAPH_DEPTH);
    mcp_graph *g = mcp_calloc(1, sizeof *g);
    if (!g) return mcp_err_set(ic.err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    g->parent = parent;
    /* The root's opsets are set by the caller before import_graph runs. */
    *out = g;
    g->name = dup_or_empty(gp->name);
    if (!g->name) return mcp_err_set(ic.err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st;

    if (gp->n_sparse_initializer)
        return mcp_err_set(ic.err, MCP_STATUS_UNSUPPORTED, "graph '%s': sparse initializers are not supported", g->name);
    g->initializers = mcp_calloc(gp->n_initializer ? gp->n_initializer : 1, sizeof(mcp_tensor));
    g->initializer_values = mcp_calloc(gp->n_initializer ? gp->n_initializer : 1, sizeof(int));
    g->inputs = mcp_calloc(gp->n_input ? gp->n_input : 1, sizeof(int));
    g->outputs = mcp_calloc(gp->n_output ? gp->n_output : 1, sizeof(int));
    if (!g->initializers || !g->initializer_values || !g->inputs || !g->outputs)
        return mcp_err_set(ic.err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");

    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        const char *name = tp->name ? tp->name : "";
        if (!*name) return mcp_err_set(ic.err, MCP_STATUS_INVALID_MODEL, "graph '%s': initializer #%zu has no name", g->name, i);
        if (mcp_graph_find_value(g, name) >= 0)
            return mcp_err_set(ic.err, MCP_STATUS_INVALID_MODEL, "graph '%s': initializer '%s' defined twice", g->name, name);
        import_ctx init_ic = ic;
        init_ic.in_blob_ok = ic.depth == 1;
        st = tensor_from_proto(tp, &init_ic, &g->initializers[i]);
        if (st != MCP_STATUS_OK) return st;
        g->n_initializers++;
        int idx = add_value(g, name, ic.err);
        if (idx < 0) return MCP_STATUS_OUT_OF_MEMORY;
        g->initializer_values[i] = idx;
        mcp_graph_value *v = &g->values[idx];
        v->initializer = (int)i;
        v->type.kind = MCP_VALUE_TENSOR;
        v->type.dtype = g->initializers[i].dtype;
        v->type.rank = g->initializers[i].rank;
        memcpy(v->type.dims, g->initializers[i].dims, sizeof v->type.dims);
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *name = vi->name ? vi->name : "";
        if (!*name) return mcp_err_set(ic.err, MCP_STATUS_INVALID_MODEL, "graph '%s': input #%zu has no name", g->name, i);
        int idx = mcp_graph_find_value(g, name);
        if (idx >= 0 && g->values[idx].initializer >= 0) continue; /* an initializer with a default */
        if (idx >= 0) return mcp_err_set(ic.err, MCP_STATUS_INVALID_MODEL, "graph '%s': input '%s' listed twice", g->name, name);
        idx = add_value(g, name, ic.err);
        if (idx < 0) return MCP_STATUS_OUT_OF_MEMORY;
        st = type_from_proto(vi->type, name, &ic, &g->values[idx].type);
        if (st != MCP_STATUS_OK) return st;
        g->inputs[g->n_inputs++] = idx;
    }
    for (size_t i = 0; i < gp->n_node; i++) {
        st = import_call(g, gp->node[i], (int)i, &ic);
        if (st != MCP_STATUS_OK) return st;
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        const char *name = vi->name ? vi->name : "";
        int idx = lookup_value(g, name, ic.err);
        if (idx == -2) return MCP_STATUS_OUT_OF_MEMORY;
        if (idx < 0)
            return mcp_err_set(ic.err, MCP_STATUS_INVALID_MODEL, "graph '%s': output '%s' is not produced by any node, input or initializer",
                               g->name, name);
        mcp_type t;
        st = type_from_proto(vi->type, name, &ic, &t);
        if (st != MCP_STATUS_OK) return st;
        if (vi->type && g->values[idx].initializer < 0) {
            type_release(&g->values[idx].type);
            g->values[idx].type = t;
        } else {
            type_release(&t);
        }
        g->outputs[g->n_outputs++] = idx;
    }
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        if (!vi->name || !vi->type) continue;
        int idx = mcp_graph_find_value(g, vi->name);
        if (idx < 0 || g->values[idx].initializer >= 0) continue;
        mcp_type t;
        st = type_from_proto(vi->type, vi->name, &ic, &t);
        if (st != MCP_STATUS_OK) return st;
        type_release(&g->values[idx].type);
        g->values[idx].type = t;
    }
    return MCP_STATUS_OK;
}

static mcp_status import_model(const uint8_t *buf, size_t len, const char *base_dir, const mcp_import_blob *blob,
                               mcp_graph **out, mcp_err *err);

mcp_status mcp_onnx_import(const uint8_t *buf, size_t len, const char *base_dir, mcp_graph **out, mcp_err *err)
{
    return import_model(buf, len, base_dir, NULL, out, err);
}

mcp_status mcp_onnx_import_blob(const uint8_t *buf, size_t len, const mcp_import_blob *blob, mcp_graph **out,
                                mcp_err *err)
{
    return import_model(buf, len, NULL, blob, out, err);
}

static mcp_status import_model(const uint8_t *buf, size_t len, const char *base_dir, const mcp_import_blob *blob,
                               mcp_graph **out, mcp_err *err)
{
    *out = NULL;
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&pb_alloc, len, buf);
    if (!mp)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "not a valid ONNX model: protobuf decoding failed (truncated or corrupt file?)");
    if (!mp->graph) {
        onnx__model_proto__free_unpacked(mp, &pb_alloc);
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "ONNX model has no graph");
    }
    bool read_ext = false;
    fn_table fns;
    mcp_status st = fn_table_init(mp, &fns, err);
    size_t fn_nodes = 0, fn_bytes = 0;
    import_ctx ic = {base_dir, err, 0, true, blob, false, &read_ext, &fns, NULL, 0, &fn_nodes, &fn_bytes};
    /* The root graph is allocated here so opsets exist before nodes import. */
    mcp_graph *root = mcp_calloc(1, sizeof *root);
    if (!root) {
        fn_table_free(&fns);
        onnx__model_proto__free_unpacked(mp, &pb_alloc);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    root->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    root->producer_name = dup_or_empty(mp->producer_name);
    if (mp->n_metadata_props) root->metadata_keys = mcp_calloc(mp->n_metadata_props, sizeof *root->metadata_keys);
    for (size_t i = 0; root->metadata_keys && i < mp->n_metadata_props; i++)
        if (mp->metadata_props[i] && (root->metadata_keys[root->n_metadata_keys] = dup_or_empty(mp->metadata_props[i]->key)))
            root->n_metadata_keys++;
    root->opsets = mcp_calloc(mp->n_opset_import ? mp->n_opset_import : 1, sizeof(mcp_opset));
    if (!root->opsets || !root->producer_name) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; st == MCP_STATUS_OK && i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *op = mp->opset_import[i];
        const char *d = op->domain && strcmp(op->domain, "ai.onnx") != 0 ? op->domain : "";
        root->opsets[i].domain = mcp_strdup(d);
        root->opsets[i].version = op->has_version ? op->version : 0;
        root->n_opsets++;
    }
    if (st == MCP_STATUS_OK && mp->n_opset_import == 0)
        st = mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "ONNX model has no opset_import");
    if (st == MCP_STATUS_OK) {
        mcp_graph *g = NULL;
        st = import_graph(mp->graph, root, &ic, &g);
        if (g) {
            /* Adopt g's contents into root (root only carried model data). */
            g->parent = NULL;
            g->opsets = root->opsets;
            g->n_opsets = root->n_opsets;
            g->ir_version = root->ir_version;
            g->producer_name = root->producer_name;
            g->metadata_keys = root->metadata_keys;
            g->n_metadata_keys = root->n_metadata_keys;
            g->external_data = read_ext;
            root->opsets = NULL;
            root->n_opsets = 0;
            root->producer_name = NULL;
            root->metadata_keys = NULL;
            root->n_metadata_keys = 0;
            /* Nested graphs point at g already only if they were created
             * with g as parent, which they were. */
        }
        mcp_graph_free(root);
        root = g;
    }
    fn_table_free(&fns);
    onnx__model_proto__free_unpacked(mp, &pb_alloc);
    if (st != MCP_STATUS_OK) {
        mcp_graph_free(root);
        return st;
    }
    *out = root;
    return MCP_STATUS_OK;
}

void mcp_graph_free(mcp_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        mcp_node *n = &g->nodes[i];
        mcp_free(n->name);
        mcp_free(n->op_type);
        mcp_free(n->domain);
        mcp_free(n->inputs);
        mcp_free(n->outputs);
        for (int a = 0; a < n->n_attrs; a++) mcp_attr_release(&n->attrs[a]);
        mcp_free(n->attrs);
    }
    mcp_free(g->nodes);
    for (int i = 0; i < g->n_values; i++) {
        mcp_free(g->values[i].name);
        type_release(&g->values[i].type);
    }
    mcp_free(g->values);
    mcp_free(g->name_index);
    for (int i = 0; i < g->n_initializers; i++) mcp_tensor_release(&g->initializers[i]);
    mcp_free(g->initializers);
    mcp_free(g->initializer_values);
    mcp_free(g->free_start);
    mcp_free(g->free_vals);
    mcp_free(g->inputs);
    mcp_free(g->outputs);
    for (int i = 0; i < g->n_opsets; i++) mcp_free(g->opsets[i].domain);
    mcp_free(g->opsets);
    mcp_free(g->producer_name);
    for (int i = 0; i < g->n_metadata_keys; i++) mcp_free(g->metadata_keys[i]);
    mcp_free(g->metadata_keys);
    mcp_free(g->name);
    mcp_free(g);
}

/* ---- standalone values (test data, sequence and optional inputs) ---- */

mcp_status mcp_onnx_decode_tensor(const uint8_t *buf, size_t len, mcp_value *out, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    if (!tp) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "not a valid TensorProto");
    import_ctx ic = {NULL, err, 0, false, NULL, false, NULL, NULL, NULL, 0, NULL, NULL};
    out->kind = MCP_VALUE_TENSOR;
    mcp_status st = tensor_from_proto(tp, &ic, &out->tensor);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return st;
}

static mcp_status sequence_from_proto(const Onnx__SequenceProto *sp, mcp_value *out, mcp_err *err)
{
    import_ctx ic = {NULL, err, 0, false, NULL, false, NULL, NULL, NULL, 0, NULL, NULL};
    out->kind = MCP_VALUE_SEQUENCE;
    if (sp->n_sequence_values || sp->n_optional_values)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "sequences of sequences or optionals are not supported");
    out->elem_dtype = MCP_DTYPE_UNDEFINED;
    for (size_t i = 0; i < sp->n_tensor_values; i++) {
        mcp_tensor t;
        mcp_status st = tensor_from_proto(sp->tensor_values[i], &ic, &t);
        if (st != MCP_STATUS_OK) return st;
        out->elem_dtype = t.dtype;
        st = mcp_value_seq_push_move(out, &t, err);
        if (st != MCP_STATUS_OK) { mcp_tensor_release(&t); return st; }
    }
    return MCP_STATUS_OK;
}

mcp_status mcp_onnx_decode_sequence(const uint8_t *buf, size_t len, mcp_value *out, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    Onnx__SequenceProto *sp = onnx__sequence_proto__unpack(NULL, len, buf);
    if (!sp) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "not a valid SequenceProto");
    mcp_status st = sequence_from_proto(sp, out, err);
    onnx__sequence_proto__free_unpacked(sp, NULL);
    if (st != MCP_STATUS_OK) mcp_value_clear(out);
    return st;
}

mcp_status mcp_onnx_decode_optional(const uint8_t *buf, size_t len, mcp_value *out, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    Onnx__OptionalProto *op = onnx__optional_proto__unpack(NULL, len, buf);
    if (!op) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "not a valid OptionalProto");
    import_ctx ic = {NULL, err, 0, false, NULL, false, NULL, NULL, NULL, 0, NULL, NULL};
    mcp_status st = MCP_STATUS_OK;
    if (op->tensor_value) {
        out->kind = MCP_VALUE_TENSOR;
        st = tensor_from_proto(op->tensor_value, &ic, &out->tensor);
    } else if (op->sequence_value) {
        st = sequence_from_proto(op->sequence_value, out, err);
    } else {
        out->kind = MCP_VALUE_NONE;
        /* elem_type 1 = tensor, 3 = sequence (OptionalProto.DataType). */
        out->elem_is_sequence = op->has_elem_type && op->elem_type == 3;
    }
    onnx__optional_proto__free_unpacked(op, NULL);
    if (st != MCP_STATUS_OK) mcp_value_clear(out);
    return st;
}

/* ---- attribute lookup ---- */

const mcp_attr *mcp_node_attr(const mcp_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t mcp_node_attr_int(const mcp_node *n, const char *name, int64_t dflt)
{
    const mcp_attr *a = mcp_node_attr(n, name);
    return a && a->type == MCP_ATTR_INT ? a->i : dflt;
}

float mcp_node_attr_float(const mcp_node *n, const char *name, float dflt)
{
    const mcp_attr *a = mcp_node_attr(n, name);
    if (!a) return dflt;
    if (a->type == MCP_ATTR_FLOAT) return a->f;
    if (a->type == MCP_ATTR_INT) return (float)a->i;
    return dflt;
}

const char *mcp_node_attr_string(const mcp_node *n, const char *name, const char *dflt)
{
    const mcp_attr *a = mcp_node_attr(n, name);
    return a && a->type == MCP_ATTR_STRING ? a->s : dflt;
}

const int64_t *mcp_node_attr_ints(const mcp_node *n, const char *name, int64_t *count)
{
    const mcp_attr *a = mcp_node_attr(n, name);
    if (!a || a->type != MCP_ATTR_INTS) { *count = 0; return NULL; }
    *count = a->count;
    return a->ints;
}

const float *mcp_node_attr_floats(const mcp_node *n, const char *name, int64_t *count)
{
    const mcp_attr *a = mcp_node_attr(n, name);
    if (!a || a->type != MCP_ATTR_FLOATS) { *count = 0; return NULL; }
    *count = a->count;
    return a->floats;
}
