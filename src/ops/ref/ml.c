/*
 * Reference kernels of the ai.onnx.ml domain: Binarizer-1,
 * ArrayFeatureExtractor-1, LabelEncoder-1/2/4 and TreeEnsemble-5.
 *
 * The attributes that describe a model (label maps, tree tables) are
 * validated at load by each op's check, so a malformed table fails the
 * load naming the node, and a run only checks what depends on the input
 * (feature indices against the input's width).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ref/ref.h"

#define ML_DOMAIN "ai.onnx.ml"

static bool ml_float_type(mcp_dtype d) { return mcp_dtype_is_float(d); }

/* The largest finite value of a float type. */
static double ml_type_max(mcp_dtype d)
{
    switch (d) {
    case MCP_DTYPE_FLOAT16: return 65504.0;
    case MCP_DTYPE_BFLOAT16: return 3.3895313892515355e38;
    case MCP_DTYPE_FLOAT: return FLT_MAX;
    default: return DBL_MAX;
    }
}

/* ---- Binarizer ---- */

static mcp_status run_binarizer(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is required");
    if (!mcp_dtype_is_numeric(x->dtype) || x->dtype == MCP_DTYPE_BOOL)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s", mcp_dtype_name(x->dtype));
    double th = mcp_kattr_float(ctx, "threshold", 0.0f);
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, x->dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    bool fl = ml_float_type(x->dtype);
    for (int64_t i = 0; i < n; i++) {
        bool above = fl ? mcp_tensor_get_f64(x, i) > th : (double)mcp_tensor_get_i64(x, i) > th;
        mcp_tensor_set_i64(y, i, above ? 1 : 0);
    }
    return MCP_STATUS_OK;
}

/* ---- ArrayFeatureExtractor ---- */

/* Picks entries of X's last axis: output [..., len(indices)]; a 1-D X
 * gives one row [1, len(indices)]. */
static mcp_status run_array_feature_extractor(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0), *ind = mcp_kin(ctx, 1);
    if (!x || !ind) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X' and 'Y' are required");
    if (mcp_dtype_size(x->dtype) == 0 && x->dtype != MCP_DTYPE_STRING)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s", mcp_dtype_name(x->dtype));
    if (!mcp_dtype_is_integer(ind->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'Y' must be int64, got %s", mcp_dtype_name(ind->dtype));
    if (x->rank < 1) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must have rank >= 1");
    int64_t width = x->dims[x->rank - 1], k = mcp_tensor_numel(ind);
    for (int64_t j = 0; j < k; j++) {
        int64_t v = mcp_tensor_get_i64(ind, j);
        if (v < 0 || v >= width)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "index %lld is out of range for the last dim %lld",
                             (long long)v, (long long)width);
    }
    int64_t odims[MCP_MAX_RANK];
    int orank = x->rank == 1 ? 2 : x->rank;
    if (x->rank == 1) odims[0] = 1;
    else memcpy(odims, x->dims, sizeof(int64_t) * (size_t)(x->rank - 1));
    odims[orank - 1] = k;
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, orank, odims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    /* X (2^62, 0) takes no indices but would still loop over 2^62 rows. */
    if (mcp_tensor_numel(y) == 0) return MCP_STATUS_OK;
    int64_t rows = width ? mcp_tensor_numel(x) / width : mcp_shape_numel(orank - 1, odims);
    size_t es = (size_t)mcp_dtype_size(x->dtype);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < k; j++) {
            int64_t si = r * width + mcp_tensor_get_i64(ind, j), di = r * k + j;
            if (x->dtype == MCP_DTYPE_STRING) {
                const char *s = ((char *const *)x->data)[si];
                if (mcp_tensor_set_string(y, di, s, strlen(s)) != MCP_STATUS_OK)
                    return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
            } else {
                memcpy((char *)y->data + (size_t)di * es, (const char *)x->data + (size_t)si * es, es);
            }
        }
    return MCP_STATUS_OK;
}

/* ---- LabelEncoder ---- */

/* A list of keys or values: n elements of dtype at data (float *, int64_t *,
 * char ** or a tensor attribute's storage). */
typedef struct ml_list {
    mcp_dtype dtype;
    int64_t n;
    const void *data;
} ml_list;

/* The one of <prefix>_floats / _int64s / _strings / _tensor that is set.
 * Zero or several set is an error. */
static mcp_status ml_list_get(const mcp_node *node, const char *prefix, ml_list *out, mcp_err *err)
{
    static const char *const suffix[4] = {"floats", "int64s", "strings", "tensor"};
    int found = 0;
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s_%s", prefix, suffix[i]);
        const mcp_attr *a = mcp_node_attr(node, name);
        if (!a) continue;
        found++;
        if (a->type == MCP_ATTR_FLOATS) *out = (ml_list){MCP_DTYPE_FLOAT, a->count, a->floats};
        else if (a->type == MCP_ATTR_INTS) *out = (ml_list){MCP_DTYPE_INT64, a->count, a->ints};
        else if (a->type == MCP_ATTR_STRINGS) *out = (ml_list){MCP_DTYPE_STRING, a->count, a->strings};
        else if (a->type == MCP_ATTR_TENSOR) *out = (ml_list){a->t.dtype, mcp_tensor_numel(&a->t), a->t.data};
        else return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute '%s' has the wrong kind", name);
    }
    if (found != 1)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "exactly one of the '%s_*' attributes must be set, found %d",
                           prefix, found);
    switch (out->dtype) {
    case MCP_DTYPE_FLOAT:
    case MCP_DTYPE_DOUBLE:
    case MCP_DTYPE_INT64:
    case MCP_DTYPE_INT32:
    case MCP_DTYPE_INT16:
    case MCP_DTYPE_STRING:
        return MCP_STATUS_OK;
    default:
        return mcp_err_set(err, MCP_STATUS_UNSUPPORTED, "attribute '%s_tensor' has unsupported type %s", prefix,
                           mcp_dtype_name(out->dtype));
    }
}

static mcp_status label_encoder_check(const mcp_node *node, const mcp_graph *graph, mcp_err *err)
{
    (void)graph;
    if (node->opset < 2) {
        const mcp_attr *c = mcp_node_attr(node, "classes_strings");
        if (c && c->type != MCP_ATTR_STRINGS)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'classes_strings' must be strings");
        return MCP_STATUS_OK;
    }
    ml_list keys, values;
    mcp_status st = ml_list_get(node, "keys", &keys, err);
    if (st == MCP_STATUS_OK) st = ml_list_get(node, "values", &values, err);
    if (st != MCP_STATUS_OK) return st;
    if (keys.n != values.n)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "keys (%lld) and values (%lld) differ in length",
                           (long long)keys.n, (long long)values.n);
    const mcp_attr *d = mcp_node_attr(node, "default_tensor");
    if (d && (d->type != MCP_ATTR_TENSOR || mcp_tensor_numel(&d->t) != 1 || d->t.dtype != values.dtype))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                           "attribute 'default_tensor' must hold one element of the values' type %s",
                           mcp_dtype_name(values.dtype));
    return MCP_STATUS_OK;
}

/* One key of a label map and its position in the keys list. */
typedef struct ml_key {
    union {
        double f;
        int64_t i;
        const char *s;
    } k;
    int64_t index;
} ml_key;

/* Orders keys by value, equal ones by position, so a binary search for the
 * first key not below x finds the first of equal keys: the first match
 * wins, as in the linear search this replaces. -0.0 and 0.0 are equal. */
static int ml_key_cmp_f(const void *a, const void *b)
{
    const ml_key *x = a, *y = b;
    if (x->k.f != y->k.f) return x->k.f < y->k.f ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int ml_key_cmp_i(const void *a, const void *b)
{
    const ml_key *x = a, *y = b;
    if (x->k.i != y->k.i) return x->k.i < y->k.i ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int ml_key_cmp_s(const void *a, const void *b)
{
    const ml_key *x = a, *y = b;
    int c = strcmp(x->k.s, y->k.s);
    if (c) return c;
    return (x->index > y->index) - (x->index < y->index);
}

/* A label map built once at load: the keys sorted (NaN keys left out; the
 * first one is remembered, as NaN input matches it), the values and the
 * default. Points into the node's attributes, which outlive it. */
typedef struct ml_label_state {
    ml_list keys, values, dflt;
    ml_key *sorted;
    int64_t n_sorted;
    int64_t nan_index; /* the first NaN key's position, or -1 */
    float df;
    int64_t di;
    const char *ds;
} ml_label_state;

static void label_encoder_release(void *state)
{
    ml_label_state *s = state;
    if (!s) return;
    mcp_free(s->sorted);
    mcp_free(s);
}

/* The position of the key equal to input element i of x, or -1. */
static int64_t ml_label_find(const ml_label_state *s, const mcp_tensor *x, int64_t i)
{
    ml_key want;
    int (*cmp)(const void *, const void *);
    if (s->keys.dtype == MCP_DTYPE_STRING) {
        want.k.s = ((char *const *)x->data)[i];
        cmp = ml_key_cmp_s;
    } else if (mcp_dtype_is_float(s->keys.dtype)) {
        want.k.f = mcp_tensor_get_f64(x, i);
        if (isnan(want.k.f)) return s->nan_index;
        cmp = ml_key_cmp_f;
    } else {
        want.k.i = mcp_tensor_get_i64(x, i);
        cmp = ml_key_cmp_i;
    }
    want.index = -1; /* below every position: finds the first equal key */
    int64_t lo = 0, hi = s->n_sorted;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cmp(&s->sorted[mid], &want) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == s->n_sorted) return -1;
    want.index = s->sorted[lo].index;
    return cmp(&s->sorted[lo], &want) == 0 ? want.index : -1;
}

/* Sorts the keys of s->keys into s->sorted. */
static mcp_status ml_label_sort(ml_label_state *s, mcp_err *err)
{
    const ml_list *l = &s->keys;
    s->nan_index = -1;
    s->sorted = mcp_malloc(sizeof *s->sorted * (size_t)(l->n ? l->n : 1));
    if (!s->sorted) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    bool fl = mcp_dtype_is_float(l->dtype), str = l->dtype == MCP_DTYPE_STRING;
    int64_t n = 0;
    for (int64_t k = 0; k < l->n; k++) {
        ml_key e = {.index = k};
        if (str) {
            e.k.s = ((char *const *)l->data)[k];
        } else if (fl) {
            e.k.f = mcp_elem_get_f64(l->dtype, l->data, k);
            if (isnan(e.k.f)) {
                if (s->nan_index < 0) s->nan_index = k;
                continue;
            }
        } else {
            e.k.i = mcp_elem_get_i64(l->dtype, l->data, k);
        }
        s->sorted[n++] = e;
    }
    s->n_sorted = n;
    qsort(s->sorted, (size_t)n, sizeof *s->sorted, str ? ml_key_cmp_s : fl ? ml_key_cmp_f : ml_key_cmp_i);
    return MCP_STATUS_OK;
}

static mcp_status label_encoder_prepare(const mcp_node *node, const mcp_graph *graph, void **state, mcp_err *err)
{
    *state = NULL;
    mcp_status st = label_encoder_check(node, graph, err);
    if (st != MCP_STATUS_OK) return st;
    ml_label_state *s = mcp_calloc(1, sizeof *s);
    if (!s) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    if (node->opset < 2) {
        /* LabelEncoder-1 maps strings to their class index. */
        const mcp_attr *c = mcp_node_attr(node, "classes_strings");
        s->keys = (ml_list){MCP_DTYPE_STRING, c ? c->count : 0, c ? (const void *)c->strings : NULL};
    } else {
        (void)ml_list_get(node, "keys", &s->keys, err); /* checked above */
        (void)ml_list_get(node, "values", &s->values, err);
        /* The default: default_tensor, else default_<type> of the values. */
        const mcp_attr *dt = mcp_node_attr(node, "default_tensor");
        if (dt) {
            s->dflt = (ml_list){dt->t.dtype, 1, dt->t.data};
        } else if (s->values.dtype == MCP_DTYPE_STRING) {
            s->ds = mcp_node_attr_string(node, "default_string", "_Unused");
            s->dflt = (ml_list){MCP_DTYPE_STRING, 1, &s->ds};
        } else if (mcp_dtype_is_float(s->values.dtype)) {
            s->df = mcp_node_attr_float(node, "default_float", -0.0f);
            s->dflt = (ml_list){MCP_DTYPE_FLOAT, 1, &s->df};
        } else {
            s->di = mcp_node_attr_int(node, "default_int64", -1);
            s->dflt = (ml_list){MCP_DTYPE_INT64, 1, &s->di};
        }
    }
    if ((st = ml_label_sort(s, err)) != MCP_STATUS_OK) {
        label_encoder_release(s);
        return st;
    }
    *state = s;
    return MCP_STATUS_OK;
}

/* Writes entry k of list l (k < 0: the default) to element i of y. */
static mcp_status ml_put(mcp_tensor *y, int64_t i, const ml_list *l, int64_t k, const ml_list *dflt)
{
    if (k < 0) {
        l = dflt;
        k = 0;
    }
    if (l->dtype == MCP_DTYPE_STRING) {
        const char *s = ((char *const *)l->data)[k];
        return mcp_tensor_set_string(y, i, s, strlen(s));
    }
    if (mcp_dtype_is_float(l->dtype)) mcp_tensor_set_f64(y, i, mcp_elem_get_f64(l->dtype, l->data, k));
    else mcp_tensor_set_i64(y, i, mcp_elem_get_i64(l->dtype, l->data, k));
    return MCP_STATUS_OK;
}

/* LabelEncoder-1: strings to their index in classes_strings, or int64
 * indices back to the strings. */
static mcp_status label_encoder_v1(mcp_kernel_ctx *ctx, const ml_label_state *ls, const mcp_tensor *x)
{
    const mcp_attr *c = mcp_kattr(ctx, "classes_strings");
    int64_t nc = c && c->type == MCP_ATTR_STRINGS ? c->count : 0;
    int64_t n = mcp_tensor_numel(x);
    mcp_status st = MCP_STATUS_OK;
    if (x->dtype == MCP_DTYPE_STRING) {
        mcp_tensor *y = mcp_kout_uninit(ctx, 0, MCP_DTYPE_INT64, x->rank, x->dims);
        if (!y) return MCP_STATUS_OUT_OF_MEMORY;
        int64_t dflt = mcp_kattr_int(ctx, "default_int64", -1);
        for (int64_t i = 0; i < n; i++) {
            int64_t k = ml_label_find(ls, x, i);
            ((int64_t *)y->data)[i] = k < 0 ? dflt : k;
        }
        return MCP_STATUS_OK;
    }
    if (x->dtype != MCP_DTYPE_INT64)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must be string or int64, got %s",
                         mcp_dtype_name(x->dtype));
    mcp_tensor *y = mcp_kout(ctx, 0, MCP_DTYPE_STRING, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    const char *dflt = mcp_kattr_string(ctx, "default_string", "_Unused");
    for (int64_t i = 0; st == MCP_STATUS_OK && i < n; i++) {
        int64_t v = ((const int64_t *)x->data)[i];
        const char *s = v >= 0 && v < nc ? c->strings[v] : dflt;
        st = mcp_tensor_set_string(y, i, s, strlen(s));
    }
    return st == MCP_STATUS_OK ? st : mcp_kfail(ctx, st, "out of memory");
}

static mcp_status run_label_encoder(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const ml_label_state *ls = ctx->state;
    mcp_status st;
    if (!ls) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "label map was not built at load");
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is required");
    if (ctx->opset < 2) return label_encoder_v1(ctx, ls, x);
    if (x->dtype != ls->keys.dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is %s but the keys are %s",
                         mcp_dtype_name(x->dtype), mcp_dtype_name(ls->keys.dtype));
    mcp_tensor *y = mcp_kout(ctx, 0, ls->values.dtype, x->rank, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t n = mcp_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        int64_t hit = ml_label_find(ls, x, i);
        if ((st = ml_put(y, i, &ls->values, hit, &ls->dflt)) != MCP_STATUS_OK)
            return mcp_kfail(ctx, st, "out of memory");
    }
    return MCP_STATUS_OK;
}

/* ---- TreeEnsemble ---- */

typedef enum ml_mode {
    ML_MODE_LEQ = 0,
    ML_MODE_LT,
    ML_MODE_GTE,
    ML_MODE_GT,
    ML_MODE_EQ,
    ML_MODE_NEQ,
    ML_MODE_MEMBER,
} ml_mode;

typedef enum ml_agg { ML_AGG_AVERAGE = 0, ML_AGG_SUM, ML_AGG_MIN, ML_AGG_MAX } ml_agg;

typedef enum ml_post {
    ML_POST_NONE = 0,
    ML_POST_SOFTMAX,
    ML_POST_LOGISTIC,
    ML_POST_SOFTMAX_ZERO,
    ML_POST_PROBIT,
} ml_post;

/* The most targets (outputs per row) a TreeEnsemble may declare. */
#define ML_TARGETS_MAX ((int64_t)1 << 20)

/* The tree tables as attributes give them. */
typedef struct ml_trees {
    int64_t n_nodes, n_leaves, n_roots, n_targets;
    const mcp_tensor *splits, *modes, *weights, *members;
    const int64_t *feature, *true_id, *false_id, *true_leaf, *false_leaf, *target, *roots, *missing_true;
    ml_agg agg;
    ml_post post;
} ml_trees;

static mcp_status ml_ints(const mcp_node *node, const char *name, int64_t want, bool required, const int64_t **out,
                          mcp_err *err)
{
    int64_t n = 0;
    *out = mcp_node_attr_ints(node, name, &n);
    if (!*out && !required) return MCP_STATUS_OK;
    if (!*out) return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute '%s' is required", name);
    if (want >= 0 && n != want)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute '%s' has %lld entries, expected %lld", name,
                           (long long)n, (long long)want);
    return MCP_STATUS_OK;
}

static mcp_status ml_tensor(const mcp_node *node, const char *name, int64_t want, bool required, const mcp_tensor **out,
                            mcp_err *err)
{
    const mcp_attr *a = mcp_node_attr(node, name);
    *out = NULL;
    if (!a && !required) return MCP_STATUS_OK;
    if (!a || a->type != MCP_ATTR_TENSOR)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute '%s' must be a tensor", name);
    if (want >= 0 && mcp_tensor_numel(&a->t) != want)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute '%s' has %lld entries, expected %lld", name,
                           (long long)mcp_tensor_numel(&a->t), (long long)want);
    *out = &a->t;
    return MCP_STATUS_OK;
}

/* Reads and validates the tables: every index in range, every mode known,
 * member sets present, and no tree that loops (each walk from a root
 * reaches a leaf in at most n_nodes steps, checked by a depth bound). */
static mcp_status ml_trees_get(const mcp_node *node, ml_trees *t, mcp_err *err)
{
    memset(t, 0, sizeof *t);
    mcp_status st;
    int64_t n = 0;
    if (!mcp_node_attr_ints(node, "nodes_featureids", &n))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'nodes_featureids' is required");
    t->n_nodes = n;
    if (!mcp_node_attr_ints(node, "leaf_targetids", &t->n_leaves))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'leaf_targetids' is required");
    if (!mcp_node_attr_ints(node, "tree_roots", &t->n_roots))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'tree_roots' is required");
    if ((st = ml_ints(node, "nodes_featureids", n, true, &t->feature, err)) != MCP_STATUS_OK ||
        (st = ml_ints(node, "nodes_truenodeids", n, true, &t->true_id, err)) != MCP_STATUS_OK ||
        (st = ml_ints(node, "nodes_falsenodeids", n, true, &t->false_id, err)) != MCP_STATUS_OK ||
        (st = ml_ints(node, "nodes_trueleafs", n, true, &t->true_leaf, err)) != MCP_STATUS_OK ||
        (st = ml_ints(node, "nodes_falseleafs", n, true, &t->false_leaf, err)) != MCP_STATUS_OK ||
        (st = ml_ints(node, "nodes_missing_value_tracks_true", n, false, &t->missing_true, err)) != MCP_STATUS_OK ||
        (st = ml_ints(node, "leaf_targetids", t->n_leaves, true, &t->target, err)) != MCP_STATUS_OK ||
        (st = ml_ints(node, "tree_roots", t->n_roots, true, &t->roots, err)) != MCP_STATUS_OK ||
        (st = ml_tensor(node, "nodes_splits", n, true, &t->splits, err)) != MCP_STATUS_OK ||
        (st = ml_tensor(node, "nodes_modes", n, true, &t->modes, err)) != MCP_STATUS_OK ||
        (st = ml_tensor(node, "leaf_weights", t->n_leaves, true, &t->weights, err)) != MCP_STATUS_OK ||
        (st = ml_tensor(node, "membership_values", -1, false, &t->members, err)) != MCP_STATUS_OK)
        return st;
    if (!mcp_dtype_is_float(t->splits->dtype) || !mcp_dtype_is_float(t->weights->dtype) ||
        (t->members && !mcp_dtype_is_float(t->members->dtype)))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "nodes_splits, leaf_weights and membership_values must be float tensors");
    if (!mcp_dtype_is_integer(t->modes->dtype))
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'nodes_modes' must be a uint8 tensor");
    t->n_targets = mcp_node_attr_int(node, "n_targets", -1);
    /* Each run keeps one accumulator per target and writes N x n_targets
     * values: a count beyond any real model is refused, not allocated. */
    if (t->n_targets <= 0 || t->n_targets > ML_TARGETS_MAX)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'n_targets' (%lld) must be in 1..%lld",
                           (long long)t->n_targets, (long long)ML_TARGETS_MAX);
    int64_t agg = mcp_node_attr_int(node, "aggregate_function", ML_AGG_SUM);
    int64_t post = mcp_node_attr_int(node, "post_transform", ML_POST_NONE);
    if (agg < ML_AGG_AVERAGE || agg > ML_AGG_MAX)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'aggregate_function' %lld is unknown", (long long)agg);
    if (post < ML_POST_NONE || post > ML_POST_PROBIT)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'post_transform' %lld is unknown", (long long)post);
    t->agg = (ml_agg)agg;
    t->post = (ml_post)post;
    int64_t sets = 0, nan_count = 0, nm = t->members ? mcp_tensor_numel(t->members) : 0;
    for (int64_t i = 0; i < nm; i++) nan_count += isnan(mcp_tensor_get_f64(t->members, i));
    for (int64_t i = 0; i < n; i++) {
        int64_t m = mcp_tensor_get_i64(t->modes, i);
        if (m < ML_MODE_LEQ || m > ML_MODE_MEMBER)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "node %lld has unknown mode %lld", (long long)i, (long long)m);
        sets += m == ML_MODE_MEMBER;
        if (t->feature[i] < 0)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "node %lld has negative feature id", (long long)i);
        int64_t lim_t = t->true_leaf[i] ? t->n_leaves : n, lim_f = t->false_leaf[i] ? t->n_leaves : n;
        if (t->true_id[i] < 0 || t->true_id[i] >= lim_t || t->false_id[i] < 0 || t->false_id[i] >= lim_f)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "node %lld has a branch out of range", (long long)i);
    }
    if (sets != nan_count)
        return mcp_err_set(err, MCP_STATUS_INVALID_MODEL,
                           "membership_values holds %lld NaN-ended sets for %lld BRANCH_MEMBER nodes", (long long)nan_count,
                           (long long)sets);
    for (int64_t i = 0; i < t->n_leaves; i++)
        if (t->target[i] < 0 || t->target[i] >= t->n_targets)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "leaf %lld has target %lld, n_targets is %lld", (long long)i,
                               (long long)t->target[i], (long long)t->n_targets);
    /* A root names a node (a one-leaf tree is a node whose branches name
     * the same leaf); any other root could never reach a leaf. */
    for (int64_t i = 0; i < t->n_roots; i++)
        if (t->roots[i] < 0 || t->roots[i] >= n)
            return mcp_err_set(err, MCP_STATUS_INVALID_MODEL, "attribute 'tree_roots': root %lld is not one of the %lld nodes",
                               (long long)t->roots[i], (long long)n);
    return MCP_STATUS_OK;
}

static mcp_status tree_ensemble_check(const mcp_node *node, const mcp_graph *graph, mcp_err *err)
{
    (void)graph;
    ml_trees t;
    return ml_trees_get(node, &t, err);
}

/* The validated tables, built once at load (they point into the node's
 * attributes, which outlive them), with what each run would otherwise
 * recompute: where each BRANCH_MEMBER node's set starts in
 * membership_values, and the highest feature any node reads. */
typedef struct ml_tree_state {
    ml_trees t;
    int64_t *member_start; /* per node; -1 for other modes */
    int64_t max_feature;   /* -1 when there are no nodes */
} ml_tree_state;

static void tree_ensemble_release(void *state)
{
    ml_tree_state *s = state;
    if (!s) return;
    mcp_free(s->member_start);
    mcp_free(s);
}

static mcp_status tree_ensemble_prepare(const mcp_node *node, const mcp_graph *graph, void **state, mcp_err *err)
{
    (void)graph;
    *state = NULL;
    ml_tree_state *s = mcp_calloc(1, sizeof *s);
    if (!s) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = ml_trees_get(node, &s->t, err);
    if (st != MCP_STATUS_OK) {
        mcp_free(s);
        return st;
    }
    const ml_trees *t = &s->t;
    s->member_start = mcp_malloc(sizeof(int64_t) * (size_t)(t->n_nodes ? t->n_nodes : 1));
    if (!s->member_start) {
        mcp_free(s);
        return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    /* Sets are listed in node order, each ended by NaN; ml_trees_get
     * checked there is one NaN per BRANCH_MEMBER node. */
    s->max_feature = -1;
    for (int64_t i = 0, pos = 0; i < t->n_nodes; i++) {
        s->max_feature = t->feature[i] > s->max_feature ? t->feature[i] : s->max_feature;
        s->member_start[i] = -1;
        if (mcp_tensor_get_i64(t->modes, i) != ML_MODE_MEMBER) continue;
        s->member_start[i] = pos;
        while (!isnan(mcp_tensor_get_f64(t->members, pos))) pos++;
        pos++;
    }
    *state = s;
    return MCP_STATUS_OK;
}

static bool ml_branch_true(const ml_tree_state *ts, int64_t i, double x)
{
    const ml_trees *t = &ts->t;
    if (isnan(x) && t->missing_true && t->missing_true[i]) return true;
    double s = mcp_tensor_get_f64(t->splits, i);
    switch ((ml_mode)mcp_tensor_get_i64(t->modes, i)) {
    case ML_MODE_LEQ: return x <= s;
    case ML_MODE_LT: return x < s;
    case ML_MODE_GTE: return x >= s;
    case ML_MODE_GT: return x > s;
    case ML_MODE_EQ: return x == s;
    case ML_MODE_NEQ: return x != s;
    case ML_MODE_MEMBER:
        for (int64_t p = ts->member_start[i];; p++) {
            double m = mcp_tensor_get_f64(t->members, p);
            if (isnan(m)) return false;
            if (m == x) return true;
        }
    }
    return false;
}

/* Inverse of the standard normal CDF scaled as ONNX's PROBIT:
 * sqrt(2) * erfinv(2p - 1), by Newton steps on erf. */
static double ml_probit(double p)
{
    double y = 2.0 * p - 1.0;
    if (!(y > -1.0 && y < 1.0)) return y <= -1.0 ? -INFINITY : (y >= 1.0 ? INFINITY : NAN);
    double w = -log((1.0 - y) * (1.0 + y)), x;
    /* Giles' single-precision start, refined to double by Newton. */
    if (w < 5.0) {
        w -= 2.5;
        x = 2.81022636e-08;
        x = 3.43273939e-07 + x * w;
        x = -3.5233877e-06 + x * w;
        x = -4.39150654e-06 + x * w;
        x = 0.00021858087 + x * w;
        x = -0.00125372503 + x * w;
        x = -0.00417768164 + x * w;
        x = 0.246640727 + x * w;
        x = 1.50140941 + x * w;
    } else {
        w = sqrt(w) - 3.0;
        x = -0.000200214257;
        x = 0.000100950558 + x * w;
        x = 0.00134934322 + x * w;
        x = -0.00367342844 + x * w;
        x = 0.00573950773 + x * w;
        x = -0.0076224613 + x * w;
        x = 0.00943887047 + x * w;
        x = 1.00167406 + x * w;
        x = 2.83297682 + x * w;
    }
    x *= y;
    for (int i = 0; i < 3; i++) x -= (erf(x) - y) / (1.1283791670955126 /* 2 / sqrt(pi) */ * exp(-x * x));
    return sqrt(2.0) * x;
}

static mcp_status run_tree_ensemble(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    const ml_tree_state *ts = ctx->state;
    if (!ts) return mcp_kfail(ctx, MCP_STATUS_INTERNAL, "tree tables were not built at load");
    const ml_trees t = ts->t;
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is required");
    if (!mcp_dtype_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s", mcp_dtype_name(x->dtype));
    if (x->rank != 2 && x->rank != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must be [N, F], got rank %d", x->rank);
    int64_t N = x->rank == 2 ? x->dims[0] : 1, F = x->dims[x->rank - 1];
    if (ts->max_feature >= F)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "a node reads feature %lld of %lld",
                         (long long)ts->max_feature, (long long)F);
    int64_t odims[2] = {N, t.n_targets};
    mcp_tensor *y = mcp_kout_uninit(ctx, 0, x->dtype, 2, odims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    double *acc = mcp_kscratch(ctx, 0, sizeof(double) * (size_t)t.n_targets);
    double *own = NULL;
    if (!acc) acc = own = mcp_malloc(sizeof(double) * (size_t)t.n_targets);
    if (!acc) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    /* MIN and MAX start from the output type's extremes, so a target no
     * tree reaches keeps that value. */
    double init = t.agg == ML_AGG_MIN ? ml_type_max(x->dtype) : t.agg == ML_AGG_MAX ? -ml_type_max(x->dtype) : 0.0;
    for (int64_t r = 0; r < N; r++) {
        for (int64_t k = 0; k < t.n_targets; k++) acc[k] = init;
        for (int64_t tr = 0; tr < t.n_roots; tr++) {
            int64_t i = t.roots[tr], leaf = -1;
            /* A root whose branches both name the same leaf is that leaf. */
            if (i < t.n_nodes && t.true_leaf[i] && t.false_leaf[i] && t.true_id[i] == t.false_id[i]) leaf = i;
            for (int64_t steps = 0; leaf < 0; steps++) {
                if (i >= t.n_nodes || steps > t.n_nodes) {
                    if (own) mcp_free(own);
                    return mcp_kfail(ctx, MCP_STATUS_INVALID_MODEL, "tree %lld does not reach a leaf", (long long)tr);
                }
                bool go = ml_branch_true(ts, i, mcp_tensor_get_f64(x, r * F + t.feature[i]));
                bool is_leaf = go ? t.true_leaf[i] != 0 : t.false_leaf[i] != 0;
                i = go ? t.true_id[i] : t.false_id[i];
                if (is_leaf) leaf = i;
            }
            if (leaf >= t.n_leaves) {
                if (own) mcp_free(own);
                return mcp_kfail(ctx, MCP_STATUS_INVALID_MODEL, "tree %lld ends at leaf %lld of %lld", (long long)tr,
                                 (long long)leaf, (long long)t.n_leaves);
            }
            double w = mcp_tensor_get_f64(t.weights, leaf);
            double *a = &acc[t.target[leaf]];
            switch (t.agg) {
            case ML_AGG_AVERAGE: *a += w / (double)t.n_roots; break;
            case ML_AGG_SUM: *a += w; break;
            case ML_AGG_MIN: *a = w < *a ? w : *a; break;
            case ML_AGG_MAX: *a = w > *a ? w : *a; break;
            }
        }
        double mx = -INFINITY, sum = 0.0;
        if (t.post == ML_POST_SOFTMAX || t.post == ML_POST_SOFTMAX_ZERO) {
            for (int64_t k = 0; k < t.n_targets; k++)
                if (t.post == ML_POST_SOFTMAX || acc[k] != 0.0) mx = acc[k] > mx ? acc[k] : mx;
            for (int64_t k = 0; k < t.n_targets; k++)
                if (t.post == ML_POST_SOFTMAX || acc[k] != 0.0) sum += exp(acc[k] - mx);
        }
        for (int64_t k = 0; k < t.n_targets; k++) {
            double v = acc[k];
            switch (t.post) {
            case ML_POST_NONE: break;
            case ML_POST_SOFTMAX: v = exp(v - mx) / sum; break;
            case ML_POST_SOFTMAX_ZERO: v = v == 0.0 ? 0.0 : exp(v - mx) / sum; break;
            case ML_POST_LOGISTIC: v = 1.0 / (1.0 + exp(-v)); break;
            case ML_POST_PROBIT: v = ml_probit(v); break;
            }
            mcp_tensor_set_f64(y, r * t.n_targets + k, v);
        }
    }
    if (own) mcp_free(own);
    return MCP_STATUS_OK;
}

/* ---- kernel table ---- */

const mcp_kernel_def mcp__ref_ml_kernels[] = {
    MCP_KERNEL_ENTRY(ML_DOMAIN, "Binarizer", 1, 0, run_binarizer, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY(ML_DOMAIN, "ArrayFeatureExtractor", 1, 0, run_array_feature_extractor, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY(ML_DOMAIN, "LabelEncoder", 1, 0, run_label_encoder, label_encoder_check,
                     label_encoder_prepare, label_encoder_release),
    MCP_KERNEL_ENTRY(ML_DOMAIN, "TreeEnsemble", 5, 0, run_tree_ensemble, tree_ensemble_check,
                     tree_ensemble_prepare, tree_ensemble_release),
};
const int mcp__ref_ml_kernel_count = (int)(sizeof(mcp__ref_ml_kernels) / sizeof(mcp__ref_ml_kernels[0]));
