/* k_conv.c — CPU kernels of Conv, FusedConv, ConvTranspose and Pool.
 *
 * F32, F16 and BF16 convolutions run on the GEMM path (conv_gemm.c). The
 * loops here are the reference, and compute F64: inputs are loaded into
 * double arrays, one loop nest computes, the result is stored with
 * rounding. A 1-D op runs as a 2-D one (conv_geom).
 */
#include "conv_depthwise.h"
#include "conv_gemm.h"
#include "conv_weights.h"
#include "cpu_features.h"
#include "elementwise_math.h"
#include "pool_max.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void conv_geom_init(const ir_node *n, const cpu_tensor *x, const cpu_tensor *y,
                    const int64_t *kernel, conv_geom *g) {
  int nd = (int)n->a.ndim, first = 2 - nd;
  for (int i = 0; i < 2; i++) {
    g->in[i] = g->out[i] = g->k[i] = g->stride[i] = g->dil[i] = 1;
    g->pad[i] = 0;
  }
  for (int i = 0; i < nd; i++) {
    g->in[first + i] = x->d[2 + i];
    g->out[first + i] = y->d[2 + i];
    g->k[first + i] = kernel[i];
    g->stride[first + i] = n->a.stride.v[i];
    g->pad[first + i] = n->a.pad.v[i];
    /* Pool has no dilation list (its attrs stay empty): 1. */
    g->dil[first + i] = n->a.dilation.n ? n->a.dilation.v[i] : 1;
  }
}

/* The reference loops' buffers: x, w and the optional bias (else NULL)
 * loaded as double, and y for out's values; on failure none is held. */
static rlx_status conv_buffers(const ir_node *n, const cpu_tensor *in, const cpu_tensor *out, double **x,
                               double **w, double **bias, double **y) {
  *x = cpu_load_f64(&in[0]);
  *w = cpu_load_f64(&in[1]);
  *bias = n->n_in >= 3 ? cpu_load_f64(&in[2]) : NULL;
  *y = malloc((size_t)out->numel * sizeof **y + 1);
  if (!*x || !*w || (n->n_in >= 3 && !*bias) || !*y) {
    free(*x);
    free(*w);
    free(*bias);
    free(*y);
    return rlx_set_error(RLX_ERR_NOMEM, "%s (node %d): out of memory", ir_ops[n->op].name, n->id);
  }
  return RLX_OK;
}

/* Stores y into out and frees the buffers of conv_buffers. */
static void conv_store(cpu_tensor *out, double *x, double *w, double *bias, double *y) {
  cpu_store_f64(out, y);
  free(x);
  free(w);
  free(bias);
  free(y);
}

/* y[b, o, oh, ow] = bias[o] + sum over the group's channels c and kernel
 * taps of x[b, c, oh*s - pad + kh*dil, ...] * w[o, c, kh, kw]; taps in the
 * padding contribute 0. The F32 paths of depthwise convs and of packed
 * weights also apply ce (a FusedConv's epilogue) and set *applied. */
static rlx_status conv_run(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out,
                           const conv_epilogue *ce, int *applied) {
  const cpu_tensor *xt = &in[0], *wt = &in[1];
  double *x, *w, *bias, *y;
  conv_geom g;
  conv_geom_init(n, xt, out, wt->d + 2, &g);
  *applied = conv_depthwise_applies(n, in, out) || conv_weights_applies(n, in, out);
  if (conv_depthwise_applies(n, in, out)) return conv_depthwise_forward(ctx, n, &g, in, out, ce);
  if (conv_weights_applies(n, in, out)) return conv_weights_forward(ctx, n, &g, in, out, ce);
  if (conv_gemm_applies(in, n->n_in, out)) return conv_gemm_forward(ctx, n, &g, in, out);
  rlx_status st = conv_buffers(n, in, out, &x, &w, &bias, &y);
  if (st != RLX_OK) return st;
  int64_t batch = xt->d[0], c_in = xt->d[1], c_out = wt->d[0];
  int64_t cg = wt->d[1], og = c_out / n->a.groups;
  int64_t in_plane = g.in[0] * g.in[1], out_plane = g.out[0] * g.out[1], taps = g.k[0] * g.k[1];
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t o = 0; o < c_out; o++) {
      const double *xg = x + (b * c_in + (o / og) * cg) * in_plane;
      const double *wo = w + o * cg * taps;
      double *yo = y + (b * c_out + o) * out_plane;
      for (int64_t oh = 0; oh < g.out[0]; oh++) {
        for (int64_t ow = 0; ow < g.out[1]; ow++) {
          double acc = bias ? bias[o] : 0.0;
          for (int64_t c = 0; c < cg; c++) {
            for (int64_t kh = 0; kh < g.k[0]; kh++) {
              int64_t ih = oh * g.stride[0] - g.pad[0] + kh * g.dil[0];
              if (ih < 0 || ih >= g.in[0]) continue;
              for (int64_t kw = 0; kw < g.k[1]; kw++) {
                int64_t iw = ow * g.stride[1] - g.pad[1] + kw * g.dil[1];
                if (iw < 0 || iw >= g.in[1]) continue;
                acc += xg[(c * g.in[0] + ih) * g.in[1] + iw] *
                       wo[(c * g.k[0] + kh) * g.k[1] + kw];
              }
            }
          }
          yo[oh * g.out[1] + ow] = acc;
        }
      }
    }
  }
  conv_store(out, x, w, bias, y);
  return RLX_OK;
}

rlx_status cpu_Conv(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  int applied;
  return conv_run(ctx, n, in, out, NULL, &applied);
}

/* clamp(act(conv + bias + residual)): the conv's kernels apply the rest
 * where they can (in their output tiles), else it runs here after them.
 * The plan may put the output in the residual's buffer (plan_memory.c):
 * the packed-weight paths (conv_weights.c) read each residual element
 * before they store that output element; the others, which store the conv
 * before its epilogue, get a copy of the residual. */
rlx_status cpu_FusedConv(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  const int clamp = n->a.lo > -INFINITY || n->a.hi < INFINITY;
  const cpu_tensor *res = n->n_in == 4 ? &in[3] : NULL;
  cpu_tensor res_copy;
  if (res && res->data == out->data && (conv_depthwise_applies(n, in, out) || !conv_weights_applies(n, in, out))) {
    res_copy = *res;
    if (!(res_copy.data = malloc(res->nbytes + 1)))
      return rlx_set_error(RLX_ERR_NOMEM, "FusedConv (node %d): out of memory", n->id);
    memcpy(res_copy.data, res->data, res->nbytes);
    res = &res_copy;
  }
  conv_epilogue ce = {.act = (rlx_act)n->a.act, .alpha = (float)n->a.alpha, .clamp = clamp,
                      .lo = (float)n->a.lo, .hi = (float)n->a.hi};
  ce.residual = res && res->dtype == RLX_F32 ? res->data : NULL;
  int applied;
  rlx_status st = conv_run(ctx, n, in, out, &ce, &applied);
  if (st == RLX_OK && !applied) {
    if (out->dtype == RLX_F32)
      cpu_gemm_row_post(out->data, out->numel, 0.0f, ce.residual, &ce);
    else
      for (int64_t i = 0; i < out->numel; i++) { /* selects in the clamp: NaN stays */
        double v = cpu_act_apply(ce.act, cpu_get(out, i) + (res ? cpu_get(res, i) : 0.0), n->a.alpha);
        v = clamp && v < n->a.lo ? n->a.lo : v;
        cpu_set(out, i, clamp && v > n->a.hi ? n->a.hi : v);
      }
  }
  if (res == &res_copy) free(res_copy.data);
  return st;
}

/* The adjoint of Conv: every input element x[b, c, ih, iw] scatters
 * x * w[c, oc, kh, kw] to output position ih*s - pad + kh*dil (the begin
 * pad crops; positions past the output end are the end pad's crop). */
rlx_status cpu_ConvTranspose(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                             cpu_tensor *out) {
  const cpu_tensor *xt = &in[0], *wt = &in[1];
  double *x, *w, *bias, *y;
  conv_geom g;
  conv_geom_init(n, xt, out, wt->d + 2, &g);
  if (conv_gemm_applies(in, n->n_in, out)) return conv_gemm_transpose(ctx, n, &g, in, out);
  rlx_status st = conv_buffers(n, in, out, &x, &w, &bias, &y);
  if (st != RLX_OK) return st;
  int64_t batch = xt->d[0], c_in = xt->d[1], og = wt->d[1], c_out = out->d[1];
  int64_t cg = c_in / n->a.groups;
  int64_t in_plane = g.in[0] * g.in[1], out_plane = g.out[0] * g.out[1], taps = g.k[0] * g.k[1];
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t o = 0; o < c_out; o++) {
      double *yo = y + (b * c_out + o) * out_plane;
      for (int64_t i = 0; i < out_plane; i++) yo[i] = bias ? bias[o] : 0.0;
    }
    for (int64_t c = 0; c < c_in; c++) {
      const double *xc = x + (b * c_in + c) * in_plane;
      for (int64_t oc = 0; oc < og; oc++) {
        const double *wk = w + (c * og + oc) * taps;
        double *yo = y + (b * c_out + (c / cg) * og + oc) * out_plane;
        for (int64_t ih = 0; ih < g.in[0]; ih++) {
          for (int64_t iw = 0; iw < g.in[1]; iw++) {
            double v = xc[ih * g.in[1] + iw];
            for (int64_t kh = 0; kh < g.k[0]; kh++) {
              int64_t oh = ih * g.stride[0] - g.pad[0] + kh * g.dil[0];
              if (oh < 0 || oh >= g.out[0]) continue;
              for (int64_t kw = 0; kw < g.k[1]; kw++) {
                int64_t ow = iw * g.stride[1] - g.pad[1] + kw * g.dil[1];
                if (ow < 0 || ow >= g.out[1]) continue;
                yo[oh * g.out[1] + ow] += v * wk[kh * g.k[1] + kw];
              }
            }
          }
        }
      }
    }
  }
  conv_store(out, x, w, bias, y);
  return RLX_OK;
}

/* Max (NaN propagates) or average over each window; pad positions are
 * skipped, and counted in the average's divisor only with
 * count_include_pad. Inference guarantees a non-pad element per window.
 * One loop nest, instantiated for float (F32, F16, BF16) and double (the
 * rest), threaded over the N * C planes. */
typedef struct {
  conv_geom g;
  int is_max, count_include_pad;
  const void *x;
  void *y;
} pool_job;

#define POOL_PLANES(name, T)                                                                        \
  static void name(void *arg, int64_t begin, int64_t end, int thread) {                             \
    (void)thread;                                                                                   \
    const pool_job *J = arg;                                                                        \
    const conv_geom *g = &J->g;                                                                     \
    for (int64_t p = begin; p < end; p++) {                                                         \
      const T *xp = (const T *)J->x + p * g->in[0] * g->in[1];                                      \
      T *yp = (T *)J->y + p * g->out[0] * g->out[1];                                                \
      for (int64_t oh = 0; oh < g->out[0]; oh++) {                                                  \
        const int64_t h0 = oh * g->stride[0] - g->pad[0];                                           \
        const int64_t kh0 = h0 < 0 ? -h0 : 0, kh1 = g->in[0] - h0 < g->k[0] ? g->in[0] - h0 : g->k[0]; \
        for (int64_t ow = 0; ow < g->out[1]; ow++) {                                                \
          const int64_t w0 = ow * g->stride[1] - g->pad[1];                                         \
          const int64_t kw0 = w0 < 0 ? -w0 : 0, kw1 = g->in[1] - w0 < g->k[1] ? g->in[1] - w0 : g->k[1]; \
          T acc = J->is_max ? (T)-INFINITY : (T)0;                                                  \
          int nan = 0;                                                                              \
          /* max as a select (a max instruction), not a branch: ties and    \
           * random orders of relu outputs mispredict; a window with a NaN  \
           * gets its first NaN, as the NaN check of the scalar rule */    \
          for (int64_t kh = kh0; kh < kh1; kh++) {                                                  \
            const T *row = xp + (h0 + kh) * g->in[1] + w0;                                          \
            for (int64_t kw = kw0; kw < kw1; kw++) {                                                \
              const T v = row[kw];                                                                  \
              if (J->is_max) {                                                                      \
                acc = v > acc ? v : acc;                                                            \
                nan |= v != v;                                                                      \
              } else {                                                                              \
                acc += v;                                                                           \
              }                                                                                     \
            }                                                                                       \
          }                                                                                         \
          for (int64_t kh = kh0; nan && kh < kh1; kh++)                                             \
            for (int64_t kw = kw0; nan && kw < kw1; kw++)                                           \
              if (xp[(h0 + kh) * g->in[1] + w0 + kw] != xp[(h0 + kh) * g->in[1] + w0 + kw]) {      \
                acc = xp[(h0 + kh) * g->in[1] + w0 + kw];                                           \
                nan = 0;                                                                            \
              }                                                                                     \
          if (!J->is_max)                                                                           \
            acc /= (T)(J->count_include_pad ? g->k[0] * g->k[1] : (kh1 - kh0) * (kw1 - kw0));       \
          yp[oh * g->out[1] + ow] = acc;                                                            \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }
POOL_PLANES(pool_planes_f64, double)
POOL_PLANES(pool_planes_f32, float)
#undef POOL_PLANES

/* F32 max pooling over 2x2 windows of stride 2 without pads (the usual
 * CNN pool) as straight loops over pairs of input rows; a plane with a
 * NaN goes through pool_planes_f32 (NaN propagation). */
static void pool_planes_max2x2_f32(void *arg, int64_t begin, int64_t end, int thread) {
  const pool_job *J = arg;
  const conv_geom *g = &J->g;
  const int64_t W = g->in[1], OH = g->out[0], OW = g->out[1];
  for (int64_t p = begin; p < end; p++) {
    const float *xp = (const float *)J->x + p * g->in[0] * W;
    float *yp = (float *)J->y + p * OH * OW;
    int nan = 0;
    for (int64_t oh = 0; oh < OH; oh++) {
      const float *r0 = xp + 2 * oh * W, *r1 = r0 + W;
      float *y = yp + oh * OW;
      for (int64_t ow = 0; ow < OW; ow++) {
        const float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        float m = a; /* in window order: the first of equal values (-0, +0) wins */
        m = b > m ? b : m;
        m = c > m ? c : m;
        y[ow] = d > m ? d : m;
        nan |= (a != a) | (b != b) | (c != c) | (d != d);
      }
    }
    if (nan) pool_planes_f32(arg, p, p + 1, thread);
  }
}

/* F32 max pooling of any window as two passes per output row: the max of
 * the window's input rows (those inside the input) into a row with the
 * padding as -inf, then the max of each window's columns from that row;
 * both loops vectorize. A plane with a NaN goes through pool_planes_f32
 * (NaN propagation). ResNet's 3x3 stride-2 pool took 2% of its time with
 * the window loops. */
static void pool_planes_max_rows_f32(void *arg, int64_t begin, int64_t end, int thread) {
  const pool_job *J = arg;
  const conv_geom *g = &J->g;
  const int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1], KW = g->k[1], s = g->stride[1];
  const int64_t wide = (OW - 1) * s + KW; /* the padded columns the windows read */
  float *row = malloc((size_t)(wide > W + g->pad[1] ? wide : W + g->pad[1]) * sizeof *row + 1);
  if (!row) {
    pool_planes_f32(arg, begin, end, thread);
    return;
  }
  for (int64_t p = begin; p < end; p++) {
    const float *xp = (const float *)J->x + p * H * W;
    float *yp = (float *)J->y + p * OH * OW;
    int nan = 0;
    for (int64_t oh = 0; oh < OH; oh++) {
      const int64_t h0 = oh * g->stride[0] - g->pad[0];
      const int64_t kh0 = h0 < 0 ? -h0 : 0, kh1 = H - h0 < g->k[0] ? H - h0 : g->k[0];
      for (int64_t j = 0; j < wide; j++) row[j] = -INFINITY;
      float *r = row + g->pad[1];
      const int64_t n = wide - g->pad[1] < W ? wide - g->pad[1] : W;
      for (int64_t kh = kh0; kh < kh1; kh++) {
        const float *xr = xp + (h0 + kh) * W;
        for (int64_t j = 0; j < n; j++) {
          const float v = xr[j];
          r[j] = v > r[j] ? v : r[j];
          nan |= v != v;
        }
      }
      float *yr = yp + oh * OW;
      for (int64_t ow = 0; ow < OW; ow++) {
        const float *w = row + ow * s;
        float m = w[0];
        for (int64_t kw = 1; kw < KW; kw++) m = w[kw] > m ? w[kw] : m;
        yr[ow] = m;
      }
    }
    if (nan) pool_planes_f32(arg, p, p + 1, thread);
  }
  free(row);
}

/* F32 max pooling of windows three columns wide, stride 1 or 2 along W,
 * by the AVX-512 plane kernel (pool_max_avx512.c); a plane with a NaN
 * goes through pool_planes_f32 (NaN propagation). NULL where the CPU or
 * the geometry does not allow it. */
#if defined(__x86_64__) || defined(__i386__)
static void pool_planes_max3_f32(void *arg, int64_t begin, int64_t end, int thread) {
  const pool_job *J = arg;
  const int64_t in_plane = J->g.in[0] * J->g.in[1], out_plane = J->g.out[0] * J->g.out[1];
  float *row = malloc(pool_max3_row_floats(&J->g) * sizeof *row);
  if (!row) {
    pool_planes_f32(arg, begin, end, thread);
    return;
  }
  for (int64_t p = begin; p < end; p++)
    if (pool_max3_plane_avx512(&J->g, (const float *)J->x + p * in_plane, (float *)J->y + p * out_plane, row))
      pool_planes_f32(arg, p, p + 1, thread);
  free(row);
}
#endif

static cpu_task_fn pool_max3_kernel(const conv_geom *g) {
#if defined(__x86_64__) || defined(__i386__)
  if (cpu_get_features()->avx512 && g->k[1] == 3 && g->dil[0] == 1 && g->dil[1] == 1 &&
      (g->stride[1] == 1 || g->stride[1] == 2))
    return pool_planes_max3_f32;
#else
  (void)g;
#endif
  return NULL;
}

rlx_status cpu_Pool(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  pool_job J = {.is_max = n->a.pool == RLX_POOL_MAX, .count_include_pad = n->a.count_include_pad != 0};
  conv_geom_init(n, &in[0], out, n->a.kernel.v, &J.g);
  const int f32 = out->dtype == RLX_F32, f64 = !f32 && out->dtype != RLX_F16 && out->dtype != RLX_BF16;
  void *x = f32 ? NULL : f64 ? (void *)cpu_load_f64(&in[0]) : (void *)cpu_load_f32(&in[0]);
  void *y = f32 ? NULL : malloc((size_t)out->numel * (f64 ? sizeof(double) : sizeof(float)) + 1);
  if (!f32 && (!x || !y)) {
    free(x);
    free(y);
    return rlx_set_error(RLX_ERR_NOMEM, "Pool (node %d): out of memory", n->id);
  }
  J.x = f32 ? in[0].data : x;
  J.y = f32 ? out->data : y;
  const int64_t planes = in[0].d[0] * in[0].d[1], per_plane = in[0].numel / (planes ? planes : 1);
  const conv_geom *g = &J.g;
  const int max2x2 = J.is_max && f32 && g->k[0] == 2 && g->k[1] == 2 && g->stride[0] == 2 && g->stride[1] == 2 &&
                     g->pad[0] == 0 && g->pad[1] == 0 && g->dil[0] == 1 && g->dil[1] == 1 && n->a.pad.v[2] == 0 &&
                     n->a.pad.v[3] == 0;
  cpu_task_fn max3 = J.is_max && f32 ? pool_max3_kernel(g) : NULL;
  cpu_parallel_for(ctx, planes, 1 + 16384 / (per_plane + 1),
                   max2x2                  ? pool_planes_max2x2_f32
                   : max3                  ? max3
                   : J.is_max && f32       ? pool_planes_max_rows_f32
                   : f64                   ? pool_planes_f64
                                           : pool_planes_f32,
                   &J);
  if (f64)
    cpu_store_f64(out, y);
  else if (!f32)
    cpu_store_f32(out, y);
  free(x);
  free(y);
  return RLX_OK;
}
