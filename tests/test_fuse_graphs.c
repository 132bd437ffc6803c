/* test_fuse_graphs — pass_fuse on whole graphs: the Llama and BERT blocks
 * of DATA_DIR (the fused ops they come to), symbolic dims, every op's
 * graph round-tripping as text after fusion, random elementwise graphs
 * against their unfused selves (fuse_test_util.h), and the pass's own
 * contract (off, NULL options, idempotence, errors).
 *
 * usage: test_fuse_graphs DATA_DIR   (holds llama_block.rlx, bert_layer.rlx and every_op.rlx)
 */
#include "fuse_test_util.h"

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
    fprintf(stderr, "usage: test_fuse_graphs DATA_DIR\n");
    return 2;
  }
  test_models(argv[1]);
  test_symbolic();
  test_every_op(argv[1]);
  test_random_graphs();
  test_pass();
  return check_report();
}
