/* test_hostile_names.c — names chosen to collide must not make loading
 * slow (issue: every name index once used unseeded FNV-1a with linear
 * probing, so a file whose names all collide took minutes to open).
 *
 * For GGUF metadata keys, safetensors tensor names and graph-text input
 * names, builds 2^K names that all collide in their low 20 bits under the
 * old hashes (64-bit FNV-1a for the model files, 32-bit for the graph's
 * name set: a Joux multicollision, K stages of two 3-byte blocks that
 * lead to the same low state, so every choice of blocks collides), checks
 * that they do collide under the old hash (the reference), and times
 * opening them against random names of the same count and length. Linear
 * time means the two take about as long; a quadratic index takes hundreds
 * of times longer (seconds against milliseconds here). */
#include "check.h"
#include "rlx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define K 15                 /* 32768 names */
#define N (1 << K)
#define LOW 20
#define LOW_MASK ((1u << LOW) - 1)
#define NAME_LEN (2 + 3 * K) /* "n." and K blocks */

static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";

typedef uint64_t (*step_fn)(uint64_t h, uint8_t b);
static uint64_t fnv64_step(uint64_t h, uint8_t b) { return (h ^ b) * 1099511628211ull; }
static uint64_t fnv32_step(uint64_t h, uint8_t b) { return (uint32_t)((uint32_t)(h ^ b) * 16777619u); }

static uint64_t old_hash(step_fn step, uint64_t basis, const char *s) {
  uint64_t h = basis;
  for (; *s; s++) h = step(h, (uint8_t)*s);
  return h;
}

static void block_of(int i, char out[3]) {
  out[0] = alnum[i % 36];
  out[1] = alnum[i / 36 % 36];
  out[2] = alnum[i / 1296];
}

/* names[i] (NAME_LEN + 1 bytes each): all equal in the low LOW bits of the old hash. */
static char *colliding_names(step_fn step, uint64_t basis) {
  char blocks[K][2][3];
  int32_t *seen = malloc(sizeof(int32_t) << LOW);
  uint64_t s = step(step(basis, 'n'), '.') & LOW_MASK;
  for (int k = 0; k < K; k++) {
    memset(seen, 0xff, sizeof(int32_t) << LOW);
    for (int i = 0; i < 36 * 36 * 36; i++) {
      char b[3];
      block_of(i, b);
      uint64_t t = step(step(step(s, (uint8_t)b[0]), (uint8_t)b[1]), (uint8_t)b[2]) & LOW_MASK;
      if (seen[t] >= 0) {
        block_of(seen[t], blocks[k][0]);
        memcpy(blocks[k][1], b, 3);
        s = t;
        break;
      }
      seen[t] = i;
    }
  }
  free(seen);
  char *names = malloc((size_t)N * (NAME_LEN + 1));
  for (int i = 0; i < N; i++) {
    char *p = names + (size_t)i * (NAME_LEN + 1);
    memcpy(p, "n.", 2);
    for (int k = 0; k < K; k++) memcpy(p + 2 + 3 * k, blocks[k][i >> k & 1], 3);
    p[NAME_LEN] = 0;
  }
  return names;
}

static char *random_names(void) {
  char *names = malloc((size_t)N * (NAME_LEN + 1));
  uint64_t r = 88172645463325252ull;
  for (int i = 0; i < N; i++) {
    char *p = names + (size_t)i * (NAME_LEN + 1);
    memcpy(p, "n.", 2);
    for (int j = 2; j < NAME_LEN; j++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      p[j] = alnum[r % 36];
    }
    p[NAME_LEN] = 0;
  }
  return names;
}

static const char *name_at(const char *names, int i) { return names + (size_t)i * (NAME_LEN + 1); }

/* ---------------------------------------------------------------- the three loaders */

typedef struct {
  char *p;
  size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) { put(b, s, strlen(s)); }

/* A GGUF file with one uint8 metadata value under each name. */
static buf gguf_of(const char *names) {
  buf b = {0};
  put(&b, "GGUF", 4);
  put_u32(&b, 3);
  put_u64(&b, 0);
  put_u64(&b, N);
  for (int i = 0; i < N; i++) {
    put_u64(&b, NAME_LEN);
    put(&b, name_at(names, i), NAME_LEN);
    put_u32(&b, 0); /* UINT8 */
    uint8_t v = (uint8_t)i;
    put(&b, &v, 1);
  }
  return b;
}

/* A safetensors file with one U8 tensor of one byte under each name. */
static buf safetensors_of(const char *names) {
  buf h = {0}, b = {0};
  put_str(&h, "{");
  for (int i = 0; i < N; i++) {
    char e[160];
    snprintf(e, sizeof e, "%s\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]}", i ? "," : "",
             name_at(names, i), i, i + 1);
    put_str(&h, e);
  }
  put_str(&h, "}");
  put_u64(&b, h.n);
  put(&b, h.p, h.n);
  for (int i = 0; i < N; i++) put(&b, "x", 1);
  free(h.p);
  return b;
}

/* Graph text with an input under each name. */
static buf graph_of(const char *names) {
  buf b = {0};
  put_str(&b, "graph \"g\" {\n");
  for (int i = 0; i < N; i++) {
    char e[160];
    snprintf(e, sizeof e, "  %%%d = Input{name=\"%s\"} : f32[1]\n", i, name_at(names, i));
    put_str(&b, e);
  }
  put_str(&b, "  outputs %0\n}\n");
  put(&b, "", 1);
  return b;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds to load b (the best of 3, to shed the noise of a shared machine); -1 on failure. */
static double load_seconds(const char *what, const buf *b) {
  double best = 1e9;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now();
    rlx_status st;
    if (!strcmp(what, "graph text")) {
      rlx_graph *g = NULL;
      st = rlx_graph_from_text(b->p, &g);
      rlx_graph_free(g);
    } else {
      rlx_model_file *f = NULL;
      st = rlx_model_file_open_memory(b->p, b->n, &f);
      rlx_model_file_close(f);
    }
    double t = now() - t0;
    CHECK(st == RLX_OK, "%s: %s", what, rlx_last_error());
    if (st) return -1;
    if (t < best) best = t;
  }
  return best;
}

static void case_of(const char *what, step_fn step, uint64_t basis, buf (*make)(const char *)) {
  char *bad = colliding_names(step, basis), *good = random_names();
  uint64_t h0 = old_hash(step, basis, name_at(bad, 0)) & LOW_MASK;
  int all = 1;
  for (int i = 1; i < N; i++) all &= (old_hash(step, basis, name_at(bad, i)) & LOW_MASK) == h0;
  CHECK(all, "%s: the crafted names collide under the old hash", what);
  buf b = make(bad), g = make(good);
  double tb = load_seconds(what, &b), tg = load_seconds(what, &g);
  printf("%s, %d names: colliding %.4f s, random %.4f s\n", what, N, tb, tg);
  /* generous (a loaded CI machine): linear time gives a ratio near 1, the
   * old index took ~300x here (1.6 s against 0.006 s for the GGUF) */
  CHECK(tb <= 10 * tg + 0.1, "%s: colliding names %.3f s against random %.3f s", what, tb, tg);
  free(b.p);
  free(g.p);
  free(bad);
  free(good);
}

int main(void) {
  case_of("gguf", fnv64_step, 1469598103934665603ull, gguf_of);
  case_of("safetensors", fnv64_step, 1469598103934665603ull, safetensors_of);
  case_of("graph text", fnv32_step, 2166136261u, graph_of);
  return check_report();
}
