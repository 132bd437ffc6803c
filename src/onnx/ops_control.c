/* ops_control.c — ONNX control flow: If, Loop and Scan, whose bodies are
 * subgraphs (attributes of type GRAPH).
 *
 * An rlx graph is a static dataflow graph, so control flow is resolved at
 * import, where the rest of the importer already folds what it knows:
 * - If with a condition known at import imports its branch only; on a
 *   run-time condition it imports both and selects each output with Where
 *   (both branches must then give outputs of the same shape and type).
 * - Loop with a trip count and conditions known at import, and Scan over a
 *   static sequence length, are unrolled: the body is imported once per
 *   iteration with its inputs bound to that iteration's values. Known
 *   values fold through the body, so shape loops vanish; a Scan step's
 *   slices are views, and its outputs are concatenated once at the end.
 *   A Loop condition known only at run time is followed in the graph when
 *   a trip count bounds the loop and no scan output would get a run-time
 *   length (every iteration unrolled, its updates kept while it holds).
 * - If and Loop may also take a graph input as condition or trip count as
 *   a value input (docs/ONNX.md): the graph is built per value.
 * A body sees the values of enclosing graphs through the importer's name
 * table (ONNX forbids a subgraph to reuse an outer name); each iteration
 * rebinds the body's names. Unrolling is bounded (OX_MAX_BODY_NODES), so a
 * file asking for 10^18 iterations gets a status, not a hang. */
#include "onnx.h"

#include <stdlib.h>
#include <string.h>

/* Body nodes one import may unroll in all (nested loops included). */
#define OX_MAX_BODY_NODES (1 << 20)

static const ox_graph *body_attr(const ox_node *n, const char *name) {
  const ox_attr *a = ox_attr_get(n, name);
  return a && a->type == OX_ATTR_GRAPH ? a->g : NULL;
}

/* Binds name to a copy of v (v may live in the name table, which grows),
 * with the model inputs it depends on (so they can become value inputs). */
static rlx_status bind(ox_importer *im, const char *name, ox_value v) {
  if (!name || !*name) return RLX_OK;
  ox_node pseudo = {.name = name, .op_type = "(subgraph value)", .domain = "", .outputs = &name, .n_outputs = 1};
  rlx_status st = v.known ? ox_set_out_known(im, &pseudo, 0, v.dtype, v.rank, v.dims, v.ints, v.reals)
                          : ox_set_out(im, &pseudo, 0, v.node);
  if (!st) {
    ox_value *b = ox_lookup(im, name);
    b->node = v.node;
    b->deps = v.deps;
  }
  return st;
}

static rlx_status bind_int(ox_importer *im, const char *name, rlx_dtype t, int64_t i) {
  ox_value v = {.node = -1, .known = 1, .dtype = t, .rank = 0, .ints = &i, .numel = 1};
  return bind(im, name, v);
}

/* The value a body gives under name, copied. */
static rlx_status body_value(ox_importer *im, const ox_node *n, const char *name, ox_value *out) {
  ox_value *v = ox_lookup(im, name);
  if (!v) return ox_node_fail(im, n, RLX_ERR_FORMAT, "the body output \"%s\" is not defined in the body", name);
  *out = *v;
  return RLX_OK;
}

/* The rlx node of a value (a constant made for a known one). */
static rlx_node node_of_name(ox_importer *im, const char *name) {
  ox_node pseudo = {.name = name, .op_type = "(subgraph value)", .domain = "", .inputs = &name, .n_inputs = 1};
  return ox_in(im, &pseudo, 0);
}

/* Imports a body once: its initializers, then its nodes. */
static rlx_status import_body(ox_importer *im, const ox_node *n, const ox_graph *body) {
  im->body_nodes += body->n_nodes + body->n_inits;
  if (im->body_nodes > OX_MAX_BODY_NODES)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "unrolling it imports more than %d body nodes", OX_MAX_BODY_NODES);
  for (int i = 0; i < body->n_inits; i++) {
    ox_tensor *t = &body->inits[i];
    ox_node pseudo = {.name = t->name, .op_type = "(subgraph initializer)", .domain = "", .outputs = &t->name, .n_outputs = 1};
    rlx_status st = ox_tensor_resolve(im->arena, NULL, im->model_name, t);
    if (st) return ox_node_fail(im, n, st, "%s", rlx_last_error());
    int dt = ox_rlx_dtype(t->data_type);
    if (dt < 0 || t->rank > RLX_MAX_RANK)
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a subgraph initializer of type %s", ox_dtype_name(t->data_type));
    st = t->numel <= 4096 ? ox_known_from_tensor(im, &pseudo, 0, t)
                          : ox_set_out(im, &pseudo, 0, rlx_constant(im->g, (rlx_dtype)dt, t->rank, t->dims, t->data));
    if (st) return st;
  }
  for (int i = 0; i < body->n_nodes; i++) {
    rlx_status st = ox_import_node(im, &body->nodes[i], 0, i);
    if (st) return st;
  }
  return RLX_OK;
}

/* The single truth value of a known value (cond of If and Loop); -1 when
 * not known. */
static int known_truth(const ox_value *v) {
  if (!v || !v->known || v->numel != 1) return -1;
  return v->ints ? v->ints[0] != 0 : v->reals[0] != 0;
}

/* ---------------------------------------------------------------- If */

rlx_status ox_op_if(ox_importer *im, const ox_node *n) {
  const ox_graph *br[2] = {body_attr(n, "else_branch"), body_attr(n, "then_branch")};
  if (!br[0] || !br[1]) return ox_node_fail(im, n, RLX_ERR_FORMAT, "then_branch or else_branch is not a graph");
  for (int b = 0; b < 2; b++)
    if (br[b]->n_outputs < n->n_outputs)
      return ox_node_fail(im, n, RLX_ERR_FORMAT, "a branch gives %d outputs, the node has %d", br[b]->n_outputs, n->n_outputs);
  ox_value *cv = ox_in_value(im, n, 0);
  if (!cv) return ox_node_fail(im, n, RLX_ERR_INVALID, "the condition is missing");
  int c = known_truth(cv);
  rlx_status st;
  if (c >= 0) {   /* known: the branch taken only */
    if ((st = import_body(im, n, br[c]))) return st;
    for (int k = 0; k < n->n_outputs; k++) {
      ox_value v = {.node = -1};
      if ((st = body_value(im, n, br[c]->outputs[k].name, &v)) || (st = bind(im, n->outputs[k], v))) return st;
    }
    return RLX_OK;
  }
  rlx_node cond = ox_in(im, n, 0);
  if (cond < 0) return im->err;
  cond = rlx_reshape(im->g, cond, 0, NULL);
  if ((st = import_body(im, n, br[0])) || (st = import_body(im, n, br[1]))) return st;
  for (int k = 0; k < n->n_outputs; k++) {
    rlx_node e = node_of_name(im, br[0]->outputs[k].name), t = node_of_name(im, br[1]->outputs[k].name);
    if (e < 0 || t < 0) return im->err;
    int64_t de[RLX_MAX_RANK], dt[RLX_MAX_RANK];
    rlx_dtype te, tt;
    int re = rlx_node_type(im->g, e, &te, de), rt = rlx_node_type(im->g, t, &tt, dt);
    if (re != rt || te != tt || memcmp(de, dt, sizeof(int64_t) * (size_t)re)) {
      ox_in_known(im, n, 0);   /* a graph input as condition: its value picks the branch */
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "output %d differs in shape or type between the branches "
                          "and the condition is not known at import", k);
    }
    uint64_t deps = ox_lookup(im, br[0]->outputs[k].name)->deps | ox_lookup(im, br[1]->outputs[k].name)->deps;
    if ((st = ox_set_out(im, n, k, rlx_where(im->g, cond, t, e)))) return st;
    if (k < n->n_outputs && n->outputs[k][0]) ox_lookup(im, n->outputs[k])->deps |= deps;
  }
  return RLX_OK;
}

/* ---------------------------------------------------------------- stacking step outputs */

/* Per-step nodes of the scan outputs: steps[k * cap + t]. */
typedef struct {
  rlx_node *steps;
  int64_t n_steps, cap;
  int k;
} ox_stack;

static rlx_status stack_push(ox_importer *im, const ox_node *n, ox_stack *s, int64_t t, int k, rlx_node v) {
  if (t >= s->cap) {
    int64_t cap = s->cap ? s->cap * 2 : 16;
    rlx_node *p = calloc((size_t)(cap * s->k), sizeof *p);
    if (!p) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
    for (int j = 0; j < s->k; j++)
      for (int64_t i = 0; i < s->n_steps; i++) p[j * cap + i] = s->steps[j * s->cap + i];
    free(s->steps);
    s->steps = p;
    s->cap = cap;
  }
  s->steps[k * s->cap + t] = v;
  if (t + 1 > s->n_steps) s->n_steps = t + 1;
  return RLX_OK;
}

/* Output k of the stack: each step's value with a new axis of size 1 at
 * axis (of rank + 1; negative counts from the end), concatenated there,
 * in reverse step order when reverse. */
static rlx_node stack_output(ox_importer *im, const ox_node *n, ox_stack *s, int k, int64_t axis, int reverse) {
  rlx_graph *g = im->g;
  if (!s->n_steps) {
    ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a scan output of zero iterations");
    return -1;
  }
  int64_t dims[RLX_MAX_RANK + 1];
  int r = rlx_node_type(g, s->steps[k * s->cap], NULL, dims);
  if (axis < 0) axis += r + 1;
  if (r < 0 || r >= RLX_MAX_RANK || axis < 0 || axis > r) {
    ox_node_fail(im, n, RLX_ERR_INVALID, "scan output axis %lld of a rank-%d value", (long long)axis, r);
    return -1;
  }
  memmove(dims + axis + 1, dims + axis, sizeof(int64_t) * (size_t)(r - axis));
  dims[axis] = 1;
  rlx_node *parts = malloc(sizeof *parts * (size_t)s->n_steps);
  if (!parts) {
    ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
    return -1;
  }
  for (int64_t t = 0; t < s->n_steps; t++)
    parts[reverse ? s->n_steps - 1 - t : t] = rlx_reshape(g, s->steps[k * s->cap + t], r + 1, dims);
  rlx_node out = s->n_steps > 1 ? rlx_concat(g, (int)s->n_steps, parts, (int)axis) : parts[0];
  free(parts);
  if (out < 0) ox_check(im, n, out);
  return out;
}

/* ---------------------------------------------------------------- Loop */

/* Iterations of one Loop at most (each may fold to nothing). */
#define OX_MAX_ITERATIONS (1 << 20)

rlx_status ox_op_loop(ox_importer *im, const ox_node *n) {
  const ox_graph *body = body_attr(n, "body");
  if (!body) return ox_node_fail(im, n, RLX_ERR_FORMAT, "the body is not a graph");
  int n_state = n->n_inputs - 2;
  if (n_state < 0 || body->n_inputs != n_state + 2 || body->n_outputs < n_state + 1)
    return ox_node_fail(im, n, RLX_ERR_FORMAT, "%d inputs, a body of %d inputs and %d outputs", n->n_inputs,
                        body->n_inputs, body->n_outputs);
  int n_scan = body->n_outputs - 1 - n_state;
  int64_t trip = INT64_MAX;
  if (ox_has_in(n, 0)) {
    ox_value *m = ox_in_known(im, n, 0);   /* a graph input becomes a value input */
    if (!m || m->numel != 1 || !m->ints)
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "the trip count is not known at import");
    if (ox_ints_sym(im, m->ints, 1)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a trip count " OX_SYM_HINT);
    trip = m->ints[0];
  }
  /* A condition computed at run time is followed in the graph (alive: a
   * BOOL scalar node) when the trip count bounds the unrolling and no scan
   * output would get a run-time length: every iteration runs, its updates
   * kept only while alive. */
  int maskable = trip != INT64_MAX && n_scan == 0, cond = 1;
  rlx_node alive = -1;
  if (ox_has_in(n, 1) && (cond = known_truth(ox_in_value(im, n, 1))) < 0) {
    if (!maskable) {
      ox_in_known(im, n, 1);   /* a graph input as condition becomes a value input */
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "the condition is not known at import");
    }
    if ((alive = ox_in(im, n, 1)) < 0) return im->err;
    alive = rlx_reshape(im->g, alive, 0, NULL);
    cond = 1;
  }
  ox_value *state = calloc((size_t)n_state + 1, sizeof *state);
  ox_stack s = {.k = n_scan};
  rlx_status st = RLX_OK;
  if (!state) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n_state && !st; i++) {
    ox_value *v = ox_in_value(im, n, 2 + i);
    if (!v) st = ox_node_fail(im, n, RLX_ERR_INVALID, "loop-carried input %d is missing", i);
    else state[i] = *v;
  }
  for (int64_t it = 0; !st && it < trip && cond; it++) {
    if (it >= OX_MAX_ITERATIONS) {
      st = ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "unrolling it takes more than %d iterations", OX_MAX_ITERATIONS);
      break;
    }
    st = bind_int(im, body->inputs[0].name, RLX_I64, it);
    if (!st) st = alive < 0 ? bind_int(im, body->inputs[1].name, RLX_BOOL, cond)
                            : bind(im, body->inputs[1].name, (ox_value){.node = alive});
    for (int i = 0; i < n_state && !st; i++) st = bind(im, body->inputs[2 + i].name, state[i]);
    if (st || (st = import_body(im, n, body))) break;
    ox_value cv = {.node = -1};
    if ((st = body_value(im, n, body->outputs[0].name, &cv))) break;
    int c = known_truth(&cv);
    if (c < 0 && !maskable) {
      st = ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "the body's condition is not known at import "
                        "(followed at run time only with a trip count and no scan outputs)");
      break;
    }
    for (int i = 0; i < n_state && !st; i++) {
      if ((st = body_value(im, n, body->outputs[1 + i].name, &state[i])) || alive < 0) continue;
      /* updates of a finished loop are dropped */
      rlx_node o = node_of_name(im, body->inputs[2 + i].name), v = node_of_name(im, body->outputs[1 + i].name);
      int64_t dold[RLX_MAX_RANK], dnew[RLX_MAX_RANK];
      int ro = rlx_node_type(im->g, o, NULL, dold), rn = rlx_node_type(im->g, v, NULL, dnew);
      if (o < 0 || v < 0) st = im->err;
      else if (ro != rn || memcmp(dold, dnew, sizeof(int64_t) * (size_t)ro))
        st = ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "loop-carried value %d changes shape under a run-time condition", i);
      else state[i] = (ox_value){.node = rlx_where(im->g, alive, v, o)};
    }
    if (st) break;
    if (c < 0 || alive >= 0) {   /* alive &= the body's condition */
      rlx_node cn = node_of_name(im, body->outputs[0].name);
      if (cn < 0) {
        st = im->err;
        break;
      }
      cn = rlx_reshape(im->g, cn, 0, NULL);
      alive = alive < 0 ? cn : rlx_where(im->g, alive, cn, alive);
      if ((st = ox_check(im, n, alive))) break;
    } else cond = c;
    for (int k = 0; k < n_scan && !st; k++) {
      rlx_node v = node_of_name(im, body->outputs[1 + n_state + k].name);
      st = v < 0 ? im->err : stack_push(im, n, &s, it, k, v);
    }
  }
  for (int i = 0; i < n_state && i < n->n_outputs && !st; i++) st = bind(im, n->outputs[i], state[i]);
  for (int k = 0; k < n_scan && n_state + k < n->n_outputs && !st; k++) {
    if (!n->outputs[n_state + k][0]) continue;
    rlx_node v = stack_output(im, n, &s, k, 0, 0);
    st = v < 0 ? im->err : ox_set_out(im, n, n_state + k, v);
  }
  free(state);
  free(s.steps);
  return st;
}

/* ---------------------------------------------------------------- Scan */

/* One Scan over values of no batch axis (opset 9 on; opset 8 per batch
 * row): the final states into state[], the scan outputs into out[]. */
typedef struct {
  const ox_graph *body;
  int n_state, n_in, n_out;
  ox_value *state;            /* n_state: initial, then final */
  rlx_node *in;               /* n_in scan inputs */
  const int64_t *in_axes, *in_dirs, *out_axes, *out_dirs;   /* NULL: 0 */
  rlx_node *out;              /* n_out */
} ox_scan;

static int64_t at(const int64_t *a, int i) { return a ? a[i] : 0; }

static rlx_status scan_run(ox_importer *im, const ox_node *n, ox_scan *sc) {
  rlx_graph *g = im->g;
  int64_t len = -1, axes[RLX_MAX_RANK];
  int64_t *in_axes = calloc((size_t)sc->n_in + 1, sizeof *in_axes);
  if (!in_axes) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  rlx_status st = RLX_OK;
  for (int j = 0; j < sc->n_in && !st; j++) {
    int64_t dims[RLX_MAX_RANK];
    int r = rlx_node_type(g, sc->in[j], NULL, dims);
    int64_t a = at(sc->in_axes, j);
    if (a < 0) a += r;
    if (r < 1 || a < 0 || a >= r) {
      st = ox_node_fail(im, n, RLX_ERR_INVALID, "scan input %d: axis %lld of rank %d", j, (long long)at(sc->in_axes, j), r);
      break;
    }
    if (ir_dim_is_sym(dims[a]))
      st = ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a sequence length not known at import (a symbolic dim: "
                        "bind it at load, --bind)");
    else if (len >= 0 && dims[a] != len)
      st = ox_node_fail(im, n, RLX_ERR_INVALID, "scan inputs of lengths %lld and %lld", (long long)len, (long long)dims[a]);
    len = dims[a];
    in_axes[j] = a;
  }
  ox_stack s = {.k = sc->n_out};
  for (int64_t t = 0; !st && t < len; t++) {
    for (int i = 0; i < sc->n_state && !st; i++) st = bind(im, sc->body->inputs[i].name, sc->state[i]);
    for (int j = 0; j < sc->n_in && !st; j++) {
      int64_t dims[RLX_MAX_RANK];
      int r = rlx_node_type(g, sc->in[j], NULL, dims), a = (int)in_axes[j], k = 0;
      for (int d = 0; d < r; d++)
        if (d != a) axes[k++] = dims[d];
      rlx_node x = rlx_narrow(g, sc->in[j], a, at(sc->in_dirs, j) ? len - 1 - t : t, 1);
      ox_node pseudo = {.name = sc->body->inputs[sc->n_state + j].name, .op_type = "(scan input)", .domain = ""};
      st = ox_check(im, &pseudo, x = rlx_reshape(g, x, r - 1, axes));
      if (!st) st = bind(im, pseudo.name, (ox_value){.node = x});
    }
    if (st || (st = import_body(im, n, sc->body))) break;
    for (int i = 0; i < sc->n_state && !st; i++) st = body_value(im, n, sc->body->outputs[i].name, &sc->state[i]);
    for (int k = 0; k < sc->n_out && !st; k++) {
      rlx_node v = node_of_name(im, sc->body->outputs[sc->n_state + k].name);
      st = v < 0 ? im->err : stack_push(im, n, &s, t, k, v);
    }
  }
  for (int k = 0; k < sc->n_out && !st; k++)
    if ((sc->out[k] = stack_output(im, n, &s, k, at(sc->out_axes, k), (int)at(sc->out_dirs, k))) < 0) st = im->err;
  free(s.steps);
  free(in_axes);
  return st;
}

/* An int-list attribute of exactly count entries, or NULL when absent. */
static rlx_status axes_attr(ox_importer *im, const ox_node *n, const char *name, int count, const int64_t **out) {
  const ox_attr *a = ox_attr_get(n, name);
  *out = a ? a->ints : NULL;
  if (a && a->n_ints != count)
    return ox_node_fail(im, n, RLX_ERR_FORMAT, "%s has %lld entries, %d expected", name, (long long)a->n_ints, count);
  return RLX_OK;
}

/* Row b of x without its first axis. */
static rlx_node batch_row(rlx_graph *g, rlx_node x, int64_t b) {
  int64_t dims[RLX_MAX_RANK];
  int r = rlx_node_type(g, x, NULL, dims);
  return r < 1 ? -1 : rlx_reshape(g, rlx_narrow(g, x, 0, b, 1), r - 1, dims + 1);
}

rlx_status ox_op_scan(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  const ox_graph *body = body_attr(n, "body");
  int64_t n_in = ox_attr_int(n, "num_scan_inputs", -1);
  int v8 = im->opset < 9, first = v8;   /* opset 8: sequence_lens first, a batch axis */
  int n_state = n->n_inputs - first - (int)n_in;
  if (!body || n_in < 1 || n_state < 0 || body->n_inputs != n_state + n_in || body->n_outputs < n_state)
    return ox_node_fail(im, n, RLX_ERR_FORMAT, "num_scan_inputs %lld, %d inputs, a body of %d inputs and %d outputs",
                        (long long)n_in, n->n_inputs, body ? body->n_inputs : 0, body ? body->n_outputs : 0);
  int n_out = body->n_outputs - n_state;
  ox_scan sc = {.body = body, .n_state = n_state, .n_in = (int)n_in, .n_out = n_out};
  rlx_status st;
  if ((st = axes_attr(im, n, v8 ? "directions" : "scan_input_directions", (int)n_in, &sc.in_dirs)) ||
      (!v8 && ((st = axes_attr(im, n, "scan_input_axes", (int)n_in, &sc.in_axes)) ||
               (st = axes_attr(im, n, "scan_output_axes", n_out, &sc.out_axes)) ||
               (st = axes_attr(im, n, "scan_output_directions", n_out, &sc.out_dirs)))))
    return st;
  /* All inputs as nodes, then the outputs per batch row (one row after opset 8). */
  rlx_node *ins = calloc((size_t)(n_state + n_in) + 1, sizeof *ins);
  rlx_node *outs = calloc((size_t)(n_state + n_out) + 1, sizeof *outs);
  sc.state = calloc((size_t)n_state + 1, sizeof *sc.state);
  sc.out = calloc((size_t)n_out + 1, sizeof *sc.out);
  rlx_node *rows = NULL;
  int64_t batch = 1;
  if (!ins || !outs || !sc.state || !sc.out) {
    st = ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int i = 0; i < n_state + n_in; i++)
    if ((ins[i] = ox_in(im, n, first + i)) < 0) {
      st = im->err;
      goto done;
    }
  if (v8) {
    int64_t dims[RLX_MAX_RANK];
    if (rlx_node_type(g, ins[0], NULL, dims) < 1 || ir_dim_is_sym(dims[0])) {
      st = ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a batch size not known at import");
      goto done;
    }
    batch = dims[0];
    int64_t cnt;
    const int64_t *lens = ox_has_in(n, 0) ? ox_in_ints(im, n, 0, &cnt) : NULL;
    if (ox_has_in(n, 0)) {   /* sequence_lens: only the full length */
      int64_t d2[RLX_MAX_RANK];
      int ok = lens && cnt == batch && rlx_node_type(g, ins[n_state], NULL, d2) >= 2;
      for (int64_t b = 0; ok && b < batch; b++) ok = lens[b] == d2[1];
      if (!ok) {
        st = ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "sequence_lens other than the full length");
        goto done;
      }
    }
    if (!(rows = calloc((size_t)(batch * (n_state + n_out)) + 1, sizeof *rows))) {
      st = ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
      goto done;
    }
  }
  for (int64_t b = 0; b < batch; b++) {
    for (int i = 0; i < n_state; i++) {
      rlx_node x = v8 ? batch_row(g, ins[i], b) : ins[i];
      if ((st = ox_check(im, n, x))) goto done;
      sc.state[i] = (ox_value){.node = x};
      if (!v8) sc.state[i] = *ox_in_value(im, n, first + i);   /* keeps a known state known */
    }
    sc.in = ins + n_state;
    rlx_node per_row[RLX_MAX_RANK];
    if (v8) {   /* the batch axis dropped: the sequence axis (1) is axis 0 */
      if (n_in > RLX_MAX_RANK) {
        st = ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "%lld scan inputs", (long long)n_in);
        goto done;
      }
      for (int j = 0; j < n_in; j++)
        if ((st = ox_check(im, n, per_row[j] = batch_row(g, ins[n_state + j], b)))) goto done;
      sc.in = per_row;
    }
    if ((st = scan_run(im, n, &sc))) goto done;
    for (int i = 0; i < n_state + n_out; i++) {
      rlx_node v = i < n_state ? sc.state[i].node : sc.out[i - n_state];
      if (i < n_state && v < 0 && (v = node_of_name(im, body->outputs[i].name)) < 0) {
        st = im->err;
        goto done;
      }
      if (v8) rows[i * batch + b] = v;
      else outs[i] = v;
    }
  }
  for (int i = 0; i < n_state + n_out && i < n->n_outputs; i++) {
    if (!v8 && i < n_state) {   /* a final state as the body left it (known or a node) */
      if ((st = bind(im, n->outputs[i], sc.state[i]))) goto done;
      continue;
    }
    rlx_node v = outs[i];
    if (v8) {   /* the rows stacked on a new batch axis */
      ox_stack s = {.steps = rows + i * batch, .n_steps = batch, .cap = batch, .k = 1};
      v = stack_output(im, n, &s, 0, 0, 0);
    }
    if ((st = v < 0 ? im->err : ox_set_out(im, n, i, v))) goto done;
  }
done:
  free(ins);
  free(outs);
  free(sc.state);
  free(sc.out);
  free(rows);
  return st;
}

/* Optionals: rlx has no optional type; an optional input is given as its
 * tensor, so one that is present holds an element. */
rlx_status ox_op_optional_has_element(ox_importer *im, const ox_node *n) {
  int64_t has = ox_has_in(n, 0);
  if (has && !ox_in_value(im, n, 0)) return ox_node_fail(im, n, RLX_ERR_INVALID, "input \"%s\" is undefined", n->inputs[0]);
  return ox_set_out_known(im, n, 0, RLX_BOOL, 0, NULL, &has, NULL);
}
