/* fuzz_serve_text — libFuzzer harness of rlx serve's text handling
 * (tools/serve_text.c, serve_json.c): what a server does with bytes a
 * model generates and with JSON a client sends.
 *
 * Input: sections split at 0x01: generated text, then up to 8 stop
 * strings, then a JSON request body. The text is fed as a stream in
 * pieces of 1 to 8 bytes (the first byte picks the step); each call of
 * serve_text_ready must return an end within [from, len], never pass the
 * first stop string, and what it lets through must contain no stop
 * string; the text, made a JSON string (sj_add_text), must print and
 * parse back as valid UTF-8. The body is parsed with cJSON and read with
 * every typed reader under the keys a request uses. Any crash, leak,
 * sanitizer report or abort() is a bug. */
#include "../../tools/serve.h"
#include "gguf_build.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SECTIONS (2 + SERVE_MAX_STOP)

static int contains(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; k && i + k <= n; i++)
    if (!memcmp(hay + i, needle, k)) return 1;
  return 0;
}

static void stream_text(const char *text, size_t len, char *const *stop, int n_stop, size_t step) {
  size_t sent = 0;
  for (size_t have = 0; have < len;) {
    have = have + step < len ? have + step : len;
    size_t stop_at, end = serve_text_ready(text, have, sent, stop, n_stop, &stop_at);
    if (end < sent || end > have) abort();
    if (stop_at != SIZE_MAX) {
      if (end != stop_at || stop_at < sent) abort();
      for (int i = 0; i < n_stop; i++)
        if (contains(text, stop_at, stop[i])) abort(); /* an earlier stop string was missed */
      return;
    }
    for (int i = 0; i < n_stop; i++)
      if (contains(text, end, stop[i])) abort();
    sent = end;
  }
}

static void json_text(const char *text, size_t len) {
  cJSON *o = cJSON_CreateObject();
  if (o && sj_add_text(o, "t", text, len)) {
    char *printed = cJSON_PrintUnformatted(o);
    cJSON *back = printed ? cJSON_Parse(printed) : NULL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(back, "t");
    if (printed && !cJSON_IsString(t)) abort();
    for (size_t i = 0; t && t->valuestring[i];) {
      int n = cli_utf8_seq((const unsigned char *)t->valuestring + i, strlen(t->valuestring + i));
      if (n <= 0) abort();
      i += (size_t)n;
    }
    cJSON_Delete(back);
    free(printed);
  }
  cJSON_Delete(o);
}

static void request(const char *body) {
  cJSON *req = cJSON_Parse(body);
  static const char *const keys[] = {"model", "temperature", "top_p", "n", "max_tokens", "seed", "stream",
                                     "stop", "messages", "prompt", "logit_bias", "input"};
  char err[256];
  for (size_t i = 0; req && i < sizeof keys / sizeof keys[0]; i++) {
    double d = 0;
    int64_t n = 0;
    int b = 0;
    const char *s = NULL;
    sj_number(req, keys[i], -2, 2, &d, err, sizeof err);
    sj_int(req, keys[i], INT64_MIN / 2, INT64_MAX / 2, &n, err, sizeof err);
    sj_bool(req, keys[i], &b, err, sizeof err);
    if (sj_string(req, keys[i], &s, err, sizeof err) && s) json_text(s, strlen(s));
  }
  cJSON_Delete(req);
  char *e = sj_error_body(body, "invalid_request_error", NULL, NULL);
  free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t step = 1 + data[0] % 8;
  const uint8_t *sec[MAX_SECTIONS];
  size_t sec_len[MAX_SECTIONS];
  int n_sec = gb_split(data + 1, size - 1, 0x01, sec, sec_len, MAX_SECTIONS);
  char *stop[SERVE_MAX_STOP];
  int n_stop = 0;
  for (int i = 1; i < n_sec - 1 && n_stop < SERVE_MAX_STOP; i++) {
    if (!sec_len[i] || memchr(sec[i], 0, sec_len[i])) continue; /* requests never hold empty ones */
    if (!(stop[n_stop] = malloc(sec_len[i] + 1))) break;
    memcpy(stop[n_stop], sec[i], sec_len[i]);
    stop[n_stop++][sec_len[i]] = 0;
  }
  char *text = malloc(sec_len[0] + 1);
  char *body = n_sec > 1 ? malloc(sec_len[n_sec - 1] + 1) : NULL;
  if (text) {
    memcpy(text, sec[0], sec_len[0]);
    stream_text(text, sec_len[0], stop, n_stop, step);
    json_text(text, sec_len[0]);
  }
  if (body) {
    memcpy(body, sec[n_sec - 1], sec_len[n_sec - 1]);
    body[sec_len[n_sec - 1]] = 0;
    request(body);
  }
  for (int i = 0; i < n_stop; i++) free(stop[i]);
  free(text);
  free(body);
  return 0;
}
