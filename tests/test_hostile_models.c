/* test_hostile_models.c — the library's side of hostile model files
 * (tests/ref/hostile_models.py writes them):
 *   - rlx_token_to_piece as a size query (buf NULL, cap 0) gives each
 *     token's length, and the piece then matches the reference bytes
 *     (tokens of 300 bytes: longer than any fixed buffer of the CLI);
 *   - a vocabulary shorter than token_embd.weight's rows is RLX_ERR_FORMAT
 *     at rlx_llm_load (rlx_llm_describe too), not ids that decode to nothing;
 *   - a model file truncated after it was mapped: rlx_llm_eval returns
 *     RLX_ERR_IO naming the file (rlx_model_file_check) instead of dying
 *     of SIGBUS on the weights' pages; before the truncation it runs.
 * usage: test_hostile_models PYTHON REF_DIR WORK_DIR */
#include "check.h"
#include "ref_script.h"
#include "rlx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *work_dir;

static const char *path_of(const char *name) {
  static char buf[4][4096];
  static int next;
  char *b = buf[next++ % 4];
  snprintf(b, sizeof buf[0], "%s/%s", work_dir, name);
  return b;
}

static void check_pieces(void) {
  rlx_model_file *f = NULL;
  rlx_tokenizer *t = NULL;
  rlx_status st = rlx_model_file_open(path_of("long_tokens.gguf"), &f);
  if (st == RLX_OK) st = rlx_tokenizer_load(f, &t);
  CHECK(st == RLX_OK, "long_tokens: %s", rlx_last_error());
  FILE *ref = fopen(path_of("long_tokens.pieces"), "r");
  CHECK(ref != NULL, "long_tokens.pieces");
  char want[1024], got[1024];
  int32_t id = 0, good = 0;
  while (st == RLX_OK && ref && fgets(want, sizeof want, ref)) {
    want[strcspn(want, "\n")] = 0;
    size_t n = 12345, m = 0;
    rlx_status q = rlx_token_to_piece(t, id, 0, NULL, 0, &n);
    /* a size query: nothing fits in 0 bytes, the length is said */
    CHECK((q == RLX_ERR_INVALID || (q == RLX_OK && n == 0)) && n == strlen(want),
          "token %d: size query gave %s, %zu bytes (want %zu)", id, rlx_status_name(q), n, strlen(want));
    q = n < sizeof got ? rlx_token_to_piece(t, id, 0, got, n + 1, &m) : RLX_ERR_INVALID;
    good += q == RLX_OK && m == n && !memcmp(got, want, n) && got[n] == 0;
    id++;
  }
  CHECK(id == rlx_tokenizer_vocab_size(t) && good == id, "%d of %d pieces as the reference", good, id);
  if (ref) fclose(ref);
  rlx_tokenizer_free(t);
  rlx_model_file_close(f);
}

static void check_short_vocab(void) {
  rlx_model_file *f = NULL;
  rlx_llm *m = NULL;
  rlx_llm_info info;
  CHECK(rlx_model_file_open(path_of("short_vocab.gguf"), &f) == RLX_OK, "%s", rlx_last_error());
  CHECK_ERR(rlx_llm_load(f, NULL, &m), RLX_ERR_FORMAT, "tokenizer.ggml.tokens has 90 entries", "96 rows");
  CHECK(m == NULL, "no model on failure");
  CHECK_ERR(rlx_llm_describe(f, &info), RLX_ERR_FORMAT, "tokenizer.ggml.tokens");
  rlx_model_file_close(f);
}

static int copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  char buf[65536];
  size_t n;
  int ok = a && b;
  while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
  if (a) fclose(a);
  if (b && fclose(b)) ok = 0;
  return ok;
}

static void check_truncated(void) {
  const char *copy = path_of("truncated_while_mapped.gguf");
  CHECK(copy_file(path_of("long_tokens.gguf"), copy), "copy to %s", copy);
  rlx_model_file *f = NULL;
  rlx_llm *m = NULL;
  rlx_status st = rlx_model_file_open(copy, &f);
  if (st == RLX_OK) st = rlx_llm_load(f, NULL, &m);
  CHECK(st == RLX_OK, "load %s: %s", copy, rlx_last_error());
  if (st) return;
  const int64_t V = rlx_llm_vocab_size(m);
  float *logits = malloc((size_t)V * sizeof *logits);
  int32_t tok = 0;
  CHECK(rlx_model_file_check(f) == RLX_OK, "the file as opened: %s", rlx_last_error());
  CHECK(rlx_llm_eval(m, &tok, 1, 0, logits) == RLX_OK, "eval before the truncation: %s", rlx_last_error());
  CHECK(truncate(copy, (off_t)(rlx_model_file_size(f) / 2)) == 0, "truncate %s", copy);
  CHECK_ERR(rlx_model_file_check(f), RLX_ERR_IO, "truncated_while_mapped.gguf", "shrank");
  CHECK_ERR(rlx_llm_eval(m, &tok, 1, 0, logits), RLX_ERR_IO, "truncated_while_mapped.gguf", "shrank");
  free(logits);
  rlx_llm_free(m);
  rlx_model_file_close(f);
  CHECK_ERR(rlx_model_file_check(NULL), RLX_ERR_INVALID, "NULL");
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR WORK_DIR\n", argv[0]);
    return 2;
  }
  work_dir = argv[3];
  if (run_ref_script(argv[1], argv[2], "hostile_models.py", "--out \"%s\"", argv[3])) return 1;
  check_pieces();
  check_short_vocab();
  check_truncated();
  return check_report();
}
