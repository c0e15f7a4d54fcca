/*
 * mcpctl quantize: static int8 quantization into a standard QDQ model.
 *
 *   mcpctl quantize MODEL.onnx --calibration DIR -o OUT.onnx [--threads N]
 *   mcpctl quantize MODEL.onnx --dynamic [--calibration DIR] -o OUT.onnx [--threads N]
 *
 * Static quantization calibrates on DIR; --dynamic (MatMul-heavy models)
 * needs no calibration and uses DIR, when given, only for the report.
 *
 * DIR holds the calibration samples: for a model with one input, every
 * *.npy file in it is one sample (any batch size the model takes); for
 * several inputs, every subfolder is one sample holding NAME.npy for each
 * input NAME. Samples are read in name order; at most 1024.
 *
 * Writes OUT.onnx (src/engine/quantize.h says what is quantized) and prints
 * how far each float output of the quantized model is from the fp32
 * model's on the samples: largest and mean absolute difference against the
 * fp32 output's spread, and, for 2-D outputs, on how many rows the argmax
 * agrees. Every failure prints one line naming the file or input at fault
 * and exits non-zero.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/mcpctl.h"
#include "engine/engine.h"
#include "engine/quantize.h"

#define MAX_SAMPLES 1024

static const char quantize_usage[] =
    "usage: mcpctl quantize MODEL.onnx [--dynamic] --calibration DIR -o OUT.onnx [--threads N] "
    "(--calibration is optional with --dynamic)";

static int qfail(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "mcpctl quantize: ");
    fprintf(stderr, fmt, a ? a : "", b ? b : "");
    fputc('\n', stderr);
    return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The entries of dir (regular files ending in .npy when `npy`, else
 * subfolders), sorted; NULL-terminated, caller frees. */
static char **list_dir(const char *dir, bool npy, int *count)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = mcp_calloc(MAX_SAMPLES + 1, sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d)) && *count < MAX_SAMPLES) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        size_t n = strlen(e->d_name);
        bool want = npy ? S_ISREG(st.st_mode) && n > 4 && strcmp(e->d_name + n - 4, ".npy") == 0 : S_ISDIR(st.st_mode);
        if (want && !(names[(*count)++] = mcp_strdup(e->d_name))) break;
    }
    closedir(d);
    if (names) qsort(names, (size_t)*count, sizeof *names, by_name);
    return names;
}

static void free_names(char **names, int n)
{
    for (int i = 0; names && i < n; i++) mcp_free(names[i]);
    mcp_free(names);
}

static void *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = mcp_malloc((size_t)n + 1)) &&
            fread(buf, 1, (size_t)n, f) != (size_t)n) {
            mcp_free(buf);
            buf = NULL;
        }
        *len = (size_t)(n < 0 ? 0 : n);
    }
    fclose(f);
    return buf;
}

/* Reads one .npy into a new tensor value. */
static mcp_value *load_npy(const char *path, char *msg, size_t cap)
{
    mcp_err err = {msg, cap};
    mcp_value *v = mcp_value_new();
    if (!v) return NULL;
    v->kind = MCP_VALUE_TENSOR;
    if (mcp_npy_read(path, &v->tensor, &err) != MCP_STATUS_OK) {
        mcp_value_free(v);
        return NULL;
    }
    return v;
}

int mcpctl_cmd_quantize(int argc, char **argv)
{
    const char *model = NULL, *calib = NULL, *out_path = NULL;
    int threads = 0;
    bool dynamic = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--calibration") && i + 1 < argc) calib = argv[++i];
        else if (!strcmp(argv[i], "--dynamic")) dynamic = true;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s\n", quantize_usage);
            return 0;
        } else if (argv[i][0] != '-' && !model) model = argv[i];
        else return qfail("unexpected argument '%s'; %s", argv[i], quantize_usage);
    }
    if (!model || (!calib && !dynamic) || !out_path) return qfail("%s%s", quantize_usage, NULL);
    if (threads < 0 || threads > 1024) return qfail("--threads must be 0..1024%s%s", NULL, NULL);

    char msg[2048] = "";
    mcp_session_options o = mcp_session_options_default();
    o.threads = threads;
    mcp_session *s = NULL;
    if (mcp_session_create_from_file(model, &o, &s, msg, sizeof msg) != MCP_STATUS_OK)
        return qfail("%s: %s", model, msg);
    int n_in = mcp_session_input_count(s);
    const char *in_names[64];
    char name_store[64][256];
    for (int i = 0; i < n_in && i < 64; i++) {
        mcp_io_info info;
        mcp_session_input_info(s, i, &info);
        snprintf(name_store[i], sizeof name_store[i], "%s", info.name);
        in_names[i] = name_store[i];
    }
    mcp_session_destroy(s);
    if (n_in < 1 || n_in > 64) return qfail("%s: the model must have 1 to 64 inputs%s", model, NULL);

    int n_entries = 0;
    char **entries = calib ? list_dir(calib, n_in == 1, &n_entries) : mcp_calloc(1, sizeof(char *));
    if (!entries) return qfail(calib ? "%s: cannot read the calibration folder%s" : "out of memory%s%s", calib, NULL);
    if (calib && n_entries == 0) {
        free_names(entries, n_entries);
        return qfail(n_in == 1 ? "%s: no .npy samples in the calibration folder%s"
                               : "%s: no sample subfolders in the calibration folder%s",
                     calib, NULL);
    }
    mcp_value ***samples = mcp_calloc((size_t)n_entries + 1, sizeof *samples);
    int rc = samples ? 0 : qfail("out of memory%s%s", NULL, NULL);
    for (int k = 0; rc == 0 && k < n_entries; k++) {
        samples[k] = mcp_calloc((size_t)n_in, sizeof **samples);
        if (!samples[k]) {
            rc = qfail("out of memory%s%s", NULL, NULL);
            break;
        }
        for (int i = 0; rc == 0 && i < n_in; i++) {
            char path[4096];
            if (n_in == 1) snprintf(path, sizeof path, "%s/%s", calib, entries[k]);
            else snprintf(path, sizeof path, "%s/%s/%s.npy", calib, entries[k], in_names[i]);
            samples[k][i] = load_npy(path, msg, sizeof msg);
            if (!samples[k][i]) rc = qfail("%s: %s", path, msg[0] ? msg : "cannot read");
        }
    }
    size_t len = 0;
    void *buf = rc == 0 ? read_file(model, &len) : NULL;
    if (rc == 0 && !buf) rc = qfail("%s: cannot read%s", model, NULL);
    mcp_quant_result r;
    memset(&r, 0, sizeof r);
    if (rc == 0) {
        /* External data is found next to the model. */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", model);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
        mcp_err err = {msg, sizeof msg};
        mcp_quantize_options qo = {.threads = threads, .dynamic = dynamic};
        if (mcp_quantize(buf, len, dir, &qo, n_entries, (mcp_value *const *const *)samples, &r, &err) != MCP_STATUS_OK)
            rc = qfail("%s: %s", model, msg);
    }
    if (rc == 0) {
        FILE *f = fopen(out_path, "wb");
        bool ok = f && fwrite(r.model, 1, r.len, f) == r.len;
        if (f && fclose(f) != 0) ok = false;
        if (!ok) rc = qfail("%s: cannot write%s", out_path, NULL);
    }
    if (rc == 0) {
        printf("quantized %s%s: %d activations (uint8%s), %d weights (int8) -> %s (%.1f MB)\n", model,
               dynamic ? " dynamically" : "", r.n_activations, dynamic ? ", range per run" : "", r.n_weights, out_path,
               (double)r.len / 1e6);
        if (n_entries > 0) printf("error against fp32 on %d calibration sample(s):\n", n_entries);
        for (int i = 0; i < r.n_outputs; i++) {
            const mcp_quant_output_report *p = &r.outputs[i];
            printf("  %s: max |int8 - fp32| %.4g, mean %.4g (fp32 std %.4g)", p->name, p->max_abs, p->mean_abs,
                   p->fp32_std);
            if (p->rows) printf("; argmax agrees on %ld of %ld rows (%.1f%%)", p->rows_same, p->rows,
                                100.0 * (double)p->rows_same / (double)p->rows);
            printf("\n");
        }
    }
    mcp_quant_result_release(&r);
    mcp_free(buf);
    for (int k = 0; samples && k < n_entries; k++) {
        for (int i = 0; samples[k] && i < n_in; i++) mcp_value_free(samples[k][i]);
        mcp_free(samples[k]);
    }
    mcp_free(samples);
    free_names(entries, n_entries);
    return rc;
}
