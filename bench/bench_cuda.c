/* bench_cuda.c — times rlx sessions on the CUDA backend for bench_cuda.py,
 * which runs the PyTorch peers in the same script and prints the ratios.
 *
 *   bench_cuda gemm DTYPE M N K        one MatMul [M,K] @ [K,N] (b a param)
 *   bench_cuda block DTYPE B S         a Llama-3-8B-shaped decoder block forward
 *   bench_cuda attn DTYPE B S H HKV D  one causal attention ([B,S,H,D] layout)
 *   bench_cuda llm FILE.gguf P N [CACHE]  a GGUF decoder through the public LLM API
 *                                      (rlx_llm_load on CUDA, as `rlx generate --device
 *                                      cuda`): prefill P tokens, then 5 N decode steps;
 *                                      ms per step (the median step, and the mean, which
 *                                      pays for the plans built on the way), the weight
 *                                      bytes a step reads and the plans built. CACHE: f32
 *                                      (default), f16 or bf16
 *   bench_cuda pptg FILE.gguf P N [CACHE]  llama-bench's two tests through the LLM API
 *                                      on CUDA: pp (a P-token prompt into an empty
 *                                      cache) and tg (N tokens one at a time from an
 *                                      empty cache), tokens/s, the median of 5 runs
 *                                      after one of each as warm-up
 *   bench_cuda decode WFMT T [L E H HKV F V]
 *                                      one decode step of a decoder (S = 1, KV cache of T
 *                                      rows in every layer), weights WFMT bf16, q8_0, q4_0,
 *                                      q4_1 or q4_K; shape 30-layer SmolLM2-135M unless given
 *
 * Prints "RESULT <name> ms=<median ms per run> ..." lines. A run is one
 * rlx_run (one CUDA graph replay, ending in a stream synchronize); inputs
 * and params are set once before timing, so they stay on the device, as a
 * peer's tensors do. Median over 7 trials of `reps` runs after warm-up. */
#include "bench_util.h"
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng = 88172645463325252ull;
static double urand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0 - 0.5;
}

static rlx_dtype dtype_named(const char *s) {
  for (int i = 0; i < RLX_DTYPE_COUNT; i++)
    if (!strcmp(rlx_dtype_name((rlx_dtype)i), s)) return (rlx_dtype)i;
  fprintf(stderr, "unknown dtype %s\n", s);
  exit(2);
}

/* Bytes of the repeating random pattern a large leaf is filled with:
 * drawing every element of an 8B model's 16 GB would take minutes, and a
 * product's speed does not depend on the values beyond their not being
 * zeros. A whole number of GGUF blocks and of elements. */
#define PATTERN_BYTES ((size_t)4 << 20)

/* Random data for every leaf of g (floats ~ U(-scale, scale); packed
 * weights: blocks with small f16 scales and random levels; ints:
 * positions), the first PATTERN_BYTES-ish of a leaf repeated over the rest. */
static int bind_all(rlx_session *s, const rlx_graph *g, double scale, int64_t pos) {
  for (int i = 0; i < rlx_graph_num_params(g) + rlx_graph_num_inputs(g); i++) {
    rlx_node n = i < rlx_graph_num_params(g) ? rlx_graph_param(g, i) : rlx_graph_input(g, i - rlx_graph_num_params(g));
    rlx_dtype t;
    int64_t dims[RLX_MAX_RANK], numel = 1;
    int r = rlx_node_type(g, n, &t, dims);
    for (int k = 0; k < r; k++) numel *= dims[k];
    size_t bytes = rlx_dtype_nbytes(t, numel);
    unsigned char *p = malloc(bytes ? bytes : 1);
    if (!p) {
      fprintf(stderr, "out of host memory for %zu bytes\n", bytes);
      return 0;
    }
    size_t pat = bytes;
    if (rlx_dtype_is_block(t)) {
      /* Q8_0 / Q4_0 / Q4_1: blocks of 32 headed by an f16 scale (Q4_1: and
       * minimum); Q4_K: blocks of 256 headed by f16 d and dmin, then scales
       * and levels, any bits of which are valid */
      const int k_quant = t == RLX_Q4_K;
      const size_t bs = rlx_dtype_nbytes(t, k_quant ? 256 : 32), head = t == RLX_Q4_1 || k_quant ? 4 : 2;
      if (t != RLX_Q8_0 && t != RLX_Q4_0 && t != RLX_Q4_1 && !k_quant) {
        fprintf(stderr, "no random blocks for %s\n", rlx_dtype_name(t));
        return 0;
      }
      pat = bytes < PATTERN_BYTES / bs * bs ? bytes : PATTERN_BYTES / bs * bs;
      const float d = (float)(t == RLX_Q8_0 ? scale / 64 : k_quant ? scale / 256 : scale / 8);
      for (size_t b = 0; b < pat; b += bs) {
        uint16_t dh = rlx_f32_to_f16(d), mh = rlx_f32_to_f16(t == RLX_Q4_1 ? -8 * d : d);
        memcpy(p + b, &dh, 2);
        if (head == 4) memcpy(p + b + 2, &mh, 2);
        for (size_t j = head; j < bs; j++) p[b + j] = (unsigned char)(int)((urand() + 0.5) * 255.99);
      }
    } else {
      const size_t es = rlx_dtype_nbytes(t, 1);
      const int64_t n_pat = t == RLX_I32 || t == RLX_I64 || bytes <= PATTERN_BYTES ? numel : (int64_t)(PATTERN_BYTES / es);
      pat = (size_t)n_pat * es;
      for (int64_t k = 0; k < n_pat; k++) {
        double v = urand() * 2 * scale;
        if (t == RLX_F32) ((float *)p)[k] = (float)v;
        else if (t == RLX_BF16) ((uint16_t *)p)[k] = rlx_f32_to_bf16((float)v);
        else if (t == RLX_F16) ((uint16_t *)p)[k] = rlx_f32_to_f16((float)v);
        else if (t == RLX_I32) ((int32_t *)p)[k] = (int32_t)(pos + k);
        else if (t == RLX_I64) ((int64_t *)p)[k] = pos + k;
      }
    }
    for (size_t off = pat; pat && off < bytes; off += pat) memcpy(p + off, p, bytes - off < pat ? bytes - off : pat);
    const char *name = rlx_node_name(g, n);
    rlx_status st = i < rlx_graph_num_params(g) ? rlx_set_param(s, name, p, bytes) : rlx_set_input(s, name, p, bytes);
    free(p);
    if (st) {
      fprintf(stderr, "binding %s: %s\n", name, rlx_last_error());
      return 0;
    }
  }
  return 1;
}

/* Median ms per rlx_run. */
static double time_session(rlx_session *s, int reps) {
  for (int i = 0; i < 3; i++)
    if (rlx_run(s)) {
      fprintf(stderr, "run: %s\n", rlx_last_error());
      exit(1);
    }
  double trial[7];
  for (int t = 0; t < 7; t++) {
    double t0 = bench_now();
    for (int i = 0; i < reps; i++) rlx_run(s);
    trial[t] = 1e3 * (bench_now() - t0) / reps;
  }
  return bench_median(trial, 7);
}

static rlx_session *compile_cuda(rlx_graph *g) {
  if (rlx_graph_status(g)) {
    fprintf(stderr, "graph: %s\n", rlx_last_error());
    exit(1);
  }
  rlx_options o = {RLX_DEVICE_CUDA, 0, 0, 0, NULL};
  rlx_session *s;
  if (rlx_compile(g, &o, &s)) {
    fprintf(stderr, "compile: %s\n", rlx_last_error());
    exit(1);
  }
  return s;
}

/* ---------------------------------------------------------------- graphs */

static rlx_node linear(rlx_graph *g, const char *name, rlx_node x, rlx_dtype wt, int64_t K, int64_t N) {
  if (rlx_dtype_is_block(wt)) { /* GGUF layout: [N, K] packed rows */
    int64_t d[2] = {N, K};
    return rlx_dequant_matmul(g, x, rlx_param(g, name, wt, 2, d));
  }
  int64_t d[2] = {K, N};
  return rlx_matmul(g, x, rlx_param(g, name, wt, 2, d));
}

/* The RmsNorms' beta: zeros as a constant, as the LLM builder gives it
 * (src/model/llama.c), which the backends see to be zeros (a param would
 * be filled with random values and normalized as a bias). */
static rlx_node zero_beta(rlx_graph *g, rlx_dtype t, int64_t n) {
  void *z = calloc((size_t)n, rlx_dtype_nbytes(t, 1));
  if (!z) return -1;
  rlx_node c = rlx_constant(g, t, 1, &n, z);
  free(z);
  return c;
}

/* One decoder layer over x [B, S, E]: pre-norm attention with rope and
 * (if T > 0) a KV cache of T rows written at pos, as the LLM builder does
 * it (src/model/kv_cache.c: UpdateSlice, Assigned back into the cache
 * params, so the rows are written in place: assigns[0..1]), then a SwiGLU
 * MLP. */
static rlx_node layer(rlx_graph *g, int l, rlx_node x, rlx_node pos, rlx_node start, rlx_dtype t, rlx_dtype wt,
                      int64_t B, int64_t S, int64_t E, int64_t H, int64_t Hkv, int64_t F, int64_t T,
                      rlx_node *assigns) {
  const int64_t D = E / H;
  char nm[64];
  int64_t ev[1] = {E};
#define P(fmt) (snprintf(nm, sizeof nm, fmt, l), nm)
  rlx_node zero = zero_beta(g, t, E);
  rlx_node h = rlx_rms_norm(g, x, rlx_param(g, P("l%d.attn_norm"), t, 1, ev), zero, -1, 1e-5);
  rlx_node q = linear(g, P("l%d.wq"), h, wt, E, H * D);
  rlx_node k = linear(g, P("l%d.wk"), h, wt, E, Hkv * D);
  rlx_node v = linear(g, P("l%d.wv"), h, wt, E, Hkv * D);
  int64_t q4[4] = {B, S, H, D}, k4[4] = {B, S, Hkv, D}, x3[3] = {B, S, E};
  rlx_rope_desc rd = {(int)D, (int)D, RLX_ROPE_NEOX, 10000.0, 1.0};
  q = rlx_rope(g, rlx_reshape(g, q, 4, q4), pos, &rd);
  k = rlx_rope(g, rlx_reshape(g, k, 4, k4), pos, &rd);
  v = rlx_reshape(g, v, 4, k4);
  if (T > 0) {
    int64_t cd[4] = {B, T, Hkv, D};
    rlx_node kc = rlx_param(g, P("l%d.k_cache"), t, 4, cd), vc = rlx_param(g, P("l%d.v_cache"), t, 4, cd);
    k = rlx_update_slice(g, kc, k, start, 1);
    v = rlx_update_slice(g, vc, v, start, 1);
    assigns[0] = rlx_assign(g, kc, k);
    assigns[1] = rlx_assign(g, vc, v);
  }
  rlx_attention_desc ad = {(int)H, (int)Hkv, (int)D, RLX_MASK_CAUSAL, 0, 0, 0, RLX_LAYOUT_BSHD};
  rlx_node a = rlx_reshape(g, rlx_attention(g, q, k, v, -1, &ad), 3, x3);
  rlx_node o = linear(g, P("l%d.wo"), a, wt, H * D, E);
  rlx_node x1 = rlx_add(g, x, o);
  rlx_node h2 = rlx_rms_norm(g, x1, rlx_param(g, P("l%d.mlp_norm"), t, 1, ev), zero, -1, 1e-5);
  rlx_node gu = linear(g, P("l%d.w_gate_up"), h2, wt, E, 2 * F);
  rlx_node dn = linear(g, P("l%d.w_down"), rlx_fused_swiglu(g, gu, -1), wt, F, E);
#undef P
  return rlx_add(g, x1, dn);
}

/* pptg: llama-bench -p P -n N over the same file (its pp and tg tests:
 * each run starts from an empty cache; logits of the last token come back
 * to the host, as llama_decode's do). */
static int llm_pptg(const char *path, int64_t P, int64_t N, rlx_dtype cache) {
  rlx_model_file *f = NULL;
  rlx_llm *m = NULL;
  rlx_llm_options o = {{RLX_DEVICE_CUDA, 0, 0, 0, NULL}, P + N + 8 > 4096 ? P + N + 8 : 4096, NULL, NULL, cache, 0, 0, 0, 0, NULL};
  if (P < 1 || N < 1 || rlx_model_file_open(path, &f) || rlx_llm_load(f, &o, &m)) {
    fprintf(stderr, "pptg: %s\n", rlx_last_error());
    return 1;
  }
  const int64_t V = rlx_llm_vocab_size(m);
  float *logits = malloc(sizeof(float) * (size_t)V);
  int32_t *toks = malloc(sizeof(int32_t) * (size_t)P);
  if (!logits || !toks) return 1;
  for (int64_t i = 0; i < P; i++) toks[i] = (int32_t)((i * 7919) % V);
  double pp[6], tg[6];
  for (int r = 0; r < 6; r++) { /* run 0: warm-up */
    double t0 = bench_now();
    if (rlx_llm_truncate(m, 0) || rlx_llm_eval(m, toks, P, 0, logits)) goto fail;
    pp[r] = 1e3 * (bench_now() - t0);
    if (rlx_llm_truncate(m, 0)) goto fail;
    t0 = bench_now();
    for (int64_t i = 0; i < N; i++) {
      int32_t tok = (int32_t)(i * 31 % V);
      if (rlx_llm_eval(m, &tok, 1, 0, logits)) goto fail;
    }
    tg[r] = 1e3 * (bench_now() - t0);
  }
  const double pp_ms = bench_median(pp + 1, 5), tg_ms = bench_median(tg + 1, 5);
  rlx_llm_info info;
  rlx_llm_get_info(m, &info);
  printf("RESULT pptg pp%lld_tok_s=%.1f tg%lld_tok_s=%.2f pp_ms=%.3f tg_ms_per_token=%.4f fallback=%lld\n", (long long)P,
         P / pp_ms * 1e3, (long long)N, N / tg_ms * 1e3, pp_ms, tg_ms / N, (long long)info.fallback_nodes);
  free(logits), free(toks);
  rlx_llm_free(m);
  rlx_model_file_close(f);
  return 0;
fail:
  fprintf(stderr, "pptg: %s\n", rlx_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_cuda gemm DTYPE M N K | block DTYPE B S | attn DTYPE B S H HKV D | decode WFMT T [L E H HKV F V] | llm FILE.gguf P N [CACHE] | pptg FILE.gguf P N [CACHE]\n");
    return 2;
  }
  const char *mode = argv[1];
  if (!strcmp(mode, "gemm") && argc == 6) {
    rlx_dtype t = dtype_named(argv[2]);
    int64_t M = atoll(argv[3]), N = atoll(argv[4]), K = atoll(argv[5]);
    rlx_graph *g = rlx_graph_new("gemm");
    int64_t ad[2] = {M, K}, bd[2] = {K, N};
    rlx_node y = rlx_matmul(g, rlx_input(g, "a", t, 2, ad), rlx_param(g, "b", t, 2, bd));
    rlx_graph_set_outputs(g, 1, &y);
    rlx_session *s = compile_cuda(g);
    if (!bind_all(s, g, 1.0, 0)) return 1;
    double ms = time_session(s, M * N * K > (int64_t)1 << 33 ? 20 : 100);
    printf("RESULT gemm %s %lld %lld %lld ms=%.4f tflops=%.1f\n", argv[2], (long long)M, (long long)N, (long long)K,
           ms, 2.0 * M * N * K / ms / 1e9);
    rlx_session_free(s);
    rlx_graph_free(g);
    return 0;
  }
  if (!strcmp(mode, "block") && argc == 5) {
    rlx_dtype t = dtype_named(argv[2]);
    int64_t B = atoll(argv[3]), S = atoll(argv[4]);
    const int64_t E = 4096, H = 32, Hkv = 8, F = 14336;
    rlx_graph *g = rlx_graph_new("block");
    int64_t xd[3] = {B, S, E}, pd[1] = {S};
    rlx_node y = layer(g, 0, rlx_input(g, "x", t, 3, xd), rlx_input(g, "pos", RLX_I32, 1, pd), -1, t, t, B, S, E, H, Hkv,
                       F, 0, NULL);
    rlx_graph_set_outputs(g, 1, &y);
    rlx_session *s = compile_cuda(g);
    if (!bind_all(s, g, 0.02, 0)) return 1;
    double ms = time_session(s, 10);
    printf("RESULT block %s B=%lld S=%lld ms=%.4f\n", argv[2], (long long)B, (long long)S, ms);
    rlx_session_free(s);
    rlx_graph_free(g);
    return 0;
  }
  if (!strcmp(mode, "attn") && argc == 8) {
    /* one causal Attention, q [B, S, H, D], k/v [B, S, HKV, D] */
    rlx_dtype t = dtype_named(argv[2]);
    int64_t B = atoll(argv[3]), S = atoll(argv[4]), H = atoll(argv[5]), Hkv = atoll(argv[6]), D = atoll(argv[7]);
    rlx_graph *g = rlx_graph_new("attn");
    int64_t qd[4] = {B, S, H, D}, kd[4] = {B, S, Hkv, D};
    rlx_attention_desc ad = {(int)H, (int)Hkv, (int)D, RLX_MASK_CAUSAL, 0, 0, 0, RLX_LAYOUT_BSHD};
    rlx_node y = rlx_attention(g, rlx_input(g, "q", t, 4, qd), rlx_input(g, "k", t, 4, kd), rlx_input(g, "v", t, 4, kd),
                               -1, &ad);
    rlx_graph_set_outputs(g, 1, &y);
    rlx_session *s = compile_cuda(g);
    if (!bind_all(s, g, 1.0, 0)) return 1;
    double ms = time_session(s, 50);
    const double flops = 4.0 * B * H * S * S * D / 2; /* causal: half of QK^T and PV */
    printf("RESULT attn %s B=%lld S=%lld ms=%.4f tflops=%.1f\n", argv[2], (long long)B, (long long)S, ms,
           flops / ms / 1e9);
    rlx_session_free(s);
    rlx_graph_free(g);
    return 0;
  }
  if (!strcmp(mode, "pptg") && (argc == 5 || argc == 6))
    return llm_pptg(argv[2], atoll(argv[3]), atoll(argv[4]), argc == 6 ? dtype_named(argv[5]) : RLX_F32);
  if (!strcmp(mode, "llm") && (argc == 5 || argc == 6)) {
    const int64_t P = atoll(argv[3]), N = atoll(argv[4]);
    const rlx_dtype cache = argc == 6 ? dtype_named(argv[5]) : RLX_F32;
    rlx_model_file *f = NULL;
    rlx_llm *m = NULL;
    /* the context `rlx generate` gives a model by default (4096), or what the run needs */
    const int64_t need = P + 5 * N + 8;
    rlx_llm_options o = {{RLX_DEVICE_CUDA, 0, 0, 0, NULL}, need > 4096 ? need : 4096, NULL, NULL, cache, 0, 0, 0, 0, NULL};
    if (P < 1 || N < 1 || rlx_model_file_open(argv[2], &f) || rlx_llm_load(f, &o, &m)) {
      fprintf(stderr, "llm: %s\n", rlx_last_error());
      return 1;
    }
    rlx_llm_info info;
    rlx_llm_get_info(m, &info);
    /* a step reads every weight but the embedding table (one row of it),
     * unless the table is the output matrix too */
    rlx_file_tensor embd, out_w;
    size_t step_bytes = info.weight_bytes;
    if (rlx_model_file_find_tensor(f, "token_embd.weight", &embd) == RLX_OK &&
        rlx_model_file_find_tensor(f, "output.weight", &out_w) == RLX_OK)
      step_bytes -= embd.nbytes;
    const int64_t V = rlx_llm_vocab_size(m);
    float *logits = malloc(sizeof(float) * (size_t)V);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)P);
    for (int64_t i = 0; i < P; i++) toks[i] = (int32_t)((i * 7919) % V);
    if (!logits || !toks || rlx_llm_eval(m, toks, P, 0, logits)) {
      fprintf(stderr, "llm prefill: %s\n", rlx_last_error());
      return 1;
    }
    /* 5 N steps, each timed: the median is a step's steady time; the mean
     * also pays for the plans built when the keys pass a bucket's end */
    double *step = malloc(sizeof(double) * (size_t)(5 * N)), total = 0;
    if (!step) return 1;
    for (int64_t i = 0; i < 5 * N; i++) {
      int32_t tok = (int32_t)(i * 31 % V);
      double t0 = bench_now();
      if (rlx_llm_eval(m, &tok, 1, 0, logits)) {
        fprintf(stderr, "llm decode: %s\n", rlx_last_error());
        return 1;
      }
      step[i] = 1e3 * (bench_now() - t0), total += step[i];
    }
    const double step_ms = bench_median(step, (int)(5 * N));
    printf("RESULT llm ms=%.4f tok_s=%.1f mean_ms=%.4f weight_bytes=%zu step_bytes=%zu kv_bytes=%zu plans=%lld "
           "n_past=%lld fallback=%lld\n",
           step_ms, 1e3 / step_ms, total / (double)(5 * N), info.weight_bytes, step_bytes,
           info.kv_cache_bytes, (long long)rlx_llm_plans_built(m), (long long)rlx_llm_n_past(m),
           (long long)info.fallback_nodes);
    free(step);
    free(logits), free(toks);
    rlx_llm_free(m);
    rlx_model_file_close(f);
    return 0;
  }
  if (!strcmp(mode, "decode") && (argc == 4 || argc == 10)) {
    /* default: SmolLM2-135M's shape; or L E H HKV F V (e.g. Llama-3-8B:
     * 32 4096 32 8 14336 128256) */
    rlx_dtype wt = dtype_named(argv[2]), t = RLX_BF16;
    const int64_t T = atoll(argv[3]);
    int64_t L = 30, E = 576, H = 9, Hkv = 3, F = 1536, V = 49152;
    if (argc == 10)
      L = atoll(argv[4]), E = atoll(argv[5]), H = atoll(argv[6]), Hkv = atoll(argv[7]), F = atoll(argv[8]),
      V = atoll(argv[9]);
    const int64_t D = E / H;
    rlx_graph *g = rlx_graph_new("decode");
    int64_t one[1] = {1}, td[1] = {1}, ed[2] = {V, E}, ev[1] = {E}, x3[3] = {1, 1, E};
    rlx_node tok = rlx_input(g, "token", RLX_I32, 1, td);
    rlx_node pos = rlx_input(g, "pos", RLX_I32, 1, one);
    rlx_node start = rlx_input(g, "start", RLX_I32, 1, one);
    rlx_node x = rlx_reshape(g, rlx_gather(g, rlx_param(g, "embed", t, 2, ed), tok, 0), 3, x3);
    rlx_node *outs = malloc(sizeof(rlx_node) * (size_t)(1 + 2 * L)); /* logits, then the caches' Assigns */
    if (!outs) return 1;
    for (int l = 0; l < L; l++) x = layer(g, l, x, pos, start, t, wt, 1, 1, E, H, Hkv, F, T, outs + 1 + 2 * l);
    rlx_node zero = zero_beta(g, t, E);
    x = rlx_rms_norm(g, x, rlx_param(g, "out_norm", t, 1, ev), zero, -1, 1e-5);
    outs[0] = linear(g, "lm_head", x, wt, E, V);
    rlx_graph_set_outputs(g, (int)(1 + 2 * L), outs);
    free(outs);
    rlx_session *s = compile_cuda(g);
    if (!bind_all(s, g, 0.05, T - 1)) return 1;
    /* token 0, pos T-1, start T-1: the new row is the last of the cache */
    int32_t zero_tok = 0, p = (int32_t)(T - 1);
    rlx_set_input(s, "token", &zero_tok, 4);
    rlx_set_input(s, "pos", &p, 4);
    rlx_set_input(s, "start", &p, 4);
    double ms = time_session(s, E >= 2048 ? 10 : 50);
    /* bytes a token must read: every weight once, every KV row of every layer */
    double wbytes = (double)rlx_dtype_nbytes(wt, L * (E * E * 2 + E * Hkv * D * 2 + E * 2 * F + F * E) + E * V) +
                    (double)rlx_dtype_nbytes(t, E) /* one embedding row */;
    double kv = 2.0 * L * T * Hkv * D * 2;
    printf("RESULT decode %s T=%lld ms=%.4f tok_s=%.1f weight_bytes=%.0f kv_bytes=%.0f\n", argv[2], (long long)T, ms,
           1e3 / ms, wbytes, kv);
    rlx_session_free(s);
    rlx_graph_free(g);
    return 0;
  }
  fprintf(stderr, "bad arguments\n");
  return 2;
}
