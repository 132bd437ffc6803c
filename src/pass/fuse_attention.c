/* fuse_attention.c — softmax(q @ kᵀ · scale [+ mask]) @ v -> Attention.
 *
 * The pattern, as BERT and Llama exports write it over [B, H, S, D] heads
 * (or [N, S, D] with heads folded into the batch):
 *
 *   scores = MatMul(q, kt)                  kt = kᵀ: [B, H, D, T]
 *   scores = scores * c | scores / c | ...  c a one-element Constant (any
 *                                           number of them; also on q or k)
 *   scores = scores + mask                  optional; either operand order
 *   p      = Softmax{axis=-1}(scores)
 *   out    = MatMul(p, v)                   [B, H, S, D]
 *
 * Every intermediate must be read only by the next op. The scale becomes
 * score_scale (the product of the constants as stored, so it is the same
 * number the unfused graph multiplies by; it must be finite and > 0).
 *
 * Layout. q, k and v usually come out of transposes of [B, S, H, D]
 * projections ("view + transpose(1, 2)"), and out usually goes back
 * through one. Each operand is followed down through Transposes (and
 * scales, and for k and v a repeat_kv), and the pattern picks the layout —
 * bhsd or bshd — that drops the most transposes: with bshd over the
 * projections and the output transpose absorbed (the group is then rooted
 * at that Transpose), none is left. An operand with no tensor in the
 * chosen layout gets one Transpose emitted (k when only kᵀ exists).
 *
 * Heads. num_heads is q's head dim. Grouped-query attention is recognized
 * in two forms: HF's repeat_kv (Reshape [.., KVH, 1, ..] -> Expand
 * [.., KVH, rep, ..] -> Reshape [.., KVH·rep, ..]: query head h reads kv
 * head h / rep, as Attention does) and batched-matmul broadcasting of a
 * single kv head (k and v with head dim 1). k and v must agree.
 *
 * Masks. The additive mask broadcasts into the scores without changing
 * their shape. A constant causal mask is recognized and becomes
 * mask=causal (no mask input): 0 where key j <= i + T - S (Attention's
 * bottom-right alignment), <= -1e4 elsewhere, over [S, T] with size-1
 * leading dims — as a Constant, or Tri{upper, k = T - S + 1} of a constant
 * (or expanded constant) whose every value is <= -1e4; reshapes and
 * expands that only add leading dims are looked through. Any value <= -1e4
 * gives the key weight exp(<= -1e4 + score range) = 0 in double, as the
 * mask kind does. A constant mask of all zeros is no mask. Anything else is
 * a custom mask input (cast to F32 from F16/BF16, which is exact; F64
 * attention with a custom mask is not fused: the mask input is F32).
 *
 * What changes numerically: the fused kernel computes scores, softmax and
 * the weighted sum in double and rounds once, where the unfused ops round
 * after each op; and a query row whose every key is masked gives zeros
 * where the unfused softmax gives NaN (0/0). */
#include "fuse.h"

#include <math.h>
#include <string.h>

/* A masked key's value: at most this (see the comment above). */
#define MASKED_AT_MOST (-1e4)
/* Nodes one operand's walk may pass (transposes, scales, a repeat_kv). */
#define WALK_MAX 16

static const int ident4[4] = {0, 1, 2, 3};
static const int bshd_perm[4] = {0, 2, 1, 3};   /* [B,H,S,D] <-> [B,S,H,D], its own inverse */

/* A tensor an operand can be read from: the logical operand ([B, H, S, D]
 * for q and v, [B, H, T, D] for k; rank 3 without H) is
 * Transpose{perm}(node). */
typedef struct {
  rlx_node node;
  int perm[4];
  double scale;        /* scales passed above it */
  int64_t kv_heads;    /* head count below a repeat_kv, 0 if none was passed */
  int depth;           /* the walk's nodes[0, depth) lie above it */
} walk_cand;

typedef struct {
  int n_cand, n_nodes;
  walk_cand cand[WALK_MAX + 1];
  rlx_node nodes[WALK_MAX + 4];
} walk;

typedef struct {
  int rank;                    /* of q, k, v: 3 or 4 */
  rlx_node in[3];              /* q, k, v as read */
  int perm[3][4];              /* Transpose emitted before an operand when not identity */
  rlx_node mask;               /* custom mask, else -1 */
  int mask_cast;               /* mask to F32 */
  int mask_unsqueeze;          /* rank-3 attention: [N, S, T] mask -> [N, 1, S, T] */
  int out_transpose;           /* emit Transpose{bshd_perm} after the attention */
  rlx_attention_desc d;
} attn_match;

/* ---------------------------------------------------------------- operand walks */

/* node = x * c, c * x or x / c with c a one-element float Constant that
 * does not change x's shape: *x and the factor (1/c for the division). */
static int scalar_scale(const fuse_ctx *c, rlx_node node, rlx_node *x, rlx_node *k, double *factor) {
  const ir_node *n = fuse_node(c, node);
  if (n->op != RLX_OP_Binary || (n->a.binop != RLX_BIN_MUL && n->a.binop != RLX_BIN_DIV)) return 0;
  for (int side = 0; side < 2; side++) {
    if (n->a.binop == RLX_BIN_DIV && side == 0) continue; /* c / x is no scale */
    double v;
    rlx_node other = n->in[1 - side];
    if (!fuse_scalar_constant(c, n->in[side], &v) || !isfinite(v) || v == 0 ||
        !fuse_shape_eq(&fuse_type(c, other)->shape, &fuse_type(c, node)->shape))
      continue;
    *x = other;
    *k = n->in[side];
    *factor = n->a.binop == RLX_BIN_DIV ? 1.0 / v : v;
    return 1;
  }
  return 0;
}

/* HF repeat_kv on the head axis ha of node r (rank 4, heads H):
 * r = Reshape(Expand(Reshape(w))) with w [.., KVH, ..], the inner Reshape
 * [.., KVH, 1, ..], the Expand [.., KVH, rep, ..], KVH * rep = H. */
static int repeat_kv(const fuse_ctx *c, rlx_node r, int ha, rlx_node *w, int64_t *kv_heads, walk *wk) {
  if (!fuse_is(c, r, RLX_OP_Reshape)) return 0;
  rlx_node e = fuse_node(c, r)->in[0];
  if (!fuse_is(c, e, RLX_OP_Expand) || !fuse_takeable(c, e)) return 0;
  rlx_node u = fuse_node(c, e)->in[0];
  if (!fuse_is(c, u, RLX_OP_Reshape) || !fuse_takeable(c, u)) return 0;
  rlx_node x = fuse_node(c, u)->in[0];
  const ir_shape *rs = &fuse_type(c, r)->shape, *es = &fuse_type(c, e)->shape;
  const ir_shape *us = &fuse_type(c, u)->shape, *xs = &fuse_type(c, x)->shape;
  if (rs->rank != 4 || es->rank != 5 || us->rank != 5 || xs->rank != 4) return 0;
  int64_t kvh = es->d[ha], rep = es->d[ha + 1];
  if (ir_dim_is_sym(kvh) || ir_dim_is_sym(rep) || ir_dim_is_sym(rs->d[ha]) || kvh < 1 || rep < 1 ||
      kvh * rep != rs->d[ha] || us->d[ha + 1] != 1)
    return 0;
  for (int i = 0, j = 0; i < 5; i++) {
    if (i == ha + 1) continue;
    if (us->d[i] != es->d[i] || xs->d[j] != es->d[i] || (i != ha && rs->d[j] != es->d[i])) return 0;
    j++;
  }
  wk->nodes[wk->n_nodes++] = r;
  wk->nodes[wk->n_nodes++] = e;
  wk->nodes[wk->n_nodes++] = u;
  *w = x;
  *kv_heads = kvh;
  return 1;
}

static void push_cand(walk *wk, rlx_node node, const int *perm, double scale, int64_t kv_heads) {
  walk_cand *cd = &wk->cand[wk->n_cand++];
  cd->node = node;
  memcpy(cd->perm, perm, sizeof cd->perm);
  cd->scale = scale;
  cd->kv_heads = kv_heads;
  cd->depth = wk->n_nodes;
}

/* Follows operand x (logical = Transpose{perm0}(x)) down through the nodes
 * only it reads: Transposes, scalar scales (allow_scale), one repeat_kv
 * (allow_repeat, rank 4). Every tensor on the way is a candidate. */
static void walk_operand(const fuse_ctx *c, rlx_node x, const int *perm0, int rank, int allow_scale,
                         int allow_repeat, walk *wk) {
  int perm[4];
  memcpy(perm, perm0, sizeof perm);
  double scale = 1.0;
  int64_t kv_heads = 0;
  wk->n_cand = wk->n_nodes = 0;
  push_cand(wk, x, perm, scale, kv_heads);
  while (wk->n_nodes + 3 <= WALK_MAX && fuse_takeable(c, x)) {
    const ir_node *n = fuse_node(c, x);
    rlx_node next, k;
    double f;
    if (n->op == RLX_OP_Transpose) {
      int p[4] = {0, 1, 2, 3};
      for (int j = 0; j < rank; j++) p[j] = (int)n->a.perm.v[perm[j]];
      memcpy(perm, p, sizeof p);
      wk->nodes[wk->n_nodes++] = x;
      next = n->in[0];
    } else if (allow_scale && scalar_scale(c, x, &next, &k, &f)) {
      scale *= f;
      wk->nodes[wk->n_nodes++] = x;
      if (fuse_takeable(c, k)) wk->nodes[wk->n_nodes++] = k;
    } else if (allow_repeat && rank == 4 && !kv_heads && repeat_kv(c, x, perm[1], &next, &kv_heads, wk)) {
      /* its three nodes are recorded; the head axis stays where it was */
    } else {
      break;
    }
    x = next;
    push_cand(wk, x, perm, scale, kv_heads);
  }
}

/* The transposes (and expands) among the nodes a candidate absorbs: the
 * copies it saves. */
static int saved_copies(const fuse_ctx *c, const walk *wk, const walk_cand *cd) {
  int saved = 0;
  for (int i = 0; i < cd->depth; i++) {
    int op = fuse_node(c, wk->nodes[i])->op;
    saved += op == RLX_OP_Transpose || op == RLX_OP_Expand;
  }
  return saved;
}

/* perm (logical = Transpose{perm}(node)) as read in layout target
 * (identity: bhsd / rank 3; bshd_perm: bshd): the Transpose that makes
 * the operand from node. */
static void perm_for(const int *perm, const int *target, int rank, int *out) {
  for (int j = 0; j < rank; j++) out[j] = perm[target[j]];
}

static int is_identity(const int *p, int rank) {
  for (int j = 0; j < rank; j++)
    if (p[j] != j) return 0;
  return 1;
}

/* The deepest candidate of wk readable in layout target without a
 * transpose, else the deepest candidate (read through one); only
 * candidates below a repeat_kv (peeled) or above every one (!peeled).
 * NULL if none qualifies. *emitted: a Transpose is needed. */
static const walk_cand *pick(const walk *wk, const int *target, int rank, int peeled, int *emitted) {
  const walk_cand *any = NULL, *exact = NULL;
  for (int i = 0; i < wk->n_cand; i++) {
    const walk_cand *cd = &wk->cand[i];
    if ((cd->kv_heads != 0) != peeled) continue;
    int p[4];
    perm_for(cd->perm, target, rank, p);
    any = cd;
    if (is_identity(p, rank)) exact = cd;
  }
  *emitted = !exact;
  return exact ? exact : any;
}

/* ---------------------------------------------------------------- masks */

/* A Constant's value at row i, column j of its last two dims (leading
 * dims all 1). */
static double mask_at(const ir_node *n, int64_t T, int64_t i, int64_t j) { return fuse_constant_at(n, i * T + j); }

static int leading_ones(const ir_shape *s) {
  for (int i = 0; i + 2 < s->rank; i++)
    if (s->d[i] != 1) return 0;
  return s->rank >= 2;
}

/* Every value of Constant n is a masked value. */
static int all_masked(const ir_node *n) {
  int64_t count = ir_numel(&n->out[0].shape);
  for (int64_t i = 0; i < count; i++)
    if (!(fuse_constant_at(n, i) <= MASKED_AT_MOST)) return 0;
  return 1;
}

/* The kind of additive mask mk over scores [..., S, T]: causal or none
 * when recognized, else custom. A recognized mask is dead after the
 * rewrite: the nodes from mk down that only the mask chain reads (a mask
 * shared by several layers stays for the others) are added to grp. */
static rlx_mask_kind classify_mask(const fuse_ctx *c, rlx_node mk, int64_t S, int64_t T, fuse_group *grp) {
  if (ir_dim_is_sym(S) || ir_dim_is_sym(T) || S < 1 || T < S) return RLX_MASK_CUSTOM;
  rlx_node chain[WALK_MAX + 3];
  int n_chain = 0;
  rlx_node x = mk;
  /* look through reshapes / expands that only add leading dims */
  for (;;) {
    const ir_node *n = fuse_node(c, x);
    const ir_shape *s = &n->out[0].shape;
    if (s->rank < 2 || s->d[s->rank - 2] != S || s->d[s->rank - 1] != T) return RLX_MASK_CUSTOM;
    if (n->op != RLX_OP_Reshape && n->op != RLX_OP_Expand) break;
    const ir_shape *in = &fuse_type(c, n->in[0])->shape;
    if (!leading_ones(in) || in->d[in->rank - 2] != S || in->d[in->rank - 1] != T || n_chain == WALK_MAX)
      return RLX_MASK_CUSTOM;
    chain[n_chain++] = x;
    x = n->in[0];
  }
  chain[n_chain++] = x;
  const ir_node *n = fuse_node(c, x);
  if (!leading_ones(&n->out[0].shape)) return RLX_MASK_CUSTOM;
  rlx_mask_kind kind = RLX_MASK_CUSTOM;
  if (n->op == RLX_OP_Constant && ir_is_float(n->out[0].dtype)) {
    int causal = 1, zeros = 1;
    for (int64_t i = 0; i < S; i++)
      for (int64_t j = 0; j < T; j++) {
        double v = mask_at(n, T, i, j);
        int visible = j <= i + (T - S);
        causal = causal && (visible ? v == 0 : v <= MASKED_AT_MOST);
        zeros = zeros && v == 0;
      }
    kind = causal ? RLX_MASK_CAUSAL : zeros ? RLX_MASK_NONE : RLX_MASK_CUSTOM;
  } else if (n->op == RLX_OP_Tri && n->a.upper && n->a.k == T - S + 1) {
    /* Tri over a constant, or over an expanded constant, of masked values */
    rlx_node f = n->in[0];
    const ir_node *fn = fuse_node(c, f);
    rlx_node base = fn->op == RLX_OP_Expand ? fn->in[0] : f;
    const ir_node *bn = fuse_node(c, base);
    if (bn->op == RLX_OP_Constant && ir_is_float(bn->out[0].dtype) && all_masked(bn)) {
      kind = RLX_MASK_CAUSAL;
      chain[n_chain++] = f;
      if (base != f) chain[n_chain++] = base;
    }
  }
  if (kind == RLX_MASK_CUSTOM) return kind;
  int dead = 0;
  while (dead < n_chain && fuse_takeable(c, chain[dead])) dead++;
  if (grp->n + dead > FUSE_MAX_GROUP) return RLX_MASK_CUSTOM;
  for (int i = 0; i < dead; i++) fuse_group_add(grp, chain[i]);
  return kind;
}

/* ---------------------------------------------------------------- the match */

/* scores chain: x = scales(MatMul(q, kt)); *qk and the scale product. */
static int scores_of(const fuse_ctx *c, rlx_node x, rlx_node *qk, double *scale, fuse_group *grp) {
  *scale = 1.0;
  for (int guard = 0; guard < WALK_MAX && fuse_takeable(c, x); guard++) {
    rlx_node next, k;
    double f;
    if (fuse_is(c, x, RLX_OP_MatMul)) {
      *qk = x;
      return fuse_group_add(grp, x);
    }
    if (!scalar_scale(c, x, &next, &k, &f)) return 0;
    *scale *= f;
    if (!fuse_group_add(grp, x) || (fuse_takeable(c, k) && !fuse_group_add(grp, k))) return 0;
    x = next;
  }
  return 0;
}

static int add_walk(fuse_group *grp, const walk *wk, const walk_cand *cd) {
  for (int i = 0; i < cd->depth; i++)
    if (!fuse_group_add(grp, wk->nodes[i])) return 0;
  return 1;
}

/* The operands and layout, given the two matmuls and the softmax input
 * chain. out_perm: the root is Transpose{out_perm}(pv) (NULL: root = pv). */
static int match_operands(const fuse_ctx *c, rlx_node qk, rlx_node pv, double scale, rlx_node mask,
                          const int64_t *out_perm, attn_match *m, fuse_group *grp) {
  const ir_node *qkn = fuse_node(c, qk), *pvn = fuse_node(c, pv);
  rlx_node qx = qkn->in[0], ktx = qkn->in[1], vx = pvn->in[1];
  const ir_shape *qs = &fuse_type(c, qx)->shape, *ks = &fuse_type(c, ktx)->shape, *vs = &fuse_type(c, vx)->shape;
  const int rank = qs->rank;
  if ((rank != 3 && rank != 4) || ks->rank != rank || vs->rank != rank) return 0;
  /* logical shapes: q [B, H, S, D], kt [B, Hk, D, T], v [B, Hv, T, Dv] (rank 3: no H) */
  const int h = rank == 4, sa = rank - 2, da = rank - 1;
  int64_t B = qs->d[0], H = h ? qs->d[1] : 1, D = qs->d[da], T = ks->d[da];
  int64_t Hk = h ? ks->d[1] : 1, Hv = h ? vs->d[1] : 1;
  if (ks->d[0] != B || vs->d[0] != B || ks->d[sa] != D || vs->d[sa] != T || vs->d[da] != D) return 0;
  if (ir_dim_is_sym(H) || ir_dim_is_sym(D) || H < 1 || D < 1 || (Hk != H && Hk != 1) || (Hv != H && Hv != 1))
    return 0;

  walk wq, wk, wv;
  int kt_perm[4] = {0, 1, 2, 3};
  kt_perm[rank - 2] = rank - 1; /* k = Transpose(kt) over the last two dims */
  kt_perm[rank - 1] = rank - 2;
  walk_operand(c, qx, ident4, rank, 1, 0, &wq);
  walk_operand(c, ktx, kt_perm, rank, 1, 1, &wk);
  walk_operand(c, vx, ident4, rank, 0, 1, &wv);

  /* Options in order of preference on a tie: grouped kv heads first, bshd first. */
  const int *targets[2] = {bshd_perm, ident4};
  int best = -1000, found = 0;
  const walk_cand *bq = NULL, *bk = NULL, *bv = NULL;
  const int *btarget = NULL;
  int bout = 0;
  for (int peeled = 1; peeled >= 0; peeled--)
    for (int t = 0; t < (h ? 2 : 1); t++) {
      const int *target = h ? targets[t] : ident4;
      int eq, ek, ev, out_t = 0;
      const walk_cand *cq = pick(&wq, target, rank, 0, &eq), *ck = pick(&wk, target, rank, peeled, &ek);
      const walk_cand *cv = pick(&wv, target, rank, peeled, &ev);
      if (!cq || !ck || !cv) continue;
      int64_t kvk = peeled ? ck->kv_heads : Hk, kvv = peeled ? cv->kv_heads : Hv;
      if (kvk != kvv || H % kvk) continue;
      /* the output: Attention gives the target layout; the root wants
       * Transpose{out_perm}(bhsd) or bhsd */
      if (out_perm) {
        int p[4];
        for (int j = 0; j < rank; j++) p[j] = target[out_perm[j]];
        if (!is_identity(p, rank)) continue; /* leave it to the group rooted at pv */
      } else {
        out_t = !is_identity(target, rank);
      }
      int score = saved_copies(c, &wq, cq) + saved_copies(c, &wk, ck) + saved_copies(c, &wv, cv) +
                  (out_perm != NULL) - eq - ek - ev - out_t;
      if (score > best) {
        best = score;
        found = 1;
        bq = cq, bk = ck, bv = cv, btarget = target, bout = out_t;
      }
    }
  if (!found) return 0;

  double total = scale * bq->scale * bk->scale;
  if (!isfinite(total) || !(total > 0)) return 0;
  const walk *walks[3] = {&wq, &wk, &wv};
  const walk_cand *picks[3] = {bq, bk, bv};
  for (int i = 0; i < 3; i++) {
    if (!add_walk(grp, walks[i], picks[i])) return 0;
    m->in[i] = picks[i]->node;
    int p[4] = {0, 1, 2, 3};
    perm_for(picks[i]->perm, btarget, rank, p);
    memcpy(m->perm[i], p, sizeof p);
  }
  m->rank = rank;
  m->out_transpose = bout;
  m->mask = mask;
  memset(&m->d, 0, sizeof m->d);
  m->d.num_heads = (int)H;
  m->d.num_kv_heads = (int)(bk->kv_heads ? bk->kv_heads : Hk);
  m->d.head_dim = (int)D;
  m->d.score_scale = total;
  m->d.layout = btarget == bshd_perm ? RLX_LAYOUT_BSHD : RLX_LAYOUT_BHSD;
  return 1;
}

/* root = pv = MatMul(Softmax(mask + scales(MatMul(q, kt))), v), or
 * root = Transpose(pv). */
static int match_attention(const fuse_ctx *c, rlx_node root, void *mv, fuse_group *grp) {
  attn_match *m = mv;
  rlx_node pv = root;
  const int64_t *out_perm = NULL;
  if (fuse_is(c, root, RLX_OP_Transpose)) {
    pv = fuse_node(c, root)->in[0];
    out_perm = fuse_node(c, root)->a.perm.v;
    if (fuse_type(c, root)->shape.rank != 4 || !fuse_takeable(c, pv)) return 0;
  }
  if (!fuse_is(c, pv, RLX_OP_MatMul)) return 0;
  rlx_node p = fuse_node(c, pv)->in[0];
  const ir_node *pn = fuse_node(c, p);
  const ir_type *pt = &pn->out[0];
  if (pn->op != RLX_OP_Softmax || !fuse_takeable(c, p) || pn->a.axis != pt->shape.rank - 1) return 0;
  if (pt->shape.rank != 3 && pt->shape.rank != 4) return 0;
  const int64_t S = pt->shape.d[pt->shape.rank - 2], T = pt->shape.d[pt->shape.rank - 1];

  rlx_node x = pn->in[0];
  /* x = scores (side -1), or x = scores + mask with the scores on side 0 or 1 */
  for (int side = -1; side < 2; side++) {
    fuse_group trial = *grp;
    rlx_node scores = x, mask = -1, qk;
    rlx_mask_kind kind = RLX_MASK_NONE;
    double scale;
    if (side >= 0) {
      if (!fuse_is_binop(c, x, RLX_BIN_ADD) || !fuse_takeable(c, x)) break;
      const ir_node *an = fuse_node(c, x);
      scores = an->in[side];
      mask = an->in[1 - side];
      if (!fuse_shape_eq(&fuse_type(c, scores)->shape, &pt->shape) ||
          !fuse_broadcasts_into(&fuse_type(c, mask)->shape, &pt->shape))
        continue;
      fuse_group_add(&trial, x);
    }
    if (!scores_of(c, scores, &qk, &scale, &trial)) continue;
    if (mask >= 0 && (kind = classify_mask(c, mask, S, T, &trial)) != RLX_MASK_CUSTOM) mask = -1;
    rlx_dtype mask_dtype = mask >= 0 ? fuse_type(c, mask)->dtype : RLX_F32;
    if (mask_dtype != RLX_F32 && mask_dtype != RLX_F16 && mask_dtype != RLX_BF16) continue;
    if (!fuse_group_add(&trial, p) || !fuse_group_add(&trial, pv) || !fuse_group_add(&trial, root)) return 0;
    if (!match_operands(c, qk, pv, scale, mask, out_perm, m, &trial) || (mask >= 0 && fuse_group_has(&trial, mask)))
      continue;
    m->d.mask_kind = kind;
    m->mask_cast = mask_dtype != RLX_F32;
    m->mask_unsqueeze = mask >= 0 && m->rank == 3 && fuse_type(c, mask)->shape.rank == 3;
    *grp = trial;
    return 1;
  }
  return 0;
}

static rlx_node emit_attention(rlx_graph *dst, const fuse_ctx *c, const void *mv, const rlx_node *map) {
  const attn_match *m = mv;
  rlx_node in[3];
  for (int i = 0; i < 3; i++) {
    in[i] = map[m->in[i]];
    if (!is_identity(m->perm[i], m->rank)) {
      int64_t p[4];
      for (int j = 0; j < m->rank; j++) p[j] = m->perm[i][j];
      in[i] = rlx_transpose(dst, in[i], m->rank, p);
    }
  }
  rlx_node mask = -1;
  if (m->mask >= 0) {
    mask = map[m->mask];
    if (m->mask_cast) mask = rlx_cast(dst, mask, RLX_F32);
    if (m->mask_unsqueeze) {
      const ir_shape *s = &fuse_type(c, m->mask)->shape;
      int64_t dims[] = {s->d[0], 1, s->d[1], s->d[2]};
      mask = rlx_reshape(dst, mask, 4, dims);
    }
  }
  rlx_node out = rlx_attention(dst, in[0], in[1], in[2], mask, &m->d);
  if (m->out_transpose) {
    int64_t p[] = {0, 2, 1, 3};
    out = rlx_transpose(dst, out, 4, p);
  }
  return out;
}

const fuse_pattern fuse_attention_pattern = {"attention", sizeof(attn_match), match_attention,
                                             emit_attention};
