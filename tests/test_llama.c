/* test_llama.c — the Llama-family decoder on tiny random-weight GGUF files.
 *
 * usage: test_llama PYTHON REF_DIR WORK_DIR [--exact]
 *
 * Runs REF_DIR/llama_tiny.py --out WORK_DIR (the gguf package writes the
 * files, NumPy computes the reference logits), then for every good case:
 *   - logits at every position of one prefill against the reference (max
 *     abs difference within the case's tolerance, relative to the largest
 *     reference logit; the top-1 token at every position);
 *   - prefill of a prefix, then token-by-token decode of the rest: each
 *     step's logits equal the all-positions prefill's at that position;
 *   - plans: 100+ decode steps inside one key-length bucket build one plan,
 *     crossing into the next bucket one more;
 *   - truncate and re-run gives the same logits; errors past n_ctx, bad
 *     tokens and bad truncation;
 *   - F16 and BF16 KV caches: greedy decode logits close to the F32
 *     cache's, the same argmax except at near-ties;
 *   - the compiled graph copies no weight (RLX_DUMP: every transpose and
 *     cast has the run's token count in its shape);
 * and every bad file fails to load with its status. With --exact (run
 * with RLX_QMATMUL_REF=1: DequantMatMul's reference kernel, activations
 * not quantized) the logits must match the reference without activation
 * rounding to 1e-4 of the largest logit, for quantized weights too. */
#include "check.h"
#include "ref_data.h"
#include "ref_script.h"
#include "rlx.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int exact; /* --exact */

/* work_dir/<name><ext>: the files llama_tiny.py wrote for one case. */
static char *case_path(const char *name, const char *ext) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s%s", work_dir, name, ext);
  return buf;
}

/* max |a - b| over n floats */
static double max_abs_diff(const float *a, const float *b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= m)) m = d; /* NaN wins */
  }
  return m;
}

/* The reference's top-1 is clear at row r: a margin above the tolerance
 * (ties within rounding are no evidence either way). */
static int clear_top1(const float *row, int64_t V, double tol) {
  int64_t b = argmax_f32(row, V);
  for (int64_t i = 0; i < V; i++)
    if (i != b && row[b] - row[i] < 2 * tol) return 0;
  return 1;
}

/* Nodes of the compiled decoder graph of `name` (RLX_DUMP=legalize, read
 * back from stderr) and how many are Transposes or Casts of a static shape.
 * Every run-time tensor has the symbolic token count in its shape; a
 * static one would be a weight transposed or converted on every run. */
static void count_weight_copies(const char *name, int *nodes, int *static_shaped) {
  *nodes = *static_shaped = 0;
  char dump[4096];
  snprintf(dump, sizeof dump, "%s/%s.dump", work_dir, name);
  fflush(stderr);
  int saved = dup(2), fd = open(dump, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (saved < 0 || fd < 0) {
    CHECK(0, "%s: cannot redirect stderr to %s", name, dump);
    return;
  }
  dup2(fd, 2);
  close(fd);
  setenv("RLX_DUMP", "legalize", 1);
  rlx_model_file *f = NULL;
  rlx_llm *m = NULL;
  rlx_status st = rlx_model_file_open(case_path(name, ".gguf"), &f);
  if (st == RLX_OK) st = rlx_llm_load(f, NULL, &m);
  unsetenv("RLX_DUMP");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  CHECK(st == RLX_OK, "%s: load with RLX_DUMP: %s", name, rlx_last_error());
  rlx_llm_free(m);
  rlx_model_file_close(f);
  FILE *in = fopen(dump, "r");
  char line[1024];
  while (in && fgets(line, sizeof line, in)) {
    *nodes += strstr(line, " = ") != NULL;
    const char *type = strstr(line, "= Transpose{") || strstr(line, "= Cast{") ? strstr(line, " : ") : NULL;
    if (!type) continue;
    const char *dims = strchr(type, '[');
    int symbolic = 0;
    for (const char *c = dims; c && *c && *c != ']'; c++) symbolic |= (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z');
    *static_shaped += !symbolic;
  }
  if (in) fclose(in);
}

/* A 16-bit KV cache (rlx_llm_options.cache_type) against the F32 one:
 * a prefill of n/4 tokens and greedy decode to 2n positions, the F16 run
 * fed the F32 run's tokens; every step's logits within tol of the F32
 * run's, and the same argmax wherever the F32 run's best two logits are
 * apart by more than 2 tol (a split at a near-tie is no evidence). */
static void check_cache_type(const char *name, const rlx_model_file *f, const int32_t *tokens, int64_t n, int64_t V,
                             rlx_dtype cache_t, double tol) {
  const int64_t total = 2 * n, k = n / 4;
  int32_t *seq = malloc((size_t)total * sizeof *seq);
  float *ref = malloc((size_t)(total * V) * sizeof *ref), *row = malloc((size_t)V * sizeof *row);
  rlx_llm *m32 = NULL, *m16 = NULL;
  rlx_llm_options o32 = {{RLX_DEVICE_CPU, 0, 0, 0, NULL}, 0, NULL, NULL, RLX_F32, 0, 0, 0, 0, NULL}, o16 = o32;
  o16.cache_type = cache_t;
  rlx_status st = seq && ref && row ? rlx_llm_load(f, &o32, &m32) : RLX_ERR_NOMEM;
  if (st == RLX_OK) st = rlx_llm_load(f, &o16, &m16);
  CHECK(st == RLX_OK, "%s: load with a %s cache: %s", name, rlx_dtype_name(cache_t), rlx_last_error());
  rlx_llm_info info;
  CHECK(st || (rlx_llm_get_info(m16, &info) == RLX_OK && info.kv_cache_type == cache_t &&
               info.kv_cache_bytes == (size_t)(2 * info.n_layer * info.n_ctx * info.n_head_kv * info.head_dim) * 2),
        "%s: info of the %s cache", name, rlx_dtype_name(cache_t));
  /* the F32 run: prompt, then greedy */
  for (int64_t i = 0; i < k && seq; i++) seq[i] = tokens[i];
  if (st == RLX_OK) st = rlx_llm_eval(m32, seq, k, 0, ref + (k - 1) * V);
  for (int64_t p = k; p < total && st == RLX_OK; p++) {
    seq[p] = (int32_t)argmax_f32(ref + (p - 1) * V, V);
    st = rlx_llm_eval(m32, &seq[p], 1, 0, ref + p * V);
  }
  double worst = 0;
  int agree = 0, clear = 0;
  if (st == RLX_OK) st = rlx_llm_eval(m16, seq, k, 0, row);
  for (int64_t p = k - 1; p < total && st == RLX_OK; p++) {
    if (p >= k) st = rlx_llm_eval(m16, &seq[p], 1, 0, row);
    const float *r = ref + p * V;
    worst = fmax(worst, max_abs_diff(row, r, V));
    if (clear_top1(r, V, tol)) clear++, agree += argmax_f32(row, V) == argmax_f32(r, V);
  }
  CHECK(st == RLX_OK && worst <= tol && agree == clear, "%s: %s cache vs f32: logits differ by %g (tol %g), argmax "
        "agrees at %d of %d clear steps: %s", name, rlx_dtype_name(cache_t), worst, tol, agree, clear,
        st ? rlx_last_error() : "");
  printf("%s: %s cache, %lld steps: max |%s - f32| %.3g, argmax %d/%d\n", name, rlx_dtype_name(cache_t),
         (long long)(total - k + 1), rlx_dtype_name(cache_t), worst, agree, clear);
  rlx_llm_free(m32);
  rlx_llm_free(m16);
  free(seq);
  free(ref);
  free(row);
}

static void check_good(const char *name, int64_t n, int64_t V, double tol_rel) {
  int32_t *tokens = read_file_sized(case_path(name, ".tokens"), (size_t)n * sizeof(int32_t));
  float *ref = read_file_sized(case_path(name, exact ? ".exact" : ".logits"), (size_t)(n * V) * sizeof(float));
  float *got = malloc((size_t)(n * V) * sizeof(float));
  float *step = malloc((size_t)V * sizeof(float));
  rlx_model_file *f = NULL;
  rlx_llm *m = NULL;
  CHECK(tokens && ref && got && step, "%s: reference files", name);
  rlx_status st = tokens && ref ? rlx_model_file_open(case_path(name, ".gguf"), &f) : RLX_ERR_IO;
  CHECK(st == RLX_OK, "%s: open: %s", name, rlx_last_error());
  if (st == RLX_OK) st = rlx_llm_load(f, NULL, &m);
  CHECK(st == RLX_OK, "%s: load: %s", name, rlx_last_error());
  if (st) goto done;

  /* 0. no run transposes or converts a weight */
  int nodes, weight_copies;
  count_weight_copies(name, &nodes, &weight_copies);
  CHECK(nodes > 0 && weight_copies == 0, "%s: %d of the %d nodes of the compiled graph are transposes or casts of "
        "a static shape (a weight copied on every run)", name, weight_copies, nodes);

  rlx_llm_info info;
  CHECK(rlx_llm_get_info(m, &info) == RLX_OK && info.n_vocab == V && info.n_layer == 2 && info.n_head == 4 &&
            info.n_head_kv == 2 && info.head_dim == 16 && info.n_ctx == 320 && info.weight_bytes > 0,
        "%s: info", name);
  CHECK(rlx_llm_vocab_size(m) == V, "%s: vocab", name);

  /* 1. every position of one prefill against NumPy */
  double ref_max = 0;
  for (int64_t i = 0; i < n * V; i++) ref_max = fmax(ref_max, fabs(ref[i]));
  const double tol = (exact ? 1e-4 : tol_rel) * ref_max;
  st = rlx_llm_eval(m, tokens, n, 1, got);
  CHECK(st == RLX_OK, "%s: prefill: %s", name, rlx_last_error());
  double worst = max_abs_diff(got, ref, n * V);
  int agree = 0, clear = 0;
  for (int64_t p = 0; p < n; p++) {
    if (!clear_top1(ref + p * V, V, tol)) continue;
    clear++;
    agree += argmax_f32(got + p * V, V) == argmax_f32(ref + p * V, V);
  }
  CHECK(worst <= tol, "%s: max |rlx - numpy| = %g > %g (largest logit %g)", name, worst, tol, ref_max);
  CHECK(agree == clear && clear >= 3, "%s: top-1 agrees at %d of %d clear positions (of %lld)", name, agree,
        clear, (long long)n);
  CHECK(rlx_llm_n_past(m) == n, "%s: n_past %lld after prefill", name, (long long)rlx_llm_n_past(m));
  printf("%s: %lld positions, max |rlx - numpy| %.3g (largest logit %.3g), top-1 %d/%d\n", name, (long long)n,
         worst, ref_max, agree, clear);

  /* 2. prefill a prefix, decode the rest one token at a time */
  const int64_t k = 7;
  CHECK(rlx_llm_truncate(m, 0) == RLX_OK, "%s: truncate", name);
  float *prefix = malloc((size_t)V * sizeof(float));
  st = prefix ? rlx_llm_eval(m, tokens, k, 0, prefix) : RLX_ERR_NOMEM;
  CHECK(st == RLX_OK && max_abs_diff(prefix, got + (k - 1) * V, V) <= 1e-4 * ref_max + 1e-5,
        "%s: last logits of a %lld-token prefill differ from the full prefill's by %g", name, (long long)k,
        prefix ? max_abs_diff(prefix, got + (k - 1) * V, V) : -1.0);
  free(prefix);
  double dec_worst = 0;
  for (int64_t p = k; p < n && st == RLX_OK; p++) {
    st = rlx_llm_eval(m, &tokens[p], 1, 0, step);
    dec_worst = fmax(dec_worst, max_abs_diff(step, got + p * V, V));
  }
  CHECK(st == RLX_OK && dec_worst <= 1e-4 * ref_max + 1e-5, "%s: decode vs prefill logits differ by %g: %s", name,
        dec_worst, rlx_last_error());

  /* 3. plans: decode on to position 127 stays in the first bucket (T =
   * 128), position 128 needs the next one */
  int64_t plans = rlx_llm_plans_built(m);
  int32_t t = tokens[0];
  for (int64_t p = n; p < 128 && st == RLX_OK; p++) {
    st = rlx_llm_eval(m, &t, 1, 0, step);
    t = (int32_t)argmax_f32(step, V);
  }
  CHECK(st == RLX_OK && rlx_llm_plans_built(m) == plans, "%s: %lld decode steps built %lld plans: %s", name,
        (long long)(128 - n), (long long)(rlx_llm_plans_built(m) - plans), rlx_last_error());
  for (int64_t p = 128; p < 260 && st == RLX_OK; p++) {
    st = rlx_llm_eval(m, &t, 1, 0, step);
    t = (int32_t)argmax_f32(step, V);
  }
  CHECK(st == RLX_OK && rlx_llm_plans_built(m) == plans + 2, "%s: crossing two buckets built %lld plans: %s", name,
        (long long)(rlx_llm_plans_built(m) - plans), rlx_last_error());
  printf("%s: %lld plans after prefills and 253 decode steps\n", name, (long long)rlx_llm_plans_built(m));

  /* 4. truncating back gives the same logits again */
  CHECK(rlx_llm_truncate(m, k) == RLX_OK, "%s: truncate to %lld", name, (long long)k);
  st = rlx_llm_eval(m, &tokens[k], 1, 0, step);
  CHECK(st == RLX_OK && max_abs_diff(step, got + k * V, V) <= 1e-4 * ref_max + 1e-5,
        "%s: after truncate: %g", name, max_abs_diff(step, got + k * V, V));

  /* 5. 16-bit KV caches (tolerances: a few roundings of the cache dtype,
   * or the case's own where activations are quantized: a key rounded
   * differently can move an activation across a Q8 rounding step) */
  check_cache_type(name, f, tokens, n, V, RLX_F16, fmax(2e-3, exact ? 0 : tol_rel) * ref_max);
  check_cache_type(name, f, tokens, n, V, RLX_BF16, fmax(2e-2, exact ? 0 : tol_rel) * ref_max);
  rlx_llm_options bad_cache = {{RLX_DEVICE_CPU, 0, 0, 0, NULL}, 0, NULL, NULL, RLX_F64, 0, 0, 0, 0, NULL};
  rlx_llm *no = NULL;
  CHECK_ERR(rlx_llm_load(f, &bad_cache, &no), RLX_ERR_INVALID, "cache_type");

  /* 6. errors */
  const int32_t bad_token = (int32_t)V;
  CHECK_ERR(rlx_llm_eval(m, &bad_token, 1, 0, step), RLX_ERR_INVALID, "vocabulary");
  CHECK_ERR(rlx_llm_truncate(m, rlx_llm_n_past(m) + 1), RLX_ERR_INVALID, "truncate");
  CHECK_ERR(rlx_llm_eval(m, tokens, 0, 0, step), RLX_ERR_INVALID, "tokens");
  CHECK(rlx_llm_truncate(m, info.n_ctx - 1) == RLX_ERR_INVALID, "%s: truncate forward", name);
  int32_t *many = calloc((size_t)info.n_ctx, sizeof *many);
  CHECK_ERR(many ? rlx_llm_eval(m, many, info.n_ctx, 0, step) : RLX_ERR_NOMEM, RLX_ERR_INVALID, "context");
  free(many);
  CHECK(rlx_llm_n_past(m) == k + 1, "%s: a failed eval keeps n_past", name);

done:
  rlx_llm_free(m);
  rlx_model_file_close(f);
  free(tokens);
  free(ref);
  free(got);
  free(step);
}

static void check_bad(const char *name, const char *status) {
  rlx_model_file *f = NULL;
  rlx_llm *m = NULL;
  rlx_status st = rlx_model_file_open(case_path(name, ".gguf"), &f);
  CHECK(st == RLX_OK, "%s: open: %s", name, rlx_last_error());
  if (st) return;
  st = rlx_llm_load(f, NULL, &m);
  CHECK(st != RLX_OK && !strcmp(rlx_status_name(st), status) && m == NULL, "%s: load gave %s (want %s): %s", name,
        rlx_status_name(st), status, rlx_last_error());
  printf("%s: %s: %s\n", name, rlx_status_name(st), rlx_last_error());
  rlx_llm_free(m);
  rlx_model_file_close(f);
}

int main(int argc, char **argv) {
  if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "--exact"))) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR WORK_DIR [--exact]\n", argv[0]);
    return 2;
  }
  exact = argc == 5;
  work_dir = argv[3];
  if (run_ref_script(argv[1], argv[2], "llama_tiny.py", "--out \"%s\"%s", argv[3], exact ? "" : " --hf-check"))
    return 1;
  CHECK(rlx_llm_load(NULL, NULL, NULL) == RLX_ERR_INVALID, "NULL out");
  FILE *cases = fopen(case_path("cases", ".txt"), "r");
  CHECK(cases != NULL, "cases.txt");
  char line[512];
  while (cases && fgets(line, sizeof line, cases)) {
    char kind[16], name[128], status[64];
    long long n, V;
    double tol;
    if (sscanf(line, "good %127s %lld %lld %lf", name, &n, &V, &tol) == 4) check_good(name, n, V, tol);
    else if (sscanf(line, "bad %127s %63s", name, status) == 2) check_bad(name, status);
    else if (sscanf(line, "%15s", kind) == 1) CHECK(0, "bad line in cases.txt: %s", line);
  }
  if (cases) fclose(cases);
  return check_report();
}
