/*
 * Load-time type and shape inference over our IR.
 *
 * The pass walks each graph in node order (the importer guarantees that a
 * node's inputs are defined before it) and, for ops of the default domain it
 * knows and for the internal ops the graph passes create, computes the dtype
 * and shape each output must have. What it computes is merged into the
 * value's type: declared parts (value_info, graph outputs) are kept,
 * unknown parts are filled in, and a static dimension or dtype that
 * contradicts the declaration fails the load with the node's name. Subgraphs
 * are inferred when their owning node is reached, after the values they
 * capture from the enclosing graph have been refreshed.
 *
 * Inference is conservative: when a rule needs a constant that is not there,
 * a static size that is unknown, or sees a malformed node, it leaves the
 * output (or the affected dimension) unknown instead of guessing. Only
 * definite contradictions between static facts are errors.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"

/* Static sizes above this are treated as unknown in window arithmetic, which
 * keeps every intermediate product of kernel, stride and dilation in int64. */
#define WINDOW_SIZE_MAX ((int64_t)1 << 30)
/* Slice ends at or above this select "to the end" of a dimension of unknown
 * size; exporters write INT32_MAX or INT64_MAX for that. */
#define SLICE_END_OPEN ((int64_t)INT32_MAX)

/* One dimension: a static size (v >= 0) or unknown (v < 0), optionally named
 * by a symbol. Symbols are borrowed from the graph's value types and live as
 * long as the value that holds them. */
typedef struct sdim {
    int64_t v;
    const char *sym;
} sdim;

/* What the pass knows about a tensor: dtype (UNDEFINED if unknown) and shape
 * (rank < 0 if unknown). */
typedef struct stype {
    mcp_dtype dtype;
    int rank;
    sdim d[MCP_MAX_RANK];
} stype;

/*
 * The value of a small integer tensor (rank 0 or 1) when the pass can tell
 * it, element by element: shape computations such as
 * Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) are followed
 * through this. An element is a known integer, or unknown, then possibly
 * named by a symbol and traced to the dim it was read from (src_value /
 * src_dim: Shape of that value, in the same graph).
 */
typedef struct pelem {
    int64_t v;
    bool known;
    const char *sym;
    int src_value, src_dim;
} pelem;

typedef struct pval {
    int n; /* element count */
    bool scalar;
    pelem e[MCP_MAX_RANK];
} pval;

typedef struct ictx {
    mcp_graph *g;
    const mcp_node *n;
    mcp_err *err;
    /* Per graph, indexed by value: what is known of small integer values
     * computed by nodes (NULL: nothing). Owned by infer_graph. */
    pval **pv;
} ictx;

typedef mcp_status (*infer_fn)(ictx *c);

static mcp_status infer_graph(mcp_graph *g, mcp_err *err);

/* ---- small helpers ---- */

static const sdim DIM_UNKNOWN = {-1, NULL};

static sdim dim_static(int64_t v)
{
    sdim d = {v, NULL};
    return d;
}

static bool dim_known(sdim d) { return d.v >= 0; }

static void st_unknown(stype *t, mcp_dtype dtype)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->rank = -1;
}

/* Rank r with every dim unknown; an invalid rank gives an unknown shape. */
static void st_rank(stype *t, mcp_dtype dtype, int r)
{
    st_unknown(t, dtype);
    if (r < 0 || r > MCP_MAX_RANK) return;
    t->rank = r;
    for (int i = 0; i < r; i++) t->d[i] = DIM_UNKNOWN;
}

static bool mul_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0) return false;
    if (b != 0 && a > INT64_MAX / b) return false;
    *out = a * b;
    return true;
}

static bool add_i64(int64_t a, int64_t b, int64_t *out)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return false;
    *out = a + b;
    return true;
}

/* Product of two dims: a static 1 keeps the other's symbol. */
static sdim dim_mul(sdim a, sdim b)
{
    if (a.v == 1) return b;
    if (b.v == 1) return a;
    if (a.v == 0 || b.v == 0) return dim_static(0);
    int64_t p;
    if (dim_known(a) && dim_known(b) && mul_i64(a.v, b.v, &p)) return dim_static(p);
    return DIM_UNKNOWN;
}

static bool same_sym(sdim a, sdim b) { return a.sym && b.sym && strcmp(a.sym, b.sym) == 0; }

/* Two dims that must be equal: static wins, then a symbol. Returns false when
 * both are static and differ. */
static bool dim_unify(sdim a, sdim b, sdim *out)
{
    if (dim_known(a) && dim_known(b) && a.v != b.v) return false;
    if (dim_known(a)) *out = a;
    else if (dim_known(b)) *out = b;
    else if (a.sym) *out = a;
    else *out = b;
    return true;
}

/* Numpy broadcasting of one dim pair. A static size other than 1 decides
 * (the other side must be that size or 1); two different symbols could
 * still be 1 or equal, so they give unknown. */
static bool dim_broadcast(sdim a, sdim b, sdim *out)
{
    if (dim_known(a) && dim_known(b)) {
        if (a.v == b.v || b.v == 1) *out = a;
        else if (a.v == 1) *out = b;
        else return false;
        return true;
    }
    if (dim_known(a)) *out = a.v == 1 ? b : a;
    else if (dim_known(b)) *out = b.v == 1 ? a : b;
    else *out = same_sym(a, b) ? a : DIM_UNKNOWN;
    return true;
}

static bool dtype_valid(int64_t dt) { return dt > 0 && dt < MCP_DTYPE_COUNT; }

/* Formats a type as "float32[N,3,?]" for messages. */
static const char *fmt_type(mcp_dtype dtype, int rank, const int64_t *dims, char *const *syms,
                            char *buf, size_t cap)
{
    size_t off = (size_t)snprintf(buf, cap, "%s", dtype ? mcp_dtype_name(dtype) : "?");
    if (off >= cap) return buf;
    if (rank < 0) {
        snprintf(buf + off, cap - off, "[rank ?]");
        return buf;
    }
    off += (size_t)snprintf(buf + off, cap - off, "[");
    for (int i = 0; i < rank && off < cap; i++) {
        const char *sep = i ? "," : "";
        if (dims[i] >= 0) off += (size_t)snprintf(buf + off, cap - off, "%s%lld", sep, (long long)dims[i]);
        else off += (size_t)snprintf(buf + off, cap - off, "%s%s", sep, syms && syms[i] ? syms[i] : "?");
    }
    if (off < cap) snprintf(buf + off, cap - off, "]");
    return buf;
}

static const char *fmt_stype(const stype *t, char *buf, size_t cap)
{
    int64_t dims[MCP_MAX_RANK] = {0};
    char *syms[MCP_MAX_RANK] = {NULL};
    for (int i = 0; i < t->rank; i++) {
        dims[i] = t->d[i].v;
        syms[i] = (char *)t->d[i].sym;
    }
    return fmt_type(t->dtype, t->rank, dims, syms, buf, cap);
}

static void stype_from_type(const mcp_type *src, stype *t)
{
    st_unknown(t, src->dtype);
    if (src->rank < 0 || src->rank > MCP_MAX_RANK) return;
    t->rank = src->rank;
    for (int i = 0; i < src->rank; i++) {
        t->d[i].v = src->dims[i] >= 0 ? src->dims[i] : -1;
        t->d[i].sym = src->dims[i] >= 0 ? NULL : src->dim_params[i];
    }
}

static void type_release_dims(mcp_type *t)
{
    for (int i = 0; i < MCP_MAX_RANK; i++) {
        mcp_free(t->dim_params[i]);
        t->dim_params[i] = NULL;
    }
}

/*
 * Merges what is known from t into the value type *dst, keeping what *dst
 * already says. Sets *conflict (and leaves *dst alone) when a dtype, rank or
 * static dim of the two contradict each other.
 */
static mcp_status merge_type(mcp_type *dst, const stype *t, bool *conflict)
{
    *conflict = false;
    mcp_type nt;
    memset(&nt, 0, sizeof nt);
    nt.kind = dst->kind;
    nt.is_optional = dst->is_optional;
    if (dst->dtype && t->dtype && dst->dtype != t->dtype) *conflict = true;
    nt.dtype = dst->dtype ? dst->dtype : t->dtype;
    if (dst->rank >= 0 && t->rank >= 0 && dst->rank != t->rank) *conflict = true;
    if (*conflict) return MCP_STATUS_OK;
    nt.rank = dst->rank >= 0 ? dst->rank : t->rank;
    for (int i = 0; i < nt.rank; i++) {
        sdim dd = DIM_UNKNOWN, td = DIM_UNKNOWN;
        if (dst->rank >= 0) {
            dd.v = dst->dims[i] >= 0 ? dst->dims[i] : -1;
            dd.sym = dst->dims[i] >= 0 ? NULL : dst->dim_params[i];
        }
        if (t->rank >= 0) td = t->d[i];
        sdim r;
        if (!dim_unify(dd, td, &r)) {
            *conflict = true;
            type_release_dims(&nt);
            return MCP_STATUS_OK;
        }
        nt.dims[i] = r.v;
        if (r.sym) {
            nt.dim_params[i] = mcp_strdup(r.sym);
            if (!nt.dim_params[i]) {
                type_release_dims(&nt);
                return MCP_STATUS_OUT_OF_MEMORY;
            }
        }
    }
    type_release_dims(dst);
    *dst = nt;
    return MCP_STATUS_OK;
}

static mcp_status type_copy(mcp_type *dst, const mcp_type *src)
{
    mcp_type nt = *src;
    for (int i = 0; i < MCP_MAX_RANK; i++) {
        nt.dim_params[i] = NULL;
        if (src->dim_params[i] && !(nt.dim_params[i] = mcp_strdup(src->dim_params[i]))) {
            type_release_dims(&nt);
            return MCP_STATUS_OUT_OF_MEMORY;
        }
    }
    type_release_dims(dst);
    *dst = nt;
    return MCP_STATUS_OK;
}

static bool type_is_unknown(const mcp_type *t)
{
    return t->kind == MCP_VALUE_TENSOR && !t->is_optional && t->dtype == MCP_DTYPE_UNDEFINED && t->rank < 0;
}

/* ---- node access ---- */

static mcp_status fail(ictx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static mcp_status fail(ictx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mcp_err_vset(c->err, MCP_STATUS_INVALID_MODEL, fmt, ap);
    va_end(ap);
    mcp_err_prefix(c->err, "node '%s' (%s)", c->n->name, c->n->op_type);
    return MCP_STATUS_INVALID_MODEL;
}

/* Attribute `name`, an element type number (def when absent), into *out;
 * a number this engine does not implement fails the load, naming the node,
 * the attribute and the type (an undefined type would let the output take
 * whatever a kernel made of it). */
static mcp_status attr_dtype(ictx *c, const char *name, int64_t def, mcp_dtype *out)
{
    int64_t dt = mcp_node_attr_int(c->n, name, def);
    if (dtype_valid(dt)) {
        *out = (mcp_dtype)dt;
        return MCP_STATUS_OK;
    }
    char why[160];
    mcp_err_set(c->err, mcp_onnx_dtype_name(dt) ? MCP_STATUS_UNSUPPORTED : MCP_STATUS_INVALID_MODEL,
                "attribute '%s' names %s", name, mcp_onnx_dtype_refusal(dt, why, sizeof why));
    mcp_err_prefix(c->err, "node '%s' (%s)", c->n->name, c->n->op_type);
    return mcp_onnx_dtype_name(dt) ? MCP_STATUS_UNSUPPORTED : MCP_STATUS_INVALID_MODEL;
}

static int in_value(const ictx *c, int k)
{
    if (k < 0 || k >= c->n->n_inputs) return -1;
    int v = c->n->inputs[k];
    return v >= 0 && v < c->g->n_values ? v : -1;
}

static bool has_in(const ictx *c, int k) { return in_value(c, k) >= 0; }

static const char *in_name(const ictx *c, int k)
{
    int v = in_value(c, k);
    return v >= 0 ? c->g->values[v].name : "";
}

/* Type of input k. False when the input is absent or not a plain tensor
 * (sequence, optional); an input of unknown type gives true and rank -1. */
static bool in_type(const ictx *c, int k, stype *t)
{
    st_unknown(t, MCP_DTYPE_UNDEFINED);
    int v = in_value(c, k);
    if (v < 0) return false;
    const mcp_type *vt = &c->g->values[v].type;
    if (vt->kind != MCP_VALUE_TENSOR || vt->is_optional) return false;
    stype_from_type(vt, t);
    return true;
}

static mcp_dtype in_dtype(const ictx *c, int k)
{
    stype t;
    return in_type(c, k, &t) ? t.dtype : MCP_DTYPE_UNDEFINED;
}

/*
 * Constant value of a value: an initializer or the output of a Constant node
 * with a tensor `value`, in this graph or, through a capture, an enclosing
 * one. NULL when the value is computed at run time.
 */
static const mcp_tensor *const_input(const mcp_graph *g, int value)
{
    while (g && value >= 0 && value < g->n_values) {
        const mcp_graph_value *v = &g->values[value];
        if (v->initializer >= 0)
            return v->initializer < g->n_initializers ? &g->initializers[v->initializer] : NULL;
        if (v->outer >= 0) {
            value = v->outer;
            g = g->parent;
            continue;
        }
        if (v->producer < 0 || v->producer >= g->n_nodes) return NULL;
        const mcp_node *p = &g->nodes[v->producer];
        if (strcmp(p->op_type, "Constant") != 0 || p->domain[0] != '\0') return NULL;
        if (p->n_outputs < 1 || p->outputs[0] != value) return NULL;
        const mcp_attr *a = mcp_node_attr(p, "value");
        return a && a->type == MCP_ATTR_TENSOR ? &a->t : NULL;
    }
    return NULL;
}

/* The Constant node producing `value` (following captures), or NULL. */
static const mcp_node *const_node(const mcp_graph *g, int value)
{
    while (g && value >= 0 && value < g->n_values) {
        const mcp_graph_value *v = &g->values[value];
        if (v->outer >= 0) {
            value = v->outer;
            g = g->parent;
            continue;
        }
        if (v->initializer >= 0 || v->producer < 0 || v->producer >= g->n_nodes) return NULL;
        const mcp_node *p = &g->nodes[v->producer];
        if (strcmp(p->op_type, "Constant") != 0 || p->domain[0] != '\0') return NULL;
        return p;
    }
    return NULL;
}

/*
 * Reads input k as a constant list of at most `cap` integers (a 0-D or 1-D
 * integer tensor, or a Constant's value_int / value_ints). False when the
 * input is absent, not constant, not integer or too long.
 */
static bool const_ints(const ictx *c, int k, int64_t cap, int64_t *out, int64_t *count)
{
    int v = in_value(c, k);
    if (v < 0) return false;
    const mcp_tensor *t = const_input(c->g, v);
    if (t) {
        int64_t n = mcp_tensor_numel(t);
        if (t->rank > 1 || !mcp_dtype_is_integer(t->dtype) || n > cap || (n && !t->data)) return false;
        for (int64_t i = 0; i < n; i++) out[i] = mcp_tensor_get_i64(t, i);
        *count = n;
        return true;
    }
    const mcp_node *p = const_node(c->g, v);
    if (!p) return false;
    const mcp_attr *a = mcp_node_attr(p, "value_ints");
    if (a && a->type == MCP_ATTR_INTS) {
        if (a->count > cap) return false;
        for (int64_t i = 0; i < a->count; i++) out[i] = a->ints[i];
        *count = a->count;
        return true;
    }
    a = mcp_node_attr(p, "value_int");
    if (a && a->type == MCP_ATTR_INT && cap >= 1) {
        out[0] = a->i;
        *count = 1;
        return true;
    }
    return false;
}

/* Like const_ints for float lists (Resize / Upsample scales). */
static bool const_floats(const ictx *c, int k, int64_t cap, double *out, int64_t *count)
{
    int v = in_value(c, k);
    if (v < 0) return false;
    const mcp_tensor *t = const_input(c->g, v);
    if (t) {
        int64_t n = mcp_tensor_numel(t);
        if (t->rank > 1 || !mcp_dtype_is_float(t->dtype) || n > cap || (n && !t->data)) return false;
        for (int64_t i = 0; i < n; i++) out[i] = mcp_tensor_get_f64(t, i);
        *count = n;
        return true;
    }
    const mcp_node *p = const_node(c->g, v);
    const mcp_attr *a = p ? mcp_node_attr(p, "value_floats") : NULL;
    if (!a || a->type != MCP_ATTR_FLOATS || a->count > cap) return false;
    for (int64_t i = 0; i < a->count; i++) out[i] = a->floats[i];
    *count = a->count;
    return true;
}

/* Number of elements of a constant input, or -1. */
static int64_t const_numel(const ictx *c, int k)
{
    const mcp_tensor *t = const_input(c->g, in_value(c, k));
    return t ? mcp_tensor_numel(t) : -1;
}

static pelem pelem_known(int64_t v)
{
    pelem e = {v, true, NULL, -1, -1};
    return e;
}

static pelem pelem_unknown(void)
{
    pelem e = {0, false, NULL, -1, -1};
    return e;
}

/* The value of value `v` as a small integer list, from the propagation
 * table or from a constant. */
static bool value_pval(const ictx *c, int v, pval *out)
{
    if (v < 0 || v >= c->g->n_values) return false;
    if (c->pv && c->pv[v]) {
        *out = *c->pv[v];
        return true;
    }
    const mcp_tensor *t = const_input(c->g, v);
    int64_t vals[MCP_MAX_RANK], n;
    bool scalar;
    if (t) {
        n = mcp_tensor_numel(t);
        if (t->rank > 1 || !mcp_dtype_is_integer(t->dtype) || n > MCP_MAX_RANK || (n && !t->data)) return false;
        for (int64_t i = 0; i < n; i++) vals[i] = mcp_tensor_get_i64(t, i);
        scalar = t->rank == 0;
    } else {
        const mcp_node *p = const_node(c->g, v);
        const mcp_attr *a = p ? mcp_node_attr(p, "value_ints") : NULL;
        if (a && a->type == MCP_ATTR_INTS && a->count <= MCP_MAX_RANK) {
            n = a->count;
            for (int64_t i = 0; i < n; i++) vals[i] = a->ints[i];
            scalar = false;
        } else if (p && (a = mcp_node_attr(p, "value_int")) && a->type == MCP_ATTR_INT) {
            n = 1;
            vals[0] = a->i;
            scalar = true;
        } else {
            return false;
        }
    }
    out->n = (int)n;
    out->scalar = scalar;
    for (int i = 0; i < out->n; i++) out->e[i] = pelem_known(vals[i]);
    return true;
}

static bool in_pval(const ictx *c, int k, pval *out) { return value_pval(c, in_value(c, k), out); }

static mcp_status set_pval(ictx *c, int k, const pval *p)
{
    if (!c->pv || k >= c->n->n_outputs) return MCP_STATUS_OK;
    int v = c->n->outputs[k];
    if (v < 0 || v >= c->g->n_values || c->pv[v]) return MCP_STATUS_OK;
    c->pv[v] = mcp_malloc(sizeof *p);
    if (!c->pv[v]) return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    *c->pv[v] = *p;
    return MCP_STATUS_OK;
}

/*
 * Reads input k as a shape-like list (Reshape, Expand, ConstantOfShape,
 * Tile): a constant or a propagated value, 1-D.
 */
static bool shape_arg(const ictx *c, int k, pval *out)
{
    return in_pval(c, k, out) && !out->scalar;
}

/*
 * Records that output k has type t: merged into the value's declared type,
 * failing if the two contradict each other.
 */
static mcp_status emit(ictx *c, int k, const stype *t)
{
    if (k < 0 || k >= c->n->n_outputs) return MCP_STATUS_OK;
    int v = c->n->outputs[k];
    if (v < 0 || v >= c->g->n_values) return MCP_STATUS_OK;
    mcp_graph_value *gv = &c->g->values[v];
    /* Sequences and optionals are declared, never produced by the rules
     * here; a tensor rule has nothing to add to them. */
    if (gv->type.kind != MCP_VALUE_TENSOR || gv->type.is_optional) return MCP_STATUS_OK;
    bool conflict;
    mcp_status st = merge_type(&gv->type, t, &conflict);
    if (st != MCP_STATUS_OK) return mcp_err_set(c->err, st, "out of memory");
    if (conflict) {
        char a[256], b[256];
        return fail(c, "output '%s' is declared as %s but the node produces %s", gv->name,
                    fmt_type(gv->type.dtype, gv->type.rank, gv->type.dims, gv->type.dim_params, a, sizeof a),
                    fmt_stype(t, b, sizeof b));
    }
    return MCP_STATUS_OK;
}

/* Normalizes an axis against rank r (negative counts from the end). */
static bool norm_axis(int64_t axis, int r, int *out)
{
    if (axis < -(int64_t)r || axis >= r) return false;
    *out = (int)(axis < 0 ? axis + r : axis);
    return true;
}

/* ---- elementwise ---- */

static mcp_status infer_same(ictx *c)
{
    stype t;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    return emit(c, 0, &t);
}

/* Identity passes any type through: tensors, sequences and optionals. */
static mcp_status infer_identity(ictx *c)
{
    int iv = in_value(c, 0);
    if (iv < 0 || c->n->n_outputs < 1) return MCP_STATUS_OK;
    int ov = c->n->outputs[0];
    if (ov < 0 || ov >= c->g->n_values) return MCP_STATUS_OK;
    const mcp_type *it = &c->g->values[iv].type;
    if (it->kind == MCP_VALUE_TENSOR && !it->is_optional) return infer_same(c);
    mcp_type *ot = &c->g->values[ov].type;
    if (!type_is_unknown(ot)) return MCP_STATUS_OK;
    if (type_copy(ot, it) != MCP_STATUS_OK) return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    return MCP_STATUS_OK;
}

static mcp_status infer_bool_same(ictx *c)
{
    stype t;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    t.dtype = MCP_DTYPE_BOOL;
    return emit(c, 0, &t);
}

/* Broadcasts inputs [first, last] into *out; the dtype is left to the caller. */
static mcp_status broadcast_inputs(ictx *c, int first, int last, stype *out, bool *ok)
{
    *ok = false;
    st_unknown(out, MCP_DTYPE_UNDEFINED);
    bool have = false;
    for (int k = first; k <= last; k++) {
        stype t;
        if (!in_type(c, k, &t)) return MCP_STATUS_OK;
        if (!have) {
            *out = t;
            have = true;
            continue;
        }
        if (out->rank < 0 || t.rank < 0) {
            out->rank = -1;
            continue;
        }
        stype r;
        st_rank(&r, MCP_DTYPE_UNDEFINED, out->rank > t.rank ? out->rank : t.rank);
        for (int i = 0; i < r.rank; i++) {
            int ia = i - (r.rank - out->rank), ib = i - (r.rank - t.rank);
            sdim a = ia >= 0 ? out->d[ia] : dim_static(1);
            sdim b = ib >= 0 ? t.d[ib] : dim_static(1);
            if (!dim_broadcast(a, b, &r.d[i])) {
                char sa[256], sb[256];
                return fail(c, "input '%s' %s does not broadcast with the inputs before it (%s)", in_name(c, k),
                            fmt_stype(&t, sa, sizeof sa), fmt_stype(out, sb, sizeof sb));
            }
        }
        *out = r;
    }
    *ok = have;
    return MCP_STATUS_OK;
}

/* Before opset 7, binary ops broadcast B onto A only (with `broadcast` and
 * `axis` attributes), so the output has A's shape. */
static bool legacy_broadcast(const ictx *c) { return c->n->opset < 7; }

static mcp_status infer_binary(ictx *c, mcp_dtype force)
{
    stype t;
    mcp_dtype dt = in_dtype(c, 0);
    if (legacy_broadcast(c)) {
        if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    } else {
        bool ok;
        mcp_status st = broadcast_inputs(c, 0, c->n->n_inputs - 1, &t, &ok);
        if (st != MCP_STATUS_OK || !ok) return st;
    }
    t.dtype = force ? force : dt;
    return emit(c, 0, &t);
}

static mcp_status infer_arith(ictx *c) { return infer_binary(c, MCP_DTYPE_UNDEFINED); }
static mcp_status infer_compare(ictx *c) { return infer_binary(c, MCP_DTYPE_BOOL); }

/* Max / Min / Sum / Mean: variadic; they broadcast from opset 8. */
static mcp_status infer_variadic(ictx *c)
{
    if (c->n->n_inputs < 1) return MCP_STATUS_OK;
    stype t;
    bool ok;
    mcp_status st = broadcast_inputs(c, 0, c->n->n_inputs - 1, &t, &ok);
    if (st != MCP_STATUS_OK || !ok) return st;
    t.dtype = in_dtype(c, 0);
    return emit(c, 0, &t);
}

static mcp_status infer_where(ictx *c)
{
    if (c->n->n_inputs != 3) return MCP_STATUS_OK;
    stype t;
    bool ok;
    mcp_status st = broadcast_inputs(c, 0, 2, &t, &ok);
    if (st != MCP_STATUS_OK || !ok) return st;
    t.dtype = in_dtype(c, 1) ? in_dtype(c, 1) : in_dtype(c, 2);
    return emit(c, 0, &t);
}

/* Cast-24's round_mode: "up", "down" or "nearest". */
static mcp_status check_round_mode(ictx *c)
{
    const mcp_attr *a = mcp_node_attr(c->n, "round_mode");
    if (!a) return MCP_STATUS_OK;
    if (a->type == MCP_ATTR_STRING && a->s &&
        (strcmp(a->s, "up") == 0 || strcmp(a->s, "down") == 0 || strcmp(a->s, "nearest") == 0))
        return MCP_STATUS_OK;
    return fail(c, "attribute 'round_mode' must be \"up\", \"down\" or \"nearest\"");
}

static mcp_status infer_cast(ictx *c)
{
    stype t;
    mcp_dtype to = MCP_DTYPE_UNDEFINED;
    const mcp_attr *a = mcp_node_attr(c->n, "to");
    if (a && a->type == MCP_ATTR_INT) {
        mcp_status st = attr_dtype(c, "to", 0, &to);
        if (st != MCP_STATUS_OK) return st;
    } else if (a && a->type == MCP_ATTR_STRING) {
        /* Cast-1 names the type as ONNX's DataType enum does. */
        to = mcp_dtype_from_onnx_name(a->s);
        if (to == MCP_DTYPE_UNDEFINED)
            return fail(c, "attribute 'to' names type \"%.40s\", which this engine does not implement", a->s ? a->s : "");
    }
    mcp_status rst = check_round_mode(c);
    if (rst != MCP_STATUS_OK) return rst;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    t.dtype = to;
    return emit(c, 0, &t);
}

static mcp_status infer_castlike(ictx *c)
{
    stype t;
    mcp_status st = check_round_mode(c);
    if (st != MCP_STATUS_OK) return st;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    t.dtype = in_dtype(c, 1);
    return emit(c, 0, &t);
}

/* Attribute output_dtype of QuantizeLinear-21+ / DequantizeLinear-25
 * (UNDEFINED when absent or 0). */
static mcp_status attr_output_dtype(ictx *c, mcp_dtype *out)
{
    *out = MCP_DTYPE_UNDEFINED;
    if (!mcp_node_attr(c->n, "output_dtype") || mcp_node_attr_int(c->n, "output_dtype", 0) == 0) return MCP_STATUS_OK;
    return attr_dtype(c, "output_dtype", 0, out);
}

/* Ops whose output takes the input's shape and a dtype from attribute
 * `dtype` (default: the input's). */
static mcp_status infer_like(ictx *c)
{
    stype t;
    mcp_dtype dt = MCP_DTYPE_UNDEFINED;
    if (mcp_node_attr(c->n, "dtype")) {
        mcp_status st = attr_dtype(c, "dtype", 0, &dt);
        if (st != MCP_STATUS_OK) return st;
    }
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    if (dt != MCP_DTYPE_UNDEFINED) t.dtype = dt;
    return emit(c, 0, &t);
}

static mcp_status infer_dropout(ictx *c)
{
    stype t;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    mcp_status st = emit(c, 0, &t);
    if (st != MCP_STATUS_OK) return st;
    /* The mask became bool in opset 10; it had the input's type before. */
    if (c->n->opset >= 10) t.dtype = MCP_DTYPE_BOOL;
    return emit(c, 1, &t);
}

/* ---- normalization ---- */

/* BatchNormalization: Y like X; the optional statistics outputs (running
 * or saved mean and variance) are per channel, like the mean input. */
static mcp_status infer_batchnorm(ictx *c)
{
    stype t;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    mcp_status st = emit(c, 0, &t);
    for (int k = 1; st == MCP_STATUS_OK && k < c->n->n_outputs && k <= 4; k++) {
        stype m;
        if (!in_type(c, k % 2 ? 3 : 4, &m)) continue;
        st = emit(c, k, &m);
    }
    return st;
}

static mcp_status infer_layernorm(ictx *c)
{
    stype t;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    mcp_status st = emit(c, 0, &t);
    if (st != MCP_STATUS_OK) return st;
    int64_t stash = mcp_node_attr_int(c->n, "stash_type", 1);
    stype m;
    st_unknown(&m, dtype_valid(stash) ? (mcp_dtype)stash : MCP_DTYPE_UNDEFINED);
    int axis;
    if (t.rank >= 0 && norm_axis(mcp_node_attr_int(c->n, "axis", -1), t.rank, &axis)) {
        m.rank = t.rank;
        for (int i = 0; i < t.rank; i++) m.d[i] = i < axis ? t.d[i] : dim_static(1);
    }
    st = emit(c, 1, &m);
    if (st == MCP_STATUS_OK) st = emit(c, 2, &m);
    return st;
}

/* ---- MatMul, Gemm ---- */

static mcp_status matmul_shape(ictx *c, int ia, int ib, mcp_dtype dtype)
{
    stype a, b, t;
    if (!in_type(c, ia, &a) || !in_type(c, ib, &b)) return MCP_STATUS_OK;
    st_unknown(&t, dtype);
    if (a.rank < 1 || b.rank < 1) return emit(c, 0, &t);
    /* 1-D operands become matrices by a leading (A) or trailing (B) 1 that
     * the output then drops. */
    sdim am = a.rank >= 2 ? a.d[a.rank - 2] : dim_static(1);
    sdim ak = a.d[a.rank - 1];
    sdim bk = b.rank >= 2 ? b.d[b.rank - 2] : b.d[0];
    sdim bn = b.rank >= 2 ? b.d[b.rank - 1] : dim_static(1);
    sdim k;
    if (!dim_unify(ak, bk, &k)) {
        char sa[256], sb[256];
        return fail(c, "inputs '%s' %s and '%s' %s have different inner dimensions", in_name(c, ia),
                    fmt_stype(&a, sa, sizeof sa), in_name(c, ib), fmt_stype(&b, sb, sizeof sb));
    }
    int ba = a.rank > 2 ? a.rank - 2 : 0, bb = b.rank > 2 ? b.rank - 2 : 0;
    int nb = ba > bb ? ba : bb;
    int r = nb + (a.rank >= 2) + (b.rank >= 2);
    if (r > MCP_MAX_RANK) return emit(c, 0, &t);
    t.rank = r;
    for (int i = 0; i < nb; i++) {
        int ja = i - (nb - ba), jb = i - (nb - bb);
        sdim x = ja >= 0 ? a.d[ja] : dim_static(1);
        sdim y = jb >= 0 ? b.d[jb] : dim_static(1);
        if (!dim_broadcast(x, y, &t.d[i])) {
            char sa[256], sb[256];
            return fail(c, "inputs '%s' %s and '%s' %s have batch dimensions that do not broadcast", in_name(c, ia),
                        fmt_stype(&a, sa, sizeof sa), in_name(c, ib), fmt_stype(&b, sb, sizeof sb));
        }
    }
    int o = nb;
    if (a.rank >= 2) t.d[o++] = am;
    if (b.rank >= 2) t.d[o++] = bn;
    return emit(c, 0, &t);
}

static mcp_status infer_matmul(ictx *c) { return matmul_shape(c, 0, 1, in_dtype(c, 0)); }
static mcp_status infer_matmul_integer(ictx *c) { return matmul_shape(c, 0, 1, MCP_DTYPE_INT32); }
static mcp_status infer_qlinear_matmul(ictx *c) { return matmul_shape(c, 0, 3, in_dtype(c, 7)); }

static mcp_status infer_gemm(ictx *c)
{
    stype a, b, t;
    if (!in_type(c, 0, &a) || !in_type(c, 1, &b)) return MCP_STATUS_OK;
    st_unknown(&t, a.dtype);
    if (a.rank != 2 || b.rank != 2) return emit(c, 0, &t);
    bool ta = mcp_node_attr_int(c->n, "transA", 0) != 0, tb = mcp_node_attr_int(c->n, "transB", 0) != 0;
    sdim m = a.d[ta ? 1 : 0], ka = a.d[ta ? 0 : 1];
    sdim kb = b.d[tb ? 1 : 0], n = b.d[tb ? 0 : 1];
    sdim k;
    if (!dim_unify(ka, kb, &k)) {
        char sa[256], sb[256];
        return fail(c, "inputs '%s' %s and '%s' %s have different inner dimensions (transA=%d, transB=%d)",
                    in_name(c, 0), fmt_stype(&a, sa, sizeof sa), in_name(c, 1), fmt_stype(&b, sb, sizeof sb),
                    (int)ta, (int)tb);
    }
    t.rank = 2;
    t.d[0] = m;
    t.d[1] = n;
    return emit(c, 0, &t);
}

/* ---- convolution and pooling ---- */

/* Output size of one spatial axis of a window op; -1 if it cannot be
 * computed. Follows the kernels: SAME pads to ceil(in / stride), and with
 * ceil_mode the last window must start inside the input or the leading
 * padding (the PyTorch rule, which ONNX adopted in opset 19). */
static int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                          const char *auto_pad, bool ceil_mode)
{
    if (in < 0 || k < 1 || s < 1 || d < 1 || pb < 0 || pe < 0) return -1;
    if (in > WINDOW_SIZE_MAX || k > WINDOW_SIZE_MAX || s > WINDOW_SIZE_MAX || d > WINDOW_SIZE_MAX ||
        pb > WINDOW_SIZE_MAX || pe > WINDOW_SIZE_MAX)
        return -1;
    int64_t eff = (k - 1) * d + 1;
    if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) return (in + s - 1) / s;
    if (strcmp(auto_pad, "VALID") == 0) pb = pe = 0;
    else if (strcmp(auto_pad, "NOTSET") != 0) return -1;
    int64_t span = in + pb + pe - eff;
    if (span < 0) return -1;
    if (!ceil_mode) return span / s + 1;
    int64_t o = (span + s - 1) / s + 1;
    if ((o - 1) * s >= in + pb) o--;
    return o;
}

/* Reads an ints attribute of exactly n entries, or fills dflt. False when
 * the attribute is present with another length. */
static bool attr_ints_n(const mcp_node *n, const char *name, int count, int64_t dflt, int64_t *out)
{
    int64_t len;
    const int64_t *v = mcp_node_attr_ints(n, name, &len);
    if (!v) {
        for (int i = 0; i < count; i++) out[i] = dflt;
        return !mcp_node_attr(n, name);
    }
    if (len != count) return false;
    for (int i = 0; i < count; i++) out[i] = v[i];
    return true;
}

/*
 * Spatial output dims of Conv / pooling: t holds [N, C, spatial...] of the
 * input and gets the spatial part of the output. `kernel` has the window
 * size per spatial axis (-1 unknown).
 */
static void window_dims(const ictx *c, const stype *x, const int64_t *kernel, bool ceil_ok, stype *out)
{
    int ns = x->rank - 2;
    int64_t strides[MCP_MAX_RANK], dil[MCP_MAX_RANK], pads[2 * MCP_MAX_RANK];
    bool ok = attr_ints_n(c->n, "strides", ns, 1, strides) && attr_ints_n(c->n, "dilations", ns, 1, dil) &&
              attr_ints_n(c->n, "pads", 2 * ns, 0, pads);
    const char *auto_pad = mcp_node_attr_string(c->n, "auto_pad", "NOTSET");
    bool ceil_mode = ceil_ok && mcp_node_attr_int(c->n, "ceil_mode", 0) != 0;
    for (int i = 0; i < ns; i++) {
        int64_t o = -1;
        if (ok && dim_known(x->d[2 + i]))
            o = window_out(x->d[2 + i].v, kernel[i], strides[i], dil[i], pads[i], pads[ns + i], auto_pad, ceil_mode);
        out->d[2 + i] = o >= 0 ? dim_static(o) : DIM_UNKNOWN;
    }
}

static mcp_status conv_shape(ictx *c, int ix, int iw, mcp_dtype dtype)
{
    stype x, w, t;
    if (!in_type(c, ix, &x)) return MCP_STATUS_OK;
    if (!in_type(c, iw, &w)) st_unknown(&w, MCP_DTYPE_UNDEFINED);
    int r = x.rank >= 0 ? x.rank : w.rank;
    st_rank(&t, dtype, r);
    if (r < 3 || (w.rank >= 0 && w.rank != r) || (x.rank >= 0 && x.rank != r)) {
        st_unknown(&t, dtype);
        return emit(c, 0, &t);
    }
    if (x.rank < 0) st_rank(&x, x.dtype, r);
    t.d[0] = x.d[0];
    t.d[1] = w.rank >= 0 ? w.d[0] : DIM_UNKNOWN;
    int ns = r - 2;
    int64_t kernel[MCP_MAX_RANK];
    if (!attr_ints_n(c->n, "kernel_shape", ns, -1, kernel)) return emit(c, 0, &t);
    for (int i = 0; i < ns; i++)
        if (kernel[i] < 0 && w.rank >= 0) kernel[i] = w.d[2 + i].v;
    window_dims(c, &x, kernel, false, &t);
    return emit(c, 0, &t);
}

static mcp_status infer_conv(ictx *c) { return conv_shape(c, 0, 1, in_dtype(c, 0)); }
static mcp_status infer_conv_integer(ictx *c) { return conv_shape(c, 0, 1, MCP_DTYPE_INT32); }
static mcp_status infer_qlinear_conv(ictx *c) { return conv_shape(c, 0, 3, in_dtype(c, 7)); }

static mcp_status infer_conv_transpose(ictx *c)
{
    stype x, w, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    if (!in_type(c, 1, &w)) st_unknown(&w, MCP_DTYPE_UNDEFINED);
    int r = x.rank >= 0 ? x.rank : w.rank;
    st_rank(&t, x.dtype, r);
    if (r < 3 || (w.rank >= 0 && w.rank != r) || (x.rank >= 0 && x.rank != r)) {
        st_unknown(&t, x.dtype);
        return emit(c, 0, &t);
    }
    if (x.rank < 0) st_rank(&x, x.dtype, r);
    int64_t group = mcp_node_attr_int(c->n, "group", 1);
    t.d[0] = x.d[0];
    t.d[1] = w.rank >= 0 && group >= 1 ? dim_mul(w.d[1], dim_static(group)) : DIM_UNKNOWN;
    int ns = r - 2;
    int64_t kernel[MCP_MAX_RANK], strides[MCP_MAX_RANK], dil[MCP_MAX_RANK], opad[MCP_MAX_RANK];
    int64_t pads[2 * MCP_MAX_RANK];
    if (!attr_ints_n(c->n, "kernel_shape", ns, -1, kernel) || !attr_ints_n(c->n, "strides", ns, 1, strides) ||
        !attr_ints_n(c->n, "dilations", ns, 1, dil) || !attr_ints_n(c->n, "output_padding", ns, 0, opad) ||
        !attr_ints_n(c->n, "pads", 2 * ns, 0, pads))
        return emit(c, 0, &t);
    for (int i = 0; i < ns; i++)
        if (kernel[i] < 0 && w.rank >= 0) kernel[i] = w.d[2 + i].v;
    /* An explicit output_shape (spatial dims, or all dims in some
     * exporters) wins over the formula. */
    int64_t n_os;
    const int64_t *os = mcp_node_attr_ints(c->n, "output_shape", &n_os);
    if (os && (n_os == ns || n_os == r)) {
        for (int i = 0; i < ns; i++) {
            int64_t v = os[n_os - ns + i];
            t.d[2 + i] = v >= 0 ? dim_static(v) : DIM_UNKNOWN;
        }
        return emit(c, 0, &t);
    }
    if (os) return emit(c, 0, &t);
    const char *auto_pad = mcp_node_attr_string(c->n, "auto_pad", "NOTSET");
    bool same = strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0;
    bool valid = strcmp(auto_pad, "VALID") == 0;
    for (int i = 0; i < ns; i++) {
        int64_t in = x.d[2 + i].v, k = kernel[i], s = strides[i], d = dil[i];
        int64_t pb = valid ? 0 : pads[i], pe = valid ? 0 : pads[ns + i];
        t.d[2 + i] = DIM_UNKNOWN;
        if (in < 0 || k < 1 || s < 1 || d < 1 || opad[i] < 0 || pb < 0 || pe < 0) continue;
        if (in > WINDOW_SIZE_MAX || k > WINDOW_SIZE_MAX || s > WINDOW_SIZE_MAX || d > WINDOW_SIZE_MAX ||
            opad[i] > WINDOW_SIZE_MAX || pb > WINDOW_SIZE_MAX || pe > WINDOW_SIZE_MAX)
            continue;
        int64_t o = same ? in * s : s * (in - 1) + opad[i] + (k - 1) * d + 1 - pb - pe;
        if (o >= 0) t.d[2 + i] = dim_static(o);
    }
    return emit(c, 0, &t);
}

static mcp_status infer_pool(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    int64_t nk;
    const int64_t *ks = mcp_node_attr_ints(c->n, "kernel_shape", &nk);
    if (x.rank < 0 && ks && nk + 2 <= MCP_MAX_RANK) st_rank(&x, x.dtype, (int)nk + 2);
    if (x.rank >= 3 && ks && nk == x.rank - 2) {
        t = x;
        /* ceil_mode exists on MaxPool / AveragePool from opset 10 and on
         * LpPool from 18; the kernels read it whenever present. */
        window_dims(c, &x, ks, true, &t);
    }
    mcp_status st = emit(c, 0, &t);
    if (st != MCP_STATUS_OK) return st;
    t.dtype = MCP_DTYPE_INT64; /* MaxPool's Indices */
    return emit(c, 1, &t);
}

static mcp_status infer_global_pool(ictx *c)
{
    stype t;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    for (int i = 2; i < t.rank; i++) t.d[i] = dim_static(1);
    return emit(c, 0, &t);
}

/* ---- shape manipulation ---- */

static mcp_status infer_flatten(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_rank(&t, x.dtype, 2);
    if (x.rank >= 0) {
        int64_t axis = mcp_node_attr_int(c->n, "axis", 1);
        if (axis < 0) axis += x.rank;
        if (axis < 0 || axis > x.rank) return fail(c, "attribute 'axis' is out of range for input rank %d", x.rank);
        t.d[0] = dim_static(1);
        t.d[1] = dim_static(1);
        for (int i = 0; i < x.rank; i++) t.d[i < axis ? 0 : 1] = dim_mul(t.d[i < axis ? 0 : 1], x.d[i]);
    }
    return emit(c, 0, &t);
}

static mcp_status infer_reshape(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    pval s;
    if (c->n->opset < 5) {
        int64_t n;
        const int64_t *a = mcp_node_attr_ints(c->n, "shape", &n);
        if (!a || n > MCP_MAX_RANK) return emit(c, 0, &t);
        s.n = (int)n;
        s.scalar = false;
        for (int i = 0; i < s.n; i++) s.e[i] = pelem_known(a[i]);
    } else if (!shape_arg(c, 1, &s)) {
        /* The shape's own length still gives the output rank. */
        stype st;
        if (in_type(c, 1, &st) && st.rank == 1 && dim_known(st.d[0]) && st.d[0].v <= MCP_MAX_RANK)
            st_rank(&t, x.dtype, (int)st.d[0].v);
        return emit(c, 0, &t);
    }
    bool allowzero = c->n->opset >= 14 && mcp_node_attr_int(c->n, "allowzero", 0) != 0;
    int xv = in_value(c, 0);
    st_rank(&t, x.dtype, s.n);
    int neg = -1;
    /* cancelled[j]: input dim j is matched by an output dim (a 0 entry, or
     * an entry read from it by Shape or naming the same symbol), so it
     * drops out of the element count balance. matched[i] likewise marks
     * output dims. */
    bool cancelled[MCP_MAX_RANK] = {false}, matched[MCP_MAX_RANK] = {false};
    /* Balances resting on symbol names only are not worth an error. */
    bool by_name = false;
    for (int i = 0; i < s.n; i++) {
        pelem e = s.e[i];
        if (!e.known) {
            /* A dim read from this very input stays that dim. */
            if (x.rank >= 0 && e.src_value == xv && xv >= 0 && e.src_dim >= 0 && e.src_dim < x.rank &&
                !cancelled[e.src_dim]) {
                t.d[i] = x.d[e.src_dim];
                cancelled[e.src_dim] = matched[i] = true;
            } else {
                t.d[i].v = -1;
                t.d[i].sym = e.sym;
            }
        } else if (e.v == 0 && !allowzero) {
            if (x.rank >= 0 && i >= x.rank)
                return fail(c, "shape entry %d is 0 (copy) but input '%s' has rank %d", i, in_name(c, 0), x.rank);
            if (x.rank >= 0) {
                if (cancelled[i]) return emit(c, 0, &t);
                t.d[i] = x.d[i];
                cancelled[i] = matched[i] = true;
            }
        } else if (e.v == -1) {
            if (neg >= 0) return fail(c, "shape input '%s' has more than one -1", in_name(c, 1));
            neg = i;
        } else if (e.v < -1) {
            return fail(c, "shape input '%s' has a negative entry %lld", in_name(c, 1), (long long)e.v);
        } else {
            t.d[i] = dim_static(e.v);
        }
    }
    if (x.rank < 0) return emit(c, 0, &t);
    for (int i = 0; i < s.n; i++) {
        if (matched[i] || i == neg || dim_known(t.d[i]) || !t.d[i].sym) continue;
        for (int j = 0; j < x.rank; j++) {
            if (!cancelled[j] && !dim_known(x.d[j]) && same_sym(x.d[j], t.d[i])) {
                cancelled[j] = matched[i] = by_name = true;
                break;
            }
        }
    }
    /* Element counts of what is left: static factors multiply; an unknown
     * dim left on either side stops the balance. */
    int64_t p_in = 1, p_out = 1;
    bool resolved = true;
    for (int j = 0; j < x.rank; j++) {
        if (cancelled[j]) continue;
        if (!dim_known(x.d[j]) || !mul_i64(p_in, x.d[j].v, &p_in)) resolved = false;
    }
    for (int i = 0; i < s.n; i++) {
        if (i == neg || matched[i]) continue;
        if (!dim_known(t.d[i]) || !mul_i64(p_out, t.d[i].v, &p_out)) resolved = false;
    }
    if (!resolved) return emit(c, 0, &t);
    if (neg >= 0) {
        if (p_out == 0) return emit(c, 0, &t);
        if (p_in % p_out != 0) {
            if (by_name) return emit(c, 0, &t);
            char sa[256];
            return fail(c, "cannot reshape input '%s' %s: %lld elements are not a multiple of %lld", in_name(c, 0),
                        fmt_stype(&x, sa, sizeof sa), (long long)p_in, (long long)p_out);
        }
        t.d[neg] = dim_static(p_in / p_out);
    } else if (p_in != p_out && !by_name) {
        char sa[256], sb[256];
        return fail(c, "cannot reshape input '%s' %s to %s", in_name(c, 0), fmt_stype(&x, sa, sizeof sa),
                    fmt_stype(&t, sb, sizeof sb));
    }
    return emit(c, 0, &t);
}

static mcp_status infer_transpose(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    int64_t np;
    const int64_t *perm = mcp_node_attr_ints(c->n, "perm", &np);
    if (x.rank < 0) {
        if (perm && np <= MCP_MAX_RANK) st_rank(&t, x.dtype, (int)np);
        else st_unknown(&t, x.dtype);
        return emit(c, 0, &t);
    }
    t = x;
    if (!perm) {
        for (int i = 0; i < x.rank; i++) t.d[i] = x.d[x.rank - 1 - i];
        return emit(c, 0, &t);
    }
    if (np != x.rank) return fail(c, "attribute 'perm' has %lld entries for input rank %d", (long long)np, x.rank);
    bool seen[MCP_MAX_RANK] = {false};
    for (int i = 0; i < x.rank; i++) {
        if (perm[i] < 0 || perm[i] >= x.rank || seen[perm[i]])
            return fail(c, "attribute 'perm' is not a permutation of the input's %d axes", x.rank);
        seen[perm[i]] = true;
        t.d[i] = x.d[perm[i]];
    }
    return emit(c, 0, &t);
}

static mcp_status infer_concat(ictx *c)
{
    stype t;
    st_unknown(&t, MCP_DTYPE_UNDEFINED);
    for (int k = 0; k < c->n->n_inputs; k++) {
        stype x;
        if (!in_type(c, k, &x)) return MCP_STATUS_OK;
        if (!t.dtype) t.dtype = x.dtype;
        if (x.rank >= 0 && t.rank < 0) t.rank = x.rank;
        else if (x.rank >= 0 && x.rank != t.rank)
            return fail(c, "input '%s' has rank %d, an earlier input rank %d", in_name(c, k), x.rank, t.rank);
    }
    if (t.rank < 0 || c->n->n_inputs < 1) return emit(c, 0, &t);
    int axis;
    if (!norm_axis(mcp_node_attr_int(c->n, "axis", 0), t.rank, &axis))
        return fail(c, "attribute 'axis' is out of range for rank %d", t.rank);
    for (int i = 0; i < t.rank; i++) t.d[i] = i == axis ? dim_static(0) : DIM_UNKNOWN;
    for (int k = 0; k < c->n->n_inputs; k++) {
        stype x;
        in_type(c, k, &x);
        for (int i = 0; i < t.rank; i++) {
            sdim d = x.rank >= 0 ? x.d[i] : DIM_UNKNOWN;
            if (i == axis) {
                int64_t s;
                if (dim_known(t.d[i]) && dim_known(d) && add_i64(t.d[i].v, d.v, &s)) t.d[i] = dim_static(s);
                else t.d[i] = DIM_UNKNOWN;
            } else if (!dim_unify(t.d[i], d, &t.d[i])) {
                return fail(c, "input '%s' has size %lld on axis %d where an earlier input has %lld", in_name(c, k),
                            (long long)d.v, i, (long long)t.d[i].v);
            }
        }
    }
    return emit(c, 0, &t);
}

/* Axes of Squeeze / Unsqueeze / Reduce*: from the `axes` attribute before
 * `input_from` opset, else from constant input 1. *known is false when an
 * axes input exists but is not constant; *count 0 means none given. */
static void read_axes(const ictx *c, int input_from, int64_t *axes, int64_t *count, bool *known)
{
    *known = true;
    *count = 0;
    if (c->n->opset < input_from) {
        const int64_t *a = mcp_node_attr_ints(c->n, "axes", count);
        if (*count > MCP_MAX_RANK) {
            *known = false;
            return;
        }
        for (int64_t i = 0; i < *count; i++) axes[i] = a[i];
        return;
    }
    if (!has_in(c, 1)) return;
    if (!const_ints(c, 1, MCP_MAX_RANK, axes, count)) *known = false;
}

static mcp_status infer_squeeze(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    int64_t axes[MCP_MAX_RANK], na;
    bool known;
    read_axes(c, 13, axes, &na, &known);
    if (!known || x.rank < 0) return emit(c, 0, &t);
    bool drop[MCP_MAX_RANK] = {false};
    if (na == 0) {
        /* Squeeze every 1; an unknown dim might be 1, so the rank is unknown. */
        for (int i = 0; i < x.rank; i++) {
            if (!dim_known(x.d[i])) return emit(c, 0, &t);
            drop[i] = x.d[i].v == 1;
        }
    }
    for (int64_t j = 0; j < na; j++) {
        int a;
        if (!norm_axis(axes[j], x.rank, &a)) return fail(c, "axis %lld is out of range for rank %d", (long long)axes[j], x.rank);
        if (dim_known(x.d[a]) && x.d[a].v != 1)
            return fail(c, "cannot squeeze axis %d of input '%s': its size is %lld", a, in_name(c, 0), (long long)x.d[a].v);
        drop[a] = true;
    }
    t.rank = 0;
    for (int i = 0; i < x.rank; i++)
        if (!drop[i]) t.d[t.rank++] = x.d[i];
    return emit(c, 0, &t);
}

static mcp_status infer_unsqueeze(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    int64_t axes[MCP_MAX_RANK], na;
    bool known;
    read_axes(c, 13, axes, &na, &known);
    if (!known || x.rank < 0 || na == 0) return emit(c, 0, &t);
    int r = x.rank + (int)na;
    if (r > MCP_MAX_RANK) return emit(c, 0, &t);
    bool ins[MCP_MAX_RANK] = {false};
    for (int64_t j = 0; j < na; j++) {
        int a;
        if (!norm_axis(axes[j], r, &a) || ins[a])
            return fail(c, "axes hold an out-of-range or repeated axis %lld for output rank %d", (long long)axes[j], r);
        ins[a] = true;
    }
    t.rank = r;
    for (int i = 0, j = 0; i < r; i++) t.d[i] = ins[i] ? dim_static(1) : x.d[j++];
    return emit(c, 0, &t);
}

static mcp_status infer_shape(ictx *c)
{
    stype x, t;
    int v = in_value(c, 0);
    if (v < 0) return MCP_STATUS_OK;
    stype_from_type(&c->g->values[v].type, &x);
    st_rank(&t, MCP_DTYPE_INT64, 1);
    if (x.rank >= 0) {
        int64_t r = x.rank;
        int64_t s = c->n->opset >= 15 ? mcp_node_attr_int(c->n, "start", 0) : 0;
        int64_t e = c->n->opset >= 15 ? mcp_node_attr_int(c->n, "end", r) : r;
        if (s < 0) s += r;
        if (e < 0) e += r;
        s = s < 0 ? 0 : s > r ? r : s;
        e = e < 0 ? 0 : e > r ? r : e;
        t.d[0] = dim_static(e > s ? e - s : 0);
    }
    return emit(c, 0, &t);
}

static mcp_status infer_size(ictx *c)
{
    stype t;
    st_rank(&t, MCP_DTYPE_INT64, 0);
    return emit(c, 0, &t);
}

static mcp_status infer_gather(ictx *c)
{
    stype x, idx, t;
    if (!in_type(c, 0, &x) || !in_type(c, 1, &idx)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    if (x.rank < 0 || idx.rank < 0) return emit(c, 0, &t);
    int axis;
    if (!norm_axis(mcp_node_attr_int(c->n, "axis", 0), x.rank, &axis))
        return fail(c, "attribute 'axis' is out of range for input rank %d", x.rank);
    int r = x.rank + idx.rank - 1;
    if (r > MCP_MAX_RANK) return emit(c, 0, &t);
    t.rank = r;
    int o = 0;
    for (int i = 0; i < axis; i++) t.d[o++] = x.d[i];
    for (int i = 0; i < idx.rank; i++) t.d[o++] = idx.d[i];
    for (int i = axis + 1; i < x.rank; i++) t.d[o++] = x.d[i];
    return emit(c, 0, &t);
}

static mcp_status infer_gather_elements(ictx *c)
{
    stype idx;
    if (!in_type(c, 1, &idx)) return MCP_STATUS_OK;
    idx.dtype = in_dtype(c, 0);
    return emit(c, 0, &idx);
}

static mcp_status infer_gather_nd(ictx *c)
{
    stype x, idx, t;
    if (!in_type(c, 0, &x) || !in_type(c, 1, &idx)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    int64_t b = mcp_node_attr_int(c->n, "batch_dims", 0);
    if (x.rank < 0 || idx.rank < 1 || !dim_known(idx.d[idx.rank - 1])) return emit(c, 0, &t);
    int64_t last = idx.d[idx.rank - 1].v;
    if (b < 0 || b >= idx.rank || b >= x.rank || last > x.rank - b) return emit(c, 0, &t);
    int64_t r = idx.rank - 1 + (x.rank - b - last);
    if (r > MCP_MAX_RANK) return emit(c, 0, &t);
    t.rank = (int)r;
    int o = 0;
    for (int i = 0; i < idx.rank - 1; i++) t.d[o++] = idx.d[i];
    for (int64_t i = b + last; i < x.rank; i++) t.d[o++] = x.d[i];
    return emit(c, 0, &t);
}

/* Reduction over axes[] (already normalized) with keepdims. */
static void reduce_dims(const stype *x, const bool *red, bool keep, stype *t)
{
    t->rank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) t->d[t->rank++] = x->d[i];
        else if (keep) t->d[t->rank++] = dim_static(1);
    }
}

static mcp_status infer_argmax(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, MCP_DTYPE_INT64);
    if (x.rank < 0) return emit(c, 0, &t);
    int axis;
    if (!norm_axis(mcp_node_attr_int(c->n, "axis", 0), x.rank, &axis))
        return fail(c, "attribute 'axis' is out of range for input rank %d", x.rank);
    bool red[MCP_MAX_RANK] = {false};
    red[axis] = true;
    reduce_dims(&x, red, mcp_node_attr_int(c->n, "keepdims", 1) != 0, &t);
    return emit(c, 0, &t);
}

static mcp_status infer_reduce(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    /* ReduceSum took axes as an input from opset 13, the others from 18;
     * noop_with_empty_axes arrived with the input. */
    int from = strcmp(c->n->op_type, "ReduceSum") == 0 ? 13 : 18;
    bool keep = mcp_node_attr_int(c->n, "keepdims", 1) != 0;
    int64_t axes[MCP_MAX_RANK], na;
    bool known;
    read_axes(c, from, axes, &na, &known);
    if (!known) {
        if (keep && x.rank >= 0) st_rank(&t, x.dtype, x.rank);
        return emit(c, 0, &t);
    }
    if (x.rank < 0) return emit(c, 0, &t);
    bool red[MCP_MAX_RANK] = {false};
    if (na == 0) {
        bool noop = c->n->opset >= from && mcp_node_attr_int(c->n, "noop_with_empty_axes", 0) != 0;
        if (noop) return emit(c, 0, &x);
        for (int i = 0; i < x.rank; i++) red[i] = true;
    }
    for (int64_t j = 0; j < na; j++) {
        int a;
        if (!norm_axis(axes[j], x.rank, &a)) return fail(c, "axis %lld is out of range for rank %d", (long long)axes[j], x.rank);
        red[a] = true;
    }
    reduce_dims(&x, red, keep, &t);
    return emit(c, 0, &t);
}

static void constant_type(const mcp_node *n, stype *t)
{
    st_unknown(t, MCP_DTYPE_UNDEFINED);
    const mcp_attr *a;
    if ((a = mcp_node_attr(n, "value")) && a->type == MCP_ATTR_TENSOR) {
        st_rank(t, a->t.dtype, a->t.rank);
        for (int i = 0; i < t->rank; i++) t->d[i] = dim_static(a->t.dims[i]);
    } else if ((a = mcp_node_attr(n, "value_float")) && a->type == MCP_ATTR_FLOAT) {
        st_rank(t, MCP_DTYPE_FLOAT, 0);
    } else if ((a = mcp_node_attr(n, "value_int")) && a->type == MCP_ATTR_INT) {
        st_rank(t, MCP_DTYPE_INT64, 0);
    } else if ((a = mcp_node_attr(n, "value_string")) && a->type == MCP_ATTR_STRING) {
        st_rank(t, MCP_DTYPE_STRING, 0);
    } else if ((a = mcp_node_attr(n, "value_floats")) && a->type == MCP_ATTR_FLOATS) {
        st_rank(t, MCP_DTYPE_FLOAT, 1);
        t->d[0] = dim_static(a->count);
    } else if ((a = mcp_node_attr(n, "value_ints")) && a->type == MCP_ATTR_INTS) {
        st_rank(t, MCP_DTYPE_INT64, 1);
        t->d[0] = dim_static(a->count);
    } else if ((a = mcp_node_attr(n, "value_strings")) && a->type == MCP_ATTR_STRINGS) {
        st_rank(t, MCP_DTYPE_STRING, 1);
        t->d[0] = dim_static(a->count);
    }
}

static mcp_status infer_constant(ictx *c)
{
    stype t;
    constant_type(c->n, &t);
    return emit(c, 0, &t);
}

static mcp_status infer_constant_of_shape(ictx *c)
{
    stype t;
    const mcp_attr *a = mcp_node_attr(c->n, "value");
    mcp_dtype dt = a && a->type == MCP_ATTR_TENSOR ? a->t.dtype : MCP_DTYPE_FLOAT;
    st_unknown(&t, dt);
    pval s;
    if (shape_arg(c, 0, &s)) {
        st_rank(&t, dt, s.n);
        for (int i = 0; i < s.n; i++) {
            if (!s.e[i].known) {
                t.d[i].sym = s.e[i].sym;
                continue;
            }
            if (s.e[i].v < 0) return fail(c, "input '%s' holds a negative size %lld", in_name(c, 0), (long long)s.e[i].v);
            t.d[i] = dim_static(s.e[i].v);
        }
    } else {
        stype st;
        if (in_type(c, 0, &st) && st.rank == 1 && dim_known(st.d[0]) && st.d[0].v <= MCP_MAX_RANK)
            st_rank(&t, dt, (int)st.d[0].v);
    }
    return emit(c, 0, &t);
}

static mcp_status infer_split(ictx *c)
{
    stype x;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    int nout = c->n->n_outputs;
    if (nout < 1) return MCP_STATUS_OK;
    stype unk;
    st_unknown(&unk, x.dtype);
    int axis = 0;
    bool axis_ok = x.rank >= 0 && norm_axis(mcp_node_attr_int(c->n, "axis", 0), x.rank, &axis);
    if (x.rank >= 0 && !axis_ok) return fail(c, "attribute 'axis' is out of range for input rank %d", x.rank);
    /* Sizes per output: -1 where unknown. */
    int64_t *sizes = mcp_malloc((size_t)nout * sizeof *sizes);
    if (!sizes) return mcp_err_set(c->err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < nout; i++) sizes[i] = -1;
    mcp_status st = MCP_STATUS_OK;
    int64_t ns = 0;
    bool given = false;
    bool dynamic = false;
    if (c->n->opset < 13 && !(c->n->opset < 2 && has_in(c, 1))) {
        const int64_t *a = mcp_node_attr_ints(c->n, "split", &ns);
        if (a && ns == nout) {
            for (int i = 0; i < nout; i++) sizes[i] = a[i];
            given = true;
        } else if (a) {
            st = fail(c, "attribute 'split' has %lld entries for %d outputs", (long long)ns, nout);
        }
    } else if (has_in(c, 1)) {
        if (const_ints(c, 1, nout, sizes, &ns) && ns == nout) given = true;
        else if (const_numel(c, 1) >= 0 && const_numel(c, 1) != nout)
            st = fail(c, "input 'split' has %lld entries for %d outputs", (long long)const_numel(c, 1), nout);
        else dynamic = true;
        if (!given)
            for (int i = 0; i < nout; i++) sizes[i] = -1;
    }
    if (st == MCP_STATUS_OK && !given && !dynamic && axis_ok && dim_known(x.d[axis])) {
        int64_t dim = x.d[axis].v;
        if (mcp_node_attr(c->n, "num_outputs")) {
            /* Opset 18: chunks of ceil(dim / n), the last one smaller. */
            int64_t chunk = dim / nout + (dim % nout != 0), left = dim;
            for (int i = 0; i < nout; i++) {
                sizes[i] = left < chunk ? left : chunk;
                left -= sizes[i];
            }
        } else if (dim % nout == 0) {
            for (int i = 0; i < nout; i++) sizes[i] = dim / nout;
        } else {
            st = fail(c, "input '%s' has size %lld on axis %d, which does not split evenly into %d outputs", in_name(c, 0),
                      (long long)dim, axis, nout);
        }
    }
    if (st == MCP_STATUS_OK && given) {
        int64_t sum = 0;
        bool ok = true;
        for (int i = 0; i < nout; i++)
            if (sizes[i] < 0 || !add_i64(sum, sizes[i], &sum)) ok = false;
        if (!ok) st = fail(c, "split sizes must be non-negative");
        else if (axis_ok && dim_known(x.d[axis]) && sum != x.d[axis].v)
            st = fail(c, "split sizes add up to %lld but input '%s' has %lld on axis %d", (long long)sum, in_name(c, 0),
                      (long long)x.d[axis].v, axis);
    }
    for (int i = 0; st == MCP_STATUS_OK && i < nout; i++) {
        if (x.rank < 0) {
            st = emit(c, i, &unk);
            continue;
        }
        stype t = x;
        t.d[axis] = sizes[i] >= 0 ? dim_static(sizes[i]) : DIM_UNKNOWN;
        st = emit(c, i, &t);
    }
    mcp_free(sizes);
    return st;
}

/* Length of a slice of a dim of size d (ONNX Slice-10 clamping rules). */
static int64_t slice_len(int64_t d, int64_t start, int64_t end, int64_t step)
{
    if (d == 0) return 0;
    if (start < 0) start += d;
    if (end < 0) end += d;
    if (step > 0) {
        start = start < 0 ? 0 : start > d ? d : start;
        end = end < 0 ? 0 : end > d ? d : end;
        if (end <= start) return 0;
        return (end - start - 1) / step + 1;
    }
    start = start < 0 ? 0 : start > d - 1 ? d - 1 : start;
    end = end < -1 ? -1 : end > d - 1 ? d - 1 : end;
    if (start <= end) return 0;
    /* step is negative and not INT64_MIN (checked by the caller). */
    return (start - end - 1) / (-step) + 1;
}

static mcp_status infer_slice(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    if (x.rank < 0) return emit(c, 0, &t);
    int64_t starts[MCP_MAX_RANK], ends[MCP_MAX_RANK], axes[MCP_MAX_RANK], steps[MCP_MAX_RANK];
    int64_t ns = 0, ne = 0, na = -1, nst = -1;
    bool ok = true;
    if (c->n->opset < 10) {
        const int64_t *s = mcp_node_attr_ints(c->n, "starts", &ns);
        const int64_t *e = mcp_node_attr_ints(c->n, "ends", &ne);
        int64_t cnt;
        const int64_t *a = mcp_node_attr_ints(c->n, "axes", &cnt);
        ok = s && e && ns <= MCP_MAX_RANK && ne <= MCP_MAX_RANK && (!a || cnt <= MCP_MAX_RANK);
        for (int64_t i = 0; ok && i < ns; i++) starts[i] = s[i];
        for (int64_t i = 0; ok && i < ne; i++) ends[i] = e[i];
        if (ok && a) {
            na = cnt;
            for (int64_t i = 0; i < cnt; i++) axes[i] = a[i];
        }
    } else {
        ok = const_ints(c, 1, MCP_MAX_RANK, starts, &ns) && const_ints(c, 2, MCP_MAX_RANK, ends, &ne);
        if (has_in(c, 3) && !const_ints(c, 3, MCP_MAX_RANK, axes, &na)) {
            na = -2;
            ok = false;
        }
        if (has_in(c, 4) && !const_ints(c, 4, MCP_MAX_RANK, steps, &nst)) ok = false;
    }
    /* Without constants the rank survives, and with constant axes so do
     * the axes that are not sliced. */
    st_rank(&t, x.dtype, x.rank);
    bool sliced[MCP_MAX_RANK] = {false};
    if (!ok) {
        bool axes_known = na >= 0;
        for (int64_t j = 0; axes_known && j < na; j++) {
            int a;
            if (!norm_axis(axes[j], x.rank, &a)) axes_known = false;
            else sliced[a] = true;
        }
        for (int i = 0; axes_known && i < x.rank; i++)
            if (!sliced[i]) t.d[i] = x.d[i];
        return emit(c, 0, &t);
    }
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return fail(c, "starts, ends, axes and steps have different lengths");
    t = x;
    for (int64_t j = 0; j < ns; j++) {
        int a = (int)j;
        if (na >= 0 && !norm_axis(axes[j], x.rank, &a)) return fail(c, "axis %lld is out of range for rank %d", (long long)axes[j], x.rank);
        if (na < 0 && j >= x.rank) return fail(c, "more starts than input dimensions");
        if (sliced[a]) return fail(c, "axis %d is sliced twice", a);
        sliced[a] = true;
        int64_t step = nst >= 0 ? steps[j] : 1;
        if (step == 0 || step == INT64_MIN) return fail(c, "slice step %lld on axis %d is invalid", (long long)step, a);
        sdim d = x.d[a];
        if (dim_known(d)) t.d[a] = dim_static(slice_len(d.v, starts[j], ends[j], step));
        else if (!(starts[j] == 0 && ends[j] >= SLICE_END_OPEN && step == 1)) t.d[a] = DIM_UNKNOWN;
    }
    return emit(c, 0, &t);
}

static mcp_status infer_expand(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    pval s;
    if (!shape_arg(c, 1, &s)) {
        stype st;
        if (x.rank >= 0 && in_type(c, 1, &st) && st.rank == 1 && dim_known(st.d[0]) && st.d[0].v <= MCP_MAX_RANK)
            st_rank(&t, x.dtype, x.rank > (int)st.d[0].v ? x.rank : (int)st.d[0].v);
        return emit(c, 0, &t);
    }
    if (x.rank < 0) return emit(c, 0, &t);
    int r = x.rank > s.n ? x.rank : s.n;
    st_rank(&t, x.dtype, r);
    for (int i = 0; i < r; i++) {
        int ia = i - (r - x.rank), ib = i - (r - s.n);
        sdim a = ia >= 0 ? x.d[ia] : dim_static(1);
        sdim b = dim_static(1);
        if (ib >= 0 && s.e[ib].known) {
            if (s.e[ib].v < 0) return fail(c, "shape input '%s' holds a negative size", in_name(c, 1));
            b = dim_static(s.e[ib].v);
        } else if (ib >= 0) {
            b.v = -1;
            b.sym = s.e[ib].sym;
        }
        if (!dim_broadcast(a, b, &t.d[i])) {
            char sa[256];
            return fail(c, "input '%s' %s cannot expand to the shape in '%s'", in_name(c, 0), fmt_stype(&x, sa, sizeof sa),
                        in_name(c, 1));
        }
    }
    return emit(c, 0, &t);
}

static mcp_status infer_tile(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    if (x.rank < 0) return emit(c, 0, &t);
    st_rank(&t, x.dtype, x.rank);
    pval rep;
    if (!shape_arg(c, 1, &rep)) return emit(c, 0, &t);
    if (rep.n != x.rank) return fail(c, "input 'repeats' has %d entries for input rank %d", rep.n, x.rank);
    for (int i = 0; i < x.rank; i++) {
        if (!rep.e[i].known) continue;
        if (rep.e[i].v < 0) return fail(c, "input 'repeats' holds a negative count");
        t.d[i] = dim_mul(x.d[i], dim_static(rep.e[i].v));
    }
    return emit(c, 0, &t);
}

static mcp_status infer_pad(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    if (x.rank < 0) return emit(c, 0, &t);
    st_rank(&t, x.dtype, x.rank);
    int64_t pads[2 * MCP_MAX_RANK], n = 0;
    bool ok;
    if (c->n->opset < 11) {
        const int64_t *p = mcp_node_attr_ints(c->n, c->n->opset < 2 ? "paddings" : "pads", &n);
        ok = p && n <= 2 * MCP_MAX_RANK;
        for (int64_t i = 0; ok && i < n; i++) pads[i] = p[i];
    } else {
        /* Opset 18's `axes` input pads a subset of axes; not handled. */
        ok = !has_in(c, 3) && const_ints(c, 1, 2 * MCP_MAX_RANK, pads, &n);
    }
    if (!ok) return emit(c, 0, &t);
    if (n != 2 * x.rank) return fail(c, "pads have %lld entries for input rank %d", (long long)n, x.rank);
    for (int i = 0; i < x.rank; i++) {
        int64_t pb = pads[i], pe = pads[x.rank + i], o;
        if (pb == 0 && pe == 0) t.d[i] = x.d[i];
        else if (dim_known(x.d[i]) && add_i64(x.d[i].v, pb, &o) && add_i64(o, pe, &o) && o >= 0) t.d[i] = dim_static(o);
    }
    return emit(c, 0, &t);
}

static mcp_status infer_resize(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    if (x.rank < 0) return emit(c, 0, &t);
    st_rank(&t, x.dtype, x.rank);
    bool upsample = strcmp(c->n->op_type, "Upsample") == 0;
    double scales[MCP_MAX_RANK];
    int64_t sizes[MCP_MAX_RANK], nsc = -1, nsz = -1;
    if (mcp_node_attr(c->n, "axes")) return emit(c, 0, &t);
    const char *policy = mcp_node_attr_string(c->n, "keep_aspect_ratio_policy", "stretch");
    if (upsample && c->n->opset < 9) {
        int64_t cnt;
        const float *f = mcp_node_attr_floats(c->n, "scales", &cnt);
        if (!f || cnt > MCP_MAX_RANK) return emit(c, 0, &t);
        for (int64_t i = 0; i < cnt; i++) scales[i] = f[i];
        nsc = cnt;
    } else if (upsample || c->n->opset < 11) {
        if (!const_floats(c, 1, MCP_MAX_RANK, scales, &nsc)) return emit(c, 0, &t);
    } else {
        /* An input of zero elements stands for an absent one. */
        bool sc = has_in(c, 2) && const_numel(c, 2) != 0;
        bool sz = has_in(c, 3) && const_numel(c, 3) != 0;
        if (sc && !const_floats(c, 2, MCP_MAX_RANK, scales, &nsc)) return emit(c, 0, &t);
        if (sz && !const_ints(c, 3, MCP_MAX_RANK, sizes, &nsz)) return emit(c, 0, &t);
        if (nsz >= 0 && strcmp(policy, "stretch") != 0) return emit(c, 0, &t);
    }
    if (nsz >= 0) {
        if (nsz != x.rank) return fail(c, "input 'sizes' has %lld entries for input rank %d", (long long)nsz, x.rank);
        for (int i = 0; i < x.rank; i++)
            if (sizes[i] >= 0) t.d[i] = dim_static(sizes[i]);
        return emit(c, 0, &t);
    }
    if (nsc < 0) return emit(c, 0, &t);
    if (nsc != x.rank) return fail(c, "scales have %lld entries for input rank %d", (long long)nsc, x.rank);
    for (int i = 0; i < x.rank; i++) {
        if (scales[i] == 1.0) t.d[i] = x.d[i];
        else if (dim_known(x.d[i]) && scales[i] > 0 && isfinite(scales[i])) {
            double o = floor(scales[i] * (double)x.d[i].v);
            if (o < 9.0e15) t.d[i] = dim_static((int64_t)o);
        }
    }
    return emit(c, 0, &t);
}

static mcp_status infer_depth_space(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    if (x.rank != 4) return emit(c, 0, &t);
    int64_t b = mcp_node_attr_int(c->n, "blocksize", 0);
    if (b < 1 || b > WINDOW_SIZE_MAX) return emit(c, 0, &t);
    t = x;
    if (strcmp(c->n->op_type, "DepthToSpace") == 0) {
        t.d[1] = dim_known(x.d[1]) && x.d[1].v % (b * b) == 0 ? dim_static(x.d[1].v / (b * b)) : DIM_UNKNOWN;
        t.d[2] = dim_mul(x.d[2], dim_static(b));
        t.d[3] = dim_mul(x.d[3], dim_static(b));
    } else {
        t.d[1] = dim_mul(x.d[1], dim_static(b * b));
        for (int i = 2; i < 4; i++)
            t.d[i] = dim_known(x.d[i]) && x.d[i].v % b == 0 ? dim_static(x.d[i].v / b) : DIM_UNKNOWN;
    }
    return emit(c, 0, &t);
}

/* ---- misc ops with simple output types ---- */

static mcp_status infer_nonzero(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_rank(&t, MCP_DTYPE_INT64, 2);
    /* A scalar counts as a one-element vector, as in numpy. */
    if (x.rank >= 0) t.d[0] = dim_static(x.rank > 0 ? x.rank : 1);
    return emit(c, 0, &t);
}

static mcp_status infer_topk(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    t = x;
    int axis;
    if (x.rank >= 0) {
        if (!norm_axis(mcp_node_attr_int(c->n, "axis", -1), x.rank, &axis))
            return fail(c, "attribute 'axis' is out of range for input rank %d", x.rank);
        int64_t k = -1, n;
        if (c->n->opset < 10) k = mcp_node_attr_int(c->n, "k", -1);
        else if (!const_ints(c, 1, 1, &k, &n) || n != 1) k = -1;
        t.d[axis] = k >= 0 ? dim_static(k) : DIM_UNKNOWN;
    }
    mcp_status st = emit(c, 0, &t);
    if (st != MCP_STATUS_OK) return st;
    t.dtype = MCP_DTYPE_INT64;
    return emit(c, 1, &t);
}

static mcp_status infer_range(ictx *c)
{
    stype t;
    mcp_dtype dt = in_dtype(c, 0);
    st_rank(&t, dt, 1);
    const mcp_tensor *s = const_input(c->g, in_value(c, 0)), *l = const_input(c->g, in_value(c, 1)),
                     *d = const_input(c->g, in_value(c, 2));
    if (s && l && d && mcp_tensor_numel(s) == 1 && mcp_tensor_numel(l) == 1 && mcp_tensor_numel(d) == 1 &&
        mcp_dtype_is_numeric(s->dtype) && s->dtype == l->dtype && s->dtype == d->dtype) {
        double a = mcp_tensor_get_f64(s, 0), b = mcp_tensor_get_f64(l, 0), step = mcp_tensor_get_f64(d, 0);
        if (mcp_dtype_is_integer(s->dtype)) {
            int64_t ia = mcp_tensor_get_i64(s, 0), ib = mcp_tensor_get_i64(l, 0), is = mcp_tensor_get_i64(d, 0);
            if (is != 0 && ia > -((int64_t)1 << 52) && ia < ((int64_t)1 << 52) && ib > -((int64_t)1 << 52) &&
                ib < ((int64_t)1 << 52)) {
                int64_t diff = ib - ia;
                int64_t n = is > 0 ? (diff > 0 ? (diff + is - 1) / is : 0) : (diff < 0 ? (-diff + -is - 1) / -is : 0);
                t.d[0] = dim_static(n);
            }
        } else if (step != 0 && isfinite(a) && isfinite(b) && isfinite(step)) {
            double n = ceil((b - a) / step);
            if (n < 0) n = 0;
            if (n < 9.0e15) t.d[0] = dim_static((int64_t)n);
        }
    }
    return emit(c, 0, &t);
}

static mcp_status infer_onehot(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    mcp_dtype dt = in_dtype(c, 2);
    st_unknown(&t, dt);
    if (x.rank < 0 || x.rank + 1 > MCP_MAX_RANK) return emit(c, 0, &t);
    int r = x.rank + 1, axis;
    if (!norm_axis(mcp_node_attr_int(c->n, "axis", -1), r, &axis))
        return fail(c, "attribute 'axis' is out of range for output rank %d", r);
    sdim depth = DIM_UNKNOWN;
    const mcp_tensor *d = const_input(c->g, in_value(c, 1));
    if (d && mcp_tensor_numel(d) == 1 && mcp_dtype_is_numeric(d->dtype)) {
        double v = mcp_tensor_get_f64(d, 0);
        if (v >= 0 && v < 9.0e15) depth = dim_static((int64_t)v);
    }
    t.rank = r;
    for (int i = 0, j = 0; i < r; i++) t.d[i] = i == axis ? depth : x.d[j++];
    return emit(c, 0, &t);
}

static mcp_status infer_random(ictx *c)
{
    stype t;
    mcp_dtype dt;
    mcp_status st = attr_dtype(c, "dtype", MCP_DTYPE_FLOAT, &dt);
    if (st != MCP_STATUS_OK) return st;
    st_unknown(&t, dt);
    int64_t n;
    const int64_t *shape = mcp_node_attr_ints(c->n, "shape", &n);
    if (shape && n <= MCP_MAX_RANK) {
        st_rank(&t, t.dtype, (int)n);
        for (int i = 0; i < (int)n; i++) t.d[i] = shape[i] >= 0 ? dim_static(shape[i]) : DIM_UNKNOWN;
    }
    return emit(c, 0, &t);
}

static mcp_status infer_multinomial(ictx *c)
{
    stype x, t;
    mcp_dtype dt;
    mcp_status st = attr_dtype(c, "dtype", MCP_DTYPE_INT32, &dt);
    if (st != MCP_STATUS_OK) return st;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_rank(&t, dt, 2);
    if (x.rank == 2) t.d[0] = x.d[0];
    int64_t ss = mcp_node_attr_int(c->n, "sample_size", 1);
    if (ss >= 0) t.d[1] = dim_static(ss);
    return emit(c, 0, &t);
}

static mcp_status infer_det(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    if (x.rank >= 2) {
        t = x;
        t.rank = x.rank - 2;
    }
    return emit(c, 0, &t);
}

static mcp_status infer_compress(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    const mcp_attr *a = mcp_node_attr(c->n, "axis");
    if (!a) {
        st_rank(&t, x.dtype, 1);
    } else if (x.rank >= 0) {
        int axis;
        if (!norm_axis(a->i, x.rank, &axis)) return fail(c, "attribute 'axis' is out of range for input rank %d", x.rank);
        t = x;
        t.d[axis] = DIM_UNKNOWN;
    }
    return emit(c, 0, &t);
}

/* RNN / GRU / LSTM: Y [seq, dirs, batch, hidden] (layout 0) and the last
 * states [dirs, batch, hidden]; layout 1 puts batch first. */
static mcp_status infer_rnn(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    int64_t hidden = mcp_node_attr_int(c->n, "hidden_size", -1);
    const char *dir = mcp_node_attr_string(c->n, "direction", "forward");
    int64_t layout = c->n->opset >= 14 ? mcp_node_attr_int(c->n, "layout", 0) : 0;
    sdim seq = DIM_UNKNOWN, batch = DIM_UNKNOWN;
    if (x.rank == 3) {
        seq = x.d[layout ? 1 : 0];
        batch = x.d[layout ? 0 : 1];
    }
    sdim dirs = dim_static(strcmp(dir, "bidirectional") == 0 ? 2 : 1);
    sdim h = hidden >= 0 ? dim_static(hidden) : DIM_UNKNOWN;
    st_rank(&t, x.dtype, 4);
    if (layout) {
        t.d[0] = batch;
        t.d[1] = seq;
        t.d[2] = dirs;
    } else {
        t.d[0] = seq;
        t.d[1] = dirs;
        t.d[2] = batch;
    }
    t.d[3] = h;
    mcp_status st = emit(c, 0, &t);
    st_rank(&t, x.dtype, 3);
    t.d[layout ? 0 : 1] = batch;
    t.d[layout ? 1 : 0] = dirs;
    t.d[2] = h;
    for (int k = 1; st == MCP_STATUS_OK && k < 3; k++) st = emit(c, k, &t);
    return st;
}

static mcp_status infer_quantize(ictx *c)
{
    stype t;
    mcp_dtype od;
    mcp_status st = attr_output_dtype(c, &od);
    if (st != MCP_STATUS_OK) return st;
    if (od != MCP_DTYPE_UNDEFINED && has_in(c, 2) && in_dtype(c, 2) != MCP_DTYPE_UNDEFINED && in_dtype(c, 2) != od)
        return fail(c, "attribute 'output_dtype' (%s) differs from the type of 'y_zero_point' (%s)", mcp_dtype_name(od),
                    mcp_dtype_name(in_dtype(c, 2)));
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    /* The output takes the zero point's type, else output_dtype's, else
     * uint8. */
    t.dtype = has_in(c, 2) ? in_dtype(c, 2) : od != MCP_DTYPE_UNDEFINED ? od : MCP_DTYPE_UINT8;
    return emit(c, 0, &t);
}

static mcp_status infer_dequantize(ictx *c)
{
    stype t;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    mcp_dtype od;
    mcp_status st = attr_output_dtype(c, &od);
    if (st != MCP_STATUS_OK) return st;
    /* Float until opset 19, then the scale's type, or output_dtype's. */
    t.dtype = od != MCP_DTYPE_UNDEFINED ? od : c->n->opset >= 19 ? in_dtype(c, 1) : MCP_DTYPE_FLOAT;
    return emit(c, 0, &t);
}

static mcp_status infer_dynamic_quantize(ictx *c)
{
    stype t;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    t.dtype = MCP_DTYPE_UINT8;
    mcp_status st = emit(c, 0, &t);
    st_rank(&t, MCP_DTYPE_FLOAT, 0);
    if (st == MCP_STATUS_OK) st = emit(c, 1, &t);
    t.dtype = MCP_DTYPE_UINT8;
    if (st == MCP_STATUS_OK) st = emit(c, 2, &t);
    return st;
}

/* ---- control flow ---- */

static const mcp_graph *attr_graph(const mcp_node *n, const char *name)
{
    const mcp_attr *a = mcp_node_attr(n, name);
    return a && a->type == MCP_ATTR_GRAPH ? a->g : NULL;
}

/* If: each output is what both branches agree on. */
static mcp_status infer_if(ictx *c)
{
    const mcp_graph *a = attr_graph(c->n, "then_branch"), *b = attr_graph(c->n, "else_branch");
    if (!a || !b || a->n_outputs != c->n->n_outputs || b->n_outputs != c->n->n_outputs) return MCP_STATUS_OK;
    for (int k = 0; k < c->n->n_outputs; k++) {
        const mcp_type *ta = &a->values[a->outputs[k]].type, *tb = &b->values[b->outputs[k]].type;
        if (ta->kind != MCP_VALUE_TENSOR || tb->kind != MCP_VALUE_TENSOR || ta->is_optional || tb->is_optional)
            continue;
        stype sa, sb, t;
        stype_from_type(ta, &sa);
        stype_from_type(tb, &sb);
        st_unknown(&t, sa.dtype == sb.dtype ? sa.dtype : MCP_DTYPE_UNDEFINED);
        if (sa.rank >= 0 && sa.rank == sb.rank) {
            t.rank = sa.rank;
            for (int i = 0; i < t.rank; i++) {
                sdim x = sa.d[i], y = sb.d[i];
                t.d[i] = (dim_known(x) && x.v == y.v) || same_sym(x, y) ? x : DIM_UNKNOWN;
            }
        }
        mcp_status st = emit(c, k, &t);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* Loop: carried values keep their dtype (shapes may change per iteration);
 * scan outputs stack the body's per-iteration values. */
static mcp_status infer_loop(ictx *c)
{
    const mcp_graph *body = attr_graph(c->n, "body");
    if (!body) return MCP_STATUS_OK;
    /* Body outputs: cond, then the carried values, then scan outputs. */
    int n_carried = c->n->n_inputs - 2;
    if (n_carried < 0 || n_carried > c->n->n_outputs || body->n_outputs != 1 + c->n->n_outputs) return MCP_STATUS_OK;
    for (int k = 0; k < c->n->n_outputs; k++) {
        const mcp_type *bt = &body->values[body->outputs[1 + k]].type;
        if (bt->kind != MCP_VALUE_TENSOR || bt->is_optional) continue;
        stype t, b;
        stype_from_type(bt, &b);
        st_unknown(&t, b.dtype ? b.dtype : k < n_carried ? in_dtype(c, 2 + k) : MCP_DTYPE_UNDEFINED);
        if (k >= n_carried && b.rank >= 0 && b.rank < MCP_MAX_RANK) {
            t.rank = b.rank + 1;
            t.d[0] = DIM_UNKNOWN;
            for (int i = 0; i < b.rank; i++) t.d[i + 1] = b.d[i];
        }
        mcp_status st = emit(c, k, &t);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* Scan (opset 9+): final states keep the initial states' type; scan outputs
 * take the body's dtype. */
static mcp_status infer_scan(ictx *c)
{
    const mcp_graph *body = attr_graph(c->n, "body");
    if (!body || c->n->opset < 9) return MCP_STATUS_OK;
    int64_t n_scan = mcp_node_attr_int(c->n, "num_scan_inputs", -1);
    int n_state = c->n->n_inputs - (int)n_scan;
    if (n_scan < 0 || n_state < 0 || body->n_outputs != c->n->n_outputs) return MCP_STATUS_OK;
    for (int k = 0; k < c->n->n_outputs; k++) {
        stype t;
        if (k < n_state) {
            if (!in_type(c, k, &t)) continue;
        } else {
            const mcp_type *bt = &body->values[body->outputs[k]].type;
            if (bt->kind != MCP_VALUE_TENSOR || bt->is_optional) continue;
            st_unknown(&t, bt->dtype);
        }
        mcp_status st = emit(c, k, &t);
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

/* Gives body input `idx` of a subgraph what the owner knows about it,
 * keeping any declaration; conflicts are left for the body to show. */
static mcp_status seed_body_input(mcp_graph *body, int idx, const stype *t)
{
    if (idx < 0 || idx >= body->n_inputs) return MCP_STATUS_OK;
    mcp_type *bt = &body->values[body->inputs[idx]].type;
    if (bt->kind != MCP_VALUE_TENSOR || bt->is_optional) return MCP_STATUS_OK;
    bool conflict;
    return merge_type(bt, t, &conflict);
}

static mcp_status seed_loop_body(ictx *c, mcp_graph *body)
{
    stype t;
    st_rank(&t, MCP_DTYPE_INT64, 0);
    mcp_status st = seed_body_input(body, 0, &t);
    t.dtype = MCP_DTYPE_BOOL;
    if (st == MCP_STATUS_OK) st = seed_body_input(body, 1, &t);
    for (int k = 2; st == MCP_STATUS_OK && k < c->n->n_inputs; k++) {
        st_unknown(&t, in_dtype(c, k));
        st = seed_body_input(body, k, &t);
    }
    return st;
}

static mcp_status seed_scan_body(ictx *c, mcp_graph *body)
{
    if (c->n->opset < 9) return MCP_STATUS_OK;
    int64_t n_scan = mcp_node_attr_int(c->n, "num_scan_inputs", -1);
    int n_state = c->n->n_inputs - (int)n_scan;
    if (n_scan < 0 || n_state < 0) return MCP_STATUS_OK;
    mcp_status st = MCP_STATUS_OK;
    for (int k = 0; st == MCP_STATUS_OK && k < c->n->n_inputs; k++) {
        stype t;
        if (k < n_state) {
            if (!in_type(c, k, &t)) continue;
        } else {
            st_unknown(&t, in_dtype(c, k));
        }
        st = seed_body_input(body, k, &t);
    }
    return st;
}

/* ---- value propagation ---- */

static bool pelem_arith(const char *op, pelem a, pelem b, pelem *out)
{
    *out = pelem_unknown();
    bool add = strcmp(op, "Add") == 0, sub = strcmp(op, "Sub") == 0, mul = strcmp(op, "Mul") == 0;
    /* Identities keep a symbolic element. */
    bool b0 = b.known && b.v == 0, b1 = b.known && b.v == 1;
    bool a0 = a.known && a.v == 0, a1 = a.known && a.v == 1;
    if (((add || sub) && b0) || ((mul || (!add && !sub)) && b1)) {
        *out = a;
        return true;
    }
    if ((add && a0) || (mul && a1)) {
        *out = b;
        return true;
    }
    if (!a.known || !b.known) return true;
    int64_t r;
    if (add) {
        if (!add_i64(a.v, b.v, &r)) return true;
    } else if (sub) {
        if (b.v == INT64_MIN || !add_i64(a.v, -b.v, &r)) return true;
    } else if (mul) {
        /* mul_i64 takes non-negative factors. */
        int64_t ma = a.v < 0 ? -a.v : a.v, mb = b.v < 0 ? -b.v : b.v;
        if (a.v == INT64_MIN || b.v == INT64_MIN || !mul_i64(ma, mb, &r)) return true;
        if ((a.v < 0) != (b.v < 0)) r = -r;
    } else {
        /* Integer Div only when exact, where truncation and flooring agree. */
        if (b.v == 0 || (a.v == INT64_MIN && b.v == -1) || a.v % b.v != 0) return true;
        r = a.v / b.v;
    }
    *out = pelem_known(r);
    return true;
}

/*
 * After a node's type rule: records what its integer output holds, for the
 * few ops that shape computations are made of.
 */
static mcp_status propagate(ictx *c)
{
    const mcp_node *n = c->n;
    const char *op = n->op_type;
    if (n->domain[0] != '\0' || n->n_outputs < 1 || !c->pv) return MCP_STATUS_OK;
    pval r, a, b;
    memset(&r, 0, sizeof r);
    if (strcmp(op, "Shape") == 0) {
        int xv = in_value(c, 0);
        stype x;
        if (xv < 0) return MCP_STATUS_OK;
        stype_from_type(&c->g->values[xv].type, &x);
        if (x.rank < 0) return MCP_STATUS_OK;
        int64_t rk = x.rank;
        int64_t s = n->opset >= 15 ? mcp_node_attr_int(n, "start", 0) : 0;
        int64_t e = n->opset >= 15 ? mcp_node_attr_int(n, "end", rk) : rk;
        if (s < 0) s += rk;
        if (e < 0) e += rk;
        s = s < 0 ? 0 : s > rk ? rk : s;
        e = e < 0 ? 0 : e > rk ? rk : e;
        for (int64_t i = s; i < e; i++) {
            pelem el = x.d[i].v >= 0 ? pelem_known(x.d[i].v) : pelem_unknown();
            el.sym = x.d[i].sym;
            el.src_value = xv;
            el.src_dim = (int)i;
            r.e[r.n++] = el;
        }
        return set_pval(c, 0, &r);
    }
    if (strcmp(op, "Size") == 0) {
        stype x;
        if (!in_type(c, 0, &x) || x.rank < 0) return MCP_STATUS_OK;
        int64_t numel = 1;
        for (int i = 0; i < x.rank; i++)
            if (!dim_known(x.d[i]) || !mul_i64(numel, x.d[i].v, &numel)) return MCP_STATUS_OK;
        r.n = 1;
        r.scalar = true;
        r.e[0] = pelem_known(numel);
        return set_pval(c, 0, &r);
    }
    if (strcmp(op, "ConstantOfShape") == 0) {
        /* A short 1-D integer fill, as in Concat(prefix, ones(k)). */
        const mcp_attr *v = mcp_node_attr(n, "value");
        if (!v || v->type != MCP_ATTR_TENSOR || !mcp_dtype_is_integer(v->t.dtype) || mcp_tensor_numel(&v->t) != 1)
            return MCP_STATUS_OK;
        if (!in_pval(c, 0, &a) || a.scalar || a.n != 1 || !a.e[0].known || a.e[0].v < 0 || a.e[0].v > MCP_MAX_RANK)
            return MCP_STATUS_OK;
        r.n = (int)a.e[0].v;
        for (int i = 0; i < r.n; i++) r.e[i] = pelem_known(mcp_tensor_get_i64(&v->t, 0));
        return set_pval(c, 0, &r);
    }
    if (strcmp(op, "Neg") == 0) {
        if (!in_pval(c, 0, &a)) return MCP_STATUS_OK;
        for (int i = 0; i < a.n; i++) {
            if (a.e[i].known && a.e[i].v != INT64_MIN) a.e[i] = pelem_known(-a.e[i].v);
            else a.e[i] = pelem_unknown();
        }
        return set_pval(c, 0, &a);
    }
    if (strcmp(op, "Identity") == 0 || strcmp(op, "Cast") == 0) {
        if (strcmp(op, "Cast") == 0 && !mcp_dtype_is_integer((mcp_dtype)mcp_node_attr_int(n, "to", 0)))
            return MCP_STATUS_OK;
        if (!in_pval(c, 0, &a)) return MCP_STATUS_OK;
        return set_pval(c, 0, &a);
    }
    if (strcmp(op, "Gather") == 0) {
        if (!in_pval(c, 0, &a) || a.scalar || !in_pval(c, 1, &b)) return MCP_STATUS_OK;
        int64_t axis = mcp_node_attr_int(n, "axis", 0);
        if (axis != 0 && axis != -1) return MCP_STATUS_OK;
        for (int i = 0; i < b.n; i++) {
            if (!b.e[i].known || b.e[i].v < -(int64_t)a.n || b.e[i].v >= a.n) return MCP_STATUS_OK;
            r.e[r.n++] = a.e[b.e[i].v < 0 ? b.e[i].v + a.n : b.e[i].v];
        }
        r.scalar = b.scalar;
        return set_pval(c, 0, &r);
    }
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0) {
        if (!in_pval(c, 0, &a)) return MCP_STATUS_OK;
        bool unsq = op[0] == 'U';
        /* Only the scalar <-> [1] moves, with axes [0] / [-1] or none. */
        int64_t axes[MCP_MAX_RANK], na = 0;
        bool known;
        read_axes(c, 13, axes, &na, &known);
        if (!known || na > 1 || (na == 1 && axes[0] != 0 && axes[0] != -1)) return MCP_STATUS_OK;
        if (unsq ? !(a.scalar && na == 1) : !(!a.scalar && a.n == 1)) return MCP_STATUS_OK;
        a.scalar = !unsq;
        return set_pval(c, 0, &a);
    }
    if (strcmp(op, "Concat") == 0) {
        for (int k = 0; k < n->n_inputs; k++) {
            if (!in_pval(c, k, &a) || a.scalar || r.n + a.n > MCP_MAX_RANK) return MCP_STATUS_OK;
            for (int i = 0; i < a.n; i++) r.e[r.n++] = a.e[i];
        }
        return n->n_inputs > 0 ? set_pval(c, 0, &r) : MCP_STATUS_OK;
    }
    if (strcmp(op, "Slice") == 0 && n->opset >= 10) {
        int64_t st[MCP_MAX_RANK], en[MCP_MAX_RANK], ax[MCP_MAX_RANK], sp[MCP_MAX_RANK], ns, ne, na = 1, nsp = 1;
        ax[0] = 0;
        sp[0] = 1;
        if (!in_pval(c, 0, &a) || a.scalar || !const_ints(c, 1, MCP_MAX_RANK, st, &ns) ||
            !const_ints(c, 2, MCP_MAX_RANK, en, &ne) || ns != 1 || ne != 1)
            return MCP_STATUS_OK;
        if (has_in(c, 3) && (!const_ints(c, 3, MCP_MAX_RANK, ax, &na) || na != 1 || (ax[0] != 0 && ax[0] != -1)))
            return MCP_STATUS_OK;
        if (has_in(c, 4) && (!const_ints(c, 4, MCP_MAX_RANK, sp, &nsp) || nsp != 1 || sp[0] == 0 || sp[0] == INT64_MIN))
            return MCP_STATUS_OK;
        int64_t d = a.n, s0 = st[0], e0 = en[0], step = sp[0];
        int64_t len = slice_len(d, s0, e0, step);
        if (s0 < 0) s0 += d;
        s0 = step > 0 ? (s0 < 0 ? 0 : s0 > d ? d : s0) : (s0 < 0 ? 0 : s0 > d - 1 ? d - 1 : s0);
        for (int64_t i = 0; i < len; i++) r.e[r.n++] = a.e[s0 + i * step];
        return set_pval(c, 0, &r);
    }
    if (strcmp(op, "Add") == 0 || strcmp(op, "Sub") == 0 || strcmp(op, "Mul") == 0 || strcmp(op, "Div") == 0) {
        if (!in_pval(c, 0, &a) || !in_pval(c, 1, &b)) return MCP_STATUS_OK;
        if (a.n != b.n && a.n != 1 && b.n != 1) return MCP_STATUS_OK;
        r.n = a.n > b.n ? a.n : b.n;
        r.scalar = a.scalar && b.scalar;
        for (int i = 0; i < r.n; i++) pelem_arith(op, a.e[a.n == 1 ? 0 : i], b.e[b.n == 1 ? 0 : i], &r.e[i]);
        return set_pval(c, 0, &r);
    }
    return MCP_STATUS_OK;
}

/* ---- Attention (Y, present_key, present_value, qk_matmul_output) ---- */

static sdim dim_sum(sdim a, sdim b)
{
    return dim_known(a) && dim_known(b) && a.v <= INT64_MAX - b.v ? dim_static(a.v + b.v) : DIM_UNKNOWN;
}

static sdim dim_div(sdim a, int64_t by)
{
    return dim_known(a) && by > 0 && a.v % by == 0 ? dim_static(a.v / by) : DIM_UNKNOWN;
}

static mcp_status infer_attention(ictx *c)
{
    stype q, k, v, y, pk, pv, qk;
    if (!in_type(c, 0, &q) || !in_type(c, 1, &k) || !in_type(c, 2, &v)) return MCP_STATUS_OK;
    st_unknown(&y, q.dtype);
    st_unknown(&pk, k.dtype);
    st_unknown(&pv, v.dtype);
    st_unknown(&qk, q.dtype);
    int64_t qh = mcp_node_attr_int(c->n, "q_num_heads", 0), kvh = mcp_node_attr_int(c->n, "kv_num_heads", 0);
    sdim batch = DIM_UNKNOWN, hq = DIM_UNKNOWN, hkv = DIM_UNKNOWN, sq = DIM_UNKNOWN, skv = DIM_UNKNOWN;
    sdim d = DIM_UNKNOWN, dv = DIM_UNKNOWN;
    bool known = false;
    if (q.rank == 4 && k.rank == 4 && v.rank == 4) {
        batch = q.d[0], hq = q.d[1], sq = q.d[2], d = q.d[3], hkv = k.d[1], skv = k.d[2], dv = v.d[3];
        y.rank = 4;
        y.d[0] = batch, y.d[1] = hq, y.d[2] = sq, y.d[3] = dv;
        known = true;
    } else if (q.rank == 3 && k.rank == 3 && v.rank == 3 && qh > 0 && kvh > 0) {
        batch = q.d[0], sq = q.d[1], skv = k.d[1], hq = dim_static(qh), hkv = dim_static(kvh);
        d = dim_div(q.d[2], qh), dv = dim_div(v.d[2], kvh);
        y.rank = 3;
        y.d[0] = batch, y.d[1] = sq, y.d[2] = dim_mul(hq, dv);
        known = true;
    }
    if (known && strcmp(c->n->domain, MCP_DOMAIN_INTERNAL) == 0) {
        /* The passes' Attention: leading dims broadcast as MatMul's do. */
        for (int a = 0; a < q.rank - 2; a++) {
            sdim b = q.d[a];
            if (!dim_broadcast(b, k.d[a], &b) || !dim_broadcast(b, v.d[a], &b)) b = DIM_UNKNOWN;
            y.d[a] = b;
        }
        if (q.rank == 3) y.d[2] = v.d[2]; /* one head: the heads attributes do not apply */
        return emit(c, 0, &y);
    }
    if (known) {
        stype past;
        sdim total = skv;
        if (has_in(c, 4)) total = in_type(c, 4, &past) && past.rank == 4 ? dim_sum(past.d[2], skv) : DIM_UNKNOWN;
        pk.rank = pv.rank = qk.rank = 4;
        pk.d[0] = pv.d[0] = qk.d[0] = batch;
        pk.d[1] = pv.d[1] = hkv;
        pk.d[2] = pv.d[2] = qk.d[3] = total;
        pk.d[3] = d, pv.d[3] = dv;
        qk.d[1] = hq, qk.d[2] = sq;
    }
    mcp_status st = emit(c, 0, &y);
    if (st == MCP_STATUS_OK) st = emit(c, 1, &pk);
    if (st == MCP_STATUS_OK) st = emit(c, 2, &pv);
    if (st == MCP_STATUS_OK) st = emit(c, 3, &qk);
    return st;
}

/* ---- operators after opset 17 (BitCast, Col2Im, CenterCropPad, AffineGrid, strings) ---- */

static mcp_status infer_bitcast(ictx *c)
{
    stype t;
    mcp_dtype to;
    mcp_status st = attr_dtype(c, "to", 0, &to);
    if (st != MCP_STATUS_OK) return st;
    if (!in_type(c, 0, &t)) return MCP_STATUS_OK;
    /* Widths in bits, so packed sub-byte types (size 0) are compared too; a
     * type without a fixed width (string) is the kernel's check to refuse. */
    if (t.dtype != MCP_DTYPE_UNDEFINED && mcp_dtype_bits(to) > 0 && mcp_dtype_bits(t.dtype) != mcp_dtype_bits(to))
        return fail(c, "input type %s and attribute 'to' %s differ in bit width", mcp_dtype_name(t.dtype), mcp_dtype_name(to));
    t.dtype = to;
    return emit(c, 0, &t);
}

/* [N, C / prod(block_shape), *image_shape] when the shapes are constant. */
static mcp_status infer_col2im(ictx *c)
{
    stype x, t;
    int64_t img[MCP_MAX_RANK], blk[MCP_MAX_RANK], ni = 0, nb = 0;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    st_unknown(&t, x.dtype);
    if (!const_ints(c, 1, MCP_MAX_RANK - 2, img, &ni)) return emit(c, 0, &t);
    st_rank(&t, x.dtype, (int)ni + 2);
    for (int64_t i = 0; i < ni; i++) {
        if (img[i] <= 0) return fail(c, "input 'image_shape' holds a non-positive size %lld", (long long)img[i]);
        t.d[2 + i] = dim_static(img[i]);
    }
    if (x.rank == 3) {
        t.d[0] = x.d[0];
        int64_t k = 1;
        bool ok = const_ints(c, 2, MCP_MAX_RANK - 2, blk, &nb) && nb == ni;
        for (int64_t i = 0; ok && i < nb; i++) ok = blk[i] > 0 && mul_i64(k, blk[i], &k);
        if (ok && dim_known(x.d[1])) {
            if (x.d[1].v % k != 0)
                return fail(c, "input dim 1 (%lld) is not a multiple of prod(block_shape) (%lld)", (long long)x.d[1].v,
                            (long long)k);
            t.d[1] = dim_static(x.d[1].v / k);
        }
    }
    return emit(c, 0, &t);
}

static mcp_status infer_center_crop_pad(ictx *c)
{
    stype x, t;
    int64_t shape[MCP_MAX_RANK], ns = 0, na = 0;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    t = x;
    if (x.rank < 0) return emit(c, 0, &t);
    for (int i = 0; i < x.rank; i++) t.d[i] = DIM_UNKNOWN;
    const int64_t *axes = mcp_node_attr_ints(c->n, "axes", &na);
    if (!axes) na = x.rank;
    bool moved[MCP_MAX_RANK] = {false};
    if (na > x.rank) return fail(c, "attribute 'axes' has %lld entries for input rank %d", (long long)na, x.rank);
    for (int64_t i = 0; i < na; i++) {
        int ax = (int)i;
        if (axes && !norm_axis(axes[i], x.rank, &ax)) return fail(c, "attribute 'axes' entry %lld is out of range", (long long)axes[i]);
        moved[ax] = true;
    }
    for (int i = 0; i < x.rank; i++)
        if (!moved[i]) t.d[i] = x.d[i];
    if (const_ints(c, 1, MCP_MAX_RANK, shape, &ns)) {
        if (ns != na) return fail(c, "input 'shape' has %lld entries for %lld axes", (long long)ns, (long long)na);
        for (int64_t i = 0; i < na; i++) {
            int ax = (int)i;
            if (axes) norm_axis(axes[i], x.rank, &ax);
            if (shape[i] < 0) return fail(c, "input 'shape' holds a negative size %lld", (long long)shape[i]);
            t.d[ax] = dim_static(shape[i]);
        }
    }
    return emit(c, 0, &t);
}

/* [N, H, W, 2] or [N, D, H, W, 3] from a constant `size`. */
static mcp_status infer_affine_grid(ictx *c)
{
    stype t;
    int64_t size[5], ns = 0;
    mcp_dtype dt = in_dtype(c, 0);
    st_unknown(&t, dt);
    if (!const_ints(c, 1, 5, size, &ns)) return emit(c, 0, &t);
    if (ns != 4 && ns != 5) return fail(c, "input 'size' has %lld entries, expected 4 or 5", (long long)ns);
    st_rank(&t, dt, (int)ns);
    t.d[0] = dim_static(size[0]);
    for (int64_t i = 2; i < ns; i++) {
        if (size[i] <= 0) return fail(c, "input 'size' holds a non-positive size %lld", (long long)size[i]);
        t.d[i - 1] = dim_static(size[i]);
    }
    t.d[ns - 1] = dim_static(ns - 2);
    return emit(c, 0, &t);
}

static mcp_status infer_string_concat(ictx *c)
{
    stype t;
    bool ok;
    mcp_status st = broadcast_inputs(c, 0, 1, &t, &ok);
    if (st != MCP_STATUS_OK || !ok) return st;
    t.dtype = MCP_DTYPE_STRING;
    return emit(c, 0, &t);
}

/* Output 0 adds a last dim (the most substrings, known only at run time);
 * output 1 counts them per input element. */
static mcp_status infer_string_split(ictx *c)
{
    stype x, t;
    if (!in_type(c, 0, &x)) return MCP_STATUS_OK;
    t = x;
    t.dtype = MCP_DTYPE_INT64;
    mcp_status st = emit(c, 1, &t);
    if (st != MCP_STATUS_OK) return st;
    t.dtype = MCP_DTYPE_STRING;
    if (x.rank >= 0 && x.rank < MCP_MAX_RANK) t.d[t.rank++] = DIM_UNKNOWN;
    else t.rank = -1;
    return emit(c, 0, &t);
}

/* ---- dispatch ---- */

typedef struct infer_rule {
    const char *op_type;
    infer_fn fn;
} infer_rule;

static const infer_rule RULES[] = {
    /* Unary elementwise ops and activations keep the input's type. */
    {"Abs", infer_same}, {"Neg", infer_same}, {"Floor", infer_same}, {"Ceil", infer_same},
    {"Round", infer_same}, {"Sqrt", infer_same}, {"Reciprocal", infer_same}, {"Exp", infer_same},
    {"Log", infer_same}, {"Sin", infer_same}, {"Cos", infer_same}, {"Tan", infer_same},
    {"Asin", infer_same}, {"Acos", infer_same}, {"Atan", infer_same}, {"Sinh", infer_same},
    {"Cosh", infer_same}, {"Asinh", infer_same}, {"Acosh", infer_same}, {"Atanh", infer_same},
    {"Sigmoid", infer_same}, {"HardSigmoid", infer_same}, {"Tanh", infer_same}, {"Relu", infer_same},
    {"LeakyRelu", infer_same}, {"Elu", infer_same}, {"Selu", infer_same}, {"Celu", infer_same},
    {"ThresholdedRelu", infer_same}, {"Softplus", infer_same}, {"Softsign", infer_same},
    {"HardSwish", infer_same}, {"Mish", infer_same}, {"Swish", infer_same}, {"Gelu", infer_same}, {"Erf", infer_same},
    {"Sign", infer_same}, {"Clip", infer_same}, {"Shrink", infer_same}, {"BitwiseNot", infer_same},
    {"Softmax", infer_same}, {"LogSoftmax", infer_same}, {"Hardmax", infer_same},
    {"LpNormalization", infer_same}, {"MeanVarianceNormalization", infer_same},
    {"RMSNormalization", infer_same}, {"GroupNormalization", infer_same}, {"RotaryEmbedding", infer_same},
    {"Attention", infer_attention},
    {"InstanceNormalization", infer_same}, {"LRN", infer_same}, {"BatchNormalization", infer_batchnorm},
    {"CumSum", infer_same}, {"Trilu", infer_same}, {"ReverseSequence", infer_same},
    {"Scatter", infer_same}, {"ScatterElements", infer_same}, {"ScatterND", infer_same},
    {"Identity", infer_identity}, {"Dropout", infer_dropout}, {"LayerNormalization", infer_layernorm},
    {"Not", infer_bool_same}, {"IsNaN", infer_bool_same}, {"IsInf", infer_bool_same},
    {"Cast", infer_cast}, {"CastLike", infer_castlike},
    {"EyeLike", infer_like}, {"RandomNormalLike", infer_like}, {"RandomUniformLike", infer_like},
    {"Bernoulli", infer_like},
    /* Broadcasting binary ops. */
    {"Add", infer_arith}, {"Sub", infer_arith}, {"Mul", infer_arith}, {"Div", infer_arith},
    {"Pow", infer_arith}, {"Mod", infer_arith}, {"PRelu", infer_arith}, {"BitShift", infer_arith},
    {"BitwiseAnd", infer_arith}, {"BitwiseOr", infer_arith}, {"BitwiseXor", infer_arith},
    {"Equal", infer_compare}, {"Less", infer_compare}, {"Greater", infer_compare},
    {"LessOrEqual", infer_compare}, {"GreaterOrEqual", infer_compare}, {"And", infer_compare},
    {"Or", infer_compare}, {"Xor", infer_compare},
    {"Max", infer_variadic}, {"Min", infer_variadic}, {"Sum", infer_variadic}, {"Mean", infer_variadic},
    {"Where", infer_where},
    /* Linear algebra, convolution, pooling. */
    {"MatMul", infer_matmul}, {"MatMulInteger", infer_matmul_integer}, {"QLinearMatMul", infer_qlinear_matmul},
    {"Gemm", infer_gemm}, {"Conv", infer_conv}, {"ConvInteger", infer_conv_integer},
    {"QLinearConv", infer_qlinear_conv}, {"ConvTranspose", infer_conv_transpose},
    {"DeformConv", infer_conv}, /* Conv's geometry; offset and mask do not change it */
    {"MaxPool", infer_pool}, {"AveragePool", infer_pool}, {"LpPool", infer_pool},
    {"GlobalAveragePool", infer_global_pool}, {"GlobalMaxPool", infer_global_pool},
    {"GlobalLpPool", infer_global_pool},
    {"RNN", infer_rnn}, {"GRU", infer_rnn}, {"LSTM", infer_rnn}, {"Det", infer_det},
    /* Shape manipulation. */
    {"Flatten", infer_flatten}, {"Reshape", infer_reshape}, {"Transpose", infer_transpose},
    {"Concat", infer_concat}, {"Squeeze", infer_squeeze}, {"Unsqueeze", infer_unsqueeze},
    {"Shape", infer_shape}, {"Size", infer_size}, {"Gather", infer_gather},
    {"GatherElements", infer_gather_elements}, {"GatherND", infer_gather_nd},
    {"Split", infer_split}, {"Slice", infer_slice}, {"Expand", infer_expand}, {"Tile", infer_tile},
    {"Pad", infer_pad}, {"Resize", infer_resize}, {"Upsample", infer_resize},
    {"DepthToSpace", infer_depth_space}, {"SpaceToDepth", infer_depth_space},
    {"Constant", infer_constant}, {"ConstantOfShape", infer_constant_of_shape},
    {"NonZero", infer_nonzero}, {"TopK", infer_topk}, {"Range", infer_range}, {"OneHot", infer_onehot},
    {"Compress", infer_compress}, {"RandomNormal", infer_random}, {"RandomUniform", infer_random},
    {"Multinomial", infer_multinomial},
    /* Reductions. */
    {"ArgMax", infer_argmax}, {"ArgMin", infer_argmax}, {"ReduceSum", infer_reduce},
    {"ReduceMean", infer_reduce}, {"ReduceMax", infer_reduce}, {"ReduceMin", infer_reduce},
    {"ReduceProd", infer_reduce}, {"ReduceL1", infer_reduce}, {"ReduceL2", infer_reduce},
    {"ReduceLogSum", infer_reduce}, {"ReduceLogSumExp", infer_reduce}, {"ReduceSumSquare", infer_reduce},
    /* Quantization. */
    {"QuantizeLinear", infer_quantize}, {"DequantizeLinear", infer_dequantize},
    {"DynamicQuantizeLinear", infer_dynamic_quantize},
    /* Control flow (after the bodies are inferred). */
    {"If", infer_if}, {"Loop", infer_loop}, {"Scan", infer_scan},
    /* Operators after opset 17. */
    {"CumProd", infer_same}, {"TensorScatter", infer_same}, {"BitCast", infer_bitcast}, {"Col2Im", infer_col2im},
    {"CenterCropPad", infer_center_crop_pad}, {"AffineGrid", infer_affine_grid},
    {"StringConcat", infer_string_concat}, {"StringSplit", infer_string_split}, {"RegexFullMatch", infer_bool_same},
};

/* FusedConv has Conv's output; Sum, when given, has that shape too. */
static mcp_status infer_fused_conv(ictx *c)
{
    mcp_status st = infer_conv(c);
    stype s;
    if (st == MCP_STATUS_OK && in_type(c, 3, &s)) st = emit(c, 0, &s);
    return st;
}

/* The operators the graph passes create (MCP_DOMAIN_INTERNAL, contract in
 * graph.h); the session infers shapes again after the passes. */
static const infer_rule INTERNAL_RULES[] = {
    {"FusedConv", infer_fused_conv}, {"FusedGemm", infer_gemm}, {"FusedMatMul", infer_matmul},
    {"Gelu", infer_same}, {"LayerNormalization", infer_layernorm}, {"Attention", infer_attention},
};

static infer_fn find_rule(const mcp_node *n)
{
    const infer_rule *rules = RULES;
    size_t count = sizeof RULES / sizeof RULES[0];
    if (strcmp(n->domain, MCP_DOMAIN_INTERNAL) == 0) {
        rules = INTERNAL_RULES;
        count = sizeof INTERNAL_RULES / sizeof INTERNAL_RULES[0];
    } else if (n->domain[0] != '\0') {
        return NULL;
    }
    for (size_t i = 0; i < count; i++)
        if (strcmp(rules[i].op_type, n->op_type) == 0) return rules[i].fn;
    return NULL;
}

/* Brings a subgraph's captured values up to date with the enclosing graph,
 * whose types the pass has refined since the capture was made. */
static mcp_status refresh_captures(mcp_graph *sub)
{
    const mcp_graph *p = sub->parent;
    if (!p) return MCP_STATUS_OK;
    for (int i = 0; i < sub->n_values; i++) {
        mcp_graph_value *v = &sub->values[i];
        if (v->outer < 0 || v->outer >= p->n_values) continue;
        const mcp_type *pt = &p->values[v->outer].type;
        mcp_status st;
        if (pt->kind != v->type.kind || pt->is_optional != v->type.is_optional || type_is_unknown(&v->type)) {
            st = type_copy(&v->type, pt);
        } else {
            stype t;
            bool conflict;
            stype_from_type(pt, &t);
            st = merge_type(&v->type, &t, &conflict);
        }
        if (st != MCP_STATUS_OK) return st;
    }
    return MCP_STATUS_OK;
}

static mcp_status infer_subgraph(ictx *c, mcp_graph *sub)
{
    if (!sub) return MCP_STATUS_OK;
    mcp_status st = refresh_captures(sub);
    if (st == MCP_STATUS_OK && strcmp(c->n->op_type, "Loop") == 0) st = seed_loop_body(c, sub);
    if (st == MCP_STATUS_OK && strcmp(c->n->op_type, "Scan") == 0) st = seed_scan_body(c, sub);
    if (st != MCP_STATUS_OK) return mcp_err_set(c->err, st, "out of memory");
    st = infer_graph(sub, c->err);
    if (st != MCP_STATUS_OK)
        mcp_err_prefix(c->err, "in subgraph '%s' of node '%s' (%s)", sub->name, c->n->name, c->n->op_type);
    return st;
}

static mcp_status infer_graph(mcp_graph *g, mcp_err *err)
{
    pval **pv = mcp_calloc(g->n_values ? (size_t)g->n_values : 1, sizeof *pv);
    if (!pv) return mcp_err_set(err, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    mcp_status st = MCP_STATUS_OK;
    for (int i = 0; st == MCP_STATUS_OK && i < g->n_nodes; i++) {
        ictx c = {g, &g->nodes[i], err, pv};
        const mcp_node *n = c.n;
        /* Subgraphs first: If / Loop / Scan derive their outputs from the
         * bodies' outputs. */
        for (int a = 0; st == MCP_STATUS_OK && a < n->n_attrs; a++) {
            const mcp_attr *at = &n->attrs[a];
            if (at->type == MCP_ATTR_GRAPH) st = infer_subgraph(&c, at->g);
            for (int64_t j = 0; st == MCP_STATUS_OK && at->type == MCP_ATTR_GRAPHS && j < at->count; j++)
                st = infer_subgraph(&c, at->graphs[j]);
        }
        infer_fn fn = find_rule(n);
        if (st == MCP_STATUS_OK && fn) st = fn(&c);
        if (st == MCP_STATUS_OK) st = propagate(&c);
    }
    for (int i = 0; i < g->n_values; i++) mcp_free(pv[i]);
    mcp_free(pv);
    return st;
}

mcp_status mcp_graph_infer_shapes(mcp_graph *g, mcp_err *err)
{
    if (!g) return mcp_err_set(err, MCP_STATUS_INVALID_ARGUMENT, "no graph");
    return infer_graph(g, err);
}
