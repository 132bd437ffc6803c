/* vec.h — the row and tile primitives under the fast CPU kernels (softmax,
 * norms, reductions, elementwise chains, attention), one table per
 * instruction set: portable C (vec_portable.c), AVX2/FMA/F16C
 * (vec_avx2.c) and AVX-512 (vec_avx512.c: the AVX2 table with the
 * elementwise entries and softmax's exp on 16 lanes), each compiled with
 * its flags. The kernels are written once against the table; cpu_vec()
 * picks the entry for this CPU (cpu_features.h: AVX-512 when the CPU and OS
 * have AVX-512 F/BW/VL and RLX_NO_AVX512 is not set, else AVX2 when they
 * have AVX2, FMA and F16C and RLX_NO_AVX2 is not set), so vector code never
 * runs where it cannot.
 *
 * Values are f32 (storage dtypes F16/BF16 are converted at the edges by
 * load/store). Both tables compute the same functions; they differ in
 * summation order and in the last bits of the transcendental functions (the
 * portable table evaluates those through the double-precision reference
 * math of elementwise_math.h). Every n may be 0.
 */
#ifndef RLX_CPU_VEC_H
#define RLX_CPU_VEC_H

#include "cpu.h"

#include <stdint.h>

typedef struct {
  const char *name; /* "avx512", "avx2" or "portable" */

  /* ---- conversion (t: RLX_F32, RLX_F16 or RLX_BF16) */
  /* dst[i] = element i of src stored as t; load also decodes RLX_Q8_0 and
   * RLX_Q4_0 blocks (n a multiple of 32), as quant_blocks.h does */
  void (*load)(float *dst, const void *src, rlx_dtype t, int64_t n);
  /* element i of dst stored as t = src[i], rounded to nearest even */
  void (*store)(void *dst, rlx_dtype t, const float *src, int64_t n);
  /* x[i] = x[i] rounded to t's precision (F16/BF16; F32: unchanged) */
  void (*round)(float *x, rlx_dtype t, int64_t n);

  /* ---- elementwise (y may be x / a / b) */
  /* y[i] = act(x[i]) (alpha: leaky_relu's slope), as cpu_act_apply */
  void (*act)(rlx_act act, float alpha, const float *x, float *y, int64_t n);
  /* y[i] = a[i*sa] op b[i*sb], sa and sb 0 (broadcast a[0]) or 1, as
   * cpu_binop_apply_f */
  void (*binary)(rlx_binop op, const float *a, int sa, const float *b, int sb, float *y, int64_t n);
  /* y[i] = 1 if a[i*sa] op b[i*sb] else 0 (NaN is unordered) */
  void (*compare)(rlx_cmpop op, const float *a, int sa, const float *b, int sb, float *y, int64_t n);
  /* y[i] *= s */
  void (*scale)(float *y, float s, int64_t n);

  /* ---- reductions over a row */
  /* sums to double accuracy (double, or f32 lanes over short blocks whose
   * totals are added in double) */
  double (*sum)(const float *x, int64_t n);
  double (*sum_sq_dev)(const float *x, float c, int64_t n); /* sum (x[i] - c)^2 */
  float (*max)(const float *x, int64_t n);                  /* NaN if any x[i] is; -inf for n = 0 */
  float (*min)(const float *x, int64_t n);                  /* NaN if any x[i] is; +inf for n = 0 */
  /* y[i] = exp(x[i] - c); returns sum y in double (y may be x) */
  double (*exp_shift_sum)(const float *x, float c, float *y, int64_t n);
  /* y[i] = (x[i] - shift) * scale * gamma[i] + beta[i]; gamma, beta NULL
   * mean 1, 0 (y may be x) */
  void (*norm_affine)(const float *x, float shift, float scale, const float *gamma,
                      const float *beta, float *y, int64_t n);

  /* ---- reductions across rows: acc[i] (op)= x[i] */
  void (*acc_sum)(double *acc, const float *x, int64_t n);
  void (*acc_max)(float *acc, const float *x, int64_t n); /* NaN sticks */
  void (*acc_min)(float *acc, const float *x, int64_t n); /* NaN sticks */

  /* ---- attention tiles (row strides in elements)
   * qk: s[r*lds + c] = sum_k q[r*ldq + k] * kt[k*ldkt + c] for r < rows,
   *     c < cols. kt is k-major (keys transposed) and, like each row of s,
   *     has room for cols rounded up to a multiple of 8 (contents past
   *     cols are don't-care inputs and overwritten outputs).
   * pv: o[r*ldo + j] += sum_c p[r*ldp + c] * v[c*ldv + j] for r < rows,
   *     j < d: nothing is read past column d of v or o. */
  void (*qk_tile)(const float *q, int64_t ldq, const float *kt, int64_t ldkt, float *s, int64_t lds,
                  int64_t rows, int64_t cols, int64_t depth);
  void (*pv_tile)(const float *p, int64_t ldp, const float *v, int64_t ldv, float *o, int64_t ldo,
                  int64_t rows, int64_t cols, int64_t d);
  /* qk against keys stored as rows (few query rows: decode), nothing read
   * past column depth of a key row or past row cols - 1:
   * s[r*lds + c] = sum_k q[r*ldq + k] * k[c*ldk + k] */
  void (*qk_rows)(const float *q, int64_t ldq, const float *k, int64_t ldk, float *s, int64_t lds,
                  int64_t rows, int64_t cols, int64_t depth);
} cpu_vec_ops;

extern const cpu_vec_ops cpu_vec_portable;
/* NULL where vec_avx2.c was built without -mavx2 -mfma -mf16c (not x86, or
 * a build that does not set the flags): then only the portable table runs. */
extern const cpu_vec_ops *const cpu_vec_avx2;
/* The AVX-512 table (built on first call; thread-safe), or NULL where
 * vec_avx512.c or vec_avx2.c was built without their flags. Only the
 * entries' speed differs from the AVX2 table: the activations give the same
 * results bit for bit. */
const cpu_vec_ops *cpu_vec_avx512(void);

/* The table for this CPU (chosen once; thread-safe). */
const cpu_vec_ops *cpu_vec(void);

/* ---- shared by both tables */

/* Elements of rows per parallel chunk that make a thread's share worth
 * waking it for: cpu_parallel_for grains are derived from it. */
#define CPU_VEC_MIN_CHUNK 16384

/* Grain (in items of item_elems elements each) that gives chunks of at
 * least CPU_VEC_MIN_CHUNK elements. */
int64_t cpu_vec_grain(int64_t item_elems);

#endif /* RLX_CPU_VEC_H */
