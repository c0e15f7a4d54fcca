/*
 * Rollout monitors (private to src/serve/): what a canary and a shadow do,
 * compared with the primary over a sliding window, and the gates that turn
 * them off. One monitor per experiment, made by the frontend's on_route
 * hook; the registry holds it as the route table's watch.
 */
#ifndef MCP_SERVE_ROLLOUT_H
#define MCP_SERVE_ROLLOUT_H

#include "serve/serve.h"

typedef struct mcp_rollout_monitor mcp_rollout_monitor;

/* A gate failed: the canary (or shadow) is out of routing already; the
 * callee makes it so in the control plane (off the calling thread). */
typedef void (*mcp_rollout_trip_fn)(void *user, mcp_rollout_monitor *m, bool canary, const char *reason);

mcp_route_watch *mcp_rollout_monitor_create(const char *model, const mcp_rollout_spec *spec, const char *primary,
                                            const char *canary, const char *shadow, mcp_metrics *metrics,
                                            mcp_rollout_trip_fn trip, void *user);
/* One answered request of the primary or canary: status and end-to-end
 * latency. */
void mcp_rollout_record(mcp_route_watch *w, mcp_route_role role, mcp_status st, int64_t latency_ns);
/* The shadow's answer to a copy of a primary request. */
void mcp_rollout_compare(mcp_route_watch *w, const mcp_request *primary, const mcp_request *shadow);
/* A copy the shadow could not take (its queue was full). */
void mcp_rollout_dropped(mcp_route_watch *w);
/* Output monitoring found `version` drifted (serve/monitor.h): when it is
 * this experiment's canary and still routed, the canary stops as for any
 * other gate (off in routing at once, then the trip callback), with
 * reason "gate drift: <reason>". The drift is counted by the monitor's
 * own mcp_monitor_drift_events_total, not as a rollout gate trip. Returns
 * whether it stopped the canary now. Any thread. */
bool mcp_rollout_drifted(mcp_route_watch *w, const char *version, const char *reason);
/* The window's figures as a JSON object. */
void mcp_rollout_window_json(mcp_route_watch *w, mcp_buf *b);
const char *mcp_rollout_model(const mcp_route_watch *w);

#endif
