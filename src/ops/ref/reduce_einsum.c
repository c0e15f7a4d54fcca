/* Reference kernels: reduce family, part (einsum): Einsum and Det. */
#include <ctype.h>

#include "ops/ref/reduce_util.h"

/* Labels: 'A'..'Z' are 0..25, 'a'..'z' are 26..51 (so sorting ids sorts the
 * implicit output like numpy does, by character code), ellipsis dimensions
 * are 52.. (right-aligned across operands). */
#define ES_LETTERS 52
#define ES_MAX_LABELS (ES_LETTERS + MCP_MAX_RANK)
#define ES_MAX_INPUTS 32

typedef struct es_term {
    int n;                  /* number of dims the term names */
    int lab[MCP_MAX_RANK];  /* label per dim */
} es_term;

static int es_letter(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
    return -1;
}

/*
 * Parses one term s[0..len) for an operand of rank `rank` (rank < 0 for the
 * output, where ell_rank is already known). Ellipsis dims take labels
 * ES_LETTERS + (E - e) .. ES_LETTERS + E - 1 where E is the widest ellipsis.
 */
static mcp_status es_parse_term(mcp_kernel_ctx *ctx, const char *s, size_t len, int rank,
                                int ell_max, int *ell_rank, es_term *t, bool *has_ell)
{
    int letters = 0;
    *has_ell = false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (*has_ell || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.')
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "attribute 'equation' has a malformed ellipsis");
            *has_ell = true;
            i += 2;
        } else if (es_letter(s[i]) >= 0) {
            letters++;
        } else {
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'equation' has an invalid character '%c'", s[i]);
        }
    }
    int e;
    if (rank >= 0) {
        e = rank - letters;
        if (e < 0 || (!*has_ell && e != 0))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "attribute 'equation' term '%.*s' does not match an input of rank "
                             "%d",
                             (int)len, s, rank);
        *ell_rank = e;
    } else {
        e = *has_ell ? ell_max : 0;
    }
    if (letters + e > MCP_MAX_RANK)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'equation' names too many dimensions");
    t->n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            for (int k = 0; k < e; k++) t->lab[t->n++] = ES_LETTERS + (ell_max - e) + k;
            i += 2;
        } else {
            t->lab[t->n++] = es_letter(s[i]);
        }
    }
    return MCP_STATUS_OK;
}

mcp_status mcp__ref_reduce_einsum_run(mcp_kernel_ctx *ctx)
{
    const char *eq0 = mcp_kattr_string(ctx, "equation", NULL);
    if (!eq0) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'equation' is missing");
    int n_in = ctx->n_inputs;
    if (n_in < 1 || n_in > ES_MAX_INPUTS)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "Einsum needs 1 to %d inputs",
                         ES_MAX_INPUTS);
    const mcp_tensor *in[ES_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) {
        in[i] = mcp_kin(ctx, i);
        if (!in[i]) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input %d is missing", i);
        if (mcp__red_kind_of(in[i]->dtype) == MCP__RED_OTHER || in[i]->dtype != in[0]->dtype)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "inputs must share one numeric type, input %d is %s", i,
                             mcp_dtype_name(in[i]->dtype));
    }

    /* Strip spaces. */
    size_t eqlen = strlen(eq0);
    char *eq = (char *)mcp_malloc(eqlen + 1);
    if (!eq) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < eqlen; i++)
        if (!isspace((unsigned char)eq0[i])) eq[m++] = eq0[i];
    eq[m] = '\0';

    mcp_status st = MCP_STATUS_OK;
    es_term terms[ES_MAX_INPUTS], out;
    int ell_rank[ES_MAX_INPUTS];
    bool has_ell;
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : m;
    int ell_max = 0;
    {
        int k = 0;
        size_t start = 0;
        for (size_t i = 0; i <= lhs_len && st == MCP_STATUS_OK; i++) {
            if (i < lhs_len && eq[i] != ',') continue;
            if (k >= n_in) {
                st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                               "attribute 'equation' has more terms than the %d inputs", n_in);
                break;
            }
            st = es_parse_term(ctx, eq + start, i - start, in[k]->rank, 0, &ell_rank[k],
                               &terms[k], &has_ell);
            if (st == MCP_STATUS_OK && ell_rank[k] > ell_max) ell_max = ell_rank[k];
            k++;
            start = i + 1;
        }
        if (st == MCP_STATUS_OK && k != n_in)
            st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                           "attribute 'equation' has %d terms for %d inputs", k, n_in);
        /* Second pass now that the widest ellipsis is known. */
        k = 0;
        start = 0;
        for (size_t i = 0; i <= lhs_len && st == MCP_STATUS_OK; i++) {
            if (i < lhs_len && eq[i] != ',') continue;
            st = es_parse_term(ctx, eq + start, i - start, in[k]->rank, ell_max, &ell_rank[k],
                               &terms[k], &has_ell);
            k++;
            start = i + 1;
        }
    }

    int64_t size[ES_MAX_LABELS];
    int count[ES_MAX_LABELS];
    for (int l = 0; l < ES_MAX_LABELS; l++) {
        size[l] = -1;
        count[l] = 0;
    }
    for (int k = 0; k < n_in && st == MCP_STATUS_OK; k++) {
        for (int d = 0; d < terms[k].n; d++) {
            int l = terms[k].lab[d];
            int64_t dim = in[k]->dims[d];
            count[l]++;
            if (size[l] < 0 || size[l] == 1) size[l] = dim;
            else if (dim != size[l] && dim != 1)
                st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                               "input %d dimension %d (%lld) disagrees with its label's size "
                               "%lld",
                               k, d, (long long)dim, (long long)size[l]);
        }
    }
    if (st == MCP_STATUS_OK) {
        if (arrow) {
            st = es_parse_term(ctx, arrow + 2, strlen(arrow + 2), -1, ell_max, NULL, &out,
                               &has_ell);
            bool seen[ES_MAX_LABELS] = {false};
            for (int d = 0; st == MCP_STATUS_OK && d < out.n; d++) {
                int l = out.lab[d];
                if (size[l] < 0 || seen[l])
                    st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                   "attribute 'equation' output names a label that is unknown "
                                   "or repeated");
                else seen[l] = true;
            }
        } else {
            /* Implicit output: the ellipsis dims, then labels used once, sorted. */
            out.n = 0;
            for (int l = ES_LETTERS; l < ES_LETTERS + ell_max; l++) out.lab[out.n++] = l;
            for (int l = 0; l < ES_LETTERS && st == MCP_STATUS_OK; l++) {
                if (count[l] != 1) continue;
                if (out.n >= MCP_MAX_RANK)
                    st = mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                   "attribute 'equation' output has too many dimensions");
                else out.lab[out.n++] = l;
            }
        }
    }
    mcp_free(eq);
    if (st != MCP_STATUS_OK) return st;

    /* Loop order: output labels, then the summed ones. */
    int order[ES_MAX_LABELS], n_lab = 0;
    bool in_out[ES_MAX_LABELS] = {false};
    int64_t odims[MCP_MAX_RANK];
    for (int d = 0; d < out.n; d++) {
        order[n_lab++] = out.lab[d];
        in_out[out.lab[d]] = true;
        odims[d] = size[out.lab[d]];
    }
    for (int l = 0; l < ES_MAX_LABELS; l++)
        if (size[l] >= 0 && !in_out[l]) order[n_lab++] = l;

    mcp_tensor *y = mcp_kout(ctx, 0, in[0]->dtype, out.n, odims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;

    /* Strides per loop position: for each input (repeated labels add up,
     * which walks the diagonal; size-1 broadcast dims get 0) and the output. */
    int64_t *str = (int64_t *)mcp_calloc((size_t)(n_in + 1) * ES_MAX_LABELS, sizeof(int64_t));
    if (!str) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    int64_t total = 1;
    int64_t pos_of[ES_MAX_LABELS];
    for (int p = 0; p < n_lab; p++) {
        pos_of[order[p]] = p;
        total *= size[order[p]];
    }
    for (int k = 0; k <= n_in; k++) {
        int rank = k < n_in ? in[k]->rank : out.n;
        const int *lab = k < n_in ? terms[k].lab : out.lab;
        const int64_t *dims = k < n_in ? in[k]->dims : odims;
        int64_t s = 1;
        for (int d = rank - 1; d >= 0; d--) {
            if (dims[d] != 1 || size[lab[d]] == 1) str[k * ES_MAX_LABELS + pos_of[lab[d]]] += s;
            s *= dims[d];
        }
    }

    mcp__red_kind kind = mcp__red_kind_of(in[0]->dtype);
    int64_t n_out = mcp_tensor_numel(y);
    double *facc = NULL;
    uint64_t *iacc = NULL;
    size_t n_acc = (size_t)(n_out ? n_out : 1);
    if (kind == MCP__RED_FLOAT) facc = (double *)mcp_calloc(n_acc, sizeof(double));
    else iacc = (uint64_t *)mcp_calloc(n_acc, sizeof(uint64_t));
    if (!facc && !iacc) {
        mcp_free(str);
        return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    int64_t idx[ES_MAX_LABELS] = {0};
    int64_t off[ES_MAX_INPUTS + 1] = {0};
    for (int64_t it = 0; it < total; it++) {
        if (facc) {
            double p = 1.0;
            for (int k = 0; k < n_in; k++) p *= mcp__red_ld_f64(in[k]->dtype, in[k]->data, off[k]);
            facc[off[n_in]] += p;
        } else {
            uint64_t p = 1;
            for (int k = 0; k < n_in; k++) p *= mcp__red_ld_u64(in[k]->dtype, in[k]->data, off[k]);
            iacc[off[n_in]] += p;
        }
        for (int q = n_lab - 1; q >= 0; q--) {
            idx[q]++;
            for (int k = 0; k <= n_in; k++) off[k] += str[k * ES_MAX_LABELS + q];
            if (idx[q] < size[order[q]]) break;
            for (int k = 0; k <= n_in; k++) off[k] -= str[k * ES_MAX_LABELS + q] * idx[q];
            idx[q] = 0;
        }
    }
    for (int64_t o = 0; o < n_out; o++) {
        if (facc) mcp__red_st_f64(y->dtype, y->data, o, facc[o]);
        else if (kind == MCP__RED_SIGNED) mcp__red_st_i64(y->dtype, y->data, o, (int64_t)iacc[o]);
        else mcp__red_st_u64(y->dtype, y->data, o, iacc[o]);
    }
    mcp_free(facc);
    mcp_free(iacc);
    mcp_free(str);
    return MCP_STATUS_OK;
}

/* ---- Det ---- */

/* Determinant of each trailing M x M matrix by LU with partial pivoting. */
mcp_status mcp__ref_reduce_det_run(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *x = mcp_kin(ctx, 0);
    if (!x) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' is missing");
    if (!mcp__red_is_float(x->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported type %s",
                         mcp_dtype_name(x->dtype));
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'X' must have shape (..., M, M)");
    int64_t M = x->dims[x->rank - 1];
    mcp_tensor *y = mcp_kout(ctx, 0, x->dtype, x->rank - 2, x->dims);
    if (!y) return MCP_STATUS_OUT_OF_MEMORY;
    int64_t batch = mcp_tensor_numel(y);
    double *a = (double *)mcp_malloc((size_t)(M > 0 ? M * M : 1) * sizeof(double));
    if (!a) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < M * M; i++)
            a[i] = mcp__red_ld_f64(x->dtype, x->data, b * M * M + i);
        double det = 1.0;
        for (int64_t c = 0; c < M && det != 0.0; c++) {
            int64_t piv = c;
            for (int64_t r = c + 1; r < M; r++)
                if (fabs(a[r * M + c]) > fabs(a[piv * M + c])) piv = r;
            if (a[piv * M + c] == 0.0) {
                det = 0.0;
                break;
            }
            if (piv != c) {
                for (int64_t j = 0; j < M; j++) {
                    double tmp = a[c * M + j];
                    a[c * M + j] = a[piv * M + j];
                    a[piv * M + j] = tmp;
                }
                det = -det;
            }
            det *= a[c * M + c];
            for (int64_t r = c + 1; r < M; r++) {
                double f = a[r * M + c] / a[c * M + c];
                for (int64_t j = c + 1; j < M; j++) a[r * M + j] -= f * a[c * M + j];
            }
        }
        mcp__red_st_f64(y->dtype, y->data, b, det);
    }
    mcp_free(a);
    return MCP_STATUS_OK;
}
