/* test_conv_gemm.c — the CPU's GEMM path of Conv and ConvTranspose
 * (conv_gemm.c, taken by F32) against the reference loops of k_conv.c
 * (taken by F64) on the same values, over many random configurations:
 * 1-D and 2-D, groups and depthwise, strides, dilations, asymmetric pads,
 * 1x1 kernels (the im2col-free case), with and without bias, shapes large
 * enough to cut the im2col into column blocks and K into channel chunks,
 * weight-gradient-like convs (kernels wider than the output: the
 * transposed im2col), and 1 and 3 threads (3: the item
 * split over output positions / channels and the threaded-GEMM fallback).
 * With the weight and bias as params (packed once: conv_weights.c, and
 * with AVX-512 the direct kernel of conv_direct_avx512.c where it
 * applies) and an epilogue fused into the conv (residual, ReLU or leaky
 * ReLU, clamp): ResNet's and MobileNetV2's shapes, channel counts that are
 * not multiples of 16 or 32, strides 1 and 2, padding, batch > 1.
 */
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static int64_t rnd(int64_t lo, int64_t hi) { return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1)); }
/* Values on a 1/64 grid in [-2, 2]: exact in F32 and F64 alike. */
static float rnd_value(void) { return (float)rnd(-128, 128) / 64.0f; }

/* The tail after the conv (param weights only): none; relu(conv + r),
 * r an input of the output's shape, clamped to [-1, 3]; leaky_relu(conv,
 * 0.3). */
enum { TAIL_NONE, TAIL_RES_RELU_CLAMP, TAIL_LEAKY };

typedef struct {
  int transposed, ndim, bias;
  int param, tail; /* w and b params; the tail (TAIL_*) */
  int64_t batch, c_in, c_out, groups, in[2], k[2];
  rlx_conv_desc d;
} conv_config;

/* Runs the op on x, w, b (F32 values) in dtype t; y: F64 results. Returns
 * the output numel, or -1 on an error (reported). */
static int64_t run_conv(const conv_config *c, rlx_dtype t, int threads, const float *x, const float *w,
                        const float *b, double **y) {
  const int nd = c->ndim;
  int64_t xd[4] = {c->batch, c->c_in}, wd[4];
  int64_t nx = c->batch * c->c_in, nw = 1;
  for (int i = 0; i < nd; i++) nx *= (xd[2 + i] = c->in[i]);
  if (c->transposed) {
    wd[0] = c->c_in;
    wd[1] = c->c_out / c->groups;
  } else {
    wd[0] = c->c_out;
    wd[1] = c->c_in / c->groups;
  }
  for (int i = 0; i < nd; i++) wd[2 + i] = c->k[i];
  for (int i = 0; i < 2 + nd; i++) nw *= wd[i];
  rlx_graph *g = rlx_graph_new("conv");
  rlx_node xn = rlx_input(g, "x", t, 2 + nd, xd);
  rlx_node wn = c->param ? rlx_param(g, "w", t, 2 + nd, wd) : rlx_input(g, "w", t, 2 + nd, wd);
  rlx_node bn = !c->bias ? -1 : c->param ? rlx_param(g, "b", t, 1, &c->c_out) : rlx_input(g, "b", t, 1, &c->c_out);
  rlx_node yn = c->transposed ? rlx_conv_transpose(g, xn, wn, bn, &c->d) : rlx_conv(g, xn, wn, bn, &c->d);
  int64_t nr = 1, rd[4];
  if (c->tail == TAIL_RES_RELU_CLAMP) {
    rlx_dtype rt;
    const int rr = rlx_node_type(g, yn, &rt, rd);
    for (int i = 0; i < rr; i++) nr *= rd[i];
    yn = rlx_clamp(g, rlx_activation(g, RLX_ACT_RELU, rlx_add(g, yn, rlx_input(g, "r", t, rr, rd))), -1.0, 3.0);
  } else if (c->tail == TAIL_LEAKY) {
    yn = rlx_leaky_relu(g, yn, 0.3);
  }
  rlx_graph_set_outputs(g, 1, &yn);
  rlx_session *s = NULL;
  rlx_options o = {RLX_DEVICE_CPU, threads, 0, 0, NULL};
  rlx_status st = rlx_compile(g, &o, &s);
  CHECK(st == RLX_OK, "compile: %s", rlx_last_error());
  int64_t numel = -1;
  if (st == RLX_OK) {
    size_t es = t == RLX_F64 ? 8 : 4;
    const float *src[3] = {x, w, b};
    const int64_t counts[3] = {nx, nw, c->c_out};
    const char *names[3] = {"x", "w", "b"};
    for (int i = 0; i < (c->bias ? 3 : 2); i++) {
      void *buf = malloc((size_t)counts[i] * es + 1);
      for (int64_t j = 0; j < counts[i]; j++) {
        if (t == RLX_F64)
          ((double *)buf)[j] = src[i][j];
        else
          ((float *)buf)[j] = src[i][j];
      }
      if (c->param && i > 0)
        rlx_set_param(s, names[i], buf, (size_t)counts[i] * es);
      else
        rlx_set_input(s, names[i], buf, (size_t)counts[i] * es);
      free(buf);
    }
    if (c->tail == TAIL_RES_RELU_CLAMP) { /* grid values, the same in both dtypes */
      void *buf = malloc((size_t)nr * es + 1);
      for (int64_t j = 0; j < nr; j++) {
        const double v = (double)((j * 7919) % 257 - 128) / 64.0;
        if (t == RLX_F64)
          ((double *)buf)[j] = v;
        else
          ((float *)buf)[j] = (float)v;
      }
      rlx_set_input(s, "r", buf, (size_t)nr * es);
      free(buf);
    }
    st = rlx_run(s);
    CHECK(st == RLX_OK, "run: %s", rlx_last_error());
    rlx_dtype ot;
    int64_t od[4];
    int rank = rlx_output_type(s, 0, &ot, od);
    numel = 1;
    for (int i = 0; i < rank; i++) numel *= od[i];
    void *out = malloc((size_t)numel * es + 1);
    rlx_output(s, 0, out, (size_t)numel * es);
    *y = malloc((size_t)numel * sizeof **y + 1);
    for (int64_t j = 0; j < numel; j++) (*y)[j] = t == RLX_F64 ? ((double *)out)[j] : ((float *)out)[j];
    free(out);
    if (st != RLX_OK) {
      free(*y);
      *y = NULL;
      numel = -1;
    }
  }
  rlx_session_free(s);
  rlx_graph_free(g);
  return numel;
}

static void describe(const conv_config *c, char *buf, size_t n) {
  snprintf(buf, n,
           "%s%dd N%lld C%lld O%lld G%lld in %lldx%lld k %lldx%lld s %lldx%lld d %lldx%lld pad %lld,%lld,%lld,%lld "
           "opad %lld,%lld bias %d param %d tail %d",
           c->transposed ? "convT" : "conv", c->ndim, (long long)c->batch, (long long)c->c_in,
           (long long)c->c_out, (long long)c->groups, (long long)c->in[0], (long long)c->in[1],
           (long long)c->k[0], (long long)c->k[1], (long long)c->d.stride[0], (long long)c->d.stride[1],
           (long long)c->d.dilation[0], (long long)c->d.dilation[1], (long long)c->d.pad[0],
           (long long)c->d.pad[1], (long long)c->d.pad[2], (long long)c->d.pad[3], (long long)c->d.output_pad[0],
           (long long)c->d.output_pad[1], c->bias, c->param, c->tail);
}

/* The F32 GEMM path against the F64 reference: every value is a sum of
 * at most K products of grid values (|x| <= 2, |w| <= 2), so F32 rounding
 * bounds the error by about K * 4 * 2^-23 per output. */
static void compare(const conv_config *c, int threads) {
  int64_t nx = c->batch * c->c_in, nw = c->c_in * (c->transposed ? c->c_out / c->groups : c->c_out / c->groups);
  int64_t taps = 1;
  for (int i = 0; i < c->ndim; i++) {
    nx *= c->in[i];
    taps *= c->k[i];
  }
  nw *= taps;
  float *x = malloc((size_t)nx * sizeof *x), *w = malloc((size_t)nw * sizeof *w), b[2048];
  for (int64_t i = 0; i < nx; i++) x[i] = rnd_value();
  for (int64_t i = 0; i < nw; i++) w[i] = rnd_value();
  for (int64_t i = 0; i < c->c_out; i++) b[i] = rnd_value();
  double *got = NULL, *want = NULL;
  char what[400];
  describe(c, what, sizeof what);
  int64_t n32 = run_conv(c, RLX_F32, threads, x, w, b, &got);
  int64_t n64 = run_conv(c, RLX_F64, 1, x, w, b, &want);
  CHECK(n32 == n64 && n32 >= 0, "%s: sizes %lld vs %lld", what, (long long)n32, (long long)n64);
  if (n32 == n64 && n32 >= 0) {
    int64_t K = (c->c_in / c->groups) * taps + 1;
    double tol = 4.0 * 4.0 * (double)K * ldexp(1.0, -23) + 1e-6, worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n32; i++) {
      double e = fabs(got[i] - want[i]) / (1.0 + fabs(want[i]));
      if (!(e <= worst)) {
        worst = e;
        at = i;
      }
    }
    CHECK(worst <= tol, "%s, %d threads: error %.3g at %lld (got %.8g, want %.8g), bound %.3g", what, threads,
          worst, (long long)at, got[at], want[at], tol);
  }
  free(got);
  free(want);
  free(x);
  free(w);
}

/* A random valid configuration; `big` widens the shapes. */
static conv_config random_config(int transposed, int ndim, int big) {
  conv_config c;
  memset(&c, 0, sizeof c);
  c.transposed = transposed;
  c.ndim = ndim;
  c.d.ndim = ndim;
  c.bias = (int)rnd(0, 1);
  c.batch = rnd(1, big ? 4 : 3);
  c.groups = rnd(0, 3) == 0 ? rnd(2, 3) : 1;
  int64_t cg = rnd(1, big ? 12 : 4), og = rnd(1, big ? 12 : 4);
  if (rnd(0, 5) == 0) { /* depthwise */
    c.groups = rnd(2, 6);
    cg = 1;
  }
  c.c_in = c.groups * cg;
  c.c_out = c.groups * og;
  for (int i = 0; i < 2; i++) {
    c.k[i] = c.in[i] = 1;
    c.d.stride[i] = c.d.dilation[i] = 1;
  }
  int first = 2 - ndim;
  for (int i = 0; i < ndim; i++) {
    int64_t k = rnd(0, 4) == 0 ? 1 : rnd(1, 5), dil = rnd(0, 3) == 0 ? rnd(2, 3) : 1;
    int64_t s = rnd(0, 2) == 0 ? rnd(2, 4) : 1, span = dil * (k - 1) + 1;
    int64_t pb = rnd(0, 2) == 0 ? 0 : rnd(0, span - 1 < 3 ? span - 1 : 3);
    int64_t pe = rnd(0, 2) == 0 ? pb : rnd(0, span - 1 < 3 ? span - 1 : 3);
    int64_t lo = span > pb + pe ? span - pb - pe : 1;
    int64_t n = lo + rnd(0, big ? 40 : 9) + (transposed ? pb + pe : 0);
    if (ndim == 1) n += rnd(0, big ? 200 : 20);
    c.in[first + i] = n;
    c.k[first + i] = k;
    c.d.stride[i] = s;
    c.d.dilation[i] = dil;
    c.d.pad[i] = pb;
    c.d.pad[ndim + i] = pe;
    /* output_pad < max(stride, dilation), as the op requires */
    int64_t lim = s > dil ? s : dil;
    c.d.output_pad[i] = transposed && lim > 1 ? rnd(0, lim - 1) : 0;
  }
  if (ndim == 1) {
    c.in[0] = c.in[1];
    c.k[0] = c.k[1];
  }
  c.d.groups = c.groups;
  return c;
}

static conv_config fixed(int transposed, int ndim, int64_t N, int64_t C, int64_t O, int64_t G, int64_t h,
                         int64_t w, int64_t kh, int64_t kw, int64_t s, int64_t p, int64_t dil, int bias) {
  conv_config c;
  memset(&c, 0, sizeof c);
  c.transposed = transposed;
  c.ndim = c.d.ndim = ndim;
  c.batch = N;
  c.c_in = C;
  c.c_out = O;
  c.groups = c.d.groups = G;
  c.in[0] = ndim == 1 ? w : h; /* a 1-D shape in in[0], as run_conv reads it */
  c.in[1] = w;
  c.k[0] = ndim == 1 ? kw : kh;
  c.k[1] = kw;
  c.bias = bias;
  for (int i = 0; i < ndim; i++) {
    c.d.stride[i] = s;
    c.d.dilation[i] = dil;
    c.d.pad[i] = c.d.pad[ndim + i] = p;
  }
  return c;
}

int main(void) {
  /* fixed shapes: the MNIST CNN's convs and their gradient convs, 1x1,
   * blocks of im2col columns (K * positions past the scratch budget) */
  const conv_config fixed_cases[] = {
      fixed(0, 2, 8, 1, 8, 1, 28, 28, 5, 5, 1, 0, 1, 1),
      fixed(0, 2, 4, 8, 16, 1, 12, 12, 5, 5, 1, 0, 1, 1),
      fixed(1, 2, 4, 16, 8, 1, 8, 8, 5, 5, 1, 0, 1, 0),
      fixed(0, 2, 1, 16, 8, 1, 28, 28, 24, 24, 1, 0, 1, 0), /* a weight gradient: kernel ~ input */
      fixed(0, 2, 2, 24, 20, 1, 9, 11, 1, 1, 1, 0, 1, 1),   /* 1x1: im2col-free */
      fixed(0, 2, 1, 40, 8, 1, 60, 60, 3, 3, 1, 1, 1, 1),   /* column blocks */
      fixed(0, 2, 1, 6, 6, 6, 33, 35, 3, 3, 2, 1, 2, 1),    /* depthwise, strided, dilated */
      fixed(1, 2, 1, 8, 12, 2, 17, 13, 4, 4, 2, 1, 1, 1),   /* transposed upsampling, batch 1 */
      fixed(0, 1, 2, 8, 16, 1, 1, 700, 1, 5, 2, 2, 1, 1),   /* long 1-D */
      fixed(1, 1, 1, 16, 8, 1, 1, 300, 1, 4, 2, 1, 1, 0),
      /* kernels wider than the output (the transposed im2col): padded,
       * grouped; strided and dilated */
      fixed(0, 2, 2, 12, 6, 3, 10, 9, 7, 8, 1, 2, 1, 1),
      fixed(0, 2, 1, 10, 4, 1, 9, 9, 6, 6, 2, 1, 2, 0),
      fixed(0, 2, 3, 64, 8, 1, 20, 20, 16, 16, 1, 0, 1, 1), /* and K in channel chunks, 4 threads' items */
      fixed(0, 2, 1, 64, 8, 1, 32, 32, 3, 3, 1, 1, 1, 1),   /* K chunks of 7 channels and a last one of 1 */
  };
  for (size_t i = 0; i < sizeof fixed_cases / sizeof fixed_cases[0]; i++) {
    compare(&fixed_cases[i], 1);
    compare(&fixed_cases[i], 3);
  }
  for (int trial = 0; trial < 160; trial++) {
    conv_config c = random_config(trial % 2, 1 + trial / 2 % 2, trial % 8 >= 6);
    compare(&c, trial % 3 == 0 ? 3 : 1);
  }
  /* packed weights (params), with and without a fused epilogue: the
   * direct kernel's tiles (14 output positions of a row: 56, 28 and 14
   * wide rows, rows of 8..13 and of 15..27 in uneven tiles), its channel
   * blocks of 32 (counts past and short of a block), strides 1 and 2 with
   * padding, 1x1 kernels (in place, and from 1024 channels) and the stem's
   * 7x7 stride 2, next to the shapes it leaves to the GEMM (7 wide rows,
   * 1x1 of stride 2 or few channels), inputs of more than 1 MiB an
   * image, whose tiles run a row's channel blocks in turn (ResNet's
   * stride-2 3x3 at batch 3: its images padded one at a time), and depthwise
   * 3x3 planes of rows of more than two vectors (made row after row, in
   * passes of 128 outputs); 1x1 kernels on the GEMM with x in place,
   * its tiles along row panels: uneven panels (100 rows), column blocks
   * (2048 at K = 64) that end inside an image of a batch; convs of at
   * most 256 K steps on the lanes tile (vectors of 16 positions times 8
   * channels): rows of 1 to 5 vectors ending part way, channel counts
   * short of 8, stride 1, stride 2 with an odd pad (the stem's phases
   * of columns), dilated taps, K = 256 */
  conv_config packed[] = {
      fixed(0, 2, 2, 64, 64, 1, 56, 56, 3, 3, 1, 1, 1, 1),
      fixed(0, 2, 3, 37, 45, 1, 28, 28, 3, 3, 1, 1, 1, 1),
      fixed(0, 2, 2, 48, 70, 1, 29, 27, 3, 3, 2, 1, 1, 1),
      fixed(0, 2, 1, 3, 64, 1, 46, 46, 7, 7, 2, 3, 1, 1),
      fixed(0, 2, 2, 130, 33, 1, 14, 14, 1, 1, 1, 0, 1, 1),
      fixed(0, 2, 1, 256, 40, 1, 9, 19, 1, 1, 1, 0, 1, 0),
      fixed(0, 2, 2, 20, 17, 1, 10, 8, 3, 3, 1, 1, 1, 0),
      fixed(0, 2, 1, 16, 24, 1, 12, 13, 5, 5, 1, 2, 2, 1),
      fixed(0, 2, 2, 32, 48, 1, 7, 7, 3, 3, 1, 1, 1, 1),
      fixed(0, 2, 2, 144, 24, 1, 16, 16, 1, 1, 2, 0, 1, 1),
      fixed(0, 2, 2, 24, 144, 1, 16, 16, 1, 1, 1, 0, 1, 1),
      fixed(0, 1, 2, 40, 36, 1, 1, 50, 1, 3, 1, 1, 1, 1),
      fixed(0, 2, 2, 132, 64, 1, 44, 46, 1, 1, 1, 0, 1, 1),
      fixed(0, 2, 1, 72, 40, 1, 60, 58, 3, 3, 1, 1, 1, 1),
      fixed(0, 2, 3, 128, 40, 1, 56, 56, 3, 3, 2, 1, 1, 1),
      fixed(0, 2, 1, 3, 3, 3, 40, 150, 3, 3, 2, 1, 1, 1),
      fixed(0, 2, 2, 2, 2, 2, 21, 290, 3, 3, 2, 1, 1, 0),
      fixed(0, 2, 1, 2, 2, 2, 9, 150, 3, 3, 1, 0, 1, 1),
      fixed(0, 2, 3, 64, 100, 1, 40, 60, 1, 1, 1, 0, 1, 1),
      fixed(0, 2, 2, 1024, 64, 1, 9, 10, 1, 1, 1, 0, 1, 0),
      fixed(0, 2, 2, 3, 20, 1, 37, 41, 3, 3, 1, 1, 1, 1),
      fixed(0, 2, 1, 4, 9, 1, 30, 150, 5, 5, 2, 3, 2, 1),
      fixed(0, 2, 2, 3, 32, 1, 33, 35, 3, 3, 2, 1, 1, 1),
      fixed(0, 2, 1, 16, 13, 1, 12, 21, 4, 4, 1, 2, 1, 0),
  };
  for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++)
    for (int tail = TAIL_NONE; tail <= TAIL_LEAKY; tail++) {
      packed[i].param = 1;
      packed[i].tail = tail;
      compare(&packed[i], 1 + (int)(i + (size_t)tail) % 2);
    }
  return check_report();
}
