/*
 * Attention (ONNX 23, 24) on float32 tensors, fused: for each (batch, query
 * head) and block of up to ATT_BLOCK query rows, the scores against every
 * key are one oneDNN sgemm into a per-thread buffer of ATT_BLOCK x total
 * floats, then softcap, bias and softmax run over each row in place, and a
 * second sgemm multiplies the probabilities with the values straight into
 * Y. The (batch, heads, q, total) score tensor of the decomposed graph is
 * never written, so long sequences stay in cache. Grouped-query heads read
 * their shared key / value head in place, and in a decoding step (one query
 * row) the heads of a group are the rows of one product; 3-D and 4-D
 * layouts are read through their strides, without transposes.
 *
 * When the node does not ask for qk_matmul_output, causal masking and
 * nonpad_kv_seqlen cut the keys a block multiplies against (about half the
 * work of a causal prefill). float16 and bfloat16 inputs are widened to
 * float32 first and the outputs rounded back; double, and tensors in a
 * oneDNN layout, run the reference kernel.
 */
#include <math.h>

#include <omp.h>

#include "ops/attention.h"
#include "ops/dnnl/dnnl_util.h"
#include "ops/ref/elementwise_util.h" /* mcp__ew_expf_nonpos */
#include "ops/ref/reduce_util.h"     /* mcp__red_sum_f32 */

#define ATT_BLOCK 64

bool mcp__dnnl_attention_supported(const mcp_node *node, const mcp_graph *graph)
{
    /* float32, float16 and bfloat16 (widened to float32) at run time;
     * other types run the reference kernel. */
    if (strcmp(node->op_type, "Attention") != 0) return false;
    if (strcmp(node->domain, MCP_DOMAIN_INTERNAL) != 0 && (strcmp(node->domain, "") != 0 || node->opset < 23))
        return false;
    for (int i = 0; i < 3; i++) {
        const mcp_graph_value *v = mcp__dnnl_input(node, graph, i);
        if (!v || v->type.kind != MCP_VALUE_TENSOR || (v->type.rank != 3 && v->type.rank != 4)) return false;
        mcp_dtype d = v->type.dtype;
        if (d != MCP_DTYPE_FLOAT && d != MCP_DTYPE_FLOAT16 && d != MCP_DTYPE_BFLOAT16) return false;
    }
    return true;
}

static mcp_status att_prepare(const mcp_node *node, const mcp_graph *graph, void **state, mcp_err *err)
{
    mcp_dnnl_cached *c = mcp_calloc(1, sizeof *c);
    if (!c) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = mcp__dnnl_cached_init(c, node, graph, err);
    if (st != MCP_STATUS_OK) {
        mcp__dnnl_cached_free(c);
        return st;
    }
    *state = c;
    return MCP_STATUS_OK;
}


/* Where a block's keys (or values) of batch b, kv head h start, and the
 * distance between rows. */
typedef struct att_src {
    const float *base;
    int64_t s[3]; /* strides over (batch, head, position) */
} att_src;

/* Softmax of n scores in place (every one -inf: NaN, as the definition's
 * softmax gives); the exponentials in AVX-512 where the CPU has it. */
MCP_MULTIVERSION static void softmax_row(float *s, int64_t n)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t t = 0; t < n; t++) mx = s[t] > mx ? s[t] : mx;
    if (mx == -INFINITY) {
        for (int64_t t = 0; t < n; t++) s[t] = NAN;
        return;
    }
#pragma omp simd
    for (int64_t t = 0; t < n; t++) s[t] = mcp__ew_expf_nonpos(s[t] - mx);
    const float r = (float)(1.0 / mcp__red_sum_f32(s, n));
#pragma omp simd
    for (int64_t t = 0; t < n; t++) s[t] *= r;
}

/* Bias, softcap and softmax of one row of n scores (query row i of batch b,
 * head h), with the qk_matmul_output writes its mode asks for. */
static void att_row(const mcp_attention_plan *p, int64_t b, int64_t h, int64_t i, float *s, int64_t n, float *qk)
{
    const int64_t offset = mcp_attention_causal_offset(p, b), valid = mcp_attention_valid_keys(p, b);
    if (p->softcap > 0.0f) {
        const float cap = p->softcap, inv = 1.0f / p->softcap;
        for (int64_t t = 0; t < n; t++) s[t] = cap * tanhf(s[t] * inv);
    }
    if (qk && p->mode <= 1) memcpy(qk, s, (size_t)n * sizeof *s);
    if (p->mask) {
        int64_t listed = p->mask_len < n ? p->mask_len : n;
        const int64_t at = b * p->ms[0] + h * p->ms[1] + i * p->ms[2];
        if (p->mask->dtype == MCP_DTYPE_FLOAT) {
            const float *m = (const float *)p->mask->data + at;
            for (int64_t t = 0; t < listed; t++) s[t] += m[t];
        } else if (p->mask->dtype == MCP_DTYPE_BOOL) {
            const uint8_t *m = (const uint8_t *)p->mask->data + at;
            for (int64_t t = 0; t < listed; t++)
                if (!m[t]) s[t] = -INFINITY;
        } else {
            for (int64_t t = 0; t < listed; t++) s[t] += (float)mcp_attention_mask_at(p, b, h, i, t);
        }
        for (int64_t t = listed; t < n; t++) s[t] = -INFINITY;
    }
    int64_t open = valid;
    if (p->causal && i + offset + 1 < open) open = i + offset + 1;
    for (int64_t t = open < 0 ? 0 : open; t < n; t++) s[t] = -INFINITY;
    if (qk && p->mode == 2) memcpy(qk, s, (size_t)n * sizeof *s);
    softmax_row(s, n);
    if (qk && p->mode == 3) memcpy(qk, s, (size_t)n * sizeof *s);
}

/*
 * The fused computation on float32 data: Q, K, V and the past as the plan's
 * tensors, Y and qk_matmul_output (NULL: not asked for) as float buffers of
 * the outputs' layouts; present_k / present_v, when given, already hold the
 * past and new keys / values (batch, kv heads, total, size).
 */
static mcp_status att_core(mcp_kernel_ctx *ctx, const mcp_attention_plan *p, float *yd, float *qkd,
                           const float *present_k, const float *present_v)
{
    /* The rows of one product: up to ATT_BLOCK query rows of one head; or,
     * for a single query row (a decoding step) of grouped-query heads, the
     * rows of every query head sharing a key / value head, so that those
     * keys and values are read once per group instead of once per head. */
    const int64_t T = p->total, group = p->hq / p->hkv;
    const bool heads_as_rows = p->sq == 1 && group > 1;
    const int64_t blocks = heads_as_rows ? 1 : (p->sq + ATT_BLOCK - 1) / ATT_BLOCK;
    const int64_t items = p->batch * (heads_as_rows ? p->hkv : p->hq) * blocks;
    if (items == 0 || T == 0) return MCP_STATUS_OK;
    const int64_t block = heads_as_rows ? group : p->sq < ATT_BLOCK ? p->sq : ATT_BLOCK;
    /* Element distance between consecutive rows of a product in Q and Y. */
    const int64_t q_step = heads_as_rows ? p->qs[1] : p->qs[2], y_step = heads_as_rows ? p->ys[1] : p->ys[2];

    /* Keys and values: in place without a past; else past and new ones
     * together, in the present outputs or a buffer. */
    att_src ks = {p->k->data, {p->ks[0], p->ks[1], p->ks[2]}}, vs = {p->v->data, {p->vs[0], p->vs[1], p->vs[2]}};
    float *owned = NULL, *heap = NULL; /* heap: scratch when the host gives none */
    if (p->past) {
        size_t kn = present_k ? 0 : (size_t)(p->batch * p->hkv * T * p->d);
        size_t vn = present_v ? 0 : (size_t)(p->batch * p->hkv * T * p->dv);
        if (kn + vn && !(owned = mcp_kscratch(ctx, 1, (kn + vn) * sizeof *owned)) &&
            !(owned = heap = mcp_malloc((kn + vn) * sizeof *owned)))
            return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (present_k) {
            ks.base = present_k;
        } else {
            mcp_attention_concat(p, false, owned);
            ks.base = owned;
        }
        if (present_v) {
            vs.base = present_v;
        } else {
            mcp_attention_concat(p, true, owned + kn);
            vs.base = owned + kn;
        }
        ks.s[0] = p->hkv * T * p->d, ks.s[1] = T * p->d, ks.s[2] = p->d;
        vs.s[0] = p->hkv * T * p->dv, vs.s[1] = T * p->dv, vs.s[2] = p->dv;
    }

    int nt = mcp_kthreads(ctx, items * block * T * (p->d + p->dv));
    if (nt > items) nt = (int)items;
    const size_t sbytes = (size_t)nt * (size_t)block * (size_t)T * sizeof(float);
    float *scores = mcp_kscratch(ctx, 0, sbytes), *heap_scores = NULL;
    if (!scores && !(scores = heap_scores = mcp_malloc(sbytes))) {
        mcp_free(heap);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    const float *qd = p->q->data;
    const int64_t heads = heads_as_rows ? p->hkv : p->hq;
    int failed = 0;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int64_t it = 0; it < items; it++) {
        float *s = scores + (size_t)omp_get_thread_num() * (size_t)block * (size_t)T;
        /* Row r of the product is query row i0 + r of head h, or (heads as
         * rows) row 0 of head h + r. */
        const int64_t blk = it % blocks, b = it / blocks / heads;
        const int64_t h = heads_as_rows ? it / blocks % heads * group : it / blocks % heads, hk = h / group;
        const int64_t i0 = blk * ATT_BLOCK, rows = heads_as_rows ? group : p->sq - i0 < ATT_BLOCK ? p->sq - i0 : ATT_BLOCK;
        const int64_t last_i = heads_as_rows ? 0 : i0 + rows - 1;
        /* Keys past the last one a row of this block may see need no product. */
        int64_t n = T;
        if (!qkd) {
            int64_t open = mcp_attention_valid_keys(p, b);
            if (p->causal && last_i + 1 + mcp_attention_causal_offset(p, b) < open)
                open = last_i + 1 + mcp_attention_causal_offset(p, b);
            if (open >= 1) n = open;
        }
        const float *qb = qd + b * p->qs[0] + h * p->qs[1] + i0 * p->qs[2];
        const float *kb = ks.base + b * ks.s[0] + hk * ks.s[1];
        const float *vb = vs.base + b * vs.s[0] + hk * vs.s[1];
        if (dnnl_sgemm('N', 'T', rows, n, p->d, p->scale, qb, q_step, kb, ks.s[2], 0.0f, s, n) != dnnl_success) {
#pragma omp atomic write
            failed = 1;
            continue;
        }
        for (int64_t r = 0; r < rows; r++) {
            const int64_t rh = heads_as_rows ? h + r : h, ri = heads_as_rows ? 0 : i0 + r;
            att_row(p, b, rh, ri, s + r * n, n, qkd ? qkd + ((b * p->hq + rh) * p->sq + ri) * T : NULL);
        }
        float *yb = yd + b * p->ys[0] + h * p->ys[1] + i0 * p->ys[2];
        if (dnnl_sgemm('N', 'N', rows, p->dv, n, 1.0f, s, n, vb, vs.s[2], 0.0f, yb, y_step) != dnnl_success) {
#pragma omp atomic write
            failed = 1;
        }
    }
    mcp_free(heap_scores);
    mcp_free(heap);
    return failed ? mcp_kfail(ctx, MCP_STATUS_INTERNAL, "oneDNN sgemm failed") : MCP_STATUS_OK;
}


/* A float16 / bfloat16 tensor as float32 (the same layout), or NULL. */
static mcp_status widen(mcp_kernel_ctx *ctx, const mcp_tensor *t, mcp_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (!t) return MCP_STATUS_OK;
    mcp_status st = mcp_tensor_alloc(out, MCP_DTYPE_FLOAT, t->rank, t->dims, ctx->err);
    if (st != MCP_STATUS_OK) return st;
    const uint16_t *h = t->data;
    float *f = out->data;
    const int64_t n = mcp_tensor_numel(t);
    if (t->dtype == MCP_DTYPE_FLOAT16) {
        for (int64_t i = 0; i < n; i++) f[i] = mcp_f16_to_f32(h[i]);
    } else {
        for (int64_t i = 0; i < n; i++) f[i] = mcp_bf16_to_f32(h[i]);
    }
    return MCP_STATUS_OK;
}

static bool half(mcp_dtype d) { return d == MCP_DTYPE_FLOAT16 || d == MCP_DTYPE_BFLOAT16; }

/*
 * float16 and bfloat16 Attention: Q, K, V and the past widened to float32,
 * the fused computation, Y and qk_matmul_output rounded back (to nearest
 * even). The present outputs are already written (bytes of the inputs).
 */
static mcp_status att_half(mcp_kernel_ctx *ctx, const mcp_attention_plan *p, mcp_tensor *y, mcp_tensor *qk)
{
    mcp_tensor w[5];
    const mcp_tensor *src[5] = {p->q, p->k, p->v, p->past_key, p->past_value};
    mcp_status st = MCP_STATUS_OK;
    for (int i = 0; i < 5; i++) memset(&w[i], 0, sizeof w[i]);
    for (int i = 0; st == MCP_STATUS_OK && i < 5; i++) st = widen(ctx, src[i], &w[i]);
    const int64_t ny = mcp_tensor_numel(y), nq = qk ? mcp_tensor_numel(qk) : 0;
    float *yf = NULL, *qf = NULL;
    if (st == MCP_STATUS_OK && (!(yf = mcp_malloc((size_t)(ny ? ny : 1) * sizeof *yf)) ||
                                (qk && !(qf = mcp_malloc((size_t)(nq ? nq : 1) * sizeof *qf)))))
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == MCP_STATUS_OK) {
        mcp_attention_plan pf = *p;
        pf.q = &w[0], pf.k = &w[1], pf.v = &w[2];
        pf.past_key = p->past_key ? &w[3] : NULL;
        pf.past_value = p->past_value ? &w[4] : NULL;
        st = att_core(ctx, &pf, yf, qf, NULL, NULL);
    }
    if (st == MCP_STATUS_OK) {
        const bool f16 = y->dtype == MCP_DTYPE_FLOAT16;
        uint16_t *yh = y->data, *qh = qk ? qk->data : NULL;
        for (int64_t i = 0; i < ny; i++) yh[i] = f16 ? mcp_f32_to_f16(yf[i]) : mcp_f32_to_bf16(yf[i]);
        for (int64_t i = 0; i < nq; i++) qh[i] = f16 ? mcp_f32_to_f16(qf[i]) : mcp_f32_to_bf16(qf[i]);
    }
    for (int i = 0; i < 5; i++) mcp_tensor_release(&w[i]);
    mcp_free(yf);
    mcp_free(qf);
    return st;
}

static mcp_status att_run(mcp_kernel_ctx *ctx)
{
    mcp_dnnl_cached *c = ctx->state;
    if (!c) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "missing oneDNN state");
    mcp_attention_plan p;
    mcp_status st = mcp_attention_plan_init(ctx, &p);
    if (st != MCP_STATUS_OK) return st;
    const mcp_tensor *t[5] = {p.q, p.k, p.v, p.past_key, p.past_value};
    bool f32 = true, halves = half(p.q->dtype);
    for (int i = 0; i < 5; i++) {
        if (!t[i]) continue;
        f32 = f32 && t[i]->dtype == MCP_DTYPE_FLOAT && !t[i]->format;
        halves = halves && t[i]->dtype == p.q->dtype && !t[i]->format;
    }
    if ((!f32 && !halves) || (p.mask && p.mask->format)) return mcp__dnnl_fallback_run(ctx, &c->fb);
    mcp_tensor *y, *qk;
    st = mcp_attention_outputs(ctx, &p, &y, &qk);
    if (st == MCP_STATUS_OK) st = mcp_attention_write_present(ctx, &p);
    if (st != MCP_STATUS_OK || mcp_attention_nothing_to_do(y, qk)) return st;
    if (halves) return att_half(ctx, &p, y, qk);
    return att_core(ctx, &p, y->data, qk ? qk->data : NULL,
                    p.past && p.want_present_k ? ctx->outputs[1]->tensor.data : NULL,
                    p.past && p.want_present_v ? ctx->outputs[2]->tensor.data : NULL);
}

const mcp_kernel_def mcp__dnnl_attention_kernel = {
    MCP_KERNEL_FIELDS("", "Attention", 23, 0, att_run, NULL, att_prepare, mcp__dnnl_cached_free),
};
