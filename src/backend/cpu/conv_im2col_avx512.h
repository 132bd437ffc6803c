/* conv_im2col_avx512.h — im2col columns straight into a GEMM panel with
 * AVX-512 (conv_im2col_avx512.c). */
#ifndef RLX_CONV_IM2COL_AVX512_H
#define RLX_CONV_IM2COL_AVX512_H

#include "conv_gemm.h"

/* d[k * ld + q] = the tap that output position first + q reads in the
 * im2col row r0 + k of x [C, H, W] (rows r = (c, kh, kw)), for k < rows
 * and q < width, 0 in the padding and for q in [width, nr): conv_im2col
 * of one panel (ld = nr), or of part of a col matrix's rows (ld its row
 * stride, at least nr). Returns 0, writing nothing, where it does not apply
 * (stride along W other than 1 or 2, nr > 32, or positions over more
 * than 8 output rows); the caller then runs conv_im2col. Only on a CPU
 * with AVX-512 (cpu_get_features). */
int conv_im2col_panel_avx512(const conv_geom *g, const float *x, int64_t r0, int64_t rows, int64_t first,
                             int64_t width, float *d, int64_t nr, int64_t ld);

/* The taps of a 1x1 conv of stride 2 x 2 without padding: d[p][oh][ow] =
 * x[p][2 oh][2 ow] for `planes` planes of H x W, OH x OW out, each output
 * row from whole-vector loads and stores (with masked loads a vector the
 * copy ran slower on Zen 5 than the scalar one), only a plane's last row
 * masked. Returns 0, writing nothing, for W < 15 (a row's loads or stores
 * would pass the plane's); the caller then copies them itself. */
int conv_taps2_avx512(const float *x, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, float *d);

#endif /* RLX_CONV_IM2COL_AVX512_H */
