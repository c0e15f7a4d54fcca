/*
 * Graph passes (mcp_graph_optimize, src/graph/passes.c), the fused reference
 * kernels (src/ops/ref/fused.c) and constant folding (src/engine/fold.c):
 * each pass on a small graph built with the model builder. Every case checks
 * the nodes left after the passes (negative cases: that a pattern is left
 * alone), and most then run the model as written and optimized on the same
 * inputs and check that the outputs agree (check_same_numbers).
 */
#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/fold.h"
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
        mcp_status st = mcp_ops_resolve(n, g, "ref", &n->kernel, &n->kernel_backend, err);
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

/* The load path of a session, up to the graph: import, shape inference,
 * constant folding when `fold`, the graph passes, shape inference again. */
static mcp_status load_optimized(mb_model *m, bool fold, mcp_graph **out, mcp_err *err)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_graph *g = NULL;
    mcp_status st = mcp_onnx_import(buf, len, NULL, &g, err);
    free(buf);
    if (st == MCP_STATUS_OK) st = mcp_graph_infer_shapes(g, err);
    if (st == MCP_STATUS_OK && fold) st = mcp__fold_constants(g, err);
    if (st == MCP_STATUS_OK) st = mcp_graph_optimize(g, err);
    if (st == MCP_STATUS_OK) st = mcp_graph_infer_shapes(g, err);
    if (st != MCP_STATUS_OK) {
        mcp_graph_free(g);
        g = NULL;
    }
    *out = g;
    return st;
}

/* Imports and optimizes m (constant folding with `fold`). Returns the graph
 * (caller frees) or NULL. */
static mcp_graph *optimized_at(int line, mb_model *m, bool fold)
{
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_graph *g = NULL;
    mcp_status st = load_optimized(m, fold, &g, &err);
    if (st != MCP_STATUS_OK) TU_FAIL_AT(__FILE__, line, "import/optimize: %s: %s", mcp_status_str(st), msg);
    return g;
}
#define optimized(m) optimized_at(__LINE__, (m), false)
#define folded(m) optimized_at(__LINE__, (m), true)

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

/* Optimizes m (without folding), checks the op types of the result and
 * frees the graph and m. */
static void expect_ops_at(int line, mb_model *m, const char *expect)
{
    mcp_graph *g = optimized_at(line, m, false);
    if (g) {
        char ob[256];
        tu_checks++;
        if (strcmp(ops_of(g, ob, sizeof ob), expect) != 0)
            TU_FAIL_AT(__FILE__, line, "ops \"%s\", expected \"%s\"", ob, expect);
        mcp_graph_free(g);
    }
    mb_model_free(m);
}
#define EXPECT_OPS(m, expect) expect_ops_at(__LINE__, (m), (expect))

static const char *value_name(const mcp_graph *g, int v)
{
    return v >= 0 && v < g->n_values ? g->values[v].name : "<none>";
}

/* Compares every output of two runs within atol + rtol * |a|. */
static void compare_outputs(int line, const char *what, mcp_value *const *a_out, mcp_value *const *b_out, int n_out,
                            double rtol, double atol)
{
    for (int o = 0; o < n_out; o++) {
        const mcp_tensor *a = &a_out[o]->tensor, *b = &b_out[o]->tensor;
        tu_checks++;
        if (a->dtype != b->dtype || a->rank != b->rank || mcp_tensor_numel(a) != mcp_tensor_numel(b)) {
            TU_FAIL_AT(__FILE__, line, "%s: output %d: dtype or shape differs", what, o);
            continue;
        }
        for (int64_t k = 0; k < mcp_tensor_numel(a); k++) {
            double x = mcp_tensor_get_f64(a, k), y = mcp_tensor_get_f64(b, k);
            if (!(fabs(x - y) <= rtol * fabs(x) + atol)) {
                TU_FAIL_AT(__FILE__, line, "%s: output %d element %lld: %.9g vs %.9g", what, o, (long long)k, x, y);
                break;
            }
        }
    }
}

/*
 * Runs m on the float inputs given for the graph inputs in order, three
 * ways, and checks the outputs agree:
 *   - as written: a session with no_graph_passes on the reference backend;
 *   - optimized on the reference backend: constant folding, the passes and
 *     shape inference (load_optimized), kernels resolved on "ref", run by
 *     the executor; within rtol 1e-5 (the fused reference kernels round
 *     where the unfused graph does; Gelu and LayerNormalization compute in
 *     double where the written graph rounds each step to float);
 *   - a default session (passes on, every backend), within rtol 1e-4, as
 *     the fast kernels sum in other orders.
 */
static void check_same_numbers(int line, mb_model *m, int n_in, const int64_t *const *dims, const int *ranks,
                               const float *const *data)
{
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_session *base_s = NULL, *auto_s = NULL;
    mcp_session_options o = mcp_session_options_default();
    o.no_graph_passes = 1;
    o.backend = "ref";
    mcp_status st = mcp_session_create_from_memory(buf, len, NULL, &o, &base_s, msg, sizeof msg);
    if (st == MCP_STATUS_OK) st = mcp_session_create_from_memory(buf, len, NULL, NULL, &auto_s, msg, sizeof msg);
    free(buf);
    mcp_graph *g = NULL;
    if (st == MCP_STATUS_OK) st = load_optimized(m, true, &g, &err);
    if (st == MCP_STATUS_OK) st = resolve_all(g, &err);
    if (st == MCP_STATUS_OK) st = mcp_graph_plan_lifetimes(g, &err);
    mcp_value *ins[8] = {0}, *base[8] = {0}, *opt[8] = {0}, *fast[8] = {0};
    int n_out = g ? g->n_outputs : 0;
    for (int i = 0; st == MCP_STATUS_OK && i < n_in; i++) {
        ins[i] = mcp_value_create_tensor(MCP_DTYPE_FLOAT, ranks[i], dims[i], data[i], msg, sizeof msg);
        if (!ins[i]) st = MCP_STATUS_INVALID_ARGUMENT;
    }
    const char *names[8];
    for (int i = 0; st == MCP_STATUS_OK && i < n_in; i++) names[i] = g->values[g->inputs[i]].name;
    if (st == MCP_STATUS_OK) st = mcp_session_run(base_s, n_in, names, ins, 0, NULL, base, msg, sizeof msg);
    /* The default session twice: its first run records sizes, the second
     * follows the memory plan, and that one is compared. */
    if (st == MCP_STATUS_OK) st = mcp_session_run(auto_s, n_in, names, ins, 0, NULL, fast, msg, sizeof msg);
    for (int i = 0; st == MCP_STATUS_OK && i < 8; i++) {
        mcp_value_destroy(fast[i]);
        fast[i] = NULL;
    }
    if (st == MCP_STATUS_OK) st = mcp_session_run(auto_s, n_in, names, ins, 0, NULL, fast, msg, sizeof msg);
    if (st == MCP_STATUS_OK) {
        mcp_session opt_s = {0};
        opt_s.graph = g;
        opt_s.threads = 1;
        snprintf(opt_s.backend, sizeof opt_s.backend, "ref");
        for (int i = 0; i < n_out; i++) opt[i] = mcp_value_new();
        st = mcp__exec_graph(&opt_s, g, ins, opt, &err);
    }
    tu_checks++;
    if (st != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, line, "run failed: %s: %s", mcp_status_str(st), msg);
    } else {
        compare_outputs(line, "optimized (ref)", base, opt, n_out, 1e-5, 1e-6);
        compare_outputs(line, "default session", base, fast, n_out, 1e-4, 1e-5);
    }
    for (int i = 0; i < 8; i++) {
        mcp_value_destroy(ins[i]);
        mcp_value_destroy(base[i]);
        mcp_value_destroy(opt[i]);
        mcp_value_destroy(fast[i]);
    }
    if (g) {
        release_all(g);
        mcp_graph_free(g);
    }
    mcp_session_destroy(base_s);
    mcp_session_destroy(auto_s);
}

/* Deterministic values in [-2, 2). */
static void fill(float *x, int64_t n, uint64_t seed)
{
    uint64_t st = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int64_t i = 0; i < n; i++) x[i] = (float)((double)(tu_rand(&st) >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

/* ---- Identity / Dropout ---- */

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
    EXPECT_OPS(m, "Dropout,Cast,Add");
}

/* ---- BatchNormalization into Conv ---- */

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
        /* BatchNormalization folds into the Conv, then Relu fuses. */
        CHECK_OPS(g, "FusedConv");
        const mcp_node *c = &g->nodes[0];
        TU_CHECK_INT(c->n_inputs, 3);
        if (c->n_inputs == 3) {
            TU_CHECK(g->values[c->inputs[1]].initializer >= 0);
            TU_CHECK(g->values[c->inputs[2]].initializer >= 0);
        }
        TU_CHECK_STR(mcp_node_attr_string(c, "activation", ""), "Relu");
        TU_CHECK_STR(value_name(g, c->outputs[0]), "Y");
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

/* ---- MatMul + Add -> Gemm ---- */

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

/* A of rank 3 (MatMul broadcasts, Gemm does not) becomes FusedMatMul with
 * the bias; a 2-D bias is no bias row and stays an Add. */
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
        CHECK_OPS(g, "FusedMatMul");
        if (g->n_nodes == 1) {
            TU_CHECK_INT(g->nodes[0].n_inputs, 3);
            TU_CHECK(mcp_node_attr(&g->nodes[0], "activation") == NULL);
        }
        mcp_graph_free(g);
    }
    mb_model_free(m);

    int64_t x2[2] = {2, 3}, y2[2] = {2, 2};
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, x2, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 2, wd, w, sizeof w);
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 2, b2d, b, sizeof b);
    mb_add_node(m, NULL, "MatMul", "mm", "X,W", "M");
    mb_add_node(m, NULL, "Add", "add", "M,B", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, y2, NULL);
    EXPECT_OPS(m, "MatMul,Add");
}

/* ---- fusions: shared builders ---- */

/* Adds Conv `name` (pads 1, 3x3, bias) from x [n, cin, 5, 5] to out
 * [n, 3, 5, 5]; its weights are initializers "<name>_W", "<name>_B". */
static void add_conv(mb_model *m, const char *name, const char *x, const char *out, int cin, uint64_t seed)
{
    float w[3 * 3 * 9], b[3];
    fill(w, 3 * cin * 9, seed);
    fill(b, 3, seed + 100);
    int64_t wd[4] = {3, cin, 3, 3}, bd[1] = {3};
    char wn[64], bn[64], ins[256];
    snprintf(wn, sizeof wn, "%s_W", name);
    snprintf(bn, sizeof bn, "%s_B", name);
    mb_add_initializer(m, NULL, wn, MCP_DTYPE_FLOAT, 4, wd, w, (size_t)(3 * cin * 9) * sizeof(float));
    mb_add_initializer(m, NULL, bn, MCP_DTYPE_FLOAT, 1, bd, b, sizeof b);
    snprintf(ins, sizeof ins, "%s,%s,%s", x, wn, bn);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Conv", name, ins, out);
    int64_t pads[4] = {1, 1, 1, 1};
    mb_attr_ints(m, n, "pads", pads, 4);
}

static const int64_t conv_xd[4] = {1, 2, 5, 5}, conv_yd[4] = {1, 3, 5, 5};

/* Runs a model with one input X [1, 2, 5, 5] both ways (check_same_numbers). */
static void check_conv_numbers(int line, mb_model *m)
{
    float x[50];
    fill(x, 50, 11);
    const int64_t *dims[1] = {conv_xd};
    int ranks[1] = {4};
    const float *data[1] = {x};
    check_same_numbers(line, m, 1, dims, ranks, data);
}

/* The node's activation_params as a string, e.g. "0.1,0.5". */
static const char *params_of(const mcp_node *n, char *buf, size_t cap)
{
    int64_t count = 0;
    const float *p = mcp_node_attr_floats(n, "activation_params", &count);
    size_t off = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < count && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%g", i ? "," : "", (double)p[i]);
    return buf;
}

/* ---- Conv -> [Add] -> [activation] => FusedConv ---- */

/* ResNet's block end: Conv -> Add(shortcut, .) -> Relu, where the shortcut
 * Conv comes after the main one. The fused node moves to the Add's slot. */
static void test_conv_add_relu(void)
{
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, conv_xd, NULL);
    add_conv(m, "main", "X", "A", 2, 1);
    add_conv(m, "short", "X", "S", 2, 2);
    mb_add_node(m, NULL, "Add", "add", "S,A", "T");
    mb_add_node(m, NULL, "Relu", "relu", "T", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "Conv,FusedConv");
        const mcp_node *f = &g->nodes[1];
        TU_CHECK_STR(f->domain, MCP_DOMAIN_INTERNAL);
        TU_CHECK_INT(f->opset, 1);
        TU_CHECK_STR(value_name(g, g->nodes[0].outputs[0]), "S");
        TU_CHECK_INT(f->n_inputs, 4);
        if (f->n_inputs == 4) {
            TU_CHECK_STR(value_name(g, f->inputs[0]), "X");
            TU_CHECK_STR(value_name(g, f->inputs[1]), "main_W");
            TU_CHECK_STR(value_name(g, f->inputs[2]), "main_B");
            TU_CHECK_STR(value_name(g, f->inputs[3]), "S");
        }
        TU_CHECK_STR(mcp_node_attr_string(f, "activation", ""), "Relu");
        TU_CHECK(mcp_node_attr(f, "activation_params") == NULL);
        TU_CHECK_INT(mcp_node_attr_ints(f, "pads", &(int64_t){0}) != NULL, 1);
        TU_CHECK_STR(value_name(g, f->outputs[0]), "Y");
        TU_CHECK_INT(g->values[f->outputs[0]].producer, 1);
        /* Shape inference types the fused node's output. */
        const mcp_type *t = &g->values[f->outputs[0]].type;
        TU_CHECK_INT(t->rank, 4);
        if (t->rank == 4) TU_CHECK_INT(t->dims[1], 3);
        mcp_graph_free(g);
    }
    check_conv_numbers(__LINE__, m);
    mb_model_free(m);
}

/* Conv + Add with a graph input of the same shape, the batch symbolic:
 * fused when the names match, not when they differ; a broadcasting Add
 * (a [1, 3, 1, 1] bias) is not a Sum. */
static void check_conv_sum(const char *sum_batch, bool fused)
{
    mb_model *m = mb_model_new(13);
    const char *xp[4] = {"N", NULL, NULL, NULL}, *rp[4] = {sum_batch, NULL, NULL, NULL};
    int64_t xd[4] = {-1, 2, 5, 5}, rd[4] = {-1, 3, 5, 5};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, xp);
    mb_add_input(m, NULL, "R", MCP_DTYPE_FLOAT, 4, rd, rp);
    add_conv(m, "conv", "X", "A", 2, 3);
    mb_add_node(m, NULL, "Add", "add", "A,R", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, rd, xp);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, fused ? "FusedConv" : "Conv,Add");
        if (fused) {
            TU_CHECK_INT(g->nodes[0].n_inputs, 4);
            TU_CHECK(mcp_node_attr(&g->nodes[0], "activation") == NULL);
        }
        mcp_graph_free(g);
    }
    if (fused) {
        float x[50], r[75];
        fill(x, 50, 4);
        fill(r, 75, 5);
        const int64_t *dims[2] = {conv_xd, conv_yd};
        int ranks[2] = {4, 4};
        const float *data[2] = {x, r};
        check_same_numbers(__LINE__, m, 2, dims, ranks, data);
    }
    mb_model_free(m);
}

static void test_conv_sum_shapes(void)
{
    check_conv_sum("N", true);
    check_conv_sum("M", false);

    static const float bias[3] = {1, 2, 3};
    int64_t bd[4] = {1, 3, 1, 1};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, conv_xd, NULL);
    mb_add_initializer(m, NULL, "bias", MCP_DTYPE_FLOAT, 4, bd, bias, sizeof bias);
    add_conv(m, "conv", "X", "A", 2, 3);
    mb_add_node(m, NULL, "Add", "add", "A,bias", "T");
    mb_add_node(m, NULL, "Relu", "relu", "T", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    EXPECT_OPS(m, "Conv,Add,Relu");
}

/* torch's GELU of x into y, its constants initializers "<y>_sqrt2", ... */
static void add_gelu_pattern(mb_model *m, const char *x, const char *y)
{
    static const float sqrt2 = 1.4142135f, one = 1.0f, half = 0.5f;
    char n[5][64], ins[160];
    const char *sfx[5] = {"sqrt2", "one", "half", "d", "e"};
    for (int i = 0; i < 5; i++) snprintf(n[i], sizeof n[i], "%s_%s", y, sfx[i]);
    mb_add_initializer(m, NULL, n[0], MCP_DTYPE_FLOAT, 0, NULL, &sqrt2, sizeof sqrt2);
    mb_add_initializer(m, NULL, n[1], MCP_DTYPE_FLOAT, 0, NULL, &one, sizeof one);
    mb_add_initializer(m, NULL, n[2], MCP_DTYPE_FLOAT, 0, NULL, &half, sizeof half);
    snprintf(ins, sizeof ins, "%s,%s", x, n[0]);
    mb_add_node(m, NULL, "Div", NULL, ins, n[3]);
    mb_add_node(m, NULL, "Erf", NULL, n[3], n[4]);
    char a[72], p[72];
    snprintf(a, sizeof a, "%s_a", y);
    snprintf(p, sizeof p, "%s_p", y);
    snprintf(ins, sizeof ins, "%s,%s", n[4], n[1]);
    mb_add_node(m, NULL, "Add", NULL, ins, a);
    snprintf(ins, sizeof ins, "%s,%s", x, a);
    mb_add_node(m, NULL, "Mul", NULL, ins, p);
    snprintf(ins, sizeof ins, "%s,%s", p, n[2]);
    mb_add_node(m, NULL, "Mul", NULL, ins, y);
}

/* One activation after a Conv: op type, opset, attributes; how the fused
 * node must describe it. */
typedef struct act_case {
    const char *op;
    int opset;
    const char *expect_params;
    const char *expect_act;
} act_case;

static void check_conv_activation(const act_case *ac)
{
    mb_model *m = mb_model_new(ac->opset);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, conv_xd, NULL);
    add_conv(m, "conv", "X", "A", 2, 6);
    Onnx__NodeProto *n = NULL;
    if (strcmp(ac->op, "GeluPattern") == 0) {
        add_gelu_pattern(m, "A", "Y");
    } else if (strcmp(ac->op, "SiluSigFirst") == 0 || strcmp(ac->op, "SiluMulFirst") == 0) {
        mb_add_node(m, NULL, "Sigmoid", "sig", "A", "S");
        mb_add_node(m, NULL, "Mul", "mul", ac->op[4] == 'S' ? "A,S" : "S,A", "Y");
    } else if (strcmp(ac->op, "Clip") == 0 && ac->opset >= 11) {
        static const float lo = 0.0f, hi = 0.75f;
        mb_add_initializer(m, NULL, "lo", MCP_DTYPE_FLOAT, 0, NULL, &lo, sizeof lo);
        mb_add_initializer(m, NULL, "hi", MCP_DTYPE_FLOAT, 0, NULL, &hi, sizeof hi);
        mb_add_node(m, NULL, "Clip", "act", "A,lo,hi", "Y");
    } else if (strcmp(ac->op, "ClipMinOnly") == 0) {
        static const float lo = -0.25f;
        mb_add_initializer(m, NULL, "lo", MCP_DTYPE_FLOAT, 0, NULL, &lo, sizeof lo);
        mb_add_node(m, NULL, "Clip", "act", "A,lo", "Y");
    } else {
        n = mb_add_node(m, NULL, ac->op, "act", "A", "Y");
    }
    if (n && strcmp(ac->op, "LeakyRelu") == 0) mb_attr_float(m, n, "alpha", 0.125f);
    if (n && strcmp(ac->op, "HardSigmoid") == 0) {
        mb_attr_float(m, n, "alpha", 0.25f);
        mb_attr_float(m, n, "beta", 0.375f);
    }
    if (n && strcmp(ac->op, "Clip") == 0) {
        mb_attr_float(m, n, "min", -0.5f);
        mb_attr_float(m, n, "max", 0.5f);
    }
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        char pb[128];
        fprintf(stderr, "  activation %s (opset %d)\n", ac->op, ac->opset);
        CHECK_OPS(g, "FusedConv");
        TU_CHECK_STR(mcp_node_attr_string(&g->nodes[0], "activation", ""), ac->expect_act);
        TU_CHECK_STR(params_of(&g->nodes[0], pb, sizeof pb), ac->expect_params);
        TU_CHECK_INT(g->nodes[0].n_inputs, 3);
        /* Clip's bound initializers are no longer read. */
        TU_CHECK_INT(g->n_initializers, 2);
        mcp_graph_free(g);
    }
    check_conv_numbers(__LINE__, m);
    mb_model_free(m);
}

static void test_conv_activations(void)
{
    static const act_case cases[] = {
        {"Relu", 13, "", "Relu"},
        {"LeakyRelu", 13, "0.125", "LeakyRelu"},
        {"Sigmoid", 13, "", "Sigmoid"},
        {"Tanh", 13, "", "Tanh"},
        {"HardSigmoid", 13, "0.25,0.375", "HardSigmoid"},
        {"Clip", 6, "-0.5,0.5", "Clip"},
        {"Clip", 13, "0,0.75", "Clip"},
        {"ClipMinOnly", 13, "-0.25,inf", "Clip"},
        {"SiluSigFirst", 13, "", "Silu"},
        {"SiluMulFirst", 13, "", "Silu"},
        {"GeluPattern", 13, "", "Gelu"},
        {"Gelu", 20, "", "Gelu"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_conv_activation(&cases[i]);
}

/* Patterns left alone: a second reader of the Conv output, the Conv output
 * a graph output, Clip bounds computed at run time, Silu's Sigmoid output
 * read elsewhere, a double Conv. */
static void test_conv_fusion_blocked(void)
{
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, conv_xd, NULL);
    add_conv(m, "conv", "X", "A", 2, 7);
    mb_add_node(m, NULL, "Relu", "relu", "A", "Y");
    mb_add_node(m, NULL, "Neg", "neg", "A", "Z");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    mb_add_output(m, NULL, "Z", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    EXPECT_OPS(m, "Conv,Relu,Neg");

    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, conv_xd, NULL);
    add_conv(m, "conv", "X", "A", 2, 7);
    mb_add_node(m, NULL, "Relu", "relu", "A", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    mb_add_output(m, NULL, "A", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    EXPECT_OPS(m, "Conv,Relu");

    static const float lo = 0.0f;
    int64_t sd[1] = {1};
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, conv_xd, NULL);
    mb_add_input(m, NULL, "hi", MCP_DTYPE_FLOAT, 0, sd, NULL);
    mb_add_initializer(m, NULL, "lo", MCP_DTYPE_FLOAT, 0, NULL, &lo, sizeof lo);
    add_conv(m, "conv", "X", "A", 2, 7);
    mb_add_node(m, NULL, "Clip", "clip", "A,lo,hi", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    EXPECT_OPS(m, "Conv,Clip");

    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, conv_xd, NULL);
    add_conv(m, "conv", "X", "A", 2, 7);
    mb_add_node(m, NULL, "Sigmoid", "sig", "A", "S");
    mb_add_node(m, NULL, "Mul", "mul", "A,S", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    mb_add_output(m, NULL, "S", MCP_DTYPE_FLOAT, 4, conv_yd, NULL);
    EXPECT_OPS(m, "Conv,Sigmoid,Mul");

    static const double wd64[3 * 2 * 9] = {0};
    int64_t wd[4] = {3, 2, 3, 3};
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_DOUBLE, 4, conv_xd, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_DOUBLE, 4, wd, wd64, sizeof wd64);
    mb_add_node(m, NULL, "Conv", "conv", "X,W", "A");
    mb_add_node(m, NULL, "Relu", "relu", "A", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_DOUBLE, -1, NULL, NULL);
    EXPECT_OPS(m, "Conv,Relu");
}

/* ---- Gemm -> activation => FusedGemm ---- */

static void add_linear(mb_model *m, const char *name, const char *x, const char *out, int k, int n, uint64_t seed)
{
    float w[8 * 8], b[8];
    fill(w, k * n, seed);
    fill(b, n, seed + 50);
    int64_t wd[2] = {k, n}, bd[1] = {n};
    char wn[64], bn[64], mo[64], ins[160];
    snprintf(wn, sizeof wn, "%s_W", name);
    snprintf(bn, sizeof bn, "%s_B", name);
    snprintf(mo, sizeof mo, "%s_mm", name);
    mb_add_initializer(m, NULL, wn, MCP_DTYPE_FLOAT, 2, wd, w, (size_t)(k * n) * sizeof(float));
    mb_add_initializer(m, NULL, bn, MCP_DTYPE_FLOAT, 1, bd, b, (size_t)n * sizeof(float));
    snprintf(ins, sizeof ins, "%s,%s", x, wn);
    mb_add_node(m, NULL, "MatMul", NULL, ins, mo);
    snprintf(ins, sizeof ins, "%s,%s", bn, mo);
    mb_add_node(m, NULL, "Add", NULL, ins, out);
}

/* An MLP (MatMul + Add + activation, twice) becomes a FusedGemm chain. */
static void test_gemm_activation(void)
{
    int64_t xd[2] = {4, 3}, yd[2] = {4, 2};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, NULL);
    add_linear(m, "l1", "X", "H", 3, 5, 21);
    mb_add_node(m, NULL, "Relu", "relu", "H", "R");
    add_linear(m, "l2", "R", "O", 5, 2, 22);
    mb_add_node(m, NULL, "Tanh", "tanh", "O", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, yd, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "FusedGemm,FusedGemm");
        if (g->n_nodes == 2) {
            TU_CHECK_STR(mcp_node_attr_string(&g->nodes[0], "activation", ""), "Relu");
            TU_CHECK_STR(mcp_node_attr_string(&g->nodes[1], "activation", ""), "Tanh");
            TU_CHECK_STR(value_name(g, g->nodes[0].outputs[0]), "R");
            TU_CHECK_STR(value_name(g, g->nodes[1].inputs[0]), "R");
            TU_CHECK_STR(value_name(g, g->nodes[1].inputs[2]), "l2_B");
            const mcp_type *t = &g->values[g->nodes[0].outputs[0]].type;
            TU_CHECK_INT(t->rank, 2);
            if (t->rank == 2) TU_CHECK_INT(t->dims[1], 5);
        }
        mcp_graph_free(g);
    }
    float x[12];
    fill(x, 12, 23);
    const int64_t *dims[1] = {xd};
    int ranks[1] = {2};
    const float *data[1] = {x};
    check_same_numbers(__LINE__, m, 1, dims, ranks, data);
    mb_model_free(m);

    /* The Gemm output read twice: Gemm stays, and so does the Relu. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, NULL);
    add_linear(m, "l1", "X", "H", 3, 2, 21);
    mb_add_node(m, NULL, "Relu", "relu", "H", "Y");
    mb_add_node(m, NULL, "Neg", "neg", "H", "Z");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, yd, NULL);
    mb_add_output(m, NULL, "Z", MCP_DTYPE_FLOAT, 2, yd, NULL);
    EXPECT_OPS(m, "Gemm,Relu,Neg");
}

/* ---- MatMul -> [Add(bias)] -> [activation] => FusedMatMul ---- */

/* A transformer's feed-forward input: X [2, 4, 3] times W [3, 5] plus a
 * bias row (Add(bias, .), as torch writes it), then GELU: one FusedMatMul
 * with activation Gelu. Without a bias, MatMul -> Relu fuses too; a batched
 * B (rank 3) does not. */
static void test_matmul_fusions(void)
{
    int64_t xd[3] = {2, 4, 3}, yd[3] = {2, 4, 5}, wd[2] = {3, 5};
    float x[24];
    fill(x, 24, 61);
    const int64_t *dims[1] = {xd};
    int ranks[1] = {3};
    const float *data[1] = {x};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, NULL);
    add_linear(m, "ff", "X", "H", 3, 5, 62);
    add_gelu_pattern(m, "H", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 3, yd, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "FusedMatMul");
        if (g->n_nodes == 1) {
            const mcp_node *n = &g->nodes[0];
            TU_CHECK_INT(n->n_inputs, 3);
            if (n->n_inputs == 3) {
                TU_CHECK_STR(value_name(g, n->inputs[1]), "ff_W");
                TU_CHECK_STR(value_name(g, n->inputs[2]), "ff_B");
            }
            TU_CHECK_STR(mcp_node_attr_string(n, "activation", ""), "Gelu");
            TU_CHECK_STR(value_name(g, n->outputs[0]), "Y");
            const mcp_type *t = &g->values[n->outputs[0]].type;
            TU_CHECK_INT(t->rank, 3);
            if (t->rank == 3) TU_CHECK_INT(t->dims[2], 5);
        }
        TU_CHECK_INT(g->n_initializers, 2);
        mcp_graph_free(g);
    }
    check_same_numbers(__LINE__, m, 1, dims, ranks, data);
    mb_model_free(m);

    float w[15];
    fill(w, 15, 63);
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 2, wd, w, sizeof w);
    mb_add_node(m, NULL, "MatMul", "mm", "X,W", "H");
    mb_add_node(m, NULL, "Relu", "relu", "H", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 3, yd, NULL);
    g = optimized(m);
    if (g) {
        CHECK_OPS(g, "FusedMatMul");
        if (g->n_nodes == 1) {
            TU_CHECK_INT(g->nodes[0].n_inputs, 2);
            TU_CHECK_STR(mcp_node_attr_string(&g->nodes[0], "activation", ""), "Relu");
        }
        mcp_graph_free(g);
    }
    check_same_numbers(__LINE__, m, 1, dims, ranks, data);
    mb_model_free(m);

    int64_t w3d[3] = {2, 3, 5};
    float w3[30];
    fill(w3, 30, 64);
    static const float bias[5] = {1, 2, 3, 4, 5};
    int64_t bd[1] = {5};
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 3, w3d, w3, sizeof w3);
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 1, bd, bias, sizeof bias);
    mb_add_node(m, NULL, "MatMul", "mm", "X,W", "H");
    mb_add_node(m, NULL, "Add", "add", "H,B", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 3, yd, NULL);
    EXPECT_OPS(m, "MatMul,Add");
}

/* ---- GELU => Gelu ---- */

/* A float scalar as a Constant node (as torch exports) or an initializer. */
static void add_scalar(mb_model *m, bool as_constant, const char *name, float v)
{
    if (!as_constant) {
        mb_add_initializer(m, NULL, name, MCP_DTYPE_FLOAT, 0, NULL, &v, sizeof v);
        return;
    }
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Constant", NULL, NULL, name);
    mb_attr_tensor(m, n, "value", mb_new_tensor(m, NULL, MCP_DTYPE_FLOAT, 0, NULL, &v, sizeof v));
}

/*
 * The three association orders of x * (1 + erf(x / sqrt 2)) * 0.5:
 *   0: ((x * a) * 0.5), Div by sqrt 2, Constant nodes;
 *   1: ((x * 0.5) * a), Mul by 1 / sqrt 2, initializers;
 *   2: (x * (a * 0.5)), Div, Constant nodes.
 * half: the constant that should be 0.5 (anything else blocks the fusion).
 */
static mb_model *gelu_model(int order, float half)
{
    int64_t xd[2] = {3, 7};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, NULL);
    bool cn = order != 1;
    add_scalar(m, cn, "one", 1.0f);
    add_scalar(m, cn, "half", half);
    mb_add_node(m, NULL, "Neg", "neg", "X", "x");
    if (order == 1) {
        add_scalar(m, cn, "rsqrt2", 0.70710677f);
        mb_add_node(m, NULL, "Mul", "div", "rsqrt2,x", "d");
    } else {
        add_scalar(m, cn, "sqrt2", 1.4142135f);
        mb_add_node(m, NULL, "Div", "div", "x,sqrt2", "d");
    }
    mb_add_node(m, NULL, "Erf", "erf", "d", "e");
    mb_add_node(m, NULL, "Add", "add", order == 1 ? "one,e" : "e,one", "a");
    if (order == 0) {
        mb_add_node(m, NULL, "Mul", "mul", "x,a", "p");
        mb_add_node(m, NULL, "Mul", "mul2", "p,half", "Y");
    } else if (order == 1) {
        mb_add_node(m, NULL, "Mul", "mul", "x,half", "p");
        mb_add_node(m, NULL, "Mul", "mul2", "p,a", "Y");
    } else {
        mb_add_node(m, NULL, "Mul", "mul", "half,a", "p");
        mb_add_node(m, NULL, "Mul", "mul2", "x,p", "Y");
    }
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, xd, NULL);
    return m;
}

static void test_gelu(void)
{
    int64_t xd[2] = {3, 7};
    float x[21];
    fill(x, 21, 31);
    x[0] = -6.0f; /* far in the tail, where the written graph loses digits */
    x[1] = 5.0f;
    const int64_t *dims[1] = {xd};
    int ranks[1] = {2};
    const float *data[1] = {x};
    for (int order = 0; order < 3; order++) {
        mb_model *m = gelu_model(order, 0.5f);
        mcp_graph *g = optimized(m);
        if (g) {
            fprintf(stderr, "  gelu order %d\n", order);
            CHECK_OPS(g, "Neg,Gelu");
            if (g->n_nodes == 2) {
                const mcp_node *n = &g->nodes[1];
                TU_CHECK_STR(n->domain, MCP_DOMAIN_INTERNAL);
                TU_CHECK_INT(n->n_inputs, 1);
                TU_CHECK_STR(value_name(g, n->inputs[0]), "x");
                TU_CHECK_STR(value_name(g, n->outputs[0]), "Y");
                TU_CHECK_INT(n->n_attrs, 0);
            }
            TU_CHECK_INT(g->n_initializers, 0);
            mcp_graph_free(g);
        }
        check_same_numbers(__LINE__, m, 1, dims, ranks, data);
        mb_model_free(m);
    }
    /* 0.6 is not GELU's half. */
    mb_model *m = gelu_model(1, 0.6f);
    EXPECT_OPS(m, "Neg,Mul,Erf,Add,Mul,Mul");
    /* Erf's output read by a second node. */
    m = gelu_model(0, 0.5f);
    mb_add_output(m, NULL, "e", MCP_DTYPE_FLOAT, 2, xd, NULL);
    EXPECT_OPS(m, "Constant,Constant,Neg,Constant,Div,Erf,Add,Mul,Mul");
}

/* ---- LayerNorm => LayerNormalization ---- */

/* torch's opset-13/14 layer_norm over the last axis of X [2, 3, 8]; `axis`
 * is the ReduceMean axis (-1 or 2 fuse), `bias` adds the final Add,
 * `eps_input` makes epsilon a graph input; opset 18 takes axes as inputs. */
static mb_model *layernorm_model(int opset, int64_t axis, bool bias, bool eps_input)
{
    int64_t xd[3] = {2, 3, 8}, vd[1] = {8}, ad[1] = {1};
    float scale[8], b[8];
    fill(scale, 8, 41);
    fill(b, 8, 42);
    mb_model *m = mb_model_new(opset);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, NULL);
    if (eps_input) mb_add_input(m, NULL, "eps", MCP_DTYPE_FLOAT, 0, NULL, NULL);
    else add_scalar(m, true, "eps", 1e-5f);
    add_scalar(m, true, "two", 2.0f);
    mb_add_initializer(m, NULL, "scale", MCP_DTYPE_FLOAT, 1, vd, scale, sizeof scale);
    if (bias) mb_add_initializer(m, NULL, "bias", MCP_DTYPE_FLOAT, 1, vd, b, sizeof b);
    if (opset >= 18) mb_add_initializer(m, NULL, "axes", MCP_DTYPE_INT64, 1, ad, &axis, sizeof axis);
    const char *r1_in = opset >= 18 ? "X,axes" : "X", *r2_in = opset >= 18 ? "p,axes" : "p";
    Onnx__NodeProto *r1 = mb_add_node(m, NULL, "ReduceMean", "mean", r1_in, "m");
    mb_add_node(m, NULL, "Sub", "sub", "X,m", "d");
    mb_add_node(m, NULL, "Pow", "pow", "d,two", "p");
    Onnx__NodeProto *r2 = mb_add_node(m, NULL, "ReduceMean", "var", r2_in, "v");
    if (opset < 18) {
        mb_attr_ints(m, r1, "axes", &axis, 1);
        mb_attr_ints(m, r2, "axes", &axis, 1);
    }
    mb_add_node(m, NULL, "Add", "addeps", "v,eps", "ve");
    mb_add_node(m, NULL, "Sqrt", "sqrt", "ve", "s");
    mb_add_node(m, NULL, "Div", "div", "d,s", "n");
    mb_add_node(m, NULL, "Mul", "mul", "n,scale", bias ? "y" : "Y");
    if (bias) mb_add_node(m, NULL, "Add", "addb", "bias,y", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 3, xd, NULL);
    return m;
}

static void test_layernorm(void)
{
    int64_t xd[3] = {2, 3, 8};
    float x[48];
    fill(x, 48, 43);
    const int64_t *dims[1] = {xd};
    int ranks[1] = {3};
    const float *data[1] = {x};
    static const struct {
        int opset;
        int64_t axis;
        bool bias;
    } cases[] = {{13, -1, true}, {13, 2, false}, {18, -1, true}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fprintf(stderr, "  layernorm opset %d axis %lld bias %d\n", cases[i].opset, (long long)cases[i].axis,
                (int)cases[i].bias);
        mb_model *m = layernorm_model(cases[i].opset, cases[i].axis, cases[i].bias, false);
        mcp_graph *g = optimized(m);
        if (g) {
            CHECK_OPS(g, "LayerNormalization");
            if (g->n_nodes == 1) {
                const mcp_node *n = &g->nodes[0];
                TU_CHECK_STR(n->domain, MCP_DOMAIN_INTERNAL);
                TU_CHECK_INT(n->n_inputs, cases[i].bias ? 3 : 2);
                TU_CHECK_STR(value_name(g, n->inputs[0]), "X");
                TU_CHECK_STR(value_name(g, n->inputs[1]), "scale");
                if (cases[i].bias && n->n_inputs == 3) TU_CHECK_STR(value_name(g, n->inputs[2]), "bias");
                TU_CHECK_INT(mcp_node_attr_int(n, "axis", 0), -1);
                TU_CHECK_NEAR(mcp_node_attr_float(n, "epsilon", 0), 1e-5, 1e-12);
                TU_CHECK_STR(value_name(g, n->outputs[0]), "Y");
            }
            TU_CHECK_INT(g->n_initializers, cases[i].bias ? 2 : 1);
            mcp_graph_free(g);
        }
        check_same_numbers(__LINE__, m, 1, dims, ranks, data);
        mb_model_free(m);
    }
    /* Over axis 1, not the last one. */
    mb_model *m = layernorm_model(13, 1, true, false);
    EXPECT_OPS(m, "Constant,Constant,ReduceMean,Sub,Pow,ReduceMean,Add,Sqrt,Div,Mul,Add");
    /* Epsilon computed at run time. */
    m = layernorm_model(13, -1, true, true);
    EXPECT_OPS(m, "Constant,ReduceMean,Sub,Pow,ReduceMean,Add,Sqrt,Div,Mul,Add");
}

/* ---- scaled dot-product attention => Attention ---- */

typedef struct sdpa_case {
    const char *what;
    int rank;            /* 3: (batch, seq, size); 4: (batch, heads, seq, size) */
    int64_t k_batch;     /* K's and V's batch (1 broadcasts, as MatMul does) */
    const char *kt_perm; /* "swap": Transpose swapping the last two axes; "seq-major": K given (seq, batch, size) */
    const char *scale;   /* "div", "mul", "none" */
    int mask_rank;       /* 0: none */
    int64_t mask_last;   /* the mask's last dim */
    int softmax_axis;
    bool kt_shared;      /* the transposed K is also a graph output */
    const char *expect;  /* op types after the passes */
} sdpa_case;

static mb_model *sdpa_model(const sdpa_case *sc, int64_t *qd, int64_t *kd, int64_t *md)
{
    const int r = sc->rank;
    const int64_t b = 2, h = 3, sq = 5, skv = 7, d = 4;
    if (r == 3) {
        qd[0] = b, qd[1] = sq, qd[2] = d;
        kd[0] = sc->k_batch, kd[1] = skv, kd[2] = d;
    } else {
        qd[0] = b, qd[1] = h, qd[2] = sq, qd[3] = d;
        kd[0] = sc->k_batch, kd[1] = h, kd[2] = skv, kd[3] = d;
    }
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "Q", MCP_DTYPE_FLOAT, r, qd, NULL);
    bool seq_major = strcmp(sc->kt_perm, "seq-major") == 0;
    int64_t kin[4];
    memcpy(kin, kd, sizeof kin);
    if (seq_major) kin[0] = kd[1], kin[1] = kd[0]; /* 3-D: (seq, batch, size) */
    mb_add_input(m, NULL, "K", MCP_DTYPE_FLOAT, r, kin, NULL);
    mb_add_input(m, NULL, "V", MCP_DTYPE_FLOAT, r, kd, NULL);
    int64_t perm[4];
    for (int i = 0; i < r; i++) perm[i] = i;
    perm[r - 1] = r - 2, perm[r - 2] = r - 1;
    if (seq_major) perm[0] = 1, perm[1] = 2, perm[2] = 0;
    Onnx__NodeProto *t = mb_add_node(m, NULL, "Transpose", "kt", "K", "KT");
    mb_attr_ints(m, t, "perm", perm, (size_t)r);
    mb_add_node(m, NULL, "MatMul", "qk", "Q,KT", "S0");
    const char *sv = "S0";
    if (strcmp(sc->scale, "none") != 0) {
        add_scalar(m, false, "c", strcmp(sc->scale, "div") == 0 ? 2.0f : 0.5f);
        mb_add_node(m, NULL, strcmp(sc->scale, "div") == 0 ? "Div" : "Mul", "scale", "S0,c", "S1");
        sv = "S1";
    }
    if (sc->mask_rank) {
        float mask[5 * 7];
        for (int i = 0; i < 35; i++) mask[i] = (i % 3 == 0) ? -1e9f : (float)(i % 5) * 0.25f;
        for (int i = 0; i < sc->mask_rank; i++) md[i] = 1;
        md[sc->mask_rank - 1] = sc->mask_last;
        if (sc->mask_rank >= 2) md[sc->mask_rank - 2] = sq;
        mb_add_initializer(m, NULL, "M", MCP_DTYPE_FLOAT, sc->mask_rank, md, mask,
                           sizeof(float) * (size_t)(sc->mask_rank >= 2 ? sq : 1) * (size_t)sc->mask_last);
        char ins[16];
        snprintf(ins, sizeof ins, "%s,M", sv);
        mb_add_node(m, NULL, "Add", "mask", ins, "S2");
        sv = "S2";
    }
    Onnx__NodeProto *sm = mb_add_node(m, NULL, "Softmax", "softmax", sv, "P");
    mb_attr_int(m, sm, "axis", sc->softmax_axis);
    mb_add_node(m, NULL, "MatMul", "pv", "P,V", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    if (sc->kt_shared) mb_add_output(m, NULL, "KT", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    return m;
}

/* Six scalar scales between the product and the Softmax (the longest
 * chain the pass takes) fuse, with the same numbers. */
static void test_attention_scale_chain(void)
{
    int64_t qd[4] = {1, 2, 3, 4};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "Q", MCP_DTYPE_FLOAT, 4, qd, NULL);
    int64_t perm[4] = {0, 1, 3, 2};
    Onnx__NodeProto *t = mb_add_node(m, NULL, "Transpose", "kt", "Q", "KT");
    mb_attr_ints(m, t, "perm", perm, 4);
    mb_add_node(m, NULL, "MatMul", "qk", "Q,KT", "S0");
    static const float factors[6] = {2.0f, 0.5f, 1.5f, 0.25f, 3.0f, 0.75f};
    char name[8], ins[16], out[8];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "c%d", i);
        add_scalar(m, false, name, factors[i]);
        snprintf(ins, sizeof ins, "S%d,c%d", i, i);
        snprintf(out, sizeof out, "S%d", i + 1);
        mb_add_node(m, NULL, i % 2 ? "Div" : "Mul", NULL, ins, out);
    }
    mb_add_node(m, NULL, "Softmax", "sm", "S6", "P");
    mb_add_node(m, NULL, "MatMul", "pv", "P,Q", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    mcp_graph *g = optimized(m);
    if (g) {
        CHECK_OPS(g, "Attention");
        mcp_graph_free(g);
    }
    float q[24];
    fill(q, 24, 81);
    const int64_t *dims[1] = {qd};
    int ranks[1] = {4};
    const float *data[1] = {q};
    check_same_numbers(__LINE__, m, 1, dims, ranks, data);
    mb_model_free(m);
}

static void test_attention(void)
{
    static const sdpa_case cases[] = {
        {"4-D, Div, 2-D mask", 4, 2, "swap", "div", 2, 7, -1, false, "Attention"},
        {"4-D, Mul, 4-D mask", 4, 2, "swap", "mul", 4, 7, 3, false, "Attention"},
        {"3-D, no scale, no mask", 3, 2, "swap", "none", 0, 0, 2, false, "Attention"},
        {"3-D, K and V broadcast over the batch", 3, 1, "swap", "div", 1, 7, -1, false, "Attention"},
        {"3-D, K seq-major (the Transpose kept, rewritten)", 3, 2, "seq-major", "div", 0, 0, -1, false,
         "Transpose,Attention"},
        {"mask broadcast along the keys: Attention would pad it", 4, 2, "swap", "div", 2, 1, -1, false,
         "Transpose,MatMul,Div,Add,Softmax,MatMul"},
        {"Softmax over another axis", 4, 2, "swap", "div", 0, 0, 2, false, "Transpose,MatMul,Div,Softmax,MatMul"},
        {"transposed K also read elsewhere", 4, 2, "swap", "none", 0, 0, -1, true, "Transpose,MatMul,Softmax,MatMul"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const sdpa_case *sc = &cases[i];
        fprintf(stderr, "  attention: %s\n", sc->what);
        int64_t qd[4], kd[4], md[4];
        mb_model *m = sdpa_model(sc, qd, kd, md);
        mcp_graph *g = optimized(m);
        if (g) {
            char ob[256];
            tu_checks++;
            if (strcmp(ops_of(g, ob, sizeof ob), sc->expect) != 0)
                TU_FAIL_AT(__FILE__, __LINE__, "%s: ops \"%s\", expected \"%s\"", sc->what, ob, sc->expect);
            mcp_graph_free(g);
        }
        if (!sc->kt_shared) {
            int64_t kin[4];
            memcpy(kin, kd, sizeof kin);
            if (strcmp(sc->kt_perm, "seq-major") == 0) kin[0] = kd[1], kin[1] = kd[0];
            float q[2 * 3 * 5 * 4], k[2 * 3 * 7 * 4], v[2 * 3 * 7 * 4];
            fill(q, 120, 51 + i);
            fill(k, 168, 61 + i);
            fill(v, 168, 71 + i);
            const int64_t *dims[3] = {qd, kin, kd};
            int ranks[3] = {sc->rank, sc->rank, sc->rank};
            const float *data[3] = {q, k, v};
            check_same_numbers(__LINE__, m, 3, dims, ranks, data);
        }
        mb_model_free(m);
    }
}

/* ---- the fused reference kernels, written directly in a model ---- */

/* Loads m on the reference backend; returns the session or NULL with the
 * status and message. */
static mcp_session *load_ref(mb_model *m, mcp_status *st, char *msg, size_t cap)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_session_options o = mcp_session_options_default();
    o.backend = "ref";
    mcp_session *s = NULL;
    *st = mcp_session_create_from_memory(buf, len, NULL, &o, &s, msg, cap);
    free(buf);
    return s;
}

static mb_model *direct_gemm_model(const char *activation)
{
    static const float b[6] = {0.5f, -1, 2, 0.25f, -0.75f, 1}, c[2] = {0.125f, -0.5f};
    int64_t ad[2] = {2, 3}, bd[2] = {3, 2}, cd[1] = {2}, yd[2] = {2, 2};
    mb_model *m = mb_model_new(13);
    mb_add_opset(m, MCP_DOMAIN_INTERNAL, 1);
    mb_add_input(m, NULL, "A", MCP_DTYPE_FLOAT, 2, ad, NULL);
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 2, bd, b, sizeof b);
    mb_add_initializer(m, NULL, "C", MCP_DTYPE_FLOAT, 1, cd, c, sizeof c);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "FusedGemm", "fg", "A,B,C", "Y");
    mb_node_set_domain(m, n, MCP_DOMAIN_INTERNAL);
    if (activation) mb_attr_string(m, n, "activation", activation);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, yd, NULL);
    return m;
}

/* FusedGemm with Silu computes A * B + C, then y * sigmoid(y); an unknown
 * activation or a missing parameter fails at load, naming the node. */
static void test_fused_kernels_direct(void)
{
    static const float a[6] = {1, 2, -1, 0.5f, -2, 3};
    static const float b[6] = {0.5f, -1, 2, 0.25f, -0.75f, 1}, c[2] = {0.125f, -0.5f};
    char msg[512] = "";
    mcp_status st;
    mb_model *m = direct_gemm_model("Silu");
    mcp_session *s = load_ref(m, &st, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
    if (s) {
        int64_t ad[2] = {2, 3};
        mcp_value *in = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, ad, a, msg, sizeof msg);
        mcp_value *out[1] = {NULL};
        const char *names[1] = {"A"};
        st = mcp_session_run(s, 1, names, &in, 0, NULL, out, msg, sizeof msg);
        TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
        if (st == MCP_STATUS_OK) {
            const float *y = out[0]->tensor.data;
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    double v = c[j];
                    for (int k = 0; k < 3; k++) v += (double)a[i * 3 + k] * b[k * 2 + j];
                    TU_CHECK_NEAR(y[i * 2 + j], v / (1.0 + exp(-v)), 1e-6);
                }
        }
        mcp_value_destroy(in);
        mcp_value_destroy(out[0]);
        mcp_session_destroy(s);
    }
    mb_model_free(m);

    const char *bad[2] = {"Swish", "LeakyRelu"};
    const char *why[2] = {"unknown activation 'Swish'", "LeakyRelu takes 1 parameters"};
    for (int i = 0; i < 2; i++) {
        m = direct_gemm_model(bad[i]);
        s = load_ref(m, &st, msg, sizeof msg);
        TU_CHECK(s == NULL);
        TU_CHECK(st == MCP_STATUS_UNSUPPORTED || st == MCP_STATUS_INVALID_MODEL);
        TU_CHECK(strstr(msg, "'fg'") != NULL);
        TU_CHECK(strstr(msg, why[i]) != NULL);
        mcp_session_destroy(s);
        mb_model_free(m);
    }
}

/* ---- constant folding (src/engine/fold.c) ---- */

/* Constants and the nodes computing from them become initializers; the
 * node reading a graph input stays; a Constant that is a graph output
 * becomes an initializer output. */
static void test_fold_constants(void)
{
    static const float c1[3] = {1, 2, 3};
    int64_t xd[2] = {2, 3}, cd[1] = {3};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Constant", "c1", NULL, "C1");
    mb_attr_tensor(m, n, "value", mb_new_tensor(m, NULL, MCP_DTYPE_FLOAT, 1, cd, c1, sizeof c1));
    n = mb_add_node(m, NULL, "Constant", "c2", NULL, "C2");
    mb_attr_float(m, n, "value_float", 2.0f);
    mb_add_node(m, NULL, "Mul", "scale", "C1,C2", "K");
    mb_add_node(m, NULL, "Neg", "neg", "K", "NK");
    mb_add_node(m, NULL, "Add", "add", "X,NK", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mb_add_output(m, NULL, "C1", MCP_DTYPE_FLOAT, 1, cd, NULL);
    mcp_graph *g = folded(m);
    if (g) {
        CHECK_OPS(g, "Add");
        int nk = mcp_graph_find_value(g, "NK"), c = mcp_graph_find_value(g, "C1");
        TU_REQUIRE(nk >= 0 && c >= 0);
        TU_CHECK(g->values[nk].initializer >= 0);
        TU_CHECK(g->values[c].initializer >= 0);
        /* Only what is still read is kept: NK and the output C1. */
        TU_CHECK_INT(g->n_initializers, 2);
        if (g->values[nk].initializer >= 0) {
            const mcp_tensor *t = &g->initializers[g->values[nk].initializer];
            TU_CHECK_INT(t->dtype, MCP_DTYPE_FLOAT);
            TU_CHECK_INT(mcp_tensor_numel(t), 3);
            if (mcp_tensor_numel(t) == 3) {
                TU_CHECK_NEAR(((const float *)t->data)[0], -2.0, 0);
                TU_CHECK_NEAR(((const float *)t->data)[2], -6.0, 0);
            }
            TU_CHECK_INT(g->values[nk].type.rank, 1);
        }
        TU_CHECK_STR(value_name(g, g->outputs[1]), "C1");
        mcp_graph_free(g);
    }
    float x[6] = {1, 2, 3, 4, 5, 6};
    const int64_t *dims[1] = {xd};
    int ranks[1] = {2};
    const float *data[1] = {x};
    check_same_numbers(__LINE__, m, 1, dims, ranks, data);
    mb_model_free(m);
}

/* What stays: random ops, and results past the bound (64 KiB and the size
 * of the inputs the fold frees): a large ConstantOfShape, a Transpose of a
 * weight that is also read elsewhere. What folds: a weight Transpose of any
 * size when the weight is read by nothing else, and a small Tile. */
static void test_fold_bounds(void)
{
    static float w[300 * 100];
    fill(w, 300 * 100, 51);
    static const float t4[4] = {1, 2, 3, 4};
    int64_t wd[2] = {300, 100}, td[1] = {4}, rep[1] = {10}, one[1] = {1}, big[1] = {100000};
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, one, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 2, wd, w, sizeof w);
    mb_add_initializer(m, NULL, "T4", MCP_DTYPE_FLOAT, 1, td, t4, sizeof t4);
    mb_add_initializer(m, NULL, "reps", MCP_DTYPE_INT64, 1, one, rep, sizeof rep);
    mb_add_initializer(m, NULL, "shape", MCP_DTYPE_INT64, 1, one, big, sizeof big);
    mb_add_initializer(m, NULL, "W2", MCP_DTYPE_FLOAT, 2, wd, w, sizeof w);
    mb_add_node(m, NULL, "Transpose", "wt", "W", "WT");
    mb_add_node(m, NULL, "Transpose", "wt2", "W2", "WT2");
    mb_add_node(m, NULL, "Neg", "neg", "W2", "NW2");
    mb_add_node(m, NULL, "Tile", "tile", "T4,reps", "T40");
    mb_add_node(m, NULL, "ConstantOfShape", "cos", "shape", "Big");
    Onnx__NodeProto *n = mb_add_node(m, NULL, "RandomUniform", "rand", NULL, "R");
    mb_attr_ints(m, n, "shape", one, 1);
    mb_add_node(m, NULL, "Mul", "mul", "R,X", "RX");
    mb_add_node(m, NULL, "Add", "add", "X,T40", "Y");
    mb_add_output(m, NULL, "WT", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    mb_add_output(m, NULL, "Big", MCP_DTYPE_FLOAT, 1, big, NULL);
    mb_add_output(m, NULL, "RX", MCP_DTYPE_FLOAT, 1, one, NULL);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, (int64_t[]){40}, NULL);
    mb_add_output(m, NULL, "WT2", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    mb_add_output(m, NULL, "NW2", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    mcp_graph *g = folded(m);
    if (g) {
        /* Neg(W2) frees nothing either (Transpose reads W2 too). */
        CHECK_OPS(g, "Transpose,Neg,ConstantOfShape,RandomUniform,Mul,Add");
        int wt = mcp_graph_find_value(g, "WT");
        TU_REQUIRE(wt >= 0);
        TU_CHECK(g->values[wt].initializer >= 0);
        if (g->values[wt].initializer >= 0) {
            const mcp_tensor *t = &g->initializers[g->values[wt].initializer];
            TU_CHECK_INT(t->dims[0], 100);
            TU_CHECK_NEAR(((const float *)t->data)[1], w[100], 0);
        }
        /* W is read by nothing now. */
        TU_CHECK_INT(g->values[mcp_graph_find_value(g, "W")].initializer, -1);
        mcp_graph_free(g);
    }
    mb_model_free(m);
}

/* ---- dead nodes, unused initializers ---- */

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
    EXPECT_OPS(m, "Identity,If");
}

int main(void)
{
    TU_RUN(test_identity_dropout);
    TU_RUN(test_dropout_kept);
    TU_RUN(test_conv_bn_fold);
    TU_RUN(test_conv_bn_kept);
    TU_RUN(test_matmul_add_gemm);
    TU_RUN(test_matmul_add_kept);
    TU_RUN(test_conv_add_relu);
    TU_RUN(test_conv_sum_shapes);
    TU_RUN(test_conv_activations);
    TU_RUN(test_conv_fusion_blocked);
    TU_RUN(test_gemm_activation);
    TU_RUN(test_matmul_fusions);
    TU_RUN(test_gelu);
    TU_RUN(test_layernorm);
    TU_RUN(test_attention);
    TU_RUN(test_attention_scale_chain);
    TU_RUN(test_fused_kernels_direct);
    TU_RUN(test_fold_constants);
    TU_RUN(test_fold_bounds);
    TU_RUN(test_dead_nodes);
    TU_RUN(test_subgraph_capture);
    return tu_finish("passes");
}
