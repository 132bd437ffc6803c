/* ops.c — the op table, read from ops.def. */
#include "ir.h"

#include <string.h>

const ir_op_info ir_ops[RLX_OP_COUNT] = {
#define RLX_OP(Id, min_in, max_in, n_out, cat, diff, attrs) \
  {#Id, min_in, max_in, n_out, cat, diff, attrs},
#include "ops.def"
#undef RLX_OP
};

int ir_op_from_name(const char *name, size_t len) {
  for (int op = 0; op < RLX_OP_COUNT; op++)
    if (strlen(ir_ops[op].name) == len && memcmp(ir_ops[op].name, name, len) == 0) return op;
  return -1;
}
