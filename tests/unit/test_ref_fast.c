/*
 * Fast paths of the reference kernels, checked against element-by-element
 * computations done here: Transpose (collapsed axes, row copies, tiled 2-D
 * transposes, 1- to 8-byte elements), Slice (row copies, and the strided
 * views that keep the generic copy), Softmax / LogSoftmax on float32 (and
 * the exp they use), and chains of the ops the executor may run in place
 * (shape views, unary activations, Clip, Add/Sub/Mul/Div), whose results
 * must not depend on whether an output shares its input's storage. Every
 * model runs on the reference backend with one and with two threads.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp.h"
#include "model_builder.h"
#include "ops/ref/elementwise_util.h"
#include "test_util.h"

/* ---- helpers ---- */

static int64_t numel_of(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int k = 0; k < rank; k++) n *= dims[k];
    return n;
}

/* Deterministic test data: distinct-ish bytes for every element size. */
static void fill_bytes(void *p, size_t nbytes, uint32_t seed)
{
    uint8_t *b = p;
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < nbytes; i++) {
        s = s * 1664525u + 1013904223u;
        b[i] = (uint8_t)(s >> 24);
    }
}

static float frand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 65536.0f * 2.0f - 1.0f;
}

/* Runs model m (single input "X", single output "Y") on the reference
 * backend with `threads` threads. *out receives the output value (caller
 * destroys it); false with a test failure recorded otherwise. */
static int run_model(mb_model *m, int threads, mcp_dtype dt, int rank, const int64_t *dims,
                     const void *data, mcp_value **out)
{
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_session_options o = mcp_session_options_default();
    o.threads = threads;
    o.backend = "ref";
    mcp_session *s = NULL;
    char err[512] = "";
    mcp_status st = mcp_session_create_from_memory(buf, len, NULL, &o, &s, err, sizeof err);
    free(buf);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, err);
    if (st != MCP_STATUS_OK) return 0;
    mcp_value *in = mcp_value_create_tensor(dt, rank, dims, data, err, sizeof err);
    TU_CHECK(in != NULL);
    if (!in) {
        mcp_session_destroy(s);
        return 0;
    }
    const char *names[1] = {"X"};
    /* Twice: the first run of a shape records sizes, the second follows the
     * memory plan (in-place outputs among them); the second's result is
     * checked. */
    *out = NULL;
    st = mcp_session_run(s, 1, names, &in, 1, NULL, out, err, sizeof err);
    TU_CHECK_STATUS(st, MCP_STATUS_OK, err);
    if (st == MCP_STATUS_OK) {
        mcp_value_destroy(*out);
        *out = NULL;
        st = mcp_session_run(s, 1, names, &in, 1, NULL, out, err, sizeof err);
        TU_CHECK_STATUS(st, MCP_STATUS_OK, err);
    }
    mcp_value_destroy(in);
    mcp_session_destroy(s);
    return st == MCP_STATUS_OK;
}

/* Output tensor of v: checks dtype and shape, returns the data. */
static const void *out_data(const mcp_value *v, mcp_dtype dt, int rank, const int64_t *dims)
{
    mcp_dtype odt;
    int orank;
    const int64_t *odims;
    const void *data;
    if (mcp_value_get_tensor(v, &odt, &orank, &odims, &data) != MCP_STATUS_OK) return NULL;
    TU_CHECK_INT(odt, dt);
    TU_CHECK_INT(orank, rank);
    if (odt != dt || orank != rank) return NULL;
    for (int k = 0; k < rank; k++) {
        TU_CHECK_INT(odims[k], dims[k]);
        if (odims[k] != dims[k]) return NULL;
    }
    return data;
}

/* ---- Transpose ---- */

static void check_transpose(mcp_dtype dt, int rank, const int64_t *dims, const int64_t *perm)
{
    size_t es = (size_t)mcp_dtype_size(dt);
    int64_t n = numel_of(rank, dims), odims[8], xst[8];
    for (int k = 0; k < rank; k++) odims[k] = dims[perm[k]];
    xst[rank - 1] = 1;
    for (int k = rank - 2; k >= 0; k--) xst[k] = xst[k + 1] * dims[k + 1];
    uint8_t *x = malloc((size_t)n * es + 1), *want = malloc((size_t)n * es + 1);
    fill_bytes(x, (size_t)n * es, (uint32_t)(n + rank));
    /* want[i] = x[sum idx_k * xst[perm[k]]] over output indices in order. */
    int64_t idx[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int k = 0; k < rank; k++) off += idx[k] * xst[perm[k]];
        memcpy(want + (size_t)i * es, x + (size_t)off * es, es);
        for (int k = rank - 1; k >= 0; k--) {
            if (++idx[k] < odims[k]) break;
            idx[k] = 0;
        }
    }
    for (int threads = 1; threads <= 2; threads++) {
        mb_model *m = mb_model_new(17);
        mb_add_input(m, NULL, "X", dt, rank, dims, NULL);
        mb_add_output(m, NULL, "Y", dt, rank, odims, NULL);
        Onnx__NodeProto *node = mb_add_node(m, NULL, "Transpose", "t", "X", "Y");
        mb_attr_ints(m, node, "perm", perm, (size_t)rank);
        mcp_value *y = NULL;
        if (run_model(m, threads, dt, rank, dims, x, &y)) {
            const void *got = out_data(y, dt, rank, odims);
            int same = got && memcmp(got, want, (size_t)n * es) == 0;
            TU_CHECK(same);
            if (!same) {
                fprintf(stderr, "  transpose dtype %s rank %d threads %d, perm", mcp_dtype_name(dt),
                        rank, threads);
                for (int k = 0; k < rank; k++) fprintf(stderr, " %lld", (long long)perm[k]);
                fprintf(stderr, "\n");
            }
        }
        mcp_value_destroy(y);
        mb_model_free(m);
    }
    free(x);
    free(want);
}

static void test_transpose(void)
{
    /* The bert_like cases (heads split, keys transposed, a size-1 batch). */
    { int64_t d[] = {128, 12, 64}, p[] = {1, 0, 2}; check_transpose(MCP_DTYPE_FLOAT, 3, d, p); }
    { int64_t d[] = {128, 12, 64}, p[] = {1, 2, 0}; check_transpose(MCP_DTYPE_FLOAT, 3, d, p); }
    { int64_t d[] = {128, 1, 768}, p[] = {1, 0, 2}; check_transpose(MCP_DTYPE_FLOAT, 3, d, p); }
    { int64_t d[] = {40, 3, 96}, p[] = {1, 0, 2}; check_transpose(MCP_DTYPE_FLOAT, 3, d, p); }
    /* Tiles with ragged edges, both orders, every element size. */
    static const mcp_dtype dts[] = {MCP_DTYPE_UINT8, MCP_DTYPE_FLOAT16, MCP_DTYPE_FLOAT,
                                    MCP_DTYPE_INT64, MCP_DTYPE_DOUBLE, MCP_DTYPE_BOOL};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        { int64_t d[] = {67, 45}, p[] = {1, 0}; check_transpose(dts[i], 2, d, p); }
        { int64_t d[] = {3, 33, 70}, p[] = {0, 2, 1}; check_transpose(dts[i], 3, d, p); }
        { int64_t d[] = {2, 5, 7, 3}, p[] = {3, 1, 0, 2}; check_transpose(dts[i], 4, d, p); }
    }
    /* Size-1 and merged axes, full reversal, identity, rank 1 and 6. */
    { int64_t d[] = {1, 9, 1, 10, 11}, p[] = {2, 3, 4, 0, 1}; check_transpose(MCP_DTYPE_FLOAT, 5, d, p); }
    { int64_t d[] = {4, 5, 6, 7}, p[] = {3, 2, 1, 0}; check_transpose(MCP_DTYPE_FLOAT, 4, d, p); }
    { int64_t d[] = {4, 5, 6, 7}, p[] = {0, 1, 2, 3}; check_transpose(MCP_DTYPE_INT16, 4, d, p); }
    { int64_t d[] = {4, 5, 6, 7}, p[] = {2, 3, 0, 1}; check_transpose(MCP_DTYPE_FLOAT, 4, d, p); }
    { int64_t d[] = {37}, p[] = {0}; check_transpose(MCP_DTYPE_FLOAT, 1, d, p); }
    { int64_t d[] = {2, 3, 1, 4, 2, 5}, p[] = {5, 0, 3, 2, 4, 1}; check_transpose(MCP_DTYPE_INT32, 6, d, p); }
    /* Large enough to be split over two threads. */
    { int64_t d[] = {8, 128, 96}, p[] = {2, 0, 1}; check_transpose(MCP_DTYPE_FLOAT, 3, d, p); }
    { int64_t d[] = {128, 96, 8}, p[] = {1, 0, 2}; check_transpose(MCP_DTYPE_FLOAT, 3, d, p); }
    /* Empty. */
    { int64_t d[] = {3, 0, 4}, p[] = {2, 1, 0}; check_transpose(MCP_DTYPE_FLOAT, 3, d, p); }
}

/* ---- Slice ---- */

static void check_slice(int rank, const int64_t *dims, int ns, const int64_t *starts,
                        const int64_t *ends, const int64_t *axes, const int64_t *steps)
{
    int64_t beg[8], step[8], odims[8], xst[8];
    for (int k = 0; k < rank; k++) {
        beg[k] = 0;
        step[k] = 1;
        odims[k] = dims[k];
    }
    /* Here starts/ends are given already in range (no clamping to test). */
    for (int i = 0; i < ns; i++) {
        int64_t a = axes[i], s = starts[i], e = ends[i], p = steps[i];
        beg[a] = s;
        step[a] = p;
        odims[a] = p > 0 ? (e > s ? (e - s - 1) / p + 1 : 0) : (s > e ? (s - e - 1) / -p + 1 : 0);
    }
    xst[rank - 1] = 1;
    for (int k = rank - 2; k >= 0; k--) xst[k] = xst[k + 1] * dims[k + 1];
    int64_t n = numel_of(rank, dims), on = numel_of(rank, odims);
    float *x = malloc((size_t)n * sizeof *x + 4), *want = malloc((size_t)on * sizeof *want + 4);
    for (int64_t i = 0; i < n; i++) x[i] = (float)i;
    int64_t idx[8] = {0};
    for (int64_t i = 0; i < on; i++) {
        int64_t off = 0;
        for (int k = 0; k < rank; k++) off += (beg[k] + idx[k] * step[k]) * xst[k];
        want[i] = x[off];
        for (int k = rank - 1; k >= 0; k--) {
            if (++idx[k] < odims[k]) break;
            idx[k] = 0;
        }
    }
    int64_t one[1] = {ns};
    for (int threads = 1; threads <= 2; threads++) {
        mb_model *m = mb_model_new(17);
        mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, rank, dims, NULL);
        mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, rank, odims, NULL);
        mb_add_initializer(m, NULL, "s", MCP_DTYPE_INT64, 1, one, starts, (size_t)ns * 8);
        mb_add_initializer(m, NULL, "e", MCP_DTYPE_INT64, 1, one, ends, (size_t)ns * 8);
        mb_add_initializer(m, NULL, "a", MCP_DTYPE_INT64, 1, one, axes, (size_t)ns * 8);
        mb_add_initializer(m, NULL, "p", MCP_DTYPE_INT64, 1, one, steps, (size_t)ns * 8);
        mb_add_node(m, NULL, "Slice", "s", "X,s,e,a,p", "Y");
        mcp_value *y = NULL;
        if (run_model(m, threads, MCP_DTYPE_FLOAT, rank, dims, x, &y)) {
            const void *got = out_data(y, MCP_DTYPE_FLOAT, rank, odims);
            TU_CHECK(got && memcmp(got, want, (size_t)on * sizeof *want) == 0);
        }
        mcp_value_destroy(y);
        mb_model_free(m);
    }
    free(x);
    free(want);
}

static void test_slice(void)
{
    /* The bert_like case: a third of the last axis of [S, B, 3 * 768]. */
    { int64_t d[] = {128, 2, 2304}, s[] = {768}, e[] = {1536}, a[] = {2}, p[] = {1};
      check_slice(3, d, 1, s, e, a, p); }
    /* Whole inner rows (one memcpy), a middle axis, several axes. */
    { int64_t d[] = {10, 6, 7}, s[] = {2}, e[] = {9}, a[] = {0}, p[] = {1};
      check_slice(3, d, 1, s, e, a, p); }
    { int64_t d[] = {10, 6, 7}, s[] = {1}, e[] = {5}, a[] = {1}, p[] = {1};
      check_slice(3, d, 1, s, e, a, p); }
    { int64_t d[] = {10, 6, 7}, s[] = {1, 2, 3}, e[] = {9, 6, 4}, a[] = {0, 1, 2}, p[] = {1, 1, 1};
      check_slice(3, d, 3, s, e, a, p); }
    /* Steps other than 1: an outer step keeps row copies, an inner step or
     * a negative one takes the generic copy. */
    { int64_t d[] = {10, 6, 7}, s[] = {0}, e[] = {10}, a[] = {0}, p[] = {3};
      check_slice(3, d, 1, s, e, a, p); }
    { int64_t d[] = {10, 6, 7}, s[] = {1}, e[] = {7}, a[] = {2}, p[] = {2};
      check_slice(3, d, 1, s, e, a, p); }
    { int64_t d[] = {10, 6, 7}, s[] = {6, 5}, e[] = {0, 0}, a[] = {2, 1}, p[] = {-1, -2};
      check_slice(3, d, 2, s, e, a, p); }
    /* Empty result. */
    { int64_t d[] = {10, 6, 7}, s[] = {3}, e[] = {3}, a[] = {1}, p[] = {1};
      check_slice(3, d, 1, s, e, a, p); }
}

/* ---- Softmax ---- */

static void check_softmax(const char *op, int rows, int n, const float *x)
{
    int log_form = strcmp(op, "LogSoftmax") == 0;
    int64_t dims[2] = {rows, n};
    for (int threads = 1; threads <= 2; threads++) {
        mb_model *m = mb_model_new(13);
        mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, dims, NULL);
        mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, dims, NULL);
        Onnx__NodeProto *node = mb_add_node(m, NULL, op, "s", "X", "Y");
        mb_attr_int(m, node, "axis", -1);
        mcp_value *y = NULL;
        if (run_model(m, threads, MCP_DTYPE_FLOAT, 2, dims, x, &y)) {
            const float *got = out_data(y, MCP_DTYPE_FLOAT, 2, dims);
            for (int r = 0; got && r < rows; r++) {
                const float *xr = x + (size_t)r * n;
                double mx = -INFINITY;
                for (int k = 0; k < n; k++) mx = xr[k] > mx ? xr[k] : mx;
                if (isinf(mx)) mx = 0;
                double sum = 0;
                for (int k = 0; k < n; k++) sum += exp((double)xr[k] - mx);
                int bad = 0;
                for (int k = 0; k < n; k++) {
                    double w = log_form ? (double)xr[k] - mx - log(sum) : exp((double)xr[k] - mx) / sum;
                    double g = got[(size_t)r * n + k];
                    if (isnan(w))
                        bad += !isnan(g);
                    else if (isinf(w))
                        bad += g != w;
                    else
                        bad += !(fabs(g - w) <= 1e-6 * fabs(w) + 1e-30);
                }
                TU_CHECK_INT(bad, 0);
            }
        }
        mcp_value_destroy(y);
        mb_model_free(m);
    }
}

static void test_softmax(void)
{
    int rows = 96, n = 130;
    float *x = malloc(sizeof(float) * (size_t)rows * n);
    uint32_t s = 7;
    for (int i = 0; i < rows * n; i++) x[i] = 12.0f * frand(&s);
    /* Rows with a -inf mask entry, a NaN, a wide range, all -inf, and a
     * +inf among positive values. */
    x[1 * n + 5] = -INFINITY;
    x[2 * n + 7] = NAN;
    for (int k = 0; k < n; k++) x[3 * n + k] = (float)k * 1.5f - 100.0f;
    for (int k = 0; k < n; k++) x[4 * n + k] = -INFINITY;
    x[5 * n + 9] = INFINITY;
    check_softmax("Softmax", rows, n, x);
    check_softmax("LogSoftmax", rows, n, x);
    /* Many rows: split over threads. */
    int big_rows = 600;
    float *xb = malloc(sizeof(float) * (size_t)big_rows * 128);
    for (int i = 0; i < big_rows * 128; i++) xb[i] = 8.0f * frand(&s);
    check_softmax("Softmax", big_rows, 128, xb);
    free(xb);
    free(x);
}

/* The exp Softmax uses, against exp in double over [-87.3, 0]. */
static void test_expf_nonpos(void)
{
    double worst = 0;
    for (float v = -87.3f; v <= 0.0f; v += 0.000731f) {
        double w = exp((double)v), g = mcp__ew_expf_nonpos(v);
        double rel = fabs(g - w) / w;
        worst = rel > worst ? rel : worst;
    }
    TU_CHECK(worst <= 3.5e-7);
    TU_CHECK(mcp__ew_expf_nonpos(0.0f) == 1.0f);
    TU_CHECK(mcp__ew_expf_nonpos(-0.0f) == 1.0f);
    TU_CHECK(mcp__ew_expf_nonpos(-INFINITY) == 0.0f);
    TU_CHECK(mcp__ew_expf_nonpos(-200.0f) == 0.0f);
    TU_CHECK(isnan(mcp__ew_expf_nonpos(NAN)));
}

/* ---- ops the executor may run in place ---- */

/*
 * X [4, 96, 100] through a chain where every intermediate value is read
 * once, so the executor may give each output its input's storage:
 * Relu, Add (broadcast row), Reshape, Mul (scalar), Sigmoid, Unsqueeze,
 * Squeeze, Sub (broadcast column second), Div (broadcast column first),
 * Clip, Flatten, Tanh, Add (both operands the same value), Neg, Exp. The
 * result is compared with the same chain computed here in double.
 */
static void test_inplace_chain(void)
{
    int64_t dims[3] = {4, 96, 100}, n = 4 * 96 * 100;
    int64_t cdims[2] = {384, 1};
    int64_t fdims[2] = {384, 100}, one[1] = {1}, row[1] = {100};
    float bias[100], col[384], two[1] = {2.0f}, lo[1] = {-0.5f}, hi[1] = {0.75f};
    int64_t shape[2] = {384, 100}, axes[1] = {1}, two_i[1] = {2};
    uint32_t s = 11;
    for (int i = 0; i < 100; i++) bias[i] = frand(&s);
    for (int i = 0; i < 384; i++) col[i] = 1.5f + frand(&s);
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = 3.0f * frand(&s);
    for (int threads = 1; threads <= 2; threads++) {
        mb_model *m = mb_model_new(13);
        mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 3, dims, NULL);
        mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, fdims, NULL);
        mb_add_initializer(m, NULL, "bias", MCP_DTYPE_FLOAT, 1, row, bias, sizeof bias);
        mb_add_initializer(m, NULL, "col", MCP_DTYPE_FLOAT, 2, cdims, col, sizeof col);
        mb_add_initializer(m, NULL, "two", MCP_DTYPE_FLOAT, 1, one, two, sizeof two);
        mb_add_initializer(m, NULL, "lo", MCP_DTYPE_FLOAT, 0, NULL, lo, sizeof lo);
        mb_add_initializer(m, NULL, "hi", MCP_DTYPE_FLOAT, 0, NULL, hi, sizeof hi);
        mb_add_initializer(m, NULL, "shape", MCP_DTYPE_INT64, 1, two_i, shape, sizeof shape);
        mb_add_initializer(m, NULL, "axes", MCP_DTYPE_INT64, 1, one, axes, sizeof axes);
        mb_add_node(m, NULL, "Relu", "n1", "X", "a1");
        mb_add_node(m, NULL, "Add", "n2", "a1,bias", "a2");
        mb_add_node(m, NULL, "Reshape", "n3", "a2,shape", "a3");
        mb_add_node(m, NULL, "Mul", "n4", "two,a3", "a4");
        mb_add_node(m, NULL, "Sigmoid", "n5", "a4", "a5");
        mb_add_node(m, NULL, "Unsqueeze", "n6", "a5,axes", "a6");
        mb_add_node(m, NULL, "Squeeze", "n7", "a6,axes", "a7");
        mb_add_node(m, NULL, "Sub", "n8", "a7,col", "a8");
        mb_add_node(m, NULL, "Div", "n9", "col,a8", "a9");
        mb_add_node(m, NULL, "Clip", "n10", "a9,lo,hi", "a10");
        mb_add_node(m, NULL, "Flatten", "n11", "a10", "a11");
        mb_add_node(m, NULL, "Tanh", "n12", "a11", "a12");
        mb_add_node(m, NULL, "Add", "n13", "a12,a12", "a13");
        mb_add_node(m, NULL, "Neg", "n14", "a13", "a14");
        mb_add_node(m, NULL, "Exp", "n15", "a14", "Y");
        mcp_value *y = NULL;
        if (run_model(m, threads, MCP_DTYPE_FLOAT, 3, dims, x, &y)) {
            const float *got = out_data(y, MCP_DTYPE_FLOAT, 2, fdims);
            int bad = 0;
            for (int64_t i = 0; got && i < n; i++) {
                int64_t r = i / 100, c = i % 100;
                double v = x[i] > 0 ? x[i] : 0.0;
                v += bias[c];
                v = 1.0 / (1.0 + exp(-2.0 * v));
                v -= col[r];
                v = col[r] / v;
                v = v < -0.5 ? -0.5 : (v > 0.75 ? 0.75 : v);
                v = exp(-2.0 * tanh(v));
                if (!(fabs(got[i] - v) <= 1e-5 * fabs(v) + 1e-6)) bad++;
            }
            TU_CHECK_INT(bad, 0);
        }
        mcp_value_destroy(y);
        mb_model_free(m);
    }
    free(x);
}

int main(void)
{
    TU_RUN(test_transpose);
    TU_RUN(test_slice);
    TU_RUN(test_softmax);
    TU_RUN(test_expf_nonpos);
    TU_RUN(test_inplace_chain);
    return tu_finish("test_ref_fast");
}
