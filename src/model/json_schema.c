/* json_schema.c — a JSON schema as a GBNF grammar of the JSON texts that
 * validate against it (rlx.h rlx_json_schema_to_gbnf), in the shape of
 * llama.cpp's json-schema-to-grammar: a rule per (sub)schema over shared
 * primitive rules, whitespace after every token.
 *
 * Read: type (a name or a list), properties (in their order; required
 * ones always, the others optionally, nothing else), additionalProperties
 * (a schema for the values of an object without properties), items,
 * prefixItems, minItems, maxItems, minLength, maxLength, enum and const
 * (scalars), anyOf, oneOf (as anyOf: a model's text rarely matches two),
 * $ref to #/$defs/NAME or #/definitions/NAME (recursion allowed), and
 * true. Annotations (title, description, default, examples, format, ...)
 * are ignored. A keyword that constrains in a way GBNF cannot say
 * cheaply (pattern, minimum, multipleOf, allOf, not, ...) is
 * RLX_ERR_UNSUPPORTED naming it: a grammar that ignored it would let
 * through text the schema refuses. */
#include "json.h"

#include "ir/ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RULES 4096  /* rules one schema may make */

/* The primitives, as llama.cpp writes them. */
static const char PRIMITIVES[] =
    "space ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
    "boolean ::= (\"true\" | \"false\") space\n"
    "null ::= \"null\" space\n"
    "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
    "decimal-part ::= [0-9]{1,16}\n"
    "number ::= \"-\"? integral-part (\".\" decimal-part)? ([eE] [-+]? integral-part)? space\n"
    "integer ::= \"-\"? integral-part space\n"
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "string ::= \"\\\"\" char* \"\\\"\" space\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space\n"
    "array ::= \"[\" space ( value (\",\" space value)* )? \"]\" space\n";

typedef struct {
  char *buf;
  size_t len, cap;
  const json_doc *d;
  int64_t root;             /* the schema's token */
  int n_rules;
  struct { int64_t def; int rule; } refs[64];  /* $defs given a rule */
  int n_refs;
  rlx_status st;
} gen;

static void emit(gen *g, const char *fmt, ...) {
  if (g->st) return;
  if (!g->buf && !(g->buf = malloc(g->cap = 4096))) {
    g->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_json_schema_to_gbnf: out of memory");
    return;
  }
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(g->buf + g->len, g->cap - g->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      g->st = rlx_set_error(RLX_ERR_INTERNAL, "rlx_json_schema_to_gbnf: formatting failed");
      return;
    }
    if ((size_t)n < g->cap - g->len) {
      g->len += (size_t)n;
      return;
    }
    size_t cap = 2 * g->cap + (size_t)n;
    char *b = realloc(g->buf, cap);
    if (!b) {
      g->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_json_schema_to_gbnf: out of memory");
      return;
    }
    g->buf = b;
    g->cap = cap;
  }
}

static rlx_status unsupported(gen *g, const char *what) {
  if (!g->st)
    g->st = rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_json_schema_to_gbnf: %s is not supported (the grammar could "
                          "not hold to it)", what);
  return g->st;
}

/* A new rule number. */
static int new_rule(gen *g) {
  if (g->n_rules >= MAX_RULES) {
    unsupported(g, "a schema of more than 4096 subschemas");
    return -1;
  }
  return g->n_rules++;
}

/* The JSON text of scalar token t as a GBNF literal (the schema's own
 * spelling of it: the output is that text). */
static void emit_literal(gen *g, int64_t t) {
  const json_tok *k = &g->d->tok[t];
  if (k->type == JSON_ARRAY || k->type == JSON_OBJECT) {
    unsupported(g, "an enum or const of an array or object");
    return;
  }
  const char *s = g->d->text + k->start;
  emit(g, "\"");
  if (k->type == JSON_STRING) emit(g, "\\\"");
  for (uint32_t i = 0; i < k->len; i++) {
    if (s[i] == '"' || s[i] == '\\') emit(g, "\\%c", s[i]);
    else emit(g, "%c", s[i]);
  }
  if (k->type == JSON_STRING) emit(g, "\\\"");
  emit(g, "\" space");
}

static int schema_rule(gen *g, int64_t t, int depth);

/* Child i of container c (an object's: key i, its value follows): the
 * tokens run on past the container, so loops count its size. */
static int64_t child(const json_doc *d, int64_t c, uint32_t i, int pairs) {
  int64_t k = json_first(d, c);
  for (uint32_t j = 0; j < i * (pairs ? 2 : 1); j++) k = json_next(d, k);
  return k;
}

/* The rule (its name in out) of schema token t: a primitive's name, or sN. */
static void rule_name(gen *g, int64_t t, int depth, char *out, size_t cap) {
  int r = schema_rule(g, t, depth);
  snprintf(out, cap, "s%d", r < 0 ? 0 : r);
}

/* "$ref": "#/$defs/NAME" (or #/definitions/NAME): that schema's rule. */
static int ref_rule(gen *g, int64_t ref, int depth) {
  char *path = json_strdup(g->d, ref, NULL);
  if (!path) return unsupported(g, "a $ref that is not a string"), -1;
  const char *name = !strncmp(path, "#/$defs/", 8) ? path + 8 : !strncmp(path, "#/definitions/", 14) ? path + 14 : NULL;
  int64_t defs = name ? json_get(g->d, g->root, path[2] == '$' ? "$defs" : "definitions") : -1;
  int64_t def = defs >= 0 ? json_get(g->d, defs, name) : -1;
  free(path);
  if (def < 0) return unsupported(g, "a $ref other than to #/$defs/NAME or #/definitions/NAME of the schema"), -1;
  for (int i = 0; i < g->n_refs; i++)
    if (g->refs[i].def == def) return g->refs[i].rule;
  if (g->n_refs == 64) return unsupported(g, "a schema of more than 64 $defs"), -1;
  /* the def's rule is named before it is made: it may refer to itself */
  int r = new_rule(g), inner;
  if (r < 0) return -1;
  g->refs[g->n_refs].def = def;
  g->refs[g->n_refs++].rule = r;
  inner = schema_rule(g, def, depth + 1);
  emit(g, "s%d ::= s%d\n", r, inner);
  return r;
}

/* {min, max} of an integer keyword (max: -1 when absent). */
static int count_kw(gen *g, int64_t t, const char *key, int64_t dflt, int64_t *out) {
  int64_t v = json_get(g->d, t, key);
  *out = dflt;
  if (v < 0) return 1;
  if (!json_int(g->d, v, 0, 2000, out)) {
    char what[64];
    snprintf(what, sizeof what, "%s other than an integer in [0, 2000]", key);
    unsupported(g, what);
    return 0;
  }
  return 1;
}

/* item repeated min..max times (max -1: no bound), separated by sep. */
static void emit_repeat(gen *g, const char *item, const char *sep, int64_t min, int64_t max) {
  if (max == 0) return;
  if (min == 0) emit(g, "( ");
  emit(g, "%s ( %s %s )", item, sep, item);
  if (max < 0) emit(g, "{%lld,}", (long long)(min > 1 ? min - 1 : 0));
  else emit(g, "{%lld,%lld}", (long long)(min > 1 ? min - 1 : 0), (long long)(max - 1));
  if (min == 0) emit(g, " )?");
}

static void object_body(gen *g, int64_t t, int64_t props, int depth, int r) {
  const json_doc *d = g->d;
  int64_t req = json_get(d, t, "required");
  if (req >= 0 && json_kind(d, req) != JSON_ARRAY) {
    unsupported(g, "required other than a list");
    return;
  }
  /* kv rules: one per property, in order; need[] says which are required */
  int64_t n = d->tok[props].size, k = 0;
  int *kv = malloc((size_t)(n ? n : 1) * sizeof *kv);
  char *need = calloc((size_t)(n ? n : 1), 1);
  if (!kv || !need) {
    free(kv);
    free(need);
    g->st = rlx_set_error(RLX_ERR_NOMEM, "rlx_json_schema_to_gbnf: out of memory");
    return;
  }
  for (int64_t key = json_first(d, props); k < n && !g->st; key = json_next(d, json_next(d, key)), k++) {
    for (uint32_t j = 0, nr = req >= 0 ? d->tok[req].size : 0; j < nr; j++)
      if (json_kind(d, child(d, req, j, 0)) == JSON_STRING) {
        int64_t q = child(d, req, j, 0);
        char *name = json_strdup(d, key, NULL);
        need[k] |= name && json_str_eq(d, q, name);
        free(name);
      }
    char value[32];
    rule_name(g, json_next(d, key), depth + 1, value, sizeof value);
    kv[k] = new_rule(g);
    emit(g, "s%d ::= ", kv[k]);
    emit_literal(g, key);
    emit(g, " \":\" space %s\n", value);
  }
  /* required ones in order with the optional ones between them: an
   * optional property is written where it is declared; the first written
   * one has no comma. Alternatives on which property comes first. */
  emit(g, "s%d ::= \"{\" space (", r);
  int64_t first_req = -1;
  for (int64_t i = 0; i < n && first_req < 0; i++)
    if (need[i]) first_req = i;
  int64_t last_start = first_req >= 0 ? first_req : n - 1;
  for (int64_t start = 0; start <= last_start && !g->st; start++) {
    if (start) emit(g, " |");
    emit(g, " s%d", kv[start]);
    for (int64_t i = start + 1; i < n; i++) emit(g, need[i] ? " \",\" space s%d" : " ( \",\" space s%d )?", kv[i]);
  }
  emit(g, " )%s \"}\" space\n", first_req >= 0 ? "" : "?");
  free(kv);
  free(need);
}

/* Keywords read, and those only describing. */
static const char *const KNOWN[] = {"type", "properties", "required", "additionalProperties", "items", "prefixItems",
                                    "minItems", "maxItems", "minLength", "maxLength", "enum", "const", "anyOf",
                                    "oneOf", "$ref", "$defs", "definitions", "$schema", "$id", "title",
                                    "description", "default", "examples", "format", "$comment", "deprecated",
                                    "readOnly", "writeOnly", "strict", "name", NULL};

static int typed_rule(gen *g, int64_t t, const char *type, int depth);

static int schema_rule(gen *g, int64_t t, int depth) {
  const json_doc *d = g->d;
  if (g->st) return -1;
  if (depth > 64) return unsupported(g, "a schema nested deeper than 64"), -1;
  if (json_kind(d, t) == JSON_TRUE) {
    int r = new_rule(g);
    emit(g, "s%d ::= value\n", r);
    return r;
  }
  if (json_kind(d, t) != JSON_OBJECT) return unsupported(g, "a schema other than an object or true"), -1;
  for (uint32_t i = 0; i < d->tok[t].size; i++) {
    const int64_t key = child(d, t, i, 1);
    int known = 0;
    for (int i = 0; KNOWN[i] && !known; i++) known = json_str_eq(d, key, KNOWN[i]);
    if (!known) {
      char what[96], name[48] = "";
      int64_t len = d->tok[key].len < sizeof name - 1 ? d->tok[key].len : 0;
      if (len) json_str(d, key, name), name[len] = 0;
      snprintf(what, sizeof what, "the keyword \"%s\"", len ? name : "(long)");
      return unsupported(g, what), -1;
    }
  }
  int64_t v;
  if ((v = json_get(d, t, "$ref")) >= 0) return ref_rule(g, v, depth);
  if ((v = json_get(d, t, "const")) >= 0 || (v = json_get(d, t, "enum")) >= 0) {
    int is_enum = json_get(d, t, "const") < 0;
    if (is_enum && (json_kind(d, v) != JSON_ARRAY || !d->tok[v].size)) return unsupported(g, "an empty enum"), -1;
    int r = new_rule(g);
    emit(g, "s%d ::= ", r);
    if (!is_enum) emit_literal(g, v);
    for (uint32_t i = 0; is_enum && i < d->tok[v].size; i++) {
      if (i) emit(g, " | ");
      emit_literal(g, child(d, v, i, 0));
    }
    emit(g, "\n");
    return r;
  }
  if ((v = json_get(d, t, "anyOf")) >= 0 || (v = json_get(d, t, "oneOf")) >= 0) {
    if (json_kind(d, v) != JSON_ARRAY || !d->tok[v].size || d->tok[v].size > 64)
      return unsupported(g, "an anyOf or oneOf of none or more than 64 schemas"), -1;
    char names[64][32];
    int n = 0;
    for (uint32_t i = 0; i < d->tok[v].size; i++) rule_name(g, child(d, v, i, 0), depth + 1, names[n++], 32);
    int r = new_rule(g);
    emit(g, "s%d ::=", r);
    for (int i = 0; i < n; i++) emit(g, "%s %s", i ? " |" : "", names[i]);
    emit(g, "\n");
    return r;
  }
  int64_t type = json_get(d, t, "type");
  if (type < 0) {
    const char *implied = json_get(d, t, "properties") >= 0 || json_get(d, t, "additionalProperties") >= 0 ? "object"
                          : json_get(d, t, "items") >= 0 || json_get(d, t, "prefixItems") >= 0     ? "array"
                                                                                                    : "any";
    return typed_rule(g, t, implied, depth);
  }
  if (json_kind(d, type) == JSON_STRING) {
    char name[16] = "";
    if (d->tok[type].len >= sizeof name) return unsupported(g, "an unknown type"), -1;
    json_str(d, type, name);
    name[d->tok[type].len] = 0;
    return typed_rule(g, t, name, depth);
  }
  if (json_kind(d, type) != JSON_ARRAY || !d->tok[type].size || d->tok[type].size > 8)
    return unsupported(g, "a type other than a name or a list of up to 8"), -1;
  int alts[8], n = 0;
  for (uint32_t i = 0; i < d->tok[type].size && !g->st; i++) {
    const int64_t e = child(d, type, i, 0);
    char name[16] = "";
    if (json_kind(d, e) != JSON_STRING || d->tok[e].len >= sizeof name) return unsupported(g, "an unknown type"), -1;
    json_str(d, e, name);
    name[d->tok[e].len] = 0;
    alts[n++] = typed_rule(g, t, name, depth);
  }
  int r = new_rule(g);
  emit(g, "s%d ::=", r);
  for (int i = 0; i < n; i++) emit(g, "%s s%d", i ? " |" : "", alts[i]);
  emit(g, "\n");
  return r;
}

/* The rule of schema t read as type `type` (or "any"). */
static int typed_rule(gen *g, int64_t t, const char *type, int depth) {
  const json_doc *d = g->d;
  int r = new_rule(g);
  if (r < 0) return -1;
  if (!strcmp(type, "boolean") || !strcmp(type, "null") || !strcmp(type, "number") || !strcmp(type, "integer") ||
      !strcmp(type, "any")) {
    emit(g, "s%d ::= %s\n", r, strcmp(type, "any") ? type : "value");
  } else if (!strcmp(type, "string")) {
    int64_t min, max;
    if (!count_kw(g, t, "minLength", 0, &min) || !count_kw(g, t, "maxLength", -1, &max)) return -1;
    if (max >= 0 && max < min) return unsupported(g, "maxLength below minLength"), -1;
    if (max < 0) emit(g, "s%d ::= \"\\\"\" char{%lld,} \"\\\"\" space\n", r, (long long)min);
    else emit(g, "s%d ::= \"\\\"\" char{%lld,%lld} \"\\\"\" space\n", r, (long long)min, (long long)max);
  } else if (!strcmp(type, "array")) {
    int64_t min, max, items = json_get(d, t, "items"), prefix = json_get(d, t, "prefixItems");
    if (!count_kw(g, t, "minItems", 0, &min) || !count_kw(g, t, "maxItems", -1, &max)) return -1;
    if (max >= 0 && max < min) return unsupported(g, "maxItems below minItems"), -1;
    if (prefix >= 0) {
      if (json_kind(d, prefix) != JSON_ARRAY || !d->tok[prefix].size || d->tok[prefix].size > 64 || items >= 0 ||
          min || max >= 0)
        return unsupported(g, "prefixItems other than a plain tuple"), -1;
      char names[64][32];
      int n = 0;
      for (uint32_t i = 0; i < d->tok[prefix].size; i++) rule_name(g, child(d, prefix, i, 0), depth + 1, names[n++], 32);
      emit(g, "s%d ::= \"[\" space", r);
      for (int i = 0; i < n; i++) emit(g, "%s %s", i ? " \",\" space" : "", names[i]);
      emit(g, " \"]\" space\n");
    } else {
      char item[32] = "value";
      if (items >= 0) rule_name(g, items, depth + 1, item, sizeof item);
      emit(g, "s%d ::= \"[\" space ", r);
      emit_repeat(g, item, "\",\" space", min, max);
      emit(g, " \"]\" space\n");
    }
  } else if (!strcmp(type, "object")) {
    int64_t props = json_get(d, t, "properties"), extra = json_get(d, t, "additionalProperties");
    if (props >= 0 && json_kind(d, props) != JSON_OBJECT) return unsupported(g, "properties other than an object"), -1;
    if (props >= 0 && d->tok[props].size) {
      if (extra >= 0 && json_kind(d, extra) != JSON_FALSE && json_kind(d, extra) != JSON_TRUE)
        return unsupported(g, "additionalProperties of a schema beside properties"), -1;
      object_body(g, t, props, depth, r);
    } else if (extra >= 0 && json_kind(d, extra) == JSON_FALSE) {
      emit(g, "s%d ::= \"{\" space \"}\" space\n", r);
    } else {
      char value[32] = "value";
      if (extra >= 0 && json_kind(d, extra) != JSON_TRUE) rule_name(g, extra, depth + 1, value, sizeof value);
      emit(g, "s%d ::= \"{\" space ( string \":\" space %s ( \",\" space string \":\" space %s )* )? \"}\" space\n", r,
           value, value);
    }
  } else {
    char what[64];
    snprintf(what, sizeof what, "the type \"%.16s\"", type);
    return unsupported(g, what), -1;
  }
  return g->st ? -1 : r;
}

rlx_status rlx_json_schema_to_gbnf(const char *schema, char **gbnf) {
  if (!gbnf) return rlx_set_error(RLX_ERR_INVALID, "rlx_json_schema_to_gbnf: gbnf is NULL");
  *gbnf = NULL;
  gen g = {NULL, 0, 0, NULL, 0, 0, {{0, 0}}, 0, RLX_OK};
  json_doc d = {0};
  const int any_object = !schema || !strcmp(schema, "{}");
  if (!any_object) {
    g.st = json_parse(schema, strlen(schema), "the JSON schema", &d);
    g.d = &d;
  }
  if (!g.st) {
    emit(&g, "%s", PRIMITIVES);
    if (any_object) {
      emit(&g, "root ::= object\n");
    } else {
      int r = schema_rule(&g, 0, 0);
      emit(&g, "root ::= s%d\n", r);
    }
  }
  if (!any_object) json_free(&d);
  if (g.st) {
    free(g.buf);
    return g.st;
  }
  *gbnf = g.buf;
  return RLX_OK;
}
