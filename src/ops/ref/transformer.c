/*
 * Reference kernels: the transformer family. Attention (23, 24),
 * RotaryEmbedding (23), RMSNormalization (23) and GroupNormalization (18,
 * 21), each per its ONNX definition, in double arithmetic for every float
 * type, with a float32 path for the last three. The oneDNN backend has a
 * faster Attention for float32 (ops/dnnl/dnnl_attention.c) that shares
 * this file's reading of the node (ops/attention.h).
 */
#include <stdlib.h>

#include "ops/attention.h"
#include "ops/ref/reduce_util.h"

/* ---- Attention: reading the node ---- */

static bool float_type(mcp_dtype d) { return mcp__red_is_float(d); }

static bool output_wanted(const mcp_kernel_ctx *ctx, int i)
{
    return i < ctx->n_outputs && i < ctx->node->n_outputs && ctx->node->outputs[i] >= 0;
}

/* Checks a 4-D input's dims against (batch, heads, seq, size); seq < 0
 * takes any length. */
static mcp_status check_4d(mcp_kernel_ctx *ctx, const char *name, const mcp_tensor *t, int64_t batch, int64_t heads,
                           int64_t seq, int64_t size)
{
    if (t->rank != 4 || t->dims[0] != batch || t->dims[1] != heads || (seq >= 0 && t->dims[2] != seq) ||
        t->dims[3] != size)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' must have shape (%lld, %lld, %s, %lld), not rank %d with dims (%lld, %lld, ...)",
                         name, (long long)batch, (long long)heads, seq >= 0 ? "sequence" : "past_sequence",
                         (long long)size, t->rank, t->rank > 0 ? (long long)t->dims[0] : 0LL,
                         t->rank > 1 ? (long long)t->dims[1] : 0LL);
    return MCP_STATUS_OK;
}

static mcp_status plan_mask(mcp_kernel_ctx *ctx, mcp_attention_plan *p)
{
    const mcp_tensor *m = p->mask;
    if (m->dtype != MCP_DTYPE_BOOL && mcp__red_kind_of(m->dtype) == MCP__RED_OTHER)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'attn_mask' has type %s; bool or numbers expected",
                         mcp_dtype_name(m->dtype));
    if (m->rank < 1 || m->rank > 4)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'attn_mask' has rank %d; 1 to 4 expected", m->rank);
    const int64_t full[4] = {p->batch, p->hq, p->sq, p->total};
    static const char *const axis_names[4] = {"batch", "q_num_heads", "q_sequence_length", "total_sequence_length"};
    int64_t stride = 1;
    for (int a = 3; a >= 0; a--) {
        int mi = a - (4 - m->rank);
        int64_t dim = mi >= 0 ? m->dims[mi] : 1;
        if (a == 3) {
            if (dim > p->total || (dim < 1 && p->total > 0))
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'attn_mask' has %lld keys on its last axis; 1 to %lld expected (the total "
                                 "sequence length)", (long long)dim, (long long)p->total);
            p->mask_len = dim;
        } else if (dim != 1 && dim != full[a]) {
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'attn_mask' axis %d has %lld; it must be 1 or %lld (%s)", mi, (long long)dim,
                             (long long)full[a], axis_names[a]);
        }
        p->ms[a] = dim == 1 && a != 3 ? 0 : stride;
        stride *= dim;
    }
    return MCP_STATUS_OK;
}

/* The element counts the kernels index with (Y, the scores of every row,
 * the present caches) in int64: a shape whose product overflows fails. */
static mcp_status plan_sizes(mcp_kernel_ctx *ctx, const mcp_attention_plan *p)
{
    int64_t rows, n;
    if (__builtin_mul_overflow(p->batch, p->hq, &rows) || __builtin_mul_overflow(rows, p->sq, &rows) ||
        __builtin_mul_overflow(rows, p->dv, &n) || __builtin_mul_overflow(rows, p->total, &n) ||
        __builtin_mul_overflow(p->batch * p->hkv, p->total, &n) || __builtin_mul_overflow(n, p->d > p->dv ? p->d : p->dv, &n))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "the output would have more elements than can be counted (batch %lld, heads %lld, "
                         "sequence %lld, keys %lld)", (long long)p->batch, (long long)p->hq, (long long)p->sq,
                         (long long)p->total);
    return MCP_STATUS_OK;
}

/* Leading dim a of Q, K and V broadcast as MatMul broadcasts it: the
 * common size, or -1 when they do not broadcast. */
static int64_t lead_dim(const mcp_attention_plan *p, int a)
{
    int64_t n = 1;
    const mcp_tensor *t[3] = {p->q, p->k, p->v};
    for (int i = 0; i < 3; i++) {
        int64_t d = t[i]->dims[a];
        if (d != 1 && n != 1 && d != n) return -1;
        if (d != 1) n = d;
    }
    return n;
}

/*
 * The internal Attention (graph.h) that the passes make of a scaled
 * dot-product subgraph: 3-D (batch, seq, size) or 4-D (batch, heads, seq,
 * size) Q, K, V whose leading dims broadcast as the MatMuls' did (a
 * broadcast one is read with stride 0), `scale`, an optional mask.
 */
static mcp_status plan_internal(mcp_kernel_ctx *ctx, mcp_attention_plan *p)
{
    const mcp_tensor *t[3] = {p->q, p->k, p->v};
    int r = p->q->rank;
    for (int i = 0; i < 3; i++)
        if (!t[i] || !float_type(t[i]->dtype) || t[i]->dtype != p->q->dtype || t[i]->rank != r || (r != 3 && r != 4))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs Q, K and V must be float tensors of rank 3 or 4");
    int64_t batch = lead_dim(p, 0), heads = r == 4 ? lead_dim(p, 1) : 1;
    if (batch < 0 || heads < 0 || p->k->dims[r - 1] != p->q->dims[r - 1] || p->v->dims[r - 2] != p->k->dims[r - 2])
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs Q, K and V do not have matching shapes");
    p->batch = batch, p->hq = p->hkv = heads;
    p->sq = p->q->dims[r - 2], p->skv = p->total = p->k->dims[r - 2];
    p->d = p->q->dims[r - 1], p->dv = p->v->dims[r - 1];
    int64_t *st[3] = {p->qs, p->ks, p->vs};
    for (int i = 0; i < 3; i++) {
        int64_t rows = t[i]->dims[r - 2], size = t[i]->dims[r - 1], h = r == 4 ? t[i]->dims[1] : 1;
        st[i][2] = size;
        st[i][1] = h == 1 ? 0 : rows * size;
        st[i][0] = t[i]->dims[0] == 1 ? 0 : h * rows * size;
    }
    p->ys[2] = p->dv, p->ys[1] = p->sq * p->dv, p->ys[0] = heads * p->sq * p->dv;
    p->rank3 = false; /* Y is written as (batch, heads, seq, dv), which is (batch, seq, dv) for one head */
    p->scale = mcp_kattr_float(ctx, "scale", 1.0f);
    mcp_status ms = p->mask ? plan_mask(ctx, p) : MCP_STATUS_OK;
    return ms == MCP_STATUS_OK ? plan_sizes(ctx, p) : ms;
}

mcp_status mcp_attention_plan_init(mcp_kernel_ctx *ctx, mcp_attention_plan *p)
{
    memset(p, 0, sizeof *p);
    if (strcmp(ctx->node->domain, MCP_DOMAIN_INTERNAL) == 0) {
        p->q = mcp_kin(ctx, 0);
        p->k = mcp_kin(ctx, 1);
        p->v = mcp_kin(ctx, 2);
        p->mask = mcp_kin(ctx, 3);
        if (!p->q) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input Q is missing");
        return plan_internal(ctx, p);
    }
    p->q = mcp_kin(ctx, 0);
    p->k = mcp_kin(ctx, 1);
    p->v = mcp_kin(ctx, 2);
    p->mask = mcp_kin(ctx, 3);
    p->past_key = mcp_kin(ctx, 4);
    p->past_value = mcp_kin(ctx, 5);
    p->nonpad = ctx->opset >= 24 ? mcp_kin(ctx, 6) : NULL;
    static const char *const names[3] = {"Q", "K", "V"};
    const mcp_tensor *qkv[3] = {p->q, p->k, p->v};
    for (int i = 0; i < 3; i++) {
        if (!qkv[i]) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is missing", names[i]);
        if (!float_type(qkv[i]->dtype))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has type %s; a float type expected",
                             names[i], mcp_dtype_name(qkv[i]->dtype));
        if (qkv[i]->rank != p->q->rank || (p->q->rank != 3 && p->q->rank != 4))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "inputs 'Q', 'K' and 'V' must all be 3-D or all 4-D; '%s' has rank %d", names[i],
                             qkv[i]->rank);
    }
    if (p->k->dtype != p->q->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'K' has type %s, 'Q' %s; they must match",
                         mcp_dtype_name(p->k->dtype), mcp_dtype_name(p->q->dtype));
    int64_t qh = mcp_kattr_int(ctx, "q_num_heads", 0), kvh = mcp_kattr_int(ctx, "kv_num_heads", 0);
    if (qh < 0 || kvh < 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attributes 'q_num_heads' and 'kv_num_heads' must be positive");
    p->batch = p->q->dims[0];
    if (p->k->dims[0] != p->batch || p->v->dims[0] != p->batch)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'Q', 'K' and 'V' differ in batch size");
    if (p->q->rank == 3) {
        if (qh == 0 || kvh == 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "3-D inputs need attributes 'q_num_heads' and 'kv_num_heads'");
        p->rank3 = true;
        p->hq = qh;
        p->hkv = kvh;
        p->sq = p->q->dims[1];
        p->skv = p->k->dims[1];
        if (p->q->dims[2] < qh || p->k->dims[2] < kvh || p->v->dims[2] < kvh)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "hidden sizes of 'Q' (%lld), 'K' (%lld) and 'V' (%lld) must hold at least one element "
                             "per head (q_num_heads %lld, kv_num_heads %lld)", (long long)p->q->dims[2],
                             (long long)p->k->dims[2], (long long)p->v->dims[2], (long long)qh, (long long)kvh);
        if (p->q->dims[2] % qh || p->k->dims[2] % kvh || p->v->dims[2] % kvh)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "hidden sizes of 'Q' (%lld), 'K' (%lld) and 'V' (%lld) must divide by their heads "
                             "(%lld, %lld)", (long long)p->q->dims[2], (long long)p->k->dims[2],
                             (long long)p->v->dims[2], (long long)qh, (long long)kvh);
        p->d = p->q->dims[2] / qh;
        p->dv = p->v->dims[2] / kvh;
        if (p->k->dims[2] / kvh != p->d)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "'K' has head size %lld, 'Q' %lld",
                             (long long)(p->k->dims[2] / kvh), (long long)p->d);
        if (p->v->dims[1] != p->skv)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'K' and 'V' differ in sequence length");
        p->qs[0] = p->sq * p->hq * p->d, p->qs[1] = p->d, p->qs[2] = p->hq * p->d;
        p->ks[0] = p->skv * p->hkv * p->d, p->ks[1] = p->d, p->ks[2] = p->hkv * p->d;
        p->vs[0] = p->skv * p->hkv * p->dv, p->vs[1] = p->dv, p->vs[2] = p->hkv * p->dv;
        p->ys[0] = p->sq * p->hq * p->dv, p->ys[1] = p->dv, p->ys[2] = p->hq * p->dv;
    } else {
        p->hq = p->q->dims[1];
        p->hkv = p->k->dims[1];
        p->sq = p->q->dims[2];
        p->skv = p->k->dims[2];
        p->d = p->q->dims[3];
        p->dv = p->v->dims[3];
        if ((qh && qh != p->hq) || (kvh && kvh != p->hkv))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attributes 'q_num_heads' / 'kv_num_heads' disagree with the 4-D inputs' heads");
        mcp_status st = check_4d(ctx, "K", p->k, p->batch, p->hkv, -1, p->d);
        if (st == MCP_STATUS_OK) st = check_4d(ctx, "V", p->v, p->batch, p->hkv, p->skv, p->dv);
        if (st != MCP_STATUS_OK) return st;
        p->qs[0] = p->hq * p->sq * p->d, p->qs[1] = p->sq * p->d, p->qs[2] = p->d;
        p->ks[0] = p->hkv * p->skv * p->d, p->ks[1] = p->skv * p->d, p->ks[2] = p->d;
        p->vs[0] = p->hkv * p->skv * p->dv, p->vs[1] = p->skv * p->dv, p->vs[2] = p->dv;
        p->ys[0] = p->hq * p->sq * p->dv, p->ys[1] = p->sq * p->dv, p->ys[2] = p->dv;
    }
    if (p->hkv < 1 || p->hq < 1 || p->hq % p->hkv)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "query heads (%lld) must be a multiple of key / value heads (%lld)", (long long)p->hq,
                         (long long)p->hkv);
    if (!p->past_key != !p->past_value)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'past_key' and 'past_value' come together");
    if (p->past_key) {
        mcp_status st = check_4d(ctx, "past_key", p->past_key, p->batch, p->hkv, -1, p->d);
        if (st == MCP_STATUS_OK)
            st = check_4d(ctx, "past_value", p->past_value, p->batch, p->hkv, p->past_key->dims[2], p->dv);
        if (st != MCP_STATUS_OK) return st;
        if (p->past_key->dtype != p->k->dtype || p->past_value->dtype != p->v->dtype)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "inputs 'past_key' / 'past_value' must have the types of 'K' / 'V'");
        p->past = p->past_key->dims[2];
    }
    if (p->skv > INT64_MAX - p->past)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "the total sequence length overflows");
    p->total = p->past + p->skv;
    if (p->nonpad) {
        if (p->past_key)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'nonpad_kv_seqlen' cannot be used with 'past_key' / 'past_value'");
        if (p->nonpad->dtype != MCP_DTYPE_INT64 || p->nonpad->rank != 1 || p->nonpad->dims[0] != p->batch)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'nonpad_kv_seqlen' must be int64 of shape (%lld)",
                             (long long)p->batch);
        const int64_t *np = p->nonpad->data;
        for (int64_t b = 0; b < p->batch; b++)
            if (np[b] < 0 || np[b] > p->total)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'nonpad_kv_seqlen'[%lld] is %lld; 0 to %lld expected", (long long)b,
                                 (long long)np[b], (long long)p->total);
    }
    const mcp_attr *sa = mcp_kattr(ctx, "scale");
    p->scale = sa ? mcp_kattr_float(ctx, "scale", 1.0f) : (float)(1.0 / sqrt((double)(p->d > 0 ? p->d : 1)));
    p->softcap = mcp_kattr_float(ctx, "softcap", 0.0f);
    if (!(p->softcap >= 0.0f))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'softcap' must not be negative");
    p->causal = mcp_kattr_int(ctx, "is_causal", 0) != 0;
    int64_t mode = mcp_kattr_int(ctx, "qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'qk_matmul_output_mode' is %lld; 0 to 3 expected",
                         (long long)mode);
    p->mode = (int)mode;
    const mcp_attr *sp = mcp_kattr(ctx, "softmax_precision");
    if (sp) {
        int64_t t = mcp_kattr_int(ctx, "softmax_precision", 1);
        if (t != MCP_DTYPE_FLOAT && t != MCP_DTYPE_DOUBLE && t != MCP_DTYPE_FLOAT16 && t != MCP_DTYPE_BFLOAT16)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'softmax_precision' is %lld; a float type (1, 10, 11, 16) expected",
                             (long long)t);
    }
    if (p->mask) {
        mcp_status st = plan_mask(ctx, p);
        if (st != MCP_STATUS_OK) return st;
    }
    p->want_present_k = output_wanted(ctx, 1);
    p->want_present_v = output_wanted(ctx, 2);
    p->want_qk = output_wanted(ctx, 3);
    return plan_sizes(ctx, p);
}

bool mcp_attention_nothing_to_do(const mcp_tensor *y, const mcp_tensor *qk)
{
    return mcp_tensor_numel(y) == 0 && (!qk || mcp_tensor_numel(qk) == 0);
}

int64_t mcp_attention_causal_offset(const mcp_attention_plan *p, int64_t b)
{
    if (p->past_key) return p->past;
    if (p->nonpad) return ((const int64_t *)p->nonpad->data)[b] - p->sq;
    return 0;
}

int64_t mcp_attention_valid_keys(const mcp_attention_plan *p, int64_t b)
{
    return p->nonpad ? ((const int64_t *)p->nonpad->data)[b] : p->total;
}

double mcp_attention_mask_at(const mcp_attention_plan *p, int64_t b, int64_t h, int64_t i, int64_t t)
{
    if (!p->mask) return 0.0;
    if (t >= p->mask_len) return -INFINITY;
    int64_t at = b * p->ms[0] + h * p->ms[1] + i * p->ms[2] + t * p->ms[3];
    if (p->mask->dtype == MCP_DTYPE_BOOL) return ((const uint8_t *)p->mask->data)[at] ? 0.0 : -INFINITY;
    return mcp__red_ld_f64(p->mask->dtype, p->mask->data, at);
}

void mcp_attention_concat(const mcp_attention_plan *p, bool value, void *out)
{
    const mcp_tensor *past = value ? p->past_value : p->past_key, *now = value ? p->v : p->k;
    const int64_t size = value ? p->dv : p->d, *ns = value ? p->vs : p->ks;
    size_t es = mcp_dtype_size(now->dtype);
    if (size == 0 || p->total == 0) return;
    char *o = out;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t h = 0; h < p->hkv; h++) {
            if (p->past) {
                const char *src = (const char *)past->data + (size_t)((b * p->hkv + h) * p->past * size) * es;
                memcpy(o, src, (size_t)(p->past * size) * es);
                o += (size_t)(p->past * size) * es;
            }
            for (int64_t s = 0; s < p->skv; s++) {
                memcpy(o, (const char *)now->data + (size_t)(b * ns[0] + h * ns[1] + s * ns[2]) * es, (size_t)size * es);
                o += (size_t)size * es;
            }
        }
}

mcp_status mcp_attention_write_present(mcp_kernel_ctx *ctx, const mcp_attention_plan *p)
{
    for (int value = 0; value < 2; value++) {
        if (!(value ? p->want_present_v : p->want_present_k)) continue;
        int64_t dims[4] = {p->batch, p->hkv, p->total, value ? p->dv : p->d};
        mcp_tensor *t = mcp_kout_uninit(ctx, 1 + value, (value ? p->v : p->k)->dtype, 4, dims);
        if (!t) return MCP_STATUS_OUT_OF_MEMORY;
        mcp_attention_concat(p, value, t->data);
    }
    return MCP_STATUS_OK;
}

/* ---- Attention: the reference computation ---- */

/* Element offset of key / value position t (past first) of batch b, kv head h. */
static double kv_at(const mcp_attention_plan *p, bool value, int64_t b, int64_t h, int64_t t, int64_t e)
{
    const mcp_tensor *past = value ? p->past_value : p->past_key, *now = value ? p->v : p->k;
    int64_t size = value ? p->dv : p->d;
    const int64_t *s = value ? p->vs : p->ks;
    if (t < p->past) return mcp__red_ld_f64(past->dtype, past->data, ((b * p->hkv + h) * p->past + t) * size + e);
    return mcp__red_ld_f64(now->dtype, now->data, b * s[0] + h * s[1] + (t - p->past) * s[2] + e);
}

/*
 * One query row: scores over every key in double, softcap, bias, softmax,
 * then the weighted sum of values. The qk_matmul_output modes follow the
 * ONNX reference implementation: 0 and 1 give the scaled (and softcapped)
 * product, 2 adds the bias, 3 the softmax.
 */
static void attention_row(const mcp_attention_plan *p, int64_t b, int64_t h, int64_t i, double *sc, double *acc,
                          mcp_tensor *y, mcp_tensor *qk)
{
    const int64_t T = p->total, hk = h / (p->hq / p->hkv);
    const int64_t qo = b * p->qs[0] + h * p->qs[1] + i * p->qs[2];
    const int64_t offset = mcp_attention_causal_offset(p, b), valid = mcp_attention_valid_keys(p, b);
    const int64_t qko = ((b * p->hq + h) * p->sq + i) * T;
    for (int64_t t = 0; t < T; t++) {
        double s = 0.0;
        for (int64_t e = 0; e < p->d; e++)
            s += mcp__red_ld_f64(p->q->dtype, p->q->data, qo + e) * kv_at(p, false, b, hk, t, e);
        s *= p->scale;
        if (p->softcap > 0.0f) s = p->softcap * tanh(s / p->softcap);
        if (qk && p->mode <= 1) mcp__red_st_f64(qk->dtype, qk->data, qko + t, s);
        double bias = mcp_attention_mask_at(p, b, h, i, t);
        if ((p->causal && t > i + offset) || t >= valid) bias = -INFINITY;
        sc[t] = s + bias;
        if (qk && p->mode == 2) mcp__red_st_f64(qk->dtype, qk->data, qko + t, sc[t]);
    }
    double mx = -INFINITY;
    for (int64_t t = 0; t < T; t++) mx = sc[t] > mx ? sc[t] : mx;
    double sum = 0.0;
    for (int64_t t = 0; t < T; t++) sum += sc[t] = exp(sc[t] - mx); /* all -inf: NaN, as the definition's */
    for (int64_t t = 0; t < T; t++) {
        sc[t] /= sum;
        if (qk && p->mode == 3) mcp__red_st_f64(qk->dtype, qk->data, qko + t, sc[t]);
    }
    for (int64_t e = 0; e < p->dv; e++) acc[e] = 0.0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t e = 0; e < p->dv; e++) acc[e] += sc[t] * kv_at(p, true, b, hk, t, e);
    const int64_t yo = b * p->ys[0] + h * p->ys[1] + i * p->ys[2];
    for (int64_t e = 0; e < p->dv; e++) mcp__red_st_f64(y->dtype, y->data, yo + e, acc[e]);
}

/* Y, and the qk_matmul_output the node asks for. */
mcp_status mcp_attention_outputs(mcp_kernel_ctx *ctx, const mcp_attention_plan *p, mcp_tensor **y,
                                      mcp_tensor **qk)
{
    int64_t ydims[4];
    int yrank = p->rank3 ? 3 : 4;
    if (strcmp(ctx->node->domain, MCP_DOMAIN_INTERNAL) == 0 && p->q->rank == 3) { /* one head */
        yrank = 3;
        ydims[0] = p->batch, ydims[1] = p->sq, ydims[2] = p->dv;
    } else if (p->rank3) {
        ydims[0] = p->batch, ydims[1] = p->sq, ydims[2] = p->hq * p->dv;
    } else {
        ydims[0] = p->batch, ydims[1] = p->hq, ydims[2] = p->sq, ydims[3] = p->dv;
    }
    *y = mcp_kout_uninit(ctx, 0, p->q->dtype, yrank, ydims);
    if (!*y) return MCP_STATUS_OUT_OF_MEMORY;
    *qk = NULL;
    if (p->want_qk) {
        int64_t qdims[4] = {p->batch, p->hq, p->sq, p->total};
        *qk = mcp_kout_uninit(ctx, 3, p->q->dtype, 4, qdims);
        if (!*qk) return MCP_STATUS_OUT_OF_MEMORY;
    }
    return MCP_STATUS_OK;
}

static mcp_status run_attention(mcp_kernel_ctx *ctx)
{
    mcp_attention_plan p;
    mcp_status st = mcp_attention_plan_init(ctx, &p);
    mcp_tensor *y, *qk;
    if (st == MCP_STATUS_OK) st = mcp_attention_outputs(ctx, &p, &y, &qk);
    if (st == MCP_STATUS_OK) st = mcp_attention_write_present(ctx, &p);
    if (st != MCP_STATUS_OK) return st;
    const int64_t rows = p.batch * p.hq * p.sq;
    if (rows == 0 || mcp_attention_nothing_to_do(y, qk)) return MCP_STATUS_OK;
    int nt = mcp_kthreads(ctx, rows * p.total * (p.d + p.dv));
    bool failed = false;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        double *buf = mcp_malloc((size_t)(p.total + p.dv + 1) * sizeof *buf);
#pragma omp for schedule(dynamic, 1)
        for (int64_t r = 0; r < rows; r++) {
            if (!buf) continue;
            int64_t i = r % p.sq, h = r / p.sq % p.hq, b = r / p.sq / p.hq;
            attention_row(&p, b, h, i, buf, buf + p.total, y, qk);
        }
        if (!buf) {
#pragma omp atomic write
            failed = true;
        }
        mcp_free(buf);
    }
    return failed ? mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory") : MCP_STATUS_OK;
}

/* ---- RotaryEmbedding ---- */

static mcp_status run_rotary(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0), *cs = mcp_kin(ctx, 1), *sn = mcp_kin(ctx, 2), *pos = mcp_kin(ctx, 3);
    if (!x || !cs || !sn)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X', 'cos_cache' and 'sin_cache' are required");
    if (!float_type(x->dtype) || cs->dtype != x->dtype || sn->dtype != x->dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "inputs 'X', 'cos_cache' and 'sin_cache' must share one float type");
    bool interleaved = mcp_kattr_int(ctx, "interleaved", 0) != 0;
    int64_t heads = mcp_kattr_int(ctx, "num_heads", 0), rot = mcp_kattr_int(ctx, "rotary_embedding_dim", 0);
    int64_t batch, seq, nh, d;
    int64_t xs[3]; /* strides over (batch, seq, head) */
    if (x->rank == 4) {
        batch = x->dims[0], nh = x->dims[1], seq = x->dims[2], d = x->dims[3];
        if (heads && heads != nh)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'num_heads' %lld disagrees with 'X' (%lld heads)",
                             (long long)heads, (long long)nh);
        xs[0] = nh * seq * d, xs[1] = d, xs[2] = seq * d;
    } else if (x->rank == 3) {
        if (heads <= 0 || x->dims[2] % heads)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "a 3-D 'X' needs attribute 'num_heads' dividing its hidden size %lld", (long long)x->dims[2]);
        batch = x->dims[0], seq = x->dims[1], nh = heads, d = x->dims[2] / heads;
        xs[0] = seq * nh * d, xs[1] = nh * d, xs[2] = d;
    } else {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' has rank %d; 3 or 4 expected", x->rank);
    }
    if (rot == 0) rot = d;
    if (rot < 0 || rot > d || rot % 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'rotary_embedding_dim' %lld must be even and at most the head size %lld",
                         (long long)rot, (long long)d);
    const int64_t half = rot / 2;
    int64_t max_pos = 0;
    if (pos) {
        if ((pos->dtype != MCP_DTYPE_INT64) || pos->rank != 2 || pos->dims[0] != batch || pos->dims[1] != seq)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'position_ids' must be int64 of shape (%lld, %lld)",
                             (long long)batch, (long long)seq);
        if (cs->rank != 2 || sn->rank != 2 || cs->dims[1] != half || sn->dims[0] != cs->dims[0] || sn->dims[1] != half)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "with 'position_ids', 'cos_cache' and 'sin_cache' must be (max_position, %lld)",
                             (long long)half);
        max_pos = cs->dims[0];
        const int64_t *pv = pos->data;
        for (int64_t i = 0; i < batch * seq; i++)
            if (pv[i] < 0 || pv[i] >= max_pos)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'position_ids'[%lld] is %lld; 0 to %lld expected", (long long)i,
                                 (long long)pv[i], (long long)(max_pos - 1));
    } else if (cs->rank != 3 || sn->rank != 3 || cs->dims[0] != batch || cs->dims[1] != seq || cs->dims[2] != half ||
               memcmp(sn->dims, cs->dims, sizeof cs->dims[0] * 3) != 0) {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "without 'position_ids', 'cos_cache' and 'sin_cache' must be (%lld, %lld, %lld)",
                         (long long)batch, (long long)seq, (long long)half);
    }
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (mcp_tensor_numel(x) == 0) return MCP_STATUS_OK; /* the other dims may be huge */
    const int64_t rows = batch * seq * nh;
    int nt = mcp_kthreads(ctx, rows * d * 4);
    const int64_t *pv = pos ? pos->data : NULL;
    const bool f32 = x->dtype == MCP_DTYPE_FLOAT;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = r % nh, s = r / nh % seq, b = r / nh / seq;
        int64_t base = b * xs[0] + s * xs[1] + h * xs[2];
        int64_t crow = (pv ? pv[b * seq + s] : b * seq + s) * half;
        for (int64_t j = 0; j < half; j++) {
            int64_t i1 = interleaved ? 2 * j : j, i2 = interleaved ? 2 * j + 1 : j + half;
            if (f32) {
                const float *xf = (const float *)x->data + base;
                float c = ((const float *)cs->data)[crow + j], sv = ((const float *)sn->data)[crow + j];
                float *yf = (float *)y->data + base;
                float a = xf[i1], bb = xf[i2];
                yf[i1] = c * a - sv * bb;
                yf[i2] = sv * a + c * bb;
            } else {
                double c = mcp__red_ld_f64(cs->dtype, cs->data, crow + j);
                double sv = mcp__red_ld_f64(sn->dtype, sn->data, crow + j);
                double a = mcp__red_ld_f64(x->dtype, x->data, base + i1);
                double bb = mcp__red_ld_f64(x->dtype, x->data, base + i2);
                mcp__red_st_f64(y->dtype, y->data, base + i1, c * a - sv * bb);
                mcp__red_st_f64(y->dtype, y->data, base + i2, sv * a + c * bb);
            }
        }
        size_t es = mcp_dtype_size(x->dtype);
        memcpy((char *)y->data + (size_t)(base + rot) * es, (const char *)x->data + (size_t)(base + rot) * es,
               (size_t)(d - rot) * es);
    }
    return MCP_STATUS_OK;
}

/* ---- RMSNormalization ---- */

static mcp_status run_rmsnorm(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0), *scale = mcp_kin(ctx, 1);
    if (!x || !scale) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'scale' are required");
    if (!float_type(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' has type %s; a float type expected",
                         mcp_dtype_name(x->dtype));
    int64_t a = mcp_kattr_int(ctx, "axis", -1);
    int axis;
    if (x->rank == 0 || !mcp_axis_normalize(a, x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axis' %lld is out of range for rank %d",
                         (long long)a, x->rank);
    if (!float_type(scale->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'scale' has type %s; a float type expected",
                         mcp_dtype_name(scale->dtype));
    double eps = mcp_kattr_float(ctx, "epsilon", 1e-5f);
    int64_t sstr[MCP_MAX_RANK];
    mcp_status st = mcp__red_norm_strides(ctx, x, axis, scale, "scale", NULL, sstr, NULL);
    if (st != MCP_STATUS_OK) return st;
    int64_t outer = mcp__red_span(x->dims, 0, axis), inner = mcp__red_span(x->dims, axis, x->rank);
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    if (outer == 0 || inner == 0) return MCP_STATUS_OK;
    double *heap;
    const double *sv = mcp__red_norm_expand(ctx, scale, NULL, sstr, NULL, x->rank - axis, x->dims + axis, inner, &heap);
    if (!sv) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    int nt = mcp_kthreads(ctx, outer * inner * 3);
    const int chunk = mcp_kchunk(inner * 3);
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (int64_t o = 0; o < outer; o++) {
        if (x->dtype == MCP_DTYPE_FLOAT) {
            const float *xr = (const float *)x->data + o * inner;
            float *yr = (float *)y->data + o * inner;
            double q0 = 0.0, q1 = 0.0, q2 = 0.0, q3 = 0.0;
            int64_t j = 0;
            for (; j + 4 <= inner; j += 4) {
                q0 += (double)xr[j] * xr[j];
                q1 += (double)xr[j + 1] * xr[j + 1];
                q2 += (double)xr[j + 2] * xr[j + 2];
                q3 += (double)xr[j + 3] * xr[j + 3];
            }
            for (; j < inner; j++) q0 += (double)xr[j] * xr[j];
            double inv = 1.0 / sqrt(((q0 + q1) + (q2 + q3)) / (double)inner + eps);
            for (j = 0; j < inner; j++) yr[j] = (float)(xr[j] * inv * sv[j]);
        } else {
            double q = 0.0;
            for (int64_t j = 0; j < inner; j++) {
                double v = mcp__red_ld_f64(x->dtype, x->data, o * inner + j);
                q += v * v;
            }
            double inv = 1.0 / sqrt(q / (double)inner + eps);
            for (int64_t j = 0; j < inner; j++)
                mcp__red_st_f64(y->dtype, y->data, o * inner + j,
                                mcp__red_ld_f64(x->dtype, x->data, o * inner + j) * inv * sv[j]);
        }
    }
    mcp_free(heap);
    return MCP_STATUS_OK;
}

/* ---- GroupNormalization ---- */

/* Opset 18 gives scale and bias per group; opset 21 per channel. */
static mcp_status run_groupnorm(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0), *scale = mcp_kin(ctx, 1), *bias = mcp_kin(ctx, 2);
    if (!x || !scale || !bias)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X', 'scale' and 'bias' are required");
    if (!float_type(x->dtype) || !float_type(scale->dtype) || !float_type(bias->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs must be float tensors; 'X' is %s",
                         mcp_dtype_name(x->dtype));
    if (x->rank < 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' has rank %d; (N, C, ...) expected", x->rank);
    int64_t groups = mcp_kattr_int(ctx, "num_groups", 0);
    const int64_t n = x->dims[0], c = x->dims[1], spatial = mcp__red_span(x->dims, 2, x->rank);
    if (groups <= 0 || c % groups)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'num_groups' %lld must be positive and divide the %lld channels", (long long)groups,
                         (long long)c);
    const bool per_channel = ctx->opset >= 21;
    const int64_t want = per_channel ? c : groups;
    if (scale->rank != 1 || scale->dims[0] != want || bias->rank != 1 || bias->dims[0] != want)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'scale' and 'bias' must have shape (%lld) (%s)",
                         (long long)want, per_channel ? "one per channel" : "one per group");
    double eps = mcp_kattr_float(ctx, "epsilon", 1e-5f);
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    const int64_t cg = c / groups, len = cg * spatial, units = n * groups;
    if (units == 0 || len == 0) return MCP_STATUS_OK;
    int nt = mcp_kthreads(ctx, units * len * 4);
    const int chunk = mcp_kchunk(len * 4);
#pragma omp parallel for num_threads(nt) schedule(dynamic, chunk) if (nt > 1)
    for (int64_t u = 0; u < units; u++) {
        const int64_t base = u * len, g = u % groups;
        double mean, var = 0.0;
        if (x->dtype == MCP_DTYPE_FLOAT) {
            const float *xr = (const float *)x->data + base;
            mean = mcp__red_sum_f32(xr, len) / (double)len;
            for (int64_t j = 0; j < len; j++) var += (xr[j] - mean) * (xr[j] - mean);
        } else {
            double s = 0.0;
            for (int64_t j = 0; j < len; j++) s += mcp__red_ld_f64(x->dtype, x->data, base + j);
            mean = s / (double)len;
            for (int64_t j = 0; j < len; j++) {
                double dv = mcp__red_ld_f64(x->dtype, x->data, base + j) - mean;
                var += dv * dv;
            }
        }
        double inv = 1.0 / sqrt(var / (double)len + eps);
        for (int64_t ch = 0; ch < cg; ch++) {
            int64_t pi = per_channel ? g * cg + ch : g;
            double sc = mcp__red_ld_f64(scale->dtype, scale->data, pi) * inv;
            double sh = mcp__red_ld_f64(bias->dtype, bias->data, pi) - mean * sc;
            int64_t o = base + ch * spatial;
            if (x->dtype == MCP_DTYPE_FLOAT) {
                const float *xr = (const float *)x->data + o;
                float *yr = (float *)y->data + o;
                for (int64_t j = 0; j < spatial; j++) yr[j] = (float)(xr[j] * sc + sh);
            } else {
                for (int64_t j = 0; j < spatial; j++)
                    mcp__red_st_f64(y->dtype, y->data, o + j, mcp__red_ld_f64(x->dtype, x->data, o + j) * sc + sh);
            }
        }
    }
    return MCP_STATUS_OK;
}

const mcp_kernel_def mcp__ref_transformer_kernels[] = {
    MCP_KERNEL_ENTRY("", "Attention", 23, 0, run_attention, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY(MCP_DOMAIN_INTERNAL, "Attention", 1, 0, run_attention, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "RotaryEmbedding", 23, 0, run_rotary, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "RMSNormalization", 23, 0, run_rmsnorm, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "GroupNormalization", 18, 0, run_groupnorm, NULL, NULL, NULL),
};
const int mcp__ref_transformer_kernel_count = sizeof mcp__ref_transformer_kernels / sizeof mcp__ref_transformer_kernels[0];
