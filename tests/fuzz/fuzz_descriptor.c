/* libFuzzer target: the YAML model descriptor parser (mcpctl validate,
 * apply, --model-repository). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "registry/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mcp_descriptor_defaults defaults = mcp_descriptor_defaults_default();
    mcp_diags diags = {0};
    mcp_descriptor *d = (mcp_descriptor *)1;
    mcp_status st = mcp_descriptor_parse_yaml((const char *)data, size, NULL, &defaults, &d, &diags);
    if (st == MCP_STATUS_OK) {
        MCP_ASSERT(d && d->name && d->path && d->version && diags.count == 0);
        MCP_ASSERT(d->n_inputs >= 0 && d->n_outputs >= 0 && d->n_pre >= 0 && d->n_post >= 0);
        for (int i = 0; i < d->n_inputs; i++) MCP_ASSERT(d->inputs[i].name && d->inputs[i].rank <= MCP_MAX_RANK);
        mcp_descriptor_free(d);
    } else {
        /* Every failure says what and where. */
        MCP_ASSERT(d == NULL && diags.count > 0);
        for (int i = 0; i < diags.count; i++) MCP_ASSERT(diags.items[i].message[0] != '\0');
    }
    char report[4096];
    mcp_diags_format(&diags, "fuzz.yaml", report, sizeof report);
    MCP_ASSERT(strlen(report) < sizeof report);
    mcp_diags_clear(&diags);
    return 0;
}
