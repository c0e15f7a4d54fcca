/*
 * Route tables under contention: reader threads route and pin requests
 * without pause while the main thread changes the rollout back and forth
 * (canary weights, shadows, promotions, undos, applies). Every lookup finds
 * a loaded version of the right name, canary shares follow the weights, and
 * when all is done every block the repository allocated has been freed
 * (under ASan, a reader touching a freed table fails the run).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"
#include "test_util.h"

static char msg[1024];
static mcp_err err = {msg, sizeof msg};
static const char *model_path;

static mcp_descriptor *digits(const char *version, const char *rollout)
{
    char text[1024];
    snprintf(text, sizeof text, "name: digits\nversion: %s\npath: %s\nwarmup: 0\n%s", version, model_path, rollout ? rollout : "");
    mcp_descriptor_defaults dd = mcp_descriptor_defaults_default();
    mcp_diags diags = {0};
    mcp_descriptor *d = NULL;
    mcp_status st = mcp_descriptor_parse_yaml(text, strlen(text), "routes.yaml", &dd, &d, &diags);
    if (st != MCP_STATUS_OK) {
        char report[1024];
        mcp_diags_format(&diags, "routes.yaml", report, sizeof report);
        fprintf(stderr, "%s", report);
    }
    mcp_diags_clear(&diags);
    return d;
}

#define MIN_READS 20000 /* per reader, whatever the scheduler does */

static atomic_int started;

typedef struct reader {
    mcp_repository *r;
    atomic_bool *stop;
    int64_t routed, canary, bad, pinned;
} reader;

static void *read_main(void *arg)
{
    reader *rd = arg;
    atomic_fetch_add(&started, 1);
    for (int64_t n = 0; (n < MIN_READS || !atomic_load(rd->stop)) && n < 50000000; n++) {
        mcp_route rt;
        if (mcp_repository_route(rd->r, "digits", (n & 1) ? NULL : "id-7", &rt)) {
            rd->routed++;
            rd->canary += rt.role == MCP_ROUTE_CANARY;
            if (strcmp(rt.v->name, "digits") != 0 || rt.v->version[0] != 'v') rd->bad++;
            mcp_route_release(&rt);
        } else {
            /* No canary or shadow at this moment: the primary answers. */
            mcp_model_version *p = mcp_repository_get(rd->r, "digits", NULL);
            if (!p) rd->bad++;
            else rd->routed++;
            mcp_model_version_release(p);
        }
        mcp_model_version *v = mcp_repository_get(rd->r, "digits", "v1.0.0");
        if (v) {
            rd->pinned++;
            if (strcmp(v->version, "v1.0.0") != 0) rd->bad++;
            mcp_model_version_release(v);
        }
        if (mcp_repository_get(rd->r, "nosuch", NULL)) rd->bad++;
    }
    return NULL;
}

static void test_readers_during_changes(void)
{
    mcp_repository *r = mcp_repository_create(NULL);
    TU_REQUIRE(r != NULL);
    TU_REQUIRE_OK(mcp_repository_apply(r, digits("v1.0.0", NULL), &err), msg);
    TU_REQUIRE_OK(mcp_repository_apply(r, digits("v1.1.0", "rollout:\n  canary: {version: v1.1.0, weight: 25}\n"), &err), msg);
    atomic_bool stop = false;
    reader rd[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        rd[i] = (reader){.r = r, .stop = &stop};
        pthread_create(&th[i], NULL, read_main, &rd[i]);
    }
    while (atomic_load(&started) < 4) sched_yield(); /* the changes overlap the reads */
    for (int round = 0; round < 100; round++) {
        const char *v1 = "v1.1.0";
        double w = (double)(round % 5) * 10;
        /* Canary weight up and down; the primary stays v1.0.0. */
        TU_CHECK_STATUS(mcp_repository_set_weights(r, "digits", 1, &v1, &w, &err), MCP_STATUS_OK, msg);
        if (round % 10 == 3) {
            TU_CHECK_STATUS(mcp_repository_promote(r, "digits", "v1.1.0", &err), MCP_STATUS_OK, msg);
            TU_CHECK_STATUS(mcp_repository_undo(r, "digits", &err), MCP_STATUS_OK, msg);
        }
        if (round % 25 == 7) TU_CHECK_STATUS(mcp_repository_set_shadow(r, "digits", "v1.1.0", 0.5, NULL, &err), MCP_STATUS_OK, msg);
        if (round % 25 == 9) {
            /* A shadow back to canary duty. */
            double ww = 20;
            TU_CHECK_STATUS(mcp_repository_set_weights(r, "digits", 1, &v1, &ww, &err), MCP_STATUS_OK, msg);
        }
        if (round % 20 == 19) {
            /* A new canary version replaces the old one. */
            TU_CHECK_STATUS(mcp_repository_apply(r, digits("v1.1.0", "rollout:\n  canary: {version: v1.1.0, weight: 30}\n"), &err),
                            MCP_STATUS_OK, msg);
        }
    }
    /* A fixed weight, then the split over the readers' unkeyed routes. */
    const char *v1 = "v1.1.0";
    double w = 30;
    TU_CHECK_STATUS(mcp_repository_set_weights(r, "digits", 1, &v1, &w, &err), MCP_STATUS_OK, msg);
    atomic_store(&stop, true);
    int64_t routed = 0, bad = 0, pinned = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        routed += rd[i].routed;
        bad += rd[i].bad;
        pinned += rd[i].pinned;
    }
    TU_CHECK(routed >= 4 * MIN_READS);
    TU_CHECK(pinned > 0);
    TU_CHECK_INT(bad, 0);
    /* 10,000 unkeyed routes at 30%: the Weyl sequence splits them evenly. */
    int canary = 0;
    for (int i = 0; i < 10000; i++) {
        mcp_route rt;
        TU_REQUIRE(mcp_repository_route(r, "digits", NULL, &rt));
        canary += rt.role == MCP_ROUTE_CANARY;
        mcp_route_release(&rt);
    }
    TU_CHECK(canary >= 2950 && canary <= 3050);
    mcp_rollout_state rs;
    TU_CHECK_STATUS(mcp_repository_rollout(r, "digits", &rs, &err), MCP_STATUS_OK, msg);
    TU_CHECK_STR(rs.primary, "v1.0.0");
    TU_CHECK_STR(rs.canary, "v1.1.0");
    mcp_route_watch_release(rs.watch);
    TU_CHECK_STATUS(mcp_repository_unload(r, "digits", &err), MCP_STATUS_OK, msg);
    mcp_route gone;
    TU_CHECK(!mcp_repository_route(r, "digits", NULL, &gone));
    mcp_repository_destroy(r);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_routes MODEL.onnx\n");
        return 2;
    }
    model_path = argv[1];
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_readers_during_changes);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("registry_routes");
}
