/* cuda_util.h — what the CUDA tests share: the device probe (a test skips
 * with CUDA_SKIP when no device is there), random tensors of any float
 * dtype, and running one graph on the CPU and on CUDA. */
#ifndef RLX_TEST_CUDA_UTIL_H
#define RLX_TEST_CUDA_UTIL_H

#include "rlx.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_SKIP 77 /* CTest SKIP_RETURN_CODE */

/* 1 if a CUDA session compiles here (a build with CUDA and a device). */
static inline int cuda_present(void) {
  rlx_graph *g = rlx_graph_new("probe");
  int64_t d[1] = {4};
  rlx_node x = rlx_input(g, "x", RLX_F32, 1, d);
  rlx_node y = rlx_activation(g, RLX_ACT_RELU, x);
  rlx_graph_set_outputs(g, 1, &y);
  rlx_options o = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, &o, &s);
  if (st != RLX_OK) printf("no CUDA session: %s: %s\n", rlx_status_name(st), rlx_last_error());
  rlx_session_free(s);
  rlx_graph_free(g);
  return st == RLX_OK;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static inline double rng_uniform(void) { /* [0, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}
static inline double rng_normal(void) {
  double u = rng_uniform() + 1e-12, v = rng_uniform();
  return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static inline size_t dtype_size(rlx_dtype t) { return rlx_dtype_nbytes(t, 1); }

static inline void store_as(rlx_dtype t, void *p, int64_t i, double v) {
  switch (t) {
  case RLX_F32: ((float *)p)[i] = (float)v; break;
  case RLX_F16: ((uint16_t *)p)[i] = rlx_f32_to_f16((float)v); break;
  case RLX_BF16: ((uint16_t *)p)[i] = rlx_f32_to_bf16((float)v); break;
  case RLX_F64: ((double *)p)[i] = v; break;
  case RLX_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  case RLX_I64: ((int64_t *)p)[i] = (int64_t)v; break;
  default: break;
  }
}

/* n random normal values * scale, stored as t (malloc'ed). */
static inline void *random_tensor(rlx_dtype t, int64_t n, double scale) {
  void *p = malloc((size_t)(n ? n : 1) * dtype_size(t));
  for (int64_t i = 0; i < n; i++) store_as(t, p, i, rng_normal() * scale);
  return p;
}

/* Tolerances of a float dtype for results that went through reductions. */
static inline void tolerance(rlx_dtype t, double *atol, double *rtol) {
  *atol = t == RLX_F64 ? 1e-9 : t == RLX_F32 ? 1e-4 : t == RLX_F16 ? 1e-2 : 3e-2;
  *rtol = t == RLX_F64 ? 1e-9 : t == RLX_F32 ? 1e-3 : t == RLX_F16 ? 1e-2 : 3e-2;
}

/* The leaves of a test graph and their data (name -> bytes). */
typedef struct {
  const char *name;
  int param;
  void *data;
  size_t nbytes;
} bound_leaf;

/* Compiles g for device, binds the leaves, runs, copies output `out` into
 * a malloc'ed buffer (*bytes). NULL on failure (printed). */
static inline void *run_graph(const rlx_graph *g, rlx_device device, const bound_leaf *leaves, int n_leaves, int out,
                       size_t *bytes) {
  rlx_options o = {device, 0, 0, 0, NULL};
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, &o, &s);
  for (int i = 0; st == RLX_OK && i < n_leaves; i++)
    st = leaves[i].param ? rlx_set_param(s, leaves[i].name, leaves[i].data, leaves[i].nbytes)
                         : rlx_set_input(s, leaves[i].name, leaves[i].data, leaves[i].nbytes);
  if (st == RLX_OK) st = rlx_run(s);
  void *res = NULL;
  if (st == RLX_OK) {
    rlx_dtype t;
    int64_t dims[RLX_MAX_RANK], n = 1;
    int r = rlx_output_type(s, out, &t, dims);
    for (int i = 0; i < r; i++) n *= dims[i];
    *bytes = rlx_dtype_nbytes(t, n);
    res = malloc(*bytes ? *bytes : 1);
    st = rlx_output(s, out, res, *bytes);
  }
  if (st != RLX_OK) {
    printf("run on %s failed: %s: %s\n", device == RLX_DEVICE_CUDA ? "cuda" : "cpu", rlx_status_name(st),
           rlx_last_error());
    free(res);
    res = NULL;
  }
  rlx_session_free(s);
  return res;
}

/* Worst |got - want| / (atol + rtol |want|) over n values of dtype t; > 1 fails. NaN: infinite. */
static inline double worst_ratio(rlx_dtype t, const void *got, const void *want, int64_t n, double atol, double rtol) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = rlx_value_as_f64(t, got, i), w = rlx_value_as_f64(t, want, i);
    if (isnan(g) || isnan(w)) {
      if (!(isnan(g) && isnan(w))) return INFINITY;
      continue;
    }
    double r = fabs(g - w) / (atol + rtol * fabs(w));
    if (r > worst) worst = r;
  }
  return worst;
}

#endif /* RLX_TEST_CUDA_UTIL_H */
