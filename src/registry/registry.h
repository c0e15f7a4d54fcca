/*
 * registry: model descriptors (YAML and Triton config.pbtxt), their
 * validation, and the lifecycle of loaded model versions (load, ready,
 * unload) in a repository that the server and mcpctl share.
 */
#ifndef MCP_REGISTRY_H
#define MCP_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "engine/engine.h"
#include "tensor/tensor.h"

/* ---- diagnostics: every problem at once, with where ---- */

typedef struct mcp_diag {
    char *path;    /* field path, e.g. "batching.max_queue_delay_us" or "inputs[0].dtype" */
    int line, col; /* 1-based position in the source file; 0 when unknown */
    char *message;
} mcp_diag;

typedef struct mcp_diags {
    int count, cap;
    mcp_diag *items;
} mcp_diags;

void mcp_diags_add(mcp_diags *d, const char *path, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void mcp_diags_clear(mcp_diags *d);
/* "file:line:col: path: message" one per line into buf (truncating). */
void mcp_diags_format(const mcp_diags *d, const char *file, char *buf, size_t cap);

/* ---- model roots: the folders model files may come from ---- */

typedef struct mcp_model_roots mcp_model_roots;

mcp_model_roots *mcp_model_roots_create(void);
void mcp_model_roots_destroy(mcp_model_roots *r);
/* Adds a folder (it must exist); kept as given and as its realpath. */
mcp_status mcp_model_roots_add(mcp_model_roots *r, const char *dir, mcp_err *err);
int mcp_model_roots_count(const mcp_model_roots *r);
/* The i-th root's resolved path (0 <= i < count). */
const char *mcp_model_roots_get(const mcp_model_roots *r, int i);
/* The first root's resolved path (NULL when none): relative paths of a
 * descriptor sent without a folder of its own resolve against it. */
const char *mcp_model_roots_first(const mcp_model_roots *r);
/* Resolves `path` (absolute, or relative to the working folder) to its
 * realpath, which must lie inside a root and be a regular file (or a folder
 * with allow_dir). A path outside the roots, or with a ".." segment, is
 * refused with PERMISSION_DENIED before the file system is consulted, so
 * the answer never tells whether such a file exists. `what` names the
 * field in messages ("model file", "labels file"). *resolved: caller frees. */
mcp_status mcp_model_roots_resolve(const mcp_model_roots *r, const char *path, const char *what, bool allow_dir,
                                   char **resolved, mcp_err *err);
/* `path` relative to the root holding it, or its file name when none does:
 * what a client may be shown (never an absolute host path). */
const char *mcp_model_roots_display(const mcp_model_roots *r, const char *path, char *buf, size_t cap);
/* Copies text with every root's path cut out (paths in it become relative
 * to their root): for messages that reach clients. */
void mcp_model_roots_redact(const mcp_model_roots *r, const char *text, char *out, size_t cap);

/* ---- model store: an OCI image layout of model files by digest ----
 * (store.c) A version is a manifest naming its descriptor (config) and its
 * files (layers, titled by their path in the model's folder); index.json
 * names each "name:version". Writes are crash-safe; the same bytes are
 * stored once; a store is shared safely between processes. */
typedef struct mcp_store mcp_store;

typedef struct mcp_store_blob {
    char digest[MCP_DIGEST_LEN + 1]; /* "sha256:<hex>" */
    int64_t size;
} mcp_store_blob;

typedef struct mcp_store_file {
    char *title; /* path relative to the model's folder ("model.onnx") */
    mcp_store_blob blob;
} mcp_store_file;

typedef struct mcp_store_manifest {
    mcp_store_blob manifest; /* the manifest blob itself */
    char *name, *version;
    mcp_store_blob config;   /* the descriptor */
    char config_media_type[128];
    mcp_store_file *files;
    int n_files;
    char *io_signature; /* JSON of inputs and outputs, or NULL */
    char *fingerprint;  /* topology fingerprint, or NULL */
} mcp_store_manifest;
void mcp_store_manifest_free(mcp_store_manifest *m);

typedef struct mcp_store_version_file {
    const char *title; /* relative path in the version */
    const char *path;  /* the file to store */
} mcp_store_version_file;

typedef struct mcp_store_version_in {
    const char *name, *version;
    const void *descriptor; /* the descriptor's bytes */
    size_t descriptor_len;
    const char *descriptor_media_type; /* NULL: YAML */
    const mcp_store_version_file *files;
    int n_files;
    const char *io_signature, *fingerprint; /* optional */
} mcp_store_version_in;

typedef struct mcp_store_report {
    int64_t versions, blobs, unreferenced, problems;
    char first_problem[512];
} mcp_store_report;

/* Opens (creating when missing) the store in dir; temporary files a crash
 * left are removed. */
mcp_status mcp_store_open(const char *dir, mcp_store **out, mcp_err *err);
void mcp_store_close(mcp_store *s);
const char *mcp_store_root(const mcp_store *s); /* its real path */
mcp_status mcp_store_put_bytes(mcp_store *s, const void *data, size_t len, mcp_store_blob *out, mcp_err *err);
mcp_status mcp_store_put_file(mcp_store *s, const char *path, mcp_store_blob *out, mcp_err *err);
mcp_status mcp_store_blob_path(const mcp_store *s, const char *digest, char *path, size_t cap, mcp_err *err);
bool mcp_store_has_blob(const mcp_store *s, const char *digest);
/* Stores a version's descriptor and files, then its manifest, and names it
 * name:version (replacing what had that name). *out: the stored manifest. */
mcp_status mcp_store_put_version(mcp_store *s, const mcp_store_version_in *in, mcp_store_manifest **out, mcp_err *err);
mcp_status mcp_store_get_version(mcp_store *s, const char *ref, mcp_store_manifest **out, mcp_err *err);
mcp_status mcp_store_tag(mcp_store *s, const char *ref, const mcp_store_blob *manifest, mcp_err *err);
mcp_status mcp_store_untag(mcp_store *s, const char *ref, mcp_err *err);
mcp_status mcp_store_resolve(mcp_store *s, const char *ref, mcp_store_blob *manifest, mcp_err *err);
/* Every name:version in the index; free with mcp_store_refs_free. */
mcp_status mcp_store_list(mcp_store *s, char ***refs, int *n, mcp_err *err);
void mcp_store_refs_free(char **refs, int n);
/* Rehashes every blob and checks every named version's manifest and blobs. */
mcp_status mcp_store_verify(mcp_store *s, mcp_store_report *report, mcp_err *err);
/* Removes blobs no named version references (refused while the store has
 * problems, so nothing in use can be taken for garbage). */
mcp_status mcp_store_collect(mcp_store *s, int64_t *removed, int64_t *bytes, mcp_err *err);
/* A manifest by its digest (checked against its bytes). */
mcp_status mcp_store_read_manifest(mcp_store *s, const char *digest, mcp_store_manifest **out, mcp_err *err);
/* The version's files under their titles, as hard links to its blobs, in
 * <store>/checkouts/<manifest hex> (made once, whole or not at all): what a
 * version loads from. dir receives the folder. */
mcp_status mcp_store_checkout(mcp_store *s, const mcp_store_manifest *m, char *dir, size_t cap, mcp_err *err);
/* Copies a version (its blobs, checked against their digests, then its
 * name) from one store to another: push and pull. */
mcp_status mcp_store_copy(mcp_store *from, mcp_store *to, const char *ref, mcp_err *err);

/* ---- catalog: models, versions, desired state, events (SQLite) ----
 * (catalog.c) One file, normally <store>/catalog.db. Each change is one
 * transaction; errors say what failed in words (disk full, locked). */
typedef struct mcp_catalog mcp_catalog;

/* A version's lifecycle. */
typedef enum mcp_version_state {
    MCP_VERSION_REGISTERED,
    MCP_VERSION_LOADING,
    MCP_VERSION_READY,
    MCP_VERSION_DRAINING,
    MCP_VERSION_UNLOADED,
    MCP_VERSION_FAILED,
    MCP_VERSION_STATE_COUNT,
} mcp_version_state;
const char *mcp_version_state_name(mcp_version_state s);

/* An event of the append-only log. Strings are borrowed. */
typedef struct mcp_catalog_event {
    int64_t id;      /* set when read back */
    int64_t time_ms; /* 0 = now (wall clock, ms since the epoch) */
    const char *actor, *action, *target, *outcome, *reason;
} mcp_catalog_event;

typedef struct mcp_catalog_model {
    char name[256];
    bool loaded;              /* desired state */
    char current[160];        /* its current version ("" = none) */
    bool has_version;         /* current is a recorded version: */
    char manifest[MCP_DIGEST_LEN + 1];
    mcp_version_state state;
    char reason[512];
} mcp_catalog_model;

mcp_status mcp_catalog_open(const char *path, mcp_catalog **out, mcp_err *err);
void mcp_catalog_close(mcp_catalog *c);
/* Records (or re-records) model:version held by a manifest, Registered;
 * with the event e (may be NULL) in the same transaction, as below. */
mcp_status mcp_catalog_record_version(mcp_catalog *c, const char *model, const char *version, const char *manifest,
                                      const mcp_catalog_event *e, mcp_err *err);
mcp_status mcp_catalog_set_state(mcp_catalog *c, const char *model, const char *version, mcp_version_state state,
                                 const char *reason, const mcp_catalog_event *e, mcp_err *err);
/* The model's desired state and (unless NULL) its current version. */
mcp_status mcp_catalog_set_desired(mcp_catalog *c, const char *model, bool loaded, const char *current,
                                   const mcp_catalog_event *e, mcp_err *err);
mcp_status mcp_catalog_set_tag(mcp_catalog *c, const char *model, const char *tag, const char *version, mcp_err *err);
mcp_status mcp_catalog_add_event(mcp_catalog *c, const mcp_catalog_event *e, mcp_err *err);
/* Every model, by name; *out freed with mcp_free. */
mcp_status mcp_catalog_models(mcp_catalog *c, mcp_catalog_model **out, int *n, mcp_err *err);
/* Events after after_id (of target NAME: NAME and NAME:VERSION; NULL =
 * all), oldest first, at most limit (0 = all); fn returns false to stop. */
typedef bool (*mcp_catalog_event_fn)(void *user, const mcp_catalog_event *e);
mcp_status mcp_catalog_events(mcp_catalog *c, const char *target, int64_t after_id, int limit, mcp_catalog_event_fn fn,
                              void *user, mcp_err *err);
/* A model's rollout (a JSON object; NULL removes it), and reading it
 * back (*state NULL when none; mcp_free). */
mcp_status mcp_catalog_set_rollout(mcp_catalog *c, const char *model, const char *state, mcp_err *err);
mcp_status mcp_catalog_rollout(mcp_catalog *c, const char *model, char **state, mcp_err *err);
/* SQLite's integrity check: problem is "" when the file is sound. */
mcp_status mcp_catalog_check(mcp_catalog *c, char *problem, size_t cap, mcp_err *err);

/* ---- descriptor ---- */

typedef struct mcp_io_spec {
    char *name;       /* external name (what clients send) */
    char *graph_name; /* name in the model graph; NULL = same as name */
    mcp_dtype dtype;  /* UNDEFINED = take from the model */
    int rank;         /* -1 = take from the model */
    int64_t dims[MCP_MAX_RANK]; /* -1 = variable */
} mcp_io_spec;

typedef enum mcp_step_kind {
    MCP_STEP_SCALE,     /* x * factor */
    MCP_STEP_NORMALIZE, /* (x - mean[c]) / std[c] along `axis` */
    MCP_STEP_CAST,      /* to dtype */
    MCP_STEP_TRANSPOSE, /* perm, or layout "NHWC->NCHW" */
    MCP_STEP_SOFTMAX,   /* along axis */
    MCP_STEP_TOPK,      /* k, labels file */
} mcp_step_kind;
#define MCP_STEP_KIND_COUNT (MCP_STEP_TOPK + 1)

/* "scale", "normalize", ... as descriptors spell them. */
const char *mcp_step_kind_name(mcp_step_kind k);

typedef struct mcp_step {
    mcp_step_kind kind;
    char *tensor;     /* which input/output it applies to; NULL = the only one */
    double factor;
    int n_values;
    double *mean, *std; /* n_values each (normalize) */
    int64_t axis;
    mcp_dtype dtype;
    int n_perm;
    int64_t perm[MCP_MAX_RANK];
    int64_t k;
    char *labels_path; /* resolved relative to the descriptor */
    int n_labels;
    char **labels;
} mcp_step;

typedef struct mcp_batching {
    bool enabled;
    int64_t max_queue_delay_us;  /* default 500 */
    int n_preferred;
    int64_t preferred[16];
    int64_t max_queue_size;      /* default 1024 */
    int64_t default_timeout_us;  /* 0 = none */
    int64_t prefetch_queue_depth; /* default 8 */
    bool enable_tensor_cache;     /* default true */
} mcp_batching;

/* A generative model (format gguf): its step loop and KV cache (descriptor
 * section `generation`). */
typedef enum mcp_chat_template {
    MCP_CHAT_AUTO = 0, /* from the file's tokenizer.chat_template */
    MCP_CHAT_CHATML,   /* <|im_start|>role ... <|im_end|> (Qwen2 and others) */
    MCP_CHAT_LLAMA3,   /* <|start_header_id|>role<|end_header_id|> ... <|eot_id|> */
    MCP_CHAT_LLAMA2,   /* [INST] ... [/INST] (Llama 2, Mistral) */
    MCP_CHAT_PLAIN,    /* "role: text" lines, then "assistant:" */
} mcp_chat_template;

typedef struct mcp_generation {
    int64_t context_length;  /* tokens per sequence; 0 = the model's training context (capped at 4096) */
    int64_t max_sequences;   /* sequences decoded together; default 8 */
    int64_t kv_cache_bytes;  /* the KV cache pool; default 256 MiB */
    bool kv_f32;             /* cache_type f32 (default f16) */
    int64_t step_tokens;     /* tokens one step decodes at most (prefill chunks share it); default 512 */
    int64_t max_queue;       /* requests waiting for a sequence; default 256 */
    int64_t max_tokens;      /* a request's default (and the server's cap: max_tokens_limit) */
    int64_t max_tokens_limit;/* the most tokens a request may ask for; default 4096 */
    double temperature, top_p, min_p, repeat_penalty;
    int64_t top_k;
    mcp_chat_template chat_template;
    bool prefix_cache;       /* full KV blocks reused across requests of one tenant; default on */
} mcp_generation;

/* A rollout: which versions answer and which get copies (descriptor
 * section `rollout`, and the rollout API). */
typedef enum mcp_validator_kind {
    MCP_VALIDATOR_MAX_ABS,  /* diff-threshold@T: every element within T */
    MCP_VALIDATOR_MAX_REL,  /* max-rel@T: |a-b| <= T * max(|a|,|b|) (absolute near 0) */
    MCP_VALIDATOR_TOP1,     /* top1-agreement@R: the same class in a share R of requests */
} mcp_validator_kind;

#define MCP_ROLLOUT_VERSION_LEN 64

typedef struct mcp_rollout_spec {
    bool present;
    char primary[MCP_ROLLOUT_VERSION_LEN]; /* "" = the current version */
    char canary[MCP_ROLLOUT_VERSION_LEN];  /* "" = none */
    double canary_weight;                  /* percent of requests, 0..100 */
    char shadow[MCP_ROLLOUT_VERSION_LEN];  /* "" = none */
    double shadow_sample;                  /* share of requests copied, 0..1 */
    mcp_validator_kind validator;
    double threshold;       /* the validator's T, or its R for top1 */
    double agreement;       /* share of compared requests that must agree (threshold validators) */
    int64_t window_ms;      /* the gates' sliding window */
    double error_rate_margin; /* canary errors above the primary's by more: off; < 0 = no gate */
    int64_t p99_budget_us;  /* canary p99 above: off; 0 = no gate */
    int64_t min_samples;    /* requests in the window before a gate judges */
} mcp_rollout_spec;

/* Validators, windows and gates as a new rollout starts: diff-threshold@0.01,
 * agreement 0.99, window 60 s, error margin 0.01, no p99 budget, 20 samples. */
mcp_rollout_spec mcp_rollout_spec_default(void);
/* "diff-threshold@0.02", "max-rel@1e-3", "top1-agreement@0.99". */
bool mcp_validator_parse(const char *s, mcp_validator_kind *kind, double *threshold, char *why, size_t cap);
void mcp_validator_format(mcp_validator_kind kind, double threshold, char *out, size_t cap);
/* "60s", "800ms", "2m", "1.5s", "250us" into microseconds (> 0). */
bool mcp_duration_parse(const char *s, int64_t *us, char *why, size_t cap);

/* Output monitoring (descriptor section `monitoring`): a sampled share of
 * requests feeds windows of output (and input) statistics, and a drift
 * score over the threshold marks the version drifted (serve/monitor.h). */
typedef enum mcp_classifier_mode {
    MCP_CLASSIFIER_AUTO = 0, /* an output with a softmax postprocess step and a fixed last axis >= 2 */
    MCP_CLASSIFIER_ON,       /* every watched output with a fixed last axis >= 2 */
    MCP_CLASSIFIER_OFF,
} mcp_classifier_mode;

typedef struct mcp_monitoring {
    bool present;            /* the descriptor has the section; without it nothing is monitored */
    double sample_rate;      /* share of requests sampled, 0..1 (0 = off); default 0.1 */
    int64_t window;          /* samples in the reference and in the current window; default 2000 */
    double threshold;        /* drift score (0..1] above which the version drifts; default 0.3 */
    int64_t min_samples;     /* samples the current window needs before it is judged; default 500 */
    mcp_classifier_mode classifier;
    bool inputs;             /* watch the declared inputs too */
    int n_outputs;
    char **outputs;          /* the outputs watched (owned); none = every numeric output */
} mcp_monitoring;

/* The section's values when it is given with no fields. */
mcp_monitoring mcp_monitoring_default(void);

typedef struct mcp_descriptor {
    char *source;   /* file it came from (for messages) */
    char *name;
    char *version;  /* "v1.0.0" */
    int semver[3];
    char *format;   /* "onnx" | "triton" | "gguf" */
    char *path;     /* model file, resolved against the descriptor's folder */
    char *device;   /* "cpu" */
    int64_t max_batch_size; /* 0 = the model has no batch dimension */
    char *precision;        /* "fp32" | "fp16" | "bf16" | "int8" */
    /* precision int8: a folder of .npy samples (resolved and confined like
     * path) for static quantization at load; NULL: dynamic quantization. */
    char *calibration;
    int n_inputs, n_outputs;
    mcp_io_spec *inputs, *outputs;
    mcp_batching batching;
    int64_t instance_count;   /* default 1 */
    int64_t instance_threads; /* default 1; format gguf: 0 (every core) unless given */
    int64_t warmup_runs;      /* at load; default 1, 0 = none */
    int n_pre, n_post;
    mcp_step *pre, *post;
    /* Triton folders: the other versions the version policy serves beside
     * `version` (the highest), highest first. */
    int n_also;
    int64_t also[64];
    mcp_rollout_spec rollout;
    mcp_generation generation; /* format gguf */
    mcp_monitoring monitoring;
    /* resources: what the version may use (0: no limit but the server's).
     * cpus holds instances x threads to ceil(cpus) cores; memory_bytes is
     * a ceiling on the version's own allocations (its account), at load
     * and in every run. */
    double cpus;
    int64_t memory_bytes;
} mcp_descriptor;

/* Server-wide defaults a descriptor starts from (the quickstart table). */
typedef struct mcp_descriptor_defaults {
    int64_t max_batch_size;       /* 32 */
    int64_t max_queue_delay_us;   /* 500 */
    int64_t max_queue_size;       /* 1024 */
    int64_t prefetch_queue_depth; /* 8 */
    bool enable_tensor_cache;     /* true */
    int64_t instance_count;       /* 1 */
    int64_t instance_threads;     /* 1 */
    /* Where the descriptor's files may be (not owned). NULL = anywhere: a
     * local file the operator or `mcpctl validate` reads. Descriptors that
     * come over the network always parse with the server's roots. */
    const mcp_model_roots *roots;
    /* Server-side limits no descriptor may exceed (0 = none): the threads
     * one model may start (instances x threads per instance), and the
     * bytes of the warm-up run's inputs. */
    int64_t max_model_threads;
    int64_t max_warmup_bytes;
    /* Sessions run with fewer threads while other work takes some of the
     * cores (mcp_session_options.adaptive_threads; --adaptive-threads). */
    bool adaptive_threads;
    /* The largest tensor a node of a model may produce (0 = the engine's
     * limit; mcp_session_options.max_tensor_bytes; --max-tensor-bytes). */
    int64_t max_tensor_bytes;
    /* Check as a load would: the files named exist (regular files, or a
     * folder for format triton) and the precision is one the engine runs.
     * The server and `mcpctl validate` / `apply` set it; parsing alone
     * (fuzzing, schema tests) does not. */
    bool check_load;
    /* The descriptor's files are elsewhere (a store checkout): labels files
     * are not read while parsing; the caller repoints and reads them. */
    bool files_elsewhere;
    /* Triton folders: read this version folder alone (0 = as the policy says). */
    int64_t pin_version;
} mcp_descriptor_defaults;

mcp_descriptor_defaults mcp_descriptor_defaults_default(void);
mcp_generation mcp_generation_default(void);

/* Parses and validates a YAML descriptor. On problems, every one is added to
 * diags (path + line:col) and the status is INVALID_ARGUMENT; *out is NULL. */
mcp_status mcp_descriptor_parse_yaml(const char *text, size_t len, const char *source_path,
                                     const mcp_descriptor_defaults *defaults, mcp_descriptor **out,
                                     mcp_diags *diags);
mcp_status mcp_descriptor_load_file(const char *path, const mcp_descriptor_defaults *defaults,
                                    mcp_descriptor **out, mcp_diags *diags);
/* Triton model folder: DIR/config.pbtxt + DIR/<version>/model.onnx (the
 * highest version unless the policy says otherwise). */
mcp_status mcp_descriptor_load_triton(const char *model_dir, const mcp_descriptor_defaults *defaults,
                                      mcp_descriptor **out, mcp_diags *diags);
/* A Triton ModelConfig in JSON (what Triton's load takes in
 * parameters.config) for the model folder named `name` in the model roots
 * (defaults->roots), as config.pbtxt would be read there. */
mcp_status mcp_descriptor_from_triton_json(const char *name, const char *json, size_t len,
                                           const mcp_descriptor_defaults *defaults, mcp_descriptor **out,
                                           mcp_diags *diags);
/* A descriptor for a bare model file (quickstart: --model-path). */
mcp_status mcp_descriptor_for_model(const char *model_path, const mcp_descriptor_defaults *defaults,
                                    mcp_descriptor **out, mcp_err *err);
void mcp_descriptor_free(mcp_descriptor *d);

/* ---- loaded model versions ---- */

typedef enum mcp_model_state {
    MCP_MODEL_LOADING,
    MCP_MODEL_READY,
    MCP_MODEL_UNLOADING,
    MCP_MODEL_UNAVAILABLE, /* failed to load, or unloaded */
} mcp_model_state;

const char *mcp_model_state_name(mcp_model_state s);

/* One tensor as the protocols describe it: OIP datatype string ("FP32"),
 * shape with -1 for variable dims (batch dim included when batching). */
typedef struct mcp_tensor_meta {
    const char *name;       /* external name */
    const char *graph_name; /* name in the graph */
    mcp_dtype dtype;
    int rank;
    int64_t dims[MCP_MAX_RANK];
} mcp_tensor_meta;

/*
 * A loaded, immutable model version. Reference-counted: the repository holds
 * one reference while it is current; each request in flight holds one. The
 * last mcp_model_version_release frees it (and its session).
 */
typedef struct mcp_model_version {
    atomic_int refs;
    char *name;
    char *version;
    mcp_descriptor *desc;  /* owned */
    mcp_session *session;  /* owned */
    int n_inputs, n_outputs;
    mcp_tensor_meta *inputs, *outputs;
    size_t memory_bytes;   /* real bytes held when it became ready (its account then) */
    mcp_mem_account *account; /* what its load and its runs allocated and still hold */
    _Atomic int64_t last_used_ns; /* the latest request routed to it (mcp_now_ns), or its load */
    int64_t loaded_at_us;
    /* sha256 over the canonical I/O signature and the graph's structure
     * (ops, wiring, weight types and shapes; not their values): two
     * versions with the same one serve the same computation shape. */
    char fingerprint[MCP_DIGEST_LEN + 1];
    /* The precision the model really runs at: "int8" (quantized at load),
     * "bf16" (where the CPU has bf16 dot products), "fp32"; for GGUF the
     * descriptor's. A static string. */
    const char *precision;
    /* What the load did other than asked (mcp_session_load_note: a compiled
     * model loaded from its embedded ONNX, and why), owned; else NULL. */
    char *load_note;
    void *serving;         /* scheduler state owned by the serve layer */
    void (*serving_free)(void *serving);
    /* Output monitoring (the serve layer's; NULL = none): freed after the
     * scheduler, whose workers offer it requests. */
    void *monitor;
    void (*monitor_free)(void *monitor);
    /* format gguf: the language model (owned) and its generation engine
     * (the serve layer's step loop), instead of a session and scheduler. */
    struct mcp_llm_model *llm;
    void *generator;
    void (*generator_free)(void *generator);
} mcp_model_version;

/* Loads the model a descriptor names: import, prepare, warm-up run. The
 * server's roots and limits come from `server` (NULL = none): the files a
 * Triton folder selects must lie inside the roots, and the descriptor's
 * threads and warm-up shapes within the limits. */
mcp_status mcp_model_version_load(mcp_descriptor *desc /* taken */, const mcp_descriptor_defaults *server,
                                  mcp_model_version **out, mcp_err *err);
/* The same, telling `phase` ("importing and preparing", "warm-up") as it
 * goes (phase may be NULL). */
typedef void (*mcp_load_phase_fn)(void *user, const char *phase);
mcp_status mcp_model_version_load_phased(mcp_descriptor *desc /* taken */, const mcp_descriptor_defaults *server,
                                         mcp_load_phase_fn phase, void *user, mcp_model_version **out, mcp_err *err);
mcp_model_version *mcp_model_version_retain(mcp_model_version *v);
void mcp_model_version_release(mcp_model_version *v);
/* The real bytes the version holds now (its allocator account). */
size_t mcp_model_version_bytes(const mcp_model_version *v);

/* The inputs and outputs a version serves, as canonical JSON
 * ({"inputs":[{"name","datatype","shape"}...],"outputs":[...]}); mcp_free. */
char *mcp_model_io_signature(const mcp_model_version *v);
/* Computes v->fingerprint (after the load, when its metadata is final). */
mcp_status mcp_model_fingerprint(mcp_model_version *v, mcp_err *err);
/* Stores a loaded version (store_model.c): the descriptor's bytes, its
 * model file and its steps' labels files (titled relative to the model
 * file's folder), and its I/O signature; named name:version. */
mcp_status mcp_store_add_version(mcp_store *s, const mcp_model_version *v, const char *descriptor, size_t len,
                                 mcp_store_manifest **out, mcp_err *err);

/* ---- the control plane's record: store + catalog (plane.c) ---- */
typedef struct mcp_plane mcp_plane;
struct mcp_repository;
/* Opens (creating) the store in dir and its catalog (dir/catalog.db). */
mcp_status mcp_plane_open(const char *dir, mcp_plane **out, mcp_err *err);
void mcp_plane_close(mcp_plane *p);
mcp_store *mcp_plane_store(mcp_plane *p);
mcp_catalog *mcp_plane_catalog(mcp_plane *p);
/* A version loaded from descriptor text: stored, recorded Ready (and
 * with `current`, the model's current version, desired loaded), event
 * "apply" by actor. */
mcp_status mcp_plane_applied(mcp_plane *p, const mcp_model_version *v, const char *text, size_t len, bool current,
                             const char *actor, mcp_err *err);
/* Keeps the model's canary and shadow (versions, amounts, validator,
 * gates) in the catalog, or removes them when it has none; restore brings
 * them back beside the primary. */
mcp_status mcp_plane_record_rollout(mcp_plane *p, struct mcp_repository *repo, const char *name, mcp_err *err);
/* Loads name:version from the store as the model's primary (undo of a
 * version no longer kept warm). */
mcp_status mcp_plane_load_version(mcp_plane *p, struct mcp_repository *repo, const char *name, const char *version,
                                  mcp_err *err);
/* The model's desired state is unloaded; event "unload". */
mcp_status mcp_plane_unloaded(mcp_plane *p, const char *name, const char *actor, mcp_err *err);
/* An event only (a failed apply, ...); failures to record go to stderr. */
void mcp_plane_note(mcp_plane *p, const char *action, const char *target, const char *outcome, const char *reason,
                    const char *actor);
/* Every model whose desired state is loaded and that repo does not serve
 * yet comes back from the store. Returns how many failed (-1: the catalog
 * could not be read); what happened goes to log and the event log. */
int mcp_plane_restore(mcp_plane *p, struct mcp_repository *repo, FILE *log);

/* ---- declarative pre/postprocessing steps ----
 * Preprocess steps turn what a client sends into what the graph takes;
 * postprocess steps turn graph outputs into what the client gets. At load,
 * mcp_steps_adjust_meta rewrites the version's protocol metadata to the
 * client's view (a cast or transpose changes the dtype or shape clients
 * send; topk turns an output into BYTES "score:index:label"). At run time
 * the scheduler's workers apply the steps per request. */
mcp_status mcp_steps_adjust_meta(mcp_model_version *v, mcp_err *err);
/* Rewrites input tensors in place (new data from `pool`). names[i] is
 * the external name of tensors[i]. */
mcp_status mcp_steps_apply_pre(const mcp_model_version *v, int n, const char *const *names, mcp_tensor *tensors,
                               mcp_pool *pool, mcp_err *err);
/* Rewrites owned output tensors in place (old data released). */
mcp_status mcp_steps_apply_post(const mcp_model_version *v, int n, const char *const *names, mcp_tensor *tensors,
                                mcp_err *err);

/* ---- repository: name -> current version ---- */

typedef struct mcp_repository mcp_repository;

typedef struct mcp_repository_entry {
    char *name;
    char *version;
    mcp_model_state state;
    char *reason;
} mcp_repository_entry;

mcp_repository *mcp_repository_create(const mcp_descriptor_defaults *defaults);
void mcp_repository_destroy(mcp_repository *r);
/* Called (under no lock) when a version becomes current or stops being so;
 * the serve layer attaches and drains its scheduler here. */
/* What the serving layer watches while a canary or shadow runs (its
 * windows and gates live behind this): created by on_route when a route
 * table gains a canary or shadow, kept while those stay the same versions.
 * Setting canary_off / shadow_off takes that version out of routing at
 * once, before the control plane records the change. */
typedef struct mcp_route_watch {
    atomic_int refs;
    atomic_bool canary_off, shadow_off;
    void (*destroy)(struct mcp_route_watch *w);
} mcp_route_watch;
mcp_route_watch *mcp_route_watch_retain(mcp_route_watch *w);
void mcp_route_watch_release(mcp_route_watch *w);

typedef struct mcp_repository_hooks {
    mcp_status (*on_ready)(mcp_model_version *v, void *user, mcp_err *err);
    void (*on_retire)(mcp_model_version *v, void *user);
    /* A new canary or shadow (either may be NULL); called with the
     * repository's lock held: allocate, do not call back. */
    mcp_route_watch *(*on_route)(const char *model, const mcp_rollout_spec *spec, const mcp_model_version *primary,
                                 const mcp_model_version *canary, const mcp_model_version *shadow, void *user);
    /* Something the operator should hear of (optional). */
    void (*on_log)(void *user, const char *line);
    void *user;
} mcp_repository_hooks;
void mcp_repository_set_hooks(mcp_repository *r, mcp_repository_hooks hooks);
/* The defaults (and model roots) descriptors of this repository parse with. */
const mcp_descriptor_defaults *mcp_repository_defaults(const mcp_repository *r);
/* Adds every *.yaml descriptor and Triton model folder found in dir as
 * known (not loaded) entries; loads them when load_all. */
mcp_status mcp_repository_scan(mcp_repository *r, const char *dir, bool load_all, mcp_diags *diags);
/* Loads (or reloads) a descriptor and makes it current: the new version is
 * loaded and warmed beside the old one, then swapped in atomically. */
mcp_status mcp_repository_apply(mcp_repository *r, mcp_descriptor *desc /* taken */, mcp_err *err);
/* Where a model came from, so a load by name can rebuild it after an
 * unload, whatever that was. */
typedef enum mcp_source_kind {
    MCP_SOURCE_NONE,       /* nothing to load it from again */
    MCP_SOURCE_YAML_FILE,  /* source: a descriptor file */
    MCP_SOURCE_TRITON,     /* source: a Triton model folder */
    MCP_SOURCE_MODEL_FILE, /* source: a bare model file (--model-path) */
    MCP_SOURCE_YAML_TEXT,  /* text: a descriptor as sent; source: where it said it lives (may be NULL) */
    MCP_SOURCE_TRITON_JSON, /* text: a Triton ModelConfig in JSON as sent, for the model's folder in the roots */
} mcp_source_kind;
/* apply, remembering the source (copied) for mcp_repository_load. */
mcp_status mcp_repository_apply_from(mcp_repository *r, mcp_descriptor *desc /* taken */, mcp_source_kind kind,
                                     const char *source, const char *text, mcp_err *err);
/* Poll mode: the repository folder watched (poll.c). poll_seed records
 * what is there now as applied (after the start-up scan); each poll_once
 * applies a descriptor or Triton folder that is new or changed once its
 * files stayed the same for two polls in a row (never half-written), and
 * unloads one that went away. Returns how many it changed (-1: the folder
 * cannot be read). What it did goes to log (may be NULL). */
typedef struct mcp_repository_poll mcp_repository_poll;
mcp_repository_poll *mcp_repository_poll_create(const char *dir);
void mcp_repository_poll_destroy(mcp_repository_poll *p);
void mcp_repository_poll_seed(mcp_repository_poll *p, struct mcp_repository *r);
int mcp_repository_poll_once(mcp_repository_poll *p, struct mcp_repository *r, FILE *log);
/* Loads a known entry by name (model repository extension). */
mcp_status mcp_repository_load(mcp_repository *r, const char *name, mcp_err *err);
mcp_status mcp_repository_unload(mcp_repository *r, const char *name, mcp_err *err);
/* Current version of a model (NULL version = current; or any version it
 * has loaded: canary, shadow, the previous one kept warm, a Triton
 * policy's), retained for the caller; NULL when unknown or not ready.
 * Reads the published route table without taking a lock. */
mcp_model_version *mcp_repository_get(mcp_repository *r, const char *name, const char *version);

/* ---- routes: which version answers a request, and who gets a copy ----
 * Each model has an immutable route table (primary, canary and weight,
 * shadow and sample, the other loaded versions); every change publishes a
 * new one with one atomic exchange, and readers never lock. */
typedef enum mcp_route_role { MCP_ROUTE_PRIMARY, MCP_ROUTE_CANARY } mcp_route_role;
typedef struct mcp_route {
    mcp_model_version *v;      /* retained: the version that answers */
    mcp_route_role role;
    mcp_model_version *shadow; /* retained: gets a copy; NULL = none */
    mcp_route_watch *watch;    /* retained; NULL when no canary or shadow */
} mcp_route;
/* Routes an unpinned request. key (the request id; NULL = none) makes the
 * canary and shadow choices deterministic; without one, requests split by
 * a low-discrepancy sequence, so any run of them matches the weights
 * closely. False when the model serves nothing or runs no canary and no
 * shadow (the primary answers then). */
bool mcp_repository_route(mcp_repository *r, const char *name, const char *key, mcp_route *out);
void mcp_route_release(mcp_route *rt);

/* The rollout state of a model. */
typedef struct mcp_rollout_state {
    char primary[MCP_ROLLOUT_VERSION_LEN], canary[MCP_ROLLOUT_VERSION_LEN], shadow[MCP_ROLLOUT_VERSION_LEN];
    char previous[MCP_ROLLOUT_VERSION_LEN]; /* kept warm for undo ("" = none) */
    char previous_cold[MCP_ROLLOUT_VERSION_LEN]; /* the one before, no longer loaded ("" = none) */
    double canary_weight, shadow_sample;
    mcp_rollout_spec spec; /* validator, window and gates in force */
    mcp_route_watch *watch; /* retained; NULL when no canary or shadow */
} mcp_rollout_state;
mcp_status mcp_repository_rollout(mcp_repository *r, const char *name, mcp_rollout_state *out, mcp_err *err);
/* Weights over at most two loaded versions, in percent; a primary left
 * out gets what the others leave of 100. The primary stays primary while
 * it has weight; the other version becomes the canary (at 0 it stays
 * loaded, out of routing). A version at 100 alone is promoted; the primary
 * at 100 alone ends the canary. */
mcp_status mcp_repository_set_weights(mcp_repository *r, const char *name, int n, const char *const *versions,
                                      const double *percent, mcp_err *err);
/* A loaded version becomes the shadow at `sample` (0 = shadow off);
 * spec (may be NULL) replaces the validator, window and gates. */
mcp_status mcp_repository_set_shadow(mcp_repository *r, const char *name, const char *version, double sample,
                                     const mcp_rollout_spec *spec, mcp_err *err);
/* A loaded version (canary, shadow, previous) takes all traffic; the old
 * primary is kept warm as the previous one. */
mcp_status mcp_repository_promote(mcp_repository *r, const char *name, const char *version, mcp_err *err);
/* The previous version takes all traffic at once; canary and shadow stop.
 * NOT_FOUND when none is kept warm (previous_cold in the rollout state
 * names the one to reload). */
mcp_status mcp_repository_undo(mcp_repository *r, const char *name, mcp_err *err);
/* A gate failed: the canary (or the shadow) of the experiment `watch`
 * watches stops, if it still runs; false when it had already stopped. */
bool mcp_repository_trip(mcp_repository *r, const char *name, mcp_route_watch *watch, bool canary, const char *reason);
/* Whether a replaced primary is kept warm for undo: always (budget 0), or
 * while every loaded version's bytes stay within budget. */
void mcp_repository_set_keep_previous(mcp_repository *r, bool keep, size_t memory_budget);

/* The memory policy: unloads the model if `expect` is still its primary
 * and it can be loaded again by name; its entry says why and that its next
 * request loads it again. */
mcp_status mcp_repository_evict(mcp_repository *r, const char *name, const mcp_model_version *expect, const char *reason,
                                mcp_err *err);
/* Whether the model was evicted and not loaded since. */
bool mcp_repository_evicted(mcp_repository *r, const char *name);
/* Loads an evicted model again; *loaded says whether this call did. */
mcp_status mcp_repository_cold_start(mcp_repository *r, const char *name, bool *loaded, mcp_err *err);

/* Whether version b can serve the clients of version a: the same input
 * and output names, dtypes and ranks, and no fixed dimension changed.
 * false with every difference in why (both sides named). */
bool mcp_model_io_compatible(const mcp_model_version *a, const mcp_model_version *b, char *why, size_t cap);

/* A version's lifecycle transitions (Registered, Loading, Ready, Draining,
 * Unloaded; Failed with its reason), the latest MCP_LIFECYCLE_KEPT of a
 * model, oldest first; time_ms is wall time (ms since the epoch). Returns
 * how many, or -1 for an unknown model. */
#define MCP_LIFECYCLE_KEPT 32
typedef struct mcp_lifecycle_step {
    char version[128];
    mcp_version_state state;
    int64_t time_ms;
    char reason[256];
} mcp_lifecycle_step;
int mcp_repository_lifecycle(mcp_repository *r, const char *name, mcp_lifecycle_step *out, int cap);
/* A retired version has drained and is gone (the serving layer says so). */
void mcp_repository_note_unloaded(mcp_repository *r, const char *name, const char *version);
/* The versions a model serves, current first, then a Triton policy's,
 * then the canary (at most cap; a model serves at most MCP_MAX_SERVED). */
#define MCP_MAX_SERVED 66
int mcp_repository_versions(mcp_repository *r, const char *name, char (*out)[64], int cap);
/* Snapshot of all entries; caller frees with mcp_repository_entries_free. */
int mcp_repository_index(mcp_repository *r, mcp_repository_entry **out);
void mcp_repository_entries_free(mcp_repository_entry *e, int n);
/* Number of READY models and the bytes their weights hold. */
void mcp_repository_totals(mcp_repository *r, int *ready, size_t *bytes);

#endif
