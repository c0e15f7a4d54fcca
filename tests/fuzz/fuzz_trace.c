/*
 * libFuzzer target: what a client sends the tracer. The first byte picks
 * the parser: 0, a W3C traceparent (a value that parses formats back to
 * the same text); 1, traceparent and tracestate (split at the first NUL)
 * through mcp_trace_begin / mcp_trace_decide (a kept tracestate is
 * printable ASCII within 512 characters); 2, a trace settings body for the
 * server and for a model (the settings read back are JSON).
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int mode = data[0] % 3;
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    if (mode == 0) {
        mcp_trace_ctx c;
        memset(&c, 0, sizeof c);
        if (mcp_trace_parse_traceparent(text, c.trace_id, c.span_id, &c.flags)) {
            char back[56];
            mcp_trace_format_traceparent(&c, back);
            if (strncmp(text, "00", 2) == 0) MCP_ASSERT(strcmp(back + 2, text + 2) == 0);
            else MCP_ASSERT(strncmp(back + 2, text + 2, 53) == 0);
        }
        free(text);
        return 0;
    }
    mcp_tracer_options o = mcp_tracer_options_default();
    o.endpoint = "http://127.0.0.1:9/v1/traces"; /* nothing is exported: no call ends */
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_tracer *t = NULL;
    MCP_ASSERT(mcp_tracer_create(&o, &t, &err) == MCP_STATUS_OK);
    if (mode == 1) {
        size_t n = strlen(text);
        const char *state = n + 1 < size - 1 ? text + n + 1 : NULL;
        mcp_trace_ctx c;
        mcp_trace_begin(t, &c, text, state, 1);
        mcp_trace_decide(t, &c, "m");
        MCP_ASSERT(c.active);
        size_t sl = strlen(c.state);
        MCP_ASSERT(sl <= MCP_TRACE_STATE_MAX);
        for (size_t i = 0; i < sl; i++) MCP_ASSERT(c.state[i] >= 0x20 && c.state[i] <= 0x7e);
        if (sl) MCP_ASSERT(c.has_parent);
    } else {
        for (int k = 0; k < 2; k++) {
            const char *model = k ? "m" : NULL;
            if (mcp_tracer_settings_update(t, model, text, size - 1, &err) != MCP_STATUS_OK) MCP_ASSERT(msg[0]);
            mcp_buf out = {0};
            mcp_tracer_settings_json(t, model, &out);
            json_error_t jerr;
            json_t *j = json_loadb((const char *)out.data, out.len, 0, &jerr);
            MCP_ASSERT(j && json_is_object(j));
            json_decref(j);
            mcp_buf_free(&out);
        }
    }
    mcp_tracer_destroy(t);
    free(text);
    return 0;
}
