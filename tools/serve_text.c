/* serve_text.c — how much of a choice's text may be sent. A stop string may
 * arrive split over several tokens ("\n\n" as "\n" + "\n"), so a tail that
 * could still grow into one is held back until the next token tells; the
 * stop string itself is never sent. A tail that ends inside a UTF-8
 * character (a byte-level token carries part of one) waits for the rest. */
#include "serve.h"

#include <stdint.h>
#include <string.h>

/* Where needle first occurs in hay, or SIZE_MAX (texts may hold NUL bytes). */
static size_t find_bytes(const char *hay, size_t n_hay, const char *needle, size_t n_needle) {
  if (n_needle == 0 || n_needle > n_hay) return SIZE_MAX;
  for (size_t i = 0; i + n_needle <= n_hay; i++)
    if (hay[i] == needle[0] && !memcmp(hay + i, needle, n_needle)) return i;
  return SIZE_MAX;
}

size_t serve_text_ready(const char *text, size_t len, size_t from, char *const *stop, int n_stop,
                        size_t *stop_at) {
  *stop_at = SIZE_MAX;
  /* Nothing before `from` can begin a stop string: such a start would
   * have been held back. */
  for (int i = 0; i < n_stop; i++) {
    size_t p = find_bytes(text + from, len - from, stop[i], strlen(stop[i]));
    if (p != SIZE_MAX && from + p < *stop_at) *stop_at = from + p;
  }
  if (*stop_at != SIZE_MAX) return *stop_at;
  size_t hold = 0;
  for (int i = 0; i < n_stop; i++) {
    size_t k = strlen(stop[i]);
    if (k == 0) continue;
    for (size_t m = k - 1 < len - from ? k - 1 : len - from; m > hold; m--)
      if (!memcmp(text + len - m, stop[i], m)) {
        hold = m;
        break;
      }
  }
  size_t end = len - hold;
  return from + cli_utf8_complete((const unsigned char *)text + from, end - from);
}
