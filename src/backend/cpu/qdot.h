/* qdot.h — dot products of GGUF block rows with 8-bit activation rows, the
 * inner loop of DequantMatMul on the CPU (k_quant.c).
 *
 * As in llama.cpp, a weight row is never expanded to floats: the activation
 * row x is quantized once per call to 8-bit blocks of the weight's block
 * size, and each weight block meets its activation block in integer
 * arithmetic (exact), scaled by the two blocks' scales in float:
 *   legacy weights (Q4_0 .. Q8_0, blocks of 32) pair with qdot_q8_0 rows,
 *   K-quant weights (Q2_K .. Q8_K, blocks of 256) with qdot_q8_k rows.
 *
 * The activation levels are ggml's: qdot_q8_0 holds the levels of ggml's
 * quantize_row_q8_0_ref (d = amax / 127, qs = roundf(x / d)) and qdot_q8_k
 * is ggml's block_q8_K bit for bit (quantize_row_q8_K_ref). One difference:
 * qdot_q8_0 keeps d in float32 where ggml rounds it to fp16 (more accurate,
 * no overflow for |x| > 65504 * 127, no conversion in the inner loop). A
 * block with a NaN or infinite element gets d = NaN (so its outputs are
 * NaN, as a float matmul's would be), levels 0. Finite levels stay within
 * -127..127, which the AVX2 kernels rely on (no int8 overflow in the sign
 * trick, no saturation of the 16-bit pair sums).
 *
 * F16 and BF16 weights (GGUF tensor types too; llama.cpp and F16 GGUFs
 * keep whole models or some matrices in them) are not quantized against:
 * their "activation rows" are the F32 rows of x themselves, and each weight
 * row is widened 8 elements at a time in registers (F16C / a 16-bit shift)
 * and meets the rows with FMAs. Nothing is lost: every 16-bit value is
 * exactly a float (qdot_widens).
 *
 * Weight blocks are read in place (ggml layouts, quant_blocks.h); the
 * weight bytes may have any alignment. Three tables compute the same
 * functions: portable C (qdot_scalar.c), AVX2/FMA/F16C (qdot_avx2.c) and
 * the same kernels with AVX-512 VNNI's vpdpbusd (qdot_avx512.c). Their
 * quantizers write the same bytes; their dot products agree to float
 * rounding (the vector kernels apply offsets and mins per block through the
 * activation sums and add in another order; the two vector tables give the
 * same results). qdot_best() picks the table for this CPU (cpu_features.h;
 * RLX_NO_AVX512=1 stops at AVX2, RLX_NO_AVX2=1 forces the portable one).
 */
#ifndef RLX_CPU_QDOT_H
#define RLX_CPU_QDOT_H

#include "rlx.h"

#include <stddef.h>
#include <stdint.h>

/* Activation rows one weight-row pass serves: each weight block is decoded
 * once and used for up to this many activation rows (prefill; the legacy
 * AVX2 kernels, whose per-row state lives in registers, take them 4 at a
 * time). */
#define QDOT_MAX_ROWS 8

#define QDOT_QK 32   /* elements of a legacy block and of a qdot_q8_0 */
#define QDOT_QK_K 256 /* elements of a K-quant super-block and of a qdot_q8_k */

/* 32 activations: x ~= d * qs. s = d * (sum of qs): the term the offset or
 * min of Q4_0/Q4_1/Q5_0/Q5_1 weights multiplies. */
typedef struct {
  float d, s;
  int8_t qs[QDOT_QK];
} qdot_q8_0;

/* 256 activations, ggml's block_q8_K: x ~= d * qs; bsums[i] = sum of
 * qs[16 i .. 16 i + 15] (the K-quant mins and offsets multiply these). */
typedef struct {
  float d;
  int8_t qs[QDOT_QK_K];
  int16_t bsums[QDOT_QK_K / 16];
} qdot_q8_k;

/* 1 when weight dtype w pairs with qdot_q8_k activations, 0 for qdot_q8_0
 * or F32 rows. */
int qdot_uses_q8_k(rlx_dtype w);

/* 1 for F16/BF16 weights: activation rows are F32 (k floats), the dot is
 * a float one. */
int qdot_widens(rlx_dtype w);

/* Bytes of one activation row of k elements for weight dtype w (k a
 * multiple of w's block). */
size_t qdot_act_row_bytes(rlx_dtype w, int64_t k);

/* out[r * out_stride] = (weight row w) . (activation row r) for r < nr,
 * 1 <= nr <= QDOT_MAX_ROWS; w is nb blocks of the table entry's dtype
 * (F16/BF16: nb elements, F32 activation rows, accumulated in F32),
 * activation row r starts act_stride bytes after row r - 1 and holds nb
 * blocks of the matching activation type. */
typedef void (*qdot_fn)(int64_t nb, const void *w, const void *act, size_t act_stride, int nr,
                        float *out, int64_t out_stride);

typedef struct {
  const char *name; /* "avx512vnni", "avx2" or "scalar" */
  /* x[32 nb] -> y[nb]; x[256 nb] -> y[nb]. Both tables write the same bytes. */
  void (*quantize_q8_0)(const float *x, qdot_q8_0 *y, int64_t nb);
  void (*quantize_q8_k)(const float *x, qdot_q8_k *y, int64_t nb);
  /* Indexed by weight dtype; NULL for the plain dtypes but F16/BF16. */
  qdot_fn dot[RLX_DTYPE_COUNT];
} qdot_ops;

extern const qdot_ops qdot_scalar;
/* NULL where qdot_avx2.c was built without -mavx2 -mfma -mf16c. */
extern const qdot_ops *const qdot_avx2;
/* NULL where qdot_avx512.c was built without -mavx512vnni -mavx512vl. */
extern const qdot_ops *const qdot_avx512_vnni;

/* The table for this CPU (chosen once; thread-safe). */
const qdot_ops *qdot_best(void);

/* Quantizes an activation row of k elements for weight dtype w into dst
 * (qdot_act_row_bytes(w, k) bytes) with table q; for F16/BF16 weights a
 * copy of the floats. */
void qdot_quantize_row(const qdot_ops *q, rlx_dtype w, const float *x, void *dst, int64_t k);

#endif /* RLX_CPU_QDOT_H */
