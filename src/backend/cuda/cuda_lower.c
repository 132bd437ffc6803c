/* cuda_lower.c — the plan's step list (a step per launch, with its argument
 * block), the helpers every op group's lowering shares, and the dispatch of
 * a node to its group (lower_*.c). */
#include "cuda_plan.h"

#include <stdlib.h>
#include <string.h>

rlx_status cuda_fail(cudaError_t e, const char *what) {
  return rlx_set_error(RLX_ERR_DEVICE, "CUDA: %s: %s", what, cudaGetErrorString(e));
}

cuda_step *cuda_new_step(cuda_plan *pl, int kind, const ir_node *n) {
  if (pl->n_steps == pl->cap_steps) {
    int cap = pl->cap_steps ? 2 * pl->cap_steps : 64;
    cuda_step *s = realloc(pl->steps, (size_t)cap * sizeof *s);
    if (!s) return NULL;
    pl->steps = s;
    pl->cap_steps = cap;
  }
  cuda_step *s = &pl->steps[pl->n_steps++];
  memset(s, 0, sizeof *s);
  s->kind = kind;
  s->node = n->id;
  s->folded = pl->folded[n->id];
  return s;
}

/* The last step when it is a launch of `kind` that node n may join as
 * one more part (the same folded flag; nothing emitted since), else NULL. */
cuda_step *cuda_joinable_step(cuda_plan *pl, const ir_node *n, int kind) {
  cuda_step *s = pl->n_steps ? &pl->steps[pl->n_steps - 1] : NULL;
  return s && s->kind == kind && s->folded == pl->folded[n->id] ? s : NULL;
}

void *cuda_new_args(cuda_step *s, size_t bytes) {
  s->args = calloc(1, bytes);
  return s->args;
}

rlx_status cuda_nomem(const ir_node *n) {
  return rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory lowering %s (node %d)", ir_ops[n->op].name, n->id);
}

rlx_status cuda_alloc_dev(void **p, size_t bytes, const char *what) {
  cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *p = NULL;
    return rlx_set_error(RLX_ERR_NOMEM, "CUDA: cannot allocate %zu bytes of device memory for %s: %s", bytes, what,
                         cudaGetErrorString(e));
  }
  return RLX_OK;
}

/* Scratch of a split kernel, owned by step s: `floats` F32 partials and
 * `counters` arrival counters, zeroed (the kernels leave them zeroed). */
rlx_status cuda_step_scratch(cuda_step *s, size_t floats, size_t counters, float **part, unsigned **count) {
  const size_t part_bytes = (floats * sizeof(float) + 255) / 256 * 256, bytes = part_bytes + counters * sizeof(unsigned);
  rlx_status st = cuda_alloc_dev(&s->dev_scratch, bytes, "split-kernel partial sums");
  if (st) return st;
  cudaError_t e = cudaMemset(s->dev_scratch, 0, bytes);
  if (e != cudaSuccess) return cuda_fail(e, "cudaMemset");
  *part = floats ? (float *)s->dev_scratch : NULL;
  *count = (unsigned *)((uint8_t *)s->dev_scratch + part_bytes);
  return RLX_OK;
}

void cuda_contig_strides(int rank, const int64_t *d, int64_t *st) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    st[i] = s;
    s *= d[i];
  }
}

/* Strides of a tensor of shape s read at an output of rank r under
 * NumPy broadcasting: missing leading dims and size-1 dims get 0. */
void cuda_bcast_strides(const ir_shape *s, int r, const int64_t *dims, int64_t *st) {
  int64_t own[RLX_MAX_RANK];
  cuda_contig_strides(s->rank, s->d, own);
  for (int i = 0; i < r; i++) {
    int j = i - (r - s->rank);
    st[i] = j < 0 || s->d[j] == 1 ? 0 : own[j];
  }
  (void)dims;
}

rlx_status cuda_lower_node(cuda_plan *pl, const ir_node *n) {
  if (n->op == RLX_OP_Cast && pl->cast_into[n->id] >= 0 && pl->g->nodes[pl->cast_into[n->id]].op == RLX_OP_Attention)
    return RLX_OK; /* the Attention's lowering takes it or launches it (emit_attn_cast) */
  if (n->op == RLX_OP_Cast && cuda_fuse(pl, CUDA_FUSE_CAST_UPDATE, n, &(cuda_fuse_site){.args = NULL})) return RLX_OK;
  switch (n->op) {
  case RLX_OP_Activation:
  case RLX_OP_Binary:
  case RLX_OP_Compare:
  case RLX_OP_Where:
  case RLX_OP_Clamp:
    return cuda_lower_elementwise(pl, n);
  case RLX_OP_Cast:
    return n->out[0].dtype == ir_in(pl->g, n, 0)->dtype ? cuda_lower_layout(pl, n) : cuda_lower_elementwise(pl, n);
  case RLX_OP_ElementwiseRegion:
  case RLX_OP_BatchElementwiseRegion:
    return cuda_lower_region(pl, n);
  case RLX_OP_FusedSwiGLU: return cuda_lower_swiglu(pl, n);
  case RLX_OP_BatchNorm: return cuda_lower_batch_norm(pl, n);
  case RLX_OP_Reduce:
  case RLX_OP_ArgMax:
  case RLX_OP_ArgMin:
  case RLX_OP_Cumsum:
  case RLX_OP_Softmax:
  case RLX_OP_LogSoftmax:
    return cuda_lower_reduce(pl, n);
  case RLX_OP_LayerNorm:
  case RLX_OP_RmsNorm:
  case RLX_OP_FusedResidualLN:
  case RLX_OP_FusedResidualRmsNorm:
    return cuda_lower_norm(pl, n);
  case RLX_OP_Rope: return cuda_lower_rope(pl, n);
  case RLX_OP_Attention: return cuda_lower_attention(pl, n);
  case RLX_OP_MatMul: return cuda_lower_matmul(pl, n);
  case RLX_OP_FusedMatMulBiasAct: return cuda_lower_fused_matmul(pl, n);
  case RLX_OP_DequantMatMul:
  case RLX_OP_Dequantize:
  case RLX_OP_Quantize:
    return cuda_lower_quant(pl, n);
  case RLX_OP_AllReduce: return cuda_lower_all_reduce(pl, n);
  case RLX_OP_Conv:
  case RLX_OP_FusedConv:
  case RLX_OP_ConvTranspose:
  case RLX_OP_Pool:
  case RLX_OP_Resize:
  case RLX_OP_GroupNorm:
    return cuda_lower_spatial(pl, n);
  default:
    return cuda_lower_layout(pl, n);
  }
}
