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
 * input NAME. Samples are read in name order; a folder of more than 1024 is
 * refused.
 *
 * Writes OUT.onnx (src/engine/quantize.h says what is quantized) and prints
 * how far each float output of the quantized model is from the fp32
 * model's on the samples: largest and mean absolute difference against the
 * fp32 output's spread, and, for 2-D outputs, on how many rows the argmax
 * agrees. Every failure prints one line naming the file or input at fault
 * and exits non-zero.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    mcp_err err = {msg, sizeof msg};
    size_t len = 0;
    uint8_t *buf = NULL;
    if (mcp_file_read(model, &buf, &len, &err) != MCP_STATUS_OK) return qfail("%s%s", msg, NULL);
    char *names[64];
    int n_in = 0;
    if (mcp_quantize_model_inputs(buf, len, 64, names, &n_in, &err) != MCP_STATUS_OK) {
        mcp_free(buf);
        return qfail("%s: %s", model, msg);
    }
    mcp_quant_samples samples = {0};
    int rc = 0;
    if (calib && mcp_quant_samples_load(calib, n_in, (const char *const *)names, MAX_SAMPLES, 0, &samples, &err) !=
                     MCP_STATUS_OK)
        rc = qfail("%s%s", msg, NULL);
    mcp_quant_result r;
    memset(&r, 0, sizeof r);
    if (rc == 0) {
        /* External data is found next to the model. */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", model);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
        mcp_quantize_options qo = {.threads = threads, .dynamic = dynamic};
        if (mcp_quantize(buf, len, dir, &qo, samples.n, (mcp_value *const *const *)samples.values, &r, &err) !=
            MCP_STATUS_OK)
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
        if (samples.n > 0) printf("error against fp32 on %d calibration sample(s):\n", samples.n);
        for (int i = 0; i < r.n_outputs; i++) {
            const mcp_quant_output_report *p = &r.outputs[i];
            printf("  %s: max |int8 - fp32| %.4g, mean %.4g (fp32 std %.4g)", p->name, p->max_abs, p->mean_abs,
                   p->fp32_std);
            if (p->rows) printf("; argmax agrees on %ld of %ld rows (%.1f%%)", p->rows_same, p->rows,
                                100.0 * (double)p->rows_same / (double)p->rows);
            printf("\n");
        }
        if (r.n_float_outputs > r.n_outputs)
            printf("  (%d more float outputs not reported)\n", r.n_float_outputs - r.n_outputs);
    }
    mcp_quant_result_release(&r);
    mcp_quant_samples_free(&samples);
    for (int i = 0; i < n_in; i++) mcp_free(names[i]);
    mcp_free(buf);
    return rc;
}
