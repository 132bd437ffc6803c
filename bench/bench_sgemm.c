/* bench_sgemm.c — times cpu_sgemm for bench_sgemm.py (not a test).
 *
 *   bench_sgemm [--cpu-time] THREADS RUNS M K N [M K N ...]
 *
 * For each shape C[M,N] = A[M,K] · B[K,N] (row-major, no transposes, no
 * epilogue, as NumPy's a @ b), prints one line
 *   M K N VARIANT GFLOPS_1 ... GFLOPS_RUNS
 * where each run repeats the call enough times to last >= 50 ms (after one
 * warm-up call) and reports its GFLOP/s. --cpu-time divides by the process's
 * CPU time instead of the wall clock: on a machine shared with other work,
 * and with one thread, that is the kernel's speed when it had the core.
 */
#include "backend/cpu/gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void) {
  struct timespec ts;
  clock_gettime(bench_clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *random_matrix(int64_t n, unsigned *seed) {
  float *m = malloc((size_t)n * sizeof *m);
  if (!m) return NULL;
  for (int64_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    m[i] = (float)((double)(*seed >> 8) / (double)(1u << 24) * 2.0 - 1.0);
  }
  return m;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--cpu-time") == 0) {
    bench_clock = CLOCK_PROCESS_CPUTIME_ID;
    argv++;
    argc--;
  }
  if (argc < 6 || (argc - 3) % 3 != 0) {
    fprintf(stderr, "usage: bench_sgemm [--cpu-time] THREADS RUNS M K N [M K N ...]\n");
    return 2;
  }
  int threads = atoi(argv[1]), runs = atoi(argv[2]);
  if (threads < 1 || runs < 1 || runs > 1000) {
    fprintf(stderr, "bench_sgemm: THREADS >= 1, 1 <= RUNS <= 1000\n");
    return 2;
  }
  cpu_ctx *ctx = cpu_ctx_new(threads);
  if (!ctx) return 1;
  unsigned seed = 12345u;
  for (int s = 3; s + 2 < argc; s += 3) {
    int64_t M = atoll(argv[s]), K = atoll(argv[s + 1]), N = atoll(argv[s + 2]);
    if (M < 1 || K < 1 || N < 1) {
      fprintf(stderr, "bench_sgemm: sizes must be >= 1\n");
      return 2;
    }
    float *A = random_matrix(M * K, &seed), *B = random_matrix(K * N, &seed);
    float *C = malloc((size_t)(M * N) * sizeof *C);
    if (!A || !B || !C) {
      fprintf(stderr, "bench_sgemm: out of memory\n");
      return 1;
    }
    double flops = 2.0 * (double)M * (double)N * (double)K;
    /* warm up (page faults, pack buffers) and size a run to >= 50 ms */
    double t0 = now();
    cpu_sgemm(ctx, 0, 0, M, N, K, A, K, B, N, C, N, NULL);
    double once = now() - t0;
    int reps = once > 0.05 ? 1 : (int)(0.05 / (once > 1e-7 ? once : 1e-7)) + 1;
    printf("%lld %lld %lld %s", (long long)M, (long long)K, (long long)N, cpu_gemm_variant());
    for (int r = 0; r < runs; r++) {
      t0 = now();
      for (int i = 0; i < reps; i++) cpu_sgemm(ctx, 0, 0, M, N, K, A, K, B, N, C, N, NULL);
      printf(" %.2f", flops * reps / (now() - t0) / 1e9);
    }
    printf("\n");
    fflush(stdout);
    free(A);
    free(B);
    free(C);
  }
  cpu_ctx_free(ctx);
  return 0;
}
