/*
 * Graph passes (mcp_graph_optimize, src/graph/passes.c): each pass on a
 * small graph built with the model builder. Every case checks the nodes
 * left after the passes, then runs the model twice on the same inputs --
 * unoptimized through the public session API, optimized through the
 * executor -- and checks that the outputs agree.
 */
#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "graph/graph.h"
#include "model_builder.h"
#include "test_util.h"

/* ---- harness ---- */

static mcp_status resolve_all(mcp_graph *g, mcp_err *err)
{
    for (int i = 0; i < g->n_nodes; i++) {
        mcp_node *n = &g->nodes[i];
        for (int a = 0; a < n->n_attrs; a++) {
            mcp_status st = MCP_STATUS_OK;
            if (n->attrs[a].g) st = resolve_all(n->attrs[a].g, err);
            for (int64_t k = 0; st == MCP_STATUS_OK && n->attrs[a].graphs && k < n->attrs[a].count; k++)
                st = resolve_all(n->attrs[a].graphs[k], err);
            if (st != MCP_STATUS_OK) return st;
        }
        mcp_status st = mcp_ops_resolve(n, g, "ref", &n->kernel, err);
        if (st == MCP_STATUS_OK && n->kernel->prepare) st = n->kernel->prepare(n, g, &n->kernel_state, err);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

static void release_all(mcp_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        mcp_node *n = &g->nodes[i];
        if (n->kernel && n->kernel->release && n->kernel_state) n->kernel->release(n->kernel_state);
        n->kernel_state = NULL;
        for (int a = 0; a < n->n_attrs; a++) {
            if (n->attrs[a].g) release_all(n->attrs[a].g);
            for (int64_t k = 0; n->attrs[a].graphs && k < n->attrs[a].count; k++) release_all(n->attrs[a].graphs[k]);
        }
    }
}

/* Imports and optimizes m. Returns the graph (caller frees) or NULL. */
static mcp_graph *optimized(mb_model *m)
{
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_graph *g = NULL;
    mcp_status st = mcp_onnx_import(buf, len, NULL, &g, &err);
    free(buf);
    if (st == MCP_STATUS_OK) st = mcp_graph_optimize(g, &err);
    if (st != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, __LINE__, "import/optimize: %s: %s", mcp_status_str(st), msg);
        mcp_graph_free(g);
        return NULL;
    }
    return g;
}

/* Op types of g's nodes joined by commas, e.g. "Relu,Identity". */
static const char *ops_of(const mcp_graph *g, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->n_nodes && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? "," : "", g->nodes[i].op_type);
    return buf;
}

#define CHECK_OPS(g, expect)                                                  \
    do {                                                                      \
        char ob_[256];                                                        \
        TU_CHECK_STR(ops_of((g), ob_, sizeof ob_), (expect));                 \
    } while (0)

static const char *value_name(const mcp_graph *g, int v)
{
    return v >= 0 && v < g->n_values ? g->values[v].name : "<none>";
}

/*
 * Runs m unoptimized (public API) and optimized (mcp_graph_optimize, shape
 * inference, kernels, executor) on the float inputs given for the graph
 * inputs in order, and checks every output agrees within rtol 1e-5.
 */
static void check_same_numbers(int line, mb_model *m, int n_in, const int64_t *const *dims, const int *ranks,
                               const float *const *data)
{
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(buf, len, NULL, NULL, &s, msg, sizeof msg);
    mcp_graph *g = NULL;
    if (st == MCP_STATUS_OK) st = mcp_onnx_import(buf, len, NULL, &g, &err);
    free(buf);
    if (st == MCP_STATUS_OK) st = mcp_graph_optimize(g, &err);
    if (st == MCP_STATUS_OK) st = mcp_graph_infer_shapes(g, &err);
    if (st == MCP_STATUS_OK) st = resolve_all(g, &err);
    if (st == MCP_STATUS_OK) st = mcp_graph_plan_lifetimes(g, &err);
    mcp_value *ins[8] = {0}, *base[8] = {0}, *opt[8] = {0};
    int n_out = g ? g->n_outputs : 0;
    for (int i = 0; st == MCP_STATUS_OK && i < n_in; i++) {
        ins[i] = mcp_value_create_tensor(MCP_DTYPE_FLOAT, ranks[i], dims[i], data[i], msg, sizeof msg);
        if (!ins[i]) st = MCP_STATUS_INVALID_ARGUMENT;
    }
    if (st == MCP_STATUS_OK) {
        const char *names[8];
        for (int i = 0; i < n_in; i++) names[i] = g->values[g->inputs[i]].name;
        st = mcp_session_run(s, n_in, names, ins, 0, NULL, base, msg, sizeof msg);
    }
    if (st == MCP_STATUS_OK) {
        mcp_session opt_s = {0};
        opt_s.graph = g;
        opt_s.threads = 1;
        snprintf(opt_s.backend, sizeof opt_s.backend, "ref");
        for (int i = 0; i < n_out; i++) opt[i] = mcp_value_new();
        st = mcp__exec_graph(&opt_s, g, NULL, ins, opt, &err);
    }
    tu_checks++;
    if (st != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, line, "run failed: %s: %s", mcp_status_str(st), msg);
    } else {
        for (int o = 0; o < n_out; o++) {
            const mcp_tensor *a = &base[o]->tensor, *b = &opt[o]->tensor;
            tu_checks++;
            if (a->dtype != b->dtype || a->rank != b->rank || mcp_tensor_numel(a) != mcp_tensor_numel(b)) {
                TU_FAIL_AT(__FILE__, line, "output %d: dtype or shape differs", o);
                continue;
            }
            for (int64_t k = 0; k < mcp_tensor_numel(a); k++) {
                double x = mcp_tensor_get_f64(a, k), y = mcp_tensor_get_f64(b, k);
                if (fabs(x - y) > 1e-5 * fabs(x) + 1e-6) {
                    TU_FAIL_AT(__FILE__, line, "output %d element %lld: %.9g vs %.9g", o, (long long)k, x, y);
                    break;
                }
            }
        }
    }
    for (int i = 0; i < 8; i++) {
        mcp_value_destroy(ins[i]);
        mcp_value_destroy(base[i]);
        mcp_value_destroy(opt[i]);
    }
    if (g) {
        release_all(g);
        mcp_graph_free(g);
    }
    mcp_session_destroy(s);
}

/* Deterministic values in [-2, 2). */
static void fill(float *x, int64_t n, uint64_t seed)
{
    uint64_t st = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int64_t i = 0; i < n; i++) x[i] = (float)((double)(tu_rand(&st) >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

/* ---- pass 1: Identity / Dropout ---- */

static void test_identity_dropout(void)
{
    mb_model *m = mb_model_new(13);
    int64_t xd[2] = {2, 3};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mb_add_node(m, NULL, "Identity", "id0", "X", "A");
    mb_add_node(m, NULL, "Relu", "relu", "A", "R");
    mb_add_node(m, NULL, "Dropout", "drop", "R", "D,Mask");
    mb_add_node(m, NULL, "Identity", "id1", "D", "Y");
    /* A graph output fed straight by an Identity of an input. */
    mb_add_node(m, NULL, "Identity", "id2", "X", "Z");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mb_add_output(m, NULL, "Z", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        /* id1 and id2 produce graph outputs, so they stay with their names. */
        CHECK_OPS(g, "Relu,Identity,Identity");
        TU_CHECK_STR(value_name(g, g->nodes[0].inputs[0]), "X");
        TU_CHECK_STR(value_name(g, g->nodes[1].inputs[0]), "R");
        TU_CHECK_STR(value_name(g, g->nodes[1].outputs[0]), "Y");
        TU_CHECK_STR(value_name(g, g->outputs[0]), "Y");
        TU_CHECK_STR(value_name(g, g->outputs[1]), "Z");
        TU_CHECK_INT(g->values[g->outputs[0]].producer, 1);
        mcp_graph_free(g);
    }
    float x[6] = {-1, 2, -3, 4, 0.5f, -0.25f};
    const int64_t *dims[1] = {xd};
    int ranks[1] = {2};
    const float *data[1] = {x};
    check_same_numbers(__LINE__, m, 1, dims, ranks, data);
    mb_model_free(m);
}

/* Dropout with a training_mode input or a used mask stays. */
static void test_dropout_kept(void)
{
    mb_model *m = mb_model_new(13);
    int64_t xd[1] = {4};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, xd, NULL);
    mb_add_node(m, NULL, "Dropout", "drop", "X", "D,Mask");
    mb_attr_int(m, mb_add_node(m, NULL, "Cast", "cast", "Mask", "MF"), "to", MCP_DTYPE_FLOAT);
    mb_add_node(m, NULL, "Add", "add", "D,D", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, xd, NULL);
    mb_add_output(m, NULL, "MF", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "Dropout,Cast,Add");
        mcp_graph_free(g);
    }
    mb_model_free(m);
}

/* ---- pass 2: BatchNormalization into Conv ---- */

static mb_model *conv_bn_model(bool conv_bias, bool conv_out_is_output)
{
    mb_model *m = mb_model_new(13);
    static float w[3 * 2 * 3 * 3], b[3], sc[3], bi[3], mean[3], var[3];
    fill(w, 54, 1);
    fill(b, 3, 2);
    fill(sc, 3, 3);
    fill(bi, 3, 4);
    fill(mean, 3, 5);
    fill(var, 3, 6);
    for (int i = 0; i < 3; i++) var[i] = var[i] * var[i] + 0.1f;
    int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 2, 3, 3}, vd[1] = {3}, yd[4] = {1, 3, 5, 5};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 4, wd, w, sizeof w);
    if (conv_bias) mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 1, vd, b, sizeof b);
    mb_add_initializer(m, NULL, "scale", MCP_DTYPE_FLOAT, 1, vd, sc, sizeof sc);
    mb_add_initializer(m, NULL, "bias", MCP_DTYPE_FLOAT, 1, vd, bi, sizeof bi);
    mb_add_initializer(m, NULL, "mean", MCP_DTYPE_FLOAT, 1, vd, mean, sizeof mean);
    mb_add_initializer(m, NULL, "var", MCP_DTYPE_FLOAT, 1, vd, var, sizeof var);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Conv", "conv", conv_bias ? "X,W,B" : "X,W", "C");
    int64_t pads[4] = {1, 1, 1, 1};
    mb_attr_ints(m, n, "pads", pads, 4);
    n = mb_add_node(m, NULL, "BatchNormalization", "bn", "C,scale,bias,mean,var", "N");
    mb_attr_float(m, n, "epsilon", 1e-3f);
    mb_add_node(m, NULL, "Relu", "relu", "N", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, yd, NULL);
    if (conv_out_is_output) mb_add_output(m, NULL, "C", MCP_DTYPE_FLOAT, 4, yd, NULL);
    return m;
}

static void check_conv_bn(bool conv_bias)
{
    mb_model *m = conv_bn_model(conv_bias, false);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "Conv,Relu");
        const mcp_node *c = &g->nodes[0];
        TU_CHECK_INT(c->n_inputs, 3);
        if (c->n_inputs == 3) {
            TU_CHECK(g->values[c->inputs[1]].initializer >= 0);
            TU_CHECK(g->values[c->inputs[2]].initializer >= 0);
        }
        TU_CHECK_STR(value_name(g, c->outputs[0]), "N");
        TU_CHECK_INT(g->values[c->outputs[0]].producer, 0);
        /* Only the folded weight and bias remain. */
        TU_CHECK_INT(g->n_initializers, 2);
        mcp_graph_free(g);
    }
    float x[50];
    fill(x, 50, 7);
    int64_t xd[4] = {1, 2, 5, 5};
    const int64_t *dims[1] = {xd};
    int ranks[1] = {4};
    const float *data[1] = {x};
    check_same_numbers(__LINE__, m, 1, dims, ranks, data);
    mb_model_free(m);
}

static void test_conv_bn_fold(void)
{
    check_conv_bn(true);
    check_conv_bn(false);
}

/* A Conv output that is also a graph output is not folded. */
static void test_conv_bn_kept(void)
{
    mb_model *m = conv_bn_model(true, true);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "Conv,BatchNormalization,Relu");
        TU_CHECK_INT(g->n_initializers, 6);
        mcp_graph_free(g);
    }
    mb_model_free(m);
}

/* ---- pass 3: MatMul + Add -> Gemm ---- */

static void test_matmul_add_gemm(void)
{
    mb_model *m = mb_example_mlp();
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "Gemm,Relu");
        const mcp_node *n = &g->nodes[0];
        TU_CHECK_INT(n->n_inputs, 3);
        if (n->n_inputs == 3) {
            TU_CHECK_STR(value_name(g, n->inputs[0]), "X");
            TU_CHECK_STR(value_name(g, n->inputs[1]), "W");
            TU_CHECK_STR(value_name(g, n->inputs[2]), "B");
        }
        TU_CHECK_STR(value_name(g, n->outputs[0]), "Y");
        TU_CHECK_STR(value_name(g, g->nodes[1].inputs[0]), "Y");
        mcp_graph_free(g);
    }
    float x[12] = {1, 2, 3, -1, 0, 1, 0.5f, -0.5f, 2, 4, -3, 0};
    int64_t xd[2] = {4, 3};
    const int64_t *dims[1] = {xd};
    int ranks[1] = {2};
    const float *data[1] = {x};
    check_same_numbers(__LINE__, m, 1, dims, ranks, data);
    mb_model_free(m);
}

/* A of rank 3 (MatMul broadcasts, Gemm does not) and a 2-D bias stay. */
static void test_matmul_add_kept(void)
{
    static const float w[6] = {1, 2, 3, 4, 5, 6}, b[2] = {1, -1};
    int64_t xd[3] = {2, 2, 3}, wd[2] = {3, 2}, bd[1] = {2}, b2d[2] = {1, 2}, yd[3] = {2, 2, 2};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 2, wd, w, sizeof w);
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 1, bd, b, sizeof b);
    mb_add_node(m, NULL, "MatMul", "mm", "X,W", "M");
    mb_add_node(m, NULL, "Add", "add", "M,B", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 3, yd, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "MatMul,Add");
        mcp_graph_free(g);
    }
    mb_model_free(m);

    int64_t x2[2] = {2, 3};
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, x2, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 2, wd, w, sizeof w);
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 2, b2d, b, sizeof b);
    mb_add_node(m, NULL, "MatMul", "mm", "X,W", "M");
    mb_add_node(m, NULL, "Add", "add", "M,B", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, x2, NULL);
    g = optimized(m);
    if (g) {
        CHECK_OPS(g, "MatMul,Add");
        mcp_graph_free(g);
    }
    mb_model_free(m);
}

/* ---- passes 4 and 5: dead nodes, unused initializers ---- */

static void test_dead_nodes(void)
{
    static const float u[2] = {1, 2};
    int64_t xd[2] = {2, 2}, ud[1] = {2};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mb_add_initializer(m, NULL, "U", MCP_DTYPE_FLOAT, 1, ud, u, sizeof u);
    mb_add_initializer(m, NULL, "K", MCP_DTYPE_FLOAT, 1, ud, u, sizeof u);
    mb_add_node(m, NULL, "Add", "dead_add", "X,U", "A");
    mb_add_node(m, NULL, "Neg", "dead_neg", "A", "N");
    mb_add_node(m, NULL, "Sigmoid", "dead_sig", "X", "S");
    mb_add_node(m, NULL, "Mul", "mul", "X,K", "M");
    mb_add_node(m, NULL, "Abs", "abs", "M", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "Mul,Abs");
        TU_CHECK_INT(g->n_initializers, 1);
        if (g->n_initializers == 1) {
            TU_CHECK_STR(value_name(g, g->initializer_values[0]), "K");
            TU_CHECK_INT(g->values[g->initializer_values[0]].initializer, 0);
        }
        TU_CHECK_INT(g->values[mcp_graph_find_value(g, "U")].initializer, -1);
        TU_CHECK_INT(g->values[mcp_graph_find_value(g, "Y")].producer, 1);
        TU_CHECK_INT(g->values[mcp_graph_find_value(g, "A")].producer, -1);
        mcp_graph_free(g);
    }
    float x[4] = {1, -2, 3, -4};
    const int64_t *dims[1] = {xd};
    int ranks[1] = {2};
    const float *data[1] = {x};
    check_same_numbers(__LINE__, m, 1, dims, ranks, data);
    mb_model_free(m);
}

/* A value captured by an If branch counts as used: the Identity feeding it
 * stays, the If stays while its output is used, and an unused If goes. */
static void test_subgraph_capture(void)
{
    int64_t xd[1] = {3};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, xd, NULL);
    mb_add_input(m, NULL, "cond", MCP_DTYPE_BOOL, 0, NULL, NULL);
    mb_add_node(m, NULL, "Identity", "id", "X", "A");
    Onnx__GraphProto *then_g = mb_new_graph(m, "then");
    mb_add_node(m, then_g, "Relu", "t_relu", "A", "t_out");
    mb_add_output(m, then_g, "t_out", MCP_DTYPE_FLOAT, 1, xd, NULL);
    Onnx__GraphProto *else_g = mb_new_graph(m, "else");
    mb_add_node(m, else_g, "Neg", "e_neg", "A", "e_out");
    mb_add_output(m, else_g, "e_out", MCP_DTYPE_FLOAT, 1, xd, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "If", "if", "cond", "Y");
    mb_attr_graph(m, n, "then_branch", then_g);
    mb_attr_graph(m, n, "else_branch", else_g);
    /* A second If whose output nobody reads. */
    Onnx__GraphProto *t2 = mb_new_graph(m, "then2");
    mb_add_node(m, t2, "Relu", "t2_relu", "X", "t2_out");
    mb_add_output(m, t2, "t2_out", MCP_DTYPE_FLOAT, 1, xd, NULL);
    Onnx__GraphProto *e2 = mb_new_graph(m, "else2");
    mb_add_node(m, e2, "Neg", "e2_neg", "X", "e2_out");
    mb_add_output(m, e2, "e2_out", MCP_DTYPE_FLOAT, 1, xd, NULL);
    n = mb_add_node(m, NULL, "If", "if_dead", "cond", "Unused");
    mb_attr_graph(m, n, "then_branch", t2);
    mb_attr_graph(m, n, "else_branch", e2);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, xd, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "Identity,If");
        mcp_graph_free(g);
    }
    mb_model_free(m);
}

int main(void)
{
    TU_RUN(test_identity_dropout);
    TU_RUN(test_dropout_kept);
    TU_RUN(test_conv_bn_fold);
    TU_RUN(test_conv_bn_kept);
    TU_RUN(test_matmul_add_gemm);
    TU_RUN(test_matmul_add_kept);
    TU_RUN(test_dead_nodes);
    TU_RUN(test_subgraph_capture);
    return tu_finish("passes");
}
