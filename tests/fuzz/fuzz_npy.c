/* libFuzzer target: the .npy reader (mcpctl inputs). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tensor/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_tensor t;
    if (mcp_npy_read_mem(data, size, &t, &err) == MCP_STATUS_OK) {
        MCP_ASSERT((size_t)mcp_tensor_numel(&t) * (size_t)(t.dtype == MCP_DTYPE_STRING ? 1 : mcp_dtype_size(t.dtype)) <= size ||
                   t.dtype == MCP_DTYPE_STRING);
        mcp_tensor_release(&t);
    } else {
        MCP_ASSERT(strlen(msg) > 0);
    }
    return 0;
}
