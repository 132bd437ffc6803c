/* k_optim.c — CPU kernels of the training ops: SgdStep, AdamWStep (in
 * double, stored in the param's dtype) and Assign (a copy; the session
 * does the write-back). Semantics: src/ir/infer_optim.c. */
#include "cpu.h"

#include <math.h>
#include <string.h>

rlx_status cpu_SgdStep(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *p = &in[0], *gr = &in[1], *vel = &in[2];
  const double lr = cpu_get(&in[3], 0), mu = n->a.momentum, wd = n->a.weight_decay;
  const int nesterov = n->a.nesterov != 0;
  for (int64_t i = 0; i < p->numel; i++) {
    double pi = cpu_get(p, i), g = cpu_get(gr, i) + wd * pi, v = cpu_get(vel, i);
    if (mu != 0) {
      v = mu * v + g;
      g = nesterov ? g + mu * v : v;
    }
    cpu_set(&out[0], i, pi - lr * g);
    cpu_set(&out[1], i, v);
  }
  return RLX_OK;
}

rlx_status cpu_AdamWStep(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *p = &in[0], *gr = &in[1], *mom = &in[2];
  const double lr = cpu_get(&in[3], 0), t = cpu_get(&in[4], 0);
  const double b1 = n->a.beta1, b2 = n->a.beta2, eps = n->a.eps, wd = n->a.weight_decay;
  if (!(t >= 1))
    return rlx_set_error(RLX_ERR_INVALID, "AdamWStep (node %d): step %g must be >= 1 (it counts this step)", n->id, t);
  const double step_size = lr / (1 - pow(b1, t)), bc2_sqrt = sqrt(1 - pow(b2, t));
  const int64_t len = p->numel;
  for (int64_t i = 0; i < len; i++) {
    double g = cpu_get(gr, i), m = cpu_get(mom, i), v = cpu_get(mom, len + i);
    double pi = cpu_get(p, i) * (1 - lr * wd);
    m = m + (1 - b1) * (g - m); /* torch's lerp */
    v = b2 * v + (1 - b2) * g * g;
    cpu_set(&out[0], i, pi - step_size * m / (sqrt(v) / bc2_sqrt + eps));
    cpu_set(&out[1], i, m);
    cpu_set(&out[1], len + i, v);
  }
  return RLX_OK;
}

rlx_status cpu_Assign(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  (void)n;
  if (out->nbytes && out->data != in[1].data) memmove(out->data, in[1].data, out->nbytes);
  return RLX_OK;
}
