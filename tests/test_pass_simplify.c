/* test_pass_simplify.c — algebraic simplification alone. Each rule: a
 * graph where it applies (the op disappears or collapses) and graphs where
 * it must not (the constant on the wrong side, a broadcast that grows x, a
 * lossy inner cast, ...); every graph computes the same before and after. */
#include "pass_test_util.h"

static const int64_t d4[] = {4}, d23[] = {2, 3}, d1[] = {1}, d33[] = {3, 3};

/* Simplifies a graph with output y and checks what is left: `op` appears
 * `want` times, and the values agree exactly. */
static void expect(rlx_graph *g, rlx_node y, const char *op, int want, const char *what) {
  rlx_graph_set_outputs(g, 1, &y);
  CHECK(rlx_graph_status(g) == RLX_OK, "%s: %s", what, rlx_last_error());
  rlx_graph *f = pt_apply(pass_simplify, g, NULL, NULL);
  if (f) {
    /* a rewrite leaves dead nodes for DCE; count what the output needs */
    rlx_graph *live = pt_apply(pass_dce, f, NULL, NULL);
    if (live) CHECK(pt_count(live, op) == want, "%s: %d %s left, want %d", what, pt_count(live, op), op, want);
    rlx_graph_free(live);
    pt_check_same(g, f, 0, 0, what);
  }
  rlx_graph_free(f);
  rlx_graph_free(g);
}

static rlx_node fconst(rlx_graph *g, int rank, const int64_t *d, float v) {
  float buf[16];
  for (int i = 0; i < 16; i++) buf[i] = v;
  return rlx_constant(g, RLX_F32, rank, d, buf);
}

static void test_binary(void) {
  struct { rlx_binop op; float c; int const_left, removable; const char *what; } cases[] = {
    {RLX_BIN_ADD, -0.0f, 0, 1, "x + -0"}, {RLX_BIN_ADD, -0.0f, 1, 1, "-0 + x"}, {RLX_BIN_SUB, 0, 0, 1, "x - 0"},
    /* +0 + -0 is +0, not -0: x + 0.0 is not x for floats, nor x - -0.0 */
    {RLX_BIN_ADD, 0, 0, 0, "x + 0.0"}, {RLX_BIN_ADD, 0, 1, 0, "0.0 + x"}, {RLX_BIN_SUB, -0.0f, 0, 0, "x - -0.0"},
    {RLX_BIN_MUL, 1, 0, 1, "x * 1"},  {RLX_BIN_MUL, 1, 1, 1, "1 * x"},  {RLX_BIN_DIV, 1, 0, 1, "x / 1"},
    {RLX_BIN_SUB, 0, 1, 0, "0 - x"},  {RLX_BIN_DIV, 1, 1, 0, "1 / x"},  {RLX_BIN_MUL, 2, 0, 0, "x * 2"},
    {RLX_BIN_ADD, 1, 0, 0, "x + 1"},  {RLX_BIN_MUL, 0, 0, 0, "x * 0"},  {RLX_BIN_POW, 1, 0, 0, "x ^ 1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rlx_graph *g = rlx_graph_new("bin");
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, d23), c = fconst(g, 1, d1, cases[i].c);
    rlx_node y = cases[i].const_left ? rlx_binary(g, cases[i].op, c, x) : rlx_binary(g, cases[i].op, x, c);
    expect(g, y, "Binary", !cases[i].removable, cases[i].what);
  }
  /* the 0 broadcasts x [3] to [3, 3]: the add makes the shape, it stays */
  rlx_graph *g = rlx_graph_new("grow");
  int64_t d3[] = {3};
  rlx_node x = rlx_input(g, "x", RLX_F32, 1, d3);
  expect(g, rlx_add(g, x, fconst(g, 2, d33, -0.0f)), "Binary", 1, "x + -0 broadcasting x");
  /* a constant that is not all ones stays */
  g = rlx_graph_new("mixed");
  float mixed[] = {1, 1, 2, 1};
  x = rlx_input(g, "x", RLX_F32, 1, d4);
  expect(g, rlx_mul(g, x, rlx_constant(g, RLX_F32, 1, d4, mixed)), "Binary", 1, "x * [1,1,2,1]");
  /* integers: x * 1, x / 1 (floor division) and x + 0 (one zero) are exact */
  g = rlx_graph_new("int");
  int32_t ones[] = {1, 1, 1, 1}, zeros[] = {0, 0, 0, 0};
  rlx_node xi = rlx_input(g, "x", RLX_I32, 1, d4), ci = rlx_constant(g, RLX_I32, 1, d4, ones);
  rlx_node zi = rlx_constant(g, RLX_I32, 1, d4, zeros);
  expect(g, rlx_add(g, rlx_div(g, rlx_mul(g, xi, ci), ci), zi), "Binary", 0, "i32 (x * 1) / 1 + 0");
  /* f16: x + -0 */
  g = rlx_graph_new("f16");
  uint16_t z16 = rlx_f32_to_f16(-0.0f);
  rlx_node xh = rlx_input(g, "x", RLX_F16, 2, d23);
  expect(g, rlx_add(g, xh, rlx_constant(g, RLX_F16, 0, NULL, &z16)), "Binary", 0, "f16 x + -0");
  /* the reason: 1 / (x + 0.0) at x = -0 is +inf, 1 / x is -inf */
  g = rlx_graph_new("signed_zero");
  float mz = -0.0f;
  rlx_node xz = rlx_input(g, "x", RLX_F32, 0, NULL);
  rlx_node y = rlx_div(g, fconst(g, 0, NULL, 1), rlx_add(g, xz, fconst(g, 0, NULL, 0)));
  rlx_graph_set_outputs(g, 1, &y);
  rlx_session *s = NULL;
  float got = 0;
  CHECK(rlx_compile(g, NULL, &s) == RLX_OK && rlx_set_input(s, "x", &mz, sizeof mz) == RLX_OK && rlx_run(s) == RLX_OK &&
        rlx_output(s, 0, &got, sizeof got) == RLX_OK && isinf(got) && got > 0, "1 / (-0 + 0) = +inf, got %g", got);
  rlx_session_free(s);
  rlx_graph_free(g);
}

static void test_cast(void) {
  rlx_graph *g = rlx_graph_new("c");
  rlx_node x = rlx_input(g, "x", RLX_F32, 1, d4);
  expect(g, rlx_cast(g, x, RLX_F32), "Cast", 0, "cast to own dtype");
  g = rlx_graph_new("c");
  rlx_node h = rlx_input(g, "x", RLX_F16, 1, d4);
  expect(g, rlx_cast(g, rlx_cast(g, h, RLX_F32), RLX_F16), "Cast", 0, "f16 -> f32 -> f16 round trip");
  g = rlx_graph_new("c");
  x = rlx_input(g, "x", RLX_F32, 1, d4);
  expect(g, rlx_cast(g, rlx_cast(g, x, RLX_F16), RLX_F32), "Cast", 2, "f32 -> f16 -> f32 rounds: stays");
  g = rlx_graph_new("c");
  rlx_node i = rlx_input(g, "x", RLX_I32, 1, d4);
  expect(g, rlx_cast(g, rlx_cast(g, i, RLX_I64), RLX_F32), "Cast", 1, "i32 -> i64 -> f32 is i32 -> f32");
  g = rlx_graph_new("c");
  x = rlx_input(g, "x", RLX_F32, 1, d4);
  expect(g, rlx_cast(g, rlx_cast(g, x, RLX_I32), RLX_F32), "Cast", 2, "f32 -> i32 -> f32 truncates: stays");
  g = rlx_graph_new("c");
  rlx_node u = rlx_input(g, "x", RLX_U8, 1, d4);
  expect(g, rlx_cast(g, rlx_cast(g, u, RLX_BF16), RLX_I8), "Cast", 1, "u8 -> bf16 (exact) -> i8");
  g = rlx_graph_new("c");
  i = rlx_input(g, "x", RLX_I32, 1, d4);
  expect(g, rlx_cast(g, rlx_cast(g, i, RLX_F32), RLX_I64), "Cast", 2, "i32 -> f32 is lossy: stays");
}

static void test_layout(void) {
  int64_t id3[] = {0, 1, 2}, p[] = {2, 0, 1}, q[] = {1, 2, 0}, r[] = {0, 2, 1}, d234[] = {2, 3, 4};
  rlx_graph *g = rlx_graph_new("t");
  rlx_node x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_transpose(g, x, 3, id3), "Transpose", 0, "identity transpose");
  g = rlx_graph_new("t");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_transpose(g, rlx_transpose(g, x, 3, p), 3, q), "Transpose", 0, "inverse transposes");
  g = rlx_graph_new("t");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_transpose(g, rlx_transpose(g, rlx_transpose(g, x, 3, p), 3, r), 3, p), "Transpose", 1,
         "three transposes -> one");

  int64_t d6_4[] = {6, 4}, d24[] = {24}, d_1_2[] = {-1, 2};
  g = rlx_graph_new("r");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_reshape(g, x, 3, d234), "Reshape", 0, "reshape to the same shape");
  g = rlx_graph_new("r");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_reshape(g, rlx_reshape(g, rlx_reshape(g, x, 2, d6_4), 1, d24), 2, d_1_2), "Reshape", 1,
         "reshape of reshape of reshape -> one");
  g = rlx_graph_new("r");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_reshape(g, rlx_reshape(g, x, 1, d24), 3, d234), "Reshape", 0, "reshape there and back");

  int64_t d134[] = {1, 3, 4}, d534[] = {5, 3, 4}, d2534[] = {2, 5, 3, 4};
  g = rlx_graph_new("e");
  x = rlx_input(g, "x", RLX_F32, 3, d134);
  expect(g, rlx_expand(g, x, 3, d134), "Expand", 0, "expand to the same shape");
  g = rlx_graph_new("e");
  x = rlx_input(g, "x", RLX_F32, 3, d134);
  expect(g, rlx_expand(g, rlx_expand(g, x, 3, d534), 4, d2534), "Expand", 1, "expand of expand -> one");
  g = rlx_graph_new("e");
  x = rlx_input(g, "x", RLX_F32, 3, d134);
  expect(g, rlx_expand(g, x, 3, d534), "Expand", 1, "a real expand stays");

  g = rlx_graph_new("n");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_narrow(g, x, 1, 0, 3), "Narrow", 0, "narrow to the whole axis");
  g = rlx_graph_new("n");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_narrow(g, x, 1, 1, 2), "Narrow", 1, "a real narrow stays");
  int64_t st0[] = {0, 0, 0}, big[] = {9, 9, 9}, one3[] = {1, 1, 1}, two[] = {1, 2, 1}, e3[] = {2, 3, 4};
  g = rlx_graph_new("s");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_slice(g, x, 3, st0, big, one3), "Slice", 0, "slice of everything");
  g = rlx_graph_new("s");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_slice(g, x, 3, st0, e3, two), "Slice", 1, "a strided slice stays");
  g = rlx_graph_new("p");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_pad(g, x, 3, st0, st0, 5.0), "Pad", 0, "pad by nothing");
  g = rlx_graph_new("p");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_pad(g, x, 3, st0, one3, 5.0), "Pad", 1, "a real pad stays");
  g = rlx_graph_new("cat");
  x = rlx_input(g, "x", RLX_F32, 3, d234);
  expect(g, rlx_concat(g, 1, &x, 1), "Concat", 0, "concat of one input");
}

static void test_elementwise(void) {
  rlx_graph *g = rlx_graph_new("a");
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, d23);
  expect(g, rlx_activation(g, RLX_ACT_NEG, rlx_activation(g, RLX_ACT_NEG, x)), "Activation", 0, "neg(neg x)");
  g = rlx_graph_new("a");
  rlx_node xi = rlx_input(g, "x", RLX_I8, 2, d23);
  expect(g, rlx_activation(g, RLX_ACT_NEG, rlx_activation(g, RLX_ACT_NEG, xi)), "Activation", 0, "i8 neg(neg x)");
  g = rlx_graph_new("a");
  x = rlx_input(g, "x", RLX_F32, 2, d23);
  expect(g, rlx_activation(g, RLX_ACT_RELU, rlx_activation(g, RLX_ACT_RELU, x)), "Activation", 1, "relu(relu x)");
  g = rlx_graph_new("a");
  x = rlx_input(g, "x", RLX_F32, 2, d23);
  expect(g, rlx_activation(g, RLX_ACT_ABS, rlx_activation(g, RLX_ACT_NEG, x)), "Activation", 1, "abs(neg x)");
  g = rlx_graph_new("a");
  x = rlx_input(g, "x", RLX_F32, 2, d23);
  expect(g, rlx_activation(g, RLX_ACT_NEG, rlx_activation(g, RLX_ACT_ABS, x)), "Activation", 2, "neg(abs x) stays");
  g = rlx_graph_new("a");
  x = rlx_input(g, "x", RLX_F32, 2, d23);
  expect(g, rlx_activation(g, RLX_ACT_RECIPROCAL, rlx_activation(g, RLX_ACT_RECIPROCAL, x)), "Activation", 2,
         "1/(1/x) rounds: stays");
  g = rlx_graph_new("cl");
  x = rlx_input(g, "x", RLX_F32, 2, d23);
  expect(g, rlx_clamp(g, x, -INFINITY, INFINITY), "Clamp", 0, "clamp to everything");
  g = rlx_graph_new("cl");
  x = rlx_input(g, "x", RLX_F32, 2, d23);
  expect(g, rlx_clamp(g, x, -1, INFINITY), "Clamp", 1, "a real clamp stays");
  g = rlx_graph_new("w");
  x = rlx_input(g, "x", RLX_F32, 2, d23);
  rlx_node c = rlx_input(g, "c", RLX_BOOL, 2, d23);
  expect(g, rlx_where(g, c, x, x), "Where", 0, "where(c, a, a)");
  g = rlx_graph_new("w");
  int64_t d3[] = {3};
  x = rlx_input(g, "x", RLX_F32, 1, d3);
  c = rlx_input(g, "c", RLX_BOOL, 2, d23);
  expect(g, rlx_where(g, c, x, x), "Where", 1, "where(c, a, a) broadcasting a: stays");
  g = rlx_graph_new("sg");
  x = rlx_input(g, "x", RLX_F32, 2, d23);
  expect(g, rlx_stop_gradient(g, x), "StopGradient", 0, "stop_gradient when running");
}

/* Through rlx_compile, y = x * 1 is x itself: rlx_output still gives the
 * run's result after x is set again (the session keeps a copy). */
static void test_output_that_becomes_an_input(void) {
  rlx_graph *g = rlx_graph_new("x_times_one");
  rlx_node x = rlx_input(g, "x", RLX_F32, 1, d4);
  rlx_node y = rlx_mul(g, x, fconst(g, 1, d1, 1));
  rlx_graph_set_outputs(g, 1, &y);
  rlx_session *s = NULL;
  float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8}, got[4];
  CHECK(rlx_compile(g, NULL, &s) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_set_input(s, "x", a, sizeof a) == RLX_OK && rlx_run(s) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_set_input(s, "x", b, sizeof b) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_output(s, 0, got, sizeof got) == RLX_OK && !memcmp(got, a, sizeof a), "the run's output, not the new x");
  CHECK(rlx_run(s) == RLX_OK && rlx_output(s, 0, got, sizeof got) == RLX_OK && !memcmp(got, b, sizeof b), "rerun");
  rlx_session_free(s);
  rlx_graph_free(g);
}

int main(void) {
  test_output_that_becomes_an_input();
  test_binary();
  test_cast();
  test_layout();
  test_elementwise();
  return check_report();
}
