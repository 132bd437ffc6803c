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
 * A run of S new tokens at positions [n_past, n_past + S) writes their K/V
 * rows into the cache params in place (UpdateSlice at n_past, Assigned back
 * to the param: plan_memory.c makes that pair write the param's own bytes)
 * and attends over the first T rows (a Narrow view, no copy), where T is
 * the symbolic key length: n_past + S rounded up to a bucket of
 * LLM_KV_BUCKET (at most n_ctx). The additive mask input [S, T] hides the
 * keys past each query's position (and the bucket's padding). So a plan
 * exists per (S, T bucket, logit rows), decode re-plans only when it
 * crosses into a new bucket, and a decode step costs the T rows it reads. */
#define LLM_KV_BUCKET 128

typedef struct {
  int64_t n_ctx, n_layer, kv_dim;
  rlx_dtype dtype;
  float *mask;          /* host mask of the last run [S, T] */
  size_t mask_cap;      /* floats */
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

/* The key length of a run of S tokens after n_past: n_past + S rounded up
 * to the bucket, at most n_ctx. */
int64_t llm_kv_key_len(const llm_kv_cache *c, int64_t n_past, int64_t S);

/* The mask [S, T] of such a run (0 where query i may see key j <= n_past +
 * i, -inf elsewhere), in c->mask. */
rlx_status llm_kv_mask(llm_kv_cache *c, int64_t n_past, int64_t S, int64_t T);

/* All K and V bytes; SIZE_MAX past RLX_MAX_TENSOR_BYTES. */
size_t llm_kv_bytes(const llm_kv_cache *c);
/* RLX_ERR_SHAPE when a layer's cache would pass RLX_MAX_TENSOR_BYTES,
 * RLX_ERR_NOMEM when the whole cache does not fit the memory budget
 * (ir_memory_check); before anything is allocated. */
rlx_status llm_kv_check(const llm_kv_cache *c);
void   llm_kv_free(llm_kv_cache *c);

#endif
