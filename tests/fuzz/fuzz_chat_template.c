/* fuzz_chat_template — libFuzzer harness of the chat-template renderer.
 *
 * Input: a flag byte (add_assistant), then sections split at 0x02: the
 * template text (tokenizer.chat_template of a GGUF built in memory,
 * gguf_build.h), then up to 8 messages, each "role 0x01 content". A
 * template that is recognized is rendered three ways: as a size query
 * (NULL, 0), into a buffer of exactly that size plus the NUL, and into one
 * of half the size (heap buffers of exact size, so ASan sees any write
 * past them); the sizes must agree and the fitting render must end in a
 * NUL. Any crash, leak, sanitizer report or abort() is a bug. */
#include "gguf_build.h"
#include "rlx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSGS 8

static char *c_string(const uint8_t *s, size_t n) {
  char *c = malloc(n + 1);
  if (c) {
    memcpy(c, s, n);
    c[n] = 0;
  }
  return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const int add_assistant = data[0] & 1;
  const uint8_t *sec[1 + MAX_MSGS];
  size_t sec_len[1 + MAX_MSGS];
  int n_sec = gb_split(data + 1, size - 1, 0x02, sec, sec_len, 1 + MAX_MSGS);
  gguf_build b;
  gb_start(&b);
  gb_kv_str(&b, "tokenizer.chat_template", (const char *)sec[0], sec_len[0]);
  gb_finish(&b);
  rlx_chat_message msgs[MAX_MSGS];
  int n_msgs = 0;
  for (int i = 1; i < n_sec; i++) {
    const uint8_t *part[2];
    size_t part_len[2];
    int k = gb_split(sec[i], sec_len[i], 0x01, part, part_len, 2);
    msgs[n_msgs].role = c_string(part[0], part_len[0]);
    msgs[n_msgs].content = k > 1 ? c_string(part[1], part_len[1]) : c_string((const uint8_t *)"", 0);
    n_msgs++;
  }
  rlx_model_file *f = NULL;
  int ok = !b.failed;
  for (int i = 0; i < n_msgs; i++) ok &= msgs[i].role && msgs[i].content;
  if (ok && rlx_model_file_open_memory(b.p, b.n, &f) == RLX_OK) {
    size_t n = 0, again = 0, half = 0;
    rlx_status st = rlx_chat_apply_template(f, msgs, n_msgs, add_assistant, NULL, 0, &n);
    if (st == RLX_OK || st == RLX_ERR_INVALID) {
      if ((st == RLX_OK) != (n == 0)) abort();
      char *full = malloc(n + 1), *part = malloc(n / 2 ? n / 2 : 1);
      if (full && part) {
        if (rlx_chat_apply_template(f, msgs, n_msgs, add_assistant, full, n + 1, &again) != RLX_OK || again != n ||
            full[n])
          abort();
        rlx_status h = rlx_chat_apply_template(f, msgs, n_msgs, add_assistant, part, n / 2, &half);
        if (half != n || (n && h != RLX_ERR_INVALID)) abort();
      }
      free(full);
      free(part);
    } else if (st != RLX_ERR_UNSUPPORTED) {
      abort(); /* an unknown template is unsupported; nothing else may fail */
    }
  }
  rlx_model_file_close(f);
  for (int i = 0; i < n_msgs; i++) {
    free((char *)msgs[i].role);
    free((char *)msgs[i].content);
  }
  free(b.p);
  return 0;
}
