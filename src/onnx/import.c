/* import.c — an ONNX graph into an rlx graph: leaves (inputs, weights),
 * one op-table row per node, the outputs. Values the importer can compute
 * (shapes, axes, small constants) are kept known and fold at import, so a
 * model's shape computations never reach the rlx graph. */
#include "onnx.h"
#include "../ir/hash.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Initializers of at most this many elements are known values (and fold);
 * larger ones become Params bound to the file's bytes. */
#define OX_KNOWN_MAX 64

/* ---------------------------------------------------------------- name table */

/* keyed (ir/hash.h): a file cannot choose names that all collide */
static uint64_t hash_name(const char *s) { return ir_hash_str(s); }

static struct ox_slot *slot(ox_importer *im, const char *name, int create) {
  if (create && (im->count + 1) * 2 > im->cap) {
    size_t cap = im->cap ? im->cap * 2 : 256;
    struct ox_slot *s = calloc(cap, sizeof *s);
    if (!s) return NULL;
    for (size_t i = 0; i < im->cap; i++) {
      if (!im->slots[i].name) continue;
      size_t j = hash_name(im->slots[i].name) & (cap - 1);
      while (s[j].name) j = (j + 1) & (cap - 1);
      s[j] = im->slots[i];
    }
    free(im->slots);
    im->slots = s;
    im->cap = cap;
  }
  if (!im->cap) return NULL;
  size_t j = hash_name(name) & (im->cap - 1);
  while (im->slots[j].name) {
    if (!strcmp(im->slots[j].name, name)) return &im->slots[j];
    j = (j + 1) & (im->cap - 1);
  }
  if (!create) return NULL;
  im->slots[j].name = name;
  im->slots[j].v.node = -1;
  im->count++;
  return &im->slots[j];
}

ox_value *ox_lookup(ox_importer *im, const char *name) {
  struct ox_slot *s = slot(im, name, 0);
  return s ? &s->v : NULL;
}

/* ---------------------------------------------------------------- errors and attributes */

rlx_status ox_node_fail(ox_importer *im, const ox_node *n, rlx_status st, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  im->err = st;
  int64_t opset = ox_opset_of(im->model->opsets, im->model->n_opsets, n->domain);
  return rlx_set_error(st, "%s: ONNX: node \"%s\" (%s%s%s, opset %lld): %s", im->model_name, n->name, n->op_type,
                       *n->domain ? ", domain " : "", n->domain, (long long)opset, msg);
}

rlx_status ox_check(ox_importer *im, const ox_node *n, rlx_node v) {
  if (v >= 0) return RLX_OK;
  rlx_status st = rlx_graph_status(im->g);
  return ox_node_fail(im, n, st ? st : RLX_ERR_INTERNAL, "%s", rlx_last_error());
}

const ox_attr *ox_attr_get(const ox_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}
int64_t ox_attr_int(const ox_node *n, const char *name, int64_t dflt) {
  const ox_attr *a = ox_attr_get(n, name);
  return a ? a->i : dflt;
}
double ox_attr_float(const ox_node *n, const char *name, double dflt) {
  const ox_attr *a = ox_attr_get(n, name);
  return a ? a->f : dflt;
}
const char *ox_attr_str(const ox_node *n, const char *name, const char *dflt) {
  const ox_attr *a = ox_attr_get(n, name);
  return a && a->s ? a->s : dflt;
}

/* ---------------------------------------------------------------- values */

int ox_has_in(const ox_node *n, int i) { return i >= 0 && i < n->n_inputs && n->inputs[i][0]; }

ox_value *ox_in_value(ox_importer *im, const ox_node *n, int i) {
  if (!ox_has_in(n, i)) return NULL;
  return ox_lookup(im, n->inputs[i]);
}

void ox_store(rlx_dtype t, void *dst, int64_t i, double r, int64_t k) {
  uint64_t u = (uint64_t)k;   /* integers wrap to their width */
  switch (t) {
  case RLX_F32: ((float *)dst)[i] = (float)r; break;
  case RLX_F64: ((double *)dst)[i] = r; break;
  case RLX_F16: ((uint16_t *)dst)[i] = rlx_f32_to_f16((float)r); break;
  case RLX_BF16: ((uint16_t *)dst)[i] = rlx_f32_to_bf16((float)r); break;
  case RLX_I8: case RLX_U8: ((uint8_t *)dst)[i] = (uint8_t)u; break;
  case RLX_I16: case RLX_U16: ((uint16_t *)dst)[i] = (uint16_t)u; break;
  case RLX_I32: case RLX_U32: ((uint32_t *)dst)[i] = (uint32_t)u; break;
  case RLX_BOOL: ((uint8_t *)dst)[i] = k != 0; break;
  default: ((uint64_t *)dst)[i] = u; break;
  }
}

/* Writes element i of a known value in dtype t at dst. */
static void put_elem(rlx_dtype t, void *dst, int64_t i, const ox_value *v) {
  double r = v->reals ? v->reals[i] : (double)v->ints[i];
  ox_store(t, dst, i, r, v->ints ? v->ints[i] : ox_f2i(r));
}

static rlx_node node_of(ox_importer *im, ox_value *v) {
  if (v->node >= 0 || !v->known) return v->node;
  for (int64_t i = 0; i < v->numel && v->ints; i++)
    if (ir_dim_is_sym(v->ints[i])) return -1;   /* a symbolic shape has no constant */
  size_t nb = rlx_dtype_nbytes(v->dtype, v->numel);
  void *buf = malloc(nb ? nb : 1);
  if (!buf) return -1;
  for (int64_t i = 0; i < v->numel; i++) put_elem(v->dtype, buf, i, v);
  v->node = rlx_constant(im->g, v->dtype, v->rank, v->dims, buf);
  free(buf);
  return v->node;
}

rlx_node ox_in(ox_importer *im, const ox_node *n, int i) {
  ox_value *v = ox_in_value(im, n, i);
  if (!v) {
    ox_node_fail(im, n, RLX_ERR_INVALID, "input %d (\"%s\") is missing or undefined", i,
                 i < n->n_inputs ? n->inputs[i] : "");
    return -1;
  }
  rlx_node r = node_of(im, v);
  if (r < 0) {
    if (rlx_graph_status(im->g)) ox_check(im, n, -1);
    else ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "input \"%s\" is a shape with symbolic dims used as data "
                      "(bind the dims at load: --bind)", n->inputs[i]);
  }
  return r;
}

ox_value *ox_in_known(ox_importer *im, const ox_node *n, int i) {
  ox_value *v = ox_in_value(im, n, i);
  if (v && !v->known && v->deps && im->want) {
    for (int k = 0; k < im->n_inputs && k < 64; k++)
      if (v->deps >> k & 1) im->want[k] = OX_WANT_CONTENTS;
    im->wanted = 1;
  }
  return v && v->known ? v : NULL;
}

const int64_t *ox_in_ints(ox_importer *im, const ox_node *n, int i, int64_t *count) {
  ox_value *v = ox_in_known(im, n, i);
  if (!v || !v->ints) return NULL;
  *count = v->numel;
  return v->ints;
}

static struct ox_slot *out_slot(ox_importer *im, const ox_node *n, int i) {
  if (i >= n->n_outputs || !n->outputs[i][0]) return NULL;
  struct ox_slot *s = slot(im, n->outputs[i], 1);
  if (s) s->v = (ox_value){.node = -1};
  return s;
}

int32_t ox_value_type(const ox_value *v) {
  static const int32_t of_dtype[RLX_DTYPE_COUNT] = {
    [RLX_F32] = OX_FLOAT, [RLX_F16] = OX_FLOAT16, [RLX_BF16] = OX_BFLOAT16, [RLX_F64] = OX_DOUBLE,
    [RLX_I8] = OX_INT8, [RLX_U8] = OX_UINT8, [RLX_I32] = OX_INT32, [RLX_I64] = OX_INT64, [RLX_BOOL] = OX_BOOL,
    [RLX_I16] = OX_INT16, [RLX_U16] = OX_UINT16, [RLX_U32] = OX_UINT32, [RLX_U64] = OX_UINT64};
  return v->onnx_type ? v->onnx_type : (unsigned)v->dtype < RLX_DTYPE_COUNT ? of_dtype[v->dtype] : OX_UNDEFINED;
}

/* The narrow type of a U8 output of data movement (its first input's), else 0. */
static int32_t pass_on_type(ox_importer *im, const ox_node *n, rlx_node v) {
  const ox_value *in = ox_in_value(im, n, 0);
  rlx_dtype t = RLX_DTYPE_COUNT;
  if (!in || !in->onnx_type) return 0;
  if (v >= 0) rlx_node_type(im->g, v, &t, NULL);
  return v < 0 || t == RLX_U8 ? in->onnx_type : 0;
}

rlx_status ox_set_out(ox_importer *im, const ox_node *n, int i, rlx_node v) {
  rlx_status st = ox_check(im, n, v);
  if (st) return st;
  if (i >= n->n_outputs || !n->outputs[i][0]) return RLX_OK;   /* an unused optional output */
  uint64_t deps = 0;   /* before out_slot, which may move the table */
  for (int k = 0; k < n->n_inputs; k++) {
    const ox_value *in = ox_in_value(im, n, k);
    if (in && !in->known) deps |= in->deps;
  }
  int32_t narrow = pass_on_type(im, n, v);
  struct ox_slot *s = out_slot(im, n, i);
  if (!s) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  s->v.node = v;
  s->v.deps = deps;
  s->v.onnx_type = narrow;
  return RLX_OK;
}

rlx_status ox_set_out_typed(ox_importer *im, const ox_node *n, int i, rlx_node v, int32_t onnx_type) {
  rlx_status st = ox_set_out(im, n, i, v);
  if (st || i >= n->n_outputs || !n->outputs[i][0]) return st;
  ox_lookup(im, n->outputs[i])->onnx_type = ox_is_narrow(onnx_type) ? onnx_type : 0;
  return RLX_OK;
}

rlx_status ox_set_out_known(ox_importer *im, const ox_node *n, int i, rlx_dtype t, int rank, const int64_t *dims,
                            const int64_t *ints, const double *reals) {
  if (i >= n->n_outputs || !n->outputs[i][0]) return RLX_OK;
  if (rank < 0 || rank > RLX_MAX_RANK) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "rank %d", rank);
  int64_t numel = 1, dcopy[RLX_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    if (dims[d] < 0 || (dims[d] && numel > (INT64_MAX / 8) / dims[d]))
      return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a known value of dim %lld", (long long)dims[d]);
    numel *= (dcopy[d] = dims[d]);
  }
  dims = dcopy;   /* dims may point into the table, which out_slot may move */
  int32_t narrow = t == RLX_U8 ? pass_on_type(im, n, -1) : 0;
  struct ox_slot *s = out_slot(im, n, i);
  if (!s) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  ox_value *v = &s->v;
  v->known = 1;
  v->onnx_type = narrow;
  v->dtype = t;
  v->rank = rank;
  v->numel = numel;
  if (rank) memcpy(v->dims, dims, (size_t)rank * sizeof *dims);
  size_t nb = (size_t)(numel ? numel : 1) * 8, cb = (size_t)numel * 8;
  if (ints) {
    if (!(v->ints = ox_alloc(im->arena, nb))) return RLX_ERR_NOMEM;
    if (cb) memcpy(v->ints, ints, cb);
  } else {
    if (!(v->reals = ox_alloc(im->arena, nb))) return RLX_ERR_NOMEM;
    if (cb) memcpy(v->reals, reals, cb);
  }
  return RLX_OK;
}

/* A known value from tensor bytes (initializers, Constant). */
rlx_status ox_known_from_tensor(ox_importer *im, const ox_node *n, int i, const ox_tensor *t) {
  int dt = ox_rlx_dtype(t->data_type);
  if (dt < 0 || t->rank > RLX_MAX_RANK)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a tensor of type %s, rank %d", ox_dtype_name(t->data_type), t->rank);
  int is_int = ir_is_int(dt) || dt == RLX_BOOL;
  void *buf = ox_alloc(im->arena, (size_t)(t->numel ? t->numel : 1) * 8);
  const void *data = ox_aligned_data(im->arena, t);
  if (!buf || (!data && t->numel)) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t k = 0; k < t->numel; k++) {
    double r = rlx_value_as_f64((rlx_dtype)dt, data, k);
    if (is_int) {
      if (dt == RLX_I64) ((int64_t *)buf)[k] = ((const int64_t *)data)[k];
      else ((int64_t *)buf)[k] = ox_f2i(r);
    } else ((double *)buf)[k] = r;
  }
  rlx_status st = ox_set_out_known(im, n, i, (rlx_dtype)dt, t->rank, t->dims, is_int ? buf : NULL, is_int ? NULL : buf);
  if (!st && i < n->n_outputs && n->outputs[i][0]) ox_lookup(im, n->outputs[i])->onnx_type = ox_is_narrow(t->data_type) ? t->data_type : 0;
  return st;
}

/* ---------------------------------------------------------------- symbolic dims */

/* The dim of an ONNX dim_param: its binding when given, else a symbolic
 * dim of the graph (the name made a valid rlx symbol name). */
int64_t ox_dim_of_param(rlx_graph *g, const char *param, int n_bind, const char *const *names, const int64_t *values) {
  for (int i = 0; i < n_bind; i++)
    if (!strcmp(names[i], param)) return values[i];
  char sym[65];
  size_t k = 0;
  if (!((param[0] >= 'A' && param[0] <= 'Z') || (param[0] >= 'a' && param[0] <= 'z') || param[0] == '_')) sym[k++] = '_';
  for (const char *p = param; *p && k < 64; p++) {
    char c = *p;
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    sym[k++] = ok ? c : '_';
  }
  sym[k] = 0;
  return rlx_dim_sym(g, sym);
}

/* ---------------------------------------------------------------- the graph */

/* A value input: its contents (of the declared type; its shape, or the
 * declared one when given none) as a known value. */
static rlx_status add_value_input(ox_importer *im, const ox_value_info *vi, const ox_input_value *val) {
  const char *name = vi->name;
  ox_node pseudo = {.name = name, .op_type = "(value input)", .domain = "", .outputs = &name, .n_outputs = 1};
  if (ox_lookup(im, vi->name)) return ox_node_fail(im, &pseudo, RLX_ERR_FORMAT, "a second input of that name");
  ox_tensor t = {.name = vi->name, .data_type = vi->elem_type, .rank = val->rank < 0 ? vi->rank : val->rank,
                 .numel = 1, .data = val->data, .nbytes = val->nbytes};
  if (t.rank != vi->rank) return ox_node_fail(im, &pseudo, RLX_ERR_SHAPE, "rank %d given, %d declared", t.rank, vi->rank);
  for (int d = 0; d < t.rank; d++) {
    t.dims[d] = val->rank < 0 ? vi->dims[d] : val->dims[d];
    if (t.dims[d] < 0) return ox_node_fail(im, &pseudo, RLX_ERR_SHAPE, "its contents shape the graph: give its dims");
    if (vi->dims[d] >= 0 && t.dims[d] != vi->dims[d])
      return ox_node_fail(im, &pseudo, RLX_ERR_SHAPE, "dim %d is %lld, declared %lld", d, (long long)t.dims[d],
                          (long long)vi->dims[d]);
    t.numel = t.dims[d] && t.numel > INT64_MAX / t.dims[d] ? INT64_MAX : t.numel * t.dims[d];
  }
  int dt = ox_rlx_dtype(vi->elem_type);
  if (dt < 0 || (uint64_t)t.numel > SIZE_MAX / 8 || rlx_dtype_nbytes((rlx_dtype)dt, t.numel) != val->nbytes)
    return ox_node_fail(im, &pseudo, RLX_ERR_SHAPE, "%zu bytes for %lld elements of %s", val->nbytes, (long long)t.numel,
                        ox_dtype_name(vi->elem_type));
  rlx_status st = ox_known_from_tensor(im, &pseudo, 0, &t);
  return st;
}

/* Dim d of model input index as declared: a number, its dim_param's dim, or
 * a symbolic dim of its own. */
static int64_t input_dim(ox_importer *im, const ox_value_info *vi, int index, int d) {
  if (vi->dims[d] >= 0) return vi->dims[d];
  if (vi->dim_params[d]) return ox_dim_of_param(im->g, vi->dim_params[d], im->n_bind, im->bind_names, im->bind_values);
  char name[32];
  snprintf(name, sizeof name, "in%d_d%d", index, d);
  return ox_dim_of_param(im->g, name, im->n_bind, im->bind_names, im->bind_values);
}

int ox_ints_sym(ox_importer *im, const int64_t *ints, int64_t count) {
  const ox_graph *g = im->model->graph;
  int found = 0;
  for (int64_t i = 0; ints && i < count; i++) {
    if (!ir_dim_is_sym(ints[i])) continue;
    found = 1;
    for (int j = 0, k = 0; im->want && j < g->n_inputs && k < im->n_inputs; j++) {
      if (ox_is_defined(g, g->inputs[j].name)) continue;
      for (int d = 0; d < g->inputs[j].rank && d < RLX_MAX_RANK; d++)
        if (input_dim(im, &g->inputs[j], k, d) == ints[i]) {
          if (!im->want[k]) im->want[k] = OX_WANT_DIMS;
          im->wanted = 1;
        }
      k++;
    }
  }
  return found;
}

static rlx_status add_input(ox_importer *im, const ox_value_info *vi, int index) {
  ox_node pseudo = {.name = vi->name, .op_type = "(graph input)", .domain = ""};
  int dt = ox_rlx_dtype(vi->elem_type);
  if (!vi->has_type || dt < 0)
    return ox_node_fail(im, &pseudo, RLX_ERR_UNSUPPORTED, "input of type %s", vi->has_type ? ox_dtype_name(vi->elem_type) : "(not a tensor)");
  if (!vi->has_shape) return ox_node_fail(im, &pseudo, RLX_ERR_UNSUPPORTED, "an input without a shape (its rank is unknown)");
  if (vi->rank > RLX_MAX_RANK) return ox_node_fail(im, &pseudo, RLX_ERR_UNSUPPORTED, "rank %d (at most %d)", vi->rank, RLX_MAX_RANK);
  const ox_input_value *val = im->values && im->values[index].data ? &im->values[index] : NULL;
  if (val) return add_value_input(im, vi, val);
  int64_t dims[RLX_MAX_RANK];
  for (int d = 0; d < vi->rank; d++) dims[d] = input_dim(im, vi, index, d);
  struct ox_slot *s = slot(im, vi->name, 1);
  if (!s) return RLX_ERR_NOMEM;
  if (s->v.node >= 0 || s->v.known) return ox_node_fail(im, &pseudo, RLX_ERR_FORMAT, "a second input of that name");
  s->v.node = rlx_input(im->g, vi->name, (rlx_dtype)dt, vi->rank, dims);
  s->v.deps = index < 64 ? (uint64_t)1 << index : 0;
  s->v.onnx_type = ox_is_narrow(vi->elem_type) ? vi->elem_type : 0;
  return ox_check(im, &pseudo, s->v.node);
}

static rlx_status add_initializer(ox_importer *im, ox_tensor *t, ox_external *x) {
  ox_node pseudo = {.name = t->name, .op_type = "(initializer)", .domain = "", .outputs = &t->name, .n_outputs = 1};
  if (!*t->name) return ox_node_fail(im, &pseudo, RLX_ERR_FORMAT, "an initializer without a name");
  rlx_status st = ox_tensor_resolve(im->arena, x, im->model_name, t);
  if (st) return im->err = st;   /* the message names the model and the tensor */
  if (ox_lookup(im, t->name)) return ox_node_fail(im, &pseudo, RLX_ERR_FORMAT, "a second initializer of that name");
  int dt = ox_rlx_dtype(t->data_type);
  if (t->rank > RLX_MAX_RANK) return ox_node_fail(im, &pseudo, RLX_ERR_UNSUPPORTED, "rank %d", t->rank);
  if (t->numel <= OX_KNOWN_MAX || (ir_is_int(dt) && t->numel <= 4096)) return ox_known_from_tensor(im, &pseudo, 0, t);
  struct ox_slot *s = slot(im, t->name, 1);
  if (!s) return RLX_ERR_NOMEM;
  s->v.node = rlx_param(im->g, t->name, (rlx_dtype)dt, t->rank, t->dims);
  s->v.onnx_type = ox_is_narrow(t->data_type) ? t->data_type : 0;
  return ox_check(im, &pseudo, s->v.node);
}

int ox_is_defined(const ox_graph *g, const char *name) {
  for (int i = 0; i < g->n_inits; i++)
    if (!strcmp(g->inits[i].name, name)) return 1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_outputs; k++)
      if (!strcmp(g->nodes[i].outputs[k], name)) return 1;
  return 0;
}

rlx_status ox_import(ox_importer *im, ox_external *x) {
  const ox_graph *g = im->model->graph;
  im->opset = ox_opset_of(im->model->opsets, im->model->n_opsets, "");
  if (im->opset == 0) im->opset = 1;
  rlx_status st;
  for (int i = 0; i < g->n_inits; i++)
    if ((st = add_initializer(im, &g->inits[i], x))) return st;
  for (int i = 0, k = 0; i < g->n_inputs; i++) {
    if (ox_is_defined(g, g->inputs[i].name)) continue;   /* an initializer (a default value) or a node's output */
    if ((st = add_input(im, &g->inputs[i], k++))) return st;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    if (im->want) memset(im->want, 0, (size_t)im->n_inputs);
    im->wanted = 0;
    if ((st = ox_import_node(im, &g->nodes[i], 0, i))) return st;
  }
  im->wanted = 0;
  rlx_node *outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
  if (!outs) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", im->model_name);
  for (int i = 0; i < g->n_outputs; i++) {
    ox_node pseudo = {.name = g->outputs[i].name, .op_type = "(graph output)", .domain = "",
                      .inputs = &g->outputs[i].name, .n_inputs = 1};
    rlx_node v = ox_in(im, &pseudo, 0);
    if (v < 0) {
      free(outs);
      return im->err;
    }
    outs[i] = v;
  }
  st = rlx_graph_set_outputs(im->g, g->n_outputs, outs);
  free(outs);
  return st;
}
