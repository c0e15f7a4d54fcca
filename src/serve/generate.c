/*
 * The generation engine (see generate.h): a queue, sequence slots, and the
 * step loop that batches every running sequence into one decode call.
 *
 * Tenants share it by weight, in generated tokens:
 *  - Admission: the queue is ordered by priority, then by a weighted-fair-
 *    queuing tag (serve/qos.h) given at submit with the request's
 *    max_tokens as its cost (bounded by the context length), then arrival.
 *    max_tokens, not one sequence slot, because a slot held for 2000
 *    tokens is worth more than one held for 20; a request that stops
 *    early is charged for what it might have generated (tags are final at
 *    submit), which errs against tenants that ask for far more than they
 *    use. With one tenant the order is priority then arrival, as before.
 *  - Decoding: every decoding sequence gets its token in a step whenever
 *    the step's token budget and the free KV blocks allow all of them (the
 *    usual case); when they do not, the tokens go first to the tenants
 *    with the fewest tokens decoded per unit of weight (ties: oldest
 *    first), not simply to the oldest sequences.
 *  - Accounting: after each step the optional token hook hears, once per
 *    tenant, how many tokens that tenant's sequences produced in the step.
 */
#include "serve/generate.h"

#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "serve/qos.h"
#include "serve/sandbox.h"
#include "serve/serve.h"

#define MAX_SLOTS 256 /* generation.max_sequences at most */

/* One running sequence: its slot index is its sequence id in the context. */
typedef struct slot {
    mcp_gen_request *r; /* NULL: free */
    int64_t age;        /* admission order: the youngest give way first */
    bool started;       /* prompt tokenized, sampler made */
    int32_t *tokens;    /* prompt, then generated tokens */
    int64_t n_tokens, n_prompt, n_cached, n_gen, max_gen;
    mcp_llm_sampler *sampler;
    mcp_llm_detok *detok;
    uint64_t *hashes;   /* prefix hash of each full block of tokens (n_ctx / block_tokens) */
    int64_t n_hashed, n_published;
    bool look_up;       /* the prefix cache is to be asked (admitted, or given back its blocks) */
    mcp_buf text;       /* generated text; [0, emitted) is sent */
    size_t emitted;
    int logit_row;      /* this step's logits row, or -1 */
    int64_t last_token_ns; /* 0 until the first token */
    int tenant;         /* its entry in the engine's tenants */
} slot;

/* A waiting request and its fair-queuing tag. */
typedef struct gen_qnode {
    struct gen_qnode *next;
    mcp_gen_request *r;
    double tag;
} gen_qnode;

/*
 * A tenant with running sequences (step thread only): n_slots entries
 * cover every running sequence. `decoded` counts its tokens divided by its
 * weight; an entry taken again starts at the smallest count among the
 * tenants running then, so a tenant returning after a pause neither banks
 * credit nor inherits a debt. The name stays until the entry is taken
 * again, so the token hook can read it after the tenant's last sequence
 * ended in the step.
 */
typedef struct gen_tenant {
    char name[sizeof ((mcp_gen_request *)0)->tenant];
    int refs;            /* running sequences */
    double weight;       /* of its latest admitted request */
    double decoded;      /* tokens / weight */
    int64_t step_tokens; /* produced in this step */
    int ranked;          /* its decoding sequences sort_fair has keyed so far */
} gen_tenant;

struct mcp_gen_engine {
    const mcp_llm_model *m;
    mcp_llm_context *ctx;
    mcp_generation cfg;
    int64_t n_ctx, block_tokens;
    int n_slots;
    slot *slots;
    int64_t next_age;
    int32_t *b_tokens, *b_seq;
    int8_t *b_logits;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* work arrived, or stop */
    pthread_cond_t idle_cv; /* a request ended */
    gen_qnode *queue;       /* priority, then fair-queuing tag, then arrival */
    gen_qnode *free_qnodes; /* reused nodes */
    mcp_wfq *wfq;           /* the queue's fair-queuing clock (mu) */
    int64_t n_queued;
    int n_running;
    bool draining, stop;
    pthread_t thread;
    bool thread_started;
    int64_t kv_total;
    _Atomic int64_t prompt_tokens, generated_tokens, requests, preemptions, kv_used, kv_cached, kv_evictions;
    _Atomic int64_t cache_queries, cache_hits, cached_prompt_tokens;
    _Atomic int64_t running; /* for stats: admitted and not yet ended (n_running lags it by the last event) */
    int64_t block_bytes;
    mcp_metrics *metrics;
    char model[256], version[128];
    gen_tenant *tenants;    /* n_slots of them (step thread) */
    int *touched;           /* tenants that produced tokens in this step (n_slots) */
    int n_touched;
    /* The token hook (mu): set any time, read once per turn of the loop. */
    void (*token_hook)(void *user, const char *tenant, int64_t tokens);
    void *token_hook_user;
};

mcp_gen_request *mcp_gen_request_create(const mcp_model_version *v)
{
    mcp_gen_request *r = mcp_calloc(1, sizeof *r);
    if (!r) return NULL;
    atomic_init(&r->refs, 1);
    atomic_init(&r->cancel, false);
    const mcp_generation *g = &v->desc->generation;
    r->max_tokens = g->max_tokens;
    r->weight = 1.0;
    r->sampling = mcp_llm_sampling_default();
    r->sampling.temperature = (float)g->temperature;
    r->sampling.top_p = (float)g->top_p;
    r->sampling.top_k = (int)g->top_k;
    r->sampling.min_p = (float)g->min_p;
    r->sampling.repeat_penalty = (float)g->repeat_penalty;
    return r;
}

mcp_gen_request *mcp_gen_request_retain(mcp_gen_request *r)
{
    if (r) atomic_fetch_add(&r->refs, 1);
    return r;
}

void mcp_gen_request_release(mcp_gen_request *r)
{
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
    mcp_free(r->prompt);
    mcp_free(r->spans);
    mcp_free(r);
}

static void *step_main(void *arg);

mcp_status mcp_gen_engine_create(mcp_model_version *v, mcp_metrics *metrics, mcp_gen_engine **out, mcp_err *err)
{
    *out = NULL;
    if (!v->llm) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "model '%s' is not a generative model", v->name);
    mcp_gen_engine *g = mcp_calloc(1, sizeof *g);
    if (!g) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    g->m = v->llm;
    g->cfg = v->desc->generation;
    g->metrics = metrics;
    snprintf(g->model, sizeof g->model, "%s", v->name);
    snprintf(g->version, sizeof g->version, "%s", v->version);
    mcp_llm_info info;
    mcp_llm_model_info(g->m, &info);
    mcp_llm_context_options co = mcp_llm_context_options_default();
    co.n_ctx = g->cfg.context_length > 0 ? g->cfg.context_length : (info.n_ctx_train < 4096 ? info.n_ctx_train : 4096);
    co.max_seqs = (int)g->cfg.max_sequences;
    co.max_batch_tokens = (int)g->cfg.step_tokens;
    co.kv_budget_bytes = g->cfg.kv_cache_bytes;
    co.kv_type = g->cfg.kv_f32 ? MCP_LLM_KV_F32 : MCP_LLM_KV_F16;
    char msg[512];
    mcp_status st = mcp_llm_context_create(g->m, &co, &g->ctx, msg, sizeof msg);
    if (st != MCP_STATUS_OK) {
        mcp_free(g);
        return mcp_err_set(err, st, "model '%s': generation: %s", v->name, msg);
    }
    g->n_ctx = co.n_ctx;
    g->block_tokens = co.block_tokens;
    g->n_slots = co.max_seqs < MAX_SLOTS ? co.max_seqs : MAX_SLOTS;
    int64_t used0;
    mcp_llm_kv_usage(g->ctx, &used0, &g->kv_total);
    mcp_llm_cache_stats cs;
    mcp_llm_cache_stats_get(g->ctx, &cs);
    g->block_bytes = cs.block_bytes;
    g->slots = mcp_calloc((size_t)g->n_slots, sizeof *g->slots);
    g->b_tokens = mcp_malloc((size_t)co.max_batch_tokens * sizeof *g->b_tokens);
    g->b_seq = mcp_malloc((size_t)co.max_batch_tokens * sizeof *g->b_seq);
    g->b_logits = mcp_malloc((size_t)co.max_batch_tokens);
    g->tenants = mcp_calloc((size_t)g->n_slots, sizeof *g->tenants);
    g->touched = mcp_calloc((size_t)g->n_slots, sizeof *g->touched);
    g->wfq = mcp_wfq_create();
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    pthread_cond_init(&g->idle_cv, NULL);
    if (!g->slots || !g->b_tokens || !g->b_seq || !g->b_logits || !g->tenants || !g->touched || !g->wfq) {
        mcp_gen_engine_destroy(g);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (pthread_create(&g->thread, NULL, step_main, g) != 0) {
        mcp_gen_engine_destroy(g);
        return mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot start the step loop thread");
    }
    g->thread_started = true;
    *out = g;
    return MCP_STATUS_OK;
}

void mcp_gen_set_token_hook(mcp_gen_engine *g, void (*hook)(void *user, const char *tenant, int64_t tokens), void *user)
{
    pthread_mutex_lock(&g->mu);
    g->token_hook = hook;
    g->token_hook_user = user;
    pthread_mutex_unlock(&g->mu);
}

/* Whether a waits behind b: a larger priority number, or the same and a
 * larger tag (equal ones keep arrival order). */
static bool queue_after(const gen_qnode *a, const gen_qnode *b)
{
    if (a->r->priority != b->r->priority) return a->r->priority > b->r->priority;
    return a->tag > b->tag;
}

mcp_status mcp_gen_submit(mcp_gen_engine *g, mcp_gen_request *r)
{
    pthread_mutex_lock(&g->mu);
    mcp_status st = MCP_STATUS_OK;
    if (g->draining || g->stop) st = MCP_STATUS_UNAVAILABLE;
    else if (g->n_queued >= g->cfg.max_queue) st = MCP_STATUS_RESOURCE_EXHAUSTED;
    gen_qnode *n = NULL;
    if (st == MCP_STATUS_OK) {
        n = g->free_qnodes;
        if (n) g->free_qnodes = n->next;
        else if (!(n = mcp_malloc(sizeof *n))) st = MCP_STATUS_OUT_OF_MEMORY;
    }
    if (st == MCP_STATUS_OK) {
        r->submitted_ns = mcp_now_ns();
        /* The cost is what the request may generate; the context bounds it
         * (see the top of this file). */
        int64_t cost = r->max_tokens < g->n_ctx ? r->max_tokens : g->n_ctx;
        n->r = mcp_gen_request_retain(r);
        n->tag = mcp_wfq_tag(g->wfq, r->tenant, r->weight, (double)(cost > 0 ? cost : 1));
        gen_qnode **p = &g->queue;
        while (*p && !queue_after(*p, n)) p = &(*p)->next;
        n->next = *p;
        *p = n;
        g->n_queued++;
        pthread_cond_signal(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    return st;
}

void mcp_gen_drain(mcp_gen_engine *g)
{
    pthread_mutex_lock(&g->mu);
    g->draining = true;
    while (g->n_running > 0 || g->queue) pthread_cond_wait(&g->idle_cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

void mcp_gen_engine_destroy(mcp_gen_engine *g)
{
    if (!g) return;
    if (g->thread_started) {
        pthread_mutex_lock(&g->mu);
        g->stop = true;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
    }
    for (int i = 0; g->slots && i < g->n_slots; i++) {
        mcp_free(g->slots[i].tokens);
        mcp_free(g->slots[i].hashes);
    }
    /* The step loop emptied the queue when it stopped. */
    while (g->free_qnodes) {
        gen_qnode *n = g->free_qnodes;
        g->free_qnodes = n->next;
        mcp_free(n);
    }
    mcp_wfq_destroy(g->wfq);
    mcp_free(g->tenants);
    mcp_free(g->touched);
    mcp_free(g->slots);
    mcp_free(g->b_tokens);
    mcp_free(g->b_seq);
    mcp_free(g->b_logits);
    mcp_llm_context_free(g->ctx);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    pthread_cond_destroy(&g->idle_cv);
    mcp_free(g);
}

void mcp_gen_stats_get(mcp_gen_engine *g, mcp_gen_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&g->mu);
    out->running = atomic_load(&g->running);
    out->waiting = g->n_queued;
    pthread_mutex_unlock(&g->mu);
    out->kv_used_blocks = atomic_load(&g->kv_used);
    out->kv_total_blocks = g->kv_total;
    out->kv_cached_blocks = atomic_load(&g->kv_cached);
    out->kv_evictions = atomic_load(&g->kv_evictions);
    out->kv_block_bytes = g->block_bytes;
    out->cache_queries = atomic_load(&g->cache_queries);
    out->cache_hits = atomic_load(&g->cache_hits);
    out->cached_prompt_tokens = atomic_load(&g->cached_prompt_tokens);
    out->prompt_tokens = atomic_load(&g->prompt_tokens);
    out->generated_tokens = atomic_load(&g->generated_tokens);
    out->requests = atomic_load(&g->requests);
    out->preemptions = atomic_load(&g->preemptions);
}

/* ---- the step thread ---- */

static void emit_text(slot *s, size_t upto, const mcp_llm_sample_result *tok)
{
    mcp_gen_event e = {.kind = MCP_GEN_TOKEN, .token = tok};
    e.text = s->text.data ? (const char *)s->text.data + s->emitted : "";
    e.len = upto - s->emitted;
    s->emitted = upto;
    if (e.len || tok) s->r->on_event(s->r, &e);
}

/* The cache's counters, for stats from other threads. */
static void note_cache(mcp_gen_engine *g)
{
    mcp_llm_cache_stats cs;
    mcp_llm_cache_stats_get(g->ctx, &cs);
    atomic_store(&g->kv_used, cs.used_blocks);
    atomic_store(&g->kv_cached, cs.cached_blocks);
    atomic_store(&g->kv_evictions, cs.evictions);
}

/* Hashes the sequence's full blocks of tokens not hashed yet, up to
 * `upto` tokens: each over the tenant's key, the previous block's hash and
 * the block's tokens (SHA-256, the first 8 bytes; 0 is "none"). */
static void hash_blocks(mcp_gen_engine *g, slot *s, int64_t upto)
{
    const int64_t bt = g->block_tokens;
    for (; (s->n_hashed + 1) * bt <= upto; s->n_hashed++) {
        uint8_t msg[32 + 8 + 4 * 4096], md[EVP_MAX_MD_SIZE];
        uint64_t prev = s->n_hashed ? s->hashes[s->n_hashed - 1] : 0;
        size_t len = 0;
        memcpy(msg, s->r->cache_key, 32), len += 32;
        memcpy(msg + len, &prev, 8), len += 8;
        memcpy(msg + len, s->tokens + s->n_hashed * bt, (size_t)bt * 4), len += (size_t)bt * 4;
        unsigned int mdlen = 0;
        uint64_t h = 0;
        if (EVP_Digest(msg, len, md, &mdlen, EVP_sha256(), NULL) == 1 && mdlen >= 8) memcpy(&h, md, 8);
        s->hashes[s->n_hashed] = h ? h : 1;
    }
}

/* An empty sequence takes what the prefix cache holds of its tokens,
 * leaving at least the last prompt token to compute (its logits start the
 * answer). */
static void attach_prefix(mcp_gen_engine *g, int i)
{
    slot *s = &g->slots[i];
    if (!g->cfg.prefix_cache || !s->hashes || s->n_cached != 0 || !s->look_up) return;
    s->look_up = false;
    const int64_t bt = g->block_tokens;
    int n = (int)((s->n_tokens - 1) / bt);
    hash_blocks(g, s, (int64_t)n * bt);
    if (n <= 0) return;
    int64_t got = mcp_llm_seq_attach(g->ctx, i, s->hashes, s->tokens, n);
    s->n_cached = got;
    atomic_fetch_add(&g->cache_queries, n);
    atomic_fetch_add(&g->cache_hits, got / bt);
    atomic_fetch_add(&g->cached_prompt_tokens, got);
}

static void finish(mcp_gen_engine *g, int i, mcp_status st, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void finish(mcp_gen_engine *g, int i, mcp_status st, const char *reason, const char *fmt, ...)
{
    slot *s = &g->slots[i];
    char msg[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    /* Text held back for a stop string that never came is the answer's. */
    if (st == MCP_STATUS_OK && s->detok) {
        char tail[64];
        int n = mcp_llm_detok_flush(s->detok, tail, sizeof tail);
        if (n > 0) mcp_buf_append(&s->text, tail, (size_t)n);
        if (s->text.len > s->emitted) emit_text(s, s->text.len, NULL);
    }
    if (st == MCP_STATUS_OK)
        mcp_metrics_generation(g->metrics, g->model, g->version, MCP_GEN_METRIC_E2E, mcp_now_ns() - s->r->submitted_ns);
    mcp_gen_event e = {.kind = MCP_GEN_DONE, .status = st, .message = msg, .finish_reason = reason,
                       .prompt_tokens = s->n_prompt, .completion_tokens = s->n_gen};
    atomic_store_explicit(&s->r->prompt_tokens, s->n_prompt, memory_order_relaxed);
    atomic_store_explicit(&s->r->completion_tokens, s->n_gen, memory_order_relaxed);
    atomic_store_explicit(&s->r->done_ns, mcp_now_ns(), memory_order_relaxed);
    /* The counters first: whoever hears of the end sees its blocks back. */
    mcp_llm_seq_truncate(g->ctx, i, 0);
    note_cache(g);
    atomic_fetch_add(&g->requests, 1);
    atomic_fetch_sub(&g->running, 1);
    s->r->on_event(s->r, &e);
    mcp_llm_sampler_free(s->sampler);
    mcp_llm_detok_free(s->detok);
    mcp_buf_free(&s->text);
    mcp_gen_request_release(s->r);
    g->tenants[s->tenant].refs--;
    int32_t *keep = s->tokens;
    uint64_t *keep_h = s->hashes;
    memset(s, 0, sizeof *s);
    s->tokens = keep; /* reused: n_ctx tokens */
    s->hashes = keep_h;
    pthread_mutex_lock(&g->mu);
    g->n_running--;
    pthread_cond_broadcast(&g->idle_cv);
    pthread_mutex_unlock(&g->mu);
}

/* Tokenizes the prompt and readies the sampler (on the step thread, so a
 * long prompt costs no transport thread). */
static void start(mcp_gen_engine *g, int i)
{
    slot *s = &g->slots[i];
    mcp_gen_request *r = s->r;
    s->started = true;
    if (!s->tokens) s->tokens = mcp_malloc((size_t)g->n_ctx * sizeof *s->tokens);
    if (!s->hashes && g->cfg.prefix_cache) s->hashes = mcp_calloc((size_t)(g->n_ctx / g->block_tokens + 1), sizeof *s->hashes);
    if (!s->tokens || (g->cfg.prefix_cache && !s->hashes)) {
        finish(g, i, MCP_STATUS_OUT_OF_MEMORY, NULL, "out of memory");
        return;
    }
    char msg[300];
    size_t n = 0;
    const char *text = r->prompt ? r->prompt : "";
    mcp_status st = r->spans ? mcp_llm_tokenize_spans(g->m, text, r->prompt_len, true, r->spans, r->n_spans, s->tokens,
                                                      (size_t)g->n_ctx, &n, msg, sizeof msg)
                             : mcp_llm_tokenize(g->m, text, r->prompt_len, true, r->parse_special, s->tokens,
                                                (size_t)g->n_ctx, &n, msg, sizeof msg);
    if (st != MCP_STATUS_OK) {
        finish(g, i, st, NULL, "prompt: %s", msg);
        return;
    }
    if (n == 0) {
        finish(g, i, MCP_STATUS_INVALID_ARGUMENT, NULL, "the prompt is empty");
        return;
    }
    if ((int64_t)n >= g->n_ctx) {
        finish(g, i, MCP_STATUS_INVALID_ARGUMENT, NULL,
               "the prompt is %zu tokens; this model's context holds %lld tokens, prompt and completion together", n,
               (long long)g->n_ctx);
        return;
    }
    s->n_tokens = s->n_prompt = (int64_t)n;
    s->max_gen = r->max_tokens < g->n_ctx - s->n_prompt ? r->max_tokens : g->n_ctx - s->n_prompt;
    st = mcp_llm_sampler_create(g->m, &r->sampling, &s->sampler, msg, sizeof msg);
    s->detok = mcp_llm_detok_create(g->m, false);
    if (st != MCP_STATUS_OK || !s->detok) {
        finish(g, i, st != MCP_STATUS_OK ? st : MCP_STATUS_OUT_OF_MEMORY, NULL, "sampling: %s",
               st != MCP_STATUS_OK ? msg : "out of memory");
        return;
    }
    for (int64_t t = 0; t < s->n_prompt; t++) mcp_llm_sampler_accept(s->sampler, s->tokens[t]);
    atomic_fetch_add(&g->prompt_tokens, s->n_prompt);
    s->n_hashed = s->n_published = 0;
    s->look_up = true;
    if (!atomic_load_explicit(&r->admitted_ns, memory_order_relaxed))
        atomic_store_explicit(&r->admitted_ns, mcp_now_ns(), memory_order_relaxed);
    attach_prefix(g, i);
}

/* The generated text grew: ends at a stop string, else sends what cannot
 * be the start of one. true when a stop string ended it. */
static bool release_text(slot *s, const mcp_llm_sample_result *tok)
{
    const mcp_gen_request *r = s->r;
    const char *t = (const char *)s->text.data;
    size_t len = s->text.len, safe = len;
    size_t from = s->emitted > MCP_GEN_MAX_STOP_LEN ? s->emitted - MCP_GEN_MAX_STOP_LEN : 0;
    size_t hit = SIZE_MAX;
    for (int k = 0; k < r->n_stop; k++) {
        size_t sl = strlen(r->stop[k]);
        if (!sl || !t) continue;
        for (size_t p = from; p + sl <= len; p++)
            if (memcmp(t + p, r->stop[k], sl) == 0 && p < hit) {
                hit = p;
                break;
            }
        for (size_t q = sl - 1; q > 0; q--)
            if (q <= len - s->emitted && memcmp(t + len - q, r->stop[k], q) == 0) {
                if (len - q < safe) safe = len - q;
                break;
            }
    }
    if (hit != SIZE_MAX) {
        if (hit < s->emitted) hit = s->emitted;
        emit_text(s, hit, tok);
        s->text.len = hit;
        return true;
    }
    emit_text(s, safe, tok);
    return false;
}

static int64_t blocks_for(const mcp_gen_engine *g, int64_t tokens) { return (tokens + g->block_tokens - 1) / g->block_tokens; }

/* ---- tenants (step thread) ---- */

/* The entry of r's tenant among those running, else a free one (there is
 * one: n_slots entries, fewer running sequences than slots), starting at
 * the smallest count of the running tenants. */
static int tenant_take(mcp_gen_engine *g, const mcp_gen_request *r)
{
    double weight = r->weight > 0 && isfinite(r->weight) ? r->weight : 1;
    int free_k = -1;
    bool running = false;
    double floor = 0;
    for (int k = 0; k < g->n_slots; k++) {
        gen_tenant *t = &g->tenants[k];
        if (t->refs == 0) {
            if (free_k < 0) free_k = k;
            continue;
        }
        if (strncmp(t->name, r->tenant, sizeof t->name) == 0) {
            t->refs++;
            t->weight = weight;
            return k;
        }
        if (!running || t->decoded < floor) floor = t->decoded;
        running = true;
    }
    MCP_ASSERT(free_k >= 0);
    gen_tenant *t = &g->tenants[free_k];
    memcpy(t->name, r->tenant, sizeof t->name);
    t->name[sizeof t->name - 1] = '\0';
    t->refs = 1;
    t->weight = weight;
    t->decoded = floor;
    t->step_tokens = 0;
    return free_k;
}

/* One token of an answer, for tenant k. */
static void count_token(mcp_gen_engine *g, int k)
{
    gen_tenant *t = &g->tenants[k];
    if (t->step_tokens++ == 0) g->touched[g->n_touched++] = k;
    t->decoded += 1 / t->weight;
}

/* Each tenant's tokens of the step to the hook (if any), once per tenant. */
static void report_tokens(mcp_gen_engine *g, void (*hook)(void *, const char *, int64_t), void *user)
{
    for (int k = 0; k < g->n_touched; k++) {
        gen_tenant *t = &g->tenants[g->touched[k]];
        if (hook) hook(user, t->name, t->step_tokens);
        t->step_tokens = 0;
    }
    g->n_touched = 0;
}

/*
 * Orders decoding sequences (slot indices, oldest first) for a step that
 * cannot take them all: a tenant's k-th sequence is keyed by the tenant's
 * tokens per weight after k more tokens, as fair queuing would tag one-
 * token requests, so the step's tokens are shared by weight within the
 * step too (not all to the tenant behind, then all to the other). Stable:
 * equal keys stay oldest first. Runs only when the step is short, over at
 * most MAX_SLOTS sequences.
 */
static void sort_fair(mcp_gen_engine *g, int *idx, int n)
{
    double key[MAX_SLOTS];
    for (int a = 0; a < n; a++) {
        gen_tenant *t = &g->tenants[g->slots[idx[a]].tenant];
        key[a] = t->decoded + ++t->ranked / t->weight;
    }
    for (int a = 0; a < n; a++) g->tenants[g->slots[idx[a]].tenant].ranked = 0;
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && key[b] < key[b - 1]; b--) {
            double k = key[b];
            key[b] = key[b - 1];
            key[b - 1] = k;
            int t = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = t;
        }
}

/* One decode over every running sequence. */
static void step(mcp_gen_engine *g)
{
    int64_t now = mcp_now_ns();
    for (int i = 0; i < g->n_slots; i++) {
        slot *s = &g->slots[i];
        if (!s->r) continue;
        if (atomic_load(&s->r->cancel)) finish(g, i, MCP_STATUS_CANCELLED, NULL, "the client went away");
        else if (s->r->deadline_ns && now > s->r->deadline_ns)
            finish(g, i, MCP_STATUS_DEADLINE_EXCEEDED, NULL, "the request's deadline passed after %lld tokens",
                   (long long)s->n_gen);
    }
    /* Oldest first: sequences with one token pending (decoding), then
     * prompt chunks, within the step's tokens and the free KV blocks. */
    int order[MAX_SLOTS];
    int n_act = 0;
    for (int i = 0; i < g->n_slots; i++)
        if (g->slots[i].r) order[n_act++] = i;
    for (int a = 1; a < n_act; a++)
        for (int b = a; b > 0 && g->slots[order[b]].age < g->slots[order[b - 1]].age; b--) {
            int x = order[b];
            order[b] = order[b - 1];
            order[b - 1] = x;
        }
    if (n_act == 0) return;
    int64_t used, total;
    /* A sequence that gave its blocks back takes cached ones again only
     * while every running sequence keeps room for a block: else it would
     * take back what its preemption freed. */
    for (int a = 0; a < n_act; a++) {
        slot *s = &g->slots[order[a]];
        if (!s->look_up || s->n_cached != 0 || s->n_tokens <= g->block_tokens) continue;
        mcp_llm_kv_usage(g->ctx, &used, &total);
        if (total - used - (s->n_tokens - 1) / g->block_tokens >= n_act) attach_prefix(g, order[a]);
    }
    mcp_llm_kv_usage(g->ctx, &used, &total);
    int64_t free_blocks = total - used, budget = g->cfg.step_tokens;
    /* The decoding sequences, oldest first; when not all of them fit the
     * step (more than its tokens, or than the free blocks take), the
     * tenants with the fewest tokens per weight go first. */
    int dec[MAX_SLOTS];
    int n_dec = 0;
    int64_t dec_blocks = 0;
    for (int a = 0; a < n_act; a++) {
        slot *s = &g->slots[order[a]];
        s->logit_row = -1;
        if (s->n_tokens - s->n_cached != 1) continue;
        dec[n_dec++] = order[a];
        dec_blocks += blocks_for(g, s->n_cached + 1) - blocks_for(g, s->n_cached);
    }
    if (n_dec > budget || dec_blocks > free_blocks) sort_fair(g, dec, n_dec);
    int n = 0, n_rows = 0;
    for (int pass = 0; pass < 2; pass++) {
        const int *list = pass == 0 ? dec : order;
        const int n_list = pass == 0 ? n_dec : n_act;
        for (int a = 0; a < n_list && budget > 0; a++) {
            slot *s = &g->slots[list[a]];
            int64_t pending = s->n_tokens - s->n_cached;
            if ((pass == 0) != (pending == 1)) continue;
            int64_t room = (blocks_for(g, s->n_cached) + free_blocks) * g->block_tokens - s->n_cached;
            int64_t chunk = pending < budget ? pending : budget;
            if (chunk > room) chunk = room;
            if (chunk <= 0) continue;
            free_blocks -= blocks_for(g, s->n_cached + chunk) - blocks_for(g, s->n_cached);
            for (int64_t t = 0; t < chunk; t++) {
                g->b_tokens[n] = s->tokens[s->n_cached + t];
                g->b_seq[n] = list[a];
                g->b_logits[n] = 0;
                n++;
            }
            if (chunk == pending) {
                g->b_logits[n - 1] = 1;
                s->logit_row = n_rows++;
            }
            budget -= chunk;
        }
    }
    if (n == 0) {
        /* The cache is full: the youngest sequence holding blocks gives
         * them back (it is prefilled again later); a sequence alone that
         * cannot fit fails. */
        for (int a = n_act - 1; a > 0; a--) {
            slot *s = &g->slots[order[a]];
            if (s->n_cached == 0) continue;
            mcp_llm_seq_truncate(g->ctx, order[a], 0);
            s->n_cached = 0;
            s->n_published = 0;
            s->look_up = true; /* its published blocks may still be there */
            atomic_fetch_add(&g->preemptions, 1);
            return;
        }
        finish(g, order[0], MCP_STATUS_RESOURCE_EXHAUSTED, NULL,
               "the sequence needs more KV cache than this model's budget (%lld blocks of %lld tokens)", (long long)total,
               (long long)g->block_tokens);
        return;
    }
    char msg[512];
    mcp_llm_batch b = {.n = n, .tokens = g->b_tokens, .seq = g->b_seq, .logits = g->b_logits};
    mcp_status st = mcp_llm_decode(g->ctx, &b, msg, sizeof msg);
    if (st != MCP_STATUS_OK) {
        for (int a = 0; a < n_act; a++) {
            slot *s = &g->slots[order[a]];
            mcp_llm_seq_truncate(g->ctx, order[a], 0);
            s->n_cached = 0;
        }
        for (int a = 0; a < n_act; a++) finish(g, order[a], st, NULL, "decode: %s", msg);
        return;
    }
    for (int t = 0; t < n; t++) g->slots[g->b_seq[t]].n_cached++;
    /* Full blocks computed this step are published for later requests. */
    for (int a = 0; g->cfg.prefix_cache && a < n_act; a++) {
        slot *s = &g->slots[order[a]];
        int64_t full = s->n_cached / g->block_tokens;
        if (full <= s->n_published) continue;
        hash_blocks(g, s, full * g->block_tokens);
        mcp_llm_seq_publish(g->ctx, order[a], s->hashes, s->tokens, (int)full);
        s->n_published = full;
    }
    note_cache(g);
    for (int a = 0; a < n_act; a++) {
        const int i = order[a];
        slot *s = &g->slots[i];
        if (s->logit_row < 0) continue;
        mcp_llm_sample_result res;
        mcp_llm_sample(s->sampler, mcp_llm_logits(g->ctx, s->logit_row), &res);
        s->logit_row = -1;
        mcp_llm_sampler_accept(s->sampler, res.id);
        const int64_t t_now = mcp_now_ns();
        if (s->last_token_ns) mcp_metrics_generation(g->metrics, g->model, g->version, MCP_GEN_METRIC_ITL, t_now - s->last_token_ns);
        else mcp_metrics_generation(g->metrics, g->model, g->version, MCP_GEN_METRIC_TTFT, t_now - s->r->submitted_ns);
        if (!atomic_load_explicit(&s->r->first_token_ns, memory_order_relaxed))
            atomic_store_explicit(&s->r->first_token_ns, t_now, memory_order_relaxed);
        s->last_token_ns = t_now;
        s->n_gen++;
        atomic_fetch_add(&g->generated_tokens, 1);
        if (mcp_llm_token_is_eog(g->m, res.id) && !s->r->ignore_eos) {
            s->n_gen--; /* the end-of-generation token is not part of the answer */
            finish(g, i, MCP_STATUS_OK, "stop", NULL);
            continue;
        }
        count_token(g, s->tenant);
        s->tokens[s->n_tokens++] = res.id;
        char piece[512];
        int np = mcp_llm_detok_push(s->detok, res.id, piece, sizeof piece);
        if (np > 0) mcp_buf_append(&s->text, piece, (size_t)np);
        if (s->text.failed) {
            finish(g, i, MCP_STATUS_OUT_OF_MEMORY, NULL, "out of memory");
            continue;
        }
        if (release_text(s, &res)) finish(g, i, MCP_STATUS_OK, "stop", NULL);
        else if (s->n_gen >= s->max_gen) finish(g, i, MCP_STATUS_OK, "length", NULL);
    }
}

static void *step_main(void *arg)
{
    mcp_sandbox_enter_inference_or_warn();
    mcp_gen_engine *g = arg;
    for (;;) {
        pthread_mutex_lock(&g->mu);
        while (!g->stop && g->n_running == 0 && !g->queue) pthread_cond_wait(&g->cv, &g->mu);
        bool stop = g->stop;
        gen_qnode *refused = NULL;
        if (stop) { /* destroyed without a drain: nothing more runs */
            refused = g->queue;
            g->queue = NULL;
            g->n_queued = 0;
        }
        for (int i = 0; !stop && i < g->n_slots && g->queue; i++) {
            if (g->slots[i].r) continue;
            gen_qnode *n = g->queue;
            g->queue = n->next;
            mcp_wfq_served(g->wfq, n->tag);
            mcp_gen_request *r = n->r;
            n->next = g->free_qnodes;
            g->free_qnodes = n;
            g->n_queued--;
            g->slots[i].r = r;
            g->slots[i].tenant = tenant_take(g, r);
            g->slots[i].age = g->next_age++;
            g->slots[i].logit_row = -1;
            g->n_running++;
            atomic_fetch_add(&g->running, 1);
        }
        void (*hook)(void *, const char *, int64_t) = g->token_hook;
        void *hook_user = g->token_hook_user;
        pthread_mutex_unlock(&g->mu);
        while (refused) {
            gen_qnode *n = refused;
            refused = n->next;
            mcp_gen_request *r = n->r;
            mcp_free(n);
            mcp_gen_event e = {.kind = MCP_GEN_DONE, .status = MCP_STATUS_UNAVAILABLE, .message = "the model was unloaded"};
            r->on_event(r, &e);
            mcp_gen_request_release(r);
            pthread_mutex_lock(&g->mu);
            pthread_cond_broadcast(&g->idle_cv);
            pthread_mutex_unlock(&g->mu);
        }
        if (stop) {
            for (int i = 0; i < g->n_slots; i++)
                if (g->slots[i].r) finish(g, i, MCP_STATUS_UNAVAILABLE, NULL, "the model was unloaded");
            break;
        }
        for (int i = 0; i < g->n_slots; i++)
            if (g->slots[i].r && !g->slots[i].started) start(g, i);
        step(g);
        report_tokens(g, hook, hook_user);
    }
    return NULL;
}
