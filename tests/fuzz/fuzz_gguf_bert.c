/* fuzz_gguf_bert — libFuzzer harness of a GGUF encoder's load
 * (src/model/gguf_bert.c: the metadata made into config.json,
 * tokenizer.json and the pooling files, the tensors renamed, bert.c's
 * build): the input is written to a scratch file and loaded with
 * rlx_embedder_load; a load that succeeds embeds a few texts. Seeded with
 * corpus_gguf_bert/ (tiny bert GGUFs in F32 and F16 with mean and CLS
 * pooling, a nomic-bert one; under -max_len, so no Q8_0 matrices). */
#include "rlx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void remove_file(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!path[0]) {
    snprintf(path, sizeof path, "/tmp/rlx_fuzz_bert_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    atexit(remove_file);
  }
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  rlx_embedder *e;
  if (rlx_embedder_load(path, NULL, &e) != RLX_OK) return 0;
  static const char *const texts[] = {"Hello, World! naïve café 日本語 😀 [CLS] x", "", "\xff\xfe a ##b"};
  int64_t d = rlx_embedder_dim(e);
  float *out = d > 0 && d < (1 << 16) ? malloc((size_t)(3 * d) * sizeof *out) : NULL;
  if (out) rlx_embed(e, texts, 3, out);
  free(out);
  rlx_embedder_free(e);
  return 0;
}
