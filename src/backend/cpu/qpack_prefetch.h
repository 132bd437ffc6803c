/* qpack_prefetch.h — how the packed-group kernels (qpack_avx512.c,
 * qpack_avx2_body.h) prefetch the weight blocks they stream. */
#ifndef RLX_QPACK_PREFETCH_H
#define RLX_QPACK_PREFETCH_H

#include <stddef.h>
#include <stdint.h>
#include <xmmintrin.h>

/* Bytes ahead of the weight block in use a kernel asks the L2 for: a
 * distance in bytes, not blocks, suits every block size (Q4_0's 288 to
 * Q8_0's 544), and the L2 hint leaves L1 to the blocks in use. A decode
 * step streams its weights from DRAM: the distance must cover the
 * memory's latency at its full rate on a loaded machine, and nearer
 * distances left a K-quant decode short of the bandwidth (BENCHMARKS.md). */
#define PREFETCH_BYTES 16384
/* A decode step (1 row) also asks the L1 for the blocks this far ahead,
 * once the L2 holds them: its loads waiting on the L2 left the stream
 * short of the bandwidth (most for Q4_K and Q6_K, whose decode does the
 * most work a byte); a prefill tile measured slower with it
 * (BENCHMARKS.md). */
#define L1_BYTES 8192

/* Asks the L2 for the bb bytes PREFETCH_BYTES after blk (a block of bb
 * bytes); the activation tile, read for every group, stays in the caches
 * (prefetching it too measured no faster). */
static inline __attribute__((always_inline)) void prefetch_ahead(const uint8_t *blk, size_t bb) {
  for (size_t at = 0; at < bb; at += 64) _mm_prefetch((const char *)blk + PREFETCH_BYTES + at, _MM_HINT_T1);
}

/* The L1 request of a 1-row tile (L1_BYTES) for the bb bytes of blk. */
static inline __attribute__((always_inline)) void prefetch_l1(const uint8_t *blk, size_t bb, int nr) {
  for (size_t at = 0; nr == 1 && at < bb; at += 64) _mm_prefetch((const char *)blk + L1_BYTES + at, _MM_HINT_T0);
}

/* Both requests, line by line (the AVX2 kernels': asking all L2 lines
 * before the L1 ones measured slower for Q4_K there). */
static inline __attribute__((always_inline)) void prefetch_both(const uint8_t *blk, size_t bb, int nr) {
  for (size_t at = 0; at < bb; at += 64) {
    _mm_prefetch((const char *)blk + PREFETCH_BYTES + at, _MM_HINT_T1);
    if (nr == 1) _mm_prefetch((const char *)blk + L1_BYTES + at, _MM_HINT_T0);
  }
}

#endif /* RLX_QPACK_PREFETCH_H */
