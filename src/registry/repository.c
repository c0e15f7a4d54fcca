/*
 * The repository: model name -> current version. Loading happens outside
 * the table lock; making a version current is one pointer swap under it, so
 * requests in flight finish on the version they started on (they hold a
 * reference) while new ones see the new version.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <sys/stat.h>

#include "registry/registry.h"

typedef struct repo_entry {
    char *name;
    /* How to load this entry again by name (after an unload): */
    mcp_source_kind kind;
    char *source; /* descriptor file, Triton folder or model file; where a sent descriptor said it lives */
    char *text;   /* MCP_SOURCE_YAML_TEXT: the descriptor as sent */
    char *version; /* of the current version, or the one that failed */
    mcp_model_version *current; /* the primary */
    /* Other versions a Triton folder's policy serves (current is the highest). */
    mcp_model_version *also[64];
    int n_also;
    /* The rollout: a canary taking canary_weight percent, a shadow getting
     * copies of shadow_sample of requests, the replaced primary kept warm
     * for undo, and the name of the one before it once it is gone. */
    mcp_model_version *canary, *shadow, *previous;
    double canary_weight, shadow_sample;
    char previous_cold[MCP_ROLLOUT_VERSION_LEN];
    mcp_rollout_spec spec;
    mcp_route_watch *watch; /* of this canary and shadow */
    const mcp_model_version *watch_canary, *watch_shadow;
    struct route_table *table; /* published; the entry's reference */
    /* Unloaded by the memory policy, not by an operator: its next request
     * loads it again (a cold start). */
    bool evicted;
    int64_t last_used_ns; /* of its primary when it was evicted */
    mcp_model_state state;
    char reason[512];
    bool loading; /* one load per model at a time; other models load meanwhile */
    /* A load in progress: its phase (static text) and start, for the index. */
    const char *phase;
    int64_t load_start_us;
    /* The latest lifecycle transitions of its versions, a ring. */
    mcp_lifecycle_step history[MCP_LIFECYCLE_KEPT];
    int n_history, history_next;
} repo_entry;

/* Records a transition (mu held). */
static void note(repo_entry *e, const char *version, mcp_version_state state, const char *reason)
{
    mcp_lifecycle_step *s = &e->history[e->history_next];
    snprintf(s->version, sizeof s->version, "%.127s", version ? version : "");
    s->state = state;
    /* Wall time, taken once: the same transition reads the same every time. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->time_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    snprintf(s->reason, sizeof s->reason, "%.255s", reason ? reason : "");
    e->history_next = (e->history_next + 1) % MCP_LIFECYCLE_KEPT;
    if (e->n_history < MCP_LIFECYCLE_KEPT) e->n_history++;
}

struct route_table;
struct route_map;
static void table_release(struct route_table *t);
static void map_free(struct route_map *m);

struct mcp_repository {
    pthread_mutex_t mu;      /* guards entries and the index */
    pthread_cond_t load_cv;  /* an entry's load finished (with mu) */
    repo_entry *entries;
    int n, cap;
    /* Name -> entry: open addressing with linear probing over `slots`
     * (entry index + 1, 0 = empty), at most half full, rebuilt when an entry
     * goes away. Lookups are O(1) however many models there are. */
    int *slots;
    int n_slots;
    mcp_descriptor_defaults defaults;
    mcp_repository_hooks hooks;
    bool keep_previous;
    size_t memory_budget;
    /* The published route map and its readers (see "routes" below). */
    _Atomic(struct route_map *) map;
    atomic_uint epoch;
    atomic_int active[2];
    pthread_mutex_t grace_mu; /* one grace period at a time */
};

mcp_repository *mcp_repository_create(const mcp_descriptor_defaults *defaults)
{
    mcp_repository *r = mcp_calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->load_cv, NULL);
    pthread_mutex_init(&r->grace_mu, NULL);
    r->defaults = defaults ? *defaults : mcp_descriptor_defaults_default();
    r->keep_previous = true;
    return r;
}

void mcp_repository_set_keep_previous(mcp_repository *r, bool keep, size_t memory_budget)
{
    pthread_mutex_lock(&r->mu);
    r->keep_previous = keep;
    r->memory_budget = memory_budget;
    pthread_mutex_unlock(&r->mu);
}

void mcp_repository_set_hooks(mcp_repository *r, mcp_repository_hooks hooks) { r->hooks = hooks; }

const mcp_descriptor_defaults *mcp_repository_defaults(const mcp_repository *r) { return &r->defaults; }

static void retire(mcp_repository *r, mcp_model_version *v)
{
    if (!v) return;
    if (r->hooks.on_retire) r->hooks.on_retire(v, r->hooks.user);
    mcp_model_version_release(v);
}

void mcp_repository_destroy(mcp_repository *r)
{
    if (!r) return;
    map_free(atomic_exchange(&r->map, NULL));
    for (int i = 0; i < r->n; i++) {
        repo_entry *e = &r->entries[i];
        table_release(e->table);
        mcp_route_watch_release(e->watch);
        retire(r, e->current);
        retire(r, e->canary);
        retire(r, e->shadow);
        retire(r, e->previous);
        for (int k = 0; k < r->entries[i].n_also; k++) retire(r, r->entries[i].also[k]);
        mcp_free(r->entries[i].name);
        mcp_free(r->entries[i].source);
        mcp_free(r->entries[i].text);
        mcp_free(r->entries[i].version);
    }
    mcp_free(r->entries);
    mcp_free(r->slots);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->load_cv);
    pthread_mutex_destroy(&r->grace_mu);
    mcp_free(r);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Slot of `name`: where it is, or the empty slot where it would go. */
static int slot_of(const mcp_repository *r, const char *name)
{
    int mask = r->n_slots - 1;
    int i = (int)(name_hash(name) & (uint64_t)mask);
    while (r->slots[i] && strcmp(r->entries[r->slots[i] - 1].name, name) != 0) i = (i + 1) & mask;
    return i;
}

/* Rebuilds the index for at least `want` entries; false on out-of-memory
 * (the old index stays). */
static bool index_rebuild(mcp_repository *r, int want)
{
    int n = 16;
    while (n < 2 * want) n *= 2;
    int *slots = mcp_calloc((size_t)n, sizeof *slots);
    if (!slots) return false;
    mcp_free(r->slots);
    r->slots = slots;
    r->n_slots = n;
    for (int i = 0; i < r->n; i++) r->slots[slot_of(r, r->entries[i].name)] = i + 1;
    return true;
}

/* Finds or adds an entry; call with mu held. */
static repo_entry *entry_get(mcp_repository *r, const char *name, bool create)
{
    if (r->n_slots) {
        int k = r->slots[slot_of(r, name)];
        if (k) return &r->entries[k - 1];
    }
    if (!create) return NULL;
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 8;
        repo_entry *e = mcp_realloc(r->entries, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        r->entries = e;
        r->cap = cap;
    }
    if (2 * (r->n + 1) > r->n_slots && !index_rebuild(r, r->n + 1)) return NULL;
    repo_entry *e = &r->entries[r->n];
    memset(e, 0, sizeof *e);
    e->name = mcp_strdup(name);
    if (!e->name) return NULL;
    e->state = MCP_MODEL_UNAVAILABLE;
    snprintf(e->reason, sizeof e->reason, "not loaded");
    r->slots[slot_of(r, name)] = r->n + 1;
    r->n++;
    return e;
}

/* Removes an entry that serves nothing and has nothing to load from (a
 * failed load of a new name), so failed loads leave no trace; call with mu
 * held. The last entry takes its place. */
static void entry_remove(mcp_repository *r, repo_entry *e)
{
    MCP_ASSERT(!e->current && !e->table);
    mcp_route_watch_release(e->watch);
    mcp_free(e->name);
    mcp_free(e->source);
    mcp_free(e->text);
    mcp_free(e->version);
    int i = (int)(e - r->entries);
    r->entries[i] = r->entries[r->n - 1];
    r->n--;
    if (!index_rebuild(r, r->n)) {
        /* Keep lookups right without a new table: probe-free fallback. */
        mcp_free(r->slots);
        r->slots = NULL;
        r->n_slots = 0;
    }
}

static void set_str(char **dst, const char *src)
{
    char *c = src ? mcp_strdup(src) : NULL;
    mcp_free(*dst);
    *dst = c;
}

/* ---- routes: published tables that readers use without a lock ----
 *
 * Each entry's serving state is copied into an immutable route_table;
 * all of them form a route_map, published with one atomic exchange.
 * Readers announce themselves in one of two counters (by the parity of
 * the epoch), read the map, retain what they route to, and leave. A
 * writer that replaced the map moves the epoch on and waits until the old
 * parity's readers have left before it drops the old map: no reader can
 * still be looking at it then. Writers wait; readers never do. */

typedef struct route_table {
    atomic_int refs;
    char name[256];
    mcp_model_version *primary, *canary, *shadow, *previous;
    mcp_model_version *also[64];
    int n_also;
    uint64_t canary_below, shadow_below; /* of 2^53: the shares routed */
    mcp_route_watch *watch;
    atomic_uint_fast64_t seq; /* unkeyed requests routed */
} route_table;

typedef struct route_map {
    int n_slots; /* a power of two, at least twice the tables */
    route_table *slots[];
} route_map;

mcp_route_watch *mcp_route_watch_retain(mcp_route_watch *w)
{
    if (w) atomic_fetch_add(&w->refs, 1);
    return w;
}

void mcp_route_watch_release(mcp_route_watch *w)
{
    if (w && atomic_fetch_sub(&w->refs, 1) == 1) w->destroy(w);
}

static void table_release(route_table *t)
{
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    mcp_model_version_release(t->primary);
    mcp_model_version_release(t->canary);
    mcp_model_version_release(t->shadow);
    mcp_model_version_release(t->previous);
    for (int i = 0; i < t->n_also; i++) mcp_model_version_release(t->also[i]);
    mcp_route_watch_release(t->watch);
    mcp_free(t);
}

static mcp_model_version *keep(mcp_model_version *v) { return v ? mcp_model_version_retain(v) : NULL; }

static uint64_t share_below(double fraction)
{
    if (!(fraction > 0)) return 0;
    if (fraction >= 1) return (uint64_t)1 << 53;
    return (uint64_t)(fraction * 9007199254740992.0);
}

/* The entry's table as it stands now (mu held); NULL when it serves
 * nothing (or out of memory: requests then see the model as not ready
 * rather than a stale version). */
static route_table *table_build(mcp_repository *r, repo_entry *e)
{
    if (!e->current) return NULL;
    route_table *t = mcp_calloc(1, sizeof *t);
    if (!t) return NULL;
    atomic_init(&t->refs, 1);
    snprintf(t->name, sizeof t->name, "%s", e->name);
    t->primary = keep(e->current);
    t->canary = keep(e->canary);
    t->shadow = keep(e->shadow);
    t->previous = keep(e->previous);
    for (int i = 0; i < e->n_also; i++) t->also[t->n_also++] = keep(e->also[i]);
    t->canary_below = e->canary ? share_below(e->canary_weight / 100.0) : 0;
    t->shadow_below = e->shadow ? share_below(e->shadow_sample) : 0;
    /* One watch per experiment: kept while its canary and shadow stay. */
    if ((e->canary || e->shadow) && (e->watch_canary != e->canary || e->watch_shadow != e->shadow || !e->watch)) {
        mcp_route_watch_release(e->watch);
        e->watch = r->hooks.on_route ? r->hooks.on_route(e->name, &e->spec, e->current, e->canary, e->shadow, r->hooks.user)
                                     : NULL;
        e->watch_canary = e->canary;
        e->watch_shadow = e->shadow;
    } else if (!e->canary && !e->shadow) {
        mcp_route_watch_release(e->watch);
        e->watch = NULL;
        e->watch_canary = e->watch_shadow = NULL;
    }
    t->watch = mcp_route_watch_retain(e->watch);
    return t;
}

static route_map *map_build(mcp_repository *r)
{
    int n = 16;
    while (n < 2 * r->n) n *= 2;
    route_map *m = mcp_calloc(1, sizeof *m + (size_t)n * sizeof m->slots[0]);
    if (!m) return NULL;
    m->n_slots = n;
    for (int i = 0; i < r->n; i++) {
        route_table *t = r->entries[i].table;
        if (!t) continue;
        int k = (int)(name_hash(t->name) & (uint64_t)(n - 1));
        while (m->slots[k]) k = (k + 1) & (n - 1);
        atomic_fetch_add(&t->refs, 1);
        m->slots[k] = t;
    }
    return m;
}

static void map_free(route_map *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_slots; i++) table_release(m->slots[i]);
    mcp_free(m);
}

/* Publishes the entry's new state (mu held); returns the map replaced,
 * for unpublished() once mu is released. e may be NULL (an entry went). */
static route_map *publish(mcp_repository *r, repo_entry *e)
{
    if (e) {
        route_table *t = table_build(r, e);
        table_release(e->table);
        e->table = t;
    }
    route_map *m = map_build(r);
    if (!m) {
        if (r->hooks.on_log) {
            char line[400];
            snprintf(line, sizeof line, "out of memory publishing the route table%s%.300s: requests see the last one",
                     e ? " of " : "", e ? e->name : "");
            r->hooks.on_log(r->hooks.user, line);
        }
        return NULL;
    }
    return atomic_exchange(&r->map, m);
}

/* Waits out the readers that may hold the old map, then frees it. */
static void unpublished(mcp_repository *r, route_map *old)
{
    if (!old) return;
    pthread_mutex_lock(&r->grace_mu);
    unsigned e = atomic_fetch_add(&r->epoch, 1);
    for (int spins = 0; atomic_load(&r->active[e & 1]) != 0; spins++) {
        if (spins < 100) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    pthread_mutex_unlock(&r->grace_mu);
    map_free(old);
}

static unsigned read_enter(mcp_repository *r)
{
    for (;;) {
        unsigned e = atomic_load(&r->epoch);
        atomic_fetch_add(&r->active[e & 1], 1);
        if (atomic_load(&r->epoch) == e) return e;
        atomic_fetch_sub(&r->active[e & 1], 1);
    }
}

static void read_leave(mcp_repository *r, unsigned e) { atomic_fetch_sub(&r->active[e & 1], 1); }

static route_table *map_find(route_map *m, const char *name)
{
    if (!m) return NULL;
    int mask = m->n_slots - 1;
    for (int k = (int)(name_hash(name) & (uint64_t)mask);; k = (k + 1) & mask) {
        route_table *t = m->slots[k];
        if (!t) return NULL;
        if (strcmp(t->name, name) == 0) return t;
    }
}

static mcp_model_version *table_version(route_table *t, const char *version)
{
    if (!version || !*version || strcmp(version, t->primary->version) == 0) return t->primary;
    mcp_model_version *const roles[] = {t->canary, t->shadow, t->previous};
    for (int i = 0; i < 3; i++)
        if (roles[i] && strcmp(version, roles[i]->version) == 0) return roles[i];
    for (int i = 0; i < t->n_also; i++)
        if (strcmp(version, t->also[i]->version) == 0) return t->also[i];
    return NULL;
}

/* A well-mixed 64-bit value of a key (FNV-1a, then a finalizer). */
static uint64_t key_mix(const char *key, uint64_t salt)
{
    uint64_t h = name_hash(key) ^ salt;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

bool mcp_repository_route(mcp_repository *r, const char *name, const char *key, mcp_route *out)
{
    memset(out, 0, sizeof *out);
    unsigned e = read_enter(r);
    route_table *t = map_find(atomic_load(&r->map), name);
    /* Without a canary or shadow there is nothing to decide: no counter
     * touched, no reference taken on the hot path. */
    if (t && (t->canary || t->shadow)) {
        uint64_t pick, copy;
        if (key && *key) {
            pick = key_mix(key, 0) >> 11;
            copy = key_mix(key, 0x5bd1e995u) >> 11;
        } else {
            /* Weyl sequences: n * phi and n * sqrt(2) (mod 1) spread any
             * run of requests evenly over [0, 1). */
            uint64_t n = atomic_fetch_add(&t->seq, 1);
            pick = (n * 0x9e3779b97f4a7c15ull) >> 11;
            copy = (n * 0x6a09e667f3bcc909ull) >> 11;
        }
        mcp_route_watch *w = t->watch;
        if (t->canary && pick < t->canary_below && !(w && atomic_load(&w->canary_off))) {
            out->v = mcp_model_version_retain(t->canary);
            out->role = MCP_ROUTE_CANARY;
        } else {
            out->v = mcp_model_version_retain(t->primary);
        }
        if (t->shadow && copy < t->shadow_below && !(w && atomic_load(&w->shadow_off)))
            out->shadow = mcp_model_version_retain(t->shadow);
        out->watch = mcp_route_watch_retain(w);
    }
    read_leave(r, e);
    return out->v != NULL;
}

void mcp_route_release(mcp_route *rt)
{
    mcp_model_version_release(rt->v);
    mcp_model_version_release(rt->shadow);
    mcp_route_watch_release(rt->watch);
    memset(rt, 0, sizeof *rt);
}

typedef struct load_phase_ctx {
    mcp_repository *r;
    const char *name;
} load_phase_ctx;

/* The phase a load is in, shown by the index while it lasts. */
static void load_phase(void *user, const char *phase)
{
    load_phase_ctx *pc = user;
    pthread_mutex_lock(&pc->r->mu);
    repo_entry *e = entry_get(pc->r, pc->name, false);
    if (e) {
        e->phase = phase;
        if (!e->load_start_us) e->load_start_us = mcp_now_us();
    }
    pthread_mutex_unlock(&pc->r->mu);
}

/* Versions leaving every role, retired once mu is released. */
typedef struct gone_list {
    mcp_model_version *v[72];
    int n;
} gone_list;

static void gone_add(gone_list *g, mcp_model_version *v)
{
    if (v && g->n < (int)(sizeof g->v / sizeof g->v[0])) g->v[g->n++] = v;
}

static void gone_retire(mcp_repository *r, gone_list *g)
{
    for (int i = 0; i < g->n; i++) retire(r, g->v[i]);
    g->n = 0;
}

/* The version in *slot leaves its role (mu held): noted Draining with
 * why, retired once mu is released. */
static void drop(repo_entry *e, mcp_model_version **slot, const char *why, gone_list *gone)
{
    if (!*slot) return;
    note(e, (*slot)->version, MCP_VERSION_DRAINING, why);
    gone_add(gone, *slot);
    *slot = NULL;
}

static size_t entry_bytes(const repo_entry *e)
{
    size_t b = 0;
    const mcp_model_version *const roles[] = {e->current, e->canary, e->shadow, e->previous};
    for (int i = 0; i < 4; i++) b += roles[i] ? mcp_model_version_bytes(roles[i]) : 0;
    for (int i = 0; i < e->n_also; i++) b += mcp_model_version_bytes(e->also[i]);
    return b;
}

static size_t loaded_bytes(const mcp_repository *r)
{
    size_t b = 0;
    for (int i = 0; i < r->n; i++) b += entry_bytes(&r->entries[i]);
    return b;
}

/* The primary is replaced by v (mu held): the old one is kept warm for
 * undo while the policy allows, and the one before it goes. */
static void replace_primary(mcp_repository *r, repo_entry *e, mcp_model_version *v, const char *why, gone_list *gone)
{
    mcp_model_version *old = e->current;
    e->current = v;
    if (!old || old == v) return;
    /* (The same version loaded again is no previous one.) */
    bool warm = r->keep_previous && strcmp(old->version, v->version) != 0 &&
                (!r->memory_budget || loaded_bytes(r) <= r->memory_budget);
    if (e->previous && e->previous != v) {
        snprintf(e->previous_cold, sizeof e->previous_cold, "%s", e->previous->version);
        note(e, e->previous->version, MCP_VERSION_DRAINING, "replaced");
        gone_add(gone, e->previous);
    }
    e->previous = NULL;
    if (warm) {
        (void)why; /* it stays Ready, out of the routes */
        e->previous = old;
        e->previous_cold[0] = '\0';
    } else {
        snprintf(e->previous_cold, sizeof e->previous_cold, "%s", old->version);
        note(e, old->version, MCP_VERSION_DRAINING, "replaced");
        gone_add(gone, old);
    }
}

/* Takes v out of whichever role it has (mu held); true if it had one. */
static bool take_role(repo_entry *e, const mcp_model_version *v)
{
    mcp_model_version **const roles[] = {&e->canary, &e->shadow, &e->previous};
    for (int i = 0; i < 3; i++)
        if (*roles[i] == v) {
            *roles[i] = NULL;
            if (i == 0) e->canary_weight = 0;
            if (i == 1) e->shadow_sample = 0;
            return true;
        }
    return false;
}

/* The loaded version of the entry called `version` outside the primary
 * (mu held). */
static mcp_model_version *entry_loaded(repo_entry *e, const char *version)
{
    mcp_model_version *const roles[] = {e->canary, e->shadow, e->previous};
    for (int i = 0; i < 3; i++)
        if (roles[i] && strcmp(roles[i]->version, version) == 0) return roles[i];
    return NULL;
}

typedef enum load_role { ROLE_PRIMARY, ROLE_CANARY, ROLE_SHADOW } load_role;

/* What a descriptor's rollout section makes of its version, checked
 * against the entry before anything loads (mu held). */
static mcp_status role_check(const repo_entry *e, const mcp_descriptor *d, load_role *role, mcp_err *err)
{
    const mcp_rollout_spec *ro = &d->rollout;
    *role = ROLE_PRIMARY;
    if (!ro->present) return MCP_STATUS_OK;
    if (!strcmp(ro->canary, d->version)) *role = ROLE_CANARY;
    else if (!strcmp(ro->shadow, d->version)) *role = ROLE_SHADOW;
    const char *what = *role == ROLE_CANARY ? "canary" : "shadow";
    if (*role != ROLE_PRIMARY) {
        if (!e->current)
            return mcp_err_set(err, MCP_STATUS_FAILED_PRECONDITION,
                               "rollout: model '%s' serves no version yet, so %s cannot be its %s; apply a primary first",
                               e->name, d->version, what);
        if (ro->primary[0] && strcmp(ro->primary, e->current->version) != 0)
            return mcp_err_set(err, MCP_STATUS_FAILED_PRECONDITION,
                               "rollout.primary is %s but model '%s' serves %s", ro->primary, e->name, e->current->version);
        if (!strcmp(d->version, e->current->version))
            return mcp_err_set(err, MCP_STATUS_FAILED_PRECONDITION,
                               "rollout: %s is the primary of model '%s'; a %s needs a version of its own", d->version,
                               e->name, what);
    }
    /* The other role the section names must be a version loaded already. */
    const char *other = *role == ROLE_SHADOW ? ro->canary : ro->shadow;
    const char *other_what = *role == ROLE_SHADOW ? "canary" : "shadow";
    if (*role == ROLE_PRIMARY && ro->canary[0] && (!e->canary || strcmp(e->canary->version, ro->canary)))
        return mcp_err_set(err, MCP_STATUS_FAILED_PRECONDITION,
                           "rollout.canary %s is not the canary of model '%s' (%s); apply it as the canary first",
                           ro->canary, e->name, e->canary ? e->canary->version : "none");
    if (other[0] && !(*role == ROLE_PRIMARY && other == ro->canary)) {
        const mcp_model_version *have = *role == ROLE_SHADOW ? e->canary : e->shadow;
        if (!have || strcmp(have->version, other))
            return mcp_err_set(err, MCP_STATUS_FAILED_PRECONDITION,
                               "rollout.%s %s is not the %s of model '%s' (%s); apply it as the %s first", other_what,
                               other, other_what, e->name, have ? have->version : "none", other_what);
    }
    return MCP_STATUS_OK;
}

/* Whether the new primary must keep the clients' contract: a canary or
 * shadow always; a primary unless its major version changed (v1.x -> v2.0
 * may change inputs and outputs) or versions are folder numbers. */
static bool must_match(const mcp_model_version *cur, const mcp_model_version *v, load_role role)
{
    if (role != ROLE_PRIMARY) return true;
    if (!cur || !cur->desc || !v->desc || !cur->version || cur->version[0] != 'v' || v->version[0] != 'v') return false;
    return cur->desc->semver[0] == v->desc->semver[0];
}

static mcp_status load_and_swap(mcp_repository *r, mcp_descriptor *desc, mcp_source_kind kind, const char *source,
                                const char *text, mcp_err *err)
{
    char name[256], version[64];
    snprintf(name, sizeof name, "%s", desc->name);
    snprintf(version, sizeof version, "%s", desc->version);
    load_role role = ROLE_PRIMARY;
    mcp_status pre = MCP_STATUS_OK;
    pthread_mutex_lock(&r->mu);
    /* The model's own lock: a second load of this name waits for the first;
     * loads of other models do not. (Looked up again after each wait: a
     * failed first load removes its entry.) */
    repo_entry *e;
    while ((e = entry_get(r, name, true)) && e->loading) pthread_cond_wait(&r->load_cv, &r->mu);
    if (e) {
        pre = role_check(e, desc, &role, err);
        if (pre == MCP_STATUS_OK) {
            e->loading = true;
            if (!e->current) e->state = MCP_MODEL_LOADING;
            note(e, version, MCP_VERSION_REGISTERED, NULL);
            note(e, version, MCP_VERSION_LOADING, NULL);
            /* Files on the server's disk stay known even when they fail to
             * load (a load by name retries them); what came over the
             * network is remembered only once it loads. */
            if (role == ROLE_PRIMARY && (kind == MCP_SOURCE_YAML_FILE || kind == MCP_SOURCE_TRITON)) {
                set_str(&e->source, source);
                set_str(&e->text, NULL);
                e->kind = kind;
            }
        } else if (!e->current && e->kind == MCP_SOURCE_NONE) {
            entry_remove(r, e);
        }
    }
    route_map *old_map = pre != MCP_STATUS_OK && e ? publish(r, NULL) : NULL;
    pthread_mutex_unlock(&r->mu);
    unpublished(r, old_map);
    if (!e || pre != MCP_STATUS_OK) {
        mcp_descriptor_free(desc);
        return e ? pre : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    mcp_rollout_spec spec = desc->rollout;

    mcp_model_version *v = NULL;
    load_phase_ctx pc = {r, name};
    int64_t t_load = mcp_now_ns();
    int n_also = kind == MCP_SOURCE_TRITON && role == ROLE_PRIMARY ? desc->n_also : 0;
    int64_t also_versions[64];
    if (n_also) memcpy(also_versions, desc->also, sizeof(int64_t) * (size_t)n_also);
    mcp_status st = mcp_model_version_load_phased(desc, &r->defaults, load_phase, &pc, &v, err);
    if (st == MCP_STATUS_OK && r->hooks.on_ready) {
        st = r->hooks.on_ready(v, r->hooks.user, err);
        if (st != MCP_STATUS_OK) {
            mcp_model_version_release(v);
            v = NULL;
        }
    }
    /* The other versions of a Triton folder's policy, each from its own
     * folder; all of them or none. */
    mcp_model_version *also[64];
    int got = 0;
    for (int i = 0; st == MCP_STATUS_OK && i < n_also; i++) {
        mcp_descriptor_defaults dd = r->defaults;
        dd.pin_version = also_versions[i];
        mcp_diags diags = {0};
        mcp_descriptor *d2 = NULL;
        st = mcp_descriptor_load_triton(source, &dd, &d2, &diags);
        if (st != MCP_STATUS_OK) {
            char report[600];
            mcp_diags_format(&diags, source, report, sizeof report);
            mcp_err_set(err, st, "version %lld: %s", (long long)also_versions[i], report);
        }
        mcp_diags_clear(&diags);
        if (st == MCP_STATUS_OK) st = mcp_model_version_load_phased(d2, &r->defaults, load_phase, &pc, &also[got], err);
        if (st == MCP_STATUS_OK && r->hooks.on_ready && (st = r->hooks.on_ready(also[got], r->hooks.user, err)) != MCP_STATUS_OK)
            mcp_model_version_release(also[got]);
        else if (st == MCP_STATUS_OK)
            got++;
    }
    gone_list gone = {0};
    if (st != MCP_STATUS_OK) {
        for (int i = 0; i < got; i++) gone_add(&gone, also[i]);
        gone_add(&gone, v);
        got = 0;
        v = NULL;
    }
    int64_t t_verify = mcp_now_ns();
    pthread_mutex_lock(&r->mu);
    e = entry_get(r, name, false); /* the array may have moved */
    e->phase = NULL;
    e->load_start_us = 0;
    e->loading = false;
    pthread_cond_broadcast(&r->load_cv);
    /* Verify: the new version must serve the current one's clients. */
    char why[900];
    if (st == MCP_STATUS_OK && e->current && must_match(e->current, v, role) &&
        !mcp_model_io_compatible(e->current, v, why, sizeof why)) {
        st = mcp_err_set(err, MCP_STATUS_FAILED_PRECONDITION,
                         "version %s cannot %s %s: its inputs and outputs differ (%s)%s", version,
                         role == ROLE_PRIMARY ? "replace" : role == ROLE_CANARY ? "be the canary of" : "shadow",
                         e->current->version, why,
                         role == ROLE_PRIMARY ? "; a new major version may change them" : "");
        for (int i = 0; i < got; i++) gone_add(&gone, also[i]);
        gone_add(&gone, v);
        got = 0;
        v = NULL;
    }
    int64_t t_swap = mcp_now_ns();
    char timing[240];
    snprintf(timing, sizeof timing, "loaded and warmed in %.1f ms, verified in %.0f us", (double)(t_verify - t_load) / 1e6,
             (double)(t_swap - t_verify) / 1e3);
    /* The topology against the version it joins. */
    if (st == MCP_STATUS_OK && e->current && e->current->fingerprint[0] && v->fingerprint[0]) {
        size_t n = strlen(timing);
        bool same = !strcmp(e->current->fingerprint, v->fingerprint);
        snprintf(timing + n, sizeof timing - n, "; topology %s %s", same ? "same as" : "changed from", e->current->version);
    }
    if (st == MCP_STATUS_OK && v->precision && v->desc->precision && strcmp(v->precision, v->desc->precision) != 0) {
        size_t n = strlen(timing);
        snprintf(timing + n, sizeof timing - n, "; precision %s runs as %s on this CPU", v->desc->precision, v->precision);
    }
    if (st == MCP_STATUS_OK && v->load_note) {
        size_t n = strlen(timing);
        snprintf(timing + n, sizeof timing - n, "; compiled model not used as compiled (see load_note)");
    }
    if (st == MCP_STATUS_OK) {
        if (role == ROLE_PRIMARY) {
            for (int i = 0; i < e->n_also; i++) gone_add(&gone, e->also[i]);
            memcpy(e->also, also, sizeof(also[0]) * (size_t)got);
            e->n_also = got;
            /* A plain apply is a whole rollout: canary and shadow stop,
             * unless the section keeps them. */
            bool keep_canary = spec.present && spec.canary[0] && e->canary && !strcmp(spec.canary, e->canary->version);
            bool keep_shadow = spec.present && spec.shadow[0] && e->shadow && !strcmp(spec.shadow, e->shadow->version);
            if (!keep_canary && e->canary) {
                drop(e, &e->canary, "rollout replaced", &gone);
            }
            if (!keep_shadow && e->shadow) {
                drop(e, &e->shadow, "rollout replaced", &gone);
            }
            if (keep_canary) e->canary_weight = spec.canary_weight;
            if (keep_shadow) e->shadow_sample = spec.shadow_sample;
            replace_primary(r, e, v, "previous: kept warm for undo", &gone);
            note(e, version, MCP_VERSION_READY, timing);
        } else {
            mcp_model_version **slot = role == ROLE_CANARY ? &e->canary : &e->shadow;
            drop(e, slot, "rollout replaced", &gone);
            *slot = v;
            if (role == ROLE_CANARY) e->canary_weight = spec.canary_weight;
            else e->shadow_sample = spec.shadow_sample;
            /* Named beside it: the other role's amount. */
            if (role == ROLE_CANARY && spec.shadow[0] && e->shadow) e->shadow_sample = spec.shadow_sample;
            if (role == ROLE_SHADOW && spec.canary[0] && e->canary) e->canary_weight = spec.canary_weight;
            char role_why[sizeof timing + 16];
            snprintf(role_why, sizeof role_why, "%s; %s", role == ROLE_CANARY ? "canary" : "shadow", timing);
            note(e, version, MCP_VERSION_READY, role_why);
        }
        if (spec.present) e->spec = spec;
        else if (role == ROLE_PRIMARY) e->spec = mcp_rollout_spec_default();
        e->state = MCP_MODEL_READY;
        e->reason[0] = '\0';
        e->evicted = false;
        if (role == ROLE_PRIMARY) {
            set_str(&e->version, version);
            if (kind != MCP_SOURCE_NONE) {
                set_str(&e->source, source);
                set_str(&e->text, text);
                e->kind = kind;
            }
        }
    } else {
        /* A failed reload leaves the current version serving. A failed
         * first load of a name with nothing to load it from again leaves
         * no entry: the caller got the reason in its answer. */
        if (!e->current && e->kind == MCP_SOURCE_NONE) {
            entry_remove(r, e);
            e = NULL;
        } else {
            if (!e->current) e->state = MCP_MODEL_UNAVAILABLE;
            /* The reason is shown to every caller: no host paths in it. */
            char shown[sizeof e->reason - 16];
            mcp_model_roots_redact(r->defaults.roots, err && err->buf ? err->buf : mcp_status_str(st), shown, sizeof shown);
            snprintf(e->reason, sizeof e->reason, "load failed: %s", shown);
            note(e, version, MCP_VERSION_FAILED, shown);
            if (!e->current) set_str(&e->version, version);
        }
    }
    old_map = publish(r, e);
    pthread_mutex_unlock(&r->mu);
    unpublished(r, old_map);
    if (st == MCP_STATUS_OK) {
        /* The swap: publishing the table and waiting out its readers. */
        double us = (double)(mcp_now_ns() - t_swap) / 1e3;
        pthread_mutex_lock(&r->mu);
        e = entry_get(r, name, false);
        int last = e ? (e->history_next + MCP_LIFECYCLE_KEPT - 1) % MCP_LIFECYCLE_KEPT : 0;
        if (e && e->history[last].state == MCP_VERSION_READY && !strcmp(e->history[last].version, version)) {
            size_t n = strlen(e->history[last].reason);
            snprintf(e->history[last].reason + n, sizeof e->history[last].reason - n, ", swapped in %.0f us", us);
        }
        pthread_mutex_unlock(&r->mu);
    }
    gone_retire(r, &gone);
    return st;
}

mcp_status mcp_repository_apply(mcp_repository *r, mcp_descriptor *desc, mcp_err *err)
{
    return mcp_repository_apply_from(r, desc, MCP_SOURCE_NONE, NULL, NULL, err);
}

mcp_status mcp_repository_apply_from(mcp_repository *r, mcp_descriptor *desc, mcp_source_kind kind, const char *source,
                                     const char *text, mcp_err *err)
{
    return load_and_swap(r, desc, kind, source, text, err);
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

mcp_status mcp_repository_scan(mcp_repository *r, const char *dir, bool load_all, mcp_diags *diags)
{
    DIR *d = opendir(dir);
    if (!d) {
        mcp_diags_add(diags, "", 0, 0, "cannot open model repository '%s'", dir);
        return MCP_STATUS_IO_ERROR;
    }
    /* Every entry of the folder, however many (no silent cap). */
    char **names = NULL;
    int n = 0, cap = 0;
    bool oom = false;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            int ncap = cap ? cap * 2 : 64;
            char **grown = mcp_realloc(names, (size_t)ncap * sizeof *grown);
            if (!grown) {
                oom = true;
                break;
            }
            names = grown;
            cap = ncap;
        }
        if (!(names[n] = mcp_strdup(de->d_name))) {
            oom = true;
            break;
        }
        n++;
    }
    closedir(d);
    if (oom) {
        for (int i = 0; i < n; i++) mcp_free(names[i]);
        mcp_free(names);
        mcp_diags_add(diags, "", 0, 0, "out of memory listing model repository '%s'", dir);
        return MCP_STATUS_OUT_OF_MEMORY;
    }
    if (n) qsort(names, (size_t)n, sizeof names[0], cmp_str);
    mcp_status result = MCP_STATUS_OK;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        bool is_triton = false;
        if (stat(path, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            char cfg[4200];
            snprintf(cfg, sizeof cfg, "%s/config.pbtxt", path);
            if (stat(cfg, &sb) != 0) continue;
            is_triton = true;
        } else if (!has_suffix(names[i], ".yaml") && !has_suffix(names[i], ".yml")) {
            continue;
        }
        mcp_descriptor *desc = NULL;
        mcp_status st = is_triton ? mcp_descriptor_load_triton(path, &r->defaults, &desc, diags)
                                  : mcp_descriptor_load_file(path, &r->defaults, &desc, diags);
        if (st != MCP_STATUS_OK) {
            result = st;
            continue;
        }
        if (load_all) {
            char msg[1024] = "";
            mcp_err err = {msg, sizeof msg};
            st = load_and_swap(r, desc, is_triton ? MCP_SOURCE_TRITON : MCP_SOURCE_YAML_FILE, path, NULL, &err);
            if (st != MCP_STATUS_OK) {
                mcp_diags_add(diags, "", 0, 0, "%s: %s", path, msg);
                result = st;
            }
        } else {
            pthread_mutex_lock(&r->mu);
            repo_entry *e = entry_get(r, desc->name, true);
            if (e) {
                set_str(&e->source, path);
                e->kind = is_triton ? MCP_SOURCE_TRITON : MCP_SOURCE_YAML_FILE;
                set_str(&e->version, desc->version);
            }
            pthread_mutex_unlock(&r->mu);
            mcp_descriptor_free(desc);
        }
    }
    for (int i = 0; i < n; i++) mcp_free(names[i]);
    mcp_free(names);
    return result;
}

mcp_status mcp_repository_load(mcp_repository *r, const char *name, mcp_err *err)
{
    char *source = NULL, *text = NULL;
    mcp_source_kind kind = MCP_SOURCE_NONE;
    bool known = false, loaded = false;
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    if (e) {
        known = true;
        kind = e->kind;
        loaded = e->current != NULL;
        source = e->source ? mcp_strdup(e->source) : NULL;
        text = e->text ? mcp_strdup(e->text) : NULL;
    }
    pthread_mutex_unlock(&r->mu);
    if (!known) return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "unknown model '%s'", name);
    if (kind == MCP_SOURCE_NONE) {
        mcp_free(source);
        mcp_free(text);
        if (loaded) return MCP_STATUS_OK;
        return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "model '%s' has no descriptor to load from; apply one", name);
    }
    /* Load it again from where it came from, whatever that was. */
    mcp_diags diags = {0};
    mcp_descriptor *desc = NULL;
    mcp_status st;
    const char *where = source ? source : "config";
    switch (kind) {
    case MCP_SOURCE_TRITON: st = mcp_descriptor_load_triton(source, &r->defaults, &desc, &diags); break;
    case MCP_SOURCE_YAML_FILE: st = mcp_descriptor_load_file(source, &r->defaults, &desc, &diags); break;
    case MCP_SOURCE_YAML_TEXT:
        st = mcp_descriptor_parse_yaml(text ? text : "", text ? strlen(text) : 0, source, &r->defaults, &desc, &diags);
        break;
    case MCP_SOURCE_TRITON_JSON:
        st = mcp_descriptor_from_triton_json(name, text ? text : "", text ? strlen(text) : 0, &r->defaults, &desc, &diags);
        break;
    case MCP_SOURCE_MODEL_FILE: {
        char msg[1024] = "";
        mcp_err e2 = {msg, sizeof msg};
        st = mcp_descriptor_for_model(source, &r->defaults, &desc, &e2);
        if (st != MCP_STATUS_OK) mcp_diags_add(&diags, "", 0, 0, "%s", msg);
        break;
    }
    default: st = MCP_STATUS_INTERNAL; break;
    }
    if (st == MCP_STATUS_OK && strcmp(desc->name, name) != 0) {
        mcp_diags_add(&diags, "name", 0, 0, "now names model '%s', not '%s'", desc->name, name);
        mcp_descriptor_free(desc);
        desc = NULL;
        st = MCP_STATUS_INVALID_ARGUMENT;
    }
    if (st != MCP_STATUS_OK) {
        char report[1024];
        mcp_diags_format(&diags, where, report, sizeof report);
        mcp_diags_clear(&diags);
        mcp_free(source);
        mcp_free(text);
        return mcp_err_set(err, st == MCP_STATUS_NOT_FOUND ? st : MCP_STATUS_INVALID_ARGUMENT, "%s", report);
    }
    mcp_diags_clear(&diags);
    st = load_and_swap(r, desc, kind, source, text, err);
    mcp_free(source);
    mcp_free(text);
    return st;
}

/* Unloads every version of the entry; with `evicted` (the memory policy,
 * when `expect` is still the primary) the entry says so in the same step,
 * so no request sees it unloaded but not evicted. */
static mcp_status unload_entry(mcp_repository *r, const char *name, const mcp_model_version *expect, const char *evicted,
                               mcp_err *err)
{
    gone_list gone = {0};
    route_map *old_map = NULL;
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    if (e && evicted && (e->current != expect || e->loading || e->kind == MCP_SOURCE_NONE)) {
        pthread_mutex_unlock(&r->mu);
        return mcp_err_set(err, MCP_STATUS_FAILED_PRECONDITION, "model '%s' changed, or cannot be loaded again", name);
    }
    if (e) {
        mcp_model_version **const roles[] = {&e->current, &e->canary, &e->shadow, &e->previous};
        for (int i = 0; i < 4; i++) drop(e, roles[i], evicted ? "evicted" : "unloaded", &gone);
        for (int i = 0; i < e->n_also; i++) gone_add(&gone, e->also[i]);
        e->n_also = 0;
        e->canary_weight = e->shadow_sample = 0;
        e->previous_cold[0] = '\0';
        e->state = MCP_MODEL_UNAVAILABLE;
        e->evicted = evicted != NULL;
        if (evicted) snprintf(e->reason, sizeof e->reason, "unloaded: %.400s; its next request loads it again", evicted);
        else snprintf(e->reason, sizeof e->reason, "unloaded");
        old_map = publish(r, e);
    }
    pthread_mutex_unlock(&r->mu);
    if (!e) return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "unknown model '%s'", name);
    unpublished(r, old_map);
    gone_retire(r, &gone);
    return MCP_STATUS_OK;
}

mcp_status mcp_repository_unload(mcp_repository *r, const char *name, mcp_err *err)
{
    return unload_entry(r, name, NULL, NULL, err);
}

void mcp_repository_note_unloaded(mcp_repository *r, const char *name, const char *version)
{
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    if (e) note(e, version, MCP_VERSION_UNLOADED, NULL);
    pthread_mutex_unlock(&r->mu);
}

int mcp_repository_lifecycle(mcp_repository *r, const char *name, mcp_lifecycle_step *out, int cap)
{
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    int n = -1;
    if (e) {
        n = 0;
        int first = (e->history_next - e->n_history + MCP_LIFECYCLE_KEPT) % MCP_LIFECYCLE_KEPT;
        for (int i = 0; i < e->n_history && n < cap; i++) out[n++] = e->history[(first + i) % MCP_LIFECYCLE_KEPT];
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

mcp_model_version *mcp_repository_get(mcp_repository *r, const char *name, const char *version)
{
    unsigned e = read_enter(r);
    route_table *t = map_find(atomic_load(&r->map), name);
    mcp_model_version *v = t ? table_version(t, version) : NULL;
    if (v) mcp_model_version_retain(v);
    read_leave(r, e);
    return v;
}

int mcp_repository_versions(mcp_repository *r, const char *name, char (*out)[64], int cap)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    if (e && e->current && n < cap) snprintf(out[n++], 64, "%s", e->current->version);
    for (int i = 0; e && e->current && i < e->n_also && n < cap; i++) snprintf(out[n++], 64, "%s", e->also[i]->version);
    if (e && e->canary && n < cap) snprintf(out[n++], 64, "%s", e->canary->version);
    pthread_mutex_unlock(&r->mu);
    return n;
}

int mcp_repository_index(mcp_repository *r, mcp_repository_entry **out)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    mcp_repository_entry *list = mcp_calloc((size_t)n + 1, sizeof *list);
    for (int i = 0; list && i < n; i++) {
        const repo_entry *e = &r->entries[i];
        list[i].name = mcp_strdup(e->name);
        list[i].version = mcp_strdup(e->version ? e->version : "");
        list[i].state = e->state;
        if (e->phase) {
            /* A load in progress says where it is: "loading: warm-up, 2.4 s". */
            char busy[600];
            snprintf(busy, sizeof busy, "loading: %s, %.1f s", e->phase, (double)(mcp_now_us() - e->load_start_us) / 1e6);
            list[i].reason = mcp_strdup(busy);
        } else {
            list[i].reason = mcp_strdup(e->reason);
        }
    }
    pthread_mutex_unlock(&r->mu);
    *out = list;
    return list ? n : 0;
}

void mcp_repository_entries_free(mcp_repository_entry *e, int n)
{
    for (int i = 0; e && i < n; i++) {
        mcp_free(e[i].name);
        mcp_free(e[i].version);
        mcp_free(e[i].reason);
    }
    mcp_free(e);
}

void mcp_repository_totals(mcp_repository *r, int *ready, size_t *bytes)
{
    *ready = 0;
    *bytes = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++)
        if (r->entries[i].current) {
            (*ready)++;
            *bytes += entry_bytes(&r->entries[i]);
        }
    pthread_mutex_unlock(&r->mu);
}

/* ---- rollout operations: each one change of the route table ---- */

/* The entry of a model that serves (mu held), or NULL with err set. */
static repo_entry *serving_entry(mcp_repository *r, const char *name, mcp_status *st, mcp_err *err)
{
    repo_entry *e = entry_get(r, name, false);
    if (!e) *st = mcp_err_set(err, MCP_STATUS_NOT_FOUND, "unknown model '%s'", name);
    else if (!e->current) *st = mcp_err_set(err, MCP_STATUS_UNAVAILABLE, "model '%s' serves no version (%s)", name, e->reason);
    return e && e->current ? e : NULL;
}

static mcp_status not_loaded(const repo_entry *e, const char *version, mcp_err *err)
{
    return mcp_err_set(err, MCP_STATUS_NOT_FOUND,
                       "model '%s' has no loaded version '%s' (primary %s%s%s%s%s%s%s); apply it first", e->name, version,
                       e->current->version, e->canary ? ", canary " : "", e->canary ? e->canary->version : "",
                       e->shadow ? ", shadow " : "", e->shadow ? e->shadow->version : "",
                       e->previous ? ", previous " : "", e->previous ? e->previous->version : "");
}

/* Ends a rollout operation: publish, then retire what left (mu held on
 * entry, released here). */
static mcp_status finish(mcp_repository *r, repo_entry *e, gone_list *gone, mcp_status st)
{
    route_map *old = st == MCP_STATUS_OK ? publish(r, e) : NULL;
    pthread_mutex_unlock(&r->mu);
    unpublished(r, old);
    gone_retire(r, gone);
    return st;
}

mcp_status mcp_repository_rollout(mcp_repository *r, const char *name, mcp_rollout_state *out, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    mcp_status st = MCP_STATUS_OK;
    pthread_mutex_lock(&r->mu);
    repo_entry *e = serving_entry(r, name, &st, err);
    if (e) {
        snprintf(out->primary, sizeof out->primary, "%s", e->current->version);
        if (e->canary) snprintf(out->canary, sizeof out->canary, "%s", e->canary->version);
        if (e->shadow) snprintf(out->shadow, sizeof out->shadow, "%s", e->shadow->version);
        if (e->previous) snprintf(out->previous, sizeof out->previous, "%s", e->previous->version);
        snprintf(out->previous_cold, sizeof out->previous_cold, "%s", e->previous_cold);
        out->canary_weight = e->canary ? e->canary_weight : 0;
        out->shadow_sample = e->shadow ? e->shadow_sample : 0;
        out->spec = e->spec;
        out->watch = mcp_route_watch_retain(e->watch);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

/* Makes the loaded version v the primary (mu held). */
static void promote_locked(mcp_repository *r, repo_entry *e, mcp_model_version *v, const char *why, gone_list *gone)
{
    take_role(e, v);
    replace_primary(r, e, v, "previous: kept warm for undo", gone);
    note(e, v->version, MCP_VERSION_READY, why);
    set_str(&e->version, v->version);
}

mcp_status mcp_repository_set_weights(mcp_repository *r, const char *name, int n, const char *const *versions,
                                      const double *percent, mcp_err *err)
{
    if (n < 1 || n > 2)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "weights name %d versions; name one or two", n);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!(percent[i] >= 0 && percent[i] <= 100))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "weight %g of %s is not a percent from 0 to 100",
                               percent[i], versions[i]);
        sum += percent[i];
    }
    if (n == 2 && !strcmp(versions[0], versions[1]))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "version %s is given twice", versions[0]);
    gone_list gone = {0};
    pthread_mutex_lock(&r->mu);
    mcp_status st = MCP_STATUS_OK;
    repo_entry *e = serving_entry(r, name, &st, err);
    if (!e) return finish(r, NULL, &gone, st);
    int p = -1; /* which of the versions is the primary */
    for (int i = 0; i < n; i++)
        if (!strcmp(versions[i], e->current->version)) p = i;
    if (p < 0 ? sum > 100.0001 : fabs(sum - 100) > 0.0001)
        return finish(r, e, &gone,
                      mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "weights add up to %g; they must make 100%s", sum,
                                  p < 0 ? " (the primary takes what is left)" : ""));
    int o = n == 2 ? 1 - p : p < 0 ? 0 : -1; /* the other version */
    if (p < 0 && n == 2)
        return finish(r, e, &gone,
                      mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                  "neither %s nor %s is the primary (%s) of model '%s'; promote one first", versions[0],
                                  versions[1], e->current->version, name));
    mcp_model_version *other = NULL;
    if (o >= 0 && !(other = entry_loaded(e, versions[o])))
        return finish(r, e, &gone, not_loaded(e, versions[o], err));
    double w = o >= 0 ? percent[o] : 0;
    if (other && w >= 100) {
        /* All of it to the other version: that is a promotion. */
        promote_locked(r, e, other, "promoted by weight", &gone);
    } else if (!other) {
        /* The primary alone: the canary ends. */
        if (e->canary) {
            drop(e, &e->canary, "canary ended (the primary at 100)", &gone);
        }
        e->canary_weight = 0;
    } else {
        /* Weight 0 pauses a canary: it stays loaded, out of routing. */
        if (e->canary && e->canary != other) {
            drop(e, &e->canary, "canary replaced", &gone);
        }
        take_role(e, other);
        e->canary = other;
        e->canary_weight = w;
        note(e, other->version, MCP_VERSION_READY, "canary");
    }
    return finish(r, e, &gone, MCP_STATUS_OK);
}

mcp_status mcp_repository_set_shadow(mcp_repository *r, const char *name, const char *version, double sample,
                                     const mcp_rollout_spec *spec, mcp_err *err)
{
    if (!(sample >= 0 && sample <= 1))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "sample %g is not a share from 0 to 1", sample);
    gone_list gone = {0};
    pthread_mutex_lock(&r->mu);
    mcp_status st = MCP_STATUS_OK;
    repo_entry *e = serving_entry(r, name, &st, err);
    if (!e) return finish(r, NULL, &gone, st);
    if (!strcmp(version, e->current->version))
        return finish(r, e, &gone,
                      mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s is the primary of model '%s'; it cannot shadow itself",
                                  version, name));
    mcp_model_version *v = entry_loaded(e, version);
    if (!v) return finish(r, e, &gone, not_loaded(e, version, err));
    if (sample <= 0) {
        if (e->shadow == v) {
            drop(e, &e->shadow, "shadow off", &gone);
            e->shadow_sample = 0;
        }
    } else {
        if (e->shadow && e->shadow != v) {
            drop(e, &e->shadow, "shadow replaced", &gone);
        }
        take_role(e, v);
        e->shadow = v;
        e->shadow_sample = sample;
        note(e, v->version, MCP_VERSION_READY, "shadow");
    }
    if (spec) {
        e->spec = *spec;
        e->watch_shadow = NULL; /* a new experiment: new windows */
    }
    return finish(r, e, &gone, MCP_STATUS_OK);
}

mcp_status mcp_repository_promote(mcp_repository *r, const char *name, const char *version, mcp_err *err)
{
    gone_list gone = {0};
    pthread_mutex_lock(&r->mu);
    mcp_status st = MCP_STATUS_OK;
    repo_entry *e = serving_entry(r, name, &st, err);
    if (!e) return finish(r, NULL, &gone, st);
    if (!strcmp(version, e->current->version)) return finish(r, e, &gone, MCP_STATUS_OK);
    mcp_model_version *v = entry_loaded(e, version);
    if (!v) return finish(r, e, &gone, not_loaded(e, version, err));
    promote_locked(r, e, v, "promoted", &gone);
    return finish(r, e, &gone, MCP_STATUS_OK);
}

mcp_status mcp_repository_undo(mcp_repository *r, const char *name, mcp_err *err)
{
    gone_list gone = {0};
    pthread_mutex_lock(&r->mu);
    mcp_status st = MCP_STATUS_OK;
    repo_entry *e = serving_entry(r, name, &st, err);
    if (!e) return finish(r, NULL, &gone, st);
    if (!e->previous) {
        st = e->previous_cold[0]
                            ? mcp_err_set(err, MCP_STATUS_NOT_FOUND,
                                          "the previous version of model '%s' (%s) is no longer loaded", name, e->previous_cold)
                            : mcp_err_set(err, MCP_STATUS_NOT_FOUND, "model '%s' has no previous version to go back to", name);
        return finish(r, e, &gone, st);
    }
    drop(e, &e->canary, "undo", &gone);
    drop(e, &e->shadow, "undo", &gone);
    e->canary_weight = e->shadow_sample = 0;
    promote_locked(r, e, e->previous, "undo", &gone);
    return finish(r, e, &gone, MCP_STATUS_OK);
}

bool mcp_repository_trip(mcp_repository *r, const char *name, mcp_route_watch *watch, bool canary, const char *reason)
{
    gone_list gone = {0};
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    mcp_model_version **slot = e ? (canary ? &e->canary : &e->shadow) : NULL;
    if (!e || e->watch != watch || !*slot) {
        pthread_mutex_unlock(&r->mu);
        return false;
    }
    drop(e, slot, reason, &gone);
    if (canary) e->canary_weight = 0;
    else e->shadow_sample = 0;
    /* The watch stays with what is left of the experiment. */
    e->watch_canary = e->canary;
    e->watch_shadow = e->shadow;
    finish(r, e, &gone, MCP_STATUS_OK);
    return true;
}

/* ---- the memory policy's side: idle models out, and back on demand ---- */

mcp_status mcp_repository_evict(mcp_repository *r, const char *name, const mcp_model_version *expect, const char *reason,
                                mcp_err *err)
{
    return unload_entry(r, name, expect, reason, err);
}

bool mcp_repository_evicted(mcp_repository *r, const char *name)
{
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    bool evicted = e && e->evicted && !e->current;
    pthread_mutex_unlock(&r->mu);
    return evicted;
}

mcp_status mcp_repository_cold_start(mcp_repository *r, const char *name, bool *loaded, mcp_err *err)
{
    *loaded = false;
    if (!mcp_repository_evicted(r, name)) return MCP_STATUS_OK; /* back already (or unloaded by an operator since) */
    mcp_status st = mcp_repository_load(r, name, err);
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    if (e && e->current) e->evicted = false;
    pthread_mutex_unlock(&r->mu);
    *loaded = st == MCP_STATUS_OK;
    return st;
}
