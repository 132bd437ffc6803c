/* serve_json.c — reading request fields with cJSON and writing OpenAI's
 * error shape. A field of the wrong type or out of range is a 400 naming
 * the field and what it takes; an absent or null field keeps the default. */
#include "serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The member key of obj, or NULL when absent or null. */
static const cJSON *member(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

int sj_number(const cJSON *obj, const char *key, double lo, double hi, double *out, char *err, size_t cap) {
  const cJSON *v = member(obj, key);
  if (!v) return 1;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
    snprintf(err, cap, "'%s' must be a number in [%g, %g]", key, lo, hi);
    return 0;
  }
  *out = v->valuedouble;
  return 1;
}

int sj_int(const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err, size_t cap) {
  const cJSON *v = member(obj, key);
  if (!v) return 1;
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) {
    snprintf(err, cap, "'%s' must be a whole number in [%lld, %lld]", key, (long long)lo, (long long)hi);
    return 0;
  }
  *out = (int64_t)d;
  return 1;
}

int sj_bool(const cJSON *obj, const char *key, int *out, char *err, size_t cap) {
  const cJSON *v = member(obj, key);
  if (!v) return 1;
  if (!cJSON_IsBool(v)) {
    snprintf(err, cap, "'%s' must be true or false", key);
    return 0;
  }
  *out = cJSON_IsTrue(v);
  return 1;
}

int sj_string(const cJSON *obj, const char *key, const char **out, char *err, size_t cap) {
  const cJSON *v = member(obj, key);
  if (!v) return 1;
  if (!cJSON_IsString(v)) {
    snprintf(err, cap, "'%s' must be a string", key);
    return 0;
  }
  *out = v->valuestring;
  return 1;
}

char *sj_print_free(cJSON *j) {
  char *s = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  return s;
}

char *sj_error_body(const char *message, const char *type, const char *param, const char *code) {
  cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
  if (e) {
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
  }
  return sj_print_free(root);
}

char *sj_base64(const void *data, size_t n) {
  static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const unsigned char *b = data;
  char *out = malloc((n + 2) / 3 * 4 + 1), *w = out;
  if (!out) return NULL;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
    *w++ = digits[v >> 18 & 63];
    *w++ = digits[v >> 12 & 63];
    *w++ = i + 1 < n ? digits[v >> 6 & 63] : '=';
    *w++ = i + 2 < n ? digits[v & 63] : '=';
  }
  *w = 0;
  return out;
}

cJSON *sj_add_text(cJSON *obj, const char *key, const char *text, size_t n) {
  char *clean = malloc(n * 3 + 1), *w = clean; /* each bad byte grows to 3 */
  if (!clean) return NULL;
  const unsigned char *u = (const unsigned char *)text;
  for (size_t i = 0; i < n;) {
    int len = u[i] ? cli_utf8_seq(u + i, n - i) : 0;
    int ok = len > 0;
    if (ok) {
      memcpy(w, u + i, (size_t)len);
      w += len, i += (size_t)len;
    } else {
      memcpy(w, "\xef\xbf\xbd", 3);
      w += 3, i++;
    }
  }
  *w = 0;
  cJSON *s = cJSON_AddStringToObject(obj, key, clean);
  free(clean);
  return s;
}
