/*
 * The default backend against the reference one on graphs whose tensors
 * travel between oneDNN kernels in blocked layouts (channels-last at batch
 * 1, nChw16c from batch 2), through Concats the direct copy serves (one
 * layout, channels a multiple of 16) and ones it leaves to oneDNN (channel
 * counts that are not); rows of matrix products whose bits do not depend on
 * the batch they run in; and the per-node profile.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "engine/engine.h"
#include "mcp/mcp.h"
#include "model_builder.h"
#include "ops/ops.h"
#include "tensor/tensor.h"
#include "test_util.h"

enum { CIN = 8, HW = 9 };

/*
 * X [b,8,9,9] -> A = Relu(Conv1x1, 16 ch), B = Relu(Conv3x3 pad 1, 16 ch),
 * C = Conv1x1 (5 ch). D = Concat(A, B) (32 ch) -> Y1 = Conv1x1 (4 ch);
 * Y2 = Concat(A, C, B) (37 ch).
 */
static mb_model *concat_cnn(void)
{
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {-1, CIN, HW, HW}, y1d[] = {-1, 4, HW, HW}, y2d[] = {-1, 37, HW, HW};
    const char *const params[] = {"batch", NULL, NULL, NULL};
    const int64_t wad[] = {16, CIN, 1, 1}, wbd[] = {16, CIN, 3, 3}, wcd[] = {5, CIN, 1, 1}, wdd[] = {4, 32, 1, 1};
    const int64_t b16[] = {16};
    static float wa[16 * CIN], wb[16 * CIN * 9], wc[5 * CIN], wd[4 * 32], ba[16];
    mb_fill_pattern(wa, 16 * CIN, 1, 0.05f);
    mb_fill_pattern(wb, 16 * CIN * 9, 2, 0.02f);
    mb_fill_pattern(wc, 5 * CIN, 3, 0.07f);
    mb_fill_pattern(wd, 4 * 32, 4, 0.03f);
    mb_fill_pattern(ba, 16, 5, 0.01f);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, params);
    mb_add_initializer(m, NULL, "WA", MCP_DTYPE_FLOAT, 4, wad, wa, sizeof wa);
    mb_add_initializer(m, NULL, "BA", MCP_DTYPE_FLOAT, 1, b16, ba, sizeof ba);
    mb_add_initializer(m, NULL, "WB", MCP_DTYPE_FLOAT, 4, wbd, wb, sizeof wb);
    mb_add_initializer(m, NULL, "WC", MCP_DTYPE_FLOAT, 4, wcd, wc, sizeof wc);
    mb_add_initializer(m, NULL, "WD", MCP_DTYPE_FLOAT, 4, wdd, wd, sizeof wd);
    const int64_t pads[] = {1, 1, 1, 1};
    mb_add_node(m, NULL, "Conv", "conv_a", "X,WA,BA", "CA");
    mb_add_node(m, NULL, "Relu", "relu_a", "CA", "A");
    Onnx__NodeProto *cb = mb_add_node(m, NULL, "Conv", "conv_b", "X,WB", "CB");
    mb_attr_ints(m, cb, "pads", pads, 4);
    mb_add_node(m, NULL, "Relu", "relu_b", "CB", "B");
    mb_add_node(m, NULL, "Conv", "conv_c", "X,WC", "C");
    Onnx__NodeProto *d = mb_add_node(m, NULL, "Concat", "concat_ab", "A,B", "D");
    mb_attr_int(m, d, "axis", 1);
    mb_add_node(m, NULL, "Conv", "conv_d", "D,WD", "Y1");
    Onnx__NodeProto *e = mb_add_node(m, NULL, "Concat", "concat_acb", "A,C,B", "Y2");
    mb_attr_int(m, e, "axis", -3);
    mb_add_output(m, NULL, "Y1", MCP_DTYPE_FLOAT, 4, y1d, params);
    mb_add_output(m, NULL, "Y2", MCP_DTYPE_FLOAT, 4, y2d, params);
    return m;
}

static mcp_session *open_session(const uint8_t *buf, size_t len, const char *backend, int profile)
{
    char msg[1024] = "";
    mcp_session_options o = mcp_session_options_default();
    o.backend = backend;
    o.profile = profile;
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(buf, len, NULL, &o, &s, msg, sizeof msg);
    if (st != MCP_STATUS_OK) fprintf(stderr, "%s session: %s\n", backend, msg);
    return s;
}

/* Packs m (and frees it) and opens it twice: backends a and b, each with
 * its profile option. */
static void open_two(mb_model *m, const char *a, int profile_a, mcp_session **sa, const char *b, int profile_b,
                     mcp_session **sb)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    *sa = open_session(buf, len, a, profile_a);
    *sb = open_session(buf, len, b, profile_b);
    free(buf);
}

/* Elements of g farther than 1e-4 relative from w's. */
static int mismatches(const mcp_tensor *g, const mcp_tensor *w)
{
    const float *gv = g->data, *wv = w->data;
    int bad = 0;
    for (int64_t i = 0; i < mcp_tensor_numel(w); i++) bad += !(fabsf(gv[i] - wv[i]) <= 1e-4f * (1.0f + fabsf(wv[i])));
    return bad;
}

static mcp_status run_batch(mcp_session *s, int64_t batch, mcp_value **outs, char *msg, size_t cap)
{
    mcp_err err = {msg, cap};
    const int64_t dims[] = {batch, CIN, HW, HW};
    mcp_value x = {0};
    x.kind = MCP_VALUE_TENSOR;
    if (mcp_tensor_alloc(&x.tensor, MCP_DTYPE_FLOAT, 4, dims, &err) != MCP_STATUS_OK) return MCP_STATUS_OUT_OF_MEMORY;
    mb_fill_pattern(x.tensor.data, (int)mcp_tensor_numel(&x.tensor), (int)batch, 0.1f);
    mcp_value *ins[1] = {&x};
    mcp_status st = mcp__session_run(s, ins, outs, &err);
    mcp_value_clear(&x);
    return st;
}

static void test_concat_layouts_match_reference(void)
{
    char msg[1024] = "";
    int64_t base = mcp_alloc_live_count();
    mcp_session *s, *ref;
    open_two(concat_cnn(), "auto", 0, &s, "ref", 0, &ref);
    TU_REQUIRE(s && ref);
    const int64_t batches[] = {1, 2, 3, 1};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
        /* Twice per shape: the recording run and a planned one. */
        for (int rep = 0; rep < 2; rep++) {
            mcp_value *got[2] = {mcp_value_new(), mcp_value_new()}, *want[2] = {mcp_value_new(), mcp_value_new()};
            TU_REQUIRE(got[0] && got[1] && want[0] && want[1]);
            TU_CHECK_STATUS(run_batch(s, batches[b], got, msg, sizeof msg), MCP_STATUS_OK, msg);
            TU_CHECK_STATUS(run_batch(ref, batches[b], want, msg, sizeof msg), MCP_STATUS_OK, msg);
            for (int o = 0; o < 2; o++) {
                const mcp_tensor *g = &got[o]->tensor, *w = &want[o]->tensor;
                TU_CHECK(g->format == NULL);
                TU_REQUIRE(g->rank == 4 && w->rank == 4 && memcmp(g->dims, w->dims, sizeof g->dims[0] * 4) == 0);
                TU_CHECK_INT(g->dims[0], batches[b]);
                int bad = mismatches(g, w);
                if (bad) fprintf(stderr, "batch %lld output %d: %d elements differ\n", (long long)batches[b], o, bad);
                TU_CHECK_INT(bad, 0);
            }
            for (int o = 0; o < 2; o++) {
                mcp_value_free(got[o]);
                mcp_value_free(want[o]);
            }
        }
    }
    mcp_session_destroy(s);
    mcp_session_destroy(ref);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

/*
 * Concat in place: X -> two Conv (16 channels each, blocked) -> Concat -> Y.
 * At batch 1 the plan puts both convolutions' outputs inside Y's block, so
 * the arena is Y alone (without it, A, B and Y are live together: twice
 * that); the results stay those of the reference backend.
 */
static void test_concat_in_place(void)
{
    char msg[1024] = "";
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {1, CIN, HW, HW}, yd[] = {1, 32, HW, HW}, wd[] = {16, CIN, 1, 1}, wbd[] = {16, CIN, 3, 3};
    static float wa[16 * CIN], wb[16 * CIN * 9];
    mb_fill_pattern(wa, 16 * CIN, 6, 0.05f);
    mb_fill_pattern(wb, 16 * CIN * 9, 7, 0.02f);
    const int64_t pads[] = {1, 1, 1, 1};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, NULL);
    mb_add_initializer(m, NULL, "WA", MCP_DTYPE_FLOAT, 4, wd, wa, sizeof wa);
    mb_add_initializer(m, NULL, "WB", MCP_DTYPE_FLOAT, 4, wbd, wb, sizeof wb);
    mb_add_node(m, NULL, "Conv", "conv_a", "X,WA", "A");
    Onnx__NodeProto *cb = mb_add_node(m, NULL, "Conv", "conv_b", "X,WB", "B");
    mb_attr_ints(m, cb, "pads", pads, 4);
    Onnx__NodeProto *c = mb_add_node(m, NULL, "Concat", "concat", "A,B", "Y");
    mb_attr_int(m, c, "axis", 1);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, yd, NULL);
    mcp_session *s, *ref;
    open_two(m, "auto", 0, &s, "ref", 0, &ref);
    TU_REQUIRE(s && ref);
    for (int rep = 0; rep < 3; rep++) {
        mcp_value *got[1] = {mcp_value_new()}, *want[1] = {mcp_value_new()};
        TU_REQUIRE(got[0] && want[0]);
        TU_CHECK_STATUS(run_batch(s, 1, got, msg, sizeof msg), MCP_STATUS_OK, msg);
        TU_CHECK_STATUS(run_batch(ref, 1, want, msg, sizeof msg), MCP_STATUS_OK, msg);
        TU_CHECK_INT(mismatches(&got[0]->tensor, &want[0]->tensor), 0);
        mcp_value_free(got[0]);
        mcp_value_free(want[0]);
    }
#ifdef MCP_WITH_DNNL
    /* Only the oneDNN Concat declares the in-place layout. */
    mcp__runctx *rc = mcp__runctx_take(s, false);
    TU_REQUIRE(rc != NULL);
    TU_CHECK_INT((int64_t)mcp__runctx_arena_bytes(rc), 32 * HW * HW * (int64_t)sizeof(float));
    mcp__runctx_give(s, rc);
#endif
    mcp_session_destroy(s);
    mcp_session_destroy(ref);
}

/*
 * Transposes large enough for the oneDNN reorder (512K elements and more):
 * every permutation of a 3-D tensor, and one that moves only a size-1 axis,
 * give exactly the reference backend's bytes.
 */
static void test_large_transposes(void)
{
    char msg[1024] = "";
    enum { A = 64, B = 96, C = 96 };
    static const int64_t perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {A, B, C};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, xd, NULL);
    for (int p = 0; p < 6; p++) {
        char name[16], out[16];
        snprintf(name, sizeof name, "t%d", p);
        snprintf(out, sizeof out, "Y%d", p);
        Onnx__NodeProto *t = mb_add_node(m, NULL, "Transpose", name, "X", out);
        mb_attr_ints(m, t, "perm", perms[p], 3);
        const int64_t yd[] = {xd[perms[p][0]], xd[perms[p][1]], xd[perms[p][2]]};
        mb_add_output(m, NULL, out, MCP_DTYPE_FLOAT, 3, yd, NULL);
    }
    mcp_session *s, *ref;
    open_two(m, "auto", 0, &s, "ref", 0, &ref);
    TU_REQUIRE(s && ref);
#ifdef MCP_WITH_DNNL
    for (int i = 0; i < s->graph->n_nodes; i++) TU_CHECK_STR(s->graph->nodes[i].kernel_backend, "dnnl");
#endif
    mcp_err err = {msg, sizeof msg};
    mcp_value x = {0};
    x.kind = MCP_VALUE_TENSOR;
    TU_REQUIRE_OK(mcp_tensor_alloc(&x.tensor, MCP_DTYPE_FLOAT, 3, xd, &err), msg);
    float *xv = x.tensor.data;
    for (int64_t i = 0; i < (int64_t)A * B * C; i++) xv[i] = (float)i;
    mcp_value *ins[1] = {&x};
    for (int rep = 0; rep < 2; rep++) {
        mcp_value *got[6], *want[6];
        for (int p = 0; p < 6; p++) {
            got[p] = mcp_value_new();
            want[p] = mcp_value_new();
        }
        TU_CHECK_STATUS(mcp__session_run(s, ins, got, &err), MCP_STATUS_OK, msg);
        TU_CHECK_STATUS(mcp__session_run(ref, ins, want, &err), MCP_STATUS_OK, msg);
        for (int p = 0; p < 6; p++) {
            const mcp_tensor *g = &got[p]->tensor, *w = &want[p]->tensor;
            TU_CHECK(g->rank == 3 && memcmp(g->dims, w->dims, sizeof g->dims[0] * 3) == 0);
            TU_CHECK(memcmp(g->data, w->data, mcp_tensor_nbytes(w)) == 0);
            /* and the reference is right: Y[i,j,k] = X at the permuted index */
            const float *wv = w->data;
            int64_t i = 5, j = 7, k = 11, idx[3];
            idx[perms[p][0]] = i;
            idx[perms[p][1]] = j;
            idx[perms[p][2]] = k;
            TU_CHECK(wv[(i * w->dims[1] + j) * w->dims[2] + k] == (float)((idx[0] * B + idx[1]) * C + idx[2]));
            mcp_value_free(got[p]);
            mcp_value_free(want[p]);
        }
    }
    mcp_value_clear(&x);
    mcp_session_destroy(s);
    mcp_session_destroy(ref);
}

/*
 * Y = Relu(X W1 + b1) W2 for X [batch, 64]: each row of Y must have the same
 * bits whatever the batch size, since the scheduler batches requests and
 * gives each its own rows back. The reference of row r is its value in the
 * batch of 24 (full groups of every kernel width).
 */
static void test_matmul_rows_independent_of_batch(void)
{
    enum { K = 64, H = 48, N = 10, MAXB = 24 };
    char msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {-1, K}, yd[] = {-1, N}, w1d[] = {K, H}, b1d[] = {H}, w2d[] = {H, N};
    const char *const params[] = {"batch", NULL};
    static float w1[K * H], b1[H], w2[H * N];
    mb_fill_pattern(w1, K * H, 7, 0.013f);
    mb_fill_pattern(b1, H, 8, 0.1f);
    mb_fill_pattern(w2, H * N, 9, 0.021f);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, params);
    mb_add_initializer(m, NULL, "W1", MCP_DTYPE_FLOAT, 2, w1d, w1, sizeof w1);
    mb_add_initializer(m, NULL, "B1", MCP_DTYPE_FLOAT, 1, b1d, b1, sizeof b1);
    mb_add_initializer(m, NULL, "W2", MCP_DTYPE_FLOAT, 2, w2d, w2, sizeof w2);
    mb_add_node(m, NULL, "MatMul", "fc1", "X,W1", "M1");
    mb_add_node(m, NULL, "Add", "fc1_bias", "M1,B1", "A1");
    mb_add_node(m, NULL, "Relu", "relu", "A1", "R1");
    mb_add_node(m, NULL, "MatMul", "fc2", "R1,W2", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, yd, params);
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    mcp_session *s = open_session(buf, len, "auto", 0);
    free(buf);
    TU_REQUIRE(s);
    static float x[MAXB * K], want[MAXB * N];
    for (int i = 0; i < MAXB * K; i++) x[i] = (float)((i * 7919) % 1013) / 1013.0f - 0.4f;
    /* 1 to 13 rows run on one thread; 1550 rows (the 24 again and again)
     * on every core, where each thread's share would have its own tail.
     * Not covered: shares past oneDNN's own row blocking (about a thousand
     * rows of this model's second layer), see mm_rows. */
    static const int64_t sizes[] = {MAXB, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 1550};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int64_t b = sizes[si];
        const int64_t dims[] = {b, K};
        mcp_value xv = {0};
        xv.kind = MCP_VALUE_TENSOR;
        TU_REQUIRE_OK(mcp_tensor_alloc(&xv.tensor, MCP_DTYPE_FLOAT, 2, dims, &err), msg);
        for (int64_t r = 0; r < b; r++) memcpy((float *)xv.tensor.data + r * K, x + (r % MAXB) * K, sizeof(float) * K);
        mcp_value *ins[1] = {&xv}, *outs[1] = {mcp_value_new()};
        TU_CHECK_STATUS(mcp__session_run(s, ins, outs, &err), MCP_STATUS_OK, msg);
        const mcp_tensor *y = &outs[0]->tensor;
        TU_REQUIRE(y->rank == 2 && y->dims[0] == b && y->dims[1] == N);
        if (b == MAXB) memcpy(want, y->data, sizeof want);
        for (int64_t r = 0; r < b; r++) {
            if (memcmp((const float *)y->data + r * N, want + (r % MAXB) * N, sizeof(float) * N) != 0) {
                TU_FAIL_AT(__FILE__, __LINE__, "batch %lld: row %lld differs from its bits in the batch of %d", (long long)b,
                           (long long)r, MAXB);
                break;
            }
        }
        mcp_value_free(outs[0]);
        mcp_value_clear(&xv);
    }
    /* and the products are right: row 0 against a direct computation */
    float h[H], y0[N];
    for (int j = 0; j < H; j++) {
        double acc = b1[j];
        for (int k = 0; k < K; k++) acc += (double)x[k] * w1[k * H + j];
        h[j] = acc > 0 ? (float)acc : 0.0f;
    }
    for (int j = 0; j < N; j++) {
        double acc = 0;
        for (int k = 0; k < H; k++) acc += (double)h[k] * w2[k * N + j];
        y0[j] = (float)acc;
    }
    for (int j = 0; j < N; j++) TU_CHECK(fabsf(want[j] - y0[j]) <= 1e-4f * (1.0f + fabsf(y0[j])));
    mcp_session_destroy(s);
}

static void test_profile(void)
{
    char msg[1024] = "";
    mcp_session *s, *plain;
    open_two(concat_cnn(), "auto", 1, &s, "auto", 0, &plain);
    TU_REQUIRE(s && plain);
    TU_CHECK_INT(mcp_session_profile(plain, NULL, 0), -1);
    int n = mcp_session_profile(s, NULL, 0);
    TU_CHECK_INT(n, s->graph->n_nodes);
    TU_REQUIRE(n > 0 && n < 32);
    mcp_node_profile prof[32];
    TU_CHECK_INT(mcp_session_profile(s, prof, n), n);
    for (int i = 0; i < n; i++) TU_CHECK(prof[i].calls == 0 && prof[i].total_ms == 0.0);
    for (int r = 0; r < 3; r++) {
        mcp_value *outs[2] = {mcp_value_new(), mcp_value_new()};
        TU_CHECK_STATUS(run_batch(s, 2, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
        mcp_value_free(outs[0]);
        mcp_value_free(outs[1]);
    }
    TU_CHECK_INT(mcp_session_profile(s, prof, n), n);
    bool saw_concat = false;
    for (int i = 0; i < n; i++) {
        TU_CHECK(prof[i].name && prof[i].op_type && prof[i].backend);
        TU_CHECK_STR(prof[i].name, s->graph->nodes[i].name);
        TU_CHECK(strcmp(prof[i].backend, "ref") == 0 || strcmp(prof[i].backend, "dnnl") == 0);
        TU_CHECK_INT((int64_t)prof[i].calls, 3);
        TU_CHECK(prof[i].total_ms > 0.0);
        saw_concat |= strcmp(prof[i].op_type, "Concat") == 0;
    }
    TU_CHECK(saw_concat);
    /* A short capacity fills what fits and still returns the count. */
    mcp_node_profile one;
    TU_CHECK_INT(mcp_session_profile(s, &one, 1), n);
    TU_CHECK_STR(one.name, s->graph->nodes[0].name);
    mcp_session_profile_reset(s);
    TU_CHECK_INT(mcp_session_profile(s, prof, n), n);
    for (int i = 0; i < n; i++) TU_CHECK(prof[i].calls == 0 && prof[i].total_ms == 0.0);
    mcp_session_destroy(s);
    mcp_session_destroy(plain);
}

/*
 * bfloat16 compute (the session option bf16) on a graph that crosses every
 * kind of kernel a bf16 activation can meet: X [b,8,9,9] -> A = Relu(Conv
 * 1x1, 16 ch) -> P = MaxPool 3x3 -> S = Relu(Conv3x3(P) + A) (a sum
 * post-op over bf16) -> M = S * per-channel constant (binary, bf16 with
 * float32) -> C = Concat(M, X) (bf16 beside float32: reference kernel) and
 * D = Concat(A, S) (both bf16) -> T = ConvTranspose(D) (float32 only) ->
 * G = Flatten(GlobalAveragePool(S)) -> Y1 = Gemm(G, W^T, b) (bf16 product)
 * and Y2 = MatMul(G, G^T) (two activations: float32). Where the CPU has
 * bf16 dot products the results are the float32 reference's within bf16's
 * rounding, and differ from the float32 session's (bf16 really ran); where
 * it has none the option changes nothing.
 */
static mb_model *bf16_cnn(void)
{
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {-1, CIN, HW, HW}, cd[] = {-1, 16 + CIN, HW, HW};
    const int64_t td[] = {-1, 4, HW + 2, HW + 2}, y1d[] = {-1, 10}, y2d[] = {-1, -1};
    const char *const params[] = {"batch", NULL, NULL, NULL}, *const p2[] = {"batch", "batch"};
    const int64_t wad[] = {16, CIN, 1, 1}, wbd[] = {16, 16, 3, 3}, sd[] = {1, 16, 1, 1}, wtd[] = {32, 4, 3, 3};
    const int64_t wgd[] = {10, 16}, b10[] = {10}, b16[] = {16};
    static float wa[16 * CIN], ba[16], wb[16 * 16 * 9], sc[16], wt[32 * 4 * 9], wg[10 * 16], bg[10];
    mb_fill_pattern(wa, 16 * CIN, 1, 0.05f);
    mb_fill_pattern(ba, 16, 2, 0.01f);
    mb_fill_pattern(wb, 16 * 16 * 9, 3, 0.02f);
    mb_fill_pattern(sc, 16, 4, 0.1f);
    mb_fill_pattern(wt, 32 * 4 * 9, 5, 0.03f);
    mb_fill_pattern(wg, 10 * 16, 6, 0.07f);
    mb_fill_pattern(bg, 10, 7, 0.02f);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, params);
    mb_add_initializer(m, NULL, "WA", MCP_DTYPE_FLOAT, 4, wad, wa, sizeof wa);
    mb_add_initializer(m, NULL, "BA", MCP_DTYPE_FLOAT, 1, b16, ba, sizeof ba);
    mb_add_initializer(m, NULL, "WB", MCP_DTYPE_FLOAT, 4, wbd, wb, sizeof wb);
    mb_add_initializer(m, NULL, "SC", MCP_DTYPE_FLOAT, 4, sd, sc, sizeof sc);
    mb_add_initializer(m, NULL, "WT", MCP_DTYPE_FLOAT, 4, wtd, wt, sizeof wt);
    mb_add_initializer(m, NULL, "WG", MCP_DTYPE_FLOAT, 2, wgd, wg, sizeof wg);
    mb_add_initializer(m, NULL, "BG", MCP_DTYPE_FLOAT, 1, b10, bg, sizeof bg);
    const int64_t pads[] = {1, 1, 1, 1}, k3[] = {3, 3}, ones[] = {1, 1};
    mb_add_node(m, NULL, "Conv", "conv_a", "X,WA,BA", "CA");
    mb_add_node(m, NULL, "Relu", "relu_a", "CA", "A");
    Onnx__NodeProto *pool = mb_add_node(m, NULL, "MaxPool", "pool", "A", "P");
    mb_attr_ints(m, pool, "kernel_shape", k3, 2);
    mb_attr_ints(m, pool, "pads", pads, 4);
    mb_attr_ints(m, pool, "strides", ones, 2);
    Onnx__NodeProto *cb = mb_add_node(m, NULL, "Conv", "conv_b", "P,WB", "CB");
    mb_attr_ints(m, cb, "pads", pads, 4);
    mb_add_node(m, NULL, "Add", "add", "CB,A", "SA");
    mb_add_node(m, NULL, "Relu", "relu_s", "SA", "S");
    mb_add_node(m, NULL, "Mul", "mul", "S,SC", "M");
    Onnx__NodeProto *c = mb_add_node(m, NULL, "Concat", "concat_mx", "M,X", "C");
    mb_attr_int(m, c, "axis", 1);
    Onnx__NodeProto *d = mb_add_node(m, NULL, "Concat", "concat_as", "A,S", "D");
    mb_attr_int(m, d, "axis", 1);
    mb_add_node(m, NULL, "ConvTranspose", "deconv", "D,WT", "T");
    mb_add_node(m, NULL, "GlobalAveragePool", "gap", "S", "GP");
    mb_add_node(m, NULL, "Flatten", "flat", "GP", "G");
    Onnx__NodeProto *gm = mb_add_node(m, NULL, "Gemm", "gemm", "G,WG,BG", "Y1");
    mb_attr_int(m, gm, "transB", 1);
    Onnx__NodeProto *gt = mb_add_node(m, NULL, "Transpose", "gt", "G", "GT");
    const int64_t perm[] = {1, 0};
    mb_attr_ints(m, gt, "perm", perm, 2);
    mb_add_node(m, NULL, "MatMul", "gram", "G,GT", "Y2");
    mb_add_output(m, NULL, "C", MCP_DTYPE_FLOAT, 4, cd, params);
    mb_add_output(m, NULL, "T", MCP_DTYPE_FLOAT, 4, td, params);
    mb_add_output(m, NULL, "Y1", MCP_DTYPE_FLOAT, 2, y1d, p2);
    mb_add_output(m, NULL, "Y2", MCP_DTYPE_FLOAT, 2, y2d, p2);
    return m;
}

static void test_bf16_matches_float32(void)
{
    enum { OUTS = 4 };
    char msg[1024] = "";
    int64_t base = mcp_alloc_live_count();
    size_t len;
    mb_model *m = bf16_cnn();
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    TU_REQUIRE(buf);
    mcp_session_options o = mcp_session_options_default();
    o.bf16 = 1;
    mcp_session *s = NULL, *f32 = open_session(buf, len, "auto", 0), *ref = open_session(buf, len, "ref", 0);
    mcp_status st = mcp_session_create_from_memory(buf, len, NULL, &o, &s, msg, sizeof msg);
    free(buf);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
    TU_REQUIRE(s && f32 && ref);
    bool bf16 = strcmp(mcp_session_precision(s), "bf16") == 0;
    TU_CHECK_STR(mcp_session_precision(f32), "fp32");
    TU_CHECK_STR(mcp_session_precision(ref), "fp32");
    fprintf(stderr, "bf16 session runs at %s\n", mcp_session_precision(s));
    /* Which nodes compute in bf16: the convolutions and the Gemm, never the
     * product of two activations. */
    for (int i = 0; bf16 && i < s->graph->n_nodes; i++) {
        const mcp_node *n = &s->graph->nodes[i];
        bool want = strcmp(n->op_type, "FusedConv") == 0 || strcmp(n->op_type, "Conv") == 0 ||
                    strcmp(n->op_type, "Gemm") == 0;
        if (mcp_ops_node_bf16(n) != want) fprintf(stderr, "node %s (%s)\n", n->name, n->op_type);
        TU_CHECK(mcp_ops_node_bf16(n) == want);
    }
    const int64_t batches[] = {1, 2, 1};
    for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
        for (int rep = 0; rep < 2; rep++) {
            mcp_value *got[OUTS], *exact[OUTS], *want[OUTS];
            for (int o2 = 0; o2 < OUTS; o2++) {
                got[o2] = mcp_value_new();
                exact[o2] = mcp_value_new();
                want[o2] = mcp_value_new();
            }
            TU_CHECK_STATUS(run_batch(s, batches[b], got, msg, sizeof msg), MCP_STATUS_OK, msg);
            TU_CHECK_STATUS(run_batch(f32, batches[b], exact, msg, sizeof msg), MCP_STATUS_OK, msg);
            TU_CHECK_STATUS(run_batch(ref, batches[b], want, msg, sizeof msg), MCP_STATUS_OK, msg);
            int differ = 0;
            for (int o2 = 0; o2 < OUTS; o2++) {
                const mcp_tensor *g = &got[o2]->tensor, *e = &exact[o2]->tensor, *w = &want[o2]->tensor;
                TU_CHECK(g->format == NULL && g->dtype == MCP_DTYPE_FLOAT);
                TU_REQUIRE(g->rank == w->rank && memcmp(g->dims, w->dims, sizeof g->dims[0] * (size_t)w->rank) == 0);
                /* Within bf16's rounding: 2^-8 relative per operand, a few
                 * layers deep, against the output's scale. */
                const float *gv = g->data, *ev = e->data, *wv = w->data;
                float scale = 0;
                for (int64_t i = 0; i < mcp_tensor_numel(w); i++) scale = fmaxf(scale, fabsf(wv[i]));
                int bad = 0;
                for (int64_t i = 0; i < mcp_tensor_numel(w); i++) {
                    bad += !(fabsf(gv[i] - wv[i]) <= 0.03f * scale + 1e-6f);
                    differ += gv[i] != ev[i];
                }
                if (bad) fprintf(stderr, "batch %lld output %d: %d elements off\n", (long long)batches[b], o2, bad);
                TU_CHECK_INT(bad, 0);
            }
            /* bf16 changed the results, or nothing where it does not apply. */
            TU_CHECK(bf16 ? differ > 0 : differ == 0);
            for (int o2 = 0; o2 < OUTS; o2++) {
                mcp_value_free(got[o2]);
                mcp_value_free(exact[o2]);
                mcp_value_free(want[o2]);
            }
        }
    mcp_session_destroy(s);
    mcp_session_destroy(f32);
    mcp_session_destroy(ref);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

/*
 * More input shapes than a node's primitive cache holds (4 per input
 * layout): past it, a primitive is built per call, and its output must not
 * keep that primitive's format, which dies with the call. X [1,8,h,w] ->
 * Conv (16 ch, blocked output) -> MaxPool 2x2 -> Y, at six sizes, twice,
 * against the reference backend.
 */
static void test_cache_overflow_formats(void)
{
    char msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {1, CIN, -1, -1}, yd[] = {1, 16, -1, -1}, wd[] = {16, CIN, 3, 3};
    const char *const params[] = {NULL, NULL, "h", "w"};
    static float w[16 * CIN * 9];
    mb_fill_pattern(w, 16 * CIN * 9, 9, 0.03f);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, params);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_FLOAT, 4, wd, w, sizeof w);
    const int64_t pads[] = {1, 1, 1, 1}, k2[] = {2, 2};
    Onnx__NodeProto *c = mb_add_node(m, NULL, "Conv", "conv", "X,W", "C");
    mb_attr_ints(m, c, "pads", pads, 4);
    Onnx__NodeProto *p = mb_add_node(m, NULL, "MaxPool", "pool", "C", "Y");
    mb_attr_ints(m, p, "kernel_shape", k2, 2);
    mb_attr_ints(m, p, "strides", k2, 2);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, yd, NULL);
    mcp_session *s, *ref;
    open_two(m, "auto", 0, &s, "ref", 0, &ref);
    TU_REQUIRE(s && ref);
    for (int rep = 0; rep < 2; rep++)
        for (int64_t hw = 6; hw < 18; hw += 2) {
            const int64_t dims[] = {1, CIN, hw, hw + 2};
            mcp_value x = {0};
            x.kind = MCP_VALUE_TENSOR;
            TU_REQUIRE_OK(mcp_tensor_alloc(&x.tensor, MCP_DTYPE_FLOAT, 4, dims, &err), msg);
            mb_fill_pattern(x.tensor.data, (int)mcp_tensor_numel(&x.tensor), (int)hw, 0.1f);
            mcp_value *ins[1] = {&x}, *got[1] = {mcp_value_new()}, *want[1] = {mcp_value_new()};
            TU_CHECK_STATUS(mcp__session_run(s, ins, got, &err), MCP_STATUS_OK, msg);
            TU_CHECK_STATUS(mcp__session_run(ref, ins, want, &err), MCP_STATUS_OK, msg);
            TU_CHECK(got[0]->tensor.format == NULL);
            TU_CHECK(memcmp(got[0]->tensor.dims, want[0]->tensor.dims, sizeof(int64_t) * 4) == 0);
            TU_CHECK_INT(mismatches(&got[0]->tensor, &want[0]->tensor), 0);
            mcp_value_free(got[0]);
            mcp_value_free(want[0]);
            mcp_value_clear(&x);
        }
    mcp_session_destroy(s);
    mcp_session_destroy(ref);
}

int main(void)
{
    int64_t start = mcp_alloc_live_count();
    TU_RUN(test_concat_layouts_match_reference);
    TU_RUN(test_concat_in_place);
    TU_RUN(test_large_transposes);
    TU_RUN(test_matmul_rows_independent_of_batch);
    TU_RUN(test_profile);
    TU_RUN(test_bf16_matches_float32);
    TU_RUN(test_cache_overflow_formats);
    TU_CHECK_INT(mcp_alloc_live_count(), start);
    return tu_finish("test_backends");
}
