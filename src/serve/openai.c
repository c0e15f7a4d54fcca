/*
 * The OpenAI-compatible generation API (see openai.h): request parsing
 * with OpenAI's names and limits, and its answers and stream chunks.
 */
#include "serve/openai.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "serve/chat.h"
#include "serve/serve.h"

/* ---- parameters ---- */

int mcp_gen_param(const char *key, json_t *val, const mcp_generation *g, mcp_gen_request *r, mcp_err *err)
{
    double x = json_is_number(val) ? json_number_value(val) : 0;
    bool num = json_is_number(val), integer = json_is_integer(val);
    static const char *const known[] = {"max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
                                        "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "stop",
                                        "ignore_eos", "priority", "timeout"};
    bool is_known = false;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) is_known |= strcmp(key, known[i]) == 0;
    if (!is_known) return 0;
    if (json_is_null(val)) return 1; /* clients send null for "not set" */
    if (!strcmp(key, "max_tokens") || !strcmp(key, "max_completion_tokens")) {
        if (!integer || x < 1 || x > (double)g->max_tokens_limit)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s' must be an integer from 1 to %lld", key,
                               (long long)g->max_tokens_limit), -1;
        r->max_tokens = (int64_t)x;
    } else if (!strcmp(key, "temperature")) {
        if (!num || !(x >= 0 && x <= 2))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'temperature' must be a number from 0 to 2"), -1;
        r->sampling.temperature = (float)x;
    } else if (!strcmp(key, "top_p")) {
        if (!num || !(x > 0 && x <= 1))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'top_p' must be a number above 0 and at most 1"), -1;
        r->sampling.top_p = (float)x;
    } else if (!strcmp(key, "top_k")) {
        if (!integer || x < -1 || x > 1000000)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'top_k' must be an integer from 0 to 1000000"), -1;
        r->sampling.top_k = x < 0 ? 0 : (int)x; /* -1: off, as vLLM takes it */
    } else if (!strcmp(key, "min_p")) {
        if (!num || !(x >= 0 && x <= 1))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'min_p' must be a number from 0 to 1"), -1;
        r->sampling.min_p = (float)x;
    } else if (!strcmp(key, "repetition_penalty")) {
        if (!num || !(x >= 0.01 && x <= 10))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'repetition_penalty' must be a number from 0.01 to 10"),
                   -1;
        r->sampling.repeat_penalty = (float)x;
    } else if (!strcmp(key, "presence_penalty") || !strcmp(key, "frequency_penalty")) {
        if (!num || !(x >= -2 && x <= 2))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s' must be a number from -2 to 2", key), -1;
        if (key[0] == 'p') r->sampling.presence_penalty = (float)x;
        else r->sampling.frequency_penalty = (float)x;
    } else if (!strcmp(key, "priority")) {
        if (!integer || x < 0 || x > 1e9)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'priority' must be an integer from 0 (lower is sooner)"), -1;
        r->priority = (int64_t)x;
    } else if (!strcmp(key, "timeout")) {
        if (!integer || x < 1 || x > 3.6e9)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "'timeout' must be an integer of microseconds from 1 to 3600000000"), -1;
        r->deadline_ns = mcp_now_ns() + (int64_t)x * 1000;
    } else if (!strcmp(key, "ignore_eos")) {
        if (!json_is_boolean(val)) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'ignore_eos' must be true or false"), -1;
        r->ignore_eos = json_is_true(val);
    } else if (!strcmp(key, "seed")) {
        if (!integer || json_integer_value(val) < 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'seed' must be a non-negative integer"), -1;
        r->sampling.seed = (uint64_t)json_integer_value(val);
        r->seeded = true;
    } else { /* stop */
        json_t *one = json_is_string(val) ? val : NULL;
        size_t n = one ? 1 : json_is_array(val) ? json_array_size(val) : 0;
        if ((!one && !json_is_array(val)) || n > MCP_GEN_MAX_STOP)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s' must be a string or a list of at most %d strings",
                               key, MCP_GEN_MAX_STOP), -1;
        r->n_stop = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *sv = one ? one : json_array_get(val, i);
            size_t len = json_is_string(sv) ? json_string_length(sv) : 0;
            if (!json_is_string(sv) || len == 0 || len > MCP_GEN_MAX_STOP_LEN || memchr(json_string_value(sv), 0, len))
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s'[%zu] must be a string of 1 to %d bytes", key,
                                   i, MCP_GEN_MAX_STOP_LEN), -1;
            memcpy(r->stop[r->n_stop], json_string_value(sv), len + 1);
            r->n_stop++;
        }
    }
    return 1;
}

/* ---- requests ---- */

void mcp_oai_request_clear(mcp_oai_request *r)
{
    for (int i = 0; i < MCP_OAI_MAX_CHOICES; i++) mcp_gen_request_release(r->choices[i]);
    memset(r->choices, 0, sizeof r->choices);
    r->n_choices = 0;
}

static mcp_status bad(char *param, size_t plen, const char *field, mcp_err *err, const char *fmt, const char *a, long long b)
    __attribute__((format(printf, 5, 0)));
static mcp_status bad(char *param, size_t plen, const char *field, mcp_err *err, const char *fmt, const char *a, long long b)
{
    snprintf(param, plen, "%s", field);
    char msg[400];
    snprintf(msg, sizeof msg, fmt, a, b);
    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s", msg);
}

/* A message's content: a string, or text parts joined by newlines. */
static mcp_status message_text(json_t *content, size_t i, mcp_buf *out, char *param, size_t plen, mcp_err *err)
{
    char field[64];
    snprintf(field, sizeof field, "messages[%zu].content", i);
    if (json_is_null(content) || !content) return MCP_STATUS_OK;
    if (json_is_string(content)) {
        mcp_buf_append(out, json_string_value(content), json_string_length(content));
        return MCP_STATUS_OK;
    }
    if (!json_is_array(content))
        return bad(param, plen, field, err, "'%s' must be a string or a list of text parts%.0lld", field, 0);
    for (size_t j = 0; j < json_array_size(content); j++) {
        json_t *part = json_array_get(content, j);
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        snprintf(field, sizeof field, "messages[%zu].content[%zu]", i, j);
        if (!json_is_object(part) || !json_is_string(type))
            return bad(param, plen, field, err, "'%s' must be an object with a 'type'%.0lld", field, 0);
        if (strcmp(json_string_value(type), "text") != 0) {
            snprintf(param, plen, "%s.type", field);
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s.type' '%.40s' is not supported: this model reads text",
                               field, json_string_value(type));
        }
        if (!json_is_string(text)) return bad(param, plen, field, err, "'%s.text' must be a string%.0lld", field, 0);
        if (j) mcp_buf_puts(out, "\n");
        mcp_buf_append(out, json_string_value(text), json_string_length(text));
    }
    return MCP_STATUS_OK;
}

static mcp_status render_messages(json_t *msgs, const mcp_model_version *v, mcp_gen_request *r, char *param,
                                  size_t plen, mcp_err *err)
{
    size_t n = json_is_array(msgs) ? json_array_size(msgs) : 0;
    if (!json_is_array(msgs) || n == 0 || n > MCP_OAI_MAX_MESSAGES)
        return bad(param, plen, "messages", err, "'messages' must be a list of 1 to %s%lld messages", "",
                   MCP_OAI_MAX_MESSAGES);
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    mcp_chat_msg *cm = mcp_calloc(n, sizeof *cm);
    mcp_buf *texts = mcp_calloc(n, sizeof *texts);
    mcp_status st = cm && texts ? MCP_STATUS_OK : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n && st == MCP_STATUS_OK; i++) {
        json_t *m = json_array_get(msgs, i), *role = json_object_get(m, "role");
        char field[48];
        snprintf(field, sizeof field, "messages[%zu].role", i);
        const char *rs = json_is_string(role) ? json_string_value(role) : NULL;
        bool ok = false;
        for (size_t k = 0; rs && k < sizeof roles / sizeof *roles; k++) ok |= strcmp(rs, roles[k]) == 0;
        if (!json_is_object(m)) {
            snprintf(field, sizeof field, "messages[%zu]", i);
            st = bad(param, plen, field, err, "'%s' must be an object%.0lld", field, 0);
        } else if (!ok) {
            st = bad(param, plen, field, err, "'%s' must be one of system, developer, user, assistant, tool%.0lld", field, 0);
        } else {
            st = message_text(json_object_get(m, "content"), i, &texts[i], param, plen, err);
            if (st == MCP_STATUS_OK && texts[i].failed) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            cm[i].role = rs;
            cm[i].content = texts[i].data ? (const char *)texts[i].data : "";
            cm[i].content_len = texts[i].len;
        }
    }
    if (st == MCP_STATUS_OK) {
        mcp_chat_template t = mcp_chat_resolve(v->llm, v->desc->generation.chat_template);
        st = mcp_chat_render(t, cm, n, &r->prompt, &r->prompt_len, &r->spans, &r->n_spans, err);
        r->parse_special = false; /* special tokens only in the template's own markup */
        if (st == MCP_STATUS_OK && !r->spans) {
            r->spans = mcp_calloc(1, sizeof *r->spans); /* none: no special tokens at all */
            if (!r->spans) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
    }
    for (size_t i = 0; texts && i < n; i++) mcp_buf_free(&texts[i]);
    mcp_free(texts);
    mcp_free(cm);
    return st;
}

static bool copy_text(mcp_gen_request *r, const char *s, size_t n)
{
    r->prompt = mcp_malloc(n + 1);
    if (!r->prompt) return false;
    memcpy(r->prompt, s, n);
    r->prompt[n] = '\0';
    r->prompt_len = n;
    return true;
}

static uint64_t random_u64(void)
{
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) x = (uint64_t)mcp_now_ns() * 0x9E3779B97F4A7C15ull;
    return x;
}

mcp_status mcp_oai_parse(json_t *body, mcp_oai_kind kind, const mcp_model_version *v, mcp_oai_request *out,
                         char *param, size_t plen, mcp_err *err)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->logprobs = -1;
    param[0] = '\0';
    const mcp_generation *g = &v->desc->generation;
    mcp_gen_request *t = mcp_gen_request_create(v);
    if (!t) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    int n = 1;
    bool want_logprobs = false;
    int top_logprobs = 0;
    bool has_top = false;
    mcp_status st = MCP_STATUS_OK;
    const char *key;
    json_t *val;
    const bool chat = kind == MCP_OAI_CHAT;
    json_object_foreach(body, key, val) {
        double x = json_is_number(val) ? json_number_value(val) : 0;
        bool integer = json_is_integer(val), null = json_is_null(val);
        int p = mcp_gen_param(key, val, g, t, err);
        if (p < 0) {
            snprintf(param, plen, "%s", key);
            st = MCP_STATUS_INVALID_ARGUMENT;
        } else if (p > 0) {
            continue;
        } else if (!strcmp(key, "model") || !strcmp(key, chat ? "messages" : "prompt") || !strcmp(key, "user") ||
                   !strcmp(key, "store") || !strcmp(key, "metadata") || !strcmp(key, "parallel_tool_calls")) {
            continue;
        } else if (!strcmp(key, "n")) {
            if (!null && (!integer || x < 1 || x > MCP_OAI_MAX_CHOICES))
                st = bad(param, plen, key, err, "'n' must be an integer from 1 to %s%lld", "", MCP_OAI_MAX_CHOICES);
            else if (!null) n = (int)x;
        } else if (!strcmp(key, "stream")) {
            if (!null && !json_is_boolean(val)) st = bad(param, plen, key, err, "'%s' must be true or false%.0lld", key, 0);
            else out->stream = json_is_true(val);
        } else if (!strcmp(key, "stream_options")) {
            json_t *iu = json_object_get(val, "include_usage");
            if (!null && (!json_is_object(val) || (iu && !json_is_boolean(iu))))
                st = bad(param, plen, key, err, "'%s' must be an object {\"include_usage\": true|false}%.0lld", key, 0);
            else out->include_usage = json_is_true(iu);
        } else if (!strcmp(key, "logprobs")) {
            if (chat) {
                if (!null && !json_is_boolean(val)) st = bad(param, plen, key, err, "'%s' must be true or false%.0lld", key, 0);
                want_logprobs = json_is_true(val);
            } else if (!null) {
                if (!integer || x < 0 || x > 20)
                    st = bad(param, plen, key, err, "'%s' must be an integer from 0 to %lld", key, 20);
                else want_logprobs = true, top_logprobs = (int)x;
            }
        } else if (chat && !strcmp(key, "top_logprobs")) {
            if (!null && (!integer || x < 0 || x > 20))
                st = bad(param, plen, key, err, "'%s' must be an integer from 0 to %lld", key, 20);
            else if (!null) top_logprobs = (int)x, has_top = true;
        } else if (!chat && !strcmp(key, "echo")) {
            if (json_is_true(val)) st = bad(param, plen, key, err, "'%s' is not supported: the answer holds the completion only%.0lld", key, 0);
        } else if (!chat && !strcmp(key, "suffix")) {
            if (!null) st = bad(param, plen, key, err, "'%s' is not supported: this model completes text at its end%.0lld", key, 0);
        } else if (!chat && !strcmp(key, "best_of")) {
            if (!null && (!integer || x < 1 || x > MCP_OAI_MAX_CHOICES))
                st = bad(param, plen, key, err, "'best_of' must be an integer from 1 to %s%lld", "", MCP_OAI_MAX_CHOICES);
            else if (!null && x > 1) st = bad(param, plen, key, err, "'%s' above 1 is not supported%.0lld", key, 0);
        } else if (!strcmp(key, "logit_bias")) {
            if (!null && !(json_is_object(val) && json_object_size(val) == 0))
                st = bad(param, plen, key, err, "'%s' is not supported%.0lld", key, 0);
        } else if (chat && !strcmp(key, "response_format")) {
            json_t *ty = json_object_get(val, "type");
            if (!null && !(json_is_string(ty) && !strcmp(json_string_value(ty), "text")))
                st = bad(param, plen, key, err, "'%s' must be {\"type\": \"text\"}: structured output is not supported%.0lld", key, 0);
        } else if (chat && (!strcmp(key, "tools") || !strcmp(key, "tool_choice") || !strcmp(key, "functions") ||
                            !strcmp(key, "function_call"))) {
            bool none = null || (json_is_array(val) && json_array_size(val) == 0) ||
                        (json_is_string(val) && !strcmp(json_string_value(val), "none"));
            if (!none) st = bad(param, plen, key, err, "'%s': tool calls are not supported%.0lld", key, 0);
        } else {
            st = bad(param, plen, key, err, "unrecognized request argument supplied: '%.100s'%.0lld", key, 0);
        }
        if (st != MCP_STATUS_OK) break;
    }
    if (st == MCP_STATUS_OK && chat && has_top && !want_logprobs && top_logprobs > 0)
        st = bad(param, plen, "top_logprobs", err, "'top_logprobs' needs 'logprobs': true%s%.0lld", "", 0);
    out->logprobs = want_logprobs ? top_logprobs : -1;
    out->n_per_prompt = n;
    if (st == MCP_STATUS_OK) {
        /* The prompts: a chat's messages, or one prompt or a list of them. */
        json_t *prompt = json_object_get(body, chat ? "messages" : "prompt");
        size_t n_prompts = 1;
        if (chat) {
            st = render_messages(prompt, v, t, param, plen, err);
        } else if (json_is_string(prompt)) {
            if (!copy_text(t, json_string_value(prompt), json_string_length(prompt)))
                st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        } else if (json_is_array(prompt) && json_array_size(prompt) > 0) {
            n_prompts = json_array_size(prompt);
            for (size_t i = 0; i < n_prompts && st == MCP_STATUS_OK; i++)
                if (!json_is_string(json_array_get(prompt, i))) {
                    char field[32];
                    snprintf(field, sizeof field, "prompt[%zu]", i);
                    st = bad(param, plen, field, err, "'%s' must be a string (token-id prompts are not supported)%.0lld",
                             field, 0);
                }
        } else {
            st = bad(param, plen, "prompt", err, "'prompt' must be a string or a list of strings%s%.0lld", "", 0);
        }
        if (st == MCP_STATUS_OK && n_prompts * (size_t)n > MCP_OAI_MAX_CHOICES)
            st = bad(param, plen, "n", err, "%s%lld choices at most per request (prompts times n)", "", MCP_OAI_MAX_CHOICES);
        uint64_t base_seed = t->seeded ? t->sampling.seed : random_u64();
        for (size_t p = 0; p < n_prompts && st == MCP_STATUS_OK; p++) {
            for (int j = 0; j < n && st == MCP_STATUS_OK; j++) {
                mcp_gen_request *c = mcp_gen_request_create(v);
                if (!c) {
                    st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
                    break;
                }
                out->choices[out->n_choices++] = c;
                c->max_tokens = t->max_tokens;
                c->priority = t->priority;
                c->deadline_ns = t->deadline_ns;
                c->ignore_eos = t->ignore_eos;
                c->sampling = t->sampling;
                c->sampling.seed = base_seed + (uint64_t)(p * (size_t)n + (size_t)j);
                c->sampling.n_logprobs = want_logprobs ? top_logprobs : 0;
                c->n_stop = t->n_stop;
                memcpy(c->stop, t->stop, sizeof c->stop);
                c->index = (int)(p * (size_t)n + (size_t)j);
                c->parse_special = !chat; /* a raw prompt may write the model's markup itself */
                json_t *ps = chat ? NULL : json_is_string(prompt) ? prompt : json_array_get(prompt, p);
                bool ok = ps ? copy_text(c, json_string_value(ps), json_string_length(ps))
                             : copy_text(c, t->prompt, t->prompt_len);
                if (ok && chat) {
                    c->spans = mcp_malloc((t->n_spans ? t->n_spans : 1) * sizeof *c->spans);
                    if (c->spans) memcpy(c->spans, t->spans, t->n_spans * sizeof *c->spans);
                    c->n_spans = t->n_spans;
                    ok = c->spans != NULL;
                }
                if (!ok) st = mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            }
        }
    }
    mcp_gen_request_release(t);
    if (st != MCP_STATUS_OK) mcp_oai_request_clear(out);
    return st;
}

/* ---- answers ---- */

int mcp_oai_http_code(mcp_status st) { return mcp_status_http_code(st); }

void mcp_oai_error(mcp_buf *b, mcp_status st, const char *message, const char *param)
{
    int code = mcp_oai_http_code(st);
    const char *type = code == 429 ? "rate_limit_error" : code >= 500 ? "server_error" : "invalid_request_error";
    mcp_buf_puts(b, "{\"error\":{\"message\":");
    mcp_buf_json_string(b, message);
    mcp_buf_printf(b, ",\"type\":\"%s\",\"param\":", type);
    if (param && param[0]) mcp_buf_json_string(b, param);
    else mcp_buf_puts(b, "null");
    mcp_buf_puts(b, ",\"code\":");
    if (st == MCP_STATUS_NOT_FOUND) mcp_buf_puts(b, "\"model_not_found\"");
    else if (code == 429) mcp_buf_puts(b, "\"rate_limit_exceeded\"");
    else mcp_buf_puts(b, "null");
    mcp_buf_puts(b, "}}");
}

void mcp_oai_answer_init(mcp_oai_answer *a, const mcp_oai_request *r, const mcp_llm_model *m)
{
    memset(a, 0, sizeof *a);
    a->kind = r->kind;
    a->stream = r->stream;
    a->include_usage = r->include_usage;
    a->n_choices = r->n_choices;
    a->n_per_prompt = r->n_per_prompt;
    a->logprobs = r->logprobs;
    a->m = m;
    a->created = (int64_t)time(NULL);
    snprintf(a->model, sizeof a->model, "%s", r->model);
    uint64_t x = random_u64(), y = random_u64();
    snprintf(a->id, sizeof a->id, "%s-%016llx%08llx", r->kind == MCP_OAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)x, (unsigned long long)(y & 0xffffffffu));
}

void mcp_oai_answer_free(mcp_oai_answer *a)
{
    for (int i = 0; i < MCP_OAI_MAX_CHOICES; i++) {
        mcp_buf_free(&a->choices[i].text);
        mcp_buf_free(&a->choices[i].logprobs);
    }
}

/* Bytes as a JSON string, any byte that is not part of valid UTF-8 as
 * U+FFFD (the engine's text is valid already; a token's piece may not be). */
static void json_utf8_lossy(mcp_buf *b, const char *s, size_t n)
{
    mcp_buf tmp = {0};
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 && c >= 0xC2 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 && c <= 0xF4 ? 4 : 0;
        bool ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = (p[i + k] & 0xC0) == 0x80;
        if (ok && len == 3) ok = !(c == 0xE0 && p[i + 1] < 0xA0) && !(c == 0xED && p[i + 1] >= 0xA0);
        if (ok && len == 4) ok = !(c == 0xF0 && p[i + 1] < 0x90) && !(c == 0xF4 && p[i + 1] >= 0x90);
        if (ok) {
            i += len;
            continue;
        }
        mcp_buf_append(&tmp, p + run, i - run);
        mcp_buf_append(&tmp, "\xEF\xBF\xBD", 3);
        run = ++i;
    }
    if (run == 0) {
        mcp_buf_json_stringn(b, s, n); /* valid throughout: no copy */
    } else {
        mcp_buf_append(&tmp, p + run, n - run);
        if (tmp.failed) b->failed = true;
        else mcp_buf_json_stringn(b, (const char *)tmp.data, tmp.len);
    }
    mcp_buf_free(&tmp);
}

static void json_logprob(mcp_buf *b, float lp) { mcp_buf_printf(b, "%.6g", isfinite(lp) ? (double)lp : -9999.0); }

/* One token's text as a logprobs entry shows it: chat {"token","logprob","bytes"}. */
static void chat_token(mcp_buf *b, const mcp_llm_model *m, int32_t id, float lp)
{
    char piece[512];
    int n = mcp_llm_token_piece(m, id, false, piece, sizeof piece);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof piece) n = (int)sizeof piece - 1;
    mcp_buf_puts(b, "{\"token\":");
    json_utf8_lossy(b, piece, (size_t)n);
    mcp_buf_puts(b, ",\"logprob\":");
    json_logprob(b, lp);
    mcp_buf_puts(b, ",\"bytes\":[");
    for (int i = 0; i < n; i++) mcp_buf_printf(b, "%s%u", i ? "," : "", (unsigned)(unsigned char)piece[i]);
    mcp_buf_puts(b, "]");
}

/* Appends one token's logprobs entry: the chat format's object, or the
 * completions format's token, its logprob and its alternatives as one
 * row ("t", lp, {alternatives}) split into the four lists at the end. */
static void logprob_entry(const mcp_oai_answer *a, mcp_oai_choice *c, const mcp_llm_sample_result *tok, mcp_buf *b,
                          size_t text_offset)
{
    if (c->n_logprobs++) mcp_buf_puts(b, ",");
    if (a->kind == MCP_OAI_CHAT) {
        chat_token(b, a->m, tok->id, tok->logprob);
        mcp_buf_puts(b, ",\"top_logprobs\":[");
        for (int i = 0; i < tok->n_top && i < a->logprobs; i++) {
            if (i) mcp_buf_puts(b, ",");
            chat_token(b, a->m, tok->top[i].id, tok->top[i].logprob);
            mcp_buf_puts(b, "}");
        }
        mcp_buf_puts(b, "]}");
        return;
    }
    char piece[512];
    int n = mcp_llm_token_piece(a->m, tok->id, false, piece, sizeof piece);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof piece) n = (int)sizeof piece - 1;
    mcp_buf_puts(b, "[");
    json_utf8_lossy(b, piece, (size_t)n);
    mcp_buf_puts(b, ",");
    json_logprob(b, tok->logprob);
    mcp_buf_printf(b, ",%zu,{", text_offset);
    for (int i = 0; i < tok->n_top && i < a->logprobs; i++) {
        int k = mcp_llm_token_piece(a->m, tok->top[i].id, false, piece, sizeof piece);
        if (k < 0) k = 0;
        if ((size_t)k >= sizeof piece) k = (int)sizeof piece - 1;
        if (i) mcp_buf_puts(b, ",");
        json_utf8_lossy(b, piece, (size_t)k);
        mcp_buf_puts(b, ":");
        json_logprob(b, tok->top[i].logprob);
    }
    mcp_buf_puts(b, "}]");
}

/* The completions logprobs object from the rows logprob_entry wrote. */
static void completion_logprobs(mcp_buf *out, const mcp_buf *rows)
{
    json_error_t jerr;
    mcp_buf tmp = {0};
    mcp_buf_puts(&tmp, "[");
    mcp_buf_append(&tmp, rows->data ? (const char *)rows->data : "", rows->len);
    mcp_buf_puts(&tmp, "]");
    json_t *arr = tmp.failed ? NULL : json_loadb((const char *)tmp.data, tmp.len, JSON_ALLOW_NUL, &jerr);
    mcp_buf_free(&tmp);
    json_t *o = json_object(), *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *row = json_array_get(arr, i);
        json_array_append(toks, json_array_get(row, 0));
        json_array_append(lps, json_array_get(row, 1));
        json_array_append(offs, json_array_get(row, 2));
        json_array_append(tops, json_array_get(row, 3));
    }
    json_object_set_new(o, "tokens", toks);
    json_object_set_new(o, "token_logprobs", lps);
    json_object_set_new(o, "top_logprobs", tops);
    json_object_set_new(o, "text_offset", offs);
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(7));
    mcp_buf_puts(out, s ? s : "null");
    free(s);
    json_decref(o);
    json_decref(arr);
}

static void chunk_open(const mcp_oai_answer *a, mcp_buf *out, int index)
{
    mcp_buf_printf(out, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", a->id,
                   a->kind == MCP_OAI_CHAT ? "chat.completion.chunk" : "text_completion", (long long)a->created);
    mcp_buf_json_string(out, a->model);
    if (index < 0) mcp_buf_puts(out, ",\"choices\":[");
    else mcp_buf_printf(out, ",\"choices\":[{\"index\":%d,", index);
}

static void chunk_close(const mcp_oai_answer *a, mcp_buf *out, const char *finish)
{
    if (finish) mcp_buf_printf(out, ",\"finish_reason\":\"%s\"}]", finish);
    else mcp_buf_puts(out, ",\"finish_reason\":null}]");
    if (a->include_usage) mcp_buf_puts(out, ",\"usage\":null");
    mcp_buf_puts(out, "}\n\n");
}

/* One stream chunk of choice i: text (may be empty), its token's logprobs, a finish reason. */
static void stream_chunk(mcp_oai_answer *a, int i, const char *text, size_t len, const mcp_llm_sample_result *tok,
                         const char *finish, mcp_buf *out)
{
    mcp_oai_choice *c = &a->choices[i];
    mcp_buf lp = {0};
    if (tok && a->logprobs >= 0) {
        c->n_logprobs = 0;
        logprob_entry(a, c, tok, &lp, (size_t)c->text_offset);
    }
    chunk_open(a, out, i);
    if (a->kind == MCP_OAI_CHAT) {
        mcp_buf_puts(out, "\"delta\":{");
        if (!c->opened) mcp_buf_puts(out, "\"role\":\"assistant\",\"content\":\"\"");
        if (c->opened && (len || tok)) {
            mcp_buf_puts(out, "\"content\":");
            json_utf8_lossy(out, text, len);
        }
        mcp_buf_puts(out, "},\"logprobs\":");
        if (lp.len) {
            mcp_buf_puts(out, "{\"content\":[");
            mcp_buf_append(out, lp.data, lp.len);
            mcp_buf_puts(out, "]}");
        } else {
            mcp_buf_puts(out, "null");
        }
    } else {
        mcp_buf_puts(out, "\"text\":");
        json_utf8_lossy(out, text, len);
        mcp_buf_puts(out, ",\"logprobs\":");
        if (lp.len) completion_logprobs(out, &lp);
        else mcp_buf_puts(out, "null");
    }
    c->text_offset += (int64_t)len;
    chunk_close(a, out, finish);
    mcp_buf_free(&lp);
}

static void usage(const mcp_oai_answer *a, mcp_buf *out)
{
    int64_t prompt = 0, completion = 0;
    for (int i = 0; i < a->n_choices; i++) {
        if (i % a->n_per_prompt == 0) prompt += a->choices[i].prompt_tokens; /* one prompt, n choices */
        completion += a->choices[i].completion_tokens;
    }
    mcp_buf_printf(out, "{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld}", (long long)prompt,
                   (long long)completion, (long long)(prompt + completion));
}

bool mcp_oai_event(mcp_oai_answer *a, int i, const mcp_gen_event *e, mcp_buf *out)
{
    if (i < 0 || i >= a->n_choices) return false;
    mcp_oai_choice *c = &a->choices[i];
    if (e->kind == MCP_GEN_TOKEN) {
        if (a->failed) return false;
        if (a->stream) {
            if (a->kind == MCP_OAI_CHAT && !c->opened) {
                stream_chunk(a, i, "", 0, NULL, NULL, out);
                c->opened = true;
            }
            const mcp_llm_sample_result *tok = a->logprobs >= 0 ? e->token : NULL;
            if (e->len || tok) stream_chunk(a, i, e->text, e->len, tok, NULL, out);
            return false;
        }
        if (e->token && a->logprobs >= 0) logprob_entry(a, c, e->token, &c->logprobs, c->text.len);
        mcp_buf_append(&c->text, e->text, e->len);
        return false;
    }
    if (c->done) return false;
    c->done = true;
    a->n_done++;
    c->prompt_tokens = e->prompt_tokens;
    c->completion_tokens = e->completion_tokens;
    c->finish_reason = e->finish_reason ? e->finish_reason : "stop";
    if (e->status != MCP_STATUS_OK && !a->failed) {
        a->failed = true;
        a->status = e->status;
        snprintf(a->message, sizeof a->message, "%s", e->message && e->message[0] ? e->message : mcp_status_str(e->status));
    }
    if (a->stream && !a->failed) {
        if (a->kind == MCP_OAI_CHAT && !c->opened) {
            stream_chunk(a, i, "", 0, NULL, NULL, out);
            c->opened = true;
        }
        chunk_open(a, out, i);
        if (a->kind == MCP_OAI_CHAT) mcp_buf_puts(out, "\"delta\":{},\"logprobs\":null");
        else mcp_buf_puts(out, "\"text\":\"\",\"logprobs\":null");
        chunk_close(a, out, c->finish_reason);
    }
    if (a->n_done < a->n_choices) return false;
    if (a->stream) {
        if (a->failed) {
            mcp_buf_puts(out, "data: ");
            mcp_oai_error(out, a->status, a->message, NULL);
            mcp_buf_puts(out, "\n\n");
        } else if (a->include_usage) {
            chunk_open(a, out, -1);
            mcp_buf_puts(out, "],\"usage\":");
            usage(a, out);
            mcp_buf_puts(out, "}\n\n");
        }
        mcp_buf_puts(out, "data: [DONE]\n\n");
    }
    return true;
}

void mcp_oai_response(const mcp_oai_answer *a, mcp_buf *out, int *code)
{
    if (a->failed) {
        *code = mcp_oai_http_code(a->status);
        mcp_oai_error(out, a->status, a->message, NULL);
        return;
    }
    *code = 200;
    const bool chat = a->kind == MCP_OAI_CHAT;
    mcp_buf_printf(out, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", a->id,
                   chat ? "chat.completion" : "text_completion", (long long)a->created);
    mcp_buf_json_string(out, a->model);
    mcp_buf_puts(out, ",\"choices\":[");
    for (int i = 0; i < a->n_choices; i++) {
        const mcp_oai_choice *c = &a->choices[i];
        const char *text = c->text.data ? (const char *)c->text.data : "";
        mcp_buf_printf(out, "%s{\"index\":%d,", i ? "," : "", i);
        if (chat) {
            mcp_buf_puts(out, "\"message\":{\"role\":\"assistant\",\"content\":");
            json_utf8_lossy(out, text, c->text.len);
            mcp_buf_puts(out, "},\"logprobs\":");
            if (a->logprobs >= 0) {
                mcp_buf_puts(out, "{\"content\":[");
                mcp_buf_append(out, c->logprobs.data ? (const char *)c->logprobs.data : "", c->logprobs.len);
                mcp_buf_puts(out, "]}");
            } else {
                mcp_buf_puts(out, "null");
            }
        } else {
            mcp_buf_puts(out, "\"text\":");
            json_utf8_lossy(out, text, c->text.len);
            mcp_buf_puts(out, ",\"logprobs\":");
            if (a->logprobs >= 0) completion_logprobs(out, &c->logprobs);
            else mcp_buf_puts(out, "null");
        }
        mcp_buf_printf(out, ",\"finish_reason\":\"%s\"}", c->finish_reason ? c->finish_reason : "stop");
    }
    mcp_buf_puts(out, "],\"usage\":");
    usage(a, out);
    mcp_buf_puts(out, "}");
}
