/* qpack_avxvnni.c — qpack_avx2_body.h's kernels with AVX-VNNI's 256-bit
 * vpdpbusd (built with -mavxvnni; called only after qpack_kernel() has
 * checked the CPU). */
#include "qpack.h"

#if defined(__AVXVNNI__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define QPACK_VNNI 1
#define QPACK_GETTER qpack_avxvnni_kernel
#include "qpack_avx2_body.h"

#else

qpack_kernel_fn qpack_avxvnni_kernel(rlx_dtype w, int *rows) {
  (void)w, (void)rows;
  return NULL;
}

#endif
