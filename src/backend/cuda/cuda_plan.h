/* cuda_plan.h — the CUDA backend's plan (a segment of the graph lowered to
 * a list of launch steps over one device arena) and what the files that
 * build and run it share; internal to src/backend/cuda:
 *  - cuda_claims.c: which nodes the device takes;
 *  - cuda_lower.c: the step list, shared helpers, and a node to its op
 *    group's lowering (cuda_lower_elementwise.c, cuda_lower_layout.c,
 *    cuda_lower_reduce.c, cuda_lower_attention.c, cuda_lower_matmul.c,
 *    lower_spatial.c);
 *  - cuda_fuse.c: the backend's own fusions (their table, the patterns
 *    matched before lowering, the joins decided at lowering);
 *  - cuda_replay.c: launching the steps, capturing them into a CUDA graph,
 *    the pinned staging of small inputs and outputs, the profile;
 *  - cuda_backend.c: compile, run, read, free (the rlx_backend). */
#ifndef RLX_CUDA_PLAN_H
#define RLX_CUDA_PLAN_H

#include "../../pass/pass.h"
#include "../backend.h"
#include "../comm.h"
#include "cu_kernels.h"
#include "param_store.h"

#include <stddef.h>
#include <stdint.h>

/* The backend's own fusions (cuda_fuse.c: a row of its table each, with
 * its name, its match and its emit). */
typedef enum {
  CUDA_FUSE_NORM_QUANT,     /* an RmsNorm computed by the x quantization of the integer GEMVs after it */
  CUDA_FUSE_RESIDUAL_GEMM,  /* a residual add in its product's GEMM or GEMV epilogue */
  CUDA_FUSE_GLU_GEMV,       /* silu(x @ wg) * (x @ wu) as one GEMV launch */
  CUDA_FUSE_SWIGLU_QUANT,   /* a SwiGLU computed by the x quantization of the integer GEMVs after it */
  CUDA_FUSE_GEMV_ROPE,      /* a Rope (tables or positions) applied by its product's GEMV launch */
  CUDA_FUSE_CAST_UPDATE,    /* a float Cast done by the UpdateSlice copy that reads it */
  CUDA_FUSE_QMV_CACHE,      /* an UpdateSlice of a decode row done by the integer GEMV that computes the row */
  CUDA_FUSE_ATTN_CAST,      /* the Casts of a 16-bit attention's q and output done by the decode kernel */
  CUDA_FUSE_GEMV_NORM,      /* an RmsNorm computed by the GEMV launch after it */
  CUDA_FUSE_GEMV_SHARED_X,  /* products of one x (q, k, v) as segments of one GEMV launch */
  CUDA_FUSE_QMV_SHARED_X,   /* the same for the integer GEMV */
  CUDA_FUSE_ROPE_JOIN,      /* the Ropes of q and k in one launch */
  CUDA_FUSE_UPDATE_JOIN,    /* the K and V row copies into their caches in one launch */
  CUDA_FUSE_COUNT
} cuda_fusion;

/* What a lowering hands a fusion where the fusion may apply; each row of
 * the table reads the fields its comment names. */
typedef struct {
  cuda_gemm_desc *d;           /* a product (residual_gemm writes its c and resid; glu_gemv, gemv_norm, *_shared_x) */
  rlx_dtype w_dtype;           /* the product's weight dtype (glu_gemv, *_shared_x) */
  double alpha;                /* the product's activation alpha (gemv_shared_x) */
  const void *out;             /* the output the launch writes (gemv_norm) */
  void *args;                  /* the argument block: of the GEMV launch being made (gemv_norm), n's rope
                                  (gemv_rope, rope_join), the x quantization (norm_quant), n's attention
                                  (attn_cast) */
  size_t bytes;                /* a destination tensor's bytes (update_join) */
  struct cuda_step *joined;    /* out: the launch n joins (*_shared_x) */
  rlx_status st;               /* out: an error while emitting (glu_gemv) */
} cuda_fuse_site;

enum { ST_EW, ST_SWIGLU, ST_COPY, ST_FILL, ST_MEMCPY, ST_MEMSET, ST_GATHER, ST_IOTA, ST_ONE_HOT, ST_TRI, ST_REDUCE,
       ST_SOFTMAX, ST_NORM, ST_ROPE, ST_ATTN, ST_GEMM, ST_GEMV, ST_QMM, ST_DEQUANT, ST_QUANTIZE, ST_QUANT_X, ST_QMV,
       ST_ALL_REDUCE, ST_CONV, ST_POOL, ST_RESIZE, ST_GROUP_NORM };

typedef struct cuda_step {
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
   * replay (cuda_plan_staged_inputs, cuda_plan_output_copies; cuda_issue_run copies): a
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
  int *cast_into;              /* [n_nodes] of a Cast: the node that may do its conversion (-1: none): the
                                  UpdateSlice that reads it (as it copies), the Attention on either side of it */
  uint8_t *rope_gemv;          /* [n_nodes] of a Rope: its x is a product read only by it, which a GEMV launch
                                  may write rotated (emit_gemv_rope) */
  uint8_t *qmv_cache;          /* [n_nodes] of an UpdateSlice: its update (through a Cast it absorbs) is read by
                                  nothing else and is a DequantMatMul's output, or a Rope's marked rope_gemv,
                                  which the integer GEMV may write into the cache (emit_qmv_cache) */
  uint8_t *add_done;           /* [n_nodes] computed by another node's launch (no launch of its own): a residual
                                  add by its product's, a SwiGLU region and its second product by the first's */
  uint8_t **slot;              /* [n_nodes * IR_MAX_OUTPUTS] device address of every output */
  cuda_step *steps;
  int n_steps, cap_steps;
  int64_t launches;            /* steps a run issues (not folded): rlx_session_stats.device_launches */
  size_t store_bytes;          /* of the store entries it reads: rlx_session_stats.param_device_bytes */
  void *workspace;             /* cuBLASLt, shared by the plan's GEMMs */
  void *cudnn;                 /* the plan's cuDNN handle, on its stream (made by the first convolution) */
  void *conv_ws;               /* cuDNN's workspace, shared by the plan's convolutions (the largest need) */
  size_t conv_ws_bytes;
  void *scratch;               /* dequantized weights for large-M DequantMatMul, or quantized x for small M */
  size_t scratch_bytes;
  int qmm_exact;               /* RLX_QMATMUL_REF=1: small-M DequantMatMul in floats from x as given */
  int pdl;                     /* programmatic dependent launch of the kernels that take it (cu_kernels.h; RLX_CUDA_PDL=0: off) */
  int fuse;                    /* the backend's fusions are on (RLX_CUDA_FUSE, default 1) */
  int fused[CUDA_FUSE_COUNT];  /* how many times each was taken (RLX_TRACE) */
  /* whose quantized x the scratch holds (cuda_lower_quant reuses it for the next
   * product of the same x): valid, x's output slot, M, K, folded or not,
   * and where it left x's RmsNorm factor to the products (cu_qmv_args) */
  int qx_valid, qx_folded;
  size_t qx_slot;
  int64_t qx_M, qx_K;
  const float *qx_norm_ssq;
  float qx_norm_eps;
  /* the split-key attention's partial sums and counters, shared by the
   * plan's attentions that fit them (owned by the first one's step) */
  float *attn_part;
  unsigned *attn_count;
  size_t attn_part_floats, attn_counters;
  cu_error *err_dev, *err_host;
  int has_err, folded_ready, use_graph, tf32, attn_exact;
  int attn_no_cluster;         /* RLX_CUDA_ATTN_CLUSTER=0 */
  int attn_tile;               /* RLX_CUDA_ATTN_TILE: 64 or 128 (else 0) */
  int no_gemv;                 /* RLX_CUDA_GEMV=0: cuBLASLt for every product (the speed baseline) */
  cudaGraphExec_t exec;
  int device;                  /* rlx_options.device_index */
  rlx_comm *comm;              /* rlx_options.comm: the AllReduce steps' (NULL: none) */
  int collectives;             /* AllReduce steps over NCCL: a run waits with the communicator's timeout */
  /* RLX_CUDA_PROFILE=1 */
  int profile, profiled_runs;
  int keep_state;              /* keep_assigned takes Assign values (RLX_CUDA_KEEP_STATE, default 1) */
  cudaEvent_t *events;         /* [n_steps + 1]: before the first launch, after each */
  double *step_ms;             /* [n_steps] accumulated */
} cuda_plan;


/* The profile is printed after this many runs (or at free, if fewer ran):
 * plans can outlive their session in the compile cache. */
#define CUDA_PROFILE_RUNS 10

static inline size_t elem_size(rlx_dtype t) { return (size_t)ir_dtypes[t].size; }
static inline int64_t numel_of(const ir_type *t) { return ir_numel(&t->shape); }
static inline int is_block(rlx_dtype t) { return ir_is_block(t); }
static inline uint8_t *in_ptr(const cuda_plan *pl, const ir_node *n, int k) { return pl->slot[plan_input_slot(n, k)]; }
static inline uint8_t *out_ptr(const cuda_plan *pl, const ir_node *n) { return pl->slot[(size_t)n->id * IR_MAX_OUTPUTS]; }

/* Whether byte ranges [p, p + pn) and [q, q + qn) share a byte. */
static inline int ranges_overlap(const void *p, size_t pn, const void *q, size_t qn) {
  const uint8_t *a = p, *b = q;
  return a < b + qn && b < a + pn;
}

/* cuda_claims.c */
int cuda_claims(const rlx_backend *b, const rlx_graph *g, rlx_node id, char *why, size_t cap);

/* cuda_lower.c */
rlx_status cuda_fail(cudaError_t e, const char *what);
rlx_status cuda_nomem(const ir_node *n);
rlx_status cuda_alloc_dev(void **p, size_t bytes, const char *what);
cuda_step *cuda_new_step(cuda_plan *pl, int kind, const ir_node *n);
cuda_step *cuda_joinable_step(cuda_plan *pl, const ir_node *n, int kind);
void *cuda_new_args(cuda_step *s, size_t bytes);
rlx_status cuda_step_scratch(cuda_step *s, size_t floats, size_t counters, float **part, unsigned **count);
void cuda_contig_strides(int rank, const int64_t *d, int64_t *st);
void cuda_bcast_strides(const ir_shape *s, int r, const int64_t *dims, int64_t *st);
rlx_status cuda_lower_node(cuda_plan *pl, const ir_node *n);

/* the op groups' lowerings */
rlx_status cuda_lower_elementwise(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_region(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_swiglu(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_batch_norm(cuda_plan *pl, const ir_node *n);
rlx_status cuda_emit_bias_act(cuda_plan *pl, const ir_node *n, int act, double alpha, int read_out, const void *bias);
rlx_status cuda_lower_layout(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_reduce(cuda_plan *pl, const ir_node *n);
void cuda_norm_args(const cuda_plan *pl, const ir_node *n, cu_norm_args *a);
rlx_status cuda_lower_norm(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_rope(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_attention(cuda_plan *pl, const ir_node *n);
const void *cuda_matmul_b(cuda_plan *pl, const ir_node *n, int k, int *b_trans);
rlx_status cuda_lower_matmul(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_fused_matmul(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_quant(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_all_reduce(cuda_plan *pl, const ir_node *n);
rlx_status cuda_lower_spatial(cuda_plan *pl, const ir_node *n);
rlx_status cuda_emit_conv_epilogue(cuda_plan *pl, const ir_node *n, const void *bias, const void *resid, int act,
                                   double alpha, double lo, double hi);

/* nccl_comm.c */
rlx_status cuda_nccl_all_reduce(rlx_comm *c, const void *x, void *y, int64_t n, rlx_dtype t, cudaStream_t stream);
rlx_status cuda_nccl_wait(rlx_comm *c, cudaStream_t stream);
size_t cuda_quant_scratch_bytes(const cuda_plan *pl, const ir_node *n);

/* cuda_fuse.c: the fusions' matches, run before lowering (none under
 * RLX_CUDA_FUSE=0), and the one entry through which a lowering offers node
 * n to fusion f at the site s describes (0: not taken, or fusions off). */
void cuda_fuse_match(cuda_plan *pl, const int *uses);
int cuda_fuse(cuda_plan *pl, cuda_fusion f, const ir_node *n, cuda_fuse_site *s);
void cuda_fuse_trace(const cuda_plan *pl);
int cuda_norm_overlaps(const cu_gemv_args *a, const void *p, size_t bytes);

/* cuda_replay.c */
rlx_status cuda_launch(cuda_plan *pl, const cuda_step *s);
rlx_status cuda_issue_run(cuda_plan *pl);
rlx_status cuda_capture(cuda_plan *pl);
rlx_status cuda_check_device_error(const cuda_plan *pl);
void cuda_profile_collect(cuda_plan *pl);
void cuda_profile_print(const cuda_plan *pl);
rlx_status cuda_plan_staged_inputs(cuda_plan *pl);
rlx_status cuda_plan_output_copies(cuda_plan *pl);

#endif
