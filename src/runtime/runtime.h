/* runtime.h — what the runtime's files share: the compiled graphs of the
 * compile cache, the plans sessions hold, the constant-folding evaluator
 * and the dispatch report. Internal; the public face is rlx.h. */
#ifndef RLX_RUNTIME_H
#define RLX_RUNTIME_H

#include "../backend/backend.h"
#include "../pass/pass.h"

/* session_store.c: the param store of a session (backend.h store_new),
 * which all its plans share; the session and each plan hold a reference,
 * and the session that uses it claims it (one live session per store). */
typedef struct rt_store rt_store;
/* A new store of backend b (on device device_index), held and claimed; *out NULL (and RLX_OK) when
 * b keeps no store. */
rlx_status rt_store_new(const rlx_backend *b, int device_index, rt_store **out);
void *rt_store_data(const rt_store *s);   /* the backend's store; NULL for NULL */
void rt_store_retain(rt_store *s);
void rt_store_release(rt_store *s);       /* the last reference frees it */
/* May a plan of store `theirs` join the session of store *mine? 1 if it is
 * the same store, or if *mine is NULL and no live session claims theirs:
 * then the session claims and holds it (*mine = theirs). */
int rt_store_adopt(rt_store **mine, rt_store *theirs);
void rt_store_unclaim(rt_store *s);       /* its session is freed */

/* One plan of a session: the graph specialized to a shape binding, and the
 * backend's plan of it. */
typedef struct {
  int64_t *binding;       /* [n_syms of the compiled graph] */
  rlx_graph *g;           /* specialized graph (the plan refers to it) */
  void *plan;
  rt_store *store;        /* held: the store the plan keeps its params in, or NULL */
} rt_plan;

void rt_plan_free(const rlx_backend *b, rt_plan *p);

/* What a compiled graph and its plans depend on besides the graph: the
 * backend, the passes on, and the environment switches the passes and
 * backends read (every RLX_* variable but those that only print). */
typedef struct {
  const rlx_backend *backend;
  int fuse, optimize, decompose_fused;
  uint64_t env;           /* rt_env_fingerprint() */
} rt_compile_key;

/* A user graph compiled with a key: the pipeline's output and its dispatch
 * report. Immutable once made and shared by every session of that graph;
 * a session holds a reference. */
typedef struct rt_compiled rt_compiled;
const rlx_graph *rt_compiled_graph(const rt_compiled *c);
const pass_dispatch_count *rt_compiled_dispatch(const rt_compiled *c);

/* compile_cache.c */
/* The compiled form of g under key, held, or NULL when the cache has none
 * (or is off). */
rt_compiled *rt_cache_lookup(const rlx_graph *g, const rt_compile_key *key);
/* Wraps the pipeline's output `opt` (taken) for user graph g and key, held;
 * in the cache when `cacheable` and the cache is on (if another thread
 * cached the same graph meanwhile, that one is returned and opt freed).
 * NULL on NOMEM. */
rt_compiled *rt_compiled_new(const rlx_graph *g, const rt_compile_key *key, rlx_graph *opt,
                             const pass_dispatch_count *dispatch, int cacheable);
void rt_compiled_release(rt_compiled *c);
/* An idle plan of c for binding, o's threads and device index, whose
 * store the session of *store may use (rt_store_adopt), moved into *out:
 * 1, else 0. */
int  rt_cache_take_plan(rt_compiled *c, const int64_t *binding, const rlx_options *o, rt_store **store, rt_plan *out);
/* Hands a session's plan back: kept idle for the next session of c when
 * the cache has room, else freed. *p is emptied either way. */
void rt_cache_put_plan(rt_compiled *c, const rlx_options *o, rt_plan *p);
/* A hash of the RLX_* environment variables that can change what rlx_compile
 * makes (RLX_PLAN_NO_REUSE, RLX_THREADS, ...): all but RLX_TRACE, RLX_DUMP,
 * RLX_DISPATCH_REPORT and RLX_COMPILE_CACHE. */
uint64_t rt_env_fingerprint(void);

/* const_eval.c: pass_eval_fn for constant folding, ctx the backend to run on. */
rlx_status rt_const_eval(void *backend, const rlx_graph *g, rlx_node n, const void *const *inputs,
                         void *const *outputs);

/* deferred.c: a session whose graph is built at the first run from the
 * contents of some inputs (a model's value inputs), one inner session per
 * distinct set of those contents. */
typedef struct {
  const void *data;       /* NULL: never set */
  size_t nbytes;
  int rank;               /* -1: set without a shape (rlx_set_input) */
  int64_t dims[RLX_MAX_RANK];
} rt_input;
enum { RT_USED_CONTENTS = 1, RT_USED_DIMS = 2 };
typedef struct {
  void *ctx;
  /* A session for inputs[] (n_inputs, in the order of names); sets used[i]
   * to RT_USED_CONTENTS for each input whose contents it read (those are
   * not handed to it), RT_USED_DIMS for each whose dims alone it read. */
  rlx_status (*build)(void *ctx, const rlx_options *opt, const rt_input *inputs, unsigned char *used,
                      rlx_session **out);
  int n_inputs;
  const char *const *names;   /* borrowed: must outlive the session */
  int n_outputs;
} rt_deferred_spec;
typedef struct rt_deferred rt_deferred;
rt_deferred  *rt_deferred_new(const rt_deferred_spec *spec, const rlx_options *opt);   /* NULL on NOMEM */
void          rt_deferred_free(rt_deferred *d);
rlx_status    rt_deferred_set_input(rt_deferred *d, const char *name, const void *data, size_t nbytes, int rank,
                                    const int64_t *dims);
rlx_status    rt_deferred_run(rt_deferred *d);
int           rt_deferred_num_outputs(const rt_deferred *d);
rlx_session  *rt_deferred_current(const rt_deferred *d);   /* the inner session of the last run, or NULL */
/* session.c: a session over d (taken: freed with the session). */
rlx_status    rt_session_deferred(rt_deferred *d, rlx_session **out);
/* session.c: puts into s's store what its plans' first runs would make of
 * its params as set now (backend.h prepare), so that work is done at load;
 * RLX_OK with nothing done where the backend has no such step. */
rlx_status    rt_session_prepare(rlx_session *s);

/* device.c: the device backend compiled into this build (NULL: none),
 * whether a device is present for it, and how many. */
const rlx_backend *rlx_device_backend(void);
int rlx_device_available(void);
int rlx_device_count(void);
/* RLX_DEVICE's device and index where it names one (cpu, cuda, cuda:N): 1;
 * unset, auto or anything else: 0 (the request stands). */
int rt_env_device(rlx_device *device, int *index);

/* dispatch_report.c: the table RLX_DISPATCH_REPORT=1 prints after compile. */
void rt_dispatch_report(const char *graph, const char *backend, const pass_dispatch_count *counts,
                        int from_cache);

#endif /* RLX_RUNTIME_H */
