/* k_resize.c — CPU reference kernels of ResizeNearest2x and Resize. */
#include "cpu.h"
#include "resize_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Nearest 2x upsampling of nc planes of h x w elements of esize bytes: each
 * input row is widened once, then copied to the two output rows. */
static void resize_nearest2x_bytes(const void *x, void *y, size_t esize, int64_t nc, int64_t h,
                                   int64_t w) {
  const unsigned char *src = x;
  unsigned char *dst = y;
  size_t row = (size_t)w * esize;
  for (int64_t r = 0; r < nc * h; r++) {
    const unsigned char *xr = src + (size_t)r * row;
    unsigned char *y0 = dst + (size_t)r * 4 * row, *y1 = y0 + 2 * row;
    for (int64_t j = 0; j < w; j++) {
      memcpy(y0 + (size_t)(2 * j) * esize, xr + (size_t)j * esize, esize);
      memcpy(y0 + (size_t)(2 * j + 1) * esize, xr + (size_t)j * esize, esize);
    }
    memcpy(y1, y0, 2 * row);
  }
}

void cpu_resize_nearest2x_f64(const double *x, double *y, int64_t nc, int64_t h, int64_t w) {
  resize_nearest2x_bytes(x, y, sizeof *x, nc, h, w);
}

/* Copies elements as bytes, so every plain dtype is exact. */
rlx_status cpu_ResizeNearest2x(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                               cpu_tensor *out) {
  (void)ctx;
  (void)n;
  const cpu_tensor *x = &in[0];
  resize_nearest2x_bytes(x->data, out->data, (size_t)ir_dtypes[x->dtype].size,
                         x->d[0] * x->d[1], x->d[2], x->d[3]);
  return RLX_OK;
}

/* Bilinear source coordinate of output index dst (torch's
 * area_pixel_compute_source_index). */
static double bilinear_src(int64_t dst, int64_t in, int64_t out, int align_corners) {
  if (align_corners) return out > 1 ? (double)dst * (double)(in - 1) / (double)(out - 1) : 0.0;
  double s = ((double)dst + 0.5) * (double)in / (double)out - 0.5;
  return s < 0 ? 0 : s;
}

/* Nearest: src = floor(dst * in / out) in exact integer math. Bilinear:
 * the two neighbours i0 = floor(src), i1 = min(i0 + 1, in - 1), weighted by
 * the fraction. Sizes were checked by inference (in >= 1, out in [1, 2^31]). */
rlx_status cpu_Resize(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *xt = &in[0];
  int64_t planes = xt->d[0] * xt->d[1], ih = xt->d[2], iw = xt->d[3];
  int64_t oh = out->d[2], ow = out->d[3];
  int bilinear = n->a.resize_mode == RLX_RESIZE_BILINEAR, ac = n->a.align_corners != 0;
  double *x = cpu_load_f64(xt);
  double *y = malloc((size_t)out->numel * sizeof *y + 1);
  if (!x || !y) {
    free(x);
    free(y);
    return rlx_set_error(RLX_ERR_NOMEM, "Resize (node %d): out of memory", n->id);
  }
  for (int64_t p = 0; p < planes; p++) {
    const double *xp = x + p * ih * iw;
    double *yp = y + p * oh * ow;
    for (int64_t i = 0; i < oh; i++) {
      for (int64_t j = 0; j < ow; j++) {
        if (!bilinear) {
          yp[i * ow + j] = xp[(i * ih / oh) * iw + j * iw / ow];
          continue;
        }
        double sy = bilinear_src(i, ih, oh, ac), sx = bilinear_src(j, iw, ow, ac);
        int64_t y0 = (int64_t)sy, x0 = (int64_t)sx;
        int64_t y1 = y0 < ih - 1 ? y0 + 1 : y0, x1 = x0 < iw - 1 ? x0 + 1 : x0;
        double ly = sy - (double)y0, lx = sx - (double)x0;
        yp[i * ow + j] = (1 - ly) * ((1 - lx) * xp[y0 * iw + x0] + lx * xp[y0 * iw + x1]) +
                         ly * ((1 - lx) * xp[y1 * iw + x0] + lx * xp[y1 * iw + x1]);
      }
    }
  }
  cpu_store_f64(out, y);
  free(x);
  free(y);
  return RLX_OK;
}
