/* text_lex.h — the tokens of the graph text form (text_lex.c), for its
 * parser (text_parse.c): whitespace and `#` comments skipped, names,
 * numbers, strings, h"..." hex strings, %N node labels and punctuation,
 * each checked against its bound; errors are RLX_ERR_FORMAT with
 * "line L, col C: ..." in rlx_last_error().
 */
#ifndef RLX_TEXT_LEX_H
#define RLX_TEXT_LEX_H

#include "ir.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define TEXT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TEXT_PRINTF(f, a)
#endif

/* Bounds of one token: a text beyond them is an error, never a crash. */
enum {
  TEXT_MAX_IDENT = 256, /* bytes of an op, attribute, enum or symbol name */
  TEXT_MAX_STR = 4096,  /* decoded bytes of a string (graph and leaf names) */
  TEXT_MAX_NUM = 64,    /* bytes of one number */
};

typedef enum { TK_EOF, TK_IDENT, TK_NUM, TK_STR, TK_HEX, TK_LABEL, TK_PUNCT } tok_kind;

typedef struct {
  tok_kind kind;
  const char *s;   /* source text; TK_STR / TK_HEX: the bytes between the quotes */
  size_t len;
  int line, col;
  int64_t label;   /* TK_LABEL: the number after '%' */
} tok;

typedef struct {
  const char *p;           /* next unread byte; never moves past the NUL */
  const char *line_start;
  int line;
  tok t;                   /* the current token */
} text_lexer;

/* A lexer at the start of text (NUL-terminated); no token read yet. */
void text_lex_init(text_lexer *L, const char *text);

/* Reads the next token into L->t. */
rlx_status text_lex_next(text_lexer *L);

/* Errors: st at line, col; a syntax error at token t; out of memory at t.
 * Each sets rlx_last_error() and returns its status. */
TEXT_PRINTF(4, 5) rlx_status text_fail_at(rlx_status st, int line, int col, const char *fmt, ...);
TEXT_PRINTF(2, 3) rlx_status text_syntax(const tok *t, const char *fmt, ...);
rlx_status text_nomem(const tok *t);

/* A short quotable description of a token for messages, in buf. */
const char *text_tok_desc(const tok *t, char *buf, size_t cap);
#define TOK_DESC(t) text_tok_desc((t), (char[64]){0}, 64)

/* The string token t (TK_STR) decoded into a new NUL-terminated string;
 * NULL when out of memory. */
char *text_decode_str(const tok *t);

static inline int text_is_digit(int c) { return c >= '0' && c <= '9'; }

/* The value of hex digit c, or -1. */
static inline int text_hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

#endif /* RLX_TEXT_LEX_H */
