/* test_fuse_attention — the attention pattern (src/pass/fuse_attention.c)
 * through pass_fuse: the forms of scaled dot-product attention a graph
 * writes (scales, masks, layouts, grouped heads) fuse into one Attention
 * with the right attributes, the near misses stay apart, and the fused
 * graph computes what the unfused one does (fuse_test_util.h).
 */
#include "fuse_test_util.h"

/* ---------------------------------------------------------------- attention */

enum { SCALE_NONE, SCALE_MUL, SCALE_DIV, SCALE_Q, SCALE_NEG, SCALE_VECTOR };
enum { MASK_NONE, MASK_INPUT, MASK_INPUT_LEFT, MASK_CAUSAL, MASK_TRI, MASK_TOPLEFT, MASK_ZEROS };

typedef struct {
  rlx_dtype t;
  int rank3;            /* [N, S, D] heads folded into the batch */
  int bshd;             /* q, k, v are [B, S, H, D] projections transposed in the graph */
  int k_twice;          /* kᵀ by two transposes (torch: transpose(1, 2) then transpose(-1, -2)) */
  int out_transpose;    /* the result goes back to [B, S, H, D] */
  int scale, mask;
  int H, KVH, repeat;   /* KVH < H: repeat_kv when repeat, else broadcast (KVH 1) */
  int S, T, D, Dv;
  int softmax_axis;     /* -1 normally */
  int scores_out;       /* the scores are also an output */
  int cast_softmax;     /* f16 scores, softmax in f32, cast back (mismatched dtypes) */
} attn_spec;

/* Constant of n f32 values converted to dtype t. */
static rlx_node constant_of(rlx_graph *g, rlx_dtype t, int rank, const int64_t *dims, const double *v, int n) {
  void *data = calloc((size_t)n, 8);
  for (int i = 0; i < n; i++) store(t, data, i, v[i]);
  rlx_node c = rlx_constant(g, t, rank, dims, data);
  free(data);
  return c;
}

/* HF's repeat_kv: [B, KVH, L, D] -> [B, KVH, 1, L, D] -> expand rep -> [B, H, L, D]. */
static rlx_node repeat_kv_of(rlx_graph *g, rlx_node x, const attn_spec *a, int64_t len, int64_t d) {
  int64_t rep = a->H / a->KVH;
  int64_t d5[] = {2, a->KVH, 1, len, d}, e5[] = {2, a->KVH, rep, len, d}, d4[] = {2, a->H, len, d};
  return rlx_reshape(g, rlx_expand(g, rlx_reshape(g, x, 5, d5), 5, e5), 4, d4);
}

static rlx_node transpose4(rlx_graph *g, rlx_node x, int a, int b, int c, int d) {
  int64_t p[] = {a, b, c, d};
  return rlx_transpose(g, x, 4, p);
}

/* softmax(q kᵀ · scale + mask) v as an exporter writes it, per spec. */
static rlx_graph *attn_graph(const attn_spec *a) {
  rlx_graph *g = rlx_graph_new("attn");
  const int64_t B = 2, H = a->H, KVH = a->KVH, S = a->S, T = a->T, D = a->D, Dv = a->Dv;
  rlx_node q, k, v, kt;
  if (a->rank3) {
    int64_t qd[] = {B * H, S, D}, kd[] = {B * H, T, D}, vd[] = {B * H, T, Dv}, p[] = {0, 2, 1};
    q = rlx_input(g, "q", a->t, 3, qd);
    k = rlx_input(g, "k", a->t, 3, kd);
    v = rlx_input(g, "v", a->t, 3, vd);
    kt = rlx_transpose(g, k, 3, p);
  } else {
    if (a->bshd) {
      int64_t qd[] = {B, S, H, D}, kd[] = {B, T, KVH, D}, vd[] = {B, T, KVH, Dv};
      rlx_node xq = rlx_input(g, "q", a->t, 4, qd), xk = rlx_input(g, "k", a->t, 4, kd);
      q = transpose4(g, xq, 0, 2, 1, 3);
      v = transpose4(g, rlx_input(g, "v", a->t, 4, vd), 0, 2, 1, 3);
      k = a->k_twice || a->repeat ? transpose4(g, xk, 0, 2, 1, 3) : -1;
      kt = k < 0 ? transpose4(g, xk, 0, 2, 3, 1) : -1;
    } else {
      int64_t qd[] = {B, H, S, D}, kd[] = {B, KVH, T, D}, vd[] = {B, KVH, T, Dv};
      q = rlx_input(g, "q", a->t, 4, qd);
      k = rlx_input(g, "k", a->t, 4, kd);
      v = rlx_input(g, "v", a->t, 4, vd);
      kt = -1;
    }
    if (a->repeat) {
      k = repeat_kv_of(g, k, a, T, D);
      v = repeat_kv_of(g, v, a, T, Dv);
    }
    if (kt < 0) kt = transpose4(g, k, 0, 1, 3, 2);
  }
  int64_t one[] = {1};
  if (a->scale == SCALE_Q) q = rlx_mul(g, q, constant_of(g, a->t, 1, one, (double[]){0.5}, 1));
  rlx_node s = rlx_matmul(g, q, kt), scores = s;
  if (a->scale == SCALE_MUL) s = rlx_mul(g, s, constant_of(g, a->t, 1, one, (double[]){0.5}, 1));
  if (a->scale == SCALE_DIV) s = rlx_div(g, s, constant_of(g, a->t, 0, NULL, (double[]){2.0}, 1));
  if (a->scale == SCALE_NEG) s = rlx_mul(g, s, constant_of(g, a->t, 1, one, (double[]){-0.5}, 1));
  if (a->scale == SCALE_VECTOR) {
    double vals[64];
    for (int j = 0; j < T; j++) vals[j] = 0.5 + 0.01 * j;
    int64_t td[] = {T};
    s = rlx_mul(g, s, constant_of(g, a->t, 1, td, vals, (int)T));
  }
  rlx_node mask = -1;
  if (a->mask == MASK_INPUT || a->mask == MASK_INPUT_LEFT) {
    int64_t md4[] = {B, 1, 1, T}, md3[] = {B * H, S, T};
    mask = rlx_input(g, "mask", a->t, a->rank3 ? 3 : 4, a->rank3 ? md3 : md4);
  } else if (a->mask != MASK_NONE) {
    double vals[64 * 64];
    for (int i = 0; i < S; i++)
      for (int j = 0; j < T; j++) {
        int visible = a->mask == MASK_TOPLEFT ? j <= i : j <= i + (T - S);
        vals[i * T + j] = a->mask == MASK_ZEROS || visible ? 0 : -INFINITY;
        if (a->mask == MASK_TRI) vals[i * T + j] = -1e9;
      }
    int64_t md[] = {1, 1, S, T};
    int r = a->mask == MASK_TRI || a->rank3 ? 2 : 4;
    mask = constant_of(g, a->t, r, md + 4 - r, vals, (int)(S * T));
    if (a->mask == MASK_TRI) mask = rlx_tri(g, mask, 1, T - S + 1);
  }
  if (mask >= 0) s = a->mask == MASK_INPUT_LEFT ? rlx_add(g, mask, s) : rlx_add(g, s, mask);
  rlx_node p = a->cast_softmax ? rlx_cast(g, rlx_softmax(g, rlx_cast(g, s, RLX_F32), a->softmax_axis), a->t)
                               : rlx_softmax(g, s, a->softmax_axis);
  rlx_node o = rlx_matmul(g, p, v);
  if (a->out_transpose) o = transpose4(g, o, 0, 2, 1, 3);
  rlx_node outs[] = {o, scores};
  rlx_graph_set_outputs(g, a->scores_out ? 2 : 1, outs);
  CHECK(rlx_graph_status(g) == RLX_OK, "attention graph: %s", rlx_last_error());
  return g;
}

static attn_spec attn_base(void) {
  attn_spec a = {0};
  a.t = RLX_F32;
  a.scale = SCALE_MUL;
  a.mask = MASK_INPUT;
  a.H = a.KVH = 2;
  a.S = a.T = 5;
  a.D = a.Dv = 4;
  a.softmax_axis = -1;
  return a;
}

static const ir_node *check_attention(const char *what, const attn_spec *a, int want_layout, int want_mask,
                                      double want_scale, int want_kvh, int want_transposes) {
  rlx_graph *g = attn_graph(a);
  rlx_graph *f = fuse_checked(what, g, 1, a->t);
  const ir_node *n = find_op(f, RLX_OP_Attention);
  static ir_node copy;
  CHECK(n != NULL, "%s: an Attention", what);
  if (n) {
    copy = *n;
    CHECK(n->a.layout == want_layout || a->rank3, "%s: layout %lld", what, (long long)n->a.layout);
    CHECK(n->a.mask == want_mask, "%s: mask %s", what, ir_mask_names[n->a.mask]);
    CHECK(fabs(n->a.score_scale - want_scale) < 1e-12, "%s: scale %g", what, n->a.score_scale);
    CHECK(n->a.num_heads == (a->rank3 ? 1 : a->H) && n->a.num_kv_heads == want_kvh && n->a.head_dim == a->D,
          "%s: heads %lld kv %lld dim %lld", what, (long long)n->a.num_heads, (long long)n->a.num_kv_heads,
          (long long)n->a.head_dim);
    CHECK(count_op(f, RLX_OP_Transpose) == want_transposes, "%s: %d transposes left, want %d", what,
          count_op(f, RLX_OP_Transpose), want_transposes);
    CHECK(!find_op(f, RLX_OP_MatMul) && !find_op(f, RLX_OP_Softmax) && !find_op(f, RLX_OP_Binary) &&
          !find_op(f, RLX_OP_Expand) && !find_op(f, RLX_OP_Tri), "%s: the unfused ops are gone", what);
    CHECK(want_mask != RLX_MASK_CUSTOM ? n->n_in == 3 && !find_op(f, RLX_OP_Constant) : n->n_in == 4,
          "%s: mask input iff custom", what);
  }
  rlx_graph_free(g);
  rlx_graph_free(f);
  return n ? &copy : NULL;
}

static void test_attention(void) {
  attn_spec a = attn_base();
  for (int di = 0; di < 3; di++) {
    a.t = dtypes[di];
    check_attention(dtype_names[di], &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  }
  a = attn_base();
  a.t = RLX_F64;
  a.mask = MASK_NONE;
  check_attention("f64 without a mask", &a, RLX_LAYOUT_BHSD, RLX_MASK_NONE, 0.5, 2, 0);

  a = attn_base();
  a.mask = MASK_INPUT_LEFT;
  a.scale = SCALE_DIV;
  check_attention("mask on the left, divide", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.scale = SCALE_Q;
  check_attention("scale on q", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.scale = SCALE_NONE;
  check_attention("no scale", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 1.0, 2, 0);

  /* exporter layouts: [B, S, H, D] projections */
  a = attn_base();
  a.bshd = 1;
  a.out_transpose = 1;
  check_attention("bshd, kt by one transpose", &a, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.k_twice = 1;
  check_attention("bshd, kt by two transposes", &a, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.out_transpose = 0;
  check_attention("bshd without the output transpose", &a, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0.5, 2, 1);

  /* masks */
  a = attn_base();
  a.mask = MASK_CAUSAL;
  check_attention("causal constant", &a, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0.5, 2, 0);
  a.T = 7;
  check_attention("causal constant, T > S", &a, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0.5, 2, 0);
  a.mask = MASK_TRI;
  check_attention("causal by Tri", &a, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0.5, 2, 0);
  a.mask = MASK_TOPLEFT;
  check_attention("top-left aligned constant is custom", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.mask = MASK_ZEROS;
  check_attention("a zero mask is none", &a, RLX_LAYOUT_BHSD, RLX_MASK_NONE, 0.5, 2, 0);

  /* grouped kv heads */
  a = attn_base();
  a.H = 4;
  a.KVH = 2;
  a.repeat = 1;
  check_attention("repeat_kv bhsd", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 2, 0);
  a.bshd = 1;
  a.out_transpose = 1;
  a.mask = MASK_CAUSAL;
  check_attention("repeat_kv bshd, causal", &a, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0.5, 2, 0);
  a = attn_base();
  a.H = 4;
  a.KVH = 1;
  check_attention("one kv head by broadcasting", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 1, 0);

  /* heads folded into the batch */
  a = attn_base();
  a.rank3 = 1;
  check_attention("rank 3", &a, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0.5, 1, 0);
  a.mask = MASK_CAUSAL;
  a.T = 6;
  check_attention("rank 3 causal", &a, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0.5, 1, 0);

  /* two layers sharing one causal mask and one scale constant (as after CSE) */
  double minus_inf = -INFINITY, half = 0.5;
  int64_t qd[] = {2, 2, 5, 4}, sq[] = {5, 5}, one[] = {1};
  rlx_graph *g = rlx_graph_new("two_layers");
  rlx_node full = rlx_expand(g, constant_of(g, RLX_F32, 0, NULL, &minus_inf, 1), 2, sq);
  rlx_node mask = rlx_tri(g, full, 1, 1), scale = constant_of(g, RLX_F32, 1, one, &half, 1);
  rlx_node h = rlx_input(g, "q", RLX_F32, 4, qd), k = rlx_input(g, "k", RLX_F32, 4, qd);
  for (int layer = 0; layer < 2; layer++) {
    rlx_node s = rlx_add(g, rlx_mul(g, rlx_matmul(g, h, transpose4(g, k, 0, 1, 3, 2)), scale), mask);
    h = rlx_matmul(g, rlx_softmax(g, s, -1), h);
  }
  rlx_graph_set_outputs(g, 1, &h);
  rlx_graph *f = fuse_checked("two layers sharing a mask", g, 2, RLX_F32);
  CHECK(count_op(f, RLX_OP_Attention) == 2 && find_op(f, RLX_OP_Attention)->a.mask == RLX_MASK_CAUSAL,
        "both layers causal");
  rlx_graph_free(g);
  rlx_graph_free(f);

  /* must not fire */
  attn_spec neg[8];
  int n_neg = 0;
  neg[n_neg] = attn_base(), neg[n_neg++].scale = SCALE_VECTOR;  /* a per-key scale */
  neg[n_neg] = attn_base(), neg[n_neg++].scale = SCALE_NEG;     /* a negative scale */
  neg[n_neg] = attn_base(), neg[n_neg++].softmax_axis = 2;      /* softmax over queries */
  neg[n_neg] = attn_base(), neg[n_neg++].scores_out = 1;        /* the scores are read elsewhere */
  neg[n_neg] = attn_base(), neg[n_neg++].Dv = 3;                /* v's head dim differs */
  neg[n_neg] = attn_base(), neg[n_neg++].t = RLX_F64;           /* an F64 mask cannot be an F32 input */
  neg[n_neg] = attn_base(), neg[n_neg].t = RLX_F16, neg[n_neg++].cast_softmax = 1; /* softmax in f32 of f16 scores */
  for (int i = 0; i < n_neg; i++) {
    rlx_graph *g = attn_graph(&neg[i]);
    rlx_graph *f = fuse(g, NULL);
    CHECK(!find_op(f, RLX_OP_Attention) && count_op(f, RLX_OP_Softmax) == 1, "attention negative %d fused", i);
    rlx_graph_free(g);
    rlx_graph_free(f);
  }
}

int main(void) {
  test_attention();
  return check_report();
}
