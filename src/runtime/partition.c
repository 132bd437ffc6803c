/* partition.c — split a specialized graph into segments of one backend
 * each and run them in order (hybrid execution, partition.h).
 *
 * Assignment: every node the device backend claims goes to it, every
 * other node to the CPU (with RLX_TRACE=1 each declined node is printed
 * with its id, op and the backend's reason); a GetOutput stays with its
 * producer. Leaves belong to no segment: each segment that reads one gets
 * its own copy bound to the same host data.
 *
 * Order: the nodes are rescheduled in a topological order that keeps
 * taking ready nodes of the current backend before switching, which
 * merges independent runs of one backend and so cuts the number of
 * segments (and of device<->host copies) below what the node order gives.
 *
 * Cuts: a value made in one segment and read in a later one becomes an
 * output of its segment and an input leaf ("rlx.cut.<node>"; a param for a
 * block dtype, which inputs cannot have) of each segment that reads it; after its segment runs it is read into a host
 * staging buffer, which the readers bind (the device backend copies it in,
 * the CPU reads it in place). Each run gives the staged values new
 * versions, so a device segment copies them again. */
#include "partition.h"
#include "runtime.h"

#include "../pass/pass.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint_fast64_t leaf_versions;

uint64_t rlx_leaf_version_next(void) { return (uint64_t)atomic_fetch_add(&leaf_versions, 1) + 1; }

typedef struct {
  const rlx_backend *backend;
  rlx_graph *g;              /* the segment's graph: its nodes, leaf copies, cut inputs */
  void *plan;
  rlx_node *orig;            /* [g->n_nodes] original node of each segment node (cut inputs: the producer) */
  uint8_t *is_cut;           /* [g->n_nodes] a cut input */
  const void **leaf_data;    /* [g->n_nodes] bindings of the segment's leaves */
  uint64_t *leaf_version;
} segment;

typedef struct {
  const rlx_graph *g;
  segment *seg;
  int n_seg;
  int *seg_of;               /* [n_nodes] segment of each non-leaf node */
  rlx_node *local;           /* [n_nodes] its id in that segment's graph */
  int64_t fallback_nodes;    /* nodes of the CPU segments: the device's fallbacks */
  void **staged;             /* [n_nodes] host copy of a value read across a cut, NULL otherwise */
  size_t *staged_bytes;
} hybrid_plan;

static void hybrid_free(void *p) {
  hybrid_plan *h = p;
  if (!h) return;
  for (int i = 0; i < h->n_seg; i++) {
    segment *s = &h->seg[i];
    if (s->plan) s->backend->free(s->plan);
    rlx_graph_free(s->g);
    free(s->orig);
    free(s->is_cut);
    free((void *)s->leaf_data);
    free(s->leaf_version);
  }
  free(h->seg);
  if (h->staged)
    for (int i = 0; i < h->g->n_nodes; i++) free(h->staged[i]);
  free(h->staged);
  free(h->staged_bytes);
  free(h->seg_of);
  free(h->local);
  free(h);
}

static int is_leaf(const ir_node *n) { return ir_ops[n->op].category == RLX_CAT_LEAF; }

/* 1 if node n goes to the device backend. */
static int assign(const rlx_graph *g, const ir_node *n, const uint8_t *on_dev, const rlx_backend *dev, int trace) {
  if (n->op == RLX_OP_GetOutput) return on_dev[n->in[0]];
  char why[256] = "";
  if (dev->claims(dev, g, n->id, why, sizeof why)) return 1;
  if (trace) fprintf(stderr, "rlx: %s declines node %d (%s): %s\n", dev->name, n->id, ir_ops[n->op].name, why);
  return 0;
}

/* A topological order of the non-leaf nodes that stays on one backend as
 * long as it can. Returns the count written to order. */
static int schedule(const rlx_graph *g, const uint8_t *on_dev, int *order) {
  const int n = g->n_nodes;
  int *pending = calloc((size_t)n + 1, sizeof *pending);
  int count = 0;
  if (!pending) return -1;
  for (int i = 0; i < n; i++) {
    const ir_node *nd = &g->nodes[i];
    if (is_leaf(nd)) continue;
    for (int k = 0; k < nd->n_in; k++)
      if (!is_leaf(&g->nodes[nd->in[k]])) pending[i]++;
  }
  uint8_t *done = calloc((size_t)n + 1, 1);
  if (!done) {
    free(pending);
    return -1;
  }
  int total = 0;
  for (int i = 0; i < n; i++) total += !is_leaf(&g->nodes[i]);
  int cur = -1, idle = 0;
  while (count < total && idle < 2) { /* a DAG always has a ready node: idle never reaches 2 */
    int pick = -1;
    for (int i = 0; i < n && pick < 0; i++)
      if (!done[i] && !is_leaf(&g->nodes[i]) && pending[i] == 0 && (cur < 0 || on_dev[i] == cur)) pick = i;
    if (pick < 0) { /* nothing ready on this backend: switch */
      cur = cur < 0 ? 0 : !cur;
      idle++;
      continue;
    }
    idle = 0;
    if (cur < 0) cur = on_dev[pick];
    done[pick] = 1;
    order[count++] = pick;
    for (int j = pick + 1; j < n; j++) {
      const ir_node *nd = &g->nodes[j];
      if (is_leaf(nd)) continue;
      for (int k = 0; k < nd->n_in; k++)
        if (nd->in[k] == pick) pending[j]--;
    }
  }
  free(pending);
  free(done);
  return count == total ? count : -1;
}

/* Builds segment s's graph from the nodes order[from..to) (all on one
 * backend). need_out[i]: node i is read outside its segment or is a graph
 * output. */
static rlx_status build_segment(hybrid_plan *h, segment *s, const int *order, int from, int to, const uint8_t *need_out,
                                int index) {
  const rlx_graph *g = h->g;
  rlx_node *map = malloc(((size_t)g->n_nodes + 1) * sizeof *map);
  rlx_node *outs = malloc(((size_t)(to - from) + 1) * sizeof *outs);
  const size_t cap = (size_t)g->n_nodes * 2 + 1; /* segment nodes + leaf copies + cut inputs */
  s->orig = malloc(cap * sizeof *s->orig);
  s->is_cut = calloc(cap, 1);
  s->g = ir_graph_new_like(g);
  rlx_status st = RLX_OK;
  if (!map || !outs || !s->orig || !s->is_cut || !s->g) {
    st = rlx_set_error(RLX_ERR_NOMEM, "partition: out of memory");
    goto done;
  }
  for (int i = 0; i < g->n_nodes; i++) map[i] = -1;
  int n_outs = 0;
  for (int p = from; p < to; p++) {
    const ir_node *n = &g->nodes[order[p]];
    rlx_node in[64], *ins = n->n_in <= 64 ? in : malloc((size_t)n->n_in * sizeof *ins);
    if (!ins) {
      st = rlx_set_error(RLX_ERR_NOMEM, "partition: out of memory");
      goto done;
    }
    for (int k = 0; k < n->n_in && st == RLX_OK; k++) {
      rlx_node src = n->in[k];
      if (map[src] < 0) {
        const ir_node *sn = &g->nodes[src];
        rlx_node id;
        if (is_leaf(sn)) {
          id = ir_copy_node(s->g, g, src, NULL);
        } else { /* made in an earlier segment: a cut */
          char name[48];
          snprintf(name, sizeof name, "rlx.cut.%d", (int)src);
          /* a block dtype can only be a param (its bytes are bound all the same) */
          id = (rlx_dtype_is_block(sn->out[0].dtype) ? rlx_param : rlx_input)(s->g, name, sn->out[0].dtype,
                                                                             sn->out[0].shape.rank, sn->out[0].shape.d);
          if (id >= 0) s->is_cut[id] = 1;
        }
        if (id < 0) {
          st = rlx_graph_status(s->g) ? rlx_graph_status(s->g) : RLX_ERR_INTERNAL;
          break;
        }
        s->orig[id] = src;
        map[src] = id;
      }
      ins[k] = map[src];
    }
    rlx_node id = st == RLX_OK ? ir_copy_node(s->g, g, n->id, ins) : -1;
    if (ins != in) free(ins);
    if (st) goto done;
    if (id < 0) {
      st = rlx_graph_status(s->g) ? rlx_graph_status(s->g) : RLX_ERR_INTERNAL;
      goto done;
    }
    /* the specialized types, not re-inferred ones: attrs may hold symbolic
     * dims that only the specialization's binding resolved */
    s->g->nodes[id].n_out = n->n_out;
    memcpy(s->g->nodes[id].out, n->out, sizeof n->out);
    s->orig[id] = n->id;
    map[n->id] = id;
    h->seg_of[n->id] = index;
    h->local[n->id] = id;
    if (need_out[n->id]) outs[n_outs++] = id;
  }
  if (n_outs == 0) outs[n_outs++] = map[order[to - 1]]; /* a dead segment still has an output */
  st = rlx_graph_set_outputs(s->g, n_outs, outs);
done:
  free(map);
  free(outs);
  return st;
}

rlx_status rlx_partition_compile(const rlx_backend *dev, const rlx_graph *g, const rlx_options *opt, void *store,
                                 void **out) {
  *out = NULL;
  if (!dev) return rlx_set_error(RLX_ERR_UNSUPPORTED, "partition: this build has no device backend");
  const int n = g->n_nodes, trace = ir_env_flag("RLX_TRACE", 0);
  hybrid_plan *h = calloc(1, sizeof *h);
  uint8_t *on_dev = calloc((size_t)n + 1, 1), *need_out = calloc((size_t)n + 1, 1);
  int *order = malloc(((size_t)n + 1) * sizeof *order);
  rlx_status st = RLX_OK;
  if (!h || !on_dev || !need_out || !order) {
    st = rlx_set_error(RLX_ERR_NOMEM, "partition: out of memory");
    goto done;
  }
  h->g = g;
  h->seg_of = malloc(((size_t)n + 1) * sizeof *h->seg_of);
  h->local = malloc(((size_t)n + 1) * sizeof *h->local);
  h->staged = calloc((size_t)n + 1, sizeof *h->staged);
  h->staged_bytes = calloc((size_t)n + 1, sizeof *h->staged_bytes);
  h->seg = calloc((size_t)n + 1, sizeof *h->seg);
  if (!h->seg_of || !h->local || !h->staged || !h->staged_bytes || !h->seg) {
    st = rlx_set_error(RLX_ERR_NOMEM, "partition: out of memory");
    goto done;
  }
  /* asked for the CPU (constant folding's evaluator does): one CPU segment */
  const int use_dev = !opt || opt->device != RLX_DEVICE_CPU;
  for (int i = 0; i < n; i++) {
    h->seg_of[i] = -1;
    if (use_dev && !is_leaf(&g->nodes[i])) on_dev[i] = (uint8_t)assign(g, &g->nodes[i], on_dev, dev, trace);
  }
  int count = schedule(g, on_dev, order);
  if (count < 0) {
    st = rlx_set_error(RLX_ERR_NOMEM, "partition: out of memory");
    goto done;
  }
  /* segment index of each scheduled node, then which values cross a cut */
  int *seg_at = malloc(((size_t)n + 1) * sizeof *seg_at);
  if (!seg_at) {
    st = rlx_set_error(RLX_ERR_NOMEM, "partition: out of memory");
    goto done;
  }
  for (int p = 0, k = -1; p < count; p++) {
    if (p == 0 || on_dev[order[p]] != on_dev[order[p - 1]]) k++;
    seg_at[order[p]] = k;
  }
  int cuts = 0;
  for (int i = 0; i < n; i++) {
    const ir_node *nd = &g->nodes[i];
    if (is_leaf(nd)) continue;
    for (int k = 0; k < nd->n_in; k++) {
      rlx_node src = nd->in[k];
      if (!is_leaf(&g->nodes[src]) && seg_at[src] != seg_at[i] && !need_out[src]) {
        need_out[src] = 2; /* staged */
        cuts++;
      }
    }
  }
  for (int i = 0; i < g->n_outputs; i++) {
    rlx_node o = g->outputs[i];
    if (!is_leaf(&g->nodes[o]) && !need_out[o]) need_out[o] = 1;
  }
  free(seg_at);
  for (int p = 0; p < count;) {
    int q = p;
    while (q < count && on_dev[order[q]] == on_dev[order[p]]) q++;
    segment *s = &h->seg[h->n_seg];
    s->backend = on_dev[order[p]] ? dev : &rlx_cpu_backend;
    if (!on_dev[order[p]]) h->fallback_nodes += q - p;
    if ((st = build_segment(h, s, order, p, q, need_out, h->n_seg))) goto done;
    h->n_seg++;
    s->leaf_data = calloc((size_t)s->g->n_nodes + 1, sizeof *s->leaf_data);
    s->leaf_version = calloc((size_t)s->g->n_nodes + 1, sizeof *s->leaf_version);
    if (!s->leaf_data || !s->leaf_version) {
      st = rlx_set_error(RLX_ERR_NOMEM, "partition: out of memory");
      goto done;
    }
    for (int i = 0; i < s->g->n_nodes; i++)
      if (s->g->nodes[i].op == RLX_OP_Constant) s->leaf_data[i] = s->g->nodes[i].a.data.p;
    if ((st = s->backend->compile(s->backend, s->g, opt, s->backend == dev ? store : NULL, &s->plan))) goto done;
    p = q;
  }
  for (int i = 0; i < n; i++) {
    if (need_out[i] != 2) continue;
    const ir_node *nd = &g->nodes[i];
    h->staged_bytes[i] = rlx_dtype_nbytes(nd->out[0].dtype, ir_numel(&nd->out[0].shape));
    if (!(h->staged[i] = malloc(h->staged_bytes[i] ? h->staged_bytes[i] : 1))) {
      st = rlx_set_error(RLX_ERR_NOMEM, "partition: out of memory staging %zu bytes", h->staged_bytes[i]);
      goto done;
    }
  }
  if (trace) {
    int on = 0;
    for (int i = 0; i < h->n_seg; i++) on += h->seg[i].backend == dev;
    fprintf(stderr, "rlx: partition: %d segments (%d on %s, %d on cpu), %d values cross a cut\n", h->n_seg, on,
            dev->name, h->n_seg - on, cuts);
  }
done:
  free(on_dev);
  free(need_out);
  free(order);
  if (st) {
    hybrid_free(h);
    return st;
  }
  *out = h;
  return RLX_OK;
}

static rlx_status hybrid_compile(const rlx_backend *b, const rlx_graph *g, const rlx_options *opt, void *store,
                                 void **out) {
  (void)b;
  return rlx_partition_compile(rlx_device_backend(), g, opt, store, out);
}

/* The store is the device backend's: the device segments of every plan share it. */
static void *hybrid_store_new(int device_index) {
  const rlx_backend *dev = rlx_device_backend();
  return dev && dev->store_new ? dev->store_new(device_index) : NULL;
}

static void hybrid_store_free(void *store) {
  const rlx_backend *dev = rlx_device_backend();
  if (store && dev && dev->store_free) dev->store_free(store);
}

static rlx_status hybrid_run(void *p, const rlx_bindings *bind) {
  hybrid_plan *h = p;
  for (int k = 0; k < h->n_seg; k++) {
    segment *s = &h->seg[k];
    for (int i = 0; i < s->g->n_nodes; i++) {
      const ir_node *n = &s->g->nodes[i];
      if (n->op != RLX_OP_Input && n->op != RLX_OP_Param) continue;
      rlx_node o = s->orig[i];
      if (s->is_cut[i]) {
        s->leaf_data[i] = h->staged[o];
        s->leaf_version[i] = rlx_leaf_version_next();
      } else {
        s->leaf_data[i] = bind->leaf_data[o];
        s->leaf_version[i] = bind->leaf_version ? bind->leaf_version[o] : 0;
      }
    }
    rlx_bindings sb = {s->leaf_data, s->leaf_version};
    rlx_status st = s->backend->run(s->plan, &sb);
    if (st) return st;
    for (int i = 0; i < s->g->n_nodes; i++) { /* stage the values later segments read */
      rlx_node o = s->orig[i];
      if (s->is_cut[i] || is_leaf(&s->g->nodes[i]) || !h->staged[o]) continue;
      if ((st = s->backend->read(s->plan, i, 0, h->staged[o], h->staged_bytes[o]))) return st;
    }
  }
  return RLX_OK;
}

static rlx_status hybrid_read(void *p, rlx_node n, int index, void *dst, size_t nbytes) {
  hybrid_plan *h = p;
  if (n < 0 || n >= h->g->n_nodes || h->seg_of[n] < 0)
    return rlx_set_error(RLX_ERR_INTERNAL, "partition: node %d is in no segment", (int)n);
  segment *s = &h->seg[h->seg_of[n]];
  return s->backend->read(s->plan, h->local[n], index, dst, nbytes);
}

/* The node of segment s that is its copy of leaf o, or -1. */
static int segment_leaf(const segment *s, rlx_node o) {
  for (int i = 0; i < s->g->n_nodes; i++)
    if (!s->is_cut[i] && is_leaf(&s->g->nodes[i]) && s->orig[i] == o) return i;
  return -1;
}

/* The segment that computes Assign a keeps its value when no other segment
 * reads the param (they would read the host copy, which is not updated). */
static int hybrid_keep_assigned(void *p, rlx_node a, uint64_t version) {
  hybrid_plan *h = p;
  if (a < 0 || a >= h->g->n_nodes || h->seg_of[a] < 0) return 0;
  const int k = h->seg_of[a];
  const segment *s = &h->seg[k];
  if (!s->backend->keep_assigned) return 0;
  for (int j = 0; j < h->n_seg; j++)
    if (j != k && segment_leaf(&h->seg[j], h->g->nodes[a].in[0]) >= 0) return 0;
  return s->backend->keep_assigned(s->plan, h->local[a], version);
}

static rlx_status hybrid_fetch_param(void *p, rlx_node param, void *dst, size_t nbytes) {
  hybrid_plan *h = p;
  for (int k = 0; k < h->n_seg; k++) {
    const segment *s = &h->seg[k];
    int i = segment_leaf(s, param);
    if (i >= 0 && s->backend->fetch_param) return s->backend->fetch_param(s->plan, i, dst, nbytes);
  }
  return rlx_set_error(RLX_ERR_INTERNAL, "partition: no segment keeps param node %d", (int)param);
}

/* Param p is kept by its one reading segment of `from` (hybrid_keep_assigned);
 * `to` shares it when its one reading segment is on the same backend and
 * that backend shares it (a CPU segment would read the host copy). */
static int hybrid_share_kept(void *from, rlx_node p_from, void *to, rlx_node p_to) {
  const hybrid_plan *a = from, *b = to;
  const segment *sa = NULL, *sb = NULL;
  int la = -1, lb = -1, readers = 0; /* the param's node in sa and sb */
  for (int k = 0; k < a->n_seg; k++) {
    int i = segment_leaf(&a->seg[k], p_from);
    if (i >= 0) sa = &a->seg[k], la = i;
  }
  for (int k = 0; k < b->n_seg; k++) {
    int i = segment_leaf(&b->seg[k], p_to);
    if (i >= 0) sb = &b->seg[k], lb = i, readers++;
  }
  if (!sa || readers != 1 || sa->backend != sb->backend || !sa->backend->share_kept) return 0;
  return sa->backend->share_kept(sa->plan, la, sb->plan, lb);
}

/* Segments run one after another: the arenas add up. */
static void hybrid_memory_stats(const void *p, rlx_session_stats *st) {
  const hybrid_plan *h = p;
  rlx_session_stats sum = *st;
  sum.arena_bytes = sum.naive_bytes = sum.peak_live_bytes = 0;
  sum.views = sum.in_place = sum.device_launches = 0;
  sum.param_device_bytes = sum.packed_bytes = 0;
  sum.fallback_nodes = h->fallback_nodes;
  for (int i = 0; i < h->n_seg; i++) {
    rlx_session_stats one = *st;
    one.param_device_bytes = one.packed_bytes = 0;
    h->seg[i].backend->memory_stats(h->seg[i].plan, &one);
    sum.arena_bytes += one.arena_bytes;
    sum.naive_bytes += one.naive_bytes;
    sum.peak_live_bytes = one.peak_live_bytes > sum.peak_live_bytes ? one.peak_live_bytes : sum.peak_live_bytes;
    sum.views += one.views;
    sum.in_place += one.in_place;
    sum.device_launches += one.device_launches;
    sum.param_device_bytes += one.param_device_bytes;
    sum.packed_bytes += one.packed_bytes;
  }
  *st = sum;
}

/* What legalization should keep: a fused op only when the device runs it
 * (otherwise its decomposition into primitives is better: those may run on
 * the device); every other op runs somewhere (the CPU takes all). */
static int hybrid_claims(const rlx_backend *b, const rlx_graph *g, rlx_node n, char *why, size_t cap) {
  (void)b;
  const rlx_backend *dev = rlx_device_backend();
  int op = g->nodes[n].op;
  if (dev && ir_ops[op].category == RLX_CAT_FUSED && pass_has_decomposition(op))
    return dev->claims(dev, g, n, why, cap);
  return 1;
}

const rlx_backend rlx_hybrid_backend = {"hybrid",          hybrid_claims,        hybrid_compile,
                                        hybrid_run,        hybrid_read,          hybrid_memory_stats,
                                        hybrid_free,       hybrid_keep_assigned, hybrid_fetch_param,
                                        hybrid_store_new,  hybrid_store_free,    hybrid_share_kept,
                                        NULL};
