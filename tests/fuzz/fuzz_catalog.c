/* libFuzzer target: a catalog file from elsewhere (a damaged disk, a store
 * copied from another host). The bytes are written as catalog.db and opened;
 * whatever SQLite makes of them, the catalog answers with rows it checked
 * or with an error, never a crash. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry/catalog_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool count_event(void *user, const mcp_catalog_event *e)
{
    (*(int *)user)++;
    return e->action != NULL && *(int *)user < 1000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[256];
    if (!path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/mcp-fuzz-catalog-%d.db", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    char msg[512];
    mcp_err err = {msg, sizeof msg};
    mcp_catalog *c = NULL;
    if (mcp_catalog_open(path, &c, &err) == MCP_STATUS_OK) {
        mcp_catalog_model *m = NULL;
        int n = 0;
        if (mcp_catalog_models(c, &m, &n, &err) == MCP_STATUS_OK) {
            for (int i = 0; i < n; i++) {
                MCP_ASSERT(mcp__desc_name_valid(m[i].name));
                MCP_ASSERT(!m[i].has_version || mcp_digest_valid(m[i].manifest));
                MCP_ASSERT(m[i].state >= 0 && m[i].state < MCP_VERSION_STATE_COUNT);
            }
            mcp_free(m);
        }
        int events = 0;
        mcp_catalog_events(c, "digits", 0, 100, count_event, &events, &err);
        char problem[128];
        mcp_catalog_check(c, problem, sizeof problem, &err);
        mcp_catalog_close(c);
    } else {
        MCP_ASSERT(c == NULL && msg[0]);
    }
    unlink(path);
    char side[300];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    return 0;
}
