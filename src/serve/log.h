/*
 * The server's log (private to src/serve/ and the server's main): lines of
 * plain text or JSON, an optional access log, levels that Triton's logging
 * API (GET/POST /v2/logging) changes at run time.
 *
 * A line is formatted in a local buffer and written with one write(2), so
 * lines from many threads never interleave and nobody holds a lock while
 * formatting. Everything that used to print on stderr (start-up, the
 * repository's diagnostics, the store's restore, the serving core's
 * messages) goes through mcp_logger_log or a stream from
 * mcp_logger_stream, so --log-level and --log-format hold for all of it.
 */
#ifndef MCP_SERVE_LOG_H
#define MCP_SERVE_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"

typedef enum mcp_log_level {
    MCP_LOG_ERROR,
    MCP_LOG_WARN,
    MCP_LOG_INFO,
    MCP_LOG_VERBOSE,
    MCP_LOG_LEVEL_COUNT
} mcp_log_level;

typedef enum mcp_log_format {
    MCP_LOG_FORMAT_TEXT, /* "2026-12-07T03:08:44.123Z INFO message key=value ..." */
    MCP_LOG_FORMAT_JSON, /* one JSON object per line */
    MCP_LOG_FORMAT_COUNT
} mcp_log_format;

const char *mcp_log_level_name(mcp_log_level l);     /* "error", "warn", "info", "verbose" */
bool mcp_log_level_parse(const char *s, mcp_log_level *out);
const char *mcp_log_format_name(mcp_log_format f);   /* "text", "json" */
bool mcp_log_format_parse(const char *s, mcp_log_format *out);

/* What a line says about a request; every field optional (NULL, or -1 for
 * the numbers). Strings are escaped as the format needs. */
typedef struct mcp_log_fields {
    const char *request_id, *trace_id, *span_id;
    const char *model, *version, *protocol, *transport, *method, *route, *tenant;
    int status;          /* HTTP status or gRPC code; -1 = none */
    int64_t duration_us; /* -1 = none */
} mcp_log_fields;
#define MCP_LOG_FIELDS_NONE ((mcp_log_fields){.status = -1, .duration_us = -1})

typedef struct mcp_logger_options {
    mcp_log_level level;  /* this and the more severe are on; default info */
    mcp_log_format format;
    int fd;               /* default 2 (stderr) */
    int access_fd;        /* the access log; -1 = none (default) */
    const char *name;     /* prefix of text lines; default "mcp2026-server" */
} mcp_logger_options;
mcp_logger_options mcp_logger_options_default(void);

typedef struct mcp_logger mcp_logger;
mcp_status mcp_logger_create(const mcp_logger_options *o, mcp_logger **out, mcp_err *err);
/* Closes the streams it made (not the fds). NULL does nothing. */
void mcp_logger_destroy(mcp_logger *lg);

bool mcp_logger_enabled(const mcp_logger *lg, mcp_log_level l);
void mcp_logger_log(mcp_logger *lg, mcp_log_level l, const mcp_log_fields *f, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* One access-log line for a finished call (no-op without an access log). */
bool mcp_logger_access_enabled(const mcp_logger *lg);
void mcp_logger_access(mcp_logger *lg, const mcp_log_fields *f);

/* A stdio stream whose lines become log lines at level l (for code that
 * reports to a FILE *); owned by the logger. */
FILE *mcp_logger_stream(mcp_logger *lg, mcp_log_level l);

/* Triton's logging settings: {"log_file": "", "log_info": b, "log_warning":
 * b, "log_error": b, "log_verbose_level": n, "log_format": "default" |
 * "ISO8601" | "json"}. An update takes any of those keys; log_file is
 * refused (the log goes where the operator sent it, never to a path a
 * client names). INVALID_ARGUMENT names the key. */
void mcp_logger_settings_json(const mcp_logger *lg, mcp_buf *out);
mcp_status mcp_logger_settings_update(mcp_logger *lg, const char *body, size_t len, mcp_err *err);

#endif
