/* grammar.h — GBNF grammars (rlx.h "constrained decoding"): the parser
 * (grammar.c) and the matcher over token pieces (grammar_match.c), as
 * llama.cpp models them. Internal.
 *
 * A parsed grammar is a flat array of elements, each rule a run of them:
 * its alternatives, each a sequence of elements, separated by G_ALT and
 * closed by G_END. A character class is a G_CHAR (or G_CHAR_NOT, or
 * G_CHAR_ANY for `.`) followed by G_CHAR_RNG_UPPER (the upper end of a
 * range begun by the element before) and G_CHAR_ALT (another character of
 * the same class) elements. Groups and repetitions become rules of their
 * own (x* is r ::= x r | ). */
#ifndef RLX_MODEL_GRAMMAR_H
#define RLX_MODEL_GRAMMAR_H

#include "rlx.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { G_END, G_ALT, G_REF, G_CHAR, G_CHAR_NOT, G_CHAR_RNG_UPPER, G_CHAR_ALT, G_CHAR_ANY } grammar_type;

typedef struct {
  uint32_t type;   /* grammar_type */
  uint32_t value;  /* a code point, or the rule of a G_REF */
} grammar_elem;

typedef struct {
  grammar_elem *e;
  int64_t n_e;
  int64_t *rule_start;  /* [n_rules]: the rule's first element */
  int32_t n_rules;
  int32_t root;
} grammar_rules;

/* Bounds on what a grammar may make: past them the parser refuses it. */
#define GRAMMAR_MAX_ELEMS (1 << 20)
#define GRAMMAR_MAX_RULES (1 << 16)
#define GRAMMAR_MAX_REPEAT 2000   /* llama.cpp's: a larger {m,n} maximum is unbounded */

/* Parses text (NUL-terminated); root names the start rule ("root" when
 * NULL). RLX_ERR_FORMAT naming the line and column of a syntax error, an
 * undefined or twice-defined rule, left recursion or a missing root. */
rlx_status grammar_parse(const char *text, const char *root, grammar_rules *out);
void       grammar_rules_free(grammar_rules *r);

/* Advances g over raw bytes (not tokens): RLX_ERR_INVALID where they leave
 * the grammar. For tests and the fuzz harness. */
rlx_status grammar_accept_bytes(rlx_grammar *g, const char *bytes, size_t n);

/* Sets the logits of the tokens g does not allow now to -inf (those at
 * -inf stay, and those of n_vocab past the grammar's vocabulary go);
 * returns how many are left. */
int64_t grammar_mask(rlx_grammar *g, float *logits, int64_t n_vocab);

#endif
