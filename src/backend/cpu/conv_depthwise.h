/* conv_depthwise.h — F32 depthwise Conv as direct loops (conv_depthwise.c). */
#ifndef RLX_CONV_DEPTHWISE_H
#define RLX_CONV_DEPTHWISE_H

#include "conv_gemm.h"

/* Whether conv_depthwise_forward computes this Conv: F32, as many groups
 * as input channels, one output channel per group. */
int conv_depthwise_applies(const ir_node *n, const cpu_tensor *in, const cpu_tensor *out);

/* ce: a FusedConv's epilogue, applied to each output row as it is made;
 * NULL: bias only. */
rlx_status conv_depthwise_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                                  cpu_tensor *out, const conv_epilogue *ce);

/* One output plane of a 3 x 3 depthwise conv of dilation 1 and stride 1
 * or 2 along W, with its bias and the epilogue ce (NULL: none; res: the
 * plane's residual or NULL), on AVX-512 (conv_depthwise_avx512.c; x86
 * only, called when cpu_features.h has avx512). x: the input plane, w:
 * its 9 taps. */
void conv_dw3x3_plane_avx512(const conv_geom *g, const float *x, const float *w, float bias, float *y,
                             const float *res, const conv_epilogue *ce);

/* Whether conv_dw3x3_plane_avx512 walks g's output rows in order, past
 * two vectors a row, rather than column by column (wide_rows). */
static inline int conv_dw3x3_wide_rows(const conv_geom *g) { return g->out[1] > 32; }

/* The same for a stride-1 conv whose output rows are as wide as the
 * input's (W): output position p reads input p + (kh - ph) * W + (kw -
 * pw), so the plane is one run of P = OH * W positions, 16 at a time;
 * masks[v * 9 + tap]: the lanes of vector v whose tap is inside the
 * input (conv_depthwise.c makes them once for all planes). */
void conv_dw3x3_flat_avx512(const float *x, const float *w, float bias, float *y, const float *res,
                            const conv_epilogue *ce, const uint16_t *masks, int64_t P, int64_t W, int64_t ph,
                            int64_t pw);

/* Those masks (vectors of P = OH * W positions, 9 a vector) of an input
 * of H rows and W columns padded by ph and pw, worked out 16 positions a
 * step: they are made every call, and one lane at a time they were a
 * serial part of the conv's time. */
void conv_dw3x3_flat_masks_avx512(uint16_t *masks, int64_t OH, int64_t H, int64_t W, int64_t ph, int64_t pw);

#endif /* RLX_CONV_DEPTHWISE_H */
