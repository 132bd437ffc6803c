/* cuda_backend.c — the CUDA backend: a segment of the graph lowered to a
 * list of kernel launches and cuBLASLt calls over one device arena, and
 * captured once into a CUDA graph executable; a run is one replay.
 *
 * Compile (per specialized graph, i.e. per shape binding):
 *  - the memory planner (plan_arena_offsets) places every intermediate in
 *    one device arena; views name their input's bytes, in-place nodes
 *    share their input's buffer, exactly as on the CPU;
 *  - every leaf gets a device buffer (constants are uploaded now), so each
 *    tensor has a final device address and every launch's argument block
 *    is built once, here; a param's buffer is the session's, in its store
 *    (param_store.h), which every plan of the session shares;
 *  - parameter-only subgraphs (transposes, casts, reshapes of weights)
 *    are marked "folded": they get buffers of their own outside the arena
 *    (in the store too, shared by the session's plans) and run once after
 *    their params are uploaded, not per run;
 *  - a transpose of a weight's two dims that only feeds matmuls is not run
 *    at all: the matmul reads it transposed (cuBLASLt op T);
 *  - a residual add of a product (x + a @ w, prefill-sized) is computed by
 *    the product's GEMM (cuBLASLt's C input, beta 1): no add launch, and
 *    the product never round-trips device memory (RLX_CUDA_RESIDUAL_GEMM=0:
 *    off);
 *  - at decode rows, silu(x @ wg) * (x @ wu) (an MLP's gate and up
 *    projections and the region that reads them) is one GEMV launch that
 *    writes the region's output (RLX_CUDA_GLU_GEMV=0: off);
 *  - at decode rows an RmsNorm (zero beta) launched just before the
 *    products that read it is computed by their GEMV launch, which scales
 *    each sum by the row's norm and writes the norm's output as well
 *    (RLX_CUDA_GEMV_NORM=0: off);
 *  - at decode rows a Rope by tables of a product that only it reads (q
 *    and k of a layer) is applied by the product's GEMV launch as it
 *    stores (RLX_CUDA_GEMV_ROPE=0: off);
 *  - a float Cast whose one reader is an UpdateSlice (a new K or V row
 *    into a 16-bit cache) is done by that UpdateSlice's copy, and two
 *    in-place UpdateSlices of one geometry in a row (the K and the V row)
 *    share a launch;
 *  - the remaining launches are captured into a CUDA graph
 *    (RLX_CUDA_GRAPH=0: issued one by one each run; the same launches with
 *    the same arguments, so the results are identical; RLX_CUDA_PROFILE=1:
 *    op by op with an event around each launch, and a table of the time
 *    per op kind printed to stderr after 10 runs).
 * Run: inputs are copied to their device buffers when their version
 * changed (so a repeated run on unchanged inputs copies nothing; small
 * ones go to a pinned block that the replay itself copies over), params
 * when the store's buffer holds another version (and the folded steps
 * rerun when a param is not the version this plan folded them from), then
 * one graph replay, which ends by copying the device error word (an
 * out-of-range index, checked then) and the small outputs to pinned
 * memory, where a read finds them.
 */
#include "../../pass/pass.h"
#include "../backend.h"
#include "cu_kernels.h"
#include "param_store.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- device presence */

static int device_count;
static pthread_once_t device_once = PTHREAD_ONCE_INIT;
static void probe_devices(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  device_count = n;
  cudaGetLastError(); /* a failed probe (no driver) leaves no sticky error */
}

int rlx_cuda_available(void) {
  pthread_once(&device_once, probe_devices);
  return device_count > 0;
}

/* ---------------------------------------------------------------- claims */

static int is_block(rlx_dtype t) { return ir_is_block(t); }

static int any_block_input(const rlx_graph *g, const ir_node *n) {
  for (int i = 0; i < n->n_in; i++)
    if (is_block(ir_in(g, n, i)->dtype)) return 1;
  return 0;
}

#define DECLINE(...) return (snprintf(why, cap, __VA_ARGS__), 0)

static int cuda_claims(const rlx_backend *b, const rlx_graph *g, rlx_node id, char *why, size_t cap) {
  (void)b;
  const ir_node *n = &g->nodes[id];
  const ir_type *x = n->n_in ? ir_in(g, n, 0) : NULL;
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
    /* a block table (a GGUF embedding) gathered by rows: whole blocks move as bytes */
    if (n->op == RLX_OP_Gather && is_block(x->dtype) && n->a.axis < x->shape.rank - 1) return 1;
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
  case RLX_OP_Attention:
    if (n->a.head_dim > 256) DECLINE("Attention head_dim %lld > 256: no CUDA kernel", (long long)n->a.head_dim);
    return 1;
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
  case RLX_OP_GroupNorm: DECLINE("GroupNorm: no CUDA kernel");
  case RLX_OP_Conv:
  case RLX_OP_ConvTranspose:
  case RLX_OP_Pool:
  case RLX_OP_Resize:
  case RLX_OP_Fft:
  case RLX_OP_LogMel:
  case RLX_OP_Quantize:
  case RLX_OP_FakeQuantize:
  case RLX_OP_CrossEntropy:
  case RLX_OP_MseLoss:
  default:
    DECLINE("%s: no CUDA kernel", ir_ops[n->op].name);
  }
}

/* ---------------------------------------------------------------- plan */

enum { ST_EW, ST_SWIGLU, ST_COPY, ST_FILL, ST_MEMCPY, ST_MEMSET, ST_GATHER, ST_IOTA, ST_ONE_HOT, ST_TRI, ST_REDUCE,
       ST_SOFTMAX, ST_NORM, ST_ROPE, ST_ATTN, ST_GEMM, ST_GEMV, ST_QMM, ST_DEQUANT, ST_QUANT_X, ST_QMV };

typedef struct {
  int kind, node;
  int folded;                  /* parameter-only: runs after param uploads, not in the replay */
  void *args;                  /* heap argument block of the launcher (cu_*_args, cuda_gemm) */
  void *dev_scratch;           /* device scratch of a split kernel (partial sums, arrival counters) */
  /* the scalar launchers' arguments */
  const void *src, *aux;
  void *dst;
  size_t bytes;
  int dtype, dtype2, es, flag;
  int64_t n0, n1, n2, n3;
  uint64_t bits;
} cuda_step;

typedef struct {
  const rlx_graph *g;
  plan_memory mem;
  cudaStream_t stream;
  uint8_t *arena;
  void **leaf_dev;             /* [n_nodes] device buffer of a leaf, NULL for other nodes and empty leaves */
  size_t *leaf_bytes;          /* [n_nodes] */
  /* Small inputs and outputs cross through pinned host memory inside the
   * replay (plan_staged_inputs, plan_output_copies; issue_run copies): a
   * run copies an input's new bytes into in_host and reads an output from
   * out_host, with no copy call of its own; the pageable copies these
   * replace each cost a call and a wait on the host. */
  uint8_t *in_host, *in_dev;   /* the staged inputs: pinned, and their device buffers */
  size_t in_bytes;
  size_t *in_off;              /* [n_nodes] a staged input's offset in both (SIZE_MAX: not staged) */
  uint8_t *out_host;           /* pinned copies of the mirrored outputs after each run */
  int n_out_copies;
  struct out_copy { size_t slot, off, bytes; } *out_copy;
  /* [n_nodes] version of the data in leaf_dev as this plan last ran on it
   * (0: none yet); a param in the store has the version of its buffer too */
  uint64_t *leaf_version;
  cuda_store *store;           /* the session's params (NULL: the plan keeps its own) */
  cuda_store_entry **entry;    /* [n_nodes] a param's or folded node's buffer in the store, else NULL */
  void **folded_dev;           /* [n_nodes] buffer of a folded node */
  uint8_t *folded;             /* [n_nodes] parameter-only node */
  uint8_t *skip;               /* [n_nodes] node whose consumers absorbed it (no launch) */
  int *resid_add;              /* [n_nodes] of a MatMul: the residual add its GEMM may write (-1: none) */
  int *glu_region;             /* [n_nodes] of a gate or up product: the SwiGLU region its GEMV may write (-1: none) */
  int *cast_into;              /* [n_nodes] of a Cast: the UpdateSlice that may convert as it copies (-1: none) */
  uint8_t *rope_gemv;          /* [n_nodes] of a Rope by tables: its x is a product read only by it, which a GEMV
                                  launch may write rotated (join_gemv_rope) */
  uint8_t *add_done;           /* [n_nodes] computed by another node's launch (no launch of its own): a residual
                                  add by its product's, a SwiGLU region and its second product by the first's */
  uint8_t **slot;              /* [n_nodes * IR_MAX_OUTPUTS] device address of every output */
  cuda_step *steps;
  int n_steps, cap_steps;
  int64_t launches;            /* steps a run issues (not folded): rlx_session_stats.device_launches */
  size_t store_bytes;          /* of the store entries it reads: rlx_session_stats.param_device_bytes */
  void *workspace;             /* cuBLASLt, shared by the plan's GEMMs */
  void *scratch;               /* dequantized weights for large-M DequantMatMul, or quantized x for small M */
  size_t scratch_bytes;
  int qmm_exact;               /* RLX_QMATMUL_REF=1: small-M DequantMatMul in floats from x as given */
  int pdl;                     /* programmatic dependent launch of the kernels that take it (cu_kernels.h; RLX_CUDA_PDL=0: off) */
  int gemv_norm;               /* a GEMV launch may compute the RmsNorm before it (take_norm; RLX_CUDA_GEMV_NORM) */
  /* whose quantized x the scratch holds (lower_quant reuses it for the next
   * product of the same x): valid, x's output slot, M, K, folded or not */
  int qx_valid, qx_folded;
  size_t qx_slot;
  int64_t qx_M, qx_K;
  cu_error *err_dev, *err_host;
  int has_err, folded_ready, use_graph, tf32, attn_exact;
  int attn_no_cluster;         /* RLX_CUDA_ATTN_CLUSTER=0 */
  int attn_tile;               /* RLX_CUDA_ATTN_TILE: 64 or 128 (else 0) */
  int no_gemv;                 /* RLX_CUDA_GEMV=0: cuBLASLt for every product (the speed baseline) */
  cudaGraphExec_t exec;
  /* RLX_CUDA_PROFILE=1 */
  int profile, profiled_runs;
  int keep_state;              /* keep_assigned takes Assign values (RLX_CUDA_KEEP_STATE, default 1) */
  cudaEvent_t *events;         /* [n_steps + 1]: before the first launch, after each */
  double *step_ms;             /* [n_steps] accumulated */
} cuda_plan;

static rlx_status cuda_fail(cudaError_t e, const char *what) {
  return rlx_set_error(RLX_ERR_DEVICE, "CUDA: %s: %s", what, cudaGetErrorString(e));
}

static size_t elem_size(rlx_dtype t) { return (size_t)ir_dtypes[t].size; }

static uint8_t *in_ptr(const cuda_plan *pl, const ir_node *n, int k) { return pl->slot[plan_input_slot(n, k)]; }
static uint8_t *out_ptr(const cuda_plan *pl, const ir_node *n) { return pl->slot[(size_t)n->id * IR_MAX_OUTPUTS]; }

static cuda_step *new_step(cuda_plan *pl, int kind, const ir_node *n) {
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
static cuda_step *joinable_step(cuda_plan *pl, const ir_node *n, int kind) {
  cuda_step *s = pl->n_steps ? &pl->steps[pl->n_steps - 1] : NULL;
  return s && s->kind == kind && s->folded == pl->folded[n->id] ? s : NULL;
}

static void *new_args(cuda_step *s, size_t bytes) {
  s->args = calloc(1, bytes);
  return s->args;
}

static rlx_status nomem(const ir_node *n) {
  return rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory lowering %s (node %d)", ir_ops[n->op].name, n->id);
}

/* Whether byte ranges [p, p + pn) and [q, q + qn) share a byte. */
static int ranges_overlap(const void *p, size_t pn, const void *q, size_t qn) {
  const uint8_t *a = p, *b = q;
  return a < b + qn && b < a + pn;
}

static rlx_status alloc_dev(void **p, size_t bytes, const char *what);

/* Scratch of a split kernel, owned by step s: `floats` F32 partials and
 * `counters` arrival counters, zeroed (the kernels leave them zeroed). */
static rlx_status step_scratch(cuda_step *s, size_t floats, size_t counters, float **part, unsigned **count) {
  const size_t part_bytes = (floats * sizeof(float) + 255) / 256 * 256, bytes = part_bytes + counters * sizeof(unsigned);
  rlx_status st = alloc_dev(&s->dev_scratch, bytes, "split-kernel partial sums");
  if (st) return st;
  cudaError_t e = cudaMemset(s->dev_scratch, 0, bytes);
  if (e != cudaSuccess) return cuda_fail(e, "cudaMemset");
  *part = floats ? (float *)s->dev_scratch : NULL;
  *count = (unsigned *)((uint8_t *)s->dev_scratch + part_bytes);
  return RLX_OK;
}

/* ---------------------------------------------------------------- index helpers */

static void contig_strides(int rank, const int64_t *d, int64_t *st) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    st[i] = s;
    s *= d[i];
  }
}

/* Strides of a tensor of shape s read at an output of rank r under
 * NumPy broadcasting: missing leading dims and size-1 dims get 0. */
static void bcast_strides(const ir_shape *s, int r, const int64_t *dims, int64_t *st) {
  int64_t own[RLX_MAX_RANK];
  contig_strides(s->rank, s->d, own);
  for (int i = 0; i < r; i++) {
    int j = i - (r - s->rank);
    st[i] = j < 0 || s->d[j] == 1 ? 0 : own[j];
  }
  (void)dims;
}

static int64_t numel_of(const ir_type *t) { return ir_numel(&t->shape); }

/* The bytes of v stored as one element of plain dtype t (cpu_set's rules). */
static uint64_t element_bits(rlx_dtype t, double v) {
  uint64_t bits = 0;
  switch (t) {
  case RLX_F32: { float f = (float)v; memcpy(&bits, &f, 4); break; }
  case RLX_F16: bits = rlx_f32_to_f16((float)v); break;
  case RLX_BF16: bits = rlx_f32_to_bf16((float)v); break;
  case RLX_F64: memcpy(&bits, &v, 8); break;
  case RLX_BOOL: bits = v != 0; break;
  default: {
    double lo = t == RLX_I8 ? -128.0 : t == RLX_U8 ? 0.0 : t == RLX_I32 ? -2147483648.0 : -9223372036854775808.0;
    double hi = t == RLX_I8 ? 127.0 : t == RLX_U8 ? 255.0 : t == RLX_I32 ? 2147483647.0 : 9223372036854775807.0;
    int64_t i = isnan(v) ? 0 : v <= lo ? (int64_t)lo : v >= hi ? (t == RLX_I64 ? INT64_MAX : (int64_t)hi) : (int64_t)v;
    bits = (uint64_t)i;
    if (t != RLX_I64) bits &= t == RLX_I32 ? 0xffffffffull : 0xffull;
  }
  }
  return bits;
}

/* An integral double saturated into [lo, hi] (k_elementwise.c's saturate_i). */
static int64_t saturate_int(double v, int64_t lo, int64_t hi) {
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi;
  return (int64_t)v;
}

/* ---------------------------------------------------------------- elementwise programs */

static void ew_begin(cu_ew_args *a, const ir_type *out, void *out_dev) {
  memset(a, 0, sizeof *a);
  a->rank = out->shape.rank;
  memcpy(a->dims, out->shape.d, sizeof a->dims);
  a->numel = ir_numel(&out->shape);
  a->out = out_dev;
  a->out_dtype = (uint8_t)out->dtype;
}

/* Adds a program input read with the given strides (over the output's
 * dims); returns its index. The caller checked the count. */
static int ew_input(cu_ew_args *a, const void *p, rlx_dtype t, const int64_t *stride, uint8_t half) {
  int k = a->n_in++;
  a->in[k] = p;
  a->in_dtype[k] = (uint8_t)t;
  memcpy(a->stride[k], stride, sizeof a->stride[k]);
  a->half[k] = half;
  return k;
}

/* An input of shape s broadcast to the output. */
static int ew_input_bcast(cu_ew_args *a, const void *p, const ir_type *t) {
  int64_t st[RLX_MAX_RANK];
  bcast_strides(&t->shape, a->rank, a->dims, st);
  return ew_input(a, p, t->dtype, st, 0);
}

static cu_ew_step *ew_step(cu_ew_args *a, int kind, int op, rlx_dtype in_dtype, rlx_dtype dtype, int x, int y, int z) {
  cu_ew_step *s = &a->s[a->n_steps++];
  memset(s, 0, sizeof *s);
  s->kind = (uint8_t)kind;
  s->op = (uint8_t)op;
  s->in_dtype = (uint8_t)in_dtype;
  s->dtype = (uint8_t)dtype;
  s->a = (int8_t)x, s->b = (int8_t)y, s->c = (int8_t)z;
  return s;
}

/* Drops size-1 dims and merges dims every input walks contiguously, so
 * the common case (no broadcasting) is one flat loop. */
static void ew_coalesce(cu_ew_args *a) {
  int64_t nd[CU_MAX_RANK], ns[CU_EW_MAX_IN][CU_MAX_RANK];
  uint8_t nh[CU_EW_MAX_IN] = {0};
  int nr = 0;
  for (int d = a->rank - 1; d >= 0; d--) {
    if (a->dims[d] == 1) continue;
    int merge = nr > 0;
    for (int k = 0; merge && k < a->n_in; k++)
      merge = !((a->half[k] >> d) & 1) && !((nh[k] >> (nr - 1)) & 1) && a->stride[k][d] == ns[k][nr - 1] * nd[nr - 1];
    if (merge) {
      nd[nr - 1] *= a->dims[d];
      continue;
    }
    nd[nr] = a->dims[d];
    for (int k = 0; k < a->n_in; k++) {
      ns[k][nr] = a->stride[k][d];
      nh[k] = (uint8_t)(nh[k] | ((a->half[k] >> d) & 1) << nr);
    }
    nr++;
  }
  if (a->numel == 0) return;
  a->rank = nr;
  for (int i = 0; i < nr; i++) {
    a->dims[i] = nd[nr - 1 - i];
    for (int k = 0; k < a->n_in; k++) a->stride[k][i] = ns[k][nr - 1 - i];
  }
  for (int k = 0; k < a->n_in; k++) {
    uint8_t h = 0;
    for (int i = 0; i < nr; i++) h = (uint8_t)(h | ((nh[k] >> (nr - 1 - i)) & 1) << i);
    a->half[k] = h;
  }
  a->contiguous = 1;
  for (int k = 0; k < a->n_in; k++)
    if (nr > 1 || a->half[k] || (nr == 1 && a->stride[k][0] != 1)) a->contiguous = 0;
}

static rlx_status emit_ew(cuda_plan *pl, const ir_node *n, const cu_ew_args *a) {
  cuda_step *s = new_step(pl, ST_EW, n);
  cu_ew_args *blob = s ? new_args(s, sizeof *blob) : NULL;
  if (!blob) return nomem(n);
  *blob = *a;
  blob->pdl = pl->pdl;
  ew_coalesce(blob);
  return RLX_OK;
}

static rlx_dtype compute_dtype(rlx_dtype t) { return t == RLX_F64 ? RLX_F64 : RLX_F32; }

/* A region chain over the program inputs already added (region input k is
 * program input k), as k_fused.c types it. */
static void ew_chain(cu_ew_args *a, const ir_chain *c) {
  rlx_dtype types[CU_EW_MAX_STEPS];
  for (int j = 0; j < c->n; j++) {
    const rlx_region_step *r = &c->s[j];
    rlx_dtype ta = r->a >= 0 ? (rlx_dtype)a->in_dtype[r->a] : types[-r->a - 1];
    rlx_dtype t = r->kind == RLX_STEP_CMP ? RLX_BOOL : r->kind == RLX_STEP_CAST ? r->to : ta;
    int kind = r->kind == RLX_STEP_ACT ? CU_STEP_ACT : r->kind == RLX_STEP_BIN ? CU_STEP_BIN
             : r->kind == RLX_STEP_CMP ? CU_STEP_CMP : CU_STEP_CAST;
    cu_ew_step *s = ew_step(a, kind, r->op, ta, t, r->a, r->b, 0);
    s->f0 = r->alpha;
    types[j] = t;
  }
}

/* Region inputs of a (Batch)ElementwiseRegion: first (through the resize
 * prologue) then rest[0..n_rest). */
static void ew_region_inputs(cuda_plan *pl, cu_ew_args *a, const ir_node *n, int first, const int *rest, int n_rest) {
  const rlx_graph *g = pl->g;
  const ir_type *t0 = ir_in(g, n, first);
  if (n->a.prologue == RLX_PROLOGUE_RESIZE_NEAREST_2X) {
    /* input 0 is seen as [N, C, 2H, 2W]: index along H and W halved */
    int64_t own[RLX_MAX_RANK], st[RLX_MAX_RANK];
    contig_strides(4, t0->shape.d, own);
    int lead = a->rank - 4;
    uint8_t half = 0;
    for (int i = 0; i < a->rank; i++) {
      int j = i - lead;
      int64_t vd = j < 0 ? 1 : t0->shape.d[j] * (j >= 2 ? 2 : 1);
      st[i] = j < 0 || vd == 1 ? 0 : own[j];
      if (j >= 2) half = (uint8_t)(half | 1u << i);
    }
    ew_input(a, in_ptr(pl, n, first), t0->dtype, st, half);
  } else {
    ew_input_bcast(a, in_ptr(pl, n, first), t0);
  }
  for (int i = 0; i < n_rest; i++) ew_input_bcast(a, in_ptr(pl, n, rest[i]), ir_in(g, n, rest[i]));
}

static rlx_status lower_elementwise(cuda_plan *pl, const ir_node *n) {
  const rlx_graph *g = pl->g;
  const ir_type *out = &n->out[0], *x = ir_in(g, n, 0);
  cu_ew_args a;
  ew_begin(&a, out, out_ptr(pl, n));
  for (int i = 0; i < n->n_in; i++) ew_input_bcast(&a, in_ptr(pl, n, i), ir_in(g, n, i));
  cu_ew_step *s;
  switch (n->op) {
  case RLX_OP_Activation:
    s = ew_step(&a, CU_STEP_ACT, (int)n->a.act, x->dtype, out->dtype, 0, 0, 0);
    s->f0 = n->a.alpha;
    break;
  case RLX_OP_Binary: ew_step(&a, CU_STEP_BIN, (int)n->a.binop, x->dtype, out->dtype, 0, 1, 0); break;
  case RLX_OP_Compare: ew_step(&a, CU_STEP_CMP, (int)n->a.cmpop, x->dtype, RLX_BOOL, 0, 1, 0); break;
  case RLX_OP_Where: ew_step(&a, CU_STEP_WHERE, 0, x->dtype, out->dtype, 0, 1, 2); break;
  case RLX_OP_Cast: ew_step(&a, CU_STEP_CAST, 0, x->dtype, out->dtype, 0, 0, 0); break;
  case RLX_OP_Clamp: {
    s = ew_step(&a, CU_STEP_CLAMP, 0, x->dtype, out->dtype, 0, 0, 0);
    s->f0 = n->a.lo, s->f1 = n->a.hi;
    if (!ir_is_float(x->dtype)) { /* the CPU's integer bounds: ceil(lo), floor(hi), saturated to the dtype */
      int64_t tl = x->dtype == RLX_I8 ? INT8_MIN : x->dtype == RLX_U8 ? 0 : x->dtype == RLX_I32 ? INT32_MIN : INT64_MIN;
      int64_t th = x->dtype == RLX_I8 ? INT8_MAX : x->dtype == RLX_U8 ? UINT8_MAX : x->dtype == RLX_I32 ? INT32_MAX : INT64_MAX;
      s->i0 = saturate_int(ceil(n->a.lo), tl, th);
      s->i1 = saturate_int(floor(n->a.hi), tl, th);
    }
    break;
  }
  default: return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: %s is not elementwise", ir_ops[n->op].name);
  }
  return emit_ew(pl, n, &a);
}

static rlx_status lower_region(cuda_plan *pl, const ir_node *n) {
  int rest[CU_EW_MAX_IN];
  if (n->op == RLX_OP_ElementwiseRegion) {
    cu_ew_args a;
    ew_begin(&a, &n->out[0], out_ptr(pl, n));
    for (int i = 1; i < n->n_in; i++) rest[i - 1] = i;
    ew_region_inputs(pl, &a, n, 0, rest, n->n_in - 1);
    ew_chain(&a, &n->a.chain);
    return emit_ew(pl, n, &a);
  }
  /* BatchElementwiseRegion: one program per batch input, each writing the next rows */
  const int nb = (int)n->a.num_batch_inputs, n_rest = n->n_in - nb;
  for (int i = 0; i < n_rest; i++) rest[i] = nb + i;
  const ir_type *out = &n->out[0];
  int64_t row = 1, at = 0;
  for (int i = 1; i < out->shape.rank; i++) row *= out->shape.d[i];
  for (int b = 0; b < nb; b++) {
    const ir_type *tb = ir_in(pl->g, n, b);
    /* this batch's result has dim 0 of the broadcast of its inputs (the
     * prologue doubles only H and W) */
    int64_t d0 = 1;
    for (int k = 0; k <= n_rest; k++) {
      const ir_type *t = k == 0 ? tb : ir_in(pl->g, n, rest[k - 1]);
      if (t->shape.rank == out->shape.rank && t->shape.d[0] != 1) d0 = t->shape.d[0];
    }
    ir_type part = *out;
    part.shape.d[0] = d0;
    cu_ew_args a;
    ew_begin(&a, &part, out_ptr(pl, n) + (size_t)(at * row) * elem_size(out->dtype));
    ew_region_inputs(pl, &a, n, b, rest, n_rest);
    ew_chain(&a, &n->a.chain);
    rlx_status st = emit_ew(pl, n, &a);
    if (st) return st;
    at += d0;
  }
  return RLX_OK;
}

/* silu(x[..., :n]) * x[..., n:] computed in F32 (F64 when x or the result is), rounded once. */
static rlx_status lower_swiglu(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0), *out = &n->out[0];
  const int64_t half = out->shape.d[out->shape.rank - 1];
  if (x->dtype != RLX_F64 && out->dtype != RLX_F64) {
    cuda_step *s = new_step(pl, ST_SWIGLU, n);
    if (!s) return nomem(n);
    s->src = in_ptr(pl, n, 0), s->dtype = x->dtype, s->dst = out_ptr(pl, n), s->dtype2 = out->dtype;
    s->n0 = half ? numel_of(out) / half : 0, s->n1 = half;
    s->flag = pl->pdl;
    return RLX_OK;
  }
  ir_type view = {out->dtype, {2, {half ? numel_of(out) / half : 0, half}}};
  cu_ew_args a;
  ew_begin(&a, &view, out_ptr(pl, n));
  const int64_t st[RLX_MAX_RANK] = {2 * half, 1};
  uint8_t *p = in_ptr(pl, n, 0);
  int gate = ew_input(&a, p, x->dtype, st, 0);
  int up = ew_input(&a, p + (size_t)half * elem_size(x->dtype), x->dtype, st, 0);
  rlx_dtype ct = out->dtype == RLX_F64 ? RLX_F64 : compute_dtype(x->dtype);
  ew_step(&a, CU_STEP_ACT, RLX_ACT_SILU, x->dtype, ct, gate, 0, 0);
  ew_step(&a, CU_STEP_BIN, RLX_BIN_MUL, ct, ct, -1, up, 0);
  ew_step(&a, CU_STEP_CAST, 0, ct, out->dtype, -2, 0, 0);
  return emit_ew(pl, n, &a);
}

/* (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c], in F32 (F64). */
static rlx_status lower_batch_norm(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0);
  cu_ew_args a;
  ew_begin(&a, &n->out[0], out_ptr(pl, n));
  ew_input_bcast(&a, in_ptr(pl, n, 0), x);
  int64_t st[RLX_MAX_RANK] = {0};
  st[1] = 1; /* the channel dim */
  for (int i = 1; i < 5; i++) ew_input(&a, in_ptr(pl, n, i), x->dtype, st, 0);
  rlx_dtype ct = compute_dtype(x->dtype);
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 0, 0, 0);            /* s0 = x */
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 1, 0, 0);            /* s1 = mean */
  ew_step(&a, CU_STEP_BIN, RLX_BIN_SUB, ct, ct, -1, -2, 0);       /* s2 = x - mean */
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 2, 0, 0);            /* s3 = var */
  cu_ew_step *e = ew_step(&a, CU_STEP_CONST, 0, ct, ct, 0, 0, 0); /* s4 = eps */
  double eps = ct == RLX_F32 ? (double)(float)n->a.eps : n->a.eps;
  memcpy(&e->i0, &eps, sizeof eps);
  ew_step(&a, CU_STEP_BIN, RLX_BIN_ADD, ct, ct, -4, -5, 0);       /* s5 = var + eps */
  ew_step(&a, CU_STEP_ACT, RLX_ACT_SQRT, ct, ct, -6, 0, 0);       /* s6 */
  ew_step(&a, CU_STEP_BIN, RLX_BIN_DIV, ct, ct, -3, -7, 0);       /* s7 = s2 / s6 */
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 3, 0, 0);            /* s8 = gamma */
  ew_step(&a, CU_STEP_BIN, RLX_BIN_MUL, ct, ct, -8, -9, 0);       /* s9 */
  ew_step(&a, CU_STEP_CAST, 0, x->dtype, ct, 4, 0, 0);            /* s10 = beta */
  ew_step(&a, CU_STEP_BIN, RLX_BIN_ADD, ct, ct, -10, -11, 0);     /* s11 */
  ew_step(&a, CU_STEP_CAST, 0, ct, x->dtype, -12, 0, 0);
  return emit_ew(pl, n, &a);
}

/* The part of a product's epilogue cuBLASLt could not fuse, in place:
 * out = act(out [+ bias]); or, for a product with K = 0 (out is not
 * read), out = act(bias) broadcast over the rows. */
static rlx_status emit_bias_act(cuda_plan *pl, const ir_node *n, int act, double alpha, int read_out, const void *bias) {
  const ir_type *out = &n->out[0];
  const int64_t N = out->shape.d[out->shape.rank - 1];
  ir_type view = {out->dtype, {2, {N ? numel_of(out) / N : 0, N}}};
  cu_ew_args a;
  ew_begin(&a, &view, out_ptr(pl, n));
  const int64_t full[RLX_MAX_RANK] = {N, 1}, row[RLX_MAX_RANK] = {0, 1};
  int v = -1;
  if (read_out) v = ew_input(&a, out_ptr(pl, n), out->dtype, full, 0);
  if (bias) {
    int b = ew_input(&a, bias, out->dtype, row, 0);
    if (v < 0) v = b;
    else ew_step(&a, CU_STEP_BIN, RLX_BIN_ADD, out->dtype, out->dtype, v, b, 0), v = -a.n_steps;
  }
  if (act != RLX_ACT_NONE) ew_step(&a, CU_STEP_ACT, act, out->dtype, out->dtype, v, 0, 0)->f0 = alpha;
  if (a.n_steps == 0) ew_step(&a, CU_STEP_CAST, 0, out->dtype, out->dtype, v, 0, 0);
  return emit_ew(pl, n, &a);
}

/* ---------------------------------------------------------------- data movement */

static void copy_coalesce(cu_copy_args *a) {
  int64_t nd[CU_MAX_RANK], ss[CU_MAX_RANK], ds[CU_MAX_RANK];
  uint8_t sh[CU_MAX_RANK];
  int nr = 0;
  for (int d = a->rank - 1; d >= 0; d--) {
    if (a->dims[d] == 1) continue;
    if (nr > 0 && !a->shift[d] && !sh[nr - 1] && a->src_stride[d] == ss[nr - 1] * nd[nr - 1] &&
        a->dst_stride[d] == ds[nr - 1] * nd[nr - 1]) {
      nd[nr - 1] *= a->dims[d];
      continue;
    }
    nd[nr] = a->dims[d], ss[nr] = a->src_stride[d], ds[nr] = a->dst_stride[d], sh[nr] = a->shift[d];
    nr++;
  }
  if (a->numel == 0) return;
  a->rank = nr;
  for (int i = 0; i < nr; i++) {
    a->dims[i] = nd[nr - 1 - i];
    a->src_stride[i] = ss[nr - 1 - i];
    a->dst_stride[i] = ds[nr - 1 - i];
    a->shift[i] = sh[nr - 1 - i];
  }
}

/* A box copy of `dims` from src (strides ss, shifts) to dst (strides ds, offset). */
static rlx_status emit_copy(cuda_plan *pl, const ir_node *n, int rank, const int64_t *dims, const void *src,
                            const int64_t *ss, const uint8_t *shift, void *dst, const int64_t *ds, int64_t dst_off,
                            size_t es, cu_copy_args **made) {
  cuda_step *s = new_step(pl, ST_COPY, n);
  cu_copy_args *a = s ? new_args(s, sizeof *a) : NULL;
  if (!a) return nomem(n);
  a->rank = rank;
  a->es = (int)es;
  a->pdl = pl->pdl;
  a->numel = 1;
  for (int i = 0; i < rank; i++) {
    a->dims[i] = dims[i];
    a->src_stride[i] = ss[i];
    a->dst_stride[i] = ds[i];
    a->shift[i] = shift ? shift[i] : 0;
    a->numel *= dims[i];
  }
  a->src = src;
  a->dst = dst;
  a->dst_off = dst_off;
  if (made) *made = a;
  else copy_coalesce(a);
  return RLX_OK;
}

static rlx_status emit_memcpy(cuda_plan *pl, const ir_node *n, void *dst, const void *src, size_t bytes) {
  if (!bytes || dst == src) return RLX_OK;
  cuda_step *s = new_step(pl, ST_MEMCPY, n);
  if (!s) return nomem(n);
  s->dst = dst, s->src = src, s->bytes = bytes;
  return RLX_OK;
}

/* The UpdateSlice copy just emitted (the last step) joined to the launch
 * of the one before it as its second part (cu_copy_args.src2: a layer's V
 * row after its K row): that one an UpdateSlice's copy too (nothing ran
 * between, so both are in place: a copy of the whole tensor would have
 * come between), the same geometry and types, no part 2 yet, and neither
 * reading what the other writes (dst_bytes: each destination tensor).
 * Llama-3-8B bf16 through the LLM API on the H200: 5.009-5.052 ms a
 * decode step, against 5.038-5.071 with a launch each. */
static void join_update_slice(cuda_plan *pl, size_t dst_bytes) {
  if (pl->n_steps < 2) return;
  cuda_step *s = &pl->steps[pl->n_steps - 1], *p = &pl->steps[pl->n_steps - 2];
  cu_copy_args *b = s->args, *a = p->kind == ST_COPY && p->folded == s->folded ? p->args : NULL;
  if (!a || !a->dyn || a->src2 || a->rank != b->rank || a->es != b->es || a->numel != b->numel ||
      a->dst_off != b->dst_off || a->dyn_dtype != b->dyn_dtype || a->dyn_mul != b->dyn_mul ||
      a->dyn_max != b->dyn_max || a->convert != b->convert || a->src_dtype != b->src_dtype ||
      a->dst_dtype != b->dst_dtype || memcmp(a->dims, b->dims, sizeof a->dims) ||
      memcmp(a->src_stride, b->src_stride, sizeof a->src_stride) ||
      memcmp(a->dst_stride, b->dst_stride, sizeof a->dst_stride) || memcmp(a->shift, b->shift, sizeof a->shift))
    return;
  const size_t src_bytes = (size_t)b->numel * (size_t)(b->convert ? ir_dtypes[b->src_dtype].size : b->es);
  if (ranges_overlap(a->dst, dst_bytes, b->dst, dst_bytes) || ranges_overlap(a->dst, dst_bytes, b->src, src_bytes) ||
      ranges_overlap(b->dst, dst_bytes, a->src, src_bytes) || ranges_overlap(a->dst, dst_bytes, b->dyn, 8) ||
      ranges_overlap(b->dst, dst_bytes, a->dyn, 8))
    return;
  a->src2 = b->src, a->dst2 = b->dst, a->dyn2 = b->dyn, a->node2 = b->node;
  free(s->args);
  pl->n_steps--;
}

static rlx_status lower_layout(cuda_plan *pl, const ir_node *n) {
  const rlx_graph *g = pl->g;
  const ir_type *out = &n->out[0], *x = n->n_in ? ir_in(g, n, 0) : NULL;
  const int r = out->shape.rank;
  const size_t es = elem_size(out->dtype);
  int64_t ss[RLX_MAX_RANK], ds[RLX_MAX_RANK], xs[RLX_MAX_RANK];
  contig_strides(r, out->shape.d, ds);
  if (x) contig_strides(x->shape.rank, x->shape.d, xs);
  uint8_t *dst = out_ptr(pl, n), *src = x ? in_ptr(pl, n, 0) : NULL;
  switch (n->op) {
  case RLX_OP_Reshape:
  case RLX_OP_StopGradient:
  case RLX_OP_GetOutput:
  case RLX_OP_Cast: /* same dtype (a view the planner had to copy) */
    return emit_memcpy(pl, n, dst, src, rlx_dtype_nbytes(out->dtype, numel_of(out)));
  case RLX_OP_Assign: /* the value, input 1 (in place, plan_memory.c: a view, no copy) */
    return emit_memcpy(pl, n, dst, in_ptr(pl, n, 1), rlx_dtype_nbytes(out->dtype, numel_of(out)));
  case RLX_OP_Expand:
    bcast_strides(&x->shape, r, out->shape.d, ss);
    return emit_copy(pl, n, r, out->shape.d, src, ss, NULL, dst, ds, 0, es, NULL);
  case RLX_OP_Transpose:
    for (int k = 0; k < r; k++) ss[k] = xs[n->a.perm.v[k]];
    return emit_copy(pl, n, r, out->shape.d, src, ss, NULL, dst, ds, 0, es, NULL);
  case RLX_OP_Narrow:
    return emit_copy(pl, n, r, out->shape.d, src + (size_t)(n->a.start * xs[n->a.axis]) * es, xs, NULL, dst, ds, 0,
                     es, NULL);
  case RLX_OP_Slice: {
    int64_t off = 0;
    for (int k = 0; k < r; k++) {
      off += n->a.starts.v[k] * xs[k];
      ss[k] = out->shape.d[k] > 1 ? xs[k] * n->a.steps.v[k] : 0;
    }
    return emit_copy(pl, n, r, out->shape.d, src + (size_t)off * es, ss, NULL, dst, ds, 0, es, NULL);
  }
  case RLX_OP_Concat: {
    int64_t at = 0;
    for (int i = 0; i < n->n_in; i++) {
      const ir_type *t = ir_in(g, n, i);
      contig_strides(t->shape.rank, t->shape.d, ss);
      rlx_status st = emit_copy(pl, n, r, t->shape.d, in_ptr(pl, n, i), ss, NULL, dst, ds, at * ds[n->a.axis], es, NULL);
      if (st) return st;
      at += t->shape.d[n->a.axis];
    }
    return RLX_OK;
  }
  case RLX_OP_Pad: {
    cuda_step *s = new_step(pl, ST_FILL, n);
    if (!s) return nomem(n);
    s->dst = dst, s->es = (int)es, s->n0 = numel_of(out), s->bits = element_bits(out->dtype, n->a.value);
    int64_t off = 0;
    for (int k = 0; k < r; k++) off += n->a.before.v[k] * ds[k];
    return emit_copy(pl, n, r, x->shape.d, src, xs, NULL, dst, ds, off, es, NULL);
  }
  case RLX_OP_ResizeNearest2x:
  case RLX_OP_TransformRegion: {
    uint8_t shift[RLX_MAX_RANK] = {0};
    shift[2] = shift[3] = (uint8_t)(n->op == RLX_OP_ResizeNearest2x ? 1 : n->a.transforms.n);
    return emit_copy(pl, n, r, out->shape.d, src, xs, shift, dst, ds, 0, es, NULL);
  }
  case RLX_OP_UpdateSlice: {
    const ir_type *upd = ir_in(g, n, 1), *start = ir_in(g, n, 2);
    rlx_status st = emit_memcpy(pl, n, dst, src, rlx_dtype_nbytes(out->dtype, numel_of(out)));
    if (st) return st;
    int64_t us[RLX_MAX_RANK];
    contig_strides(upd->shape.rank, upd->shape.d, us);
    /* the update through the Cast it absorbed (lower_node left the Cast out) */
    const ir_node *cast = &g->nodes[n->in[1]];
    const int through = cast->op == RLX_OP_Cast && pl->cast_into[cast->id] == n->id;
    cu_copy_args *a;
    st = emit_copy(pl, n, r, upd->shape.d, through ? in_ptr(pl, cast, 0) : in_ptr(pl, n, 1), us, NULL, dst, ds, 0,
                   es, &a);
    if (st) return st;
    if (through) a->convert = 1, a->src_dtype = ir_in(g, cast, 0)->dtype, a->dst_dtype = out->dtype;
    a->dyn = in_ptr(pl, n, 2);
    a->dyn_dtype = start->dtype;
    a->dyn_mul = ds[n->a.axis];
    a->dyn_max = x->shape.d[n->a.axis] - upd->shape.d[n->a.axis];
    a->node = n->id;
    a->err = pl->err_dev;
    pl->has_err = 1;
    copy_coalesce(a);
    join_update_slice(pl, rlx_dtype_nbytes(out->dtype, numel_of(out)));
    return RLX_OK;
  }
  case RLX_OP_Gather: {
    const ir_type *idx = ir_in(g, n, 1);
    cuda_step *s = new_step(pl, ST_GATHER, n);
    cu_gather_args *a = s ? new_args(s, sizeof *a) : NULL;
    if (!a) return nomem(n);
    const int axis = (int)n->a.axis;
    a->outer = 1, a->inner = 1;
    for (int i = 0; i < axis; i++) a->outer *= x->shape.d[i];
    for (int i = axis + 1; i < x->shape.rank; i++) a->inner *= x->shape.d[i];
    a->len = x->shape.d[axis];
    a->n_idx = numel_of(idx);
    a->table = src, a->idx = in_ptr(pl, n, 1), a->out = dst;
    a->es = (int)es, a->idx_dtype = idx->dtype, a->node = n->id, a->err = pl->err_dev;
    if (is_block(x->dtype)) { /* rows of whole blocks (claims): moved as the widest words that divide them */
      const int64_t bytes = (int64_t)rlx_dtype_nbytes(x->dtype, a->inner);
      a->es = bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : bytes % 2 == 0 ? 2 : 1;
      a->inner = bytes / a->es;
    }
    pl->has_err = 1;
    return RLX_OK;
  }
  case RLX_OP_Iota: {
    cuda_step *s = new_step(pl, ST_IOTA, n);
    if (!s) return nomem(n);
    int64_t inner = 1;
    for (int i = (int)n->a.axis + 1; i < r; i++) inner *= out->shape.d[i];
    s->dst = dst, s->dtype = out->dtype, s->n0 = numel_of(out), s->n1 = r ? out->shape.d[n->a.axis] : 1, s->n2 = inner;
    return RLX_OK;
  }
  case RLX_OP_OneHot: {
    cuda_step *s = new_step(pl, ST_ONE_HOT, n);
    if (!s) return nomem(n);
    s->src = src, s->dtype = x->dtype, s->dst = dst, s->es = (int)es, s->bits = element_bits(out->dtype, 1.0);
    s->n0 = numel_of(x), s->n1 = n->a.depth;
    return RLX_OK;
  }
  case RLX_OP_Tri: {
    cuda_step *s = new_step(pl, ST_TRI, n);
    if (!s) return nomem(n);
    int64_t rows = out->shape.d[r - 2], cols = out->shape.d[r - 1];
    int64_t k = n->a.k < -rows - 1 ? -rows - 1 : n->a.k > cols + 1 ? cols + 1 : n->a.k;
    s->src = src, s->dst = dst, s->es = (int)es, s->n0 = rows * cols != 0 ? numel_of(out) / (rows * cols) : 0;
    s->n1 = rows, s->n2 = cols, s->flag = n->a.upper != 0, s->n3 = k;
    return RLX_OK;
  }
  default: return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: %s is not a layout op", ir_ops[n->op].name);
  }
}

/* ---------------------------------------------------------------- reductions and norms */

static rlx_status lower_reduce(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0);
  int64_t xs[RLX_MAX_RANK];
  contig_strides(x->shape.rank, x->shape.d, xs);
  if (n->op == RLX_OP_Softmax || n->op == RLX_OP_LogSoftmax) {
    cuda_step *s = new_step(pl, ST_SOFTMAX, n);
    if (!s) return nomem(n);
    int axis = (int)n->a.axis;
    s->src = in_ptr(pl, n, 0), s->dst = out_ptr(pl, n), s->dtype = x->dtype, s->flag = n->op == RLX_OP_LogSoftmax;
    s->n0 = 1, s->n2 = 1;
    for (int i = 0; i < axis; i++) s->n0 *= x->shape.d[i];
    for (int i = axis + 1; i < x->shape.rank; i++) s->n2 *= x->shape.d[i];
    s->n1 = x->shape.d[axis];
    return RLX_OK;
  }
  cuda_step *s = new_step(pl, ST_REDUCE, n);
  cu_reduce_args *a = s ? new_args(s, sizeof *a) : NULL;
  if (!a) return nomem(n);
  a->x = in_ptr(pl, n, 0), a->out = out_ptr(pl, n);
  a->x_dtype = x->dtype, a->out_dtype = n->out[0].dtype;
  uint8_t reduced[RLX_MAX_RANK] = {0};
  switch (n->op) {
  case RLX_OP_Reduce:
    a->kind = CU_RED_REDUCE, a->op = (int)n->a.reduce;
    for (int i = 0; i < n->a.axes.n; i++) reduced[n->a.axes.v[i]] = 1;
    break;
  case RLX_OP_ArgMax:
  case RLX_OP_ArgMin:
  case RLX_OP_Cumsum:
    a->kind = n->op == RLX_OP_ArgMax ? CU_RED_ARGMAX : n->op == RLX_OP_ArgMin ? CU_RED_ARGMIN : CU_RED_CUMSUM;
    if (x->shape.rank) reduced[n->a.axis] = 1;
    a->exclusive = n->a.exclusive != 0, a->reverse = n->a.reverse != 0;
    break;
  default: return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: %s is not a reduction", ir_ops[n->op].name);
  }
  a->n_out = 1, a->count = 1;
  for (int i = 0; i < x->shape.rank; i++) {
    if (reduced[i]) {
      a->rdims[a->rrank] = x->shape.d[i], a->rstride[a->rrank++] = xs[i];
      a->count *= x->shape.d[i];
      a->cum_stride = xs[i];
    } else {
      a->kdims[a->krank] = x->shape.d[i], a->kstride[a->krank++] = xs[i];
      a->n_out *= x->shape.d[i];
    }
  }
  if (a->kind == CU_RED_CUMSUM && !x->shape.rank) a->cum_stride = 0;
  if (a->n_out > 0x7fffffff) return rlx_set_error(RLX_ERR_UNSUPPORTED, "CUDA: %s with %lld outputs", ir_ops[n->op].name, (long long)a->n_out);
  return RLX_OK;
}

/* The launch arguments of norm node n (lower_norm; and lower_quant, where a
 * product's x quantization computes an RmsNorm it absorbed). */
static void norm_args(const cuda_plan *pl, const ir_node *n, cu_norm_args *a) {
  const ir_type *x = ir_in(pl->g, n, 0);
  a->x = in_ptr(pl, n, 0), a->out = out_ptr(pl, n), a->dtype = x->dtype, a->eps = n->a.eps;
  if (n->op == RLX_OP_LayerNorm || n->op == RLX_OP_RmsNorm) {
    a->rms = n->op == RLX_OP_RmsNorm;
    a->len = 1;
    for (int i = (int)n->a.axis; i < x->shape.rank; i++) a->len *= x->shape.d[i];
    a->gamma = in_ptr(pl, n, 1), a->beta = in_ptr(pl, n, 2);
  } else {
    int hb = n->a.has_bias != 0;
    a->rms = n->op == RLX_OP_FusedResidualRmsNorm;
    a->len = x->shape.d[x->shape.rank - 1];
    a->res = in_ptr(pl, n, 1);
    a->bias = hb ? in_ptr(pl, n, 2) : NULL;
    a->gamma = in_ptr(pl, n, 2 + hb), a->beta = in_ptr(pl, n, 3 + hb);
  }
  a->rows = a->len ? numel_of(x) / a->len : 0;
}

static rlx_status lower_norm(cuda_plan *pl, const ir_node *n) {
  cuda_step *s = new_step(pl, ST_NORM, n);
  cu_norm_args *a = s ? new_args(s, sizeof *a) : NULL;
  if (!a) return nomem(n);
  norm_args(pl, n, a);
  a->pdl = pl->pdl;
  return RLX_OK;
}

/* ---------------------------------------------------------------- attention and positions */

/* Rope n joined to the launch of the rope just before it (k's after q's):
 * the same positions or tables, geometry and dtype, nothing run between,
 * and n's buffers apart from the other's (x and out may be one buffer:
 * in place). 1 when joined. */
static int join_rope(cuda_plan *pl, const ir_node *n, const cu_rope_args *mine) {
  cuda_step *s = joinable_step(pl, n, ST_ROPE);
  cu_rope_args *a = s ? s->args : NULL;
  if (!a || a->H2 || a->dtype != mine->dtype || a->D != mine->D || a->n_rot != mine->n_rot || a->neox != mine->neox ||
      a->B != mine->B || a->S != mine->S || a->pos != mine->pos || a->cos != mine->cos || a->sin != mine->sin ||
      a->pos_dtype != mine->pos_dtype || a->pos_batched != mine->pos_batched || a->table_dtype != mine->table_dtype ||
      a->table_batched != mine->table_batched || a->base != mine->base || a->scale != mine->scale)
    return 0;
  const size_t b1 = (size_t)(a->B * a->S * a->H * a->D) * elem_size((rlx_dtype)a->dtype),
               b2 = (size_t)(mine->B * mine->S * mine->H * mine->D) * elem_size((rlx_dtype)a->dtype);
  if (ranges_overlap(mine->x, b2, a->x, b1) || ranges_overlap(mine->x, b2, a->out, b1) ||
      ranges_overlap(mine->out, b2, a->x, b1) || ranges_overlap(mine->out, b2, a->out, b1))
    return 0;
  a->x2 = mine->x, a->out2 = mine->out, a->H2 = mine->H;
  return 1;
}

/* Rope n (tables, marked by mark_gemv_ropes) applied by the GEMV launch
 * just before it, which computes n's x as one of its segments (q's or
 * k's product, with the others of its x): that segment then writes n's
 * output, rotated, and n launches nothing. Where the kernel takes it
 * (cu_gemv_rope_fits), and with n's output apart from everything else the
 * launch reads and writes (the planner may give it the bytes of x, which
 * is dead at n but read by the launch). 1 when joined. */
static int norm_overlaps(const cu_gemv_args *a, const void *p, size_t bytes);
static int join_gemv_rope(cuda_plan *pl, const ir_node *n, const cu_rope_args *r) {
  cuda_step *s = joinable_step(pl, n, ST_GEMV);
  cu_gemv_args *a = s ? s->args : NULL;
  if (!a || a->dtype != r->dtype || a->M != r->B * r->S) return 0;
  int k = 0;
  while (k < a->nseg && !(a->seg[k].out == r->x && !a->seg[k].rope.on)) k++;
  if (k == a->nseg || a->seg[k].N != r->H * r->D) return 0;
  const size_t es = elem_size((rlx_dtype)a->dtype), out_bytes = (size_t)(a->M * a->seg[k].N) * es;
  const size_t table_bytes = (size_t)((r->table_batched ? r->B : 1) * r->S * (r->n_rot / 2)) * elem_size((rlx_dtype)r->table_dtype);
  if (ranges_overlap(r->out, out_bytes, a->x, (size_t)(a->M * a->K) * es) || norm_overlaps(a, r->out, out_bytes) ||
      ranges_overlap(r->out, out_bytes, r->cos, table_bytes) || ranges_overlap(r->out, out_bytes, r->sin, table_bytes))
    return 0;
  for (int j = 0; j < a->nseg; j++) {
    const cu_gemv_seg *o = &a->seg[j];
    const size_t ob = (size_t)(a->M * o->N) * es;
    if ((j != k && ranges_overlap(r->out, out_bytes, o->out, ob)) || (o->bias && ranges_overlap(r->out, out_bytes, o->bias, (size_t)o->N * es)) ||
        (o->resid && ranges_overlap(r->out, out_bytes, o->resid, ob)))
      return 0;
  }
  cu_gemv_rope *g = &a->seg[k].rope;
  *g = (cu_gemv_rope){1, r->neox, r->table_dtype, r->table_batched, r->D, r->n_rot, r->S, r->cos, r->sin};
  if (!cu_gemv_rope_fits(a, k)) {
    memset(g, 0, sizeof *g);
    return 0;
  }
  a->seg[k].out = r->out;
  return 1;
}

static rlx_status lower_rope(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0);
  cu_rope_args r = {0}, *a = &r;
  a->x = in_ptr(pl, n, 0), a->out = out_ptr(pl, n), a->dtype = x->dtype, a->pdl = pl->pdl;
  a->D = n->a.head_dim, a->n_rot = n->a.n_rot, a->neox = n->a.rope_mode == RLX_ROPE_NEOX;
  a->B = x->shape.d[0], a->S = x->shape.d[1];
  a->H = x->shape.rank == 4 ? x->shape.d[2] : x->shape.d[2] / a->D;
  if (n->n_in == 2) {
    const ir_type *p = ir_in(pl->g, n, 1);
    a->pos = in_ptr(pl, n, 1), a->pos_dtype = p->dtype, a->pos_batched = p->shape.rank == 2;
    a->base = n->a.base, a->scale = n->a.scale;
    for (int64_t i = 0; i < a->n_rot / 2; i++) a->freq[i] = pow(a->base, -2.0 * (double)i / (double)a->n_rot) / a->scale;
  } else {
    const ir_type *c = ir_in(pl->g, n, 1);
    a->cos = in_ptr(pl, n, 1), a->sin = in_ptr(pl, n, 2), a->table_dtype = c->dtype;
    a->table_batched = c->shape.rank == 3;
  }
  if ((pl->rope_gemv[n->id] && join_gemv_rope(pl, n, a)) || join_rope(pl, n, a)) return RLX_OK;
  cuda_step *s = new_step(pl, ST_ROPE, n);
  cu_rope_args *mine = s ? new_args(s, sizeof *mine) : NULL;
  if (!mine) return nomem(n);
  *mine = r;
  return RLX_OK;
}

static rlx_status lower_attention(cuda_plan *pl, const ir_node *n) {
  const rlx_graph *g = pl->g;
  const ir_type *q = ir_in(g, n, 0), *k = ir_in(g, n, 1);
  cuda_step *s = new_step(pl, ST_ATTN, n);
  cu_attn_args *a = s ? new_args(s, sizeof *a) : NULL;
  if (!a) return nomem(n);
  const int bhsd = q->shape.rank == 4 && n->a.layout == RLX_LAYOUT_BHSD;
  const int seq = bhsd ? 2 : 1;
  a->q = in_ptr(pl, n, 0), a->k = in_ptr(pl, n, 1), a->v = in_ptr(pl, n, 2), a->out = out_ptr(pl, n);
  a->dtype = q->dtype, a->mask_kind = (int)n->a.mask, a->window = n->a.window;
  a->B = q->shape.d[0], a->S = q->shape.d[seq], a->T = k->shape.d[seq];
  a->H = n->a.num_heads, a->Hkv = n->a.num_kv_heads, a->D = n->a.head_dim;
  a->scale = n->a.score_scale > 0 ? n->a.score_scale : 1.0 / sqrt((double)a->D);
  a->softcap = n->a.softcap;
  a->force_exact = pl->attn_exact, a->no_cluster = pl->attn_no_cluster, a->tile_force = pl->attn_tile;
  a->pdl = pl->pdl;
  if (bhsd) {
    a->q_sb = a->H * a->S * a->D, a->q_sh = a->S * a->D, a->q_ss = a->D;
    a->kv_sb = a->Hkv * a->T * a->D, a->kv_sh = a->T * a->D, a->kv_ss = a->D;
  } else {
    a->q_sb = a->S * a->H * a->D, a->q_ss = a->H * a->D, a->q_sh = a->D;
    a->kv_sb = a->T * a->Hkv * a->D, a->kv_ss = a->Hkv * a->D, a->kv_sh = a->D;
  }
  if (n->a.mask == RLX_MASK_CUSTOM) {
    const int64_t full[4] = {a->B, a->H, a->S, a->T};
    bcast_strides(&ir_in(g, n, 3)->shape, 4, full, a->mask_stride);
    a->mask = (const float *)in_ptr(pl, n, 3);
  }
  size_t part = 0, counters = 0;
  cu_attention_plan(a, &part, &counters);
  return counters ? step_scratch(s, part, counters, &a->part, &a->count) : RLX_OK;
}

/* ---------------------------------------------------------------- matrix products */

/* A Transpose swapping the two dims of a rank-2 tensor, which matmuls can read as op T. */
static int is_weight_transpose(const rlx_graph *g, rlx_node id) {
  const ir_node *t = &g->nodes[id];
  return t->op == RLX_OP_Transpose && t->out[0].shape.rank == 2 && t->a.perm.v[0] == 1 && t->a.perm.v[1] == 0;
}

static int residual_into(cuda_plan *pl, const ir_node *n, cuda_gemm_desc *d);

/* A product operand that is a param, a constant or folded from them (read
 * through a skipped weight transpose): no launch of the plan writes it. */
static int weight_ready(const cuda_plan *pl, rlx_node id) {
  const ir_node *w = &pl->g->nodes[id];
  if (pl->skip[id]) w = &pl->g->nodes[w->in[0]];
  return w->op == RLX_OP_Param || w->op == RLX_OP_Constant || pl->folded[w->id];
}

static const void *matmul_b(cuda_plan *pl, const ir_node *n, int k, int *b_trans);

/* The weight of a glu product as the GEMV reads it: [N, K] (NULL: it reads
 * this one as [K, N], which glu does not take). */
static const void *glu_weight(cuda_plan *pl, const ir_node *p) {
  int trans = 1;
  const void *w = p->op == RLX_OP_DequantMatMul ? in_ptr(pl, p, 1) : matmul_b(pl, p, 1, &trans);
  return trans ? w : NULL;
}

/* 1 when node id is a Constant whose bytes are all zero (an RmsNorm's
 * beta that the LLM graphs give as zeros). */
static int zero_constant(const rlx_graph *g, rlx_node id) {
  const ir_node *c = &g->nodes[id];
  if (c->op != RLX_OP_Constant) return 0;
  const size_t bytes = rlx_dtype_nbytes(c->out[0].dtype, numel_of(&c->out[0]));
  const uint8_t *p = c->a.data.p;
  for (size_t i = 0; i < bytes; i++)
    if (p[i]) return 0;
  return 1;
}

/* The RmsNorm launched just before product n (w [N, K], M <= CU_GEMV_MAX_M)
 * that computes n's x, taken into the GEMV launch that n starts
 * (cu_gemv_args.norm): its step is removed and 1 returned, with a's norm
 * fields set. Where the norm has no residual or bias input and its beta is
 * zeros, its rows are n's rows, and its buffers are 16-byte aligned and
 * apart, also from n's output `out` (the planner may give that the bytes
 * of the norm's input, which the launch still reads: every output that
 * joins the launch is checked so, norm_overlaps) (RLX_CUDA_GEMV_NORM=0:
 * never). */
static int take_norm(cuda_plan *pl, const ir_node *n, const cuda_gemm_desc *d, const void *out, cu_gemv_args *a) {
  cuda_step *s = pl->gemv_norm ? joinable_step(pl, n, ST_NORM) : NULL;
  const cu_norm_args *na = s ? s->args : NULL;
  const ir_node *norm = s ? &pl->g->nodes[s->node] : NULL;
  const size_t x_bytes = (size_t)(d->M * d->K) * elem_size(d->dtype), out_bytes = (size_t)(d->M * d->N) * elem_size(d->dtype);
  if (!na || !d->b_trans || !na->rms || na->res || na->bias || na->out != d->a || na->rows != d->M || na->len != d->K ||
      na->dtype != (int)d->dtype || norm->op != RLX_OP_RmsNorm || (norm->n_in > 2 && !zero_constant(pl->g, norm->in[2])) ||
      ((uintptr_t)na->x | (uintptr_t)na->gamma | (uintptr_t)na->out) % 16 || ranges_overlap(na->x, x_bytes, na->out, x_bytes) ||
      ranges_overlap(na->x, x_bytes, out, out_bytes))
    return 0;
  a->norm = 1, a->norm_x = na->x, a->norm_gamma = na->gamma, a->norm_eps = na->eps;
  free(s->args);
  pl->n_steps--;
  return 1;
}

/* 1 when launch a computes a norm (take_norm) whose input overlaps the
 * bytes [p, p + bytes) that would be written in it. */
static int norm_overlaps(const cu_gemv_args *a, const void *p, size_t bytes) {
  return a->norm && ranges_overlap(a->norm_x, (size_t)(a->M * a->K) * elem_size((rlx_dtype)a->dtype), p, bytes);
}

/* Product n (the first of a gate|up pair that mark_glu_regions chose, d
 * taken by the GEMV) and its partner as one glu launch writing their
 * region's output: 1 (emitted, the partner and the region marked done), 0
 * where the buffers do not allow it (the region's output overlaps x: the
 * planner may give it the bytes of an x that dies at the second product)
 * or the partner's weight is not aligned for the kernel; both products
 * and the region then lower as they are. */
static int emit_glu_gemv(cuda_plan *pl, const ir_node *n, const cuda_gemm_desc *d, rlx_dtype w_dtype, rlx_status *st) {
  const ir_node *r = &pl->g->nodes[pl->glu_region[n->id]];
  const ir_node *gate = &pl->g->nodes[r->in[0]], *up = &pl->g->nodes[r->in[1]];
  const ir_node *partner = gate == n ? up : gate;
  const void *wg = glu_weight(pl, gate), *wu = glu_weight(pl, up);
  uint8_t *out = out_ptr(pl, r);
  const size_t es = elem_size(d->dtype);
  pl->glu_region[partner->id] = -1; /* decided here, for both */
  if (!wg || !wu || !d->b_trans || d->bias || d->act != RLX_ACT_NONE || !out ||
      !cu_gemv_supported(d->dtype, w_dtype, d->M, d->N, d->K, 1, d->a, wu) ||
      !cu_gemv_supported(d->dtype, w_dtype, d->M, d->N, d->K, 1, d->a, wg) ||
      ranges_overlap(out, (size_t)(d->M * d->N) * es, d->a, (size_t)(d->M * d->K) * es))
    return 0;
  cu_gemv_args norm = {0};
  take_norm(pl, n, d, out, &norm);
  cuda_step *s = new_step(pl, ST_GEMV, n);
  cu_gemv_args *a = s ? new_args(s, sizeof *a) : NULL;
  if (!a) return (*st = nomem(n)), 1;
  *a = norm;
  a->x = d->a, a->dtype = d->dtype, a->w_dtype = w_dtype, a->act = RLX_ACT_NONE, a->w_trans = 1, a->glu = 1;
  a->M = d->M, a->K = d->K, a->pdl = pl->pdl, a->nseg = 2;
  a->seg[0].w = wg, a->seg[0].out = out, a->seg[0].N = d->N;
  a->seg[1].w = wu, a->seg[1].N = d->N;
  size_t part = 0, counters = 0;
  cu_gemv_plan(a, &part, &counters); /* [N, K]: no split, no scratch */
  pl->add_done[partner->id] = pl->add_done[r->id] = 1;
  return 1;
}

/* A product of few rows (decode) through the GEMV kernels, where they take
 * it (b of w_dtype: d's dtype, or a DequantMatMul's 16-bit weights): 1
 * (emitted), 0 (not taken: the caller uses cuBLASLt), or an error. */
static int emit_gemv(cuda_plan *pl, const ir_node *n, const cuda_gemm_desc *d, rlx_dtype w_dtype, double alpha,
                     rlx_status *st) {
  *st = RLX_OK;
  if (d->batch != 1 || d->pa || !cu_gemv_supported(d->dtype, w_dtype, d->M, d->N, d->K, d->b_trans, d->a, d->b))
    return 0;
  if (pl->glu_region[n->id] >= 0 && emit_glu_gemv(pl, n, d, w_dtype, st)) return 1;
  cuda_gemm_desc r = *d; /* the residual add that reads the product, computed in its epilogue */
  const int resid = residual_into(pl, n, &r);
  /* a product right after another of the same x (q, k, v) joins its
   * launch as one more segment: it then runs at the other's place, which
   * is safe where nothing ran between (an absorbed residual add did: the
   * planner may give this output the bytes of the add's operand) and the
   * weights and bias are params (nothing the launch itself writes) */
  cuda_step *s = joinable_step(pl, n, ST_GEMV);
  cu_gemv_args *a = s ? s->args : NULL;
  if (!a || a->glu || a->nseg == CU_GEMV_MAX_SEG || a->x != d->a || a->dtype != (int)d->dtype || a->w_dtype != (int)w_dtype ||
      a->M != d->M ||
      a->K != d->K || a->w_trans != d->b_trans || a->act != d->act || a->alpha != (float)alpha || resid || a->seg[0].resid ||
      !weight_ready(pl, n->in[1]) || (n->n_in > 2 && !weight_ready(pl, n->in[2])) ||
      norm_overlaps(a, r.c, (size_t)(d->M * d->N) * elem_size(d->dtype))) {
    cu_gemv_args norm = {0};
    take_norm(pl, n, d, r.c, &norm);
    s = new_step(pl, ST_GEMV, n);
    if (!s || !(a = new_args(s, sizeof *a))) return (*st = nomem(n)), 1;
    *a = norm;
    a->x = d->a, a->dtype = d->dtype, a->w_dtype = w_dtype, a->act = d->act, a->alpha = (float)alpha;
    a->w_trans = d->b_trans;
    a->M = d->M, a->K = d->K, a->pdl = pl->pdl;
  }
  cu_gemv_seg *g = &a->seg[a->nseg++];
  g->w = d->b, g->bias = d->bias, g->out = r.c, g->resid = r.resid, g->N = d->N;
  if (resid) pl->add_done[pl->resid_add[n->id]] = 1;
  size_t part = 0, counters = 0;
  cu_gemv_plan(a, &part, &counters);
  if (s->dev_scratch) { /* the split's scratch for all segments, anew */
    cudaFree(s->dev_scratch);
    s->dev_scratch = NULL;
  }
  float *pp = NULL;
  unsigned *cp = NULL;
  if (counters) *st = step_scratch(s, part, counters, &pp, &cp);
  cu_gemv_set_scratch(a, pp, cp);
  return 1;
}

static rlx_status emit_gemm(cuda_plan *pl, const ir_node *n, const cuda_gemm_desc *d, int *fused) {
  cuda_step *s = new_step(pl, ST_GEMM, n);
  if (!s) return nomem(n);
  cuda_gemm *gm;
  rlx_status st = cuda_gemm_prepare(d, pl->workspace, &gm, fused);
  if (st) return st;
  s->args = gm;
  return RLX_OK;
}

/* The product operand b of node n: a [K, N] tensor, or read through a
 * skipped transpose as [N, K] (b_trans). */
static const void *matmul_b(cuda_plan *pl, const ir_node *n, int k, int *b_trans) {
  rlx_node src = n->in[k];
  *b_trans = 0;
  if (pl->skip[src]) {
    *b_trans = 1;
    return in_ptr(pl, &pl->g->nodes[src], 0);
  }
  return in_ptr(pl, n, k);
}

/* The product d of MatMul n written straight into the residual add that
 * reads it (mark_residual_adds chose the pair): D = A B + other operand,
 * cuBLASLt's C input with beta 1. Taken only when the add's buffer does
 * not overlap A or B (the planner may hand the add the bytes of a tensor
 * that dies at the product) and is the other operand's exactly or not at
 * all; 1 when d now writes the add. */
static int residual_into(cuda_plan *pl, const ir_node *n, cuda_gemm_desc *d) {
  const int add_id = pl->resid_add[n->id];
  if (add_id < 0) return 0;
  const ir_node *add = &pl->g->nodes[add_id];
  const int other = add->in[0] == n->id ? 1 : 0;
  const size_t es = elem_size(d->dtype);
  const size_t a_bytes = (size_t)(d->M * d->K) * es, b_bytes = (size_t)(d->K * d->N) * es,
               c_bytes = (size_t)(d->M * d->N) * es;
  uint8_t *out = out_ptr(pl, add);
  const uint8_t *res = in_ptr(pl, add, other);
  if (!out || !res || ranges_overlap(out, c_bytes, d->a, a_bytes) || ranges_overlap(out, c_bytes, d->b, b_bytes) ||
      (out != res && ranges_overlap(out, c_bytes, res, c_bytes)))
    return 0;
  d->c = out;
  d->resid = res;
  return 1;
}

static rlx_status lower_matmul(cuda_plan *pl, const ir_node *n) {
  const rlx_graph *g = pl->g;
  const ir_type *ta = ir_in(g, n, 0), *tb = ir_in(g, n, 1), *out = &n->out[0];
  const int64_t M = ta->shape.rank == 1 ? 1 : ta->shape.d[ta->shape.rank - 2], K = ta->shape.d[ta->shape.rank - 1];
  const int64_t N = tb->shape.rank == 1 ? 1 : tb->shape.d[tb->shape.rank - 1];
  const int64_t total = numel_of(out);
  if (total == 0) return RLX_OK;
  if (K == 0) {
    cuda_step *s = new_step(pl, ST_MEMSET, n);
    if (!s) return nomem(n);
    s->dst = out_ptr(pl, n), s->bytes = rlx_dtype_nbytes(out->dtype, total);
    return RLX_OK;
  }
  cuda_gemm_desc d = {0};
  d.dtype = out->dtype, d.K = K, d.N = N, d.tf32 = pl->tf32, d.act = RLX_ACT_NONE;
  d.a = in_ptr(pl, n, 0), d.c = out_ptr(pl, n);
  d.b = matmul_b(pl, n, 1, &d.b_trans);
  const int a_br = ta->shape.rank > 2 ? ta->shape.rank - 2 : 0, b_br = tb->shape.rank > 2 ? tb->shape.rank - 2 : 0;
  const int64_t batch = total / (M * N);
  int fused;
  if (b_br == 0) { /* one weight for every row of a: a single product over all rows */
    d.M = M * batch, d.batch = 1;
    rlx_status st;
    if (!pl->no_gemv && emit_gemv(pl, n, &d, d.dtype, 0.0, &st)) return st;
    if (residual_into(pl, n, &d)) pl->add_done[pl->resid_add[n->id]] = 1;
    return emit_gemm(pl, n, &d, &fused);
  }
  /* batch offsets (in matrices) of a and b per output matrix, as the CPU computes them */
  const int br = a_br > b_br ? a_br : b_br;
  int64_t bd[RLX_MAX_RANK], sa[RLX_MAX_RANK], sb[RLX_MAX_RANK];
  for (int i = 0; i < br; i++) {
    int ia = a_br - br + i, ib = b_br - br + i;
    int64_t da = ia >= 0 ? ta->shape.d[ia] : 1, db = ib >= 0 ? tb->shape.d[ib] : 1;
    bd[i] = da == 1 ? db : da;
  }
  for (int pass = 0; pass < 2; pass++) {
    const ir_type *t = pass ? tb : ta;
    int rank = pass ? b_br : a_br;
    int64_t *str = pass ? sb : sa, s = 1;
    for (int i = br - 1; i >= 0; i--) {
      int j = rank - br + i;
      if (j < 0 || t->shape.d[j] == 1) str[i] = 0;
      else str[i] = s, s *= t->shape.d[j];
    }
  }
  int64_t *oa = malloc((size_t)batch * sizeof *oa), *ob = malloc((size_t)batch * sizeof *ob);
  if (!oa || !ob) {
    free(oa), free(ob);
    return nomem(n);
  }
  int affine = 1;
  for (int64_t bi = 0; bi < batch; bi++) {
    int64_t rest = bi, xa = 0, xb = 0;
    for (int i = br - 1; i >= 0; i--) {
      int64_t idx = rest % bd[i];
      rest /= bd[i];
      xa += idx * sa[i], xb += idx * sb[i];
    }
    oa[bi] = xa, ob[bi] = xb;
    if (bi > 0 && (xa != bi * oa[1] || xb != bi * ob[1])) affine = 0;
  }
  rlx_status st;
  d.M = M;
  const size_t es = elem_size(out->dtype);
  if (affine && batch < 0x7fffffff) {
    d.batch = batch;
    d.stride_a = batch > 1 ? oa[1] * M * K : 0;
    d.stride_b = batch > 1 ? ob[1] * K * N : 0;
    d.stride_c = M * N;
    st = emit_gemm(pl, n, &d, &fused);
  } else { /* broadcasting that no single stride expresses: one product per output matrix */
    const void **pa = malloc((size_t)batch * sizeof *pa), **pb = malloc((size_t)batch * sizeof *pb);
    void **pc = malloc((size_t)batch * sizeof *pc);
    if (!pa || !pb || !pc) {
      st = nomem(n);
    } else {
      for (int64_t bi = 0; bi < batch; bi++) {
        pa[bi] = (const uint8_t *)d.a + (size_t)(oa[bi] * M * K) * es;
        pb[bi] = (const uint8_t *)d.b + (size_t)(ob[bi] * K * N) * es;
        pc[bi] = (uint8_t *)d.c + (size_t)(bi * M * N) * es;
      }
      d.batch = 1, d.n_ptrs = (int)batch, d.pa = pa, d.pb = pb, d.pc = pc;
      st = emit_gemm(pl, n, &d, &fused);
    }
    free(pa), free(pb), free(pc);
  }
  free(oa), free(ob);
  return st;
}

static rlx_status lower_fused_matmul(cuda_plan *pl, const ir_node *n) {
  const ir_type *tw = ir_in(pl->g, n, 1), *out = &n->out[0];
  const int64_t K = tw->shape.d[0], N = tw->shape.d[1], total = numel_of(out);
  if (total == 0) return RLX_OK;
  if (K == 0) return emit_bias_act(pl, n, (int)n->a.act, n->a.alpha, 0, in_ptr(pl, n, 2));
  cuda_gemm_desc d = {0};
  d.dtype = out->dtype, d.M = total / N, d.N = N, d.K = K, d.batch = 1, d.tf32 = pl->tf32;
  d.a = in_ptr(pl, n, 0), d.c = out_ptr(pl, n), d.bias = in_ptr(pl, n, 2), d.act = (int)n->a.act;
  d.b = matmul_b(pl, n, 1, &d.b_trans);
  int fused;
  rlx_status st;
  if (!pl->no_gemv && emit_gemv(pl, n, &d, d.dtype, n->a.alpha, &st)) return st;
  st = emit_gemm(pl, n, &d, &fused);
  if (st || fused == CUDA_FUSED_ALL) return st;
  return emit_bias_act(pl, n, (int)n->a.act, n->a.alpha, 1, fused == CUDA_FUSED_NONE ? d.bias : NULL);
}

/* Whether DequantMatMul n of 16-bit weights widens them into the plan's
 * scratch: under x of another dtype, where the GEMV does not take it. */
static int half_weight_widened(const cuda_plan *pl, const ir_node *n, int64_t M, int64_t K) {
  const rlx_dtype xt = ir_in(pl->g, n, 0)->dtype, wt = ir_in(pl->g, n, 1)->dtype;
  return xt != wt && (pl->no_gemv || M > CU_GEMV_MAX_M || K % 8 != 0);
}

/* DequantMatMul n as a cuBLASLt product with w [N, K] read as op T: w as
 * it is (16-bit w under x of its dtype), or with decode, first decoded
 * (blocks) or widened (16-bit) into the plan's scratch in x's dtype. */
static rlx_status emit_weight_gemm(cuda_plan *pl, const ir_node *n, int64_t M, int64_t N, int64_t K, int decode) {
  const ir_type *x = ir_in(pl->g, n, 0), *w = ir_in(pl->g, n, 1);
  cuda_gemm_desc d = {0};
  d.dtype = x->dtype, d.M = M, d.N = N, d.K = K, d.batch = 1, d.b_trans = 1, d.tf32 = pl->tf32;
  d.a = in_ptr(pl, n, 0), d.b = in_ptr(pl, n, 1), d.c = out_ptr(pl, n), d.act = RLX_ACT_NONE;
  if (decode) {
    if ((size_t)(N * K) * elem_size(x->dtype) > pl->scratch_bytes)
      return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: node %d: the scratch holds no decoded weights", n->id);
    pl->qx_valid = 0; /* the scratch no longer holds a quantized x */
    cuda_step *s = new_step(pl, ST_DEQUANT, n);
    if (!s) return nomem(n);
    s->src = d.b, s->dtype = w->dtype, s->dst = pl->scratch, s->dtype2 = x->dtype, s->n0 = N, s->n1 = K;
    d.b = pl->scratch;
  }
  if (residual_into(pl, n, &d)) pl->add_done[pl->resid_add[n->id]] = 1;
  int fused;
  return emit_gemm(pl, n, &d, &fused);
}

/* DequantMatMul of F16/BF16 weights w [N, K] (a 16-bit GGUF matrix read in
 * place), the CPU's rule: x as given times the widened weights, F32
 * accumulation. At decode rows the GEMV widens w in registers as it
 * streams (2 bytes an element read); at more rows cuBLASLt reads w as op T,
 * first widened into the plan's scratch when x has another dtype (F32 x:
 * an exact F32 product). */
static rlx_status lower_half_weight_matmul(cuda_plan *pl, const ir_node *n, int64_t M, int64_t N, int64_t K) {
  const ir_type *x = ir_in(pl->g, n, 0), *w = ir_in(pl->g, n, 1);
  if (half_weight_widened(pl, n, M, K)) return emit_weight_gemm(pl, n, M, N, K, 1);
  cuda_gemm_desc d = {0};
  d.dtype = x->dtype, d.M = M, d.N = N, d.K = K, d.batch = 1, d.b_trans = 1;
  d.a = in_ptr(pl, n, 0), d.b = in_ptr(pl, n, 1), d.c = out_ptr(pl, n), d.act = RLX_ACT_NONE;
  rlx_status st;
  if (!pl->no_gemv && emit_gemv(pl, n, &d, w->dtype, 0.0, &st)) return st;
  if (w->dtype != x->dtype)
    return rlx_set_error(RLX_ERR_INTERNAL, "CUDA: node %d (DequantMatMul of %s): the GEMV did not take it", n->id,
                         rlx_dtype_name(w->dtype));
  return emit_weight_gemm(pl, n, M, N, K, 0);
}

static rlx_status lower_quant(cuda_plan *pl, const ir_node *n) {
  const ir_type *x = ir_in(pl->g, n, 0), *out = &n->out[0];
  if (n->op == RLX_OP_Dequantize) {
    const int64_t K = x->shape.rank ? x->shape.d[x->shape.rank - 1] : 1;
    cuda_step *s = new_step(pl, ST_DEQUANT, n);
    if (!s) return nomem(n);
    s->src = in_ptr(pl, n, 0), s->dtype = x->dtype, s->dst = out_ptr(pl, n), s->dtype2 = out->dtype;
    s->n0 = K ? numel_of(x) / K : 0, s->n1 = K;
    return RLX_OK;
  }
  const ir_type *w = ir_in(pl->g, n, 1);
  const int64_t N = w->shape.d[0], K = w->shape.d[1], M = numel_of(out) / (N ? N : 1);
  if (numel_of(out) == 0) return RLX_OK;
  if (K == 0) {
    cuda_step *s = new_step(pl, ST_MEMSET, n);
    if (!s) return nomem(n);
    s->dst = out_ptr(pl, n), s->bytes = rlx_dtype_nbytes(out->dtype, numel_of(out));
    return RLX_OK;
  }
  if (!rlx_dtype_is_block(w->dtype)) return lower_half_weight_matmul(pl, n, M, N, K);
  if (M <= CU_QMM_MAX_M && pl->qmm_exact) {
    cuda_step *s = new_step(pl, ST_QMM, n);
    if (!s) return nomem(n);
    s->src = in_ptr(pl, n, 0), s->dtype = x->dtype, s->aux = in_ptr(pl, n, 1), s->dtype2 = w->dtype;
    s->dst = out_ptr(pl, n), s->n0 = M, s->n1 = N, s->n2 = K;
    return RLX_OK;
  }
  if (M <= CU_QMM_MAX_M) {
    /* decode: x quantized into the scratch once for consecutive products
     * of the same x (q, k, v of a layer), then the integer GEMV */
    const size_t xslot = plan_input_slot(n, 0);
    const int folded = pl->folded[n->id];
    if (!pl->qx_valid || pl->qx_slot != xslot || pl->qx_folded != folded || pl->qx_M != M || pl->qx_K != K) {
      cuda_step *q = new_step(pl, ST_QUANT_X, n);
      cu_quant_x_args *qa = q ? new_args(q, sizeof *qa) : NULL;
      if (!qa) return nomem(n);
      qa->x = in_ptr(pl, n, 0), qa->x_dtype = x->dtype, qa->qx = pl->scratch, qa->M = M, qa->K = K;
      qa->pdl = pl->pdl;
      const ir_node *xn = &pl->g->nodes[n->in[0]];
      if (pl->skip[xn->id] && (xn->op == RLX_OP_RmsNorm || xn->op == RLX_OP_FusedResidualRmsNorm)) {
        qa->has_norm = 1; /* mark_norm_quant: the norm runs here */
        norm_args(pl, xn, &qa->norm);
      }
      pl->qx_valid = 1, pl->qx_slot = xslot, pl->qx_folded = folded, pl->qx_M = M, pl->qx_K = K;
    }
    /* the residual add that reads the product, computed in its epilogue */
    cuda_gemm_desc r = {0};
    r.dtype = out->dtype, r.M = M, r.N = N, r.K = K, r.a = in_ptr(pl, n, 0), r.b = in_ptr(pl, n, 1);
    r.c = out_ptr(pl, n);
    const int resid = residual_into(pl, n, &r);
    if (resid) pl->add_done[pl->resid_add[n->id]] = 1;
    /* a product right after another of the same quantized x (q, k, v)
     * joins its launch as one more segment */
    cuda_step *prev = joinable_step(pl, n, ST_QMV);
    cu_qmv_args *a = prev ? prev->args : NULL;
    if (!a || a->nseg == CU_QMV_MAX_SEG || a->scheme != (int)w->dtype || a->out_dtype != (int)out->dtype || resid ||
        a->seg[0].resid ||
        !weight_ready(pl, n->in[1])) {
      cuda_step *s = new_step(pl, ST_QMV, n);
      if (!s || !(a = new_args(s, sizeof *a))) return nomem(n);
      a->qx = pl->scratch, a->scheme = w->dtype, a->out_dtype = out->dtype, a->M = M, a->K = K;
      a->pdl = pl->pdl;
    }
    a->seg[a->nseg].w = in_ptr(pl, n, 1), a->seg[a->nseg].out = r.c, a->seg[a->nseg].resid = r.resid;
    a->seg[a->nseg].N = N;
    a->nseg++;
    cu_qmv_plan(a);
    return RLX_OK;
  }
  /* prefill: dequantize into the plan's scratch, then a tensor-core product with w^T */
  return emit_weight_gemm(pl, n, M, N, K, 1);
}

/* Bytes of scratch node n needs (0: none): its dequantized or widened
 * weights (large M) or its quantized x (small M). */
static size_t quant_scratch_bytes(const cuda_plan *pl, const ir_node *n) {
  if (n->op != RLX_OP_DequantMatMul) return 0;
  const ir_type *x = ir_in(pl->g, n, 0), *w = ir_in(pl->g, n, 1);
  const int64_t N = w->shape.d[0], K = w->shape.d[1];
  const int64_t M = N ? numel_of(&n->out[0]) / N : 0;
  if (!K || !M) return 0;
  const size_t widened = (size_t)(N * K) * elem_size(x->dtype);
  if (!rlx_dtype_is_block(w->dtype)) return half_weight_widened(pl, n, M, K) ? widened : 0;
  return M > CU_QMM_MAX_M ? widened : cu_qx_bytes(M, K);
}

/* ---------------------------------------------------------------- lowering */

/* Whether Cast n (marked by mark_cast_updates) is left to its UpdateSlice:
 * where that one's output does not overlap the Cast's input (the planner
 * may give the UpdateSlice, when not in place, the bytes of an input that
 * dies at the Cast). Else the mark goes and the Cast runs. */
static int cast_absorbed(cuda_plan *pl, const ir_node *n) {
  const ir_node *u = &pl->g->nodes[pl->cast_into[n->id]];
  const ir_type *x = ir_in(pl->g, n, 0);
  if (!ranges_overlap(out_ptr(pl, u), rlx_dtype_nbytes(u->out[0].dtype, numel_of(&u->out[0])), in_ptr(pl, n, 0),
                      rlx_dtype_nbytes(x->dtype, numel_of(x))))
    return 1;
  pl->cast_into[n->id] = -1;
  return 0;
}

static rlx_status lower_node(cuda_plan *pl, const ir_node *n) {
  if (n->op == RLX_OP_Cast && pl->cast_into[n->id] >= 0 && cast_absorbed(pl, n)) return RLX_OK;
  switch (n->op) {
  case RLX_OP_Activation:
  case RLX_OP_Binary:
  case RLX_OP_Compare:
  case RLX_OP_Where:
  case RLX_OP_Clamp:
    return lower_elementwise(pl, n);
  case RLX_OP_Cast:
    return n->out[0].dtype == ir_in(pl->g, n, 0)->dtype ? lower_layout(pl, n) : lower_elementwise(pl, n);
  case RLX_OP_ElementwiseRegion:
  case RLX_OP_BatchElementwiseRegion:
    return lower_region(pl, n);
  case RLX_OP_FusedSwiGLU: return lower_swiglu(pl, n);
  case RLX_OP_BatchNorm: return lower_batch_norm(pl, n);
  case RLX_OP_Reduce:
  case RLX_OP_ArgMax:
  case RLX_OP_ArgMin:
  case RLX_OP_Cumsum:
  case RLX_OP_Softmax:
  case RLX_OP_LogSoftmax:
    return lower_reduce(pl, n);
  case RLX_OP_LayerNorm:
  case RLX_OP_RmsNorm:
  case RLX_OP_FusedResidualLN:
  case RLX_OP_FusedResidualRmsNorm:
    return lower_norm(pl, n);
  case RLX_OP_Rope: return lower_rope(pl, n);
  case RLX_OP_Attention: return lower_attention(pl, n);
  case RLX_OP_MatMul: return lower_matmul(pl, n);
  case RLX_OP_FusedMatMulBiasAct: return lower_fused_matmul(pl, n);
  case RLX_OP_DequantMatMul:
  case RLX_OP_Dequantize:
    return lower_quant(pl, n);
  default:
    return lower_layout(pl, n);
  }
}

/* ---------------------------------------------------------------- launching */

static rlx_status launch(cuda_plan *pl, const cuda_step *s) {
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
  case ST_QUANT_X: e = cu_quant_x_launch(s->args, st); break;
  case ST_QMV: e = cu_qmv_launch(s->args, st); break;
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
static rlx_status issue_run(cuda_plan *pl) {
  cudaError_t e;
  if (pl->has_err && (e = cudaMemsetAsync(pl->err_dev, 0, sizeof *pl->err_dev, pl->stream)) != cudaSuccess)
    return cuda_fail(e, "cudaMemsetAsync");
  if (pl->in_bytes &&
      (e = cudaMemcpyAsync(pl->in_dev, pl->in_host, pl->in_bytes, cudaMemcpyHostToDevice, pl->stream)) != cudaSuccess)
    return cuda_fail(e, "staging the inputs");
  if (pl->events) cudaEventRecord(pl->events[0], pl->stream);
  for (int i = 0; i < pl->n_steps; i++) {
    if (pl->steps[i].folded) continue;
    rlx_status st = launch(pl, &pl->steps[i]);
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

static rlx_status capture(cuda_plan *pl) {
  cudaGraph_t graph;
  cudaError_t e = cudaStreamBeginCapture(pl->stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return cuda_fail(e, "cudaStreamBeginCapture");
  rlx_status st = issue_run(pl);
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
static rlx_status check_device_error(const cuda_plan *pl) {
  const cu_error *e = pl->err_host;
  if (!pl->has_err || e->code == CU_ERR_NONE) return RLX_OK;
  const ir_node *n = &pl->g->nodes[e->node];
  if (e->code == CU_ERR_INDEX)
    return rlx_set_error(RLX_ERR_INVALID, "%s (node %d): index %lld (element %lld) out of range [0, %lld)",
                         ir_ops[n->op].name, n->id, e->value, e->element, e->limit);
  return rlx_set_error(RLX_ERR_INVALID, "%s (node %d): start %lld out of range [0, %lld]", ir_ops[n->op].name, n->id,
                       e->value, e->limit);
}

/* ---------------------------------------------------------------- compile / run / read / free */

/* The profile is printed after this many runs (or at free, if fewer ran):
 * plans can outlive their session in the compile cache. */
#define PROFILE_RUNS 10

/* Accumulates the last run's time per launch (RLX_CUDA_PROFILE). */
static void profile_collect(cuda_plan *pl) {
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
static void profile_print(const cuda_plan *pl) {
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

static void cuda_free(void *p) {
  cuda_plan *pl = p;
  if (!pl) return;
  if (pl->stream) cudaStreamSynchronize(pl->stream);
  if (pl->profiled_runs && pl->profiled_runs < PROFILE_RUNS) profile_print(pl);
  if (pl->events)
    for (int i = 0; i <= pl->n_steps; i++) cudaEventDestroy(pl->events[i]);
  free(pl->events);
  free(pl->step_ms);
  if (pl->exec) cudaGraphExecDestroy(pl->exec);
  for (int i = 0; i < pl->n_steps; i++) {
    if (pl->steps[i].kind == ST_GEMM) cuda_gemm_free(pl->steps[i].args);
    else free(pl->steps[i].args);
    if (pl->steps[i].dev_scratch) cudaFree(pl->steps[i].dev_scratch);
  }
  free(pl->steps);
  if (pl->g) {
    for (int i = 0; i < pl->g->n_nodes; i++) {
      if (pl->entry && pl->entry[i]) {
        cuda_store_put(pl->store, pl->entry[i]);
        continue;
      }
      if (pl->leaf_dev && pl->leaf_dev[i] && !(pl->in_off && pl->in_off[i] != SIZE_MAX)) cudaFree(pl->leaf_dev[i]);
      if (pl->folded_dev && pl->folded_dev[i]) cudaFree(pl->folded_dev[i]);
    }
  }
  free(pl->leaf_dev);
  free(pl->leaf_bytes);
  free(pl->leaf_version);
  free(pl->entry);
  free(pl->folded_dev);
  free(pl->folded);
  free(pl->skip);
  free(pl->resid_add);
  free(pl->glu_region);
  free(pl->cast_into);
  free(pl->rope_gemv);
  free(pl->add_done);
  free(pl->slot);
  if (pl->arena) cudaFree(pl->arena);
  if (pl->workspace) cudaFree(pl->workspace);
  if (pl->scratch) cudaFree(pl->scratch);
  if (pl->err_dev) cudaFree(pl->err_dev);
  if (pl->err_host) cudaFreeHost(pl->err_host);
  if (pl->in_host) cudaFreeHost(pl->in_host);
  if (pl->out_host) cudaFreeHost(pl->out_host);
  if (pl->in_dev) cudaFree(pl->in_dev);
  free(pl->in_off);
  free(pl->out_copy);
  if (pl->stream) cudaStreamDestroy(pl->stream);
  plan_memory_free(&pl->mem);
  free(pl);
}

/* Parameter-only nodes whose result is worth keeping: all inputs params,
 * constants or such nodes, and an output no larger than twice its inputs
 * plus 1 MiB (a folded Expand must not blow up memory). */
static void mark_folded(cuda_plan *pl) {
  const rlx_graph *g = pl->g;
  /* An assigned param is state the graph updates on every run (and the
   * device may keep, cuda_keep_assigned): nothing derived from it folds. */
  uint8_t *state = calloc((size_t)g->n_nodes + 1, 1);
  if (!state) return; /* nothing folded: correct, only slower */
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == RLX_OP_Assign) state[g->nodes[i].in[0]] = 1;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (ir_ops[n->op].category == RLX_CAT_LEAF || n->n_in == 0) continue;
    int ok = 1;
    size_t in_bytes = 0;
    for (int k = 0; ok && k < n->n_in; k++) {
      const ir_node *src = &g->nodes[n->in[k]];
      ok = (src->op == RLX_OP_Param && !state[src->id]) || src->op == RLX_OP_Constant || pl->folded[src->id];
      in_bytes += rlx_dtype_nbytes(src->out[0].dtype, ir_numel(&src->out[0].shape));
    }
    size_t out_bytes = 0;
    for (int o = 0; o < n->n_out; o++) out_bytes += rlx_dtype_nbytes(n->out[o].dtype, ir_numel(&n->out[o].shape));
    pl->folded[i] = ok && out_bytes <= 2 * in_bytes + ((size_t)1 << 20);
  }
  free(state);
}

/* key[i]: how node i is computed — its op, attributes (a param's name, a
 * constant's bytes), types and inputs, hashed recursively — which is the
 * same in every plan of the session: a folded node's buffer in the store
 * goes by it, so the plans share one copy of a weight folded from params
 * (an F16 weight cast to F32). */
static void folded_store_keys(const rlx_graph *g, uint64_t *key) {
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    uint64_t h = pass_hash_bytes(PASS_HASH_SEED, &n->op, sizeof n->op);
    for (int k = 0; k < n->n_in; k++) h = pass_hash_bytes(h, &key[n->in[k]], sizeof key[0]);
    for (int o = 0; o < n->n_out; o++) h = pass_type_hash(h, &n->out[o]);
    key[i] = pass_attrs_hash(n->op, &n->a, h);
  }
}

/* Weight transposes every reader of which is a matmul's b operand: the
 * product reads them as op T, so they never run. */
static void mark_absorbed(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  int *absorbed = calloc((size_t)g->n_nodes + 1, sizeof *absorbed);
  if (!absorbed) return; /* nothing absorbed: correct, only slower */
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if ((n->op == RLX_OP_MatMul && ir_in(g, n, 0)->shape.rank >= 1 && ir_in(g, n, 1)->shape.rank == 2) ||
        n->op == RLX_OP_FusedMatMulBiasAct)
      if (is_weight_transpose(g, n->in[1]) && n->in[0] != n->in[1]) absorbed[n->in[1]]++;
  }
  for (int i = 0; i < g->n_nodes; i++)
    if (absorbed[i] && absorbed[i] == uses[i]) pl->skip[i] = 1; /* unless it is a view (cuda_compile) */
  free(absorbed);
}

/* Node j adds no launch to a run: a leaf, a view, absorbed by its
 * consumers, or folded (run once at set-up). */
static int launches_nothing(const cuda_plan *pl, int j) {
  return ir_ops[pl->g->nodes[j].op].category == RLX_CAT_LEAF || pl->mem.view[j] || pl->skip[j] || pl->folded[j];
}

/* No node strictly between from and to launches, but `except` (-1: none):
 * a launch at from's place may then stand for one at to's. */
static int quiet_between(const cuda_plan *pl, int from, int to, int except) {
  for (int j = from + 1; j < to; j++)
    if (j != except && !launches_nothing(pl, j)) return 0;
  return 1;
}

/* Residual adds a GEMM can compute in its epilogue: add = MatMul + r (either
 * side) with r of the add's shape and dtype (no broadcasting), the MatMul
 * (or DequantMatMul) a single product over all rows (rank-2 weight, at
 * least 16 rows, or at most CU_GEMV_MAX_M: the decode GEMV kernels add it
 * in theirs; 9-15 rows go to cuBLASLt without it), read only by the add,
 * and nothing that runs between the two (so the GEMM may run at the
 * product's place and its operands are still intact). residual_into checks
 * the buffers at lowering. */
#define RESID_MIN_ROWS 16
static void mark_residual_adds(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op != RLX_OP_Binary || n->a.binop != RLX_BIN_ADD || n->n_in != 2 || pl->folded[i] || pl->mem.view[i])
      continue;
    for (int side = 0; side < 2; side++) {
      const int mm = n->in[side], r = n->in[1 - side];
      const ir_node *m = &g->nodes[mm];
      const int dq = m->op == RLX_OP_DequantMatMul; /* w [N, K] */
      if ((m->op != RLX_OP_MatMul && !dq) || mm == r || uses[mm] != 1 || pl->folded[mm] || pl->resid_add[mm] >= 0)
        continue;
      const ir_type *ta = ir_in(g, m, 0), *tb = ir_in(g, m, 1), *tr = &g->nodes[r].out[0];
      const int64_t cols = tb->shape.rank == 2 ? tb->shape.d[dq ? 0 : 1] : 0, rows = cols ? numel_of(&m->out[0]) / cols : 0;
      /* decode rows (the GEMV kernels add it in their epilogue) or GEMM rows */
      if (tb->shape.rank != 2 || ta->shape.rank < 2 || tr->dtype != n->out[0].dtype ||
          !ir_shape_eq(&tr->shape, &n->out[0].shape) || !ir_shape_eq(&m->out[0].shape, &n->out[0].shape) ||
          (rows > CU_GEMV_MAX_M && rows < RESID_MIN_ROWS))
        continue;
      if (!quiet_between(pl, mm, i, -1)) continue;
      pl->resid_add[mm] = i;
      break;
    }
  }
}

/* SwiGLU regions a GEMV computes with the products they read (glu in
 * cu_gemv_args): an ElementwiseRegion [act.silu(i0), bin.mul(s0, i1)]
 * without prologue over gate = i0 and up = i1, two products of one x
 * (DequantMatMuls, or MatMuls) by weights of one shape and dtype, each read
 * only by the region, with at most CU_GEMV_MAX_M rows and no residual add
 * of their own, and nothing launching between the first product and the
 * region but the second (so the launch may run at the first's place).
 * emit_glu_gemv checks the weights' layout and the buffers at lowering. */
static void mark_glu_regions(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *r = &g->nodes[i];
    if (r->op != RLX_OP_ElementwiseRegion || r->n_in != 2 || r->a.prologue != RLX_PROLOGUE_NONE ||
        r->a.chain.n != 2 || pl->folded[i] || pl->mem.view[i])
      continue;
    const rlx_region_step *s0 = &r->a.chain.s[0], *s1 = &r->a.chain.s[1];
    if (s0->kind != RLX_STEP_ACT || s0->op != RLX_ACT_SILU || s0->a != 0 || s1->kind != RLX_STEP_BIN ||
        s1->op != RLX_BIN_MUL || !((s1->a == -1 && s1->b == 1) || (s1->a == 1 && s1->b == -1)))
      continue;
    const int gi = r->in[0], ui = r->in[1];
    const ir_node *gate = &g->nodes[gi], *up = &g->nodes[ui];
    if (gi == ui || gate->op != up->op || (gate->op != RLX_OP_MatMul && gate->op != RLX_OP_DequantMatMul) ||
        gate->in[0] != up->in[0] || uses[gi] != 1 || uses[ui] != 1 || pl->folded[gi] || pl->folded[ui] ||
        pl->resid_add[gi] >= 0 || pl->resid_add[ui] >= 0)
      continue;
    const ir_type *wg = ir_in(g, gate, 1), *wu = ir_in(g, up, 1);
    if (wg->dtype != wu->dtype || !ir_shape_eq(&wg->shape, &wu->shape) || wg->shape.rank != 2 ||
        !ir_shape_eq(&gate->out[0].shape, &r->out[0].shape) || !ir_shape_eq(&up->out[0].shape, &r->out[0].shape) ||
        numel_of(&r->out[0]) / wg->shape.d[gate->op == RLX_OP_DequantMatMul ? 0 : 1] > CU_GEMV_MAX_M)
      continue;
    if (quiet_between(pl, gi < ui ? gi : ui, i, gi < ui ? ui : gi)) pl->glu_region[gi] = pl->glu_region[ui] = i;
  }
}

/* Casts an UpdateSlice can do as it copies (cu_copy_args.convert): one
 * of F32/F16/BF16 to another, read only by the UpdateSlice as its update,
 * with nothing launching between the two (so the Cast's input is intact
 * when the copy runs). cast_absorbed checks the buffers at lowering. */
static int is_half_or_f32(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16; }
static void mark_cast_updates(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *u = &g->nodes[i];
    if (u->op != RLX_OP_UpdateSlice || pl->folded[i] || pl->mem.view[i]) continue;
    const int c = u->in[1];
    const ir_node *cast = &g->nodes[c];
    if (cast->op != RLX_OP_Cast || uses[c] != 1 || u->in[0] == c || u->in[2] == c || pl->folded[c] ||
        pl->mem.view[c] || !is_half_or_f32(ir_in(g, cast, 0)->dtype) || !is_half_or_f32(cast->out[0].dtype) ||
        ir_in(g, cast, 0)->dtype == cast->out[0].dtype)
      continue;
    if (quiet_between(pl, c, i, -1)) pl->cast_into[c] = i;
  }
}

/* Ropes by tables whose x is a product (MatMul, DequantMatMul) that
 * only the Rope reads: at decode rows the product's GEMV launch may write
 * the rotated values instead (join_gemv_rope decides at lowering, where
 * it knows the launch and the buffers). */
static void mark_gemv_ropes(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op != RLX_OP_Rope || n->n_in != 3 || pl->folded[i] || pl->mem.view[i]) continue;
    const int x = n->in[0];
    const ir_node *p = &g->nodes[x];
    if ((p->op == RLX_OP_MatMul || p->op == RLX_OP_DequantMatMul) && uses[x] == 1 && !pl->folded[x] &&
        !pl->mem.view[x] && pl->resid_add[x] < 0)
      pl->rope_gemv[i] = 1;
  }
}

/* RmsNorms (and FusedResidualRmsNorms without the sum as an output) of
 * decode rows read only by DequantMatMuls on the integer path, with those
 * products the next launching nodes: the x quantization of the first
 * product normalizes the rows itself (cu_quant_x's has_norm), the others
 * reuse its levels, and the norm neither launches nor gets a buffer
 * (skip). The norm's inputs are then read at the first product's place,
 * where nothing has run since the norm's. */
static void mark_norm_quant(cuda_plan *pl, const int *uses) {
  const rlx_graph *g = pl->g;
  if (pl->qmm_exact) return;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if ((n->op != RLX_OP_RmsNorm && n->op != RLX_OP_FusedResidualRmsNorm) || n->n_out != 1 || pl->folded[i] ||
        pl->mem.view[i] || uses[i] < 1)
      continue;
    const ir_type *x = ir_in(g, n, 0);
    const rlx_dtype t = x->dtype;
    const int64_t len = x->shape.rank ? x->shape.d[x->shape.rank - 1] : 0;
    if ((t != RLX_F32 && t != RLX_F16 && t != RLX_BF16) || n->out[0].dtype != t || len < 32 || len % 32 ||
        (n->op == RLX_OP_RmsNorm && n->a.axis != x->shape.rank - 1) || numel_of(x) / len > CU_QMM_MAX_M)
      continue;
    int found = 0, ok = 1;
    for (int j = i + 1; ok && j < g->n_nodes && found < uses[i]; j++) {
      const ir_node *c = &g->nodes[j];
      int reads = 0;
      for (int k = 0; k < c->n_in; k++) reads += c->in[k] == i;
      if (reads) {
        ok = c->op == RLX_OP_DequantMatMul && reads == 1 && c->in[0] == i && !pl->folded[j] &&
             cu_quant_supported(ir_in(g, c, 1)->dtype);
        found += reads;
      } else {
        ok = launches_nothing(pl, j);
      }
    }
    if (ok && found == uses[i]) pl->skip[i] = 1;
  }
}

static rlx_status alloc_dev(void **p, size_t bytes, const char *what) {
  cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *p = NULL;
    return rlx_set_error(RLX_ERR_NOMEM, "CUDA: cannot allocate %zu bytes of device memory for %s: %s", bytes, what,
                         cudaGetErrorString(e));
  }
  return RLX_OK;
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
static rlx_status plan_staged_inputs(cuda_plan *pl) {
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
  rlx_status st = alloc_dev((void **)&pl->in_dev, pl->in_bytes, "the staged inputs");
  if (!st) st = alloc_pinned(&pl->in_host, pl->in_bytes);
  if (!st) memset(pl->in_host, 0, pl->in_bytes);
  return st;
}

/* The outputs copied to out_host at the end of each run (their device
 * addresses known), as many as fit STAGE_OUT_MAX. */
static rlx_status plan_output_copies(cuda_plan *pl) {
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

static rlx_status cuda_compile(const rlx_backend *b, const rlx_graph *g, const rlx_options *opt, void *store,
                               void **out) {
  (void)b, (void)opt;
  *out = NULL;
  if (!rlx_cuda_available()) return rlx_set_error(RLX_ERR_DEVICE, "CUDA: no CUDA device is present");
  cuda_plan *pl = calloc(1, sizeof *pl);
  if (!pl) return rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory");
  pl->g = g;
  pl->store = store;
  pl->use_graph = ir_env_flag("RLX_CUDA_GRAPH", 1);
  pl->tf32 = ir_env_flag("RLX_CUDA_TF32", 0);
  pl->attn_exact = ir_env_flag("RLX_CUDA_ATTN_EXACT", 0);
  pl->attn_no_cluster = !ir_env_flag("RLX_CUDA_ATTN_CLUSTER", 1);
  const char *tile = getenv("RLX_CUDA_ATTN_TILE"); /* a number, not a switch */
  pl->attn_tile = tile && (!strcmp(tile, "64") || !strcmp(tile, "128")) ? atoi(tile) : 0;
  pl->no_gemv = !ir_env_flag("RLX_CUDA_GEMV", 1);
  pl->qmm_exact = ir_env_flag("RLX_QMATMUL_REF", 0); /* the CPU backend's switch */
  pl->pdl = ir_env_flag("RLX_CUDA_PDL", 1);
  pl->gemv_norm = ir_env_flag("RLX_CUDA_GEMV_NORM", 1);
  pl->profile = ir_env_flag("RLX_CUDA_PROFILE", 0);
  pl->keep_state = ir_env_flag("RLX_CUDA_KEEP_STATE", 1);
  if (pl->profile) pl->use_graph = 0;
  const size_t n_nodes = (size_t)g->n_nodes + 1;
  rlx_status st = RLX_OK;
  int *uses = NULL;
  uint8_t *outside = NULL;
  uint64_t *fold_key = NULL;
  pl->leaf_dev = calloc(n_nodes, sizeof *pl->leaf_dev);
  pl->leaf_bytes = calloc(n_nodes, sizeof *pl->leaf_bytes);
  pl->leaf_version = calloc(n_nodes, sizeof *pl->leaf_version);
  pl->entry = calloc(n_nodes, sizeof *pl->entry);
  pl->folded_dev = calloc(n_nodes, sizeof *pl->folded_dev);
  pl->folded = calloc(n_nodes, 1);
  pl->skip = calloc(n_nodes, 1);
  pl->resid_add = malloc(n_nodes * sizeof *pl->resid_add);
  pl->glu_region = malloc(n_nodes * sizeof *pl->glu_region);
  pl->cast_into = malloc(n_nodes * sizeof *pl->cast_into);
  pl->rope_gemv = calloc(n_nodes, 1);
  pl->add_done = calloc(n_nodes, 1);
  pl->slot = calloc(n_nodes * IR_MAX_OUTPUTS, sizeof *pl->slot);
  uses = ir_use_counts(g);
  outside = calloc(n_nodes, 1);
  fold_key = malloc(n_nodes * sizeof *fold_key);
  if (!pl->leaf_dev || !pl->leaf_bytes || !pl->leaf_version || !pl->entry || !pl->folded_dev || !pl->folded || !pl->skip ||
      !pl->resid_add || !pl->glu_region || !pl->cast_into || !pl->rope_gemv || !pl->add_done || !pl->slot || !uses || !outside || !fold_key) {
    st = rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory");
    goto fail;
  }
  /* Folded results have buffers of their own and absorbed transposes none:
   * the arena leaves both out (it held a weight-sized hole per plan). */
  mark_folded(pl);
  mark_absorbed(pl, uses);
  for (int i = 0; i < g->n_nodes; i++) outside[i] = pl->folded[i] || pl->skip[i];
  if (pl->store) folded_store_keys(g, fold_key);
  if ((st = plan_arena_offsets(g, outside, &pl->mem))) goto fail;
  for (int i = 0; i < g->n_nodes; i++)
    if (pl->mem.view[i]) pl->skip[i] = 0; /* a view names its input's bytes: nothing to absorb */
  cudaError_t e = cudaStreamCreateWithFlags(&pl->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    pl->stream = NULL;
    st = cuda_fail(e, "cudaStreamCreate");
    goto fail;
  }
  if ((st = alloc_dev((void **)&pl->arena, pl->mem.arena_bytes, "the arena"))) goto fail;
  if ((st = alloc_dev((void **)&pl->err_dev, sizeof *pl->err_dev, "the error word"))) goto fail;
  if ((e = cudaHostAlloc((void **)&pl->err_host, sizeof *pl->err_host, cudaHostAllocDefault)) != cudaSuccess) {
    pl->err_host = NULL;
    st = cuda_fail(e, "cudaHostAlloc");
    goto fail;
  }
  memset(pl->err_host, 0, sizeof *pl->err_host);
  if ((st = plan_staged_inputs(pl))) goto fail;
  mark_norm_quant(pl, uses);
  for (size_t i = 0; i < n_nodes; i++) pl->resid_add[i] = -1;
  if (ir_env_flag("RLX_CUDA_RESIDUAL_GEMM", 1)) mark_residual_adds(pl, uses);
  for (size_t i = 0; i < n_nodes; i++) pl->glu_region[i] = -1;
  if (ir_env_flag("RLX_CUDA_GLU_GEMV", 1)) mark_glu_regions(pl, uses);
  for (size_t i = 0; i < n_nodes; i++) pl->cast_into[i] = -1;
  mark_cast_updates(pl, uses);
  if (ir_env_flag("RLX_CUDA_GEMV_ROPE", 1)) mark_gemv_ropes(pl, uses);
  /* device addresses of every output */
  int any_gemm = 0;
  size_t scratch = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    const size_t slot0 = (size_t)i * IR_MAX_OUTPUTS;
    if (ir_ops[n->op].category == RLX_CAT_LEAF) {
      size_t bytes = rlx_dtype_nbytes(n->out[0].dtype, ir_numel(&n->out[0].shape));
      pl->leaf_bytes[i] = bytes;
      if (bytes && n->op == RLX_OP_Param && pl->store) {
        if ((st = cuda_store_get(pl->store, n->a.name, bytes, &pl->entry[i]))) goto fail;
        pl->leaf_dev[i] = pl->entry[i]->dev;
        pl->store_bytes += bytes;
      } else if (pl->in_off[i] != SIZE_MAX) {
        pl->leaf_dev[i] = pl->in_dev + pl->in_off[i];
      } else if (bytes) {
        if ((st = alloc_dev(&pl->leaf_dev[i], bytes, n->a.name ? n->a.name : "a constant"))) goto fail;
        if (n->op == RLX_OP_Constant &&
            (e = cudaMemcpy(pl->leaf_dev[i], n->a.data.p, bytes, cudaMemcpyHostToDevice)) != cudaSuccess) {
          st = cuda_fail(e, "uploading a constant");
          goto fail;
        }
      }
      pl->slot[slot0] = pl->leaf_dev[i];
      continue;
    }
    if (pl->skip[i]) continue; /* read through by its matmuls: no buffer */
    if (pl->mem.view[i]) { /* the input's bytes at the planner's offset */
      size_t in_slot = plan_input_slot(n, 0);
      pl->slot[slot0] = pl->slot[in_slot] ? pl->slot[in_slot] + (pl->mem.offset[slot0] - pl->mem.offset[in_slot]) : NULL;
      continue;
    }
    if (pl->folded[i]) {
      size_t total = 0, offs[IR_MAX_OUTPUTS];
      for (int o = 0; o < n->n_out; o++) {
        offs[o] = total;
        total += (rlx_dtype_nbytes(n->out[o].dtype, ir_numel(&n->out[o].shape)) + RLX_ARENA_ALIGN - 1) /
                 RLX_ARENA_ALIGN * RLX_ARENA_ALIGN;
      }
      if (pl->store) {
        char name[40];
        snprintf(name, sizeof name, "rlx.folded.%016llx", (unsigned long long)fold_key[i]);
        if ((st = cuda_store_get(pl->store, name, total, &pl->entry[i]))) goto fail;
        pl->folded_dev[i] = pl->entry[i]->dev;
        pl->store_bytes += total;
      } else if ((st = alloc_dev(&pl->folded_dev[i], total, "a folded parameter"))) {
        goto fail;
      }
      for (int o = 0; o < n->n_out; o++) pl->slot[slot0 + o] = (uint8_t *)pl->folded_dev[i] + offs[o];
    } else { /* in the arena, or in a leaf's bytes (the UpdateSlice of an in-place Assign) */
      for (int o = 0; o < n->n_out; o++) {
        const int32_t leaf = pl->mem.leaf[slot0 + o];
        pl->slot[slot0 + o] =
            (leaf >= 0 ? (uint8_t *)pl->leaf_dev[leaf] : pl->arena) + pl->mem.offset[slot0 + o];
      }
    }
    any_gemm |= n->op == RLX_OP_MatMul || n->op == RLX_OP_FusedMatMulBiasAct || n->op == RLX_OP_DequantMatMul;
    size_t q = quant_scratch_bytes(pl, n);
    scratch = q > scratch ? q : scratch;
  }
  if ((st = plan_output_copies(pl))) goto fail;
  if (any_gemm && (st = alloc_dev(&pl->workspace, CUDA_GEMM_WORKSPACE, "the cuBLASLt workspace"))) goto fail;
  if (scratch && (st = alloc_dev(&pl->scratch, scratch, "dequantized weights"))) goto fail;
  pl->scratch_bytes = scratch;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (ir_ops[n->op].category == RLX_CAT_LEAF || pl->mem.view[i] || pl->skip[i] || pl->add_done[i]) continue;
    if ((st = lower_node(pl, n))) goto fail;
  }
  if (pl->profile) {
    pl->events = calloc((size_t)pl->n_steps + 1, sizeof *pl->events);
    pl->step_ms = calloc((size_t)pl->n_steps + 1, sizeof *pl->step_ms);
    if (!pl->events || !pl->step_ms) {
      free(pl->events), pl->events = NULL;
      st = rlx_set_error(RLX_ERR_NOMEM, "CUDA plan: out of memory");
      goto fail;
    }
    for (int i = 0; i <= pl->n_steps; i++) cudaEventCreate(&pl->events[i]);
  }
  for (int i = 0; i < pl->n_steps; i++) pl->launches += !pl->steps[i].folded;
  if (pl->use_graph && (pl->has_err || pl->launches) && (st = capture(pl))) goto fail;
  free(uses);
  free(outside);
  free(fold_key);
  *out = pl;
  return RLX_OK;
fail:
  free(uses);
  free(outside);
  free(fold_key);
  cuda_free(pl);
  return st;
}

static rlx_status cuda_run(void *p, const rlx_bindings *bind) {
  cuda_plan *pl = p;
  const rlx_graph *g = pl->g;
  cudaError_t e;
  int params_changed = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if ((n->op != RLX_OP_Input && n->op != RLX_OP_Param) || !pl->leaf_dev[i]) continue;
    const uint64_t v = bind->leaf_version ? bind->leaf_version[i] : 0;
    /* the buffer's version: the store's when shared (another plan may have copied v in already) */
    uint64_t *held = pl->entry[i] ? &pl->entry[i]->version : &pl->leaf_version[i];
    params_changed |= n->op == RLX_OP_Param && (v == 0 || v != pl->leaf_version[i]);
    if (v == 0 || v != *held) {
      const void *src = bind->leaf_data[i];
      if (!src) return rlx_set_error(RLX_ERR_INVALID, "CUDA: %s \"%s\" has no data", ir_ops[n->op].name, n->a.name);
      if (pl->in_off[i] != SIZE_MAX) /* the replay copies it over */
        memcpy(pl->in_host + pl->in_off[i], src, pl->leaf_bytes[i]);
      else if ((e = cudaMemcpyAsync(pl->leaf_dev[i], src, pl->leaf_bytes[i], cudaMemcpyHostToDevice, pl->stream)) !=
               cudaSuccess)
        return cuda_fail(e, "uploading a leaf");
      *held = v;
    }
    pl->leaf_version[i] = v;
  }
  if (params_changed || !pl->folded_ready) {
    if (pl->has_err && (e = cudaMemsetAsync(pl->err_dev, 0, sizeof *pl->err_dev, pl->stream)) != cudaSuccess)
      return cuda_fail(e, "cudaMemsetAsync");
    for (int i = 0; i < pl->n_steps; i++) {
      if (!pl->steps[i].folded) continue;
      rlx_status st = launch(pl, &pl->steps[i]);
      if (st) return st;
    }
    if (pl->has_err) {
      if ((e = cudaMemcpyAsync(pl->err_host, pl->err_dev, sizeof *pl->err_dev, cudaMemcpyDeviceToHost, pl->stream)) !=
              cudaSuccess ||
          (e = cudaStreamSynchronize(pl->stream)) != cudaSuccess)
        return cuda_fail(e, "folding parameters");
      rlx_status st = check_device_error(pl);
      if (st) return st;
    }
    pl->folded_ready = 1;
  }
  if (pl->exec) {
    if ((e = cudaGraphLaunch(pl->exec, pl->stream)) != cudaSuccess) return cuda_fail(e, "cudaGraphLaunch");
  } else {
    rlx_status st = issue_run(pl);
    if (st) return st;
  }
  if ((e = cudaStreamSynchronize(pl->stream)) != cudaSuccess) return cuda_fail(e, "running the plan");
  if (pl->events) {
    profile_collect(pl);
    if (pl->profiled_runs == PROFILE_RUNS) profile_print(pl);
  }
  return check_device_error(pl);
}

/* A copy on the plan's stream, waited for. */
static rlx_status copy_now(cuda_plan *pl, void *dst, const void *src, size_t nbytes, enum cudaMemcpyKind kind,
                           const char *what) {
  cudaError_t e = cudaMemcpyAsync(dst, src, nbytes, kind, pl->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(pl->stream);
  return e == cudaSuccess ? RLX_OK : cuda_fail(e, what);
}

static rlx_status cuda_read(void *p, rlx_node n, int index, void *dst, size_t nbytes) {
  cuda_plan *pl = p;
  size_t slot = (size_t)n * IR_MAX_OUTPUTS + (size_t)index;
  if (pl->mem.offset[slot] == SIZE_MAX || pl->mem.nbytes[slot] != nbytes || (nbytes && !pl->slot[slot]))
    return rlx_set_error(RLX_ERR_INTERNAL, "CUDA plan: node %d output %d has no buffer of %zu bytes", (int)n, index,
                         nbytes);
  if (!nbytes) return RLX_OK;
  for (int i = 0; i < pl->n_out_copies; i++)
    if (pl->out_copy[i].slot == slot && pl->out_copy[i].bytes == nbytes) { /* copied by the run */
      memcpy(dst, pl->out_host + pl->out_copy[i].off, nbytes);
      return RLX_OK;
    }
  return copy_now(pl, dst, pl->slot[slot], nbytes, cudaMemcpyDeviceToHost, "reading an output");
}

/* keep_assigned: the value of Assign a stays in the param's device buffer
 * (in place already, else copied there), and the plan records `version`
 * as that buffer's, so the next run does not copy the host's older bytes
 * over it. Nothing in the plan was folded from an assigned param
 * (mark_folded), so nothing else needs recomputing. */
static int cuda_keep_assigned(void *p, rlx_node a, uint64_t version) {
  cuda_plan *pl = p;
  const rlx_graph *g = pl->g;
  if (!pl->keep_state || a < 0 || a >= g->n_nodes || g->nodes[a].op != RLX_OP_Assign) return 0;
  const rlx_node param = g->nodes[a].in[0];
  const uint8_t *value = pl->slot[(size_t)a * IR_MAX_OUTPUTS];
  if (g->nodes[param].op != RLX_OP_Param || !pl->leaf_dev[param] || !value) return 0;
  if (value != pl->leaf_dev[param] &&
      copy_now(pl, pl->leaf_dev[param], value, pl->leaf_bytes[param], cudaMemcpyDeviceToDevice, "keeping a param")) {
    (void)cudaGetLastError();
    return 0; /* the session reads it back instead, and reports a failure there */
  }
  pl->leaf_version[param] = version;
  if (pl->entry[param]) pl->entry[param]->version = version;
  return 1;
}

/* share_kept: two plans of one session read a param from the same store
 * buffer, which holds the kept value already; `to` only records that it
 * has seen that version (so it neither copies it in nor refolds). */
static int cuda_share_kept(void *from, rlx_node p_from, void *to, rlx_node p_to) {
  const cuda_plan *a = from;
  cuda_plan *b = to;
  if (p_from < 0 || p_from >= a->g->n_nodes || p_to < 0 || p_to >= b->g->n_nodes) return 0;
  const cuda_store_entry *e = a->entry[p_from];
  if (!e || e != b->entry[p_to]) return 0;
  b->leaf_version[p_to] = e->version;
  return 1;
}

static void *cuda_store_new_any(void) { return cuda_store_new(); }
static void cuda_store_free_any(void *store) { cuda_store_free(store); }

static rlx_status cuda_fetch_param(void *p, rlx_node param, void *dst, size_t nbytes) {
  cuda_plan *pl = p;
  if (param < 0 || param >= pl->g->n_nodes || !pl->leaf_dev[param] || pl->leaf_bytes[param] != nbytes)
    return rlx_set_error(RLX_ERR_INTERNAL, "CUDA plan: node %d holds no param of %zu bytes", (int)param, nbytes);
  return copy_now(pl, dst, pl->leaf_dev[param], nbytes, cudaMemcpyDeviceToHost, "reading a kept param");
}

static void cuda_memory_stats(const void *p, rlx_session_stats *st) {
  const cuda_plan *pl = p;
  const plan_memory *m = &pl->mem;
  st->arena_bytes = m->arena_bytes;
  st->naive_bytes = m->naive_bytes;
  st->peak_live_bytes = m->peak_live_bytes;
  st->views = m->n_views;
  st->in_place = m->n_inplace;
  st->device_launches = pl->launches;
  st->param_device_bytes = pl->store_bytes;
}

const rlx_backend rlx_cuda_backend = {"cuda",          cuda_claims,        cuda_compile,
                                      cuda_run,        cuda_read,          cuda_memory_stats,
                                      cuda_free,       cuda_keep_assigned, cuda_fetch_param,
                                      cuda_store_new_any, cuda_store_free_any, cuda_share_kept};
