/*
 * The oneDNN backend: capability query and helpers shared by its kernels.
 */
#include <omp.h>
#include <pthread.h>
#include <math.h>
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

const mcp_graph_value *mcp__dnnl_input(const mcp_node *node, const mcp_graph *graph, int i)
{
    if (i < 0 || i >= node->n_inputs || node->inputs[i] < 0) return NULL;
    return &graph->values[node->inputs[i]];
}

const mcp_tensor *mcp__dnnl_initializer(const mcp_node *node, const mcp_graph *graph, int i)
{
    const mcp_graph_value *v = mcp__dnnl_input(node, graph, i);
    if (!v || v->outer >= 0 || v->initializer < 0 || v->initializer >= graph->n_initializers)
        return NULL;
    return &graph->initializers[v->initializer];
}

bool mcp__dnnl_is_f32(const mcp_graph_value *v, int rank)
{
    return v && v->type.kind == MCP_VALUE_TENSOR && !v->type.is_optional &&
           v->type.dtype == MCP_DTYPE_FLOAT && v->type.rank == rank;
}

int mcp__dnnl_f32_rank(const mcp_node *node, const mcp_graph *graph, int i)
{
    const mcp_tensor *t = mcp__dnnl_initializer(node, graph, i);
    if (t) return t->dtype == MCP_DTYPE_FLOAT ? t->rank : -1;
    const mcp_graph_value *v = mcp__dnnl_input(node, graph, i);
    if (!v || v->type.kind != MCP_VALUE_TENSOR || v->type.is_optional ||
        v->type.dtype != MCP_DTYPE_FLOAT)
        return -1;
    return v->type.rank;
}

/* Static dims of input i; unknown ones become `unknown` (false: rank unknown,
 * or an unknown dim when `unknown` < 0). */
static bool input_dims(const mcp_node *node, const mcp_graph *graph, int i, int64_t unknown, int64_t *dims)
{
    const mcp_tensor *t = mcp__dnnl_initializer(node, graph, i);
    const mcp_graph_value *v = mcp__dnnl_input(node, graph, i);
    if (!v) return false;
    int rank = t ? t->rank : v->type.rank;
    if (rank < 0 || rank > MCP_MAX_RANK) return false;
    for (int d = 0; d < rank; d++) {
        dims[d] = t ? t->dims[d] : v->type.dims[d];
        if (dims[d] < 0 && unknown < 0) return false;
        if (dims[d] < 0) dims[d] = unknown;
    }
    return true;
}

bool mcp__dnnl_static_dims(const mcp_node *node, const mcp_graph *graph, int i, int64_t *dims)
{
    return input_dims(node, graph, i, -1, dims);
}

bool mcp__dnnl_dims_or_one(const mcp_node *node, const mcp_graph *graph, int i, int64_t *dims)
{
    return input_dims(node, graph, i, 1, dims);
}

bool mcp__dnnl_attr_ints(const mcp_node *node, const char *name, int want, int64_t min, int64_t *out)
{
    int64_t count = 0;
    const int64_t *v = mcp_node_attr_ints(node, name, &count);
    if (!v) return mcp_node_attr(node, name) == NULL;
    if (count != want) return false;
    for (int i = 0; i < want; i++) {
        if (v[i] < min || v[i] > INT32_MAX) return false;
        out[i] = v[i];
    }
    return true;
}

bool mcp__dnnl_attrs_within(const mcp_node *node, const char *const *names)
{
    for (int a = 0; a < node->n_attrs; a++) {
        bool known = false;
        for (int i = 0; names[i] && !known; i++) known = strcmp(node->attrs[a].name, names[i]) == 0;
        if (!known) return false;
    }
    return true;
}

mcp_status mcp__dnnl_fail(mcp_err *err, dnnl_status_t s, const char *what)
{
    mcp_status st = s == dnnl_unimplemented ? MCP_STATUS_UNSUPPORTED
                    : s == dnnl_out_of_memory ? MCP_STATUS_OUT_OF_MEMORY
                                              : MCP_STATUS_INTERNAL;
    return mcp_err_set(err, st, "oneDNN %s failed (status %d)", what, (int)s);
}

static dnnl_engine_t g_engine;
static pthread_once_t g_engine_once = PTHREAD_ONCE_INIT;

static void engine_init(void)
{
    if (dnnl_engine_create(&g_engine, dnnl_cpu, 0) != dnnl_success) g_engine = NULL;
}

dnnl_engine_t mcp__dnnl_engine(void)
{
    pthread_once(&g_engine_once, engine_init);
    return g_engine;
}

dnnl_status_t mcp__dnnl_attr_create(dnnl_primitive_attr_t *attr)
{
    dnnl_status_t s = dnnl_primitive_attr_create(attr);
    if (s != dnnl_success) {
        *attr = NULL;
        return s;
    }
    s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (s != dnnl_success) {
        dnnl_primitive_attr_destroy(*attr);
        *attr = NULL;
    }
    return s;
}

/* Runs prim with a scratchpad from `scratch` (a kernel context's scratch
 * slot 0) or, without one, from the heap. */
static mcp_status run_prim(mcp_kernel_ctx *scratch, dnnl_primitive_t prim, int nargs,
                           const dnnl_exec_arg_t *args, mcp_err *err)
{
    dnnl_exec_arg_t all[8];
    MCP_ASSERT(nargs >= 0 && nargs < 8);
    memcpy(all, args, sizeof(*args) * (size_t)nargs);
    dnnl_engine_t eng = mcp__dnnl_engine();
    const_dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_primitive_get_primitive_desc(prim, &pd);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "primitive query");
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t ssize = smd ? dnnl_memory_desc_get_size(smd) : 0;
    void *sbuf = NULL, *heap = NULL;
    dnnl_memory_t smem = NULL;
    if (ssize) {
        sbuf = scratch ? mcp_kscratch(scratch, 0, ssize) : NULL;
        if (!sbuf) sbuf = heap = mcp_malloc(ssize);
        if (!sbuf) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for oneDNN scratchpad");
        s = dnnl_memory_create(&smem, smd, eng, sbuf);
        if (s != dnnl_success) {
            mcp_free(heap);
            return mcp__dnnl_fail(err, s, "memory creation");
        }
        all[nargs].arg = DNNL_ARG_SCRATCHPAD;
        all[nargs++].memory = smem;
    }
    dnnl_stream_t stream = NULL;
    s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
    if (s == dnnl_success) s = dnnl_primitive_execute(prim, stream, nargs, all);
    if (s == dnnl_success) s = dnnl_stream_wait(stream);
    if (stream) dnnl_stream_destroy(stream);
    if (smem) dnnl_memory_destroy(smem);
    mcp_free(heap);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "execution");
    return MCP_STATUS_OK;
}

int mcp__dnnl_serial_begin(int64_t macs, int64_t below)
{
    if (macs >= below || omp_get_max_threads() == 1) return 0;
    int prev = omp_get_max_threads();
    omp_set_num_threads(1);
    return prev;
}

void mcp__dnnl_serial_end(int prev)
{
    if (prev > 0) omp_set_num_threads(prev);
}

mcp_status mcp__dnnl_run(dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args,
                         mcp_err *err)
{
    return run_prim(NULL, prim, nargs, args, err);
}

mcp_status mcp__dnnl_execute(mcp_kernel_ctx *ctx, dnnl_primitive_t prim, int nargs,
                             const dnnl_exec_arg_t *args)
{
    mcp_status st = run_prim(ctx, prim, nargs, args, ctx->err);
    if (st != MCP_STATUS_OK) mcp_err_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    return st;
}

mcp_status mcp__dnnl_wrap(mcp_kernel_ctx *ctx, const dnnl_memory_desc_t *md, const void *data,
                          dnnl_memory_t *out)
{
    /* oneDNN takes a non-const handle; inputs are only read by the primitives. */
    dnnl_status_t s = dnnl_memory_create(out, md, mcp__dnnl_engine(), (void *)data);
    if (s != dnnl_success) {
        *out = NULL;
        return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN memory creation failed (status %d)", (int)s);
    }
    return MCP_STATUS_OK;
}

dnnl_status_t mcp__dnnl_reorder_create(const dnnl_memory_desc_t *from,
                                       const dnnl_memory_desc_t *to, dnnl_primitive_t *out)
{
    dnnl_engine_t eng = mcp__dnnl_engine();
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    *out = NULL;
    dnnl_status_t s = mcp__dnnl_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, attr);
    if (s == dnnl_success) s = dnnl_primitive_create(out, rpd);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) *out = NULL;
    return s;
}

/* ---- tensor formats ---- */

static const dnnl_format_tag_t plain_tags[] = {dnnl_a, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd,
                                               dnnl_abcde, dnnl_abcdef};

dnnl_data_type_t mcp__dnnl_dt(mcp_dtype d)
{
    switch (d) {
    case MCP_DTYPE_FLOAT: return dnnl_f32;
    case MCP_DTYPE_UINT8: return dnnl_u8;
    case MCP_DTYPE_INT8: return dnnl_s8;
    case MCP_DTYPE_INT32: return dnnl_s32;
    case MCP_DTYPE_BFLOAT16: return dnnl_bf16;
    case MCP_DTYPE_FLOAT16: return dnnl_f16;
    default: return dnnl_data_type_undef;
    }
}

dnnl_status_t mcp__dnnl_plain_md_dt(dnnl_memory_desc_t *md, int rank, const int64_t *dims, dnnl_data_type_t dt)
{
    if (rank < 0 || rank > 6 || dt == dnnl_data_type_undef) return dnnl_invalid_arguments;
    dnnl_dims_t d = {1};
    for (int i = 0; i < rank; i++) d[i] = dims[i];
    return dnnl_memory_desc_init_by_tag(md, rank ? rank : 1, d, dt, plain_tags[rank]);
}

dnnl_status_t mcp__dnnl_plain_md(dnnl_memory_desc_t *md, int rank, const int64_t *dims)
{
    return mcp__dnnl_plain_md_dt(md, rank, dims, dnnl_f32);
}

static mcp_status format_to_plain(const mcp_format *base, const void *src, void *dst, mcp_err *err)
{
    mcp_dnnl_format *f = (mcp_dnnl_format *)base;
    dnnl_primitive_t r = atomic_load(&f->to_plain);
    if (!r) {
        /* First use: build it; a thread that lost the race drops its own. */
        dnnl_status_t s = mcp__dnnl_reorder_create(&f->md, &f->plain_md, &r);
        if (s != dnnl_success) return mcp__dnnl_fail(err, s, "reorder to plain");
        dnnl_primitive_t none = NULL;
        if (!atomic_compare_exchange_strong(&f->to_plain, &none, r)) {
            dnnl_primitive_destroy(r);
            r = none;
        }
    }
    dnnl_engine_t eng = mcp__dnnl_engine();
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_status_t s = dnnl_memory_create(&from, &f->md, eng, (void *)src);
    if (s == dnnl_success) s = dnnl_memory_create(&to, &f->plain_md, eng, dst);
    mcp_status st = s == dnnl_success ? MCP_STATUS_OK : mcp__dnnl_fail(err, s, "memory creation");
    if (st == MCP_STATUS_OK) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        st = mcp__dnnl_run(r, 2, args, err);
    }
    if (from) dnnl_memory_destroy(from);
    if (to) dnnl_memory_destroy(to);
    return st;
}

static bool format_same_layout(const mcp_format *a, const mcp_format *b)
{
    /* mcp_format_same has checked that both are oneDNN formats. */
    return dnnl_memory_desc_equal(&((const mcp_dnnl_format *)a)->md, &((const mcp_dnnl_format *)b)->md);
}

mcp_status mcp__dnnl_format_init(mcp_dnnl_format *f, const dnnl_memory_desc_t *md, int rank,
                                 const int64_t *dims, mcp_err *err)
{
    memset(f, 0, sizeof *f);
    f->md = *md;
    /* bf16 layouts hold float tensors computed in bfloat16: their plain
     * form is float32. */
    dnnl_data_type_t plain_dt = md->data_type == dnnl_bf16 ? dnnl_f32 : md->data_type;
    dnnl_status_t s = mcp__dnnl_plain_md_dt(&f->plain_md, rank, dims, plain_dt);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "memory descriptor");
    f->is_plain = dnnl_memory_desc_equal(md, &f->plain_md);
    if (f->is_plain) return MCP_STATUS_OK;
    f->base.name = "onednn";
    f->base.nbytes = dnnl_memory_desc_get_size(md);
    f->base.to_plain = format_to_plain;
    f->base.same_layout = format_same_layout;
    return MCP_STATUS_OK;
}

void mcp__dnnl_format_release(mcp_dnnl_format *f)
{
    dnnl_primitive_t r = atomic_load(&f->to_plain);
    if (r) dnnl_primitive_destroy(r);
    memset(f, 0, sizeof *f);
}

const mcp_format *mcp__dnnl_format_of(const mcp_dnnl_format *f)
{
    return f->is_plain ? NULL : &f->base;
}

bool mcp__dnnl_tensor_md(const mcp_tensor *t, dnnl_memory_desc_t *md)
{
    if (t->format) {
        if (t->format->to_plain != format_to_plain) return false;
        *md = ((const mcp_dnnl_format *)t->format)->md;
        return true;
    }
    return mcp__dnnl_plain_md_dt(md, t->rank, t->dims, mcp__dnnl_dt(t->dtype)) == dnnl_success;
}

bool mcp__dnnl_like(const dnnl_memory_desc_t *ref, int rank, const int64_t *dims, dnnl_memory_desc_t *out)
{
    static const dnnl_format_tag_t tags4[] = {dnnl_abcd, dnnl_acdb, dnnl_aBcd16b, dnnl_aBcd8b, dnnl_aBcd4b};
    if (rank != 4 || ref->ndims != 4) return false;
    for (size_t i = 0; i < sizeof tags4 / sizeof tags4[0]; i++) {
        dnnl_memory_desc_t probe;
        if (dnnl_memory_desc_init_by_tag(&probe, 4, ref->dims, ref->data_type, tags4[i]) != dnnl_success) continue;
        if (!dnnl_memory_desc_equal(&probe, ref)) continue;
        dnnl_dims_t d = {dims[0], dims[1], dims[2], dims[3]};
        return dnnl_memory_desc_init_by_tag(out, 4, d, ref->data_type, tags4[i]) == dnnl_success;
    }
    return false;
}

mcp_status mcp__dnnl_reorder_into(mcp_kernel_ctx *ctx, const mcp_tensor *t,
                                  const dnnl_memory_desc_t *to, void *dst)
{
    dnnl_memory_desc_t from;
    if (!mcp__dnnl_tensor_md(t, &from))
        return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "input in a format oneDNN cannot read");
    if (dnnl_memory_desc_equal(&from, to)) {
        memcpy(dst, t->data, dnnl_memory_desc_get_size(to));
        return MCP_STATUS_OK;
    }
    dnnl_primitive_t r = NULL;
    dnnl_status_t s = mcp__dnnl_reorder_create(&from, to, &r);
    if (s != dnnl_success) {
        mcp__dnnl_fail(ctx->err, s, "reorder");
        mcp_err_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
        return MCP_STATUS_INTERNAL;
    }
    dnnl_memory_t m[2] = {NULL, NULL};
    mcp_status st = mcp__dnnl_wrap(ctx, &from, t->data, &m[0]);
    if (st == MCP_STATUS_OK) st = mcp__dnnl_wrap(ctx, to, dst, &m[1]);
    if (st == MCP_STATUS_OK) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, m[0]}, {DNNL_ARG_TO, m[1]}};
        st = mcp__dnnl_execute(ctx, r, 2, args);
    }
    for (int i = 0; i < 2; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    dnnl_primitive_destroy(r);
    return st;
}

/* ---- packed weights ---- */

mcp_status mcp__dnnl_pack(mcp_dnnl_packed *pk, const dnnl_memory_desc_t *plain_md, const void *plain,
                          const dnnl_memory_desc_t *want, mcp_err *err)
{
    size_t size = dnnl_memory_desc_get_size(want);
    void *buf = mcp_malloc(size ? size : 1);
    if (!buf) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for prepacked weights");
    dnnl_engine_t eng = mcp__dnnl_engine();
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_status_t s = dnnl_memory_create(&from, plain_md, eng, (void *)plain);
    if (s == dnnl_success) s = dnnl_memory_create(&to, want, eng, buf);
    if (s == dnnl_success) s = mcp__dnnl_reorder_create(plain_md, want, &reorder);
    mcp_status st = s == dnnl_success ? MCP_STATUS_OK : mcp__dnnl_fail(err, s, "weights reorder");
    if (st == MCP_STATUS_OK) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        st = mcp__dnnl_run(reorder, 2, args, err);
    }
    if (reorder) dnnl_primitive_destroy(reorder);
    if (to) dnnl_memory_destroy(to);
    if (from) dnnl_memory_destroy(from);
    if (st != MCP_STATUS_OK) {
        mcp_free(buf);
        return st;
    }
    pk->have = true;
    pk->md = *want;
    pk->data = buf;
    return MCP_STATUS_OK;
}

bool mcp__dnnl_packed_adopt(mcp_dnnl_packed *pk, const mcp_graph *graph, const mcp_node *node)
{
    const mcp_prepacked *p = mcp_graph_prepacked(graph, node, 0);
    if (!p || p->desc_len != sizeof(dnnl_memory_desc_t)) return false;
    /* The file's descriptor goes to no oneDNN call that could trust it
     * (its size, a reorder) before mcp__dnnl_weights_for has found it equal
     * to one oneDNN made here. */
    dnnl_memory_desc_t md;
    memcpy(&md, p->desc, sizeof md);
    if (md.ndims < 1 || md.ndims > DNNL_MAX_NDIMS) return false;
    pk->have = pk->borrowed = true;
    pk->verified = false;
    pk->md = md;
    pk->data = (void *)p->data;
    pk->borrowed_len = p->len;
    return true;
}

mcp_status mcp__dnnl_packed_settle(mcp_dnnl_packed *pk, bool have_plain, bool *plain_gone, mcp_err *err)
{
    if (!pk->borrowed || pk->verified) return MCP_STATUS_OK;
    if (!have_plain)
        return mcp_err_set(err, MCP_STATUS_FAILED_PRECONDITION,
                           "the compiled weights are not in the layout this machine's kernel chose");
    memset(pk, 0, sizeof *pk);
    *plain_gone = false;
    return MCP_STATUS_OK;
}

bool mcp__dnnl_packed_view(const mcp_dnnl_packed *pk, mcp_prepacked *out)
{
    if (!pk->have) return false;
    out->desc = &pk->md;
    out->desc_len = sizeof pk->md;
    out->data = pk->data;
    out->len = dnnl_memory_desc_get_size(&pk->md);
    return true;
}

mcp_status mcp__dnnl_weights_for(mcp_dnnl_packed *node_pk, bool plain_gone, const dnnl_memory_desc_t *plain_md,
                                 const void *plain, const dnnl_memory_desc_t *wmd, mcp_dnnl_packed *own,
                                 const void **data, mcp_err *err)
{
    if (node_pk->borrowed && !node_pk->verified) {
        /* A compiled model's weights serve only the layout this machine's
         * kernel chose (then they are oneDNN's own descriptor). */
        if (!dnnl_memory_desc_equal(wmd, &node_pk->md))
            return mcp_err_set(err, MCP_STATUS_FAILED_PRECONDITION,
                               "the compiled weights are not in the layout this machine's kernel chose");
        if (dnnl_memory_desc_get_size(wmd) != node_pk->borrowed_len)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "the compiled weights hold %zu bytes, their layout %zu",
                               node_pk->borrowed_len, dnnl_memory_desc_get_size(wmd));
        node_pk->verified = true;
    }
    if (!plain_gone && dnnl_memory_desc_equal(wmd, plain_md)) {
        *data = plain;
        return MCP_STATUS_OK;
    }
    if (!node_pk->have) {
        MCP_ASSERT(!plain_gone);
        mcp_status st = mcp__dnnl_pack(node_pk, plain_md, plain, wmd, err);
        if (st != MCP_STATUS_OK) return st;
    }
    if (dnnl_memory_desc_equal(wmd, &node_pk->md)) {
        *data = node_pk->data;
        return MCP_STATUS_OK;
    }
    mcp_status st = plain_gone ? mcp__dnnl_pack(own, &node_pk->md, node_pk->data, wmd, err)
                               : mcp__dnnl_pack(own, plain_md, plain, wmd, err);
    if (st == MCP_STATUS_OK) *data = own->data;
    return st;
}

void mcp__dnnl_packed_release(mcp_dnnl_packed *pk)
{
    if (!pk->borrowed) mcp_free(pk->data);
    memset(pk, 0, sizeof *pk);
}

/* ---- primitive caches keyed by input descriptors ---- */

void mcp__dnnl_cache_init(mcp_dnnl_cache *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
}

void mcp__dnnl_entry_release(mcp_dnnl_entry *e)
{
    if (e->prim) dnnl_primitive_destroy(e->prim);
    mcp__dnnl_format_release(&e->dst);
    memset(e, 0, sizeof *e);
}

void mcp__dnnl_cache_release(mcp_dnnl_cache *c)
{
    for (int i = 0; i < c->n; i++) mcp__dnnl_entry_release(&c->e[i]);
    pthread_mutex_destroy(&c->lock);
}

static bool entry_matches(const mcp_dnnl_entry *e, const dnnl_memory_desc_t *keys, int n_keys)
{
    if (e->n_keys != n_keys || e->threads != omp_get_max_threads()) return false;
    for (int i = 0; i < n_keys; i++)
        if (!dnnl_memory_desc_equal(&e->keys[i], &keys[i])) return false;
    return true;
}

static mcp_status entry_build(const void *state, const dnnl_memory_desc_t *keys, int n_keys,
                              mcp_dnnl_build_fn build, mcp_dnnl_entry *e, mcp_err *err)
{
    memset(e, 0, sizeof *e);
    e->n_keys = n_keys;
    e->threads = omp_get_max_threads();
    memcpy(e->keys, keys, sizeof *keys * (size_t)n_keys);
    mcp_status st = build(state, e, err);
    if (st != MCP_STATUS_OK) mcp__dnnl_entry_release(e);
    return st;
}

mcp_status mcp__dnnl_cache_get(mcp_kernel_ctx *ctx, mcp_dnnl_cache *c, const void *state,
                               const dnnl_memory_desc_t *keys, int n_keys,
                               mcp_dnnl_build_fn build, mcp_dnnl_entry *local,
                               const mcp_dnnl_entry **out)
{
    MCP_ASSERT(n_keys > 0 && n_keys <= MCP_DNNL_KEYS);
    *out = NULL;
    mcp_status st = MCP_STATUS_OK;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->n && !*out; i++)
        if (entry_matches(&c->e[i], keys, n_keys)) *out = &c->e[i];
    if (!*out && c->n < MCP_DNNL_CACHE) {
        st = entry_build(state, keys, n_keys, build, &c->e[c->n], ctx->err);
        if (st == MCP_STATUS_OK) *out = &c->e[c->n++];
    }
    pthread_mutex_unlock(&c->lock);
    if (st == MCP_STATUS_OK && !*out) {
        st = entry_build(state, keys, n_keys, build, local, ctx->err);
        if (st == MCP_STATUS_OK) *out = local;
    }
    if (st != MCP_STATUS_OK) mcp_err_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    return st;
}

mcp_status mcp__dnnl_entry_build(const void *op_desc, mcp_dnnl_entry *e, int rank, const int64_t *dims,
                                 const char *what, mcp_err *err)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = mcp__dnnl_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, op_desc, attr, mcp__dnnl_engine(), NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_success) s = dnnl_primitive_create(&e->prim, pd);
    if (s != dnnl_success) e->prim = NULL;
    mcp_status st = s == dnnl_success ? MCP_STATUS_OK : mcp__dnnl_fail(err, s, what);
    if (st == MCP_STATUS_OK)
        st = mcp__dnnl_format_init(&e->dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), rank, dims, err);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return st;
}

mcp_status mcp__dnnl_exec_entry(mcp_kernel_ctx *ctx, const mcp_dnnl_entry *e, mcp_dnnl_entry *local, int n,
                                const int *ids, const dnnl_memory_desc_t *const *mds, void *const *data)
{
    MCP_ASSERT(n > 0 && n <= MCP_DNNL_KEYS + 2);
    dnnl_memory_t m[MCP_DNNL_KEYS + 2] = {NULL};
    dnnl_exec_arg_t args[MCP_DNNL_KEYS + 2];
    mcp_status rs = MCP_STATUS_OK;
    for (int i = 0; i < n && rs == MCP_STATUS_OK; i++) {
        rs = mcp__dnnl_wrap(ctx, mds[i], data[i], &m[i]);
        args[i] = (dnnl_exec_arg_t){ids[i], m[i]};
    }
    if (rs == MCP_STATUS_OK) rs = mcp__dnnl_execute(ctx, e->prim, n, args);
    for (int i = 0; i < n; i++)
        if (m[i]) dnnl_memory_destroy(m[i]);
    if (e == local) mcp__dnnl_entry_release(local);
    return rs;
}

mcp_status mcp__dnnl_run_entry(mcp_kernel_ctx *ctx, const mcp_dnnl_entry *e, mcp_dnnl_entry *local, int n,
                               const mcp_tensor *const *in, const dnnl_memory_desc_t *md, const int *arg_ids)
{
    MCP_ASSERT(n > 0 && n <= MCP_DNNL_KEYS);
    const dnnl_memory_desc_t *plain = &e->dst.plain_md;
    /* Y has the type of the primitive's destination (f32, or u8 / s8 for
     * int8 max pooling). */
    mcp_dtype ydt = e->dst.md.data_type == dnnl_u8 ? MCP_DTYPE_UINT8
                    : e->dst.md.data_type == dnnl_s8 ? MCP_DTYPE_INT8
                                                     : MCP_DTYPE_FLOAT;
    /* A per-call primitive's format dies with it: its output is written
     * plain (through a temporary in its own layout). */
    const mcp_format *f = mcp__dnnl_format_of(&e->dst);
    bool via_tmp = e == local && f;
    mcp_tensor *y = via_tmp ? mcp_kout_uninit(ctx, 0, ydt, plain->ndims, plain->dims)
                            : mcp_kout_format(ctx, 0, ydt, plain->ndims, plain->dims, f);
    void *tmp = via_tmp && y ? mcp_malloc(f->nbytes ? f->nbytes : 1) : NULL;
    if (!y || (via_tmp && !tmp)) {
        if (e == local) mcp__dnnl_entry_release(local);
        return y ? mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory") : MCP_STATUS_OUT_OF_MEMORY;
    }
    int ids[MCP_DNNL_KEYS + 1];
    const dnnl_memory_desc_t *mds[MCP_DNNL_KEYS + 1];
    void *data[MCP_DNNL_KEYS + 1];
    for (int i = 0; i < n; i++) {
        ids[i] = arg_ids[i];
        mds[i] = &md[i];
        data[i] = in[i]->data; /* oneDNN takes non-const handles; inputs are only read */
    }
    ids[n] = DNNL_ARG_DST;
    mds[n] = &e->dst.md;
    data[n] = via_tmp ? tmp : y->data;
    if (!via_tmp) return mcp__dnnl_exec_entry(ctx, e, local, n + 1, ids, mds, data);
    /* exec_entry releases the local entry: keep it for the conversion. */
    mcp_status st = mcp__dnnl_exec_entry(ctx, e, NULL, n + 1, ids, mds, data);
    if (st == MCP_STATUS_OK) st = f->to_plain(f, tmp, y->data, ctx->err);
    mcp_free(tmp);
    mcp__dnnl_entry_release(local);
    return st;
}

/* ---- the reference kernel as a run-time fallback ---- */

mcp_status mcp__dnnl_fallback_init(mcp_dnnl_fallback *fb, const mcp_node *node,
                                   const mcp_graph *graph, mcp_err *err)
{
    memset(fb, 0, sizeof *fb);
    mcp_status st = mcp_ops_resolve(node, graph, "ref", &fb->k, NULL, err);
    if (st == MCP_STATUS_OK && fb->k->prepare) st = fb->k->prepare(node, graph, &fb->state, err);
    if (st != MCP_STATUS_OK) fb->k = NULL;
    return st;
}

void mcp__dnnl_fallback_release(mcp_dnnl_fallback *fb)
{
    if (fb->k && fb->k->release) fb->k->release(fb->state);
    memset(fb, 0, sizeof *fb);
}

mcp_status mcp__dnnl_cached_init(mcp_dnnl_cached *c, const mcp_node *node, const mcp_graph *graph,
                                 mcp_err *err)
{
    mcp__dnnl_cache_init(&c->cache);
    if (!mcp__dnnl_engine()) return mcp_err_set(err, MCP_STATUS_INTERNAL, "oneDNN engine creation failed");
    return mcp__dnnl_fallback_init(&c->fb, node, graph, err);
}

void mcp__dnnl_cached_release(mcp_dnnl_cached *c)
{
    mcp__dnnl_cache_release(&c->cache);
    mcp__dnnl_fallback_release(&c->fb);
}

void mcp__dnnl_cached_free(void *state)
{
    if (!state) return;
    mcp__dnnl_cached_release(state);
    mcp_free(state);
}

mcp_status mcp__dnnl_fallback_run(mcp_kernel_ctx *ctx, const mcp_dnnl_fallback *fb)
{
    if (!fb->k) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "no reference kernel to fall back to");
    for (int i = 0; i < ctx->n_inputs; i++) {
        mcp_value *v = ctx->inputs[i];
        if (v && v->kind == MCP_VALUE_TENSOR && v->tensor.format) {
            mcp_status st = mcp_tensor_make_plain(&v->tensor, ctx->err);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    mcp_kernel_ctx sub = *ctx;
    sub.state = fb->state;
    return fb->k->run(&sub);
}

/* ---- int8 ---- */

/* True where oneDNN's int8 kernels are exact: the CPU has VNNI. */
bool mcp__dnnl_has_vnni(void)
{
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni ||
           (isa & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
}

/* True where oneDNN has bf16 dot products (vdpbf16ps): avx512_bf16 or AMX. */
bool mcp__dnnl_has_bf16(void)
{
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

bool mcp__dnnl_bf16_for(const mcp_graph *graph)
{
    while (graph->parent) graph = graph->parent;
    return graph->bf16 && mcp__dnnl_has_bf16();
}

bool mcp__dnnl_is_int8(mcp_dtype d) { return d == MCP_DTYPE_UINT8 || d == MCP_DTYPE_INT8; }

/* A float32 initializer holding 1 value, or `n` when n > 1. */
bool mcp__dnnl_scale_ok(const mcp_tensor *t, int64_t n)
{
    if (!t || t->dtype != MCP_DTYPE_FLOAT || t->rank > 1) return false;
    int64_t c = mcp_tensor_numel(t);
    if (c != 1 && c != n) return false;
    for (int64_t i = 0; i < c; i++) {
        float v = ((const float *)t->data)[i];
        if (!(v > 0.0f) || !isfinite(v)) return false;
    }
    return true;
}

/* A zero point input (absent, or a tensor of x's type whose size is 1). */
bool mcp__dnnl_zp_input_ok(const mcp_node *node, const mcp_graph *graph, int i, mcp_dtype dt)
{
    const mcp_graph_value *v = mcp__dnnl_input(node, graph, i);
    if (!v) return true;
    if (v->type.kind != MCP_VALUE_TENSOR || v->type.is_optional || v->type.dtype != dt) return false;
    return v->type.rank <= 1 && (v->type.rank == 0 || v->type.dims[0] == 1);
}

/* A zero point input's value as int32 (absent: 0); false when it is not
 * one value of type dt. */
bool mcp__dnnl_zp_value(const mcp_tensor *z, dnnl_data_type_t dt, int32_t *out)
{
    *out = 0;
    if (!z) return true;
    if (mcp__dnnl_dt(z->dtype) != dt || mcp_tensor_numel(z) != 1) return false;
    *out = z->dtype == MCP_DTYPE_UINT8 ? ((const uint8_t *)z->data)[0] : ((const int8_t *)z->data)[0];
    return true;
}

/* ---- activations as post-ops ---- */

typedef struct eltwise_op {
    dnnl_alg_kind_t alg;
    float alpha, beta;
} eltwise_op;

bool mcp__dnnl_append_activation(const mcp_node *node, dnnl_post_ops_t po)
{
    mcp_act a;
    if (mcp_node_activation(node, &a, NULL) != MCP_STATUS_OK) return false;
    float p0 = a.params[0], p1 = a.params[1];
    eltwise_op ops[2];
    int n = 0;
    switch (a.kind) {
    case MCP_ACTIVATION_NONE: return true;
    case MCP_ACTIVATION_RELU: ops[n++] = (eltwise_op){dnnl_eltwise_relu, 0.0f, 0.0f}; break;
    case MCP_ACTIVATION_LEAKYRELU: ops[n++] = (eltwise_op){dnnl_eltwise_relu, p0, 0.0f}; break;
    case MCP_ACTIVATION_CLIP: ops[n++] = (eltwise_op){dnnl_eltwise_clip_v2, p0, p1}; break;
    case MCP_ACTIVATION_SIGMOID: ops[n++] = (eltwise_op){dnnl_eltwise_logistic, 0.0f, 0.0f}; break;
    case MCP_ACTIVATION_TANH: ops[n++] = (eltwise_op){dnnl_eltwise_tanh, 0.0f, 0.0f}; break;
    case MCP_ACTIVATION_SILU: ops[n++] = (eltwise_op){dnnl_eltwise_swish, 1.0f, 0.0f}; break;
    case MCP_ACTIVATION_GELU: ops[n++] = (eltwise_op){dnnl_eltwise_gelu_erf, 0.0f, 0.0f}; break;
    case MCP_ACTIVATION_HARDSIGMOID:
        ops[n++] = (eltwise_op){dnnl_eltwise_linear, p0, p1};
        ops[n++] = (eltwise_op){dnnl_eltwise_clip_v2, 0.0f, 1.0f};
        break;
    case MCP_ACTIVATION_COUNT: return false;
    }
    for (int i = 0; po && i < n; i++)
        if (dnnl_post_ops_append_eltwise(po, 1.0f, ops[i].alg, ops[i].alpha, ops[i].beta) != dnnl_success)
            return false;
    return true;
}

static const mcp_kernel_def *dnnl_supports(const mcp_node *node, const mcp_graph *graph)
{
    if (!graph) return NULL;
    if (strcmp(node->domain, MCP_DOMAIN_INTERNAL) == 0) {
        if (strcmp(node->op_type, "FusedConv") == 0)
            return mcp__dnnl_conv_supported(node, graph) ? &mcp__dnnl_fused_conv_kernel : NULL;
        if (strcmp(node->op_type, "QLinearConvAdd") == 0)
            return mcp__dnnl_conv_supported(node, graph) ? &mcp__dnnl_qlinear_conv_add_kernel : NULL;
        if (strcmp(node->op_type, "MatMulIntegerScaled") == 0)
            return mcp__dnnl_qmatmul_supported(node, graph) ? &mcp__dnnl_matmul_integer_scaled_kernel : NULL;
        if (strcmp(node->op_type, "FusedGemm") == 0)
            return mcp__dnnl_gemm_supported(node, graph) ? &mcp__dnnl_fused_gemm_kernel : NULL;
        if (strcmp(node->op_type, "FusedMatMul") == 0)
            return mcp__dnnl_matmul_supported(node, graph) ? &mcp__dnnl_fused_matmul_kernel : NULL;
        if (mcp__dnnl_eltwise_supported(node, graph)) return &mcp__dnnl_eltwise_kernel;
        if (mcp__dnnl_layernorm_supported(node, graph)) return &mcp__dnnl_layernorm_kernel;
        if (mcp__dnnl_attention_supported(node, graph)) return &mcp__dnnl_attention_kernel;
        return NULL;
    }
    if (strcmp(node->domain, "") != 0) return NULL;
    if (strcmp(node->op_type, "Conv") == 0)
        return mcp__dnnl_conv_supported(node, graph) ? &mcp__dnnl_conv_kernel : NULL;
    if (strcmp(node->op_type, "QLinearConv") == 0)
        return mcp__dnnl_conv_supported(node, graph) ? &mcp__dnnl_qlinear_conv_kernel : NULL;
    if (strcmp(node->op_type, "ConvInteger") == 0)
        return mcp__dnnl_conv_supported(node, graph) ? &mcp__dnnl_conv_integer_kernel : NULL;
    if (strcmp(node->op_type, "QLinearMatMul") == 0)
        return mcp__dnnl_qmatmul_supported(node, graph) ? &mcp__dnnl_qlinear_matmul_kernel : NULL;
    if (strcmp(node->op_type, "MatMulInteger") == 0)
        return mcp__dnnl_qmatmul_supported(node, graph) ? &mcp__dnnl_matmul_integer_kernel : NULL;
    if (strcmp(node->op_type, "Gemm") == 0)
        return mcp__dnnl_gemm_supported(node, graph) ? &mcp__dnnl_gemm_kernel : NULL;
    if (strcmp(node->op_type, "MatMul") == 0)
        return mcp__dnnl_matmul_supported(node, graph) ? &mcp__dnnl_matmul_kernel : NULL;
    if (mcp__dnnl_deconv_supported(node, graph)) return &mcp__dnnl_deconv_kernel;
    if (mcp__dnnl_pool_supported(node, graph)) return &mcp__dnnl_pool_kernel;
    if (mcp__dnnl_binary_supported(node, graph)) return &mcp__dnnl_binary_kernel;
    if (mcp__dnnl_concat_supported(node, graph)) return &mcp__dnnl_concat_kernel;
    if (mcp__dnnl_eltwise_supported(node, graph)) return &mcp__dnnl_eltwise_kernel;
    if (mcp__dnnl_layernorm_supported(node, graph)) return &mcp__dnnl_layernorm_kernel;
    if (mcp__dnnl_softmax_supported(node, graph)) return &mcp__dnnl_softmax_kernel;
    if (mcp__dnnl_transpose_supported(node, graph)) return &mcp__dnnl_transpose_kernel;
    if (mcp__dnnl_attention_supported(node, graph)) return &mcp__dnnl_attention_kernel;
    return NULL;
}

/* Packed layouts depend on oneDNN's version and the ISA it dispatches to;
 * the descriptor's size guards its binary form. */
static void dnnl_stamp(char *buf, size_t cap)
{
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, cap, "oneDNN %d.%d.%d (%s) isa %#x md %zu", v->major, v->minor, v->patch, v->hash ? v->hash : "",
             (unsigned)dnnl_get_effective_cpu_isa(), sizeof(dnnl_memory_desc_t));
}

const mcp_backend mcp__dnnl_backend = {
    .api_version = MCP_KERNEL_API_VERSION,
    .name = "dnnl",
    .priority = 10,
    .supports = dnnl_supports,
    .stamp = dnnl_stamp,
};
