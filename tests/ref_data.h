/* ref_data.h — what the tests that read data files share, most of them
 * files a reference generator wrote: reading whole files (from a path, or
 * by name from the generator's output folder work_dir), dtype names, and
 * the default tolerances by dtype. */
#ifndef RLX_REF_DATA_H
#define RLX_REF_DATA_H

#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *work_dir;  /* the generator's output folder */

/* The whole file, NUL-terminated (malloc'ed; NULL if unreadable); its
 * length (0 if unreadable) in *len when len is not NULL. */
static inline void *read_file(const char *path, size_t *len) {
  if (len) *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) buf[n] = 0;
  if (buf && len) *len = (size_t)n;
  return buf;
}

/* The file at path if it holds exactly want bytes (malloc'ed), else NULL. */
static inline void *read_file_sized(const char *path, size_t want) {
  size_t len;
  void *p = read_file(path, &len);
  if (p && len != want) {
    free(p);
    p = NULL;
  }
  return p;
}

/* This process's resident set size in bytes (0 if unknown). */
static inline int64_t resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long long size = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%lld %lld", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * sysconf(_SC_PAGESIZE);
}

/* Index of the largest of n floats (the first on ties). */
static inline int64_t argmax_f32(const float *x, int64_t n) {
  int64_t b = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[b]) b = i;
  return b;
}

/* The largest |x| of n floats. */
static inline double max_abs_f32(const float *x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
  return m;
}

/* The largest |a - b| of n floats; NaN when a difference is NaN. */
static inline double max_diff_f32(const float *a, const float *b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= m)) m = d;
  }
  return m;
}

static inline char *work_path(const char *name) {
  static char path[1200];
  snprintf(path, sizeof path, "%s/%s", work_dir, name);
  return path;
}

static inline void *read_work(const char *name, size_t *len) { return read_file(work_path(name), len); }

/* The dtype named `name` ("f32", "q4_k", ...) into *t; 0 if none is. */
static inline int dtype_of(const char *name, rlx_dtype *t) {
  for (int i = 0; i < RLX_DTYPE_COUNT; i++)
    if (!strcmp(rlx_dtype_name((rlx_dtype)i), name)) return *t = (rlx_dtype)i, 1;
  return 0;
}

/* |got - want| <= atol + rtol |want| by dtype: a few ulps of accumulated
 * rounding for floats, exact for integers and bools. */
static inline void default_tolerance(rlx_dtype t, double *atol, double *rtol) {
  switch (t) {
  case RLX_F64: *atol = 1e-9, *rtol = 1e-9; break;
  case RLX_F32: *atol = 1e-5, *rtol = 1e-4; break;
  case RLX_F16: *atol = 2e-3, *rtol = 2e-3; break;
  case RLX_BF16: *atol = 1e-2, *rtol = 1.6e-2; break;
  default: *atol = 0, *rtol = 0; break;
  }
}

#endif /* RLX_REF_DATA_H */
