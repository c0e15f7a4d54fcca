/*
 * Reference kernels: signal family.
 *
 * This file holds the spectral ops (DFT, STFT, the three windows and
 * MelWeightMatrix) and the family table. Text ops live in signal_text.c,
 * the preview training optimizers in signal_train.c.
 *
 * Transforms compute in double: a radix-2 FFT when the length is a power of
 * two, otherwise a direct DFT over a precomputed twiddle table.
 */
#include <math.h>
#include <string.h>

#include "ops/ref/signal_util.h"

#define SIG_PI 3.14159265358979323846

static bool sig_is_float(mcp_dtype d)
{
    return d == MCP_DTYPE_FLOAT || d == MCP_DTYPE_DOUBLE || d == MCP_DTYPE_FLOAT16 ||
           d == MCP_DTYPE_BFLOAT16;
}

/* Reads a one-element integer input. */
static mcp_status sig_scalar_int(mcp_kernel_ctx *ctx, const mcp_tensor *t, const char *name,
                                 int64_t *out)
{
    if (!t) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is required", name);
    if (!mcp_dtype_is_integer(t->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must be an integer, got %s",
                         name, mcp_dtype_name(t->dtype));
    if (mcp_tensor_numel(t) != 1 || t->rank > 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must be a scalar", name);
    *out = mcp_tensor_get_i64(t, 0);
    return MCP_STATUS_OK;
}

/* Reads a one-element floating-point input. */
static mcp_status sig_scalar_float(mcp_kernel_ctx *ctx, const mcp_tensor *t, const char *name,
                                   double *out)
{
    if (!t) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' is required", name);
    if (!mcp_dtype_is_numeric(t->dtype))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' has dtype %s", name,
                         mcp_dtype_name(t->dtype));
    if (mcp_tensor_numel(t) != 1 || t->rank > 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input '%s' must be a scalar", name);
    *out = mcp_tensor_get_f64(t, 0);
    return MCP_STATUS_OK;
}

/* Validates the output_datatype attribute (default float). */
static mcp_status sig_output_dtype(mcp_kernel_ctx *ctx, mcp_dtype *out)
{
    int64_t v = mcp_kattr_int(ctx, "output_datatype", MCP_DTYPE_FLOAT);
    if (v <= 0 || v >= MCP_DTYPE_COUNT || !mcp_dtype_is_numeric((mcp_dtype)v) ||
        v == MCP_DTYPE_BOOL)
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "attribute 'output_datatype' is %lld",
                         (long long)v);
    *out = (mcp_dtype)v;
    return MCP_STATUS_OK;
}

/* ---- transform engine ---- */

/* A transform of one length: twiddles plus a lane of work space. */
typedef struct sig_fft {
    int64_t n;
    bool pow2;
    double *cos_t; /* cos(2 pi m / n), m < n */
    double *sin_t;
    double *re;    /* the lane to transform, n entries */
    double *im;
    double *tmp_re; /* scratch for the direct DFT */
    double *tmp_im;
} sig_fft;

static mcp_status sig_fft_init(mcp_kernel_ctx *ctx, sig_fft *f, int64_t n)
{
    memset(f, 0, sizeof(*f));
    if (n <= 0 || n > (INT64_C(1) << 40))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "transform length %lld is invalid",
                         (long long)n);
    double *buf = mcp_malloc((size_t)n * 6 * sizeof(double));
    if (!buf) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory for transform");
    f->n = n;
    f->pow2 = (n & (n - 1)) == 0;
    f->cos_t = buf;
    f->sin_t = buf + n;
    f->re = buf + 2 * n;
    f->im = buf + 3 * n;
    f->tmp_re = buf + 4 * n;
    f->tmp_im = buf + 5 * n;
    for (int64_t m = 0; m < n; m++) {
        double a = 2.0 * SIG_PI * (double)m / (double)n;
        f->cos_t[m] = cos(a);
        f->sin_t[m] = sin(a);
    }
    return MCP_STATUS_OK;
}

static void sig_fft_free(sig_fft *f)
{
    mcp_free(f->cos_t);
    f->cos_t = NULL;
}

/* Transforms f->re / f->im in place: forward uses e^{-2 pi i k n / N};
 * inverse uses e^{+2 pi i k n / N} and scales by 1/N. */
static void sig_fft_run(sig_fft *f, bool inverse)
{
    int64_t n = f->n;
    double sign = inverse ? 1.0 : -1.0;
    double *re = f->re, *im = f->im;
    if (f->pow2) {
        for (int64_t i = 1, j = 0; i < n; i++) {
            int64_t bit = n >> 1;
            for (; j & bit; bit >>= 1) j ^= bit;
            j ^= bit;
            if (i < j) {
                double t = re[i];
                re[i] = re[j];
                re[j] = t;
                t = im[i];
                im[i] = im[j];
                im[j] = t;
            }
        }
        for (int64_t len = 2; len <= n; len <<= 1) {
            int64_t half = len >> 1, step = n / len;
            for (int64_t i = 0; i < n; i += len) {
                for (int64_t k = 0; k < half; k++) {
                    double wr = f->cos_t[k * step], wi = sign * f->sin_t[k * step];
                    int64_t a = i + k, b = a + half;
                    double tr = re[b] * wr - im[b] * wi;
                    double ti = re[b] * wi + im[b] * wr;
                    re[b] = re[a] - tr;
                    im[b] = im[a] - ti;
                    re[a] += tr;
                    im[a] += ti;
                }
            }
        }
    } else {
        for (int64_t k = 0; k < n; k++) {
            double sr = 0.0, si = 0.0;
            int64_t m = 0; /* (k * j) mod n, kept incrementally */
            for (int64_t j = 0; j < n; j++) {
                double wr = f->cos_t[m], wi = sign * f->sin_t[m];
                sr += re[j] * wr - im[j] * wi;
                si += re[j] * wi + im[j] * wr;
                m += k;
                if (m >= n) m -= n;
            }
            f->tmp_re[k] = sr;
            f->tmp_im[k] = si;
        }
        memcpy(re, f->tmp_re, (size_t)n * sizeof(double));
        memcpy(im, f->tmp_im, (size_t)n * sizeof(double));
    }
    if (inverse) {
        double s = 1.0 / (double)n;
        for (int64_t k = 0; k < n; k++) {
            re[k] *= s;
            im[k] *= s;
        }
    }
}

/* ---- DFT ---- */

static mcp_status sig_run_dft(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *X = mcp_kin(ctx, 0);
    const mcp_tensor *LEN = mcp_kin(ctx, 1);
    mcp_status st;
    if (!X) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' is required");
    if (!sig_is_float(X->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'input' has unsupported dtype %s",
                         mcp_dtype_name(X->dtype));
    if (X->rank < 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'input' must have rank >= 2");
    int r = X->rank;
    int64_t C = X->dims[r - 1];
    if (C != 1 && C != 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'input' last dimension must be 1 (real) or 2 (complex), got %lld",
                         (long long)C);

    int64_t axis_raw;
    if (ctx->opset >= 20) {
        const mcp_tensor *A = mcp_kin(ctx, 2);
        axis_raw = -2;
        if (A && (st = sig_scalar_int(ctx, A, "axis", &axis_raw)) != MCP_STATUS_OK) return st;
    } else {
        axis_raw = mcp_kattr_int(ctx, "axis", 1);
    }
    int axis;
    if (!mcp_axis_normalize(axis_raw, r, &axis) || axis == r - 1)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "axis %lld is out of range for input of rank %d", (long long)axis_raw, r);

    int64_t inverse_attr = mcp_kattr_int(ctx, "inverse", 0);
    int64_t onesided_attr = mcp_kattr_int(ctx, "onesided", 0);
    if ((inverse_attr != 0 && inverse_attr != 1) || (onesided_attr != 0 && onesided_attr != 1))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attributes 'inverse' (%lld) and 'onesided' (%lld) must be 0 or 1",
                         (long long)inverse_attr, (long long)onesided_attr);
    bool inverse = inverse_attr == 1, onesided = onesided_attr == 1;
    /* onesided with inverse is the inverse real transform (IRFFT): the
     * input holds bins 0 .. N/2 of a Hermitian spectrum, the output the
     * real signal of N samples, N defaulting to 2 * (bins - 1). */
    bool irfft = onesided && inverse;
    if (onesided && !inverse && C == 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'onesided' without 'inverse' needs real input (last dimension 1)");
    if (irfft && C != 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attributes 'onesided' and 'inverse' (IRFFT) need complex input (last "
                         "dimension 2)");

    int64_t L = X->dims[axis];
    int64_t N = irfft ? 2 * (L - 1) : L;
    if (LEN) {
        if ((st = sig_scalar_int(ctx, LEN, "dft_length", &N)) != MCP_STATUS_OK) return st;
        if (N <= 0)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'dft_length' is %lld",
                             (long long)N);
    } else if (N <= 0) {
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'input' has %lld bins on axis %d; IRFFT needs 'dft_length' "
                         "or at least 2 bins",
                         (long long)L, axis);
    }

    int64_t n_out = onesided && !inverse ? N / 2 + 1 : N;
    int64_t odims[MCP_MAX_RANK];
    memcpy(odims, X->dims, sizeof(int64_t) * (size_t)r);
    odims[axis] = n_out;
    odims[r - 1] = irfft ? 1 : 2;
    mcp_tensor *Y = mcp_kout(ctx, 0, X->dtype, r, odims);
    if (!Y) return MCP_STATUS_OUT_OF_MEMORY;
    if (mcp_tensor_numel(Y) == 0) return MCP_STATUS_OK;

    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= X->dims[i];
    for (int i = axis + 1; i < r - 1; i++) inner *= X->dims[i];

    sig_fft f;
    if ((st = sig_fft_init(ctx, &f, N)) != MCP_STATUS_OK) return st;
    /* IRFFT reads bins 0 .. N/2 (zero past the input's end). */
    int64_t n_read = irfft ? N / 2 + 1 : N;
    int64_t n_in = L < n_read ? L : n_read;
    int64_t oc = irfft ? 1 : 2;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t n = 0; n < N; n++) {
                f.re[n] = 0.0;
                f.im[n] = 0.0;
            }
            for (int64_t n = 0; n < n_in; n++) {
                int64_t idx = ((o * L + n) * inner + i) * C;
                f.re[n] = mcp_tensor_get_f64(X, idx);
                if (C == 2) f.im[n] = mcp_tensor_get_f64(X, idx + 1);
            }
            if (irfft) {
                /* The rest of the spectrum by conjugate symmetry; bin 0 and,
                 * for even N, bin N/2 are their own mirrors and so real. */
                f.im[0] = 0.0;
                if (N % 2 == 0) f.im[N / 2] = 0.0;
                for (int64_t k = N / 2 + 1; k < N; k++) {
                    f.re[k] = f.re[N - k];
                    f.im[k] = -f.im[N - k];
                }
            }
            sig_fft_run(&f, inverse);
            for (int64_t k = 0; k < n_out; k++) {
                int64_t idx = ((o * n_out + k) * inner + i) * oc;
                mcp_tensor_set_f64(Y, idx, f.re[k]);
                if (!irfft) mcp_tensor_set_f64(Y, idx + 1, f.im[k]);
            }
        }
    }
    sig_fft_free(&f);
    return MCP_STATUS_OK;
}

/* ---- STFT ---- */

static mcp_status sig_run_stft(mcp_kernel_ctx *ctx)
{
    const mcp_tensor *X = mcp_kin(ctx, 0);
    const mcp_tensor *STEP = mcp_kin(ctx, 1);
    const mcp_tensor *WIN = mcp_kin(ctx, 2);
    const mcp_tensor *FLEN = mcp_kin(ctx, 3);
    mcp_status st;
    if (!X) return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'signal' is required");
    if (!sig_is_float(X->dtype))
        return mcp_kfail(ctx, MCP_STATUS_UNSUPPORTED, "input 'signal' has unsupported dtype %s",
                         mcp_dtype_name(X->dtype));
    if (X->rank != 3 || (X->dims[2] != 1 && X->dims[2] != 2))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "input 'signal' must have shape [batch, length, 1 or 2]");
    int64_t batch = X->dims[0], len = X->dims[1], C = X->dims[2];
    int64_t step;
    if ((st = sig_scalar_int(ctx, STEP, "frame_step", &step)) != MCP_STATUS_OK) return st;
    if (step <= 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'frame_step' is %lld",
                         (long long)step);
    int64_t N = -1;
    if (WIN) {
        if (WIN->rank != 1 || !sig_is_float(WIN->dtype))
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'window' must be a 1-D floating-point tensor");
        N = WIN->dims[0];
    }
    if (FLEN) {
        int64_t fl;
        if ((st = sig_scalar_int(ctx, FLEN, "frame_length", &fl)) != MCP_STATUS_OK) return st;
        if (N >= 0 && fl != N)
            return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                             "input 'frame_length' (%lld) differs from the window length (%lld)",
                             (long long)fl, (long long)N);
        N = fl;
    }
    if (N < 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "one of inputs 'window' and 'frame_length' is required");
    if (N == 0 || N > len)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "frame length %lld is not in [1, signal length %lld]", (long long)N,
                         (long long)len);
    bool onesided = mcp_kattr_int(ctx, "onesided", 1) != 0;
    if (onesided && C == 2)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "attribute 'onesided' needs a real signal (last dimension 1)");

    int64_t frames = (len - N) / step + 1;
    int64_t bins = onesided ? N / 2 + 1 : N;
    int64_t odims[4] = {batch, frames, bins, 2};
    mcp_tensor *Y = mcp_kout(ctx, 0, X->dtype, 4, odims);
    if (!Y) return MCP_STATUS_OUT_OF_MEMORY;
    if (mcp_tensor_numel(Y) == 0) return MCP_STATUS_OK;

    sig_fft f;
    if ((st = sig_fft_init(ctx, &f, N)) != MCP_STATUS_OK) return st;
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t fr = 0; fr < frames; fr++) {
            for (int64_t n = 0; n < N; n++) {
                int64_t idx = (b * len + fr * step + n) * C;
                double w = WIN ? mcp_tensor_get_f64(WIN, n) : 1.0;
                f.re[n] = w * mcp_tensor_get_f64(X, idx);
                f.im[n] = C == 2 ? w * mcp_tensor_get_f64(X, idx + 1) : 0.0;
            }
            sig_fft_run(&f, false);
            for (int64_t k = 0; k < bins; k++) {
                int64_t idx = ((b * frames + fr) * bins + k) * 2;
                mcp_tensor_set_f64(Y, idx, f.re[k]);
                mcp_tensor_set_f64(Y, idx + 1, f.im[k]);
            }
        }
    }
    sig_fft_free(&f);
    return MCP_STATUS_OK;
}

/* ---- windows ---- */

typedef enum sig_window {
    SIG_WINDOW_HANN = 0,
    SIG_WINDOW_HAMMING,
    SIG_WINDOW_BLACKMAN,
} sig_window;

static mcp_status sig_run_window(mcp_kernel_ctx *ctx, sig_window kind)
{
    mcp_status st;
    int64_t size;
    if ((st = sig_scalar_int(ctx, mcp_kin(ctx, 0), "size", &size)) != MCP_STATUS_OK) return st;
    if (size < 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'size' is %lld",
                         (long long)size);
    mcp_dtype dt = MCP_DTYPE_FLOAT;
    if ((st = sig_output_dtype(ctx, &dt)) != MCP_STATUS_OK) return st;
    bool periodic = mcp_kattr_int(ctx, "periodic", 1) != 0;
    mcp_tensor *Y = mcp_kout(ctx, 0, dt, 1, &size);
    if (!Y) return MCP_STATUS_OUT_OF_MEMORY;
    /* A symmetric window of one sample would divide by zero; use angle 0. */
    int64_t denom = periodic ? size : size - 1;
    if (denom < 1) denom = 1;
    for (int64_t n = 0; n < size; n++) {
        double a = 2.0 * SIG_PI * (double)n / (double)denom;
        double v;
        switch (kind) {
        case SIG_WINDOW_HANN: v = 0.5 - 0.5 * cos(a); break;
        case SIG_WINDOW_HAMMING: v = 25.0 / 46.0 - (21.0 / 46.0) * cos(a); break;
        default: v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2.0 * a); break;
        }
        mcp_tensor_set_f64(Y, n, v);
    }
    return MCP_STATUS_OK;
}

static mcp_status sig_run_hann(mcp_kernel_ctx *ctx) { return sig_run_window(ctx, SIG_WINDOW_HANN); }
static mcp_status sig_run_hamming(mcp_kernel_ctx *ctx)
{
    return sig_run_window(ctx, SIG_WINDOW_HAMMING);
}
static mcp_status sig_run_blackman(mcp_kernel_ctx *ctx)
{
    return sig_run_window(ctx, SIG_WINDOW_BLACKMAN);
}

/* ---- MelWeightMatrix ---- */

static double sig_hz_to_mel(double hz) { return 2595.0 * log10(1.0 + hz / 700.0); }
static double sig_mel_to_hz(double mel) { return 700.0 * (pow(10.0, mel / 2595.0) - 1.0); }

/*
 * Triangular filters over num_mel_bins + 2 points spaced evenly on the mel
 * scale between the edges; each point is mapped to a spectrogram bin as
 * floor((dft_length + 1) * hz / sample_rate), as the ONNX reference does.
 */
static mcp_status sig_run_mel(mcp_kernel_ctx *ctx)
{
    mcp_status st;
    int64_t n_mel = 0, dft_len = 0, rate = 0;
    double lo = 0, hi = 0;
    if ((st = sig_scalar_int(ctx, mcp_kin(ctx, 0), "num_mel_bins", &n_mel)) != MCP_STATUS_OK ||
        (st = sig_scalar_int(ctx, mcp_kin(ctx, 1), "dft_length", &dft_len)) != MCP_STATUS_OK ||
        (st = sig_scalar_int(ctx, mcp_kin(ctx, 2), "sample_rate", &rate)) != MCP_STATUS_OK ||
        (st = sig_scalar_float(ctx, mcp_kin(ctx, 3), "lower_edge_hertz", &lo)) !=
            MCP_STATUS_OK ||
        (st = sig_scalar_float(ctx, mcp_kin(ctx, 4), "upper_edge_hertz", &hi)) != MCP_STATUS_OK)
        return st;
    if (n_mel <= 0 || n_mel > (INT64_C(1) << 24))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'num_mel_bins' is %lld",
                         (long long)n_mel);
    if (dft_len <= 0 || dft_len > (INT64_C(1) << 30))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'dft_length' is %lld",
                         (long long)dft_len);
    if (rate <= 0)
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT, "input 'sample_rate' is %lld",
                         (long long)rate);
    if (!(lo >= 0.0) || !(hi >= lo) || !isfinite(hi))
        return mcp_kfail(ctx, MCP_STATUS_INVALID_ARGUMENT,
                         "edges lower_edge_hertz=%g and upper_edge_hertz=%g are invalid", lo, hi);
    mcp_dtype dt = MCP_DTYPE_FLOAT;
    if ((st = sig_output_dtype(ctx, &dt)) != MCP_STATUS_OK) return st;

    int64_t n_spec = dft_len / 2 + 1;
    int64_t odims[2] = {n_spec, n_mel};
    mcp_tensor *Y = mcp_kout(ctx, 0, dt, 2, odims);
    if (!Y) return MCP_STATUS_OUT_OF_MEMORY;

    int64_t n_pts = n_mel + 2;
    int64_t *bins = mcp_malloc((size_t)n_pts * sizeof(int64_t));
    if (!bins) return mcp_kfail(ctx, MCP_STATUS_OUT_OF_MEMORY, "out of memory");
    double lo_mel = sig_hz_to_mel(lo), hi_mel = sig_hz_to_mel(hi);
    double mel_step = (hi_mel - lo_mel) / (double)n_pts;
    for (int64_t i = 0; i < n_pts; i++) {
        double hz = sig_mel_to_hz((double)i * mel_step + lo_mel);
        bins[i] = (int64_t)floor((double)(dft_len + 1) * hz / (double)rate);
    }
    /* Writes outside the matrix (edges above Nyquist) are dropped. */
    for (int64_t m = 0; m < n_mel; m++) {
        int64_t left = bins[m], center = bins[m + 1], right = bins[m + 2];
        int64_t up = center - left, down = right - center;
        if (up == 0) {
            if (center >= 0 && center < n_spec) mcp_tensor_set_f64(Y, center * n_mel + m, 1.0);
        } else {
            for (int64_t j = left; j <= center; j++)
                if (j >= 0 && j < n_spec)
                    mcp_tensor_set_f64(Y, j * n_mel + m, (double)(j - left) / (double)up);
        }
        if (down > 0) {
            for (int64_t j = center; j < right; j++)
                if (j >= 0 && j < n_spec)
                    mcp_tensor_set_f64(Y, j * n_mel + m, (double)(right - j) / (double)down);
        }
    }
    mcp_free(bins);
    return MCP_STATUS_OK;
}

#define SIG_TRAINING "ai.onnx.preview.training"

const mcp_kernel_def mcp__ref_signal_kernels[] = {
    MCP_KERNEL_ENTRY("", "DFT", 17, 0, sig_run_dft, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "STFT", 17, 0, sig_run_stft, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "HannWindow", 17, 0, sig_run_hann, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "HammingWindow", 17, 0, sig_run_hamming, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "BlackmanWindow", 17, 0, sig_run_blackman, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "MelWeightMatrix", 17, 0, sig_run_mel, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "StringNormalizer", 10, 0, mcp__signal_run_string_normalizer, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY("", "TfIdfVectorizer", 9, 0, mcp__signal_run_tfidf_vectorizer, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY(SIG_TRAINING, "Adagrad", 1, 0, mcp__signal_run_adagrad, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY(SIG_TRAINING, "Adam", 1, 0, mcp__signal_run_adam, NULL, NULL, NULL),
    MCP_KERNEL_ENTRY(SIG_TRAINING, "Momentum", 1, 0, mcp__signal_run_momentum, NULL, NULL, NULL),
};
const int mcp__ref_signal_kernel_count = (int)(sizeof(mcp__ref_signal_kernels) /
                                               sizeof(mcp__ref_signal_kernels[0]));
