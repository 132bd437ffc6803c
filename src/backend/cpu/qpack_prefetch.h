/* qpack_prefetch.h — how the packed-group kernels (qpack_avx512.c,
 * qpack_avx2_body.h) prefetch the weight blocks they stream, at the
 * distances qpack_new chose for the CPU (qpack.c's prefetch_distances). */
#ifndef RLX_QPACK_PREFETCH_H
#define RLX_QPACK_PREFETCH_H

#include "qpack.h"

#include <stddef.h>
#include <stdint.h>
#include <xmmintrin.h>

/* Asks the L2 for the bb bytes p->pf_l2 after blk (a block of bb bytes);
 * the L2 hint leaves L1 to the blocks in use, and the activation tile,
 * read for every group, stays in the caches (prefetching it too measured
 * no faster). */
static inline __attribute__((always_inline)) void prefetch_ahead(const qpack *p, const uint8_t *blk, size_t bb) {
  for (size_t at = 0; at < bb; at += 64) _mm_prefetch((const char *)blk + p->pf_l2 + at, _MM_HINT_T1);
}

/* That and, for a 1-row tile (decode), the L1 request p->pf_l1 ahead,
 * line by line (all L2 lines before the L1 ones measured slower). */
static inline __attribute__((always_inline)) void prefetch_both(const qpack *p, const uint8_t *blk, size_t bb,
                                                                int nr) {
  for (size_t at = 0; at < bb; at += 64) {
    _mm_prefetch((const char *)blk + p->pf_l2 + at, _MM_HINT_T1);
    if (nr == 1) _mm_prefetch((const char *)blk + p->pf_l1 + at, _MM_HINT_T0);
  }
}

#endif /* RLX_QPACK_PREFETCH_H */
