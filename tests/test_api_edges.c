/* test_api_edges.c — edges of the public API: rlx_value_as_f64 over every
 * dtype (values written here by hand); rlx_set_param_ref refusing a
 * pointer misaligned for its dtype and accepting block dtypes anywhere
 * (their dequantized values against ones computed here); input and param
 * names kept unique by the builder and by rlx_graph_verify in graphs of
 * tens of thousands of leaves, also after a clone. */
#include "rlx.h"
#include "ir/ir.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void value_as_f64(void) {
  const float f32[] = {1.5f, -0.25f};
  const uint16_t f16[] = {0x3c00, 0xc000}, bf16[] = {0x3f80, 0xc040}; /* 1, -2; 1, -3 */
  const double f64[] = {0.1, -1e300};
  const int8_t i8[] = {-128, 127};
  const uint8_t u8[] = {0, 255}, b[] = {0, 1, 7};
  const int32_t i32[] = {INT32_MIN, 5};
  const int64_t i64[] = {-((int64_t)1 << 53), 42};
  CHECK(rlx_value_as_f64(RLX_F32, f32, 1) == -0.25, "f32");
  CHECK(rlx_value_as_f64(RLX_F16, f16, 0) == 1 && rlx_value_as_f64(RLX_F16, f16, 1) == -2, "f16");
  CHECK(rlx_value_as_f64(RLX_BF16, bf16, 0) == 1 && rlx_value_as_f64(RLX_BF16, bf16, 1) == -3, "bf16");
  CHECK(rlx_value_as_f64(RLX_F64, f64, 0) == 0.1 && rlx_value_as_f64(RLX_F64, f64, 1) == -1e300, "f64");
  CHECK(rlx_value_as_f64(RLX_I8, i8, 0) == -128 && rlx_value_as_f64(RLX_I8, i8, 1) == 127, "i8");
  CHECK(rlx_value_as_f64(RLX_U8, u8, 1) == 255, "u8");
  CHECK(rlx_value_as_f64(RLX_I32, i32, 0) == (double)INT32_MIN, "i32");
  CHECK(rlx_value_as_f64(RLX_I64, i64, 0) == -9007199254740992.0 && rlx_value_as_f64(RLX_I64, i64, 1) == 42, "i64");
  CHECK(rlx_value_as_f64(RLX_BOOL, b, 0) == 0 && rlx_value_as_f64(RLX_BOOL, b, 1) == 1 &&
        rlx_value_as_f64(RLX_BOOL, b, 2) == 1, "bool: any nonzero byte is true");
  CHECK(isnan(rlx_value_as_f64(RLX_Q4_0, u8, 0)) && isnan(rlx_value_as_f64(RLX_DTYPE_COUNT, u8, 0)),
        "block and invalid dtypes: NaN");
}

/* A session computing w as f64 (plain dtypes) or dequantized (block ones). */
static rlx_session *session_of(rlx_dtype t, int64_t n, rlx_graph **g) {
  *g = rlx_graph_new("param_ref");
  rlx_node w = rlx_param(*g, "w", t, 1, &n);
  rlx_node y = rlx_dtype_is_block(t) ? rlx_dequantize(*g, w) : rlx_cast(*g, w, RLX_F64);
  rlx_graph_set_outputs(*g, 1, &y);
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(*g, NULL, &s);
  CHECK(st == RLX_OK, "compile %s: %s", rlx_dtype_name(t), rlx_last_error());
  return s;
}

static void param_ref_alignment(void) {
  /* 8-aligned storage; offsets from it make misaligned pointers without UB. */
  static union {
    double align;
    unsigned char bytes[256];
  } buf;
  rlx_graph *g;
  rlx_session *s = session_of(RLX_F32, 4, &g);
  const float w[4] = {1, -2, 3.5f, 4};
  memcpy(buf.bytes + 4, w, sizeof w);
  CHECK_ERR(rlx_set_param_ref(s, "w", buf.bytes + 2, sizeof w), RLX_ERR_INVALID, "\"w\"", "f32",
            "not aligned to 4 bytes", "rlx_set_param");
  CHECK(rlx_set_param_ref(s, "w", buf.bytes + 4, sizeof w) == RLX_OK, "aligned f32: %s", rlx_last_error());
  double y[4] = {0};
  CHECK(rlx_run(s) == RLX_OK && rlx_output(s, 0, y, sizeof y) == RLX_OK, "run: %s", rlx_last_error());
  CHECK(y[0] == 1 && y[1] == -2 && y[2] == 3.5 && y[3] == 4, "borrowed f32 values %g %g %g %g", y[0], y[1], y[2],
        y[3]);
  rlx_session_free(s);
  rlx_graph_free(g);

  s = session_of(RLX_F64, 2, &g);
  CHECK_ERR(rlx_set_param_ref(s, "w", buf.bytes + 4, 16), RLX_ERR_INVALID, "not aligned to 8 bytes");
  CHECK(rlx_set_param_ref(s, "w", buf.bytes + 8, 16) == RLX_OK, "aligned f64: %s", rlx_last_error());
  rlx_session_free(s);
  rlx_graph_free(g);

  s = session_of(RLX_U8, 3, &g);
  CHECK(rlx_set_param_ref(s, "w", buf.bytes + 1, 3) == RLX_OK, "u8 anywhere: %s", rlx_last_error());
  rlx_session_free(s);
  rlx_graph_free(g);

  /* One q8_0 block (f16 scale, 32 int8) at an odd address: read bytewise. */
  unsigned char *blk = buf.bytes + 33;
  const uint16_t d = rlx_f32_to_f16(0.5f);
  blk[0] = (unsigned char)(d & 0xff);
  blk[1] = (unsigned char)(d >> 8);
  for (int i = 0; i < 32; i++) blk[2 + i] = (unsigned char)(int8_t)(i - 16);
  s = session_of(RLX_Q8_0, 32, &g);
  CHECK(rlx_set_param_ref(s, "w", blk, 34) == RLX_OK, "q8_0 at an odd address: %s", rlx_last_error());
  float deq[32] = {0};
  CHECK(rlx_run(s) == RLX_OK && rlx_output(s, 0, deq, sizeof deq) == RLX_OK, "run q8_0: %s", rlx_last_error());
  int bad = 0;
  for (int i = 0; i < 32; i++) bad += deq[i] != 0.5f * (float)(i - 16);
  CHECK(!bad, "%d of 32 dequantized values differ", bad);
  rlx_session_free(s);
  rlx_graph_free(g);
}

enum { MANY = 30000 };

static void unique_names(void) {
  rlx_graph *g = rlx_graph_new("many_leaves");
  int64_t one = 1;
  char name[32];
  rlx_node last = -1;
  for (int i = 0; i < MANY; i++) {
    snprintf(name, sizeof name, "%s%d", i % 2 ? "p" : "x", i);
    last = i % 2 ? rlx_param(g, name, RLX_F32, 1, &one) : rlx_input(g, name, RLX_F32, 1, &one);
  }
  CHECK(last == MANY - 1, "%d distinct leaves: %s", MANY, rlx_last_error());
  rlx_graph_set_outputs(g, 1, &last);
  CHECK(rlx_graph_verify(g) == RLX_OK, "verify: %s", rlx_last_error());

  /* A clone indexes its names afresh. */
  rlx_graph *c = ir_graph_clone(g);
  CHECK(c != NULL, "clone");
  if (c) {
    CHECK(rlx_param(c, "p12345", RLX_F32, 1, &one) < 0, "a clone catches a taken name");
    CHECK_ERR(rlx_graph_status(c), RLX_ERR_INVALID, "\"p12345\" is already used by another input or param");
    rlx_graph_free(c);
  }

  /* An input and a param share one namespace. */
  CHECK(rlx_input(g, "p29999", RLX_F32, 1, &one) < 0, "input named like a param");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_INVALID, "\"p29999\" is already used");
  rlx_graph_free(g);

  /* The verifier on its own: a name changed behind the builder's back. */
  g = rlx_graph_new("renamed");
  rlx_node a = rlx_input(g, "a", RLX_F32, 1, &one);
  rlx_node b = rlx_param(g, "b", RLX_F32, 1, &one);
  rlx_node y = rlx_add(g, a, b);
  rlx_graph_set_outputs(g, 1, &y);
  CHECK(rlx_graph_verify(g) == RLX_OK, "verify a, b: %s", rlx_last_error());
  g->nodes[b].a.name[0] = 'a';
  CHECK_ERR(rlx_graph_verify(g), RLX_ERR_INVALID, "Param (node 1) name \"a\" is also node 0's");
  rlx_graph_free(g);
}

int main(void) {
  value_as_f64();
  param_ref_alignment();
  unique_names();
  return check_report();
}
