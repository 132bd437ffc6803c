/* cpu_matrix.h — a row-major [rows, cols] cpu_tensor over the caller's
 * memory, for the tests and benchmarks that call CPU kernels directly. */
#ifndef RLX_CPU_MATRIX_H
#define RLX_CPU_MATRIX_H

#include "backend/cpu/cpu.h"

#include <string.h>

static inline void set_matrix(cpu_tensor *t, void *data, rlx_dtype dt, int64_t rows, int64_t cols) {
  memset(t, 0, sizeof *t);
  t->data = data;
  t->dtype = dt;
  t->rank = 2;
  t->d[0] = rows;
  t->d[1] = cols;
  t->numel = rows * cols;
  t->nbytes = rlx_dtype_nbytes(dt, t->numel);
}

#endif /* RLX_CPU_MATRIX_H */
