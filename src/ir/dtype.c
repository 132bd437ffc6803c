/* dtype.c — the dtype table and half-precision conversions. */
#include "ir.h"

#include <math.h>
#include <string.h>

/* name, bytes per element or per block, elements per block, float, int, block.
 * Block layouts follow ggml (ggml-common.h). */
const ir_dtype_info ir_dtypes[RLX_DTYPE_COUNT] = {
  [RLX_F32]  = {"f32", 4, 1, 1, 0, 0},
  [RLX_F16]  = {"f16", 2, 1, 1, 0, 0},
  [RLX_BF16] = {"bf16", 2, 1, 1, 0, 0},
  [RLX_F64]  = {"f64", 8, 1, 1, 0, 0},
  [RLX_I8]   = {"i8", 1, 1, 0, 1, 0},
  [RLX_U8]   = {"u8", 1, 1, 0, 1, 0},
  [RLX_I32]  = {"i32", 4, 1, 0, 1, 0},
  [RLX_I64]  = {"i64", 8, 1, 0, 1, 0},
  [RLX_BOOL] = {"bool", 1, 1, 0, 0, 0},
  [RLX_Q4_0] = {"q4_0", 18, 32, 0, 0, 1},
  [RLX_Q4_1] = {"q4_1", 20, 32, 0, 0, 1},
  [RLX_Q5_0] = {"q5_0", 22, 32, 0, 0, 1},
  [RLX_Q5_1] = {"q5_1", 24, 32, 0, 0, 1},
  [RLX_Q8_0] = {"q8_0", 34, 32, 0, 0, 1},
  [RLX_Q2_K] = {"q2_k", 84, 256, 0, 0, 1},
  [RLX_Q3_K] = {"q3_k", 110, 256, 0, 0, 1},
  [RLX_Q4_K] = {"q4_k", 144, 256, 0, 0, 1},
  [RLX_Q5_K] = {"q5_k", 176, 256, 0, 0, 1},
  [RLX_Q6_K] = {"q6_k", 210, 256, 0, 0, 1},
  [RLX_Q8_K] = {"q8_k", 292, 256, 0, 0, 1},
  [RLX_I16]  = {"i16", 2, 1, 0, 1, 0},
  [RLX_U16]  = {"u16", 2, 1, 0, 1, 0},
  [RLX_U32]  = {"u32", 4, 1, 0, 1, 0},
  [RLX_U64]  = {"u64", 8, 1, 0, 1, 0},
};

const char *rlx_dtype_name(rlx_dtype t) {
  return ir_dtype_valid(t) ? ir_dtypes[t].name : "?";
}

int rlx_dtype_block_size(rlx_dtype t) { return ir_dtype_valid(t) ? ir_dtypes[t].block : 0; }

size_t rlx_dtype_nbytes(rlx_dtype t, int64_t numel) {
  if (!ir_dtype_valid(t) || !ir_size_ok(numel)) return 0;
  const ir_dtype_info *d = &ir_dtypes[t];
  if (numel % d->block) return 0;
  int64_t bytes = ir_size_mul(numel / d->block, d->size);
  return ir_size_ok(bytes) ? (size_t)bytes : 0;
}

int ir_dtype_from_name(const char *s, size_t len) {
  for (int t = 0; t < RLX_DTYPE_COUNT; t++)
    if (strlen(ir_dtypes[t].name) == len && memcmp(ir_dtypes[t].name, s, len) == 0) return t;
  return -1;
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float ir_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));  /* inf / nan */
  if (exp == 0) {
    if (man == 0) return bits_f32(sign);
    /* subnormal: value = man * 2^-24 */
    float v = (float)man * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t ir_f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t absu = u & 0x7fffffffu;
  if (absu >= 0x7f800000u) /* inf or nan (keep nan quiet) */
    return (uint16_t)(sign | 0x7c00 | (absu > 0x7f800000u ? 0x200 | ((absu >> 13) & 0x3ff) : 0));
  if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);  /* rounds to >= 65520: inf */
  if (absu < 0x38800000u) {                                   /* below the smallest normal */
    /* subnormal half: round(|f| * 2^24) to nearest even, via float arithmetic */
    float a = bits_f32(absu);
    float scaled = a * 16777216.0f;  /* exact: power of two */
    uint32_t m = (uint32_t)scaled;
    float rem = scaled - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) m++;
    return (uint16_t)(sign | m);
  }
  uint32_t exp = ((absu >> 23) - 112) << 10;
  uint32_t man = (absu >> 13) & 0x3ff;
  uint32_t rest = absu & 0x1fff;
  uint32_t h = exp | man;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;  /* carries into exp correctly */
  return (uint16_t)(sign | h);
}

float ir_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t ir_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* quiet nan */
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

int rlx_dtype_is_block(rlx_dtype t) { return ir_is_block(t); }
uint16_t rlx_f32_to_f16(float f) { return ir_f32_to_f16(f); }
float rlx_f16_to_f32(uint16_t h) { return ir_f16_to_f32(h); }
uint16_t rlx_f32_to_bf16(float f) { return ir_f32_to_bf16(f); }
float rlx_bf16_to_f32(uint16_t h) { return ir_bf16_to_f32(h); }

double rlx_value_as_f64(rlx_dtype t, const void *data, int64_t i) {
  switch (t) {
  case RLX_F32: return ((const float *)data)[i];
  case RLX_F16: return ir_f16_to_f32(((const uint16_t *)data)[i]);
  case RLX_BF16: return ir_bf16_to_f32(((const uint16_t *)data)[i]);
  case RLX_F64: return ((const double *)data)[i];
  case RLX_I8: return ((const int8_t *)data)[i];
  case RLX_U8: return ((const uint8_t *)data)[i];
  case RLX_I32: return ((const int32_t *)data)[i];
  case RLX_I64: return (double)((const int64_t *)data)[i];
  case RLX_I16: return ((const int16_t *)data)[i];
  case RLX_U16: return ((const uint16_t *)data)[i];
  case RLX_U32: return ((const uint32_t *)data)[i];
  case RLX_U64: return (double)((const uint64_t *)data)[i];
  case RLX_BOOL: return ((const uint8_t *)data)[i] != 0;
  default: return NAN;  /* block dtypes hold no element on its own */
  }
}
