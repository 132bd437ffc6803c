/* test_bootstrap.c — the TCP rendezvous of processes (runtime/bootstrap.h):
 * a world of 2 and of 3 processes (fork) exchange rank 0's id, every rank
 * getting its bytes; a world with a rank that never starts ends every
 * started rank with RLX_ERR_DEVICE within the timeout, not a hang; bad
 * addresses and ranks are refused; RANK / WORLD_SIZE / MASTER_ADDR /
 * MASTER_PORT fill what is not given. */
#include "check.h"
#include "runtime/bootstrap.h"

#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ID_BYTES 128

/* A port nothing listens on now (the kernel's pick for port 0). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &len))
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fill_id(unsigned char *id) {
  for (int i = 0; i < ID_BYTES; i++) id[i] = (unsigned char)(i * 37 + 11);
}

/* Rank `rank` in a child: exit 0 when it got rank 0's id, 2 when it failed
 * with RLX_ERR_DEVICE, 1 otherwise. */
static pid_t spawn_rank(const char *master, int rank, int world, int timeout_ms) {
  pid_t pid = fork();
  if (pid) return pid;
  unsigned char id[ID_BYTES] = {0}, want[ID_BYTES];
  fill_id(want);
  rlx_status st = rt_bootstrap(master, rank, world, id, sizeof id, timeout_ms);
  _exit(st == RLX_OK ? memcmp(id, want, sizeof id) != 0 : st == RLX_ERR_DEVICE ? 2 : 1);
}

static int wait_code(pid_t pid) {
  int ws = 0;
  waitpid(pid, &ws, 0);
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static void test_world(int world) {
  char master[64];
  snprintf(master, sizeof master, "127.0.0.1:%d", free_port());
  pid_t kids[8];
  /* the others first: they retry until rank 0 listens */
  for (int r = 1; r < world; r++) kids[r] = spawn_rank(master, r, world, 10000);
  unsigned char id[ID_BYTES];
  fill_id(id);
  rlx_status st = rt_bootstrap(master, 0, world, id, sizeof id, 10000);
  CHECK(st == RLX_OK, "world %d rank 0: %s", world, rlx_last_error());
  for (int r = 1; r < world; r++) CHECK(wait_code(kids[r]) == 0, "world %d: rank %d did not get the id", world, r);
}

/* world 3, rank 2 never starts: rank 0 and rank 1 both fail within the timeout. */
static void test_missing_rank(void) {
  char master[64];
  snprintf(master, sizeof master, "127.0.0.1:%d", free_port());
  const int timeout = 1500;
  double t0 = now_s();
  pid_t one = spawn_rank(master, 1, 3, timeout);
  unsigned char id[ID_BYTES];
  fill_id(id);
  CHECK_ERR(rt_bootstrap(master, 0, 3, id, sizeof id, timeout), RLX_ERR_DEVICE, "2 of 3 ranks joined",
            "missing: 2");
  CHECK(wait_code(one) == 2, "rank 1 of a world missing rank 2 must fail with RLX_ERR_DEVICE");
  double took = now_s() - t0;
  CHECK(took < timeout / 1000.0 + 2.0, "the missing rank took %.1f s to notice (timeout %d ms)", took, timeout);

  /* no rank 0 at all: a rank gives up after its timeout */
  snprintf(master, sizeof master, "127.0.0.1:%d", free_port());
  t0 = now_s();
  CHECK_ERR(rt_bootstrap(master, 1, 2, id, sizeof id, 800), RLX_ERR_DEVICE, "found no rank 0");
  CHECK(now_s() - t0 < 3.0, "a lone rank took %.1f s", now_s() - t0);
}

static void test_bad_input(void) {
  unsigned char id[ID_BYTES];
  CHECK_ERR(rt_bootstrap("127.0.0.1:1", 2, 2, id, sizeof id, 100), RLX_ERR_INVALID, "rank 2");
  CHECK_ERR(rt_bootstrap("127.0.0.1:1", -1, 2, id, sizeof id, 100), RLX_ERR_INVALID, "rank -1");
  CHECK_ERR(rt_bootstrap("localhost", 1, 2, id, sizeof id, 100), RLX_ERR_INVALID, "host:port");
  CHECK_ERR(rt_bootstrap(NULL, 1, 2, id, sizeof id, 100), RLX_ERR_INVALID, "host:port");
  CHECK_ERR(rt_bootstrap("127.0.0.1:99999", 0, 2, id, sizeof id, 100), RLX_ERR_INVALID, "99999");
  CHECK_ERR(rt_bootstrap("127.0.0.1:x", 0, 2, id, sizeof id, 100), RLX_ERR_INVALID, "port");
  CHECK(rt_bootstrap(NULL, 0, 1, id, sizeof id, 100) == RLX_OK, "a world of one needs no master");
}

static void test_env(void) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("MASTER_ADDR", "10.0.0.7", 1);
  setenv("MASTER_PORT", "29500", 1);
  int rank = -1, world = 0;
  const char *master = NULL;
  char buf[128];
  rt_bootstrap_env(&rank, &world, &master, buf, sizeof buf);
  CHECK(rank == 3 && world == 4 && master && !strcmp(master, "10.0.0.7:29500"), "env: %d %d %s", rank, world,
        master ? master : "(null)");
  rank = 1, world = 2, master = "h:1";
  rt_bootstrap_env(&rank, &world, &master, buf, sizeof buf);
  CHECK(rank == 1 && world == 2 && !strcmp(master, "h:1"), "given values win over the environment");
}

int main(void) {
  test_world(2);
  test_world(3);
  test_missing_rank();
  test_bad_input();
  test_env();
  return check_report();
}
