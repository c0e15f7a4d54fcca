/*
 * Per-tenant quality of service (see qos.h): admission against a tenant's
 * limits, and the weighted-fair-queuing clock.
 *
 * Both keep per-tenant state in the same kind of table: open addressing
 * with linear probing over fixed-size entries whose first bytes are the
 * tenant's name. Entries are never removed (tenants come from the
 * configuration, so there are few), which keeps probing free of
 * tombstones. The table grows by doubling while at most half full, up to
 * MCP_QOS_MAX_TENANTS named tenants. The anonymous tenant "" has an entry
 * of its own outside the table, and it is also the overflow entry: a
 * tenant first seen once the table holds MCP_QOS_MAX_TENANTS others (or
 * when growing it runs out of memory, or whose name is longer than
 * MCP_AUTH_TENANT_MAX bytes) shares that entry, and so its buckets, its
 * in-flight count and its fair-queuing finish tag, with the anonymous
 * callers. Messages still name the tenant the caller gave.
 */
#include "serve/qos.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NAME_CAP (MCP_AUTH_TENANT_MAX + 1)
#define TABLE_MIN 16 /* entries of a table's first allocation; a power of two */
/* A retry-after beyond this many seconds is reported as this (a rate so
 * small that the wait does not fit an integer is a configuration error,
 * not something to compute exactly). */
#define RETRY_MAX_S 2147483647.0

/* ---- the tenant table ---- */

typedef struct tenant_table {
    unsigned char *slots; /* cap entries of `size` bytes; an entry whose name is "" is free */
    size_t size;
    uint32_t cap, n;
    void *overflow;       /* the anonymous tenant's entry, shared past the bound */
    bool spilled;         /* some named tenant was sent to the overflow entry */
} tenant_table;

static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static char *table_slot(const tenant_table *t, uint32_t i) { return (char *)(t->slots + (size_t)i * t->size); }

/* The free slot or the entry of `name` in slots of capacity cap. */
static uint32_t table_probe(const tenant_table *t, const char *name, size_t len)
{
    uint32_t mask = t->cap - 1, i = (uint32_t)name_hash(name, len) & mask;
    for (;;) {
        const char *e = table_slot(t, i);
        if (!e[0] || strcmp(e, name) == 0) return i;
        i = (i + 1) & mask;
    }
}

static bool table_grow(tenant_table *t)
{
    uint32_t cap = t->cap ? t->cap * 2 : TABLE_MIN;
    tenant_table bigger = *t;
    bigger.slots = mcp_calloc(cap, t->size);
    if (!bigger.slots) return false;
    bigger.cap = cap;
    for (uint32_t i = 0; i < t->cap; i++) {
        const char *e = table_slot(t, i);
        if (e[0]) memcpy(table_slot(&bigger, table_probe(&bigger, e, strlen(e))), e, t->size);
    }
    mcp_free(t->slots);
    *t = bigger;
    return true;
}

/* The entry of `name` ("" or NULL: the anonymous tenant). With insert, a
 * tenant not seen before gets a zeroed entry (or the overflow entry, see
 * above); without, the overflow entry once tenants spilled there (it may
 * be this one's), else NULL. Growing invalidates pointers to other
 * entries. */
static void *table_get(tenant_table *t, const char *name, bool insert)
{
    size_t len = name ? strnlen(name, NAME_CAP) : 0;
    if (len == 0 || len >= NAME_CAP) return t->overflow;
    if (t->cap) {
        char *e = table_slot(t, table_probe(t, name, len));
        if (e[0]) return e;
    }
    if (!insert) return t->spilled ? t->overflow : NULL;
    if (t->n >= MCP_QOS_MAX_TENANTS || ((t->n + 1) * 2 > t->cap && !table_grow(t))) {
        t->spilled = true;
        return t->overflow;
    }
    char *e = table_slot(t, table_probe(t, name, len));
    memcpy(e, name, len + 1);
    t->n++;
    return e;
}

/* ---- admission ---- */

typedef struct qos_tenant {
    char name[NAME_CAP]; /* first: the table's key */
    bool rate_started, gen_started;
    double rate_level;   /* requests the rate bucket holds */
    int64_t rate_ns;     /* when it was last filled */
    double gen_level;    /* generated tokens the token bucket holds; below 0, a debt */
    int64_t gen_ns;
    int64_t in_flight;
} qos_tenant;

struct mcp_qos {
    pthread_mutex_t mu;
    tenant_table tab;
    qos_tenant anon;
};

mcp_qos *mcp_qos_create(void)
{
    mcp_qos *q = mcp_calloc(1, sizeof *q);
    if (!q) return NULL;
    pthread_mutex_init(&q->mu, NULL);
    q->tab.size = sizeof(qos_tenant);
    q->tab.overflow = &q->anon;
    return q;
}

void mcp_qos_destroy(mcp_qos *q)
{
    if (!q) return;
    pthread_mutex_destroy(&q->mu);
    mcp_free(q->tab.slots);
    mcp_free(q);
}

static bool positive(double x) { return x > 0 && isfinite(x); }

/* A bucket of depth cap that fills at rate per second: full when first
 * used (or used again after its limit was off), topped up for the time
 * since it was last filled. A clock that went back adds nothing. */
static void bucket_fill(bool *started, double *level, int64_t *at_ns, double rate, double cap, int64_t now_ns)
{
    if (!*started) {
        *started = true;
        *level = cap;
        *at_ns = now_ns;
        return;
    }
    if (now_ns > *at_ns) {
        *level += (double)(now_ns - *at_ns) * 1e-9 * rate;
        *at_ns = now_ns;
    }
    if (*level > cap) *level = cap;
}

static int64_t retry_seconds(double s)
{
    if (!(s < RETRY_MAX_S)) return (int64_t)RETRY_MAX_S;
    int64_t r = (int64_t)ceil(s);
    return r < 1 ? 1 : r;
}

mcp_status mcp_qos_admit(mcp_qos *q, const char *tenant, const mcp_tenant_limits *lim, bool generate, int64_t now_ns,
                         int64_t *retry_after_s, mcp_err *err)
{
    MCP_ASSERT(q && retry_after_s);
    *retry_after_s = 0;
    const char *shown = tenant && tenant[0] ? tenant : "anonymous";
    pthread_mutex_lock(&q->mu);
    qos_tenant *t = table_get(&q->tab, tenant, true);
    /* Every check comes before anything is taken, so a refusal leaves
     * the tenant's state as it was (buckets only topped up). */
    if (lim && lim->max_concurrent > 0 && t->in_flight >= lim->max_concurrent) {
        pthread_mutex_unlock(&q->mu);
        *retry_after_s = 1;
        return mcp_err_set(err, MCP_STATUS_RESOURCE_EXHAUSTED,
                           "tenant '%s' is at its limit of %lld requests in flight; retry after 1 s", shown,
                           (long long)lim->max_concurrent);
    }
    if (lim && generate && positive(lim->tokens_per_s)) {
        bucket_fill(&t->gen_started, &t->gen_level, &t->gen_ns, lim->tokens_per_s, lim->tokens_per_s, now_ns);
        if (t->gen_level < 0) {
            int64_t s = retry_seconds(-t->gen_level / lim->tokens_per_s);
            pthread_mutex_unlock(&q->mu);
            *retry_after_s = s;
            return mcp_err_set(err, MCP_STATUS_RESOURCE_EXHAUSTED,
                               "tenant '%s' is over its rate of %g generated tokens/s; retry after %lld s", shown,
                               lim->tokens_per_s, (long long)s);
        }
    }
    if (lim && positive(lim->rps)) {
        /* A depth under one request would refuse everything. */
        double cap = positive(lim->burst) ? lim->burst : lim->rps;
        if (cap < 1) cap = 1;
        bucket_fill(&t->rate_started, &t->rate_level, &t->rate_ns, lim->rps, cap, now_ns);
        if (t->rate_level < 1) {
            int64_t s = retry_seconds((1 - t->rate_level) / lim->rps);
            pthread_mutex_unlock(&q->mu);
            *retry_after_s = s;
            return mcp_err_set(err, MCP_STATUS_RESOURCE_EXHAUSTED,
                               "tenant '%s' is over its rate of %g requests/s (burst %g); retry after %lld s", shown,
                               lim->rps, cap, (long long)s);
        }
        t->rate_level -= 1;
    } else {
        t->rate_started = false; /* no limit now: a limit set later starts full */
    }
    t->in_flight++;
    pthread_mutex_unlock(&q->mu);
    return MCP_STATUS_OK;
}

void mcp_qos_release(mcp_qos *q, const char *tenant)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    qos_tenant *t = table_get(&q->tab, tenant, false);
    /* A release without an admission is the caller's bug; it must not
     * make room for more than the limit later. */
    if (t && t->in_flight > 0) t->in_flight--;
    pthread_mutex_unlock(&q->mu);
}

void mcp_qos_charge_tokens(mcp_qos *q, const char *tenant, const mcp_tenant_limits *lim, int64_t n, int64_t now_ns)
{
    if (!q || !lim || n <= 0 || !positive(lim->tokens_per_s)) return;
    pthread_mutex_lock(&q->mu);
    qos_tenant *t = table_get(&q->tab, tenant, true);
    bucket_fill(&t->gen_started, &t->gen_level, &t->gen_ns, lim->tokens_per_s, lim->tokens_per_s, now_ns);
    t->gen_level -= (double)n;
    pthread_mutex_unlock(&q->mu);
}

int64_t mcp_qos_in_flight(mcp_qos *q, const char *tenant)
{
    if (!q) return 0;
    pthread_mutex_lock(&q->mu);
    const qos_tenant *t = table_get(&q->tab, tenant, false);
    int64_t n = t ? t->in_flight : 0;
    pthread_mutex_unlock(&q->mu);
    return n;
}

/* ---- weighted fair queuing ---- */

typedef struct wfq_tenant {
    char name[NAME_CAP]; /* first: the table's key */
    double finish;       /* the tag of its latest arrival */
} wfq_tenant;

struct mcp_wfq {
    double clock; /* the largest tag served */
    tenant_table tab;
    wfq_tenant anon;
};

mcp_wfq *mcp_wfq_create(void)
{
    /* The table is allocated when a named tenant first arrives: a queue
     * only anonymous callers use allocates nothing more. */
    mcp_wfq *w = mcp_calloc(1, sizeof *w);
    if (!w) return NULL;
    w->tab.size = sizeof(wfq_tenant);
    w->tab.overflow = &w->anon;
    return w;
}

void mcp_wfq_destroy(mcp_wfq *w)
{
    if (!w) return;
    mcp_free(w->tab.slots);
    mcp_free(w);
}

double mcp_wfq_tag(mcp_wfq *w, const char *tenant, double weight, double cost)
{
    if (!positive(weight)) weight = 1;
    if (!(cost > 0) || !isfinite(cost)) cost = 0;
    wfq_tenant *t = table_get(&w->tab, tenant, true);
    /* From the clock when the tenant was idle (no banked credit), else
     * right after its previous arrival: one tenant's tags never go down,
     * so its requests keep their arrival order. */
    double start = t->finish > w->clock ? t->finish : w->clock;
    t->finish = start + cost / weight;
    return t->finish;
}

void mcp_wfq_served(mcp_wfq *w, double tag)
{
    /* Never back: priorities may serve a larger tag before a smaller one. */
    if (tag > w->clock) w->clock = tag;
}
