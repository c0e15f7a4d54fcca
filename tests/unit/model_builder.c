/* ONNX model builder for the unit tests (see model_builder.h). */
#include "model_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mb_model {
    Onnx__ModelProto model;
    Onnx__GraphProto *graph;
    /* Every block the builder allocated, freed together. */
    void **blocks;
    size_t n_blocks, cap_blocks;
};

static void *must(void *p)
{
    if (!p) {
        fprintf(stderr, "model_builder: out of memory\n");
        abort();
    }
    return p;
}

/* A zeroed block owned by the model. */
static void *mb_alloc(mb_model *m, size_t size)
{
    if (m->n_blocks == m->cap_blocks) {
        size_t cap = m->cap_blocks ? m->cap_blocks * 2 : 64;
        m->blocks = must(realloc(m->blocks, cap * sizeof *m->blocks));
        m->cap_blocks = cap;
    }
    void *p = must(calloc(1, size ? size : 1));
    m->blocks[m->n_blocks++] = p;
    return p;
}

static char *mb_strdup(mb_model *m, const char *s)
{
    size_t n = strlen(s);
    char *d = mb_alloc(m, n + 1);
    memcpy(d, s, n + 1);
    return d;
}

/* Appends one element to a protobuf-c repeated field (count + array). The
 * old array stays owned by the model until mb_model_free. A macro so the
 * array keeps its own pointer type. */
#define PUSH(m, count, arr, item)                                             \
    do {                                                                      \
        void *grown_ = mb_alloc((m), ((count) + 1) * sizeof *(arr));          \
        if (count) memcpy(grown_, (arr), (count) * sizeof *(arr));            \
        (arr) = grown_;                                                       \
        (arr)[(count)++] = (item);                                            \
    } while (0)

mb_model *mb_model_new(int64_t opset)
{
    mb_model *m = must(calloc(1, sizeof *m));
    Onnx__ModelProto init = ONNX__MODEL_PROTO__INIT;
    m->model = init;
    m->model.has_ir_version = 1;
    m->model.ir_version = 8;
    m->model.producer_name = mb_strdup(m, "mcp-unit-tests");
    m->graph = mb_new_graph(m, "main");
    m->model.graph = m->graph;
    if (opset > 0) mb_add_opset(m, "", opset);
    return m;
}

void mb_model_free(mb_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_blocks; i++) free(m->blocks[i]);
    free(m->blocks);
    free(m);
}

Onnx__ModelProto *mb_model_proto(mb_model *m) { return &m->model; }
Onnx__GraphProto *mb_main_graph(mb_model *m) { return m->graph; }

void mb_add_opset(mb_model *m, const char *domain, int64_t version)
{
    Onnx__OperatorSetIdProto *op = mb_alloc(m, sizeof *op);
    Onnx__OperatorSetIdProto init = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    *op = init;
    op->domain = mb_strdup(m, domain ? domain : "");
    op->has_version = 1;
    op->version = version;
    PUSH(m, m->model.n_opset_import, m->model.opset_import, op);
}

Onnx__GraphProto *mb_new_graph(mb_model *m, const char *name)
{
    Onnx__GraphProto *g = mb_alloc(m, sizeof *g);
    Onnx__GraphProto init = ONNX__GRAPH_PROTO__INIT;
    *g = init;
    g->name = mb_strdup(m, name ? name : "");
    return g;
}

static Onnx__ValueInfoProto *value_info(mb_model *m, const char *name, mcp_dtype dtype, int rank,
                                        const int64_t *dims, const char *const *dim_params)
{
    Onnx__ValueInfoProto *vi = mb_alloc(m, sizeof *vi);
    Onnx__ValueInfoProto vinit = ONNX__VALUE_INFO_PROTO__INIT;
    *vi = vinit;
    vi->name = mb_strdup(m, name);
    if (dtype == MCP_DTYPE_UNDEFINED) return vi;

    Onnx__TypeProto *tp = mb_alloc(m, sizeof *tp);
    Onnx__TypeProto tinit = ONNX__TYPE_PROTO__INIT;
    *tp = tinit;
    Onnx__TypeProto__Tensor *tt = mb_alloc(m, sizeof *tt);
    Onnx__TypeProto__Tensor ttinit = ONNX__TYPE_PROTO__TENSOR__INIT;
    *tt = ttinit;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)dtype;
    if (rank >= 0) {
        Onnx__TensorShapeProto *sp = mb_alloc(m, sizeof *sp);
        Onnx__TensorShapeProto sinit = ONNX__TENSOR_SHAPE_PROTO__INIT;
        *sp = sinit;
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *d = mb_alloc(m, sizeof *d);
            Onnx__TensorShapeProto__Dimension dinit = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
            *d = dinit;
            if (dims[i] >= 0) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            } else if (dim_params && dim_params[i]) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = mb_strdup(m, dim_params[i]);
            }
            PUSH(m, sp->n_dim, sp->dim, d);
        }
        tt->shape = sp;
    }
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    return vi;
}

Onnx__ValueInfoProto *mb_add_input(mb_model *m, Onnx__GraphProto *g, const char *name,
                                   mcp_dtype dtype, int rank, const int64_t *dims,
                                   const char *const *dim_params)
{
    if (!g) g = m->graph;
    Onnx__ValueInfoProto *vi = value_info(m, name, dtype, rank, dims, dim_params);
    PUSH(m, g->n_input, g->input, vi);
    return vi;
}

Onnx__ValueInfoProto *mb_add_output(mb_model *m, Onnx__GraphProto *g, const char *name,
                                    mcp_dtype dtype, int rank, const int64_t *dims,
                                    const char *const *dim_params)
{
    if (!g) g = m->graph;
    Onnx__ValueInfoProto *vi = value_info(m, name, dtype, rank, dims, dim_params);
    PUSH(m, g->n_output, g->output, vi);
    return vi;
}

/* Splits "a,b,,c" into names (empty pieces kept). */
static void split_names(mb_model *m, const char *list, size_t *count, char ***out)
{
    *count = 0;
    *out = NULL;
    if (!list || !*list) return;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char *s = mb_alloc(m, n + 1);
        memcpy(s, p, n);
        PUSH(m, *count, *out, s);
        if (!comma) break;
        p = comma + 1;
    }
}

Onnx__NodeProto *mb_add_node(mb_model *m, Onnx__GraphProto *g, const char *op_type,
                             const char *name, const char *inputs, const char *outputs)
{
    if (!g) g = m->graph;
    Onnx__NodeProto *n = mb_alloc(m, sizeof *n);
    Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;
    *n = init;
    n->op_type = mb_strdup(m, op_type);
    if (name) n->name = mb_strdup(m, name);
    split_names(m, inputs, &n->n_input, &n->input);
    split_names(m, outputs, &n->n_output, &n->output);
    PUSH(m, g->n_node, g->node, n);
    return n;
}

void mb_node_set_domain(mb_model *m, Onnx__NodeProto *n, const char *domain)
{
    n->domain = mb_strdup(m, domain);
}

static Onnx__AttributeProto *new_attr(mb_model *m, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = mb_alloc(m, sizeof *a);
    Onnx__AttributeProto init = ONNX__ATTRIBUTE_PROTO__INIT;
    *a = init;
    a->name = mb_strdup(m, name);
    a->has_type = 1;
    a->type = type;
    PUSH(m, n->n_attribute, n->attribute, a);
    return a;
}

void mb_attr_int(mb_model *m, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void mb_attr_float(mb_model *m, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

void mb_attr_ints(mb_model *m, Onnx__NodeProto *n, const char *name, const int64_t *v,
                  size_t count)
{
    Onnx__AttributeProto *a = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = count;
    a->ints = mb_alloc(m, count * sizeof(int64_t));
    if (count) memcpy(a->ints, v, count * sizeof(int64_t));
}

void mb_attr_string(mb_model *m, Onnx__NodeProto *n, const char *name, const char *s)
{
    Onnx__AttributeProto *a = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(s);
    a->s.data = (uint8_t *)mb_strdup(m, s);
}

void mb_attr_graph(mb_model *m, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *body)
{
    Onnx__AttributeProto *a = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    a->g = body;
}

void mb_attr_tensor(mb_model *m, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t)
{
    Onnx__AttributeProto *a = new_attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t;
}

Onnx__TensorProto *mb_new_tensor(mb_model *m, const char *name, mcp_dtype dtype, int rank,
                                 const int64_t *dims, const void *data, size_t nbytes)
{
    Onnx__TensorProto *t = mb_alloc(m, sizeof *t);
    Onnx__TensorProto init = ONNX__TENSOR_PROTO__INIT;
    *t = init;
    if (name) t->name = mb_strdup(m, name);
    t->has_data_type = 1;
    t->data_type = (int32_t)dtype;
    t->n_dims = rank > 0 ? (size_t)rank : 0;
    t->dims = mb_alloc(m, (t->n_dims ? t->n_dims : 1) * sizeof(int64_t));
    for (size_t i = 0; i < t->n_dims; i++) t->dims[i] = dims[i];
    t->has_raw_data = 1;
    t->raw_data.len = nbytes;
    t->raw_data.data = mb_alloc(m, nbytes);
    if (nbytes) memcpy(t->raw_data.data, data, nbytes);
    return t;
}

Onnx__TensorProto *mb_add_initializer(mb_model *m, Onnx__GraphProto *g, const char *name,
                                      mcp_dtype dtype, int rank, const int64_t *dims,
                                      const void *data, size_t nbytes)
{
    if (!g) g = m->graph;
    Onnx__TensorProto *t = mb_new_tensor(m, name, dtype, rank, dims, data, nbytes);
    PUSH(m, g->n_initializer, g->initializer, t);
    return t;
}

void mb_tensor_add_external_key(mb_model *m, Onnx__TensorProto *t, const char *key,
                                const char *value)
{
    Onnx__StringStringEntryProto *e = mb_alloc(m, sizeof *e);
    Onnx__StringStringEntryProto init = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    *e = init;
    e->key = mb_strdup(m, key);
    e->value = mb_strdup(m, value);
    PUSH(m, t->n_external_data, t->external_data, e);
}

void mb_tensor_set_external(mb_model *m, Onnx__TensorProto *t, const char *location,
                            long long offset, long long length)
{
    char num[32];
    t->has_raw_data = 0;
    t->raw_data.len = 0;
    t->raw_data.data = NULL;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (location) mb_tensor_add_external_key(m, t, "location", location);
    if (offset >= 0) {
        snprintf(num, sizeof num, "%lld", offset);
        mb_tensor_add_external_key(m, t, "offset", num);
    }
    if (length >= 0) {
        snprintf(num, sizeof num, "%lld", length);
        mb_tensor_add_external_key(m, t, "length", num);
    }
}

uint8_t *mb_pack(mb_model *m, size_t *len)
{
    size_t n = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *buf = must(malloc(n ? n : 1));
    size_t written = onnx__model_proto__pack(&m->model, buf);
    if (written != n) {
        fprintf(stderr, "model_builder: packed %zu bytes, expected %zu\n", written, n);
        abort();
    }
    *len = n;
    return buf;
}

int mb_write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = len ? fwrite(data, 1, len, f) : 0;
    int rc = fclose(f);
    return (w == len && rc == 0) ? 0 : -1;
}

int mb_write_file(mb_model *m, const char *path)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    int rc = mb_write_bytes(path, buf, len);
    free(buf);
    return rc;
}

/* ---- the shared example model ---- */

const float mb_mlp_w[6] = {1.0f, -2.0f, 0.5f, 3.0f, -1.0f, 0.25f};
const float mb_mlp_b[2] = {0.5f, -1.0f};

mb_model *mb_example_mlp(void)
{
    mb_model *m = mb_model_new(13);
    const int64_t xdims[] = {-1, 3}, ydims[] = {-1, 2}, wdims[] = {3, 2}, bdims[] = {2};
    const char *const params[] = {"batch", NULL};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xdims, params);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 2, wdims, mb_mlp_w, sizeof mb_mlp_w);
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 1, bdims, mb_mlp_b, sizeof mb_mlp_b);
    mb_add_node(m, NULL, "MatMul", "matmul", "X,W", "XW");
    mb_add_node(m, NULL, "Add", "add", "XW,B", "Y");
    mb_add_node(m, NULL, "Relu", "relu", "Y", "Z");
    mb_add_output(m, NULL, "Z", MCP_DTYPE_FLOAT, 2, ydims, params);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, ydims, params);
    return m;
}

void mb_mlp_reference(const float *x, int64_t batch, float *y, float *z)
{
    for (int64_t r = 0; r < batch; r++) {
        for (int c = 0; c < 2; c++) {
            double acc = mb_mlp_b[c];
            for (int k = 0; k < 3; k++) acc += (double)x[r * 3 + k] * mb_mlp_w[k * 2 + c];
            y[r * 2 + c] = (float)acc;
            z[r * 2 + c] = acc > 0 ? (float)acc : 0.0f;
        }
    }
}

void mb_fill_pattern(float *p, int n, int seed, float scale)
{
    for (int i = 0; i < n; i++) p[i] = (float)((i * 37 + seed * 11) % 23 - 11) * scale;
}
