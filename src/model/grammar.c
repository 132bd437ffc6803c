/* grammar.c — the GBNF parser (grammar.h): llama.cpp's grammar format,
 * read with its rules (llama-grammar.cpp's parse), every read bounded by
 * the text's NUL.
 *
 *   rule     ::= name ws "::=" ws alts (newline | end)
 *   alts     ::= seq ("|" ws seq)*
 *   seq      ::= (item repeat?)*
 *   item     ::= "literal" | [class] | [^class] | . | name | ( alts )
 *   repeat   ::= * | + | ? | {m} | {m,} | {m,n}
 *
 * Names are letters, digits and '-'. A newline ends a rule except inside
 * a group or right after "|". # starts a comment to the end of the line.
 * Escapes in literals and classes: \n \r \t \\ \" \[ \] \- \xHH \uHHHH
 * \UHHHHHHHH; any other is an error, as in llama.cpp. */
#include "grammar.h"

#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  grammar_elem *e;
  int64_t n, cap;
  int defined;
} rule_buf;

typedef struct {
  const char *text, *p;
  rule_buf *rules;
  char **names;
  int32_t n_rules, cap_rules;
  int32_t *hash;          /* open addressing over names: rule id + 1, 0 empty; 2 * cap_rules slots */
  int64_t n_elems;        /* all rules' elements so far (bounded) */
  rlx_status st;
} parser;

/* ---------------------------------------------------------------- errors */

/* Sets the first error, naming the line and column of p. */
static void fail(parser *ps, const char *p, const char *what) {
  if (ps->st) return;
  int line = 1, col = 1;
  for (const char *c = ps->text; c < p && *c; c++) {
    if (*c == '\n') line++, col = 1;
    else col++;
  }
  ps->st = rlx_set_error(RLX_ERR_FORMAT, "rlx_grammar_new: line %d, column %d: %s", line, col, what);
}

static int push(parser *ps, rule_buf *r, uint32_t type, uint32_t value) {
  if (ps->st) return 0;
  if (++ps->n_elems > GRAMMAR_MAX_ELEMS) {
    fail(ps, ps->p, "the grammar expands to more than 2^20 elements");
    return 0;
  }
  if (r->n == r->cap) {
    int64_t cap = r->cap ? 2 * r->cap : 16;
    grammar_elem *e = realloc(r->e, (size_t)cap * sizeof *e);
    if (!e) {
      ps->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
      return 0;
    }
    r->e = e;
    r->cap = cap;
  }
  r->e[r->n++] = (grammar_elem){type, value};
  return 1;
}

/* ---------------------------------------------------------------- symbols */

static uint32_t name_hash(const char *s, size_t len) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

/* The slot of name in the hash: its entry, or the empty one where it goes. */
static uint32_t slot_of(const parser *ps, const char *name, size_t len) {
  const uint32_t mask = 2 * (uint32_t)ps->cap_rules - 1;
  uint32_t i = name_hash(name, len) & mask;
  for (int32_t id; (id = ps->hash[i] - 1) >= 0; i = (i + 1) & mask)
    if (strlen(ps->names[id]) == len && !memcmp(ps->names[id], name, len)) break;
  return i;
}

/* The id of rule `name` (len bytes), made when new. */
static int32_t symbol(parser *ps, const char *name, size_t len) {
  if (ps->cap_rules && ps->hash[slot_of(ps, name, len)]) return ps->hash[slot_of(ps, name, len)] - 1;
  if (ps->n_rules == GRAMMAR_MAX_RULES) {
    fail(ps, ps->p, "the grammar makes more than 65536 rules");
    return -1;
  }
  if (ps->n_rules == ps->cap_rules) {
    int32_t cap = ps->cap_rules ? 2 * ps->cap_rules : 16;
    rule_buf *r = realloc(ps->rules, (size_t)cap * sizeof *r);
    if (r) ps->rules = r;
    char **nm = realloc(ps->names, (size_t)cap * sizeof *nm);
    if (nm) ps->names = nm;
    int32_t *h = calloc(2 * (size_t)cap, sizeof *h);
    if (!r || !nm || !h) {
      free(h);
      ps->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
      return -1;
    }
    free(ps->hash);
    ps->hash = h;
    ps->cap_rules = cap;
    for (int32_t i = 0; i < ps->n_rules; i++) ps->hash[slot_of(ps, ps->names[i], strlen(ps->names[i]))] = i + 1;
  }
  char *copy = malloc(len + 1);
  if (!copy) {
    ps->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
    return -1;
  }
  memcpy(copy, name, len);
  copy[len] = 0;
  ps->names[ps->n_rules] = copy;
  ps->hash[slot_of(ps, copy, len)] = ps->n_rules + 1;
  ps->rules[ps->n_rules] = (rule_buf){NULL, 0, 0, 0};
  return ps->n_rules++;
}

/* A new rule named after `base` (base_N). */
static int32_t generated(parser *ps, int32_t base) {
  char name[96];
  int len = snprintf(name, sizeof name, "%.60s_%d", base >= 0 ? ps->names[base] : "", (int)ps->n_rules);
  return symbol(ps, name, (size_t)len);
}

/* Takes over buf as rule id's elements. */
static void define(parser *ps, int32_t id, rule_buf *buf, const char *at) {
  if (id < 0 || ps->st) {
    free(buf->e);
    return;
  }
  if (ps->rules[id].defined) {
    free(buf->e);
    char what[160];
    snprintf(what, sizeof what, "rule %.64s is defined twice", ps->names[id]);
    fail(ps, at, what);
    return;
  }
  free(ps->rules[id].e);
  ps->rules[id] = *buf;
  ps->rules[id].defined = 1;
}

/* ---------------------------------------------------------------- lexing */

static int is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* Spaces, tabs, comments, and newlines when newline_ok. */
static void skip_space(parser *ps, int newline_ok) {
  const char *p = ps->p;
  for (;;) {
    if (*p == '#') {
      while (*p && *p != '\n' && *p != '\r') p++;
    } else if (*p == ' ' || *p == '\t' || (newline_ok && (*p == '\n' || *p == '\r'))) {
      p++;
    } else {
      break;
    }
  }
  ps->p = p;
}

static int hex_value(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One UTF-8 code point at p (a bad sequence reads as its first byte). */
static uint32_t utf8_next(const char **p) {
  const unsigned char *s = (const unsigned char *)*p;
  int n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 1;
  uint32_t v = n == 1 ? s[0] : n == 2 ? s[0] & 0x1fu : n == 3 ? s[0] & 0x0fu : s[0] & 0x07u;
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) { /* also stops at the NUL */
      *p += 1;
      return s[0];
    }
    v = v << 6 | (s[i] & 0x3fu);
  }
  *p += n;
  return v;
}

/* One character of a literal or class, escapes decoded; 0 with an error
 * set at the end of the text or on a bad escape. */
static int read_char(parser *ps, uint32_t *out) {
  const char *p = ps->p;
  if (!*p) {
    fail(ps, p, "unexpected end of the grammar");
    return 0;
  }
  if (*p != '\\') {
    *out = utf8_next(&ps->p);
    return 1;
  }
  int digits = 0;
  switch (p[1]) {
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    case 'n': *out = '\n'; break;
    case 'r': *out = '\r'; break;
    case 't': *out = '\t'; break;
    case '\\': case '"': case '[': case ']': case '-': *out = (unsigned char)p[1]; break;
    default:
      fail(ps, p, "unknown escape (\\n \\r \\t \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH)");
      return 0;
  }
  if (!digits) {
    ps->p = p + 2;
    return 1;
  }
  uint32_t v = 0;
  for (int i = 0; i < digits; i++) {
    int h = hex_value(p[2 + i]);
    if (h < 0) {
      fail(ps, p, "the escape needs more hex digits");
      return 0;
    }
    v = v << 4 | (uint32_t)h;
  }
  if (v > 0x10ffff) {
    fail(ps, p, "the escape is past U+10FFFF");
    return 0;
  }
  *out = v;
  ps->p = p + 2 + digits;
  return 1;
}

/* ---------------------------------------------------------------- rules */

static void parse_alternates(parser *ps, int32_t rule, rule_buf *out, int nested, int depth);

/* The bound of a repetition {m,n} (n = -1: none). */
static int read_count(parser *ps, int *out) {
  const char *p = ps->p;
  long v = 0;
  if (*p < '0' || *p > '9') {
    fail(ps, p, "expecting a number in the repetition");
    return 0;
  }
  while (*p >= '0' && *p <= '9' && v <= 1000000) v = v * 10 + (*p++ - '0');
  ps->p = p;
  *out = v > 1000000 ? 1000000 : (int)v;
  return 1;
}

/* out[from..] repeated min..max times (max -1: no maximum), llama.cpp's
 * expansion: min copies, then a chain of optional rules. */
static void repeat(parser *ps, int32_t rule, rule_buf *out, int64_t from, int min, int max) {
  if (max > GRAMMAR_MAX_REPEAT) max = -1;
  if (min > GRAMMAR_MAX_REPEAT) {
    fail(ps, ps->p, "a repetition's minimum is above 2000");
    return;
  }
  if (max >= 0 && max < min) {
    fail(ps, ps->p, "a repetition's maximum is below its minimum");
    return;
  }
  int64_t len = out->n - from;
  grammar_elem *item = malloc((size_t)(len ? len : 1) * sizeof *item);
  if (!item) {
    ps->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
    return;
  }
  memcpy(item, out->e + from, (size_t)len * sizeof *item);
  if (min == 0) out->n = from;
  for (int i = 1; i < min && !ps->st; i++)
    for (int64_t j = 0; j < len; j++) push(ps, out, item[j].type, item[j].value);
  int32_t last = -1;
  int n_opt = max < 0 ? 1 : max - min;
  for (int i = 0; i < n_opt && !ps->st; i++) {
    rule_buf r = {NULL, 0, 0, 0};
    int32_t id = generated(ps, rule);
    for (int64_t j = 0; j < len; j++) push(ps, &r, item[j].type, item[j].value);
    if (i > 0 || max < 0) push(ps, &r, G_REF, (uint32_t)(max < 0 ? id : last));
    push(ps, &r, G_ALT, 0);
    push(ps, &r, G_END, 0);
    define(ps, id, &r, ps->p);
    last = id;
  }
  if (n_opt > 0 && last >= 0) push(ps, out, G_REF, (uint32_t)last);
  free(item);
}

static void parse_sequence(parser *ps, int32_t rule, rule_buf *out, int nested, int depth) {
  int64_t last_start = out->n;
  while (*ps->p && !ps->st) {
    const char *at = ps->p;
    if (*at == '"') {
      ps->p++;
      last_start = out->n;
      while (*ps->p != '"' && !ps->st) {
        uint32_t c;
        if (read_char(ps, &c)) push(ps, out, G_CHAR, c);
      }
      if (ps->st) return;
      ps->p++;
    } else if (*at == '[') {
      ps->p++;
      last_start = out->n;
      uint32_t first = G_CHAR;
      if (*ps->p == '^') ps->p++, first = G_CHAR_NOT;
      int64_t class_start = out->n;
      while (*ps->p != ']' && !ps->st) {
        uint32_t c, hi;
        if (!read_char(ps, &c)) break;
        push(ps, out, out->n == class_start ? first : G_CHAR_ALT, c);
        if (ps->p[0] == '-' && ps->p[1] && ps->p[1] != ']') {
          ps->p++;
          if (read_char(ps, &hi)) {
            if (hi < c) fail(ps, at, "a character range runs backwards");
            push(ps, out, G_CHAR_RNG_UPPER, hi);
          }
        }
      }
      if (ps->st) return;
      if (out->n == class_start) {
        fail(ps, at, "an empty character class");
        return;
      }
      ps->p++;
    } else if (is_word(*at)) {
      const char *e = at;
      while (is_word(*e)) e++;
      last_start = out->n;
      int32_t id = symbol(ps, at, (size_t)(e - at));
      if (id >= 0) push(ps, out, G_REF, (uint32_t)id);
      ps->p = e;
    } else if (*at == '(') {
      if (depth > 256) {
        fail(ps, at, "groups nested deeper than 256");
        return;
      }
      ps->p++;
      skip_space(ps, 1);
      int32_t id = generated(ps, rule);
      rule_buf sub = {NULL, 0, 0, 0};
      parse_alternates(ps, id, &sub, 1, depth + 1);
      define(ps, id, &sub, at);
      if (ps->st) return;
      if (*ps->p != ')') {
        fail(ps, ps->p, "expecting ')'");
        return;
      }
      ps->p++;
      last_start = out->n;
      push(ps, out, G_REF, (uint32_t)id);
    } else if (*at == '.') {
      ps->p++;
      last_start = out->n;
      push(ps, out, G_CHAR_ANY, 0);
    } else if (*at == '*' || *at == '+' || *at == '?' || *at == '{') {
      if (last_start == out->n) {
        fail(ps, at, "a repetition without an item before it");
        return;
      }
      int min = 0, max = -1;
      ps->p++;
      if (*at == '+') min = 1;
      else if (*at == '?') max = 1;
      else if (*at == '{') {
        skip_space(ps, nested);
        if (!read_count(ps, &min)) return;
        skip_space(ps, nested);
        max = min;
        if (*ps->p == ',') {
          ps->p++;
          skip_space(ps, nested);
          max = -1;
          if (*ps->p >= '0' && *ps->p <= '9' && !read_count(ps, &max)) return;
          skip_space(ps, nested);
        }
        if (*ps->p != '}') {
          fail(ps, ps->p, "expecting '}'");
          return;
        }
        ps->p++;
      }
      repeat(ps, rule, out, last_start, min, max);
    } else {
      break;
    }
    skip_space(ps, nested);
  }
}

static void parse_alternates(parser *ps, int32_t rule, rule_buf *out, int nested, int depth) {
  parse_sequence(ps, rule, out, nested, depth);
  while (*ps->p == '|' && !ps->st) {
    push(ps, out, G_ALT, 0);
    ps->p++;
    skip_space(ps, 1);
    parse_sequence(ps, rule, out, nested, depth);
  }
  push(ps, out, G_END, 0);
}

static void parse_rule(parser *ps) {
  const char *at = ps->p, *e = at;
  while (is_word(*e)) e++;
  if (e == at) {
    fail(ps, at, "expecting a rule name");
    return;
  }
  int32_t id = symbol(ps, at, (size_t)(e - at));
  ps->p = e;
  skip_space(ps, 0);
  if (strncmp(ps->p, "::=", 3)) {
    fail(ps, ps->p, "expecting ::=");
    return;
  }
  ps->p += 3;
  skip_space(ps, 1);
  rule_buf body = {NULL, 0, 0, 0};
  parse_alternates(ps, id, &body, 0, 0);
  define(ps, id, &body, at);
  if (ps->st) return;
  if (*ps->p == '\r') ps->p++;
  if (*ps->p == '\n') ps->p++;
  else if (*ps->p) fail(ps, ps->p, "expecting a newline or the end after a rule");
}

/* ---------------------------------------------------------------- checks */

/* Whether each rule can match the empty text: the worklist algorithm,
 * linear in the elements. An alternative waits for its references to be
 * found nullable (one with a character never is). */
static unsigned char *nullable_rules(const grammar_rules *g) {
  const int64_t n = g->n_e;
  int64_t *alt_of = malloc((size_t)n * sizeof *alt_of), *waiting = calloc((size_t)n + 1, sizeof *waiting);
  int32_t *alt_rule = malloc((size_t)n * sizeof *alt_rule), *queue = malloc((size_t)g->n_rules * sizeof *queue);
  int64_t *first = calloc((size_t)g->n_rules + 1, sizeof *first), *refs = malloc((size_t)n * sizeof *refs);
  unsigned char *nul = calloc((size_t)g->n_rules, 1);
  if (!alt_of || !waiting || !alt_rule || !queue || !first || !refs || !nul) {
    free(nul);
    nul = NULL;
    goto done;
  }
  /* alternatives numbered in order; waiting[a] = its references, -1 with a character */
  int64_t n_alt = 0, qn = 0;
  for (int32_t r = 0; r < g->n_rules; r++) {
    int64_t i = g->rule_start[r];
    for (;; i++) {
      alt_rule[n_alt] = r;
      for (; g->e[i].type != G_ALT && g->e[i].type != G_END; i++) {
        alt_of[i] = n_alt;
        if (g->e[i].type == G_REF) {
          if (waiting[n_alt] >= 0) waiting[n_alt]++;
          first[g->e[i].value + 1]++;
        } else if (g->e[i].type != G_CHAR_RNG_UPPER && g->e[i].type != G_CHAR_ALT) {
          waiting[n_alt] = -1;
        }
      }
      if (waiting[n_alt] == 0 && !nul[r]) nul[r] = 1, queue[qn++] = r;
      n_alt++;
      if (g->e[i].type == G_END) break;
    }
  }
  /* refs: the elements referring to each rule, grouped by rule */
  for (int32_t r = 0; r < g->n_rules; r++) first[r + 1] += first[r];
  for (int64_t i = 0; i < n; i++)
    if (g->e[i].type == G_REF) refs[first[g->e[i].value]++] = i;
  for (int32_t r = g->n_rules; r > 0; r--) first[r] = first[r - 1];
  first[0] = 0;
  for (int64_t q = 0; q < qn; q++) {
    int32_t r = queue[q];
    for (int64_t k = first[r]; k < first[r + 1]; k++) {
      int64_t a = alt_of[refs[k]];
      if (waiting[a] > 0 && --waiting[a] == 0 && !nul[alt_rule[a]]) nul[alt_rule[a]] = 1, queue[qn++] = alt_rule[a];
    }
  }
done:
  free(alt_of);
  free(waiting);
  free(alt_rule);
  free(queue);
  free(first);
  free(refs);
  return nul;
}

/* Left recursion: a rule that reaches itself before any character. Depth
 * first (an explicit stack: rules nest 65536 deep) over the edges r -> s
 * for each s that can come first in r. Returns the rule found, or -1. */
static int32_t left_recursion(const grammar_rules *g, const unsigned char *nul, unsigned char *state, int64_t *at,
                              int32_t *stack) {
  for (int32_t root = 0; root < g->n_rules; root++) {
    if (state[root]) continue;
    int32_t depth = 0;
    stack[depth++] = root;
    state[root] = 1;
    at[root] = g->rule_start[root];
    while (depth) {
      int32_t r = stack[depth - 1];
      int64_t i = at[r];
      int32_t next = -1;
      /* the next reference that can come first, from element i on (i is
       * always at a point its alternative is still open, or at G_ALT/G_END) */
      while (next < 0 && g->e[i].type != G_END) {
        if (g->e[i].type == G_ALT) {
          i++;
          continue;
        }
        int closes = 1;
        if (g->e[i].type == G_REF) {
          next = (int32_t)g->e[i].value;
          closes = !nul[next];
          i++;
        }
        if (closes) /* a character or a non-nullable rule: nothing after it comes first */
          while (g->e[i].type != G_ALT && g->e[i].type != G_END) i++;
      }
      at[r] = i;
      if (next < 0) {
        state[r] = 2;
        depth--;
      } else if (state[next] == 1) {
        return next;
      } else if (!state[next]) {
        state[next] = 1;
        at[next] = g->rule_start[next];
        stack[depth++] = next;
      }
    }
  }
  return -1;
}

static rlx_status check_rules(parser *ps, const grammar_rules *g) {
  unsigned char *nul = nullable_rules(g), *state = calloc((size_t)g->n_rules, 1);
  int64_t *at = malloc((size_t)g->n_rules * sizeof *at);
  int32_t *stack = malloc((size_t)g->n_rules * sizeof *stack);
  rlx_status st = nul && state && at && stack ? RLX_OK : rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
  int32_t r = st ? -1 : left_recursion(g, nul, state, at, stack);
  if (r >= 0)
    st = rlx_set_error(RLX_ERR_FORMAT, "rlx_grammar_new: rule %s is left recursive (it can reach itself before "
                       "any character)", ps->names[r]);
  free(nul);
  free(state);
  free(at);
  free(stack);
  return st;
}

/* ---------------------------------------------------------------- entry */

static void free_parser(parser *ps) {
  for (int32_t i = 0; i < ps->n_rules; i++) {
    free(ps->rules[i].e);
    free(ps->names[i]);
  }
  free(ps->rules);
  free(ps->names);
  free(ps->hash);
}

rlx_status grammar_parse(const char *text, const char *root, grammar_rules *out) {
  memset(out, 0, sizeof *out);
  if (!text) return rlx_set_error(RLX_ERR_INVALID, "rlx_grammar_new: the grammar is NULL");
  parser ps = {text, text, NULL, NULL, 0, 0, NULL, 0, RLX_OK};
  skip_space(&ps, 1);
  while (*ps.p && !ps.st) {
    parse_rule(&ps);
    skip_space(&ps, 1);
  }
  for (int32_t i = 0; i < ps.n_rules && !ps.st; i++)
    if (!ps.rules[i].defined)
      ps.st = rlx_set_error(RLX_ERR_FORMAT, "rlx_grammar_new: rule %s is used but not defined", ps.names[i]);
  const char *want = root ? root : "root";
  int32_t r = -1;
  for (int32_t i = 0; i < ps.n_rules && !ps.st && r < 0; i++)
    if (!strcmp(ps.names[i], want)) r = i;
  if (!ps.st && r < 0) ps.st = rlx_set_error(RLX_ERR_FORMAT, "rlx_grammar_new: the grammar has no rule %s", want);
  if (!ps.st) {
    out->rule_start = malloc((size_t)ps.n_rules * sizeof *out->rule_start);
    out->e = malloc((size_t)(ps.n_elems ? ps.n_elems : 1) * sizeof *out->e);
    if (!out->rule_start || !out->e) ps.st = rlx_set_error(RLX_ERR_NOMEM, "rlx_grammar_new: out of memory");
  }
  if (!ps.st) {
    for (int32_t i = 0; i < ps.n_rules; i++) {
      out->rule_start[i] = out->n_e;
      memcpy(out->e + out->n_e, ps.rules[i].e, (size_t)ps.rules[i].n * sizeof *out->e);
      out->n_e += ps.rules[i].n;
    }
    out->n_rules = ps.n_rules;
    out->root = r;
    ps.st = check_rules(&ps, out);
  }
  free_parser(&ps);
  if (ps.st) grammar_rules_free(out);
  return ps.st;
}

void grammar_rules_free(grammar_rules *r) {
  free(r->e);
  free(r->rule_start);
  memset(r, 0, sizeof *r);
}
