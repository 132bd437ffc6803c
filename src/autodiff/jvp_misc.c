/* jvp_misc.c — Jacobian-vector rules of the leaves, the losses and the
 * fused ops (the last two through their expansions). */
#include "autodiff.h"

/* A leaf is active only as a primal, whose tangent is its tangent input:
 * the sweep never asks these (they are the table's entries for leaves). */
rlx_status ad_jvp_Input(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  tout[0] = ad_deriv(c, n->id, 0);
  return ad_status(c);
}

rlx_status ad_jvp_Param(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  tout[0] = ad_deriv(c, n->id, 0);
  return ad_status(c);
}

rlx_status ad_jvp_CrossEntropy(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return ad_jvp_expanded(c, n, tout, ad_expand_cross_entropy);
}

rlx_status ad_jvp_MseLoss(ad_ctx *c, const ir_node *n, rlx_node *tout) {
  return ad_jvp_expanded(c, n, tout, ad_expand_mse_loss);
}

#define AD_JVP_FUSED(Id)                                                 \
  rlx_status ad_jvp_##Id(ad_ctx *c, const ir_node *n, rlx_node *tout) { \
    return ad_jvp_expanded(c, n, tout, ad_expand_fused);                 \
  }
AD_JVP_FUSED(FusedMatMulBiasAct)
AD_JVP_FUSED(FusedConv)
AD_JVP_FUSED(FusedResidualLN)
AD_JVP_FUSED(FusedResidualRmsNorm)
AD_JVP_FUSED(FusedSwiGLU)
AD_JVP_FUSED(ElementwiseRegion)
AD_JVP_FUSED(BatchElementwiseRegion)
AD_JVP_FUSED(TransformRegion)
AD_JVP_FUSED(FusedAttentionBlock)
