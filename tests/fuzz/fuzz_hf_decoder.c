/* fuzz_hf_decoder — libFuzzer harness of a Hugging Face decoder folder's
 * readers (src/model/hf_llama.c, tokenizer_json.c, gguf_meta.c and the
 * GGUF readers behind them): the input is config.json, tokenizer.json and
 * tokenizer_config.json separated by NUL bytes, written into a scratch
 * folder with an empty model.safetensors. The folder either opens (its
 * metadata image then loads a tokenizer that encodes and decodes a few
 * texts, and renders the chat template) or fails with a status; the
 * decoder load then fails on the missing weights, after every
 * hyperparameter check. Seeded with corpus_hf_decoder/. */
#include "model/hf_llama.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static const char *const files[4] = {"config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"};

/* The scratch folder goes when the fuzzer exits. */
static void remove_dir(void) {
  char path[128];
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
}

static void put(const char *name, const uint8_t *p, size_t n) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n && fwrite(p, 1, n, f) != n) abort();
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/rlx_fuzz_hf_XXXXXX");
    if (!mkdtemp(dir)) abort();
    /* a safetensors file of no tensors: an 8-byte header length and {} */
    static const uint8_t empty[10] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    put("model.safetensors", empty, sizeof empty);
    atexit(remove_dir);
  }
  size_t at = 0;
  for (int i = 0; i < 3; i++) {
    const uint8_t *end = at < size ? memchr(data + at, 0, size - at) : NULL;
    size_t n = end ? (size_t)(end - (data + at)) : size > at ? size - at : 0;
    put(files[i], data + at, n);
    at += n + 1;
  }
  hf_llm *h;
  if (hf_llm_open(dir, &h) == RLX_OK) {
    rlx_tokenizer *t;
    if (rlx_tokenizer_load(hf_llm_file(h), &t) == RLX_OK) {
      static const char *const texts[] = {"Hello, World! naïve café 日本語 😀 <|im_end|> x", "", "\xff\xfe a  b\n\n"};
      int32_t ids[256];
      char buf[1024];
      for (int i = 0; i < 3; i++) {
        int64_t n = 0;
        size_t len;
        if (rlx_tokenize(t, texts[i], strlen(texts[i]), 1, 1, ids, 256, &n) == RLX_OK && n <= 256)
          rlx_detokenize(t, ids, n, 1, buf, sizeof buf, &len);
      }
      rlx_tokenizer_free(t);
    }
    const rlx_chat_message msg = {"user", "hi"};
    char out[512];
    size_t len;
    rlx_chat_apply_template(hf_llm_file(h), &msg, 1, 1, out, sizeof out, &len);
    hf_llm_free(h);
  }
  rlx_llm *m;
  if (rlx_llm_open(dir, NULL, &m) == RLX_OK) abort(); /* no weights: it cannot load */
  return 0;
}
