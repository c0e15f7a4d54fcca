/* The thread budget under contention: see tune.h. */
#include "engine/tune.h"

#define TUNE_EVERY_MIN 8   /* runs between probes back to the full budget ... */
#define TUNE_EVERY_MAX 128 /* ... doubling while they lose */
#define TUNE_HOLD_MIN 3    /* signalling runs at T before a probe ... */
#define TUNE_HOLD_MAX 192  /* ... doubling while probes lose */

int mcp__tune_threads(mcp__tune *t, int T, bool *probe)
{
    *probe = false;
    int alt = T / 2 > 0 ? T / 2 : 1;
    if (T < 2) return T;
    if (!t->cur) {
        t->cur = T;
        t->every = TUNE_EVERY_MIN;
        t->hold = TUNE_HOLD_MIN;
    }
    bool due = t->cur == T ? t->signal >= t->hold || t->pending : t->since >= t->every || t->pending;
    if (!due) return t->cur;
    *probe = true;
    return t->cur == T ? alt : T;
}

void mcp__tune_update(mcp__tune *t, int T, int n, bool probe, double ms, double cpu_ms)
{
    if (!probe) {
        t->last = ms;
        t->ewma = t->ewma > 0 ? 0.7 * t->ewma + 0.3 * ms : ms;
        if (t->cur != T) {
            t->since++;
            return;
        }
        if (t->best <= 0 || t->ewma < t->best) t->best = t->ewma;
        /* Threads that waited for a core: the process ran for less than
         * the run's length on every thread (waiting threads spin, so idle
         * runs count whole); or the runs got slower. */
        bool starved = cpu_ms < 0.85 * ms * n;
        bool slow = t->ewma > 1.4 * t->best;
        t->signal = starved || slow ? t->signal + 1 : 0;
        return;
    }
    t->since = 0;
    t->pending = false;
    if (n != T && !t->warm_alt) {
        t->warm_alt = true; /* it built primitives: try again next run */
        t->pending = true;
        return;
    }
    /* Against the latest run at cur: the average lags a change. */
    if (ms < 0.93 * t->last) {
        if (++t->wins < 2) {
            t->pending = true; /* confirm next run */
            return;
        }
        t->cur = n;
        t->ewma = t->last = ms;
        t->every = TUNE_EVERY_MIN;
        t->hold = TUNE_HOLD_MIN;
        t->best = n == T ? ms : 0;
    } else if (t->cur == T) {
        /* Slower or starved, but fewer threads do no better: the new
         * normal, and a longer wait before the next probe. */
        t->best = t->last;
        t->hold = t->hold * 2 < TUNE_HOLD_MAX ? t->hold * 2 : TUNE_HOLD_MAX;
    } else {
        t->every = t->every * 2 < TUNE_EVERY_MAX ? t->every * 2 : TUNE_EVERY_MAX;
    }
    t->wins = 0;
    t->signal = 0;
}
