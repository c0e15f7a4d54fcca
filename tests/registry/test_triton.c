/*
 * Triton model folders (src/registry/triton.c): config.pbtxt parsing
 * (dynamic_batching, instance_group, version_policy, input/output dims,
 * warnings for unknown fields), version folder choice, and syntax errors
 * with line:column.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "registry/descriptor_util.h"
#include "registry/registry.h"
#include "test_util.h"
#include "diag_check.h"

static const char *sample_config =
    "# Triton's densenet example, plus settings we honour.\n" /* 1 */
    "name: \"densenet_onnx\"\n"                                 /* 2 */
    "platform: \"onnxruntime_onnx\"\n"                          /* 3 */
    "max_batch_size: 8\n"                                       /* 4 */
    "version_policy: { latest { num_versions: 1 } }\n"          /* 5 */
    "input [\n"                                                 /* 6 */
    "  {\n"                                                     /* 7 */
    "    name: \"data_0\"\n"                                    /* 8 */
    "    data_type: TYPE_FP32\n"                                /* 9 */
    "    format: FORMAT_NCHW\n"                                 /* 10 */
    "    dims: [ 3, 224, 224 ]\n"                               /* 11 */
    "  }\n"                                                     /* 12 */
    "]\n"                                                       /* 13 */
    "output {\n"                                                /* 14 */
    "  name: \"fc6_1\"\n"                                       /* 15 */
    "  data_type: TYPE_FP32\n"                                  /* 16 */
    "  dims: [ 1000 ]\n"                                        /* 17 */
    "}\n"                                                       /* 18 */
    "instance_group [ { kind: KIND_CPU, count: 2 }, { count: 1 } ]\n" /* 19 */
    "dynamic_batching {\n"                                      /* 20 */
    "  preferred_batch_size: [ 4, 8 ]\n"                        /* 21 */
    "  max_queue_delay_microseconds: 100\n"                     /* 22 */
    "  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 5000 max_queue_size: 64 }\n" /* 23 */
    "}\n"                                                       /* 24 */
    "parameters { key: \"intra_op_thread_count\" value: { string_value: \"1\" } }\n" /* 25 */
    "model_warmup [ { name: \"w\" batch_size: 1 } ]\n"          /* 26 */
    "flux_capacitor: 88\n";                                     /* 27 */

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static mcp_status parse_text(const char *text, mcp_descriptor **d, mcp_diags *diags)
{
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    return mcp__triton_parse_config(text, strlen(text), NULL, &defaults, d, diags);
}

/* A model folder: root/NAME/config.pbtxt and version folders. */
typedef struct folder {
    char root[512], model[600], files[16][700];
    int n_files;
} folder;

static int folder_add(folder *f, const char *rel, const char *content /* NULL = a folder */)
{
    if (f->n_files >= 16) return -1;
    char *p = f->files[f->n_files++];
    snprintf(p, 700, "%s/%s", f->model, rel);
    return content ? write_file(p, content) : mkdir(p, 0755);
}

static void folder_remove(folder *f)
{
    for (int i = f->n_files - 1; i >= 0; i--)
        if (remove(f->files[i]) != 0) fprintf(stderr, "cannot remove %s\n", f->files[i]);
    rmdir(f->model);
    rmdir(f->root);
}

static int folder_make(folder *f, const char *name)
{
    memset(f, 0, sizeof *f);
    if (tu_make_temp_dir(f->root, sizeof f->root, "triton") != 0) return -1;
    snprintf(f->model, sizeof f->model, "%s/%s", f->root, name);
    return mkdir(f->model, 0755);
}

static void test_sample_folder(void)
{
    folder f;
    TU_REQUIRE(folder_make(&f, "densenet_onnx") == 0);
    TU_REQUIRE(folder_add(&f, "config.pbtxt", sample_config) == 0);
    folder_add(&f, "1", NULL);
    folder_add(&f, "1/model.onnx", "");
    folder_add(&f, "3", NULL);
    folder_add(&f, "3/model.onnx", "");
    folder_add(&f, "10", NULL); /* highest, but has no model file: policy latest picks it and fails */
    folder_add(&f, "notes", NULL);

    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    TU_CHECK_STATUS(mcp_descriptor_load_triton(f.model, &defaults, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_CHECK(d == NULL);
    const mcp_diag *g = find_diag(&diags, "");
    TU_CHECK(g != NULL);
    if (g) TU_CHECK_CONTAINS(g->message, "/10/model.onnx' not found");
    mcp_diags_clear(&diags);

    /* With the empty folder gone, version 10 is no candidate: 3 is. */
    rmdir(f.files[f.n_files - 2]);
    f.files[f.n_files - 2][0] = '\0';
    memmove(f.files[f.n_files - 2], f.files[f.n_files - 1], sizeof f.files[0]);
    f.n_files--;
    TU_CHECK_STATUS(mcp_descriptor_load_triton(f.model, &defaults, &d, &diags), MCP_STATUS_OK, NULL);
    if (!d) {
        print_diags(&diags, "config.pbtxt");
        mcp_diags_clear(&diags);
        folder_remove(&f);
        return;
    }
    char want[800];
    snprintf(want, sizeof want, "%s/3/model.onnx", f.model);
    TU_CHECK_STR(d->path, want);
    snprintf(want, sizeof want, "%s/config.pbtxt", f.model);
    TU_CHECK_STR(d->source, want);
    TU_CHECK_STR(d->name, "densenet_onnx");
    TU_CHECK_STR(d->version, "3");
    TU_CHECK_INT(d->semver[0], 3);
    TU_CHECK_STR(d->format, "triton");
    TU_CHECK_INT(d->max_batch_size, 8);
    TU_REQUIRE(d->n_inputs == 1 && d->n_outputs == 1);
    TU_CHECK_STR(d->inputs[0].name, "data_0");
    TU_CHECK_INT(d->inputs[0].dtype, MCP_DTYPE_FLOAT);
    /* dims leave out the batch dimension; the descriptor has it. */
    TU_CHECK_INT(d->inputs[0].rank, 4);
    TU_CHECK_INT(d->inputs[0].dims[0], -1);
    TU_CHECK_INT(d->inputs[0].dims[1], 3);
    TU_CHECK_INT(d->inputs[0].dims[3], 224);
    TU_CHECK_STR(d->outputs[0].name, "fc6_1");
    TU_CHECK_INT(d->outputs[0].rank, 2);
    TU_CHECK_INT(d->outputs[0].dims[1], 1000);
    TU_CHECK(d->batching.enabled);
    TU_CHECK_INT(d->batching.n_preferred, 2);
    TU_CHECK_INT(d->batching.preferred[1], 8);
    TU_CHECK_INT(d->batching.max_queue_delay_us, 100);
    TU_CHECK_INT(d->batching.default_timeout_us, 5000);
    TU_CHECK_INT(d->batching.max_queue_size, 64);
    TU_CHECK_INT(d->batching.prefetch_queue_depth, 8); /* server default */
    TU_CHECK_INT(d->instance_count, 3);
    /* Warnings: the unknown field by name and position, and the format. */
    CHECK_DIAG(diags, "flux_capacitor", 27, 1, "warning: unknown field 'flux_capacitor'");
    CHECK_DIAG(diags, "input[0].format", 10, 5, "warning: ");
    for (int i = 0; i < diags.count; i++) TU_CHECK(strncmp(diags.items[i].message, "warning: ", 9) == 0);
    mcp_descriptor_free(d);
    mcp_diags_clear(&diags);
    folder_remove(&f);
}

static void test_version_policy(void)
{
    folder f;
    TU_REQUIRE(folder_make(&f, "m") == 0);
    folder_add(&f, "1", NULL);
    folder_add(&f, "1/model.onnx", "");
    folder_add(&f, "2", NULL);
    folder_add(&f, "2/model.onnx", "");
    folder_add(&f, "2/weights.onnx", "");
    const struct {
        const char *config, *version, *file;
        mcp_status st;
        const char *needle;
    } cases[] = {
        {"", "2", "2/model.onnx", MCP_STATUS_OK, NULL},
        {"version_policy { specific { versions: [1] } }", "1", "1/model.onnx", MCP_STATUS_OK, NULL},
        {"version_policy { specific { versions: 1 versions: 4 } }", "1", "1/model.onnx", MCP_STATUS_OK, NULL},
        {"version_policy { latest { num_versions: 2 } }", "2", "2/model.onnx", MCP_STATUS_OK, NULL},
        {"version_policy: { all: {} }", "2", "2/model.onnx", MCP_STATUS_OK, NULL},
        {"default_model_filename: \"weights.onnx\"", "2", "2/weights.onnx", MCP_STATUS_OK, NULL},
        {"version_policy { specific { versions: [1] } }\ndefault_model_filename: \"weights.onnx\"", NULL, NULL,
         MCP_STATUS_INVALID_ARGUMENT, "1/weights.onnx' not found"},
        {"default_model_filename: \"../1/model.onnx\"", NULL, NULL, MCP_STATUS_INVALID_ARGUMENT, "plain file name"},
        {"version_policy { specific { versions: [7] } }", NULL, NULL, MCP_STATUS_INVALID_ARGUMENT,
         "none of the versions"},
        {"version_policy { newest { } }", NULL, NULL, MCP_STATUS_INVALID_ARGUMENT, "unknown version policy 'newest'"},
        {"version_policy { latest { num_versions: 1 } all { } }", NULL, NULL, MCP_STATUS_INVALID_ARGUMENT,
         "exactly one of"},
        {"name: \"other\"", NULL, NULL, MCP_STATUS_INVALID_ARGUMENT, "does not match the model folder 'm'"},
    };
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/config.pbtxt", f.model);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TU_REQUIRE(write_file(cfg, cases[i].config) == 0);
        mcp_descriptor *d = NULL;
        mcp_diags diags = {0};
        mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
        TU_CHECK_STATUS(mcp_descriptor_load_triton(f.model, &defaults, &d, &diags), cases[i].st, cases[i].config);
        if (d && cases[i].version) {
            char want[800];
            snprintf(want, sizeof want, "%s/%s", f.model, cases[i].file);
            TU_CHECK_STR(d->version, cases[i].version);
            TU_CHECK_STR(d->path, want);
            TU_CHECK_INT(d->max_batch_size, 0); /* Triton's default */
            /* The other versions the policy serves: latest 2 and all take 1 too. */
            bool two = strstr(cases[i].config, "num_versions: 2") || strstr(cases[i].config, "all");
            TU_CHECK_INT(d->n_also, two ? 1 : 0);
            if (two) TU_CHECK_INT(d->also[0], 1);
            TU_CHECK(!d->batching.enabled);
        }
        if (cases[i].needle) {
            bool found = false;
            for (int k = 0; k < diags.count; k++) found |= strstr(diags.items[k].message, cases[i].needle) != NULL;
            TU_CHECK(found);
            if (!found) print_diags(&diags, "config.pbtxt");
        }
        mcp_descriptor_free(d);
        mcp_diags_clear(&diags);
    }
    remove(cfg);
    folder_remove(&f);

    /* No config.pbtxt, and no version folders. */
    TU_REQUIRE(folder_make(&f, "empty") == 0);
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    TU_CHECK_STATUS(mcp_descriptor_load_triton(f.model, &defaults, &d, &diags), MCP_STATUS_NOT_FOUND, NULL);
    TU_REQUIRE(diags.count == 1);
    TU_CHECK_CONTAINS(diags.items[0].message, "config.pbtxt");
    mcp_diags_clear(&diags);
    folder_add(&f, "config.pbtxt", "max_batch_size: 0\n");
    TU_CHECK_STATUS(mcp_descriptor_load_triton(f.model, &defaults, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_REQUIRE(diags.count >= 1);
    TU_CHECK_CONTAINS(diags.items[0].message, "no version folders");
    mcp_diags_clear(&diags);
    folder_remove(&f);
}

/* The text format's variations all read the same. */
static void test_text_format(void)
{
    const char *text = "name: 'm'  # single quotes\n"
                       "max_batch_size: 0x10;\n"
                       "input < name: \"a\" \"b\" data_type: TYPE_INT64 dims: -1 dims: 2 >,\n"
                       "input: { name: \"c\\tq\\x41\\101\" data_type: TYPE_STRING dims: [] reshape: { shape: [ ] } }\n"
                       "output [ { name: \"y\", data_type: TYPE_BF16, dims: [ 1, 2 ] } ]\n"
                       "dynamic_batching { }\n";
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(parse_text(text, &d, &diags), MCP_STATUS_OK, NULL);
    if (!d) {
        print_diags(&diags, "config.pbtxt");
        mcp_diags_clear(&diags);
        return;
    }
    TU_CHECK_STR(d->name, "m");
    TU_CHECK_INT(d->max_batch_size, 16);
    TU_REQUIRE(d->n_inputs == 2 && d->n_outputs == 1);
    TU_CHECK_STR(d->inputs[0].name, "ab");
    TU_CHECK_INT(d->inputs[0].dtype, MCP_DTYPE_INT64);
    TU_CHECK_INT(d->inputs[0].rank, 3);
    TU_CHECK_INT(d->inputs[0].dims[1], -1);
    TU_CHECK_INT(d->inputs[0].dims[2], 2);
    TU_CHECK_STR(d->inputs[1].name, "c\tqAA");
    TU_CHECK_INT(d->inputs[1].dtype, MCP_DTYPE_STRING);
    TU_CHECK_INT(d->inputs[1].rank, 1);
    TU_CHECK_INT(d->outputs[0].dtype, MCP_DTYPE_BFLOAT16);
    TU_CHECK_INT(d->outputs[0].rank, 3);
    TU_CHECK(d->batching.enabled);
    TU_CHECK_INT(d->batching.max_queue_delay_us, 500); /* server default */
    /* One warning: reshape. */
    TU_CHECK_INT(diags.count, 1);
    if (diags.count) TU_CHECK_CONTAINS(diags.items[0].message, "reshape");
    mcp_descriptor_free(d);
    mcp_diags_clear(&diags);
}

static void test_semantic_errors(void)
{
    const char *text = "name: \"m\"\n"                                      /* 1 */
                       "platform: \"tensorrt_plan\"\n"                      /* 2 */
                       "max_batch_size: 4\n"                                /* 3 */
                       "max_batch_size: 5\n"                                /* 4 */
                       "input { name: \"x\" data_type: TYPE_FP23 dims: [0] }\n" /* 5 */
                       "output { data_type: TYPE_FP32 }\n"                  /* 6 */
                       "instance_group { kind: KIND_GPU gpus: [0] }\n"      /* 7 */
                       "dynamic_batching { preferred_batch_size: 16 max_queue_delay_microseconds: -1 }\n" /* 8 */
                       "backend: \"python\"\n";                             /* 9 */
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(parse_text(text, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_CHECK(d == NULL);
    CHECK_DIAG(diags, "platform", 2, 11, "platform 'tensorrt_plan' is not supported");
    CHECK_DIAG(diags, "max_batch_size", 4, 17, "given more than once");
    CHECK_DIAG(diags, "input[0].data_type", 5, 30, "unknown value 'TYPE_FP23' (did you mean 'TYPE_FP32'?)");
    CHECK_DIAG(diags, "input[0].dims", 5, 47, "cannot be 0");
    CHECK_DIAG(diags, "output[0]", 6, 1, "missing 'name'");
    CHECK_DIAG(diags, "instance_group[0].kind", 7, 24, "KIND_GPU is not supported");
    CHECK_DIAG(diags, "instance_group[0].gpus", 7, 40, "GPUs are not supported");
    CHECK_DIAG(diags, "dynamic_batching.max_queue_delay_microseconds", 8, 75, "out of range");
    CHECK_DIAG(diags, "dynamic_batching.preferred_batch_size[0]", 8, 1, "larger than max_batch_size 4");
    CHECK_DIAG(diags, "backend", 9, 10, "no user code runs inside the server");
    mcp_diags_clear(&diags);

    TU_CHECK_STATUS(parse_text("name: \"m\"\ndynamic_batching {}\n", &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    CHECK_DIAG(diags, "dynamic_batching", 2, 1, "needs max_batch_size > 0");
    mcp_diags_clear(&diags);
    TU_CHECK_STATUS(parse_text("max_batch_size: 1\n", &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_REQUIRE(diags.count == 1);
    TU_CHECK_CONTAINS(diags.items[0].message, "missing 'name'");
    mcp_diags_clear(&diags);
}

static void test_syntax_errors(void)
{
    const struct {
        const char *text;
        int line, col;
        const char *needle;
    } cases[] = {
        {"name: \"m\nmax_batch_size: 1\n", 1, 7, "unterminated string"},
        {"input {\n  name: \"x\"\n", 3, 1, "missing '}' to close 'input' (line 1)"},
        {"name: \"m\"\n}\n", 2, 1, "expected a field name, got '}'"},
        {"max_batch_size 4\n", 1, 16, "expected ':' or '{' after 'max_batch_size'"},
        {"dims: [1, 2\nname: \"x\"", 2, 1, "expected ',' or ']'"},
        {"name: \"\\q\"\n", 1, 7, "unknown escape"},
        {"name: @\n", 1, 7, "unexpected character '@'"},
        {"name:\n", 2, 1, "expected a value for 'name', got the end of the file"},
        {"[ext.field]: 1\n", 1, 1, "extension"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mcp_descriptor *d = NULL;
        mcp_diags diags = {0};
        TU_CHECK_STATUS(parse_text(cases[i].text, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, cases[i].text);
        TU_CHECK(d == NULL);
        TU_CHECK_INT(diags.count, 1);
        if (diags.count == 1) {
            TU_CHECK_INT(diags.items[0].line, cases[i].line);
            TU_CHECK_INT(diags.items[0].col, cases[i].col);
            TU_CHECK_CONTAINS(diags.items[0].message, cases[i].needle);
        }
        mcp_diags_clear(&diags);
    }
    /* Deep nesting is refused, not recursed into. */
    char deep[4096] = "a ";
    for (int i = 0; i < 200; i++) strcat(deep, "{ b ");
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_CHECK_STATUS(parse_text(deep, &d, &diags), MCP_STATUS_INVALID_ARGUMENT, NULL);
    TU_REQUIRE(diags.count == 1);
    TU_CHECK_CONTAINS(diags.items[0].message, "nested deeper");
    mcp_diags_clear(&diags);
}

/* Every prefix of the sample parses or fails cleanly. */
static void test_truncations(void)
{
    size_t n = strlen(sample_config);
    int ok = 0;
    for (size_t cut = 0; cut <= n; cut++) {
        mcp_descriptor *d = NULL;
        mcp_diags diags = {0};
        mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
        mcp_status st = mcp__triton_parse_config(sample_config, cut, NULL, &defaults, &d, &diags);
        if (st == MCP_STATUS_OK) ok++;
        TU_CHECK((st == MCP_STATUS_OK) == (d != NULL));
        TU_CHECK(st == MCP_STATUS_OK || diags.count > 0);
        mcp_descriptor_free(d);
        mcp_diags_clear(&diags);
    }
    TU_CHECK(ok > 0);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_sample_folder);
    TU_RUN(test_version_policy);
    TU_RUN(test_text_format);
    TU_RUN(test_semantic_errors);
    TU_RUN(test_syntax_errors);
    TU_RUN(test_truncations);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("registry_triton");
}
