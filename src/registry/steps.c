/*
 * Declarative pre/postprocessing: scale, normalize, cast, transpose,
 * softmax (both sides) and topk (postprocess). No user code runs in the
 * server; these steps cover the usual glue around a model.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "registry/registry.h"

/* Does step s apply to the tensor with these names? A step without a
 * `tensor` applies to the only input (or output). */
static bool step_targets(const mcp_step *s, const mcp_tensor_meta *m, int n_tensors)
{
    if (!s->tensor) return n_tensors == 1;
    return strcmp(s->tensor, m->name) == 0 || (m->graph_name && strcmp(s->tensor, m->graph_name) == 0);
}

static mcp_status check_targets(const mcp_step *steps, int n, const mcp_tensor_meta *metas, int n_tensors,
                                const char *side, mcp_err *err)
{
    for (int i = 0; i < n; i++) {
        int hits = 0;
        for (int t = 0; t < n_tensors; t++) hits += step_targets(&steps[i], &metas[t], n_tensors);
        if (hits == 0) {
            if (!steps[i].tensor)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                   "%s[%d]: the model has %d %ss; say which one with `tensor:`", side, i, n_tensors,
                                   strcmp(side, "preprocess") == 0 ? "input" : "output");
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d]: tensor '%s' is not an %s of the model", side, i,
                               steps[i].tensor, strcmp(side, "preprocess") == 0 ? "input" : "output");
        }
    }
    return MCP_STATUS_OK;
}

static bool axis_of(int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

mcp_status mcp_steps_adjust_meta(mcp_model_version *v, mcp_err *err)
{
    const mcp_descriptor *d = v->desc;
    mcp_status st = check_targets(d->pre, d->n_pre, v->inputs, v->n_inputs, "preprocess", err);
    if (st == MCP_STATUS_OK) st = check_targets(d->post, d->n_post, v->outputs, v->n_outputs, "postprocess", err);
    if (st != MCP_STATUS_OK) return st;
    bool batched = d->max_batch_size > 0;
    /* Inputs: walk the preprocess steps backwards from the graph's view. */
    for (int t = 0; t < v->n_inputs; t++) {
        mcp_tensor_meta *m = &v->inputs[t];
        for (int i = d->n_pre - 1; i >= 0; i--) {
            const mcp_step *s = &d->pre[i];
            if (!step_targets(s, m, v->n_inputs)) continue;
            if (s->kind == MCP_STEP_TRANSPOSE) {
                if (s->n_perm != m->rank)
                    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "preprocess[%d]: transpose of rank %d on input '%s' of rank %d",
                                       i, s->n_perm, m->name, m->rank);
                if (batched && s->perm[0] != 0)
                    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "preprocess[%d]: transpose must keep the batch axis first", i);
                int64_t src[MCP_MAX_RANK];
                for (int k = 0; k < m->rank; k++) src[s->perm[k]] = m->dims[k];
                memcpy(m->dims, src, sizeof(int64_t) * (size_t)m->rank);
            } else if (s->kind == MCP_STEP_CAST) {
                /* What clients send is the dtype declared in `inputs:` (the
                 * cast converts it to the graph's dtype). */
                mcp_dtype declared = MCP_DTYPE_UNDEFINED;
                for (int k = 0; k < d->n_inputs; k++)
                    if (!strcmp(d->inputs[k].name, m->name)) declared = d->inputs[k].dtype;
                if (declared == MCP_DTYPE_UNDEFINED)
                    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                                       "preprocess[%d]: cast on input '%s' needs the dtype clients send, in inputs[].dtype", i, m->name);
                m->dtype = declared;
            } else if (s->kind == MCP_STEP_TOPK) {
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "preprocess[%d]: topk is a postprocess step", i);
            } else if (s->kind == MCP_STEP_NORMALIZE) {
                int ax;
                if (!axis_of(s->axis, m->rank, &ax))
                    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "preprocess[%d]: axis %lld outside input '%s' of rank %d", i,
                                       (long long)s->axis, m->name, m->rank);
            }
        }
    }
    /* Outputs: walk the postprocess steps forwards from the graph's view. */
    for (int t = 0; t < v->n_outputs; t++) {
        mcp_tensor_meta *m = &v->outputs[t];
        for (int i = 0; i < d->n_post; i++) {
            const mcp_step *s = &d->post[i];
            if (!step_targets(s, m, v->n_outputs)) continue;
            if (s->kind == MCP_STEP_TRANSPOSE) {
                if (s->n_perm != m->rank || (batched && s->perm[0] != 0))
                    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "postprocess[%d]: transpose does not fit output '%s' (rank %d%s)",
                                       i, m->name, m->rank, batched ? ", batch axis first" : "");
                int64_t dst[MCP_MAX_RANK];
                for (int k = 0; k < m->rank; k++) dst[k] = m->dims[s->perm[k]];
                memcpy(m->dims, dst, sizeof(int64_t) * (size_t)m->rank);
            } else if (s->kind == MCP_STEP_CAST) {
                m->dtype = s->dtype;
            } else if (s->kind == MCP_STEP_TOPK) {
                if (m->rank < 1 || s->k < 1)
                    return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "postprocess[%d]: topk needs an output with a class axis", i);
                m->dims[m->rank - 1] = s->k;
                m->dtype = MCP_DTYPE_STRING;
            }
        }
    }
    return MCP_STATUS_OK;
}

/* ---- runtime ---- */

/* Allocates an output tensor either in the pool (inputs) or owned (outputs). */
static mcp_status new_tensor(mcp_tensor *t, mcp_dtype dt, int rank, const int64_t *dims, mcp_pool *pool, mcp_err *err)
{
    if (!pool) return mcp_tensor_alloc(t, dt, rank, dims, err);
    if (dt == MCP_DTYPE_STRING) return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "string results in preprocessing");
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->rank = rank;
    memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
    size_t n = mcp_tensor_nbytes(t);
    t->data = mcp_pool_calloc(pool, n ? n : 1);
    return t->data ? MCP_STATUS_OK : mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory in preprocessing");
}

static void replace(mcp_tensor *old, mcp_tensor *neu, mcp_pool *pool)
{
    if (!pool) mcp_tensor_release(old);
    *old = *neu;
}

static mcp_status apply_one(const mcp_step *s, const char *side, int idx, const char *name, mcp_tensor *x, mcp_pool *pool,
                            mcp_err *err)
{
    int64_t n = mcp_tensor_numel(x);
    bool numeric = mcp_dtype_is_numeric(x->dtype);
    if (!numeric && s->kind != MCP_STEP_TRANSPOSE)
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d] on '%s': needs numbers, got %s", side, idx, name,
                           mcp_dtype_name(x->dtype));
    mcp_tensor y;
    mcp_status st;
    switch (s->kind) {
    case MCP_STEP_SCALE:
    case MCP_STEP_NORMALIZE: {
        st = new_tensor(&y, x->dtype, x->rank, x->dims, pool, err);
        if (st != MCP_STATUS_OK) return st;
        int ax = 0;
        int64_t inner = 1, dim = 1;
        if (s->kind == MCP_STEP_NORMALIZE) {
            if (!axis_of(s->axis, x->rank, &ax))
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d] on '%s': axis %lld outside rank %d", side, idx, name,
                                   (long long)s->axis, x->rank);
            dim = x->dims[ax];
            for (int k = ax + 1; k < x->rank; k++) inner *= x->dims[k];
            if (s->n_values != 1 && s->n_values != dim)
                return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d] on '%s': %d mean/std values for axis %d of size %lld",
                                   side, idx, name, s->n_values, ax, (long long)dim);
        }
        for (int64_t i = 0; i < n; i++) {
            double v = mcp_tensor_get_f64(x, i);
            if (s->kind == MCP_STEP_SCALE) {
                v *= s->factor;
            } else {
                int64_t c = s->n_values == 1 ? 0 : (i / inner) % dim;
                v = (v - s->mean[c]) / s->std[c];
            }
            mcp_tensor_set_f64(&y, i, v);
        }
        break;
    }
    case MCP_STEP_CAST:
        st = new_tensor(&y, s->dtype, x->rank, x->dims, pool, err);
        if (st != MCP_STATUS_OK) return st;
        for (int64_t i = 0; i < n; i++) {
            if (mcp_dtype_is_float(s->dtype) || mcp_dtype_is_float(x->dtype)) mcp_tensor_set_f64(&y, i, mcp_tensor_get_f64(x, i));
            else mcp_tensor_set_i64(&y, i, mcp_tensor_get_i64(x, i));
        }
        break;
    case MCP_STEP_TRANSPOSE: {
        if (s->n_perm != x->rank)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d] on '%s': transpose of rank %d on a tensor of rank %d",
                               side, idx, name, s->n_perm, x->rank);
        if (x->dtype == MCP_DTYPE_STRING)
            return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "%s[%d] on '%s': transpose of strings", side, idx, name);
        int64_t dims[MCP_MAX_RANK], xs[MCP_MAX_RANK], idxv[MCP_MAX_RANK] = {0};
        for (int k = 0; k < x->rank; k++) dims[k] = x->dims[s->perm[k]];
        st = new_tensor(&y, x->dtype, x->rank, dims, pool, err);
        if (st != MCP_STATUS_OK) return st;
        mcp_contiguous_strides(x->rank, x->dims, xs);
        size_t es = (size_t)mcp_dtype_size(x->dtype);
        for (int64_t i = 0; i < n; i++) {
            int64_t src = 0;
            for (int k = 0; k < x->rank; k++) src += idxv[k] * xs[s->perm[k]];
            memcpy((char *)y.data + (size_t)i * es, (const char *)x->data + (size_t)src * es, es);
            for (int k = x->rank - 1; k >= 0; k--) {
                if (++idxv[k] < dims[k]) break;
                idxv[k] = 0;
            }
        }
        break;
    }
    case MCP_STEP_SOFTMAX: {
        int ax;
        if (!axis_of(s->axis, x->rank, &ax))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d] on '%s': axis %lld outside rank %d", side, idx, name,
                               (long long)s->axis, x->rank);
        st = new_tensor(&y, x->dtype, x->rank, x->dims, pool, err);
        if (st != MCP_STATUS_OK) return st;
        int64_t dim = x->dims[ax], inner = 1;
        for (int k = ax + 1; k < x->rank; k++) inner *= x->dims[k];
        int64_t outer = dim ? n / (dim * inner) : 0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t in = 0; in < inner; in++) {
                int64_t base = o * dim * inner + in;
                double mx = -INFINITY, sum = 0;
                for (int64_t c = 0; c < dim; c++) mx = fmax(mx, mcp_tensor_get_f64(x, base + c * inner));
                for (int64_t c = 0; c < dim; c++) sum += exp(mcp_tensor_get_f64(x, base + c * inner) - mx);
                for (int64_t c = 0; c < dim; c++)
                    mcp_tensor_set_f64(&y, base + c * inner, exp(mcp_tensor_get_f64(x, base + c * inner) - mx) / sum);
            }
        break;
    }
    case MCP_STEP_TOPK: {
        if (pool) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d]: topk is a postprocess step", side, idx);
        if (x->rank < 1) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d] on '%s': topk needs a class axis", side, idx, name);
        int64_t classes = x->dims[x->rank - 1], k = s->k < classes ? s->k : classes;
        int64_t dims[MCP_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[x->rank - 1] = s->k;
        st = mcp_tensor_alloc(&y, MCP_DTYPE_STRING, x->rank, dims, err);
        if (st != MCP_STATUS_OK) return st;
        int64_t rows = classes ? n / classes : 0;
        int64_t *best = mcp_malloc(sizeof(int64_t) * (size_t)(k ? k : 1));
        if (!best) {
            mcp_tensor_release(&y);
            return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        for (int64_t r = 0; r < rows; r++) {
            /* Selection of the k largest, ties to the lower index. */
            int64_t got = 0;
            for (int64_t c = 0; c < classes; c++) {
                double v = mcp_tensor_get_f64(x, r * classes + c);
                int64_t pos = got;
                while (pos > 0 && mcp_tensor_get_f64(x, r * classes + best[pos - 1]) < v) pos--;
                if (pos >= k) continue;
                if (got < k) got++;
                memmove(&best[pos + 1], &best[pos], sizeof(int64_t) * (size_t)(got - 1 - pos));
                best[pos] = c;
            }
            for (int64_t j = 0; j < got; j++) {
                char text[512];
                const char *label = best[j] < s->n_labels ? s->labels[best[j]] : "";
                int len = snprintf(text, sizeof text, "%.6g:%lld:%s", mcp_tensor_get_f64(x, r * classes + best[j]),
                                   (long long)best[j], label);
                if (mcp_tensor_set_string(&y, r * s->k + j, text, (size_t)(len < (int)sizeof text ? len : (int)sizeof text - 1)) !=
                    MCP_STATUS_OK) {
                    mcp_free(best);
                    mcp_tensor_release(&y);
                    return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
                }
            }
        }
        mcp_free(best);
        break;
    }
    default:
        return mcp_err_set(err, MCP_STATUS_INTERNAL, "%s[%d]: unknown step", side, idx);
    }
    replace(x, &y, pool);
    return MCP_STATUS_OK;
}

static mcp_status apply_steps(const mcp_step *steps, int n_steps, const mcp_tensor_meta *metas, int n_metas, const char *side,
                              int n, const char *const *names, mcp_tensor *tensors, mcp_pool *pool, mcp_err *err)
{
    for (int t = 0; t < n; t++) {
        const mcp_tensor_meta *m = NULL;
        for (int k = 0; k < n_metas; k++)
            if (!strcmp(metas[k].name, names[t])) m = &metas[k];
        if (!m) continue;
        for (int i = 0; i < n_steps; i++) {
            if (!step_targets(&steps[i], m, n_metas)) continue;
            mcp_status st = apply_one(&steps[i], side, i, names[t], &tensors[t], pool, err);
            if (st != MCP_STATUS_OK) return st;
        }
    }
    return MCP_STATUS_OK;
}

mcp_status mcp_steps_apply_pre(const mcp_model_version *v, int n, const char *const *names, mcp_tensor *tensors,
                               mcp_pool *pool, mcp_err *err)
{
    return apply_steps(v->desc->pre, v->desc->n_pre, v->inputs, v->n_inputs, "preprocess", n, names, tensors, pool, err);
}

mcp_status mcp_steps_apply_post(const mcp_model_version *v, int n, const char *const *names, mcp_tensor *tensors,
                                mcp_err *err)
{
    return apply_steps(v->desc->post, v->desc->n_post, v->outputs, v->n_outputs, "postprocess", n, names, tensors, NULL, err);
}
