/* qpack_amx.c — the GEMM over packed groups (qpack.h) with AMX int8 tiles,
 * for prefill rows in tiles of 16; built with the AVX-512 flags (the
 * scaling is AVX-512), the tile instructions written as inline assembly
 * (no compiler flag for them); reached only where cpu_amx_int8() has
 * granted and probed the tiles (qpack_amx_supported).
 *
 * Per group and 32-element block, one tdpbsud multiplies 16 activation
 * rows (A: their 32 levels, read in place from the row-major activation
 * blocks) by the group's 16 weight rows (B: 8 rows of 16 x 4 unsigned
 * levels, qpack.h's register layout, decoded once per group and row chunk
 * into a buffer; Q8_0's packed bytes are B as they are), a 16 x 16 int32
 * tile the AVX-512 code then scales as qpack_avx512.c does a register of
 * sums. A tile's sums reach the vector registers through memory, and a
 * tile register cannot be reloaded before the product that reads it ends:
 * two sets of tiles take turns, so one block's product runs while the
 * block before it is scaled.
 *
 * Q6_K scales each 16-element half of a block on its own, so its tiles
 * take 16 levels: one tdpbusd per half (A: the activation levels + 128,
 * unsigned, as qpack_quantize_row stores them for Q6_K; B: 4 rows of 16 x
 * 4 signed weights 4 (level - 32), q6_k_half), and the super-block's
 * correction for the + 128 is taken out as qpack_avx512.c's q6_k_tile
 * does.
 */
#include "qpack.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__x86_64__)
#include "cpu_features.h"
#include "qpack_avx512.h"

/* Activation rows a pass decodes a group for: their blocks stay in L1/L2
 * while every group of the slice meets them. */
#define CHUNK_ROWS 64
/* Packed weight bytes of a slice: read from memory once, from L2 for
 * every chunk of rows. */
#define SLICE_BYTES (96 * 1024)

typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

/* tmm0 .. tmm3: C (16 x 16 int32); tmm4, tmm6: A (16 rows x `levels`
 * levels, 32 or 16); tmm5, tmm7: B (levels / 4 rows of 16 x 4 levels). */
static void load_config(int levels) {
  _Alignas(64) tile_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) {
    cfg.colsb[t] = (uint16_t)(t == 4 || t == 6 ? levels : 64);
    cfg.rows[t] = (uint8_t)(t == 5 || t == 7 ? levels / 4 : 16);
  }
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

/* Blocks b and b + 1 (Q6_K: halves) into C tiles c0, c1 with the product
 * op (tdpbsud: A signed, B unsigned; tdpbusd the other way): A from 16
 * rows at act0, act1 (stride bytes apart), B from the 64-byte rows at w0,
 * w1. */
#define TILE_PRODUCTS(op, c0, c1, act0, act1, stride, w0, w1)                                                 \
  __asm__ volatile("tilezero %%tmm" #c0 "\n\t"                                                             \
                   "tilezero %%tmm" #c1 "\n\t"                                                             \
                   "tileloadd (%0,%2,1), %%tmm4\n\t"                                                        \
                   "tileloadd (%3,%5,1), %%tmm5\n\t"                                                        \
                   op " %%tmm5, %%tmm4, %%tmm" #c0 "\n\t"                                                  \
                   "tileloadd (%1,%2,1), %%tmm6\n\t"                                                        \
                   "tileloadd (%4,%5,1), %%tmm7\n\t"                                                        \
                   op " %%tmm7, %%tmm6, %%tmm" #c1                                                           \
                   :                                                                                         \
                   : "r"(act0), "r"(act1), "r"((long)(stride)), "r"(w0), "r"(w1), "r"(64L)                  \
                   : "memory")
#define TILE_STORE(c, out) __asm__ volatile("tilestored %%tmm" #c ", (%0,%1,1)" : : "r"(out), "r"(64L) : "memory")

typedef struct {
  rlx_dtype w;
  int nibbles, planes, min, k4, q6;
  size_t qbytes, bb; /* a block's level bytes and all its bytes */
  size_t hb;         /* a K-quant super-block's header bytes */
} family;

AI family family_of(rlx_dtype w) {
  family f = {.w = w, .nibbles = w != RLX_Q8_0, .min = w == RLX_Q4_1 || w == RLX_Q5_1,
              .k4 = w == RLX_Q4_K || w == RLX_Q5_K, .q6 = w == RLX_Q6_K};
  f.planes = w == RLX_Q5_0 || w == RLX_Q5_1 || w == RLX_Q5_K ? 1 : f.q6 ? 2 : 0; /* Q6_K: bits 4 and 5 */
  f.qbytes = w == RLX_Q8_0 ? 512 : 256 + 64 * (size_t)f.planes;
  f.bb = f.qbytes + (f.k4 || f.q6 ? 0 : f.min ? 64 : 32); /* the K-quants' scales: in the header */
  f.hb = f.q6 ? QPACK_Q6_SC : QPACK_K4_HEADER;
  return f;
}

/* Block b of group g: its level bytes (legacy types: scales after them;
 * Q6_K: after the group's heads, qpack.h). */
AI const uint8_t *block_at(const qpack *p, const family *f, int64_t g, int64_t b) {
  const uint8_t *gd = p->data + (size_t)g * p->group_bytes;
  if (!f->k4 && !f->q6) return gd + (size_t)b * f->bb;
  if (f->q6) gd += qpack_q6_heads(p->K);
  return gd + (size_t)(b / 8) * (f->hb + 8 * f->bb) + f->hb + (size_t)(b % 8) * f->bb;
}

/* The B tiles of group g: 512 bytes a block into wb (Q8_0: none). */
AI void decode_group(const qpack *p, const family *f, int64_t g, uint8_t *wb) {
  for (int64_t b = 0; f->nibbles && b < p->K / QDOT_QK; b++) {
    const uint8_t *q = block_at(p, f, g, b);
    if (f->q6) {
      for (int h = 0; h < 2; h++) {
        __m512i w[4];
        q6_k_half(q, h, w);
        for (int t = 0; t < 4; t++) _mm512_store_si512((void *)(wb + 512 * b + 256 * h + 64 * t), w[t]);
      }
      continue;
    }
    for (int t = 0; t < 4; t++) {
      __m512i lo, hi;
      weights_pair(q, 1, q + 256, f->planes, t, &lo, &hi);
      _mm512_store_si512((void *)(wb + 512 * b + 64 * t), lo);
      _mm512_store_si512((void *)(wb + 512 * b + 64 * (t + 4)), hi);
    }
  }
}

/* Scales block b's sums c (16 rows of 16 lanes) into the rows' sums: acc
 * (legacy types; qpack_avx512.c's legacy_tile), or part and, at the end of
 * a super-block, total (Q4_K, Q5_K: k4_tile). */
AI void scale_block(const qpack *p, const family *f, int64_t g, const qdot_q8_0 *act, int64_t nb, int64_t b,
                    const int32_t (*c)[16], __m512 *acc, float (*total)[16]) {
  const uint8_t *q = block_at(p, f, g, b);
  if (f->k4) {
    __m512 dw, mw;
    k4_scales(q - f->hb - (size_t)(b % 8) * f->bb, (int)(b % 8), &dw, &mw);
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) {
      const qdot_q8_0 *a = act + r * nb + b;
      if (b % 8 == 0) acc[r] = _mm512_setzero_ps();
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)c[r])), dw, acc[r]);
      acc[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a->s), acc[r]);
      if (b % 8 == 7)
        _mm512_store_ps(total[r], _mm512_fmadd_ps(acc[r], _mm512_set1_ps(a->d), _mm512_load_ps(total[r])));
    }
    return;
  }
  const __m512 dw = ph16(q + f->qbytes);
#pragma GCC unroll 16
  for (int r = 0; r < 16; r++) {
    const qdot_q8_0 *a = act + r * nb + b;
    const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512((const void *)c[r]));
    if (f->min) {
      acc[r] = _mm512_fmadd_ps(s, _mm512_mul_ps(dw, _mm512_set1_ps(a->d)), acc[r]);
      acc[r] = _mm512_fmadd_ps(ph16(q + f->qbytes + 32), _mm512_set1_ps(a->s), acc[r]);
    } else {
      acc[r] = _mm512_fmadd_ps(_mm512_fmadd_ps(s, _mm512_set1_ps(a->d), _mm512_set1_ps(a->s)), dw, acc[r]);
    }
  }
}

/* Q6_K's block b, its halves' sums c0, c1, into part (acc) and, at the
 * end of a super-block, total (qpack_avx512.c's q6_k_tile). */
AI void scale_q6_k(const qpack *p, const family *f, int64_t g, const qdot_q8_0 *act, int64_t nb, int64_t b,
                   const int32_t (*c0)[16], const int32_t (*c1)[16], __m512 *acc, float (*total)[16]) {
  const uint8_t *sc = block_at(p, f, g, b) - f->hb - (size_t)(b % 8) * f->bb + 32 * (b % 8);
  const uint8_t *head = p->data + (size_t)g * p->group_bytes + (size_t)(b / 8) * QPACK_Q6_HEAD;
  const __m512 d = _mm512_mul_ps(ph16(head), _mm512_set1_ps(0.25f)); /* B: 4 (level - 32) */
  const __m512 dsc0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)sc))));
  const __m512 dsc1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sc + 16)))));
  const __m512 dcorr = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_loadu_si512((const void *)(head + 32))));
#pragma GCC unroll 16
  for (int r = 0; r < 16; r++) {
    if (b % 8 == 0) acc[r] = _mm512_setzero_ps();
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)c0[r])), dsc0, acc[r]);
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)c1[r])), dsc1, acc[r]);
    if (b % 8 == 7)
      _mm512_store_ps(total[r], _mm512_fmadd_ps(_mm512_sub_ps(acc[r], dcorr), _mm512_set1_ps(act[r * nb + b].d),
                                                _mm512_load_ps(total[r])));
  }
}

/* 16 rows of act (row-major, nb blocks a row) against group g into y. */
AI void row_tile(const qpack *p, const family *f, int64_t g, const uint8_t *wb, const qdot_q8_0 *act,
                 float *y, int64_t ldy, int lanes) {
  const int64_t nb = p->K / QDOT_QK;
  const long stride = (long)(nb * (int64_t)sizeof *act);
  _Alignas(64) int32_t c[2][16][16];
  _Alignas(64) float total[16][16];
  __m512 acc[16];
  for (int r = 0; r < 16; r++) {
    acc[r] = _mm512_setzero_ps();
    _mm512_store_ps(total[r], acc[r]);
  }
  /* B of block b: the decoded buffer, or Q8_0's packed levels */
#define B_AT(b) (f->nibbles ? wb + 512 * (b) : block_at(p, f, g, (b)))
#define ISSUE(c0, c1, b) TILE_PRODUCTS("tdpbsud", c0, c1, act[b].qs, act[(b) + 1].qs, stride, B_AT(b), B_AT((b) + 1))
  if (f->q6) { /* a block's two halves in the pair of tiles */
#define ISSUE6(c0, c1, b) TILE_PRODUCTS("tdpbusd", c0, c1, act[b].qs, act[b].qs + 16, stride, wb + 512 * (b), wb + 512 * (b) + 256)
#define SCALE6(c0, c1, b)                                                                                     \
  do {                                                                                                        \
    TILE_STORE(c0, c[0]);                                                                                     \
    TILE_STORE(c1, c[1]);                                                                                     \
    scale_q6_k(p, f, g, act, nb, b, (const int32_t(*)[16])c[0], (const int32_t(*)[16])c[1], acc, total);     \
  } while (0)
    ISSUE6(0, 1, 0); /* nb is a multiple of 8 */
    for (int64_t b = 0; b < nb; b += 2) {
      ISSUE6(2, 3, b + 1);
      SCALE6(0, 1, b);
      if (b + 2 < nb) ISSUE6(0, 1, b + 2);
      SCALE6(2, 3, b + 1);
    }
#undef SCALE6
#undef ISSUE6
  } else {
#define SCALE(c0, c1, b)                                                                                      \
  do {                                                                                                        \
    TILE_STORE(c0, c[0]);                                                                                     \
    TILE_STORE(c1, c[1]);                                                                                     \
    scale_block(p, f, g, act, nb, b, (const int32_t(*)[16])c[0], acc, total);                                \
    scale_block(p, f, g, act, nb, (b) + 1, (const int32_t(*)[16])c[1], acc, total);                          \
  } while (0)
    /* blocks in pairs, two sets of C tiles in turn (nb is even: qpack_amx_supported) */
    ISSUE(0, 1, 0);
    for (int64_t b = 0; b < nb; b += 4) {
      if (b + 2 < nb) ISSUE(2, 3, b + 2);
      SCALE(0, 1, b);
      if (b + 4 < nb) ISSUE(0, 1, b + 4);
      if (b + 2 < nb) SCALE(2, 3, b + 2);
    }
  }
#undef SCALE
#undef ISSUE
#undef B_AT
  const __mmask16 m = (__mmask16)((1u << lanes) - 1);
  for (int r = 0; r < 16; r++) {
    const __m512 v = f->k4 || f->q6 ? _mm512_load_ps(total[r]) : acc[r];
    if (lanes == QPACK_ROWS) _mm512_storeu_ps(y + r * ldy, v);
    else _mm512_mask_storeu_ps(y + r * ldy, m, v);
  }
}

int qpack_amx_supported(rlx_dtype w) {
  int rows;
  return cpu_get_features()->avx512_vnni && qpack_avx512_kernel(w, &rows) && cpu_amx_int8(NULL);
}

/* qpack_amx_groups for weights of dtype w (a constant once inlined). */
AI void amx_groups(const qpack *p, int64_t g0, int64_t g1, const qdot_q8_0 *act, int64_t M, float *y, uint8_t *wb,
                   rlx_dtype w) {
  const family f = family_of(w);
  const int64_t nb = p->K / QDOT_QK;
  int64_t slice = (int64_t)(SLICE_BYTES / p->group_bytes);
  if (slice < 1) slice = 1;
  load_config(f.q6 ? 16 : 32);
  for (int64_t s0 = g0; s0 < g1; s0 += slice) {
    const int64_t s1 = s0 + slice < g1 ? s0 + slice : g1;
    for (int64_t i0 = 0; i0 < M; i0 += CHUNK_ROWS) {
      const int64_t i1 = i0 + CHUNK_ROWS < M ? i0 + CHUNK_ROWS : M;
      for (int64_t g = s0; g < s1; g++) {
        decode_group(p, &f, g, wb);
        const int64_t left = p->N - g * QPACK_ROWS;
        for (int64_t i = i0; i < i1; i += 16)
          row_tile(p, &f, g, wb, act + i * nb, y + i * p->N + g * QPACK_ROWS, p->N,
                   left < QPACK_ROWS ? (int)left : QPACK_ROWS);
      }
    }
  }
  __asm__ volatile("tilerelease" ::: "memory");
}

#define AMX_CASE_(W, A) \
  case W: amx_groups(p, g0, g1, act, M, y, wb, W); break;

void qpack_amx_groups(const qpack *p, int64_t g0, int64_t g1, const qdot_q8_0 *act, int64_t M, float *y,
                      uint8_t *wb) {
  switch (p->dtype) {
    QPACK_DTYPES(AMX_CASE_, 0)
  default: break;
  }
}

#else

int qpack_amx_supported(rlx_dtype w) {
  (void)w;
  return 0;
}

void qpack_amx_groups(const qpack *p, int64_t g0, int64_t g1, const qdot_q8_0 *act, int64_t M, float *y,
                      uint8_t *wb) {
  (void)p, (void)g0, (void)g1, (void)act, (void)M, (void)y, (void)wb;
}

#endif
