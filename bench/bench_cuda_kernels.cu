/* bench_cuda_kernels.cu — the decode products' kernels alone, on the shapes
 * of a Llama-3-8B decode step, against the device's copy bandwidth: what a
 * kernel streams per second, without the rest of an rlx run.
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90 -Iinclude -Isrc bench/bench_cuda_kernels.cu -o bench_cuda_kernels
 *   ./bench_cuda_kernels [gemv|quant [M]|attn|all]
 *
 * gemv: the bf16 w [K, N] GEMV (k_gemv.cu) at the split cu_gemv_plan picks
 *       and at every other split of the sweep, TB/s of weight bytes.
 * quant: the packed-weight products at M rows of x (1 unless given; the
 *       batched decode's products at 2 to 8): the integer path (quantize x,
 *       then cu_qmv; also at 1, 2 and 4 rows a warp where the plan picks
 *       another) and the float kernel (cu_qmm, RLX_QMATMUL_REF=1), TB/s
 *       of weight bytes, and the two results' largest difference relative
 *       to the largest |y| (x's 8-bit levels: about 1e-2 is expected).
 * attn: the split-key decode attention of one decode step at the 8B
 *       shape (1 query row, 32 / 8 heads, D 128, bf16, causal) over
 *       T = 16 .. 32768 cached keys, in both forms (flash_decode, K and V
 *       staged in shared memory; flash_decode_lanes, 8 lanes a key and
 *       nothing staged, which the plan takes for a float cache of up to
 *       1,024 keys), at the plan's keys per split and at others, the
 *       splits merged through global memory and (up to 16 splits) in a
 *       cluster: us a call, and GB/s of K/V bytes against the copy.
 * Weights are random (levels random bytes, block scales a small f16), in
 * enough copies that each timed call reads its weights from HBM, not L2.
 * Times are CUDA-event medians of 9 trials of 20 calls. Prints "COPY",
 * "GEMV" and "QUANT" lines; bench_cuda.py runs it and keeps them. */
#include "../src/backend/cuda/k_gemv.cu"
#include "../src/backend/cuda/k_quant.cu"
#include "../src/backend/cuda/k_quant_gemv.cu"
#include "../src/backend/cuda/k_quant_mma.cu"
#include "../src/backend/cuda/k_attention.cu"
#include "../src/backend/cuda/k_attention_decode.cu"
#include "../src/backend/cuda/k_attention_tc.cu"
#include "../src/backend/cuda/k_attention_f32.cu"

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#define CHECK_CUDA(x)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

__global__ void fill_random(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = (uint8_t)h;
  }
}

/* Sets the f16 fields of every block to small finite scales (0x211f ~ 0.01). */
__global__ void fix_scales(uint8_t *p, size_t blocks, int bb, int off0, int off1) {
  for (size_t b = (size_t)blockIdx.x * blockDim.x + threadIdx.x; b < blocks; b += (size_t)gridDim.x * blockDim.x) {
    *(unsigned short *)(p + b * bb + off0) = 0x211f;
    if (off1 >= 0) *(unsigned short *)(p + b * bb + off1) = 0x1c00;
  }
}

/* Median ms of one call over 9 trials of 20 calls; fn(i) runs call i. */
template <typename F> static double time_ms(F fn) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 5; i++) fn(i);
  std::vector<double> t;
  for (int trial = 0; trial < 9; trial++) {
    CHECK_CUDA(cudaEventRecord(a));
    for (int i = 0; i < 20; i++) fn(i);
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / 20);
  }
  CHECK_CUDA(cudaGetLastError());
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[4];
}

/* Copies of `bytes` of weights, enough that they do not fit in L2 together. */
static std::vector<uint8_t *> weight_copies(size_t bytes, int bb, int off0, int off1) {
  const int n = (int)std::max<size_t>(2, ((size_t)768 << 20) / bytes + 1);
  std::vector<uint8_t *> c(n);
  for (int i = 0; i < n; i++) {
    CHECK_CUDA(cudaMalloc(&c[i], bytes));
    fill_random<<<1024, 256>>>(c[i], bytes, 1234567u + 77u * i);
    if (bb) fix_scales<<<1024, 256>>>(c[i], bytes / bb, bb, off0, off1);
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  return c;
}

static double copy_tbps() {
  const size_t n = (size_t)1 << 30;
  void *a, *b;
  CHECK_CUDA(cudaMalloc(&a, n));
  CHECK_CUDA(cudaMalloc(&b, n));
  CHECK_CUDA(cudaMemset(a, 1, n));
  const double ms = time_ms([&](int) { cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice); });
  cudaFree(a), cudaFree(b);
  return 2.0 * n / (ms * 1e-3) / 1e12;
}

/* A bf16 x of K values (random, ~0.1). */
static void *random_bf16(int64_t K) {
  std::vector<__nv_bfloat16> h(K);
  for (int64_t k = 0; k < K; k++) h[k] = __float2bfloat16((float)((k * 7919 % 1000) / 5000.0 - 0.1));
  void *d;
  CHECK_CUDA(cudaMalloc(&d, K * 2));
  CHECK_CUDA(cudaMemcpy(d, h.data(), K * 2, cudaMemcpyHostToDevice));
  return d;
}

static const int64_t SHAPES[][2] = {{4096, 4096}, {1024, 4096}, {28672, 4096}, {4096, 14336}, {128256, 4096}}; /* N, K */

static void bench_gemv(double copy) {
  for (const auto &s : SHAPES) {
    const int64_t N = s[0], K = s[1];
    const size_t bytes = (size_t)(N * K) * 2;
    auto w = weight_copies(bytes, 0, 0, 0);
    void *x = random_bf16(K), *out;
    CHECK_CUDA(cudaMalloc(&out, N * 2 * 8));
    cu_gemv_args a = {};
    a.x = x, a.dtype = a.w_dtype = RLX_BF16, a.act = RLX_ACT_NONE, a.M = 1, a.K = K, a.nseg = 1;
    a.seg[0].out = out, a.seg[0].N = N;
    size_t pf, cn;
    cu_gemv_plan(&a, &pf, &cn);
    const int planned = a.ksplit;
    std::vector<int> splits = {planned, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
    float *part;
    unsigned *count;
    CHECK_CUDA(cudaMalloc(&part, (size_t)64 * N * 4));
    CHECK_CUDA(cudaMalloc(&count, (size_t)(N / 64 + 1) * 4));
    CHECK_CUDA(cudaMemset(count, 0, (size_t)(N / 64 + 1) * 4));
    for (size_t i = 0; i < splits.size(); i++) {
      const int sp = splits[i];
      if (i > 0 && sp == planned) continue;
      int64_t chunk = (K + sp - 1) / sp;
      chunk = (chunk + 31) / 32 * 32;
      a.kchunk = sp == 1 ? K : chunk;
      a.ksplit = sp == 1 ? 1 : (int)((K + chunk - 1) / chunk);
      cu_gemv_set_scratch(&a, part, count);
      const double ms = time_ms([&](int it) {
        a.seg[0].w = w[it % w.size()];
        cu_gemv_launch(&a, 0);
      });
      const double tbps = bytes / (ms * 1e-3) / 1e12;
      printf("GEMV bf16 N=%lld K=%lld split=%d%s ms=%.4f TBps=%.2f of_copy=%.1f%%\n", (long long)N, (long long)K,
             a.ksplit, i == 0 ? " (planned)" : "", ms, tbps, 100 * tbps / copy);
    }
    for (auto p : w) cudaFree(p);
    cudaFree(x), cudaFree(out), cudaFree(part), cudaFree(count);
  }
  /* q, k and v of a layer, w [4096, 4096 | 1024 | 1024], as one launch of three segments */
  const int64_t K = 4096, Ns[3] = {4096, 1024, 1024};
  std::vector<std::vector<uint8_t *>> ws;
  cu_gemv_args a = {};
  void *x = random_bf16(K);
  a.x = x, a.dtype = a.w_dtype = RLX_BF16, a.act = RLX_ACT_NONE, a.M = 1, a.K = K, a.nseg = 3;
  size_t bytes = 0;
  for (int i = 0; i < 3; i++) {
    ws.push_back(weight_copies((size_t)(Ns[i] * K) * 2, 0, 0, 0));
    CHECK_CUDA(cudaMalloc(&a.seg[i].out, Ns[i] * 2));
    a.seg[i].N = Ns[i];
    bytes += (size_t)(Ns[i] * K) * 2;
  }
  size_t pf, cn;
  cu_gemv_plan(&a, &pf, &cn);
  float *part = NULL;
  unsigned *count = NULL;
  CHECK_CUDA(cudaMalloc(&part, pf * 4 + 4));
  CHECK_CUDA(cudaMalloc(&count, cn * 4 + 4));
  CHECK_CUDA(cudaMemset(count, 0, cn * 4 + 4));
  cu_gemv_set_scratch(&a, pf ? part : NULL, cn ? count : NULL);
  const double ms = time_ms([&](int it) {
    for (int i = 0; i < 3; i++) a.seg[i].w = ws[i][it % ws[i].size()];
    cu_gemv_launch(&a, 0);
  });
  const double tbps = bytes / (ms * 1e-3) / 1e12;
  printf("QKV bf16 one launch of 3 segments (4096+1024+1024)x4096 split=%d MB=%.1f ms=%.4f TBps=%.2f of_copy=%.1f%%\n",
         a.ksplit, bytes / 1e6, ms, tbps, 100 * tbps / copy);
  for (auto &v : ws)
    for (auto p : v) cudaFree(p);
  for (int i = 0; i < 3; i++) cudaFree(a.seg[i].out);
  cudaFree(x), cudaFree(part), cudaFree(count);
}

struct scheme_info {
  int id;
  const char *name;
  int bb, bw, off0, off1; /* block bytes, weights, f16 fields */
};

static void bench_quant(double copy, int64_t M) {
  static const scheme_info schemes[] = {{RLX_Q8_0, "q8_0", 34, 32, 0, -1},
                                        {RLX_Q4_K, "q4_K", 144, 256, 0, 2},
                                        {RLX_Q6_K, "q6_K", 210, 256, 208, -1},
                                        {RLX_Q4_0, "q4_0", 18, 32, 0, -1},
                                        {RLX_Q4_1, "q4_1", 20, 32, 0, 2}};
  for (const auto &q : schemes) {
    for (const auto &s : SHAPES) {
      const int64_t N = s[0], K = s[1];
      const size_t bytes = (size_t)(N * (K / q.bw) * q.bb);
      auto w = weight_copies(bytes, q.bb, q.off0, q.off1);
      void *x = random_bf16(M * K), *qx, *y_int, *y_flt;
      CHECK_CUDA(cudaMalloc(&qx, cu_qx_bytes(M, K)));
      CHECK_CUDA(cudaMalloc(&y_int, M * N * 2));
      CHECK_CUDA(cudaMalloc(&y_flt, M * N * 2));
      cu_quant_x_args xa = {};
      xa.x = x, xa.qx = qx, xa.x_dtype = RLX_BF16, xa.M = M, xa.K = K;
      const double ms_q = time_ms([&](int) { cu_quant_x_launch(&xa, 0); });
      cu_qmv_args qa = {};
      qa.qx = qx, qa.scheme = q.id, qa.out_dtype = RLX_BF16, qa.M = M, qa.K = K, qa.nseg = 1;
      qa.seg[0].out = y_int, qa.seg[0].N = N;
      cu_qmv_plan(&qa);
      const double ms_int = time_ms([&](int it) {
        qa.seg[0].w = w[it % w.size()];
        cu_qmv_launch(&qa, 0);
      });
      const int planned_rpw = qa.rpw;
      for (int rpw : {1, 2, 4}) { /* the integer kernel with other rows a warp than the plan's */
        if (rpw == planned_rpw) continue;
        qa.rpw = rpw;
        const double ms = time_ms([&](int it) {
          qa.seg[0].w = w[it % w.size()];
          cu_qmv_launch(&qa, 0);
        });
        printf("QUANT_RPW %s M=%lld N=%lld K=%lld rows_per_warp=%d (plan %d) int_ms=%.4f int_TBps=%.2f\n", q.name, (long long)M,
               (long long)N, (long long)K, rpw, planned_rpw, ms, bytes / (ms * 1e-3) / 1e12);
      }
      qa.rpw = planned_rpw;
      const double ms_flt = time_ms([&](int it) { cu_qmm_launch(x, RLX_BF16, w[it % w.size()], q.id, y_flt, M, N, K, 0); });
      /* the same weights (copy 0) through both, then compare */
      cu_quant_x_launch(&xa, 0);
      qa.seg[0].w = w[0];
      cu_qmv_launch(&qa, 0);
      cu_qmm_launch(x, RLX_BF16, w[0], q.id, y_flt, M, N, K, 0);
      CHECK_CUDA(cudaDeviceSynchronize());
      std::vector<__nv_bfloat16> hi(M * N), hf(M * N);
      CHECK_CUDA(cudaMemcpy(hi.data(), y_int, M * N * 2, cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(hf.data(), y_flt, M * N * 2, cudaMemcpyDeviceToHost));
      double big = 0, diff = 0;
      for (int64_t n = 0; n < M * N; n++) {
        const double a = __bfloat162float(hi[n]), b = __bfloat162float(hf[n]);
        big = std::max(big, fabs(b));
        diff = a == a ? std::max(diff, fabs(a - b)) : INFINITY;
      }
      const double t_int = bytes / (ms_int * 1e-3) / 1e12, t_flt = bytes / (ms_flt * 1e-3) / 1e12;
      printf("QUANT %s M=%lld N=%lld K=%lld MB=%.1f quantize_x_ms=%.4f int_ms=%.4f int_TBps=%.2f int_of_copy=%.1f%% "
             "float_ms=%.4f float_TBps=%.2f rel_diff=%.2e\n",
             q.name, (long long)M, (long long)N, (long long)K, bytes / 1e6, ms_q, ms_int, t_int, 100 * t_int / copy, ms_flt, t_flt,
             big > 0 ? diff / big : diff);
      for (auto p : w) cudaFree(p);
      cudaFree(x), cudaFree(qx), cudaFree(y_int), cudaFree(y_flt);
    }
    /* q, k and v of a layer (4096 + 1024 + 1024 rows, K 4096) as one launch of three segments */
    const int64_t K = 4096, Ns[3] = {4096, 1024, 1024};
    std::vector<std::vector<uint8_t *>> ws;
    cu_qmv_args qa = {};
    void *x = random_bf16(M * K), *qx;
    CHECK_CUDA(cudaMalloc(&qx, cu_qx_bytes(M, K)));
    cu_quant_x_args xa = {};
    xa.x = x, xa.qx = qx, xa.x_dtype = RLX_BF16, xa.M = M, xa.K = K;
    cu_quant_x_launch(&xa, 0);
    qa.qx = qx, qa.scheme = q.id, qa.out_dtype = RLX_BF16, qa.M = M, qa.K = K, qa.nseg = 3;
    size_t bytes = 0;
    for (int i = 0; i < 3; i++) {
      const size_t b = (size_t)(Ns[i] * (K / q.bw) * q.bb);
      ws.push_back(weight_copies(b, q.bb, q.off0, q.off1));
      CHECK_CUDA(cudaMalloc(&qa.seg[i].out, M * Ns[i] * 2));
      qa.seg[i].N = Ns[i];
      bytes += b;
    }
    cu_qmv_plan(&qa);
    const double ms = time_ms([&](int it) {
      for (int i = 0; i < 3; i++) qa.seg[i].w = ws[i][it % ws[i].size()];
      cu_qmv_launch(&qa, 0);
    });
    const double tbps = bytes / (ms * 1e-3) / 1e12;
    printf("QKV %s M=%lld one launch of 3 segments (4096+1024+1024)x4096 MB=%.1f ms=%.4f TBps=%.2f of_copy=%.1f%%\n", q.name,
           (long long)M, bytes / 1e6, ms, tbps, 100 * tbps / copy);
    for (auto &v : ws)
      for (auto p : v) cudaFree(p);
    for (int i = 0; i < 3; i++) cudaFree(qa.seg[i].out);
    cudaFree(x), cudaFree(qx);
  }
}

/* bf16 values in [-1, 1) from a hash. */
__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, uint32_t seed) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = __float2bfloat16((float)(h & 0xffff) / 32768.f - 1.f);
  }
}

static __nv_bfloat16 *bf16_buffer(size_t n, uint32_t seed) {
  __nv_bfloat16 *p;
  CHECK_CUDA(cudaMalloc(&p, n * 2));
  fill_bf16<<<1024, 256>>>(p, n, seed);
  return p;
}

static void bench_attn(double copy) {
  const int64_t H = 32, Hkv = 8, D = 128;
  for (int64_t T : {16, 64, 128, 256, 450, 512, 1024, 2048, 8192, 32768}) {
    const size_t kvn = (size_t)(T * Hkv * D), kvb = 2 * kvn * 2; /* K and V bytes */
    const int n = (int)std::max<size_t>(4, ((size_t)512 << 20) / kvb + 1);
    std::vector<__nv_bfloat16 *> kc(n), vc(n);
    for (int i = 0; i < n; i++) kc[i] = bf16_buffer(kvn, 11u + i), vc[i] = bf16_buffer(kvn, 911u + i);
    __nv_bfloat16 *q = bf16_buffer((size_t)(H * D), 5u), *out = bf16_buffer((size_t)(H * D), 6u);
    CHECK_CUDA(cudaDeviceSynchronize());
    cu_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = q, a.k = kc[0], a.v = vc[0], a.out = out, a.dtype = RLX_BF16, a.mask_kind = RLX_MASK_CAUSAL;
    a.B = 1, a.S = 1, a.T = T, a.H = H, a.Hkv = Hkv, a.D = D;
    a.q_sb = H * D, a.q_sh = D, a.q_ss = H * D, a.kv_sb = T * Hkv * D, a.kv_sh = D, a.kv_ss = Hkv * D;
    a.scale = 1.0 / sqrt((double)D);
    size_t pf, cn;
    cu_attention_plan(&a, &pf, &cn);
    const int64_t planned = a.keys_per_split;
    const int planned_cluster = a.cluster, planned_lanes = a.lanes;
    const int64_t sweep[] = {planned, 16, 32, 64, 128, 256};
    for (int lanes = 0; lanes < 2; lanes++) /* flash_decode, then flash_decode_lanes */
    for (int si = 0; si < 6; si++)
      for (int cl = 0; cl < 2; cl++) { /* merged through global memory, then in a cluster */
        const int64_t kps = sweep[si];
        if (kps <= 0 || (si > 0 && kps == planned) || (lanes && kps < 32) || (!lanes && kps > DEC_MAX_KEYS)) continue;
        a.lanes = lanes, a.keys_per_split = kps, a.splits = (int)((T + kps - 1) / kps);
        a.cluster = cl ? a.splits : 0;
        if (cl && (a.splits < 2 || a.splits > DEC_MAX_CLUSTER)) continue;
        const size_t smem = dec_launch_smem(&a);
        if (smem > DEC_MAX_SMEM || dec_set_attrs(&a, smem) != cudaSuccess) {
          (void)cudaGetLastError();
          continue;
        }
        float *part;
        unsigned *count;
        /* a state per (head block, split, row): H rows in all; a counter per
         * head block (a.Hkv: H where the plan gave each q head a block) */
        CHECK_CUDA(cudaMalloc(&part, sizeof(float) * (size_t)(H * a.splits * (D + 3))));
        CHECK_CUDA(cudaMalloc(&count, sizeof(unsigned) * a.Hkv));
        CHECK_CUDA(cudaMemset(count, 0, sizeof(unsigned) * a.Hkv));
        a.part = part, a.count = count;
        const double ms = time_ms([&](int i) {
          a.k = kc[i % n], a.v = vc[i % n];
          cu_attention_launch(&a, 0);
        });
        const bool plan = kps == planned && (a.cluster > 0) == (planned_cluster > 0) && lanes == planned_lanes;
        printf("ATTN T=%lld kernel=%s keys_per_split=%lld%s splits=%d merge=%s smem=%zu us=%.2f GBps=%.0f of_copy=%.1f%%\n",
               (long long)T, lanes ? "lanes" : "staged", (long long)kps, plan ? " (plan)" : "", a.splits,
               a.cluster ? "cluster" : "global", smem,
               ms * 1e3, kvb / (ms * 1e-3) / 1e9, 100.0 * kvb / (ms * 1e-3) / 1e12 / copy);
        cudaFree(part), cudaFree(count);
      }
    for (int i = 0; i < n; i++) cudaFree(kc[i]), cudaFree(vc[i]);
    cudaFree(q), cudaFree(out);
  }
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "all";
  const double copy = copy_tbps();
  printf("COPY TBps=%.3f (read + write of a 1 GiB device-to-device copy)\n", copy);
  if (!strcmp(what, "gemv") || !strcmp(what, "all")) bench_gemv(copy);
  if (!strcmp(what, "quant") || !strcmp(what, "all")) bench_quant(copy, argc > 2 ? atoll(argv[2]) : 1);
  if (!strcmp(what, "attn") || !strcmp(what, "all")) bench_attn(copy);
  return 0;
}
