/* test_pass_decompose.c — every fused op of ops.def has a decomposition
 * into primitive ops, and on random data of several shapes and dtypes the
 * decomposed graph gives what the fused CPU kernel gives (within the
 * dtype's tolerance; exactly for the elementwise regions, which round each
 * step as the primitives do). */
#include "pass_test_util.h"

static const rlx_dtype floats[] = {RLX_F32, RLX_F64, RLX_F16, RLX_BF16};
#define N_FLOATS 4

/* Decomposes every fused op of g (legalize with decompose_fused), checks
 * no fused op is left, and compares the two graphs on random data. */
static void check_decomposition(rlx_graph *g, rlx_node y, rlx_dtype t, double loosen, const char *what) {
  rlx_graph_set_outputs(g, 1, &y);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s: %s", what, rlx_last_error());
  if (rlx_graph_status(g) != RLX_OK) {
    rlx_graph_free(g);
    return;
  }
  pass_options opt;
  memset(&opt, 0, sizeof opt);
  opt.decompose_fused = 1;
  int changed;
  rlx_graph *d = pt_apply(pass_legalize, g, &opt, &changed);
  if (d) {
    int fused_left = 0;
    for (int i = 0; i < d->n_nodes; i++) fused_left += ir_ops[d->nodes[i].op].category == RLX_CAT_FUSED;
    CHECK(changed >= 1 && fused_left == 0, "%s: decomposed %d, %d fused ops left", what, changed, fused_left);
    double atol, rtol;
    default_tolerance(t, &atol, &rtol);
    pt_check_same(d, g, atol * loosen, rtol * loosen, what);
  }
  rlx_graph_free(d);
  rlx_graph_free(g);
}

static void test_matmul_bias_act(void) {
  struct { int rank; int64_t a[4]; int64_t n; rlx_act act; } cases[] = {
    {2, {5, 7}, 3, RLX_ACT_GELU}, {4, {2, 3, 4, 6}, 5, RLX_ACT_SILU}, {1, {4}, 3, RLX_ACT_RELU},
    {3, {3, 1, 8}, 2, RLX_ACT_NONE}, {2, {6, 16}, 9, RLX_ACT_LEAKY_RELU}, {2, {1, 1}, 1, RLX_ACT_TANH},
  };
  for (int t = 0; t < N_FLOATS; t++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      rlx_graph *g = rlx_graph_new("mba");
      int64_t K = cases[c].a[cases[c].rank - 1], wd[] = {K, cases[c].n}, bd[] = {cases[c].n};
      rlx_node a = rlx_input(g, "a", floats[t], cases[c].rank, cases[c].a);
      rlx_node w = rlx_param(g, "w", floats[t], 2, wd), b = rlx_param(g, "b", floats[t], 1, bd);
      char what[96];
      snprintf(what, sizeof what, "FusedMatMulBiasAct %s case %zu", rlx_dtype_name(floats[t]), c);
      check_decomposition(g, rlx_fused_matmul_bias_act(g, a, w, b, cases[c].act, 0.2), floats[t], 1, what);
    }
}

static void test_residual_norms(void) {
  struct { int rank; int64_t d[3]; int bias; } cases[] = {{2, {3, 8}, 1}, {3, {2, 3, 5}, 0}, {1, {7}, 1}, {2, {4, 33}, 0}};
  for (int rms = 0; rms < 2; rms++)
    for (int t = 0; t < N_FLOATS; t++)
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rlx_graph *g = rlx_graph_new("resnorm");
        int64_t L = cases[c].d[cases[c].rank - 1], ld[] = {L};
        rlx_node x = rlx_input(g, "x", floats[t], cases[c].rank, cases[c].d);
        rlx_node r = rlx_input(g, "res", floats[t], cases[c].rank, cases[c].d);
        rlx_node b = cases[c].bias ? rlx_param(g, "bias", floats[t], 1, ld) : -1;
        rlx_node gm = rlx_param(g, "gamma", floats[t], 1, ld), bt = rlx_param(g, "beta", floats[t], 1, ld);
        rlx_node y = rms ? rlx_fused_residual_rms_norm(g, x, r, b, gm, bt, 1e-5)
                         : rlx_fused_residual_ln(g, x, r, b, gm, bt, 1e-5);
        char what[96];
        snprintf(what, sizeof what, "%s %s case %zu", rms ? "FusedResidualRmsNorm" : "FusedResidualLN",
                 rlx_dtype_name(floats[t]), c);
        check_decomposition(g, y, floats[t], 1, what);
      }
}

static void test_swiglu(void) {
  struct { int rank; int64_t d[3]; int cast_to; } cases[] = {{2, {3, 8}, -1}, {3, {2, 2, 6}, RLX_F16}, {1, {2}, -1},
                                                             {2, {5, 30}, RLX_F64}};
  for (int t = 0; t < N_FLOATS; t++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      rlx_graph *g = rlx_graph_new("swiglu");
      rlx_node x = rlx_input(g, "x", floats[t], cases[c].rank, cases[c].d);
      rlx_dtype out_t = cases[c].cast_to >= 0 ? (rlx_dtype)cases[c].cast_to : floats[t];
      char what[96];
      snprintf(what, sizeof what, "FusedSwiGLU %s case %zu", rlx_dtype_name(floats[t]), c);
      /* the decomposition rounds to x's dtype before the cast: the coarser one's tolerance */
      rlx_dtype tol_t = ir_dtypes[out_t].size < ir_dtypes[floats[t]].size ? out_t : floats[t];
      check_decomposition(g, rlx_fused_swiglu(g, x, cases[c].cast_to), tol_t, 1, what);
    }
  /* a symbolic last dim has no Narrow bounds: no decomposition, and legalize leaves it */
  rlx_graph *g = rlx_graph_new("swiglu_sym");
  int64_t d[] = {2, rlx_dim_sym(g, "H")};
  rlx_node y = rlx_fused_swiglu(g, rlx_input(g, "x", RLX_F32, 2, d), -1);
  rlx_graph_set_outputs(g, 1, &y);
  CHECK(!pass_can_decompose(g, y) && pass_has_decomposition(RLX_OP_FusedSwiGLU), "symbolic swiglu");
  pass_options opt;
  memset(&opt, 0, sizeof opt);
  opt.decompose_fused = 1;
  int changed;
  rlx_graph *l = pt_apply(pass_legalize, g, &opt, &changed);
  if (l) CHECK(changed == 0 && pt_count(l, "FusedSwiGLU") == 1, "symbolic swiglu is left as it is");
  rlx_graph *dst = ir_graph_new_like(g);
  rlx_node in[] = {0};
  CHECK(pass_decompose(dst, g, y, in) < 0 && rlx_graph_status(dst) == RLX_ERR_UNSUPPORTED, "pass_decompose refuses");
  rlx_graph_free(dst);
  rlx_graph_free(l);
  rlx_graph_free(g);
}

/* Regions: several inputs with broadcasting, every step kind, integer and
 * bool steps, dead steps, and the resize prologue. Exact. */
static void test_regions(void) {
  int64_t x_d[] = {2, 3}, b_d[] = {3}, img[] = {1, 2, 2, 3};
  for (int t = 0; t < 3; t++) {
    rlx_dtype dt = t == 0 ? RLX_F32 : t == 1 ? RLX_BF16 : RLX_I32;
    rlx_graph *g = rlx_graph_new("region");
    rlx_node ins[] = {rlx_input(g, "x", dt, 2, x_d), rlx_input(g, "b", dt, 1, b_d)};
    int int_t = dt == RLX_I32;
    rlx_region_step s[] = {
      {RLX_STEP_BIN, RLX_BIN_MUL, 0, 1, RLX_F32, 0},                                   /* s0 = x * b */
      {RLX_STEP_ACT, int_t ? RLX_ACT_ABS : RLX_ACT_GELU, -1, 0, RLX_F32, 0},            /* s1 */
      {RLX_STEP_ACT, RLX_ACT_NEG, 0, 0, RLX_F32, 0},                                   /* s2: dead */
      {RLX_STEP_CMP, RLX_CMP_LT, -2, 0, RLX_F32, 0},                                   /* s3 = s1 < x */
      {RLX_STEP_CAST, 0, -4, 0, dt, 0},                                                /* s4 = cast s3 */
      {RLX_STEP_BIN, RLX_BIN_ADD, -5, -2, RLX_F32, 0},                                 /* s5 = s4 + s1 */
      {RLX_STEP_CAST, 0, -6, 0, RLX_F16, 0},                                           /* s6 */
      {RLX_STEP_ACT, int_t ? RLX_ACT_SQUARE : RLX_ACT_LEAKY_RELU, -7, 0, RLX_F32, 0.3}, /* s7 */
    };
    check_decomposition(g, rlx_elementwise_region(g, 2, ins, 8, s, RLX_PROLOGUE_NONE), RLX_F16, 0,
                        rlx_dtype_name(dt));
  }
  rlx_graph *g = rlx_graph_new("region_up2x");
  int64_t up_d[] = {1, 2, 4, 6};
  rlx_node ins[] = {rlx_input(g, "x", RLX_F32, 4, img), rlx_input(g, "y", RLX_F32, 4, up_d)};
  rlx_region_step s[] = {{RLX_STEP_BIN, RLX_BIN_SUB, 1, 0, RLX_F32, 0}, {RLX_STEP_ACT, RLX_ACT_SIGMOID, -1, 0, RLX_F32, 0}};
  check_decomposition(g, rlx_elementwise_region(g, 2, ins, 2, s, RLX_PROLOGUE_RESIZE_NEAREST_2X), RLX_F32, 0,
                      "ElementwiseRegion resize prologue");

  g = rlx_graph_new("batch_region");
  int64_t a_d[] = {2, 3}, a2_d[] = {1, 3}, sh_d[] = {3};
  rlx_node bins[] = {rlx_input(g, "a", RLX_F32, 2, a_d), rlx_input(g, "a2", RLX_F32, 2, a2_d),
                     rlx_input(g, "s", RLX_F32, 1, sh_d)};
  rlx_region_step bs[] = {{RLX_STEP_BIN, RLX_BIN_MAX, 0, 1, RLX_F32, 0}, {RLX_STEP_ACT, RLX_ACT_EXP, -1, 0, RLX_F32, 0}};
  check_decomposition(g, rlx_batch_elementwise_region(g, 3, bins, 2, 2, bs, RLX_PROLOGUE_NONE), RLX_F32, 0,
                      "BatchElementwiseRegion");
  g = rlx_graph_new("batch_region_up2x");
  int64_t i1[] = {1, 2, 2, 2}, i2[] = {2, 2, 2, 2};
  rlx_node uins[] = {rlx_input(g, "a", RLX_F16, 4, i1), rlx_input(g, "a2", RLX_F16, 4, i2)};
  rlx_region_step us[] = {{RLX_STEP_ACT, RLX_ACT_TANH, 0, 0, RLX_F32, 0}};
  check_decomposition(g, rlx_batch_elementwise_region(g, 2, uins, 2, 1, us, RLX_PROLOGUE_RESIZE_NEAREST_2X),
                      RLX_F16, 0, "BatchElementwiseRegion resize prologue");

  const int two[] = {RLX_PROLOGUE_RESIZE_NEAREST_2X, RLX_PROLOGUE_RESIZE_NEAREST_2X};
  for (int t = 0; t < 2; t++) {
    g = rlx_graph_new("transform");
    rlx_node x = rlx_input(g, "x", t ? RLX_U8 : RLX_F64, 4, img);
    check_decomposition(g, rlx_transform_region(g, x, 1 + t, two), RLX_F64, 0, "TransformRegion");
  }
}

static void test_attention_block(void) {
  struct { int heads, kv, hd, rope; rlx_mask_kind mask; int window; double softcap; int64_t B, S; } cases[] = {
    {4, 2, 4, 1, RLX_MASK_CAUSAL, 0, 0, 2, 5},  {2, 2, 8, 0, RLX_MASK_NONE, 0, 0, 1, 3},
    {4, 1, 4, 1, RLX_MASK_SLIDING_WINDOW, 2, 0, 1, 6}, {2, 1, 6, 1, RLX_MASK_CAUSAL, 0, 3.0, 2, 4},
  };
  for (int t = 0; t < N_FLOATS; t++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      rlx_graph *g = rlx_graph_new("attn_block");
      int64_t hidden = 12, qd = cases[c].heads * cases[c].hd, kvd = cases[c].kv * cases[c].hd;
      int64_t xd[] = {cases[c].B, cases[c].S, hidden}, wq[] = {hidden, qd}, wkv[] = {hidden, kvd}, wo[] = {qd, hidden};
      int64_t td[] = {cases[c].S, cases[c].hd / 2};
      rlx_node x = rlx_input(g, "x", floats[t], 3, xd);
      /* weights scaled by 1/sqrt(fan-in) as in a trained model, so scores stay O(1) */
      double inv_h = 1 / sqrt((double)hidden), inv_q = 1 / sqrt((double)qd);
      rlx_node sh = rlx_cast(g, rlx_constant(g, RLX_F64, 0, NULL, &inv_h), floats[t]);
      rlx_node sq = rlx_cast(g, rlx_constant(g, RLX_F64, 0, NULL, &inv_q), floats[t]);
      rlx_node q = rlx_mul(g, rlx_param(g, "wq", floats[t], 2, wq), sh);
      rlx_node k = rlx_mul(g, rlx_param(g, "wk", floats[t], 2, wkv), sh);
      rlx_node v = rlx_mul(g, rlx_param(g, "wv", floats[t], 2, wkv), sh);
      rlx_node o = rlx_mul(g, rlx_param(g, "wo", floats[t], 2, wo), sq);
      rlx_node cs = -1, sn = -1;
      if (cases[c].rope) {
        cs = rlx_input(g, "cos", RLX_F32, 2, td);
        sn = rlx_input(g, "sin", RLX_F32, 2, td);
      }
      rlx_attention_desc ad = {cases[c].heads, cases[c].kv, cases[c].hd, cases[c].mask, cases[c].window, 0,
                               cases[c].softcap, RLX_LAYOUT_BSHD};
      rlx_rope_desc rd = {cases[c].hd, 0, c % 2 ? RLX_ROPE_NEOX : RLX_ROPE_NORMAL, 10000, 1};
      char what[96];
      snprintf(what, sizeof what, "FusedAttentionBlock %s case %zu", rlx_dtype_name(floats[t]), c);
      /* q, k, v, the ropes and the attention each rounded to the dtype, where the fused
       * kernel rounds once: twice the tolerance (f16 needs 1.8x in the sliding-window case) */
      check_decomposition(g, rlx_fused_attention_block(g, x, q, k, v, o, cs, sn, &ad, cases[c].rope ? &rd : NULL),
                          floats[t], 2, what);
    }
}

/* ops.def: every fused op has a decomposition; no other op claims one. */
static void test_every_fused_op(void) {
  for (int op = 0; op < RLX_OP_COUNT; op++)
    CHECK(pass_has_decomposition(op) == (ir_ops[op].category == RLX_CAT_FUSED), "%s: decomposition %d",
          ir_ops[op].name, pass_has_decomposition(op));
}

int main(void) {
  test_every_fused_op();
  test_matmul_bias_act();
  test_residual_norms();
  test_swiglu();
  test_regions();
  test_attention_block();
  return check_report();
}
