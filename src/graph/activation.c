/* The fused ops' activations (graph.h, MCP_ACTIVATIONS). */
#include <string.h>

#include "graph/graph.h"

static const struct {
    const char *name;
    int n_params;
} acts[] = {
    [MCP_ACTIVATION_NONE] = {NULL, 0},
#define MCP__ACT_ROW(id, nm, np) [MCP_ACTIVATION_##id] = {nm, np},
    MCP_ACTIVATIONS(MCP__ACT_ROW)
#undef MCP__ACT_ROW
};
_Static_assert(sizeof acts / sizeof acts[0] == MCP_ACTIVATION_COUNT, "one row per activation");

const char *mcp_activation_name(mcp_activation a)
{
    return (int)a > 0 && (int)a < MCP_ACTIVATION_COUNT ? acts[a].name : NULL;
}

int mcp_activation_n_params(mcp_activation a)
{
    return (int)a > 0 && (int)a < MCP_ACTIVATION_COUNT ? acts[a].n_params : 0;
}

mcp_activation mcp_activation_from_name(const char *name)
{
    for (int a = 1; name && a < MCP_ACTIVATION_COUNT; a++)
        if (strcmp(acts[a].name, name) == 0) return (mcp_activation)a;
    return MCP_ACTIVATION_NONE;
}

mcp_status mcp_node_activation(const mcp_node *n, mcp_act *out, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    const char *name = mcp_node_attr_string(n, "activation", NULL);
    int64_t np = 0;
    const float *p = mcp_node_attr_floats(n, "activation_params", &np);
    if (!name) {
        if (np != 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                               "node '%s' (%s): attribute 'activation_params' without 'activation'", n->name,
                               n->op_type);
        return MCP_STATUS_OK;
    }
    mcp_activation a = mcp_activation_from_name(name);
    if (a == MCP_ACTIVATION_NONE)
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "node '%s' (%s): unknown activation '%s'", n->name,
                           n->op_type, name);
    if (np != acts[a].n_params)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                           "node '%s' (%s): activation %s takes %d parameters, 'activation_params' has %lld", n->name,
                           n->op_type, name, acts[a].n_params, (long long)np);
    out->kind = a;
    for (int i = 0; i < np; i++) out->params[i] = p[i];
    return MCP_STATUS_OK;
}
