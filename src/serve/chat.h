/*
 * Chat messages to a prompt, in the template family of the model.
 *
 * No template language runs here: a file's tokenizer.chat_template (Jinja)
 * is recognised by its markup as one of the families below, whose layout
 * is written out in C. The rendered prompt comes with the spans of the
 * template's own markup; only there does special-token text become special
 * tokens (mcp_llm_tokenize_spans), so a message cannot forge a turn.
 */
#ifndef MCP_SERVE_CHAT_H
#define MCP_SERVE_CHAT_H

#include <stddef.h>

#include "base/base.h"
#include "mcp/llm.h"
#include "registry/registry.h"

typedef struct mcp_chat_msg {
    const char *role; /* "system", "user", "assistant", "tool", "developer" */
    const char *content;
    size_t content_len;
} mcp_chat_msg;

/* The family `choice` stands for: itself, or for MCP_CHAT_AUTO the one the
 * file's template is written for (by its markup), else the one its
 * vocabulary's control tokens suit, else MCP_CHAT_PLAIN. */
mcp_chat_template mcp_chat_resolve(const mcp_llm_model *m, mcp_chat_template choice);
const char *mcp_chat_template_name(mcp_chat_template t);

/* Renders msgs and the opening of the assistant's turn into *prompt
 * (mcp_malloc, NUL-terminated) and the markup's spans into *spans
 * (mcp_malloc). */
mcp_status mcp_chat_render(mcp_chat_template t, const mcp_chat_msg *msgs, size_t n, char **prompt, size_t *prompt_len,
                           mcp_llm_span **spans, size_t *n_spans, mcp_err *err);

#endif
