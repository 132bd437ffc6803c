/* fuzz_tokenizer — libFuzzer harness of the tokenizers (SentencePiece and
 * byte-level BPE) on fuzzed vocabularies and text.
 *
 * Input: two flag bytes, then sections split at 0x02: the vocabulary
 * (tokens split at 0x01), the BPE merges ("left right", split at 0x01) and
 * the text. Flags pick the model (llama/gpt2), the pre-tokenizer name,
 * BOS/EOS ids (any value: out of range must be refused), add_bos /
 * add_eos / add_space_prefix, whether token types follow the text
 * (<...> control, <0xNN> byte) and whether scores are present. The
 * vocabulary becomes a GGUF's tokenizer.ggml.* keys (gguf_build.h) and is
 * loaded as a model's would be. A tokenizer that loads tokenizes the text
 * (parse_special both ways), and every id must lie in the vocabulary; a
 * too small buffer must report the same count as a full one; the ids are
 * decoded whole and one by one (as size queries first); every piece must
 * fit what detokenize said. Any crash, leak, sanitizer report or abort()
 * is a bug. */
#include "gguf_build.h"
#include "rlx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TOKENS 512
#define MAX_MERGES 1024

static const char *const pre_names[] = {"default", "gpt2", "smollm", "llama-bpe", "qwen2", "phi-2", "no-such-pre"};

static int token_type(const uint8_t *s, size_t n) {
  if (n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') return 6;     /* byte */
  if (n >= 2 && s[0] == '<' && s[n - 1] == '>') return 3;          /* control */
  if (n >= 1 && s[0] == '[') return 4;                              /* user-defined */
  return 1;                                                         /* normal */
}

static void check_tokenizer(const rlx_tokenizer *t, const uint8_t *text, size_t text_len, int parse_special) {
  const int32_t nv = rlx_tokenizer_vocab_size(t);
  int64_t n = -1, n_small = -1;
  int32_t small[4];
  rlx_status st_small = rlx_tokenize(t, (const char *)text, text_len, 1, parse_special, small, 4, &n_small);
  int64_t cap = (int64_t)text_len * 2 + 8;
  int32_t *ids = malloc((size_t)cap * sizeof *ids);
  if (!ids) return;
  rlx_status st = rlx_tokenize(t, (const char *)text, text_len, 1, parse_special, ids, cap, &n);
  if (st != RLX_OK) {
    free(ids);
    return;
  }
  if (n < 0 || n > cap) abort();
  if (n <= 4 ? st_small != RLX_OK || n_small != n : st_small != RLX_ERR_INVALID || n_small != n) abort();
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= nv) abort();
  for (int render = 0; render < 2; render++) {
    size_t total = 0, got = 0;
    if (rlx_detokenize(t, ids, n, render, NULL, 0, &total) != (n ? (total ? RLX_ERR_INVALID : RLX_OK) : RLX_OK))
      abort();
    char *buf = malloc(total + 1);
    if (!buf) break;
    if (rlx_detokenize(t, ids, n, render, buf, total + 1, &got) != RLX_OK || got != total || buf[got]) abort();
    size_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
      size_t len = 0, again = 0;
      rlx_status q = rlx_token_to_piece(t, ids[i], render, NULL, 0, &len);
      if (q != (len ? RLX_ERR_INVALID : RLX_OK)) abort();
      char *piece = malloc(len + 1);
      if (!piece) continue;
      if (rlx_token_to_piece(t, ids[i], render, piece, len + 1, &again) != RLX_OK || again != len) abort();
      sum += len;
      free(piece);
      (void)rlx_token_is_eog(t, ids[i]);
    }
    /* detokenize may drop one leading space (SentencePiece's prefix) */
    if (total != sum && total + 1 != sum) abort();
    free(buf);
  }
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const uint8_t flags = data[0], pick = data[1];
  const uint8_t *sec[3];
  size_t sec_len[3];
  int n_sec = gb_split(data + 2, size - 2, 0x02, sec, sec_len, 3);
  const uint8_t *tok[MAX_TOKENS], *mer[MAX_MERGES];
  size_t tok_len[MAX_TOKENS], mer_len[MAX_MERGES];
  int n_tok = gb_split(sec[0], sec_len[0], 0x01, tok, tok_len, MAX_TOKENS);
  int n_mer = n_sec > 1 && sec_len[1] ? gb_split(sec[1], sec_len[1], 0x01, mer, mer_len, MAX_MERGES) : 0;
  const uint8_t *text = n_sec > 2 ? sec[2] : (const uint8_t *)"";
  size_t text_len = n_sec > 2 ? sec_len[2] : 0;

  gguf_build b;
  gb_start(&b);
  const int bpe = flags & 1;
  gb_kv_str(&b, "tokenizer.ggml.model", bpe ? "gpt2" : "llama", bpe ? 4 : 5);
  const char *pre = pre_names[pick % (sizeof pre_names / sizeof pre_names[0])];
  if (bpe) gb_kv_str(&b, "tokenizer.ggml.pre", pre, strlen(pre));
  gb_kv_array(&b, "tokenizer.ggml.tokens", GB_STRING, (uint64_t)n_tok);
  for (int i = 0; i < n_tok; i++) gb_str(&b, (const char *)tok[i], tok_len[i]);
  if (flags & 0x20) {
    gb_kv_array(&b, "tokenizer.ggml.token_type", GB_I32, (uint64_t)n_tok);
    for (int i = 0; i < n_tok; i++) gb_u32(&b, (uint32_t)token_type(tok[i], tok_len[i]));
  }
  if (!bpe && (flags & 0x80) == 0) {
    gb_kv_array(&b, "tokenizer.ggml.scores", GB_F32, (uint64_t)n_tok);
    for (int i = 0; i < n_tok; i++) {
      float score = -(float)i;
      gb_put(&b, &score, 4);
    }
  }
  if (bpe && n_sec > 1) {
    gb_kv_array(&b, "tokenizer.ggml.merges", GB_STRING, (uint64_t)n_mer);
    for (int i = 0; i < n_mer; i++) gb_str(&b, (const char *)mer[i], mer_len[i]);
  }
  if (flags & 0x10) {
    gb_kv_u32(&b, "tokenizer.ggml.bos_token_id", pick >> 4);
    gb_kv_u32(&b, "tokenizer.ggml.eos_token_id", pick & 15);
  }
  gb_kv_bool(&b, "tokenizer.ggml.add_space_prefix", flags & 2);
  gb_kv_bool(&b, "tokenizer.ggml.add_bos_token", flags & 4);
  gb_kv_bool(&b, "tokenizer.ggml.add_eos_token", flags & 8);
  gb_finish(&b);

  rlx_model_file *f = NULL;
  rlx_tokenizer *t = NULL;
  if (!b.failed && rlx_model_file_open_memory(b.p, b.n, &f) == RLX_OK) {
    if (rlx_tokenizer_load(f, &t) == RLX_OK) {
      check_tokenizer(t, text, text_len, 0);
      check_tokenizer(t, text, text_len, 1);
      size_t len;
      if (rlx_token_to_piece(t, rlx_tokenizer_vocab_size(t), 0, NULL, 0, &len) == RLX_OK) abort();
      if (rlx_token_to_piece(t, -1, 0, NULL, 0, &len) == RLX_OK) abort();
    } else if (t) {
      abort(); /* a failed load leaves *out NULL */
    }
  }
  rlx_tokenizer_free(t);
  rlx_model_file_close(f);
  free(b.p);
  return 0;
}
