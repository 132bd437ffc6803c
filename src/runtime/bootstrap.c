/* bootstrap.c — the TCP rendezvous of bootstrap.h. Every socket is
 * non-blocking and waited on with poll against one deadline, so no step
 * (connect, accept, send, recv) can hang past the timeout. */
#include "bootstrap.h"

#include "../ir/ir.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BOOT_MAGIC 0x726c7862u /* "rlxb": a stray connection is not a rank */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int left_ms(int64_t deadline) {
  int64_t l = deadline - now_ms();
  return l < 0 ? 0 : l > 1000 ? 1000 : (int)l;
}

void rt_bootstrap_env(int *rank, int *world, const char **master, char *buf, size_t cap) {
  const char *v;
  if (*rank < 0 && (v = getenv("RANK")) && *v) *rank = atoi(v);
  if (*world <= 0 && (v = getenv("WORLD_SIZE")) && *v) *world = atoi(v);
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if ((!*master || !**master) && addr && *addr && port && *port) {
    snprintf(buf, cap, "%s:%s", addr, port);
    *master = buf;
  }
}

/* "host:port" (the last colon: "[::1]:29500" or "::1:29500" for IPv6). */
static rlx_status resolve(const char *master, int passive, struct addrinfo **out) {
  char host[256];
  const char *colon = master ? strrchr(master, ':') : NULL;
  if (!colon || colon == master || (size_t)(colon - master) >= sizeof host || !colon[1])
    return rlx_set_error(RLX_ERR_INVALID, "bootstrap: master address \"%s\" is not host:port (or set MASTER_ADDR "
                         "and MASTER_PORT)", master ? master : "");
  size_t hl = (size_t)(colon - master);
  const char *h = master;
  if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') h++, hl -= 2;
  memcpy(host, h, hl);
  host[hl] = 0;
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port <= 0 || port > 65535)
    return rlx_set_error(RLX_ERR_INVALID, "bootstrap: port \"%s\" of \"%s\" is not in [1, 65535]", colon + 1, master);
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  int e = getaddrinfo(host, colon + 1, &hints, out);
  if (e) return rlx_set_error(RLX_ERR_INVALID, "bootstrap: cannot resolve \"%s\": %s", host, gai_strerror(e));
  return RLX_OK;
}

static int nonblocking(int fd) { return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/* All n bytes through fd before the deadline: 0, or -1 (closed, error, time). */
static int io_all(int fd, void *buf, size_t n, int writing, int64_t deadline) {
  uint8_t *p = buf;
  while (n) {
    struct pollfd pf = {fd, writing ? POLLOUT : POLLIN, 0};
    if (now_ms() >= deadline) return -1;
    int r = poll(&pf, 1, left_ms(deadline));
    if (r < 0 && errno != EINTR) return -1;
    if (r <= 0) continue;
    ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k == 0) return -1;
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static rlx_status serve(const char *master, int world, const void *blob, size_t n, int64_t deadline, int timeout) {
  struct addrinfo *ai;
  rlx_status st = resolve(master, 1, &ai);
  if (st) return st;
  int lfd = -1;
  for (struct addrinfo *a = ai; a && lfd < 0; a = a->ai_next) {
    lfd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (lfd < 0) continue;
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, a->ai_addr, a->ai_addrlen) || listen(lfd, world) || nonblocking(lfd)) {
      close(lfd);
      lfd = -1;
    }
  }
  freeaddrinfo(ai);
  if (lfd < 0)
    return rlx_set_error(RLX_ERR_DEVICE, "bootstrap: rank 0 cannot listen at %s: %s", master, strerror(errno));
  int *fd = malloc((size_t)world * sizeof *fd);
  if (!fd) {
    close(lfd);
    return rlx_set_error(RLX_ERR_NOMEM, "bootstrap: out of memory");
  }
  for (int r = 0; r < world; r++) fd[r] = -1;
  int joined = 1;
  while (joined < world && now_ms() < deadline) {
    struct pollfd pf = {lfd, POLLIN, 0};
    if (poll(&pf, 1, left_ms(deadline)) <= 0) continue;
    int c = accept(lfd, NULL, NULL);
    if (c < 0) continue;
    uint32_t hello[2];
    /* a connection that does not introduce itself soon is dropped */
    int64_t soon = now_ms() + 2000 < deadline ? now_ms() + 2000 : deadline;
    if (nonblocking(c) || io_all(c, hello, sizeof hello, 0, soon) || hello[0] != BOOT_MAGIC ||
        hello[1] == 0 || hello[1] >= (uint32_t)world || fd[hello[1]] >= 0) {
      close(c);
      continue;
    }
    fd[hello[1]] = c;
    joined++;
  }
  close(lfd);
  if (joined == world) {
    uint64_t len = n;
    for (int r = 1; r < world && st == RLX_OK; r++)
      if (io_all(fd[r], &len, sizeof len, 1, deadline) || io_all(fd[r], (void *)blob, n, 1, deadline))
        st = rlx_set_error(RLX_ERR_DEVICE, "bootstrap: rank 0 could not send the id to rank %d", r);
  } else {
    char missing[160] = "";
    for (int r = 1; r < world; r++)
      if (fd[r] < 0 && strlen(missing) + 12 < sizeof missing)
        snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%d", *missing ? ", " : "", r);
    st = rlx_set_error(RLX_ERR_DEVICE, "bootstrap: rank 0 waited %d ms at %s; %d of %d ranks joined (missing: %s)",
                       timeout, master, joined, world, missing);
  }
  for (int r = 1; r < world; r++)
    if (fd[r] >= 0) close(fd[r]);
  free(fd);
  return st;
}

static rlx_status join(const char *master, int rank, void *blob, size_t n, int64_t deadline, int timeout) {
  struct addrinfo *ai;
  rlx_status st = resolve(master, 0, &ai);
  if (st) return st;
  int fd = -1;
  /* rank 0 may not listen yet: try again until the deadline */
  while (fd < 0 && now_ms() < deadline) {
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
      fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen)) {
        close(fd);
        fd = -1;
      }
    }
    if (fd < 0) {
      struct timespec ts = {0, 100 * 1000000};
      nanosleep(&ts, NULL);
    }
  }
  freeaddrinfo(ai);
  if (fd < 0)
    return rlx_set_error(RLX_ERR_DEVICE, "bootstrap: rank %d found no rank 0 at %s within %d ms", rank, master,
                         timeout);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  uint32_t hello[2] = {BOOT_MAGIC, (uint32_t)rank};
  uint64_t len = 0;
  if (nonblocking(fd) || io_all(fd, hello, sizeof hello, 1, deadline) || io_all(fd, &len, sizeof len, 0, deadline))
    st = rlx_set_error(RLX_ERR_DEVICE, "bootstrap: rank %d joined %s but got no id within %d ms (a rank is "
                       "missing, or rank 0 gave up)", rank, master, timeout);
  else if (len != n)
    st = rlx_set_error(RLX_ERR_DEVICE, "bootstrap: rank %d got an id of %llu bytes; expected %zu", rank,
                       (unsigned long long)len, n);
  else if (io_all(fd, blob, n, 0, deadline))
    st = rlx_set_error(RLX_ERR_DEVICE, "bootstrap: rank %d lost rank 0 while reading the id", rank);
  close(fd);
  return st;
}

rlx_status rt_bootstrap(const char *master, int rank, int world, void *blob, size_t n, int timeout_ms) {
  if (world < 1 || rank < 0 || rank >= world)
    return rlx_set_error(RLX_ERR_INVALID, "bootstrap: rank %d is not in a world of %d", rank, world);
  if (world == 1) return RLX_OK;
  int timeout = timeout_ms > 0 ? timeout_ms : 60000;
  int64_t deadline = now_ms() + timeout;
  return rank == 0 ? serve(master, world, blob, n, deadline, timeout) : join(master, rank, blob, n, deadline, timeout);
}
