/* ops_dft.c — ONNX DFT (opsets 17 and 20) as products with constant
 * matrices along the signal axis: the real and imaginary parts of the
 * input (last dim 1 or 2) times [N, K] cosine and sine tables give those
 * of the output, as numpy.fft's fft, ifft and irfft (which the reference
 * calls) define them: the input cut or zero-padded to dft_length,
 * onesided forward keeping K = L/2 + 1 bins, onesided inverse the real
 * signal of a half spectrum. STFT runs the forward tables on frames
 * gathered from the signal; the window functions are known values. */
#include "onnx.h"

#include <math.h>
#include <stdlib.h>

/* part [..., N] (signal axis last) times the [N, K] matrix m; -1 when m is all zero. */
static rlx_node times(ox_importer *im, rlx_node part, const double *m, int64_t nin, int64_t k) {
  int nonzero = 0;
  for (int64_t i = 0; i < nin * k; i++) nonzero |= m[i] != 0;
  if (!nonzero || part < 0) return -1;
  int64_t md[2] = {nin, k};
  return rlx_matmul(im->g, part, rlx_constant(im->g, RLX_F64, 2, md, m));
}

static rlx_node plus(rlx_graph *g, rlx_node a, rlx_node b) { return a < 0 ? b : b < 0 ? a : rlx_add(g, a, b); }

rlx_status ox_op_dft(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0);
  NEED(x);
  int64_t xd[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, x, &t, xd);
  int64_t axis = im->opset >= 20 ? -2 : ox_attr_int(n, "axis", 1), cnt;
  if (im->opset >= 20 && ox_has_in(n, 2)) {
    const int64_t *av = ox_in_ints(im, n, 2, &cnt);
    if (!av || cnt != 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "an axis not known at import");
    axis = av[0];
  }
  if (axis < 0) axis += r;
  int64_t c = r > 0 ? xd[r - 1] : 0;
  if (r < 2 || axis < 0 || axis >= r - 1 || (c != 1 && c != 2) || !ir_is_float(t))
    return ox_node_fail(im, n, RLX_ERR_INVALID, "a float signal [..., N, 1 or 2] and an axis before its last dim");
  int inverse = (int)ox_attr_int(n, "inverse", 0), onesided = (int)ox_attr_int(n, "onesided", 0);
  int64_t nin = xd[axis], len = inverse && onesided ? 2 * (nin - 1) : nin;
  if (ox_has_in(n, 1)) {
    const int64_t *lv = ox_in_ints(im, n, 1, &cnt);
    if (!lv || cnt != 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "dft_length not known at import");
    len = lv[0];
  }
  if (ir_dim_is_sym(nin) || len < 1 || nin * len > (1 << 22))
    return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "a DFT of %lld points over %lld", (long long)len, (long long)nin);
  int64_t k = inverse ? len : onesided ? len / 2 + 1 : len;
  /* out_re = a.mar + b.mbr, out_im = a.mai + b.mbi; rows past the input's length are cut */
  double *m = calloc((size_t)(4 * nin * k + 1), sizeof *m);
  if (!m) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  double *mar = m, *mbr = m + nin * k, *mai = m + 2 * nin * k, *mbi = m + 3 * nin * k;
  for (int64_t i = 0; i < nin; i++)
    for (int64_t j = 0; j < k; j++) {
      if (inverse && onesided ? i > len / 2 : i >= len) continue;
      double th = 6.283185307179586477 * (double)((i * j) % len) / (double)len, cs = cos(th), sn = sin(th);
      if (!inverse) {
        mar[i * k + j] = cs, mbr[i * k + j] = sn, mai[i * k + j] = -sn, mbi[i * k + j] = cs;
      } else if (!onesided) {
        mar[i * k + j] = cs / len, mbr[i * k + j] = -sn / len, mai[i * k + j] = sn / len, mbi[i * k + j] = cs / len;
      } else {   /* irfft: the half spectrum's other half by symmetry; bins 0 and L/2 counted once */
        double w = i == 0 || (len % 2 == 0 && i == len / 2) ? 1 : 2;
        mar[i * k + j] = w * cs / len, mbr[i * k + j] = -w * sn / len;
      }
    }
  int64_t perm[RLX_MAX_RANK], back[RLX_MAX_RANK], pd[RLX_MAX_RANK];
  for (int i = 0, q = 0; i < r - 1; i++)
    if (i != axis) perm[q++] = i;
  perm[r - 2] = axis;
  for (int i = 0; i < r - 1; i++) back[perm[i]] = i;
  for (int i = 0; i < r - 1; i++) pd[i] = xd[i];
  rlx_node xf = rlx_cast(g, x, RLX_F64);   /* in F64 as the reference: near-zero bins stay near zero */
  rlx_node a = rlx_transpose(g, rlx_reshape(g, rlx_narrow(g, xf, r - 1, 0, 1), r - 1, pd), r - 1, perm);
  rlx_node b = c == 2 ? rlx_transpose(g, rlx_reshape(g, rlx_narrow(g, xf, r - 1, 1, 1), r - 1, pd), r - 1, perm) : -1;
  rlx_node re = plus(g, times(im, a, mar, nin, k), times(im, b, mbr, nin, k));
  rlx_node imv = inverse && onesided ? -1 : plus(g, times(im, a, mai, nin, k), times(im, b, mbi, nin, k));
  free(m);
  int64_t od[RLX_MAX_RANK];
  for (int i = 0; i < r - 1; i++) od[i] = i == axis ? k : xd[i];
  od[r - 1] = 1;
  rlx_node parts[2] = {rlx_reshape(g, rlx_transpose(g, re, r - 1, back), r, od), -1};
  if (imv >= 0) parts[1] = rlx_reshape(g, rlx_transpose(g, imv, r - 1, back), r, od);
  rlx_node y = imv >= 0 ? rlx_concat(g, 2, parts, r - 1) : parts[0];
  return ox_set_out(im, n, 0, rlx_cast(g, y, t));
}

/* HannWindow, HammingWindow, BlackmanWindow of a size known at import:
 * a known value, sum_k a_k cos(2 pi k n / N) with N the size (periodic) or
 * the size - 1 (symmetric), in output_datatype. */
rlx_status ox_op_window(ox_importer *im, const ox_node *n) {
  int64_t cnt;
  const int64_t *size = ox_in_ints(im, n, 0, &cnt);
  if (!size || cnt != 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "size not known at import");
  if (ox_ints_sym(im, size, 1)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "size " OX_SYM_HINT);
  if (size[0] < 0 || size[0] > (1 << 24)) return ox_node_fail(im, n, RLX_ERR_INVALID, "size %lld", (long long)size[0]);
  int dt = ox_rlx_dtype((int32_t)ox_attr_int(n, "output_datatype", 1));
  if (dt < 0) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "output_datatype %lld", (long long)ox_attr_int(n, "output_datatype", 1));
  double a[3] = {0.42, -0.5, 0.08};   /* Blackman */
  if (n->op_type[0] == 'H' && n->op_type[2] == 'n') a[0] = 0.5, a[1] = -0.5, a[2] = 0;               /* Hann */
  else if (n->op_type[0] == 'H') a[0] = 25.0 / 46, a[1] = -21.0 / 46, a[2] = 0;                      /* Hamming */
  int64_t len = size[0], den = ox_attr_int(n, "periodic", 1) ? len : len - 1;
  double *w = ox_alloc(im->arena, (size_t)(len ? len : 1) * sizeof *w);
  int64_t *wi = ox_alloc(im->arena, (size_t)(len ? len : 1) * sizeof *wi);
  if (!w || !wi) return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < len; i++) {
    double x = den > 0 ? 2 * 3.14159265358979323846 * (double)i / (double)den : 0;
    w[i] = a[0] + a[1] * cos(x) + a[2] * cos(2 * x);
    wi[i] = ox_f2i(w[i]);
  }
  int is_float = ir_is_float((rlx_dtype)dt);
  return ox_set_out_known(im, n, 0, (rlx_dtype)dt, 1, &len, is_float ? NULL : wi, is_float ? w : NULL);
}

/* STFT(signal [B, N, 1 or 2], frame_step, window?, frame_length?) ->
 * [B, frames, bins, 2]: the frames (a Gather of constant positions along
 * the signal), times the window, through the forward DFT tables. */
rlx_status ox_op_stft(ox_importer *im, const ox_node *n) {
  rlx_graph *g = im->g;
  rlx_node x = IN(0), win = -1;
  NEED(x);
  int64_t xd[RLX_MAX_RANK], cnt, wd[RLX_MAX_RANK];
  rlx_dtype t;
  int r = rlx_node_type(g, x, &t, xd);
  if (r != 3 || (xd[2] != 1 && xd[2] != 2) || !ir_is_float(t) || ir_dim_is_sym(xd[0]) || ir_dim_is_sym(xd[1]))
    return ox_node_fail(im, n, RLX_ERR_INVALID, "a static float signal [B, N, 1 or 2]");
  const int64_t *step = ox_in_ints(im, n, 1, &cnt), *lv = NULL;
  if (!step || cnt != 1 || step[0] < 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "frame_step not known at import (or < 1)");
  int64_t len = -1;
  if (ox_has_in(n, 2)) {
    NEED(win = IN(2));
    if (rlx_node_type(g, win, NULL, wd) != 1 || ir_dim_is_sym(wd[0])) return ox_node_fail(im, n, RLX_ERR_SHAPE, "a window of rank 1");
    len = wd[0];
  }
  if (ox_has_in(n, 3)) {
    if (!(lv = ox_in_ints(im, n, 3, &cnt)) || cnt != 1) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "frame_length not known at import");
    if (len >= 0 && lv[0] != len) return ox_node_fail(im, n, RLX_ERR_SHAPE, "frame_length %lld and a window of %lld", (long long)lv[0], (long long)len);
    len = lv[0];
  }
  int64_t N = xd[1], B = xd[0];
  if (len < 1 || len > N || len > (1 << 14)) return ox_node_fail(im, n, RLX_ERR_INVALID, "frames of %lld in a signal of %lld", (long long)len, (long long)N);
  int64_t frames = (N - len) / step[0] + 1, k = ox_attr_int(n, "onesided", 1) ? len / 2 + 1 : len;
  if (frames * len > (1 << 24)) return ox_node_fail(im, n, RLX_ERR_UNSUPPORTED, "%lld frames of %lld", (long long)frames, (long long)len);
  int64_t *pos = ox_alloc(im->arena, (size_t)(frames * len) * sizeof *pos);
  double *m = calloc((size_t)(2 * len * k), sizeof *m);
  if (!pos || !m) {
    free(m);
    return ox_node_fail(im, n, RLX_ERR_NOMEM, "out of memory");
  }
  for (int64_t f = 0; f < frames; f++)
    for (int64_t j = 0; j < len; j++) pos[f * len + j] = f * step[0] + j;
  for (int64_t i = 0; i < len; i++)
    for (int64_t j = 0; j < k; j++) {
      double th = 6.283185307179586477 * (double)((i * j) % len) / (double)len;
      m[i * k + j] = cos(th), m[len * k + i * k + j] = -sin(th);
    }
  rlx_node idx = rlx_constant(g, RLX_I64, 2, (int64_t[]){frames, len}, pos), part[2], out[2];
  for (int c = 0; c < xd[2]; c++) {   /* real and imaginary frames [B, frames, len] in F64 */
    rlx_node s = rlx_reshape(g, rlx_narrow(g, rlx_cast(g, x, RLX_F64), 2, c, 1), 2, (int64_t[]){B, N});
    part[c] = rlx_gather(g, s, idx, 1);
    if (win >= 0) part[c] = rlx_mul(g, part[c], rlx_cast(g, win, RLX_F64));
  }
  /* re = a cos + b sin, im = -a sin + b cos */
  rlx_node b = xd[2] == 2 ? part[1] : -1, bs = b >= 0 ? times(im, b, m + len * k, len, k) : -1;
  out[0] = plus(g, times(im, part[0], m, len, k), bs >= 0 ? rlx_activation(g, RLX_ACT_NEG, bs) : -1);
  out[1] = plus(g, times(im, part[0], m + len * k, len, k), b >= 0 ? times(im, b, m, len, k) : -1);
  free(m);
  for (int c = 0; c < 2; c++) {
    if (out[c] < 0) out[c] = rlx_expand(g, ox_scalar(im, RLX_F64, 0), 3, (int64_t[]){B, frames, k});
    out[c] = rlx_reshape(g, out[c], 4, (int64_t[]){B, frames, k, 1});
  }
  return ox_set_out(im, n, 0, rlx_cast(g, rlx_concat(g, 2, out, 3), t));
}
