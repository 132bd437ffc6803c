/* model.h — what the decoder's files share: the KV cache (kv_cache.c) as
 * graph nodes and as the host state of one rlx_llm (llama.c). Internal. */
#ifndef RLX_MODEL_MODEL_H
#define RLX_MODEL_MODEL_H

#include "rlx.h"

/* The KV cache of a decoder: per layer a K and a V param of
 * [1, n_ctx, kv_dim] of dtype F32, F16 or BF16, preallocated, zero at
 * first. A 16-bit cache halves its memory; the new rows are rounded to it
 * as they are written.
 *
 * A run of S new tokens writes their K/V rows into S contiguous cells
 * [start, start + S) of the cache params in place (UpdateSlice at the
 * n_past input, Assigned back to the param: plan_memory.c makes that pair
 * write the param's own bytes) and attends over the first T rows (a Narrow
 * view, no copy), where T is the symbolic key length: the cells in use
 * rounded up to a bucket of LLM_KV_BUCKET (at most n_ctx). The additive
 * mask input [S, T] hides the cells of other sequences, the keys past each
 * query's position and the bucket's padding (kv_pool.c). So a plan
 * exists per (S, T bucket, logit rows), decode re-plans only when it
 * crosses into a new bucket, and a decode step costs the T rows it reads. */
#define LLM_KV_BUCKET 128

typedef struct {
  int64_t n_ctx, n_layer, kv_dim;  /* n_ctx: the pool's cells (kv_pool.c), all sequences' */
  rlx_dtype dtype;
} llm_kv_cache;

/* The graph side, for one layer: writes k_new and v_new ([1, S, kv_dim],
 * F32, rounded to the cache's dtype) at start (the I32 scalar input
 * n_past) and returns, in *k_all and *v_all, the first key_len (a symbolic
 * dim) rows of the updated caches, [1, key_len, kv_dim] in the cache's
 * dtype. The two Assigns go to assigns[0..1]: they must become graph
 * outputs. Builder errors are sticky in g. */
void llm_kv_layer(rlx_graph *g, const llm_kv_cache *c, int layer, rlx_node k_new, rlx_node v_new,
                  rlx_node start, int64_t key_len, rlx_node *k_all, rlx_node *v_all, rlx_node *assigns);

/* Zeros into every cache param of s (once, after compile). */
rlx_status llm_kv_bind(rlx_session *s, const llm_kv_cache *c);


/* Longest run of tokens one plan takes: longer batches go in pieces, so
 * the largest plan's arena stays bounded. */
#define LLM_MAX_BATCH 512

/* The cells of the KV pool (kv_pool.c): cell c holds the K/V rows of
 * position pos[c] of every sequence in the bit set seqs[c] (several after
 * rlx_llm_seq_copy), or nothing (pos -1, seqs 0). A run writes its S new
 * rows into S contiguous free cells at `start` (the graph's UpdateSlice at
 * the n_past input) and attends over cells [0, T) through the mask. */
#define LLM_MAX_SEQ 64
typedef struct {
  int32_t   n_seq;
  int64_t   n_ctx;      /* positions per sequence */
  int64_t   n_cells;    /* n_seq * n_ctx */
  int32_t  *pos;        /* [n_cells] */
  uint64_t *seqs;       /* [n_cells] */
  int64_t  *n_past;     /* [n_seq] */
  int32_t  *tokens;     /* [n_seq * n_ctx]: sequence s's at s * n_ctx */
  float    *mask;       /* the last run's [S, T] */
  size_t    mask_cap;   /* floats */
} llm_pool;

rlx_status llm_pool_init(llm_pool *p, int32_t n_seq, int64_t n_ctx);
void       llm_pool_free(llm_pool *p);
/* Drops seq's positions >= n_past (cells seen by no sequence become free). */
void       llm_pool_truncate(llm_pool *p, int32_t seq, int64_t n_past);
/* The first run of free cells from cell `from` on of at least want cells,
 * or the longest one when none is that long: its start in *start, its
 * length (at most want) returned; 0 when no cell from `from` on is free. */
int64_t    llm_pool_find(const llm_pool *p, int64_t want, int64_t from, int64_t *start);
/* 1 + the last cell that a sequence of the bit set seqs sees; 0: none. A
 * run for those sequences starts there or later, so each sequence's cells
 * stay in the order of its positions: the CPU attention's sums then run
 * over a sequence's keys in the same order wherever its cells sit. */
int64_t    llm_pool_after(const llm_pool *p, uint64_t seqs);
/* The cells in use, in increasing order, into cells[]; their count. */
int64_t    llm_pool_live(const llm_pool *p, int64_t *cells);
/* Cell cells[i] (increasing) becomes cell i, the rest free: the pool
 * packed to its bottom, each sequence's cells in the same order (the rows
 * move with llm_cells_pack). */
void       llm_pool_pack(llm_pool *p, const int64_t *cells, int64_t n);
/* The key length of a run ending before cell `end`: the used cells and the
 * run's, rounded up to LLM_KV_BUCKET, at most n_cells. */
int64_t    llm_pool_key_len(const llm_pool *p, int64_t end);
/* The mask [S, T] of queries (seq[i], pos[i]) in p->mask. */
rlx_status llm_pool_mask(llm_pool *p, const int32_t *seq, const int32_t *pos, int64_t S, int64_t T);
/* cells[pos] = the cell of seq's position pos, for pos < n_past[seq]. */
void       llm_pool_seq_cells(const llm_pool *p, int32_t seq, int64_t *cells);

/* The decoder's side (llama.c) for llm_batch.c. */
llm_pool  *llm_pool_of(rlx_llm *m);
/* One run of S <= LLM_MAX_BATCH tokens at positions pos, written to cells
 * [start, start + S), attending over T cells with p->mask; the R logit rows
 * `rows` (indices into the run) into logits. */
rlx_status llm_run(rlx_llm *m, const int32_t *tokens, const int32_t *pos, int64_t S, int64_t start, int64_t T,
                   const int32_t *rows, int64_t R, float *logits);
/* What kv_rows.c reads and writes of a decoder's cache. The session keeps
 * the cache params: the last run's copy is read back through its Assign
 * outputs (outputs 1 + 2 l and 2 + 2 l: K and V of layer l), a layer at a
 * time; a changed copy goes back with rlx_set_param, and a one-token run
 * into a free cell makes the outputs show it. */
typedef struct {
  rlx_session *sess;
  const llm_kv_cache *kv;
  int *ran;                 /* a run has written the cache (else it is zeros) */
  const double *rope_freq;  /* [n_rot / 2] */
  int64_t n_rot, head_dim;
  rlx_rope_mode rope_mode;
} llm_cache_view;
/* Rank `rank`'s (0 unless the decoder is split over threads: llm_n_rank). */
void llm_cache_view_of(rlx_llm *m, int rank, llm_cache_view *v);
/* The ranks whose sessions this decoder runs (tensor parallelism in one
 * process; else 1), each holding a piece of every cache row: its heads. */
int  llm_n_rank(const rlx_llm *m);
/* Reads (write 0) or writes (write 1) the K/V rows of cells[0..n) in the
 * cache's dtype: per layer, K's n rows then V's, llm_row_bytes each (whole
 * rows: every rank's piece in rank order). */
rlx_status llm_cells_io(rlx_llm *m, const int64_t *cells, int64_t n, void *buf, int write);
/* Moves the K/V rows of cells[i] (increasing) to cell i, every layer. */
rlx_status llm_cells_pack(rlx_llm *m, const int64_t *cells, int64_t n);
/* Rotates the keys of cells[0..n) by delta positions, every layer (RoPE
 * of p then of delta is RoPE of p + delta). */
rlx_status llm_rerope(rlx_llm *m, const int64_t *cells, int64_t n, int64_t delta);
size_t     llm_row_bytes(const rlx_llm *m);
int64_t    llm_n_layer(const rlx_llm *m);
rlx_dtype  llm_cache_type(const rlx_llm *m);
/* One rank of a decoder split over processes (its rows are pieces). */
int        llm_rank_of_world(const rlx_llm *m);
/* The file's check (rlx_model_file_check): a mapped file that shrank. */
rlx_status llm_file_check(const rlx_llm *m);

/* Tensor parallelism (llm_tp.c). The slice [begin, begin + len) of t's
 * rows (axis 0; a vector's elements) as a view into the mapping, or of its
 * columns (axis 1) as a copy in *copy (the caller frees it after the
 * session that reads it); RLX_ERR_UNSUPPORTED when a column split of a
 * block type falls inside a block. */
rlx_status llm_tp_split(rlx_file_tensor *t, int axis, int64_t begin, int64_t len, void **copy);
/* The communicators of o's ranks: comms[0..tp) of threads in this process
 * (NCCL on o->compile's CUDA device, or RLX_DEVICE's, and the next ones;
 * or the CPU's local group), or comms[0], this process's rank of o->world.
 * A session given an NCCL rank's communicator runs on its device. */
rlx_status llm_tp_comms(const rlx_llm_options *o, int tp, rlx_comm **comms);
/* fn(arg, r) for every rank r in [0, n) at once (r > 0 on the threads of
 * *pool, started by the first call, r 0 on the caller's); a rank that
 * fails aborts its communicator so the others' AllReduces end. The first
 * failure, naming its rank. */
typedef rlx_status (*llm_rank_fn)(void *arg, int rank);
typedef struct llm_tp_pool llm_tp_pool;
rlx_status llm_tp_each(llm_tp_pool **pool, int n, rlx_comm **comms, llm_rank_fn fn, void *arg);
void       llm_tp_pool_free(llm_tp_pool *p);

/* All K and V bytes; SIZE_MAX past RLX_MAX_TENSOR_BYTES. */
size_t llm_kv_bytes(const llm_kv_cache *c);
/* RLX_ERR_SHAPE when a layer's cache would pass RLX_MAX_TENSOR_BYTES,
 * RLX_ERR_NOMEM when the whole cache does not fit the memory budget
 * (ir_memory_check); before anything is allocated. */
rlx_status llm_kv_check(const llm_kv_cache *c);

#endif
