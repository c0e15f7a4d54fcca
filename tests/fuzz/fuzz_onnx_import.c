/* libFuzzer target: the ONNX model importer and load-time preparation
 * (protobuf decoding, IR building, kernel resolution). Any input must either
 * load or fail with a message; never crash, hang or leak. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_session *s = NULL;
    /* No base folder: external data references must be refused, not read. */
    mcp_status st = mcp__session_create(data, size, NULL, NULL, &s, &err);
    if (st == MCP_STATUS_OK) {
        MCP_ASSERT(s != NULL);
        mcp_session_destroy(s);
    } else {
        MCP_ASSERT(s == NULL);
        MCP_ASSERT(strlen(msg) > 0);
    }
    return 0;
}
