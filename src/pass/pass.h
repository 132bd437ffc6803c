/* pass.h — the compiler passes over rlx graphs. Passes read and write the
 * IR only (no backend headers). */
#ifndef RLX_PASS_H
#define RLX_PASS_H

#include "../ir/ir.h"

#include <stddef.h>

#define RLX_ARENA_ALIGN 64

/* ---------------------------------------------------------------- the pipeline */

typedef struct {
  int trace;          /* RLX_TRACE=1: print what each pass changed */
  const char *dump;   /* RLX_DUMP=<pass>: print the graph after that pass ("all": every pass) */
  int fuse;           /* 0: skip the fusion passes (RLX_FUSE=0, rlx_options.flags) */
  /* Legalization target: does the backend claim node n of g? NULL = every op. */
  int (*claims)(void *ctx, const rlx_graph *g, rlx_node n);
  void *claims_ctx;
} pass_options;

/* A pass maps a graph to a new graph; the input is never modified. *changed
 * counts what it did (nodes removed, rewritten, fused). On failure *out is
 * NULL and the status says why. Each pass is testable alone. */
typedef rlx_status (*pass_fn)(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed);

/* The passes, one file each (src/pass/<name>.c), in pipeline order. */
rlx_status pass_fold(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed);
rlx_status pass_dce(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed);
rlx_status pass_cse(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed);
rlx_status pass_simplify(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed);
rlx_status pass_fuse(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed);
rlx_status pass_legalize(const rlx_graph *in, const pass_options *opt, rlx_graph **out, int *changed);

/* Decomposition of a fused op into primitives, appended to dst: node id of
 * src, its inputs already mapped into dst. Returns the node in dst that
 * replaces it (-1 with the error recorded in dst). Used by legalize for a
 * backend that does not claim the fused op, and by tests. */
rlx_node pass_decompose(rlx_graph *dst, const rlx_graph *src, rlx_node id, const rlx_node *inputs);
int      pass_has_decomposition(int op);

/* verify -> fold -> dce -> cse -> simplify -> fuse -> legalize, with dumps
 * and traces. The result verifies. */
rlx_status pass_pipeline(const rlx_graph *g, const pass_options *opt, rlx_graph **out);
/* Options from the environment (RLX_TRACE, RLX_DUMP, RLX_FUSE). */
void       pass_options_from_env(pass_options *opt);

/* Memory plan of a specialized graph (all dims concrete): every output of
 * every non-leaf node gets an offset in one arena. Live ranges run from the
 * defining node to the last node reading it (graph outputs live to the
 * end); freed space is reused first-fit. */
typedef struct {
  size_t *offset;        /* [n_nodes * IR_MAX_OUTPUTS]; SIZE_MAX for leaves */
  size_t *nbytes;        /* same indexing */
  size_t arena_bytes;    /* peak */
  size_t naive_bytes;    /* sum of all buffers (no reuse), for reports */
} plan_memory;

rlx_status plan_arena_offsets(const rlx_graph *g, plan_memory *out);
void       plan_memory_free(plan_memory *m);

#endif /* RLX_PASS_H */
