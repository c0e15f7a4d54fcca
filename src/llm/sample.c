/* Sampling: penalties over the recent history, then greedy, or temperature
 * with top-k, top-p and min-p filtering and a seeded generator (the same
 * seed, model and inputs give the same tokens on any machine). Reported
 * log-probabilities are the model's own: log-softmax of the logits before
 * penalties and temperature. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llm/llm_internal.h"

struct mcp_llm_sampler {
    mcp_llm_sampling s;
    int64_t n_vocab;
    /* The last penalty_last_n accepted tokens, a ring, and their counts. */
    int32_t *ring;
    int ring_len, ring_next;
    int32_t *counts;
    uint64_t rng[4];
    /* Scratch: penalised logits and candidate indexes. */
    float *work;
    int32_t *cand;
    /* Which tokens this step has penalised already: stamp == epoch. */
    uint32_t *stamp;
    uint32_t epoch;
};

mcp_llm_sampling mcp_llm_sampling_default(void)
{
    mcp_llm_sampling s;
    memset(&s, 0, sizeof s);
    s.temperature = 0.0f;
    s.top_p = 1.0f;
    s.repeat_penalty = 1.0f;
    s.penalty_last_n = 64;
    return s;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** */
static uint64_t next_u64(uint64_t *s)
{
    const uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1). */
static double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

mcp_status mcp_llm_sampler_create(const mcp_llm_model *m, const mcp_llm_sampling *sp, mcp_llm_sampler **out, char *errbuf,
                                  size_t err_len)
{
    mcp_err err_s = {errbuf, err_len}, *err = &err_s;
    *out = NULL;
    mcp_llm_sampling s = sp ? *sp : mcp_llm_sampling_default();
    if (!(s.temperature >= 0.0f && s.temperature <= 100.0f))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "temperature %g is outside 0 to 100", (double)s.temperature);
    if (!(s.top_p > 0.0f && s.top_p <= 1.0f))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "top_p %g is outside (0, 1]", (double)s.top_p);
    if (!(s.min_p >= 0.0f && s.min_p <= 1.0f))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "min_p %g is outside [0, 1]", (double)s.min_p);
    if (s.top_k < 0) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "top_k %d is negative", s.top_k);
    if (!(s.repeat_penalty > 0.0f && s.repeat_penalty <= 10.0f))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "repeat_penalty %g is outside (0, 10]", (double)s.repeat_penalty);
    if (!(fabsf(s.presence_penalty) <= 2.0f) || !(fabsf(s.frequency_penalty) <= 2.0f))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "presence and frequency penalties must be within -2 to 2");
    if (s.penalty_last_n < 0 || s.penalty_last_n > 1 << 16)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "penalty_last_n %d is outside 0 to 65536", s.penalty_last_n);
    if (s.n_logprobs < 0 || s.n_logprobs > 20)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "n_logprobs %d is outside 0 to 20", s.n_logprobs);
    mcp_llm_sampler *r = mcp_calloc(1, sizeof *r);
    if (!r) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    r->s = s;
    r->n_vocab = m->n_vocab;
    r->ring = mcp_calloc((size_t)(s.penalty_last_n ? s.penalty_last_n : 1), sizeof *r->ring);
    r->counts = mcp_calloc((size_t)m->n_vocab, sizeof *r->counts);
    r->work = mcp_malloc((size_t)m->n_vocab * sizeof *r->work);
    r->cand = mcp_malloc((size_t)m->n_vocab * sizeof *r->cand);
    r->stamp = mcp_calloc((size_t)m->n_vocab, sizeof *r->stamp);
    if (!r->ring || !r->counts || !r->work || !r->cand || !r->stamp) {
        mcp_llm_sampler_free(r);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    uint64_t x = s.seed;
    for (int i = 0; i < 4; i++) r->rng[i] = splitmix64(&x);
    *out = r;
    return MCP_STATUS_OK;
}

void mcp_llm_sampler_free(mcp_llm_sampler *r)
{
    if (!r) return;
    mcp_free(r->ring);
    mcp_free(r->counts);
    mcp_free(r->work);
    mcp_free(r->cand);
    mcp_free(r->stamp);
    mcp_free(r);
}

void mcp_llm_sampler_accept(mcp_llm_sampler *r, int32_t id)
{
    if (id < 0 || id >= r->n_vocab || r->s.penalty_last_n == 0) return;
    if (r->ring_len == r->s.penalty_last_n) {
        r->counts[r->ring[r->ring_next]]--;
    } else {
        r->ring_len++;
    }
    r->ring[r->ring_next] = id;
    r->counts[id]++;
    r->ring_next = (r->ring_next + 1) % r->s.penalty_last_n;
}

/* Descending by value, ties by lower id: the same order everywhere. */
static _Thread_local const float *sort_vals;
static int by_value_desc(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float vx = sort_vals[x], vy = sort_vals[y];
    if (vx != vy) return vx > vy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The n largest of v (ids, descending; ties by lower id), by insertion into
 * a short sorted list: n <= 20 against a vocabulary in one pass. */
static int top_n(const float *v, int64_t len, int n, int32_t *ids)
{
    int have = 0;
    for (int64_t i = 0; i < len; i++) {
        if (have == n && !(v[i] > v[ids[n - 1]])) continue;
        int j = have < n ? have++ : n - 1;
        while (j > 0 && v[i] > v[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = (int32_t)i;
    }
    return have;
}

void mcp_llm_sample(mcp_llm_sampler *r, const float *logits, mcp_llm_sample_result *out)
{
    const int64_t n = r->n_vocab;
    const mcp_llm_sampling *s = &r->s;
    memset(out, 0, sizeof *out);
    /* The model's log-softmax, for the reported log-probabilities. */
    float mx = -FLT_MAX;
    for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, logits[i]);
    double z = 0.0;
    for (int64_t i = 0; i < n; i++) z += exp((double)logits[i] - mx);
    const float log_z = (float)(mx + log(z));

    float *w = r->work;
    memcpy(w, logits, (size_t)n * sizeof *w);
    if (r->ring_len > 0 && (s->repeat_penalty != 1.0f || s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f)) {
        /* Each distinct token of the window once. */
        if (++r->epoch == 0) {
            memset(r->stamp, 0, (size_t)n * sizeof *r->stamp);
            r->epoch = 1;
        }
        for (int i = 0; i < r->ring_len; i++) {
            int32_t id = r->ring[i];
            if (r->stamp[id] == r->epoch) continue;
            r->stamp[id] = r->epoch;
            float v = w[id];
            if (s->repeat_penalty != 1.0f) v = v > 0 ? v / s->repeat_penalty : v * s->repeat_penalty;
            w[id] = v - ((float)r->counts[id] * s->frequency_penalty + s->presence_penalty);
        }
    }
    int32_t chosen;
    if (s->temperature <= 0.0f) {
        chosen = 0;
        for (int64_t i = 1; i < n; i++)
            if (w[i] > w[chosen]) chosen = (int32_t)i;
    } else {
        int64_t nc = 0;
        int32_t *cand = r->cand;
        if (s->top_k > 0 && s->top_k < n) {
            int k = s->top_k;
            /* A full sort only when k is large; small k is one pass. */
            if (k <= 64) {
                int32_t small[64];
                nc = top_n(w, n, k, small);
                memcpy(cand, small, (size_t)nc * sizeof *cand);
            } else {
                for (int64_t i = 0; i < n; i++) cand[i] = (int32_t)i;
                sort_vals = w;
                qsort(cand, (size_t)n, sizeof *cand, by_value_desc);
                nc = k;
            }
        } else {
            for (int64_t i = 0; i < n; i++) cand[i] = (int32_t)i;
            nc = n;
        }
        /* Probabilities at the temperature, over the candidates. */
        float cmax = -FLT_MAX;
        for (int64_t i = 0; i < nc; i++) cmax = fmaxf(cmax, w[cand[i]]);
        double sum = 0.0;
        for (int64_t i = 0; i < nc; i++) {
            float p = expf((w[cand[i]] - cmax) / s->temperature);
            w[cand[i]] = p;
            sum += p;
        }
        /* min-p: drop what is below min_p times the most likely. */
        if (s->min_p > 0.0f) {
            float bar = s->min_p; /* the most likely has p = 1 before normalising */
            int64_t kept = 0;
            for (int64_t i = 0; i < nc; i++)
                if (w[cand[i]] >= bar) cand[kept++] = cand[i];
            sum = 0.0;
            for (int64_t i = 0; i < kept; i++) sum += w[cand[i]];
            nc = kept;
        }
        /* top-p: the most likely first until their mass reaches top_p. */
        if (s->top_p < 1.0f && nc > 1) {
            sort_vals = w;
            qsort(cand, (size_t)nc, sizeof *cand, by_value_desc);
            double acc = 0.0, bar = s->top_p * sum;
            int64_t kept = 0;
            while (kept < nc) {
                acc += w[cand[kept++]];
                if (acc >= bar) break;
            }
            nc = kept;
            sum = acc;
        }
        double u = next_unit(r->rng) * sum, acc = 0.0;
        chosen = cand[nc - 1];
        for (int64_t i = 0; i < nc; i++) {
            acc += w[cand[i]];
            if (u < acc) {
                chosen = cand[i];
                break;
            }
        }
    }
    out->id = chosen;
    out->logprob = logits[chosen] - log_z;
    if (s->n_logprobs > 0) {
        int32_t ids[20];
        out->n_top = top_n(logits, n, s->n_logprobs, ids);
        for (int i = 0; i < out->n_top; i++) {
            out->top[i].id = ids[i];
            out->top[i].logprob = logits[ids[i]] - log_z;
        }
    }
}
