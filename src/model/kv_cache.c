/* kv_cache.c — the decoder's KV cache: its params and nodes in the graph
 * and its zero binding (model.h; the cells' bookkeeping is kv_pool.c). */
#include "model.h"

#include "../ir/ir.h"

#include <stdio.h>
#include <stdlib.h>

static void cache_name(char *buf, size_t cap, char kind, int layer) {
  snprintf(buf, cap, "cache.%c.%d", kind, layer);
}

void llm_kv_layer(rlx_graph *g, const llm_kv_cache *c, int layer, rlx_node k_new, rlx_node v_new,
                  rlx_node start, int64_t key_len, rlx_node *k_all, rlx_node *v_all, rlx_node *assigns) {
  const int64_t dims[3] = {1, c->n_ctx, c->kv_dim};
  const rlx_node news[2] = {k_new, v_new};
  rlx_node *alls[2] = {k_all, v_all};
  for (int i = 0; i < 2; i++) {
    char name[48];
    cache_name(name, sizeof name, i ? 'v' : 'k', layer);
    rlx_node cache = rlx_param(g, name, c->dtype, 3, dims);
    /* rows rounded to a 16-bit dtype, or quantized by blocks along the row
     * (ggml's reference quantization: a row of kv_dim is whole blocks) */
    rlx_node rows = c->dtype == RLX_F32          ? news[i]
                    : rlx_dtype_is_block(c->dtype) ? rlx_quantize(g, news[i], c->dtype)
                                                   : rlx_cast(g, news[i], c->dtype);
    rlx_node updated = rlx_update_slice(g, cache, rows, start, 1);
    assigns[i] = rlx_assign(g, cache, updated);
    *alls[i] = rlx_narrow(g, updated, 1, 0, key_len);
  }
}

/* Bytes of one layer's K (or V) param, checked: IR_SIZE_OVER past the limit. */
static int64_t layer_bytes(const llm_kv_cache *c) {
  return ir_size_mul(c->n_ctx, (int64_t)rlx_dtype_nbytes(c->dtype, c->kv_dim));
}

size_t llm_kv_bytes(const llm_kv_cache *c) {
  int64_t b = ir_size_mul(ir_size_mul(2, c->n_layer), layer_bytes(c));
  return b == IR_SIZE_OVER ? SIZE_MAX : (size_t)b;
}

rlx_status llm_kv_check(const llm_kv_cache *c) {
  int64_t layer = layer_bytes(c);
  if (c->n_ctx < 1 || layer == IR_SIZE_OVER)
    return rlx_set_error(RLX_ERR_SHAPE, "rlx_llm_load: a KV cache of n_ctx %lld rows of %lld %s values per layer is "
                         "outside 1 row .. the largest tensor (RLX_MAX_TENSOR_BYTES, 2^40 bytes)",
                         (long long)c->n_ctx, (long long)c->kv_dim, rlx_dtype_name(c->dtype));
  /* Every layer's K and V are bound, copied into the session: all of it is touched. */
  char what[160];
  snprintf(what, sizeof what, "rlx_llm_load: the KV cache (n_ctx %lld, %lld layers, %lld %s values per row)",
           (long long)c->n_ctx, (long long)c->n_layer, (long long)c->kv_dim, rlx_dtype_name(c->dtype));
  size_t total = llm_kv_bytes(c);
  return ir_memory_check(total == SIZE_MAX ? UINT64_MAX : (uint64_t)total, what);
}

rlx_status llm_kv_bind(rlx_session *s, const llm_kv_cache *c) {
  size_t nbytes = (size_t)layer_bytes(c);  /* llm_kv_check bounded it */
  /* calloc'ed pages read as zeros without being resident: only the
   * session's copies take memory */
  void *zeros = calloc(1, nbytes ? nbytes : 1);
  if (!zeros) return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory for the KV cache (%zu bytes)", nbytes);
  rlx_status st = RLX_OK;
  for (int64_t l = 0; l < c->n_layer && st == RLX_OK; l++)
    for (int i = 0; i < 2 && st == RLX_OK; i++) {
      char name[48];
      cache_name(name, sizeof name, i ? 'v' : 'k', (int)l);
      st = rlx_set_param(s, name, zeros, nbytes);
    }
  free(zeros);
  return st;
}
