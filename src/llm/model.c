/* Loading a decoder from GGUF: the architecture's hyperparameters from the
 * metadata, then every tensor it needs, checked by name, shape and type
 * before anything runs. Weights stay in the file's mapping. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "llm/llm_internal.h"
#include "llm/tokenizer.h"
#include "tensor/tensor.h"

mcp_llm_model_options mcp_llm_model_options_default(void)
{
    mcp_llm_model_options o = {0, 0};
    return o;
}

typedef struct loader {
    mcp_llm_model *m;
    mcp_err *err;
    char key[160];
} loader;

/* "{arch}.suffix" */
static const char *akey(loader *L, const char *suffix)
{
    snprintf(L->key, sizeof L->key, "%s.%s", L->m->arch_name, suffix);
    return L->key;
}

static mcp_status need_u(loader *L, const char *suffix, int64_t *out, int64_t lo, int64_t hi)
{
    uint64_t v = 0;
    bool found = false;
    const char *key = akey(L, suffix);
    mcp_status st = mcp_gguf_get_u64(L->m->gguf, key, &v, &found, L->err);
    if (st != MCP_STATUS_OK) return st;
    if (!found) return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "GGUF: key '%s' is missing", key);
    if ((int64_t)v < lo || v > (uint64_t)hi)
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "GGUF: key '%s' is %llu (allowed %lld to %lld)", key,
                           (unsigned long long)v, (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return MCP_STATUS_OK;
}

static mcp_status opt_u(loader *L, const char *suffix, int64_t *out, int64_t dflt, int64_t lo, int64_t hi)
{
    uint64_t v = 0;
    bool found = false;
    const char *key = akey(L, suffix);
    mcp_status st = mcp_gguf_get_u64(L->m->gguf, key, &v, &found, L->err);
    if (st != MCP_STATUS_OK) return st;
    if (!found) {
        *out = dflt;
        return MCP_STATUS_OK;
    }
    if ((int64_t)v < lo || v > (uint64_t)hi)
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "GGUF: key '%s' is %llu (allowed %lld to %lld)", key,
                           (unsigned long long)v, (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return MCP_STATUS_OK;
}

static mcp_status opt_f(loader *L, const char *suffix, float *out, float dflt, float lo, float hi)
{
    bool found = false;
    const char *key = akey(L, suffix);
    float v = dflt;
    mcp_status st = mcp_gguf_get_f32(L->m->gguf, key, &v, &found, L->err);
    if (st != MCP_STATUS_OK) return st;
    if (!found) v = dflt;
    if (!(v >= lo && v <= hi))
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "GGUF: key '%s' is %g (allowed %g to %g)", key, (double)v,
                           (double)lo, (double)hi);
    *out = v;
    return MCP_STATUS_OK;
}

static const char *type_list = "F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K";

/* A weight of `rows` rows of `k`: present (unless optional), 2-D of that
 * shape, of a type the kernels multiply. */
static mcp_status get_weight(loader *L, const char *name, int64_t k, int64_t rows, bool optional, llm_weight *w)
{
    memset(w, 0, sizeof *w);
    const mcp_gguf_tensor *t = mcp_gguf_tensor_find(L->m->gguf, name);
    if (!t) {
        if (optional) return MCP_STATUS_OK;
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "tensor '%s' is missing (the %s architecture needs it)", name,
                           L->m->arch_name);
    }
    if (t->ne[0] != k || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL,
                           "tensor '%s' is [%lld, %lld, %lld, %lld]; the hyperparameters say [%lld, %lld]", name,
                           (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                           (long long)k, (long long)rows);
    if (!mcp_llm_gemm_supported(t->type, MCP_LLM_ACT_F32))
        return mcp_err_set(L->err, MCP_STATUS_UNSUPPORTED, "tensor '%s' has type %s, which this runtime does not run (%s)",
                           name, mcp_ggml_type_name(t->type), type_list);
    uint32_t be = 1, bb = 0;
    mcp_ggml_type_block(t->type, &be, &bb);
    w->name = name;
    w->type = t->type;
    w->k = k;
    w->rows = rows;
    w->row_bytes = (size_t)(k / be) * bb;
    w->data = t->data;
    w->act = L->m->precise ? MCP_LLM_ACT_F32 : mcp_llm_act_for(t->type);
    return MCP_STATUS_OK;
}

/* A vector of n floats (norm weights, biases); other float types are
 * converted into a copy. */
static mcp_status get_vec(loader *L, const char *name, int64_t n, bool optional, llm_vec *v)
{
    memset(v, 0, sizeof *v);
    const mcp_gguf_tensor *t = mcp_gguf_tensor_find(L->m->gguf, name);
    if (!t) {
        if (optional) return MCP_STATUS_OK;
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "tensor '%s' is missing (the %s architecture needs it)", name,
                           L->m->arch_name);
    }
    if ((int64_t)t->n_elems != n || t->ne[0] != n)
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "tensor '%s' has %llu elements; the hyperparameters say %lld",
                           name, (unsigned long long)t->n_elems, (long long)n);
    v->n = n;
    if (t->type == MCP_GGML_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
        v->data = (const float *)t->data;
        return MCP_STATUS_OK;
    }
    if (t->type != MCP_GGML_F32 && t->type != MCP_GGML_F16 && t->type != MCP_GGML_BF16)
        return mcp_err_set(L->err, MCP_STATUS_UNSUPPORTED, "tensor '%s' has type %s; a vector must be F32, F16 or BF16", name,
                           mcp_ggml_type_name(t->type));
    v->owned = mcp_malloc((size_t)n * sizeof(float));
    if (!v->owned) return mcp_err_set(L->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_llm_dequantize_row(t->type, t->data, n, v->owned);
    v->data = v->owned;
    return MCP_STATUS_OK;
}

static void vec_free(llm_vec *v)
{
    mcp_free(v->owned);
    v->owned = NULL;
}

/* Each layer's tensor names, NUL-terminated, in the model's name pool. */
#define NAME_SLOTS 20
#define NAME_LEN 64

static mcp_status load_layer(loader *L, int64_t i, llm_layer *l)
{
    mcp_llm_model *m = L->m;
    const int64_t e = m->n_embd, qd = m->n_head * m->head_dim, kvd = m->n_head_kv * m->head_dim;
    char *p = m->name_pool + (size_t)i * NAME_SLOTS * NAME_LEN;
    int slot = 0;
#define NAME(suffix) (snprintf(p + NAME_LEN * slot, NAME_LEN, "blk.%lld." suffix, (long long)i), p + NAME_LEN * (slot++))
    mcp_status st = MCP_STATUS_OK;
    const bool gpt2 = m->arch == LLM_ARCH_GPT2;
    if (st == MCP_STATUS_OK) st = get_vec(L, NAME("attn_norm.weight"), e, false, &l->attn_norm);
    if (st == MCP_STATUS_OK) st = get_vec(L, NAME("attn_norm.bias"), e, !gpt2, &l->attn_norm_b);
    if (gpt2) {
        if (st == MCP_STATUS_OK) st = get_weight(L, NAME("attn_qkv.weight"), e, qd + 2 * kvd, false, &l->wqkv);
        if (st == MCP_STATUS_OK) st = get_vec(L, NAME("attn_qkv.bias"), qd + 2 * kvd, true, &l->bqkv);
    } else {
        const bool bias_optional = m->arch != LLM_ARCH_QWEN2;
        if (st == MCP_STATUS_OK) st = get_weight(L, NAME("attn_q.weight"), e, qd, false, &l->wq);
        if (st == MCP_STATUS_OK) st = get_weight(L, NAME("attn_k.weight"), e, kvd, false, &l->wk);
        if (st == MCP_STATUS_OK) st = get_weight(L, NAME("attn_v.weight"), e, kvd, false, &l->wv);
        if (st == MCP_STATUS_OK) st = get_vec(L, NAME("attn_q.bias"), qd, bias_optional, &l->bq);
        if (st == MCP_STATUS_OK) st = get_vec(L, NAME("attn_k.bias"), kvd, bias_optional, &l->bk);
        if (st == MCP_STATUS_OK) st = get_vec(L, NAME("attn_v.bias"), kvd, bias_optional, &l->bv);
    }
    if (st == MCP_STATUS_OK) st = get_weight(L, NAME("attn_output.weight"), qd, e, false, &l->wo);
    if (st == MCP_STATUS_OK) st = get_vec(L, NAME("attn_output.bias"), e, true, &l->bo);
    if (st == MCP_STATUS_OK) st = get_vec(L, NAME("ffn_norm.weight"), e, false, &l->ffn_norm);
    if (st == MCP_STATUS_OK) st = get_vec(L, NAME("ffn_norm.bias"), e, !gpt2, &l->ffn_norm_b);
    if (!gpt2 && st == MCP_STATUS_OK) st = get_weight(L, NAME("ffn_gate.weight"), e, m->n_ff, false, &l->ffn_gate);
    if (st == MCP_STATUS_OK) st = get_weight(L, NAME("ffn_up.weight"), e, m->n_ff, false, &l->ffn_up);
    if (st == MCP_STATUS_OK) st = get_vec(L, NAME("ffn_up.bias"), m->n_ff, true, &l->ffn_up_b);
    if (st == MCP_STATUS_OK) st = get_weight(L, NAME("ffn_down.weight"), m->n_ff, e, false, &l->ffn_down);
    if (st == MCP_STATUS_OK) st = get_vec(L, NAME("ffn_down.bias"), e, true, &l->ffn_down_b);
#undef NAME
    return st;
}

static mcp_status load_arch(loader *L)
{
    mcp_llm_model *m = L->m;
    mcp_gguf_str arch = {0};
    bool found = false;
    mcp_status st = mcp_gguf_get_str(m->gguf, "general.architecture", &arch, &found, L->err);
    if (st != MCP_STATUS_OK) return st;
    if (!found) return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "GGUF: key 'general.architecture' is missing");
    static const struct {
        const char *name;
        llm_arch arch;
    } known[] = {{"llama", LLM_ARCH_LLAMA}, {"mistral", LLM_ARCH_LLAMA}, {"qwen2", LLM_ARCH_QWEN2}, {"gpt2", LLM_ARCH_GPT2}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (mcp_gguf_str_eq(arch, known[i].name)) {
            m->arch = known[i].arch;
            snprintf(m->arch_name, sizeof m->arch_name, "%s", known[i].name);
            return MCP_STATUS_OK;
        }
    return mcp_err_set(L->err, MCP_STATUS_UNSUPPORTED,
                       "architecture '%.*s' is not supported (llama, mistral, qwen2 and gpt2 are)",
                       (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
}

static mcp_status load_hparams(loader *L)
{
    mcp_llm_model *m = L->m;
    mcp_status st = need_u(L, "embedding_length", &m->n_embd, 1, 1 << 16);
    if (st == MCP_STATUS_OK) st = need_u(L, "block_count", &m->n_layer, 1, 1024);
    if (st == MCP_STATUS_OK) st = need_u(L, "attention.head_count", &m->n_head, 1, 1024);
    if (st == MCP_STATUS_OK) st = opt_u(L, "attention.head_count_kv", &m->n_head_kv, m->n_head, 1, m->n_head);
    if (st == MCP_STATUS_OK) st = need_u(L, "feed_forward_length", &m->n_ff, 1, 1 << 20);
    if (st == MCP_STATUS_OK) st = opt_u(L, "context_length", &m->n_ctx_train, 2048, 1, 1 << 24);
    if (st != MCP_STATUS_OK) return st;
    if (m->n_head % m->n_head_kv != 0)
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "GGUF: %lld attention heads do not share %lld KV heads evenly",
                           (long long)m->n_head, (long long)m->n_head_kv);
    if (m->n_embd % m->n_head != 0)
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "GGUF: embedding length %lld is not a multiple of %lld heads",
                           (long long)m->n_embd, (long long)m->n_head);
    int64_t vdim = 0;
    st = opt_u(L, "attention.key_length", &m->head_dim, m->n_embd / m->n_head, 1, 1024);
    if (st == MCP_STATUS_OK) st = opt_u(L, "attention.value_length", &vdim, m->head_dim, 1, 1024);
    if (st != MCP_STATUS_OK) return st;
    if (vdim != m->head_dim)
        return mcp_err_set(L->err, MCP_STATUS_UNSUPPORTED, "GGUF: key length %lld differs from value length %lld",
                           (long long)m->head_dim, (long long)vdim);
    if (m->arch == LLM_ARCH_GPT2) {
        st = opt_f(L, "attention.layer_norm_epsilon", &m->norm_eps, 1e-5f, 0.0f, 1.0f);
        m->n_rot = 0;
        return st;
    }
    st = opt_f(L, "attention.layer_norm_rms_epsilon", &m->norm_eps, 1e-6f, 0.0f, 1.0f);
    if (st == MCP_STATUS_OK) st = opt_u(L, "rope.dimension_count", &m->n_rot, m->head_dim, 2, m->head_dim);
    if (st == MCP_STATUS_OK) st = opt_f(L, "rope.freq_base", &m->rope_base, 10000.0f, 1.0f, 1e12f);
    if (st != MCP_STATUS_OK) return st;
    if (m->n_rot % 2 != 0)
        return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "GGUF: rope.dimension_count %lld is odd", (long long)m->n_rot);
    /* Scaling: none, or linear (positions divided by the factor). */
    m->rope_freq_scale = 1.0f;
    mcp_gguf_str type = {0};
    bool found = false;
    st = mcp_gguf_get_str(m->gguf, akey(L, "rope.scaling.type"), &type, &found, L->err);
    if (st != MCP_STATUS_OK) return st;
    if (found && !mcp_gguf_str_eq(type, "none")) {
        if (!mcp_gguf_str_eq(type, "linear"))
            return mcp_err_set(L->err, MCP_STATUS_UNSUPPORTED, "GGUF: rope scaling '%.*s' is not supported (none and linear are)",
                               (int)(type.len > 32 ? 32 : type.len), type.ptr);
        float factor = 1.0f;
        st = opt_f(L, "rope.scaling.factor", &factor, 1.0f, 1e-3f, 1e3f);
        if (st != MCP_STATUS_OK) return st;
        m->rope_freq_scale = 1.0f / factor;
    }
    /* Llama and Mistral rotate adjacent pairs (the converter permuted their
     * Q and K rows for it); Qwen2 rotates halves, as NeoX does. */
    m->rope_neox = m->arch == LLM_ARCH_QWEN2;
    const int64_t half = m->n_rot / 2;
    m->inv_freq = mcp_malloc((size_t)half * sizeof(float));
    if (!m->inv_freq) return mcp_err_set(L->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    llm_vec factors;
    st = get_vec(L, "rope_freqs.weight", half, true, &factors);
    if (st != MCP_STATUS_OK) return st;
    for (int64_t i = 0; i < half; i++) {
        double f = m->rope_freq_scale * pow((double)m->rope_base, -2.0 * (double)i / (double)m->n_rot);
        if (factors.data) f /= (double)factors.data[i];
        m->inv_freq[i] = (float)f;
    }
    vec_free(&factors);
    return MCP_STATUS_OK;
}

static mcp_status load_tensors(loader *L)
{
    mcp_llm_model *m = L->m;
    const mcp_gguf_tensor *emb = mcp_gguf_tensor_find(m->gguf, "token_embd.weight");
    if (!emb) return mcp_err_set(L->err, MCP_STATUS_INVALID_MODEL, "tensor 'token_embd.weight' is missing");
    m->n_vocab = emb->ne[1];
    mcp_status st = get_weight(L, "token_embd.weight", m->n_embd, m->n_vocab, false, &m->tok_embd);
    if (st == MCP_STATUS_OK && m->arch == LLM_ARCH_GPT2)
        st = get_weight(L, "position_embd.weight", m->n_embd, m->n_ctx_train, false, &m->pos_embd);
    if (st == MCP_STATUS_OK) st = get_vec(L, "output_norm.weight", m->n_embd, false, &m->output_norm);
    if (st == MCP_STATUS_OK) st = get_vec(L, "output_norm.bias", m->n_embd, m->arch != LLM_ARCH_GPT2, &m->output_norm_b);
    /* No output matrix: the embeddings are tied to it. */
    if (st == MCP_STATUS_OK) st = get_weight(L, "output.weight", m->n_embd, m->n_vocab, true, &m->output);
    if (st == MCP_STATUS_OK && !m->output.data) m->output = m->tok_embd;
    if (st != MCP_STATUS_OK) return st;
    m->name_pool = mcp_calloc((size_t)m->n_layer * NAME_SLOTS, NAME_LEN);
    m->layers = mcp_calloc((size_t)m->n_layer, sizeof *m->layers);
    if (!m->name_pool || !m->layers) return mcp_err_set(L->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < m->n_layer; i++) {
        st = load_layer(L, i, &m->layers[i]);
        if (st != MCP_STATUS_OK) return st;
    }
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        m->n_params += (int64_t)m->gguf->tensors[i].n_elems;
        m->weight_bytes += m->gguf->tensors[i].nbytes;
    }
    /* A step reads one row of the embeddings (and of learned positions). */
    m->decode_bytes = m->weight_bytes;
    if (m->output.data != m->tok_embd.data) m->decode_bytes -= m->tok_embd.row_bytes * (uint64_t)m->tok_embd.rows;
    if (m->pos_embd.data) m->decode_bytes -= m->pos_embd.row_bytes * (uint64_t)m->pos_embd.rows;
    return MCP_STATUS_OK;
}

mcp_status mcp_llm_model_load(const char *path, const mcp_llm_model_options *opts, mcp_llm_model **out, char *errbuf,
                              size_t err_len)
{
    mcp_err err_s = {errbuf, err_len}, *err = &err_s;
    *out = NULL;
    mcp_llm_model_options o = opts ? *opts : mcp_llm_model_options_default();
    mcp_llm_model *m = mcp_calloc(1, sizeof *m);
    if (!m) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    m->precise = o.precise != 0;
    m->threads = o.threads > 0 ? o.threads : omp_get_num_procs();
    loader L = {m, err, {0}};
    mcp_status st = mcp_gguf_open(path, &m->gguf, err);
    if (st == MCP_STATUS_OK) st = load_arch(&L);
    if (st == MCP_STATUS_OK) st = load_hparams(&L);
    if (st == MCP_STATUS_OK) st = load_tensors(&L);
    if (st == MCP_STATUS_OK) st = mcp_tokenizer_from_gguf(m->gguf, &m->tok, err);
    if (st == MCP_STATUS_OK && mcp_tokenizer_n_vocab(m->tok) < m->n_vocab)
        st = mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "the tokenizer has %lld tokens; token_embd.weight has %lld rows",
                         (long long)mcp_tokenizer_n_vocab(m->tok), (long long)m->n_vocab);
    if (st == MCP_STATUS_OK) {
        mcp_gguf_str name = {0};
        bool found = false;
        if (mcp_gguf_get_str(m->gguf, "general.name", &name, &found, err) == MCP_STATUS_OK && found)
            snprintf(m->name, sizeof m->name, "%.*s", (int)(name.len > 127 ? 127 : name.len), name.ptr);
        if (!strcmp(mcp_tokenizer_model_name(m->tok), "gpt2"))
            snprintf(m->tokenizer_desc, sizeof m->tokenizer_desc, "gpt2 (byte-level BPE, pre %s)",
                     mcp_tokenizer_pre_name(m->tok));
        else
            snprintf(m->tokenizer_desc, sizeof m->tokenizer_desc, "%s (SentencePiece)", mcp_tokenizer_model_name(m->tok));
        /* The weights are read soon and in full: ask for them now. */
        if (m->gguf->map) madvise(m->gguf->map, m->gguf->map_len, MADV_WILLNEED);
    }
    if (st != MCP_STATUS_OK) {
        if (path && !strstr(errbuf, path)) mcp_err_prefix(err, "%s", path);
        mcp_llm_model_free(m);
        return st;
    }
    *out = m;
    return MCP_STATUS_OK;
}

const char *mcp_llm_model_meta_str(const mcp_llm_model *m, const char *key, size_t *len)
{
    *len = 0;
    mcp_gguf_str v;
    bool found = false;
    char msg[128];
    mcp_err err = {msg, sizeof msg};
    if (!m || !key || mcp_gguf_get_str(m->gguf, key, &v, &found, &err) != MCP_STATUS_OK || !found) return NULL;
    *len = (size_t)v.len;
    return v.ptr;
}

int64_t mcp_llm_model_meta_count(const mcp_llm_model *m) { return m && m->gguf ? (int64_t)m->gguf->n_kv : 0; }

const char *mcp_llm_model_meta_key(const mcp_llm_model *m, int64_t i, size_t *len)
{
    if (!m || !m->gguf || i < 0 || (uint64_t)i >= m->gguf->n_kv) return NULL;
    *len = (size_t)m->gguf->kv[i].key.len;
    return m->gguf->kv[i].key.ptr;
}

void mcp_llm_model_info(const mcp_llm_model *m, mcp_llm_info *o)
{
    memset(o, 0, sizeof *o);
    o->arch = m->arch_name;
    o->name = m->name;
    o->n_vocab = m->n_vocab;
    o->n_ctx_train = m->n_ctx_train;
    o->n_embd = m->n_embd;
    o->n_layer = m->n_layer;
    o->n_head = m->n_head;
    o->n_head_kv = m->n_head_kv;
    o->head_dim = m->head_dim;
    o->n_ff = m->n_ff;
    o->n_rot = m->n_rot;
    o->rope_base = m->rope_base;
    o->rope_freq_scale = m->rope_freq_scale;
    o->rope_neox = m->rope_neox;
    o->norm_eps = m->norm_eps;
    o->n_params = m->n_params;
    o->weight_bytes = m->weight_bytes;
    o->decode_bytes = m->decode_bytes;
    o->tokenizer = m->tokenizer_desc;
    o->bos = mcp_tokenizer_bos(m->tok);
    o->eos = mcp_tokenizer_eos(m->tok);
    o->threads = m->threads;
    o->isa = mcp_llm_isa_name(mcp_llm_isa_current());
}

void mcp_llm_model_free(mcp_llm_model *m)
{
    if (!m) return;
    if (m->layers) {
        for (int64_t i = 0; i < m->n_layer; i++) {
            llm_layer *l = &m->layers[i];
            llm_vec *vs[] = {&l->attn_norm, &l->attn_norm_b, &l->bq,       &l->bk,         &l->bv,       &l->bqkv,
                             &l->bo,        &l->ffn_norm,    &l->ffn_norm_b, &l->ffn_up_b, &l->ffn_down_b};
            for (size_t j = 0; j < sizeof vs / sizeof vs[0]; j++) vec_free(vs[j]);
        }
    }
    mcp_free(m->layers);
    mcp_free(m->name_pool);
    vec_free(&m->output_norm);
    vec_free(&m->output_norm_b);
    mcp_free(m->inv_freq);
    mcp_tokenizer_free(m->tok);
    mcp_gguf_close(m->gguf);
    mcp_free(m);
}
