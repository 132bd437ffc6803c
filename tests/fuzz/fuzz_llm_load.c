/* fuzz_llm_load — libFuzzer harness of the decoder's loader: the bytes are
 * a GGUF file (seeded with tiny Llama, Qwen 2 and Qwen 3 models of a few
 * KiB, tests/ref/fuzz_llm_seeds.py) that goes through rlx_llm_describe and,
 * when it describes a small model, rlx_llm_load with a KV cache of 16
 * positions, one eval of a token and one of two (all logits), and the
 * tokenizer of the same file. Sizes past the small bounds are described
 * but not loaded, so that every execution stays fast; a file that
 * describes as runnable yet fails to load must say why. Any crash, leak,
 * sanitizer report or abort() is a bug. */
#include "rlx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int small(const rlx_llm_info *i) {
  return i->n_layer <= 4 && i->n_embd <= 256 && i->n_ff <= 1024 && i->n_vocab <= 1024 && i->n_head <= 16 &&
         i->weight_bytes <= (1u << 20);
}

static void run(rlx_llm *m) {
  const int64_t V = rlx_llm_vocab_size(m);
  float *logits = malloc((size_t)(2 * V) * sizeof *logits);
  int32_t toks[2] = {0, (int32_t)(V - 1)};
  if (!logits) return;
  if (rlx_llm_eval(m, toks, 1, 0, logits) == RLX_OK) rlx_llm_eval(m, toks, 2, 1, logits);
  int32_t bad = (int32_t)V;
  if (rlx_llm_eval(m, &bad, 1, 0, logits) == RLX_OK) abort(); /* past the vocabulary */
  free(logits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rlx_model_file *f = NULL;
  if (rlx_model_file_open_memory(data, size, &f) != RLX_OK) return 0;
  rlx_llm_info info;
  if (rlx_llm_describe(f, &info) == RLX_OK && small(&info)) {
    rlx_llm_options o = {{RLX_DEVICE_CPU, 1, 0, 0, NULL}, 16, NULL, NULL, RLX_F32, 0, 0, 0, 0, NULL};
    rlx_llm *m = NULL;
    if (rlx_llm_load(f, &o, &m) == RLX_OK) run(m);
    else if (m || !rlx_last_error()[0]) abort();
    rlx_llm_free(m);
  }
  rlx_tokenizer *t = NULL;
  if (rlx_tokenizer_load(f, &t) == RLX_OK) {
    int32_t ids[64];
    int64_t n;
    rlx_tokenize(t, "Hello, world", 12, 1, 1, ids, 64, &n);
  }
  rlx_tokenizer_free(t);
  rlx_model_file_close(f);
  return 0;
}
