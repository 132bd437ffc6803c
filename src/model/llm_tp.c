/* llm_tp.c — what tensor parallelism adds to the decoder (llama.c builds
 * each rank's graph): a weight's slice for a rank, the ranks'
 * communicators, and a run of every rank at once. */
#include "model.h"

#include "../ir/ir.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rlx_status llm_tp_split(rlx_file_tensor *t, int axis, int64_t begin, int64_t len, void **copy) {
  *copy = NULL;
  const int64_t rows = t->rank == 2 ? t->dims[0] : 1, cols = t->dims[t->rank - 1];
  if (t->rank == 1 || axis == 0) {
    /* rows (or a vector's elements): a view into the mapping */
    const int64_t n = t->rank == 1 ? cols : rows;
    const size_t unit = t->nbytes / (size_t)n;
    t->data = (const uint8_t *)t->data + (size_t)begin * unit;
    t->offset += (uint64_t)begin * unit;
    t->dims[0] = len;
    t->nbytes = (size_t)len * unit;
    t->numel = t->rank == 1 ? len : len * cols;
    return RLX_OK;
  }
  /* columns: each row's slice, gathered into a copy */
  const int64_t block = ir_dtypes[t->dtype].block;
  if (begin % block || len % block)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: tensor parallelism splits %s's %lld columns at %lld "
                         "(%lld each); its type %s stores rows in blocks of %lld values, so a split must fall on a "
                         "block boundary (fewer ranks, or a file of another type)", t->name, (long long)cols,
                         (long long)begin, (long long)len, t->type_name, (long long)block);
  const size_t row_bytes = t->nbytes / (size_t)rows, off = rlx_dtype_nbytes(t->dtype, begin),
               part = rlx_dtype_nbytes(t->dtype, len);
  uint8_t *buf = malloc((size_t)rows * part);
  if (!buf) return rlx_set_error(RLX_ERR_NOMEM, "rlx_llm_load: out of memory splitting %s", t->name);
  for (int64_t i = 0; i < rows; i++) memcpy(buf + (size_t)i * part, (const uint8_t *)t->data + (size_t)i * row_bytes + off, part);
  t->data = buf;
  t->dims[1] = len;
  t->nbytes = (size_t)rows * part;
  t->numel = rows * len;
  *copy = buf;
  return RLX_OK;
}

rlx_status llm_tp_comms(const rlx_llm_options *o, int tp, rlx_comm **comms) {
  const int cuda = rlx_compile_device(o->compile.device) == RLX_DEVICE_CUDA;
  /* the first GPU: RLX_DEVICE's cuda:N where it says one, as rlx_compile takes it */
  int first = o->compile.device_index, env_index;
  rlx_device env;
  const char *text = getenv("RLX_DEVICE");
  if (text && rlx_device_parse(text, &env, &env_index) == RLX_OK && env == RLX_DEVICE_CUDA) first = env_index;
  if (o->world > 1) {
    if (!cuda)
      return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: ranks in several processes sum over NCCL: they need "
                           "device cuda (rank %d of %d asked for the CPU)", o->rank, o->world);
    return rlx_comm_new_nccl_rank(o->rank, o->world, o->master, first, 0, comms);
  }
  return cuda ? rlx_comm_new_nccl_local(tp, first, comms) : rlx_comm_new_local(tp, comms);
}

/* The threads of ranks 1..n-1, kept for the decoder's life: a decode step
 * wakes them instead of starting threads. */
typedef struct {
  llm_tp_pool *pool;
  int rank;
  pthread_t th;
  rlx_status st;
  char err[512];
} rank_thread;

struct llm_tp_pool {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  int n, started, pending, quit;
  unsigned long job;       /* jobs handed out: every worker runs each once */
  llm_rank_fn fn;
  void *arg;
  rlx_comm **comms;
  rank_thread *t;          /* [n]: t[0] is the caller's */
};

static void run_rank(rank_thread *t) {
  llm_tp_pool *p = t->pool;
  t->st = p->fn(p->arg, t->rank);
  if (t->st) {
    snprintf(t->err, sizeof t->err, "%s", rlx_last_error());
    rlx_comm_abort(p->comms[t->rank]); /* the other ranks would wait for this one */
  }
}

static void *worker(void *arg) {
  rank_thread *t = arg;
  llm_tp_pool *p = t->pool;
  unsigned long seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->quit && p->job == seen) pthread_cond_wait(&p->go, &p->mu);
    if (p->quit) break;
    seen = p->job;
    pthread_mutex_unlock(&p->mu);
    run_rank(t);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

void llm_tp_pool_free(llm_tp_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->quit = 1;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (int r = 1; r < p->started; r++) pthread_join(p->t[r].th, NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->go);
  pthread_cond_destroy(&p->done);
  free(p->t);
  free(p);
}

static rlx_status pool_new(int n, rlx_comm **comms, llm_tp_pool **out) {
  llm_tp_pool *p = calloc(1, sizeof *p);
  if (!p || !(p->t = calloc((size_t)n, sizeof *p->t))) {
    free(p);
    return rlx_set_error(RLX_ERR_NOMEM, "tensor parallel run: out of memory");
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->go, NULL);
  pthread_cond_init(&p->done, NULL);
  p->n = n;
  p->comms = comms;
  p->started = 1;
  for (int r = 0; r < n; r++) p->t[r].pool = p, p->t[r].rank = r;
  for (int r = 1; r < n; r++, p->started++)
    if (pthread_create(&p->t[r].th, NULL, worker, &p->t[r])) {
      llm_tp_pool_free(p);
      return rlx_set_error(RLX_ERR_NOMEM, "tensor parallel run: cannot start the thread of rank %d", r);
    }
  *out = p;
  return RLX_OK;
}

rlx_status llm_tp_each(llm_tp_pool **pool, int n, rlx_comm **comms, llm_rank_fn fn, void *arg) {
  rlx_status st = *pool ? RLX_OK : pool_new(n, comms, pool);
  if (st) return st;
  llm_tp_pool *p = *pool;
  pthread_mutex_lock(&p->mu);
  p->fn = fn, p->arg = arg;
  p->pending = n - 1;
  p->job++;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  run_rank(&p->t[0]);
  pthread_mutex_lock(&p->mu);
  while (p->pending) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  /* the first rank that failed of its own: an abort's victims only echo it */
  for (int pass = 0; pass < 2 && !st; pass++)
    for (int r = 0; r < n && !st; r++)
      if (p->t[r].st && (pass || !strstr(p->t[r].err, "aborted")))
        st = rlx_set_error(p->t[r].st, "rank %d of %d: %s", r, n, p->t[r].err);
  return st;
}
