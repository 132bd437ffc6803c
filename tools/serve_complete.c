/* serve_complete.c — POST /v1/chat/completions and /v1/completions.
 *
 * A request becomes a serve_gen (prompt tokens, sampling, stops, limits)
 * in a channel that the scheduler fills with each choice's text. Without
 * "stream" the handler waits for every choice and answers once; with it,
 * the answer is a stream of server-sent events (OpenAI's chunk objects,
 * then "data: [DONE]"). A client that leaves cancels its channel, which
 * frees its slots at the scheduler's next step.
 *
 * Sampling defaults are llama.cpp's (rlx_sampler_default_params), as
 * llama-server's are; OpenAI's fields override them, and top_k, min_p,
 * repeat_penalty and ignore_eos are read too, as llama-server reads them. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SLICE_NS 100000000L   /* how often a waiting handler looks at its client */
#define STREAM_TEXT_MAX 8192       /* text bytes per chunk (escaped, at most 6x) */
#define STREAM_CHUNK_ROOM 65536    /* room a chunk needs in the stream's buffer */

static int bad(serve_answer *a, const char *msg, const char *param) {
  serve_answer_error(a, 400, msg, "invalid_request_error", param, NULL);
  return 0;
}

/* ---------------------------------------------------------------- requests */

/* The text of a message's content: a string, or an array of text parts. */
static int message_content(const cJSON *content, char **out, serve_answer *a) {
  if (!content || cJSON_IsNull(content)) return (*out = strdup("")) != NULL || bad(a, "out of memory", NULL);
  if (cJSON_IsString(content)) return (*out = strdup(content->valuestring)) != NULL || bad(a, "out of memory", NULL);
  if (!cJSON_IsArray(content)) return bad(a, "a message's 'content' must be a string or an array of text parts",
                                          "messages");
  size_t len = 0;
  const cJSON *part;
  cJSON_ArrayForEach(part, content) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
      return bad(a, "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported", "messages");
    len += strlen(text->valuestring);
  }
  if (!(*out = malloc(len + 1))) return bad(a, "out of memory", NULL);
  (*out)[0] = 0;
  cJSON_ArrayForEach(part, content) strcat(*out, cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
  return 1;
}

/* The chat prompt's tokens: messages through the model's template. */
static int chat_prompt(serve_server *srv, const cJSON *req, serve_gen *g, serve_answer *a) {
  const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
  int n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : -1;
  if (n <= 0) return bad(a, "'messages' must be a non-empty array", "messages");
  rlx_chat_message *m = calloc((size_t)n, sizeof *m);
  char **content = calloc((size_t)n, sizeof *content);
  int ok = m && content, i = 0;
  if (!ok) bad(a, "out of memory", NULL);
  const cJSON *msg;
  cJSON_ArrayForEach(msg, msgs) {
    if (!ok) break;
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
    if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
      ok = bad(a, "each message must be an object with a string 'role'", "messages");
      break;
    }
    const char *r = role->valuestring;
    if (!strcmp(r, "tool") || !strcmp(r, "function")) {
      ok = bad(a, "tool messages are not supported", "messages");
      break;
    }
    if (strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "user") && strcmp(r, "assistant")) {
      ok = bad(a, "a message's 'role' must be system, developer, user or assistant", "messages");
      break;
    }
    if (!(ok = message_content(cJSON_GetObjectItemCaseSensitive(msg, "content"), &content[i], a))) break;
    m[i] = (rlx_chat_message){!strcmp(r, "developer") ? "system" : r, content[i]};
    i++;
  }
  char *text = NULL;
  size_t len = 0;
  if (ok) {
    rlx_status st = cli_chat_text(srv->file, m, n, &text, &len);
    if (st) {
      char msg_buf[512];
      snprintf(msg_buf, sizeof msg_buf, "the model's chat template: %s", rlx_last_error());
      ok = bad(a, msg_buf, "messages");
    }
  }
  if (ok) {
    int add_special = !cli_starts_with_bos(srv->tok, text, len);
    if (cli_tokenize(srv->tok, text, len, add_special, 1, &g->prompt, &g->n_prompt))
      ok = bad(a, "the messages cannot be tokenized", "messages");
  }
  for (int k = 0; k < n && content; k++) free(content[k]);
  free(content);
  free(m);
  free(text);
  return ok;
}

/* The completion prompt's tokens: a string, [string] or [token ids]. */
static int completion_prompt(serve_server *srv, const cJSON *req, serve_gen *g, serve_answer *a) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "prompt");
  if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
    p = cJSON_GetArrayItem(p, 0);
  if (cJSON_IsString(p)) {
    if (cli_tokenize(srv->tok, p->valuestring, strlen(p->valuestring), 1, 1, &g->prompt, &g->n_prompt))
      return bad(a, "the prompt cannot be tokenized", "prompt");
    return 1;
  }
  int n = cJSON_IsArray(p) ? cJSON_GetArraySize(p) : -1;
  if (n <= 0) return bad(a, "'prompt' must be a string, an array of one string or an array of token ids", "prompt");
  if (!(g->prompt = malloc((size_t)n * sizeof *g->prompt))) return bad(a, "out of memory", NULL);
  int64_t vocab = rlx_tokenizer_vocab_size(srv->tok);
  const cJSON *t;
  cJSON_ArrayForEach(t, p) {
    if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble >= (double)vocab ||
        t->valuedouble != (double)(int32_t)t->valuedouble)
      return bad(a, "'prompt' holds one string or token ids of the model's vocabulary (one prompt per request)",
                 "prompt");
    g->prompt[g->n_prompt++] = (int32_t)t->valuedouble;
  }
  return 1;
}

static int stop_strings(const cJSON *req, serve_gen *g, serve_answer *a) {
  const cJSON *stop = cJSON_GetObjectItemCaseSensitive(req, "stop");
  if (!stop || cJSON_IsNull(stop)) return 1;
  if (cJSON_IsString(stop)) {
    if (*stop->valuestring && !(g->stop[g->n_stop++] = strdup(stop->valuestring))) return bad(a, "out of memory", NULL);
    return 1;
  }
  if (!cJSON_IsArray(stop) || cJSON_GetArraySize(stop) > SERVE_MAX_STOP)
    return bad(a, "'stop' must be a string or an array of at most 8 strings", "stop");
  const cJSON *s;
  cJSON_ArrayForEach(s, stop) {
    if (!cJSON_IsString(s)) return bad(a, "'stop' must be a string or an array of at most 8 strings", "stop");
    if (*s->valuestring && !(g->stop[g->n_stop++] = strdup(s->valuestring))) return bad(a, "out of memory", NULL);
  }
  return 1;
}

static int logit_bias(serve_server *srv, const cJSON *req, serve_gen *g, serve_answer *a) {
  const cJSON *lb = cJSON_GetObjectItemCaseSensitive(req, "logit_bias");
  if (!lb || cJSON_IsNull(lb)) return 1;
  int n = cJSON_IsObject(lb) ? cJSON_GetArraySize(lb) : -1;
  if (n < 0 || n > 1024) return bad(a, "'logit_bias' must be an object of at most 1024 token ids", "logit_bias");
  rlx_logit_bias *b = malloc((size_t)(n + 1) * sizeof *b);
  if (!b) return bad(a, "out of memory", NULL);
  g->sp.logit_bias = b, g->sp.n_logit_bias = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, lb) {
    char *end;
    long id = strtol(e->string, &end, 10);
    if (!*e->string || *end || id < 0 || id >= rlx_tokenizer_vocab_size(srv->tok) || !cJSON_IsNumber(e) ||
        e->valuedouble < -100 || e->valuedouble > 100)
      return bad(a, "'logit_bias' maps token ids of the model's vocabulary to numbers in [-100, 100]", "logit_bias");
    b[g->sp.n_logit_bias++] = (rlx_logit_bias){(int32_t)id, (float)e->valuedouble};
  }
  return 1;
}

/* The grammar of response_format (json_object, json_schema) or of
 * llama-server's "grammar" (GBNF text), checked by compiling it once. */
static int grammar(serve_server *srv, const cJSON *req, serve_gen *g, serve_answer *a) {
  const cJSON *rf = cJSON_GetObjectItemCaseSensitive(req, "response_format");
  const cJSON *gbnf = cJSON_GetObjectItemCaseSensitive(req, "grammar");
  char msg[512];
  rlx_status st = RLX_OK;
  if (rf && !cJSON_IsNull(rf)) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsString(type)) return bad(a, "'response_format' must be an object with a string 'type'",
                                          "response_format");
    if (!strcmp(type->valuestring, "json_object")) {
      st = rlx_json_schema_to_gbnf(NULL, &g->gbnf);
    } else if (!strcmp(type->valuestring, "json_schema")) {
      const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
      const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
      if (!cJSON_IsObject(schema))
        return bad(a, "response_format json_schema needs 'json_schema': {\"schema\": {...}}", "response_format");
      char *text = cJSON_PrintUnformatted(schema);
      st = text ? rlx_json_schema_to_gbnf(text, &g->gbnf) : RLX_ERR_NOMEM;
      free(text);
    } else if (strcmp(type->valuestring, "text")) {
      return bad(a, "'response_format' type must be text, json_object or json_schema", "response_format");
    }
    if (st) {
      snprintf(msg, sizeof msg, "response_format: %s", rlx_last_error());
      return bad(a, msg, "response_format");
    }
  }
  if (gbnf && !cJSON_IsNull(gbnf)) {
    if (!cJSON_IsString(gbnf)) return bad(a, "'grammar' must be a string (GBNF)", "grammar");
    if (g->gbnf) return bad(a, "'grammar' and a JSON response_format exclude each other", "grammar");
    if (!(g->gbnf = strdup(gbnf->valuestring))) return bad(a, "out of memory", NULL);
  }
  if (!g->gbnf) return 1;
  rlx_grammar *check = NULL;
  if ((st = rlx_grammar_new(g->gbnf, NULL, srv->tok, &check))) {
    snprintf(msg, sizeof msg, "the grammar: %s", rlx_last_error());
    return bad(a, msg, gbnf ? "grammar" : "response_format");
  }
  rlx_grammar_free(check);
  return 1;
}

/* Fields rlx serve does not do: an answer that would ignore them would mislead. */
static int unsupported(const cJSON *req, serve_answer *a) {
  const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
  const cJSON *fns = cJSON_GetObjectItemCaseSensitive(req, "functions");
  if ((cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0) || (cJSON_IsArray(fns) && cJSON_GetArraySize(fns) > 0))
    return bad(a, "tools (function calling) are not supported", "tools");
  static const char *const flags[] = {"logprobs", "echo"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, flags[i]))) {
      char msg[64];
      snprintf(msg, sizeof msg, "'%s' is not supported", flags[i]);
      return bad(a, msg, flags[i]);
    }
  const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(req, "suffix");
  if (cJSON_IsString(suffix) && *suffix->valuestring) return bad(a, "'suffix' is not supported", "suffix");
  return 1;
}

/* The request's fields into g, *n choices and the stream flags. */
static int read_request(serve_server *srv, const cJSON *req, int chat, serve_gen *g, int *n, int *stream,
                        int *usage, serve_answer *a) {
  char err[256];
  const char *model = NULL;
  if (!cJSON_IsObject(req)) return bad(a, "the request body must be a JSON object", NULL);
  if (!sj_string(req, "model", &model, err, sizeof err)) return bad(a, err, "model");
  if (model && strcmp(model, srv->model_id)) {
    char msg[640];
    snprintf(msg, sizeof msg, "The model '%.300s' does not exist (this server has '%.256s')", model, srv->model_id);
    serve_answer_error(a, 404, msg, "invalid_request_error", "model", "model_not_found");
    return 0;
  }
  if (!unsupported(req, a)) return 0;
  g->sp = rlx_sampler_default_params();
  double temp = g->sp.temperature, top_p = g->sp.top_p, min_p = g->sp.min_p, rp = g->sp.repeat_penalty;
  double fp = 0, pp = 0;
  int64_t top_k = g->sp.top_k, n_choices = 1, seed = -1, max_tokens = -1;
  *stream = 0, *usage = 0;
  const cJSON *so = cJSON_GetObjectItemCaseSensitive(req, "stream_options");
  if (!sj_number(req, "temperature", 0, 2, &temp, err, sizeof err) ||
      !sj_number(req, "top_p", 0, 1, &top_p, err, sizeof err) ||
      !sj_number(req, "min_p", 0, 1, &min_p, err, sizeof err) ||
      !sj_number(req, "repeat_penalty", 0.01, 100, &rp, err, sizeof err) ||
      !sj_number(req, "frequency_penalty", -2, 2, &fp, err, sizeof err) ||
      !sj_number(req, "presence_penalty", -2, 2, &pp, err, sizeof err) ||
      !sj_int(req, "top_k", 0, 1 << 30, &top_k, err, sizeof err) ||
      !sj_int(req, "n", 1, SERVE_MAX_CHOICES, &n_choices, err, sizeof err) ||
      !sj_int(req, "seed", INT64_MIN / 2, INT64_MAX / 2, &seed, err, sizeof err) ||
      !sj_int(req, "max_tokens", 1, 1 << 30, &max_tokens, err, sizeof err) ||
      !sj_int(req, "max_completion_tokens", 1, 1 << 30, &max_tokens, err, sizeof err) ||
      !sj_bool(req, "stream", stream, err, sizeof err) ||
      !sj_bool(req, "ignore_eos", &g->ignore_eos, err, sizeof err) ||
      (so && !sj_bool(so, "include_usage", usage, err, sizeof err)))
    return bad(a, err, NULL);
  g->sp.temperature = (float)temp;
  g->sp.top_p = top_p > 1e-9 ? (float)top_p : 1e-9f;
  g->sp.min_p = (float)min_p;
  g->sp.repeat_penalty = (float)rp;
  g->sp.top_k = (int32_t)top_k;
  g->sp.frequency_penalty = (float)fp, g->sp.presence_penalty = (float)pp;
  g->max_tokens = max_tokens;
  if (seed != -1) g->sp.seed = (uint64_t)seed;
  else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g->sp.seed = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
  }
  *n = (int)n_choices;
  if (!stop_strings(req, g, a) || !logit_bias(srv, req, g, a) || !grammar(srv, req, g, a)) return 0;
  if (!(chat ? chat_prompt(srv, req, g, a) : completion_prompt(srv, req, g, a))) return 0;
  int64_t n_ctx = serve_sched_n_ctx(srv->sched);
  if (g->n_prompt == 0) return bad(a, "the prompt is empty", chat ? "messages" : "prompt");
  if (g->n_prompt >= n_ctx) {
    char msg[256];
    snprintf(msg, sizeof msg, "the prompt is %lld tokens; a sequence holds %lld (--ctx / --parallel)",
             (long long)g->n_prompt, (long long)n_ctx);
    serve_answer_error(a, 400, msg, "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded");
    return 0;
  }
  return 1;
}

/* ---------------------------------------------------------------- answers */

static void add_usage(cJSON *obj, const serve_chan *c) {
  int64_t done = 0;
  for (int i = 0; i < c->n_choices; i++) done += c->choice[i].n_tokens;
  cJSON *u = cJSON_AddObjectToObject(obj, "usage");
  cJSON_AddNumberToObject(u, "prompt_tokens", (double)c->gen.n_prompt);
  cJSON_AddNumberToObject(u, "completion_tokens", (double)done);
  cJSON_AddNumberToObject(u, "total_tokens", (double)(c->gen.n_prompt + done));
  cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
  cJSON_AddNumberToObject(d, "cached_tokens", (double)c->cached_tokens);
}

static cJSON *answer_object(serve_server *srv, const serve_answer *a, const char *object) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", a->id);
  cJSON_AddStringToObject(o, "object", object);
  cJSON_AddNumberToObject(o, "created", (double)a->created);
  cJSON_AddStringToObject(o, "model", srv->model_id);
  cJSON_AddStringToObject(o, "system_fingerprint", "rlx-" RLX_VERSION);
  return o;
}

/* The whole answer of a finished channel (its lock held). */
static char *whole_answer(serve_server *srv, const serve_answer *a, const serve_chan *c, int chat) {
  cJSON *o = answer_object(srv, a, chat ? "chat.completion" : "text_completion");
  cJSON *choices = cJSON_AddArrayToObject(o, "choices");
  for (int i = 0; i < c->n_choices; i++) {
    const serve_choice *ch = &c->choice[i];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "index", i);
    if (chat) {
      cJSON *m = cJSON_AddObjectToObject(x, "message");
      cJSON_AddStringToObject(m, "role", "assistant");
      sj_add_text(m, "content", ch->text ? ch->text : "", ch->len);
    } else {
      sj_add_text(x, "text", ch->text ? ch->text : "", ch->len);
    }
    cJSON_AddNullToObject(x, "logprobs");
    cJSON_AddStringToObject(x, "finish_reason", ch->finish);
    cJSON_AddItemToArray(choices, x);
  }
  add_usage(o, c);
  return sj_print_free(o);
}

/* Waits (the channel's lock held) a slice for news; 0 when the client is gone.
 * The client is looked at once a slice even while news keeps coming, so a
 * whole answer whose client left stops before it is done. *next_look is the
 * caller's: the monotonic time of the next look (0: look at the first wait). */
static int wait_slice(serve_chan *c, serve_gone_fn gone, void *conn, int64_t *next_look) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += WAIT_SLICE_NS;
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000000000L + ts.tv_nsec;
  if (now < *next_look) return 1;
  *next_look = now + WAIT_SLICE_NS;
  pthread_mutex_unlock(&c->mu);
  int left = gone(conn);
  pthread_mutex_lock(&c->mu);
  if (left) {
    c->cancelled = 1;
    return 0;
  }
  return 1;
}

/* The answer of a channel that ended without its text: an error or a stop. */
static int failed_answer(serve_answer *a, const serve_chan *c) {
  if (c->error[0]) serve_answer_error(a, 500, c->error, "server_error", NULL, NULL);
  else if (c->shutdown) serve_answer_error(a, 503, "the server is stopping", "server_error", NULL, NULL);
  else return 0;
  return 1;
}

void serve_complete(serve_server *srv, const cJSON *req, int chat, serve_gone_fn gone, void *conn, serve_answer *a) {
  serve_chan *c = serve_chan_new();
  int n = 1, stream = 0, usage = 0;
  if (!c) return serve_answer_error(a, 500, "out of memory", "server_error", NULL, NULL);
  if (!read_request(srv, req, chat, &c->gen, &n, &stream, &usage, a)) {
    serve_chan_release(c);
    return;
  }
  c->n_choices = n;
  pthread_mutex_lock(&srv->stats_mu);
  int64_t id = ++srv->n_next_id;
  pthread_mutex_unlock(&srv->stats_mu);
  snprintf(a->id, sizeof a->id, "%s-%lld", chat ? "chatcmpl" : "cmpl", (long long)id);
  a->created = (int64_t)time(NULL);
  if (serve_sched_submit(srv->sched, c)) {
    serve_chan_release(c);
    return serve_answer_error(a, 503, "the server is stopping", "server_error", NULL, NULL);
  }
  if (stream) {
    a->status = 200;
    a->stream = c;
    a->stream_chat = chat;
    a->stream_usage = usage;
    a->content_type = "text/event-stream";
    return;
  }
  int64_t next_look = 0;
  pthread_mutex_lock(&c->mu);
  while (!serve_chan_done(c))
    if (!wait_slice(c, gone, conn, &next_look)) break;
  if (!failed_answer(a, c) && !c->cancelled) {
    a->status = 200;
    a->body = whole_answer(srv, a, c, chat);
    a->content_type = "application/json";
  } else if (!a->body) {
    serve_answer_error(a, 499, "the client closed the request", "invalid_request_error", NULL, NULL);
  }
  pthread_mutex_unlock(&c->mu);
  serve_chan_release(c);
}

/* ---------------------------------------------------------------- streams */

/* Appends "data: JSON\n\n" of o (freed) to buf; 0 if it does not fit. */
static size_t put_event(char *buf, size_t cap, cJSON *o) {
  char *s = sj_print_free(o);
  size_t n = s ? strlen(s) : 0;
  if (!s || n + 9 > cap) {
    free(s);
    return 0;
  }
  memcpy(buf, "data: ", 6);
  memcpy(buf + 6, s, n);
  memcpy(buf + 6 + n, "\n\n", 2);
  free(s);
  return n + 8;
}

/* One chunk of choice i: its role, its text, or its finish. */
static cJSON *chunk(serve_server *srv, const serve_answer *a, int i, const char *role, const char *text, size_t n,
                    const char *finish) {
  cJSON *o = answer_object(srv, a, a->stream_chat ? "chat.completion.chunk" : "text_completion");
  cJSON *choices = cJSON_AddArrayToObject(o, "choices"), *x = cJSON_CreateObject();
  cJSON_AddNumberToObject(x, "index", i);
  if (a->stream_chat) {
    cJSON *d = cJSON_AddObjectToObject(x, "delta");
    if (role) cJSON_AddStringToObject(d, "role", role);
    if (text) sj_add_text(d, "content", text, n);
  } else {
    sj_add_text(x, "text", text ? text : "", text ? n : 0);
  }
  cJSON_AddNullToObject(x, "logprobs");
  if (finish) cJSON_AddStringToObject(x, "finish_reason", finish);
  else cJSON_AddNullToObject(x, "finish_reason");
  cJSON_AddItemToArray(choices, x);
  return o;
}

/* The events ready now (the channel's lock held) into buf; their length. */
static size_t ready_events(serve_server *srv, serve_answer *a, serve_chan *c, char *buf, size_t cap) {
  size_t w = 0;
  for (int i = 0; i < c->n_choices && a->stream_chat && !a->sent_role; i++)
    w += put_event(buf + w, cap - w, chunk(srv, a, i, "assistant", "", 0, NULL));
  a->sent_role = 1;
  int all_done = 1;
  for (int i = 0; i < c->n_choices; i++) {
    serve_choice *ch = &c->choice[i];
    while (ch->len > 0 && cap - w >= STREAM_CHUNK_ROOM) {
      size_t n = ch->len <= STREAM_TEXT_MAX ? ch->len
               : cli_utf8_complete((const unsigned char *)ch->text, STREAM_TEXT_MAX);
      if (n == 0) n = STREAM_TEXT_MAX;
      w += put_event(buf + w, cap - w, chunk(srv, a, i, NULL, ch->text, n, NULL));
      memmove(ch->text, ch->text + n, ch->len - n);
      ch->len -= n;
    }
    if (ch->finish && ch->len == 0 && !a->sent_finish[i] && cap - w >= STREAM_CHUNK_ROOM) {
      cJSON *o = chunk(srv, a, i, NULL, NULL, 0, ch->finish);
      a->sent_finish[i] = 1;
      int last = 1;
      for (int k = 0; k < c->n_choices; k++) last &= a->sent_finish[k];
      if (last) add_usage(o, c); /* llama-server's habit: usage on the last finish */
      w += put_event(buf + w, cap - w, o);
    }
    all_done &= a->sent_finish[i];
  }
  if (!all_done || cap - w < STREAM_CHUNK_ROOM) return w;
  if (a->stream_usage) {
    cJSON *o = answer_object(srv, a, a->stream_chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(o, "choices");
    add_usage(o, c);
    w += put_event(buf + w, cap - w, o);
  }
  memcpy(buf + w, "data: [DONE]\n\n", 14);
  a->sent_done = 1;
  return w + 14;
}

size_t serve_stream_next(serve_server *srv, serve_answer *a, char *buf, size_t cap, serve_gone_fn gone, void *conn) {
  serve_chan *c = a->stream;
  size_t w = 0;
  int64_t next_look = 0;
  if (a->sent_done) return 0;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    if (c->error[0] || (c->cancelled && c->shutdown)) {
      serve_answer err = {0};
      failed_answer(&err, c);
      int n = snprintf(buf, cap, "data: %s\n\n", err.body ? err.body : "{}");
      free(err.body);
      w = n > 0 && (size_t)n < cap ? (size_t)n : 0;
      a->sent_done = 1;
      break;
    }
    if (c->cancelled) break;
    if ((w = ready_events(srv, a, c, buf, cap)) > 0) break;
    if (!wait_slice(c, gone, conn, &next_look)) break;
  }
  pthread_mutex_unlock(&c->mu);
  return w;
}
