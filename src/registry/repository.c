/*
 * The repository: model name -> current version. Loading happens outside
 * the table lock; making a version current is one pointer swap under it, so
 * requests in flight finish on the version they started on (they hold a
 * reference) while new ones see the new version.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    mcp_model_version *current;
    /* Other versions a Triton folder's policy serves (current is the highest). */
    mcp_model_version *also[64];
    int n_also;
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
    s->time_ms = mcp_now_us() / 1000; /* converted to wall time when shown */
    snprintf(s->reason, sizeof s->reason, "%.255s", reason ? reason : "");
    e->history_next = (e->history_next + 1) % MCP_LIFECYCLE_KEPT;
    if (e->n_history < MCP_LIFECYCLE_KEPT) e->n_history++;
}

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
};

mcp_repository *mcp_repository_create(const mcp_descriptor_defaults *defaults)
{
    mcp_repository *r = mcp_calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->load_cv, NULL);
    r->defaults = defaults ? *defaults : mcp_descriptor_defaults_default();
    return r;
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
    for (int i = 0; i < r->n; i++) {
        retire(r, r->entries[i].current);
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
    MCP_ASSERT(!e->current);
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

static mcp_status load_and_swap(mcp_repository *r, mcp_descriptor *desc, mcp_source_kind kind, const char *source,
                                    const char *text, mcp_err *err)
{
    char name[256], version[64];
    snprintf(name, sizeof name, "%s", desc->name);
    snprintf(version, sizeof version, "%s", desc->version);
    pthread_mutex_lock(&r->mu);
    /* The model's own lock: a second load of this name waits for the first;
     * loads of other models do not. (Looked up again after each wait: a
     * failed first load removes its entry.) */
    repo_entry *e;
    while ((e = entry_get(r, name, true)) && e->loading) pthread_cond_wait(&r->load_cv, &r->mu);
    if (e) {
        e->loading = true;
        if (!e->current) e->state = MCP_MODEL_LOADING;
        note(e, version, MCP_VERSION_REGISTERED, NULL);
        note(e, version, MCP_VERSION_LOADING, NULL);
        /* Files on the server's disk stay known even when they fail to
         * load (a load by name retries them); what came over the network
         * is remembered only once it loads. */
        if (kind == MCP_SOURCE_YAML_FILE || kind == MCP_SOURCE_TRITON) {
            set_str(&e->source, source);
            set_str(&e->text, NULL);
            e->kind = kind;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (!e) {
        mcp_descriptor_free(desc);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }

    mcp_model_version *v = NULL;
    load_phase_ctx pc = {r, name};
    int n_also = kind == MCP_SOURCE_TRITON ? desc->n_also : 0;
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
    if (st != MCP_STATUS_OK) {
        for (int i = 0; i < got; i++) retire(r, also[i]);
        got = 0;
        if (v) retire(r, v);
        v = NULL;
    }
    mcp_model_version *old = NULL, *old_also[64];
    int n_old_also = 0;
    pthread_mutex_lock(&r->mu);
    e = entry_get(r, name, false); /* the array may have moved */
    e->phase = NULL;
    e->load_start_us = 0;
    e->loading = false;
    pthread_cond_broadcast(&r->load_cv);
    if (st == MCP_STATUS_OK) {
        old = e->current;
        n_old_also = e->n_also;
        memcpy(old_also, e->also, sizeof(e->also[0]) * (size_t)e->n_also);
        memcpy(e->also, also, sizeof(also[0]) * (size_t)got);
        e->n_also = got;
        e->current = v;
        e->state = MCP_MODEL_READY;
        e->reason[0] = '\0';
        note(e, version, MCP_VERSION_READY, NULL);
        if (old && old != v) note(e, old->version, MCP_VERSION_DRAINING, "replaced");
        set_str(&e->version, version);
        if (kind != MCP_SOURCE_NONE) {
            set_str(&e->source, source);
            set_str(&e->text, text);
            e->kind = kind;
        }
    } else {
        /* A failed reload leaves the current version serving. A failed
         * first load of a name with nothing to load it from again leaves
         * no entry: the caller got the reason in its answer. */
        if (!e->current && e->kind == MCP_SOURCE_NONE) {
            entry_remove(r, e);
        } else {
            if (!e->current) e->state = MCP_MODEL_UNAVAILABLE;
            /* The reason is shown to every caller: no host paths in it. */
            char why[sizeof e->reason - 16];
            mcp_model_roots_redact(r->defaults.roots, err && err->buf ? err->buf : mcp_status_str(st), why, sizeof why);
            snprintf(e->reason, sizeof e->reason, "load failed: %s", why);
            note(e, version, MCP_VERSION_FAILED, why);
            if (!e->current) set_str(&e->version, version);
        }
    }
    pthread_mutex_unlock(&r->mu);
    retire(r, old);
    for (int i = 0; i < n_old_also; i++) retire(r, old_also[i]);
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

mcp_status mcp_repository_unload(mcp_repository *r, const char *name, mcp_err *err)
{
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    mcp_model_version *old = NULL, *old_also[64];
    int n_old_also = 0;
    if (e) {
        old = e->current;
        n_old_also = e->n_also;
        memcpy(old_also, e->also, sizeof(e->also[0]) * (size_t)e->n_also);
        e->n_also = 0;
        e->current = NULL;
        e->state = MCP_MODEL_UNAVAILABLE;
        snprintf(e->reason, sizeof e->reason, "unloaded");
        if (old) note(e, old->version, MCP_VERSION_DRAINING, "unloaded");
    }
    pthread_mutex_unlock(&r->mu);
    if (!e) return mcp_err_set(err, MCP_STATUS_NOT_FOUND, "unknown model '%s'", name);
    retire(r, old);
    for (int i = 0; i < n_old_also; i++) retire(r, old_also[i]);
    return MCP_STATUS_OK;
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
    /* Monotonic milliseconds to wall time, at the moment of asking. */
    int64_t shift = 0;
    struct timespec ts;
    if (n > 0 && clock_gettime(CLOCK_REALTIME, &ts) == 0)
        shift = ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000) - mcp_now_us() / 1000;
    for (int i = 0; i < n; i++) out[i].time_ms += shift;
    return n;
}

mcp_model_version *mcp_repository_get(mcp_repository *r, const char *name, const char *version)
{
    mcp_model_version *v = NULL;
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    if (e && e->current && (!version || !*version || strcmp(version, e->current->version) == 0))
        v = mcp_model_version_retain(e->current);
    for (int i = 0; e && !v && version && *version && i < e->n_also; i++)
        if (strcmp(version, e->also[i]->version) == 0) v = mcp_model_version_retain(e->also[i]);
    pthread_mutex_unlock(&r->mu);
    return v;
}

int mcp_repository_versions(mcp_repository *r, const char *name, char (*out)[64], int cap)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    repo_entry *e = entry_get(r, name, false);
    if (e && e->current && n < cap) snprintf(out[n++], 64, "%s", e->current->version);
    for (int i = 0; e && e->current && i < e->n_also && n < cap; i++) snprintf(out[n++], 64, "%s", e->also[i]->version);
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
            *bytes += r->entries[i].current->memory_bytes;
            for (int k = 0; k < r->entries[i].n_also; k++) *bytes += r->entries[i].also[k]->memory_bytes;
        }
    pthread_mutex_unlock(&r->mu);
}
