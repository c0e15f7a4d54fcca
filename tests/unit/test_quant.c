/*
 * The quantized operator families on the default backend (oneDNN's int8
 * kernels where the CPU has VNNI) against the reference kernels, on random
 * data: integer outputs (ConvInteger, MatMulInteger) bit for bit,
 * requantized ones (QLinearConv, QLinearMatMul) within one quantization
 * step. Each case also says which backend ran the node, so a CPU with VNNI
 * that silently falls back to the reference kernels fails here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "engine/engine.h"
#include "engine/quantize.h"
#include "mcp/mcp.h"
#include "model_builder.h"
#include "tensor/tensor.h"
#include "test_util.h"

static uint32_t rng_state;

static uint32_t rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

/* Fills n int8 or uint8 values uniformly over the type's range. */
static void fill_q(void *p, int64_t n, mcp_dtype dt)
{
    for (int64_t i = 0; i < n; i++) {
        int v = (int)(rnd() % 256);
        if (dt == MCP_DTYPE_INT8) ((int8_t *)p)[i] = (int8_t)(v - 128);
        else ((uint8_t *)p)[i] = (uint8_t)v;
    }
}

/* Whether the CPU has VNNI (avx512_vnni or avx_vnni), where the int8
 * kernels are expected to be oneDNN's. */
static bool cpu_has_vnni(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[8192];
    bool yes = false;
    while (!yes && fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) yes = strstr(line, " avx512_vnni") || strstr(line, " avx_vnni");
    fclose(f);
    return yes;
}

static mcp_session *open_session(const uint8_t *buf, size_t len, const char *backend)
{
    char msg[1024] = "";
    mcp_session_options o = mcp_session_options_default();
    o.backend = backend;
    o.threads = 2;
    mcp_session *s = NULL;
    if (mcp_session_create_from_memory(buf, len, NULL, &o, &s, msg, sizeof msg) != MCP_STATUS_OK)
        fprintf(stderr, "%s session: %s\n", backend, msg);
    return s;
}

/* The backend that runs the node named `name`. */
static const char *backend_of(const mcp_session *s, const char *name)
{
    for (int i = 0; i < s->graph->n_nodes; i++)
        if (strcmp(s->graph->nodes[i].name, name) == 0) return s->graph->nodes[i].kernel_backend;
    return "(none)";
}

/* Runs both sessions on the graph inputs `ins` and compares output 0: the
 * largest difference must be at most `tol` (0: bit-exact), in 1% of the
 * elements at most. */
static void compare(int line, const char *what, mcp_session *fast, mcp_session *ref, mcp_value *const *ins,
                    int64_t tol)
{
    char msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_value *outs_f[1] = {mcp_value_new()}, *outs_r[1] = {mcp_value_new()};
    mcp_status a = mcp__session_run(fast, ins, outs_f, &err);
    mcp_status b = a == MCP_STATUS_OK ? mcp__session_run(ref, ins, outs_r, &err) : a;
    tu_checks++;
    if (a != MCP_STATUS_OK || b != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, line, "%s: run failed: %s", what, msg);
    } else {
        const mcp_tensor *f = &outs_f[0]->tensor, *r = &outs_r[0]->tensor;
        int64_t n = mcp_tensor_numel(r), worst = 0, off = 0;
        bool same_shape = f->dtype == r->dtype && f->rank == r->rank &&
                          memcmp(f->dims, r->dims, sizeof *f->dims * (size_t)r->rank) == 0;
        for (int64_t i = 0; same_shape && i < n; i++) {
            int64_t fv, rv;
            if (r->dtype == MCP_DTYPE_INT32) fv = ((const int32_t *)f->data)[i], rv = ((const int32_t *)r->data)[i];
            else if (r->dtype == MCP_DTYPE_UINT8) fv = ((const uint8_t *)f->data)[i], rv = ((const uint8_t *)r->data)[i];
            else fv = ((const int8_t *)f->data)[i], rv = ((const int8_t *)r->data)[i];
            int64_t d = fv > rv ? fv - rv : rv - fv;
            if (d > worst) worst = d;
            off += d != 0;
        }
        if (!same_shape) TU_FAIL_AT(__FILE__, line, "%s: outputs differ in type or shape", what);
        else if (worst > tol || off * 100 > n)
            TU_FAIL_AT(__FILE__, line, "%s: %lld of %lld elements differ, by up to %lld (allowed %lld, in 1%% at most)",
                       what, (long long)off, (long long)n, (long long)worst, (long long)tol);
        /* Outputs that use the range: a test whose outputs all saturate or
         * sit at the zero point would prove nothing. */
        int64_t distinct = 0;
        bool seen[512] = {false};
        for (int64_t i = 0; r->dtype != MCP_DTYPE_INT32 && i < n; i++) {
            int v = r->dtype == MCP_DTYPE_UINT8 ? ((const uint8_t *)r->data)[i] : ((const int8_t *)r->data)[i] + 256;
            distinct += !seen[v];
            seen[v] = true;
        }
        if (r->dtype != MCP_DTYPE_INT32 && distinct < 40)
            TU_FAIL_AT(__FILE__, line, "%s: the reference output takes only %lld values", what, (long long)distinct);
    }
    mcp_value_free(outs_f[0]);
    mcp_value_free(outs_r[0]);
}

typedef struct conv_case {
    const char *label;
    bool qlinear;        /* QLinearConv, else ConvInteger */
    mcp_dtype x_dt, w_dt, y_dt;
    int64_t n, c, hw, m, k, group, stride, pad;
    bool per_channel, bias;
    bool zero_zps; /* x's and y's zero points 0 (oneDNN then takes none) */
} conv_case;

static void run_conv_case(int line, const conv_case *cc, bool vnni)
{
    mb_model *m = mb_model_new(13);
    int64_t icg = cc->c / cc->group;
    const int64_t xd[] = {cc->n, cc->c, cc->hw, cc->hw}, wd[] = {cc->m, icg, cc->k, cc->k};
    int64_t wn = cc->m * icg * cc->k * cc->k;
    void *w = malloc((size_t)wn);
    fill_q(w, wn, cc->w_dt);
    const int64_t one[] = {1}, md[] = {cc->m};
    /* Scales that spread y over its type's range: the accumulator's spread
     * is about 74 * 74 * sqrt(K) for uniform 8-bit data, K products each. */
    float xs = 0.02f, wbase = 0.004f;
    float ys = xs * wbase * 74.0f * 74.0f * sqrtf((float)(icg * cc->k * cc->k)) / 40.0f;
    float *ws = malloc(sizeof *ws * (size_t)cc->m);
    for (int64_t i = 0; i < cc->m; i++) ws[i] = wbase * (0.5f + 0.01f * (float)(rnd() % 100));
    uint8_t xz_u = (uint8_t)(rnd() % 256), yz_u = (uint8_t)(100 + rnd() % 50);
    int8_t xz_s = (int8_t)(rnd() % 40) - 20, yz_s = (int8_t)(rnd() % 20) - 10;
    if (cc->zero_zps) xz_u = yz_u = 0, xz_s = yz_s = 0;
    uint8_t *wz = malloc((size_t)cc->m);
    memset(wz, cc->w_dt == MCP_DTYPE_UINT8 ? 128 : 0, (size_t)cc->m);
    int32_t *b = malloc(sizeof *b * (size_t)cc->m);
    for (int64_t i = 0; i < cc->m; i++) b[i] = (int32_t)(rnd() % 20001) - 10000;
    const void *xz = cc->x_dt == MCP_DTYPE_UINT8 ? (const void *)&xz_u : (const void *)&xz_s;
    const void *yz = cc->y_dt == MCP_DTYPE_UINT8 ? (const void *)&yz_u : (const void *)&yz_s;
    int64_t wsn = cc->per_channel ? cc->m : 1;

    mb_add_input(m, NULL, "X", cc->x_dt, 4, xd, NULL);
    mb_add_initializer(m, NULL, "W", cc->w_dt, 4, wd, w, (size_t)wn);
    mb_add_initializer(m, NULL, "XZ", cc->x_dt, 0, one, xz, 1);
    mb_add_initializer(m, NULL, "WZ", cc->w_dt, cc->per_channel ? 1 : 0, cc->per_channel ? md : one, wz,
                       (size_t)wsn);
    Onnx__NodeProto *node;
    if (cc->qlinear) {
        mb_add_initializer(m, NULL, "XS", MCP_DTYPE_FLOAT, 0, one, &xs, sizeof xs);
        mb_add_initializer(m, NULL, "WS", MCP_DTYPE_FLOAT, cc->per_channel ? 1 : 0, cc->per_channel ? md : one, ws,
                           sizeof *ws * (size_t)wsn);
        mb_add_initializer(m, NULL, "YS", MCP_DTYPE_FLOAT, 0, one, &ys, sizeof ys);
        mb_add_initializer(m, NULL, "YZ", cc->y_dt, 0, one, yz, 1);
        if (cc->bias) mb_add_initializer(m, NULL, "B", MCP_DTYPE_INT32, 1, md, b, sizeof *b * (size_t)cc->m);
        node = mb_add_node(m, NULL, "QLinearConv", "qconv", cc->bias ? "X,XS,XZ,W,WS,WZ,YS,YZ,B" : "X,XS,XZ,W,WS,WZ,YS,YZ",
                           "Y");
    } else {
        node = mb_add_node(m, NULL, "ConvInteger", "qconv", "X,W,XZ,WZ", "Y");
    }
    mb_attr_int(m, node, "group", cc->group);
    const int64_t strides[] = {cc->stride, cc->stride}, pads[] = {cc->pad, cc->pad, cc->pad, cc->pad};
    mb_attr_ints(m, node, "strides", strides, 2);
    mb_attr_ints(m, node, "pads", pads, 4);
    mb_add_output(m, NULL, "Y", cc->qlinear ? cc->y_dt : MCP_DTYPE_INT32, -1, NULL, NULL);

    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    mcp_session *fast = open_session(buf, len, "auto"), *ref = open_session(buf, len, "ref");
    free(buf);
    TU_CHECK(fast && ref);
    if (fast && ref) {
        /* With VNNI, oneDNN must take the node (weights u8 with zero point
         * 128 or s8 with 0 are what it runs). */
        if (vnni) TU_CHECK_STR(backend_of(fast, "qconv"), "dnnl");
        mcp_value x = {0};
        x.kind = MCP_VALUE_TENSOR;
        char msg[256];
        mcp_err err = {msg, sizeof msg};
        if (mcp_tensor_alloc(&x.tensor, cc->x_dt, 4, xd, &err) == MCP_STATUS_OK) {
            for (int rep = 0; rep < 2; rep++) {
                fill_q(x.tensor.data, mcp_tensor_numel(&x.tensor), cc->x_dt);
                mcp_value *ins[1] = {&x};
                compare(line, cc->label, fast, ref, ins, cc->qlinear ? 1 : 0);
            }
            mcp_value_clear(&x);
        }
    }
    mcp_session_destroy(fast);
    mcp_session_destroy(ref);
    free(w);
    free(ws);
    free(wz);
    free(b);
}

static void test_conv_families(void)
{
    bool vnni = cpu_has_vnni();
    const mcp_dtype U8 = MCP_DTYPE_UINT8, S8 = MCP_DTYPE_INT8;
    const conv_case cases[] = {
        {"QLinearConv u8 x, s8 w, per-channel, bias, 3x3", true, U8, S8, U8, 1, 16, 10, 24, 3, 1, 1, 1, true, true, false},
        {"QLinearConv u8 x, u8 w (zp 128), per-tensor", true, U8, U8, U8, 2, 8, 9, 16, 3, 1, 1, 0, false, false, false},
        {"QLinearConv s8 x, s8 w, s8 y, stride 2", true, S8, S8, S8, 1, 32, 12, 32, 3, 1, 2, 1, true, true, false},
        {"QLinearConv depthwise 3x3", true, U8, S8, U8, 1, 32, 14, 32, 3, 32, 1, 1, true, true, false},
        {"QLinearConv 1x1, batch 3, 64 channels", true, U8, S8, U8, 3, 64, 7, 48, 1, 1, 1, 0, true, true, false},
        {"QLinearConv grouped (2 groups of 16)", true, U8, S8, U8, 1, 32, 8, 32, 3, 2, 1, 1, false, true, false},
        {"QLinearConv zero points 0, 3x3", true, U8, S8, U8, 1, 64, 14, 64, 3, 1, 1, 1, true, true, true},
        {"QLinearConv zero points 0, 1x1, batch 2", true, U8, S8, U8, 2, 64, 7, 128, 1, 1, 1, 0, true, true, true},
        {"ConvInteger u8 x, u8 w (zp 128)", false, U8, U8, U8, 1, 16, 10, 24, 3, 1, 1, 1, false, false, false},
        {"ConvInteger u8 x, s8 w, stride 2", false, U8, S8, U8, 2, 8, 11, 16, 3, 1, 2, 1, false, false, false},
        {"ConvInteger s8 x, s8 w, 1x1", false, S8, S8, S8, 1, 64, 6, 32, 1, 1, 1, 0, false, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rng_state = 1234u + (uint32_t)i * 7919u;
        run_conv_case(__LINE__, &cases[i], vnni);
    }
}

typedef struct mm_case {
    const char *label;
    bool qlinear;       /* QLinearMatMul, else MatMulInteger */
    mcp_dtype a_dt, b_dt, y_dt;
    int ra, rb;         /* ranks: B 2-D or of A's rank */
    int64_t batch[2], m, k, n;
    int b_zp;           /* B's zero point */
    bool b_runtime;     /* B a graph input, else an initializer */
    bool per_column;    /* QLinearMatMul: one B scale per column */
} mm_case;

static void run_mm_case(int line, const mm_case *mc, bool vnni)
{
    mb_model *m = mb_model_new(13);
    int64_t ad[4], bd[4], nb = mc->ra - 2;
    for (int d = 0; d < nb; d++) ad[d] = bd[d] = mc->batch[d];
    ad[nb] = mc->m, ad[nb + 1] = mc->k;
    bd[nb] = mc->k, bd[nb + 1] = mc->n;
    int64_t bn = 1;
    for (int d = 0; d < mc->rb; d++) bn *= (mc->rb == 2 ? bd + nb : bd)[d];
    void *bw = malloc((size_t)bn);
    fill_q(bw, bn, mc->b_dt);
    const int64_t one[] = {1}, nd[] = {mc->n};
    uint8_t az_u = (uint8_t)(rnd() % 256), yz_u = (uint8_t)(100 + rnd() % 50), bz_u = (uint8_t)mc->b_zp;
    int8_t az_s = (int8_t)((int)(rnd() % 40) - 20), yz_s = (int8_t)((int)(rnd() % 20) - 10), bz_s = (int8_t)mc->b_zp;
    const void *az = mc->a_dt == MCP_DTYPE_UINT8 ? (const void *)&az_u : (const void *)&az_s;
    const void *bz = mc->b_dt == MCP_DTYPE_UINT8 ? (const void *)&bz_u : (const void *)&bz_s;
    const void *yz = mc->y_dt == MCP_DTYPE_UINT8 ? (const void *)&yz_u : (const void *)&yz_s;
    float as = 0.02f, wbase = 0.004f;
    float ys = as * wbase * 74.0f * 74.0f * sqrtf((float)mc->k) / 40.0f;
    float *bs = malloc(sizeof *bs * (size_t)mc->n);
    for (int64_t i = 0; i < mc->n; i++) bs[i] = wbase * (0.5f + 0.01f * (float)(rnd() % 100));

    mb_add_input(m, NULL, "A", mc->a_dt, mc->ra, ad, NULL);
    if (mc->b_runtime) mb_add_input(m, NULL, "B", mc->b_dt, mc->rb, mc->rb == 2 ? bd + nb : bd, NULL);
    else mb_add_initializer(m, NULL, "B", mc->b_dt, mc->rb, mc->rb == 2 ? bd + nb : bd, bw, (size_t)bn);
    mb_add_initializer(m, NULL, "AZ", mc->a_dt, 0, one, az, 1);
    mb_add_initializer(m, NULL, "BZ", mc->b_dt, 0, one, bz, 1);
    if (mc->qlinear) {
        mb_add_initializer(m, NULL, "AS", MCP_DTYPE_FLOAT, 0, one, &as, sizeof as);
        mb_add_initializer(m, NULL, "BS", MCP_DTYPE_FLOAT, mc->per_column ? 1 : 0, mc->per_column ? nd : one, bs,
                           sizeof *bs * (size_t)(mc->per_column ? mc->n : 1));
        mb_add_initializer(m, NULL, "YS", MCP_DTYPE_FLOAT, 0, one, &ys, sizeof ys);
        mb_add_initializer(m, NULL, "YZ", mc->y_dt, 0, one, yz, 1);
        mb_add_node(m, NULL, "QLinearMatMul", "qmm", "A,AS,AZ,B,BS,BZ,YS,YZ", "Y");
    } else {
        mb_add_node(m, NULL, "MatMulInteger", "qmm", "A,B,AZ,BZ", "Y");
    }
    mb_add_output(m, NULL, "Y", mc->qlinear ? mc->y_dt : MCP_DTYPE_INT32, -1, NULL, NULL);
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    mcp_session *fast = open_session(buf, len, "auto"), *ref = open_session(buf, len, "ref");
    free(buf);
    TU_CHECK(fast && ref);
    if (fast && ref) {
        if (vnni) TU_CHECK_STR(backend_of(fast, "qmm"), "dnnl");
        mcp_value a = {0}, b = {0};
        a.kind = b.kind = MCP_VALUE_TENSOR;
        char msg[256];
        mcp_err err = {msg, sizeof msg};
        bool ok = mcp_tensor_alloc(&a.tensor, mc->a_dt, mc->ra, ad, &err) == MCP_STATUS_OK;
        if (ok && mc->b_runtime) {
            ok = mcp_tensor_alloc(&b.tensor, mc->b_dt, mc->rb, mc->rb == 2 ? bd + nb : bd, &err) == MCP_STATUS_OK;
            if (ok) memcpy(b.tensor.data, bw, (size_t)bn);
        }
        for (int rep = 0; ok && rep < 2; rep++) {
            fill_q(a.tensor.data, mcp_tensor_numel(&a.tensor), mc->a_dt);
            mcp_value *ins[2] = {&a, &b};
            compare(line, mc->label, fast, ref, ins, mc->qlinear ? 1 : 0);
        }
        mcp_value_clear(&a);
        mcp_value_clear(&b);
    }
    mcp_session_destroy(fast);
    mcp_session_destroy(ref);
    free(bw);
    free(bs);
}

static void test_matmul_families(void)
{
    bool vnni = cpu_has_vnni();
    const mcp_dtype U8 = MCP_DTYPE_UINT8, S8 = MCP_DTYPE_INT8;
    const mm_case cases[] = {
        {"QLinearMatMul u8 A [2,5,64], s8 B [64,48], per-column", true, U8, S8, U8, 3, 2, {2, 0}, 5, 64, 48, 0, false, true},
        {"QLinearMatMul u8 A, u8 B (zp 120), s8 y", true, U8, U8, S8, 2, 2, {0, 0}, 9, 96, 40, 120, false, false},
        {"QLinearMatMul s8 A, s8 B", true, S8, S8, S8, 2, 2, {0, 0}, 16, 128, 64, 0, false, false},
        {"QLinearMatMul batched [2,3,8,32] x [2,3,32,16], B at run time", true, U8, U8, U8, 4, 4, {2, 3}, 8, 32, 16, 131, true, false},
        {"MatMulInteger u8 A [7,96], s8 B", false, U8, S8, U8, 2, 2, {0, 0}, 7, 96, 40, 0, false, false},
        {"MatMulInteger u8 A, u8 B (zp 77)", false, U8, U8, U8, 2, 2, {0, 0}, 33, 256, 72, 77, false, false},
        {"MatMulInteger s8 A [1,12,768], s8 B [768,64] at run time", false, S8, S8, U8, 3, 2, {1, 0}, 12, 768, 64, 0, true, false},
        {"MatMulInteger batched u8 x u8 (zp 128), B at run time", false, U8, U8, U8, 3, 3, {4, 0}, 6, 20, 10, 128, true, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rng_state = 4321u + (uint32_t)i * 7919u;
        run_mm_case(__LINE__, &cases[i], vnni);
    }
}

static bool has_op(const mcp_session *s, const char *op)
{
    for (int i = 0; i < s->graph->n_nodes; i++)
        if (strcmp(s->graph->nodes[i].op_type, op) == 0) return true;
    return false;
}

/*
 * A QDQ graph: X -> Q -> DQ -> Conv (weights DQ of s8 per channel, float
 * bias) -> [Relu] -> Q -> DQ, plus DQ(Q(X)) -> Add -> Relu -> Q -> DQ -> Y.
 * With the graph passes it runs on 8-bit values: with the Relu (H's zero
 * point 0) as QLinearConv and QLinearAdd; without it (zero point 128) and
 * with fuse_quantized_sums as one QLinearConvAdd, the convolution added to
 * X before any rounding.
 * Without the passes it runs as written, in float. Both agree within one
 * quantization step of Y, on the default backend and on the reference one.
 */
static void run_qdq_case(bool conv_relu, const char *backend)
{
    enum { C = 16, HW = 10 };
    rng_state = 99;
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {1, C, HW, HW}, wd[] = {C, C, 3, 3}, cd[] = {C}, one[] = {1};
    static int8_t w[C * C * 9];
    static float ws[C], b[C];
    fill_q(w, C * C * 9, MCP_DTYPE_INT8);
    for (int i = 0; i < C; i++) ws[i] = 0.002f + 0.0001f * (float)i, b[i] = 0.05f * (float)(i - C / 2);
    int8_t wz[C] = {0};
    /* Without the Relu, H's range covers the convolution's (no clipping),
     * so the only difference fusing makes is H's rounding: half a step of
     * H at most. */
    float xs = 0.02f, hs = conv_relu ? 0.05f : 0.15f, ys = 0.06f;
    uint8_t xz = 128, hz = conv_relu ? 0 : 128, yz = 0;
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_INT8, 4, wd, w, sizeof w);
    mb_add_initializer(m, NULL, "WS", MCP_DTYPE_FLOAT, 1, cd, ws, sizeof ws);
    mb_add_initializer(m, NULL, "WZ", MCP_DTYPE_INT8, 1, cd, wz, sizeof wz);
    mb_add_initializer(m, NULL, "B", MCP_DTYPE_FLOAT, 1, cd, b, sizeof b);
    mb_add_initializer(m, NULL, "XS", MCP_DTYPE_FLOAT, 0, one, &xs, sizeof xs);
    mb_add_initializer(m, NULL, "XZ", MCP_DTYPE_UINT8, 0, one, &xz, 1);
    mb_add_initializer(m, NULL, "HS", MCP_DTYPE_FLOAT, 0, one, &hs, sizeof hs);
    mb_add_initializer(m, NULL, "HZ", MCP_DTYPE_UINT8, 0, one, &hz, 1);
    mb_add_initializer(m, NULL, "YS", MCP_DTYPE_FLOAT, 0, one, &ys, sizeof ys);
    mb_add_initializer(m, NULL, "YZ", MCP_DTYPE_UINT8, 0, one, &yz, 1);
    mb_add_node(m, NULL, "QuantizeLinear", "qx", "X,XS,XZ", "Xq");
    mb_add_node(m, NULL, "DequantizeLinear", "dqx", "Xq,XS,XZ", "Xd");
    Onnx__NodeProto *dw = mb_add_node(m, NULL, "DequantizeLinear", "dqw", "W,WS,WZ", "Wd");
    mb_attr_int(m, dw, "axis", 0);
    Onnx__NodeProto *conv = mb_add_node(m, NULL, "Conv", "conv", "Xd,Wd,B", "H");
    const int64_t pads[] = {1, 1, 1, 1};
    mb_attr_ints(m, conv, "pads", pads, 4);
    if (conv_relu) mb_add_node(m, NULL, "Relu", "relu", "H", "Hr");
    mb_add_node(m, NULL, "QuantizeLinear", "qh", conv_relu ? "Hr,HS,HZ" : "H,HS,HZ", "Hq");
    mb_add_node(m, NULL, "DequantizeLinear", "dqh", "Hq,HS,HZ", "Hd");
    mb_add_node(m, NULL, "Add", "add", "Hd,Xd", "S");
    mb_add_node(m, NULL, "Relu", "relu2", "S", "Sr");
    mb_add_node(m, NULL, "QuantizeLinear", "qy", "Sr,YS,YZ", "Yq");
    mb_add_node(m, NULL, "DequantizeLinear", "dqy", "Yq,YS,YZ", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, xd, NULL);
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    char msg[1024] = "";
    mcp_session_options o = mcp_session_options_default();
    o.threads = 2;
    o.backend = backend;
    o.fuse_quantized_sums = !conv_relu;
    mcp_session *fused = NULL, *plain = NULL;
    TU_REQUIRE_OK(mcp_session_create_from_memory(buf, len, NULL, &o, &fused, msg, sizeof msg), msg);
    o.no_graph_passes = 1;
    TU_REQUIRE_OK(mcp_session_create_from_memory(buf, len, NULL, &o, &plain, msg, sizeof msg), msg);
    free(buf);
    if (conv_relu) TU_CHECK(has_op(fused, "QLinearConv") && has_op(fused, "QLinearAdd"));
    else TU_CHECK(has_op(fused, "QLinearConvAdd") && !has_op(fused, "QLinearConv") && !has_op(fused, "QLinearAdd"));
    TU_CHECK(!has_op(fused, "Conv") && !has_op(fused, "Add") && !has_op(fused, "Relu"));
    TU_CHECK(has_op(plain, "Conv") && !has_op(plain, "QLinearConv"));
    mcp_value x = {0};
    x.kind = MCP_VALUE_TENSOR;
    mcp_err err = {msg, sizeof msg};
    TU_REQUIRE_OK(mcp_tensor_alloc(&x.tensor, MCP_DTYPE_FLOAT, 4, xd, &err), msg);
    float *xv = x.tensor.data;
    for (int i = 0; i < C * HW * HW; i++) xv[i] = (float)((int)(rnd() % 256) - 128) * 0.02f;
    mcp_value *ins[1] = {&x}, *of[1] = {mcp_value_new()}, *op[1] = {mcp_value_new()};
    TU_REQUIRE_OK(mcp__session_run(fused, ins, of, &err), msg);
    TU_REQUIRE_OK(mcp__session_run(plain, ins, op, &err), msg);
    const float *a = of[0]->tensor.data, *r = op[0]->tensor.data;
    int off = 0, bad = 0, nonzero = 0;
    for (int i = 0; i < C * HW * HW; i++) {
        float d = fabsf(a[i] - r[i]);
        off += d > 0.0f;
        bad += d > (ys + (conv_relu ? 0.0f : hs / 2)) * 1.001f;
        nonzero += r[i] != 0.0f;
    }
    TU_CHECK_INT(bad, 0);
    TU_CHECK(off * (conv_relu ? 100 : 3) <= C * HW * HW);
    TU_CHECK(nonzero > C * HW * HW / 4);
    mcp_value_clear(&x);
    mcp_value_free(of[0]);
    mcp_value_free(op[0]);
    mcp_session_destroy(fused);
    mcp_session_destroy(plain);
}

/*
 * X -> Q -> DQ -> Conv -> Clip(0, 6) -> MaxPool -> Q -> DQ -> Y. When Y's
 * quantized range lies within [0, 6] the Clip changes nothing after
 * saturation and the MaxPool commutes with quantization, so the passes
 * make it QLinearConv -> int8 MaxPool; when the range reaches past 6 the
 * Clip stays, and so does the float convolution (a FusedConv with it). Either way the results
 * are the graph's as written, within one step.
 */
static void run_qdq_pool_case(float ys, bool expect_fused)
{
    enum { C = 8, HW = 12 };
    rng_state = 7;
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {1, C, HW, HW}, wd[] = {C, C, 3, 3}, cd[] = {C}, one[] = {1};
    const int64_t yd[] = {1, C, HW / 2, HW / 2};
    static int8_t w[C * C * 9];
    fill_q(w, C * C * 9, MCP_DTYPE_INT8);
    float ws[C], xs = 0.02f, lo = 0.0f, hi = 6.0f;
    int8_t wz[C] = {0};
    uint8_t xz = 128, yz = 0;
    for (int i = 0; i < C; i++) ws[i] = 0.004f + 0.0002f * (float)i;
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, NULL);
    mb_add_initializer(m, NULL, "W", MCP_DTYPE_INT8, 4, wd, w, sizeof w);
    mb_add_initializer(m, NULL, "WS", MCP_DTYPE_FLOAT, 1, cd, ws, sizeof ws);
    mb_add_initializer(m, NULL, "WZ", MCP_DTYPE_INT8, 1, cd, wz, sizeof wz);
    mb_add_initializer(m, NULL, "XS", MCP_DTYPE_FLOAT, 0, one, &xs, sizeof xs);
    mb_add_initializer(m, NULL, "XZ", MCP_DTYPE_UINT8, 0, one, &xz, 1);
    mb_add_initializer(m, NULL, "YS", MCP_DTYPE_FLOAT, 0, one, &ys, sizeof ys);
    mb_add_initializer(m, NULL, "YZ", MCP_DTYPE_UINT8, 0, one, &yz, 1);
    mb_add_initializer(m, NULL, "LO", MCP_DTYPE_FLOAT, 0, one, &lo, sizeof lo);
    mb_add_initializer(m, NULL, "HI", MCP_DTYPE_FLOAT, 0, one, &hi, sizeof hi);
    mb_add_node(m, NULL, "QuantizeLinear", "qx", "X,XS,XZ", "Xq");
    mb_add_node(m, NULL, "DequantizeLinear", "dqx", "Xq,XS,XZ", "Xd");
    Onnx__NodeProto *dw = mb_add_node(m, NULL, "DequantizeLinear", "dqw", "W,WS,WZ", "Wd");
    mb_attr_int(m, dw, "axis", 0);
    Onnx__NodeProto *conv = mb_add_node(m, NULL, "Conv", "conv", "Xd,Wd", "H");
    const int64_t pads[] = {1, 1, 1, 1}, k2[] = {2, 2};
    mb_attr_ints(m, conv, "pads", pads, 4);
    mb_add_node(m, NULL, "Clip", "clip", "H,LO,HI", "Hc");
    Onnx__NodeProto *pool = mb_add_node(m, NULL, "MaxPool", "pool", "Hc", "P");
    mb_attr_ints(m, pool, "kernel_shape", k2, 2);
    mb_attr_ints(m, pool, "strides", k2, 2);
    mb_add_node(m, NULL, "QuantizeLinear", "qy", "P,YS,YZ", "Yq");
    mb_add_node(m, NULL, "DequantizeLinear", "dqy", "Yq,YS,YZ", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 4, yd, NULL);
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);
    char msg[1024] = "";
    mcp_session_options o = mcp_session_options_default();
    o.threads = 2;
    mcp_session *fused = NULL, *plain = NULL;
    TU_REQUIRE_OK(mcp_session_create_from_memory(buf, len, NULL, &o, &fused, msg, sizeof msg), msg);
    o.no_graph_passes = 1;
    TU_REQUIRE_OK(mcp_session_create_from_memory(buf, len, NULL, &o, &plain, msg, sizeof msg), msg);
    free(buf);
    TU_CHECK(has_op(fused, "QLinearConv") == expect_fused);
    /* Kept, the Clip joins the float convolution as its activation. */
    TU_CHECK(has_op(fused, "FusedConv") == !expect_fused);
    TU_CHECK(has_op(fused, "MaxPool"));
    mcp_value x = {0};
    x.kind = MCP_VALUE_TENSOR;
    mcp_err err = {msg, sizeof msg};
    TU_REQUIRE_OK(mcp_tensor_alloc(&x.tensor, MCP_DTYPE_FLOAT, 4, xd, &err), msg);
    float *xv = x.tensor.data;
    for (int i = 0; i < C * HW * HW; i++) xv[i] = (float)((int)(rnd() % 256) - 128) * 0.02f;
    mcp_value *ins[1] = {&x}, *of[1] = {mcp_value_new()}, *op[1] = {mcp_value_new()};
    TU_REQUIRE_OK(mcp__session_run(fused, ins, of, &err), msg);
    TU_REQUIRE_OK(mcp__session_run(plain, ins, op, &err), msg);
    const float *a = of[0]->tensor.data, *r = op[0]->tensor.data;
    int n = C * (HW / 2) * (HW / 2), bad = 0, off = 0, top = 0, mid = 0;
    for (int i = 0; i < n; i++) {
        float d = fabsf(a[i] - r[i]);
        bad += d > ys * 1.001f;
        off += d > 0.0f;
        top += r[i] >= 5.99f;
        mid += r[i] > 0.0f && r[i] < 5.9f;
    }
    TU_CHECK_INT(bad, 0);
    TU_CHECK(off * 100 <= n);
    /* The data reach the Clip's top and spread below it. */
    TU_CHECK(top > 0 && mid > n / 4);
    mcp_value_clear(&x);
    mcp_value_free(of[0]);
    mcp_value_free(op[0]);
    mcp_session_destroy(fused);
    mcp_session_destroy(plain);
}

static void test_qdq_fusion(void)
{
    run_qdq_pool_case(6.0f / 255.0f, true);
    run_qdq_pool_case(0.05f, false);
    run_qdq_case(true, "auto");
    run_qdq_case(false, "auto");
    run_qdq_case(true, "ref");
    run_qdq_case(false, "ref");
}

/*
 * mcp_quantize (static) on a small fp32 CNN: X -> Conv -> Relu -> Conv -> Add
 * (the Relu's output) -> Relu -> GlobalAveragePool -> Flatten -> MatMul.
 * The QDQ model it writes loads, runs its convolutions as QLinearConv, and
 * stays close to fp32 on the samples; bad calls fail with a message.
 */
static void test_quantize_static(void)
{
    enum { C = 8, HW = 10, K = 10, S = 6 };
    rng_state = 2024;
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {-1, C, HW, HW}, wd[] = {C, C, 3, 3}, cd[] = {C}, md[] = {C, K}, yd[] = {-1, K};
    const char *const params[] = {"batch", NULL, NULL, NULL};
    static float w1[C * C * 9], w2[C * C * 9], b1[C], b2[C], w3[C * K];
    for (int i = 0; i < C * C * 9; i++) {
        w1[i] = (float)((int)(rnd() % 201) - 100) * 0.002f;
        w2[i] = (float)((int)(rnd() % 201) - 100) * 0.002f;
    }
    for (int i = 0; i < C; i++) b1[i] = 0.01f * (float)(i - 3), b2[i] = -0.01f * (float)i;
    for (int i = 0; i < C * K; i++) w3[i] = (float)((int)(rnd() % 201) - 100) * 0.01f;
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, params);
    mb_add_initializer(m, NULL, "W1", MCP_DTYPE_FLOAT, 4, wd, w1, sizeof w1);
    mb_add_initializer(m, NULL, "B1", MCP_DTYPE_FLOAT, 1, cd, b1, sizeof b1);
    mb_add_initializer(m, NULL, "W2", MCP_DTYPE_FLOAT, 4, wd, w2, sizeof w2);
    mb_add_initializer(m, NULL, "B2", MCP_DTYPE_FLOAT, 1, cd, b2, sizeof b2);
    mb_add_initializer(m, NULL, "W3", MCP_DTYPE_FLOAT, 2, md, w3, sizeof w3);
    const int64_t pads[] = {1, 1, 1, 1};
    Onnx__NodeProto *c1 = mb_add_node(m, NULL, "Conv", "conv1", "X,W1,B1", "H1");
    mb_attr_ints(m, c1, "pads", pads, 4);
    mb_add_node(m, NULL, "Relu", "relu1", "H1", "R1");
    Onnx__NodeProto *c2 = mb_add_node(m, NULL, "Conv", "conv2", "R1,W2,B2", "H2");
    mb_attr_ints(m, c2, "pads", pads, 4);
    mb_add_node(m, NULL, "Add", "join", "H2,R1", "S");
    mb_add_node(m, NULL, "Relu", "relu2", "S", "R2");
    mb_add_node(m, NULL, "GlobalAveragePool", "gap", "R2", "G");
    mb_add_node(m, NULL, "Flatten", "flat", "G", "F");
    mb_add_node(m, NULL, "MatMul", "fc", "F,W3", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, yd, params);
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);

    /* Samples of 4 images each. */
    mcp_value *vals[S];
    mcp_value *const *samples[S];
    const int64_t sd[] = {4, C, HW, HW};
    for (int k = 0; k < S; k++) {
        vals[k] = mcp_value_new();
        vals[k]->kind = MCP_VALUE_TENSOR;
        TU_REQUIRE(mcp_tensor_alloc(&vals[k]->tensor, MCP_DTYPE_FLOAT, 4, sd, NULL) == MCP_STATUS_OK);
        float *x = vals[k]->tensor.data;
        for (int i = 0; i < 4 * C * HW * HW; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 0.002f;
        samples[k] = &vals[k];
    }
    char msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_quant_result r;
    mcp_quantize_options qo = {.threads = 2};
    TU_REQUIRE_OK(mcp_quantize(buf, len, NULL, &qo, S, samples, &r, &err), msg);
    TU_CHECK_INT(r.n_weights, 3); /* two convolutions and the MatMul */
    TU_CHECK(r.n_activations >= 4);
    TU_CHECK_INT(r.n_outputs, 1);
    TU_CHECK_INT(r.n_float_outputs, 1);
    TU_CHECK_STR(r.outputs[0].name, "Y");
    TU_CHECK(r.outputs[0].fp32_std > 0.0);
    TU_CHECK(r.outputs[0].mean_abs < 0.05 * r.outputs[0].fp32_std);
    TU_CHECK(r.outputs[0].max_abs < 0.5 * r.outputs[0].fp32_std);
    TU_CHECK(r.outputs[0].rows == 4 * S && r.outputs[0].rows_same * 10 >= r.outputs[0].rows * 8);

    /* The QDQ model runs quantized. */
    mcp_session_options o = mcp_session_options_default();
    mcp_session *q = NULL;
    TU_REQUIRE_OK(mcp_session_create_from_memory(r.model, r.len, NULL, &o, &q, msg, sizeof msg), msg);
    int qconv = 0;
    for (int i = 0; i < q->graph->n_nodes; i++) qconv += strcmp(q->graph->nodes[i].op_type, "QLinearConv") == 0;
    TU_CHECK_INT(qconv, 2);
    mcp_session_destroy(q);
    mcp_quant_result_release(&r);

    /* No samples; not a model. */
    TU_CHECK_STATUS(mcp_quantize(buf, len, NULL, &qo, 0, samples, &r, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "calibration sample");
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0x01, 0x02};
    TU_CHECK_STATUS(mcp_quantize(junk, sizeof junk, NULL, &qo, S, samples, &r, &err), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "not an ONNX model");
    /* A sample of the wrong shape: the error names the sample. */
    mcp_value *bad = mcp_value_new();
    bad->kind = MCP_VALUE_TENSOR;
    const int64_t bdims[] = {1, C + 1, HW, HW};
    TU_REQUIRE(mcp_tensor_alloc(&bad->tensor, MCP_DTYPE_FLOAT, 4, bdims, NULL) == MCP_STATUS_OK);
    mcp_value *const *bad_samples[2] = {&vals[0], &bad};
    TU_CHECK(mcp_quantize(buf, len, NULL, &qo, 2, bad_samples, &r, &err) != MCP_STATUS_OK);
    TU_CHECK_CONTAINS(msg, "calibration sample 1");
    TU_CHECK(r.model == NULL);
    mcp_value_free(bad);
    for (int k = 0; k < S; k++) mcp_value_free(vals[k]);
    free(buf);
}

/*
 * Dynamic quantization of an MLP (X -> MatMul -> Add -> Relu -> MatMul):
 * DynamicQuantizeLinear + MatMulInteger + Cast + Mul per MatMul, which the
 * passes make MatMulIntegerScaled (the bias Add taken in), on oneDNN where
 * the CPU has VNNI, bit for bit the unfused graph's results, close to
 * fp32; no samples needed.
 */
static void test_quantize_dynamic(void)
{
    enum { B = 6, K = 48, H = 64, N = 10 };
    rng_state = 77;
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {-1, K}, w1d[] = {K, H}, bd[] = {H}, w2d[] = {H, N}, yd[] = {-1, N};
    const char *const params[] = {"batch", NULL};
    static float w1[K * H], b1[H], w2[H * N];
    for (int i = 0; i < K * H; i++) w1[i] = (float)((int)(rnd() % 201) - 100) * 0.003f;
    for (int i = 0; i < H; i++) b1[i] = 0.02f * (float)(i % 7) - 0.06f;
    for (int i = 0; i < H * N; i++) w2[i] = (float)((int)(rnd() % 201) - 100) * 0.003f;
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, params);
    mb_add_initializer(m, NULL, "W1", MCP_DTYPE_FLOAT, 2, w1d, w1, sizeof w1);
    mb_add_initializer(m, NULL, "B1", MCP_DTYPE_FLOAT, 1, bd, b1, sizeof b1);
    mb_add_initializer(m, NULL, "W2", MCP_DTYPE_FLOAT, 2, w2d, w2, sizeof w2);
    mb_add_node(m, NULL, "MatMul", "fc1", "X,W1", "H1");
    mb_add_node(m, NULL, "Add", "bias1", "H1,B1", "A1");
    mb_add_node(m, NULL, "Relu", "relu1", "A1", "R1");
    mb_add_node(m, NULL, "MatMul", "fc2", "R1,W2", "Y");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, yd, params);
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mb_model_free(m);

    const int64_t sd[] = {B, K};
    mcp_value *x = mcp_value_new();
    x->kind = MCP_VALUE_TENSOR;
    TU_REQUIRE(mcp_tensor_alloc(&x->tensor, MCP_DTYPE_FLOAT, 2, sd, NULL) == MCP_STATUS_OK);
    float *xv = x->tensor.data;
    for (int i = 0; i < B * K; i++) xv[i] = (float)((int)(rnd() % 2001) - 1000) * 0.001f;
    mcp_value *const *samples[1] = {&x};
    char msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_quantize_options qo = {.threads = 2, .dynamic = true};
    mcp_quant_result r;
    /* Without samples: a model, no report. */
    TU_REQUIRE_OK(mcp_quantize(buf, len, NULL, &qo, 0, NULL, &r, &err), msg);
    TU_CHECK_INT(r.n_weights, 2);
    TU_CHECK_INT(r.n_activations, 2);
    TU_CHECK_INT(r.n_outputs, 0);
    mcp_quant_result_release(&r);
    /* With one: the report. */
    TU_REQUIRE_OK(mcp_quantize(buf, len, NULL, &qo, 1, samples, &r, &err), msg);
    TU_CHECK_INT(r.n_outputs, 1);
    TU_CHECK(r.outputs[0].fp32_std > 0.0 && r.outputs[0].mean_abs < 0.05 * r.outputs[0].fp32_std);
    mcp_session_options o = mcp_session_options_default();
    mcp_session *q = NULL;
    TU_REQUIRE_OK(mcp_session_create_from_memory(r.model, r.len, NULL, &o, &q, msg, sizeof msg), msg);
    /* The passes take each MatMulInteger -> Cast -> Mul (-> Add of the
     * bias, the first one) in as one MatMulIntegerScaled. */
    int dql = 0, mmi = 0;
    for (int i = 0; i < q->graph->n_nodes; i++) {
        const mcp_node *n = &q->graph->nodes[i];
        dql += strcmp(n->op_type, "DynamicQuantizeLinear") == 0;
        if (strcmp(n->op_type, "MatMulIntegerScaled") == 0) {
            mmi++;
            if (cpu_has_vnni()) TU_CHECK_STR(n->kernel_backend, "dnnl");
        }
    }
    TU_CHECK_INT(dql, 2);
    TU_CHECK_INT(mmi, 2);
    TU_CHECK(!has_op(q, "MatMul") && !has_op(q, "MatMulInteger") && !has_op(q, "Cast"));
    TU_CHECK(!has_op(q, "Add"));
    /* Bit for bit what the unfused tail computes, on both backends. */
    const char *backends[] = {"auto", "ref"};
    for (int bk = 0; bk < 2; bk++) {
        mcp_session_options po = mcp_session_options_default();
        po.no_graph_passes = 1;
        po.backend = backends[bk];
        mcp_session *plain = NULL, *fused = NULL;
        TU_REQUIRE_OK(mcp_session_create_from_memory(r.model, r.len, NULL, &po, &plain, msg, sizeof msg), msg);
        po.no_graph_passes = 0;
        TU_REQUIRE_OK(mcp_session_create_from_memory(r.model, r.len, NULL, &po, &fused, msg, sizeof msg), msg);
        mcp_value *ins[1] = {x}, *a[1] = {mcp_value_new()}, *b[1] = {mcp_value_new()};
        TU_REQUIRE_OK(mcp__session_run(fused, ins, a, &err), msg);
        TU_REQUIRE_OK(mcp__session_run(plain, ins, b, &err), msg);
        TU_CHECK(mcp_tensor_numel(&a[0]->tensor) == B * N &&
                 memcmp(a[0]->tensor.data, b[0]->tensor.data, sizeof(float) * B * N) == 0);
        mcp_value_free(a[0]);
        mcp_value_free(b[0]);
        mcp_session_destroy(plain);
        mcp_session_destroy(fused);
    }
    mcp_session_destroy(q);
    mcp_quant_result_release(&r);
    mcp_value_free(x);
    free(buf);
}

/* Calibration folders: the sample and byte limits refuse, naming the
 * limit; a symbolic link (to a file anywhere) is not read; several inputs
 * take a subfolder per sample, and a missing NAME.npy is named. */
static void test_calibration_folder_limits(void)
{
    char dir[4096], path[4200], msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "calib") == 0);
    const int64_t d[] = {1, 4};
    mcp_tensor t = {0};
    TU_REQUIRE(mcp_tensor_alloc(&t, MCP_DTYPE_FLOAT, 2, d, NULL) == MCP_STATUS_OK);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/s%d.npy", dir, i);
        TU_REQUIRE(mcp_npy_write(path, &t, &err) == MCP_STATUS_OK);
    }
    const char *names[] = {"x", "y"};
    mcp_quant_samples q;
    TU_REQUIRE_OK(mcp_quant_samples_load(dir, 1, names, 3, 0, &q, &err), msg);
    TU_CHECK_INT(q.n, 3);
    mcp_quant_samples_free(&q);
    TU_CHECK_STATUS(mcp_quant_samples_load(dir, 1, names, 2, 0, &q, &err), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_CONTAINS(msg, "more than 2 calibration samples");
    TU_CHECK(q.values == NULL);
    TU_CHECK_STATUS(mcp_quant_samples_load(dir, 1, names, 8, 40, &q, &err), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_CONTAINS(msg, "exceed 40 bytes");
    /* Only a link: nothing to read. */
    char linkdir[4096];
    TU_REQUIRE(tu_make_temp_dir(linkdir, sizeof linkdir, "calib-link") == 0);
    snprintf(path, sizeof path, "%s/evil.npy", linkdir);
    char target[4200];
    snprintf(target, sizeof target, "%s/s0.npy", dir);
    TU_REQUIRE(symlink(target, path) == 0);
    TU_CHECK_STATUS(mcp_quant_samples_load(linkdir, 1, names, 8, 0, &q, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "no .npy samples");
    /* Two inputs: a subfolder per sample with x.npy and y.npy. */
    snprintf(path, sizeof path, "%s/sample0", dir);
    TU_REQUIRE(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/sample0/x.npy", dir);
    TU_REQUIRE(mcp_npy_write(path, &t, &err) == MCP_STATUS_OK);
    TU_CHECK(mcp_quant_samples_load(dir, 2, names, 8, 0, &q, &err) != MCP_STATUS_OK);
    TU_CHECK_CONTAINS(msg, "sample0/y.npy");
    snprintf(path, sizeof path, "%s/sample0/y.npy", dir);
    TU_REQUIRE(mcp_npy_write(path, &t, &err) == MCP_STATUS_OK);
    TU_REQUIRE_OK(mcp_quant_samples_load(dir, 2, names, 8, 0, &q, &err), msg);
    TU_CHECK(q.n == 1 && q.n_inputs == 2 && q.values[0][1]->tensor.dims[1] == 4);
    mcp_quant_samples_free(&q);
    mcp_tensor_release(&t);
    const char *files[] = {"s0.npy", "s1.npy", "s2.npy", "sample0/x.npy", "sample0/y.npy", "sample0"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        (void)remove(path);
    }
    snprintf(path, sizeof path, "%s/evil.npy", linkdir);
    (void)remove(path);
    (void)rmdir(linkdir);
    (void)rmdir(dir);
}

int main(void)
{
    int64_t start = mcp_alloc_live_count();
    TU_RUN(test_conv_families);
    TU_RUN(test_matmul_families);
    TU_RUN(test_qdq_fusion);
    TU_RUN(test_quantize_static);
    TU_RUN(test_quantize_dynamic);
    TU_RUN(test_calibration_folder_limits);
    TU_CHECK_INT(mcp_alloc_live_count(), start);
    return tu_finish("test_quant");
}
