/*
 * int8 quantization of an fp32 ONNX model: static, into a standard QDQ
 * model (QuantizeLinear / DequantizeLinear pairs, the format ONNX Runtime's
 * quantizer writes and runs) calibrated on sample inputs run through this
 * engine, or dynamic (below) (src/engine/quantize.c).
 *
 * What static quantization quantizes: every float activation read by a Conv or MatMul (its
 * first input) or by an Add of two activations, to uint8 with the range the
 * samples reach (widened to hold 0); Conv weights to int8 per output
 * channel and MatMul weights (2-D initializers) to int8 per tensor, both
 * symmetric; Conv biases to int32 in the scale x_scale * w_scale. The
 * graph passes then run the quantized ops directly (mcp_graph_fuse_quantized).
 */
#ifndef MCP_ENGINE_QUANTIZE_H
#define MCP_ENGINE_QUANTIZE_H

#include "base/base.h"
#include "mcp/mcp.h"

#define MCP_QUANT_MAX_OUTPUTS 16

/* How one graph output of the quantized model compares with the fp32
 * model's on the calibration samples. */
typedef struct mcp_quant_output_report {
    char name[128];
    double max_abs, mean_abs; /* |int8 - fp32| */
    double fp32_std;          /* spread of the fp32 output */
    long rows, rows_same;     /* 2-D float outputs: rows, and rows whose argmax agree */
} mcp_quant_output_report;

typedef struct mcp_quant_result {
    void *model; /* the QDQ model (mcp_free) */
    size_t len;
    int n_activations, n_weights;
    int n_outputs;       /* reported outputs (the first MCP_QUANT_MAX_OUTPUTS float ones) */
    int n_float_outputs; /* float outputs in all: more than n_outputs when some went unreported */
    mcp_quant_output_report outputs[MCP_QUANT_MAX_OUTPUTS];
} mcp_quant_result;

typedef struct mcp_quantize_options {
    int threads;  /* for the calibration and report sessions; 0 = every core */
    bool dynamic; /* dynamic quantization (below) instead of static */
    /* No report, and no session of the result: for a caller that loads
     * the result itself (precision: int8 at load). */
    bool no_report;
} mcp_quantize_options;

/*
 * Quantizes the fp32 model in buf (external data relative to base_dir, or
 * NULL). samples[k] holds one value per model input, in the model's input
 * order (mcp_session_input_info): static quantization calibrates on them
 * (at least one); both report on them (dynamic needs none). On failure the
 * message names the tensor, node or input at fault.
 *
 * Dynamic quantization (for MatMul-heavy models, transformers): every
 * MatMul whose second input is a 2-D float initializer becomes
 * DynamicQuantizeLinear of its first input (range measured per run),
 * MatMulInteger with the weights in int8 per tensor, a Cast to float and a
 * Mul by the two scales: the format ONNX Runtime's dynamic quantizer
 * writes. Activations stay float between the MatMuls.
 */
mcp_status mcp_quantize(const void *buf, size_t len, const char *base_dir, const mcp_quantize_options *opts,
                        int n_samples, mcp_value *const *const *samples, mcp_quant_result *out, mcp_err *err);
void mcp_quant_result_release(mcp_quant_result *r);

/* Calibration samples read from a folder (mcpctl quantize, descriptors'
 * `calibration`): for a model with one input every *.npy file in it is one
 * sample; for several, every subfolder holds NAME.npy for each input NAME.
 * Read in name order; a folder with more than max_samples samples, or
 * with more than max_bytes of tensor data in all (0: no limit), is refused
 * with a message naming the limit. Symbolic links are skipped, not
 * followed. */
typedef struct mcp_quant_samples {
    int n, n_inputs;
    mcp_value ***values; /* [n][n_inputs] */
} mcp_quant_samples;

mcp_status mcp_quant_samples_load(const char *dir, int n_inputs, const char *const *names, int max_samples,
                                  size_t max_bytes, mcp_quant_samples *out, mcp_err *err);
void mcp_quant_samples_free(mcp_quant_samples *s);
/* The names of the model's inputs (graph inputs that are not
 * initializers), at most max, each a new string in names[]. */
mcp_status mcp_quantize_model_inputs(const void *buf, size_t len, int max, char **names, int *n, mcp_err *err);

#endif
