/*
 * engine: sessions (load-time preparation, immutable afterwards) and the
 * executor (per-run frames). The public face is include/mcp/mcp.h; this
 * header adds the internal calls the tools and tests use.
 */
#ifndef MCP_ENGINE_H
#define MCP_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>

#include "graph/graph.h"
#include "mcp/mcp.h"
#include "ops/ops.h"
#include "tensor/tensor.h"

/* A top-level run's reusable storage and memory plans (exec.c). */
typedef struct mcp__runctx mcp__runctx;

struct mcp_session {
    mcp_graph *graph; /* owned; nodes carry their resolved kernels */
    int threads;
    bool adaptive_threads; /* options.adaptive_threads (exec.c's tuner) */
    size_t max_tensor_bytes; /* options.max_tensor_bytes (0: none) */
    char backend[16];
    mcp_io_info *inputs;  /* one per graph input */
    mcp_io_info *outputs; /* one per graph output */
    /* Idle run contexts: a run takes one (or makes one) and gives it back,
     * so there are as many as the most runs ever in flight at once. With
     * the profile counters below, the only state a session changes after
     * load; guarded by ctx_lock. */
    pthread_mutex_t ctx_lock;
    mcp__runctx *idle;
    /* Per top-graph node, with options.profile: nanoseconds and calls,
     * added to by every run (NULL without profiling). */
    _Atomic uint64_t *prof_ns;
    _Atomic uint64_t *prof_calls;
    /* A compiled model's bytes, which the weights borrow: a read-only
     * mapping (ir_map) or, from memory, an aligned heap copy (ir_heap). */
    void *ir_map;
    size_t ir_map_len;
    void *ir_heap;
    char *note; /* mcp_session_load_note */
};

/* Takes an idle run context from the session (making one when there is
 * none and `make`), and gives it back after the run. */
mcp__runctx *mcp__runctx_take(mcp_session *s, bool make);
void mcp__runctx_give(mcp_session *s, mcp__runctx *rc);
void mcp__runctx_free(mcp__runctx *rc);
/* Arena bytes of the context's most recently used plan (0: none yet). */
size_t mcp__runctx_arena_bytes(const mcp__runctx *rc);

mcp_status mcp__session_create(const uint8_t *buf, size_t len, const char *base_dir,
                               const mcp_session_options *opts, mcp_session **out, mcp_err *err);

/* Runs the graph. inputs[i] is the value for graph input i (NULL = missing).
 * outputs[i] must point to an empty caller-owned value (mcp_value_new) for
 * every graph output; it receives the result (the caller frees it). */
mcp_status mcp__session_run(const mcp_session *s, mcp_value *const *inputs, mcp_value **outputs,
                            mcp_err *err);

/* Runs the session's graph in run context rc (see exec.c for plans). */
mcp_status mcp__exec_top(const mcp_session *s, mcp__runctx *rc, mcp_value *const *inputs,
                         mcp_value **outputs, mcp_err *err);

/* Runs graph g without a run context (no memory plan, heap outputs). */
mcp_status mcp__exec_graph(const mcp_session *s, const mcp_graph *g, mcp_value *const *inputs,
                           mcp_value **outputs, mcp_err *err);

#endif
