/* quant_blocks.h — encode and decode rows of the GGUF block dtypes.
 *
 * Layouts are ggml's (ggml-common.h: block_q4_0 ... block_q8_K), read and
 * written byte by byte, little-endian, so a row here is exactly a row of a
 * GGUF tensor. Dequantization is bit-exact with ggml's dequantize_row_*;
 * quantization is ggml's reference (non-imatrix) quantize_row_*_ref, bit-exact
 * too (it is what llama.cpp writes into model files).
 *
 * A row is n elements, n a multiple of the dtype's block size
 * (ir_dtypes[t].block); its packed size is rlx_dtype_nbytes(t, n).
 */
#ifndef RLX_QUANT_BLOCKS_H
#define RLX_QUANT_BLOCKS_H

#include "rlx.h"
#include "../../ir/ir.h"

#include <stdint.h>

/* blocks (rlx_dtype_nbytes(t, n) bytes) -> dst[n]. Returns 0, or -1 when t
 * is not a block dtype or n is negative or not a multiple of its block. */
int quant_dequantize_row(rlx_dtype t, const void *blocks, float *dst, int64_t n);

/* src[n] -> blocks (rlx_dtype_nbytes(t, n) bytes). Returns 0 or -1 as above.
 * Finite inputs give ggml's bytes; non-finite ones give some blocks, never UB. */
int quant_quantize_row(rlx_dtype t, const float *src, void *blocks, int64_t n);

/* The fp16 at p, little-endian as the blocks store their scales. */
static inline float quant_get_f16(const uint8_t *p) { return ir_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static inline void quant_put_f16(uint8_t *p, float v) {
  const uint16_t h = ir_f32_to_f16(v);
  p[0] = (uint8_t)h;
  p[1] = (uint8_t)(h >> 8);
}

/* The packed sub-block scales of the K-quants, shared by the codecs here
 * and the portable dot products (qdot_scalar.c). */

/* Q4_K / Q5_K (ggml's get_scale_min_k4): 6-bit scale and min of sub-block
 * j (0..7) from the 12 scale bytes q: j < 4 in the low 6 bits of q[j] and
 * q[j + 4]; j >= 4 as nibbles of q[j + 4] plus the top 2 bits of q[j - 4]
 * and q[j]. */
static inline void quant_k4_scale_min(const uint8_t *q, int j, uint8_t *d, uint8_t *m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (uint8_t)((q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4);
    *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
  }
}

/* Q3_K: 6-bit scale j (0..15) minus 32: low 4 bits in s[j % 8] (low nibble
 * for j < 8, high for j >= 8), high 2 bits in s[8 + j % 4] at bit 2 (j / 4). */
static inline int quant_q3_k_scale(const uint8_t *s, int j) {
  const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
  return (lo | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
}

#endif /* RLX_QUANT_BLOCKS_H */
