/* pass_test_util.h — what the pass tests share: running a graph through
 * the runtime on random data (the same data for every graph with the same
 * input and param names, so a graph before and after a pass see the same
 * values), comparing two graphs' outputs, counting ops, and applying one
 * pass. Used with check.h. */
#ifndef RLX_PASS_TEST_UTIL_H
#define RLX_PASS_TEST_UTIL_H

#include "rlx.h"
#include "pass/pass.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref_data.h"

/* splitmix64: a reproducible stream per (name, seed). */
static inline uint64_t pt_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline uint64_t pt_seed_of(const char *name, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
  return h;
}

/* n random elements of t: floats uniform in [-2, 2), integers in [-5, 5]
 * (u8 [0, 10]), bools 0/1. */
static inline void pt_fill(rlx_dtype t, void *buf, int64_t n, uint64_t seed) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = pt_next(&s);
    double f = (double)(r >> 11) / 9007199254740992.0 * 4.0 - 2.0;
    int64_t k = (int64_t)(r % 11) - 5;
    switch (t) {
    case RLX_F32: ((float *)buf)[i] = (float)f; break;
    case RLX_F64: ((double *)buf)[i] = f; break;
    case RLX_F16: ((uint16_t *)buf)[i] = rlx_f32_to_f16((float)f); break;
    case RLX_BF16: ((uint16_t *)buf)[i] = rlx_f32_to_bf16((float)f); break;
    case RLX_I8: ((int8_t *)buf)[i] = (int8_t)k; break;
    case RLX_U8: ((uint8_t *)buf)[i] = (uint8_t)(k + 5); break;
    case RLX_I32: ((int32_t *)buf)[i] = (int32_t)k; break;
    case RLX_I64: ((int64_t *)buf)[i] = k; break;
    case RLX_BOOL: ((uint8_t *)buf)[i] = (uint8_t)(r & 1); break;
    default: ((uint8_t *)buf)[i] = (uint8_t)r; break;
    }
  }
}

static inline int64_t pt_numel(int rank, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= d[i];
  return n;
}

typedef struct {
  int n;
  void *data[16];
  size_t nbytes[16];
  rlx_dtype dtype[16];
  int rank[16];
  int64_t dims[16][RLX_MAX_RANK];
} pt_outputs;

static inline void pt_outputs_free(pt_outputs *o) {
  for (int i = 0; i < o->n; i++) free(o->data[i]);
  o->n = 0;
}

/* Compiles g (static shapes) with flags, sets every input and param to
 * random data keyed by its name and seed, runs, and reads the outputs.
 * Returns the first failing status. */
static inline rlx_status pt_run(const rlx_graph *g, unsigned flags, uint64_t seed, pt_outputs *out) {
  memset(out, 0, sizeof *out);
  rlx_options opt = {RLX_DEVICE_CPU, 1, flags, 0, NULL};
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, &opt, &s);
  for (int i = 0; st == RLX_OK && i < rlx_graph_num_nodes(g); i++) {
    const char *name = rlx_node_name(g, i);
    if (!name) continue;
    rlx_dtype t;
    int64_t d[RLX_MAX_RANK];
    int rank = rlx_node_type(g, i, &t, d);
    int64_t n = pt_numel(rank, d);
    size_t nb = rlx_dtype_nbytes(t, n);
    void *buf = malloc(nb ? nb : 1);
    pt_fill(t, buf, rlx_dtype_is_block(t) ? (int64_t)nb : n, pt_seed_of(name, seed));
    int is_param = !strcmp(rlx_node_op_name(g, i), "Param");
    st = is_param ? rlx_set_param(s, name, buf, nb) : rlx_set_input(s, name, buf, nb);
    free(buf);
  }
  if (st == RLX_OK) st = rlx_run(s);
  for (int k = 0; st == RLX_OK && k < rlx_session_num_outputs(s) && k < 16; k++) {
    out->rank[k] = rlx_output_type(s, k, &out->dtype[k], out->dims[k]);
    out->nbytes[k] = rlx_dtype_nbytes(out->dtype[k], pt_numel(out->rank[k], out->dims[k]));
    out->data[k] = malloc(out->nbytes[k] ? out->nbytes[k] : 1);
    out->n = k + 1;
    st = rlx_output(s, k, out->data[k], out->nbytes[k]);
  }
  rlx_session_free(s);
  return st;
}

/* Largest |a - b| / (atol + rtol |b|) over the outputs (NaN matching NaN
 * counts 0); > 1 means out of tolerance. Types must match exactly (else
 * INFINITY), block dtypes byte for byte. With atol = rtol = 0 values must
 * be equal. */
static inline double pt_error(const pt_outputs *a, const pt_outputs *b, double atol, double rtol) {
  if (a->n != b->n) return INFINITY;
  double worst = 0;
  for (int k = 0; k < a->n; k++) {
    if (a->dtype[k] != b->dtype[k] || a->rank[k] != b->rank[k] ||
        memcmp(a->dims[k], b->dims[k], (size_t)a->rank[k] * sizeof(int64_t)))
      return INFINITY;
    if (rlx_dtype_is_block(a->dtype[k])) {
      if (memcmp(a->data[k], b->data[k], a->nbytes[k])) return INFINITY;
      continue;
    }
    int64_t n = pt_numel(a->rank[k], a->dims[k]);
    for (int64_t i = 0; i < n; i++) {
      double x = rlx_value_as_f64(a->dtype[k], a->data[k], i), y = rlx_value_as_f64(b->dtype[k], b->data[k], i);
      if ((isnan(x) && isnan(y)) || x == y) continue;
      double tol = atol + rtol * fabs(y);
      double e = tol > 0 ? fabs(x - y) / tol : INFINITY;
      if (!(e <= worst)) worst = e;
    }
  }
  return worst;
}

/* Runs a and b as built (no optimizing passes) on the same random data
 * and checks their outputs agree within atol/rtol; `what` names the case. */
static inline void pt_check_same(const rlx_graph *a, const rlx_graph *b, double atol, double rtol, const char *what) {
  pt_outputs oa, ob;
  rlx_status sa = pt_run(a, RLX_FLAG_NO_OPTIMIZE, 7, &oa), sb = pt_run(b, RLX_FLAG_NO_OPTIMIZE, 7, &ob);
  CHECK(sa == RLX_OK && sb == RLX_OK, "%s: run failed: %s", what, rlx_last_error());
  if (sa == RLX_OK && sb == RLX_OK) {
    double e = pt_error(&oa, &ob, atol, rtol);
    CHECK(e <= 1, "%s: outputs differ (error %g of tolerance)", what, e);
  }
  pt_outputs_free(&oa);
  pt_outputs_free(&ob);
}

/* Nodes of g with op name `op`. */
static inline int pt_count(const rlx_graph *g, const char *op) {
  int c = 0;
  for (int i = 0; i < rlx_graph_num_nodes(g); i++) c += !strcmp(rlx_node_op_name(g, i), op);
  return c;
}

/* Applies pass to g (with options, or defaults with the CPU evaluator);
 * checks the result verifies. NULL on failure (reported). */
static inline rlx_graph *pt_apply(pass_fn pass, const rlx_graph *g, const pass_options *opt, int *changed) {
  pass_options defaults;
  if (!opt) {
    memset(&defaults, 0, sizeof defaults);
    defaults.fuse = defaults.optimize = 1;
    defaults.eval = rt_const_eval;
    defaults.eval_ctx = (void *)&rlx_cpu_backend;
    opt = &defaults;
  }
  rlx_graph *out = NULL;
  int ch = 0;
  rlx_status st = pass(g, opt, &out, &ch);
  CHECK(st == RLX_OK && out, "pass failed: %s", rlx_last_error());
  if (out) CHECK(rlx_graph_verify(out) == RLX_OK, "pass result does not verify: %s", rlx_last_error());
  if (changed) *changed = ch;
  return out;
}

#endif /* RLX_PASS_TEST_UTIL_H */
