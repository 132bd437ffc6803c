/* hash.c — SipHash-1-3 under a per-process random key (see hash.h).
 *
 * The key comes from getrandom(2), else /dev/urandom; where neither can be
 * read it is mixed from the clock, the process id and addresses, which is
 * weaker but still not knowable from a file. pthread_once makes the first
 * use from several threads safe. */
#define _GNU_SOURCE
#include "hash.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t key[2];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int read_urandom(void *buf, size_t n) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got = read(fd, buf, n);
  close(fd);
  return got == (ssize_t)n ? 0 : -1;
}

static void make_key(void) {
  if (getrandom(key, sizeof key, GRND_NONBLOCK) == (ssize_t)sizeof key) return;
  if (!read_urandom(key, sizeof key)) return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t s = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  s ^= (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&ts ^ (uint64_t)(uintptr_t)&key;
  key[0] = splitmix(&s);
  key[1] = splitmix(&s);
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
  do {                                                                                             \
    v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                                      \
    v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                                         \
    v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                                         \
    v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                                      \
  } while (0)

uint64_t ir_hash_bytes(const void *p, size_t n) {
  pthread_once(&key_once, make_key);
  const uint8_t *s = p;
  uint64_t v0 = key[0] ^ 0x736f6d6570736575ull, v1 = key[1] ^ 0x646f72616e646f6dull;
  uint64_t v2 = key[0] ^ 0x6c7967656e657261ull, v3 = key[1] ^ 0x7465646279746573ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t m = 0;
    for (int b = 0; b < 8; b++) m |= (uint64_t)s[i + b] << (8 * b);
    v3 ^= m;
    SIPROUND;
    v0 ^= m;
  }
  uint64_t m = (uint64_t)n << 56;
  for (int b = 0; i + b < n; b++) m |= (uint64_t)s[i + b] << (8 * b);
  v3 ^= m;
  SIPROUND;
  v0 ^= m;
  v2 ^= 0xff;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t ir_hash_u64(uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  return ir_hash_bytes(b, sizeof b);
}
