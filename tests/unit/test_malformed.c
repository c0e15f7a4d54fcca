/*
 * Malformed models and bad requests: importing and running must fail
 * cleanly (a status, a message that names what is wrong, nothing leaked,
 * never a crash).
 */
#include <stdarg.h>

#include "engine/engine.h"
#include "graph/graph.h"
#include "model_builder.h"
#include "test_util.h"

static char tmp_dir[1024];

/* Packs m and creates a session from memory. On failure *out is NULL. */
static mcp_status load(mb_model *m, const char *base_dir, mcp_session **out, char *msg,
                       size_t cap)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_session_options o = mcp_session_options_default();
    mcp_status st = mcp_session_create_from_memory(buf, len, base_dir, &o, out, msg, cap);
    free(buf);
    return st;
}

/* Expects loading m to fail with `expected` and a message containing each
 * of the NULL-terminated needles. */
static void expect_load_error(int line, mb_model *m, const char *base_dir, mcp_status expected, ...)
{
    char msg[1024] = "";
    mcp_session *s = (mcp_session *)&s; /* must be reset to NULL */
    mcp_status st = load(m, base_dir, &s, msg, sizeof msg);
    tu_checks++;
    if (st == MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, line, "model was accepted");
        mcp_session_destroy(s);
        return;
    }
    if (s != NULL) TU_FAIL_AT(__FILE__, line, "*out not NULL after a failure");
    if (st != expected)
        TU_FAIL_AT(__FILE__, line, "status '%s', expected '%s' (%s)", mcp_status_str(st),
                   mcp_status_str(expected), msg);
    va_list ap;
    va_start(ap, expected);
    for (const char *needle; (needle = va_arg(ap, const char *)) != NULL;)
        if (!strstr(msg, needle)) TU_FAIL_AT(__FILE__, line, "message '%s' lacks '%s'", msg, needle);
    va_end(ap);
}

/* ---- undecodable input ---- */

static void test_empty_and_random(void)
{
    char msg[1024] = "";
    mcp_session *s = NULL;
    mcp_graph *g = NULL;
    mcp_err err = {msg, sizeof msg};

    TU_CHECK_STATUS(mcp_session_create_from_memory("", 0, NULL, NULL, &s, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK(s == NULL);
    TU_CHECK_CONTAINS(msg, "graph");
    TU_CHECK_STATUS(mcp_session_create_from_memory(NULL, 0, NULL, NULL, &s, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK(s == NULL);
    TU_CHECK_STATUS(mcp_onnx_import((const uint8_t *)"", 0, NULL, &g, &err), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK(g == NULL);

    /* A message buffer of size 0 or 1 is respected. */
    char one[1] = {'x'};
    TU_CHECK_STATUS(mcp_session_create_from_memory("", 0, NULL, NULL, &s, one, sizeof one), MCP_STATUS_INVALID_MODEL, NULL);
    TU_CHECK(one[0] == '\0');
    TU_CHECK_STATUS(mcp_session_create_from_memory("", 0, NULL, NULL, &s, NULL, 0), MCP_STATUS_INVALID_MODEL, NULL);

    uint64_t rng = 12345;
    int accepted = 0, silent = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = 1 + (size_t)(tu_rand(&rng) % 400);
        uint8_t *buf = malloc(len);
        for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)tu_rand(&rng);
        msg[0] = '\0';
        if (mcp_session_create_from_memory(buf, len, NULL, NULL, &s, msg, sizeof msg) == MCP_STATUS_OK) {
            accepted++;
            mcp_session_destroy(s);
        } else if (!msg[0] || s != NULL) {
            silent++;
        }
        free(buf);
    }
    TU_CHECK_INT(accepted, 0);
    TU_CHECK_INT(silent, 0);
}

/* A model that exercises more of the decoder than the plain MLP:
 * attributes of several types and a subgraph. */
static mb_model *richer_model(void)
{
    mb_model *m = mb_example_mlp();
    const int64_t perm[] = {1, 0};
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Transpose", "transpose", "Z", "T");
    mb_attr_ints(m, n, "perm", perm, 2);
    n = mb_add_node(m, NULL, "LeakyRelu", "leaky", "T", "L");
    mb_attr_float(m, n, "alpha", 0.125f);
    const int64_t cd[] = {1};
    mb_add_input(m, NULL, "C", MCP_DTYPE_BOOL, 1, cd, NULL);
    Onnx__GraphProto *then_g = mb_new_graph(m, "then");
    mb_add_node(m, then_g, "Identity", "then_id", "L", "TL");
    mb_add_output(m, then_g, "TL", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    Onnx__GraphProto *else_g = mb_new_graph(m, "else");
    mb_add_node(m, else_g, "Neg", "else_neg", "L", "EL");
    mb_add_output(m, else_g, "EL", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    n = mb_add_node(m, NULL, "If", "branch", "C", "R");
    mb_attr_graph(m, n, "then_branch", then_g);
    mb_attr_graph(m, n, "else_branch", else_g);
    mb_add_output(m, NULL, "R", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    return m;
}

static void test_truncated(void)
{
    mb_model *m = richer_model();
    size_t len;
    uint8_t *full = mb_pack(m, &len);
    mb_model_free(m);

    char msg[1024];
    mcp_session *s = NULL;
    TU_CHECK_STATUS(mcp_session_create_from_memory(full, len, NULL, NULL, &s, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_session_destroy(s);

    int accepted = 0, silent = 0;
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan catches overreads */
        memcpy(copy, full, cut);
        msg[0] = '\0';
        s = NULL;
        mcp_status st = mcp_session_create_from_memory(copy, cut, NULL, NULL, &s, msg, sizeof msg);
        if (st == MCP_STATUS_OK) {
            accepted++;
            mcp_session_destroy(s);
        } else if (!msg[0] || s != NULL) {
            silent++;
        }
        mcp_err err = {msg, sizeof msg};
        mcp_graph *g = NULL;
        if (mcp_onnx_import(copy, cut, NULL, &g, &err) == MCP_STATUS_OK) mcp_graph_free(g);
        else TU_CHECK(g == NULL);
        free(copy);
    }
    /* A cut can fall on a field boundary and still decode (a model without
     * its trailing fields), but never without a message on failure. */
    TU_CHECK(accepted < (int)len / 10);
    TU_CHECK_INT(silent, 0);

    /* Random byte changes: loading either works or fails with a message. */
    uint64_t rng = 777;
    silent = 0;
    for (int iter = 0; iter < 3000; iter++) {
        uint8_t *copy = malloc(len);
        memcpy(copy, full, len);
        int flips = 1 + (int)(tu_rand(&rng) % 3);
        for (int k = 0; k < flips; k++) copy[tu_rand(&rng) % len] = (uint8_t)tu_rand(&rng);
        msg[0] = '\0';
        s = NULL;
        if (mcp_session_create_from_memory(copy, len, NULL, NULL, &s, msg, sizeof msg) == MCP_STATUS_OK)
            mcp_session_destroy(s);
        else if (!msg[0] || s != NULL)
            silent++;
        free(copy);
    }
    TU_CHECK_INT(silent, 0);
    free(full);
}

/* ---- structural errors ---- */

static void test_unknown_op(void)
{
    mb_model *m = mb_model_new(13);
    const int64_t d[] = {2};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "Frobnicate", "mystery_node", "X", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_UNSUPPORTED, "mystery_node", "Frobnicate",
                      "ai.onnx", "13", (char *)NULL);
    mb_model_free(m);

    /* A custom domain, imported at version 2. */
    m = mb_model_new(13);
    mb_add_opset(m, "com.example", 2);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Relu", "custom_relu", "X", "Y");
    mb_node_set_domain(m, n, "com.example");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_UNSUPPORTED, "custom_relu", "Relu",
                      "com.example", "2", (char *)NULL);
    mb_model_free(m);

    /* A domain the model never imports. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    n = mb_add_node(m, NULL, "Relu", "orphan", "X", "Y");
    mb_node_set_domain(m, n, "com.missing");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "orphan", "com.missing", (char *)NULL);
    mb_model_free(m);

    /* An unnamed node is named by its position. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "Relu", NULL, "X", "Y");
    mb_add_node(m, NULL, "NoSuchOp", NULL, "Y", "Z");
    mb_add_output(m, NULL, "Z", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_UNSUPPORTED, "#1", "NoSuchOp", (char *)NULL);
    mb_model_free(m);

    /* An empty op_type. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "", "blank", "X", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "blank", "op_type", (char *)NULL);
    mb_model_free(m);
}

static void test_undefined_and_duplicate_names(void)
{
    const int64_t d[] = {2};
    float w[2] = {1, 2};

    mb_model *m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "Add", "adder", "X,ghost", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "adder", "ghost", (char *)NULL);
    mb_model_free(m);

    /* Nodes out of topological order: the input is produced later. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "Relu", "early", "late", "Y");
    mb_add_node(m, NULL, "Relu", "producer", "X", "late");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "early", "late", (char *)NULL);
    mb_model_free(m);

    /* Two nodes writing the same output. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "Relu", "first", "X", "Y");
    mb_add_node(m, NULL, "Neg", "second", "X", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "second", "'Y'", "already defined", (char *)NULL);
    mb_model_free(m);

    /* A node output that reuses a graph input's or an initializer's name. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "Relu", "clobber", "X", "X");
    mb_add_output(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "clobber", "'X'", (char *)NULL);
    mb_model_free(m);
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 1, d, w, sizeof w);
    mb_add_node(m, NULL, "Relu", "clobber_w", "X", "W");
    mb_add_output(m, NULL, "W", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "clobber_w", "'W'", (char *)NULL);
    mb_model_free(m);

    /* Duplicate initializers and duplicate graph inputs. */
    m = mb_model_new(13);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 1, d, w, sizeof w);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 1, d, w, sizeof w);
    mb_add_output(m, NULL, "W", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "'W'", "twice", (char *)NULL);
    mb_model_free(m);
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "Relu", "r", "X", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "'X'", "twice", (char *)NULL);
    mb_model_free(m);

    /* A graph output nothing produces; an input without a name. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "Relu", "r", "X", "Y");
    mb_add_output(m, NULL, "nowhere", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "nowhere", (char *)NULL);
    mb_model_free(m);
    m = mb_model_new(13);
    mb_add_input(m, NULL, "", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "no name", (char *)NULL);
    mb_model_free(m);
}

static void test_opsets_and_graph(void)
{
    const int64_t d[] = {2};
    mb_model *m = mb_model_new(0); /* no opset_import at all */
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_node(m, NULL, "Relu", "r", "X", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "opset_import", (char *)NULL);
    /* Importing only another domain leaves the default domain unknown. */
    mb_add_opset(m, "com.other", 1);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "'r'", "opset_import", (char *)NULL);
    mb_model_free(m);

    /* A model without a graph. */
    m = mb_model_new(13);
    mb_model_proto(m)->graph = NULL;
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "graph", (char *)NULL);
    mb_model_free(m);

    /* Subgraphs nested far too deep fail instead of exhausting the stack. */
    m = mb_model_new(13);
    const int64_t one[] = {1};
    mb_add_input(m, NULL, "C", MCP_DTYPE_BOOL, 1, one, NULL);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d, NULL);
    Onnx__GraphProto *g = mb_main_graph(m);
    for (int depth = 0; depth < 100; depth++) {
        char name[32];
        snprintf(name, sizeof name, "if_%d", depth);
        Onnx__NodeProto *n = mb_add_node(m, g, "If", name, "C", depth ? "inner" : "Y");
        Onnx__GraphProto *then_g = mb_new_graph(m, "then"), *else_g = mb_new_graph(m, "else");
        mb_add_node(m, else_g, "Identity", "else_id", "X", "inner");
        mb_add_output(m, else_g, "inner", MCP_DTYPE_FLOAT, -1, NULL, NULL);
        mb_attr_graph(m, n, "then_branch", then_g);
        mb_attr_graph(m, n, "else_branch", else_g);
        mb_add_output(m, g, depth ? "inner" : "Y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
        g = then_g;
    }
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "node 'if_0' (If)", (char *)NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "nested", (char *)NULL);
    mb_model_free(m);
}

/* ---- tensors in the model ---- */

static void test_bad_initializers(void)
{
    const int64_t d22[] = {2, 2};
    float w[5] = {1, 2, 3, 4, 5}; /* one spare for the too-long case */

    mb_model *m = mb_model_new(13);
    mb_add_initializer(m, NULL, "weights_w", MCP_DTYPE_FLOAT, 2, d22, w, 12);
    mb_add_output(m, NULL, "weights_w", MCP_DTYPE_FLOAT, 2, d22, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "weights_w", (char *)NULL);
    mb_model_free(m);

    m = mb_model_new(13);
    mb_add_initializer(m, NULL, "long_w", MCP_DTYPE_FLOAT, 2, d22, w, 20);
    mb_add_output(m, NULL, "long_w", MCP_DTYPE_FLOAT, 2, d22, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "long_w", (char *)NULL);
    mb_model_free(m);

    /* A large declared shape with a few bytes of data. */
    m = mb_model_new(13);
    const int64_t big[] = {1 << 12, 1 << 12};
    mb_add_initializer(m, NULL, "big_w", MCP_DTYPE_FLOAT, 2, big, w, 4);
    mb_add_output(m, NULL, "big_w", MCP_DTYPE_FLOAT, 2, big, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "big_w", (char *)NULL);
    mb_model_free(m);
    /* A huge declared shape must be refused before any allocation (a 4 TB
     * calloc would abort under ASan). */
    m = mb_model_new(13);
    const int64_t huge[] = {1 << 20, 1 << 20};
    mb_add_initializer(m, NULL, "huge_w", MCP_DTYPE_FLOAT, 2, huge, w, 4);
    mb_add_output(m, NULL, "huge_w", MCP_DTYPE_FLOAT, 2, huge, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "huge_w", (char *)NULL);
    mb_model_free(m);
    /* The same through typed fields, and a shape whose product overflows. */
    m = mb_model_new(13);
    Onnx__TensorProto *ht = mb_add_initializer(m, NULL, "huge_typed", MCP_DTYPE_FLOAT, 2, huge, NULL, 0);
    ht->has_raw_data = 0;
    ht->n_float_data = 1;
    ht->float_data = w;
    mb_add_output(m, NULL, "huge_typed", MCP_DTYPE_FLOAT, 2, huge, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "huge_typed", (char *)NULL);
    mb_model_free(m);
    m = mb_model_new(13);
    const int64_t overflow[] = {INT64_MAX / 2, INT64_MAX / 2, 4};
    mb_add_initializer(m, NULL, "overflow_w", MCP_DTYPE_FLOAT, 3, overflow, w, 4);
    mb_add_output(m, NULL, "overflow_w", MCP_DTYPE_FLOAT, 3, overflow, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "overflow_w", (char *)NULL);
    mb_model_free(m);

    /* Typed fields with the wrong count. */
    m = mb_model_new(13);
    Onnx__TensorProto *t = mb_add_initializer(m, NULL, "typed_w", MCP_DTYPE_FLOAT, 2, d22, NULL, 0);
    t->has_raw_data = 0;
    t->n_float_data = 3;
    t->float_data = w;
    mb_add_output(m, NULL, "typed_w", MCP_DTYPE_FLOAT, 2, d22, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "typed_w", (char *)NULL);
    mb_model_free(m);

    /* An invalid dtype, a negative dimension, a missing name. */
    m = mb_model_new(13);
    t = mb_add_initializer(m, NULL, "odd_type", MCP_DTYPE_FLOAT, 2, d22, w, 16);
    t->data_type = 99;
    mb_add_output(m, NULL, "odd_type", MCP_DTYPE_FLOAT, 2, d22, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "odd_type", "99", (char *)NULL);
    mb_model_free(m);
    m = mb_model_new(13);
    const int64_t negd[] = {-2, 2};
    mb_add_initializer(m, NULL, "neg_dim", MCP_DTYPE_FLOAT, 2, negd, w, 16);
    mb_add_output(m, NULL, "neg_dim", MCP_DTYPE_FLOAT, 2, d22, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "neg_dim", "negative", (char *)NULL);
    mb_model_free(m);
    m = mb_model_new(13);
    mb_add_initializer(m, NULL, "", MCP_DTYPE_FLOAT, 2, d22, w, 16);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "no name", (char *)NULL);
    mb_model_free(m);

    /* An initializer as a node attribute (Constant) with a bad length names
     * the node too. */
    m = mb_model_new(13);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Constant", "const_node", NULL, "K");
    Onnx__TensorProto *kt = mb_new_tensor(m, "k_value", MCP_DTYPE_FLOAT, 2, d22, w, 8);
    mb_attr_tensor(m, n, "value", kt);
    mb_add_output(m, NULL, "K", MCP_DTYPE_FLOAT, 2, d22, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "const_node", "k_value", (char *)NULL);
    mb_model_free(m);
}

/* Expects m to load (and frees the session). */
static void expect_load_ok(int line, mb_model *m)
{
    char msg[1024] = "";
    mcp_session *s = NULL;
    mcp_status st = load(m, NULL, &s, msg, sizeof msg);
    tu_checks++;
    if (st != MCP_STATUS_OK) TU_FAIL_AT(__FILE__, line, "model refused: %s", msg);
    mcp_session_destroy(s);
}

/* ONNX's element types 17-26 (float8, int4, ...) load where the engine
 * implements them; an operator that does not handle one is refused at load,
 * naming the node, the value and the type; packed data of the wrong length
 * is refused naming the tensor; numbers ONNX does not define are refused at
 * load, naming the value, tensor or node attribute and the type: never
 * imported as "undefined". */
static void test_unknown_element_types(void)
{
    const int64_t d2[] = {2}, d22[] = {2, 2}, d3[] = {3};
    const uint8_t raw[4] = {0};

    mb_model *m = mb_model_new(21);
    mb_add_input(m, NULL, "X8", MCP_DTYPE_FLOAT8E4M3FN, 1, d2, NULL);
    mb_add_node(m, NULL, "Identity", "id", "X8", "Y8");
    mb_add_output(m, NULL, "Y8", MCP_DTYPE_FLOAT8E4M3FN, 1, d2, NULL);
    expect_load_ok(__LINE__, m);
    mb_model_free(m);

    m = mb_model_new(21);
    mb_add_input(m, NULL, "X4", MCP_DTYPE_INT4, 1, d2, NULL);
    mb_add_node(m, NULL, "Relu", "relu", "X4", "Y4");
    mb_add_output(m, NULL, "Y4", MCP_DTYPE_INT4, 1, d2, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_UNSUPPORTED, "node 'relu' (Relu)", "value 'X4'", "int4",
                      (char *)NULL);
    mb_model_free(m);

    /* Packed types move whole: Transpose takes float8, not int4. */
    m = mb_model_new(21);
    mb_add_input(m, NULL, "X4", MCP_DTYPE_UINT4, 2, d22, NULL);
    mb_add_node(m, NULL, "Transpose", "tr", "X4", "Y4");
    mb_add_output(m, NULL, "Y4", MCP_DTYPE_UINT4, 2, d22, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_UNSUPPORTED, "node 'tr' (Transpose)", "uint4", (char *)NULL);
    mb_model_free(m);

    /* A 2x2 uint4 initializer is 2 bytes: 4 are refused, 2 load. */
    m = mb_model_new(21);
    mb_add_initializer(m, NULL, "W4", MCP_DTYPE_UINT4, 2, d22, raw, sizeof raw);
    mb_add_output(m, NULL, "W4", MCP_DTYPE_UINT4, 2, d22, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "tensor 'W4'", "4 bytes", "need 2", (char *)NULL);
    mb_model_free(m);
    m = mb_model_new(21);
    mb_add_initializer(m, NULL, "W4", MCP_DTYPE_UINT4, 2, d22, raw, 2);
    mb_add_output(m, NULL, "W4", MCP_DTYPE_UINT4, 2, d22, NULL);
    expect_load_ok(__LINE__, m);
    mb_model_free(m);
    /* Three int4 take two bytes; one is short. */
    m = mb_model_new(21);
    mb_add_initializer(m, NULL, "W3", MCP_DTYPE_INT4, 1, d3, raw, 1);
    mb_add_output(m, NULL, "W3", MCP_DTYPE_INT4, 1, d3, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "tensor 'W3'", (char *)NULL);
    mb_model_free(m);

    m = mb_model_new(23);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Cast", "to_fp4", "X", "Y");
    mb_attr_int(m, n, "to", 23);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    expect_load_ok(__LINE__, m);
    mb_model_free(m);

    m = mb_model_new(24);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
    n = mb_add_node(m, NULL, "Cast", "to_e8m0", "X", "Y");
    mb_attr_int(m, n, "to", 24);
    mb_attr_string(m, n, "round_mode", "sideways");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "node 'to_e8m0' (Cast)", "round_mode", (char *)NULL);
    mb_model_free(m);

    /* A dtype attribute may name one; the operator must still handle it. */
    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, d22, NULL);
    n = mb_add_node(m, NULL, "EyeLike", "eye8", "X", "Y");
    mb_attr_int(m, n, "dtype", 24);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_UNSUPPORTED, "node 'eye8' (EyeLike)", "float8e8m0", (char *)NULL);
    mb_model_free(m);

    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
    n = mb_add_node(m, NULL, "Cast", "to_27", "X", "Y");
    mb_attr_int(m, n, "to", 27);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "node 'to_27' (Cast)", "element type 27",
                      "ONNX does not define", (char *)NULL);
    mb_model_free(m);

    m = mb_model_new(13);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, d22, NULL);
    n = mb_add_node(m, NULL, "EyeLike", "eye", "X", "Y");
    mb_attr_int(m, n, "dtype", 99);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "node 'eye' (EyeLike)", "element type 99",
                      "ONNX does not define", (char *)NULL);
    mb_model_free(m);

    m = mb_model_new(13);
    mb_add_input(m, NULL, "Xbad", (mcp_dtype)1000, 1, d2, NULL);
    mb_add_node(m, NULL, "Identity", "id", "Xbad", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d2, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "value 'Xbad'", "element type 1000", (char *)NULL);
    mb_model_free(m);
}

static void test_external_data(void)
{
    char path[2048], msg[1024];
    const int64_t d[] = {2};
    float w[2] = {1.5f, -2.5f};
    uint8_t file[64];
    memset(file, 0xee, sizeof file);
    memcpy(file + 16, w, sizeof w);
    TU_REQUIRE(mb_write_bytes(tu_path(path, sizeof path, tmp_dir, "weights.bin"), file, sizeof file) == 0);
    TU_REQUIRE(mb_write_bytes(tu_path(path, sizeof path, tmp_dir, "..weights.bin"), file, sizeof file) == 0);

    static const struct {
        const char *location;
        long long offset, length;
        mcp_status status;
        const char *needle;
    } cases[] = {
        {"/etc/passwd", 0, 8, MCP_STATUS_INVALID_MODEL, "/etc/passwd"},
        {"../weights.bin", 16, 8, MCP_STATUS_INVALID_MODEL, "../weights.bin"},
        {"sub/../../weights.bin", 16, 8, MCP_STATUS_INVALID_MODEL, "sub/../../weights.bin"},
        {"sub/..", 16, 8, MCP_STATUS_INVALID_MODEL, "sub/.."},
        {"..", 16, 8, MCP_STATUS_INVALID_MODEL, NULL},
        {"", 16, 8, MCP_STATUS_INVALID_MODEL, NULL},
        {"weights.bin", 65, 8, MCP_STATUS_INVALID_MODEL, "offset"},
        {"weights.bin", 60, 8, MCP_STATUS_INVALID_MODEL, "shorter"},
        {"weights.bin", 16, 4, MCP_STATUS_INVALID_MODEL, NULL},   /* too short */
        {"weights.bin", 16, -1, MCP_STATUS_INVALID_MODEL, NULL},  /* rest of file: too long */
        {"no_such_file.bin", 0, 8, MCP_STATUS_IO_ERROR, "no_such_file.bin"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mb_model *m = mb_model_new(13);
        Onnx__TensorProto *t = mb_add_initializer(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, w, sizeof w);
        mb_tensor_set_external(m, t, cases[i].location, cases[i].offset, cases[i].length);
        mb_add_output(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, NULL);
        mcp_session *s = NULL;
        mcp_status st = load(m, tmp_dir, &s, msg, sizeof msg);
        if (st == MCP_STATUS_OK) mcp_session_destroy(s);
        if (st != cases[i].status)
            TU_FAIL_AT(__FILE__, __LINE__, "case %zu (%s): status '%s' (%s)", i, cases[i].location,
                       mcp_status_str(st), msg);
        TU_CHECK_CONTAINS(msg, "ext_w");
        if (cases[i].needle) TU_CHECK_CONTAINS(msg, cases[i].needle);
        mb_model_free(m);
    }

    /* No location key, a negative offset, and no folder to resolve against. */
    mb_model *m = mb_model_new(13);
    Onnx__TensorProto *t = mb_add_initializer(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, w, sizeof w);
    mb_tensor_set_external(m, t, NULL, 16, 8);
    mb_add_output(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, tmp_dir, MCP_STATUS_INVALID_MODEL, "ext_w", "location", (char *)NULL);
    mb_model_free(m);
    m = mb_model_new(13);
    t = mb_add_initializer(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, w, sizeof w);
    mb_tensor_set_external(m, t, "weights.bin", -1, 8);
    mb_tensor_add_external_key(m, t, "offset", "-16");
    mb_add_output(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, tmp_dir, MCP_STATUS_INVALID_MODEL, "ext_w", "negative", (char *)NULL);
    mb_model_free(m);
    m = mb_model_new(13);
    t = mb_add_initializer(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, w, sizeof w);
    mb_tensor_set_external(m, t, "weights.bin", 16, 8);
    mb_add_output(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "ext_w", "folder", (char *)NULL);
    /* The same model with the folder loads, as does a file name that merely
     * starts with two dots. */
    mcp_session *s = NULL;
    TU_CHECK_STATUS(load(m, tmp_dir, &s, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_session_destroy(s);
    mb_model_free(m);
    m = mb_model_new(13);
    t = mb_add_initializer(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, w, sizeof w);
    mb_tensor_set_external(m, t, "..weights.bin", 16, 8);
    mb_add_output(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, NULL);
    TU_CHECK_STATUS(load(m, tmp_dir, &s, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_session_destroy(s);
    mb_model_free(m);

    m = mb_model_new(13);
    t = mb_add_initializer(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, w, sizeof w);
    mb_tensor_set_external(m, t, "weights.bin", 8, -1);
    mb_tensor_add_external_key(m, t, "length", "9223372036854775807");
    mb_add_output(m, NULL, "ext_w", MCP_DTYPE_FLOAT, 1, d, NULL);
    expect_load_error(__LINE__, m, tmp_dir, MCP_STATUS_INVALID_MODEL, "ext_w", (char *)NULL);
    mb_model_free(m);

    const char *names[] = {"weights.bin", "..weights.bin"};
    tu_remove_dir(tmp_dir, names, 2);
}

/* ---- bad requests ---- */

static void test_bad_runs(void)
{
    char msg[1024] = "";
    mb_model *m = mb_example_mlp();
    mcp_session *s = NULL;
    mcp_status st = load(m, NULL, &s, msg, sizeof msg);
    mb_model_free(m);
    TU_REQUIRE_OK(st, msg);

    const int64_t d13[] = {1, 3}, d24[] = {2, 4}, d3[] = {3};
    float xf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t xi[3] = {1, 2, 3};
    mcp_value *good = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, d13, xf, msg, sizeof msg);
    mcp_value *wrong_type = mcp_value_create_tensor(MCP_DTYPE_INT64, 2, d13, xi, msg, sizeof msg);
    mcp_value *wrong_shape = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, d24, xf, msg, sizeof msg);
    mcp_value *wrong_rank = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 1, d3, xf, msg, sizeof msg);
    TU_REQUIRE(good && wrong_type && wrong_shape && wrong_rank);

    mcp_value *outs[3] = {NULL, NULL, NULL};
    const char *x_name[] = {"X"}, *q_name[] = {"Q"}, *two_x[] = {"X", "X"};

    st = mcp_session_run(s, 1, q_name, &good, 0, NULL, outs, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'Q'");
    TU_CHECK_CONTAINS(msg, "'X'"); /* lists the real inputs */
    TU_CHECK(outs[0] == NULL && outs[1] == NULL);

    st = mcp_session_run(s, 0, NULL, NULL, 0, NULL, outs, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "missing input 'X'");
    TU_CHECK(outs[0] == NULL && outs[1] == NULL);

    st = mcp_session_run(s, 1, x_name, &wrong_type, 0, NULL, outs, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'X'");
    TU_CHECK_CONTAINS(msg, "int64");
    TU_CHECK_CONTAINS(msg, "float32");

    st = mcp_session_run(s, 1, x_name, &wrong_shape, 0, NULL, outs, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'X'");
    TU_CHECK_CONTAINS(msg, "[2,4]");
    TU_CHECK_CONTAINS(msg, "[batch,3]");

    st = mcp_session_run(s, 1, x_name, &wrong_rank, 0, NULL, outs, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'X'");
    TU_CHECK_CONTAINS(msg, "[3]");

    mcp_value *twice[] = {good, good};
    st = mcp_session_run(s, 2, two_x, twice, 0, NULL, outs, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'X'");
    TU_CHECK_CONTAINS(msg, "twice");

    const char *bad_out[] = {"Y", "nope"};
    st = mcp_session_run(s, 1, x_name, &good, 2, bad_out, outs, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'nope'");

    /* After all those failures the session still runs. */
    st = mcp_session_run(s, 1, x_name, &good, 0, NULL, outs, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
    TU_CHECK(outs[0] != NULL && outs[1] != NULL);
    mcp_value_destroy(outs[0]);
    mcp_value_destroy(outs[1]);

    mcp_value_destroy(good);
    mcp_value_destroy(wrong_type);
    mcp_value_destroy(wrong_shape);
    mcp_value_destroy(wrong_rank);
    mcp_session_destroy(s);
}

/* Operators after opset 17 and ai.onnx.ml ops: attributes they cannot honour
 * fail the load, naming the node and the attribute. */
static void test_newer_op_attributes(void)
{
    const int64_t d[] = {2};
    struct {
        const char *op, *domain, *attr, *value;
        int64_t opset, ml_opset, int_value;
        mcp_status expected;
        const char *needle;
    } cases[] = {
        {"BitCast", "", "to", NULL, 26, 0, MCP_DTYPE_STRING, MCP_STATUS_UNSUPPORTED, "'to'"},
        {"BitCast", "", "to", NULL, 26, 0, MCP_DTYPE_INT16, MCP_STATUS_INVALID_MODEL, "bit width"},
        {"TensorScatter", "", "mode", "sideways", 24, 0, 0, MCP_STATUS_INVALID_MODEL, "mode"},
        {"RegexFullMatch", "", "pattern", "(?i)abc", 20, 0, 0, MCP_STATUS_UNSUPPORTED, "(?"},
        {"RegexFullMatch", "", "pattern", "\\bword", 20, 0, 0, MCP_STATUS_UNSUPPORTED, "\\b"},
        {"RegexFullMatch", "", "pattern", "a**", 20, 0, 0, MCP_STATUS_UNSUPPORTED, "stacked"},
        {"RegexFullMatch", "", "pattern", "(ab", 20, 0, 0, MCP_STATUS_INVALID_MODEL, "unclosed"},
        /* Each count is within RE2's 1000, their product is not: glibc
         * would expand it to 10^12 copies. */
        {"RegexFullMatch", "", "pattern", "((((a{1000}){1000}){1000}){1000})", 20, 0, 0, MCP_STATUS_INVALID_MODEL,
         "'pattern'"},
        {"RegexFullMatch", "", "pattern", "(a{2,1000}){2,}", 20, 0, 0, MCP_STATUS_INVALID_MODEL, "multiply"},
        /* Chained optional copies: regcomp's time grows with their square. */
        {"RegexFullMatch", "", "pattern", "(a?){1000}(b?){1000}(c?){1000}", 20, 0, 0, MCP_STATUS_UNSUPPORTED,
         "'pattern'"},
        /* BitCast-26 takes the packed types, at their own bit width. */
        {"BitCast", "", "to", NULL, 26, 0, MCP_DTYPE_INT4, MCP_STATUS_INVALID_MODEL, "bit width"},
        {"TreeEnsemble", "ai.onnx.ml", NULL, NULL, 21, 5, 0, MCP_STATUS_INVALID_MODEL, "nodes_featureids"},
        {"LabelEncoder", "ai.onnx.ml", NULL, NULL, 21, 4, 0, MCP_STATUS_INVALID_MODEL, "'keys_*'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mb_model *m = mb_model_new(cases[i].opset);
        if (cases[i].ml_opset) mb_add_opset(m, "ai.onnx.ml", cases[i].ml_opset);
        bool strings = strcmp(cases[i].op, "RegexFullMatch") == 0 || strcmp(cases[i].op, "LabelEncoder") == 0;
        mcp_dtype in = strings ? MCP_DTYPE_STRING : MCP_DTYPE_FLOAT;
        mcp_dtype out = strcmp(cases[i].op, "RegexFullMatch") == 0 ? MCP_DTYPE_BOOL
                        : strcmp(cases[i].op, "LabelEncoder") == 0 ? MCP_DTYPE_INT64
                        : strcmp(cases[i].op, "BitCast") == 0 ? (mcp_dtype)cases[i].int_value
                                                               : MCP_DTYPE_FLOAT;
        bool scatter = strcmp(cases[i].op, "TensorScatter") == 0;
        const int64_t d2[] = {2, 2};
        mb_add_input(m, NULL, "X", in, scatter ? 2 : 1, scatter ? d2 : d, NULL);
        if (scatter) mb_add_input(m, NULL, "U", MCP_DTYPE_FLOAT, 2, d2, NULL);
        Onnx__NodeProto *n = mb_add_node(m, NULL, cases[i].op, "newer_node", scatter ? "X,U" : "X", "Y");
        if (*cases[i].domain) mb_node_set_domain(m, n, cases[i].domain);
        if (cases[i].attr && cases[i].value)
            mb_attr_string(m, n, cases[i].attr, cases[i].value);
        else if (cases[i].attr)
            mb_attr_int(m, n, cases[i].attr, cases[i].int_value);
        mb_add_output(m, NULL, "Y", out, scatter ? 2 : 1, scatter ? d2 : d, NULL);
        expect_load_error(__LINE__, m, NULL, cases[i].expected, "newer_node", cases[i].op, cases[i].needle,
                          (char *)NULL);
        mb_model_free(m);
    }
}

/* Loads m (and frees it), runs the session once on the named inputs and
 * returns the status of whichever failed first; the message in msg. */
static mcp_status run_one(mb_model *m, int n_in, const char *const *names, mcp_value **in, mcp_value **out,
                          char *msg, size_t cap)
{
    mcp_session *s = NULL;
    mcp_status st = load(m, NULL, &s, msg, cap);
    mb_model_free(m);
    if (st != MCP_STATUS_OK) return st;
    st = mcp_session_run(s, n_in, names, in, 0, NULL, out, msg, cap);
    mcp_session_destroy(s);
    return st;
}

/* Empty tensors with a huge dim ((0, 2^62)) pass the size check, since the
 * running product is already 0; kernels whose loops are bounded by the
 * other dims (here: the 2^62 slices after axis 0) must return at once
 * instead of looping 2^62 times. */
static void test_newer_op_empty_inputs(void)
{
    char msg[1024] = "";
    const int64_t big = (int64_t)1 << 62;
    const int64_t unk2[] = {-1, -1}, unk3[] = {-1, -1, -1}, unk1[] = {-1};
    struct {
        const char *op, *domain;
        int64_t opset, ml_opset;
        int rank;
        int64_t dims[3];
        const char *extra; /* second input: "axis" (int64 scalar 0), "ind" (int64 [0]), "upd" (same as X) */
    } cases[] = {
        {"LpNormalization", "", 22, 0, 2, {0, big}, NULL},
        {"CumSum", "", 14, 0, 2, {0, big}, "axis"},
        {"CumProd", "", 26, 0, 2, {0, big}, "axis"},
        {"ArrayFeatureExtractor", "ai.onnx.ml", 17, 1, 2, {0, big}, "ind"},
        {"TensorScatter", "", 24, 0, 3, {0, big, 1}, "upd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mb_model *m = mb_model_new(cases[i].opset);
        if (cases[i].ml_opset) mb_add_opset(m, "ai.onnx.ml", cases[i].ml_opset);
        const int64_t *unk = cases[i].rank == 3 ? unk3 : unk2;
        mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, cases[i].rank, unk, NULL);
        const char *extra = cases[i].extra;
        bool upd = extra && strcmp(extra, "upd") == 0, ind = extra && strcmp(extra, "ind") == 0;
        if (upd) mb_add_input(m, NULL, "E", MCP_DTYPE_FLOAT, cases[i].rank, unk, NULL);
        if (ind) mb_add_input(m, NULL, "E", MCP_DTYPE_INT64, 1, unk1, NULL);
        if (extra && !upd && !ind) {
            const int64_t axis = 0;
            mb_add_initializer(m, NULL, "E", MCP_DTYPE_INT64, 0, NULL, &axis, sizeof axis);
        }
        Onnx__NodeProto *n = mb_add_node(m, NULL, cases[i].op, "empty_node", extra ? "X,E" : "X", "Y");
        if (*cases[i].domain) mb_node_set_domain(m, n, cases[i].domain);
        if (!extra) mb_attr_int(m, n, "axis", 0);
        mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
        const int64_t zero = 0;
        mcp_value *in[2] = {mcp_value_create_tensor(MCP_DTYPE_FLOAT, cases[i].rank, cases[i].dims, NULL, msg, sizeof msg),
                            NULL};
        if (upd) in[1] = mcp_value_create_tensor(MCP_DTYPE_FLOAT, cases[i].rank, cases[i].dims, NULL, msg, sizeof msg);
        if (ind) in[1] = mcp_value_create_tensor(MCP_DTYPE_INT64, 1, &zero, NULL, msg, sizeof msg);
        TU_REQUIRE(in[0] && (!(upd || ind) || in[1]));
        const char *names[] = {"X", "E"};
        mcp_value *out = NULL;
        mcp_status st = run_one(m, upd || ind ? 2 : 1, names, in, &out, msg, sizeof msg);
        TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
        if (st == MCP_STATUS_OK) {
            int rank = 0;
            const int64_t *dims = NULL;
            TU_CHECK_STATUS(mcp_value_get_tensor(out, NULL, &rank, &dims, NULL), MCP_STATUS_OK, NULL);
            TU_CHECK(rank == cases[i].rank && dims[0] == 0);
        }
        mcp_value_destroy(out);
        mcp_value_destroy(in[0]);
        mcp_value_destroy(in[1]);
    }
}

/* StringSplit pads every row to the longest split: 8193 strings, one of
 * them 8192 commas, would ask for 8193 x 8193 strings (2^26 + 16385). */
static void test_string_split_limit(void)
{
    char msg[1024] = "";
    enum { N = 8193 };
    mb_model *m = mb_model_new(20);
    const int64_t unk1[] = {-1}, unk2[] = {-1, -1}, d[] = {N};
    mb_add_input(m, NULL, "X", MCP_DTYPE_STRING, 1, unk1, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "StringSplit", "splitter", "X", "Y,Z");
    mb_attr_string(m, n, "delimiter", ",");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_STRING, 2, unk2, NULL);
    mb_add_output(m, NULL, "Z", MCP_DTYPE_INT64, 1, unk1, NULL);
    char *commas = malloc(N);
    const char **strs = malloc(sizeof *strs * N);
    TU_REQUIRE(commas && strs);
    memset(commas, ',', N - 1);
    commas[N - 1] = '\0';
    for (int i = 0; i < N; i++) strs[i] = i ? "" : commas;
    mcp_value *in = mcp_value_create_tensor(MCP_DTYPE_STRING, 1, d, strs, msg, sizeof msg);
    TU_REQUIRE(in);
    const char *names[] = {"X"};
    mcp_value *out[2] = {NULL, NULL};
    TU_CHECK_STATUS(run_one(m, 1, names, &in, out, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "splitter");
    TU_CHECK_CONTAINS(msg, "8193");
    TU_CHECK(out[0] == NULL && out[1] == NULL);
    mcp_value_destroy(in);
    free(strs);
    free(commas);
}

/* RegexFullMatch groups nested past the limit fail the load (regcomp
 * parses them recursively: 20,000 levels overflow the stack). */
static void test_regex_nesting_limit(void)
{
    enum { DEPTH = 20000 };
    char *pat = malloc(2 * DEPTH + 2);
    TU_REQUIRE(pat);
    for (int i = 0; i < DEPTH; i++) {
        pat[i] = '(';
        pat[DEPTH + 1 + i] = ')';
    }
    pat[DEPTH] = 'a';
    pat[2 * DEPTH + 1] = '\0';
    mb_model *m = mb_model_new(20);
    const int64_t d[] = {2};
    mb_add_input(m, NULL, "X", MCP_DTYPE_STRING, 1, d, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "RegexFullMatch", "deep", "X", "Y");
    mb_attr_string(m, n, "pattern", pat);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_BOOL, 1, d, NULL);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_UNSUPPORTED, "deep", "'pattern'", "deeper", (char *)NULL);
    mb_model_free(m);
    free(pat);
}

/* TreeEnsemble tables that could never run, or would allocate per target
 * without bound, fail the load naming the attribute. */
static void test_tree_ensemble_tables(void)
{
    struct {
        int64_t root, n_targets;
        const char *needle;
    } cases[] = {
        {0, 1, NULL},                           /* the valid base */
        {1, 1, "tree_roots"},                   /* one node: root 1 is a leaf index, not a node */
        {0, ((int64_t)1 << 20) + 1, "n_targets"}, /* over 2^20 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mb_model *m = mb_model_new(21);
        mb_add_opset(m, "ai.onnx.ml", 5);
        const int64_t d[] = {2, 1}, one[] = {1}, two[] = {2};
        mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, d, NULL);
        Onnx__NodeProto *n = mb_add_node(m, NULL, "TreeEnsemble", "trees", "X", "Y");
        mb_node_set_domain(m, n, "ai.onnx.ml");
        const int64_t zero1[] = {0}, leafs[] = {1}, nodes_t[] = {0}, nodes_f[] = {1}, targets[] = {0, 0};
        const int64_t root[] = {cases[i].root};
        mb_attr_ints(m, n, "nodes_featureids", zero1, 1);
        mb_attr_ints(m, n, "nodes_truenodeids", nodes_t, 1);
        mb_attr_ints(m, n, "nodes_falsenodeids", nodes_f, 1);
        mb_attr_ints(m, n, "nodes_trueleafs", leafs, 1);
        mb_attr_ints(m, n, "nodes_falseleafs", leafs, 1);
        mb_attr_ints(m, n, "leaf_targetids", targets, 2);
        mb_attr_ints(m, n, "tree_roots", root, 1);
        mb_attr_int(m, n, "n_targets", cases[i].n_targets);
        const uint8_t mode = 0;
        const float split = 0.5f, weights[2] = {1.0f, 2.0f};
        mb_attr_tensor(m, n, "nodes_modes", mb_new_tensor(m, "modes", MCP_DTYPE_UINT8, 1, one, &mode, 1));
        mb_attr_tensor(m, n, "nodes_splits", mb_new_tensor(m, "splits", MCP_DTYPE_FLOAT, 1, one, &split, 4));
        mb_attr_tensor(m, n, "leaf_weights", mb_new_tensor(m, "weights", MCP_DTYPE_FLOAT, 1, two, weights, 8));
        mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
        if (!cases[i].needle) {
            expect_load_ok(__LINE__, m);
        } else {
            expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "trees", cases[i].needle, (char *)NULL);
        }
        mb_model_free(m);
    }
}

static void test_kernel_runtime_error(void)
{
    char msg[1024] = "";
    mb_model *m = mb_model_new(13);
    const int64_t d23[] = {2, 3}, unknown1[] = {-1}, out2[] = {-1, -1};
    mb_add_input(m, NULL, "data", MCP_DTYPE_FLOAT, 2, d23, NULL);
    mb_add_input(m, NULL, "shape", MCP_DTYPE_INT64, 1, unknown1, NULL);
    mb_add_node(m, NULL, "Reshape", "reshaper", "data,shape", "out");
    mb_add_output(m, NULL, "out", MCP_DTYPE_FLOAT, 2, out2, NULL);
    mcp_session *s = NULL;
    mcp_status st = load(m, NULL, &s, msg, sizeof msg);
    mb_model_free(m);
    TU_REQUIRE_OK(st, msg);

    float data[6] = {0, 1, 2, 3, 4, 5};
    const int64_t one[] = {1}, two[] = {2};
    int64_t bad_shape[1] = {7}, good_shape[2] = {3, 2};
    mcp_value *in[2];
    in[0] = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, d23, data, msg, sizeof msg);
    in[1] = mcp_value_create_tensor(MCP_DTYPE_INT64, 1, one, bad_shape, msg, sizeof msg);
    TU_REQUIRE(in[0] && in[1]);
    const char *names[] = {"data", "shape"};
    mcp_value *out = NULL;
    st = mcp_session_run(s, 2, names, in, 0, NULL, &out, msg, sizeof msg);
    TU_CHECK(st != MCP_STATUS_OK);
    TU_CHECK(out == NULL);
    TU_CHECK_CONTAINS(msg, "reshaper");
    TU_CHECK_CONTAINS(msg, "Reshape");
    mcp_value_destroy(in[1]);

    in[1] = mcp_value_create_tensor(MCP_DTYPE_INT64, 1, two, good_shape, msg, sizeof msg);
    st = mcp_session_run(s, 2, names, in, 0, NULL, &out, msg, sizeof msg);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
    if (st == MCP_STATUS_OK) {
        mcp_dtype dt;
        int rank;
        const int64_t *dims;
        const void *p;
        TU_CHECK_STATUS(mcp_value_get_tensor(out, &dt, &rank, &dims, &p), MCP_STATUS_OK, NULL);
        TU_CHECK(dt == MCP_DTYPE_FLOAT && rank == 2 && dims[0] == 3 && dims[1] == 2);
        TU_CHECK(((const float *)p)[5] == 5.0f);
        mcp_value_destroy(out);
    }
    mcp_value_destroy(in[0]);
    mcp_value_destroy(in[1]);
    mcp_session_destroy(s);
}

/* The engine's own checks behind the public API: values the public API
 * cannot make (empty optionals, sequences) given for a tensor input. */
static void test_internal_run_checks(void)
{
    char msg[1024] = "";
    mb_model *m = mb_example_mlp();
    mcp_session *s = NULL;
    mcp_status st = load(m, NULL, &s, msg, sizeof msg);
    mb_model_free(m);
    TU_REQUIRE_OK(st, msg);
    mcp_err err = {msg, sizeof msg};
    mcp_value *outs[2] = {mcp_value_new(), mcp_value_new()};
    TU_REQUIRE(outs[0] && outs[1]);

    mcp_value none = {0};
    none.kind = MCP_VALUE_NONE;
    mcp_value *ins[1] = {&none};
    TU_CHECK_STATUS(mcp__session_run(s, ins, outs, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'X'");
    TU_CHECK_CONTAINS(msg, "optional");

    mcp_value seq = {0};
    seq.kind = MCP_VALUE_SEQUENCE;
    seq.elem_dtype = MCP_DTYPE_FLOAT;
    ins[0] = &seq;
    TU_CHECK_STATUS(mcp__session_run(s, ins, outs, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'X'");
    TU_CHECK_CONTAINS(msg, "tensor");

    ins[0] = NULL;
    TU_CHECK_STATUS(mcp__session_run(s, ins, outs, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "missing input 'X'");

    mcp_value_free(outs[0]);
    mcp_value_free(outs[1]);
    mcp_session_destroy(s);
}

/* Error buffers of any size get a terminated prefix of the full message. */
static void test_small_error_buffers(void)
{
    char path[2048], full[2048] = "";
    tu_path(path, sizeof path, tmp_dir, "absent-model.onnx");
    mcp_session *s = NULL;
    TU_CHECK_STATUS(mcp_session_create_from_file(path, NULL, &s, full, sizeof full), MCP_STATUS_NOT_FOUND, full);
    TU_CHECK_CONTAINS(full, "absent-model.onnx");
    size_t full_len = strlen(full);
    for (size_t cap = 1; cap < full_len + 4; cap++) {
        char small[2100];
        memset(small, '#', sizeof small);
        TU_CHECK_STATUS(mcp_session_create_from_file(path, NULL, &s, small, cap), MCP_STATUS_NOT_FOUND, NULL);
        size_t n = strnlen(small, cap);
        if (n >= cap || small[cap] != '#' || strncmp(small, full, n) != 0) {
            TU_FAIL_AT(__FILE__, __LINE__, "cap %zu: '%.*s'", cap, (int)(n < cap ? n : cap), small);
            break;
        }
    }
    TU_CHECK_STATUS(mcp_session_create_from_file(path, NULL, &s, NULL, 0), MCP_STATUS_NOT_FOUND, NULL);
    TU_CHECK(s == NULL);

    /* mcp_err_prefix directly, including a prefix longer than the buffer. */
    char buf[16] = "cause";
    mcp_err err = {buf, sizeof buf};
    mcp_err_prefix(&err, "%s", "where");
    TU_CHECK_STR(buf, "where: cause");
    mcp_err_prefix(&err, "%s", "a-much-longer-prefix");
    TU_CHECK(strnlen(buf, sizeof buf) < sizeof buf);
    /* Too long for the buffer: the start of the prefix and the end of the
     * message (the cause) survive. */
    size_t bl = strlen(buf);
    TU_CHECK(bl >= 5 && strcmp(buf + bl - 5, "cause") == 0);
    TU_CHECK(strncmp(buf, "a-", 2) == 0);
    mcp_err none = {NULL, 0};
    mcp_err_prefix(&none, "x");
    mcp_err_prefix(NULL, "x");
    TU_CHECK_STATUS(mcp_err_set(NULL, MCP_STATUS_INTERNAL, "x"), MCP_STATUS_INTERNAL, NULL);
}

/* ---- model-local functions ---- */

/* A model whose main graph calls custom F(x) -> y once; F's body is `body`
 * (n nodes, reading F's input "fx" and writing its output "fy"). */
static mb_model *function_model(Onnx__NodeProto **body, size_t n, size_t call_inputs)
{
    static char *f_in[1] = {"fx"}, *f_out[1] = {"fy"};
    static Onnx__OperatorSetIdProto f_op = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    static Onnx__OperatorSetIdProto *f_ops[1] = {&f_op};
    static Onnx__FunctionProto f = ONNX__FUNCTION_PROTO__INIT;
    static Onnx__FunctionProto *fs[1] = {&f};
    f_op.domain = "";
    f_op.has_version = 1;
    f_op.version = 18;
    f.name = "F";
    f.domain = "custom";
    f.n_input = 1, f.input = f_in;
    f.n_output = 1, f.output = f_out;
    f.n_node = n, f.node = body;
    f.n_opset_import = 1, f.opset_import = f_ops;
    mb_model *m = mb_model_new(18);
    mb_add_opset(m, "custom", 1);
    int64_t d[1] = {4};
    mb_add_input(m, NULL, "x", MCP_DTYPE_FLOAT, 1, d, NULL);
    mb_add_output(m, NULL, "y", MCP_DTYPE_FLOAT, 1, d, NULL);
    Onnx__NodeProto *call = mb_add_node(m, NULL, "F", "call", call_inputs > 1 ? "x,x" : "x", "y");
    mb_node_set_domain(m, call, "custom");
    Onnx__ModelProto *mp = mb_model_proto(m);
    mp->n_functions = 1;
    mp->functions = fs;
    return m;
}

static Onnx__NodeProto *fn_node(Onnx__NodeProto *n, const char *op, const char *domain, char **in, size_t n_in,
                                char **out, size_t n_out)
{
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->domain = (char *)domain;
    n->input = in, n->n_input = n_in;
    n->output = out, n->n_output = n_out;
    return n;
}

static void test_local_function_errors(void)
{
    static char *fx[1] = {"fx"}, *fy[1] = {"fy"}, *other[1] = {"other"};
    Onnx__NodeProto a, *body[1] = {&a};
    mb_model *m;

    /* F calls F. */
    fn_node(&a, "F", "custom", fx, 1, fy, 1);
    m = function_model(body, 1, 1);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "nested deeper", "'F'", (char *)NULL);
    mb_model_proto(m)->n_functions = 0;
    mb_model_free(m);

    /* The call passes more inputs than F has. */
    fn_node(&a, "Relu", "", fx, 1, fy, 1);
    m = function_model(body, 1, 2);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "'call'", "2 inputs", (char *)NULL);
    mb_model_proto(m)->n_functions = 0;
    mb_model_free(m);

    /* F never writes its output. */
    fn_node(&a, "Relu", "", fx, 1, other, 1);
    m = function_model(body, 1, 1);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "does not compute its output", "'fy'", (char *)NULL);
    mb_model_proto(m)->n_functions = 0;
    mb_model_free(m);

    /* A node of F the engine cannot run: named by the call's path. */
    fn_node(&a, "NoSuchOp", "", fx, 1, fy, 1);
    m = function_model(body, 1, 1);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_UNSUPPORTED, "NoSuchOp", "'call/#0'", (char *)NULL);
    mb_model_proto(m)->n_functions = 0;
    mb_model_free(m);

    /* A node of F that fails to import: the message says which function and call. */
    static char *nothing[1] = {"nowhere"};
    fn_node(&a, "Relu", "", nothing, 1, fy, 1);
    m = function_model(body, 1, 1);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "'call/nowhere'",
                      "local function 'F' called by node 'call'", (char *)NULL);
    mb_model_proto(m)->n_functions = 0;
    mb_model_free(m);

    /* A subgraph attribute inside F. */
    static Onnx__GraphProto empty = ONNX__GRAPH_PROTO__INIT;
    static Onnx__AttributeProto then_branch = ONNX__ATTRIBUTE_PROTO__INIT;
    static Onnx__AttributeProto *attrs[1] = {&then_branch};
    then_branch.name = "then_branch";
    then_branch.has_type = 1;
    then_branch.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    then_branch.g = &empty;
    fn_node(&a, "If", "", fx, 1, fy, 1);
    a.n_attribute = 1, a.attribute = attrs;
    m = function_model(body, 1, 1);
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_UNSUPPORTED, "subgraph", "'then_branch'", (char *)NULL);
    mb_model_proto(m)->n_functions = 0;
    mb_model_free(m);

    /* F calls G0 twice, G0 calls G1 twice, ... G19: 2^21 nodes once inlined. */
    {
        enum { LEVELS = 20 };
        static char names[LEVELS + 1][8];
        static char *mid[1] = {"t"};
        static Onnx__NodeProto calls[LEVELS + 1][2], *bodies[LEVELS + 1][2];
        static Onnx__FunctionProto gs[LEVELS];
        static Onnx__FunctionProto *all[LEVELS + 1];
        static Onnx__OperatorSetIdProto g_op = ONNX__OPERATOR_SET_ID_PROTO__INIT;
        static Onnx__OperatorSetIdProto *g_ops[1] = {&g_op};
        g_op.domain = "";
        g_op.has_version = 1;
        g_op.version = 18;
        for (int l = 0; l <= LEVELS; l++) {
            snprintf(names[l], sizeof names[l], "G%d", l);
            /* level l's body: two calls of level l + 1 (the last: two Relus). */
            const char *op = l < LEVELS - 1 ? names[l + 1] : "Relu";
            const char *dom = l < LEVELS - 1 ? "custom" : "";
            fn_node(&calls[l][0], op, dom, fx, 1, mid, 1);
            fn_node(&calls[l][1], op, dom, mid, 1, fy, 1);
            bodies[l][0] = &calls[l][0], bodies[l][1] = &calls[l][1];
        }
        for (int l = 0; l < LEVELS; l++) {
            onnx__function_proto__init(&gs[l]);
            gs[l].name = names[l];
            gs[l].domain = "custom";
            gs[l].n_input = 1, gs[l].input = fx;
            gs[l].n_output = 1, gs[l].output = fy;
            gs[l].n_node = 2, gs[l].node = bodies[l];
            gs[l].n_opset_import = 1, gs[l].opset_import = g_ops;
        }
        fn_node(&a, "G0", "custom", fx, 1, fy, 1);
        m = function_model(body, 1, 1);
        Onnx__ModelProto *mp = mb_model_proto(m);
        all[0] = mp->functions[0];
        for (int l = 0; l < LEVELS; l++) all[l + 1] = &gs[l];
        mp->functions = all;
        mp->n_functions = LEVELS + 1;
        expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "more than", "nodes", (char *)NULL);
        mp->n_functions = 0;
        mb_model_free(m);
    }

    /* An attribute given twice on one node. */
    m = mb_model_new(13);
    {
        int64_t d2[2] = {2, 3}, p1[2] = {1, 0}, p2[2] = {0, 1};
        mb_add_input(m, NULL, "x", MCP_DTYPE_FLOAT, 2, d2, NULL);
        mb_add_output(m, NULL, "y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
        Onnx__NodeProto *tr = mb_add_node(m, NULL, "Transpose", "twice", "x", "y");
        mb_attr_ints(m, tr, "perm", p1, 2);
        mb_attr_ints(m, tr, "perm", p2, 2);
    }
    expect_load_error(__LINE__, m, NULL, MCP_STATUS_INVALID_MODEL, "'twice'", "'perm' is given twice", (char *)NULL);
    mb_model_free(m);

    /* And one that works: F = Relu, inlined under the call's name. */
    fn_node(&a, "Relu", "", fx, 1, fy, 1);
    m = function_model(body, 1, 1);
    char msg[1024] = "";
    mcp_session *s = NULL;
    TU_CHECK_STATUS(load(m, NULL, &s, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (s) {
        TU_CHECK_INT(s->graph->n_nodes, 1);
        if (s->graph->n_nodes == 1) {
            TU_CHECK_STR(s->graph->nodes[0].op_type, "Relu");
            TU_CHECK_STR(s->graph->nodes[0].name, "call/#0");
        }
        mcp_session_destroy(s);
    }
    mb_model_proto(m)->n_functions = 0;
    mb_model_free(m);
}

int main(void)
{
    if (tu_make_temp_dir(tmp_dir, sizeof tmp_dir, "malformed") != 0) {
        perror("mkdtemp");
        return 1;
    }
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_empty_and_random);
    TU_RUN(test_truncated);
    TU_RUN(test_unknown_op);
    TU_RUN(test_undefined_and_duplicate_names);
    TU_RUN(test_opsets_and_graph);
    TU_RUN(test_bad_initializers);
    TU_RUN(test_unknown_element_types);
    TU_RUN(test_external_data);
    TU_RUN(test_bad_runs);
    TU_RUN(test_newer_op_attributes);
    TU_RUN(test_newer_op_empty_inputs);
    TU_RUN(test_string_split_limit);
    TU_RUN(test_regex_nesting_limit);
    TU_RUN(test_tree_ensemble_tables);
    TU_RUN(test_kernel_runtime_error);
    TU_RUN(test_internal_run_checks);
    TU_RUN(test_small_error_buffers);
    TU_RUN(test_local_function_errors);
    /* Every failed load and run above freed what it allocated. */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    rmdir(tmp_dir);
    return tu_finish("test_malformed");
}
