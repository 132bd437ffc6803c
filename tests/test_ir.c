/* test_ir.c — the op and attribute tables are consistent, and the dtype
 * helpers are exact: f16/bf16 conversions against values computed here
 * independently (ldexp of the bit fields), round-to-nearest-even. */
#include "rlx.h"
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>

#include "check.h"

static void op_table(void) {
  CHECK(RLX_OP_COUNT >= 58, "op table has only %d ops", RLX_OP_COUNT);
  for (int op = 0; op < RLX_OP_COUNT; op++) {
    const ir_op_info *o = &ir_ops[op];
    CHECK(ir_op_from_name(o->name, strlen(o->name)) == op, "op %s name lookup", o->name);
    CHECK(o->n_outputs >= 1 && o->n_outputs <= IR_MAX_OUTPUTS, "op %s outputs", o->name);
    CHECK(o->max_inputs < 0 || o->max_inputs >= o->min_inputs, "op %s arity", o->name);
    /* every field ops.def names exists in attrs.def, and keys are unique per op */
    int words = 0;
    for (const char *p = o->attrs; *p;) {
      while (*p == ' ') p++;
      if (!*p) break;
      words++;
      while (*p && *p != ' ') p++;
    }
    ir_attr_id ids[IR_ATTR_COUNT];
    int n = ir_op_attr_ids(op, ids);
    CHECK(n == words, "op %s: %d of %d attrs resolve", o->name, n, words);
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++)
        CHECK(strcmp(ir_attr_table[ids[i]].key, ir_attr_table[ids[j]].key) != 0, "op %s: duplicate key %s",
              o->name, ir_attr_table[ids[i]].key);
  }
  CHECK(ir_op_from_name("NoSuchOp", 8) == -1, "unknown op");
  for (int t = 0; t < RLX_DTYPE_COUNT; t++) {
    const char *nm = rlx_dtype_name((rlx_dtype)t);
    CHECK(ir_dtype_from_name(nm, strlen(nm)) == t, "dtype %s", nm);
  }
  CHECK(rlx_dtype_nbytes(RLX_Q4_K, 512) == 288, "q4_k 512 elements = 2 blocks");
  CHECK(rlx_dtype_nbytes(RLX_Q4_0, 33) == 0, "partial block");
  CHECK(rlx_dtype_nbytes(RLX_F16, 3) == 6, "f16");
}

/* Exact value of a half bit pattern, from its fields. */
static double half_value(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

static void half_conversions(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    double want = half_value((uint16_t)h);
    float got = rlx_f16_to_f32((uint16_t)h);
    if (isnan(want) ? !isnan(got) : (double)got != want) bad++;
    /* f32 -> f16 of an exactly representable value gives the same bits */
    if (!isnan(want) && rlx_f32_to_f16((float)want) != h) bad++;
  }
  CHECK(bad == 0, "%d f16 round-trip mismatches", bad);
  /* ties to even between neighbours: 1 + 2^-11 lies halfway between 1 and 1+2^-10 */
  CHECK(rlx_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00, "tie rounds to even (down)");
  CHECK(rlx_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02, "tie rounds to even (up)");
  CHECK(rlx_f32_to_f16(65520.0f) == 0x7c00, "overflow to inf");
  CHECK(rlx_f32_to_f16(65519.0f) == 0x7bff, "largest finite");
  CHECK(rlx_f32_to_f16(0x1p-25f) == 0, "half of the smallest subnormal ties to 0");
  CHECK(rlx_f32_to_f16(0x1.8p-24f) == 2, "1.5 subnormal ulps ties to 2");
  CHECK(isnan(rlx_f16_to_f32(rlx_f32_to_f16(NAN))), "nan stays nan");

  bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float got = rlx_bf16_to_f32((uint16_t)h);
    if (!isnan(got) && rlx_f32_to_bf16(got) != h) bad++;
  }
  CHECK(bad == 0, "%d bf16 round-trip mismatches", bad);
  CHECK(rlx_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "bf16 tie to even (down)");
  CHECK(rlx_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82, "bf16 tie to even (up)");
  CHECK(isnan(rlx_bf16_to_f32(rlx_f32_to_bf16(NAN))), "bf16 nan");
}

/* The one reading of on/off switches (README: Environment switches). */
static void env_flags(void) {
  const struct {
    const char *value; /* NULL: unset */
    int fallback, want;
  } cases[] = {{NULL, 0, 0}, {NULL, 1, 1}, {"", 1, 1}, {"", 0, 0}, {"0", 1, 0}, {"00", 1, 0},
               {"1", 0, 1}, {"2", 0, 1}, {"-1", 0, 1}, {"off", 1, 0}, {"OFF", 1, 0}, {"False", 1, 0},
               {"no", 1, 0}, {"on", 0, 1}, {"yes", 0, 1}, {"true", 0, 1}, {"0x", 1, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].value) setenv("RLX_TEST_FLAG", cases[i].value, 1);
    else unsetenv("RLX_TEST_FLAG");
    CHECK(ir_env_flag("RLX_TEST_FLAG", cases[i].fallback) == cases[i].want, "RLX_TEST_FLAG=%s (default %d)",
          cases[i].value ? cases[i].value : "(unset)", cases[i].fallback);
  }
  unsetenv("RLX_TEST_FLAG");
}

int main(void) {
  op_table();
  half_conversions();
  env_flags();
  return check_report();
}
