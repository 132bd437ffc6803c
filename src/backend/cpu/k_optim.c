/* k_optim.c — CPU kernels of the training ops: SgdStep, AdamWStep (in
 * double, stored in the param's dtype) and Assign (a copy; the session
 * does the write-back). Semantics: src/ir/infer_optim.c.
 *
 * All-F32 updates (the usual case) run in f32, as torch's F32 optimizers
 * do (scalars rounded to f32 once, each elementwise step rounded to f32),
 * as straight loops the compiler vectorizes, threaded over the pool;
 * other dtypes go element by element through cpu_get / cpu_set, in
 * double. */
#include "cpu.h"
#include "vec.h"

#include <math.h>
#include <string.h>

/* Whether the first n_in inputs and the outputs are all F32. */
static int all_f32(const cpu_tensor *in, int n_in, const cpu_tensor *out, int n_out) {
  for (int k = 0; k < n_in; k++)
    if (in[k].dtype != RLX_F32) return 0;
  for (int k = 0; k < n_out; k++)
    if (out[k].dtype != RLX_F32) return 0;
  return 1;
}

#define ADAMW_BLOCK 256

typedef struct {
  const float *p, *g, *state;
  float *new_p, *new_state;
  int64_t len;
  float lr, mu, wd, b1, b2, eps, step_size, bc2_sqrt;
  int nesterov;
} optim_job;

static void sgd_f32(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const optim_job *J = arg;
  const float lr = J->lr, mu = J->mu, wd = J->wd;
  const float *p = J->p, *gr = J->g, *vel = J->state;
  float *np_ = J->new_p, *nv = J->new_state;
  if (mu == 0) {
    for (int64_t i = begin; i < end; i++) {
      const float pi = p[i], g = gr[i] + wd * pi;
      np_[i] = pi - lr * g;
      nv[i] = vel[i];
    }
    return;
  }
  for (int64_t i = begin; i < end; i++) {
    const float pi = p[i], g = gr[i] + wd * pi, v = mu * vel[i] + g;
    np_[i] = pi - lr * (J->nesterov ? g + mu * v : v);
    nv[i] = v;
  }
}

/* torch.optim.AdamW's single-tensor F32 step: p *= 1 - lr wd; m lerps to
 * g by 1 - b1; v = b2 v + (1 - b2) g^2; p -= step_size m / (sqrt(v) /
 * bc2_sqrt + eps). */
static void adamw_f32(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const optim_job *J = arg;
  const float decay = 1 - J->lr * J->wd, c1 = 1 - J->b1, b2 = J->b2, c2 = 1 - J->b2, eps = J->eps;
  const float step_size = J->step_size, inv_bc2 = 1 / J->bc2_sqrt;
  const float *p = J->p, *gr = J->g, *m_in = J->state, *v_in = J->state + J->len;
  float *np_ = J->new_p, *m_out = J->new_state, *v_out = J->new_state + J->len;
  const cpu_vec_ops *vo = cpu_vec();
  float root[ADAMW_BLOCK];
  /* blocks: sqrt through the vector table (a libm sqrtf call, which may set
   * errno, keeps the compiler from vectorizing the loop) */
  for (int64_t i0 = begin; i0 < end; i0 += ADAMW_BLOCK) {
    const int64_t n = end - i0 < ADAMW_BLOCK ? end - i0 : ADAMW_BLOCK;
    for (int64_t i = i0; i < i0 + n; i++) {
      const float g = gr[i];
      m_out[i] = m_in[i] + c1 * (g - m_in[i]);
      v_out[i] = b2 * v_in[i] + c2 * g * g;
    }
    vo->act(RLX_ACT_SQRT, 0.0f, v_out + i0, root, n);
    for (int64_t i = 0; i < n; i++)
      np_[i0 + i] = p[i0 + i] * decay - step_size * m_out[i0 + i] / (root[i] * inv_bc2 + eps);
  }
}

rlx_status cpu_SgdStep(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  const cpu_tensor *p = &in[0], *gr = &in[1], *vel = &in[2];
  const double lr = cpu_get(&in[3], 0), mu = n->a.momentum, wd = n->a.weight_decay;
  const int nesterov = n->a.nesterov != 0;
  if (all_f32(in, 3, out, 2)) {
    optim_job J = {.p = p->data, .g = gr->data, .state = vel->data, .new_p = out[0].data,
                   .new_state = out[1].data, .len = p->numel, .lr = (float)lr, .mu = (float)mu, .wd = (float)wd,
                   .nesterov = nesterov};
    cpu_parallel_for(ctx, p->numel, CPU_VEC_MIN_CHUNK, sgd_f32, &J);
    return RLX_OK;
  }
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
  const cpu_tensor *p = &in[0], *gr = &in[1], *mom = &in[2];
  const double lr = cpu_get(&in[3], 0), t = cpu_get(&in[4], 0);
  const double b1 = n->a.beta1, b2 = n->a.beta2, eps = n->a.eps, wd = n->a.weight_decay;
  if (!(t >= 1))
    return rlx_set_error(RLX_ERR_INVALID, "AdamWStep (node %d): step %g must be >= 1 (it counts this step)", n->id, t);
  const double step_size = lr / (1 - pow(b1, t)), bc2_sqrt = sqrt(1 - pow(b2, t));
  const int64_t len = p->numel;
  if (all_f32(in, 3, out, 2)) {
    optim_job J = {.p = p->data, .g = gr->data, .state = mom->data, .new_p = out[0].data,
                   .new_state = out[1].data, .len = len, .lr = (float)lr, .wd = (float)wd, .b1 = (float)b1,
                   .b2 = (float)b2, .eps = (float)eps, .step_size = (float)step_size, .bc2_sqrt = (float)bc2_sqrt};
    cpu_parallel_for(ctx, len, CPU_VEC_MIN_CHUNK, adamw_f32, &J);
    return RLX_OK;
  }
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
