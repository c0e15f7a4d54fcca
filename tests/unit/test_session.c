/*
 * The public C API end to end (include/mcp/mcp.h): load from memory and from
 * file, external data, input/output info, runs with and without output
 * selection, values, options.
 */
#include <stdbool.h>
#include <sys/stat.h>

#include "base/base.h" /* mcp_alloc_live_count */
#include "mcp/mcp.h"
#include "model_builder.h"
#include "test_util.h"

static char tmp_dir[1024];

/* Rows of X used below: small binary fractions, so every result is exact. */
static const float x_rows[4][3] = {{1, 2, 3}, {-1, 0, 1}, {0.5f, -0.5f, 2}, {4, -3, 0}};

static mcp_session *load_model(mb_model *m, const char *base_dir, const mcp_session_options *o)
{
    char msg[1024] = "";
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(buf, len, base_dir, o, &s, msg, sizeof msg);
    free(buf);
    if (st != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, __LINE__, "load failed: %s: %s", mcp_status_str(st), msg);
        return NULL;
    }
    return s;
}

/* Checks a float tensor value's shape and contents exactly. */
static void check_float_tensor(int line, const mcp_value *v, int rank, const int64_t *dims,
                               const float *expect)
{
    tu_checks++;
    if (!v) {
        TU_FAIL_AT(__FILE__, line, "value is NULL");
        return;
    }
    mcp_dtype dt;
    int r;
    const int64_t *d;
    const void *data;
    if (mcp_value_get_kind(v) != MCP_KIND_TENSOR ||
        mcp_value_get_tensor(v, &dt, &r, &d, &data) != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, line, "value is not a tensor");
        return;
    }
    if (dt != MCP_DTYPE_FLOAT) {
        TU_FAIL_AT(__FILE__, line, "dtype %s, expected float32", mcp_dtype_name(dt));
        return;
    }
    int64_t n = 1;
    if (r != rank) {
        TU_FAIL_AT(__FILE__, line, "rank %d, expected %d", r, rank);
        return;
    }
    for (int i = 0; i < rank; i++) {
        if (d[i] != dims[i]) {
            TU_FAIL_AT(__FILE__, line, "dim %d is %lld, expected %lld", i, (long long)d[i], (long long)dims[i]);
            return;
        }
        n *= dims[i];
    }
    const float *f = data;
    for (int64_t i = 0; i < n; i++) {
        if (f[i] != expect[i]) {
            TU_FAIL_AT(__FILE__, line, "element %lld is %.9g, expected %.9g", (long long)i, f[i], expect[i]);
            return;
        }
    }
}

/* Runs the MLP session on the first `batch` rows of x_rows and checks Z and Y. */
static void run_and_check_mlp(int line, const mcp_session *s, int64_t batch)
{
    char msg[1024] = "";
    const int64_t xd[] = {batch, 3}, od[] = {batch, 2};
    mcp_value *x = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, xd, x_rows, msg, sizeof msg);
    tu_checks++;
    if (!x) {
        TU_FAIL_AT(__FILE__, line, "mcp_value_create_tensor: %s", msg);
        return;
    }
    const char *names[] = {"X"};
    mcp_value *outs[2] = {NULL, NULL};
    mcp_status st = mcp_session_run(s, 1, names, &x, 0, NULL, outs, msg, sizeof msg);
    if (st != MCP_STATUS_OK) {
        TU_FAIL_AT(__FILE__, line, "run failed: %s: %s", mcp_status_str(st), msg);
    } else {
        float y[8], z[8];
        mb_mlp_reference(&x_rows[0][0], batch, y, z);
        check_float_tensor(line, outs[0], 2, od, z);
        check_float_tensor(line, outs[1], 2, od, y);
    }
    mcp_value_destroy(outs[0]);
    mcp_value_destroy(outs[1]);
    mcp_value_destroy(x);
}

static void test_mlp_numbers(void)
{
    /* The reference itself, by hand for row [1, 2, 3]:
     * XW = [1 + 1 - 3, -2 + 6 + 0.75] = [-1, 4.75]; Y = XW + [0.5, -1]. */
    float y[2], z[2];
    mb_mlp_reference(x_rows[0], 1, y, z);
    TU_CHECK(y[0] == -0.5f && y[1] == 3.75f);
    TU_CHECK(z[0] == 0.0f && z[1] == 3.75f);

    mb_model *m = mb_example_mlp();
    mcp_session *s = load_model(m, NULL, NULL);
    mb_model_free(m);
    TU_REQUIRE(s != NULL);
    run_and_check_mlp(__LINE__, s, 1);
    run_and_check_mlp(__LINE__, s, 4); /* the symbolic batch dim takes any size */
    run_and_check_mlp(__LINE__, s, 2);

    /* Literal numbers for the four rows, so a wrong reference cannot hide a
     * wrong engine. */
    char msg[512];
    const int64_t xd[] = {4, 3};
    mcp_value *x = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, xd, x_rows, msg, sizeof msg);
    const char *names[] = {"X"};
    mcp_value *outs[2] = {NULL, NULL};
    TU_CHECK_STATUS(mcp_session_run(s, 1, names, &x, 0, NULL, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
    const int64_t od[] = {4, 2};
    const float zexp[] = {0, 3.75f, 0, 1.25f, 0, 0, 3, 0};
    const float yexp[] = {-0.5f, 3.75f, -1.5f, 1.25f, -1.25f, -3, 3, -18};
    check_float_tensor(__LINE__, outs[0], 2, od, zexp);
    check_float_tensor(__LINE__, outs[1], 2, od, yexp);
    mcp_value_destroy(outs[0]);
    mcp_value_destroy(outs[1]);
    mcp_value_destroy(x);
    mcp_session_destroy(s);
}

static void test_io_info(void)
{
    mb_model *m = mb_example_mlp();
    /* Listing an initializer among the graph inputs gives it a default; it
     * is not a required input. */
    const int64_t wd[] = {3, 2};
    mb_add_input(m, NULL, "W", MCP_DTYPE_FLOAT, 2, wd, NULL);
    /* An input without a shape and one with an anonymous dimension. */
    const int64_t ad[] = {-1, 4};
    mb_add_input(m, NULL, "unused_noshape", MCP_DTYPE_INT64, -1, NULL, NULL);
    mb_add_input(m, NULL, "unused_anon", MCP_DTYPE_DOUBLE, 2, ad, NULL);
    mcp_session *s = load_model(m, NULL, NULL);
    mb_model_free(m);
    TU_REQUIRE(s != NULL);

    TU_CHECK_INT(mcp_session_input_count(s), 3);
    TU_CHECK_INT(mcp_session_output_count(s), 2);
    mcp_io_info info;
    memset(&info, 0, sizeof info);
    TU_REQUIRE(mcp_session_input_info(s, 0, &info) == MCP_STATUS_OK);
    TU_CHECK_STR(info.name, "X");
    TU_CHECK_INT(info.kind, MCP_KIND_TENSOR);
    TU_CHECK_INT(info.optional, 0);
    TU_CHECK_INT(info.dtype, MCP_DTYPE_FLOAT);
    TU_CHECK_INT(info.rank, 2);
    TU_CHECK_INT(info.dims[0], -1);
    TU_CHECK_STR(info.dim_params[0], "batch");
    TU_CHECK_INT(info.dims[1], 3);
    TU_CHECK(info.dim_params[1] == NULL);

    TU_REQUIRE(mcp_session_input_info(s, 1, &info) == MCP_STATUS_OK);
    TU_CHECK_STR(info.name, "unused_noshape");
    TU_CHECK_INT(info.dtype, MCP_DTYPE_INT64);
    TU_CHECK_INT(info.rank, -1);
    TU_REQUIRE(mcp_session_input_info(s, 2, &info) == MCP_STATUS_OK);
    TU_CHECK_STR(info.name, "unused_anon");
    TU_CHECK_INT(info.dtype, MCP_DTYPE_DOUBLE);
    TU_CHECK_INT(info.rank, 2);
    TU_CHECK_INT(info.dims[0], -1);
    TU_CHECK(info.dim_params[0] == NULL);
    TU_CHECK_INT(info.dims[1], 4);

    const char *out_names[] = {"Z", "Y"};
    for (int i = 0; i < 2; i++) {
        TU_REQUIRE(mcp_session_output_info(s, i, &info) == MCP_STATUS_OK);
        TU_CHECK_STR(info.name, out_names[i]);
        TU_CHECK_INT(info.kind, MCP_KIND_TENSOR);
        TU_CHECK_INT(info.dtype, MCP_DTYPE_FLOAT);
        TU_CHECK_INT(info.rank, 2);
        TU_CHECK_INT(info.dims[0], -1);
        TU_CHECK_STR(info.dim_params[0], "batch");
        TU_CHECK_INT(info.dims[1], 2);
    }
    TU_CHECK_STATUS(mcp_session_input_info(s, 3, &info), MCP_STATUS_NOT_FOUND, NULL);
    TU_CHECK_STATUS(mcp_session_input_info(s, -1, &info), MCP_STATUS_NOT_FOUND, NULL);
    TU_CHECK_STATUS(mcp_session_output_info(s, 2, &info), MCP_STATUS_NOT_FOUND, NULL);
    mcp_session_destroy(s);
}

static void test_out_names(void)
{
    char msg[1024] = "";
    mb_model *m = mb_example_mlp();
    mcp_session *s = load_model(m, NULL, NULL);
    mb_model_free(m);
    TU_REQUIRE(s != NULL);

    const int64_t xd[] = {4, 3}, od[] = {4, 2};
    mcp_value *x = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, xd, x_rows, msg, sizeof msg);
    TU_REQUIRE(x != NULL);
    float y[8], z[8];
    mb_mlp_reference(&x_rows[0][0], 4, y, z);
    const char *in_names[] = {"X"};

    mcp_value *outs[3] = {NULL, NULL, NULL};
    const char *only_y[] = {"Y"};
    TU_CHECK_STATUS(mcp_session_run(s, 1, in_names, &x, 1, only_y, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
    check_float_tensor(__LINE__, outs[0], 2, od, y);
    TU_CHECK(outs[1] == NULL); /* nothing written past the selection */
    mcp_value_destroy(outs[0]);
    outs[0] = NULL;

    const char *reversed[] = {"Y", "Z"};
    TU_CHECK_STATUS(mcp_session_run(s, 1, in_names, &x, 2, reversed, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
    check_float_tensor(__LINE__, outs[0], 2, od, y);
    check_float_tensor(__LINE__, outs[1], 2, od, z);
    mcp_value_destroy(outs[0]);
    mcp_value_destroy(outs[1]);
    outs[0] = outs[1] = NULL;

    /* The same output twice gives two independent values. */
    const char *y_twice[] = {"Y", "Y"};
    TU_CHECK_STATUS(mcp_session_run(s, 1, in_names, &x, 2, y_twice, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
    check_float_tensor(__LINE__, outs[0], 2, od, y);
    check_float_tensor(__LINE__, outs[1], 2, od, y);
    TU_CHECK(outs[0] != outs[1]);
    mcp_value_destroy(outs[0]);
    mcp_value_destroy(outs[1]);
    outs[0] = outs[1] = NULL;

    const char *y_z_z[] = {"Y", "Z", "Z"};
    TU_CHECK_STATUS(mcp_session_run(s, 1, in_names, &x, 3, y_z_z, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
    check_float_tensor(__LINE__, outs[0], 2, od, y);
    check_float_tensor(__LINE__, outs[1], 2, od, z);
    TU_CHECK(outs[2] != NULL);
    check_float_tensor(__LINE__, outs[2], 2, od, z);
    for (int i = 0; i < 3; i++) mcp_value_destroy(outs[i]);

    mcp_value_destroy(x);
    mcp_session_destroy(s);
}

static void test_file_vs_memory(void)
{
    char path[2048], msg[2048] = "";
    mb_model *m = mb_example_mlp();
    tu_path(path, sizeof path, tmp_dir, "mlp.onnx");
    TU_REQUIRE(mb_write_file(m, path) == 0);
    mcp_session *mem = load_model(m, NULL, NULL);
    mb_model_free(m);
    mcp_session *file = NULL;
    TU_CHECK_STATUS(mcp_session_create_from_file(path, NULL, &file, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (mem) run_and_check_mlp(__LINE__, mem, 3);
    if (file) run_and_check_mlp(__LINE__, file, 3);
    TU_CHECK(file && mcp_session_input_count(file) == 1 && mcp_session_output_count(file) == 2);
    mcp_session_destroy(mem);
    mcp_session_destroy(file);
    unlink(path);

    /* A missing file and a folder fail and name the path. */
    tu_path(path, sizeof path, tmp_dir, "missing.onnx");
    file = (mcp_session *)&file;
    TU_CHECK_STATUS(mcp_session_create_from_file(path, NULL, &file, msg, sizeof msg), MCP_STATUS_NOT_FOUND, msg);
    TU_CHECK(file == NULL);
    TU_CHECK_CONTAINS(msg, "missing.onnx");
    TU_CHECK(mcp_session_create_from_file(tmp_dir, NULL, &file, msg, sizeof msg) != MCP_STATUS_OK);
    TU_CHECK(file == NULL);
    TU_CHECK_CONTAINS(msg, tmp_dir);

    /* A file that is not a model names the file too. */
    tu_path(path, sizeof path, tmp_dir, "garbage.onnx");
    TU_REQUIRE(mb_write_bytes(path, "\xff\xff\xff\xff garbage", 12) == 0);
    TU_CHECK_STATUS(mcp_session_create_from_file(path, NULL, &file, msg, sizeof msg), MCP_STATUS_INVALID_MODEL, msg);
    TU_CHECK_CONTAINS(msg, "garbage.onnx");
    unlink(path);
}

static void test_external_data(void)
{
    char path[2048], sub[2048], msg[2048] = "";
    /* weights.bin: junk, W (24 bytes) at offset 16, junk, B (8 bytes) at 64. */
    uint8_t file[80];
    memset(file, 0xab, sizeof file);
    memcpy(file + 16, mb_mlp_w, sizeof mb_mlp_w);
    memcpy(file + 64, mb_mlp_b, sizeof mb_mlp_b);
    TU_REQUIRE(mb_write_bytes(tu_path(path, sizeof path, tmp_dir, "weights.bin"), file, sizeof file) == 0);
    tu_path(sub, sizeof sub, tmp_dir, "sub");
    TU_REQUIRE(mkdir(sub, 0700) == 0);
    TU_REQUIRE(mb_write_bytes(tu_path(path, sizeof path, sub, "b.bin"), mb_mlp_b, sizeof mb_mlp_b) == 0);

    mb_model *m = mb_example_mlp();
    Onnx__GraphProto *g = mb_main_graph(m);
    TU_REQUIRE(g->n_initializer == 2);
    mb_tensor_set_external(m, g->initializer[0], "weights.bin", 16, 24);
    mb_tensor_set_external(m, g->initializer[1], "weights.bin", 64, 8);
    tu_path(path, sizeof path, tmp_dir, "model.onnx");
    TU_REQUIRE(mb_write_file(m, path) == 0);

    /* The weights really are outside the model now. */
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    bool found = false;
    for (size_t i = 0; i + sizeof mb_mlp_w <= len && !found; i++)
        found = memcmp(buf + i, mb_mlp_w, sizeof mb_mlp_w) == 0;
    TU_CHECK(!found);
    mcp_session *s = NULL;
    TU_CHECK_STATUS(mcp_session_create_from_file(path, NULL, &s, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (s) run_and_check_mlp(__LINE__, s, 4);
    mcp_session_destroy(s);
    s = NULL;
    TU_CHECK_STATUS(mcp_session_create_from_memory(buf, len, tmp_dir, NULL, &s, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (s) run_and_check_mlp(__LINE__, s, 4);
    mcp_session_destroy(s);
    free(buf);
    mb_model_free(m);

    /* Location in a subfolder; no offset key (0) and no length key (rest
     * of the file). */
    m = mb_example_mlp();
    g = mb_main_graph(m);
    mb_tensor_set_external(m, g->initializer[0], "weights.bin", 16, 24);
    mb_tensor_set_external(m, g->initializer[1], "sub/b.bin", -1, -1);
    TU_REQUIRE(mb_write_file(m, path) == 0);
    mb_model_free(m);
    s = NULL;
    TU_CHECK_STATUS(mcp_session_create_from_file(path, NULL, &s, msg, sizeof msg), MCP_STATUS_OK, msg);
    if (s) run_and_check_mlp(__LINE__, s, 2);
    mcp_session_destroy(s);

    const char *files[] = {"sub/b.bin", "sub", "weights.bin", "model.onnx"};
    tu_remove_dir(tmp_dir, files, 4);
    TU_CHECK(mkdir(tmp_dir, 0700) == 0); /* later tests reuse the folder */
}

static void test_graph_shapes(void)
{
    char msg[1024] = "";
    /* Outputs that are a graph input, an initializer, a node output, and an
     * If whose branches return a captured outer value. */
    mb_model *m = mb_model_new(13);
    const int64_t d2[] = {2}, d1[] = {1};
    const float k[2] = {7, 8};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
    mb_add_input(m, NULL, "C", MCP_DTYPE_BOOL, 1, d1, NULL);
    mb_add_initializer(m, NULL, "K", MCP_DTYPE_FLOAT, 1, d2, k, sizeof k);
    mb_add_node(m, NULL, "Neg", "neg", "X", "N");
    Onnx__GraphProto *then_g = mb_new_graph(m, "then");
    mb_add_output(m, then_g, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
    Onnx__GraphProto *else_g = mb_new_graph(m, "else");
    mb_add_node(m, else_g, "Add", "else_add", "N,K", "E");
    mb_add_output(m, else_g, "E", MCP_DTYPE_FLOAT, 1, d2, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "If", "branch", "C", "R");
    mb_attr_graph(m, n, "then_branch", then_g);
    mb_attr_graph(m, n, "else_branch", else_g);
    mb_add_output(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
    mb_add_output(m, NULL, "K", MCP_DTYPE_FLOAT, 1, d2, NULL);
    mb_add_output(m, NULL, "N", MCP_DTYPE_FLOAT, 1, d2, NULL);
    mb_add_output(m, NULL, "R", MCP_DTYPE_FLOAT, 1, d2, NULL);
    mcp_session *s = load_model(m, NULL, NULL);
    mb_model_free(m);
    TU_REQUIRE(s != NULL);

    const float xv[2] = {1.5f, -2};
    for (int c = 0; c < 2; c++) {
        uint8_t cv = (uint8_t)c;
        mcp_value *in[2];
        in[0] = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 1, d2, xv, msg, sizeof msg);
        in[1] = mcp_value_create_tensor(MCP_DTYPE_BOOL, 1, d1, &cv, msg, sizeof msg);
        TU_REQUIRE(in[0] && in[1]);
        const char *names[] = {"C", "X"};
        mcp_value *swapped[] = {in[1], in[0]}; /* inputs by name, any order */
        mcp_value *outs[4] = {NULL};
        TU_CHECK_STATUS(mcp_session_run(s, 2, names, swapped, 0, NULL, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
        const float neg[2] = {-1.5f, 2}, els[2] = {5.5f, 10};
        check_float_tensor(__LINE__, outs[0], 1, d2, xv);
        check_float_tensor(__LINE__, outs[1], 1, d2, k);
        check_float_tensor(__LINE__, outs[2], 1, d2, neg);
        check_float_tensor(__LINE__, outs[3], 1, d2, c ? xv : els);
        /* Outputs are the caller's own copies, not views of inputs or weights. */
        const void *p0 = NULL, *pin = NULL;
        mcp_dtype dt;
        int r;
        const int64_t *dims;
        if (outs[0]) mcp_value_get_tensor(outs[0], &dt, &r, &dims, &p0);
        mcp_value_get_tensor(in[0], &dt, &r, &dims, &pin);
        TU_CHECK(p0 != pin);
        for (int i = 0; i < 4; i++) mcp_value_destroy(outs[i]);
        /* The input is unchanged and still ours. */
        TU_CHECK(((const float *)pin)[0] == 1.5f);
        mcp_value_destroy(in[0]);
        mcp_value_destroy(in[1]);
    }
    mcp_session_destroy(s);
}

/* More than 16 node inputs and outputs (the executor's small-array limit)
 * and 20 graph inputs given in reverse order. */
static void test_many_inputs_outputs(void)
{
    enum { N = 20 };
    char msg[1024] = "", names[N][8], concat_in[N * 8] = "", split_out[N * 8] = "";
    mb_model *m = mb_model_new(13);
    const int64_t d1[] = {1}, dn[] = {N};
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "X%d", i);
        mb_add_input(m, NULL, names[i], MCP_DTYPE_FLOAT, 1, d1, NULL);
        strcat(concat_in, i ? "," : "");
        strcat(concat_in, names[i]);
        char o[8];
        snprintf(o, sizeof o, "S%d", i);
        strcat(split_out, i ? "," : "");
        strcat(split_out, o);
    }
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Concat", "concat", concat_in, "C");
    mb_attr_int(m, n, "axis", 0);
    n = mb_add_node(m, NULL, "Split", "split", "C", split_out);
    mb_attr_int(m, n, "axis", 0);
    mb_add_output(m, NULL, "C", MCP_DTYPE_FLOAT, 1, dn, NULL);
    for (int i = N - 1; i >= 0; i--) {
        char o[8];
        snprintf(o, sizeof o, "S%d", i);
        mb_add_output(m, NULL, o, MCP_DTYPE_FLOAT, 1, d1, NULL);
    }
    mcp_session *s = load_model(m, NULL, NULL);
    mb_model_free(m);
    TU_REQUIRE(s != NULL);
    TU_CHECK_INT(mcp_session_input_count(s), N);
    TU_CHECK_INT(mcp_session_output_count(s), N + 1);

    mcp_value *in[N], *outs[N + 1] = {NULL};
    const char *in_names[N];
    for (int i = 0; i < N; i++) {
        float v = (float)(N - 1 - i);
        in_names[i] = names[N - 1 - i];
        in[i] = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 1, d1, &v, msg, sizeof msg);
    }
    TU_CHECK_STATUS(mcp_session_run(s, N, in_names, in, 0, NULL, outs, msg, sizeof msg), MCP_STATUS_OK, msg);
    float all[N];
    for (int i = 0; i < N; i++) all[i] = (float)i;
    check_float_tensor(__LINE__, outs[0], 1, dn, all);
    for (int k = 1; k <= N; k++) {
        float want = (float)(N - k); /* outputs listed S19 .. S0 */
        check_float_tensor(__LINE__, outs[k], 1, d1, &want);
    }
    for (int k = 0; k <= N; k++) mcp_value_destroy(outs[k]);
    for (int i = 0; i < N; i++) mcp_value_destroy(in[i]);
    mcp_session_destroy(s);
}

static void test_duplicate_graph_output(void)
{
    char msg[1024] = "";
    mb_model *m = mb_model_new(13);
    const int64_t d2[] = {2};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
    mb_add_node(m, NULL, "Neg", "neg", "X", "N");
    mb_add_output(m, NULL, "N", MCP_DTYPE_FLOAT, 1, d2, NULL);
    mb_add_output(m, NULL, "N", MCP_DTYPE_FLOAT, 1, d2, NULL);
    mcp_session *s = load_model(m, NULL, NULL);
    mb_model_free(m);
    TU_REQUIRE(s != NULL);
    const float xv[2] = {1.5f, -2}, neg[2] = {-1.5f, 2};
    mcp_value *x = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 1, d2, xv, msg, sizeof msg);
    TU_REQUIRE(x != NULL);
    const char *names[] = {"X"};
    mcp_value *outs[2] = {NULL, NULL};
    mcp_status st = mcp_session_run(s, 1, names, &x, 0, NULL, outs, msg, sizeof msg);
    TU_CHECK(st == MCP_STATUS_OK || msg[0] != '\0');
    TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
    check_float_tensor(__LINE__, outs[0], 1, d2, neg);
    check_float_tensor(__LINE__, outs[1], 1, d2, neg);
    if (st == MCP_STATUS_OK) {
        check_float_tensor(__LINE__, outs[0], 1, d2, neg);
        check_float_tensor(__LINE__, outs[1], 1, d2, neg);
        TU_CHECK(outs[0] != outs[1]);
    } else {
        TU_CHECK(outs[0] == NULL && outs[1] == NULL);
    }
    mcp_value_destroy(outs[0]);
    mcp_value_destroy(outs[1]);
    mcp_value_destroy(x);
    mcp_session_destroy(s);
}

/* Cast-1 names its target type with a string (ONNX's DataType names, from
 * MCP_DTYPE_MAP); an unknown name fails the load, naming the node and the
 * name. */
static void test_cast1_type_names(void)
{
    char msg[1024] = "";
    const char *const tos[] = {"INT32", "DOUBLE", "SINGLE"};
    for (int k = 0; k < 3; k++) {
        mb_model *m = mb_model_new(1);
        const int64_t d2[] = {2};
        mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
        mb_attr_string(m, mb_add_node(m, NULL, "Cast", "cast", "X", "Y"), "to", tos[k]);
        mb_add_output(m, NULL, "Y", MCP_DTYPE_UNDEFINED, -1, NULL, NULL);
        if (k == 2) {
            size_t len;
            uint8_t *buf = mb_pack(m, &len);
            mb_model_free(m);
            mcp_session *bad = NULL;
            TU_CHECK(mcp_session_create_from_memory(buf, len, NULL, NULL, &bad, msg, sizeof msg) != MCP_STATUS_OK);
            free(buf);
            TU_CHECK(bad == NULL);
            TU_CHECK_CONTAINS(msg, "node 'cast' (Cast)");
            TU_CHECK_CONTAINS(msg, "\"SINGLE\"");
            continue;
        }
        mcp_session *s = load_model(m, NULL, NULL);
        mb_model_free(m);
        TU_REQUIRE(s != NULL);
        const float xv[2] = {1.75f, -2.25f};
        mcp_value *x = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 1, d2, xv, msg, sizeof msg);
        const char *names[] = {"X"};
        mcp_value *out = NULL;
        mcp_status st = mcp_session_run(s, 1, names, &x, 0, NULL, &out, msg, sizeof msg);
        if (k == 0) {
            TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
            mcp_dtype dt = MCP_DTYPE_UNDEFINED;
            const void *data = NULL;
            if (st == MCP_STATUS_OK) mcp_value_get_tensor(out, &dt, NULL, NULL, &data);
            TU_CHECK_INT(dt, MCP_DTYPE_INT32);
            TU_CHECK(data && ((const int32_t *)data)[0] == 1 && ((const int32_t *)data)[1] == -2);
        } else if (k == 1) {
            TU_CHECK_STATUS(st, MCP_STATUS_OK, msg);
            mcp_dtype dt = MCP_DTYPE_UNDEFINED;
            if (st == MCP_STATUS_OK) mcp_value_get_tensor(out, &dt, NULL, NULL, NULL);
            TU_CHECK_INT(dt, MCP_DTYPE_DOUBLE);
        }
        mcp_value_destroy(out);
        mcp_value_destroy(x);
        mcp_session_destroy(s);
    }
}

static void test_api_misc(void)
{
    char msg[1024] = "";
    mcp_session_destroy(NULL);
    mcp_value_destroy(NULL);

    mcp_session_options o = mcp_session_options_default();
    TU_CHECK(o.threads == 0 && o.backend == NULL);

    mb_model *m = mb_example_mlp();
    o.backend = "ref";
    o.threads = 4;
    mcp_session *s = load_model(m, NULL, &o);
    if (s) run_and_check_mlp(__LINE__, s, 4);
    mcp_session_destroy(s);
    o.backend = "auto";
    s = load_model(m, NULL, &o);
    if (s) run_and_check_mlp(__LINE__, s, 1);
    mcp_session_destroy(s);

    o.backend = "bogus";
    size_t len;
    uint8_t *buf = mb_pack(m, &len);
    s = (mcp_session *)&s;
    TU_CHECK_STATUS(mcp_session_create_from_memory(buf, len, NULL, &o, &s, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK(s == NULL);
    TU_CHECK_CONTAINS(msg, "bogus");
    free(buf);
    mb_model_free(m);

    /* "ai.onnx" is the default domain's other name. */
    m = mb_model_new(0);
    mb_add_opset(m, "ai.onnx", 13);
    const int64_t d2[] = {2};
    mb_add_input(m, NULL, "X", MCP_DTYPE_FLOAT, 1, d2, NULL);
    Onnx__NodeProto *n = mb_add_node(m, NULL, "Relu", "r", "X", "Y");
    mb_node_set_domain(m, n, "ai.onnx");
    mb_add_output(m, NULL, "Y", MCP_DTYPE_FLOAT, 1, d2, NULL);
    s = load_model(m, NULL, NULL);
    mb_model_free(m);
    mcp_session_destroy(s);

    /* Values. */
    const int64_t d3[] = {3}, neg[] = {-3};
    const char *strs[] = {"a", "", "\xc3\xa9t\xc3\xa9"};
    mcp_value *v = mcp_value_create_tensor(MCP_DTYPE_STRING, 1, d3, strs, msg, sizeof msg);
    TU_REQUIRE(v != NULL);
    mcp_dtype dt;
    int rank;
    const int64_t *dims;
    const void *data;
    TU_CHECK_INT(mcp_value_get_kind(v), MCP_KIND_TENSOR);
    TU_CHECK_INT(mcp_value_sequence_length(v), -1);
    TU_CHECK_STATUS(mcp_value_get_tensor(v, &dt, &rank, &dims, &data), MCP_STATUS_OK, NULL);
    TU_CHECK(dt == MCP_DTYPE_STRING && rank == 1 && dims[0] == 3);
    const char *const *got = data;
    TU_CHECK_STR(got[0], "a");
    TU_CHECK_STR(got[1], "");
    TU_CHECK_STR(got[2], strs[2]);
    TU_CHECK(got[0] != strs[0]); /* a copy */
    mcp_value_destroy(v);

    v = mcp_value_create_tensor(MCP_DTYPE_INT32, 1, d3, NULL, msg, sizeof msg); /* zeros */
    TU_REQUIRE(v != NULL);
    TU_CHECK_STATUS(mcp_value_get_tensor(v, &dt, &rank, &dims, &data), MCP_STATUS_OK, NULL);
    TU_CHECK(((const int32_t *)data)[0] == 0 && ((const int32_t *)data)[2] == 0);
    mcp_value_destroy(v);

    msg[0] = '\0';
    TU_CHECK(mcp_value_create_tensor(MCP_DTYPE_FLOAT, 1, neg, NULL, msg, sizeof msg) == NULL);
    TU_CHECK_CONTAINS(msg, "negative");
    TU_CHECK(mcp_value_create_tensor(MCP_DTYPE_UNDEFINED, 1, d3, NULL, msg, sizeof msg) == NULL);
    TU_CHECK(msg[0] != '\0');

    v = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 0, NULL, (const float[]){2.5f}, msg, sizeof msg);
    TU_REQUIRE(v != NULL);
    TU_CHECK_STATUS(mcp_value_get_tensor(v, &dt, &rank, &dims, &data), MCP_STATUS_OK, NULL);
    TU_CHECK(rank == 0 && ((const float *)data)[0] == 2.5f);
    mcp_value_destroy(v);

    for (int i = 0; i < MCP_STATUS_COUNT; i++) TU_CHECK(strlen(mcp_status_str((mcp_status)i)) > 0);
    TU_CHECK_STR(MCP_VERSION_STRING, "0.1.0");
}

/* max_tensor_bytes: a node whose output would pass the limit fails the run,
 * naming the node; below the limit the same model runs. */
static void test_max_tensor_bytes(void)
{
    mb_model *m = mb_model_new(13);
    int64_t sd[1] = {1};
    mb_add_input(m, NULL, "shape", MCP_DTYPE_INT64, 1, sd, NULL);
    mb_add_node(m, NULL, "ConstantOfShape", "grow", "shape", "y");
    mb_add_output(m, NULL, "y", MCP_DTYPE_FLOAT, -1, NULL, NULL);
    size_t len;
    uint8_t *bytes = mb_pack(m, &len);
    mb_model_free(m);
    mcp_session_options o = mcp_session_options_default();
    o.max_tensor_bytes = 1 << 20;
    char err[512] = "";
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(bytes, len, NULL, &o, &s, err, sizeof err);
    free(bytes);
    TU_REQUIRE_OK(st, err);
    static const char *const names[1] = {"shape"};
    const int64_t sizes[2] = {1 << 18, (1 << 18) + 1}; /* 1 MiB of floats, then one more */
    for (int i = 0; i < 2; i++) {
        mcp_value *in = mcp_value_create_tensor(MCP_DTYPE_INT64, 1, sd, &sizes[i], err, sizeof err), *out = NULL;
        st = mcp_session_run(s, 1, names, &in, 0, NULL, &out, err, sizeof err);
        if (i == 0) {
            TU_CHECK_STATUS(st, MCP_STATUS_OK, err);
        } else {
            TU_CHECK_STATUS(st, MCP_STATUS_INVALID_ARGUMENT, err);
            TU_CHECK_CONTAINS(err, "grow");
            TU_CHECK_CONTAINS(err, "max_tensor_bytes");
        }
        mcp_value_destroy(in);
        mcp_value_destroy(out);
    }
    mcp_session_destroy(s);
}

int main(void)
{
    if (tu_make_temp_dir(tmp_dir, sizeof tmp_dir, "session") != 0) {
        perror("mkdtemp");
        return 1;
    }
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_mlp_numbers);
    TU_RUN(test_io_info);
    TU_RUN(test_out_names);
    TU_RUN(test_file_vs_memory);
    TU_RUN(test_external_data);
    TU_RUN(test_graph_shapes);
    TU_RUN(test_many_inputs_outputs);
    TU_RUN(test_duplicate_graph_output);
    TU_RUN(test_cast1_type_names);
    TU_RUN(test_api_misc);
    TU_RUN(test_max_tensor_bytes);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    rmdir(tmp_dir);
    return tu_finish("test_session");
}
