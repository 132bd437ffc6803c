/* fuse.c — pass_fuse: runs the fusion patterns in order, each over the
 * graph the previous one made, through the driver fuse_apply (fuse.h);
 * and the helpers the pattern files share. */
#include "fuse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The order matters where two patterns could claim the same node:
 *  - attention first: its scale and mask are Binary ops the elementwise
 *    pattern would otherwise take;
 *  - swiglu before matmul: its two-matmul form reads plain MatMuls, and the
 *    silu * up product is not an elementwise region's;
 *  - matmul before the norms: a projection's bias goes into the GEMM
 *    epilogue, and the residual norm that follows needs no bias input;
 *  - conv before elementwise: a conv's activation and residual add go
 *    into its output tiles rather than a region of their own;
 *  - elementwise before the region patterns, which rewrite the regions it
 *    makes (prologue, then batches of regions, then resize chains). */
static const fuse_pattern *const fuse_patterns[] = {
    &fuse_attention_pattern,   &fuse_swiglu_pattern,     &fuse_matmul_bias_act_pattern,
    &fuse_conv_pattern,        &fuse_residual_norm_pattern, &fuse_elementwise_pattern, &fuse_prologue_pattern,
    &fuse_batch_region_pattern, &fuse_transform_pattern,
};

rlx_status pass_fuse(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed) {
  if (out) *out = NULL;
  if (changed) *changed = 0;
  if (!in || !out) return rlx_set_error(RLX_ERR_INVALID, "pass_fuse: graph or output is NULL");
  if (in->err) return rlx_graph_status(in);
  if (opt && !opt->fuse) {
    if (!(*out = ir_graph_clone(in))) return rlx_set_error(RLX_ERR_NOMEM, "pass_fuse: out of memory");
    return RLX_OK;
  }
  const rlx_graph *cur = in;
  int total = 0;
  for (size_t i = 0; i < sizeof fuse_patterns / sizeof fuse_patterns[0]; i++) {
    rlx_graph *next = NULL;
    int fused = 0;
    rlx_status st = fuse_apply(cur, fuse_patterns[i], &next, &fused);
    if (st != RLX_OK) {
      if (cur != in) rlx_graph_free((rlx_graph *)cur);
      return st;
    }
    if (!next) continue; /* nothing matched: keep cur, copy nothing */
    if (cur != in) rlx_graph_free((rlx_graph *)cur);
    cur = next;
    total += fused;
    if (opt && opt->trace)
      fprintf(stderr, "rlx: fuse: %s: %d group%s fused\n", fuse_patterns[i]->name, fused,
              fused == 1 ? "" : "s");
  }
  if (cur == in && !(cur = ir_graph_clone(in))) return rlx_set_error(RLX_ERR_NOMEM, "pass_fuse: out of memory");
  *out = (rlx_graph *)cur;
  if (changed) *changed = total;
  return RLX_OK;
}

/* ---------------------------------------------------------------- the driver */

/* grp holds root, and every other member comes before it (the fused node
 * takes the root's place), is read only by members, is not a graph output
 * (outputs count as uses), is no Input or Param, and no member is taken by
 * an earlier group. */
static int group_closed(const fuse_ctx *c, const fuse_group *grp, rlx_node root) {
  if (!fuse_group_has(grp, root)) return 0;
  for (int i = 0; i < grp->n; i++) {
    rlx_node id = grp->node[i];
    if (c->taken[id] || id > root) return 0;
    if (id == root) continue;
    int op = fuse_node(c, id)->op;
    if (op == RLX_OP_Input || op == RLX_OP_Param) return 0;
    int refs = 0;
    for (int j = 0; j < grp->n; j++) {
      const ir_node *m = fuse_node(c, grp->node[j]);
      for (int k = 0; k < m->n_in; k++) refs += m->in[k] == id;
    }
    if (refs != c->uses[id]) return 0;
  }
  return 1;
}

rlx_status fuse_apply(const rlx_graph *in, const fuse_pattern *p, rlx_graph **out, int *fused) {
  *out = NULL;
  *fused = 0;
  const int n = in->n_nodes;
  int *uses = ir_use_counts(in);
  unsigned char *taken = calloc((size_t)n + 1, 1);
  void **match = calloc((size_t)n + 1, sizeof *match);
  rlx_node *map = malloc(((size_t)n + 1) * sizeof *map);
  void *scratch = NULL;
  rlx_graph *dst = NULL;
  rlx_status st = RLX_OK;
  if (!uses || !taken || !match || !map) {
    st = rlx_set_error(RLX_ERR_NOMEM, "fuse %s: out of memory", p->name);
    goto done;
  }
  fuse_ctx c = {in, uses, taken};
  for (int id = n - 1; id >= 0; id--) {
    if (taken[id]) continue;
    if (!scratch && !(scratch = malloc(p->match_size))) {
      st = rlx_set_error(RLX_ERR_NOMEM, "fuse %s: out of memory", p->name);
      goto done;
    }
    memset(scratch, 0, p->match_size);
    fuse_group grp = {0};
    if (!p->match(&c, id, scratch, &grp) || !group_closed(&c, &grp, id)) continue;
    for (int k = 0; k < grp.n; k++) taken[grp.node[k]] = 1;
    match[id] = scratch;
    scratch = NULL;
    (*fused)++;
  }
  if (!*fused) goto done;

  if (!(dst = ir_graph_new_like(in))) {
    st = rlx_set_error(RLX_ERR_NOMEM, "fuse %s: out of memory", p->name);
    goto done;
  }
  for (int id = 0; id < n; id++) {
    if (taken[id] && !match[id]) {
      map[id] = -1; /* interior: read only inside its group */
      continue;
    }
    map[id] = match[id] ? p->emit(dst, &c, match[id], map) : ir_copy_node_mapped(dst, in, id, map);
    if (map[id] < 0) {
      st = dst->err ? rlx_graph_status(dst)
                    : rlx_set_error(RLX_ERR_INTERNAL, "fuse %s: node %d was not rebuilt", p->name, id);
      goto done;
    }
  }
  st = ir_set_outputs_mapped(dst, in, map);
done:
  if (st != RLX_OK) {
    rlx_graph_free(dst);
    dst = NULL;
    *fused = 0;
  }
  for (int id = 0; match && id < n; id++) free(match[id]);
  free(match);
  free(scratch);
  free(map);
  free(taken);
  free(uses);
  *out = dst;
  return st;
}

/* ---------------------------------------------------------------- helpers */

int fuse_is_binop(const fuse_ctx *c, rlx_node id, rlx_binop op) {
  const ir_node *n = fuse_node(c, id);
  return n->op == RLX_OP_Binary && n->a.binop == op;
}

int fuse_takeable(const fuse_ctx *c, rlx_node id) {
  int op = fuse_node(c, id)->op;
  return c->uses[id] == 1 && !c->taken[id] && op != RLX_OP_Input && op != RLX_OP_Param;
}

int fuse_group_has(const fuse_group *grp, rlx_node id) {
  for (int i = 0; i < grp->n; i++)
    if (grp->node[i] == id) return 1;
  return 0;
}

int fuse_group_add(fuse_group *grp, rlx_node id) {
  if (fuse_group_has(grp, id)) return 1;
  if (grp->n == FUSE_MAX_GROUP) return 0;
  grp->node[grp->n++] = id;
  return 1;
}

int fuse_shape_eq(const ir_shape *a, const ir_shape *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return 0;
  return 1;
}

double fuse_constant_at(const ir_node *n, int64_t i) {
  size_t size = (size_t)ir_dtypes[n->out[0].dtype].size;
  if (i < 0 || !n->a.data.p || ((size_t)i + 1) * size > n->a.data.n) return NAN;
  const uint8_t *p = n->a.data.p + (size_t)i * size;
  switch (n->out[0].dtype) {
  case RLX_F32: {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  case RLX_F64: {
    double v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  case RLX_F16:
  case RLX_BF16: {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return n->out[0].dtype == RLX_F16 ? ir_f16_to_f32(h) : ir_bf16_to_f32(h);
  }
  default:
    return NAN;
  }
}

int fuse_scalar_constant(const fuse_ctx *c, rlx_node id, double *value) {
  const ir_node *n = fuse_node(c, id);
  if (n->op != RLX_OP_Constant || !ir_is_float(n->out[0].dtype) || ir_numel(&n->out[0].shape) != 1) return 0;
  *value = fuse_constant_at(n, 0);
  return !isnan(*value);
}

int fuse_broadcasts_into(const ir_shape *b, const ir_shape *a) {
  if (b->rank > a->rank) return 0;
  int lead = a->rank - b->rank;
  for (int i = 0; i < b->rank; i++)
    if (b->d[i] != 1 && b->d[i] != a->d[lead + i]) return 0;
  return 1;
}

rlx_node fuse_as_vector(rlx_graph *dst, const rlx_graph *src, rlx_node x, rlx_node mapped) {
  const ir_shape *s = &src->nodes[x].out[0].shape;
  if (s->rank == 1) return mapped;
  int64_t dims[] = {s->d[s->rank - 1]};
  return rlx_reshape(dst, mapped, 1, dims);
}
