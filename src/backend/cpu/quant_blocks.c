/* quant_blocks.c — the GGUF block dtypes, one encoder and one decoder per
 * dtype, bit-exact with ggml (ggml-quants.c: quantize_row_*_ref and
 * dequantize_row_*).
 *
 * Bit-exactness rests on doing the same float operations in the same order
 * as ggml: every expression below mirrors its ggml counterpart, and float
 * contraction (FMA) is off so a compiler cannot fuse a*b+c differently. */
#include "quant_blocks.h"

#include "../../ir/ir.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK 32          /* elements of a legacy block (Q4_0 .. Q8_0) */
#define QK_K 256       /* elements of a K-quant super-block */
#define GROUP_MAX_EPS 1e-15f

/* ---------------------------------------------------------------- byte access */

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}

static float get_f32(const uint8_t *p) {
  uint32_t u = get_u32(p);
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void put_f32(uint8_t *p, float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  put_u32(p, u);
}

/* A stored byte read as int8 (two's complement) without an implementation-
 * defined conversion. */
static int s8(uint8_t v) { return v < 128 ? v : v - 256; }

/* ---------------------------------------------------------------- rounding helpers */

/* ggml's nearest_int: round to nearest even through the float adder (exact
 * for |v| < 2^22, the range ggml asserts; defined bit twiddling elsewhere). */
static int nearest_int(float v) {
  float val = v + 12582912.f;
  int32_t i;
  memcpy(&i, &val, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

/* ggml's MIN(hi, (int8_t)v) for the v >= 0 its legacy quantizers produce,
 * without the undefined float->int conversion on NaN or out-of-range v. */
static int trunc_level(float v, int hi) {
  if (!(v >= 1.0f)) return 0;
  return v < (float)hi ? (int)v : hi;
}

/* roundf(v) as int8 (Q8_0), saturated; NaN -> 0. */
static int round_int8(float v) {
  if (isnan(v)) return 0;
  float r = roundf(v);
  return r < -128.0f ? -128 : r > 127.0f ? 127 : (int)r;
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* ---------------------------------------------------------------- Q4_0 {d, qs[16]} */

static void dec_q4_0(const uint8_t *b, float *y) {
  const float d = quant_get_f16(b);
  for (int j = 0; j < QK / 2; j++) {
    y[j] = ((b[2 + j] & 0x0F) - 8) * d;
    y[j + QK / 2] = ((b[2 + j] >> 4) - 8) * d;
  }
}

/* The element of largest magnitude, the first of equals (0 for a block of
 * zeros): the signed value ggml's symmetric formats scale by. */
static float largest_magnitude(const float *x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; j++)
    if (fabsf(x[j]) > amax) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  return max;
}

static void enc_q4_0(const float *x, uint8_t *b) {
  const float d = largest_magnitude(x, QK) / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  quant_put_f16(b, d);
  for (int j = 0; j < QK / 2; j++) {
    const int lo = trunc_level(x[j] * id + 8.5f, 15);
    const int hi = trunc_level(x[j + QK / 2] * id + 8.5f, 15);
    b[2 + j] = (uint8_t)(lo | hi << 4);
  }
}

/* ---------------------------------------------------------------- Q4_1 {d, m, qs[16]} */

static void dec_q4_1(const uint8_t *b, float *y) {
  const float d = quant_get_f16(b), m = quant_get_f16(b + 2);
  for (int j = 0; j < QK / 2; j++) {
    y[j] = (b[4 + j] & 0x0F) * d + m;
    y[j + QK / 2] = (b[4 + j] >> 4) * d + m;
  }
}

/* Q4_1 / Q5_1: min/max affine levels 0..nmax. */
static void minmax(const float *x, float *min, float *max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < QK; j++) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

static void enc_q4_1(const float *x, uint8_t *b) {
  float min, max;
  minmax(x, &min, &max);
  const float d = (max - min) / 15;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  quant_put_f16(b, d);
  quant_put_f16(b + 2, min);
  for (int j = 0; j < QK / 2; j++) {
    const int lo = trunc_level((x[j] - min) * id + 0.5f, 15);
    const int hi = trunc_level((x[j + QK / 2] - min) * id + 0.5f, 15);
    b[4 + j] = (uint8_t)(lo | hi << 4);
  }
}

/* ---------------------------------------------------------------- Q5_0 {d, qh[4], qs[16]} */

/* 5-bit level j of a Q5 block: low nibble from qs, bit 4 from qh. */
static int q5_level(const uint8_t *qs, uint32_t qh, int j) {
  const int lo = j < QK / 2 ? qs[j] & 0x0F : qs[j - QK / 2] >> 4;
  return lo | (int)((qh >> j) & 1) << 4;
}

static void dec_q5_0(const uint8_t *b, float *y) {
  const float d = quant_get_f16(b);
  const uint32_t qh = get_u32(b + 2);
  for (int j = 0; j < QK; j++) y[j] = (q5_level(b + 6, qh, j) - 16) * d;
}

/* Packs 32 levels 0..31 into qs[16] and the returned qh. */
static uint32_t q5_pack(const int *l, uint8_t *qs) {
  uint32_t qh = 0;
  for (int j = 0; j < QK / 2; j++) {
    qs[j] = (uint8_t)((l[j] & 0x0F) | (l[j + QK / 2] & 0x0F) << 4);
    qh |= (uint32_t)(l[j] >> 4 & 1) << j | (uint32_t)(l[j + QK / 2] >> 4 & 1) << (j + QK / 2);
  }
  return qh;
}

static void enc_q5_0(const float *x, uint8_t *b) {
  const float d = largest_magnitude(x, QK) / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int l[QK];
  for (int j = 0; j < QK; j++) l[j] = trunc_level(x[j] * id + 16.5f, 31);
  quant_put_f16(b, d);
  put_u32(b + 2, q5_pack(l, b + 6));
}

/* ---------------------------------------------------------------- Q5_1 {d, m, qh[4], qs[16]} */

static void dec_q5_1(const uint8_t *b, float *y) {
  const float d = quant_get_f16(b), m = quant_get_f16(b + 2);
  const uint32_t qh = get_u32(b + 4);
  for (int j = 0; j < QK; j++) y[j] = q5_level(b + 8, qh, j) * d + m;
}

static void enc_q5_1(const float *x, uint8_t *b) {
  float min, max;
  minmax(x, &min, &max);
  const float d = (max - min) / 31;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int l[QK];
  for (int j = 0; j < QK; j++) l[j] = trunc_level((x[j] - min) * id + 0.5f, 31);
  quant_put_f16(b, d);
  quant_put_f16(b + 2, min);
  put_u32(b + 4, q5_pack(l, b + 8));
}

/* ---------------------------------------------------------------- Q8_0 {d, qs[32]} */

static void dec_q8_0(const uint8_t *b, float *y) {
  const float d = quant_get_f16(b);
  for (int j = 0; j < QK; j++) y[j] = s8(b[2 + j]) * d;
}

static void enc_q8_0(const float *x, uint8_t *b) {
  float amax = 0.0f;
  for (int j = 0; j < QK; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  quant_put_f16(b, d);
  for (int j = 0; j < QK; j++) b[2 + j] = (uint8_t)round_int8(x[j] * id);
}

/* ---------------------------------------------------------------- K-quant scale search (ggml) */

/* make_qkx2_quants: levels 0..nmax with a scale and a min (returned as
 * -min in *the_min), chosen by a grid search over nstep+1 scales. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              int use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    memset(L, 0, (size_t)n);
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * (x[i] - min));
    L[i] = (uint8_t)imax(0, imin(nmax, l));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? fabsf(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = (uint8_t)l;
      float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        memcpy(L, Laux, (size_t)n);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

/* The first guess of make_q3_quants and make_qx_quants: levels
 * round(-nmax / max * x) clamped to -nmax..nmax-1 (max: the element of
 * largest magnitude), stored + shift in L, and their x^2-weighted sums
 * sum(w x l) and sum(w l^2). Returns max, or 0 (L zeroed) for a group of
 * zeros. */
static float first_levels(int n, int nmax, const float *x, int8_t *L, int shift, float *sumlx, float *suml2) {
  const float max = largest_magnitude(x, n);
  if (fabsf(max) < GROUP_MAX_EPS) {
    memset(L, 0, (size_t)n);
    return 0.f;
  }
  const float iscale = -nmax / max;
  float slx = 0, sl2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = (int8_t)(l + shift);
    float w = x[i] * x[i];
    slx += w * x[i] * l;
    sl2 += w * l * l;
  }
  *sumlx = slx, *suml2 = sl2;
  return max;
}

/* make_q3_quants with do_rmse: symmetric levels -nmax..nmax-1 (stored
 * +nmax), refined by coordinate descent on the x^2-weighted error. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
  float sumlx, suml2;
  if (first_levels(n, nmax, x, L, 0, &sumlx, &suml2) == 0) return 0.f;
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        int new_l = imax(-nmax, imin(nmax - 1, nearest_int(x[i] * sl2 / slx)));
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = (int8_t)new_l;
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* make_qx_quants with rmse_type 1 and no importance weights (weights x^2):
 * symmetric levels -nmax..nmax-1 (stored +nmax), best of 19 scales. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
  float sumlx, suml2;
  const float max = first_levels(n, nmax, x, L, nmax, &sumlx, &suml2);
  if (max == 0) return 0.f;
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
      float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i]))));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

/* Packs 256 2-bit levels as ggml's Q2_K/Q3_K qs[64]: byte j/4+l of each
 * 128-element half holds elements l, l+32, l+64, l+96 from the low bits. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
  for (int j = 0; j < QK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 |
                                L[j + l + 96] << 6);
}

/* -------------------------------------------------------- Q2_K {scales[16], qs[64], d, dmin} */

static void dec_q2_k(const uint8_t *b, float *y) {
  const float d = quant_get_f16(b + 80), min = quant_get_f16(b + 82);
  const uint8_t *q = b + 16;
  int is = 0;
  for (int n = 0; n < QK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; half++) {
        const uint8_t sc = b[is++];
        const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

static void enc_q2_k(const float *x, uint8_t *b) {
  uint8_t L[QK_K], Laux[16], *scales = b, *qs = b + 16;
  float weights[16], mins[QK_K / 16], sc[QK_K / 16];
  const float q4scale = 15.f;
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < QK_K / 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
    sc[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f,
                             15, 1);
    if (sc[j] > max_scale) max_scale = sc[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  if (max_scale > 0) {
    float iscale = q4scale / max_scale;
    for (int j = 0; j < QK_K / 16; ++j) scales[j] = (uint8_t)nearest_int(iscale * sc[j]);
    quant_put_f16(b + 80, max_scale / q4scale);
  } else {
    memset(scales, 0, QK_K / 16);
    quant_put_f16(b + 80, 0.f);
  }
  if (max_min > 0) {
    float iscale = q4scale / max_min;
    for (int j = 0; j < QK_K / 16; ++j)
      scales[j] = (uint8_t)(scales[j] | nearest_int(iscale * mins[j]) << 4);
    quant_put_f16(b + 82, max_min / q4scale);
  } else {
    quant_put_f16(b + 82, 0.f);
  }
  for (int j = 0; j < QK_K / 16; ++j) {
    const float d = quant_get_f16(b + 80) * (scales[j] & 0xF);
    if (!d) continue;
    const float dm = quant_get_f16(b + 82) * (scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = (uint8_t)imax(0, imin(3, nearest_int((x[16 * j + ii] + dm) / d)));
  }
  pack_2bit(L, qs);
}

/* --------------------------------------------------- Q3_K {hmask[32], qs[64], scales[12], d} */

static void dec_q3_k(const uint8_t *b, float *y) {
  const float d_all = quant_get_f16(b + 108);
  const uint8_t *hm = b, *q = b + 32, *scales = b + 96;
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < QK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; half++) {
        const float dl = d_all * quant_q3_k_scale(scales, is++);
        for (int l = 16 * half; l < 16 * half + 16; ++l)
          *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
      }
      m = (uint8_t)(m << 1);
    }
    q += 32;
  }
}

static void enc_q3_k(const float *x, uint8_t *b) {
  int8_t L[QK_K];
  float scales[QK_K / 16];
  uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;
  for (int j = 0; j < QK_K / 16; ++j) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
  const float max_scale = largest_magnitude(scales, QK_K / 16);
  memset(sc, 0, 12);
  if (max_scale) {
    float iscale = -32.f / max_scale;
    for (int j = 0; j < QK_K / 16; ++j) {
      /* ggml stores nearest_int into an int8_t: |iscale*scales[j]| <= 32 */
      int l = imax(-32, imin(31, nearest_int(iscale * scales[j]))) + 32;
      if (j < 8) sc[j] = (uint8_t)(l & 0xF);
      else sc[j - 8] = (uint8_t)(sc[j - 8] | (l & 0xF) << 4);
      sc[j % 4 + 8] = (uint8_t)(sc[j % 4 + 8] | (l >> 4) << (2 * (j / 4)));
    }
    quant_put_f16(b + 108, 1 / iscale);
  } else {
    quant_put_f16(b + 108, 0.f);
  }
  for (int j = 0; j < QK_K / 16; ++j) {
    float d = quant_get_f16(b + 108) * quant_q3_k_scale(sc, j);
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = (int8_t)(imax(-4, imin(3, nearest_int(x[16 * j + ii] / d))) + 4);
  }
  /* bit k of hmask[m] is the high bit of element 32*k + m */
  uint8_t low[QK_K];
  memset(hmask, 0, QK_K / 8);
  for (int j = 0; j < QK_K; ++j) {
    low[j] = (uint8_t)(L[j] & 3);
    if (L[j] > 3) hmask[j % (QK_K / 8)] = (uint8_t)(hmask[j % (QK_K / 8)] | 1 << (j / (QK_K / 8)));
  }
  pack_2bit(low, qs);
}

/* ---------------------------------------------------------------- Q4_K / Q5_K scales */

/* The common part of quantize_row_q4_K_ref / q5_K_ref: 8 sub-blocks of 32
 * with levels 0..nmax; writes d, dmin, scales[12] at b and the levels to L. */
static void enc_k_scale_min(const float *x, uint8_t *b, int nmax, float rmin, int nstep,
                            uint8_t *L) {
  uint8_t Laux[32], *scales = b + 4;
  float weights[32], mins[QK_K / 32], sc[QK_K / 32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < QK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    float av_x = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
    sc[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                             0.1f, nstep, 0);
    if (sc[j] > max_scale) max_scale = sc[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < QK_K / 32; ++j) {
    /* ggml: uint8_t ls = nearest_int(...), then MIN(63, ls) */
    int ls = imin(63, (uint8_t)nearest_int(inv_scale * sc[j]));
    int lm = imin(63, (uint8_t)nearest_int(inv_min * mins[j]));
    if (j < 4) {
      scales[j] = (uint8_t)ls;
      scales[j + 4] = (uint8_t)lm;
    } else {
      scales[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
      scales[j - 4] = (uint8_t)(scales[j - 4] | (ls >> 4) << 6);
      scales[j - 0] = (uint8_t)(scales[j - 0] | (lm >> 4) << 6);
    }
  }
  quant_put_f16(b, max_scale / 63.f);
  quant_put_f16(b + 2, max_min / 63.f);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t s, m;
    quant_k4_scale_min(scales, j, &s, &m);
    const float d = quant_get_f16(b) * s;
    if (!d) continue;
    const float dm = quant_get_f16(b + 2) * m;
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, nearest_int((x[32 * j + ii] + dm) / d)));
  }
}

/* ------------------------------------------------------- Q4_K {d, dmin, scales[12], qs[128]} */

static void dec_q4_k(const uint8_t *b, float *y) {
  const float d = quant_get_f16(b), min = quant_get_f16(b + 2);
  const uint8_t *q = b + 16;
  for (int is = 0; is < QK_K / 32; is += 2) {
    uint8_t sc, m;
    quant_k4_scale_min(b + 4, is, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    quant_k4_scale_min(b + 4, is + 1, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    q += 32;
  }
}

static void enc_q4_k(const float *x, uint8_t *b) {
  uint8_t L[QK_K], *q = b + 16;
  enc_k_scale_min(x, b, 15, -1.f, 20, L);
  for (int j = 0; j < QK_K; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    q += 32;
  }
}

/* ----------------------------------------------- Q5_K {d, dmin, scales[12], qh[32], qs[128]} */

static void dec_q5_k(const uint8_t *b, float *y) {
  const float d = quant_get_f16(b), min = quant_get_f16(b + 2);
  const uint8_t *qh = b + 16, *ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int is = 0; is < QK_K / 32; is += 2) {
    uint8_t sc, m;
    quant_k4_scale_min(b + 4, is, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    quant_k4_scale_min(b + 4, is + 1, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    u1 = (uint8_t)(u1 << 2);
    u2 = (uint8_t)(u2 << 2);
  }
}

static void enc_q5_k(const float *x, uint8_t *b) {
  uint8_t L[QK_K], *qh = b + 16, *ql = b + 48;
  enc_k_scale_min(x, b, 31, -0.5f, 15, L);
  memset(qh, 0, QK_K / 8);
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < QK_K; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j], l2 = L[n + j + 32];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] |= m1;
      }
      if (l2 > 15) {
        l2 -= 16;
        qh[j] |= m2;
      }
      ql[j] = (uint8_t)(l1 | l2 << 4);
    }
    m1 = (uint8_t)(m1 << 2);
    m2 = (uint8_t)(m2 << 2);
    ql += 32;
  }
}

/* ----------------------------------------------------- Q6_K {ql[128], qh[64], scales[16], d} */

static void dec_q6_k(const uint8_t *b, float *y) {
  const float d = quant_get_f16(b + 208);
  const uint8_t *ql = b, *qh = b + 128, *sc = b + 192;
  for (int n = 0; n < QK_K; n += 128) {
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      const int q1 = ((ql[l + 0] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
      const int q3 = ((ql[l + 0] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      y[l + 0] = d * s8(sc[is + 0]) * q1;
      y[l + 32] = d * s8(sc[is + 2]) * q2;
      y[l + 64] = d * s8(sc[is + 4]) * q3;
      y[l + 96] = d * s8(sc[is + 6]) * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

static void enc_q6_k(const float *x, uint8_t *b) {
  int8_t L[QK_K];
  float scales[QK_K / 16];
  uint8_t *ql = b, *qh = b + 128, *sc = b + 192;
  for (int ib = 0; ib < QK_K / 16; ++ib) scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
  const float max_scale = largest_magnitude(scales, QK_K / 16);
  if (fabsf(max_scale) < GROUP_MAX_EPS) {
    memset(b, 0, 210);
    return;
  }
  float iscale = -128.f / max_scale;
  quant_put_f16(b + 208, 1 / iscale);
  /* ggml: int8_t scales[ib] = MIN(127, nearest_int(...)), >= -128 here */
  for (int ib = 0; ib < QK_K / 16; ++ib)
    sc[ib] = (uint8_t)imin(127, nearest_int(iscale * scales[ib]));
  for (int j = 0; j < QK_K / 16; ++j) {
    float d = quant_get_f16(b + 208) * s8(sc[j]);
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = (int8_t)(imax(-32, imin(31, nearest_int(x[16 * j + ii] / d))) + 32);
  }
  for (int j = 0; j < QK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
      const int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[l + 0] = (uint8_t)(q1 | q3 << 4);
      ql[l + 32] = (uint8_t)(q2 | q4 << 4);
      qh[l] = (uint8_t)(L[j + l] >> 4 | (L[j + l + 32] >> 4) << 2 | (L[j + l + 64] >> 4) << 4 |
                        (L[j + l + 96] >> 4) << 6);
    }
    ql += 64;
    qh += 32;
  }
}

/* -------------------------------------------------- Q8_K {float d, qs[256], bsums[16] (i16)} */

static void dec_q8_k(const uint8_t *b, float *y) {
  const float d = get_f32(b);
  for (int j = 0; j < QK_K; j++) y[j] = d * s8(b[4 + j]);
}

static void enc_q8_k(const float *x, uint8_t *b) {
  const float max = largest_magnitude(x, QK_K);
  /* ggml leaves bsums unset for an all-zero block; they are zero here */
  memset(b, 0, 292);
  if (!max) return;
  const float iscale = -127.f / max;
  for (int j = 0; j < QK_K; ++j) b[4 + j] = (uint8_t)imin(127, nearest_int(iscale * x[j]));
  for (int j = 0; j < QK_K / 16; ++j) {
    int sum = 0;
    for (int ii = 0; ii < 16; ++ii) sum += s8(b[4 + j * 16 + ii]);
    b[260 + 2 * j] = (uint8_t)sum;
    b[261 + 2 * j] = (uint8_t)((unsigned)sum >> 8);
  }
  put_f32(b, 1 / iscale);
}

/* ---------------------------------------------------------------- rows */

typedef struct {
  void (*decode)(const uint8_t *block, float *y);
  void (*encode)(const float *x, uint8_t *block);
} block_codec;

static const block_codec codecs[RLX_DTYPE_COUNT] = {
  [RLX_Q4_0] = {dec_q4_0, enc_q4_0}, [RLX_Q4_1] = {dec_q4_1, enc_q4_1},
  [RLX_Q5_0] = {dec_q5_0, enc_q5_0}, [RLX_Q5_1] = {dec_q5_1, enc_q5_1},
  [RLX_Q8_0] = {dec_q8_0, enc_q8_0}, [RLX_Q2_K] = {dec_q2_k, enc_q2_k},
  [RLX_Q3_K] = {dec_q3_k, enc_q3_k}, [RLX_Q4_K] = {dec_q4_k, enc_q4_k},
  [RLX_Q5_K] = {dec_q5_k, enc_q5_k}, [RLX_Q6_K] = {dec_q6_k, enc_q6_k},
  [RLX_Q8_K] = {dec_q8_k, enc_q8_k},
};

/* Blocks in a row of n elements of t, or -1 if t/n are not a valid row. */
static int64_t row_blocks(rlx_dtype t, int64_t n) {
  if (!ir_is_block(t) || !codecs[t].decode || n < 0 || n % ir_dtypes[t].block) return -1;
  return n / ir_dtypes[t].block;
}

int quant_dequantize_row(rlx_dtype t, const void *blocks, float *dst, int64_t n) {
  int64_t nb = row_blocks(t, n);
  if (nb < 0) return -1;
  const uint8_t *p = blocks;
  const int bs = ir_dtypes[t].size, be = ir_dtypes[t].block;
  for (int64_t i = 0; i < nb; i++) codecs[t].decode(p + i * bs, dst + i * be);
  return 0;
}

int quant_quantize_row(rlx_dtype t, const float *src, void *blocks, int64_t n) {
  int64_t nb = row_blocks(t, n);
  if (nb < 0) return -1;
  uint8_t *p = blocks;
  const int bs = ir_dtypes[t].size, be = ir_dtypes[t].block;
  for (int64_t i = 0; i < nb; i++) codecs[t].encode(src + i * be, p + i * bs);
  return 0;
}
