/*
 * The catalog on a real SQLite file: schema created once, versions and
 * desired state read back, the event log append-only and filtered by model
 * (LIKE wildcards in names escaped), a change that fails (disk full,
 * simulated with max_page_count; the catalog locked by another connection)
 * leaves nothing half-applied and says why in words, and damaged or
 * foreign contents refused naming what is wrong.
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include "registry/catalog_util.h"
#include "test_util.h"

static char msg[1024];
static mcp_err err = {msg, sizeof msg};
#define DIGEST_A "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
#define DIGEST_B "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct seen {
    int n;
    char targets[64][128];
    char actions[64][64];
    int64_t last_id;
} seen;

static bool collect(void *user, const mcp_catalog_event *e)
{
    seen *s = user;
    if (s->n < 64) {
        snprintf(s->targets[s->n], sizeof s->targets[0], "%s", e->target);
        snprintf(s->actions[s->n], sizeof s->actions[0], "%s", e->action);
    }
    s->n++;
    s->last_id = e->id;
    return true;
}

static void db_path(char *out, size_t cap, const char *dir) { snprintf(out, cap, "%s/catalog.db", dir); }


static void test_versions_and_desired_state(void)
{
    char dir[1024], path[2048];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "catalog") == 0);
    db_path(path, sizeof path, dir);
    mcp_catalog *c;
    TU_REQUIRE_OK(mcp_catalog_open(path, &c, &err), msg);
    mcp_catalog_event applied = {.actor = "admin", .action = "apply", .target = "digits:v1.0.0", .outcome = "ok"};
    TU_REQUIRE_OK(mcp_catalog_record_version(c, "digits", "v1.0.0", DIGEST_A, &applied, &err), msg);
    TU_REQUIRE_OK(mcp_catalog_set_state(c, "digits", "v1.0.0", MCP_VERSION_READY, NULL, NULL, &err), msg);
    TU_REQUIRE_OK(mcp_catalog_set_desired(c, "digits", true, "v1.0.0", NULL, &err), msg);
    TU_REQUIRE_OK(mcp_catalog_record_version(c, "other", "3", DIGEST_B, NULL, &err), msg);
    TU_REQUIRE_OK(mcp_catalog_set_state(c, "other", "3", MCP_VERSION_FAILED, "load failed: bad model", NULL, &err), msg);
    TU_REQUIRE_OK(mcp_catalog_set_desired(c, "other", false, "3", NULL, &err), msg);
    TU_CHECK_STATUS(mcp_catalog_set_state(c, "digits", "v9", MCP_VERSION_READY, NULL, NULL, &err), MCP_STATUS_NOT_FOUND, msg);
    TU_CHECK_CONTAINS(msg, "no version v9 of model 'digits'");
    TU_CHECK_STATUS(mcp_catalog_record_version(c, "../x", "1", DIGEST_A, NULL, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_STATUS(mcp_catalog_record_version(c, "x", "1", "sha256:nothex", NULL, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    mcp_catalog_close(c);

    /* After a restart (a new connection), everything is there. */
    TU_REQUIRE_OK(mcp_catalog_open(path, &c, &err), msg);
    mcp_catalog_model *m;
    int n;
    TU_REQUIRE_OK(mcp_catalog_models(c, &m, &n, &err), msg);
    TU_CHECK_INT(n, 2);
    if (n == 2) {
        TU_CHECK_STR(m[0].name, "digits");
        TU_CHECK(m[0].loaded);
        TU_CHECK_STR(m[0].current, "v1.0.0");
        TU_CHECK_STR(m[0].manifest, DIGEST_A);
        TU_CHECK_INT(m[0].state, MCP_VERSION_READY);
        TU_CHECK_STR(m[1].name, "other");
        TU_CHECK(!m[1].loaded);
        TU_CHECK_INT(m[1].state, MCP_VERSION_FAILED);
        TU_CHECK_STR(m[1].reason, "load failed: bad model");
    }
    mcp_free(m);
    /* Unloading keeps the current version (a restart knows what to load). */
    TU_REQUIRE_OK(mcp_catalog_set_desired(c, "digits", false, NULL, NULL, &err), msg);
    TU_REQUIRE_OK(mcp_catalog_models(c, &m, &n, &err), msg);
    TU_CHECK(n >= 1 && !m[0].loaded && !strcmp(m[0].current, "v1.0.0"));
    mcp_free(m);
    char problem[256];
    TU_REQUIRE_OK(mcp_catalog_check(c, problem, sizeof problem, &err), msg);
    TU_CHECK_STR(problem, "");
    mcp_catalog_close(c);
    tu_remove_tree(dir);
}

static void test_event_log(void)
{
    char dir[1024], path[2048];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "catalog") == 0);
    db_path(path, sizeof path, dir);
    mcp_catalog *c;
    TU_REQUIRE_OK(mcp_catalog_open(path, &c, &err), msg);
    const char *targets[] = {"digits", "digits:v1", "digits2:v1", "digitsXv1", "digits_x:v1", "digits:v2"};
    for (int i = 0; i < 6; i++) {
        mcp_catalog_event e = {.action = i % 2 ? "swap" : "apply", .target = targets[i], .reason = "because"};
        TU_REQUIRE_OK(mcp_catalog_add_event(c, &e, &err), msg);
    }
    seen all = {0}, digits = {0}, under = {0}, later = {0};
    TU_REQUIRE_OK(mcp_catalog_events(c, NULL, 0, 0, collect, &all, &err), msg);
    TU_CHECK_INT(all.n, 6);
    TU_REQUIRE_OK(mcp_catalog_events(c, "digits", 0, 0, collect, &digits, &err), msg);
    TU_CHECK_INT(digits.n, 3);
    if (digits.n == 3) {
        TU_CHECK_STR(digits.targets[0], "digits");
        TU_CHECK_STR(digits.targets[1], "digits:v1");
        TU_CHECK_STR(digits.targets[2], "digits:v2");
        TU_CHECK_STR(digits.actions[1], "swap");
    }
    /* '_' is a name character, not a wildcard. */
    TU_REQUIRE_OK(mcp_catalog_events(c, "digits_x", 0, 0, collect, &under, &err), msg);
    TU_CHECK_INT(under.n, 1);
    /* Following: only what came after the last id seen. */
    TU_REQUIRE_OK(mcp_catalog_events(c, NULL, all.last_id - 2, 0, collect, &later, &err), msg);
    TU_CHECK_INT(later.n, 2);
    seen one = {0};
    TU_REQUIRE_OK(mcp_catalog_events(c, NULL, 0, 1, collect, &one, &err), msg);
    TU_CHECK_INT(one.n, 1);
    /* Append-only, whoever asks. */
    char *why = NULL;
    TU_CHECK(sqlite3_exec(mcp__catalog_db(c), "UPDATE events SET outcome = 'forged'", NULL, NULL, &why) != SQLITE_OK);
    TU_CHECK_CONTAINS(why, "append-only");
    sqlite3_free(why);
    why = NULL;
    TU_CHECK(sqlite3_exec(mcp__catalog_db(c), "DELETE FROM events", NULL, NULL, &why) != SQLITE_OK);
    sqlite3_free(why);
    mcp_catalog_close(c);
    tu_remove_tree(dir);
}

static void test_failures_leave_nothing_half_done(void)
{
    char dir[1024], path[2048];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "catalog") == 0);
    db_path(path, sizeof path, dir);
    mcp_catalog *c;
    TU_REQUIRE_OK(mcp_catalog_open(path, &c, &err), msg);

    /* Locked: another connection holds a write transaction. */
    sqlite3 *other;
    TU_REQUIRE(sqlite3_open(path, &other) == SQLITE_OK);
    TU_REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_busy_timeout(mcp__catalog_db(c), 50);
    TU_CHECK_STATUS(mcp_catalog_record_version(c, "m", "v1", DIGEST_A, NULL, &err), MCP_STATUS_UNAVAILABLE, msg);
    TU_CHECK_CONTAINS(msg, "locked by another process");
    TU_CHECK_CONTAINS(msg, "nothing was changed");
    sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(other);

    /* Disk full: the file may not grow. A version and its event go
     * together or not at all. */
    sqlite3 *db = mcp__catalog_db(c);
    sqlite3_stmt *q;
    int pages = 0;
    TU_REQUIRE(sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &q, NULL) == SQLITE_OK);
    if (sqlite3_step(q) == SQLITE_ROW) pages = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA max_page_count = %d", pages + 1);
    TU_REQUIRE(sqlite3_exec(db, pragma, NULL, NULL, NULL) == SQLITE_OK);
    char big[3000];
    memset(big, 'r', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mcp_status st = MCP_STATUS_OK;
    int ok = 0;
    for (int i = 0; i < 200 && st == MCP_STATUS_OK; i++) {
        char version[16];
        snprintf(version, sizeof version, "v%d", i);
        mcp_catalog_event e = {.action = "apply", .target = "m", .reason = big};
        st = mcp_catalog_record_version(c, "m", version, DIGEST_A, &e, &err);
        if (st == MCP_STATUS_OK) ok++;
    }
    TU_CHECK_INT(st, MCP_STATUS_RESOURCE_EXHAUSTED);
    TU_CHECK_CONTAINS(msg, "the disk is full");
    /* Exactly as many versions as events: the failed pair left no half. */
    int versions = -1, events = -1;
    TU_REQUIRE(sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM versions), (SELECT count(*) FROM events)", -1, &q, NULL) ==
               SQLITE_OK);
    if (sqlite3_step(q) == SQLITE_ROW) versions = sqlite3_column_int(q, 0), events = sqlite3_column_int(q, 1);
    sqlite3_finalize(q);
    TU_CHECK_INT(versions, ok);
    TU_CHECK_INT(events, ok);
    mcp_catalog_close(c);
    tu_remove_tree(dir);
}

static void write_bytes(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

static void test_damaged_and_foreign_files(void)
{
    char dir[1024], path[2048];
    TU_REQUIRE(tu_make_temp_dir(dir, sizeof dir, "catalog") == 0);
    db_path(path, sizeof path, dir);
    const char *junk = "this is not a database, just some text that is long enough to look like a header....";
    write_bytes(path, junk, strlen(junk));
    mcp_catalog *c = NULL;
    TU_CHECK_STATUS(mcp_catalog_open(path, &c, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "damaged or not a catalog");
    TU_CHECK(c == NULL);
    unlink(path);

    /* A schema from a later server is not guessed at. */
    sqlite3 *db;
    TU_REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
    sqlite3_close(db);
    TU_CHECK_STATUS(mcp_catalog_open(path, &c, &err), MCP_STATUS_UNSUPPORTED, msg);
    TU_CHECK_CONTAINS(msg, "schema 99");
    unlink(path);

    /* Rows this server would never write are reported, not used. */
    TU_REQUIRE_OK(mcp_catalog_open(path, &c, &err), msg);
    TU_REQUIRE(sqlite3_exec(mcp__catalog_db(c), "INSERT INTO models (name, desired, current, updated) VALUES ('../etc', 'loaded', "
                                                 "'v1', 0)",
                            NULL, NULL, NULL) == SQLITE_OK);
    mcp_catalog_model *m = NULL;
    int n = -1;
    TU_CHECK_STATUS(mcp_catalog_models(c, &m, &n, &err), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'../etc' is not valid");
    TU_CHECK(m == NULL);
    mcp_catalog_close(c);
    tu_remove_tree(dir);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_versions_and_desired_state);
    TU_RUN(test_event_log);
    TU_RUN(test_failures_leave_nothing_half_done);
    TU_RUN(test_damaged_and_foreign_files);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("registry_catalog");
}
