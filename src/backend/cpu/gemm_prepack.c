/* gemm_prepack.c — slots that keep a GEMM operand (a weight) packed in the
 * micro-kernel's panels between calls: their memory (huge_alloc.h), the
 * process-wide budget (RLX_PREPACK, RLX_PREPACK_MAX_MB) and
 * the key that says whether the panels still match the operand. gemm.c
 * packs into them (prepacked). */
#include "gemm_prepack.h"

#include "huge_alloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Layout of a prepacked B: for K block kb (the blocks gemm_tile_packed uses:
 * kblocks even pieces of K, the first at pc = 0), ceil(N / nr) panels of
 * kc x nr, panel p at panels + pc * n_pad + p * kc * nr, n_pad = N rounded
 * up to nr. So the B block (kb, columns jc : jc + nc) of any tile, jc a
 * multiple of nr, starts at panels + pc * n_pad + jc * kc. */
struct gemm_prepack {
  float *panels;   /* NULL: nothing packed (empty, failed or over budget) */
  size_t floats;
  int tried;       /* packing was attempted for key */
  gemm_prepack_key key; /* what panels was packed from */
  /* gemm_prepack_other's object */
  void *other;
  const void *other_key;
  size_t other_bytes;
  void (*other_free)(void *);
};

static _Atomic size_t prepack_total; /* bytes held by all slots */
static size_t prepack_budget;        /* bytes; 0: prepacking off */
static pthread_once_t prepack_once = PTHREAD_ONCE_INIT;

static void prepack_init(void) {
  const int64_t max_mb = ir_env_int("RLX_PREPACK_MAX_MB", 1024);
  prepack_budget = !ir_env_flag("RLX_PREPACK", 1) ? 0 : max_mb > 0 ? (size_t)max_mb << 20 : 0;
}

gemm_prepack *gemm_prepack_new(void) { return calloc(1, sizeof(gemm_prepack)); }

void gemm_prepack_reset(gemm_prepack *p) {
  if (!p) return;
  if (p->panels) atomic_fetch_sub(&prepack_total, p->floats * sizeof(float));
  huge_free(p->panels, p->floats * sizeof(float));
  if (p->other) {
    atomic_fetch_sub(&prepack_total, p->other_bytes);
    p->other_free(p->other);
  }
  memset(p, 0, sizeof *p);
}

void gemm_prepack_free(gemm_prepack *p) {
  gemm_prepack_reset(p);
  free(p);
}

size_t gemm_prepack_bytes(const gemm_prepack *p) {
  if (!p) return 0;
  return (p->panels ? p->floats * sizeof(float) : 0) + (p->other ? p->other_bytes : 0);
}

void *gemm_prepack_other(const gemm_prepack *p, const void *key) {
  return p && p->other && p->other_key == key ? p->other : NULL;
}

void gemm_prepack_set_other(gemm_prepack *p, const void *key, void *obj, size_t bytes,
                            void (*free_fn)(void *)) {
  gemm_prepack_reset(p);
  p->other = obj;
  p->other_key = key;
  p->other_bytes = bytes;
  p->other_free = free_fn;
  atomic_fetch_add(&prepack_total, bytes);
}

size_t gemm_prepack_total_bytes(void) { return atomic_load(&prepack_total); }

static int key_eq(const gemm_prepack_key *a, const gemm_prepack_key *b) {
  return a->isa == b->isa && a->data == b->data && a->dtype == b->dtype && a->trans == b->trans &&
         a->is_a == b->is_a && a->ld == b->ld && a->K == b->K && a->N == b->N;
}

int gemm_prepack_lookup(gemm_prepack *p, const gemm_prepack_key *key, const float **panels) {
  if (!p->tried || !key_eq(&p->key, key)) return 0;
  *panels = p->panels;
  return 1;
}

float *gemm_prepack_claim(gemm_prepack *p, const gemm_prepack_key *key, size_t floats) {
  pthread_once(&prepack_once, prepack_init);
  if (!prepack_budget) return NULL; /* off: the slot untouched (it may hold an other object) */
  gemm_prepack_reset(p);
  p->tried = 1;
  p->key = *key;
  const size_t bytes = floats * sizeof(float);
  if (atomic_fetch_add(&prepack_total, bytes) + bytes > prepack_budget) {
    atomic_fetch_sub(&prepack_total, bytes);
    return NULL;
  }
  if (!(p->panels = huge_alloc(bytes))) {
    atomic_fetch_sub(&prepack_total, bytes);
    return NULL;
  }
  p->floats = floats;
  return p->panels;
}

void gemm_prepack_unclaim(gemm_prepack *p) {
  if (!p->panels) return;
  atomic_fetch_sub(&prepack_total, p->floats * sizeof(float));
  huge_free(p->panels, p->floats * sizeof(float));
  p->panels = NULL;
  p->floats = 0;
}
