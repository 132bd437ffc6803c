/* norm_rows.h — row routines of the normalizers, in double, for the
 * reference kernels (k_norm.c) and the fused ops that reuse them
 * (FusedResidualLN / FusedResidualRmsNorm, attention's softmax).
 *
 * Each works in place on a contiguous row of n doubles. */
#ifndef RLX_CPU_NORM_ROWS_H
#define RLX_CPU_NORM_ROWS_H

#include <stdint.h>

/* Mean and biased variance of x[0..n) (two passes). n == 0 gives NaN. */
void cpu_moments(const double *x, int64_t n, double *mean, double *var);

/* exp(x - max) / sum, max-subtracted. A row of all -inf gives NaN (as
 * NumPy/PyTorch); callers that want zeros for a fully masked row (attention)
 * check max == -inf themselves. A NaN in the row makes the row NaN. */
void cpu_softmax_row(double *x, int64_t n);
/* x - max - log(sum(exp(x - max))); same edge cases as cpu_softmax_row. */
void cpu_log_softmax_row(double *x, int64_t n);

/* (x - mean) / sqrt(var + eps) * gamma[i] + beta[i]; biased variance. */
void cpu_layer_norm_row(double *x, int64_t n, const double *gamma, const double *beta,
                        double eps);
/* x / sqrt(mean(x^2) + eps) * gamma[i] + beta[i]. */
void cpu_rms_norm_row(double *x, int64_t n, const double *gamma, const double *beta,
                      double eps);

/* ---- f32 rows (the F32/F16/BF16 kernels), through the vector table of
 * vec.h; moments in double (two passes), so the f32 results agree with the
 * double routines above to a few ulp. x and y may be the same row. */
void cpu_layer_norm_row_f32(const float *x, float *y, int64_t n, const float *gamma,
                            const float *beta, double eps);
void cpu_rms_norm_row_f32(const float *x, float *y, int64_t n, const float *gamma,
                          const float *beta, double eps);

#endif /* RLX_CPU_NORM_ROWS_H */
