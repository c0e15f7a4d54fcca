/*
 * Embedding libmcp: load a model, describe it, run it on one input.
 *
 *   embed_example [MODEL.onnx]      (default: models/demo/digits.onnx)
 *
 * The input is a handwritten "2" from scikit-learn's digits test split
 * (8x8 pixels, values 0..16). Exits non-zero if anything fails or the model
 * does not answer 2.
 */
#include <stdio.h>

#include "mcp/mcp.h"

static const float digit_two[64] = {
    0, 0, 11, 16, 15, 3,  0,  0,  0, 5, 16, 12, 11, 13, 0,  0,  0, 3, 13, 1, 5,  15,
    0, 0, 0,  0,  0,  0,  12, 11, 0, 0, 0,  0,  0,  1,  16, 7,  0, 0, 0,  0, 0,  10,
    15, 0, 0, 0,  0,  0,  12, 16, 16, 11, 1, 0,  0,  0,  13, 13, 8, 13, 16, 8,
};

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "models/demo/digits.onnx";
    char err[1024];
    mcp_session_options opts = mcp_session_options_default();
    mcp_session *session = NULL;
    if (mcp_session_create_from_file(path, &opts, &session, err, sizeof err) != MCP_STATUS_OK) {
        fprintf(stderr, "load failed: %s\n", err);
        return 1;
    }
    for (int i = 0; i < mcp_session_input_count(session); i++) {
        mcp_io_info info;
        mcp_session_input_info(session, i, &info);
        printf("input  %s: %s, rank %d\n", info.name, mcp_dtype_name(info.dtype), info.rank);
    }
    for (int i = 0; i < mcp_session_output_count(session); i++) {
        mcp_io_info info;
        mcp_session_output_info(session, i, &info);
        printf("output %s: %s, rank %d\n", info.name, mcp_dtype_name(info.dtype), info.rank);
    }

    const int64_t dims[2] = {1, 64};
    mcp_value *x = mcp_value_create_tensor(MCP_DTYPE_FLOAT, 2, dims, digit_two, err, sizeof err);
    if (!x) {
        fprintf(stderr, "input: %s\n", err);
        mcp_session_destroy(session);
        return 1;
    }
    const char *in_names[] = {"input"};
    const char *out_names[] = {"label", "probabilities"};
    mcp_value *outs[2] = {NULL, NULL};
    int rc = 1;
    if (mcp_session_run(session, 1, in_names, &x, 2, out_names, outs, err, sizeof err) != MCP_STATUS_OK) {
        fprintf(stderr, "run failed: %s\n", err);
    } else {
        mcp_dtype dt;
        int rank;
        const int64_t *d;
        const void *label_data, *prob_data;
        mcp_value_get_tensor(outs[0], &dt, &rank, &d, &label_data);
        mcp_value_get_tensor(outs[1], &dt, &rank, &d, &prob_data);
        int64_t label = ((const int64_t *)label_data)[0];
        printf("predicted digit: %lld (p=%.3f)\n", (long long)label, ((const float *)prob_data)[label]);
        rc = label == 2 ? 0 : 1;
    }
    mcp_value_destroy(outs[0]);
    mcp_value_destroy(outs[1]);
    mcp_value_destroy(x);
    mcp_session_destroy(session);
    return rc;
}
