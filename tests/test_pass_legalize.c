/* test_pass_legalize.c — legalization alone: nodes the target does not
 * claim are decomposed when they can be and left (a CPU fallback) when
 * not; claimed nodes are untouched; decompose_fused decomposes every fused
 * op; the dispatch counts say which; results are unchanged. */
#include "pass_test_util.h"

/* A target that refuses the ops listed in it. */
typedef struct { int refused[RLX_OP_COUNT]; int asked; } target;

static int target_claims(void *ctx, const rlx_graph *g, rlx_node n) {
  target *t = ctx;
  t->asked++;
  return !t->refused[g->nodes[n].op];
}

/* x [4, 6] -> FusedMatMulBiasAct(w1) -> Softmax -> FusedSwiGLU -> + x2 */
static rlx_graph *build(void) {
  rlx_graph *g = rlx_graph_new("legal");
  int64_t xd[] = {4, 6}, wd[] = {6, 8}, bd[] = {8}, zd[] = {4, 4};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd), z = rlx_input(g, "z", RLX_F32, 2, zd);
  rlx_node h = rlx_fused_matmul_bias_act(g, x, rlx_param(g, "w", RLX_F32, 2, wd), rlx_param(g, "b", RLX_F32, 1, bd),
                                         RLX_ACT_GELU, 0);
  rlx_node y = rlx_add(g, rlx_fused_swiglu(g, rlx_softmax(g, h, -1), -1), z);
  rlx_graph_set_outputs(g, 1, &y);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  return g;
}

static void test_refusals(void) {
  rlx_graph *g = build();
  target t;
  memset(&t, 0, sizeof t);
  t.refused[RLX_OP_FusedMatMulBiasAct] = 1; /* decomposable: decomposed */
  t.refused[RLX_OP_Softmax] = 1;            /* a primitive: falls back */
  t.refused[RLX_OP_Activation] = 1;         /* what the decomposition makes: falls back too */
  pass_dispatch_count counts[RLX_OP_COUNT];
  pass_options opt;
  memset(&opt, 0, sizeof opt);
  opt.claims = target_claims;
  opt.claims_ctx = &t;
  opt.dispatch = counts;
  int changed;
  rlx_graph *l = pt_apply(pass_legalize, g, &opt, &changed);
  if (l) {
    CHECK(changed == 1, "decomposed %d", changed);
    CHECK(pt_count(l, "FusedMatMulBiasAct") == 0 && pt_count(l, "MatMul") == 1 && pt_count(l, "Activation") == 1,
          "the refused fused op became MatMul + add + gelu");
    CHECK(pt_count(l, "Softmax") == 1 && pt_count(l, "FusedSwiGLU") == 1, "the others stay");
    CHECK(counts[RLX_OP_FusedMatMulBiasAct].decomposed == 1 && counts[RLX_OP_FusedMatMulBiasAct].native == 0,
          "dispatch: fused op decomposed");
    CHECK(counts[RLX_OP_MatMul].native == 1 && counts[RLX_OP_Binary].native == 2, "dispatch: primitives native");
    CHECK(counts[RLX_OP_Activation].fallback == 1 && counts[RLX_OP_Softmax].fallback == 1,
          "dispatch: refused primitives fall back");
    CHECK(counts[RLX_OP_FusedSwiGLU].native == 1 && counts[RLX_OP_Input].native == 0, "claimed fused op native; no leaves");
    pt_check_same(g, l, 1e-5, 1e-4, "refusals");
  }
  rlx_graph_free(l);
  rlx_graph_free(g);
}

static void test_claims_everything(void) {
  rlx_graph *g = build();
  target t;
  memset(&t, 0, sizeof t);
  pass_options opt;
  memset(&opt, 0, sizeof opt);
  opt.claims = target_claims;
  opt.claims_ctx = &t;
  int changed;
  rlx_graph *l = pt_apply(pass_legalize, g, &opt, &changed);
  if (l) CHECK(changed == 0 && l->n_nodes == g->n_nodes && t.asked > 0, "a target that claims all: no change");
  rlx_graph_free(l);
  /* NULL claims: every op is claimed */
  memset(&opt, 0, sizeof opt);
  l = pt_apply(pass_legalize, g, &opt, &changed);
  if (l) CHECK(changed == 0 && l->n_nodes == g->n_nodes, "no target: no change");
  rlx_graph_free(l);
  /* decompose_fused: both fused ops go, even though they are claimed */
  opt.decompose_fused = 1;
  l = pt_apply(pass_legalize, g, &opt, &changed);
  if (l) {
    CHECK(changed == 2 && pt_count(l, "FusedSwiGLU") == 0 && pt_count(l, "FusedMatMulBiasAct") == 0 &&
          pt_count(l, "Narrow") == 2, "decompose_fused: decomposed %d", changed);
    pt_check_same(g, l, 1e-5, 1e-4, "decompose_fused");
  }
  rlx_graph_free(l);
  rlx_graph_free(g);
}

/* Through rlx_compile: RLX_DECOMPOSE_FUSED=1 runs the decompositions and the
 * results agree with the fused kernels'. */
static void test_env(void) {
  rlx_graph *g = build();
  pt_outputs fused, decomposed;
  rlx_status a = pt_run(g, 0, 3, &fused);
  setenv("RLX_DECOMPOSE_FUSED", "1", 1);
  rlx_status b = pt_run(g, 0, 3, &decomposed);
  unsetenv("RLX_DECOMPOSE_FUSED");
  CHECK(a == RLX_OK && b == RLX_OK, "%s", rlx_last_error());
  if (a == RLX_OK && b == RLX_OK) CHECK(pt_error(&decomposed, &fused, 1e-5, 1e-4) <= 1, "RLX_DECOMPOSE_FUSED results");
  pt_outputs_free(&fused);
  pt_outputs_free(&decomposed);
  rlx_graph_free(g);
}

int main(void) {
  test_refusals();
  test_claims_everything();
  test_env();
  return check_report();
}
