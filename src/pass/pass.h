/* pass.h — the compiler passes over rlx graphs. Passes read and write the
 * IR only (no backend headers). */
#ifndef RLX_PASS_H
#define RLX_PASS_H

#include "../ir/ir.h"

#include <stddef.h>
#include <stdint.h>

#define RLX_ARENA_ALIGN 64

/* ---------------------------------------------------------------- the pipeline */

/* Constant folding's evaluator: computes node n of g (every output, each
 * a dense buffer of its static type) from its inputs' data. The runtime
 * supplies one backed by the CPU backend, so passes need no kernels. */
typedef rlx_status (*pass_eval_fn)(void *ctx, const rlx_graph *g, rlx_node n,
                                   const void *const *inputs, void *const *outputs);

/* Fold only nodes whose outputs together hold at most this many bytes (a
 * folded Expand or Iota must not bloat the graph). */
#define PASS_FOLD_MAX_BYTES ((size_t)64 * 1024)

/* Per op kind, what legalization did with the nodes of that kind. */
typedef struct {
  int native;       /* the target claims it */
  int decomposed;   /* replaced by its decomposition into primitives */
  int fallback;     /* neither: left for the CPU */
} pass_dispatch_count;

typedef struct {
  int trace;          /* RLX_TRACE=1: print what each pass changed */
  const char *dump;   /* RLX_DUMP=<pass>[,<pass>...]: print the graph after those passes ("all": every pass) */
  int fuse;           /* 0: skip the fusion passes (RLX_FUSE=0, rlx_options.flags) */
  int optimize;       /* 0: run only legalization (RLX_OPTIMIZE=0, RLX_FLAG_NO_OPTIMIZE) */
  int decompose_fused;/* RLX_DECOMPOSE_FUSED=1: legalize decomposes every fused op, claimed or not */
  /* Legalization target: does the backend claim node n of g? NULL = every op. */
  int (*claims)(void *ctx, const rlx_graph *g, rlx_node n);
  void *claims_ctx;
  /* Constant folding evaluator; NULL: fold folds nothing. */
  pass_eval_fn eval;
  void *eval_ctx;
  /* When not NULL, [RLX_OP_COUNT] counts that legalize fills (zeroed first). */
  pass_dispatch_count *dispatch;
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
/* Whether node id of g can be decomposed with its types (an op with a
 * decomposition whose shapes it can express, e.g. FusedSwiGLU needs a
 * static last dim). Legalize leaves the other nodes as they are. */
int      pass_can_decompose(const rlx_graph *g, rlx_node id);

/* Node identity for CSE and the compile cache: attributes of op equal
 * (every field the op's ops.def row names; floats bitwise), and a hash
 * consistent with it, folded into h. */
int      pass_attrs_equal(int op, const ir_attrs *a, const ir_attrs *b);
uint64_t pass_attrs_hash(int op, const ir_attrs *a, uint64_t h);
uint64_t pass_hash_bytes(uint64_t h, const void *p, size_t n);   /* FNV-1a step */
#define PASS_HASH_SEED 0xcbf29ce484222325ull /* FNV-1a's offset basis: the first h */
uint64_t pass_type_hash(uint64_t h, const ir_type *t);             /* dtype, rank and dims */

/* verify -> fold -> dce -> cse -> simplify -> fuse -> legalize, with dumps
 * and traces. The result verifies. */
rlx_status pass_pipeline(const rlx_graph *g, const pass_options *opt, rlx_graph **out);
/* Defaults (everything on, nothing printed) overridden by the environment
 * (RLX_TRACE, RLX_DUMP, RLX_FUSE, RLX_OPTIMIZE, RLX_DECOMPOSE_FUSED). */
void       pass_options_from_env(pass_options *opt);

/* Memory plan of a specialized graph (all dims concrete), plan_memory.c.
 *
 * A slot is one output of one node: slot = node * IR_MAX_OUTPUTS + output.
 * Every slot of every node names where its bytes live:
 *   - leaf[slot] >= 0: in that leaf's host buffer (bound per run) at
 *     offset[slot]. A leaf's own slot is (itself, 0); a view of a leaf
 *     (a Reshape of a param, say) is (the leaf, its byte offset).
 *   - leaf[slot] == -1: in the plan's arena at offset[slot].
 * Unused slots (output >= n_out) have offset SIZE_MAX.
 *
 * Views get no bytes of their own: a Reshape, a same-dtype Cast, a
 * contiguous Narrow, a StopGradient, a GetOutput names (part of) its
 * input's bytes, and its kernel need not run (view[node] = 1). A view that
 * is a graph output and would alias a leaf is copied into the arena
 * instead, so rlx_output reads the result of the run.
 * In-place: an elementwise op of the allow-list in plan_memory.c writes into
 * the buffer of an input that dies at it (inplace_input[node] = that input's
 * index): the kernel gets the same pointer as input and output. With
 * PLAN_FUSED_CONV_IN_PLACE a FusedConv writes into its residual's buffer
 * likewise (for a backend whose kernels read each residual element before
 * they store that output element).
 * Arena buffers live from their defining node to the last node that reads
 * them or any view or in-place result of them (graph outputs: to the end).
 * Offsets: each buffer goes into the tightest gap left by the buffers
 * already placed whose live ranges overlap its own; of three placement
 * orders (largest first, busiest first, program order) the plan keeps the
 * smallest arena.
 *
 * RLX_PLAN_NO_REUSE=1 in the environment turns off reuse, views and
 * in-place: every slot gets bytes of its own (arena_bytes == naive_bytes),
 * the reference to compare a reusing plan against. */
typedef struct {
  size_t *offset;          /* [n_nodes * IR_MAX_OUTPUTS] byte offset (arena or leaf buffer) */
  size_t *nbytes;          /* same indexing: bytes of the slot's tensor */
  int32_t *leaf;           /* same indexing: leaf node holding the bytes, -1 for the arena */
  uint8_t *view;           /* [n_nodes]: 1 if the node aliases its input 0 (no kernel runs) */
  int32_t *inplace_input;  /* [n_nodes]: input whose buffer the node writes into, or -1 */
  size_t arena_bytes;      /* the arena's size: the plan's peak */
  size_t naive_bytes;      /* every non-leaf slot its own aligned buffer: no reuse, views or in-place */
  size_t peak_live_bytes;  /* the largest sum of arena buffers live at one node: a lower bound of arena_bytes */
  int n_views, n_inplace;
} plan_memory;

/* Slot of input k of node n: the producer's output that n reads (GetOutput
 * reads output `index`, every other op output 0). */
static inline size_t plan_input_slot(const ir_node *n, int k) {
  int o = n->op == RLX_OP_GetOutput ? (int)n->a.index : 0;
  return (size_t)n->in[k] * IR_MAX_OUTPUTS + (size_t)o;
}

/* outside: NULL, or [n_nodes] nodes whose outputs the backend keeps in
 * buffers of its own (results folded once from params, weight transposes
 * its products read through): unless they are views they get no arena
 * bytes, and their offsets (and their views') are from the start of the
 * backend's buffer. */
enum { PLAN_FUSED_CONV_IN_PLACE = 1 };
rlx_status plan_arena_offsets(const rlx_graph *g, const uint8_t *outside, unsigned flags, plan_memory *out);
void       plan_memory_free(plan_memory *m);

#endif /* RLX_PASS_H */
