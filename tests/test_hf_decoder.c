/* test_hf_decoder.c — Hugging Face decoder folders (llama, qwen2, qwen3;
 * F32, BF16, F16; sharded; tied; llama3 and yarn rope scaling; byte-level
 * and Llama 2's SentencePiece-style BPE) loaded with rlx_llm_open, against
 * transformers' outputs on the same folders.
 *
 * usage: test_hf_decoder DATA_DIR PYTHON CONVERTER WORK_DIR
 *
 * DATA_DIR holds the folders and their references, written by
 * tests/ref/hf_decoder_folders.py (label hf_ref regenerates them): per
 * case, the tokenizer's ids of each prompt must be HF's, the logits at
 * every position within TOL of HF's, 12 greedy tokens HF's, and the chat
 * template's text HF's. Then CONVERTER (hf_to_gguf.py: the folder as
 * convert_hf_to_gguf.py would write it, F32, numpy and gguf only) makes a
 * GGUF of each folder in WORK_DIR: every metadata key it writes must read
 * the same from the folder's converted metadata (rlx_llm_file), and the
 * GGUF must give the folder's tokens and logits (within TOL) and the same
 * greedy tokens. Broken copies of the qwen2 folder (a field of the wrong
 * type, an unsupported feature, a vocabulary that does not fit, a shard
 * outside the folder or missing, an unknown pre-tokenizer, truncated
 * JSON) and of the SentencePiece-style one (a normalizer, pre-tokenizer,
 * decoder or BPE option rlx does not run exactly) are refused with a
 * status naming what is wrong.
 *
 * The default kernels run: F16/BF16 matrices are multiplied with F32
 * activations, so all of that holds to TOL. */
#include "check.h"
#include "ref_data.h"
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* transformers' float32 forward against rlx's (F16/BF16 weights widened
 * the same way on both sides) */
#define TOL 1e-4


static const char *data_dir, *python, *converter;

typedef struct {
  int32_t ids[256];
  int64_t n;
  float *logits;      /* [n, vocab] */
  int32_t greedy[64];
} run_out;

/* Tokenizes text, runs it with all logits, then n_greedy greedy steps. */
static int run(const char *what, rlx_llm *m, const rlx_tokenizer *tok, const char *text, int n_greedy, run_out *o) {
  const int64_t V = rlx_llm_vocab_size(m);
  rlx_status st = rlx_tokenize(tok, text, strlen(text), 1, 1, o->ids, 256, &o->n);
  CHECK(st == RLX_OK && o->n > 0 && o->n <= 256, "%s: tokenize: %s", what, rlx_last_error());
  if (st || o->n <= 0 || o->n > 256) return 0;
  o->logits = malloc((size_t)(o->n * V) * sizeof(float));
  float *last = malloc((size_t)V * sizeof(float));
  st = o->logits && last ? RLX_OK : RLX_ERR_NOMEM;
  if (!st) st = rlx_llm_truncate(m, 0);
  if (!st) st = rlx_llm_eval(m, o->ids, o->n, 1, o->logits);
  if (!st) memcpy(last, o->logits + (o->n - 1) * V, (size_t)V * sizeof(float));
  for (int i = 0; !st && i < n_greedy; i++) {
    o->greedy[i] = (int32_t)argmax_f32(last, V);
    st = rlx_llm_eval(m, &o->greedy[i], 1, 0, last);
  }
  CHECK(st == RLX_OK, "%s: eval: %s", what, rlx_last_error());
  free(last);
  return st == RLX_OK;
}

/* Every key of the converter's GGUF reads the same from the folder's view. */
static void same_metadata(const char *name, const rlx_model_file *gguf_file, const rlx_model_file *view) {
  for (int64_t i = 0; i < rlx_meta_count(gguf_file); i++) {
    rlx_meta_value a, b;
    const char *key = rlx_meta_key(gguf_file, i, &a);
    /* the converter's extras rlx does not read */
    if (!strcmp(key, "tokenizer.ggml.padding_token_id") || !strcmp(key, "tokenizer.ggml.add_sep_token")) continue;
    if (rlx_meta_lookup(view, key, &b) != RLX_OK) {
      CHECK(0, "%s: the folder's metadata has no %s", name, key);
      continue;
    }
    int same = a.type == RLX_META_ARRAY ? b.type == RLX_META_ARRAY && a.count == b.count : 1;
    for (uint64_t k = 0; same && k < (a.type == RLX_META_ARRAY ? a.count : 1); k++) {
      rlx_meta_value x = a, y = b;
      if (a.type == RLX_META_ARRAY) same = !rlx_meta_elem(&a, k, &x) && !rlx_meta_elem(&b, k, &y);
      const char *s, *t;
      size_t ns, nt;
      double u, v;
      if (same && !rlx_meta_as_string(&x, &s, &ns)) same = !rlx_meta_as_string(&y, &t, &nt) && ns == nt && !memcmp(s, t, ns);
      else if (same && !rlx_meta_as_f64(&x, &u)) same = !rlx_meta_as_f64(&y, &v) && fabs(u - v) <= 1e-6 * fabs(u);
      else if (same) {
        int p, q;
        same = !rlx_meta_as_bool(&x, &p) && !rlx_meta_as_bool(&y, &q) && p == q;
      }
    }
    CHECK(same, "%s: metadata %s differs from the converter's", name, key);
  }
}

static void test_case(const char *name, int n_prompts, int64_t vocab, int n_greedy) {
  char path[4096], gguf[4096];
  snprintf(path, sizeof path, "%s/%s", data_dir, name);
  rlx_llm *m = NULL;
  rlx_tokenizer *tok = NULL;
  rlx_status st = rlx_llm_open(path, NULL, &m);
  CHECK(st == RLX_OK, "%s: rlx_llm_open: %s", name, rlx_last_error());
  if (st) return;
  CHECK(rlx_llm_vocab_size(m) == vocab, "%s: vocab %lld", name, (long long)rlx_llm_vocab_size(m));
  st = rlx_tokenizer_load(rlx_llm_file(m), &tok);
  CHECK(st == RLX_OK, "%s: tokenizer: %s", name, rlx_last_error());

  /* the converter's GGUF of the same folder */
  snprintf(gguf, sizeof gguf, "%s/%s.gguf", work_dir, name);
  char cmd[16384];
  snprintf(cmd, sizeof cmd, "\"%s\" \"%s\" \"%s\" \"%s\"", python, converter, path, gguf);
  int conv = system(cmd);
  CHECK(conv == 0, "%s: %s failed (%d)", name, converter, conv);
  rlx_llm *g = NULL;
  rlx_tokenizer *gtok = NULL;
  if (conv == 0) {
    st = rlx_llm_open(gguf, NULL, &g);
    CHECK(st == RLX_OK, "%s: the GGUF: %s", name, rlx_last_error());
    if (!st) {
      same_metadata(name, rlx_llm_file(g), rlx_llm_file(m));
      st = rlx_tokenizer_load(rlx_llm_file(g), &gtok);
      CHECK(st == RLX_OK, "%s: the GGUF's tokenizer: %s", name, rlx_last_error());
    }
  }

  for (int p = 0; tok && p < n_prompts; p++) {
    char stem[3000], what[300];
    snprintf(stem, sizeof stem, "%s/%s.ref/prompt%d", data_dir, name, p);
    snprintf(what, sizeof what, "%s prompt %d", name, p);
    snprintf(path, sizeof path, "%s.txt", stem);
    char *text = read_file(path, NULL);
    size_t n_ref = 0;
    snprintf(path, sizeof path, "%s.tokens", stem);
    int32_t *ids = read_file(path, &n_ref);
    n_ref /= sizeof(int32_t);
    snprintf(path, sizeof path, "%s.logits", stem);
    float *logits = read_file_sized(path, n_ref * (size_t)vocab * sizeof(float));
    snprintf(path, sizeof path, "%s.greedy", stem);
    int32_t *greedy = read_file_sized(path, (size_t)n_greedy * sizeof(int32_t));
    CHECK(text && ids && logits && greedy, "%s: reference files under %s", what, stem);
    run_out o = {0}, go = {0};
    if (text && ids && logits && greedy && run(what, m, tok, text, n_greedy, &o)) {
      int same = o.n == (int64_t)n_ref && !memcmp(o.ids, ids, n_ref * sizeof *ids);
      CHECK(same, "%s: %lld token ids differ from transformers' %zu", what, (long long)o.n, n_ref);
      if (same) {
        double d = max_diff_f32(o.logits, logits, o.n * vocab), t = TOL;
        CHECK(d <= t, "%s: logits differ from transformers' by %g > %g", what, d, t);
        CHECK(!memcmp(o.greedy, greedy, (size_t)n_greedy * sizeof *greedy), "%s: greedy tokens differ", what);
      }
      if (gtok && run(what, g, gtok, text, n_greedy, &go)) {
        CHECK(go.n == o.n && !memcmp(go.ids, o.ids, (size_t)o.n * sizeof *o.ids), "%s: GGUF token ids differ", what);
        if (go.n == o.n) {
          double d = max_diff_f32(go.logits, o.logits, o.n * vocab), t = TOL;
          CHECK(d <= t, "%s: the GGUF's logits differ from the folder's by %g > %g", what, d, t);
        }
        CHECK(!memcmp(go.greedy, o.greedy, (size_t)n_greedy * sizeof *o.greedy),
              "%s: GGUF greedy tokens differ", what);
      }
    }
    free(o.logits);
    free(go.logits);
    free(text);
    free(ids);
    free(logits);
    free(greedy);
  }

  /* the chat template: the family recognized, rendered as transformers' Jinja */
  snprintf(path, sizeof path, "%s/%s.ref/chat.txt", data_dir, name);
  char *want = read_file(path, NULL), got[1024];
  const rlx_chat_message msgs[] = {{"system", "Be brief."}, {"user", "What is 2 + 2?"}};
  size_t len = 0;
  st = rlx_chat_apply_template(rlx_llm_file(m), msgs, 2, 1, got, sizeof got, &len);
  /* the BOS a Jinja template writes is rlx's tokenizer's to add (as in
   * llama.cpp) */
  char bos[64];
  size_t n_bos = 0;
  const char *w = want ? want : "";
  if (tok && rlx_token_bos(tok) >= 0 && !rlx_token_to_piece(tok, rlx_token_bos(tok), 1, bos, sizeof bos, &n_bos) &&
      !strncmp(w, bos, n_bos) && strncmp(got, bos, n_bos))
    w += n_bos;
  CHECK(st == RLX_OK && want && len == strlen(w) && !memcmp(got, w, len), "%s: chat template: %s [%.*s]", name,
        st ? rlx_last_error() : "text differs", (int)len, got);
  free(want);
  rlx_tokenizer_free(gtok);
  rlx_llm_free(g);
  rlx_tokenizer_free(tok);
  rlx_llm_free(m);
}

static const char *const qwen2_files[] = {"config.json", "generation_config.json", "model-00001-of-00002.safetensors",
                                          "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                                          "tokenizer.json", "tokenizer_config.json", NULL};
static const char *const spm_files[] = {"config.json", "generation_config.json", "model.safetensors",
                                        "tokenizer.json", "tokenizer_config.json", NULL};

/* The folder `name` (its files) copied to WORK_DIR/bad_NAME with the first
 * `from` in file edited to `to` (to NULL: the file removed); it must fail
 * to load with want and a message holding needle. */
static void broken_copy(const char *name, const char *const *files, const char *file, const char *from, const char *to,
                        rlx_status want, const char *needle) {
  char src[4096], dst[4096], dir[3000];
  snprintf(dir, sizeof dir, "%s/bad_%s", work_dir, name);
  mkdir(dir, 0755);
  int ok = 1;
  for (size_t i = 0; ok && files[i]; i++) {
    snprintf(src, sizeof src, "%s/%s/%s", data_dir, name, files[i]);
    snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
    size_t n;
    char *text = read_file(src, &n), *at = text && !strcmp(files[i], file) ? strstr(text, from) : NULL;
    FILE *o = text ? fopen(dst, "wb") : NULL;
    ok = o != NULL && (strcmp(files[i], file) || at);
    if (o && at && to) {
      fwrite(text, 1, (size_t)(at - text), o);
      fputs(to, o);
      fwrite(at + strlen(from), 1, n - (size_t)(at - text) - strlen(from), o);
    } else if (o && !at) {
      fwrite(text, 1, n, o);
    }
    if (o) fclose(o);
    if (at && !to) remove(dst);
    free(text);
  }
  CHECK(ok, "%s: could not make the broken copy (%s in %s)", dir, from, file);
  rlx_llm *m = NULL;
  if (ok) CHECK_ERR(rlx_llm_open(dir, NULL, &m), want, needle);
  CHECK(m == NULL, "a refused folder leaves no model");
  rlx_llm_free(m);
}

#define broken(...) broken_copy("qwen2_bf16", qwen2_files, __VA_ARGS__)
#define broken_spm(...) broken_copy("llama_spm_f16", spm_files, "tokenizer.json", __VA_ARGS__)

static void test_broken(void) {
  broken("config.json", "\"model_type\": \"qwen2\"", "\"model_type\": \"gpt2\"", RLX_ERR_UNSUPPORTED, "model_type");
  broken("config.json", "\"hidden_size\": 32", "\"hidden_size\": \"32\"", RLX_ERR_FORMAT, "hidden_size");
  broken("config.json", "\"hidden_size\": 32,", "", RLX_ERR_FORMAT, "no hidden_size");
  broken("config.json", "\"vocab_size\": 416", "\"vocab_size\": 100000", RLX_ERR_FORMAT, "vocab_size");
  broken("config.json", "\"vocab_size\": 416", "\"vocab_size\": 420", RLX_ERR_FORMAT, "vocab_size");
  broken("config.json", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", RLX_ERR_FORMAT, "head_count");
  broken("config.json", "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", RLX_ERR_UNSUPPORTED, "hidden_act");
  broken("config.json", "\"use_sliding_window\": false", "\"use_sliding_window\": true", RLX_ERR_UNSUPPORTED,
         "use_sliding_window");
  broken("config.json", "\"rms_norm_eps\"", "\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2}, \"rms_norm_eps\"",
         RLX_ERR_UNSUPPORTED, "dynamic");
  broken("config.json", "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false", RLX_ERR_FORMAT,
         "lm_head.weight");
  broken("tokenizer.json", "\"type\": \"Split\"", "\"type\": \"Whitespace\"", RLX_ERR_UNSUPPORTED, "pre-tokenizer");
  broken("tokenizer.json", "\"type\": \"BPE\"", "\"type\": \"Unigram\"", RLX_ERR_UNSUPPORTED, "BPE");
  broken("tokenizer.json", "\"model\"", "\"mod", RLX_ERR_FORMAT, "tokenizer.json");
  broken("model.safetensors.index.json", "\"model-00002-of-00002.safetensors\"", "\"../x.safetensors\"",
         RLX_ERR_FORMAT, "file name");
  broken("model-00002-of-00002.safetensors", "", NULL, RLX_ERR_IO, "model-00002-of-00002.safetensors");
  /* byte-fallback BPE in forms rlx does not run exactly */
  broken_spm("\"type\": \"Prepend\"", "\"type\": \"Lowercase\"", RLX_ERR_UNSUPPORTED, "normalizer");
  broken_spm("\"type\": \"Strip\"", "\"type\": \"Trim\"", RLX_ERR_UNSUPPORTED, "decoder");
  broken_spm("\"ignore_merges\": false", "\"ignore_merges\": true", RLX_ERR_UNSUPPORTED, "ignore_merges");
  broken_spm("\"dropout\": null", "\"dropout\": 0.5", RLX_ERR_UNSUPPORTED, "dropout");
  broken_spm("\"pre_tokenizer\": null", "\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"x\", "
             "\"prepend_scheme\": \"first\", \"split\": false}", RLX_ERR_UNSUPPORTED, "Metaspace");
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s DATA_DIR PYTHON CONVERTER WORK_DIR\n", argv[0]);
    return 2;
  }
  data_dir = argv[1];
  python = argv[2];
  converter = argv[3];
  work_dir = argv[4];
  mkdir(work_dir, 0755); /* (it may exist) */
  char path[4096], name[128];
  snprintf(path, sizeof path, "%s/cases.txt", data_dir);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "cannot read %s", path);
  int n_prompts, n_greedy, cases = 0;
  long long vocab;
  while (f && fscanf(f, "%127s %d %lld %d", name, &n_prompts, &vocab, &n_greedy) == 4) {
    CHECK(n_greedy <= 64, "%s: %d greedy tokens", name, n_greedy);
    if (n_greedy <= 64) test_case(name, n_prompts, vocab, n_greedy);
    cases++;
  }
  if (f) fclose(f);
  CHECK(cases == 4, "%d cases in %s", cases, path);
  test_broken();
  return check_report();
}
