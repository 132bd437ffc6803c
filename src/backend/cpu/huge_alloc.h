/* huge_alloc.h — large, long-lived buffers of the CPU backend (packed
 * weights) in transparent huge pages. */
#ifndef RLX_CPU_HUGE_ALLOC_H
#define RLX_CPU_HUGE_ALLOC_H

#include <stddef.h>

/* bytes of memory, 64-byte aligned; from HUGE_ALLOC_MIN bytes on mapped on
 * its own, 2 MiB-aligned and advised to use transparent huge pages. NULL
 * when out of memory. Freed only by huge_free with the same bytes. */
void *huge_alloc(size_t bytes);
void  huge_free(void *p, size_t bytes);

#endif /* RLX_CPU_HUGE_ALLOC_H */
