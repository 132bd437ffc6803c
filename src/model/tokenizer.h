/* tokenizer.h — internals of the tokenizers (src/model/tokenizer*.c).
 *
 * tokenizer.c loads the vocabulary from the tokenizer.ggml.* metadata
 * (checking every length, id and merge), splits text on the special tokens
 * and implements the public API; tokenizer_bpe.c is byte-level BPE with
 * the GPT-2-style pre-tokenizer splits (gpt2, smollm, llama-bpe, qwen2),
 * written by hand over a codepoint class table (unicode_table.c);
 * tokenizer_spm.c is SentencePiece-style BPE with byte fallback, over
 * scores (or over merge ranks where the metadata lists merges, as a
 * Hugging Face folder's tokenizer.json does). Both follow Hugging Face
 * `tokenizers` as transformers builds it from a GGUF file.
 */
#ifndef RLX_MODEL_TOKENIZER_H
#define RLX_MODEL_TOKENIZER_H

#include "rlx.h"

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- codepoints (unicode_table.c) */

enum { TOK_CPT_LETTER = 1, TOK_CPT_NUMBER = 2, TOK_CPT_SPACE = 4 };
typedef struct { uint32_t first, last; uint8_t flags; } tok_cpt_range;
extern const tok_cpt_range tok_cpt_ranges[];
extern const int tok_n_cpt_ranges;
/* TOK_CPT_* flags of a codepoint (0: none of the classes). */
int tok_cpt_flags(uint32_t cp);
/* Decodes the UTF-8 sequence at s (n > 0 bytes left) into *cp; returns its
 * length. An invalid or truncated sequence is one byte standing for
 * U+FFFD, so every byte of the input stays covered. */
int tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* ---------------------------------------------------------------- the vocabulary */

typedef enum { TOK_BPE, TOK_SPM } tok_kind;
typedef enum { TOK_PRE_GPT2, TOK_PRE_SMOLLM, TOK_PRE_LLAMA3, TOK_PRE_QWEN2 } tok_pre;
/* SentencePiece: which spans between added tokens get the ▁ prefix
 * (tokenizer.rlx.prepend_scheme): the one at the start of the text unless
 * it starts with a space (Metaspace "first", the default), every one that
 * does not start with a space (Metaspace "always"), or every one (Hugging
 * Face's Prepend normalizer, "every"). */
typedef enum { TOK_PREPEND_FIRST, TOK_PREPEND_ALWAYS, TOK_PREPEND_EVERY } tok_prepend;
/* tokenizer.ggml.token_type values (llama.cpp's). */
enum { TOK_TYPE_NORMAL = 1, TOK_TYPE_UNKNOWN = 2, TOK_TYPE_CONTROL = 3, TOK_TYPE_USER = 4,
       TOK_TYPE_UNUSED = 5, TOK_TYPE_BYTE = 6 };

/* Open-addressing map from byte strings to token ids. */
typedef struct {
  int32_t *slots;   /* id + 1; 0 = empty */
  uint64_t mask;
} tok_text_map;

/* Open-addressing map from a pair of token ids to a merge. */
typedef struct {
  uint64_t key;     /* left << 32 | right, + 1 (0 = empty) */
  int32_t rank, result;
} tok_merge;

struct rlx_tokenizer {
  tok_kind kind;
  tok_pre pre;
  tok_prepend prepend;        /* SentencePiece, where add_space_prefix */
  int32_t n_vocab;
  char *text;                 /* every token's text, back to back */
  uint64_t *text_off;         /* n_vocab + 1 offsets into text */
  char *piece;                /* the bytes each token stands for (byte-level / ▁ / <0xNN> decoded) */
  uint64_t *piece_off;
  uint8_t *type;              /* TOK_TYPE_* */
  float *score;               /* SentencePiece; NULL for BPE */
  tok_text_map map;
  tok_merge *merges;          /* BPE; SentencePiece with merges (else NULL) */
  uint64_t merge_mask;
  int32_t byte_id[256];       /* BPE: the token of each byte; SPM: <0xNN> or -1 */
  int32_t bos, eos, unk, eot, eom;
  int add_bos, add_eos, add_space_prefix, ignore_merges;
  int32_t *eog;               /* end-of-generation ids */
  int n_eog;
  int32_t *added;             /* tokens matched whole in the text, longest first */
  int n_added;
};

/* Token id of len bytes of text; -1 if none. */
int32_t tok_lookup(const rlx_tokenizer *t, const char *s, size_t len);
static inline size_t tok_text_len(const rlx_tokenizer *t, int32_t id) {
  return (size_t)(t->text_off[id + 1] - t->text_off[id]);
}
static inline const char *tok_text(const rlx_tokenizer *t, int32_t id) { return t->text + t->text_off[id]; }

/* Growing output of ids: everything is counted, ids past cap are dropped. */
typedef struct {
  int32_t *ids;
  int64_t cap, n;
} tok_out;
static inline void tok_emit(tok_out *o, int32_t id) {
  if (o->n < o->cap) o->ids[o->n] = id;
  o->n++;
}

/* ---------------------------------------------------------------- the two models */

/* Byte-level BPE (tokenizer_bpe.c). tok_bpe_init builds the merge table
 * from tokenizer.ggml.merges (RLX_ERR_FORMAT for a malformed merge);
 * tok_bpe_encode splits one span of text (no special tokens in it) with
 * the pre-tokenizer and emits the ids of every piece. */
rlx_status tok_bpe_init(rlx_tokenizer *t, const rlx_model_file *f);
/* The merge table of tokenizer.ggml.merges (rank: its index), and the
 * merge of the pair (l, r) in it (NULL: none). */
rlx_status tok_merges_load(rlx_tokenizer *t, const rlx_model_file *f);
const tok_merge *tok_find_merge(const rlx_tokenizer *t, int32_t l, int32_t r);
rlx_status tok_bpe_encode(const rlx_tokenizer *t, const char *s, size_t len, tok_out *o);
/* The bytes the byte-level spelling s[0..len) stands for, written to out
 * (room for len bytes); returns their count, or -1 when s has a character
 * outside the byte alphabet. */
long tok_bpe_unspell(const char *s, size_t len, char *out);

/* SentencePiece (tokenizer_spm.c). at_start: the span begins the text
 * (where prepend is TOK_PREPEND_FIRST, the dummy prefix ▁ goes only
 * there). */
rlx_status tok_spm_encode(const rlx_tokenizer *t, const char *s, size_t len, int at_start, tok_out *o);

#endif /* RLX_MODEL_TOKENIZER_H */
