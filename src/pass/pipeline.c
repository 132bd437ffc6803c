/* pipeline.c — the pass pipeline:
 *
 *   verify -> [fold -> dce -> cse -> simplify]+ -> fuse -> dce -> legalize -> dce
 *
 * The bracket repeats (at most PIPELINE_MAX_ROUNDS times) while simplify
 * rewrites something: a rewrite leaves dead nodes for DCE and can make
 * nodes equal for CSE. The DCE after fuse and after legalize runs only when
 * those changed something. With optimize off only legalize runs.
 *
 * Switches (pass_options_from_env):
 *   RLX_TRACE=1   one line per pass on stderr: what it changed, node
 *                 counts, time ("rlx: cse: merged 3 nodes (57 -> 54 nodes, 0.02 ms)")
 *   RLX_DUMP=...  the graph in text form on stderr after the passes named,
 *                 comma-separated: input, fold, dce, cse, simplify, fuse,
 *                 legalize, or all ("after-fuse" is read as "fuse")
 *   RLX_FUSE=0    no fusion; RLX_OPTIMIZE=0 no optimizing pass at all (as
 *                 RLX_FLAG_NO_OPTIMIZE); RLX_DECOMPOSE_FUSED=1 decompose
 *                 every fused op
 *
 * Every pass must keep the graph's interface: the same inputs and params
 * (names, types, order) and the same number of outputs. The pipeline checks
 * that after each pass, and that the result verifies, so a broken pass is
 * an RLX_ERR_INTERNAL naming it rather than a confusing session error. */
#include "pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PIPELINE_MAX_ROUNDS 4

typedef struct {
  const char *name;
  pass_fn fn;
  const char *verb; /* "<verb> N nodes" in traces */
  int index;        /* into pipeline_state.runs */
} pipeline_pass;

static const pipeline_pass PASS_FOLD = {"fold", pass_fold, "folded", 0};
static const pipeline_pass PASS_DCE = {"dce", pass_dce, "removed", 1};
static const pipeline_pass PASS_CSE = {"cse", pass_cse, "merged", 2};
static const pipeline_pass PASS_SIMPLIFY = {"simplify", pass_simplify, "simplified", 3};
static const pipeline_pass PASS_FUSE = {"fuse", pass_fuse, "fused", 4};
static const pipeline_pass PASS_LEGALIZE = {"legalize", pass_legalize, "decomposed", 5};
#define PIPELINE_PASSES 6

static const char *const dump_names[] = {"input", "fold", "dce", "cse", "simplify", "fuse", "legalize", "all", NULL};

void pass_options_from_env(pass_options *opt) {
  memset(opt, 0, sizeof *opt);
  opt->fuse = ir_env_flag("RLX_FUSE", 1);
  opt->optimize = ir_env_flag("RLX_OPTIMIZE", 1);
  opt->trace = ir_env_flag("RLX_TRACE", 0);
  opt->decompose_fused = ir_env_flag("RLX_DECOMPOSE_FUSED", 0);
  const char *dump = getenv("RLX_DUMP");
  opt->dump = dump && *dump ? dump : NULL;
}

/* The next comma-separated item of *p ("after-" dropped): 0 at the end. */
static int next_item(const char **p, const char **item, size_t *len) {
  if (!**p) return 0;
  const char *e = strchr(*p, ',');
  *item = *p;
  *len = e ? (size_t)(e - *p) : strlen(*p);
  *p = e ? e + 1 : *p + *len;
  if (*len > 6 && strncmp(*item, "after-", 6) == 0) *item += 6, *len -= 6;
  return 1;
}

static int item_is(const char *item, size_t len, const char *name) {
  return strlen(name) == len && strncmp(item, name, len) == 0;
}

/* Is pass `name` in the dump list (or the list "all")? */
static int list_has(const char *list, const char *name) {
  const char *item;
  size_t len;
  while (next_item(&list, &item, &len))
    if (item_is(item, len, name) || item_is(item, len, "all")) return 1;
  return 0;
}

/* Warns on stderr about names in RLX_DUMP that are no pass. */
static void check_dump_names(const char *list) {
  const char *item;
  size_t len;
  while (next_item(&list, &item, &len)) {
    int known = len == 0;
    for (int i = 0; !known && dump_names[i]; i++) known = item_is(item, len, dump_names[i]);
    if (!known)
      fprintf(stderr, "rlx: RLX_DUMP: no pass named \"%.*s\" (passes: input, fold, dce, cse, simplify, fuse, "
              "legalize, all)\n", (int)len, item);
  }
}

static void dump_graph(const rlx_graph *g, const char *after, int round) {
  char *text = rlx_graph_to_text(g);
  if (round > 1) fprintf(stderr, "rlx: graph after %s (round %d), %d nodes:\n", after, round, g->n_nodes);
  else fprintf(stderr, "rlx: graph after %s, %d nodes:\n", after, g->n_nodes);
  fputs(text ? text : "(out of memory printing the graph)\n", stderr);
  free(text);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The interface every pass keeps: inputs and params in order with their
 * names and types, and the output count. */
static rlx_status check_interface(const rlx_graph *before, const rlx_graph *after, const char *pass) {
  if (after->n_outputs != before->n_outputs)
    return rlx_set_error(RLX_ERR_INTERNAL, "pipeline: %s changed the number of outputs from %d to %d", pass,
                         before->n_outputs, after->n_outputs);
  int j = 0;
  for (int i = 0; i < before->n_nodes; i++) {
    const ir_node *b = &before->nodes[i];
    if (b->op != RLX_OP_Input && b->op != RLX_OP_Param) continue;
    while (j < after->n_nodes && after->nodes[j].op != RLX_OP_Input && after->nodes[j].op != RLX_OP_Param) j++;
    const ir_node *a = j < after->n_nodes ? &after->nodes[j++] : NULL;
    if (!a || a->op != b->op || strcmp(a->a.name, b->a.name) || !ir_type_eq(&a->out[0], &b->out[0]))
      return rlx_set_error(RLX_ERR_INTERNAL, "pipeline: %s dropped or changed %s \"%s\"", pass,
                           b->op == RLX_OP_Input ? "input" : "param", b->a.name);
  }
  return RLX_OK;
}

typedef struct {
  const pass_options *opt;
  const rlx_graph *cur; /* the input graph, or owned */
  rlx_graph *owned;
  int runs[PIPELINE_PASSES]; /* runs per pass, for "round" in dumps */
} pipeline_state;

/* Runs one pass on st->cur; *changed receives its count. */
static rlx_status run_pass(pipeline_state *st, const pipeline_pass *p, int *changed) {
  const pass_options *opt = st->opt;
  double t0 = opt->trace ? now_ms() : 0;
  rlx_graph *next = NULL;
  *changed = 0;
  rlx_status s = p->fn(st->cur, opt, &next, changed);
  if (s == RLX_OK) s = check_interface(st->cur, next, p->name);
  if (s != RLX_OK) {
    rlx_graph_free(next);
    return s;
  }
  st->runs[p->index]++;
  if (opt->trace) {
    double ms = now_ms() - t0;
    if (*changed)
      fprintf(stderr, "rlx: %s: %s %d node%s (%d -> %d nodes, %.2f ms)\n", p->name, p->verb, *changed,
              *changed == 1 ? "" : "s", st->cur->n_nodes, next->n_nodes, ms);
    else
      fprintf(stderr, "rlx: %s: no change (%d nodes, %.2f ms)\n", p->name, next->n_nodes, ms);
  }
  rlx_graph_free(st->owned);
  st->cur = st->owned = next;
  if (opt->dump && list_has(opt->dump, p->name)) dump_graph(st->cur, p->name, st->runs[p->index]);
  return RLX_OK;
}

static rlx_status run_passes(pipeline_state *st) {
  const pass_options *opt = st->opt;
  rlx_status s;
  int changed, simplified = 0, fused = 0, decomposed = 0;
  if (opt->optimize) {
    for (int round = 0; round < PIPELINE_MAX_ROUNDS; round++) {
      if ((s = run_pass(st, &PASS_FOLD, &changed)) || (s = run_pass(st, &PASS_DCE, &changed)) ||
          (s = run_pass(st, &PASS_CSE, &changed)) || (s = run_pass(st, &PASS_SIMPLIFY, &simplified)))
        return s;
      if (!simplified) break;
    }
    if (simplified && (s = run_pass(st, &PASS_DCE, &changed))) return s;
    if (opt->fuse) {
      if ((s = run_pass(st, &PASS_FUSE, &fused))) return s;
      if (fused && (s = run_pass(st, &PASS_DCE, &changed))) return s;
    } else if (opt->trace) {
      fprintf(stderr, "rlx: fuse: off (RLX_FUSE=0 or RLX_FLAG_NO_FUSE)\n");
    }
  }
  if ((s = run_pass(st, &PASS_LEGALIZE, &decomposed))) return s;
  if (opt->optimize && decomposed && (s = run_pass(st, &PASS_DCE, &changed))) return s;
  return RLX_OK;
}

rlx_status pass_pipeline(const rlx_graph *g, const pass_options *opt, rlx_graph **out) {
  if (!out) return rlx_set_error(RLX_ERR_INVALID, "pass_pipeline: out is NULL");
  *out = NULL;
  pass_options defaults;
  if (!opt) {
    pass_options_from_env(&defaults);
    opt = &defaults;
  }
  rlx_status s = rlx_graph_verify(g);
  if (s) return s;
  if (opt->dump) {
    check_dump_names(opt->dump);
    if (list_has(opt->dump, "input")) dump_graph(g, "input", 1);
  }
  double t0 = opt->trace ? now_ms() : 0;
  pipeline_state st = {opt, g, NULL, {0}};
  s = run_passes(&st);
  if (s == RLX_OK && (s = rlx_graph_verify(st.cur)) != RLX_OK) {
    char msg[600];
    snprintf(msg, sizeof msg, "pipeline: the optimized graph does not verify: %s", rlx_last_error());
    s = rlx_set_error(RLX_ERR_INTERNAL, "%s", msg);
  }
  /* Every pass ran on a copy, so an unchanged graph still comes out new. */
  rlx_graph *result = s ? NULL : st.owned ? st.owned : ir_graph_clone(g);
  if (s) rlx_graph_free(st.owned);
  else if (!result) s = rlx_set_error(RLX_ERR_NOMEM, "pass_pipeline: out of memory");
  if (s == RLX_OK && opt->trace)
    fprintf(stderr, "rlx: pipeline: %d -> %d nodes in %.2f ms\n", g->n_nodes, result->n_nodes, now_ms() - t0);
  *out = result;
  return s;
}
