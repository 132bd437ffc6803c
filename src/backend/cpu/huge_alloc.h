/* huge_alloc.h — the CPU backend's aligned buffers: large, long-lived
 * ones (packed weights) in transparent huge pages, and cache-line aligned
 * ones from the C library. */
#ifndef RLX_CPU_HUGE_ALLOC_H
#define RLX_CPU_HUGE_ALLOC_H

#include <stddef.h>
#include <stdlib.h>

/* bytes of memory, 64-byte aligned; from HUGE_ALLOC_MIN bytes on mapped on
 * its own, 2 MiB-aligned and advised to use transparent huge pages. NULL
 * when out of memory. Freed only by huge_free with the same bytes. */
void *huge_alloc(size_t bytes);
void  huge_free(void *p, size_t bytes);

/* bytes of memory aligned to a cache line (64 bytes; the size rounded up
 * to a multiple of it, as C11's aligned_alloc requires), freed with free.
 * NULL when out of memory. */
static inline void *line_alloc(size_t bytes) { return aligned_alloc(64, (bytes + 63) & ~(size_t)63); }

#endif /* RLX_CPU_HUGE_ALLOC_H */
