/* test_fuse — the fusion passes (src/pass/fuse*.c) through pass_fuse: the
 * conv, matmul, norm, SwiGLU, elementwise and region patterns
 * (test_fuse_attention.c has attention, test_fuse_graphs.c whole graphs
 * and the pass itself).
 *
 * For every pattern: structural tests (the fused op appears with the
 * right attributes, the ops it replaces are gone, and the cases where it
 * must not fire leave the graph alone) and numerical tests: the graph
 * before and after pass_fuse, each compiled with fusion off, run on the
 * same random data, and the graph compiled with fusion on (the runtime's
 * own pipeline), all agree within the dtype's tolerance.
 */
#include "fuse_test_util.h"

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

int main(void) {
  test_matmul_bias_act();
  test_conv();
  test_residual_norm();
  test_swiglu();
  test_elementwise();
  test_regions();
  return check_report();
}
