/* test_errors.c — builder and verifier errors: one check per error class,
 * asserting the status and that the message names the culprit (op, node,
 * shapes). Mutating a graph behind the API (to make cycles and dangling
 * inputs the builders never produce) needs the internal IR header. */
#include "rlx.h"
#include "ir/ir.h"

#include <stdlib.h>

#include "check.h"

static rlx_graph *two_inputs(rlx_node *a, rlx_node *b, rlx_dtype tb, int rank_b, const int64_t *db) {
  rlx_graph *g = rlx_graph_new("t");
  int64_t da[] = {2, 3};
  *a = rlx_input(g, "a", RLX_F32, 2, da);
  *b = rlx_input(g, "b", tb, rank_b, db);
  return g;
}

static void builder_errors(void) {
  rlx_node a, b;
  int64_t d4[] = {4}, d23[] = {2, 3};

  /* shape: broadcast mismatch names the op, the node and both shapes */
  rlx_graph *g = two_inputs(&a, &b, RLX_F32, 1, d4);
  CHECK(rlx_add(g, a, b) < 0, "add [2,3]+[4] must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "Binary", "node 2", "[2,3]", "[4]");
  /* sticky: later builders fail too and the first error stays */
  CHECK(rlx_activation(g, RLX_ACT_RELU, a) < 0, "builder after an error must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "Binary", "[4]");
  rlx_session *s = NULL;
  CHECK_ERR(rlx_compile(g, NULL, &s), RLX_ERR_SHAPE, "Binary");
  rlx_graph_free(g);

  /* dtype: operands of different dtypes */
  g = two_inputs(&a, &b, RLX_F16, 2, d23);
  CHECK(rlx_mul(g, a, b) < 0, "f32*f16 must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_DTYPE, "Binary", "f32", "f16");
  rlx_graph_free(g);

  /* invalid node id */
  g = two_inputs(&a, &b, RLX_F32, 2, d23);
  CHECK(rlx_add(g, a, 999) < 0, "input 999 must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_INVALID, "Binary", "999");
  rlx_graph_free(g);

  /* a negative id from a failed builder propagates */
  g = two_inputs(&a, &b, RLX_F32, 2, d23);
  CHECK(rlx_softmax(g, -1, 0) < 0, "negative input must fail");
  CHECK(rlx_graph_status(g) != RLX_OK, "status set");
  rlx_graph_free(g);

  /* rank limit */
  g = rlx_graph_new("t");
  int64_t d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(rlx_input(g, "x", RLX_F32, 9, d9) < 0, "rank 9 must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "rank 9");
  rlx_graph_free(g);

  /* attribute range: axis out of range */
  g = two_inputs(&a, &b, RLX_F32, 2, d23);
  CHECK(rlx_softmax(g, a, 5) < 0, "softmax axis 5 of rank 2 must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "Softmax", "5");
  rlx_graph_free(g);

  /* attribute value: transpose with a non-permutation */
  g = two_inputs(&a, &b, RLX_F32, 2, d23);
  int64_t perm[] = {0, 0};
  CHECK(rlx_transpose(g, a, 2, perm) < 0, "perm [0,0] must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_INVALID, "Transpose");
  rlx_graph_free(g);

  /* Reshape that changes the element count (broadcasting is Expand's job) */
  g = two_inputs(&a, &b, RLX_F32, 2, d23);
  int64_t d7[] = {7};
  CHECK(rlx_reshape(g, a, 1, d7) < 0, "reshape 6 -> 7 must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "Reshape", "[2,3]", "[7]");
  rlx_graph_free(g);

  /* duplicate leaf names */
  g = two_inputs(&a, &b, RLX_F32, 2, d23);
  CHECK(rlx_param(g, "a", RLX_F32, 2, d23) < 0, "duplicate name must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_INVALID, "\"a\"", "already used");
  rlx_graph_free(g);

  /* block dtype input, bad block multiple */
  g = rlx_graph_new("t");
  int64_t d33[] = {2, 33};
  CHECK(rlx_param(g, "q", RLX_Q4_0, 2, d33) < 0, "q4_0 with 33 columns must fail");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "q4_0", "32");
  rlx_graph_free(g);

  /* NULL arguments */
  CHECK(rlx_input(NULL, "x", RLX_F32, 1, d4) < 0, "NULL graph");
  CHECK_ERR(RLX_ERR_INVALID, RLX_ERR_INVALID, "NULL");
  g = rlx_graph_new("t");
  CHECK(rlx_input(g, NULL, RLX_F32, 1, d4) < 0, "NULL name");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_INVALID, "name is NULL");
  rlx_graph_free(g);
  CHECK_ERR(rlx_graph_status(NULL), RLX_ERR_INVALID, "NULL");
  CHECK_ERR(rlx_graph_verify(NULL), RLX_ERR_INVALID, "NULL");
  CHECK(rlx_graph_to_text(NULL) == NULL, "to_text(NULL)");
}

/* A valid graph a -> relu -> neg, outputs neg, for the verifier tests. */
static rlx_graph *chain(void) {
  rlx_graph *g = rlx_graph_new("v");
  int64_t d[] = {2, 3};
  rlx_node a = rlx_input(g, "a", RLX_F32, 2, d);
  rlx_node r = rlx_activation(g, RLX_ACT_RELU, a);
  rlx_node n = rlx_activation(g, RLX_ACT_NEG, r);
  rlx_graph_set_outputs(g, 1, &n);
  return g;
}

static void verifier_errors(void) {
  rlx_graph *g = chain();
  CHECK(rlx_graph_verify(g) == RLX_OK, "%s", rlx_last_error());

  g->nodes[2].in[0] = 7;  /* dangling */
  CHECK_ERR(rlx_graph_verify(g), RLX_ERR_INVALID, "node 2", "dangling");
  g->nodes[2].in[0] = 2;  /* self-loop: a cycle */
  CHECK_ERR(rlx_graph_verify(g), RLX_ERR_INVALID, "node 2", "cycle");
  g->nodes[1].in[0] = 2;  /* reads a later node: a cycle */
  g->nodes[2].in[0] = 1;
  CHECK_ERR(rlx_graph_verify(g), RLX_ERR_INVALID, "node 1", "cycle");
  rlx_graph_free(g);

  g = chain();
  g->nodes[2].out[0].dtype = RLX_F16;  /* recorded dtype disagrees with inference */
  CHECK_ERR(rlx_graph_verify(g), RLX_ERR_DTYPE, "node 2", "f16", "f32");
  g->nodes[2].out[0].dtype = RLX_F32;
  g->nodes[2].out[0].shape.d[1] = 4;  /* recorded shape disagrees */
  CHECK_ERR(rlx_graph_verify(g), RLX_ERR_SHAPE, "node 2", "[2,4]", "[2,3]");
  g->nodes[2].out[0].shape.d[1] = 3;
  g->nodes[1].a.act = 99;  /* attribute out of range */
  CHECK(rlx_graph_verify(g) != RLX_OK, "act 99 must fail verification");
  CHECK(strstr(rlx_last_error(), "Activation") != NULL, "message: %s", rlx_last_error());
  g->nodes[1].a.act = RLX_ACT_RELU;
  g->nodes[1].n_in = 0;  /* arity */
  CHECK_ERR(rlx_graph_verify(g), RLX_ERR_INVALID, "Activation", "node 1", "inputs");
  g->nodes[1].n_in = 1;
  g->outputs[0] = 10;
  CHECK_ERR(rlx_graph_verify(g), RLX_ERR_INVALID, "output 0", "dangling");
  g->n_outputs = 0;
  CHECK_ERR(rlx_graph_verify(g), RLX_ERR_INVALID, "no outputs");
  rlx_graph_free(g);

  /* a rank above the limit recorded behind the API */
  g = chain();
  g->nodes[2].out[0].shape.rank = 9;
  CHECK(rlx_graph_verify(g) != RLX_OK, "rank 9 must fail verification");
  rlx_graph_free(g);
}

int main(void) {
  builder_errors();
  verifier_errors();
  return check_report();
}
