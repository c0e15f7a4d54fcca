/* Kernel dispatch: the ISA is chosen once (the best the CPU has, or
 * MCP_LLM_ISA), and each call goes to that ISA's table entry, or to the
 * reference where the table has none. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "llm/gguf.h"
#include "llm/kernels.h"

static _Atomic int isa_current = -1;

mcp_llm_isa mcp_llm_isa_best(void)
{
    static _Atomic int best = -1;
    int b = atomic_load_explicit(&best, memory_order_relaxed);
    if (b >= 0) return (mcp_llm_isa)b;
    __builtin_cpu_init();
    b = MCP_LLM_ISA_REF;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) b = MCP_LLM_ISA_AVX2;
    if (b == MCP_LLM_ISA_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        b = MCP_LLM_ISA_AVX512;
    atomic_store_explicit(&best, b, memory_order_relaxed);
    return (mcp_llm_isa)b;
}

const char *mcp_llm_isa_name(mcp_llm_isa isa)
{
    switch (isa) {
    case MCP_LLM_ISA_AVX2: return "avx2";
    case MCP_LLM_ISA_AVX512: return "avx512";
    default: return "ref";
    }
}

bool mcp_llm_set_isa(mcp_llm_isa isa)
{
    if ((int)isa < 0 || isa > mcp_llm_isa_best()) return false;
    atomic_store_explicit(&isa_current, (int)isa, memory_order_relaxed);
    return true;
}

mcp_llm_isa mcp_llm_isa_current(void)
{
    int c = atomic_load_explicit(&isa_current, memory_order_relaxed);
    if (c >= 0) return (mcp_llm_isa)c;
    mcp_llm_isa want = mcp_llm_isa_best();
    const char *env = getenv("MCP_LLM_ISA");
    if (env) {
        for (int i = MCP_LLM_ISA_REF; i <= MCP_LLM_ISA_AVX512; i++)
            if (!strcmp(env, mcp_llm_isa_name((mcp_llm_isa)i)) && i <= (int)want) want = (mcp_llm_isa)i;
    }
    atomic_store_explicit(&isa_current, (int)want, memory_order_relaxed);
    return want;
}

static const mcp_llm_kernels *table(void)
{
    switch (mcp_llm_isa_current()) {
    case MCP_LLM_ISA_AVX512: return &mcp_llm_kernels_avx512;
    case MCP_LLM_ISA_AVX2: return &mcp_llm_kernels_avx2;
    default: return NULL;
    }
}

/* Weights a table has no product for (the K-quants), against float
 * activations: a few rows at a time dequantized into a buffer on the stack
 * (a row longer than it, one at a time into the heap), then multiplied by
 * the table's F32 product, every token at once. */
enum { DEQ_FLOATS = 16384 };

static bool gemm_dequantized(const mcp_llm_kernels *t, const mcp_llm_gemm_args *a)
{
    if (a->act != MCP_LLM_ACT_F32 || !t->gemm_has(MCP_GGML_F32, MCP_LLM_ACT_F32)) return false;
    _Alignas(64) float stack[DEQ_FLOATS];
    float *buf = stack;
    if (a->k > DEQ_FLOATS && !(buf = aligned_alloc(64, ((size_t)a->k * sizeof(float) + 63u) & ~(size_t)63u)))
        return false;
    const int64_t chunk = a->k > DEQ_FLOATS ? 1 : DEQ_FLOATS / a->k;
    for (int64_t r = a->r0; r < a->r1; r += chunk) {
        const int64_t n = a->r1 - r < chunk ? a->r1 - r : chunk;
        for (int64_t i = 0; i < n; i++)
            mcp_llm_dequantize_row(a->wtype, a->w + (size_t)(r + i) * a->row_bytes, a->k, buf + i * a->k);
        mcp_llm_gemm_args f = *a;
        f.wtype = MCP_GGML_F32;
        f.w = (const uint8_t *)buf;
        f.row_bytes = (size_t)a->k * sizeof(float);
        f.r0 = 0;
        f.r1 = n;
        f.y = a->y + r;
        t->gemm(&f);
    }
    if (buf != stack) free(buf);
    return true;
}

void mcp_llm_gemm(const mcp_llm_gemm_args *a)
{
    const mcp_llm_kernels *t = table();
    if (t && t->gemm && t->gemm_has) {
        if (t->gemm_has(a->wtype, a->act)) {
            t->gemm(a);
            return;
        }
        if (gemm_dequantized(t, a)) return;
    }
    mcp_llm_gemm_ref(a);
}

void mcp_llm_act_quantize(mcp_llm_act act, const float *x, int64_t k, void *out)
{
    if (act == MCP_LLM_ACT_F32) {
        memcpy(out, x, (size_t)k * sizeof *x);
        return;
    }
    const mcp_llm_kernels *t = table();
    if (t && t->act_quantize_q8) t->act_quantize_q8(x, k, out);
    else mcp_llm_act_quantize_q8_ref(x, k, out);
}

void mcp_llm_attend(const float *q, const mcp_llm_kv_view *kv, int64_t head_dim, int64_t n_pos, float scale, float *scratch,
                    float *out)
{
    const mcp_llm_kernels *t = table();
    if (t && t->attend) t->attend(q, kv, head_dim, n_pos, scale, scratch, out);
    else mcp_llm_attend_ref(q, kv, head_dim, n_pos, scale, scratch, out);
}

void mcp_llm_rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out)
{
    const mcp_llm_kernels *t = table();
    if (t && t->rmsnorm) t->rmsnorm(x, w, n, eps, out);
    else mcp_llm_rmsnorm_ref(x, w, n, eps, out);
}

void mcp_llm_swiglu(const float *gate, const float *up, int64_t n, float *out)
{
    const mcp_llm_kernels *t = table();
    if (t && t->swiglu) t->swiglu(gate, up, n, out);
    else mcp_llm_swiglu_ref(gate, up, n, out);
}

void mcp_llm_softmax(float *x, int64_t n)
{
    const mcp_llm_kernels *t = table();
    if (t && t->softmax) t->softmax(x, n);
    else mcp_llm_softmax_ref(x, n);
}

void mcp_llm_f32_to_f16_row(const float *x, uint16_t *out, int64_t n)
{
    const mcp_llm_kernels *t = table();
    if (t && t->f32_to_f16_row) t->f32_to_f16_row(x, out, n);
    else mcp_llm_f32_to_f16_row_ref(x, out, n);
}
