/*
 * Output monitoring: the sampling test and the lock-free ring on the hot
 * path, the monitor's thread with its reference and current windows, the
 * drift statistics and decision, and the Prometheus and JSON views.
 * monitor.h says what is measured and why the windows are as they are.
 *
 * The ring is a bounded multi-producer queue (Vyukov's: one sequence
 * number per slot, producers claim a position with compare-and-swap) with
 * one consumer, the monitor's thread. Each slot owns a preallocated block
 * big enough for one sampled request, so a producer copies straight into
 * it; a slot still held by the consumer means the ring is full and the
 * sample is dropped. Producers wake the thread with sem_post, which does
 * not block. Measured on the 2-core build VM (-O3): about 2 ns for a
 * request not sampled, 50 to 120 ns for a sampled one (three rows of a
 * 10-class output copied), and 3 us of the thread's time per record with
 * the default window of 2000.
 */
#include <errno.h>
#include <math.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/monitor.h"

/* frac(n * golden ratio) in 64-bit fixed point: a Weyl sequence, so any
 * run of requests is sampled close to the rate (as the canary split in
 * repository.c), without a shared random state. */
#define WEYL_STEP 0x9E3779B97F4A7C15ULL
/* Scores are refreshed at most this often (a flush refreshes them at
 * once): evaluating after every record sorted each window per sample, which
 * at 900 sampled requests/s cost a third of a core on the demo model. */
#define EVAL_INTERVAL_NS (100LL * 1000000LL)
/* A drifted version clears once every score is at or below this share of
 * the threshold. */
#define CLEAR_SHARE 0.9
/* The ring's preallocated blocks, all slots together. */
#define RING_MAX_BYTES (64u << 20)

typedef enum stat_kind { ST_KS, ST_CLASS_TV, ST_ENTROPY_KS, ST_COUNT } stat_kind;

typedef struct figures {
    int64_t n;
    double mean, variance;
} figures;

typedef struct watch {
    char *name;
    bool input;
    int64_t classes; /* >= 2: classifier */
    size_t cap;      /* floats this tensor has in a slot */
    size_t offset;   /* where they start */
    /* The thread's windows. */
    float *ref;      /* window values; sorted once full */
    int64_t ref_n;
    float *cur;      /* ring of the latest values */
    int64_t cur_n, cur_head;
    float *ent_ref;  /* classifiers: entropies; sorted once full */
    int64_t ent_ref_n;
    float *ent_cur;  /* ring of the latest rows' entropies and classes */
    int32_t *cls_cur;
    int64_t row_n, row_head;
    int64_t *hist_ref, *hist_cur; /* classes predicted */
    bool dirty;      /* samples since the last evaluation */
    /* Published under mu. */
    figures pub_ref, pub_cur;
    int64_t rows_ref, rows_cur;
    double entropy_ref, entropy_cur;
    double score[ST_COUNT];
} watch;

struct mcp_monitor {
    char *model, *version;
    double sample_rate, threshold;
    uint64_t rate_fixed; /* sample when frac(n * phi) * 2^64 is below this */
    bool sample_all, sampling;
    int64_t window, min_samples;
    int values_per_request;
    int n_watch;
    watch *w;
    /* The ring. */
    size_t qcap, qmask, slot_floats;
    _Atomic uint64_t *seq;
    int32_t *slot_n;  /* [slot][watch]: floats stored */
    bool *slot_rows;  /* [slot][watch]: they are whole classifier rows */
    float *slot_data; /* [slot][slot_floats] */
    /* Producers' counters, each on its own cache line (padding, not
     * _Alignas: the struct comes from malloc, aligned to 16 only). */
    char pad0[64];
    _Atomic uint64_t enqueue_pos;
    char pad1[64];
    _Atomic uint64_t offered;
    char pad2[64];
    atomic_llong samples, dropped, events;
    char pad3[64];
    uint64_t dequeue_pos; /* the thread's */
    int64_t consumed;     /* the thread's */
    float *scratch;       /* the thread's: a current window to sort */
    sem_t wake;
    bool sem_made, thread_started;
    atomic_bool stop;
    bool self_destroy; /* destroyed from its own thread (a callback): the thread frees it */
    pthread_t thread;
    mcp_monitor_drift_fn on_drift;
    void *user;
    /* Published figures and the decision. */
    pthread_mutex_t mu;
    pthread_cond_t evaluated_cv;
    int64_t evaluated; /* records consumed as of the last evaluation */
    atomic_int flush_waiters; /* flushes waiting: evaluate without delay */
    bool drifted;
    double best;
    int64_t created_ns;   /* the newer of two same-named monitors renders */
    mcp_monitor_set *set; /* joined while alive */
};

/* Reference-counted: its owner and each monitor in it. */
struct mcp_monitor_set {
    atomic_int refs;
    pthread_mutex_t mu; /* items */
    mcp_monitor **items;
    int n, cap;
    pthread_mutex_t cb_mu; /* held while on_drift runs, so release can wait it out */
    mcp_monitor_drift_fn on_drift;
    void *user;
};

static const char *stat_name(const watch *w, int s)
{
    static const char *const names[ST_COUNT] = {"ks", "class_tv", "entropy_ks"};
    return s == ST_KS && w->input ? "input_ks" : names[s];
}

static int stat_count(const watch *w) { return w->classes >= 2 ? ST_COUNT : 1; }

/* ---- the statistics ---- */

double mcp_monitor_ks(const float *a, size_t na, const float *b, size_t nb)
{
    if (!na || !nb) return 0;
    size_t i = 0, j = 0;
    double d = 0;
    /* At each distinct value both empirical CDFs step past all its copies
     * before they are compared, so ties never count as a difference. */
    while (i < na && j < nb) {
        float x = a[i] < b[j] ? a[i] : b[j];
        while (i < na && a[i] <= x) i++;
        while (j < nb && b[j] <= x) j++;
        double diff = fabs((double)i / (double)na - (double)j / (double)nb);
        if (diff > d) d = diff;
    }
    /* Past the end of one sample its CDF is 1 and the other's only climbs
     * towards 1, so the largest gap has been seen. */
    return d;
}

double mcp_monitor_entropy(const float *row, int64_t classes, int64_t *argmax)
{
    int64_t best = 0;
    double sum = 0, top = row[0];
    bool probabilities = true;
    for (int64_t c = 0; c < classes; c++) {
        double x = row[c];
        if (x > top) top = x, best = c;
        if (!(x >= 0 && x <= 1)) probabilities = false;
        sum += x;
    }
    if (argmax) *argmax = best;
    if (probabilities && fabs(sum - 1) > 1e-3) probabilities = false;
    double h = 0;
    if (probabilities) {
        for (int64_t c = 0; c < classes; c++) {
            double p = row[c] / sum;
            if (p > 0) h -= p * log(p);
        }
        return h;
    }
    /* Logits: H = log Z - sum p x' with x' = x - max, Z = sum exp x'. */
    double z = 0, ex = 0;
    for (int64_t c = 0; c < classes; c++) {
        double x = row[c] - top, e = exp(x);
        z += e;
        ex += e * x;
    }
    h = log(z) - ex / z;
    return h > 0 ? h : 0;
}

double mcp_monitor_tv(const int64_t *ha, int64_t na, const int64_t *hb, int64_t nb, int64_t classes)
{
    if (na <= 0 || nb <= 0) return 0;
    double s = 0;
    for (int64_t c = 0; c < classes; c++) s += fabs((double)ha[c] / (double)na - (double)hb[c] / (double)nb);
    return s / 2;
}

static int float_cmp(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

static figures mean_variance(const float *v, int64_t n)
{
    figures f = {.n = n};
    if (n <= 0) return f;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += v[i];
    f.mean = sum / (double)n;
    double sq = 0;
    for (int64_t i = 0; i < n; i++) sq += (v[i] - f.mean) * (v[i] - f.mean);
    f.variance = sq / (double)n; /* of the window itself: population variance */
    return f;
}

static double mean_of(const float *v, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    return n > 0 ? s / (double)n : 0;
}

/* ---- options ---- */

mcp_monitor_options mcp_monitor_options_default(void)
{
    return (mcp_monitor_options){
        .sample_rate = 0.1,
        .window = 2000,
        .threshold = 0.3,
        .min_samples = 500,
        .values_per_request = 32,
        .queue = 64,
    };
}

static bool dtype_numeric(mcp_dtype d)
{
    return d != MCP_DTYPE_UNDEFINED && d != MCP_DTYPE_STRING && d != MCP_DTYPE_COMPLEX64 && d != MCP_DTYPE_COMPLEX128;
}

/* Whether a softmax postprocess step applies to output `name`. */
static bool softmaxed(const mcp_model_version *v, const char *name)
{
    const mcp_descriptor *d = v->desc;
    for (int i = 0; i < d->n_post; i++) {
        const mcp_step *s = &d->post[i];
        if (s->kind != MCP_STEP_SOFTMAX) continue;
        if (s->tensor ? !strcmp(s->tensor, name) : v->n_outputs == 1) return true;
    }
    return false;
}

static void shape_text(const mcp_tensor_meta *m, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < m->rank && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)m->dims[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static mcp_status add_watch(mcp_monitor_options *o, const mcp_model_version *v, const mcp_tensor_meta *m, bool input,
                            mcp_classifier_mode mode, mcp_err *err)
{
    if (o->n_watch >= MCP_MONITOR_MAX_WATCH)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "monitoring of model '%s' would watch more than %d tensors; list the outputs to watch in "
                           "monitoring.outputs",
                           v->name, MCP_MONITOR_MAX_WATCH);
    int64_t classes = 0;
    if (!input && mode != MCP_CLASSIFIER_OFF) {
        int64_t last = m->rank >= 1 ? m->dims[m->rank - 1] : 0;
        bool fits = mcp_dtype_is_float(m->dtype) && last >= 2 && last <= MCP_MONITOR_MAX_CLASSES;
        if (mode == MCP_CLASSIFIER_ON && !fits) {
            char shape[160];
            shape_text(m, shape, sizeof shape);
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "monitoring.classifier is true, but output '%s' of model '%s' (%s, shape %s) has no fixed "
                               "last axis of 2 to %d float class scores; list the classifier outputs in "
                               "monitoring.outputs or set classifier: auto",
                               m->name, v->name, mcp_oip_datatype(m->dtype), shape, MCP_MONITOR_MAX_CLASSES);
        }
        if (fits && (mode == MCP_CLASSIFIER_ON || softmaxed(v, m->name))) classes = last;
    }
    o->watch[o->n_watch++] = (mcp_monitor_watch){.name = m->name, .input = input, .classes = classes};
    return MCP_STATUS_OK;
}

mcp_status mcp_monitor_options_from(const mcp_model_version *v, mcp_monitor_options *o, mcp_err *err)
{
    *o = mcp_monitor_options_default();
    o->model = v->name;
    o->version = v->version;
    const mcp_monitoring *m = v->desc ? &v->desc->monitoring : NULL;
    if (!m || !m->present) {
        o->sample_rate = 0;
        return MCP_STATUS_OK;
    }
    o->sample_rate = m->sample_rate;
    o->window = m->window;
    o->threshold = m->threshold;
    o->min_samples = m->min_samples;
    mcp_status st = MCP_STATUS_OK;
    if (m->n_outputs > 0) {
        for (int i = 0; i < m->n_outputs && st == MCP_STATUS_OK; i++) {
            const mcp_tensor_meta *t = NULL;
            for (int k = 0; k < v->n_outputs && !t; k++)
                if (!strcmp(v->outputs[k].name, m->outputs[i])) t = &v->outputs[k];
            if (!t)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                   "monitoring.outputs names '%s', which model '%s' does not serve", m->outputs[i], v->name);
            if (!dtype_numeric(t->dtype))
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                   "monitoring.outputs names '%s' of model '%s', which is %s (a topk step's strings); "
                                   "monitoring needs numbers: drop the topk step or watch another output",
                                   t->name, v->name, mcp_oip_datatype(t->dtype));
            st = add_watch(o, v, t, false, m->classifier, err);
        }
    } else {
        /* Every numeric output; strings (a topk step's answers) say nothing
         * a distribution test can read. */
        for (int k = 0; k < v->n_outputs && st == MCP_STATUS_OK; k++)
            if (dtype_numeric(v->outputs[k].dtype)) st = add_watch(o, v, &v->outputs[k], false, m->classifier, err);
    }
    for (int k = 0; m->inputs && k < v->n_inputs && st == MCP_STATUS_OK; k++)
        if (dtype_numeric(v->inputs[k].dtype)) st = add_watch(o, v, &v->inputs[k], true, MCP_CLASSIFIER_OFF, err);
    if (st == MCP_STATUS_OK && o->n_watch == 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                           "model '%s' has monitoring but no numeric output%s to watch (a topk step's strings cannot be "
                           "compared as distributions)",
                           v->name, m->inputs ? " or input" : "");
    return st;
}

/* ---- life ---- */

static void monitor_free(mcp_monitor *mon)
{
    for (int i = 0; mon->w && i < mon->n_watch; i++) {
        watch *w = &mon->w[i];
        mcp_free(w->name);
        mcp_free(w->ref);
        mcp_free(w->cur);
        mcp_free(w->ent_ref);
        mcp_free(w->ent_cur);
        mcp_free(w->cls_cur);
        mcp_free(w->hist_ref);
        mcp_free(w->hist_cur);
    }
    mcp_free(mon->w);
    mcp_free((void *)mon->seq);
    mcp_free(mon->slot_n);
    mcp_free(mon->slot_rows);
    mcp_free(mon->slot_data);
    mcp_free(mon->scratch);
    mcp_free(mon->model);
    mcp_free(mon->version);
    if (mon->sem_made) sem_destroy(&mon->wake);
    pthread_mutex_destroy(&mon->mu);
    pthread_cond_destroy(&mon->evaluated_cv);
    mcp_free(mon);
}

static void *monitor_main(void *arg);

/* ---- the set ---- */

mcp_monitor_set *mcp_monitor_set_create(mcp_monitor_drift_fn on_drift, void *user)
{
    mcp_monitor_set *s = mcp_calloc(1, sizeof *s);
    if (!s) return NULL;
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->cb_mu, NULL);
    s->on_drift = on_drift;
    s->user = user;
    return s;
}

static void set_unref(mcp_monitor_set *s)
{
    if (atomic_fetch_sub(&s->refs, 1) != 1) return;
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->cb_mu);
    mcp_free(s->items);
    mcp_free(s);
}

void mcp_monitor_set_release(mcp_monitor_set *s)
{
    if (!s) return;
    /* Waits for a callback in progress; none starts after. */
    pthread_mutex_lock(&s->cb_mu);
    s->on_drift = NULL;
    pthread_mutex_unlock(&s->cb_mu);
    set_unref(s);
}

/* The monitor joins the set (and holds a reference to it). */
static bool set_join(mcp_monitor_set *s, mcp_monitor *mon)
{
    pthread_mutex_lock(&s->mu);
    bool ok = true;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        mcp_monitor **items = mcp_realloc(s->items, (size_t)cap * sizeof *items);
        if (items) {
            s->items = items;
            s->cap = cap;
        } else {
            ok = false;
        }
    }
    if (ok) {
        s->items[s->n++] = mon;
        atomic_fetch_add(&s->refs, 1);
        mon->set = s;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void set_leave(mcp_monitor *mon)
{
    mcp_monitor_set *s = mon->set;
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n; i++) {
        if (s->items[i] != mon) continue;
        s->items[i] = s->items[--s->n];
        break;
    }
    pthread_mutex_unlock(&s->mu);
    mon->set = NULL;
    set_unref(s);
}

void mcp_monitor_set_render(mcp_monitor_set *s, mcp_buf *out)
{
    if (!s) return;
    /* Held while rendering: a monitor leaves the set before it is freed. */
    pthread_mutex_lock(&s->mu);
    mcp_monitor_render(s->items, s->n, out);
    pthread_mutex_unlock(&s->mu);
}

bool mcp_monitor_set_json(mcp_monitor_set *s, const char *model, const char *version, mcp_buf *out)
{
    if (!s || !model || !version) return false;
    pthread_mutex_lock(&s->mu);
    mcp_monitor *found = NULL;
    for (int i = 0; i < s->n; i++) {
        mcp_monitor *m = s->items[i];
        if (!strcmp(m->model, model) && !strcmp(m->version, version) && (!found || m->created_ns > found->created_ns))
            found = m;
    }
    if (found) mcp_monitor_json(found, out);
    pthread_mutex_unlock(&s->mu);
    return found != NULL;
}

static mcp_status check_options(const mcp_monitor_options *o, mcp_err *err)
{
    if (!o->model || !o->version) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "a monitor needs a model and version");
    if (!(o->sample_rate >= 0 && o->sample_rate <= 1))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "sample_rate %g is out of range (0..1)", o->sample_rate);
    if (o->window < 2 || o->window > 1000000)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "window %lld is out of range (2..1000000)", (long long)o->window);
    if (o->min_samples < 1 || o->min_samples > o->window)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "min_samples %lld is out of range (1..window %lld)",
                           (long long)o->min_samples, (long long)o->window);
    if (!(o->threshold > 0 && o->threshold <= 1))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "threshold %g is out of range (0..1]", o->threshold);
    if (o->values_per_request < 1 || o->values_per_request > MCP_MONITOR_MAX_VALUES)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "values_per_request %d is out of range (1..%d)",
                           o->values_per_request, MCP_MONITOR_MAX_VALUES);
    if (o->queue < 1 || o->queue > MCP_MONITOR_MAX_QUEUE)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "queue %d is out of range (1..%d)", o->queue,
                           MCP_MONITOR_MAX_QUEUE);
    if (o->n_watch < 0 || o->n_watch > MCP_MONITOR_MAX_WATCH)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%d tensors to watch; at most %d", o->n_watch,
                           MCP_MONITOR_MAX_WATCH);
    for (int i = 0; i < o->n_watch; i++) {
        const mcp_monitor_watch *w = &o->watch[i];
        if (!w->name) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "watched tensor %d has no name", i);
        if (w->classes == 1 || w->classes < 0 || w->classes > MCP_MONITOR_MAX_CLASSES)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tensor '%s': %lld classes (0, or 2..%d)", w->name,
                               (long long)w->classes, MCP_MONITOR_MAX_CLASSES);
        for (int k = 0; k < i; k++)
            if (o->watch[k].input == w->input && !strcmp(o->watch[k].name, w->name))
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "tensor '%s' is watched twice", w->name);
    }
    return MCP_STATUS_OK;
}

mcp_status mcp_monitor_create(const mcp_monitor_options *o, mcp_monitor **out, mcp_err *err)
{
    *out = NULL;
    mcp_status st = check_options(o, err);
    if (st != MCP_STATUS_OK) return st;
    mcp_monitor *mon = mcp_calloc(1, sizeof *mon);
    if (!mon) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&mon->mu, NULL);
    pthread_cond_init(&mon->evaluated_cv, NULL);
    mon->sample_rate = o->sample_rate;
    mon->sampling = o->sample_rate > 0;
    mon->sample_all = o->sample_rate >= 1;
    mon->rate_fixed = mon->sample_all ? UINT64_MAX : (uint64_t)ldexp(o->sample_rate, 64);
    mon->window = o->window;
    mon->min_samples = o->min_samples;
    mon->threshold = o->threshold;
    mon->values_per_request = o->values_per_request;
    mon->on_drift = o->on_drift;
    mon->user = o->user;
    mon->n_watch = o->n_watch;
    mon->model = mcp_strdup(o->model);
    mon->version = mcp_strdup(o->version);
    mon->w = mcp_calloc((size_t)(o->n_watch ? o->n_watch : 1), sizeof *mon->w);
    bool ok = mon->model && mon->version && mon->w;
    size_t W = (size_t)o->window;
    for (int i = 0; ok && i < o->n_watch; i++) {
        watch *w = &mon->w[i];
        w->name = mcp_strdup(o->watch[i].name);
        w->input = o->watch[i].input;
        w->classes = o->watch[i].classes;
        /* A classifier's rows are copied whole: at least one row. */
        w->cap = (size_t)o->values_per_request;
        if (w->classes > (int64_t)w->cap) w->cap = (size_t)w->classes;
        w->offset = mon->slot_floats;
        mon->slot_floats += w->cap;
        w->ref = mcp_malloc(W * sizeof(float));
        w->cur = mcp_malloc(W * sizeof(float));
        ok = w->name && w->ref && w->cur;
        if (ok && w->classes >= 2) {
            w->ent_ref = mcp_malloc(W * sizeof(float));
            w->ent_cur = mcp_malloc(W * sizeof(float));
            w->cls_cur = mcp_malloc(W * sizeof(int32_t));
            w->hist_ref = mcp_calloc((size_t)w->classes, sizeof(int64_t));
            w->hist_cur = mcp_calloc((size_t)w->classes, sizeof(int64_t));
            ok = w->ent_ref && w->ent_cur && w->cls_cur && w->hist_ref && w->hist_cur;
        }
    }
    mon->qcap = 1;
    while (mon->qcap < (size_t)o->queue) mon->qcap <<= 1;
    mon->qmask = mon->qcap - 1;
    size_t ring_bytes = mon->qcap * (mon->slot_floats * sizeof(float) + (size_t)mon->n_watch * (sizeof(int32_t) + 1));
    if (ok && ring_bytes > RING_MAX_BYTES) {
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                         "the monitor's queue of %zu samples of %zu values would take %zu MiB; at most %u MiB: lower "
                         "queue or values_per_request, or watch fewer tensors",
                         mon->qcap, mon->slot_floats, ring_bytes >> 20, RING_MAX_BYTES >> 20);
        monitor_free(mon);
        return st;
    }
    if (ok) {
        mon->seq = mcp_malloc(mon->qcap * sizeof *mon->seq);
        mon->slot_n = mcp_calloc(mon->qcap * (size_t)(mon->n_watch ? mon->n_watch : 1), sizeof(int32_t));
        mon->slot_rows = mcp_calloc(mon->qcap * (size_t)(mon->n_watch ? mon->n_watch : 1), sizeof(bool));
        mon->slot_data = mcp_malloc(mon->qcap * (mon->slot_floats ? mon->slot_floats : 1) * sizeof(float));
        mon->scratch = mcp_malloc(W * sizeof(float));
        ok = mon->seq && mon->slot_n && mon->slot_rows && mon->slot_data && mon->scratch;
    }
    if (!ok) {
        monitor_free(mon);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for the monitor of %s %s", o->model, o->version);
    }
    for (size_t i = 0; i < mon->qcap; i++) atomic_init(&mon->seq[i], i);
    atomic_init(&mon->enqueue_pos, 0);
    atomic_init(&mon->offered, 0);
    atomic_init(&mon->samples, 0);
    atomic_init(&mon->dropped, 0);
    atomic_init(&mon->events, 0);
    atomic_init(&mon->stop, false);
    mon->created_ns = mcp_now_ns();
    if (o->set && !set_join(o->set, mon)) {
        monitor_free(mon);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory for the monitor of %s %s", o->model, o->version);
    }
    /* Sampling nothing needs no thread. */
    if (mon->sampling) {
        if (sem_init(&mon->wake, 0, 0) != 0) {
            set_leave(mon);
            monitor_free(mon);
            return mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot make the monitor's semaphore: %s", strerror(errno));
        }
        mon->sem_made = true;
        int rc = pthread_create(&mon->thread, NULL, monitor_main, mon);
        if (rc != 0) {
            set_leave(mon);
            monitor_free(mon);
            return mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot start the monitor's thread: %s", strerror(rc));
        }
        mon->thread_started = true;
    }
    *out = mon;
    return MCP_STATUS_OK;
}

void mcp_monitor_destroy(mcp_monitor *mon)
{
    if (!mon) return;
    set_leave(mon); /* no scrape reads it from here */
    if (mon->thread_started && pthread_equal(pthread_self(), mon->thread)) {
        /* From inside its own callback (a version's last reference dropped
         * there): it cannot join itself, so the thread frees the monitor
         * once the callback has returned. */
        mon->self_destroy = true;
        atomic_store(&mon->stop, true);
        sem_post(&mon->wake);
        return;
    }
    if (mon->thread_started) {
        atomic_store(&mon->stop, true);
        sem_post(&mon->wake);
        pthread_join(mon->thread, NULL);
    }
    monitor_free(mon);
}

/* ---- the hot path ---- */

static const mcp_req_tensor *find_tensor(int n, const mcp_req_tensor *ts, const char *name)
{
    for (int i = 0; i < n; i++)
        if (ts[i].name && !strcmp(ts[i].name, name)) return &ts[i];
    return NULL;
}

static inline bool value_at(const mcp_tensor *t, int64_t i, float *out)
{
    double x = t->dtype == MCP_DTYPE_FLOAT ? ((const float *)t->data)[i] : mcp_tensor_get_f64(t, i);
    float f = (float)x;
    *out = f;
    return isfinite(f);
}

/* Copies at most w->cap values of t into dst, spread over the tensor by
 * a stride whose phase turns with n (so a large tensor is seen in all its
 * positions over many requests); a classifier's whole rows when its last
 * axis matches. Returns how many floats were stored. */
static int32_t copy_sample(const watch *w, const mcp_tensor *t, uint64_t n, float *dst, bool *rows)
{
    *rows = false;
    if (t->format || !t->data || !dtype_numeric(t->dtype)) return 0;
    int64_t numel = mcp_tensor_numel(t);
    if (numel <= 0) return 0;
    int64_t cap = (int64_t)w->cap, k = 0;
    if (w->classes >= 2 && t->rank >= 1 && t->dims[t->rank - 1] == w->classes) {
        int64_t c = w->classes, nrows = numel / c, fit = cap / c;
        int64_t take = nrows < fit ? nrows : fit, stride = nrows / take, phase = (int64_t)(n % (uint64_t)stride);
        for (int64_t j = 0; j < take; j++) {
            int64_t base = (phase + j * stride) * c;
            bool finite = true;
            for (int64_t q = 0; q < c && finite; q++) finite = value_at(t, base + q, &dst[k + q]);
            if (finite) k += c; /* a row with a NaN has no class */
        }
        *rows = true;
        return (int32_t)k;
    }
    int64_t take = numel < cap ? numel : cap, stride = numel / take, phase = (int64_t)(n % (uint64_t)stride);
    for (int64_t j = 0; j < take; j++)
        if (value_at(t, phase + j * stride, &dst[k])) k++;
    return (int32_t)k;
}

bool mcp_monitor_offer(mcp_monitor *mon, int n_inputs, const mcp_req_tensor *inputs, int n_outputs,
                       const mcp_req_tensor *outputs)
{
    if (!mon || !mon->sampling) return false;
    uint64_t n = atomic_fetch_add_explicit(&mon->offered, 1, memory_order_relaxed);
    if (!mon->sample_all && n * WEYL_STEP >= mon->rate_fixed) return false;
    uint64_t pos = atomic_load_explicit(&mon->enqueue_pos, memory_order_relaxed);
    for (;;) {
        uint64_t seq = atomic_load_explicit(&mon->seq[pos & mon->qmask], memory_order_acquire);
        int64_t dif = (int64_t)(seq - pos);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&mon->enqueue_pos, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            /* The consumer still holds this slot from the last lap: full. */
            atomic_fetch_add_explicit(&mon->dropped, 1, memory_order_relaxed);
            return false;
        } else {
            pos = atomic_load_explicit(&mon->enqueue_pos, memory_order_relaxed);
        }
    }
    size_t s = pos & mon->qmask;
    float *data = mon->slot_data + s * mon->slot_floats;
    for (int i = 0; i < mon->n_watch; i++) {
        const watch *w = &mon->w[i];
        const mcp_req_tensor *t = w->input ? find_tensor(n_inputs, inputs, w->name) : find_tensor(n_outputs, outputs, w->name);
        size_t at = s * (size_t)mon->n_watch + (size_t)i;
        mon->slot_n[at] = t ? copy_sample(w, &t->t, n, data + w->offset, &mon->slot_rows[at]) : 0;
    }
    atomic_fetch_add_explicit(&mon->samples, 1, memory_order_relaxed);
    atomic_store_explicit(&mon->seq[s], pos + 1, memory_order_release);
    sem_post(&mon->wake);
    return true;
}

bool mcp_monitor_offer_request(mcp_monitor *mon, const mcp_request *r)
{
    if (!mon || !mon->sampling || r->status != MCP_STATUS_OK) return false;
    return mcp_monitor_offer(mon, r->n_inputs, r->inputs, r->n_outputs, r->outputs);
}

/* ---- the thread: windows ---- */

static void push_value(mcp_monitor *mon, watch *w, float x)
{
    int64_t W = mon->window;
    if (w->ref_n < W) {
        w->ref[w->ref_n++] = x;
        if (w->ref_n == W) qsort(w->ref, (size_t)W, sizeof(float), float_cmp); /* frozen from here */
        return;
    }
    w->cur[w->cur_head] = x;
    w->cur_head = (w->cur_head + 1) % W;
    if (w->cur_n < W) w->cur_n++;
}

static void push_row(mcp_monitor *mon, watch *w, const float *row)
{
    int64_t W = mon->window, k = 0;
    float e = (float)mcp_monitor_entropy(row, w->classes, &k);
    if (w->ent_ref_n < W) {
        w->ent_ref[w->ent_ref_n++] = e;
        w->hist_ref[k]++;
        if (w->ent_ref_n == W) qsort(w->ent_ref, (size_t)W, sizeof(float), float_cmp);
        return;
    }
    if (w->row_n == W) w->hist_cur[w->cls_cur[w->row_head]]--; /* the oldest row leaves */
    else w->row_n++;
    w->ent_cur[w->row_head] = e;
    w->cls_cur[w->row_head] = (int32_t)k;
    w->hist_cur[k]++;
    w->row_head = (w->row_head + 1) % W;
}

/* Takes the record at the head of the ring if it is published. */
static bool take_one(mcp_monitor *mon)
{
    uint64_t pos = mon->dequeue_pos;
    size_t s = pos & mon->qmask;
    if (atomic_load_explicit(&mon->seq[s], memory_order_acquire) != pos + 1) return false;
    const float *data = mon->slot_data + s * mon->slot_floats;
    for (int i = 0; i < mon->n_watch; i++) {
        watch *w = &mon->w[i];
        size_t at = s * (size_t)mon->n_watch + (size_t)i;
        int32_t n = mon->slot_n[at];
        const float *v = data + w->offset;
        if (n <= 0) continue;
        w->dirty = true;
        for (int32_t q = 0; q < n; q++) push_value(mon, w, v[q]);
        if (mon->slot_rows[at])
            for (int32_t q = 0; q + w->classes <= n; q += (int32_t)w->classes) push_row(mon, w, v + q);
    }
    /* The slot is free for the producer one lap on. */
    atomic_store_explicit(&mon->seq[s], pos + mon->qcap, memory_order_release);
    mon->dequeue_pos = pos + 1;
    mon->consumed++;
    return true;
}

/* ---- the thread: scores and the decision ---- */

static void evaluate(mcp_monitor *mon)
{
    int64_t W = mon->window;
    for (int i = 0; i < mon->n_watch; i++) {
        watch *w = &mon->w[i];
        if (!w->dirty) continue;
        w->dirty = false;
        figures ref = mean_variance(w->ref, w->ref_n), cur = mean_variance(w->cur, w->cur_n);
        double score[ST_COUNT] = {0};
        if (w->ref_n == W && w->cur_n >= mon->min_samples) {
            memcpy(mon->scratch, w->cur, (size_t)w->cur_n * sizeof(float));
            qsort(mon->scratch, (size_t)w->cur_n, sizeof(float), float_cmp);
            score[ST_KS] = mcp_monitor_ks(w->ref, (size_t)W, mon->scratch, (size_t)w->cur_n);
        }
        double ent_ref = 0, ent_cur = 0;
        if (w->classes >= 2) {
            ent_ref = mean_of(w->ent_ref, w->ent_ref_n);
            ent_cur = mean_of(w->ent_cur, w->row_n);
            if (w->ent_ref_n == W && w->row_n >= mon->min_samples) {
                score[ST_CLASS_TV] = mcp_monitor_tv(w->hist_ref, W, w->hist_cur, w->row_n, w->classes);
                memcpy(mon->scratch, w->ent_cur, (size_t)w->row_n * sizeof(float));
                qsort(mon->scratch, (size_t)w->row_n, sizeof(float), float_cmp);
                score[ST_ENTROPY_KS] = mcp_monitor_ks(w->ent_ref, (size_t)W, mon->scratch, (size_t)w->row_n);
            }
        }
        pthread_mutex_lock(&mon->mu);
        w->pub_ref = ref;
        w->pub_cur = cur;
        w->rows_ref = w->ent_ref_n;
        w->rows_cur = w->row_n;
        w->entropy_ref = ent_ref;
        w->entropy_cur = ent_cur;
        memcpy(w->score, score, sizeof score);
        pthread_mutex_unlock(&mon->mu);
    }
    double best = 0;
    int bw = -1, bs = 0;
    for (int i = 0; i < mon->n_watch; i++)
        for (int s = 0; s < stat_count(&mon->w[i]); s++)
            if (mon->w[i].score[s] > best || bw < 0) best = mon->w[i].score[s], bw = i, bs = s;
    pthread_mutex_lock(&mon->mu);
    bool was = mon->drifted;
    bool now = was ? best > CLEAR_SHARE * mon->threshold : best > mon->threshold;
    mon->drifted = now;
    mon->best = best;
    pthread_mutex_unlock(&mon->mu);
    if (now != was) {
        if (now) atomic_fetch_add(&mon->events, 1);
        const char *tensor = bw >= 0 ? mon->w[bw].name : "", *stat = bw >= 0 ? stat_name(&mon->w[bw], bs) : "";
        if (mon->on_drift) mon->on_drift(mon->user, mon->model, mon->version, tensor, stat, best, mon->threshold, now);
        mcp_monitor_set *set = mon->set;
        if (set) {
            pthread_mutex_lock(&set->cb_mu);
            if (set->on_drift) set->on_drift(set->user, mon->model, mon->version, tensor, stat, best, mon->threshold, now);
            pthread_mutex_unlock(&set->cb_mu);
        }
    }
    /* After the callback: a flush that returns has seen its event too. */
    pthread_mutex_lock(&mon->mu);
    mon->evaluated = mon->consumed;
    pthread_cond_broadcast(&mon->evaluated_cv);
    pthread_mutex_unlock(&mon->mu);
}

static void *monitor_main(void *arg)
{
    mcp_monitor *mon = arg;
    int64_t last_eval = 0;
    bool pending = false; /* records taken since the last evaluation */
    for (;;) {
        int64_t left = pending ? last_eval + EVAL_INTERVAL_NS - mcp_now_ns() : 0;
        if (pending && left > 0 && !atomic_load(&mon->flush_waiters)) {
            /* Records wait for the next evaluation: sleep until it is due,
             * or until the next record or a flush. */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += left / 1000000000LL;
            until.tv_nsec += left % 1000000000LL;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            while (sem_timedwait(&mon->wake, &until) != 0 && errno == EINTR) {
            }
        } else if (!pending) {
            while (sem_wait(&mon->wake) != 0 && errno == EINTR) {
            }
        }
        if (atomic_load(&mon->stop)) break;
        /* One wake-up per published record; a record whose producer is
         * still copying (an earlier slot than the one that woke us) is
         * taken when its own post arrives. At most a ring's worth per
         * pass, so sustained load still reaches the evaluation below. */
        for (size_t k = 0; k < mon->qcap && !atomic_load_explicit(&mon->stop, memory_order_relaxed) && take_one(mon); k++)
            pending = true;
        if (pending && (mcp_now_ns() - last_eval >= EVAL_INTERVAL_NS || atomic_load(&mon->flush_waiters))) {
            evaluate(mon);
            last_eval = mcp_now_ns();
            pending = false;
        }
    }
    if (mon->self_destroy) {
        pthread_detach(pthread_self());
        monitor_free(mon);
        return NULL;
    }
    /* Wake any flush still waiting: nothing more will be evaluated. */
    pthread_mutex_lock(&mon->mu);
    mon->evaluated = INT64_MAX;
    pthread_cond_broadcast(&mon->evaluated_cv);
    pthread_mutex_unlock(&mon->mu);
    return NULL;
}

void mcp_monitor_flush(mcp_monitor *mon)
{
    if (!mon || !mon->thread_started) return;
    int64_t want = atomic_load(&mon->samples);
    atomic_fetch_add(&mon->flush_waiters, 1);
    sem_post(&mon->wake); /* evaluate now, not at the next interval */
    pthread_mutex_lock(&mon->mu);
    while (mon->evaluated < want) pthread_cond_wait(&mon->evaluated_cv, &mon->mu);
    pthread_mutex_unlock(&mon->mu);
    atomic_fetch_sub(&mon->flush_waiters, 1);
}

/* ---- views ---- */

void mcp_monitor_summary_get(mcp_monitor *mon, mcp_monitor_summary *out)
{
    *out = (mcp_monitor_summary){0};
    if (!mon) return;
    out->offered = (int64_t)atomic_load(&mon->offered);
    out->samples = atomic_load(&mon->samples);
    out->dropped = atomic_load(&mon->dropped);
    out->drift_events = atomic_load(&mon->events);
    pthread_mutex_lock(&mon->mu);
    out->score = mon->best;
    out->drifted = mon->drifted;
    pthread_mutex_unlock(&mon->mu);
}

double mcp_monitor_score(mcp_monitor *mon, const char *tensor, const char *statistic)
{
    if (!mon || !tensor || !statistic) return -1;
    double r = -1;
    pthread_mutex_lock(&mon->mu);
    for (int i = 0; i < mon->n_watch && r < 0; i++) {
        const watch *w = &mon->w[i];
        if (strcmp(w->name, tensor) != 0) continue;
        for (int s = 0; s < stat_count(w); s++)
            if (!strcmp(stat_name(w, s), statistic)) r = w->score[s];
    }
    pthread_mutex_unlock(&mon->mu);
    return r;
}

/* What the views read, copied under the monitor's lock once. */
typedef struct watch_snap {
    const char *name; /* the monitor's; it outlives the view */
    bool input;
    int64_t classes;
    figures ref, cur;
    int64_t rows_ref, rows_cur;
    double entropy_ref, entropy_cur;
    double score[ST_COUNT];
} watch_snap;

typedef struct monitor_snap {
    const mcp_monitor *mon;
    int64_t offered, samples, dropped, events, evaluated;
    double best;
    bool drifted;
    watch_snap *w;
} monitor_snap;

static bool snapshot(mcp_monitor *mon, monitor_snap *s)
{
    s->mon = mon;
    s->w = mcp_calloc((size_t)(mon->n_watch ? mon->n_watch : 1), sizeof *s->w);
    if (!s->w) return false;
    s->offered = (int64_t)atomic_load(&mon->offered);
    s->samples = atomic_load(&mon->samples);
    s->dropped = atomic_load(&mon->dropped);
    s->events = atomic_load(&mon->events);
    pthread_mutex_lock(&mon->mu);
    s->best = mon->best;
    s->drifted = mon->drifted;
    s->evaluated = mon->evaluated == INT64_MAX ? s->samples : mon->evaluated;
    for (int i = 0; i < mon->n_watch; i++) {
        const watch *w = &mon->w[i];
        s->w[i] = (watch_snap){.name = w->name, .input = w->input, .classes = w->classes, .ref = w->pub_ref,
                               .cur = w->pub_cur, .rows_ref = w->rows_ref, .rows_cur = w->rows_cur,
                               .entropy_ref = w->entropy_ref, .entropy_cur = w->entropy_cur};
        memcpy(s->w[i].score, w->score, sizeof w->score);
    }
    pthread_mutex_unlock(&mon->mu);
    return true;
}

/* key="value", the value escaped as /metrics escapes every label value
 * (tensor names come from model files). */
static void put_label(mcp_buf *out, const char *key, const char *s)
{
    mcp_buf_printf(out, "%s=", key);
    mcp_metrics_label_value(out, s);
}

static void put_head(mcp_buf *out, const char *family, const monitor_snap *s)
{
    mcp_buf_printf(out, "%s{", family);
    put_label(out, "model", s->mon->model);
    mcp_buf_puts(out, ",");
    put_label(out, "version", s->mon->version);
}

static void put_value(mcp_buf *out, double v) { mcp_buf_printf(out, "} %.9g\n", v); }

static void put_family(mcp_buf *out, const char *name, const char *type, const char *help)
{
    mcp_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Model, version, then the newest first. */
static int snap_cmp(const void *x, const void *y)
{
    const monitor_snap *a = x, *b = y;
    int c = strcmp(a->mon->model, b->mon->model);
    if (!c) c = strcmp(a->mon->version, b->mon->version);
    if (!c) c = (a->mon->created_ns < b->mon->created_ns) - (a->mon->created_ns > b->mon->created_ns);
    return c;
}

/* Per-version families (one series per monitor). */
typedef enum { VF_THRESHOLD, VF_DRIFTED, VF_SAMPLES, VF_DROPPED, VF_EVENTS } version_family;

static void render_version_family(mcp_buf *out, const monitor_snap *snaps, int n, version_family f)
{
    static const char *const names[] = {"mcp_monitor_drift_threshold", "mcp_monitor_drifted", "mcp_monitor_samples_total",
                                        "mcp_monitor_samples_dropped_total", "mcp_monitor_drift_events_total"};
    static const char *const helps[] = {
        "Drift score above which the model version counts as drifted.",
        "Whether the model version is drifted now (1) or not (0).",
        "Requests sampled for output monitoring and queued for its statistics.",
        "Requests sampled for output monitoring but dropped because its queue was full.",
        "Times the model version became drifted.",
    };
    put_family(out, names[f], f >= VF_SAMPLES ? "counter" : "gauge", helps[f]);
    for (int i = 0; i < n; i++) {
        const monitor_snap *s = &snaps[i];
        put_head(out, names[f], s);
        switch (f) {
        case VF_THRESHOLD: put_value(out, s->mon->threshold); break;
        case VF_DRIFTED: put_value(out, s->drifted ? 1 : 0); break;
        case VF_SAMPLES: mcp_buf_printf(out, "} %lld\n", (long long)s->samples); break;
        case VF_DROPPED: mcp_buf_printf(out, "} %lld\n", (long long)s->dropped); break;
        case VF_EVENTS: mcp_buf_printf(out, "} %lld\n", (long long)s->events); break;
        }
    }
}

/* mean / variance / entropy by window, for inputs or outputs. */
typedef enum { WF_MEAN, WF_VARIANCE, WF_ENTROPY } window_family;

static void render_window_family(mcp_buf *out, const monitor_snap *snaps, int n, bool inputs, window_family f)
{
    static const char *const what[] = {"mean", "variance", "entropy"};
    char name[64];
    if (f == WF_ENTROPY) snprintf(name, sizeof name, "mcp_monitor_prediction_entropy");
    else snprintf(name, sizeof name, "mcp_monitor_%s_%s", inputs ? "input" : "output", what[f]);
    bool any = false;
    for (int i = 0; i < n && !any; i++)
        for (int k = 0; k < snaps[i].mon->n_watch && !any; k++) {
            const watch_snap *w = &snaps[i].w[k];
            any = w->input == inputs && (f != WF_ENTROPY || w->classes >= 2);
        }
    if (!any) return;
    char help[200];
    if (f == WF_ENTROPY)
        snprintf(help, sizeof help, "Mean entropy in nats of a classifier output's predictions in the reference "
                                    "(first samples after load) or current (latest) window.");
    else
        snprintf(help, sizeof help, "%s of an %s's sampled values in the reference (first samples after load) or "
                                    "current (latest) window.",
                 f == WF_MEAN ? "Mean" : "Population variance", inputs ? "input" : "output");
    put_family(out, name, "gauge", help);
    for (int i = 0; i < n; i++) {
        const monitor_snap *s = &snaps[i];
        for (int k = 0; k < s->mon->n_watch; k++) {
            const watch_snap *w = &s->w[k];
            if (w->input != inputs || (f == WF_ENTROPY && w->classes < 2)) continue;
            for (int win = 0; win < 2; win++) {
                const figures *fg = win ? &w->cur : &w->ref;
                double v = f == WF_MEAN ? fg->mean : f == WF_VARIANCE ? fg->variance : win ? w->entropy_cur : w->entropy_ref;
                put_head(out, name, s);
                mcp_buf_puts(out, ",");
                put_label(out, inputs ? "input" : "output", w->name);
                mcp_buf_printf(out, ",window=\"%s\"", win ? "current" : "reference");
                put_value(out, v);
            }
        }
    }
}

void mcp_monitor_render(mcp_monitor *const *mons, int n, mcp_buf *out)
{
    if (n <= 0) return;
    monitor_snap *snaps = mcp_calloc((size_t)n, sizeof *snaps);
    int k = 0;
    bool ok = snaps != NULL;
    for (int i = 0; ok && i < n; i++)
        if (mons[i]) ok = snapshot(mons[i], &snaps[k++]);
    if (!ok) {
        out->failed = true; /* the scrape is incomplete; say so rather than serve half */
        for (int i = 0; snaps && i < k; i++) mcp_free(snaps[i].w);
        mcp_free(snaps);
        return;
    }
    qsort(snaps, (size_t)k, sizeof *snaps, snap_cmp);
    /* One series per label set: of two monitors of one model:version (a
     * reload of the same version while the old copy drains) the newer. */
    int kept = 0;
    for (int i = 0; i < k; i++) {
        if (kept && !strcmp(snaps[kept - 1].mon->model, snaps[i].mon->model) &&
            !strcmp(snaps[kept - 1].mon->version, snaps[i].mon->version)) {
            mcp_free(snaps[i].w);
            continue;
        }
        snaps[kept++] = snaps[i];
    }
    k = kept;
    const char *const score = "mcp_monitor_drift_score";
    put_family(out, score, "gauge",
               "Drift score of a watched tensor, 0 (the same) to 1: ks and input_ks are the two-sample "
               "Kolmogorov-Smirnov statistic of its values, class_tv the total-variation distance of the predicted "
               "classes, entropy_ks the KS statistic of the prediction entropies; current window against reference, "
               "0 until the current window holds min_samples.");
    for (int i = 0; i < k; i++) {
        const monitor_snap *s = &snaps[i];
        for (int q = 0; q < s->mon->n_watch; q++) {
            const watch_snap *w = &s->w[q];
            for (int st = 0; st < (w->classes >= 2 ? ST_COUNT : 1); st++) {
                put_head(out, score, s);
                mcp_buf_puts(out, ",");
                put_label(out, "output", w->name);
                mcp_buf_printf(out, ",statistic=\"%s\"", st == ST_KS && w->input ? "input_ks"
                                                         : st == ST_KS           ? "ks"
                                                         : st == ST_CLASS_TV     ? "class_tv"
                                                                                 : "entropy_ks");
                put_value(out, w->score[st]);
            }
        }
    }
    render_version_family(out, snaps, k, VF_THRESHOLD);
    render_version_family(out, snaps, k, VF_DRIFTED);
    for (int f = WF_MEAN; f <= WF_VARIANCE; f++) render_window_family(out, snaps, k, false, (window_family)f);
    for (int f = WF_MEAN; f <= WF_VARIANCE; f++) render_window_family(out, snaps, k, true, (window_family)f);
    render_window_family(out, snaps, k, false, WF_ENTROPY);
    render_version_family(out, snaps, k, VF_SAMPLES);
    render_version_family(out, snaps, k, VF_DROPPED);
    render_version_family(out, snaps, k, VF_EVENTS);
    for (int i = 0; i < k; i++) mcp_free(snaps[i].w);
    mcp_free(snaps);
}

static void json_window(mcp_buf *out, const char *key, const figures *f, bool classifier, int64_t rows, double entropy)
{
    mcp_buf_printf(out, "\"%s\":{\"samples\":%lld,\"mean\":%.9g,\"variance\":%.9g", key, (long long)f->n, f->mean,
                   f->variance);
    if (classifier) mcp_buf_printf(out, ",\"predictions\":%lld,\"entropy\":%.9g", (long long)rows, entropy);
    mcp_buf_puts(out, "}");
}

void mcp_monitor_json(mcp_monitor *mon, mcp_buf *out)
{
    monitor_snap s;
    if (!mon || !snapshot(mon, &s)) {
        mcp_buf_puts(out, "null");
        return;
    }
    mcp_buf_printf(out,
                   "{\"sample_rate\":%.9g,\"window\":%lld,\"min_samples\":%lld,\"threshold\":%.9g,\"score\":%.9g,"
                   "\"drifted\":%s,\"offered\":%lld,\"samples\":%lld,\"evaluated\":%lld,\"dropped\":%lld,"
                   "\"drift_events\":%lld,\"outputs\":[",
                   mon->sample_rate, (long long)mon->window, (long long)mon->min_samples, mon->threshold, s.best,
                   s.drifted ? "true" : "false", (long long)s.offered, (long long)s.samples, (long long)s.evaluated,
                   (long long)s.dropped, (long long)s.events);
    for (int i = 0; i < mon->n_watch; i++) {
        const watch_snap *w = &s.w[i];
        bool cls = w->classes >= 2;
        mcp_buf_puts(out, i ? ",{\"name\":" : "{\"name\":");
        mcp_buf_json_string(out, w->name);
        mcp_buf_printf(out, ",\"input\":%s,\"classifier\":%s", w->input ? "true" : "false", cls ? "true" : "false");
        if (cls) mcp_buf_printf(out, ",\"classes\":%lld", (long long)w->classes);
        mcp_buf_puts(out, ",");
        json_window(out, "reference", &w->ref, cls, w->rows_ref, w->entropy_ref);
        mcp_buf_puts(out, ",");
        json_window(out, "current", &w->cur, cls, w->rows_cur, w->entropy_cur);
        mcp_buf_puts(out, ",\"scores\":{");
        for (int st = 0; st < (cls ? ST_COUNT : 1); st++)
            mcp_buf_printf(out, "%s\"%s\":%.9g", st ? "," : "", stat_name(&mon->w[i], st), w->score[st]);
        mcp_buf_puts(out, "}}");
    }
    mcp_buf_puts(out, "]}");
    mcp_free(s.w);
}
