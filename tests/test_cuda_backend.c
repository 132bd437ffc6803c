/* test_cuda_backend.c — the CUDA backend against the CPU backend on random
 * data at sizes the op-parity cases do not reach (tensor-core attention,
 * cuBLASLt products, packed-weight products on both of their paths), and
 * the properties of the executable: a graph replay equals the op-by-op
 * run bit for bit, params stay on the device and a new rlx_set_param is
 * seen (folded weight transposes too), the plans of one session share one
 * device copy of each param, and a graph with an op CUDA does not claim
 * runs in two backends with the declined node named by RLX_TRACE. Skips
 * (exit 77) without a CUDA device. */
#include "check.h"
#include "cuda_util.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <unistd.h>

/* Runs g on the CPU and on CUDA with the same leaves; checks output 0
 * within tolerance(t) widened by extra_atol. */
static void compare_tol(const char *what, const rlx_graph *g, const bound_leaf *leaves, int n, rlx_dtype t,
                        double extra_atol) {
  size_t cb = 0, gb = 0;
  void *cpu = run_graph(g, RLX_DEVICE_CPU, leaves, n, 0, &cb);
  void *gpu = run_graph(g, RLX_DEVICE_CUDA, leaves, n, 0, &gb);
  CHECK(cpu && gpu && cb == gb, "%s: both runs give output 0 (%zu and %zu bytes)", what, cb, gb);
  if (cpu && gpu && cb == gb) {
    double atol, rtol;
    tolerance(t, &atol, &rtol);
    atol += extra_atol;
    double r = worst_ratio(t, gpu, cpu, (int64_t)(cb / dtype_size(t)), atol, rtol);
    CHECK(r <= 1.0, "%s (%s): worst error %.3g of tolerance (atol %g rtol %g)", what, rlx_dtype_name(t), r, atol,
          rtol);
  }
  free(cpu);
  free(gpu);
}

static void compare(const char *what, const rlx_graph *g, const bound_leaf *leaves, int n, rlx_dtype t) {
  compare_tol(what, g, leaves, n, t, 0.0);
}

/* Output o of g on the CUDA graph replay against the CPU (tolerance of t,
 * atol raised by extra_atol), and the same output op by op
 * (RLX_CUDA_GRAPH=0): the replay's bytes. */
static void compare_replay(const char *what, const rlx_graph *g, const bound_leaf *leaves, int n, int o, rlx_dtype t,
                           double extra_atol) {
  size_t cb = 0, gb = 0, eb = 0;
  void *cpu = run_graph(g, RLX_DEVICE_CPU, leaves, n, o, &cb), *gpu = run_graph(g, RLX_DEVICE_CUDA, leaves, n, o, &gb);
  setenv("RLX_CUDA_GRAPH", "0", 1);
  void *eager = run_graph(g, RLX_DEVICE_CUDA, leaves, n, o, &eb);
  unsetenv("RLX_CUDA_GRAPH");
  double atol, rtol;
  tolerance(t, &atol, &rtol);
  atol += extra_atol;
  const double r = cpu && gpu && cb == gb ? worst_ratio(t, gpu, cpu, (int64_t)(cb / dtype_size(t)), atol, rtol) : INFINITY;
  CHECK(r <= 1.0, "%s output %d: worst error %.3g of tolerance", what, o, r);
  CHECK(eager && gpu && eb == gb && !memcmp(eager, gpu, gb), "%s output %d: replay == op by op", what, o);
  free(cpu), free(gpu), free(eager);
}

/* ---------------------------------------------------------------- attention */

typedef struct {
  const char *name;
  int B, S, T, H, Hkv, D;
  rlx_layout layout;
  rlx_mask_kind mask;
  int window;
  double softcap;
} attn_case;

static void test_attention(void) {
  static const attn_case cases[] = {
      {"prefill causal gqa", 2, 77, 77, 4, 2, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      {"chunk bottom-right", 1, 5, 133, 4, 4, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      {"decode", 3, 1, 200, 8, 2, 64, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0},
      {"sliding window", 1, 150, 150, 2, 1, 32, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING_WINDOW, 37, 0},
      {"custom mask softcap", 2, 40, 70, 2, 2, 96, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 30.0},
      {"no mask d80", 1, 65, 65, 3, 1, 80, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0},
      /* many key tiles through the cp.async pipeline, ragged ends */
      {"long causal d128", 1, 301, 301, 4, 1, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      {"long chunk bottom-right", 2, 70, 650, 2, 2, 64, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0},
      {"long sliding window", 1, 420, 420, 2, 2, 64, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING_WINDOW, 90, 0},
      {"long no mask d16", 1, 130, 257, 2, 1, 16, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0},
      /* the benchmark's shape at a smaller batch: 4 query heads per kv head */
      {"prefill 512 causal gqa d128", 2, 512, 512, 8, 2, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      {"d40 exact kernel", 1, 33, 45, 2, 1, 40, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      {"d256 exact kernel", 1, 20, 20, 2, 2, 256, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0},
      /* the split-key decode kernel: few query rows per kv head */
      {"decode window softcap", 2, 2, 300, 4, 1, 128, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING_WINDOW, 100, 20.0},
      {"decode custom mask", 1, 1, 1000, 6, 2, 96, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0},
      {"decode d256", 1, 1, 64, 2, 2, 256, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      {"decode one split", 1, 1, 20, 4, 4, 32, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0},
      {"decode chunk of 4", 1, 4, 517, 8, 2, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      {"decode 8b-shaped", 1, 1, 512, 32, 8, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      {"decode many splits", 1, 1, 19000, 2, 1, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      /* 16-bit rows of 72 bytes: staged by element loads, not cp.async */
      {"decode d36 unaligned rows", 2, 1, 300, 4, 2, 36, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
      /* 512 splits of 16 rows: shared memory past the default 48 KB (F32:
       * past the kernel's limit, another kernel takes it) */
      {"decode long context", 1, 1, 32768, 16, 1, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0},
  };
  static const rlx_dtype types[] = {RLX_BF16, RLX_F16, RLX_F32};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const attn_case *a = &cases[c];
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
      rlx_dtype t = types[ti];
      rlx_graph *g = rlx_graph_new("attention");
      int bhsd = a->layout == RLX_LAYOUT_BHSD;
      int64_t qd[4] = {a->B, bhsd ? a->H : a->S, bhsd ? a->S : a->H, a->D};
      int64_t kd[4] = {a->B, bhsd ? a->Hkv : a->T, bhsd ? a->T : a->Hkv, a->D};
      int64_t md[2] = {a->S, a->T};
      rlx_node q = rlx_input(g, "q", t, 4, qd), k = rlx_input(g, "k", t, 4, kd), v = rlx_input(g, "v", t, 4, kd);
      rlx_node m = a->mask == RLX_MASK_CUSTOM ? rlx_input(g, "m", RLX_F32, 2, md) : -1;
      rlx_attention_desc d = {a->H, a->Hkv, a->D, a->mask, a->window, 0, a->softcap, a->layout};
      rlx_node y = rlx_attention(g, q, k, v, m, &d);
      rlx_graph_set_outputs(g, 1, &y);
      int64_t nq = (int64_t)a->B * a->S * a->H * a->D, nk = (int64_t)a->B * a->T * a->Hkv * a->D;
      float *mask = malloc(sizeof(float) * (size_t)(a->S * a->T));
      for (int i = 0; i < a->S * a->T; i++) mask[i] = rng_uniform() < 0.2 ? -INFINITY : (float)rng_normal();
      if (a->S > 3) /* one fully masked row: zeros */
        for (int i = 0; i < a->T; i++) mask[3 * a->T + i] = -INFINITY;
      bound_leaf leaves[4] = {{"q", 0, random_tensor(t, nq, 1.0), (size_t)nq * dtype_size(t)},
                              {"k", 0, random_tensor(t, nk, 1.0), (size_t)nk * dtype_size(t)},
                              {"v", 0, random_tensor(t, nk, 1.0), (size_t)nk * dtype_size(t)},
                              {"m", 0, mask, sizeof(float) * (size_t)(a->S * a->T)}};
      /* 16-bit types: the tensor-core kernel as the plan picks it, then
       * forced to each of its shapes (the plan picks 128-row blocks only
       * for large grids) */
      static const char *const tiles[] = {NULL, "128", "64"};
      for (int ti2 = 0; ti2 < (t == RLX_F32 ? 1 : 3); ti2++) {
        if (tiles[ti2]) setenv("RLX_CUDA_ATTN_TILE", tiles[ti2], 1);
        char what[128];
        snprintf(what, sizeof what, "attention %s%s%s", a->name, tiles[ti2] ? " tile " : "", tiles[ti2] ? tiles[ti2] : "");
        compare(what, g, leaves, a->mask == RLX_MASK_CUSTOM ? 4 : 3, t);
        unsetenv("RLX_CUDA_ATTN_TILE");
      }
      /* the split-key kernel merges up to 16 splits in a cluster's shared
       * memory: those shapes again with the merge through global memory,
       * which is the same merge in the same order (the same bytes) */
      if (!strncmp(a->name, "decode", 6)) {
        const int nl = a->mask == RLX_MASK_CUSTOM ? 4 : 3;
        size_t b1 = 0, b2 = 0;
        void *cl = run_graph(g, RLX_DEVICE_CUDA, leaves, nl, 0, &b1);
        setenv("RLX_CUDA_ATTN_CLUSTER", "0", 1);
        char what[128];
        snprintf(what, sizeof what, "attention %s, merged in global memory", a->name);
        compare(what, g, leaves, nl, t);
        void *gl = run_graph(g, RLX_DEVICE_CUDA, leaves, nl, 0, &b2);
        unsetenv("RLX_CUDA_ATTN_CLUSTER");
        CHECK(cl && gl && b1 == b2 && !memcmp(cl, gl, b1), "%s: the bytes of the cluster's merge", what);
        free(cl), free(gl);
      }
      for (int i = 0; i < 4; i++) free(leaves[i].data);
      rlx_graph_free(g);
    }
  }
}

/* ---------------------------------------------------------------- products */

static void test_matmul(void) {
  static const rlx_dtype types[] = {RLX_BF16, RLX_F16, RLX_F32, RLX_F64};
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    rlx_dtype t = types[ti];
    /* [2,3,M,K] @ [3,K,N]: a strided batch with a broadcast b */
    {
      rlx_graph *g = rlx_graph_new("batched");
      int64_t ad[4] = {2, 3, 37, 72}, bd[3] = {3, 72, 41};
      rlx_node a = rlx_input(g, "a", t, 4, ad), b = rlx_input(g, "b", t, 3, bd);
      rlx_node y = rlx_matmul(g, a, b);
      rlx_graph_set_outputs(g, 1, &y);
      bound_leaf l[2] = {{"a", 0, random_tensor(t, 2 * 3 * 37 * 72, 1.0), 2 * 3 * 37 * 72 * dtype_size(t)},
                         {"b", 0, random_tensor(t, 3 * 72 * 41, 0.2), 3 * 72 * 41 * dtype_size(t)}};
      compare("matmul batched broadcast", g, l, 2, t);
      free(l[0].data), free(l[1].data);
      rlx_graph_free(g);
    }
    /* [2,1,M,K] @ [1,3,K,N]: broadcasting no single stride expresses */
    {
      rlx_graph *g = rlx_graph_new("crossed");
      int64_t ad[4] = {2, 1, 9, 24}, bd[4] = {1, 3, 24, 10};
      rlx_node a = rlx_input(g, "a", t, 4, ad), b = rlx_input(g, "b", t, 4, bd);
      rlx_node y = rlx_matmul(g, a, b);
      rlx_graph_set_outputs(g, 1, &y);
      bound_leaf l[2] = {{"a", 0, random_tensor(t, 2 * 9 * 24, 1.0), 2 * 9 * 24 * dtype_size(t)},
                         {"b", 0, random_tensor(t, 3 * 24 * 10, 0.3), 3 * 24 * 10 * dtype_size(t)}};
      compare("matmul crossed broadcast", g, l, 2, t);
      free(l[0].data), free(l[1].data);
      rlx_graph_free(g);
    }
    /* x @ transpose(W) + bias with gelu_tanh and silu epilogues (W [N, K] param, read as op T) */
    for (int act = 0; act < 2; act++) {
      rlx_graph *g = rlx_graph_new("linear");
      int64_t xd[3] = {3, 50, 96}, wd[2] = {136, 96}, bd[1] = {136};
      int64_t perm[2] = {1, 0};
      rlx_node x = rlx_input(g, "x", t, 3, xd), w = rlx_param(g, "w", t, 2, wd), b = rlx_param(g, "b", t, 1, bd);
      rlx_node y = rlx_fused_matmul_bias_act(g, x, rlx_transpose(g, w, 2, perm), b,
                                             act ? RLX_ACT_SILU : RLX_ACT_GELU_TANH, 0);
      rlx_graph_set_outputs(g, 1, &y);
      bound_leaf l[3] = {{"x", 0, random_tensor(t, 3 * 50 * 96, 1.0), 3 * 50 * 96 * dtype_size(t)},
                         {"w", 1, random_tensor(t, 136 * 96, 0.1), 136 * 96 * dtype_size(t)},
                         {"b", 1, random_tensor(t, 136, 1.0), 136 * dtype_size(t)}};
      compare(act ? "linear silu (transposed weight)" : "linear gelu_tanh (transposed weight)", g, l, 3, t);
      for (int i = 0; i < 3; i++) free(l[i].data);
      rlx_graph_free(g);
    }
  }
}

/* Products of few rows (the GEMV kernels): both weight layouts, a split
 * along K, bias + activation epilogues; every run of a session gives the
 * same bytes (the split's counters are left ready for the next run). */
static void test_gemv(void) {
  static const rlx_dtype types[] = {RLX_BF16, RLX_F16, RLX_F32};
  static const struct { int M, N, K, trans, act; } cases[] = {
      {1, 136, 520, 0, -1}, {3, 72, 1000, 0, -1}, {8, 2048, 64, 0, -1}, {1, 77, 264, 1, -1},
      {5, 40, 1024, 1, -1}, {1, 96, 776, 0, RLX_ACT_SILU}, {4, 33, 136, 1, RLX_ACT_GELU_TANH}};
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    rlx_dtype t = types[ti];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      const int M = cases[c].M, N = cases[c].N, K = cases[c].K;
      rlx_graph *g = rlx_graph_new("gemv");
      int64_t xd[2] = {M, K}, wd[2] = {cases[c].trans ? N : K, cases[c].trans ? K : N}, bd[1] = {N}, perm[2] = {1, 0};
      rlx_node x = rlx_input(g, "x", t, 2, xd), w = rlx_param(g, "w", t, 2, wd);
      if (cases[c].trans) w = rlx_transpose(g, w, 2, perm);
      rlx_node y = cases[c].act < 0 ? rlx_matmul(g, x, w)
                                    : rlx_fused_matmul_bias_act(g, x, w, rlx_param(g, "b", t, 1, bd),
                                                                (rlx_act)cases[c].act, 0);
      rlx_graph_set_outputs(g, 1, &y);
      bound_leaf l[3] = {{"x", 0, random_tensor(t, (int64_t)M * K, 1.0), (size_t)M * K * dtype_size(t)},
                         {"w", 1, random_tensor(t, (int64_t)N * K, 0.1), (size_t)N * K * dtype_size(t)},
                         {"b", 1, random_tensor(t, N, 1.0), (size_t)N * dtype_size(t)}};
      const int nl = cases[c].act < 0 ? 2 : 3;
      char what[96];
      snprintf(what, sizeof what, "gemv M=%d N=%d K=%d%s%s", M, N, K, cases[c].trans ? " (w^T)" : "",
               cases[c].act < 0 ? "" : " + bias act");
      compare(what, g, l, nl, t);
      /* runs of one session, and the op-by-op launches: the same bytes */
      rlx_options cu = {RLX_DEVICE_CUDA, 0, 0};
      rlx_session *s = NULL;
      size_t ob = (size_t)M * N * dtype_size(t);
      void *r1 = malloc(ob), *r2 = malloc(ob);
      int ok = rlx_compile(g, &cu, &s) == RLX_OK;
      for (int i = 0; ok && i < nl; i++)
        ok = (l[i].param ? rlx_set_param(s, l[i].name, l[i].data, l[i].nbytes)
                         : rlx_set_input(s, l[i].name, l[i].data, l[i].nbytes)) == RLX_OK;
      ok = ok && rlx_run(s) == RLX_OK && rlx_output(s, 0, r1, ob) == RLX_OK && rlx_run(s) == RLX_OK &&
           rlx_output(s, 0, r2, ob) == RLX_OK;
      CHECK(ok && !memcmp(r1, r2, ob), "%s (%s): two runs of a session give the same bytes (%s)", what,
            rlx_dtype_name(t), ok ? "" : rlx_last_error());
      rlx_session_free(s);
      setenv("RLX_CUDA_GRAPH", "0", 1);
      size_t eb = 0;
      void *eager = run_graph(g, RLX_DEVICE_CUDA, l, nl, 0, &eb);
      unsetenv("RLX_CUDA_GRAPH");
      CHECK(eager && eb == ob && !memcmp(eager, r1, ob), "%s (%s): graph replay == op by op", what, rlx_dtype_name(t));
      free(eager), free(r1), free(r2);
      for (int i = 0; i < 3; i++) free(l[i].data);
      rlx_graph_free(g);
    }
  }
}

/* Three products of one x at decode sizes: the first two share a launch
 * (segments), the third absorbs the residual add after it (epilogue), on
 * both weight layouts, against the CPU; replay == op by op. */
static void test_gemv_segments(void) {
  static const rlx_dtype types[] = {RLX_BF16, RLX_F32};
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
    for (int trans = 0; trans < 2; trans++)
      for (int M = 1; M <= 3; M += 2) {
        const rlx_dtype t = types[ti];
        const int K = 2056, N[3] = {136, 72, 200};
        rlx_graph *g = rlx_graph_new("gemv_segments");
        int64_t xd[2] = {M, K}, rd[2] = {M, N[2]}, perm[2] = {1, 0};
        rlx_node x = rlx_input(g, "x", t, 2, xd), y[3];
        static const char *names[3] = {"w0", "w1", "w2"};
        for (int i = 0; i < 3; i++) {
          int64_t wd[2] = {trans ? N[i] : K, trans ? K : N[i]};
          rlx_node w = rlx_param(g, names[i], t, 2, wd);
          y[i] = rlx_matmul(g, x, trans ? rlx_transpose(g, w, 2, perm) : w);
        }
        y[2] = rlx_add(g, y[2], rlx_input(g, "r", t, 2, rd));
        rlx_graph_set_outputs(g, 3, y);
        bound_leaf l[5] = {{"x", 0, random_tensor(t, (int64_t)M * K, 1.0), (size_t)M * K * dtype_size(t)},
                           {"w0", 1, random_tensor(t, (int64_t)N[0] * K, 0.1), (size_t)N[0] * K * dtype_size(t)},
                           {"w1", 1, random_tensor(t, (int64_t)N[1] * K, 0.1), (size_t)N[1] * K * dtype_size(t)},
                           {"w2", 1, random_tensor(t, (int64_t)N[2] * K, 0.1), (size_t)N[2] * K * dtype_size(t)},
                           {"r", 0, random_tensor(t, (int64_t)M * N[2], 1.0), (size_t)M * N[2] * dtype_size(t)}};
        char what[96];
        snprintf(what, sizeof what, "gemv segments %s M=%d%s", rlx_dtype_name(t), M, trans ? " (w^T)" : "");
        for (int o = 0; o < 3; o++) compare_replay(what, g, l, 5, o, t, 0.0);
        for (int i = 0; i < 5; i++) free(l[i].data);
        rlx_graph_free(g);
      }
}

/* Packed weights made by the CPU's Quantize, then DequantMatMul on both
 * CUDA paths: M <= 8 (the fused decode kernel) and M > 8 (dequantize + GEMM). */
static void test_dequant_matmul(void) {
  static const rlx_dtype schemes[] = {RLX_Q4_0, RLX_Q4_1, RLX_Q8_0, RLX_Q4_K, RLX_Q6_K};
  static const rlx_dtype types[] = {RLX_F32, RLX_BF16};
  const int64_t N = 72, K = 512;
  for (size_t si = 0; si < sizeof schemes / sizeof *schemes; si++) {
    rlx_dtype q = schemes[si];
    rlx_graph *qg = rlx_graph_new("quantize");
    int64_t wd[2] = {N, K};
    rlx_node w = rlx_input(qg, "w", RLX_F32, 2, wd);
    rlx_node qw = rlx_quantize(qg, w, q);
    rlx_graph_set_outputs(qg, 1, &qw);
    float *wf = random_tensor(RLX_F32, N * K, 1.0);
    bound_leaf wl = {"w", 0, wf, sizeof(float) * (size_t)(N * K)};
    size_t qbytes = 0;
    void *packed = run_graph(qg, RLX_DEVICE_CPU, &wl, 1, 0, &qbytes);
    CHECK(packed != NULL, "quantize to %s", rlx_dtype_name(q));
    for (size_t ti = 0; packed && ti < sizeof types / sizeof *types; ti++) {
      rlx_dtype t = types[ti];
      for (int M = 1; M <= 19; M += M == 1 ? 2 : 16) { /* 1, 3: the decode kernel; 19: dequantize + GEMM */
        rlx_graph *g = rlx_graph_new("dequant_matmul");
        int64_t xd[2] = {M, K};
        rlx_node x = rlx_input(g, "x", t, 2, xd), pw = rlx_param(g, "w", q, 2, wd);
        rlx_node y = rlx_dequant_matmul(g, x, pw);
        rlx_graph_set_outputs(g, 1, &y);
        bound_leaf l[2] = {{"x", 0, random_tensor(t, M * K, 1.0), (size_t)(M * K) * dtype_size(t)},
                           {"w", 1, packed, qbytes}};
        char what[96];
        snprintf(what, sizeof what, "dequant_matmul %s M=%d", rlx_dtype_name(q), M);
        /* M > 8 dequantizes w to x's dtype for a tensor-core product (as
         * llama.cpp's cuBLAS path): with bf16 the weights and cuBLASLt's
         * partial sums (split-K, as PyTorch allows by default) are rounded
         * to 8 bits, each rounding up to 2^-9 of a partial of about
         * sqrt(K) |x||w| (x, w ~ 1: 0.044 at K = 512); four of those bound
         * what the H200 showed (0.11 to 0.17 where |y| is small) */
        double extra = t == RLX_BF16 && M > 8 ? 4 * ldexp(1.0, -9) * sqrt((double)K) : 0.0;
        compare_tol(what, g, l, 2, t, extra);
        free(l[0].data);
        rlx_graph_free(g);
      }
    }
    free(packed);
    free(wf);
    rlx_graph_free(qg);
  }
}

/* DequantMatMul of 16-bit weights (GGUF F16/BF16 matrices read in place)
 * under x of their dtype or F32: at decode rows the GEMV widening w as it
 * streams, two products of one x joined in a launch and the residual add
 * in the second's epilogue; at 19 rows, or K not a multiple of 8, cuBLASLt
 * on w as given or widened into the scratch. Against the CPU; replay ==
 * op by op. */
static void test_dequant_matmul_16bit(void) {
  static const rlx_dtype wtypes[] = {RLX_F16, RLX_BF16};
  static const int64_t Ks[] = {4104, 100}, Ms[] = {1, 3, 19};
  for (size_t wi = 0; wi < 2; wi++)
    for (int same = 0; same < 2; same++)
      for (size_t ki = 0; ki < 2; ki++)
        for (size_t mi = 0; mi < 3; mi++) {
          const rlx_dtype wt = wtypes[wi], t = same ? wt : RLX_F32;
          const int64_t K = Ks[ki], M = Ms[mi], N[2] = {136, 72};
          rlx_graph *g = rlx_graph_new("dequant_matmul_16bit");
          int64_t xd[2] = {M, K}, rd[2] = {M, N[1]}, w0d[2] = {N[0], K}, w1d[2] = {N[1], K};
          rlx_node x = rlx_input(g, "x", t, 2, xd);
          rlx_node y[2] = {rlx_dequant_matmul(g, x, rlx_param(g, "w0", wt, 2, w0d)),
                           rlx_dequant_matmul(g, x, rlx_param(g, "w1", wt, 2, w1d))};
          y[1] = rlx_add(g, y[1], rlx_input(g, "r", t, 2, rd));
          rlx_graph_set_outputs(g, 2, y);
          bound_leaf l[4] = {{"x", 0, random_tensor(t, M * K, 1.0), (size_t)(M * K) * dtype_size(t)},
                             {"w0", 1, random_tensor(wt, N[0] * K, 0.1), (size_t)(N[0] * K) * dtype_size(wt)},
                             {"w1", 1, random_tensor(wt, N[1] * K, 0.1), (size_t)(N[1] * K) * dtype_size(wt)},
                             {"r", 0, random_tensor(t, M * N[1], 1.0), (size_t)(M * N[1]) * dtype_size(t)}};
          char what[96];
          snprintf(what, sizeof what, "dequant_matmul %s w, %s x, M=%lld K=%lld", rlx_dtype_name(wt),
                   rlx_dtype_name(t), (long long)M, (long long)K);
          /* 16-bit x at 19 rows: cuBLASLt's split-K partials rounded as in test_dequant_matmul */
          const double extra = t == RLX_BF16 && M > 8 ? 4 * ldexp(1.0, -9) * sqrt((double)K) * 0.1 : 0.0;
          for (int o = 0; o < 2; o++) compare_replay(what, g, l, 4, o, t, extra);
          for (int i = 0; i < 4; i++) free(l[i].data);
          rlx_graph_free(g);
        }
}

/* Launches a run of g issues on the device (rlx_session_stats), -1 on failure. */
static int64_t device_launches(const rlx_graph *g) {
  rlx_session *sess = NULL;
  rlx_options o = {RLX_DEVICE_CUDA, 0, 0};
  rlx_session_stats st = {0};
  const int ok = rlx_compile(g, &o, &sess) == RLX_OK && rlx_session_get_stats(sess, &st) == RLX_OK;
  rlx_session_free(sess);
  return ok ? st.device_launches : -1;
}

/* silu(x @ wg) * (x @ wu) at decode rows (an MLP's gate and up
 * projections): one GEMV launch writes the region (glu) — against the CPU,
 * replay == op by op, the same bytes as the two products and the region
 * launched apart (RLX_CUDA_GLU_GEMV=0), one launch fewer. Weights as a
 * 16-bit GGUF's (DequantMatMul, F32 or 16-bit x) and as F32 params read
 * transposed (MatMul). With the up projection also an output, nothing is
 * fused (launch count unchanged) and the outputs still agree. */
static void test_glu_gemv(void) {
  static const struct { rlx_dtype w, x; } kinds[] = {{RLX_BF16, RLX_F32}, {RLX_F16, RLX_F16}, {RLX_F32, RLX_F32}};
  for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
    for (int M = 1; M <= 3; M += 2)
      for (int up_out = 0; up_out < 2; up_out++) {
        const rlx_dtype wt = kinds[ki].w, t = kinds[ki].x;
        const int64_t K = 2056, N = 136;
        rlx_graph *g = rlx_graph_new("glu_gemv");
        int64_t xd[2] = {M, K}, wd[2] = {N, K}, perm[2] = {1, 0};
        rlx_node x = rlx_input(g, "x", t, 2, xd), p[2];
        static const char *names[2] = {"wg", "wu"};
        for (int i = 0; i < 2; i++) {
          rlx_node w = rlx_param(g, names[i], wt, 2, wd);
          p[i] = wt == RLX_F32 ? rlx_matmul(g, x, rlx_transpose(g, w, 2, perm)) : rlx_dequant_matmul(g, x, w);
        }
        rlx_node y[2] = {rlx_mul(g, rlx_activation(g, RLX_ACT_SILU, p[0]), p[1]), p[1]};
        rlx_graph_set_outputs(g, 1 + up_out, y);
        bound_leaf l[3] = {{"x", 0, random_tensor(t, M * K, 1.0), (size_t)(M * K) * dtype_size(t)},
                           {"wg", 1, random_tensor(wt, N * K, 0.1), (size_t)(N * K) * dtype_size(wt)},
                           {"wu", 1, random_tensor(wt, N * K, 0.1), (size_t)(N * K) * dtype_size(wt)}};
        char what[96];
        snprintf(what, sizeof what, "glu gemv %s w, %s x, M=%d%s", rlx_dtype_name(wt), rlx_dtype_name(t), M,
                 up_out ? " (up an output)" : "");
        for (int o = 0; o <= up_out; o++) compare_replay(what, g, l, 3, o, t, 0.0);
        const int64_t fused = device_launches(g);
        size_t b1 = 0, b2 = 0;
        void *on = run_graph(g, RLX_DEVICE_CUDA, l, 3, 0, &b1);
        setenv("RLX_CUDA_GLU_GEMV", "0", 1);
        const int64_t apart = device_launches(g);
        void *off = run_graph(g, RLX_DEVICE_CUDA, l, 3, 0, &b2);
        unsetenv("RLX_CUDA_GLU_GEMV");
        CHECK(on && off && b1 == b2 && !memcmp(on, off, b1), "%s: the bytes of the products and region apart", what);
        CHECK(fused > 0 && fused == apart - (up_out ? 0 : 1), "%s: %lld launches (apart: %lld)", what,
              (long long)fused, (long long)apart);
        free(on), free(off);
        for (int i = 0; i < 3; i++) free(l[i].data);
        rlx_graph_free(g);
      }
}

/* Rope of q and of k by the same positions (or tables): one launch with
 * the heads of both (the second joins the first's), against the CPU,
 * replay == op by op; in both kernels (NEOX over all dims from positions
 * takes the vector one) and at a decode and a prefill length. A rope of
 * the first rope's output does not join (it reads what that one writes). */
static void test_rope_join(void) {
  for (int form = 0; form < 3; form++) /* positions NEOX, positions normal with a pass-through, tables */
    for (int S = 1; S <= 7; S += 6)
      for (int chain = 0; chain < 2; chain++) {
        const rlx_dtype t = RLX_F32;
        const int D = 64, Hq = 8, Hk = 2;
        rlx_rope_desc d = {D, form == 1 ? 48 : D, form == 0 ? RLX_ROPE_NEOX : RLX_ROPE_NORMAL, 10000.0, 1.0};
        rlx_graph *g = rlx_graph_new("rope_join");
        int64_t qd[3] = {1, S, Hq * D}, kd[3] = {1, S, Hk * D}, pd[1] = {S}, td[2] = {S, d.n_rot / 2};
        rlx_node q = rlx_input(g, "q", t, 3, qd), k = chain ? q : rlx_input(g, "k", t, 3, kd), y[2];
        if (form < 2) {
          rlx_node pos = rlx_input(g, "pos", RLX_I32, 1, pd);
          y[0] = rlx_rope(g, q, pos, &d);
          y[1] = rlx_rope(g, chain ? y[0] : k, pos, &d);
        } else {
          rlx_node c = rlx_input(g, "cos", t, 2, td), sn = rlx_input(g, "sin", t, 2, td);
          y[0] = rlx_rope_cos_sin(g, q, c, sn, &d);
          y[1] = rlx_rope_cos_sin(g, chain ? y[0] : k, c, sn, &d);
        }
        rlx_graph_set_outputs(g, 2, y);
        int32_t pos[7];
        for (int i = 0; i < S; i++) pos[i] = 3 * i + 100;
        float *cs = malloc(sizeof(float) * (size_t)(S * d.n_rot)), *sn = cs + S * d.n_rot / 2;
        for (int i = 0; i < S; i++)
          for (int j = 0; j < d.n_rot / 2; j++) {
            const double th = pos[i] * pow(10000.0, -2.0 * j / d.n_rot);
            cs[i * d.n_rot / 2 + j] = (float)cos(th), sn[i * d.n_rot / 2 + j] = (float)sin(th);
          }
        bound_leaf l[4] = {{"q", 0, random_tensor(t, S * Hq * D, 1.0), (size_t)(S * Hq * D) * dtype_size(t)},
                           {"k", 0, random_tensor(t, S * Hk * D, 1.0), (size_t)(S * Hk * D) * dtype_size(t)},
                           {form < 2 ? "pos" : "cos", 0, form < 2 ? (void *)pos : (void *)cs,
                            form < 2 ? sizeof(int32_t) * (size_t)S : sizeof(float) * (size_t)(S * d.n_rot / 2)},
                           {"sin", 0, sn, sizeof(float) * (size_t)(S * d.n_rot / 2)}};
        bound_leaf use[4];
        int nl = 0;
        for (int i = 0; i < 4; i++)
          if (!(chain && i == 1) && !(form < 2 && i == 3)) use[nl++] = l[i];
        char what[96];
        snprintf(what, sizeof what, "rope join form %d S=%d%s", form, S, chain ? " (rope of a rope)" : "");
        for (int o = 0; o < 2; o++) compare_replay(what, g, use, nl, o, t, 0.0);
        const int64_t launches = device_launches(g);
        CHECK(launches == (chain ? 2 : 1), "%s: %lld launches", what, (long long)launches);
        free(l[0].data), free(l[1].data), free(cs);
        rlx_graph_free(g);
      }
}

/* Rope by tables of q and k where each is a product at decode rows (q, k
 * and v of one x, a layer's projections): the products' GEMV launch
 * writes q and k rotated, and the ropes launch nothing. Against the CPU,
 * replay == op by op, the same bytes as with the ropes launched
 * (RLX_CUDA_GEMV_ROPE=0), one launch in all. Pairs (2i, 2i+1), NEOX pairs
 * and a pass-through (n_rot < D); weights as a 16-bit GGUF's
 * (DequantMatMul) or F32 params read transposed (MatMul); B 1 and 2
 * (batched tables). With k's product also an output, k's rope launches. */
static void test_gemv_rope(void) {
  static const struct { rlx_dtype w, x; } kinds[] = {{RLX_BF16, RLX_F32}, {RLX_F16, RLX_F16}, {RLX_F32, RLX_F32}};
  for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
    for (int form = 0; form < 3; form++) /* normal, NEOX, normal with a pass-through */
      for (int shape = 0; shape < 3; shape++) /* B 1 S 1; B 1 S 3; B 2 S 3 (batched tables) */
        for (int k_out = 0; k_out < 2; k_out++) {
          const rlx_dtype wt = kinds[ki].w, t = kinds[ki].x;
          const int64_t B = shape == 2 ? 2 : 1, S = shape ? 3 : 1, K = 264, D = 64, H[3] = {4, 2, 2};
          rlx_rope_desc d = {D, form == 2 ? 48 : D, form == 1 ? RLX_ROPE_NEOX : RLX_ROPE_NORMAL, 10000.0, 1.0};
          const int64_t half = d.n_rot / 2, rows = (shape == 2 ? B : 1) * S;
          rlx_graph *g = rlx_graph_new("gemv_rope");
          int64_t xd[3] = {B, S, K}, td[3] = {B, S, half}, perm[2] = {1, 0};
          rlx_node x = rlx_input(g, "x", t, 3, xd), p[3];
          rlx_node c = rlx_input(g, "cos", t, shape == 2 ? 3 : 2, shape == 2 ? td : td + 1);
          rlx_node sn = rlx_input(g, "sin", t, shape == 2 ? 3 : 2, shape == 2 ? td : td + 1);
          static const char *names[3] = {"wq", "wk", "wv"};
          for (int i = 0; i < 3; i++) {
            int64_t wd[2] = {H[i] * D, K};
            rlx_node w = rlx_param(g, names[i], wt, 2, wd);
            p[i] = wt == RLX_F32 ? rlx_matmul(g, x, rlx_transpose(g, w, 2, perm)) : rlx_dequant_matmul(g, x, w);
          }
          rlx_node y[4] = {rlx_rope_cos_sin(g, p[0], c, sn, &d), rlx_rope_cos_sin(g, p[1], c, sn, &d), p[2], p[1]};
          rlx_graph_set_outputs(g, 3 + k_out, y);
          const size_t table_bytes = (size_t)(rows * half) * dtype_size(t);
          uint8_t *tab = malloc(2 * table_bytes); /* cos, then sin, as t */
          for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < half; j++) {
              const double th = (double)(40 + 7 * r) * pow(10000.0, -2.0 * (double)j / (double)d.n_rot);
              store_as(t, tab, r * half + j, cos(th)), store_as(t, tab, (rows + r) * half + j, sin(th));
            }
          bound_leaf l[6] = {{"x", 0, random_tensor(t, B * S * K, 1.0), (size_t)(B * S * K) * dtype_size(t)},
                             {"cos", 0, tab, table_bytes},
                             {"sin", 0, tab + table_bytes, table_bytes}};
          for (int i = 0; i < 3; i++)
            l[3 + i] = (bound_leaf){names[i], 1, random_tensor(wt, H[i] * D * K, 0.1), (size_t)(H[i] * D * K) * dtype_size(wt)};
          char what[112];
          snprintf(what, sizeof what, "gemv rope %s w, %s x, form %d, B=%lld S=%lld%s", rlx_dtype_name(wt),
                   rlx_dtype_name(t), form, (long long)B, (long long)S, k_out ? " (k's product an output)" : "");
          for (int o = 0; o < 3 + k_out; o++) compare_replay(what, g, l, 6, o, t, 0.0);
          const int64_t fused = device_launches(g);
          setenv("RLX_CUDA_GEMV_ROPE", "0", 1);
          const int64_t apart = device_launches(g);
          for (int o = 0; o < 3 + k_out; o++) {
            size_t b1 = 0, b2 = 0;
            unsetenv("RLX_CUDA_GEMV_ROPE");
            void *on = run_graph(g, RLX_DEVICE_CUDA, l, 6, o, &b1);
            setenv("RLX_CUDA_GEMV_ROPE", "0", 1);
            void *off = run_graph(g, RLX_DEVICE_CUDA, l, 6, o, &b2);
            CHECK(on && off && b1 == b2 && !memcmp(on, off, b1), "%s output %d: the bytes of the ropes launched", what, o);
            free(on), free(off);
          }
          unsetenv("RLX_CUDA_GEMV_ROPE");
          /* the products' launch, and k's rope where k's product is also an output */
          CHECK(fused == 1 + k_out && apart >= 2, "%s: %lld launches (apart: %lld)", what, (long long)fused,
                (long long)apart);
          for (int i = 0; i < 6; i++)
            if (i != 2) free(l[i].data);
          rlx_graph_free(g);
        }
}

/* RmsNorm (beta zeros, as the LLM graphs give it) of decode rows read by
 * products: the products' GEMV launch computes the norm, and the norm
 * launches nothing. q, k and v of one x (three segments), and a gate and
 * up pair (glu); 16-bit GGUF weights (DequantMatMul, F32 or 16-bit x)
 * and F32 params read transposed (MatMul). Against the CPU, replay == op
 * by op, within the tolerance of the norm launched (RLX_CUDA_GEMV_NORM=0;
 * the sums run in another order), one launch fewer. With the norm's
 * output also an output (the launch writes it too), with a beta of ones
 * (not taken: the same launches as with the switch off), and with the
 * norm's input computed (x + x, which dies at the norm: the planner may
 * give its bytes to a product's output, which the launch must then not
 * write while it reads them; results only). */
static void test_gemv_norm(void) {
  static const struct { rlx_dtype w, x; } kinds[] = {{RLX_BF16, RLX_F32}, {RLX_F16, RLX_F16}, {RLX_F32, RLX_F32}};
  for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
    for (int glu = 0; glu < 2; glu++)
      for (int M = 1; M <= 3; M += 2)
        for (int variant = 0; variant < 4; variant++) { /* plain; norm an output; beta of ones; x computed */
          const rlx_dtype wt = kinds[ki].w, t = kinds[ki].x;
          const int64_t K = 1032, N[3] = {variant == 3 ? K : 256, 128, 136};
          rlx_graph *g = rlx_graph_new("gemv_norm");
          int64_t xd[2] = {M, K}, vd[1] = {K}, perm[2] = {1, 0};
          void *betav = calloc((size_t)K, dtype_size(t));
          if (variant == 2)
            for (int64_t i = 0; i < K; i++) store_as(t, betav, i, 1.0);
          rlx_node x = rlx_input(g, "x", t, 2, xd), gamma = rlx_param(g, "gamma", t, 1, vd);
          rlx_node h = rlx_rms_norm(g, variant == 3 ? rlx_add(g, x, x) : x, gamma, rlx_constant(g, t, 1, vd, betav), -1, 1e-5);
          free(betav);
          static const char *names[3] = {"w0", "w1", "w2"};
          rlx_node p[3];
          const int np = glu ? 2 : 3;
          for (int i = 0; i < np; i++) {
            int64_t wd[2] = {glu ? (variant == 3 ? K : 264) : N[i], K};
            rlx_node w = rlx_param(g, names[i], wt, 2, wd);
            p[i] = wt == RLX_F32 ? rlx_matmul(g, h, rlx_transpose(g, w, 2, perm)) : rlx_dequant_matmul(g, h, w);
          }
          rlx_node y[4];
          int n_out = 0;
          if (glu) y[n_out++] = rlx_mul(g, rlx_activation(g, RLX_ACT_SILU, p[0]), p[1]);
          else
            for (int i = 0; i < 3; i++) y[n_out++] = p[i];
          if (variant == 1) y[n_out++] = h;
          rlx_graph_set_outputs(g, n_out, y);
          bound_leaf l[5] = {{"x", 0, random_tensor(t, M * K, 1.0), (size_t)(M * K) * dtype_size(t)},
                             {"gamma", 1, random_tensor(t, K, 1.0), (size_t)K * dtype_size(t)}};
          for (int i = 0; i < np; i++) {
            const int64_t rows = glu ? (variant == 3 ? K : 264) : N[i];
            l[2 + i] = (bound_leaf){names[i], 1, random_tensor(wt, rows * K, 0.1), (size_t)(rows * K) * dtype_size(wt)};
          }
          char what[112];
          snprintf(what, sizeof what, "gemv norm %s w, %s x, %s, M=%d%s", rlx_dtype_name(wt), rlx_dtype_name(t),
                   glu ? "glu" : "q|k|v", M,
                   variant == 1 ? " (norm an output)" : variant == 2 ? " (beta ones)" : variant == 3 ? " (x computed)" : "");
          for (int o = 0; o < n_out; o++) compare_replay(what, g, l, 2 + np, o, t, 0.0);
          const int64_t fused = device_launches(g);
          setenv("RLX_CUDA_GEMV_NORM", "0", 1);
          const int64_t apart = device_launches(g);
          for (int o = 0; o < n_out; o++) {
            size_t b1 = 0, b2 = 0;
            unsetenv("RLX_CUDA_GEMV_NORM");
            void *on = run_graph(g, RLX_DEVICE_CUDA, l, 2 + np, o, &b1);
            setenv("RLX_CUDA_GEMV_NORM", "0", 1);
            void *off = run_graph(g, RLX_DEVICE_CUDA, l, 2 + np, o, &b2);
            double atol, rtol;
            tolerance(t, &atol, &rtol);
            const double r = on && off && b1 == b2 ? worst_ratio(t, on, off, (int64_t)(b1 / dtype_size(t)), atol, rtol) : INFINITY;
            CHECK(r <= 1.0, "%s output %d: worst difference %.3g of tolerance from the norm launched", what, o, r);
            free(on), free(off);
          }
          unsetenv("RLX_CUDA_GEMV_NORM");
          CHECK(fused > 0 && (variant == 3 || fused == apart - (variant == 2 ? 0 : 1)), "%s: %lld launches (norm launched: %lld)",
                what, (long long)fused, (long long)apart);
          for (int i = 0; i < 2 + np; i++) free(l[i].data);
          rlx_graph_free(g);
        }
}

/* UpdateSlice(cache, Cast(x), start): a new K or V row into a cache of
 * another float type. The copy converts (no Cast launch): the CPU's bytes
 * exactly, replay == op by op, and one launch fewer than with the Cast
 * also an output (then it runs). Into the param itself (Assign, in place)
 * and into a new tensor. */
static void test_cast_update(void) {
  static const struct { rlx_dtype x, cache; } kinds[] = {{RLX_F32, RLX_BF16}, {RLX_F32, RLX_F16}, {RLX_F16, RLX_F32}};
  for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
    for (int assign = 0; assign < 2; assign++) {
      const rlx_dtype xt = kinds[ki].x, ct = kinds[ki].cache;
      const int64_t T = 64, E = 40, S = 3;
      int64_t launches[2] = {0, 0};
      for (int cast_out = 0; cast_out < 2; cast_out++) {
        rlx_graph *g = rlx_graph_new("cast_update");
        int64_t cd[3] = {1, T, E}, xd[3] = {1, S, E};
        rlx_node cache = rlx_param(g, "cache", ct, 3, cd), x = rlx_input(g, "x", xt, 3, xd);
        rlx_node c = rlx_cast(g, x, ct), u = rlx_update_slice(g, cache, c, rlx_input(g, "start", RLX_I32, 0, NULL), 1);
        rlx_node outs[3] = {u, c, 0};
        int n_out = 1 + cast_out;
        if (assign) outs[n_out++] = rlx_assign(g, cache, u);
        rlx_graph_set_outputs(g, n_out, outs);
        int32_t start = 37;
        bound_leaf l[3] = {{"cache", 1, random_tensor(ct, T * E, 1.0), (size_t)(T * E) * dtype_size(ct)},
                           {"x", 0, random_tensor(xt, S * E, 3.0), (size_t)(S * E) * dtype_size(xt)},
                           {"start", 0, &start, sizeof start}};
        char what[96];
        snprintf(what, sizeof what, "cast update %s -> %s%s%s", rlx_dtype_name(xt), rlx_dtype_name(ct),
                 assign ? " (assign)" : "", cast_out ? " (cast an output)" : "");
        size_t cb = 0, gb = 0;
        void *cpu = run_graph(g, RLX_DEVICE_CPU, l, 3, 0, &cb), *gpu = run_graph(g, RLX_DEVICE_CUDA, l, 3, 0, &gb);
        CHECK(cpu && gpu && cb == gb && !memcmp(cpu, gpu, cb), "%s: the CPU's bytes", what);
        compare_replay(what, g, l, 3, 0, ct, 0.0);
        launches[cast_out] = device_launches(g);
        free(cpu), free(gpu), free(l[0].data), free(l[1].data);
        rlx_graph_free(g);
      }
      CHECK(launches[0] > 0 && launches[0] == launches[1] - 1, "cast update %s -> %s%s: %lld launches (cast run: %lld)",
            rlx_dtype_name(xt), rlx_dtype_name(ct), assign ? " (assign)" : "", (long long)launches[0],
            (long long)launches[1]);
    }
}

/* A K row and a V row into their caches in place (UpdateSlice + Assign, a
 * decode step's cache writes), by one start or two: one launch for both
 * (the second copy joins the first's) with the CPU's bytes, replay == op
 * by op. Not joined: the V update reading the K cache just written. A
 * start out of range in the joined launch is reported for its own node. */
static void test_update_join(void) {
  enum { SAME_START, TWO_STARTS, READS_FIRST, BAD_SECOND, FORMS };
  static const char *const names[FORMS] = {"one start", "two starts", "second reads the first", "second start bad"};
  for (int form = 0; form < FORMS; form++) {
    const int64_t T = 48, E = 24, S = 2;
    const rlx_dtype t = RLX_BF16;
    rlx_graph *g = rlx_graph_new("update_join");
    int64_t cd[3] = {1, T, E}, xd[3] = {1, S, E};
    rlx_node kc = rlx_param(g, "kc", t, 3, cd), vc = rlx_param(g, "vc", t, 3, cd);
    rlx_node start = rlx_input(g, "start", RLX_I32, 0, NULL);
    rlx_node start2 = form == SAME_START || form == READS_FIRST ? start : rlx_input(g, "start2", RLX_I32, 0, NULL);
    rlx_node uk = rlx_update_slice(g, kc, rlx_input(g, "k", t, 3, xd), start, 1);
    rlx_node vrow = form == READS_FIRST ? rlx_narrow(g, uk, 1, 0, S) : rlx_input(g, "v", t, 3, xd);
    rlx_node uv = rlx_update_slice(g, vc, vrow, start2, 1);
    rlx_node outs[4] = {uk, uv, rlx_assign(g, kc, uk), rlx_assign(g, vc, uv)};
    rlx_graph_set_outputs(g, 4, outs);
    int32_t s0 = 37, s1 = form == BAD_SECOND ? (int32_t)T : 5;
    bound_leaf l[6] = {{"kc", 1, random_tensor(t, T * E, 1.0), (size_t)(T * E) * dtype_size(t)},
                       {"vc", 1, random_tensor(t, T * E, 1.0), (size_t)(T * E) * dtype_size(t)},
                       {"k", 0, random_tensor(t, S * E, 3.0), (size_t)(S * E) * dtype_size(t)},
                       {"start", 0, &s0, sizeof s0}};
    int nl = 4;
    if (form != READS_FIRST) l[nl++] = (bound_leaf){"v", 0, random_tensor(t, S * E, 3.0), (size_t)(S * E) * dtype_size(t)};
    if (start2 != start) l[nl++] = (bound_leaf){"start2", 0, &s1, sizeof s1};
    char what[96];
    snprintf(what, sizeof what, "update join, %s", names[form]);
    if (form == BAD_SECOND) {
      size_t gb = 0;
      void *gpu = run_graph(g, RLX_DEVICE_CUDA, l, nl, 0, &gb);
      char want[64]; /* the second's start (the first's is in range) */
      snprintf(want, sizeof want, "): start %d out of range", (int)T);
      CHECK(!gpu && strstr(rlx_last_error(), "UpdateSlice (node") && strstr(rlx_last_error(), want),
            "%s: fails naming the second update: %s", what, rlx_last_error());
      free(gpu);
    } else {
      for (int o = 0; o < 2; o++) {
        size_t cb = 0, gb = 0;
        void *cpu = run_graph(g, RLX_DEVICE_CPU, l, nl, o, &cb), *gpu = run_graph(g, RLX_DEVICE_CUDA, l, nl, o, &gb);
        CHECK(cpu && gpu && cb == gb && !memcmp(cpu, gpu, cb), "%s output %d: the CPU's bytes", what, o);
        free(cpu), free(gpu);
        compare_replay(what, g, l, nl, o, t, 0.0);
      }
      const int64_t launches = device_launches(g);
      CHECK(form == READS_FIRST ? launches >= 2 : launches == 1, "%s: %lld launches", what, (long long)launches);
    }
    for (int i = 0; i < nl; i++)
      if (strncmp(l[i].name, "start", 5)) free(l[i].data);
    rlx_graph_free(g);
  }
}

/* Random weights [N, K] packed by the CPU's Quantize into scheme q (the
 * malloc'ed bytes, *bytes of them) and, in *dequant, those packed weights
 * as floats (the CPU's Dequantize). NULL on failure (checked). */
static void *packed_weights(rlx_dtype q, int64_t N, int64_t K, size_t *bytes, float **dequant) {
  int64_t wd[2] = {N, K};
  rlx_graph *qg = rlx_graph_new("quantize");
  rlx_node qw = rlx_quantize(qg, rlx_input(qg, "w", RLX_F32, 2, wd), q);
  rlx_node outs[2] = {qw, rlx_dequantize(qg, qw)};
  rlx_graph_set_outputs(qg, 2, outs);
  float *wf = random_tensor(RLX_F32, N * K, 1.0);
  bound_leaf wl = {"w", 0, wf, sizeof(float) * (size_t)(N * K)};
  size_t dbytes = 0;
  void *packed = run_graph(qg, RLX_DEVICE_CPU, &wl, 1, 0, bytes);
  *dequant = run_graph(qg, RLX_DEVICE_CPU, &wl, 1, 1, &dbytes);
  CHECK(packed && *dequant, "quantize and dequantize %s", rlx_dtype_name(q));
  free(wf);
  rlx_graph_free(qg);
  if (!packed || !*dequant) {
    free(packed), free(*dequant);
    *dequant = NULL;
    return NULL;
  }
  return packed;
}

/* x's levels as the integer decode path makes them (qdot_q8_0's rule:
 * per 32 elements d = amax / 127, levels roundf(x / d)), as doubles. */
static void quantize_levels(const double *x, double *xq, int64_t n) {
  for (int64_t b = 0; b < n; b += 32) {
    float amax = 0.f;
    for (int j = 0; j < 32; j++) amax = fabsf((float)x[b + j]) > amax ? fabsf((float)x[b + j]) : amax;
    const float d = amax / 127, id = d != 0.f ? 1.f / d : 0.f;
    for (int j = 0; j < 32; j++) {
      float v = (float)x[b + j] * id;
      v = v > 127.f ? 127.f : v < -127.f ? -127.f : v;
      xq[b + j] = (double)d * roundf(v);
    }
  }
}

/* Rows of a block table (a GGUF embedding) gathered on the device, then
 * dequantized: the same floats as the CPU's, exactly. */
static void test_block_gather(void) {
  static const rlx_dtype schemes[] = {RLX_Q8_0, RLX_Q4_K, RLX_Q6_K};
  const int64_t V = 40, E = 512;
  for (size_t si = 0; si < sizeof schemes / sizeof *schemes; si++) {
    size_t bytes = 0;
    float *dq = NULL;
    void *packed = packed_weights(schemes[si], V, E, &bytes, &dq);
    if (!packed) continue;
    rlx_graph *g = rlx_graph_new("block_gather");
    int64_t td[2] = {V, E}, id[1] = {5};
    rlx_node rows = rlx_gather(g, rlx_param(g, "table", schemes[si], 2, td), rlx_input(g, "idx", RLX_I32, 1, id), 0);
    rlx_node y = rlx_dequantize(g, rows);
    rlx_graph_set_outputs(g, 1, &y);
    int32_t idx[5] = {3, 39, 0, 3, 17};
    bound_leaf l[2] = {{"table", 1, packed, bytes}, {"idx", 0, idx, sizeof idx}};
    size_t cb = 0, gb = 0;
    void *cpu = run_graph(g, RLX_DEVICE_CPU, l, 2, 0, &cb), *gpu = run_graph(g, RLX_DEVICE_CUDA, l, 2, 0, &gb);
    CHECK(cpu && gpu && cb == gb && cb == 5 * E * sizeof(float) && !memcmp(cpu, gpu, cb),
          "gather of %s rows, dequantized: the CPU's floats", rlx_dtype_name(schemes[si]));
    rlx_session *sess = NULL;
    rlx_options o = {RLX_DEVICE_CUDA, 0, 0};
    rlx_session_stats st = {0};
    CHECK(rlx_compile(g, &o, &sess) == RLX_OK && rlx_session_get_stats(sess, &st) == RLX_OK && st.fallback_nodes == 0,
          "gather of %s rows: on the device (%lld nodes on the CPU)", rlx_dtype_name(schemes[si]),
          (long long)st.fallback_nodes);
    rlx_session_free(sess);
    free(cpu), free(gpu), free(packed), free(dq);
    rlx_graph_free(g);
  }
}

/* The default small-M DequantMatMul (x quantized to 8 bits per 32, integer
 * dot products) against the product of the dequantized weights (the CPU's
 * Dequantize) with those 8-bit levels of x, in double: the same function,
 * so only the F32 sums and the output rounding differ. Two products of one
 * x (one launch of two segments), a residual add in the epilogue at odd
 * M. Ragged shapes: N
 * not a multiple of the 4 rows of a block, rows 2-byte aligned (18, 34,
 * 210-byte blocks), chunks of the 2048-weight stream cut short. And the
 * quantization's own error against the exact product stays inside its a
 * priori bound sum_k |w_k| d_k / 2 (so the levels are what they claim). */
static void test_dequant_matmul_int8(void) {
  static const rlx_dtype schemes[] = {RLX_Q4_0, RLX_Q4_1, RLX_Q8_0, RLX_Q4_K, RLX_Q6_K};
  static const rlx_dtype types[] = {RLX_F32, RLX_BF16, RLX_F16};
  static const int Ms[] = {1, 2, 3, 8};
  setenv("RLX_QMATMUL_REF", "0", 1);
  for (size_t si = 0; si < sizeof schemes / sizeof *schemes; si++) {
    const rlx_dtype q = schemes[si];
    const int64_t N = 37, K = q == RLX_Q4_K || q == RLX_Q6_K ? 256 * 9 : 32 * 67;
    int64_t wd[2] = {N, K};
    size_t qbytes = 0;
    float *wdq = NULL;
    void *packed = packed_weights(q, N, K, &qbytes, &wdq);
    for (size_t ti = 0; packed && wdq && ti < sizeof types / sizeof *types; ti++) {
      const rlx_dtype t = types[ti];
      for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
        const int M = Ms[mi];
        /* y = x w^T (+ r at odd M: the add is computed in the product's
         * epilogue), then x w2^T (w2: the same bytes, another param): the
         * second product joins the first's launch as a second segment */
        rlx_graph *g = rlx_graph_new("dequant_matmul_int8");
        int64_t xd[2] = {M, K}, yd[2] = {M, N};
        const int resid = M % 2;
        rlx_node xn = rlx_input(g, "x", t, 2, xd);
        rlx_node y = rlx_dequant_matmul(g, xn, rlx_param(g, "w", q, 2, wd));
        if (resid) y = rlx_add(g, y, rlx_input(g, "r", t, 2, yd));
        rlx_node outs2[2] = {y, rlx_dequant_matmul(g, xn, rlx_param(g, "w2", q, 2, wd))};
        rlx_graph_set_outputs(g, 2, outs2);
        void *xv = random_tensor(t, M * K, 1.0), *rv = random_tensor(t, M * N, 1.0);
        bound_leaf l[4] = {{"x", 0, xv, (size_t)(M * K) * dtype_size(t)},
                           {"w", 1, packed, qbytes},
                           {"w2", 1, packed, qbytes},
                           {"r", 0, rv, (size_t)(M * N) * dtype_size(t)}};
        size_t gb = 0, gb2 = 0;
        void *got = run_graph(g, RLX_DEVICE_CUDA, l, resid ? 4 : 3, 0, &gb);
        void *got2 = run_graph(g, RLX_DEVICE_CUDA, l, resid ? 4 : 3, 1, &gb2);
        CHECK(got && got2 && gb == (size_t)(M * N) * dtype_size(t) && gb2 == gb, "dequant_matmul int8 %s %s M=%d runs",
              rlx_dtype_name(q), rlx_dtype_name(t), M);
        double *x = malloc(sizeof(double) * (size_t)(M * K)), *xq = malloc(sizeof(double) * (size_t)(M * K));
        for (int64_t i = 0; i < M * K; i++) x[i] = rlx_value_as_f64(t, xv, i);
        quantize_levels(x, xq, M * K);
        double worst = 0, worst_q = 0;
        for (int m = 0; got && got2 && m < M; m++)
          for (int64_t nn = 0; nn < N; nn++) {
            double ref = 0, mag = 0, exact = 0, bound = 0;
            for (int64_t k = 0; k < K; k++) {
              const double wk = wdq[nn * K + k];
              ref += wk * xq[m * K + k], mag += fabs(wk * xq[m * K + k]), exact += wk * x[m * K + k];
            }
            for (int64_t b = 0; b < K; b += 32) {
              double amax = 0, sw = 0;
              for (int j = 0; j < 32; j++) {
                amax = fabs(x[m * K + b + j]) > amax ? fabs(x[m * K + b + j]) : amax;
                sw += fabs(wdq[nn * K + b + j]);
              }
              bound += sw * amax / 127 / 2;
            }
            /* F32 sums of K terms, then one rounding to t */
            const double rr = resid ? rlx_value_as_f64(t, rv, m * N + nn) : 0.0;
            const double ulp = t == RLX_F32 ? 1e-6 : t == RLX_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
            for (int o = 0; got && got2 && o < 2; o++) {
              const double g = rlx_value_as_f64(t, o ? got2 : got, m * N + nn), want = ref + (o ? 0.0 : rr);
              const double tol = 1e-5 * mag + ulp * (fabs(want) + fabs(ref)) + 1e-6;
              const double r = fabs(g - want) / tol;
              worst = isnan(g) || r > worst ? (isnan(g) ? INFINITY : r) : worst;
            }
            const double rq = fabs(ref - exact) / (bound * (1 + 1e-6) + 1e-12);
            worst_q = rq > worst_q ? rq : worst_q;
          }
        CHECK(worst <= 1.0, "dequant_matmul int8 %s %s M=%d: worst error %.3g of tolerance", rlx_dtype_name(q),
              rlx_dtype_name(t), M, worst);
        CHECK(worst_q <= 1.0, "dequant_matmul int8 %s %s M=%d: quantization error %.3g of its bound", rlx_dtype_name(q),
              rlx_dtype_name(t), M, worst_q);
        free(x), free(xq), free(got), free(got2), free(xv), free(rv);
        rlx_graph_free(g);
      }
    }
    free(packed), free(wdq);
  }
  setenv("RLX_QMATMUL_REF", "1", 1);
}

/* An RmsNorm read only by two DequantMatMuls at decode rows: the products'
 * x quantization normalizes the rows itself (no norm launch). Against the
 * exact products of the exact norm in double, within the a-priori bound:
 * 8-bit levels (sum |w| d / 2 per 32) plus the norm's rounding to t
 * (2 ulp of t per element, F32 sums in another order) and the output's. */
static void norm_dequant_matmul_k(int64_t K) {
  static const rlx_dtype types[] = {RLX_F32, RLX_BF16};
  const rlx_dtype q = RLX_Q4_K;
  const int64_t N = 45;
  int64_t wd[2] = {N, K}, ev[1] = {K};
  size_t qbytes = 0;
  float *wdq = NULL;
  void *packed = packed_weights(q, N, K, &qbytes, &wdq);
  setenv("RLX_QMATMUL_REF", "0", 1);
  for (size_t ti = 0; packed && wdq && ti < sizeof types / sizeof *types; ti++)
    for (int M = 1; M <= 3; M += 2) {
      const rlx_dtype t = types[ti];
      const double eps = 1e-5, ulp = t == RLX_F32 ? ldexp(1.0, -23) : ldexp(1.0, -8);
      rlx_graph *g = rlx_graph_new("norm_dequant_matmul");
      int64_t xd[2] = {M, K};
      rlx_node h = rlx_rms_norm(g, rlx_input(g, "x", t, 2, xd), rlx_param(g, "gamma", t, 1, ev),
                                rlx_param(g, "beta", t, 1, ev), -1, eps);
      rlx_node ys[2] = {rlx_dequant_matmul(g, h, rlx_param(g, "w", q, 2, wd)),
                        rlx_dequant_matmul(g, h, rlx_param(g, "w2", q, 2, wd))};
      rlx_graph_set_outputs(g, 2, ys);
      void *xv = random_tensor(t, M * K, 1.0), *gv = random_tensor(t, K, 1.0), *bv = random_tensor(t, K, 0.1);
      bound_leaf l[5] = {{"x", 0, xv, (size_t)(M * K) * dtype_size(t)}, {"gamma", 1, gv, (size_t)K * dtype_size(t)},
                         {"beta", 1, bv, (size_t)K * dtype_size(t)}, {"w", 1, packed, qbytes}, {"w2", 1, packed, qbytes}};
      double *hx = malloc(sizeof(double) * (size_t)(M * K));
      for (int m = 0; m < M; m++) {
        double ss = 0;
        for (int64_t k = 0; k < K; k++) ss += rlx_value_as_f64(t, xv, m * K + k) * rlx_value_as_f64(t, xv, m * K + k);
        const double r = 1 / sqrt(ss / K + eps);
        for (int64_t k = 0; k < K; k++)
          hx[m * K + k] = rlx_value_as_f64(t, xv, m * K + k) * r * rlx_value_as_f64(t, gv, k) + rlx_value_as_f64(t, bv, k);
      }
      for (int o = 0; o < 2; o++) {
        size_t gb = 0;
        void *got = run_graph(g, RLX_DEVICE_CUDA, l, 5, o, &gb);
        double worst = got ? 0 : INFINITY;
        for (int m = 0; got && m < M; m++)
          for (int64_t nn = 0; nn < N; nn++) {
            double y = 0, bound = 0;
            for (int64_t b = 0; b < K; b += 32) {
              double amax = 0;
              for (int j = 0; j < 32; j++) amax = fabs(hx[m * K + b + j]) > amax ? fabs(hx[m * K + b + j]) : amax;
              for (int j = 0; j < 32; j++) {
                const double w = wdq[nn * K + b + j], hv = hx[m * K + b + j];
                y += w * hv;
                bound += fabs(w) * ((amax * (1 + 2 * ulp)) / 127 / 2 + 2 * ulp * fabs(hv));
              }
            }
            const double gy = rlx_value_as_f64(t, got, m * N + nn);
            const double r = fabs(gy - y) / (bound * 1.01 + ulp * fabs(y) + 1e-6);
            worst = isnan(gy) || r > worst ? (isnan(gy) ? INFINITY : r) : worst;
          }
        CHECK(worst <= 1.0, "rms_norm -> dequant_matmul %s K=%lld M=%d output %d: worst error %.3g of the bound",
              rlx_dtype_name(t), (long long)K, M, o, worst);
        free(got);
      }
      free(hx), free(xv), free(gv), free(bv);
      rlx_graph_free(g);
    }
  setenv("RLX_QMATMUL_REF", "1", 1);
  free(packed), free(wdq);
}
/* K 8448: a row of three chunks of the kernel's 1024 x 4 elements, the last one partial */
static void test_dequant_matmul_norm(void) {
  norm_dequant_matmul_k(512);
  norm_dequant_matmul_k(8448);
}

/* ---------------------------------------------------------------- a decoder block */

/* A Llama-style block: rms_norm, q/k/v projections, rope, causal GQA
 * attention, output projection + residual, rms_norm, gate|up projection,
 * swiglu, down projection + residual. */
static rlx_graph *decoder_block(rlx_dtype t, int B, int S, int E, int H, int Hkv, int F) {
  const int D = E / H;
  rlx_graph *g = rlx_graph_new("block");
  int64_t xd[3] = {B, S, E}, pd[1] = {S}, ev[1] = {E};
  int64_t wq[2] = {E, E}, wkv[2] = {E, Hkv * D}, wgu[2] = {E, 2 * F}, wdn[2] = {F, E};
  rlx_node x = rlx_input(g, "x", t, 3, xd), pos = rlx_input(g, "pos", RLX_I32, 1, pd);
  rlx_node g1 = rlx_param(g, "g1", t, 1, ev), g2 = rlx_param(g, "g2", t, 1, ev), zero = rlx_param(g, "zero", t, 1, ev);
  rlx_node h = rlx_rms_norm(g, x, g1, zero, -1, 1e-5);
  rlx_node q = rlx_matmul(g, h, rlx_param(g, "wq", t, 2, wq));
  rlx_node k = rlx_matmul(g, h, rlx_param(g, "wk", t, 2, wkv));
  rlx_node v = rlx_matmul(g, h, rlx_param(g, "wv", t, 2, wkv));
  int64_t q4[4] = {B, S, H, D}, k4[4] = {B, S, Hkv, D};
  q = rlx_reshape(g, q, 4, q4), k = rlx_reshape(g, k, 4, k4), v = rlx_reshape(g, v, 4, k4);
  rlx_rope_desc rd = {D, D, RLX_ROPE_NEOX, 10000.0, 1.0};
  q = rlx_rope(g, q, pos, &rd), k = rlx_rope(g, k, pos, &rd);
  rlx_attention_desc ad = {H, Hkv, D, RLX_MASK_CAUSAL, 0, 0, 0, RLX_LAYOUT_BSHD};
  rlx_node a = rlx_reshape(g, rlx_attention(g, q, k, v, -1, &ad), 3, xd);
  rlx_node o = rlx_matmul(g, a, rlx_param(g, "wo", t, 2, wq));
  rlx_node x1 = rlx_add(g, x, o);
  rlx_node h2 = rlx_fused_residual_rms_norm(g, x, o, -1, g2, zero, 1e-5);
  rlx_node gu = rlx_matmul(g, h2, rlx_param(g, "wgu", t, 2, wgu));
  rlx_node down = rlx_matmul(g, rlx_fused_swiglu(g, gu, -1), rlx_param(g, "wd", t, 2, wdn));
  rlx_node y = rlx_add(g, x1, down);
  rlx_graph_set_outputs(g, 1, &y);
  return g;
}

typedef struct {
  bound_leaf l[11];
} block_leaves;

static void block_data(block_leaves *b, rlx_dtype t, int B, int S, int E, int H, int Hkv, int F) {
  const int D = E / H;
  int32_t *pos = malloc(sizeof(int32_t) * (size_t)S);
  for (int i = 0; i < S; i++) pos[i] = 7 + i;
  const int64_t kv = (int64_t)(Hkv * D);
  float *zero = calloc((size_t)E, sizeof(double));
  const struct { const char *n; int p; int64_t count; double scale; } spec[] = {
      {"x", 0, (int64_t)B * S * E, 1.0}, {"g1", 1, E, 1.0}, {"g2", 1, E, 1.0}, {"wq", 1, (int64_t)E * E, 0.05},
      {"wk", 1, E * kv, 0.05}, {"wv", 1, E * kv, 0.05}, {"wo", 1, (int64_t)E * E, 0.05},
      {"wgu", 1, (int64_t)E * 2 * F, 0.05}, {"wd", 1, (int64_t)F * E, 0.05}};
  for (int i = 0; i < 9; i++)
    b->l[i] = (bound_leaf){spec[i].n, spec[i].p, random_tensor(t, spec[i].count, spec[i].scale),
                           (size_t)spec[i].count * dtype_size(t)};
  b->l[9] = (bound_leaf){"pos", 0, pos, sizeof(int32_t) * (size_t)S};
  b->l[10] = (bound_leaf){"zero", 1, zero, (size_t)E * dtype_size(t)};
}

/* Prefill-shaped (cuBLASLt, tensor-core attention) and decode-shaped
 * (B * S <= 8 rows: GEMV kernels, split-key attention). */
static void test_decoder_block(void) {
  static const rlx_dtype types[] = {RLX_F32, RLX_BF16};
  for (size_t ti = 0; ti < 4; ti++) {
    rlx_dtype t = types[ti % 2];
    const int B = ti < 2 ? 2 : 1, S = ti < 2 ? 70 : 3, E = 256, H = 4, Hkv = 2, F = 384;
    rlx_graph *g = decoder_block(t, B, S, E, H, Hkv, F);
    CHECK(rlx_graph_status(g) == RLX_OK, "decoder block builds: %s", rlx_last_error());
    block_leaves bl;
    block_data(&bl, t, B, S, E, H, Hkv, F);
    compare("decoder block", g, bl.l, 11, t);
    /* the captured graph and the op-by-op launches give the same bytes */
    size_t b1 = 0, b2 = 0;
    void *replay = run_graph(g, RLX_DEVICE_CUDA, bl.l, 11, 0, &b1);
    setenv("RLX_CUDA_GRAPH", "0", 1);
    void *eager = run_graph(g, RLX_DEVICE_CUDA, bl.l, 11, 0, &b2);
    unsetenv("RLX_CUDA_GRAPH");
    CHECK(replay && eager && b1 == b2 && !memcmp(replay, eager, b1), "decoder block %s: graph replay == op by op",
          rlx_dtype_name(t));
    free(replay);
    free(eager);
    for (int i = 0; i < 11; i++) free(bl.l[i].data);
    rlx_graph_free(g);
  }
}

/* ---------------------------------------------------------------- params stay, and change */

/* A KV-cache-like param that every run updates in place (UpdateSlice +
 * Assign): the CUDA session keeps it in device memory (params_kept, no
 * copy to the host and back), also when runs of two shape bindings (two
 * plans) take turns and when a Param is set again, and every output
 * matches a CPU session run in lockstep. A weight that feeds a folded
 * transpose rides along; an assigned counter (c + 1, param-only) must not
 * be folded: it changes on every run. */
static void test_kept_state(void) {
  rlx_graph *g = rlx_graph_new("kept state");
  const int64_t S = rlx_dim_sym(g, "S");
  int64_t cd[3] = {1, 8, 4}, rd[3] = {1, 1, 4}, one[1] = {1}, xd[2] = {S, 4}, wd[2] = {4, 4}, perm[2] = {1, 0},
          axis1[1] = {1};
  rlx_node cache = rlx_param(g, "cache", RLX_F32, 3, cd), counter = rlx_param(g, "counter", RLX_F32, 1, one);
  rlx_node w = rlx_param(g, "w", RLX_F32, 2, wd);
  rlx_node row = rlx_input(g, "row", RLX_F32, 3, rd), start = rlx_input(g, "start", RLX_I32, 1, one);
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd);
  rlx_node u = rlx_update_slice(g, cache, row, start, 1);
  float onef = 1.0f;
  rlx_node c1 = rlx_add(g, counter, rlx_constant(g, RLX_F32, 1, one, &onef));
  rlx_node sum = rlx_reduce(g, RLX_REDUCE_SUM, u, 1, axis1, 0); /* [1, 4] */
  rlx_node y = rlx_add(g, rlx_add(g, rlx_matmul(g, x, rlx_transpose(g, w, 2, perm)), sum), c1);
  rlx_node outs[3] = {y, rlx_assign(g, cache, u), rlx_assign(g, counter, c1)};
  rlx_graph_set_outputs(g, 3, outs);
  rlx_options cu = {RLX_DEVICE_CUDA, 0, 0}, cpu = {RLX_DEVICE_CPU, 0, 0};
  rlx_session *sg = NULL, *sc = NULL;
  CHECK(rlx_compile(g, &cu, &sg) == RLX_OK && rlx_compile(g, &cpu, &sc) == RLX_OK, "compile kept-state graph: %s",
        rlx_last_error());
  float *zeros = calloc(32, sizeof(float)), *wv = random_tensor(RLX_F32, 16, 1.0);
  for (int k = 0; sg && sc && k < 2; k++) {
    rlx_session *s = k ? sc : sg;
    CHECK(rlx_set_param(s, "cache", zeros, 32 * sizeof(float)) == RLX_OK && rlx_set_param(s, "w", wv, 64) == RLX_OK &&
              rlx_set_param(s, "counter", zeros, 4) == RLX_OK,
          "set params");
  }
  int64_t kept_runs = 0;
  for (int step = 0; sg && sc && step < 14; step++) {
    const int64_t n = 1 + (step / 3) % 2; /* two plans, taking turns */
    float *xv = random_tensor(RLX_F32, 4 * n, 1.0), *rv = random_tensor(RLX_F32, 4, 1.0);
    int32_t st = (int32_t)(step % 8);
    if (step == 9) /* a param set again between runs: the new bytes win over the kept ones */
      for (int k = 0; k < 2; k++) CHECK(rlx_set_param(k ? sc : sg, "cache", zeros, 32 * sizeof(float)) == RLX_OK, "reset");
    float y[2][8], c[2][32], cnt[2];
    for (int k = 0; k < 2; k++) {
      rlx_session *s = k ? sc : sg;
      rlx_status rs = rlx_set_input_shaped(s, "x", xv, (size_t)(16 * n), 2, (int64_t[]){n, 4});
      if (rs == RLX_OK) rs = rlx_set_input(s, "row", rv, 16);
      if (rs == RLX_OK) rs = rlx_set_input(s, "start", &st, 4);
      if (rs == RLX_OK) rs = rlx_run(s);
      if (rs == RLX_OK) rs = rlx_output(s, 0, y[k], (size_t)(16 * n));
      if (rs == RLX_OK) rs = rlx_output(s, 1, c[k], sizeof c[k]);
      if (rs == RLX_OK) rs = rlx_output(s, 2, &cnt[k], 4);
      CHECK(rs == RLX_OK, "kept state step %d on %s: %s", step, k ? "cpu" : "cuda", rlx_last_error());
    }
    rlx_session_stats stats;
    rlx_session_get_stats(sg, &stats);
    kept_runs += stats.params_kept == 2;
    CHECK(worst_ratio(RLX_F32, y[0], y[1], 4 * n, 1e-5, 1e-5) <= 1 && !memcmp(c[0], c[1], sizeof c[0]) && cnt[0] == cnt[1],
          "kept state step %d (S %lld): cuda and cpu agree (counter %g / %g)", step, (long long)n, cnt[0], cnt[1]);
    free(xv), free(rv);
  }
  CHECK(kept_runs == 14, "the CUDA session kept both assigned params on the device in %lld of 14 runs",
        (long long)kept_runs);
  free(zeros), free(wv);
  rlx_session_free(sg);
  rlx_session_free(sc);
  rlx_graph_free(g);
}

static void test_params(void) {
  /* y = x @ transpose(cast(w)) * 2: transpose(cast(w)) is parameter-only */
  rlx_graph *g = rlx_graph_new("params");
  int64_t xd[2] = {5, 16}, wd[2] = {12, 16}, perm[2] = {1, 0}, sd[1] = {1};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd), w = rlx_param(g, "w", RLX_F64, 2, wd);
  float two = 2.0f;
  rlx_node c = rlx_constant(g, RLX_F32, 1, sd, &two);
  rlx_node wt = rlx_transpose(g, rlx_cast(g, w, RLX_F32), 2, perm);
  rlx_node y = rlx_mul(g, rlx_matmul(g, x, rlx_activation(g, RLX_ACT_TANH, wt)), c);
  rlx_graph_set_outputs(g, 1, &y);
  rlx_options cu = {RLX_DEVICE_CUDA, 0, 0};
  rlx_session *s = NULL;
  CHECK(rlx_compile(g, &cu, &s) == RLX_OK, "compile params graph: %s", rlx_last_error());
  if (!s) {
    rlx_graph_free(g);
    return;
  }
  float *xv = random_tensor(RLX_F32, 80, 1.0);
  double *w1 = random_tensor(RLX_F64, 192, 1.0), *w2 = random_tensor(RLX_F64, 192, 1.0);
  float got[60], again[60], want[60];
  size_t cb;
  for (int round = 0; round < 2; round++) {
    double *w = round ? w2 : w1;
    CHECK(rlx_set_param(s, "w", w, 192 * sizeof(double)) == RLX_OK, "set w");
    CHECK(rlx_set_input(s, "x", xv, 80 * sizeof(float)) == RLX_OK, "set x");
    CHECK(rlx_run(s) == RLX_OK && rlx_output(s, 0, got, sizeof got) == RLX_OK, "run %d: %s", round, rlx_last_error());
    CHECK(rlx_run(s) == RLX_OK && rlx_output(s, 0, again, sizeof again) == RLX_OK && !memcmp(got, again, sizeof got),
          "run %d again: the same result without new data", round);
    bound_leaf l[2] = {{"x", 0, xv, 80 * sizeof(float)}, {"w", 1, w, 192 * sizeof(double)}};
    float *ref = run_graph(g, RLX_DEVICE_CPU, l, 2, 0, &cb);
    if (ref) memcpy(want, ref, sizeof want);
    free(ref);
    double r = worst_ratio(RLX_F32, got, want, 60, 1e-4, 1e-4);
    CHECK(r <= 1.0, "params round %d (%s): worst error %.3g of tolerance", round,
          round ? "after rlx_set_param with new values" : "first upload", r);
  }
  free(xv), free(w1), free(w2);
  rlx_session_free(s);
  rlx_graph_free(g);
}

/* ---------------------------------------------------------------- one copy of the params */

enum { SH_N = 8192, SH_K = 8192 }; /* w: 128 MiB of f16, 256 MiB as f32 */

static size_t device_free_bytes(void) {
  size_t free_b = 0, total = 0;
  cudaDeviceSynchronize();
  return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? free_b : 0;
}

/* y = x @ w^T for x of S rows on session s, against a product in doubles. */
static void check_shared_run(rlx_session *s, const float *w, int64_t S, const char *what) {
  float *x = random_tensor(RLX_F32, (size_t)(S * SH_K), 1.0), *y = malloc((size_t)(S * SH_N) * sizeof *y),
        *want = malloc((size_t)(S * SH_N) * sizeof *want);
  rlx_status st = rlx_set_input_shaped(s, "x", x, (size_t)(S * SH_K) * sizeof *x, 2, (int64_t[]){S, SH_K});
  if (st == RLX_OK) st = rlx_run(s);
  if (st == RLX_OK) st = rlx_output(s, 0, y, (size_t)(S * SH_N) * sizeof *y);
  CHECK(st == RLX_OK, "%s (S %lld): %s", what, (long long)S, rlx_last_error());
  for (int64_t r = 0; r < S; r++)
    for (int64_t n = 0; n < SH_N; n++) {
      double acc = 0;
      for (int64_t k = 0; k < SH_K; k++) acc += (double)x[r * SH_K + k] * w[n * SH_K + k];
      want[r * SH_N + n] = (float)acc;
    }
  double worst = st == RLX_OK ? worst_ratio(RLX_F32, y, want, (size_t)(S * SH_N), 1e-3, 1e-3) : 1e9;
  CHECK(worst <= 1.0, "%s (S %lld): worst error %.3g of tolerance", what, (long long)S, worst);
  free(x), free(y), free(want);
}

/* y = x @ transpose(cast(w, F32)), w an F16 param: the cast is folded
 * (computed once from w, kept on the device). Two shape bindings are two
 * plans; they must read one device copy of w and of its folded cast
 * (cudaMemGetInfo: the second plan takes far less than the cast's 256 MiB;
 * the first one also loads cuBLASLt's kernels, ~70 MiB, and its workspace).
 * The
 * plans of a freed session go to the next session of the graph with their
 * copy of w; a second live session may not use that copy (it would
 * overwrite the first one's w), so it makes its own, and each session
 * computes with its own weights. */
static void test_shared_params(void) {
  rlx_graph *g = rlx_graph_new("shared params");
  const int64_t S = rlx_dim_sym(g, "S");
  int64_t xd[2] = {S, SH_K}, wd[2] = {SH_N, SH_K}, perm[2] = {1, 0};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd), w = rlx_param(g, "w", RLX_F16, 2, wd);
  rlx_node y = rlx_matmul(g, x, rlx_transpose(g, rlx_cast(g, w, RLX_F32), 2, perm));
  rlx_graph_set_outputs(g, 1, &y);
  const size_t n_w = (size_t)SH_N * SH_K, wbytes = n_w * sizeof(float), hbytes = n_w * sizeof(uint16_t);
  uint16_t *h1 = random_tensor(RLX_F16, (int64_t)n_w, 1.0), *h2 = random_tensor(RLX_F16, (int64_t)n_w, 1.0);
  float *w1 = malloc(wbytes), *w2 = malloc(wbytes); /* the references' weights: the f16 values */
  for (size_t i = 0; i < n_w; i++) w1[i] = (float)rlx_value_as_f64(RLX_F16, h1, (int64_t)i);
  for (size_t i = 0; i < n_w; i++) w2[i] = (float)rlx_value_as_f64(RLX_F16, h2, (int64_t)i);
  rlx_options cu = {RLX_DEVICE_CUDA, 0, 0};
  rlx_session *a = NULL, *b = NULL, *c = NULL;
  CHECK(rlx_compile(g, &cu, &a) == RLX_OK && rlx_set_param(a, "w", h1, hbytes) == RLX_OK, "compile: %s",
        rlx_last_error());
  if (!a) goto done;
  size_t free0 = device_free_bytes();
  check_shared_run(a, w1, 2, "first plan");
  size_t free1 = device_free_bytes();
  check_shared_run(a, w1, 1, "second plan");
  size_t free2 = device_free_bytes();
  CHECK(free0 >= free1 + wbytes + hbytes, "the first plan holds w and its cast: %zu MiB taken, they are %zu MiB",
        (free0 - free1) >> 20, (wbytes + hbytes) >> 20);
  CHECK(free1 < free2 + wbytes / 2, "the second plan shares w and its cast: it took %lld MiB (the cast is %zu MiB)",
        ((long long)free1 - (long long)free2) >> 20, wbytes >> 20);
  rlx_set_param(a, "w", h2, hbytes); /* a new w reaches both plans */
  check_shared_run(a, w2, 1, "first plan, new w");
  check_shared_run(a, w2, 2, "second plan, new w");
  rlx_session_free(a);
  a = NULL;
  /* b takes the idle plans over, with their copy of w; c, alive beside b, builds its own */
  CHECK(rlx_compile(g, &cu, &b) == RLX_OK && rlx_compile(g, &cu, &c) == RLX_OK, "compile b, c: %s", rlx_last_error());
  if (!b || !c) goto done;
  rlx_set_param(b, "w", h1, hbytes);
  rlx_set_param(c, "w", h2, hbytes);
  for (int round = 0; round < 2; round++) {
    check_shared_run(b, w1, 1, "session b");
    check_shared_run(c, w2, 2, "session c beside b");
    check_shared_run(b, w1, 2, "session b, its second plan");
    check_shared_run(c, w2, 1, "session c, its second plan");
  }
  rlx_session_stats sb, sc;
  rlx_session_get_stats(b, &sb);
  rlx_session_get_stats(c, &sc);
  CHECK(sb.plans_reused == 2 && sb.plans_built == 0 && sc.plans_reused == 0 && sc.plans_built == 2,
        "b took over both idle plans (reused %lld, built %lld), c built its own (reused %lld, built %lld)",
        (long long)sb.plans_reused, (long long)sb.plans_built, (long long)sc.plans_reused, (long long)sc.plans_built);
done:
  rlx_session_free(a);
  rlx_session_free(b);
  rlx_session_free(c);
  free(w1), free(w2), free(h1), free(h2);
  rlx_graph_free(g);
}

/* A session whose params take more than 1 GiB of device memory (an LLM's
 * weights) gives that memory back when it is freed: its plans do not wait
 * in the compile cache holding the weights (cudaMemGetInfo). Its stats
 * report the params' device bytes. */
static void test_freed_params_released(void) {
  enum { BN = 20480, BK = 16384 }; /* w: 1.25 GiB of f32 */
  rlx_graph *g = rlx_graph_new("big params");
  int64_t xd[2] = {1, BK}, wd[2] = {BN, BK}, perm[2] = {1, 0};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, xd), w = rlx_param(g, "w", RLX_F32, 2, wd);
  rlx_node y = rlx_matmul(g, x, rlx_transpose(g, w, 2, perm));
  rlx_graph_set_outputs(g, 1, &y);
  const size_t wbytes = (size_t)BN * BK * sizeof(float);
  float *wv = calloc((size_t)BN * BK, sizeof *wv), *xv = calloc(BK, sizeof *xv), *yv = malloc(BN * sizeof *yv);
  for (int64_t k = 0; k < BK; k++) xv[k] = 1.0f;
  for (int64_t n = 0; n < BN; n++) wv[(size_t)n * BK + (size_t)(n % BK)] = (float)(n % 7); /* y[n] = n % 7 */
  const size_t free0 = device_free_bytes();
  rlx_options cu = {RLX_DEVICE_CUDA, 0, 0};
  rlx_session *s = NULL;
  rlx_status st = wv && xv && yv ? rlx_compile(g, &cu, &s) : RLX_ERR_NOMEM;
  if (st == RLX_OK) st = rlx_set_param(s, "w", wv, wbytes);
  if (st == RLX_OK) st = rlx_set_input(s, "x", xv, BK * sizeof *xv);
  if (st == RLX_OK) st = rlx_run(s);
  if (st == RLX_OK) st = rlx_output(s, 0, yv, BN * sizeof *yv);
  CHECK(st == RLX_OK, "big params: %s", rlx_last_error());
  int bad = 0;
  for (int64_t n = 0; st == RLX_OK && n < BN; n++) bad += yv[n] != (float)(n % 7);
  CHECK(st == RLX_OK && !bad, "big params: %d wrong outputs", bad);
  rlx_session_stats ss = {0};
  rlx_session_get_stats(s, &ss);
  CHECK(ss.param_device_bytes == wbytes, "param_device_bytes %zu, w is %zu", ss.param_device_bytes, wbytes);
  const size_t free1 = device_free_bytes();
  rlx_session_free(s);
  const size_t free2 = device_free_bytes();
  CHECK(free1 + wbytes <= free0 + ((size_t)256 << 20), "the session held w: %zu MiB taken", (free0 - free1) >> 20);
  CHECK(free2 + ((size_t)256 << 20) >= free0, "freed, it gave w back: %lld MiB still taken",
        ((long long)free0 - (long long)free2) >> 20);
  free(wv), free(xv), free(yv);
  rlx_graph_free(g);
}

/* ---------------------------------------------------------------- hybrid */

static void test_hybrid(void) {
  /* x * 2 -> GroupNorm (no CUDA kernel: the CPU) -> relu -> sum over the last two axes */
  rlx_graph *g = rlx_graph_new("hybrid");
  int64_t xd[4] = {2, 4, 6, 5}, cd[1] = {4}, one[1] = {1}, axes[2] = {2, 3};
  float two = 2.0f;
  rlx_node x = rlx_input(g, "x", RLX_F32, 4, xd);
  rlx_node y = rlx_mul(g, x, rlx_constant(g, RLX_F32, 1, one, &two));
  y = rlx_group_norm(g, y, rlx_param(g, "gamma", RLX_F32, 1, cd), rlx_param(g, "beta", RLX_F32, 1, cd), 2, 1e-5);
  y = rlx_reduce(g, RLX_REDUCE_SUM, rlx_activation(g, RLX_ACT_RELU, y), 2, axes, 0);
  rlx_graph_set_outputs(g, 1, &y);
  bound_leaf l[3] = {{"x", 0, random_tensor(RLX_F32, 240, 1.0), 240 * sizeof(float)},
                     {"gamma", 1, random_tensor(RLX_F32, 4, 1.0), 4 * sizeof(float)},
                     {"beta", 1, random_tensor(RLX_F32, 4, 1.0), 4 * sizeof(float)}};
  /* the trace of the CUDA compile goes to a file */
  char path[] = "/tmp/rlx_cuda_trace_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  fflush(stderr);
  dup2(fd, 2);
  setenv("RLX_TRACE", "1", 1);
  compare("hybrid graph (GroupNorm on the CPU)", g, l, 3, RLX_F32);
  unsetenv("RLX_TRACE");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  static char buf[1 << 16];
  lseek(fd, 0, SEEK_SET);
  ssize_t got = read(fd, buf, sizeof buf - 1);
  buf[got > 0 ? got : 0] = 0;
  close(fd);
  unlink(path);
  CHECK(strstr(buf, "cuda declines node") && strstr(buf, "(GroupNorm): GroupNorm: no CUDA kernel"),
        "RLX_TRACE names the declined GroupNorm node; trace was:\n%s", buf);
  CHECK(strstr(buf, "3 segments (2 on cuda, 1 on cpu)") != NULL, "partition: cuda | cpu | cuda; trace was:\n%s", buf);
  rlx_options o = {RLX_DEVICE_CUDA, 0, 0};
  rlx_session *s = NULL;
  rlx_session_stats stats = {0};
  CHECK(rlx_compile(g, &o, &s) == RLX_OK && rlx_session_get_stats(s, &stats) == RLX_OK && stats.fallback_nodes == 1,
        "hybrid: the session counts 1 node on the CPU, got %lld", (long long)stats.fallback_nodes);
  rlx_session_free(s);
  for (int i = 0; i < 3; i++) free(l[i].data);
  rlx_graph_free(g);
}

int main(void) {
  unsetenv("RLX_DEVICE");
  /* the CPU reference of DequantMatMul: the exact product (not the 8-bit
   * quantized activations of its fast kernel) */
  setenv("RLX_QMATMUL_REF", "1", 1);
  if (!cuda_present()) {
    printf("SKIP: no CUDA device\n");
    return CUDA_SKIP;
  }
  test_hybrid();
  test_params();
  test_kept_state();
  test_shared_params();
  test_freed_params_released();
  test_attention();
  test_matmul();
  test_gemv();
  test_gemv_segments();
  test_dequant_matmul();
  test_dequant_matmul_16bit();
  test_glu_gemv();
  test_rope_join();
  test_gemv_rope();
  test_gemv_norm();
  test_cast_update();
  test_block_gather();
  test_dequant_matmul_int8();
  test_dequant_matmul_norm();
  test_update_join();
  test_decoder_block();
  return check_report();
}
