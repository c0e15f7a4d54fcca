/*
 * Support for the request and scheduler tests: a model version built by
 * hand (no repository, no src/registry/model.c), requests with distinct
 * inputs, reference single runs, completion trackers and a gate that holds
 * a worker inside a completion callback so queue states are deterministic.
 */
#ifndef MCP_TEST_SCHED_SUPPORT_H
#define MCP_TEST_SCHED_SUPPORT_H

#include <pthread.h>
#include <stdbool.h>

#include "registry/registry.h"
#include "serve/serve.h"

/*
 * The test model (opset 13), built with tests/unit/model_builder:
 *   X float [batch, 3], K int64 [batch]
 *   Y = MatMul(X, W) + B, Z = Relu(Y), K2 = K + K, C = Identity(B) (float [2])
 * Graph outputs in order Z, Y, K2, C. The version's metadata uses external
 * names that differ from the graph's and another order:
 *   inputs  x -> X [-1,3] FLOAT, k -> K [-1] INT64
 *   outputs y -> Y [-1,2], z -> Z [-1,2], k2 -> K2 [-1] INT64, c -> C [2]
 * max_batch_size 0 makes a version without a batch dimension.
 */
typedef struct tv_model {
    mcp_model_version v;
    mcp_descriptor desc;
    mcp_tensor_meta inputs[2], outputs[4];
} tv_model;

tv_model *tv_model_create(int64_t max_batch_size);
/* The demo model models/demo/digits.onnx: input [-1,64] FLOAT, outputs
 * probabilities [-1,10] FLOAT and label [-1] INT64. NULL if not found. */
tv_model *tv_digits_create(const char *path, int64_t max_batch_size);
void tv_model_free(tv_model *m);

/* A request for the test model with `rows` rows whose values depend on
 * seed (distinct seeds give distinct inputs). reversed lists k before x. */
mcp_request *tv_request(int64_t rows, int seed, bool reversed);
/* A request for the digits model. */
mcp_request *tv_digits_request(int64_t rows, int seed);

/* Compares every output of a finished request with a direct single run of
 * the same inputs on the session. Returns false with a reason. */
bool tv_check_outputs(const tv_model *m, const mcp_request *r, char *why, size_t cap);

/* Records completions: count and order, done from any thread. */
typedef struct tv_tracker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int cap;
    mcp_request **order;
} tv_tracker;

void tv_tracker_init(tv_tracker *t, int cap);
void tv_tracker_destroy(tv_tracker *t);
void tv_track_done(mcp_request *r, void *user); /* done callback, user = tracker */
/* Waits until n requests completed; false after a generous bound (a hang
 * guard, not a timing check). */
bool tv_tracker_wait(tv_tracker *t, int n);

/* A gate: a done callback that blocks the worker completing the request
 * until the test opens it. */
typedef struct tv_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool entered, open;
    tv_tracker *also; /* completion recorded here too, may be NULL */
} tv_gate;

void tv_gate_init(tv_gate *g);
void tv_gate_destroy(tv_gate *g);
void tv_gate_done(mcp_request *r, void *user);
bool tv_gate_wait_entered(tv_gate *g);
void tv_gate_open(tv_gate *g);

#endif
