/*
 * The generation engine: one step loop per generative model version.
 *
 * Requests wait in a queue (priority, then weighted fair queuing across
 * tenants, then arrival); the step loop admits
 * them into free sequence slots, tokenizes their prompts on its own thread,
 * and runs one mcp_llm_decode per step over every running sequence: one
 * token for each sequence that is decoding, then prompt chunks of the
 * others within the step's token budget (continuous batching with chunked
 * prefill). When the KV cache has no room for a step, the youngest
 * sequence gives its blocks back and is prefilled again later. Events go
 * to the request's callback on the step thread; callbacks must not block.
 */
#ifndef MCP_SERVE_GENERATE_H
#define MCP_SERVE_GENERATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcp/llm.h"
#include "registry/registry.h"

#define MCP_GEN_MAX_STOP 4
#define MCP_GEN_MAX_STOP_LEN 128

typedef enum mcp_gen_event_kind { MCP_GEN_TOKEN, MCP_GEN_DONE } mcp_gen_event_kind;

typedef struct mcp_gen_event {
    mcp_gen_event_kind kind;
    /* MCP_GEN_TOKEN: the text this token releases (may be empty while a
     * stop string or a UTF-8 character is incomplete) and the token. */
    const char *text;
    size_t len;
    const mcp_llm_sample_result *token;
    /* MCP_GEN_DONE */
    mcp_status status;
    const char *message;       /* why it failed */
    const char *finish_reason; /* "stop" | "length" (OK) */
    int64_t prompt_tokens, completion_tokens;
} mcp_gen_event;

typedef struct mcp_gen_request mcp_gen_request;
typedef void (*mcp_gen_event_fn)(mcp_gen_request *r, const mcp_gen_event *e);

struct mcp_gen_request {
    atomic_int refs;
    atomic_bool cancel;    /* the client went away: ends at the next step */
    char *prompt;          /* owned (mcp_malloc) */
    size_t prompt_len;
    bool parse_special;    /* special-token text in the prompt becomes those tokens */
    mcp_llm_span *spans;   /* owned; set: only inside these (a chat template's markup) */
    size_t n_spans;
    int64_t max_tokens;
    mcp_llm_sampling sampling;
    bool seeded;           /* the client chose sampling.seed */
    bool ignore_eos;       /* an end-of-generation token does not end it (benchmarks) */
    int n_stop;
    char stop[MCP_GEN_MAX_STOP][MCP_GEN_MAX_STOP_LEN + 1];
    /* The prefix cache's key: the server derives it from the request's
     * tenant (mcp_frontend_tenant_key); blocks are shared only between
     * requests with the same key. Never taken from the request. */
    uint8_t cache_key[32];
    int64_t priority;      /* lower = more urgent */
    int64_t deadline_ns;   /* 0 = none */
    /* The caller's tenant ("" = anonymous) and its fair-queuing weight
     * (> 0): the step loop shares admissions and tokens by weight. */
    char tenant[65];
    double weight;
    int index;             /* the caller's (choice index) */
    mcp_gen_event_fn on_event;
    void *user;
    int64_t submitted_ns;
    /* For traces, set on the step thread (read by the transport, maybe
     * while it runs): first admitted, first token, ended; the tokens. */
    _Atomic int64_t admitted_ns, first_token_ns, done_ns;
    _Atomic int64_t prompt_tokens, completion_tokens;
};

/* A request with refs 1 and the model's defaults (max_tokens, sampling). */
mcp_gen_request *mcp_gen_request_create(const mcp_model_version *v);
mcp_gen_request *mcp_gen_request_retain(mcp_gen_request *r);
void mcp_gen_request_release(mcp_gen_request *r);

typedef struct mcp_gen_engine mcp_gen_engine;

typedef struct mcp_gen_stats {
    int64_t running, waiting;
    int64_t kv_used_blocks, kv_total_blocks, kv_cached_blocks, kv_block_bytes, kv_evictions;
    int64_t prompt_tokens, generated_tokens, requests, preemptions;
    /* Prefix cache: full prompt blocks looked up, and found (reused). */
    int64_t cache_queries, cache_hits, cached_prompt_tokens;
} mcp_gen_stats;

/* metrics (may be NULL) gets each request's time to first token, its
 * inter-token latencies and its duration, under v's name and version. */
struct mcp_metrics;
mcp_status mcp_gen_engine_create(mcp_model_version *v, struct mcp_metrics *metrics, mcp_gen_engine **out, mcp_err *err);
/* Queues r (the engine takes its own reference). RESOURCE_EXHAUSTED when
 * the queue is full, UNAVAILABLE when draining; nothing is called then. */
mcp_status mcp_gen_submit(mcp_gen_engine *g, mcp_gen_request *r);
/* Refuses new requests and waits until every queued and running one ended. */
void mcp_gen_drain(mcp_gen_engine *g);
void mcp_gen_engine_destroy(mcp_gen_engine *g);
void mcp_gen_stats_get(mcp_gen_engine *g, mcp_gen_stats *out);
/* hook (NULL = none; replaces any earlier one, user is borrowed) hears,
 * on the step thread after each step, once per tenant, the tokens that
 * tenant's sequences added to their answers in that step (an ending
 * end-of-generation token is not one, as in completion_tokens). It must
 * not block or call back into the engine. */
void mcp_gen_set_token_hook(mcp_gen_engine *g, void (*hook)(void *user, const char *tenant, int64_t tokens), void *user);

#endif
