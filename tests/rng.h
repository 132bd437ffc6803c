/* rng.h — the tests' pseudo-random numbers: a 64-bit LCG (Knuth's MMIX
 * constants) whose high 32 bits are the draws, uniform doubles in [0, 1)
 * and Box-Muller normals from it. Each test seeds it with rng_seed before
 * its first draw, so that its data are the same on every run. */
#ifndef RLX_RNG_H
#define RLX_RNG_H

#include <math.h>
#include <stdint.h>

static uint64_t rng_state;

static inline void rng_seed(uint64_t seed) { rng_state = seed; }

static inline uint32_t rng_next(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(rng_state >> 32);
}

static inline double rng_uniform(void) { return (double)rng_next() / 4294967296.0; }

/* A standard normal value (u in (0, 1]: log(u) is finite). */
static inline double normal_value(void) {
  double u = ((double)rng_next() + 1.0) / 4294967297.0, v = rng_uniform();
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#endif /* RLX_RNG_H */
