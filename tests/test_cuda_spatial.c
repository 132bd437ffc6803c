/* test_cuda_spatial.c — the CUDA backend's spatial ops against the CPU
 * backend (which the op-parity cases check against NumPy and the ONNX
 * tests against onnxruntime): Conv, FusedConv and ConvTranspose through
 * cuDNN over strides, pads, dilation, groups (depthwise too), 1x1, a 7x7
 * stem and 1-D; max, average (pads counted or not) and global pooling,
 * ceil mode as its extra end pad; nearest and bilinear Resize; GroupNorm.
 * Each graph runs on the device with no node declined (RLX_TRACE), and its
 * replay matches its op-by-op launches.
 *
 * Bounds: F32 convolutions in F32 FMA (RLX_CUDA_TF32 unset) sum in
 * another order than the CPU: the F32 tolerance, with weights scaled by
 * 1 / sqrt(fan-in) so outputs are O(1). Under RLX_CUDA_TF32=1 each
 * product's operands are rounded to TF32's 10-bit mantissa (relative error
 * at most 2^-11 each), so an output's error is at most 2^-10 (1 + 2^-11)
 * sum |x| |w| over its terms, plus the F32 sum's: the test computes that
 * sum per output as the CPU's convolution of |x| and |w|. Skips (exit 77)
 * without a CUDA device. */
#include "cuda_backend_test.h"

#include <string.h>

static void *abs_copy(const float *p, int64_t n) {
  float *q = malloc((size_t)n * sizeof *q);
  for (int64_t i = 0; i < n; i++) q[i] = fabsf(p[i]);
  return q;
}

static void no_decline(const char *what, const rlx_graph *g) {
  const char *trace = cuda_compile_trace(g);
  const char *d = strstr(trace, "declines");
  CHECK(!d, "%s: every node on the device (%.200s)", what, d ? d : "");
}

typedef struct {
  const char *name;
  int64_t N, C, H, W, K, R, S, stride, pad, dil, groups;
  int bias, transposed, out_pad, ndim;
} conv_case;

static const conv_case conv_cases[] = {
    {"1x1", 2, 64, 14, 14, 96, 1, 1, 1, 0, 1, 1, 1, 0, 0, 2},
    {"3x3 pad 1", 2, 32, 17, 15, 48, 3, 3, 1, 1, 1, 1, 1, 0, 0, 2},
    {"3x3 stride 2", 1, 24, 28, 28, 40, 3, 3, 2, 1, 1, 1, 1, 0, 0, 2},
    {"7x7 stem", 2, 3, 64, 64, 64, 7, 7, 2, 3, 1, 1, 1, 0, 0, 2},
    {"dilation 2", 1, 16, 20, 21, 16, 3, 3, 1, 2, 2, 1, 1, 0, 0, 2},
    {"groups 4", 2, 32, 12, 12, 64, 3, 3, 1, 1, 1, 4, 1, 0, 0, 2},
    {"depthwise", 2, 96, 14, 14, 96, 3, 3, 2, 1, 1, 96, 1, 0, 0, 2},
    {"no bias", 1, 8, 9, 10, 12, 5, 3, 1, 0, 1, 1, 0, 0, 0, 2},
    {"1-D", 3, 16, 1, 50, 24, 1, 5, 2, 2, 1, 1, 1, 0, 0, 1},
    {"transposed stride 2", 2, 32, 7, 7, 16, 4, 4, 2, 1, 1, 1, 1, 1, 0, 2},
    {"transposed groups 2", 1, 16, 9, 8, 12, 3, 3, 2, 1, 1, 2, 1, 1, 1, 2},
};

static rlx_node conv_node(rlx_graph *g, const conv_case *c, rlx_node x, rlx_node w, rlx_node b) {
  rlx_conv_desc d = {0};
  d.ndim = c->ndim, d.groups = c->groups;
  for (int i = 0; i < c->ndim; i++) {
    d.stride[i] = c->stride, d.dilation[i] = c->dil, d.output_pad[i] = c->out_pad;
    d.pad[i] = d.pad[c->ndim + i] = c->pad;
  }
  return c->transposed ? rlx_conv_transpose(g, x, w, b, &d) : rlx_conv(g, x, w, b, &d);
}

static void test_conv(void) {
  for (size_t ci = 0; ci < sizeof conv_cases / sizeof *conv_cases; ci++) {
    const conv_case *c = &conv_cases[ci];
    rlx_graph *g = rlx_graph_new("conv");
    int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4], bd[1] = {c->K};
    if (c->ndim == 1) xd[2] = c->W;
    if (c->transposed) wd[0] = c->C, wd[1] = c->K / c->groups;
    else wd[0] = c->K, wd[1] = c->C / c->groups;
    wd[2] = c->R, wd[3] = c->S;
    if (c->ndim == 1) wd[2] = c->S;
    const int rank = c->ndim + 2;
    rlx_node x = rlx_input(g, "x", RLX_F32, rank, xd), w = rlx_param(g, "w", RLX_F32, rank, wd);
    rlx_node b = c->bias ? rlx_param(g, "b", RLX_F32, 1, bd) : -1;
    rlx_node y = conv_node(g, c, x, w, b);
    rlx_graph_set_outputs(g, 1, &y);
    const int64_t nx = c->N * c->C * c->H * c->W, nw = wd[0] * wd[1] * c->R * c->S;
    const int64_t fan = (c->transposed ? c->K / c->groups : c->C / c->groups) * c->R * c->S;
    bound_leaf l[3] = {{"x", 0, random_tensor(RLX_F32, nx, 1.0), (size_t)nx * 4},
                       {"w", 1, random_tensor(RLX_F32, nw, 1.0 / sqrt((double)fan)), (size_t)nw * 4},
                       {"b", 1, random_tensor(RLX_F32, c->K, 0.1), (size_t)c->K * 4}};
    const int nl = c->bias ? 3 : 2;
    char what[96];
    snprintf(what, sizeof what, "%s %s", c->transposed ? "ConvTranspose" : "Conv", c->name);
    no_decline(what, g);
    compare_replay(what, g, l, nl, 0, RLX_F32, 0.0);
    /* TF32: the bound from sum |x| |w| (the CPU's convolution of |x|, |w|, no bias) */
    setenv("RLX_CUDA_TF32", "1", 1);
    size_t cb = 0, gb = 0, ab = 0;
    void *cpu = run_graph(g, RLX_DEVICE_CPU, l, nl, 0, &cb), *gpu = run_graph(g, RLX_DEVICE_CUDA, l, nl, 0, &gb);
    unsetenv("RLX_CUDA_TF32");
    bound_leaf la[3] = {{"x", 0, abs_copy(l[0].data, nx), l[0].nbytes}, {"w", 1, abs_copy(l[1].data, nw), l[1].nbytes},
                        {"b", 1, calloc((size_t)c->K, 4), l[2].nbytes}};
    float *mag = run_graph(g, RLX_DEVICE_CPU, la, nl, 0, &ab);
    double worst = cpu && gpu && mag && cb == gb && ab == cb ? 0 : INFINITY;
    for (int64_t i = 0; worst < INFINITY && i < (int64_t)(cb / 4); i++) {
      const double want = ((float *)cpu)[i], got = ((float *)gpu)[i];
      const double bound = ldexp(1.0, -10) * (1 + ldexp(1.0, -11)) * mag[i] + 1e-4 + 1e-3 * fabs(want);
      const double r = fabs(got - want) / bound;
      worst = r > worst ? r : worst;
    }
    CHECK(worst <= 1.0, "%s under TF32: worst error %.3g of the bound", what, worst);
    free(cpu), free(gpu), free(mag);
    for (int i = 0; i < 3; i++) free(l[i].data), free(la[i].data);
    rlx_graph_free(g);
  }
}

/* FusedConv: relu(conv + bias + residual) (ResNet's block end), ReLU6 as
 * a clamp (MobileNet), and the same written as separate ops, which the
 * fusion pass turns into a FusedConv. At 7x7 a channel's 49 outputs end
 * inside a vector of the epilogue, which then reads two channels' biases. */
static void test_fused_conv(void) {
  for (int form = 0; form < 6; form++) {
    const int64_t N = 2, C = 32, H = form < 3 ? 14 : 7, W = H, K = 32;
    rlx_graph *g = rlx_graph_new("fused_conv");
    int64_t xd[4] = {N, C, H, W}, wd[4] = {K, C, 3, 3}, bd[1] = {K};
    rlx_node x = rlx_input(g, "x", RLX_F32, 4, xd), r = rlx_input(g, "r", RLX_F32, 4, xd);
    rlx_node w = rlx_param(g, "w", RLX_F32, 4, wd), b = rlx_param(g, "b", RLX_F32, 1, bd);
    rlx_conv_desc d = {.ndim = 2, .stride = {1, 1}, .dilation = {1, 1}, .pad = {1, 1, 1, 1}, .groups = 1};
    rlx_node y;
    if (form % 3 == 0) y = rlx_fused_conv(g, x, w, b, r, &d, RLX_ACT_RELU, 0, -INFINITY, INFINITY);
    else if (form % 3 == 1) y = rlx_fused_conv(g, x, w, b, -1, &d, RLX_ACT_NONE, 0, 0, 6);
    else y = rlx_activation(g, RLX_ACT_RELU, rlx_binary(g, RLX_BIN_ADD, rlx_conv(g, x, w, b, &d), r));
    rlx_graph_set_outputs(g, 1, &y);
    const int64_t nx = N * C * H * W, nw = K * C * 9;
    bound_leaf l[4] = {{"x", 0, random_tensor(RLX_F32, nx, 1.0), (size_t)nx * 4},
                       {"r", 0, random_tensor(RLX_F32, nx, 1.0), (size_t)nx * 4},
                       {"w", 1, random_tensor(RLX_F32, nw, 1.0 / sqrt(9.0 * C)), (size_t)nw * 4},
                       {"b", 1, random_tensor(RLX_F32, K, 0.1), (size_t)K * 4}};
    static const char *const names[] = {"FusedConv relu + residual", "FusedConv relu6", "Conv + add + relu",
                                        "FusedConv relu + residual 7x7", "FusedConv relu6 7x7",
                                        "Conv + add + relu 7x7"};
    no_decline(names[form], g);
    compare_replay(names[form], g, l, 4, 0, RLX_F32, 0.0);
    for (int i = 0; i < 4; i++) free(l[i].data);
    rlx_graph_free(g);
  }
}

typedef struct {
  const char *name;
  rlx_pool_kind kind;
  int ndim;
  int64_t H, W, k, s, pad_begin, pad_end;
  int count_include_pad;
} pool_case;

static const pool_case pool_cases[] = {
    {"max 3x3 s2 p1", RLX_POOL_MAX, 2, 112, 112, 3, 2, 1, 1, 0},
    {"max 2x2 s2", RLX_POOL_MAX, 2, 28, 28, 2, 2, 0, 0, 0},
    {"avg 3x3 s1 p1", RLX_POOL_AVG, 2, 17, 19, 3, 1, 1, 1, 0},
    {"avg 3x3 s1 p1 pads counted", RLX_POOL_AVG, 2, 17, 19, 3, 1, 1, 1, 1},
    {"avg global", RLX_POOL_AVG, 2, 7, 7, 7, 7, 0, 0, 0},
    {"max ceil mode", RLX_POOL_MAX, 2, 16, 16, 3, 2, 0, 1, 0},
    {"avg ceil mode", RLX_POOL_AVG, 2, 15, 15, 2, 2, 0, 1, 0},
    {"max 1-D", RLX_POOL_MAX, 1, 1, 40, 4, 3, 1, 1, 0},
};

static void test_pool(void) {
  static const rlx_dtype types[] = {RLX_F32, RLX_F16};
  for (size_t pi = 0; pi < sizeof pool_cases / sizeof *pool_cases; pi++)
    for (int ti = 0; ti < 2; ti++) {
      const pool_case *c = &pool_cases[pi];
      const rlx_dtype t = types[ti];
      const int64_t N = 2, C = 24;
      rlx_graph *g = rlx_graph_new("pool");
      int64_t xd[4] = {N, C, c->ndim == 1 ? c->W : c->H, c->W};
      rlx_node x = rlx_input(g, "x", t, c->ndim + 2, xd);
      rlx_pool_desc d = {.kind = c->kind, .ndim = c->ndim, .count_include_pad = c->count_include_pad};
      for (int i = 0; i < c->ndim; i++) {
        d.kernel[i] = c->k, d.stride[i] = c->s;
        d.pad[i] = c->pad_begin, d.pad[c->ndim + i] = c->pad_end;
      }
      rlx_node y = rlx_pool(g, x, &d);
      rlx_graph_set_outputs(g, 1, &y);
      const int64_t nx = N * C * xd[2] * (c->ndim == 1 ? 1 : c->W);
      bound_leaf l[1] = {{"x", 0, random_tensor(t, nx, 2.0), (size_t)nx * dtype_size(t)}};
      char what[96];
      snprintf(what, sizeof what, "Pool %s %s", c->name, rlx_dtype_name(t));
      no_decline(what, g);
      compare_replay(what, g, l, 1, 0, t, 0.0);
      free(l[0].data);
      rlx_graph_free(g);
    }
}

static void test_resize(void) {
  static const struct { rlx_resize_mode mode; int64_t oh, ow; int ac; } cases[] = {
      {RLX_RESIZE_NEAREST, 32, 48, 0}, {RLX_RESIZE_NEAREST, 7, 5, 0}, {RLX_RESIZE_BILINEAR, 32, 40, 0},
      {RLX_RESIZE_BILINEAR, 31, 45, 1}, {RLX_RESIZE_BILINEAR, 9, 6, 0}};
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
    const int64_t N = 2, C = 8, H = 16, W = 20;
    rlx_graph *g = rlx_graph_new("resize");
    int64_t xd[4] = {N, C, H, W};
    rlx_node y = rlx_resize(g, rlx_input(g, "x", RLX_F32, 4, xd), cases[ci].mode, cases[ci].oh, cases[ci].ow, cases[ci].ac);
    rlx_graph_set_outputs(g, 1, &y);
    bound_leaf l[1] = {{"x", 0, random_tensor(RLX_F32, N * C * H * W, 1.0), (size_t)(N * C * H * W) * 4}};
    char what[96];
    snprintf(what, sizeof what, "Resize %s to %lldx%lld%s", cases[ci].mode == RLX_RESIZE_NEAREST ? "nearest" : "bilinear",
             (long long)cases[ci].oh, (long long)cases[ci].ow, cases[ci].ac ? " align_corners" : "");
    no_decline(what, g);
    compare_replay(what, g, l, 1, 0, RLX_F32, 0.0);
    free(l[0].data);
    rlx_graph_free(g);
  }
}

static void test_group_norm(void) {
  static const struct { rlx_dtype t; int64_t N, C, H, W, groups; } cases[] = {
      {RLX_F32, 2, 32, 16, 16, 8}, {RLX_F32, 1, 64, 64, 64, 32}, {RLX_BF16, 2, 16, 5, 7, 4}, {RLX_F32, 3, 6, 1, 9, 6}};
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
    const rlx_dtype t = cases[ci].t;
    const int64_t N = cases[ci].N, C = cases[ci].C, H = cases[ci].H, W = cases[ci].W, n = N * C * H * W;
    rlx_graph *g = rlx_graph_new("group_norm");
    int64_t xd[4] = {N, C, H, W}, cd[1] = {C};
    rlx_node y = rlx_group_norm(g, rlx_input(g, "x", t, 4, xd), rlx_param(g, "gamma", t, 1, cd),
                                rlx_param(g, "beta", t, 1, cd), cases[ci].groups, 1e-5);
    rlx_graph_set_outputs(g, 1, &y);
    bound_leaf l[3] = {{"x", 0, random_tensor(t, n, 3.0), (size_t)n * dtype_size(t)},
                       {"gamma", 1, random_tensor(t, C, 1.0), (size_t)C * dtype_size(t)},
                       {"beta", 1, random_tensor(t, C, 1.0), (size_t)C * dtype_size(t)}};
    char what[96];
    snprintf(what, sizeof what, "GroupNorm %lld groups of [%lld, %lld, %lld, %lld] %s", (long long)cases[ci].groups,
             (long long)N, (long long)C, (long long)H, (long long)W, rlx_dtype_name(t));
    no_decline(what, g);
    compare_replay(what, g, l, 3, 0, t, 0.0);
    for (int i = 0; i < 3; i++) free(l[i].data);
    rlx_graph_free(g);
  }
}

int main(void) {
  if (!cuda_backend_test_begin()) return CUDA_SKIP;
  test_conv();
  test_fused_conv();
  test_pool();
  test_resize();
  test_group_norm();
  return check_report();
}
