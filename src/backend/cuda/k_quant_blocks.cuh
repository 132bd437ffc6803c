/* k_quant_blocks.cuh — the GGUF block dtypes (Q4_0, Q4_1, Q8_0, Q4_K,
 * Q6_K) decoded a chunk of 32 values at a time: a whole block of Q4_0 /
 * Q4_1 / Q8_0, one of the eight sub-blocks of a Q4_K / Q6_K super-block,
 * a quarter (8 values) per call. Each decoder is ggml's dequantize_row_*
 * (quant_blocks.c) for one chunk, with the same products in the same
 * order. Used by the quantized products (k_quant.cu) and by the attention
 * kernels over a block-typed KV cache (k_attention_decode.cu). */
#ifndef RLX_K_QUANT_BLOCKS_CUH
#define RLX_K_QUANT_BLOCKS_CUH

#include "cu_common.cuh"

/* 8 bytes at p, A-byte aligned (2 or 4), as two little-endian words: two
 * or four loads where byte loads took eight (at M = 1 the products are
 * bound by instruction issue more than by the bytes). The blocks of
 * every scheme keep their fields at the alignments used below, given a
 * 16-byte aligned weight matrix (a param: its own allocation). */
template <int A> __device__ __forceinline__ void ld8b(const uint8_t *p, uint32_t *w) {
  if (A == 4) {
    w[0] = ((const uint32_t *)p)[0], w[1] = ((const uint32_t *)p)[1];
  } else {
    const unsigned short *h = (const unsigned short *)p;
    w[0] = h[0] | (uint32_t)h[1] << 16, w[1] = h[2] | (uint32_t)h[3] << 16;
  }
}
__device__ __forceinline__ int byte_of(const uint32_t *w, int k) { return (int)((w[k >> 2] >> (8 * (k & 3))) & 0xFF); }
/* An f16 at an even address. */
__device__ __forceinline__ float f16_even(const uint8_t *p) { return __half2float(__ushort_as_half(*(const unsigned short *)p)); }

/* The legacy blocks (ggml's block_q4_0, block_q4_1, block_q8_0), 32
 * values each: an f16 scale d (Q4_1: then an f16 min m), then the levels:
 * Q8_0 an int8 a value, Q4_0 / Q4_1 a nibble a value (value j < 16 in the
 * low nibble of level byte j, value j >= 16 in the high nibble of byte
 * j - 16). */
template <int SCHEME> struct legacy_block {
  static constexpr int bytes = SCHEME == RLX_Q4_1 ? 20 : SCHEME == RLX_Q8_0 ? 34 : 18;
  static constexpr int levels_at = SCHEME == RLX_Q4_1 ? 4 : 2; /* offset of the level bytes */
  static __device__ __forceinline__ float min_of(const uint8_t *b) { return SCHEME == RLX_Q4_1 ? f16_even(b + 2) : 0.f; }
  /* The level byte of value j, and whether value j is its high nibble
   * (Q4_0, Q4_1). */
  static __device__ __forceinline__ int byte_index(int j) { return SCHEME == RLX_Q8_0 ? j : j & 15; }
  static __device__ __forceinline__ int high(int j) { return j >= 16; }
  /* A value from its level byte v. */
  static __device__ __forceinline__ float value(int v, int hi, float d, float m) {
    if (SCHEME == RLX_Q8_0) return (float)(int8_t)v * d;
    const int q = hi ? v >> 4 : v & 0x0F;
    return SCHEME == RLX_Q4_1 ? (float)q * d + m : (float)(q - 8) * d;
  }
};

/* Bytes of one row of K weights. */
__host__ __device__ __forceinline__ int64_t row_bytes(int scheme, int64_t K) {
  switch (scheme) {
  case RLX_Q4_0: return K / 32 * legacy_block<RLX_Q4_0>::bytes;
  case RLX_Q4_1: return K / 32 * legacy_block<RLX_Q4_1>::bytes;
  case RLX_Q8_0: return K / 32 * legacy_block<RLX_Q8_0>::bytes;
  case RLX_Q4_K: return K / 256 * 144;
  case RLX_Q6_K: return K / 256 * 210;
  default: return 0;
  }
}

/* Value e of a row of legacy blocks. */
template <int SCHEME> __device__ __forceinline__ float legacy_value_at(const uint8_t *row, int64_t e) {
  typedef legacy_block<SCHEME> L;
  const uint8_t *b = row + (e / 32) * L::bytes;
  const int j = (int)(e % 32);
  return L::value(b[L::levels_at + L::byte_index(j)], L::high(j), f16_even(b), L::min_of(b));
}

/* Weights 8p .. 8p+7 (a quarter, p in 0..3) of chunk c (32 weights) of a
 * row into y: four lanes decode a chunk together in the product below. */
template <int SCHEME> __device__ __forceinline__ void chunk_decode8(const uint8_t *row, int64_t c, int p, float *y) {
  const int l0 = 8 * p;
  uint32_t w[2];
  if (SCHEME == RLX_Q4_0 || SCHEME == RLX_Q4_1 || SCHEME == RLX_Q8_0) {
    typedef legacy_block<SCHEME> L;
    const uint8_t *b = row + c * L::bytes;
    const float d = f16_even(b), m = L::min_of(b);
    ld8b<SCHEME == RLX_Q4_1 ? 4 : 2>(b + L::levels_at + L::byte_index(l0), w); /* the quarter's bytes */
    const int hi = L::high(l0);
#pragma unroll
    for (int j = 0; j < 8; j++) y[j] = L::value(byte_of(w, j), hi, d, m);
  } else if (SCHEME == RLX_Q4_K) {
    /* byte loads of the scales and levels: three words of scales and one
     * of levels per lane measured slower (10.6 against 9.7 ms for an 8B
     * decode step) */
    const uint8_t *b = row + (c / 8) * 144;
    const int j = (int)(c % 8);
    const float d = f16_even(b), dmin = f16_even(b + 2);
    const uint8_t *sc = b + 4;
    int s, m;
    if (j < 4) {
      s = sc[j] & 63;
      m = sc[j + 4] & 63;
    } else {
      s = (sc[j + 4] & 0xF) | (sc[j - 4] >> 6) << 4;
      m = (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
    }
    const float d1 = d * s, m1 = dmin * m;
    const uint8_t *q = b + 16 + 32 * (j / 2) + l0;
    const int hi = j % 2;
#pragma unroll
    for (int l = 0; l < 8; l++) y[l] = d1 * (hi ? q[l] >> 4 : q[l] & 0xF) - m1;
  } else { /* Q6_K */
    const uint8_t *b = row + (c / 8) * 210;
    const int cc = (int)(c % 8), h = cc / 4, qq = cc % 4;
    const float d = f16_even(b + 208);
    uint32_t wh[2];
    ld8b<2>(b + 64 * h + (qq % 2) * 32 + l0, w);
    ld8b<2>(b + 128 + 32 * h + l0, wh);
    const float ds = d * (float)((const int8_t *)(b + 192 + 8 * h))[l0 / 16 + 2 * qq];
    const int shift = 2 * qq;
#pragma unroll
    for (int l = 0; l < 8; l++) {
      const int low = qq < 2 ? byte_of(w, l) & 0xF : byte_of(w, l) >> 4;
      const int q = (low | ((byte_of(wh, l) >> shift) & 3) << 4) - 32;
      y[l] = ds * q;
    }
  }
}

#endif /* RLX_K_QUANT_BLOCKS_CUH */
