/* cpu_util.c — element access with conversion and index helpers shared by
 * the reference kernels. */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Block types are read through quant_blocks (NaN here). */
double cpu_get(const cpu_tensor *t, int64_t i) { return rlx_value_as_f64(t->dtype, t->data, i); }

/* Truncate toward zero and saturate into [lo, hi]; NaN -> 0. */
static int64_t to_int_sat(double v, double lo, double hi) {
  if (isnan(v)) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return hi >= 9223372036854775807.0 ? INT64_MAX : (int64_t)hi;
  return (int64_t)v;
}

/* v rounded to float with round-to-odd: an inexact result gets an odd
 * mantissa, so a second rounding to f16/bf16 (fewer than 22 bits) rounds
 * to nearest even exactly as a direct conversion from double would. */
static float f32_round_odd(double v) {
  float f = (float)v;
  if (isnan(v) || (double)f == v) return f;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if (bits % 2 == 0) f = nextafterf(f, (double)f < v ? INFINITY : -INFINITY);
  return f;
}

void cpu_set(cpu_tensor *t, int64_t i, double v) {
  void *p = t->data;
  switch (t->dtype) {
  case RLX_F32: ((float *)p)[i] = (float)v; break;
  case RLX_F16: ((uint16_t *)p)[i] = ir_f32_to_f16(f32_round_odd(v)); break;
  case RLX_BF16: ((uint16_t *)p)[i] = ir_f32_to_bf16(f32_round_odd(v)); break;
  case RLX_F64: ((double *)p)[i] = v; break;
  case RLX_I8: ((int8_t *)p)[i] = (int8_t)to_int_sat(v, -128, 127); break;
  case RLX_U8: ((uint8_t *)p)[i] = (uint8_t)to_int_sat(v, 0, 255); break;
  case RLX_I32: ((int32_t *)p)[i] = (int32_t)to_int_sat(v, -2147483648.0, 2147483647.0); break;
  case RLX_I64: ((int64_t *)p)[i] = to_int_sat(v, -9223372036854775808.0, 9223372036854775807.0); break;
  case RLX_I16: ((int16_t *)p)[i] = (int16_t)to_int_sat(v, -32768, 32767); break;
  case RLX_U16: ((uint16_t *)p)[i] = (uint16_t)to_int_sat(v, 0, 65535); break;
  case RLX_U32: ((uint32_t *)p)[i] = (uint32_t)to_int_sat(v, 0, 4294967295.0); break;
  case RLX_U64: /* above INT64_MAX the double converts to uint64 directly */
    ((uint64_t *)p)[i] = v >= 9223372036854775808.0 ? (v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v)
                                                     : (uint64_t)to_int_sat(v, 0, 9223372036854775807.0);
    break;
  case RLX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default: break;
  }
}

int64_t cpu_get_i(const cpu_tensor *t, int64_t i) {
  const void *p = t->data;
  switch (t->dtype) {
  case RLX_I8: return ((const int8_t *)p)[i];
  case RLX_U8: return ((const uint8_t *)p)[i];
  case RLX_I32: return ((const int32_t *)p)[i];
  case RLX_I64: return ((const int64_t *)p)[i];
  case RLX_I16: return ((const int16_t *)p)[i];
  case RLX_U16: return ((const uint16_t *)p)[i];
  case RLX_U32: return ((const uint32_t *)p)[i];
  /* the bits as int64: exact for add, sub, mul and the bitwise ops; order
   * and division agree with uint64 below 2^63 */
  case RLX_U64: { uint64_t u = ((const uint64_t *)p)[i]; int64_t k; memcpy(&k, &u, 8); return k; }
  case RLX_BOOL: return ((const uint8_t *)p)[i] != 0;
  default: return to_int_sat(cpu_get(t, i), -9223372036854775808.0, 9223372036854775807.0);
  }
}

void cpu_set_i(cpu_tensor *t, int64_t i, int64_t v) {
  void *p = t->data;
  /* Wrap through unsigned arithmetic (two's complement, no UB). */
  switch (t->dtype) {
  case RLX_I8: ((int8_t *)p)[i] = (int8_t)(uint8_t)(uint64_t)v; break;
  case RLX_U8: ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v; break;
  case RLX_I32: ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
  case RLX_I64: ((int64_t *)p)[i] = v; break;
  case RLX_I16: ((int16_t *)p)[i] = (int16_t)(uint16_t)(uint64_t)v; break;
  case RLX_U16: ((uint16_t *)p)[i] = (uint16_t)(uint64_t)v; break;
  case RLX_U32: ((uint32_t *)p)[i] = (uint32_t)(uint64_t)v; break;
  case RLX_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
  case RLX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default: cpu_set(t, i, (double)v); break;
  }
}

double *cpu_load_f64(const cpu_tensor *t) {
  double *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
  if (!v) {
    rlx_set_error(RLX_ERR_NOMEM, "out of memory (%lld doubles)", (long long)t->numel);
    return NULL;
  }
  for (int64_t i = 0; i < t->numel; i++) v[i] = cpu_get(t, i);
  return v;
}

void cpu_store_f64(cpu_tensor *t, const double *v) {
  for (int64_t i = 0; i < t->numel; i++) cpu_set(t, i, v[i]);
}

float *cpu_load_f32(const cpu_tensor *t) {
  float *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
  if (!v) {
    rlx_set_error(RLX_ERR_NOMEM, "out of memory (%lld floats)", (long long)t->numel);
    return NULL;
  }
  if (t->dtype == RLX_F32) memcpy(v, t->data, (size_t)t->numel * sizeof *v);
  else
    for (int64_t i = 0; i < t->numel; i++) v[i] = (float)cpu_get(t, i);
  return v;
}

void cpu_store_f32(cpu_tensor *t, const float *v) {
  if (t->dtype == RLX_F32) memcpy(t->data, v, (size_t)t->numel * sizeof *v);
  else
    for (int64_t i = 0; i < t->numel; i++) cpu_set(t, i, v[i]);
}

void cpu_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

void cpu_bcast_strides(const cpu_tensor *t, int rank, const int64_t *dims, int64_t *strides) {
  int64_t own[RLX_MAX_RANK];
  cpu_strides(t->rank, t->d, own);
  for (int i = 0; i < rank; i++) {
    int k = t->rank - rank + i;
    strides[i] = (k < 0 || t->d[k] == 1) ? 0 : own[k];
  }
  (void)dims;
}

int64_t cpu_offset(int64_t flat, int rank, const int64_t *dims, const int64_t *strides) {
  int64_t off = 0;
  for (int i = rank - 1; i >= 0; i--) {
    int64_t d = dims[i];
    if (d == 0) return 0;
    off += (flat % d) * strides[i];
    flat /= d;
  }
  return off;
}

void cpu_unravel(int64_t flat, int rank, const int64_t *dims, int64_t *idx) {
  for (int i = rank - 1; i >= 0; i--) {
    int64_t d = dims[i] ? dims[i] : 1;
    idx[i] = flat % d;
    flat /= d;
  }
}

void cpu_axis_split(const cpu_tensor *t, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  int64_t o = 1, in = 1;
  for (int i = 0; i < axis; i++) o *= t->d[i];
  for (int i = axis + 1; i < t->rank; i++) in *= t->d[i];
  *outer = o;
  *len = axis < t->rank ? t->d[axis] : 1;
  *inner = in;
}
