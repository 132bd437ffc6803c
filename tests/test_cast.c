/* test_cast.c — Cast among F32, F16 and BF16 on the CPU (the fast path of
 * cpu_Cast: F16C / integer rounding, threaded) against the scalar helpers
 * rlx_f32_to_f16 / rlx_f16_to_f32 / rlx_f32_to_bf16 / rlx_bf16_to_f32, bit
 * for bit:
 *   - widening: every F16 and BF16 bit pattern;
 *   - narrowing: every value of the narrow type, its f32 neighbours, the
 *     ties between neighbouring values and their neighbours, signalling and
 *     quiet NaNs with payloads, infinities, overflow, f32 subnormals, and
 *     random bit patterns;
 *   - F16 <-> BF16 and F16 -> F16, BF16 -> BF16 (through f32) over every
 *     pattern;
 *   - lengths 1..40 and a few odd large ones (vector tails, threaded chunks).
 * The one rule beyond the helpers: a widened signalling NaN comes out quiet
 * (as the reference Cast through double always made it, and F16C does),
 * where rlx_f16_to_f32 / rlx_bf16_to_f32 keep it signalling.
 * Run also with RLX_NO_AVX2=1 (the portable table) by CTest. */
#include "rlx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static int is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

/* The expected bits of element v (raw bits of dtype `from`) cast to `to`. */
static uint32_t expect_bits(rlx_dtype from, rlx_dtype to, uint32_t v) {
  float f = from == RLX_F32 ? bits_f32(v) : from == RLX_F16 ? rlx_f16_to_f32((uint16_t)v) : rlx_bf16_to_f32((uint16_t)v);
  uint32_t u = f32_bits(f);
  if (is_nan_bits(u)) u |= 0x400000u; /* widening quiets a signalling NaN */
  if (to == RLX_F32) return u;
  return to == RLX_F16 ? rlx_f32_to_f16(f) : rlx_f32_to_bf16(f);
}

static size_t elem_size(rlx_dtype t) { return t == RLX_F32 ? 4 : 2; }

static uint32_t elem(const void *p, rlx_dtype t, int64_t i) {
  if (t == RLX_F32) { uint32_t u; memcpy(&u, (const char *)p + 4 * i, 4); return u; }
  uint16_t h; memcpy(&h, (const char *)p + 2 * i, 2); return h;
}

/* Runs Cast{to}(x) over n elements of src (dtype from) and compares every
 * output with expect_bits; returns 0 on a mismatch (reported once). */
static int run_cast(rlx_dtype from, rlx_dtype to, const void *src, int64_t n) {
  const char *fn = rlx_dtype_name(from), *tn = rlx_dtype_name(to);
  rlx_graph *g = rlx_graph_new("cast");
  rlx_node x = rlx_input(g, "x", from, 1, (const int64_t[]){n});
  rlx_node y = rlx_cast(g, x, to);
  rlx_session *s = NULL;
  /* as built: the lone Cast runs as cpu_Cast */
  rlx_options opt = {.device = RLX_DEVICE_CPU, .threads = 0, .flags = RLX_FLAG_NO_OPTIMIZE};
  rlx_status st = rlx_graph_set_outputs(g, 1, &y);
  if (st == RLX_OK) st = rlx_compile(g, &opt, &s);
  void *out = malloc((size_t)n * elem_size(to));
  if (st == RLX_OK) st = rlx_set_input(s, "x", src, (size_t)n * elem_size(from));
  if (st == RLX_OK) st = rlx_run(s);
  if (st == RLX_OK) st = rlx_output(s, 0, out, (size_t)n * elem_size(to));
  CHECK(st == RLX_OK && out, "%s -> %s, n %lld: %s", fn, tn, (long long)n, rlx_last_error());
  int ok = st == RLX_OK && out;
  for (int64_t i = 0; ok && i < n; i++) {
    uint32_t v = elem(src, from, i), got = elem(out, to, i), want = expect_bits(from, to, v);
    if (got != want) {
      CHECK(0, "%s -> %s, n %lld, element %lld: 0x%08x gave 0x%08x, want 0x%08x", fn, tn, (long long)n,
            (long long)i, (unsigned)v, (unsigned)got, (unsigned)want);
      ok = 0;
    }
  }
  free(out);
  rlx_session_free(s);
  rlx_graph_free(g);
  return ok;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 32);
}

/* The narrowing set of f32 bit patterns; returns the count. */
static int64_t narrowing_patterns(uint32_t *p) {
  int64_t n = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    /* every f16 value, its neighbours, the tie above it and the tie's neighbours */
    uint32_t a = f32_bits(rlx_f16_to_f32((uint16_t)h));
    uint32_t tie = is_nan_bits(a) || (a & 0x7fffffffu) == 0x7f800000u
                       ? a
                       : f32_bits((rlx_f16_to_f32((uint16_t)h) + rlx_f16_to_f32((uint16_t)(h + 1))) / 2);
    const uint32_t f16_set[] = {a, a + 1, a - 1, tie, tie + 1, tie - 1};
    for (int k = 0; k < 6; k++) p[n++] = f16_set[k];
    /* every bf16 value with low halves at and around the tie */
    const uint32_t low[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, next_u32() & 0xffff};
    for (int k = 0; k < 7; k++) p[n++] = h << 16 | low[k];
  }
  /* f16 overflow threshold (65520 rounds to inf), f32 extremes, NaNs */
  const uint32_t edges[] = {0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x477fffff, 0x7f7fffff, 0x7f7f8000,
                            0x7f7f7fff, 0x00000001, 0x007fffff, 0x00800000, 0x33000000, 0x33000001, 0x337fffff,
                            0x7f800000, 0x7f800001, 0x7f802000, 0x7fbfffff, 0x7fc00000, 0x7fffffff, 0x7fc00001};
  for (size_t k = 0; k < sizeof edges / sizeof *edges; k++) {
    p[n++] = edges[k];
    p[n++] = edges[k] | 0x80000000u;
  }
  for (int k = 0; k < 1 << 18; k++) p[n++] = next_u32();
  return n;
}

int main(void) {
  enum { NARROW_MAX = 65536 * 13 + 64 + (1 << 18) };
  uint16_t *halves = malloc(65536 * sizeof *halves);
  uint32_t *wide = malloc(NARROW_MAX * sizeof *wide);
  if (!halves || !wide) return 1;
  for (uint32_t i = 0; i < 65536; i++) halves[i] = (uint16_t)(i * 40503u); /* a permutation: mixed classes */
  const int64_t n_wide = narrowing_patterns(wide);

  const rlx_dtype half[2] = {RLX_F16, RLX_BF16};
  for (int t = 0; t < 2; t++) {
    run_cast(half[t], RLX_F32, halves, 65536);
    run_cast(half[t], half[1 - t], halves, 65536);
    run_cast(half[t], half[t], halves, 65536);
    run_cast(RLX_F32, half[t], wide, n_wide);
  }
  /* tails and chunk ends: every short length, odd long ones, unaligned starts */
  static const int64_t lens[] = {16385, 40001, 65535};
  for (int t = 0; t < 2; t++) {
    for (int64_t n = 1; n <= 40; n++) {
      run_cast(half[t], RLX_F32, halves + 3, n);
      run_cast(RLX_F32, half[t], wide + 5, n);
    }
    for (int k = 0; k < 3; k++) {
      run_cast(half[t], RLX_F32, halves + 1, lens[k]);
      run_cast(half[t], half[1 - t], halves + 1, lens[k]);
      run_cast(RLX_F32, half[t], wide + 1, lens[k]);
    }
  }
  free(halves);
  free(wide);
  return check_report();
}
