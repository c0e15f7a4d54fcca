/*
 * The OpenAI-compatible generation API's wire side: request bodies of
 * POST /v1/completions and /v1/chat/completions into generation requests,
 * and the engine's events into OpenAI's answers (a whole response, or
 * Server-Sent Events chunks ending with "data: [DONE]"). Transport-free:
 * http.c carries the bytes.
 */
#ifndef MCP_SERVE_OPENAI_H
#define MCP_SERVE_OPENAI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "serve/generate.h"

#define MCP_OAI_MAX_CHOICES 16  /* n times the prompts of one request */
#define MCP_OAI_MAX_MESSAGES 1024

typedef enum mcp_oai_kind { MCP_OAI_COMPLETION, MCP_OAI_CHAT } mcp_oai_kind;

/* One sampling or length key the generate APIs share (max_tokens,
 * temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty,
 * frequency_penalty, seed, stop, ignore_eos): 1 when it was one and is valid, 0 when it
 * is none of them, -1 when it is bad (err names the key and the range). */
int mcp_gen_param(const char *key, json_t *val, const mcp_generation *g, mcp_gen_request *r, mcp_err *err);

/* A parsed OpenAI request: the choices to generate, each its own
 * generation request (index = prompt * n + j), and how to answer. */
typedef struct mcp_oai_request {
    mcp_oai_kind kind;
    char model[256];
    bool stream, include_usage;
    int n_choices, n_per_prompt;
    int logprobs;           /* top alternatives per token; -1 = no logprobs */
    mcp_gen_request *choices[MCP_OAI_MAX_CHOICES];
} mcp_oai_request;

/* Parses body for model version v (whose name the caller resolved from
 * body "model"). On failure nothing is left allocated, *param names the
 * field at fault ("" when none) and err says what was wrong. */
mcp_status mcp_oai_parse(json_t *body, mcp_oai_kind kind, const mcp_model_version *v, mcp_oai_request *out,
                         char *param, size_t param_len, mcp_err *err);
void mcp_oai_request_clear(mcp_oai_request *r);

/* {"error":{"message","type","param","code"}}, the type and code from status. */
void mcp_oai_error(mcp_buf *b, mcp_status st, const char *message, const char *param);
int mcp_oai_http_code(mcp_status st);

/* The answer in the making, fed by each choice's events in turn. */
typedef struct mcp_oai_choice {
    mcp_buf text;
    mcp_buf logprobs;          /* JSON array elements, comma-separated */
    int64_t n_logprobs, text_offset;
    const char *finish_reason;
    int64_t prompt_tokens, completion_tokens;
    bool done, opened;         /* opened: a chat stream sent its role */
} mcp_oai_choice;

typedef struct mcp_oai_answer {
    mcp_oai_kind kind;
    bool stream, include_usage;
    int n_choices, n_per_prompt, logprobs;
    char id[48];
    int64_t created;
    char model[256];
    const mcp_llm_model *m;
    mcp_oai_choice choices[MCP_OAI_MAX_CHOICES];
    int n_done;
    bool failed;               /* a choice failed: the rest are cancelled */
    mcp_status status;
    char message[400];
} mcp_oai_answer;

void mcp_oai_answer_init(mcp_oai_answer *a, const mcp_oai_request *r, const mcp_llm_model *m);
void mcp_oai_answer_free(mcp_oai_answer *a);
/* One event of choice i. Streams append their SSE bytes to out; true when
 * this was the last choice's end (the answer is complete). */
bool mcp_oai_event(mcp_oai_answer *a, int i, const mcp_gen_event *e, mcp_buf *out);
/* The whole JSON response (not streamed), or the error body; *code the
 * HTTP status. */
void mcp_oai_response(const mcp_oai_answer *a, mcp_buf *out, int *code);

#endif
