/* test_cuda_decode.c — a Llama-style decoder block on the CUDA backend
 * against the CPU backend, prefill-shaped and decode-shaped: graph replay
 * equals the op-by-op run bit for bit, the backend's fusions (RLX_TRACE
 * counts them) against the same block with them off (RLX_CUDA_FUSE=0).
 * Skips (exit 77) without a CUDA device. */
#include "cuda_backend_test.h"

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
 * (B * S <= 8 rows: GEMV kernels, split-key attention); with the
 * backend's fusions on and off. */
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
    /* the backend's fusions: fewer launches than with them off (the ropes
     * of q and k share one at least), the same results within tolerance,
     * and RLX_TRACE counts what each took */
    compare_unfused("decoder block", g, bl.l, 11, 0, t);
    const int64_t fused = device_launches(g), apart = unfused_launches(g);
    CHECK(fused > 0 && apart > fused, "decoder block %s: %lld launches (fusions off: %lld)", rlx_dtype_name(t),
          (long long)fused, (long long)apart);
    const char *trace = strstr(cuda_compile_trace(g), "rlx: cuda fusions of \"");
    const char *counts = trace ? strstr(trace, "\": norm_quant ") : NULL;
    char line[512] = "", name[32];
    if (counts) snprintf(line, sizeof line, "%.*s", (int)strcspn(counts + 3, "\n"), counts + 3);
    int taken = 0, k, used;
    for (const char *p = line; sscanf(p, "%31s %d%n", name, &k, &used) == 2; p += used) taken += k;
    CHECK(counts && taken > 0, "decoder block %s: RLX_TRACE counts %d fusions taken; trace was:\n%s", rlx_dtype_name(t),
          taken, trace ? trace : "(no line)");
    setenv("RLX_CUDA_FUSE", "0", 1);
    trace = strstr(cuda_compile_trace(g), "rlx: cuda fusions of \"");
    unsetenv("RLX_CUDA_FUSE");
    CHECK(trace && strstr(trace, "\": off (RLX_CUDA_FUSE=0)\n"), "decoder block %s: RLX_TRACE says the fusions are off",
          rlx_dtype_name(t));
    for (int i = 0; i < 11; i++) free(bl.l[i].data);
    rlx_graph_free(g);
  }
}

/* The attention of an LLM with a 16-bit KV cache: q [1, S, H, D] in F32
 * rounded to the cache's dtype, attention over K/V of that dtype (custom
 * mask), the output widened to F32. The split-key decode kernel does both
 * Casts itself (attn_cast): one launch instead of three, the same bytes
 * as the three launches (RLX_CUDA_FUSE=0), and the CPU's result within
 * the tolerance of F32 plus one unit in the last place of the cache
 * dtype, where both round the output (|y| <= max |v| < 8: a BF16 ulp is
 * at most 2^-5 there). */
static void test_attention_casts(void) {
  static const struct { rlx_dtype t; int S, T; } cases[] = {{RLX_F16, 1, 300}, {RLX_BF16, 1, 2500}, {RLX_F16, 2, 77}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const rlx_dtype t = cases[c].t;
    const int S = cases[c].S, T = cases[c].T, H = 8, Hkv = 2, D = 64;
    rlx_graph *g = rlx_graph_new("attention casts");
    const int64_t qd[4] = {1, S, H, D}, kd[4] = {1, T, Hkv, D}, md[2] = {S, T};
    rlx_node q = rlx_input(g, "q", RLX_F32, 4, qd), k = rlx_input(g, "k", t, 4, kd), v = rlx_input(g, "v", t, 4, kd);
    rlx_node mask = rlx_input(g, "mask", RLX_F32, 2, md);
    const rlx_attention_desc ad = {H, Hkv, D, RLX_MASK_CUSTOM, 0, 0, 0, RLX_LAYOUT_BSHD};
    rlx_node y = rlx_cast(g, rlx_attention(g, rlx_cast(g, q, t), k, v, mask, &ad), RLX_F32);
    rlx_graph_set_outputs(g, 1, &y);
    float *m = malloc(sizeof(float) * (size_t)(S * T));
    for (int i = 0; i < S * T; i++) m[i] = i % T > T - S + i / T ? -INFINITY : 0.f; /* causal, the last S keys new */
    const bound_leaf l[4] = {{"q", 0, random_tensor(RLX_F32, (int64_t)S * H * D, 1.0), sizeof(float) * (size_t)(S * H * D)},
                             {"k", 0, random_tensor(t, (int64_t)T * Hkv * D, 1.0), dtype_size(t) * (size_t)(T * Hkv * D)},
                             {"v", 0, random_tensor(t, (int64_t)T * Hkv * D, 1.0), dtype_size(t) * (size_t)(T * Hkv * D)},
                             {"mask", 0, m, sizeof(float) * (size_t)(S * T)}};
    char what[64];
    snprintf(what, sizeof what, "attention casts %s S %d T %d", rlx_dtype_name(t), S, T);
    compare_tol(what, g, l, 4, RLX_F32, 1.0 / 32);
    size_t b1 = 0, b2 = 0;
    void *on = run_graph(g, RLX_DEVICE_CUDA, l, 4, 0, &b1);
    setenv("RLX_CUDA_FUSE", "0", 1);
    void *off = run_graph(g, RLX_DEVICE_CUDA, l, 4, 0, &b2);
    unsetenv("RLX_CUDA_FUSE");
    CHECK(on && off && b1 == b2 && !memcmp(on, off, b1), "%s: the same bytes as the Casts' own launches", what);
    const int64_t fused = device_launches(g), apart = unfused_launches(g);
    CHECK(fused == 1 && apart == 3, "%s: %lld launches (fusions off: %lld)", what, (long long)fused, (long long)apart);
    const char *trace = strstr(cuda_compile_trace(g), " attn_cast ");
    CHECK(trace && atoi(trace + 11) == 2, "%s: RLX_TRACE counts attn_cast 2 (%.16s)", what, trace ? trace : "no count");
    free(on), free(off);
    for (int i = 0; i < 4; i++) free(l[i].data);
    rlx_graph_free(g);
  }
}

int main(void) {
  if (!cuda_backend_test_begin()) return CUDA_SKIP;
  test_decoder_block();
  test_attention_casts();
  return check_report();
}
