/*
 * The catalog: what the control plane knows and wants, in SQLite (WAL)
 * inside the store (<store>/catalog.db). Models with their desired state,
 * versions with the manifest digest that holds them and their lifecycle
 * state, tags, and an append-only event log (time, actor, action, target,
 * outcome, reason).
 *
 * Every change is one transaction (BEGIN IMMEDIATE ... COMMIT, synchronous
 * FULL): after a crash a change is there whole or not at all. SQLite's
 * errors come back naming what failed and why in words (the disk is full,
 * another process holds the catalog). What is read back is checked as
 * outside input: a catalog file may have been edited or damaged.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "registry/catalog_util.h"

#define SCHEMA_VERSION 2 /* 2: rollouts */

struct mcp_catalog {
    sqlite3 *db;
    char path[4096];
};

static const char *const state_names[MCP_VERSION_STATE_COUNT] = {
    [MCP_VERSION_REGISTERED] = "registered", [MCP_VERSION_LOADING] = "loading", [MCP_VERSION_READY] = "ready",
    [MCP_VERSION_DRAINING] = "draining",     [MCP_VERSION_UNLOADED] = "unloaded", [MCP_VERSION_FAILED] = "failed",
};

const char *mcp_version_state_name(mcp_version_state s)
{
    return s >= 0 && s < MCP_VERSION_STATE_COUNT ? state_names[s] : "unknown";
}

bool mcp__version_state_parse(const char *s, mcp_version_state *out)
{
    for (int i = 0; s && i < MCP_VERSION_STATE_COUNT; i++)
        if (!strcmp(s, state_names[i])) {
            *out = (mcp_version_state)i;
            return true;
        }
    return false;
}

/* SQLite's result in words, with what was being done. */
static mcp_status db_error(mcp_catalog *c, int rc, const char *doing, mcp_err *err)
{
    const char *why = c && c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc);
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return mcp_err_set(err, MCP_STATUS_RESOURCE_EXHAUSTED, "catalog: %s: the disk is full (%s); nothing was changed", doing, why);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return mcp_err_set(err, MCP_STATUS_UNAVAILABLE,
                           "catalog: %s: the catalog is locked by another process or connection (%s); nothing was changed",
                           doing, why);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "catalog: %s: cannot write %s (%s)", doing, c ? c->path : "", why);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "catalog: %s: %s is damaged or not a catalog (%s)", doing,
                           c ? c->path : "", why);
    case SQLITE_NOMEM:
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "catalog: %s: out of memory", doing);
    default:
        return mcp_err_set(err, MCP_STATUS_IO_ERROR, "catalog: %s: %s", doing, why);
    }
}

static mcp_status exec(mcp_catalog *c, const char *sql, const char *doing, mcp_err *err)
{
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? MCP_STATUS_OK : db_error(c, rc, doing, err);
}

static const char SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS models ("
    "  name TEXT PRIMARY KEY NOT NULL,"
    "  desired TEXT NOT NULL CHECK (desired IN ('loaded', 'unloaded')),"
    "  current TEXT,"
    "  updated INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS versions ("
    "  model TEXT NOT NULL,"
    "  version TEXT NOT NULL,"
    "  manifest TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  reason TEXT NOT NULL DEFAULT '',"
    "  created INTEGER NOT NULL,"
    "  updated INTEGER NOT NULL,"
    "  PRIMARY KEY (model, version));"
    "CREATE TABLE IF NOT EXISTS tags ("
    "  model TEXT NOT NULL,"
    "  tag TEXT NOT NULL,"
    "  version TEXT NOT NULL,"
    "  PRIMARY KEY (model, tag));"
    "CREATE TABLE IF NOT EXISTS events ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  time INTEGER NOT NULL,"
    "  actor TEXT NOT NULL,"
    "  action TEXT NOT NULL,"
    "  target TEXT NOT NULL,"
    "  outcome TEXT NOT NULL,"
    "  reason TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS events_target ON events (target, id);"
    /* A model's canary and shadow (JSON), so a restart brings them back. */
    "CREATE TABLE IF NOT EXISTS rollouts ("
    "  model TEXT PRIMARY KEY NOT NULL,"
    "  state TEXT NOT NULL,"
    "  updated INTEGER NOT NULL);"
    /* The event log is append-only. */
    "CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events BEGIN"
    "  SELECT RAISE(ABORT, 'the event log is append-only'); END;"
    "CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events BEGIN"
    "  SELECT RAISE(ABORT, 'the event log is append-only'); END;";

mcp_status mcp_catalog_open(const char *path, mcp_catalog **out, mcp_err *err)
{
    *out = NULL;
    mcp_catalog *c = mcp_calloc(1, sizeof *c);
    if (!c) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    snprintf(c->path, sizeof c->path, "%s", path);
    int rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                             NULL);
    mcp_status st = rc == SQLITE_OK ? MCP_STATUS_OK : db_error(c, rc, "open", err);
    if (st == MCP_STATUS_OK) sqlite3_busy_timeout(c->db, 5000);
    /* Damage is found, not trusted: cells checked as pages are read. */
    if (st == MCP_STATUS_OK) st = exec(c, "PRAGMA cell_size_check = ON; PRAGMA trusted_schema = OFF;", "open", err);
    if (st == MCP_STATUS_OK) st = exec(c, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;", "open", err);
    int version = -1;
    if (st == MCP_STATUS_OK) {
        sqlite3_stmt *q = NULL;
        rc = sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &q, NULL);
        if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) version = sqlite3_column_int(q, 0);
        else st = db_error(c, rc == SQLITE_OK ? sqlite3_errcode(c->db) : rc, "open", err);
        sqlite3_finalize(q);
    }
    if (st == MCP_STATUS_OK && version > SCHEMA_VERSION)
        st = mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "catalog %s has schema %d; this server knows up to %d", path, version,
                         SCHEMA_VERSION);
    if (st == MCP_STATUS_OK && version < SCHEMA_VERSION) {
        st = exec(c, "BEGIN IMMEDIATE", "create the schema", err);
        if (st == MCP_STATUS_OK) st = exec(c, SCHEMA, "create the schema", err);
        char set_version[64];
        snprintf(set_version, sizeof set_version, "PRAGMA user_version = %d", SCHEMA_VERSION);
        if (st == MCP_STATUS_OK) st = exec(c, set_version, "create the schema", err);
        if (st == MCP_STATUS_OK) st = exec(c, "COMMIT", "create the schema", err);
        else sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (st != MCP_STATUS_OK) {
        mcp_catalog_close(c);
        return st;
    }
    *out = c;
    return MCP_STATUS_OK;
}

void mcp_catalog_close(mcp_catalog *c)
{
    if (!c) return;
    if (c->db) sqlite3_close_v2(c->db);
    mcp_free(c);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- statements ---- */

/* Runs one statement with text (and, for '?NNN' above the texts, integer)
 * parameters: texts[i] binds ?i+1, NULL binds NULL. */
static mcp_status run(mcp_catalog *c, const char *sql, const char *const *texts, int n_texts, int64_t num, const char *doing,
                      mcp_err *err)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(c->db, sql, -1, &q, NULL);
    for (int i = 0; rc == SQLITE_OK && i < n_texts; i++)
        rc = texts[i] ? sqlite3_bind_text(q, i + 1, texts[i], -1, SQLITE_TRANSIENT) : sqlite3_bind_null(q, i + 1);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(q) > n_texts) rc = sqlite3_bind_int64(q, n_texts + 1, num);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(q);
        if (rc == SQLITE_DONE || rc == SQLITE_ROW) rc = SQLITE_OK;
    }
    mcp_status st = rc == SQLITE_OK ? MCP_STATUS_OK : db_error(c, rc, doing, err);
    sqlite3_finalize(q);
    return st;
}

static mcp_status begin(mcp_catalog *c, const char *doing, mcp_err *err) { return exec(c, "BEGIN IMMEDIATE", doing, err); }

static mcp_status end(mcp_catalog *c, mcp_status st, const char *doing, mcp_err *err)
{
    if (st == MCP_STATUS_OK) {
        st = exec(c, "COMMIT", doing, err);
        if (st == MCP_STATUS_OK) return st;
    }
    sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return st;
}

static mcp_status add_event(mcp_catalog *c, const mcp_catalog_event *e, mcp_err *err)
{
    const char *t[6] = {e->actor ? e->actor : "server", e->action ? e->action : "", e->target ? e->target : "",
                        e->outcome ? e->outcome : "ok", e->reason ? e->reason : ""};
    return run(c, "INSERT INTO events (actor, action, target, outcome, reason, time) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", t, 5,
               e->time_ms ? e->time_ms : now_ms(), "record an event", err);
}

mcp_status mcp_catalog_add_event(mcp_catalog *c, const mcp_catalog_event *e, mcp_err *err)
{
    mcp_status st = begin(c, "record an event", err);
    if (st == MCP_STATUS_OK) st = add_event(c, e, err);
    return end(c, st, "record an event", err);
}

mcp_status mcp_catalog_record_version(mcp_catalog *c, const char *model, const char *version, const char *manifest,
                                      const mcp_catalog_event *e, mcp_err *err)
{
    if (!mcp__desc_name_valid(model) || !version || !version[0] || !mcp_digest_valid(manifest))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "catalog: a version needs a model name, a version and a manifest digest");
    const char *doing = "record a version";
    mcp_status st = begin(c, doing, err);
    const char *t[4] = {model, version, manifest, state_names[MCP_VERSION_REGISTERED]};
    if (st == MCP_STATUS_OK)
        st = run(c,
                 "INSERT INTO versions (model, version, manifest, state, created, updated) VALUES (?1, ?2, ?3, ?4, ?5, ?5) "
                 "ON CONFLICT (model, version) DO UPDATE SET manifest = excluded.manifest, state = excluded.state, "
                 "reason = '', updated = excluded.updated",
                 t, 4, now_ms(), doing, err);
    if (st == MCP_STATUS_OK && e) st = add_event(c, e, err);
    return end(c, st, doing, err);
}

mcp_status mcp_catalog_set_state(mcp_catalog *c, const char *model, const char *version, mcp_version_state state,
                                 const char *reason, const mcp_catalog_event *e, mcp_err *err)
{
    if (state < 0 || state >= MCP_VERSION_STATE_COUNT) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "catalog: bad state");
    const char *doing = "change a version's state";
    mcp_status st = begin(c, doing, err);
    const char *t[4] = {state_names[state], reason ? reason : "", model, version};
    if (st == MCP_STATUS_OK)
        st = run(c, "UPDATE versions SET state = ?1, reason = ?2, updated = ?5 WHERE model = ?3 AND version = ?4", t, 4, now_ms(),
                 doing, err);
    if (st == MCP_STATUS_OK && sqlite3_changes(c->db) == 0)
        st = mcp_err_set(err, MCP_STATUS_NOT_FOUND, "catalog: no version %s of model '%s'", version, model);
    if (st == MCP_STATUS_OK && e) st = add_event(c, e, err);
    return end(c, st, doing, err);
}

mcp_status mcp_catalog_set_desired(mcp_catalog *c, const char *model, bool loaded, const char *current,
                                   const mcp_catalog_event *e, mcp_err *err)
{
    if (!mcp__desc_name_valid(model)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "catalog: invalid model name");
    const char *doing = "record the desired state";
    mcp_status st = begin(c, doing, err);
    const char *t[3] = {model, loaded ? "loaded" : "unloaded", current};
    if (st == MCP_STATUS_OK)
        st = run(c,
                 "INSERT INTO models (name, desired, current, updated) VALUES (?1, ?2, ?3, ?4) "
                 "ON CONFLICT (name) DO UPDATE SET desired = excluded.desired, current = COALESCE(excluded.current, current), "
                 "updated = excluded.updated",
                 t, 3, now_ms(), doing, err);
    if (st == MCP_STATUS_OK && e) st = add_event(c, e, err);
    return end(c, st, doing, err);
}

mcp_status mcp_catalog_set_tag(mcp_catalog *c, const char *model, const char *tag, const char *version, mcp_err *err)
{
    const char *doing = "set a tag";
    mcp_status st = begin(c, doing, err);
    const char *t[3] = {model, tag, version};
    if (st == MCP_STATUS_OK)
        st = run(c, "INSERT INTO tags (model, tag, version) VALUES (?1, ?2, ?3) ON CONFLICT (model, tag) DO UPDATE SET "
                    "version = excluded.version",
                 t, 3, 0, doing, err);
    return end(c, st, doing, err);
}

/* ---- reading back (every row checked) ---- */

static const char *col_text(sqlite3_stmt *q, int i)
{
    const unsigned char *s = sqlite3_column_text(q, i);
    return s ? (const char *)s : "";
}

mcp_status mcp_catalog_models(mcp_catalog *c, mcp_catalog_model **out, int *n, mcp_err *err)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(c->db,
                                "SELECT m.name, m.desired, m.current, v.manifest, v.state, v.reason FROM models m "
                                "LEFT JOIN versions v ON v.model = m.name AND v.version = m.current ORDER BY m.name",
                                -1, &q, NULL);
    if (rc != SQLITE_OK) return db_error(c, rc, "list models", err);
    mcp_status st = MCP_STATUS_OK;
    int cap = 0, count = 0;
    mcp_catalog_model *list = NULL;
    while (st == MCP_STATUS_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *name = col_text(q, 0), *desired = col_text(q, 1), *current = col_text(q, 2), *manifest = col_text(q, 3);
        const char *state = col_text(q, 4);
        mcp_catalog_model m;
        memset(&m, 0, sizeof m);
        /* A row that is not what this server writes is reported, not used. */
        if (!mcp__desc_name_valid(name) || (strcmp(desired, "loaded") && strcmp(desired, "unloaded")) ||
            strlen(current) >= sizeof m.current || (manifest[0] && !mcp_digest_valid(manifest)) ||
            (state[0] && !mcp__version_state_parse(state, &m.state))) {
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "catalog %s: model row '%.100s' is not valid", c->path, name);
            break;
        }
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            mcp_catalog_model *p = mcp_realloc(list, (size_t)cap * sizeof *list);
            if (!p) {
                st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
                break;
            }
            list = p;
        }
        snprintf(m.name, sizeof m.name, "%s", name);
        m.loaded = !strcmp(desired, "loaded");
        snprintf(m.current, sizeof m.current, "%s", current);
        snprintf(m.manifest, sizeof m.manifest, "%s", manifest);
        snprintf(m.reason, sizeof m.reason, "%s", col_text(q, 5));
        m.has_version = manifest[0] != '\0';
        list[count++] = m;
    }
    if (st == MCP_STATUS_OK && rc != SQLITE_DONE) st = db_error(c, rc, "list models", err);
    sqlite3_finalize(q);
    if (st != MCP_STATUS_OK) {
        mcp_free(list);
        return st;
    }
    *out = list;
    *n = count;
    return MCP_STATUS_OK;
}

mcp_status mcp_catalog_events(mcp_catalog *c, const char *target, int64_t after_id, int limit, mcp_catalog_event_fn fn,
                              void *user, mcp_err *err)
{
    sqlite3_stmt *q = NULL;
    const char *sql = target ? "SELECT id, time, actor, action, target, outcome, reason FROM events WHERE id > ?1 AND "
                               "(target = ?2 OR target LIKE ?3 ESCAPE '\\') ORDER BY id LIMIT ?4"
                             : "SELECT id, time, actor, action, target, outcome, reason FROM events WHERE id > ?1 "
                               "ORDER BY id LIMIT ?4";
    int rc = sqlite3_prepare_v2(c->db, sql, -1, &q, NULL);
    char like[600];
    if (target) {
        /* NAME and NAME:VERSION targets both belong to NAME. */
        size_t o = 0;
        for (const char *p = target; *p && o + 3 < sizeof like; p++) {
            if (*p == '%' || *p == '_' || *p == '\\') like[o++] = '\\';
            like[o++] = *p;
        }
        like[o++] = ':';
        like[o++] = '%';
        like[o] = '\0';
    }
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(q, 1, after_id);
    if (rc == SQLITE_OK && target) rc = sqlite3_bind_text(q, 2, target, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK && target) rc = sqlite3_bind_text(q, 3, like, -1, SQLITE_TRANSIENT);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(q, 4, limit > 0 ? limit : -1);
    if (rc != SQLITE_OK) {
        mcp_status st = db_error(c, rc, "read events", err);
        sqlite3_finalize(q);
        return st;
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        mcp_catalog_event e = {
            .id = sqlite3_column_int64(q, 0),
            .time_ms = sqlite3_column_int64(q, 1),
            .actor = col_text(q, 2),
            .action = col_text(q, 3),
            .target = col_text(q, 4),
            .outcome = col_text(q, 5),
            .reason = col_text(q, 6),
        };
        if (!fn(user, &e)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    mcp_status st = rc == SQLITE_DONE ? MCP_STATUS_OK : db_error(c, rc, "read events", err);
    sqlite3_finalize(q);
    return st;
}

mcp_status mcp_catalog_check(mcp_catalog *c, char *problem, size_t cap, mcp_err *err)
{
    problem[0] = '\0';
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(c->db, "PRAGMA integrity_check(1)", -1, &q, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *r = col_text(q, 0);
        if (strcmp(r, "ok")) snprintf(problem, cap, "%s", r);
        rc = SQLITE_OK;
    }
    mcp_status st = rc == SQLITE_OK ? MCP_STATUS_OK : db_error(c, rc, "check", err);
    sqlite3_finalize(q);
    return st;
}

sqlite3 *mcp__catalog_db(mcp_catalog *c) { return c->db; }

mcp_status mcp_catalog_set_rollout(mcp_catalog *c, const char *model, const char *state, mcp_err *err)
{
    if (!mcp__desc_name_valid(model)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "catalog: invalid model name");
    const char *doing = "record a rollout";
    mcp_status st = begin(c, doing, err);
    const char *t[2] = {model, state};
    if (st == MCP_STATUS_OK)
        st = state ? run(c,
                         "INSERT INTO rollouts (model, state, updated) VALUES (?1, ?2, ?3) ON CONFLICT (model) DO UPDATE SET "
                         "state = excluded.state, updated = excluded.updated",
                         t, 2, now_ms(), doing, err)
                   : run(c, "DELETE FROM rollouts WHERE model = ?1", t, 1, 0, doing, err);
    return end(c, st, doing, err);
}

mcp_status mcp_catalog_rollout(mcp_catalog *c, const char *model, char **state, mcp_err *err)
{
    *state = NULL;
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(c->db, "SELECT state FROM rollouts WHERE model = ?1", -1, &q, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(q, 1, model, -1, SQLITE_TRANSIENT);
    mcp_status st = MCP_STATUS_OK;
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            if (!(*state = mcp_strdup(col_text(q, 0)))) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        } else if (rc != SQLITE_DONE) {
            st = db_error(c, rc, "read a rollout", err);
        }
    } else {
        st = db_error(c, rc, "read a rollout", err);
    }
    sqlite3_finalize(q);
    return st;
}
