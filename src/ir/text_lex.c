/* text_lex.c — the tokens of the graph text form, for text_parse.c
 * (text_lex.h): one token at a time, each checked against its bound, so
 * a hostile text gets an error with its line and column, never a crash.
 */
#include "text_lex.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rlx_status vfail_at(rlx_status st, int line, int col, const char *fmt, va_list ap) {
  char msg[900];
  vsnprintf(msg, sizeof msg, fmt, ap);
  return rlx_set_error(st, "line %d, col %d: %s", line, col, msg);
}

rlx_status text_fail_at(rlx_status st, int line, int col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail_at(st, line, col, fmt, ap);
  va_end(ap);
  return st;
}

rlx_status text_syntax(const tok *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail_at(RLX_ERR_FORMAT, t->line, t->col, fmt, ap);
  va_end(ap);
  return RLX_ERR_FORMAT;
}

rlx_status text_nomem(const tok *t) {
  return text_fail_at(RLX_ERR_NOMEM, t->line, t->col, "out of memory");
}

const char *text_tok_desc(const tok *t, char *buf, size_t cap) {
  if (t->kind == TK_EOF) return "end of input";
  int n = t->len > 40 ? 40 : (int)t->len;
  if (t->kind == TK_STR) snprintf(buf, cap, "\"%.*s%s\"", n, t->s, t->len > 40 ? "..." : "");
  else if (t->kind == TK_HEX) snprintf(buf, cap, "h\"%.*s%s\"", n, t->s, t->len > 40 ? "..." : "");
  else snprintf(buf, cap, "'%.*s%s'", n, t->s, t->len > 40 ? "..." : "");
  return buf;
}

static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_ident_char(int c) { return is_alpha(c) || text_is_digit(c); }

static int col_of(const text_lexer *L, const char *p) {
  ptrdiff_t c = p - L->line_start + 1;
  return c > 1000000000 ? 1000000000 : (int)c;
}

/* Validates a string body (p after the opening quote); *end gets the closing quote. */
static rlx_status lex_string(text_lexer *L, const char *p, const char **end) {
  size_t decoded = 0;
  for (;;) {
    unsigned char c = (unsigned char)*p;
    if (c == '"') break;
    if (c == 0 || c == '\n') return text_syntax(&L->t, "unterminated string");
    if (c < 0x20)
      return text_fail_at(RLX_ERR_FORMAT, L->line, col_of(L, p), "control byte 0x%02x in a string (write \\x%02x)", c, c);
    if (c == '\\') {
      char e = p[1];
      if (e == '"' || e == '\\' || e == 'n' || e == 't') {
        p += 2;
      } else if (e == 'x') {
        int hi = text_hex_value(p[2]);
        int lo = hi < 0 ? -1 : text_hex_value(p[3]);  /* p[3] exists only when p[2] is a digit */
        if (lo < 0) return text_fail_at(RLX_ERR_FORMAT, L->line, col_of(L, p), "\\x needs two hex digits");
        if (hi == 0 && lo == 0)
          return text_fail_at(RLX_ERR_FORMAT, L->line, col_of(L, p), "\\x00 is not allowed in a string");
        p += 4;
      } else if (e == 0 || e == '\n') {
        return text_syntax(&L->t, "unterminated string");
      } else {
        return text_fail_at(RLX_ERR_FORMAT, L->line, col_of(L, p),
                       "unknown escape '\\%c' (use \\\" \\\\ \\n \\t or \\xHH)", e);
      }
    } else {
      p++;
    }
    if (++decoded > TEXT_MAX_STR) return text_syntax(&L->t, "string longer than %d bytes", TEXT_MAX_STR);
  }
  *end = p;
  return RLX_OK;
}

/* Validates a hex body h"..." (p after the opening quote). */
static rlx_status lex_hex(text_lexer *L, const char *p, const char **end) {
  const char *start = p;
  for (; *p != '"'; p++) {
    if (*p == 0 || *p == '\n') return text_syntax(&L->t, "unterminated hex string");
    if (text_hex_value(*p) < 0)
      return text_fail_at(RLX_ERR_FORMAT, L->line, col_of(L, p), "bad hex digit '%c' in h\"...\"",
                     (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f ? *p : '?');
  }
  if ((p - start) % 2) return text_syntax(&L->t, "odd number of hex digits in h\"...\"");
  *end = p;
  return RLX_OK;
}

void text_lex_init(text_lexer *L, const char *text) {
  memset(L, 0, sizeof *L);
  L->p = L->line_start = text;
  L->line = 1;
}

rlx_status text_lex_next(text_lexer *L) {
  const char *p = L->p;
  for (;;) {  /* whitespace and comments */
    if (*p == '\n') {
      if (L->line < INT_MAX) L->line++;  /* saturates on absurdly long texts */
      L->line_start = ++p;
    } else if (*p == ' ' || *p == '\t' || *p == '\r') {
      p++;
    } else if (*p == '#') {
      while (*p && *p != '\n') p++;
    } else {
      break;
    }
  }
  tok *t = &L->t;
  memset(t, 0, sizeof *t);
  t->s = p;
  t->line = L->line;
  t->col = col_of(L, p);
  unsigned char c = (unsigned char)*p;
  const char *end = NULL;
  rlx_status st;
  if (c == 0) {
    t->kind = TK_EOF;
  } else if (c == 'h' && p[1] == '"') {
    t->kind = TK_HEX;
    if ((st = lex_hex(L, p + 2, &end))) return st;
    t->s = p + 2;
    t->len = (size_t)(end - t->s);
    p = end + 1;
  } else if (is_alpha(c)) {
    t->kind = TK_IDENT;
    while (is_ident_char(*p)) p++;
    t->len = (size_t)(p - t->s);
    if (t->len > TEXT_MAX_IDENT) return text_syntax(t, "name longer than %d bytes", TEXT_MAX_IDENT);
  } else if (text_is_digit(c) || (c == '-' && text_is_digit(p[1]))) {
    t->kind = TK_NUM;
    if (*p == '-') p++;
    while (text_is_digit(*p)) p++;
    if (*p == '.')
      for (p++; text_is_digit(*p);) p++;
    if (*p == 'e' || *p == 'E') {
      const char *q = p + 1;
      if (*q == '+' || *q == '-') q++;
      if (!text_is_digit(*q)) return text_fail_at(RLX_ERR_FORMAT, L->line, col_of(L, p), "bad exponent in a number");
      for (p = q; text_is_digit(*p);) p++;
    }
    t->len = (size_t)(p - t->s);
    if (is_ident_char(*p) || *p == '.')
      return text_fail_at(RLX_ERR_FORMAT, L->line, col_of(L, p), "bad character '%c' in a number", *p);
    if (t->len > TEXT_MAX_NUM) return text_syntax(t, "number longer than %d bytes", TEXT_MAX_NUM);
  } else if (c == '"') {
    t->kind = TK_STR;
    if ((st = lex_string(L, p + 1, &end))) return st;
    t->s = p + 1;
    t->len = (size_t)(end - t->s);
    p = end + 1;
  } else if (c == '%') {
    t->kind = TK_LABEL;
    if (!text_is_digit(p[1])) return text_syntax(t, "expected a node label (%%N) after '%%'");
    for (p++; text_is_digit(*p); p++) {
      int d = *p - '0';
      if (t->label > (INT64_MAX - d) / 10) return text_syntax(t, "node label too large");
      t->label = t->label * 10 + d;
    }
    t->len = (size_t)(p - t->s);
    if (is_alpha(*p)) return text_fail_at(RLX_ERR_FORMAT, L->line, col_of(L, p), "bad character '%c' in a node label", *p);
  } else if (strchr("={}()[],:;.?-", c)) {
    t->kind = TK_PUNCT;
    t->len = 1;
    p++;
  } else if (c >= 0x20 && c < 0x7f) {
    return text_syntax(t, "unexpected character '%c'", c);
  } else {
    return text_syntax(t, "unexpected byte 0x%02x", c);
  }
  L->p = p;
  return RLX_OK;
}

char *text_decode_str(const tok *t) {
  char *s = malloc(t->len + 1), *d = s;
  if (!s) return NULL;
  for (const char *p = t->s, *e = t->s + t->len; p < e;) {
    if (*p != '\\') {
      *d++ = *p++;
    } else if (p[1] == 'x') {
      *d++ = (char)(text_hex_value(p[2]) * 16 + text_hex_value(p[3]));
      p += 4;
    } else {
      *d++ = p[1] == 'n' ? '\n' : p[1] == 't' ? '\t' : p[1];
      p += 2;
    }
  }
  *d = 0;
  return s;
}
