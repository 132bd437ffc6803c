/* unigram.h — the Unigram (SentencePiece) model of a tokenizer.json
 * (tokenizer_unigram.c): XLM-RoBERTa, multilingual-e5, bge-m3. Internal.
 *
 * The encoder tokenizer of wordpiece.h holds the vocabulary, added tokens,
 * post-processor and truncation; when its model is Unigram it hands each
 * span of text between added tokens to ug_encode, which follows Hugging
 * Face tokenizers: the normalizers (Precompiled: SentencePiece's
 * precompiled charsmap, a double-array trie applied per grapheme cluster;
 * Replace; Strip; a Sequence of them), the Metaspace pre-tokenizer, then
 * Viterbi over the pieces' scores (unknown characters fused into one
 * unknown token, or spelled as <0xXX> byte tokens with byte_fallback). */
#ifndef RLX_MODEL_UNIGRAM_H
#define RLX_MODEL_UNIGRAM_H

#include "json.h"
#include "wordpiece.h"

/* Grapheme_Cluster_Break classes (low 4 bits) and Extended_Pictographic,
 * from unicode_grapheme.c */
enum { UG_CR = 1, UG_LF, UG_CONTROL, UG_EXTEND, UG_ZWJ, UG_RI, UG_PREPEND, UG_SPACING, UG_L, UG_V, UG_T, UG_LV,
       UG_LVT, UG_PICT = 16 };
typedef wp_cpt_range ug_cpt_range;
extern const ug_cpt_range ug_cpt_ranges[];
extern const int ug_n_cpt_ranges;

typedef struct ug_model ug_model;

/* The Unigram model object `model` of d: its scores, unk_id and
 * byte_fallback. The pieces' texts in id order go to *strs and *lens (n_vocab
 * of them, malloc'd, for the caller's vocabulary table; free each). */
rlx_status ug_load(const json_doc *d, int64_t model, const char *what, ug_model **out, char ***strs, size_t **lens,
                   int32_t *n_vocab);
/* The normalizer and pre_tokenizer tokens of d (-1 or null: none), once the
 * vocabulary t is built (byte-fallback ids are looked up in it). */
rlx_status ug_load_front(ug_model *m, const wp_tokenizer *t, const json_doc *d, int64_t normalizer, int64_t pre,
                         const char *what);
void       ug_free(ug_model *m);
int32_t    ug_unk_id(const ug_model *m);

/* Ids of the span s[0..len) (no added tokens in it) appended to o; first:
 * the span starts the text (Metaspace's prepend_scheme "first"). */
rlx_status ug_encode(const wp_tokenizer *t, const ug_model *m, const char *s, size_t len, int first, wp_ids *o);

#endif
