/* k_layout.c — CPU kernels of the layout and data-movement ops (OPS.md
 * rows 10-23) and of GetOutput.
 *
 * Data movement is dtype-blind: elements are moved as bytes of the dtype's
 * element size, so one loop serves every plain dtype. Only ScatterAdd
 * (adds), Iota and OneHot (make values) and Pad (the fill value) look at
 * the dtype, through cpu_get/cpu_set.
 */
#include "cpu.h"
#include "vec.h"

#include <math.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

static size_t elem_size(const cpu_tensor *t) { return (size_t)ir_dtypes[t->dtype].size; }

/* 4- or 8-byte elements over the innermost m (2 or 3) dims of a box, one
 * loop nest (short rows: a 2x2 pool window transposed has rows of 2). */
#define COPY_NEST(name, T)                                                                                   \
  static void name(void *dv, const int64_t *ds, const void *sv, const int64_t *ss, int m, const int64_t *dims) { \
    T *d = dv;                                                                                               \
    const T *s = sv;                                                                                         \
    const int64_t n0 = m == 3 ? dims[0] : 1, d0 = m == 3 ? ds[0] : 0, s0 = m == 3 ? ss[0] : 0;               \
    const int64_t *dm = dims + m - 2, *dsm = ds + m - 2, *ssm = ss + m - 2;                                  \
    for (int64_t a = 0; a < n0; a++)                                                                         \
      for (int64_t r = 0; r < dm[0]; r++)                                                                    \
        for (int64_t j = 0; j < dm[1]; j++) d[a * d0 + r * dsm[0] + j * dsm[1]] = s[a * s0 + r * ssm[0] + j * ssm[1]]; \
  }
COPY_NEST(copy_nest4, uint32_t)
COPY_NEST(copy_nest8, uint64_t)
#undef COPY_NEST

/* Copies an n-d box of `dims` elements: element i (a multi-index) goes
 * from src[src_off + sum i_k*src_strides_k] to dst[dst_off + sum
 * i_k*dst_strides_k]. Strides and offsets are in elements of size es. */
static void copy_box(char *dst, const int64_t *dst_strides, int64_t dst_off, const char *src,
                     const int64_t *src_strides, int64_t src_off, int rank, const int64_t *dims,
                     size_t es) {
  for (int k = 0; k < rank; k++)
    if (dims[k] == 0) return;
  if (rank == 0) {
    memcpy(dst + dst_off * (int64_t)es, src + src_off * (int64_t)es, es);
    return;
  }
  int last = rank - 1;
  int64_t row = dims[last], ds = dst_strides[last], ss = src_strides[last];
  /* short rows of 4- or 8-byte elements: the innermost 2 or 3 dims as one nest */
  int m = 1;
  if ((es == 4 || es == 8) && row < 16 && rank >= 2) m = rank >= 3 && row * dims[last - 1] < 64 ? 3 : 2;
  int64_t idx[RLX_MAX_RANK] = {0};
  for (;;) {
    char *d = dst + dst_off * (int64_t)es;
    const char *s = src + src_off * (int64_t)es;
    if (m > 1) {
      (es == 4 ? copy_nest4 : copy_nest8)(d, dst_strides + rank - m, s, src_strides + rank - m, m, dims + rank - m);
    } else if (ds == 1 && ss == 1) {
      memcpy(d, s, (size_t)row * es);
    } else if (es == 4) { /* strided rows: no call per element */
      for (int64_t j = 0; j < row; j++) ((uint32_t *)(void *)d)[j * ds] = ((const uint32_t *)(const void *)s)[j * ss];
    } else {
      for (int64_t j = 0; j < row; j++) memcpy(d + j * ds * (int64_t)es, s + j * ss * (int64_t)es, es);
    }
    /* advance the multi-index over the outer dims */
    int k = rank - m - 1;
    for (; k >= 0; k--) {
      dst_off += dst_strides[k];
      src_off += src_strides[k];
      if (++idx[k] < dims[k]) break;
      dst_off -= dst_strides[k] * dims[k];
      src_off -= src_strides[k] * dims[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

/* copy_box threaded over slices of its first dim (boxes of at least
 * CPU_VEC_MIN_CHUNK elements per chunk; small boxes run serially). */
typedef struct {
  char *dst;
  const char *src;
  const int64_t *ds, *ss, *dims;
  int64_t dst_off, src_off;
  int rank;
  size_t es;
} box_job;

static void box_slices(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const box_job *J = arg;
  int64_t dims[RLX_MAX_RANK];
  memcpy(dims, J->dims, (size_t)J->rank * sizeof *dims);
  dims[0] = end - begin;
  copy_box(J->dst, J->ds, J->dst_off + begin * J->ds[0], J->src, J->ss, J->src_off + begin * J->ss[0], J->rank,
           dims, J->es);
}

static void copy_box_par(cpu_ctx *ctx, char *dst, const int64_t *ds, int64_t dst_off, const char *src,
                         const int64_t *ss, int64_t src_off, int rank, const int64_t *dims, size_t es) {
  int64_t numel = 1;
  for (int k = 0; k < rank; k++) numel *= dims[k];
  if (rank == 0 || numel == 0 || dims[0] < 2 || numel < 2 * CPU_VEC_MIN_CHUNK) {
    copy_box(dst, ds, dst_off, src, ss, src_off, rank, dims, es);
    return;
  }
  box_job J = {dst, src, ds, ss, dims, dst_off, src_off, rank, es};
  cpu_parallel_for(ctx, dims[0], cpu_vec_grain(numel / dims[0]), box_slices, &J);
}

/* The dims copy_box walks for t, and its element size: a block dtype's
 * rows (IR: only moved along an axis before the last) as runs of bytes. */
static size_t box_dims(const cpu_tensor *t, int64_t *dims) {
  for (int k = 0; k < t->rank; k++) dims[k] = t->d[k];
  if (!ir_is_block(t->dtype)) return elem_size(t);
  dims[t->rank - 1] = (int64_t)rlx_dtype_nbytes(t->dtype, t->d[t->rank - 1]);
  return 1;
}

/* out = in (the planner may alias the two buffers). */
static void copy_whole(const cpu_tensor *in, cpu_tensor *out) {
  if (out->data != in->data && out->nbytes) memcpy(out->data, in->data, out->nbytes);
}

rlx_status cpu_Reshape(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx, (void)n;
  copy_whole(&in[0], &out[0]);
  return RLX_OK;
}

rlx_status cpu_StopGradient(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                            cpu_tensor *out) {
  (void)ctx, (void)n;
  copy_whole(&in[0], &out[0]);
  return RLX_OK;
}

/* The runtime passes the selected output of the producer as in[0]. */
rlx_status cpu_GetOutput(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                         cpu_tensor *out) {
  (void)ctx, (void)n;
  copy_whole(&in[0], &out[0]);
  return RLX_OK;
}

rlx_status cpu_Expand(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)n;
  int64_t ss[RLX_MAX_RANK], ds[RLX_MAX_RANK];
  cpu_bcast_strides(&in[0], out->rank, out->d, ss);
  cpu_strides(out->rank, out->d, ds);
  copy_box_par(ctx, out->data, ds, 0, in[0].data, ss, 0, out->rank, out->d, elem_size(out));
  return RLX_OK;
}

/* A transpose whose output rows are not input rows: with the dims
 * collapsed, output dim `col` reads the input contiguously, so each
 * (outer index, tile of col) item is a 2-D transpose between dst [col x
 * row] (row the output's innermost dim) and src [row x col], done in
 * TRANSPOSE_TILE squares so both sides stay in cache lines. */
#define TRANSPOSE_TILE 16
typedef struct {
  int rank, col;
  int64_t dims[RLX_MAX_RANK], ss[RLX_MAX_RANK], ds[RLX_MAX_RANK];
  int64_t col_tiles;
  const char *src;
  char *dst;
  size_t es;
} transpose_job;

#define TRANSPOSE_TILES(T)                                                                         \
  do {                                                                                              \
    const T *s_ = (const T *)(const void *)(J->src + (size_t)so * J->es);                           \
    T *d_ = (T *)(void *)(J->dst + (size_t)doff * J->es);                                           \
    for (int64_t r0 = 0; r0 < rows; r0 += TRANSPOSE_TILE) {                                         \
      const int64_t r1 = r0 + TRANSPOSE_TILE < rows ? r0 + TRANSPOSE_TILE : rows;                   \
      for (int64_t c = c0; c < c1; c++)                                                             \
        for (int64_t r = r0; r < r1; r++) d_[c * dcol + r] = s_[r * srow + c];                      \
    }                                                                                               \
  } while (0)

/* 4-byte elements: the tile in 4x4 blocks through SSE registers where the
 * target has SSE2 (every x86-64), the edges element by element. */
static void transpose_tile4(const uint32_t *s, int64_t srow, uint32_t *d, int64_t dcol, int64_t r0, int64_t r1,
                            int64_t c0, int64_t c1) {
  int64_t c4 = c0, r4 = r0;
#ifdef __SSE2__
  for (c4 = c0; c4 + 4 <= c1; c4 += 4) {
    for (r4 = r0; r4 + 4 <= r1; r4 += 4) {
      const float *src = (const float *)(const void *)(s + r4 * srow + c4);
      __m128 x0 = _mm_loadu_ps(src), x1 = _mm_loadu_ps(src + srow), x2 = _mm_loadu_ps(src + 2 * srow),
             x3 = _mm_loadu_ps(src + 3 * srow);
      _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
      float *dst = (float *)(void *)(d + c4 * dcol + r4);
      _mm_storeu_ps(dst, x0);
      _mm_storeu_ps(dst + dcol, x1);
      _mm_storeu_ps(dst + 2 * dcol, x2);
      _mm_storeu_ps(dst + 3 * dcol, x3);
    }
    for (int64_t c = c4; c < c4 + 4; c++) /* rows past the last full block */
      for (int64_t r = r4; r < r1; r++) d[c * dcol + r] = s[r * srow + c];
  }
#endif
  for (int64_t c = c4; c < c1; c++) /* columns past the last full block */
    for (int64_t r = r0; r < r1; r++) d[c * dcol + r] = s[r * srow + c];
}

static void transpose_items(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const transpose_job *J = arg;
  const int last = J->rank - 1, col = J->col;
  const int64_t rows = J->dims[last], srow = J->ss[last], dcol = J->ds[col];
  for (int64_t it = begin; it < end; it++) {
    int64_t outer = it / J->col_tiles, so = 0, doff = 0;
    const int64_t c0 = it % J->col_tiles * TRANSPOSE_TILE;
    const int64_t c1 = c0 + TRANSPOSE_TILE < J->dims[col] ? c0 + TRANSPOSE_TILE : J->dims[col];
    for (int i = last - 1; i >= 0; i--) {
      if (i == col) continue;
      const int64_t idx = outer % J->dims[i];
      outer /= J->dims[i];
      so += idx * J->ss[i];
      doff += idx * J->ds[i];
    }
    switch (J->es) {
    case 1: TRANSPOSE_TILES(uint8_t); break;
    case 2: TRANSPOSE_TILES(uint16_t); break;
    case 4: {
      const uint32_t *s4 = (const uint32_t *)(const void *)(J->src + (size_t)so * 4);
      uint32_t *d4 = (uint32_t *)(void *)(J->dst + (size_t)doff * 4);
      for (int64_t r0 = 0; r0 < rows; r0 += TRANSPOSE_TILE)
        transpose_tile4(s4, srow, d4, dcol, r0, r0 + TRANSPOSE_TILE < rows ? r0 + TRANSPOSE_TILE : rows, c0, c1);
      break;
    }
    case 8: TRANSPOSE_TILES(uint64_t); break;
    default:
      for (int64_t c = c0; c < c1; c++)
        for (int64_t r = 0; r < rows; r++)
          memcpy(J->dst + (size_t)(doff + c * dcol + r) * J->es, J->src + (size_t)(so + r * srow + c) * J->es,
                 J->es);
    }
  }
}
#undef TRANSPOSE_TILES

rlx_status cpu_Transpose(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                         cpu_tensor *out) {
  int64_t in_strides[RLX_MAX_RANK], ss[RLX_MAX_RANK], ds[RLX_MAX_RANK];
  cpu_strides(in[0].rank, in[0].d, in_strides);
  for (int k = 0; k < out->rank; k++) ss[k] = in_strides[n->a.perm.v[k]];
  cpu_strides(out->rank, out->d, ds);
  /* collapse: drop size-1 dims, merge output neighbours that are
   * neighbours in the input too */
  transpose_job J = {.src = in[0].data, .dst = out->data, .es = elem_size(out)};
  for (int k = 0; k < out->rank; k++) {
    if (out->d[k] == 1) continue;
    if (J.rank > 0 && J.ss[J.rank - 1] == ss[k] * out->d[k]) {
      J.dims[J.rank - 1] *= out->d[k];
      J.ss[J.rank - 1] = ss[k];
      J.ds[J.rank - 1] = ds[k];
    } else {
      J.dims[J.rank] = out->d[k];
      J.ss[J.rank] = ss[k];
      J.ds[J.rank] = ds[k];
      J.rank++;
    }
  }
  /* A contiguous innermost run of 8 bytes (two floats: a 2x2 window's
   * rows) moves as one 8-byte element. */
  const int64_t run = J.rank > 1 && J.ss[J.rank - 1] == 1 ? J.dims[J.rank - 1] : 0;
  int widen = run > 1 && (int64_t)J.es * run == 8 && (uintptr_t)in[0].data % 8 == 0 && (uintptr_t)out->data % 8 == 0;
  for (int k = 0; widen && k < J.rank - 1; k++) widen = J.ss[k] % run == 0 && J.ds[k] % run == 0;
  if (widen) {
    J.rank--;
    for (int k = 0; k < J.rank; k++) {
      J.ss[k] /= run;
      J.ds[k] /= run;
    }
    J.es = 8;
  }
  J.col = -1;
  for (int k = 0; k + 1 < J.rank; k++)
    if (J.ss[k] == 1) J.col = k;
  /* an input-contiguous innermost dim, or one too short to tile: rows */
  if (out->numel == 0 || J.col < 0 || J.dims[J.rank - 1] < 4) {
    copy_box_par(ctx, out->data, J.ds, 0, in[0].data, J.ss, 0, J.rank, J.dims, J.es);
    return RLX_OK;
  }
  J.col_tiles = (J.dims[J.col] + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
  const int64_t items = out->numel / (J.dims[J.col] * J.dims[J.rank - 1]) * J.col_tiles;
  cpu_parallel_for(ctx, items, cpu_vec_grain(TRANSPOSE_TILE * J.dims[J.rank - 1]), transpose_items, &J);
  return RLX_OK;
}

rlx_status cpu_Narrow(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  int axis = (int)n->a.axis;
  int64_t ss[RLX_MAX_RANK], ds[RLX_MAX_RANK], id[RLX_MAX_RANK], od[RLX_MAX_RANK];
  box_dims(&in[0], id);
  const size_t es = box_dims(out, od);
  cpu_strides(in[0].rank, id, ss);
  cpu_strides(out->rank, od, ds);
  /* kernels run on specialized graphs: start is normalized */
  copy_box(out->data, ds, 0, in[0].data, ss, n->a.start * ss[axis], out->rank, od, es);
  return RLX_OK;
}

rlx_status cpu_Slice(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  int64_t ss[RLX_MAX_RANK], ds[RLX_MAX_RANK], off = 0;
  cpu_strides(in[0].rank, in[0].d, ss);
  cpu_strides(out->rank, out->d, ds);
  /* Starts are normalized (kernels run on specialized graphs). A dim of
   * output size 1 gets stride 0: its step may be huge, and a step is < dim
   * (so stride * step fits) whenever the output size is > 1. */
  for (int k = 0; k < out->rank; k++) {
    off += n->a.starts.v[k] * ss[k];
    ss[k] = out->d[k] > 1 ? ss[k] * n->a.steps.v[k] : 0;
  }
  copy_box(out->data, ds, 0, in[0].data, ss, off, out->rank, out->d, elem_size(out));
  return RLX_OK;
}

rlx_status cpu_Concat(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  int axis = (int)n->a.axis;
  int64_t ds[RLX_MAX_RANK], ss[RLX_MAX_RANK], at = 0;
  cpu_strides(out->rank, out->d, ds);
  for (int i = 0; i < n->n_in; i++) {
    cpu_strides(in[i].rank, in[i].d, ss);
    copy_box(out->data, ds, at * ds[axis], in[i].data, ss, 0, in[i].rank, in[i].d,
             elem_size(out));
    at += in[i].d[axis];
  }
  return RLX_OK;
}

/* The bytes of v stored as one element of dtype t (a plain dtype). */
static uint64_t element_bytes(rlx_dtype t, double v) {
  uint64_t cell = 0;
  cpu_tensor one = {.data = &cell, .dtype = t, .rank = 0, .numel = 1,
                    .nbytes = (size_t)ir_dtypes[t].size};
  cpu_set(&one, 0, v);
  return cell;
}

rlx_status cpu_Pad(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  int64_t ds[RLX_MAX_RANK], ss[RLX_MAX_RANK], off = 0;
  uint64_t fill = element_bytes(out->dtype, n->a.value);
  size_t es = elem_size(out);
  for (int64_t i = 0; i < out->numel; i++) memcpy((char *)out->data + i * (int64_t)es, &fill, es);
  cpu_strides(out->rank, out->d, ds);
  cpu_strides(in[0].rank, in[0].d, ss);
  for (int k = 0; k < out->rank; k++) off += n->a.before.v[k] * ds[k];
  copy_box(out->data, ds, off, in[0].data, ss, 0, in[0].rank, in[0].d, es);
  return RLX_OK;
}

/* Index i of idx as an int64 in [0, dim): floats truncate toward zero.
 * Anything else (NaN included) sets the error and returns 0. */
static int read_index(const ir_node *n, const cpu_tensor *idx, int64_t i, int64_t dim,
                      int64_t *v) {
  if (ir_is_float(idx->dtype)) {
    double f = trunc(cpu_get(idx, i));
    if (f >= 0 && f < (double)dim) {
      *v = (int64_t)f;
      return 1;
    }
    rlx_set_error(RLX_ERR_INVALID, "%s (node %d): index %g (element %lld) out of range "
                  "[0, %lld)", ir_ops[n->op].name, n->id, f, (long long)i, (long long)dim);
    return 0;
  }
  int64_t k = cpu_get_i(idx, i);
  if (k >= 0 && k < dim) {
    *v = k;
    return 1;
  }
  rlx_set_error(RLX_ERR_INVALID, "%s (node %d): index %lld (element %lld) out of range "
                "[0, %lld)", ir_ops[n->op].name, n->id, (long long)k, (long long)i,
                (long long)dim);
  return 0;
}

/* Every index checked before anything is written. */
static rlx_status check_indices(const ir_node *n, const cpu_tensor *idx, int64_t dim) {
  int64_t v;
  for (int64_t i = 0; i < idx->numel; i++)
    if (!read_index(n, idx, i, dim, &v)) return RLX_ERR_INVALID;
  return RLX_OK;
}

rlx_status cpu_Gather(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *table = &in[0], *idx = &in[1];
  int64_t outer, len, inner;
  cpu_axis_split(table, (int)n->a.axis, &outer, &len, &inner);
  rlx_status st = check_indices(n, idx, len);
  if (st != RLX_OK) return st;
  /* a block-dtype table (a quantized embedding) moves whole rows of blocks */
  size_t row = ir_is_block(table->dtype) ? rlx_dtype_nbytes(table->dtype, inner) : (size_t)inner * elem_size(table);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < idx->numel; j++) {
      int64_t k = 0;
      read_index(n, idx, j, len, &k);
      memcpy((char *)out->data + (o * idx->numel + j) * (int64_t)row,
             (const char *)table->data + (o * len + k) * (int64_t)row, row);
    }
  return RLX_OK;
}

rlx_status cpu_ScatterAdd(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                          cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *idx = &in[1], *upd = &in[2];
  int64_t outer, len, inner;
  cpu_axis_split(&in[0], (int)n->a.axis, &outer, &len, &inner);
  rlx_status st = check_indices(n, idx, len);
  if (st != RLX_OK) return st;
  copy_whole(&in[0], out);
  /* Integers add in int64 and wrap (unsigned add: no signed overflow);
   * floats add in double, rounded to the dtype after each add as
   * np.add.at does; bool adds as logical or (cpu_set stores v != 0). */
  int integer = ir_is_int(out->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < idx->numel; j++) {
      int64_t k = 0;
      read_index(n, idx, j, len, &k);
      int64_t dst = (o * len + k) * inner, src = (o * idx->numel + j) * inner;
      if (out->dtype == RLX_F32) { /* an f32 add is the double add rounded once: the same */
        float *y = (float *)out->data + dst;
        const float *u = (const float *)upd->data + src;
        for (int64_t e = 0; e < inner; e++) y[e] += u[e];
        continue;
      }
      for (int64_t e = 0; e < inner; e++) {
        if (integer)
          cpu_set_i(out, dst + e, (int64_t)((uint64_t)cpu_get_i(out, dst + e) +
                                            (uint64_t)cpu_get_i(upd, src + e)));
        else
          cpu_set(out, dst + e, cpu_get(out, dst + e) + cpu_get(upd, src + e));
      }
    }
  return RLX_OK;
}

rlx_status cpu_UpdateSlice(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                           cpu_tensor *out) {
  (void)ctx;
  const cpu_tensor *upd = &in[1];
  int axis = (int)n->a.axis;
  int64_t start = cpu_get_i(&in[2], 0), dim = in[0].d[axis], len = upd->d[axis];
  if (start < 0 || start > dim - len)
    return rlx_set_error(RLX_ERR_INVALID, "UpdateSlice (node %d): start %lld out of range: "
                         "%lld rows along axis %d do not fit in [0, %lld)", n->id,
                         (long long)start, (long long)len, axis, (long long)dim);
  copy_whole(&in[0], out);
  int64_t ds[RLX_MAX_RANK], ss[RLX_MAX_RANK], od[RLX_MAX_RANK], ud[RLX_MAX_RANK];
  const size_t es = box_dims(out, od);
  box_dims(upd, ud);
  cpu_strides(out->rank, od, ds);
  cpu_strides(upd->rank, ud, ss);
  copy_box(out->data, ds, start * ds[axis], upd->data, ss, 0, upd->rank, ud, es);
  return RLX_OK;
}

rlx_status cpu_Iota(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx, (void)in;
  int64_t outer, len, inner;
  cpu_axis_split(out, (int)n->a.axis, &outer, &len, &inner);
  /* cpu_set_i wraps integers, as arange(n).astype(dtype); floats round */
  for (int64_t i = 0; i < out->numel; i++) cpu_set_i(out, i, (i / inner) % len);
  return RLX_OK;
}

typedef struct {
  const int64_t *idx;
  uint32_t *y;
  int64_t depth;
  uint32_t one;
} onehot_job;

static void onehot_rows4(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const onehot_job *J = arg;
  memset(J->y + begin * J->depth, 0, (size_t)((end - begin) * J->depth) * sizeof *J->y);
  for (int64_t i = begin; i < end; i++)
    if (J->idx[i] >= 0 && J->idx[i] < J->depth) J->y[i * J->depth + J->idx[i]] = J->one;
}

rlx_status cpu_OneHot(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  int64_t depth = n->a.depth;
  size_t es = elem_size(out);
  uint64_t one = element_bytes(out->dtype, 1.0);
  /* zero is all-zero bytes in every plain dtype */
  if (in[0].dtype == RLX_I64 && es == 4) { /* ArgMax indices into a float mask: threaded */
    onehot_job J = {in[0].data, out->data, depth, 0};
    memcpy(&J.one, &one, sizeof J.one);
    cpu_parallel_for(ctx, in[0].numel, cpu_vec_grain(depth), onehot_rows4, &J);
    return RLX_OK;
  }
  if (out->nbytes) memset(out->data, 0, out->nbytes);
  for (int64_t i = 0; i < in[0].numel; i++) {
    int64_t k = cpu_get_i(&in[0], i);
    if (k >= 0 && k < depth) memcpy((char *)out->data + (i * depth + k) * (int64_t)es, &one, es);
  }
  return RLX_OK;
}

rlx_status cpu_Tri(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out) {
  (void)ctx;
  int64_t rows = out->d[out->rank - 2], cols = out->d[out->rank - 1];
  int64_t mats = out->numel ? out->numel / (rows * cols) : 0;
  /* k beyond the matrix behaves as the nearest k that is not (no overflow in row + k). */
  int64_t k = n->a.k < -rows - 1 ? -rows - 1 : n->a.k > cols + 1 ? cols + 1 : n->a.k;
  size_t es = elem_size(out);
  copy_whole(&in[0], out);
  for (int64_t m = 0; m < mats; m++)
    for (int64_t r = 0; r < rows; r++) {
      char *row = (char *)out->data + ((m * rows + r) * cols) * (int64_t)es;
      /* upper keeps col >= r + k (zero [0, r + k)); lower keeps col <= r + k
       * (zero [r + k + 1, cols)) */
      int64_t lo = n->a.upper ? 0 : r + k + 1, hi = n->a.upper ? r + k : cols;
      lo = lo < 0 ? 0 : lo > cols ? cols : lo;
      hi = hi < 0 ? 0 : hi > cols ? cols : hi;
      if (hi > lo) memset(row + lo * (int64_t)es, 0, (size_t)(hi - lo) * es);
    }
  return RLX_OK;
}
