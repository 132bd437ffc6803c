/* cmd_embed.c — `rlx embed` (sentence embeddings of texts, as JSON in the
 * OpenAI embeddings shape or as a .npy array) and `rlx rerank` (a
 * cross-encoder's score of each document for a query, best first), over a
 * Hugging Face model folder (rlx_embedder of rlx.h). */
#include "cli.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *embed_usage =
    "usage: rlx embed -m MODEL (-p TEXT | -f FILE) [options]\n"
    "  -m FOLDER            a Hugging Face folder (config.json, model.safetensors,\n"
    "                       tokenizer.json; BERT-family: MiniLM, BGE, E5, GTE),\n"
    "                       or a GGUF file of one (bert, nomic-bert)\n"
    "  -p TEXT              one text (repeatable);  -f FILE  one text a line\n"
    "  --pooling mean|cls|last|max   (default: the folder's 1_Pooling/config.json)\n"
    "  --normalize, --no-normalize  L2 normalization (default: modules.json)\n"
    "  --batch N            texts per graph run (default 32)\n"
    "  --max-tokens N       truncation (default: the model's max_seq_length)\n"
    "  --threads N, --device cpu|cuda|cuda:N\n"
    "  --format json|npy    (default json: {\"model\", \"data\": [{\"index\", \"embedding\"}]})\n"
    "  -o FILE              write there instead of standard output\n"
    "usage: rlx rerank -m MODEL -q QUERY -f DOCS [--batch N] [--threads N] [--device cpu|cuda|cuda:N]\n"
    "  scores of each line of DOCS for QUERY by a sequence-classification model\n"
    "  (a cross-encoder reranker), best first: score, index, text\n";

typedef struct {
  char **v;
  int64_t n, cap;
} text_list;

static int push(text_list *l, char *s) {
  if (l->n == l->cap) {
    int64_t cap = l->cap ? 2 * l->cap : 16;
    char **p = realloc(l->v, (size_t)cap * sizeof *p);
    if (!p) return -1;
    l->v = p;
    l->cap = cap;
  }
  l->v[l->n++] = s;
  return 0;
}

/* Each line of the file (without its \n or \r\n) as a text, pointing into buf. */
static int split_lines(char *buf, size_t len, text_list *l) {
  for (size_t i = 0; i < len;) {
    size_t e = i;
    while (e < len && buf[e] != '\n') e++;
    size_t end = e;
    if (end > i && buf[end - 1] == '\r') end--;
    buf[end] = 0;
    if (push(l, buf + i)) return -1;
    i = e + 1;
  }
  return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static void write_json(FILE *f, const char *model, const float *x, int64_t n, int64_t dim) {
  fputs("{\"object\": \"list\", \"model\": \"", f);
  cli_put_escaped(f, model, strlen(model), 1);
  fputs("\", \"data\": [", f);
  for (int64_t i = 0; i < n; i++) {
    fprintf(f, "%s\n  {\"object\": \"embedding\", \"index\": %lld, \"embedding\": [", i ? "," : "", (long long)i);
    for (int64_t j = 0; j < dim; j++) fprintf(f, "%s%.9g", j ? ", " : "", x[i * dim + j]);
    fputs("]}", f);
  }
  fputs("\n]}\n", f);
}

/* NumPy's .npy format, version 1.0: little-endian float32 [n, dim]. */
static void write_npy(FILE *f, const float *x, int64_t n, int64_t dim) {
  char header[128];
  int len = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
                     (long long)n, (long long)dim);
  int total = 10 + len + 1, pad = (64 - total % 64) % 64;
  uint16_t hl = (uint16_t)(len + pad + 1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(hl & 0xFF, f);
  fputc(hl >> 8, f);
  fwrite(header, 1, (size_t)len, f);
  for (int i = 0; i < pad; i++) fputc(' ', f);
  fputc('\n', f);
  fwrite(x, sizeof *x, (size_t)(n * dim), f);
}

typedef struct {
  float score;
  int64_t index;
} ranked;

static int by_score(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

static int run(int rerank, int argc, char **argv) {
  const char *model = NULL, *file = NULL, *out_path = NULL, *query = NULL, *format = "json";
  rlx_embedder_options o = {0};
  text_list texts = {0};
  char *buf = NULL;
  int rc = 2;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    long n;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(embed_usage, stdout);
      rc = 0;
      goto done;
    }
    if (!strcmp(a, "--normalize")) o.normalize = 1;
    else if (!strcmp(a, "--no-normalize")) o.normalize = -1;
    else if (!v) goto usage;
    else if (!strcmp(a, "-m")) model = v, i++;
    else if (!strcmp(a, "-f")) file = v, i++;
    else if (!strcmp(a, "-o")) out_path = v, i++;
    else if (!strcmp(a, "-q")) query = v, i++;
    else if (!strcmp(a, "-p")) {
      if (push(&texts, argv[++i])) goto nomem;
    } else if (!strcmp(a, "--format") && (!strcmp(v, "json") || !strcmp(v, "npy"))) format = v, i++;
    else if (!strcmp(a, "--pooling") && (!strcmp(v, "mean") || !strcmp(v, "cls") || !strcmp(v, "last") || !strcmp(v, "max"))) {
      o.pooling = !strcmp(v, "mean") ? RLX_POOLING_MEAN
                  : !strcmp(v, "cls") ? RLX_POOLING_CLS
                  : !strcmp(v, "last") ? RLX_POOLING_LAST
                                       : RLX_POOLING_MAX;
      i++;
    } else if (!strcmp(a, "--batch") && parse_int(v, 1, 1 << 16, &n)) o.batch = (int)n, i++;
    else if (!strcmp(a, "--max-tokens") && parse_int(v, 1, 1 << 20, &n)) o.max_tokens = n, i++;
    else if (!strcmp(a, "--threads") && parse_int(v, 1, 4096, &n)) o.compile.threads = (int)n, i++;
    else if (!strcmp(a, "--device") && rlx_device_parse(v, &o.compile.device, &o.compile.device_index) == RLX_OK)
      i++;
    else
      goto usage;
  }
  if (!model || (rerank ? !query || !file : !file == !texts.n)) goto usage;
  if (file) {
    size_t len;
    if (!(buf = cli_read_file(file, &len))) {
      rc = 1;
      goto done;
    }
    if (split_lines(buf, len, &texts)) goto nomem;
  }
  rlx_embedder *e;
  rlx_status st = rlx_embedder_load(model, &o, &e);
  if (st) {
    rc = cli_fail(st, model);
    goto done;
  }
  int64_t dim = rerank ? 1 : rlx_embedder_dim(e);
  float *x = malloc((size_t)(texts.n * dim + 1) * sizeof *x);
  if (!x) {
    rlx_embedder_free(e);
    goto nomem;
  }
  st = rerank ? rlx_rerank(e, query, (const char *const *)texts.v, texts.n, x)
              : rlx_embed(e, (const char *const *)texts.v, texts.n, x);
  rlx_embedder_free(e);
  FILE *f = st ? NULL : out_path ? fopen(out_path, "wb") : stdout;
  if (st) rc = cli_fail(st, rerank ? "rerank" : "embed");
  else if (!f) rc = 1, fprintf(stderr, "rlx: error: cannot write %s: %s\n", out_path, strerror(errno));
  else {
    if (rerank) {
      ranked *r = malloc((size_t)(texts.n + 1) * sizeof *r);
      for (int64_t i = 0; r && i < texts.n; i++) r[i] = (ranked){x[i], i};
      if (r) qsort(r, (size_t)texts.n, sizeof *r, by_score);
      for (int64_t i = 0; r && i < texts.n; i++) {
        fprintf(f, "%.6f\t%lld\t", r[i].score, (long long)r[i].index);
        cli_put_escaped(f, texts.v[r[i].index], strlen(texts.v[r[i].index]), 0);
        fputc('\n', f);
      }
      free(r);
    } else if (!strcmp(format, "npy")) {
      write_npy(f, x, texts.n, dim);
    } else {
      write_json(f, model, x, texts.n, dim);
    }
    rc = fflush(f) || ferror(f) ? 1 : 0;
    if (rc) fprintf(stderr, "rlx: error: writing %s failed\n", out_path ? out_path : "standard output");
    if (f != stdout && fclose(f)) rc = 1;
  }
  free(x);
  goto done;
usage:
  fputs(embed_usage, stderr);
  rc = 2;
  goto done;
nomem:
  fputs("rlx: error: out of memory\n", stderr);
  rc = 1;
done:
  free(texts.v);
  free(buf);
  return rc;
}

int cmd_embed(int argc, char **argv) { return run(0, argc, argv); }
int cmd_rerank(int argc, char **argv) { return run(1, argc, argv); }
