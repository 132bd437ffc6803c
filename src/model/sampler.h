/* sampler.h — the sampler's filter chain without the draw, for tests and
 * tools that want the distribution a token is drawn from. */
#ifndef RLX_MODEL_SAMPLER_H
#define RLX_MODEL_SAMPLER_H

#include "rlx.h"

/* The candidates rlx_sampler_sample would draw from for these logits (the
 * repetition penalty of the tokens accepted so far, top-k, top-p, min-p,
 * then temperature), with their renormalized probabilities. Greedy gives
 * the argmax with probability 1. *ids and *probs point into the sampler
 * (valid until its next call); n_out candidates, in descending probability
 * when a filter is on, in no particular order otherwise. Accepts nothing. */
rlx_status rlx_sampler_candidates(rlx_sampler *s, const float *logits, const int32_t **ids,
                                  const float **probs, int64_t *n_out);

#endif
