/* mel.h — the LogMel op's mel filterbank, one definition for the CPU
 * kernel (backend/cpu/k_signal.c) and the decomposition autodiff builds
 * (autodiff/expand.c). */
#ifndef RLX_IR_MEL_H
#define RLX_IR_MEL_H

#include "ir.h"

/* librosa.filters.mel(htk=False, norm="slaney") for LogMel attributes a:
 * filter i is the triangle over the mel points hz[i], hz[i+1], hz[i+2]
 * (n_mels + 2 points evenly spaced in Slaney mels from f_min to f_max),
 * scaled by 2 / (hz[i+2] - hz[i]) to unit area. The weight of filter i at
 * frequency bin k (of bins) goes to fb[i * mel_stride + k * bin_stride];
 * hz: n_mels + 2 scratch. */
void ir_mel_filterbank(const ir_attrs *a, int64_t bins, double *fb, int64_t mel_stride, int64_t bin_stride,
                       double *hz);

#endif
