/* k_norm.cu — LayerNorm, RmsNorm and the fused residual forms
 * (FusedResidualLN / FusedResidualRmsNorm), and Rope.
 *
 * Norms: one block per row; the row value x (+ res) (+ bias) is recomputed
 * from the inputs in each pass instead of being stored (the re-reads hit
 * L1/L2, the output is written once). Layer norm takes the biased variance
 * in a second pass over (v - mean), as the CPU's two-pass moments. F64
 * computes in double, the rest in float. */
#include "cu_common.cuh"

template <typename T> __device__ __forceinline__ T norm_value(const cu_norm_args &a, int64_t at, int64_t j) {
  T v = cu_acc<T>::ld(a.x, a.dtype, at);
  if (a.res) v += cu_acc<T>::ld(a.res, a.dtype, at);
  if (a.bias) v += cu_acc<T>::ld(a.bias, a.dtype, j);
  return v;
}

template <typename T> __global__ void norm_kernel(const __grid_constant__ cu_norm_args a) {
  __shared__ T scratch[32];
  cu_pdl_chain();
  const int64_t base = (int64_t)blockIdx.x * a.len;
  T s = 0;
  for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) {
    T v = norm_value<T>(a, base + j, j);
    s += a.rms ? v * v : v;
  }
  s = cu_block_sum<T>(s, scratch);
  T mean = 0, r;
  if (a.rms) {
    r = (T)1 / cu_sqrt(s / (T)a.len + (T)a.eps);
  } else {
    mean = s / (T)a.len;
    T q = 0;
    for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) {
      T d = norm_value<T>(a, base + j, j) - mean;
      q += d * d;
    }
    q = cu_block_sum<T>(q, scratch);
    r = (T)1 / cu_sqrt(q / (T)a.len + (T)a.eps);
  }
  for (int64_t j = threadIdx.x; j < a.len; j += blockDim.x) {
    T v = norm_value<T>(a, base + j, j);
    T y = (v - mean) * r * cu_acc<T>::ld(a.gamma, a.dtype, j) + cu_acc<T>::ld(a.beta, a.dtype, j);
    cu_acc<T>::st(a.out, a.dtype, base + j, y);
  }
}

/* F32/F16/BF16 rows whose buffers are 16-byte aligned and whose length is
 * a multiple of 16 bytes: the general kernel above pays a dtype switch and
 * a 2-byte load per element and reads the row two or three times (1.2 TB/s
 * on the H200 for 4096-element BF16 rows). Here each thread holds up to
 * NORM_VECS 16-byte vectors of the row in registers: one 16-byte read of
 * x (and res, bias, gamma, beta), one write. Same arithmetic as above. */
#define NORM_VECS 4
/* the kernel's form (template bits, so the per-element work carries no
 * run-time tests): RMS, a residual input, a bias input */
#define NORM_RMS 1
#define NORM_RES 2
#define NORM_BIAS 4

template <typename E, int FORM> __global__ void norm_vec_kernel(const __grid_constant__ cu_norm_args a) {
  constexpr bool rms = FORM & NORM_RMS, has_res = FORM & NORM_RES, has_bias = FORM & NORM_BIAS;
  constexpr int V = 16 / (int)sizeof(E);
  __shared__ float scratch[32];
  cu_pdl_chain();
  const int64_t base = (int64_t)blockIdx.x * a.len;
  const int nv = (int)(a.len / V);
  const E *x = (const E *)a.x + base, *res = has_res ? (const E *)a.res + base : NULL;
  float v[NORM_VECS][V], t[V];
  float s = 0;
#pragma unroll
  for (int k = 0; k < NORM_VECS; k++) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c >= nv) break;
    cu_ld16<E>(x + c * V, v[k]);
    if (has_res) {
      cu_ld16<E>(res + c * V, t);
#pragma unroll
      for (int e = 0; e < V; e++) v[k][e] += t[e];
    }
    if (has_bias) {
      cu_ld16<E>((const E *)a.bias + c * V, t);
#pragma unroll
      for (int e = 0; e < V; e++) v[k][e] += t[e];
    }
#pragma unroll
    for (int e = 0; e < V; e++) s += rms ? v[k][e] * v[k][e] : v[k][e];
  }
  s = cu_block_sum<float>(s, scratch);
  float mean = 0, r;
  if (rms) {
    r = 1.f / sqrtf(s / (float)a.len + (float)a.eps);
  } else {
    mean = s / (float)a.len;
    float q = 0;
#pragma unroll
    for (int k = 0; k < NORM_VECS; k++) {
      if (threadIdx.x + k * blockDim.x >= nv) break;
#pragma unroll
      for (int e = 0; e < V; e++) q += (v[k][e] - mean) * (v[k][e] - mean);
    }
    q = cu_block_sum<float>(q, scratch);
    r = 1.f / sqrtf(q / (float)a.len + (float)a.eps);
  }
#pragma unroll
  for (int k = 0; k < NORM_VECS; k++) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c >= nv) break;
    float gm[V], bt[V];
    cu_ld16<E>((const E *)a.gamma + c * V, gm);
    cu_ld16<E>((const E *)a.beta + c * V, bt);
#pragma unroll
    for (int e = 0; e < V; e++) gm[e] = (v[k][e] - mean) * r * gm[e] + bt[e];
    cu_st16<E>((E *)a.out + base + c * V, gm);
  }
}

template <typename E> static void norm_vec_form(const cu_norm_args *a, int form, int threads, cudaStream_t st) {
  const unsigned rows = (unsigned)a->rows;
  void (*k)(cu_norm_args);
  switch (form) {
  case 0: k = norm_vec_kernel<E, 0>; break;
  case NORM_RMS: k = norm_vec_kernel<E, NORM_RMS>; break;
  case NORM_RES: k = norm_vec_kernel<E, NORM_RES>; break;
  case NORM_RMS | NORM_RES: k = norm_vec_kernel<E, NORM_RMS | NORM_RES>; break;
  case NORM_BIAS: k = norm_vec_kernel<E, NORM_BIAS>; break;
  case NORM_RMS | NORM_BIAS: k = norm_vec_kernel<E, NORM_RMS | NORM_BIAS>; break;
  case NORM_RES | NORM_BIAS: k = norm_vec_kernel<E, NORM_RES | NORM_BIAS>; break;
  default: k = norm_vec_kernel<E, NORM_RMS | NORM_RES | NORM_BIAS>; break;
  }
  cu_launch(k, rows, threads, 0, st, a->pdl, *a);
}

extern "C" int cu_norm_launch(const cu_norm_args *a, cudaStream_t st) {
  if (a->rows <= 0 || a->len <= 0) return cudaSuccess;
  if (a->rows > 0x7fffffff) return cudaErrorInvalidValue;
  const int es = cu_float_bytes(a->dtype);
  const int64_t nv = es ? a->len * es / 16 : 0;
  if (es && a->len * es % 16 == 0 && nv <= NORM_VECS * 1024 && cu_aligned16(a->x) && cu_aligned16(a->res) &&
      cu_aligned16(a->bias) && cu_aligned16(a->gamma) && cu_aligned16(a->beta) && cu_aligned16(a->out)) {
    /* two vectors a thread where that fills the row, up to 1024 threads */
    int threads = (int)((nv + 1) / 2 + 31) / 32 * 32;
    threads = threads < 32 ? 32 : threads > 1024 ? 1024 : threads;
    const int form = (a->rms ? NORM_RMS : 0) | (a->res ? NORM_RES : 0) | (a->bias ? NORM_BIAS : 0);
    if (a->dtype == RLX_F32) norm_vec_form<float>(a, form, threads, st);
    else if (a->dtype == RLX_F16) norm_vec_form<__half>(a, form, threads, st);
    else norm_vec_form<__nv_bfloat16>(a, form, threads, st);
    return cudaGetLastError();
  }
  int threads = a->len >= 2048 ? 512 : a->len >= 512 ? 256 : a->len >= 128 ? 128 : 32;
  return cu_launch(a->dtype == RLX_F64 ? norm_kernel<double> : norm_kernel<float>, (unsigned)a->rows, threads, 0, st,
                   a->pdl, *a);
}

/* ---------------------------------------------------------------- Rope */

/* One thread per (b, s, pair i < n_rot/2 or dim past n_rot, group of hpt
 * heads), looping over its heads: the angle of (position, i) is computed
 * once for the group, in double from positions (large positions need it:
 * theta reaches 1e5 rad), or read from the tables as given. Below F64 the
 * double angle is reduced to [-pi, pi] and its sine and cosine taken in
 * float (errors of an F32 ulp, where the double ones cost as much as the
 * memory traffic of a prefill). A decode step (one position: a few
 * thousand pairs) takes one head a thread, so that its one round trip to
 * memory is spread over as many multiprocessors as it fills; groups of
 * ROPE_HEADS heads where there are more, ROPE_HEADS_WIDE where there are
 * threads to spare (prefill), so fewer angles are computed. I: the index
 * type, int where every element index fits (a 64-bit division costs
 * several times a 32-bit one, and a work item does six). */
#define ROPE_HEADS 4
#define ROPE_HEADS_WIDE 8
/* The part of a joined launch that work item t falls in: x's heads, then
 * x2's (t becomes the index within the part). */
struct rope_part {
  const void *x;
  void *out;
  int64_t H;
};
template <typename I> __device__ __forceinline__ rope_part rope_part_of(const cu_rope_args &a, I &t, I total1) {
  if (t < total1) return rope_part{a.x, a.out, a.H};
  t -= total1;
  return rope_part{a.x2, a.out2, a.H2};
}

template <typename I> __global__ void rope_kernel(const __grid_constant__ cu_rope_args a, int hpt) {
  cu_pdl_chain();
  const I half = (I)(a.n_rot / 2), pass = (I)(a.D - a.n_rot), per_pos = half + pass, D = (I)a.D, S = (I)a.S;
  const I total1 = (I)(a.B * a.S) * per_pos * (((I)a.H + hpt - 1) / hpt);
  const I total = total1 + (I)(a.B * a.S) * per_pos * (((I)a.H2 + hpt - 1) / hpt);
  const I step = (I)gridDim.x * blockDim.x;
  for (I t0 = (I)blockIdx.x * blockDim.x + threadIdx.x; t0 < total; t0 += step) {
    I t = t0;
    const rope_part pt = rope_part_of<I>(a, t, total1);
    const I H = (I)pt.H, groups = (H + hpt - 1) / hpt;
    const I e = t % per_pos, rest = t / per_pos, hg = rest % groups, bs = rest / groups; /* bs = b*S + s */
    const I s = bs % S, b = bs / S;
    const I first = bs * H * D;
    const I h0 = hg * hpt, h1 = h0 + hpt < H ? h0 + hpt : H;
    if (e >= half) { /* a dim past n_rot: copied */
      const I d = (I)a.n_rot + (e - half);
      for (I h = h0; h < h1; h++)
        cu_st_f(pt.out, a.dtype, first + h * D + d, cu_ld_f(pt.x, a.dtype, first + h * D + d));
      continue;
    }
    const I i = e;
    double c, sn;
    if (a.pos) {
      long long p = cu_ld_i(a.pos, a.pos_dtype, a.pos_batched ? b * S + s : s);
      if (a.dtype == RLX_F64) {
        sincos((double)p * pow(a.base, -2.0 * (double)i / (double)a.n_rot) / a.scale, &sn, &c);
      } else {
        float fs, fc;
        cu_rope_sincos((double)p * a.freq[i], &fs, &fc);
        sn = fs, c = fc;
      }
    } else {
      I at = (a.table_batched ? b * S * half : 0) + s * half + i;
      c = cu_ld_f(a.cos, a.table_dtype, at);
      sn = cu_ld_f(a.sin, a.table_dtype, at);
    }
    const I i0 = a.neox ? i : 2 * i, i1 = a.neox ? i + half : 2 * i + 1;
    const float fc = (float)c, fs = (float)sn;
    for (I h = h0; h < h1; h++) {
      const I row = first + h * D;
      if (a.dtype == RLX_F64) {
        double x0 = cu_ld_f(pt.x, a.dtype, row + i0), x1 = cu_ld_f(pt.x, a.dtype, row + i1);
        cu_st_f(pt.out, a.dtype, row + i0, x0 * c - x1 * sn);
        cu_st_f(pt.out, a.dtype, row + i1, x0 * sn + x1 * c);
      } else {
        float x0 = cu_ld_f32(pt.x, a.dtype, row + i0), x1 = cu_ld_f32(pt.x, a.dtype, row + i1);
        cu_st_f32(pt.out, a.dtype, row + i0, cu_rope_rotate(x0, x1, fc, fs, 0));
        cu_st_f32(pt.out, a.dtype, row + i1, cu_rope_rotate(x0, x1, fc, fs, 1));
      }
    }
  }
}

/* NEOX rotation of every dim (n_rot = D) from positions, F32/F16/BF16 rows
 * aligned to 16 bytes with D / 2 a multiple of 16 bytes: the prefill case.
 * A thread takes V consecutive pairs (16 bytes of each half of a head) of
 * ROPE_VEC_HEADS heads: its V angles once, all heads' raw 16-byte vectors
 * loaded before the first store (x and out may be one buffer, so the
 * compiler cannot move the loads of the next head above the stores of this
 * one). The angles' frequencies come from the lowering's table (a.freq);
 * the rest is rope_kernel's arithmetic. */
#define ROPE_VEC_HEADS 4
template <typename E> __global__ void __launch_bounds__(CU_THREADS) rope_vec_kernel(const __grid_constant__ cu_rope_args a) {
  constexpr int V = 16 / (int)sizeof(E);
  const int half = (int)(a.D / 2), chunks = half / V;
  const int64_t total1 = a.B * a.S * chunks * ((a.H + ROPE_VEC_HEADS - 1) / ROPE_VEC_HEADS);
  const int64_t total = total1 + a.B * a.S * chunks * ((a.H2 + ROPE_VEC_HEADS - 1) / ROPE_VEC_HEADS);
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  cu_pdl_chain();
  for (int64_t t0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t0 < total; t0 += step) {
    int64_t t = t0;
    const rope_part pt = rope_part_of(a, t, total1);
    const int groups = (int)((pt.H + ROPE_VEC_HEADS - 1) / ROPE_VEC_HEADS);
    const int c = (int)(t % chunks);
    const int64_t rest = t / chunks, bs = rest / groups;
    const int h0 = (int)(rest % groups) * ROPE_VEC_HEADS;
    const int nh = pt.H - h0 < ROPE_VEC_HEADS ? (int)(pt.H - h0) : ROPE_VEC_HEADS;
    const int64_t at = (bs * pt.H + h0) * a.D + (int64_t)c * V;
    const uint4 *x = (const uint4 *)((const E *)pt.x + at);
    const int hstep = (int)(a.D * sizeof(E) / 16), hoff = half * (int)sizeof(E) / 16; /* in 16-byte vectors */
    uint4 raw0[ROPE_VEC_HEADS], raw1[ROPE_VEC_HEADS];
#pragma unroll
    for (int hh = 0; hh < ROPE_VEC_HEADS; hh++) {
      if (hh >= nh) break;
      raw0[hh] = __ldg(x + hh * hstep);
      raw1[hh] = __ldg(x + hh * hstep + hoff);
    }
    const long long p = cu_ld_i(a.pos, a.pos_dtype, a.pos_batched ? bs : bs % a.S);
    float sn[V], cs[V];
#pragma unroll
    for (int k = 0; k < V; k++) cu_rope_sincos((double)p * a.freq[c * V + k], &sn[k], &cs[k]);
    E *out = (E *)pt.out + at;
#pragma unroll
    for (int hh = 0; hh < ROPE_VEC_HEADS; hh++) {
      if (hh >= nh) break;
      float x0[V], x1[V], y0[V], y1[V];
      cu_unpack16<E>(raw0[hh], x0);
      cu_unpack16<E>(raw1[hh], x1);
#pragma unroll
      for (int k = 0; k < V; k++) {
        y0[k] = cu_rope_rotate(x0[k], x1[k], cs[k], sn[k], 0);
        y1[k] = cu_rope_rotate(x0[k], x1[k], cs[k], sn[k], 1);
      }
      cu_st16<E>(out + hh * a.D, y0);
      cu_st16<E>(out + hh * a.D + half, y1);
    }
  }
}

extern "C" int cu_rope_launch(const cu_rope_args *a, cudaStream_t st) {
  const int es = cu_float_bytes(a->dtype);
  if (es && a->pos && a->neox && a->n_rot == a->D && a->D / 2 * es % 16 == 0 && a->B * a->S * a->H > 0 &&
      (((uintptr_t)a->x | (uintptr_t)a->out | (uintptr_t)a->x2 | (uintptr_t)a->out2) & 15) == 0) {
    const int64_t work = a->B * a->S * (a->D / 2 * es / 16) *
                         ((a->H + ROPE_VEC_HEADS - 1) / ROPE_VEC_HEADS + (a->H2 + ROPE_VEC_HEADS - 1) / ROPE_VEC_HEADS);
    const unsigned blocks = cu_blocks(work, CU_THREADS);
    return cu_launch(a->dtype == RLX_F32   ? rope_vec_kernel<float>
                     : a->dtype == RLX_F16 ? rope_vec_kernel<__half>
                                           : rope_vec_kernel<__nv_bfloat16>,
                     blocks, CU_THREADS, 0, st, a->pdl, *a);
  }
  const int64_t per_pos = a->B * a->S * (a->D - a->n_rot / 2);
  /* a head a thread while that is at most a block per multiprocessor;
   * wide groups where they still leave ~2048 threads per multiprocessor */
  const int hpt = per_pos * (a->H + a->H2) <= 132 * CU_THREADS ? 1
                  : per_pos * ((a->H + ROPE_HEADS_WIDE - 1) / ROPE_HEADS_WIDE) >= 132 * 2048 ? ROPE_HEADS_WIDE
                                                                                              : ROPE_HEADS;
  int64_t total = per_pos * ((a->H + hpt - 1) / hpt + (a->H2 + hpt - 1) / hpt);
  if (total <= 0 || a->H <= 0) return cudaSuccess;
  const int64_t elems = a->B * a->S * (a->H > a->H2 ? a->H : a->H2) * a->D;
  return elems < INT32_MAX && total < INT32_MAX
             ? cu_launch(rope_kernel<int>, cu_blocks(total, CU_THREADS), CU_THREADS, 0, st, a->pdl, *a, hpt)
             : cu_launch(rope_kernel<int64_t>, cu_blocks(total, CU_THREADS), CU_THREADS, 0, st, a->pdl, *a, hpt);
}
