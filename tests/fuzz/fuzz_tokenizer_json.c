/* fuzz_tokenizer_json — libFuzzer harness of the tokenizer.json reader
 * (src/model/json.c, tokenizer_wordpiece.c): any bytes either load into a
 * WordPiece tokenizer, which then encodes a few texts (a pair and
 * truncation among them), or fail with a status; seeded with
 * corpus_tokenizer_json/. */
#include "model/wordpiece.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  wp_tokenizer *t;
  if (wp_load_json((const char *)data, size, "fuzz", &t) != RLX_OK) return 0;
  static const char *const texts[] = {"Hello, World! naïve café 日本語 😀 [CLS] x", "", "\xff\xfe a ##b",
                                      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  wp_ids o = {0};
  for (int i = 0; i < 4; i++) {
    const char *s = texts[i], *b = texts[(i + 1) % 4];
    wp_encode(t, s, strlen(s), NULL, 0, 1, 0, &o);
    wp_encode(t, s, strlen(s), b, strlen(b), 1, 5, &o);
  }
  /* the text itself, as a text to encode */
  wp_encode(t, (const char *)data, size, NULL, 0, 0, 0, &o);
  wp_ids_free(&o);
  wp_free(t);
  return 0;
}
