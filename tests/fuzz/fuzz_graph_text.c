/* fuzz_graph_text — libFuzzer harness of the graph text form.
 *
 * The bytes are parsed as graph text (copied into a NUL-terminated buffer,
 * as every caller of rlx_graph_from_text has one). A text that parses is
 * printed, and the print must parse again, print the same, and hash the
 * same: the canonical form is a fixed point. Any crash, leak, sanitizer
 * report or abort() here is a bug.
 */
#include "rlx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  rlx_graph *g = NULL;
  if (rlx_graph_from_text(text, &g) == RLX_OK) {
    char *printed = rlx_graph_to_text(g);
    if (!printed) abort();
    rlx_graph *again = NULL;
    if (rlx_graph_from_text(printed, &again) != RLX_OK) abort();  /* a print always parses */
    char *reprinted = rlx_graph_to_text(again);
    if (!reprinted || strcmp(printed, reprinted) != 0) abort();
    if (rlx_graph_hash(g) != rlx_graph_hash(again)) abort();
    free(reprinted);
    rlx_graph_free(again);
    free(printed);
  } else if (g) {
    abort();  /* a failed parse leaves *out NULL */
  }
  rlx_graph_free(g);
  free(text);
  return 0;
}
