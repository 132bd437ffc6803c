/* deferred.c — sessions whose graph depends on the contents of some inputs.
 *
 * An imported model may need the values of an input to build its graph at
 * all: a Reshape's shape, a Slice's starts, the axes of a reduction given
 * as graph inputs ("value inputs"). Such a session holds no graph until
 * the first run: it keeps a host copy of each input, and at rlx_run asks
 * the builder for a session of the graph made with those contents as
 * constants. The builder says which inputs it read as values; the inner
 * session is kept with a copy of their contents and reused by every later
 * run whose value inputs hold the same bytes (at most DEFERRED_MAX sets,
 * the least recently run dropped first), as plans are kept per binding of
 * symbolic dims. An input whose dims alone the builder read (a symbolic
 * dim that a Range's limit is computed from) keys the entry by its dims
 * and is handed to the inner session like the others, which are handed
 * to it when they changed since it last ran.
 */
#include "runtime.h"

#include <stdlib.h>
#include <string.h>

#define DEFERRED_MAX 8

typedef struct {
  rlx_session *s;
  unsigned char *used;    /* [n_inputs]: read by the builder (RT_USED_*) */
  rt_input *values;       /* [n_inputs]: copies of the used inputs (of the dims alone for RT_USED_DIMS) */
  uint64_t *fed;          /* [n_inputs]: version of each other input s holds */
  uint64_t last_run;
} deferred_entry;

struct rt_deferred {
  rt_deferred_spec spec;
  rlx_options opt;
  rt_input *in;           /* [n_inputs]: the latest set of each input (data NULL: never set) */
  uint64_t *version;      /* [n_inputs] */
  uint64_t clock;
  deferred_entry entries[DEFERRED_MAX];
  int n_entries;
  int current;            /* entry of the last run, -1 before */
};

static void free_input(rt_input *x) {
  free((void *)x->data);
  *x = (rt_input){0};
}

static void free_entry(const rt_deferred *d, deferred_entry *e) {
  rlx_session_free(e->s);
  for (int i = 0; e->values && i < d->spec.n_inputs; i++) free_input(&e->values[i]);
  free(e->values);
  free(e->used);
  free(e->fed);
  *e = (deferred_entry){0};
}

rt_deferred *rt_deferred_new(const rt_deferred_spec *spec, const rlx_options *opt) {
  rt_deferred *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->spec = *spec;
  d->opt = *opt;
  d->current = -1;
  d->in = calloc((size_t)spec->n_inputs + 1, sizeof *d->in);
  d->version = calloc((size_t)spec->n_inputs + 1, sizeof *d->version);
  if (!d->in || !d->version) {
    rt_deferred_free(d);
    return NULL;
  }
  return d;
}

void rt_deferred_free(rt_deferred *d) {
  if (!d) return;
  for (int k = 0; k < d->n_entries; k++) free_entry(d, &d->entries[k]);
  for (int i = 0; d->in && i < d->spec.n_inputs; i++) free_input(&d->in[i]);
  free(d->in);
  free(d->version);
  free(d);
}

int rt_deferred_num_outputs(const rt_deferred *d) { return d->spec.n_outputs; }

rlx_session *rt_deferred_current(const rt_deferred *d) {
  return d->current >= 0 ? d->entries[d->current].s : NULL;
}

/* A copy of data (nbytes, may be 0) with its shape; rank -1: no shape given. */
static rlx_status copy_input(rt_input *dst, const void *data, size_t nbytes, int rank, const int64_t *dims,
                             const char *fn) {
  void *p = malloc(nbytes ? nbytes : 1);
  if (!p) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", fn);
  if (nbytes) memcpy(p, data, nbytes);
  free((void *)dst->data);
  dst->data = p;
  dst->nbytes = nbytes;
  dst->rank = rank;
  for (int k = 0; k < rank; k++) dst->dims[k] = dims[k];
  return RLX_OK;
}

rlx_status rt_deferred_set_input(rt_deferred *d, const char *name, const void *data, size_t nbytes, int rank,
                                 const int64_t *dims) {
  const char *fn = rank < 0 ? "rlx_set_input" : "rlx_set_input_shaped";
  if (!name) return rlx_set_error(RLX_ERR_INVALID, "%s: name is NULL", fn);
  if (nbytes && !data) return rlx_set_error(RLX_ERR_INVALID, "%s: \"%s\": data is NULL", fn, name);
  if (rank > RLX_MAX_RANK || (rank > 0 && !dims))
    return rlx_set_error(RLX_ERR_SHAPE, "%s: \"%s\": rank %d (at most %d, with dims)", fn, name, rank, RLX_MAX_RANK);
  for (int k = 0; k < rank; k++)
    if (dims[k] < 0) return rlx_set_error(RLX_ERR_SHAPE, "%s: \"%s\": dim %d is %lld", fn, name, k, (long long)dims[k]);
  for (int i = 0; i < d->spec.n_inputs; i++) {
    if (strcmp(d->spec.names[i], name)) continue;
    rlx_status st = copy_input(&d->in[i], data, nbytes, rank, dims, fn);
    if (!st) d->version[i] = ++d->clock;
    return st;
  }
  return rlx_set_error(RLX_ERR_INVALID, "%s: the model has no input named \"%s\"", fn, name);
}

static int same_input(const rt_input *a, const rt_input *b, int used) {
  if (!a->data || !b->data || a->rank != b->rank) return 0;
  for (int k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return 0;
  if (used == RT_USED_DIMS) return 1;
  return a->nbytes == b->nbytes && (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
}

/* The entry whose value inputs hold what the inputs hold now, or -1. */
static int find_entry(const rt_deferred *d) {
  for (int k = 0; k < d->n_entries; k++) {
    const deferred_entry *e = &d->entries[k];
    int ok = 1;
    for (int i = 0; ok && i < d->spec.n_inputs; i++)
      if (e->used[i] && !same_input(&e->values[i], &d->in[i], e->used[i])) ok = 0;
    if (ok) return k;
  }
  return -1;
}

/* A new entry from the builder; the least recently run one makes room. */
static rlx_status build_entry(rt_deferred *d, int *out) {
  const int n = d->spec.n_inputs;
  deferred_entry e = {0};
  e.used = calloc((size_t)n + 1, 1);
  e.values = calloc((size_t)n + 1, sizeof *e.values);
  e.fed = calloc((size_t)n + 1, sizeof *e.fed);
  if (!e.used || !e.values || !e.fed) {
    free_entry(d, &e);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_run: out of memory");
  }
  rlx_status st = d->spec.build(d->spec.ctx, &d->opt, d->in, e.used, &e.s);
  for (int i = 0; st == RLX_OK && i < n; i++)
    if (e.used[i]) {
      if (!d->in[i].data) st = rlx_set_error(RLX_ERR_INTERNAL, "rlx_run: input \"%s\" read as a value but never set",
                                             d->spec.names[i]);
      else st = copy_input(&e.values[i], d->in[i].data, e.used[i] == RT_USED_DIMS ? 0 : d->in[i].nbytes,
                           d->in[i].rank, d->in[i].dims, "rlx_run");
    }
  if (st) {
    free_entry(d, &e);
    return st;
  }
  int k = d->n_entries;
  if (k == DEFERRED_MAX) {
    k = 0;
    for (int j = 1; j < d->n_entries; j++)
      if (d->entries[j].last_run < d->entries[k].last_run) k = j;
    free_entry(d, &d->entries[k]);
    if (d->current == k) d->current = -1;
  } else {
    d->n_entries++;
  }
  d->entries[k] = e;
  *out = k;
  return RLX_OK;
}

rlx_status rt_deferred_run(rt_deferred *d) {
  int k = find_entry(d);
  rlx_status st = k >= 0 ? RLX_OK : build_entry(d, &k);
  if (st) return st;
  deferred_entry *e = &d->entries[k];
  for (int i = 0; i < d->spec.n_inputs; i++) {
    if (e->used[i] == RT_USED_CONTENTS || e->fed[i] == d->version[i]) continue;
    const rt_input *x = &d->in[i];
    if (!x->data) return rlx_set_error(RLX_ERR_INVALID, "rlx_run: input \"%s\" was never set", d->spec.names[i]);
    st = x->rank < 0 ? rlx_set_input(e->s, d->spec.names[i], x->data, x->nbytes)
                     : rlx_set_input_shaped(e->s, d->spec.names[i], x->data, x->nbytes, x->rank, x->dims);
    if (st) return st;
    e->fed[i] = d->version[i];
  }
  d->current = -1;
  if ((st = rlx_run(e->s))) return st;
  d->current = k;
  e->last_run = ++d->clock;
  return RLX_OK;
}
