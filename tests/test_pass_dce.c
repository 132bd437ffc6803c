/* test_pass_dce.c — dead-code elimination alone: what no output reaches
 * goes (dead chains, unused constants), what the outputs need stays,
 * inputs and params stay even unread, and the result computes the same. */
#include "pass_test_util.h"

static const int64_t d4[] = {4}, d23[] = {2, 3};

static void test_dead_chain(void) {
  rlx_graph *g = rlx_graph_new("dead");
  float cv[] = {1, 2, 3, 4};
  rlx_node x = rlx_input(g, "x", RLX_F32, 1, d4);
  rlx_param(g, "unused_w", RLX_F32, 1, d4);
  rlx_input(g, "unused_x", RLX_I32, 1, d4);
  rlx_node c = rlx_constant(g, RLX_F32, 1, d4, cv);
  rlx_constant(g, RLX_F32, 1, d4, cv); /* never read */
  rlx_node dead = rlx_activation(g, RLX_ACT_EXP, rlx_mul(g, x, c));
  rlx_activation(g, RLX_ACT_TANH, dead);
  rlx_node y = rlx_add(g, x, c);
  rlx_graph_set_outputs(g, 1, &y);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  int changed;
  rlx_graph *f = pt_apply(pass_dce, g, NULL, &changed);
  if (!f) return;
  CHECK(changed == 4, "removed %d (want mul, exp, tanh, one constant)", changed);
  CHECK(f->n_nodes == 5, "%d nodes left (x, two unused leaves, c, add)", f->n_nodes);
  CHECK(pt_count(f, "Param") == 1 && pt_count(f, "Input") == 2, "unread inputs and params are kept");
  CHECK(pt_count(f, "Activation") == 0 && pt_count(f, "Constant") == 1, "dead nodes gone");
  pt_check_same(g, f, 0, 0, "dead chain");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

/* Nothing dead: nothing changes, node for node. Multi-output: a TopK whose
 * indices only are read stays (through its GetOutput). Outputs that repeat
 * or are leaves stay as they are. */
static void test_nothing_dead(void) {
  rlx_graph *g = rlx_graph_new("live");
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, d23), idx;
  rlx_topk(g, x, 2, 1, &idx);
  rlx_node s = rlx_softmax(g, x, -1);
  rlx_node outs[] = {idx, s, s, x};
  rlx_graph_set_outputs(g, 4, outs);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s", rlx_last_error());
  int changed;
  rlx_graph *f = pt_apply(pass_dce, g, NULL, &changed);
  if (!f) return;
  CHECK(changed == 0 && f->n_nodes == g->n_nodes, "nothing to remove, removed %d", changed);
  CHECK(f->n_outputs == 4 && f->outputs[1] == f->outputs[2], "outputs kept, repeats too");
  char *a = rlx_graph_to_text(g), *b = rlx_graph_to_text(f);
  CHECK(a && b && !strcmp(a, b), "unchanged graph prints the same");
  free(a);
  free(b);
  pt_check_same(g, f, 0, 0, "nothing dead");
  rlx_graph_free(f);
  rlx_graph_free(g);
}

int main(void) {
  test_dead_chain();
  test_nothing_dead();
  return check_report();
}
