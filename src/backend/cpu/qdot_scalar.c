/* qdot_scalar.c — the portable table of qdot.h, and the table choice.
 *
 * Each weight block is decoded to integer levels with integer sub-block
 * scales and mins ("levels" below); the dot with an activation block is
 * then an exact integer sum per sub-block, scaled in float once per block:
 *   legacy:  w = d * q + m            ->  d * dx * sum(q qx) + m * s
 *   K-quant: w = d * sc * q - dmin * mn ->
 *            dx * (d * sum_sub(sc * sum(q qx)) - dmin * sum_sub(mn * bsum))
 * The integer sums cannot overflow int32 (the largest, Q6_K, stays below
 * 2^28). Bytes are read one at a time (little-endian, any alignment).
 */
#include "qdot.h"

#include "cpu_features.h"
#include "quant_blocks.h"
#include "../../ir/ir.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---------------------------------------------------------------- shared definitions */

int qdot_uses_q8_k(rlx_dtype w) { return ir_dtypes[w].block == QDOT_QK_K; }

int qdot_widens(rlx_dtype w) { return w == RLX_F16 || w == RLX_BF16; }

size_t qdot_act_row_bytes(rlx_dtype w, int64_t k) {
  if (qdot_widens(w)) return (size_t)k * sizeof(float);
  return qdot_uses_q8_k(w) ? (size_t)(k / QDOT_QK_K) * sizeof(qdot_q8_k)
                           : (size_t)(k / QDOT_QK) * sizeof(qdot_q8_0);
}

void qdot_quantize_row(const qdot_ops *q, rlx_dtype w, const float *x, void *dst, int64_t k) {
  if (qdot_widens(w)) memcpy(dst, x, (size_t)k * sizeof *x);
  else if (qdot_uses_q8_k(w)) q->quantize_q8_k(x, dst, k / QDOT_QK_K);
  else q->quantize_q8_0(x, dst, k / QDOT_QK);
}

static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;
static const qdot_ops *chosen;

static void choose(void) {
  const cpu_features *f = cpu_get_features();
  if (f->avx512_vnni && qdot_avx512_vnni) chosen = qdot_avx512_vnni;
  else if (f->avx2_fma && f->f16c && qdot_avx2) chosen = qdot_avx2;
  else chosen = &qdot_scalar;
}

const qdot_ops *qdot_best(void) {
  pthread_once(&chosen_once, choose);
  return chosen;
}

/* ---------------------------------------------------------------- activations */

/* An activation level: v rounded (roundf: half away from zero, or ggml's
 * nearest_int: half to even), clamped to -127..127; NaN -> 0. v is NaN or
 * huge only when 1/d overflowed for a block of tiny values. */
static int8_t level_round(float v, int half_even) {
  if (v != v) return 0;
  if (v > 127.0f) v = 127.0f;
  if (v < -127.0f) v = -127.0f;
  return (int8_t)(half_even ? nearbyintf(v) : roundf(v));
}

/* ggml's quantize_row_q8_0_ref levels, d kept in float32. */
static void quantize_q8_0(const float *x, qdot_q8_0 *y, int64_t nb) {
  for (int64_t b = 0; b < nb; b++, x += QDOT_QK, y++) {
    float amax = 0.0f;
    int finite = 1;
    for (int j = 0; j < QDOT_QK; j++) {
      const float a = fabsf(x[j]);
      if (!(a <= FLT_MAX)) finite = 0;
      else if (a > amax) amax = a;
    }
    if (!finite) {
      y->d = y->s = NAN;
      memset(y->qs, 0, sizeof y->qs);
      continue;
    }
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < QDOT_QK; j++) {
      y->qs[j] = level_round(x[j] * id, 0);
      sum += y->qs[j];
    }
    y->d = d;
    y->s = d * (float)sum;
  }
}

/* ggml's quantize_row_q8_K_ref: the scale from the first element of largest
 * magnitude, levels by nearest_int (half to even: nearbyintf in the default
 * rounding mode). */
static void quantize_q8_k(const float *x, qdot_q8_k *y, int64_t nb) {
  for (int64_t b = 0; b < nb; b++, x += QDOT_QK_K, y++) {
    float amax = 0.0f, max = 0.0f;
    int finite = 1;
    for (int j = 0; j < QDOT_QK_K; j++) {
      const float a = fabsf(x[j]);
      if (!(a <= FLT_MAX)) {
        finite = 0;
      } else if (a > amax) {
        amax = a;
        max = x[j];
      }
    }
    memset(y, 0, sizeof *y);
    if (!finite) y->d = NAN;
    if (!finite || amax == 0.0f) continue;
    const float iscale = -127.0f / max;
    for (int j = 0; j < QDOT_QK_K; j++) y->qs[j] = level_round(iscale * x[j], 1);
    for (int j = 0; j < QDOT_QK_K / 16; j++) {
      int sum = 0;
      for (int i = 0; i < 16; i++) sum += y->qs[16 * j + i];
      y->bsums[j] = (int16_t)sum;
    }
    y->d = 1 / iscale;
  }
}

/* ---------------------------------------------------------------- byte access */

static float f32_at(const uint8_t *p) {
  const uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static int s8(uint8_t v) { return v < 128 ? v : v - 256; }

/* ---------------------------------------------------------------- legacy levels */

/* w[j] = d * q[j] + m for the 32 elements of a legacy block. */
typedef struct {
  int8_t q[QDOT_QK];
  float d, m;
} legacy_levels;

/* 4-bit level j of qs[16]: low nibbles are elements 0..15, high 16..31. */
static int nibble(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

static uint32_t u32_at(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void levels_q4_0(const uint8_t *b, legacy_levels *L) {
  L->d = quant_get_f16(b);
  L->m = 0.0f;
  for (int j = 0; j < QDOT_QK; j++) L->q[j] = (int8_t)(nibble(b + 2, j) - 8);
}

static void levels_q4_1(const uint8_t *b, legacy_levels *L) {
  L->d = quant_get_f16(b);
  L->m = quant_get_f16(b + 2);
  for (int j = 0; j < QDOT_QK; j++) L->q[j] = (int8_t)nibble(b + 4, j);
}

static void levels_q5_0(const uint8_t *b, legacy_levels *L) {
  const uint32_t qh = u32_at(b + 2);
  L->d = quant_get_f16(b);
  L->m = 0.0f;
  for (int j = 0; j < QDOT_QK; j++)
    L->q[j] = (int8_t)((nibble(b + 6, j) | (int)((qh >> j) & 1) << 4) - 16);
}

static void levels_q5_1(const uint8_t *b, legacy_levels *L) {
  const uint32_t qh = u32_at(b + 4);
  L->d = quant_get_f16(b);
  L->m = quant_get_f16(b + 2);
  for (int j = 0; j < QDOT_QK; j++) L->q[j] = (int8_t)(nibble(b + 8, j) | (int)((qh >> j) & 1) << 4);
}

static void levels_q8_0(const uint8_t *b, legacy_levels *L) {
  L->d = quant_get_f16(b);
  L->m = 0.0f;
  for (int j = 0; j < QDOT_QK; j++) L->q[j] = (int8_t)s8(b[2 + j]);
}

/* One pass over a legacy weight row: each block decoded once, used for nr
 * activation rows. */
static inline void legacy_rows(void (*levels)(const uint8_t *, legacy_levels *), int bytes,
                               int64_t nb, const void *w, const void *act, size_t act_stride,
                               int nr, float *out, int64_t out_stride) {
  float acc[QDOT_MAX_ROWS] = {0};
  legacy_levels L;
  for (int64_t b = 0; b < nb; b++) {
    levels((const uint8_t *)w + b * bytes, &L);
    for (int r = 0; r < nr; r++) {
      const qdot_q8_0 *y = (const qdot_q8_0 *)((const uint8_t *)act + r * act_stride) + b;
      int sum = 0;
      for (int j = 0; j < QDOT_QK; j++) sum += L.q[j] * y->qs[j];
      acc[r] += L.d * y->d * (float)sum + L.m * y->s;
    }
  }
  for (int r = 0; r < nr; r++) out[r * out_stride] = acc[r];
}

#define LEGACY_DOT(name, bytes)                                                                  \
  static void dot_##name(int64_t nb, const void *w, const void *act, size_t act_stride, int nr, \
                         float *out, int64_t out_stride) {                                      \
    legacy_rows(levels_##name, bytes, nb, w, act, act_stride, nr, out, out_stride);              \
  }
LEGACY_DOT(q4_0, 18)
LEGACY_DOT(q4_1, 20)
LEGACY_DOT(q5_0, 22)
LEGACY_DOT(q5_1, 24)
LEGACY_DOT(q8_0, 34)

/* ---------------------------------------------------------------- K-quant levels */

/* w[i] = d * sc[s] * q[i] - dmin * mn[s] for i in sub-block s (of
 * 256 / nsub elements). */
typedef struct {
  int8_t q[QDOT_QK_K];
  int32_t sc[16], mn[16];
  int nsub;
  float d, dmin;
} k_levels;

static void levels_q2_k(const uint8_t *b, k_levels *L) {
  L->nsub = 16;
  L->d = quant_get_f16(b + 80);
  L->dmin = quant_get_f16(b + 82);
  for (int s = 0; s < 16; s++) {
    L->sc[s] = b[s] & 0xF;
    L->mn[s] = b[s] >> 4;
  }
  /* element 128 c + 32 k + l: bits 2k.. of qs[32 c + l] (dec_q2_k) */
  for (int i = 0; i < QDOT_QK_K; i++) {
    const int c = i / 128, k = (i / 32) % 4, l = i % 32;
    L->q[i] = (int8_t)((b[16 + 32 * c + l] >> (2 * k)) & 3);
  }
}

static void levels_q3_k(const uint8_t *b, k_levels *L) {
  const uint8_t *hm = b, *qs = b + 32, *s = b + 96;
  L->nsub = 16;
  L->d = quant_get_f16(b + 108);
  L->dmin = 0.0f;
  for (int j = 0; j < 16; j++) {
    L->sc[j] = quant_q3_k_scale(s, j);
    L->mn[j] = 0;
  }
  /* element 128 c + 32 k + l: low bits as Q2_K, high bit k + 4 c of
   * hmask[l]; a clear high bit means level - 4 */
  for (int i = 0; i < QDOT_QK_K; i++) {
    const int c = i / 128, k = (i / 32) % 4, l = i % 32;
    const int low = (qs[32 * c + l] >> (2 * k)) & 3;
    L->q[i] = (int8_t)(low - ((hm[l] >> (k + 4 * c)) & 1 ? 0 : 4));
  }
}

/* Q4_K / Q5_K: the 8 6-bit scales and mins. */
static void k4_scales(const uint8_t *b, k_levels *L) {
  for (int s = 0; s < 8; s++) {
    uint8_t d, m;
    quant_k4_scale_min(b + 4, s, &d, &m);
    L->sc[s] = d;
    L->mn[s] = m;
  }
}

static void levels_q4_k(const uint8_t *b, k_levels *L) {
  L->nsub = 8;
  L->d = quant_get_f16(b);
  L->dmin = quant_get_f16(b + 2);
  k4_scales(b, L);
  /* element 64 c + l: low nibble of qs[32 c + l]; 64 c + 32 + l: high */
  for (int i = 0; i < QDOT_QK_K; i++) {
    const uint8_t v = b[16 + 32 * (i / 64) + i % 32];
    L->q[i] = (int8_t)((i % 64) < 32 ? v & 0xF : v >> 4);
  }
}

static void levels_q5_k(const uint8_t *b, k_levels *L) {
  L->nsub = 8;
  L->d = quant_get_f16(b);
  L->dmin = quant_get_f16(b + 2);
  k4_scales(b, L);
  /* as Q4_K, plus bit i / 32 of qh[i % 32] as bit 4 */
  for (int i = 0; i < QDOT_QK_K; i++) {
    const uint8_t v = b[48 + 32 * (i / 64) + i % 32];
    const int lo = (i % 64) < 32 ? v & 0xF : v >> 4;
    L->q[i] = (int8_t)(lo | ((b[16 + i % 32] >> (i / 32)) & 1) << 4);
  }
}

static void levels_q6_k(const uint8_t *b, k_levels *L) {
  L->nsub = 16;
  L->d = quant_get_f16(b + 208);
  L->dmin = 0.0f;
  for (int s = 0; s < 16; s++) {
    L->sc[s] = s8(b[192 + s]);
    L->mn[s] = 0;
  }
  /* element 128 c + 32 k + l: a nibble of ql[64 c + 32 (k & 1) + l] (low
   * for k < 2) and bits 2k.. of qh[32 c + l] as bits 4..5, minus 32 */
  for (int i = 0; i < QDOT_QK_K; i++) {
    const int c = i / 128, k = (i / 32) % 4, l = i % 32;
    const uint8_t v = b[64 * c + 32 * (k & 1) + l];
    const int lo = k < 2 ? v & 0xF : v >> 4;
    L->q[i] = (int8_t)((lo | ((b[128 + 32 * c + l] >> (2 * k)) & 3) << 4) - 32);
  }
}

static void levels_q8_k(const uint8_t *b, k_levels *L) {
  L->nsub = 1;
  L->d = f32_at(b);
  L->dmin = 0.0f;
  L->sc[0] = 1;
  L->mn[0] = 0;
  for (int i = 0; i < QDOT_QK_K; i++) L->q[i] = (int8_t)s8(b[4 + i]);
}

/* Sum of the activation levels of sub-block s of nsub. */
static int act_sub_sum(const qdot_q8_k *y, int nsub, int s) {
  const int per = 16 / nsub; /* bsums per sub-block */
  int sum = 0;
  for (int i = 0; i < per; i++) sum += y->bsums[per * s + i];
  return sum;
}

static inline void k_rows(void (*levels)(const uint8_t *, k_levels *), int bytes, int64_t nb,
                          const void *w, const void *act, size_t act_stride, int nr, float *out,
                          int64_t out_stride) {
  float acc[QDOT_MAX_ROWS] = {0};
  k_levels L;
  for (int64_t b = 0; b < nb; b++) {
    levels((const uint8_t *)w + b * bytes, &L);
    const int len = QDOT_QK_K / L.nsub;
    for (int r = 0; r < nr; r++) {
      const qdot_q8_k *y = (const qdot_q8_k *)((const uint8_t *)act + r * act_stride) + b;
      int32_t isum = 0, msum = 0;
      for (int s = 0; s < L.nsub; s++) {
        int32_t t = 0;
        for (int i = s * len; i < (s + 1) * len; i++) t += L.q[i] * y->qs[i];
        isum += L.sc[s] * t;
        msum += L.mn[s] * act_sub_sum(y, L.nsub, s);
      }
      acc[r] += y->d * (L.d * (float)isum - L.dmin * (float)msum);
    }
  }
  for (int r = 0; r < nr; r++) out[r * out_stride] = acc[r];
}

#define K_DOT(name, bytes)                                                                       \
  static void dot_##name(int64_t nb, const void *w, const void *act, size_t act_stride, int nr, \
                         float *out, int64_t out_stride) {                                      \
    k_rows(levels_##name, bytes, nb, w, act, act_stride, nr, out, out_stride);                   \
  }
K_DOT(q2_k, 84)
K_DOT(q3_k, 110)
K_DOT(q4_k, 144)
K_DOT(q5_k, 176)
K_DOT(q6_k, 210)
K_DOT(q8_k, 292)

/* ---------------------------------------------------------------- F16 / BF16 */

/* A 16-bit weight row (nb elements, little-endian, any alignment) against
 * F32 rows, in F32 in element order. */
static void wide_rows(float (*widen)(uint16_t), int64_t nb, const void *w, const void *act,
                      size_t act_stride, int nr, float *out, int64_t out_stride) {
  float acc[QDOT_MAX_ROWS] = {0};
  const uint8_t *wb = w;
  for (int64_t k = 0; k < nb; k++) {
    const float v = widen((uint16_t)(wb[2 * k] | wb[2 * k + 1] << 8));
    for (int r = 0; r < nr; r++)
      acc[r] += v * ((const float *)(const void *)((const uint8_t *)act + r * act_stride))[k];
  }
  for (int r = 0; r < nr; r++) out[r * out_stride] = acc[r];
}

static void dot_f16(int64_t nb, const void *w, const void *act, size_t act_stride, int nr,
                    float *out, int64_t out_stride) {
  wide_rows(rlx_f16_to_f32, nb, w, act, act_stride, nr, out, out_stride);
}

static void dot_bf16(int64_t nb, const void *w, const void *act, size_t act_stride, int nr,
                     float *out, int64_t out_stride) {
  wide_rows(rlx_bf16_to_f32, nb, w, act, act_stride, nr, out, out_stride);
}

const qdot_ops qdot_scalar = {
  .name = "scalar",
  .quantize_q8_0 = quantize_q8_0,
  .quantize_q8_k = quantize_q8_k,
  .dot = {[RLX_Q4_0] = dot_q4_0, [RLX_Q4_1] = dot_q4_1, [RLX_Q5_0] = dot_q5_0,
          [RLX_Q5_1] = dot_q5_1, [RLX_Q8_0] = dot_q8_0, [RLX_Q2_K] = dot_q2_k,
          [RLX_Q3_K] = dot_q3_k, [RLX_Q4_K] = dot_q4_k, [RLX_Q5_K] = dot_q5_k,
          [RLX_Q6_K] = dot_q6_k, [RLX_Q8_K] = dot_q8_k, [RLX_F16] = dot_f16,
          [RLX_BF16] = dot_bf16},
};
