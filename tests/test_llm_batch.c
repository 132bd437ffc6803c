/* test_llm_batch.c — several sequences in one decoder (rlx_llm_decode and
 * the rlx_llm_seq_* calls) on the tiny random-weight GGUF files of
 * llama_tiny.py.
 *
 * usage: test_llm_batch PYTHON REF_DIR WORK_DIR
 *
 * For each of a plain, a quantized and a neox case:
 *   - staggered: three sequences fed the reference tokens, starting at
 *     different steps, with prefill chunks of one and decode tokens of the
 *     others in one batch, entries interleaved: every logit row against
 *     the NumPy reference at its position (the case's tolerance);
 *   - together vs alone: three prompts prefilled in one batch and greedily
 *     decoded together against each decoded alone by its own decoder
 *     (rlx_llm_eval; together on 3 threads, alone on 1): the same
 *     tokens, logits within 1e-4 of the largest,
 *     and with quantized weights (llama_q8_0) the same bits: the CPU's
 *     attention and quantized products give a row the same bits whatever
 *     else runs beside it (float weights meet the GEMM, whose blocking
 *     depends on the rows); no plan built once decode runs within one
 *     key-length bucket;
 *   - a pool with free cells only below a sequence's last cell: the batch
 *     packs it, and the sequences continue as alone;
 *   - 300 positions after another sequence's cells, prefilled in pieces
 *     and decoded on 3 threads, against one prefill alone on 1;
 *   - rlx_llm_seq_copy of a prefix and rlx_llm_seq_truncate continue as
 *     the sequence alone; save and load (into another sequence) continue
 *     with the same logits; a damaged, cut or foreign file is
 *     RLX_ERR_FORMAT and changes nothing;
 *   - context shift: a prompt after d discarded tokens, shifted down by d,
 *     has the layer-0 keys of the prompt run at position 0 (read from the
 *     saved states; layer 0's keys depend on the token and the position
 *     only), with F32, F16 and BF16 caches, and shifting a sequence that
 *     shares cells leaves the other's state byte for byte as it was;
 *   - a prompt placed after 100 cells of another sequence: the same logits,
 *     bit for bit, as at cell 0 of a decoder of its own;
 *   - bad batches (sequence, token, context) are RLX_ERR_INVALID and run
 *     nothing. */
#include "check.h"
#include "ref_data.h"
#include "ref_script.h"
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 20  /* greedy steps of together vs alone */

static char *case_path(const char *name, const char *ext) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s%s", work_dir, name, ext);
  return buf;
}

static rlx_llm *load_threads(const rlx_model_file *f, int32_t n_seq, int64_t n_ctx, rlx_dtype cache, int threads) {
  rlx_llm_options o = {{RLX_DEVICE_CPU, threads, 0, 0, NULL}, n_ctx, NULL, NULL, cache, n_seq, 0, 0, 0, NULL};
  rlx_llm *m = NULL;
  rlx_status st = rlx_llm_load(f, &o, &m);
  CHECK(st == RLX_OK, "load n_seq %d: %s", n_seq, rlx_last_error());
  return m;
}

static rlx_llm *load(const rlx_model_file *f, int32_t n_seq, int64_t n_ctx, rlx_dtype cache) {
  return load_threads(f, n_seq, n_ctx, cache, 1);
}

/* Three sequences fed tokens[0..n) from steps 0, 1 and 3, seq 0 first as a
 * prefill chunk of 16, seq 1 in chunks of 7, seq 2 one a step; entries
 * round robin. Every row against ref at its position. */
static void check_staggered(const char *name, const rlx_model_file *f, const int32_t *tokens, const float *ref,
                            int64_t n, int64_t V, double tol) {
  rlx_llm *m = load(f, 3, 64, RLX_F32);
  if (!m) return;
  const int start[3] = {0, 1, 3}, chunk[3] = {16, 7, 1};
  int64_t done[3] = {0, 0, 0};
  int32_t tok[64], seq[64];
  int64_t pos[64];
  float *logits = malloc((size_t)(64 * V) * sizeof *logits);
  double worst = 0;
  int rows = 0;
  for (int step = 0; done[0] < n || done[1] < n || done[2] < n; step++) {
    int64_t k = 0, left[3];
    for (int s = 0; s < 3; s++) {
      int64_t c = s == 0 && step > 0 ? 1 : chunk[s];
      left[s] = step < start[s] ? 0 : (n - done[s] < c ? n - done[s] : c);
    }
    for (int more = 1; more;) { /* round robin */
      more = 0;
      for (int s = 0; s < 3; s++)
        if (left[s]) {
          tok[k] = tokens[done[s]];
          seq[k] = s;
          pos[k++] = done[s]++;
          more |= --left[s] > 0;
        }
    }
    if (!k) continue;
    rlx_llm_batch b = {k, tok, seq, NULL};
    rlx_status st = rlx_llm_decode(m, &b, logits);
    CHECK(st == RLX_OK, "%s: staggered step %d: %s", name, step, rlx_last_error());
    if (st) break;
    for (int64_t i = 0; i < k; i++) {
      const float *want = ref + pos[i] * V;
      double d = max_diff_f32(logits + i * V, want, V) / max_abs_f32(want, V);
      worst = d > worst ? d : worst;
      rows++;
    }
  }
  CHECK(worst <= tol, "%s: staggered: worst row %.3g of the largest reference logit (tolerance %.3g)", name, worst,
        tol);
  for (int s = 0; s < 3; s++) {
    CHECK(rlx_llm_seq_n_past(m, s) == n, "%s: sequence %d holds %lld", name, s, (long long)rlx_llm_seq_n_past(m, s));
    const int32_t *held = rlx_llm_seq_tokens(m, s);
    CHECK(held && !memcmp(held, tokens, (size_t)n * sizeof *tokens), "%s: sequence %d's tokens", name, s);
  }
  printf("%s: staggered, %d rows: worst %.3g of the largest logit\n", name, rows, worst);
  free(logits);
  rlx_llm_free(m);
}

typedef struct {
  int64_t n_prompt;
  int32_t out[STEPS];   /* greedy tokens */
  float *logits;        /* [STEPS + 1, V]: after the prompt, then after each token */
} alone_run;

/* Prompt s: tokens[5 s .. 5 s + 8 + 3 s). */
static const int32_t *prompt_of(const int32_t *tokens, int s, int64_t *len) {
  *len = 8 + 3 * s;
  return tokens + 5 * s;
}

static void run_alone(const rlx_model_file *f, const int32_t *tokens, int s, int64_t V, alone_run *r) {
  rlx_llm *m = load(f, 1, 64, RLX_F32);
  r->logits = calloc((size_t)((STEPS + 1) * V), sizeof *r->logits);
  if (!m || !r->logits) return;
  const int32_t *p = prompt_of(tokens, s, &r->n_prompt);
  rlx_status st = rlx_llm_eval(m, p, r->n_prompt, 0, r->logits);
  for (int i = 0; i < STEPS && st == RLX_OK; i++) {
    r->out[i] = (int32_t)argmax_f32(r->logits + i * V, V);
    st = rlx_llm_eval(m, &r->out[i], 1, 0, r->logits + (i + 1) * V);
  }
  CHECK(st == RLX_OK, "alone %d: %s", s, rlx_last_error());
  rlx_llm_free(m);
}

/* The best two of a row are apart by more than gap. */
static int clear_best(const float *row, int64_t V, double gap) {
  int64_t b = argmax_f32(row, V);
  for (int64_t i = 0; i < V; i++)
    if (i != b && row[b] - row[i] <= gap) return 0;
  return 1;
}

/* Reads a saved state's layer-0 K and V rows (the layout of
 * llm_seq_state.c: 32 header bytes, n tokens, then per layer K rows and V
 * rows of row_bytes each) as floats, from a cache of dtype t. */
static float *state_rows(const char *path, rlx_dtype t, int64_t *n, int64_t *row_floats) {
  size_t len;
  unsigned char *b = read_file(path, &len);
  if (!b || len < 40) {
    free(b);
    return NULL;
  }
  uint32_t row_bytes;
  int64_t np;
  memcpy(&row_bytes, b + 20, 4);
  memcpy(&np, b + 24, 8);
  const size_t es = t == RLX_F32 ? 4 : 2;
  *n = np;
  *row_floats = row_bytes / es;
  size_t at = 32 + 4 * (size_t)np, need = 2 * (size_t)np * row_bytes, count = need / es;
  float *rows = len >= at + need ? malloc(count * sizeof *rows) : NULL;
  for (size_t i = 0; rows && i < count; i++) {
    uint16_t h;
    if (es == 4) memcpy(&rows[i], b + at + 4 * i, 4);
    else memcpy(&h, b + at + 2 * i, 2), rows[i] = t == RLX_F16 ? rlx_f16_to_f32(h) : rlx_bf16_to_f32(h);
  }
  free(b);
  return rows;
}

static void check_state_files(const char *name, rlx_llm *m, int64_t V) {
  char path[4096], bad[4096];
  snprintf(path, sizeof path, "%s", case_path(name, ".state"));
  snprintf(bad, sizeof bad, "%s", case_path(name, ".bad"));
  int64_t n0 = rlx_llm_seq_n_past(m, 0);
  rlx_status st = rlx_llm_seq_save(m, 0, path);
  CHECK(st == RLX_OK, "%s: save: %s", name, rlx_last_error());
  CHECK_ERR(rlx_llm_seq_load(m, 1, case_path(name, ".missing")), RLX_ERR_IO, "cannot open");
  st = rlx_llm_seq_load(m, 1, path);
  CHECK(st == RLX_OK, "%s: load: %s", name, rlx_last_error());
  CHECK(rlx_llm_seq_n_past(m, 1) == n0, "%s: loaded %lld positions of %lld", name,
        (long long)rlx_llm_seq_n_past(m, 1), (long long)n0);
  int32_t tok[2] = {3, 3}, seq[2] = {0, 1};
  float *logits = malloc((size_t)(2 * V) * sizeof *logits);
  rlx_llm_batch b = {2, tok, seq, NULL};
  st = rlx_llm_decode(m, &b, logits);
  CHECK(st == RLX_OK, "%s: decode after load: %s", name, rlx_last_error());
  double d = max_diff_f32(logits, logits + V, V) / max_abs_f32(logits, V);
  CHECK(d <= 1e-5, "%s: the loaded sequence's logits differ from the saved one's by %.3g", name, d);

  /* damaged, cut and foreign files change nothing */
  size_t len;
  unsigned char *bytes = read_file(path, &len);
  for (int kind = 0; bytes && kind < 3; kind++) {
    FILE *out = fopen(bad, "wb");
    unsigned char saved = bytes[len / 2];
    if (kind == 0) bytes[len / 2] ^= 0x40;
    size_t wrote = fwrite(bytes, 1, kind == 1 ? len - 9 : kind == 2 ? 12 : len, out);
    fclose(out);
    bytes[len / 2] = saved;
    (void)wrote;
    int64_t before = rlx_llm_seq_n_past(m, 2);
    CHECK_ERR(rlx_llm_seq_load(m, 2, bad), RLX_ERR_FORMAT, "rlx_llm_seq_load");
    CHECK(rlx_llm_seq_n_past(m, 2) == before, "%s: a bad file changed sequence 2", name);
  }
  free(bytes);
  free(logits);
}

/* Bitwise equality where the weights are quantized (see the top). */
static int exact_case(const char *name) { return !strcmp(name, "llama_q8_0"); }

static void check_together(const char *name, const rlx_model_file *f, const int32_t *tokens, int64_t V) {
  alone_run alone[3];
  memset(alone, 0, sizeof alone);
  for (int s = 0; s < 3; s++) run_alone(f, tokens, s, V, &alone[s]);
  /* 3 threads (alone: 1): the attention cuts its rows otherwise */
  rlx_llm *m = load_threads(f, 3, 64, RLX_F32, 3);
  float *logits = malloc((size_t)(3 * V) * sizeof *logits);
  if (!m || !logits) return;
  /* the three prompts in one batch, the last entry of each wanted */
  int32_t tok[64], seq[64];
  int8_t want[64];
  int64_t k = 0;
  for (int s = 0; s < 3; s++) {
    int64_t len;
    const int32_t *p = prompt_of(tokens, s, &len);
    for (int64_t i = 0; i < len; i++, k++) tok[k] = p[i], seq[k] = s, want[k] = i == len - 1;
  }
  rlx_llm_batch b = {k, tok, seq, want};
  rlx_status st = rlx_llm_decode(m, &b, logits);
  CHECK(st == RLX_OK, "%s: prefill together: %s", name, rlx_last_error());
  double worst = 0;
  int same = 0, clear = 0;
  int64_t plans_at_2 = 0;
  for (int i = 0; i <= STEPS && st == RLX_OK; i++) {
    for (int s = 0; s < 3; s++) {
      const float *a = alone[s].logits + i * V;
      double d = max_diff_f32(logits + s * V, a, V) / max_abs_f32(a, V);
      worst = d > worst ? d : worst;
      if (i == STEPS) continue;
      int32_t t = (int32_t)argmax_f32(logits + s * V, V);
      if (clear_best(a, V, 1e-3 * max_abs_f32(a, V))) clear++, same += t == alone[s].out[i];
      tok[s] = alone[s].out[i]; /* alone's tokens: a near-tie cannot fork the runs */
      seq[s] = s;
    }
    if (i == 2) plans_at_2 = rlx_llm_plans_built(m);
    if (i == STEPS) break;
    rlx_llm_batch step = {3, tok, seq, NULL};
    st = rlx_llm_decode(m, &step, logits);
    CHECK(st == RLX_OK, "%s: step %d: %s", name, i, rlx_last_error());
  }
  CHECK(worst <= (exact_case(name) ? 0.0 : 1e-4), "%s: together vs alone: worst row %.3g of the largest logit",
        name, worst);
  CHECK(same == clear && (!exact_case(name) || clear == 3 * STEPS), "%s: greedy tokens: %d of %d clear choices agree",
        name, same, clear);
  CHECK(rlx_llm_plans_built(m) == plans_at_2, "%s: decode built %lld plans after step 2", name,
        (long long)(rlx_llm_plans_built(m) - plans_at_2));
  printf("%s: together vs alone: worst %.3g of the largest logit, %d/%d greedy tokens, %lld plans\n", name, worst,
         same, clear, (long long)rlx_llm_plans_built(m));

  /* sequence 2 := sequence 0's prompt and first 5 tokens; it continues as 0 alone */
  const int64_t k0 = alone[0].n_prompt + 5;
  st = rlx_llm_seq_copy(m, 0, 2, k0);
  CHECK(st == RLX_OK && rlx_llm_seq_n_past(m, 2) == k0, "%s: copy: %s", name, rlx_last_error());
  int32_t two = 2;
  rlx_llm_batch one = {1, &alone[0].out[5], &two, NULL};
  st = rlx_llm_decode(m, &one, logits);
  double d = max_diff_f32(logits, alone[0].logits + 6 * V, V) / max_abs_f32(alone[0].logits + 6 * V, V);
  const double tol = exact_case(name) ? 0.0 : 1e-4;
  CHECK(st == RLX_OK && d <= tol, "%s: after a copied prefix: %.3g (%s)", name, d, rlx_last_error());
  /* sequence 1 cut back to its prompt and 3 tokens continues as 1 alone */
  st = rlx_llm_seq_truncate(m, 1, alone[1].n_prompt + 3);
  int32_t s1 = 1;
  rlx_llm_batch again = {1, &alone[1].out[3], &s1, NULL};
  if (st == RLX_OK) st = rlx_llm_decode(m, &again, logits);
  d = max_diff_f32(logits, alone[1].logits + 4 * V, V) / max_abs_f32(alone[1].logits + 4 * V, V);
  CHECK(st == RLX_OK && d <= tol, "%s: after a truncate: %.3g (%s)", name, d, rlx_last_error());
  CHECK_ERR(rlx_llm_seq_truncate(m, 1, 1000), RLX_ERR_INVALID, "outside");
  CHECK_ERR(rlx_llm_seq_copy(m, 0, 5, 1), RLX_ERR_INVALID, "sequence 5");

  /* bad batches run nothing */
  int64_t before[3];
  for (int s = 0; s < 3; s++) before[s] = rlx_llm_seq_n_past(m, s);
  int32_t bt[2] = {1, 1}, bs[2] = {0, 3};
  rlx_llm_batch bad = {2, bt, bs, NULL};
  CHECK_ERR(rlx_llm_decode(m, &bad, logits), RLX_ERR_INVALID, "sequence 3");
  bs[1] = 1;
  bt[1] = (int32_t)V;
  CHECK_ERR(rlx_llm_decode(m, &bad, logits), RLX_ERR_INVALID, "outside the vocabulary");
  int32_t many[64] = {0}, zeros[64] = {0};
  rlx_llm_batch over = {64, many, zeros, NULL};
  CHECK_ERR(rlx_llm_decode(m, &over, NULL), RLX_ERR_INVALID, "context of 64");
  for (int s = 0; s < 3; s++)
    CHECK(rlx_llm_seq_n_past(m, s) == before[s], "%s: a bad batch moved sequence %d", name, s);

  check_state_files(name, m, V);
  for (int s = 0; s < 3; s++) free(alone[s].logits);
  free(logits);
  rlx_llm_free(m);
}

/* Logits of the last of tokens[0..n) run alone from position 0. */
static void alone_last(const rlx_model_file *f, const int32_t *tokens, int64_t n, float *out) {
  rlx_llm *m = load(f, 1, 16, RLX_F32);
  rlx_status st = m ? rlx_llm_eval(m, tokens, n, 0, out) : RLX_ERR_INVALID;
  CHECK(st == RLX_OK, "alone: %s", rlx_last_error());
  rlx_llm_free(m);
}

/* Three sequences of 16 positions over 48 cells: 0 and 1 cut back to 4,
 * 2 holding cells 32..46. A batch of one token of 0 and of 2 finds one
 * free cell after 2's (cell 47): 0's token goes there, and 2's needs the
 * pool packed. All three continue as alone. */
static void check_packed(const char *name, const rlx_model_file *f, const int32_t *tokens, int64_t V) {
  rlx_llm *m = load(f, 3, 16, RLX_F32);
  float *got = malloc((size_t)(2 * V) * sizeof *got), *want = malloc((size_t)V * sizeof *want);
  if (!m || !got || !want) goto done;
  const int32_t *a = tokens, *c = tokens + 20;
  int32_t tok[47], seq[47];
  int8_t none[47] = {0};
  for (int i = 0; i < 47; i++) tok[i] = i < 16 ? a[i] : i < 32 ? tokens[10 + i - 16] : c[i - 32], seq[i] = i / 16;
  rlx_llm_batch b = {47, tok, seq, none};
  rlx_status st = rlx_llm_decode(m, &b, NULL);
  if (st == RLX_OK) st = rlx_llm_seq_truncate(m, 0, 4);
  if (st == RLX_OK) st = rlx_llm_seq_truncate(m, 1, 4);
  int32_t t2[2] = {a[4], c[15]}, s2[2] = {0, 2};
  rlx_llm_batch step = {2, t2, s2, NULL};
  if (st == RLX_OK) st = rlx_llm_decode(m, &step, got);
  CHECK(st == RLX_OK, "%s: packed: %s", name, rlx_last_error());
  if (st) goto done;
  const double tol = exact_case(name) ? 0.0 : 1e-4;
  alone_last(f, a, 5, want);
  double d = max_diff_f32(got, want, V) / max_abs_f32(want, V);
  CHECK(d <= tol, "%s: packed: sequence 0 off by %.3g", name, d);
  alone_last(f, c, 16, want);
  d = max_diff_f32(got + V, want, V) / max_abs_f32(want, V);
  CHECK(d <= tol, "%s: packed: sequence 2 off by %.3g", name, d);
  /* sequence 1's rows moved too */
  int32_t one = 1, t1 = tokens[14];
  rlx_llm_batch next = {1, &t1, &one, NULL};
  st = rlx_llm_decode(m, &next, got);
  alone_last(f, tokens + 10, 5, want);
  d = max_diff_f32(got, want, V) / max_abs_f32(want, V);
  CHECK(st == RLX_OK && d <= tol, "%s: packed: sequence 1 off by %.3g (%s)", name, d, rlx_last_error());
  CHECK(rlx_llm_seq_n_past(m, 0) == 5 && rlx_llm_seq_n_past(m, 1) == 5 && rlx_llm_seq_n_past(m, 2) == 16,
        "%s: packed: positions %lld %lld %lld", name, (long long)rlx_llm_seq_n_past(m, 0),
        (long long)rlx_llm_seq_n_past(m, 1), (long long)rlx_llm_seq_n_past(m, 2));
done:
  free(got);
  free(want);
  rlx_llm_free(m);
}

/* A sequence of 300 positions (keys cut into ranges of 256 by the CPU
 * attention, split across threads when the items are few): alone on one
 * thread, in one prefill, against after 50 cells of another sequence on
 * 3 threads, prefilled in pieces of 100 then decoded a token at a time. */
static void check_long(const char *name, const rlx_model_file *f, const int32_t *tokens, int64_t n, int64_t V) {
  enum { L = 300, OTHER = 50, STEP = 4 };
  int32_t seq[L], tok[L + STEP];
  for (int64_t i = 0; i < L + STEP; i++) tok[i] = tokens[(i * 7 + 1) % n];
  rlx_llm *alone = load(f, 1, L + STEP, RLX_F32), *pooled = load_threads(f, 2, L + STEP, RLX_F32, 3);
  float *a = malloc((size_t)((STEP + 1) * V) * sizeof *a), *b = malloc((size_t)V * sizeof *b);
  float *scratch = malloc((size_t)(100 * V) * sizeof *scratch);
  rlx_status st = alone && pooled && a && b && scratch ? RLX_OK : RLX_ERR_NOMEM;
  if (st == RLX_OK) st = rlx_llm_eval(alone, tok, L, 0, a);
  for (int i = 0; i < STEP && st == RLX_OK; i++) st = rlx_llm_eval(alone, tok + L + i, 1, 0, a + (i + 1) * V);
  for (int64_t i = 0; i < L; i++) seq[i] = 1;
  rlx_llm_batch other = {OTHER, tok + 1, NULL, NULL};
  if (st == RLX_OK) st = rlx_llm_decode(pooled, &other, scratch);
  for (int64_t i = 0; i < L && st == RLX_OK; i += 100) {
    int8_t want[100] = {0};
    want[99] = 1;
    rlx_llm_batch piece = {100, tok + i, seq, want};
    st = rlx_llm_decode(pooled, &piece, b);
  }
  double worst = st == RLX_OK ? max_diff_f32(a, b, V) / max_abs_f32(a, V) : 0;
  for (int i = 0; i < STEP && st == RLX_OK; i++) {
    rlx_llm_batch one = {1, tok + L + i, seq, NULL};
    st = rlx_llm_decode(pooled, &one, b);
    double d = max_diff_f32(a + (i + 1) * V, b, V) / max_abs_f32(a + (i + 1) * V, V);
    worst = d > worst ? d : worst;
  }
  CHECK(st == RLX_OK, "%s: long: %s", name, rlx_last_error());
  CHECK(worst <= (exact_case(name) ? 0.0 : 1e-4), "%s: long: %.3g of the largest logit", name, worst);
  free(a);
  free(b);
  free(scratch);
  rlx_llm_free(alone);
  rlx_llm_free(pooled);
}

/* A prompt after d other tokens, shifted down by d, against the prompt
 * run from position 0: layer 0's K and V rows, within tol of the largest
 * (an F32 cache: rounding; a 16-bit one: the re-roped keys are rounded to
 * it again, so two units in its last place: 2^-9 for F16, 2^-6 for BF16). */
static void check_shift(const char *name, const rlx_model_file *f, const int32_t *tokens, rlx_dtype cache,
                        double tol) {
  const int64_t d = 6, np = 9;
  rlx_llm *m = load(f, 3, 32, cache);
  if (!m) return;
  int32_t tok[32], seq[32];
  int64_t k = 0;
  for (int64_t i = 0; i < np; i++, k++) tok[k] = tokens[i], seq[k] = 0;
  for (int64_t i = 0; i < d; i++, k++) tok[k] = tokens[20 + i], seq[k] = 1;
  for (int64_t i = 0; i < np; i++, k++) tok[k] = tokens[i], seq[k] = 1;
  int8_t none[32] = {0};
  rlx_llm_batch b = {k, tok, seq, none};
  rlx_status st = rlx_llm_decode(m, &b, NULL);
  CHECK(st == RLX_OK, "%s: shift prefill: %s", name, rlx_last_error());
  /* sequence 2 shares 1's cells; shifting it must not move 1's */
  if (st == RLX_OK) st = rlx_llm_seq_copy(m, 1, 2, d + np);
  char p1[4096], p1b[4096], p2[4096];
  snprintf(p1, sizeof p1, "%s", case_path(name, ".s1"));
  snprintf(p1b, sizeof p1b, "%s", case_path(name, ".s1b"));
  snprintf(p2, sizeof p2, "%s", case_path(name, ".s2"));
  if (st == RLX_OK) st = rlx_llm_seq_save(m, 1, p1);
  if (st == RLX_OK) st = rlx_llm_seq_shift(m, 2, 0, d);
  if (st == RLX_OK) st = rlx_llm_seq_save(m, 1, p1b);
  if (st == RLX_OK) st = rlx_llm_seq_save(m, 0, p2);
  CHECK(st == RLX_OK, "%s: shift: %s", name, rlx_last_error());
  size_t l1, l1b;
  char *a = read_file(p1, &l1), *b2 = read_file(p1b, &l1b);
  CHECK(a && b2 && l1 == l1b && !memcmp(a, b2, l1), "%s: shifting a sequence changed the one it shares cells with",
        name);
  free(a);
  free(b2);
  CHECK(rlx_llm_seq_n_past(m, 2) == np && !memcmp(rlx_llm_seq_tokens(m, 2), tokens, (size_t)np * 4),
        "%s: shifted sequence holds %lld", name, (long long)rlx_llm_seq_n_past(m, 2));
  snprintf(p1, sizeof p1, "%s", case_path(name, ".s3"));
  if (st == RLX_OK) st = rlx_llm_seq_save(m, 2, p1);
  int64_t n_ref = 0, n_sh = 0, w_ref = 0, w_sh = 0;
  float *ref = state_rows(p2, cache, &n_ref, &w_ref), *sh = state_rows(p1, cache, &n_sh, &w_sh);
  CHECK(ref && sh && n_ref == np && n_sh == np && w_ref == w_sh, "%s: state files", name);
  if (ref && sh && n_ref == n_sh) {
    /* layer 0: K rows then V rows, np each */
    double worst = 0, big = max_abs_f32(ref, 2 * np * w_ref);
    for (int64_t i = 0; i < 2 * np * w_ref; i++) {
      double diff = fabs((double)ref[i] - (double)sh[i]);
      worst = diff > worst ? diff : worst;
    }
    CHECK(worst <= tol * big, "%s: %s cache: re-roped layer-0 rows differ by %.3g (largest %.3g)", name,
          rlx_dtype_name(cache), worst, big);
    printf("%s: %s cache, shift by %lld: layer-0 K/V within %.3g of the unshifted run's (largest %.3g)\n", name,
           rlx_dtype_name(cache), (long long)d, worst, big);
  }
  free(ref);
  free(sh);
  CHECK_ERR(rlx_llm_seq_shift(m, 2, 5, 100), RLX_ERR_INVALID, "discard 100");
  rlx_llm_free(m);
}

/* A prompt placed after PLACE_AFTER cells of another sequence (its keys
 * across the attention's 64-key block boundary) against the same prompt at
 * cell 0 of another decoder: every row's logits the same bits. A quantized
 * matmul rounds its activations to 8 bits, so a rounding difference here
 * grows to whole logits a few layers on in a real model. */
#define PLACE_AFTER 100
static void check_placed(const char *name, const rlx_model_file *f, const int32_t *tokens, int64_t n, int64_t V,
                         rlx_dtype cache) {
  const int64_t L = n < 40 ? n : 40;
  int32_t other[PLACE_AFTER], seq1[40];
  for (int64_t i = 0; i < PLACE_AFTER; i++) other[i] = tokens[(i * 7 + 3) % n];
  for (int64_t i = 0; i < L; i++) seq1[i] = 1;
  rlx_llm *alone = load(f, 2, 128, cache), *pooled = load(f, 2, 128, cache);
  float *a = calloc((size_t)(L * V), sizeof *a), *b = calloc((size_t)(L * V), sizeof *b);
  if (alone && pooled && a && b) {
    rlx_llm_batch ba = {L, tokens, NULL, NULL}, bo = {PLACE_AFTER, other, NULL, NULL}, bb = {L, tokens, seq1, NULL};
    rlx_status st = rlx_llm_decode(alone, &ba, a);
    float *scratch = malloc((size_t)(PLACE_AFTER * V) * sizeof *scratch);
    if (st == RLX_OK) st = scratch ? rlx_llm_decode(pooled, &bo, scratch) : RLX_ERR_NOMEM;
    if (st == RLX_OK) st = rlx_llm_decode(pooled, &bb, b);
    CHECK(st == RLX_OK, "%s placed: %s", name, rlx_last_error());
    double d = max_diff_f32(a, b, L * V);
    CHECK(d == 0.0, "%s placed after %d cells (%s cache): logits off by %.3g of %.3g", name, PLACE_AFTER,
          rlx_dtype_name(cache), d, max_abs_f32(a, L * V));
    free(scratch);
  }
  free(a);
  free(b);
  rlx_llm_free(alone);
  rlx_llm_free(pooled);
}

static void check_case(const char *name, int64_t n, int64_t V, double tol) {
  rlx_model_file *f = NULL;
  rlx_status st = rlx_model_file_open(case_path(name, ".gguf"), &f);
  CHECK(st == RLX_OK, "%s: open: %s", name, rlx_last_error());
  int32_t *tokens = read_file_sized(case_path(name, ".tokens"), (size_t)n * sizeof *tokens);
  float *ref = read_file_sized(case_path(name, ".logits"), (size_t)(n * V) * sizeof *ref);
  CHECK(tokens && ref, "%s: reference files", name);
  if (st == RLX_OK && tokens && ref) {
    check_staggered(name, f, tokens, ref, n, V, tol);
    check_together(name, f, tokens, V);
    check_packed(name, f, tokens, V);
    check_long(name, f, tokens, n, V);
    check_placed(name, f, tokens, n, V, RLX_F32);
    check_placed(name, f, tokens, n, V, RLX_F16);
    check_shift(name, f, tokens, RLX_F32, 1e-5);
    check_shift(name, f, tokens, RLX_F16, 0x1p-9);
    check_shift(name, f, tokens, RLX_BF16, 0x1p-6);
  }
  free(tokens);
  free(ref);
  rlx_model_file_close(f);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR WORK_DIR\n", argv[0]);
    return 2;
  }
  work_dir = argv[3];
  if (run_ref_script(argv[1], argv[2], "llama_tiny.py", "--out \"%s\"", argv[3])) return 1;
  FILE *cases = fopen(case_path("cases", ".txt"), "r");
  CHECK(cases != NULL, "cases.txt");
  char line[512];
  int ran = 0, foreign = 0;
  while (cases && fgets(line, sizeof line, cases)) {
    char name[128];
    long long n, V;
    double tol;
    if (sscanf(line, "good %127s %lld %lld %lf", name, &n, &V, &tol) != 4) continue;
    if (strcmp(name, "llama_f32") && strcmp(name, "llama_q8_0") && strcmp(name, "qwen2_f16")) continue;
    check_case(name, n, V, tol);
    ran++;
  }
  if (cases) fclose(cases);
  CHECK(ran == 3, "%d of the 3 cases ran", ran);
  /* a state of llama_f32 does not load into qwen2_f16 */
  rlx_model_file *f = NULL;
  rlx_llm *m = NULL;
  if (rlx_model_file_open(case_path("qwen2_f16", ".gguf"), &f) == RLX_OK && (m = load(f, 3, 64, RLX_F32))) {
    CHECK_ERR(rlx_llm_seq_load(m, 0, case_path("llama_f32", ".state")), RLX_ERR_FORMAT, "another model");
    foreign = 1;
  }
  CHECK(foreign, "the foreign state case ran");
  rlx_llm_free(m);
  rlx_model_file_close(f);
  rlx_llm_options o = {{RLX_DEVICE_CPU, 1, 0, 0, NULL}, 16, NULL, NULL, RLX_F32, 65, 0, 0, 0, NULL};
  if (rlx_model_file_open(case_path("llama_f32", ".gguf"), &f) == RLX_OK) {
    CHECK_ERR(rlx_llm_load(f, &o, &m), RLX_ERR_INVALID, "n_seq 65");
    rlx_model_file_close(f);
  }
  return check_report();
}
