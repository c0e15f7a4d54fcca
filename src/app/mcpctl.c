/*
 * mcpctl: the command-line tool.
 *
 *   mcpctl run [--bf16] MODEL.onnx OUTDIR NAME=FILE ...   one inference, outputs as .npy
 *   mcpctl inspect MODEL.onnx                    inputs, outputs, opsets, op histogram
 *
 * Inputs: NAME=FILE.npy (a tensor), NAME=DIR.seq (a sequence: DIR holds
 * 0000.npy, 0001.npy, ...), NAME=FILE.none (an empty optional). bfloat16
 * travels as uint16 bit patterns; strings as fixed-width unicode .npy.
 * Every failure prints one line on stderr and exits non-zero.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/mcpctl.h"
#include "app/mcpctl_http.h"
#include "engine/engine.h"

static int fail(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "mcpctl: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 1;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static mcp_status make_dir(const char *path, mcp_err *err)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot create folder '%s': %s", path, strerror(errno));
    return MCP_STATUS_OK;
}

static mcp_status read_input(const char *file, const mcp_graph_value *gv, mcp_value *v, mcp_err *err)
{
    memset(v, 0, sizeof *v);
    if (ends_with(file, ".none")) {
        v->kind = MCP_VALUE_NONE;
        v->elem_is_sequence = gv->type.kind == MCP_VALUE_SEQUENCE;
        v->elem_dtype = gv->type.dtype;
        return MCP_STATUS_OK;
    }
    if (ends_with(file, ".seq")) {
        v->kind = MCP_VALUE_SEQUENCE;
        v->elem_dtype = gv->type.dtype;
        for (int i = 0;; i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%04d.npy", file, i);
            struct stat sb;
            if (stat(path, &sb) != 0) {
                if (i == 0 && stat(file, &sb) != 0)
                    return mcp_err_set(err, MCP_STATUS_IO_ERROR, "input '%s': sequence folder '%s' not found", gv->name, file);
                break;
            }
            mcp_tensor t;
            mcp_status st = mcp_npy_read(path, &t, err);
            if (st != MCP_STATUS_OK) return st;
            if (gv->type.dtype == MCP_DTYPE_BFLOAT16 && t.dtype == MCP_DTYPE_UINT16) t.dtype = MCP_DTYPE_BFLOAT16;
            if (mcp_dtype_is_narrow(gv->type.dtype) && (st = mcp_npy_to_narrow(&t, gv->type.dtype, err)) != MCP_STATUS_OK) {
                mcp_tensor_release(&t);
                mcp_err_prefix(err, "input '%s' (%s)", gv->name, path);
                return st;
            }
            st = mcp_value_seq_push_move(v, &t, err);
            if (st != MCP_STATUS_OK) {
                mcp_tensor_release(&t);
                return st;
            }
        }
        return MCP_STATUS_OK;
    }
    v->kind = MCP_VALUE_TENSOR;
    mcp_status st = mcp_npy_read(file, &v->tensor, err);
    if (st == MCP_STATUS_OK && gv->type.dtype == MCP_DTYPE_BFLOAT16 && v->tensor.dtype == MCP_DTYPE_UINT16)
        v->tensor.dtype = MCP_DTYPE_BFLOAT16;
    /* The narrow types come one element a byte (see mcp_npy_write). */
    if (st == MCP_STATUS_OK && mcp_dtype_is_narrow(gv->type.dtype)) {
        st = mcp_npy_to_narrow(&v->tensor, gv->type.dtype, err);
        if (st != MCP_STATUS_OK) mcp_err_prefix(err, "input '%s' (%s)", gv->name, file);
    }
    return st;
}

static mcp_status write_output(const char *outdir, const char *name, const mcp_value *v, mcp_err *err)
{
    char stem[512], path[4800];
    mcpctl_sanitize(name, stem, sizeof stem);
    if (v->kind == MCP_VALUE_NONE) {
        snprintf(path, sizeof path, "%s/%s.none", outdir, stem);
        FILE *f = fopen(path, "wb");
        if (!f) return mcp_err_set(err, MCP_STATUS_IO_ERROR, "cannot create '%s'", path);
        fclose(f);
        return MCP_STATUS_OK;
    }
    if (v->kind == MCP_VALUE_SEQUENCE) {
        snprintf(path, sizeof path, "%s/%s.seq", outdir, stem);
        mcp_status st = make_dir(path, err);
        for (int64_t i = 0; st == MCP_STATUS_OK && i < v->seq_len; i++) {
            char ep[4900];
            snprintf(ep, sizeof ep, "%s/%04lld.npy", path, (long long)i);
            st = mcp_npy_write(ep, &v->seq[i], err);
        }
        return st;
    }
    snprintf(path, sizeof path, "%s/%s.npy", outdir, stem);
    return mcp_npy_write(path, &v->tensor, err);
}

/* One line per output: where it went, its type, shape and first values. */
static void print_summary(const char *outdir, const char *name, const mcp_value *v)
{
    char stem[512];
    mcpctl_sanitize(name, stem, sizeof stem);
    if (v->kind == MCP_VALUE_NONE) {
        printf("%s: empty optional -> %s/%s.none\n", name, outdir, stem);
        return;
    }
    if (v->kind == MCP_VALUE_SEQUENCE) {
        printf("%s: sequence of %lld tensors -> %s/%s.seq/\n", name, (long long)v->seq_len, outdir, stem);
        return;
    }
    mcpctl_print_summary(outdir, name, &v->tensor);
}

static int cmd_run(int argc, char **argv)
{
    /* --bf16: the session option bf16 (see mcp.h). */
    mcp_session_options o = mcp_session_options_default();
    if (argc > 0 && strcmp(argv[0], "--bf16") == 0) {
        o.bf16 = 1;
        argc--;
        argv++;
    }
    if (argc < 2) return fail("usage: mcpctl run [--bf16] MODEL.onnx OUTDIR NAME=FILE ...%s%s", "", "");
    const char *model = argv[0], *outdir = argv[1];
    char msg[2048];
    mcp_err err = {msg, sizeof msg};
    mcp_session *s = NULL;
    if (mcp_session_create_from_file(model, &o, &s, msg, sizeof msg) != MCP_STATUS_OK) return fail("%s%s", msg, "");
    if (mcp_session_load_note(s)) fprintf(stderr, "mcpctl: warning: %s\n", mcp_session_load_note(s));
    const mcp_graph *g = s->graph;
    mcp_value **ins = mcp_calloc((size_t)g->n_inputs + 1, sizeof *ins);
    mcp_value **outs = mcp_calloc((size_t)g->n_outputs + 1, sizeof *outs);
    int rc = 0;
    for (int a = 2; a < argc && rc == 0; a++) {
        char *eq = strchr(argv[a], '=');
        if (!eq) {
            rc = fail("argument '%s' is not NAME=FILE%s", argv[a], "");
            break;
        }
        *eq = '\0';
        int found = -1;
        for (int i = 0; i < g->n_inputs; i++)
            if (strcmp(g->values[g->inputs[i]].name, argv[a]) == 0) found = i;
        if (found < 0) {
            rc = fail("model has no input named '%s'%s", argv[a], "");
            break;
        }
        if (ins[found]) {
            rc = fail("input '%s' given twice%s", argv[a], "");
            break;
        }
        ins[found] = mcp_value_new();
        if (read_input(eq + 1, &g->values[g->inputs[found]], ins[found], &err) != MCP_STATUS_OK) {
            char m2[2300];
            snprintf(m2, sizeof m2, "input '%s': %s", argv[a], msg);
            rc = fail("%s%s", m2, "");
        }
    }
    for (int i = 0; i < g->n_outputs; i++) outs[i] = mcp_value_new();
    if (rc == 0 && mcp__session_run(s, ins, outs, &err) != MCP_STATUS_OK) rc = fail("%s%s", msg, "");
    if (rc == 0 && make_dir(outdir, &err) != MCP_STATUS_OK) rc = fail("%s%s", msg, "");
    for (int i = 0; rc == 0 && i < g->n_outputs; i++) {
        const char *name = g->values[g->outputs[i]].name;
        if (write_output(outdir, name, outs[i], &err) != MCP_STATUS_OK) rc = fail("%s%s", msg, "");
        else print_summary(outdir, name, outs[i]);
    }
    for (int i = 0; i < g->n_inputs; i++) mcp_value_free(ins[i]);
    for (int i = 0; i < g->n_outputs; i++) mcp_value_free(outs[i]);
    mcp_free(ins);
    mcp_free(outs);
    mcp_session_destroy(s);
    return rc;
}

static void print_io(const char *kind, const mcp_io_info *io)
{
    printf("  %s %s: ", kind, io->name);
    if (io->optional) printf("optional ");
    if (io->kind == MCP_KIND_SEQUENCE) printf("sequence of ");
    printf("%s", mcp_dtype_name(io->dtype));
    if (io->rank >= 0) {
        printf(" [");
        for (int d = 0; d < io->rank; d++) {
            if (d) printf(", ");
            if (io->dims[d] >= 0) printf("%lld", (long long)io->dims[d]);
            else printf("%s", io->dim_params[d] ? io->dim_params[d] : "?");
        }
        printf("]");
    }
    printf("\n");
}

typedef struct op_count {
    char name[160];
    int n;
} op_count;

static void count_ops(const mcp_graph *g, op_count *ops, int *n_ops, int cap)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const mcp_node *n = &g->nodes[i];
        char key[160];
        snprintf(key, sizeof key, "%s%s%s", n->domain, *n->domain ? "." : "", n->op_type);
        int k = 0;
        while (k < *n_ops && strcmp(ops[k].name, key) != 0) k++;
        if (k == *n_ops && k < cap) {
            snprintf(ops[k].name, sizeof ops[k].name, "%s", key);
            ops[k].n = 0;
            (*n_ops)++;
        }
        if (k < cap) ops[k].n++;
        for (int a = 0; a < n->n_attrs; a++) {
            if (n->attrs[a].g) count_ops(n->attrs[a].g, ops, n_ops, cap);
            for (int64_t j = 0; n->attrs[a].graphs && j < n->attrs[a].count; j++) count_ops(n->attrs[a].graphs[j], ops, n_ops, cap);
        }
    }
}

static int cmp_ops(const void *a, const void *b)
{
    const op_count *x = a, *y = b;
    return x->n != y->n ? y->n - x->n : strcmp(x->name, y->name);
}

static int cmd_inspect(int argc, char **argv)
{
    if (argc < 1) return fail("usage: mcpctl inspect MODEL.onnx%s%s", "", "");
    char msg[2048];
    mcp_session *s = NULL;
    /* Describe the model as written, not as optimized. */
    mcp_session_options o = mcp_session_options_default();
    o.no_graph_passes = 1;
    if (mcp_session_create_from_file(argv[0], &o, &s, msg, sizeof msg) != MCP_STATUS_OK) return fail("%s%s", msg, "");
    const mcp_graph *g = s->graph;
    printf("model: %s\n", argv[0]);
    printf("ir_version: %lld  producer: %s  graph: %s\n", (long long)g->ir_version, g->producer_name, g->name);
    printf("opsets:\n");
    for (int i = 0; i < g->n_opsets; i++)
        printf("  %s %lld\n", *g->opsets[i].domain ? g->opsets[i].domain : "ai.onnx", (long long)g->opsets[i].version);
    printf("inputs:\n");
    for (int i = 0; i < mcp_session_input_count(s); i++) print_io("input", &s->inputs[i]);
    printf("outputs:\n");
    for (int i = 0; i < mcp_session_output_count(s); i++) print_io("output", &s->outputs[i]);
    size_t weights = 0;
    for (int i = 0; i < g->n_initializers; i++) weights += mcp_tensor_nbytes(&g->initializers[i]);
    printf("initializers: %d (%zu bytes)\n", g->n_initializers, weights);
    enum { CAP = 512 };
    op_count *ops = mcp_calloc(CAP, sizeof *ops);
    int n_ops = 0;
    count_ops(g, ops, &n_ops, CAP);
    qsort(ops, (size_t)n_ops, sizeof *ops, cmp_ops);
    printf("ops (%d kinds):\n", n_ops);
    for (int i = 0; i < n_ops; i++) printf("  %6d  %s\n", ops[i].n, ops[i].name);
    mcp_free(ops);
    mcp_session_destroy(s);
    return 0;
}

/* mcpctl compile MODEL.onnx -o OUT.mcpir [--threads N] [--bf16]
 * [--fuse-quantized-sums]: a compiled model for this machine (mcp.h,
 * mcp_compile); loads of it must ask for the same threads and options to
 * use what it packed. */
static int cmd_compile(int argc, char **argv)
{
    const char *model = NULL, *out = NULL;
    mcp_session_options o = mcp_session_options_default();
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || t < 1 || t > 1024) return fail("--threads '%s' is not a number in 1..1024%s", argv[i], "");
            o.threads = (int)t;
        } else if (!strcmp(argv[i], "--bf16")) o.bf16 = 1;
        else if (!strcmp(argv[i], "--fuse-quantized-sums")) o.fuse_quantized_sums = 1;
        else if (argv[i][0] != '-' && !model) model = argv[i];
        else return fail("unexpected argument '%s'%s", argv[i], "");
    }
    if (!model || !out)
        return fail("usage: mcpctl compile MODEL.onnx -o OUT.mcpir [--threads N] [--bf16] [--fuse-quantized-sums]%s%s", "", "");
    char msg[2048];
    if (mcp_compile(model, out, &o, msg, sizeof msg) != MCP_STATUS_OK) return fail("%s%s", msg, "");
    printf("compiled %s -> %s\n", model, out);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mcpctl COMMAND ...\n"
            "  run MODEL.onnx OUTDIR NAME=FILE ...  run one inference; writes OUTDIR/<output>.npy\n"
            "      FILE is NAME.npy (tensor), DIR.seq (sequence of 0000.npy, 0001.npy, ...)\n"
            "      or FILE.none (empty optional); bfloat16 travels as uint16 bits\n"
            "  inspect MODEL.onnx                   print inputs, outputs, opsets and op histogram\n"
            "  perf MODEL.onnx [--batch N] [--threads N] [--warmup N] [--iterations N] [--backend B] [--profile]\n"
            "                [--fuse-quantized-sums] [--json]\n"
            "                                       load time, median/p90 latency and peak RSS on random inputs;\n"
            "                                       --profile adds time per op type and the slowest nodes\n"
            "  compile MODEL.onnx -o OUT.mcpir [--threads N] [--bf16] [--fuse-quantized-sums]\n"
            "                                       optimized graph with weights packed for this machine; loads\n"
            "                                       by mmap (run, perf and the server take .mcpir files)\n"
            "  quantize MODEL.onnx [--dynamic] --calibration DIR -o OUT.onnx [--threads N]\n"
            "                                       int8 quantization: static into a QDQ model calibrated on\n"
            "                                       DIR's .npy samples, or --dynamic (MatMuls; DIR optional);\n"
            "                                       prints the error against fp32 on DIR's samples\n"
            "  generate MODEL.gguf --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
            "           [--min-p P] [--repeat-penalty R] [--seed S] [--stop STR]... [--greedy] [--json]\n"
            "                                       generate text with a language model, streamed as it comes\n"
            "  inspect MODEL.gguf                   architecture, sizes, tensor types and tokenizer\n"
            "  perf MODEL.gguf [--prompt-tokens 512] [--gen-tokens 128] [--threads N] [--json]\n"
            "                                       load time, prefill and decode tokens/s\n"
            "  version                              print the version\n"
            "%s%s",
            mcpctl_client_usage(), mcpctl_store_usage());
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    /* Global flags may come before the command, as kubectl and docker users
     * type them (mcpctl --server URL get models): they move after it. */
    int first = 1;
    const char *globals[2];
    int n_globals = 0;
    while (first < argc && n_globals == 0 && !strncmp(argv[first], "--server", 8)) {
        if (!strcmp(argv[first], "--server")) {
            if (first + 1 >= argc) {
                fprintf(stderr, "mcpctl: --server needs a URL\n");
                return 2;
            }
            globals[n_globals++] = argv[first++];
            globals[n_globals++] = argv[first++];
        } else if (!strncmp(argv[first], "--server=", 9)) {
            globals[n_globals++] = argv[first++];
        } else {
            break;
        }
    }
    if (first >= argc) {
        usage(stderr);
        return 2;
    }
    char **args = argv;
    char *moved[256];
    if (n_globals) {
        if (argc - first + 1 + n_globals > 255) {
            fprintf(stderr, "mcpctl: too many arguments\n");
            return 2;
        }
        int n = 0;
        moved[n++] = argv[0];
        for (int i = first; i < argc; i++) moved[n++] = argv[i];
        for (int i = 0; i < n_globals; i++) moved[n++] = (char *)globals[i];
        moved[n] = NULL;
        args = moved;
        argc = n;
    }
    argv = args;
    const char *cmd = argv[1];
    if (n_globals && (!strcmp(cmd, "run") || !strcmp(cmd, "perf") || !strcmp(cmd, "quantize") || !strcmp(cmd, "compile") || !strcmp(cmd, "inspect") || !strcmp(cmd, "store") ||
                      !strcmp(cmd, "push") || !strcmp(cmd, "pull") || !strcmp(cmd, "diff"))) {
        fprintf(stderr, "mcpctl: %s runs the engine locally; --server does not apply\n", cmd);
        return 2;
    }
    bool llm = false;
    int llm_rc = mcpctl_llm_main(cmd, argc - 2, argv + 2, &llm);
    if (llm) return llm_rc;
    if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "perf")) return mcpctl_cmd_perf(argc - 2, argv + 2);
    if (!strcmp(cmd, "quantize")) return mcpctl_cmd_quantize(argc - 2, argv + 2);
    if (!strcmp(cmd, "compile")) return cmd_compile(argc - 2, argv + 2);
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 2, argv + 2);
    if (!strcmp(cmd, "version")) {
        printf("mcpctl %s\n", MCP_VERSION_STRING);
        return 0;
    }
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    bool handled = false;
    int rc = mcpctl_store_main(cmd, argc - 2, argv + 2, &handled);
    if (handled) return rc;
    rc = mcpctl_client_main(cmd, argc - 2, argv + 2, &handled);
    if (handled) return rc;
    fprintf(stderr, "mcpctl: unknown command '%s' (try mcpctl --help)\n", cmd);
    return 2;
}
