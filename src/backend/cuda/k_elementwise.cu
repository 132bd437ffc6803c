/* k_elementwise.cu — the one elementwise kernel: an interpreter of the
 * step programs of cu_kernels.h (cu_ew_args), for every elementwise op and every
 * ElementwiseRegion.
 *
 * Why an interpreter and not source generated per region through NVRTC:
 * the programs are short (a region is a handful of steps) and the kernel is
 * bound by memory, so the per-element dispatch over steps costs issue slots
 * the loads leave idle anyway; in exchange there is no run-time compiler in
 * the library (no NVRTC dependency, no compile latency at rlx_compile, no
 * cache of generated modules), every dtype rule lives in one place shared
 * with the unfused ops, and a program is plain data that a CUDA graph
 * captures with the launch. The program travels as a __grid_constant__
 * kernel parameter, so every thread reads it from the constant bank.
 * A general interpreter pays for its generality per element (typed loads
 * through a dtype switch, 64-bit values, index arithmetic), so programs
 * over one float type and contiguous inputs take a float fast path (below)
 * that runs at memory speed; FusedSwiGLU has a kernel of its own.
 *
 * Semantics are the CPU backend's (k_elementwise.c, k_fused.c): each step's
 * value is rounded (floats) or wrapped (integers) to the step's dtype, as
 * the unfused op would store it. Float steps of F16/BF16/F32 compute in
 * F32, F64 steps in F64; integers in int64 with wrap-around.
 */
#include "cu_common.cuh"

#include <type_traits>

/* ---------------------------------------------------------------- scalar math */

__device__ __forceinline__ float ew_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double ew_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float ew_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double ew_fmod(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ float ew_copysign(float a, float b) { return copysignf(a, b); }
__device__ __forceinline__ double ew_copysign(double a, double b) { return copysign(a, b); }

__device__ __forceinline__ long long ew_act_i(int act, long long x) {
  unsigned long long u = (unsigned long long)x;
  switch (act) {
  case RLX_ACT_NEG: return (long long)(0ull - u);
  case RLX_ACT_ABS: return x < 0 ? (long long)(0ull - u) : x;
  case RLX_ACT_SIGN: return (x > 0) - (x < 0);
  case RLX_ACT_SQUARE: return (long long)(u * u);
  case RLX_ACT_RELU: return x < 0 ? 0 : x;
  default: return x;
  }
}

template <typename T> __device__ T ew_bin(int op, T a, T b) {
  switch (op) {
  case RLX_BIN_ADD: return a + b;
  case RLX_BIN_SUB: return a - b;
  case RLX_BIN_MUL: return a * b;
  case RLX_BIN_DIV: return a / b;
  case RLX_BIN_POW: return ew_pow(a, b);
  case RLX_BIN_MAX: return (a != a || b != b) ? a + b : a > b ? a : b;
  case RLX_BIN_MIN: return (a != a || b != b) ? a + b : a < b ? a : b;
  case RLX_BIN_MOD: { /* numpy.mod: the divisor's sign */
    T r = ew_fmod(a, b);
    if (b == (T)0) return r;
    if (r == (T)0) return ew_copysign((T)0, b);
    return ((r < (T)0) != (b < (T)0)) ? r + b : r;
  }
  default: return a;
  }
}

__device__ long long ew_bin_i(int op, long long a, long long b) {
  unsigned long long ua = (unsigned long long)a, ub = (unsigned long long)b;
  switch (op) {
  case RLX_BIN_ADD: return (long long)(ua + ub);
  case RLX_BIN_SUB: return (long long)(ua - ub);
  case RLX_BIN_MUL: return (long long)(ua * ub);
  case RLX_BIN_DIV: {
    if (b == 0) return 0;
    if (b == -1) return (long long)(0ull - ua);
    long long q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }
  case RLX_BIN_MOD: {
    if (b == 0 || b == -1) return 0;
    long long r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
  case RLX_BIN_POW: {
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b % 2) ? -1 : 1) : 0;
    unsigned long long r = 1, x = ua;
    for (long long e = b; e > 0; e /= 2) {
      if (e % 2) r *= x;
      x *= x;
    }
    return (long long)r;
  }
  case RLX_BIN_MAX: return a > b ? a : b;
  case RLX_BIN_MIN: return a < b ? a : b;
  default: return a;
  }
}

template <typename T> __device__ __forceinline__ int ew_cmp(int op, T a, T b) {
  switch (op) {
  case RLX_CMP_EQ: return a == b;
  case RLX_CMP_NE: return a != b;
  case RLX_CMP_LT: return a < b;
  case RLX_CMP_LE: return a <= b;
  case RLX_CMP_GT: return a > b;
  case RLX_CMP_GE: return a >= b;
  default: return 0;
  }
}

/* ---------------------------------------------------------------- values */

/* A value is 64 bits: a double for float dtypes, an int64 otherwise. */
__device__ __forceinline__ double as_f(long long v) { return __longlong_as_double(v); }
__device__ __forceinline__ long long of_f(double v) { return __double_as_longlong(v); }

/* v rounded to the float dtype dt. */
__device__ __forceinline__ double round_to(int dt, double v) {
  switch (dt) {
  case RLX_F32: return (double)(float)v;
  case RLX_F16: return (double)__half2float(__double2half(v));
  case RLX_BF16: return (double)__bfloat162float(__double2bfloat16(v));
  default: return v;
  }
}
__device__ __forceinline__ double round_to_f32(int dt, float v) {
  switch (dt) {
  case RLX_F16: return (double)__half2float(__float2half_rn(v));
  case RLX_BF16: return (double)__bfloat162float(__float2bfloat16_rn(v));
  default: return (double)v;
  }
}

__device__ __forceinline__ long long load_value(const void *p, int dt, int64_t i) {
  return cu_is_float(dt) ? of_f(cu_ld_f(p, dt, i)) : cu_ld_i(p, dt, i);
}

__device__ __forceinline__ void store_value(void *p, int dt, int64_t i, long long v) {
  if (cu_is_float(dt)) cu_st_f(p, dt, i, as_f(v));
  else cu_st_i(p, dt, i, v);
}

/* Converts value v of dtype from to dtype to (Cast's rules). */
__device__ __forceinline__ long long convert(long long v, int from, int to) {
  int ff = cu_is_float(from), tf = cu_is_float(to);
  if (ff && tf) return of_f(round_to(to, as_f(v)));
  if (ff) return to == RLX_BOOL ? (long long)(as_f(v) != 0.0) : cu_f2i_sat(as_f(v), to);
  if (tf) return of_f(round_to(to, (double)v));
  return cu_wrap_i(v, to);
}

/* One step at one element. */
__device__ __forceinline__ long long eval_step(const cu_ew_step &s, long long x, long long y, long long z) {
  const int dt = s.dtype;
  switch (s.kind) {
  case CU_STEP_ACT:
    if (!cu_is_float(s.in_dtype)) return cu_wrap_i(ew_act_i(s.op, x), dt);
    if (dt == RLX_F64) return of_f(cu_act<double>(s.op, as_f(x), s.f0));
    return of_f(round_to_f32(dt, cu_act<float>(s.op, (float)as_f(x), (float)s.f0)));
  case CU_STEP_BIN:
    if (!cu_is_float(s.in_dtype)) return cu_wrap_i(ew_bin_i(s.op, x, y), dt);
    if (dt == RLX_F64) return of_f(ew_bin<double>(s.op, as_f(x), as_f(y)));
    return of_f(round_to_f32(dt, ew_bin<float>(s.op, (float)as_f(x), (float)as_f(y))));
  case CU_STEP_CMP:
    if (!cu_is_float(s.in_dtype)) return ew_cmp<long long>(s.op, x, y);
    return ew_cmp<double>(s.op, as_f(x), as_f(y));
  case CU_STEP_CAST: return convert(x, s.in_dtype, dt);
  case CU_STEP_WHERE: return x != 0 ? y : z;
  case CU_STEP_CLAMP:
    if (!cu_is_float(dt)) { /* lo first, then hi: hi wins when ceil(lo) > floor(hi), as on the CPU */
      long long v = x < s.i0 ? s.i0 : x;
      return v > s.i1 ? s.i1 : v;
    }
    {
      double v = as_f(x); /* comparisons with NaN are false: NaN stays */
      v = v < s.f0 ? s.f0 : v;
      v = v > s.f1 ? s.f1 : v;
      return of_f(round_to(dt, v));
    }
  case CU_STEP_CONST: return s.i0;
  default: return x;
  }
}

/* ---------------------------------------------------------------- the kernel */

/* I: the index type. 32-bit when every index and offset fits (the usual
 * case): the per-dimension divisions of the strided path are then 32-bit,
 * several times cheaper than 64-bit ones. */
template <bool CONTIGUOUS, typename I>
__global__ void __launch_bounds__(CU_THREADS) ew_kernel(const __grid_constant__ cu_ew_args a) {
  cu_pdl_chain();
  const I n = (I)a.numel, step = (I)(gridDim.x * blockDim.x);
  for (I i = (I)(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += step) {
    I off[CU_EW_MAX_IN];
    if (CONTIGUOUS) {
      for (int k = 0; k < a.n_in; k++) off[k] = i;
    } else {
      for (int k = 0; k < a.n_in; k++) off[k] = 0;
      I rest = i;
      for (int d = a.rank - 1; d >= 0; d--) {
        const I dim = (I)a.dims[d], q = rest / dim, idx = rest - q * dim;
        rest = q;
        for (int k = 0; k < a.n_in; k++) off[k] += ((a.half[k] >> d) & 1 ? idx / 2 : idx) * (I)a.stride[k][d];
      }
    }
    long long v[CU_EW_MAX_STEPS];
    for (int j = 0; j < a.n_steps; j++) {
      const cu_ew_step &s = a.s[j];
      long long ops[3] = {0, 0, 0};
      const int8_t refs[3] = {s.a, s.b, s.c};
      const int n_ops = s.kind == CU_STEP_WHERE ? 3 : (s.kind == CU_STEP_BIN || s.kind == CU_STEP_CMP) ? 2
                        : s.kind == CU_STEP_CONST ? 0 : 1;
#pragma unroll
      for (int o = 0; o < 3; o++) {
        if (o >= n_ops) break;
        int r = refs[o];
        ops[o] = r >= 0 ? load_value(a.in[r], a.in_dtype[r], (int64_t)off[r]) : v[-r - 1];
      }
      v[j] = eval_step(s, ops[0], ops[1], ops[2]);
    }
    store_value(a.out, a.out_dtype, (int64_t)i, v[a.n_steps - 1]);
  }
}

/* ---------------------------------------------------------------- the float fast path */

/* Programs whose every input, step and output is one float type E (F32,
 * F16 or BF16), over inputs read at the flat index or broadcast along one
 * dim: the residual adds, scalings, bias adds over channels and
 * activation chains of a model. Values stay in float registers, each step
 * rounded to E as the general path does. Each thread takes 16 bytes of
 * consecutive elements (8 of F16/BF16, 4 of F32) and loads and stores them
 * 16 bytes at a time where every buffer of the program is 16-byte aligned
 * (scalar loads otherwise, and for the last partial vector). Same results
 * as the general kernel, at memory speed. */
#define EW_FAST_BYTES 16

/* cnt (<= V) consecutive elements of E widened to float; vector when whole and aligned. */
template <typename E, int V> __device__ __forceinline__ void ld_run(const E *p, float *v, int cnt, bool vec) {
  if (vec && cnt == V) {
    cu_ld16<E>(p, v);
    return;
  }
#pragma unroll
  for (int k = 0; k < V; k++) v[k] = k < cnt ? cu_fl<E>::ld(p + k) : 0.f;
}
template <typename E, int V> __device__ __forceinline__ void st_run(E *p, const float *v, int cnt, bool vec) {
  if (vec && cnt == V) {
    cu_st16<E>(p, v);
    return;
  }
#pragma unroll
  for (int k = 0; k < V; k++)
    if (k < cnt) cu_fl<E>::st(p + k, v[k]);
}

/* The V values of input k at flat indices i0 .. i0 + V - 1: a run of the
 * input, or its broadcast values, stepping the channel as the index
 * crosses each inner block (no division per element). */
template <typename E, int V>
__device__ __forceinline__ void ld_input(const cu_ew_args &a, int k, uint32_t i0, float *v, int cnt, bool vec) {
  const E *p = (const E *)a.in[k];
  const uint32_t inner = a.bcast_inner[k], outer = a.bcast_outer[k];
  if (!inner) {
    ld_run<E, V>(p + i0, v, cnt, vec);
    return;
  }
  const uint32_t q = i0 / inner;
  uint32_t r = i0 - q * inner, c = q % outer;
#pragma unroll
  for (int e = 0; e < V; e++) {
    v[e] = cu_fl<E>::ld(p + c);
    if (++r == inner) r = 0, c = c + 1 == outer ? 0 : c + 1;
  }
}

/* A linear chain: each step reads program inputs and at most the step
 * just before it, so one register per element carries the value. */
template <typename E> __global__ void __launch_bounds__(CU_THREADS) ew_fast_kernel(const __grid_constant__ cu_ew_args a) {
  constexpr int V = EW_FAST_BYTES / (int)sizeof(E);
  cu_pdl_chain();
  uintptr_t any = (uintptr_t)a.out;
  for (int k = 0; k < a.n_in; k++)
    if (!a.bcast_inner[k]) any |= (uintptr_t)a.in[k];
  const bool vec = (any & 15) == 0;
  const uint32_t n = (uint32_t)a.numel, runs = (n + V - 1) / V, lanes = gridDim.x * blockDim.x;
  for (uint32_t r = blockIdx.x * blockDim.x + threadIdx.x; r < runs; r += lanes) {
    const uint32_t i0 = r * V;
    const int cnt = n - i0 < (uint32_t)V ? (int)(n - i0) : V;
    float acc[V], x[V], y[V];
    for (int j = 0; j < a.n_steps; j++) {
      const cu_ew_step &s = a.s[j];
      if (s.kind == CU_STEP_CONST) {
#pragma unroll
        for (int e = 0; e < V; e++) acc[e] = cu_fl<E>::round((float)__longlong_as_double(s.i0));
        continue;
      }
      if (s.a >= 0) ld_input<E, V>(a, s.a, i0, x, cnt, vec);
      else
#pragma unroll
        for (int e = 0; e < V; e++) x[e] = acc[e];
      if (s.kind == CU_STEP_BIN) {
        if (s.b >= 0) ld_input<E, V>(a, s.b, i0, y, cnt, vec);
        else
#pragma unroll
          for (int e = 0; e < V; e++) y[e] = acc[e];
      }
#pragma unroll
      for (int e = 0; e < V; e++) {
        float r;
        switch (s.kind) {
        case CU_STEP_ACT: r = cu_act<float>(s.op, x[e], (float)s.f0); break;
        case CU_STEP_BIN: r = ew_bin<float>(s.op, x[e], y[e]); break;
        default: { /* CU_STEP_CLAMP */
          const float lo = (float)s.f0, hi = (float)s.f1;
          const float z = x[e] < lo ? lo : x[e];
          r = z > hi ? hi : z;
        }
        }
        acc[e] = cu_fl<E>::round(r);
      }
    }
    st_run<E, V>((E *)a.out + i0, acc, cnt, vec);
  }
}

/* Every flat index and every input offset below 2^31. */
static bool fits_32(const cu_ew_args *a) {
  const int64_t lim = (int64_t)1 << 31;
  if (a->numel >= lim - (int64_t)CU_THREADS * 132 * 32 * EW_FAST_BYTES) return false;
  for (int k = 0; k < a->n_in; k++) {
    int64_t hi = 0;
    for (int d = 0; d < a->rank; d++) hi += (a->dims[d] - 1) * a->stride[k][d];
    if (hi >= lim) return false;
  }
  return true;
}

/* How the fast path reads each input (a's bcast_inner / bcast_outer): at
 * the flat index, or broadcast along all dims but at most one, which it
 * walks with stride 1. False when some input is neither. */
static bool fast_inputs(cu_ew_args *a) {
  for (int k = 0; k < a->n_in; k++) {
    a->bcast_inner[k] = 0, a->bcast_outer[k] = 1;
    if (a->contiguous) continue;
    if (a->half[k]) return false;
    int64_t flat = 1, inner = 1;
    int along = -1; /* the one dim walked, inner: the dims inside it */
    bool is_flat = true, one_dim = true;
    for (int d = a->rank - 1; d >= 0; d--) {
      is_flat &= a->stride[k][d] == flat;
      flat *= a->dims[d];
      if (a->stride[k][d] == 0) {
        if (along < 0) inner *= a->dims[d];
      } else if (a->stride[k][d] == 1 && along < 0) along = d;
      else one_dim = false;
    }
    if (is_flat) continue;
    if (!one_dim) return false;
    a->bcast_inner[k] = (uint32_t)inner;
    a->bcast_outer[k] = along >= 0 ? (uint32_t)a->dims[along] : 1;
  }
  return true;
}

/* The one float type of a program the fast path takes, or -1. */
static int fast_type(const cu_ew_args *a) {
  const int t = a->out_dtype;
  if (t != RLX_F32 && t != RLX_F16 && t != RLX_BF16) return -1;
  for (int k = 0; k < a->n_in; k++)
    if (a->in_dtype[k] != t) return -1;
  for (int j = 0; j < a->n_steps; j++) {
    const cu_ew_step &s = a->s[j];
    if (s.dtype != t || (s.kind != CU_STEP_ACT && s.kind != CU_STEP_BIN && s.kind != CU_STEP_CLAMP &&
                         s.kind != CU_STEP_CONST))
      return -1;
    if (s.kind != CU_STEP_CONST && s.in_dtype != t) return -1;
    /* operands: inputs, or the step just before (one register carries it) */
    if ((s.a < 0 && s.a != -j) || (s.kind == CU_STEP_BIN && s.b < 0 && s.b != -j)) return -1;
    if (s.kind == CU_STEP_CONST && j + 1 < a->n_steps) return -1; /* a constant only as the whole program */
  }
  return t;
}

extern "C" int cu_ew_launch(const cu_ew_args *a, cudaStream_t st) {
  if (a->numel <= 0) return cudaSuccess;
  unsigned blocks = cu_blocks(a->numel, CU_THREADS);
  const bool small = fits_32(a);
  cu_ew_args f = *a;
  const int fast = small && fast_inputs(&f) ? fast_type(a) : -1;
  if (fast >= 0) {
    const int per_thread = EW_FAST_BYTES / (int)rlx_dtype_nbytes((rlx_dtype)fast, 1);
    const unsigned fb = cu_blocks((a->numel + per_thread - 1) / per_thread, CU_THREADS);
    return cu_launch(fast == RLX_F32   ? ew_fast_kernel<float>
                     : fast == RLX_F16 ? ew_fast_kernel<__half>
                                       : ew_fast_kernel<__nv_bfloat16>,
                     fb, CU_THREADS, 0, st, a->pdl, f);
  }
  return cu_launch(a->contiguous ? (small ? ew_kernel<true, uint32_t> : ew_kernel<true, int64_t>)
                                 : (small ? ew_kernel<false, uint32_t> : ew_kernel<false, int64_t>),
                   blocks, CU_THREADS, 0, st, a->pdl, *a);
}

/* ---------------------------------------------------------------- FusedSwiGLU */

/* out[r, j] = silu(x[r, j]) * x[r, n + j] in F32, rounded once to the
 * output type (x F32/F16/BF16; F64 goes through the general program).
 * A thread takes V consecutive j of a row: V = 16 bytes of E, read and
 * (output of type E) written 16 bytes at a time, where n is a multiple of
 * V and the buffers are aligned; V = 1 otherwise. */
template <typename E, typename I, int V>
__global__ void __launch_bounds__(CU_THREADS) swiglu_kernel(const E *x, void *out, int out_dtype, I rows, I n) {
  cu_pdl_chain();
  const I runs = rows * (n / V), step = (I)(gridDim.x * blockDim.x);
  for (I t = (I)(blockIdx.x * blockDim.x + threadIdx.x); t < runs; t += step) {
    const I at = t * V, r = at / n, j = at - r * n;
    const E *row = x + (int64_t)r * 2 * n;
    float g[V], u[V], y[V];
    ld_run<E, V>(row + j, g, V, V > 1);
    ld_run<E, V>(row + n + j, u, V, V > 1);
#pragma unroll
    for (int k = 0; k < V; k++) y[k] = cu_silu_f32<V * sizeof(E) == 16 && sizeof(E) == 2>(g[k]) * u[k];
    if (V > 1) st_run<E, V>((E *)out + at, y, V, true); /* V > 1 only when out is E */
    else cu_st_f32(out, out_dtype, (int64_t)at, y[0]);
  }
}

template <typename E>
static int swiglu_typed(const void *x, void *out, int out_dtype, int64_t rows, int64_t n, int pdl, cudaStream_t st) {
  constexpr int V = EW_FAST_BYTES / (int)sizeof(E);
  const int same = out_dtype == (sizeof(E) == 4 ? RLX_F32 : std::is_same<E, __half>::value ? RLX_F16 : RLX_BF16);
  const bool vec = same && n % V == 0 && (((uintptr_t)x | (uintptr_t)out) & 15) == 0;
  const int64_t runs = rows * n / (vec ? V : 1);
  const unsigned b = cu_blocks(runs, CU_THREADS);
  if (rows * 2 * n < ((int64_t)1 << 31) - (int64_t)CU_THREADS * 132 * 32 * V)
    return cu_launch(vec ? swiglu_kernel<E, uint32_t, V> : swiglu_kernel<E, uint32_t, 1>, b, CU_THREADS, 0, st, pdl,
                     (const E *)x, out, out_dtype, (uint32_t)rows, (uint32_t)n);
  return cu_launch(vec ? swiglu_kernel<E, int64_t, V> : swiglu_kernel<E, int64_t, 1>, b, CU_THREADS, 0, st, pdl,
                   (const E *)x, out, out_dtype, rows, n);
}

extern "C" int cu_swiglu_launch(const void *x, int x_dtype, void *out, int out_dtype, int64_t rows, int64_t n, int pdl,
                                cudaStream_t st) {
  if (rows * n <= 0) return cudaSuccess;
  switch (x_dtype) {
  case RLX_F32: return swiglu_typed<float>(x, out, out_dtype, rows, n, pdl, st);
  case RLX_F16: return swiglu_typed<__half>(x, out, out_dtype, rows, n, pdl, st);
  case RLX_BF16: return swiglu_typed<__nv_bfloat16>(x, out, out_dtype, rows, n, pdl, st);
  default: return cudaErrorInvalidValue;
  }
}
