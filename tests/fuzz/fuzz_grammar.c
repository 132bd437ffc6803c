/* fuzz_grammar — libFuzzer harness of the GBNF parser and matcher and of
 * the JSON-schema compiler (rlx.h "constrained decoding").
 *
 * Input: a mode byte, then text. Mode even: the text up to the first NUL
 * is a grammar; if it parses, the bytes after the NUL are fed to it in
 * runs split at 0x01 (so code points split across runs are exercised),
 * stopping where they leave it. Mode odd: the text is a JSON schema; when
 * it compiles, its grammar must parse (a schema the compiler takes and the
 * parser refuses is a bug: abort()). Any crash, leak, sanitizer report or
 * abort() is a bug. */
#include "model/grammar.h"
#include "rlx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const int schema_mode = data[0] & 1;
  const char *text = (const char *)data + 1;
  const size_t n = size - 1;
  const char *nul = memchr(text, 0, n);
  const size_t text_len = nul ? (size_t)(nul - text) : n;
  char *s = malloc(text_len + 1);
  if (!s) return 0;
  memcpy(s, text, text_len);
  s[text_len] = 0;
  rlx_grammar *g = NULL;
  if (schema_mode) {
    char *gbnf = NULL;
    if (rlx_json_schema_to_gbnf(s, &gbnf) == RLX_OK) {
      if (rlx_grammar_new(gbnf, NULL, NULL, &g) != RLX_OK) abort();
      rlx_grammar_free(g);
    }
    free(gbnf);
  } else if (rlx_grammar_new(s, NULL, NULL, &g) == RLX_OK) {
    const char *p = nul ? nul + 1 : text + n, *end = text + n;
    while (p < end) {
      const char *cut = memchr(p, 1, (size_t)(end - p));
      size_t len = cut ? (size_t)(cut - p) : (size_t)(end - p);
      if (grammar_accept_bytes(g, p, len) != RLX_OK) break;
      (void)rlx_grammar_complete(g);
      p += len + (cut != NULL);
    }
    rlx_grammar_free(g);
  }
  free(s);
  return 0;
}
