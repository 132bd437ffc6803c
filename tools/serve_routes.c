/* serve_routes.c — which endpoint answers a request, and the small ones:
 * GET /health, GET /v1/models, GET /metrics (Prometheus text) and
 * POST /v1/embeddings. Every 4xx and 5xx body is OpenAI's error object. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMBED_MAX_INPUTS 2048

void serve_answer_error(serve_answer *a, int status, const char *message, const char *type, const char *param,
                        const char *code) {
  free(a->body);
  a->status = status;
  a->body = sj_error_body(message, type, param, code);
  a->content_type = "application/json";
}

static void answer_json(serve_answer *a, cJSON *o) {
  a->status = 200;
  a->body = sj_print_free(o);
  a->content_type = "application/json";
  if (!a->body) serve_answer_error(a, 500, "out of memory", "server_error", NULL, NULL);
}

static void health(serve_server *srv, serve_answer *a) {
  if (srv->stopping) return serve_answer_error(a, 503, "the server is stopping", "server_error", NULL, NULL);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "status", "ok");
  answer_json(a, o);
}

static void add_model(cJSON *list, const char *id, int64_t created) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "id", id);
  cJSON_AddStringToObject(m, "object", "model");
  cJSON_AddNumberToObject(m, "created", (double)created);
  cJSON_AddStringToObject(m, "owned_by", "rlx");
  cJSON_AddItemToArray(list, m);
}

static void models(serve_server *srv, serve_answer *a) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "object", "list");
  cJSON *data = cJSON_AddArrayToObject(o, "data");
  add_model(data, srv->model_id, srv->started);
  if (srv->embedder) add_model(data, srv->embed_id, srv->started);
  answer_json(a, o);
}

static void metrics(serve_server *srv, serve_answer *a) {
  serve_sched_stats st;
  serve_sched_get_stats(srv->sched, &st);
  pthread_mutex_lock(&srv->stats_mu);
  int64_t req = srv->n_requests, err = srv->n_errors, streams = srv->n_stream;
  pthread_mutex_unlock(&srv->stats_mu);
  size_t cap = 4096;
  char *b = malloc(cap);
  if (!b) return serve_answer_error(a, 500, "out of memory", "server_error", NULL, NULL);
  snprintf(b, cap,
           "# HELP rlx_requests_total HTTP requests answered.\n# TYPE rlx_requests_total counter\n"
           "rlx_requests_total %lld\n"
           "# HELP rlx_request_errors_total Requests answered with a 4xx or 5xx status.\n"
           "# TYPE rlx_request_errors_total counter\nrlx_request_errors_total %lld\n"
           "# HELP rlx_streams_total Answers streamed as server-sent events.\n"
           "# TYPE rlx_streams_total counter\nrlx_streams_total %lld\n"
           "# HELP rlx_queue_length Choices waiting for a slot.\n# TYPE rlx_queue_length gauge\n"
           "rlx_queue_length %lld\n"
           "# HELP rlx_slots_busy Slots running a sequence.\n# TYPE rlx_slots_busy gauge\nrlx_slots_busy %lld\n"
           "# HELP rlx_slots_total Slots (--parallel).\n# TYPE rlx_slots_total gauge\nrlx_slots_total %lld\n"
           "# HELP rlx_prompt_tokens_total Prompt tokens of the sequences started.\n"
           "# TYPE rlx_prompt_tokens_total counter\nrlx_prompt_tokens_total %lld\n"
           "# HELP rlx_prompt_tokens_cached_total Prompt tokens reused from the prompt cache.\n"
           "# TYPE rlx_prompt_tokens_cached_total counter\nrlx_prompt_tokens_cached_total %lld\n"
           "# HELP rlx_completion_tokens_total Tokens generated.\n"
           "# TYPE rlx_completion_tokens_total counter\nrlx_completion_tokens_total %lld\n"
           "# HELP rlx_busy_seconds_total Seconds the scheduler spent running steps.\n"
           "# TYPE rlx_busy_seconds_total counter\nrlx_busy_seconds_total %.6f\n"
           "# HELP rlx_tokens_per_second Tokens generated per busy second, since the start.\n"
           "# TYPE rlx_tokens_per_second gauge\nrlx_tokens_per_second %.3f\n",
           (long long)req, (long long)err, (long long)streams, (long long)st.requests_queued,
           (long long)st.slots_busy, (long long)st.slots_total, (long long)st.prompt_tokens,
           (long long)st.cached_tokens, (long long)st.completion_tokens, st.decode_seconds,
           st.decode_seconds > 0 ? (double)st.completion_tokens / st.decode_seconds : 0.0);
  a->status = 200;
  a->body = b;
  a->content_type = "text/plain; version=0.0.4";
}

/* ---------------------------------------------------------------- embeddings */

/* The texts of "input": a string or an array of strings (borrowed). */
static int embed_inputs(const cJSON *req, const char ***texts, int *n, serve_answer *a) {
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(req, "input");
  *n = cJSON_IsString(in) ? 1 : cJSON_IsArray(in) ? cJSON_GetArraySize(in) : -1;
  if (*n <= 0 || *n > EMBED_MAX_INPUTS) {
    serve_answer_error(a, 400, "'input' must be a string or an array of 1 to 2048 strings",
                       "invalid_request_error", "input", NULL);
    return 0;
  }
  if (!(*texts = malloc((size_t)*n * sizeof **texts))) {
    serve_answer_error(a, 500, "out of memory", "server_error", NULL, NULL);
    return 0;
  }
  if (cJSON_IsString(in)) {
    (*texts)[0] = in->valuestring;
    return 1;
  }
  int i = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, in) {
    if (!cJSON_IsString(t)) {
      serve_answer_error(a, 400, "'input' must hold strings (token arrays are not supported)",
                         "invalid_request_error", "input", NULL);
      return 0;
    }
    (*texts)[i++] = t->valuestring;
  }
  return 1;
}

static void embeddings(serve_server *srv, const cJSON *req, serve_answer *a) {
  char err[256];
  const char *model = NULL, *format = "float";
  if (!cJSON_IsObject(req)) return serve_answer_error(a, 400, "the request body must be a JSON object",
                                                      "invalid_request_error", NULL, NULL);
  if (!sj_string(req, "model", &model, err, sizeof err) || !sj_string(req, "encoding_format", &format, err, sizeof err))
    return serve_answer_error(a, 400, err, "invalid_request_error", NULL, NULL);
  if (!srv->embedder || (model && strcmp(model, srv->embed_id))) {
    char msg[640];
    snprintf(msg, sizeof msg, "The model '%.300s' does not exist (%.256s)", model ? model : "",
             srv->embedder ? srv->embed_id : "no embedding model is loaded: --embedding-model");
    return serve_answer_error(a, 404, msg, "invalid_request_error", "model", "model_not_found");
  }
  if (strcmp(format, "float") && strcmp(format, "base64"))
    return serve_answer_error(a, 400, "'encoding_format' must be float or base64", "invalid_request_error",
                              "encoding_format", NULL);
  int64_t dim = rlx_embedder_dim(srv->embedder), dims = dim;
  if (!sj_int(req, "dimensions", 1, 1 << 20, &dims, err, sizeof err) || dims != dim) {
    snprintf(err, sizeof err, "'dimensions' must be the model's, %lld", (long long)dim);
    return serve_answer_error(a, 400, err, "invalid_request_error", "dimensions", NULL);
  }
  const char **texts = NULL;
  int n;
  if (!embed_inputs(req, &texts, &n, a)) return free(texts);
  float *out = malloc((size_t)n * (size_t)dim * sizeof *out);
  int64_t n_tokens = 0;
  rlx_status st = out ? RLX_OK : RLX_ERR_NOMEM;
  pthread_mutex_lock(&srv->embed_mu);
  for (int i = 0; i < n && !st; i++) {
    int32_t ids[16];
    int64_t k = 0;
    rlx_status ts = rlx_embedder_tokenize(srv->embedder, texts[i], ids, 16, &k); /* only the count */
    if (ts && ts != RLX_ERR_INVALID) st = ts;
    n_tokens += k;
  }
  if (!st) st = rlx_embed(srv->embedder, texts, n, out);
  pthread_mutex_unlock(&srv->embed_mu);
  if (st) {
    snprintf(err, sizeof err, "embedding: %s: %s", rlx_status_name(st), rlx_last_error());
    free(out);
    free(texts);
    return serve_answer_error(a, 500, err, "server_error", NULL, NULL);
  }
  cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
  cJSON_AddStringToObject(o, "object", "list");
  cJSON_AddStringToObject(o, "model", srv->embed_id);
  for (int i = 0; i < n; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "object", "embedding");
    cJSON_AddNumberToObject(e, "index", i);
    const float *row = out + (size_t)i * (size_t)dim;
    if (!strcmp(format, "base64")) { /* little-endian float32, as OpenAI sends them */
      char *b64 = sj_base64(row, (size_t)dim * sizeof *row);
      cJSON_AddStringToObject(e, "embedding", b64 ? b64 : "");
      free(b64);
    } else {
      cJSON *v = cJSON_AddArrayToObject(e, "embedding");
      for (int64_t j = 0; j < dim; j++) cJSON_AddItemToArray(v, cJSON_CreateNumber((double)row[j]));
    }
    cJSON_AddItemToArray(data, e);
  }
  cJSON *u = cJSON_AddObjectToObject(o, "usage");
  cJSON_AddNumberToObject(u, "prompt_tokens", (double)n_tokens);
  cJSON_AddNumberToObject(u, "total_tokens", (double)n_tokens);
  free(out);
  free(texts);
  answer_json(a, o);
}

/* ---------------------------------------------------------------- routing */

typedef enum { R_HEALTH, R_MODELS, R_METRICS, R_CHAT, R_COMPLETIONS, R_EMBEDDINGS } route_id;

static const struct {
  const char *path, *method;
  route_id id;
} routes[] = {
    {"/health", "GET", R_HEALTH},          {"/v1/health", "GET", R_HEALTH},
    {"/v1/models", "GET", R_MODELS},       {"/models", "GET", R_MODELS},
    {"/metrics", "GET", R_METRICS},        {"/v1/chat/completions", "POST", R_CHAT},
    {"/chat/completions", "POST", R_CHAT}, {"/v1/completions", "POST", R_COMPLETIONS},
    {"/completions", "POST", R_COMPLETIONS}, {"/v1/embeddings", "POST", R_EMBEDDINGS},
    {"/embeddings", "POST", R_EMBEDDINGS},
};

void serve_route(serve_server *srv, const char *method, const char *url, const char *body, size_t len,
                 serve_gone_fn gone, void *conn, serve_answer *a) {
  size_t i = 0, n = sizeof routes / sizeof routes[0];
  while (i < n && strcmp(url, routes[i].path)) i++;
  char msg[256];
  if (i == n) {
    snprintf(msg, sizeof msg, "no endpoint %.200s", url);
    return serve_answer_error(a, 404, msg, "invalid_request_error", NULL, "not_found");
  }
  if (strcmp(method, routes[i].method)) {
    snprintf(msg, sizeof msg, "%.200s takes %s, not %.20s", url, routes[i].method, method);
    return serve_answer_error(a, 405, msg, "invalid_request_error", NULL, "method_not_allowed");
  }
  if (routes[i].id == R_HEALTH) return health(srv, a);
  if (routes[i].id == R_MODELS) return models(srv, a);
  if (routes[i].id == R_METRICS) return metrics(srv, a);
  if (memchr(body, 0, len)) return serve_answer_error(a, 400, "the request body holds a NUL byte",
                                                     "invalid_request_error", NULL, NULL);
  const char *end = NULL;
  cJSON *req = cJSON_ParseWithOpts(body, &end, 1);
  if (!req) {
    size_t at = end && end >= body ? (size_t)(end - body) : 0;
    snprintf(msg, sizeof msg, "the request body is not valid JSON (at byte %zu of %zu)", at, len);
    return serve_answer_error(a, 400, msg, "invalid_request_error", NULL, NULL);
  }
  if (routes[i].id == R_EMBEDDINGS) embeddings(srv, req, a);
  else serve_complete(srv, req, routes[i].id == R_CHAT, gone, conn, a);
  cJSON_Delete(req);
}
