/* test_pass_fold.c — constant folding alone: nodes of constants become
 * constants (chains in one sweep, multi-output nodes, Iota), and nothing
 * else does (inputs, params, oversized results, failing evaluations, no
 * evaluator); the folded graph computes what the original computes. */
#include "pass_test_util.h"

static const int64_t d4[] = {4}, d23[] = {2, 3};

/* y = x * exp(neg(c1 + c2)) + w: the constant chain folds, the rest stays. */
static void test_chain(void) {
  rlx_graph *g = rlx_graph_new("chain");
  float c1v[] = {1, 2, 3, 4}, c2v[] = {0.5f, -1, 0.25f, 2};
  rlx_node x = rlx_input(g, "x", RLX_F32, 1, d4), w = rlx_param(g, "w", RLX_F32, 1, d4);
  rlx_node c = rlx_add(g, rlx_constant(g, RLX_F32, 1, d4, c1v), rlx_constant(g, RLX_F32, 1, d4, c2v));
  rlx_node e = rlx_activation(g, RLX_ACT_EXP, rlx_activation(g, RLX_ACT_NEG, c));
  rlx_node y = rlx_add(g, rlx_mul(g, x, e), rlx_activation(g, RLX_ACT_RELU, w));
  rlx_graph_set_outputs(g, 1, &y);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  int changed;
  rlx_graph *f = pt_apply(pass_fold, g, NULL, &changed);
  if (!f) return;
  CHECK(changed == 3, "folded %d (want add, neg, exp)", changed);
  CHECK(pt_count(f, "Activation") == 1, "relu(param) must stay, the constant chain must go: %d activations",
        pt_count(f, "Activation"));
  CHECK(pt_count(f, "Binary") == 2, "x * c and + relu(w) stay: %d binaries", pt_count(f, "Binary"));
  CHECK(pt_count(f, "Input") == 1 && pt_count(f, "Param") == 1, "inputs and params are never folded");
  /* the new constant holds exp(-(c1 + c2)) exactly as the kernel computes it */
  const ir_node *k = NULL;
  for (int i = 0; i < f->n_nodes; i++)
    if (f->nodes[i].op == RLX_OP_Constant && f->nodes[i].a.data.n == sizeof c1v) k = &f->nodes[i];
  int values_ok = k != NULL;
  for (int i = 0; k && i < 4; i++) {
    float got;
    memcpy(&got, k->a.data.p + 4 * i, 4);
    values_ok &= fabs(got - exp(-(c1v[i] + c2v[i]))) < 1e-6;
  }
  CHECK(values_ok, "folded values");
  pt_check_same(g, f, 0, 0, "chain");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

/* TopK of a constant: values and indices both become constants. */
static void test_multi_output(void) {
  rlx_graph *g = rlx_graph_new("topk");
  float cv[] = {3, 1, 4, 1, 5, 9};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, d23);
  rlx_node idx;
  rlx_node vals = rlx_topk(g, rlx_constant(g, RLX_F32, 2, d23, cv), 2, -1, &idx);
  rlx_node outs[] = {rlx_add(g, rlx_narrow(g, x, 1, 0, 2), vals), idx, rlx_get_output(g, vals, 0)};
  rlx_graph_set_outputs(g, 3, outs);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  rlx_graph *f = pt_apply(pass_fold, g, NULL, NULL);
  if (!f) return;
  CHECK(pt_count(f, "TopK") == 0 && pt_count(f, "GetOutput") == 0, "TopK and its GetOutputs fold");
  CHECK(pt_count(f, "Narrow") == 1, "the input's Narrow stays");
  pt_check_same(g, f, 0, 0, "topk");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

/* Size limit: a broadcast to 64 KiB folds, one past it does not. Iota
 * (no inputs) folds. */
static void test_limits(void) {
  float one = 1;
  int64_t small[] = {128, 128}, big[] = {129, 128}; /* 65536 and 66048 bytes of f32 */
  rlx_graph *g = rlx_graph_new("limits");
  rlx_node c = rlx_constant(g, RLX_F32, 0, NULL, &one);
  rlx_node y[] = {rlx_expand(g, c, 2, small), rlx_expand(g, c, 2, big), rlx_iota(g, RLX_I32, 1, d4, 0)};
  rlx_graph_set_outputs(g, 3, y);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  int changed;
  rlx_graph *f = pt_apply(pass_fold, g, NULL, &changed);
  if (!f) return;
  CHECK(changed == 2 && pt_count(f, "Expand") == 1 && pt_count(f, "Iota") == 0,
        "folded %d, %d Expand left (want the 64 KiB one and Iota folded, the larger kept)", changed,
        pt_count(f, "Expand"));
  pt_check_same(g, f, 0, 0, "limits");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

/* An evaluation that fails (index out of range) leaves the node, so the
 * error comes when the graph runs; without an evaluator nothing folds. */
static void test_not_folded(void) {
  rlx_graph *g = rlx_graph_new("bad_gather");
  float table[] = {1, 2, 3, 4};
  int32_t bad[] = {7};
  int64_t d1[] = {1};
  rlx_node y = rlx_gather(g, rlx_constant(g, RLX_F32, 1, d4, table), rlx_constant(g, RLX_I32, 1, d1, bad), 0);
  rlx_graph_set_outputs(g, 1, &y);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  int changed;
  rlx_graph *f = pt_apply(pass_fold, g, NULL, &changed);
  if (f) CHECK(changed == 0 && pt_count(f, "Gather") == 1, "a failing Gather must not fold");
  rlx_graph_free(f);
  rlx_session *s = NULL;
  CHECK(rlx_compile(g, NULL, &s) == RLX_OK, "%s", rlx_last_error());
  if (s) CHECK_ERR(rlx_run(s), RLX_ERR_INVALID, "out of range");
  rlx_session_free(s);
  rlx_graph_free(g);

  g = rlx_graph_new("no_eval");
  float c1v[] = {1, 2, 3, 4};
  rlx_node z = rlx_activation(g, RLX_ACT_EXP, rlx_constant(g, RLX_F32, 1, d4, c1v));
  rlx_graph_set_outputs(g, 1, &z);
  pass_options none;
  memset(&none, 0, sizeof none);
  f = pt_apply(pass_fold, g, &none, &changed);
  if (f) CHECK(changed == 0 && pt_count(f, "Activation") == 1, "no evaluator, no folding");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

/* Every dtype through one folded Cast chain; symbolic shapes never fold. */
static void test_dtypes_and_symbols(void) {
  const rlx_dtype types[] = {RLX_F32, RLX_F16, RLX_BF16, RLX_F64, RLX_I8, RLX_U8, RLX_I32, RLX_I64, RLX_BOOL};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    rlx_graph *g = rlx_graph_new("cast");
    double cv[] = {-2.5, 0, 1.5, 300.25};
    rlx_node x = rlx_input(g, "x", types[t], 1, d4);
    rlx_node c = rlx_cast(g, rlx_constant(g, RLX_F64, 1, d4, cv), types[t]);
    rlx_node y = rlx_where(g, rlx_compare(g, RLX_CMP_LT, x, c), x, c);
    rlx_graph_set_outputs(g, 1, &y);
    CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
    int changed;
    rlx_graph *f = pt_apply(pass_fold, g, NULL, &changed);
    if (f) {
      CHECK(changed == 1 && pt_count(f, "Cast") == 0, "%s: cast of a constant folds", rlx_dtype_name(types[t]));
      pt_check_same(g, f, 0, 0, rlx_dtype_name(types[t]));
    }
    rlx_graph_free(f);
    rlx_graph_free(g);
  }
  rlx_graph *g = rlx_graph_new("sym");
  int64_t S = rlx_dim_sym(g, "S"), ds[] = {S};
  float one = 1;
  rlx_node y = rlx_expand(g, rlx_constant(g, RLX_F32, 0, NULL, &one), 1, ds);
  rlx_graph_set_outputs(g, 1, &y);
  int changed;
  rlx_graph *f = pt_apply(pass_fold, g, NULL, &changed);
  if (f) CHECK(changed == 0, "a symbolic shape does not fold");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

int main(void) {
  test_chain();
  test_multi_output();
  test_limits();
  test_not_folded();
  test_dtypes_and_symbols();
  return check_report();
}
