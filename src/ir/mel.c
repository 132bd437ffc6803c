/* mel.c — the LogMel op's mel filterbank (mel.h). */
#include "mel.h"

#include <math.h>

/* Slaney's mel scale (librosa hz_to_mel / mel_to_hz, htk=False): linear
 * (200/3 Hz per mel) below 1 kHz, logarithmic (a factor 6.4 per 27 mels)
 * above. */
#define MEL_F_SP (200.0 / 3.0)
#define MEL_MIN_LOG_HZ 1000.0
#define MEL_MIN_LOG_MEL (MEL_MIN_LOG_HZ / MEL_F_SP)
#define MEL_LOGSTEP (log(6.4) / 27.0)

static double hz_to_mel(double f) {
  return f >= MEL_MIN_LOG_HZ ? MEL_MIN_LOG_MEL + log(f / MEL_MIN_LOG_HZ) / MEL_LOGSTEP : f / MEL_F_SP;
}

static double mel_to_hz(double m) {
  return m >= MEL_MIN_LOG_MEL ? MEL_MIN_LOG_HZ * exp(MEL_LOGSTEP * (m - MEL_MIN_LOG_MEL)) : MEL_F_SP * m;
}

void ir_mel_filterbank(const ir_attrs *a, int64_t bins, double *fb, int64_t mel_stride, int64_t bin_stride,
                       double *hz) {
  int64_t nm = a->n_mels;
  double lo = hz_to_mel(a->f_min), hi = hz_to_mel(a->f_max);
  for (int64_t i = 0; i < nm + 2; i++) hz[i] = mel_to_hz(lo + (hi - lo) * (double)i / (double)(nm + 1));
  for (int64_t i = 0; i < nm; i++) {
    double enorm = 2.0 / (hz[i + 2] - hz[i]);
    for (int64_t k = 0; k < bins; k++) {
      double f = (double)k * (double)a->sample_rate / (double)a->n_fft;
      double rise = (f - hz[i]) / (hz[i + 1] - hz[i]);
      double fall = (hz[i + 2] - f) / (hz[i + 2] - hz[i + 1]);
      double v = rise < fall ? rise : fall;
      fb[i * mel_stride + k * bin_stride] = v > 0 ? v * enorm : 0.0;
    }
  }
}
