/* bgemm_avx512.c — BF16 weights times F32 activations rounded to BF16 on
 * vdpbf16ps (bgemm.h, RLX_FLAG_BF16_MATH); compiled with -mavx512bf16,
 * run only where bgemm_avx512_supported() says so.
 *
 * x is rounded and packed once per call into tiles of MR rows, each pair
 * of k a 32-bit lane ([tile][pair][row]); w is read in place (the mapped
 * file) and packed per task into panels of NR rows by KC pairs ([pair]
 * [row], in the L2 of one core), both transposed 16 x 16 in registers,
 * so the weights need no resident copy. A task takes panels of NR weight
 * rows, NG at a time; per K block every tile of x meets each of the NG
 * panels in turn in an MR x NR block of F32 accumulators (MR x 2 zmm and
 * 2 for the panel's pairs: 26 of 32), so a tile's K block comes from the
 * L3 (x of 512 rows and K 8192 packs to 8 MiB) once per NG panels and
 * from the L1 or L2 for the others.
 */
#include "bgemm.h"

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512BW__)
#include "cpu_features.h"
#include "huge_alloc.h"

#include <immintrin.h>
#include <string.h>

enum {
  MR = 12,  /* activation rows a tile */
  NR = 32,  /* weight rows (output columns) a panel: two zmm of 16 */
  KC = 512, /* pairs of k a panel block: 32 x 512 x 4 bytes = 64 KiB, in L2 */
  NG = 8    /* panels of a task packed at a time: 512 KiB, in L2 */
};

typedef struct {
  const float *x;
  const uint16_t *w;
  int64_t M, N, K, Kp; /* Kp: pairs of k, K / 2 rounded up */
  uint32_t *xp;        /* [ceil(M / MR)][Kp][MR] pairs of x's BF16 values */
  uint32_t *panels;    /* a panel of NR x KC pairs per thread */
  float *y;
} job;

int bgemm_avx512_supported(void) { return cpu_get_features()->avx512_bf16; }

/* 32 consecutive values of an F32 row (zeros from the n-th on) as 16
 * pairs of BF16, nearest even. */
static inline __m512i bf16_pairs(const float *x, int64_t n) {
  const __mmask16 lo = n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1);
  const __mmask16 hi = n >= 32 ? 0xFFFF : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
  const __m512 a = _mm512_maskz_loadu_ps(lo, x), b = _mm512_maskz_loadu_ps(hi, x + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(b, a);
}

/* The 16 x 16 dword transpose: lane k of r[i] to lane i of r[k]. */
static inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) { /* u[i + e]: rows i .. i + 3, element e of each 128-bit lane */
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int e = 0; e < 4; e++) { /* lane L of u[e], u[4 + e], u[8 + e], u[12 + e] to r[4 L + e] */
    const __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88), v1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xDD);
    r[e] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[8 + e] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    r[4 + e] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

/* Tiles [begin, end) of x into xp (rows from M on as zeros), 16 pairs of
 * a tile's rows at a time. */
static void pack_x(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const job *J = arg;
  for (int64_t t = begin; t < end; t++) {
    uint32_t *dst = J->xp + (size_t)(t * J->Kp * MR);
    for (int64_t kp = 0; kp < J->Kp; kp += 16) {
      __m512i r[16];
      for (int i = 0; i < 16; i++) {
        const int64_t row = t * MR + i;
        r[i] = i < MR && row < J->M ? bf16_pairs(J->x + row * J->K + 2 * kp, J->K - 2 * kp) : _mm512_setzero_si512();
      }
      transpose16(r);
      const int64_t n = J->Kp - kp < 16 ? J->Kp - kp : 16;
      for (int64_t i = 0; i < n; i++) _mm512_mask_storeu_epi32(dst + (kp + i) * MR, (1u << MR) - 1, r[i]);
    }
  }
}

/* Rows [n0, n0 + nr) of w, pairs [kp0, kp0 + kc), into panel [kc][NR]
 * (rows from nr on and the half pair past an odd K as zeros), 16 rows by
 * 16 pairs at a time. */
static void pack_w(const job *J, int64_t n0, int nr, int64_t kp0, int64_t kc, uint32_t *panel) {
  for (int h = 0; h < NR; h += 16)
    for (int64_t i = 0; i < kc; i += 16) {
      const int64_t left = J->K - 2 * (kp0 + i); /* values of a row from here */
      const __mmask32 m = left >= 32 ? 0xFFFFFFFFu : (__mmask32)((1ull << left) - 1);
      __m512i r[16];
      for (int j = 0; j < 16; j++)
        r[j] = h + j < nr ? _mm512_maskz_loadu_epi16(m, J->w + (n0 + h + j) * J->K + 2 * (kp0 + i))
                          : _mm512_setzero_si512();
      transpose16(r);
      const int64_t n = kc - i < 16 ? kc - i : 16;
      for (int64_t k = 0; k < n; k++) _mm512_storeu_si512((void *)(panel + (i + k) * NR + h), r[k]);
    }
}

/* The MR x NR block of y at y (row stride ldy) = (add: y +) tile xt [kc]
 * [MR] x panel p [kc][NR]; rows from mr and columns from nr on are not
 * stored. */
static void micro(const uint32_t *xt, const uint32_t *p, int64_t kc, float *y, int64_t ldy, int mr, int nr, int add) {
  __m512 c[MR][2];
#pragma GCC unroll 12
  for (int r = 0; r < MR; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k++) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512((const void *)(p + k * NR));
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512((const void *)(p + k * NR + 16));
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32((int)xt[k * MR + r]);
      c[r][0] = _mm512_dpbf16_ps(c[r][0], a, b0);
      c[r][1] = _mm512_dpbf16_ps(c[r][1], a, b1);
    }
  }
  const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
  for (int r = 0; r < mr; r++) {
    float *yr = y + r * ldy;
    if (add) {
      c[r][0] = _mm512_add_ps(c[r][0], _mm512_maskz_loadu_ps(m0, yr));
      c[r][1] = _mm512_add_ps(c[r][1], _mm512_maskz_loadu_ps(m1, yr + 16));
    }
    _mm512_mask_storeu_ps(yr, m0, c[r][0]);
    _mm512_mask_storeu_ps(yr + 16, m1, c[r][1]);
  }
}

/* Panels [begin, end) of NR weight rows, NG at a time. */
static void panels(void *arg, int64_t begin, int64_t end, int thread) {
  const job *J = arg;
  uint32_t *group = J->panels + (size_t)thread * NG * NR * KC;
  const int64_t tiles = (J->M + MR - 1) / MR;
  for (int64_t p0 = begin; p0 < end; p0 += NG) {
    const int np = (int)(end - p0 < NG ? end - p0 : NG);
    for (int64_t kp0 = 0; kp0 < J->Kp; kp0 += KC) {
      const int64_t kc = J->Kp - kp0 < KC ? J->Kp - kp0 : KC;
      for (int i = 0; i < np; i++) {
        const int64_t n0 = (p0 + i) * NR;
        pack_w(J, n0, (int)(J->N - n0 < NR ? J->N - n0 : NR), kp0, kc, group + (size_t)i * NR * KC);
      }
      for (int64_t t = 0; t < tiles; t++) {
        const int mr = (int)(J->M - t * MR < MR ? J->M - t * MR : MR);
        const uint32_t *xt = J->xp + (size_t)((t * J->Kp + kp0) * MR);
        for (int i = 0; i < np; i++) {
          const int64_t n0 = (p0 + i) * NR;
          micro(xt, group + (size_t)i * NR * KC, kc, J->y + t * MR * J->N + n0, J->N, mr,
                (int)(J->N - n0 < NR ? J->N - n0 : NR), kp0 > 0);
        }
      }
    }
  }
}

int bgemm_avx512(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, const uint16_t *w, float *y) {
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0) {
    memset(y, 0, (size_t)(M * N) * sizeof *y);
    return 0;
  }
  const int threads = cpu_ctx_threads(ctx);
  job J = {.x = x, .w = w, .M = M, .N = N, .K = K, .Kp = (K + 1) / 2, .y = y};
  const int64_t tiles = (M + MR - 1) / MR;
  J.xp = line_alloc((size_t)(tiles * J.Kp * MR) * sizeof *J.xp);
  J.panels = line_alloc((size_t)threads * NG * NR * KC * sizeof *J.panels);
  if (!J.xp || !J.panels) {
    free(J.xp);
    free(J.panels);
    return -1;
  }
  cpu_parallel_for(ctx, tiles, 1, pack_x, &J);
  cpu_parallel_for(ctx, (N + NR - 1) / NR, 1, panels, &J);
  free(J.xp);
  free(J.panels);
  return 0;
}

#else

int bgemm_avx512_supported(void) { return 0; }

int bgemm_avx512(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, const uint16_t *w, float *y) {
  (void)ctx, (void)M, (void)N, (void)K, (void)x, (void)w, (void)y;
  return -1;
}

#endif
