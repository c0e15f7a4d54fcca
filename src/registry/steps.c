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

/* What a step needs of the tensor it applies to, checked at load so that a
 * descriptor that cannot work fails there and not at the first request.
 * Dimensions unknown until run time (-1) are checked per request. */
static mcp_status check_fit(const mcp_step *s, const mcp_tensor_meta *m, const char *side, int i, mcp_err *err)
{
    if (s->kind != MCP_STEP_TRANSPOSE && (m->dtype == MCP_DTYPE_STRING || m->dtype == MCP_DTYPE_BOOL))
        return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d]: '%s' holds %s; this step needs numbers", side, i, m->name,
                           mcp_dtype_name(m->dtype));
    int ax;
    switch (s->kind) {
    case MCP_STEP_NORMALIZE:
        if (!axis_of(s->axis, m->rank, &ax))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d]: normalize axis %lld outside '%s' of rank %d", side, i,
                               (long long)s->axis, m->name, m->rank);
        if (s->n_values != 1 && m->dims[ax] >= 0 && s->n_values != m->dims[ax])
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT,
                               "%s[%d]: %d mean/std values for axis %d of '%s', which has %lld entries", side, i, s->n_values, ax,
                               m->name, (long long)m->dims[ax]);
        break;
    case MCP_STEP_SOFTMAX:
        if (!axis_of(s->axis, m->rank, &ax))
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d]: softmax axis %lld outside '%s' of rank %d", side, i,
                               (long long)s->axis, m->name, m->rank);
        break;
    case MCP_STEP_CAST:
        if (s->dtype == MCP_DTYPE_STRING || s->dtype == MCP_DTYPE_UNDEFINED || mcp_dtype_size(s->dtype) <= 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d]: cast to %s is not supported", side, i,
                               mcp_dtype_name(s->dtype));
        break;
    case MCP_STEP_TOPK: {
        int64_t classes = m->rank >= 1 ? m->dims[m->rank - 1] : 0;
        if (m->rank < 1)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d]: topk needs an output with a class axis", side, i);
        if (classes >= 0 && s->k > classes)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d]: topk k = %lld but output '%s' has %lld classes", side,
                               i, (long long)s->k, m->name, (long long)classes);
        if (s->n_labels && classes >= 0 && s->n_labels < classes)
            return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "%s[%d]: the labels file has %d lines for %lld classes", side, i,
                               s->n_labels, (long long)classes);
        break;
    }
    case MCP_STEP_SCALE:
    case MCP_STEP_TRANSPOSE: break;
    }
    return MCP_STATUS_OK;
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
            /* Scale, normalize and softmax keep the shape: m is what they
             * receive here as well as what they produce. */
            if (s->kind != MCP_STEP_CAST && s->kind != MCP_STEP_TRANSPOSE && (st = check_fit(s, m, "preprocess", i, err)))
                return st;
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
            if ((st = check_fit(s, m, "postprocess", i, err))) return st;
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
                m->dims[m->rank - 1] = m->dims[m->rank - 1] >= 0 ? s->k : -1;
                m->dtype = MCP_DTYPE_STRING;
            }
        }
    }
    return MCP_STATUS_OK;
}

/* ---- runtime ---- */

/* The cast step saturates: a value beyond the target integer type's range
 * becomes its minimum or maximum, NaN becomes 0, and a float target takes
 * the nearest value (infinity past its range). Never wraps, whatever the
 * source type (unlike the ONNX Cast op, which the engine implements as the
 * spec says). */
static void int_range(mcp_dtype d, int64_t *lo, uint64_t *hi)
{
    switch (d) {
    case MCP_DTYPE_INT8: *lo = INT8_MIN, *hi = INT8_MAX; break;
    case MCP_DTYPE_INT16: *lo = INT16_MIN, *hi = INT16_MAX; break;
    case MCP_DTYPE_INT32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    case MCP_DTYPE_UINT8: *lo = 0, *hi = UINT8_MAX; break;
    case MCP_DTYPE_UINT16: *lo = 0, *hi = UINT16_MAX; break;
    case MCP_DTYPE_UINT32: *lo = 0, *hi = UINT32_MAX; break;
    case MCP_DTYPE_UINT64: *lo = 0, *hi = UINT64_MAX; break;
    case MCP_DTYPE_BOOL: *lo = 0, *hi = 1; break;
    default: *lo = INT64_MIN, *hi = INT64_MAX; break;
    }
}

static void cast_saturating(const mcp_tensor *x, int64_t i, mcp_tensor *y)
{
    mcp_dtype to = y->dtype;
    if (mcp_dtype_is_float(to)) {
        mcp_tensor_set_f64(y, i, mcp_tensor_get_f64(x, i));
        return;
    }
    int64_t lo;
    uint64_t hi;
    int_range(to, &lo, &hi);
    bool neg;
    uint64_t mag; /* |value|, saturated to the uint64 range */
    if (mcp_dtype_is_float(x->dtype)) {
        double v = mcp_tensor_get_f64(x, i);
        if (v != v) v = 0;
        neg = v < 0;
        double a = neg ? -v : v;
        mag = a >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)a;
    } else if (x->dtype == MCP_DTYPE_UINT64) {
        neg = false;
        mag = ((const uint64_t *)x->data)[i];
    } else {
        int64_t v = mcp_tensor_get_i64(x, i);
        neg = v < 0;
        mag = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    }
    if (to == MCP_DTYPE_BOOL) {
        mcp_tensor_set_i64(y, i, mag != 0);
    } else if (to == MCP_DTYPE_UINT64) {
        ((uint64_t *)y->data)[i] = neg ? 0 : mag;
    } else if (neg) {
        uint64_t lim = (uint64_t)0 - (uint64_t)lo; /* |lo| */
        mcp_tensor_set_i64(y, i, lo == 0 ? 0 : mag >= lim ? lo : -(int64_t)mag);
    } else {
        mcp_tensor_set_i64(y, i, mag >= hi ? (int64_t)hi : (int64_t)mag);
    }
}

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
        for (int64_t i = 0; i < n; i++) cast_saturating(x, i, &y);
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
        /* Never more entries than classes: k is capped by the output. */
        int64_t classes = x->dims[x->rank - 1], k = s->k < classes ? s->k : classes;
        int64_t dims[MCP_MAX_RANK];
        memcpy(dims, x->dims, sizeof dims);
        dims[x->rank - 1] = k;
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
                if (mcp_tensor_set_string(&y, r * k + j, text, (size_t)(len < (int)sizeof text ? len : (int)sizeof text - 1)) !=
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
