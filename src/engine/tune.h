/* The thread budget under contention (engine/tune.c), used by the executor. */
#ifndef MCP_ENGINE_TUNE_H
#define MCP_ENGINE_TUNE_H

#include <stdbool.h>

/*
 * The thread budget under contention (session option adaptive_threads).
 * oneDNN splits each primitive's work evenly among the threads it was built
 * for, so when a neighbour takes one of the session's cores, the thread
 * sharing it finishes its share late and every parallel region waits for
 * it: a 2-thread run then takes about as long as on one core, and ORT's
 * pool fares the same. Fewer threads on the cores still free do better.
 *
 * Per plan (input shape) of a run context (exec.c's rc_plan), runs use
 * `cur` threads: the session's budget T, or alt = T / 2. A run at T
 * signals when the process's CPU time over it is under 85% of its length
 * on every thread (threads waited for a core: waiting threads spin, so an
 * idle run counts whole), or when its latency average rises 1.4 times
 * above the lowest seen. Three signalling runs in a row probe alt, and two
 * probes in a row more than 7% faster than the latest run at T switch to
 * it; a probe that loses makes the current latency the new normal and
 * doubles the signalling runs the next probe waits for (up to 192). At
 * alt, a run at T is tried every 8 runs (doubling up to 128 while it
 * loses), and two faster ones switch back. A thread count's first run in a
 * plan builds its primitives (oneDNN fixes a primitive's split when it is
 * built, so primitives are cached per budget) and does not count. On an
 * idle machine a model whose runs keep every thread busy never probes;
 * long single-threaded stretches let the OpenMP threads sleep, which can
 * signal now and then (ever more rarely as probes lose). The CPU time is
 * the process's, so other runs in the process hide starvation from that
 * signal; the latency one still sees it.
 */
typedef struct mcp__tune {
    int cur;          /* threads the plan's runs use; 0: not started */
    double ewma;      /* ms per run at cur */
    double last;      /* the latest run at cur */
    double best;      /* lowest ewma at T since the last probe there lost */
    int signal, hold; /* consecutive signalling runs at T; how many probe */
    int since, every; /* runs at alt since the last probe at T; its period */
    int wins;         /* consecutive winning probes */
    bool pending;     /* probe again next run (a warm-up or a first win) */
    bool warm_alt;    /* alt has run in this plan (T's primitives exist from the load) */
} mcp__tune;

/* The threads the next run uses under budget T (>= 2); *probe when it
 * tries the other count. The state starts zeroed. */
int mcp__tune_threads(mcp__tune *t, int T, bool *probe);
/* Records that run: n threads, `probe` as mcp__tune_threads said, its
 * length and the process's CPU time over it, in ms. */
void mcp__tune_update(mcp__tune *t, int T, int n, bool probe, double ms, double cpu_ms);

#endif
