/* serve.h — the pieces of `rlx serve`, an OpenAI-compatible HTTP server:
 *   serve.c         the command: options, loading, signals, shutdown
 *   serve_http.c    libmicrohttpd: bodies, the API key, routing, SSE
 *   serve_routes.c  routing, /health, /v1/models, /metrics, /v1/embeddings
 *   serve_complete.c  /v1/chat/completions and /v1/completions: requests
 *                   into jobs, answers whole or as server-sent events
 *   serve_sched.c   the scheduler: slots, queue, prompt cache, decode steps
 *   serve_text.c    a choice's text: stop strings and UTF-8 held back
 *   serve_json.c    cJSON helpers: typed fields, OpenAI's error shape
 *
 * Threads: libmicrohttpd runs a thread per connection (a handler may wait
 * for its answer); one scheduler thread owns the decoder and every slot.
 * They meet in a serve_chan: the request's generation settings and each
 * choice's text, guarded by its mutex. */
#ifndef RLX_SERVE_H
#define RLX_SERVE_H

#include "cli.h"

#include <cJSON.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SERVE_MAX_STOP 8       /* stop strings per request (OpenAI allows 4) */
#define SERVE_MAX_CHOICES 16   /* n */

typedef struct {
  const char *host, *model_path, *embed_path, *api_key;
  int port, parallel, threads, tp;
  int64_t ctx;                 /* the KV pool's positions, shared by the slots (llama-server's -c) */
  rlx_device device;
  int device_index;
  rlx_dtype cache_type;
  size_t max_body;             /* request bytes */
} serve_opts;

/* ---------------------------------------------------------------- a request's generation */

/* What every choice of a request generates from (owned by its serve_chan). */
typedef struct {
  int32_t *prompt;
  int64_t n_prompt;
  rlx_sampler_params sp;       /* choice i draws with seed sp.seed + i; logit_bias owned here */
  char *gbnf;                  /* the grammar every choice follows (response_format, grammar), or NULL */
  int64_t max_tokens;          /* < 0: until the context ends */
  int ignore_eos;              /* llama-server's field: end-of-generation tokens do not end it */
  int n_stop;
  char *stop[SERVE_MAX_STOP];
} serve_gen;

typedef struct {
  char *text;                  /* produced and not yet taken by the HTTP side */
  size_t len, cap;
  const char *finish;          /* NULL while it runs: "stop" or "length" */
  int64_t n_tokens;
} serve_choice;

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;                    /* the HTTP side + each choice still queued or running */
  serve_gen gen;
  int n_choices;
  serve_choice choice[SERVE_MAX_CHOICES];
  int64_t cached_tokens;       /* prompt positions reused from the prompt cache (choice 0) */
  int cancelled;               /* the client left or the server stops: the scheduler drops it */
  int shutdown;                /* set with cancelled when the server stops */
  char error[256];             /* a failure on the model's side: 500 */
  double t_submit, t_first;    /* monotonic seconds: submitted, first token of any choice */
} serve_chan;

serve_chan *serve_chan_new(void);            /* refs 1 (the HTTP side); n_choices set before submitting */
void serve_chan_release(serve_chan *c);      /* frees it with the last reference */
/* Called with c->mu held. */
int serve_chan_done(const serve_chan *c);    /* every choice finished (or an error) */

double serve_now(void);

/* ---------------------------------------------------------------- scheduler (serve_sched.c) */

typedef struct serve_sched serve_sched;
typedef struct {
  int64_t requests_queued, slots_busy, slots_total;
  int64_t prompt_tokens, cached_tokens, completion_tokens;
  double decode_seconds;       /* time the scheduler spent in steps */
} serve_sched_stats;

/* Opens o->model_path (a GGUF file or a Hugging Face folder) with
 * o->parallel sequences; serve_sched_start then runs the thread. */
rlx_status serve_sched_new(const serve_opts *o, serve_sched **out);
/* The model's metadata (its tokenizer, chat template). */
const rlx_model_file *serve_sched_file(const serve_sched *s);
rlx_status serve_sched_start(serve_sched *s, const rlx_tokenizer *tok);
/* Positions one sequence may hold. */
int64_t serve_sched_n_ctx(const serve_sched *s);
/* Queues every choice of c (which the scheduler references until each is
 * done); RLX_ERR_INVALID when the server is stopping. */
rlx_status serve_sched_submit(serve_sched *s, serve_chan *c);
void serve_sched_get_stats(serve_sched *s, serve_sched_stats *out);
/* Cancels what is queued or running and stops the thread. */
void serve_sched_stop(serve_sched *s);
void serve_sched_free(serve_sched *s);

/* ---------------------------------------------------------------- text (serve_text.c) */

/* How much of text[0..len) can be sent when `from` bytes are already
 * sent: *stop_at is where the first stop string begins (SIZE_MAX if none;
 * then the sequence ends there), otherwise a tail that could begin a stop
 * string or an unfinished UTF-8 character is held back. */
size_t serve_text_ready(const char *text, size_t len, size_t from, char *const *stop, int n_stop,
                        size_t *stop_at);

/* ---------------------------------------------------------------- JSON (serve_json.c) */

/* Typed members of a request object: absent (or null) leaves *out as it
 * is and returns 1; a wrong type or range writes a message into err and
 * returns 0. */
int sj_number(const cJSON *obj, const char *key, double lo, double hi, double *out, char *err, size_t cap);
int sj_int(const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out, char *err, size_t cap);
int sj_bool(const cJSON *obj, const char *key, int *out, char *err, size_t cap);
/* A string member (borrowed from obj). */
int sj_string(const cJSON *obj, const char *key, const char **out, char *err, size_t cap);
/* OpenAI's error body: {"error": {"message", "type", "param", "code"}} (malloc'ed). */
char *sj_error_body(const char *message, const char *type, const char *param, const char *code);
/* The printed form of j, unformatted (malloc'ed), and j freed. */
char *sj_print_free(cJSON *j);
/* Standard base64 of n bytes (malloc'ed, NUL-terminated). */
char *sj_base64(const void *data, size_t n);
/* Adds n bytes of generated text as a string member: invalid UTF-8 and
 * NUL bytes become U+FFFD (a sequence cut by max_tokens may end inside a
 * character). */
cJSON *sj_add_text(cJSON *obj, const char *key, const char *text, size_t n);

/* ---------------------------------------------------------------- endpoints (serve_routes.c, serve_complete.c) */

/* What a handler answers: a whole body, or a stream of server-sent events
 * read from a channel. */
typedef struct {
  int status;
  char *body;                  /* malloc'ed JSON (or text for /metrics) */
  const char *content_type;
  serve_chan *stream;          /* non-NULL: an SSE stream of this channel (body NULL) */
  int stream_chat;             /* chunks of chat.completion.chunk, else text_completion */
  int stream_usage;            /* stream_options.include_usage */
  char id[40];
  int64_t created;
  int sent_role, sent_done;    /* stream progress */
  unsigned char sent_finish[SERVE_MAX_CHOICES];
} serve_answer;

typedef struct serve_server serve_server;
struct serve_server {
  serve_opts opts;
  const rlx_model_file *file; /* the decoder's */
  rlx_tokenizer *tok;
  serve_sched *sched;
  rlx_embedder *embedder;
  pthread_mutex_t embed_mu;    /* rlx_embedder: one thread at a time */
  char model_id[256], embed_id[256];
  int64_t started;             /* unix seconds */
  pthread_mutex_t stats_mu;
  int64_t n_requests, n_errors, n_stream, n_next_id;
  _Atomic int stopping;        /* /health answers 503 */
};

/* Whether the connection's client is gone (serve_http.c): a handler that
 * waits for an answer looks, and cancels its channel. */
typedef int (*serve_gone_fn)(void *conn);
/* Answers method/url with body (NUL-terminated, len bytes). */
void serve_route(serve_server *srv, const char *method, const char *url, const char *body, size_t len,
                 serve_gone_fn gone, void *conn, serve_answer *a);
/* The next piece of an SSE stream into buf (cap bytes, >= 64 KiB):
 * its length, 0 when it is over. Waits for tokens; gives up (0) when the
 * client is gone, after cancelling. */
size_t serve_stream_next(serve_server *srv, serve_answer *a, char *buf, size_t cap, serve_gone_fn gone, void *conn);
void serve_answer_error(serve_answer *a, int status, const char *message, const char *type, const char *param,
                        const char *code);
/* POST /v1/chat/completions (chat 1) and /v1/completions (chat 0). */
void serve_complete(serve_server *srv, const cJSON *req, int chat, serve_gone_fn gone, void *conn, serve_answer *a);

/* ---------------------------------------------------------------- HTTP (serve_http.c) */

typedef struct serve_http serve_http;
rlx_status serve_http_start(serve_server *srv, serve_http **out, int *port);
/* Stops listening; connections still open finish. */
void serve_http_quiesce(serve_http *h);
/* Waits for the connections' threads and frees. */
void serve_http_stop(serve_http *h);

#endif
