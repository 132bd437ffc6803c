/* infer_conv.c — builders and shape inference of the convolution, pooling,
 * resizing and signal ops (OPS.md 38-44 and 65): Conv, ConvTranspose, Pool,
 * ResizeNearest2x, Resize, Fft, LogMel, and the fused FusedConv (Conv with
 * its epilogue).
 *
 * Spatial list attributes (ILIST) of Conv / ConvTranspose / Pool:
 *   stride[ndim], dilation[ndim], output_pad[ndim], kernel[ndim],
 *   pad[2*ndim] = [begin_0, (begin_1,) end_0, (end_1)].
 * An empty stride / dilation list means all 1, an empty pad / output_pad all
 * 0; inference writes the filled list back, so the text form is explicit.
 */
#include "ir.h"

#include <math.h>

/* Upper bound of stride / dilation / pad / kernel / output_pad values: with
 * dims below 2^40 it keeps every index product of the kernels inside int64. */
#define CONV_ATTR_MAX ((int64_t)1 << 20)

static int plain_float(rlx_dtype t) { return ir_is_float(t) && !ir_is_block(t); }

/* ---------------------------------------------------------------- builders */

/* Copies count entries of a desc array into an attr list. */
static void set_list(ir_ilist *l, const int64_t *v, int count) {
  l->n = count;
  for (int i = 0; i < count; i++) l->v[i] = v[i];
}

/* An ndim other than 1 or 2 copies no list entries; inference rejects it. */
static int desc_lists(int ndim) { return ndim == 1 || ndim == 2 ? ndim : 0; }

/* d NULL keeps the defaults: 2-D, stride 1, dilation 1, no pad, groups 1. */
static void conv_desc_attrs(ir_attrs *a, const rlx_conv_desc *d, int with_output_pad) {
  if (!d) return;
  int k = desc_lists(d->ndim);
  a->ndim = d->ndim;
  set_list(&a->stride, d->stride, k);
  set_list(&a->dilation, d->dilation, k);
  if (with_output_pad) set_list(&a->output_pad, d->output_pad, k);
  set_list(&a->pad, d->pad, 2 * k);
  a->groups = d->groups;
}

rlx_node rlx_conv(rlx_graph *g, rlx_node x, rlx_node w, rlx_node bias, const rlx_conv_desc *d) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  conv_desc_attrs(&a, d, 0);
  rlx_node in[] = {x, w, bias};
  return ir_add_node(g, RLX_OP_Conv, bias < 0 ? 2 : 3, in, &a);
}

rlx_node rlx_conv_transpose(rlx_graph *g, rlx_node x, rlx_node w, rlx_node bias,
                            const rlx_conv_desc *d) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  conv_desc_attrs(&a, d, 1);
  rlx_node in[] = {x, w, bias};
  return ir_add_node(g, RLX_OP_ConvTranspose, bias < 0 ? 2 : 3, in, &a);
}

rlx_node rlx_fused_conv(rlx_graph *g, rlx_node x, rlx_node w, rlx_node bias, rlx_node residual,
                        const rlx_conv_desc *d, rlx_act act, double alpha, double lo, double hi) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  conv_desc_attrs(&a, d, 0);
  a.act = act;
  a.alpha = alpha;
  a.lo = lo;
  a.hi = hi;
  rlx_node in[] = {x, w, bias, residual};
  return ir_add_node(g, RLX_OP_FusedConv, residual < 0 ? 3 : 4, in, &a);
}

/* d NULL keeps the defaults, which have no kernel: inference rejects it. */
rlx_node rlx_pool(rlx_graph *g, rlx_node x, const rlx_pool_desc *d) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (d) {
    int k = desc_lists(d->ndim);
    a.pool = d->kind;
    a.ndim = d->ndim;
    set_list(&a.kernel, d->kernel, k);
    set_list(&a.stride, d->stride, k);
    set_list(&a.pad, d->pad, 2 * k);
    a.count_include_pad = d->count_include_pad != 0;
  }
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Pool, 1, in, &a);
}

rlx_node rlx_resize_nearest2x(rlx_graph *g, rlx_node x) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_ResizeNearest2x, 1, in, &a);
}

rlx_node rlx_resize(rlx_graph *g, rlx_node x, rlx_resize_mode mode, int64_t out_h,
                    int64_t out_w, int align_corners) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.resize_mode = mode;
  a.out_h = out_h;
  a.out_w = out_w;
  a.align_corners = align_corners != 0;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Resize, 1, in, &a);
}

rlx_node rlx_fft(rlx_graph *g, rlx_node x, int inverse, int real, int64_t n, int axis) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  a.inverse = inverse != 0;
  a.real = real != 0;
  a.n = n;
  a.axis = axis;
  rlx_node in[] = {x};
  return ir_add_node(g, RLX_OP_Fft, 1, in, &a);
}

/* d NULL keeps the defaults: Whisper's front end (400 / 160 / 80 / 16 kHz). */
rlx_node rlx_log_mel(rlx_graph *g, rlx_node audio, const rlx_logmel_desc *d) {
  ir_attrs a;
  ir_attrs_init_defaults(&a);
  if (d) {
    a.n_fft = d->n_fft;
    a.hop = d->hop;
    a.n_mels = d->n_mels;
    a.sample_rate = d->sample_rate;
    a.f_min = d->f_min;
    a.f_max = d->f_max;
  }
  rlx_node in[] = {audio};
  return ir_add_node(g, RLX_OP_LogMel, 1, in, &a);
}

/* ---------------------------------------------------------------- shared checks */

/* Fills an empty list with `want` copies of def, else checks its length and
 * that every value lies in [min, CONV_ATTR_MAX]. */
static int norm_list(rlx_graph *g, ir_node *n, ir_ilist *l, const char *key, int want,
                     int64_t def, int64_t min) {
  if (l->n == 0) {
    l->n = want;
    for (int i = 0; i < want; i++) l->v[i] = def;
    return 0;
  }
  if (l->n != want)
    return ir_fail(g, n, RLX_ERR_INVALID, "%s has %d entries, expected %d", key, l->n, want);
  for (int i = 0; i < want; i++) {
    if (l->v[i] < min || l->v[i] > CONV_ATTR_MAX)
      return ir_fail(g, n, RLX_ERR_INVALID, "%s[%d] = %lld out of range [%lld, %lld]", key, i,
                     (long long)l->v[i], (long long)min, (long long)CONV_ATTR_MAX);
  }
  return 0;
}

/* ndim, x's dtype and rank [N, C, spatial...], and the stride / pad lists
 * every spatial op has. */
static int check_spatial(rlx_graph *g, ir_node *n, const ir_type *x) {
  char s[IR_SHAPE_STR_CAP];
  if (n->a.ndim != 1 && n->a.ndim != 2)
    return ir_fail(g, n, RLX_ERR_INVALID, "ndim %lld must be 1 or 2", (long long)n->a.ndim);
  int nd = (int)n->a.ndim;
  if (!plain_float(x->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x dtype %s is not a float type",
                   ir_dtypes[x->dtype].name);
  if (x->shape.rank != nd + 2)
    return ir_fail(g, n, RLX_ERR_SHAPE, "x %s must have rank %d for ndim %d ([N, C, %s])",
                   ir_shape_str(g, &x->shape, s, sizeof s), nd + 2, nd, nd == 1 ? "L" : "H, W");
  if (norm_list(g, n, &n->a.stride, "stride", nd, 1, 1) < 0) return -1;
  if (norm_list(g, n, &n->a.pad, "pad", 2 * nd, 0, 0) < 0) return -1;
  return 0;
}

/* A weight / bias input: same dtype as x, given rank. */
static int check_operand(rlx_graph *g, ir_node *n, int i, const char *what, int rank) {
  const ir_type *x = ir_in(g, n, 0), *t = ir_in(g, n, i);
  char s[IR_SHAPE_STR_CAP];
  if (t->dtype != x->dtype)
    return ir_fail(g, n, RLX_ERR_DTYPE, "%s dtype %s differs from x dtype %s", what,
                   ir_dtypes[t->dtype].name, ir_dtypes[x->dtype].name);
  if (t->shape.rank != rank)
    return ir_fail(g, n, RLX_ERR_SHAPE, "%s %s must have rank %d", what,
                   ir_shape_str(g, &t->shape, s, sizeof s), rank);
  for (int d = 0; d < rank; d++) {
    if (ir_dim_is_sym(t->shape.d[d]))
      return ir_fail(g, n, RLX_ERR_SHAPE, "%s %s must have static dims", what,
                     ir_shape_str(g, &t->shape, s, sizeof s));
  }
  return 0;
}

/* Output length of a sliding window over len (+ pads) with stride: the
 * windows that fit, floor mode. extent = dilation*(kernel-1)+1. */
static int64_t window_out_dim(rlx_graph *g, ir_node *n, int i, int64_t len, int64_t pads,
                              int64_t extent, int64_t stride) {
  if (ir_dim_is_sym(len))
    return stride == 1 ? ir_dim_add(g, len, pads - extent + 1) : ir_dim_anon(g);
  if (len + pads < extent)
    return ir_fail(g, n, RLX_ERR_SHAPE,
                   "kernel extent %lld larger than padded input %lld on spatial dim %d",
                   (long long)extent, (long long)(len + pads), i);
  return (len + pads - extent) / stride + 1;
}

/* ---------------------------------------------------------------- Conv / ConvTranspose */

/* w's channel and kernel dims and the bias of Conv (transposed = 0: w [O,
 * C/groups, k...]) and ConvTranspose (transposed = 1: w [C, O/groups,
 * k...]); *out_ch = O. */
static int check_weights(rlx_graph *g, ir_node *n, int transposed, int64_t *out_ch) {
  const ir_type *x = ir_in(g, n, 0), *w = ir_in(g, n, 1);
  char sx[IR_SHAPE_STR_CAP], sw[IR_SHAPE_STR_CAP];
  int nd = (int)n->a.ndim;
  int64_t groups = n->a.groups, c = x->shape.d[1];
  if (check_operand(g, n, 1, "w", nd + 2) < 0) return -1;
  if (groups < 1 || groups > CONV_ATTR_MAX)
    return ir_fail(g, n, RLX_ERR_INVALID, "groups %lld must be in [1, %lld]",
                   (long long)groups, (long long)CONV_ATTR_MAX);
  if (ir_dim_is_sym(c))
    return ir_fail(g, n, RLX_ERR_SHAPE, "x %s must have a static channel dim",
                   ir_shape_str(g, &x->shape, sx, sizeof sx));
  if (c % groups != 0)
    return ir_fail(g, n, RLX_ERR_INVALID, "groups %lld does not divide the %lld input channels",
                   (long long)groups, (long long)c);
  ir_shape_str(g, &x->shape, sx, sizeof sx);
  ir_shape_str(g, &w->shape, sw, sizeof sw);
  if (!transposed) {
    *out_ch = w->shape.d[0];
    if (*out_ch % groups != 0)
      return ir_fail(g, n, RLX_ERR_INVALID,
                     "groups %lld does not divide the %lld output channels of w %s",
                     (long long)groups, (long long)*out_ch, sw);
    if (w->shape.d[1] * groups != c)
      return ir_fail(g, n, RLX_ERR_SHAPE,
                     "w %s expects %lld input channels per group, x %s has %lld / groups %lld",
                     sw, (long long)w->shape.d[1], sx, (long long)c, (long long)groups);
  } else {
    if (w->shape.d[0] != c)
      return ir_fail(g, n, RLX_ERR_SHAPE, "w %s must start with the %lld channels of x %s", sw,
                     (long long)c, sx);
    *out_ch = w->shape.d[1] * groups;
  }
  for (int i = 0; i < nd; i++) {
    int64_t k = w->shape.d[2 + i];
    if (k < 1 || k > CONV_ATTR_MAX)
      return ir_fail(g, n, RLX_ERR_SHAPE, "w %s: kernel size %lld out of range [1, %lld]", sw,
                     (long long)k, (long long)CONV_ATTR_MAX);
  }
  if (n->n_in >= 3) { /* FusedConv's residual (input 3) is checked by its own inference */
    const ir_type *b = ir_in(g, n, 2);
    if (check_operand(g, n, 2, "bias", 1) < 0) return -1;
    if (b->shape.d[0] != *out_ch)
      return ir_fail(g, n, RLX_ERR_SHAPE, "bias %s must have the %lld output channels",
                     ir_shape_str(g, &b->shape, sx, sizeof sx), (long long)*out_ch);
  }
  return 0;
}

/* Conv: cross-correlation as torch conv1d/conv2d, with asymmetric pads. */
int ir_infer_Conv(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0), *w = ir_in(g, n, 1);
  int64_t out_ch;
  if (check_spatial(g, n, x) < 0) return -1;
  int nd = (int)n->a.ndim;
  if (norm_list(g, n, &n->a.dilation, "dilation", nd, 1, 1) < 0) return -1;
  if (check_weights(g, n, 0, &out_ch) < 0) return -1;
  ir_type *y = &n->out[0];
  y->dtype = x->dtype;
  y->shape = x->shape;
  y->shape.d[1] = out_ch;
  for (int i = 0; i < nd; i++) {
    int64_t k = w->shape.d[2 + i];
    int64_t extent = n->a.dilation.v[i] * (k - 1) + 1;
    int64_t pads = n->a.pad.v[i] + n->a.pad.v[nd + i];
    int64_t d = window_out_dim(g, n, i, x->shape.d[2 + i], pads, extent, n->a.stride.v[i]);
    if (d < 0 && !ir_dim_is_sym(d)) return -1;
    y->shape.d[2 + i] = d;
  }
  return 0;
}

/* FusedConv: Conv's shapes, bias required; the residual (optional) has
 * the output's type; act valid (leaky_relu's alpha finite), lo <= hi. */
int ir_infer_FusedConv(rlx_graph *g, ir_node *n) {
  if (n->a.act < 0 || n->a.act >= RLX_ACT_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "act %lld unknown", (long long)n->a.act);
  if (n->a.act == RLX_ACT_LEAKY_RELU && !isfinite(n->a.alpha))
    return ir_fail(g, n, RLX_ERR_INVALID, "leaky_relu alpha must be finite, got %g", n->a.alpha);
  if (isnan(n->a.lo) || isnan(n->a.hi) || n->a.lo > n->a.hi)
    return ir_fail(g, n, RLX_ERR_INVALID, "need lo <= hi, got lo %g, hi %g", n->a.lo, n->a.hi);
  if (ir_infer_Conv(g, n) < 0) return -1;
  if (n->n_in == 4) {
    const ir_type *r = ir_in(g, n, 3), *y = &n->out[0];
    char sr[IR_SHAPE_STR_CAP], sy[IR_SHAPE_STR_CAP];
    if (r->dtype != y->dtype)
      return ir_fail(g, n, RLX_ERR_DTYPE, "residual dtype %s differs from the output's %s",
                     ir_dtypes[r->dtype].name, ir_dtypes[y->dtype].name);
    int same = r->shape.rank == y->shape.rank;
    for (int i = 0; same && i < r->shape.rank; i++) same = r->shape.d[i] == y->shape.d[i];
    if (!same)
      return ir_fail(g, n, RLX_ERR_SHAPE, "residual %s must have the output's shape %s",
                     ir_shape_str(g, &r->shape, sr, sizeof sr), ir_shape_str(g, &y->shape, sy, sizeof sy));
  }
  return 0;
}

/* ConvTranspose: as torch conv_transpose1d/2d; pad [begins..., ends...]
 * crops the full output, output_pad extends its end. Like torch, an
 * output_pad is valid when it is smaller than the stride or the dilation. */
int ir_infer_ConvTranspose(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0), *w = ir_in(g, n, 1);
  int64_t out_ch;
  if (check_spatial(g, n, x) < 0) return -1;
  int nd = (int)n->a.ndim;
  if (norm_list(g, n, &n->a.dilation, "dilation", nd, 1, 1) < 0) return -1;
  if (norm_list(g, n, &n->a.output_pad, "output_pad", nd, 0, 0) < 0) return -1;
  if (check_weights(g, n, 1, &out_ch) < 0) return -1;
  ir_type *y = &n->out[0];
  y->dtype = x->dtype;
  y->shape = x->shape;
  y->shape.d[1] = out_ch;
  for (int i = 0; i < nd; i++) {
    int64_t k = w->shape.d[2 + i], s = n->a.stride.v[i], dil = n->a.dilation.v[i];
    int64_t op = n->a.output_pad.v[i], len = x->shape.d[2 + i];
    if (op >= s && op >= dil)
      return ir_fail(g, n, RLX_ERR_INVALID,
                     "output_pad[%d] = %lld must be smaller than stride %lld or dilation %lld", i,
                     (long long)op, (long long)s, (long long)dil);
    /* (len - 1) * s - pads + dil * (k - 1) + op + 1 */
    int64_t tail = dil * (k - 1) + op + 1 - s - n->a.pad.v[i] - n->a.pad.v[nd + i];
    if (ir_dim_is_sym(len)) {
      y->shape.d[2 + i] = ir_dim_add(g, ir_dim_mul(g, len, s), tail);
      continue;
    }
    int64_t d = len * s + tail;
    if (d < 1)
      return ir_fail(g, n, RLX_ERR_SHAPE, "output length %lld < 1 on spatial dim %d (x %lld)",
                     (long long)d, i, (long long)len);
    y->shape.d[2 + i] = d;
  }
  return 0;
}

/* ---------------------------------------------------------------- Pool */

/* Pool (torch max_pool / avg_pool, ceil_mode false): max pads with -inf
 * (a NaN in the window wins, as in torch), avg divides by the whole window
 * (count_include_pad) or by its non-pad elements. An empty stride means 1
 * (ONNX's default, not torch's stride = kernel). Each pad must be smaller
 * than the kernel (torch asks pad <= kernel/2), so every window holds at
 * least one input element. */
int ir_infer_Pool(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  if (n->a.pool < 0 || n->a.pool >= RLX_POOL_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "pool kind %lld out of range", (long long)n->a.pool);
  if (check_spatial(g, n, x) < 0) return -1;
  int nd = (int)n->a.ndim;
  if (n->a.kernel.n == 0)
    return ir_fail(g, n, RLX_ERR_INVALID, "kernel needs %d entries (one per spatial dim)", nd);
  if (norm_list(g, n, &n->a.kernel, "kernel", nd, 1, 1) < 0) return -1;
  ir_type *y = &n->out[0];
  y->dtype = x->dtype;
  y->shape = x->shape;
  for (int i = 0; i < nd; i++) {
    int64_t k = n->a.kernel.v[i], pb = n->a.pad.v[i], pe = n->a.pad.v[nd + i];
    if (pb >= k || pe >= k)
      return ir_fail(g, n, RLX_ERR_INVALID, "pads %lld, %lld of spatial dim %d must be smaller "
                     "than the kernel %lld", (long long)pb, (long long)pe, i, (long long)k);
    int64_t d = window_out_dim(g, n, i, x->shape.d[2 + i], pb + pe, k, n->a.stride.v[i]);
    if (d < 0 && !ir_dim_is_sym(d)) return -1;
    y->shape.d[2 + i] = d;
  }
  return 0;
}

/* ---------------------------------------------------------------- resizing */

/* ResizeNearest2x: every plain dtype (it only copies elements). */
int ir_infer_ResizeNearest2x(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  char s[IR_SHAPE_STR_CAP];
  if (ir_is_block(x->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x dtype %s is a block type", ir_dtypes[x->dtype].name);
  if (x->shape.rank != 4)
    return ir_fail(g, n, RLX_ERR_SHAPE, "x %s must be [N, C, H, W]",
                   ir_shape_str(g, &x->shape, s, sizeof s));
  n->out[0] = *x;
  n->out[0].shape.d[2] = ir_dim_mul(g, x->shape.d[2], 2);
  n->out[0].shape.d[3] = ir_dim_mul(g, x->shape.d[3], 2);
  return 0;
}

/* Resize: torch.nn.functional.interpolate. nearest: src = floor(dst * in /
 * out), computed exactly in integers (align_corners is ignored). bilinear:
 * src = dst * (in-1)/(out-1) with align_corners (0 when out is 1), else the
 * half-pixel (dst + 0.5) * in/out - 0.5 clamped at 0; the upper neighbour
 * clamps at the edge. */
int ir_infer_Resize(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  char s[IR_SHAPE_STR_CAP];
  if (n->a.resize_mode < 0 || n->a.resize_mode >= RLX_RESIZE_COUNT)
    return ir_fail(g, n, RLX_ERR_INVALID, "resize mode %lld out of range",
                   (long long)n->a.resize_mode);
  if (!plain_float(x->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x dtype %s is not a float type",
                   ir_dtypes[x->dtype].name);
  if (x->shape.rank != 4)
    return ir_fail(g, n, RLX_ERR_SHAPE, "x %s must be [N, C, H, W]",
                   ir_shape_str(g, &x->shape, s, sizeof s));
  /* The bound keeps the kernel's dst * in products inside int64. */
  for (int i = 2; i < 4; i++) {
    int64_t d = x->shape.d[i];
    if (!ir_dim_is_sym(d) && (d < 1 || d > ((int64_t)1 << 31)))
      return ir_fail(g, n, RLX_ERR_SHAPE, "x %s: spatial dims must be in [1, 2^31]",
                     ir_shape_str(g, &x->shape, s, sizeof s));
  }
  if (n->a.out_h < 1 || n->a.out_w < 1 || n->a.out_h > ((int64_t)1 << 31) ||
      n->a.out_w > ((int64_t)1 << 31))
    return ir_fail(g, n, RLX_ERR_INVALID, "out_h %lld, out_w %lld must be in [1, 2^31]",
                   (long long)n->a.out_h, (long long)n->a.out_w);
  n->out[0] = *x;
  n->out[0].shape.d[2] = n->a.out_h;
  n->out[0].shape.d[3] = n->a.out_w;
  return 0;
}

/* ---------------------------------------------------------------- signal */

/* Fft: complex tensors carry a trailing dim of 2 (re, im); for complex input
 * the axis refers to the complex shape (x's shape without that 2), and a
 * negative axis counts from the end of that shape. n is the transform
 * length; 0 means the axis length (irfft: 2 * (m - 1)); a shorter n crops,
 * a longer one zero-pads (numpy.fft). The inverse scales by 1/n. rfft:
 * real [..., L] -> [..., n/2+1, 2]; irfft: [..., m, 2] -> real [..., n],
 * using the first n/2+1 bins and ignoring the imaginary parts of the DC
 * (and, for even n, the Nyquist) bin, as numpy.fft.irfft. */
int ir_infer_Fft(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  char s[IR_SHAPE_STR_CAP];
  int real = n->a.real != 0, inverse = n->a.inverse != 0;
  int complex_in = !real || inverse, complex_out = !real || !inverse;
  if (!plain_float(x->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "x dtype %s is not a float type",
                   ir_dtypes[x->dtype].name);
  if (n->a.n < 0 || n->a.n > ((int64_t)1 << 40))
    return ir_fail(g, n, RLX_ERR_INVALID, "n %lld out of range [0, 2^40]", (long long)n->a.n);
  ir_shape_str(g, &x->shape, s, sizeof s);
  if (complex_in && (x->shape.rank < 2 || x->shape.d[x->shape.rank - 1] != 2))
    return ir_fail(g, n, RLX_ERR_SHAPE, "complex x %s must end in a dim of 2 (re, im)", s);
  if (!complex_in && (x->shape.rank < 1 || x->shape.rank >= RLX_MAX_RANK))
    return ir_fail(g, n, RLX_ERR_SHAPE, "real x %s must have rank 1..%d", s, RLX_MAX_RANK - 1);
  int rank = complex_in ? x->shape.rank - 1 : x->shape.rank;
  int axis = ir_norm_axis(n->a.axis, rank);
  if (axis < 0)
    return ir_fail(g, n, RLX_ERR_SHAPE, "axis %lld out of range for %s shape of rank %d of x %s",
                   (long long)n->a.axis, complex_in ? "complex" : "real", rank, s);
  n->a.axis = axis;
  int64_t len = x->shape.d[axis], tn = n->a.n, out_len;
  if (tn == 0 && ir_dim_is_sym(len)) {
    out_len = real ? ir_dim_anon(g) : len;
  } else {
    if (tn == 0) tn = real && inverse ? 2 * (len - 1) : len;
    if (tn < 1)
      return ir_fail(g, n, RLX_ERR_SHAPE, "transform length %lld < 1 (n = %lld, axis %d of x %s)",
                     (long long)tn, (long long)n->a.n, axis, s);
    out_len = real && !inverse ? tn / 2 + 1 : tn;
  }
  ir_type *y = &n->out[0];
  y->dtype = x->dtype;
  y->shape.rank = rank + complex_out;
  for (int i = 0; i < rank; i++) y->shape.d[i] = x->shape.d[i];
  y->shape.d[axis] = out_len;
  if (complex_out) y->shape.d[rank] = 2;
  return 0;
}

/* LogMel: periodic Hann window of n_fft; STFT as torch.stft(center=True,
 * pad_mode="reflect"), so frames = 1 + T // hop; power |X|^2 of the
 * n_fft/2+1 bins; librosa's Slaney mel filterbank (htk=False,
 * norm="slaney"); log10(max(x, 1e-10)). n_fft must be even (its bins are
 * then k * sample_rate / n_fft for both librosa conventions) and T >
 * n_fft/2 (reflect padding). Whisper then drops the last frame and applies
 * max(x, max(x) - 8), (x + 4) / 4: ordinary ops after this one. */
int ir_infer_LogMel(rlx_graph *g, ir_node *n) {
  const ir_type *x = ir_in(g, n, 0);
  char s[IR_SHAPE_STR_CAP];
  const ir_attrs *a = &n->a;
  if (!plain_float(x->dtype))
    return ir_fail(g, n, RLX_ERR_DTYPE, "audio dtype %s is not a float type",
                   ir_dtypes[x->dtype].name);
  if (x->shape.rank != 2)
    return ir_fail(g, n, RLX_ERR_SHAPE, "audio %s must be [B, T]",
                   ir_shape_str(g, &x->shape, s, sizeof s));
  if (a->n_fft < 2 || a->n_fft % 2 != 0 || a->n_fft > ((int64_t)1 << 24))
    return ir_fail(g, n, RLX_ERR_INVALID, "n_fft %lld must be even and in [2, 2^24]",
                   (long long)a->n_fft);
  if (a->hop < 1 || a->hop > ((int64_t)1 << 24) || a->n_mels < 1 || a->n_mels > 100000 ||
      a->sample_rate < 1)
    return ir_fail(g, n, RLX_ERR_INVALID, "hop %lld, n_mels %lld, sample_rate %lld must be >= 1",
                   (long long)a->hop, (long long)a->n_mels, (long long)a->sample_rate);
  if (!(a->f_min >= 0) || !(a->f_max > a->f_min) || !isfinite(a->f_max))
    return ir_fail(g, n, RLX_ERR_INVALID, "need 0 <= f_min < f_max (finite), got %g, %g",
                   a->f_min, a->f_max);
  int64_t t = x->shape.d[1];
  if (!ir_dim_is_sym(t) && t <= a->n_fft / 2)
    return ir_fail(g, n, RLX_ERR_SHAPE, "audio %s: reflect padding of n_fft/2 = %lld needs "
                   "more than %lld samples", ir_shape_str(g, &x->shape, s, sizeof s),
                   (long long)(a->n_fft / 2), (long long)(a->n_fft / 2));
  ir_type *y = &n->out[0];
  y->dtype = x->dtype;
  y->shape.rank = 3;
  y->shape.d[0] = x->shape.d[0];
  y->shape.d[1] = a->n_mels;
  y->shape.d[2] = ir_dim_is_sym(t) ? ir_dim_anon(g) : 1 + t / a->hop;
  return 0;
}
