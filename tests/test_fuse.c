/* test_fuse — the fusion passes (src/pass/fuse*.c) through pass_fuse.
 *
 * For every pattern: structural tests (the fused op appears with the
 * right attributes, the ops it replaces are gone, and the cases where it
 * must not fire leave the graph alone) and numerical tests: the graph
 * before and after pass_fuse, each compiled with fusion off, run on the
 * same random data, and the graph compiled with fusion on (the runtime's
 * own pipeline), all agree within the dtype's tolerance.
 *
 * usage: test_fuse DATA_DIR   (holds llama_block.rlx and bert_layer.rlx)
 */
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

static rlx_graph *parse(const char *text) {
  rlx_graph *g = NULL;
  rlx_status st = rlx_graph_from_text(text, &g);
  CHECK(st == RLX_OK, "parse: %s", rlx_last_error());
  return g;
}

static rlx_graph *fuse(const rlx_graph *g, int *changed) {
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

static int count_op(const rlx_graph *g, int op) {
  int n = 0;
  for (int i = 0; g && i < g->n_nodes; i++) n += g->nodes[i].op == op;
  return n;
}

static const ir_node *find_op(const rlx_graph *g, int op) {
  for (int i = 0; g && i < g->n_nodes; i++)
    if (g->nodes[i].op == op) return &g->nodes[i];
  return NULL;
}

/* Hex of n little-endian f32 values, for Constant{data=h"..."}. */
static char *hex_f32(const float *v, int n) {
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
static rlx_graph *parse_with(const char *tmpl, int n_args, char **args) {
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
static void rng_seed(const char *name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *name; name++) h = (h ^ (unsigned char)*name) * 0x100000001b3ull;
  rng_state = h | 1;
}
static double rng_unit(void) { /* [0, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void store(rlx_dtype t, void *p, int64_t i, double v) {
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

static double load(rlx_dtype t, const void *p, int64_t i) {
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
static void fill(const char *name, rlx_dtype t, void *p, int64_t numel, int64_t last_dim) {
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

static int64_t bound_dim(const rlx_graph *g, int64_t d, const sym_bind *binds) {
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

static void result_free(run_result *r) {
  for (int i = 0; i < r->n; i++) free(r->v[i]);
  r->n = 0;
}

static void bind_leaf(rlx_session *s, const rlx_graph *g, rlx_node n, int input, const sym_bind *binds) {
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
static int run(const rlx_graph *g, unsigned flags, const sym_bind *binds, run_result *r) {
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
static double worst_excess(const run_result *a, const run_result *b, double atol, double rtol) {
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
static void check_numerics(const char *what, const rlx_graph *g, const rlx_graph *fused,
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
static void tol_for(rlx_dtype t, double *atol, double *rtol) {
  switch (t) {
  case RLX_F64: *atol = 1e-9, *rtol = 1e-9; break;
  case RLX_F16: *atol = 2e-3, *rtol = 2e-3; break;
  case RLX_BF16: *atol = 1e-2, *rtol = 1.6e-2; break;
  default: *atol = 1e-5, *rtol = 1e-4; break;
  }
}

/* Fuses g (checking the count of groups fused unless want_changed < 0),
 * then the numerics; returns the fused graph. */
static rlx_graph *fuse_checked(const char *what, const rlx_graph *g, int want_changed, rlx_dtype t) {
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

/* ---------------------------------------------------------------- conv + epilogue */

/* A Conv (3x3, or depthwise), then `tail` (nodes %6.. reading the conv %5
 * and x %0 of the same shape), in dtype t. */
static rlx_graph *conv_graph(const char *t, int depthwise, int bias, const char *tail, const char *outputs) {
  char text[2048];
  snprintf(text, sizeof text,
           "graph \"conv\" {\n"
           "  %%0 = Input{name=\"x\"} : %s[2,4,6,5]\n"
           "  %%1 = Param{name=\"w\"} : %s[4,%d,3,3]\n"
           "  %%2 = Param{name=\"b\"} : %s[4]\n"
           "  %%5 = Conv{ndim=2, pad=[1, 1, 1, 1], groups=%d}(%%0, %%1%s)\n"
           "%s  outputs %s\n}\n",
           t, t, depthwise ? 1 : 4, t, depthwise ? 4 : 1, bias ? ", %2" : "", tail, outputs);
  return parse(text);
}

static void test_conv(void) {
  for (int di = 0; di < 4; di++) {
    const char *t = dtype_names[di];
    /* relu(conv + x), clamped: one FusedConv with all of it */
    rlx_graph *g = conv_graph(t, di % 2, 1,
                              "  %6 = Binary{op=add}(%0, %5)\n  %7 = Activation{act=relu}(%6)\n"
                              "  %8 = Clamp{lo=0, hi=6}(%7)\n",
                              "%8");
    rlx_graph *f = fuse_checked("conv+res+relu+clamp", g, 1, dtypes[di]);
    const ir_node *n = find_op(f, RLX_OP_FusedConv);
    CHECK(n && n->n_in == 4 && n->a.act == RLX_ACT_RELU && n->a.lo == 0 && n->a.hi == 6 &&
              n->a.groups == (di % 2 ? 4 : 1),
          "%s: FusedConv{relu, 0, 6} with the residual", t);
    CHECK(count_op(f, RLX_OP_Conv) + count_op(f, RLX_OP_Binary) + count_op(f, RLX_OP_Activation) +
                  count_op(f, RLX_OP_Clamp) == 0,
          "%s: the unfused ops are gone", t);
    rlx_graph_free(f);
    rlx_graph_free(g);
  }
  /* without a bias: a zero one; a leaky_relu keeps its slope */
  rlx_graph *g = conv_graph("f32", 0, 0, "  %6 = Activation{act=leaky_relu, alpha=0.3}(%5)\n", "%6");
  rlx_graph *f = fuse_checked("conv without bias", g, 1, RLX_F32);
  const ir_node *n = find_op(f, RLX_OP_FusedConv);
  CHECK(n && n->n_in == 3 && n->a.act == RLX_ACT_LEAKY_RELU && n->a.alpha == 0.3 && isinf(n->a.hi),
        "leaky_relu with a zero bias");
  rlx_graph_free(f);
  rlx_graph_free(g);
  /* left alone: the conv read twice; an activation before the add fuses,
   * the add stays; a residual that broadcasts */
  static const struct {
    const char *tail, *outputs;
    int fused, binaries;
  } negatives[] = {
      {"  %6 = Activation{act=relu}(%5)\n", "%6, %5", 0, 0},
      {"  %6 = Activation{act=tanh}(%5)\n  %7 = Binary{op=add}(%6, %0)\n", "%7", 1, 1},
      {"  %6 = Narrow{axis=3, start=0, len=1}(%0)\n  %7 = Binary{op=add}(%5, %6)\n", "%7", 0, 1},
  };
  for (size_t i = 0; i < sizeof negatives / sizeof negatives[0]; i++) {
    g = conv_graph("f32", 0, 1, negatives[i].tail, negatives[i].outputs);
    f = fuse_checked("conv negative", g, -1, RLX_F32);
    const rlx_graph *r = f ? f : g;
    CHECK(count_op(r, RLX_OP_FusedConv) == negatives[i].fused && count_op(r, RLX_OP_Binary) == negatives[i].binaries,
          "conv negative %zu: %d fused, %d adds", i, count_op(r, RLX_OP_FusedConv), count_op(r, RLX_OP_Binary));
    rlx_graph_free(f);
    rlx_graph_free(g);
  }
}

/* ---------------------------------------------------------------- matmul + bias + act */

static void test_matmul_bias_act(void) {
  char text[2048];
  for (int di = 0; di < 4; di++) {
    const char *t = dtype_names[di];
    snprintf(text, sizeof text,
             "graph \"mba\" {\n"
             "  %%0 = Input{name=\"x\"} : %s[2,5,8]\n"
             "  %%1 = Param{name=\"w\"} : %s[8,6]\n"
             "  %%2 = Param{name=\"b\"} : %s[6]\n"
             "  %%3 = MatMul(%%0, %%1)\n"
             "  %%4 = Binary{op=add}(%%3, %%2)\n"
             "  %%5 = Activation{act=gelu}(%%4)\n"
             "  outputs %%5\n}\n", t, t, t);
    rlx_graph *g = parse(text);
    rlx_graph *f = fuse_checked("matmul+bias+gelu", g, 1, dtypes[di]);
    const ir_node *n = find_op(f, RLX_OP_FusedMatMulBiasAct);
    CHECK(n && n->a.act == RLX_ACT_GELU, "%s: FusedMatMulBiasAct{gelu}", t);
    CHECK(count_op(f, RLX_OP_MatMul) == 0 && count_op(f, RLX_OP_Binary) == 0 &&
          count_op(f, RLX_OP_Activation) == 0, "%s: the unfused ops are gone", t);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }

  /* bias on the left, [1, N] bias (reshaped), leaky_relu's alpha, rank-1 a */
  rlx_graph *g = parse(
      "graph \"mba2\" {\n"
      "  %0 = Input{name=\"x\"} : f32[4,8]\n"
      "  %1 = Param{name=\"w\"} : f32[8,6]\n"
      "  %2 = Param{name=\"b\"} : f32[1,6]\n"
      "  %3 = MatMul(%0, %1)\n"
      "  %4 = Binary{op=add}(%2, %3)\n"
      "  %5 = Activation{act=leaky_relu, alpha=0.3}(%4)\n"
      "  %6 = Input{name=\"v\"} : f32[8]\n"
      "  %7 = Param{name=\"c\"} : f32[6]\n"
      "  %8 = MatMul(%6, %1)\n"
      "  %9 = Binary{op=add}(%8, %7)\n"
      "  outputs %5, %9\n}\n");
  rlx_graph *f = fuse_checked("bias left, [1,N] bias, rank-1 a", g, 2, RLX_F32);
  CHECK(count_op(f, RLX_OP_FusedMatMulBiasAct) == 2 && count_op(f, RLX_OP_Reshape) == 1,
        "two fused, one bias reshape");
  const ir_node *n = find_op(f, RLX_OP_FusedMatMulBiasAct);
  CHECK(n && n->a.act == RLX_ACT_LEAKY_RELU && n->a.alpha == 0.3, "leaky_relu alpha 0.3 kept");
  CHECK(f && f->nodes[f->outputs[1]].op == RLX_OP_FusedMatMulBiasAct &&
        f->nodes[f->outputs[1]].a.act == RLX_ACT_NONE, "matmul + bias without act: act none");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* the pre-activation is read elsewhere: matmul + bias fuse, the act stays */
  g = parse(
      "graph \"mba3\" {\n"
      "  %0 = Input{name=\"x\"} : f32[4,8]\n"
      "  %1 = Param{name=\"w\"} : f32[8,6]\n"
      "  %2 = Param{name=\"b\"} : f32[6]\n"
      "  %3 = MatMul(%0, %1)\n"
      "  %4 = Binary{op=add}(%3, %2)\n"
      "  %5 = Activation{act=relu}(%4)\n"
      "  outputs %5, %4\n}\n");
  f = fuse_checked("pre-activation read elsewhere", g, 1, RLX_F32);
  n = find_op(f, RLX_OP_FusedMatMulBiasAct);
  CHECK(n && n->a.act == RLX_ACT_NONE && count_op(f, RLX_OP_Activation) == 1, "act none, relu stays");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* GELU written out with Erf (torch's and Hugging Face's exports): the
   * chain becomes the fused op's act; a wrong constant, or the
   * pre-activation read elsewhere, leaves the chain as it is */
  /* torch's order: x * (erf(x / sqrt 2) + 1) * 0.5 */
#define ERF_GELU_TORCH                                                                                              \
  "  %7 = Binary{op=div}(%4, %5)\n  %8 = Activation{act=erf}(%7)\n  %9 = Binary{op=add}(%8, %6)\n"                \
  "  %10 = Binary{op=mul}(%4, %9)\n  %12 = Binary{op=mul}(%10, %11)\n"
  static const struct {
    const char *body;
    float k[3]; /* the chain's constants */
    int gelu;
  } erf_forms[] = {
      {ERF_GELU_TORCH "  outputs %12\n", {1.41421356f, 1.0f, 0.5f}, 1},
      /* Hugging Face's: 0.5 * x * (1 + erf(x * (1 / sqrt 2))) */
      {"  %7 = Binary{op=mul}(%5, %4)\n  %8 = Activation{act=erf}(%7)\n  %9 = Binary{op=add}(%6, %8)\n"
       "  %10 = Binary{op=mul}(%11, %4)\n  %12 = Binary{op=mul}(%10, %9)\n  outputs %12\n",
       {0.70710678f, 1.0f, 0.5f}, 1},
      {ERF_GELU_TORCH "  outputs %12\n", {1.41421356f, 1.0f, 0.6f}, 0},      /* a wrong constant */
      {ERF_GELU_TORCH "  outputs %12, %4\n", {1.41421356f, 1.0f, 0.5f}, 0}, /* the pre-activation read */
  };
#undef ERF_GELU_TORCH
  for (size_t i = 0; i < sizeof erf_forms / sizeof erf_forms[0]; i++) {
    char tmpl[2048];
    snprintf(tmpl, sizeof tmpl,
             "graph \"gelu_erf\" {\n"
             "  %%0 = Input{name=\"x\"} : f32[2,5,8]\n"
             "  %%1 = Param{name=\"w\"} : f32[8,6]\n"
             "  %%2 = Param{name=\"b\"} : f32[6]\n"
             "  %%3 = MatMul(%%0, %%1)\n"
             "  %%4 = Binary{op=add}(%%3, %%2)\n"
             "  %%5 = Constant{data=h\"$0\"} : f32[]\n"
             "  %%6 = Constant{data=h\"$1\"} : f32[]\n"
             "  %%11 = Constant{data=h\"$2\"} : f32[]\n"
             "%s}\n",
             erf_forms[i].body);
    char *args[] = {hex_f32(&erf_forms[i].k[0], 1), hex_f32(&erf_forms[i].k[1], 1), hex_f32(&erf_forms[i].k[2], 1)};
    g = parse_with(tmpl, 3, args);
    f = fuse_checked("matmul+bias+erf gelu", g, -1, RLX_F32);
    n = f ? find_op(f, RLX_OP_FusedMatMulBiasAct) : NULL;
    const int rest = f ? count_op(f, RLX_OP_Activation) + count_op(f, RLX_OP_ElementwiseRegion) : -1;
    CHECK(n && (n->a.act == RLX_ACT_GELU) == erf_forms[i].gelu && (rest == 0) == erf_forms[i].gelu,
          "erf form %zu: act %d, %d activations or regions left", i, n ? (int)n->a.act : -1, rest);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }

  /* must not fire */
  static const char *const negatives[] = {
      /* the product is read elsewhere */
      ("graph \"n\" {\n %0 = Input{name=\"x\"} : f32[4,8]\n %1 = Param{name=\"w\"} : f32[8,6]\n"
       " %2 = Param{name=\"b\"} : f32[6]\n %3 = MatMul(%0, %1)\n %4 = Binary{op=add}(%3, %2)\n"
       " outputs %4, %3\n}\n"),
      /* batched weight */
      ("graph \"n\" {\n %0 = Input{name=\"x\"} : f32[2,4,8]\n %1 = Param{name=\"w\"} : f32[2,8,6]\n"
       " %2 = Param{name=\"b\"} : f32[6]\n %3 = MatMul(%0, %1)\n %4 = Binary{op=add}(%3, %2)\n"
       " outputs %4\n}\n"),
      /* a full-shape addend is no bias */
      ("graph \"n\" {\n %0 = Input{name=\"x\"} : f32[4,8]\n %1 = Param{name=\"w\"} : f32[8,6]\n"
       " %2 = Param{name=\"b\"} : f32[4,6]\n %3 = MatMul(%0, %1)\n %4 = Binary{op=add}(%3, %2)\n"
       " outputs %4\n}\n"),
      /* a column bias [M, 1] runs along the wrong axis */
      ("graph \"n\" {\n %0 = Input{name=\"x\"} : f32[4,8]\n %1 = Param{name=\"w\"} : f32[8,6]\n"
       " %2 = Param{name=\"b\"} : f32[4,1]\n %3 = MatMul(%0, %1)\n %4 = Binary{op=add}(%3, %2)\n"
       " outputs %4\n}\n"),
      /* the bias broadcasts the product up */
      ("graph \"n\" {\n %0 = Input{name=\"x\"} : f32[8]\n %1 = Param{name=\"w\"} : f32[8,6]\n"
       " %2 = Param{name=\"b\"} : f32[3,6]\n %3 = MatMul(%0, %1)\n %4 = Binary{op=add}(%3, %2)\n"
       " outputs %4\n}\n"),
      /* a subtraction is no bias */
      ("graph \"n\" {\n %0 = Input{name=\"x\"} : f32[4,8]\n %1 = Param{name=\"w\"} : f32[8,6]\n"
       " %2 = Param{name=\"b\"} : f32[6]\n %3 = MatMul(%0, %1)\n %4 = Binary{op=sub}(%3, %2)\n"
       " outputs %4\n}\n"),
      /* mismatched dtypes: an f16 product cast to f32 before an f32 bias */
      ("graph \"n\" {\n %0 = Input{name=\"x\"} : f16[4,8]\n %1 = Param{name=\"w\"} : f16[8,6]\n"
       " %2 = Param{name=\"b\"} : f32[6]\n %3 = MatMul(%0, %1)\n %5 = Cast{to=f32}(%3)\n"
       " %4 = Binary{op=add}(%5, %2)\n %6 = Activation{act=relu}(%4)\n outputs %6\n}\n"),
  };
  for (size_t i = 0; i < sizeof negatives / sizeof negatives[0]; i++) {
    g = parse(negatives[i]);
    f = fuse(g, NULL);
    CHECK(count_op(f, RLX_OP_FusedMatMulBiasAct) == 0 && count_op(f, RLX_OP_MatMul) == 1, "negative %zu fused", i);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }
}

/* ---------------------------------------------------------------- residual + norm */

/* "%1 = ..." lines for a norm test over x, r [2,3,8] with leaves gamma, beta
 * [8] and a bias [8] or [1,1,8]. */
static rlx_graph *norm_graph(const char *dtype, const char *body, const char *outputs) {
  char text[2048];
  snprintf(text, sizeof text,
           "graph \"norm\" {\n"
           "  %%0 = Input{name=\"x\"} : %s[2,3,8]\n"
           "  %%1 = Input{name=\"r\"} : %s[2,3,8]\n"
           "  %%2 = Param{name=\"gamma\"} : %s[8]\n"
           "  %%3 = Param{name=\"beta\"} : %s[8]\n"
           "  %%4 = Param{name=\"bias\"} : %s[8]\n"
           "  %%5 = Param{name=\"bias3\"} : %s[1,1,8]\n"
           "%s"
           "  outputs %s\n}\n", dtype, dtype, dtype, dtype, dtype, dtype, body, outputs);
  return parse(text);
}

static void test_residual_norm(void) {
  for (int di = 0; di < 4; di++) {
    const char *t = dtype_names[di];
    for (int rms = 0; rms < 2; rms++) {
      char body[256];
      snprintf(body, sizeof body, "  %%6 = Binary{op=add}(%%0, %%1)\n  %%7 = %s{axis=-1, eps=0.001}(%%6, %%2, %%3)\n",
               rms ? "RmsNorm" : "LayerNorm");
      rlx_graph *g = norm_graph(t, body, "%7");
      rlx_graph *f = fuse_checked(rms ? "residual rmsnorm" : "residual layernorm", g, 1, dtypes[di]);
      const ir_node *n = find_op(f, rms ? RLX_OP_FusedResidualRmsNorm : RLX_OP_FusedResidualLN);
      CHECK(n && !n->a.has_bias && n->a.eps == 0.001 && n->n_in == 4, "%s %s: fused, eps kept", t,
            rms ? "rms" : "ln");
      CHECK(count_op(f, RLX_OP_Binary) + count_op(f, RLX_OP_LayerNorm) + count_op(f, RLX_OP_RmsNorm) == 0,
            "%s: the add and the norm are gone", t);
      rlx_graph_free(g);
      rlx_graph_free(f);
    }
  }

  /* with a bias, in every association and order */
  static const char *const biased[] = {
      "  %6 = Binary{op=add}(%0, %1)\n  %7 = Binary{op=add}(%6, %4)\n  %8 = LayerNorm{axis=2}(%7, %2, %3)\n",
      "  %6 = Binary{op=add}(%0, %4)\n  %7 = Binary{op=add}(%6, %1)\n  %8 = LayerNorm{axis=2}(%7, %2, %3)\n",
      "  %6 = Binary{op=add}(%4, %0)\n  %7 = Binary{op=add}(%1, %6)\n  %8 = RmsNorm{axis=-1}(%7, %2, %3)\n",
      "  %6 = Binary{op=add}(%1, %0)\n  %7 = Binary{op=add}(%5, %6)\n  %8 = RmsNorm{axis=-1}(%7, %2, %3)\n",
  };
  for (size_t i = 0; i < sizeof biased / sizeof biased[0]; i++) {
    rlx_graph *g = norm_graph("f32", biased[i], "%8");
    rlx_graph *f = fuse_checked("residual norm with bias", g, 1, RLX_F32);
    const ir_node *n = find_op(f, i < 2 ? RLX_OP_FusedResidualLN : RLX_OP_FusedResidualRmsNorm);
    CHECK(n && n->a.has_bias && n->n_in == 5, "bias form %zu fused with has_bias", i);
    CHECK(count_op(f, RLX_OP_Binary) == 0, "bias form %zu: no add left", i);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }

  static const char *const negatives[][2] = {
      /* pre-norm: the sum is also the residual stream */
      {"  %6 = Binary{op=add}(%0, %1)\n  %7 = LayerNorm{axis=-1}(%6, %2, %3)\n", "%7, %6"},
      /* over the last two axes */
      {"  %6 = Binary{op=add}(%0, %1)\n  %8 = Input{name=\"g2\"} : f32[3,8]\n"
       "  %7 = LayerNorm{axis=1}(%6, %8, %8)\n", "%7"},
      /* a broadcasting add is a bias, not a residual */
      {"  %6 = Binary{op=add}(%0, %4)\n  %7 = LayerNorm{axis=-1}(%6, %2, %3)\n", "%7"},
      /* a subtraction */
      {"  %6 = Binary{op=sub}(%0, %1)\n  %7 = RmsNorm{axis=-1}(%6, %2, %3)\n", "%7"},
      /* mismatched dtypes: the sum cast to f64 before an f64 norm */
      {"  %6 = Binary{op=add}(%0, %1)\n  %7 = Cast{to=f64}(%6)\n  %8 = Param{name=\"g64\"} : f64[8]\n"
       "  %9 = LayerNorm{axis=-1}(%7, %8, %8)\n", "%9"},
  };
  for (size_t i = 0; i < sizeof negatives / sizeof negatives[0]; i++) {
    rlx_graph *g = norm_graph("f32", negatives[i][0], negatives[i][1]);
    rlx_graph *f = fuse(g, NULL);
    CHECK(!find_op(f, RLX_OP_FusedResidualLN) && !find_op(f, RLX_OP_FusedResidualRmsNorm) &&
          count_op(f, RLX_OP_LayerNorm) + count_op(f, RLX_OP_RmsNorm) == 1, "norm negative %zu fused", i);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }

  /* the inner bias add is read elsewhere: the bias stays outside, x + b is the operand */
  rlx_graph *g = norm_graph("f32", "  %6 = Binary{op=add}(%0, %4)\n  %7 = Binary{op=add}(%6, %1)\n"
                                   "  %8 = LayerNorm{axis=-1}(%7, %2, %3)\n", "%8, %6");
  rlx_graph *f = fuse_checked("inner bias add read elsewhere", g, 1, RLX_F32);
  const ir_node *n = find_op(f, RLX_OP_FusedResidualLN);
  CHECK(n && !n->a.has_bias && count_op(f, RLX_OP_Binary) == 1, "fused without the bias");
  rlx_graph_free(g);
  rlx_graph_free(f);
}

/* ---------------------------------------------------------------- swiglu */

static rlx_graph *swiglu_graph(const char *dtype, const char *body, const char *outputs) {
  char text[2048];
  snprintf(text, sizeof text,
           "graph \"swiglu\" {\n"
           "  %%0 = Input{name=\"x\"} : %s[2,3,8]\n"
           "  %%1 = Param{name=\"w\"} : %s[8,12]\n"
           "  %%2 = MatMul(%%0, %%1)\n"
           "%s"
           "  outputs %s\n}\n", dtype, dtype, body, outputs);
  return parse(text);
}

static void test_swiglu(void) {
  for (int di = 0; di < 4; di++) {
    const char *t = dtype_names[di];
    rlx_graph *g = swiglu_graph(t,
        "  %3 = Narrow{axis=-1, start=0, len=6}(%2)\n  %4 = Narrow{axis=2, start=6, len=6}(%2)\n"
        "  %5 = Activation{act=silu}(%3)\n  %6 = Binary{op=mul}(%5, %4)\n", "%6");
    rlx_graph *f = fuse_checked("swiglu halves", g, 1, dtypes[di]);
    const ir_node *n = find_op(f, RLX_OP_FusedSwiGLU);
    CHECK(n && n->a.cast_to == -1 && f->nodes[n->in[0]].op == RLX_OP_MatMul, "%s: FusedSwiGLU on the matmul", t);
    CHECK(count_op(f, RLX_OP_Narrow) + count_op(f, RLX_OP_Activation) + count_op(f, RLX_OP_Binary) == 0,
          "%s: the halves, silu and product are gone", t);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }

  static const char *const forms[] = {
      /* up * silu(gate), halves by Slice */
      ("  %3 = Slice{starts=[0, 0, 0], ends=[2, 3, 6], steps=[1, 1, 1]}(%2)\n"
       "  %4 = Slice{starts=[0, 0, 6], ends=[2, 3, 12], steps=[1, 1, 1]}(%2)\n"
       "  %5 = Activation{act=silu}(%3)\n  %6 = Binary{op=mul}(%4, %5)\n  %7 = Cast{to=f32}(%6)\n"),
      /* gate * sigmoid(gate) as the exporter wrote silu */
      ("  %3 = Narrow{axis=-1, start=0, len=6}(%2)\n  %4 = Narrow{axis=-1, start=6, len=6}(%2)\n"
       "  %5 = Activation{act=sigmoid}(%3)\n  %8 = Binary{op=mul}(%3, %5)\n  %6 = Binary{op=mul}(%8, %4)\n"
       "  %7 = Cast{to=f32}(%6)\n"),
      /* cast to f16 after the product */
      ("  %3 = Narrow{axis=-1, start=0, len=6}(%2)\n  %4 = Narrow{axis=-1, start=6, len=6}(%2)\n"
       "  %5 = Activation{act=silu}(%3)\n  %6 = Binary{op=mul}(%5, %4)\n  %7 = Cast{to=f16}(%6)\n"),
  };
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    rlx_graph *g = swiglu_graph("f32", forms[i], "%7");
    rlx_graph *f = fuse_checked("swiglu forms", g, 1, i == 2 ? RLX_F16 : RLX_F32);
    const ir_node *n = find_op(f, RLX_OP_FusedSwiGLU);
    CHECK(n && n->a.cast_to == (i == 2 ? RLX_F16 : RLX_F32), "form %zu fused, cast_to %lld", i,
          n ? (long long)n->a.cast_to : -2LL);
    CHECK(count_op(f, RLX_OP_Cast) + count_op(f, RLX_OP_Activation) + count_op(f, RLX_OP_Slice) == 0,
          "form %zu: nothing left", i);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }

  /* two projections with constant weights: one concatenated constant */
  float wg[8 * 6], wu[8 * 6];
  for (int i = 0; i < 48; i++) {
    wg[i] = (float)sin(0.7 * i);
    wu[i] = (float)cos(0.3 * i);
  }
  char *args[] = {hex_f32(wg, 48), hex_f32(wu, 48)};
  rlx_graph *g = parse_with(
      "graph \"swiglu2\" {\n"
      "  %0 = Input{name=\"x\"} : f32[3,8]\n"
      "  %1 = Constant{data=h\"$0\"} : f32[8,6]\n"
      "  %2 = Constant{data=h\"$1\"} : f32[8,6]\n"
      "  %3 = MatMul(%0, %1)\n  %4 = MatMul(%0, %2)\n"
      "  %5 = Activation{act=silu}(%3)\n  %6 = Binary{op=mul}(%5, %4)\n"
      "  outputs %6\n}\n", 2, args);
  rlx_graph *f = fuse_checked("swiglu over two constant projections", g, 1, RLX_F32);
  const ir_node *n = find_op(f, RLX_OP_FusedSwiGLU);
  CHECK(n && count_op(f, RLX_OP_MatMul) == 1 && count_op(f, RLX_OP_Constant) == 1 && !find_op(f, RLX_OP_Concat),
        "one matmul over one folded [8,12] constant");
  const ir_node *w = find_op(f, RLX_OP_Constant);
  CHECK(w && w->out[0].shape.rank == 2 && w->out[0].shape.d[1] == 12, "weight [8,12]");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* two projections with Param weights: no weight copy per run; one region instead */
  g = parse(
      "graph \"swiglu3\" {\n"
      "  %0 = Input{name=\"x\"} : f32[3,8]\n"
      "  %1 = Param{name=\"wg\"} : f32[8,6]\n"
      "  %2 = Param{name=\"wu\"} : f32[8,6]\n"
      "  %3 = MatMul(%0, %1)\n  %4 = MatMul(%0, %2)\n"
      "  %5 = Activation{act=silu}(%3)\n  %6 = Binary{op=mul}(%5, %4)\n"
      "  outputs %6\n}\n");
  f = fuse_checked("silu * up over param projections", g, 1, RLX_F32);
  CHECK(!find_op(f, RLX_OP_FusedSwiGLU) && count_op(f, RLX_OP_ElementwiseRegion) == 1 &&
        count_op(f, RLX_OP_MatMul) == 2, "two matmuls and one silu*up region");
  rlx_graph_free(g);
  rlx_graph_free(f);

  static const char *const negatives[][2] = {
      /* silu on the second half */
      {"  %3 = Narrow{axis=-1, start=0, len=6}(%2)\n  %4 = Narrow{axis=-1, start=6, len=6}(%2)\n"
       "  %5 = Activation{act=silu}(%4)\n  %6 = Binary{op=mul}(%5, %3)\n", "%6"},
      /* halves along another axis */
      {"  %3 = Narrow{axis=0, start=0, len=1}(%2)\n  %4 = Narrow{axis=0, start=1, len=1}(%2)\n"
       "  %5 = Activation{act=silu}(%3)\n  %6 = Binary{op=mul}(%5, %4)\n", "%6"},
      /* not the two halves: [0, 4) and [4, 8) of 12 */
      {"  %3 = Narrow{axis=-1, start=0, len=4}(%2)\n  %4 = Narrow{axis=-1, start=4, len=4}(%2)\n"
       "  %5 = Activation{act=silu}(%3)\n  %6 = Binary{op=mul}(%5, %4)\n", "%6"},
      /* the gate is read elsewhere */
      {"  %3 = Narrow{axis=-1, start=0, len=6}(%2)\n  %4 = Narrow{axis=-1, start=6, len=6}(%2)\n"
       "  %5 = Activation{act=silu}(%3)\n  %6 = Binary{op=mul}(%5, %4)\n", "%6, %5"},
      /* gelu is not silu */
      {"  %3 = Narrow{axis=-1, start=0, len=6}(%2)\n  %4 = Narrow{axis=-1, start=6, len=6}(%2)\n"
       "  %5 = Activation{act=gelu}(%3)\n  %6 = Binary{op=mul}(%5, %4)\n", "%6"},
  };
  for (size_t i = 0; i < sizeof negatives / sizeof negatives[0]; i++) {
    g = swiglu_graph("f32", negatives[i][0], negatives[i][1]);
    f = fuse(g, NULL);
    CHECK(!find_op(f, RLX_OP_FusedSwiGLU), "swiglu negative %zu fused", i);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }
}

/* ---------------------------------------------------------------- elementwise */

static void test_elementwise(void) {
  /* a chain over three broadcasting inputs, with a compare and a cast */
  rlx_graph *g = parse(
      "graph \"ew\" {\n"
      "  %0 = Input{name=\"a\"} : f32[4,1]\n"
      "  %1 = Input{name=\"b\"} : f32[5]\n"
      "  %2 = Input{name=\"c\"} : f32[3,4,5]\n"
      "  %3 = Binary{op=mul}(%0, %1)\n"
      "  %4 = Activation{act=tanh}(%3)\n"
      "  %5 = Binary{op=sub}(%2, %4)\n"
      "  %6 = Compare{op=gt}(%5, %2)\n"
      "  %7 = Cast{to=f32}(%6)\n"
      "  %8 = Binary{op=add}(%7, %5)\n"
      "  %9 = Activation{act=leaky_relu, alpha=0.25}(%8)\n"
      "  outputs %9\n}\n");
  rlx_graph *f = fuse_checked("elementwise chain", g, 2, RLX_F32);
  /* the [4,5] part a*b -> tanh is its own region: inside the [3,4,5] one it
   * would be computed three times over */
  const ir_node *big = NULL, *small = NULL;
  for (int i = 0; f && i < f->n_nodes; i++)
    if (f->nodes[i].op == RLX_OP_ElementwiseRegion) *(f->nodes[i].out[0].shape.rank == 3 ? &big : &small) = &f->nodes[i];
  CHECK(big && big->a.chain.n == 5 && big->n_in == 2, "a region of 5 steps over c and the small region");
  CHECK(big && big->out[0].shape.d[0] == 3 && big->out[0].shape.d[1] == 4 && big->out[0].shape.d[2] == 5,
        "region output is the broadcast [3,4,5]");
  CHECK(small && small->a.chain.n == 2 && small->n_in == 2 && small->out[0].shape.d[0] == 4,
        "a region of 2 steps over a [4,1] and b [5] broadcasting to [4,5]");
  CHECK(f && f->n_nodes == 5, "inputs and the two regions only, got %d nodes", f ? f->n_nodes : -1);
  if (big) {
    const rlx_region_step *st = big->a.chain.s;
    CHECK(st[0].kind == RLX_STEP_BIN && st[0].op == RLX_BIN_SUB && st[0].a == 0 && st[0].b == 1, "step 0 sub(i0,i1)");
    CHECK(st[1].kind == RLX_STEP_CMP && st[1].op == RLX_CMP_GT && st[1].a == -1 && st[1].b == 0, "step 1 gt(s0,i0)");
    CHECK(st[3].kind == RLX_STEP_BIN && st[3].a == -3 && st[3].b == -1, "step 3 add(s2,s0)");
    CHECK(st[4].kind == RLX_STEP_ACT && st[4].op == RLX_ACT_LEAKY_RELU && st[4].alpha == 0.25, "leaky alpha kept");
  }
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* a diamond (one value read twice inside) and an intermediate read outside */
  g = parse(
      "graph \"ew2\" {\n"
      "  %0 = Input{name=\"a\"} : f16[6,7]\n"
      "  %1 = Activation{act=exp}(%0)\n"
      "  %2 = Activation{act=sin}(%1)\n"
      "  %3 = Activation{act=cos}(%1)\n"
      "  %4 = Binary{op=mul}(%2, %3)\n"
      "  %5 = Binary{op=div}(%4, %0)\n"
      "  %6 = Activation{act=abs}(%5)\n"
      "  %7 = Activation{act=sqrt}(%6)\n"
      "  outputs %7, %5\n}\n");
  f = fuse_checked("diamond and a cut", g, 2, RLX_F16);
  CHECK(count_op(f, RLX_OP_ElementwiseRegion) == 2 && count_op(f, RLX_OP_Activation) == 0,
        "two regions (cut at the read output)");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* integers and bools */
  g = parse(
      "graph \"ew3\" {\n"
      "  %0 = Input{name=\"a\"} : i32[9]\n"
      "  %1 = Input{name=\"b\"} : i32[9]\n"
      "  %2 = Binary{op=mul}(%0, %1)\n"
      "  %3 = Activation{act=neg}(%2)\n"
      "  %4 = Compare{op=le}(%3, %0)\n"
      "  %5 = Cast{to=f64}(%4)\n"
      "  outputs %5\n}\n");
  f = fuse_checked("integer chain", g, 1, RLX_F64);
  CHECK(count_op(f, RLX_OP_ElementwiseRegion) == 1, "one region");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* single ops stay; Where ends a region */
  g = parse(
      "graph \"ew4\" {\n"
      "  %0 = Input{name=\"a\"} : f32[9]\n"
      "  %1 = Activation{act=relu}(%0)\n"
      "  %2 = Compare{op=gt}(%1, %0)\n"
      "  %3 = Where(%2, %1, %0)\n"
      "  %4 = Activation{act=exp}(%3)\n"
      "  outputs %4\n}\n");
  int changed = -1;
  f = fuse(g, &changed);
  CHECK(changed == 0 && !find_op(f, RLX_OP_ElementwiseRegion), "no region of one op (relu read twice)");
  rlx_graph_free(g);
  rlx_graph_free(f);
}

/* ---------------------------------------------------------------- regions */

static void test_regions(void) {
  static const char *const head =
      "graph \"rg\" {\n"
      "  %0 = Input{name=\"x\"} : f32[1,2,3,4]\n"
      "  %1 = Input{name=\"skip\"} : f32[1,2,6,8]\n"
      "  %2 = Input{name=\"x1\"} : f32[1,2,3,4]\n"
      "  %3 = Param{name=\"s\"} : f32[8]\n";
  char text[2048];

  /* upsample + skip connection: one region with the prologue */
  snprintf(text, sizeof text, "%s  %%4 = ResizeNearest2x(%%0)\n  %%5 = Binary{op=add}(%%4, %%1)\n  outputs %%5\n}\n", head);
  rlx_graph *g = parse(text);
  rlx_graph *f = fuse_checked("resize prologue on one op", g, 1, RLX_F32);
  const ir_node *n = find_op(f, RLX_OP_ElementwiseRegion);
  CHECK(n && n->a.prologue == RLX_PROLOGUE_RESIZE_NEAREST_2X && n->n_in == 2 && !find_op(f, RLX_OP_ResizeNearest2x),
        "region{prologue=resize_nearest_2x}(x, skip)");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* the resize is input 1 of a region: it moves to input 0 */
  snprintf(text, sizeof text,
           "%s  %%4 = ResizeNearest2x(%%0)\n  %%5 = Binary{op=sub}(%%1, %%4)\n  %%6 = Binary{op=mul}(%%5, %%3)\n"
           "  %%7 = Activation{act=relu}(%%6)\n  outputs %%7\n}\n", head);
  g = parse(text);
  f = fuse_checked("resize prologue on a region", g, 2, RLX_F32);
  n = find_op(f, RLX_OP_ElementwiseRegion);
  CHECK(n && count_op(f, RLX_OP_ElementwiseRegion) == 1 && n->a.prologue == RLX_PROLOGUE_RESIZE_NEAREST_2X &&
        n->a.chain.n == 3 && f->nodes[n->in[0]].op == RLX_OP_Input && n->a.chain.s[0].b == 0,
        "one region, the resize input first");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* the upsampled tensor is read twice: it must exist */
  snprintf(text, sizeof text, "%s  %%4 = ResizeNearest2x(%%0)\n  %%5 = Binary{op=add}(%%4, %%1)\n  outputs %%5, %%4\n}\n", head);
  g = parse(text);
  f = fuse(g, NULL);
  CHECK(count_op(f, RLX_OP_ResizeNearest2x) == 1 && !find_op(f, RLX_OP_ElementwiseRegion), "no prologue");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* per-batch chains concatenated on axis 0 */
  snprintf(text, sizeof text,
           "%s  %%4 = Activation{act=silu}(%%0)\n  %%5 = Binary{op=mul}(%%4, %%3)\n"
           "  %%6 = Activation{act=silu}(%%2)\n  %%7 = Binary{op=mul}(%%6, %%3)\n"
           "  %%9 = Input{name=\"x2\"} : f32[2,2,3,4]\n  %%10 = Activation{act=silu}(%%9)\n  %%11 = Binary{op=mul}(%%10, %%3)\n"
           "  %%8 = Concat{axis=0}(%%5, %%7, %%11)\n  outputs %%8\n}\n", head);
  for (char *p = strstr(text, "f32[8]"); p; p = NULL) memcpy(p, "f32[4]", 6);
  g = parse(text);
  f = fuse_checked("batch of regions", g, 4, RLX_F32);
  n = find_op(f, RLX_OP_BatchElementwiseRegion);
  CHECK(n && n->a.num_batch_inputs == 3 && n->n_in == 4 && n->a.chain.n == 2 && !find_op(f, RLX_OP_Concat),
        "BatchElementwiseRegion{num_batch_inputs=3}(x, x1, x2, s)");
  CHECK(n && n->out[0].shape.d[0] == 4, "batch output dim 0 = 1 + 1 + 2");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* slices of one batch, each upsampled and added to a shared skip */
  g = parse(
      "graph \"rg2\" {\n"
      "  %0 = Input{name=\"x\"} : f32[2,2,3,4]\n"
      "  %1 = Input{name=\"skip\"} : f32[1,2,6,8]\n"
      "  %2 = Narrow{axis=0, start=0, len=1}(%0)\n"
      "  %3 = Narrow{axis=0, start=1, len=1}(%0)\n"
      "  %4 = ResizeNearest2x(%2)\n  %5 = Binary{op=add}(%4, %1)\n"
      "  %6 = ResizeNearest2x(%3)\n  %7 = Binary{op=add}(%6, %1)\n"
      "  %8 = Concat{axis=0}(%5, %7)\n  outputs %8\n}\n");
  f = fuse_checked("batch slices with a prologue", g, 3, RLX_F32);
  n = find_op(f, RLX_OP_BatchElementwiseRegion);
  CHECK(n && n->a.prologue == RLX_PROLOGUE_RESIZE_NEAREST_2X && n->a.num_batch_inputs == 2 &&
        !find_op(f, RLX_OP_ResizeNearest2x), "BatchElementwiseRegion with the prologue");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* the batch input is operand 1 of single ops: it moves to input 0 */
  snprintf(text, sizeof text,
           "%s  %%4 = Binary{op=sub}(%%1, %%0)\n  %%5 = Binary{op=sub}(%%1, %%2)\n"
           "  %%6 = Concat{axis=0}(%%4, %%5)\n  outputs %%6\n}\n", head);
  memcpy(strstr(text, "f32[1,2,6,8]"), "f32[1,2,3,4]", 12);
  g = parse(text);
  f = fuse_checked("batch input not first", g, 1, RLX_F32);
  n = find_op(f, RLX_OP_BatchElementwiseRegion);
  CHECK(n && n->a.chain.s[0].a == 1 && n->a.chain.s[0].b == 0, "sub(i1, i0): shared minus batch");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* negatives: parts differing in two inputs; concat on axis 1 */
  snprintf(text, sizeof text,
           "%s  %%4 = Binary{op=add}(%%0, %%2)\n  %%5 = Binary{op=add}(%%2, %%0)\n"
           "  %%6 = Concat{axis=0}(%%4, %%5)\n  %%7 = Activation{act=exp}(%%0)\n  %%8 = Activation{act=exp}(%%2)\n"
           "  %%9 = Concat{axis=1}(%%7, %%8)\n  outputs %%6, %%9\n}\n", head);
  g = parse(text);
  f = fuse(g, NULL);
  CHECK(!find_op(f, RLX_OP_BatchElementwiseRegion) && count_op(f, RLX_OP_Concat) == 2, "no batch region");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* chains of resizes */
  g = parse(
      "graph \"rg3\" {\n"
      "  %0 = Input{name=\"x\"} : f16[1,2,3,4]\n"
      "  %1 = ResizeNearest2x(%0)\n  %2 = ResizeNearest2x(%1)\n  %3 = ResizeNearest2x(%2)\n"
      "  %4 = Input{name=\"y\"} : i32[2,1,2,2]\n"
      "  %5 = ResizeNearest2x(%4)\n  %6 = ResizeNearest2x(%5)\n"
      "  outputs %3, %6, %5\n}\n");
  f = fuse_checked("resize chains", g, 1, RLX_F16);
  n = find_op(f, RLX_OP_TransformRegion);
  CHECK(n && n->a.transforms.n == 3 && count_op(f, RLX_OP_TransformRegion) == 1 &&
        count_op(f, RLX_OP_ResizeNearest2x) == 2, "one TransformRegion of 3 (y's first resize is read twice)");
  rlx_graph_free(g);
  rlx_graph_free(f);
}

/* ---------------------------------------------------------------- attention */

enum { SCALE_NONE, SCALE_MUL, SCALE_DIV, SCALE_Q, SCALE_NEG, SCALE_VECTOR };
enum { MASK_NONE, MASK_INPUT, MASK_INPUT_LEFT, MASK_CAUSAL, MASK_TRI, MASK_TOPLEFT, MASK_ZEROS };

typedef struct {
  rlx_dtype t;
  int rank3;            /* [N, S, D] heads folded into the batch */
  int bshd;             /* q, k, v are [B, S, H, D] projections transposed in the graph */
  int k_twice;          /* kᵀ by two transposes (torch: transpose(1, 2) then transpose(-1, -2)) */
  int out_transpose;    /* the result goes back to [B, S, H, D] */
  int scale, mask;
  int H, KVH, repeat;   /* KVH < H: repeat_kv when repeat, else broadcast (KVH 1) */
  int S, T, D, Dv;
  int softmax_axis;     /* -1 normally */
  int scores_out;       /* the scores are also an output */
  int cast_softmax;     /* f16 scores, softmax in f32, cast back (mismatched dtypes) */
} attn_spec;

/* Constant of n f32 values converted to dtype t. */
static rlx_node constant_of(rlx_graph *g, rlx_dtype t, int rank, const int64_t *dims, const double *v, int n) {
  void *data = calloc((size_t)n, 8);
  for (int i = 0; i < n; i++) store(t, data, i, v[i]);
  rlx_node c = rlx_constant(g, t, rank, dims, data);
  free(data);
  return c;
}

/* HF's repeat_kv: [B, KVH, L, D] -> [B, KVH, 1, L, D] -> expand rep -> [B, H, L, D]. */
static rlx_node repeat_kv_of(rlx_graph *g, rlx_node x, const attn_spec *a, int64_t len, int64_t d) {
  int64_t rep = a->H / a->KVH;
  int64_t d5[] = {2, a->KVH, 1, len, d}, e5[] = {2, a->KVH, rep, len, d}, d4[] = {2, a->H, len, d};
  return rlx_reshape(g, rlx_expand(g, rlx_reshape(g, x, 5, d5), 5, e5), 4, d4);
}

static rlx_node transpose4(rlx_graph *g, rlx_node x, int a, int b, int c, int d) {
  int64_t p[] = {a, b, c, d};
  return rlx_transpose(g, x, 4, p);
}

/* softmax(q kᵀ · scale + mask) v as an exporter writes it, per spec. */
static rlx_graph *attn_graph(const attn_spec *a) {
  rlx_graph *g = rlx_graph_new("attn");
  const int64_t B = 2, H = a->H, KVH = a->KVH, S = a->S, T = a->T, D = a->D, Dv = a->Dv;
  rlx_node q, k, v, kt;
  if (a->rank3) {
    int64_t qd[] = {B * H, S, D}, kd[] = {B * H, T, D}, vd[] = {B * H, T, Dv}, p[] = {0, 2, 1};
    q = rlx_input(g, "q", a->t, 3, qd);
    k = rlx_input(g, "k", a->t, 3, kd);
    v = rlx_input(g, "v", a->t, 3, vd);
    kt = rlx_transpose(g, k, 3, p);
  } else {
    if (a->bshd) {
      int64_t qd[] = {B, S, H, D}, kd[] = {B, T, KVH, D}, vd[] = {B, T, KVH, Dv};
      rlx_node xq = rlx_input(g, "q", a->t, 4, qd), xk = rlx_input(g, "k", a->t, 4, kd);
      q = transpose4(g, xq, 0, 2, 1, 3);
      v = transpose4(g, rlx_input(g, "v", a->t, 4, vd), 0, 2, 1, 3);
      k = a->k_twice || a->repeat ? transpose4(g, xk, 0, 2, 1, 3) : -1;
      kt = k < 0 ? transpose4(g, xk, 0, 2, 3, 1) : -1;
    } else {
      int64_t qd[] = {B, H, S, D}, kd[] = {B, KVH, T, D}, vd[] = {B, KVH, T, Dv};
      q = rlx_input(g, "q", a->t, 4, qd);
      k = rlx_input(g, "k", a->t, 4, kd);
      v = rlx_input(g, "v", a->t, 4, vd);
      kt = -1;
    }
    if (a->repeat) {
      k = repeat_kv_of(g, k, a, T, D);
      v = repeat_kv_of(g, v, a, T, Dv);
    }
    if (kt < 0) kt = transpose4(g, k, 0, 1, 3, 2);
  }
  int64_t one[] = {1};
  if (a->scale == SCALE_Q) q = rlx_mul(g, q, constant_of(g, a->t, 1, one, (double[]){0.5}, 1));
  rlx_node s = rlx_matmul(g, q, kt), scores = s;
  if (a->scale == SCALE_MUL) s = rlx_mul(g, s, constant_of(g, a->t, 1, one, (double[]){0.5}, 1));
  if (a->scale == SCALE_DIV) s = rlx_div(g, s, constant_of(g, a->t, 0, NULL, (double[]){2.0}, 1));
  if (a->scale == SCALE_NEG) s = rlx_mul(g, s, constant_of(g, a->t, 1, one, (double[]){-0.5}, 1));
  if (a->scale == SCALE_VECTOR) {
    double vals[64];
    for (int j = 0; j < T; j++) vals[j] = 0.5 + 0.01 * j;
    int64_t td[] = {T};
    s = rlx_mul(g, s, constant_of(g, a->t, 1, td, vals, (int)T));
  }
  rlx_node mask = -1;
  if (a->mask == MASK_INPUT || a->mask == MASK_INPUT_LEFT) {
    int64_t md4[] = {B, 1, 1, T}, md3[] = {B * H, S, T};
    mask = rlx_input(g, "mask", a->t, a->rank3 ? 3 : 4, a->rank3 ? md3 : md4);
  } else if (a->mask != MASK_NONE) {
    double vals[64 * 64];
    for (int i = 0; i < S; i++)
      for (int j = 0; j < T; j++) {
        int visible = a->mask == MASK_TOPLEFT ? j <= i : j <= i + (T - S);
        vals[i * T + j] = a->mask == MASK_ZEROS || visible ? 0 : -INFINITY;
        if (a->mask == MASK_TRI) vals[i * T + j] = -1e9;
      }
    int64_t md[] = {1, 1, S, T};
    int r = a->mask == MASK_TRI || a->rank3 ? 2 : 4;
    mask = constant_of(g, a->t, r, md + 4 - r, vals, (int)(S * T));
    if (a->mask == MASK_TRI) mask = rlx_tri(g, mask, 1, T - S + 1);
  }
  if (mask >= 0) s = a->mask == MASK_INPUT_LEFT ? rlx_add(g, mask, s) : rlx_add(g, s, mask);
  rlx_node p = a->cast_softmax ? rlx_cast(g, rlx_softmax(g, rlx_cast(g, s, RLX_F32), a->softmax_axis), a->t)
                               : rlx_softmax(g, s, a->softmax_axis);
  rlx_node o = rlx_matmul(g, p, v);
  if (a->out_transpose) o = transpose4(g, o, 0, 2, 1, 3);
  rlx_node outs[] = {o, scores};
  rlx_graph_set_outputs(g, a->scores_out ? 2 : 1, outs);
  CHECK(rlx_graph_status(g) == RLX_OK, "attention graph: %s", rlx_last_error());
  return g;
}

static attn_spec attn_base(void) {
  attn_spec a = {0};
  a.t = RLX_F32;
  a.scale = SCALE_MUL;
  a.mask = MASK_INPUT;
  a.H = a.KVH = 2;
  a.S = a.T = 5;
  a.D = a.Dv = 4;
  a.softmax_axis = -1;
  return a;
}

static const ir_node *check_attention(const char *what, const attn_spec *a, int want_layout, int want_mask,
                                      double want_scale, int want_kvh, int want_transposes) {
  rlx_graph *g = attn_graph(a);
  rlx_graph *f = fuse_checked(what, g, 1, a->t);
  const ir_node *n = find_op(f, RLX_OP_Attention);
  static ir_node copy;
  CHECK(n != NULL, "%s: an Attention", what);
  if (n) {
    copy = *n;
    CHECK(n->a.layout == want_layout || a->rank3, "%s: layout %lld", what, (long long)n->a.layout);
    CHECK(n->a.mask == want_mask, "%s: mask %s", what, ir_mask_names[n->a.mask]);
    CHECK(fabs(n->a.score_scale - want_scale) < 1e-12, "%s: scale %g", what, n->a.score_scale);
    CHECK(n->a.num_heads == (a->rank3 ? 1 : a->H) && n->a.num_kv_heads == want_kvh && n->a.head_dim == a->D,
          "%s: heads %lld kv %lld dim %lld", what, (long long)n->a.num_heads, (long long)n->a.num_kv_heads,
          (long long)n->a.head_dim);
    CHECK(count_op(f, RLX_OP_Transpose) == want_transposes, "%s: %d transposes left, want %d", what,
          count_op(f, RLX_OP_Transpose), want_transposes);
    CHECK(!find_op(f, RLX_OP_MatMul) && !find_op(f, RLX_OP_Softmax) && !find_op(f, RLX_OP_Binary) &&
          !find_op(f, RLX_OP_Expand) && !find_op(f, RLX_OP_Tri), "%s: the unfused ops are gone", what);
    CHECK(want_mask != RLX_MASK_CUSTOM ? n->n_in == 3 && !find_op(f, RLX_OP_Constant) : n->n_in == 4,
          "%s: mask input iff custom", what);
  }
  rlx_graph_free(g);
  rlx_graph_free(f);
  return n ? &copy : NULL;
}

static void test_attention(void) {
  attn_spec a = attn_base();
  for (int di = 0; di < 3; di++) {
    a.t = dtypes[di];
    check_attention(dtype_names[di], &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  }
  a = attn_base();
  a.t = RLX_F64;
  a.mask = MASK_NONE;
  check_attention("f64 without a mask", &a, RLX_LAYOUT_BHSD, RLX_MASK_NONE, 0.5, 2, 0);

  a = attn_base();
  a.mask = MASK_INPUT_LEFT;
  a.scale = SCALE_DIV;
  check_attention("mask on the left, divide", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.scale = SCALE_Q;
  check_attention("scale on q", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.scale = SCALE_NONE;
  check_attention("no scale", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 1.0, 2, 0);

  /* exporter layouts: [B, S, H, D] projections */
  a = attn_base();
  a.bshd = 1;
  a.out_transpose = 1;
  check_attention("bshd, kt by one transpose", &a, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.k_twice = 1;
  check_attention("bshd, kt by two transposes", &a, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.out_transpose = 0;
  check_attention("bshd without the output transpose", &a, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0.5, 2, 1);

  /* masks */
  a = attn_base();
  a.mask = MASK_CAUSAL;
  check_attention("causal constant", &a, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0.5, 2, 0);
  a.T = 7;
  check_attention("causal constant, T > S", &a, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0.5, 2, 0);
  a.mask = MASK_TRI;
  check_attention("causal by Tri", &a, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0.5, 2, 0);
  a.mask = MASK_TOPLEFT;
  check_attention("top-left aligned constant is custom", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.mask = MASK_ZEROS;
  check_attention("a zero mask is none", &a, RLX_LAYOUT_BHSD, RLX_MASK_NONE, 0.5, 2, 0);

  /* grouped kv heads */
  a = attn_base();
  a.H = 4;
  a.KVH = 2;
  a.repeat = 1;
  check_attention("repeat_kv bhsd", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.bshd = 1;
  a.out_transpose = 1;
  a.mask = MASK_CAUSAL;
  check_attention("repeat_kv bshd, causal", &a, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0.5, 2, 0);
  a = attn_base();
  a.H = 4;
  a.KVH = 1;
  check_attention("one kv head by broadcasting", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 1, 0);

  /* heads folded into the batch */
  a = attn_base();
  a.rank3 = 1;
  check_attention("rank 3", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 1, 0);
  a.mask = MASK_CAUSAL;
  a.T = 6;
  check_attention("rank 3 causal", &a, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0.5, 1, 0);

  /* two layers sharing one causal mask and one scale constant (as after CSE) */
  double minus_inf = -INFINITY, half = 0.5;
  int64_t qd[] = {2, 2, 5, 4}, sq[] = {5, 5}, one[] = {1};
  rlx_graph *g = rlx_graph_new("two_layers");
  rlx_node full = rlx_expand(g, constant_of(g, RLX_F32, 0, NULL, &minus_inf, 1), 2, sq);
  rlx_node mask = rlx_tri(g, full, 1, 1), scale = constant_of(g, RLX_F32, 1, one, &half, 1);
  rlx_node h = rlx_input(g, "q", RLX_F32, 4, qd), k = rlx_input(g, "k", RLX_F32, 4, qd);
  for (int layer = 0; layer < 2; layer++) {
    rlx_node s = rlx_add(g, rlx_mul(g, rlx_matmul(g, h, transpose4(g, k, 0, 1, 3, 2)), scale), mask);
    h = rlx_matmul(g, rlx_softmax(g, s, -1), h);
  }
  rlx_graph_set_outputs(g, 1, &h);
  rlx_graph *f = fuse_checked("two layers sharing a mask", g, 2, RLX_F32);
  CHECK(count_op(f, RLX_OP_Attention) == 2 && find_op(f, RLX_OP_Attention)->a.mask == RLX_MASK_CAUSAL,
        "both layers causal");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* must not fire */
  attn_spec neg[8];
  int n_neg = 0;
  neg[n_neg] = attn_base(), neg[n_neg++].scale = SCALE_VECTOR;  /* a per-key scale */
  neg[n_neg] = attn_base(), neg[n_neg++].scale = SCALE_NEG;     /* a negative scale */
  neg[n_neg] = attn_base(), neg[n_neg++].softmax_axis = 2;      /* softmax over queries */
  neg[n_neg] = attn_base(), neg[n_neg++].scores_out = 1;        /* the scores are read elsewhere */
  neg[n_neg] = attn_base(), neg[n_neg++].Dv = 3;                /* v's head dim differs */
  neg[n_neg] = attn_base(), neg[n_neg++].t = RLX_F64;           /* an F64 mask cannot be an F32 input */
  neg[n_neg] = attn_base(), neg[n_neg].t = RLX_F16, neg[n_neg++].cast_softmax = 1; /* softmax in f32 of f16 scores */
  for (int i = 0; i < n_neg; i++) {
    rlx_graph *g = attn_graph(&neg[i]);
    rlx_graph *f = fuse(g, NULL);
    CHECK(!find_op(f, RLX_OP_Attention) && count_op(f, RLX_OP_Softmax) == 1, "attention negative %d fused", i);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }
}

/* ---------------------------------------------------------------- model blocks */

/* dir/name, NUL-terminated (NULL, and a failed check, when unreadable). */
static char *read_model(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *text = read_file(path, NULL);
  CHECK(text != NULL, "cannot open %s", path);
  return text;
}

typedef struct {
  int op, count;
} op_count;

/* Fuses the graph in dir/name and checks the count of each op listed
 * (every op not listed must be absent), then the numerics. */
static void test_model_file(const char *dir, const char *name, const op_count *want, int n_want) {
  char *text = read_model(dir, name);
  if (!text) return;
  rlx_graph *g = parse(text);
  free(text);
  if (!g) return;
  rlx_graph *f = fuse_checked(name, g, -1, RLX_F32);
  for (int op = 0; f && op < RLX_OP_COUNT; op++) {
    int expect = 0;
    for (int i = 0; i < n_want; i++)
      if (want[i].op == op) expect = want[i].count;
    if (op == RLX_OP_Input || op == RLX_OP_Param) expect = count_op(g, op);
    CHECK(count_op(f, op) == expect, "%s: %d %s after fusion, want %d", name, count_op(f, op), ir_ops[op].name, expect);
  }
  rlx_graph_free(g);
  rlx_graph_free(f);
}

static void test_models(const char *dir) {
  static const op_count llama[] = {
      {RLX_OP_Attention, 1}, {RLX_OP_FusedSwiGLU, 1}, {RLX_OP_FusedResidualRmsNorm, 1},
      {RLX_OP_RmsNorm, 2},   {RLX_OP_MatMul, 6},      {RLX_OP_Rope, 2},
      {RLX_OP_Reshape, 4},   {RLX_OP_Binary, 1},      {RLX_OP_Expand, 1},
      {RLX_OP_Constant, 1},
  };
  test_model_file(dir, "llama_block.rlx", llama, sizeof llama / sizeof llama[0]);
  static const op_count bert[] = {
      {RLX_OP_Attention, 1}, {RLX_OP_FusedMatMulBiasAct, 6}, {RLX_OP_FusedResidualLN, 2},
      {RLX_OP_ElementwiseRegion, 1}, {RLX_OP_Reshape, 5},    {RLX_OP_Constant, 2},
  };
  test_model_file(dir, "bert_layer.rlx", bert, sizeof bert / sizeof bert[0]);

  /* the attributes the blocks' attention must carry */
  char *text = read_model(dir, "llama_block.rlx");
  rlx_graph *g = text ? parse(text) : NULL, *f = g ? fuse(g, NULL) : NULL;
  const ir_node *n = find_op(f, RLX_OP_Attention);
  CHECK(n && n->a.layout == RLX_LAYOUT_BSHD && n->a.mask == RLX_MASK_CAUSAL && n->a.num_heads == 4 &&
        n->a.num_kv_heads == 2 && n->a.head_dim == 8 && fabs(n->a.score_scale - 0.35355339) < 1e-7,
        "llama attention attributes");
  CHECK(n && f->nodes[n->in[0]].op == RLX_OP_Rope && f->nodes[n->in[2]].op == RLX_OP_Reshape,
        "llama attention reads the rotated q and the reshaped v");
  free(text);
  rlx_graph_free(g);
  rlx_graph_free(f);
  text = read_model(dir, "bert_layer.rlx");
  g = text ? parse(text) : NULL, f = g ? fuse(g, NULL) : NULL;
  n = find_op(f, RLX_OP_Attention);
  CHECK(n && n->a.layout == RLX_LAYOUT_BSHD && n->a.mask == RLX_MASK_CUSTOM && n->a.num_heads == 4 &&
        fabs(n->a.score_scale - 1 / 2.8284271) < 1e-7 && f->nodes[n->in[3]].op == RLX_OP_ElementwiseRegion,
        "bert attention attributes");
  const ir_node *ffn = NULL;
  for (int i = 0; f && i < f->n_nodes; i++)
    if (f->nodes[i].op == RLX_OP_FusedMatMulBiasAct && f->nodes[i].a.act == RLX_ACT_GELU) ffn = &f->nodes[i];
  CHECK(ffn != NULL, "bert FFN matmul fused with gelu");
  free(text);
  rlx_graph_free(g);
  rlx_graph_free(f);
}

/* ---------------------------------------------------------------- symbolic dims */

static void test_symbolic(void) {
  rlx_graph *g = parse(
      "graph \"sym\" {\n"
      "  %0 = Input{name=\"x\"} : f32[S,8]\n"
      "  %1 = Param{name=\"w\"} : f32[8,16]\n"
      "  %2 = Param{name=\"b\"} : f32[16]\n"
      "  %3 = MatMul(%0, %1)\n  %4 = Binary{op=add}(%3, %2)\n  %5 = Activation{act=silu}(%4)\n"
      "  %6 = Reshape{dims=[1, S, 4, 4]}(%5)\n"
      "  %7 = Transpose{perm=[0, 2, 1, 3]}(%6)\n"
      "  %8 = Transpose{perm=[0, 2, 3, 1]}(%6)\n"
      "  %9 = MatMul(%7, %8)\n"
      "  %10 = Input{name=\"mask\"} : f32[1,1,1,S]\n"
      "  %11 = Binary{op=add}(%9, %10)\n"
      "  %12 = Softmax{axis=-1}(%11)\n"
      "  %13 = Input{name=\"v\"} : f32[1,4,S,4]\n"
      "  %14 = MatMul(%12, %13)\n"
      "  %15 = Narrow{axis=-1, start=0, len=2}(%14)\n  %16 = Narrow{axis=-1, start=2, len=2}(%14)\n"
      "  %17 = Activation{act=silu}(%15)\n  %18 = Binary{op=mul}(%17, %16)\n"
      "  outputs %18\n}\n");
  int changed = -1;
  rlx_graph *f = fuse(g, &changed);
  CHECK(changed == 3 && count_op(f, RLX_OP_FusedMatMulBiasAct) == 1 && count_op(f, RLX_OP_Attention) == 1 &&
        count_op(f, RLX_OP_FusedSwiGLU) == 1, "symbolic S: matmul, attention and swiglu fused (%d groups)", changed);
  const ir_node *n = find_op(f, RLX_OP_Attention);
  CHECK(n && n->a.mask == RLX_MASK_CUSTOM && n->a.score_scale == 1.0 && n->a.num_heads == 4,
        "attention over symbolic S");
  double atol, rtol;
  tol_for(RLX_F32, &atol, &rtol);
  for (int64_t S = 1; f && S <= 7; S += 3) {
    sym_bind binds[] = {{"S", S}, {NULL, 0}};
    check_numerics("symbolic S", g, f, binds, atol, rtol);
  }
  rlx_graph_free(g);
  rlx_graph_free(f);
}

/* ---------------------------------------------------------------- random graphs */

/* Random graphs of elementwise ops over broadcasting shapes, per-slice
 * chains concatenated back, Where, upsampling and skip adds, with some
 * intermediates read as extra outputs: whatever the patterns make of them
 * (regions, prologues, batches, transforms), the result verifies and
 * computes what the graph computes. */
static void test_random_graphs(void) {
  static const rlx_act acts[] = {RLX_ACT_RELU, RLX_ACT_TANH, RLX_ACT_SIGMOID, RLX_ACT_NEG, RLX_ACT_ABS,
                                 RLX_ACT_SQUARE, RLX_ACT_SILU, RLX_ACT_GELU, RLX_ACT_SIN};
  static const rlx_binop bins[] = {RLX_BIN_ADD, RLX_BIN_SUB, RLX_BIN_MUL, RLX_BIN_MAX, RLX_BIN_MIN};
  int64_t shapes[][3] = {{3, 4, 5}, {4, 5}, {5}, {3, 1, 5}, {4, 1}}, ranks[] = {3, 2, 1, 3, 2};
  int64_t img[] = {1, 2, 3, 4}, big[] = {1, 2, 6, 8};
  int fused_total = 0, kinds[4] = {0};
  for (int trial = 0; trial < 120; trial++) {
    char name[32];
    snprintf(name, sizeof name, "random%d", trial);
    rng_seed(name);
    rlx_graph *g = rlx_graph_new(name);
    rlx_node pool[256], full[256], imgs[64];
    int n = 0, n_full = 0, n_img = 0;
    for (int i = 0; i < 5; i++) {
      snprintf(name, sizeof name, "a%d", i);
      pool[n++] = rlx_input(g, name, RLX_F32, (int)ranks[i], shapes[i]);
    }
    full[n_full++] = pool[0];
    imgs[n_img++] = rlx_input(g, "img", RLX_F32, 4, img);
    rlx_node skip = rlx_input(g, "skip", RLX_F32, 4, big);
    int steps = 8 + (int)(rng_unit() * 20);
    for (int k = 0; k < steps && n < 240; k++) {
      double u = rng_unit();
      rlx_node x = pool[(int)(rng_unit() * n)], y = pool[(int)(rng_unit() * n)], r;
      rlx_act act = acts[(int)(rng_unit() * 9)];
      if (u < 0.3) {
        r = rlx_activation(g, act, x);
      } else if (u < 0.6) {
        r = rlx_binary(g, bins[(int)(rng_unit() * 5)], x, y);
      } else if (u < 0.7) {
        r = rlx_cast(g, rlx_compare(g, (rlx_cmpop)(rng_unit() * RLX_CMP_COUNT), x, y), RLX_F32);
      } else if (u < 0.75) {
        r = rlx_where(g, rlx_compare(g, RLX_CMP_GT, x, y), x, y);
      } else if (u < 0.85) {
        /* the same chain on each batch slice of a [3,4,5] tensor, concatenated */
        rlx_node src = full[(int)(rng_unit() * n_full)], shared = pool[1 + (int)(rng_unit() * 2)], parts[3];
        for (int i = 0; i < 3; i++) parts[i] = rlx_mul(g, rlx_activation(g, act, rlx_narrow(g, src, 0, i, 1)), shared);
        r = rlx_concat(g, 3, parts, 0);
      } else {
        /* upsample and add to the skip stream (each new sum is the next skip) */
        rlx_node up = rlx_resize_nearest2x(g, imgs[(int)(rng_unit() * n_img)]);
        if (rng_unit() < 0.3) up = rlx_narrow(g, rlx_narrow(g, rlx_resize_nearest2x(g, up), 2, 0, 6), 3, 0, 8);
        if (rng_unit() < 0.5)
          imgs[n_img++ % 64] = rlx_activation(g, act, rlx_narrow(g, rlx_narrow(g, up, 2, 0, 3), 3, 0, 4));
        r = rlx_add(g, up, skip);
        skip = rng_unit() < 0.5 ? rlx_activation(g, act, r) : r;
        continue;
      }
      pool[n++] = r;
      rlx_dtype t;
      int64_t d[RLX_MAX_RANK];
      if (rlx_node_type(g, r, &t, d) == 3 && d[0] == 3 && d[1] == 4 && d[2] == 5 && n_full < 256) full[n_full++] = r;
    }
    rlx_node outs[] = {pool[n - 1], pool[(int)(rng_unit() * n)], skip, imgs[(n_img - 1) % 64]};
    rlx_graph_set_outputs(g, 4, outs);
    CHECK(rlx_graph_status(g) == RLX_OK, "%s: %s", name, rlx_last_error());
    int changed = 0;
    rlx_graph *f = fuse(g, &changed);
    fused_total += changed;
    for (int i = 0; f && i < f->n_nodes; i++) {
      const ir_node *m = &f->nodes[i];
      kinds[0] += m->op == RLX_OP_ElementwiseRegion && m->a.prologue == RLX_PROLOGUE_NONE;
      kinds[1] += m->op == RLX_OP_ElementwiseRegion && m->a.prologue != RLX_PROLOGUE_NONE;
      kinds[2] += m->op == RLX_OP_BatchElementwiseRegion;
      kinds[3] += m->op == RLX_OP_TransformRegion;
    }
    if (f) check_numerics(g->name, g, f, NULL, 1e-5, 1e-4);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }
  CHECK(fused_total > 120 && kinds[0] && kinds[1] && kinds[2] && kinds[3],
        "random graphs: %d groups: %d regions, %d with a prologue, %d batch regions, %d transform regions",
        fused_total, kinds[0], kinds[1], kinds[2], kinds[3]);
}

/* Every op of the op table once (tests/data/every_op.rlx, with symbolic
 * dims, multi-output nodes and fused ops already in it): the pass keeps a
 * graph that verifies and whose text form parses back to the same graph. */
static void test_every_op(const char *dir) {
  char *text = read_model(dir, "every_op.rlx");
  rlx_graph *g = text ? parse(text) : NULL;
  free(text);
  if (!g) return;
  rlx_graph *f = fuse(g, NULL);
  char *printed = f ? rlx_graph_to_text(f) : NULL;
  rlx_graph *back = printed ? parse(printed) : NULL;
  CHECK(back && rlx_graph_hash(back) == rlx_graph_hash(f), "every_op: the fused graph round-trips as text");
  CHECK(f && rlx_graph_num_outputs(f) == rlx_graph_num_outputs(g), "every_op: same outputs");
  free(printed);
  rlx_graph_free(back);
  rlx_graph_free(f);
  rlx_graph_free(g);
}

/* ---------------------------------------------------------------- the pass itself */

static void test_pass(void) {
  rlx_graph *g = parse(
      "graph \"p\" {\n"
      "  %0 = Input{name=\"x\"} : f32[4,8]\n  %1 = Param{name=\"w\"} : f32[8,6]\n"
      "  %2 = Param{name=\"b\"} : f32[6]\n  %3 = MatMul(%0, %1)\n  %4 = Binary{op=add}(%3, %2)\n"
      "  %5 = Activation{act=tanh}(%4)\n  outputs %5\n}\n");
  pass_options opt;
  memset(&opt, 0, sizeof opt);
  rlx_graph *out = NULL;
  int changed = -1;
  /* fuse = 0: an unchanged copy */
  CHECK(pass_fuse(g, &opt, &out, &changed) == RLX_OK && out && changed == 0 &&
        rlx_graph_hash(out) == rlx_graph_hash(g), "fuse off: the same graph");
  rlx_graph_free(out);
  /* NULL options: fusion on; the input is never modified */
  uint64_t before = rlx_graph_hash(g);
  CHECK(pass_fuse(g, NULL, &out, &changed) == RLX_OK && changed == 1 && count_op(out, RLX_OP_FusedMatMulBiasAct) == 1,
        "NULL options fuse");
  CHECK(rlx_graph_hash(g) == before, "the input graph is unchanged");
  /* a second run finds nothing more */
  rlx_graph *again = NULL;
  CHECK(pass_fuse(out, NULL, &again, &changed) == RLX_OK && changed == 0 &&
        rlx_graph_hash(again) == rlx_graph_hash(out), "fusion is idempotent");
  rlx_graph_free(again);
  rlx_graph_free(out);
  CHECK_ERR(pass_fuse(NULL, NULL, &out, &changed), RLX_ERR_INVALID, "pass_fuse");
  CHECK(out == NULL, "no graph on failure");
  rlx_graph_free(g);

  /* a graph with a recorded builder error reports it */
  g = rlx_graph_new("bad");
  int64_t d[] = {2};
  rlx_node x = rlx_input(g, "x", RLX_F32, 1, d);
  rlx_matmul(g, x, rlx_input(g, "y", RLX_I32, 1, d));
  CHECK_ERR(pass_fuse(g, NULL, &out, &changed), RLX_ERR_DTYPE, "MatMul");
  rlx_graph_free(g);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_fuse DATA_DIR\n");
    return 2;
  }
  test_matmul_bias_act();
  test_conv();
  test_residual_norm();
  test_swiglu();
  test_elementwise();
  test_regions();
  test_attention();
  test_models(argv[1]);
  test_symbolic();
  test_every_op(argv[1]);
  test_random_graphs();
  test_pass();
  return check_report();
}
