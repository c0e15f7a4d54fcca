/*
 * Constant folding at load (src/engine/fold.c). It lives in the engine, not
 * in graph/, because it runs kernels: each foldable node is evaluated once
 * by the reference backend and replaced by initializers.
 */
#ifndef MCP_ENGINE_FOLD_H
#define MCP_ENGINE_FOLD_H

#include "graph/graph.h"

/*
 * Evaluates every node of the top graph whose inputs are all initializers
 * (Constant nodes included, which become initializers themselves) and
 * replaces it by initializers holding its outputs, in node order, so chains
 * of such nodes fold completely. The output values keep their indices and
 * names (a folded graph output stays an output); their types become the
 * folded tensors' types.
 *
 * Skipped, and left to run as written: nodes with a subgraph attribute,
 * nondeterministic ops (RandomNormal, RandomUniform, their *Like forms,
 * Bernoulli, Multinomial, Dropout), Identity (the graph passes rewire its
 * readers without a copy), nodes producing sequences or optionals, nodes
 * the reference backend cannot resolve or fails to run (such a node fails
 * at run time with the executor's full message), and nodes whose outputs
 * together exceed both 64 KiB and the bytes of the input initializers
 * nothing else reads. The bound keeps the model's resident size from
 * growing by more than 64 KiB per folded node: a weight transform
 * (Transpose, Cast, Reshape, a scale) folds when the original weight then
 * becomes unused, and ops that expand small constants into large ones
 * (Expand, Tile, ConstantOfShape, Range) fold only while the result is
 * small. Shape arithmetic is always small. DequantizeLinear folds at any
 * size: weights no quantized operator took are needed in float anyway.
 *
 * Call after mcp_graph_infer_shapes (static output sizes let oversized
 * nodes be skipped before they run) and before mcp_graph_optimize, whose
 * unused-initializer pass then drops inputs nothing reads any more. Fails
 * only when out of memory; the graph is consistent either way.
 */
mcp_status mcp__fold_constants(mcp_graph *g, mcp_err *err);

#endif
