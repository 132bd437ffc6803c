/* comm_local.c — the communicator of ranks that are threads of one process
 * (comm.h): each rank posts its buffer, a barrier, every rank sums all the
 * buffers in rank order into its scratch, a barrier (nobody reads a buffer
 * any more), each copies its sum out. Every rank does the whole sum: the
 * same operations in the same order give the same bits on every rank. */
#include "comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct comm_group {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int world, arrived, refs, aborted;
  unsigned long generation;  /* barriers passed */
  const void **src;          /* [world] each rank's x of the current AllReduce */
  int64_t *n;                /* [world] */
  rlx_dtype *t;              /* [world] */
};

typedef struct {
  rlx_comm c;
  void *scratch;
  size_t scratch_bytes;
} local_comm;

int comm_dtype_ok(rlx_dtype t) {
  return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16 || t == RLX_F64 || t == RLX_I32 || t == RLX_I64;
}

rlx_status comm_local_new(int world, rlx_comm **comms) {
  comm_group *g = calloc(1, sizeof *g);
  int ok = g && (g->src = calloc((size_t)world, sizeof *g->src)) && (g->n = calloc((size_t)world, sizeof *g->n)) &&
           (g->t = calloc((size_t)world, sizeof *g->t));
  for (int r = 0; ok && r < world; r++) {
    local_comm *lc = calloc(1, sizeof *lc);
    if (!(ok = lc != NULL)) break;
    lc->c = (rlx_comm){COMM_LOCAL, r, world, g, NULL, -1, 0};
    comms[r] = &lc->c;
    g->refs++;
  }
  if (!ok) {
    for (int r = 0; g && r < g->refs; r++) free(comms[r]);
    if (g) free(g->src), free(g->n), free(g->t);
    free(g);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_comm_new_local: out of memory");
  }
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->world = world;
  return RLX_OK;
}

void comm_local_free(rlx_comm *c) {
  local_comm *lc = (local_comm *)c;
  comm_group *g = c->group;
  pthread_mutex_lock(&g->mu);
  int last = --g->refs == 0;
  pthread_mutex_unlock(&g->mu);
  if (last) {
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->src), free(g->n), free(g->t);
    free(g);
  }
  free(lc->scratch);
  free(lc);
}

void comm_local_abort(rlx_comm *c) {
  comm_group *g = c->group;
  pthread_mutex_lock(&g->mu);
  g->aborted = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* Waits until every rank has arrived; 0, or -1 once the group is aborted. */
static int barrier(comm_group *g) {
  pthread_mutex_lock(&g->mu);
  unsigned long gen = g->generation;
  if (!g->aborted && ++g->arrived == g->world) {
    g->arrived = 0;
    g->generation++;
    pthread_cond_broadcast(&g->cv);
  }
  while (!g->aborted && g->generation == gen) pthread_cond_wait(&g->cv, &g->mu);
  int st = g->aborted ? -1 : 0;
  pthread_mutex_unlock(&g->mu);
  return st;
}

static double get_f(const void *p, rlx_dtype t, int64_t i) {
  switch (t) {
  case RLX_F32: return ((const float *)p)[i];
  case RLX_F64: return ((const double *)p)[i];
  case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)p)[i]);
  default: return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
  }
}

static void sum_into(const comm_group *g, void *dst, int64_t n, rlx_dtype t) {
  if (t == RLX_I32 || t == RLX_I64) {
    for (int64_t i = 0; i < n; i++) {
      uint64_t acc = 0; /* wraps, as the integer's own addition would */
      for (int r = 0; r < g->world; r++)
        acc += t == RLX_I32 ? (uint64_t)(int64_t)((const int32_t *)g->src[r])[i] : (uint64_t)((const int64_t *)g->src[r])[i];
      if (t == RLX_I32) ((int32_t *)dst)[i] = (int32_t)(uint32_t)acc;
      else ((int64_t *)dst)[i] = (int64_t)acc;
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    double acc = 0;
    for (int r = 0; r < g->world; r++) acc += get_f(g->src[r], t, i);
    switch (t) {
    case RLX_F32: ((float *)dst)[i] = (float)acc; break;
    case RLX_F64: ((double *)dst)[i] = acc; break;
    case RLX_F16: ((uint16_t *)dst)[i] = rlx_f32_to_f16((float)acc); break;
    default: ((uint16_t *)dst)[i] = rlx_f32_to_bf16((float)acc); break;
    }
  }
}

rlx_status comm_local_all_reduce(rlx_comm *c, const void *x, void *y, int64_t n, rlx_dtype t) {
  local_comm *lc = (local_comm *)c;
  comm_group *g = c->group;
  const size_t bytes = rlx_dtype_nbytes(t, n);
  void *tmp = NULL;
  if (bytes > lc->scratch_bytes) {
    free(lc->scratch);
    lc->scratch_bytes = 0;
    if ((lc->scratch = malloc(bytes)) != NULL) lc->scratch_bytes = bytes;
  }
  tmp = lc->scratch;
  /* a rank without memory still takes part, or the others would wait for it */
  g->src[c->rank] = x;
  g->n[c->rank] = tmp || !bytes ? n : -1;
  g->t[c->rank] = t;
  if (barrier(g))
    return rlx_set_error(RLX_ERR_DEVICE, "AllReduce (rank %d of %d): the communicator was aborted (another rank "
                         "failed)", c->rank, c->world);
  int agree = 1, mem = 1;
  for (int r = 0; r < g->world; r++) {
    if (g->n[r] < 0) mem = 0;
    else if (g->n[r] != n || g->t[r] != t) agree = 0;
  }
  if (agree && mem && bytes) sum_into(g, tmp, n, t);
  if (barrier(g))
    return rlx_set_error(RLX_ERR_DEVICE, "AllReduce (rank %d of %d): the communicator was aborted (another rank "
                         "failed)", c->rank, c->world);
  if (!mem) return rlx_set_error(RLX_ERR_NOMEM, "AllReduce (rank %d of %d): out of memory", c->rank, c->world);
  if (!agree)
    return rlx_set_error(RLX_ERR_SHAPE, "AllReduce (rank %d of %d): the ranks' tensors differ (this rank: %lld "
                         "elements of %s)", c->rank, c->world, (long long)n, rlx_dtype_name(t));
  if (bytes) memcpy(y, tmp, bytes);
  return RLX_OK;
}
