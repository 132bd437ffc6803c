/* compile_cache.c — the process-wide compile cache (see rlx.h).
 *
 * An entry is a compiled graph (rt_compiled): a copy of the user graph it
 * was made from (the key, compared in full: a hash only picks candidates),
 * the compile key (backend, passes on), the pipeline's output that every
 * session of the graph shares, its dispatch report, and the idle plans of
 * freed sessions. A plan cannot be shared by two live sessions — it owns
 * the arena a run writes — so a session takes an idle plan over (keyed by
 * shape binding and thread count) and hands it back when it is freed.
 *
 * The key includes a fingerprint of the RLX_* environment, since backends
 * read switches at compile time (RLX_PLAN_NO_REUSE, RLX_THREADS, ...): a
 * plan made under other switches is another plan.
 *
 * Bounds: RT_DEFAULT_ENTRIES graphs (RLX_COMPILE_CACHE=N) holding at most
 * RT_GRAPH_MAX_BYTES of constants, least recently used evicted first; a
 * graph with more constants than that is not cached; RT_IDLE_MAX_BYTES of idle plans over all
 * entries and RT_IDLE_PER_GRAPH idle plans per graph, oldest dropped first.
 * An idle plan's bytes are its arena and the packed weights it holds: those
 * count against the backend's process-wide packing budget, and idle plans
 * holding them without bound would leave a live session's weights
 * unpacked.
 * An entry evicted while sessions hold it lives until the last one lets go.
 * One mutex guards the table, the reference counts and the idle plans. */
#include "runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

extern char **environ; /* POSIX */

#define RT_DEFAULT_ENTRIES 64
#define RT_MAX_ENTRIES (1 << 16)
#define RT_IDLE_PER_GRAPH 4
#define RT_IDLE_MAX_BYTES ((size_t)256 << 20)
#define RT_GRAPH_MAX_BYTES ((size_t)256 << 20) /* constants of the graphs held */

typedef struct {
  rt_plan p;
  int threads, device_index; /* the rlx_options it was made for */
  unsigned flags;             /* the math modes its kernels chose by (RLX_FLAG_BF16_MATH) */
  const rlx_comm *comm;       /* a plan sums over its communicator: never another rank's */
  size_t bytes;       /* the plan's arena and packed weights */
  uint64_t tick;      /* when it went idle */
} idle_plan;

struct rt_compiled {
  rlx_graph *user;    /* the user graph it was compiled from (NULL: never in the table) */
  uint64_t hash;
  rt_compile_key key;
  rlx_graph *opt;
  size_t bytes;       /* constant data held: the key graph's and opt's */
  pass_dispatch_count dispatch[RLX_OP_COUNT];
  int refs;           /* holders: sessions, and the table while in it */
  int in_table;
  uint64_t last_used;
  idle_plan idle[RT_IDLE_PER_GRAPH];
  int n_idle;
};

static struct {
  pthread_mutex_t mu;
  rt_compiled **entries;
  int n, cap;
  uint64_t tick;
  size_t idle_bytes, graph_bytes;
  int64_t lookups, hits, plans_reused, evictions;
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

const rlx_graph *rt_compiled_graph(const rt_compiled *c) { return c->opt; }
const pass_dispatch_count *rt_compiled_dispatch(const rt_compiled *c) { return c->dispatch; }

void rt_plan_free(const rlx_backend *b, rt_plan *p) {
  if (p->plan) b->free(p->plan);
  rt_store_release(p->store); /* after the plan, which gave its params back to it */
  rlx_graph_free(p->g);
  free(p->binding);
  memset(p, 0, sizeof *p);
}

uint64_t rt_env_fingerprint(void) {
  static const char *const print_only[] = {"RLX_TRACE=", "RLX_DUMP=", "RLX_DISPATCH_REPORT=", "RLX_COMPILE_CACHE=", NULL};
  uint64_t h = PASS_HASH_SEED;
  for (char **e = environ; *e; e++) {
    if (strncmp(*e, "RLX_", 4)) continue;
    int skip = 0;
    for (int i = 0; print_only[i] && !skip; i++) skip = !strncmp(*e, print_only[i], strlen(print_only[i]));
    /* order-independent: the environment's order is not the settings' */
    if (!skip) h ^= pass_hash_bytes(PASS_HASH_SEED, *e, strlen(*e)) * 0x9e3779b97f4a7c15ull;
  }
  return h;
}

/* Graphs the cache may hold now: RLX_COMPILE_CACHE, default RT_DEFAULT_ENTRIES. */
static int capacity(void) {
  const int64_t n = ir_env_int("RLX_COMPILE_CACHE", RT_DEFAULT_ENTRIES);
  return n <= 0 ? 0 : n > RT_MAX_ENTRIES ? RT_MAX_ENTRIES : (int)n;
}

/* ---------------------------------------------------------------- graph identity */

static uint64_t graph_hash(const rlx_graph *g) {
  uint64_t h = pass_hash_bytes(PASS_HASH_SEED, g->name, strlen(g->name) + 1);
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    int head[] = {n->op, n->n_in, n->n_out};
    h = pass_hash_bytes(h, head, sizeof head);
    h = pass_hash_bytes(h, n->in, (size_t)n->n_in * sizeof *n->in);
    for (int o = 0; o < n->n_out; o++) h = pass_type_hash(h, &n->out[o]);
    h = pass_attrs_hash(n->op, &n->a, h);
  }
  h = pass_hash_bytes(h, g->outputs, (size_t)g->n_outputs * sizeof *g->outputs);
  for (int i = 0; i < g->n_syms; i++)
    h = g->syms[i].name ? pass_hash_bytes(h, g->syms[i].name, strlen(g->syms[i].name) + 1)
                        : pass_hash_bytes(h, "", 1);
  return h;
}

static int types_same(const ir_type *a, const ir_type *b) {
  return a->dtype == b->dtype && a->shape.rank == b->shape.rank &&
         memcmp(a->shape.d, b->shape.d, (size_t)a->shape.rank * sizeof a->shape.d[0]) == 0;
}

/* Equal as graphs: every node, type, attribute and constant byte, the
 * outputs, the symbol names and the graph's name. */
static int graphs_same(const rlx_graph *a, const rlx_graph *b) {
  if (strcmp(a->name, b->name) || a->n_nodes != b->n_nodes || a->n_outputs != b->n_outputs ||
      a->n_syms != b->n_syms)
    return 0;
  for (int i = 0; i < a->n_nodes; i++) {
    const ir_node *x = &a->nodes[i], *y = &b->nodes[i];
    if (x->op != y->op || x->n_in != y->n_in || x->n_out != y->n_out ||
        (x->n_in && memcmp(x->in, y->in, (size_t)x->n_in * sizeof *x->in)))
      return 0;
    for (int o = 0; o < x->n_out; o++)
      if (!types_same(&x->out[o], &y->out[o])) return 0;
    if (!pass_attrs_equal(x->op, &x->a, &y->a)) return 0;
  }
  if (a->n_outputs && memcmp(a->outputs, b->outputs, (size_t)a->n_outputs * sizeof *a->outputs)) return 0;
  for (int i = 0; i < a->n_syms; i++) {
    const char *x = a->syms[i].name, *y = b->syms[i].name;
    if ((x == NULL) != (y == NULL) || (x && strcmp(x, y))) return 0;
  }
  return 1;
}

static size_t constant_bytes(const rlx_graph *g) {
  size_t n = 0;
  for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].a.data.n;
  return n;
}

static int keys_same(const rt_compile_key *a, const rt_compile_key *b) {
  return a->backend == b->backend && a->fuse == b->fuse && a->optimize == b->optimize &&
         a->decompose_fused == b->decompose_fused && a->env == b->env;
}

/* ---------------------------------------------------------------- entries (cache.mu held) */

static void compiled_free(rt_compiled *c) {
  for (int i = 0; i < c->n_idle; i++) rt_plan_free(c->key.backend, &c->idle[i].p);
  rlx_graph_free(c->user);
  rlx_graph_free(c->opt);
  free(c);
}

static void drop_idle(rt_compiled *c, int i) {
  cache.idle_bytes -= c->idle[i].bytes;
  rt_plan_free(c->key.backend, &c->idle[i].p);
  c->idle[i] = c->idle[--c->n_idle];
}

static void unref(rt_compiled *c) {
  if (--c->refs == 0) compiled_free(c);
}

/* Takes entry i out of the table; its idle plans go now, the rest when
 * its last session lets go. */
static void remove_entry(int i) {
  rt_compiled *c = cache.entries[i];
  while (c->n_idle) drop_idle(c, c->n_idle - 1);
  c->in_table = 0;
  cache.graph_bytes -= c->bytes;
  cache.entries[i] = cache.entries[--cache.n];
  unref(c);
}

static rt_compiled *find(const rlx_graph *g, uint64_t hash, const rt_compile_key *key) {
  for (int i = 0; i < cache.n; i++) {
    rt_compiled *c = cache.entries[i];
    if (c->hash == hash && keys_same(&c->key, key) && graphs_same(c->user, g)) return c;
  }
  return NULL;
}

/* ---------------------------------------------------------------- the interface */

rt_compiled *rt_cache_lookup(const rlx_graph *g, const rt_compile_key *key) {
  if (capacity() == 0) return NULL;
  uint64_t hash = graph_hash(g);
  pthread_mutex_lock(&cache.mu);
  cache.lookups++;
  rt_compiled *c = find(g, hash, key);
  if (c) {
    c->refs++;
    c->last_used = ++cache.tick;
    cache.hits++;
  }
  pthread_mutex_unlock(&cache.mu);
  return c;
}

rt_compiled *rt_compiled_new(const rlx_graph *g, const rt_compile_key *key, rlx_graph *opt,
                             const pass_dispatch_count *dispatch, int cacheable) {
  rt_compiled *c = calloc(1, sizeof *c);
  if (!c) {
    rlx_graph_free(opt);
    rlx_set_error(RLX_ERR_NOMEM, "rlx_compile: out of memory");
    return NULL;
  }
  c->key = *key;
  c->opt = opt;
  c->refs = 1;
  memcpy(c->dispatch, dispatch, sizeof c->dispatch);
  int cap = cacheable ? capacity() : 0;
  c->bytes = constant_bytes(g) + constant_bytes(opt);
  /* Without a copy of the key graph it simply is not cached. */
  if (cap == 0 || c->bytes > RT_GRAPH_MAX_BYTES || !(c->user = ir_graph_clone(g))) return c;
  c->hash = graph_hash(g);
  pthread_mutex_lock(&cache.mu);
  rt_compiled *other = find(g, c->hash, key);
  if (other) { /* compiled by another thread meanwhile */
    other->refs++;
    other->last_used = ++cache.tick;
    pthread_mutex_unlock(&cache.mu);
    compiled_free(c);
    return other;
  }
  while (cache.n >= cap || cache.graph_bytes + c->bytes > RT_GRAPH_MAX_BYTES) {
    int lru = 0;
    for (int i = 1; i < cache.n; i++)
      if (cache.entries[i]->last_used < cache.entries[lru]->last_used) lru = i;
    remove_entry(lru);
    cache.evictions++;
  }
  if (cache.n == cache.cap) {
    int ncap = cache.cap ? 2 * cache.cap : 16;
    rt_compiled **e = realloc(cache.entries, (size_t)ncap * sizeof *e);
    if (!e) {
      pthread_mutex_unlock(&cache.mu);
      return c; /* not cached */
    }
    cache.entries = e;
    cache.cap = ncap;
  }
  c->in_table = 1;
  c->refs++;
  cache.graph_bytes += c->bytes;
  c->last_used = ++cache.tick;
  cache.entries[cache.n++] = c;
  pthread_mutex_unlock(&cache.mu);
  return c;
}

void rt_compiled_release(rt_compiled *c) {
  if (!c) return;
  pthread_mutex_lock(&cache.mu);
  unref(c);
  pthread_mutex_unlock(&cache.mu);
}

static size_t binding_bytes(const rt_compiled *c) { return (size_t)c->opt->n_syms * sizeof(int64_t); }

int rt_cache_take_plan(rt_compiled *c, const int64_t *binding, const rlx_options *o, rt_store **store, rt_plan *out) {
  size_t bsz = binding_bytes(c);
  int found = 0;
  pthread_mutex_lock(&cache.mu);
  for (int i = 0; i < c->n_idle && !found; i++) {
    idle_plan *ip = &c->idle[i];
    if (ip->threads != o->threads || ip->device_index != o->device_index || ip->comm != o->comm ||
        ip->flags != o->flags || (bsz && memcmp(ip->p.binding, binding, bsz)) ||
        !rt_store_adopt(store, ip->p.store))
      continue;
    *out = ip->p;
    cache.idle_bytes -= ip->bytes;
    c->idle[i] = c->idle[--c->n_idle];
    cache.plans_reused++;
    found = 1;
  }
  pthread_mutex_unlock(&cache.mu);
  return found;
}

void rt_cache_put_plan(rt_compiled *c, const rlx_options *o, rt_plan *p) {
  const rlx_backend *b = c->key.backend;
  rlx_session_stats mem = {0};
  if (p->plan) b->memory_stats(p->plan, &mem);
  const size_t bytes = mem.arena_bytes + mem.packed_bytes;
  pthread_mutex_lock(&cache.mu);
  int keep = c->in_table && p->plan && capacity() > 0 && bytes <= RT_IDLE_MAX_BYTES;
  if (keep) {
    /* Room for it: drop the oldest idle plans (of this graph when it has
     * its share, else of any graph) until it fits. */
    for (;;) {
      int full = c->n_idle == RT_IDLE_PER_GRAPH;
      if (!full && cache.idle_bytes + bytes <= RT_IDLE_MAX_BYTES) break;
      rt_compiled *owner = NULL;
      int at = -1;
      for (int e = 0; e < cache.n; e++) {
        rt_compiled *x = cache.entries[e];
        if (full && x != c) continue;
        for (int i = 0; i < x->n_idle; i++)
          if (!owner || x->idle[i].tick < owner->idle[at].tick) owner = x, at = i;
      }
      if (!owner) break; /* cannot happen: idle_bytes > 0 or c is full means an idle plan exists */
      drop_idle(owner, at);
    }
    idle_plan *ip = &c->idle[c->n_idle++];
    ip->p = *p;
    ip->threads = o->threads, ip->device_index = o->device_index, ip->comm = o->comm, ip->flags = o->flags;
    ip->bytes = bytes;
    ip->tick = ++cache.tick;
    cache.idle_bytes += bytes;
    memset(p, 0, sizeof *p);
  }
  pthread_mutex_unlock(&cache.mu);
  if (!keep) rt_plan_free(b, p);
}

rlx_status rlx_compile_cache_get_stats(rlx_compile_cache_stats *out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_compile_cache_get_stats: out is NULL");
  pthread_mutex_lock(&cache.mu);
  out->lookups = cache.lookups;
  out->hits = cache.hits;
  out->plans_reused = cache.plans_reused;
  out->evictions = cache.evictions;
  out->entries = cache.n;
  out->capacity = capacity();
  out->idle_plan_bytes = cache.idle_bytes;
  out->graph_bytes = cache.graph_bytes;
  pthread_mutex_unlock(&cache.mu);
  return RLX_OK;
}

void rlx_compile_cache_clear(void) {
  pthread_mutex_lock(&cache.mu);
  while (cache.n) remove_entry(cache.n - 1);
  free(cache.entries);
  cache.entries = NULL;
  cache.cap = 0;
  pthread_mutex_unlock(&cache.mu);
}
