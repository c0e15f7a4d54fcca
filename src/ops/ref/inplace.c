/* Reference kernels that may write output 0 over an input's storage (see
 * mcp_kernel_inplace_inputs): the shape views, which then copy nothing,
 * and the pointwise float ops, whose output element i depends only on input
 * element i (and on broadcast operands, which are never the aliased one: the
 * executor aliases only inputs of the output's byte size). */
#include <string.h>

#include "ops/ref/ref.h"

unsigned mcp__ref_inplace_inputs(const mcp_kernel_def *k)
{
    static const struct {
        const char *op;
        unsigned inputs;
    } ops[] = {
        {"Reshape", 1u},   {"Flatten", 1u},     {"Squeeze", 1u},     {"Unsqueeze", 1u},
        {"Relu", 1u},      {"LeakyRelu", 1u},   {"Sigmoid", 1u},     {"Tanh", 1u},
        {"Exp", 1u},       {"Log", 1u},         {"Sqrt", 1u},        {"Neg", 1u},
        {"Abs", 1u},       {"Erf", 1u},         {"Gelu", 1u},        {"HardSigmoid", 1u},
        {"HardSwish", 1u}, {"Softplus", 1u},    {"Elu", 1u},         {"Reciprocal", 1u},
        {"Clip", 1u},      {"Add", 3u},         {"Sub", 3u},         {"Mul", 3u},
        {"Div", 3u},
    };
    if (!k || k->domain[0] != '\0') return 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(k->op_type, ops[i].op) == 0) return ops[i].inputs;
    return 0;
}
