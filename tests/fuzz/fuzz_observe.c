/*
 * libFuzzer target: what a client sends the tracer and the log. The first
 * byte picks the parser: 0, a W3C traceparent (a value that parses formats
 * back to the same text); 1, traceparent and tracestate (split at the
 * first NUL) through mcp_trace_begin / mcp_trace_decide (a kept tracestate
 * is printable ASCII within 512 characters); 2, a trace settings body for
 * the server and for a model (the settings read back are JSON); 3, a
 * logging settings body (a refused one changes nothing; the settings read
 * back are JSON), then a line logged with the input as its message and
 * fields (one line, however hostile the bytes).
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "serve/log.h"
#include "serve/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int mode = data[0] % 4;
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
    if (mode == 3) {
        int fds[2];
        MCP_ASSERT(pipe(fds) == 0);
        fcntl(fds[1], F_SETFL, O_NONBLOCK); /* a full pipe drops lines, never blocks */
        mcp_logger_options lo = mcp_logger_options_default();
        lo.fd = lo.access_fd = fds[1];
        mcp_logger *lg = NULL;
        char msg[512];
        mcp_err err = {msg, sizeof msg};
        MCP_ASSERT(mcp_logger_create(&lo, &lg, &err) == MCP_STATUS_OK);
        mcp_buf before = {0}, after = {0};
        mcp_logger_settings_json(lg, &before);
        if (mcp_logger_settings_update(lg, text, size - 1, &err) != MCP_STATUS_OK) {
            MCP_ASSERT(msg[0]);
            mcp_logger_settings_json(lg, &after);
            MCP_ASSERT(before.len == after.len && !memcmp(before.data, after.data, before.len));
        }
        mcp_buf_reset(&after);
        mcp_logger_settings_json(lg, &after);
        json_error_t jerr;
        json_t *j = json_loadb((const char *)after.data, after.len, 0, &jerr);
        MCP_ASSERT(j && json_is_object(j));
        json_decref(j);
        if (size > 4096) text[4096] = '\0'; /* the lines must fit the pipe */
        mcp_log_fields f = MCP_LOG_FIELDS_NONE;
        f.request_id = f.model = text;
        f.status = 200;
        mcp_logger_log(lg, MCP_LOG_ERROR, &f, "%s", text);
        mcp_logger_access(lg, &f);
        char line[1 << 16];
        ssize_t n = read(fds[0], line, sizeof line - 1);
        /* Two writes, two lines: no byte of the input starts a line of
         * its own (both fit the pipe: messages are cut at 2 KiB). */
        MCP_ASSERT(n > 0 && line[n - 1] == '\n');
        int newlines = 0;
        for (ssize_t i = 0; i < n; i++) newlines += line[i] == '\n';
        MCP_ASSERT(newlines == 2);
        mcp_buf_free(&before);
        mcp_buf_free(&after);
        mcp_logger_destroy(lg);
        close(fds[0]);
        close(fds[1]);
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
