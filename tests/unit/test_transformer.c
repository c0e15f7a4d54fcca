/*
 * The transformer operators in a model: a decoder layer at opset 24
 * (RMSNormalization, RotaryEmbedding, grouped-query causal Attention with a
 * KV cache, Swish) run one token at a time for 16 steps, each step's
 * present keys and values fed back as the next step's past, must give what
 * one run over all 16 tokens gives, on both backends. And the attacks:
 * inputs and attributes that contradict each other fail the run with a
 * message that names them.
 */
#include <stdbool.h>

#include "mcp/mcp.h"
#include "model_builder.h"
#include "test_util.h"

#define HIDDEN 32
#define HEADS 4
#define KV_HEADS 2
#define HEAD 8
#define STEPS 16
#define MAX_POS 64

static void add_weight(mb_model *m, const char *name, int64_t rows, int64_t cols, int seed)
{
    float *w = malloc(sizeof *w * (size_t)(rows * cols));
    mb_fill_pattern(w, (int)(rows * cols), seed, 0.05f);
    int64_t dims[2] = {rows, cols};
    mb_add_initializer(m, NULL, name, MCP_DTYPE_FLOAT, 2, dims, w, sizeof *w * (size_t)(rows * cols));
    free(w);
}

/* x [1, S, 32], past_key / past_value [1, 2, P, 8], pos [1, S] -> y,
 * present_key, present_value. */
static uint8_t *decoder_model(size_t *len)
{
    mb_model *m = mb_model_new(24);
    const char *seq[3] = {NULL, "S", NULL}, *past[4] = {NULL, NULL, "P", NULL}, *total[4] = {NULL, NULL, "T", NULL};
    int64_t xd[3] = {1, -1, HIDDEN}, pd[4] = {1, KV_HEADS, -1, HEAD}, posd[2] = {1, -1};
    mb_add_input(m, NULL, "x", MCP_DTYPE_FLOAT, 3, xd, seq);
    mb_add_input(m, NULL, "past_key", MCP_DTYPE_FLOAT, 4, pd, past);
    mb_add_input(m, NULL, "past_value", MCP_DTYPE_FLOAT, 4, pd, past);
    mb_add_input(m, NULL, "pos", MCP_DTYPE_INT64, 2, posd, (const char *const[]){NULL, "S"});
    mb_add_output(m, NULL, "y", MCP_DTYPE_FLOAT, 3, xd, seq);
    mb_add_output(m, NULL, "present_key", MCP_DTYPE_FLOAT, 4, pd, total);
    mb_add_output(m, NULL, "present_value", MCP_DTYPE_FLOAT, 4, pd, total);
    add_weight(m, "wq", HIDDEN, HEADS * HEAD, 1);
    add_weight(m, "wk", HIDDEN, KV_HEADS * HEAD, 2);
    add_weight(m, "wv", HIDDEN, KV_HEADS * HEAD, 3);
    add_weight(m, "wo", HEADS * HEAD, HIDDEN, 4);
    add_weight(m, "w1", HIDDEN, 64, 5);
    add_weight(m, "w2", 64, HIDDEN, 6);
    float g[HIDDEN], cs[MAX_POS * HEAD / 2], sn[MAX_POS * HEAD / 2];
    for (int i = 0; i < HIDDEN; i++) g[i] = 1.0f + 0.01f * (float)(i % 7);
    for (int p = 0; p < MAX_POS; p++)
        for (int j = 0; j < HEAD / 2; j++) {
            double a = p / pow(10000.0, 2.0 * j / HEAD);
            cs[p * HEAD / 2 + j] = (float)cos(a);
            sn[p * HEAD / 2 + j] = (float)sin(a);
        }
    int64_t gd[1] = {HIDDEN}, cd[2] = {MAX_POS, HEAD / 2};
    mb_add_initializer(m, NULL, "g", MCP_DTYPE_FLOAT, 1, gd, g, sizeof g);
    mb_add_initializer(m, NULL, "cos", MCP_DTYPE_FLOAT, 2, cd, cs, sizeof cs);
    mb_add_initializer(m, NULL, "sin", MCP_DTYPE_FLOAT, 2, cd, sn, sizeof sn);
    mb_add_node(m, NULL, "RMSNormalization", "norm1", "x,g", "n1");
    mb_add_node(m, NULL, "MatMul", NULL, "n1,wq", "q0");
    mb_add_node(m, NULL, "MatMul", NULL, "n1,wk", "k0");
    mb_add_node(m, NULL, "MatMul", NULL, "n1,wv", "v");
    Onnx__NodeProto *n = mb_add_node(m, NULL, "RotaryEmbedding", "rope_q", "q0,cos,sin,pos", "q");
    mb_attr_int(m, n, "num_heads", HEADS);
    n = mb_add_node(m, NULL, "RotaryEmbedding", "rope_k", "k0,cos,sin,pos", "k");
    mb_attr_int(m, n, "num_heads", KV_HEADS);
    n = mb_add_node(m, NULL, "Attention", "attn", "q,k,v,,past_key,past_value", "a,present_key,present_value");
    mb_attr_int(m, n, "q_num_heads", HEADS);
    mb_attr_int(m, n, "kv_num_heads", KV_HEADS);
    mb_attr_int(m, n, "is_causal", 1);
    mb_add_node(m, NULL, "MatMul", NULL, "a,wo", "o");
    mb_add_node(m, NULL, "Add", NULL, "x,o", "h");
    mb_add_node(m, NULL, "RMSNormalization", "norm2", "h,g", "n2");
    mb_add_node(m, NULL, "MatMul", NULL, "n2,w1", "f1");
    mb_add_node(m, NULL, "Swish", NULL, "f1", "f2");
    mb_add_node(m, NULL, "MatMul", NULL, "f2,w2", "f3");
    mb_add_node(m, NULL, "Add", NULL, "h,f3", "y");
    uint8_t *bytes = mb_pack(m, len);
    mb_model_free(m);
    return bytes;
}

/* Runs the model on tokens [first, first + n) of x with the given past
 * (p positions; NULL values for none); out receives y, present_key and
 * present_value. */
static mcp_status run_step(mcp_session *s, const float *x, int64_t first, int64_t n, mcp_value *pk, mcp_value *pv,
                           mcp_value **out, char *err, size_t cap)
{
    int64_t xd[3] = {1, n, HIDDEN}, posd[2] = {1, n}, ed[4] = {1, KV_HEADS, 0, HEAD};
    int64_t pos[STEPS];
    for (int64_t i = 0; i < n; i++) pos[i] = first + i;
    mcp_value *in[4] = {mcp_value_create_tensor(MCP_DTYPE_FLOAT, 3, xd, x + first * HIDDEN, err, cap), pk, pv,
                        mcp_value_create_tensor(MCP_DTYPE_INT64, 2, posd, pos, err, cap)};
    mcp_value *empty_k = NULL, *empty_v = NULL;
    if (!pk) in[1] = empty_k = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 4, ed, NULL, err, cap);
    if (!pv) in[2] = empty_v = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 4, ed, NULL, err, cap);
    static const char *const names[4] = {"x", "past_key", "past_value", "pos"};
    mcp_status st = mcp_session_run(s, 4, names, in, 0, NULL, out, err, cap);
    mcp_value_destroy(in[0]);
    mcp_value_destroy(in[3]);
    mcp_value_destroy(empty_k);
    mcp_value_destroy(empty_v);
    return st;
}

static const float *data_of(const mcp_value *v, int64_t *numel)
{
    const void *d = NULL;
    const int64_t *dims = NULL;
    int rank = 0;
    if (mcp_value_get_tensor(v, NULL, &rank, &dims, &d) != MCP_STATUS_OK) return NULL;
    *numel = 1;
    for (int i = 0; i < rank; i++) *numel *= dims[i];
    return d;
}

static void kv_cache_steps_match_full_run(const char *backend)
{
    size_t len;
    uint8_t *bytes = decoder_model(&len);
    mcp_session_options o = mcp_session_options_default();
    o.backend = backend;
    o.threads = 2;
    char err[512] = "";
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(bytes, len, NULL, &o, &s, err, sizeof err);
    free(bytes);
    TU_REQUIRE_OK(st, err);
    float x[STEPS * HIDDEN];
    mb_fill_pattern(x, STEPS * HIDDEN, 11, 0.25f);

    mcp_value *full[3] = {NULL, NULL, NULL};
    st = run_step(s, x, 0, STEPS, NULL, NULL, full, err, sizeof err);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, err);
    mcp_value *step[3] = {NULL, NULL, NULL};
    double worst = 0.0;
    for (int64_t t = 0; st == MCP_STATUS_OK && t < STEPS; t++) {
        mcp_value *next[3] = {NULL, NULL, NULL};
        st = run_step(s, x, t, 1, step[1], step[2], next, err, sizeof err);
        TU_CHECK_STATUS(st, MCP_STATUS_OK, err);
        for (int i = 0; i < 3; i++) mcp_value_destroy(step[i]);
        memcpy(step, next, sizeof step);
        if (st != MCP_STATUS_OK) break;
        int64_t n = 0, nf = 0;
        const float *y = data_of(step[0], &n), *yf = data_of(full[0], &nf);
        TU_CHECK_INT(n, HIDDEN);
        for (int64_t j = 0; y && yf && j < n; j++) {
            double d = fabs((double)y[j] - yf[t * HIDDEN + j]);
            worst = d > worst ? d : worst;
        }
    }
    TU_CHECK(worst < 1e-4);
    for (int i = 1; st == MCP_STATUS_OK && i < 3; i++) { /* the cache after 16 steps is the full run's */
        int64_t n = 0, nf = 0;
        const float *c = data_of(step[i], &n), *cf = data_of(full[i], &nf);
        TU_REQUIRE(c && cf);
        TU_CHECK_INT(n, nf);
        TU_CHECK_INT(n, KV_HEADS * STEPS * HEAD);
        double w = 0.0;
        for (int64_t j = 0; j < n && n == nf; j++) w = fmax(w, fabs((double)c[j] - cf[j]));
        TU_CHECK(w < 1e-5);
    }
    /* The steps did attend to the cache: step 16 alone, without it, differs. */
    mcp_value *alone[3] = {NULL, NULL, NULL};
    if (run_step(s, x, STEPS - 1, 1, NULL, NULL, alone, err, sizeof err) == MCP_STATUS_OK) {
        int64_t n = 0, nf = 0;
        const float *y = data_of(alone[0], &n), *yf = data_of(full[0], &nf);
        double d = 0.0;
        for (int64_t j = 0; j < n; j++) d = fmax(d, fabs((double)y[j] - yf[(STEPS - 1) * HIDDEN + j]));
        TU_CHECK(d > 1e-3);
    }
    for (int i = 0; i < 3; i++) {
        mcp_value_destroy(alone[i]);
        mcp_value_destroy(step[i]);
        mcp_value_destroy(full[i]);
    }
    mcp_session_destroy(s);
}

static void test_kv_cache_ref(void) { kv_cache_steps_match_full_run("ref"); }
static void test_kv_cache_dnnl(void) { kv_cache_steps_match_full_run("auto"); }

/* One Attention node over 4-D Q, K, V with optional past; attributes set
 * by the caller. */
#define NO_NONPAD INT64_MIN

typedef struct att_attack {
    const char *what;
    const char *attr;  /* an int attribute to set, or NULL */
    int64_t value;
    int64_t q_heads, kv_heads; /* of the 4-D inputs */
    int64_t past_len;  /* < 0: no past inputs; else past_key only when value_missing */
    bool value_missing;
    int64_t nonpad;    /* NO_NONPAD, or a nonpad_kv_seqlen input of this value */
    const char *expect;
} att_attack;

static void run_attack(const att_attack *a)
{
    mb_model *m = mb_model_new(24);
    int64_t qd[4] = {1, a->q_heads, 3, 8}, kd[4] = {1, a->kv_heads, 3, 8}, pd[4] = {1, a->kv_heads, a->past_len, 8};
    int64_t nd[1] = {1};
    mb_add_input(m, NULL, "q", MCP_DTYPE_FLOAT, 4, qd, NULL);
    mb_add_input(m, NULL, "k", MCP_DTYPE_FLOAT, 4, kd, NULL);
    mb_add_input(m, NULL, "v", MCP_DTYPE_FLOAT, 4, kd, NULL);
    char ins[64] = "q,k,v";
    if (a->past_len >= 0) {
        mb_add_input(m, NULL, "pk", MCP_DTYPE_FLOAT, 4, pd, NULL);
        strcat(ins, a->value_missing ? ",,pk" : ",,pk,pk");
    }
    if (a->nonpad != NO_NONPAD) {
        mb_add_input(m, NULL, "np", MCP_DTYPE_INT64, 1, nd, NULL);
        strcat(ins, ",,,,np");
    }
    mb_add_output(m, NULL, "y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Attention", "attn", ins, "y");
    if (a->attr) mb_attr_int(m, n, a->attr, a->value);
    size_t len;
    uint8_t *bytes = mb_pack(m, &len);
    mb_model_free(m);
    static const char *const backends[2] = {"ref", "auto"};
    for (int b = 0; b < 2; b++) {
        mcp_session_options o = mcp_session_options_default();
        o.backend = backends[b];
        char err[512] = "";
        mcp_session *s = NULL;
        mcp_status st = mcp_session_create_from_memory(bytes, len, NULL, &o, &s, err, sizeof err);
        if (st == MCP_STATUS_OK) {
            float buf[4 * 16 * 8] = {0};
            int64_t npv = a->nonpad;
            mcp_value *in[5] = {mcp_value_create_tensor(MCP_DTYPE_FLOAT, 4, qd, buf, err, sizeof err),
                                mcp_value_create_tensor(MCP_DTYPE_FLOAT, 4, kd, buf, err, sizeof err),
                                mcp_value_create_tensor(MCP_DTYPE_FLOAT, 4, kd, buf, err, sizeof err), NULL, NULL};
            const char *names[5] = {"q", "k", "v", NULL, NULL};
            int count = 3;
            if (a->past_len >= 0) {
                names[count] = "pk";
                in[count++] = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 4, pd, buf, err, sizeof err);
            }
            if (a->nonpad != NO_NONPAD) {
                names[count] = "np";
                in[count++] = mcp_value_create_tensor(MCP_DTYPE_INT64, 1, nd, &npv, err, sizeof err);
            }
            mcp_value *out = NULL;
            st = mcp_session_run(s, count, names, in, 0, NULL, &out, err, sizeof err);
            mcp_value_destroy(out);
            for (int i = 0; i < count; i++) mcp_value_destroy(in[i]);
            mcp_session_destroy(s);
        }
        if (st == MCP_STATUS_OK || !strstr(err, a->expect)) {
            TU_FAIL_AT(__FILE__, __LINE__, "%s (%s): status %s, message '%s', expected it to name '%s'", a->what,
                       backends[b], mcp_status_str(st), err, a->expect);
        }
        tu_checks++;
    }
    free(bytes);
}

static void test_attacks(void)
{
    static const att_attack attacks[] = {
        {"heads that do not group", NULL, 0, 3, 2, -1, false, NO_NONPAD, "multiple of key / value heads"},
        {"an unknown qk_matmul_output_mode", "qk_matmul_output_mode", 7, 2, 2, -1, false, NO_NONPAD,
         "qk_matmul_output_mode"},
        {"past_key without past_value", NULL, 0, 2, 2, 4, true, NO_NONPAD, "past_value"},
        {"nonpad_kv_seqlen past the keys", NULL, 0, 2, 2, -1, false, 9, "nonpad_kv_seqlen"},
        {"negative nonpad_kv_seqlen", NULL, 0, 2, 2, -1, false, -5, "nonpad_kv_seqlen"},
        {"heads attribute contradicting 4-D inputs", "q_num_heads", 5, 2, 2, -1, false, NO_NONPAD, "q_num_heads"},
    };
    for (size_t i = 0; i < sizeof attacks / sizeof attacks[0]; i++) run_attack(&attacks[i]);
}

/* Runs a one-node model on float inputs of the given shapes (zeros);
 * returns the status, the message in err. */
static mcp_status run_one(mb_model *m, int n, const char *const *names, const int64_t (*dims)[4], const int *ranks,
                          char *err, size_t cap)
{
    size_t len;
    uint8_t *bytes = mb_pack(m, &len);
    mb_model_free(m);
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(bytes, len, NULL, NULL, &s, err, cap);
    free(bytes);
    if (st != MCP_STATUS_OK) return st;
    mcp_value *in[4] = {0}, *out[4] = {0};
    for (int i = 0; i < n; i++) {
        int64_t numel = 1;
        for (int d = 0; d < ranks[i]; d++) numel *= dims[i][d];
        float *zeros = calloc((size_t)(numel > 0 ? numel : 1), sizeof *zeros);
        in[i] = mcp_value_create_tensor(MCP_DTYPE_FLOAT, ranks[i], dims[i], zeros, err, cap);
        free(zeros);
    }
    st = mcp_session_run(s, n, names, in, 0, NULL, out, err, cap);
    for (int i = 0; i < 4; i++) {
        mcp_value_destroy(in[i]);
        mcp_value_destroy(out[i]);
    }
    mcp_session_destroy(s);
    return st;
}

/* Shapes that would overflow the counts, or empty tensors whose other
 * dims are huge: a clear error, or an empty answer at once (no loop over
 * the huge dims). */
static void test_degenerate_shapes(void)
{
    static const char *const qkv[3] = {"q", "k", "v"};
    char err[512] = "";
    /* 3-D inputs of hidden size 0 with 2^62 + 1 heads. */
    mb_model *m = mb_model_new(23);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Attention", "attn", "q,k,v", "y");
    mb_attr_int(m, n, "q_num_heads", ((int64_t)1 << 62) + 1);
    mb_attr_int(m, n, "kv_num_heads", 1);
    for (int i = 0; i < 3; i++) mb_add_input(m, NULL, qkv[i], MCP_DTYPE_FLOAT, -1, NULL, NULL);
    mb_add_output(m, NULL, "y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    const int64_t d3[3][4] = {{1, 1, 0}, {1, 1, 0}, {1, 1, 4}};
    const int r3[3] = {3, 3, 3};
    mcp_status st = run_one(m, 3, qkv, d3, r3, err, sizeof err);
    TU_CHECK(st != MCP_STATUS_OK);
    TU_CHECK_CONTAINS(err, "q_num_heads");

    /* 4-D Q and V of size 0 (Y empty). */
    m = mb_model_new(23);
    mb_add_node(m, NULL, "Attention", "attn", "q,k,v", "y");
    for (int i = 0; i < 3; i++) mb_add_input(m, NULL, qkv[i], MCP_DTYPE_FLOAT, -1, NULL, NULL);
    mb_add_output(m, NULL, "y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    const int64_t d4[3][4] = {{1, 1, (int64_t)1 << 20, 0}, {1, 1, 1, 0}, {1, 1, 1, 0}};
    const int r4[3] = {4, 4, 4};
    st = run_one(m, 3, qkv, d4, r4, err, sizeof err);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, err);

    /* RotaryEmbedding of a 3-D X of hidden size 0 split into 2^40 heads
     * (2^60 rows of nothing). */
    static const char *const rot[3] = {"x", "c", "s"};
    m = mb_model_new(23);
    n = mb_add_node(m, NULL, "RotaryEmbedding", "rope", "x,c,s", "y");
    mb_attr_int(m, n, "num_heads", (int64_t)1 << 40);
    for (int i = 0; i < 3; i++) mb_add_input(m, NULL, rot[i], MCP_DTYPE_FLOAT, -1, NULL, NULL);
    mb_add_output(m, NULL, "y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    const int64_t dr[3][4] = {{1, (int64_t)1 << 20, 0}, {1, (int64_t)1 << 20, 0}, {1, (int64_t)1 << 20, 0}};
    const int rr[3] = {3, 3, 3};
    st = run_one(m, 3, rot, dr, rr, err, sizeof err);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, err);
}

int main(void)
{
    TU_RUN(test_kv_cache_ref);
    TU_RUN(test_kv_cache_dnnl);
    TU_RUN(test_attacks);
    TU_RUN(test_degenerate_shapes);
    return tu_finish("test_transformer");
}
