/* json.h — a small bounds-checked JSON reader (RFC 8259), for the files of
 * Hugging Face model folders (config.json, tokenizer.json, ...). Internal.
 *
 * json_parse checks the whole text once and records every value as a token
 * in document order (a container's children follow it; an object's
 * children alternate key, value). Strings stay escaped in the text and are
 * decoded on request, so a 20 MB tokenizer.json costs one pass and one
 * token array. Nesting deeper than JSON_MAX_DEPTH, invalid escapes, control
 * characters in strings, invalid UTF-8, bad numbers, trailing bytes and
 * texts of 2 GiB or more get RLX_ERR_FORMAT with the byte offset. */
#ifndef RLX_MODEL_JSON_H
#define RLX_MODEL_JSON_H

#include "rlx.h"

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 128

typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY,
               JSON_OBJECT } json_type;

typedef struct {
  json_type type;
  uint32_t start, len;  /* the value's bytes; strings: between the quotes, still escaped */
  uint32_t size;        /* arrays: elements; objects: key/value pairs */
  uint32_t next;        /* the token after this value and everything inside it */
} json_tok;

typedef struct {
  const char *text;     /* borrowed */
  size_t len;
  json_tok *tok;
  uint32_t n;
} json_doc;

/* what names the text in messages ("model/config.json"). */
rlx_status json_parse(const char *text, size_t len, const char *what, json_doc *out);
void       json_free(json_doc *d);

/* The value of key in object token obj; -1 if obj is not an object or has
 * no such key (the last one wins when a key repeats, as in Python). */
int64_t json_get(const json_doc *d, int64_t obj, const char *key);
/* The first child of a container (its first element, or first key); -1 when empty. */
int64_t json_first(const json_doc *d, int64_t i);
static inline int64_t json_next(const json_doc *d, int64_t i) { return d->tok[i].next; }
static inline json_type json_kind(const json_doc *d, int64_t i) {
  return i < 0 ? JSON_NULL : d->tok[i].type;
}

/* Decodes string token i into out (room for d->tok[i].len bytes is always
 * enough), returning its length; -1 when i is not a string. */
int64_t json_str(const json_doc *d, int64_t i, char *out);
/* A malloc'd NUL-terminated copy of string token i (NULL if not a string
 * or out of memory); *len may be NULL. */
char *json_strdup(const json_doc *d, int64_t i, size_t *len);
/* Whether string token i equals s (decoded). */
int json_str_eq(const json_doc *d, int64_t i, const char *s);
/* Number token i; 0 when it is not a number. */
int json_num(const json_doc *d, int64_t i, double *out);
/* Number token i when it is an integer in [lo, hi]. */
int json_int(const json_doc *d, int64_t i, int64_t lo, int64_t hi, int64_t *out);
/* true/false token i (else 0). */
int json_bool(const json_doc *d, int64_t i, int *out);

/* A whole file read into memory (NUL-terminated), for json_parse. */
rlx_status json_read_file(const char *path, char **text, size_t *len);

#endif
