/* pool_max.h — the AVX-512 plane kernel of F32 max pooling
 * (pool_max_avx512.c) beside the reference loops of k_conv.c. */
#ifndef RLX_POOL_MAX_H
#define RLX_POOL_MAX_H

#include "conv_gemm.h"

#include <stddef.h>

/* The floats of the scratch row that pool_max3_plane_avx512 takes. */
size_t pool_max3_row_floats(const conv_geom *g);

/* One plane of a max pool whose windows are 3 columns wide, stride 1 or
 * 2 along W, dilation 1, every window holding an input position: y from
 * x, with row (pool_max3_row_floats of them) as scratch. Returns 1 when
 * a window holds a NaN (the reference loops propagate it; y is then
 * partly written), else 0. x86 only; call only where cpu_features.h has
 * avx512. */
int pool_max3_plane_avx512(const conv_geom *g, const float *x, float *y, float *row);

#endif /* RLX_POOL_MAX_H */
