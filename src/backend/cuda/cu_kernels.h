/* cu_kernels.h — internal interface of the CUDA backend: the argument blocks the
 * C lowering (lower_*.c, cuda_matmul.c) fills at compile time and the
 * launchers of the kernels (*.cu) that consume them.
 *
 * Every argument block holds final device pointers: a plan's arena, its
 * leaf buffers and its folded-parameter buffers are allocated at compile
 * time, so a block is built once and the same launch can be recorded into
 * a CUDA graph or issued op by op (RLX_CUDA_GRAPH=0) with identical
 * results. Blocks are passed to kernels by value (__grid_constant__), which
 * is also what a graph capture copies.
 *
 * Dtypes are rlx_dtype values. Strides and offsets are in elements unless
 * named *_bytes. Launchers return a cudaError_t (0 = cudaSuccess) from the
 * launch; an empty problem launches nothing.
 *
 * A block's pdl field (the kernels of a decode step have one): launch with
 * programmatic dependent launch, so the kernel starts while the one before
 * it ends (cu_pdl_chain in cu_common.cuh); the plan sets it (RLX_CUDA_PDL=0
 * turns it off).
 */
#ifndef RLX_CU_KERNELS_H
#define RLX_CU_KERNELS_H

#include "rlx.h"

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CU_MAX_RANK 8
#define CU_ROPE_MAX_PAIRS 128 /* rotated pairs of a head: n_rot <= 256 */

/* ---------------------------------------------------------------- run-time errors */

/* Data errors found on the device (an out-of-range Gather index, an
 * UpdateSlice start past the end): the first one wins (atomicCAS on code)
 * and the host turns it into a status after the run. */
enum { CU_ERR_NONE = 0, CU_ERR_INDEX = 1, CU_ERR_START = 2 };
typedef struct {
  int code;
  int node;            /* node id of the kernel that failed */
  long long value;     /* the offending index or start */
  long long element;   /* its position in the index tensor */
  long long limit;     /* the bound it broke */
} cu_error;

/* ---------------------------------------------------------------- elementwise programs */

/* One kernel serves every elementwise op: Activation, Binary, Compare,
 * Where, Cast, Clamp, ElementwiseRegion (and its batch form), FusedSwiGLU,
 * BatchNorm. The lowering turns each into a short program of steps that a
 * templated interpreter evaluates per output element (k_elementwise.cu,
 * which says why this beats generating source per region). */
#define CU_EW_MAX_IN 16
#define CU_EW_MAX_STEPS 32

enum { CU_STEP_ACT, CU_STEP_BIN, CU_STEP_CMP, CU_STEP_CAST, CU_STEP_WHERE, CU_STEP_CLAMP,
       CU_STEP_CONST };

typedef struct {
  uint8_t kind;        /* CU_STEP_* */
  uint8_t op;          /* rlx_act / rlx_binop / rlx_cmpop */
  uint8_t dtype;       /* result dtype: every step is rounded (or wrapped) to it */
  uint8_t in_dtype;    /* dtype of operand a (decides float or integer arithmetic) */
  int8_t a, b, c;      /* operands: k >= 0 program input k, k < 0 step -k-1 */
  uint8_t pad_;
  double f0, f1;       /* leaky_relu alpha; clamp lo, hi (floats); const value */
  long long i0, i1;    /* clamp lo, hi (integers) */
} cu_ew_step;

typedef struct {
  int rank;                              /* of the (coalesced) output index space */
  int n_in, n_steps;
  int contiguous;                        /* every input is read at the output's flat index */
  int64_t numel;
  int64_t dims[CU_MAX_RANK];
  const void *in[CU_EW_MAX_IN];
  int64_t stride[CU_EW_MAX_IN][CU_MAX_RANK]; /* 0: broadcast along that dim */
  uint8_t half[CU_EW_MAX_IN];            /* bit d: index along dim d is halved (resize 2x prologue) */
  uint8_t in_dtype[CU_EW_MAX_IN];
  uint8_t out_dtype;
  int pdl;
  void *out;
  cu_ew_step s[CU_EW_MAX_STEPS];
  /* set by cu_ew_launch for the float fast path: input k is read at the
   * flat index (bcast_inner 0) or at (i / bcast_inner) % bcast_outer, a
   * broadcast along one dim (a bias over channels, a scalar) */
  uint32_t bcast_inner[CU_EW_MAX_IN], bcast_outer[CU_EW_MAX_IN];
} cu_ew_args;

int cu_ew_launch(const cu_ew_args *a, cudaStream_t st);
/* FusedSwiGLU over rows of x [rows, 2n] (F32/F16/BF16) -> out [rows, n] of out_dtype. */
int cu_swiglu_launch(const void *x, int x_dtype, void *out, int out_dtype, int64_t rows, int64_t n, int pdl,
                     cudaStream_t st);

/* ---------------------------------------------------------------- data movement */

/* dst[dst_off + sum i_k dst_stride_k] = src[sum (i_k >> shift_k) src_stride_k]
 * for every multi-index i of dims, elements of es bytes (1, 2, 4 or 8).
 * With dyn (UpdateSlice), dst_off gains dyn_mul * start, start read from
 * dyn (I32 or I64 scalar) and checked against [0, dyn_max]. With convert
 * (the Cast an UpdateSlice absorbed), src holds src_dtype and dst
 * dst_dtype (two of F32/F16/BF16), rounded to nearest even as Cast does.
 * With src2, a second UpdateSlice of the same geometry shares the launch
 * (a layer's V row after its K row): its update src2, destination dst2
 * (same dst_off) and start dyn2, checked for node2. */
typedef struct {
  int rank, es;
  int64_t numel;
  int64_t dims[CU_MAX_RANK];
  int64_t src_stride[CU_MAX_RANK], dst_stride[CU_MAX_RANK];
  uint8_t shift[CU_MAX_RANK];
  const void *src;
  void *dst;
  int64_t dst_off;
  const void *dyn;
  int dyn_dtype, node, pdl;
  int64_t dyn_mul, dyn_max;
  cu_error *err;
  int convert, src_dtype, dst_dtype;
  const void *src2, *dyn2;
  void *dst2;
  int node2;
} cu_copy_args;

int cu_copy_launch(const cu_copy_args *a, cudaStream_t st);
/* numel elements of es bytes, each set to the low es bytes of pattern. */
int cu_fill_launch(void *dst, int es, int64_t numel, uint64_t pattern, cudaStream_t st);

/* Gather: out[o, j, e] = table[o, idx[j], e] over [outer, len, inner]
 * (elements of es bytes); idx of idx_dtype (integer, or float truncated). */
typedef struct {
  const void *table, *idx;
  void *out;
  int es, idx_dtype, node;
  int64_t outer, len, inner, n_idx;
  cu_error *err;
} cu_gather_args;
int cu_gather_launch(const cu_gather_args *a, cudaStream_t st);

/* Iota: out[i] = (i / inner) % len in dtype. OneHot: out[r*depth + k] =
 * idx[r] == k (one_bits / zero) . Tri: out = x with the lower (upper)
 * triangle kept over [mats, rows, cols]. */
int cu_iota_launch(void *out, int dtype, int64_t numel, int64_t len, int64_t inner, cudaStream_t st);
int cu_one_hot_launch(const void *idx, int idx_dtype, void *out, int es, uint64_t one_bits,
                      int64_t n_idx, int64_t depth, cudaStream_t st);
int cu_tri_launch(const void *x, void *out, int es, int64_t mats, int64_t rows, int64_t cols,
                  int upper, int64_t k, cudaStream_t st);

/* ---------------------------------------------------------------- reductions */

/* Reduce / ArgMax / ArgMin / Cumsum: output element o reads the input at
 * sum kept_k * kstride_k + sum red_r * rstride_r. */
enum { CU_RED_REDUCE, CU_RED_ARGMAX, CU_RED_ARGMIN, CU_RED_CUMSUM };
typedef struct {
  int kind, op;                  /* op: rlx_reduce_op for CU_RED_REDUCE */
  int x_dtype, out_dtype;
  int krank, rrank;
  int exclusive, reverse;        /* cumsum */
  int64_t n_out, count;          /* outputs, reduced elements per output */
  int64_t kdims[CU_MAX_RANK], kstride[CU_MAX_RANK];
  int64_t rdims[CU_MAX_RANK], rstride[CU_MAX_RANK];
  int64_t cum_stride;            /* cumsum: element stride along the axis (out = x layout) */
  const void *x;
  void *out;
} cu_reduce_args;
int cu_reduce_launch(const cu_reduce_args *a, cudaStream_t st);

/* Softmax / LogSoftmax over rows (outer, len, inner): element j of row
 * (o, i) at (o*len + j)*inner + i. */
int cu_softmax_launch(const void *x, void *out, int dtype, int64_t outer, int64_t len,
                      int64_t inner, int log_softmax, cudaStream_t st);

/* LayerNorm / RmsNorm (and the fused residual forms) over rows of len:
 * row = x (+ res) (+ bias), then (row - mean) / sqrt(var + eps) (layer) or
 * row / sqrt(mean(row^2) + eps) (rms), * gamma + beta. res, bias may be NULL. */
typedef struct {
  const void *x, *res, *bias, *gamma, *beta;
  void *out;
  int dtype, rms, pdl;
  int64_t rows, len;
  double eps;
} cu_norm_args;
int cu_norm_launch(const cu_norm_args *a, cudaStream_t st);

/* ---------------------------------------------------------------- attention and positions */

typedef struct {
  const void *x;
  void *out;
  int dtype, pdl;
  int64_t B, S, H, D, n_rot;
  int neox;
  const void *pos;          /* (x, pos): I32/I64 [S] or [B, S]; NULL with tables */
  int pos_dtype, pos_batched;
  const void *cos, *sin;    /* (x, cos, sin): [S, n_rot/2] or [B, S, n_rot/2] */
  int table_dtype, table_batched;
  double base, scale;
  /* (x, pos): base^(-2i / n_rot) / scale of pair i, computed once at
   * lowering (a double pow per thread was most of a decode step's rope) */
  double freq[CU_ROPE_MAX_PAIRS];
  /* a second tensor [B, S, H2 * D] rotated by the same positions (k after
   * q), its heads after x's in the launch; H2 = 0: none */
  const void *x2;
  void *out2;
  int64_t H2;
} cu_rope_args;
int cu_rope_launch(const cu_rope_args *a, cudaStream_t st);

/* flash_tc shapes: 64 query rows a block (16 a warp), 128 (32 a warp) */
enum { CU_ATTN_TILE_64, CU_ATTN_TILE_128 };
typedef struct {
  const void *q, *k, *v;
  void *out;
  const float *mask;        /* custom mask, strides over [B, H, S, T] (0: broadcast) */
  int64_t mask_stride[4];
  int dtype, mask_kind;
  int kv_dtype;             /* k and v: dtype, or RLX_Q8_0 / RLX_Q4_0 rows of blocks of 32 along D (dtype F32) */
  int force_exact;          /* RLX_CUDA_ATTN_EXACT=1: the exact kernel even where tensor cores apply */
  int no_cluster;           /* RLX_CUDA_ATTN_CLUSTER=0: split-key decode merges through global memory only */
  int tile_force;           /* RLX_CUDA_ATTN_TILE: 64 or 128 query rows a tensor-core block forced; 0: chosen */
  int pdl;                  /* the split-key decode kernel */
  int tc_tile;              /* CU_ATTN_TILE_*: the tensor-core kernel's shape (cu_attention_plan) */
  int64_t B, S, T, H, Hkv, D, window;
  /* element strides of q/out and of k/v: batch, head, sequence (D is contiguous) */
  int64_t q_sb, q_sh, q_ss, kv_sb, kv_sh, kv_ss;
  double scale, softcap;
  /* the split-key decode kernel (set by cu_attention_plan): keys split
   * over `splits` blocks of keys_per_split per kv head; their F32 partial
   * states merged either in shared memory, the splits of a head one
   * thread block cluster (cluster = splits), or through part, by the last
   * block of a head to arrive (count, one per (batch, kv head), left
   * zeroed; cluster = 0). q_block: 0, a block takes all S queries of
   * its kv head; else the blocks of a kv head take q_block queries each
   * (G * q_block rows; count and part per (batch, kv head, block of
   * queries)) and skip a split whose keys the custom mask hides from all
   * of their rows: 1 for a decoder's KV pool (each query sees its own
   * cells), DEC_MAX_ROWS / G for rows the tensor-core kernel does not take
   * (prefill rows of a head_dim flash_f32 does not take) */
  int splits, cluster, q_block;
  int lanes; /* flash_decode_lanes takes the splits (k_attention_decode.cu) */
  /* each q head a block of its own (cu_attention_plan, where a block per
   * kv head would leave most multiprocessors idle): Hkv is then H, and
   * block head h reads kv head h / kv_rep; 0: none */
  int kv_rep;
  int64_t keys_per_split;
  float *part;
  unsigned *count;
  /* the split-key decode kernel only: q read as F32 and rounded to dtype
   * as it loads (q_f32), the output written as F32 of the values rounded
   * to dtype (out_f32): the Casts around a 16-bit attention of F32
   * activations, with the bits of their own launches (cuda_fuse.c) */
  int q_f32, out_f32;
} cu_attn_args;
/* Decides whether the split-key decode kernel takes a (few query rows per
 * kv head: decode, short chunks) and how much scratch it needs: part_floats
 * floats and counters zeroed unsigned ints, which the caller provides in
 * part and count (0 and 0 when another kernel runs). */
void cu_attention_plan(cu_attn_args *a, size_t *part_floats, size_t *counters);
/* Runs the kernel cu_attention_plan chose, else the tensor-core flash
 * kernel (F16/BF16, head_dim a multiple of 16 up to 128), else the F32
 * one (head_dim 32, 64, 96 or 128), else the exact general one (any
 * dtype, head_dim up to 256). */
int cu_attention_launch(const cu_attn_args *a, cudaStream_t st);

/* ---------------------------------------------------------------- quantized weights */

/* 1 for the block dtypes the kernels decode (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K). */
int cu_quant_supported(int scheme);
/* x [M, K] (x_dtype) @ dequant(w [N, K])^T -> out [M, N] (x_dtype), reading
 * the packed blocks directly, for small M (decode): one pass over w. */
#define CU_QMM_MAX_M 8
int cu_qmm_launch(const void *x, int x_dtype, const void *w, int scheme, void *out, int64_t M,
                  int64_t N, int64_t K, cudaStream_t st);
/* The integer decode path (M <= CU_QMM_MAX_M; k_quant.cu says how):
 * cu_quant_x turns x [M, K] (x_dtype a float dtype, K a multiple of 32)
 * into cu_qx_bytes(M, K) bytes at qx (16-byte aligned): 8-bit levels per
 * 32 elements and their scales; cu_qmv then computes out [M, N]
 * (out_dtype) = x @ dequant(w [N, K])^T from them with integer dot
 * products. With has_norm, x is the output of the RmsNorm (or
 * FusedResidualRmsNorm) that norm describes (its len K, rows M, dtype
 * x_dtype F32/F16/BF16; out unused): its rows are normalized here and the
 * norm's own launch is saved. Where cu_quant_x_norm_deferred(a) (no
 * beta), the levels are x * gamma's, whose scale is the same up to
 * rounding (levels do not change when a block is scaled), and the row's
 * factor 1 / sqrt(mean(x^2) + eps) is left to the products: qx then
 * also holds each 32 elements' sum of squares (at cu_qx_ssq(qx, M, K)),
 * which cu_qmv's norm_ssq reads; the norm then costs no pass over the row
 * before its levels can be made. With swiglu, x is silu(gate) * up, computed
 * here from gate = x and up = x2 (row m at m * x_rs elements, x_dtype
 * F32/F16/BF16), rounded to x_dtype as the launch it saves rounds it:
 * CU_SWIGLU_FUSED as FusedSwiGLU (once), CU_SWIGLU_REGION as the region
 * [act.silu(i0), bin.mul(s0, i1)] (after each step). */
size_t cu_qx_bytes(int64_t M, int64_t K);
enum { CU_SWIGLU_NONE, CU_SWIGLU_FUSED, CU_SWIGLU_REGION };
typedef struct {
  const void *x, *x2;
  void *qx;
  int x_dtype, has_norm, swiglu;
  int64_t x_rs;
  int pdl;                          /* programmatic dependent launch (below) */
  int64_t M, K;
  cu_norm_args norm;
} cu_quant_x_args;
int cu_quant_x_launch(const cu_quant_x_args *a, cudaStream_t st);
int cu_quant_x_norm_deferred(const cu_quant_x_args *a);
const float *cu_qx_ssq(const void *qx, int64_t M, int64_t K);
/* A Rope of a segment's output, applied by the launch before it stores
 * (the float GEMV's w [N, K] segments, the integer GEMV's direct
 * kernels): the output's M = B * S rows are [H * D] heads; pair i <
 * n_rot / 2 of a head is dims (2i, 2i+1), or (i, i + n_rot / 2) with neox.
 * By tables: cos and sin are [S, n_rot / 2] or, batched, [B, S, n_rot / 2]
 * of table_dtype. By positions (cos NULL): pos is I32/I64 [S] or, batched,
 * [B, S], and pair i turns by pos * base^(-2i / n_rot) / scale, as the
 * Rope kernel turns it. cu_gemv_rope_fits and cu_qmv_rope_fits say where
 * it applies. */
typedef struct {
  int on, neox, table_dtype, table_batched;
  int64_t D, n_rot, S;
  const void *cos, *sin;
  const void *pos;
  int pos_dtype, pos_batched;
  double base, scale;
} cu_gemv_rope;
/* An UpdateSlice of a product's decode rows into a cache, done by the
 * product's launch as it stores (dst NULL: none): the segment's [M, N]
 * output, contiguous in the cache, goes to element dst_off + start *
 * dyn_mul of dst in dst_dtype (rounded as Cast rounds), start read from
 * dyn (I32 or I64) and checked against [0, dyn_max] (an error for node,
 * and no store, past it). */
typedef struct {
  void *dst;
  const void *dyn;
  int dyn_dtype, dst_dtype, node;
  int64_t dst_off, dyn_mul, dyn_max;
  cu_error *err;
} cu_cache_write;
/* Up to CU_QMV_MAX_SEG products of the same quantized x in one launch
 * (segments: weights w [N, K] of one scheme, out [M, N] of out_dtype).
 * The caller fills qx, scheme, out_dtype, M, K, nseg and seg; cu_qmv_plan
 * sets rows and rpw. With pdl (both launches), the GEMV starts while the
 * quantization before it runs and streams its first weights meanwhile
 * (programmatic dependent launch: RLX_CUDA_PDL=0 turns it off). */
#define CU_QMV_MAX_SEG 4
typedef struct {
  const void *qx;
  int scheme, out_dtype, nseg, rpw; /* rpw: weight rows per warp */
  int pdl;
  int64_t M, K, rows;               /* rows: sum of the segments' N */
  /* x's RmsNorm factor, left to the product (cu_quant_x_norm_deferred):
   * the sums of squares [M, K / 32] and the norm's eps; NULL: none */
  const float *norm_ssq;
  float norm_eps;
  struct {
    const void *w;
    void *out;
    const void *resid; /* [M, N] of out_dtype added to the product (a residual add), or NULL */
    int64_t N;
    cu_gemv_rope rope;        /* the Rope of this output (cu_qmv_rope_fits) */
    cu_cache_write cache;     /* the output written into a cache instead of out */
  } seg[CU_QMV_MAX_SEG];
} cu_qmv_args;
void cu_qmv_plan(cu_qmv_args *a);
/* Whether segment `seg` of a (planned; its rope's D and n_rot set) can
 * take a Rope: one row of x on a direct kernel, whose warps hold rows in
 * pairs, with the segments up to it whole heads. */
int cu_qmv_rope_fits(const cu_qmv_args *a, int seg);
int cu_qmv_launch(const cu_qmv_args *a, cudaStream_t st);
/* w [rows, K] packed (or F16/BF16: widened) -> dst [rows, K] in dst_dtype (a float dtype). */
int cu_dequant_launch(const void *w, int scheme, void *dst, int dst_dtype, int64_t rows, int64_t K,
                      cudaStream_t st);
/* x [rows, K] of float dtype x_dtype -> dst [rows, K] in RLX_Q8_0 / RLX_Q4_0 blocks (Quantize),
 * rounded as ggml's reference quantizers round. */
int cu_quantize_launch(const void *x, int x_dtype, void *dst, int dst_dtype, int64_t rows, int64_t K,
                       cudaStream_t st);

/* ---------------------------------------------------------------- products with few rows (k_gemv.cu) */

/* out[M, N] = act(x[M, K] @ w + bias) (+ resid) for M <= CU_GEMV_MAX_M
 * (decode), w [K, N] or, with w_trans, [N, K]; x, bias (NULL: none),
 * resid (a residual add the product absorbed; NULL: none), out all of
 * dtype (F32/F16/BF16), w of w_dtype (dtype, or F16/BF16 under an F32
 * x), F32 accumulation, one rounding. One launch serves
 * up to CU_GEMV_MAX_SEG products of the same x (segments: q, k and v of a
 * layer), each with its own w, N, bias, resid and out. cu_gemv_plan picks
 * the split along K and says how much scratch the launch needs: part_floats
 * F32 partial sums and counters zeroed unsigned ints (the launch leaves
 * them zeroed again), which cu_gemv_set_scratch hands to the segments.
 * glu (w_trans, act none, no bias or resid, nseg 2: the gate's w and N
 * and the output in seg[0], the up's w of the same shape in seg[1]):
 * out = silu(x @ w0) * (x @ w1), each value rounded to dtype as the
 * ElementwiseRegion [act.silu(i0), bin.mul(s0, i1)] rounds its steps. */
#define CU_GEMV_MAX_M 8
#define CU_GEMV_MAX_SEG 4
typedef struct {
  const void *w, *bias, *resid;
  void *out;
  int64_t N;
  float *part;               /* [ksplit, M, N] */
  unsigned *count;           /* [column tiles] */
  cu_gemv_rope rope;
} cu_gemv_seg;
typedef struct {
  const void *x;
  int dtype, w_dtype, act, w_trans, nseg, pdl;
  int glu;                   /* a gate|up pair writing silu(gate) * up */
  float alpha;               /* leaky_relu */
  int64_t M, K;
  int ksplit;
  int64_t kchunk;            /* rows of w per K block */
  cu_gemv_seg seg[CU_GEMV_MAX_SEG];
  /* w [N, K] only: x is the output of an RmsNorm (no beta) of norm_x's
   * rows, which the launch computes: every column's sum is over
   * x_k * gamma_k, times the row's 1 / sqrt(mean(x^2) + eps); the first
   * warp also writes the norm's output x itself, for its other readers */
  int norm;
  const void *norm_x, *norm_gamma;
  double norm_eps;
} cu_gemv_args;
int cu_gemv_supported(int dtype, int w_dtype, int64_t M, int64_t N, int64_t K, int w_trans, const void *x, const void *w);
/* Whether segment `seg` of a (its N, D and n_rot set in seg.rope) can
 * take a Rope: w [N, K], no glu, the pairs of every head within one block
 * of the launch (the segment and those before it a whole number of
 * blocks). */
int cu_gemv_rope_fits(const cu_gemv_args *a, int seg);
void cu_gemv_plan(cu_gemv_args *a, size_t *part_floats, size_t *counters);
void cu_gemv_set_scratch(cu_gemv_args *a, float *part, unsigned *count);
int cu_gemv_launch(const cu_gemv_args *a, cudaStream_t st);

/* ---------------------------------------------------------------- GEMM (cuda_matmul.c, cuBLASLt) */

/* C[M, N] = A[M, K] @ B[K, N], row-major, or B given as [N, K] (b_trans),
 * over `batch` matrices at the given element strides (0: the same matrix
 * for every batch), or over n_ptrs explicit (a, b, c) triples when the
 * batch is not strided (ptrs non-NULL: then batch = 1 each). F16/BF16 run
 * on the tensor cores with F32 accumulation; F32 is exact F32 unless tf32;
 * F64 in F64. With bias (a [N] vector of the output dtype), act none, relu
 * or gelu_tanh, the epilogue is fused into cuBLASLt's where the library
 * has a kernel for it; *fused says how much was: CUDA_FUSED_NONE (the
 * caller adds bias and applies act), CUDA_FUSED_BIAS (the caller applies
 * act) or CUDA_FUSED_ALL. */
enum { CUDA_FUSED_NONE, CUDA_FUSED_BIAS, CUDA_FUSED_ALL };
typedef struct cuda_gemm cuda_gemm;
typedef struct {
  rlx_dtype dtype;
  int64_t M, N, K;
  int b_trans, tf32;
  int ab_bf16;             /* A and B in BF16 under an F32 dtype (C and D): F32 accumulation */
  int64_t batch, stride_a, stride_b, stride_c;
  const void *a, *b;
  void *c;
  int n_ptrs;
  const void *const *pa, *const *pb;
  void *const *pc;
  const void *bias;
  int act;                 /* rlx_act */
  const void *resid;       /* a tensor of c's layout added to the product (beta = 1), or NULL; not with pa */
} cuda_gemm_desc;

/* Workspace the GEMMs of a plan share (one stream: one at a time). */
#define CUDA_GEMM_WORKSPACE ((size_t)32 << 20)
rlx_status cuda_gemm_prepare(const cuda_gemm_desc *d, void *workspace, cuda_gemm **out, int *fused);
rlx_status cuda_gemm_run(const cuda_gemm *g, cudaStream_t st);
void       cuda_gemm_free(cuda_gemm *g);
/* Why cuBLASLt could not be loaded (cublaslt_loader.c), or NULL once it is. */
const char *cuda_cublaslt_error(void);

/* ---------------------------------------------------------------- spatial ops (k_spatial.cu) */

/* Pool over planes of ih x iw (N * C of them; 1-D as ih = 1): window kh x
 * kw at stride (sh, sw) from -(ph, pw), floor mode (the pads hold ceil
 * mode's extra row). Max ignores the pads and propagates NaN; avg divides
 * by kh * kw (count_include_pad) or by the window's elements inside x.
 * F32/F16/BF16, computed in F32. */
typedef struct {
  const void *x;
  void *y;
  int dtype, is_max, count_include_pad;
  int64_t planes, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;
} cu_pool_args;
int cu_pool_launch(const cu_pool_args *a, cudaStream_t st);

/* Resize planes of ih x iw to oh x ow: nearest src = floor(dst * in / out);
 * bilinear at torch's source index (align_corners or half-pixel, clamped
 * at 0), neighbours clamped to the edge. */
typedef struct {
  const void *x;
  void *y;
  int dtype, bilinear, align_corners;
  int64_t planes, ih, iw, oh, ow;
} cu_resize_args;
int cu_resize_launch(const cu_resize_args *a, cudaStream_t st);

/* GroupNorm of x [n, groups * cpg, spatial]: each (image, group) span of
 * cpg * spatial elements normalized by its mean and biased variance, then
 * * gamma[c] + beta[c]; statistics in F32 over two passes. */
typedef struct {
  const void *x, *gamma, *beta;
  void *y;
  int dtype;
  int64_t n, groups, cpg, spatial;
  double eps;
} cu_group_norm_args;
int cu_group_norm_launch(const cu_group_norm_args *a, cudaStream_t st);

/* ---------------------------------------------------------------- convolution (cuda_conv.c, cuDNN) */

/* y = conv(x, w) in NCHW F32 (1-D as H = 1), or with transposed the
 * ConvTranspose (cuDNN's backward data: x [N, C, H, W] is the gradient
 * side, w [C, K / groups, R, S]). Symmetric pads only. With tf32 cuDNN may
 * use TF32 tensor cores (PyTorch's allow_tf32 default for convolutions),
 * else F32 FMA only. The algorithm is found by timing at prepare (a cache
 * keeps it per geometry for the process), so a run is one cuDNN call a
 * CUDA graph captures; ws_bytes is the workspace it needs. */
typedef struct cuda_conv cuda_conv;
typedef struct {
  int transposed, tf32;
  int64_t N, C, H, W;      /* x */
  int64_t K, OH, OW;       /* y [N, K, OH, OW] */
  int64_t R, S;            /* kernel */
  int64_t pad[2], stride[2], dilation[2], groups;
  const void *x, *w;
  void *y;
} cuda_conv_desc;
/* A cuDNN handle issuing on st (a plan's), and its release. */
rlx_status cuda_cudnn_create(void **handle, cudaStream_t st);
void cuda_cudnn_destroy(void *handle);
rlx_status cuda_conv_prepare(const cuda_conv_desc *d, void *handle, cuda_conv **out, size_t *ws_bytes);
rlx_status cuda_conv_run(const cuda_conv *c, void *ws, size_t ws_bytes);
void cuda_conv_free(cuda_conv *c);
/* Why cuDNN cannot be used (not built in, or not loadable), or NULL. */
const char *cuda_cudnn_error(void);

#ifdef __cplusplus
}
#endif
#endif /* RLX_CU_KERNELS_H */
