/* A context: the paged KV cache of its sequences and the forward pass of a
 * batch of tokens through the decoder.
 *
 * One decode call is one OpenMP parallel region (the thread pool oneDNN
 * shares): every stage splits its work by thread (weight rows for the
 * products, so each core streams its own share of the weights; tokens or
 * (token, head) pairs for the rest), with a barrier between stages. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "llm/llm_internal.h"
#include "tensor/tensor.h"

mcp_llm_context_options mcp_llm_context_options_default(void)
{
    mcp_llm_context_options o;
    memset(&o, 0, sizeof o);
    o.max_seqs = 1;
    o.max_batch_tokens = 512;
    o.block_tokens = 16;
    o.kv_type = MCP_LLM_KV_F16;
    return o;
}

static size_t kv_elem(const mcp_llm_context *c) { return c->o.kv_type == MCP_LLM_KV_F16 ? 2 : 4; }

void mcp_llm_context_free(mcp_llm_context *c)
{
    if (!c) return;
    if (c->pool) munmap(c->pool, c->pool_len);
    if (c->seqs)
        for (int i = 0; i < c->o.max_seqs; i++) mcp_free(c->seqs[i].blocks);
    mcp_free(c->seqs);
    mcp_free(c->free_blocks);
    mcp__llm_cache_free(c);
    float *bufs[] = {c->x, c->h, c->q, c->k, c->v, c->att, c->ff_a, c->ff_b, c->logits, c->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) mcp_free(bufs[i]);
    mcp_free(c->act);
    mcp_free(c->tok_pos);
    mcp_free(c->seq_add);
    mcp_free(c->block_ptrs);
    mcp_free(c);
}

static float *falloc(int64_t n)
{
    size_t bytes;
    if (n <= 0 || !mcp_mul_overflow_size((size_t)n, sizeof(float), &bytes)) return NULL;
    return mcp_malloc(bytes);
}

mcp_status mcp_llm_context_create(const mcp_llm_model *m, const mcp_llm_context_options *opts, mcp_llm_context **out,
                                  char *errbuf, size_t err_len)
{
    mcp_err err_s = {errbuf, err_len}, *err = &err_s;
    *out = NULL;
    mcp_llm_context_options o = opts ? *opts : mcp_llm_context_options_default();
    if (o.n_ctx <= 0 || o.n_ctx > m->n_ctx_train) o.n_ctx = o.n_ctx <= 0 ? m->n_ctx_train : o.n_ctx;
    if (m->arch == LLM_ARCH_GPT2 && o.n_ctx > m->n_ctx_train)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "n_ctx %lld is past GPT-2's %lld learned positions",
                           (long long)o.n_ctx, (long long)m->n_ctx_train);
    if (o.max_seqs <= 0) o.max_seqs = 1;
    if (o.max_batch_tokens <= 0) o.max_batch_tokens = 512;
    if (o.block_tokens <= 0) o.block_tokens = 16;
    if (o.max_seqs > 4096 || o.max_batch_tokens > 65536 || o.block_tokens > 4096 || o.n_ctx > (1 << 24))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "context options out of range (max_seqs %d, max_batch_tokens %d, block_tokens %d, n_ctx %lld)",
                           o.max_seqs, o.max_batch_tokens, o.block_tokens, (long long)o.n_ctx);
    if (o.kv_type != MCP_LLM_KV_F16 && o.kv_type != MCP_LLM_KV_F32)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "unknown KV cache type %d", (int)o.kv_type);
    mcp_llm_context *c = mcp_calloc(1, sizeof *c);
    if (!c) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    c->m = m;
    c->o = o;
    const int64_t kvd = m->n_head_kv * m->head_dim, qd = m->n_head * m->head_dim;
    c->block_bytes = 2 * (size_t)m->n_layer * (size_t)o.block_tokens * (size_t)kvd * kv_elem(c);
    const int64_t blocks_per_seq = (o.n_ctx + o.block_tokens - 1) / o.block_tokens;
    if (o.kv_budget_bytes > 0) c->n_blocks = o.kv_budget_bytes / (int64_t)c->block_bytes;
    else c->n_blocks = blocks_per_seq * o.max_seqs;
    if (c->n_blocks < 1 || c->n_blocks > INT32_MAX) {
        mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "a KV budget of %lld bytes holds %lld blocks of %zu bytes",
                    (long long)o.kv_budget_bytes, (long long)c->n_blocks, c->block_bytes);
        mcp_llm_context_free(c);
        return MCP_STATUS_INVALID_ARGUMENT;
    }
    /* The pool is reserved, not committed: pages arrive as blocks fill. */
    c->pool_len = (size_t)c->n_blocks * c->block_bytes;
    c->pool = mmap(NULL, c->pool_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (c->pool == MAP_FAILED) {
        c->pool = NULL;
        mcp_llm_context_free(c);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "cannot reserve a KV cache of %zu bytes", (size_t)c->pool_len);
    }
    c->free_blocks = mcp_malloc((size_t)c->n_blocks * sizeof *c->free_blocks);
    c->seqs = mcp_calloc((size_t)o.max_seqs, sizeof *c->seqs);
    const int64_t T = o.max_batch_tokens, nt = m->threads;
    const int64_t kmax = m->n_ff > qd ? (m->n_ff > m->n_embd ? m->n_ff : m->n_embd) : (qd > m->n_embd ? qd : m->n_embd);
    c->x = falloc(T * m->n_embd);
    c->h = falloc(T * m->n_embd);
    c->q = falloc(T * (qd + 2 * kvd));
    c->k = falloc(T * kvd);
    c->v = falloc(T * kvd);
    c->att = falloc(T * qd);
    c->ff_a = falloc(T * m->n_ff);
    c->ff_b = falloc(T * m->n_ff);
    c->scores_stride = o.n_ctx > m->head_dim ? o.n_ctx : m->head_dim;
    c->scores = falloc(nt * c->scores_stride);
    c->act_cap = (size_t)T * mcp_llm_act_row_bytes(MCP_LLM_ACT_F32, kmax);
    c->act = mcp_malloc(c->act_cap);
    c->tok_pos = mcp_malloc((size_t)T * sizeof *c->tok_pos);
    c->seq_add = mcp_calloc((size_t)o.max_seqs, sizeof *c->seq_add);
    c->block_ptrs = mcp_malloc((size_t)(nt * blocks_per_seq) * sizeof *c->block_ptrs);
    if (!c->free_blocks || !mcp__llm_cache_init(c) || !c->seqs || !c->x || !c->h || !c->q || !c->k || !c->v || !c->att || !c->ff_a || !c->ff_b ||
        !c->scores || !c->act || !c->tok_pos || !c->block_ptrs || !c->seq_add) {
        mcp_llm_context_free(c);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for a context of %lld tokens a step",
                           (long long)T);
    }
    /* Handed out lowest first. */
    for (int64_t i = 0; i < c->n_blocks; i++) c->free_blocks[i] = (int32_t)(c->n_blocks - 1 - i);
    c->n_free = c->n_blocks;
    *out = c;
    return MCP_STATUS_OK;
}

int64_t mcp_llm_seq_len(const mcp_llm_context *c, int seq)
{
    return seq >= 0 && seq < c->o.max_seqs ? c->seqs[seq].n_tokens : 0;
}

void mcp_llm_kv_usage(const mcp_llm_context *c, int64_t *used, int64_t *total)
{
    *used = c->n_blocks - mcp__llm_blocks_available(c);
    *total = c->n_blocks;
}

void mcp_llm_seq_truncate(mcp_llm_context *c, int seq, int64_t from)
{
    if (seq < 0 || seq >= c->o.max_seqs || from < 0) return;
    llm_seq *s = &c->seqs[seq];
    if (from >= s->n_tokens) return;
    const int64_t bt = c->o.block_tokens;
    int keep = (int)((from + bt - 1) / bt);
    while (s->n_blocks > keep) mcp__llm_block_drop(c, s->blocks[--s->n_blocks]);
    /* The next token would land in the kept partial block: when that one is
     * published (shared), the sequence gets its own copy; with no block to
     * copy into, it ends at the block boundary instead. */
    if (from % bt && keep > 0 && c->block_hash[s->blocks[keep - 1]]) {
        int32_t old = s->blocks[keep - 1], copy = mcp__llm_block_take(c);
        if (copy >= 0) {
            memcpy(c->pool + (size_t)copy * c->block_bytes, c->pool + (size_t)old * c->block_bytes, c->block_bytes);
            s->blocks[keep - 1] = copy;
        } else {
            s->n_blocks--;
            from = (from / bt) * bt;
        }
        mcp__llm_block_drop(c, old);
    }
    s->n_tokens = from;
}

const float *mcp_llm_logits(const mcp_llm_context *c, int i)
{
    if (i < 0 || i >= c->n_logits) return NULL;
    return c->logits + (size_t)i * (size_t)c->m->n_vocab;
}

/* Step state shared by the threads of one decode. */
typedef struct step {
    mcp_llm_context *c;
    const mcp_llm_model *m;
    const mcp_llm_batch *b;
    int T;
    int n_out;     /* tokens whose logits are wanted */
    int *out_rows; /* their batch indexes */
} step;

/* This thread's share of rows [0, rows), in multiples of 16 so the kernels'
 * tiles stay whole. */
static void thread_rows(int64_t rows, int64_t *r0, int64_t *r1)
{
    const int nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t units = (rows + 15) / 16;
    const int64_t u0 = units * id / nt, u1 = units * (id + 1) / nt;
    *r0 = u0 * 16 < rows ? u0 * 16 : rows;
    *r1 = u1 * 16 < rows ? u1 * 16 : rows;
}

/* Activations of n rows of k (row stride ld floats) into the form the
 * weight takes; all threads take part; ends with a barrier. */
static void prep_act(step *S, const float *x, int64_t ld, int n, int64_t k, mcp_llm_act act)
{
    const size_t rb = mcp_llm_act_row_bytes(act, k);
#pragma omp for schedule(static)
    for (int t = 0; t < n; t++) mcp_llm_act_quantize(act, x + (int64_t)t * ld, k, S->c->act + (size_t)t * rb);
}

/* y[t * ldy + r] = W . act row t, for this thread's rows; no barrier. */
static void gemm_part(step *S, const llm_weight *w, int n, float *y, int64_t ldy)
{
    int64_t r0, r1;
    thread_rows(w->rows, &r0, &r1);
    if (r0 >= r1) return;
    mcp_llm_gemm_args a = {w->type, w->data, w->row_bytes, w->k, r0, r1, w->act, S->c->act,
                           mcp_llm_act_row_bytes(w->act, w->k), n, y, ldy};
    mcp_llm_gemm(&a);
}

static void add_bias(const llm_vec *b, float *y, int64_t ld, int n)
{
    if (!b->data) return;
#pragma omp for schedule(static)
    for (int t = 0; t < n; t++) mcp_llm_add(y + (int64_t)t * ld, b->data, b->n);
}

static void norm_row(const mcp_llm_model *m, const llm_vec *w, const llm_vec *b, const float *x, float *out)
{
    if (m->arch == LLM_ARCH_GPT2) mcp_llm_layernorm(x, w->data, b->data, m->n_embd, m->norm_eps, out);
    else mcp_llm_rmsnorm(x, w->data, m->n_embd, m->norm_eps, out);
}

/* x += add (+ add_b): a residual, when add is given; ends with a barrier. */
static void residual(step *S, const float *add, const llm_vec *add_b)
{
    const int64_t e = S->m->n_embd;
#pragma omp for schedule(static)
    for (int t = 0; t < S->T; t++) {
        float *xi = S->c->x + (int64_t)t * e;
        const float *ai = add + (int64_t)t * e;
        if (add_b->data)
            for (int64_t i = 0; i < e; i++) xi[i] += ai[i] + add_b->data[i];
        else mcp_llm_add(xi, ai, e);
    }
}

/* Per token, in one pass: the residual x += add (+ add_b) when add is given
 * (the previous product's output), h = norm(x), and h in the form `act`
 * in the activation buffer. One barrier for the three. add may be h. */
static void resid_norm_act(step *S, const float *add, const llm_vec *add_b, const llm_vec *w, const llm_vec *b,
                           mcp_llm_act act)
{
    mcp_llm_context *c = S->c;
    const int64_t e = S->m->n_embd;
    const size_t rb = mcp_llm_act_row_bytes(act, e);
#pragma omp for schedule(static)
    for (int t = 0; t < S->T; t++) {
        float *xi = c->x + (int64_t)t * e, *hi = c->h + (int64_t)t * e;
        if (add) {
            const float *ai = add + (int64_t)t * e;
            if (add_b->data)
                for (int64_t i = 0; i < e; i++) xi[i] += ai[i] + add_b->data[i];
            else mcp_llm_add(xi, ai, e);
        }
        norm_row(S->m, w, b, xi, hi);
        mcp_llm_act_quantize(act, hi, e, c->act + (size_t)t * rb);
    }
}

static uint8_t *kv_slot(const mcp_llm_context *c, const llm_seq *s, int64_t layer, int64_t pos, int which)
{
    const mcp_llm_model *m = c->m;
    const int64_t bt = c->o.block_tokens, kvd = m->n_head_kv * m->head_dim;
    uint8_t *block = c->pool + (size_t)s->blocks[pos / bt] * c->block_bytes;
    return block + (size_t)(((layer * 2 + which) * bt + pos % bt) * kvd) * kv_elem(c);
}

static void store_kv(const mcp_llm_context *c, uint8_t *dst, const float *src, int64_t n)
{
    if (c->o.kv_type == MCP_LLM_KV_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    /* Blocks are aligned and rows of heads even-sized: 2-byte aligned. */
    mcp_llm_f32_to_f16_row(src, (uint16_t *)(void *)dst, n);
}

static int tok_seq(const mcp_llm_batch *b, int t) { return b->seq ? b->seq[t] : 0; }

/* One layer. The previous layer's last residual (its down projection, in
 * h) is added here, fused with this layer's first norm. */
static void layer_forward(step *S, int64_t il, const llm_layer *prev)
{
    mcp_llm_context *c = S->c;
    const mcp_llm_model *m = S->m;
    const llm_layer *l = &m->layers[il];
    const int T = S->T;
    const int64_t e = m->n_embd, hd = m->head_dim, qd = m->n_head * hd, kvd = m->n_head_kv * hd;
    const bool gpt2 = m->arch == LLM_ARCH_GPT2;

    /* Q, K, V: GPT-2 has one fused matrix, split after. */
    int64_t ldq = qd;
    resid_norm_act(S, prev ? c->h : NULL, prev ? &prev->ffn_down_b : NULL, &l->attn_norm, &l->attn_norm_b,
                   gpt2 ? l->wqkv.act : l->wq.act);
    if (gpt2) {
        ldq = qd + 2 * kvd;
        gemm_part(S, &l->wqkv, T, c->q, ldq);
#pragma omp barrier
        add_bias(&l->bqkv, c->q, ldq, T);
    } else {
        gemm_part(S, &l->wq, T, c->q, qd);
        if (l->wk.act != l->wq.act) {
#pragma omp barrier
            prep_act(S, c->h, e, T, e, l->wk.act);
        }
        gemm_part(S, &l->wk, T, c->k, kvd);
        if (l->wv.act != l->wk.act) {
#pragma omp barrier
            prep_act(S, c->h, e, T, e, l->wv.act);
        }
        gemm_part(S, &l->wv, T, c->v, kvd);
#pragma omp barrier
        add_bias(&l->bq, c->q, qd, T);
        add_bias(&l->bk, c->k, kvd, T);
        add_bias(&l->bv, c->v, kvd, T);
    }
    /* RoPE, then this step's keys and values into the cache. */
#pragma omp for schedule(static)
    for (int t = 0; t < T; t++) {
        float *q = c->q + (int64_t)t * ldq;
        float *k = gpt2 ? q + qd : c->k + (int64_t)t * kvd;
        float *v = gpt2 ? q + qd + kvd : c->v + (int64_t)t * kvd;
        const int64_t pos = c->tok_pos[t];
        if (m->n_rot > 0) {
            /* The angles once per token, for every head. */
            float *cs = c->scores + (size_t)omp_get_thread_num() * (size_t)c->scores_stride;
            mcp_llm_rope_angles(m->n_rot, pos, m->inv_freq, cs);
            for (int64_t h = 0; h < m->n_head; h++) mcp_llm_rope(q + h * hd, m->n_rot, cs, m->rope_neox);
            for (int64_t h = 0; h < m->n_head_kv; h++) mcp_llm_rope(k + h * hd, m->n_rot, cs, m->rope_neox);
        }
        const llm_seq *s = &c->seqs[tok_seq(S->b, t)];
        store_kv(c, kv_slot(c, s, il, pos, 0), k, kvd);
        store_kv(c, kv_slot(c, s, il, pos, 1), v, kvd);
    }
    /* Attention: each (token, head) over its sequence's positions up to its own. */
    const float scale = 1.0f / sqrtf((float)hd);
    const int64_t bt = c->o.block_tokens, group = m->n_head / m->n_head_kv;
    const size_t es = kv_elem(c);
    const int tid = omp_get_thread_num();
    const int64_t per_thread = (c->o.n_ctx + bt - 1) / bt;
    const uint8_t **ptrs = c->block_ptrs + (size_t)tid * (size_t)per_thread;
    float *scores = c->scores + (size_t)tid * (size_t)c->scores_stride;
    int last_seq = -1;
#pragma omp for schedule(static)
    for (int64_t th = 0; th < (int64_t)T * m->n_head; th++) {
        const int t = (int)(th / m->n_head);
        const int64_t h = th % m->n_head, kvh = h / group;
        const int sq = tok_seq(S->b, t);
        const llm_seq *s = &c->seqs[sq];
        if (sq != last_seq) {
            for (int j = 0; j < s->n_blocks; j++) ptrs[j] = c->pool + (size_t)s->blocks[j] * c->block_bytes;
            last_seq = sq;
        }
        mcp_llm_kv_view view = {ptrs, (int)bt, (size_t)((il * 2 * bt * m->n_head_kv + kvh) * hd) * es,
                                (size_t)kvd * es, (size_t)(bt * kvd) * es, c->o.kv_type == MCP_LLM_KV_F16};
        mcp_llm_attend(c->q + (int64_t)t * ldq + h * hd, &view, hd, c->tok_pos[t] + 1, scale, scores,
                       c->att + (int64_t)t * qd + h * hd);
    }
    /* Output projection; its residual is fused with the feed-forward norm. */
    prep_act(S, c->att, qd, T, qd, l->wo.act);
    gemm_part(S, &l->wo, T, c->h, e);
#pragma omp barrier
    resid_norm_act(S, c->h, &l->bo, &l->ffn_norm, &l->ffn_norm_b, l->ffn_up.act);
    gemm_part(S, &l->ffn_up, T, c->ff_b, m->n_ff);
    if (!gpt2) {
        if (l->ffn_gate.act != l->ffn_up.act) {
#pragma omp barrier
            prep_act(S, c->h, e, T, e, l->ffn_gate.act);
        }
        gemm_part(S, &l->ffn_gate, T, c->ff_a, m->n_ff);
    }
#pragma omp barrier
    /* The gated activation and its quantization in one pass. */
    const size_t rb = mcp_llm_act_row_bytes(l->ffn_down.act, m->n_ff);
#pragma omp for schedule(static)
    for (int t = 0; t < T; t++) {
        float *up = c->ff_b + (int64_t)t * m->n_ff, *a = c->ff_a + (int64_t)t * m->n_ff;
        if (gpt2) {
            if (l->ffn_up_b.data) mcp_llm_add(up, l->ffn_up_b.data, m->n_ff);
            mcp_llm_gelu(up, m->n_ff, a);
        } else {
            mcp_llm_swiglu(a, up, m->n_ff, a);
        }
        mcp_llm_act_quantize(l->ffn_down.act, a, m->n_ff, c->act + (size_t)t * rb);
    }
    gemm_part(S, &l->ffn_down, T, c->h, e);
#pragma omp barrier
}

static void forward(step *S)
{
    mcp_llm_context *c = S->c;
    const mcp_llm_model *m = S->m;
    const int64_t e = m->n_embd;
#pragma omp parallel num_threads(m->threads)
    {
#pragma omp for schedule(static)
        for (int t = 0; t < S->T; t++) {
            float *xi = c->x + (int64_t)t * e;
            const llm_weight *w = &m->tok_embd;
            mcp_llm_dequantize_row(w->type, w->data + (size_t)S->b->tokens[t] * w->row_bytes, e, xi);
            if (m->pos_embd.data) {
                float *tmp = c->h + (int64_t)t * e;
                mcp_llm_dequantize_row(m->pos_embd.type, m->pos_embd.data + (size_t)c->tok_pos[t] * m->pos_embd.row_bytes,
                                       e, tmp);
                mcp_llm_add(xi, tmp, e);
            }
        }
        for (int64_t il = 0; il < m->n_layer; il++) layer_forward(S, il, il ? &m->layers[il - 1] : NULL);
        residual(S, c->h, &m->layers[m->n_layer - 1].ffn_down_b);
        /* The final norm of the rows whose logits are wanted, packed. */
#pragma omp for schedule(static)
        for (int i = 0; i < S->n_out; i++) {
            norm_row(m, &m->output_norm, &m->output_norm_b, c->x + (int64_t)S->out_rows[i] * e, c->h + (int64_t)i * e);
        }
        prep_act(S, c->h, e, S->n_out, e, m->output.act);
        gemm_part(S, &m->output, S->n_out, c->logits, m->n_vocab);
    }
}

mcp_status mcp_llm_decode(mcp_llm_context *c, const mcp_llm_batch *b, char *errbuf, size_t err_len)
{
    mcp_err err_s = {errbuf, err_len}, *err = &err_s;
    const mcp_llm_model *m = c->m;
    if (!b || b->n <= 0 || !b->tokens)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "a batch needs at least one token");
    if (b->n > c->o.max_batch_tokens)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "a batch of %d tokens is more than this context's %d a step",
                           b->n, c->o.max_batch_tokens);
    /* Check everything, and count each sequence's new tokens, before any
     * sequence changes. */
    int64_t need_blocks = 0;
    int n_out = 0;
    for (int t = 0; t < b->n; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= m->n_vocab)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "token %d of the batch is id %d, outside the vocabulary of %lld",
                               t, b->tokens[t], (long long)m->n_vocab);
        const int sq = tok_seq(b, t);
        if (sq < 0 || sq >= c->o.max_seqs)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "token %d of the batch is for sequence %d (0 to %d allowed)", t,
                               sq, c->o.max_seqs - 1);
        if (!b->logits ? t == b->n - 1 : b->logits[t] != 0) n_out++;
    }
    /* Positions: each token follows its sequence's tokens so far. */
    for (int sq = 0; sq < c->o.max_seqs; sq++) c->seq_add[sq] = 0;
    for (int t = 0; t < b->n; t++) {
        const int sq = tok_seq(b, t);
        const int64_t pos = c->seqs[sq].n_tokens + c->seq_add[sq]++;
        if (pos >= c->o.n_ctx)
            return mcp_err_set(err, MCP_STATUS_RESOURCE_EXHAUSTED, "sequence %d would pass the context of %lld tokens", sq,
                               (long long)c->o.n_ctx);
        c->tok_pos[t] = (int32_t)pos;
    }
    for (int sq = 0; sq < c->o.max_seqs; sq++) {
        if (!c->seq_add[sq]) continue;
        const llm_seq *s = &c->seqs[sq];
        need_blocks += (s->n_tokens + c->seq_add[sq] + c->o.block_tokens - 1) / c->o.block_tokens - s->n_blocks;
    }
    if (need_blocks > mcp__llm_blocks_available(c))
        return mcp_err_set(err, MCP_STATUS_RESOURCE_EXHAUSTED, "the KV cache needs %lld more blocks; %lld of %lld are free",
                           (long long)need_blocks, (long long)mcp__llm_blocks_available(c), (long long)c->n_blocks);
    /* The logits buffer grows to what is asked. */
    if (n_out > c->logits_cap) {
        float *grown = falloc((int64_t)n_out * m->n_vocab);
        if (!grown) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for %d rows of logits", n_out);
        mcp_free(c->logits);
        c->logits = grown;
        c->logits_cap = n_out;
        c->n_logits = 0;
    }
    int out_rows_small[64];
    int *out_rows = n_out <= 64 ? out_rows_small : mcp_malloc((size_t)n_out * sizeof *out_rows);
    if (!out_rows) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int t = 0, i = 0; t < b->n; t++)
        if (!b->logits ? t == b->n - 1 : b->logits[t] != 0) out_rows[i++] = t;
    /* Blocks for the new tokens. */
    for (int sq = 0; sq < c->o.max_seqs; sq++) {
        const int64_t add = c->seq_add[sq];
        if (!add) continue;
        llm_seq *s = &c->seqs[sq];
        const int want = (int)((s->n_tokens + add + c->o.block_tokens - 1) / c->o.block_tokens);
        if (want > s->cap_blocks) {
            int cap = s->cap_blocks ? s->cap_blocks : 8;
            while (cap < want) cap *= 2;
            int32_t *grown = mcp_realloc(s->blocks, (size_t)cap * sizeof *grown);
            if (!grown) {
                if (out_rows != out_rows_small) mcp_free(out_rows);
                return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            }
            s->blocks = grown;
            s->cap_blocks = cap;
        }
        while (s->n_blocks < want) s->blocks[s->n_blocks++] = mcp__llm_block_take(c); /* counted above: never -1 */
    }
    step S = {c, m, b, b->n, n_out, out_rows};
    forward(&S);
    for (int t = 0; t < b->n; t++) c->seqs[tok_seq(b, t)].n_tokens++;
    c->n_logits = n_out;
    if (out_rows != out_rows_small) mcp_free(out_rows);
    return MCP_STATUS_OK;
}
