/* kv_cache.c — the decoder's KV cache: its params and nodes in the graph,
 * its zero binding, the key length bucket and the mask of a run (model.h). */
#include "model.h"

#include "../ir/ir.h"

#include <math.h>
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
    rlx_node rows = c->dtype == RLX_F32 ? news[i] : rlx_cast(g, news[i], c->dtype);
    rlx_node updated = rlx_update_slice(g, cache, rows, start, 1);
    assigns[i] = rlx_assign(g, cache, updated);
    *alls[i] = rlx_narrow(g, updated, 1, 0, key_len);
  }
}

size_t llm_kv_bytes(const llm_kv_cache *c) {
  return rlx_dtype_nbytes(c->dtype, 2 * c->n_layer * c->n_ctx * c->kv_dim);
}

rlx_status llm_kv_bind(rlx_session *s, const llm_kv_cache *c) {
  size_t nbytes = rlx_dtype_nbytes(c->dtype, c->n_ctx * c->kv_dim);
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

int64_t llm_kv_key_len(const llm_kv_cache *c, int64_t n_past, int64_t S) {
  int64_t t = (n_past + S + LLM_KV_BUCKET - 1) / LLM_KV_BUCKET * LLM_KV_BUCKET;
  return t < c->n_ctx ? t : c->n_ctx;
}

rlx_status llm_kv_mask(llm_kv_cache *c, int64_t n_past, int64_t S, int64_t T) {
  size_t need = (size_t)(S * T);
  if (need > c->mask_cap) {
    float *m = realloc(c->mask, need * sizeof *m);
    if (!m) return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_eval: out of memory for a %lldx%lld mask", (long long)S,
                                 (long long)T);
    c->mask = m;
    c->mask_cap = need;
  }
  for (int64_t i = 0; i < S; i++)
    for (int64_t j = 0; j < T; j++) c->mask[i * T + j] = j <= n_past + i ? 0.0f : -INFINITY;
  return RLX_OK;
}

void llm_kv_free(llm_kv_cache *c) {
  free(c->mask);
  c->mask = NULL;
  c->mask_cap = 0;
}
