/* pass.h — the compiler passes over rlx graphs. Passes read and write the
 * IR only (no backend headers). */
#ifndef RLX_PASS_H
#define RLX_PASS_H

#include "../ir/ir.h"

#include <stddef.h>

#define RLX_ARENA_ALIGN 64

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
