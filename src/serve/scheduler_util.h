/*
 * Private to src/serve (request.c, scheduler*.c) and their unit tests: the
 * request state table, which the tests check directly because an illegal
 * transition asserts.
 */
#ifndef MCP_SERVE_SCHEDULER_UTIL_H
#define MCP_SERVE_SCHEDULER_UTIL_H

#include <stdbool.h>

#include "serve/serve.h"

/* Whether `from -> to` is an edge of the request state machine:
 * Pending -> Running | Cancelled | TimedOut | Failed; Running -> Succeeded |
 * Failed; Succeeded | Failed | Cancelled | TimedOut -> Completed. */
bool mcp__request_transition_legal(mcp_request_state from, mcp_request_state to);

/* Succeeded, Failed, Cancelled, TimedOut or Completed. (mcp_request_transition
 * returns false, rather than asserting, when the request has moved past
 * every state the transition could start from: Running -> TimedOut is a
 * lost race, Pending -> Succeeded a bug.) */
bool mcp__request_state_is_final(mcp_request_state s);

/* The rows a validated request contributes to a batch: dim 0 of its inputs
 * when the model batches (max_batch_size > 0), else 1. */
int64_t mcp__request_rows(const mcp_request *r, const mcp_model_version *m);

/* Tensor cache counters of a scheduler: batch input buffers taken from the
 * free list (hits) and freshly allocated (misses). */
void mcp__scheduler_cache_counts(mcp_scheduler *s, int64_t *hits, int64_t *misses);

#endif
