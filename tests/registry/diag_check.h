/* Helpers shared by the descriptor and Triton config tests: find a
 * diagnostic by field path and check its line:column and message. */
#ifndef MCP_TESTS_DIAG_CHECK_H
#define MCP_TESTS_DIAG_CHECK_H

#include <stdio.h>
#include <string.h>

#include "registry/registry.h"
#include "test_util.h"

/* The diagnostic whose path is exactly `path`, or NULL. */
static inline const mcp_diag *find_diag(const mcp_diags *d, const char *path)
{
    for (int i = 0; i < d->count; i++)
        if (strcmp(d->items[i].path, path) == 0) return &d->items[i];
    return NULL;
}

static inline void print_diags(const mcp_diags *d, const char *file)
{
    char buf[8192];
    mcp_diags_format(d, file, buf, sizeof buf);
    fprintf(stderr, "%s", buf);
}

#define CHECK_DIAG(diags, path_, line_, col_, needle)                                    \
    do {                                                                                 \
        const mcp_diag *g_ = find_diag(&(diags), (path_));                              \
        TU_CHECK(g_ != NULL);                                                            \
        if (!g_) {                                                                       \
            fprintf(stderr, "  no diagnostic for '%s'; have:\n", (path_));               \
            print_diags(&(diags), "source");                                             \
            break;                                                                       \
        }                                                                                \
        TU_CHECK_INT(g_->line, (line_));                                                 \
        TU_CHECK_INT(g_->col, (col_));                                                   \
        TU_CHECK_CONTAINS(g_->message, (needle));                                        \
    } while (0)

#endif
