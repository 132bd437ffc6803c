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

#include <stdint.h>

/* blocks (rlx_dtype_nbytes(t, n) bytes) -> dst[n]. Returns 0, or -1 when t
 * is not a block dtype or n is negative or not a multiple of its block. */
int quant_dequantize_row(rlx_dtype t, const void *blocks, float *dst, int64_t n);

/* src[n] -> blocks (rlx_dtype_nbytes(t, n) bytes). Returns 0 or -1 as above.
 * Finite inputs give ggml's bytes; non-finite ones give some blocks, never UB. */
int quant_quantize_row(rlx_dtype t, const float *src, void *blocks, int64_t n);

#endif /* RLX_QUANT_BLOCKS_H */
