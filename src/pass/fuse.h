/* fuse.h — the machinery shared by the fusion passes (src/pass/fuse*.c).
 *
 * A fusion pattern replaces a *group* of nodes of a graph — a root and
 * interior nodes whose every use is inside the group — by one fused node
 * (plus, where a pattern needs them, a few plain helper nodes such as a
 * Reshape of a bias). fuse_apply runs one pattern over a graph:
 *
 *   1. it visits the nodes from the last to the first and asks the pattern
 *      to match a group rooted at each node not yet taken by a group (so a
 *      root near the outputs grows over the longest chain first);
 *   2. it accepts a match only when the group is closed (every interior
 *      node is read only by group members, is not a graph output, is not
 *      an Input or Param, and belongs to no other group);
 *   3. it builds the new graph: nodes outside every group are copied, the
 *      interior nodes are dropped, and at each root the pattern emits the
 *      replacement from the mapped ids of the group's inputs.
 *
 * An emitter reads only nodes that are inputs of group members (they are
 * outside every other group's interior, so they are mapped by then) and
 * nodes it makes itself.
 */
#ifndef RLX_PASS_FUSE_H
#define RLX_PASS_FUSE_H

#include "pass.h"

/* Most nodes one group may hold (a chain of 64 elementwise steps, an
 * attention core with its layout transposes). */
#define FUSE_MAX_GROUP 64

typedef struct {
  int n;
  rlx_node node[FUSE_MAX_GROUP];   /* the root and the interior, any order */
} fuse_group;

typedef struct {
  const rlx_graph *g;
  const int *uses;                 /* ir_use_counts(g) */
  const unsigned char *taken;      /* node belongs to an accepted group */
} fuse_ctx;

typedef struct {
  const char *name;                /* for RLX_TRACE */
  size_t match_size;               /* bytes of the pattern's match record */
  /* Fills *m (match_size bytes, zeroed) and *grp for a group rooted at
   * root; returns 1 on a match, 0 otherwise. */
  int (*match)(const fuse_ctx *c, rlx_node root, void *m, fuse_group *grp);
  /* Appends the replacement of the group to dst; map[src id] = dst id for
   * every node read by the group. Returns the dst node standing for the
   * root, or -1 with the error recorded in dst. */
  rlx_node (*emit)(rlx_graph *dst, const fuse_ctx *c, const void *m, const rlx_node *map);
} fuse_pattern;

/* One pattern over in: *out is a new graph and *fused counts the groups
 * replaced, or *out is NULL when nothing matched (no copy is made). */
rlx_status fuse_apply(const rlx_graph *in, const fuse_pattern *p, rlx_graph **out, int *fused);

/* The patterns, one family per file, in the order pass_fuse runs them. */
extern const fuse_pattern fuse_attention_pattern;        /* fuse_attention.c */
extern const fuse_pattern fuse_swiglu_pattern;           /* fuse_swiglu.c */
extern const fuse_pattern fuse_matmul_bias_act_pattern;  /* fuse_matmul.c */
extern const fuse_pattern fuse_conv_pattern;             /* fuse_conv.c */
extern const fuse_pattern fuse_residual_norm_pattern;    /* fuse_norm.c */
extern const fuse_pattern fuse_elementwise_pattern;      /* fuse_elementwise.c */
extern const fuse_pattern fuse_prologue_pattern;         /* fuse_region.c */
extern const fuse_pattern fuse_batch_region_pattern;     /* fuse_region.c */
extern const fuse_pattern fuse_transform_pattern;        /* fuse_region.c */

/* ---------------------------------------------------------------- helpers for matchers */

static inline const ir_node *fuse_node(const fuse_ctx *c, rlx_node id) { return &c->g->nodes[id]; }
static inline const ir_type *fuse_type(const fuse_ctx *c, rlx_node id) { return &c->g->nodes[id].out[0]; }
static inline int fuse_is(const fuse_ctx *c, rlx_node id, int op) { return c->g->nodes[id].op == op; }

/* A Binary node with operator op. */
int fuse_is_binop(const fuse_ctx *c, rlx_node id, rlx_binop op);
/* Node id may become interior of a group whose only reader of it is one
 * node: read exactly once, not an output, not taken, not Input/Param. */
int fuse_takeable(const fuse_ctx *c, rlx_node id);
/* Adds id to grp unless it is there already; 0 when the group is full. */
int fuse_group_add(fuse_group *grp, rlx_node id);
int fuse_group_has(const fuse_group *grp, rlx_node id);
/* Shapes equal dim by dim (a symbolic dim equals only the same symbol:
 * patterns fire only on what is certain). */
int fuse_shape_eq(const ir_shape *a, const ir_shape *b);
/* A Constant of a float dtype: element i as a double (NaN past its data). */
double fuse_constant_at(const ir_node *n, int64_t i);
/* A Constant of a float dtype with one element (any rank): its value. */
int fuse_scalar_constant(const fuse_ctx *c, rlx_node id, double *value);
/* b broadcasts into a without changing a's shape: rank <= a's, every dim
 * 1 or a's (strictly). */
int fuse_broadcasts_into(const ir_shape *b, const ir_shape *a);
/* The region step an elementwise node stands for (Activation, Binary,
 * Cast, Compare: kind, op, alpha, to; operands left to the caller);
 * 0 for any other op. fuse_elementwise.c. */
int fuse_step_of(const ir_node *n, rlx_region_step *s);
/* A Reshape of x to [n] (for a [1, ..., 1, n] bias), or x itself when it
 * is rank 1 already. */
rlx_node fuse_as_vector(rlx_graph *dst, const rlx_graph *src, rlx_node x, rlx_node mapped);

#endif /* RLX_PASS_FUSE_H */
