/*
 * The words of a rollout: validators ("diff-threshold@0.02") and durations
 * ("60s"), shared by the descriptor's `rollout` section and the rollout
 * API so both accept and refuse exactly the same things.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"

mcp_rollout_spec mcp_rollout_spec_default(void)
{
    return (mcp_rollout_spec){
        .validator = MCP_VALIDATOR_MAX_ABS,
        .threshold = 0.01,
        .agreement = 0.99,
        .window_ms = 60000,
        .error_rate_margin = 0.01,
        .p99_budget_us = 0,
        .min_samples = 20,
    };
}

static const struct {
    const char *name;
    mcp_validator_kind kind;
} validators[] = {
    {"diff-threshold", MCP_VALIDATOR_MAX_ABS},
    {"max-rel", MCP_VALIDATOR_MAX_REL},
    {"top1-agreement", MCP_VALIDATOR_TOP1},
};

/* A finite number that fills the whole of s. */
static bool whole_number(const char *s, double *out)
{
    if (!*s) return false;
    char *end;
    double x = strtod(s, &end);
    if (*end || !isfinite(x)) return false;
    *out = x;
    return true;
}

bool mcp_validator_parse(const char *s, mcp_validator_kind *kind, double *threshold, char *why, size_t cap)
{
    const char *at = strchr(s, '@');
    size_t n = at ? (size_t)(at - s) : strlen(s);
    for (size_t i = 0; i < sizeof validators / sizeof validators[0]; i++) {
        if (strlen(validators[i].name) != n || strncmp(s, validators[i].name, n) != 0) continue;
        double x;
        if (!at || !whole_number(at + 1, &x)) {
            snprintf(why, cap, "validator '%.60s' needs a number after '@' (like %s@%s)", s, validators[i].name,
                     validators[i].kind == MCP_VALIDATOR_TOP1 ? "0.99" : "0.02");
            return false;
        }
        if (validators[i].kind == MCP_VALIDATOR_TOP1 ? !(x > 0 && x <= 1) : !(x >= 0)) {
            snprintf(why, cap, "validator '%.60s': %s", s,
                     validators[i].kind == MCP_VALIDATOR_TOP1 ? "the agreement must be in (0, 1]"
                                                              : "the threshold must not be negative");
            return false;
        }
        *kind = validators[i].kind;
        *threshold = x;
        return true;
    }
    snprintf(why, cap, "unknown validator '%.60s'; use diff-threshold@T, max-rel@T or top1-agreement@R", s);
    return false;
}

void mcp_validator_format(mcp_validator_kind kind, double threshold, char *out, size_t cap)
{
    const char *name = "diff-threshold";
    for (size_t i = 0; i < sizeof validators / sizeof validators[0]; i++)
        if (validators[i].kind == kind) name = validators[i].name;
    snprintf(out, cap, "%s@%g", name, threshold);
}

bool mcp_duration_parse(const char *s, int64_t *us, char *why, size_t cap)
{
    static const struct {
        const char *unit;
        double us;
    } units[] = {{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}};
    char *end;
    double x = strtod(s, &end);
    if (end == s || !isfinite(x)) {
        snprintf(why, cap, "duration '%.60s' is not a number with a unit (like 60s or 800ms)", s);
        return false;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].unit) != 0) continue;
        double v = x * units[i].us;
        if (!(v >= 1) || v > 86400e6) {
            snprintf(why, cap, "duration '%.60s' must be from 1us to 24h", s);
            return false;
        }
        *us = (int64_t)v;
        return true;
    }
    snprintf(why, cap, "duration '%.60s' needs a unit: us, ms, s, m or h (like 60s or 800ms)", s);
    return false;
}
