/* bert.c — BERT-family encoders from a Hugging Face folder (rlx_embedder
 * of rlx.h): the graph built from config.json, weights bound in place, a
 * batch of texts run as one padded graph.
 *
 * The graph takes tokens and token types [B, S] (B texts padded to S
 * tokens; both dims symbolic), an additive key mask [B, 1, 1, S] (0 or
 * -inf: padding never reaches a real token) and pooling weights [B, S, 1]:
 * mean, CLS, last token and mean/sqrt(len) pooling are all a weighted sum
 * of the last hidden states, so the host only writes the weights (max
 * pooling adds them instead: -1e9 on padding, then a max over S). Post-LN
 * layers as BertModel: attention (one Attention op over [B, S, H·D] with
 * the mask), residual + LayerNorm, GELU feed-forward, residual + LayerNorm.
 * RoBERTa / XLM-RoBERTa count positions from pad_token_id + 1. nomic-bert
 * (NomicBertModel) has no position table: one fused Wqkv projection, rotary
 * positions on q and k, a SwiGLU feed-forward (fc2(fc11(x)·silu(fc12(x)))),
 * biases only where its config asks for them. A sequence-classification
 * folder (BertForSequenceClassification, XLMRobertaForSequenceClassification:
 * cross-encoder rerankers) ends in its head on the first token instead. */
#include "hf_folder.h"
#include "wordpiece.h"

#include "../ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BERT_PAD_MULTIPLE 8   /* S rounded up to it: fewer distinct plans */

/* A param bound from the file: one tensor, or (on the CPU) the query, key
 * and value projections of a layer as one, concatenated along n (their
 * three products at a few rows each were a third of the work per call). */
typedef struct {
  rlx_file_tensor t[3];
  int parts;
  int transposed;            /* bound as its [k, n] transpose, a copy */
  char name[200];            /* the param's: the tensor's, or made up for the parts */
} bert_weight;

struct rlx_embedder {
  hf_folder hf;
  wp_tokenizer *tok;
  rlx_graph *g;
  rlx_session *s;
  int64_t hidden, n_layer, n_head, n_ff, max_pos, n_types, pos_offset, n_labels;
  int32_t pad_id;            /* RoBERTa: its tokens keep position pad_id, the others count from pad_id + 1 */
  double eps;
  rlx_act act;
  int classifier;            /* 1 BERT pooler + classifier, 2 RoBERTa's classification head */
  int nomic;                 /* nomic-bert: rotary positions, fused Wqkv, SwiGLU */
  int qkv_bias, fc1_bias, fc2_bias;
  rlx_rope_desc rope;
  rlx_pooling pooling;
  int normalize, sqrt_len;
  int64_t max_tokens, batch;
  char prefix[16];
  bert_weight *bound;
  int n_bound, cap_bound;
  int transpose_f32;         /* F32 matrices bound transposed (CPU: see linear) */
  rlx_status st;             /* first error while building */
  char err[512];             /* its message (later builders fail on its -1 and say so) */
};

/* ---------------------------------------------------------------- graph */

static rlx_node keep_error(rlx_embedder *e) {
  snprintf(e->err, sizeof e->err, "%s", rlx_last_error());
  return -1;
}

/* The tensor pfx + name into *t, checked to be [d0] or [d0, d1] (d0 < 0:
 * any) of a type read here; 0, or -1 with e->st set. */
static int file_tensor(rlx_embedder *e, const char *pfx, const char *name, int64_t d0, int64_t d1, rlx_file_tensor *t) {
  if (e->st) return -1;
  char full[256];
  snprintf(full, sizeof full, "%s%s", pfx, name);
  if ((e->st = hf_tensor(&e->hf, full, t))) return keep_error(e);
  if (t->rank != (d1 ? 2 : 1) || (d0 >= 0 && t->dims[0] != d0) || (d1 && t->dims[1] != d1)) {
    e->st = rlx_set_error(RLX_ERR_INVALID, "%s: tensor %s has rank %d and dims [%lld, %lld], expected [%lld, %lld]",
                          e->hf.dir, full, t->rank, (long long)t->dims[0], t->rank > 1 ? (long long)t->dims[1] : 0LL,
                          (long long)d0, (long long)d1);
    return keep_error(e);
  }
  /* block-quantized (a GGUF's) only as a matrix */
  if (!t->supported ||
      (t->dtype != RLX_F32 && t->dtype != RLX_F16 && t->dtype != RLX_BF16 && !(d1 && rlx_dtype_is_block(t->dtype)))) {
    e->st = rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: tensor %s is %s (F32, F16 or BF16 are read; quantized as a matrix)",
                          e->hf.dir, full, t->type_name);
    return keep_error(e);
  }
  return 0;
}

/* The param for w, to be bound after compile. */
static rlx_node bound_param(rlx_embedder *e, const bert_weight *w) {
  if (e->n_bound == e->cap_bound) {
    int cap = e->cap_bound ? 2 * e->cap_bound : 64;
    bert_weight *p = realloc(e->bound, (size_t)cap * sizeof *p);
    if (!p) {
      e->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_embedder_load: out of memory");
      return keep_error(e);
    }
    e->bound = p;
    e->cap_bound = cap;
  }
  e->bound[e->n_bound++] = *w;
  const rlx_file_tensor *t = &w->t[0];
  int64_t n = 0;
  for (int i = 0; i < w->parts; i++) n += w->t[i].dims[0];
  if (w->transposed) return rlx_param(e->g, w->name, t->dtype, 2, (const int64_t[]){t->dims[1], n});
  return rlx_param(e->g, w->name, t->dtype, t->rank, (const int64_t[]){n, t->rank > 1 ? t->dims[1] : 0});
}

/* The tensor pfx + name, checked to be [d0] or [d0, d1] (d0 < 0: any),
 * as a param bound after compile (transposed: an F32 matrix as [d1, d0]). */
static rlx_node weight_as(rlx_embedder *e, const char *pfx, const char *name, int64_t d0, int64_t d1, int transposed) {
  bert_weight w = {.parts = 1};
  if (file_tensor(e, pfx, name, d0, d1, &w.t[0])) return -1;
  w.transposed = transposed && w.t[0].dtype == RLX_F32;
  snprintf(w.name, sizeof w.name, "%s", w.t[0].name);
  return bound_param(e, &w);
}

static rlx_node weight(rlx_embedder *e, const char *pfx, const char *name, int64_t d0, int64_t d1) {
  return weight_as(e, pfx, name, d0, d1, 0);
}

static rlx_node f32(rlx_graph *g, rlx_node x) {
  rlx_dtype t;
  if (rlx_node_type(g, x, &t, NULL) < 0) return -1;
  return t == RLX_F32 ? x : rlx_dtype_is_block(t) ? rlx_dequantize(g, x) : rlx_cast(g, x, RLX_F32);
}

/* x [..., k] times the [n, k] weight pfx + name.weight transposed, plus
 * its bias. A 16-bit weight is read as stored by DequantMatMul. An F32
 * weight on the CPU is bound as a transposed copy made once at load: the
 * CPU MatMul takes its right operand as [k, n] (and packs it once), where
 * a Transpose node in the graph would copy the whole matrix on every run
 * (10 MB per run for MiniLM: a third of a one-sentence embedding's time).
 * The CUDA backend reads a weight's Transpose in place, so there the
 * mapped bytes are bound. */
static rlx_node linear_as(rlx_embedder *e, rlx_node x, const char *pfx, const char *name, int64_t n, int64_t k, int bias) {
  char w[200], b[200];
  snprintf(w, sizeof w, "%s.weight", name);
  snprintf(b, sizeof b, "%s.bias", name);
  rlx_node wn = weight_as(e, pfx, w, n, k, e->transpose_f32), bn = bias ? weight(e, pfx, b, n, 0) : 0;
  if (wn < 0 || bn < 0) return -1;
  rlx_dtype t;
  rlx_node_type(e->g, wn, &t, NULL);
  rlx_node y = t != RLX_F32       ? rlx_dequant_matmul(e->g, x, wn)
               : e->transpose_f32 ? rlx_matmul(e->g, x, wn)
                                  : rlx_matmul(e->g, x, rlx_transpose(e->g, wn, 2, (const int64_t[]){1, 0}));
  return bias ? rlx_add(e->g, y, f32(e->g, bn)) : y;
}

static rlx_node linear(rlx_embedder *e, rlx_node x, const char *pfx, const char *name, int64_t n, int64_t k) {
  return linear_as(e, x, pfx, name, n, k, 1);
}

/* A BERT layer's query, key and value projections of x: on the CPU (F32
 * weights bound transposed) one product with the three weights side by
 * side, [H, 3H], narrowed into q, k and v; otherwise three products. */
static void qkv(rlx_embedder *e, rlx_node x, const char *layer, rlx_node out[3]) {
  static const char *const parts[3] = {"query", "key", "value"};
  const int64_t H = e->hidden;
  char name[200];
  bert_weight w = {.parts = 3, .transposed = 1}, b = {.parts = 3};
  int fuse = e->transpose_f32;
  for (int i = 0; i < 3 && fuse; i++) {
    snprintf(name, sizeof name, "%sattention.self.%s.weight", layer, parts[i]);
    if (file_tensor(e, e->prefix, name, H, H, &w.t[i])) return;
    snprintf(name, sizeof name, "%sattention.self.%s.bias", layer, parts[i]);
    if (file_tensor(e, e->prefix, name, H, 0, &b.t[i])) return;
    fuse = w.t[i].dtype == RLX_F32 && b.t[i].dtype == RLX_F32;
  }
  if (!fuse) {
    for (int i = 0; i < 3; i++) {
      snprintf(name, sizeof name, "%sattention.self.%s", layer, parts[i]);
      out[i] = linear(e, x, e->prefix, name, H, H);
    }
    return;
  }
  snprintf(w.name, sizeof w.name, "%s%sattention.self.qkv.weight", e->prefix, layer);
  snprintf(b.name, sizeof b.name, "%s%sattention.self.qkv.bias", e->prefix, layer);
  rlx_node wn = bound_param(e, &w), bn = bound_param(e, &b);
  if (wn < 0 || bn < 0) return;
  rlx_node y = rlx_add(e->g, rlx_matmul(e->g, x, wn), bn);
  for (int i = 0; i < 3; i++) out[i] = rlx_narrow(e->g, y, 2, i * H, H);
}

static rlx_node layer_norm(rlx_embedder *e, rlx_node x, const char *name) {
  char w[200], b[200];
  snprintf(w, sizeof w, "%s.weight", name);
  snprintf(b, sizeof b, "%s.bias", name);
  rlx_node gw = weight(e, e->prefix, w, e->hidden, 0), gb = weight(e, e->prefix, b, e->hidden, 0);
  return rlx_layer_norm(e->g, x, f32(e->g, gw), f32(e->g, gb), -1, e->eps);
}

/* nomic-bert's post-LN layers over the embeddings x. */
static rlx_node nomic_layers(rlx_embedder *e, rlx_node x, rlx_node mask, const rlx_attention_desc *ad) {
  rlx_graph *g = e->g;
  const int64_t H = e->hidden, S = rlx_dim_sym(g, "S");
  rlx_node pos = rlx_input(g, "pos", RLX_I32, 1, (const int64_t[]){S});
  char n[160];
  for (int64_t l = 0; l < e->n_layer && !e->st; l++) {
#define NAME(s) (snprintf(n, sizeof n, "encoder.layers.%lld.%s", (long long)l, s), n)
    rlx_node qkv = linear_as(e, x, e->prefix, NAME("attn.Wqkv"), 3 * H, H, e->qkv_bias);
    rlx_node q = rlx_rope(g, rlx_narrow(g, qkv, 2, 0, H), pos, &e->rope);
    rlx_node k = rlx_rope(g, rlx_narrow(g, qkv, 2, H, H), pos, &e->rope);
    rlx_node a = rlx_attention(g, q, k, rlx_narrow(g, qkv, 2, 2 * H, H), mask, ad);
    x = rlx_add(g, x, linear_as(e, a, e->prefix, NAME("attn.out_proj"), H, H, e->qkv_bias));
    x = layer_norm(e, x, NAME("norm1"));
    rlx_node up = linear_as(e, x, e->prefix, NAME("mlp.fc11"), e->n_ff, H, e->fc1_bias);
    rlx_node gate = linear_as(e, x, e->prefix, NAME("mlp.fc12"), e->n_ff, H, e->fc1_bias);
    rlx_node h = rlx_mul(g, up, rlx_activation(g, RLX_ACT_SILU, gate));
    x = rlx_add(g, x, linear_as(e, h, e->prefix, NAME("mlp.fc2"), H, e->n_ff, e->fc2_bias));
    x = layer_norm(e, x, NAME("norm2"));
#undef NAME
  }
  return x;
}

static rlx_node encoder(rlx_embedder *e) {
  rlx_graph *g = e->g;
  const int64_t B = rlx_dim_sym(g, "B"), S = rlx_dim_sym(g, "S"), H = e->hidden;
  rlx_node tokens = rlx_input(g, "tokens", RLX_I32, 2, (const int64_t[]){B, S});
  rlx_node types = rlx_input(g, "types", RLX_I32, 2, (const int64_t[]){B, S});
  rlx_node mask = rlx_input(g, "mask", RLX_F32, 4, (const int64_t[]){B, 1, 1, S});
  rlx_node x = f32(g, rlx_gather(g, weight(e, e->prefix, "embeddings.word_embeddings.weight", -1, H), tokens, 0));
  if (!e->nomic) {
    rlx_node pos = weight(e, e->prefix, "embeddings.position_embeddings.weight", e->max_pos, H);
    if (e->pos_offset)  /* RoBERTa's position ids, written by the host (see run_batch) */
      pos = rlx_gather(g, pos, rlx_input(g, "pos", RLX_I32, 2, (const int64_t[]){B, S}), 0);
    else
      pos = rlx_narrow(g, pos, 0, 0, S);
    x = rlx_add(g, x, f32(g, pos));
  }
  if (e->n_types > 0)
    x = rlx_add(g, x, f32(g, rlx_gather(g, weight(e, e->prefix, "embeddings.token_type_embeddings.weight", e->n_types, H), types, 0)));
  x = layer_norm(e, x, e->nomic ? "emb_ln" : "embeddings.LayerNorm");
  rlx_attention_desc ad = {.num_heads = (int)e->n_head, .num_kv_heads = (int)e->n_head,
                           .head_dim = (int)(H / e->n_head), .mask_kind = RLX_MASK_CUSTOM};
  if (e->nomic) return nomic_layers(e, x, mask, &ad);
  char n[160];
  for (int64_t l = 0; l < e->n_layer && !e->st; l++) {
#define NAME(s) (snprintf(n, sizeof n, "encoder.layer.%lld.%s", (long long)l, s), n)
    rlx_node p[3] = {-1, -1, -1};
    qkv(e, x, NAME(""), p);
    if (e->st) break;
    rlx_node a = rlx_attention(g, p[0], p[1], p[2], mask, &ad);
    x = rlx_add(g, x, linear(e, a, e->prefix, NAME("attention.output.dense"), H, H));
    x = layer_norm(e, x, NAME("attention.output.LayerNorm"));
    rlx_node h = rlx_activation(g, e->act, linear(e, x, e->prefix, NAME("intermediate.dense"), e->n_ff, H));
    x = rlx_add(g, x, linear(e, h, e->prefix, NAME("output.dense"), H, e->n_ff));
    x = layer_norm(e, x, NAME("output.LayerNorm"));
#undef NAME
  }
  return x;
}

/* The outputs: pooled embeddings [B, H], or the classifier's logits [B, n_labels]. */
static rlx_node head(rlx_embedder *e, rlx_node x) {
  rlx_graph *g = e->g;
  const int64_t B = rlx_dim_sym(g, "B"), S = rlx_dim_sym(g, "S"), H = e->hidden;
  if (!e->classifier) {
    rlx_node pool = rlx_input(g, "pool", RLX_F32, 3, (const int64_t[]){B, S, 1});
    if (e->pooling == RLX_POOLING_MAX)  /* pool: 0 on the text, -1e9 on padding (sentence-transformers' fill) */
      return rlx_reduce(g, RLX_REDUCE_MAX, rlx_add(g, x, pool), 1, (const int64_t[]){1}, 0);
    return rlx_reduce(g, RLX_REDUCE_SUM, rlx_mul(g, x, pool), 1, (const int64_t[]){1}, 0);
  }
  rlx_node cls = rlx_reshape(g, rlx_narrow(g, x, 1, 0, 1), 2, (const int64_t[]){B, H});
  if (e->classifier == 1) {  /* BertForSequenceClassification: the encoder's pooler, then classifier */
    cls = rlx_activation(g, RLX_ACT_TANH, linear(e, cls, e->prefix, "pooler.dense", H, H));
    return linear(e, cls, "", "classifier", e->n_labels, H);
  }
  cls = rlx_activation(g, RLX_ACT_TANH, linear(e, cls, "", "classifier.dense", H, H));
  return linear(e, cls, "", "classifier.out_proj", e->n_labels, H);
}

/* ---------------------------------------------------------------- the folder's files */

/* A boolean field of config.json (def when absent or null). */
static int config_flag(const hf_folder *h, const char *key, int def) {
  int v;
  return json_bool(&h->config, hf_config_tok(h, key), &v) ? v : def;
}

/* nomic-bert's config.json (NomicBertConfig: GPT-2 style names). */
static rlx_status read_nomic_config(rlx_embedder *e) {
  hf_folder *h = &e->hf;
  rlx_status st;
  double frac, base;
  if ((st = hf_config_int(h, "n_embd", 1, 1 << 16, -1, &e->hidden)) ||
      (st = hf_config_int(h, "n_layer", 1, 1024, -1, &e->n_layer)) ||
      (st = hf_config_int(h, "n_head", 1, 1024, -1, &e->n_head)) ||
      (st = hf_config_int(h, "n_positions", 1, 1 << 20, 2048, &e->max_pos)) ||
      (st = hf_config_int(h, "type_vocab_size", 0, 1 << 10, 2, &e->n_types)) ||
      (st = hf_config_num(h, "layer_norm_epsilon", 1e-12, &e->eps)) ||
      (st = hf_config_num(h, "rotary_emb_fraction", 1.0, &frac)) ||
      (st = hf_config_num(h, "rotary_emb_base", 10000.0, &base)))
    return st;
  int64_t inner = hf_config_tok(h, "n_inner");
  if (json_kind(&h->config, inner) == JSON_NULL) e->n_ff = 4 * e->hidden;
  else if ((st = hf_config_int(h, "n_inner", 1, 1 << 20, -1, &e->n_ff))) return st;
  if (e->hidden % e->n_head)
    return rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: n_embd %lld is not a multiple of n_head %lld", h->dir,
                         (long long)e->hidden, (long long)e->n_head);
  int64_t D = e->hidden / e->n_head, n_rot = (int64_t)(frac * (double)D);
  if (!(frac > 0 && frac <= 1) || n_rot < 2 || n_rot % 2 || !(base > 0))
    return rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: rotary_emb_fraction %g or rotary_emb_base %g is out of range",
                         h->dir, frac, base);
  int64_t act = hf_config_tok(h, "activation_function"), scaling = hf_config_tok(h, "rotary_scaling_factor");
  if ((act >= 0 && !json_str_eq(&h->config, act, "swiglu")) || config_flag(h, "prenorm", 0) ||
      config_flag(h, "use_rms_norm", 0) || config_flag(h, "parallel_block", 0) ||
      json_kind(&h->config, scaling) != JSON_NULL)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/config.json: nomic_bert is read with activation_function swiglu, post-LN "
                         "LayerNorm, sequential blocks and no rotary_scaling_factor", h->dir);
  e->nomic = 1;
  e->qkv_bias = config_flag(h, "qkv_proj_bias", 1);
  e->fc1_bias = config_flag(h, "mlp_fc1_bias", 1);
  e->fc2_bias = config_flag(h, "mlp_fc2_bias", 1);
  e->rope = (rlx_rope_desc){(int)D, (int)n_rot, config_flag(h, "rotary_emb_interleaved", 0) ? RLX_ROPE_NORMAL : RLX_ROPE_NEOX,
                            base, 1.0};
  return RLX_OK;
}

static rlx_status read_config(rlx_embedder *e) {
  hf_folder *h = &e->hf;
  int64_t type = hf_config_tok(h, "model_type");
  int roberta = json_str_eq(&h->config, type, "roberta") || json_str_eq(&h->config, type, "xlm-roberta");
  int nomic = json_str_eq(&h->config, type, "nomic_bert");
  if (!roberta && !nomic && !json_str_eq(&h->config, type, "bert"))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/config.json: model_type is not bert, roberta, xlm-roberta or nomic_bert",
                         h->dir);
  rlx_status st;
  if (nomic && (st = read_nomic_config(e))) return st;
  int64_t pad = 0;
  if (!nomic && ((st = hf_config_int(h, "hidden_size", 1, 1 << 16, -1, &e->hidden)) ||
                 (st = hf_config_int(h, "num_hidden_layers", 1, 1024, -1, &e->n_layer)) ||
                 (st = hf_config_int(h, "num_attention_heads", 1, 1024, -1, &e->n_head)) ||
                 (st = hf_config_int(h, "intermediate_size", 1, 1 << 20, -1, &e->n_ff)) ||
                 (st = hf_config_int(h, "max_position_embeddings", 1, 1 << 20, 512, &e->max_pos)) ||
                 (st = hf_config_int(h, "type_vocab_size", 0, 1 << 10, 2, &e->n_types)) ||
                 (st = hf_config_int(h, "pad_token_id", 0, 1 << 24, roberta ? 1 : 0, &pad)) ||
                 (st = hf_config_num(h, "layer_norm_eps", 1e-12, &e->eps))))
    return st;
  if (e->hidden % e->n_head)
    return rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: hidden_size %lld is not a multiple of num_attention_heads %lld",
                         h->dir, (long long)e->hidden, (long long)e->n_head);
  e->pos_offset = roberta ? pad + 1 : 0;
  e->pad_id = (int32_t)pad;
  if (e->pos_offset >= e->max_pos)
    return rlx_set_error(RLX_ERR_FORMAT, "%s/config.json: pad_token_id %lld leaves no positions", h->dir, (long long)pad);
  int64_t act = hf_config_tok(h, "hidden_act");
  if (act < 0 || json_str_eq(&h->config, act, "gelu")) e->act = RLX_ACT_GELU;
  else if (json_str_eq(&h->config, act, "gelu_new") || json_str_eq(&h->config, act, "gelu_pytorch_tanh")) e->act = RLX_ACT_GELU_TANH;
  else if (json_str_eq(&h->config, act, "relu")) e->act = RLX_ACT_RELU;
  else return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/config.json: hidden_act is not gelu, gelu_new or relu", h->dir);
  /* the architecture: a classification head, or the encoder alone */
  int64_t arch = json_first(&h->config, hf_config_tok(h, "architectures"));
  for (; arch >= 0 && json_kind(&h->config, arch) == JSON_STRING; arch = json_next(&h->config, arch)) {
    char *a = json_strdup(&h->config, arch, NULL);
    if (a && strstr(a, "ForSequenceClassification")) e->classifier = roberta ? 2 : 1;
    free(a);
    break;
  }
  if (nomic && e->classifier)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s/config.json: a nomic_bert classifier head is not read", h->dir);
  static const char *const prefixes[] = {"", "bert.", "roberta.", "model."};
  for (int i = 0; i < 4; i++) {
    char name[64];
    snprintf(name, sizeof name, "%sembeddings.word_embeddings.weight", prefixes[i]);
    if (hf_has_tensor(h, name)) {
      strcpy(e->prefix, prefixes[i]);
      break;
    }
    if (i == 3) return rlx_set_error(RLX_ERR_INVALID, "%s: no embeddings.word_embeddings.weight in the weights", h->dir);
  }
  if (e->classifier) {
    rlx_file_tensor t;
    if ((st = hf_tensor(h, e->classifier == 1 ? "classifier.weight" : "classifier.out_proj.weight", &t))) return st;
    e->n_labels = t.dims[0];
    if (e->classifier == 1) {  /* the pooler lives under the encoder's prefix */
      char name[64];
      snprintf(name, sizeof name, "%spooler.dense.weight", e->prefix);
      if (!hf_has_tensor(h, name)) return rlx_set_error(RLX_ERR_INVALID, "%s: no %s in the weights", h->dir, name);
    }
  }
  return RLX_OK;
}

static rlx_status read_tokenizer(rlx_embedder *e) {
  hf_folder *h = &e->hf;
  char *text = NULL, *path;
  size_t len;
  int json = hf_exists(h, "tokenizer.json");
  if (!json && !hf_exists(h, "vocab.txt"))
    return rlx_set_error(RLX_ERR_IO, "%s: no tokenizer.json or vocab.txt", h->dir);
  if (!(path = hf_path(h, json ? "tokenizer.json" : "vocab.txt"))) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  rlx_status st = hf_read_text(h, json ? "tokenizer.json" : "vocab.txt", &text, &len);
  if (!st && json) {
    st = wp_load_json(text, len, path, &e->tok);
  } else if (!st) {
    int lower = 1;
    char *ct;
    json_doc d;
    if (hf_exists(h, "tokenizer_config.json") && !hf_read_json(h, "tokenizer_config.json", &ct, &d)) {
      json_bool(&d, json_get(&d, 0, "do_lower_case"), &lower);
      json_free(&d);
      free(ct);
    }
    st = wp_load_vocab(text, len, path, lower, &e->tok);
  }
  free(text);
  free(path);
  return st;
}

/* Pooling and normalization from modules.json / the Pooling module's
 * config.json, and the length from sentence_bert_config.json. */
static rlx_status read_sentence_config(rlx_embedder *e, rlx_pooling *pooling, int *normalize, int64_t *max_len) {
  hf_folder *h = &e->hf;
  char *text;
  json_doc d;
  rlx_status st;
  *pooling = RLX_POOLING_MEAN;
  *normalize = 0;
  *max_len = 0;
  char pool_dir[256] = "1_Pooling";
  if (hf_exists(h, "modules.json")) {
    if ((st = hf_read_json(h, "modules.json", &text, &d))) return st;
    for (int64_t m = json_first(&d, 0); m >= 0 && json_kind(&d, 0) == JSON_ARRAY && (uint32_t)m < d.tok[0].next;
         m = json_next(&d, m)) {
      int64_t type = json_get(&d, m, "type"), path = json_get(&d, m, "path");
      char *t = json_strdup(&d, type, NULL);
      if (t && strstr(t, "Normalize")) *normalize = 1;
      if (t && strstr(t, "Pooling") && json_kind(&d, path) == JSON_STRING && d.tok[path].len < 200) {
        int64_t n = json_str(&d, path, pool_dir);
        pool_dir[n] = 0;
        if (strstr(pool_dir, "..")) pool_dir[0] = 0;
      }
      free(t);
    }
    json_free(&d);
    free(text);
  }
  char rel[300];
  snprintf(rel, sizeof rel, "%s/config.json", pool_dir);
  if (pool_dir[0] && hf_exists(h, rel)) {
    if ((st = hf_read_json(h, rel, &text, &d))) return st;
    int on = 0;
    if (json_bool(&d, json_get(&d, 0, "pooling_mode_cls_token"), &on) && on) *pooling = RLX_POOLING_CLS;
    else if (json_bool(&d, json_get(&d, 0, "pooling_mode_lasttoken"), &on) && on) *pooling = RLX_POOLING_LAST;
    else if (json_bool(&d, json_get(&d, 0, "pooling_mode_mean_sqrt_len_tokens"), &on) && on) e->sqrt_len = 1;
    else if (!(json_bool(&d, json_get(&d, 0, "pooling_mode_mean_tokens"), &on) && on) &&
             json_bool(&d, json_get(&d, 0, "pooling_mode_max_tokens"), &on) && on)
      *pooling = RLX_POOLING_MAX;
    json_free(&d);
    free(text);
    if (st) return st;
  }
  if (hf_exists(h, "sentence_bert_config.json")) {
    if ((st = hf_read_json(h, "sentence_bert_config.json", &text, &d))) return st;
    json_int(&d, json_get(&d, 0, "max_seq_length"), 1, INT32_MAX, max_len);
    json_free(&d);
    free(text);
  }
  return RLX_OK;
}

/* ---------------------------------------------------------------- load */

/* Binds w: a single tensor in place where it is aligned; a
 * transposed or concatenated one as a copy ([k, n] with the parts' columns
 * side by side; vectors end to end). */
static rlx_status bind(rlx_embedder *e, const bert_weight *w) {
  const char *name = w->name;
  const rlx_file_tensor *t = &w->t[0];
  size_t el = rlx_dtype_is_block(t->dtype) ? 1 : t->dtype == RLX_F32 ? 4 : 2;
  if (!w->transposed && w->parts == 1)
    return (uintptr_t)t->data % el ? rlx_set_param(e->s, name, t->data, t->nbytes)
                                   : rlx_set_param_ref(e->s, name, t->data, t->nbytes);
  size_t bytes = 0;
  int64_t n = 0, k = t->rank > 1 ? t->dims[1] : 1;
  for (int p = 0; p < w->parts; p++) bytes += w->t[p].nbytes, n += w->t[p].dims[0];
  uint8_t *dst = malloc(bytes);
  if (!dst) return rlx_set_error(RLX_ERR_NOMEM, "rlx_embedder_load: out of memory");
  int64_t col = 0;
  for (int p = 0; p < w->parts; p++) {
    const rlx_file_tensor *tp = &w->t[p];
    const uint8_t *src = tp->data;
    if (!w->transposed) {
      memcpy(dst + col * el * (size_t)k, src, tp->nbytes);
    } else {
      for (int64_t i = 0; i < tp->dims[0]; i++)
        for (int64_t j = 0; j < k; j++) memcpy(dst + 4 * (size_t)(j * n + col + i), src + 4 * (size_t)(i * k + j), 4);
    }
    col += tp->dims[0];
  }
  rlx_status st = rlx_set_param(e->s, name, dst, bytes);
  free(dst);
  return st;
}

void rlx_embedder_free(rlx_embedder *e) {
  if (!e) return;
  rlx_session_free(e->s);
  rlx_graph_free(e->g);
  wp_free(e->tok);
  free(e->bound);
  hf_close(&e->hf);
  free(e);
}

rlx_status rlx_embedder_load(const char *path, const rlx_embedder_options *opt, rlx_embedder **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_embedder_load: out is NULL");
  *out = NULL;
  if (!path) return rlx_set_error(RLX_ERR_INVALID, "rlx_embedder_load: path is NULL");
  rlx_embedder_options o = opt ? *opt : (rlx_embedder_options){0};
  if ((unsigned)o.pooling >= RLX_POOLING_COUNT || o.normalize < -1 || o.normalize > 1 || o.max_tokens < 0 || o.batch < 0)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_embedder_load: bad options (pooling %d, normalize %d, max_tokens %lld, batch %d)",
                         (int)o.pooling, o.normalize, (long long)o.max_tokens, o.batch);
  rlx_embedder *e = calloc(1, sizeof *e);
  if (!e) return rlx_set_error(RLX_ERR_NOMEM, "rlx_embedder_load: out of memory");
  rlx_pooling pooling;
  int normalize;
  int64_t max_len;
  /* a folder, or a GGUF file of one (gguf_bert.c) */
  struct stat sb;
  rlx_status st = path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? hf_open_gguf(path, &e->hf) : hf_open(path, &e->hf);
  if (!st) st = read_config(e);
  if (!st) st = read_tokenizer(e);
  if (!st) st = read_sentence_config(e, &pooling, &normalize, &max_len);
  if (st) {
    rlx_embedder_free(e);
    return st;
  }
  e->pooling = o.pooling ? o.pooling : pooling;
  if (o.pooling) e->sqrt_len = 0;
  e->normalize = o.normalize ? o.normalize > 0 : normalize;
  int64_t limit = e->max_pos - e->pos_offset;
  if (limit < 1) {
    st = rlx_set_error(RLX_ERR_FORMAT, "%s: max_position_embeddings %lld leaves no position past the padding id's %lld",
                       e->hf.dir, (long long)e->max_pos, (long long)e->pos_offset);
    rlx_embedder_free(e);
    return st;
  }
  e->max_tokens = o.max_tokens ? o.max_tokens : max_len ? max_len : wp_max_length(e->tok) ? wp_max_length(e->tok) : limit;
  if (e->max_tokens > limit) e->max_tokens = limit;
  e->batch = o.batch ? o.batch : 32;
  e->transpose_f32 = rlx_compile_device(o.compile.device) != RLX_DEVICE_CUDA;
  e->g = rlx_graph_new("bert");
  rlx_node y = head(e, encoder(e));
  if (!e->st) rlx_graph_set_outputs(e->g, 1, &y);
  st = e->st ? rlx_set_error(e->st, "%s", e->err) : rlx_graph_status(e->g);
  if (!st) st = rlx_compile(e->g, &o.compile, &e->s);
  for (int i = 0; !st && i < e->n_bound; i++) st = bind(e, &e->bound[i]);
  if (st) {
    rlx_embedder_free(e);
    return st;
  }
  *out = e;
  return RLX_OK;
}

int64_t rlx_embedder_dim(const rlx_embedder *e) { return e ? (e->classifier ? e->n_labels : e->hidden) : -1; }

/* ---------------------------------------------------------------- run */

typedef struct {
  int64_t idx, len;
} text_len;

static int by_len(const void *a, const void *b) {
  const text_len *x = a, *y = b;
  if (x->len != y->len) return x->len < y->len ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Runs the texts order[0..nb) (encoded in enc, sorted by length) as one
 * padded batch; their output rows go to out[idx * dim]. */
static rlx_status run_batch(rlx_embedder *e, const wp_ids *enc, const text_len *order, int64_t nb, float *out) {
  int64_t S = order[nb - 1].len, limit = e->max_pos - e->pos_offset, dim = rlx_embedder_dim(e);
  /* truncation keeps the text to max_tokens, but not the template's own
   * special tokens: a model of fewer positions than those is refused here */
  if (S > limit)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_embed: %lld tokens with the special ones, past %s's %lld positions",
                         (long long)S, e->hf.dir, (long long)limit);
  S = (S + BERT_PAD_MULTIPLE - 1) / BERT_PAD_MULTIPLE * BERT_PAD_MULTIPLE;
  if (S > limit) S = limit;
  size_t cells = (size_t)(nb * S);
  int32_t *tokens = malloc(cells * sizeof *tokens), *types = malloc(cells * sizeof *types);
  float *mask = malloc(cells * sizeof *mask), *pool = calloc(cells, sizeof *pool);
  float *rows = malloc((size_t)(nb * dim) * sizeof *rows);
  rlx_status st = tokens && types && mask && pool && rows ? RLX_OK : rlx_set_error(RLX_ERR_NOMEM, "rlx_embed: out of memory");
  int32_t pad = wp_pad_id(e->tok);
  for (int64_t b = 0; !st && b < nb; b++) {
    const wp_ids *t = &enc[order[b].idx];
    for (int64_t i = 0; i < S; i++) {
      int in = i < t->n;
      tokens[b * S + i] = in ? t->ids[i] : pad;
      types[b * S + i] = in && t->types[i] < e->n_types ? t->types[i] : 0;
      mask[b * S + i] = in ? 0.0f : -INFINITY;
    }
    float *w = pool + b * S;
    if (e->pooling == RLX_POOLING_MAX)
      for (int64_t i = t->n; i < S; i++) w[i] = -1e9f;
    else if (e->pooling == RLX_POOLING_CLS) w[0] = 1;
    else if (e->pooling == RLX_POOLING_LAST) w[t->n - 1] = 1;
    else
      for (int64_t i = 0; i < t->n; i++) w[i] = (float)(e->sqrt_len ? 1 / sqrt((double)t->n) : 1.0 / (double)t->n);
  }
  const int64_t bs[2] = {nb, S};
  if (!st) st = rlx_set_input_shaped(e->s, "tokens", tokens, cells * sizeof *tokens, 2, bs);
  if (!st) st = rlx_set_input_shaped(e->s, "types", types, cells * sizeof *types, 2, bs);
  if (!st) st = rlx_set_input_shaped(e->s, "mask", mask, cells * sizeof *mask, 4, (const int64_t[]){nb, 1, 1, S});
  if (!st && !e->classifier) st = rlx_set_input_shaped(e->s, "pool", pool, cells * sizeof *pool, 3, (const int64_t[]){nb, S, 1});
  /* positions: nomic-bert's rotary ones [S]; RoBERTa's ids [B, S], as
   * create_position_ids_from_input_ids: a pad token (also one written in
   * the text) keeps pad_id and does not count */
  int32_t *pos = !st && (e->nomic || e->pos_offset) ? malloc(cells * sizeof *pos) : NULL;
  if (!st && (e->nomic || e->pos_offset) && !pos) st = rlx_set_error(RLX_ERR_NOMEM, "rlx_embed: out of memory");
  for (int64_t i = 0; pos && e->nomic && i < S; i++) pos[i] = (int32_t)i;
  for (int64_t b = 0; pos && e->pos_offset && b < nb; b++)
    for (int64_t i = 0, n = 0; i < S; i++) {
      int real = tokens[b * S + i] != e->pad_id && mask[b * S + i] == 0;
      pos[b * S + i] = real ? (int32_t)(e->pad_id + ++n) : e->pad_id;
    }
  if (!st && e->nomic) st = rlx_set_input_shaped(e->s, "pos", pos, (size_t)S * sizeof *pos, 1, &S);
  if (!st && e->pos_offset) st = rlx_set_input_shaped(e->s, "pos", pos, cells * sizeof *pos, 2, bs);
  if (!st) st = rlx_run(e->s);
  if (!st) st = rlx_output(e->s, 0, rows, (size_t)(nb * dim) * sizeof *rows);
  for (int64_t b = 0; !st && b < nb; b++) {
    float *dst = out + order[b].idx * dim, *src = rows + b * dim;
    double ss = 0;
    for (int64_t j = 0; j < dim; j++) ss += (double)src[j] * src[j];
    float scale = e->normalize && !e->classifier ? (float)(1 / fmax(sqrt(ss), 1e-12)) : 1.0f;
    for (int64_t j = 0; j < dim; j++) dst[j] = src[j] * scale;
  }
  free(tokens);
  free(types);
  free(mask);
  free(pool);
  free(pos);
  free(rows);
  return st;
}

/* Encodes n texts (or n pairs with query as the first text), sorted by
 * length, in batches; out: n rows of rlx_embedder_dim floats. */
static rlx_status run_texts(rlx_embedder *e, const char *query, const char *const *texts, int64_t n, float *out,
                            const char *fn) {
  if (n < 0 || (n > 0 && (!texts || !out))) return rlx_set_error(RLX_ERR_INVALID, "%s: bad arguments (n %lld)", fn, (long long)n);
  for (int64_t i = 0; i < n; i++)
    if (!texts[i]) return rlx_set_error(RLX_ERR_INVALID, "%s: text %lld is NULL", fn, (long long)i);
  if (n == 0) return RLX_OK;
  wp_ids *enc = calloc((size_t)n, sizeof *enc);
  text_len *order = malloc((size_t)n * sizeof *order);
  rlx_status st = enc && order ? RLX_OK : rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", fn);
  for (int64_t i = 0; !st && i < n; i++) {
    st = query ? wp_encode(e->tok, query, strlen(query), texts[i], strlen(texts[i]), 1, e->max_tokens, &enc[i])
               : wp_encode(e->tok, texts[i], strlen(texts[i]), NULL, 0, 1, e->max_tokens, &enc[i]);
    if (!st && enc[i].n == 0) st = rlx_set_error(RLX_ERR_INVALID, "%s: text %lld has no tokens", fn, (long long)i);
    if (!st) order[i] = (text_len){i, enc[i].n};
  }
  if (!st) qsort(order, (size_t)n, sizeof *order, by_len);
  for (int64_t i = 0; !st && i < n; i += e->batch) st = run_batch(e, enc, order + i, n - i < e->batch ? n - i : e->batch, out);
  for (int64_t i = 0; enc && i < n; i++) wp_ids_free(&enc[i]);
  free(enc);
  free(order);
  return st;
}

rlx_status rlx_embed(rlx_embedder *e, const char *const *texts, int64_t n, float *out) {
  if (!e) return rlx_set_error(RLX_ERR_INVALID, "rlx_embed: embedder is NULL");
  if (e->classifier)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_embed: %s is a sequence classifier (use rlx_rerank)", e->hf.dir);
  return run_texts(e, NULL, texts, n, out, "rlx_embed");
}

rlx_status rlx_rerank(rlx_embedder *e, const char *query, const char *const *docs, int64_t n, float *scores) {
  if (!e || !query) return rlx_set_error(RLX_ERR_INVALID, "rlx_rerank: embedder or query is NULL");
  if (!e->classifier)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_rerank: %s has no sequence-classification head", e->hf.dir);
  if (n <= 0) return run_texts(e, query, docs, n, scores, "rlx_rerank");
  float *logits = malloc((size_t)(n * e->n_labels) * sizeof *logits);
  if (!logits) return rlx_set_error(RLX_ERR_NOMEM, "rlx_rerank: out of memory");
  rlx_status st = run_texts(e, query, docs, n, logits, "rlx_rerank");
  for (int64_t i = 0; !st && i < n; i++) scores[i] = logits[i * e->n_labels];
  free(logits);
  return st;
}

rlx_status rlx_embedder_tokenize(const rlx_embedder *e, const char *text, int32_t *ids, int64_t cap, int64_t *n_out) {
  if (!e || !text || !n_out || cap < 0 || (cap > 0 && !ids))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_embedder_tokenize: bad arguments");
  wp_ids o = {0};
  rlx_status st = wp_encode(e->tok, text, strlen(text), NULL, 0, 1, e->max_tokens, &o);
  if (!st) {
    *n_out = o.n;
    if (cap > 0 && o.n > 0) memcpy(ids, o.ids, (size_t)(o.n < cap ? o.n : cap) * sizeof *ids);
    if (o.n > cap) st = rlx_set_error(RLX_ERR_INVALID, "rlx_embedder_tokenize: %lld ids, room for %lld", (long long)o.n, (long long)cap);
  }
  wp_ids_free(&o);
  return st;
}
