/*
 * The server's log: text or JSON lines, an access log, run-time levels.
 * See log.h.
 */
#define _GNU_SOURCE /* fopencookie */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve/log.h"

static const char *const level_names[] = {"error", "warn", "info", "verbose"};
static const char *const level_tags[] = {"ERROR", "WARN", "INFO", "VERBOSE"};
static const char *const format_names[] = {"text", "json"};
_Static_assert(sizeof level_names / sizeof level_names[0] == MCP_LOG_LEVEL_COUNT, "one name per level");
_Static_assert(sizeof level_tags / sizeof level_tags[0] == MCP_LOG_LEVEL_COUNT, "one tag per level");
_Static_assert(sizeof format_names / sizeof format_names[0] == MCP_LOG_FORMAT_COUNT, "one name per format");

const char *mcp_log_level_name(mcp_log_level l) { return (unsigned)l < MCP_LOG_LEVEL_COUNT ? level_names[l] : "?"; }
const char *mcp_log_format_name(mcp_log_format f) { return (unsigned)f < MCP_LOG_FORMAT_COUNT ? format_names[f] : "?"; }

bool mcp_log_level_parse(const char *s, mcp_log_level *out)
{
    for (int i = 0; s && i < MCP_LOG_LEVEL_COUNT; i++)
        if (!strcmp(s, level_names[i])) {
            *out = (mcp_log_level)i;
            return true;
        }
    if (s && !strcmp(s, "warning")) {
        *out = MCP_LOG_WARN;
        return true;
    }
    return false;
}

bool mcp_log_format_parse(const char *s, mcp_log_format *out)
{
    for (int i = 0; s && i < MCP_LOG_FORMAT_COUNT; i++)
        if (!strcmp(s, format_names[i])) {
            *out = (mcp_log_format)i;
            return true;
        }
    return false;
}

typedef struct log_stream {
    mcp_logger *lg;
    mcp_log_level level;
    char line[1024]; /* a line still arriving */
    size_t len;
} log_stream;

struct mcp_logger {
    /* Triton's switches are independent: bit l says level l is on. */
    atomic_uint on;
    atomic_int verbose_level;
    atomic_int format;
    int fd, access_fd;
    char *name;
    FILE *streams[MCP_LOG_LEVEL_COUNT];
    log_stream *cookies[MCP_LOG_LEVEL_COUNT];
};

mcp_logger_options mcp_logger_options_default(void)
{
    return (mcp_logger_options){.level = MCP_LOG_INFO, .format = MCP_LOG_FORMAT_TEXT, .fd = 2, .access_fd = -1,
                                .name = "mcp2026-server"};
}

static unsigned mask_upto(mcp_log_level l)
{
    unsigned m = 0;
    for (int i = 0; i <= (int)l && i < MCP_LOG_VERBOSE; i++) m |= 1u << i;
    return m;
}

mcp_status mcp_logger_create(const mcp_logger_options *o, mcp_logger **out, mcp_err *err)
{
    *out = NULL;
    mcp_logger *lg = mcp_calloc(1, sizeof *lg);
    if (!lg || !(lg->name = mcp_strdup(o->name ? o->name : "mcp2026-server"))) {
        mcp_free(lg);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    atomic_init(&lg->on, mask_upto(o->level));
    atomic_init(&lg->verbose_level, o->level == MCP_LOG_VERBOSE ? 1 : 0);
    atomic_init(&lg->format, (int)o->format);
    lg->fd = o->fd;
    lg->access_fd = o->access_fd;
    *out = lg;
    return MCP_STATUS_OK;
}

void mcp_logger_destroy(mcp_logger *lg)
{
    if (!lg) return;
    for (int i = 0; i < MCP_LOG_LEVEL_COUNT; i++)
        if (lg->streams[i]) fclose(lg->streams[i]); /* flushes a last partial line */
    for (int i = 0; i < MCP_LOG_LEVEL_COUNT; i++) mcp_free(lg->cookies[i]);
    mcp_free(lg->name);
    mcp_free(lg);
}

bool mcp_logger_enabled(const mcp_logger *lg, mcp_log_level l)
{
    if (!lg) return false;
    if (l == MCP_LOG_VERBOSE) return atomic_load_explicit(&lg->verbose_level, memory_order_relaxed) > 0;
    return (atomic_load_explicit(&lg->on, memory_order_relaxed) >> l) & 1u;
}

bool mcp_logger_access_enabled(const mcp_logger *lg) { return lg && lg->access_fd >= 0; }

/* ---- formatting ---- */

static void put_time(mcp_buf *b)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char t[40];
    strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
    mcp_buf_printf(b, "%s.%03ldZ", t, ts.tv_nsec / 1000000);
}

/* Text: control characters become '?', so no value can start a line of
 * its own (a forged entry) or move the cursor. */
static void put_text(mcp_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char ch = c < 0x20 || c == 0x7f ? '?' : (char)c;
        mcp_buf_append(b, &ch, 1);
    }
}

static void put_field(mcp_buf *b, bool json, const char *key, const char *value)
{
    if (!value || !value[0]) return;
    if (json) {
        mcp_buf_printf(b, ",\"%s\":", key);
        mcp_buf_json_string(b, value);
        return;
    }
    mcp_buf_printf(b, " %s=", key);
    bool quote = strpbrk(value, " \"=") != NULL;
    if (quote) mcp_buf_puts(b, "\"");
    put_text(b, value, strlen(value));
    if (quote) mcp_buf_puts(b, "\"");
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* a log that cannot be written is dropped, never waited for */
        c += w;
        n -= (size_t)w;
    }
}

static void emit(mcp_logger *lg, int fd, mcp_log_level l, const mcp_log_fields *f, const char *msg, size_t msg_len)
{
    bool json = atomic_load_explicit(&lg->format, memory_order_relaxed) == MCP_LOG_FORMAT_JSON;
    mcp_buf b = {0};
    if (json) {
        mcp_buf_puts(&b, "{\"time\":\"");
        put_time(&b);
        mcp_buf_printf(&b, "\",\"level\":\"%s\",\"message\":", level_names[l]);
        mcp_buf_json_stringn(&b, msg, msg_len);
    } else {
        put_time(&b);
        mcp_buf_printf(&b, " %s %s: ", level_tags[l], lg->name);
        put_text(&b, msg, msg_len);
    }
    if (f) {
        put_field(&b, json, "request_id", f->request_id);
        put_field(&b, json, "trace_id", f->trace_id);
        put_field(&b, json, "span_id", f->span_id);
        put_field(&b, json, "model", f->model);
        put_field(&b, json, "version", f->version);
        put_field(&b, json, "protocol", f->protocol);
        put_field(&b, json, "transport", f->transport);
        put_field(&b, json, "method", f->method);
        put_field(&b, json, "route", f->route);
        put_field(&b, json, "tenant", f->tenant);
        if (f->status >= 0) mcp_buf_printf(&b, json ? ",\"status\":%d" : " status=%d", f->status);
        if (f->duration_us >= 0)
            mcp_buf_printf(&b, json ? ",\"duration_ms\":%.3f" : " duration_ms=%.3f", (double)f->duration_us / 1000.0);
    }
    mcp_buf_puts(&b, json ? "}\n" : "\n");
    if (!b.failed) write_all(fd, b.data, b.len);
    mcp_buf_free(&b);
}

void mcp_logger_log(mcp_logger *lg, mcp_log_level l, const mcp_log_fields *f, const char *fmt, ...)
{
    if (!mcp_logger_enabled(lg, l)) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    while (len && msg[len - 1] == '\n') len--;
    emit(lg, lg->fd, l, f, msg, len);
}

void mcp_logger_access(mcp_logger *lg, const mcp_log_fields *f)
{
    if (!mcp_logger_access_enabled(lg)) return;
    char msg[256];
    int n = snprintf(msg, sizeof msg, "%s %s %d", f->method ? f->method : "", f->route ? f->route : "", f->status);
    emit(lg, lg->access_fd, MCP_LOG_INFO, f, msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

/* ---- streams ---- */

static ssize_t stream_write(void *cookie, const char *buf, size_t size)
{
    log_stream *s = cookie;
    for (size_t i = 0; i < size; i++) {
        if (buf[i] == '\n' || s->len == sizeof s->line - 1) {
            if (s->len) mcp_logger_log(s->lg, s->level, NULL, "%.*s", (int)s->len, s->line);
            s->len = 0;
            if (buf[i] == '\n') continue;
        }
        s->line[s->len++] = buf[i];
    }
    return (ssize_t)size;
}

static int stream_close(void *cookie)
{
    log_stream *s = cookie;
    if (s->len) mcp_logger_log(s->lg, s->level, NULL, "%.*s", (int)s->len, s->line);
    s->len = 0;
    return 0;
}

FILE *mcp_logger_stream(mcp_logger *lg, mcp_log_level l)
{
    if (!lg || (unsigned)l >= MCP_LOG_LEVEL_COUNT) return NULL;
    if (lg->streams[l]) return lg->streams[l];
    log_stream *s = mcp_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->lg = lg;
    s->level = l;
    cookie_io_functions_t io = {.write = stream_write, .close = stream_close};
    FILE *f = fopencookie(s, "w", io);
    if (!f) {
        mcp_free(s);
        return NULL;
    }
    setvbuf(f, NULL, _IOLBF, 0);
    lg->streams[l] = f;
    lg->cookies[l] = s;
    return f;
}

/* ---- Triton's logging settings ---- */

void mcp_logger_settings_json(const mcp_logger *lg, mcp_buf *out)
{
    unsigned on = atomic_load(&lg->on);
    int format = atomic_load(&lg->format);
    mcp_buf_printf(out,
                   "{\"log_file\":\"\",\"log_info\":%s,\"log_warning\":%s,\"log_error\":%s,\"log_verbose_level\":%d,"
                   "\"log_format\":\"%s\"}",
                   on & (1u << MCP_LOG_INFO) ? "true" : "false", on & (1u << MCP_LOG_WARN) ? "true" : "false",
                   on & (1u << MCP_LOG_ERROR) ? "true" : "false", atomic_load(&lg->verbose_level),
                   format == MCP_LOG_FORMAT_JSON ? "json" : "default");
}

mcp_status mcp_logger_settings_update(mcp_logger *lg, const char *body, size_t len, mcp_err *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "body is not JSON: %s (byte %d)", jerr.text, jerr.position);
    mcp_status st = MCP_STATUS_OK;
    unsigned on = atomic_load(&lg->on);
    int verbose = atomic_load(&lg->verbose_level), format = atomic_load(&lg->format);
    const char *key;
    json_t *v;
    if (!json_is_object(root)) {
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "body must be a JSON object of log settings");
        goto out;
    }
    /* Checked whole before anything changes: a refused body changes nothing. */
    json_object_foreach(root, key, v)
    {
        static const char *const switches[] = {"log_error", "log_warning", "log_info"};
        bool known = false;
        for (int i = 0; i < 3; i++)
            if (!strcmp(key, switches[i])) {
                known = true;
                if (!json_is_boolean(v)) {
                    st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s' must be true or false", key);
                    goto out;
                }
                on = json_is_true(v) ? on | (1u << i) : on & ~(1u << i);
            }
        if (known) continue;
        if (!strcmp(key, "log_verbose_level")) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'log_verbose_level' must be an integer from 0 to 100");
                goto out;
            }
            verbose = (int)json_integer_value(v);
        } else if (!strcmp(key, "log_format")) {
            const char *f = json_is_string(v) ? json_string_value(v) : "";
            if (!strcmp(f, "default") || !strcmp(f, "ISO8601") || !strcmp(f, "text")) format = MCP_LOG_FORMAT_TEXT;
            else if (!strcmp(f, "json")) format = MCP_LOG_FORMAT_JSON;
            else {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'log_format' must be \"default\", \"ISO8601\" or \"json\"");
                goto out;
            }
        } else if (!strcmp(key, "log_file")) {
            if (!(json_is_string(v) && !json_string_value(v)[0])) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                 "'log_file' is not supported: the log goes where the server was started to send it, never to "
                                 "a file a client names");
                goto out;
            }
        } else {
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                             "unknown log setting '%.64s' (log_file, log_info, log_warning, log_error, log_verbose_level, "
                             "log_format)",
                             key);
            goto out;
        }
    }
    atomic_store(&lg->on, on);
    atomic_store(&lg->verbose_level, verbose);
    atomic_store(&lg->format, format);
out:
    json_decref(root);
    return st;
}
