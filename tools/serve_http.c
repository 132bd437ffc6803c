/* serve_http.c — rlx serve's HTTP side on libmicrohttpd: a thread per
 * connection (a handler may wait for its answer; a stream's reader waits
 * for tokens), request bodies gathered up to --max-body bytes (413 past
 * it, without reading the rest), the --api-key Bearer check (401), and
 * answers sent whole or as a chunked text/event-stream. A client that
 * leaves is seen either by the stream's writes failing (libmicrohttpd then
 * frees the response: its channel is cancelled) or by a waiting handler
 * looking at the socket. */
#include "serve.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONNECTION_LIMIT 256
#define IDLE_TIMEOUT_S 120
#define STREAM_BUFFER (256 * 1024)

struct serve_http {
  struct MHD_Daemon *daemon;
};

typedef struct {
  char *body;
  size_t len, cap;
  int too_big;
} request;

typedef struct {
  serve_server *srv;
  serve_answer answer;
  struct MHD_Connection *conn;
  char *pending;               /* events serve_stream_next gave and MHD has not taken yet */
  size_t n_pending, taken;
} stream;

/* serve_gone_fn: the peer closed its end (a read would give EOF) or reset it. */
static int client_gone(void *conn) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci) return 1;
  char c;
  ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void count(serve_server *srv, int status, int streamed) {
  pthread_mutex_lock(&srv->stats_mu);
  srv->n_requests++;
  srv->n_errors += status >= 400;
  srv->n_stream += streamed;
  pthread_mutex_unlock(&srv->stats_mu);
}

static enum MHD_Result send_answer(struct MHD_Connection *conn, serve_answer *a) {
  const char *body = a->body ? a->body : "";
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", a->content_type ? a->content_type : "application/json");
  if (a->status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
  enum MHD_Result ok = MHD_queue_response(conn, (unsigned)a->status, r);
  MHD_destroy_response(r);
  return ok;
}

static enum MHD_Result send_error(serve_server *srv, struct MHD_Connection *conn, int status, const char *msg,
                                  const char *code) {
  serve_answer a = {0};
  serve_answer_error(&a, status, msg, status >= 500 ? "server_error" : "invalid_request_error", NULL, code);
  count(srv, status, 0);
  enum MHD_Result ok = send_answer(conn, &a);
  free(a.body);
  return ok;
}

/* ---------------------------------------------------------------- streams */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  stream *s = cls;
  if (s->taken == s->n_pending) {
    s->n_pending = serve_stream_next(s->srv, &s->answer, s->pending, STREAM_BUFFER, client_gone, s->conn);
    s->taken = 0;
    if (s->n_pending == 0) return MHD_CONTENT_READER_END_OF_STREAM;
  }
  size_t n = s->n_pending - s->taken < max ? s->n_pending - s->taken : max;
  memcpy(buf, s->pending + s->taken, n);
  s->taken += n;
  return (ssize_t)n;
}

/* libmicrohttpd is done with the stream: sent, or the client is gone. */
static void stream_free(void *cls) {
  stream *s = cls;
  serve_chan *c = s->answer.stream;
  pthread_mutex_lock(&c->mu);
  c->cancelled |= !s->answer.sent_done;
  pthread_mutex_unlock(&c->mu);
  serve_chan_release(c);
  free(s->pending);
  free(s);
}

static enum MHD_Result send_stream(serve_server *srv, struct MHD_Connection *conn, serve_answer *a) {
  stream *s = calloc(1, sizeof *s);
  char *pending = malloc(STREAM_BUFFER);
  if (!s || !pending) {
    free(s);
    free(pending);
    serve_chan_release(a->stream); /* the scheduler sees the client gone */
    return send_error(srv, conn, 500, "out of memory", NULL);
  }
  s->srv = srv, s->answer = *a, s->conn = conn, s->pending = pending;
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BUFFER, stream_read, s,
                                                             stream_free);
  if (!r) {
    stream_free(s);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", "text/event-stream");
  MHD_add_response_header(r, "Cache-Control", "no-cache");
  count(srv, 200, 1);
  enum MHD_Result ok = MHD_queue_response(conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ok;
}

/* ---------------------------------------------------------------- requests */

/* Constant-time comparison: the key's bytes are not timed out one by one. */
static int same_key(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  unsigned diff = na != nb;
  for (size_t i = 0; i < na; i++) diff |= (unsigned char)a[i] ^ (unsigned char)(i < nb ? b[i] : 0);
  return diff == 0;
}

static int authorized(serve_server *srv, struct MHD_Connection *conn, const char *url) {
  if (!srv->opts.api_key || !strcmp(url, "/health")) return 1;
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  return h && !strncmp(h, "Bearer ", 7) && same_key(h + 7, srv->opts.api_key);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state) {
  (void)version;
  serve_server *srv = cls;
  request *rq = *state;
  if (!rq) { /* the headers: answer now what needs no body */
    if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
    *state = rq;
    if (!authorized(srv, conn, url))
      return send_error(srv, conn, 401, "a valid API key is needed: Authorization: Bearer KEY", "invalid_api_key");
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > srv->opts.max_body) rq->too_big = 1;
    if (rq->too_big) return send_error(srv, conn, 413, "the request body is over the limit (--max-body)", NULL);
    return MHD_YES;
  }
  if (*upload_size) { /* a piece of the body */
    size_t n = *upload_size;
    *upload_size = 0;
    if (rq->too_big || rq->len + n > srv->opts.max_body) {
      rq->too_big = 1;
      return MHD_YES;
    }
    if (rq->len + n + 1 > rq->cap) {
      size_t cap = (rq->len + n + 1) * 2 < srv->opts.max_body + 1 ? (rq->len + n + 1) * 2 : srv->opts.max_body + 1;
      char *b = realloc(rq->body, cap);
      if (!b) return MHD_NO;
      rq->body = b, rq->cap = cap;
    }
    memcpy(rq->body + rq->len, upload, n);
    rq->len += n;
    return MHD_YES;
  }
  if (rq->too_big) return send_error(srv, conn, 413, "the request body is over the limit (--max-body)", NULL);
  serve_answer a = {0};
  serve_route(srv, method, url, rq->body ? (rq->body[rq->len] = 0, rq->body) : "", rq->len, client_gone, conn, &a);
  if (a.stream) return send_stream(srv, conn, &a);
  count(srv, a.status, 0);
  enum MHD_Result ok = send_answer(conn, &a);
  free(a.body);
  return ok;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **state, enum MHD_RequestTerminationCode why) {
  (void)cls, (void)conn, (void)why;
  request *rq = *state;
  if (rq) free(rq->body);
  free(rq);
  *state = NULL;
}

rlx_status serve_http_start(serve_server *srv, serve_http **out, int *port) {
  *out = NULL;
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  char port_s[16];
  snprintf(port_s, sizeof port_s, "%d", srv->opts.port);
  int gai = getaddrinfo(srv->opts.host, port_s, &hints, &ai);
  if (gai) return rlx_set_error(RLX_ERR_INVALID, "--host %s: %s", srv->opts.host, gai_strerror(gai));
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
  if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  serve_http *h = calloc(1, sizeof *h);
  if (h)
    h->daemon = MHD_start_daemon(flags, (uint16_t)srv->opts.port, NULL, NULL, on_request, srv,
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)CONNECTION_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
  int err = errno;
  freeaddrinfo(ai);
  if (!h || !h->daemon) {
    free(h);
    return rlx_set_error(RLX_ERR_IO, "cannot listen on %s port %d: %s", srv->opts.host, srv->opts.port,
                         err ? strerror(err) : "libmicrohttpd failed to start");
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
  *port = di ? di->port : srv->opts.port;
  *out = h;
  return RLX_OK;
}

void serve_http_quiesce(serve_http *h) {
  if (!h) return;
  MHD_socket fd = MHD_quiesce_daemon(h->daemon);
  if (fd != MHD_INVALID_SOCKET) close(fd);
}

void serve_http_stop(serve_http *h) {
  if (!h) return;
  MHD_stop_daemon(h->daemon);
  free(h);
}
