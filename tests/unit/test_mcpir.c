/*
 * Compiled models (.mcpir, src/engine/mcpir.c): a compiled model gives the
 * ONNX model's results bit for bit, from its file (mapped) and from memory,
 * with its packed weights adopted and no plain copy of them loaded; a
 * stamp that does not match (threads, options) loads the embedded ONNX and
 * says why; a model with subgraphs compiles; and damaged files are refused
 * naming what is wrong, or fall back, never crash (a bounded sweep of
 * single-byte corruptions across the header, graph and packed records).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "engine/engine.h"
#include "engine/mcpir.h"
#include "mcp/mcp.h"
#include "model_builder.h"
#include "test_util.h"

enum { CIN = 8, HW = 9 };

static char tmp_dir[1024];

/*
 * X [b,8,9,9] -> A = Relu(Conv1x1 + bias, 16 ch) -> P = MaxPool 3x3 ->
 * S = Relu(Conv3x3(P) + A) -> D = Concat(A, S) -> Y1 = Conv1x1(D) (4 ch);
 * G = Flatten(GlobalAveragePool(S)) -> Y2 = Gemm(G, W^T, b).
 */
static mb_model *cnn(void)
{
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {-1, CIN, HW, HW}, y1d[] = {-1, 4, HW, HW}, y2d[] = {-1, 10};
    const char *const params[] = {"batch", NULL, NULL, NULL};
    const int64_t wad[] = {16, CIN, 1, 1}, wbd[] = {16, 16, 3, 3}, wdd[] = {4, 32, 1, 1}, wgd[] = {10, 16};
    const int64_t b16[] = {16}, b10[] = {10};
    static float wa[16 * CIN], ba[16], wb[16 * 16 * 9], wd[4 * 32], wg[10 * 16], bg[10];
    mb_fill_pattern(wa, 16 * CIN, 1, 0.05f);
    mb_fill_pattern(ba, 16, 2, 0.01f);
    mb_fill_pattern(wb, 16 * 16 * 9, 3, 0.02f);
    mb_fill_pattern(wd, 4 * 32, 4, 0.03f);
    mb_fill_pattern(wg, 10 * 16, 5, 0.07f);
    mb_fill_pattern(bg, 10, 6, 0.02f);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 4, xd, params);
    mb_add_initializer(m, NULL, "WA", MCP_DTYPE_FLOAT, 4, wad, wa, sizeof wa);
    mb_add_initializer(m, NULL, "BA", MCP_DTYPE_FLOAT, 1, b16, ba, sizeof ba);
    mb_add_initializer(m, NULL, "WB", MCP_DTYPE_FLOAT, 4, wbd, wb, sizeof wb);
    mb_add_initializer(m, NULL, "WD", MCP_DTYPE_FLOAT, 4, wdd, wd, sizeof wd);
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
    Onnx__NodeProto *d = mb_add_node(m, NULL, "Concat", "concat", "A,S", "D");
    mb_attr_int(m, d, "axis", 1);
    mb_add_node(m, NULL, "Conv", "conv_d", "D,WD", "Y1");
    mb_add_node(m, NULL, "GlobalAveragePool", "gap", "S", "GP");
    mb_add_node(m, NULL, "Flatten", "flat", "GP", "G");
    Onnx__NodeProto *gm = mb_add_node(m, NULL, "Gemm", "gemm", "G,WG,BG", "Y2");
    mb_attr_int(m, gm, "transB", 1);
    mb_add_output(m, NULL, "Y1", MCP_DTYPE_FLOAT, 4, y1d, params);
    mb_add_output(m, NULL, "Y2", MCP_DTYPE_FLOAT, 2, y2d, params);
    return m;
}

/* Y = If(C) then X * K1 else MatMul(X, K2) (a subgraph initializer and a
 * captured outer initializer); Z = X + K0. */
static mb_model *branches(void)
{
    mb_model *m = mb_model_new(13);
    const int64_t xd[] = {2, 3}, kd[] = {3, 3}, cd[] = {1};
    static float k0[6], k1[6], k2[9];
    mb_fill_pattern(k0, 6, 7, 0.25f);
    mb_fill_pattern(k1, 6, 8, 0.5f);
    mb_fill_pattern(k2, 9, 9, 0.125f);
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mb_add_input(m, NULL, "C", MCP_DTYPE_BOOL, 1, cd, NULL);
    mb_add_initializer(m, NULL, "K0", MCP_DTYPE_FLOAT, 2, xd, k0, sizeof k0);
    mb_add_initializer(m, NULL, "K2", MCP_DTYPE_FLOAT, 2, kd, k2, sizeof k2);
    mb_add_node(m, NULL, "Add", "add", "X,K0", "Z");
    Onnx__GraphProto *then_g = mb_new_graph(m, "then");
    mb_add_initializer(m, then_g, "K1", MCP_DTYPE_FLOAT, 2, xd, k1, sizeof k1);
    mb_add_node(m, then_g, "Mul", "mul", "X,K1", "T");
    mb_add_output(m, then_g, "T", MCP_DTYPE_FLOAT, 2, xd, NULL);
    Onnx__GraphProto *else_g = mb_new_graph(m, "else");
    mb_add_node(m, else_g, "MatMul", "mm", "X,K2", "E");
    mb_add_output(m, else_g, "E", MCP_DTYPE_FLOAT, 2, xd, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "If", "branch", "C", "Y");
    mb_attr_graph(m, n, "then_branch", then_g);
    mb_attr_graph(m, n, "else_branch", else_g);
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 2, xd, NULL);
    mb_add_output(m, NULL, "Z", MCP_DTYPE_FLOAT, 2, xd, NULL);
    return m;
}

/* Writes m as tmp_dir/NAME.onnx and compiles it to NAME.mcpir (paths out). */
static bool write_and_compile(mb_model *m, const char *name, const mcp_session_options *o, char *onnx, char *ir)
{
    char file[128], msg[1024] = "";
    snprintf(file, sizeof file, "%s.onnx", name);
    tu_path(onnx, 1024, tmp_dir, file);
    snprintf(file, sizeof file, "%s.mcpir", name);
    tu_path(ir, 1024, tmp_dir, file);
    int w = mb_write_file(m, onnx);
    mb_model_free(m);
    if (w != 0) return false;
    mcp_status st = mcp_compile(onnx, ir, o, msg, sizeof msg);
    if (st != MCP_STATUS_OK) fprintf(stderr, "compile: %s\n", msg);
    return st == MCP_STATUS_OK;
}

static mcp_session *open_file(const char *path, const mcp_session_options *o)
{
    char msg[1024] = "";
    mcp_session *s = NULL;
    if (mcp_session_create_from_file(path, o, &s, msg, sizeof msg) != MCP_STATUS_OK) fprintf(stderr, "%s: %s\n", path, msg);
    return s;
}

/* The CNN's input for batch b, or the branch model's X and C. */
static void make_inputs(const mcp_session *s, int64_t b, bool cond, mcp_value **ins)
{
    const mcp_graph *g = s->graph;
    char msg[256];
    for (int i = 0; i < g->n_inputs; i++) {
        const mcp_graph_value *v = &g->values[g->inputs[i]];
        if (strcmp(v->name, "C") == 0) {
            const int64_t d[] = {1};
            uint8_t c = cond;
            ins[i] = mcp_value_create_tensor(MCP_DTYPE_BOOL, 1, d, &c, msg, sizeof msg);
            continue;
        }
        int64_t dims[4];
        for (int k = 0; k < v->type.rank; k++) dims[k] = v->type.dims[k] < 0 ? b : v->type.dims[k];
        int64_t n = mcp_shape_numel(v->type.rank, dims);
        float *x = mcp_malloc(sizeof *x * (size_t)n);
        mb_fill_pattern(x, (int)n, (int)b, 0.1f);
        ins[i] = mcp_value_create_tensor(MCP_DTYPE_FLOAT, v->type.rank, dims, x, msg, sizeof msg);
        mcp_free(x);
    }
}

/* Runs a and b on the same inputs; counts outputs that are not bit for bit
 * equal (-1 when a run fails). */
static int differing_outputs(const mcp_session *a, const mcp_session *b, int64_t batch, bool cond)
{
    char msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    int n_in = a->graph->n_inputs, n_out = a->graph->n_outputs;
    if (n_in != b->graph->n_inputs || n_out != b->graph->n_outputs || n_in > 4 || n_out > 4) return -1;
    mcp_value *ins[4] = {NULL}, *oa[4] = {NULL}, *ob[4] = {NULL};
    make_inputs(a, batch, cond, ins);
    for (int i = 0; i < n_out; i++) {
        oa[i] = mcp_value_new();
        ob[i] = mcp_value_new();
    }
    int bad = 0;
    if (mcp__session_run(a, ins, oa, &err) != MCP_STATUS_OK || mcp__session_run(b, ins, ob, &err) != MCP_STATUS_OK) {
        fprintf(stderr, "run: %s\n", msg);
        bad = -1;
    }
    for (int i = 0; bad >= 0 && i < n_out; i++) {
        const mcp_tensor *x = &oa[i]->tensor, *y = &ob[i]->tensor;
        bad += x->rank != y->rank || memcmp(x->dims, y->dims, sizeof x->dims[0] * (size_t)x->rank) != 0 ||
               memcmp(x->data, y->data, mcp_tensor_nbytes(x)) != 0;
    }
    for (int i = 0; i < n_in; i++) mcp_value_destroy(ins[i]);
    for (int i = 0; i < n_out; i++) {
        mcp_value_free(oa[i]);
        mcp_value_free(ob[i]);
    }
    return bad;
}

static void test_compiled_matches_onnx(void)
{
    char onnx[1024], ir[1024], msg[1024] = "";
    int64_t base = mcp_alloc_live_count();
    mcp_session_options o = mcp_session_options_default();
    o.threads = 2;
    TU_REQUIRE(write_and_compile(cnn(), "cnn", &o, onnx, ir));
    mcp_session *ref = open_file(onnx, &o), *s = open_file(ir, &o);
    TU_REQUIRE(ref && s);
    TU_CHECK(mcp_session_load_note(s) == NULL);
    TU_CHECK(mcp_session_load_note(ref) == NULL);
    TU_CHECK(s->ir_map != NULL);
#ifdef MCP_WITH_DNNL
    /* The convolutions' plain weights were not loaded: their packed copies
     * in the file serve. */
    int packed_only = 0;
    for (int k = 0; k < s->graph->n_initializers; k++)
        packed_only += s->graph->initializers[k].data == NULL && s->graph->initializers[k].rank == 4;
    TU_CHECK_INT(packed_only, 3);
#endif
    const int64_t batches[] = {1, 2, 3, 1};
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
        for (int rep = 0; rep < 2; rep++) TU_CHECK_INT(differing_outputs(s, ref, batches[i], false), 0);

    /* From memory: the same results, and the bytes are the session's copy. */
    uint8_t *bytes = NULL;
    size_t len = 0;
    mcp_err err = {msg, sizeof msg};
    TU_REQUIRE_OK(mcp_file_read(ir, &bytes, &len, &err), msg);
    mcp_session *m = NULL;
    TU_CHECK_STATUS(mcp_session_create_from_memory(bytes, len, NULL, &o, &m, msg, sizeof msg), MCP_STATUS_OK, msg);
    memset(bytes, 0, len);
    mcp_free(bytes);
    TU_REQUIRE(m);
    TU_CHECK(mcp_session_load_note(m) == NULL);
    TU_CHECK_INT(differing_outputs(m, ref, 2, false), 0);
    mcp_session_destroy(m);

    /* Another thread count is another stamp: the embedded ONNX loads, with
     * a note; results are those of the ONNX model at that count. */
    mcp_session_options o1 = o;
    o1.threads = 1;
    mcp_session *s1 = open_file(ir, &o1), *ref1 = open_file(onnx, &o1);
    TU_REQUIRE(s1 && ref1);
    const char *note = mcp_session_load_note(s1);
    TU_CHECK(note && strstr(note, "threads 2") && strstr(note, "threads 1") && strstr(note, "recompiled"));
    TU_CHECK(s1->ir_map == NULL);
    TU_CHECK_INT(differing_outputs(s1, ref1, 2, false), 0);
    mcp_session_destroy(s1);
    mcp_session_destroy(ref1);

    /* A model keeping its weights in an external file is refused: the
     * fallback could not find them beside a copy of the .mcpir. */
    {
        mb_model *em = mb_example_mlp();
        Onnx__GraphProto *eg = mb_main_graph(em);
        char data_path[1024], ext_onnx[1024], ext_ir[1024];
        tu_path(data_path, sizeof data_path, tmp_dir, "w.bin");
        tu_path(ext_onnx, sizeof ext_onnx, tmp_dir, "ext.onnx");
        tu_path(ext_ir, sizeof ext_ir, tmp_dir, "ext.mcpir");
        TU_REQUIRE(mb_write_bytes(data_path, mb_mlp_w, sizeof mb_mlp_w) == 0);
        for (size_t i = 0; i < eg->n_initializer; i++)
            if (strcmp(eg->initializer[i]->name, "W") == 0) mb_tensor_set_external(em, eg->initializer[i], "w.bin", 0, -1);
        TU_REQUIRE(mb_write_file(em, ext_onnx) == 0);
        mb_model_free(em);
        TU_CHECK_STATUS(mcp_compile(ext_onnx, ext_ir, &o, msg, sizeof msg), MCP_STATUS_UNSUPPORTED, msg);
        TU_CHECK(strstr(msg, "external files") != NULL);
        struct stat sb;
        TU_CHECK(stat(ext_ir, &sb) != 0);
        unlink(data_path);
        unlink(ext_onnx);
    }

    /* Compiling a compiled model is refused; a missing file is named. */
    TU_CHECK_STATUS(mcp_compile(ir, ir, &o, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK(strstr(msg, "compiled already") != NULL);
    char missing[1024];
    tu_path(missing, sizeof missing, tmp_dir, "nope.onnx");
    TU_CHECK(mcp_compile(missing, ir, &o, msg, sizeof msg) != MCP_STATUS_OK);
    TU_CHECK(strstr(msg, "nope.onnx") != NULL);
    mcp_session_destroy(s);
    mcp_session_destroy(ref);
    unlink(onnx);
    unlink(ir);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

static void test_bf16_and_subgraphs(void)
{
    char onnx[1024], ir[1024];
    mcp_session_options o = mcp_session_options_default();
    o.threads = 2;
    o.bf16 = 1;
    TU_REQUIRE(write_and_compile(cnn(), "cnn16", &o, onnx, ir));
    mcp_session *ref = open_file(onnx, &o), *s = open_file(ir, &o);
    TU_REQUIRE(ref && s);
    TU_CHECK(mcp_session_load_note(s) == NULL);
    TU_CHECK_STR(mcp_session_precision(s), mcp_session_precision(ref));
    TU_CHECK_INT(differing_outputs(s, ref, 2, false), 0);
    mcp_session_destroy(s);
    /* Loaded without the option it was compiled with: recompiled (fp32). */
    mcp_session_options o32 = o;
    o32.bf16 = 0;
    s = open_file(ir, &o32);
    TU_REQUIRE(s);
    TU_CHECK(mcp_session_load_note(s) && strstr(mcp_session_load_note(s), "bf16 1"));
    TU_CHECK_STR(mcp_session_precision(s), "fp32");
    mcp_session_destroy(s);
    mcp_session_destroy(ref);
    unlink(onnx);
    unlink(ir);

    o.bf16 = 0;
    TU_REQUIRE(write_and_compile(branches(), "branches", &o, onnx, ir));
    ref = open_file(onnx, &o);
    s = open_file(ir, &o);
    TU_REQUIRE(ref && s);
    TU_CHECK(mcp_session_load_note(s) == NULL);
    for (int c = 0; c < 2; c++) TU_CHECK_INT(differing_outputs(s, ref, 2, c != 0), 0);
    mcp_session_destroy(s);
    mcp_session_destroy(ref);
    unlink(onnx);
    unlink(ir);
}

/* Loads bytes from memory: refused (a message) or loaded (then it runs or
 * fails cleanly). Returns the status. */
static mcp_status try_load(const uint8_t *bytes, size_t len, const mcp_session_options *o, char *msg, size_t cap,
                           bool *noted)
{
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(bytes, len, NULL, o, &s, msg, cap);
    *noted = false;
    if (st == MCP_STATUS_OK) {
        *noted = mcp_session_load_note(s) != NULL;
        differing_outputs(s, s, 1, false);
        mcp_session_destroy(s);
    } else if (!msg[0]) {
        fprintf(stderr, "a refusal without a message\n");
        return MCP_STATUS_INTERNAL;
    }
    return st;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The compiled file `good` with its graph section decoded, changed by
 * `edit` and written back (the later sections move by whole 64-byte
 * steps); NULL when it cannot be rebuilt. *out_len receives the size. */
static uint8_t *rewrite_graph(const uint8_t *good, size_t len, void (*edit)(Onnx__ModelProto *), size_t *out_len)
{
    uint64_t goff = get64(good + 16), glen = get64(good + 24);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, glen, good + goff);
    if (!mp) return NULL;
    edit(mp);
    size_t nlen = onnx__model_proto__get_packed_size(mp);
    uint64_t next = get64(good + 16 + 16); /* the packed section's offset */
    uint64_t room = next - goff, need = (nlen + 63) / 64 * 64;
    uint64_t shift = need > room ? need - room : 0;
    uint8_t *b = calloc(1, len + shift);
    if (!b) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return NULL;
    }
    memcpy(b, good, goff);
    onnx__model_proto__pack(mp, b + goff);
    onnx__model_proto__free_unpacked(mp, NULL);
    put64(b + 24, nlen);
    memcpy(b + next + shift, good + next, len - next);
    for (int i = 1; i < 4; i++) put64(b + 16 + 16 * i, get64(good + 16 + 16 * i) + shift);
    *out_len = len + shift;
    return b;
}

/* Marks the Gemm's bias (held in the data area) as held packed only. */
static void release_bias(Onnx__ModelProto *mp)
{
    for (size_t i = 0; i < mp->graph->n_initializer; i++) {
        Onnx__TensorProto *t = mp->graph->initializer[i];
        if (strcmp(t->name, "BG") != 0) continue;
        for (size_t k = 0; k < t->n_external_data; k++)
            if (strcmp(t->external_data[k]->key, "location") == 0) {
                free(t->external_data[k]->value);
                t->external_data[k]->value = strdup(MCP_RELEASED_LOCATION);
            }
    }
}

/* Swaps the Gemm's B and C: its packed-only weights become its bias, an
 * input no kernel packs. */
static void swap_conv_inputs(Onnx__ModelProto *mp)
{
    for (size_t i = 0; i < mp->graph->n_node; i++) {
        Onnx__NodeProto *n = mp->graph->node[i];
        if (n->n_input >= 2 && strcmp(n->op_type, "Gemm") == 0) {
            char *t = n->input[1];
            n->input[1] = n->input[2];
            n->input[2] = t;
        }
    }
}

static void test_damaged_files(void)
{
    char onnx[1024], ir[1024], msg[1024] = "";
    int64_t base = mcp_alloc_live_count();
    mcp_session_options o = mcp_session_options_default();
    o.threads = 2;
    TU_REQUIRE(write_and_compile(cnn(), "damaged", &o, onnx, ir));
    uint8_t *good = NULL;
    size_t len = 0;
    mcp_err err = {msg, sizeof msg};
    TU_REQUIRE_OK(mcp_file_read(ir, &good, &len, &err), msg);
    uint8_t *b = mcp_malloc(len);
    TU_REQUIRE(b);
    bool noted;

    /* The header: cut short, another format version, a section outside
     * the file, an unterminated stamp. */
    TU_CHECK_STATUS(try_load(good, 300, &o, msg, sizeof msg, &noted), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK(strstr(msg, "header") != NULL);
    memcpy(b, good, len);
    put32(b + 8, 99);
    TU_CHECK_STATUS(try_load(b, len, &o, msg, sizeof msg, &noted), MCP_STATUS_UNSUPPORTED, msg);
    TU_CHECK(strstr(msg, "format 99") != NULL);
    memcpy(b, good, len);
    put64(b + 16 + 16 * 2, len); /* the data section starts at the end */
    put64(b + 16 + 16 * 2 + 8, 64);
    TU_CHECK_STATUS(try_load(b, len, &o, msg, sizeof msg, &noted), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK(strstr(msg, "data section") != NULL);
    memcpy(b, good, len);
    memset(b + 80, 'x', MCPIR_STAMP_MAX);
    TU_CHECK_STATUS(try_load(b, len, &o, msg, sizeof msg, &noted), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK(strstr(msg, "stamp") != NULL);

    /* The packed records: a zero-length descriptor, data off the area. */
    uint64_t poff = get64(good + 16 + 16), plen = get64(good + 16 + 24);
    TU_REQUIRE(plen >= 32);
    memcpy(b, good, len);
    put32(b + poff + 8, 0);
    TU_CHECK_STATUS(try_load(b, len, &o, msg, sizeof msg, &noted), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK(strstr(msg, "descriptor") != NULL);
    memcpy(b, good, len);
    put64(b + poff + 16, 1ull << 40);
    TU_CHECK_STATUS(try_load(b, len, &o, msg, sizeof msg, &noted), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK(strstr(msg, "outside the data area") != NULL);

    /* No packed weights at all: the convolutions' weights exist nowhere in
     * the compiled graph, so it loads from the embedded ONNX, noted. */
    memcpy(b, good, len);
    put64(b + 16 + 24, 0);
    TU_CHECK_STATUS(try_load(b, len, &o, msg, sizeof msg, &noted), MCP_STATUS_OK, msg);
#ifdef MCP_WITH_DNNL
    TU_CHECK(noted);
#endif

    /* Float data marked "held packed" where no kernel packs it (a bias, a
     * weight moved to another input): refused before anything reads it,
     * so the embedded ONNX loads, noted. */
    void (*edits[2])(Onnx__ModelProto *) = {release_bias, swap_conv_inputs};
    for (int k = 0; k < 2; k++) {
        size_t nlen = 0;
        uint8_t *nb = rewrite_graph(good, len, edits[k], &nlen);
        TU_REQUIRE(nb);
        mcp_session *fs = NULL;
        TU_CHECK_STATUS(mcp_session_create_from_memory(nb, nlen, NULL, &o, &fs, msg, sizeof msg), MCP_STATUS_OK, msg);
        const char *note = fs ? mcp_session_load_note(fs) : NULL;
        if (note) fprintf(stderr, "edit %d: %s\n", k, note);
#ifdef MCP_WITH_DNNL
        TU_CHECK(note && strstr(note, "could not be used"));
#endif
        mcp_session_destroy(fs);
        free(nb);
    }

    /* A bounded sweep of single-byte changes before the data area: each
     * load is refused with a message, falls back, or loads; none crashes
     * (the ASan build checks every access). */
    uint64_t blob_off = get64(good + 16 + 32);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int refused = 0, loaded = 0;
    for (int i = 0; i < 150; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(b, good, len);
        size_t at = (size_t)(x % blob_off);
        b[at] ^= (uint8_t)(1u << (x >> 60 & 7));
        if (getenv("MCPIR_TRACE")) fprintf(stderr, "byte %zu bit %d\n", at, (int)(x >> 60 & 7));
        msg[0] = '\0';
        mcp_status st = try_load(b, len, &o, msg, sizeof msg, &noted);
        TU_CHECK(st != MCP_STATUS_INTERNAL);
        if (st == MCP_STATUS_OK) loaded++;
        else refused++;
    }
    fprintf(stderr, "corrupted files: %d refused, %d loaded\n", refused, loaded);
    TU_CHECK_INT(refused + loaded, 150);
    mcp_free(b);
    mcp_free(good);
    unlink(onnx);
    unlink(ir);
    TU_CHECK_INT(mcp_alloc_live_count(), base);
}

int main(void)
{
    int64_t start = mcp_alloc_live_count();
    if (tu_make_temp_dir(tmp_dir, sizeof tmp_dir, "mcpir") != 0) {
        fprintf(stderr, "test_mcpir: cannot make a temporary folder\n");
        return 1;
    }
    TU_RUN(test_compiled_matches_onnx);
    TU_RUN(test_bf16_and_subgraphs);
    TU_RUN(test_damaged_files);
    rmdir(tmp_dir);
    TU_CHECK_INT(mcp_alloc_live_count(), start);
    return tu_finish("test_mcpir");
}
