/* Internals of the catalog shared with its tests and fuzz target. */
#ifndef MCP_REGISTRY_CATALOG_UTIL_H
#define MCP_REGISTRY_CATALOG_UTIL_H

#include "registry/descriptor_util.h"
#include "registry/registry.h"

#include <sqlite3.h>

bool mcp__version_state_parse(const char *s, mcp_version_state *out);
/* The connection, for tests that set limits or damage rows. */
sqlite3 *mcp__catalog_db(mcp_catalog *c);

#endif
