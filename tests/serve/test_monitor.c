/*
 * Output monitoring (src/serve/monitor.c): the KS statistic against hand
 * computed values and a brute-force count (ties included), entropies and
 * total variation of known distributions, drift found within a window and
 * reported once, no drift over ten windows of the same distribution, the
 * sampling rate, a full queue dropping and counting without blocking,
 * producers on several threads, the Prometheus and JSON views (series at 0
 * before samples, every family's TYPE once; promtool when installed),
 * options from a descriptor, destroying a monitor with samples queued,
 * and the canary gate a drift trips (rollout.c).
 */
#include <jansson.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "serve/monitor.h"
#include "serve/rollout.h"
#include "test_util.h"

#define LN2 0.69314718055994530942

/* ---- helpers ---- */

static double uniform01(uint64_t *rng) { return ((double)(tu_rand(rng) >> 11) + 0.5) / 9007199254740992.0; }

/* One N(mean, 1) draw (Box-Muller). */
static double normal(uint64_t *rng, double mean)
{
    double u = uniform01(rng), v = uniform01(rng);
    return mean + sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* A float output "y" of n values as a request's outputs. */
typedef struct sample {
    float data[64];
    mcp_req_tensor out;
} sample;

static void sample_set(sample *s, int n)
{
    s->out = (mcp_req_tensor){.name = "y"};
    s->out.t = (mcp_tensor){.dtype = MCP_DTYPE_FLOAT, .rank = 2, .dims = {1, n}, .data = s->data};
}

static void sample_normal(sample *s, uint64_t *rng, double mean, int n)
{
    for (int i = 0; i < n; i++) s->data[i] = (float)normal(rng, mean);
    sample_set(s, n);
}

/* What the drift callback heard. */
typedef struct heard {
    atomic_int calls, rises, falls;
    char output[64], statistic[32], model[64], version[64];
    double score, threshold;
    /* With block set, the callback waits (on the monitor's thread) until
     * the test posts `release`, after posting `entered`. */
    bool block;
    sem_t entered, release;
} heard;

static void on_drift(void *user, const char *model, const char *version, const char *output, const char *statistic,
                     double score, double threshold, bool drifted)
{
    heard *h = user;
    snprintf(h->output, sizeof h->output, "%s", output);
    snprintf(h->statistic, sizeof h->statistic, "%s", statistic);
    snprintf(h->model, sizeof h->model, "%s", model);
    snprintf(h->version, sizeof h->version, "%s", version);
    h->score = score;
    h->threshold = threshold;
    atomic_fetch_add(drifted ? &h->rises : &h->falls, 1);
    atomic_fetch_add(&h->calls, 1);
    if (h->block) {
        sem_post(&h->entered);
        sem_wait(&h->release);
    }
}

static mcp_monitor *make(mcp_monitor_options *o, heard *h)
{
    o->model = o->model ? o->model : "m";
    o->version = o->version ? o->version : "v1.0.0";
    o->on_drift = h ? on_drift : NULL;
    o->user = h;
    mcp_monitor *mon = NULL;
    char msg[256] = "";
    mcp_err err = {msg, sizeof msg};
    mcp_status st = mcp_monitor_create(o, &mon, &err);
    if (st != MCP_STATUS_OK) fprintf(stderr, "mcp_monitor_create: %s\n", msg);
    return mon;
}

/* ---- statistics ---- */

/* sup |F_a - F_b| by counting, over every value of either sample. */
static double ks_brute(const float *a, size_t na, const float *b, size_t nb)
{
    double d = 0;
    for (int side = 0; side < 2; side++) {
        const float *xs = side ? b : a;
        size_t nx = side ? nb : na;
        for (size_t k = 0; k < nx; k++) {
            size_t ca = 0, cb = 0;
            for (size_t i = 0; i < na; i++) ca += a[i] <= xs[k];
            for (size_t i = 0; i < nb; i++) cb += b[i] <= xs[k];
            double diff = fabs((double)ca / (double)na - (double)cb / (double)nb);
            if (diff > d) d = diff;
        }
    }
    return d;
}

static int fcmp(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

static void test_ks(void)
{
    const float one[] = {1, 2, 3}, four[] = {4, 5, 6};
    TU_CHECK_NEAR(mcp_monitor_ks(one, 3, four, 3), 1.0, 1e-12);          /* disjoint */
    TU_CHECK_NEAR(mcp_monitor_ks(one, 3, one, 3), 0.0, 1e-12);           /* equal samples */
    const float same[] = {2, 2, 2, 2};
    TU_CHECK_NEAR(mcp_monitor_ks(same, 4, same, 2), 0.0, 1e-12);         /* all tied */
    /* Ties across the samples: at 1: 1/4 vs 0; at 2: 3/4 vs 3/4; at 3: 1
     * vs 3/4; at 4: 1 vs 1. D = 1/4 (stepping one copy of 2 at a time
     * would report 1/2). */
    const float ta[] = {1, 2, 2, 3}, tb[] = {2, 2, 2, 4};
    TU_CHECK_NEAR(mcp_monitor_ks(ta, 4, tb, 4), 0.25, 1e-12);
    const float ua[] = {1, 1, 1, 2}, ub[] = {1, 2, 2, 2};
    TU_CHECK_NEAR(mcp_monitor_ks(ua, 4, ub, 4), 0.5, 1e-12);
    /* Interleaved, unequal sizes: the largest gap, 1/3, is at 0.1 and at 0.6. */
    const float ia[] = {0.1f, 0.4f, 0.7f}, ib[] = {0.2f, 0.3f, 0.5f, 0.6f};
    TU_CHECK_NEAR(mcp_monitor_ks(ia, 3, ib, 4), 1.0 / 3.0, 1e-12);
    TU_CHECK_NEAR(mcp_monitor_ks(ib, 4, ia, 3), 1.0 / 3.0, 1e-12);       /* symmetric */
    TU_CHECK_NEAR(mcp_monitor_ks(one, 3, NULL, 0), 0.0, 0);              /* empty */
    /* Random samples over a few values (many ties) against the brute count. */
    uint64_t rng = 7;
    for (int iter = 0; iter < 300; iter++) {
        float a[40], b[40];
        size_t na = 1 + tu_rand(&rng) % 40, nb = 1 + tu_rand(&rng) % 40;
        int levels = 1 + (int)(tu_rand(&rng) % 6);
        for (size_t i = 0; i < na; i++) a[i] = (float)(tu_rand(&rng) % (uint64_t)levels);
        for (size_t i = 0; i < nb; i++) b[i] = (float)(tu_rand(&rng) % (uint64_t)levels) + (iter % 3 == 0 ? 0.5f : 0);
        qsort(a, na, sizeof(float), fcmp);
        qsort(b, nb, sizeof(float), fcmp);
        double want = ks_brute(a, na, b, nb), got = mcp_monitor_ks(a, na, b, nb);
        if (fabs(want - got) > 1e-12) {
            TU_CHECK_NEAR(got, want, 1e-12);
            break;
        }
    }
}

static void test_entropy(void)
{
    int64_t k = -1;
    const float uniform4[] = {0.25f, 0.25f, 0.25f, 0.25f};
    TU_CHECK_NEAR(mcp_monitor_entropy(uniform4, 4, &k), log(4.0), 1e-6);
    TU_CHECK_INT(k, 0); /* the first of equals */
    const float onehot[] = {0, 0, 1, 0};
    TU_CHECK_NEAR(mcp_monitor_entropy(onehot, 4, &k), 0.0, 1e-9);
    TU_CHECK_INT(k, 2);
    const float half[] = {0.5f, 0.5f};
    TU_CHECK_NEAR(mcp_monitor_entropy(half, 2, NULL), LN2, 1e-6);
    const float p[] = {0.1f, 0.2f, 0.7f};
    double hp = -(0.1 * log(0.1) + 0.2 * log(0.2) + 0.7 * log(0.7));
    TU_CHECK_NEAR(mcp_monitor_entropy(p, 3, &k), hp, 1e-6);
    TU_CHECK_INT(k, 2);
    /* Logits: zeros are the uniform distribution; (0, ln 3) is (1/4, 3/4). */
    const float zeros[] = {0, 0, 0};
    TU_CHECK_NEAR(mcp_monitor_entropy(zeros, 3, NULL), log(3.0), 1e-6);
    const float lg[] = {0, (float)log(3.0)};
    TU_CHECK_NEAR(mcp_monitor_entropy(lg, 2, &k), -(0.25 * log(0.25) + 0.75 * log(0.75)), 1e-6);
    TU_CHECK_INT(k, 1);
    /* Values in [0, 1] that do not sum to 1 are logits too. */
    const float notp[] = {0.2f, 0.2f};
    TU_CHECK_NEAR(mcp_monitor_entropy(notp, 2, NULL), LN2, 1e-6);
    /* Huge logits do not overflow. */
    const float big[] = {1000, 0, -1000};
    double hb = mcp_monitor_entropy(big, 3, &k);
    TU_CHECK(hb >= 0 && hb < 1e-6);
    TU_CHECK_INT(k, 0);
    /* Total variation of class histograms. */
    const int64_t ha[] = {5, 5, 0}, hb2[] = {0, 5, 5}, hc[] = {1, 1, 0};
    TU_CHECK_NEAR(mcp_monitor_tv(ha, 10, hb2, 10, 3), 0.5, 1e-12);
    TU_CHECK_NEAR(mcp_monitor_tv(ha, 10, hc, 2, 3), 0.0, 1e-12); /* same shares, other counts */
    TU_CHECK_NEAR(mcp_monitor_tv(ha, 10, hb2, 0, 3), 0.0, 0);
}

/* ---- drift ---- */

static mcp_monitor_options drift_options(void)
{
    mcp_monitor_options o = mcp_monitor_options_default();
    o.sample_rate = 1;
    o.window = 1000;
    o.min_samples = 200;
    o.threshold = 0.3;
    o.values_per_request = 10;
    o.queue = 1024; /* the tests offer windows back to back: nothing dropped, however slow the thread */
    o.n_watch = 1;
    o.watch[0] = (mcp_monitor_watch){.name = "y"};
    return o;
}

/* N(0,1) fills the reference; N(1,1) (true D = 2*Phi(1/2) - 1 = 0.383)
 * must cross 0.3 within one window of samples, and say so once. */
static void test_drift_found_once(void)
{
    heard h = {0};
    mcp_monitor_options o = drift_options();
    mcp_monitor *mon = make(&o, &h);
    TU_REQUIRE(mon != NULL);
    uint64_t rng = 42;
    sample s;
    for (int i = 0; i < 100; i++) { /* 1000 values: the reference */
        sample_normal(&s, &rng, 0, 10);
        TU_CHECK(mcp_monitor_offer(mon, 0, NULL, 1, &s.out));
    }
    mcp_monitor_flush(mon);
    TU_CHECK_INT(atomic_load(&h.calls), 0);
    TU_CHECK_NEAR(mcp_monitor_score(mon, "y", "ks"), 0, 0); /* nothing current yet */
    int fired_at = -1;
    for (int i = 0; i < 400; i++) {
        sample_normal(&s, &rng, 1, 10);
        mcp_monitor_offer(mon, 0, NULL, 1, &s.out);
        mcp_monitor_flush(mon);
        if (fired_at < 0 && atomic_load(&h.calls) > 0) fired_at = i;
    }
    if (getenv("MCP_TEST_VERBOSE")) fprintf(stderr, "drift reported at request %d, score %.3f\n", fired_at, h.score);
    TU_CHECK(fired_at >= 0);
    /* Judged from min_samples on: 200 values, the 20th request. */
    TU_CHECK(fired_at >= 19 && fired_at < 100);
    TU_CHECK_INT(atomic_load(&h.calls), 1);
    TU_CHECK_INT(atomic_load(&h.rises), 1);
    TU_CHECK_STR(h.output, "y");
    TU_CHECK_STR(h.statistic, "ks");
    TU_CHECK_STR(h.model, "m");
    TU_CHECK_STR(h.version, "v1.0.0");
    TU_CHECK(h.score > 0.3 && h.score < 0.6);
    TU_CHECK_NEAR(h.threshold, 0.3, 0);
    mcp_monitor_summary sum;
    mcp_monitor_summary_get(mon, &sum);
    TU_CHECK(sum.drifted);
    TU_CHECK_INT(sum.drift_events, 1);
    TU_CHECK_INT(sum.samples, 500);
    TU_CHECK_INT(sum.dropped, 0);
    TU_CHECK_NEAR(mcp_monitor_score(mon, "y", "ks"), 0.383, 0.06);
    TU_CHECK_NEAR(mcp_monitor_score(mon, "y", "class_tv"), -1, 0); /* not a classifier */
    /* Back to N(0,1): once the current window is all of it, the drift
     * clears, once. */
    for (int i = 0; i < 200; i++) {
        sample_normal(&s, &rng, 0, 10);
        mcp_monitor_offer(mon, 0, NULL, 1, &s.out);
    }
    mcp_monitor_flush(mon);
    TU_CHECK_INT(atomic_load(&h.falls), 1);
    TU_CHECK_INT(atomic_load(&h.rises), 1);
    mcp_monitor_summary_get(mon, &sum);
    TU_CHECK(!sum.drifted);
    TU_CHECK_INT(sum.drift_events, 1);
    mcp_monitor_destroy(mon);
}

/* The same distribution for ten windows: never drifted, scores small. */
static void test_no_drift(void)
{
    heard h = {0};
    mcp_monitor_options o = drift_options();
    mcp_monitor *mon = make(&o, &h);
    TU_REQUIRE(mon != NULL);
    uint64_t rng = 4242;
    sample s;
    double worst = 0;
    for (int i = 0; i < 1000; i++) { /* 10 windows of 1000 values */
        sample_normal(&s, &rng, 0, 10);
        mcp_monitor_offer(mon, 0, NULL, 1, &s.out);
        if (i % 5 == 4) {
            mcp_monitor_flush(mon);
            double d = mcp_monitor_score(mon, "y", "ks");
            if (d > worst) worst = d;
        }
    }
    mcp_monitor_flush(mon);
    TU_CHECK_INT(atomic_load(&h.calls), 0);
    mcp_monitor_summary sum;
    mcp_monitor_summary_get(mon, &sum);
    TU_CHECK(!sum.drifted);
    TU_CHECK_INT(sum.drift_events, 0);
    TU_CHECK(worst > 0 && worst < 0.15);
    mcp_monitor_destroy(mon);
}

/* A classifier whose class mix changes while its confidence does not:
 * the class histogram says so, the values and entropies do not. */
static void test_classifier_drift(void)
{
    heard h = {0};
    mcp_monitor_options o = mcp_monitor_options_default();
    o.sample_rate = 1;
    o.window = 500;
    o.min_samples = 100;
    o.values_per_request = 8; /* two rows of four */
    o.n_watch = 1;
    o.watch[0] = (mcp_monitor_watch){.name = "probs", .classes = 4};
    mcp_monitor *mon = make(&o, &h);
    TU_REQUIRE(mon != NULL);
    uint64_t rng = 99;
    float rows[2 * 4];
    mcp_req_tensor t = {.name = "probs",
                        .t = {.dtype = MCP_DTYPE_FLOAT, .rank = 2, .dims = {2, 4}, .data = rows}};
    for (int i = 0; i < 600; i++) {
        bool shifted = i >= 250; /* 500 rows of reference first */
        for (int r = 0; r < 2; r++) {
            /* Class 0 (then 3) 70% of the time, the others 10% each. */
            double u = uniform01(&rng);
            int cls = u < 0.7 ? 0 : u < 0.8 ? 1 : u < 0.9 ? 2 : 3;
            if (shifted) cls = cls == 0 ? 3 : cls == 3 ? 0 : cls;
            double top = 0.6 + 0.3 * uniform01(&rng);
            for (int c = 0; c < 4; c++) rows[r * 4 + c] = (float)(c == cls ? top : (1 - top) / 3);
        }
        mcp_monitor_offer(mon, 0, NULL, 1, &t);
        mcp_monitor_flush(mon);
    }
    TU_CHECK_INT(atomic_load(&h.rises), 1);
    TU_CHECK_STR(h.statistic, "class_tv");
    TU_CHECK_STR(h.output, "probs");
    double tv = mcp_monitor_score(mon, "probs", "class_tv");
    TU_CHECK_NEAR(tv, 0.6, 0.1);
    TU_CHECK(mcp_monitor_score(mon, "probs", "ks") < 0.15);
    TU_CHECK(mcp_monitor_score(mon, "probs", "entropy_ks") < 0.15);
    /* JSON: entropies of the windows are alike and positive. */
    mcp_buf b = {0};
    mcp_monitor_json(mon, &b);
    mcp_buf_append(&b, "", 1);
    json_error_t je;
    json_t *doc = json_loads((const char *)b.data, 0, &je);
    TU_CHECK(doc != NULL);
    json_t *out0 = json_array_get(json_object_get(doc, "outputs"), 0);
    TU_CHECK(json_is_true(json_object_get(out0, "classifier")));
    TU_CHECK_INT(json_integer_value(json_object_get(out0, "classes")), 4);
    double er = json_number_value(json_object_get(json_object_get(out0, "reference"), "entropy"));
    double ec = json_number_value(json_object_get(json_object_get(out0, "current"), "entropy"));
    TU_CHECK(er > 0.3 && er < 1.2);
    TU_CHECK_NEAR(er, ec, 0.1);
    TU_CHECK_INT(json_integer_value(json_object_get(json_object_get(out0, "reference"), "predictions")), 500);
    TU_CHECK(json_is_true(json_object_get(doc, "drifted")));
    json_decref(doc);
    mcp_buf_free(&b);
    mcp_monitor_destroy(mon);
}

/* ---- sampling and the queue ---- */

static void test_sampling_rate(void)
{
    const double rates[] = {0.1, 0.01, 0.5};
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        mcp_monitor_options o = drift_options();
        o.sample_rate = rates[r];
        o.queue = 4096;
        mcp_monitor *mon = make(&o, NULL);
        TU_REQUIRE(mon != NULL);
        sample s;
        for (int i = 0; i < 10; i++) s.data[i] = (float)i;
        sample_set(&s, 10);
        const int n = 100000;
        int taken = 0;
        for (int i = 0; i < n; i++) {
            taken += mcp_monitor_offer(mon, 0, NULL, 1, &s.out);
            if (i % 4096 == 0) mcp_monitor_flush(mon); /* keep the queue from filling */
        }
        mcp_monitor_flush(mon);
        mcp_monitor_summary sum;
        mcp_monitor_summary_get(mon, &sum);
        TU_CHECK_INT(sum.offered, n);
        TU_CHECK_INT(sum.samples, taken);
        /* A binomial draw would be within 3 sigma; the Weyl sequence is
         * within a few requests. */
        double want = rates[r] * n, sigma = sqrt(n * rates[r] * (1 - rates[r]));
        double got = (double)(sum.samples + sum.dropped);
        TU_CHECK(fabs(got - want) <= 3 * sigma);
        TU_CHECK(fabs(got - want) <= 5);
        mcp_monitor_destroy(mon);
    }
    /* Rate 0 samples nothing (and starts no thread); rate 1 everything. */
    mcp_monitor_options o = drift_options();
    o.sample_rate = 0;
    mcp_monitor *mon = make(&o, NULL);
    TU_REQUIRE(mon != NULL);
    sample s;
    sample_set(&s, 10);
    for (int i = 0; i < 100; i++) TU_CHECK(!mcp_monitor_offer(mon, 0, NULL, 1, &s.out));
    mcp_monitor_flush(mon);
    mcp_monitor_summary sum;
    mcp_monitor_summary_get(mon, &sum);
    TU_CHECK_INT(sum.samples, 0);
    mcp_monitor_destroy(mon);
    /* A failed request is not offered. */
    o.sample_rate = 1;
    mon = make(&o, NULL);
    TU_REQUIRE(mon != NULL);
    mcp_request *r = mcp_request_create(MCP_PROTOCOL_V2);
    TU_REQUIRE(r != NULL);
    r->n_outputs = 1;
    r->outputs = &s.out; /* borrowed: the request frees outputs' owned data only */
    r->status = MCP_STATUS_INTERNAL;
    TU_CHECK(!mcp_monitor_offer_request(mon, r));
    r->status = MCP_STATUS_OK;
    TU_CHECK(mcp_monitor_offer_request(mon, r));
    r->n_outputs = 0;
    r->outputs = NULL;
    mcp_request_release(r);
    mcp_monitor_flush(mon);
    mcp_monitor_summary_get(mon, &sum);
    TU_CHECK_INT(sum.offered, 1);
    TU_CHECK_INT(sum.samples, 1);
    mcp_monitor_destroy(mon);
}

/* The thread is held inside the drift callback while requests keep coming:
 * the queue fills, later samples are dropped and counted, and offering
 * never waits. */
static void test_queue_full(void)
{
    heard h = {0};
    h.block = true;
    sem_init(&h.entered, 0, 0);
    sem_init(&h.release, 0, 0);
    mcp_monitor_options o = mcp_monitor_options_default();
    o.sample_rate = 1;
    o.window = 10;
    o.min_samples = 5;
    o.values_per_request = 10;
    o.queue = 8;
    o.n_watch = 1;
    o.watch[0] = (mcp_monitor_watch){.name = "y"};
    mcp_monitor *mon = make(&o, &h);
    TU_REQUIRE(mon != NULL);
    sample s;
    memset(s.data, 0, sizeof s.data);
    sample_set(&s, 10);
    TU_CHECK(mcp_monitor_offer(mon, 0, NULL, 1, &s.out)); /* the reference: zeros */
    mcp_monitor_flush(mon);
    for (int i = 0; i < 10; i++) s.data[i] = 5;
    TU_CHECK(mcp_monitor_offer(mon, 0, NULL, 1, &s.out)); /* D = 1: drifted */
    sem_wait(&h.entered);                                  /* the thread is in the callback */
    int64_t t0 = mcp_now_ns();
    int taken = 0;
    for (int i = 0; i < 100; i++) taken += mcp_monitor_offer(mon, 0, NULL, 1, &s.out);
    int64_t took = mcp_now_ns() - t0;
    TU_CHECK_INT(taken, 8);
    TU_CHECK(took < 1000000000LL); /* a second for 100 offers: none of them waited */
    mcp_monitor_summary sum;
    mcp_monitor_summary_get(mon, &sum);
    TU_CHECK_INT(sum.dropped, 92);
    TU_CHECK_INT(sum.samples, 10);
    h.block = false;
    sem_post(&h.release);
    mcp_monitor_flush(mon);
    mcp_monitor_summary_get(mon, &sum);
    TU_CHECK_INT(sum.samples, 10);
    TU_CHECK_INT(sum.dropped, 92);
    TU_CHECK_INT(sum.drift_events, 1);
    TU_CHECK(sum.drifted);
    /* Room again once the thread caught up. */
    TU_CHECK(mcp_monitor_offer(mon, 0, NULL, 1, &s.out));
    mcp_monitor_destroy(mon);
    sem_destroy(&h.entered);
    sem_destroy(&h.release);
}

typedef struct producer {
    mcp_monitor *mon;
    int n, taken;
    uint64_t seed;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    sample s;
    for (int i = 0; i < p->n; i++) {
        sample_normal(&s, &p->seed, 0, 16);
        p->taken += mcp_monitor_offer(p->mon, 0, NULL, 1, &s.out);
    }
    return NULL;
}

/* Workers offer at once: every request is counted once, taken or dropped,
 * and every taken one reaches the thread. */
static void test_many_producers(void)
{
    mcp_monitor_options o = drift_options();
    o.values_per_request = 16;
    o.queue = 64;
    mcp_monitor *mon = make(&o, NULL);
    TU_REQUIRE(mon != NULL);
    producer p[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        p[i] = (producer){.mon = mon, .n = 20000, .seed = 1000u + (uint64_t)i};
        TU_REQUIRE(pthread_create(&th[i], NULL, produce, &p[i]) == 0);
    }
    int taken = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        taken += p[i].taken;
    }
    mcp_monitor_flush(mon);
    mcp_monitor_summary sum;
    mcp_monitor_summary_get(mon, &sum);
    TU_CHECK_INT(sum.offered, 80000);
    TU_CHECK_INT(sum.samples, taken);
    TU_CHECK_INT(sum.samples + sum.dropped, 80000);
    TU_CHECK(!sum.drifted);
    mcp_monitor_destroy(mon);
}

/* Destroyed with samples queued and producers just finished: clean under
 * the sanitizer build, nothing leaked. */
static void test_destroy_in_flight(void)
{
    for (int round = 0; round < 20; round++) {
        mcp_monitor_options o = drift_options();
        o.window = 10000;
        o.min_samples = 10;
        o.values_per_request = 64;
        o.queue = 256;
        mcp_monitor *mon = make(&o, NULL);
        TU_REQUIRE(mon != NULL);
        producer p[2];
        pthread_t th[2];
        for (int i = 0; i < 2; i++) {
            p[i] = (producer){.mon = mon, .n = 500, .seed = 77u + (uint64_t)(round * 2 + i)};
            TU_REQUIRE(pthread_create(&th[i], NULL, produce, &p[i]) == 0);
        }
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        mcp_monitor_destroy(mon); /* no flush: whatever is queued goes with it */
    }
    mcp_monitor_destroy(NULL);
}

/* ---- views ---- */

static int count_lines_starting(const char *text, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, prefix, len)) n++;
    return n;
}

static bool has_line(const char *text, const char *line)
{
    size_t len = strlen(line);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, line, len) && (p[len] == '\n' || p[len] == '\0')) return true;
    return false;
}

#define CHECK_LINE(text, line)                                                                                         \
    do {                                                                                                               \
        tu_checks++;                                                                                                   \
        if (!has_line((text), (line))) TU_FAIL_AT(__FILE__, __LINE__, "missing line: %s\n", (line));                   \
    } while (0)

static const char *const families[] = {
    "mcp_monitor_drift_score",      "mcp_monitor_drift_threshold", "mcp_monitor_drifted",
    "mcp_monitor_output_mean",      "mcp_monitor_output_variance", "mcp_monitor_input_mean",
    "mcp_monitor_input_variance",   "mcp_monitor_prediction_entropy", "mcp_monitor_samples_total",
    "mcp_monitor_samples_dropped_total", "mcp_monitor_drift_events_total",
};

static int promtool_check(const mcp_buf *b)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        fprintf(stderr, "promtool not installed: its check skipped\n");
        return 0;
    }
    char dir[512], path[1024], cmd[1300], out[4096];
    if (tu_make_temp_dir(dir, sizeof dir, "monitor-prom") != 0) return 1;
    tu_path(path, sizeof path, dir, "metrics.txt");
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    bool wrote = fwrite(b->data, 1, b->len, f) == b->len;
    if (fclose(f) != 0 || !wrote) return 1;
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s' 2>&1", path);
    FILE *p = popen(cmd, "r");
    if (!p) return 1;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    int rc = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && n == 0 ? 0 : 1;
    if (rc) fprintf(stderr, "promtool check metrics said:\n%s\n", out);
    const char *names[] = {"metrics.txt"};
    tu_remove_dir(dir, names, 1);
    return rc;
}

static void test_render(void)
{
    /* A classifier, a plain output and an input; another model with a name
     * that needs escaping. */
    mcp_monitor_options a = mcp_monitor_options_default();
    a.model = "m";
    a.version = "v2.0.0";
    a.n_watch = 3;
    a.watch[0] = (mcp_monitor_watch){.name = "probs", .classes = 10};
    a.watch[1] = (mcp_monitor_watch){.name = "score"};
    a.watch[2] = (mcp_monitor_watch){.name = "pixels", .input = true};
    mcp_monitor_options b = mcp_monitor_options_default();
    b.model = "odd\"name\\x";
    b.version = "v1.0.0";
    b.n_watch = 1;
    b.watch[0] = (mcp_monitor_watch){.name = "out\nput\xFF"};
    mcp_monitor_options c = a;
    c.version = "v1.0.0";
    mcp_monitor *ma = make(&a, NULL), *mb = make(&b, NULL), *mc = make(&c, NULL);
    TU_REQUIRE(ma && mb && mc);
    mcp_monitor *all[] = {ma, mb, mc};
    mcp_buf out = {0};
    mcp_monitor_render(all, 3, &out);
    mcp_buf_append(&out, "", 1);
    TU_REQUIRE(!out.failed);
    const char *text = (const char *)out.data;
    /* Each family once, whatever the number of versions. */
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        char t[128];
        snprintf(t, sizeof t, "# TYPE %s ", families[i]);
        TU_CHECK_INT(count_lines_starting(text, t), 1);
        snprintf(t, sizeof t, "# HELP %s ", families[i]);
        TU_CHECK_INT(count_lines_starting(text, t), 1);
    }
    CHECK_LINE(text, "# TYPE mcp_monitor_samples_total counter");
    CHECK_LINE(text, "# TYPE mcp_monitor_drift_score gauge");
    /* Every series at 0 before any sample. */
    CHECK_LINE(text, "mcp_monitor_drift_score{model=\"m\",version=\"v2.0.0\",output=\"probs\",statistic=\"ks\"} 0");
    CHECK_LINE(text, "mcp_monitor_drift_score{model=\"m\",version=\"v2.0.0\",output=\"probs\",statistic=\"class_tv\"} 0");
    CHECK_LINE(text,
               "mcp_monitor_drift_score{model=\"m\",version=\"v2.0.0\",output=\"probs\",statistic=\"entropy_ks\"} 0");
    CHECK_LINE(text, "mcp_monitor_drift_score{model=\"m\",version=\"v2.0.0\",output=\"score\",statistic=\"ks\"} 0");
    CHECK_LINE(text,
               "mcp_monitor_drift_score{model=\"m\",version=\"v2.0.0\",output=\"pixels\",statistic=\"input_ks\"} 0");
    CHECK_LINE(text, "mcp_monitor_drift_threshold{model=\"m\",version=\"v2.0.0\"} 0.3");
    CHECK_LINE(text, "mcp_monitor_drifted{model=\"m\",version=\"v2.0.0\"} 0");
    CHECK_LINE(text, "mcp_monitor_output_mean{model=\"m\",version=\"v2.0.0\",output=\"score\",window=\"reference\"} 0");
    CHECK_LINE(text, "mcp_monitor_output_mean{model=\"m\",version=\"v2.0.0\",output=\"score\",window=\"current\"} 0");
    CHECK_LINE(text,
               "mcp_monitor_output_variance{model=\"m\",version=\"v2.0.0\",output=\"probs\",window=\"current\"} 0");
    CHECK_LINE(text, "mcp_monitor_input_mean{model=\"m\",version=\"v2.0.0\",input=\"pixels\",window=\"reference\"} 0");
    CHECK_LINE(text,
               "mcp_monitor_input_variance{model=\"m\",version=\"v2.0.0\",input=\"pixels\",window=\"current\"} 0");
    CHECK_LINE(text, "mcp_monitor_prediction_entropy{model=\"m\",version=\"v2.0.0\",output=\"probs\",window=\"reference\"} 0");
    CHECK_LINE(text, "mcp_monitor_samples_total{model=\"m\",version=\"v2.0.0\"} 0");
    CHECK_LINE(text, "mcp_monitor_samples_dropped_total{model=\"m\",version=\"v2.0.0\"} 0");
    CHECK_LINE(text, "mcp_monitor_drift_events_total{model=\"m\",version=\"v2.0.0\"} 0");
    CHECK_LINE(text, "mcp_monitor_samples_total{model=\"m\",version=\"v1.0.0\"} 0");
    /* Escaped as the format requires; bytes that are not UTF-8 replaced. */
    CHECK_LINE(text, "mcp_monitor_drift_score{model=\"odd\\\"name\\\\x\",version=\"v1.0.0\",output=\"out\\nput\xEF\xBF\xBD\","
                     "statistic=\"ks\"} 0");
    /* Monitors in model then version order within a family, whatever
     * order they were given in. */
    const char *v1 = strstr(text, "mcp_monitor_samples_total{model=\"m\",version=\"v1.0.0\"}");
    const char *v2 = strstr(text, "mcp_monitor_samples_total{model=\"m\",version=\"v2.0.0\"}");
    TU_CHECK(v1 && v2 && v1 < v2);
    /* Not classifiers: no entropy series for them. */
    TU_CHECK(!strstr(text, "mcp_monitor_prediction_entropy{model=\"odd"));
    if (getenv("MCP_TEST_VERBOSE")) fprintf(stderr, "%s", text);
    TU_CHECK_INT(promtool_check(&(mcp_buf){.data = out.data, .len = out.len - 1}), 0);
    mcp_buf_free(&out);

    /* After samples the figures move. */
    mcp_monitor_destroy(mb);
    mcp_monitor_destroy(mc);
    mcp_monitor_options d = drift_options();
    d.window = 10;
    d.min_samples = 5;
    mcp_monitor *md = make(&d, NULL);
    TU_REQUIRE(md != NULL);
    sample s;
    for (int i = 0; i < 10; i++) s.data[i] = (float)i; /* mean 4.5, variance 8.25 */
    sample_set(&s, 10);
    mcp_monitor_offer(md, 0, NULL, 1, &s.out);
    mcp_monitor_flush(md);
    mcp_monitor *one[] = {md, ma};
    mcp_buf o2 = {0};
    mcp_monitor_render(one, 2, &o2);
    mcp_buf_append(&o2, "", 1);
    text = (const char *)o2.data;
    CHECK_LINE(text, "mcp_monitor_output_mean{model=\"m\",version=\"v1.0.0\",output=\"y\",window=\"reference\"} 4.5");
    CHECK_LINE(text, "mcp_monitor_output_variance{model=\"m\",version=\"v1.0.0\",output=\"y\",window=\"reference\"} 8.25");
    CHECK_LINE(text, "mcp_monitor_samples_total{model=\"m\",version=\"v1.0.0\"} 1");
    mcp_buf_free(&o2);
    /* Nothing to render: nothing written. */
    mcp_buf empty = {0};
    mcp_monitor_render(NULL, 0, &empty);
    TU_CHECK_INT(empty.len, 0);

    /* The JSON view parses and says what the status page needs. */
    mcp_buf j = {0};
    mcp_monitor_json(md, &j);
    mcp_buf_append(&j, "", 1);
    json_error_t je;
    json_t *doc = json_loads((const char *)j.data, 0, &je);
    TU_CHECK(doc != NULL);
    TU_CHECK_NEAR(json_number_value(json_object_get(doc, "threshold")), 0.3, 1e-12);
    TU_CHECK(json_is_false(json_object_get(doc, "drifted")));
    TU_CHECK_INT(json_integer_value(json_object_get(doc, "samples")), 1);
    TU_CHECK(json_is_number(json_object_get(doc, "score")));
    json_t *o0 = json_array_get(json_object_get(doc, "outputs"), 0);
    TU_CHECK_STR(json_string_value(json_object_get(o0, "name")), "y");
    TU_CHECK_INT(json_integer_value(json_object_get(json_object_get(o0, "reference"), "samples")), 10);
    TU_CHECK(json_is_number(json_object_get(json_object_get(o0, "scores"), "ks")));
    json_decref(doc);
    mcp_buf_free(&j);
    mcp_monitor_destroy(md);
    mcp_monitor_destroy(ma);
}

/* ---- the set ---- */

typedef struct scraper {
    mcp_monitor_set *set;
    atomic_bool stop;
    int scrapes;
    bool dup;
} scraper;

static void *scrape(void *arg)
{
    scraper *sc = arg;
    while (!atomic_load(&sc->stop)) {
        mcp_buf b = {0};
        mcp_monitor_set_render(sc->set, &b);
        mcp_buf_append(&b, "", 1);
        const char *t = (const char *)b.data;
        const char *first = strstr(t, "mcp_monitor_samples_total{model=\"churn\"");
        if (first && strstr(first + 1, "mcp_monitor_samples_total{model=\"churn\"")) sc->dup = true;
        mcp_buf_free(&b);
        sc->scrapes++;
    }
    return NULL;
}

/* Monitors join and leave a set; a reloaded version (the same name twice)
 * renders once, the newer; scrapes run safely while monitors come and go. */
static void test_set(void)
{
    heard h = {0};
    mcp_monitor_set *set = mcp_monitor_set_create(on_drift, &h);
    TU_REQUIRE(set != NULL);
    mcp_monitor_options o = drift_options();
    o.set = set;
    o.model = "m";
    o.version = "v1.0.0";
    mcp_monitor *old = make(&o, NULL);
    o.threshold = 0.5;
    mcp_monitor *fresh = make(&o, NULL);
    TU_REQUIRE(old && fresh);
    mcp_buf b = {0};
    mcp_monitor_set_render(set, &b);
    mcp_buf_append(&b, "", 1);
    const char *t = (const char *)b.data;
    CHECK_LINE(t, "mcp_monitor_drift_threshold{model=\"m\",version=\"v1.0.0\"} 0.5");
    TU_CHECK(!strstr(t, "mcp_monitor_drift_threshold{model=\"m\",version=\"v1.0.0\"} 0.3"));
    mcp_buf_free(&b);
    TU_CHECK(mcp_monitor_set_json(set, "m", "v1.0.0", &b));
    mcp_buf_append(&b, "", 1);
    TU_CHECK_CONTAINS((const char *)b.data, "\"threshold\":0.5");
    mcp_buf_free(&b);
    TU_CHECK(!mcp_monitor_set_json(set, "m", "v9.0.0", &b));
    TU_CHECK_INT(b.len, 0);
    mcp_monitor_destroy(fresh); /* the old one renders again until it goes too */
    mcp_monitor_set_render(set, &b);
    mcp_buf_append(&b, "", 1);
    CHECK_LINE((const char *)b.data, "mcp_monitor_drift_threshold{model=\"m\",version=\"v1.0.0\"} 0.3");
    mcp_buf_free(&b);
    mcp_monitor_destroy(old);
    mcp_monitor_set_render(set, &b);
    TU_CHECK_INT(b.len, 0);

    /* Churn under scrapes: two versions named alike at times. */
    scraper sc = {.set = set};
    pthread_t th;
    TU_REQUIRE(pthread_create(&th, NULL, scrape, &sc) == 0);
    o = drift_options();
    o.set = set;
    o.model = "churn";
    o.version = "v1.0.0";
    mcp_monitor *prev = NULL;
    sample s;
    uint64_t rng = 5;
    for (int i = 0; i < 200; i++) {
        mcp_monitor *m = make(&o, NULL);
        TU_REQUIRE(m != NULL);
        sample_normal(&s, &rng, 0, 10);
        mcp_monitor_offer(m, 0, NULL, 1, &s.out);
        mcp_monitor_destroy(prev);
        prev = m;
    }
    mcp_monitor_destroy(prev);
    atomic_store(&sc.stop, true);
    pthread_join(th, NULL);
    TU_CHECK(sc.scrapes > 0);
    TU_CHECK(!sc.dup);

    /* The set's callback hears its monitors' drift; once the owner
     * releases the set, monitors outlive it and report to it no more. */
    o = drift_options();
    o.set = set;
    o.window = 10;
    o.min_samples = 5;
    mcp_monitor *a = make(&o, NULL), *b2 = make(&o, NULL);
    TU_REQUIRE(a && b2);
    memset(s.data, 0, sizeof s.data);
    sample_set(&s, 10);
    mcp_monitor_offer(a, 0, NULL, 1, &s.out);
    mcp_monitor_offer(b2, 0, NULL, 1, &s.out);
    for (int i = 0; i < 10; i++) s.data[i] = 3;
    mcp_monitor_offer(a, 0, NULL, 1, &s.out);
    mcp_monitor_flush(a);
    TU_CHECK_INT(atomic_load(&h.rises), 1);
    TU_CHECK_STR(h.statistic, "ks");
    mcp_monitor_set_release(set);
    mcp_monitor_offer(b2, 0, NULL, 1, &s.out); /* drifts, heard by nobody */
    mcp_monitor_flush(b2);
    TU_CHECK_INT(atomic_load(&h.rises), 1);
    mcp_monitor_summary sum;
    mcp_monitor_summary_get(b2, &sum);
    TU_CHECK(sum.drifted);
    mcp_buf_reset(&b);
    mcp_monitor_destroy(a);
    mcp_monitor_destroy(b2); /* the last one frees the set */
    mcp_buf_free(&b);
    mcp_monitor_set_release(NULL);
}

/* ---- options ---- */

static void test_create_errors(void)
{
    mcp_monitor_options o;
    mcp_monitor *mon = NULL;
    char msg[256];
    mcp_err err = {msg, sizeof msg};
#define BAD(field_edit, needle)                                                                                        \
    do {                                                                                                               \
        o = drift_options();                                                                                           \
        o.model = "m";                                                                                                 \
        o.version = "v1";                                                                                              \
        field_edit;                                                                                                    \
        msg[0] = '\0';                                                                                                 \
        TU_CHECK_STATUS(mcp_monitor_create(&o, &mon, &err), MCP_STATUS_INVALID_ARGUMENT, needle);                      \
        TU_CHECK(mon == NULL);                                                                                         \
        TU_CHECK_CONTAINS(msg, needle);                                                                                \
    } while (0)
    BAD(o.sample_rate = 1.5, "sample_rate");
    BAD(o.window = 1, "window");
    BAD(o.min_samples = 5000, "min_samples");
    BAD(o.threshold = 0, "threshold");
    BAD(o.values_per_request = 0, "values_per_request");
    BAD(o.queue = 0, "queue");
    BAD(o.watch[0].classes = 1, "classes");
    BAD((o.n_watch = 2, o.watch[1] = o.watch[0]), "watched twice");
    BAD((o.queue = 4096, o.values_per_request = 4096, o.n_watch = 2, o.watch[1].name = "z"), "MiB");
#undef BAD
}

/* A version as the repository hands it to the serving layer: descriptor,
 * served inputs and outputs. */
static mcp_status options_for(const char *yaml, mcp_tensor_meta *outs, int n_outs, mcp_tensor_meta *ins, int n_ins,
                              mcp_monitor_options *o, char *msg, size_t cap)
{
    mcp_descriptor_defaults dd = mcp_descriptor_defaults_default();
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    mcp_status st = mcp_descriptor_parse_yaml(yaml, strlen(yaml), NULL, &dd, &d, &diags);
    if (st != MCP_STATUS_OK) {
        mcp_diags_format(&diags, "test.yaml", msg, cap);
        mcp_diags_clear(&diags);
        return st;
    }
    mcp_model_version v = {.name = "m", .version = "v1.0.0", .desc = d, .n_inputs = n_ins, .inputs = ins,
                           .n_outputs = n_outs, .outputs = outs};
    mcp_err err = {msg, cap};
    st = mcp_monitor_options_from(&v, o, &err);
    /* The options borrow v's strings: check them before v goes. */
    mcp_descriptor_free(d);
    return st;
}

static void test_options_from(void)
{
    mcp_tensor_meta outs[] = {
        {.name = "probs", .dtype = MCP_DTYPE_FLOAT, .rank = 2, .dims = {-1, 10}},
        {.name = "embedding", .dtype = MCP_DTYPE_FLOAT, .rank = 2, .dims = {-1, 64}},
        {.name = "labels", .dtype = MCP_DTYPE_STRING, .rank = 2, .dims = {-1, 3}},
        {.name = "count", .dtype = MCP_DTYPE_INT64, .rank = 1, .dims = {-1}},
    };
    mcp_tensor_meta ins[] = {
        {.name = "x", .dtype = MCP_DTYPE_FLOAT, .rank = 2, .dims = {-1, 4}},
        {.name = "text", .dtype = MCP_DTYPE_STRING, .rank = 1, .dims = {-1}},
    };
    char msg[1024] = "";
    mcp_monitor_options o;
    /* No section: nothing sampled. */
    TU_CHECK_STATUS(options_for("name: m\npath: m.onnx\n", outs, 4, ins, 2, &o, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_NEAR(o.sample_rate, 0, 0);
    /* Defaults; every numeric output; auto finds the softmaxed one. */
    const char *y = "name: m\npath: m.onnx\n"
                    "postprocess:\n  - softmax: {tensor: probs}\n"
                    "monitoring: {inputs: true}\n";
    TU_CHECK_STATUS(options_for(y, outs, 4, ins, 2, &o, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_NEAR(o.sample_rate, 0.1, 0);
    TU_CHECK_INT(o.window, 2000);
    TU_CHECK_INT(o.min_samples, 500);
    TU_CHECK_NEAR(o.threshold, 0.3, 0);
    TU_CHECK_INT(o.n_watch, 4); /* probs, embedding, count; input x */
    TU_CHECK_INT(o.watch[0].classes, 10);
    TU_CHECK_INT(o.watch[1].classes, 0);
    TU_CHECK_INT(o.watch[2].classes, 0);
    TU_CHECK(!o.watch[2].input);
    TU_CHECK(o.watch[3].input);
    TU_CHECK_INT(o.watch[3].classes, 0);
    /* Named outputs, classifier forced on. */
    y = "name: m\npath: m.onnx\n"
        "monitoring: {sample_rate: 0.5, window: 300, threshold: 0.2, min_samples: 50, classifier: true,\n"
        "             outputs: [embedding, probs]}\n";
    TU_CHECK_STATUS(options_for(y, outs, 4, ins, 2, &o, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_INT(o.n_watch, 2);
    TU_CHECK_INT(o.watch[0].classes, 64);
    TU_CHECK_INT(o.watch[1].classes, 10);
    TU_CHECK_NEAR(o.sample_rate, 0.5, 0);
    TU_CHECK_INT(o.window, 300);
    TU_CHECK_INT(o.min_samples, 50);
    /* classifier: false: values only. */
    y = "name: m\npath: m.onnx\npostprocess:\n  - softmax: {tensor: probs}\nmonitoring: {classifier: false}\n";
    TU_CHECK_STATUS(options_for(y, outs, 4, ins, 2, &o, msg, sizeof msg), MCP_STATUS_OK, msg);
    TU_CHECK_INT(o.watch[0].classes, 0);
    /* Problems name the tensor. */
    y = "name: m\npath: m.onnx\nmonitoring: {outputs: [nope]}\n";
    TU_CHECK_STATUS(options_for(y, outs, 4, ins, 2, &o, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'nope'");
    y = "name: m\npath: m.onnx\nmonitoring: {outputs: [labels]}\n";
    TU_CHECK_STATUS(options_for(y, outs, 4, ins, 2, &o, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "'labels'");
    TU_CHECK_CONTAINS(msg, "BYTES");
    y = "name: m\npath: m.onnx\nmonitoring: {classifier: true}\n"; /* count has no class axis */
    TU_CHECK_STATUS(options_for(y, outs, 4, ins, 2, &o, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "output 'count'");
    y = "name: m\npath: m.onnx\nmonitoring: {}\n"; /* only strings to watch */
    TU_CHECK_STATUS(options_for(y, outs + 2, 1, ins, 2, &o, msg, sizeof msg), MCP_STATUS_INVALID_ARGUMENT, msg);
    TU_CHECK_CONTAINS(msg, "no numeric output");
    /* The options make a working monitor. */
    y = "name: m\npath: m.onnx\nmonitoring: {sample_rate: 1, window: 10, min_samples: 5, outputs: [probs]}\n";
    mcp_descriptor_defaults dd = mcp_descriptor_defaults_default();
    mcp_descriptor *d = NULL;
    mcp_diags diags = {0};
    TU_REQUIRE(mcp_descriptor_parse_yaml(y, strlen(y), NULL, &dd, &d, &diags) == MCP_STATUS_OK);
    mcp_model_version v = {.name = "m", .version = "v1.0.0", .desc = d, .n_outputs = 4, .outputs = outs};
    mcp_err err = {msg, sizeof msg};
    TU_REQUIRE_OK(mcp_monitor_options_from(&v, &o, &err), msg);
    mcp_monitor *mon = NULL;
    TU_REQUIRE_OK(mcp_monitor_create(&o, &mon, &err), msg);
    mcp_descriptor_free(d); /* create copied what it keeps */
    float data[10] = {0};
    mcp_req_tensor t = {.name = "probs", .t = {.dtype = MCP_DTYPE_FLOAT, .rank = 2, .dims = {1, 10}, .data = data}};
    TU_CHECK(mcp_monitor_offer(mon, 0, NULL, 1, &t));
    mcp_monitor_flush(mon);
    mcp_buf b = {0};
    mcp_monitor_json(mon, &b);
    mcp_buf_append(&b, "", 1);
    TU_CHECK_CONTAINS((const char *)b.data, "\"name\":\"probs\"");
    mcp_buf_free(&b);
    mcp_monitor_destroy(mon);
}

/* Tensors other than float32: converted; non-finite values left out. */
static void test_dtypes(void)
{
    mcp_monitor_options o = drift_options();
    o.window = 10;
    o.min_samples = 5;
    mcp_monitor *mon = make(&o, NULL);
    TU_REQUIRE(mon != NULL);
    int64_t ints[6] = {1, 2, 3, 4, 5, 6};
    mcp_req_tensor t = {.name = "y", .t = {.dtype = MCP_DTYPE_INT64, .rank = 1, .dims = {6}, .data = ints}};
    TU_CHECK(mcp_monitor_offer(mon, 0, NULL, 1, &t));
    double d[4] = {7, NAN, INFINITY, 8};
    t.t = (mcp_tensor){.dtype = MCP_DTYPE_DOUBLE, .rank = 1, .dims = {4}, .data = d};
    TU_CHECK(mcp_monitor_offer(mon, 0, NULL, 1, &t));
    const char *strs[1] = {"x"};
    t.t = (mcp_tensor){.dtype = MCP_DTYPE_STRING, .rank = 1, .dims = {1}, .data = strs};
    TU_CHECK(mcp_monitor_offer(mon, 0, NULL, 1, &t)); /* sampled, nothing to copy */
    mcp_monitor_flush(mon);
    mcp_buf b = {0};
    mcp_monitor_json(mon, &b);
    mcp_buf_append(&b, "", 1);
    json_error_t je;
    json_t *doc = json_loads((const char *)b.data, 0, &je);
    json_t *ref = json_object_get(json_array_get(json_object_get(doc, "outputs"), 0), "reference");
    TU_CHECK_INT(json_integer_value(json_object_get(ref, "samples")), 8); /* 1..8 */
    TU_CHECK_NEAR(json_number_value(json_object_get(ref, "mean")), 4.5, 1e-9);
    json_decref(doc);
    mcp_buf_free(&b);
    /* A large tensor contributes values_per_request values, spread over it. */
    float big[1000];
    for (int i = 0; i < 1000; i++) big[i] = (float)i;
    t.t = (mcp_tensor){.dtype = MCP_DTYPE_FLOAT, .rank = 1, .dims = {1000}, .data = big};
    TU_CHECK(mcp_monitor_offer(mon, 0, NULL, 1, &t));
    mcp_monitor_flush(mon);
    mcp_monitor_destroy(mon);
}

/* A callback that drops the last reference to its own version destroys
 * the monitor from the monitor's thread: the thread frees it afterwards. */
typedef struct self_destroyer {
    mcp_monitor *mon;
    atomic_int calls;
} self_destroyer;

static void destroy_from_callback(void *user, const char *model, const char *version, const char *output,
                                  const char *statistic, double score, double threshold, bool drifted)
{
    self_destroyer *d = user;
    atomic_fetch_add(&d->calls, 1);
    mcp_monitor_destroy(d->mon);
}

static void test_destroy_from_callback(void)
{
    int64_t live = mcp_alloc_live_count();
    self_destroyer d = {0};
    mcp_monitor_options o = drift_options();
    o.window = 10;
    o.min_samples = 5;
    o.model = "m";
    o.version = "v1";
    o.on_drift = destroy_from_callback;
    o.user = &d;
    char msg[200];
    mcp_err err = {msg, sizeof msg};
    TU_REQUIRE_OK(mcp_monitor_create(&o, &d.mon, &err), msg);
    sample s;
    memset(s.data, 0, sizeof s.data);
    sample_set(&s, 10);
    mcp_monitor_offer(d.mon, 0, NULL, 1, &s.out);
    for (int i = 0; i < 10; i++) s.data[i] = 1;
    mcp_monitor_offer(d.mon, 0, NULL, 1, &s.out); /* drifts: the callback destroys it */
    /* No flush (the monitor may be gone): wait for its memory to go. */
    for (int i = 0; i < 2000 && mcp_alloc_live_count() != live; i++) usleep(1000);
    TU_CHECK_INT(atomic_load(&d.calls), 1);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
}

/* ---- the canary gate ---- */

typedef struct tripped {
    int calls;
    bool canary;
    char reason[300];
} tripped;

static void on_trip(void *user, mcp_rollout_monitor *m, bool canary, const char *reason)
{
    tripped *t = user;
    t->calls++;
    t->canary = canary;
    snprintf(t->reason, sizeof t->reason, "%s", reason);
}

/* A drifted canary stops as a gate stops it; the primary and a stopped
 * canary do not. */
static void test_rollout_gate(void)
{
    mcp_metrics *metrics = mcp_metrics_create();
    TU_REQUIRE(metrics != NULL);
    mcp_rollout_spec spec = mcp_rollout_spec_default();
    tripped t = {0};
    mcp_route_watch *w = mcp_rollout_monitor_create("m", &spec, "v1.0.0", "v2.0.0", NULL, metrics, on_trip, &t);
    TU_REQUIRE(w != NULL);
    TU_CHECK(!mcp_rollout_drifted(w, "v1.0.0", "ks 0.41 on y")); /* the primary: not a gate's to stop */
    TU_CHECK(!atomic_load(&w->canary_off));
    TU_CHECK_INT(t.calls, 0);
    TU_CHECK(mcp_rollout_drifted(w, "v2.0.0", "ks 0.41 on y (threshold 0.3)"));
    TU_CHECK(atomic_load(&w->canary_off));
    TU_CHECK_INT(t.calls, 1);
    TU_CHECK(t.canary);
    TU_CHECK_CONTAINS(t.reason, "gate drift: canary v2.0.0: ks 0.41 on y (threshold 0.3)");
    TU_CHECK(!mcp_rollout_drifted(w, "v2.0.0", "again")); /* already off */
    TU_CHECK_INT(t.calls, 1);
    mcp_buf b = {0};
    mcp_rollout_window_json(w, &b);
    mcp_buf_append(&b, "", 1);
    TU_CHECK_CONTAINS((const char *)b.data, "gate drift");
    mcp_buf_free(&b);
    /* No gate-trip series for a gate the metrics do not name. */
    mcp_metrics_render(metrics, &b);
    mcp_buf_append(&b, "", 1);
    TU_CHECK(!strstr((const char *)b.data, "gate=\"(null)\""));
    mcp_buf_free(&b);
    mcp_route_watch_release(w);
    mcp_metrics_destroy(metrics);
}

int main(void)
{
    int64_t live = mcp_alloc_live_count();
    TU_RUN(test_ks);
    TU_RUN(test_entropy);
    TU_RUN(test_drift_found_once);
    TU_RUN(test_no_drift);
    TU_RUN(test_classifier_drift);
    TU_RUN(test_sampling_rate);
    TU_RUN(test_queue_full);
    TU_RUN(test_many_producers);
    TU_RUN(test_destroy_in_flight);
    TU_RUN(test_render);
    TU_RUN(test_set);
    TU_RUN(test_create_errors);
    TU_RUN(test_options_from);
    TU_RUN(test_dtypes);
    TU_RUN(test_destroy_from_callback);
    TU_RUN(test_rollout_gate);
    TU_CHECK_INT(mcp_alloc_live_count(), live);
    return tu_finish("serve_monitor");
}
