/* bench_embed_llama.c — llama.cpp's side of bench_embed.py: the same texts
 * embedded through libllama (the llama-embedding example's way: sequences
 * of a batch as seq ids of one llama_batch, mean pooling by the model's
 * GGUF metadata, L2 normalization), timed here so that neither process
 * start nor model load is counted.
 *
 * usage: bench_embed_llama MODEL.gguf THREADS CLOCK(cpu|wall) TEXTS N_SINGLE OUT
 * TEXTS: one text a line. Prints {"batch_s": ..., "single_s": ...}: the time
 * of all texts in batches of 32 sorted by length, and the median time of
 * one text alone over the first N_SINGLE; writes the embeddings (float32,
 * text order) to OUT. Built by bench_embed.py against the llama.cpp tree. */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 32
#define MAX_TOKENS 256

typedef struct {
  llama_token ids[MAX_TOKENS];
  int n, index;
} text_ids;

static int by_len(const void *a, const void *b) {
  const text_ids *x = a, *y = b;
  return x->n != y->n ? x->n - y->n : x->index - y->index;
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
  (void)user;
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* Embeds texts t[0..n) as one batch into out rows (by each text's index). */
static void embed(struct llama_context *ctx, llama_batch *batch, const text_ids *t, int n, int dim, float *out) {
  batch->n_tokens = 0;
  for (int s = 0; s < n; s++)
    for (int i = 0; i < t[s].n; i++) {
      int k = batch->n_tokens++;
      batch->token[k] = t[s].ids[i];
      batch->pos[k] = i;
      batch->n_seq_id[k] = 1;
      batch->seq_id[k][0] = s;
      batch->logits[k] = 1;
    }
  llama_memory_clear(llama_get_memory(ctx), 1);
  if (llama_encode(ctx, *batch) < 0) {  /* what llama_decode falls back to for an encoder, without its warning */
    fprintf(stderr, "llama_encode failed\n");
    exit(1);
  }
  for (int s = 0; s < n; s++) {
    const float *e = llama_get_embeddings_seq(ctx, s);
    double ss = 0;
    for (int j = 0; j < dim; j++) ss += (double)e[j] * e[j];
    float scale = (float)(1 / fmax(sqrt(ss), 1e-12));
    for (int j = 0; j < dim; j++) out[(size_t)t[s].index * dim + j] = e[j] * scale;
  }
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: bench_embed_llama MODEL THREADS CLOCK TEXTS N_SINGLE OUT\n");
    return 2;
  }
  int threads = atoi(argv[2]), n_single = atoi(argv[5]);
  if (!strcmp(argv[3], "cpu")) bench_clock = CLOCK_PROCESS_CPUTIME_ID;
  llama_log_set(quiet, NULL);
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  struct llama_model *model = llama_model_load_from_file(argv[1], mp);
  if (!model) return fprintf(stderr, "cannot load %s\n", argv[1]), 1;
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = BATCH * MAX_TOKENS;
  cp.n_seq_max = BATCH;
  cp.embeddings = 1;
  cp.pooling_type = LLAMA_POOLING_TYPE_MEAN;
  cp.n_threads = cp.n_threads_batch = threads;
  struct llama_context *ctx = llama_init_from_model(model, cp);
  if (!ctx) return fprintf(stderr, "cannot make a context\n"), 1;
  const struct llama_vocab *vocab = llama_model_get_vocab(model);
  int dim = llama_model_n_embd(model);

  FILE *f = fopen(argv[4], "rb");
  if (!f) return fprintf(stderr, "cannot read %s\n", argv[4]), 1;
  int cap = 1024, n = 0;
  text_ids *t = malloc((size_t)cap * sizeof *t);
  static char line[1 << 16];
  while (fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\n");
    if (n == cap) t = realloc(t, (size_t)(cap *= 2) * sizeof *t);
    int k = llama_tokenize(vocab, line, (int32_t)len, t[n].ids, MAX_TOKENS, 1, 1);
    if (k < 0) k = MAX_TOKENS;  /* truncated, as the others truncate */
    t[n].n = k;
    t[n].index = n;
    n++;
  }
  fclose(f);
  float *out = malloc((size_t)n * dim * sizeof *out);
  llama_batch batch = llama_batch_init(BATCH * MAX_TOKENS, 0, BATCH);

  text_ids *sorted = malloc((size_t)n * sizeof *sorted);
  memcpy(sorted, t, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, by_len);
  embed(ctx, &batch, sorted, n < BATCH ? n : BATCH, dim, out);  /* warm-up */
  double t0 = bench_now();
  for (int s = 0; s < n; s += BATCH) embed(ctx, &batch, sorted + s, n - s < BATCH ? n - s : BATCH, dim, out);
  double batch_s = bench_now() - t0;
  double *lat = malloc((size_t)(n_single > 0 ? n_single : 1) * sizeof *lat);
  float *one = malloc((size_t)(n + 1) * dim * sizeof *one);
  for (int i = 0; i < n_single && i < n; i++) {
    text_ids x = t[i];
    x.index = 0;
    double a = bench_now();
    embed(ctx, &batch, &x, 1, dim, one);
    lat[i] = bench_now() - a;
  }
  printf("{\"batch_s\": %.9f, \"single_s\": %.9f}\n", batch_s, bench_median(lat, n_single < n ? n_single : n));
  FILE *o = fopen(argv[6], "wb");
  if (o) {
    fwrite(out, sizeof *out, (size_t)n * dim, o);
    fclose(o);
  }
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  free(t);
  free(sorted);
  free(out);
  free(one);
  free(lat);
  return 0;
}
