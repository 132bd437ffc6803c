/* cpu_relax.h — the pause instruction of a spin-wait poll (cpu_pool.c's
 * hand-off, gemm_pack.c's shared packing): tells the core it is spinning (frees
 * the pipeline for the sibling hyper-thread, no memory-order mis-speculation
 * on exit). */
#ifndef RLX_CPU_RELAX_H
#define RLX_CPU_RELAX_H

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

#endif /* RLX_CPU_RELAX_H */
