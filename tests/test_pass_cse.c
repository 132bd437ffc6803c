/* test_pass_cse.c — common-subexpression elimination alone: equal nodes
 * (op, inputs, attributes) merge, transitively; constants merge on equal
 * type and bytes; nodes that differ in any attribute, input order, shape
 * or dtype stay apart; inputs and params never merge. */
#include "pass_test_util.h"

static const int64_t d23[] = {2, 3}, d32[] = {3, 2}, d6[] = {6};

static void test_merges(void) {
  rlx_graph *g = rlx_graph_new("merge");
  float cv[] = {1, 2, 3, 4, 5, 6};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, d23), w = rlx_param(g, "w", RLX_F32, 2, d32);
  rlx_node c1 = rlx_constant(g, RLX_F32, 2, d23, cv), c2 = rlx_constant(g, RLX_F32, 2, d23, cv);
  /* a1 = a2 and b1 = b2 (their inputs merge first), and the constants */
  rlx_node a1 = rlx_add(g, x, c1), a2 = rlx_add(g, x, c2);
  rlx_node b1 = rlx_matmul(g, rlx_activation(g, RLX_ACT_GELU, a1), w);
  rlx_node b2 = rlx_matmul(g, rlx_activation(g, RLX_ACT_GELU, a2), w);
  int64_t pad0[] = {0, 1}, pad1[] = {1, 0};
  rlx_node p1 = rlx_pad(g, x, 2, pad0, pad1, NAN), p2 = rlx_pad(g, x, 2, pad0, pad1, NAN);
  rlx_node outs[] = {b1, b2, rlx_sub(g, p1, p2)};
  rlx_graph_set_outputs(g, 3, outs);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  int changed;
  rlx_graph *f = pt_apply(pass_cse, g, NULL, &changed);
  if (!f) return;
  CHECK(changed == 5, "merged %d (constant, add, gelu, matmul, pad)", changed);
  CHECK(f->outputs[0] == f->outputs[1], "equal outputs are one node");
  CHECK(pt_count(f, "Constant") == 1 && pt_count(f, "MatMul") == 1 && pt_count(f, "Pad") == 1, "one of each");
  pt_check_same(g, f, 0, 0, "merges");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

static void test_stays_apart(void) {
  rlx_graph *g = rlx_graph_new("apart");
  float cv[] = {1, 2, 3, 4, 5, 6}, cw[] = {1, 2, 3, 4, 5, 7};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, d23), y = rlx_input(g, "y", RLX_F32, 2, d23);
  rlx_param(g, "p", RLX_F32, 2, d23);
  rlx_param(g, "q", RLX_F32, 2, d23); /* same type, another name: another param */
  rlx_node outs[] = {
    rlx_add(g, x, y), rlx_add(g, y, x),                        /* input order (not commutativity-aware) */
    rlx_softmax(g, x, 0), rlx_softmax(g, x, 1),                /* an attribute */
    rlx_leaky_relu(g, x, 0.1), rlx_leaky_relu(g, x, 0.2),       /* a float attribute */
    rlx_constant(g, RLX_F32, 2, d23, cv), rlx_constant(g, RLX_F32, 2, d23, cw), /* bytes */
    rlx_constant(g, RLX_F32, 1, d6, cv),                        /* same bytes, another shape */
    rlx_constant(g, RLX_I32, 2, d23, cv),                       /* same bytes, another dtype */
  };
  int n = (int)(sizeof outs / sizeof outs[0]);
  rlx_graph_set_outputs(g, n, outs);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  int changed;
  rlx_graph *f = pt_apply(pass_cse, g, NULL, &changed);
  if (!f) return;
  CHECK(changed == 0 && f->n_nodes == g->n_nodes, "nothing equal, merged %d", changed);
  pt_check_same(g, f, 0, 0, "apart");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

/* Regions with equal chains merge; a differing step keeps them apart. */
static void test_regions(void) {
  rlx_graph *g = rlx_graph_new("regions");
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, d23), y = rlx_input(g, "y", RLX_F32, 2, d23);
  rlx_region_step s1[] = {{RLX_STEP_BIN, RLX_BIN_MUL, 0, 1, RLX_F32, 0}, {RLX_STEP_ACT, RLX_ACT_SILU, -1, 0, RLX_F32, 0}};
  rlx_region_step s2[] = {{RLX_STEP_BIN, RLX_BIN_MUL, 0, 1, RLX_F32, 0}, {RLX_STEP_ACT, RLX_ACT_TANH, -1, 0, RLX_F32, 0}};
  rlx_node ins[] = {x, y};
  rlx_node outs[] = {rlx_elementwise_region(g, 2, ins, 2, s1, RLX_PROLOGUE_NONE),
                     rlx_elementwise_region(g, 2, ins, 2, s1, RLX_PROLOGUE_NONE),
                     rlx_elementwise_region(g, 2, ins, 2, s2, RLX_PROLOGUE_NONE)};
  rlx_graph_set_outputs(g, 3, outs);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  int changed;
  rlx_graph *f = pt_apply(pass_cse, g, NULL, &changed);
  if (!f) return;
  CHECK(changed == 1 && pt_count(f, "ElementwiseRegion") == 2, "equal chains merge, others stay (merged %d)",
        changed);
  pt_check_same(g, f, 0, 0, "regions");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

int main(void) {
  test_merges();
  test_stays_apart();
  test_regions();
  return check_report();
}
