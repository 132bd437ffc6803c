/* lower_attention.c — Rope (by positions or by tables) and Attention. */
#include "cuda_plan.h"

#include <math.h>

rlx_status cuda_lower_rope(cuda_plan *pl, const ir_node *n) {
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
  cuda_fuse_site site = {.args = a};
  if (cuda_fuse(pl, CUDA_FUSE_GEMV_ROPE, n, &site) || cuda_fuse(pl, CUDA_FUSE_ROPE_JOIN, n, &site)) return RLX_OK;
  cuda_step *s = cuda_new_step(pl, ST_ROPE, n);
  cu_rope_args *mine = s ? cuda_new_args(s, sizeof *mine) : NULL;
  if (!mine) return cuda_nomem(n);
  *mine = r;
  return RLX_OK;
}

rlx_status cuda_lower_attention(cuda_plan *pl, const ir_node *n) {
  const rlx_graph *g = pl->g;
  const ir_type *q = ir_in(g, n, 0), *k = ir_in(g, n, 1);
  cu_attn_args args = {0}, *a = &args;
  const int bhsd = q->shape.rank == 4 && n->a.layout == RLX_LAYOUT_BHSD;
  const int seq = bhsd ? 2 : 1;
  a->q = in_ptr(pl, n, 0), a->k = in_ptr(pl, n, 1), a->v = in_ptr(pl, n, 2), a->out = out_ptr(pl, n);
  a->dtype = q->dtype, a->kv_dtype = k->dtype, a->mask_kind = (int)n->a.mask, a->window = n->a.window;
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
    cuda_bcast_strides(&ir_in(g, n, 3)->shape, 4, full, a->mask_stride);
    a->mask = (const float *)in_ptr(pl, n, 3);
  }
  size_t part = 0, counters = 0;
  cu_attention_plan(a, &part, &counters);
  /* the Casts before and after it, in its launch; q's, if not taken,
   * launches here (nothing launched since its own place) */
  const ir_node *qc = &g->nodes[n->in[0]];
  const int q_cast = qc->op == RLX_OP_Cast && pl->cast_into[qc->id] == n->id;
  cuda_fuse(pl, CUDA_FUSE_ATTN_CAST, n, &(cuda_fuse_site){.args = a});
  rlx_status st = q_cast && pl->cast_into[qc->id] < 0 ? cuda_lower_node(pl, qc) : RLX_OK;
  if (st) return st;
  cuda_step *s = cuda_new_step(pl, ST_ATTN, n);
  if (!s || !(a = cuda_new_args(s, sizeof *a))) return cuda_nomem(n);
  *a = args;
  if (!counters) return RLX_OK;
  /* A plan's attentions run one after another (a kernel passes its
   * dependency wait once every launch before it has finished, and each
   * leaves its counters zeroed): one scratch serves all that fit it (32
   * layers of a 64-sequence batch: 81 MB, not 2.6 GB, a plan). */
  if (pl->attn_count && part <= pl->attn_part_floats && counters <= pl->attn_counters) {
    a->part = part ? pl->attn_part : NULL, a->count = pl->attn_count;
    return RLX_OK;
  }
  st = cuda_step_scratch(s, part, counters, &a->part, &a->count);
  if (!st) pl->attn_part = a->part, pl->attn_count = a->count, pl->attn_part_floats = part, pl->attn_counters = counters;
  return st;
}
