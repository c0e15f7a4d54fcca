/* libFuzzer target: the Triton config.pbtxt (protobuf text format) parser
 * used for --model-repository folders, and the JSON ModelConfig path of
 * the load API (JSON -> text format -> the same parser) when the input
 * starts with '{'. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "registry/descriptor_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    mcp_diags diags = {0};
    mcp_descriptor *d = (mcp_descriptor *)1;
    /* No model folder: only the text is parsed and checked. */
    mcp_status st;
    if (size && data[0] == '{') {
        mcp_buf text = {0};
        st = mcp__triton_json_to_text((const char *)data, size, &text, &diags);
        if (st == MCP_STATUS_OK) st = mcp__triton_parse_json_config((const char *)text.data, text.len, &defaults, &d, &diags);
        else d = NULL;
        mcp_buf_free(&text);
    } else {
        st = mcp__triton_parse_config((const char *)data, size, NULL, &defaults, &d, &diags);
    }
    if (st == MCP_STATUS_OK) {
        MCP_ASSERT(d && d->name);
        for (int i = 0; i < d->n_inputs; i++) MCP_ASSERT(d->inputs[i].rank <= MCP_MAX_RANK);
        for (int i = 0; i < d->n_outputs; i++) MCP_ASSERT(d->outputs[i].rank <= MCP_MAX_RANK);
        for (int i = 0; i < diags.count; i++) MCP_ASSERT(strncmp(diags.items[i].message, "warning: ", 9) == 0);
        mcp_descriptor_free(d);
    } else {
        MCP_ASSERT(d == NULL && diags.count > 0);
    }
    char report[4096];
    mcp_diags_format(&diags, "config.pbtxt", report, sizeof report);
    mcp_diags_clear(&diags);
    return 0;
}
