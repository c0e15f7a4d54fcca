/*
 * Per-tenant quality of service (src/serve/qos.c): the request-rate bucket
 * (a burst at once, then refusals naming the tenant with a retry-after,
 * refilled with time), the in-flight limit, generated-token debt (refuses
 * generation, not other calls, and is paid back at the tenant's rate), the
 * table's bound (tenants past it share the overflow entry), and the
 * weighted-fair-queuing clock (shares by weight, no credit for an idle
 * tenant, one tenant's tags in arrival order).
 *
 * Time is passed in: every clock value is explicit, nothing sleeps.
 */
#include <stdio.h>
#include <string.h>

#include "serve/qos.h"
#include "test_util.h"

#define SEC 1000000000LL

static mcp_tenant_limits no_limits(void)
{
    mcp_tenant_limits l;
    memset(&l, 0, sizeof l);
    l.weight = 1;
    l.class_ = MCP_CLASS_NONE;
    return l;
}

/* Admits one request; on a refusal, *retry and msg say why. */
static mcp_status admit(mcp_qos *q, const char *tenant, const mcp_tenant_limits *l, bool generate, int64_t now,
                        int64_t *retry, char *msg, size_t cap)
{
    mcp_err err = {msg, cap};
    msg[0] = '\0';
    return mcp_qos_admit(q, tenant, l, generate, now, retry, &err);
}

/* ---- admission ---- */

static void test_rate(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_qos *q = mcp_qos_create();
    TU_REQUIRE(q);
    mcp_tenant_limits l = no_limits();
    l.rps = 5;
    l.burst = 5;
    char msg[256];
    int64_t retry = -1, t0 = 7 * SEC;
    /* A full bucket: the burst goes at once. */
    for (int i = 0; i < 5; i++) {
        TU_CHECK_STATUS(admit(q, "t1", &l, false, t0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
        TU_CHECK_INT(retry, 0);
    }
    TU_CHECK_STATUS(admit(q, "t1", &l, false, t0, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK(retry >= 1);
    TU_CHECK_INT(retry, 1); /* one request back in 0.2 s, rounded up */
    TU_CHECK_CONTAINS(msg, "tenant 't1'");
    TU_CHECK_CONTAINS(msg, "5 requests/s");
    TU_CHECK_CONTAINS(msg, "burst 5");
    TU_CHECK_CONTAINS(msg, "retry after 1 s");
    TU_CHECK_INT(mcp_qos_in_flight(q, "t1"), 5); /* the refused one is not in flight */
    /* Another tenant has a bucket of its own. */
    TU_CHECK_STATUS(admit(q, "t2", &l, false, t0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    /* 0.1 s: half a request; 0.2 s: one; then empty again. */
    TU_CHECK_STATUS(admit(q, "t1", &l, false, t0 + SEC / 10, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED,
                    msg);
    TU_CHECK_STATUS(admit(q, "t1", &l, false, t0 + SEC / 5, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(admit(q, "t1", &l, false, t0 + SEC / 5, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED,
                    msg);
    /* A long pause refills to the burst, not beyond. */
    int64_t t1 = t0 + 100 * SEC;
    int ok = 0;
    for (int i = 0; i < 20; i++)
        if (admit(q, "t1", &l, false, t1, &retry, msg, sizeof msg) == MCP_STATUS_OK) ok++;
    TU_CHECK_INT(ok, 5);
    for (int i = 0; i < 11; i++) mcp_qos_release(q, "t1");
    TU_CHECK_INT(mcp_qos_in_flight(q, "t1"), 0);
    mcp_qos_release(q, "t1"); /* one too many: stays at 0 */
    TU_CHECK_INT(mcp_qos_in_flight(q, "t1"), 0);

    /* A slow rate: the retry is the time until one request, rounded up;
     * no burst given means a depth of max(1, rps). */
    l.rps = 0.5;
    l.burst = 0;
    TU_CHECK_STATUS(admit(q, "", &l, false, t0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(admit(q, "", &l, false, t0, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_INT(retry, 2);
    TU_CHECK_CONTAINS(msg, "tenant 'anonymous'");
    TU_CHECK_CONTAINS(msg, "0.5 requests/s (burst 1)");
    TU_CHECK_STATUS(admit(q, "", &l, false, t0 + SEC, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_INT(retry, 1);
    TU_CHECK_STATUS(admit(q, "", &l, false, t0 + 2 * SEC, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    /* NULL is the anonymous tenant too. */
    TU_CHECK_INT(mcp_qos_in_flight(q, NULL), 2);

    /* Without a rate, nothing is refused. */
    l = no_limits();
    for (int i = 0; i < 1000; i++)
        if (admit(q, "t3", &l, true, t0, &retry, msg, sizeof msg) != MCP_STATUS_OK) ok = -1;
    TU_CHECK(ok != -1);
    TU_CHECK_INT(mcp_qos_in_flight(q, "t3"), 1000);
    TU_CHECK_INT(mcp_qos_in_flight(q, "never-seen"), 0);
    mcp_qos_destroy(q);
    mcp_qos_destroy(NULL);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_concurrency(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_qos *q = mcp_qos_create();
    TU_REQUIRE(q);
    mcp_tenant_limits l = no_limits();
    l.max_concurrent = 2;
    char msg[256];
    int64_t retry = -1;
    TU_CHECK_STATUS(admit(q, "t1", &l, false, 0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(admit(q, "t1", &l, true, 0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_INT(mcp_qos_in_flight(q, "t1"), 2);
    TU_CHECK_STATUS(admit(q, "t1", &l, false, 0, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_INT(retry, 1);
    TU_CHECK_CONTAINS(msg, "tenant 't1'");
    TU_CHECK_CONTAINS(msg, "2 requests in flight");
    TU_CHECK_INT(mcp_qos_in_flight(q, "t1"), 2); /* refused: not counted */
    mcp_qos_release(q, "t1");
    TU_CHECK_INT(mcp_qos_in_flight(q, "t1"), 1);
    TU_CHECK_STATUS(admit(q, "t1", &l, false, 0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(admit(q, "t1", &l, false, 0, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);

    /* A refusal for concurrency takes no token from the rate bucket. */
    l.rps = 1;
    l.burst = 1;
    TU_CHECK_STATUS(admit(q, "t2", &l, false, 0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(admit(q, "t2", &l, false, 0, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_CONTAINS(msg, "requests/s");
    TU_CHECK_STATUS(admit(q, "t2", &l, false, SEC, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_STATUS(admit(q, "t2", &l, false, 2 * SEC, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_CONTAINS(msg, "in flight");
    mcp_qos_release(q, "t2");
    TU_CHECK_STATUS(admit(q, "t2", &l, false, 2 * SEC, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_qos_destroy(q);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_token_debt(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_qos *q = mcp_qos_create();
    TU_REQUIRE(q);
    mcp_tenant_limits l = no_limits();
    l.tokens_per_s = 100;
    char msg[256];
    int64_t retry = -1, t0 = 3 * SEC;
    TU_CHECK_STATUS(admit(q, "g", &l, true, t0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    /* Within its second's worth: still admitted. */
    mcp_qos_charge_tokens(q, "g", &l, 60, t0);
    TU_CHECK_STATUS(admit(q, "g", &l, true, t0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    /* 100 - 60 - 290 = -250: a debt of 2.5 s. */
    mcp_qos_charge_tokens(q, "g", &l, 290, t0);
    TU_CHECK_STATUS(admit(q, "g", &l, true, t0, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    TU_CHECK_INT(retry, 3);
    TU_CHECK_CONTAINS(msg, "tenant 'g'");
    TU_CHECK_CONTAINS(msg, "100 generated tokens/s");
    TU_CHECK_CONTAINS(msg, "retry after 3 s");
    /* Calls that generate nothing are not held back by the debt. */
    TU_CHECK_STATUS(admit(q, "g", &l, false, t0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_INT(mcp_qos_in_flight(q, "g"), 3);
    /* Paid back at the tenant's rate: -50 after 2 s, +50 after 3 s. */
    TU_CHECK_STATUS(admit(q, "g", &l, true, t0 + 2 * SEC, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED,
                    msg);
    TU_CHECK_INT(retry, 1);
    TU_CHECK_STATUS(admit(q, "g", &l, true, t0 + 3 * SEC, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    /* Charges without a token rate, or of nothing, change nothing. */
    mcp_tenant_limits free_l = no_limits();
    mcp_qos_charge_tokens(q, "h", &free_l, 1000000, t0);
    TU_CHECK_STATUS(admit(q, "h", &l, true, t0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_qos_charge_tokens(q, "h", &l, 0, t0);
    mcp_qos_charge_tokens(q, "h", &l, -5, t0);
    TU_CHECK_STATUS(admit(q, "h", &l, true, t0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_qos_destroy(q);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_table_bound(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_qos *q = mcp_qos_create();
    TU_REQUIRE(q);
    mcp_tenant_limits l = no_limits();
    char msg[256], name[32];
    int64_t retry;
    enum { N = MCP_QOS_MAX_TENANTS + 10 };
    int ok = 0;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "t%d", i);
        if (admit(q, name, &l, false, 0, &retry, msg, sizeof msg) == MCP_STATUS_OK) ok++;
    }
    TU_CHECK_INT(ok, N);
    /* The first MCP_QOS_MAX_TENANTS have entries of their own... */
    int own = 0;
    for (int i = 0; i < MCP_QOS_MAX_TENANTS; i++) {
        snprintf(name, sizeof name, "t%d", i);
        if (mcp_qos_in_flight(q, name) == 1) own++;
    }
    TU_CHECK_INT(own, MCP_QOS_MAX_TENANTS);
    /* ... the ten after share the anonymous tenant's. */
    snprintf(name, sizeof name, "t%d", MCP_QOS_MAX_TENANTS);
    TU_CHECK_INT(mcp_qos_in_flight(q, name), 10);
    TU_CHECK_INT(mcp_qos_in_flight(q, ""), 10);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "t%d", i);
        mcp_qos_release(q, name);
    }
    TU_CHECK_INT(mcp_qos_in_flight(q, ""), 0);
    TU_CHECK_INT(mcp_qos_in_flight(q, "t0"), 0);
    /* Shared state means shared limits; the message names the caller. */
    l.max_concurrent = 1;
    snprintf(name, sizeof name, "t%d", MCP_QOS_MAX_TENANTS + 1);
    TU_CHECK_STATUS(admit(q, name, &l, false, 0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    snprintf(name, sizeof name, "t%d", MCP_QOS_MAX_TENANTS + 2);
    TU_CHECK_STATUS(admit(q, name, &l, false, 0, &retry, msg, sizeof msg), MCP_STATUS_RESOURCE_EXHAUSTED, msg);
    char want[64];
    snprintf(want, sizeof want, "tenant '%s'", name);
    TU_CHECK_CONTAINS(msg, want);
    /* A tenant with its own entry is not affected. */
    TU_CHECK_STATUS(admit(q, "t5", &l, false, 0, &retry, msg, sizeof msg), MCP_STATUS_OK, msg);
    mcp_qos_destroy(q);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

/* ---- weighted fair queuing ---- */

/*
 * n always-backlogged tenants: each has one request tagged and waiting; the
 * smallest tag is served (ties: the lower index, as arrival order would
 * have it), and the tenant served tags its next request. counts[i]: how
 * often tenant i was served in `services`.
 */
static void backlogged(mcp_wfq *w, int n, const char *const *names, const double *weights, double cost,
                       int services, int *counts)
{
    double tag[8];
    for (int i = 0; i < n; i++) {
        counts[i] = 0;
        tag[i] = mcp_wfq_tag(w, names[i], weights[i], cost);
    }
    for (int s = 0; s < services; s++) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (tag[i] < tag[best]) best = i;
        mcp_wfq_served(w, tag[best]);
        counts[best]++;
        tag[best] = mcp_wfq_tag(w, names[best], weights[best], cost);
    }
}

static void test_wfq_shares(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_wfq *w = mcp_wfq_create();
    TU_REQUIRE(w);
    static const char *const two[] = {"a", "b"};
    static const double w12[] = {1, 2};
    int c[3];
    backlogged(w, 2, two, w12, 1, 3000, c);
    TU_CHECK_INT(c[0] + c[1], 3000);
    TU_CHECK_NEAR(c[0], 1000, 20);
    TU_CHECK_NEAR(c[1], 2000, 40);
    mcp_wfq_destroy(w);

    /* Equal weights, equal shares; a larger cost buys fewer services. */
    w = mcp_wfq_create();
    static const char *const three[] = {"x", "y", "z"};
    static const double w111[] = {1, 1, 1};
    backlogged(w, 3, three, w111, 1, 3000, c);
    for (int i = 0; i < 3; i++) TU_CHECK_NEAR(c[i], 1000, 20);
    mcp_wfq_destroy(w);

    /* Shares hold for costs that are not whole numbers and for weights
     * that do not divide them (rows, tokens). */
    w = mcp_wfq_create();
    static const double w13[] = {0.5, 1.5};
    backlogged(w, 2, two, w13, 7, 4000, c);
    TU_CHECK_NEAR(c[0], 1000, 20);
    TU_CHECK_NEAR(c[1], 3000, 60);
    mcp_wfq_destroy(w);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_wfq_idle(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_wfq *w = mcp_wfq_create();
    TU_REQUIRE(w);
    static const char *const ab[] = {"a", "b"};
    static const double w11[] = {1, 1};
    int c[2];
    /* "b" alone for a while ("a" idle: not tagged), the clock moves on. */
    double clock = 0;
    for (int i = 0; i < 1000; i++) {
        clock = mcp_wfq_tag(w, "b", 1, 1);
        mcp_wfq_served(w, clock);
    }
    /* "a" returns: its first tag starts at the clock, not at 0. */
    double ta = mcp_wfq_tag(w, "a", 1, 1);
    TU_CHECK(ta >= clock);
    TU_CHECK_NEAR(ta, clock + 1, 1e-9);
    /* A tenant never seen before: the same. */
    TU_CHECK(mcp_wfq_tag(w, "c", 4, 1) >= clock);
    /* From now on both backlogged: "a" gets its share, no burst. */
    backlogged(w, 2, ab, w11, 1, 200, c);
    TU_CHECK(c[0] <= 102);
    TU_CHECK(c[1] >= 98);
    mcp_wfq_destroy(w);

    /* One tenant's tags never go down, so its requests keep arrival order,
     * even when served out of order by priority; weight <= 0 counts as 1. */
    w = mcp_wfq_create();
    double t1 = mcp_wfq_tag(w, "", 1, 1), t2 = mcp_wfq_tag(w, "", 1, 1);
    mcp_wfq_served(w, t2); /* a more urgent one went first */
    double t3 = mcp_wfq_tag(w, "", 0, 1), t4 = mcp_wfq_tag(w, "", -3, 1);
    mcp_wfq_served(w, t1); /* the clock does not go back */
    double t5 = mcp_wfq_tag(w, "", 1, 1);
    TU_CHECK(t1 < t2 && t2 < t3 && t3 < t4 && t4 < t5);
    TU_CHECK_NEAR(t4 - t3, 1, 1e-12);
    TU_CHECK_NEAR(t5 - t4, 1, 1e-12);
    mcp_wfq_destroy(w);
    mcp_wfq_destroy(NULL);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

static void test_wfq_bound(void)
{
    int64_t live = mcp_alloc_live_count();
    mcp_wfq *w = mcp_wfq_create();
    TU_REQUIRE(w);
    char name[32];
    int ok = 0;
    for (int i = 0; i < MCP_QOS_MAX_TENANTS + 10; i++) {
        snprintf(name, sizeof name, "t%d", i);
        if (mcp_wfq_tag(w, name, 1, 1) == 1) ok++; /* the clock is 0: each starts there */
    }
    TU_CHECK_INT(ok, MCP_QOS_MAX_TENANTS + 1); /* the ten past the bound share one finish tag */
    /* Known tenants are found again. */
    TU_CHECK_NEAR(mcp_wfq_tag(w, "t0", 1, 1), 2, 1e-12);
    TU_CHECK_NEAR(mcp_wfq_tag(w, "t4095", 1, 1), 2, 1e-12);
    mcp_wfq_destroy(w);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_rate);
    TU_RUN(test_concurrency);
    TU_RUN(test_token_debt);
    TU_RUN(test_table_bound);
    TU_RUN(test_wfq_shares);
    TU_RUN(test_wfq_idle);
    TU_RUN(test_wfq_bound);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("serve_qos");
}
