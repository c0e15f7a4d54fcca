/*
 * mcpctl infer NAME IN=FILE.npy ... [--out DIR] [--model-version V]
 *
 * One Open Inference Protocol v2 request with binary tensor data: inputs
 * from .npy files, every output requested in binary, each written to
 * DIR/<output>.npy with the same file names and summary lines as
 * `mcpctl run`, so the two can be compared file for file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/mcpctl_http.h"

#define INFER_TIMEOUT_MS 300000L

static const char *USAGE = "infer NAME IN=FILE.npy ... [--out DIR] [--model-version V]";

typedef struct infer_ctx {
    char msg[1400];
    mcp_err err;
    mcpctl_http http;
    mcpctl_model_meta meta;
    mcpctl_named *inputs; /* n_inputs entries, in argument order */
    int n_inputs;
    mcpctl_named *outputs;
    int n_outputs;
    mcp_buf body;
} infer_ctx;

static int infer_fail(infer_ctx *c, const char *model)
{
    fprintf(stderr, "mcpctl: infer %s: %s\n", model, c->msg);
    return 1;
}

static const mcpctl_tensor_meta *find_input(const mcpctl_model_meta *m, const char *name)
{
    for (int i = 0; i < m->n_inputs; i++)
        if (strcmp(m->inputs[i].name, name) == 0) return &m->inputs[i];
    return NULL;
}

/* Reads one IN=FILE argument into c->inputs. */
static mcp_status add_input(infer_ctx *c, char *arg)
{
    char *eq = strchr(arg, '=');
    if (!eq) return mcp_err_set(&c->err, MCP_STATUS_INVALID_ARGUMENT, "argument '%s' is not NAME=FILE.npy", arg);
    *eq = '\0';
    const char *name = arg, *file = eq + 1;
    const mcpctl_tensor_meta *m = find_input(&c->meta, name);
    if (!m) {
        char names[512] = "";
        for (int i = 0; i < c->meta.n_inputs; i++) {
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s'%s'", i ? ", " : "", c->meta.inputs[i].name);
        }
        return mcp_err_set(&c->err, MCP_STATUS_INVALID_ARGUMENT, "model has no input named '%s' (inputs: %s)", name, names);
    }
    for (int i = 0; i < c->n_inputs; i++)
        if (strcmp(c->inputs[i].name, name) == 0)
            return mcp_err_set(&c->err, MCP_STATUS_INVALID_ARGUMENT, "input '%s' given twice", name);
    mcpctl_named *v = &c->inputs[c->n_inputs];
    mcp_status st = mcp_npy_read(file, &v->t, &c->err);
    if (st != MCP_STATUS_OK) {
        mcp_err_prefix(&c->err, "input '%s'", name);
        return st;
    }
    /* bfloat16 travels in .npy files as uint16 bit patterns (as in `mcpctl run`). */
    if (m->dtype == MCP_DTYPE_BFLOAT16 && v->t.dtype == MCP_DTYPE_UINT16) v->t.dtype = MCP_DTYPE_BFLOAT16;
    c->n_inputs++;
    v->name = mcp_strdup(name);
    return v->name ? MCP_STATUS_OK : mcp_err_set(&c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
}

/* Without --out, outputs go to a new folder under $TMPDIR (or /tmp), never
 * unasked into the working folder; the summary lines name it. */
static mcp_status write_outputs(infer_ctx *c, const char *outdir, const char *model)
{
    char made[4096];
    if (!outdir) {
        const char *tmp = getenv("TMPDIR");
        char stem[256];
        mcpctl_sanitize(model, stem, sizeof stem);
        snprintf(made, sizeof made, "%s/mcpctl-infer-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", stem);
        if (!mkdtemp(made))
            return mcp_err_set(&c->err, MCP_STATUS_IO_ERROR, "cannot create a folder for the outputs under '%s': %s (give --out DIR)",
                               tmp && *tmp ? tmp : "/tmp", strerror(errno));
        outdir = made;
    } else if (mkdir(outdir, 0777) != 0 && errno != EEXIST) {
        return mcp_err_set(&c->err, MCP_STATUS_IO_ERROR, "cannot create folder '%s': %s", outdir, strerror(errno));
    }
    for (int i = 0; i < c->n_outputs; i++) {
        char stem[512], path[4800];
        mcpctl_sanitize(c->outputs[i].name, stem, sizeof stem);
        snprintf(path, sizeof path, "%s/%s.npy", outdir, stem);
        mcp_status st = mcp_npy_write(path, &c->outputs[i].t, &c->err);
        if (st != MCP_STATUS_OK) return st;
        mcpctl_print_summary(outdir, c->outputs[i].name, &c->outputs[i].t);
    }
    return MCP_STATUS_OK;
}

static mcp_status run_infer(infer_ctx *c, const char *server, const char *model, const char *version, char **args, int n_args,
                            const char *outdir)
{
    mcp_status st = mcpctl_http_init(&c->http, server, INFER_TIMEOUT_MS, &c->err);
    if (st == MCP_STATUS_OK) st = mcpctl_model_meta_fetch(&c->http, model, version, &c->meta, &c->err);
    if (st != MCP_STATUS_OK) return st;
    c->inputs = mcp_calloc((size_t)n_args + 1, sizeof *c->inputs);
    if (!c->inputs) return mcp_err_set(&c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int a = 0; a < n_args; a++) {
        st = add_input(c, args[a]);
        if (st != MCP_STATUS_OK) return st;
    }
    for (int i = 0; i < c->meta.n_inputs; i++) {
        bool given = false;
        for (int k = 0; k < c->n_inputs; k++) given |= strcmp(c->inputs[k].name, c->meta.inputs[i].name) == 0;
        if (!given)
            return mcp_err_set(&c->err, MCP_STATUS_INVALID_ARGUMENT, "missing input '%s' (give %s=FILE.npy)",
                               c->meta.inputs[i].name, c->meta.inputs[i].name);
    }
    const char **outs = mcp_calloc((size_t)c->meta.n_outputs + 1, sizeof *outs);
    if (!outs) return mcp_err_set(&c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < c->meta.n_outputs; i++) outs[i] = c->meta.outputs[i].name;
    size_t json_len = 0;
    st = mcpctl_v2_encode(c->inputs, c->n_inputs, outs, c->meta.n_outputs, &c->body, &json_len, &c->err);
    mcp_free(outs);
    if (st != MCP_STATUS_OK) return st;

    char seg[1024], vseg[256], path[1400];
    mcpctl_path_segment(model, seg, sizeof seg);
    if (version) {
        mcpctl_path_segment(version, vseg, sizeof vseg);
        snprintf(path, sizeof path, "/v2/models/%s/versions/%s/infer", seg, vseg);
    } else {
        snprintf(path, sizeof path, "/v2/models/%s/infer", seg);
    }
    st = mcpctl_http_do(&c->http, "POST", path, c->body.data, c->body.len, "application/octet-stream", (int64_t)json_len,
                        &c->err);
    if (st != MCP_STATUS_OK) return st;
    if (c->http.code != 200) return mcpctl_http_fail(&c->http, &c->err);
    st = mcpctl_v2_decode(c->http.resp.data, c->http.resp.len, c->http.header_len, &c->outputs, &c->n_outputs, &c->err);
    if (st != MCP_STATUS_OK) return st;
    return write_outputs(c, outdir, model);
}

int mcpctl_cmd_infer(const char *server, int argc, char **argv)
{
    const char *model = NULL, *outdir = NULL, *version = NULL;
    char **args = mcp_calloc((size_t)argc + 1, sizeof *args);
    int n_args = 0;
    if (!args) {
        fprintf(stderr, "mcpctl: infer: out of memory\n");
        return 1;
    }
    bool bad = false;
    for (int a = 0; a < argc && !bad; a++) {
        if (!strcmp(argv[a], "--out") && a + 1 < argc) outdir = argv[++a];
        else if (!strcmp(argv[a], "--model-version") && a + 1 < argc) version = argv[++a];
        else if (argv[a][0] == '-' || (!model && strchr(argv[a], '='))) bad = true;
        else if (!model) model = argv[a];
        else args[n_args++] = argv[a];
    }
    if (bad || !model) {
        mcp_free(args);
        fprintf(stderr, "mcpctl: infer: usage: mcpctl %s\n", USAGE);
        return 2;
    }
    infer_ctx *c = mcp_calloc(1, sizeof *c);
    if (!c) {
        mcp_free(args);
        fprintf(stderr, "mcpctl: infer: out of memory\n");
        return 1;
    }
    c->err = (mcp_err){c->msg, sizeof c->msg};
    int rc = run_infer(c, server, model, version, args, n_args, outdir) == MCP_STATUS_OK ? 0 : infer_fail(c, model);
    mcpctl_http_cleanup(&c->http);
    mcpctl_model_meta_free(&c->meta);
    mcpctl_named_free(c->inputs, c->n_inputs);
    mcpctl_named_free(c->outputs, c->n_outputs);
    mcp_buf_free(&c->body);
    mcp_free(c);
    mcp_free(args);
    return rc;
}
