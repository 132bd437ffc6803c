/* test_cuda_batch.c — sequences decoded together on CUDA (rlx_llm_decode
 * over the KV pool) against each decoded alone on CUDA, on the tiny
 * random decoder of kv_quant_ref.py (heads of 32) with f32 and Q8_0
 * weights and f32, f16 and q8_0 KV caches (label cuda; exit 77, a skip,
 * without a CUDA device).
 *
 * usage: test_cuda_batch PYTHON REF_DIR WORK_DIR
 *
 * N = 3 and N = 12 prompts of different lengths are prefilled in one
 * batch, then decoded together for STEPS steps, each fed the tokens it
 * chose alone (so a near tie cannot fork the two runs), against each
 * prompt run alone (one sequence, its own decoder). No op of either may
 * fall back to the CPU.
 *
 * What the rounding allows. On the CPU a row gets the same bits whatever
 * runs beside it (test_llm_batch). On CUDA it need not: a batch of more
 * than 8 rows takes the products through a GEMM (its blocking chosen by
 * the row count) where fewer take a GEMV, and the split-key attention
 * sizes its splits by the grid. CTest runs this with RLX_QMATMUL_REF=1:
 * every product is then F32 arithmetic on x as given, so together and
 * alone differ in the order of their sums only, and each is within 2e-3
 * of the largest logit of the float64 values: test_cuda_llm's TOL (F32
 * through the layers, two summation orders) for f32 and f16 caches, and
 * kv_quant_ref.py's for q8_0 (F32 against F64 including a key landing one
 * level away), which test_cuda_llm_kvq checks on the device. Together vs
 * alone: BOUND = 2 * 2e-3 of the largest logit, and the same greedy token
 * wherever the alone run's best two logits are more than 2 BOUND apart.
 * Without RLX_QMATMUL_REF, a Q8_0 product of at most 8 rows quantizes x
 * to 8 bits per 32 values (as llama.cpp's MMVQ) and one of more rows does
 * not: the two differ by that rounding of x, which no bound here covers;
 * a server's batches then give near ties either way. */
#include "check.h"
#include "cuda_util.h"
#include "ref_data.h"
#include "ref_script.h"

#define STEPS 12
#define MAX_SEQ 12
#define BOUND 4e-3

static char *path_of(const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", work_dir, name);
  return buf;
}

static rlx_llm *load(rlx_model_file *f, rlx_dtype cache, int32_t n_seq) {
  rlx_llm_options o = {{RLX_DEVICE_CUDA, 1, 0, 0, NULL}, 96, NULL, NULL, cache, n_seq, 0, 0, 0, NULL};
  rlx_llm *m = NULL;
  rlx_status st = rlx_llm_load(f, &o, &m);
  CHECK(st == RLX_OK, "load n_seq %d, %s cache: %s", (int)n_seq, rlx_dtype_name(cache), rlx_last_error());
  return m;
}

static void no_fallback(const char *what, rlx_llm *m) {
  rlx_llm_info info = {0};
  CHECK(rlx_llm_get_info(m, &info) == RLX_OK && info.fallback_nodes == 0, "%s: %lld ops on the CPU", what,
        (long long)info.fallback_nodes);
}

/* Prompt s: 5 + (3 s) % 11 tokens from 2 s. */
static const int32_t *prompt_of(const int32_t *tokens, int s, int64_t *len) {
  *len = 5 + (3 * s) % 11;
  return tokens + 2 * s;
}

/* The best two of a row are apart by more than gap. */
static int clear_best(const float *row, int64_t V, double gap) {
  const int64_t b = argmax_f32(row, V);
  for (int64_t i = 0; i < V; i++)
    if (i != b && row[b] - row[i] <= gap) return 0;
  return 1;
}

/* Every prompt alone (one decoder of one sequence, truncated between
 * them): logits [s][STEPS + 1][V] after the prompt and each greedy token,
 * the tokens into out[s]. */
static int run_alone(rlx_model_file *f, rlx_dtype cache, const int32_t *tokens, int64_t V, float *logits,
                     int32_t out[][STEPS]) {
  rlx_llm *m = load(f, cache, 1);
  rlx_status st = m ? RLX_OK : RLX_ERR_INVALID;
  for (int s = 0; s < MAX_SEQ && st == RLX_OK; s++) {
    float *mine = logits + (size_t)s * (STEPS + 1) * V;
    int64_t n;
    const int32_t *p = prompt_of(tokens, s, &n);
    st = rlx_llm_truncate(m, 0);
    if (st == RLX_OK) st = rlx_llm_eval(m, p, n, 0, mine);
    for (int i = 0; i < STEPS && st == RLX_OK; i++) {
      out[s][i] = (int32_t)argmax_f32(mine + i * V, V);
      st = rlx_llm_eval(m, &out[s][i], 1, 0, mine + (i + 1) * V);
    }
  }
  CHECK(st == RLX_OK, "%s cache, alone: %s", rlx_dtype_name(cache), rlx_last_error());
  if (m) no_fallback("alone", m);
  rlx_llm_free(m);
  return st == RLX_OK;
}

/* N prompts prefilled in one batch and decoded together against alone. */
static void check_together(const char *what, rlx_model_file *f, rlx_dtype cache, int N, const int32_t *tokens,
                           int64_t V, const float *alone, int32_t out[][STEPS]) {
  rlx_llm *m = load(f, cache, N);
  float *logits = malloc((size_t)(N * V) * sizeof *logits);
  int32_t tok[MAX_SEQ * 16], seq[MAX_SEQ * 16];
  int8_t want[MAX_SEQ * 16];
  int64_t k = 0;
  for (int s = 0; s < N; s++) {
    int64_t n;
    const int32_t *p = prompt_of(tokens, s, &n);
    for (int64_t i = 0; i < n; i++, k++) tok[k] = p[i], seq[k] = s, want[k] = i == n - 1;
  }
  rlx_llm_batch b = {k, tok, seq, want};
  rlx_status st = m && logits ? rlx_llm_decode(m, &b, logits) : RLX_ERR_NOMEM;
  double worst = 0;
  int clear = 0, same = 0;
  for (int i = 0; i <= STEPS && st == RLX_OK; i++) {
    for (int s = 0; s < N; s++) {
      const float *a = alone + ((size_t)s * (STEPS + 1) + i) * V, *t = logits + (size_t)s * V;
      const double top = max_abs_f32(a, V);
      const double d = max_diff_f32(t, a, V) / top;
      if (!(d <= worst)) worst = d; /* NaN counts as worst */
      if (clear_best(a, V, 2 * BOUND * top)) clear++, same += argmax_f32(t, V) == argmax_f32(a, V);
      if (i < STEPS) tok[s] = out[s][i], seq[s] = s;
    }
    if (i == STEPS) break;
    rlx_llm_batch step = {N, tok, seq, NULL};
    st = rlx_llm_decode(m, &step, logits);
  }
  CHECK(st == RLX_OK && worst <= BOUND && same == clear && clear > 0,
        "%s, %s cache, %d together vs alone: logits %.3g of the largest apart (bound %g), greedy tokens %d of %d "
        "clear steps the same: %s", what, rlx_dtype_name(cache), N, worst, BOUND, same, clear, rlx_last_error());
  printf("%s, %s cache, %d sequences together vs alone: logits within %.3g of the largest (bound %g), greedy tokens "
         "%d of %d clear steps the same\n", what, rlx_dtype_name(cache), N, worst, BOUND, same, clear);
  if (m) no_fallback("together", m);
  free(logits);
  rlx_llm_free(m);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR WORK_DIR\n", argv[0]);
    return 2;
  }
  if (!cuda_present()) return CUDA_SKIP;
  work_dir = argv[3];
  if (run_ref_script(argv[1], argv[2], "kv_quant_ref.py", "--out \"%s\"", argv[3])) return 1;
  FILE *cases = fopen(path_of("kvq.txt"), "r");
  char line[256], name[32];
  long long n = 0, V = 0;
  double tol;
  CHECK(cases && fgets(line, sizeof line, cases) && sscanf(line, "%31s %lld %lld %lf", name, &n, &V, &tol) == 4,
        "kvq.txt");
  if (cases) fclose(cases);
  int32_t *tokens = n >= 2 * MAX_SEQ + 16 ? read_file_sized(path_of("kvq.tokens"), (size_t)n * sizeof *tokens) : NULL;
  CHECK(tokens != NULL, "kvq.tokens: %lld tokens", n);
  float *alone = V > 0 ? malloc((size_t)(MAX_SEQ * (STEPS + 1) * V) * sizeof *alone) : NULL;
  const char *files[2] = {"kvq_f32.gguf", "kvq_q8_0.gguf"}, *weights[2] = {"f32 weights", "Q8_0 weights"};
  const rlx_dtype caches[3] = {RLX_F32, RLX_F16, RLX_Q8_0};
  for (int w = 0; w < 2 && tokens && alone; w++) {
    rlx_model_file *f = NULL;
    rlx_status st = rlx_model_file_open(path_of(files[w]), &f);
    CHECK(st == RLX_OK, "open %s: %s", files[w], rlx_last_error());
    for (int c = 0; c < 3 && st == RLX_OK; c++) {
      int32_t out[MAX_SEQ][STEPS];
      if (!run_alone(f, caches[c], tokens, V, alone, out)) continue;
      check_together(weights[w], f, caches[c], 3, tokens, V, alone, out);
      check_together(weights[w], f, caches[c], MAX_SEQ, tokens, V, alone, out);
    }
    rlx_model_file_close(f);
  }
  free(tokens);
  free(alone);
  return check_report();
}
