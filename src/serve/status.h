/*
 * The live status page (private to src/serve/): GET / serves a page whose
 * HTML, CSS and JavaScript are compiled into the binary (src/serve/status/,
 * embedded by cmake/embed.cmake), and the page refreshes itself from
 * GET /v2/status, the JSON this file builds. http.c owns the routes; this
 * file owns what they answer.
 */
#ifndef MCP_SERVE_STATUS_H
#define MCP_SERVE_STATUS_H

#include "serve/frontend.h"

typedef enum mcp__status_asset_id {
    MCP__STATUS_ASSET_HTML = 0, /* GET / */
    MCP__STATUS_ASSET_CSS,      /* GET /status/status.css */
    MCP__STATUS_ASSET_JS,       /* GET /status/status.js */
    MCP__STATUS_ASSET_COUNT,
} mcp__status_asset_id;

/* One asset: its bytes have static storage (the binary's). */
typedef struct mcp__status_asset {
    const char *content_type;
    const char *data;
    size_t len;
} mcp__status_asset;

mcp__status_asset mcp__status_asset_get(mcp__status_asset_id id);

/* Response headers as name, value pairs ending in NULL (static storage):
 * the page and its assets get the Content-Security-Policy that allows
 * nothing but this origin's script, style and fetch, nosniff, and
 * Cache-Control: no-cache; the JSON gets nosniff and no-store. */
extern const char *const mcp__status_page_headers[];
extern const char *const mcp__status_json_headers[];

/* The status document (see status.c for its shape) appended to out; on
 * out of memory out->failed is set and the caller answers 500. */
void mcp__status_json(mcp_frontend *fe, mcp_metrics_keep_fn keep, void *user, mcp_buf *out);

#endif
