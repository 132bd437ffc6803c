/* gemm_avx2.c — the AVX2/FMA SGEMM variant (compiled with -mavx2 -mfma
 * -mf16c; called only when cpu_features.h says the CPU and OS have them).
 *
 * Micro-kernel 6 x 16: 12 ymm accumulators, 2 for the B row, 1 for the
 * broadcast A element; per k 2 loads and 6 broadcasts feed 12 FMAs. Row
 * counts 1..6 are separate instances; columns past the edge are masked. The
 * epilogue (C from an earlier K block, bias, activation) is applied to the
 * accumulators before the only store of C.
 */
#include "gemm_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include "gemm_act_avx2.h"
#include "simd.h"

#include <immintrin.h>
#include <string.h>

#define MR 6
#define NR 16

/* ---------------------------------------------------------------- masks and loads */

/* Lanes [0, n) of 8 set (n clamped to 0..8). */
static inline __m256i tail_mask(int64_t n) {
  static const int32_t ramp[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_loadu_si256((const __m256i *)(ramp + 8 - k));
}

/* 8 elements (n < 8: the first n, the rest 0) from p in F32/F16/BF16. */
static inline __m256 load8(const void *p, rlx_dtype dt, int64_t n) {
  if (dt == RLX_F32) {
    if (n >= 8) return _mm256_loadu_ps(p);
    return _mm256_maskload_ps(p, tail_mask(n));
  }
  __m128i h;
  if (n >= 8) {
    h = _mm_loadu_si128(p);
  } else {
    uint16_t tmp[8] = {0};
    memcpy(tmp, p, (size_t)(n > 0 ? n : 0) * 2);
    h = _mm_loadu_si128((const __m128i *)tmp);
  }
  if (dt == RLX_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline void store8(float *p, __m256 v, int64_t n) {
  if (n >= 8) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, tail_mask(n), v);
}

/* ---------------------------------------------------------------- activations */

/* Out of line: the six row-count instances of the micro-kernel share one
 * copy of the polynomials. */
__attribute__((noinline)) static __m256 act_ps(__m256 x, rlx_act act, float alpha) {
  return gemm_act8(x, act, alpha);
}

static inline __m256 act_inline(__m256 x, rlx_act act, float alpha) {
  if (act == RLX_ACT_NONE) return x;
  if (act == RLX_ACT_RELU) return _mm256_max_ps(_mm256_setzero_ps(), x);
  return act_ps(x, act, alpha);
}

/* ---------------------------------------------------------------- micro-kernel */

/* The row loops must unroll completely, or the accumulators live in memory. */
#define UNROLL_ROWS _Pragma("GCC unroll 16")

static inline __attribute__((always_inline)) void micro_body(const int mr, int nr, int64_t kc,
                                                             const float *a, const float *b,
                                                             float *c, int64_t ldc, int flags,
                                                             const gemm_tile_epilogue *ep) {
  __m256 c0[MR], c1[MR];
  UNROLL_ROWS
  for (int i = 0; i < MR; i++)
    if (i < mr) {
      /* C is touched only after the k loop: start its lines on their way now */
      _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch((const char *)(c + i * ldc + nr - 1), _MM_HINT_T0);
      c0[i] = c1[i] = _mm256_setzero_ps();
    }
  /* unrolled: the loop's own increments and branch per step are a sixth of
   * its instructions otherwise */
  _Pragma("GCC unroll 4")
  for (int64_t k = 0; k < kc; k++) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    UNROLL_ROWS
  for (int i = 0; i < MR; i++)
      if (i < mr) {
        __m256 ai = _mm256_broadcast_ss(a + i);
        c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
        c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
      }
    a += mr;
    b += NR;
  }
  int last = flags & GEMM_LAST;
  rlx_act act = last ? ep->act : RLX_ACT_NONE;
  int vec_act = gemm_act_vectorized(act);
  int has_bias = last && ep->bias;
  int64_t n0 = nr, n1 = nr - 8;
  __m256 bias0 = _mm256_setzero_ps(), bias1 = bias0;
  if (has_bias) {
    bias0 = load8(ep->bias, RLX_F32, n0);
    bias1 = load8(ep->bias + 8, RLX_F32, n1);
  }
  UNROLL_ROWS
  for (int i = 0; i < MR; i++)
    if (i < mr) {
      float *cr = c + i * ldc;
      __m256 v0 = c0[i], v1 = c1[i];
      if (flags & GEMM_ACCUMULATE) {
        v0 = _mm256_add_ps(v0, load8(cr, RLX_F32, n0));
        v1 = _mm256_add_ps(v1, load8(cr + 8, RLX_F32, n1));
      }
      if (has_bias) {
        v0 = _mm256_add_ps(v0, bias0);
        v1 = _mm256_add_ps(v1, bias1);
      }
      if (vec_act) {
        v0 = act_inline(v0, act, ep->alpha);
        v1 = act_inline(v1, act, ep->alpha);
      }
      store8(cr, v0, n0);
      if (n1 > 0) store8(cr + 8, v1, n1);
    }
  if (!vec_act)
    for (int i = 0; i < mr; i++) gemm_scalar_act_row(c + i * ldc, nr, act, ep->alpha);
}

#define MICRO_CASE(r) \
  case r: micro_body(r, nr, kc, Ap, Bp, C, ldc, flags, ep); break;

static void micro(int mr, int nr, int64_t kc, const float *Ap, const float *Bp, float *C,
                  int64_t ldc, int flags, const gemm_tile_epilogue *ep) {
  switch (mr) {
    MICRO_CASE(1) MICRO_CASE(2) MICRO_CASE(3) MICRO_CASE(4) MICRO_CASE(5) MICRO_CASE(6)
  default: break;
  }
}

/* ---------------------------------------------------------------- packing */

/* c[j] = column j of the 8 x 8 block whose rows are r[0..7]. */
static inline void transpose8(const __m256 r[8], __m256 c[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  c[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  c[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  c[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  c[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  c[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  c[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  c[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  c[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* The first n (1..8) lanes of v to p through plain 16/8/4-byte stores:
 * vmaskmovps stores are slow on AMD cores, and the A panels (6 or 14 rows)
 * store a partial vector per k. */
static inline void store_first(float *p, __m256 v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  __m128 x = _mm256_castps256_ps128(v);
  if (n >= 4) {
    _mm_storeu_ps(p, x);
    x = _mm256_extractf128_ps(v, 1);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    _mm_storel_pi((__m64 *)(void *)p, x);
    x = _mm_movehl_ps(x, x);
    p += 2;
    n -= 2;
  }
  if (n) _mm_store_ss(p, x);
}

/* Blocks of 8 columns outer, all rows inner: each block finishes 8
 * whole rows of dst, consecutive in memory when dst_stride == rows (a
 * turned 7x7 conv's Y^T back to y: 49 rows). Rows outer wrote every dst
 * row 32 bytes at a time in ceil(rows / 8) passes over all of dst, which
 * left L1 for L2 each pass. */
void gemm_avx2_pack_t(const float *src, int64_t ld, int64_t rows, int64_t kc, float *dst,
                      int64_t dst_stride) {
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8)
    for (int64_t r0 = 0; r0 < rows; r0 += 8) {
      const int64_t nr = rows - r0 < 8 ? rows - r0 : 8;
      const float *s = src + r0 * ld + k;
      __m256 r[8], c[8];
      for (int i = 0; i < 8; i++) r[i] = i < nr ? _mm256_loadu_ps(s + i * ld) : _mm256_setzero_ps();
      transpose8(r, c);
      for (int j = 0; j < 8; j++) store_first(dst + (k + j) * dst_stride + r0, c[j], nr);
    }
  for (; k < kc; k++)
    for (int64_t i = 0; i < rows; i++) dst[k * dst_stride + i] = src[i * ld + k];
}

/* As in gemm_avx512.c: B rows are short runs (nc columns) at a large
 * stride, often from DRAM, which the hardware prefetchers see late: ask
 * for rows ahead. */
#define PACK_B_AHEAD 8

static void pack_b(const float *src, int64_t ld, int64_t kc, int64_t nc, float *dst) {
  for (int64_t k = 0; k < kc; k++) {
    const float *s = src + k * ld;
    if (k + PACK_B_AHEAD < kc)
      for (int64_t j = 0; j < nc; j += 16)
        _mm_prefetch((const char *)(s + PACK_B_AHEAD * ld + j), _MM_HINT_T0);
    for (int64_t j = 0; j < nc; j += NR) {
      float *d = dst + (j / NR * kc + k) * NR;
      _mm256_store_ps(d, load8(s + j, RLX_F32, nc - j));
      _mm256_store_ps(d + 8, load8(s + j + 8, RLX_F32, nc - j - 8));
    }
  }
}

/* ---------------------------------------------------------------- conversion, matrix-vector */

static inline const void *elem(const void *p, rlx_dtype dt, int64_t i) {
  return (const char *)p + i * (int64_t)gemm_elem_size(dt);
}

static void convert(const void *src, rlx_dtype dt, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) store8(dst + i, load8(elem(src, dt, i), dt, n - i), n - i);
}

/* As in gemm_avx512.c: 8 rows at a time through a y block of JB outputs. */
static inline __attribute__((always_inline)) void gemv_rows_dt(int64_t K, int64_t n,
                                                               const float *x, const void *R,
                                                               const rlx_dtype dt, int64_t ld,
                                                               float *y) {
  enum { JB = 16384 };
  for (int64_t j0 = 0; j0 < n; j0 += JB) {
    int64_t jb = n - j0 < JB ? n - j0 : JB;
    float *yb = y + j0;
    for (int64_t j = 0; j < jb; j++) yb[j] = 0.0f;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
      __m256 xk[8];
      const void *r[8];
      for (int u = 0; u < 8; u++) {
        xk[u] = _mm256_set1_ps(x[k + u]);
        r[u] = elem(R, dt, (k + u) * ld + j0);
      }
      for (int64_t j = 0; j < jb; j += 8) {
        int64_t t = jb - j;
        __m256 acc = load8(yb + j, RLX_F32, t);
        __m256 acc2 = _mm256_mul_ps(xk[1], load8(elem(r[1], dt, j), dt, t));
        acc = _mm256_fmadd_ps(xk[0], load8(elem(r[0], dt, j), dt, t), acc);
        acc2 = _mm256_fmadd_ps(xk[3], load8(elem(r[3], dt, j), dt, t), acc2);
        acc = _mm256_fmadd_ps(xk[2], load8(elem(r[2], dt, j), dt, t), acc);
        acc2 = _mm256_fmadd_ps(xk[5], load8(elem(r[5], dt, j), dt, t), acc2);
        acc = _mm256_fmadd_ps(xk[4], load8(elem(r[4], dt, j), dt, t), acc);
        acc2 = _mm256_fmadd_ps(xk[7], load8(elem(r[7], dt, j), dt, t), acc2);
        acc = _mm256_fmadd_ps(xk[6], load8(elem(r[6], dt, j), dt, t), acc);
        store8(yb + j, _mm256_add_ps(acc, acc2), t);
      }
    }
    for (; k < K; k++) {
      __m256 xk = _mm256_set1_ps(x[k]);
      const void *r = elem(R, dt, k * ld + j0);
      for (int64_t j = 0; j < jb; j += 8) {
        int64_t t = jb - j;
        store8(yb + j, _mm256_fmadd_ps(xk, load8(elem(r, dt, j), dt, t), load8(yb + j, RLX_F32, t)), t);
      }
    }
  }
}

static void gemv_rows(int64_t K, int64_t n, const float *x, const void *R, rlx_dtype dt,
                      int64_t ld, float *y) {
  switch (dt) {
  case RLX_F16: gemv_rows_dt(K, n, x, R, RLX_F16, ld, y); break;
  case RLX_BF16: gemv_rows_dt(K, n, x, R, RLX_BF16, ld, y); break;
  default: gemv_rows_dt(K, n, x, R, RLX_F32, ld, y); break;
  }
}

static inline __attribute__((always_inline)) void gemv_dots_dt(int64_t K, int64_t n,
                                                               const float *x, const void *R,
                                                               const rlx_dtype dt, int64_t ld,
                                                               float *y) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256 acc[4][2];
    const void *r[4];
    for (int u = 0; u < 4; u++) {
      acc[u][0] = acc[u][1] = _mm256_setzero_ps();
      r[u] = elem(R, dt, (j + u) * ld);
    }
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
      __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
      for (int u = 0; u < 4; u++) {
        acc[u][0] = _mm256_fmadd_ps(load8(elem(r[u], dt, k), dt, 8), x0, acc[u][0]);
        acc[u][1] = _mm256_fmadd_ps(load8(elem(r[u], dt, k + 8), dt, 8), x1, acc[u][1]);
      }
    }
    for (; k < K; k += 8) {
      __m256 x0 = load8(x + k, RLX_F32, K - k);
      for (int u = 0; u < 4; u++)
        acc[u][0] = _mm256_fmadd_ps(load8(elem(r[u], dt, k), dt, K - k), x0, acc[u][0]);
    }
    for (int u = 0; u < 4; u++) y[j + u] = simd_hsum(_mm256_add_ps(acc[u][0], acc[u][1]));
  }
  for (; j < n; j++) {
    const void *r = elem(R, dt, j * ld);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += 8)
      acc = _mm256_fmadd_ps(load8(elem(r, dt, k), dt, K - k), load8(x + k, RLX_F32, K - k), acc);
    y[j] = simd_hsum(acc);
  }
}

static void gemv_dots(int64_t K, int64_t n, const float *x, const void *R, rlx_dtype dt,
                      int64_t ld, float *y) {
  switch (dt) {
  case RLX_F16: gemv_dots_dt(K, n, x, R, RLX_F16, ld, y); break;
  case RLX_BF16: gemv_dots_dt(K, n, x, R, RLX_BF16, ld, y); break;
  default: gemv_dots_dt(K, n, x, R, RLX_F32, ld, y); break;
  }
}

static void epilogue(float *y, int64_t n, const float *bias, int bias_step, rlx_act act,
                     float alpha) {
  int vec_act = gemm_act_vectorized(act);
  if (!bias && act == RLX_ACT_NONE) return;
  for (int64_t j = 0; j < n; j += 8) {
    int64_t t = n - j;
    __m256 v = load8(y + j, RLX_F32, t);
    if (bias) v = _mm256_add_ps(v, bias_step ? load8(bias + j, RLX_F32, t) : _mm256_set1_ps(bias[0]));
    if (vec_act) v = act_inline(v, act, alpha);
    store8(y + j, v, t);
  }
  if (!vec_act) gemm_scalar_act_row(y, n, act, alpha);
}

static void row_post(float *y, int64_t n, float add, const float *res, rlx_act act, float alpha, int clamp,
                     float lo, float hi) {
  if (!gemm_act_vectorized(act)) {
    gemm_scalar_row_post(y, n, add, res, act, alpha, clamp, lo, hi);
    return;
  }
  const __m256 va = _mm256_set1_ps(add), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  for (int64_t j = 0; j < n; j += 8) {
    int64_t t = n - j;
    __m256 v = _mm256_add_ps(load8(y + j, RLX_F32, t), va);
    if (res) v = _mm256_add_ps(v, load8(res + j, RLX_F32, t));
    v = act_inline(v, act, alpha);
    if (clamp) /* max(lo, v), min(hi, v) return v where v is NaN */
      v = _mm256_min_ps(vhi, _mm256_max_ps(vlo, v));
    store8(y + j, v, t);
  }
}

/* Blocking measured against OpenBLAS's Haswell kernel, all configurations
 * interleaved in one process: kc 512 (a B micro-panel of 32 KiB: an L1d of
 * 32 KiB, as on Zen 4 and most AVX2-only cores, holds it); one A block up
 * to 128 x 512 (256 KiB) next to B blocks of 128 KiB, so that both stay in
 * L2 with C. On a Zen 4 core (32 KiB L1d, 1 MiB L2) that was 5-9% faster
 * on 128 x K x N than the kc 768 / 512 KiB B block tuned on a Zen 5 core
 * (48 KiB L1d) before. */
const gemm_isa gemm_isa_avx2 = {
    .name = "avx2", .mr_max = MR, .nr_max = NR, .kc = 512, .mc = 120, .nc = 2048,
    .a_block_floats = 64 * 1024, .b_block_floats = 32 * 1024,
    .micro = micro, .gemv_rows = gemv_rows, .gemv_dots = gemv_dots,
    .epilogue = epilogue, .row_post = row_post, .convert = convert, .pack_t = gemm_avx2_pack_t,
    .pack_b = pack_b,
};

#endif /* x86 */
