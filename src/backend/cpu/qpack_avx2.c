/* qpack_avx2.c — qpack_avx2_body.h's kernels with vpmaddubsw + vpmaddwd
 * (AVX2/FMA/F16C; called only after qpack_kernel() has checked the CPU). */
#include "qpack.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define QPACK_VNNI 0
#define QPACK_GETTER qpack_avx2_kernel
#include "qpack_avx2_body.h"

#else

qpack_kernel_fn qpack_avx2_kernel(rlx_dtype w, int *rows) {
  (void)w, (void)rows;
  return NULL;
}

#endif
