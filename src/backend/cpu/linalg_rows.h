/* linalg_rows.h — routines of the linalg kernels that other CPU kernels
 * reuse (the fused MatMul+bias+act and attention-block kernels).
 *
 * The *_f64 routines are the double-precision reference over dense
 * row-major doubles (what the F64 kernels run); the *_fast / *_f32 ones are
 * the f32 paths of the other float dtypes.
 */
#ifndef RLX_CPU_LINALG_ROWS_H
#define RLX_CPU_LINALG_ROWS_H

#include "cpu.h"

/* c[M, N] = a[M, K] @ b[K, N] (c is overwritten, not accumulated into).
 * Any of M, K, N may be 0 (K = 0 gives zeros). RLX_ERR_INVALID for a
 * negative size. */
rlx_status cpu_matmul_f64(const double *a, const double *b, double *c, int64_t M, int64_t K,
                          int64_t N);

/* One Attention op (OPS.md row 36) over double buffers.
 *
 * Layouts: q and out are [batch, q_len, num_heads, head_dim] when bhsd = 0
 * (which is also the rank-3 [B, S, H*D] layout) or [batch, num_heads, q_len,
 * head_dim] when bhsd = 1; k and v are the same with num_kv_heads and kv_len.
 *
 * mask (mask_kind RLX_MASK_CUSTOM only; NULL otherwise) is additive and
 * read at mask[b*mask_strides[0] + h*mask_strides[1] + i*mask_strides[2] +
 * j*mask_strides[3]] for batch b, query head h, query i, key j — a stride
 * of 0 broadcasts that dim. */
typedef struct {
  int64_t batch, q_len, kv_len;
  int64_t num_heads, num_kv_heads, head_dim;
  int bhsd;
  rlx_mask_kind mask_kind;
  int64_t window;           /* RLX_MASK_SLIDING_WINDOW: keys j > i + (T - S) - window */
  double score_scale;       /* > 0 overrides 1/sqrt(head_dim) */
  double softcap;           /* > 0: scores = softcap * tanh(scores / softcap) */
  const double *mask;
  int64_t mask_strides[4];
} cpu_attention_params;

/* Fills the head counts, mask kind, window, score_scale and softcap of *p
 * from the attributes of an Attention (or FusedAttentionBlock) node, and
 * zeroes the rest (sizes, layout and mask are the caller's). */
void cpu_attention_params_from_attrs(cpu_attention_params *p, const ir_attrs *a);

/* out = Attention(q, k, v) as described by *p (num_heads a positive multiple
 * of num_kv_heads, head_dim > 0: what Attention's inference guarantees). A
 * query row whose keys are all masked gets zeros. Returns RLX_ERR_NOMEM
 * (scratch) or RLX_OK. */
rlx_status cpu_attention_f64(const cpu_attention_params *p, const double *q, const double *k,
                             const double *v, double *out);

/* The same over buffers of dtype dt (F32, F16 or BF16: q and out; k and v
 * of kv_dt, which is dt or, under an F32 dt, a GGUF block dtype whose
 * block divides head_dim), computed in f32 by the tiled kernel of
 * k_attention.c (online softmax over key blocks: memory O((S + T) * D),
 * not O(S * T)), threaded over ctx. mask (custom mask only) is F32, read
 * through p->mask_strides; p->mask is not used. Returns RLX_ERR_NOMEM
 * (scratch) or RLX_OK. */
rlx_status cpu_attention_fast(cpu_ctx *ctx, const cpu_attention_params *p, rlx_dtype dt, rlx_dtype kv_dt,
                              const void *q, const void *k, const void *v, const float *mask, void *out);

/* Rotary embedding in place on x [batch, seq, heads, head_dim] (also the
 * rank-3 [B, S, H*D] layout): rotates dims [0, n_rot) of every head; pairs
 * are (2i, 2i+1) for RLX_ROPE_NORMAL and (i, i + n_rot/2) for RLX_ROPE_NEOX.
 * cos/sin hold n_rot/2 angles per position: row s of batch b starts at
 * b*table_batch_stride + s*(n_rot/2) (table_batch_stride 0: one [seq, n_rot/2]
 * table shared by every batch). */
void cpu_rope_apply_f64(double *x, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                        int64_t n_rot, rlx_rope_mode mode, const double *cos, const double *sin,
                        int64_t table_batch_stride);
/* The same on floats (the F32/F16/BF16 paths). */
void cpu_rope_apply_f32(float *x, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                        int64_t n_rot, rlx_rope_mode mode, const float *cos, const float *sin,
                        int64_t table_batch_stride);

#endif /* RLX_CPU_LINALG_ROWS_H */
