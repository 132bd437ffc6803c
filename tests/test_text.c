/* test_text — the graph text form: parse, canonical print, round trip,
 * hash, and the parser's errors.
 *
 * usage: test_text PATH/every_op.rlx
 */
#include "rlx.h"
#include "ir/ir.h"
#include "check.h"
#include "ref_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a 64, written here independently of src/ir/text.c. */
static uint64_t fnv1a(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 0x100000001b3ull;
  }
  return h;
}

/* A copy of text with the first `from` replaced by `to`. */
static char *replace(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  if (!at) return NULL;
  size_t head = (size_t)(at - text), nf = strlen(from), nt = strlen(to), tail = strlen(at + nf);
  char *r = malloc(head + nt + tail + 1);
  if (!r) return NULL;
  memcpy(r, text, head);
  memcpy(r + head, to, nt);
  memcpy(r + head + nt, at + nf, tail + 1);
  return r;
}

static rlx_graph *parse_ok(const char *what, const char *text) {
  rlx_graph *g = NULL;
  rlx_status st = rlx_graph_from_text(text, &g);
  CHECK(st == RLX_OK && g, "%s: parse gave %s: %s", what, rlx_status_name(st), rlx_last_error());
  return st == RLX_OK ? g : NULL;
}

/* print -> parse -> print is byte-identical, and the hash survives. */
static void check_round_trip(const char *what, const rlx_graph *g) {
  char *t1 = rlx_graph_to_text(g);
  CHECK(t1 != NULL, "%s: print failed", what);
  if (!t1) return;
  rlx_graph *g2 = parse_ok(what, t1);
  if (g2) {
    char *t2 = rlx_graph_to_text(g2);
    CHECK(t2 && strcmp(t1, t2) == 0, "%s: second print differs:\n%s\n---\n%s", what, t1, t2 ? t2 : "(null)");
    CHECK(rlx_graph_hash(g) == rlx_graph_hash(g2), "%s: hash changed over a round trip", what);
    free(t2);
    rlx_graph_free(g2);
  }
  free(t1);
}

/* ---------------------------------------------------------------- every_op.rlx */

static void test_every_op(const char *path) {
  char *text = read_file(path, NULL);
  CHECK(text != NULL, "cannot read %s", path);
  if (!text) return;
  rlx_graph *g = parse_ok("every_op", text);
  free(text);
  if (!g) return;

  int used[RLX_OP_COUNT] = {0};
  for (int i = 0; i < g->n_nodes; i++) used[g->nodes[i].op] = 1;
  for (int op = 0; op < RLX_OP_COUNT; op++) CHECK(used[op], "every_op.rlx does not use %s", ir_ops[op].name);
  rlx_status vst = rlx_graph_verify(g);
  CHECK(vst == RLX_OK, "every_op verify: %s: %s", rlx_status_name(vst), rlx_last_error());

  check_round_trip("every_op", g);

  char *t1 = rlx_graph_to_text(g);
  if (t1) {
    /* the hash leaves the graph name out */
    char *renamed = replace(t1, "graph \"every_op\"", "graph \"something else\"");
    rlx_graph *gr = renamed ? parse_ok("renamed", renamed) : NULL;
    CHECK(gr && rlx_graph_hash(gr) == rlx_graph_hash(g), "renaming the graph changed its hash");
    rlx_graph_free(gr);
    free(renamed);
    /* ... but sees one changed attribute */
    char *changed = replace(t1, "value=0.5", "value=0.25");
    CHECK(changed != NULL, "every_op print lacks Pad's value=0.5");
    rlx_graph *gc = changed ? parse_ok("changed", changed) : NULL;
    CHECK(gc && rlx_graph_hash(gc) != rlx_graph_hash(g), "changing an attribute kept the hash");
    rlx_graph_free(gc);
    free(changed);
  }
  free(t1);
  rlx_graph_free(g);
}

/* ---------------------------------------------------------------- hash stability */

/* The hash is FNV-1a 64 of the canonical text with an empty graph name;
 * each case gives a hand-written (non-canonical) text and its canonical
 * print, written out literally. */
static void test_hash_stability(void) {
  CHECK(fnv1a("") == 0xcbf29ce484222325ull && fnv1a("a") == 0xaf63dc4c8601ec8cull &&
            fnv1a("foobar") == 0x85944171f73967e8ull,
        "the test's FNV-1a does not match the published test vectors");
  static const struct { const char *name, *written, *canonical; } cases[] = {
    {"tiny",
     "graph \"tiny\" { # comment\n"
     "  %7 = Input{name=\"x\"} : f32[2,S]\n"
     "  %9 = Activation{act=relu}(%7)\n"
     "  outputs %9 }",
     "graph \"tiny\" {\n"
     "  %0 = Input{name=\"x\"} : f32[2,S]\n"
     "  %1 = Activation{act=relu, alpha=0.01}(%0) : f32[2,S]\n"
     "  outputs %1\n"
     "}\n"},
    {"mixed",
     "graph \"mixed\" {\n"
     "  %0 = Input{name=\"a\\tb\"} : f16[4]\n"
     "  %1 = Constant{data=h\"003C0040\"} : f16[2]\n"
     "  %2 = Reshape{dims=[2, -1]}(%0)\n"
     "  %3 = Binary{op=sub}(%2, %1) : f16[2,2]\n"
     "  %4 = Clamp{hi=6.5}(%3)\n"
     "  %5 = ElementwiseRegion{chain=[act.leaky_relu(i0; 0.25), cast.f32(s0), cmp.ge(s1,s1)]}(%4)\n"
     "  %6 = TopK{k=1, axis=-1}(%3)\n"
     "  %7 = GetOutput{index=1}(%6)\n"
     "  outputs %5, %7\n"
     "}\n",
     "graph \"mixed\" {\n"
     "  %0 = Input{name=\"a\\tb\"} : f16[4]\n"
     "  %1 = Constant{data=h\"003c0040\"} : f16[2]\n"
     "  %2 = Reshape{dims=[2, 2]}(%0) : f16[2,2]\n"
     "  %3 = Binary{op=sub}(%2, %1) : f16[2,2]\n"
     "  %4 = Clamp{lo=-inf, hi=6.5}(%3) : f16[2,2]\n"
     "  %5 = ElementwiseRegion{chain=[act.leaky_relu(i0; 0.25), cast.f32(s0), cmp.ge(s1,s1)], prologue=none}(%4) : bool[2,2]\n"
     "  %6 = TopK{k=1, axis=1}(%3) : (f16[2,1], i64[2,1])\n"
     "  %7 = GetOutput{index=1}(%6) : i64[2,1]\n"
     "  outputs %5, %7\n"
     "}\n"},
    {"empty", "graph \"\" {}", "graph \"\" {\n}\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rlx_graph *g = parse_ok(cases[i].name, cases[i].written);
    if (!g) continue;
    char *t = rlx_graph_to_text(g);
    CHECK(t && strcmp(t, cases[i].canonical) == 0, "%s: canonical print:\n%s\nwant:\n%s", cases[i].name,
          t ? t : "(null)", cases[i].canonical);
    free(t);
    /* the canonical text with the name left out: graph "" { ... */
    const char *body = strstr(cases[i].canonical, " {\n");
    char *unnamed = malloc(strlen("graph \"\"") + strlen(body) + 1);
    if (unnamed) strcat(strcpy(unnamed, "graph \"\""), body);
    CHECK(unnamed && rlx_graph_hash(g) == fnv1a(unnamed), "%s: hash %016llx, FNV-1a of the text %016llx",
          cases[i].name, (unsigned long long)rlx_graph_hash(g), unnamed ? (unsigned long long)fnv1a(unnamed) : 0ull);
    free(unnamed);
    rlx_graph_free(g);
  }
  /* One pinned value, so a change of the hash function itself shows too. */
  rlx_graph *g = parse_ok("pinned", cases[0].written);
  if (g) CHECK(rlx_graph_hash(g) == 0x43f94f950d186e61ull, "pinned hash is %016llx",
               (unsigned long long)rlx_graph_hash(g));
  rlx_graph_free(g);
  CHECK(rlx_graph_hash(NULL) == 0, "hash of NULL");
  CHECK(rlx_graph_to_text(NULL) == NULL, "print of NULL");
}

/* ---------------------------------------------------------------- values that must survive */

static void test_values(void) {
  /* strings with every escape; floats at the edges of f64 */
  const char *text =
      "graph \"q\\\"uote\\\\ \\x01\\x7f\xc3\xa9\" {\n"
      "  %0 = Input{name=\"line\\nbreak\\ttab\"} : f64[3]\n"
      "  %1 = Clamp{lo=-0, hi=4.9406564584124654e-324}(%0)\n"
      "  %2 = Clamp{lo=0.1, hi=1.7976931348623157e308}(%1)\n"
      "  %3 = Pad{before=[1], after=[0], value=nan}(%2)\n"
      "  %4 = Activation{act=leaky_relu, alpha=-1e-300}(%3)\n"
      "  outputs %4\n"
      "}\n";
  rlx_graph *g = parse_ok("values", text);
  if (!g) return;
  CHECK(strcmp(g->name, "q\"uote\\ \x01\x7f\xc3\xa9") == 0, "graph name decoded as '%s'", g->name);
  CHECK(strcmp(g->nodes[0].a.name, "line\nbreak\ttab") == 0, "input name decoded as '%s'", g->nodes[0].a.name);
  CHECK(g->nodes[1].a.lo == 0 && signbit(g->nodes[1].a.lo), "-0 lost its sign");
  CHECK(g->nodes[1].a.hi == 4.9406564584124654e-324, "smallest subnormal");
  CHECK(g->nodes[2].a.lo == 0.1 && g->nodes[2].a.hi == 1.7976931348623157e308, "0.1 and DBL_MAX");
  CHECK(isnan(g->nodes[3].a.value), "nan");
  CHECK(g->nodes[4].a.alpha == -1e-300, "alpha");
  char *t = rlx_graph_to_text(g);
  CHECK(t && strstr(t, "graph \"q\\\"uote\\\\ \\x01\\x7f\xc3\xa9\" {"), "escaped graph name in:\n%s", t ? t : "(null)");
  CHECK(t && strstr(t, "name=\"line\\nbreak\\ttab\""), "escaped input name in:\n%s", t ? t : "(null)");
  CHECK(t && strstr(t, "lo=0.1, hi=1.7976931348623157e+308"), "shortest exact floats in:\n%s", t ? t : "(null)");
  free(t);
  check_round_trip("values", g);
  rlx_graph_free(g);
}

/* A graph made by the builders prints, and its print parses back to the same print. */
static void test_builder_graph(void) {
  rlx_graph *g = rlx_graph_new("built");
  int64_t dims[2] = {rlx_dim_sym(g, "B"), 8};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, dims);
  int64_t flat[1] = {-1};
  rlx_node r = rlx_reshape(g, x, 1, flat);  /* [B*8]: an anonymous dim, printed ? */
  rlx_region_step steps[2] = {
    {.kind = RLX_STEP_ACT, .op = RLX_ACT_LEAKY_RELU, .a = 0, .alpha = 0.3},
    {.kind = RLX_STEP_BIN, .op = RLX_BIN_MUL, .a = -1, .b = 0},
  };
  rlx_node e = rlx_elementwise_region(g, 1, &r, 2, steps, RLX_PROLOGUE_NONE);
  rlx_node outs[1] = {e};
  rlx_status st = rlx_graph_set_outputs(g, 1, outs);
  CHECK(st == RLX_OK, "builders: %s: %s", rlx_status_name(st), rlx_last_error());
  char *t = rlx_graph_to_text(g);
  CHECK(t && strstr(t, "Reshape{dims=[-1]}(%0) : f32[?]"), "anonymous dim printed as ? in:\n%s", t ? t : "(null)");
  CHECK(t && strstr(t, "chain=[act.leaky_relu(i0; 0.3), bin.mul(s0,i0)]"), "chain in:\n%s", t ? t : "(null)");
  free(t);
  check_round_trip("builders", g);
  rlx_graph_free(g);
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void) {
  static const struct {
    const char *what, *text;
    rlx_status st;
    const char *msg1, *msg2;  /* substrings rlx_last_error() must hold */
  } cases[] = {
    {"empty input", "", RLX_ERR_FORMAT, "line 1, col 1:", "end of input"},
    {"only a comment", "# nothing\n", RLX_ERR_FORMAT, "line 2, col 1:", "expected 'graph"},
    {"garbage", "graph \"g\" {\n  $$$\n}", RLX_ERR_FORMAT, "line 2, col 3:", "unexpected character '$'"},
    {"garbage bytes", "\x01\x02", RLX_ERR_FORMAT, "line 1, col 1:", "unexpected byte 0x01"},
    {"no graph keyword", "grph \"g\" {}", RLX_ERR_FORMAT, "line 1, col 1:", "'grph'"},
    {"unterminated string", "graph \"abc {\n}\n", RLX_ERR_FORMAT, "line 1, col 7:", "unterminated string"},
    {"unterminated at end", "graph \"abc", RLX_ERR_FORMAT, "line 1, col 7:", "unterminated string"},
    {"bad escape", "graph \"a\\qb\" {}", RLX_ERR_FORMAT, "line 1, col 9:", "unknown escape"},
    {"NUL escape", "graph \"a\\x00\" {}", RLX_ERR_FORMAT, "line 1, col 9:", "\\x00"},
    {"short \\x", "graph \"a\\x4", RLX_ERR_FORMAT, "line 1, col 9:", "two hex digits"},
    {"trailing text", "graph \"g\" {\n}\nextra", RLX_ERR_FORMAT, "line 3, col 1:", "after the graph"},
    {"unknown op", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Frobnicate(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 8:", "unknown op 'Frobnicate'"},
    {"unknown attr key", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Activation{acts=relu}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 19:", "unknown attribute 'acts' for Activation"},
    {"attr on op without attrs", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = MatMul{x=1}(%0, %0)\n}",
     RLX_ERR_FORMAT, "line 3, col 15:", "(it takes: none)"},
    {"duplicate attr key",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Activation{act=relu, act=gelu}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 29:", "'act' given twice"},
    {"bad enum value", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Binary{op=plus}(%0, %0)\n}",
     RLX_ERR_FORMAT, "line 3, col 18:", "bad value 'plus' for op (one of: add, sub"},
    {"bool as int", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = ArgMax{keep_dim=1}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 24:", "true or false"},
    {"float for int", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Softmax{axis=0.5}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 21:", "expected an integer"},
    {"int overflow", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Softmax{axis=99999999999999999999}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 21:", "does not fit in 64 bits"},
    {"f64 overflow", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Clamp{lo=1e999}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 17:", "out of the range"},
    {"bad number", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2x]\n}", RLX_ERR_FORMAT, "line 2, col 31:",
     "bad character 'x' in a number"},
    {"forward reference",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Binary{op=add}(%0, %2)\n  %2 = Activation{act=relu}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 27:",
     "%2: undefined or forward reference (graphs must be acyclic and in topological order)"},
    {"self reference", "graph \"g\" {\n  %5 = Activation{act=relu}(%5)\n}", RLX_ERR_FORMAT, "line 2, col 29:",
     "%5: undefined or forward reference"},
    {"undefined output", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  outputs %0, %3\n}", RLX_ERR_FORMAT,
     "line 3, col 15:", "%3: undefined"},
    {"duplicate label", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %0 = Input{name=\"y\"} : f32[2]\n}",
     RLX_ERR_FORMAT, "line 3, col 3:", "%0 is defined twice (first on line 2)"},
    {"label too large", "graph \"g\" {\n  %99999999999999999999 = Input{name=\"x\"} : f32[2]\n}", RLX_ERR_FORMAT,
     "line 2, col 3:", "label too large"},
    {"wrong arity", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Binary{op=add}(%0)\n}",
     RLX_ERR_INVALID, "line 3, col 8:", "takes 2 inputs, got 1"},
    {"leaf with inputs", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Param{name=\"w\"}(%0) : f32[2]\n}",
     RLX_ERR_INVALID, "line 3, col 8:", "Param takes 0 inputs, got 1"},
    {"leaf without type", "graph \"g\" {\n  %0 = Input{name=\"x\"}\n}", RLX_ERR_FORMAT, "line 2, col 8:",
     "Input needs one type"},
    {"leaf without name", "graph \"g\" {\n  %0 = Input : f32[2]\n}", RLX_ERR_FORMAT, "line 2, col 8:",
     "Input needs a name"},
    {"duplicate input name", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Param{name=\"x\"} : f32[2]\n}",
     RLX_ERR_INVALID, "line 3, col 8:", "already used"},
    {"bad hex digit", "graph \"g\" {\n  %0 = Constant{data=h\"00zz\"} : u8[2]\n}", RLX_ERR_FORMAT, "line 2, col 26:",
     "bad hex digit 'z'"},
    {"odd hex", "graph \"g\" {\n  %0 = Constant{data=h\"000\"} : u8[2]\n}", RLX_ERR_FORMAT, "line 2, col 22:",
     "odd number of hex digits"},
    {"unterminated hex", "graph \"g\" {\n  %0 = Constant{data=h\"00", RLX_ERR_FORMAT, "line 2, col 22:",
     "unterminated hex"},
    {"data too short", "graph \"g\" {\n  %0 = Constant{data=h\"0000\"} : f32[2]\n}", RLX_ERR_FORMAT,
     "line 2, col 8:", "Constant data has 2 bytes but its type f32[2] needs 8"},
    {"symbolic constant", "graph \"g\" {\n  %0 = Constant{data=h\"\"} : f32[S]\n}", RLX_ERR_SHAPE, "line 2, col 8:",
     "static shape"},
    {"type mismatch (shape)",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2,3]\n  %1 = Activation{act=relu}(%0) : f32[2,4]\n}", RLX_ERR_SHAPE,
     "line 3, col 8:", "declared type f32[2,4] but inferred f32[2,3]"},
    {"type mismatch (dtype)",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2,3]\n  %1 = Activation{act=relu}(%0) : f16[2,3]\n}", RLX_ERR_DTYPE,
     "line 3, col 8:", "declared type f16[2,3] but inferred f32[2,3]"},
    {"type mismatch (symbol)",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[S]\n  %1 = Activation{act=relu}(%0) : f32[T]\n}", RLX_ERR_SHAPE,
     "line 3, col 8:", "declared type f32[T] but inferred f32[S]"},
    {"type mismatch (? is symbolic only)",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[3]\n  %1 = Activation{act=relu}(%0) : f32[?]\n}", RLX_ERR_SHAPE,
     "line 3, col 8:", "inferred f32[3]"},
    {"type mismatch (outputs)",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[3]\n  %1 = TopK{k=1}(%0) : f32[1]\n}", RLX_ERR_SHAPE,
     "line 3, col 8:", "inferred (f32[1], i64[1])"},
    {"inference error keeps its status",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2,3]\n  %1 = Softmax{axis=5}(%0)\n}", RLX_ERR_SHAPE,
     "line 3, col 8:", "Softmax (node 1)"},
    {"too-long list", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Transpose{perm=[0,1,2,3,4,5,6,7,8]}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 40:", "list perm has more than 8 entries"},
    {"too many dims", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[1,1,1,1,1,1,1,1,1]\n}", RLX_ERR_FORMAT,
     "line 2, col 46:", "more than 8 dims"},
    {"too large type", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[4294967296,4294967296]\n}", RLX_ERR_FORMAT,
     "line 2, col 26:", "too large"},
    {"negative dim", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[-2]\n}", RLX_ERR_FORMAT, "line 2, col 30:",
     "negative dim"},
    {"three output types", "graph \"g\" {\n  %0 = Input{name=\"x\"} : (f32[1], f32[1], f32[1])\n}", RLX_ERR_FORMAT,
     "line 2, col 43:", "more than 2 output types"},
    {"unknown dtype", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f31[2]\n}", RLX_ERR_FORMAT, "line 2, col 26:",
     "expected a dtype"},
    {"sym-token int in dims",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = Reshape{dims=[-1099511627776]}(%0)\n}", RLX_ERR_FORMAT,
     "line 3, col 22:", "out of range"},
    {"bad step operand",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = ElementwiseRegion{chain=[act.relu(x0)]}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 42:", "step operand"},
    {"bad step kind",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = ElementwiseRegion{chain=[fn.relu(i0)]}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 33:", "for step kind (one of: act, bin, cast, cmp)"},
    {"alpha on a non-leaky step",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  %1 = ElementwiseRegion{chain=[act.relu(i0; 0.5)]}(%0)\n}",
     RLX_ERR_FORMAT, "line 3, col 44:", "expected ')'"},
    {"trailing comma in outputs", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  outputs %0,\n}", RLX_ERR_FORMAT,
     "line 4, col 1:", "expected a node label"},
    {"outputs not last",
     "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n  outputs %0\n  %1 = Activation{act=relu}(%0)\n}",
     RLX_ERR_FORMAT, "line 4, col 3:", "expected a node"},
    {"missing brace", "graph \"g\" {\n  %0 = Input{name=\"x\"} : f32[2]\n", RLX_ERR_FORMAT, "line 3, col 1:",
     "got end of input"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rlx_graph *g = (rlx_graph *)&g;  /* must be set to NULL on failure */
    rlx_status st = rlx_graph_from_text(cases[i].text, &g);
    const char *msg = rlx_last_error();
    CHECK(st == cases[i].st, "%s: status %s, want %s (%s)", cases[i].what, rlx_status_name(st),
          rlx_status_name(cases[i].st), msg);
    CHECK(g == NULL, "%s: *out not NULL after a failure", cases[i].what);
    CHECK(strstr(msg, cases[i].msg1) && strstr(msg, cases[i].msg2), "%s: message '%s' lacks '%s' / '%s'",
          cases[i].what, msg, cases[i].msg1, cases[i].msg2);
    if (st == RLX_OK) rlx_graph_free(g);
  }

  rlx_graph *g = (rlx_graph *)&g;
  CHECK(rlx_graph_from_text(NULL, &g) == RLX_ERR_INVALID && g == NULL, "NULL text");
  CHECK(rlx_graph_from_text("graph \"g\" {}", NULL) == RLX_ERR_INVALID, "NULL out");
  CHECK(rlx_graph_from_text(NULL, NULL) == RLX_ERR_INVALID, "NULL both");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH/every_op.rlx\n", argv[0]);
    return 2;
  }
  test_every_op(argv[1]);
  test_hash_stability();
  test_values();
  test_builder_graph();
  test_errors();
  return check_report();
}
