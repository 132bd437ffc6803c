/* wordpiece.h — the tokenizer of BERT-family encoders
 * (tokenizer_wordpiece.c), read from a Hugging Face tokenizer.json or a
 * vocab.txt: WordPiece, or the Unigram model of unigram.h (XLM-RoBERTa),
 * which shares its vocabulary, added tokens, templates and truncation.
 * Internal.
 *
 * It follows Hugging Face tokenizers: the BertNormalizer (clean_text drops
 * NUL, U+FFFD and control characters and turns whitespace into spaces;
 * handle_chinese_chars puts spaces around CJK ideographs; strip_accents,
 * which defaults to lowercase, is NFD without nonspacing marks; then
 * lowercase), the BertPreTokenizer (split on whitespace, every punctuation
 * character a word of its own), then greedy longest-match-first WordPiece
 * with the "##" continuation prefix, a word longer than
 * max_input_chars_per_word characters or with no match being [UNK]. Special
 * added tokens (normalized: false) written in the text are their ids. The
 * post-processor's templates add [CLS]/[SEP] (or <s>/</s>) to one text or
 * a pair, and truncation is longest-first. The per-codepoint classes come
 * from tokenizers itself (unicode_wordpiece.c). */
#ifndef RLX_MODEL_WORDPIECE_H
#define RLX_MODEL_WORDPIECE_H

#include "rlx.h"

#include <stddef.h>
#include <stdint.h>

enum { WP_CONTROL = 1, WP_SPACE = 2, WP_PUNCT = 4, WP_CJK = 8, WP_MARK = 16 };
typedef struct { uint32_t first, last; uint8_t flags; } wp_cpt_range;
typedef struct { uint32_t cp; uint16_t off; uint8_t len; } wp_cpt_map;
extern const wp_cpt_range wp_cpt_ranges[];
extern const int wp_n_cpt_ranges;
extern const wp_cpt_map wp_lower_map[], wp_strip_map[];
extern const int wp_n_lower_map, wp_n_strip_map;
extern const uint32_t wp_lower_data[], wp_strip_data[];

/* One item of a post-processor template: a token id, or a sequence. */
enum { WP_SEQ_A = -1, WP_SEQ_B = -2 };
typedef struct { int32_t id; int32_t type_id; } wp_item;

typedef struct wp_tokenizer wp_tokenizer;

/* From the text of a tokenizer.json (model WordPiece or Unigram); what
 * names it in messages. RLX_ERR_UNSUPPORTED for another model type. */
rlx_status wp_load_json(const char *text, size_t len, const char *what, wp_tokenizer **out);
/* From the text of a vocab.txt (one token a line) with BERT's defaults. */
rlx_status wp_load_vocab(const char *text, size_t len, const char *what, int lowercase, wp_tokenizer **out);
void       wp_free(wp_tokenizer *t);

int32_t wp_vocab_size(const wp_tokenizer *t);
int32_t wp_pad_id(const wp_tokenizer *t);
/* The truncation length tokenizer.json asks for (0: none). */
int64_t wp_max_length(const wp_tokenizer *t);

/* Encoded ids and token type ids, grown as needed; free with wp_ids_free. */
typedef struct {
  int32_t *ids, *types;
  int64_t n, cap;
} wp_ids;
void wp_ids_free(wp_ids *o);
/* Appends one id (-1: out of memory). */
int wp_emit(wp_ids *o, int32_t id, int32_t type);
/* The id of the token s[0..n) in the vocabulary; -1 if none. */
int32_t wp_lookup(const wp_tokenizer *t, const char *s, size_t n);

/* Encodes text a (and b, when not NULL: a pair) into o (reset first):
 * with add_special the template's special tokens; max_len > 0 truncates
 * the whole to max_len ids, longest sequence first. */
rlx_status wp_encode(const wp_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                     int add_special, int64_t max_len, wp_ids *o);

#endif
