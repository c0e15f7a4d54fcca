/* libFuzzer target: what a model store holds and a pulled store may bring
 * from elsewhere: index.json, and (when the input starts with "M") a
 * version's manifest. Every accepted document must be safe to use: names
 * valid, digests well formed, titles relative paths inside the version. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "registry/store_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    if (size && data[0] == 'M') {
        mcp_store_manifest *m = (mcp_store_manifest *)1;
        mcp_status st = mcp__store_parse_manifest((const char *)data + 1, size - 1, &m, &err);
        if (st == MCP_STATUS_OK) {
            MCP_ASSERT(m && m->name && m->version && mcp_digest_valid(m->config.digest));
            for (int i = 0; i < m->n_files; i++) {
                MCP_ASSERT(mcp__store_title_valid(m->files[i].title));
                MCP_ASSERT(strstr(m->files[i].title, "..") == NULL || strstr(m->files[i].title, "/../") == NULL);
                MCP_ASSERT(mcp_digest_valid(m->files[i].blob.digest) && m->files[i].blob.size >= 0);
            }
            mcp_store_manifest_free(m);
        } else {
            MCP_ASSERT(m == NULL && msg[0]);
        }
        return 0;
    }
    json_t *doc = (json_t *)1;
    mcp_status st = mcp__store_parse_index((const char *)data, size, &doc, &err);
    if (st == MCP_STATUS_OK) {
        json_t *list = json_object_get(doc, "manifests");
        MCP_ASSERT(json_is_array(list));
        for (size_t i = 0; i < json_array_size(list); i++) {
            json_t *d = json_object_get(json_array_get(list, i), "digest");
            MCP_ASSERT(json_is_string(d) && mcp_digest_valid(json_string_value(d)));
        }
        json_decref(doc);
    } else {
        MCP_ASSERT(doc == NULL && msg[0]);
    }
    return 0;
}
