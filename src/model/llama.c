/* llama.c — the Llama-family decoder (rlx.h, "decoder"): llama / SmolLM2,
 * qwen2 (q/k/v biases) and qwen3 (q/k RMS norms over each head) read from
 * GGUF metadata, built as one rlx graph with symbolic sizes, compiled
 * through the normal pipeline (fusion included) into one session, with the
 * file's tensors bound in place.
 *
 * The graph, per run of S tokens (inputs: tokens [S] I32, rope_cos and
 * rope_sin [S, n_rot/2] F32, n_past [] I32, mask [S, T] F32, rows [R] I32):
 *   x = embed(tokens)                          Gather (+ Dequantize for a
 *                                              quantized table)
 *   per layer:
 *     h = RmsNorm(x) ; q, k, v = h Wq, h Wk, h Wv   (+ biases: qwen2)
 *     q, k = RmsNorm per head                  (qwen3)
 *     q, k = Rope(q), Rope(k)                  cos/sin tables of the run's
 *                                              positions made on the host
 *                                              (llama_hparams.c: frequency
 *                                              factors, linear and YaRN
 *                                              scaling); normal (adjacent
 *                                              pairs) for
 *                                              llama, whose GGUF Q/K rows
 *                                              the converter permuted; neox
 *                                              (halves) for qwen2/qwen3
 *     K, V = cache rows [0, T) with k, v written at n_past (model.h)
 *     x = x + Attention(q, K, V, mask) Wo      grouped-query
 *     x = x + (silu(RmsNorm(x) Wg) * (RmsNorm(x) Wu)) Wd
 *   logits = RmsNorm(x)[rows] Wout             Wout = token_embd when the
 *                                              file has no output.weight
 * Weights feed the products straight from the mapping (linear): no run
 * converts or transposes a weight. Only the logit
 * rows asked for are projected (the last token, or all of them).
 *
 * Tensor parallelism over tp ranks (Megatron's split; llm_tp.c), each rank
 * a graph and session of its own: rank r holds heads [r H/tp, (r+1) H/tp)
 * (Wq, Wk, Wv and their biases by rows, Wo by columns), its share of the
 * feed-forward rows (Wg, Wu by rows, Wd by columns), and a slice of the
 * vocabulary (token_embd and output by rows), and its heads' KV cache.
 * Rows are views into the mapping, columns copies. An AllReduce sums the
 * ranks' partial products after Wo and after Wd, the embedding rows (zero
 * on the ranks that do not hold a token) and the logits (each rank's slice
 * padded with zeros to the whole vocabulary, so every rank gets all of
 * them); the norms and residuals are computed by every rank alike. */
#include "hf_llama.h"
#include "llama_hparams.h"
#include "model.h"

#include "../format/format.h"
#include "../ir/ir.h"
#include "../runtime/bootstrap.h"
#include "../runtime/runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct rlx_llm {
  const rlx_model_file *file;
  const hf_llm *hf;         /* weights of a Hugging Face folder; file its metadata */
  hf_llm *own_hf;           /* rlx_llm_open: what rlx_llm_free closes */
  rlx_model_file *own_file;
  llm_hparams hp;
  llm_kv_cache kv;
  llm_pool pool;
  rlx_session *sess;        /* rank 0's (or this process's rank's) */
  /* tensor parallelism: n_shard sessions of ranks that are threads here
   * (shard[0] == sess; 1: no split), their communicators (n_comm: n_shard,
   * or 1 for a rank of several processes), the column slices they read */
  int n_shard, n_comm, n_copies;
  rlx_session **shard;
  rlx_comm **comm;
  void **copies;
  llm_tp_pool *ranks;       /* the threads of ranks 1.. (started by the first run) */
  int ran;                /* a run has written the cache (rlx_output reads it) */
  size_t weight_bytes;
  double *rope_freq;      /* [n_rot / 2]: angle per position of each rotation */
  double rope_mscale;     /* cos and sin are scaled by it (YaRN, attn_factor) */
  float *rope_table;      /* cos then sin of a run: 2 * LLM_MAX_BATCH * n_rot / 2 */
};


/* The graph being built and the tensors it binds. */
typedef struct {
  rlx_graph *g;
  const rlx_model_file *f;
  const llm_hparams *hp;
  rlx_file_tensor *bound;  /* the tensors used, bound in place after compile */
  int n_bound, cap_bound;
  size_t weight_bytes;
  int weight_right;        /* F32 weights as MatMul's right operand (CUDA) */
  rlx_status st;           /* the first error (a tensor, or out of memory) */
  const hf_llm *hf;        /* tensors of a Hugging Face folder (hf_llama.h) */
  int tp, rank;            /* tensor parallelism: the ranks, and the one built (tp 1: none) */
  void **copies;           /* the column slices made (llm_tp_split), the decoder's to free */
  int n_copies, cap_copies;
} llm_builder;

/* Which slice of a tensor the rank reads: axis -1 all of it, else
 * [begin, begin + len) of axis 0 (rows) or 1 (columns). */
typedef struct { int axis; int64_t begin, len; } tp_slice;
static const tp_slice WHOLE = {-1, 0, 0};

/* A tensor by its GGUF name, from the file or the folder. */
static rlx_status find_weight(const llm_builder *b, const char *name, rlx_file_tensor *t) {
  return b->hf ? hf_llm_tensor(b->hf, name, t) : rlx_model_file_find_tensor(b->f, name, t);
}

/* The param of tensor `name` of exactly the dims given (rank n), its slice
 * sl for this rank, or -1 with b->st set. optional: a missing tensor is -1
 * without an error. */
static rlx_node weight_part(llm_builder *b, const char *name, int rank, const int64_t *dims, int optional,
                            tp_slice sl) {
  if (b->st) return -1;
  rlx_file_tensor t;
  if (find_weight(b, name, &t) != RLX_OK) {
    /* a folder's message names both names */
    if (!optional) b->st = b->hf ? RLX_ERR_FORMAT : rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: the file has no tensor %s", b->hp->name, name);
    return -1;
  }
  if (!t.supported) {
    b->st = rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: tensor %s has type %s, which rlx does not read", name,
                          t.type_name);
    return -1;
  }
  int ok = t.rank == rank;
  for (int i = 0; ok && i < rank; i++) ok = t.dims[i] == dims[i];
  if (!ok) {
    char want[96] = "", got[96] = "";
    for (int i = 0; i < rank; i++)
      snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "", (long long)dims[i]);
    for (int i = 0; i < t.rank; i++)
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t.dims[i]);
    b->st = rlx_set_error(RLX_ERR_FORMAT, "rlx_llm_load: %s: tensor %s is [%s]; the metadata asks for [%s]",
                          b->hp->name, name, got, want);
    return -1;
  }
  if (t.dtype != RLX_F32 && t.dtype != RLX_F16 && t.dtype != RLX_BF16 && t.dtype != RLX_F64 &&
      !rlx_dtype_is_block(t.dtype)) {
    b->st = rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: tensor %s has dtype %s; weights are float or "
                          "quantized", name, rlx_dtype_name(t.dtype));
    return -1;
  }
  if (sl.axis >= 0) {
    void *copy;
    if ((b->st = llm_tp_split(&t, sl.axis, sl.begin, sl.len, &copy))) return -1;
    if (copy && b->n_copies == b->cap_copies) {
      int cap = b->cap_copies ? 2 * b->cap_copies : 64;
      void **p = realloc(b->copies, (size_t)cap * sizeof *p);
      if (!p) {
        free(copy);
        b->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory");
        return -1;
      }
      b->copies = p;
      b->cap_copies = cap;
    }
    if (copy) b->copies[b->n_copies++] = copy;
  }
  if (b->n_bound == b->cap_bound) {
    int cap = b->cap_bound ? 2 * b->cap_bound : 64;
    rlx_file_tensor *p = realloc(b->bound, (size_t)cap * sizeof *p);
    if (!p) {
      b->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory");
      return -1;
    }
    b->bound = p;
    b->cap_bound = cap;
  }
  b->bound[b->n_bound++] = t;
  b->weight_bytes += t.nbytes;
  return rlx_param(b->g, t.name, t.dtype, t.rank, t.dims);
}

static rlx_node weight(llm_builder *b, const char *name, int rank, const int64_t *dims, int optional) {
  return weight_part(b, name, rank, dims, optional, WHOLE);
}

/* This rank's share [*begin, *begin + *len) of n split over b->tp ranks:
 * even shares (n divides: checked at load), or, for the vocabulary, shares
 * of ceil(n / tp) with the last one shorter. */
static tp_slice share(const llm_builder *b, int axis, int64_t n) {
  if (b->tp == 1) return WHOLE;
  const int64_t each = (n + b->tp - 1) / b->tp, begin = each * b->rank;
  return (tp_slice){axis, begin, n - begin < each ? n - begin : each};
}

/* The sum over the ranks (nothing to sum for one). */
static rlx_node tp_sum(const llm_builder *b, rlx_node x) { return b->tp == 1 ? x : rlx_all_reduce(b->g, x); }

static rlx_node to_f32(rlx_graph *g, rlx_node x) {
  rlx_dtype t;
  if (rlx_node_type(g, x, &t, NULL) < 0) return -1;
  return t == RLX_F32 ? x : rlx_cast(g, x, RLX_F32);
}

/* x [1, S, K] times w [N, K] transposed, w read where it lies: DequantMatMul
 * for a block, F16 or BF16 w (the 16-bit matrices widened in registers as
 * they stream, or a panel at a time by the CPU GEMM's packing: never
 * copied, and x stays F32, where a MatMul would need both operands in one
 * dtype); for an F32 w on the CPU the product (w x^T)^T, whose left operand
 * is w as stored (a decode step is one pass of dot products over w's rows,
 * a prefill packs w as it would pack any operand) and whose transposes move
 * activations only. The CUDA backend reads a weight's transpose through
 * instead (is_weight_transpose), so there F32 w is MatMul's right operand. */
static rlx_node linear(llm_builder *b, rlx_node x, rlx_node w) {
  rlx_graph *g = b->g;
  rlx_dtype wt;
  int64_t xd[RLX_MAX_RANK], wd[RLX_MAX_RANK];
  if (rlx_node_type(g, w, &wt, wd) != 2 || rlx_node_type(g, x, NULL, xd) != 3) return -1;
  if (rlx_dtype_is_block(wt) || wt == RLX_F16 || wt == RLX_BF16) return rlx_dequant_matmul(g, x, w);
  const int64_t perm[2] = {1, 0};
  if (b->weight_right) return rlx_matmul(g, x, rlx_transpose(g, to_f32(g, w), 2, perm));
  rlx_node xt = rlx_transpose(g, rlx_reshape(g, x, 2, (const int64_t[]){xd[1], xd[2]}), 2, perm);
  rlx_node y = rlx_transpose(g, rlx_matmul(g, to_f32(g, w), xt), 2, perm);
  return rlx_reshape(g, y, 3, (const int64_t[]){1, xd[1], wd[0]});
}

static rlx_node rms_norm(rlx_graph *g, rlx_node x, rlx_node gamma, int64_t n, float eps) {
  const int64_t dims[1] = {n};
  float *zeros = calloc((size_t)n, sizeof *zeros);
  if (!zeros) return -1;
  rlx_node beta = rlx_constant(g, RLX_F32, 1, dims, zeros);
  free(zeros);
  return rlx_rms_norm(g, x, to_f32(g, gamma), beta, -1, eps);
}

/* x [1, S, heads * head_dim] normalized over each head. */
static rlx_node head_norm(rlx_graph *g, rlx_node x, rlx_node gamma, int64_t heads, int64_t S, const llm_hparams *hp) {
  const int64_t split[4] = {1, S, heads, hp->head_dim}, joined[3] = {1, S, heads * hp->head_dim};
  rlx_node y = rms_norm(g, rlx_reshape(g, x, 4, split), gamma, hp->head_dim, hp->norm_eps);
  return rlx_reshape(g, y, 3, joined);
}

static rlx_node add_bias(rlx_graph *g, rlx_node x, rlx_node bias) {
  return bias < 0 ? x : rlx_add(g, x, to_f32(g, bias));
}

/* One decoder layer on x [1, S, n_embd]; its two cache Assigns go to assigns. */
static rlx_node layer(llm_builder *b, const llm_kv_cache *kv, int l, rlx_node x, const rlx_node *rope_tab,
                      rlx_node n_past, rlx_node mask, int64_t S, int64_t T, rlx_node *assigns) {
  rlx_graph *g = b->g;
  const llm_hparams *hp = b->hp;
  const int64_t E = hp->n_embd, D = hp->head_dim, qd = hp->n_head * D, kvd = hp->n_head_kv * D;
  /* this rank's heads and feed-forward rows (all of them without tp) */
  const tp_slice q_rows = share(b, 0, qd), kv_rows = share(b, 0, kvd), q_cols = share(b, 1, qd);
  const tp_slice ff_rows = share(b, 0, hp->n_ff), ff_cols = share(b, 1, hp->n_ff);
  const int64_t n_head = hp->n_head / b->tp, n_head_kv = hp->n_head_kv / b->tp;
  char name[96];
#define W(suffix, sl, rank, ...)                                                      \
  (snprintf(name, sizeof name, "blk.%d." suffix, l),                                  \
   weight_part(b, name, rank, (const int64_t[]){__VA_ARGS__}, 0, sl))
#define W_OPT(suffix, sl, rank, ...)                                                  \
  (snprintf(name, sizeof name, "blk.%d." suffix, l),                                  \
   weight_part(b, name, rank, (const int64_t[]){__VA_ARGS__}, 1, sl))
  rlx_node attn_norm = W("attn_norm.weight", WHOLE, 1, E);
  rlx_node wq = W("attn_q.weight", q_rows, 2, qd, E), wk = W("attn_k.weight", kv_rows, 2, kvd, E);
  rlx_node wv = W("attn_v.weight", kv_rows, 2, kvd, E);
  rlx_node wo = W("attn_output.weight", q_cols, 2, E, qd);
  rlx_node bq = -1, bk = -1, bv = -1, q_norm = -1, k_norm = -1;
  if (hp->arch == ARCH_QWEN2) {
    bq = W("attn_q.bias", q_rows, 1, qd);
    bk = W("attn_k.bias", kv_rows, 1, kvd);
    bv = W("attn_v.bias", kv_rows, 1, kvd);
  } else {
    bq = W_OPT("attn_q.bias", q_rows, 1, qd);
    bk = W_OPT("attn_k.bias", kv_rows, 1, kvd);
    bv = W_OPT("attn_v.bias", kv_rows, 1, kvd);
  }
  if (hp->arch == ARCH_QWEN3) {
    q_norm = W("attn_q_norm.weight", WHOLE, 1, D);
    k_norm = W("attn_k_norm.weight", WHOLE, 1, D);
  }
  rlx_node ffn_norm = W("ffn_norm.weight", WHOLE, 1, E);
  rlx_node wg = W("ffn_gate.weight", ff_rows, 2, hp->n_ff, E), wu = W("ffn_up.weight", ff_rows, 2, hp->n_ff, E);
  rlx_node wd = W("ffn_down.weight", ff_cols, 2, E, hp->n_ff);
#undef W
#undef W_OPT
  if (b->st) return -1;

  rlx_node h = rms_norm(g, x, attn_norm, E, hp->norm_eps);
  rlx_node q = add_bias(g, linear(b, h, wq), bq);
  rlx_node k = add_bias(g, linear(b, h, wk), bk);
  rlx_node v = add_bias(g, linear(b, h, wv), bv);
  if (q_norm >= 0) {
    q = head_norm(g, q, q_norm, n_head, S, hp);
    k = head_norm(g, k, k_norm, n_head_kv, S, hp);
  }
  const rlx_rope_desc rope = {(int)D, (int)hp->n_rot, hp->rope_mode, hp->rope_base, 1.0};
  q = rlx_rope_cos_sin(g, q, rope_tab[0], rope_tab[1], &rope);
  k = rlx_rope_cos_sin(g, k, rope_tab[0], rope_tab[1], &rope);
  rlx_node k_all, v_all;
  llm_kv_layer(g, kv, l, k, v, n_past, T, &k_all, &v_all, assigns);
  const rlx_attention_desc att = {(int)n_head, (int)n_head_kv, (int)D, RLX_MASK_CUSTOM, 0, 0.0, 0.0,
                                  RLX_LAYOUT_BSHD};
  /* attention runs in a 16-bit cache's dtype (q rounded to it, as
   * llama.cpp rounds q for an F16 cache), converting K/V rows as it reads
   * them; a quantized cache's rows are decoded to f32 for an f32 q */
  const rlx_dtype cache_t = kv->dtype;
  if (cache_t != RLX_F32 && !rlx_dtype_is_block(cache_t)) q = rlx_cast(g, q, cache_t);
  rlx_node a = to_f32(g, rlx_attention(g, q, k_all, v_all, mask, &att));
  x = rlx_add(g, x, tp_sum(b, linear(b, a, wo)));

  rlx_node h2 = rms_norm(g, x, ffn_norm, E, hp->norm_eps);
  rlx_node gate = linear(b, h2, wg), up = linear(b, h2, wu);
  rlx_node f = rlx_mul(g, rlx_activation(g, RLX_ACT_SILU, gate), up);
  return rlx_add(g, x, tp_sum(b, linear(b, f, wd)));
}

/* The whole decoder graph. */
static rlx_status build_graph(llm_builder *b, const llm_kv_cache *kv) {
  rlx_graph *g = b->g;
  const llm_hparams *hp = b->hp;
  const int64_t S = rlx_dim_sym(g, "S"), T = rlx_dim_sym(g, "T"), R = rlx_dim_sym(g, "R");
  const int64_t E = hp->n_embd;
  rlx_node tokens = rlx_input(g, "tokens", RLX_I32, 1, (const int64_t[]){S});
  const int64_t table_dims[2] = {S, hp->n_rot / 2};
  const rlx_node rope_tab[2] = {rlx_input(g, "rope_cos", RLX_F32, 2, table_dims),
                                rlx_input(g, "rope_sin", RLX_F32, 2, table_dims)};
  rlx_node n_past = rlx_input(g, "n_past", RLX_I32, 0, NULL);
  rlx_node mask = rlx_input(g, "mask", RLX_F32, 2, (const int64_t[]){S, T});
  rlx_node rows = rlx_input(g, "rows", RLX_I32, 1, (const int64_t[]){R});

  /* tied embeddings: the table is the output matrix too */
  rlx_file_tensor out_t;
  const int tied = b->hf ? hf_llm_tied(b->hf) : rlx_model_file_find_tensor(b->f, "output.weight", &out_t) != RLX_OK;
  const tp_slice vocab = share(b, 0, hp->n_vocab);
  rlx_node embd = weight_part(b, "token_embd.weight", 2, (const int64_t[]){hp->n_vocab, E}, 0, vocab);
  if (b->st) return b->st;
  rlx_dtype embd_t;
  rlx_node_type(g, embd, &embd_t, NULL);
  /* a rank's rows of the vocabulary: a token's row from the rank that
   * holds it, zeros from the others, summed */
  rlx_node local = tokens, held = -1;
  if (b->tp > 1) {
    const int32_t first = (int32_t)vocab.begin;
    local = rlx_sub(g, tokens, rlx_constant(g, RLX_I32, 0, NULL, &first));
    rlx_node in = rlx_clamp(g, local, 0, (double)(vocab.len - 1));
    held = rlx_reshape(g, rlx_cast(g, rlx_compare(g, RLX_CMP_EQ, in, local), RLX_F32), 2, (const int64_t[]){S, 1});
    local = in;
  }
  rlx_node x = rlx_gather(g, embd, local, 0);
  x = rlx_dtype_is_block(embd_t) ? rlx_dequantize(g, x) : to_f32(g, x);
  if (b->tp > 1) x = tp_sum(b, rlx_mul(g, x, held));
  x = rlx_reshape(g, x, 3, (const int64_t[]){1, S, E});

  int n_out = 1 + 2 * (int)hp->n_layer;
  rlx_node *outs = malloc((size_t)n_out * sizeof *outs);
  if (!outs) return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory");
  for (int l = 0; l < hp->n_layer && !b->st; l++) x = layer(b, kv, l, x, rope_tab, n_past, mask, S, T, &outs[1 + 2 * l]);
  rlx_node out_norm = weight(b, "output_norm.weight", 1, (const int64_t[]){E}, 0);
  rlx_node wout = tied ? embd : weight_part(b, "output.weight", 2, (const int64_t[]){hp->n_vocab, E}, 0, vocab);
  if (b->st) {
    free(outs);
    return b->st;
  }
  x = rms_norm(g, x, out_norm, E, hp->norm_eps);
  outs[0] = linear(b, rlx_gather(g, x, rows, 1), wout);
  if (b->tp > 1) {
    /* the rank's slice of the logits in place among zeros: the sum is all of them */
    const int64_t before[3] = {0, 0, vocab.begin}, after[3] = {0, 0, hp->n_vocab - vocab.begin - vocab.len};
    outs[0] = tp_sum(b, rlx_pad(g, outs[0], 3, before, after, 0.0));
  }
  rlx_status st = rlx_graph_set_outputs(g, n_out, outs);
  free(outs);
  if (st == RLX_OK) st = rlx_graph_status(g);
  return st;
}

/* Binds every tensor used in place; a plain-dtype tensor not aligned to
 * its element size (a GGUF aligned to 1 or 2) is copied. A tensor read in
 * place has its file pages mapped now, in one call, not a fault per 64 KiB
 * inside the first prefill (llama.cpp maps its file with MAP_POPULATE). */
static rlx_status bind_weights(rlx_session *s, const llm_builder *b, const rlx_llm_options *o) {
  for (int i = 0; i < b->n_bound; i++) {
    const rlx_file_tensor *t = &b->bound[i];
    int es = rlx_dtype_is_block(t->dtype) ? 1 : (int)rlx_dtype_nbytes(t->dtype, 1);
    const int copy = (uintptr_t)t->data % (uintptr_t)es != 0;
    rlx_status st = copy ? rlx_set_param(s, t->name, t->data, t->nbytes)
                         : rlx_set_param_ref(s, t->name, t->data, t->nbytes);
    if (st) return st;
    if (!copy) fmt_populate(t->data, t->nbytes);
    if (o->progress) o->progress(0.5 + 0.5 * (i + 1) / b->n_bound, o->progress_user);
  }
  return RLX_OK;
}

/* The KV cache length without rlx_llm_options.n_ctx. */
static int64_t default_n_ctx(const llm_hparams *hp) { return hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096; }

rlx_status rlx_llm_describe(const rlx_model_file *f, rlx_llm_info *out) {
  if (!f || !out) return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_describe: NULL argument");
  llm_hparams hp;
  memset(&hp, 0, sizeof hp);
  rlx_status st = llm_read_hparams(f, NULL, &hp);
  double *freq = NULL, mscale;
  if (st == RLX_OK && !(freq = malloc((size_t)(hp.n_rot / 2) * sizeof *freq)))
    st = rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_describe: out of memory");
  if (st == RLX_OK) st = llm_rope_frequencies(f, &hp, freq, &mscale);
  free(freq);
  if (st) return st;
  /* the graph as rlx_llm_load builds it (every tensor found and checked),
   * not compiled */
  llm_kv_cache kv = {default_n_ctx(&hp), hp.n_layer, hp.n_head_kv * hp.head_dim, RLX_F32};
  llm_builder b = {.g = rlx_graph_new("rlx.llm.describe"), .f = f, .hp = &hp, .tp = 1};
  st = b.g ? build_graph(&b, &kv) : rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_describe: out of memory");
  free(b.bound);
  rlx_graph_free(b.g);
  if (st) return st;
  llm_fill_info(&hp, out);
  out->n_ctx = kv.n_ctx;
  out->weight_bytes = b.weight_bytes;
  out->kv_cache_bytes = llm_kv_bytes(&kv);
  out->kv_cache_type = kv.dtype;
  return RLX_OK;
}


/* The ranks of o (tp threads, or one process of o->world) for hp: into
 * *n_shard the sessions this process runs. */
static rlx_status tp_check(const llm_hparams *hp, const rlx_llm_options *o, int *n_shard) {
  if (o->tp < 0 || o->tp > 64)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_load: tp %d is not in [0, 64]", (int)o->tp);
  if (o->world < 0 || o->world > 4096 || (o->world > 1 && (o->rank < 0 || o->rank >= o->world)))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_load: rank %d is not in a world of %d", (int)o->rank,
                         (int)o->world);
  if (o->world > 1 && o->tp > 1 && o->tp != o->world)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_load: tp %d differs from world %d (one rank a process)",
                         (int)o->tp, (int)o->world);
  const int ranks = o->world > 1 ? o->world : o->tp > 1 ? o->tp : 1;
  *n_shard = o->world > 1 ? 1 : ranks;
  if (ranks == 1) return RLX_OK;
  if (hp->n_head % ranks || hp->n_head_kv % ranks)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: %s: tensor parallelism over %d ranks splits the heads; "
                         "head_count %lld and head_count_kv %lld must both divide by %d", hp->name, ranks,
                         (long long)hp->n_head, (long long)hp->n_head_kv, ranks);
  if (hp->n_ff % ranks)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: %s: tensor parallelism over %d ranks splits the "
                         "feed-forward rows; feed_forward_length %lld does not divide by %d", hp->name, ranks,
                         (long long)hp->n_ff, ranks);
  if ((hp->n_vocab + ranks - 1) / ranks * (ranks - 1) >= hp->n_vocab)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: %s: a vocabulary of %lld tokens leaves a rank of %d "
                         "without any", hp->name, (long long)hp->n_vocab, ranks);
  return RLX_OK;
}

/* The sessions and communicators of the ranks this process runs. */
static rlx_status tp_start(rlx_llm *m, const rlx_llm_options *o) {
  if (!(m->shard = calloc((size_t)m->n_shard, sizeof *m->shard)))
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory");
  if (m->n_shard == 1 && o->world <= 1) return RLX_OK;
  const int n = o->world > 1 ? 1 : m->n_shard;
  if (!(m->comm = calloc((size_t)n, sizeof *m->comm)))
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory");
  rlx_status st = llm_tp_comms(o, m->n_shard, m->comm);
  if (st == RLX_OK) m->n_comm = n;
  return st;
}

/* Rank `rank` of `tp`: its graph, compiled with o, its weights and cache bound, into *out. */
static rlx_status load_rank(rlx_llm *m, const rlx_model_file *f, const hf_llm *hf, const rlx_llm_options *o, int tp,
                            int rank, rlx_session **out) {
  char gname[64];
  snprintf(gname, sizeof gname, "rlx.llm.%s", m->hp.name);
  llm_builder b = {.g = rlx_graph_new(gname), .f = f, .hp = &m->hp, .hf = hf, .tp = tp, .rank = rank,
                   .weight_right = rlx_compile_device(o->compile.device) == RLX_DEVICE_CUDA};
  rlx_status st = b.g ? build_graph(&b, &m->kv) : rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory");
  if (o->progress && st == RLX_OK) o->progress(0.1, o->progress_user);
  if (st == RLX_OK) st = rlx_compile(b.g, &o->compile, out);
  if (o->progress && st == RLX_OK) o->progress(0.5, o->progress_user);
  if (st == RLX_OK) st = bind_weights(*out, &b, o);
  if (st == RLX_OK) st = llm_kv_bind(*out, &m->kv);
  /* the CPU's packed weights made now, not inside the first prefill */
  if (st == RLX_OK) st = rt_session_prepare(*out);
  m->weight_bytes += b.weight_bytes;
  free(b.bound);
  rlx_graph_free(b.g);
  /* the column slices live as long as the decoder (bound in place) */
  void **all = b.n_copies ? realloc(m->copies, (size_t)(m->n_copies + b.n_copies) * sizeof *all) : m->copies;
  if (b.n_copies && !all) {
    for (int i = 0; i < b.n_copies; i++) free(b.copies[i]);
    st = st ? st : rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory");
  } else if (b.n_copies) {
    memcpy(all + m->n_copies, b.copies, (size_t)b.n_copies * sizeof *all);
    m->copies = all;
    m->n_copies += b.n_copies;
  }
  free(b.copies);
  return st;
}

/* Loading ranks one after another: rank r's progress is the r-th share. */
typedef struct {
  void (*progress)(double frac, void *user);
  void *user;
  int rank, n;
} rank_progress;

static void progress_of_rank(double frac, void *user) {
  const rank_progress *p = user;
  p->progress((p->rank + frac) / p->n, p->user);
}

/* f: the GGUF file, or a folder's metadata with hf its weights. */
static rlx_status llm_load(const rlx_model_file *f, const hf_llm *hf, const rlx_llm_options *opt, rlx_llm **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_load: out is NULL");
  *out = NULL;
  if (!f) return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_load: file is NULL");
  rlx_llm_options o = {{RLX_DEVICE_AUTO, 0, 0, 0, NULL}, 0, NULL, NULL, RLX_F32, 1, 0, 0, 0, NULL};
  if (opt) o = *opt;
  char env_master[160];
  if (o.world > 1) {
    int rank = o.rank, world = o.world;
    rt_bootstrap_env(&rank, &world, &o.master, env_master, sizeof env_master);
  }
  if (o.n_ctx < 0) return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_load: n_ctx %lld < 0", (long long)o.n_ctx);
  if (o.n_seq == 0) o.n_seq = 1;
  if (o.n_seq < 0 || o.n_seq > LLM_MAX_SEQ)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_load: n_seq %d is not in [1, %d]", (int)o.n_seq, LLM_MAX_SEQ);
  if (o.cache_type != RLX_F32 && o.cache_type != RLX_F16 && o.cache_type != RLX_BF16 && o.cache_type != RLX_Q8_0 &&
      o.cache_type != RLX_Q4_0)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_load: cache_type %d is not RLX_F32, RLX_F16, RLX_BF16, RLX_Q8_0 "
                         "or RLX_Q4_0", (int)o.cache_type);
  if (o.progress) o.progress(0.0, o.progress_user);
  rlx_llm *m = calloc(1, sizeof *m);
  if (!m) return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory");
  m->file = f;
  m->hf = hf;
  rlx_status st = llm_read_hparams(f, hf, &m->hp);
  /* a folder's Q/K rows are not permuted for adjacent pairs (hf_llama.h) */
  if (hf) m->hp.rope_mode = RLX_ROPE_NEOX;
  if (st) {
    free(m);
    return st;
  }
  if (rlx_dtype_is_block(o.cache_type) && m->hp.head_dim % 32) {
    st = rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: %s: a %s KV cache stores each head's row as blocks of 32 "
                       "values; head size %lld is not a multiple of 32 (use cache type f32, f16 or bf16)", m->hp.name,
                       rlx_dtype_name(o.cache_type), (long long)m->hp.head_dim);
    free(m);
    return st;
  }
  int64_t n_ctx = o.n_ctx ? o.n_ctx : default_n_ctx(&m->hp);
  /* the pool's cells: checked as one cache of n_seq * n_ctx rows (past int64: n_ctx
   * alone is already too many) */
  int64_t cells = ir_size_mul(n_ctx, o.n_seq);
  m->kv = (llm_kv_cache){cells == IR_SIZE_OVER ? n_ctx : cells, m->hp.n_layer, m->hp.n_head_kv * m->hp.head_dim,
                         o.cache_type};
  if ((st = llm_kv_check(&m->kv)) || (st = llm_pool_init(&m->pool, o.n_seq, n_ctx))) {
    rlx_llm_free(m);
    return st;
  }
  const int64_t half = m->hp.n_rot / 2;
  m->rope_freq = malloc((size_t)half * sizeof *m->rope_freq);
  m->rope_table = malloc((size_t)(2 * LLM_MAX_BATCH * half) * sizeof *m->rope_table);
  if (!m->rope_freq || !m->rope_table) {
    rlx_llm_free(m);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory");
  }
  if ((st = llm_rope_frequencies(f, &m->hp, m->rope_freq, &m->rope_mscale))) {
    rlx_llm_free(m);
    return st;
  }
  if ((st = tp_check(&m->hp, &o, &m->n_shard)) || (st = tp_start(m, &o))) {
    rlx_llm_free(m);
    return st;
  }
  /* the KV cache of a rank's heads */
  m->kv.kv_dim /= o.world > 1 ? o.world : m->n_shard;
  rank_progress rp = {o.progress, o.progress_user, 0, m->n_shard};
  for (int r = 0; r < m->n_shard && st == RLX_OK; r++) {
    rlx_llm_options ro = o;
    if (m->n_comm) ro.compile.comm = m->comm[r];
    if (o.progress) ro.progress = progress_of_rank, ro.progress_user = &rp, rp.rank = r;
    st = load_rank(m, f, hf, &ro, o.world > 1 ? o.world : m->n_shard, o.world > 1 ? o.rank : r, &m->shard[r]);
  }
  if (st) {
    rlx_llm_free(m);
    return st;
  }
  m->sess = m->shard[0];
  *out = m;
  return RLX_OK;
}

rlx_status rlx_llm_load(const rlx_model_file *f, const rlx_llm_options *opt, rlx_llm **out) {
  return llm_load(f, NULL, opt, out);
}

rlx_status rlx_llm_open(const char *path, const rlx_llm_options *opt, rlx_llm **out) {
  if (!out || !path) return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_open: NULL argument");
  *out = NULL;
  rlx_model_file *f = NULL;
  hf_llm *hf = NULL;
  struct stat s;
  rlx_status st = stat(path, &s) == 0 && S_ISDIR(s.st_mode) ? hf_llm_open(path, &hf) : rlx_model_file_open(path, &f);
  if (!st) st = llm_load(hf ? hf_llm_file(hf) : f, hf, opt, out);
  if (st) {
    hf_llm_free(hf);
    rlx_model_file_close(f);
    return st;
  }
  (*out)->own_hf = hf;
  (*out)->own_file = f;
  return RLX_OK;
}

const rlx_model_file *rlx_llm_file(const rlx_llm *m) { return m ? m->file : NULL; }

void rlx_llm_free(rlx_llm *m) {
  if (!m) return;
  llm_tp_pool_free(m->ranks);
  for (int r = 0; m->shard && r < m->n_shard; r++) rlx_session_free(m->shard[r]);
  free(m->shard);
  for (int r = 0; r < m->n_comm; r++) rlx_comm_free(m->comm[r]);
  free(m->comm);
  for (int i = 0; i < m->n_copies; i++) free(m->copies[i]);
  free(m->copies);
  llm_pool_free(&m->pool);
  free(m->rope_freq);
  free(m->rope_table);
  /* after the session, which reads the weights in place */
  hf_llm_free(m->own_hf);
  rlx_model_file_close(m->own_file);
  free(m);
}

rlx_status rlx_llm_get_info(const rlx_llm *m, rlx_llm_info *out) {
  if (!m || !out) return rlx_set_error(RLX_ERR_INVALID, "rlx_llm_get_info: NULL argument");
  llm_fill_info(&m->hp, out);
  out->n_ctx = m->pool.n_ctx;
  out->weight_bytes = m->weight_bytes;
  /* every rank of this process holds its heads' share */
  out->kv_cache_bytes = llm_kv_bytes(&m->kv) * (size_t)m->n_shard;
  out->kv_cache_type = m->kv.dtype;
  rlx_session_stats st;
  if (rlx_session_get_stats(m->sess, &st) == RLX_OK) out->fallback_nodes = st.fallback_nodes;
  return RLX_OK;
}

int64_t rlx_llm_vocab_size(const rlx_llm *m) { return m ? m->hp.n_vocab : 0; }
int64_t rlx_llm_plans_built(const rlx_llm *m) {
  rlx_session_stats st;
  if (!m || rlx_session_get_stats(m->sess, &st) != RLX_OK) return 0;
  return st.plans_built + st.plans_reused;
}

/* ---------------------------------------------------------------- runs (llm_batch.c) */

llm_pool *llm_pool_of(rlx_llm *m) { return &m->pool; }

void llm_cache_view_of(rlx_llm *m, int rank, llm_cache_view *v) {
  *v = (llm_cache_view){m->shard[rank], &m->kv, &m->ran, m->rope_freq, m->hp.n_rot, m->hp.head_dim, m->hp.rope_mode};
}

int llm_n_rank(const rlx_llm *m) { return m->n_shard; }

int64_t llm_n_layer(const rlx_llm *m) { return m->hp.n_layer; }
int llm_rank_of_world(const rlx_llm *m) { return m->n_comm > 0 && m->n_shard == 1; }
rlx_dtype llm_cache_type(const rlx_llm *m) { return m->kv.dtype; }
size_t llm_row_bytes(const rlx_llm *m) { return rlx_dtype_nbytes(m->kv.dtype, m->kv.kv_dim * m->n_shard); }
rlx_status llm_file_check(const rlx_llm *m) {
  rlx_status st = rlx_model_file_check(m->file);
  return st || !m->hf ? st : hf_llm_check(m->hf);
}

/* One run's inputs, the same for every rank. */
typedef struct {
  rlx_llm *m;
  const int32_t *tokens, *rows;
  const float *cos_t, *sin_t;
  int64_t S, T, R, half;
  int32_t at;
  float *logits;
} run_inputs;

/* Rank r's run; rank 0 reads the logits (every rank has all of them). */
static rlx_status run_rank(void *arg, int r) {
  const run_inputs *in = arg;
  rlx_session *s = in->m->shard[r];
  const int64_t S = in->S, half = in->half;
  rlx_status st = rlx_set_input_shaped(s, "tokens", in->tokens, (size_t)S * sizeof *in->tokens, 1, (const int64_t[]){S});
  if (st == RLX_OK)
    st = rlx_set_input_shaped(s, "rope_cos", in->cos_t, (size_t)(S * half) * sizeof(float), 2, (const int64_t[]){S, half});
  if (st == RLX_OK)
    st = rlx_set_input_shaped(s, "rope_sin", in->sin_t, (size_t)(S * half) * sizeof(float), 2, (const int64_t[]){S, half});
  if (st == RLX_OK) st = rlx_set_input(s, "n_past", &in->at, sizeof in->at);
  if (st == RLX_OK)
    st = rlx_set_input_shaped(s, "mask", in->m->pool.mask, (size_t)(S * in->T) * sizeof(float), 2,
                              (const int64_t[]){S, in->T});
  if (st == RLX_OK)
    st = rlx_set_input_shaped(s, "rows", in->rows, (size_t)in->R * sizeof *in->rows, 1, (const int64_t[]){in->R});
  if (st == RLX_OK) st = rlx_run(s);
  if (st == RLX_OK && r == 0)
    st = rlx_output(s, 0, in->logits, (size_t)(in->R * in->m->hp.n_vocab) * sizeof *in->logits);
  return st;
}

rlx_status llm_run(rlx_llm *m, const int32_t *tokens, const int32_t *pos, int64_t S, int64_t start, int64_t T,
                   const int32_t *rows, int64_t R, float *logits) {
  const int64_t half = m->hp.n_rot / 2;
  float *cos_t = m->rope_table, *sin_t = m->rope_table + S * half;
  for (int64_t i = 0; i < S; i++)
    for (int64_t j = 0; j < half; j++) {
      double theta = (double)pos[i] * m->rope_freq[j];
      cos_t[i * half + j] = (float)(cos(theta) * m->rope_mscale);
      sin_t[i * half + j] = (float)(sin(theta) * m->rope_mscale);
    }
  run_inputs in = {m, tokens, rows, cos_t, sin_t, S, T, R, half, (int32_t)start, logits};
  rlx_status st = m->n_shard == 1 ? run_rank(&in, 0) : llm_tp_each(&m->ranks, m->n_shard, m->comm, run_rank, &in);
  if (st == RLX_OK) m->ran = 1;
  return st;
}
