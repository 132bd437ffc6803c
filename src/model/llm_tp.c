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
  if (o->world > 1) {
    if (!cuda)
      return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_llm_load: ranks in several processes sum over NCCL: they need "
                           "device cuda (rank %d of %d asked for the CPU)", o->rank, o->world);
    return rlx_comm_new_nccl_rank(o->rank, o->world, o->master, o->compile.device_index, 0, comms);
  }
  return cuda ? rlx_comm_new_nccl_local(tp, o->compile.device_index, comms) : rlx_comm_new_local(tp, comms);
}

typedef struct {
  llm_rank_fn fn;
  void *arg;
  rlx_comm *comm;
  int rank;
  rlx_status st;
  char err[512];
} rank_call;

static void *rank_main(void *p) {
  rank_call *c = p;
  c->st = c->fn(c->arg, c->rank);
  if (c->st) {
    snprintf(c->err, sizeof c->err, "%s", rlx_last_error());
    rlx_comm_abort(c->comm); /* the other ranks would wait for this one */
  }
  return NULL;
}

rlx_status llm_tp_each(int n, rlx_comm **comms, llm_rank_fn fn, void *arg) {
  rank_call *calls = calloc((size_t)n, sizeof *calls);
  pthread_t *th = calloc((size_t)n, sizeof *th);
  if (!calls || !th) {
    free(calls), free(th);
    return rlx_set_error(RLX_ERR_NOMEM, "tensor parallel run: out of memory");
  }
  int started = 1;
  for (int r = 0; r < n; r++) calls[r] = (rank_call){fn, arg, comms[r], r, RLX_OK, ""};
  for (int r = 1; r < n; r++, started++)
    if (pthread_create(&th[r], NULL, rank_main, &calls[r])) {
      calls[r].st = rlx_set_error(RLX_ERR_NOMEM, "tensor parallel run: cannot start the thread of rank %d", r);
      snprintf(calls[r].err, sizeof calls[r].err, "%s", rlx_last_error());
      rlx_comm_abort(comms[r]);
      break;
    }
  rank_main(&calls[0]);
  for (int r = 1; r < started; r++) pthread_join(th[r], NULL);
  rlx_status st = RLX_OK;
  /* the first rank that failed of its own: an abort's victims only echo it */
  for (int pass = 0; pass < 2 && !st; pass++)
    for (int r = 0; r < n && !st; r++)
      if (calls[r].st && (pass || !strstr(calls[r].err, "aborted")))
        st = rlx_set_error(calls[r].st, "rank %d of %d: %s", r, n, calls[r].err);
  free(calls), free(th);
  return st;
}
