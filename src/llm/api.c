/* The public C API's tokenizer side (include/mcp/llm.h) over the model's
 * tokenizer. */
#include <string.h>

#include "llm/llm_internal.h"
#include "llm/tokenizer.h"

static mcp_status tokenize(const mcp_llm_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                           const mcp_llm_span *spans, size_t n_spans, int32_t *ids, size_t cap, size_t *n, char *errbuf,
                           size_t err_len)
{
    _Static_assert(sizeof(mcp_llm_span) == sizeof(mcp_tok_span), "span layouts agree");
    mcp_err err = {errbuf, err_len};
    int32_t *all = NULL;
    size_t count = 0;
    *n = 0;
    mcp_status st = mcp_tokenizer_encode_spans(m->tok, text, len, add_special, parse_special,
                                               (const mcp_tok_span *)spans, n_spans, &all, &count, &err);
    if (st != MCP_STATUS_OK) return st;
    if (ids && cap && count) memcpy(ids, all, (count < cap ? count : cap) * sizeof *ids);
    mcp_free(all);
    *n = count;
    return MCP_STATUS_OK;
}

mcp_status mcp_llm_tokenize(const mcp_llm_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                            int32_t *ids, size_t cap, size_t *n, char *err, size_t err_len)
{
    return tokenize(m, text, len, add_special, parse_special, NULL, 0, ids, cap, n, err, err_len);
}

mcp_status mcp_llm_tokenize_spans(const mcp_llm_model *m, const char *text, size_t len, bool add_special,
                                  const mcp_llm_span *spans, size_t n_spans, int32_t *ids, size_t cap, size_t *n,
                                  char *err, size_t err_len)
{
    static const mcp_llm_span none;
    return tokenize(m, text, len, add_special, true, spans ? spans : &none, spans ? n_spans : 0, ids, cap, n, err,
                    err_len);
}

int mcp_llm_token_piece(const mcp_llm_model *m, int32_t id, bool render_special, char *buf, size_t cap)
{
    mcp_buf b = {0};
    mcp_status st = mcp_tokenizer_piece(m->tok, id, render_special, &b, NULL);
    int n = -1;
    if (st == MCP_STATUS_OK && !b.failed && b.len <= (size_t)INT32_MAX) {
        n = (int)b.len;
        if (cap > 0) {
            size_t k = b.len < cap - 1 ? b.len : cap - 1;
            if (k) memcpy(buf, b.data, k);
            buf[k] = 0;
        }
    }
    mcp_buf_free(&b);
    return n;
}

bool mcp_llm_token_is_eog(const mcp_llm_model *m, int32_t id) { return mcp_tokenizer_is_eog(m->tok, id); }

struct mcp_llm_detok {
    mcp_tokenizer_stream s;
    mcp_buf out;
};

mcp_llm_detok *mcp_llm_detok_create(const mcp_llm_model *m, bool render_special)
{
    mcp_llm_detok *d = mcp_calloc(1, sizeof *d);
    if (d) mcp_tokenizer_stream_init(&d->s, m->tok, render_special);
    return d;
}

/* out gets what the stream appended to d->out, or -1 when it does not fit. */
static int hand_over(mcp_llm_detok *d, mcp_status st, char *out, size_t cap)
{
    int n = -1;
    if (st == MCP_STATUS_OK && !d->out.failed && d->out.len < cap) {
        if (d->out.len) memcpy(out, d->out.data, d->out.len);
        out[d->out.len] = 0;
        n = (int)d->out.len;
    }
    mcp_buf_reset(&d->out);
    return n;
}

int mcp_llm_detok_push(mcp_llm_detok *d, int32_t id, char *out, size_t cap)
{
    mcp_buf_reset(&d->out);
    return hand_over(d, mcp_tokenizer_stream_feed(&d->s, id, &d->out, NULL), out, cap);
}

int mcp_llm_detok_flush(mcp_llm_detok *d, char *out, size_t cap)
{
    mcp_buf_reset(&d->out);
    return hand_over(d, mcp_tokenizer_stream_flush(&d->s, &d->out, NULL), out, cap);
}

void mcp_llm_detok_free(mcp_llm_detok *d)
{
    if (!d) return;
    mcp_tokenizer_stream_free(&d->s);
    mcp_buf_free(&d->out);
    mcp_free(d);
}
