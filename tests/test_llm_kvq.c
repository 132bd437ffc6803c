/* test_llm_kvq.c — a decoder with a quantized KV cache
 * (rlx_llm_options.cache_type RLX_Q8_0 and RLX_Q4_0) on the tiny
 * random-weight GGUF files of kv_quant_ref.py (heads of 32).
 *
 * usage: test_llm_kvq PYTHON REF_DIR WORK_DIR
 *
 * For each of q8_0 and q4_0:
 *   - one prefill's logits at every position, and a prefix then token by
 *     token decode, against the NumPy forward pass whose keys and values
 *     go through the gguf package's quantization (kv_quant_ref.py: the
 *     tolerance and why);
 *   - layer 0's K and V rows as the cache holds them (a saved state) are
 *     the bytes the gguf package makes of the same rows of an f32 cache's
 *     state (layer 0's keys and values do not depend on the cache);
 *   - a context shift (the keys decoded, re-roped and quantized again):
 *     layer 0's keys within two quantization steps of the prompt's run
 *     unshifted, its values the same bytes;
 * then greedy decoding with a q8_0 cache against an f32 cache: the logits
 * of every step within twice what the reference shows q8_0 moving them,
 * and the same token at every step whose best two logits are apart by
 * more than that; three sequences decoded together in one q8_0 pool
 * against each alone (Q8_0 weights: the same bits); a head size that is
 * not whole blocks is RLX_ERR_UNSUPPORTED.
 * With RLX_DEVICE=cuda (CTest's test_cuda_llm_kvq; exit 77, a skip,
 * without a device) every decoder runs on the GPU: the same checks, but
 * together vs alone, whose bits CUDA does not keep (test_cuda_batch
 * bounds it there). */
#include "backend/cpu/quant_blocks.h" /* rlx's ggml block decoder (parity_quant_ref: bit-exact with gguf's) */
#include "check.h"
#include "cuda_util.h"
#include "ref_data.h"
#include "ref_script.h"
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 12 /* greedy steps of together vs alone */

static const char *python, *ref_dir;

static char *path_of(const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", work_dir, name);
  return buf;
}

/* The best two of a row are apart by more than gap. */
static int clear_best(const float *row, int64_t V, double gap) {
  int64_t b = argmax_f32(row, V);
  for (int64_t i = 0; i < V; i++)
    if (i != b && row[b] - row[i] <= gap) return 0;
  return 1;
}

static rlx_llm *load(const char *file, rlx_dtype cache, int32_t n_seq, int threads, rlx_model_file **f) {
  rlx_llm_options o = {{RLX_DEVICE_CPU, threads, 0, 0, NULL}, 96, NULL, NULL, cache, n_seq, 0, 0, 0, NULL};
  rlx_llm *m = NULL;
  rlx_status st = rlx_model_file_open(path_of(file), f);
  if (st == RLX_OK) st = rlx_llm_load(*f, &o, &m);
  CHECK(st == RLX_OK, "load %s with a %s cache: %s", file, rlx_dtype_name(cache), rlx_last_error());
  return m;
}

static void unload(rlx_llm *m, rlx_model_file *f) {
  rlx_llm_free(m);
  rlx_model_file_close(f);
}

/* Prefill and decode against the reference; the cache's size. */
static void check_logits(rlx_dtype t, const int32_t *tokens, int64_t n, int64_t V, const float *ref, double tol) {
  rlx_model_file *f = NULL;
  rlx_llm *m = load("kvq_f32.gguf", t, 1, 0, &f);
  float *got = malloc((size_t)(n * V) * sizeof *got);
  rlx_llm_info info;
  if (!m || !got || rlx_llm_get_info(m, &info) != RLX_OK) goto done;
  const size_t row = rlx_dtype_nbytes(t, info.n_head_kv * info.head_dim);
  CHECK(info.kv_cache_type == t && row > 0 && info.kv_cache_bytes == 2 * (size_t)(info.n_layer * info.n_ctx) * row,
        "%s: info: type %s, %zu bytes", rlx_dtype_name(t), rlx_dtype_name(info.kv_cache_type), info.kv_cache_bytes);
  const double top = max_abs_f32(ref, n * V);
  rlx_status st = rlx_llm_eval(m, tokens, n, 1, got);
  double pre = st == RLX_OK ? max_diff_f32(got, ref, n * V) / top : INFINITY;
  CHECK(pre <= tol, "%s: prefill vs the reference: %.3g of the largest logit (tol %g): %s", rlx_dtype_name(t), pre,
        tol, rlx_last_error());
  const int64_t k = 9;
  double dec = 0;
  st = rlx_llm_truncate(m, 0);
  if (st == RLX_OK) st = rlx_llm_eval(m, tokens, k, 0, got);
  for (int64_t p = k; p < n && st == RLX_OK; p++) {
    st = rlx_llm_eval(m, &tokens[p], 1, 0, got + p * V);
    dec = fmax(dec, max_diff_f32(got + p * V, ref + p * V, V) / top);
  }
  CHECK(st == RLX_OK && dec <= tol, "%s: decode vs the reference: %.3g (tol %g): %s", rlx_dtype_name(t), dec, tol,
        rlx_last_error());
  printf("%s cache: prefill %.3g, decode %.3g of the largest logit from the reference (tol %g)\n",
         rlx_dtype_name(t), pre, dec, tol);
done:
  free(got);
  unload(m, f);
}

/* Layer 0's K and V rows of a t cache against the gguf package's
 * quantization of an f32 cache's rows of the same tokens. */
static void check_rows(const int32_t *tokens, int64_t n, int64_t V) {
  const rlx_dtype types[2] = {RLX_Q8_0, RLX_Q4_0};
  rlx_model_file *f = NULL;
  rlx_llm *m = load("kvq_f32.gguf", RLX_F32, 1, 0, &f);
  rlx_llm_info info;
  float *last = malloc((size_t)V * sizeof *last);
  rlx_status st = m && last ? rlx_llm_eval(m, tokens, n, 0, last) : RLX_ERR_INVALID;
  if (st == RLX_OK) st = rlx_llm_get_info(m, &info);
  if (st == RLX_OK) st = rlx_llm_seq_save(m, 0, path_of("kvq.f32.state"));
  CHECK(st == RLX_OK, "f32 state: %s", rlx_last_error());
  unload(m, f);
  if (st) {
    free(last);
    return;
  }
  CHECK(run_ref_script(python, ref_dir, "kv_quant_ref.py", "--rows \"%s/kvq.f32.state\" %lld \"%s/kvq.gguf_rows\"",
                       work_dir, (long long)info.n_layer, work_dir) == 0,
        "kv_quant_ref.py --rows");
  for (int i = 0; i < 2; i++) {
    const rlx_dtype t = types[i];
    char state[4200], rows[4200];
    snprintf(state, sizeof state, "%s/kvq.q.state", work_dir);
    snprintf(rows, sizeof rows, "%s/kvq.gguf_rows.%s", work_dir, rlx_dtype_name(t));
    m = load("kvq_f32.gguf", t, 1, 0, &f);
    st = m ? rlx_llm_eval(m, tokens, n, 0, last) : RLX_ERR_INVALID;
    if (st == RLX_OK) st = rlx_llm_seq_save(m, 0, state);
    unload(m, f);
    const size_t row = rlx_dtype_nbytes(t, info.n_head_kv * info.head_dim), want = 2 * (size_t)n * row;
    size_t len = 0;
    unsigned char *got = read_file(state, &len), *ref = read_file_sized(rows, want);
    const unsigned char *layer0 = got && len >= 32 + 4 * (size_t)n + want ? got + 32 + 4 * (size_t)n : NULL;
    int64_t differ = 0;
    for (int64_t r = 0; layer0 && ref && r < 2 * n; r++) differ += memcmp(layer0 + r * row, ref + r * row, row) != 0;
    CHECK(st == RLX_OK && layer0 && ref && differ == 0, "%s: %lld of %lld layer-0 rows differ from gguf.quants's: %s",
          rlx_dtype_name(t), (long long)differ, (long long)(2 * n), st ? rlx_last_error() : "");
    printf("%s cache: %lld layer-0 K and V rows, %lld differ from gguf.quants's bytes\n", rlx_dtype_name(t),
           (long long)(2 * n), (long long)differ);
    free(got);
    free(ref);
  }
  free(last);
}

/* d tokens, then the prompt, shifted down by d: layer 0's rows of the
 * prompt (which depend on the token and the position only) against the
 * prompt run from position 0. V rows are not touched: the same bytes. A
 * K row was decoded, rotated and quantized again: each value within two
 * steps of its block (|d|, the block's f16 scale: the unshifted row and
 * the decoded one are each within half a step of the exact key, rotation
 * keeps the length of a pair, and quantizing again adds half a step). */
static void check_shift(rlx_dtype t, const int32_t *tokens, int64_t V) {
  const int64_t d = 11, np = 20;
  rlx_model_file *f = NULL, *f2 = NULL;
  rlx_llm *m = load("kvq_f32.gguf", t, 1, 0, &f), *m2 = load("kvq_f32.gguf", t, 1, 0, &f2);
  float *a = malloc((size_t)V * sizeof *a);
  rlx_llm_info info;
  rlx_status st = m && m2 && a ? rlx_llm_get_info(m, &info) : RLX_ERR_NOMEM;
  if (st == RLX_OK) st = rlx_llm_eval(m, tokens + 30, d, 0, a);
  if (st == RLX_OK) st = rlx_llm_eval(m, tokens, np, 0, a);
  if (st == RLX_OK) st = rlx_llm_seq_shift(m, 0, 0, d);
  if (st == RLX_OK) st = rlx_llm_eval(m2, tokens, np, 0, a);
  char shifted[4200], plain[4200];
  snprintf(shifted, sizeof shifted, "%s/kvq.shifted.state", work_dir);
  snprintf(plain, sizeof plain, "%s/kvq.plain.state", work_dir);
  if (st == RLX_OK) st = rlx_llm_seq_save(m, 0, shifted);
  if (st == RLX_OK) st = rlx_llm_seq_save(m2, 0, plain);
  CHECK(st == RLX_OK && rlx_llm_n_past(m) == np, "%s: shift: %s", rlx_dtype_name(t), rlx_last_error());
  const int64_t dim = st ? 0 : info.n_head_kv * info.head_dim, blocks = dim / 32;
  const size_t row = rlx_dtype_nbytes(t, dim), at = 32 + 4 * (size_t)np, block = row / (size_t)(blocks ? blocks : 1);
  size_t la = 0, lb = 0;
  unsigned char *sa = read_file(shifted, &la), *sb = read_file(plain, &lb);
  const int ok = st == RLX_OK && sa && sb && la == lb && la >= at + 2 * (size_t)np * row;
  float *x = malloc((size_t)(dim ? dim : 1) * sizeof *x), *y = malloc((size_t)(dim ? dim : 1) * sizeof *y);
  double worst = 0; /* in steps of the block */
  for (int64_t r = 0; ok && x && y && r < np; r++) {
    const unsigned char *ka = sa + at + (size_t)r * row, *kb = sb + at + (size_t)r * row;
    quant_dequantize_row(t, ka, x, dim);
    quant_dequantize_row(t, kb, y, dim);
    for (int64_t bl = 0; bl < blocks; bl++) {
      uint16_t h;
      memcpy(&h, kb + (size_t)bl * block, 2);
      const double step = fabs(rlx_f16_to_f32(h));
      for (int64_t i = 32 * bl; i < 32 * (bl + 1); i++) {
        const double diff = fabs((double)x[i] - (double)y[i]);
        if (diff > 0) worst = fmax(worst, step > 0 ? diff / step : INFINITY);
      }
    }
  }
  const int v_same = ok && !memcmp(sa + at + (size_t)np * row, sb + at + (size_t)np * row, (size_t)np * row);
  CHECK(ok && x && y && worst <= 2.0 && v_same, "%s: shifted by %lld: layer-0 keys within %.3g steps of the "
        "unshifted run's (at most 2), values %s", rlx_dtype_name(t), (long long)d, worst, v_same ? "the same" : "differ");
  printf("%s cache: shifted by %lld, layer-0 keys within %.3g steps of their blocks of the unshifted run's, values the "
         "same bytes\n", rlx_dtype_name(t), (long long)d, worst);
  free(x);
  free(y);
  free(sa);
  free(sb);
  free(a);
  unload(m, f);
  unload(m2, f2);
}

/* Greedy decoding with a q8_0 cache against an f32 cache (the f32 run's
 * tokens fed to both, so a near-tie cannot fork them). bound: twice the
 * largest move of the logits by the q8_0 cache in the reference. */
static void check_greedy(const int32_t *tokens, int64_t V, double bound) {
  const int64_t k = 12, total = 80;
  rlx_model_file *f32f = NULL, *fq = NULL;
  rlx_llm *m32 = load("kvq_f32.gguf", RLX_F32, 1, 0, &f32f), *mq = load("kvq_f32.gguf", RLX_Q8_0, 1, 0, &fq);
  float *r32 = malloc((size_t)V * sizeof *r32), *rq = malloc((size_t)V * sizeof *rq);
  rlx_status st = m32 && mq && r32 && rq ? RLX_OK : RLX_ERR_NOMEM;
  if (st == RLX_OK) st = rlx_llm_eval(m32, tokens, k, 0, r32);
  if (st == RLX_OK) st = rlx_llm_eval(mq, tokens, k, 0, rq);
  double worst = 0;
  int same = 0, clear = 0;
  for (int64_t p = k; p <= total && st == RLX_OK; p++) {
    const double top = max_abs_f32(r32, V);
    worst = fmax(worst, max_diff_f32(rq, r32, V) / top);
    int32_t t = (int32_t)argmax_f32(r32, V);
    if (clear_best(r32, V, 2 * bound * top)) clear++, same += argmax_f32(rq, V) == t;
    if (p == total) break;
    st = rlx_llm_eval(m32, &t, 1, 0, r32);
    if (st == RLX_OK) st = rlx_llm_eval(mq, &t, 1, 0, rq);
  }
  CHECK(st == RLX_OK && worst <= bound && same == clear && clear >= 10,
        "q8_0 vs f32 cache, greedy: logits differ by %.3g of the largest (bound %.3g), %d of %d clear steps agree: %s",
        worst, bound, same, clear, rlx_last_error());
  printf("q8_0 vs f32 cache: %lld greedy steps, logits within %.3g of the largest (bound %.3g), tokens %d/%d\n",
         (long long)(total - k + 1), worst, bound, same, clear);
  free(r32);
  free(rq);
  unload(m32, f32f);
  unload(mq, fq);
}

/* Three prompts prefilled in one batch and decoded together (3 threads)
 * in a q8_0 pool, against each alone (its own decoder, 1 thread): every
 * row the same bits (Q8_0 weights: rows do not meet in a GEMM blocking). */
static void check_together(const int32_t *tokens, int64_t V) {
  float *alone = calloc((size_t)(3 * (STEPS + 1) * V), sizeof *alone);
  int32_t outs[3][STEPS];
  int64_t lens[3] = {7, 10, 13};
  rlx_status st = alone ? RLX_OK : RLX_ERR_NOMEM;
  for (int s = 0; s < 3 && st == RLX_OK; s++) {
    rlx_model_file *f = NULL;
    rlx_llm *m = load("kvq_q8_0.gguf", RLX_Q8_0, 1, 1, &f);
    float *mine = alone + (size_t)s * (STEPS + 1) * V;
    st = m ? rlx_llm_eval(m, tokens + 4 * s, lens[s], 0, mine) : RLX_ERR_INVALID;
    for (int i = 0; i < STEPS && st == RLX_OK; i++) {
      outs[s][i] = (int32_t)argmax_f32(mine + i * V, V);
      st = rlx_llm_eval(m, &outs[s][i], 1, 0, mine + (i + 1) * V);
    }
    unload(m, f);
  }
  rlx_model_file *f = NULL;
  rlx_llm *m = st == RLX_OK ? load("kvq_q8_0.gguf", RLX_Q8_0, 3, 3, &f) : NULL;
  float *logits = malloc((size_t)(3 * V) * sizeof *logits);
  int32_t tok[64], seq[64];
  int8_t want[64];
  int64_t k = 0;
  for (int s = 0; s < 3; s++)
    for (int64_t i = 0; i < lens[s]; i++, k++) tok[k] = tokens[4 * s + i], seq[k] = s, want[k] = i == lens[s] - 1;
  rlx_llm_batch b = {k, tok, seq, want};
  st = m && logits ? rlx_llm_decode(m, &b, logits) : RLX_ERR_NOMEM;
  int differ = 0, rows = 0;
  for (int i = 0; i <= STEPS && st == RLX_OK; i++) {
    for (int s = 0; s < 3; s++, rows++) {
      differ += memcmp(logits + s * V, alone + ((size_t)s * (STEPS + 1) + i) * V, (size_t)V * sizeof *logits) != 0;
      if (i < STEPS) tok[s] = outs[s][i], seq[s] = s;
    }
    if (i == STEPS) break;
    rlx_llm_batch step = {3, tok, seq, NULL};
    st = rlx_llm_decode(m, &step, logits);
  }
  CHECK(st == RLX_OK && differ == 0 && rows == 3 * (STEPS + 1), "q8_0 cache, together vs alone: %d of %d rows differ: %s",
        differ, rows, rlx_last_error());
  printf("q8_0 cache: 3 sequences together vs alone, %d of %d logit rows differ\n", differ, rows);
  free(logits);
  free(alone);
  unload(m, f);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR WORK_DIR\n", argv[0]);
    return 2;
  }
  const char *dev = getenv("RLX_DEVICE");
  const int on_cuda = dev && !strncmp(dev, "cuda", 4);
  if (on_cuda && !cuda_present()) return CUDA_SKIP;
  python = argv[1];
  ref_dir = argv[2];
  work_dir = argv[3];
  if (run_ref_script(python, ref_dir, "kv_quant_ref.py", "--out \"%s\"", work_dir)) return 1;
  FILE *cases = fopen(path_of("kvq.txt"), "r");
  CHECK(cases != NULL, "kvq.txt");
  char line[256], name[32];
  long long n = 0, V = 0;
  double tol, bound = 0;
  int ran = 0;
  int32_t *tokens = NULL;
  float *f32 = NULL;
  while (cases && fgets(line, sizeof line, cases)) {
    rlx_dtype t;
    if (sscanf(line, "%31s %lld %lld %lf", name, &n, &V, &tol) != 4 || !dtype_of(name, &t)) continue;
    if (!tokens) {
      tokens = read_file_sized(path_of("kvq.tokens"), (size_t)n * sizeof *tokens);
      f32 = read_file_sized(path_of("kvq.f32.logits"), (size_t)(n * V) * sizeof *f32);
    }
    char file[64];
    snprintf(file, sizeof file, "kvq.%s.logits", name);
    float *ref = read_file_sized(path_of(file), (size_t)(n * V) * sizeof *ref);
    CHECK(tokens && f32 && ref, "%s: reference files", name);
    if (!tokens || !f32 || !ref) break;
    check_logits(t, tokens, n, V, ref, tol);
    check_shift(t, tokens, V);
    if (t == RLX_Q8_0) bound = 2 * max_diff_f32(ref, f32, n * V) / max_abs_f32(f32, n * V);
    free(ref);
    ran++;
  }
  if (cases) fclose(cases);
  CHECK(ran == 2 && bound > 0, "%d of the 2 cache types ran", ran);
  if (ran == 2) {
    check_rows(tokens, n, V);
    check_greedy(tokens, V, bound);
    if (!on_cuda) check_together(tokens, V);
  }
  /* heads of 16: not whole blocks of 32 */
  rlx_model_file *f = NULL;
  rlx_llm_options o = {{RLX_DEVICE_CPU, 1, 0, 0, NULL}, 32, NULL, NULL, RLX_Q4_0, 1, 0, 0, 0, NULL};
  rlx_llm *m = NULL;
  if (rlx_model_file_open(path_of("kvq_head16.gguf"), &f) == RLX_OK) {
    CHECK_ERR(rlx_llm_load(f, &o, &m), RLX_ERR_UNSUPPORTED, "q4_0", "head size 16", "multiple of 32");
    o.cache_type = RLX_F16;
    CHECK(rlx_llm_load(f, &o, &m) == RLX_OK, "heads of 16 with an f16 cache: %s", rlx_last_error());
    rlx_llm_free(m);
    rlx_model_file_close(f);
  } else {
    CHECK(0, "kvq_head16.gguf: %s", rlx_last_error());
  }
  free(tokens);
  free(f32);
  return check_report();
}
