/* gemm_avx512.c — the AVX-512 SGEMM variant (compiled with -mavx512f
 * -mavx512bw -mavx512vl -mfma -mf16c; called only when cpu_features.h says
 * the CPU and OS have them).
 *
 * Micro-kernel 14 x 32: 28 zmm accumulators, 2 for the B row, and A
 * broadcast straight from memory into the FMAs; per k 2 vector loads and
 * 14 broadcasts feed 28 FMAs. Row counts 1..14 are separate instances (the
 * driver splits row panels evenly); columns past the edge are masked, and
 * a tile of at most 16 columns (the last of an N that is 16 past a
 * multiple of 32, or less) runs an instance with the 14 accumulators of
 * one vector a row: half the FMAs of a whole tile; one of at most 8
 * (ResNet's 196 positions: 6 tiles and 4 columns) a separate kernel of
 * 256-bit accumulators, a quarter (quarter_body), or where it has more
 * rows than columns one of a register a column (thin_body). The
 * epilogue (C from an earlier K block, bias, activation) is applied to the
 * accumulators before the only store of C.
 */
#include "gemm_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include "gemm_act_avx2.h"
#include "simd512.h"

#include <immintrin.h>

#define MR 14
#define NR 32

/* act(x): the transcendental activations of transformer blocks on 16
 * lanes (simd512.h), the others on the two 8-lane halves (gemm_act8); the
 * same results either way. Out of line, so the fourteen row-count
 * instances share one copy of the polynomials. */
__attribute__((noinline)) static __m512 act_ps(__m512 x, rlx_act act, float alpha) {
  switch (act) {
  case RLX_ACT_GELU: return simd16_gelu(x);
  case RLX_ACT_GELU_TANH: return simd16_gelu_tanh(x);
  case RLX_ACT_SILU: return simd16_silu(x);
  case RLX_ACT_SIGMOID: return simd16_sigmoid(x);
  case RLX_ACT_TANH: return simd16_tanh(x);
  case RLX_ACT_EXP: return simd16_exp(x);
  default: break;
  }
  __m256 lo = gemm_act8(_mm512_castps512_ps256(x), act, alpha);
  __m256 hi = gemm_act8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)), act, alpha);
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}

static inline __m512 act_inline(__m512 x, rlx_act act, float alpha) {
  if (act == RLX_ACT_NONE) return x;
  if (act == RLX_ACT_RELU) return _mm512_max_ps(_mm512_setzero_ps(), x);
  return act_ps(x, act, alpha);
}

/* ---------------------------------------------------------------- micro-kernel */

/* The row loops must unroll completely, or the accumulators live in memory. */
#define UNROLL_ROWS _Pragma("GCC unroll 16")
/* k steps the in-loop prefetches run ahead (measured: 32-48 best) */
#define PREFETCH_K 32
/* and those into L2 of a B in L3 or memory (GEMM_B_FAR): 16 KB ahead.
 * MiniLM's 24 products at 24 rows, 1 thread, loaded machine: 5.07 ->
 * 4.47 ms (12 of 16 runs faster); with B packed into L2 per call the
 * extra prefetches cost 3-6% (1024^3), so only there. */
#define PREFETCH_FAR_K (4 * PREFETCH_K)

static inline __attribute__((always_inline)) void micro_body(const int mr, int nr, int64_t kc,
                                                             const float *a, const float *b,
                                                             float *c, int64_t ldc, int flags,
                                                             const gemm_tile_epilogue *ep,
                                                             const int far, const int half) {
  __m512 c0[MR], c1[MR];
  /* C is touched only after the k loop: start its lines on their way now
   * (32 floats of a row not 64-byte aligned span three lines) */
  UNROLL_ROWS
  for (int i = 0; i < MR; i++)
    if (i < mr) {
      _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
      if (!half) _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
      _mm_prefetch((const char *)(c + i * ldc + nr - 1), _MM_HINT_T0);
      c0[i] = c1[i] = _mm512_setzero_ps();
    }
  /* B in place: rows b_ld apart, lanes past nr not read */
  const int64_t bstep = ep->b_ld ? ep->b_ld : NR;
  const __mmask16 bm0 = ep->b_ld ? simd16_tail_mask(nr) : 0xFFFF, bm1 = ep->b_ld ? simd16_tail_mask(nr - 16) : 0xFFFF;
  /* B's row PREFETCH_K steps ahead; in place with no more rows than that
   * (a 1x1 conv from 16 or 32 channels: each row a line of another plane),
   * the same row of the next panel, NR columns on, instead of rows past
   * the panel's */
  const int64_t pf = ep->b_ld && kc <= PREFETCH_K ? NR : PREFETCH_K * bstep, next = far == 2 ? ep->b_next : 0;
  for (int64_t k = 0; k < kc; k++) {
    __m512 b0 = _mm512_maskz_loadu_ps(bm0, b), b1 = half ? b0 : _mm512_maskz_loadu_ps(bm1, b + 16);
    /* both panels stream from L2 (kc is large, to spare passes over C): ask
     * for them ahead of the hardware prefetchers (past the end is harmless) */
    _mm_prefetch((const char *)(b + pf), _MM_HINT_T0);
    if (!half) _mm_prefetch((const char *)(b + pf + 16), _MM_HINT_T0);
    if (far == 2) { /* GEMM_B_NEXT */
      _mm_prefetch((const char *)(b + next), _MM_HINT_T1);
      _mm_prefetch((const char *)(b + next + 16), _MM_HINT_T1);
    } else if (far == 1) {
      _mm_prefetch((const char *)(b + PREFETCH_FAR_K * bstep), _MM_HINT_T1);
      if (!half) _mm_prefetch((const char *)(b + PREFETCH_FAR_K * bstep + 16), _MM_HINT_T1);
    }
    if ((k & 3) == 0) /* A: a line every 4 steps measured better than every line */
      _mm_prefetch((const char *)(a + PREFETCH_K * mr), _MM_HINT_T0);
    /* and into L2 from further ahead: a weight packed at load (a conv's,
     * whose panels run past the A budget) comes from memory on its first
     * pass, and the L2 streamer alone left the FMAs waiting on it */
    _mm_prefetch((const char *)(a + PREFETCH_FAR_K * mr), _MM_HINT_T1);
    UNROLL_ROWS
  for (int i = 0; i < MR; i++)
      if (i < mr) {
        __m512 ai = _mm512_set1_ps(a[i]);
        c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
        if (!half) c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
      }
    a += mr;
    b += bstep;
  }
  __mmask16 m0 = simd16_tail_mask(nr), m1 = simd16_tail_mask(nr - 16);
  int last = flags & GEMM_LAST;
  rlx_act act = last ? ep->act : RLX_ACT_NONE;
  int vec_act = gemm_act_vectorized(act);
  __m512 bias0 = _mm512_setzero_ps(), bias1 = bias0;
  int has_bias = last && ep->bias;
  if (has_bias) {
    bias0 = _mm512_maskz_loadu_ps(m0, ep->bias);
    bias1 = _mm512_maskz_loadu_ps(m1, ep->bias + 16);
  }
  const float *row_bias = last ? ep->row_bias : NULL, *res = last ? ep->residual : NULL;
  const int clamp = last && ep->clamp;
  const __m512 lo = _mm512_set1_ps(clamp ? ep->lo : 0.0f), hi = _mm512_set1_ps(clamp ? ep->hi : 0.0f);
  UNROLL_ROWS
  for (int i = 0; i < MR; i++)
    if (i < mr) {
      float *cr = c + i * ldc;
      __m512 v0 = c0[i], v1 = c1[i];
      if (flags & GEMM_ACCUMULATE) {
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cr));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cr + 16));
      }
      if (has_bias) {
        v0 = _mm512_add_ps(v0, bias0);
        v1 = _mm512_add_ps(v1, bias1);
      }
      if (row_bias) {
        const __m512 rb = _mm512_set1_ps(row_bias[i]);
        v0 = _mm512_add_ps(v0, rb);
        v1 = _mm512_add_ps(v1, rb);
      }
      if (res) {
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, res + i * ep->ldr));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, res + i * ep->ldr + 16));
      }
      if (vec_act) {
        v0 = act_inline(v0, act, ep->alpha);
        v1 = act_inline(v1, act, ep->alpha);
      }
      if (clamp && vec_act) { /* max(lo, v), min(hi, v) return v where v is NaN */
        v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
        v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));
      }
      _mm512_mask_storeu_ps(cr, m0, v0);
      _mm512_mask_storeu_ps(cr + 16, m1, v1);
    }
  if (!vec_act)
    for (int i = 0; i < mr; i++)
      gemm_scalar_row_post(c + i * ldc, nr, 0.0f, NULL, act, ep->alpha, clamp, ep->lo, ep->hi);
}

/* The epilogue of a tile of at most 16 columns (quarter_body, thin_body):
 * what is the same for every row (post16_of), row i's sums v with the
 * bias, GEMM_ACCUMULATE's sum, the row bias, the residual, a vectorized
 * activation and the clamp, stored under the column mask (post16_row),
 * then the activations that are not vectorized (post16_finish). */
typedef struct {
  __mmask16 m;
  rlx_act act;
  int vec_act, clamp;
  __m512 bias, lo, hi;
  const float *row_bias, *res;
} post16;

static inline __attribute__((always_inline)) post16 post16_of(int nr, int flags, const gemm_tile_epilogue *ep) {
  post16 p;
  const int last = flags & GEMM_LAST;
  p.m = simd16_tail_mask(nr);
  p.act = last ? ep->act : RLX_ACT_NONE;
  p.vec_act = gemm_act_vectorized(p.act);
  p.bias = last && ep->bias ? _mm512_maskz_loadu_ps(p.m, ep->bias) : _mm512_setzero_ps();
  p.row_bias = last ? ep->row_bias : NULL, p.res = last ? ep->residual : NULL;
  p.clamp = last && ep->clamp;
  p.lo = _mm512_set1_ps(p.clamp ? ep->lo : 0.0f), p.hi = _mm512_set1_ps(p.clamp ? ep->hi : 0.0f);
  return p;
}

static inline __attribute__((always_inline)) void post16_row(const post16 *p, __m512 v, float *c, int64_t ldc, int i,
                                                             int flags, const gemm_tile_epilogue *ep) {
  float *cr = c + i * ldc;
  v = _mm512_add_ps(v, p->bias);
  if (flags & GEMM_ACCUMULATE) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(p->m, cr));
  if (p->row_bias) v = _mm512_add_ps(v, _mm512_set1_ps(p->row_bias[i]));
  if (p->res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(p->m, p->res + i * ep->ldr));
  if (p->vec_act) v = act_inline(v, p->act, ep->alpha);
  if (p->clamp && p->vec_act) v = _mm512_min_ps(p->hi, _mm512_max_ps(p->lo, v)); /* NaN stays */
  _mm512_mask_storeu_ps(cr, p->m, v);
}

static inline __attribute__((always_inline)) void post16_finish(const post16 *p, float *c, int64_t ldc, int mr, int nr,
                                                                const gemm_tile_epilogue *ep) {
  if (!p->vec_act)
    for (int i = 0; i < mr; i++)
      gemm_scalar_row_post(c + i * ldc, nr, 0.0f, NULL, p->act, ep->alpha, p->clamp, ep->lo, ep->hi);
}

/* A tile of at most 8 columns: micro_body with one 256-bit accumulator a
 * row (Zen 4 runs two 256-bit FMAs a cycle, one 512-bit), the epilogue on
 * the low lanes of a 512-bit vector. Its own function: the variables it
 * adds to micro_body slowed that one's loop. */
static inline __attribute__((always_inline)) void quarter_body(const int mr, int nr, int64_t kc,
                                                               const float *a, const float *b,
                                                               float *c, int64_t ldc, int flags,
                                                               const gemm_tile_epilogue *ep) {
  __m256 q[MR];
  UNROLL_ROWS
  for (int i = 0; i < MR; i++)
    if (i < mr) {
      _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
      q[i] = _mm256_setzero_ps();
    }
  const int64_t bstep = ep->b_ld ? ep->b_ld : NR;
  const __mmask8 bm = ep->b_ld ? (__mmask8)simd16_tail_mask(nr) : 0xFF;
  for (int64_t k = 0; k < kc; k++) {
    const __m256 bq = _mm256_maskz_loadu_ps(bm, b);
    _mm_prefetch((const char *)(b + PREFETCH_K * bstep), _MM_HINT_T0);
    if ((k & 3) == 0) _mm_prefetch((const char *)(a + PREFETCH_K * mr), _MM_HINT_T0);
    UNROLL_ROWS
    for (int i = 0; i < MR; i++)
      if (i < mr) q[i] = _mm256_fmadd_ps(_mm256_set1_ps(a[i]), bq, q[i]);
    a += mr;
    b += bstep;
  }
  const post16 p = post16_of(nr, flags, ep);
  UNROLL_ROWS
  for (int i = 0; i < MR; i++)
    if (i < mr) post16_row(&p, _mm512_zextps256_ps512(q[i]), c, ldc, i, flags, ep);
  post16_finish(&p, c, ldc, mr, nr, ep);
}

#define QUARTER_CASE(r) \
  case r: quarter_body(r, nr, kc, Ap, Bp, C, ldc, flags, ep); break;

__attribute__((noinline)) static void quarter(int mr, int nr, int64_t kc, const float *Ap, const float *Bp,
                                              float *C, int64_t ldc, int flags, const gemm_tile_epilogue *ep) {
  switch (mr) {
    QUARTER_CASE(1) QUARTER_CASE(2) QUARTER_CASE(3) QUARTER_CASE(4) QUARTER_CASE(5) QUARTER_CASE(6)
    QUARTER_CASE(7) QUARTER_CASE(8) QUARTER_CASE(9) QUARTER_CASE(10) QUARTER_CASE(11) QUARTER_CASE(12)
    QUARTER_CASE(13) QUARTER_CASE(14)
  default: break;
  }
}

/* A tile of at most 8 columns and more rows than columns (ResNet's 196
 * positions: 6 tiles and 4 columns, against 14 rows of output channels)
 * with the roles turned: a register per column whose lanes are the rows,
 * an A panel's k-th column (mr floats, contiguous) one load, each B value
 * broadcast, so a k step is nr FMAs, not quarter_body's mr. Two sets of
 * accumulators (even and odd k) keep nr chains from waiting on the FMA
 * latency. The sums are turned back into rows (through a buffer) for
 * quarter_body's epilogue. */
static inline __attribute__((always_inline)) void thin_body(const int nr, int mr, int64_t kc, const float *a,
                                                            const float *b, float *c, int64_t ldc, int flags,
                                                            const gemm_tile_epilogue *ep) {
  __m512 s0[8], s1[8];
  UNROLL_ROWS
  for (int j = 0; j < 8; j++)
    if (j < nr) s0[j] = s1[j] = _mm512_setzero_ps();
  const int64_t bstep = ep->b_ld ? ep->b_ld : NR;
  const __mmask16 am = simd16_tail_mask(mr);
  int64_t k = 0;
  for (; k + 2 <= kc; k += 2) {
    const __m512 a0 = _mm512_maskz_loadu_ps(am, a), a1 = _mm512_maskz_loadu_ps(am, a + mr);
    _mm_prefetch((const char *)(a + PREFETCH_K * mr), _MM_HINT_T0);
    _mm_prefetch((const char *)(b + PREFETCH_K * bstep), _MM_HINT_T0);
    _mm_prefetch((const char *)(b + (PREFETCH_K + 1) * bstep), _MM_HINT_T0);
    UNROLL_ROWS
    for (int j = 0; j < 8; j++)
      if (j < nr) {
        s0[j] = _mm512_fmadd_ps(a0, _mm512_set1_ps(b[j]), s0[j]);
        s1[j] = _mm512_fmadd_ps(a1, _mm512_set1_ps(b[bstep + j]), s1[j]);
      }
    a += 2 * mr;
    b += 2 * bstep;
  }
  if (k < kc) {
    const __m512 a0 = _mm512_maskz_loadu_ps(am, a);
    UNROLL_ROWS
    for (int j = 0; j < 8; j++)
      if (j < nr) s0[j] = _mm512_fmadd_ps(a0, _mm512_set1_ps(b[j]), s0[j]);
  }
  float t[8 * 16]; /* t[j * 16 + i]: row i, column j */
  UNROLL_ROWS
  for (int j = 0; j < 8; j++)
    if (j < nr) _mm512_storeu_ps(t + j * 16, _mm512_add_ps(s0[j], s1[j]));
  const __m512i cols = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 0, 0, 0, 0, 0, 0, 0, 0);
  const post16 p = post16_of(nr, flags, ep);
  for (int i = 0; i < mr; i++)
    post16_row(&p, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), p.m, cols, t + i, 4), c, ldc, i, flags, ep);
  post16_finish(&p, c, ldc, mr, nr, ep);
}

#define THIN_CASE(n) \
  case n: thin_body(n, mr, kc, Ap, Bp, C, ldc, flags, ep); break;

__attribute__((noinline)) static void thin(int mr, int nr, int64_t kc, const float *Ap, const float *Bp, float *C,
                                           int64_t ldc, int flags, const gemm_tile_epilogue *ep) {
  switch (nr) {
    THIN_CASE(1) THIN_CASE(2) THIN_CASE(3) THIN_CASE(4) THIN_CASE(5) THIN_CASE(6) THIN_CASE(7) THIN_CASE(8)
  default: break;
  }
}

/* one instance per row count, per GEMM_B_FAR and per half tile (constants
 * in each) */
#define MICRO_CASE(r)                                           \
  case r:                                                       \
    if (nr <= 16) {                                             \
      if (flags & GEMM_B_FAR)                                   \
        micro_body(r, nr, kc, Ap, Bp, C, ldc, flags, ep, 1, 1); \
      else                                                      \
        micro_body(r, nr, kc, Ap, Bp, C, ldc, flags, ep, 0, 1); \
    } else if (flags & GEMM_B_FAR) {                            \
      micro_body(r, nr, kc, Ap, Bp, C, ldc, flags, ep, 1, 0);   \
    } else {                                                    \
      micro_body(r, nr, kc, Ap, Bp, C, ldc, flags, ep, 0, 0);   \
    }                                                           \
    break;

#define NEXT_CASE(r) \
  case r: micro_body(r, NR, kc, Ap, Bp, C, ldc, flags, ep, 2, 0); break;

/* GEMM_B_NEXT's instances (whole tiles), apart from micro's: as more
 * instances there, they left micro's hot loops spilling accumulators */
__attribute__((noinline)) static void micro_next(int mr, int64_t kc, const float *Ap, const float *Bp, float *C,
                                                 int64_t ldc, int flags, const gemm_tile_epilogue *ep) {
  switch (mr) {
    NEXT_CASE(1) NEXT_CASE(2) NEXT_CASE(3) NEXT_CASE(4) NEXT_CASE(5) NEXT_CASE(6) NEXT_CASE(7)
    NEXT_CASE(8) NEXT_CASE(9) NEXT_CASE(10) NEXT_CASE(11) NEXT_CASE(12) NEXT_CASE(13) NEXT_CASE(14)
  default: break;
  }
}

static void micro(int mr, int nr, int64_t kc, const float *Ap, const float *Bp, float *C,
                  int64_t ldc, int flags, const gemm_tile_epilogue *ep) {
  if (flags & GEMM_B_NEXT) {
    micro_next(mr, kc, Ap, Bp, C, ldc, flags, ep);
    return;
  }
  if (nr <= 8) {
    if (nr < mr)
      thin(mr, nr, kc, Ap, Bp, C, ldc, flags, ep);
    else
      quarter(mr, nr, kc, Ap, Bp, C, ldc, flags, ep);
    return;
  }
  switch (mr) {
    MICRO_CASE(1) MICRO_CASE(2) MICRO_CASE(3) MICRO_CASE(4) MICRO_CASE(5) MICRO_CASE(6)
    MICRO_CASE(7) MICRO_CASE(8) MICRO_CASE(9) MICRO_CASE(10) MICRO_CASE(11) MICRO_CASE(12)
    MICRO_CASE(13) MICRO_CASE(14)
  default: break;
  }
}

/* ---------------------------------------------------------------- loads of any dtype */

/* 16 elements from p (F32, F16 or BF16) as floats; lanes outside m are 0. */
static inline __m512 load16(const void *p, rlx_dtype dt, __mmask16 m) {
  switch (dt) {
  case RLX_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  case RLX_BF16:
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  default: return _mm512_maskz_loadu_ps(m, p);
  }
}

static void convert(const void *src, rlx_dtype dt, float *dst, int64_t n) {
  const uint16_t *s = src;
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = simd16_tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, load16(s + i, dt, m));
  }
}

/* B rows are short runs (nc columns) at a large stride, often from DRAM:
 * the hardware prefetchers see them late, so ask for rows ahead. */
#define PACK_B_AHEAD 8

static void pack_b(const float *src, int64_t ld, int64_t kc, int64_t nc, float *dst) {
  for (int64_t k = 0; k < kc; k++) {
    const float *s = src + k * ld;
    if (k + PACK_B_AHEAD < kc)
      for (int64_t j = 0; j < nc; j += 16)
        _mm_prefetch((const char *)(s + PACK_B_AHEAD * ld + j), _MM_HINT_T0);
    for (int64_t j = 0; j < nc; j += NR) {
      float *d = dst + (j / NR * kc + k) * NR;
      _mm512_store_ps(d, _mm512_maskz_loadu_ps(simd16_tail_mask(nc - j), s + j));
      _mm512_store_ps(d + 16, _mm512_maskz_loadu_ps(simd16_tail_mask(nc - j - 16), s + j + 16));
    }
  }
}

/* ---------------------------------------------------------------- matrix-vector */

static inline const void *elem(const void *p, rlx_dtype dt, int64_t i) {
  return (const char *)p + i * (int64_t)gemm_elem_size(dt);
}

/* y = x · R over K rows: 8 rows at a time stream through a y block, so R
 * is read once, row by row, in order. The block is JB = 16384 outputs (64
 * KB, in L2: y's load and store per 8 rows of R are a quarter of R's bytes,
 * from L2), so that rows of up to 16384 are read whole and the 8 rows of a
 * step are one contiguous run for the prefetchers: with 4096 (y in L1) a
 * 1x2048x8192 product read its rows in halves 32 KB apart and ran at
 * 0.89-0.95x of OpenBLAS's sgemv at one thread, 1.05-1.10x with 8192 or
 * 16384 (bench_sgemm.py, 9 rounds). */
static inline __attribute__((always_inline)) void gemv_rows_dt(int64_t K, int64_t n,
                                                               const float *x, const void *R,
                                                               const rlx_dtype dt, int64_t ld,
                                                               float *y) {
  enum { JB = 16384 };
  for (int64_t j0 = 0; j0 < n; j0 += JB) {
    int64_t jb = n - j0 < JB ? n - j0 : JB;
    float *yb = y + j0;
    for (int64_t j = 0; j < jb; j += 16) _mm512_mask_storeu_ps(yb + j, simd16_tail_mask(jb - j), _mm512_setzero_ps());
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
      __m512 xk[8];
      const void *r[8];
      for (int u = 0; u < 8; u++) {
        xk[u] = _mm512_set1_ps(x[k + u]);
        r[u] = elem(R, dt, (k + u) * ld + j0);
      }
      for (int64_t j = 0; j < jb; j += 16) {
        __mmask16 m = simd16_tail_mask(jb - j);
        __m512 acc = _mm512_maskz_loadu_ps(m, yb + j);
        __m512 acc2 = _mm512_mul_ps(xk[1], load16(elem(r[1], dt, j), dt, m));
        acc = _mm512_fmadd_ps(xk[0], load16(elem(r[0], dt, j), dt, m), acc);
        acc2 = _mm512_fmadd_ps(xk[3], load16(elem(r[3], dt, j), dt, m), acc2);
        acc = _mm512_fmadd_ps(xk[2], load16(elem(r[2], dt, j), dt, m), acc);
        acc2 = _mm512_fmadd_ps(xk[5], load16(elem(r[5], dt, j), dt, m), acc2);
        acc = _mm512_fmadd_ps(xk[4], load16(elem(r[4], dt, j), dt, m), acc);
        acc2 = _mm512_fmadd_ps(xk[7], load16(elem(r[7], dt, j), dt, m), acc2);
        acc = _mm512_fmadd_ps(xk[6], load16(elem(r[6], dt, j), dt, m), acc);
        _mm512_mask_storeu_ps(yb + j, m, _mm512_add_ps(acc, acc2));
      }
    }
    for (; k < K; k++) {
      __m512 xk = _mm512_set1_ps(x[k]);
      const void *r = elem(R, dt, k * ld + j0);
      for (int64_t j = 0; j < jb; j += 16) {
        __mmask16 m = simd16_tail_mask(jb - j);
        __m512 acc = _mm512_maskz_loadu_ps(m, yb + j);
        _mm512_mask_storeu_ps(yb + j, m, _mm512_fmadd_ps(xk, load16(elem(r, dt, j), dt, m), acc));
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

/* y[j] = R_j · x: four rows at a time, two accumulators each. */
static inline __attribute__((always_inline)) void gemv_dots_dt(int64_t K, int64_t n,
                                                               const float *x, const void *R,
                                                               const rlx_dtype dt, int64_t ld,
                                                               float *y) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m512 acc[4][2];
    const void *r[4];
    for (int u = 0; u < 4; u++) {
      acc[u][0] = acc[u][1] = _mm512_setzero_ps();
      r[u] = elem(R, dt, (j + u) * ld);
    }
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
      for (int u = 0; u < 4; u++) {
        acc[u][0] = _mm512_fmadd_ps(load16(elem(r[u], dt, k), dt, 0xFFFF), x0, acc[u][0]);
        acc[u][1] = _mm512_fmadd_ps(load16(elem(r[u], dt, k + 16), dt, 0xFFFF), x1, acc[u][1]);
      }
    }
    for (; k < K; k += 16) {
      __mmask16 m = simd16_tail_mask(K - k);
      __m512 x0 = _mm512_maskz_loadu_ps(m, x + k);
      for (int u = 0; u < 4; u++)
        acc[u][0] = _mm512_fmadd_ps(load16(elem(r[u], dt, k), dt, m), x0, acc[u][0]);
    }
    for (int u = 0; u < 4; u++) y[j + u] = _mm512_reduce_add_ps(_mm512_add_ps(acc[u][0], acc[u][1]));
  }
  for (; j < n; j++) {
    const void *r = elem(R, dt, j * ld);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) {
      __mmask16 m = simd16_tail_mask(K - k);
      acc = _mm512_fmadd_ps(load16(elem(r, dt, k), dt, m), _mm512_maskz_loadu_ps(m, x + k), acc);
    }
    y[j] = _mm512_reduce_add_ps(acc);
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
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 m = simd16_tail_mask(n - j);
    __m512 v = _mm512_maskz_loadu_ps(m, y + j);
    if (bias)
      v = _mm512_add_ps(v, bias_step ? _mm512_maskz_loadu_ps(m, bias + j) : _mm512_set1_ps(bias[0]));
    if (vec_act) v = act_inline(v, act, alpha);
    _mm512_mask_storeu_ps(y + j, m, v);
  }
  if (!vec_act) gemm_scalar_act_row(y, n, act, alpha);
}

static void row_post(float *y, int64_t n, float add, const float *res, rlx_act act, float alpha, int clamp,
                     float lo, float hi) {
  if (!gemm_act_vectorized(act)) {
    gemm_scalar_row_post(y, n, add, res, act, alpha, clamp, lo, hi);
    return;
  }
  const __m512 va = _mm512_set1_ps(add), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 m = simd16_tail_mask(n - j);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + j), va);
    if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + j));
    v = act_inline(v, act, alpha);
    if (clamp) /* max(lo, v), min(hi, v) return v where v is NaN */
      v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
    _mm512_mask_storeu_ps(y + j, m, v);
  }
}

const gemm_isa gemm_isa_avx512 = {
    .name = "avx512", .mr_max = MR, .nr_max = NR, .micro_rows = 1, .b_in_place = 1, .kc = 1024, .mc = 112, .nc = 2048,
    .a_block_floats = 128 * 1024, .b_block_floats = 128 * 1024,
    .micro = micro, .gemv_rows = gemv_rows, .gemv_dots = gemv_dots,
    .epilogue = epilogue, .row_post = row_post, .convert = convert, .pack_t = gemm_avx2_pack_t,
    .pack_b = pack_b,
};

#endif /* x86 */
