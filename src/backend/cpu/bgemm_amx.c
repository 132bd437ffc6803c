/* bgemm_amx.c — BF16 or F16 weights times F32 activations on AMX BF16
 * tiles (bgemm.h); built with the AVX-512 flags, the tile instructions
 * written as inline assembly (no compiler flag for them).
 *
 * The weights are tdpbf16ps's A operand (16 weight rows of 32 BF16 k
 * values), x's parts its B operand (16 rows of k pairs, 16 tokens of 2
 * BF16 each), so C tiles are y transposed (weight rows x tokens), summed
 * in place over every K block of a plan yT [Np, Mp] and transposed into y
 * at the end: the weights need no pair interleaving, only a copy of the
 * rows of a K block into consecutive tiles (16 weight rows that are K
 * apart would share L1 sets), F16 ones split on the way into two BF16
 * parts (hi + lo, exact: F16 has an 11-bit significand). x's parts are
 * packed once per call.
 *
 * A task takes blocks of 32 weight rows; per K block of KC (x's parts for
 * it, 3 x Mp x KC BF16, stay in L2), per weight block (copied, in L1),
 * per 32 tokens: four C tiles (2 weight tiles x 2 token tiles) loaded,
 * then per 32 k and weight part: the two weight tiles, and per part of x
 * the two token tiles and four products.
 */
#include "bgemm.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__x86_64__)
#include "cpu_features.h"
#include "huge_alloc.h"
#include "ir/ir.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* K elements a block: x's three parts of it for Mp tokens (768 KiB at Mp
 * = 512) stay in L2 while every weight block of the task meets them. */
#define KC 256
#define TILE_BYTES 1024

typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

typedef struct {
  int64_t M, N, K, Mp, Np, Kp, MG; /* MG: token groups of 16 (Mp / 16) */
  int wparts;                      /* 1 for BF16 w, 2 for F16 (hi, lo) */
  const float *x;
  const uint16_t *w;
  float *y, *yT;
  uint8_t *xp; /* tile (part p, token group g, k chunk c) at ((c * 3 + p) * MG + g) * TILE_BYTES */
} job;

static pthread_once_t flag_once = PTHREAD_ONCE_INIT;
static int amx_off;
static void read_flag(void) { amx_off = ir_env_flag("RLX_NO_AMX", 0); }

int bgemm_amx_supported(void) {
  pthread_once(&flag_once, read_flag);
  return !amx_off && cpu_get_features()->avx512 && cpu_amx_bf16(NULL);
}

/* Round to nearest even BF16, kept as F32 (the low 16 bits zero); finite
 * x only (inf and NaN end as NaN in the parts, as they would in the sum). */
static inline __m512 round_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)));
  return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* 32 BF16 words: the high halves of a's and b's floats, in order. */
static inline __m512i bf16_words(__m512 a, __m512 b) {
  const __m512i idx = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                       25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  return _mm512_permutex2var_epi16(_mm512_castps_si512(a), idx, _mm512_castps_si512(b));
}

/* Tokens [begin, end) (< Mp; rows from M on are zeros) into their parts'
 * tiles: token t's pair kk of chunk c is 4 bytes of row kk, column t % 16. */
static void pack_x(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const job *J = arg;
  const int64_t chunks = J->Kp / 32;
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(16));
  for (int64_t t = begin; t < end; t++) {
    const float *xr = J->x + (t < J->M ? t : 0) * J->K; /* rows past M load nothing */
    const int64_t g = t / 16;
    for (int64_t c = 0; c < chunks; c++) {
      const int64_t k0 = c * 32, left = t < J->M ? J->K - k0 : 0;
      const __mmask16 m0 = (__mmask16)(left >= 16 ? 0xFFFF : left > 0 ? (1u << left) - 1 : 0);
      const __mmask16 m1 = (__mmask16)(left >= 32 ? 0xFFFF : left > 16 ? (1u << (left - 16)) - 1 : 0);
      __m512 r0 = _mm512_maskz_loadu_ps(m0, xr + k0), r1 = _mm512_maskz_loadu_ps(m1, xr + k0 + 16);
      for (int p = 0; p < 3; p++) {
        const __m512 h0 = round_bf16(r0), h1 = round_bf16(r1);
        const __m512i pairs = bf16_words(h0, h1);
        uint8_t *tile = J->xp + (size_t)((c * 3 + p) * J->MG + g) * TILE_BYTES + (size_t)(t % 16) * 4;
        _mm512_i32scatter_epi32((void *)tile, rows, pairs, 4);
        r0 = _mm512_sub_ps(r0, h0); /* exact: h is r's leading bits */
        r1 = _mm512_sub_ps(r1, h1);
      }
    }
  }
}

/* Weight rows n0 .. n0 + 31 (zeros from N on), k in [k0, k0 + kc) into
 * wb: per 32 k and weight part, tile rows 0-15 then 16-31. */
static void copy_weights(const job *J, int64_t n0, int64_t k0, int64_t kc, uint8_t *wb) {
  for (int64_t c = 0; c < kc / 32; c++)
    for (int r = 0; r < 32; r++) {
      const int64_t n = n0 + r, k = k0 + 32 * c, left = n < J->N ? J->K - k : 0;
      const __mmask32 m = left >= 32 ? 0xFFFFFFFFu : left > 0 ? (1u << left) - 1 : 0;
      const __m512i v = _mm512_maskz_loadu_epi16(m, J->w + (n < J->N ? n : 0) * J->K + k);
      uint8_t *dst = wb + (size_t)(2 * J->wparts * c + r / 16) * TILE_BYTES + (size_t)(r % 16) * 64;
      if (J->wparts == 1) {
        _mm512_store_si512((void *)dst, v);
        continue;
      }
      const __m512 f0 = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
      const __m512 f1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
      const __m512 h0 = round_bf16(f0), h1 = round_bf16(f1);
      _mm512_store_si512((void *)dst, bf16_words(h0, h1));
      _mm512_store_si512((void *)(dst + 2 * TILE_BYTES), bf16_words(_mm512_sub_ps(f0, h0), _mm512_sub_ps(f1, h1)));
    }
}

static void load_config(void) {
  _Alignas(64) tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

/* Weight blocks of 32 rows [begin, end). */
static void weight_blocks(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const job *J = arg;
  _Alignas(64) uint8_t wb[KC / 32 * 4 * TILE_BYTES];
  const long ystride = (long)(J->Mp * (int64_t)sizeof(float));
  load_config();
  for (int64_t k0 = 0; k0 < J->Kp; k0 += KC) {
    const int64_t kc = J->Kp - k0 < KC ? J->Kp - k0 : KC;
    const uint8_t *xk = J->xp + (size_t)(k0 / 32 * 3 * J->MG) * TILE_BYTES;
    const size_t part = (size_t)J->MG * TILE_BYTES, chunk = 3 * part;
    for (int64_t b = begin; b < end; b++) {
      copy_weights(J, 32 * b, k0, kc, wb);
      for (int64_t g = 0; g < J->MG; g += 2) {
        float *c0 = J->yT + 32 * b * J->Mp + 16 * g, *c1 = c0 + 16 * J->Mp;
        if (k0 == 0)
          __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory");
        else
          __asm__ volatile("tileloadd (%0,%2,1), %%tmm0\n\t"
                           "tileloadd 64(%0,%2,1), %%tmm1\n\t"
                           "tileloadd (%1,%2,1), %%tmm2\n\t"
                           "tileloadd 64(%1,%2,1), %%tmm3"
                           :
                           : "r"(c0), "r"(c1), "r"(ystride)
                           : "memory");
        for (int64_t c = 0; c < kc / 32 * J->wparts; c++) {
          const uint8_t *a = wb + (size_t)(2 * c) * TILE_BYTES;
          const uint8_t *x0 = xk + (size_t)(c / J->wparts) * chunk + (size_t)g * TILE_BYTES;
          /* tmm4, tmm5: weight rows 0-15, 16-31; tmm6, tmm7: tokens g, g + 1 */
          __asm__ volatile("tileloadd (%0,%4,1), %%tmm4\n\t"
                           "tileloadd 1024(%0,%4,1), %%tmm5\n\t"
                           "tileloadd (%1,%4,1), %%tmm6\n\t"
                           "tileloadd 1024(%1,%4,1), %%tmm7\n\t"
                           "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                           "tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
                           "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\t"
                           "tdpbf16ps %%tmm7, %%tmm5, %%tmm3\n\t"
                           "tileloadd (%2,%4,1), %%tmm6\n\t"
                           "tileloadd 1024(%2,%4,1), %%tmm7\n\t"
                           "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                           "tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
                           "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\t"
                           "tdpbf16ps %%tmm7, %%tmm5, %%tmm3\n\t"
                           "tileloadd (%3,%4,1), %%tmm6\n\t"
                           "tileloadd 1024(%3,%4,1), %%tmm7\n\t"
                           "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
                           "tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
                           "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\t"
                           "tdpbf16ps %%tmm7, %%tmm5, %%tmm3"
                           :
                           : "r"(a), "r"(x0), "r"(x0 + part), "r"(x0 + 2 * part), "r"(64L)
                           : "memory");
        }
        __asm__ volatile("tilestored %%tmm0, (%0,%2,1)\n\t"
                         "tilestored %%tmm1, 64(%0,%2,1)\n\t"
                         "tilestored %%tmm2, (%1,%2,1)\n\t"
                         "tilestored %%tmm3, 64(%1,%2,1)"
                         :
                         : "r"(c0), "r"(c1), "r"(ystride)
                         : "memory");
      }
    }
  }
  __asm__ volatile("tilerelease" ::: "memory");
  /* y's columns of these blocks from yT */
  const int64_t n1 = 32 * end < J->N ? 32 * end : J->N;
  for (int64_t t = 0; t < J->M; t++)
    for (int64_t n = 32 * begin; n < n1; n++) J->y[t * J->N + n] = J->yT[n * J->Mp + t];
}

int bgemm_amx(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, const uint16_t *w, rlx_dtype wtype,
              float *y) {
  job J = {.M = M, .N = N, .K = K, .Mp = (M + 31) / 32 * 32, .Np = (N + 31) / 32 * 32, .Kp = (K + 31) / 32 * 32,
           .wparts = wtype == RLX_F16 ? 2 : 1, .x = x, .w = w, .y = y};
  J.MG = J.Mp / 16;
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0) {
    memset(y, 0, (size_t)(M * N) * sizeof *y);
    return 0;
  }
  J.xp = line_alloc((size_t)(3 * J.Mp * J.Kp) * 2);
  J.yT = line_alloc((size_t)(J.Np * J.Mp) * sizeof(float));
  if (!J.xp || !J.yT) {
    free(J.xp);
    free(J.yT);
    return -1;
  }
  /* about 64 KiB of x a packing chunk */
  cpu_parallel_for(ctx, J.Mp, 1 + 16384 / J.Kp, pack_x, &J);
  cpu_parallel_for(ctx, J.Np / 32, 1, weight_blocks, &J);
  free(J.xp);
  free(J.yT);
  return 0;
}

#else

int bgemm_amx_supported(void) { return 0; }

int bgemm_amx(cpu_ctx *ctx, int64_t M, int64_t N, int64_t K, const float *x, const uint16_t *w, rlx_dtype wtype,
              float *y) {
  (void)ctx, (void)M, (void)N, (void)K, (void)x, (void)w, (void)wtype, (void)y;
  return -1;
}

#endif
