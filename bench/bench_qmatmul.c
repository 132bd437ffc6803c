/* bench_qmatmul.c — times cpu_DequantMatMul for bench_qmatmul.py (not a test).
 *
 *   bench_qmatmul [--cpu-time] [--slot] [--rotate MIB] [--bf16-math] THREADS RUNS TYPE M K N
 *                 [TYPE M K N ...]
 *     x [M, K] F32 @ w [N, K]^T, w of block dtype TYPE (q4_0, q6_k, ...)
 *     or f16 / bf16. --slot: each weight copy has a prepack slot, as a
 *     model's weights do (packed on the warm-up call, reused: the times
 *     leave out packing); without, prefill shapes pack per call.
 *     --bf16-math: the context has RLX_FLAG_BF16_MATH (BF16 weights'
 *     prefill on vdpbf16ps where it runs, bgemm.h).
 *     Prints per shape: TYPE M K N TABLE COPIES SEC_1 .. SEC_RUNS
 *     (seconds per call). The weights are COPIES distinct copies, used in
 *     turn, totalling >= 128 MiB (--rotate: MIB): each call streams its
 *     weights from beyond the L2, from DRAM where MIB outgrows the L3, as
 *     in a model whose layers do not fit in the caches.
 *   bench_qmatmul [--cpu-time] --pack THREADS RUNS TYPE K N
 *     The load-time repacking of an N x K weight (qpack_new, qpack.h):
 *     "pack TYPE K N FILE_BYTES PACKED_BYTES SEC..".
 *   bench_qmatmul [--cpu-time] --peak THREADS RUNS
 *     The compute ceilings, one thread each on THREADS threads: "fma",
 *     "vnni" and "bf16" lines of SEC.. for FLOPS_PER_RUN (printed) of
 *     independent AVX-512 vfmadd231ps, vpdpbusd and vdpbf16ps (a multiply-
 *     add is 2 operations), 12 accumulators each; a CPU without one of
 *     them prints no line for it.
 *   bench_qmatmul [--cpu-time] --membw THREADS RUNS BYTES
 *     The memory floor over a BYTES buffer: "read SEC.." (every byte
 *     loaded, AVX2 where the CPU has it) and "memcpy SEC.." (BYTES / 2
 *     copied), each pass split over THREADS threads.
 * Each run repeats the call enough times to last >= 50 ms after a warm-up.
 * Times are wall-clock, or with --cpu-time the process's CPU time (for
 * 1-thread runs on a busy machine).
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/qdot.h"
#include "backend/cpu/qpack.h"
#include "backend/cpu/quant_blocks.h"

#include "../tests/cpu_matrix.h"
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

/* Bytes of weight copies a shape rotates through (--rotate MIB): the
 * default outgrows the L2; a decode that reads DRAM as a model's does
 * needs more than the L3. */
static size_t rotate_bytes = 128ull << 20;

static uint32_t seed = 12345u;

/* Random blocks with sane fp16 scales (the level bytes are random); F16 /
 * BF16: values in [-1, 1). */
static void random_blocks(rlx_dtype t, uint8_t *b, int64_t nb) {
  if (t == RLX_F16 || t == RLX_BF16) {
    for (int64_t i = 0; i < nb; i++) {
      const float v = (float)((int)(lcg32_next(&seed) >> 16) - 32768) / 32768.0f;
      const uint16_t h = t == RLX_F16 ? ir_f32_to_f16(v) : ir_f32_to_bf16(v);
      memcpy(b + 2 * i, &h, 2);
    }
    return;
  }
  const int bs = ir_dtypes[t].size;
  for (int64_t i = 0; i < nb * bs; i++) b[i] = (uint8_t)(lcg32_next(&seed) >> 24);
  int off[2] = {-1, -1};
  switch (t) {
  case RLX_Q4_0: case RLX_Q5_0: case RLX_Q8_0: case RLX_Q6_K: case RLX_Q3_K:
    off[0] = t == RLX_Q6_K ? 208 : t == RLX_Q3_K ? 108 : 0;
    break;
  case RLX_Q2_K: off[0] = 80, off[1] = 82; break;
  case RLX_Q8_K: break;
  default: off[0] = 0, off[1] = 2; break;
  }
  for (int64_t i = 0; i < nb; i++) {
    for (int f = 0; f < 2; f++)
      if (off[f] >= 0) quant_put_f16(b + i * bs + off[f], 0.01f);
    if (t == RLX_Q8_K) {
      float d = 0.001f;
      memcpy(b + i * bs, &d, sizeof d);
    }
  }
}

static int with_slot;

/* The weight dtype named type: a block type, f16 or bf16; -1 otherwise. */
static int weight_type(const char *type) {
  for (int i = 0; i < RLX_DTYPE_COUNT; i++)
    if ((ir_dtypes[i].is_block || i == RLX_F16 || i == RLX_BF16) && !strcmp(ir_dtypes[i].name, type)) return i;
  return -1;
}

static int bench_matmul(cpu_ctx *ctx, int runs, const char *type, int64_t M, int64_t K, int64_t N) {
  const int t = weight_type(type);
  if (t < 0 || M < 1 || N < 1 || K < 1 || K % ir_dtypes[t].block) {
    fprintf(stderr, "bench_qmatmul: bad shape %s %lld %lld %lld\n", type, (long long)M,
            (long long)K, (long long)N);
    return 2;
  }
  const size_t wbytes = rlx_dtype_nbytes(t, N * K);
  const int copies = (int)((rotate_bytes + wbytes - 1) / wbytes);
  uint8_t *w = malloc(wbytes * (size_t)copies);
  float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
  gemm_prepack **slots = calloc((size_t)copies, sizeof *slots);
  for (int i = 0; with_slot && slots && i < copies; i++) slots[i] = gemm_prepack_new();
  if (!w || !x || !y || !slots) {
    fprintf(stderr, "bench_qmatmul: out of memory\n");
    return 1;
  }
  random_blocks(t, w, (int64_t)(wbytes / (size_t)ir_dtypes[t].size) * copies);
  for (int64_t i = 0; i < M * K; i++) x[i] = (float)((int)(lcg32_next(&seed) >> 16) - 32768) / 32768.0f;
  cpu_tensor in[2], out;
  set_matrix(&in[0], x, RLX_F32, M, K);
  set_matrix(&out, y, RLX_F32, M, N);
  ir_node node;
  memset(&node, 0, sizeof node);
  node.op = RLX_OP_DequantMatMul;
  int c = 0;
#define CALL()                                                     \
  do {                                                             \
    set_matrix(&in[1], w + wbytes * (size_t)c, (rlx_dtype)t, N, K); \
    in[1].prepack = slots[c];                                      \
    c = (c + 1) % copies;                                          \
    cpu_DequantMatMul(ctx, &node, in, &out);                       \
  } while (0)
  for (int i = 0; i < copies; i++) CALL(); /* warm-up: page faults, pool */
  double t0 = bench_now();
  CALL();
  const int reps = bench_reps(bench_now() - t0);
  printf("%s %lld %lld %lld %s %d", type, (long long)M, (long long)K, (long long)N,
         qdot_best()->name, copies);
  for (int r = 0; r < runs; r++) {
    t0 = bench_now();
    for (int i = 0; i < reps; i++) CALL();
    printf(" %.4e", (bench_now() - t0) / reps);
  }
#undef CALL
  printf("\n");
  fflush(stdout);
  for (int i = 0; i < copies; i++) gemm_prepack_free(slots[i]);
  free(slots);
  free(w);
  free(x);
  free(y);
  return 0;
}

/* ---------------------------------------------------------------- load-time packing */

static int bench_pack(cpu_ctx *ctx, int runs, const char *type, int64_t K, int64_t N) {
  const int t = weight_type(type);
  const size_t pbytes = t < 0 ? 0 : qpack_bytes((rlx_dtype)t, N, K);
  if (!pbytes || !qpack_supported((rlx_dtype)t)) {
    fprintf(stderr, "bench_qmatmul: %s %lld x %lld is not packed on this CPU\n", type, (long long)N, (long long)K);
    return 2;
  }
  const size_t wbytes = rlx_dtype_nbytes((rlx_dtype)t, N * K);
  uint8_t *w = malloc(wbytes);
  if (!w) return 1;
  random_blocks((rlx_dtype)t, w, t == RLX_F16 || t == RLX_BF16 ? N * K : (int64_t)(wbytes / ir_dtypes[t].size));
  qpack_free(qpack_new(ctx, (rlx_dtype)t, w, N, K)); /* warm-up: page faults */
  printf("pack %s %lld %lld %zu %zu", type, (long long)K, (long long)N, wbytes, pbytes);
  for (int r = 0; r < runs; r++) {
    int reps = 0;
    double t0 = bench_now(), el;
    do {
      qpack *p = qpack_new(ctx, (rlx_dtype)t, w, N, K);
      if (!p) return 1;
      qpack_free(p);
      reps++;
    } while ((el = bench_now() - t0) < 0.05);
    printf(" %.4e", el / reps);
  }
  printf("\n");
  free(w);
  return 0;
}

/* ---------------------------------------------------------------- compute ceilings */

#define PEAK_ITERS 2000000
#define PEAK_ACC 12

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* Each: PEAK_ITERS x PEAK_ACC instructions of 16 lanes; returns a value
 * that depends on all of them. */
__attribute__((target("avx512f"))) static float peak_fma(void) {
  __m512 a[PEAK_ACC], m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
  for (int i = 0; i < PEAK_ACC; i++) a[i] = _mm512_set1_ps((float)i);
  for (int it = 0; it < PEAK_ITERS; it++)
    for (int i = 0; i < PEAK_ACC; i++) a[i] = _mm512_fmadd_ps(a[i], m, c);
  for (int i = 1; i < PEAK_ACC; i++) a[0] = _mm512_add_ps(a[0], a[i]);
  return _mm512_reduce_add_ps(a[0]);
}

__attribute__((target("avx512f,avx512vnni"))) static float peak_vnni(void) {
  __m512i a[PEAK_ACC], u = _mm512_set1_epi8(3), v = _mm512_set1_epi8(-2);
  for (int i = 0; i < PEAK_ACC; i++) a[i] = _mm512_set1_epi32(i);
  for (int it = 0; it < PEAK_ITERS; it++)
    for (int i = 0; i < PEAK_ACC; i++) a[i] = _mm512_dpbusd_epi32(a[i], u, v);
  for (int i = 1; i < PEAK_ACC; i++) a[0] = _mm512_add_epi32(a[0], a[i]);
  return (float)_mm512_reduce_add_epi32(a[0]);
}

__attribute__((target("avx512f,avx512bf16"))) static float peak_bf16(void) {
  __m512 a[PEAK_ACC];
  const __m512bh u = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  for (int i = 0; i < PEAK_ACC; i++) a[i] = _mm512_set1_ps((float)i);
  for (int it = 0; it < PEAK_ITERS; it++)
    for (int i = 0; i < PEAK_ACC; i++) a[i] = _mm512_dpbf16_ps(a[i], u, u);
  for (int i = 1; i < PEAK_ACC; i++) a[0] = _mm512_add_ps(a[0], a[i]);
  return _mm512_reduce_add_ps(a[0]);
}
#endif

typedef struct {
  float (*fn)(void);
  float sink[256];
} peak_job;

static void peak_task(void *arg, int64_t b, int64_t e, int thread) {
  peak_job *J = arg;
  for (int64_t i = b; i < e; i++) J->sink[thread & 255] += J->fn();
}

static int bench_peak(cpu_ctx *ctx, int runs, int threads) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  /* name, kernel, multiply-adds per lane per instruction, available */
  const struct {
    const char *name;
    float (*fn)(void);
    int macs;
    int ok;
  } k[] = {{"fma", peak_fma, 1, __builtin_cpu_supports("avx512f")},
           {"vnni", peak_vnni, 4, __builtin_cpu_supports("avx512vnni")},
           {"bf16", peak_bf16, 2, __builtin_cpu_supports("avx512bf16")}};
  peak_job J;
  memset(&J, 0, sizeof J);
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    if (!k[i].ok || !cpu_get_features()->avx512) continue;
    J.fn = k[i].fn;
    const double ops = 2.0 * PEAK_ITERS * PEAK_ACC * 16 * k[i].macs * threads;
    cpu_parallel_for(ctx, threads, 1, peak_task, &J); /* warm-up: clocks, pool */
    printf("%s %.6e", k[i].name, ops);
    for (int r = 0; r < runs; r++) {
      const double t0 = bench_now();
      cpu_parallel_for(ctx, threads, 1, peak_task, &J);
      printf(" %.4e", bench_now() - t0);
    }
    printf("\n");
  }
  fprintf(stderr, "(sink %g)\n", (double)J.sink[0]);
#else
  (void)ctx, (void)runs, (void)threads;
#endif
  return 0;
}

/* ---------------------------------------------------------------- memory floor */

typedef struct {
  const uint8_t *src;
  uint8_t *dst;
  int64_t bytes;
  uint64_t sink[256];
} membw_job;

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, int64_t n) {
  __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
  __m256i c = _mm256_setzero_si256(), d = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(p + i)));
    b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
    c = _mm256_xor_si256(c, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
    d = _mm256_xor_si256(d, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
  }
  a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  uint64_t s = (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
  for (; i < n; i++) s ^= p[i];
  return s;
}
#endif

static uint64_t read_portable(const uint8_t *p, int64_t n) {
  uint64_t s = 0, v;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    memcpy(&v, p + i, 8);
    s ^= v;
  }
  for (; i < n; i++) s ^= p[i];
  return s;
}

static void read_task(void *arg, int64_t b, int64_t e, int thread) {
  membw_job *J = arg;
#if defined(__x86_64__) || defined(__i386__)
  if (cpu_get_features()->avx2_fma) {
    J->sink[thread & 255] ^= read_avx2(J->src + b, e - b);
    return;
  }
#endif
  J->sink[thread & 255] ^= read_portable(J->src + b, e - b);
}

static void copy_task(void *arg, int64_t b, int64_t e, int thread) {
  (void)thread;
  membw_job *J = arg;
  memcpy(J->dst + b, J->src + b, (size_t)(e - b));
}

static int bench_membw(cpu_ctx *ctx, int runs, int64_t bytes) {
  uint8_t *buf = malloc((size_t)bytes);
  if (!buf) return 1;
  for (int64_t i = 0; i < bytes; i++) buf[i] = (uint8_t)i;
  membw_job J = {.src = buf, .dst = buf + bytes / 2, .bytes = bytes};
  const int64_t chunk = 1 << 20;
  for (int mode = 0; mode < 2; mode++) {
    const int64_t n = mode ? bytes / 2 : bytes;
    cpu_task_fn fn = mode ? copy_task : read_task;
    cpu_parallel_for(ctx, n, chunk, fn, &J); /* warm-up */
    printf("%s", mode ? "memcpy" : "read");
    for (int r = 0; r < runs; r++) {
      int reps = 0;
      double t0 = bench_now(), t;
      do {
        cpu_parallel_for(ctx, n, chunk, fn, &J);
        reps++;
      } while ((t = bench_now() - t0) < 0.05);
      printf(" %.4e", t / reps);
    }
    printf("\n");
  }
  uint64_t s = 0;
  for (int i = 0; i < 256; i++) s ^= J.sink[i];
  fprintf(stderr, "(sink %llx)\n", (unsigned long long)s);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  if (bench_flag(&argc, &argv, "--cpu-time")) bench_clock = CLOCK_PROCESS_CPUTIME_ID;
  with_slot = bench_flag(&argc, &argv, "--slot");
  if (bench_flag(&argc, &argv, "--rotate")) {
    const long long mib = argc > 1 ? atoll(argv[1]) : 0;
    if (mib < 1 || mib > (1ll << 20)) {
      fprintf(stderr, "bench_qmatmul: --rotate MIB, 1 .. 2^20\n");
      return 2;
    }
    rotate_bytes = (size_t)mib << 20;
    argv++;
    argc--;
  }
  const int bf16_math = bench_flag(&argc, &argv, "--bf16-math");
  int membw = argc > 1 && !strcmp(argv[1], "--membw"), pack = argc > 1 && !strcmp(argv[1], "--pack");
  const int peak = argc > 1 && !strcmp(argv[1], "--peak");
  if (membw ? argc != 5 : pack ? argc != 7 : peak ? argc != 4 : argc < 7 || (argc - 3) % 4 != 0) {
    fprintf(stderr, "usage: bench_qmatmul [--cpu-time] [--slot] [--rotate MIB] [--bf16-math] THREADS RUNS TYPE M K N\n"
                    "                     [TYPE M K N ...]\n"
                    "       bench_qmatmul [--cpu-time] --pack THREADS RUNS TYPE K N\n"
                    "       bench_qmatmul [--cpu-time] --peak THREADS RUNS\n"
                    "       bench_qmatmul [--cpu-time] --membw THREADS RUNS BYTES\n");
    return 2;
  }
  const int opt = membw || pack || peak;
  int threads = atoi(argv[1 + opt]), runs = atoi(argv[2 + opt]);
  if (threads < 1 || runs < 1 || runs > 1000) {
    fprintf(stderr, "bench_qmatmul: THREADS >= 1, 1 <= RUNS <= 1000\n");
    return 2;
  }
  cpu_ctx *ctx = cpu_ctx_new(threads);
  if (!ctx) return 1;
  if (bf16_math) cpu_ctx_set_flags(ctx, RLX_FLAG_BF16_MATH);
  int rc = 0;
  if (membw) {
    rc = bench_membw(ctx, runs, atoll(argv[4]));
  } else if (peak) {
    rc = bench_peak(ctx, runs, threads);
  } else if (pack) {
    rc = bench_pack(ctx, runs, argv[4], atoll(argv[5]), atoll(argv[6]));
  } else {
    for (int s = 3; s + 3 < argc && !rc; s += 4)
      rc = bench_matmul(ctx, runs, argv[s], atoll(argv[s + 1]), atoll(argv[s + 2]),
                        atoll(argv[s + 3]));
  }
  cpu_ctx_free(ctx);
  return rc;
}
