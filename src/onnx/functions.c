/* functions.c — one node imported: an op-table row, or a model-local
 * function (FunctionProto) expanded in place: its nodes with their values
 * renamed under the calling node, its attribute references resolved from
 * the caller's attributes. */
#include "onnx.h"

#include <stdio.h>
#include <string.h>

/* Nesting of function calls (a function calling itself is refused here). */
#define OX_MAX_CALL_DEPTH 16

static const ox_function *find_function(const ox_model *m, const char *op, const char *domain) {
  for (int i = 0; i < m->n_functions; i++)
    if (!strcmp(m->functions[i].name, op) && !strcmp(m->functions[i].domain, domain)) return &m->functions[i];
  return NULL;
}

static char *arena_printf(ox_arena *a, const char *p, const char *s) {
  size_t n = strlen(p) + strlen(s) + 2;
  char *out = ox_alloc(a, n);
  if (out) snprintf(out, n, "%s/%s", p, s);
  return out;
}

/* The caller's name of a function value: a formal input or output maps to
 * the call's actual name ("" when not given); any other value gets a
 * name under the call. NULL on NOMEM. */
static const char *rename_value(ox_importer *im, const ox_function *f, const ox_node *call, const char *prefix,
                                const char *name) {
  if (!*name) return name;
  for (int i = 0; i < f->n_inputs; i++)
    if (!strcmp(f->inputs[i], name)) return i < call->n_inputs ? call->inputs[i] : "";
  for (int i = 0; i < f->n_outputs; i++)
    if (!strcmp(f->outputs[i], name)) return i < call->n_outputs ? call->outputs[i] : "";
  return arena_printf(im->arena, prefix, name);
}

static rlx_status expand(ox_importer *im, const ox_function *f, const ox_node *call, int depth, int index) {
  char tag[32];
  snprintf(tag, sizeof tag, "#%d", index);
  const char *prefix = arena_printf(im->arena, *call->name ? call->name : tag, f->name);
  if (!prefix) return RLX_ERR_NOMEM;
  for (int i = 0; i < f->n_nodes; i++) {
    const ox_node *fn = &f->nodes[i];
    ox_node n = *fn;
    n.inputs = ox_alloc(im->arena, sizeof(char *) * (size_t)(fn->n_inputs + 1));
    n.outputs = ox_alloc(im->arena, sizeof(char *) * (size_t)(fn->n_outputs + 1));
    n.attrs = ox_alloc(im->arena, sizeof(ox_attr) * (size_t)(fn->n_attrs + 1));
    n.name = arena_printf(im->arena, prefix, fn->name);
    if (!n.inputs || !n.outputs || !n.attrs || !n.name) return RLX_ERR_NOMEM;
    for (int k = 0; k < fn->n_inputs; k++)
      if (!(n.inputs[k] = rename_value(im, f, call, prefix, fn->inputs[k]))) return RLX_ERR_NOMEM;
    for (int k = 0; k < fn->n_outputs; k++)
      if (!(n.outputs[k] = rename_value(im, f, call, prefix, fn->outputs[k]))) return RLX_ERR_NOMEM;
    n.n_attrs = 0;
    for (int k = 0; k < fn->n_attrs; k++) {
      const ox_attr *a = &fn->attrs[k];
      if (!a->ref_attr_name) {
        n.attrs[n.n_attrs++] = *a;
        continue;
      }
      const ox_attr *given = ox_attr_get(call, a->ref_attr_name);
      if (!given) continue;   /* not given by the caller: the op's default */
      n.attrs[n.n_attrs] = *given;
      n.attrs[n.n_attrs++].name = a->name;
    }
    rlx_status st = ox_import_node(im, &n, depth + 1, i);
    if (st) return st;
  }
  return RLX_OK;
}

rlx_status ox_import_node(ox_importer *im, const ox_node *n, int depth, int index) {
  for (int k = 0; k < n->n_inputs; k++)
    if (n->inputs[k][0] && !ox_lookup(im, n->inputs[k]))
      return ox_node_fail(im, n, RLX_ERR_FORMAT, "input \"%s\" is not defined before the node", n->inputs[k]);
  const ox_function *f = find_function(im->model, n->op_type, n->domain);
  if (f) {
    if (depth >= OX_MAX_CALL_DEPTH)
      return ox_node_fail(im, n, RLX_ERR_FORMAT, "functions nested deeper than %d (recursive?)", OX_MAX_CALL_DEPTH);
    return expand(im, f, n, depth, index);
  }
  int64_t opset = ox_opset_of(im->model->opsets, im->model->n_opsets, n->domain);
  const ox_op_row *row = ox_find_op(n->op_type, n->domain, opset);
  if (!row)
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "rlx cannot import op %s of domain \"%s\" at opset %lld",
                        n->op_type, *n->domain ? n->domain : "ai.onnx", (long long)opset);
  return row->run(im, n);
}
