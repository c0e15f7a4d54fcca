/*
 * The control plane's record of what was applied: a store and its catalog
 * together (<store>/catalog.db). A version that loads from a descriptor is
 * stored (descriptor, files, I/O signature) and recorded Ready and current,
 * the model's desired state loaded, with an event; a failed apply and an
 * unload are events too. At start, every model whose desired state is
 * loaded comes back from the store: its version checked out of the store
 * (the files it was applied with, by digest) and applied again.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/store_util.h"

struct mcp_plane {
    mcp_store *store;
    mcp_catalog *catalog;
};

mcp_status mcp_plane_open(const char *dir, mcp_plane **out, mcp_err *err)
{
    *out = NULL;
    mcp_plane *p = mcp_calloc(1, sizeof *p);
    if (!p) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = mcp_store_open(dir, &p->store, err);
    if (st == MCP_STATUS_OK) {
        char path[4200];
        snprintf(path, sizeof path, "%s/catalog.db", mcp_store_root(p->store));
        st = mcp_catalog_open(path, &p->catalog, err);
    }
    if (st != MCP_STATUS_OK) {
        mcp_plane_close(p);
        return st;
    }
    *out = p;
    return MCP_STATUS_OK;
}

void mcp_plane_close(mcp_plane *p)
{
    if (!p) return;
    mcp_catalog_close(p->catalog);
    mcp_store_close(p->store);
    mcp_free(p);
}

mcp_store *mcp_plane_store(mcp_plane *p) { return p->store; }
mcp_catalog *mcp_plane_catalog(mcp_plane *p) { return p->catalog; }

mcp_status mcp_plane_applied(mcp_plane *p, const mcp_model_version *v, const char *text, size_t len, bool current,
                             const char *actor, mcp_err *err)
{
    mcp_store_manifest *m = NULL;
    mcp_status st = mcp_store_add_version(p->store, v, text, len, &m, err);
    char target[512];
    snprintf(target, sizeof target, "%s:%s", v->name, m ? m->version : v->version ? v->version : "");
    mcp_catalog_event e = {.actor = actor, .action = "apply", .target = target, .outcome = "ok",
                           .reason = current ? NULL : "beside the primary (canary or shadow)"};
    if (st == MCP_STATUS_OK) st = mcp_catalog_record_version(p->catalog, v->name, m->version, m->manifest.digest, NULL, err);
    if (st == MCP_STATUS_OK)
        st = mcp_catalog_set_state(p->catalog, v->name, m->version, MCP_VERSION_READY, NULL, current ? NULL : &e, err);
    if (st == MCP_STATUS_OK && current) st = mcp_catalog_set_desired(p->catalog, v->name, true, m->version, &e, err);
    mcp_store_manifest_free(m);
    return st;
}

void mcp_plane_note(mcp_plane *p, const char *action, const char *target, const char *outcome, const char *reason,
                    const char *actor)
{
    char msg[256];
    mcp_err err = {msg, sizeof msg};
    mcp_catalog_event e = {.actor = actor, .action = action, .target = target, .outcome = outcome, .reason = reason};
    if (mcp_catalog_add_event(p->catalog, &e, &err) != MCP_STATUS_OK) fprintf(stderr, "mcp2026-server: %s\n", msg);
}

mcp_status mcp_plane_unloaded(mcp_plane *p, const char *name, const char *actor, mcp_err *err)
{
    mcp_catalog_event e = {.actor = actor, .action = "unload", .target = name, .outcome = "ok"};
    return mcp_catalog_set_desired(p->catalog, name, false, NULL, &e, err);
}

/* The version's descriptor from the store, its files pointed at the
 * checkout: the model first, then each new labels file in step order (as
 * mcp_store_add_version titled them). */
static mcp_status load_manifest(mcp_plane *p, mcp_repository *repo, const char *name, const char *digest,
                                const mcp_rollout_spec *role, mcp_err *err)
{
    mcp_store_manifest *m = NULL;
    mcp_status st = mcp_store_read_manifest(p->store, digest, &m, err);
    if (st == MCP_STATUS_OK && strcmp(m->name, name))
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "manifest %s holds model '%s', not '%s'", digest, m->name, name);
    if (st == MCP_STATUS_OK && (m->n_files < 1 || strcmp(m->config_media_type, MCP_STORE_DESCRIPTOR_TYPE)))
        st = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "version %s of '%s' was not applied from a YAML descriptor", m->version,
                         m->name);
    char dir[4200], desc_path[4400], blob[4200];
    if (st == MCP_STATUS_OK) st = mcp_store_checkout(p->store, m, dir, sizeof dir, err);
    if (st == MCP_STATUS_OK) st = mcp_store_blob_path(p->store, m->config.digest, blob, sizeof blob, err);
    uint8_t *bytes = NULL;
    char *text = NULL;
    size_t len = 0;
    if (st == MCP_STATUS_OK) st = mcp_file_read(blob, &bytes, &len, err);
    /* The repository keeps the descriptor's text as a string. */
    if (st == MCP_STATUS_OK && !(text = mcp_malloc(len + 1))) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (st == MCP_STATUS_OK) {
        if (len) memcpy(text, bytes, len);
        text[len] = '\0';
        if (strlen(text) != len) st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the stored descriptor holds a NUL byte");
    }
    mcp_free(bytes);
    mcp_descriptor *d = NULL;
    if (st == MCP_STATUS_OK) {
        /* Its files come from the checkout, whatever paths it named. */
        snprintf(desc_path, sizeof desc_path, "%s/descriptor.yaml", dir);
        mcp_descriptor_defaults dd = *mcp_repository_defaults(repo);
        dd.roots = NULL;
        dd.check_load = false;
        dd.files_elsewhere = true;
        mcp_diags diags = {0};
        st = mcp_descriptor_parse_yaml(text, len, desc_path, &dd, &d, &diags);
        if (st != MCP_STATUS_OK) {
            char report[1024];
            mcp_diags_format(&diags, "descriptor", report, sizeof report);
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the stored descriptor: %s", report);
        }
        mcp_diags_clear(&diags);
    }
    if (st == MCP_STATUS_OK) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, m->files[0].title);
        mcp_free(d->path);
        d->path = mcp_strdup(path);
        char *seen[64]; /* the labels files as the descriptor named them */
        int n_seen = 0;
        for (int side = 0; side < 2 && st == MCP_STATUS_OK; side++) {
            mcp_step *steps = side ? d->post : d->pre;
            int count = side ? d->n_post : d->n_pre;
            for (int i = 0; i < count && st == MCP_STATUS_OK; i++) {
                if (!steps[i].labels_path) continue;
                int k = 0;
                while (k < n_seen && strcmp(seen[k], steps[i].labels_path)) k++;
                if (k == n_seen) {
                    if (k + 1 >= m->n_files || n_seen == 64) {
                        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "the stored version lacks a labels file");
                        break;
                    }
                    seen[n_seen++] = mcp_strdup(steps[i].labels_path);
                }
                /* Read again from the checkout: the bytes that were stored. */
                snprintf(path, sizeof path, "%s/%s", dir, m->files[k + 1].title);
                mcp_free(steps[i].labels_path);
                steps[i].labels_path = mcp_strdup(path);
                for (int l = 0; l < steps[i].n_labels; l++) mcp_free(steps[i].labels[l]);
                mcp_free(steps[i].labels);
                steps[i].labels = NULL;
                steps[i].n_labels = 0;
                char lmsg[512];
                if (!steps[i].labels_path ||
                    mcp__desc_labels_read(steps[i].labels_path, &steps[i].labels, &steps[i].n_labels, lmsg, sizeof lmsg) !=
                        MCP_STATUS_OK)
                    st = mcp_err_set(err, MCP_STATUS_IO_ERROR, "the stored labels file '%s': %s", m->files[k + 1].title,
                                     steps[i].labels_path ? lmsg : "out of memory");
            }
        }
        for (int k = 0; k < n_seen; k++) mcp_free(seen[k]);
        if (!d->path) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    if (st == MCP_STATUS_OK) {
        /* It comes back as the primary, whatever role it had, or in the
         * role it is given (a restored canary or shadow). */
        d->rollout = role ? *role : mcp_rollout_spec_default();
        st = mcp_repository_apply_from(repo, d, MCP_SOURCE_YAML_TEXT, desc_path, text, err);
        d = NULL; /* taken */
    }
    mcp_descriptor_free(d);
    mcp_free(text);
    mcp_store_manifest_free(m);
    return st;
}

static mcp_status restore_one(mcp_plane *p, mcp_repository *repo, const mcp_catalog_model *cm, mcp_err *err)
{
    return load_manifest(p, repo, cm->name, cm->manifest, NULL, err);
}

mcp_status mcp_plane_load_version(mcp_plane *p, mcp_repository *repo, const char *name, const char *version, mcp_err *err)
{
    char ref[512];
    snprintf(ref, sizeof ref, "%s:%s", name, version);
    mcp_store_blob manifest;
    mcp_status st = mcp_store_resolve(p->store, ref, &manifest, err);
    return st == MCP_STATUS_OK ? load_manifest(p, repo, name, manifest.digest, NULL, err) : st;
}

/* ---- rollouts kept across restarts ---- */

mcp_status mcp_plane_record_rollout(mcp_plane *p, mcp_repository *repo, const char *name, mcp_err *err)
{
    mcp_rollout_state rs;
    char m2[256];
    mcp_err e2 = {m2, sizeof m2};
    if (mcp_repository_rollout(repo, name, &rs, &e2) != MCP_STATUS_OK) return mcp_catalog_set_rollout(p->catalog, name, NULL, err);
    mcp_route_watch_release(rs.watch);
    if (!rs.canary[0] && !rs.shadow[0]) return mcp_catalog_set_rollout(p->catalog, name, NULL, err);
    char validator[64];
    mcp_validator_format(rs.spec.validator, rs.spec.threshold, validator, sizeof validator);
    json_t *j = json_pack("{s:s, s:f, s:s, s:f, s:s, s:I, s:f, s:I, s:I, s:f}", "canary", rs.canary, "canary_weight",
                          rs.canary_weight, "shadow", rs.shadow, "shadow_sample", rs.shadow_sample, "validator", validator,
                          "window_ms", (json_int_t)rs.spec.window_ms, "error_rate_margin", rs.spec.error_rate_margin,
                          "p99_budget_us", (json_int_t)rs.spec.p99_budget_us, "min_samples", (json_int_t)rs.spec.min_samples,
                          "agreement", rs.spec.agreement);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    mcp_status st = text ? mcp_catalog_set_rollout(p->catalog, name, text, err)
                         : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    free(text);
    return st;
}

/* A stored rollout's spec (checked: it is read back from disk). */
static bool rollout_parse(const char *text, mcp_rollout_spec *sp, char canary[MCP_ROLLOUT_VERSION_LEN],
                          char shadow[MCP_ROLLOUT_VERSION_LEN])
{
    *sp = mcp_rollout_spec_default();
    json_t *j = json_loads(text, 0, NULL);
    const char *c = json_string_value(json_object_get(j, "canary")), *s = json_string_value(json_object_get(j, "shadow"));
    const char *v = json_string_value(json_object_get(j, "validator"));
    char why[160];
    bool ok = j && c && s && v && strlen(c) < MCP_ROLLOUT_VERSION_LEN && strlen(s) < MCP_ROLLOUT_VERSION_LEN &&
              mcp_validator_parse(v, &sp->validator, &sp->threshold, why, sizeof why);
    if (ok) {
        snprintf(canary, MCP_ROLLOUT_VERSION_LEN, "%s", c);
        snprintf(shadow, MCP_ROLLOUT_VERSION_LEN, "%s", s);
        sp->canary_weight = json_number_value(json_object_get(j, "canary_weight"));
        sp->shadow_sample = json_number_value(json_object_get(j, "shadow_sample"));
        sp->window_ms = json_integer_value(json_object_get(j, "window_ms"));
        sp->error_rate_margin = json_number_value(json_object_get(j, "error_rate_margin"));
        sp->p99_budget_us = json_integer_value(json_object_get(j, "p99_budget_us"));
        sp->min_samples = json_integer_value(json_object_get(j, "min_samples"));
        sp->agreement = json_number_value(json_object_get(j, "agreement"));
        ok = sp->canary_weight >= 0 && sp->canary_weight <= 100 && sp->shadow_sample >= 0 && sp->shadow_sample <= 1 &&
             sp->window_ms >= 100 && sp->min_samples >= 1 && sp->agreement > 0 && sp->agreement <= 1;
    }
    json_decref(j);
    return ok;
}

/* The canary and shadow a model had, loaded again from the store beside
 * its restored primary. */
static void restore_rollout(mcp_plane *p, mcp_repository *repo, const char *name, FILE *log)
{
    char *text = NULL, msg[1024];
    mcp_err err = {msg, sizeof msg};
    if (mcp_catalog_rollout(p->catalog, name, &text, &err) != MCP_STATUS_OK || !text) {
        mcp_free(text);
        return;
    }
    mcp_rollout_spec sp;
    char canary[MCP_ROLLOUT_VERSION_LEN], shadow[MCP_ROLLOUT_VERSION_LEN];
    if (!rollout_parse(text, &sp, canary, shadow)) {
        if (log) fprintf(log, "mcp2026-server: store: the rollout of %s in the catalog is damaged; not restored\n", name);
        mcp_free(text);
        return;
    }
    mcp_free(text);
    for (int k = 0; k < 2; k++) {
        const char *version = k ? shadow : canary;
        if (!version[0]) continue;
        mcp_rollout_spec role = sp;
        role.present = true;
        role.primary[0] = '\0';
        snprintf(role.canary, sizeof role.canary, "%s", k ? "" : version);
        snprintf(role.shadow, sizeof role.shadow, "%s", k ? version : "");
        char ref[512], target[600];
        snprintf(ref, sizeof ref, "%s:%s", name, version);
        snprintf(target, sizeof target, "%s (%s)", ref, k ? "shadow" : "canary");
        mcp_store_blob manifest;
        mcp_status st = mcp_store_resolve(p->store, ref, &manifest, &err);
        if (st == MCP_STATUS_OK) st = load_manifest(p, repo, name, manifest.digest, &role, &err);
        mcp_plane_note(p, "restore", target, st == MCP_STATUS_OK ? "ok" : "failed", st == MCP_STATUS_OK ? "" : msg, "server");
        if (log) fprintf(log, "mcp2026-server: store: %s %s%s\n", target, st == MCP_STATUS_OK ? "restored" : "did not come back: ",
                         st == MCP_STATUS_OK ? "" : msg);
    }
}

int mcp_plane_restore(mcp_plane *p, mcp_repository *repo, FILE *log)
{
    char msg[1024];
    mcp_err err = {msg, sizeof msg};
    mcp_catalog_model *models = NULL;
    int n = 0, failed = 0;
    if (mcp_catalog_models(p->catalog, &models, &n, &err) != MCP_STATUS_OK) {
        if (log) fprintf(log, "mcp2026-server: store: %s\n", msg);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const mcp_catalog_model *cm = &models[i];
        if (!cm->loaded || !cm->has_version) continue;
        char target[512];
        snprintf(target, sizeof target, "%s:%s", cm->name, cm->current);
        /* A model the command line already serves keeps that. */
        mcp_model_version *have = mcp_repository_get(repo, cm->name, NULL);
        if (have) {
            mcp_model_version_release(have);
            continue;
        }
        mcp_status st = restore_one(p, repo, cm, &err);
        mcp_plane_note(p, "restore", target, st == MCP_STATUS_OK ? "ok" : "failed", st == MCP_STATUS_OK ? "" : msg, "server");
        if (st != MCP_STATUS_OK) {
            failed++;
            if (log) fprintf(log, "mcp2026-server: store: %s did not come back: %s\n", target, msg);
        } else {
            if (log) fprintf(log, "mcp2026-server: store: %s restored\n", target);
            restore_rollout(p, repo, cm->name, log);
        }
    }
    mcp_free(models);
    return failed;
}
