/*
 * YAML model descriptors (src/registry/descriptor.c): the seed example,
 * defaults, the batch_size alias, line:column accuracy, every problem
 * reported at once, code-carrying descriptors, path resolution, steps,
 * mcp_descriptor_for_model and mcp_diags_format.
 *
 *   test_descriptor [CORPUS_DIR]
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "registry/registry.h"
#include "test_util.h"
#include "diag_check.h"

static const char *corpus_dir = NULL;

/* Parses text (source path may be NULL); returns the status. */
static mcp_status parse(const char *text, const char *source, mcp_descriptor **d, mcp_diags *diags)
{
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    return mcp_descriptor_parse_yaml(text, strlen(text), source, &defaults, d, diags);
}

static void test_defaults(void)
{
    mcp_descriptor_defaults d = mcp_descriptor_defaults_default();
    TU_CHECK_INT(d.max_batch_size, 32);
    TU_CHECK_INT(d.max_queue_delay_us, 500);
    TU_CHECK_INT(d.max_queue_size, 1024);
    TU_CHECK_INT(d.prefetch_queue_depth, 8);
    TU_CHECK(d.enable_tensor_cache);
    TU_CHECK_INT(d.instance_count, 1);
    TU_CHECK_INT(d.instance_threads, 1);
}

/* The seed example applies as written. */
static void test_seed_example(void)
{
    const char *seed = "name: resnet50-v2-quant\n"
                       "format: onnx\n"
                       "path: ./models/resnet50_int8.onnx\n"
                       "device: cpu\n"
                       "batch_size: 16\n"
                       "precision: int8\n";
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(parse(seed, "/srv/repo/resnet.yaml", &d, &diags), MCP_STATUS_OK, NULL);
    TU_CHECK_INT(diags.count, 0);
    TU_REQUIRE(d != NULL);
    TU_CHECK_STR(d->name, "resnet50-v2-quant");
    TU_CHECK_STR(d->format, "onnx");
    TU_CHECK_STR(d->path, "/srv/repo/models/resnet50_int8.onnx");
    TU_CHECK_STR(d->device, "cpu");
    TU_CHECK_INT(d->max_batch_size, 16);
    TU_CHECK_STR(d->precision, "int8");
    TU_CHECK_STR(d->version, "v1.0.0");
    TU_CHECK_INT(d->semver[0], 1);
    TU_CHECK_INT(d->semver[1], 0);
    TU_CHECK_INT(d->semver[2], 0);
    TU_CHECK_STR(d->source, "/srv/repo/resnet.yaml");
    /* Everything not given comes from the server defaults. */
    TU_CHECK(d->batching.enabled);
    TU_CHECK_INT(d->batching.max_queue_delay_us, 500);
    TU_CHECK_INT(d->batching.max_queue_size, 1024);
    TU_CHECK_INT(d->batching.prefetch_queue_depth, 8);
    TU_CHECK(d->batching.enable_tensor_cache);
    TU_CHECK_INT(d->batching.default_timeout_us, 0);
    TU_CHECK_INT(d->instance_count, 1);
    TU_CHECK_INT(d->instance_threads, 1);
    TU_CHECK_INT(d->n_inputs, 0);
    TU_CHECK_INT(d->n_pre, 0);
    mcp_descriptor_free(d);
    mcp_diags_clear(&diags);
}

static void test_defaults_flow_through(void)
{
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    defaults.max_batch_size = 4;
    defaults.max_queue_delay_us = 77;
    defaults.enable_tensor_cache = false;
    defaults.instance_threads = 3;
    const char *text = "name: m\npath: m.onnx\n";
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(mcp_descriptor_parse_yaml(text, strlen(text), NULL, &defaults, &d, &diags), MCP_STATUS_OK, NULL);
    TU_REQUIRE(d != NULL);
    TU_CHECK_INT(d->max_batch_size, 4);
    TU_CHECK_INT(d->batching.max_queue_delay_us, 77);
    TU_CHECK(!d->batching.enable_tensor_cache);
    TU_CHECK_INT(d->instance_threads, 3);
    TU_CHECK_STR(d->path, "m.onnx");
    mcp_descriptor_free(d);
    /* max_batch_size 0: no batching unless asked (and asking is an error). */
    text = "name: m\npath: m.onnx\nmax_batch_size: 0\n";
    TU_CHECK_STATUS(parse(text, NULL, &d, &diags), MCP_STATUS_OK, NULL);
    TU_REQUIRE(d != NULL);
    TU_CHECK(!d->batching.enabled);
    mcp_descriptor_free(d);
    mcp_diags_clear(&diags);
}

static void test_alias(void)
{
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\nmax_batch_size: 7\n", NULL, &d, &diags), MCP_STATUS_OK, NULL);
    TU_REQUIRE(d != NULL);
    TU_CHECK_INT(d->max_batch_size, 7);
    mcp_descriptor_free(d);
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\nbatch_size: 9\n", NULL, &d, &diags), MCP_STATUS_OK, NULL);
    TU_REQUIRE(d != NULL);
    TU_CHECK_INT(d->max_batch_size, 9);
    mcp_descriptor_free(d);
    /* Both at once: one of them must go, and the message says which is which. */
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\nbatch_size: 9\nmax_batch_size: 7\n", NULL, &d, &diags),
                    MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_CHECK(d == NULL);
    CHECK_DIAG(diags, "batch_size", 3, 1, "alias of max_batch_size");
    mcp_diags_clear(&diags);
}

/* Positions are 1-based line:column of the offending token. */
static void test_line_col(void)
{
    const char *text = "name: m\n"                         /* 1 */
                       "path: m.onnx\n"                    /* 2 */
                       "inputs:\n"                         /* 3 */
                       "  - name: a\n"                     /* 4 */
                       "    dtype: FP32\n"                 /* 5 */
                       "  - name: b\n"                     /* 6 */
                       "    dtype: FLAOT32\n"              /* 7 */
                       "    shape: [1, \"x\", 3]\n"        /* 8 */
                       "batching: {max_queue_delay_us: -3, enabeld: true}\n" /* 9 */
                       "device: 'gpu'\n";                  /* 10 */
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(parse(text, NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_CHECK(d == NULL);
    CHECK_DIAG(diags, "inputs[1].dtype", 7, 12, "unknown dtype 'FLAOT32'");
    CHECK_DIAG(diags, "inputs[1].shape[1]", 8, 16, "expected an integer, got string 'x'");
    CHECK_DIAG(diags, "batching.max_queue_delay_us", 9, 32, "-3 is out of range");
    CHECK_DIAG(diags, "batching.enabeld", 9, 36, "did you mean 'enabled'?");
    CHECK_DIAG(diags, "device", 10, 9, "supported: cpu");
    TU_CHECK_INT(diags.count, 5);
    mcp_diags_clear(&diags);

    /* A syntax error from libfyaml keeps its position too. */
    TU_CHECK_STATUS(parse("name: m\npath: [a, b\n", NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_REQUIRE(diags.count >= 1);
    TU_CHECK_CONTAINS(diags.items[0].message, "YAML syntax error");
    TU_CHECK(diags.items[0].line >= 2);
    mcp_diags_clear(&diags);
    TU_CHECK_STATUS(parse("name: m\nbatching:\n\tenabled: true\n", NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_REQUIRE(diags.count >= 1);
    TU_CHECK_INT(diags.items[0].line, 3);
    TU_CHECK_INT(diags.items[0].col, 1);
    mcp_diags_clear(&diags);
}

/* Every problem at once, not only the first. */
static void test_multiple_errors(void)
{
    const char *text = "name: 'bad name!'\n"      /* 1 */
                       "version: 2\n"            /* 2 */
                       "precision: fp64\n"       /* 3 */
                       "max_batch_size: many\n"  /* 4 */
                       "instances:\n"            /* 5 */
                       "  count: 0\n"            /* 6 */
                       "  threads: 2000\n"       /* 7 */
                       "preprocess:\n"           /* 8 */
                       "  - scale: {}\n"         /* 9 */
                       "  - wobble: {}\n"        /* 10 */
                       "name: again\n";          /* 11 */
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(parse(text, NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    /* Sorted by position: the invalid name first, the duplicate after. */
    CHECK_DIAG(diags, "name", 1, 7, "invalid model name 'bad name!'");
    TU_REQUIRE(diags.count >= 2);
    TU_CHECK_STR(diags.items[diags.count - 1].path, "name");
    TU_CHECK_INT(diags.items[diags.count - 1].line, 11);
    TU_CHECK_CONTAINS(diags.items[diags.count - 1].message, "duplicate key 'name' (first given at line 1, column 1)");
    for (int i = 1; i < diags.count; i++) TU_CHECK(diags.items[i - 1].line <= diags.items[i].line);
    TU_CHECK(diags.count >= 9);
    int named = 0;
    const char *paths[] = {"version", "precision", "max_batch_size", "instances.count", "instances.threads",
                           "preprocess[0].scale", "preprocess[1].wobble", ""};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] - 1; i++) named += find_diag(&diags, paths[i]) != NULL;
    TU_CHECK_INT(named, 7);
    /* The (first) name diag is the invalid name. */
    int name_diags = 0;
    for (int i = 0; i < diags.count; i++) name_diags += strcmp(diags.items[i].path, "name") == 0;
    TU_CHECK_INT(name_diags, 2);
    CHECK_DIAG(diags, "", 1, 1, "missing required key 'path'"); /* the path is the mapping's: the root */
    mcp_diags_clear(&diags);
}

/* No user code runs inside the server; each way of smuggling some in gets
 * a message saying so and what to use instead. */
static void test_code_rejected(void)
{
    const char *cases[][2] = {
        {"name: m\npath: m.onnx\npython: 'import os'\n", "python"},
        {"name: m\npath: m.onnx\nhandler: pkg.mod:fn\n", "handler"},
        {"name: m\npath: m.onnx\npreprocess:\n  - lambda: 'x: x/255'\n", "preprocess[0].lambda"},
        {"name: m\npath: m.onnx\npostprocess:\n  - exec: print(1)\n", "postprocess[0].exec"},
        {"name: m\npath: m.onnx\npreprocess: 'def f(x): return x'\n", "preprocess"},
        {"name: m\npath: m.onnx\npostprocess:\n  - softmax: {script: s.py}\n", "postprocess[0].softmax.script"},
        {"name: m\npath: !!python/object/apply:os.system ['id']\n", "path"},
        {"name: m\npath: m.onnx\npreprocess:\n  - custom_op: {x: 1}\n", "preprocess[0].custom_op"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcp_descriptor *d = NULL;
        mcp_diags diags = {0};
        TU_CHECK_STATUS(parse(cases[i][0], NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, cases[i][1]);
        TU_CHECK(d == NULL);
        const mcp_diag *g = find_diag(&diags, cases[i][1]);
        TU_CHECK(g != NULL);
        if (g) {
            TU_CHECK_CONTAINS(g->message, "no user code runs inside the server");
            /* ... and names the declarative alternative. */
            TU_CHECK(strstr(g->message, "scale") || strstr(g->message, "declarative") || strstr(g->message, "plain"));
            TU_CHECK(g->line > 0);
        } else {
            print_diags(&diags, "test.yaml");
        }
        mcp_diags_clear(&diags);
    }
}

static void test_steps(void)
{
    char dir[512], labels[600], desc[600];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "desc-steps") == 0);
    tu_path(labels, sizeof labels, dir, "labels.txt");
    FILE *f = fopen(labels, "wb");
    TU_REQUIRE(f != NULL);
    fputs("tabby cat\r\ngolden retriever\nparrot", f); /* CRLF and no final newline */
    fclose(f);
    tu_path(desc, sizeof desc, dir, "model.yaml");
    const char *text = "name: clf\n"
                       "path: ./nets/clf.onnx\n"
                       "inputs: [{name: img, dtype: uint8, shape: [-1, 32, 32, 3], graph_name: 'input:0'}]\n"
                       "outputs: [{name: prob}]\n"
                       "preprocess:\n"
                       "  - cast: {dtype: FP32}\n"
                       "  - scale: {factor: 0.5}\n"
                       "  - normalize: {mean: [1, 2, 3], std: [0.5, 0.25, 4]}\n"
                       "  - transpose: {layout: NHWC->NCHW}\n"
                       "  - transpose: {perm: [1, 0]}\n"
                       "postprocess:\n"
                       "  - softmax: {}\n"
                       "  - topk: {k: 2, labels: labels.txt}\n";
    f = fopen(desc, "wb");
    TU_REQUIRE(f != NULL);
    fputs(text, f);
    fclose(f);
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    TU_CHECK_STATUS(mcp_descriptor_load_file(desc, &defaults, &d, &diags), MCP_STATUS_OK, NULL);
    if (diags.count) print_diags(&diags, "test.yaml");
    if (d) {
        char want[700];
        snprintf(want, sizeof want, "%s/nets/clf.onnx", dir);
        TU_CHECK_STR(d->path, want);
        TU_CHECK_STR(d->source, desc);
        TU_CHECK_INT(d->n_inputs, 1);
        TU_CHECK_STR(d->inputs[0].name, "img");
        TU_CHECK_STR(d->inputs[0].graph_name, "input:0");
        TU_CHECK_INT(d->inputs[0].dtype, MCP_DTYPE_UINT8);
        TU_CHECK_INT(d->inputs[0].rank, 4);
        TU_CHECK_INT(d->inputs[0].dims[0], -1);
        TU_CHECK_INT(d->inputs[0].dims[3], 3);
        TU_CHECK_INT(d->outputs[0].rank, -1);
        TU_CHECK(d->outputs[0].graph_name == NULL);
        TU_CHECK_INT(d->outputs[0].dtype, MCP_DTYPE_UNDEFINED);
        TU_REQUIRE(d->n_pre == 5 && d->n_post == 2);
        TU_CHECK_INT(d->pre[0].kind, MCP_STEP_CAST);
        TU_CHECK_INT(d->pre[0].dtype, MCP_DTYPE_FLOAT);
        TU_CHECK_INT(d->pre[1].kind, MCP_STEP_SCALE);
        TU_CHECK_NEAR(d->pre[1].factor, 0.5, 0);
        TU_CHECK_INT(d->pre[2].kind, MCP_STEP_NORMALIZE);
        TU_CHECK_INT(d->pre[2].n_values, 3);
        TU_CHECK_NEAR(d->pre[2].mean[2], 3, 0);
        TU_CHECK_NEAR(d->pre[2].std[1], 0.25, 0);
        TU_CHECK_INT(d->pre[2].axis, 1);
        TU_CHECK_INT(d->pre[3].kind, MCP_STEP_TRANSPOSE);
        TU_CHECK_INT(d->pre[3].n_perm, 4);
        TU_CHECK_INT(d->pre[3].perm[0], 0);
        TU_CHECK_INT(d->pre[3].perm[1], 3);
        TU_CHECK_INT(d->pre[3].perm[2], 1);
        TU_CHECK_INT(d->pre[3].perm[3], 2);
        TU_CHECK_INT(d->pre[4].n_perm, 2);
        TU_CHECK_INT(d->pre[4].perm[0], 1);
        TU_CHECK_INT(d->post[0].kind, MCP_STEP_SOFTMAX);
        TU_CHECK_INT(d->post[0].axis, -1);
        TU_CHECK_INT(d->post[1].kind, MCP_STEP_TOPK);
        TU_CHECK_INT(d->post[1].k, 2);
        TU_CHECK_STR(d->post[1].labels_path, labels);
        TU_CHECK_INT(d->post[1].n_labels, 3);
        if (d->post[1].n_labels == 3) {
            TU_CHECK_STR(d->post[1].labels[0], "tabby cat");
            TU_CHECK_STR(d->post[1].labels[2], "parrot");
        }
    }
    mcp_descriptor_free(d);
    mcp_diags_clear(&diags);
    const char *names[] = {"labels.txt", "model.yaml"};
    tu_remove_dir(dir, names, 2);
}

static void test_path_resolution(void)
{
    const struct {
        const char *source, *path, *want;
    } cases[] = {
        {"/srv/repo/m.yaml", "./models/x.onnx", "/srv/repo/models/x.onnx"},
        {"/srv/repo/m.yaml", "models//x.onnx", "/srv/repo/models/x.onnx"},
        {"/srv/repo/m.yaml", "/abs/x.onnx", "/abs/x.onnx"},
        {"/srv/repo/m.yaml", "../shared/x.onnx", "/srv/repo/../shared/x.onnx"},
        {"repo/sub/m.yaml", "./x.onnx", "repo/sub/x.onnx"},
        {"m.yaml", "./models/x.onnx", "models/x.onnx"},
        {"/m.yaml", "x.onnx", "/x.onnx"},
        {NULL, "./x.onnx", "x.onnx"},
        {NULL, "a/./b/x.onnx", "a/b/x.onnx"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "name: m\npath: '%s'\n", cases[i].path);
        mcp_descriptor *d = NULL;
        mcp_diags diags = {0};
        TU_CHECK_STATUS(parse(text, cases[i].source, &d, &diags), MCP_STATUS_OK, cases[i].path);
        if (d) TU_CHECK_STR(d->path, cases[i].want);
        mcp_descriptor_free(d);
        mcp_diags_clear(&diags);
    }
}

static void test_scalars(void)
{
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    /* YAML 1.2 core schema: 0x/0o integers, integral floats count as integers
     * (as in JSON Schema), quoted numbers are strings. */
    const char *ok = "name: m\npath: m.onnx\nmax_batch_size: 0x10\nbatching: {max_queue_delay_us: 0o17, "
                     "max_queue_size: 1e3, enabled: True}\nversion: v0.10.200\n";
    TU_CHECK_STATUS(parse(ok, NULL, &d, &diags), MCP_STATUS_OK, NULL);
    if (diags.count) print_diags(&diags, "test.yaml");
    if (d) {
        TU_CHECK_INT(d->max_batch_size, 16);
        TU_CHECK_INT(d->batching.max_queue_delay_us, 15);
        TU_CHECK_INT(d->batching.max_queue_size, 1000);
        TU_CHECK(d->batching.enabled);
        TU_CHECK_INT(d->semver[1], 10);
        TU_CHECK_INT(d->semver[2], 200);
    }
    mcp_descriptor_free(d);
    const char *bad = "name: 42\npath: null\nmax_batch_size: 99999999999999999999999\nbatching: {enabled: yes}\n";
    TU_CHECK_STATUS(parse(bad, NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    CHECK_DIAG(diags, "name", 1, 7, "expected a model name, got integer 42");
    CHECK_DIAG(diags, "path", 2, 7, "got nothing (null)");
    CHECK_DIAG(diags, "max_batch_size", 3, 17, "out of range");
    CHECK_DIAG(diags, "batching.enabled", 4, 21, "expected true or false, got string 'yes'");
    mcp_diags_clear(&diags);
}

/* Single-quoted scalars are decoded by our own code (libfyaml 0.7.12 leaks
 * on '' escapes): escapes and line folding as YAML 1.2 says. */
static void test_single_quoted(void)
{
    const char *text = "name: 'm'\n"
                       "path: 'a b/x''y.onnx'\n"
                       "inputs:\n"
                       "  - name: 'one\n"
                       "      two  \n"
                       "\n"
                       "      three'\n"
                       "    graph_name: ''''''''''''''''''''''''''''''''''''''''''''''''\n"
                       "  - {name: 'it''s', graph_name: ''}\n";
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(parse(text, NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    /* The empty graph_name is the only problem, at its opening quote. */
    TU_CHECK_INT(diags.count, 1);
    if (diags.count != 1) print_diags(&diags, "test.yaml");
    CHECK_DIAG(diags, "inputs[1].graph_name", 9, 33, "got an empty string");
    mcp_diags_clear(&diags);
    char fixed[1024];
    snprintf(fixed, sizeof fixed, "%.*s'x'}\n", (int)(strstr(text, "''}") - text), text);
    TU_CHECK_STATUS(parse(fixed, NULL, &d, &diags), MCP_STATUS_OK, NULL);
    if (d) {
        TU_CHECK_STR(d->path, "a b/x'y.onnx");
        TU_CHECK_STR(d->inputs[0].name, "one two\nthree");
        TU_CHECK_STR(d->inputs[0].graph_name, "'''''''''''''''''''''''");
        TU_CHECK_STR(d->inputs[1].name, "it's");
        TU_CHECK_STR(d->inputs[1].graph_name, "x");
    }
    mcp_descriptor_free(d);
    mcp_diags_clear(&diags);
}

static void test_empty_and_odd_inputs(void)
{
    const char *cases[] = {"", "   \n# only a comment\n", "[1, 2]\n", "just a string\n", "~\n", "name: m\n---\nname: n\n"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcp_descriptor *d = NULL;
        mcp_diags diags = {0};
        TU_CHECK_STATUS(parse(cases[i], NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, cases[i]);
        TU_CHECK(d == NULL);
        TU_CHECK(diags.count > 0);
        mcp_diags_clear(&diags);
    }
    /* Embedded NUL byte. */
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    TU_CHECK_STATUS(mcp_descriptor_parse_yaml("name: m\npath: a\0b\n", 17, NULL, &defaults, &d, &diags),
                    MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_REQUIRE(diags.count == 1);
    TU_CHECK_INT(diags.items[0].line, 2);
    TU_CHECK_INT(diags.items[0].col, 8);
    mcp_diags_clear(&diags);
    /* Malformed UTF-8 is refused before libfyaml sees it (its scanner can
     * loop forever on such bytes in a directive line). */
    const char *bad_utf8 = "name: m\n%a\x93\n";
    TU_CHECK_STATUS(parse(bad_utf8, NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_REQUIRE(diags.count == 1);
    TU_CHECK_INT(diags.items[0].line, 2);
    TU_CHECK_INT(diags.items[0].col, 3);
    TU_CHECK_CONTAINS(diags.items[0].message, "not valid UTF-8 (byte 0x93");
    mcp_diags_clear(&diags);
    /* A missing file. */
    TU_CHECK_STATUS(mcp_descriptor_load_file("/nonexistent/model.yaml", &defaults, &d, &diags), MCP_STATUS_NOT_FOUND,
                    NULL);
    TU_REQUIRE(diags.count == 1);
    TU_CHECK_CONTAINS(diags.items[0].message, "/nonexistent/model.yaml");
    mcp_diags_clear(&diags);
}

static void test_for_model(void)
{
    char dir[512], p[700];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "desc-model") == 0);
    tu_path(p, sizeof p, dir, "resnet50.onnx");
    FILE *f = fopen(p, "wb");
    TU_REQUIRE(f != NULL);
    fclose(f);
    char odd[700];
    tu_path(odd, sizeof odd, dir, "my model+v2.onnx");
    f = fopen(odd, "wb");
    TU_REQUIRE(f != NULL);
    fclose(f);
    char msg[512] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_descriptor *d = NULL;
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    TU_CHECK_STATUS(mcp_descriptor_for_model(p, &defaults, &d, &err), MCP_STATUS_OK, msg);
    if (d) {
        TU_CHECK_STR(d->name, "resnet50");
        TU_CHECK_STR(d->version, "v1.0.0");
        TU_CHECK_STR(d->path, p);
        TU_CHECK_STR(d->format, "onnx");
        TU_CHECK_STR(d->device, "cpu");
        TU_CHECK_INT(d->max_batch_size, 32);
        TU_CHECK(d->batching.enabled);
        TU_CHECK_INT(d->batching.prefetch_queue_depth, 8);
    }
    mcp_descriptor_free(d);
    TU_CHECK_STATUS(mcp_descriptor_for_model(odd, &defaults, &d, &err), MCP_STATUS_OK, msg);
    if (d) TU_CHECK_STR(d->name, "my_model_v2");
    mcp_descriptor_free(d);
    TU_CHECK_STATUS(mcp_descriptor_for_model("/nonexistent/x.onnx", &defaults, &d, &err), MCP_STATUS_NOT_FOUND, msg);
    TU_CHECK(d == NULL);
    TU_CHECK_CONTAINS(msg, "/nonexistent/x.onnx");
    TU_CHECK_STATUS(mcp_descriptor_for_model(dir, &defaults, &d, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    const char *names[] = {"resnet50.onnx", "my model+v2.onnx"};
    tu_remove_dir(dir, names, 2);
}

static void test_diags_format(void)
{
    mcp_diags d = {0};
    mcp_diags_add(&d, "batching.max_queue_delay_us", 7, 23, "%d is out of range", -5);
    mcp_diags_add(&d, "", 0, 0, "cannot open '%s'", "x");
    mcp_diags_add(&d, NULL, 3, 1, "no path");
    char buf[512];
    mcp_diags_format(&d, "m.yaml", buf, sizeof buf);
    TU_CHECK_STR(buf, "m.yaml:7:23: batching.max_queue_delay_us: -5 is out of range\n"
                      "m.yaml: cannot open 'x'\n"
                      "m.yaml:3:1: no path\n");
    mcp_diags_format(&d, NULL, buf, sizeof buf);
    TU_CHECK_STR(buf, "7:23: batching.max_queue_delay_us: -5 is out of range\ncannot open 'x'\n3:1: no path\n");
    /* Truncation always leaves a terminated string. */
    char small[16];
    memset(small, 'x', sizeof small);
    mcp_diags_format(&d, "m.yaml", small, sizeof small);
    TU_CHECK_INT(strlen(small), sizeof small - 1);
    TU_CHECK(strncmp(small, "m.yaml:7:23: ba", 15) == 0);
    mcp_diags_format(&d, "m.yaml", small, 0); /* no room: nothing written */
    mcp_diags_clear(&d);
    TU_CHECK_INT(d.count, 0);
    mcp_diags_clear(&d); /* twice is fine */
    /* The list is bounded: a hostile file cannot grow it forever. */
    for (int i = 0; i < 5000; i++) mcp_diags_add(&d, "k", i + 1, 1, "problem %d", i);
    TU_CHECK(d.count <= 1000);
    TU_CHECK_CONTAINS(d.items[d.count - 1].message, "too many problems");
    mcp_diags_clear(&d);
}

/* Damaged versions of a full descriptor: never a crash, and every failure
 * explains itself. */
static void test_mutations(void)
{
    const char *base = "name: resnet50\nversion: v2.1.0\npath: m.onnx\nmax_batch_size: 32\n"
                       "inputs:\n  - {name: image, dtype: FP32, shape: [-1, 3, 224, 224]}\n"
                       "batching: {preferred_batch_sizes: [8, 16], max_queue_delay_us: 100}\n"
                       "instances: {count: 2, threads: 2}\n"
                       "preprocess:\n  - scale: {factor: 0.5}\n  - normalize: {mean: [1, 2, 3], std: [1, 2, 3]}\n"
                       "  - transpose: {layout: NHWC->NCHW}\n"
                       "postprocess:\n  - softmax: {axis: 1}\n";
    size_t n = strlen(base);
    char buf[1024];
    uint64_t rng = 12345;
    const char alphabet[] = "{}[]:,-#&*!|>'\"\n\t 0123456789abcxyz.~?";
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, base, n + 1);
        size_t len = n;
        int edits = 1 + (int)(tu_rand(&rng) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(tu_rand(&rng) % len);
            switch (tu_rand(&rng) % 3) {
            case 0: buf[at] = alphabet[tu_rand(&rng) % (sizeof alphabet - 1)]; break;
            case 1: memmove(buf + at, buf + at + 1, len - at), len--; break;
            default:
                if (len + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, len - at + 1);
                    buf[at] = alphabet[tu_rand(&rng) % (sizeof alphabet - 1)];
                    len++;
                }
            }
        }
        mcp_descriptor *d = NULL;
        mcp_diags diags = {0};
        mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
        mcp_status st = mcp_descriptor_parse_yaml(buf, len, NULL, &defaults, &d, &diags);
        if (st == MCP_STATUS_OK) {
            ok++;
            TU_CHECK(d != NULL && diags.count == 0);
        } else {
            bad++;
            TU_CHECK(d == NULL && diags.count > 0);
        }
        mcp_descriptor_free(d);
        mcp_diags_clear(&diags);
    }
    TU_CHECK(ok > 0 && bad > 0);
}

/* The monitoring section: its values, its defaults, no section at all, and
 * every bad field named with its line:column. */
static void test_monitoring(void)
{
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\n", NULL, &d, &diags), MCP_STATUS_OK, NULL);
    TU_REQUIRE(d != NULL);
    TU_CHECK(!d->monitoring.present);
    mcp_descriptor_free(d);
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\nmonitoring: {}\n", NULL, &d, &diags), MCP_STATUS_OK, NULL);
    TU_REQUIRE(d != NULL);
    TU_CHECK(d->monitoring.present);
    TU_CHECK_NEAR(d->monitoring.sample_rate, 0.1, 0);
    TU_CHECK_INT(d->monitoring.window, 2000);
    TU_CHECK_NEAR(d->monitoring.threshold, 0.3, 0);
    TU_CHECK_INT(d->monitoring.min_samples, 500);
    TU_CHECK_INT(d->monitoring.classifier, MCP_CLASSIFIER_AUTO);
    TU_CHECK(!d->monitoring.inputs);
    TU_CHECK_INT(d->monitoring.n_outputs, 0);
    mcp_descriptor_free(d);
    const char *text = "name: m\n"
                       "path: m.onnx\n"
                       "outputs: [{name: probs}, {name: logits}]\n"
                       "monitoring:\n"
                       "  sample_rate: 0.25\n"
                       "  window: 400\n"
                       "  threshold: 0.2\n"
                       "  min_samples: 100\n"
                       "  classifier: true\n"
                       "  inputs: true\n"
                       "  outputs: [logits, probs]\n";
    TU_CHECK_STATUS(parse(text, NULL, &d, &diags), MCP_STATUS_OK, NULL);
    TU_REQUIRE(d != NULL);
    TU_CHECK_NEAR(d->monitoring.sample_rate, 0.25, 0);
    TU_CHECK_INT(d->monitoring.window, 400);
    TU_CHECK_NEAR(d->monitoring.threshold, 0.2, 0);
    TU_CHECK_INT(d->monitoring.min_samples, 100);
    TU_CHECK_INT(d->monitoring.classifier, MCP_CLASSIFIER_ON);
    TU_CHECK(d->monitoring.inputs);
    TU_REQUIRE(d->monitoring.n_outputs == 2);
    TU_CHECK_STR(d->monitoring.outputs[0], "logits");
    TU_CHECK_STR(d->monitoring.outputs[1], "probs");
    mcp_descriptor_free(d);
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\nmonitoring: {classifier: false}\n", NULL, &d, &diags), MCP_STATUS_OK,
                    NULL);
    TU_REQUIRE(d != NULL);
    TU_CHECK_INT(d->monitoring.classifier, MCP_CLASSIFIER_OFF);
    mcp_descriptor_free(d);

    text = "name: m\n"                                    /* 1 */
           "path: m.onnx\n"                               /* 2 */
           "outputs: [{name: probs}]\n"                   /* 3 */
           "monitoring:\n"                                /* 4 */
           "  sample_rate: -0.5\n"                        /* 5 */
           "  window: 5\n"                                /* 6 */
           "  threshold: 1.5\n"                           /* 7 */
           "  min_samples: many\n"                        /* 8 */
           "  classifier: 'true'\n"                       /* 9 */
           "  inputs: 1\n"                                /* 10 */
           "  outputs: [probs, logits, probs]\n"          /* 11 */
           "  sample_rat: 1\n";                           /* 12 */
    TU_CHECK_STATUS(parse(text, NULL, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_CHECK(d == NULL);
    CHECK_DIAG(diags, "monitoring.sample_rate", 5, 16, "-0.5 is out of range (0..1)");
    CHECK_DIAG(diags, "monitoring.window", 6, 11, "5 is out of range (10..10000)");
    CHECK_DIAG(diags, "monitoring.threshold", 7, 14, "1.5 is out of range (0..1]");
    CHECK_DIAG(diags, "monitoring.min_samples", 8, 16, "expected an integer, got string 'many'");
    CHECK_DIAG(diags, "monitoring.classifier", 9, 15, "'true' is not supported; supported: auto");
    CHECK_DIAG(diags, "monitoring.inputs", 10, 11, "expected true or false");
    CHECK_DIAG(diags, "monitoring.outputs[1]", 11, 20, "'logits' is not a declared output (outputs: probs)");
    CHECK_DIAG(diags, "monitoring.outputs[2]", 11, 28, "output 'probs' is listed twice");
    CHECK_DIAG(diags, "monitoring.sample_rat", 12, 3, "did you mean 'sample_rate'?");
    TU_CHECK_INT(diags.count, 9);
    mcp_diags_clear(&diags);

    /* min_samples above the window, whichever of the two was given. */
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\nmonitoring:\n  min_samples: 900\n  window: 600\n", NULL, &d, &diags),
                    MCP_STATUS_INVALID_ARGUMENT, NULL);
    CHECK_DIAG(diags, "monitoring.min_samples", 4, 16, "min_samples 900 is above window 600");
    mcp_diags_clear(&diags);
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\nmonitoring:\n  window: 100\n", NULL, &d, &diags),
                    MCP_STATUS_INVALID_ARGUMENT, NULL);
    CHECK_DIAG(diags, "monitoring.window", 4, 11, "min_samples 500 is above window 100");
    mcp_diags_clear(&diags);
    /* An empty list, a list that is not one, a generative model. */
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\nmonitoring: {outputs: []}\n", NULL, &d, &diags),
                    MCP_STATUS_INVALID_ARGUMENT, NULL);
    CHECK_DIAG(diags, "monitoring.outputs", 3, 14, "an empty list watches nothing");
    mcp_diags_clear(&diags);
    TU_CHECK_STATUS(parse("name: m\npath: m.onnx\nmonitoring: {outputs: probs}\n", NULL, &d, &diags),
                    MCP_STATUS_INVALID_ARGUMENT, NULL);
    CHECK_DIAG(diags, "monitoring.outputs", 3, 23, "expected a list of output names");
    mcp_diags_clear(&diags);
    TU_CHECK_STATUS(parse("name: m\nformat: gguf\npath: m.gguf\nmonitoring: {}\n", NULL, &d, &diags),
                    MCP_STATUS_INVALID_ARGUMENT, NULL);
    CHECK_DIAG(diags, "monitoring", 4, 1, "does not apply to a generative model");
    mcp_diags_clear(&diags);
}

/* Every corpus descriptor under valid/ loads; the seed example among them. */
static void test_corpus_valid(void)
{
    if (!corpus_dir) return;
    char p[1024];
    snprintf(p, sizeof p, "%s/valid/seed.yaml", corpus_dir);
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    TU_CHECK_STATUS(mcp_descriptor_load_file(p, &defaults, &d, &diags), MCP_STATUS_OK, p);
    if (d) TU_CHECK_INT(d->max_batch_size, 16);
    mcp_descriptor_free(d);
    mcp_diags_clear(&diags);
}

int main(int argc, char **argv)
{
    if (argc > 1) corpus_dir = argv[1];
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_defaults);
    TU_RUN(test_seed_example);
    TU_RUN(test_defaults_flow_through);
    TU_RUN(test_alias);
    TU_RUN(test_line_col);
    TU_RUN(test_multiple_errors);
    TU_RUN(test_code_rejected);
    TU_RUN(test_steps);
    TU_RUN(test_path_resolution);
    TU_RUN(test_scalars);
    TU_RUN(test_single_quoted);
    TU_RUN(test_empty_and_odd_inputs);
    TU_RUN(test_for_model);
    TU_RUN(test_diags_format);
    TU_RUN(test_mutations);
    TU_RUN(test_monitoring);
    TU_RUN(test_corpus_valid);
    /* Everything allocated through mcp_malloc was freed. */
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("registry_descriptor");
}
