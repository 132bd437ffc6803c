/* ops_rnn.c — ONNX's recurrent ops RNN, GRU and LSTM, unrolled over their
 * static sequence length into rlx ops.
 *
 * Why unrolled rather than a loop in the graph: the input projection of
 * every step is one GEMM over all S·B rows (X·Wᵀ + both biases, the bulk of
 * the FLOPs at batch sizes where it matters), and what remains per step is
 * the recurrent [B, H]·[H, G·H] product and a handful of elementwise ops the
 * fusion passes merge, each planned once in the arena with no per-step
 * dispatch, which is what ONNX Runtime's CPU kernels do by hand. The cost
 * is graph size (about 20 nodes a step), so a sequence length must be
 * known at import.
 *
 * Everything the ONNX spec lists is covered: directions forward, reverse
 * and bidirectional; the activation lists with their alpha/beta; clip;
 * sequence_lens (steps past a row's length keep its state and give zeros,
 * which also makes a reverse pass start at each row's own last step);
 * initial states; LSTM peepholes and input_forget; GRU's
 * linear_before_reset; layout 0 ([S, B, ...]) and 1 ([B, S, ...]). */
#include "onnx.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Steps a recurrent node may unroll to (a longer sequence is refused). */
#define OX_MAX_RNN_STEPS 100000

typedef enum { RNN_KIND, GRU_KIND, LSTM_KIND } rnn_kind;

/* One activation function of the activations attribute. */
typedef struct {
  int id;
  double alpha, beta;
} rnn_act;

enum { A_RELU, A_TANH, A_SIGMOID, A_AFFINE, A_LEAKY, A_THRESH, A_SCALED_TANH, A_HARD_SIGMOID, A_ELU, A_SOFTSIGN,
       A_SOFTPLUS };

static const struct {
  const char *name;
  double alpha, beta;   /* the defaults of the ONNX op of that name */
} act_table[] = {
    [A_RELU] = {"relu", 0, 0},           [A_TANH] = {"tanh", 0, 0},
    [A_SIGMOID] = {"sigmoid", 0, 0},     [A_AFFINE] = {"affine", 1.0, 0.0},
    [A_LEAKY] = {"leakyrelu", 0.01, 0},  [A_THRESH] = {"thresholdedrelu", 1.0, 0},
    [A_SCALED_TANH] = {"scaledtanh", 1.0, 1.0},   [A_HARD_SIGMOID] = {"hardsigmoid", 0.2, 0.5},
    [A_ELU] = {"elu", 1.0, 0},           [A_SOFTSIGN] = {"softsign", 0, 0},
    [A_SOFTPLUS] = {"softplus", 0, 0},
};

static int same_name(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
  return !*a && !*b;
}

typedef struct {
  ox_importer *im;
  const ox_node *n;
  rlx_graph *g;
  rnn_kind kind;
  int gates;          /* G: 1, 3 or 4 */
  int64_t hidden, batch, steps;
  double clip;        /* 0: none */
  int input_forget, linear_before_reset;
  rlx_node x;         /* [S, B, I] */
  rlx_node lens;      /* [B, 1] integers, or -1 (every row runs S steps) */
  rnn_act act[6];     /* per direction: f, g, h */
} rnn;

static rlx_node K(rnn *r, rlx_node like, double v) { return ox_scalar_like(r->im, like, v); }

static rlx_node activate(rnn *r, const rnn_act *a, rlx_node x) {
  rlx_graph *g = r->g;
  switch (a->id) {
  case A_RELU: return rlx_activation(g, RLX_ACT_RELU, x);
  case A_TANH: return rlx_activation(g, RLX_ACT_TANH, x);
  case A_SIGMOID: return rlx_activation(g, RLX_ACT_SIGMOID, x);
  case A_AFFINE: return rlx_add(g, rlx_mul(g, x, K(r, x, a->alpha)), K(r, x, a->beta));
  case A_LEAKY: return rlx_leaky_relu(g, x, a->alpha);
  case A_THRESH: return rlx_where(g, rlx_compare(g, RLX_CMP_GT, x, K(r, x, a->alpha)), x, K(r, x, 0));
  case A_SCALED_TANH: return rlx_mul(g, rlx_activation(g, RLX_ACT_TANH, rlx_mul(g, x, K(r, x, a->beta))), K(r, x, a->alpha));
  case A_HARD_SIGMOID: return rlx_clamp(g, rlx_add(g, rlx_mul(g, x, K(r, x, a->alpha)), K(r, x, a->beta)), 0, 1);
  case A_ELU: {
    rlx_node neg = rlx_mul(g, rlx_sub(g, rlx_activation(g, RLX_ACT_EXP, x), K(r, x, 1)), K(r, x, a->alpha));
    return rlx_where(g, rlx_compare(g, RLX_CMP_LT, x, K(r, x, 0)), neg, x);
  }
  case A_SOFTSIGN: return rlx_div(g, x, rlx_add(g, rlx_activation(g, RLX_ACT_ABS, x), K(r, x, 1)));
  default: return rlx_activation(g, RLX_ACT_SOFTPLUS, x);
  }
}

/* An activation of a gate's input, clipped first when clip is set. */
static rlx_node apply(rnn *r, const rnn_act *a, rlx_node x) {
  rlx_graph *g = r->g;
  if (r->clip > 0) x = rlx_clamp(g, x, -r->clip, r->clip);
  return activate(r, a, x);
}

/* The activations of both directions, with their defaults. */
static rlx_status read_acts(rnn *r, int dirs) {
  static const int dflt[][3] = {[RNN_KIND] = {A_TANH}, [GRU_KIND] = {A_SIGMOID, A_TANH},
                                [LSTM_KIND] = {A_SIGMOID, A_TANH, A_TANH}};
  int per = r->kind == RNN_KIND ? 1 : r->kind == GRU_KIND ? 2 : 3;
  const ox_attr *names = ox_attr_get(r->n, "activations");
  const ox_attr *al = ox_attr_get(r->n, "activation_alpha"), *be = ox_attr_get(r->n, "activation_beta");
  int64_t given = names ? names->n_strings : 0;
  if (given && given != per && given != per * dirs)
    return ox_node_fail(r->im, r->n, RLX_ERR_FORMAT, "%lld activations, %d or %d expected", (long long)given, per, per * dirs);
  for (int i = 0; i < per * dirs; i++) {
    rnn_act *a = &r->act[i];
    a->id = dflt[r->kind][i % per];
    if (given) {
      const char *s = names->strings[i % given];
      a->id = -1;
      for (int k = 0; k < (int)(sizeof act_table / sizeof *act_table); k++)
        if (same_name(s, act_table[k].name)) a->id = k;
      if (a->id < 0) return ox_node_fail(r->im, r->n, RLX_ERR_UNSUPPORTED, "activation \"%s\"", s);
    }
    a->alpha = al && i < al->n_floats ? al->floats[i] : act_table[a->id].alpha;
    a->beta = be && i < be->n_floats ? be->floats[i] : act_table[a->id].beta;
  }
  return RLX_OK;
}

/* Row d of a [D, ...] tensor without its first axis. */
static rlx_node dir_row(rlx_graph *g, rlx_node x, int d) {
  int64_t dims[RLX_MAX_RANK];
  int rank = rlx_node_type(g, x, NULL, dims);
  return rank < 1 ? -1 : rlx_reshape(g, rlx_narrow(g, x, 0, d, 1), rank - 1, dims + 1);
}

static rlx_node transpose2(rlx_graph *g, rlx_node x) {
  static const int64_t perm[] = {1, 0};
  return rlx_transpose(g, x, 2, perm);
}

/* a + b where a missing (-1) operand is zero. */
static rlx_node add0(rlx_graph *g, rlx_node a, rlx_node b) { return a < 0 ? b : b < 0 ? a : rlx_add(g, a, b); }

/* Rows [row0, row0 + rows) of direction d of weight input i (W or R,
 * [D, G·H, cols]), transposed: [cols, rows]. When the weight is an
 * initializer the transpose is made here as a Constant, which the CPU GEMM
 * packs once and keeps across steps and runs (a Transpose node would be
 * packed again at every step that reads it). */
static rlx_node weight_t(rnn *r, int i, rlx_node w, int d, int64_t row0, int64_t rows) {
  rlx_graph *g = r->g;
  int64_t dims[RLX_MAX_RANK];
  rlx_dtype dt;
  int rank = rlx_node_type(g, w, &dt, dims);
  const ox_graph *mg = r->im->model->graph;
  const ox_tensor *t = NULL;
  for (int k = 0; k < mg->n_inits && rank == 3; k++)
    if (!strcmp(mg->inits[k].name, r->n->inputs[i])) t = &mg->inits[k];
  const char *op = rlx_node_op_name(g, w);
  if (t && t->data && op && !strcmp(op, "Param") && ox_rlx_dtype(t->data_type) == (int)dt && t->rank == 3 &&
      !memcmp(t->dims, dims, sizeof(int64_t) * 3)) {
    const uint8_t *src = ox_aligned_data(r->im->arena, t);
    size_t es = rlx_dtype_nbytes(dt, 1);
    int64_t cols = dims[2], td[2] = {cols, rows};
    uint8_t *buf = malloc((size_t)(rows * cols) * es + 1);
    if (!src || !buf) {
      free(buf);
      return -1;
    }
    for (int64_t j = 0; j < rows; j++)
      for (int64_t c = 0; c < cols; c++)
        memcpy(buf + (size_t)(c * rows + j) * es, src + (size_t)(((d * dims[1]) + row0 + j) * cols + c) * es, es);
    rlx_node out = rlx_constant(g, dt, 2, td, buf);
    free(buf);
    return out;
  }
  return transpose2(g, rlx_narrow(g, dir_row(g, w, d), 0, row0, rows));
}

/* One direction: Y steps into y[t] (by time index), final h (and c). Each
 * gate k has its own [S, B, H] input projection (one GEMM over all steps,
 * both biases added) and its own recurrent matrix, so a step reads
 * contiguous rows and no gate is cut out of a wider product. */
static rlx_status run_dir(rnn *r, int d, int reverse, rlx_node w, rlx_node rw, rlx_node bias, rlx_node h0, rlx_node c0,
                          rlx_node peep, rlx_node *y, rlx_node *h_out, rlx_node *c_out) {
  rlx_graph *g = r->g;
  int64_t H = r->hidden, G = r->gates, S = r->steps, B = r->batch;
  const rnn_act *f = &r->act[d * (r->kind == RNN_KIND ? 1 : r->kind == GRU_KIND ? 2 : 3)];
  const rnn_act *gg = r->kind == RNN_KIND ? f : f + 1, *hh = r->kind == LSTM_KIND ? f + 2 : gg;
  int64_t dims[RLX_MAX_RANK];
  int xr = rlx_node_type(g, r->x, NULL, dims);
  if (xr != 3) return ox_node_fail(r->im, r->n, RLX_ERR_SHAPE, "X of rank %d (3 expected)", xr);
  int64_t flat[2] = {-1, dims[2]}, sbh[3] = {S, B, H}, bh[2] = {B, H};
  rlx_node xflat = rlx_reshape(g, r->x, 2, flat), xw[4], rt[4];
  rlx_node bd = bias < 0 ? -1 : dir_row(g, bias, d);
  rlx_node rbh = -1;   /* GRU with linear_before_reset: Rb of the h gate, added inside r ⊙ (...) */
  for (int k = 0; k < G; k++) {
    rlx_node wt = weight_t(r, 1, w, d, k * H, H);
    if ((rt[k] = weight_t(r, 2, rw, d, k * H, H)) < 0 || wt < 0) return ox_check(r->im, r->n, -1);
    xw[k] = rlx_matmul(g, xflat, wt);
    if (bd >= 0) {
      rlx_node wb = rlx_narrow(g, bd, 0, k * H, H), rb = rlx_narrow(g, bd, 0, (G + k) * H, H);
      if (r->kind == GRU_KIND && r->linear_before_reset && k == 2) rbh = rb;
      else wb = rlx_add(g, wb, rb);
      xw[k] = rlx_add(g, xw[k], wb);
    }
    xw[k] = rlx_reshape(g, xw[k], 3, sbh);
  }
  rlx_node p_i = -1, p_o = -1, p_f = -1;
  if (peep >= 0) {
    p_i = rlx_narrow(g, peep, 0, 0, H);
    p_o = rlx_narrow(g, peep, 0, H, H);
    p_f = rlx_narrow(g, peep, 0, 2 * H, H);
  }
  rlx_node h = h0, c = c0;   /* -1: zeros (no initial state) */
  for (int64_t s = 0; s < S; s++) {
    int64_t t = reverse ? S - 1 - s : s;
    rlx_node z[4];   /* gate k's input at step t plus its recurrent term (none for GRU's h gate) */
    for (int k = 0; k < G; k++) {
      z[k] = rlx_reshape(g, rlx_narrow(g, xw[k], 0, t, 1), 2, bh);
      if (h >= 0 && !(r->kind == GRU_KIND && k == 2)) z[k] = rlx_add(g, z[k], rlx_matmul(g, h, rt[k]));
    }
    rlx_node hn, cn = -1;
    if (r->kind == RNN_KIND) {
      hn = apply(r, f, z[0]);
    } else if (r->kind == LSTM_KIND) {   /* gate order i, o, f, c */
      rlx_node gi = z[0], go = z[1], gf = z[2], gc = z[3];
      if (peep >= 0 && c >= 0) {
        gi = rlx_add(g, gi, rlx_mul(g, p_i, c));
        gf = rlx_add(g, gf, rlx_mul(g, p_f, c));
      }
      rlx_node i_ = apply(r, f, gi), c_ = apply(r, gg, gc);
      rlx_node f_ = r->input_forget ? rlx_sub(g, K(r, i_, 1), i_) : apply(r, f, gf);
      cn = add0(g, c < 0 ? -1 : rlx_mul(g, f_, c), rlx_mul(g, i_, c_));
      if (peep >= 0) go = rlx_add(g, go, rlx_mul(g, p_o, cn));
      hn = rlx_mul(g, apply(r, f, go), activate(r, hh, cn));   /* the cell state is no gate: not clipped */
    } else {   /* GRU: gate order z, r, h */
      rlx_node zg = apply(r, f, z[0]), rg = apply(r, f, z[1]), rec;
      if (r->linear_before_reset) rec = rlx_mul(g, rg, add0(g, h < 0 ? -1 : rlx_matmul(g, h, rt[2]), rbh));
      else rec = h < 0 ? -1 : rlx_matmul(g, rlx_mul(g, rg, h), rt[2]);
      rlx_node ht = apply(r, gg, add0(g, z[2], rec));
      /* (1 − z) ⊙ h̃ + z ⊙ H = h̃ + z ⊙ (H − h̃) */
      hn = rlx_add(g, ht, rlx_mul(g, zg, h < 0 ? rlx_activation(g, RLX_ACT_NEG, ht) : rlx_sub(g, h, ht)));
    }
    if (r->lens >= 0) {   /* rows whose sequence ended keep their state and give zeros */
      rlx_node live = rlx_compare(g, RLX_CMP_LT, ox_scalar_like(r->im, r->lens, (double)t), r->lens);
      rlx_node zero = K(r, hn, 0);
      y[t] = rlx_where(g, live, hn, zero);
      hn = rlx_where(g, live, hn, h < 0 ? zero : h);
      if (cn >= 0) cn = rlx_where(g, live, cn, c < 0 ? zero : c);
    } else y[t] = hn;
    h = hn;
    c = cn;
    rlx_status st = ox_check(r->im, r->n, h);
    if (st) return st;
  }
  *h_out = h;
  *c_out = c;
  return RLX_OK;
}

/* Input i of the node, or -1 when omitted (-2 with the failure set). */
static rlx_node opt_in(rnn *r, int i) {
  if (!ox_has_in(r->n, i)) return -1;
  rlx_node v = ox_in(r->im, r->n, i);
  return v < 0 ? -2 : v;
}

static rlx_status recurrent(ox_importer *im, const ox_node *n, rnn_kind kind) {
  rlx_graph *g = im->g;
  rnn r = {.im = im, .n = n, .g = g, .kind = kind, .gates = kind == RNN_KIND ? 1 : kind == GRU_KIND ? 3 : 4, .lens = -1};
  const char *dir = ox_attr_str(n, "direction", "forward");
  int dirs = !strcmp(dir, "bidirectional") ? 2 : 1, reverse = !strcmp(dir, "reverse");
  if (dirs == 1 && !reverse && strcmp(dir, "forward")) return ox_node_fail(im, n, RLX_ERR_INVALID, "direction \"%s\"", dir);
  int layout = (int)ox_attr_int(n, "layout", 0);
  r.clip = ox_attr_float(n, "clip", 0);
  r.input_forget = (int)ox_attr_int(n, "input_forget", 0);
  r.linear_before_reset = (int)ox_attr_int(n, "linear_before_reset", 0);
  rlx_status st = read_acts(&r, dirs);
  if (st) return st;
  rlx_node x = ox_in(im, n, 0), w = ox_in(im, n, 1), rw = ox_in(im, n, 2);
  rlx_node bias = opt_in(&r, 3), lens = opt_in(&r, 4), h0 = opt_in(&r, 5);
  rlx_node c0 = kind == LSTM_KIND ? opt_in(&r, 6) : -1, peep = kind == LSTM_KIND ? opt_in(&r, 7) : -1;
  if (x < 0 || w < 0 || rw < 0 || bias == -2 || lens == -2 || h0 == -2 || c0 == -2 || peep == -2) return im->err;
  int64_t xd[RLX_MAX_RANK], wd[RLX_MAX_RANK];
  rlx_dtype xt;
  if (rlx_node_type(g, x, &xt, xd) != 3 || rlx_node_type(g, w, NULL, wd) != 3)
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "X and W must be of rank 3");
  if (!ir_is_float(xt)) return ox_node_fail(im, n, RLX_ERR_DTYPE, "X of an integer type");
  int64_t H = ox_attr_int(n, "hidden_size", wd[1] / r.gates);
  if (wd[0] != dirs || wd[1] != r.gates * H || H < 1)
    return ox_node_fail(im, n, RLX_ERR_SHAPE, "W of shape [%lld, %lld, ...] for %d directions of hidden size %lld",
                        (long long)wd[0], (long long)wd[1], dirs, (long long)H);
  static const int64_t swap01[] = {1, 0, 2};
  if (layout) {   /* [B, S, ...] in and out */
    x = rlx_transpose(g, x, 3, swap01);
    if (h0 >= 0) h0 = rlx_transpose(g, h0, 3, swap01);
    if (c0 >= 0) c0 = rlx_transpose(g, c0, 3, swap01);
  }
  r.x = x;
  r.hidden = H;
  r.steps = layout ? xd[1] : xd[0];
  r.batch = layout ? xd[0] : xd[1];
  if (ir_dim_is_sym(r.steps))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a sequence length not known at import (a symbolic dim: "
                        "bind it at load, --bind)");
  if (r.steps > OX_MAX_RNN_STEPS)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "%lld steps (at most %d)", (long long)r.steps, OX_MAX_RNN_STEPS);
  if (lens >= 0) {
    int64_t cnt;
    const int64_t *lv = ox_in_ints(im, n, 4, &cnt);
    int full = lv != NULL;
    for (int64_t b = 0; full && b < cnt; b++) full = lv[b] == r.steps;
    if (!full) {
      int64_t b1[2] = {-1, 1};
      r.lens = rlx_reshape(g, lens, 2, b1);
    }
  }
  rlx_node *y = calloc((size_t)(dirs * r.steps) + 1, sizeof *y);
  rlx_node hs[2], cs[2], ys[2];
  if (!y) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int d = 0; d < dirs && !st; d++) {
    rlx_node *yd = y + d * r.steps;
    st = run_dir(&r, d, reverse || d == 1, w, rw, bias,
                 h0 < 0 ? -1 : dir_row(g, h0, d), c0 < 0 ? -1 : dir_row(g, c0, d), peep < 0 ? -1 : dir_row(g, peep, d),
                 yd, &hs[d], &cs[d]);
    if (st || !n->n_outputs || !n->outputs[0][0]) continue;
    int64_t one[4] = {1, 1, r.batch, H};
    for (int64_t t = 0; t < r.steps; t++) yd[t] = rlx_reshape(g, yd[t], 4, one);
    ys[d] = r.steps > 1 ? rlx_concat(g, (int)r.steps, yd, 0) : yd[0];   /* [S, 1, B, H] */
  }
  /* Y [S, D, B, H] (layout 1: [B, S, D, H]); Y_h, Y_c [D, B, H] (layout 1: [B, D, H]). */
  int64_t bh[3] = {1, r.batch, H};
  for (int k = 0; k < 3 && !st && k < n->n_outputs; k++) {
    if (!n->outputs[k][0]) continue;
    if (k == 2 && kind != LSTM_KIND) break;
    rlx_node parts[2];
    for (int d = 0; d < dirs; d++) {
      rlx_node v = k == 0 ? ys[d] : k == 1 ? hs[d] : cs[d];
      if (k == 2 && v < 0) v = rlx_mul(g, hs[d], K(&r, hs[d], 0));   /* no steps touched c */
      parts[d] = k == 0 ? v : rlx_reshape(g, v, 3, bh);
    }
    rlx_node v = dirs > 1 ? rlx_concat(g, dirs, parts, k == 0 ? 1 : 0) : parts[0];
    if (layout) {
      static const int64_t ylay[] = {2, 0, 1, 3};
      v = k == 0 ? rlx_transpose(g, v, 4, ylay) : rlx_transpose(g, v, 3, swap01);
    }
    st = ox_set_out(im, n, k, v);
  }
  free(y);
  return st;
}

rlx_status ox_op_rnn(ox_importer *im, const ox_node *n) {
  rnn_kind k = !strcmp(n->op_type, "LSTM") ? LSTM_KIND : !strcmp(n->op_type, "GRU") ? GRU_KIND : RNN_KIND;
  return recurrent(im, n, k);
}
