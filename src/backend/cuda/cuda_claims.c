/* cuda_claims.c — which nodes the CUDA backend takes (rlx_backend.claims):
 * every op with a device kernel, within the limits of that kernel; a
 * declined node runs on the CPU and the reason is what RLX_TRACE prints. */
#include "cuda_plan.h"

#include <stdio.h>

static int any_block_input(const rlx_graph *g, const ir_node *n) {
  for (int i = 0; i < n->n_in; i++)
    if (is_block(ir_in(g, n, i)->dtype)) return 1;
  return 0;
}

#define DECLINE(...) return (snprintf(why, cap, __VA_ARGS__), 0)

static int static_shape(const ir_shape *s) {
  for (int i = 0; i < s->rank; i++)
    if (ir_dim_is_sym(s->d[i])) return 0;
  return 1;
}

/* The spatial ops' inputs and output: of a float type the kernels take,
 * each tensor's elements within cuDNN's int (and one grid's) range. A
 * symbolic dim (legalization sees the graph before its shapes are bound)
 * passes; the partition of each shape binding asks again. */
static int spatial_claims(const rlx_graph *g, const ir_node *n, char *why, size_t cap) {
  const char *name = ir_ops[n->op].name;
  rlx_dtype t = ir_in(g, n, 0)->dtype;
  if (t != RLX_F32 && t != RLX_F16 && t != RLX_BF16) DECLINE("%s of %s: no CUDA kernel", name, rlx_dtype_name(t));
  for (int i = -1; i < n->n_in; i++) {
    const ir_shape *s = i < 0 ? &n->out[0].shape : &ir_in(g, n, i)->shape;
    if (static_shape(s) && ir_numel(s) > 0x7fffffff) DECLINE("%s of %lld elements: more than cuDNN's int", name, (long long)ir_numel(s));
  }
  return 1;
}

/* A convolution cuDNN computes: F32, and the output size cuDNN derives from
 * the begin pads taken as symmetric (ConvTranspose: the convolution of its
 * output gives its input's size). */
static int conv_claims(const rlx_graph *g, const ir_node *n, char *why, size_t cap) {
  const char *name = ir_ops[n->op].name;
  const char *no_dnn = cuda_cudnn_error();
  if (no_dnn) DECLINE("%s: %s", name, no_dnn);
  if (!spatial_claims(g, n, why, cap)) return 0;
  const ir_type *x = ir_in(g, n, 0), *w = ir_in(g, n, 1), *y = &n->out[0];
  if (x->dtype != RLX_F32) DECLINE("%s of %s: the CUDA convolutions (cuDNN) take f32", name, rlx_dtype_name(x->dtype));
  const int nd = (int)n->a.ndim, tr = n->op == RLX_OP_ConvTranspose;
  for (int i = 0; i < nd; i++) {
    const int64_t k = w->shape.d[2 + i], s = n->a.stride.v[i], p = n->a.pad.v[i];
    const int64_t dil = n->a.dilation.n ? n->a.dilation.v[i] : 1;
    const int64_t in = tr ? y->shape.d[2 + i] : x->shape.d[2 + i], out = tr ? x->shape.d[2 + i] : y->shape.d[2 + i];
    if (ir_dim_is_sym(in) || ir_dim_is_sym(out)) continue;
    if (in + 2 * p < dil * (k - 1) + 1 || (in + 2 * p - dil * (k - 1) - 1) / s + 1 != out)
      DECLINE("%s with pads %lld (begin) and %lld (end) on dim %d: cuDNN pads both sides alike", name, (long long)p,
              (long long)n->a.pad.v[nd + i], i);
  }
  return 1;
}

int cuda_claims(const rlx_backend *b, const rlx_graph *g, rlx_node id, char *why, size_t cap) {
  (void)b;
  const ir_node *n = &g->nodes[id];
  const ir_type *x = n->n_in ? ir_in(g, n, 0) : NULL;
  /* 16-bit and unsigned 32/64-bit integers (ONNX's) have no device kernels */
  for (int i = -n->n_out; i < n->n_in; i++) {
    rlx_dtype t = i < 0 ? n->out[-1 - i].dtype : ir_in(g, n, i)->dtype;
    if (t == RLX_I16 || t == RLX_U16 || t == RLX_U32 || t == RLX_U64) DECLINE("dtype %s", rlx_dtype_name(t));
  }
  switch (n->op) {
  case RLX_OP_Rope:
    if (n->a.n_rot > 2 * CU_ROPE_MAX_PAIRS)
      DECLINE("Rope: %lld rotated dims (at most %d)", (long long)n->a.n_rot, 2 * CU_ROPE_MAX_PAIRS);
    return 1;
  case RLX_OP_Input:
  case RLX_OP_Param:
  case RLX_OP_Constant:
  case RLX_OP_Reshape:
  case RLX_OP_StopGradient:
  case RLX_OP_GetOutput:
  case RLX_OP_Assign:
  case RLX_OP_Iota:
  case RLX_OP_MatMul:
  case RLX_OP_FusedMatMulBiasAct:
  case RLX_OP_FusedResidualLN:
  case RLX_OP_FusedResidualRmsNorm:
  case RLX_OP_FusedSwiGLU:
  case RLX_OP_AllReduce: /* f32, f16, bf16, f64, i32, i64: all NCCL's */
    return 1;
  case RLX_OP_Activation:
  case RLX_OP_Binary:
  case RLX_OP_Compare:
  case RLX_OP_Where:
  case RLX_OP_Cast:
  case RLX_OP_Clamp:
  case RLX_OP_Expand:
  case RLX_OP_Transpose:
  case RLX_OP_Narrow:
  case RLX_OP_Slice:
  case RLX_OP_Concat:
  case RLX_OP_Pad:
  case RLX_OP_Gather:
  case RLX_OP_UpdateSlice:
  case RLX_OP_OneHot:
  case RLX_OP_Tri:
  case RLX_OP_ResizeNearest2x:
  case RLX_OP_TransformRegion:
  case RLX_OP_Reduce:
  case RLX_OP_ArgMax:
  case RLX_OP_ArgMin:
  case RLX_OP_Cumsum:
    /* a block table (a GGUF embedding) gathered by rows, a quantized KV
     * cache's rows written or its first rows taken: whole blocks move as bytes */
    if (n->op == RLX_OP_Gather && is_block(x->dtype) && n->a.axis < x->shape.rank - 1) return 1;
    if ((n->op == RLX_OP_UpdateSlice || n->op == RLX_OP_Narrow) && is_block(x->dtype) &&
        n->a.axis < x->shape.rank - 1 && (n->op == RLX_OP_Narrow || ir_in(g, n, 1)->dtype == x->dtype))
      return 1;
    if (any_block_input(g, n)) DECLINE("%s of block dtype %s: no CUDA kernel", ir_ops[n->op].name, rlx_dtype_name(x->dtype));
    return 1;
  case RLX_OP_Softmax:
  case RLX_OP_LogSoftmax:
  case RLX_OP_LayerNorm:
  case RLX_OP_RmsNorm: {
    int64_t numel = ir_numel(&x->shape), len = 1;
    if (n->op == RLX_OP_Softmax || n->op == RLX_OP_LogSoftmax) len = x->shape.rank ? x->shape.d[n->a.axis] : 1;
    else for (int i = (int)n->a.axis; i < x->shape.rank; i++) len *= x->shape.d[i];
    if (len > 0 && numel / len > 0x7fffffff) DECLINE("%lld rows: more than one launch grid holds", (long long)(numel / len));
    return 1;
  }
  case RLX_OP_BatchNorm:
    for (int i = 1; i < 5; i++) {
      const ir_shape *s = &ir_in(g, n, i)->shape;
      if (s->rank != 1 || x->shape.rank < 2 || s->d[0] != x->shape.d[1])
        DECLINE("BatchNorm statistics of shape other than [C]: no CUDA kernel");
    }
    return 1;
  case RLX_OP_Attention: {
    const rlx_dtype kt = ir_in(g, n, 1)->dtype;
    /* a quantized KV cache: its blocks decoded as the kernels stage K and V */
    if ((kt == RLX_Q8_0 || kt == RLX_Q4_0) && x->dtype == RLX_F32 && ir_in(g, n, 2)->dtype == kt &&
        n->a.head_dim % 32 == 0 && n->a.head_dim <= 256)
      return 1;
    if (any_block_input(g, n)) DECLINE("Attention over %s keys and values: no CUDA kernel", rlx_dtype_name(kt));
    if (n->a.head_dim > 256) DECLINE("Attention head_dim %lld > 256: no CUDA kernel", (long long)n->a.head_dim);
    return 1;
  }
  case RLX_OP_Quantize:
    if ((n->out[0].dtype == RLX_Q8_0 || n->out[0].dtype == RLX_Q4_0) &&
        (x->dtype == RLX_F32 || x->dtype == RLX_F16 || x->dtype == RLX_BF16))
      return 1;
    DECLINE("Quantize of %s into %s: the CUDA kernel writes q8_0 and q4_0 from f32, f16, bf16",
            rlx_dtype_name(x->dtype), rlx_dtype_name(n->out[0].dtype));
  case RLX_OP_DequantMatMul:
  case RLX_OP_Dequantize: {
    rlx_dtype scheme = n->op == RLX_OP_DequantMatMul ? ir_in(g, n, 1)->dtype : x->dtype;
    if (scheme == RLX_F16 || scheme == RLX_BF16) { /* 16-bit weights (lower_half_weight_matmul) */
      if (x->dtype != RLX_F32 && x->dtype != scheme)
        DECLINE("DequantMatMul of %s weights under %s x: no CUDA kernel", rlx_dtype_name(scheme),
                rlx_dtype_name(x->dtype));
      return 1;
    }
    if (!cu_quant_supported(scheme))
      DECLINE("%s of %s: the CUDA kernels decode q4_0, q8_0, q4_k, q6_k", ir_ops[n->op].name, rlx_dtype_name(scheme));
    return 1;
  }
  case RLX_OP_ElementwiseRegion:
  case RLX_OP_BatchElementwiseRegion: {
    int ins = n->op == RLX_OP_ElementwiseRegion ? n->n_in : n->n_in - (int)n->a.num_batch_inputs + 1;
    if (n->a.chain.n > CU_EW_MAX_STEPS || ins > CU_EW_MAX_IN)
      DECLINE("%s of %d steps over %d inputs: the CUDA interpreter takes %d steps, %d inputs", ir_ops[n->op].name,
              n->a.chain.n, ins, CU_EW_MAX_STEPS, CU_EW_MAX_IN);
    return 1;
  }
  case RLX_OP_FusedAttentionBlock:
    DECLINE("FusedAttentionBlock: not lowered on CUDA (legalization decomposes it into MatMul, Rope, Attention)");
  case RLX_OP_TopK: DECLINE("TopK: no CUDA kernel");
  case RLX_OP_ScatterAdd: DECLINE("ScatterAdd: no CUDA kernel (per-update rounding in order)");
  case RLX_OP_Conv:
  case RLX_OP_FusedConv:
  case RLX_OP_ConvTranspose:
    return conv_claims(g, n, why, cap);
  case RLX_OP_Pool:
  case RLX_OP_GroupNorm:
    return spatial_claims(g, n, why, cap);
  case RLX_OP_Resize:
    if (x->shape.rank != 4) DECLINE("Resize of rank %d: no CUDA kernel", x->shape.rank);
    return spatial_claims(g, n, why, cap);
  case RLX_OP_Fft:
  case RLX_OP_LogMel:
  case RLX_OP_FakeQuantize:
  case RLX_OP_CrossEntropy:
  case RLX_OP_MseLoss:
  default:
    DECLINE("%s: no CUDA kernel", ir_ops[n->op].name);
  }
}
