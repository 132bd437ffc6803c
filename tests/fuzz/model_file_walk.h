/* model_file_walk.h — the body of the model-file fuzz harnesses
 * (fuzz_gguf.c, fuzz_safetensors.c; one harness per seed corpus).
 *
 * The bytes are opened as a model file from memory (libFuzzer's buffer is
 * exactly `size` bytes, so ASan sees any read past it). A file that opens
 * is walked completely: every metadata value through every getter,
 * arrays element by element (nested too, within a budget), every tensor
 * found again by name, its data range checked to lie in the buffer, its
 * first and last bytes read, and the first row of each block-typed tensor
 * dequantized. A failed open must leave *out NULL and say why. Any crash,
 * leak, sanitizer report or abort() here is a bug.
 */
#include "rlx.h"
#include "backend/cpu/quant_blocks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned fuzz_sink;

static void walk_value(const rlx_meta_value *v, int64_t *budget) {
  const char *s;
  size_t len;
  uint32_t u32;
  int32_t i32;
  uint64_t u64;
  int64_t i64;
  float f32;
  double f64;
  int b;
  if (--*budget < 0) return;
  if (rlx_meta_as_string(v, &s, &len) == RLX_OK && len) fuzz_sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
  fuzz_sink += (unsigned)rlx_meta_as_u32(v, &u32) + (unsigned)rlx_meta_as_i32(v, &i32) +
               (unsigned)rlx_meta_as_u64(v, &u64) + (unsigned)rlx_meta_as_i64(v, &i64) +
               (unsigned)rlx_meta_as_f32(v, &f32) + (unsigned)rlx_meta_as_f64(v, &f64) +
               (unsigned)rlx_meta_as_bool(v, &b);
  if (v->type != RLX_META_ARRAY) return;
  for (uint64_t i = 0; i < v->count && *budget > 0; i++) {
    rlx_meta_value e;
    if (rlx_meta_elem(v, i, &e) != RLX_OK) abort();  /* every index below count is valid */
    walk_value(&e, budget);
  }
  rlx_meta_value past;
  if (rlx_meta_elem(v, v->count, &past) == RLX_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rlx_model_file *f = (rlx_model_file *)&fuzz_sink;
  if (rlx_model_file_open_memory(data, size, &f) != RLX_OK) {
    if (f || !rlx_last_error()[0]) abort();
    return 0;
  }
  int64_t budget = 20000;
  for (int64_t i = 0; i < rlx_meta_count(f); i++) {
    rlx_meta_value v;
    const char *key = rlx_meta_key(f, i, &v);
    if (!key || rlx_meta_find(f, key) != i) abort();  /* keys are unique and found */
    walk_value(&v, &budget);
  }
  for (int64_t i = 0; i < rlx_model_file_num_tensors(f); i++) {
    rlx_file_tensor t, again;
    if (rlx_model_file_tensor(f, i, &t) != RLX_OK) abort();
    if (rlx_model_file_find_tensor(f, t.name, &again) != RLX_OK || again.offset != t.offset) abort();
    if (t.offset > size || t.nbytes > size - t.offset || (const uint8_t *)t.data != data + t.offset) abort();
    if (t.supported && rlx_dtype_nbytes(t.dtype, t.numel) != t.nbytes) abort();
    if (t.nbytes) fuzz_sink += ((const uint8_t *)t.data)[0] + ((const uint8_t *)t.data)[t.nbytes - 1];
    if (t.supported && rlx_dtype_is_block(t.dtype) && t.numel > 0) {
      int64_t block = rlx_dtype_block_size(t.dtype), n = t.dims[t.rank - 1];
      if (n > 1024) n = 1024 / block * block;
      if (n < block) n = block;
      float row[1024];
      if (quant_dequantize_row(t.dtype, t.data, row, n)) abort();
      uint32_t bits;
      memcpy(&bits, &row[n - 1], sizeof bits);
      fuzz_sink += bits;
    }
  }
  rlx_model_file_close(f);
  return 0;
}
