/* attrs.c — the attribute table (from attrs.def), enum name tables, and
 * attribute lifetime (defaults, deep copy, free). */
#include "ir.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Indexed by the enum values of rlx.h; NULL-terminated. */
const char *const ir_act_names[] = {"none", "gelu", "gelu_tanh", "silu", "relu", "leaky_relu",
  "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "neg", "abs", "sin", "cos", "erf",
  "softplus", "round", "sign", "reciprocal", "square", NULL};
const char *const ir_binop_names[] = {"add", "sub", "mul", "div", "pow", "max", "min", "mod", NULL};
const char *const ir_cmpop_names[] = {"eq", "ne", "lt", "le", "gt", "ge", NULL};
const char *const ir_reduce_names[] = {"sum", "mean", "max", "min", "prod", NULL};
const char *const ir_mask_names[] = {"none", "causal", "sliding_window", "custom", NULL};
const char *const ir_layout_names[] = {"bshd", "bhsd", NULL};
const char *const ir_rope_mode_names[] = {"normal", "neox", NULL};
const char *const ir_pool_names[] = {"max", "avg", NULL};
const char *const ir_resize_names[] = {"nearest", "bilinear", NULL};
const char *const ir_prologue_names[] = {"none", "resize_nearest_2x", NULL};

const ir_attr_info ir_attr_table[IR_ATTR_COUNT] = {
#define RLX_ATTR(field, key, kind, enames, def) \
  {#field, key, IR_A_##kind, enames, def, offsetof(ir_attrs, field)},
#include "attrs.def"
#undef RLX_ATTR
};

static int attr_id_from_field(const char *s, size_t len) {
  for (int i = 0; i < IR_ATTR_COUNT; i++)
    if (strlen(ir_attr_table[i].field) == len && memcmp(ir_attr_table[i].field, s, len) == 0)
      return i;
  return -1;
}

int ir_op_attr_ids(int op, ir_attr_id ids[IR_ATTR_COUNT]) {
  int n = 0;
  const char *s = ir_ops[op].attrs;
  while (*s) {
    while (*s == ' ') s++;
    const char *e = s;
    while (*e && *e != ' ') e++;
    if (e > s) {
      int id = attr_id_from_field(s, (size_t)(e - s));
      /* ops.def names only fields of attrs.def: checked by test_ir */
      if (id >= 0 && n < IR_ATTR_COUNT) ids[n++] = (ir_attr_id)id;
    }
    s = e;
  }
  return n;
}

void ir_attrs_init_defaults(ir_attrs *a) {
  memset(a, 0, sizeof *a);
  for (int i = 0; i < IR_ATTR_COUNT; i++) {
    const ir_attr_info *t = &ir_attr_table[i];
    char *p = (char *)a + t->offset;
    switch (t->kind) {
    case IR_A_INT: case IR_A_BOOL: case IR_A_ENUM: case IR_A_DTYPE: case IR_A_DTYPE_OR_NONE: {
      int64_t v = (int64_t)t->def;
      memcpy(p, &v, sizeof v);
      break;
    }
    case IR_A_F64: memcpy(p, &t->def, sizeof t->def); break;
    default: break;  /* strings, bytes, lists, chains: empty */
    }
  }
}

int ir_attrs_copy(ir_attrs *dst, const ir_attrs *src) {
  *dst = *src;
  dst->name = NULL;
  dst->data.p = NULL;
  dst->chain.s = NULL;
  if (src->name) {
    size_t n = strlen(src->name) + 1;
    if (!(dst->name = malloc(n))) goto nomem;
    memcpy(dst->name, src->name, n);
  }
  if (src->data.n) {
    if (!(dst->data.p = malloc(src->data.n))) goto nomem;
    memcpy(dst->data.p, src->data.p, src->data.n);
  }
  if (src->chain.n) {
    size_t n = (size_t)src->chain.n * sizeof *src->chain.s;
    if (!(dst->chain.s = malloc(n))) goto nomem;
    memcpy(dst->chain.s, src->chain.s, n);
  }
  return 1;
nomem:
  ir_attrs_free(dst);
  return 0;
}

void ir_attrs_free(ir_attrs *a) {
  free(a->name);
  free(a->data.p);
  free(a->chain.s);
  a->name = NULL;
  a->data.p = NULL;
  a->data.n = 0;
  a->chain.s = NULL;
  a->chain.n = 0;
}

int ir_enum_from_name(const char *const *names, const char *s, size_t len) {
  for (int i = 0; names[i]; i++)
    if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return i;
  return -1;
}
