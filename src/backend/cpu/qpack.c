/* qpack.c — repacking GGUF rows into 16-row groups (layout: qpack.h) and
 * the threaded walk of a packed matrix; the kernels are qpack_avx512.c
 * and qpack_avx2_body.h's. */
#include "qpack.h"

#include "cpu_features.h"
#include "huge_alloc.h"
#include "quant_blocks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define QK 32
#define QK_K 256

/* Bytes of one packed 32-element block of a group (the K-quants: without
 * the super-block header, which holds their scales). */
static size_t block_bytes(rlx_dtype w) {
  switch (w) {
  case RLX_Q4_0: return 256 + 32;
  case RLX_Q4_1: return 256 + 64;
  case RLX_Q5_0: return 256 + 64 + 32;
  case RLX_Q5_1: return 256 + 64 + 64;
  case RLX_Q8_0: return 512 + 32;
  case RLX_Q4_K: return 256;
  case RLX_Q5_K: return 256 + 64;
  case RLX_Q6_K: return QPACK_Q6_BLOCK;
  default: return 0;
  }
}

/* The super-block header of the K-quants in front of its blocks: Q4_K's
 * and Q5_K's d, dmin and 6-bit scales and mins, Q6_K's scales (its d and
 * corr: in the group's heads). */
static size_t header_bytes(rlx_dtype w) { return w == RLX_Q4_K || w == RLX_Q5_K ? QPACK_K4_HEADER : w == RLX_Q6_K ? QPACK_Q6_SC : 0; }

static int is_k(rlx_dtype w) { return w == RLX_Q4_K || w == RLX_Q5_K || w == RLX_Q6_K; }

static size_t group_bytes(rlx_dtype w, int64_t K) {
  if (is_k(w)) return (w == RLX_Q6_K ? qpack_q6_heads(K) : 0) + (size_t)(K / QK_K) * (header_bytes(w) + 8 * block_bytes(w));
  return (size_t)(K / QK) * block_bytes(w);
}

static uint64_t ld64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static uint32_t ld32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

#define B01 0x0101010101010101ull
#define B03 0x0303030303030303ull
#define B0F 0x0F0F0F0F0F0F0F0Full

/* Row lane l's bit-4 plane (m bit j: bit 4 of level j) into a block's
 * plane (qpack.h): for AVX-512 lane l's nibble of each mask t, for AVX2
 * byte 32 (l / 8) + 4 (l % 8) + i with bit t from m's bit 4t + i. */
static void put_plane(uint32_t m, uint8_t *plane, int l, int avx2) {
  if (avx2) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) { /* bits 4t + i to t: pairs, then quads, then the byte */
      uint32_t x = m >> i & 0x11111111u;
      x = (x | x >> 3) & 0x03030303u;
      x = (x | x >> 6) & 0x000F000Fu;
      x = (x | x >> 12) & 0xFFu;
      v |= x << 8 * i;
    }
    memcpy(plane + 32 * (l / 8) + 4 * (l % 8), &v, 4);
    return;
  }
  for (int t = 0; t < 8; t++) /* lane l's 4 bits of mask t: a nibble of byte l / 2 */
    plane[8 * t + l / 2] |= (uint8_t)((m >> 4 * t & 0xF) << 4 * (l % 2));
}

/* Levels lv[32] of row lane l (0 .. 2^bits - 1, bits 4 or 5) into a
 * block: the low nibbles in Q4_0's byte order, then for bit 4 its plane
 * (put_plane). */
static void put_levels(const uint8_t *lv, int bits, uint8_t *out, int l, int avx2) {
  for (int t = 0; t < 4; t++) { /* 4 levels a word: bytes are independent lanes */
    const uint32_t v = (ld32(lv + 4 * t) & 0x0F0F0F0Fu) | (ld32(lv + 16 + 4 * t) & 0x0F0F0F0Fu) << 4;
    memcpy(out + t * 64 + l * 4, &v, 4);
  }
  if (bits == 5) {
    uint32_t m = 0; /* bit j: bit 4 of level j */
    for (int q = 0; q < 4; q++)
      /* bit 8i of the masked word lands on bit 56 + i, and no two products meet */
      m |= (uint32_t)((((ld64(lv + 8 * q) >> 4) & B01) * 0x0102040810204080ull) >> 56) << 8 * q;
    put_plane(m, out + 256, l, avx2);
  }
}

/* Levels lv[32] of row lane l (6 bits, bit 5 inverted) into a Q6_K block:
 * per half h, for weight registers 4 h + k (k < 3; register t: levels 4t
 * .. 4t + 3) a vector of 64 bytes, byte 4 l + i = level 4 (4 h + k) + i
 * in bits 2..7 and bits 2k, 2k + 1 of level 4 (4 h + 3) + i in bits 0..1
 * (qpack_avx512.h's q6_k_half). */
static void put_q6_levels(const uint8_t *lv, uint8_t *out, int l) {
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < 3; k++)
      for (int i = 0; i < 4; i++)
        out[192 * h + 64 * k + 4 * l + i] = (uint8_t)(lv[16 * h + 4 * k + i] << 2 | (lv[16 * h + 12 + i] >> 2 * k & 3));
}

static pthread_once_t flag_once = PTHREAD_ONCE_INIT;
static int packing_on, amx_on;
static void read_flag(void) {
  packing_on = ir_env_flag("RLX_QPACK", 1);
  amx_on = !ir_env_flag("RLX_NO_AMX", 0);
}

typedef enum { KERNELS_NONE, KERNELS_AVX512, KERNELS_AVXVNNI, KERNELS_AVX2 } kernel_file;

/* The kernel file that reads w's packing for M rows, the one place both
 * qpack_kernel and the packer (avx2_planes) ask. A packing serves every M,
 * so only a dtype without a bit-4 plane may change file with M (the other
 * files read other planes): Zen 5 streams a Q4_K or Q6_K decode (one row)
 * faster on the AVX-VNNI tile than on the AVX-512 one (BENCHMARKS.md), and
 * both read the same bytes for these. */
static kernel_file kernels_for(const cpu_features *f, rlx_dtype w, int64_t M) {
  int rows;
  if (M == 1 && f->amd && f->avx512_vnni && f->avx_vnni && (w == RLX_Q4_K || w == RLX_Q6_K) &&
      qpack_avxvnni_kernel(w, &rows))
    return KERNELS_AVXVNNI;
  if (f->avx512_vnni) return KERNELS_AVX512;
  if (f->avx_vnni) return KERNELS_AVXVNNI;
  if (f->f16c) return KERNELS_AVX2;
  return KERNELS_NONE;
}

/* The AVX-512 kernels read a plane as masks, which AVX2 would spread
 * bit by bit (40 of a half block's 130 operations); the AVX2 and AVX-VNNI
 * kernels' transposed plane takes a shift per register instead. The packer
 * writes the one the kernels for w will read (at any M: kernels_for). */
static int avx2_planes(rlx_dtype w) { return kernels_for(cpu_get_features(), w, 0) != KERNELS_AVX512; }

qpack_kernel_fn qpack_kernel(rlx_dtype w, int64_t M, int *rows) {
  switch (kernels_for(cpu_get_features(), w, M)) {
  case KERNELS_AVX512: return qpack_avx512_kernel(w, rows);
  case KERNELS_AVXVNNI: return qpack_avxvnni_kernel(w, rows);
  case KERNELS_AVX2: return qpack_avx2_kernel(w, rows);
  case KERNELS_NONE: break;
  }
  return NULL;
}

int qpack_supported(rlx_dtype w) {
  pthread_once(&flag_once, read_flag);
  int rows;
  return packing_on && qpack_kernel(w, 0, &rows) != NULL;
}

void qpack_quantize_row(const qdot_ops *q, rlx_dtype w, const float *x, qdot_q8_0 *dst, int64_t K) {
  if (!is_k(w)) {
    q->quantize_q8_0(x, dst, K / QK);
    const float off = w == RLX_Q4_0 ? -8.0f : w == RLX_Q5_0 ? -16.0f : w == RLX_Q8_0 ? -128.0f : 1.0f;
    for (int64_t b = 0; off != 1.0f && b < K / QK; b++) dst[b].s *= off; /* exact: a power of 2 */
    return;
  }
  for (int64_t s = 0; s < K / QK_K; s++) {
    qdot_q8_k b;
    q->quantize_q8_k(x + s * QK_K, &b, 1);
    for (int j = 0; j < QK_K / QK; j++) {
      qdot_q8_0 *o = dst + s * (QK_K / QK) + j;
      o->d = b.d;
      o->s = (float)(b.bsums[2 * j] + b.bsums[2 * j + 1]);
      memcpy(o->qs, b.qs + j * QK, QK);
      if (w == RLX_Q6_K) /* level + 128, unsigned (qpack_avx512.c's q6_k_tile) */
        for (int i = 0; i < QK; i++) o->qs[i] = (int8_t)(uint8_t)(o->qs[i] ^ 0x80);
    }
  }
}

size_t qpack_bytes(rlx_dtype w, int64_t N, int64_t K) {
  if (!block_bytes(w) || N < 0 || K <= 0 || K % ir_dtypes[w].block) return 0;
  return (size_t)((N + QPACK_ROWS - 1) / QPACK_ROWS) * group_bytes(w, K);
}

static void put_u16(uint8_t *dst, const uint8_t *src) { memcpy(dst, src, 2); }

/* Row lane l of legacy block b: its quants into q, its scale (and min)
 * into the fields after them. blk: the row's GGUF block. */
static void pack_legacy(rlx_dtype w, const uint8_t *blk, uint8_t *out, int l, int avx2) {
  if (w == RLX_Q8_0) {
    for (int t = 0; t < 8; t++) { /* 4 levels a word: the byte loop ran at 1.2 GB/s */
      uint32_t v;
      memcpy(&v, blk + 2 + 4 * t, 4);
      v ^= 0x80808080u;
      memcpy(out + t * 64 + l * 4, &v, 4);
    }
    put_u16(out + 512 + 2 * l, blk);
    return;
  }
  if (w == RLX_Q5_0 || w == RLX_Q5_1) {
    /* {d, (m,) qh[4], qs[16]}: qs are Q4_0's nibbles, and bit k of qh is
     * bit 4 of level k: put_plane's m (built without the levels: the
     * level loop packed at 0.5 GB/s) */
    const uint8_t *h = blk + (w == RLX_Q5_1 ? 4 : 2), *qs = h + 4;
    const uint32_t qh = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    for (int t = 0; t < 4; t++) memcpy(out + t * 64 + l * 4, qs + 4 * t, 4);
    put_plane(qh, out + 256, l, avx2);
    put_u16(out + 256 + 64 + 2 * l, blk);
    if (w == RLX_Q5_1) put_u16(out + 256 + 64 + 32 + 2 * l, blk + 2);
    return;
  }
  const uint8_t *qs = blk + (w == RLX_Q4_1 ? 4 : 2);
  for (int t = 0; t < 4; t++) memcpy(out + t * 64 + l * 4, qs + 4 * t, 4);
  put_u16(out + 256 + 2 * l, blk);
  if (w == RLX_Q4_1) put_u16(out + 256 + 32 + 2 * l, blk + 2);
}

/* Row lane l of a Q6_K super-block {ql[128], qh[64], scales[16], d}: d
 * and corr in its head, each block's two 16-element scales (int8:
 * sc[j][0][l], sc[j][1][l]) and 6-bit levels with bit 5 inverted (signed:
 * level - 32) in its body (put_q6_levels). corr = 4 x 128 sum over the
 * halves h of sc_h (sum of h's level - 32): what the activations' +128
 * adds to the kernel's sums of 4 (level - 32) (|corr| < 4 x 16 x 128 x
 * 128 x 512 = 2^29). Level order: ggml's dequantize_row_q6_K. */
static void pack_q6_k(const uint8_t *blk, uint8_t *head, uint8_t *body, int l) {
  put_u16(head + 2 * l, blk + 208);
  uint8_t lv[QK_K];
  for (int n = 0; n < 2; n++) { /* 8 levels a word: bytes are independent lanes */
    const uint8_t *ql = blk + 64 * n, *qh = blk + 128 + 32 * n;
    uint8_t *y = lv + 128 * n;
    for (int i = 0; i < 32; i += 8) {
      const uint64_t a = ld64(ql + i), c = ld64(ql + i + 32), h = ld64(qh + i);
      const uint64_t v[4] = {(a & B0F) | (h & B03) << 4, (c & B0F) | (h >> 2 & B03) << 4,
                             (a >> 4 & B0F) | (h >> 4 & B03) << 4, (c >> 4 & B0F) | (h >> 6 & B03) << 4};
      for (int q = 0; q < 4; q++) memcpy(y + i + 32 * q, &v[q], 8);
    }
  }
  int32_t corr = 0;
  for (int h = 0; h < QK_K / 16; h++) {
    /* the 16 levels' sum: byte pairs into 16-bit lanes (at most 4 x 63), then those */
    const uint64_t w0 = ld64(lv + 16 * h), w1 = ld64(lv + 16 * h + 8);
    const uint64_t pairs = (w0 & 0x00FF00FF00FF00FFull) + (w0 >> 8 & 0x00FF00FF00FF00FFull) +
                           (w1 & 0x00FF00FF00FF00FFull) + (w1 >> 8 & 0x00FF00FF00FF00FFull);
    const int32_t sum = (int32_t)((pairs * 0x0001000100010001ull) >> 48) - 16 * 32;
    corr += 4 * 128 * (int8_t)blk[192 + h] * sum;
  }
  memcpy(head + 32 + 4 * l, &corr, 4);
  for (int i = 0; i < QK_K; i += 8) {
    const uint64_t v = ld64(lv + i) ^ 0x2020202020202020ull;
    memcpy(lv + i, &v, 8);
  }
  for (int j = 0; j < 8; j++) {
    put_q6_levels(lv + QK * j, body + QPACK_Q6_SC + (size_t)j * QPACK_Q6_BLOCK, l);
    body[32 * j + l] = blk[192 + 2 * j];
    body[32 * j + 16 + l] = blk[192 + 2 * j + 1];
  }
}

/* Row lane l of a Q4_K {d, dmin, scales[12], qs[128]} or Q5_K {d, dmin,
 * scales[12], qh[32], qs[128]} super-block: the header (d, dmin, the 6-bit
 * scale sc and min mn of each sub-block j: low bits in lo[j], high bits
 * in hi, 4 bits a sub-block), then for each of its 8 sub-blocks the
 * levels (Q5_K: and their bit-4 plane). Sub-block j: the low (j even) or
 * high nibbles of qs[32 (j / 2) ..], Q5_K's bit 4 of element i in bit j
 * of qh[i]. */
static void pack_k4(rlx_dtype w, const uint8_t *blk, uint8_t *out, int l, int avx2) {
  put_u16(out + 2 * l, blk);
  put_u16(out + 32 + 2 * l, blk + 2);
  const uint8_t *scales = blk + 4, *qh = blk + 16, *qs = blk + (w == RLX_Q5_K ? 48 : 16);
  uint32_t hi = 0;
  for (int j = 0; j < 8; j++) {
    uint8_t sc, mn;
    quant_k4_scale_min(scales, j, &sc, &mn);
    out[QPACK_K4_LO + 16 * j + l] = (uint8_t)((sc & 15) | (mn & 15) << 4);
    hi |= (uint32_t)(sc >> 4 | (mn >> 4) << 2) << 4 * j;
  }
  memcpy(out + QPACK_K4_HI + 4 * l, &hi, 4);
  for (int j = 0; j < 8; j++) {
    uint8_t *o = out + header_bytes(w) + (size_t)j * block_bytes(w);
    const uint8_t *src = qs + 32 * (j / 2);
    uint8_t lv[QK];
    for (int i = 0; i < QK; i += 8) { /* 8 levels a word */
      uint64_t v = ld64(src + i) >> 4 * (j % 2) & B0F;
      if (w == RLX_Q5_K) v |= (ld64(qh + i) >> j & B01) << 4;
      memcpy(lv + i, &v, 8);
    }
    put_levels(lv, w == RLX_Q5_K ? 5 : 4, o, l, avx2);
  }
}

typedef struct {
  qpack *p;
  const uint8_t *rows;
  size_t row_bytes;
} pack_job;

/* Unit by unit (a 32-element block, a K-quant's super-block), all 16 row
 * lanes of it: the unit's output is written while it is in L1, and the
 * lanes read 16 streams of the source rows. */
static void pack_groups(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const pack_job *J = arg;
  const qpack *p = J->p;
  const rlx_dtype w = p->dtype;
  const int64_t units = is_k(w) ? p->K / QK_K : p->K / QK;
  const size_t unit_out = is_k(w) ? header_bytes(w) + 8 * block_bytes(w) : block_bytes(w);
  const size_t unit_in = ir_dtypes[w].size;
  const int q6_simd = w == RLX_Q6_K && qpack_pack_avx512_available(), avx2 = avx2_planes(w);
  for (int64_t g = begin; g < end; g++) {
    uint8_t *const gd = p->data + (size_t)g * p->group_bytes;
    uint8_t *dst = gd + (w == RLX_Q6_K ? qpack_q6_heads(p->K) : 0);
    const int rows = p->N - g * QPACK_ROWS < QPACK_ROWS ? (int)(p->N - g * QPACK_ROWS) : QPACK_ROWS;
    const uint8_t *row0 = J->rows + (size_t)(g * QPACK_ROWS) * J->row_bytes;
    for (int64_t u = 0; u < units; u++, dst += unit_out) {
      uint8_t *head = gd + (size_t)u * QPACK_Q6_HEAD; /* Q6_K's */
      if (q6_simd) {
        qpack_pack_q6_k_avx512(row0 + u * unit_in, J->row_bytes, rows, head, dst);
        continue;
      }
      memset(dst, 0, unit_out); /* padding rows: zero scales; bit planes are or-ed */
      if (w == RLX_Q6_K) memset(head, 0, QPACK_Q6_HEAD);
      const uint8_t *src = row0 + u * unit_in;
      for (int l = 0; l < rows; l++, src += J->row_bytes) {
        if (w == RLX_Q4_K || w == RLX_Q5_K) pack_k4(w, src, dst, l, avx2);
        else if (w == RLX_Q6_K) pack_q6_k(src, head, dst, l);
        else pack_legacy(w, src, dst, l, avx2);
      }
    }
  }
}

/* The kernels' prefetch distances (qpack_prefetch.h), in bytes ahead of
 * the weight block in use: a distance in bytes, not blocks, suits every
 * block size (Q4_0's 288 to Q8_0's 544). A decode step streams its
 * weights from DRAM: the L2 request must cover the memory's latency at
 * its full rate on a loaded machine (nearer than 16 KiB left a K-quant
 * decode short of the bandwidth on the Xeon), and the L1 request, once
 * the L2 holds the lines, the L2's (a decode waiting on the L2 streamed
 * less, most for Q4_K and Q6_K, whose decode does the most work a byte).
 * The AVX-512 kernels on AMD's Zen 5 streamed faster at half of both, for
 * every type, and so did Q6_K's AVX-VNNI decode tile there, but not
 * Q4_K's (BENCHMARKS.md). */
static void prefetch_distances(const cpu_features *f, qpack *p) {
  const uint32_t half =
      f->amd && f->avx512_vnni && !(p->dtype == RLX_Q4_K && kernels_for(f, p->dtype, 1) == KERNELS_AVXVNNI);
  p->pf_l2 = 16384u >> half;
  p->pf_l1 = 8192u >> half;
}

qpack *qpack_new(cpu_ctx *ctx, rlx_dtype w, const void *rows, int64_t N, int64_t K) {
  const size_t bytes = qpack_bytes(w, N, K);
  if (!bytes) return NULL;
  qpack *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  *p = (qpack){.dtype = w, .N = N, .K = K, .groups = (N + QPACK_ROWS - 1) / QPACK_ROWS,
               .group_bytes = group_bytes(w, K)};
  prefetch_distances(cpu_get_features(), p);
  p->data = huge_alloc(bytes);
  if (!p->data) {
    free(p);
    return NULL;
  }
  pack_job J = {p, rows, rlx_dtype_nbytes(w, K)};
  cpu_parallel_for(ctx, p->groups, 4, pack_groups, &J);
  return p;
}

void qpack_free(qpack *p) {
  if (!p) return;
  huge_free(p->data, qpack_bytes(p->dtype, p->N, p->K));
  free(p);
}

/* FNV-1a over up to 4 KiB sampled at 16 places of the n bytes at p: a
 * different weight at a reused address is told apart. */
static uint64_t digest(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull ^ n;
  const size_t span = n < 256 ? n : 256;
  for (int s = 0; s < 16; s++) {
    const size_t at = n > span ? (n - span) / 15 * (size_t)s : 0;
    for (size_t i = 0; i < span; i++) h = (h ^ p[at + i]) * 1099511628211ull;
  }
  return h;
}

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static qpack *registry;

qpack *qpack_acquire(cpu_ctx *ctx, rlx_dtype w, const void *rows, int64_t N, int64_t K) {
  if (!qpack_bytes(w, N, K)) return NULL;
  const uint64_t d = digest(rows, rlx_dtype_nbytes(w, K) * (size_t)N);
  pthread_mutex_lock(&registry_lock);
  qpack *p = registry;
  while (p && !(p->src == rows && p->dtype == w && p->N == N && p->K == K && p->digest == d)) p = p->next;
  if (!p && (p = qpack_new(ctx, w, rows, N, K))) {
    p->src = rows;
    p->digest = d;
    p->next = registry;
    registry = p;
  }
  if (p) p->users++;
  pthread_mutex_unlock(&registry_lock);
  return p;
}

void qpack_release(void *arg) {
  qpack *p = arg;
  if (!p) return;
  pthread_mutex_lock(&registry_lock);
  if (--p->users == 0) {
    qpack **at = &registry;
    while (*at != p) at = &(*at)->next;
    *at = p->next;
    qpack_free(p);
  }
  pthread_mutex_unlock(&registry_lock);
}

/* Bytes of packed weights a task streams per pass over its activation
 * tiles: a slice this size stays in L2 while every tile (L1) meets it. */
#define SLICE_BYTES (96 * 1024)
/* Smallest share of weight bytes x rows a parallel chunk gets. */
#define MIN_CHUNK_BYTES (16 * 1024)

typedef struct {
  const qpack *p;
  qpack_kernel_fn kernel;
  int rows; /* the kernel's most activation rows */
  const qdot_q8_0 *act, *tiles;
  int64_t M, nb;
  float *y;
} mm_job;

/* Row tiles [begin, end) of act into the kernel's layout (qpack_kernel_fn). */
static void mm_interleave(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const mm_job *J = arg;
  for (int64_t t = begin; t < end; t++) {
    const int64_t i0 = t * J->rows;
    const int nr = (int)(J->M - i0 < J->rows ? J->M - i0 : J->rows);
    qdot_q8_0 *dst = (qdot_q8_0 *)J->tiles + i0 * J->nb;
    for (int64_t b = 0; b < J->nb; b++)
      for (int r = 0; r < nr; r++) dst[b * nr + r] = J->act[(i0 + r) * J->nb + b];
  }
}

static void mm_groups(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const mm_job *J = arg;
  const qpack *p = J->p;
  int64_t slice = (int64_t)(SLICE_BYTES / p->group_bytes);
  if (slice < 1) slice = 1;
  for (int64_t g0 = begin; g0 < end; g0 += slice) {
    const int64_t g1 = g0 + slice < end ? g0 + slice : end;
    for (int64_t i0 = 0; i0 < J->M; i0 += J->rows) {
      const int nr = (int)(J->M - i0 < J->rows ? J->M - i0 : J->rows);
      for (int64_t g = g0; g < g1; g++) {
        const int64_t left = p->N - g * QPACK_ROWS;
        J->kernel(p, g, J->tiles + i0 * J->nb, nr, J->y + i0 * p->N + g * QPACK_ROWS, p->N,
                  left < QPACK_ROWS ? (int)left : QPACK_ROWS);
      }
    }
  }
}

typedef struct {
  const qpack *p;
  const qdot_q8_0 *act;
  int64_t M;
  float *y;
  uint8_t *wb; /* K / 32 x 512 bytes a thread */
} amx_job;

static void mm_amx(void *arg, int64_t begin, int64_t end, int thread) {
  const amx_job *J = arg;
  qpack_amx_groups(J->p, begin, end, J->act, J->M, J->y, J->wb + (size_t)thread * (size_t)(J->p->K / QK) * 512);
}

/* Rows in tiles of 16 on AMX where it runs (qpack_amx_supported, K a
 * multiple of 64, RLX_NO_AMX off), the rest on the kernel of qpack_kernel. */
int qpack_matmul(cpu_ctx *ctx, const qpack *p, const qdot_q8_0 *act, int64_t M, float *y) {
  pthread_once(&flag_once, read_flag);
  const int amx = amx_on && p->K % 64 == 0 && qpack_amx_supported(p->dtype);
  const int64_t nb = p->K / QK, M16 = amx ? M / 16 * 16 : 0;
  if (M16) {
    amx_job A = {p, act, M16, y, line_alloc((size_t)cpu_ctx_threads(ctx) * (size_t)nb * 512)};
    if (!A.wb) return -1;
    const int64_t grain = 1 + (int64_t)(MIN_CHUNK_BYTES / ((size_t)M16 * p->group_bytes + 1));
    cpu_parallel_for(ctx, p->groups, grain, mm_amx, &A);
    free(A.wb);
    if (M16 == M) return 0;
    act += M16 * nb, y += M16 * p->N, M -= M16;
  }
  mm_job J = {.p = p, .act = act, .tiles = act, .M = M, .nb = p->K / QK, .y = y};
  J.kernel = qpack_kernel(p->dtype, M, &J.rows);
  qdot_q8_0 *tiles = NULL;
  if (M > 1) { /* one row is its own tile */
    tiles = malloc((size_t)(M * J.nb) * sizeof *tiles);
    if (!tiles) return -1;
    J.tiles = tiles;
    cpu_parallel_for(ctx, (M + J.rows - 1) / J.rows, 1, mm_interleave, &J);
  }
  const int64_t grain = 1 + (int64_t)(MIN_CHUNK_BYTES / ((size_t)M * p->group_bytes + 1));
  cpu_parallel_for(ctx, p->groups, grain, mm_groups, &J);
  free(tiles);
  return 0;
}
