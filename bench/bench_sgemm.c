/* bench_sgemm.c — times cpu_sgemm for bench_sgemm.py (not a test).
 *
 *   bench_sgemm [--cpu-time] [--peer LIBBLAS] THREADS RUNS M K N [M K N ...]
 *
 * For each shape C[M,N] = A[M,K] · B[K,N] (row-major, no transposes, no
 * epilogue, as NumPy's a @ b), prints one line
 *   M K N VARIANT GFLOPS_1 ... GFLOPS_RUNS
 * where each run repeats the call enough times to last >= 50 ms (after one
 * warm-up call) and reports its GFLOP/s. --cpu-time divides by the process's
 * CPU time instead of the wall clock: on a machine shared with other work,
 * and with one thread, that is the kernel's speed when it had the core.
 *
 * --peer LIBBLAS also times that shared library (an OpenBLAS: its
 * openblas_set_num_threads sets THREADS) on the same matrices, through the
 * call NumPy's a @ b makes: cblas_sgemm, or cblas_sgemv (B transposed, as a
 * row-major [K,N] matrix) when M = 1 (NumPy's matmul takes a 1-row left
 * operand as a vector times a matrix). Its runs
 * alternating with rlx's (rlx, peer, rlx, ...: a machine that slows down
 * mid-way slows both alike), and prints after each rlx line
 *   M K N peer GFLOPS_1 ... GFLOPS_RUNS
 * This is how a machine without Debian's NumPy (the device machine) compares
 * against the same OpenBLAS build (dlopen, so the driver needs no BLAS to
 * link or to run without --peer). Each timed run of either side starts
 * after SETTLE_S of sleep: OpenBLAS's workers spin for about 2^28 cycles
 * (0.1 s) after a call, and on a 2-core machine the spinning worker took a
 * core from the rlx run that followed (rlx at 2 threads ran at its 1-thread
 * speed: 512^3 "0.53x"); rlx's workers spin too, for less. With --cpu-time the peer's worker threads,
 * which spin after a call, would be charged to rlx: use it with THREADS 1.
 */
#define _DEFAULT_SOURCE /* madvise, beside the project-wide _POSIX_C_SOURCE */
#include "backend/cpu/gemm.h"
#include "bench_util.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* Matrices of 4 MiB or more on 2 MiB-aligned memory advised to use huge
 * pages, as NumPy allocates its arrays (madvise(MADV_HUGEPAGE) from 4 MiB):
 * a DRAM-bound product streaming 4 KB pages pays TLB misses that NumPy's
 * side of the comparison does not (1x4096x4096 at 0.92x). */
static float *random_matrix(int64_t n, uint32_t *seed) {
  const size_t bytes = (size_t)n * sizeof(float), huge = (size_t)2 << 20;
  float *m = bytes >= 2 * huge ? aligned_alloc(huge, (bytes + huge - 1) / huge * huge) : malloc(bytes);
  if (!m) return NULL;
  if (bytes >= 2 * huge) madvise(m, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);
  for (int64_t i = 0; i < n; i++) {
    m[i] = (float)((double)(lcg32_next(seed) >> 8) / (double)(1u << 24) * 2.0 - 1.0);
  }
  return m;
}

/* cblas_sgemm's signature with the CBLAS enums as ints (row-major 101,
 * no transpose 111). */
typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha,
                               const float *A, int lda, const float *B, int ldb, float beta,
                               float *C, int ldc);
/* cblas_sgemv: y = alpha op(A) x + beta y (transpose 112) */
typedef void (*cblas_sgemv_fn)(int order, int ta, int M, int N, float alpha, const float *A,
                               int lda, const float *x, int incx, float beta, float *y, int incy);

typedef struct {
  cblas_sgemm_fn sgemm; /* NULL: no peer */
  cblas_sgemv_fn sgemv;
  cpu_ctx *ctx;
  int64_t M, N, K;
  const float *A, *B;
  float *C;
} product;

static void call(const product *p, int peer) {
  if (peer && p->M == 1)
    p->sgemv(101, 112, (int)p->K, (int)p->N, 1.0f, p->B, (int)p->N, p->A, 1, 0.0f, p->C, 1);
  else if (peer)
    p->sgemm(101, 111, 111, (int)p->M, (int)p->N, (int)p->K, 1.0f, p->A, (int)p->K, p->B,
             (int)p->N, 0.0f, p->C, (int)p->N);
  else
    cpu_sgemm(p->ctx, 0, 0, p->M, p->N, p->K, p->A, p->K, p->B, p->N, p->C, p->N, NULL);
}

/* Calls per run: enough for >= 50 ms, from one timed call after a warm-up
 * (page faults, pack buffers, the peer's thread start). */
static int reps_for(const product *p, int peer) {
  call(p, peer);
  double t0 = bench_now();
  call(p, peer);
  return bench_reps(bench_now() - t0);
}

/* Sleep between timed runs of the two sides, longer than either's worker
 * threads spin after their last call (see the top). */
#define SETTLE_S 0.2
static void settle(void) {
  struct timespec ts = {0, (long)(SETTLE_S * 1e9)};
  nanosleep(&ts, NULL);
}

static double run_gflops(const product *p, int peer, int reps) {
  if (p->sgemm) settle(); /* alternating with the peer */
  double t0 = bench_now();
  for (int i = 0; i < reps; i++) call(p, peer);
  return 2.0 * (double)p->M * (double)p->N * (double)p->K * reps / (bench_now() - t0) / 1e9;
}

static void print_line(const product *p, const char *who, const double *g, int runs) {
  printf("%lld %lld %lld %s", (long long)p->M, (long long)p->K, (long long)p->N, who);
  for (int r = 0; r < runs; r++) printf(" %.2f", g[r]);
  printf("\n");
}

static int usage(void) {
  fprintf(stderr, "usage: bench_sgemm [--cpu-time] [--peer LIBBLAS] THREADS RUNS M K N [M K N ...]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *peer_lib = NULL;
  for (;;) {
    if (bench_flag(&argc, &argv, "--cpu-time")) {
      bench_clock = CLOCK_PROCESS_CPUTIME_ID;
    } else if (argc > 2 && strcmp(argv[1], "--peer") == 0) {
      peer_lib = argv[2];
      argv += 2;
      argc -= 2;
    } else {
      break;
    }
  }
  if (argc < 6 || (argc - 3) % 3 != 0) return usage();
  int threads = atoi(argv[1]), runs = atoi(argv[2]);
  if (threads < 1 || runs < 1 || runs > 1000) {
    fprintf(stderr, "bench_sgemm: THREADS >= 1, 1 <= RUNS <= 1000\n");
    return 2;
  }
  product p = {NULL, NULL, cpu_ctx_new(threads), 0, 0, 0, NULL, NULL, NULL};
  if (!p.ctx) return 1;
  if (peer_lib) {
    void *lib = dlopen(peer_lib, RTLD_NOW | RTLD_LOCAL);
    void (*set_threads)(int) = NULL;
    if (lib) {
      p.sgemm = (cblas_sgemm_fn)(uintptr_t)dlsym(lib, "cblas_sgemm");
      p.sgemv = (cblas_sgemv_fn)(uintptr_t)dlsym(lib, "cblas_sgemv");
      set_threads = (void (*)(int))(uintptr_t)dlsym(lib, "openblas_set_num_threads");
    }
    if (!p.sgemm || !p.sgemv || !set_threads) {
      fprintf(stderr, "bench_sgemm: %s: no cblas_sgemm / cblas_sgemv / openblas_set_num_threads (%s)\n", peer_lib,
              lib ? "missing symbol" : dlerror());
      return 1;
    }
    set_threads(threads);
  }
  double *g_rlx = malloc((size_t)runs * sizeof *g_rlx), *g_peer = malloc((size_t)runs * sizeof *g_peer);
  if (!g_rlx || !g_peer) return 1;
  uint32_t seed = 12345u;
  for (int s = 3; s + 2 < argc; s += 3) {
    p.M = atoll(argv[s]);
    p.K = atoll(argv[s + 1]);
    p.N = atoll(argv[s + 2]);
    if (p.M < 1 || p.K < 1 || p.N < 1 || (p.sgemm && (p.M > 1 << 30 || p.N > 1 << 30 || p.K > 1 << 30))) {
      fprintf(stderr, "bench_sgemm: sizes must be >= 1 (and fit an int with --peer)\n");
      return 2;
    }
    float *A = random_matrix(p.M * p.K, &seed), *B = random_matrix(p.K * p.N, &seed);
    float *C = malloc((size_t)(p.M * p.N) * sizeof *C);
    if (!A || !B || !C) {
      fprintf(stderr, "bench_sgemm: out of memory\n");
      return 1;
    }
    p.A = A;
    p.B = B;
    p.C = C;
    int reps = reps_for(&p, 0), peer_reps = p.sgemm ? reps_for(&p, 1) : 0;
    for (int r = 0; r < runs; r++) {
      g_rlx[r] = run_gflops(&p, 0, reps);
      if (p.sgemm) g_peer[r] = run_gflops(&p, 1, peer_reps);
    }
    print_line(&p, cpu_gemm_variant(), g_rlx, runs);
    if (p.sgemm) print_line(&p, "peer", g_peer, runs);
    fflush(stdout);
    free(A);
    free(B);
    free(C);
  }
  free(g_rlx);
  free(g_peer);
  cpu_ctx_free(p.ctx);
  return 0;
}
