/* bcast_walk.h — the rows of a broadcasting elementwise op.
 *
 * The output's dims are collapsed (size-1 dims dropped, neighbours merged
 * where every operand is contiguous across them), so the op is a loop over
 * rows of the innermost collapsed dim, in which each operand is either
 * contiguous (inner stride 1) or one value (inner stride 0). Row offsets
 * come from an odometer, not a division per element, which is what the
 * reference kernels' cpu_offset costs.
 */
#ifndef RLX_CPU_BCAST_WALK_H
#define RLX_CPU_BCAST_WALK_H

#include "cpu.h"

#define BCAST_MAX_OPS 4

typedef struct {
  int rank;  /* collapsed dims, >= 1 */
  int n_ops;
  int64_t dims[RLX_MAX_RANK];
  int64_t stride[BCAST_MAX_OPS][RLX_MAX_RANK]; /* elements; 0 where broadcast */
  int64_t rows, len;                           /* rows of the innermost dim; its length */
} bcast_walk;

/* ops[k] broadcasts to out's dims (NumPy rules; the caller has checked). */
void bcast_walk_init(bcast_walk *w, const cpu_tensor *out, int n_ops, const cpu_tensor *const *ops);

/* Inner stride (0 or 1) of operand k. */
static inline int64_t bcast_walk_inner(const bcast_walk *w, int k) { return w->stride[k][w->rank - 1]; }

/* The multi-index of row `row` over the outer dims, and the element offset
 * of its first element in every operand. */
void bcast_walk_seek(const bcast_walk *w, int64_t row, int64_t *idx, int64_t *off);
/* Steps idx and off to the next row. */
void bcast_walk_next(const bcast_walk *w, int64_t *idx, int64_t *off);

#endif /* RLX_CPU_BCAST_WALK_H */
