/* conv_direct.h — direct convolution of F32 NCHW tensors with AVX-512
 * (conv_direct_avx512.c): no im2col matrix, no packing of the input. */
#ifndef RLX_CONV_DIRECT_H
#define RLX_CONV_DIRECT_H

#include "conv_gemm.h"

/* Whether conv_direct_forward computes this conv: the CPU has AVX-512; a
 * Conv that conv_weights_forward would take (F32, one group, packed
 * weight slot); a kernel of more than one tap, or a 1x1 kernel of stride
 * 1 from at least 1024 channels into a multiple of 32; stride 1 or 2;
 * output rows of at least 8 positions; an epilogue whose activation is none, ReLU or
 * leaky ReLU (clamp and residual allowed). */
int conv_direct_applies(const ir_node *n, const conv_geom *g, const cpu_tensor *in, const cpu_tensor *out,
                        const conv_epilogue *ce);

/* y = clamp(act(conv(x, w) + bias + residual)) for the conv of a node that
 * conv_direct_applies to (ce NULL: bias only). Returns RLX_OK, or
 * RLX_ERR_NOMEM with y unspecified. Keeps w packed in in[1]'s prepack
 * slot between calls. */
rlx_status conv_direct_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                               cpu_tensor *out, const conv_epilogue *ce);

#endif /* RLX_CONV_DIRECT_H */
