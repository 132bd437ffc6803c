/* summary.c — rlx_model_summary: what a model file holds and which of its
 * ops rlx cannot import, without importing it. */
#include "onnx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *p; size_t n, cap; int oom; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) { b->oom = 1; return; }
    if (b->p && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
    size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)k;
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return; }
    b->p = p;
    b->cap = cap;
  }
}

static void value_line(sbuf *b, const ox_value_info *v) {
  sb_printf(b, "  %s: %s", v->name, v->has_type ? ox_dtype_name(v->elem_type) : "(not a tensor)");
  if (v->has_shape) {
    sb_printf(b, "[");
    for (int d = 0; d < v->rank; d++) {
      if (d) sb_printf(b, ",");
      if (v->dims[d] >= 0) sb_printf(b, "%lld", (long long)v->dims[d]);
      else sb_printf(b, "%s", v->dim_params[d] ? v->dim_params[d] : "?");
    }
    sb_printf(b, "]");
  }
  sb_printf(b, "\n");
}

char *rlx_model_summary(const rlx_model *m) {
  if (!m) return NULL;
  const ox_model *om = ox_model_of(m);
  const ox_graph *g = om->graph;
  sbuf b = {0};
  sb_printf(&b, "format: ONNX (IR version %lld)\n", (long long)om->ir_version);
  sb_printf(&b, "producer: %s %s\n", om->producer_name, om->producer_version);
  sb_printf(&b, "opsets:");
  for (int i = 0; i < om->n_opsets; i++)
    sb_printf(&b, " %s=%lld", *om->opsets[i].domain ? om->opsets[i].domain : "ai.onnx", (long long)om->opsets[i].version);
  sb_printf(&b, "\ngraph: %s, %d nodes, %d initializers, %d functions\n", g->name, g->n_nodes, g->n_inits, om->n_functions);
  sb_printf(&b, "inputs:\n");
  for (int i = 0; i < rlx_model_num_inputs(m); i++) {
    for (int k = 0; k < g->n_inputs; k++)
      if (!strcmp(g->inputs[k].name, rlx_model_input_name(m, i))) { value_line(&b, &g->inputs[k]); break; }
  }
  sb_printf(&b, "outputs:\n");
  for (int i = 0; i < g->n_outputs; i++) value_line(&b, &g->outputs[i]);
  /* Histogram in order of first appearance (quadratic in distinct op types: few). */
  sb_printf(&b, "ops:\n");
  int unsupported = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ox_node *n = &g->nodes[i];
    int seen = 0, count = 0;
    for (int k = 0; k < g->n_nodes && !seen; k++) {
      if (strcmp(g->nodes[k].op_type, n->op_type) || strcmp(g->nodes[k].domain, n->domain)) continue;
      if (k < i) seen = 1;
      else count++;
    }
    if (seen) continue;
    int64_t opset = ox_opset_of(om->opsets, om->n_opsets, n->domain);
    int ok = ox_find_op(n->op_type, n->domain, opset) != NULL;
    for (int f = 0; f < om->n_functions && !ok; f++)
      ok = !strcmp(om->functions[f].name, n->op_type) && !strcmp(om->functions[f].domain, n->domain);
    unsupported += !ok;
    sb_printf(&b, "  %-24s %6d%s%s%s\n", n->op_type, count, *n->domain ? "  domain " : "", n->domain,
              ok ? "" : "  UNSUPPORTED");
  }
  if (unsupported) sb_printf(&b, "unsupported op types: %d\n", unsupported);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  return b.p;
}
