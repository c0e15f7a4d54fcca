/*
 * Output monitoring (private to src/serve/): per model version, a sampled
 * share of its requests feeds windows of output (and input) statistics,
 * and a drift score over the threshold marks the version drifted.
 *
 * The hot path is mcp_monitor_offer, called by the worker that completed a
 * request: a sampling test (one atomic add, no lock), and for a sampled
 * request a bounded copy of its watched tensors into a preallocated slot
 * of a lock-free ring. The monitor's own thread takes the slots, keeps the
 * windows and computes the statistics; a full ring drops the sample and
 * counts it. Nothing on the hot path allocates, locks or waits.
 *
 * Windows. Per watched tensor, the reference window is the first `window`
 * samples after the monitor starts, then frozen (it does not roll: a
 * reference that followed the traffic would absorb a slow drift and never
 * report it); the current window is the latest `window` samples after the
 * reference filled, sliding. A sample is one value; for the classifier
 * statistics it is one prediction (a row along the last axis).
 *
 * Statistics, every score from 0 (the same) to 1 so one threshold serves
 * them all:
 *   ks         two-sample Kolmogorov-Smirnov D of the values, exact (both
 *              windows sorted, merge-walked, ties stepped together);
 *   class_tv   total-variation distance of the argmax class histograms,
 *              half the sum of |p_ref(c) - p_cur(c)| (classifiers);
 *   entropy_ks KS D of the per-prediction entropies (classifiers); a row
 *              whose values are not probabilities (some outside [0, 1], or
 *              not summing to 1 within 1e-3) is taken as logits and
 *              softmaxed first; entropy in nats;
 *   input_ks   KS D of an input's values (monitoring.inputs).
 * A statistic is judged once the current window holds min_samples; the
 * version is drifted when the largest judged score passes the threshold,
 * and stops being drifted when every score is back at or below 90% of it
 * (so a score hovering at the threshold raises one event, not one per
 * evaluation). Each change raises on_drift once.
 */
#ifndef MCP_SERVE_MONITOR_H
#define MCP_SERVE_MONITOR_H

#include "serve/serve.h"

#define MCP_MONITOR_MAX_WATCH 64      /* tensors one monitor watches */
#define MCP_MONITOR_MAX_CLASSES 4096  /* classes of a classifier output */
#define MCP_MONITOR_MAX_VALUES 4096   /* values_per_request */
#define MCP_MONITOR_MAX_QUEUE 4096    /* queue */

typedef struct mcp_monitor mcp_monitor;
/* The monitors a process renders and hears from: each joins the set given
 * in its options at create and leaves it at destroy, so a scrape never
 * reads a monitor being destroyed and needs no walk of the repository.
 * Monitors may outlive the set's owner (versions retire after the serving
 * core stops): the set is reference-counted, and its callback can be
 * detached. */
typedef struct mcp_monitor_set mcp_monitor_set;

/* The version became drifted (drifted true) or stopped being so: the
 * tensor and statistic with the largest score, that score and the
 * threshold. Called on the monitor's thread, outside the monitor's locks
 * (a set's callback under the set's callback lock); it may block briefly
 * (queue a job, log), never release the set. Destroying this monitor from
 * it (a version's last reference dropped there) is allowed: the monitor's
 * thread frees it after the callback. Strings are valid for the call
 * only. */
typedef void (*mcp_monitor_drift_fn)(void *user, const char *model, const char *version, const char *output,
                                     const char *statistic, double score, double threshold, bool drifted);

/* One tensor to watch. */
typedef struct mcp_monitor_watch {
    const char *name; /* external name (borrowed; create copies it) */
    bool input;       /* one of the request's inputs rather than its outputs */
    int64_t classes;  /* >= 2: a classifier over a last axis of this many classes; 0 = values only */
} mcp_monitor_watch;

typedef struct mcp_monitor_options {
    const char *model, *version; /* copied */
    double sample_rate;          /* share of requests sampled, 0..1; 0 = none (offer returns at once) */
    int64_t window;              /* samples per window; default 2000 */
    double threshold;            /* drift score above which the version drifts, (0, 1]; default 0.3 */
    int64_t min_samples;         /* current-window samples before a statistic is judged; default 500 */
    int values_per_request;      /* values copied per tensor per sampled request (a classifier's
                                    whole rows, at least one); default 32 */
    int queue;                   /* sampled requests waiting for the thread (rounded up to a power
                                    of two); beyond, samples are dropped; default 64 */
    int n_watch;
    mcp_monitor_watch watch[MCP_MONITOR_MAX_WATCH];
    mcp_monitor_drift_fn on_drift; /* NULL = none (the set's callback hears it too) */
    void *user;
    mcp_monitor_set *set;          /* joins it while it lives (it keeps a reference); NULL = none */
} mcp_monitor_options;

/* Defaults as above, nothing watched, sample_rate 0.1. */
mcp_monitor_options mcp_monitor_options_default(void);
/* The options a version's descriptor asks for (section `monitoring`),
 * resolved against the version's served inputs and outputs: the outputs
 * named (or every numeric one), the inputs with `inputs: true`, which of
 * them are classifiers. Strings are borrowed from v (create copies them);
 * on_drift and user are left for the caller. sample_rate is 0 when the
 * descriptor has no monitoring section: create no monitor then.
 * INVALID_ARGUMENT naming the tensor when a named output is missing or not
 * numeric (a topk step's strings), when nothing numeric is left to
 * watch, when `classifier: true` meets an output without a fixed last
 * axis of 2..MCP_MONITOR_MAX_CLASSES, or when more than
 * MCP_MONITOR_MAX_WATCH tensors would be watched. */
mcp_status mcp_monitor_options_from(const mcp_model_version *v, mcp_monitor_options *o, mcp_err *err);

/* Starts a monitor and its thread (none while sample_rate is 0); every
 * series exists at 0 from here.
 * INVALID_ARGUMENT for options out of range; OUT_OF_MEMORY. */
mcp_status mcp_monitor_create(const mcp_monitor_options *o, mcp_monitor **out, mcp_err *err);
/* Stops the thread and frees everything; samples still queued are
 * discarded. No mcp_monitor_offer, flush or view of it may be running or
 * start (destroy it after the version's scheduler, with the version);
 * renders through its set are safe. NULL is a no-op. */
void mcp_monitor_destroy(mcp_monitor *mon);

/* The hot path: counts the request and, when the sampling test picks it,
 * copies at most values_per_request values of each watched tensor found
 * among inputs / outputs (by name; tensors absent, non-numeric or in a
 * backend format are skipped, non-finite values left out) for the thread.
 * Returns whether it was taken (false: not sampled, or the queue was full
 * and the drop counted). Any thread; never blocks or allocates. */
bool mcp_monitor_offer(mcp_monitor *mon, int n_inputs, const mcp_req_tensor *inputs, int n_outputs,
                       const mcp_req_tensor *outputs);
/* mcp_monitor_offer for a finished request; requests that failed are not
 * offered (their outputs are not answers). */
bool mcp_monitor_offer_request(mcp_monitor *mon, const mcp_request *r);

/* Waits until every sample taken before the call has been processed and
 * the scores evaluated (tests; a status view that wants fresh figures). */
void mcp_monitor_flush(mcp_monitor *mon);

typedef struct mcp_monitor_summary {
    int64_t offered;      /* requests seen by mcp_monitor_offer */
    int64_t samples;      /* sampled and queued (mcp_monitor_samples_total) */
    int64_t dropped;      /* sampled, but the queue was full */
    int64_t drift_events; /* changes into drifted */
    double score;         /* largest judged score */
    bool drifted;
} mcp_monitor_summary;
void mcp_monitor_summary_get(mcp_monitor *mon, mcp_monitor_summary *out);
/* One tensor's score for a statistic ("ks", "class_tv", "entropy_ks",
 * "input_ks"): 0 until judged; -1 when the monitor has no such pair. */
double mcp_monitor_score(mcp_monitor *mon, const char *tensor, const char *statistic);

/*
 * Prometheus text (format 0.0.4) for every monitor given, each family's
 * # HELP and # TYPE once, its samples grouped under it, monitors in model
 * then version order (nothing when n is 0). Two monitors with the same
 * model and version (a version reloaded while the old copy drains) render
 * once, the newer one. Call once per scrape with all monitors (or
 * mcp_monitor_set_render), after the other families:
 *   mcp_monitor_drift_score{model,version,output,statistic}   gauge
 *       (output: the tensor; for statistic input_ks an input's name)
 *   mcp_monitor_drift_threshold{model,version}                gauge
 *   mcp_monitor_drifted{model,version}                        gauge, 0 or 1
 *   mcp_monitor_output_mean{model,version,output,window}      gauge, window reference|current
 *   mcp_monitor_output_variance{model,version,output,window}  gauge
 *   mcp_monitor_input_mean / _variance{model,version,input,window}  gauge (with inputs watched)
 *   mcp_monitor_prediction_entropy{model,version,output,window}     gauge, mean nats (classifiers)
 *   mcp_monitor_samples_total{model,version}                  counter
 *   mcp_monitor_samples_dropped_total{model,version}          counter
 *   mcp_monitor_drift_events_total{model,version}             counter
 */
void mcp_monitor_render(mcp_monitor *const *mons, int n, mcp_buf *out);
/* A set with no monitors, whose members' drift changes go to on_drift
 * (may be NULL) as well as to their own; NULL when out of memory. */
mcp_monitor_set *mcp_monitor_set_create(mcp_monitor_drift_fn on_drift, void *user);
/* The owner is done with it: on_drift is detached (a call in progress is
 * waited for; none starts after) and the set goes with its last monitor.
 * NULL is a no-op. */
void mcp_monitor_set_release(mcp_monitor_set *s);
/* mcp_monitor_render of every monitor in the set. */
void mcp_monitor_set_render(mcp_monitor_set *s, mcp_buf *out);
/* mcp_monitor_json of model:version's monitor (the newest of that name);
 * false, writing nothing, when the set has none. */
bool mcp_monitor_set_json(mcp_monitor_set *s, const char *model, const char *version, mcp_buf *out);

/* {"sample_rate", "window", "min_samples", "threshold", "score" (largest),
 *  "drifted", "samples", "dropped", "drift_events", "outputs": [{"name",
 *  "input", "classifier", "reference": {...}, "current": {...}, "scores":
 *  {...}}]} for a status page. */
void mcp_monitor_json(mcp_monitor *mon, mcp_buf *out);

/* ---- the statistics, exposed for the tests ---- */

/* Exact two-sample KS statistic of two ascending arrays (0 when either
 * is empty). */
double mcp_monitor_ks(const float *a, size_t na, const float *b, size_t nb);
/* Entropy in nats of one prediction: probabilities as given (renormalized),
 * or logits softmaxed (see above). *argmax (may be NULL) receives the
 * first largest class. */
double mcp_monitor_entropy(const float *row, int64_t classes, int64_t *argmax);
/* Total-variation distance of two class histograms of `classes` bins
 * holding na and nb predictions (0 when either is empty). */
double mcp_monitor_tv(const int64_t *ha, int64_t na, const int64_t *hb, int64_t nb, int64_t classes);

#endif
