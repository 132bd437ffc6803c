/* session.c — sessions: compile, bind params and inputs, run, read outputs.
 *
 * rlx_compile runs the pass pipeline on the user's graph (possibly with
 * symbolic dims) — or finds its result in the compile cache — and the
 * session keeps that optimized graph, the host buffers of its inputs and
 * params, and its plans keyed by the binding of symbolic dims: the first
 * run with new sizes specializes the graph and plans it (or takes over an
 * idle plan of the cache); a later run with the same sizes reuses that plan.
 */
#include "partition.h"
#include "runtime.h"

#include "../backend/comm.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  rlx_node node;
  int is_param;
  void *data;             /* host buffer (malloc'ed, or borrowed), NULL until set */
  size_t nbytes;
  int borrowed;           /* data belongs to the caller (rlx_set_param_ref) */
  ir_shape bound;         /* concrete dims of the last set (inputs) */
  /* >= 0: an Assign's value that plan kept_by keeps in the backend's memory
   * (backend keep_assigned); data is older until fetch_kept_param */
  int kept_by;
} session_leaf;

typedef rt_plan plan_entry;

struct rlx_session {
  rt_compiled *compiled;  /* held: the optimized graph, shared through the compile cache */
  const rlx_graph *g;     /* its graph: what plans are made from */
  rlx_options opt;
  const rlx_backend *backend;
  session_leaf *leaves;
  int n_leaves;
  ir_name_set leaf_names; /* the leaves by name: a lookup per set call, not a scan (thousands of inputs) */
  int *leaf_at;           /* [n_nodes]: the leaves[] position of an Input or Param node, else -1 */
  const void **leaf_data; /* [n_nodes] */
  uint64_t *leaf_version; /* [n_nodes]: a new number each time a leaf is set (device backends copy on change) */
  plan_entry *plans;
  uint64_t *plan_run;     /* [cap_plans] when each plan last ran (runs_started then) */
  uint64_t runs_started;
  int n_plans, cap_plans;
  rt_store *store;        /* held and claimed: the params the plans share (NULL until a plan needs it, or none) */
  int current;            /* plan of the last run, -1 before */
  int64_t *binding;       /* scratch [n_syms] */
  /* [n_outputs]: the last run's copy of an output that is an input or param
   * (the passes can make one of x * 1), so rlx_output gives the run's
   * result even after the leaf is set again; NULL for the others. */
  void **leaf_outputs;
  size_t *leaf_output_bytes;
  /* The Assign nodes: after each run, the value of assigns[i] becomes the
   * data of its target Param (write_back). */
  rlx_node *assigns;
  int n_assigns;
  rlx_session_stats stats;
  atomic_int in_use;      /* a call that reads or writes the session's state is under way (one thread at a time) */
  rt_deferred *deferred;  /* non-NULL: a graph built at run from some inputs' contents (deferred.c); nothing above is used */
};

static int graph_has_sym_leaves(const rlx_graph *g) {
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (ir_ops[n->op].category != RLX_CAT_LEAF) continue;
    for (int d = 0; d < n->out[0].shape.rank; d++)
      if (ir_dim_is_sym(n->out[0].shape.d[d])) return 1;
  }
  return 0;
}

/* A freed session's plans wait in the compile cache for the next session
 * of the graph only while its params' device copy (which they hold) is at
 * most this: a freed LLM must give its weights' device memory back. */
#define SESSION_IDLE_PARAMS_MAX ((size_t)1 << 30)

void rlx_session_free(rlx_session *s) {
  if (!s) return;
  if (s->deferred) {
    rt_deferred_free(s->deferred);
    free(s);
    return;
  }
  /* The plans wait in the compile cache for the next session of this
   * graph, unless they would hold large params on the device. */
  rlx_session_stats mem = {0};
  if (s->n_plans) s->backend->memory_stats(s->plans[0].plan, &mem);
  const int keep = mem.param_device_bytes <= SESSION_IDLE_PARAMS_MAX;
  for (int i = 0; i < s->n_plans; i++)
    if (keep) rt_cache_put_plan(s->compiled, &s->opt, &s->plans[i]);
    else rt_plan_free(s->backend, &s->plans[i]);
  free(s->plans);
  free(s->plan_run);
  rt_store_unclaim(s->store); /* its idle plans may go to a later session */
  rt_store_release(s->store);
  for (int i = 0; i < s->n_leaves; i++)
    if (!s->leaves[i].borrowed) free(s->leaves[i].data);
  free(s->leaves);
  ir_name_set_free(&s->leaf_names);
  free(s->leaf_at);
  free((void *)s->leaf_data);
  free(s->leaf_version);
  free(s->binding);
  for (int k = 0; s->leaf_outputs && k < s->g->n_outputs; k++) free(s->leaf_outputs[k]);
  free(s->leaf_outputs);
  free(s->leaf_output_bytes);
  free(s->assigns);
  rt_compiled_release(s->compiled);
  free(s);
}

/* Plan for the binding in s->binding: the session's own, an idle one of
 * the compile cache, or a new one. */
static rlx_status get_plan(rlx_session *s, int *out) {
  size_t bsz = (size_t)s->g->n_syms * sizeof *s->binding;
  for (int i = 0; i < s->n_plans; i++)
    if (bsz == 0 || memcmp(s->plans[i].binding, s->binding, bsz) == 0) {
      *out = i;
      s->stats.plan_cache_hits++;
      return RLX_OK;
    }
  if (s->n_plans == s->cap_plans) {
    int cap = s->cap_plans ? 2 * s->cap_plans : 4;
    plan_entry *p = realloc(s->plans, (size_t)cap * sizeof *p);
    if (p) s->plans = p;
    uint64_t *r = p ? realloc(s->plan_run, (size_t)cap * sizeof *r) : NULL;
    if (!r) return rlx_set_error(RLX_ERR_NOMEM, "rlx_run: out of memory");
    s->plan_run = r;
    s->cap_plans = cap;
  }
  plan_entry e = {0};
  if (rt_cache_take_plan(s->compiled, s->binding, &s->opt, &s->store, &e)) {
    s->plans[s->n_plans] = e;
    *out = s->n_plans++;
    s->stats.plans_reused++;
    return RLX_OK;
  }
  e.binding = malloc(bsz ? bsz : 1);
  e.g = ir_graph_clone(s->g);
  if (!e.binding || !e.g) {
    rt_plan_free(s->backend, &e);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_run: out of memory");
  }
  if (bsz) memcpy(e.binding, s->binding, bsz);
  rlx_status st = s->store ? RLX_OK : rt_store_new(s->backend, s->opt.device_index, &s->store);
  if (st) {
    rt_plan_free(s->backend, &e);
    return st;
  }
  e.store = s->store;
  rt_store_retain(e.store);
  st = ir_graph_specialize(e.g, s->binding);
  for (int i = 0; st == RLX_OK && i < e.g->n_nodes; i++) {
    const ir_node *n = &e.g->nodes[i];
    for (int o = 0; o < n->n_out; o++)
      if (ir_numel(&n->out[o].shape) < 0) {
        char b[IR_SHAPE_STR_CAP];
        st = rlx_set_error(RLX_ERR_SHAPE, "%s (node %d) still has symbolic dims %s after binding the inputs: "
                           "a symbol no input binds", ir_ops[n->op].name, i,
                           ir_shape_str(e.g, &n->out[o].shape, b, sizeof b));
        break;
      }
  }
  if (st == RLX_OK) st = s->backend->compile(s->backend, e.g, &s->opt, rt_store_data(e.store), &e.plan);
  if (st) {
    rt_plan_free(s->backend, &e);
    return st;
  }
  s->plans[s->n_plans] = e;
  *out = s->n_plans++;
  s->stats.plans_built++;
  return RLX_OK;
}

/* Legalization's target: the backend's claims, with its reasons under RLX_TRACE. */
typedef struct {
  const rlx_backend *backend;
  int trace;
} claims_target;

static int backend_claims(void *ctx, const rlx_graph *g, rlx_node n) {
  const claims_target *t = ctx;
  char why[256] = "";
  int ok = t->backend->claims(t->backend, g, n, why, sizeof why);
  if (!ok && t->trace)
    fprintf(stderr, "rlx: %s declines %s (node %d): %s\n", t->backend->name, ir_ops[g->nodes[n].op].name, (int)n,
            why[0] ? why : "no reason given");
  return ok;
}

/* The optimized form of g for backend b and the options: from the compile
 * cache, or by running the pass pipeline (which verifies g). */
static rlx_status compile_graph(const rlx_graph *g, const rlx_backend *b, const rlx_options *o,
                                rt_compiled **out, int *from_cache) {
  pass_options po;
  pass_options_from_env(&po);
  if (o->flags & RLX_FLAG_NO_FUSE) po.fuse = 0;
  if (o->flags & RLX_FLAG_NO_OPTIMIZE) po.optimize = 0;
  claims_target target = {b, po.trace};
  po.claims = backend_claims;
  po.claims_ctx = &target;
  /* constants fold on the CPU whatever the target: exact, and no device work per node */
  po.eval = rt_const_eval;
  po.eval_ctx = (void *)&rlx_cpu_backend;
  rt_compile_key key = {b, po.fuse, po.optimize, po.decompose_fused, rt_env_fingerprint()};
  int cacheable = po.dump == NULL; /* a dump asks to watch the passes run */
  *out = cacheable ? rt_cache_lookup(g, &key) : NULL;
  *from_cache = *out != NULL;
  if (*out) {
    if (po.trace) fprintf(stderr, "rlx: compile cache: graph \"%s\" compiled before: no passes run\n", g->name);
    return RLX_OK;
  }
  pass_dispatch_count *dispatch = calloc(RLX_OP_COUNT, sizeof *dispatch);
  if (!dispatch) return rlx_set_error(RLX_ERR_NOMEM, "rlx_compile: out of memory");
  po.dispatch = dispatch;
  rlx_graph *optimized;
  rlx_status st = pass_pipeline(g, &po, &optimized);
  if (st == RLX_OK && !(*out = rt_compiled_new(g, &key, optimized, dispatch, cacheable)))
    st = rlx_set_error(RLX_ERR_NOMEM, "rlx_compile: out of memory keeping the compiled graph");
  free(dispatch);
  return st;
}

/* Every Assign of g is a graph output (the passes drop what no output
 * reads) and each param is assigned at most once. */
static rlx_status check_assigns(const rlx_graph *g) {
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op != RLX_OP_Assign) continue;
    int is_output = 0;
    for (int k = 0; k < g->n_outputs; k++) is_output |= g->outputs[k] == i;
    if (!is_output)
      return rlx_set_error(RLX_ERR_INVALID, "rlx_compile: Assign (node %d) of param \"%s\" is not a graph output", i,
                           g->nodes[n->in[0]].a.name);
    for (int j = 0; j < i; j++)
      if (g->nodes[j].op == RLX_OP_Assign && g->nodes[j].in[0] == n->in[0])
        return rlx_set_error(RLX_ERR_INVALID, "rlx_compile: param \"%s\" is assigned twice (nodes %d and %d)",
                             g->nodes[n->in[0]].a.name, j, i);
  }
  return RLX_OK;
}

rlx_status rlx_compile(const rlx_graph *g, const rlx_options *opt, rlx_session **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_compile: out is NULL");
  *out = NULL;
  if (!g) return rlx_set_error(RLX_ERR_INVALID, "rlx_compile: graph is NULL");
  if (g->err) return rlx_graph_status(g);
  rlx_options o = {RLX_DEVICE_AUTO, 0, 0, 0, NULL};
  if (opt) o = *opt;
  if (o.device != RLX_DEVICE_AUTO && o.device != RLX_DEVICE_CPU && o.device != RLX_DEVICE_CUDA)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_compile: options.device %d is not RLX_DEVICE_AUTO, _CPU or _CUDA",
                         (int)o.device);
  if (o.threads < 0)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_compile: options.threads %d < 0 (0: every core)", o.threads);
  if (o.flags & ~(unsigned)(RLX_FLAG_NO_FUSE | RLX_FLAG_NO_OPTIMIZE | RLX_FLAG_BF16_MATH))
    return rlx_set_error(RLX_ERR_INVALID, "rlx_compile: options.flags 0x%x has bits that are no RLX_FLAG_*", o.flags);
  if (o.device_index < 0)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_compile: options.device_index %d < 0", o.device_index);
  rt_env_device(&o.device, &o.device_index);
  /* an NCCL rank's sums run on its communicator's device, whatever RLX_DEVICE says */
  if (o.device == RLX_DEVICE_CUDA && o.comm && o.comm->kind == COMM_NCCL) o.device_index = o.comm->device;
  if (o.device == RLX_DEVICE_CUDA && !rlx_device_backend())
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_compile: this build has no CUDA backend");
  if (o.device == RLX_DEVICE_CUDA && !rlx_device_available())
    return rlx_set_error(RLX_ERR_DEVICE, "rlx_compile: no CUDA device is present");
  if (o.device == RLX_DEVICE_CUDA && o.device_index >= rlx_device_count())
    return rlx_set_error(RLX_ERR_DEVICE, "rlx_compile: CUDA device %d is not present (%d device%s: cuda:0%s)",
                         o.device_index, rlx_device_count(), rlx_device_count() == 1 ? "" : "s",
                         rlx_device_count() == 1 ? "" : " and up");
  if (o.device != RLX_DEVICE_CUDA) o.device_index = 0;
  rlx_status st = check_assigns(g);
  if (st) return st;
  rlx_session *s = calloc(1, sizeof *s);
  if (!s) return rlx_set_error(RLX_ERR_NOMEM, "rlx_compile: out of memory");
  s->opt = o;
  /* CUDA: segments the device claims run there, the rest on the CPU (partition.c) */
  s->backend = o.device == RLX_DEVICE_CUDA ? &rlx_hybrid_backend : &rlx_cpu_backend;
  s->current = -1;
  int from_cache = 0;
  st = compile_graph(g, s->backend, &o, &s->compiled, &from_cache);
  if (st) {
    rlx_session_free(s);
    return st;
  }
  s->g = rt_compiled_graph(s->compiled);
  s->stats.compile_cache_hit = from_cache;
  if (ir_env_flag("RLX_DISPATCH_REPORT", 0))
    rt_dispatch_report(g->name, s->backend->name, rt_compiled_dispatch(s->compiled), from_cache);
  for (int i = 0; i < s->g->n_nodes; i++) {
    const ir_node *n = &s->g->nodes[i];
    if (n->op != RLX_OP_Param) continue;
    for (int d = 0; d < n->out[0].shape.rank; d++)
      if (ir_dim_is_sym(n->out[0].shape.d[d])) {
        /* the message before the free: the name lives in the compiled graph */
        st = rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_compile: param \"%s\" has a symbolic dim; params must be static",
                           n->a.name);
        rlx_session_free(s);
        return st;
      }
  }
  s->leaf_data = calloc((size_t)s->g->n_nodes + 1, sizeof *s->leaf_data);
  s->leaf_version = calloc((size_t)s->g->n_nodes + 1, sizeof *s->leaf_version);
  s->leaf_outputs = calloc((size_t)s->g->n_outputs + 1, sizeof *s->leaf_outputs);
  s->leaf_output_bytes = calloc((size_t)s->g->n_outputs + 1, sizeof *s->leaf_output_bytes);
  s->leaves = calloc((size_t)s->g->n_nodes + 1, sizeof *s->leaves);
  s->leaf_at = malloc(((size_t)s->g->n_nodes + 1) * sizeof *s->leaf_at);
  s->binding = malloc(((size_t)s->g->n_syms + 1) * sizeof *s->binding);
  s->assigns = malloc(((size_t)s->g->n_nodes + 1) * sizeof *s->assigns);
  if (!s->leaf_data || !s->leaf_version || !s->leaves || !s->binding || !s->leaf_outputs || !s->leaf_output_bytes ||
      !s->assigns || !s->leaf_at) {
    rlx_session_free(s);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_compile: out of memory");
  }
  for (int i = 0; i < s->g->n_nodes; i++) {
    const ir_node *n = &s->g->nodes[i];
    if (n->op == RLX_OP_Constant) s->leaf_data[i] = n->a.data.p;
    s->leaf_at[i] = -1;
    if (n->op == RLX_OP_Input || n->op == RLX_OP_Param) {
      if (ir_name_set_add(&s->leaf_names, s->g, i) < 0) {
        rlx_session_free(s);
        return rlx_set_error(RLX_ERR_NOMEM, "rlx_compile: out of memory");
      }
      s->leaf_at[i] = s->n_leaves;
      session_leaf *l = &s->leaves[s->n_leaves++];
      l->node = i;
      l->is_param = n->op == RLX_OP_Param;
      l->kept_by = -1;
    }
    if (n->op == RLX_OP_Assign) s->assigns[s->n_assigns++] = i;
  }
  /* A fully static graph is planned now, so compile reports plan errors. */
  if (!graph_has_sym_leaves(s->g)) {
    for (int i = 0; i < s->g->n_syms; i++) s->binding[i] = -1;
    int idx;
    st = get_plan(s, &idx);
    if (st) {
      rlx_session_free(s);
      return st;
    }
    s->backend->memory_stats(s->plans[idx].plan, &s->stats);
  }
  *out = s;
  return RLX_OK;
}

static session_leaf *find_leaf(rlx_session *s, const char *name, int want_param, const char *fn) {
  const int node = ir_name_set_find(&s->leaf_names, s->g, name);
  if (node >= 0) {
    session_leaf *l = &s->leaves[s->leaf_at[node]];
    if (l->is_param != want_param) {
      rlx_set_error(RLX_ERR_INVALID, "%s: \"%s\" is %s, not %s", fn, name, l->is_param ? "a param" : "an input",
                    want_param ? "a param" : "an input");
      return NULL;
    }
    return l;
  }
  rlx_set_error(RLX_ERR_INVALID, "%s: the graph has no %s named \"%s\"", fn, want_param ? "param" : "input", name);
  return NULL;
}

static rlx_status store_leaf(rlx_session *s, session_leaf *l, const void *data, size_t nbytes,
                             const ir_shape *shape, const char *fn) {
  const ir_node *n = &s->g->nodes[l->node];
  const ir_type bound = {n->out[0].dtype, *shape};
  int64_t want_bytes = ir_type_nbytes(&bound);
  size_t want = want_bytes < 0 ? 0 : (size_t)want_bytes;
  char b[IR_SHAPE_STR_CAP];
  if (!ir_size_ok(want_bytes))
    return rlx_set_error(RLX_ERR_SHAPE, "%s: \"%s\" as %s%s is larger than the largest tensor (RLX_MAX_TENSOR_BYTES, "
                         "2^40 elements or bytes)", fn, n->a.name, rlx_dtype_name(n->out[0].dtype),
                         ir_shape_str(s->g, shape, b, sizeof b));
  if (nbytes != want)
    return rlx_set_error(RLX_ERR_INVALID, "%s: \"%s\" is %s%s = %zu bytes, got %zu", fn, n->a.name,
                         rlx_dtype_name(n->out[0].dtype), ir_shape_str(s->g, shape, b, sizeof b), want, nbytes);
  if (nbytes && !data) return rlx_set_error(RLX_ERR_INVALID, "%s: data for \"%s\" is NULL", fn, n->a.name);
  if (l->borrowed) {
    l->data = NULL;
    l->borrowed = 0;
  }
  if (l->nbytes != nbytes || !l->data) {
    void *p = malloc(nbytes ? nbytes : 1);
    if (!p) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory (%zu bytes)", fn, nbytes);
    free(l->data);
    l->data = p;
    l->nbytes = nbytes;
  }
  if (nbytes) memcpy(l->data, data, nbytes);
  l->bound = *shape;
  l->kept_by = -1;
  s->leaf_data[l->node] = l->data;
  s->leaf_version[l->node] = rlx_leaf_version_next();
  return RLX_OK;
}

static rlx_status set_param(rlx_session *s, const char *name, const void *data, size_t nbytes) {
  if (!s || !name) return rlx_set_error(RLX_ERR_INVALID, "rlx_set_param: session or name is NULL");
  session_leaf *l = find_leaf(s, name, 1, "rlx_set_param");
  if (!l) return RLX_ERR_INVALID;
  return store_leaf(s, l, data, nbytes, &s->g->nodes[l->node].out[0].shape, "rlx_set_param");
}

static rlx_status set_param_ref(rlx_session *s, const char *name, const void *data, size_t nbytes) {
  if (!s || !name) return rlx_set_error(RLX_ERR_INVALID, "rlx_set_param_ref: session or name is NULL");
  session_leaf *l = find_leaf(s, name, 1, "rlx_set_param_ref");
  if (!l) return RLX_ERR_INVALID;
  const ir_node *n = &s->g->nodes[l->node];
  size_t want = rlx_dtype_nbytes(n->out[0].dtype, ir_numel(&n->out[0].shape));
  if (nbytes != want)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_set_param_ref: \"%s\" needs %zu bytes, got %zu", name, want, nbytes);
  if (nbytes && !data) return rlx_set_error(RLX_ERR_INVALID, "rlx_set_param_ref: data for \"%s\" is NULL", name);
  /* Kernels read plain dtypes as C arrays (block dtypes bytewise). */
  const size_t align = ir_is_block(n->out[0].dtype) ? 1 : rlx_dtype_nbytes(n->out[0].dtype, 1);
  if (nbytes && (uintptr_t)data % align)
    return rlx_set_error(RLX_ERR_INVALID,
                         "rlx_set_param_ref: data for \"%s\" (%s) is not aligned to %zu bytes; copy it with "
                         "rlx_set_param", name, rlx_dtype_name(n->out[0].dtype), align);
  if (!l->borrowed) free(l->data);
  l->data = (void *)data;
  l->nbytes = nbytes;
  l->borrowed = 1;
  l->bound = n->out[0].shape;
  l->kept_by = -1;
  s->leaf_data[l->node] = data;
  s->leaf_version[l->node] = rlx_leaf_version_next();
  return RLX_OK;
}

static rlx_status set_input(rlx_session *s, const char *name, const void *data, size_t nbytes) {
  if (!s || !name) return rlx_set_error(RLX_ERR_INVALID, "rlx_set_input: session or name is NULL");
  session_leaf *l = find_leaf(s, name, 0, "rlx_set_input");
  if (!l) return RLX_ERR_INVALID;
  const ir_shape *decl = &s->g->nodes[l->node].out[0].shape;
  if (ir_numel(decl) < 0)
    return rlx_set_error(RLX_ERR_SHAPE, "rlx_set_input: \"%s\" has symbolic dims; use rlx_set_input_shaped", name);
  return store_leaf(s, l, data, nbytes, decl, "rlx_set_input");
}

static rlx_status set_input_shaped(rlx_session *s, const char *name, const void *data, size_t nbytes, int rank,
                                  const int64_t *dims) {
  if (!s || !name) return rlx_set_error(RLX_ERR_INVALID, "rlx_set_input_shaped: session or name is NULL");
  session_leaf *l = find_leaf(s, name, 0, "rlx_set_input_shaped");
  if (!l) return RLX_ERR_INVALID;
  const ir_shape *decl = &s->g->nodes[l->node].out[0].shape;
  char a[IR_SHAPE_STR_CAP];
  if (rank != decl->rank || (rank > 0 && !dims))
    return rlx_set_error(RLX_ERR_SHAPE, "rlx_set_input_shaped: \"%s\" is declared %s (rank %d), got rank %d", name,
                         ir_shape_str(s->g, decl, a, sizeof a), decl->rank, rank);
  ir_shape shape = {rank, {0}};
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || (!ir_dim_is_sym(decl->d[i]) && dims[i] != decl->d[i]))
      return rlx_set_error(RLX_ERR_SHAPE, "rlx_set_input_shaped: \"%s\" is declared %s, dim %d cannot be %lld", name,
                           ir_shape_str(s->g, decl, a, sizeof a), i, (long long)dims[i]);
    shape.d[i] = dims[i];
  }
  return store_leaf(s, l, data, nbytes, &shape, "rlx_set_input_shaped");
}

/* Binding of every symbol from the bound inputs; conflicting sizes are an error. */
static rlx_status bind_symbols(rlx_session *s) {
  for (int i = 0; i < s->g->n_syms; i++) s->binding[i] = -1;
  for (int i = 0; i < s->n_leaves; i++) {
    const session_leaf *l = &s->leaves[i];
    const ir_node *n = &s->g->nodes[l->node];
    if (!l->data)
      return rlx_set_error(RLX_ERR_INVALID, "rlx_run: %s \"%s\" was never set", l->is_param ? "param" : "input",
                           n->a.name);
    for (int d = 0; d < n->out[0].shape.rank; d++) {
      int64_t decl = n->out[0].shape.d[d];
      if (!ir_dim_is_sym(decl)) continue;
      int id = ir_dim_sym_id(decl);
      if (s->binding[id] >= 0 && s->binding[id] != l->bound.d[d])
        return rlx_set_error(RLX_ERR_SHAPE, "rlx_run: symbol %s is bound to %lld by one input and %lld by \"%s\"",
                             s->g->syms[id].name ? s->g->syms[id].name : "?", (long long)s->binding[id],
                             (long long)l->bound.d[d], n->a.name);
      s->binding[id] = l->bound.d[d];
    }
  }
  return RLX_OK;
}

/* The session leaf of node id, or NULL. */
static session_leaf *leaf_of(rlx_session *s, rlx_node id) {
  return id >= 0 && id < s->g->n_nodes && s->leaf_at[id] >= 0 ? &s->leaves[s->leaf_at[id]] : NULL;
}

/* Brings a kept param's value (keep_assigned) back into its host copy and
 * gives it a new version, so that every other plan copies it in again. */
static rlx_status fetch_kept_param(rlx_session *s, session_leaf *l) {
  if (l->kept_by < 0) return RLX_OK;
  rlx_status st = s->backend->fetch_param(s->plans[l->kept_by].plan, l->node, l->data, l->nbytes);
  if (st) return st;
  l->kept_by = -1;
  s->leaf_version[l->node] = rlx_leaf_version_next();
  return RLX_OK;
}

/* Copies the outputs that are inputs or params (see leaf_outputs). */
static rlx_status keep_leaf_outputs(rlx_session *s) {
  const rlx_graph *g = s->plans[s->current].g;
  for (int k = 0; k < g->n_outputs; k++) {
    const ir_node *n = &g->nodes[g->outputs[k]];
    if (n->op != RLX_OP_Input && n->op != RLX_OP_Param) continue;
    session_leaf *l = n->op == RLX_OP_Param ? leaf_of(s, n->id) : NULL;
    if (l) {
      rlx_status st = fetch_kept_param(s, l);
      if (st) return st;
    }
    size_t nb = rlx_dtype_nbytes(n->out[0].dtype, ir_numel(&n->out[0].shape));
    if (!s->leaf_outputs[k] || s->leaf_output_bytes[k] != nb) {
      void *p = realloc(s->leaf_outputs[k], nb ? nb : 1);
      if (!p) return rlx_set_error(RLX_ERR_NOMEM, "rlx_run: out of memory (%zu bytes)", nb);
      s->leaf_outputs[k] = p;
      s->leaf_output_bytes[k] = nb;
    }
    if (nb) memcpy(s->leaf_outputs[k], s->leaf_data[n->id], nb);
  }
  return RLX_OK;
}

static session_leaf *assigned_leaf(rlx_session *s, const ir_node *a) {
  session_leaf *l = leaf_of(s, a->in[0]);
  if (!l) rlx_set_error(RLX_ERR_INTERNAL, "rlx_run: Assign (node %d) has no param", a->id);
  return l;
}

/* Before a run: an assigned param that is borrowed gets a copy the session
 * owns, since the plan may update it in place (an in-place Assign,
 * plan_memory.c) and a borrowed param is never written. */
static rlx_status own_assigned_params(rlx_session *s) {
  for (int i = 0; i < s->n_assigns; i++) {
    session_leaf *l = assigned_leaf(s, &s->g->nodes[s->assigns[i]]);
    if (!l) return RLX_ERR_INTERNAL;
    if (!l->borrowed) continue;
    void *p = malloc(l->nbytes ? l->nbytes : 1);
    if (!p) return rlx_set_error(RLX_ERR_NOMEM, "rlx_run: out of memory (%zu bytes)", l->nbytes);
    if (l->nbytes) memcpy(p, l->data, l->nbytes);
    l->data = p;
    l->borrowed = 0;
    s->leaf_data[l->node] = p;
    s->leaf_version[l->node] = rlx_leaf_version_next();
  }
  return RLX_OK;
}

/* After a run: each Assign's value becomes its Param's data. A backend
 * that keeps it (keep_assigned: a device) holds it for the next run of
 * this plan, and the host copy is refreshed only when another plan needs
 * it; else it is read into the host copy (in place already when the plan
 * updated the param's bytes: the read is then no copy). */
static rlx_status write_back(rlx_session *s) {
  const rt_plan *pl = &s->plans[s->current];
  s->stats.params_kept = 0;
  for (int i = 0; i < s->n_assigns; i++) {
    const ir_node *a = &pl->g->nodes[s->assigns[i]];
    session_leaf *l = assigned_leaf(s, a);
    if (!l) return RLX_ERR_INTERNAL;
    if (s->backend->keep_assigned) {
      const uint64_t v = rlx_leaf_version_next();
      if (s->backend->keep_assigned(pl->plan, a->id, v)) {
        l->kept_by = s->current;
        s->leaf_version[l->node] = v;
        s->stats.params_kept++;
        continue;
      }
    }
    l->kept_by = -1;
    rlx_status st = s->backend->read(pl->plan, a->id, 0, l->data, l->nbytes);
    if (st) return st;
    s->leaf_data[l->node] = l->data;
    s->leaf_version[l->node] = rlx_leaf_version_next();
  }
  return RLX_OK;
}

/* The plans a session holds at most: one per shape binding it has run
 * (an LLM's decode steps by key-length bucket, and its prompts by
 * length), each with an arena of its own, in device memory on a GPU. Past
 * this many the least recently run one goes to the compile cache's idle
 * plans (bounded there; the session takes it back from there if that
 * shape comes again), so a long chat of prompts of every length does not
 * keep every arena. */
#define SESSION_MAX_PLANS 8

/* After a run: plans past SESSION_MAX_PLANS handed to the compile cache,
 * least recently run first. Never the current plan, nor one that keeps a
 * param's value (after a run only the current one can: rlx_run shares or
 * fetches the others' first). */
static void release_old_plans(rlx_session *s) {
  while (s->n_plans > SESSION_MAX_PLANS) {
    int v = -1;
    for (int i = 0; i < s->n_plans; i++) {
      int keeps = i == s->current;
      for (int k = 0; k < s->n_leaves && !keeps; k++) keeps = s->leaves[k].kept_by == i;
      if (!keeps && (v < 0 || s->plan_run[i] < s->plan_run[v])) v = i;
    }
    if (v < 0) return;
    rt_cache_put_plan(s->compiled, &s->opt, &s->plans[v]);
    const int last = --s->n_plans; /* the last plan takes v's place */
    s->plans[v] = s->plans[last], s->plan_run[v] = s->plan_run[last];
    if (s->current == last) s->current = v;
    for (int k = 0; k < s->n_leaves; k++)
      if (s->leaves[k].kept_by == last) s->leaves[k].kept_by = v;
  }
}

static rlx_status run_session(rlx_session *s) {
  if (!s) return rlx_set_error(RLX_ERR_INVALID, "rlx_run: session is NULL");
  rlx_status st = bind_symbols(s);
  if (st == RLX_OK) st = own_assigned_params(s);
  if (st) return st;
  int idx;
  st = get_plan(s, &idx);
  if (st) return st;
  s->current = idx;
  s->plan_run[idx] = ++s->runs_started;
  for (int k = 0; k < s->n_leaves; k++) { /* values another plan keeps: shared with this one, or via the host */
    session_leaf *l = &s->leaves[k];
    if (l->kept_by < 0 || l->kept_by == idx) continue;
    void *keeper = s->plans[l->kept_by].plan;
    if (s->backend->share_kept && s->backend->share_kept(keeper, l->node, s->plans[idx].plan, l->node))
      l->kept_by = idx;
    else if ((st = fetch_kept_param(s, l)))
      return st;
  }
  s->backend->memory_stats(s->plans[idx].plan, &s->stats);
  rlx_bindings b = {s->leaf_data, s->leaf_version};
  st = s->backend->run(s->plans[idx].plan, &b);
  if (st == RLX_OK) st = keep_leaf_outputs(s);
  if (st == RLX_OK) st = write_back(s);
  if (st == RLX_OK) s->stats.runs++;
  if (st == RLX_OK) release_old_plans(s);
  s->stats.plans_held = s->n_plans;
  return st;
}

/* The graph whose types describe the outputs now: the current plan's, or
 * the user graph before any run. */
static const rlx_graph *output_graph(const rlx_session *s) {
  return s->current >= 0 ? s->plans[s->current].g : s->n_plans ? s->plans[0].g : s->g;
}

int rlx_session_num_outputs(const rlx_session *s) {
  return !s ? 0 : s->deferred ? rt_deferred_num_outputs(s->deferred) : s->g->n_outputs;
}

int rlx_output_type(rlx_session *s, int index, rlx_dtype *dtype, int64_t *dims) {
  if (s && s->deferred) s = rt_deferred_current(s->deferred);   /* before the first run: no types yet */
  if (!s || index < 0 || index >= s->g->n_outputs) return -1;
  const rlx_graph *g = output_graph(s);
  return rlx_node_type(g, g->outputs[index], dtype, dims);
}

static rlx_status output(rlx_session *s, int index, void *dst, size_t nbytes) {
  if (!s) return rlx_set_error(RLX_ERR_INVALID, "rlx_output: session is NULL");
  if (s->deferred) {
    rlx_session *inner = rt_deferred_current(s->deferred);
    return inner ? rlx_output(inner, index, dst, nbytes) : rlx_set_error(RLX_ERR_INVALID, "rlx_output: call rlx_run first");
  }
  if (index < 0 || index >= s->g->n_outputs)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_output: index %d out of range (the graph has %d outputs)", index,
                         s->g->n_outputs);
  if (s->current < 0) return rlx_set_error(RLX_ERR_INVALID, "rlx_output: call rlx_run first");
  const rlx_graph *g = s->plans[s->current].g;
  const ir_node *n = &g->nodes[g->outputs[index]];
  size_t want = rlx_dtype_nbytes(n->out[0].dtype, ir_numel(&n->out[0].shape));
  if (nbytes != want) {
    char b[IR_SHAPE_STR_CAP];
    return rlx_set_error(RLX_ERR_INVALID, "rlx_output: output %d is %s%s = %zu bytes, got a buffer of %zu", index,
                         rlx_dtype_name(n->out[0].dtype), ir_shape_str(g, &n->out[0].shape, b, sizeof b), want,
                         nbytes);
  }
  if (nbytes && !dst) return rlx_set_error(RLX_ERR_INVALID, "rlx_output: dst is NULL");
  if (ir_ops[n->op].category == RLX_CAT_LEAF) {
    const void *src = n->op == RLX_OP_Constant ? s->leaf_data[n->id] : s->leaf_outputs[index];
    if (nbytes) memcpy(dst, src, nbytes);
    return RLX_OK;
  }
  return s->backend->read(s->plans[s->current].plan, n->id, 0, dst, nbytes);
}

rlx_status rlx_session_get_stats(const rlx_session *s, rlx_session_stats *out) {
  if (!s || !out) return rlx_set_error(RLX_ERR_INVALID, "rlx_session_get_stats: NULL argument");
  if (s->deferred) {
    const rlx_session *inner = rt_deferred_current(s->deferred);
    *out = inner ? inner->stats : (rlx_session_stats){0};
    return RLX_OK;
  }
  *out = s->stats;
  return RLX_OK;
}

/* ---------------------------------------------------------------- one thread at a time
 *
 * A session is not safe to share between threads (rlx.h). Sharing one is
 * detected, not raced: each call that reads or writes its state claims it
 * for its duration, and a call while another thread holds the claim fails
 * with RLX_ERR_INVALID instead of touching anything. */

static int session_enter(rlx_session *s, const char *fn) {
  int idle = 0;
  if (atomic_compare_exchange_strong_explicit(&s->in_use, &idle, 1, memory_order_acquire, memory_order_relaxed))
    return 1;
  rlx_set_error(RLX_ERR_INVALID,
                "%s: the session is in use by another thread (a session serves one thread at a time: compile one "
                "per thread, they share the compiled graph)", fn);
  return 0;
}

static void session_leave(rlx_session *s) { atomic_store_explicit(&s->in_use, 0, memory_order_release); }

#define SESSION_CALL(fn, call)                                                                                     \
  do {                                                                                                             \
    if (!s) return call;                                                                                           \
    if (!session_enter(s, fn)) return RLX_ERR_INVALID;                                                             \
    rlx_status st_ = call;                                                                                         \
    session_leave(s);                                                                                              \
    return st_;                                                                                                    \
  } while (0)

rlx_status rlx_run(rlx_session *s) {
  SESSION_CALL("rlx_run", s && s->deferred ? rt_deferred_run(s->deferred) : run_session(s));
}

/* A deferred session's params are bound by its builder. */
static rlx_status deferred_param(const char *fn) {
  return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: this session builds its graph at run from its value inputs and "
                       "binds its params itself", fn);
}

rlx_status rt_session_deferred(rt_deferred *d, rlx_session **out) {
  rlx_session *s = calloc(1, sizeof *s);
  if (!s) {
    rt_deferred_free(d);
    return rlx_set_error(RLX_ERR_NOMEM, "rlx_compile: out of memory");
  }
  s->deferred = d;
  s->current = -1;
  *out = s;
  return RLX_OK;
}

static rlx_status prepare(rlx_session *s) {
  if (!s) return rlx_set_error(RLX_ERR_INVALID, "rt_session_prepare: session is NULL");
  if (s->deferred || !s->backend->prepare) return RLX_OK;
  rlx_status st = s->store ? RLX_OK : rt_store_new(s->backend, s->opt.device_index, &s->store);
  if (st || !s->store) return st;
  const rlx_bindings bind = {s->leaf_data, s->leaf_version};
  return s->backend->prepare(rt_store_data(s->store), s->g, &s->opt, &bind);
}

rlx_status rt_session_prepare(rlx_session *s) { SESSION_CALL("rt_session_prepare", prepare(s)); }

rlx_status rlx_set_param(rlx_session *s, const char *name, const void *data, size_t nbytes) {
  SESSION_CALL("rlx_set_param", s && s->deferred ? deferred_param("rlx_set_param") : set_param(s, name, data, nbytes));
}

rlx_status rlx_set_param_ref(rlx_session *s, const char *name, const void *data, size_t nbytes) {
  SESSION_CALL("rlx_set_param_ref",
               s && s->deferred ? deferred_param("rlx_set_param_ref") : set_param_ref(s, name, data, nbytes));
}

rlx_status rlx_set_input(rlx_session *s, const char *name, const void *data, size_t nbytes) {
  SESSION_CALL("rlx_set_input", s && s->deferred ? rt_deferred_set_input(s->deferred, name, data, nbytes, -1, NULL)
                                            : set_input(s, name, data, nbytes));
}

rlx_status rlx_set_input_shaped(rlx_session *s, const char *name, const void *data, size_t nbytes, int rank,
                                const int64_t *dims) {
  SESSION_CALL("rlx_set_input_shaped", s && s->deferred ? rt_deferred_set_input(s->deferred, name, data, nbytes, rank, dims)
                                                   : set_input_shaped(s, name, data, nbytes, rank, dims));
}

rlx_status rlx_output(rlx_session *s, int index, void *dst, size_t nbytes) {
  SESSION_CALL("rlx_output", output(s, index, dst, nbytes));
}
