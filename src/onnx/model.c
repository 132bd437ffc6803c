/* model.c — the public rlx_model object: load (map, detect the format,
 * parse), the import on first use, compile with the weights bound, the
 * input/output queries and the summary. */
#include "onnx.h"
#include "../runtime/runtime.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rlx_model {
  rlx_model_format format;
  char *name;               /* path or "<memory>" */
  fmt_mapping map;          /* empty when the bytes are borrowed */
  ox_arena arena;
  ox_external ext;
  ox_model onnx;
  rlx_graph *g;             /* made at load (dim tokens); nodes added by the import */
  int imported;             /* 0 not yet, 1 done, -1 failed (status kept), 2 deferred (value inputs) */
  rlx_status import_status;
  char import_error[512];
  pthread_mutex_t lock;
  /* inputs: graph inputs without an initializer */
  const ox_value_info **inputs;
  const char **input_names;
  /* [n_inputs]: OX_WANT_CONTENTS for a value input (its contents shape the
   * graph), OX_WANT_DIMS for one whose dims alone do (symbolic dims that
   * shape values are computed from: bound per set of dims at run). */
  unsigned char *value;
  int n_inputs;
  int n_bind;
  char **bind_names;
  int64_t *bind_values;
};

const char *rlx_model_format_name(rlx_model_format f) { return f == RLX_MODEL_ONNX ? "ONNX" : "unknown"; }
rlx_model_format rlx_model_get_format(const rlx_model *m) { return m ? m->format : RLX_MODEL_FORMAT_COUNT; }

void rlx_model_free(rlx_model *m) {
  if (!m) return;
  rlx_graph_free(m->g);
  ox_external_free(&m->ext);
  ox_arena_free(&m->arena);
  fmt_unmap(&m->map);
  for (int i = 0; i < m->n_bind; i++) free(m->bind_names[i]);
  free(m->bind_names);
  free(m->bind_values);
  free((void *)m->inputs);
  free((void *)m->input_names);
  free(m->value);
  free(m->name);
  pthread_mutex_destroy(&m->lock);
  free(m);
}


static rlx_status load_common(rlx_model *m, const uint8_t *data, size_t size, const rlx_model_options *opt) {
  if (size >= 4 && !memcmp(data, "GGUF", 4))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: a GGUF file: load it with rlx_llm_load", m->name);
  m->format = RLX_MODEL_ONNX;
  rlx_status st = ox_parse_model(&m->arena, m->name, data, size, &m->onnx);
  if (st) return st;
  const ox_graph *g = m->onnx.graph;
  m->inputs = calloc((size_t)g->n_inputs + 1, sizeof *m->inputs);
  m->input_names = calloc((size_t)g->n_inputs + 1, sizeof *m->input_names);
  m->value = calloc((size_t)g->n_inputs + 1, 1);
  if (!m->inputs || !m->input_names || !m->value) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", m->name);
  for (int i = 0; i < g->n_inputs; i++)
    if (!ox_is_defined(g, g->inputs[i].name)) {
      m->input_names[m->n_inputs] = g->inputs[i].name;
      m->inputs[m->n_inputs++] = &g->inputs[i];
    }
  if (!(m->g = rlx_graph_new(g->name))) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", m->name);
  /* The symbolic dims of the inputs and outputs exist from the start, so the
   * queries below only read the graph. */
  for (int i = 0; i < g->n_inputs + g->n_outputs; i++) {
    const ox_value_info *v = i < g->n_inputs ? &g->inputs[i] : &g->outputs[i - g->n_inputs];
    for (int d = 0; d < v->rank; d++)
      if (v->dims[d] < 0 && v->dim_params[d]) ox_dim_of_param(m->g, v->dim_params[d], 0, NULL, NULL);
  }
  if ((st = rlx_graph_status(m->g))) return st;
  /* Every initializer's data is checked (and external files mapped) now,
   * so a bad file fails at load, not at the first compile. */
  for (int i = 0; i < g->n_inits; i++) {
    ox_tensor *t = &g->inits[i];
    if (ox_rlx_dtype(t->data_type) < 0) continue;   /* reported by the import if used */
    if ((st = ox_tensor_resolve(&m->arena, &m->ext, m->name, t))) return st;
  }
  if (opt && opt->n_bind > 0) {
    if (!opt->bind_names || !opt->bind_values) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_load: n_bind without names or values");
    m->bind_names = calloc((size_t)opt->n_bind, sizeof *m->bind_names);
    m->bind_values = calloc((size_t)opt->n_bind, sizeof *m->bind_values);
    if (!m->bind_names || !m->bind_values) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", m->name);
    for (int i = 0; i < opt->n_bind; i++) {
      if (!opt->bind_names[i] || opt->bind_values[i] <= 0)
        return rlx_set_error(RLX_ERR_INVALID, "rlx_model_load: binding %d needs a name and a value > 0", i);
      if (!(m->bind_names[i] = strdup(opt->bind_names[i]))) return rlx_set_error(RLX_ERR_NOMEM, "out of memory");
      m->bind_values[i] = opt->bind_values[i];
      m->n_bind = i + 1;
    }
  }
  return RLX_OK;
}

static rlx_model *model_new(const char *name) {
  rlx_model *m = calloc(1, sizeof *m);
  if (!m || !(m->name = strdup(name))) {
    free(m);
    rlx_set_error(RLX_ERR_NOMEM, "rlx_model_load: out of memory");
    return NULL;
  }
  pthread_mutex_init(&m->lock, NULL);
  return m;
}

rlx_status rlx_model_load(const char *path, const rlx_model_options *opt, rlx_model **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_load: out is NULL");
  *out = NULL;
  if (!path) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_load: path is NULL");
  rlx_model *m = model_new(path);
  if (!m) return RLX_ERR_NOMEM;
  rlx_status st = fmt_map_file(path, &m->map);
  if (!st) {
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 1;
    char *dir = ox_alloc(&m->arena, dl + 1);
    if (!dir) st = RLX_ERR_NOMEM;
    else {
      memcpy(dir, slash ? path : ".", dl);
      if (slash && dl == 0) dir[0] = '/';
      m->ext.dir = dir;
      st = load_common(m, m->map.data, m->map.size, opt);
    }
  }
  if (st) {
    rlx_model_free(m);
    return st;
  }
  *out = m;
  return RLX_OK;
}

rlx_status rlx_model_load_memory(const void *data, size_t size, const rlx_model_options *opt, rlx_model **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_load_memory: out is NULL");
  *out = NULL;
  if (!data && size) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_load_memory: data is NULL");
  rlx_model *m = model_new("<memory>");
  if (!m) return RLX_ERR_NOMEM;
  rlx_status st = load_common(m, data, size, opt);
  if (st) {
    rlx_model_free(m);
    return st;
  }
  *out = m;
  return RLX_OK;
}

/* ---------------------------------------------------------------- import and compile */

_Static_assert((int)OX_WANT_CONTENTS == (int)RT_USED_CONTENTS && (int)OX_WANT_DIMS == (int)RT_USED_DIMS, "one code for both");

/* Imports the model into g, with the contents of the value inputs given in
 * values (or none) and n_bind symbolic dims bound; want (n_inputs) gets
 * the inputs whose contents or dims the failing node needed. */
static rlx_status import_into(rlx_model *m, rlx_graph *g, const ox_input_value *values, int n_bind,
                              const char *const *bind_names, const int64_t *bind_values, unsigned char *want,
                              int *wanted) {
  ox_importer im = {.g = g, .arena = &m->arena, .model = &m->onnx, .model_name = m->name,
                    .n_bind = n_bind, .bind_names = bind_names, .bind_values = bind_values,
                    .n_inputs = m->n_inputs, .values = values, .want = want};
  rlx_status st = ox_import(&im, &m->ext);
  free(im.slots);
  *wanted = st && im.wanted;
  return st;
}

/* The first import, without values. When it fails for want of the
 * contents of some inputs, those become value inputs and the model's
 * graph is built per set of their contents at run (imported = 2). */
static rlx_status ensure_imported(rlx_model *m) {
  pthread_mutex_lock(&m->lock);
  if (m->imported == 0) {
    int wanted = 0;
    rlx_status st = import_into(m, m->g, NULL, m->n_bind, (const char *const *)m->bind_names, m->bind_values,
                                m->value, &wanted);
    m->imported = st ? (wanted ? 2 : -1) : 1;
    m->import_status = st;
    if (st) snprintf(m->import_error, sizeof m->import_error, "%s", rlx_last_error());
  }
  rlx_status st = m->imported < 0 ? rlx_set_error(m->import_status, "%s", m->import_error) : RLX_OK;
  pthread_mutex_unlock(&m->lock);
  return st;
}

int rlx_model_input_is_value(const rlx_model *m, int i) {
  return m && i >= 0 && i < m->n_inputs && m->imported == 2 ? m->value[i] == OX_WANT_CONTENTS : 0;
}

rlx_status rlx_model_graph(rlx_model *m, const rlx_graph **out) {
  if (!m || !out) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_graph: NULL argument");
  *out = NULL;
  rlx_status st = ensure_imported(m);
  if (!st && m->imported == 2) {
    int first = 0;
    while (first < m->n_inputs - 1 && !m->value[first]) first++;
    if (m->value[first] == OX_WANT_DIMS)
      return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: the graph depends on the symbolic dims of input \"%s\": bind "
                           "them at load (--bind), or it is built at run for each set of them (rlx_model_compile)",
                           m->name, m->input_names[first]);
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: the graph depends on the contents of input \"%s\" (a value "
                         "input): it is built at run for each set of their values (rlx_model_compile)", m->name,
                         m->input_names[first]);
  }
  if (!st) *out = m->g;
  return st;
}

/* Bytes of param p's weight: the initializer of the same name. */
static const ox_tensor *find_init(const rlx_model *m, const char *name) {
  const ox_graph *g = m->onnx.graph;
  for (int i = 0; i < g->n_inits; i++)
    if (!strcmp(g->inits[i].name, name)) return &g->inits[i];
  return NULL;
}

/* Compiles g (a graph of m) and binds every param. */
static rlx_status compile_bound(rlx_model *m, const rlx_graph *g, const rlx_options *opt, rlx_session **out) {
  rlx_session *s;
  rlx_status st = rlx_compile(g, opt, &s);
  if (st) return st;
  for (int i = 0; i < rlx_graph_num_params(g) && !st; i++) {
    const char *name = rlx_node_name(g, rlx_graph_param(g, i));
    const ox_tensor *t = find_init(m, name);
    if (!t) {
      st = rlx_set_error(RLX_ERR_INTERNAL, "%s: param %s has no initializer", m->name, name);
      break;
    }
    int size = t->numel ? (int)(t->nbytes / (size_t)t->numel) : 1;
    /* Mapped bytes are used in place when aligned; others are copied once
     * by the session. */
    if (((uintptr_t)t->data % (uintptr_t)size) == 0) st = rlx_set_param_ref(s, name, t->data, t->nbytes);
    else st = rlx_set_param(s, name, t->data, t->nbytes);
  }
  if (st) {
    rlx_session_free(s);
    return st;
  }
  *out = s;
  return RLX_OK;
}

/* The load-time bindings and, for each input whose dims shape the graph
 * (OX_WANT_DIMS), its symbolic dims bound to the dims it was given (the
 * names input_dim in import.c gives them). */
typedef struct {
  int n;
  const char **names;
  int64_t *values;
  char (*made)[32];    /* names of dims without a dim_param */
} dim_bindings;

static rlx_status bind_dims(const rlx_model *m, const rt_input *in, dim_bindings *b) {
  size_t cap = (size_t)m->n_bind + (size_t)m->n_inputs * RLX_MAX_RANK + 1;
  b->n = 0;
  if ((!b->names && !(b->names = calloc(cap, sizeof *b->names))) ||
      (!b->values && !(b->values = calloc(cap, sizeof *b->values))) ||
      (!b->made && !(b->made = calloc(cap, sizeof *b->made))))
    return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", m->name);
  for (int i = 0; i < m->n_bind; i++) b->names[b->n] = m->bind_names[i], b->values[b->n++] = m->bind_values[i];
  for (int i = 0; i < m->n_inputs; i++) {
    const ox_value_info *vi = m->inputs[i];
    if (m->value[i] != OX_WANT_DIMS) continue;
    if (in[i].rank != vi->rank)
      return rlx_set_error(RLX_ERR_SHAPE, "rlx_run: input \"%s\": rank %d given, %d declared (its dims shape the "
                           "graph: set it with rlx_set_input_shaped)", m->input_names[i], in[i].rank, vi->rank);
    for (int d = 0; d < vi->rank && d < RLX_MAX_RANK; d++) {
      if (vi->dims[d] >= 0) continue;
      if (vi->dim_params[d]) {
        b->names[b->n] = vi->dim_params[d];
      } else {
        snprintf(b->made[b->n], sizeof b->made[b->n], "in%d_d%d", i, d);
        b->names[b->n] = b->made[b->n];
      }
      b->values[b->n++] = in[i].dims[d];
    }
  }
  return RLX_OK;
}

/* rt_deferred_spec.build: the graph imported with the contents of the
 * value inputs (and the dims of those whose dims shape it), compiled. An import that needs the contents of more inputs
 * makes them value inputs too and runs again. */
static rlx_status build_with_values(void *ctx, const rlx_options *opt, const rt_input *in, unsigned char *used,
                                    rlx_session **out) {
  rlx_model *m = ctx;
  ox_input_value *vals = calloc((size_t)m->n_inputs + 1, sizeof *vals);
  unsigned char *want = calloc((size_t)m->n_inputs + 1, 1);
  if (!vals || !want) {
    free(vals);
    free(want);
    return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", m->name);
  }
  dim_bindings b = {0};
  pthread_mutex_lock(&m->lock);
  rlx_status st = RLX_OK;
  for (int pass = 0; pass <= 2 * m->n_inputs; pass++) {   /* an input may go from dims to contents */
    for (int i = 0; i < m->n_inputs && !st; i++) {
      used[i] = m->value[i];
      vals[i] = (ox_input_value){0};
      if (m->value[i] && !in[i].data)
        st = rlx_set_error(RLX_ERR_INVALID, "rlx_run: input \"%s\" was never set (its %s shape the graph)",
                           m->input_names[i], m->value[i] == OX_WANT_DIMS ? "dims" : "contents");
      else if (m->value[i] == OX_WANT_CONTENTS) vals[i] = (ox_input_value){in[i].data, in[i].nbytes, in[i].rank, in[i].dims};
    }
    rlx_graph *g = st ? NULL : rlx_graph_new(m->onnx.graph->name);
    if (!st && !g) st = rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", m->name);
    int wanted = 0, more = 0;
    if (!st) st = bind_dims(m, in, &b);
    if (!st) st = import_into(m, g, vals, b.n, b.names, b.values, want, &wanted);
    for (int i = 0; st && wanted && i < m->n_inputs; i++)
      if (want[i] && in[i].data && (!m->value[i] || want[i] < m->value[i])) m->value[i] = want[i], more = 1;
    if (!st) st = compile_bound(m, g, opt, out);
    rlx_graph_free(g);
    if (!more) break;
    st = RLX_OK;
  }
  pthread_mutex_unlock(&m->lock);
  free(b.names);
  free(b.values);
  free(b.made);
  free(vals);
  free(want);
  return st;
}

rlx_status rlx_model_compile(rlx_model *m, const rlx_options *opt, rlx_session **out) {
  if (!m || !out) return rlx_set_error(RLX_ERR_INVALID, "rlx_model_compile: NULL argument");
  *out = NULL;
  rlx_status st = ensure_imported(m);
  if (st) return st;
  rlx_options dflt = {0};
  if (m->imported == 1) return compile_bound(m, m->g, opt ? opt : &dflt, out);
  rt_deferred_spec spec = {.ctx = m, .build = build_with_values, .n_inputs = m->n_inputs,
                           .names = m->input_names, .n_outputs = m->onnx.graph->n_outputs};
  rt_deferred *d = rt_deferred_new(&spec, opt ? opt : &dflt);
  if (!d) return rlx_set_error(RLX_ERR_NOMEM, "%s: out of memory", m->name);
  return rt_session_deferred(d, out);
}

/* ---------------------------------------------------------------- queries */

int rlx_model_num_inputs(const rlx_model *m) { return m ? m->n_inputs : 0; }
int rlx_model_num_outputs(const rlx_model *m) { return m ? m->onnx.graph->n_outputs : 0; }

static const ox_value_info *io(const rlx_model *m, int i, int output) {
  if (!m || i < 0) return NULL;
  if (output) return i < m->onnx.graph->n_outputs ? &m->onnx.graph->outputs[i] : NULL;
  return i < m->n_inputs ? m->inputs[i] : NULL;
}

const char *rlx_model_input_name(const rlx_model *m, int i) {
  const ox_value_info *v = io(m, i, 0);
  return v ? v->name : NULL;
}
const char *rlx_model_output_name(const rlx_model *m, int i) {
  const ox_value_info *v = io(m, i, 1);
  return v ? v->name : NULL;
}

static int io_type(const rlx_model *m, int i, int output, rlx_dtype *dtype, int64_t *dims) {
  const ox_value_info *v = io(m, i, output);
  if (!v) return -1;
  int t = ox_rlx_dtype(v->elem_type);
  if (dtype) *dtype = t < 0 ? RLX_DTYPE_COUNT : (rlx_dtype)t;
  int rank = v->has_shape ? v->rank : 0;
  if (rank > RLX_MAX_RANK) rank = RLX_MAX_RANK;
  for (int d = 0; dims && d < rank; d++)
    dims[d] = v->dims[d] >= 0 ? v->dims[d] : v->dim_params[d] ? ox_dim_of_param(m->g, v->dim_params[d], 0, NULL, NULL) : -1;
  return rank;
}

int rlx_model_input_type(const rlx_model *m, int i, rlx_dtype *dtype, int64_t *dims) {
  return io_type(m, i, 0, dtype, dims);
}
int rlx_model_output_type(const rlx_model *m, int i, rlx_dtype *dtype, int64_t *dims) {
  return io_type(m, i, 1, dtype, dims);
}
const char *rlx_model_dim_name(const rlx_model *m, int64_t dim) { return m ? rlx_dim_name(m->g, dim) : NULL; }

const ox_model *ox_model_of(const rlx_model *m) { return &m->onnx; }
