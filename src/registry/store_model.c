/*
 * A loaded model version into the store: its descriptor, its model file and
 * the labels files its steps read, each titled by its path relative to the
 * model file's folder (its file name when it lies elsewhere), with the I/O
 * signature the version serves.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/llm.h"
#include "registry/store_util.h"

static json_t *io_list(const mcp_tensor_meta *m, int n)
{
    json_t *list = json_array();
    for (int i = 0; list && i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; shape && d < m[i].rank; d++) json_array_append_new(shape, json_integer(m[i].dims[d]));
        json_array_append_new(list, json_pack("{s:s, s:s, s:o}", "name", m[i].name, "datatype", mcp_dtype_name(m[i].dtype),
                                              "shape", shape ? shape : json_array()));
    }
    return list;
}

/* The graph's structure, canonically: every node's op, domain, opset and
 * attribute names, its inputs and outputs as value numbers (graph inputs,
 * initializers and node outputs are numbered in graph order), and each
 * initializer's dtype and shape. Subgraphs count by their own structure. */
static void graph_structure(mcp_sha256 *h, const mcp_graph *g, int depth)
{
    char line[512];
    int n = snprintf(line, sizeof line, "graph %d: %d values, %d nodes, %d inputs, %d outputs, %d initializers\n", depth,
                     g->n_values, g->n_nodes, g->n_inputs, g->n_outputs, g->n_initializers);
    mcp_sha256_update(h, line, (size_t)n);
    for (int i = 0; i < g->n_initializers; i++) {
        const mcp_tensor *t = &g->initializers[i];
        n = snprintf(line, sizeof line, "init %d %s [", g->initializer_values[i], mcp_dtype_name(t->dtype));
        for (int d = 0; d < t->rank && n < (int)sizeof line - 24; d++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%lld", d ? "," : "", (long long)t->dims[d]);
        n += snprintf(line + n, sizeof line - (size_t)n, "]\n");
        mcp_sha256_update(h, line, (size_t)n);
    }
    for (int i = 0; i < g->n_inputs; i++) {
        n = snprintf(line, sizeof line, "in %d\n", g->inputs[i]);
        mcp_sha256_update(h, line, (size_t)n);
    }
    for (int i = 0; i < g->n_outputs; i++) {
        n = snprintf(line, sizeof line, "out %d\n", g->outputs[i]);
        mcp_sha256_update(h, line, (size_t)n);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const mcp_node *nd = &g->nodes[i];
        n = snprintf(line, sizeof line, "node %s:%s:%d (", nd->domain ? nd->domain : "", nd->op_type, nd->opset);
        mcp_sha256_update(h, line, (size_t)n);
        for (int k = 0; k < nd->n_inputs; k++) {
            n = snprintf(line, sizeof line, "%s%d", k ? "," : "", nd->inputs[k]);
            mcp_sha256_update(h, line, (size_t)n);
        }
        mcp_sha256_update(h, ") -> (", 6);
        for (int k = 0; k < nd->n_outputs; k++) {
            n = snprintf(line, sizeof line, "%s%d", k ? "," : "", nd->outputs[k]);
            mcp_sha256_update(h, line, (size_t)n);
        }
        mcp_sha256_update(h, ")", 1);
        for (int k = 0; k < nd->n_attrs; k++) {
            const mcp_attr *a = &nd->attrs[k];
            mcp_sha256_update(h, " ", 1);
            mcp_sha256_update(h, a->name, strlen(a->name));
            if (a->type == MCP_ATTR_GRAPH && a->g) graph_structure(h, a->g, depth + 1);
        }
        mcp_sha256_update(h, "\n", 1);
    }
}

/* A language model's computation shape: architecture, hyperparameters,
 * vocabulary size and weight bytes (not the weights' values). */
static void llm_structure(mcp_sha256 *h, const mcp_llm_model *m)
{
    mcp_llm_info i;
    mcp_llm_model_info(m, &i);
    char s[512];
    int n = snprintf(s, sizeof s, "llm %s vocab %lld embd %lld layers %lld heads %lld/%lld dim %lld ff %lld rot %lld bytes %llu\n",
                     i.arch, (long long)i.n_vocab, (long long)i.n_embd, (long long)i.n_layer, (long long)i.n_head,
                     (long long)i.n_head_kv, (long long)i.head_dim, (long long)i.n_ff, (long long)i.n_rot,
                     (unsigned long long)i.weight_bytes);
    mcp_sha256_update(h, s, (size_t)n < sizeof s ? (size_t)n : sizeof s - 1);
}

mcp_status mcp_model_fingerprint(mcp_model_version *v, mcp_err *err)
{
    char *sig = mcp_model_io_signature(v);
    if (!sig) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_sha256 h;
    mcp_status st = mcp_sha256_begin(&h, err);
    if (st == MCP_STATUS_OK) {
        mcp_sha256_update(&h, sig, strlen(sig));
        mcp_sha256_update(&h, "\n", 1);
        if (v->session && v->session->graph) graph_structure(&h, v->session->graph, 0);
        if (v->llm) llm_structure(&h, v->llm);
        mcp_sha256_end(&h, v->fingerprint);
    }
    mcp_free(sig);
    return st;
}

char *mcp_model_io_signature(const mcp_model_version *v)
{
    json_t *sig = json_pack("{s:o, s:o}", "inputs", io_list(v->inputs, v->n_inputs), "outputs", io_list(v->outputs, v->n_outputs));
    char *text = sig ? json_dumps(sig, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(sig);
    if (!text) return NULL;
    char *out = mcp_strdup(text);
    free(text);
    return out;
}

/* The title of path: relative to base (a folder, with its '/') when under
 * it, else its file name. */
static const char *title_of(const char *path, const char *base, size_t base_len)
{
    if (base_len && !strncmp(path, base, base_len)) return path + base_len;
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

mcp_status mcp_store_add_version(mcp_store *s, const mcp_model_version *v, const char *descriptor, size_t len,
                                 mcp_store_manifest **out, mcp_err *err)
{
    *out = NULL;
    const mcp_descriptor *d = v->desc;
    if (!d || !d->path) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model '%s' has no model file to store", v->name);
    const char *slash = strrchr(d->path, '/');
    size_t base_len = slash ? (size_t)(slash - d->path) + 1 : 0;
    int n_files = 1 + d->n_pre + d->n_post;
    mcp_store_version_file *files = mcp_calloc((size_t)n_files, sizeof *files);
    if (!files) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    int n = 0;
    files[n++] = (mcp_store_version_file){title_of(d->path, d->path, base_len), d->path};
    for (int side = 0; side < 2; side++) {
        const mcp_step *st = side ? d->post : d->pre;
        int count = side ? d->n_post : d->n_pre;
        for (int i = 0; i < count; i++) {
            if (!st[i].labels_path) continue;
            bool seen = false;
            for (int k = 0; k < n; k++) seen = seen || !strcmp(files[k].path, st[i].labels_path);
            if (!seen) files[n++] = (mcp_store_version_file){title_of(st[i].labels_path, d->path, base_len), st[i].labels_path};
        }
    }
    char *sig = mcp_model_io_signature(v);
    mcp_store_version_in in = {
        .name = v->name,
        .version = v->version && v->version[0] ? v->version : "1",
        .descriptor = descriptor,
        .descriptor_len = len,
        .files = files,
        .n_files = n,
        .io_signature = sig,
        .fingerprint = v->fingerprint[0] ? v->fingerprint : NULL,
    };
    mcp_status st = sig ? mcp_store_put_version(s, &in, out, err) : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_free(sig);
    mcp_free(files);
    return st;
}
