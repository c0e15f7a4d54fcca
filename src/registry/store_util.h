/*
 * Internals of the model store shared with its tests and fuzz targets:
 * the media types and annotation keys of its OCI manifests, and the
 * parsers of what a store holds.
 */
#ifndef MCP_REGISTRY_STORE_UTIL_H
#define MCP_REGISTRY_STORE_UTIL_H

#include <jansson.h>

#include "registry/descriptor_util.h"
#include "registry/registry.h"

#define MCP_STORE_MANIFEST_TYPE "application/vnd.oci.image.manifest.v1+json"
#define MCP_STORE_ARTIFACT_TYPE "application/vnd.mcp2026.model.v1"
#define MCP_STORE_DESCRIPTOR_TYPE "application/vnd.mcp2026.descriptor.v1+yaml"
#define MCP_STORE_FILE_TYPE "application/vnd.mcp2026.model.file.v1"
#define MCP_STORE_REF_ANNOTATION "org.opencontainers.image.ref.name"
#define MCP_STORE_TITLE_ANNOTATION "org.opencontainers.image.title"
#define MCP_STORE_NAME_ANNOTATION "org.mcp2026.model.name"
#define MCP_STORE_VERSION_ANNOTATION "org.mcp2026.model.version"
#define MCP_STORE_IO_ANNOTATION "org.mcp2026.model.io"
#define MCP_STORE_FINGERPRINT_ANNOTATION "org.mcp2026.model.fingerprint"

/* "name:version" with a model name and a version of letters, digits and _ . + - */
bool mcp__store_ref_valid(const char *ref);
/* A relative path without empty, "." or ".." segments, control characters
 * or backslashes: what a layer's title may be. */
bool mcp__store_title_valid(const char *title);
/* index.json: checked (schema version, every entry's digest and size, our
 * names well formed and unique). *out is the document (json_decref). */
mcp_status mcp__store_parse_index(const char *text, size_t len, json_t **out, mcp_err *err);
/* A version's manifest, checked the same way; its files' titles valid and
 * unique. */
mcp_status mcp__store_parse_manifest(const char *text, size_t len, mcp_store_manifest **out, mcp_err *err);

#endif
