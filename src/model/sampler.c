/* sampler.c — picking the next token from a model's logits.
 *
 * The chain is llama.cpp's (common_sampler's default order), so a prompt
 * sampled with the same settings draws from the same distribution:
 *
 *   logit bias          added to the logits of the tokens named
 *   penalties           each distinct token among the last repeat_last_n
 *                       accepted ones: a positive logit is divided by the
 *                       repetition penalty, a negative one multiplied by
 *                       it; then count * frequency_penalty +
 *                       presence_penalty is subtracted
 *   top-k               the k largest logits
 *   top-p               the shortest prefix (by probability, normalized
 *                       over what top-k kept) whose cumulative probability
 *                       reaches p
 *   min-p               logits >= max + log(min_p), i.e. p >= min_p * p_max
 *   temperature         softmax(logit / T) over what is left, then a draw
 *
 * temperature <= 0 is greedy: the argmax of the penalized logits (which
 * every filter keeps). Ties go to the lower id.
 *
 * Every filter keeps a prefix of the candidates in descending order, so the
 * kept set is the shortest of the three prefixes. Nothing sorts the whole
 * vocabulary: top-k scans the logits once with a k-element heap; top-p
 * without top-k selects the best 256, 2048, ... until the prefix reaches p;
 * min-p alone, or temperature alone, keeps its set unsorted.
 *
 * The draw uses xoshiro256** seeded through splitmix64: the same seed and
 * the same logits give the same tokens on every machine.
 *
 * A grammar (rlx_sampler_set_grammar) is applied as llama.cpp's
 * common_sampler applies it: the token drawn from the plain chain is kept
 * when the grammar allows it; otherwise every token it does not allow is
 * set to -inf and the chain runs and draws again. Checking one token is
 * cheap, masking the vocabulary is not, and greedy picks the same token
 * either way. */
#include "model/sampler.h"

#include "model/grammar.h"

#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOP_P_FIRST_SELECTION 256  /* candidates tried first when top-p runs without top-k */

typedef struct {
  float   logit;
  int32_t id;
} candidate;

struct rlx_sampler {
  rlx_sampler_params p;
  int64_t        n_vocab;
  float         *penalized;  /* n_vocab: the logits after the bias and the penalties */
  int32_t       *seen;       /* n_vocab: counts the window's tokens while penalizing (all 0 between calls) */
  rlx_logit_bias *bias;      /* p.n_logit_bias, copied */
  candidate     *cand;       /* n_vocab: the selection */
  int32_t       *ids;        /* n_vocab: what rlx_sampler_candidates returns */
  float         *probs;
  int32_t       *recent;     /* ring of the last repeat_last_n accepted tokens */
  int64_t        n_recent, recent_next;
  uint64_t       rng[4];
  rlx_grammar   *grammar;    /* borrowed, or NULL */
  float         *masked;     /* n_vocab: the logits with the grammar's mask (allocated with it) */
};

/* ---------------------------------------------------------------- random numbers */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro256ss(uint64_t s[4]) {
  uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform01(uint64_t s[4]) { return (double)(xoshiro256ss(s) >> 11) * 0x1p-53; }

/* ---------------------------------------------------------------- lifetime */

rlx_sampler_params rlx_sampler_default_params(void) {
  rlx_sampler_params p = {0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0, 0.0f, 0.0f, 0, NULL};
  return p;
}

rlx_status rlx_sampler_new(const rlx_sampler_params *p, int64_t n_vocab, rlx_sampler **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: out is NULL");
  *out = NULL;
  rlx_sampler_params d = p ? *p : rlx_sampler_default_params();
  if (n_vocab <= 0 || n_vocab > INT32_MAX)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: n_vocab %lld is not in [1, 2^31)", (long long)n_vocab);
  if (isnan(d.temperature))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: temperature is NaN");
  if (d.top_k < 0) return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: top_k %d is negative", d.top_k);
  if (!(d.top_p > 0 && d.top_p <= 1))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: top_p %g is not in (0, 1]", (double)d.top_p);
  if (!(d.min_p >= 0 && d.min_p <= 1))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: min_p %g is not in [0, 1]", (double)d.min_p);
  if (!(d.repeat_penalty > 0 && isfinite(d.repeat_penalty)))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: repeat_penalty %g is not a positive number",
                         (double)d.repeat_penalty);
  if (d.repeat_last_n < 0)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: repeat_last_n %d is negative", d.repeat_last_n);
  if (!isfinite(d.frequency_penalty) || !isfinite(d.presence_penalty))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: frequency_penalty %g or presence_penalty %g is not a "
                         "number", (double)d.frequency_penalty, (double)d.presence_penalty);
  if (d.n_logit_bias < 0 || (d.n_logit_bias && !d.logit_bias))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: %d logit biases at %p", d.n_logit_bias,
                         (const void *)d.logit_bias);
  for (int32_t i = 0; i < d.n_logit_bias; i++)
    if (d.logit_bias[i].token < 0 || d.logit_bias[i].token >= n_vocab || isnan(d.logit_bias[i].bias) ||
        d.logit_bias[i].bias == INFINITY)
      return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_new: logit_bias %d: token %d (of %lld) with bias %g; a "
                           "bias is finite or -inf", i, d.logit_bias[i].token, (long long)n_vocab,
                           (double)d.logit_bias[i].bias);

  rlx_sampler *s = calloc(1, sizeof *s);
  if (!s) return rlx_set_error(RLX_ERR_NOMEM, "rlx_sampler_new: out of memory");
  s->n_vocab = n_vocab;
  size_t n = (size_t)n_vocab;
  s->penalized = malloc(n * sizeof *s->penalized);
  s->seen = calloc(n, sizeof *s->seen);
  s->bias = malloc(((size_t)d.n_logit_bias + 1) * sizeof *s->bias);
  s->cand = malloc(n * sizeof *s->cand);
  s->ids = malloc(n * sizeof *s->ids);
  s->probs = malloc(n * sizeof *s->probs);
  s->recent = malloc(((size_t)d.repeat_last_n + 1) * sizeof *s->recent);
  if (!s->penalized || !s->seen || !s->bias || !s->cand || !s->ids || !s->probs || !s->recent) {
    rlx_sampler_free(s);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_sampler_new: out of memory for a vocabulary of %lld",
                         (long long)n_vocab);
  }
  if (d.n_logit_bias) memcpy(s->bias, d.logit_bias, (size_t)d.n_logit_bias * sizeof *s->bias);
  s->p = d;
  s->p.logit_bias = s->bias;
  uint64_t x = d.seed;
  for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
  *out = s;
  return RLX_OK;
}

void rlx_sampler_free(rlx_sampler *s) {
  if (!s) return;
  free(s->penalized);
  free(s->seen);
  free(s->bias);
  free(s->cand);
  free(s->ids);
  free(s->probs);
  free(s->recent);
  free(s->masked);
  free(s);
}

void rlx_sampler_accept(rlx_sampler *s, int32_t token) {
  if (!s || token < 0 || token >= s->n_vocab || s->p.repeat_last_n == 0) return;
  s->recent[s->recent_next] = token;
  s->recent_next = (s->recent_next + 1) % s->p.repeat_last_n;
  if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

/* ---------------------------------------------------------------- the chain */

/* The logits with the bias and the penalties applied (the caller's when
 * all are off). */
static const float *penalize(rlx_sampler *s, const float *logits) {
  const rlx_sampler_params *p = &s->p;
  const float pen = p->repeat_penalty, freq = p->frequency_penalty, pres = p->presence_penalty;
  const int penalties = s->n_recent && (pen != 1.0f || freq != 0.0f || pres != 0.0f);
  if (!penalties && !p->n_logit_bias) return logits;
  memcpy(s->penalized, logits, (size_t)s->n_vocab * sizeof *logits);
  for (int32_t i = 0; i < p->n_logit_bias; i++) s->penalized[s->bias[i].token] += s->bias[i].bias;
  if (!penalties) return s->penalized;
  for (int64_t j = 0; j < s->n_recent; j++) s->seen[s->recent[j]]++;
  for (int64_t j = 0; j < s->n_recent; j++) {
    int32_t t = s->recent[j], count = s->seen[t];
    if (!count) continue;  /* once per distinct token, however often it occurred */
    s->seen[t] = 0;
    float x = s->penalized[t];
    x = x > 0 ? x / pen : x * pen;
    s->penalized[t] = x - (float)count * freq - pres;
  }
  return s->penalized;
}

/* The largest of v[0..n) (NaN ignored; -inf when nothing is larger).
 * Eight running maxima: one would chain every compare on the previous. */
static float max_logit(const float *v, int64_t n) {
  float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) m[j] = v[i + j] > m[j] ? v[i + j] : m[j];
  for (; i < n; i++) m[0] = v[i] > m[0] ? v[i] : m[0];
  for (int j = 1; j < 8; j++) m[0] = m[j] > m[0] ? m[j] : m[0];
  return m[0];
}

/* Whether one of v[0..16) is above x (branch-free: it vectorizes). */
static inline int any_above(const float *v, float x) {
  int any = 0;
  for (int j = 0; j < 16; j++) any |= v[j] > x;
  return any;
}

/* a comes before b: the larger logit, then the lower id. */
static int better(candidate a, candidate b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

/* A min-heap on better(): the root is the worst kept candidate. */
static void heap_up(candidate *h, int64_t i) {
  candidate x = h[i];
  while (i > 0 && better(h[(i - 1) / 2], x)) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = x;
}

static void heap_down(candidate *h, int64_t n, int64_t i) {
  candidate x = h[i];
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && better(h[c], h[c + 1])) c++;
    if (!better(x, h[c])) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = x;
}

static int cmp_better_first(const void *a, const void *b) {
  candidate x = *(const candidate *)a, y = *(const candidate *)b;
  return better(x, y) ? -1 : better(y, x) ? 1 : 0;
}

/* The best k of the logits >= thr (never -inf or NaN) into out, sorted
 * best first when `sorted`; returns how many (fewer than k when fewer pass
 * thr). With k < n it keeps a k-element heap while scanning, so a rejected
 * logit costs one comparison. */
static int64_t select_best(const float *v, int64_t n, int64_t k, float thr, candidate *out, int sorted) {
  int64_t m = 0, i = 0;
  if (k >= n) {
    for (; i < n; i++)
      if (v[i] >= thr && v[i] != -INFINITY) out[m++] = (candidate){v[i], (int32_t)i};
  } else {
    for (; i < n && m < k; i++)
      if (v[i] >= thr && v[i] != -INFINITY) {
        out[m] = (candidate){v[i], (int32_t)i};
        heap_up(out, m++);
      }
    /* Ids rise during the scan, so a newcomer beats the root only with a
     * larger logit; a block of 16 without one is skipped whole (one
     * vectorized test instead of 16 branches). */
    float worst = m ? out[0].logit : INFINITY;
    for (; i < n; i++) {
      if (i % 16 == 0 && i + 16 <= n && !any_above(v + i, worst)) {
        i += 15;
        continue;
      }
      if (v[i] > worst && v[i] >= thr) {
        out[0] = (candidate){v[i], (int32_t)i};
        heap_down(out, k, 0);
        worst = out[0].logit;
      }
    }
  }
  if (sorted) qsort(out, (size_t)m, sizeof *out, cmp_better_first);
  return m;
}

/* exp((l - max) / T) with the maximum itself exactly 1 (also when it is +inf);
 * in float (the probabilities are float) for speed on whole vocabularies. */
static float weight(float l, float max, float inv_t) {
  return l == max ? 1.0f : expf((l - max) * inv_t);
}

/* Length of the top-p prefix of the sorted cand[0..m) under normalizer z;
 * 0 when the m do not reach p. */
static int64_t top_p_prefix(const candidate *cand, int64_t m, float max, double z, double p) {
  double cum = 0;
  for (int64_t i = 0; i < m; i++) {
    cum += weight(cand[i].logit, max, 1.0f) / z;
    if (cum >= p) return i + 1;
  }
  return 0;
}

/* Runs the chain: the kept candidates and their probabilities in s->ids,
 * s->probs. */
static rlx_status run_chain(rlx_sampler *s, const float *logits, int64_t *n_out) {
  const float *v = penalize(s, logits);
  int64_t n = s->n_vocab;
  const rlx_sampler_params *p = &s->p;

  if (p->temperature <= 0) {
    float bv = max_logit(v, n);
    int64_t best = 0;
    while (best < n && !(v[best] == bv)) best++;  /* the first maximum */
    if (bv == -INFINITY) return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler: no logit is a number above -inf");
    s->ids[0] = (int32_t)best;
    s->probs[0] = 1;
    *n_out = 1;
    return RLX_OK;
  }

  int64_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n, m;
  int use_top_p = p->top_p < 1, use_min_p = p->min_p > 0;
  float max;
  int64_t keep;
  if (k < n) {
    m = select_best(v, n, k, -INFINITY, s->cand, 1);
    if (!m) return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler: no logit is a number above -inf");
    max = s->cand[0].logit;
    keep = m;
    if (use_top_p) {
      double z = 0;
      for (int64_t i = 0; i < m; i++) z += weight(s->cand[i].logit, max, 1.0f);
      int64_t l = top_p_prefix(s->cand, m, max, z, p->top_p);
      if (l) keep = l;
    }
  } else {
    max = max_logit(v, n);
    if (max == -INFINITY) return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler: no logit is a number above -inf");
    /* min-p only shortens the prefix: its threshold prunes the scans. */
    float thr = use_min_p ? max + logf(p->min_p) : -INFINITY;
    if (use_top_p) {
      double z = 0; /* over the whole vocabulary: top-p runs before min-p */
      for (int64_t i = 0; i < n; i++)
        if (v[i] > -INFINITY) z += weight(v[i], max, 1.0f);
      for (int64_t sel = TOP_P_FIRST_SELECTION;; sel = sel * 8 < n ? sel * 8 : n) {
        m = select_best(v, n, sel, thr, s->cand, 1);
        keep = top_p_prefix(s->cand, m, max, z, p->top_p);
        if (keep || m < sel || sel >= n) break;
      }
      if (!keep) keep = m;
    } else {
      m = select_best(v, n, n, thr, s->cand, 0);
      keep = m;
    }
  }
  if (use_min_p && k < n) { /* (without top-k, the scans applied the threshold) */
    float thr = max + logf(p->min_p);
    int64_t l = 1;
    while (l < keep && s->cand[l].logit >= thr) l++;
    keep = l;
  }

  float inv_t = 1.0f / p->temperature;
  double z = 0;
  for (int64_t i = 0; i < keep; i++) {
    s->ids[i] = s->cand[i].id;
    z += s->probs[i] = weight(s->cand[i].logit, max, inv_t);
  }
  float inv_z = (float)(1.0 / z);
  for (int64_t i = 0; i < keep; i++) s->probs[i] *= inv_z;
  *n_out = keep;
  return RLX_OK;
}

rlx_status rlx_sampler_candidates(rlx_sampler *s, const float *logits, const int32_t **ids,
                                  const float **probs, int64_t *n_out) {
  if (!s || !logits || !ids || !probs || !n_out)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_candidates: NULL argument");
  rlx_status st = run_chain(s, logits, n_out);
  if (st) return st;
  *ids = s->ids;
  *probs = s->probs;
  return RLX_OK;
}

/* Runs the chain on logits and draws; -1 with the chain's error. */
static int32_t draw(rlx_sampler *s, const float *logits) {
  int64_t n;
  if (run_chain(s, logits, &n)) return -1;
  int64_t pick = n - 1;
  if (n > 1) {
    /* The weights are renormalized floats: draw against their own sum. */
    double total = 0, cum = 0;
    for (int64_t i = 0; i < n; i++) total += s->probs[i];
    double target = uniform01(s->rng) * total;
    for (int64_t i = 0; i < n; i++) {
      cum += s->probs[i];
      if (target < cum) {
        pick = i;
        break;
      }
    }
  }
  return s->ids[pick];
}

int32_t rlx_sampler_sample(rlx_sampler *s, const float *logits) {
  if (!s || !logits) return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_sample: NULL argument"), -1;
  int32_t token = draw(s, logits);
  if (token >= 0 && s->grammar && !rlx_grammar_allows(s->grammar, token)) {
    memcpy(s->masked, logits, (size_t)s->n_vocab * sizeof *logits);
    if (!grammar_mask(s->grammar, s->masked, s->n_vocab))
      return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_sample: the grammar allows no token here"), -1;
    token = draw(s, s->masked);
  }
  if (token < 0) return -1;
  if (s->grammar && rlx_grammar_accept(s->grammar, token)) return -1;
  rlx_sampler_accept(s, token);
  return token;
}

rlx_status rlx_sampler_set_grammar(rlx_sampler *s, rlx_grammar *g) {
  if (!s) return rlx_set_error(RLX_ERR_INVALID, "rlx_sampler_set_grammar: sampler is NULL");
  if (g && !s->masked && !(s->masked = malloc((size_t)s->n_vocab * sizeof *s->masked)))
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_sampler_set_grammar: out of memory");
  s->grammar = g;
  return RLX_OK;
}
