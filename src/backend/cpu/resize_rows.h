/* resize_rows.h — nearest-neighbour 2x upsampling of row-major planes, for
 * kernels that apply it inside a larger computation (the resize_nearest_2x
 * prologue of the fused regions). Implemented in k_resize.c. */
#ifndef RLX_CPU_RESIZE_ROWS_H
#define RLX_CPU_RESIZE_ROWS_H

#include <stdint.h>

/* x: nc planes of h x w; y: nc planes of 2h x 2w, y[p][i][j] = x[p][i/2][j/2]. */
void cpu_resize_nearest2x_f64(const double *x, double *y, int64_t nc, int64_t h, int64_t w);

#endif /* RLX_CPU_RESIZE_ROWS_H */
