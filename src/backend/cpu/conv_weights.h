/* conv_weights.h — F32 Conv with a param or constant weight, on the GEMM
 * with the weight packed once (conv_weights.c). */
#ifndef RLX_CONV_WEIGHTS_H
#define RLX_CONV_WEIGHTS_H

#include "conv_gemm.h"

/* Whether conv_weights_forward computes this Conv: F32, one group, the
 * weight a param or constant (its input carries a prepack slot). */
int conv_weights_applies(const ir_node *n, const cpu_tensor *in, const cpu_tensor *out);

/* ce: a FusedConv's epilogue, applied in the GEMM's output tiles; NULL:
 * bias only. */
rlx_status conv_weights_forward(cpu_ctx *ctx, const ir_node *n, const conv_geom *g, const cpu_tensor *in,
                                cpu_tensor *out, const conv_epilogue *ce);

#endif /* RLX_CONV_WEIGHTS_H */
