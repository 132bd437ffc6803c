/* vjp_misc.c — vector-Jacobian rules of the leaves, the losses and the
 * fused ops. Leaves end the sweep (their gradient is read out); the
 * losses and the fused ops are differentiated through their expansions
 * (the fused ops through pass_decompose, so the rule is the gradient of
 * exactly the primitives they stand for). */
#include "autodiff.h"

rlx_status ad_vjp_Input(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  (void)c, (void)n, (void)gout;
  return RLX_OK;
}

rlx_status ad_vjp_Param(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  (void)c, (void)n, (void)gout;
  return RLX_OK;
}

rlx_status ad_vjp_CrossEntropy(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_vjp_expanded(c, n, gout, ad_expand_cross_entropy);
}

rlx_status ad_vjp_MseLoss(ad_ctx *c, const ir_node *n, const rlx_node *gout) {
  return ad_vjp_expanded(c, n, gout, ad_expand_mse_loss);
}

#define AD_VJP_FUSED(Id)                                                       \
  rlx_status ad_vjp_##Id(ad_ctx *c, const ir_node *n, const rlx_node *gout) { \
    return ad_vjp_expanded(c, n, gout, ad_expand_fused);                       \
  }
AD_VJP_FUSED(FusedMatMulBiasAct)
AD_VJP_FUSED(FusedConv)
AD_VJP_FUSED(FusedResidualLN)
AD_VJP_FUSED(FusedResidualRmsNorm)
AD_VJP_FUSED(FusedSwiGLU)
AD_VJP_FUSED(ElementwiseRegion)
AD_VJP_FUSED(BatchElementwiseRegion)
AD_VJP_FUSED(TransformRegion)
AD_VJP_FUSED(FusedAttentionBlock)
