/*
 * Reference kernels: control family, sequences and optionals (SequenceEmpty,
 * SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase,
 * SequenceLength, SplitToSequence, ConcatFromSequence, SequenceMap,
 * Optional, OptionalHasElement, OptionalGetElement).
 *
 * A sequence is an mcp_value of kind SEQUENCE; an empty optional is kind
 * NONE; an optional holding something is simply that value.
 */
#include <string.h>

#include "ops/ref/control_util.h"

/* Input i as a sequence, or NULL (with the error set) when it is not one. */
static const mcp_value *seq_in(mcp_kernel_ctx *ctx, int i, const char *name)
{
    const mcp_value *v = mcp__ctl_in(ctx, i);
    if (!v || v->kind != MCP_VALUE_SEQUENCE) {
        mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must be a sequence", name);
        return NULL;
    }
    return v;
}

/* Reads an optional position input. Returns false (error set) when it is
 * not a one-element integer tensor or falls outside [-n, n - 1 + extra]. */
static bool read_position(mcp_kernel_ctx *ctx, int i, int64_t n, int extra, int64_t dflt,
                          int64_t *out)
{
    const mcp_tensor *p = mcp_kin(ctx, i);
    if (!p) {
        *out = dflt;
        return true;
    }
    int64_t pos;
    if (!mcp_dtype_is_integer(p->dtype) || !mcp__ctl_scalar_i64(p, &pos)) {
        mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                  "input 'position' must be a scalar int32 or int64 tensor");
        return false;
    }
    if (pos < -n || pos > n - 1 + extra) {
        mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                  "input 'position' %lld out of range [%lld, %lld]", (long long)pos,
                  (long long)-n, (long long)(n - 1 + extra));
        return false;
    }
    *out = pos < 0 ? pos + n : pos;
    return true;
}

mcp_status mcp__ctl_sequence_empty(mcp_kernel_ctx *ctx)
{
    int64_t dt = mcp_kattr_int(ctx, "dtype", MCP_DTYPE_FLOAT);
    if (dt <= MCP_DTYPE_UNDEFINED || dt >= MCP_DTYPE_COUNT)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'dtype' (%lld) is invalid",
                         (long long)dt);
    mcp__ctl_make_seq(ctx->outputs[0], (mcp_dtype)dt);
    return MCP_STATUS_OK;
}

mcp_status mcp__ctl_sequence_construct(mcp_kernel_ctx *ctx)
{
    if (ctx->n_inputs < 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "needs at least one input tensor");
    const mcp_tensor *first = mcp_kin(ctx, 0);
    if (!first) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 0 must be a tensor");
    mcp_value *out = ctx->outputs[0];
    mcp__ctl_make_seq(out, first->dtype);
    for (int i = 0; i < ctx->n_inputs; i++) {
        const mcp_tensor *t = mcp_kin(ctx, i);
        if (!t) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input %d must be a tensor", i);
        if (t->dtype != first->dtype)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input %d has dtype %s, input 0 %s", i, mcp_dtype_name(t->dtype),
                             mcp_dtype_name(first->dtype));
        mcp_status st = mcp_value_seq_insert(out, -1, t, ctx->err);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__ctl_sequence_insert(mcp_kernel_ctx *ctx)
{
    const mcp_value *s = seq_in(ctx, 0, "input_sequence");
    if (!s) return MCP_STATUS_INVALID_ARGUMENT;
    const mcp_tensor *t = mcp_kin(ctx, 1);
    if (!t) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'tensor' is missing");
    mcp_dtype elem = s->elem_dtype;
    if (s->seq_len > 0) elem = s->seq[0].dtype;
    if (elem != MCP_DTYPE_UNDEFINED && t->dtype != elem)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'tensor' has dtype %s, the sequence holds %s",
                         mcp_dtype_name(t->dtype), mcp_dtype_name(elem));
    int64_t pos;
    if (!read_position(ctx, 2, s->seq_len, 1, s->seq_len, &pos)) return MCP_STATUS_INVALID_ARGUMENT;

    mcp_value *out = ctx->outputs[0];
    mcp__ctl_make_seq(out, t->dtype);
    for (int64_t i = 0; i <= s->seq_len; i++) {
        const mcp_tensor *src = i == pos ? t : &s->seq[i < pos ? i : i - 1];
        mcp_status st = mcp_value_seq_insert(out, -1, src, ctx->err);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__ctl_sequence_at(mcp_kernel_ctx *ctx)
{
    const mcp_value *s = seq_in(ctx, 0, "input_sequence");
    if (!s) return MCP_STATUS_INVALID_ARGUMENT;
    if (!mcp_kin(ctx, 1))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'position' is missing");
    int64_t pos;
    if (!read_position(ctx, 1, s->seq_len, 0, 0, &pos)) return MCP_STATUS_INVALID_ARGUMENT;
    mcp_value *out = ctx->outputs[0];
    mcp_value_clear(out);
    out->kind = MCP_VALUE_TENSOR;
    return mcp_tensor_copy(&out->tensor, &s->seq[pos], ctx->err);
}

mcp_status mcp__ctl_sequence_erase(mcp_kernel_ctx *ctx)
{
    const mcp_value *s = seq_in(ctx, 0, "input_sequence");
    if (!s) return MCP_STATUS_INVALID_ARGUMENT;
    if (s->seq_len == 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'input_sequence' is empty, nothing to erase");
    int64_t pos;
    if (!read_position(ctx, 1, s->seq_len, 0, s->seq_len - 1, &pos))
        return MCP_STATUS_INVALID_ARGUMENT;
    mcp_value *out = ctx->outputs[0];
    mcp__ctl_make_seq(out, s->elem_dtype != MCP_DTYPE_UNDEFINED ? s->elem_dtype : s->seq[0].dtype);
    for (int64_t i = 0; i < s->seq_len; i++) {
        if (i == pos) continue;
        mcp_status st = mcp_value_seq_insert(out, -1, &s->seq[i], ctx->err);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__ctl_sequence_length(mcp_kernel_ctx *ctx)
{
    const mcp_value *s = seq_in(ctx, 0, "input_sequence");
    if (!s) return MCP_STATUS_INVALID_ARGUMENT;
    mcp_tensor *out = mcp_kout(ctx, 0, MCP_DTYPE_INT64, 0, NULL);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    *(int64_t *)out->data = s->seq_len;
    return MCP_STATUS_OK;
}

/* Appends x[start : start + len] along axis to out (dropping the axis when
 * squeeze is set, which needs len == 1). */
static mcp_status push_chunk(mcp_kernel_ctx *ctx, mcp_value *out, const mcp_tensor *x, int axis,
                             int64_t start, int64_t len, bool squeeze)
{
    int64_t dims[MCP_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i == axis) {
            if (!squeeze) dims[r++] = len;
        } else {
            dims[r++] = x->dims[i];
        }
    }
    mcp_tensor t;
    mcp_status st = mcp_tensor_alloc(&t, x->dtype, r, dims, ctx->err);
    if (st != MCP_STATUS_OK) return st;
    int64_t outer = mcp_shape_numel(axis, x->dims);
    int64_t inner = mcp_shape_numel(x->rank - axis - 1, x->dims + axis + 1);
    int64_t total = x->dims[axis];
    for (int64_t o = 0; o < outer && st == MCP_STATUS_OK; o++)
        st = mcp__ctl_copy_elems(&t, o * len * inner, x, (o * total + start) * inner, len * inner);
    if (st == MCP_STATUS_OK) st = mcp_value_seq_push_move(out, &t, ctx->err);
    if (st != MCP_STATUS_OK) {
        mcp_tensor_release(&t);
        return mcp_kfail(ctx, st, "out of memory building the output sequence");
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__ctl_split_to_sequence(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is missing");
    int axis;
    int64_t axis_attr = mcp_kattr_int(ctx, "axis", 0);
    if (x->rank < 1 || !mcp_axis_normalize(axis_attr, x->rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' (%lld) out of range for input rank %d",
                         (long long)axis_attr, x->rank);
    int64_t keepdims = mcp_kattr_int(ctx, "keepdims", 1);
    int64_t dim = x->dims[axis];
    const mcp_tensor *split = mcp_kin(ctx, 1);
    mcp_value *out = ctx->outputs[0];
    mcp__ctl_make_seq(out, x->dtype);

    if (!split) {
        for (int64_t i = 0; i < dim; i++) {
            mcp_status st = push_chunk(ctx, out, x, axis, i, 1, keepdims == 0);
            if (st != MCP_STATUS_OK) return st;
        }
        return MCP_STATUS_OK;
    }
    if (!mcp_dtype_is_integer(split->dtype) || split->rank > 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'split' must be an integer scalar or 1-D tensor");
    if (split->rank == 0) {
        int64_t k = mcp_tensor_get_i64(split, 0);
        if (k <= 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'split' (%lld) must be positive", (long long)k);
        for (int64_t start = 0; start < dim; start += k) {
            int64_t len = dim - start < k ? dim - start : k;
            mcp_status st = push_chunk(ctx, out, x, axis, start, len, false);
            if (st != MCP_STATUS_OK) return st;
        }
        return MCP_STATUS_OK;
    }
    int64_t n = split->dims[0], sum = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t len = mcp_tensor_get_i64(split, i);
        if (len < 0 || len > dim - sum)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'split' sizes must be non-negative and sum to %lld",
                             (long long)dim);
        sum += len;
    }
    if (sum != dim)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'split' sizes sum to %lld, axis %d has %lld", (long long)sum,
                         axis, (long long)dim);
    for (int64_t i = 0, start = 0; i < n; i++) {
        int64_t len = mcp_tensor_get_i64(split, i);
        mcp_status st = push_chunk(ctx, out, x, axis, start, len, false);
        if (st != MCP_STATUS_OK) return st;
        start += len;
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__ctl_concat_from_sequence(mcp_kernel_ctx *ctx)
{
    const mcp_value *s = seq_in(ctx, 0, "input_sequence");
    if (!s) return MCP_STATUS_INVALID_ARGUMENT;
    const mcp_attr *axis_a = mcp_kattr(ctx, "axis");
    if (!axis_a) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'axis' is missing");
    if (s->seq_len == 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input_sequence' is empty");
    bool new_axis = mcp_kattr_int(ctx, "new_axis", 0) != 0;
    const mcp_tensor *t0 = &s->seq[0];
    int rank = t0->rank;
    int out_rank = rank + (new_axis ? 1 : 0);
    if (out_rank > MCP_MAX_RANK || out_rank < 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "elements of rank %d cannot be concatenated%s", rank,
                         new_axis ? "" : " (scalars need new_axis=1)");
    int axis;
    if (!mcp_axis_normalize(axis_a->i, out_rank, &axis))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'axis' (%lld) out of range for rank %d", (long long)axis_a->i,
                         out_rank);

    int64_t total = 0;
    for (int64_t e = 0; e < s->seq_len; e++) {
        const mcp_tensor *t = &s->seq[e];
        if (t->dtype != t0->dtype || t->rank != rank)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "sequence element %lld differs in dtype or rank from element 0",
                             (long long)e);
        for (int i = 0; i < rank; i++)
            if ((new_axis || i != axis) && t->dims[i] != t0->dims[i])
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "sequence element %lld has dim %d = %lld, element 0 %lld",
                                 (long long)e, i, (long long)t->dims[i], (long long)t0->dims[i]);
        total += new_axis ? 1 : t->dims[axis];
    }

    int64_t dims[MCP_MAX_RANK];
    for (int i = 0, r = 0; i < out_rank; i++) {
        if (i == axis)
            dims[i] = total;
        else
            dims[i] = t0->dims[r];
        if (i != axis || !new_axis) r++;
    }
    mcp_tensor *out = mcp_kout(ctx, 0, t0->dtype, out_rank, dims);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    /* Element chunk per outer index: (its axis extent) * inner. */
    int64_t outer = mcp_shape_numel(axis, dims);
    int64_t inner = mcp_shape_numel(out_rank - axis - 1, dims + axis + 1);
    int64_t row = total * inner;
    int64_t off = 0;
    for (int64_t e = 0; e < s->seq_len; e++) {
        const mcp_tensor *t = &s->seq[e];
        int64_t chunk = (new_axis ? 1 : t->dims[axis]) * inner;
        for (int64_t o = 0; o < outer; o++) {
            mcp_status st = mcp__ctl_copy_elems(out, o * row + off, t, o * chunk, chunk);
            if (st != MCP_STATUS_OK) return mcp_kfail(ctx, st, "out of memory copying strings");
        }
        off += chunk;
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__ctl_sequence_map(mcp_kernel_ctx *ctx)
{
    const mcp_attr *a = mcp_kattr(ctx, "body");
    const mcp_graph *body = (a && a->type == MCP_ATTR_GRAPH) ? a->g : NULL;
    if (!body) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'body' is missing");
    const mcp_value *s0 = seq_in(ctx, 0, "input_sequence");
    if (!s0) return MCP_STATUS_INVALID_ARGUMENT;
    if (body->n_inputs != ctx->n_inputs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'body' takes %d inputs, the node has %d", body->n_inputs,
                         ctx->n_inputs);
    if (body->n_outputs < ctx->n_outputs)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'body' has %d outputs, the node %d", body->n_outputs,
                         ctx->n_outputs);
    int64_t n = s0->seq_len;
    for (int i = 1; i < ctx->n_inputs; i++) {
        const mcp_value *v = mcp__ctl_in(ctx, i);
        if (!v)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input %d is missing", i);
        if (v->kind == MCP_VALUE_SEQUENCE && v->seq_len != n)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input %d has %lld elements, 'input_sequence' %lld", i,
                             (long long)v->seq_len, (long long)n);
        if (v->kind != MCP_VALUE_SEQUENCE && v->kind != MCP_VALUE_TENSOR)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input %d must be a tensor or a sequence", i);
    }
    for (int k = 0; k < ctx->n_outputs; k++) {
        mcp_dtype dt = MCP_DTYPE_UNDEFINED;
        int ov = body->outputs[k];
        if (ov >= 0 && ov < body->n_values) dt = body->values[ov].type.dtype;
        mcp__ctl_make_seq(ctx->outputs[k], dt != MCP_DTYPE_UNDEFINED ? dt : MCP_DTYPE_FLOAT);
    }

    int nin = ctx->n_inputs, nout = body->n_outputs;
    /* views[i]: element views of sequence inputs; res: body results. */
    mcp_value *views = mcp_calloc((size_t)nin, sizeof(mcp_value));
    mcp_value **in_ptrs = mcp_calloc((size_t)nin, sizeof(mcp_value *));
    mcp_value *res = mcp_calloc((size_t)(nout > 0 ? nout : 1), sizeof(mcp_value));
    mcp_value **res_ptrs = mcp_calloc((size_t)(nout > 0 ? nout : 1), sizeof(mcp_value *));
    mcp_status st = MCP_STATUS_OK;
    if (!views || !in_ptrs || !res || !res_ptrs)
        st = mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int k = 0; st == MCP_STATUS_OK && k < nout; k++) res_ptrs[k] = &res[k];

    for (int64_t e = 0; st == MCP_STATUS_OK && e < n; e++) {
        for (int i = 0; i < nin; i++) {
            mcp_value *v = ctx->inputs[i];
            if (v->kind == MCP_VALUE_SEQUENCE) {
                /* A borrowed view of element e. */
                mcp__ctl_forget(&views[i]);
                views[i].tensor = v->seq[e];
                views[i].tensor.owns_data = false;
                in_ptrs[i] = &views[i];
            } else {
                in_ptrs[i] = v;
            }
        }
        st = mcp_kernel_run_subgraph(ctx, body, nin, in_ptrs, res_ptrs);
        for (int k = 0; st == MCP_STATUS_OK && k < ctx->n_outputs; k++) {
            mcp_value *out = ctx->outputs[k];
            if (res[k].kind != MCP_VALUE_TENSOR) {
                st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "body output %d must be a tensor",
                               k);
                break;
            }
            if (out->seq_len == 0) {
                out->elem_dtype = res[k].tensor.dtype;
            } else if (res[k].tensor.dtype != out->elem_dtype) {
                st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                               "body output %d changes dtype between iterations", k);
                break;
            }
            st = mcp_value_seq_push_move(out, &res[k].tensor, ctx->err);
        }
        for (int k = 0; k < nout; k++) mcp_value_clear(&res[k]);
    }
    if (views)
        for (int i = 0; i < nin; i++) mcp__ctl_forget(&views[i]);
    mcp_free(views);
    mcp_free(in_ptrs);
    mcp_free(res);
    mcp_free(res_ptrs);
    return st;
}

mcp_status mcp__ctl_optional(mcp_kernel_ctx *ctx)
{
    const mcp_value *in = mcp__ctl_in(ctx, 0);
    mcp_value *out = ctx->outputs[0];
    if (in) return mcp_value_copy(out, in, ctx->err);
    const mcp_attr *type = mcp_kattr(ctx, "type");
    if (!type || type->type != MCP_ATTR_TYPE_PROTO)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "needs input 'input' or attribute 'type'");
    mcp_value_clear(out);
    out->kind = MCP_VALUE_NONE;
    out->elem_dtype = type->tp_dtype;
    out->elem_is_sequence = type->tp_kind == MCP_VALUE_SEQUENCE;
    return MCP_STATUS_OK;
}

mcp_status mcp__ctl_optional_has_element(mcp_kernel_ctx *ctx)
{
    const mcp_value *in = mcp__ctl_in(ctx, 0);
    mcp_tensor *out = mcp_kout(ctx, 0, MCP_DTYPE_BOOL, 0, NULL);
    if (!out) return MCP_STATUS_OUT_OF_MEMORY;
    *(uint8_t *)out->data = (in && in->kind != MCP_VALUE_NONE) ? 1 : 0;
    return MCP_STATUS_OK;
}

mcp_status mcp__ctl_optional_get_element(mcp_kernel_ctx *ctx)
{
    const mcp_value *in = mcp__ctl_in(ctx, 0);
    if (!in || in->kind == MCP_VALUE_NONE)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is an empty optional");
    return mcp_value_copy(ctx->outputs[0], in, ctx->err);
}
