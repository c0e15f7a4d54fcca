/* Value lifetimes: which values die after each node, so the executor can
 * release intermediate tensors as soon as nothing reads them. */
#include <string.h>

#include "graph/graph.h"

/* Marks values of g (the parent of sub) that sub reads through captures. */
static void mark_captures(const mcp_graph *sub, int node, int *last)
{
    for (int v = 0; v < sub->n_values; v++)
        if (sub->values[v].outer >= 0 && last[sub->values[v].outer] < node) last[sub->values[v].outer] = node;
}

mcp_status mcp_graph_plan_lifetimes(mcp_graph *g, mcp_err *err)
{
    int *last = mcp_malloc(((size_t)g->n_values + 1) * sizeof *last);
    if (!last) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int v = 0; v < g->n_values; v++) last[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const mcp_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) last[n->inputs[k]] = i;
        for (int a = 0; a < n->n_attrs; a++) {
            const mcp_attr *at = &n->attrs[a];
            if (at->g) mark_captures(at->g, i, last);
            for (int64_t k = 0; at->graphs && k < at->count; k++) mark_captures(at->graphs[k], i, last);
        }
        /* An output nobody reads dies right after its producer. */
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && last[n->outputs[k]] < i) last[n->outputs[k]] = i;
    }
    /* Values that must outlive the graph's nodes. */
    for (int k = 0; k < g->n_outputs; k++) last[g->outputs[k]] = g->n_nodes;
    for (int k = 0; k < g->n_inputs; k++) last[g->inputs[k]] = g->n_nodes;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].initializer >= 0 || g->values[v].outer >= 0) last[v] = g->n_nodes;

    mcp_free(g->free_start);
    mcp_free(g->free_vals);
    g->free_start = mcp_calloc((size_t)g->n_nodes + 2, sizeof(int));
    g->free_vals = mcp_malloc(((size_t)g->n_values + 1) * sizeof(int));
    if (!g->free_start || !g->free_vals) {
        mcp_free(last);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++)
        if (last[v] >= 0 && last[v] < g->n_nodes) g->free_start[last[v] + 1]++;
    for (int i = 0; i < g->n_nodes; i++) g->free_start[i + 1] += g->free_start[i];
    int *fill = mcp_calloc((size_t)g->n_nodes + 1, sizeof(int));
    if (!fill) {
        mcp_free(last);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++)
        if (last[v] >= 0 && last[v] < g->n_nodes) g->free_vals[g->free_start[last[v]] + fill[last[v]]++] = v;
    mcp_free(fill);
    mcp_free(last);

    for (int i = 0; i < g->n_nodes; i++) {
        const mcp_node *n = &g->nodes[i];
        for (int a = 0; a < n->n_attrs; a++) {
            mcp_status st = MCP_STATUS_OK;
            if (n->attrs[a].g) st = mcp_graph_plan_lifetimes(n->attrs[a].g, err);
            for (int64_t k = 0; st == MCP_STATUS_OK && n->attrs[a].graphs && k < n->attrs[a].count; k++)
                st = mcp_graph_plan_lifetimes(n->attrs[a].graphs[k], err);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    return MCP_STATUS_OK;
}
