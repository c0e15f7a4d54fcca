/*
 * Private helpers shared by the descriptor parsers (descriptor.c for YAML,
 * triton.c for config.pbtxt). Not part of the registry's public interface.
 *
 * Limits below are mirrored by schemas/model.schema.json; change both.
 */
#ifndef MCP_REGISTRY_DESCRIPTOR_UTIL_H
#define MCP_REGISTRY_DESCRIPTOR_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "registry/registry.h"

#define MCP__DESC_MAX_TEXT (1u << 20)        /* bytes in a descriptor or config.pbtxt */
#define MCP__DESC_MAX_NAME 128               /* model name length */
#define MCP__DESC_MAX_TENSOR_NAME 256        /* input/output name length */
#define MCP__DESC_MAX_IO 256                 /* inputs, outputs each */
#define MCP__DESC_MAX_STEPS 32               /* preprocess, postprocess each */
#define MCP__DESC_MAX_VALUES 1024            /* normalize mean/std entries */
#define MCP__DESC_MAX_BATCH 65536            /* max_batch_size, preferred sizes */
#define MCP__DESC_MAX_DIM 2147483647LL       /* one shape dimension */
#define MCP__DESC_MAX_QUEUE_DELAY_US 10000000LL  /* 10 s */
#define MCP__DESC_MAX_QUEUE_SIZE 1000000LL
#define MCP__DESC_MAX_TIMEOUT_US 3600000000LL    /* 1 h */
#define MCP__DESC_MAX_PREFETCH 1024
#define MCP__DESC_MAX_INSTANCES 256
#define MCP__DESC_MAX_THREADS 1024
#define MCP__DESC_MAX_CPUS 1024.0                /* resources.cpus */
#define MCP__DESC_MIN_MEMORY (1LL << 20)         /* resources.memory */
#define MCP__DESC_MAX_MEMORY (1LL << 50)
#define MCP__DESC_MAX_TOPK 1000000
#define MCP__DESC_MAX_WARMUP 100                 /* warm-up runs at load */
#define MCP__DESC_MAX_LABELS_BYTES (64u << 20)
#define MCP__DESC_MAX_CONTEXT (1LL << 20)        /* generation.context_length */
#define MCP__DESC_MAX_SEQS 256                   /* generation.max_sequences */
#define MCP__DESC_MAX_KV_BYTES (1LL << 40)       /* generation.kv_cache_bytes */
#define MCP__DESC_MAX_STEP_TOKENS 65536          /* generation.step_tokens */
#define MCP__DESC_MAX_GEN_TOKENS (1LL << 20)     /* generation.max_tokens, max_tokens_limit */
#define MCP__DESC_MAX_MONITOR_WINDOW 10000       /* monitoring.window, min_samples */
#define MCP__DESC_MIN_MONITOR_WINDOW 10
#define MCP__DESC_MAX_MONITOR_OUTPUTS 64         /* monitoring.outputs (serve/monitor.h: MCP_MONITOR_MAX_WATCH) */

/* A fresh descriptor holding the defaults (format onnx, device cpu,
 * precision fp32, version v1.0.0, batching from `defaults`). NULL on
 * out-of-memory. Free with mcp_descriptor_free. */
mcp_descriptor *mcp__descriptor_new(const mcp_descriptor_defaults *defaults);

/* Model names: [A-Za-z0-9_.-]{1,128}, not "." or "..". */
/* A model name: 1 to MCP__DESC_MAX_NAME of A-Z a-z 0-9 _ . - (not "." or
 * ".."), or a tenant's "tenant/name" (the tenant 1 to 64 of the same; the
 * name not a word the HTTP routes use after a model). Plain: no tenant,
 * as a folder name must be. */
bool mcp__desc_name_valid(const char *s);
bool mcp__desc_plain_name_valid(const char *s);
/* Whether a key (in a descriptor, a model file's metadata or a request's
 * parameters) is policy-like: policy, policies, rbac, acl(s), roles,
 * permissions, auth, authorization, tenants, tenant_policy, as the whole
 * key or its last '.', '/' or ':' component, any case. Such keys are
 * refused: access rules come only from the server's configuration. */
bool mcp__desc_policy_key(const char *key);
/* A single-quoted YAML scalar's text, decoded from the document's source
 * (text, text_len) into pool, not by libfyaml (which leaks on '' escapes);
 * NULL when out of memory or the node has no source position. */
struct fy_node;
const char *mcp__yaml_single_quoted(struct fy_node *n, const char *text, size_t text_len, mcp_pool *pool, size_t *out_len);
#define MCP__DESC_POLICY_RULE "access rules come only from the server's configuration (its auth section), never from a model, a descriptor or a request"
/* "vMAJOR.MINOR.PATCH", no leading zeros, each part at most 9 digits. */
bool mcp__desc_semver_parse(const char *s, int out[3]);
/* Open Inference Protocol names (FP32, INT64, BYTES...) or numpy-style names
 * (float32, int64, string...); UNDEFINED when neither. */
mcp_dtype mcp__desc_dtype_parse(const char *s);
/* The candidate closest to `word` when it is a plausible typo, else NULL. */
const char *mcp__desc_closest(const char *word, const char *const *candidates, int n);
/* Joins `rel` to the folder `dir` (NULL or "" = leave relative) and removes
 * "." segments and repeated slashes. Absolute `rel` stays as it is. Caller
 * frees the result (mcp_free); NULL on out-of-memory. */
char *mcp__desc_path_join(const char *dir, const char *rel);
/* The folder part of a file path ("." when there is none). Caller frees. */
char *mcp__desc_dirname(const char *path);
/* Reads a labels file: one label per line, trailing empty line ignored.
 * On failure writes a sentence into msg and returns a status. */
mcp_status mcp__desc_labels_read(const char *path, char ***labels, int *n, char *msg, size_t cap);

/* Orders diags->items[first..count) by line, then column, keeping the
 * order of equal positions; problems without a position go last. */
void mcp__diags_sort(mcp_diags *diags, int first);

/* Parses config.pbtxt text. With model_dir NULL only the text is checked
 * (no version folder is chosen; path stays NULL): the fuzz target and the
 * unit tests use that. Problems go to diags; warnings (unknown fields)
 * start with "warning: " and do not fail the parse. */
mcp_status mcp__triton_parse_config(const char *text, size_t len, const char *model_dir,
                                    const mcp_descriptor_defaults *defaults, mcp_descriptor **out,
                                    mcp_diags *diags);

/* A Triton ModelConfig in JSON as protobuf text format (for the parser
 * above); problems to diags. */
mcp_status mcp__triton_json_to_text(const char *json, size_t len, mcp_buf *text, mcp_diags *diags);
/* Parses such text, in JSON's spellings (quoted integers, enum names as
 * strings); no model folder, as mcp__triton_parse_config with NULL. */
mcp_status mcp__triton_parse_json_config(const char *text, size_t len, const mcp_descriptor_defaults *defaults,
                                         mcp_descriptor **out, mcp_diags *diags);

#endif
