/* test_sampler.c — the sampler (src/model/sampler.c) against the NumPy
 * reference of tests/ref/sampler_cases.py.
 *
 * usage: test_sampler PYTHON REF_DIR WORK_DIR
 *
 * For every case: the kept candidate set and its renormalized
 * probabilities (rlx_sampler_candidates) equal the reference's; greedy
 * cases give the argmax through rlx_sampler_sample; statistical cases draw
 * DRAWS tokens and pass a chi-square test against the reference
 * probabilities (and never draw outside the kept set); cases with
 * frequency and presence penalties and logit biases included. Then seeded
 * reproducibility, the penalty window, a banned token, and bad parameters
 * and logits. */
#include "check.h"
#include "ref_script.h"
#include "model/sampler.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DRAWS 20000
#define PROB_TOL 2e-6  /* the sampler's probabilities are float32 */

typedef struct {
  int64_t n_vocab;
  rlx_sampler_params p;
  int statistical;
  int32_t n_hist, n_keep;
  int32_t *hist, *ids;
  rlx_logit_bias *bias;
  float *logits;
  double *probs;
} sampler_case;

static int read_exact(FILE *f, void *dst, size_t n) { return fread(dst, 1, n, f) == n; }

static void *read_array(FILE *f, size_t count, size_t elem) {
  void *p = malloc(count * elem + 1);
  if (p && !read_exact(f, p, count * elem)) {
    free(p);
    p = NULL;
  }
  return p;
}

static int read_case(FILE *f, sampler_case *c) {
  memset(c, 0, sizeof *c);
  float fl[4];
  int32_t in[2];
  uint64_t seed;
  uint8_t stat;
  if (!read_exact(f, &c->n_vocab, 8) || !read_exact(f, fl, 16) || !read_exact(f, in, 8) || !read_exact(f, &seed, 8) ||
      !read_exact(f, &stat, 1) || !read_exact(f, &c->n_hist, 4))
    return 0;
  c->p = (rlx_sampler_params){fl[0], in[0], fl[1], fl[2], fl[3], in[1], seed, 0.0f, 0.0f, 0, NULL};
  c->statistical = stat;
  if (c->n_vocab <= 0 || c->n_vocab > (1 << 24) || c->n_hist < 0 || c->n_hist > (1 << 20)) return 0;
  if (!(c->hist = read_array(f, (size_t)c->n_hist, 4))) return 0;
  int32_t n_bias;
  if (!read_exact(f, &c->p.frequency_penalty, 4) || !read_exact(f, &c->p.presence_penalty, 4) ||
      !read_exact(f, &n_bias, 4) || n_bias < 0 || n_bias > 1024)
    return 0;
  if (!(c->bias = malloc(((size_t)n_bias + 1) * sizeof *c->bias))) return 0;
  for (int32_t i = 0; i < n_bias; i++)
    if (!read_exact(f, &c->bias[i].token, 4) || !read_exact(f, &c->bias[i].bias, 4)) return 0;
  c->p.n_logit_bias = n_bias;
  c->p.logit_bias = c->bias;
  if (!(c->logits = read_array(f, (size_t)c->n_vocab, 4))) return 0;
  if (!read_exact(f, &c->n_keep, 4) || c->n_keep <= 0 || c->n_keep > c->n_vocab) return 0;
  if (!(c->ids = read_array(f, (size_t)c->n_keep, 4))) return 0;
  if (!(c->probs = read_array(f, (size_t)c->n_keep, 8))) return 0;
  return 1;
}

static void free_case(sampler_case *c) {
  free(c->hist);
  free(c->bias);
  free(c->logits);
  free(c->ids);
  free(c->probs);
}

typedef struct {
  int32_t id;
  float   p;
} id_prob;

static int cmp_id(const void *a, const void *b) {
  int32_t x = ((const id_prob *)a)->id, y = ((const id_prob *)b)->id;
  return (x > y) - (x < y);
}

/* Upper quantile of chi-square with df degrees of freedom at a normal
 * z-score (Wilson-Hilferty). */
static double chi2_bound(int df, double z) {
  double a = 2.0 / (9.0 * df);
  double t = 1 - a + z * sqrt(a);
  return df * t * t * t;
}

/* Draws DRAWS tokens and compares the counts with the reference
 * probabilities; categories expected fewer than 5 times are pooled. */
static void check_frequencies(int ci, const sampler_case *c, rlx_sampler *s) {
  int64_t *count = calloc((size_t)c->n_keep, sizeof *count);
  int outside = 0;
  for (int d = 0; d < DRAWS; d++) {
    int32_t t = rlx_sampler_sample(s, c->logits);
    int32_t lo = 0, hi = c->n_keep;  /* ids ascending: binary search */
    while (lo < hi) {
      int32_t mid = (lo + hi) / 2;
      if (c->ids[mid] < t) lo = mid + 1;
      else hi = mid;
    }
    if (lo < c->n_keep && c->ids[lo] == t) count[lo]++;
    else outside++;
  }
  double chi2 = 0, pooled_obs = 0, pooled_exp = 0;
  int cats = 0;
  for (int32_t i = 0; i < c->n_keep; i++) {
    double e = c->probs[i] * DRAWS;
    if (e < 5) {
      pooled_obs += (double)count[i];
      pooled_exp += e;
      continue;
    }
    chi2 += ((double)count[i] - e) * ((double)count[i] - e) / e;
    cats++;
  }
  if (pooled_exp > 0) {
    chi2 += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    cats++;
  }
  CHECK(outside == 0, "case %d: %d draws outside the kept set", ci, outside);
  /* z = 5: a correct sampler fails about once in 3.5 million runs (and the seeds are fixed). */
  if (cats >= 2)
    CHECK(chi2 <= chi2_bound(cats - 1, 5.0), "case %d: chi-square %.1f over %d categories (bound %.1f)", ci, chi2,
          cats, chi2_bound(cats - 1, 5.0));
  free(count);
}

static void check_case(int ci, const sampler_case *c, int *n_stat) {
  rlx_sampler *s;
  rlx_status st = rlx_sampler_new(&c->p, c->n_vocab, &s);
  CHECK(st == RLX_OK, "case %d: new: %s", ci, rlx_last_error());
  if (st) return;
  for (int32_t i = 0; i < c->n_hist; i++) rlx_sampler_accept(s, c->hist[i]);
  const int32_t *ids;
  const float *probs;
  int64_t n = 0;
  st = rlx_sampler_candidates(s, c->logits, &ids, &probs, &n);
  CHECK(st == RLX_OK && n == c->n_keep, "case %d (vocab %lld, T %g, k %d, p %g, min-p %g, penalty %g/%d): %lld kept, want %d",
        ci, (long long)c->n_vocab, (double)c->p.temperature, c->p.top_k, (double)c->p.top_p, (double)c->p.min_p,
        (double)c->p.repeat_penalty, c->p.repeat_last_n, (long long)n, c->n_keep);
  if (st == RLX_OK && n == c->n_keep) {
    id_prob *got = malloc((size_t)n * sizeof *got);
    for (int64_t i = 0; i < n; i++) got[i] = (id_prob){ids[i], probs[i]};
    qsort(got, (size_t)n, sizeof *got, cmp_id);
    int bad_id = -1, bad_p = -1;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
      sum += got[i].p;
      if (got[i].id != c->ids[i] && bad_id < 0) bad_id = (int)i;
      if (fabs(got[i].p - c->probs[i]) > PROB_TOL + 1e-4 * c->probs[i] && bad_p < 0) bad_p = (int)i;
    }
    CHECK(bad_id < 0, "case %d: kept id %d is %d, want %d", ci, bad_id, bad_id < 0 ? 0 : got[bad_id].id,
          bad_id < 0 ? 0 : c->ids[bad_id]);
    CHECK(bad_p < 0, "case %d: p[%d] = %.8f, want %.8f", ci, bad_p, bad_p < 0 ? 0 : (double)got[bad_p].p,
          bad_p < 0 ? 0 : c->probs[bad_p]);
    CHECK(fabs(sum - 1) < 1e-4, "case %d: probabilities sum to %.7f", ci, sum);
    free(got);
  }
  if (c->p.temperature <= 0) {
    int32_t t = rlx_sampler_sample(s, c->logits);
    CHECK(t == c->ids[0], "case %d: greedy token %d, want %d", ci, t, c->ids[0]);
  }
  if (c->statistical) {
    check_frequencies(ci, c, s);
    ++*n_stat;
  }
  rlx_sampler_free(s);
}

static int check_reference(const char *python, const char *ref_dir, const char *work_dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/sampler_cases.bin", work_dir);
  mkdir(work_dir, 0755);
  if (run_ref_script(python, ref_dir, "sampler_cases.py", "--out \"%s\"", path)) return 0;
  FILE *f = fopen(path, "rb");
  char magic[8];
  uint32_t n_cases = 0;
  if (!f || !read_exact(f, magic, 8) || memcmp(magic, "RLXSMP2", 8) || !read_exact(f, &n_cases, 4)) {
    printf("FAIL: %s is not a sampler case file\n", path);
    if (f) fclose(f);
    return 0;
  }
  int n_stat = 0;
  uint32_t i;
  for (i = 0; i < n_cases; i++) {
    sampler_case c;
    int ok = read_case(f, &c);
    if (ok) check_case((int)i, &c, &n_stat);
    free_case(&c);
    if (!ok) break;
  }
  fclose(f);
  CHECK(i == n_cases && n_cases >= 100, "read %u of %u cases", i, n_cases);
  CHECK(n_stat >= 20, "only %d statistical cases", n_stat);
  printf("%u reference cases, %d with %d draws\n", n_cases, n_stat, DRAWS);
  return 1;
}

/* ---------------------------------------------------------------- without the reference */

static uint64_t lcg(uint64_t *x) { return (*x = *x * 6364136223846793005ull + 1442695040888963407ull) >> 33; }

static void random_logits(float *l, int64_t n, uint64_t seed) {
  for (int64_t i = 0; i < n; i++) l[i] = (float)((double)lcg(&seed) / 2147483648.0 * 8.0 - 4.0);
}

/* Same seed, same logits, same prompt: the same tokens; another seed: others. */
static void check_reproducible(void) {
  enum { V = 5000, STEPS = 300 };
  float *l = malloc(V * sizeof *l);
  int32_t runs[3][STEPS];
  uint64_t seeds[3] = {7, 7, 8};
  for (int r = 0; r < 3; r++) {
    rlx_sampler_params p = rlx_sampler_default_params();
    p.temperature = 1.5f;
    p.top_k = 0;
    p.min_p = 0.01f;
    p.repeat_penalty = 1.1f;
    p.seed = seeds[r];
    rlx_sampler *s;
    CHECK(rlx_sampler_new(&p, V, &s) == RLX_OK, "new");
    for (int32_t t = 0; t < 10; t++) rlx_sampler_accept(s, t * 31);
    for (int i = 0; i < STEPS; i++) {
      random_logits(l, V, (uint64_t)i);  /* a fixed stream standing in for a model */
      runs[r][i] = rlx_sampler_sample(s, l);
    }
    rlx_sampler_free(s);
  }
  CHECK(!memcmp(runs[0], runs[1], sizeof runs[0]), "seed 7 twice gave different tokens");
  int differ = 0;
  for (int i = 0; i < STEPS; i++) differ += runs[0][i] != runs[2][i];
  CHECK(differ > STEPS / 2, "seeds 7 and 8 agree on %d of %d tokens", STEPS - differ, STEPS);
  free(l);
}

/* The window: only the last repeat_last_n accepted tokens are penalized,
 * and sample() accepts what it draws. */
static void check_window(void) {
  float l[4] = {2.0f, 1.9f, -1.0f, -1.1f};
  rlx_sampler_params p = rlx_sampler_default_params();
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  rlx_sampler *s;
  CHECK(rlx_sampler_new(&p, 4, &s) == RLX_OK, "new");
  CHECK(rlx_sampler_sample(s, l) == 0, "no history: argmax");  /* accepts 0 */
  CHECK(rlx_sampler_sample(s, l) == 1, "0 penalized to 1.0 < 1.9");  /* accepts 1 */
  /* Window {0, 1}: 1.0 and 0.95 against -1 and -1.1: still 0. */
  CHECK(rlx_sampler_sample(s, l) == 0, "window {0, 1}");
  rlx_sampler_accept(s, 2);
  rlx_sampler_accept(s, 3);  /* window {2, 3}: 0 and 1 are free again; -2, -2.2 */
  CHECK(rlx_sampler_sample(s, l) == 0, "window {2, 3}");
  float neg[4] = {-1.0f, -3.5f, -5.0f, -5.0f};
  rlx_sampler_accept(s, 0);
  rlx_sampler_accept(s, 0);  /* twice in the window, penalized once: -2 > -3.5 (twice would be -4) */
  CHECK(rlx_sampler_sample(s, neg) == 0, "negative logit multiplied once");
  rlx_sampler_accept(s, -1);      /* out of range: ignored, no crash */
  rlx_sampler_accept(s, 1 << 30);
  rlx_sampler_free(s);
}

static void check_errors(void) {
  rlx_sampler *s = (rlx_sampler *)1;
  rlx_sampler_params p = rlx_sampler_default_params();
  CHECK_ERR(rlx_sampler_new(&p, 0, &s), RLX_ERR_INVALID, "n_vocab");
  CHECK(s == NULL, "out cleared on failure");
  p.top_p = 0;
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "top_p");
  p = rlx_sampler_default_params();
  p.min_p = 1.5f;
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "min_p");
  p = rlx_sampler_default_params();
  p.top_k = -1;
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "top_k");
  p = rlx_sampler_default_params();
  p.repeat_penalty = 0;
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "repeat_penalty");
  p = rlx_sampler_default_params();
  p.repeat_last_n = -1;
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "repeat_last_n");
  p = rlx_sampler_default_params();
  p.temperature = NAN;
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "temperature");
  CHECK_ERR(rlx_sampler_new(NULL, 10, NULL), RLX_ERR_INVALID, "out");
  p = rlx_sampler_default_params();
  p.frequency_penalty = INFINITY;
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "frequency_penalty");
  rlx_logit_bias bad_bias[2] = {{3, 1.0f}, {10, 1.0f}};
  p = rlx_sampler_default_params();
  p.n_logit_bias = 2;
  p.logit_bias = bad_bias;
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "logit_bias 1", "token 10");
  bad_bias[1] = (rlx_logit_bias){4, NAN};
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "logit_bias 1");
  p.logit_bias = NULL;
  CHECK_ERR(rlx_sampler_new(&p, 10, &s), RLX_ERR_INVALID, "logit biases");

  /* a -inf bias bans a token: never drawn, even as the best; the biases
   * are copied (the caller's array may go) */
  rlx_logit_bias ban[1] = {{2, -INFINITY}};
  p = rlx_sampler_default_params();
  p.n_logit_bias = 1;
  p.logit_bias = ban;
  CHECK(rlx_sampler_new(&p, 4, &s) == RLX_OK, "a ban: %s", rlx_last_error());
  ban[0].token = 0;
  float best2[4] = {1.0f, 0.5f, 9.0f, 0.8f};
  for (int i = 0; i < 50; i++) CHECK(rlx_sampler_sample(s, best2) != 2, "a banned token drawn");
  rlx_sampler_free(s);

  /* NaN and -inf logits are never drawn; all of them: -1 and a message. */
  CHECK(rlx_sampler_new(NULL, 4, &s) == RLX_OK, "default params");
  float l[4] = {NAN, -INFINITY, 1.0f, NAN};
  for (int i = 0; i < 50; i++) CHECK(rlx_sampler_sample(s, l) == 2, "only the finite logit");
  float none[4] = {NAN, -INFINITY, -INFINITY, NAN};
  CHECK(rlx_sampler_sample(s, none) == -1, "no finite logit");
  CHECK(strstr(rlx_last_error(), "no logit") != NULL, "message: %s", rlx_last_error());
  CHECK(rlx_sampler_sample(NULL, l) == -1, "NULL sampler");
  rlx_sampler_free(s);
  p = rlx_sampler_default_params();
  p.temperature = 0;
  CHECK(rlx_sampler_new(&p, 4, &s) == RLX_OK, "greedy");
  CHECK(rlx_sampler_sample(s, none) == -1, "greedy: no finite logit");
  float inf[4] = {1.0f, INFINITY, 2.0f, NAN};
  CHECK(rlx_sampler_sample(s, inf) == 1, "greedy: +inf wins");
  rlx_sampler_free(s);
  CHECK(rlx_sampler_new(NULL, 4, &s) == RLX_OK, "default params");
  for (int i = 0; i < 20; i++) CHECK(rlx_sampler_sample(s, inf) == 1, "+inf takes all the probability");
  rlx_sampler_free(s);
  rlx_sampler_free(NULL);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_sampler PYTHON REF_DIR WORK_DIR\n");
    return 2;
  }
  if (!check_reference(argv[1], argv[2], argv[3])) return 1;
  check_reproducible();
  check_window();
  check_errors();
  return check_report();
}
