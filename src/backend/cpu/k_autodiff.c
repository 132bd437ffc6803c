/* k_autodiff.c — CPU kernel of GradientReversal: forward, the identity. */
#include "cpu.h"

#include <string.h>

rlx_status cpu_GradientReversal(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  (void)n;
  if (out->nbytes) memmove(out->data, in[0].data, out->nbytes);
  return RLX_OK;
}
