/* test_prefill_pieces.c — a prompt prefilled in pieces (as `rlx generate`
 * does on the CPU for long prompts, to show its progress) gives the same
 * logits, bit for bit, as the prompt prefilled at once, and so does the
 * decode step after it. The real SmolLM2 model (argv[1], from
 * scripts/fetch_model.sh), a prompt of about 370 tokens in pieces of 128
 * (kept short for the sanitizer build). */
#include "rlx.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Logits after the prompt and after one more token, prefilled in pieces of
 * `piece` tokens (0: at once). */
static void run(rlx_llm *m, const int32_t *ids, int64_t n, int64_t piece, float *prompt_logits, float *next_logits) {
  CHECK(rlx_llm_truncate(m, 0) == RLX_OK, "%s", rlx_last_error());
  if (piece <= 0) piece = n;
  for (int64_t done = 0; done < n; done += piece) {
    int64_t k = n - done < piece ? n - done : piece;
    CHECK(rlx_llm_eval(m, ids + done, k, 0, prompt_logits) == RLX_OK, "%s", rlx_last_error());
  }
  int32_t next = ids[n / 2];
  CHECK(rlx_llm_eval(m, &next, 1, 0, next_logits) == RLX_OK, "%s", rlx_last_error());
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SmolLM2-135M-Instruct.Q4_1.gguf\n", argv[0]);
    return 2;
  }
  if (!*argv[1]) {
    printf("skipped: scripts/fetch_model.sh could not get the model\n");
    return 77;
  }
  rlx_model_file *f = NULL;
  rlx_tokenizer *tok = NULL;
  rlx_llm *m = NULL;
  if (rlx_model_file_open(argv[1], &f) || rlx_tokenizer_load(f, &tok)) {
    fprintf(stderr, "%s: %s\n", argv[1], rlx_last_error());
    return 1;
  }
  static const char sentence[] = "The history of computing is a story of abstraction: each layer hides the one below. ";
  size_t len = 20 * strlen(sentence);
  char *text = malloc(len + 1);
  int32_t *ids = malloc(len * sizeof *ids);
  int64_t n = 0;
  text[0] = 0;
  for (int i = 0; i < 20; i++) strcat(text, sentence);
  CHECK(rlx_tokenize(tok, text, len, 1, 0, ids, (int64_t)len, &n) == RLX_OK, "%s", rlx_last_error());
  CHECK(n > 300, "the prompt is %lld tokens", (long long)n);

  for (int ci = 0; ci < 2; ci++) {
    rlx_dtype cache = ci ? RLX_F16 : RLX_F32;
    rlx_llm_options lo = {{RLX_DEVICE_CPU, 0, 0, 0, NULL}, 512, NULL, NULL, cache, 0, 0, 0, 0, NULL};
    CHECK(rlx_llm_load(f, &lo, &m) == RLX_OK, "%s", rlx_last_error());
    if (!m) break;
    int64_t V = rlx_llm_vocab_size(m);
    float *whole = malloc(2 * (size_t)V * sizeof *whole), *pieces = malloc(2 * (size_t)V * sizeof *pieces);
    run(m, ids, n, 0, whole, whole + V);
    static const int64_t sizes[] = {128}; /* rlx generate's is 512: any size must do */
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      run(m, ids, n, sizes[si], pieces, pieces + V);
      CHECK(!memcmp(whole, pieces, (size_t)V * sizeof *whole), "%s cache, pieces of %lld: the prompt's logits differ",
            rlx_dtype_name(cache), (long long)sizes[si]);
      CHECK(!memcmp(whole + V, pieces + V, (size_t)V * sizeof *whole),
            "%s cache, pieces of %lld: the next token's logits differ", rlx_dtype_name(cache), (long long)sizes[si]);
    }
    free(whole);
    free(pieces);
    rlx_llm_free(m);
  }
  free(text);
  free(ids);
  rlx_tokenizer_free(tok);
  rlx_model_file_close(f);
  return check_report();
}
