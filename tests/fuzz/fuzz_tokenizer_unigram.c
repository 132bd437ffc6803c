/* fuzz_tokenizer_unigram — libFuzzer harness of the Unigram tokenizer
 * (src/model/tokenizer_unigram.c): the input is [u16 n][n bytes][text];
 * the n bytes, base64-encoded, are the precompiled_charsmap (trie and
 * replacement strings) of a small Unigram tokenizer.json with byte
 * fallback, a Replace, Metaspace and lstrip/rstrip added tokens, and the
 * text is encoded alone and as a truncated pair. Seeded with
 * corpus_tokenizer_unigram/ (tests/ref/unigram_fuzz_seeds.py). */
#include "model/wordpiece.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char head[] =
    "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"byte_fallback\": true, \"vocab\": [[\"<unk>\", 0], [\"<s>\", 0],"
    " [\"</s>\", 0], [\"\\u2581\", -2], [\"\\u2581a\", -3], [\"a\", -4], [\"ab\", -5], [\"\\u2581\\u2581\", -6],"
    " [\"A\", -7], [\"<0x41>\", -1], [\"<0xC3>\", -1], [\"<0xA9>\", -1], [\"<mask>\", 0], [\"\\u00e9\", -2.5]]},"
    " \"added_tokens\": [{\"id\": 1, \"content\": \"<s>\", \"special\": true},"
    " {\"id\": 12, \"content\": \"<mask>\", \"lstrip\": true, \"rstrip\": true, \"special\": true}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"";
static const char tail[] =
    "\"}, {\"type\": \"Replace\", \"pattern\": {\"Regex\": \" {2,}\"}, \"content\": \" \"},"
    " {\"type\": \"Strip\", \"strip_left\": false, \"strip_right\": true}]},"
    " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"first\"},"
    " \"post_processor\": {\"type\": \"RobertaProcessing\", \"sep\": [\"</s>\", 2], \"cls\": [\"<s>\", 1]}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t n = (size_t)data[0] | (size_t)data[1] << 8;
  if (n > size - 2) n = size - 2;
  const uint8_t *blob = data + 2, *text = blob + n;
  size_t text_len = size - 2 - n;
  char *json = malloc(sizeof head + sizeof tail + (n + 2) / 3 * 4);
  if (!json) return 0;
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t k = sizeof head - 1;
  memcpy(json, head, k);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)blob[i] << 16 | (i + 1 < n ? (uint32_t)blob[i + 1] << 8 : 0) | (i + 2 < n ? blob[i + 2] : 0);
    json[k++] = b64[v >> 18 & 63];
    json[k++] = b64[v >> 12 & 63];
    json[k++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
    json[k++] = i + 2 < n ? b64[v & 63] : '=';
  }
  memcpy(json + k, tail, sizeof tail - 1);
  k += sizeof tail - 1;
  wp_tokenizer *t;
  if (wp_load_json(json, k, "fuzz", &t) == RLX_OK) {
    wp_ids o = {0};
    wp_encode(t, (const char *)text, text_len, NULL, 0, 1, 0, &o);
    wp_encode(t, (const char *)text, text_len, "ab <mask> a", 11, 1, 7, &o);
    wp_ids_free(&o);
    wp_free(t);
  }
  free(json);
  return 0;
}
