/* bench_util.h — what the C benchmarks share: their clock (the wall clock,
 * or with --cpu-time the process's CPU time), how many calls make a timed
 * run, medians, and the 32-bit LCG their random data come from. */
#ifndef RLX_BENCH_UTIL_H
#define RLX_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CLOCK_PROCESS_CPUTIME_ID with --cpu-time: on a machine shared with other
 * work the CPU time of a 1-thread run is what the kernel costs. */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static inline double clock_seconds(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline double bench_now(void) { return clock_seconds(bench_clock); }

/* 1 (and argv[1] taken off) when argv[1] is flag. */
static inline int bench_flag(int *argc, char ***argv, const char *flag) {
  if (*argc < 2 || strcmp((*argv)[1], flag)) return 0;
  ++*argv, --*argc;
  return 1;
}

/* Calls per timed run, from the seconds one call took: enough for >= 50 ms. */
static inline int bench_reps(double once) { return once > 0.05 ? 1 : (int)(0.05 / (once > 1e-7 ? once : 1e-7)) + 1; }

static inline int bench_cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (v sorted in place); 0 when n is 0. */
static inline double bench_median(double *v, int n) {
  if (n < 1) return 0;
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The next state of the LCG of Numerical Recipes. */
static inline uint32_t lcg32_next(uint32_t *state) { return *state = *state * 1664525u + 1013904223u; }

#endif /* RLX_BENCH_UTIL_H */
