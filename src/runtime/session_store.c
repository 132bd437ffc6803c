/* session_store.c — a session's param store (runtime.h rt_store): the
 * backend's store (backend.h store_new) with a reference count and the mark
 * of the session that uses it.
 *
 * The session and each of its plans hold a reference: a plan handed to the
 * compile cache keeps its store's params alive until it is freed or taken
 * over. Only one live session may use a store — two would overwrite each
 * other's params — so a session claims the store it uses, and the cache
 * gives an idle plan only to the session of its store, or to a session
 * with no store yet when no live session claims that store. */
#include "runtime.h"

#include <pthread.h>
#include <stdlib.h>

struct rt_store {
  const rlx_backend *backend;
  void *data;        /* the backend's store */
  int refs;          /* the session and its plans, idle ones included */
  int claimed;       /* a live session uses it */
};

static pthread_mutex_t store_mu = PTHREAD_MUTEX_INITIALIZER;

rlx_status rt_store_new(const rlx_backend *b, int device_index, rt_store **out) {
  *out = NULL;
  if (!b->store_new) return RLX_OK;
  rt_store *s = calloc(1, sizeof *s);
  if (!s || !(s->data = b->store_new(device_index))) {
    free(s);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_run: out of memory (a param store)");
  }
  s->backend = b;
  s->refs = 1;
  s->claimed = 1;
  *out = s;
  return RLX_OK;
}

void *rt_store_data(const rt_store *s) { return s ? s->data : NULL; }

void rt_store_retain(rt_store *s) {
  if (!s) return;
  pthread_mutex_lock(&store_mu);
  s->refs++;
  pthread_mutex_unlock(&store_mu);
}

void rt_store_release(rt_store *s) {
  if (!s) return;
  pthread_mutex_lock(&store_mu);
  int last = --s->refs == 0;
  pthread_mutex_unlock(&store_mu);
  if (!last) return;
  s->backend->store_free(s->data);
  free(s);
}

int rt_store_adopt(rt_store **mine, rt_store *theirs) {
  if (theirs == *mine) return 1;
  if (*mine || !theirs) return 0;
  pthread_mutex_lock(&store_mu);
  int ok = !theirs->claimed;
  if (ok) {
    theirs->claimed = 1;
    theirs->refs++;
  }
  pthread_mutex_unlock(&store_mu);
  if (ok) *mine = theirs;
  return ok;
}

void rt_store_unclaim(rt_store *s) {
  if (!s) return;
  pthread_mutex_lock(&store_mu);
  s->claimed = 0;
  pthread_mutex_unlock(&store_mu);
}
