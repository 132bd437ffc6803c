/* k_signal.c — CPU reference kernels of Fft and LogMel, computed in double
 * for every dtype. Complex values are interleaved (re, im) pairs. */
#include "cpu.h"
#include "../../ir/mel.h"

#include <math.h>
#include <stdlib.h>

#define PI 3.14159265358979323846

/* ---------------------------------------------------------------- FFT of any length */

/* A forward DFT of length n: radix-2 when n is a power of two, otherwise
 * Bluestein's chirp-z transform (a radix-2 convolution of length m >= 2n-1),
 * so every length is O(n log n) with double accuracy. */
typedef struct {
  int64_t n, m;   /* transform length; radix-2 length (m == n: no Bluestein) */
  double *tw;     /* m/2 twiddles exp(-2 pi i j / m) */
  double *chirp;  /* Bluestein: n values exp(-i pi k^2 / n) */
  double *filter; /* Bluestein: the FFT of the conjugate chirp, wrapped to length m */
  double *work;   /* Bluestein: m values of scratch */
} fft_plan;

static void fft_plan_free(fft_plan *p) {
  free(p->tw);
  free(p->chirp);
  free(p->filter);
  free(p->work);
}

static void conj_all(double *z, int64_t count) {
  for (int64_t i = 0; i < count; i++) z[2 * i + 1] = -z[2 * i + 1];
}

/* In place, forward, p->m values. */
static void fft_radix2(const fft_plan *p, double *z) {
  int64_t m = p->m;
  for (int64_t i = 1, j = 0; i < m; i++) { /* bit-reversal permutation */
    int64_t bit = m >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j |= bit;
    if (i < j) {
      double re = z[2 * i], im = z[2 * i + 1];
      z[2 * i] = z[2 * j];
      z[2 * i + 1] = z[2 * j + 1];
      z[2 * j] = re;
      z[2 * j + 1] = im;
    }
  }
  for (int64_t len = 2; len <= m; len <<= 1) {
    int64_t half = len / 2, step = m / len;
    for (int64_t s = 0; s < m; s += len) {
      for (int64_t k = 0; k < half; k++) {
        double wr = p->tw[2 * k * step], wi = p->tw[2 * k * step + 1];
        double *a = z + 2 * (s + k), *b = z + 2 * (s + k + half);
        double br = b[0] * wr - b[1] * wi, bi = b[0] * wi + b[1] * wr;
        b[0] = a[0] - br;
        b[1] = a[1] - bi;
        a[0] += br;
        a[1] += bi;
      }
    }
  }
}

static rlx_status fft_plan_init(fft_plan *p, int64_t n) {
  *p = (fft_plan){.n = n, .m = 1};
  while (p->m < n) p->m <<= 1;
  int bluestein = p->m != n;
  if (bluestein)
    while (p->m < 2 * n - 1) p->m <<= 1;
  int64_t m = p->m;
  p->tw = malloc((size_t)m * sizeof *p->tw); /* m/2 complex values */
  if (bluestein) {
    p->chirp = malloc((size_t)(2 * n) * sizeof *p->chirp);
    p->filter = calloc((size_t)(2 * m), sizeof *p->filter);
    p->work = malloc((size_t)(2 * m) * sizeof *p->work);
  }
  if (!p->tw || (bluestein && (!p->chirp || !p->filter || !p->work))) {
    fft_plan_free(p);
    return RLX_ERR_NOMEM;
  }
  for (int64_t j = 0; j < m / 2; j++) {
    double angle = -2.0 * PI * (double)j / (double)m;
    p->tw[2 * j] = cos(angle);
    p->tw[2 * j + 1] = sin(angle);
  }
  if (bluestein) {
    for (int64_t k = 0; k < n; k++) {
      /* k^2 mod 2n keeps the angle small, hence accurate. */
      uint64_t r = (uint64_t)k * (uint64_t)k % (uint64_t)(2 * n);
      double angle = -PI * (double)r / (double)n;
      p->chirp[2 * k] = cos(angle);
      p->chirp[2 * k + 1] = sin(angle);
    }
    for (int64_t k = 0; k < n; k++) {
      int64_t at[2] = {k, (m - k) % m};
      for (int e = 0; e < 2; e++) {
        p->filter[2 * at[e]] = p->chirp[2 * k];
        p->filter[2 * at[e] + 1] = -p->chirp[2 * k + 1];
      }
    }
    fft_radix2(p, p->filter);
  }
  return RLX_OK;
}

/* z: p->n complex values, in place: the forward DFT, or with inverse the
 * unscaled inverse DFT (conj of the DFT of conj z). */
static void fft_run(const fft_plan *p, double *z, int inverse) {
  int64_t n = p->n, m = p->m;
  if (inverse) conj_all(z, n);
  if (m == n) {
    fft_radix2(p, z);
  } else {
    /* X_k = c_k * sum_t (x_t c_t) conj(c_{k-t}), c_k = exp(-i pi k^2 / n):
     * a circular convolution with the chirp filter, done as FFT products. */
    double *w = p->work;
    for (int64_t k = 0; k < m; k++) {
      double re = 0, im = 0;
      if (k < n) {
        const double *c = p->chirp + 2 * k;
        re = z[2 * k] * c[0] - z[2 * k + 1] * c[1];
        im = z[2 * k] * c[1] + z[2 * k + 1] * c[0];
      }
      w[2 * k] = re;
      w[2 * k + 1] = im;
    }
    fft_radix2(p, w);
    for (int64_t k = 0; k < m; k++) {
      const double *f = p->filter + 2 * k;
      double re = w[2 * k] * f[0] - w[2 * k + 1] * f[1];
      double im = w[2 * k] * f[1] + w[2 * k + 1] * f[0];
      w[2 * k] = re;
      w[2 * k + 1] = -im; /* conjugated: the inverse FFT below is conj(FFT(conj)) */
    }
    fft_radix2(p, w);
    for (int64_t k = 0; k < n; k++) {
      const double *c = p->chirp + 2 * k;
      double re = w[2 * k] / (double)m, im = -w[2 * k + 1] / (double)m;
      z[2 * k] = re * c[0] - im * c[1];
      z[2 * k + 1] = re * c[1] + im * c[0];
    }
  }
  if (inverse) conj_all(z, n);
}

/* ---------------------------------------------------------------- Fft */

/* One transform of length tn per line along the axis (outer x inner lines).
 * The line is cropped / zero-padded to tn; irfft first rebuilds the full
 * Hermitian spectrum from the first tn/2+1 bins. See ir_infer_Fft. */
rlx_status cpu_Fft(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *xt = &in[0];
  int real = n->a.real != 0, inverse = n->a.inverse != 0;
  int complex_in = !real || inverse, complex_out = !real || !inverse;
  int axis = (int)n->a.axis, rank = complex_in ? xt->rank - 1 : xt->rank;
  int64_t outer = 1, inner = 1, len = xt->d[axis], out_len = out->d[axis];
  for (int i = 0; i < axis; i++) outer *= xt->d[i];
  for (int i = axis + 1; i < rank; i++) inner *= xt->d[i];
  int64_t tn = n->a.n ? n->a.n : real && inverse ? 2 * (len - 1) : len;
  fft_plan p;
  if (fft_plan_init(&p, tn) != RLX_OK)
    return rlx_set_error(RLX_ERR_NOMEM, "Fft (node %d): out of memory", n->id);
  double *x = cpu_load_f64(xt);
  double *y = malloc((size_t)out->numel * sizeof *y + 1);
  double *z = malloc((size_t)(2 * tn) * sizeof *z);
  if (!x || !y || !z) {
    fft_plan_free(&p);
    free(x);
    free(y);
    free(z);
    return rlx_set_error(RLX_ERR_NOMEM, "Fft (node %d): out of memory", n->id);
  }
  double scale = inverse ? 1.0 / (double)tn : 1.0;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t k = 0; k < tn; k++) {
        int64_t src = k;
        if (real && inverse && k > tn / 2) src = tn - k; /* conj of the mirrored bin */
        double re = 0, im = 0;
        if (src < len) {
          int64_t at = (o * len + src) * inner + i;
          re = complex_in ? x[2 * at] : x[at];
          im = complex_in ? x[2 * at + 1] : 0;
        }
        if (real && inverse) {
          if (k > tn / 2)
            im = -im; /* X[tn - k] = conj X[k] */
          else if (k == 0 || 2 * k == tn)
            im = 0; /* the DC and Nyquist bins are real */
        }
        z[2 * k] = re;
        z[2 * k + 1] = im;
      }
      fft_run(&p, z, inverse);
      for (int64_t k = 0; k < out_len; k++) {
        int64_t at = (o * out_len + k) * inner + i;
        if (complex_out) {
          y[2 * at] = z[2 * k] * scale;
          y[2 * at + 1] = z[2 * k + 1] * scale;
        } else {
          y[at] = z[2 * k] * scale;
        }
      }
    }
  }
  cpu_store_f64(out, y);
  fft_plan_free(&p);
  free(x);
  free(y);
  free(z);
  return RLX_OK;
}

/* ---------------------------------------------------------------- LogMel */

/* Frame f of batch b covers padded samples [f*hop, f*hop + n_fft) of the
 * audio reflect-padded by n_fft/2 (torch.stft center=True). */
rlx_status cpu_LogMel(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const ir_attrs *a = &n->a;
  int64_t batch = in[0].d[0], t = in[0].d[1], frames = out->d[2];
  int64_t n_fft = a->n_fft, half = n_fft / 2, bins = half + 1, nm = a->n_mels;
  if (t <= half)
    return rlx_set_error(RLX_ERR_SHAPE, "LogMel (node %d): %lld samples, reflect padding "
                         "needs more than %lld", n->id, (long long)t, (long long)half);
  fft_plan p;
  if (fft_plan_init(&p, n_fft) != RLX_OK)
    return rlx_set_error(RLX_ERR_NOMEM, "LogMel (node %d): out of memory", n->id);
  /* scratch: window[n_fft], fb[nm * bins], hz[nm + 2], z[2 * n_fft], power[bins] */
  size_t count = (size_t)(n_fft + nm * bins + nm + 2 + 2 * n_fft + bins);
  double *scratch = malloc(count * sizeof *scratch);
  double *x = cpu_load_f64(&in[0]);
  double *y = malloc((size_t)out->numel * sizeof *y + 1);
  if (!scratch || !x || !y) {
    fft_plan_free(&p);
    free(scratch);
    free(x);
    free(y);
    return rlx_set_error(RLX_ERR_NOMEM, "LogMel (node %d): out of memory", n->id);
  }
  double *window = scratch, *fb = window + n_fft, *hz = fb + nm * bins, *z = hz + nm + 2;
  double *power = z + 2 * n_fft;
  for (int64_t j = 0; j < n_fft; j++) /* periodic Hann */
    window[j] = 0.5 - 0.5 * cos(2.0 * PI * (double)j / (double)n_fft);
  ir_mel_filterbank(a, bins, fb, bins, 1, hz); /* n_mels x bins */
  for (int64_t b = 0; b < batch; b++) {
    const double *xb = x + b * t;
    for (int64_t f = 0; f < frames; f++) {
      for (int64_t j = 0; j < n_fft; j++) {
        int64_t s = f * a->hop + j - half;
        if (s < 0) s = -s;
        if (s >= t) s = 2 * (t - 1) - s;
        z[2 * j] = xb[s] * window[j];
        z[2 * j + 1] = 0;
      }
      fft_run(&p, z, 0);
      for (int64_t k = 0; k < bins; k++)
        power[k] = z[2 * k] * z[2 * k] + z[2 * k + 1] * z[2 * k + 1];
      for (int64_t i = 0; i < nm; i++) {
        double mel = 0;
        for (int64_t k = 0; k < bins; k++) mel += fb[i * bins + k] * power[k];
        y[(b * nm + i) * frames + f] = log10(mel < 1e-10 ? 1e-10 : mel) /* NaN stays */;
      }
    }
  }
  cpu_store_f64(out, y);
  fft_plan_free(&p);
  free(scratch);
  free(x);
  free(y);
  return RLX_OK;
}
