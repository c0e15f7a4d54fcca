/*
 * Reference kernels: text ops of the signal family (StringNormalizer,
 * TfIdfVectorizer).
 */
#include <string.h>

#include "ops/ref/signal_util.h"

/* ---- StringNormalizer ---- */

/*
 * Changes case in place for ASCII and for the Latin-1 letters encoded as
 * two-byte UTF-8 (U+00C0..U+00DE <-> U+00E0..U+00FE, minus the multiplication
 * and division signs). Both mappings keep the byte length, which is all the
 * locale support the op needs here; other characters pass unchanged.
 */
static void text_change_case(char *s, size_t len, bool upper)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            if (upper && c >= 'a' && c <= 'z') s[i] = (char)(c - 'a' + 'A');
            if (!upper && c >= 'A' && c <= 'Z') s[i] = (char)(c - 'A' + 'a');
        } else if (c == 0xC3 && i + 1 < len) {
            unsigned char d = (unsigned char)s[i + 1];
            if (upper && d >= 0xA0 && d <= 0xBE && d != 0xB7) s[i + 1] = (char)(d - 0x20);
            if (!upper && d >= 0x80 && d <= 0x9E && d != 0x97) s[i + 1] = (char)(d + 0x20);
            i++;
        }
    }
}

/* Returns a lowercased copy of s (mcp_free it), or NULL when out of memory. */
static char *text_lower_dup(const char *s)
{
    char *c = mcp_strdup(s);
    if (c) text_change_case(c, strlen(c), false);
    return c;
}

mcp_status mcp__signal_run_string_normalizer(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *X = mcp_kin(ctx, 0);
    if (!X) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is required");
    if (X->dtype != MCP_DTYPE_STRING)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must be a string tensor");
    if (!(X->rank == 1 || (X->rank == 2 && X->dims[0] == 1)))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must have shape [C] or [1, C]");
    const char *action = mcp_kattr_string(ctx, "case_change_action", "NONE");
    int mode; /* 0 none, 1 lower, 2 upper */
    if (strcmp(action, "NONE") == 0) {
        mode = 0;
    } else if (strcmp(action, "LOWER") == 0) {
        mode = 1;
    } else if (strcmp(action, "UPPER") == 0) {
        mode = 2;
    } else {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'case_change_action' is '%s'", action);
    }
    bool sensitive = mcp_kattr_int(ctx, "is_case_sensitive", 0) != 0;
    const mcp_attr *sw = mcp_kattr(ctx, "stopwords");
    int64_t n_stop = sw && sw->type == MCP_ATTR_STRINGS ? sw->count : 0;

    int64_t n = mcp_tensor_numel(X);
    const char *const *in = (const char *const *)X->data;
    /* keep[i]: input i survives. Lowered stopwords for case-insensitive
     * matching share the same allocation of pointers. */
    size_t bytes = (size_t)n * sizeof(bool) + (size_t)n_stop * sizeof(char *) + 1;
    char *mem = mcp_calloc(1, bytes);
    if (!mem) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    char **stop = (char **)mem;
    bool *keep = (bool *)(mem + (size_t)n_stop * sizeof(char *));
    mcp_status st = MCP_STATUS_OK;
    if (!sensitive) {
        for (int64_t j = 0; j < n_stop; j++) {
            if (!(stop[j] = text_lower_dup(sw->strings[j]))) {
                st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
        }
    }
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *s = in[i] ? in[i] : "";
        char *low = NULL;
        if (!sensitive && n_stop > 0 && !(low = text_lower_dup(s))) {
            st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        bool hit = false;
        for (int64_t j = 0; j < n_stop && !hit; j++)
            hit = sensitive ? strcmp(s, sw->strings[j]) == 0 : strcmp(low, stop[j]) == 0;
        mcp_free(low);
        keep[i] = !hit;
        if (!hit) kept++;
    }

    /* With every element dropped the output is one empty string. */
    int64_t odims[2];
    int orank = X->rank;
    if (orank == 1) {
        odims[0] = kept > 0 ? kept : 1;
    } else {
        odims[0] = 1;
        odims[1] = kept > 0 ? kept : 1;
    }
    mcp_tensor *Y = mcp_kout(ctx, 0, MCP_DTYPE_STRING, orank, odims);
    if (!Y) {
        st = MCP_STATUS_OUT_OF_MEMORY;
        goto done;
    }
    int64_t o = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!keep[i]) continue;
        const char *s = in[i] ? in[i] : "";
        size_t len = strlen(s);
        if (mcp_tensor_set_string(Y, o, s, len) != MCP_STATUS_OK) {
            st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        if (mode != 0) text_change_case(((char **)Y->data)[o], len, mode == 2);
        o++;
    }
done:
    for (int64_t j = 0; j < n_stop; j++) mcp_free(stop[j]);
    mcp_free(mem);
    return st;
}

/* ---- TfIdfVectorizer ---- */

/*
 * The pool as a hash set of n-grams. Each n-gram has an id (its position in
 * the pool, counted over all lengths in order), a length and the offset of
 * its first token in the pool attribute.
 */
typedef struct tfidf_pool {
    bool strings;
    const int64_t *ints;
    char *const *strs;
    int64_t n_grams;
    int64_t *gram_len;
    int64_t *gram_off;
    int64_t *slots; /* hash slots holding gram id + 1, 0 = empty */
    uint64_t mask;
} tfidf_pool;

#define TFIDF_FNV_OFFSET UINT64_C(1469598103934665603)
#define TFIDF_FNV_PRIME UINT64_C(1099511628211)

static uint64_t tfidf_hash_int(uint64_t h, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++) {
        h ^= (u >> (8 * i)) & 0xFF;
        h *= TFIDF_FNV_PRIME;
    }
    return h;
}

static uint64_t tfidf_hash_str(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= TFIDF_FNV_PRIME;
    }
    /* A terminator keeps ("ab","c") apart from ("a","bc"). */
    h ^= 0xFF;
    h *= TFIDF_FNV_PRIME;
    return h;
}

/* Compares pool n-gram `id` with the tokens of input row `row` at positions
 * pos, pos + stride, ... (len of them). */
static bool tfidf_equal(const tfidf_pool *p, int64_t id, const mcp_tensor *X, int64_t row_off,
                        int64_t pos, int64_t stride, int64_t len)
{
    if (p->gram_len[id] != len) return false;
    int64_t off = p->gram_off[id];
    for (int64_t k = 0; k < len; k++) {
        int64_t idx = row_off + pos + k * stride;
        if (p->strings) {
            const char *s = ((char *const *)X->data)[idx];
            if (strcmp(s ? s : "", p->strs[off + k]) != 0) return false;
        } else {
            if (mcp_tensor_get_i64(X, idx) != p->ints[off + k]) return false;
        }
    }
    return true;
}

mcp_status mcp__signal_run_tfidf_vectorizer(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *X = mcp_kin(ctx, 0);
    if (!X) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is required");
    bool is_str = X->dtype == MCP_DTYPE_STRING;
    if (!is_str && X->dtype != MCP_DTYPE_INT32 && X->dtype != MCP_DTYPE_INT64)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' must be string, int32 or int64, got %s",
                         mcp_dtype_name(X->dtype));
    if (X->rank != 1 && X->rank != 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must have rank 1 or 2");

    int64_t min_n = mcp_kattr_int(ctx, "min_gram_length", 0);
    int64_t max_n = mcp_kattr_int(ctx, "max_gram_length", 0);
    int64_t max_skip = mcp_kattr_int(ctx, "max_skip_count", 0);
    if (min_n < 1 || max_n < min_n)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attributes 'min_gram_length' (%lld) and 'max_gram_length' (%lld) are invalid",
                         (long long)min_n, (long long)max_n);
    if (max_skip < 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'max_skip_count' is negative");
    const char *mode_s = mcp_kattr_string(ctx, "mode", "");
    int mode; /* 0 TF, 1 IDF, 2 TFIDF */
    if (strcmp(mode_s, "TF") == 0) {
        mode = 0;
    } else if (strcmp(mode_s, "IDF") == 0) {
        mode = 1;
    } else if (strcmp(mode_s, "TFIDF") == 0) {
        mode = 2;
    } else {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'mode' is '%s'", mode_s);
    }

    int64_t n_counts = 0, n_idx = 0, n_weights = 0, pool_size = 0;
    const int64_t *counts = mcp_kattr_ints(ctx, "ngram_counts", &n_counts);
    const int64_t *indexes = mcp_kattr_ints(ctx, "ngram_indexes", &n_idx);
    const float *weights = mcp_kattr_floats(ctx, "weights", &n_weights);
    tfidf_pool pool;
    memset(&pool, 0, sizeof(pool));
    pool.strings = is_str;
    if (is_str) {
        const mcp_attr *ps = mcp_kattr(ctx, "pool_strings");
        if (!ps || ps->type != MCP_ATTR_STRINGS)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'pool_strings' is required for string input");
        pool.strs = ps->strings;
        pool_size = ps->count;
    } else {
        pool.ints = mcp_kattr_ints(ctx, "pool_int64s", &pool_size);
        if (!mcp_kattr(ctx, "pool_int64s"))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'pool_int64s' is required for integer input");
    }

    /* Count the n-grams of every length and check the layout. */
    int64_t n_grams = 0;
    for (int64_t l = 0; l < n_counts; l++) {
        int64_t start = counts[l], end = l + 1 < n_counts ? counts[l + 1] : pool_size;
        if (start < 0 || end < start || end > pool_size || (end - start) % (l + 1) != 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'ngram_counts' entry %lld does not fit the pool",
                             (long long)l);
        n_grams += (end - start) / (l + 1);
    }
    if (n_idx != n_grams)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'ngram_indexes' has %lld entries, the pool has %lld n-grams",
                         (long long)n_idx, (long long)n_grams);
    int64_t out_size = 0;
    for (int64_t i = 0; i < n_idx; i++) {
        if (indexes[i] < 0 || indexes[i] >= (INT64_C(1) << 40))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'ngram_indexes' entry %lld is %lld", (long long)i,
                             (long long)indexes[i]);
        if (indexes[i] + 1 > out_size) out_size = indexes[i] + 1;
    }
    /* Weights are looked up by output position, as onnxruntime does. */
    if (weights && n_weights < out_size)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'weights' has %lld entries, need %lld", (long long)n_weights,
                         (long long)out_size);

    int64_t rows = X->rank == 2 ? X->dims[0] : 1;
    int64_t C = X->dims[X->rank - 1];
    int64_t odims[2];
    if (X->rank == 2) {
        odims[0] = rows;
        odims[1] = out_size;
    } else {
        odims[0] = out_size;
    }
    mcp_tensor *Y = mcp_kout(ctx, 0, MCP_DTYPE_FLOAT, X->rank, odims);
    if (!Y) return MCP_STATUS_OUT_OF_MEMORY;
    if (n_grams == 0 || rows == 0 || C == 0) return MCP_STATUS_OK;

    uint64_t n_slots = 2;
    while (n_slots < (uint64_t)n_grams * 2) n_slots <<= 1;
    size_t bytes = (size_t)n_grams * 2 * sizeof(int64_t) + (size_t)n_slots * sizeof(int64_t) +
                   (size_t)out_size * sizeof(double);
    char *mem = mcp_calloc(1, bytes);
    if (!mem) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory for the n-gram pool");
    pool.gram_len = (int64_t *)mem;
    pool.gram_off = pool.gram_len + n_grams;
    pool.slots = pool.gram_off + n_grams;
    pool.mask = n_slots - 1;
    pool.n_grams = n_grams;
    double *freq = (double *)(pool.slots + n_slots);

    int64_t id = 0;
    for (int64_t l = 0; l < n_counts; l++) {
        int64_t len = l + 1, start = counts[l];
        int64_t end = l + 1 < n_counts ? counts[l + 1] : pool_size;
        for (int64_t off = start; off < end; off += len, id++) {
            pool.gram_len[id] = len;
            pool.gram_off[id] = off;
            uint64_t h = TFIDF_FNV_OFFSET;
            for (int64_t k = 0; k < len; k++)
                h = is_str ? tfidf_hash_str(h, pool.strs[off + k] ? pool.strs[off + k] : "")
                           : tfidf_hash_int(h, pool.ints[off + k]);
            uint64_t s = h & pool.mask;
            while (pool.slots[s] != 0) s = (s + 1) & pool.mask;
            pool.slots[s] = id + 1;
        }
    }

    for (int64_t row = 0; row < rows; row++) {
        int64_t row_off = row * C;
        for (int64_t i = 0; i < out_size; i++) freq[i] = 0.0;
        for (int64_t skip = 0; skip <= max_skip; skip++) {
            int64_t stride = skip + 1;
            /* Unigrams do not depend on the skip; count them once. */
            int64_t lo = skip > 0 && min_n == 1 ? 2 : min_n;
            if (lo > max_n) break;
            for (int64_t pos = 0; pos < C; pos++) {
                uint64_t h = TFIDF_FNV_OFFSET;
                for (int64_t len = 1; len <= max_n; len++) {
                    int64_t idx = pos + (len - 1) * stride;
                    if (idx >= C) break;
                    if (is_str) {
                        const char *tok = ((char *const *)X->data)[row_off + idx];
                        h = tfidf_hash_str(h, tok ? tok : "");
                    } else {
                        h = tfidf_hash_int(h, mcp_tensor_get_i64(X, row_off + idx));
                    }
                    if (len < lo) continue;
                    for (uint64_t s = h & pool.mask; pool.slots[s] != 0; s = (s + 1) & pool.mask) {
                        int64_t g = pool.slots[s] - 1;
                        if (tfidf_equal(&pool, g, X, row_off, pos, stride, len)) {
                            freq[indexes[g]] += 1.0;
                            break;
                        }
                    }
                }
            }
        }
        for (int64_t i = 0; i < out_size; i++) {
            double f = freq[i], v = 0.0;
            if (f > 0.0) {
                double w = weights ? (double)weights[i] : 1.0;
                v = mode == 0 ? f : (mode == 1 ? w : f * w);
            }
            mcp_tensor_set_f64(Y, row * out_size + i, v);
        }
    }
    mcp_free(mem);
    return MCP_STATUS_OK;
}
