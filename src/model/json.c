/* json.c — the JSON reader of json.h: one iterative pass over the text
 * (an explicit stack of open containers, so hostile nesting cannot
 * overflow the C stack), every read checked against the end. */
#include "json.h"

#include "../ir/ir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *s;
  size_t n, pos;
  const char *what;
  json_doc *d;
  uint32_t cap;
} parser;

static rlx_status fail(const parser *p, const char *msg) {
  return rlx_set_error(RLX_ERR_FORMAT, "%s: invalid JSON at byte %zu: %s", p->what, p->pos, msg);
}

static void skip_ws(parser *p) {
  while (p->pos < p->n) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static int64_t push(parser *p, json_type t) {
  json_doc *d = p->d;
  if (d->n == p->cap) {
    uint32_t cap = p->cap ? p->cap * 2 : 256;
    json_tok *nt = realloc(d->tok, (size_t)cap * sizeof *nt);
    if (!nt) return -1;
    d->tok = nt;
    p->cap = cap;
  }
  json_tok *k = &d->tok[d->n];
  k->type = t;
  k->start = (uint32_t)p->pos;
  k->len = k->size = 0;
  k->next = 0;
  return d->n++;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid
 * (overlong, surrogate, past U+10FFFF or truncated). */
static int utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  int len;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
  else return 0;
  if ((size_t)len > n) return 0;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return len;
}

/* The string whose opening quote is at p->pos. */
static rlx_status parse_string(parser *p, int64_t t) {
  p->pos++;
  size_t start = p->pos;
  while (p->pos < p->n) {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '"') {
      p->d->tok[t].start = (uint32_t)start;
      p->d->tok[t].len = (uint32_t)(p->pos - start);
      p->pos++;
      return RLX_OK;
    }
    if (c < 0x20) return fail(p, "control character in a string");
    if (c == '\\') {
      if (p->pos + 1 >= p->n) break;
      char e = p->s[p->pos + 1];
      if (e == 'u') {
        if (p->pos + 6 > p->n) break;
        for (int i = 2; i < 6; i++)
          if (hexval(p->s[p->pos + i]) < 0) return fail(p, "bad \\u escape");
        p->pos += 6;
      } else if (strchr("\"\\/bfnrt", e) && e) {
        p->pos += 2;
      } else {
        return fail(p, "bad escape");
      }
      continue;
    }
    int l = utf8_len((const unsigned char *)p->s + p->pos, p->n - p->pos);
    if (!l) return fail(p, "invalid UTF-8");
    p->pos += (size_t)l;
  }
  return fail(p, "unterminated string");
}

static rlx_status parse_number(parser *p) {
  size_t i = p->pos;
  const char *s = p->s;
  if (i < p->n && s[i] == '-') i++;
  if (i >= p->n) return fail(p, "bad number");
  if (s[i] == '0') i++;
  else if (s[i] >= '1' && s[i] <= '9')
    while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
  else
    return fail(p, "bad number");
  if (i < p->n && s[i] == '.') {
    i++;
    if (i >= p->n || s[i] < '0' || s[i] > '9') return fail(p, "bad fraction");
    while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
  }
  if (i < p->n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < p->n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= p->n || s[i] < '0' || s[i] > '9') return fail(p, "bad exponent");
    while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
  }
  p->pos = i;
  return RLX_OK;
}

static rlx_status parse_literal(parser *p, const char *word) {
  size_t l = strlen(word);
  if (p->n - p->pos < l || memcmp(p->s + p->pos, word, l)) return fail(p, "unexpected character");
  p->pos += l;
  return RLX_OK;
}

rlx_status json_parse(const char *text, size_t len, const char *what, json_doc *out) {
  memset(out, 0, sizeof *out);
  parser p = {.s = text, .n = len, .what = what ? what : "JSON", .d = out};
  if (len >= (size_t)1 << 31) return rlx_set_error(RLX_ERR_FORMAT, "%s: JSON text of %zu bytes is too large", p.what, len);
  out->text = text;
  out->len = len;
  int64_t stack[JSON_MAX_DEPTH];
  int depth = 0;
  rlx_status st = RLX_OK;
  /* Each turn reads one value (or closes an empty container); a key is due
   * where the open object has an even number of children so far. */
  for (;;) {
    skip_ws(&p);
    if (p.pos >= p.n) {
      st = fail(&p, "unexpected end");
      break;
    }
    int64_t parent = depth ? stack[depth - 1] : -1;
    int in_obj = parent >= 0 && out->tok[parent].type == JSON_OBJECT;
    char c = p.s[p.pos];
    if ((c == '}' || c == ']') && parent >= 0 && out->n == (uint32_t)parent + 1) {
      if ((c == '}') != in_obj) {
        st = fail(&p, "mismatched bracket");
        break;
      }
      p.pos++;
      goto close;
    }
    {
      json_type t;
      switch (c) {
        case '{': t = JSON_OBJECT; break;
        case '[': t = JSON_ARRAY; break;
        case '"': t = JSON_STRING; break;
        case 't': t = JSON_TRUE; break;
        case 'f': t = JSON_FALSE; break;
        case 'n': t = JSON_NULL; break;
        default:
          if (c == '-' || (c >= '0' && c <= '9')) {
            t = JSON_NUMBER;
            break;
          }
          st = fail(&p, "unexpected character");
          goto done;
      }
      int is_key = in_obj && (out->tok[parent].size & 1) == 0;
      if (is_key && t != JSON_STRING) {
        st = fail(&p, "object key is not a string");
        break;
      }
      int64_t k = push(&p, t);
      if (k < 0) {
        st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory parsing JSON", p.what);
        break;
      }
      if (parent >= 0) out->tok[parent].size++;
      if (t == JSON_OBJECT || t == JSON_ARRAY) {
        if (depth == JSON_MAX_DEPTH) {
          st = fail(&p, "nested too deeply");
          break;
        }
        stack[depth++] = k;
        p.pos++;
        continue;
      }
      st = t == JSON_STRING   ? parse_string(&p, k)
           : t == JSON_NUMBER ? parse_number(&p)
           : parse_literal(&p, t == JSON_TRUE ? "true" : t == JSON_FALSE ? "false" : "null");
      if (st) break;
      if (t != JSON_STRING) out->tok[k].len = (uint32_t)(p.pos - out->tok[k].start);
      out->tok[k].next = out->n;
      if (is_key) {
        skip_ws(&p);
        if (p.pos >= p.n || p.s[p.pos] != ':') {
          st = fail(&p, "expected ':'");
          break;
        }
        p.pos++;
        continue;
      }
    }
    /* after a value: ',' or the container's end */
    for (;;) {
      if (!depth) goto done;
      skip_ws(&p);
      if (p.pos >= p.n) {
        st = fail(&p, "unexpected end");
        goto done;
      }
      parent = stack[depth - 1];
      in_obj = out->tok[parent].type == JSON_OBJECT;
      c = p.s[p.pos];
      if (c == ',') {
        p.pos++;
        break;
      }
      if (c != (in_obj ? '}' : ']')) {
        st = fail(&p, in_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        goto done;
      }
      p.pos++;
    close:
      parent = stack[--depth];
      out->tok[parent].len = (uint32_t)(p.pos - out->tok[parent].start);
      out->tok[parent].next = out->n;
      if (out->tok[parent].type == JSON_OBJECT) out->tok[parent].size /= 2;
    }
  }
done:
  if (!st) {
    skip_ws(&p);
    if (p.pos != p.n) st = fail(&p, "trailing bytes after the value");
  }
  if (st) json_free(out);
  return st;
}

void json_free(json_doc *d) {
  free(d->tok);
  memset(d, 0, sizeof *d);
}

int64_t json_first(const json_doc *d, int64_t i) {
  if (i < 0 || (uint32_t)i >= d->n) return -1;
  const json_tok *t = &d->tok[i];
  if ((t->type != JSON_ARRAY && t->type != JSON_OBJECT) || t->size == 0) return -1;
  return i + 1;
}

int64_t json_get(const json_doc *d, int64_t obj, const char *key) {
  if (json_kind(d, obj) != JSON_OBJECT) return -1;
  int64_t found = -1, k = json_first(d, obj);
  for (uint32_t i = 0; i < d->tok[obj].size; i++) {
    int64_t v = json_next(d, k);
    if (json_str_eq(d, k, key)) found = v;
    k = json_next(d, v);
  }
  return found;
}

static void put_utf8(char *o, int64_t *n, uint32_t cp) {
  if (cp < 0x80) {
    o[(*n)++] = (char)cp;
  } else if (cp < 0x800) {
    o[(*n)++] = (char)(0xC0 | cp >> 6);
    o[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    o[(*n)++] = (char)(0xE0 | cp >> 12);
    o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else {
    o[(*n)++] = (char)(0xF0 | cp >> 18);
    o[(*n)++] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[(*n)++] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[(*n)++] = (char)(0x80 | (cp & 0x3F));
  }
}

static uint32_t hex4(const char *s) {
  return (uint32_t)(hexval(s[0]) << 12 | hexval(s[1]) << 8 | hexval(s[2]) << 4 | hexval(s[3]));
}

/* The parser checked every escape, so each \u has four hex digits. A lone
 * surrogate decodes to U+FFFD (3 bytes, never more than its 6). */
int64_t json_str(const json_doc *d, int64_t i, char *out) {
  if (json_kind(d, i) != JSON_STRING) return -1;
  const char *s = d->text + d->tok[i].start;
  size_t len = d->tok[i].len, j = 0;
  int64_t n = 0;
  while (j < len) {
    if (s[j] != '\\') {
      out[n++] = s[j++];
      continue;
    }
    char e = s[j + 1];
    j += 2;
    switch (e) {
      case 'b': out[n++] = '\b'; break;
      case 'f': out[n++] = '\f'; break;
      case 'n': out[n++] = '\n'; break;
      case 'r': out[n++] = '\r'; break;
      case 't': out[n++] = '\t'; break;
      case 'u': {
        uint32_t cp = hex4(s + j);
        j += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && j + 6 <= len && s[j] == '\\' && s[j + 1] == 'u') {
          uint32_t lo = hex4(s + j + 2);
          if (lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            j += 6;
          }
        }
        if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
        put_utf8(out, &n, cp);
        break;
      }
      default: out[n++] = e; break;
    }
  }
  return n;
}

char *json_strdup(const json_doc *d, int64_t i, size_t *len) {
  if (json_kind(d, i) != JSON_STRING) return NULL;
  char *s = malloc((size_t)d->tok[i].len + 1);
  if (!s) return NULL;
  int64_t n = json_str(d, i, s);
  s[n] = 0;
  if (len) *len = (size_t)n;
  return s;
}

int json_str_eq(const json_doc *d, int64_t i, const char *s) {
  if (json_kind(d, i) != JSON_STRING) return 0;
  const json_tok *t = &d->tok[i];
  size_t sl = strlen(s);
  if (!memchr(d->text + t->start, '\\', t->len)) return t->len == sl && !memcmp(d->text + t->start, s, sl);
  if (sl > t->len) return 0;
  char buf[256], *b = t->len <= sizeof buf ? buf : malloc(t->len);
  if (!b) return 0;
  int64_t n = json_str(d, i, b);
  int eq = (size_t)n == sl && !memcmp(b, s, sl);
  if (b != buf) free(b);
  return eq;
}

int json_num(const json_doc *d, int64_t i, double *out) {
  if (json_kind(d, i) != JSON_NUMBER) return 0;
  const json_tok *t = &d->tok[i];
  char buf[64], *b = t->len < sizeof buf ? buf : malloc((size_t)t->len + 1);
  if (!b) return 0;
  memcpy(b, d->text + t->start, t->len);
  b[t->len] = 0;
  *out = strtod(b, NULL);
  if (b != buf) free(b);
  return 1;
}

int json_int(const json_doc *d, int64_t i, int64_t lo, int64_t hi, int64_t *out) {
  double v;
  if (!json_num(d, i, &v) || v != v || v < (double)lo || v > (double)hi || v != (double)(int64_t)v) return 0;
  *out = (int64_t)v;
  return 1;
}

int json_bool(const json_doc *d, int64_t i, int *out) {
  json_type t = json_kind(d, i);
  if (i < 0 || (t != JSON_TRUE && t != JSON_FALSE)) return 0;
  *out = t == JSON_TRUE;
  return 1;
}

rlx_status json_read_file(const char *path, char **text, size_t *len) {
  *text = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return rlx_set_error(RLX_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (cap - n < 65536) {
      if (cap >= (size_t)1 << 31) {
        free(buf);
        fclose(f);
        return rlx_set_error(RLX_ERR_FORMAT, "%s: larger than 2 GiB", path);
      }
      cap = cap ? cap * 2 : 65536;
      char *nb = realloc(buf, cap + 1);
      if (!nb) {
        free(buf);
        fclose(f);
        return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", path);
      }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    return rlx_set_error(RLX_ERR_IO, "%s: read error", path);
  }
  buf[n] = 0;
  *text = buf;
  *len = n;
  return RLX_OK;
}
