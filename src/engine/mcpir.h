/*
 * Compiled models (.mcpir): the optimized graph with its weights packed in
 * the layouts this machine's kernels chose, for loads that map the file and
 * copy nothing. See docs/architecture.md, "Compiled models".
 *
 * Layout (little-endian; every section 64-byte aligned):
 *
 *   header   512 bytes: magic "\x89MCPIR\r\n", format version, options,
 *            the stamp (engine, backend, CPU features, threads, options;
 *            NUL-terminated), and offset/length of the four sections
 *   graph    the optimized graph as an ONNX ModelProto (mcp_onnx_export):
 *            initializers are external data at MCP_BLOB_LOCATION, or at
 *            MCP_RELEASED_LOCATION when only their packed form is kept
 *   packed   records {u32 node, u32 slot, u32 desc_len, u32 0, u64 offset,
 *            u64 length} each followed by desc_len bytes of the backend's
 *            layout descriptor, padded to 8
 *   blob     initializer data and packed weights, each 64-byte aligned
 *   source   the ONNX file it was compiled from, to recompile when the
 *            stamp does not match the machine or the options asked for
 */
#ifndef MCP_ENGINE_MCPIR_H
#define MCP_ENGINE_MCPIR_H

#include "engine/engine.h"

#define MCPIR_MAGIC MCP_COMPILED_MAGIC
#define MCPIR_HEADER_SIZE 512
#define MCPIR_STAMP_MAX 256
/* Records in the packed section, and the descriptor bytes of one. */
#define MCPIR_MAX_PACKED (1 << 20)
#define MCPIR_MAX_DESC 4096

/* A parsed .mcpir: pointers into the bytes given to mcp__mcpir_parse (or
 * the mapping of mcp__mcpir_open). */
typedef struct mcpir_file {
    void *map; /* mcp__mcpir_open's mapping, else NULL */
    size_t map_len;
    uint32_t options; /* MCPIR_OPT_* */
    char stamp[MCPIR_STAMP_MAX];
    const uint8_t *graph;
    size_t graph_len;
    mcp_prepacked *packed; /* owned */
    int n_packed;
    mcp_import_blob blob;
    const uint8_t *source;
    size_t source_len;
} mcpir_file;

#define MCPIR_OPT_BF16 1u
#define MCPIR_OPT_FUSE_SUMS 2u

/* True when buf starts with the .mcpir magic. */
bool mcp__mcpir_is(const uint8_t *buf, size_t len);
/* Checks and indexes a whole .mcpir held in buf (bounds of every section
 * and record); *f points into buf. Errors name the part that is wrong. */
mcp_status mcp__mcpir_parse(const uint8_t *buf, size_t len, mcpir_file *f, mcp_err *err);
/* Maps path read-only and parses it. */
mcp_status mcp__mcpir_open(const char *path, mcpir_file *f, mcp_err *err);
void mcp__mcpir_close(mcpir_file *f);
/* The stamp a session with these (effective) settings would write. */
void mcp__mcpir_stamp(const char *backend, int threads, uint32_t options, char *out, size_t cap);
uint32_t mcp__mcpir_options(const mcp_session_options *o);
/* Writes session s (created from the ONNX bytes `source`) as a .mcpir at
 * path (through a temporary file renamed into place). */
mcp_status mcp__mcpir_write(const mcp_session *s, uint32_t options, const uint8_t *source, size_t source_len,
                            const char *path, mcp_err *err);

#endif
