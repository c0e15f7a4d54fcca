/*
 * The counted allocator: after creating sessions, running them (successes
 * and failures) and destroying everything, mcp_alloc_live_count() is back
 * where it started, so nothing leaks through mcp_malloc and friends.
 * (ASan's leak checker covers allocations made outside the counter.)
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "engine/engine.h"
#include "graph/graph.h"
#include "mcp/mcp.h"
#include "model_builder.h"
#include "tensor/tensor.h"
#include "test_util.h"

static char tmp_dir[1024];

static mcp_status load(mb_model *m, const char *base_dir, mcp_session **s, char *msg, size_t cap)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_status st = mcp_session_create_from_memory(buf, len, base_dir, NULL, s, msg, cap);
    free(buf);
    return st;
}

static void test_counter_itself(void)
{
    int64_t base = mcp_alloc_live_count();
    void *a = mcp_malloc(10), *b = mcp_calloc(3, 4), *c = mcp_realloc(NULL, 7);
    char *d = mcp_strdup("counted");
    void *z = mcp_malloc(0); /* zero bytes is still one live block */
    TU_REQUIRE(a && b && c && d && z);
    TU_CHECK_INT(mcp_alloc_live_count(), base + 5);
    c = mcp_realloc(c, 4096); /* growing keeps the count */
    TU_REQUIRE(c != NULL);
    TU_CHECK_INT(mcp_alloc_live_count(), base + 5);
    mcp_free(a);
    mcp_free(b);
    mcp_free(c);
    mcp_free(d);
    mcp_free(z);
    mcp_free(NULL); /* not counted */
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

/* An account's limit: what passes it fails as out of memory (counted), what
 * fits goes through, freeing makes room again, growth is checked too; a
 * session loaded under a limit below its needs fails to load and leaks
 * nothing, and loads under a limit that fits. */
static void test_account_limit(void)
{
    int64_t base = mcp_alloc_live_count();
    mcp_mem_account *a = mcp_mem_account_create();
    TU_REQUIRE(a != NULL);
    TU_CHECK_INT(mcp_mem_account_limit(a), 0);
    mcp_mem_account_set_limit(a, 1000);
    TU_CHECK_INT(mcp_mem_account_limit(a), 1000);
    mcp_mem_account *prev = mcp_mem_account_use(a);
    void *p = mcp_malloc(600);
    void *q = mcp_malloc(600); /* 1200 > 1000 */
    void *r = mcp_calloc(100, 5);
    void *t = mcp_malloc(400);
    mcp_mem_account_use(prev);
    TU_CHECK(p != NULL);
    TU_CHECK(q == NULL);
    TU_CHECK(r == NULL);
    TU_CHECK(t != NULL);
    TU_CHECK_INT(mcp_mem_account_bytes(a), 1000);
    TU_CHECK_INT(mcp_mem_account_refusals(a), 2);
    void *grown = mcp_realloc(p, 601); /* growth is charged to p's account, wherever it happens */
    TU_CHECK(grown == NULL);
    TU_CHECK_INT(mcp_mem_account_refusals(a), 3);
    p = mcp_realloc(p, 100); /* shrinking always fits */
    TU_REQUIRE(p != NULL);
    TU_CHECK_INT(mcp_mem_account_bytes(a), 500);
    mcp_free(t);
    TU_CHECK_INT(mcp_mem_account_bytes(a), 100);
    prev = mcp_mem_account_use(a);
    q = mcp_malloc(900);
    mcp_mem_account_use(prev);
    TU_CHECK(q != NULL);
    mcp_free(q);
    mcp_free(p);
    TU_CHECK_INT(mcp_mem_account_bytes(a), 0);

    /* A session under a limit. */
    char msg[1024] = "";
    mcp_mem_account *small = mcp_mem_account_create(), *big = mcp_mem_account_create();
    TU_REQUIRE(small && big);
    mcp_mem_account_set_limit(small, 256);
    mcp_mem_account_set_limit(big, 64 << 20);
    mb_model *m = mb_example_mlp();
    mcp_session *s = NULL;
    prev = mcp_mem_account_use(small);
    mcp_status st = load(m, NULL, &s, msg, sizeof msg);
    mcp_mem_account_use(prev);
    /* The import sees a failed allocation (protobuf-c reports it as a
     * decoding failure); the refusal count says why. */
    TU_CHECK(st != MCP_STATUS_OK);
    TU_CHECK(s == NULL);
    TU_CHECK(mcp_mem_account_refusals(small) >= 1);
    TU_CHECK_INT(mcp_mem_account_bytes(small), 0);
    prev = mcp_mem_account_use(big);
    st = load(m, NULL, &s, msg, sizeof msg);
    mcp_mem_account_use(prev);
    mb_model_free(m);
    TU_REQUIRE_OK(st, msg);
    TU_CHECK(mcp_mem_account_bytes(big) > 256);
    TU_CHECK_INT(mcp_mem_account_refusals(big), 0);
    mcp_session_destroy(s);
    TU_CHECK_INT(mcp_mem_account_bytes(big), 0);
    mcp_mem_account_release(small);
    mcp_mem_account_release(big);
    mcp_mem_account_release(a);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

static void test_session_lifecycle(void)
{
    char msg[1024] = "";
    int64_t base = mcp_alloc_live_count();

    mb_model *m = mb_example_mlp();
    mcp_session *s = NULL;
    mcp_status st = load(m, NULL, &s, msg, sizeof msg);
    mb_model_free(m);
    TU_REQUIRE_OK(st, msg);
    int64_t with_session = mcp_alloc_live_count();
    TU_CHECK(with_session > base); /* the counter sees the session */

    const int64_t xd[] = {2, 3}, bad[] = {2, 4};
    const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const char *names[] = {"X"}, *wrong[] = {"nope"}, *only_y[] = {"Y"}, *y_twice[] = {"Y", "Y"};
    mcp_value *xv = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, xd, x, msg, sizeof msg);
    mcp_value *bv = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, bad, x, msg, sizeof msg);
    TU_REQUIRE(xv && bv);
    for (int i = 0; i < 5; i++) {
        mcp_value *outs[2] = {NULL, NULL};
        TU_CHECK_STATUS(mcp_session_run(s, 1, names, &xv, 0, NULL, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
        mcp_value_destroy(outs[0]);
        mcp_value_destroy(outs[1]);
        outs[0] = outs[1] = NULL;
        TU_CHECK_STATUS(mcp_session_run(s, 1, names, &xv, 1, only_y, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
        mcp_value_destroy(outs[0]);
        outs[0] = NULL;
        TU_CHECK_STATUS(mcp_session_run(s, 1, names, &xv, 2, y_twice, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
        mcp_value_destroy(outs[0]);
        mcp_value_destroy(outs[1]);
        outs[0] = outs[1] = NULL;
        /* Failed runs free what they made too. */
        TU_CHECK(mcp_session_run(s, 1, names, &bv, 0, NULL, outs, msg, sizeof msg) != MCP_STATUS_OK);
        TU_CHECK(mcp_session_run(s, 1, wrong, &xv, 0, NULL, outs, msg, sizeof msg) != MCP_STATUS_OK);
        TU_CHECK(mcp_session_run(s, 1, names, &xv, 1, wrong, outs, msg, sizeof msg) != MCP_STATUS_OK);
        TU_CHECK(mcp_session_run(s, 0, NULL, NULL, 0, NULL, outs, msg, sizeof msg) != MCP_STATUS_OK);
        TU_CHECK(outs[0] == NULL && outs[1] == NULL);
    }
    mcp_value_destroy(xv);
    mcp_value_destroy(bv);
    /* Runs leave nothing behind in the session but its run contexts,
     * which trimming frees. */
    mcp_session_trim(s);
    TU_CHECK_INT(mcp_alloc_live_count(), with_session);
    mcp_session_destroy(s);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

static void test_kernel_failure_and_subgraphs(void)
{
    char msg[1024] = "";
    int64_t base = mcp_alloc_live_count();

    /* A kernel error in the middle of a graph: earlier results and the
     * failing node's partial outputs are freed. */
    mb_model *m = mb_model_new(13);
    const int64_t d23[] = {2, 3}, one[] = {1}, unk[] = {-1};
    mb_add_input(m, NULL, "data", MCP_DTYPE_FLOAT, 2, d23, NULL);
    mb_add_input(m, NULL, "shape", MCP_DTYPE_INT64, 1, unk, NULL);
    mb_add_node(m, NULL, "Relu", "pre", "data", "R");
    mb_add_node(m, NULL, "Reshape", "reshaper", "R,shape", "out");
    mb_add_node(m, NULL, "Neg", "post", "out", "final");
    mb_add_output(m, NULL, "final", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    mb_add_output(m, NULL, "R", MCP_DTYPE_FLOAT, 2, d23, NULL);
    mcp_session *s = NULL;
    mcp_status st = load(m, NULL, &s, msg, sizeof msg);
    mb_model_free(m);
    TU_REQUIRE_OK(st, msg);
    const float data[6] = {1, -2, 3, -4, 5, -6};
    int64_t shape_bad = 5, shape_good = 6;
    mcp_value *in[2] = {mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, d23, data, msg, sizeof msg),
                        mcp_value_create_tensor(MCP_DTYPE_INT64, 1, one, &shape_bad, msg, sizeof msg)};
    TU_REQUIRE(in[0] && in[1]);
    const char *names[] = {"data", "shape"};
    mcp_value *outs[2] = {NULL, NULL};
    TU_CHECK(mcp_session_run(s, 2, names, in, 0, NULL, outs, msg, sizeof msg) != MCP_STATUS_OK);
    TU_CHECK_CONTAINS(msg, "reshaper");
    mcp_value_destroy(in[1]);
    in[1] = mcp_value_create_tensor(MCP_DTYPE_INT64, 1, one, &shape_good, msg, sizeof msg);
    TU_CHECK_STATUS(mcp_session_run(s, 2, names, in, 0, NULL, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_value_destroy(outs[0]);
    mcp_value_destroy(outs[1]);
    mcp_value_destroy(in[0]);
    mcp_value_destroy(in[1]);
    mcp_session_destroy(s);
    TU_CHECK_INT(mcp_alloc_live_count(), base);

    /* If with subgraphs capturing outer values, both branches. */
    m = mb_model_new(13);
    const int64_t d2[] = {2};
    const float k[2] = {7, 8};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
    mb_add_input(m, NULL, "C", MCP_DTYPE_BOOL, 1, one, NULL);
    mb_add_initializer(m, NULL, "K", MCP_DTYPE_FLOAT, 1, d2, k, sizeof k);
    Onnx__GraphProto *then_g = mb_new_graph(m, "then");
    mb_add_node(m, then_g, "Add", "then_add", "X,K", "T");
    mb_add_output(m, then_g, "T", MCP_DTYPE_FLOAT, 1, d2, NULL);
    Onnx__GraphProto *else_g = mb_new_graph(m, "else");
    mb_add_output(m, else_g, "K", MCP_DTYPE_FLOAT, 1, d2, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "If", "branch", "C", "R");
    mb_attr_graph(m, n, "then_branch", then_g);
    mb_attr_graph(m, n, "else_branch", else_g);
    mb_add_output(m, NULL, "R", MCP_DTYPE_FLOAT, 1, d2, NULL);
    st = load(m, NULL, &s, msg, sizeof msg);
    mb_model_free(m);
    TU_REQUIRE_OK(st, msg);
    for (int c = 0; c < 2; c++) {
        uint8_t cv = (uint8_t)c;
        mcp_value *v[2] = {mcp_value_create_tensor(MCP_DTYPE_FLOAT, 1, d2, data, msg, sizeof msg),
                           mcp_value_create_tensor(MCP_DTYPE_BOOL, 1, one, &cv, msg, sizeof msg)};
        const char *vn[] = {"X", "C"};
        mcp_value *r = NULL;
        TU_CHECK_STATUS(mcp_session_run(s, 2, vn, v, 0, NULL, &r, msg, sizeof msg), MCP_STATUS_OK, msg);
        mcp_dtype dt;
        int rank;
        const int64_t *dims;
        const void *p = NULL;
        if (r && mcp_value_get_tensor(r, &dt, &rank, &dims, &p) == MCP_STATUS_OK)
            TU_CHECK(((const float *)p)[1] == (c ? -2.0f + 8.0f : 8.0f));
        mcp_value_destroy(r);
        mcp_value_destroy(v[0]);
        mcp_value_destroy(v[1]);
    }
    mcp_session_destroy(s);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

static void test_failed_loads(void)
{
    char msg[1024] = "";
    int64_t base = mcp_alloc_live_count();
    mcp_session *s = NULL;

    /* Every prefix of a valid model. */
    mb_model *m = mb_example_mlp();
    size_t len;
    uint8_t *full = mb_pack(m, &len);
    mb_model_free(m);
    for (size_t cut = 0; cut <= len; cut++) {
        if (mcp_session_create_from_memory(full, cut, NULL, NULL, &s, msg, sizeof msg) == MCP_STATUS_OK)
            mcp_session_destroy(s);
        if (mcp_alloc_live_count() != base) {
            TU_FAIL_AT(__FILE__, __LINE__, "cut at %zu leaked %lld blocks", cut,
                       (long long)(mcp_alloc_live_count() - base));
            break;
        }
    }
    free(full);

    /* Failures at different stages: kernel resolution (after the whole
     * graph was imported), a node in the middle, an initializer after
     * others, external data. */
    const int64_t d2[] = {2};
    const float w[2] = {1, 2};
    m = mb_example_mlp();
    mb_add_node(m, NULL, "NoSuchOp", "late_unknown", "Z", "Q");
    TU_CHECK(load(m, NULL, &s, msg, sizeof msg) == MCP_STATUS_UNSUPPORTED);
    mb_model_free(m);
    TU_CHECK_INT(mcp_alloc_live_count(), base);

    m = mb_example_mlp();
    mb_add_node(m, NULL, "Relu", "undefined_input", "ghost", "Q");
    TU_CHECK(load(m, NULL, &s, msg, sizeof msg) == MCP_STATUS_INVALID_MODEL);
    mb_model_free(m);
    TU_CHECK_INT(mcp_alloc_live_count(), base);

    m = mb_example_mlp();
    mb_add_initializer(m, NULL, "short", MCP_DTYPE_FLOAT, 1, d2, w, 4);
    TU_CHECK(load(m, NULL, &s, msg, sizeof msg) == MCP_STATUS_INVALID_MODEL);
    mb_model_free(m);
    TU_CHECK_INT(mcp_alloc_live_count(), base);

    m = mb_example_mlp();
    Onnx__TensorProto *t = mb_add_initializer(m, NULL, "ext", MCP_DTYPE_FLOAT, 1, d2, w, sizeof w);
    mb_tensor_set_external(m, t, "absent.bin", 0, 8);
    TU_CHECK(load(m, tmp_dir, &s, msg, sizeof msg) == MCP_STATUS_IO_ERROR);
    mb_model_free(m);
    TU_CHECK_INT(mcp_alloc_live_count(), base);

    /* A subgraph failing deep inside: the partial outer graph is freed. */
    m = mb_example_mlp();
    const int64_t one[] = {1};
    mb_add_input(m, NULL, "C", MCP_DTYPE_BOOL, 1, one, NULL);
    Onnx__GraphProto *then_g = mb_new_graph(m, "then");
    mb_add_node(m, then_g, "Identity", "ok_inside", "Z", "T1");
    mb_add_node(m, then_g, "Identity", "bad_inside", "missing", "T2");
    mb_add_output(m, then_g, "T2", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "If", "branch", "C", "R");
    mb_attr_graph(m, n, "then_branch", then_g);
    mb_attr_graph(m, n, "else_branch", then_g);
    TU_CHECK(load(m, NULL, &s, msg, sizeof msg) == MCP_STATUS_INVALID_MODEL);
    TU_CHECK_CONTAINS(msg, "bad_inside");
    mb_model_free(m);
    TU_CHECK_INT(mcp_alloc_live_count(), base);

    /* The internal import API on its own. */
    m = mb_example_mlp();
    full = mb_pack(m, &len);
    mb_model_free(m);
    mcp_err err = {msg, sizeof msg};
    mcp_graph *g = NULL;
    TU_CHECK_STATUS(mcp_onnx_import(full, len, NULL, &g, &err), MCP_STATUS_OK, msg);
    TU_CHECK(g && g->n_nodes == 3 && g->n_inputs == 1 && g->n_outputs == 2 && g->n_initializers == 2);
    TU_CHECK(g && mcp_graph_opset(g, "") == 13 && mcp_graph_opset(g, "ai.onnx") == 13);
    TU_CHECK(g && mcp_graph_find_value(g, "XW") >= 0 && mcp_graph_find_value(g, "nope") == -1);
    mcp_graph_free(g);
    mcp_graph_free(NULL);
    free(full);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

static void test_npy_and_values(void)
{
    char msg[512] = "", path[2048];
    mcp_err err = {msg, sizeof msg};
    int64_t base = mcp_alloc_live_count();
    tu_path(path, sizeof path, tmp_dir, "t.npy");
    const int64_t d3[] = {3};
    mcp_tensor t;
    TU_REQUIRE_OK(mcp_tensor_alloc(&t, MCP_DTYPE_STRING, 1, d3, &err), msg);
    mcp_tensor_set_string(&t, 1, "x\xc3\xa9", 3);
    TU_CHECK_STATUS(mcp_npy_write(path, &t, &err), MCP_STATUS_OK, msg);
    mcp_tensor_release(&t);
    TU_CHECK_STATUS(mcp_npy_read(path, &t, &err), MCP_STATUS_OK, msg);
    mcp_tensor_release(&t);
    unlink(path);
    TU_CHECK(mcp_npy_read(path, &t, &err) != MCP_STATUS_OK);

    const char *strs[] = {"a", "b", "c"};
    mcp_value *v = mcp_value_create_tensor(MCP_DTYPE_STRING, 1, d3, strs, msg, sizeof msg);
    mcp_value_destroy(v);
    TU_CHECK(mcp_value_create_tensor(MCP_DTYPE_FLOAT, 1, (const int64_t[]){-1}, NULL, msg, sizeof msg) == NULL);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

/*
 * A small CNN: Conv+Relu, MaxPool, Conv + residual Add + Relu,
 * GlobalAveragePool, Flatten, Gemm; X is float [batch, 2, 8, 8].
 */
static mb_model *small_cnn(void)
{
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {-1, 2, 8, 8}, yd[] = {-1, 3};
    const char *const params[] = {"batch", NULL, NULL, NULL};
    const int64_t w1d[] = {4, 2, 3, 3}, w2d[] = {4, 4, 3, 3}, bd[] = {4}, gd[] = {3, 4}, gbd[] = {3};
    float w1[72], w2[144], b[4], g[12], gb[3];
    for (int i = 0; i < 72; i++) w1[i] = (float)((i * 7) % 11 - 5) / 8.0f;
    for (int i = 0; i < 144; i++) w2[i] = (float)((i * 5) % 13 - 6) / 16.0f;
    for (int i = 0; i < 4; i++) b[i] = (float)i / 4.0f - 0.25f;
    for (int i = 0; i < 12; i++) g[i] = (float)(i % 5) / 4.0f - 0.5f;
    for (int i = 0; i < 3; i++) gb[i] = (float)i;
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, params);
    mb_add_initializer(m, NULL, "W1", MCP_DTYPE_FLOAT, 4, w1d, w1, sizeof w1);
    mb_add_initializer(m, NULL, "W2", MCP_DTYPE_FLOAT, 4, w2d, w2, sizeof w2);
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 1, bd, b, sizeof b);
    mb_add_initializer(m, NULL, "G", MCP_DTYPE_FLOAT, 2, gd, g, sizeof g);
    mb_add_initializer(m, NULL, "GB", MCP_DTYPE_FLOAT, 1, gbd, gb, sizeof gb);
    const int64_t pads[] = {1, 1, 1, 1}, k2[] = {2, 2};
    Onnx__NodeProto *c1 = mb_add_node(m, NULL, "Conv", "conv1", "X,W1,B", "C1");
    mb_attr_ints(m, c1, "pads", pads, 4);
    mb_add_node(m, NULL, "Relu", "relu1", "C1", "R1");
    Onnx__NodeProto *mp = mb_add_node(m, NULL, "MaxPool", "pool", "R1", "P");
    mb_attr_ints(m, mp, "kernel_shape", k2, 2);
    mb_attr_ints(m, mp, "strides", k2, 2);
    Onnx__NodeProto *c2 = mb_add_node(m, NULL, "Conv", "conv2", "P,W2,B", "C2");
    mb_attr_ints(m, c2, "pads", pads, 4);
    mb_add_node(m, NULL, "Add", "residual", "C2,P", "S");
    mb_add_node(m, NULL, "Relu", "relu2", "S", "R2");
    mb_add_node(m, NULL, "GlobalAveragePool", "gap", "R2", "GAP");
    mb_add_node(m, NULL, "Flatten", "flatten", "GAP", "F");
    Onnx__NodeProto *gm = mb_add_node(m, NULL, "Gemm", "fc", "F,G,GB", "Y");
    mb_attr_int(m, gm, "transB", 1);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, yd, params);
    return m;
}

/* Runs s on a fresh float input of shape (rank, dims) filled from seed,
 * into outs (kept between calls). */
static mcp_status run_into(mcp_session *s, int rank, const int64_t *dims, int seed, mcp_value **outs, char *msg,
                           size_t cap)
{
    mcp_err err = {msg, cap};
    mcp_value x = {0};
    x.kind = MCP_VALUE_TENSOR;
    if (mcp_tensor_alloc(&x.tensor, MCP_DTYPE_FLOAT, rank, dims, &err) != MCP_STATUS_OK) return MCP_STATUS_OUT_OF_MEMORY;
    float *xv = x.tensor.data;
    for (int64_t i = 0; i < mcp_tensor_numel(&x.tensor); i++) xv[i] = (float)((i * 31 + seed) % 17) / 8.0f - 1.0f;
    mcp_value *ins[1] = {&x};
    mcp_status st = mcp__session_run(s, ins, outs, &err);
    mcp_value_clear(&x);
    return st;
}

/*
 * Memory plans: once a shape has run, later runs of it make no heap
 * allocations (the counted allocator sees none), give the same results as
 * the first run and as the reference backend, and a second shape gets its
 * own plan without disturbing the first.
 */
static void test_steady_state_allocations(void)
{
    char msg[1024] = "";
    int64_t base = mcp_alloc_live_count();
    mb_model *m = small_cnn();
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    mcp_session *s = NULL, *ref = NULL;
    mcp_session_options o = mcp_session_options_default(), ro = o;
    ro.backend = "ref";
    TU_REQUIRE_OK(mcp_session_create_from_memory(buf, len, NULL, &o, &s, msg, sizeof msg), msg);
    TU_REQUIRE_OK(mcp_session_create_from_memory(buf, len, NULL, &ro, &ref, msg, sizeof msg), msg);
    free(buf);
    const int64_t d1[] = {1, 2, 8, 8}, d3[] = {3, 2, 8, 8};
    mcp_value *out[1] = {mcp_value_new()}, *first[1] = {mcp_value_new()}, *want[1] = {mcp_value_new()};
    TU_REQUIRE(out[0] && first[0] && want[0]);
    /* The first run of a shape records sizes and plans. */
    TU_CHECK_STATUS(run_into(s, 4, d1, 1, first, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(run_into(ref, 4, d1, 1, want, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(run_into(s, 4, d1, 1, out, msg, sizeof msg), MCP_STATUS_OK, msg);
    int64_t before = mcp_alloc_total_count();
    for (int i = 0; i < 5; i++)
        TU_CHECK_STATUS(run_into(s, 4, d1, 1 + i, out, msg, sizeof msg), MCP_STATUS_OK, msg);
    /* The input tensor run_into makes is the only allocation. */
    TU_CHECK_INT(mcp_alloc_total_count() - before, 5);
    /* Planned runs compute from their own inputs (other seeds each time). */
    mcp_value *want5[1] = {mcp_value_new()};
    TU_REQUIRE(want5[0] != NULL);
    TU_CHECK_STATUS(run_into(ref, 4, d1, 5, want5, msg, sizeof msg), MCP_STATUS_OK, msg);
    for (int i = 0; i < 3; i++) {
        float g = ((const float *)out[0]->tensor.data)[i], w = ((const float *)want5[0]->tensor.data)[i];
        TU_CHECK(fabsf(g - w) <= 1e-4f * (1.0f + fabsf(w)));
    }
    mcp_value_free(want5[0]);
    TU_CHECK_STATUS(run_into(s, 4, d1, 1, out, msg, sizeof msg), MCP_STATUS_OK, msg);
    const float *a = first[0]->tensor.data, *b = out[0]->tensor.data, *r = want[0]->tensor.data;
    TU_REQUIRE(out[0]->tensor.rank == 2 && out[0]->tensor.dims[0] == 1 && out[0]->tensor.dims[1] == 3);
    for (int i = 0; i < 3; i++) {
        TU_CHECK(a[i] == b[i]);
        TU_CHECK(fabsf(a[i] - r[i]) <= 1e-4f * (1.0f + fabsf(r[i])));
    }
    /* Another batch size plans once; the first shape's plan stays. */
    mcp_value *out3[1] = {mcp_value_new()};
    TU_CHECK_STATUS(run_into(s, 4, d3, 2, out3, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(run_into(s, 4, d3, 2, out3, msg, sizeof msg), MCP_STATUS_OK, msg);
    before = mcp_alloc_total_count();
    TU_CHECK_STATUS(run_into(s, 4, d1, 1, out, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(run_into(s, 4, d3, 2, out3, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_INT(mcp_alloc_total_count() - before, 2);
    TU_CHECK(memcmp(out[0]->tensor.data, first[0]->tensor.data, 3 * sizeof(float)) == 0);
    mcp_value_free(out[0]);
    mcp_value_free(out3[0]);
    mcp_value_free(first[0]);
    mcp_value_free(want[0]);
    mcp_session_destroy(s);
    mcp_session_destroy(ref);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

/*
 * In-place execution: X -> Exp -> Add(bias) -> Reshape -> Sigmoid -> Neg,
 * each step's input dying there, runs in one arena block of the tensor's
 * size (without in-place the plan needs two), and the results are those of
 * the unplanned first run and of the formulas.
 */
static void test_inplace_chain(void)
{
    char msg[1024] = "";
    int64_t base = mcp_alloc_live_count();
    enum { R = 4, C = 256 };
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {R, C}, bd[] = {C}, sd[] = {1}, yd[] = {R * C}, shape[] = {R * C};
    float bias[C];
    for (int i = 0; i < C; i++) bias[i] = (float)(i % 7) / 4.0f - 0.75f;
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 1, bd, bias, sizeof bias);
    mb_add_initializer(m, NULL, "S", MCP_DTYPE_INT64, 1, sd, shape, sizeof shape);
    mb_add_node(m, NULL, "Exp", "exp", "X", "E");
    mb_add_node(m, NULL, "Add", "add", "E,B", "A");
    mb_add_node(m, NULL, "Reshape", "reshape", "A,S", "F");
    mb_add_node(m, NULL, "Sigmoid", "sigmoid", "F", "G");
    mb_add_node(m, NULL, "Neg", "neg", "G", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, yd, NULL);
    /* The reference kernels declare in-place inputs (src/ops/ref/inplace.c). */
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    mcp_session_options o = mcp_session_options_default();
    o.backend = "ref";
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(buf, len, NULL, &o, &s, msg, sizeof msg);
    free(buf);
    TU_REQUIRE_OK(st, msg);
    mcp_value *first[1] = {mcp_value_new()}, *out[1] = {mcp_value_new()};
    TU_REQUIRE(first[0] && out[0]);
    TU_CHECK_STATUS(run_into(s, 2, xd, 3, first, msg, sizeof msg), MCP_STATUS_OK, msg);
    for (int i = 0; i < 2; i++) TU_CHECK_STATUS(run_into(s, 2, xd, 3, out, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp__runctx *rc = mcp__runctx_take(s, false);
    TU_REQUIRE(rc != NULL);
    TU_CHECK_INT((int64_t)mcp__runctx_arena_bytes(rc), (int64_t)(R * C * sizeof(float)));
    mcp__runctx_give(s, rc);
    TU_REQUIRE(out[0]->tensor.rank == 1 && out[0]->tensor.dims[0] == R * C);
    const float *a = first[0]->tensor.data, *b = out[0]->tensor.data;
    for (int i = 0; i < R * C; i++) {
        float x = (float)((i * 31 + 3) % 17) / 8.0f - 1.0f;
        float want = -1.0f / (1.0f + expf(-(expf(x) + bias[i % C])));
        TU_CHECK(fabsf(a[i] - want) <= 1e-5f);
        TU_CHECK(a[i] == b[i]);
    }
    mcp_value_free(first[0]);
    mcp_value_free(out[0]);
    mcp_session_destroy(s);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

/*
 * A model with many inputs (a long input signature: 12 rank-4 inputs) is
 * planned like any other: after the first runs, runs allocate nothing.
 */
static void test_many_inputs_planned(void)
{
    enum { N = 12 };
    char msg[1024] = "";
    int64_t base = mcp_alloc_live_count();
    mb_model *m = mb_model_new(13);
    const int64_t d[] = {1, 2, 2, 2};
    char names[N][8], list[N * 8] = "";
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "X%d", i);
        mb_add_input(m, NULL, names[i], MCP_DTYPE_FLOAT, 4, d, NULL);
        strcat(list, i ? "," : "");
        strcat(list, names[i]);
    }
    mb_add_node(m, NULL, "Sum", "sum", list, "S");
    mb_add_node(m, NULL, "Relu", "relu", "S", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, d, NULL);
    mcp_session *s = NULL;
    mcp_status st = load(m, NULL, &s, msg, sizeof msg);
    mb_model_free(m);
    TU_REQUIRE_OK(st, msg);
    mcp_err err = {msg, sizeof msg};
    mcp_value xs[N], *ins[N];
    for (int i = 0; i < N; i++) {
        memset(&xs[i], 0, sizeof xs[i]);
        xs[i].kind = MCP_VALUE_TENSOR;
        TU_REQUIRE_OK(mcp_tensor_alloc(&xs[i].tensor, MCP_DTYPE_FLOAT, 4, d, &err), msg);
        float *v = xs[i].tensor.data;
        for (int k = 0; k < 8; k++) v[k] = (float)(i + k) - 6.0f;
        ins[i] = &xs[i];
    }
    mcp_value *out[1] = {mcp_value_new()};
    TU_REQUIRE(out[0] != NULL);
    for (int r = 0; r < 2; r++) TU_CHECK_STATUS(mcp__session_run(s, ins, out, &err), MCP_STATUS_OK, msg);
    int64_t before = mcp_alloc_total_count();
    for (int r = 0; r < 3; r++) TU_CHECK_STATUS(mcp__session_run(s, ins, out, &err), MCP_STATUS_OK, msg);
    TU_CHECK_INT(mcp_alloc_total_count() - before, 0);
    const float *y = out[0]->tensor.data;
    for (int k = 0; k < 8; k++) {
        float want = 0.0f;
        for (int i = 0; i < N; i++) want += (float)(i + k) - 6.0f;
        TU_CHECK(y[k] == (want > 0.0f ? want : 0.0f));
    }
    for (int i = 0; i < N; i++) mcp_value_clear(&xs[i]);
    mcp_value_free(out[0]);
    mcp_session_destroy(s);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

/*
 * An output whose size comes from the data: once the shape has a plan, a
 * request for an absurd size (2^61 + 1 rows) fails with a clear error, as
 * it does without a plan, and later runs still work.
 */
static void test_planned_size_overflow(void)
{
    char msg[1024] = "";
    int64_t base = mcp_alloc_live_count();
    mb_model *m = mb_model_new(13);
    const int64_t sd[] = {4}, xd[] = {1, 1, 1, 1}, k[] = {1, 1};
    static const float xv = 2.5f;
    static const int64_t iv = 0;
    mb_add_input(m, NULL, "S", MCP_DTYPE_INT64, 1, sd, NULL);
    mb_add_initializer(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, &xv, sizeof xv);
    mb_add_initializer(m, NULL, "I", MCP_DTYPE_INT64, 4, xd, &iv, sizeof iv);
    Onnx__NodeProto *u = mb_add_node(m, NULL, "MaxUnpool", "unpool", "X,I,S", "Y");
    mb_attr_ints(m, u, "kernel_shape", k, 2);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    mcp_session *s = NULL;
    mcp_status st = load(m, NULL, &s, msg, sizeof msg);
    mb_model_free(m);
    TU_REQUIRE_OK(st, msg);
    mcp_err err = {msg, sizeof msg};
    const int64_t widths[4] = {3, 3, ((int64_t)1 << 61) + 1, 3};
    for (int r = 0; r < 4; r++) {
        mcp_value x = {0};
        x.kind = MCP_VALUE_TENSOR;
        TU_REQUIRE_OK(mcp_tensor_alloc(&x.tensor, MCP_DTYPE_INT64, 1, sd, &err), msg);
        int64_t shape[4] = {1, 1, 2, widths[r]}; /* 2 * (2^61 + 1) * 4 bytes wraps to 8 */
        memcpy(x.tensor.data, shape, sizeof shape);
        mcp_value *ins[1] = {&x}, *out[1] = {mcp_value_new()};
        TU_REQUIRE(out[0] != NULL);
        msg[0] = '\0';
        st = mcp__session_run(s, ins, out, &err);
        if (r == 2) {
            TU_CHECK(st != MCP_STATUS_OK);
            TU_CHECK_CONTAINS(msg, "unpool");
        } else {
            TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
            TU_CHECK(out[0]->tensor.rank == 4 && out[0]->tensor.dims[3] == 3);
            if (st == MCP_STATUS_OK) TU_CHECK(((const float *)out[0]->tensor.data)[0] == 2.5f);
        }
        mcp_value_clear(&x);
        mcp_value_free(out[0]);
    }
    mcp_session_destroy(s);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

int main(void)
{
    if (tu_make_temp_dir(tmp_dir, sizeof tmp_dir, "alloc") != 0) {
        perror("mkdtemp");
        return 1;
    }
    int64_t start = mcp_alloc_live_count();
    TU_RUN(test_counter_itself);
    TU_RUN(test_account_limit);
    TU_RUN(test_session_lifecycle);
    TU_RUN(test_steady_state_allocations);
    TU_RUN(test_inplace_chain);
    TU_RUN(test_many_inputs_planned);
    TU_RUN(test_planned_size_overflow);
    TU_RUN(test_kernel_failure_and_subgraphs);
    TU_RUN(test_failed_loads);
    TU_RUN(test_npy_and_values);
    TU_CHECK_INT(mcp_alloc_live_count(), start);
    rmdir(tmp_dir);
    return tu_finish("test_alloc");
}
