/*
 * The executor: runs a graph's nodes in topological order in a frame that
 * holds this run's values. A frame borrows graph inputs from its caller and
 * captured outer values from its parent frame; everything else it owns.
 */
#include <string.h>

#include "engine/engine.h"

struct mcp_exec {
    const mcp_session *session;
    const mcp_graph *graph;
    mcp_exec *parent;
    mcp_value **vals;
    bool *owned;
    mcp_err *err;
};

static void frame_free(mcp_exec *f)
{
    if (f->vals)
        for (int i = 0; i < f->graph->n_values; i++)
            if (f->owned[i]) mcp_value_free(f->vals[i]);
    mcp_free(f->vals);
    mcp_free(f->owned);
}

static mcp_status frame_init(mcp_exec *f, const mcp_session *s, const mcp_graph *g, mcp_exec *parent,
                             mcp_value *const *inputs, mcp_err *err)
{
    memset(f, 0, sizeof *f);
    f->session = s;
    f->graph = g;
    f->parent = parent;
    f->err = err;
    f->vals = mcp_calloc((size_t)g->n_values + 1, sizeof(mcp_value *));
    f->owned = mcp_calloc((size_t)g->n_values + 1, sizeof(bool));
    if (!f->vals || !f->owned) {
        frame_free(f);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory creating a run frame");
    }
    for (int i = 0; i < g->n_initializers; i++) {
        mcp_value *v = mcp_value_new();
        if (!v) {
            frame_free(f);
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        /* A borrowed view of the session's weights. */
        v->kind = MCP_VALUE_TENSOR;
        v->tensor = g->initializers[i];
        v->tensor.owns_data = false;
        int idx = g->initializer_values[i];
        f->vals[idx] = v;
        f->owned[idx] = true;
    }
    for (int i = 0; i < g->n_values; i++) {
        int outer = g->values[i].outer;
        if (outer < 0) continue;
        MCP_ASSERT(parent && parent->graph == g->parent);
        f->vals[i] = parent->vals[outer];
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (inputs && inputs[i]) f->vals[g->inputs[i]] = inputs[i];
    return MCP_STATUS_OK;
}

static mcp_status run_node(mcp_exec *f, const mcp_node *n)
{
    enum { SMALL = 16 };
    mcp_value *in_small[SMALL], *out_small[SMALL];
    mcp_value **ins = n->n_inputs <= SMALL ? in_small : mcp_calloc((size_t)n->n_inputs, sizeof *ins);
    mcp_value **outs = n->n_outputs <= SMALL ? out_small : mcp_calloc((size_t)n->n_outputs, sizeof *outs);
    mcp_status st = MCP_STATUS_OK;
    if (outs)
        for (int i = 0; i < n->n_outputs; i++) outs[i] = NULL;
    if (!ins || !outs) {
        st = mcp_err_set(f->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        int idx = n->inputs[i];
        ins[i] = idx >= 0 ? f->vals[idx] : NULL;
        if (idx >= 0 && !ins[i]) {
            st = mcp_err_set(f->err, MCP_STATUS_INVALID_ARGUMENT, "node '%s' (%s): input '%s' has no value",
                             n->name, n->op_type, f->graph->values[idx].name);
            goto done;
        }
    }
    /* Backend formats reach only kernels that read them; for the others the
     * frame's value becomes plain, so later readers convert no more. */
    if (!mcp_kernel_accepts_formats(n->kernel))
        for (int i = 0; i < n->n_inputs && st == MCP_STATUS_OK; i++)
            if (ins[i] && ins[i]->kind == MCP_VALUE_TENSOR && ins[i]->tensor.format) {
                st = mcp_tensor_make_plain(&ins[i]->tensor, f->err);
                if (st != MCP_STATUS_OK)
                    mcp_err_prefix(f->err, "node '%s' (%s): input '%s'", n->name, n->op_type,
                                   f->graph->values[n->inputs[i]].name);
            }
    if (st != MCP_STATUS_OK) goto done;
    for (int i = 0; i < n->n_outputs; i++) {
        outs[i] = mcp_value_new();
        if (!outs[i]) {
            st = mcp_err_set(f->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
    }
    mcp_kernel_ctx ctx = {
        .node = n,
        .opset = n->opset,
        .n_inputs = n->n_inputs,
        .inputs = ins,
        .n_outputs = n->n_outputs,
        .outputs = outs,
        .state = n->kernel_state,
        .err = f->err,
        .exec = f,
        .threads = f->session->threads,
    };
    st = n->kernel->run(&ctx);
    if (st == MCP_STATUS_OK) {
        for (int i = 0; i < n->n_outputs; i++) {
            int idx = n->outputs[i];
            if (idx < 0) continue;
            if (f->owned[idx]) mcp_value_free(f->vals[idx]);
            f->vals[idx] = outs[i];
            f->owned[idx] = true;
            outs[i] = NULL;
        }
    }
done:
    if (outs)
        for (int i = 0; i < n->n_outputs; i++) mcp_value_free(outs[i]);
    if (ins != in_small) mcp_free(ins);
    if (outs != out_small) mcp_free(outs);
    return st;
}

mcp_status mcp__exec_graph(const mcp_session *s, const mcp_graph *g, mcp_exec *parent,
                           mcp_value *const *inputs, mcp_value **outputs, mcp_err *err)
{
    mcp_exec f;
    mcp_status st = frame_init(&f, s, g, parent, inputs, err);
    if (st != MCP_STATUS_OK) return st;
    for (int i = 0; i < g->n_nodes && st == MCP_STATUS_OK; i++) {
        st = run_node(&f, &g->nodes[i]);
        /* Release what no later node reads. */
        for (int k = g->free_start[i]; st == MCP_STATUS_OK && k < g->free_start[i + 1]; k++) {
            int idx = g->free_vals[k];
            if (!f.owned[idx]) continue;
            mcp_value_free(f.vals[idx]);
            f.vals[idx] = NULL;
            f.owned[idx] = false;
        }
    }
    for (int i = 0; i < g->n_outputs && st == MCP_STATUS_OK; i++) {
        int idx = g->outputs[i];
        mcp_value *v = f.vals[idx];
        if (!v) {
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "graph output '%s' has no value", g->values[idx].name);
            break;
        }
        if (v->kind == MCP_VALUE_TENSOR && v->tensor.format) {
            st = mcp_tensor_make_plain(&v->tensor, err);
            if (st != MCP_STATUS_OK) break;
        }
        /* Move on the last listing of a value; copy on earlier ones. */
        bool listed_later = false;
        for (int j = i + 1; j < g->n_outputs; j++) listed_later |= g->outputs[j] == idx;
        if (f.owned[idx] && !listed_later && g->values[idx].initializer < 0) {
            /* Move: the frame gives up the value. */
            *outputs[i] = *v;
            memset(v, 0, sizeof *v);
        } else {
            st = mcp_value_copy(outputs[i], v, err);
        }
    }
    frame_free(&f);
    return st;
}

mcp_status mcp_kernel_run_subgraph(mcp_kernel_ctx *ctx, const mcp_graph *g, int n_in,
                                   mcp_value *const *inputs, mcp_value **outputs)
{
    mcp_exec *f = ctx->exec;
    if (n_in != g->n_inputs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_MODEL, "subgraph '%s' takes %d inputs, given %d", g->name,
                         g->n_inputs, n_in);
    if (g->parent != f->graph)
        return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "subgraph '%s' does not belong to this node's graph", g->name);
    for (int i = 0; i < g->n_outputs; i++) mcp_value_clear(outputs[i]);
    mcp_status st = mcp__exec_graph(f->session, g, f, inputs, outputs, f->err);
    if (st != MCP_STATUS_OK) mcp_err_prefix(f->err, "node '%s' (%s): subgraph '%s'", ctx->node->name, ctx->node->op_type, g->name);
    return st;
}
