/* fuse_test_util.h — what the fusion tests (test_fuse*.c) share: graphs
 * from text, pass_fuse with its output verified, running a graph on
 * deterministic data per leaf name (so a graph before and after fusion see
 * the same values), and the three-way numerical check: the graph with
 * fusion off against pass_fuse's output (fusion off) and against the graph
 * compiled with fusion on. Used with check.h. */
#ifndef RLX_FUSE_TEST_UTIL_H
#define RLX_FUSE_TEST_UTIL_H

#include "rlx.h"
#include "ir/ir.h"
#include "pass/pass.h"
#include "check.h"
#include "ref_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- graphs */

static inline rlx_graph *parse(const char *text) {
  rlx_graph *g = NULL;
  rlx_status st = rlx_graph_from_text(text, &g);
  CHECK(st == RLX_OK, "parse: %s", rlx_last_error());
  return g;
}

static inline rlx_graph *fuse(const rlx_graph *g, int *changed) {
  pass_options opt;
  memset(&opt, 0, sizeof opt);
  opt.fuse = 1;
  rlx_graph *out = NULL;
  int n = 0;
  rlx_status st = pass_fuse(g, &opt, &out, &n);
  CHECK(st == RLX_OK && out, "pass_fuse: %s", rlx_last_error());
  if (out) CHECK(rlx_graph_verify(out) == RLX_OK, "fused graph does not verify: %s", rlx_last_error());
  if (changed) *changed = n;
  return out;
}

static inline int count_op(const rlx_graph *g, int op) {
  int n = 0;
  for (int i = 0; g && i < g->n_nodes; i++) n += g->nodes[i].op == op;
  return n;
}

static inline const ir_node *find_op(const rlx_graph *g, int op) {
  for (int i = 0; g && i < g->n_nodes; i++)
    if (g->nodes[i].op == op) return &g->nodes[i];
  return NULL;
}

/* Hex of n little-endian f32 values, for Constant{data=h"..."}. */
static inline char *hex_f32(const float *v, int n) {
  char *s = malloc((size_t)n * 8 + 1);
  for (int i = 0; i < n; i++) {
    unsigned char b[4];
    memcpy(b, &v[i], 4);
    for (int k = 0; k < 4; k++) sprintf(s + i * 8 + k * 2, "%02x", b[k]);
  }
  s[n * 8] = 0;
  return s;
}

/* A text graph with "$0", "$1", ... replaced by hex args. */
static inline rlx_graph *parse_with(const char *tmpl, int n_args, char **args) {
  size_t cap = strlen(tmpl) + 1;
  for (int i = 0; i < n_args; i++) cap += strlen(args[i]);
  char *text = malloc(cap), *o = text;
  for (const char *p = tmpl; *p;) {
    if (p[0] == '$' && p[1] >= '0' && p[1] <= '9') {
      const char *a = args[p[1] - '0'];
      size_t len = strlen(a);
      memcpy(o, a, len);
      o += len;
      p += 2;
    } else {
      *o++ = *p++;
    }
  }
  *o = 0;
  rlx_graph *g = parse(text);
  free(text);
  for (int i = 0; i < n_args; i++) free(args[i]);
  return g;
}

/* ---------------------------------------------------------------- running */

/* Deterministic data per leaf name: both graphs get the same values. */
static uint64_t rng_state;
static inline void rng_seed(const char *name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *name; name++) h = (h ^ (unsigned char)*name) * 0x100000001b3ull;
  rng_state = h | 1;
}
static inline double rng_unit(void) { /* [0, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static inline void store(rlx_dtype t, void *p, int64_t i, double v) {
  switch (t) {
  case RLX_F32: ((float *)p)[i] = (float)v; break;
  case RLX_F64: ((double *)p)[i] = v; break;
  case RLX_F16: ((uint16_t *)p)[i] = rlx_f32_to_f16((float)v); break;
  case RLX_BF16: ((uint16_t *)p)[i] = rlx_f32_to_bf16((float)v); break;
  case RLX_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  case RLX_I64: ((int64_t *)p)[i] = (int64_t)v; break;
  case RLX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default: break;
  }
}

static inline double load(rlx_dtype t, const void *p, int64_t i) {
  switch (t) {
  case RLX_F32: return ((const float *)p)[i];
  case RLX_F64: return ((const double *)p)[i];
  case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)p)[i]);
  case RLX_BF16: return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
  case RLX_I32: return ((const int32_t *)p)[i];
  case RLX_I64: return (double)((const int64_t *)p)[i];
  case RLX_BOOL: case RLX_U8: return ((const uint8_t *)p)[i];
  case RLX_I8: return ((const int8_t *)p)[i];
  default: return NAN;
  }
}

/* Values of a leaf: uniform in [-1, 1); a leaf named mask* is an additive
 * mask (key 0 always visible, else -inf a quarter of the time, else a soft
 * bias in [-1, 0]); attention_mask is BERT's 1 (keep) / 0 (pad) with key 0
 * kept; ints are small. */
static inline void fill(const char *name, rlx_dtype t, void *p, int64_t numel, int64_t last_dim) {
  rng_seed(name);
  for (int64_t i = 0; i < numel; i++) {
    double u = rng_unit(), v = 2 * u - 1;
    if (strcmp(name, "attention_mask") == 0) {
      v = i % last_dim == 0 || u < 0.7; /* 1 keep, 0 pad */
    } else if (strncmp(name, "mask", 4) == 0) {
      v = i % last_dim == 0 ? 0 : u < 0.25 ? -INFINITY : -rng_unit();
    } else if (!(t == RLX_F32 || t == RLX_F64 || t == RLX_F16 || t == RLX_BF16)) {
      v = floor(u * 4);
    }
    store(t, p, i, v);
  }
}

typedef struct {
  const char *name;
  int64_t value;
} sym_bind;

static inline int64_t bound_dim(const rlx_graph *g, int64_t d, const sym_bind *binds) {
  const char *nm = rlx_dim_name(g, d);
  if (!nm) return d;
  for (int i = 0; binds && binds[i].name; i++)
    if (strcmp(binds[i].name, nm) == 0) return binds[i].value;
  return 1;
}

#define MAX_OUTS 4
typedef struct {
  int n;
  int64_t numel[MAX_OUTS];
  double *v[MAX_OUTS];
} run_result;

static inline void result_free(run_result *r) {
  for (int i = 0; i < r->n; i++) free(r->v[i]);
  r->n = 0;
}

static inline void bind_leaf(rlx_session *s, const rlx_graph *g, rlx_node n, int input, const sym_bind *binds) {
  rlx_dtype t;
  int64_t dims[RLX_MAX_RANK];
  int rank = rlx_node_type(g, n, &t, dims);
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) numel *= (dims[i] = bound_dim(g, dims[i], binds));
  size_t nbytes = rlx_dtype_nbytes(t, numel);
  void *data = calloc(nbytes ? nbytes : 1, 1);
  const char *name = rlx_node_name(g, n);
  fill(name, t, data, numel, rank ? dims[rank - 1] : 1);
  rlx_status st = input ? rlx_set_input_shaped(s, name, data, nbytes, rank, dims)
                        : rlx_set_param(s, name, data, nbytes);
  CHECK(st == RLX_OK, "binding %s: %s", name, rlx_last_error());
  free(data);
}

/* Compiles g (flags), binds every input and param, runs, reads every output. */
static inline int run(const rlx_graph *g, unsigned flags, const sym_bind *binds, run_result *r) {
  memset(r, 0, sizeof *r);
  rlx_options o;
  memset(&o, 0, sizeof o);
  o.device = RLX_DEVICE_CPU;
  o.flags = flags;
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, &o, &s);
  CHECK(st == RLX_OK, "compile: %s", rlx_last_error());
  if (st != RLX_OK) return 0;
  for (int i = 0; i < rlx_graph_num_inputs(g); i++) bind_leaf(s, g, rlx_graph_input(g, i), 1, binds);
  for (int i = 0; i < rlx_graph_num_params(g); i++) bind_leaf(s, g, rlx_graph_param(g, i), 0, binds);
  st = rlx_run(s);
  CHECK(st == RLX_OK, "run: %s", rlx_last_error());
  for (int k = 0; st == RLX_OK && k < rlx_session_num_outputs(s) && k < MAX_OUTS; k++) {
    rlx_dtype t;
    int64_t dims[RLX_MAX_RANK], numel = 1;
    int rank = rlx_output_type(s, k, &t, dims);
    for (int i = 0; i < rank; i++) numel *= dims[i];
    size_t nbytes = rlx_dtype_nbytes(t, numel);
    void *raw = calloc(nbytes ? nbytes : 1, 1);
    st = rlx_output(s, k, raw, nbytes);
    CHECK(st == RLX_OK, "output %d: %s", k, rlx_last_error());
    r->v[k] = malloc((size_t)(numel ? numel : 1) * sizeof(double));
    for (int64_t i = 0; i < numel; i++) r->v[k][i] = load(t, raw, i);
    r->numel[k] = numel;
    r->n = k + 1;
    free(raw);
  }
  rlx_session_free(s);
  return st == RLX_OK;
}

/* Largest violation of |a - b| <= atol + rtol |b| (0: within); NaN equals NaN. */
static inline double worst_excess(const run_result *a, const run_result *b, double atol, double rtol) {
  if (a->n != b->n) return INFINITY;
  double worst = 0;
  for (int k = 0; k < a->n; k++) {
    if (a->numel[k] != b->numel[k]) return INFINITY;
    for (int64_t i = 0; i < a->numel[k]; i++) {
      double x = a->v[k][i], y = b->v[k][i];
      if (isnan(x) || isnan(y)) {
        if (!(isnan(x) && isnan(y))) return INFINITY;
        continue;
      }
      if (x == y) continue;
      double e = fabs(x - y) - (atol + rtol * fabs(y));
      if (!(e <= worst)) worst = e;
    }
  }
  return worst;
}

/* The reference (g with fusion off) against fused (pass_fuse's output,
 * fusion off) and against g compiled with fusion on. */
static inline void check_numerics(const char *what, const rlx_graph *g, const rlx_graph *fused,
                           const sym_bind *binds, double atol, double rtol) {
  run_result ref, f, on;
  if (!run(g, RLX_FLAG_NO_FUSE, binds, &ref)) return;
  if (run(fused, RLX_FLAG_NO_FUSE, binds, &f)) {
    double e = worst_excess(&f, &ref, atol, rtol);
    CHECK(e == 0, "%s: pass_fuse output differs from the unfused graph by %g beyond tolerance", what, e);
    result_free(&f);
  }
  if (run(g, 0, binds, &on)) {
    double e = worst_excess(&on, &ref, atol, rtol);
    CHECK(e == 0, "%s: fusion on differs from fusion off by %g beyond tolerance", what, e);
    result_free(&on);
  }
  result_free(&ref);
}

/* The op-parity tests' tolerances per dtype. The fused ops round once what
 * the unfused graph rounds after every op; on these small shapes that stays
 * within them. */
static inline void tol_for(rlx_dtype t, double *atol, double *rtol) {
  switch (t) {
  case RLX_F64: *atol = 1e-9, *rtol = 1e-9; break;
  case RLX_F16: *atol = 2e-3, *rtol = 2e-3; break;
  case RLX_BF16: *atol = 1e-2, *rtol = 1.6e-2; break;
  default: *atol = 1e-5, *rtol = 1e-4; break;
  }
}

/* Fuses g (checking the count of groups fused unless want_changed < 0),
 * then the numerics; returns the fused graph. */
static inline rlx_graph *fuse_checked(const char *what, const rlx_graph *g, int want_changed, rlx_dtype t) {
  int changed = -1;
  rlx_graph *f = fuse(g, &changed);
  CHECK(want_changed < 0 || changed == want_changed, "%s: %d groups fused, want %d", what, changed, want_changed);
  double atol, rtol;
  tol_for(t, &atol, &rtol);
  if (f) check_numerics(what, g, f, NULL, atol, rtol);
  return f;
}

static const char *const dtype_names[] = {"f32", "f16", "bf16", "f64"};
static const rlx_dtype dtypes[] = {RLX_F32, RLX_F16, RLX_BF16, RLX_F64};

#endif
