/*
 * Per-tenant quality of service (private to src/serve/): admission
 * against a tenant's limits (requests per second with a burst, requests in
 * flight, generated tokens per second), answered with how long to wait
 * when over; and the weighted-fair-queuing clock the model queues and the
 * generation step loop order tenants' work by.
 *
 * Tenants are the authenticated ones (or those the config names), so the
 * table is bounded by the configuration, not by callers; past
 * MCP_QOS_MAX_TENANTS tenants, new ones share one overflow entry.
 */
#ifndef MCP_SERVE_QOS_H
#define MCP_SERVE_QOS_H

#include <stdint.h>

#include "serve/auth.h"

#define MCP_QOS_MAX_TENANTS 4096

typedef struct mcp_qos mcp_qos;

mcp_qos *mcp_qos_create(void);
void mcp_qos_destroy(mcp_qos *q);

/*
 * Admits one request of `tenant` ("" = the anonymous tenant) at now_ns
 * under lim: OK, and it counts in flight until mcp_qos_release; or
 * RESOURCE_EXHAUSTED with *retry_after_s (at least 1: when a token will be
 * there, or 1 for a concurrency limit) and a message naming the tenant and
 * the limit ("tenant 't1' is over its rate of 5 requests/s"). Generative
 * calls (generate true) are also refused while the tenant's generated
 * tokens are over lim->tokens_per_s (a debt paid back at that rate).
 */
mcp_status mcp_qos_admit(mcp_qos *q, const char *tenant, const mcp_tenant_limits *lim, bool generate, int64_t now_ns,
                         int64_t *retry_after_s, mcp_err *err);
void mcp_qos_release(mcp_qos *q, const char *tenant);
/* n tokens a tenant's generation produced (the step loop reports them). */
void mcp_qos_charge_tokens(mcp_qos *q, const char *tenant, const mcp_tenant_limits *lim, int64_t n, int64_t now_ns);
/* Requests a tenant has in flight now. */
int64_t mcp_qos_in_flight(mcp_qos *q, const char *tenant);

/*
 * Weighted fair queuing (start-time fair queuing): a queue keeps one
 * mcp_wfq; each arrival of `cost` units (rows, tokens) from a tenant of
 * weight w gets the tag max(clock, tenant's last finish) + cost / w, and
 * the queue serves the smallest tag first (within a priority level); each
 * service advances the clock to the served tag. A tenant with weight 2
 * thus gets twice the share of one with weight 1 while both have work
 * waiting, and an idle tenant banks no credit. Not thread-safe: the
 * queue's lock guards it.
 */
typedef struct mcp_wfq mcp_wfq;
mcp_wfq *mcp_wfq_create(void);
void mcp_wfq_destroy(mcp_wfq *w);
double mcp_wfq_tag(mcp_wfq *w, const char *tenant, double weight, double cost);
void mcp_wfq_served(mcp_wfq *w, double tag);

#endif
