/* libFuzzer target: what mcpctl reads from a server (src/app/mcpctl_wire.c):
 * inference responses (JSON and binary tensor data), model metadata and
 * Prometheus metrics text. The first byte picks the parser:
 *   'J' + body              response, whole body JSON
 *   'B' + u32 LE n + body   response with Inference-Header-Content-Length n
 *   'M' + body              model metadata
 *   'P' + body              /metrics text
 * mcpctl's sources are compiled into the mcpctl executable, not a library,
 * so the one file that parses is included here. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "app/mcpctl_wire.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    msg[0] = '\0';
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    if (data[0] == 'J' || data[0] == 'B') {
        int64_t header_len = -1;
        if (data[0] == 'B') {
            if (len < 4) return 0;
            header_len = (int64_t)((uint32_t)body[0] | (uint32_t)body[1] << 8 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 24);
            body += 4;
            len -= 4;
        }
        mcpctl_named *outs = NULL;
        int n = -1;
        if (mcpctl_v2_decode(body, len, header_len, &outs, &n, &err) == MCP_STATUS_OK) {
            MCP_ASSERT(n >= 0 && (n == 0 || outs));
            for (int i = 0; i < n; i++) {
                MCP_ASSERT(outs[i].name && outs[i].t.rank <= MCP_MAX_RANK);
                /* Decoded data never exceeds what the body could carry. */
                if (outs[i].t.dtype != MCP_DTYPE_STRING)
                    MCP_ASSERT(mcp_tensor_nbytes(&outs[i].t) <= len * 8 + 8);
            }
            mcpctl_named_free(outs, n);
        } else {
            MCP_ASSERT(outs == NULL && msg[0] != '\0');
        }
    } else if (data[0] == 'M') {
        mcpctl_model_meta m;
        if (mcpctl_model_meta_parse(body, len, &m, &err) == MCP_STATUS_OK) {
            for (int i = 0; i < m.n_inputs; i++) MCP_ASSERT(m.inputs[i].name && m.inputs[i].rank <= MCP_MAX_RANK);
            mcpctl_model_meta_free(&m);
        } else {
            MCP_ASSERT(msg[0] != '\0' && m.inputs == NULL);
        }
    } else if (data[0] == 'P') {
        mcpctl_server_sums s = {0};
        mcpctl_metrics_parse((const char *)body, len, "digits", &s);
    }
    return 0;
}
