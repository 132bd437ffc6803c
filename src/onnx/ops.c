/* ops.c — the op table (onnx_ops.def) and its lookup. */
#include "onnx.h"

#include <string.h>

#define OX_OP(Op, domain, since, fn) rlx_status ox_op_##fn(ox_importer *im, const ox_node *n);
#include "onnx_ops.def"
#undef OX_OP

static const ox_op_row ox_rows[] = {
#define OX_OP(Op, domain, since, fn) {#Op, domain, since, ox_op_##fn},
#include "onnx_ops.def"
#undef OX_OP
};

const ox_op_row *ox_find_op(const char *op_type, const char *domain, int64_t opset) {
  int dflt = !*domain || !strcmp(domain, "ai.onnx");
  const ox_op_row *best = NULL;
  for (size_t i = 0; i < sizeof ox_rows / sizeof *ox_rows; i++) {
    const ox_op_row *r = &ox_rows[i];
    if (strcmp(r->op_type, op_type) || (dflt ? *r->domain != 0 : strcmp(r->domain, domain))) continue;
    if (r->since <= opset && (!best || r->since > best->since)) best = r;
  }
  return best;
}
