/*
 * oneDNN binary arithmetic (Add, Sub, Mul, Div, Max/Min with two inputs)
 * and Concat on 4-D fp32 tensors. Both read their inputs in whatever layout
 * they arrive in and write the layout oneDNN picks, so a squeeze-excitation
 * Mul or a channel Concat between convolutions stays in the blocked layout.
 *
 * Binary ops need the first operand at the output's full shape (oneDNN
 * broadcasts only the second); commutative ops swap their operands for
 * that, and the remaining cases run on the reference kernel, as do other
 * ranks and dtypes met at run time.
 *
 * A channel Concat whose inputs and output share one layout among plain
 * NCHW, channels-last (NHWC) and nChw16c (every channel count a multiple of
 * 16) is a sequence of contiguous copies, and is done here directly:
 * oneDNN 2.6 takes its generic `simple:any` concat for those layouts. On
 * SqueezeNet 1.1 (8 Concats, 2 cores) the copies took the Concats from
 * 0.20 to 0.12 ms per run at batch 1 (channels-last) and from 1.31 to
 * 1.16 ms at batch 8 (nChw16c, where both are bound by memory bandwidth).
 * The oneDNN primitive is still built once per input shape, for the output
 * layout it would write, so consumers read the same format either way.
 */
#include <string.h>

#include "ops/dnnl/dnnl_util.h"

typedef struct binary_state {
    mcp_dnnl_cached c;
    dnnl_alg_kind_t alg;
    bool commutative;
    int axis; /* Concat */
} binary_state;

static const struct {
    const char *op;
    dnnl_alg_kind_t alg;
    bool commutative;
} binary_ops[] = {
    {"Add", dnnl_binary_add, true}, {"Sub", dnnl_binary_sub, false}, {"Mul", dnnl_binary_mul, true},
    {"Div", dnnl_binary_div, false}, {"Max", dnnl_binary_max, true},  {"Min", dnnl_binary_min, true},
};

static int binary_index(const mcp_node *node)
{
    for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
        if (strcmp(node->op_type, binary_ops[i].op) == 0) return (int)i;
    return -1;
}

bool mcp__dnnl_binary_supported(const mcp_node *node, const mcp_graph *graph)
{
    int i = binary_index(node);
    /* Broadcasting Add/Sub/Mul/Div arrived in opset 7, Max/Min in 8. */
    if (i < 0 || node->n_inputs != 2 || node->n_outputs != 1 || node->n_attrs != 0) return false;
    if (node->opset < (binary_ops[i].alg == dnnl_binary_max || binary_ops[i].alg == dnnl_binary_min ? 8 : 7))
        return false;
    return mcp__dnnl_f32_rank(node, graph, 0) == 4 && mcp__dnnl_f32_rank(node, graph, 1) == 4;
}

bool mcp__dnnl_concat_supported(const mcp_node *node, const mcp_graph *graph)
{
    if (strcmp(node->op_type, "Concat") != 0 || node->opset < 4) return false;
    if (node->n_inputs < 1 || node->n_inputs > MCP_DNNL_KEYS || node->n_outputs != 1) return false;
    static const char *const attrs[] = {"axis", NULL};
    if (!mcp__dnnl_attrs_within(node, attrs)) return false;
    int64_t axis = mcp_node_attr_int(node, "axis", 1);
    if (axis < -4 || axis > 3) return false;
    for (int i = 0; i < node->n_inputs; i++)
        if (mcp__dnnl_f32_rank(node, graph, i) != 4) return false;
    return true;
}

static mcp_status binary_build(const void *state, mcp_dnnl_entry *e, mcp_err *err)
{
    const binary_state *st = state;
    const dnnl_memory_desc_t *a = &e->keys[0], *b = &e->keys[1];
    dnnl_dims_t y = {0};
    for (int d = 0; d < 4; d++) y[d] = a->dims[d] > b->dims[d] ? a->dims[d] : b->dims[d];
    dnnl_memory_desc_t dst_any;
    /* Y in A's type: bf16 stays bf16 (oneDNN has only its reference kernel
     * for bf16 operands into a float32 Y). */
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&dst_any, 4, y, a->data_type == dnnl_bf16 ? dnnl_bf16 : dnnl_f32,
                                                   dnnl_format_tag_any);
    dnnl_binary_desc_t bd;
    if (s == dnnl_success) s = dnnl_binary_desc_init(&bd, st->alg, a, b, &dst_any);
    if (s != dnnl_success) return mcp__dnnl_fail(err, s, "binary descriptor");
    return mcp__dnnl_entry_build(&bd, e, 4, y, "binary primitive", err);
}

static mcp_status concat_build(const void *state, mcp_dnnl_entry *e, mcp_err *err)
{
    const binary_state *st = state;
    int64_t y[4];
    memcpy(y, e->keys[0].dims, sizeof y);
    for (int i = 1; i < e->n_keys; i++) y[st->axis] += e->keys[i].dims[st->axis];
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = mcp__dnnl_attr_create(&attr);
    if (s == dnnl_success)
        s = dnnl_concat_primitive_desc_create(&pd, NULL, e->n_keys, st->axis, e->keys, attr, mcp__dnnl_engine());
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_success) s = dnnl_primitive_create(&e->prim, pd);
    if (s != dnnl_success) e->prim = NULL;
    mcp_status rs = s == dnnl_success ? MCP_STATUS_OK : mcp__dnnl_fail(err, s, "concat primitive");
    if (rs == MCP_STATUS_OK)
        rs = mcp__dnnl_format_init(&e->dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), 4, y, err);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return rs;
}

static mcp_status binary_prepare(const mcp_node *node, const mcp_graph *graph, void **state, mcp_err *err)
{
    *state = NULL;
    binary_state *st = mcp_calloc(1, sizeof *st);
    if (!st) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status rs = mcp__dnnl_cached_init(&st->c, node, graph, err);
    int i = binary_index(node);
    if (i >= 0) {
        st->alg = binary_ops[i].alg;
        st->commutative = binary_ops[i].commutative;
    } else {
        int64_t axis = mcp_node_attr_int(node, "axis", 1);
        st->axis = (int)(axis < 0 ? axis + 4 : axis);
    }
    if (rs != MCP_STATUS_OK) {
        mcp__dnnl_cached_free(st);
        return rs;
    }
    *state = st;
    return MCP_STATUS_OK;
}

static bool all_f32_4d(const mcp_kernel_ctx *ctx, int n)
{
    for (int i = 0; i < n; i++) {
        const mcp_tensor *t = mcp_kin(ctx, i);
        if (!t || t->dtype != MCP_DTYPE_FLOAT || t->rank != 4 || mcp_tensor_numel(t) == 0) return false;
    }
    return true;
}

static mcp_status binary_run(mcp_kernel_ctx *ctx)
{
    binary_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    if (!all_f32_4d(ctx, 2)) return mcp__dnnl_fallback_run(ctx, &st->c.fb);
    const mcp_tensor *in[2] = {mcp_kin(ctx, 0), mcp_kin(ctx, 1)};
    bool a_full = true, b_full = true;
    for (int d = 0; d < 4; d++) {
        int64_t x = in[0]->dims[d], y = in[1]->dims[d];
        if (x != y && x != 1 && y != 1) return mcp__dnnl_fallback_run(ctx, &st->c.fb); /* reports the mismatch */
        a_full &= x >= y;
        b_full &= y >= x;
    }
    if (!a_full) {
        if (!st->commutative || !b_full) return mcp__dnnl_fallback_run(ctx, &st->c.fb);
        const mcp_tensor *t = in[0];
        in[0] = in[1];
        in[1] = t;
    }
    dnnl_memory_desc_t md[2];
    if (!mcp__dnnl_tensor_md(in[0], &md[0]) || !mcp__dnnl_tensor_md(in[1], &md[1]))
        return mcp__dnnl_fallback_run(ctx, &st->c.fb);
    /* oneDNN's fast binary kernels want both operands in one layout family;
     * the second (the smaller, when broadcast) is reordered to match. */
    mcp_tensor like_t;
    dnnl_memory_desc_t like;
    if (mcp__dnnl_like(&md[0], 4, in[1]->dims, &like) && !dnnl_memory_desc_equal(&like, &md[1])) {
        void *buf = mcp_kscratch(ctx, 1, dnnl_memory_desc_get_size(&like));
        if (buf && mcp__dnnl_reorder_into(ctx, in[1], &like, buf) == MCP_STATUS_OK) {
            like_t = *in[1];
            like_t.data = buf;
            in[1] = &like_t;
            md[1] = like;
        }
    }
    mcp_dnnl_entry local;
    const mcp_dnnl_entry *e = NULL;
    mcp_status rs = mcp__dnnl_cache_get(ctx, &st->c.cache, st, md, 2, binary_build, &local, &e);
    if (rs != MCP_STATUS_OK) return rs;
    static const int ids[2] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1};
    return mcp__dnnl_run_entry(ctx, e, &local, 2, in, md, ids);
}

/* Layouts the direct Concat copies (see concat_copy_layout). */
static const dnnl_format_tag_t concat_copy_tags[] = {dnnl_abcd, dnnl_acdb, dnnl_aBcd16b};

/* True when md is the f32 layout `tag` of a tensor with md's own dims. */
static bool md_has_tag(const dnnl_memory_desc_t *md, dnnl_format_tag_t tag)
{
    dnnl_memory_desc_t probe;
    return md->ndims == 4 &&
           dnnl_memory_desc_init_by_tag(&probe, 4, md->dims, dnnl_f32, tag) == dnnl_success &&
           dnnl_memory_desc_equal(&probe, md);
}

/*
 * Whether a Concat along channels of the n inputs `md` into `dst` is a
 * sequence of contiguous copies, and which: in every layout accepted, the
 * output is `outer` runs of sum(inner[i]) floats, run o holding input i's
 * floats [o * inner[i], (o + 1) * inner[i]) one input after another. Plain
 * and nChw16c have one run per batch item (inner = C_i*H*W; nChw16c only
 * when every C_i is a multiple of 16, so no input has channel padding);
 * channels-last has one per pixel (inner = C_i).
 */
static bool concat_copy_layout(int axis, int n, const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *dst,
                               int64_t *outer, int64_t *inner)
{
    if (axis != 1) return false;
    int tag = -1;
    for (int t = 0; t < (int)(sizeof concat_copy_tags / sizeof concat_copy_tags[0]) && tag < 0; t++)
        if (md_has_tag(dst, concat_copy_tags[t])) tag = t;
    if (tag < 0) return false;
    const dnnl_dims_t *d = &dst->dims;
    int64_t pixels = (*d)[2] * (*d)[3];
    for (int i = 0; i < n; i++) {
        int64_t c = md[i].dims[1];
        if (!md_has_tag(&md[i], concat_copy_tags[tag])) return false;
        if (concat_copy_tags[tag] == dnnl_aBcd16b && c % 16 != 0) return false;
        inner[i] = concat_copy_tags[tag] == dnnl_acdb ? c : c * pixels;
    }
    *outer = concat_copy_tags[tag] == dnnl_acdb ? (*d)[0] * pixels : (*d)[0];
    return true;
}

/* Copies n floats. Channels-last runs can be a handful of floats; below 32
 * an inlined loop beat glibc's memcpy by about 6% (3025 pixels of 2 x 4..24
 * channels, one core), from 32 up the two were even. */
static inline void copy_f32(float *restrict dst, const float *restrict src, int64_t n)
{
    if (n >= 32) {
        memcpy(dst, src, (size_t)n * sizeof *dst);
        return;
    }
    for (int64_t k = 0; k < n; k++) dst[k] = src[k];
}

/* Writes output floats [lo, hi) of the layout concat_copy_layout describes
 * (`total` = sum of inner, `start[i]` = sum of inner before input i). */
static void concat_copy_range(float *y, const float *const *x, int n, const int64_t *inner, const int64_t *start,
                              int64_t total, int64_t lo, int64_t hi)
{
    int64_t o = lo / total, r = lo % total;
    int i = 0;
    while (i + 1 < n && start[i + 1] <= r) i++;
    for (int64_t pos = lo; pos < hi;) {
        int64_t len = start[i] + inner[i] - r;
        if (len > hi - pos) len = hi - pos;
        const float *src = x[i] + o * inner[i] + (r - start[i]);
        if (src != y + pos) copy_f32(y + pos, src, len); /* else planned in place */
        pos += len;
        r += len;
        if (++i == n) {
            i = 0;
            r = 0;
            o++;
        }
    }
}

/* The direct Concat: output in e's layout (checked by concat_copy_layout),
 * split into one equal range of output floats per thread. */
static mcp_status concat_copy(mcp_kernel_ctx *ctx, const mcp_dnnl_entry *e, int n, const mcp_tensor *const *in,
                              int64_t outer, const int64_t *inner)
{
    const dnnl_memory_desc_t *plain = &e->dst.plain_md;
    const mcp_format *f = mcp__dnnl_format_of(&e->dst);
    mcp_tensor *y = f ? mcp_kout_format(ctx, 0, MCP_DTYPE_FLOAT, 4, plain->dims, f)
                      : mcp_kout_uninit(ctx, 0, MCP_DTYPE_FLOAT, 4, plain->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    const float *x[MCP_DNNL_KEYS];
    int64_t start[MCP_DNNL_KEYS], total = 0;
    for (int i = 0; i < n; i++) {
        x[i] = in[i]->data;
        start[i] = total;
        total += inner[i];
    }
    float *yd = y->data;
    int64_t size = outer * total;
    /* One run of a blocked layout: input i is the output's floats
     * [start[i], start[i] + inner[i]), so the memory plan may have the
     * producers write there; then there is nothing to copy. (A plain output
     * comes from mcp_kout_uninit, which does not hand out memory that
     * overlaps an input.) */
    if (outer == 1 && f) {
        mcp_knote_concat_inplace(ctx);
        bool placed = true;
        for (int i = 0; i < n; i++) placed &= x[i] == yd + start[i];
        if (placed) return MCP_STATUS_OK;
    }
    /* An input inside the output's block but not at its range (a run whose
     * sizes differ from the plan's) is moved out of the way first. */
    float *moved = NULL;
    size_t moved_n = 0;
    for (int i = 0; i < n; i++)
        if (x[i] != yd + start[i] && x[i] < yd + size && yd < x[i] + outer * inner[i]) moved_n += (size_t)(outer * inner[i]);
    if (moved_n) {
        moved = mcp_malloc(moved_n * sizeof *moved);
        if (!moved) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        size_t at = 0;
        for (int i = 0; i < n; i++)
            if (x[i] != yd + start[i] && x[i] < yd + size && yd < x[i] + outer * inner[i]) {
                memcpy(moved + at, x[i], (size_t)(outer * inner[i]) * sizeof *moved);
                x[i] = moved + at;
                at += (size_t)(outer * inner[i]);
            }
    }
    /* A copy moves a float for about what a cheap float operation costs, so
     * the usual thread budget for `size` element operations applies. */
    int nt = mcp_kthreads(ctx, size);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int t = 0; t < nt; t++)
        concat_copy_range(yd, x, n, inner, start, total, size * t / nt, size * (t + 1) / nt);
    mcp_free(moved);
    return MCP_STATUS_OK;
}

static mcp_status concat_run(mcp_kernel_ctx *ctx)
{
    binary_state *st = ctx->state;
    if (!st) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    int n = ctx->n_inputs;
    if (n < 1 || n > MCP_DNNL_KEYS || !all_f32_4d(ctx, n)) return mcp__dnnl_fallback_run(ctx, &st->c.fb);
    const mcp_tensor *in[MCP_DNNL_KEYS];
    dnnl_memory_desc_t md[MCP_DNNL_KEYS];
    int ids[MCP_DNNL_KEYS];
    for (int i = 0; i < n; i++) {
        in[i] = mcp_kin(ctx, i);
        for (int d = 0; d < 4; d++)
            if (d != st->axis && in[i]->dims[d] != in[0]->dims[d]) return mcp__dnnl_fallback_run(ctx, &st->c.fb);
        /* oneDNN's concat takes one data type (bf16 inputs next to float32
         * ones go through the reference kernel, in float32). */
        if (!mcp__dnnl_tensor_md(in[i], &md[i]) || md[i].data_type != md[0].data_type)
            return mcp__dnnl_fallback_run(ctx, &st->c.fb);
        ids[i] = DNNL_ARG_MULTIPLE_SRC + i;
    }
    mcp_dnnl_entry local;
    const mcp_dnnl_entry *e = NULL;
    mcp_status rs = mcp__dnnl_cache_get(ctx, &st->c.cache, st, md, n, concat_build, &local, &e);
    if (rs != MCP_STATUS_OK) return rs;
    int64_t outer, inner[MCP_DNNL_KEYS];
    /* The direct copy writes e's layout: only an entry that outlives the
     * call may lend its format to the output. */
    if (e != &local && concat_copy_layout(st->axis, n, md, &e->dst.md, &outer, inner)) {
        rs = concat_copy(ctx, e, n, in, outer, inner);
        return rs;
    }
    return mcp__dnnl_run_entry(ctx, e, &local, n, in, md, ids);
}

const mcp_kernel_def mcp__dnnl_binary_kernel = {
    MCP_KERNEL_FIELDS("", "Binary", 7, 0, binary_run, NULL, binary_prepare, mcp__dnnl_cached_free),
    .reads_formats = true,
};
const mcp_kernel_def mcp__dnnl_concat_kernel = {
    MCP_KERNEL_FIELDS("", "Concat", 4, 0, concat_run, NULL, binary_prepare, mcp__dnnl_cached_free),
    .reads_formats = true,
};
