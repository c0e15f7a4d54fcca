/* Shared by the codec fuzz targets. */
#ifndef MCP_TESTS_FUZZ_UTIL_H
#define MCP_TESTS_FUZZ_UTIL_H

#include <stdbool.h>
#include <string.h>

#include "tensor/tensor.h"

/* Same dtype, shape and elements (strings compared as text). */
static inline bool fuzz_tensor_same(const mcp_tensor *a, const mcp_tensor *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank) return false;
    for (int k = 0; k < a->rank; k++)
        if (a->dims[k] != b->dims[k]) return false;
    int64_t n = mcp_tensor_numel(a);
    if (a->dtype == MCP_DTYPE_STRING) {
        for (int64_t i = 0; i < n; i++)
            if (strcmp(((char **)a->data)[i], ((char **)b->data)[i]) != 0) return false;
        return true;
    }
    return n == 0 || memcmp(a->data, b->data, (size_t)n * (size_t)mcp_dtype_size(a->dtype)) == 0;
}

#endif
