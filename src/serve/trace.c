/*
 * OpenTelemetry tracing: sampling at a call's arrival, one record per
 * sampled call, OTLP/HTTP protobuf export from one background thread.
 * See trace.h.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "mcp/mcp.h"
#include "otlp_trace.pb-c.h"
#include "serve/trace.h"

/* ---- samplers ---- */

static const char *const sampler_names[] = {
    [MCP_TRACE_SAMPLER_ALWAYS_OFF] = "always_off",
    [MCP_TRACE_SAMPLER_ALWAYS_ON] = "always_on",
    [MCP_TRACE_SAMPLER_RATIO] = "traceidratio",
    [MCP_TRACE_SAMPLER_PARENT_ALWAYS_ON] = "parentbased_always_on",
    [MCP_TRACE_SAMPLER_PARENT_ALWAYS_OFF] = "parentbased_always_off",
    [MCP_TRACE_SAMPLER_PARENT_RATIO] = "parentbased_traceidratio",
};
_Static_assert(sizeof sampler_names / sizeof sampler_names[0] == MCP_TRACE_SAMPLER_COUNT, "one name per sampler");

const char *mcp_trace_sampler_name(mcp_trace_sampler s)
{
    return (unsigned)s < MCP_TRACE_SAMPLER_COUNT ? sampler_names[s] : "?";
}

bool mcp_trace_sampler_parse(const char *name, mcp_trace_sampler *out)
{
    for (int i = 0; i < MCP_TRACE_SAMPLER_COUNT; i++)
        if (name && strcmp(name, sampler_names[i]) == 0) {
            *out = (mcp_trace_sampler)i;
            return true;
        }
    return false;
}

/* ---- the record one sampled call leaves ---- */

typedef struct trace_record {
    uint8_t trace_id[16], span_id[8], parent_id[8];
    bool has_parent;
    uint8_t flags;
    bool error;
    int code;
    int batch_size;
    int64_t priority;
    char state[MCP_TRACE_STATE_MAX + 1];
    char name[96], transport[8], method[16], route[64], rpc_method[64];
    char model[128], version[64], request_id[128], tenant[129], protocol[16], message[256], priority_class[16];
    bool generation;
    int64_t prompt_tokens, completion_tokens;
    /* Stage times, mcp_now_ns. */
    int64_t t_admitted, t_first_token, t_gen_done;
    int64_t t_receive, t_received, t_decode, t_decoded, t_queued, t_batched, t_compute, t_done,
        t_encode, t_encoded, t_send, t_sent;
} trace_record;

/* Spans one record becomes at most: server, receive, decode, queue, batch,
 * compute, encode, send (a generation: server, receive, queue, prefill,
 * decode, send). */
#define SPANS_PER_RECORD 8
#define ATTRS_MAX 16

/* A model's own trace settings (Triton's per-model API); a field not set
 * follows the server's. */
typedef struct model_settings {
    char name[256];
    bool has_level, has_ratio, has_count;
    bool level_on;
    double ratio;
    atomic_int_fast64_t count;
} model_settings;

#define MODEL_SETTINGS_MAX 256

struct mcp_tracer {
    char *endpoint, *service_name;
    int n_resource;
    char **resource_keys, **resource_values;
    int64_t realtime_offset_ns; /* unix time = mcp_now_ns() + offset */
    /* Settings, read lock-free on every call. */
    atomic_bool level_on;
    _Atomic int sampler;
    _Atomic double ratio;
    atomic_int_fast64_t count; /* traces left to take; -1 = no limit */
    /* Per-model settings (rare): n_models says whether to look at all. */
    pthread_rwlock_t models_mu;
    atomic_int n_models;
    model_settings *models[MODEL_SETTINGS_MAX];
    /* The export queue: a ring of records. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    trace_record *ring;
    int cap, head, len;
    int batch_max;
    int64_t interval_ms, timeout_ms;
    bool stop;
    pthread_t thread;
    bool running;
    /* Counters. */
    atomic_int_fast64_t sampled, exported_spans, dropped_queue_full, dropped_export_failed, export_ok, export_failed;
};

mcp_tracer_options mcp_tracer_options_default(void)
{
    return (mcp_tracer_options){
        .service_name = "mcp2026-server",
        .sampler = MCP_TRACE_SAMPLER_PARENT_ALWAYS_ON,
        .ratio = 1.0,
        .queue_size = 2048,
        .batch_max = 256,
        .interval_ms = 1000,
        .timeout_ms = 3000,
    };
}

/* ---- ids ---- */

static _Thread_local uint64_t rng_state[2];

static uint64_t rng_next(void)
{
    if (!rng_state[0] && !rng_state[1]) {
        if (getrandom(rng_state, sizeof rng_state, 0) != (ssize_t)sizeof rng_state || (!rng_state[0] && !rng_state[1])) {
            rng_state[0] = (uint64_t)mcp_now_ns() | 1;
            rng_state[1] = (uint64_t)(uintptr_t)&rng_state ^ 0x9e3779b97f4a7c15ull;
        }
    }
    /* xorshift128+: ids need to be unique, not secret. */
    uint64_t s1 = rng_state[0];
    const uint64_t s0 = rng_state[1];
    rng_state[0] = s0;
    s1 ^= s1 << 23;
    rng_state[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return rng_state[1] + s0;
}

static void random_id(uint8_t *out, size_t n)
{
    do {
        for (size_t i = 0; i < n; i += 8) {
            uint64_t x = rng_next();
            memcpy(out + i, &x, n - i < 8 ? n - i : 8);
        }
    } while (out[0] == 0 && !memcmp(out, out + 1, n - 1)); /* never all zero */
}

/* ---- W3C trace context ---- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1; /* W3C: lowercase only */
}

static bool hex_bytes(const char *s, uint8_t *out, size_t n)
{
    bool nonzero = false;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = (uint8_t)(hi << 4 | lo);
        nonzero = nonzero || out[i];
    }
    return nonzero;
}

bool mcp_trace_parse_traceparent(const char *s, uint8_t trace_id[16], uint8_t parent_id[8], uint8_t *flags)
{
    if (!s) return false;
    size_t n = strlen(s);
    if (n < 55) return false;
    int v0 = hexval(s[0]), v1 = hexval(s[1]);
    if (v0 < 0 || v1 < 0) return false;
    int version = v0 << 4 | v1;
    if (version == 0xff) return false;
    /* Version 00 is exactly 55 characters; a later version may append
     * fields after a '-'. */
    if (version == 0 ? n != 55 : n > 55 && s[55] != '-') return false;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-') return false;
    if (!hex_bytes(s + 3, trace_id, 16) || !hex_bytes(s + 36, parent_id, 8)) return false;
    uint8_t f;
    if (hexval(s[53]) < 0 || hexval(s[54]) < 0) return false;
    f = (uint8_t)(hexval(s[53]) << 4 | hexval(s[54]));
    *flags = f;
    return true;
}

static void put_hex(char *out, const uint8_t *b, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
}

void mcp_trace_format_traceparent(const mcp_trace_ctx *c, char out[56])
{
    memcpy(out, "00-", 3);
    put_hex(out + 3, c->trace_id, 16);
    out[35] = '-';
    put_hex(out + 36, c->span_id, 8);
    out[52] = '-';
    put_hex(out + 53, &c->flags, 1);
    out[55] = '\0';
}

void mcp_trace_format_ids(const mcp_trace_ctx *c, char trace_id[33], char span_id[17])
{
    put_hex(trace_id, c->trace_id, 16);
    trace_id[32] = '\0';
    put_hex(span_id, c->span_id, 8);
    span_id[16] = '\0';
}

/* tracestate is passed on as is when it is printable ASCII (list members
 * are opaque to us) within W3C's 512 characters; otherwise it is dropped. */
static void copy_tracestate(char *out, const char *in)
{
    out[0] = '\0';
    if (!in) return;
    size_t n = strlen(in);
    if (n > MCP_TRACE_STATE_MAX) return;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)in[i] < 0x20 || (unsigned char)in[i] > 0x7e) return;
    memcpy(out, in, n + 1);
}

/* ---- sampling ---- */

/* OpenTelemetry's TraceIdRatioBased: the trace id's last 8 bytes against
 * ratio * 2^64, so every service that samples a trace by ratio agrees. */
static bool ratio_says(const uint8_t trace_id[16], double ratio)
{
    if (ratio >= 1.0) return true;
    if (!(ratio > 0.0)) return false;
    uint64_t x = 0;
    for (int i = 8; i < 16; i++) x = x << 8 | trace_id[i];
    return (double)x < ratio * 18446744073709551616.0;
}

static model_settings *find_model(mcp_tracer *t, const char *model)
{
    for (int i = 0; i < MODEL_SETTINGS_MAX; i++)
        if (t->models[i] && strcmp(t->models[i]->name, model) == 0) return t->models[i];
    return NULL;
}

/* One trace fewer left to take; false when none is. */
static bool take_count(atomic_int_fast64_t *count)
{
    int_fast64_t c = atomic_load_explicit(count, memory_order_relaxed);
    while (c != -1) {
        if (c <= 0) return false;
        if (atomic_compare_exchange_weak(count, &c, c - 1)) return true;
    }
    return true;
}

void mcp_trace_begin(mcp_tracer *t, mcp_trace_ctx *c, const char *traceparent, const char *tracestate,
                     int64_t t_receive_ns)
{
    c->active = c->sampled = c->pending = false;
    if (!t || !t->endpoint) return;
    if (!atomic_load_explicit(&t->level_on, memory_order_relaxed) && !atomic_load_explicit(&t->n_models, memory_order_relaxed))
        return;
    c->pending = true;
    c->has_parent = mcp_trace_parse_traceparent(traceparent, c->trace_id, c->parent_id, &c->flags);
    if (c->has_parent) {
        copy_tracestate(c->state, tracestate);
    } else {
        random_id(c->trace_id, 16);
        c->state[0] = '\0';
        c->flags = 0;
    }
    c->t_receive_ns = t_receive_ns;
    c->t_received_ns = c->t_decode_ns = c->t_decoded_ns = c->t_encode_ns = c->t_encoded_ns = c->t_send_ns = 0;
    c->model[0] = c->version[0] = '\0';
}

void mcp_trace_decide(mcp_tracer *t, mcp_trace_ctx *c, const char *model)
{
    if (!c->pending) return;
    c->pending = false;
    bool level_on = atomic_load_explicit(&t->level_on, memory_order_relaxed);
    double ratio = atomic_load_explicit(&t->ratio, memory_order_relaxed);
    bool per_model = model && atomic_load_explicit(&t->n_models, memory_order_relaxed);
    model_settings *ms = NULL;
    if (per_model) {
        /* Held until the model's count is taken below. */
        pthread_rwlock_rdlock(&t->models_mu);
        ms = find_model(t, model);
        if (ms && ms->has_level) level_on = ms->level_on;
        if (ms && ms->has_ratio) ratio = ms->ratio;
    }
    bool yes = false;
    if (level_on) {
        c->active = true;
        random_id(c->span_id, 8);
        bool parent_sampled = c->has_parent && (c->flags & 1);
        switch ((mcp_trace_sampler)atomic_load_explicit(&t->sampler, memory_order_relaxed)) {
        case MCP_TRACE_SAMPLER_ALWAYS_ON: yes = true; break;
        case MCP_TRACE_SAMPLER_RATIO: yes = ratio_says(c->trace_id, ratio); break;
        case MCP_TRACE_SAMPLER_PARENT_ALWAYS_ON: yes = c->has_parent ? parent_sampled : true; break;
        case MCP_TRACE_SAMPLER_PARENT_ALWAYS_OFF: yes = c->has_parent && parent_sampled; break;
        case MCP_TRACE_SAMPLER_PARENT_RATIO: yes = c->has_parent ? parent_sampled : ratio_says(c->trace_id, ratio); break;
        default: yes = false; break;
        }
        if (yes) yes = take_count(ms && ms->has_count ? &ms->count : &t->count);
    }
    if (per_model) pthread_rwlock_unlock(&t->models_mu);
    c->sampled = yes;
    c->flags = (uint8_t)((c->flags & ~1u) | (yes ? 1u : 0u));
    if (yes) atomic_fetch_add_explicit(&t->sampled, 1, memory_order_relaxed);
}

/* ---- the queue ---- */

static void copy_str(char *dst, size_t cap, const char *src)
{
    if (!src) src = "";
    size_t n = strlen(src);
    if (n >= cap) {
        n = cap - 1;
        /* Never cut a UTF-8 sequence in two (OTLP strings must be UTF-8). */
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80) n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void mcp_tracer_finish(mcp_tracer *t, const mcp_trace_ctx *c, const mcp_trace_end *e)
{
    if (!t || !c->sampled) return;
    pthread_mutex_lock(&t->mu);
    if (t->len == t->cap) {
        pthread_mutex_unlock(&t->mu);
        atomic_fetch_add_explicit(&t->dropped_queue_full, SPANS_PER_RECORD, memory_order_relaxed);
        return;
    }
    trace_record *r = &t->ring[(t->head + t->len) % t->cap];
    t->len++;
    memcpy(r->trace_id, c->trace_id, 16);
    memcpy(r->span_id, c->span_id, 8);
    memcpy(r->parent_id, c->parent_id, 8);
    r->has_parent = c->has_parent;
    r->flags = c->flags;
    memcpy(r->state, c->state, sizeof r->state);
    copy_str(r->name, sizeof r->name, e->name);
    copy_str(r->transport, sizeof r->transport, e->transport);
    copy_str(r->method, sizeof r->method, e->method);
    copy_str(r->route, sizeof r->route, e->route);
    copy_str(r->rpc_method, sizeof r->rpc_method, e->rpc_method);
    copy_str(r->model, sizeof r->model, e->model);
    copy_str(r->version, sizeof r->version, e->version);
    copy_str(r->request_id, sizeof r->request_id, e->request_id);
    copy_str(r->tenant, sizeof r->tenant, e->tenant);
    copy_str(r->priority_class, sizeof r->priority_class, e->priority_class);
    copy_str(r->protocol, sizeof r->protocol, e->protocol);
    copy_str(r->message, sizeof r->message, e->error ? e->message : NULL);
    r->error = e->error;
    r->code = e->code;
    r->batch_size = e->batch_size;
    r->priority = e->priority;
    r->t_receive = c->t_receive_ns;
    r->t_received = c->t_received_ns;
    r->t_decode = c->t_decode_ns;
    r->t_decoded = c->t_decoded_ns;
    r->t_queued = e->t_queued_ns;
    r->t_batched = e->t_batched_ns;
    r->t_compute = e->t_compute_ns;
    r->t_done = e->t_done_ns;
    r->t_encode = c->t_encode_ns;
    r->t_encoded = c->t_encoded_ns;
    r->t_send = c->t_send_ns;
    r->t_sent = e->t_sent_ns ? e->t_sent_ns : mcp_now_ns();
    r->generation = e->generation;
    r->t_admitted = e->t_admitted_ns;
    r->t_first_token = e->t_first_token_ns;
    r->t_gen_done = e->t_gen_done_ns;
    r->prompt_tokens = e->prompt_tokens;
    r->completion_tokens = e->completion_tokens;
    if (t->len >= t->batch_max) pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* ---- building the OTLP message ---- */

typedef Mcp__Otlp__KeyValue kv_t;
typedef Mcp__Otlp__AnyValue any_t;
typedef Mcp__Otlp__Span span_t;

/* Memory for one export: spans and attributes live in these arrays. */
typedef struct export_build {
    span_t *spans;
    span_t **span_ptrs;
    kv_t *kvs;
    kv_t **kv_ptrs;
    any_t *values;
    Mcp__Otlp__Status *statuses;
    uint8_t *ids; /* 8 bytes per child span id */
    char *names;  /* the server span's names (already in records) */
    int n_spans, n_kvs;
    int cap_spans, cap_kvs;
    uint8_t *body; /* the packed message */
    size_t body_cap;
} export_build;

static kv_t *kv_new(export_build *b, const char *key)
{
    MCP_ASSERT(b->n_kvs < b->cap_kvs);
    kv_t *kv = &b->kvs[b->n_kvs];
    any_t *v = &b->values[b->n_kvs];
    mcp__otlp__key_value__init(kv);
    mcp__otlp__any_value__init(v);
    kv->key = (char *)key;
    kv->value = v;
    b->kv_ptrs[b->n_kvs] = kv;
    b->n_kvs++;
    return kv;
}

static void attr_str(export_build *b, span_t *s, const char *key, const char *value)
{
    if (!value || !value[0]) return;
    kv_t *kv = kv_new(b, key);
    kv->value->value_case = MCP__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
    kv->value->string_value = (char *)value;
    s->n_attributes++;
}

static void attr_int(export_build *b, span_t *s, const char *key, int64_t value)
{
    kv_t *kv = kv_new(b, key);
    kv->value->value_case = MCP__OTLP__ANY_VALUE__VALUE_INT_VALUE;
    kv->value->int_value = value;
    s->n_attributes++;
}

static void attr_begin(export_build *b, span_t *s)
{
    s->attributes = &b->kv_ptrs[b->n_kvs];
    s->n_attributes = 0;
}

static span_t *span_new(export_build *b, mcp_tracer *t, trace_record *r, const char *name, int64_t t0, int64_t t1,
                        const uint8_t *parent, bool server)
{
    MCP_ASSERT(b->n_spans < b->cap_spans);
    span_t *s = &b->spans[b->n_spans];
    mcp__otlp__span__init(s);
    b->span_ptrs[b->n_spans] = s;
    uint8_t *id = &b->ids[8 * b->n_spans];
    b->n_spans++;
    if (server) memcpy(id, r->span_id, 8);
    else random_id(id, 8);
    s->trace_id = (ProtobufCBinaryData){16, r->trace_id};
    s->span_id = (ProtobufCBinaryData){8, id};
    if (parent) s->parent_span_id = (ProtobufCBinaryData){8, (uint8_t *)parent};
    s->trace_state = r->state;
    s->name = (char *)name;
    s->kind = server ? MCP__OTLP__SPAN__SPAN_KIND__SPAN_KIND_SERVER : MCP__OTLP__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL;
    s->start_time_unix_nano = (uint64_t)(t0 + t->realtime_offset_ns);
    s->end_time_unix_nano = (uint64_t)((t1 > t0 ? t1 : t0) + t->realtime_offset_ns);
    s->flags = 0x100u | r->flags; /* bit 8: the parent's remoteness is known */
    if (server && r->has_parent) s->flags |= 0x200u;
    attr_begin(b, s);
    return s;
}

/* A stage's span, when both of its times were stamped. */
static span_t *stage(export_build *b, mcp_tracer *t, trace_record *r, span_t *server, const char *name, int64_t t0,
                     int64_t t1)
{
    if (!t0 || !t1 || t1 < t0) return NULL;
    span_t *s = span_new(b, t, r, name, t0, t1, server->span_id.data, false);
    attr_str(b, s, "mcp.model", r->model);
    attr_str(b, s, "mcp.model_version", r->version);
    return s;
}

/* Waiting to run (for a batch, or for a generation's sequence slot),
 * which is where priority and the tenant's share show. */
static void queue_span(export_build *b, mcp_tracer *t, trace_record *r, span_t *server, int64_t until)
{
    span_t *q = stage(b, t, r, server, "queue", r->t_queued, until);
    if (!q) return;
    attr_int(b, q, "mcp.priority", r->priority);
    attr_str(b, q, "mcp.tenant", r->tenant);
    attr_str(b, q, "mcp.priority_class", r->priority_class);
}

static void record_spans(export_build *b, mcp_tracer *t, trace_record *r)
{
    int64_t start = r->t_receive, end = r->t_sent;
    span_t *sv = span_new(b, t, r, r->name, start, end, r->has_parent ? r->parent_id : NULL, true);
    bool grpc = strcmp(r->transport, "grpc") == 0;
    if (grpc) {
        attr_str(b, sv, "rpc.system", "grpc");
        attr_str(b, sv, "rpc.service", "inference.GRPCInferenceService");
        attr_str(b, sv, "rpc.method", r->rpc_method);
        attr_int(b, sv, "rpc.grpc.status_code", r->code);
    } else {
        attr_str(b, sv, "http.request.method", r->method);
        attr_str(b, sv, "http.route", r->route);
        attr_int(b, sv, "http.response.status_code", r->code);
    }
    attr_str(b, sv, "mcp.model", r->model);
    attr_str(b, sv, "mcp.model_version", r->version);
    attr_str(b, sv, "mcp.protocol", r->protocol);
    attr_str(b, sv, "mcp.request_id", r->request_id);
    attr_str(b, sv, "mcp.tenant", r->tenant);
    attr_str(b, sv, "mcp.priority_class", r->priority_class);
    attr_int(b, sv, "mcp.priority", r->priority);
    if (r->batch_size > 0) attr_int(b, sv, "mcp.batch_size", r->batch_size);
    if (r->generation) {
        attr_int(b, sv, "mcp.prompt_tokens", r->prompt_tokens);
        attr_int(b, sv, "mcp.completion_tokens", r->completion_tokens);
    }
    /* A span's attributes are one run of the array: every one of the
     * server span's comes before the first child starts its own. */
    Mcp__Otlp__Status *st = &b->statuses[b->n_spans - 1];
    mcp__otlp__status__init(st);
    st->code = r->error ? MCP__OTLP__STATUS__STATUS_CODE__STATUS_CODE_ERROR : MCP__OTLP__STATUS__STATUS_CODE__STATUS_CODE_UNSET;
    st->message = r->error ? r->message : (char *)"";
    sv->status = st;

    stage(b, t, r, sv, "receive", r->t_receive, r->t_received);
    if (r->generation) {
        /* A generation: waiting for a sequence slot, its prompt (prefill,
         * chunked among other sequences' steps), then one token per step. */
        queue_span(b, t, r, sv, r->t_admitted);
        span_t *p = stage(b, t, r, sv, "prefill", r->t_admitted, r->t_first_token);
        if (p) attr_int(b, p, "mcp.prompt_tokens", r->prompt_tokens);
        span_t *d = stage(b, t, r, sv, "decode", r->t_first_token, r->t_gen_done);
        if (d) attr_int(b, d, "mcp.completion_tokens", r->completion_tokens);
        stage(b, t, r, sv, "send", r->t_gen_done, r->t_sent);
        return;
    }
    stage(b, t, r, sv, "decode", r->t_decode, r->t_decoded);
    queue_span(b, t, r, sv, r->t_batched);
    span_t *bt = stage(b, t, r, sv, "batch", r->t_batched, r->t_compute);
    if (bt) attr_int(b, bt, "mcp.batch_size", r->batch_size);
    span_t *cp = stage(b, t, r, sv, "compute", r->t_compute, r->t_done);
    if (cp) attr_int(b, cp, "mcp.batch_size", r->batch_size);
    stage(b, t, r, sv, "encode", r->t_encode, r->t_encoded);
    stage(b, t, r, sv, "send", r->t_send, r->t_sent);
}

/* Posts one request's bytes; true on a 2xx answer. */
static bool post(mcp_tracer *t, CURL *curl, const uint8_t *body, size_t len)
{
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, (const char *)body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    CURLcode rc = curl_easy_perform(curl);
    long code = 0;
    if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    (void)t;
    return rc == CURLE_OK && code >= 200 && code < 300;
}

static size_t discard(char *p, size_t size, size_t n, void *user)
{
    (void)p, (void)user;
    return size * n;
}

static CURL *curl_for(mcp_tracer *t, struct curl_slist **headers)
{
    CURL *curl = curl_easy_init();
    if (!curl) return NULL;
    *headers = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
    curl_easy_setopt(curl, CURLOPT_URL, t->endpoint);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, *headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)(t->timeout_ms < 1000 ? t->timeout_ms : 1000));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)t->timeout_ms);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    return curl;
}

/* The exporter's working memory, sized for batch_max records and kept
 * for the thread's life: allocating (and zeroing) a few MiB per export
 * cost a tenth of the server's CPU at 100% sampling (page faults and
 * memset under perf); every span and attribute is initialised as it is
 * built. */
static bool build_alloc(export_build *b, int records, int n_resource)
{
    b->cap_spans = records * SPANS_PER_RECORD;
    b->cap_kvs = b->cap_spans * ATTRS_MAX + n_resource + 4;
    b->spans = mcp_malloc((size_t)b->cap_spans * sizeof *b->spans);
    b->span_ptrs = mcp_malloc((size_t)b->cap_spans * sizeof *b->span_ptrs);
    b->statuses = mcp_malloc((size_t)b->cap_spans * sizeof *b->statuses);
    b->ids = mcp_malloc((size_t)b->cap_spans * 8);
    b->kvs = mcp_malloc((size_t)b->cap_kvs * sizeof *b->kvs);
    b->kv_ptrs = mcp_malloc((size_t)b->cap_kvs * sizeof *b->kv_ptrs);
    b->values = mcp_malloc((size_t)b->cap_kvs * sizeof *b->values);
    return b->spans && b->span_ptrs && b->statuses && b->ids && b->kvs && b->kv_ptrs && b->values;
}

static void build_free(export_build *b)
{
    mcp_free(b->spans);
    mcp_free(b->span_ptrs);
    mcp_free(b->statuses);
    mcp_free(b->ids);
    mcp_free(b->kvs);
    mcp_free(b->kv_ptrs);
    mcp_free(b->values);
    mcp_free(b->body);
}

/* Exports records [0, n) (copied out of the ring; n <= batch_max); false
 * when the collector did not take them. */
static bool export_records(mcp_tracer *t, CURL *curl, export_build *b, trace_record *recs, int n)
{
    b->n_spans = b->n_kvs = 0;
    for (int i = 0; i < n; i++) record_spans(b, t, &recs[i]);
    /* The resource: service.name, the SDK, and the operator's own. */
    Mcp__Otlp__Resource res = MCP__OTLP__RESOURCE__INIT;
    span_t holder = MCP__OTLP__SPAN__INIT;
    attr_begin(b, &holder);
    attr_str(b, &holder, "service.name", t->service_name);
    attr_str(b, &holder, "service.version", MCP_VERSION_STRING);
    attr_str(b, &holder, "telemetry.sdk.name", "mcp2026");
    attr_str(b, &holder, "telemetry.sdk.language", "c");
    for (int i = 0; i < t->n_resource; i++) attr_str(b, &holder, t->resource_keys[i], t->resource_values[i]);
    res.attributes = holder.attributes;
    res.n_attributes = holder.n_attributes;
    Mcp__Otlp__InstrumentationScope scope = MCP__OTLP__INSTRUMENTATION_SCOPE__INIT;
    scope.name = "mcp2026-server";
    scope.version = MCP_VERSION_STRING;
    Mcp__Otlp__ScopeSpans ss = MCP__OTLP__SCOPE_SPANS__INIT;
    ss.scope = &scope;
    ss.spans = b->span_ptrs;
    ss.n_spans = (size_t)b->n_spans;
    Mcp__Otlp__ResourceSpans rs = MCP__OTLP__RESOURCE_SPANS__INIT;
    rs.resource = &res;
    Mcp__Otlp__ScopeSpans *ssp = &ss;
    rs.scope_spans = &ssp;
    rs.n_scope_spans = 1;
    Mcp__Otlp__ExportTraceServiceRequest req = MCP__OTLP__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    Mcp__Otlp__ResourceSpans *rsp = &rs;
    req.resource_spans = &rsp;
    req.n_resource_spans = 1;
    size_t len = mcp__otlp__export_trace_service_request__get_packed_size(&req);
    if (len > b->body_cap) { /* the body's buffer only grows */
        uint8_t *grown = mcp_realloc(b->body, len);
        if (grown) b->body = grown, b->body_cap = len;
    }
    bool ok = false;
    if (len <= b->body_cap && b->body) {
        mcp__otlp__export_trace_service_request__pack(&req, b->body);
        ok = curl && post(t, curl, b->body, len);
    }
    if (ok) {
        atomic_fetch_add(&t->export_ok, 1);
        atomic_fetch_add(&t->exported_spans, b->n_spans);
    } else {
        atomic_fetch_add(&t->export_failed, 1);
        atomic_fetch_add(&t->dropped_export_failed, b->n_spans);
    }
    return ok;
}

static void *exporter_main(void *arg)
{
    mcp_tracer *t = arg;
    struct curl_slist *headers = NULL;
    CURL *curl = curl_for(t, &headers);
    trace_record *batch = mcp_malloc((size_t)t->batch_max * sizeof *batch);
    export_build build = {0};
    if (!build_alloc(&build, t->batch_max, t->n_resource)) {
        mcp_free(batch);
        batch = NULL; /* out of memory: every record is dropped, counted */
    }
    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (!t->stop && t->len < t->batch_max) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += t->interval_ms / 1000;
            until.tv_nsec += (t->interval_ms % 1000) * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&t->cv, &t->mu, &until);
        }
        if (t->len == 0) {
            if (t->stop) break;
            continue;
        }
        int n = t->len < t->batch_max ? t->len : t->batch_max;
        if (!batch) n = 0;
        for (int i = 0; i < n; i++) batch[i] = t->ring[(t->head + i) % t->cap];
        t->head = (t->head + n) % t->cap;
        t->len -= n;
        if (!batch) { /* out of memory: what is queued is lost, counted */
            atomic_fetch_add(&t->dropped_export_failed, (int64_t)t->len * SPANS_PER_RECORD);
            t->len = 0;
            continue;
        }
        pthread_mutex_unlock(&t->mu);
        bool ok = export_records(t, curl, &build, batch, n);
        pthread_mutex_lock(&t->mu);
        if (!ok && t->stop) { /* stopping and the collector does not take them: no more tries */
            atomic_fetch_add(&t->dropped_export_failed, (int64_t)t->len * SPANS_PER_RECORD);
            t->len = 0;
        }
    }
    pthread_mutex_unlock(&t->mu);
    mcp_free(batch);
    build_free(&build);
    if (curl) curl_easy_cleanup(curl);
    curl_slist_free_all(headers);
    return NULL;
}

/* ---- create / destroy ---- */

static bool resource_parse(mcp_tracer *t, const char *s, mcp_err *err)
{
    if (!s || !*s) return true;
    int n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    t->resource_keys = mcp_calloc((size_t)n, sizeof(char *));
    t->resource_values = mcp_calloc((size_t)n, sizeof(char *));
    if (!t->resource_keys || !t->resource_values) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory"), false;
    const char *p = s;
    for (int i = 0; i < n; i++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        /* Trim spaces around keys and values, as OTEL_RESOURCE_ATTRIBUTES allows. */
        while (len && (*p == ' ')) p++, len--;
        if (!eq || eq == p) {
            mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "resource attribute %d ('%.*s') is not key=value", i + 1,
                        (int)(len > 64 ? 64 : len), p);
            return false;
        }
        size_t kl = (size_t)(eq - p), vl = len - kl - 1;
        while (kl && p[kl - 1] == ' ') kl--;
        const char *v = eq + 1;
        while (vl && *v == ' ') v++, vl--;
        while (vl && v[vl - 1] == ' ') vl--;
        t->resource_keys[i] = mcp_malloc(kl + 1);
        t->resource_values[i] = mcp_malloc(vl + 1);
        if (!t->resource_keys[i] || !t->resource_values[i])
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory"), false;
        memcpy(t->resource_keys[i], p, kl);
        t->resource_keys[i][kl] = '\0';
        /* Values may be percent-encoded (the W3C Baggage octet rules). */
        size_t o = 0;
        for (size_t k = 0; k < vl; k++) {
            if (v[k] == '%' && k + 2 < vl && hexval((char)(v[k + 1] | 0x20)) >= 0 && hexval((char)(v[k + 2] | 0x20)) >= 0) {
                t->resource_values[i][o++] = (char)(hexval((char)(v[k + 1] | 0x20)) << 4 | hexval((char)(v[k + 2] | 0x20)));
                k += 2;
            } else {
                t->resource_values[i][o++] = v[k];
            }
        }
        t->resource_values[i][o] = '\0';
        t->n_resource = i + 1;
        p = end ? end + 1 : p + len;
    }
    return true;
}

mcp_status mcp_tracer_create(const mcp_tracer_options *o, mcp_tracer **out, mcp_err *err)
{
    *out = NULL;
    if (o->endpoint && strncmp(o->endpoint, "http://", 7) != 0 && strncmp(o->endpoint, "https://", 8) != 0)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "trace endpoint '%s' is not an http:// or https:// URL",
                           o->endpoint);
    if (!(o->ratio >= 0.0 && o->ratio <= 1.0))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "trace sampler ratio must be from 0 to 1");
    if ((unsigned)o->sampler >= MCP_TRACE_SAMPLER_COUNT)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "unknown trace sampler");
    mcp_tracer *t = mcp_calloc(1, sizeof *t);
    if (!t) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_rwlock_init(&t->models_mu, NULL);
    t->cap = o->queue_size > 0 ? o->queue_size : 2048;
    t->batch_max = o->batch_max > 0 ? o->batch_max : 256;
    if (t->batch_max > t->cap) t->batch_max = t->cap;
    t->interval_ms = o->interval_ms > 0 ? o->interval_ms : 1000;
    t->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 3000;
    atomic_init(&t->sampler, (int)o->sampler);
    atomic_init(&t->ratio, o->ratio);
    atomic_init(&t->count, -1);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    t->realtime_offset_ns = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec - mcp_now_ns();
    t->service_name = mcp_strdup(o->service_name && *o->service_name ? o->service_name : "mcp2026-server");
    bool ok = t->service_name && resource_parse(t, o->resource, err);
    if (!t->service_name) mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (ok && o->endpoint) {
        t->endpoint = mcp_strdup(o->endpoint);
        t->ring = mcp_calloc((size_t)t->cap, sizeof *t->ring);
        ok = t->endpoint && t->ring;
        if (!ok) mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        if (ok && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot initialise libcurl");
            ok = false;
        }
        if (ok && pthread_create(&t->thread, NULL, exporter_main, t) == 0) {
            pthread_setname_np(t->thread, "mcp-trace");
        } else if (ok) {
            mcp_err_set(err, MCP_STATUS_INTERNAL, "cannot start the trace exporter thread");
            ok = false;
        }
        t->running = ok;
        atomic_init(&t->level_on, ok);
    }
    if (!ok) {
        mcp_tracer_destroy(t);
        return MCP_STATUS_INVALID_ARGUMENT; /* err says what */
    }
    *out = t;
    return MCP_STATUS_OK;
}

void mcp_tracer_destroy(mcp_tracer *t)
{
    if (!t) return;
    if (t->running) {
        pthread_mutex_lock(&t->mu);
        t->stop = true;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
        curl_global_cleanup();
    }
    for (int i = 0; i < MODEL_SETTINGS_MAX; i++) mcp_free(t->models[i]);
    for (int i = 0; i < t->n_resource; i++) {
        mcp_free(t->resource_keys[i]);
        mcp_free(t->resource_values[i]);
    }
    mcp_free(t->resource_keys);
    mcp_free(t->resource_values);
    mcp_free(t->ring);
    mcp_free(t->endpoint);
    mcp_free(t->service_name);
    pthread_rwlock_destroy(&t->models_mu);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    mcp_free(t);
}

/* ---- Triton's trace settings ---- */

static void put_settings(mcp_buf *out, bool on, double ratio, int64_t count)
{
    long long rate = ratio > 0 ? llround(1.0 / ratio) : 0;
    mcp_buf_printf(out,
                   "{\"trace_level\":[\"%s\"],\"trace_rate\":\"%lld\",\"trace_count\":\"%lld\",\"log_frequency\":\"0\","
                   "\"trace_file\":\"\",\"trace_mode\":\"opentelemetry\",\"ratio\":%.17g",
                   on ? "TIMESTAMPS" : "OFF", rate, (long long)count, ratio);
}

void mcp_tracer_settings_json(mcp_tracer *t, const char *model, mcp_buf *out)
{
    if (!t) {
        mcp_buf_puts(out, "{\"trace_level\":[\"OFF\"],\"trace_rate\":\"0\",\"trace_count\":\"-1\",\"log_frequency\":\"0\","
                          "\"trace_file\":\"\",\"trace_mode\":\"opentelemetry\",\"ratio\":0,\"sampler\":\"always_off\","
                          "\"endpoint\":null}");
        return;
    }
    bool on = atomic_load(&t->level_on);
    double ratio = atomic_load(&t->ratio);
    int64_t count = atomic_load(&t->count);
    if (model) {
        pthread_rwlock_rdlock(&t->models_mu);
        model_settings *ms = find_model(t, model);
        if (ms) {
            if (ms->has_level) on = ms->level_on;
            if (ms->has_ratio) ratio = ms->ratio;
            if (ms->has_count) count = atomic_load(&ms->count);
        }
        pthread_rwlock_unlock(&t->models_mu);
    }
    put_settings(out, on, ratio, count);
    mcp_buf_printf(out, ",\"sampler\":\"%s\",\"endpoint\":", mcp_trace_sampler_name((mcp_trace_sampler)atomic_load(&t->sampler)));
    if (t->endpoint) mcp_buf_json_string(out, t->endpoint);
    else mcp_buf_puts(out, "null");
    mcp_buf_puts(out, "}");
}

/* A setting's value: Triton sends strings (or a list of strings for
 * trace_level); numbers are taken too. */
static bool value_string(json_t *v, char *out, size_t cap)
{
    if (json_is_string(v)) {
        snprintf(out, cap, "%s", json_string_value(v));
        return true;
    }
    if (json_is_integer(v)) {
        snprintf(out, cap, "%lld", (long long)json_integer_value(v));
        return true;
    }
    if (json_is_real(v)) {
        snprintf(out, cap, "%.17g", json_real_value(v));
        return true;
    }
    return false;
}

static bool parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || x < lo || x > hi) return false;
    *out = x;
    return true;
}

mcp_status mcp_tracer_settings_update(mcp_tracer *t, const char *model, const char *body, size_t len, mcp_err *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "body is not JSON: %s (byte %d)", jerr.text, jerr.position);
    mcp_status st = MCP_STATUS_OK;
    bool set_level = false, clear_level = false, level_on = false;
    bool set_ratio = false, clear_ratio = false, set_count = false, clear_count = false, set_sampler = false;
    double ratio = 0;
    long long count = -1;
    mcp_trace_sampler sampler = MCP_TRACE_SAMPLER_PARENT_ALWAYS_ON;
    const char *key;
    json_t *v;
    if (!json_is_object(root)) {
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "body must be a JSON object of trace settings");
        goto out;
    }
    json_object_foreach(root, key, v)
    {
        char s[64];
        bool null = json_is_null(v);
        if (null && !model) {
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s': null resets a model's setting; the server's needs a value",
                             key);
            goto out;
        }
        if (!strcmp(key, "trace_level")) {
            if (null) {
                clear_level = true;
                continue;
            }
            /* ["OFF"] or ["TIMESTAMPS"] (a list, as Triton sends it, or one string). */
            json_t *one = json_is_array(v) && json_array_size(v) == 1 ? json_array_get(v, 0) : v;
            if (!json_is_string(one)) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'trace_level' must be [\"OFF\"] or [\"TIMESTAMPS\"]");
                goto out;
            }
            const char *lv = json_string_value(one);
            if (!strcmp(lv, "OFF")) level_on = false;
            else if (!strcmp(lv, "TIMESTAMPS")) level_on = true;
            else if (!strcmp(lv, "TENSORS")) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                 "'trace_level' TENSORS is not supported: spans never carry request or response data");
                goto out;
            } else {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'trace_level' must be OFF or TIMESTAMPS, not '%.64s'", lv);
                goto out;
            }
            set_level = true;
        } else if (!strcmp(key, "trace_rate") || !strcmp(key, "ratio")) {
            if (null) {
                clear_ratio = true;
                continue;
            }
            bool rate = !strcmp(key, "trace_rate"); /* one call of every N */
            char *end;
            if (!value_string(v, s, sizeof s)) goto bad_number;
            double x = strtod(s, &end);
            if (!*s || *end) goto bad_number;
            if (rate) {
                long long n;
                if (!parse_int(s, 1, 1000000000, &n)) {
                    st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                     "'trace_rate' must be an integer from 1 to 1000000000 (one call of every N is traced)");
                    goto out;
                }
                ratio = 1.0 / (double)n;
            } else {
                if (!(x >= 0.0 && x <= 1.0)) {
                    st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'ratio' must be a number from 0 to 1");
                    goto out;
                }
                ratio = x;
            }
            set_ratio = true;
            continue;
        bad_number:
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'%s' must be a number", key);
            goto out;
        } else if (!strcmp(key, "trace_count")) {
            if (null) {
                clear_count = true;
                continue;
            }
            if (!value_string(v, s, sizeof s) || !parse_int(s, -1, INT64_MAX, &count)) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                 "'trace_count' must be -1 (no limit) or the number of calls still to trace");
                goto out;
            }
            set_count = true;
        } else if (!strcmp(key, "log_frequency")) {
            long long lf;
            if (!null && (!value_string(v, s, sizeof s) || !parse_int(s, 0, 0, &lf))) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                 "'log_frequency' can only be 0: spans are exported continuously to the OTLP collector");
                goto out;
            }
        } else if (!strcmp(key, "trace_file")) {
            if (!null && !(json_is_string(v) && !json_string_value(v)[0])) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                 "'trace_file' is not supported: spans go to the OTLP collector the server was started with, "
                                 "never to a file a client names");
                goto out;
            }
        } else if (!strcmp(key, "trace_mode")) {
            if (!null && !(json_is_string(v) && !strcmp(json_string_value(v), "opentelemetry"))) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'trace_mode' must be \"opentelemetry\"");
                goto out;
            }
        } else if (!strcmp(key, "sampler")) {
            if (model) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "'sampler' is a server setting (POST /v2/trace/setting)");
                goto out;
            }
            if (!json_is_string(v) || !mcp_trace_sampler_parse(json_string_value(v), &sampler)) {
                st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                 "'sampler' must be always_on, always_off, traceidratio, parentbased_always_on, "
                                 "parentbased_always_off or parentbased_traceidratio");
                goto out;
            }
            set_sampler = true;
        } else {
            st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                             "unknown trace setting '%.64s' (trace_level, trace_rate, trace_count, log_frequency, trace_file, "
                             "trace_mode, ratio, sampler)",
                             key);
            goto out;
        }
    }
    if (set_level && level_on && (!t || !t->endpoint)) {
        st = mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                         "'trace_level': this server has no trace collector (start it with --trace-endpoint URL or "
                         "OTEL_EXPORTER_OTLP_ENDPOINT)");
        goto out;
    }
    if (!t) goto out; /* nothing to change: tracing is off and stays off */
    if (!model) {
        if (set_ratio) atomic_store(&t->ratio, ratio);
        if (set_count) atomic_store(&t->count, count);
        if (set_sampler) atomic_store(&t->sampler, (int)sampler);
        if (set_level) atomic_store(&t->level_on, level_on);
        goto out;
    }
    pthread_rwlock_wrlock(&t->models_mu);
    model_settings *ms = find_model(t, model);
    if (!ms && (set_level || set_ratio || set_count)) {
        int slot = -1;
        for (int i = 0; i < MODEL_SETTINGS_MAX && slot < 0; i++)
            if (!t->models[i]) slot = i;
        ms = slot >= 0 ? mcp_calloc(1, sizeof *ms) : NULL;
        if (!ms) {
            pthread_rwlock_unlock(&t->models_mu);
            st = mcp_err_set(err, MCP_STATUS_RESOURCE_EXHAUSTED, "at most %d models may have their own trace settings",
                             MODEL_SETTINGS_MAX);
            goto out;
        }
        snprintf(ms->name, sizeof ms->name, "%s", model);
        t->models[slot] = ms;
        atomic_fetch_add(&t->n_models, 1);
    }
    if (ms) {
        if (set_level) ms->has_level = true, ms->level_on = level_on;
        if (clear_level) ms->has_level = false;
        if (set_ratio) ms->has_ratio = true, ms->ratio = ratio;
        if (clear_ratio) ms->has_ratio = false;
        if (set_count) ms->has_count = true, atomic_store(&ms->count, count);
        if (clear_count) ms->has_count = false;
    }
    pthread_rwlock_unlock(&t->models_mu);
    if (ms && !ms->has_level && !ms->has_ratio && !ms->has_count) mcp_tracer_forget_model(t, model);
out:
    json_decref(root);
    return st;
}

void mcp_tracer_forget_model(mcp_tracer *t, const char *model)
{
    if (!t || !atomic_load(&t->n_models)) return;
    pthread_rwlock_wrlock(&t->models_mu);
    for (int i = 0; i < MODEL_SETTINGS_MAX; i++)
        if (t->models[i] && strcmp(t->models[i]->name, model) == 0) {
            mcp_free(t->models[i]);
            t->models[i] = NULL;
            atomic_fetch_sub(&t->n_models, 1);
        }
    pthread_rwlock_unlock(&t->models_mu);
}

/* ---- metrics ---- */

void mcp_tracer_get_stats(mcp_tracer *t, mcp_tracer_stats *s)
{
    memset(s, 0, sizeof *s);
    if (!t) return;
    s->sampled = atomic_load(&t->sampled);
    s->exported_spans = atomic_load(&t->exported_spans);
    s->dropped_queue_full = atomic_load(&t->dropped_queue_full);
    s->dropped_export_failed = atomic_load(&t->dropped_export_failed);
    s->export_ok = atomic_load(&t->export_ok);
    s->export_failed = atomic_load(&t->export_failed);
}

void mcp_tracer_render_metrics(mcp_tracer *t, mcp_buf *out)
{
    mcp_tracer_stats s;
    mcp_tracer_get_stats(t, &s);
    mcp_buf_printf(out,
                   "# HELP mcp_trace_sampled_total Calls whose spans were recorded.\n"
                   "# TYPE mcp_trace_sampled_total counter\n"
                   "mcp_trace_sampled_total %lld\n"
                   "# HELP mcp_trace_spans_exported_total Spans the OTLP collector accepted.\n"
                   "# TYPE mcp_trace_spans_exported_total counter\n"
                   "mcp_trace_spans_exported_total %lld\n"
                   "# HELP mcp_trace_spans_dropped_total Spans lost: the export queue was full, or the collector did not take them.\n"
                   "# TYPE mcp_trace_spans_dropped_total counter\n"
                   "mcp_trace_spans_dropped_total{reason=\"queue_full\"} %lld\n"
                   "mcp_trace_spans_dropped_total{reason=\"export_failed\"} %lld\n"
                   "# HELP mcp_trace_exports_total OTLP export requests by outcome.\n"
                   "# TYPE mcp_trace_exports_total counter\n"
                   "mcp_trace_exports_total{outcome=\"ok\"} %lld\n"
                   "mcp_trace_exports_total{outcome=\"error\"} %lld\n",
                   (long long)s.sampled, (long long)s.exported_spans, (long long)s.dropped_queue_full,
                   (long long)s.dropped_export_failed, (long long)s.export_ok, (long long)s.export_failed);
}
