/* fuse_elementwise.c — maximal connected groups of elementwise ops
 * (Activation, Binary, Cast, Compare) -> one ElementwiseRegion{chain}.
 *
 * A region grows from its root (the last op, visited first) over every
 * operand that is itself one of those ops, has the root's shape, and is
 * read only by ops already in the region (the growth repeats until nothing
 * more joins, so an operand read by two ops of the region joins once both
 * have). An operand of a smaller shape that broadcasts into the region is
 * left outside as a region input: inside, the region would compute it
 * once per output element instead of once per element of its own (it may
 * form a region of its own shape). The result
 * is a DAG with one output: each member becomes one step, in node order,
 * its operands pointing at earlier steps or at region inputs (the distinct
 * outside operands, in order of first use). A region of one op is not
 * made: a single op stays as it is.
 *
 * Semantics are unchanged by construction: each step is the op it stands
 * for with the same operands, the region rounds every step to its own
 * dtype as the unfused op stores it, and a step broadcasts its operands as
 * the op did — so the region's output shape is the broadcast of all its
 * inputs, the root's shape. Where and Clamp are not region steps and end a
 * region; so does a Cast from a block dtype (a region reads plain dtypes). */
#include "fuse.h"

#include <stdlib.h>
#include <string.h>

/* Inputs a region may have: two per step. */
#define REGION_MAX_IN (2 * FUSE_MAX_GROUP)

typedef struct {
  int n_steps, n_in;
  rlx_region_step steps[FUSE_MAX_GROUP];
  rlx_node in[REGION_MAX_IN];
} region_match;

int fuse_step_of(const ir_node *n, rlx_region_step *s) {
  memset(s, 0, sizeof *s);
  switch (n->op) {
  case RLX_OP_Activation:
    s->kind = RLX_STEP_ACT;
    s->op = (int)n->a.act;
    s->alpha = n->a.act == RLX_ACT_LEAKY_RELU ? n->a.alpha : 0.0;
    return 1;
  case RLX_OP_Binary:
    s->kind = RLX_STEP_BIN;
    s->op = (int)n->a.binop;
    return 1;
  case RLX_OP_Compare:
    s->kind = RLX_STEP_CMP;
    s->op = (int)n->a.cmpop;
    return 1;
  case RLX_OP_Cast:
    s->kind = RLX_STEP_CAST;
    s->to = (rlx_dtype)n->a.to;
    return 1;
  default:
    return 0;
  }
}

/* A region step op whose operands a region can read (plain dtypes: a
 * Cast from a block dtype stays outside). */
static int is_step_op(const fuse_ctx *c, rlx_node id) {
  rlx_region_step s;
  const ir_node *n = fuse_node(c, id);
  if (!fuse_step_of(n, &s)) return 0;
  for (int k = 0; k < n->n_in; k++)
    if (ir_is_block(fuse_type(c, n->in[k])->dtype)) return 0;
  return 1;
}

/* Reads of id by the members of grp. */
static int reads_by(const fuse_ctx *c, const fuse_group *grp, rlx_node id) {
  int refs = 0;
  for (int i = 0; i < grp->n; i++) {
    const ir_node *m = fuse_node(c, grp->node[i]);
    for (int k = 0; k < m->n_in; k++) refs += m->in[k] == id;
  }
  return refs;
}

/* Grows grp (holding the root, grp->node[0]) to a fixpoint. */
static void grow(const fuse_ctx *c, fuse_group *grp) {
  const ir_shape *full = &fuse_type(c, grp->node[0])->shape;
  for (int joined = 1; joined && grp->n < FUSE_MAX_GROUP;) {
    joined = 0;
    for (int i = 0; i < grp->n && grp->n < FUSE_MAX_GROUP; i++) {
      const ir_node *m = fuse_node(c, grp->node[i]);
      for (int k = 0; k < m->n_in && grp->n < FUSE_MAX_GROUP; k++) {
        rlx_node p = m->in[k];
        if (fuse_group_has(grp, p) || c->taken[p] || !is_step_op(c, p) ||
            !fuse_shape_eq(&fuse_type(c, p)->shape, full) || c->uses[p] != reads_by(c, grp, p))
          continue;
        fuse_group_add(grp, p);
        joined = 1;
      }
    }
  }
}

static int cmp_node(const void *a, const void *b) {
  rlx_node x = *(const rlx_node *)a, y = *(const rlx_node *)b;
  return (x > y) - (x < y);
}

/* Operand of a step: the step of an earlier member, or a region input
 * (added on first use). -1 if the inputs are full. */
static int operand(const fuse_group *grp, rlx_node id, region_match *m, int *k) {
  for (int i = 0; i < grp->n; i++)
    if (grp->node[i] == id) {
      *k = -i - 1;
      return 1;
    }
  for (int i = 0; i < m->n_in; i++)
    if (m->in[i] == id) {
      *k = i;
      return 1;
    }
  if (m->n_in == REGION_MAX_IN) return 0;
  m->in[m->n_in] = id;
  *k = m->n_in++;
  return 1;
}

static int match_region(const fuse_ctx *c, rlx_node root, void *mv, fuse_group *grp) {
  region_match *m = mv;
  if (!is_step_op(c, root)) return 0;
  fuse_group_add(grp, root);
  grow(c, grp);
  if (grp->n < 2) return 0;
  qsort(grp->node, (size_t)grp->n, sizeof grp->node[0], cmp_node);
  for (int i = 0; i < grp->n; i++) {
    const ir_node *n = fuse_node(c, grp->node[i]);
    rlx_region_step *s = &m->steps[i];
    fuse_step_of(n, s);
    if (!operand(grp, n->in[0], m, &s->a)) return 0;
    if (n->n_in > 1 && !operand(grp, n->in[1], m, &s->b)) return 0;
  }
  m->n_steps = grp->n;
  return 1;
}

static rlx_node emit_region(rlx_graph *dst, const fuse_ctx *c, const void *mv, const rlx_node *map) {
  (void)c;
  const region_match *m = mv;
  rlx_node ins[REGION_MAX_IN];
  for (int i = 0; i < m->n_in; i++) ins[i] = map[m->in[i]];
  return rlx_elementwise_region(dst, m->n_in, ins, m->n_steps, m->steps, RLX_PROLOGUE_NONE);
}

const fuse_pattern fuse_elementwise_pattern = {"elementwise", sizeof(region_match), match_region,
                                               emit_region};
