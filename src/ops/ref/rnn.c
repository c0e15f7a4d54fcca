/*
 * Reference kernels: rnn family (RNN, GRU, LSTM).
 *
 * The three ops share one driver: inputs are validated and converted to
 * double scratch arrays, then every (direction, batch entry) pair runs its
 * own time loop, so per-entry sequence lengths need no masking. Outputs are
 * written in the dtype of X through the generic element setters.
 */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "ops/ref/ref.h"

typedef enum rnn_kind {
    RNN_KIND_RNN = 0,
    RNN_KIND_GRU,
    RNN_KIND_LSTM,
} rnn_kind;

typedef enum rnn_act_kind {
    RNN_ACT_RELU = 0,
    RNN_ACT_TANH,
    RNN_ACT_SIGMOID,
    RNN_ACT_AFFINE,
    RNN_ACT_LEAKY_RELU,
    RNN_ACT_THRESHOLDED_RELU,
    RNN_ACT_SCALED_TANH,
    RNN_ACT_HARD_SIGMOID,
    RNN_ACT_ELU,
    RNN_ACT_SOFTSIGN,
    RNN_ACT_SOFTPLUS,
} rnn_act_kind;

typedef struct rnn_act {
    rnn_act_kind kind;
    double alpha;
    double beta;
} rnn_act;

/* Activation names as the spec spells them, how many of activation_alpha /
 * activation_beta each consumes, and the defaults of the matching ONNX op. */
typedef struct rnn_act_info {
    const char *name;
    rnn_act_kind kind;
    bool uses_alpha;
    bool uses_beta;
    double alpha;
    double beta;
} rnn_act_info;

static const rnn_act_info rnn_act_table[] = {
    {"Relu", RNN_ACT_RELU, false, false, 0.0, 0.0},
    {"Tanh", RNN_ACT_TANH, false, false, 0.0, 0.0},
    {"Sigmoid", RNN_ACT_SIGMOID, false, false, 0.0, 0.0},
    {"Affine", RNN_ACT_AFFINE, true, true, 1.0, 0.0},
    {"LeakyRelu", RNN_ACT_LEAKY_RELU, true, false, 0.01, 0.0},
    {"ThresholdedRelu", RNN_ACT_THRESHOLDED_RELU, true, false, 1.0, 0.0},
    {"ScaledTanh", RNN_ACT_SCALED_TANH, true, true, 1.0, 1.0},
    {"HardSigmoid", RNN_ACT_HARD_SIGMOID, true, true, 0.2, 0.5},
    {"Elu", RNN_ACT_ELU, true, false, 1.0, 0.0},
    {"Softsign", RNN_ACT_SOFTSIGN, false, false, 0.0, 0.0},
    {"Softplus", RNN_ACT_SOFTPLUS, false, false, 0.0, 0.0},
};

static double rnn_act_apply(const rnn_act *a, double x)
{
    switch (a->kind) {
    case RNN_ACT_RELU: return x > 0.0 ? x : 0.0;
    case RNN_ACT_TANH: return tanh(x);
    case RNN_ACT_SIGMOID:
        /* Split by sign so exp never overflows. */
        if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
        return exp(x) / (1.0 + exp(x));
    case RNN_ACT_AFFINE: return a->alpha * x + a->beta;
    case RNN_ACT_LEAKY_RELU: return x >= 0.0 ? x : a->alpha * x;
    case RNN_ACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0.0;
    case RNN_ACT_SCALED_TANH: return a->alpha * tanh(a->beta * x);
    case RNN_ACT_HARD_SIGMOID: {
        double v = a->alpha * x + a->beta;
        return v < 0.0 ? 0.0 : (v > 1.0 ? 1.0 : v);
    }
    case RNN_ACT_ELU: return x >= 0.0 ? x : a->alpha * (exp(x) - 1.0);
    case RNN_ACT_SOFTSIGN: return x / (1.0 + fabs(x));
    case RNN_ACT_SOFTPLUS: return x > 30.0 ? x : log1p(exp(x));
    }
    return x;
}

/*
 * Fills acts[num_dir * per_dir] from the activations / activation_alpha /
 * activation_beta attributes. A list of per_dir names for a bidirectional
 * node is applied to both directions. Alpha and beta values are consumed in
 * order by the activations that take them; missing ones take the defaults.
 */
static mcp_status rnn_parse_acts(mcp_kernel_ctx *ctx, rnn_kind kind, int num_dir, rnn_act *acts)
{
    static const rnn_act_kind defaults[3][3] = {
        {RNN_ACT_TANH, RNN_ACT_TANH, RNN_ACT_TANH},
        {RNN_ACT_SIGMOID, RNN_ACT_TANH, RNN_ACT_TANH},
        {RNN_ACT_SIGMOID, RNN_ACT_TANH, RNN_ACT_TANH},
    };
    int per_dir = kind == RNN_KIND_RNN ? 1 : (kind == RNN_KIND_GRU ? 2 : 3);
    int total = per_dir * num_dir;
    const mcp_attr *names = mcp_kattr(ctx, "activations");
    int64_t n_alpha = 0, n_beta = 0;
    const float *alphas = mcp_kattr_floats(ctx, "activation_alpha", &n_alpha);
    const float *betas = mcp_kattr_floats(ctx, "activation_beta", &n_beta);
    int64_t ia = 0, ib = 0;

    if (!names || names->count == 0) {
        for (int i = 0; i < total; i++) {
            acts[i].kind = defaults[kind][i % per_dir];
            acts[i].alpha = 0.0;
            acts[i].beta = 0.0;
        }
        return MCP_STATUS_OK;
    }
    if (names->type != MCP_ATTR_STRINGS)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'activations' must be a list of strings");
    if (names->count != total && !(num_dir == 2 && names->count == per_dir))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'activations' has %lld entries, expected %d",
                         (long long)names->count, total);
    for (int i = 0; i < total; i++) {
        const char *nm = names->strings[i % names->count];
        const rnn_act_info *info = NULL;
        for (size_t k = 0; k < sizeof(rnn_act_table) / sizeof(rnn_act_table[0]); k++) {
            if (strcasecmp(nm, rnn_act_table[k].name) == 0) {
                info = &rnn_act_table[k];
                break;
            }
        }
        if (!info)
            return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED,
                             "attribute 'activations': unknown activation '%s'", nm);
        acts[i].kind = info->kind;
        acts[i].alpha = info->alpha;
        acts[i].beta = info->beta;
        /* Repeated names (one list for both directions) reuse the values
         * consumed for the first direction. */
        if (i >= names->count) {
            acts[i].alpha = acts[i - names->count].alpha;
            acts[i].beta = acts[i - names->count].beta;
            continue;
        }
        if (info->uses_alpha && ia < n_alpha) acts[i].alpha = alphas[ia++];
        if (info->uses_beta && ib < n_beta) acts[i].beta = betas[ib++];
    }
    return MCP_STATUS_OK;
}

static bool rnn_is_float_dtype(mcp_dtype d)
{
    return d == MCP_DTYPE_FLOAT || d == MCP_DTYPE_DOUBLE || d == MCP_DTYPE_FLOAT16 ||
           d == MCP_DTYPE_BFLOAT16;
}

/* Checks an optional float input against an expected shape. */
static mcp_status rnn_check_input(mcp_kernel_ctx *ctx, const mcp_tensor *t, const char *name,
                                  mcp_dtype dtype, int rank, const int64_t *dims)
{
    if (!t) return MCP_STATUS_OK;
    if (t->dtype != dtype)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input '%s' has dtype %s, expected %s like X", name,
                         mcp_dtype_name(t->dtype), mcp_dtype_name(dtype));
    bool ok = t->rank == rank;
    for (int i = 0; ok && i < rank; i++) ok = t->dims[i] == dims[i];
    if (!ok) {
        char got[128], want[128];
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has shape %s, expected %s",
                         name, mcp_shape_str(t->rank, t->dims, got, sizeof(got)),
                         mcp_shape_str(rank, dims, want, sizeof(want)));
    }
    return MCP_STATUS_OK;
}

static void rnn_load(const mcp_tensor *t, double *dst)
{
    int64_t n = mcp_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) dst[i] = mcp_tensor_get_f64(t, i);
}

static double rnn_clip(double v, bool has_clip, double clip)
{
    if (!has_clip) return v;
    return v < -clip ? -clip : (v > clip ? clip : v);
}

/* The problem sizes and options shared by the cell functions. */
typedef struct rnn_cfg {
    rnn_kind kind;
    int64_t gates;  /* 1, 3 or 4 */
    int64_t hidden;
    int64_t input;
    bool has_clip;
    double clip;
    bool linear_before_reset;
    bool input_forget;
} rnn_cfg;

/* out[g] = bias[g] + sum_k v[k] * m[g][k] for n_rows rows of length n_cols. */
static void rnn_matvec(const double *m, const double *v, const double *bias, int64_t n_rows,
                       int64_t n_cols, double *out)
{
    for (int64_t g = 0; g < n_rows; g++) {
        const double *row = m + g * n_cols;
        double s = bias ? bias[g] : 0.0;
        for (int64_t k = 0; k < n_cols; k++) s += row[k] * v[k];
        out[g] = s;
    }
}

/*
 * One time step of one direction for one batch entry. w, r: this direction's
 * weights; wb, rb: its input and recurrence biases; p: its peepholes (LSTM).
 * h and c are updated in place. xw, hr, tmp: scratch of gates * hidden.
 */
static void rnn_step(const rnn_cfg *cfg, const rnn_act *acts, const double *x, const double *w,
                     const double *r, const double *wb, const double *rb, const double *p,
                     double *h, double *c, double *xw, double *hr, double *tmp)
{
    int64_t H = cfg->hidden;
    rnn_matvec(w, x, wb, cfg->gates * H, cfg->input, xw);

    if (cfg->kind == RNN_KIND_RNN) {
        rnn_matvec(r, h, rb, H, H, hr);
        for (int64_t j = 0; j < H; j++)
            h[j] = rnn_act_apply(&acts[0], rnn_clip(xw[j] + hr[j], cfg->has_clip, cfg->clip));
        return;
    }

    if (cfg->kind == RNN_KIND_GRU) {
        /* Gate order z, r, h. hr holds z and r (and h when linear before reset). */
        int64_t rows = cfg->linear_before_reset ? 3 * H : 2 * H;
        rnn_matvec(r, h, rb, rows, H, hr);
        double *z = tmp, *rg = tmp + H, *hh = tmp + 2 * H;
        for (int64_t j = 0; j < H; j++) {
            z[j] = rnn_act_apply(&acts[0], rnn_clip(xw[j] + hr[j], cfg->has_clip, cfg->clip));
            rg[j] = rnn_act_apply(&acts[0],
                                  rnn_clip(xw[H + j] + hr[H + j], cfg->has_clip, cfg->clip));
        }
        if (cfg->linear_before_reset) {
            for (int64_t j = 0; j < H; j++)
                hh[j] = xw[2 * H + j] + rg[j] * hr[2 * H + j];
        } else {
            /* Reuse hr's first H entries for r (.) h; z and r are saved. */
            double *rh = hr;
            for (int64_t k = 0; k < H; k++) rh[k] = rg[k] * h[k];
            for (int64_t j = 0; j < H; j++) {
                const double *row = r + (2 * H + j) * H;
                double s = xw[2 * H + j] + (rb ? rb[2 * H + j] : 0.0);
                for (int64_t k = 0; k < H; k++) s += row[k] * rh[k];
                hh[j] = s;
            }
        }
        for (int64_t j = 0; j < H; j++) {
            double g = rnn_act_apply(&acts[1], rnn_clip(hh[j], cfg->has_clip, cfg->clip));
            h[j] = (1.0 - z[j]) * g + z[j] * h[j];
        }
        return;
    }

    /* LSTM: gate order i, o, f, c; peepholes i, o, f. */
    rnn_matvec(r, h, rb, 4 * H, H, hr);
    for (int64_t j = 0; j < H; j++) {
        double vi = xw[j] + hr[j];
        double vo = xw[H + j] + hr[H + j];
        double vf = xw[2 * H + j] + hr[2 * H + j];
        double vc = xw[3 * H + j] + hr[3 * H + j];
        if (p) {
            vi += p[j] * c[j];
            vf += p[2 * H + j] * c[j];
        }
        double ig = rnn_act_apply(&acts[0], rnn_clip(vi, cfg->has_clip, cfg->clip));
        double fg = cfg->input_forget
                        ? 1.0 - ig
                        : rnn_act_apply(&acts[0], rnn_clip(vf, cfg->has_clip, cfg->clip));
        double cg = rnn_act_apply(&acts[1], rnn_clip(vc, cfg->has_clip, cfg->clip));
        double cn = fg * c[j] + ig * cg;
        if (p) vo += p[H + j] * cn;
        double og = rnn_act_apply(&acts[0], rnn_clip(vo, cfg->has_clip, cfg->clip));
        c[j] = cn;
        /* h must not change until every row of R has seen it. */
        tmp[j] = og * rnn_act_apply(&acts[2], cn);
    }
    memcpy(h, tmp, (size_t)H * sizeof(double));
}

static mcp_status rnn_run_common(mcp_kernel_ctx *ctx, rnn_kind kind)
{
    const mcp_tensor *X = mcp_kin(ctx, 0);
    const mcp_tensor *W = mcp_kin(ctx, 1);
    const mcp_tensor *R = mcp_kin(ctx, 2);
    const mcp_tensor *B = mcp_kin(ctx, 3);
    const mcp_tensor *SL = mcp_kin(ctx, 4);
    const mcp_tensor *H0 = mcp_kin(ctx, 5);
    const mcp_tensor *C0 = kind == RNN_KIND_LSTM ? mcp_kin(ctx, 6) : NULL;
    const mcp_tensor *P = kind == RNN_KIND_LSTM ? mcp_kin(ctx, 7) : NULL;
    rnn_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.kind = kind;
    cfg.gates = kind == RNN_KIND_RNN ? 1 : (kind == RNN_KIND_GRU ? 3 : 4);

    if (!X || !W || !R)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "inputs 'X', 'W' and 'R' are required");
    if (!rnn_is_float_dtype(X->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'X' has unsupported dtype %s",
                         mcp_dtype_name(X->dtype));
    if (X->rank != 3) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'X' must be rank 3");
    if (W->rank != 3) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'W' must be rank 3");
    if (R->rank != 3) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'R' must be rank 3");

    const char *dir = mcp_kattr_string(ctx, "direction", "forward");
    int num_dir;
    bool reverse_only = false;
    if (strcmp(dir, "forward") == 0) {
        num_dir = 1;
    } else if (strcmp(dir, "reverse") == 0) {
        num_dir = 1;
        reverse_only = true;
    } else if (strcmp(dir, "bidirectional") == 0) {
        num_dir = 2;
    } else {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'direction' is '%s'", dir);
    }

    int64_t layout = ctx->opset >= 14 ? mcp_kattr_int(ctx, "layout", 0) : 0;
    if (layout != 0 && layout != 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'layout' is %lld",
                         (long long)layout);
    int64_t seq = layout ? X->dims[1] : X->dims[0];
    int64_t batch = layout ? X->dims[0] : X->dims[1];
    cfg.input = X->dims[2];
    cfg.hidden = mcp_kattr_int(ctx, "hidden_size", R->dims[2]);
    if (cfg.hidden <= 0 || cfg.hidden > (INT64_C(1) << 24))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'hidden_size' is %lld",
                         (long long)cfg.hidden);
    int64_t H = cfg.hidden, G = cfg.gates;

    const mcp_attr *clip_attr = mcp_kattr(ctx, "clip");
    if (clip_attr) {
        cfg.has_clip = true;
        cfg.clip = clip_attr->f;
        if (!(cfg.clip >= 0.0))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "attribute 'clip' is negative");
    }
    cfg.linear_before_reset = kind == RNN_KIND_GRU && mcp_kattr_int(ctx, "linear_before_reset", 0);
    cfg.input_forget = kind == RNN_KIND_LSTM && mcp_kattr_int(ctx, "input_forget", 0);

    mcp_status st;
    int64_t dims[3];
    dims[0] = num_dir, dims[1] = G * H, dims[2] = cfg.input;
    if ((st = rnn_check_input(ctx, W, "W", X->dtype, 3, dims)) != MCP_STATUS_OK) return st;
    dims[2] = H;
    if ((st = rnn_check_input(ctx, R, "R", X->dtype, 3, dims)) != MCP_STATUS_OK) return st;
    dims[1] = 2 * G * H;
    if ((st = rnn_check_input(ctx, B, "B", X->dtype, 2, dims)) != MCP_STATUS_OK) return st;
    if (layout) {
        dims[0] = batch, dims[1] = num_dir, dims[2] = H;
    } else {
        dims[0] = num_dir, dims[1] = batch, dims[2] = H;
    }
    if ((st = rnn_check_input(ctx, H0, "initial_h", X->dtype, 3, dims)) != MCP_STATUS_OK)
        return st;
    if ((st = rnn_check_input(ctx, C0, "initial_c", X->dtype, 3, dims)) != MCP_STATUS_OK)
        return st;
    dims[0] = num_dir, dims[1] = 3 * H;
    if ((st = rnn_check_input(ctx, P, "P", X->dtype, 2, dims)) != MCP_STATUS_OK) return st;
    if (SL) {
        if (SL->dtype != MCP_DTYPE_INT32 && SL->dtype != MCP_DTYPE_INT64)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'sequence_lens' must be int32");
        if (SL->rank != 1 || SL->dims[0] != batch)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'sequence_lens' must have shape [%lld]", (long long)batch);
        for (int64_t b = 0; b < batch; b++) {
            int64_t len = mcp_tensor_get_i64(SL, b);
            if (len < 0 || len > seq)
                return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                                 "input 'sequence_lens' entry %lld is %lld, outside [0, %lld]",
                                 (long long)b, (long long)len, (long long)seq);
        }
    }

    rnn_act acts[6];
    if ((st = rnn_parse_acts(ctx, kind, num_dir, acts)) != MCP_STATUS_OK) return st;
    int per_dir = kind == RNN_KIND_RNN ? 1 : (kind == RNN_KIND_GRU ? 2 : 3);

    /* Outputs. */
    mcp_tensor *Y = NULL, *Yh = NULL, *Yc = NULL;
    int64_t ydims[4];
    if (layout) {
        ydims[0] = batch, ydims[1] = seq, ydims[2] = num_dir, ydims[3] = H;
    } else {
        ydims[0] = seq, ydims[1] = num_dir, ydims[2] = batch, ydims[3] = H;
    }
    if (ctx->n_outputs > 0 && !(Y = mcp_kout(ctx, 0, X->dtype, 4, ydims)))
        return MCP_STATUS_OUT_OF_MEMORY;
    int64_t sdims[3];
    if (layout) {
        sdims[0] = batch, sdims[1] = num_dir, sdims[2] = H;
    } else {
        sdims[0] = num_dir, sdims[1] = batch, sdims[2] = H;
    }
    if (ctx->n_outputs > 1 && !(Yh = mcp_kout(ctx, 1, X->dtype, 3, sdims)))
        return MCP_STATUS_OUT_OF_MEMORY;
    if (kind == RNN_KIND_LSTM && ctx->n_outputs > 2 &&
        !(Yc = mcp_kout(ctx, 2, X->dtype, 3, sdims)))
        return MCP_STATUS_OUT_OF_MEMORY;

    /* Scratch: all inputs as double, plus per-step buffers. */
    int64_t n_x = mcp_tensor_numel(X), n_w = mcp_tensor_numel(W), n_r = mcp_tensor_numel(R);
    int64_t n_b = B ? mcp_tensor_numel(B) : 0, n_p = P ? mcp_tensor_numel(P) : 0;
    int64_t n_h0 = H0 ? mcp_tensor_numel(H0) : 0, n_c0 = C0 ? mcp_tensor_numel(C0) : 0;
    int64_t n_step = 3 * G * H + 2 * H + cfg.input;
    int64_t total = n_x + n_w + n_r + n_b + n_p + n_h0 + n_c0 + n_step;
    double *buf = mcp_malloc((size_t)(total > 0 ? total : 1) * sizeof(double));
    if (!buf) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory for scratch");
    double *x = buf, *w = x + n_x, *r = w + n_w, *b = r + n_r, *p = b + n_b, *h0 = p + n_p;
    double *c0 = h0 + n_h0, *xw = c0 + n_c0, *hr = xw + G * H, *tmp = hr + G * H;
    double *h = tmp + G * H, *c = h + H, *xt = c + H;
    rnn_load(X, x);
    rnn_load(W, w);
    rnn_load(R, r);
    if (B) rnn_load(B, b);
    if (P) rnn_load(P, p);
    if (H0) rnn_load(H0, h0);
    if (C0) rnn_load(C0, c0);

    for (int d = 0; d < num_dir; d++) {
        bool backward = reverse_only || d == 1;
        const double *wd = w + d * G * H * cfg.input;
        const double *rd = r + d * G * H * H;
        const double *wbd = B ? b + d * 2 * G * H : NULL;
        const double *rbd = B ? wbd + G * H : NULL;
        const double *pd = P ? p + d * 3 * H : NULL;
        const rnn_act *ad = acts + d * per_dir;
        for (int64_t bi = 0; bi < batch; bi++) {
            int64_t sidx = layout ? (bi * num_dir + d) * H : (d * batch + bi) * H;
            for (int64_t j = 0; j < H; j++) {
                h[j] = H0 ? h0[sidx + j] : 0.0;
                c[j] = C0 ? c0[sidx + j] : 0.0;
            }
            int64_t len = SL ? mcp_tensor_get_i64(SL, bi) : seq;
            for (int64_t s = 0; s < len; s++) {
                int64_t t = backward ? len - 1 - s : s;
                int64_t xidx = layout ? (bi * seq + t) * cfg.input : (t * batch + bi) * cfg.input;
                memcpy(xt, x + xidx, (size_t)cfg.input * sizeof(double));
                rnn_step(&cfg, ad, xt, wd, rd, wbd, rbd, pd, h, c, xw, hr, tmp);
                if (Y) {
                    int64_t yidx = layout ? ((bi * seq + t) * num_dir + d) * H
                                          : ((t * num_dir + d) * batch + bi) * H;
                    for (int64_t j = 0; j < H; j++) mcp_tensor_set_f64(Y, yidx + j, h[j]);
                }
            }
            for (int64_t j = 0; j < H; j++) {
                if (Yh) mcp_tensor_set_f64(Yh, sidx + j, h[j]);
                if (Yc) mcp_tensor_set_f64(Yc, sidx + j, c[j]);
            }
        }
    }
    mcp_free(buf);
    return MCP_STATUS_OK;
}

static mcp_status rnn_run_rnn(mcp_kernel_ctx *ctx) { return rnn_run_common(ctx, RNN_KIND_RNN); }
static mcp_status rnn_run_gru(mcp_kernel_ctx *ctx) { return rnn_run_common(ctx, RNN_KIND_GRU); }
static mcp_status rnn_run_lstm(mcp_kernel_ctx *ctx) { return rnn_run_common(ctx, RNN_KIND_LSTM); }

const mcp_kernel_def mcp__ref_rnn_kernels[] = {
    MCP_KERNEL_ENTRY("", "RNN", 1, 0, rnn_run_rnn, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "GRU", 1, 0, rnn_run_gru, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "LSTM", 1, 0, rnn_run_lstm, NULL, NULL, NULL),
};
const int mcp__ref_rnn_kernel_count = (int)(sizeof(mcp__ref_rnn_kernels) /
                                            sizeof(mcp__ref_rnn_kernels[0]));
