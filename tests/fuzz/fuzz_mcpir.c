/* libFuzzer target: the compiled model (.mcpir) reader and the load of a
 * compiled graph (header and section bounds, packed-weight records, the
 * exported graph with its external data in the data area, the kernels'
 * adoption of packed weights, the fallback to the embedded ONNX). The stamp
 * is rewritten to this machine's first, so the compiled path runs here
 * whatever machine made the corpus. Any input must load or fail with a
 * message; never crash, hang or leak. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/mcpir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mcp_session_options o = mcp_session_options_default();
    o.threads = 1;
    uint8_t *copy = mcp_malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    if (size >= MCPIR_HEADER_SIZE && mcp__mcpir_is(copy, size)) {
        /* The options bits as written, the rest of the stamp as here. */
        uint32_t opts = (uint32_t)copy[12] | (uint32_t)copy[13] << 8;
        o.bf16 = (opts & MCPIR_OPT_BF16) != 0;
        o.fuse_quantized_sums = (opts & MCPIR_OPT_FUSE_SUMS) != 0;
        char stamp[MCPIR_STAMP_MAX];
        mcp__mcpir_stamp("auto", 1, mcp__mcpir_options(&o), stamp, sizeof stamp);
        memset(copy + 80, 0, MCPIR_STAMP_MAX);
        memcpy(copy + 80, stamp, strlen(stamp));
    }
    char msg[512] = "";
    mcp_session *s = NULL;
    mcp_status st = mcp_session_create_from_memory(copy, size, NULL, &o, &s, msg, sizeof msg);
    mcp_free(copy);
    if (st == MCP_STATUS_OK) {
        MCP_ASSERT(s != NULL);
        mcp_session_destroy(s);
    } else {
        MCP_ASSERT(s == NULL);
        MCP_ASSERT(strlen(msg) > 0);
    }
    return 0;
}
