/*
 * Poll mode (Triton's --model-control-mode=poll): the model repository is
 * listed again every interval; a descriptor or Triton folder that is new or
 * changed is applied once it has stayed the same for two polls in a row (a
 * file still being written changes between polls, so a half-written
 * version is never picked up), and one that went away is unloaded.
 *
 * What "the same" means: a signature over the sizes and modification times
 * of the entry's files: a YAML descriptor and the model file it names; a
 * Triton folder's config.pbtxt and every file in its version folders.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "registry/registry.h"

typedef struct poll_entry {
    char *name;         /* the file or folder name in the repository */
    uint64_t seen;      /* signature at the last poll */
    uint64_t applied;   /* signature last applied (loaded or failed) */
    char *model;        /* the model name it applied as, for unloads */
    bool present;
} poll_entry;

struct mcp_repository_poll {
    char *dir;
    poll_entry *entries;
    int n, cap;
};

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t stat_sig(uint64_t h, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return mix(h, 1);
    h = mix(h, (uint64_t)sb.st_size);
    h = mix(h, (uint64_t)sb.st_mtim.tv_sec);
    return mix(h, (uint64_t)sb.st_mtim.tv_nsec);
}

/* Every regular file under dir, one level of folders deep (Triton's
 * version folders), by name. */
static uint64_t tree_sig(uint64_t h, const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d) return mix(h, 2);
    struct dirent *de;
    uint64_t sum = 0; /* order-free: readdir's order is not stable */
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        uint64_t e = 1469598103934665603ull;
        for (const char *c = de->d_name; *c; c++) e = (e ^ (unsigned char)*c) * 1099511628211ull;
        if (S_ISDIR(sb.st_mode) && depth > 0) e = tree_sig(e, path, depth - 1);
        else if (S_ISREG(sb.st_mode)) e = stat_sig(e, path);
        sum += e * 0xff51afd7ed558ccdull;
    }
    closedir(d);
    return mix(h, sum);
}

mcp_repository_poll *mcp_repository_poll_create(const char *dir)
{
    mcp_repository_poll *p = mcp_calloc(1, sizeof *p);
    if (p && !(p->dir = mcp_strdup(dir))) {
        mcp_free(p);
        p = NULL;
    }
    return p;
}

void mcp_repository_poll_destroy(mcp_repository_poll *p)
{
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        mcp_free(p->entries[i].name);
        mcp_free(p->entries[i].model);
    }
    mcp_free(p->entries);
    mcp_free(p->dir);
    mcp_free(p);
}

static poll_entry *entry_of(mcp_repository_poll *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->entries[i].name, name)) return &p->entries[i];
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        poll_entry *e = mcp_realloc(p->entries, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        p->entries = e;
        p->cap = cap;
    }
    poll_entry *e = &p->entries[p->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = mcp_strdup(name))) return NULL;
    p->n++;
    return e;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Applies one entry of the repository; the model name it loaded as (or
 * tried to) goes to *model. */
static void apply_entry(mcp_repository *r, const char *path, bool triton, char **model, FILE *log)
{
    mcp_diags diags = {0};
    mcp_descriptor *desc = NULL;
    const mcp_descriptor_defaults *dd = mcp_repository_defaults(r);
    mcp_status st = triton ? mcp_descriptor_load_triton(path, dd, &desc, &diags) : mcp_descriptor_load_file(path, dd, &desc, &diags);
    if (st != MCP_STATUS_OK) {
        char report[2048];
        mcp_diags_format(&diags, path, report, sizeof report);
        if (log) fprintf(log, "mcp2026-server: poll: %s", report);
        mcp_diags_clear(&diags);
        return;
    }
    mcp_diags_clear(&diags);
    mcp_free(*model);
    *model = mcp_strdup(desc->name);
    char msg[1024] = "";
    mcp_err err = {msg, sizeof msg};
    char version[64];
    snprintf(version, sizeof version, "%s", desc->version);
    st = mcp_repository_apply_from(r, desc, triton ? MCP_SOURCE_TRITON : MCP_SOURCE_YAML_FILE, path, NULL, &err);
    if (log) {
        if (st == MCP_STATUS_OK) fprintf(log, "mcp2026-server: poll: %s: version %s ready\n", *model ? *model : path, version);
        else fprintf(log, "mcp2026-server: poll: %s: %s (the serving version, if any, stays)\n", path, msg);
    }
}

/* The model name an entry describes (for seeding), or NULL. */
static char *entry_model(mcp_repository *r, const char *path, bool triton)
{
    mcp_diags diags = {0};
    mcp_descriptor *desc = NULL;
    const mcp_descriptor_defaults *dd = mcp_repository_defaults(r);
    mcp_status st = triton ? mcp_descriptor_load_triton(path, dd, &desc, &diags) : mcp_descriptor_load_file(path, dd, &desc, &diags);
    mcp_diags_clear(&diags);
    char *name = st == MCP_STATUS_OK ? mcp_strdup(desc->name) : NULL;
    mcp_descriptor_free(desc);
    return name;
}

static int poll_pass(mcp_repository_poll *p, mcp_repository *r, FILE *log, bool seed)
{
    for (int i = 0; i < p->n; i++) p->entries[i].present = false;
    DIR *d = opendir(p->dir);
    if (!d) {
        if (log) fprintf(log, "mcp2026-server: poll: cannot open model repository '%s'\n", p->dir);
        return -1;
    }
    int changes = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", p->dir, de->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0) continue;
        bool triton = false;
        uint64_t sig = 1;
        if (S_ISDIR(sb.st_mode)) {
            char cfg[4200];
            snprintf(cfg, sizeof cfg, "%s/config.pbtxt", path);
            if (stat(cfg, &sb) != 0) continue;
            triton = true;
            sig = tree_sig(sig, path, 1);
        } else if (has_suffix(de->d_name, ".yaml") || has_suffix(de->d_name, ".yml")) {
            sig = stat_sig(sig, path);
            /* The model file it names (read through the descriptor). */
            mcp_diags diags = {0};
            mcp_descriptor *desc = NULL;
            if (mcp_descriptor_load_file(path, mcp_repository_defaults(r), &desc, &diags) == MCP_STATUS_OK)
                sig = stat_sig(sig, desc->path);
            mcp_descriptor_free(desc);
            mcp_diags_clear(&diags);
        } else {
            continue;
        }
        poll_entry *e = entry_of(p, de->d_name);
        if (!e) continue;
        e->present = true;
        if (seed) {
            e->seen = e->applied = sig;
            mcp_free(e->model);
            e->model = entry_model(r, path, triton);
            continue;
        }
        bool stable = e->seen == sig;
        e->seen = sig;
        if (!stable || e->applied == sig) continue;
        e->applied = sig;
        apply_entry(r, path, triton, &e->model, log);
        changes++;
    }
    closedir(d);
    /* Gone from the repository: unloaded. */
    for (int i = 0; i < p->n; i++) {
        poll_entry *e = &p->entries[i];
        if (e->present || !e->applied) continue;
        e->applied = e->seen = 0;
        if (!e->model) continue;
        char msg[512];
        mcp_err err = {msg, sizeof msg};
        if (mcp_repository_unload(r, e->model, &err) == MCP_STATUS_OK && log)
            fprintf(log, "mcp2026-server: poll: %s left the repository: unloaded\n", e->model);
        changes++;
    }
    return changes;
}

int mcp_repository_poll_once(mcp_repository_poll *p, mcp_repository *r, FILE *log) { return poll_pass(p, r, log, false); }

void mcp_repository_poll_seed(mcp_repository_poll *p, mcp_repository *r) { (void)poll_pass(p, r, NULL, true); }
