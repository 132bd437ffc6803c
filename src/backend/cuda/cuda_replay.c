/* cuda_replay.c — running a plan's steps: a launch per step, the per-run
 * sequence (error word, staged inputs, launches, outputs) issued op by op
 * or captured once into a CUDA graph, the pinned staging blocks, and the
 * RLX_CUDA_PROFILE table. */
#include "cuda_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rlx_status cuda_launch(cuda_plan *pl, const cuda_step *s) {
  cudaStream_t st = pl->stream;
  int e;
  switch (s->kind) {
  case ST_EW: e = cu_ew_launch(s->args, st); break;
  case ST_SWIGLU: e = cu_swiglu_launch(s->src, s->dtype, s->dst, s->dtype2, s->n0, s->n1, s->flag, st); break;
  case ST_COPY: e = cu_copy_launch(s->args, st); break;
  case ST_FILL: e = cu_fill_launch(s->dst, s->es, s->n0, s->bits, st); break;
  case ST_MEMCPY: e = cudaMemcpyAsync(s->dst, s->src, s->bytes, cudaMemcpyDeviceToDevice, st); break;
  case ST_MEMSET: e = cudaMemsetAsync(s->dst, 0, s->bytes, st); break;
  case ST_GATHER: e = cu_gather_launch(s->args, st); break;
  case ST_IOTA: e = cu_iota_launch(s->dst, s->dtype, s->n0, s->n1, s->n2, st); break;
  case ST_ONE_HOT: e = cu_one_hot_launch(s->src, s->dtype, s->dst, s->es, s->bits, s->n0, s->n1, st); break;
  case ST_TRI: e = cu_tri_launch(s->src, s->dst, s->es, s->n0, s->n1, s->n2, s->flag, s->n3, st); break;
  case ST_REDUCE: e = cu_reduce_launch(s->args, st); break;
  case ST_SOFTMAX: e = cu_softmax_launch(s->src, s->dst, s->dtype, s->n0, s->n1, s->n2, s->flag, st); break;
  case ST_NORM: e = cu_norm_launch(s->args, st); break;
  case ST_ROPE: e = cu_rope_launch(s->args, st); break;
  case ST_ATTN: e = cu_attention_launch(s->args, st); break;
  case ST_GEMM: return cuda_gemm_run(s->args, st);
  case ST_GEMV: e = cu_gemv_launch(s->args, st); break;
  case ST_QMM: e = cu_qmm_launch(s->src, s->dtype, s->aux, s->dtype2, s->dst, s->n0, s->n1, s->n2, st); break;
  case ST_DEQUANT: e = cu_dequant_launch(s->src, s->dtype, s->dst, s->dtype2, s->n0, s->n1, st); break;
  case ST_QUANTIZE: e = cu_quantize_launch(s->src, s->dtype, s->dst, s->dtype2, s->n0, s->n1, st); break;
  case ST_QUANT_X: e = cu_quant_x_launch(s->args, st); break;
  case ST_QMV: e = cu_qmv_launch(s->args, st); break;
  case ST_ALL_REDUCE: return cuda_nccl_all_reduce(pl->comm, s->src, s->dst, s->n0, (rlx_dtype)s->dtype, st);
  case ST_CONV: return cuda_conv_run(s->args, pl->conv_ws, pl->conv_ws_bytes);
  case ST_POOL: e = cu_pool_launch(s->args, st); break;
  case ST_RESIZE: e = cu_resize_launch(s->args, st); break;
  case ST_GROUP_NORM: e = cu_group_norm_launch(s->args, st); break;
  default: e = cudaErrorInvalidValue; break;
  }
  if (e != cudaSuccess) {
    const ir_node *n = &pl->g->nodes[s->node];
    return rlx_set_error(RLX_ERR_DEVICE, "CUDA: launching %s (node %d): %s", ir_ops[n->op].name, n->id,
                         cudaGetErrorString((cudaError_t)e));
  }
  return RLX_OK;
}

/* The per-run launches: reset the error word, every non-folded step, fetch the error word. */
rlx_status cuda_issue_run(cuda_plan *pl) {
  cudaError_t e;
  if (pl->has_err && (e = cudaMemsetAsync(pl->err_dev, 0, sizeof *pl->err_dev, pl->stream)) != cudaSuccess)
    return cuda_fail(e, "cudaMemsetAsync");
  if (pl->in_bytes &&
      (e = cudaMemcpyAsync(pl->in_dev, pl->in_host, pl->in_bytes, cudaMemcpyHostToDevice, pl->stream)) != cudaSuccess)
    return cuda_fail(e, "staging the inputs");
  if (pl->events) cudaEventRecord(pl->events[0], pl->stream);
  for (int i = 0; i < pl->n_steps; i++) {
    if (pl->steps[i].folded) continue;
    rlx_status st = cuda_launch(pl, &pl->steps[i]);
    if (st) return st;
    if (pl->events) cudaEventRecord(pl->events[i + 1], pl->stream);
  }
  if (pl->has_err &&
      (e = cudaMemcpyAsync(pl->err_host, pl->err_dev, sizeof *pl->err_dev, cudaMemcpyDeviceToHost, pl->stream)) != cudaSuccess)
    return cuda_fail(e, "cudaMemcpyAsync");
  for (int i = 0; i < pl->n_out_copies; i++) {
    const struct out_copy *c = &pl->out_copy[i];
    if ((e = cudaMemcpyAsync(pl->out_host + c->off, pl->slot[c->slot], c->bytes, cudaMemcpyDeviceToHost, pl->stream)) !=
        cudaSuccess)
      return cuda_fail(e, "copying an output");
  }
  return RLX_OK;
}

rlx_status cuda_capture(cuda_plan *pl) {
  cudaGraph_t graph;
  cudaError_t e = cudaStreamBeginCapture(pl->stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return cuda_fail(e, "cudaStreamBeginCapture");
  rlx_status st = cuda_issue_run(pl);
  e = cudaStreamEndCapture(pl->stream, &graph);
  if (st) {
    if (e == cudaSuccess) cudaGraphDestroy(graph);
    return st;
  }
  if (e != cudaSuccess) return cuda_fail(e, "cudaStreamEndCapture");
  e = cudaGraphInstantiate(&pl->exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    pl->exec = NULL;
    return cuda_fail(e, "cudaGraphInstantiate");
  }
  return RLX_OK;
}

/* The device error word of the last run as a status. */
rlx_status cuda_check_device_error(const cuda_plan *pl) {
  const cu_error *e = pl->err_host;
  if (!pl->has_err || e->code == CU_ERR_NONE) return RLX_OK;
  const ir_node *n = &pl->g->nodes[e->node];
  if (e->code == CU_ERR_INDEX)
    return rlx_set_error(RLX_ERR_INVALID, "%s (node %d): index %lld (element %lld) out of range [0, %lld)",
                         ir_ops[n->op].name, n->id, e->value, e->element, e->limit);
  return rlx_set_error(RLX_ERR_INVALID, "%s (node %d): start %lld out of range [0, %lld]", ir_ops[n->op].name, n->id,
                       e->value, e->limit);
}

/* Accumulates the last run's time per launch (RLX_CUDA_PROFILE). */
void cuda_profile_collect(cuda_plan *pl) {
  int prev = 0;
  for (int i = 0; i < pl->n_steps; i++) {
    if (pl->steps[i].folded) continue;
    float ms = 0;
    cudaEventElapsedTime(&ms, pl->events[prev], pl->events[i + 1]);
    pl->step_ms[i] += ms;
    prev = i + 1;
  }
  pl->profiled_runs++;
}

/* The profile table: time per op kind, largest first. */
void cuda_profile_print(const cuda_plan *pl) {
  double per_op[RLX_OP_COUNT] = {0}, total = 0;
  int count[RLX_OP_COUNT] = {0};
  for (int i = 0; i < pl->n_steps; i++) {
    if (pl->steps[i].folded) continue;
    int op = pl->g->nodes[pl->steps[i].node].op;
    per_op[op] += pl->step_ms[i] / pl->profiled_runs;
    count[op]++;
    total += pl->step_ms[i] / pl->profiled_runs;
  }
  fprintf(stderr, "rlx: cuda profile of \"%s\" (%d runs, op by op): %.4f ms per run\n", pl->g->name ? pl->g->name : "",
          pl->profiled_runs, total);
  for (;;) {
    int best = -1;
    for (int op = 0; op < RLX_OP_COUNT; op++)
      if (count[op] && (best < 0 || per_op[op] > per_op[best])) best = op;
    if (best < 0) break;
    fprintf(stderr, "  %-22s %4d launches %9.4f ms %5.1f%%\n", ir_ops[best].name, count[best], per_op[best],
            total > 0 ? 100 * per_op[best] / total : 0.0);
    count[best] = 0;
  }
}

/* Inputs staged through pinned memory: each of at most STAGE_LEAF_MAX
 * bytes, STAGE_IN_MAX in all (a decode step's tokens, positions, rope rows
 * and mask; not a prefill's activations). Outputs copied back inside the
 * replay: STAGE_OUT_MAX in all (a decode step's logits). */
#define STAGE_LEAF_MAX ((size_t)64 << 10)
#define STAGE_IN_MAX ((size_t)256 << 10)
#define STAGE_OUT_MAX ((size_t)1 << 20)
#define STAGE_ALIGN ((size_t)256)

static size_t stage_round(size_t bytes) { return (bytes + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN; }

static rlx_status alloc_pinned(uint8_t **p, size_t bytes) {
  cudaError_t e = cudaHostAlloc((void **)p, bytes, cudaHostAllocDefault);
  if (e == cudaSuccess) return RLX_OK;
  *p = NULL;
  return cuda_fail(e, "cudaHostAlloc");
}

/* Offsets of the staged inputs in in_host / in_dev, and both blocks. */
rlx_status cuda_plan_staged_inputs(cuda_plan *pl) {
  const rlx_graph *g = pl->g;
  pl->in_off = malloc((size_t)g->n_nodes * sizeof *pl->in_off);
  if (!pl->in_off) return rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory");
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    const size_t bytes = n->op == RLX_OP_Input ? rlx_dtype_nbytes(n->out[0].dtype, ir_numel(&n->out[0].shape)) : 0;
    pl->in_off[i] = SIZE_MAX;
    if (bytes && bytes <= STAGE_LEAF_MAX && pl->in_bytes + bytes <= STAGE_IN_MAX) {
      pl->in_off[i] = pl->in_bytes;
      pl->in_bytes += stage_round(bytes);
    }
  }
  if (!pl->in_bytes) return RLX_OK;
  rlx_status st = cuda_alloc_dev((void **)&pl->in_dev, pl->in_bytes, "the staged inputs");
  if (!st) st = alloc_pinned(&pl->in_host, pl->in_bytes);
  if (!st) memset(pl->in_host, 0, pl->in_bytes);
  return st;
}

/* The outputs copied to out_host at the end of each run (their device
 * addresses known), as many as fit STAGE_OUT_MAX. */
rlx_status cuda_plan_output_copies(cuda_plan *pl) {
  const rlx_graph *g = pl->g;
  pl->out_copy = calloc((size_t)g->n_outputs + 1, sizeof *pl->out_copy);
  if (!pl->out_copy) return rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory");
  size_t total = 0;
  for (int k = 0; k < g->n_outputs; k++) {
    const size_t slot = (size_t)g->outputs[k] * IR_MAX_OUTPUTS, bytes = pl->mem.nbytes[slot];
    int seen = 0;
    for (int j = 0; j < pl->n_out_copies; j++) seen |= pl->out_copy[j].slot == slot;
    if (seen || !bytes || !pl->slot[slot] || pl->mem.offset[slot] == SIZE_MAX || total + bytes > STAGE_OUT_MAX)
      continue;
    pl->out_copy[pl->n_out_copies++] = (struct out_copy){slot, total, bytes};
    total += stage_round(bytes);
  }
  return total ? alloc_pinned(&pl->out_host, total) : RLX_OK;
}
