/* bench_qmatmul.c — times cpu_DequantMatMul for bench_qmatmul.py (not a test).
 *
 *   bench_qmatmul [--cpu-time] THREADS RUNS TYPE M K N [TYPE M K N ...]
 *     x [M, K] F32 @ w [N, K]^T, w of block dtype TYPE (q4_0, q6_k, ...).
 *     Prints per shape: TYPE M K N TABLE COPIES SEC_1 .. SEC_RUNS
 *     (seconds per call). The weights are COPIES distinct copies, used in
 *     turn, totalling >= 128 MiB: each call streams its weights from DRAM
 *     as in a model whose layers do not fit in the caches.
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
#include "backend/cpu/qdot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#define ROTATE_BYTES (128ull << 20)

/* CLOCK_PROCESS_CPUTIME_ID with --cpu-time: on a machine shared with other
 * work the CPU time of a 1-thread run is what the kernel costs. */
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void) {
  struct timespec ts;
  clock_gettime(clock_id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint32_t seed = 12345u;
static uint32_t next_u32(void) {
  seed = seed * 1664525u + 1013904223u;
  return seed;
}

static void put_f16(uint8_t *p, float v) {
  uint16_t h = ir_f32_to_f16(v);
  p[0] = (uint8_t)h;
  p[1] = (uint8_t)(h >> 8);
}

/* Random blocks with sane fp16 scales (the level bytes are random). */
static void random_blocks(rlx_dtype t, uint8_t *b, int64_t nb) {
  const int bs = ir_dtypes[t].size;
  for (int64_t i = 0; i < nb * bs; i++) b[i] = (uint8_t)(next_u32() >> 24);
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
      if (off[f] >= 0) put_f16(b + i * bs + off[f], 0.01f);
    if (t == RLX_Q8_K) {
      float d = 0.001f;
      memcpy(b + i * bs, &d, sizeof d);
    }
  }
}

static void set_tensor(cpu_tensor *t, void *data, rlx_dtype dt, int64_t rows, int64_t cols) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->dtype = dt;
  t->rank = 2;
  t->d[0] = rows;
  t->d[1] = cols;
  t->numel = rows * cols;
  t->nbytes = rlx_dtype_nbytes(dt, t->numel);
}

static int bench_matmul(cpu_ctx *ctx, int runs, const char *type, int64_t M, int64_t K, int64_t N) {
  int t = -1;
  for (int i = 0; i < RLX_DTYPE_COUNT; i++)
    if (ir_dtypes[i].is_block && !strcmp(ir_dtypes[i].name, type)) t = i;
  if (t < 0 || M < 1 || N < 1 || K < 1 || K % ir_dtypes[t].block) {
    fprintf(stderr, "bench_qmatmul: bad shape %s %lld %lld %lld\n", type, (long long)M,
            (long long)K, (long long)N);
    return 2;
  }
  const size_t wbytes = rlx_dtype_nbytes(t, N * K);
  const int copies = (int)((ROTATE_BYTES + wbytes - 1) / wbytes);
  uint8_t *w = malloc(wbytes * (size_t)copies);
  float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
  if (!w || !x || !y) {
    fprintf(stderr, "bench_qmatmul: out of memory\n");
    return 1;
  }
  random_blocks(t, w, (int64_t)(wbytes / (size_t)ir_dtypes[t].size) * copies);
  for (int64_t i = 0; i < M * K; i++) x[i] = (float)((int)(next_u32() >> 16) - 32768) / 32768.0f;
  cpu_tensor in[2], out;
  set_tensor(&in[0], x, RLX_F32, M, K);
  set_tensor(&out, y, RLX_F32, M, N);
  ir_node node;
  memset(&node, 0, sizeof node);
  node.op = RLX_OP_DequantMatMul;
  int c = 0;
#define CALL()                                                     \
  do {                                                             \
    set_tensor(&in[1], w + wbytes * (size_t)c, (rlx_dtype)t, N, K); \
    c = (c + 1) % copies;                                          \
    cpu_DequantMatMul(ctx, &node, in, &out);                       \
  } while (0)
  for (int i = 0; i < copies; i++) CALL(); /* warm-up: page faults, pool */
  double t0 = now();
  CALL();
  double once = now() - t0;
  int reps = once > 0.05 ? 1 : (int)(0.05 / (once > 1e-7 ? once : 1e-7)) + 1;
  printf("%s %lld %lld %lld %s %d", type, (long long)M, (long long)K, (long long)N,
         qdot_best()->name, copies);
  for (int r = 0; r < runs; r++) {
    t0 = now();
    for (int i = 0; i < reps; i++) CALL();
    printf(" %.4e", (now() - t0) / reps);
  }
#undef CALL
  printf("\n");
  fflush(stdout);
  free(w);
  free(x);
  free(y);
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
      double t0 = now(), t;
      do {
        cpu_parallel_for(ctx, n, chunk, fn, &J);
        reps++;
      } while ((t = now() - t0) < 0.05);
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
  if (argc > 1 && !strcmp(argv[1], "--cpu-time")) {
    clock_id = CLOCK_PROCESS_CPUTIME_ID;
    argv++;
    argc--;
  }
  int membw = argc > 1 && !strcmp(argv[1], "--membw");
  if (membw ? argc != 5 : argc < 7 || (argc - 3) % 4 != 0) {
    fprintf(stderr, "usage: bench_qmatmul [--cpu-time] THREADS RUNS TYPE M K N [TYPE M K N ...]\n"
                    "       bench_qmatmul [--cpu-time] --membw THREADS RUNS BYTES\n");
    return 2;
  }
  int threads = atoi(argv[1 + membw]), runs = atoi(argv[2 + membw]);
  if (threads < 1 || runs < 1 || runs > 1000) {
    fprintf(stderr, "bench_qmatmul: THREADS >= 1, 1 <= RUNS <= 1000\n");
    return 2;
  }
  cpu_ctx *ctx = cpu_ctx_new(threads);
  if (!ctx) return 1;
  int rc = 0;
  if (membw) {
    rc = bench_membw(ctx, runs, atoll(argv[4]));
  } else {
    for (int s = 3; s + 3 < argc && !rc; s += 4)
      rc = bench_matmul(ctx, runs, argv[s], atoll(argv[s + 1]), atoll(argv[s + 2]),
                        atoll(argv[s + 3]));
  }
  cpu_ctx_free(ctx);
  return rc;
}
