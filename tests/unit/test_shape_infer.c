/*
 * Load-time type and shape inference (mcp_graph_infer_shapes): inferred
 * types through small graphs built with the model builder, symbolic dims,
 * opset-dependent rules, declared types that conflict, and malformed nodes
 * that must be skipped without a crash.
 */
#include <stdint.h>

#include "graph/graph.h"
#include "model_builder.h"
#include "test_util.h"

/* Zero bytes for initializers whose values do not matter. */
static const float zeros[10 * 2048];

static const int64_t D1[1] = {1};

/* Packs and imports m, then runs inference. *g is the imported graph (or
 * NULL when the import failed); msg receives any error. */
static mcp_status infer(mb_model *m, mcp_graph **g, char *msg, size_t cap)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_err err = {msg, cap};
    msg[0] = '\0';
    *g = NULL;
    mcp_status st = mcp_onnx_import(buf, len, NULL, g, &err);
    free(buf);
    if (st != MCP_STATUS_OK) {
        fprintf(stderr, "import failed: %s\n", msg);
        return st;
    }
    return mcp_graph_infer_shapes(*g, &err);
}

/* The type of value `name` as "float32[N,3,?]" ("?[*]": nothing known,
 * "<absent>": no such value). */
static const char *type_of(const mcp_graph *g, const char *name, char *buf, size_t cap)
{
    int idx = mcp_graph_find_value(g, name);
    if (idx < 0) {
        snprintf(buf, cap, "<absent>");
        return buf;
    }
    const mcp_type *t = &g->values[idx].type;
    size_t off = (size_t)snprintf(buf, cap, "%s", t->dtype ? mcp_dtype_name(t->dtype) : "?");
    if (t->rank < 0) {
        snprintf(buf + off, cap - off, "[*]");
        return buf;
    }
    off += (size_t)snprintf(buf + off, cap - off, "[");
    for (int i = 0; i < t->rank && off < cap; i++) {
        const char *sep = i ? "," : "";
        if (t->dims[i] >= 0) off += (size_t)snprintf(buf + off, cap - off, "%s%lld", sep, (long long)t->dims[i]);
        else off += (size_t)snprintf(buf + off, cap - off, "%s%s", sep, t->dim_params[i] ? t->dim_params[i] : "?");
    }
    if (off < cap) snprintf(buf + off, cap - off, "]");
    return buf;
}

#define CHECK_TYPE(g, name, expect)                                           \
    do {                                                                      \
        char tb_[256];                                                        \
        TU_CHECK_STR(type_of((g), (name), tb_, sizeof tb_), (expect));        \
    } while (0)

static void add_i64_init(mb_model *m, Onnx__GraphProto *g, const char *name, const int64_t *v, int64_t n)
{
    int64_t dims[1] = {n};
    mb_add_initializer(m, g, name, MCP_DTYPE_INT64, 1, dims, v, (size_t)n * sizeof *v);
}

/* A Constant node producing an int64 1-D tensor. */
static void add_i64_const(mb_model *m, const char *name, const int64_t *v, int64_t n)
{
    int64_t dims[1] = {n};
    Onnx__NodeProto *c = mb_add_node(m, NULL, "Constant", NULL, "", name);
    mb_attr_tensor(m, c, "value", mb_new_tensor(m, NULL, MCP_DTYPE_INT64, 1, dims, v, (size_t)n * sizeof *v));
}

/* Declares `name` in the main graph's value_info. The builder has no call
 * for it, so the entries are made as outputs of a scratch graph whose
 * output array becomes the main graph's value_info. */
static void set_value_info(mb_model *m, Onnx__GraphProto *scratch)
{
    Onnx__GraphProto *g = mb_main_graph(m);
    g->n_value_info = scratch->n_output;
    g->value_info = scratch->output;
}

/* ---- a CNN chain with a symbolic batch ---- */

static void test_conv_chain(void)
{
    mb_model *m = mb_model_new(13);
    static const char *const nchw[4] = {"N", NULL, NULL, NULL};
    int64_t xd[4] = {-1, 3, 32, 32}, wd[4] = {8, 3, 3, 3}, bd[1] = {8}, fd[2] = {10, 2048}, fb[1] = {10};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, nchw);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 4, wd, zeros, 8 * 3 * 3 * 3 * sizeof(float));
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 1, bd, zeros, 8 * sizeof(float));
    mb_add_initializer(m, NULL, "Wfc", MCP_DTYPE_FLOAT, 2, fd, zeros, sizeof zeros);
    mb_add_initializer(m, NULL, "Bfc", MCP_DTYPE_FLOAT, 1, fb, zeros, 10 * sizeof(float));
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Conv", "conv", "X,W,B", "C");
    int64_t pads[4] = {1, 1, 1, 1}, k2[2] = {2, 2}, k3[2] = {3, 3}, s2[2] = {2, 2}, d2[2] = {2, 2};
    mb_attr_ints(m, n, "pads", pads, 4);
    mb_add_node(m, NULL, "Relu", "relu", "C", "R");
    n = mb_add_node(m, NULL, "MaxPool", "pool", "R", "P");
    mb_attr_ints(m, n, "kernel_shape", k2, 2);
    mb_attr_ints(m, n, "strides", s2, 2);
    mb_add_node(m, NULL, "Flatten", "flatten", "P", "F");
    n = mb_add_node(m, NULL, "Gemm", "fc", "F,Wfc,Bfc", "Y");
    mb_attr_int(m, n, "transB", 1);
    mb_add_node(m, NULL, "Softmax", "softmax", "Y", "Z");
    /* Side branches: SAME padding with stride 2, dilation, ceil_mode. */
    n = mb_add_node(m, NULL, "Conv", "conv_same", "X,W", "CS");
    mb_attr_string(m, n, "auto_pad", "SAME_UPPER");
    mb_attr_ints(m, n, "strides", s2, 2);
    n = mb_add_node(m, NULL, "Conv", "conv_dil", "X,W", "CD");
    mb_attr_ints(m, n, "dilations", d2, 2);
    n = mb_add_node(m, NULL, "AveragePool", "avg_ceil", "R", "AC");
    mb_attr_ints(m, n, "kernel_shape", k3, 2);
    mb_attr_ints(m, n, "strides", s2, 2);
    mb_attr_int(m, n, "ceil_mode", 1);
    n = mb_add_node(m, NULL, "AveragePool", "avg_floor", "R", "AF");
    mb_attr_ints(m, n, "kernel_shape", k3, 2);
    mb_attr_ints(m, n, "strides", s2, 2);
    mb_add_node(m, NULL, "GlobalAveragePool", "gap", "R", "G");
    n = mb_add_node(m, NULL, "ConvTranspose", "deconv", "C,W", "T");
    mb_attr_ints(m, n, "strides", s2, 2);
    mb_attr_ints(m, n, "pads", pads, 4);
    /* The output is declared with a dtype and no shape: inference fills it. */
    mb_add_output(m, NULL, "Z", MCP_DTYPE_FLOAT, -1, NULL, NULL);

    char msg[512];
    mcp_graph *g;
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (g) {
        CHECK_TYPE(g, "C", "float32[N,8,32,32]");
        CHECK_TYPE(g, "R", "float32[N,8,32,32]");
        CHECK_TYPE(g, "P", "float32[N,8,16,16]");
        CHECK_TYPE(g, "F", "float32[N,2048]");
        CHECK_TYPE(g, "Y", "float32[N,10]");
        CHECK_TYPE(g, "Z", "float32[N,10]");
        CHECK_TYPE(g, "CS", "float32[N,8,16,16]");
        CHECK_TYPE(g, "CD", "float32[N,8,28,28]");
        CHECK_TYPE(g, "AC", "float32[N,8,16,16]");
        CHECK_TYPE(g, "AF", "float32[N,8,15,15]");
        CHECK_TYPE(g, "G", "float32[N,8,1,1]");
        /* W [8,3,3,3] read as [C_in=8, C_out/group=3]: 2*(32-1)+3-2 = 63. */
        CHECK_TYPE(g, "T", "float32[N,3,63,63]");
    }
    mcp_graph_free(g);
    mb_model_free(m);
}

/* ---- Reshape ---- */

static void test_reshape(void)
{
    mb_model *m = mb_model_new(14);
    static const char *const n_sym[3] = {"N", NULL, NULL};
    int64_t xd[3] = {-1, 4, 6}, sd[3] = {2, 3, 4}, ed[2] = {3, 0};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, n_sym);
    mb_add_input(m, NULL, "S", MCP_DTYPE_FLOAT, 3, sd, NULL);
    mb_add_input(m, NULL, "E", MCP_DTYPE_FLOAT, 2, ed, NULL);
    static const int64_t s0m1[2] = {0, -1}, s02m1[3] = {0, 2, -1}, sm16[2] = {-1, 6}, sm1[1] = {-1},
                         s4m12[3] = {4, -1, 2}, s07[2] = {0, 7}, zero[1] = {0};
    add_i64_init(m, NULL, "s0m1", s0m1, 2);
    add_i64_const(m, "s02m1", s02m1, 3);
    add_i64_init(m, NULL, "sm16", sm16, 2);
    add_i64_init(m, NULL, "sm1", sm1, 1);
    add_i64_init(m, NULL, "s4m12", s4m12, 3);
    add_i64_init(m, NULL, "s07", s07, 2);
    add_i64_init(m, NULL, "zero", zero, 1);
    mb_add_node(m, NULL, "Reshape", "r1", "X,s0m1", "R1");
    mb_add_node(m, NULL, "Reshape", "r2", "X,s02m1", "R2");
    mb_add_node(m, NULL, "Reshape", "r3", "X,sm16", "R3");
    mb_add_node(m, NULL, "Reshape", "r4", "S,sm1", "R4");
    mb_add_node(m, NULL, "Reshape", "r5", "S,s4m12", "R5");
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Reshape", "r6", "E,s07", "R6");
    mb_attr_int(m, n, "allowzero", 1);
    /* x.view(x.size(0), -1) as PyTorch exports it. */
    mb_add_node(m, NULL, "Shape", "shape", "X", "XS");
    mb_add_node(m, NULL, "Gather", "gather", "XS,zero", "B1");
    mb_add_node(m, NULL, "Concat", "cat", "B1,sm1", "NS");
    mb_add_node(m, NULL, "Reshape", "r7", "X,NS", "R7");
    /* A shape known only by its length. */
    mb_add_node(m, NULL, "Reshape", "r8", "X,XS", "R8");
    mb_add_node(m, NULL, "Relu", "relu", "XS", "XS2");
    mb_add_node(m, NULL, "Reshape", "r9", "S,XS2", "R9");

    char msg[512];
    mcp_graph *g;
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (g) {
        CHECK_TYPE(g, "R1", "float32[N,24]");
        CHECK_TYPE(g, "R2", "float32[N,2,12]");
        CHECK_TYPE(g, "R3", "float32[?,6]");
        CHECK_TYPE(g, "R4", "float32[24]");
        CHECK_TYPE(g, "R5", "float32[4,3,2]");
        CHECK_TYPE(g, "R6", "float32[0,7]");
        CHECK_TYPE(g, "XS", "int64[3]");
        CHECK_TYPE(g, "B1", "int64[1]");
        CHECK_TYPE(g, "NS", "int64[2]");
        CHECK_TYPE(g, "R7", "float32[N,24]");
        CHECK_TYPE(g, "R8", "float32[N,4,6]");
        CHECK_TYPE(g, "R9", "float32[?,?,?]");
    }
    mcp_graph_free(g);
    mb_model_free(m);

    /* A static element count that does not fit is an error naming the node. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "S", MCP_DTYPE_FLOAT, 3, sd, NULL);
    static const int64_t s5m1[2] = {5, -1};
    add_i64_init(m, NULL, "s5m1", s5m1, 2);
    mb_add_node(m, NULL, "Reshape", "bad_reshape", "S,s5m1", "R");
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "bad_reshape");
    TU_CHECK_CONTAINS(msg, "Reshape");
    mcp_graph_free(g);
    mb_model_free(m);
}

/* ---- broadcasting ---- */

static void test_broadcast(void)
{
    mb_model *m = mb_model_new(13);
    static const char *const sym3[3] = {"N", NULL, NULL};
    static const char *const sym2n[2] = {"N", NULL}, *const sym2m[2] = {"M", NULL};
    static const char *const sym4[4] = {"N", NULL, NULL, NULL};
    int64_t ad[3] = {-1, 1, 5}, bd[2] = {3, 1}, cd[2] = {-1, 4}, ed[2] = {-1, 1}, qd[3] = {-1, 1, 1};
    int64_t fd[4] = {-1, 1, 2, 3}, gd[3] = {5, 3, 4}, hd[1] = {3}, ud[2] = {-1, 4};
    mb_add_input(m, NULL, "A", MCP_DTYPE_FLOAT, 3, ad, sym3);
    mb_add_input(m, NULL, "B", MCP_DTYPE_FLOAT, 2, bd, NULL);
    mb_add_input(m, NULL, "C", MCP_DTYPE_FLOAT, 2, cd, sym2n);
    mb_add_input(m, NULL, "D", MCP_DTYPE_FLOAT, 2, cd, sym2m);
    mb_add_input(m, NULL, "E", MCP_DTYPE_FLOAT, 2, ed, sym2n);
    mb_add_input(m, NULL, "U", MCP_DTYPE_FLOAT, 2, ud, NULL); /* unnamed unknown */
    mb_add_input(m, NULL, "Q", MCP_DTYPE_BOOL, 3, qd, sym3);
    mb_add_input(m, NULL, "F", MCP_DTYPE_FLOAT, 4, fd, sym4);
    mb_add_input(m, NULL, "G", MCP_DTYPE_FLOAT, 3, gd, NULL);
    mb_add_input(m, NULL, "H", MCP_DTYPE_FLOAT, 1, hd, NULL);
    mb_add_node(m, NULL, "Add", "add", "A,B", "AB");
    mb_add_node(m, NULL, "Mul", "mul", "C,D", "CD");
    mb_add_node(m, NULL, "Sub", "sub", "C,E", "CE");
    mb_add_node(m, NULL, "Div", "div", "C,U", "CU");
    mb_add_node(m, NULL, "Pow", "pow", "E,B", "EB");
    mb_add_node(m, NULL, "Where", "where", "Q,A,B", "W");
    mb_add_node(m, NULL, "Less", "less", "A,B", "L");
    mb_add_node(m, NULL, "Max", "max", "A,B,E", "MX");
    mb_add_node(m, NULL, "MatMul", "mm", "F,G", "MM");
    mb_add_node(m, NULL, "MatMul", "mm1", "H,G", "MV");
    mb_add_node(m, NULL, "MatMul", "mm2", "G,G2", "MG");

    int64_t g2d[2] = {4, 7};
    mb_add_input(m, NULL, "G2", MCP_DTYPE_FLOAT, 2, g2d, NULL);

    char msg[512];
    mcp_graph *g;
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (g) {
        CHECK_TYPE(g, "AB", "float32[N,3,5]");
        CHECK_TYPE(g, "CD", "float32[?,4]"); /* N and M may differ (or be 1) */
        CHECK_TYPE(g, "CE", "float32[N,4]");
        CHECK_TYPE(g, "CU", "float32[?,4]");
        CHECK_TYPE(g, "EB", "float32[3,1]"); /* N broadcast with 3 must be 1 or 3 */
        CHECK_TYPE(g, "W", "float32[N,3,5]");
        CHECK_TYPE(g, "L", "bool[N,3,5]");
        CHECK_TYPE(g, "MX", "float32[N,3,5]");
        CHECK_TYPE(g, "MM", "float32[N,5,2,4]");
        CHECK_TYPE(g, "MV", "float32[5,4]");
        CHECK_TYPE(g, "MG", "float32[5,3,7]");
    }
    mcp_graph_free(g);
    mb_model_free(m);

    /* Static dims that cannot broadcast, and a bad inner dimension. */
    m = mb_model_new(13);
    int64_t pd[2] = {3, 4}, qd2[2] = {5, 4};
    mb_add_input(m, NULL, "P", MCP_DTYPE_FLOAT, 2, pd, NULL);
    mb_add_input(m, NULL, "Q", MCP_DTYPE_FLOAT, 2, qd2, NULL);
    mb_add_node(m, NULL, "Add", "bad_add", "P,Q", "Y");
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "bad_add");
    TU_CHECK_CONTAINS(msg, "'Q'");
    mcp_graph_free(g);
    mb_model_free(m);

    m = mb_model_new(13);
    mb_add_input(m, NULL, "P", MCP_DTYPE_FLOAT, 2, pd, NULL);
    mb_add_input(m, NULL, "Q", MCP_DTYPE_FLOAT, 2, qd2, NULL);
    mb_add_node(m, NULL, "MatMul", "bad_mm", "P,Q", "Y");
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "bad_mm");
    TU_CHECK_CONTAINS(msg, "inner");
    mcp_graph_free(g);
    mb_model_free(m);
}

/* ---- Squeeze / Unsqueeze: axes attribute (opset 11) vs input (13) ---- */

static void test_squeeze_unsqueeze_opsets(void)
{
    static const char *const sym[3] = {"N", NULL, NULL};
    int64_t xd[3] = {-1, 1, 5}, sd[3] = {1, 3, 1};
    static const int64_t ax1[1] = {1}, ax0m1[2] = {0, -1};
    char msg[512];
    mcp_graph *g;

    mb_model *m = mb_model_new(11);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, sym);
    mb_add_input(m, NULL, "S", MCP_DTYPE_FLOAT, 3, sd, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Squeeze", "sq", "X", "SQ");
    mb_attr_ints(m, n, "axes", ax1, 1);
    n = mb_add_node(m, NULL, "Unsqueeze", "unsq", "X", "US");
    mb_attr_ints(m, n, "axes", ax0m1, 2);
    mb_add_node(m, NULL, "Squeeze", "sq_all", "S", "SA");
    mb_add_node(m, NULL, "Squeeze", "sq_all_sym", "X", "SX"); /* N might be 1 */
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (g) {
        CHECK_TYPE(g, "SQ", "float32[N,5]");
        CHECK_TYPE(g, "US", "float32[1,N,1,5,1]");
        CHECK_TYPE(g, "SA", "float32[3]");
        CHECK_TYPE(g, "SX", "float32[*]");
    }
    mcp_graph_free(g);
    mb_model_free(m);

    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, sym);
    mb_add_input(m, NULL, "S", MCP_DTYPE_FLOAT, 3, sd, NULL);
    add_i64_init(m, NULL, "ax1", ax1, 1);
    add_i64_const(m, "ax0m1", ax0m1, 2);
    mb_add_node(m, NULL, "Squeeze", "sq", "X,ax1", "SQ");
    mb_add_node(m, NULL, "Unsqueeze", "unsq", "X,ax0m1", "US");
    mb_add_node(m, NULL, "Squeeze", "sq_all", "S", "SA");
    /* From opset 13 an axes attribute means nothing: the output stays
     * unknown rather than following the stale attribute. */
    n = mb_add_node(m, NULL, "Unsqueeze", "unsq_attr", "X", "UA");
    mb_attr_ints(m, n, "axes", ax1, 1);
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (g) {
        CHECK_TYPE(g, "SQ", "float32[N,5]");
        CHECK_TYPE(g, "US", "float32[1,N,1,5,1]");
        CHECK_TYPE(g, "SA", "float32[3]");
        CHECK_TYPE(g, "UA", "float32[*]");
    }
    mcp_graph_free(g);
    mb_model_free(m);

    /* Squeezing a dim that is statically not 1 fails. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "S", MCP_DTYPE_FLOAT, 3, sd, NULL);
    add_i64_init(m, NULL, "ax1", ax1, 1);
    mb_add_node(m, NULL, "Squeeze", "bad_squeeze", "S,ax1", "Y");
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "bad_squeeze");
    mcp_graph_free(g);
    mb_model_free(m);
}

/* ---- declared types ---- */

static void test_declared_types(void)
{
    int64_t xd[3] = {2, 3, 4}, bad[3] = {2, 3, 5};
    static const char *const bsym[3] = {"B", NULL, NULL};
    int64_t sd[3] = {-1, 3, 4};
    char msg[512];
    mcp_graph *g;

    /* A static dim that contradicts the node. */
    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, NULL);
    mb_add_node(m, NULL, "Relu", "act", "X", "Y");
    mb_add_node(m, NULL, "Neg", "neg", "Y", "Z");
    Onnx__GraphProto *vi = mb_new_graph(m, "vi");
    mb_add_output(m, vi, "Y", MCP_DTYPE_FLOAT, 3, bad, NULL);
    set_value_info(m, vi);
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "'act'");
    TU_CHECK_CONTAINS(msg, "Relu");
    TU_CHECK_CONTAINS(msg, "'Y'");
    TU_CHECK_CONTAINS(msg, "[2,3,5]");
    TU_CHECK_CONTAINS(msg, "[2,3,4]");
    mcp_graph_free(g);
    mb_model_free(m);

    /* A dtype that contradicts the node, on a graph output. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, NULL);
    mb_add_node(m, NULL, "Relu", "act", "X", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_INT32, 3, xd, NULL);
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "'act'");
    TU_CHECK_CONTAINS(msg, "int32");
    mcp_graph_free(g);
    mb_model_free(m);

    /* Unknown and symbolic declarations are compatible: they are kept where
     * inference knows less and filled in where it knows more. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, NULL);
    mb_add_input(m, NULL, "V", MCP_DTYPE_FLOAT, 3, sd, NULL);
    mb_add_node(m, NULL, "Relu", "act", "X", "Y");
    mb_add_node(m, NULL, "Neg", "neg", "V", "Z");
    mb_add_node(m, NULL, "Custom", "custom", "V", "K"); /* no rule */
    vi = mb_new_graph(m, "vi");
    mb_add_output(m, vi, "Y", MCP_DTYPE_FLOAT, 3, sd, bsym);
    mb_add_output(m, vi, "Z", MCP_DTYPE_FLOAT, 3, sd, bsym);
    mb_add_output(m, vi, "K", MCP_DTYPE_FLOAT, 3, sd, bsym);
    set_value_info(m, vi);
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (g) {
        CHECK_TYPE(g, "Y", "float32[2,3,4]");
        CHECK_TYPE(g, "Z", "float32[B,3,4]");
        CHECK_TYPE(g, "K", "float32[B,3,4]");
    }
    mcp_graph_free(g);
    mb_model_free(m);
}

/* ---- assorted shape ops ---- */

static void test_shape_ops(void)
{
    mb_model *m = mb_model_new(15);
    static const char *const sym4[4] = {"N", NULL, NULL, NULL};
    static const char *const sym3[3] = {"N", NULL, NULL};
    static const char *const sym2[2] = {"N", NULL};
    int64_t xd[4] = {-1, 3, 4, 5}, yd[3] = {-1, 10, 8}, ad[2] = {-1, 3}, bd[2] = {-1, 5}, id[2] = {2, 2};
    int64_t vd[2] = {3, 1}, cd2[2] = {6, 7};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, sym4);
    mb_add_input(m, NULL, "Y", MCP_DTYPE_FLOAT, 3, yd, sym3);
    mb_add_input(m, NULL, "A", MCP_DTYPE_FLOAT, 2, ad, sym2);
    mb_add_input(m, NULL, "B", MCP_DTYPE_FLOAT, 2, bd, sym2);
    mb_add_input(m, NULL, "I", MCP_DTYPE_INT64, 2, id, NULL);
    mb_add_input(m, NULL, "V", MCP_DTYPE_FLOAT, 2, vd, NULL);
    mb_add_input(m, NULL, "C", MCP_DTYPE_FLOAT, 2, cd2, NULL);
    static const int64_t starts[2] = {2, -3}, ends[2] = {INT64_MAX, -1}, axes12[2] = {1, 2}, split15[2] = {1, 5},
                         ax1[1] = {1}, eshape[3] = {2, 1, 4}, reps[2] = {2, 3}, cshape[2] = {2, 3}, perm[4] = {0, 2, 3, 1},
                         vals[3] = {7, 8, 9}, pads[4] = {0, 1, 2, 3};
    add_i64_init(m, NULL, "starts", starts, 2);
    add_i64_init(m, NULL, "ends", ends, 2);
    add_i64_init(m, NULL, "axes12", axes12, 2);
    add_i64_init(m, NULL, "split15", split15, 2);
    add_i64_init(m, NULL, "ax1", ax1, 1);
    add_i64_init(m, NULL, "eshape", eshape, 3);
    add_i64_init(m, NULL, "reps", reps, 2);
    add_i64_init(m, NULL, "cshape", cshape, 2);
    add_i64_init(m, NULL, "pads", pads, 4);

    Onnx__NodeProto *n = mb_add_node(m, NULL, "Shape", "shape", "X", "SH");
    mb_attr_int(m, n, "start", 1);
    mb_attr_int(m, n, "end", -1);
    mb_add_node(m, NULL, "Size", "size", "X", "SZ");
    n = mb_add_node(m, NULL, "Concat", "concat", "A,B,A", "CC");
    mb_attr_int(m, n, "axis", -1);
    n = mb_add_node(m, NULL, "Transpose", "transpose", "X", "TR");
    mb_attr_ints(m, n, "perm", perm, 4);
    mb_add_node(m, NULL, "Transpose", "transpose_default", "X", "TD");
    n = mb_add_node(m, NULL, "Gather", "gather", "Y,I", "GA");
    mb_attr_int(m, n, "axis", 1);
    n = mb_add_node(m, NULL, "Split", "split_eq", "Y", "SP0,SP1");
    mb_attr_int(m, n, "axis", 1);
    n = mb_add_node(m, NULL, "Split", "split_var", "C,split15", "SV0,SV1");
    mb_attr_int(m, n, "axis", 0);
    mb_add_node(m, NULL, "Slice", "slice", "Y,starts,ends,axes12", "SL");
    n = mb_add_node(m, NULL, "ReduceMean", "rmean", "Y", "RM");
    mb_attr_ints(m, n, "axes", ax1, 1);
    mb_attr_int(m, n, "keepdims", 0);
    mb_add_node(m, NULL, "ReduceSum", "rsum", "Y,ax1", "RS");
    mb_add_node(m, NULL, "ReduceMax", "rmax_all", "Y", "RA");
    n = mb_add_node(m, NULL, "ArgMax", "argmax", "Y", "AM");
    mb_attr_int(m, n, "axis", -1);
    mb_attr_int(m, n, "keepdims", 0);
    n = mb_add_node(m, NULL, "Cast", "cast", "Y", "CA");
    mb_attr_int(m, n, "to", MCP_DTYPE_INT32);
    n = mb_add_node(m, NULL, "Constant", "const", "", "K");
    mb_attr_ints(m, n, "value_ints", vals, 3);
    n = mb_add_node(m, NULL, "ConstantOfShape", "cos", "cshape", "CS");
    int32_t one = 1;
    mb_attr_tensor(m, n, "value", mb_new_tensor(m, NULL, MCP_DTYPE_INT32, 1, D1, &one, sizeof one));
    mb_add_node(m, NULL, "Expand", "expand", "V,eshape", "EX");
    mb_add_node(m, NULL, "Tile", "tile", "A,reps", "TI");
    mb_add_node(m, NULL, "Pad", "pad", "V,pads", "PD");
    mb_add_node(m, NULL, "Identity", "identity", "A", "ID");
    mb_add_node(m, NULL, "Equal", "eq", "A,A", "EQ");
    mb_add_node(m, NULL, "Not", "not", "EQ", "NT");
    mb_add_node(m, NULL, "QuantizeLinear", "q", "Y,one_f", "QY");
    mb_add_node(m, NULL, "DequantizeLinear", "dq", "QY,one_f", "DY");
    float onef = 1.0f;
    mb_add_initializer(m, NULL, "one_f", MCP_DTYPE_FLOAT, 0, NULL, &onef, sizeof onef);

    char msg[512];
    mcp_graph *g;
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (g) {
        CHECK_TYPE(g, "SH", "int64[2]");
        CHECK_TYPE(g, "SZ", "int64[]");
        CHECK_TYPE(g, "CC", "float32[N,11]");
        CHECK_TYPE(g, "TR", "float32[N,4,5,3]");
        CHECK_TYPE(g, "TD", "float32[5,4,3,N]");
        CHECK_TYPE(g, "GA", "float32[N,2,2,8]");
        CHECK_TYPE(g, "SP0", "float32[N,5,8]");
        CHECK_TYPE(g, "SP1", "float32[N,5,8]");
        CHECK_TYPE(g, "SV0", "float32[1,7]");
        CHECK_TYPE(g, "SV1", "float32[5,7]");
        CHECK_TYPE(g, "SL", "float32[N,8,2]");
        CHECK_TYPE(g, "RM", "float32[N,8]");
        CHECK_TYPE(g, "RS", "float32[N,1,8]");
        CHECK_TYPE(g, "RA", "float32[1,1,1]");
        CHECK_TYPE(g, "AM", "int64[N,10]");
        CHECK_TYPE(g, "CA", "int32[N,10,8]");
        CHECK_TYPE(g, "K", "int64[3]");
        CHECK_TYPE(g, "CS", "int32[2,3]");
        CHECK_TYPE(g, "EX", "float32[2,3,4]");
        CHECK_TYPE(g, "TI", "float32[?,9]");
        CHECK_TYPE(g, "PD", "float32[5,5]");
        CHECK_TYPE(g, "ID", "float32[N,3]");
        CHECK_TYPE(g, "EQ", "bool[N,3]");
        CHECK_TYPE(g, "NT", "bool[N,3]");
        CHECK_TYPE(g, "QY", "uint8[N,10,8]");
        CHECK_TYPE(g, "DY", "float32[N,10,8]");
    }
    mcp_graph_free(g);
    mb_model_free(m);
}

/* ---- subgraphs see the refined types of captured values ---- */

static void test_if_subgraph(void)
{
    mb_model *m = mb_model_new(13);
    static const char *const sym[2] = {"N", NULL};
    int64_t xd[2] = {-1, 4};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, sym);
    mb_add_input(m, NULL, "cond", MCP_DTYPE_BOOL, 0, NULL, NULL);
    mb_add_node(m, NULL, "Relu", "pre", "X", "XR");
    Onnx__GraphProto *then_g = mb_new_graph(m, "then");
    mb_add_node(m, then_g, "Sigmoid", "t_sig", "XR", "T1");
    mb_add_output(m, then_g, "T1", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    Onnx__GraphProto *else_g = mb_new_graph(m, "else");
    mb_add_node(m, else_g, "Neg", "e_neg", "XR", "E1");
    mb_add_output(m, else_g, "E1", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "If", "if", "cond", "Z");
    mb_attr_graph(m, n, "then_branch", then_g);
    mb_attr_graph(m, n, "else_branch", else_g);
    mb_add_output(m, NULL, "Z", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);

    char msg[512];
    mcp_graph *g;
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (g) {
        CHECK_TYPE(g, "XR", "float32[N,4]");
        CHECK_TYPE(g, "Z", "float32[N,4]");
        const mcp_attr *a = mcp_node_attr(&g->nodes[1], "then_branch");
        TU_CHECK(a && a->g);
        if (a && a->g) CHECK_TYPE(a->g, "T1", "float32[N,4]");
    }
    mcp_graph_free(g);
    mb_model_free(m);

    /* An error inside a branch names the inner node and the outer one. */
    m = mb_model_new(13);
    int64_t pd[2] = {3, 4}, qd[2] = {5, 4};
    mb_add_input(m, NULL, "P", MCP_DTYPE_FLOAT, 2, pd, NULL);
    mb_add_input(m, NULL, "Q", MCP_DTYPE_FLOAT, 2, qd, NULL);
    mb_add_input(m, NULL, "cond", MCP_DTYPE_BOOL, 0, NULL, NULL);
    then_g = mb_new_graph(m, "then");
    mb_add_node(m, then_g, "Add", "inner_add", "P,Q", "T1");
    mb_add_output(m, then_g, "T1", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    else_g = mb_new_graph(m, "else");
    mb_add_node(m, else_g, "Identity", "e_id", "P", "E1");
    mb_add_output(m, else_g, "E1", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    n = mb_add_node(m, NULL, "If", "outer_if", "cond", "Z");
    mb_attr_graph(m, n, "then_branch", then_g);
    mb_attr_graph(m, n, "else_branch", else_g);
    mb_add_output(m, NULL, "Z", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "inner_add");
    TU_CHECK_CONTAINS(msg, "outer_if");
    mcp_graph_free(g);
    mb_model_free(m);
}

/* ---- malformed nodes are skipped, never a crash ---- */

static void test_malformed_nodes(void)
{
    mb_model *m = mb_model_new(13);
    int64_t xd[2] = {2, 3}, r11[11] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, x3[3] = {2, 3, 4};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mb_add_input(m, NULL, "X3", MCP_DTYPE_FLOAT, 3, x3, NULL);
    mb_add_input(m, NULL, "R11", MCP_DTYPE_FLOAT, 11, r11, NULL);
    mb_add_input(m, NULL, "U", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    static const int64_t ax012[3] = {0, 1, 2};
    add_i64_init(m, NULL, "ax012", ax012, 3);
    float fshape[2] = {3, 2};
    int64_t two[1] = {2};
    mb_add_initializer(m, NULL, "fshape", MCP_DTYPE_FLOAT, 1, two, fshape, sizeof fshape);
    mb_add_node(m, NULL, "Add", "add1", "X", "A1");                 /* one input */
    mb_add_node(m, NULL, "Add", "add0", "", "A0");                  /* no inputs */
    mb_add_node(m, NULL, "Reshape", "r_absent", "X,", "R0");        /* omitted shape */
    mb_add_node(m, NULL, "Reshape", "r_float", "X,fshape", "R1");   /* float shape */
    mb_add_node(m, NULL, "Unsqueeze", "too_deep", "R11,ax012", "T"); /* rank 14 */
    mb_add_node(m, NULL, "Conv", "conv_no_w", "X3", "C");
    mb_add_node(m, NULL, "Gemm", "gemm3", "X3,X3", "G");
    mb_add_node(m, NULL, "Concat", "concat0", "", "CC");
    mb_add_node(m, NULL, "MatMul", "mm_unknown", "U,X", "MM");
    mb_add_node(m, NULL, "Split", "split_no_out", "X", "");
    mb_add_node(m, NULL, "Transpose", "tr", "U", "TU");
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Relu", "relu_custom", "X", "RC");
    mb_node_set_domain(m, n, "com.example");
    mb_add_opset(m, "com.example", 1);

    char msg[512];
    mcp_graph *g;
    TU_CHECK_STATUS(infer(m, &g, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (g) {
        CHECK_TYPE(g, "A1", "float32[2,3]");
        CHECK_TYPE(g, "A0", "?[*]");
        CHECK_TYPE(g, "R0", "float32[*]");
        CHECK_TYPE(g, "R1", "float32[?,?]");
        CHECK_TYPE(g, "T", "float32[*]");
        CHECK_TYPE(g, "C", "float32[2,?,?]");
        CHECK_TYPE(g, "G", "float32[*]");
        CHECK_TYPE(g, "CC", "?[*]");
        CHECK_TYPE(g, "MM", "?[*]");
        CHECK_TYPE(g, "TU", "?[*]");
        CHECK_TYPE(g, "RC", "?[*]");
    }
    mcp_graph_free(g);
    mb_model_free(m);
}

int main(void)
{
    TU_RUN(test_conv_chain);
    TU_RUN(test_reshape);
    TU_RUN(test_broadcast);
    TU_RUN(test_squeeze_unsqueeze_opsets);
    TU_RUN(test_declared_types);
    TU_RUN(test_shape_ops);
    TU_RUN(test_if_subgraph);
    TU_RUN(test_malformed_nodes);
    TU_CHECK_INT(mcp_alloc_live_count(), 0);
    return tu_finish("shape_infer");
}
