/* gemm_tile.c — one tile of C of the SGEMM: the packed path's blocked
 * loops over the micro-kernels of gemm_<variant>.c, the matrix-vector
 * product, and the unpacked loop that needs no memory.
 *
 * Packed path (the usual one), per tile C[m0:m1, n0:n1], BLIS-style:
 *   B block (kc x nc) packed into column micro-panels of nr_max,
 *   A block (mc x kc) packed into row micro-panels of up to mr_max,
 *   micro-kernel per (row panel, column panel) pair on C[mr, nr].
 * Loop order by the tile's rows: when m x kc fits the A budget (M up to
 * ~100-200, prefill shapes), each K block packs A once and walks N in B
 * blocks small enough to stay in L2 after packing; otherwise N blocks of
 * nc, K blocks, then M blocks of mc, each B block (in L3) serving every M
 * block. kc is large (passes over C are the cost that grows with K / kc);
 * both micro-panels then stream from L2, with software prefetch ahead.
 * Block sizes are split evenly (K = 300 is two blocks of 150, not 256 + 44)
 * and so are the row panels of an A block (15 rows with mr_max 14 are 8 + 7,
 * not 14 + 1: a 1-row micro-kernel is latency-bound), so no panel runs
 * starved. The epilogue runs in the micro-kernel of the last K block.
 *
 * Rows or columns of one (M = 1, N = 1: decode-time matrix-vector products)
 * skip packing: they stream the matrix once through a GEMV kernel.
 */
#include "gemm_tile.h"

/* ---------------------------------------------------------------- epilogue rows */

/* The row part of ep on rows [i0, i0+m) of n columns, c and res (the
 * residual, or NULL) at the columns' first element of row 0. */
static void rows_post_at(const gemm_isa *isa, const gemm_epilogue *ep, float *c, int64_t ldc, const float *res,
                         int64_t i0, int64_t m, int64_t n) {
  for (int64_t i = i0; i < i0 + m; i++)
    isa->row_post(c + i * ldc, n, ep->row_bias ? ep->row_bias[i] : 0.0f, res ? res + i * ep->ldr : NULL, ep->act,
                  ep->alpha, ep->clamp, ep->lo, ep->hi);
}

void gemm_rows_post(const gemm_isa *isa, const gemm_epilogue *ep, float *C, int64_t ldc, int64_t i0, int64_t m,
                    int64_t j0, int64_t n) {
  rows_post_at(isa, ep, C + j0, ldc, ep->residual ? ep->residual + j0 : NULL, i0, m, n);
}

/* ---------------------------------------------------------------- one tile */

/* The unpacked loop: correct without any buffer (when memory is short). */
static void tile_unpacked(const gemm_problem *pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const gemm_epilogue *ep = pr->ep;
  for (int64_t i = m0; i < m1; i++) {
    float *c = pr->C + i * pr->ldc;
    for (int64_t j = n0; j < n1; j++) {
      float s = pr->c_in ? c[j] : 0.0f;
      for (int64_t k = 0; k < pr->K; k++)
        s += gemm_load(pr->A.data, pr->A.dt, i * pr->A.rs + k * pr->A.ks) *
             gemm_load(pr->B.data, pr->B.dt, j * pr->B.rs + k * pr->B.ks);
      c[j] = s;
    }
    gemm_isa_scalar.epilogue(c + n0, n1 - n0, ep->bias ? ep->bias + n0 : NULL, 1, inner_act(ep), ep->alpha);
    if (has_rows(ep)) gemm_rows_post(&gemm_isa_scalar, ep, pr->C, pr->ldc, i, 1, n0, n1 - n0);
  }
}

/* C[ic : ic+mc, jc : jc+nc] (+)= packed A block (`panels` row panels, the
 * even split of mc) x packed B block (read in place: Bp is B's row pc at
 * column 0). The micro-tiles go down each column panel (the B panel stays
 * in L1 for all rows), or, where B is read in place, along each row
 * panel: C (and the residual) then run as mr sequential streams, not one
 * short piece of every row of C a column panel, which left a 1x1
 * convolution's stores and residual loads waiting on L3 (K = 64: each C
 * line is 64 FMAs' work). */
static void macro_kernel(const gemm_problem *pr, const float *Ap, int64_t ic, int64_t mc,
                         int64_t panels, const float *Bp, int64_t jc, int64_t nc, int64_t kc,
                         int flags, int64_t next_nc) {
  const gemm_isa *isa = pr->isa;
  const gemm_epilogue *ep = pr->ep;
  const int rows_outer = pr->b_ld != 0;
  const int64_t NR = isa->nr_max, jpanels = ceil_div(nc, NR);
  /* B prepacked in a slot (not packed by the tiles of this call): a
   * weight, read from L3 or memory */
  const int far = pr->b_packed && !(pr->shared && !pr->shared->job.is_a) ? GEMM_B_FAR : 0;
  const int in_micro = isa->micro_rows && has_rows(ep);
  for (int64_t t = 0; t < panels * jpanels; t++) {
    const int64_t p = rows_outer ? t / jpanels : t % panels, jr = (rows_outer ? t % jpanels : t / panels) * NR;
    int nr = (int)(nc - jr < NR ? nc - jr : NR);
    /* the panel's first column: in the bias, in C, the residual and B */
    int64_t col = jc + jr, cc = col, rc = col, bc = col, bn = jc + nc + jr;
    if (pr->groups) {
      const gemm_col_groups *g = pr->groups;
      const int64_t mat = col / pr->group_pad, q = col % pr->group_pad;
      if (g->width - q < nr) nr = (int)(g->width - q);
      col = q;
      cc = mat * g->c_stride + q;
      rc = mat * g->r_stride + q;
      bc = mat * g->b_stride + q;
      bn = bn / pr->group_pad * g->b_stride + bn % pr->group_pad;
    }
    gemm_tile_epilogue tep = {.bias = ep->bias ? ep->bias + col : NULL, .act = inner_act(ep), .alpha = ep->alpha};
    if (in_micro) {
      tep.act = ep->act;
      tep.ldr = ep->ldr;
      tep.clamp = ep->clamp;
      tep.lo = ep->lo;
      tep.hi = ep->hi;
    }
    tep.b_ld = pr->b_ld;
    /* B read in place comes from L3 or memory in the first row panel's
     * pass and from L2 in the next: that one asks for the next block's
     * tile too, so that its fetch overlaps FMAs instead of stalling the
     * next block's first pass */
    int next_flag = 0;
    if (rows_outer && p == 1 && next_nc > jr && nr == NR) {
      tep.b_next = bn - bc;
      next_flag = GEMM_B_NEXT;
    }
    const float *bp = pr->b_ld ? Bp + bc : Bp + jr * kc;
    /* No prefetch of the next B micro-panel here: the micro-kernel's own
     * prefetches run into it (the panels are consecutive), and a burst of
     * a whole panel's prefetches before a call stalled the core on the
     * fill buffers instead of overlapping the FMAs (MiniLM's products at
     * 24 rows against weights packed in L3: 3.9 -> 3.2 ms). */
    int64_t r0 = split_at(mc, panels, p), mr = split_at(mc, panels, p + 1) - r0;
    if (in_micro) {
      tep.row_bias = ep->row_bias ? ep->row_bias + ic + r0 : NULL;
      tep.residual = ep->residual ? ep->residual + (ic + r0) * ep->ldr + rc : NULL;
    }
    isa->micro((int)mr, nr, kc, Ap + r0 * kc, bp, pr->C + (ic + r0) * pr->ldc + cc, pr->ldc, flags | far | next_flag, &tep);
    if ((flags & GEMM_LAST) && has_rows(ep) && !in_micro)
      rows_post_at(isa, ep, pr->C + cc, pr->ldc, ep->residual ? ep->residual + rc : NULL, ic + r0, mr, nr);
  }
}

/* Bp <- B's block [pc, pc + kc) x [jc, jc + nc) from its source or its
 * operand, as column panels: with groups, a matrix's columns at a time
 * (each padded to whole panels, as the product's columns are). tmp:
 * max(kc, nc) floats. */
static void pack_b_cols(const gemm_problem *pr, int64_t pc, int64_t kc, int64_t jc, int64_t nc, float *Bp,
                        float *tmp) {
  const gemm_col_groups *g = pr->groups;
  for (int64_t q = jc; q < jc + nc;) {
    int64_t mat = 0, p = q, len = nc, valid = nc;
    if (g) {
      mat = q / pr->group_pad;
      p = q % pr->group_pad;
      len = jc + nc - q < pr->group_pad - p ? jc + nc - q : pr->group_pad - p;
      valid = len < g->width - p ? len : g->width - p;
    }
    float *dst = Bp + (q - jc) * kc;
    if (pr->b_src) {
      pr->b_src->pack(pr->b_src->ctx, pc, kc, g ? mat * g->width + p : p, valid, dst, pr->isa->nr_max);
    } else {
      mat_view B = pr->B;
      if (g) B.data = (const char *)B.data + mat * g->b_stride * (int64_t)gemm_elem_size(B.dt);
      gemm_pack_b_block(pr->isa, &B, pc, kc, p, valid, dst, tmp);
    }
    q += len;
  }
}

/* The micro-kernel flags of K block kb of kblocks: every block after the
 * first adds to C, and so does the first where C holds the residual. */
static int kblock_flags(const gemm_problem *pr, int64_t kb, int64_t kblocks) {
  return (kb > 0 || pr->c_in ? GEMM_ACCUMULATE : 0) | (kb == kblocks - 1 ? GEMM_LAST : 0);
}

void gemm_tile_packed(const gemm_problem *pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const gemm_isa *isa = pr->isa;
  const int64_t NR = isa->nr_max, MR = isa->mr_max, K = pr->K;
  const int64_t m = m1 - m0, n = n1 - n0;
  const int64_t kblocks = ceil_div(K, isa->kc), KC = k_block(isa, K);
  shared_pack *sp = pr->shared;
  /* Few rows (m x kc fits the A budget; M up to ~100-200): one A block,
   * packed once per K block and reused over all of N, with B blocks sized to
   * stay in L2 between packing and use. More rows: M blocks of mc; B blocks
   * as large as nc allows, each reused by every M block. A prepacked B
   * (no packing to amortize) takes one A block up to twice the budget:
   * each B panel is then read once, with no A repacked per B block (ViT's
   * 197 token rows against its 768 x 3072 weights). */
  const int reuse_a = reuses_a(isa, m, K) || (pr->b_packed && !sp && m * KC <= 2 * isa->a_block_floats);
  const int64_t mblocks = reuse_a ? 1 : ceil_div(m, isa->mc), MC = ceil_div(m, mblocks);
  int64_t nc_max = reuse_a || pr->a_packed ? isa->b_block_floats / KC / NR * NR : isa->nc;
  if (nc_max < NR) nc_max = NR;
  /* a B packed whole needs no L2-sized blocks over N */
  if (reuse_a && pr->b_packed) nc_max = ceil_div(n, NR) * NR;
  /* but a prepacked B that several A blocks read in turn does: in blocks
   * of twice the L2 budget each is read from memory once, not once per A
   * block (ViT's 197 token rows are two A blocks against 768 x 3072) */
  const int64_t nc_l2 = 2 * isa->b_block_floats / KC / NR * NR;
  if (!reuse_a && pr->b_packed && !sp && mblocks > 1 && nc_l2 < nc_max) nc_max = nc_l2 > NR ? nc_l2 : NR;
  /* B packed by the tiles as they go: blocks of whole chunks */
  const int64_t b_chunk = sp && pr->b_packed ? sp->job.chunk_panels * NR : 0;
  if (b_chunk) nc_max = ceil_div(nc_max, b_chunk) * b_chunk;
  const int64_t nblocks = ceil_div(n, nc_max);
  const int64_t NC = b_chunk ? nc_max : ceil_div(ceil_div(n, nblocks), NR) * NR;
  int64_t tmp_floats = pr->b_packed || KC > NC ? KC : NC;
  if (sp && pack_tmp_floats(&sp->job) > tmp_floats) tmp_floats = pack_tmp_floats(&sp->job);
  float *Ap = pr->a_packed ? NULL : gemm_thread_buf(GEMM_BUF_A, (size_t)(MC * KC));
  float *Bp = pr->b_packed || pr->b_ld ? NULL : gemm_thread_buf(GEMM_BUF_B, (size_t)(KC * NC));
  float *tmp = gemm_thread_buf(GEMM_BUF_X, (size_t)tmp_floats);
  if (!(Ap || pr->a_packed) || !(Bp || pr->b_packed || pr->b_ld) || !tmp) {
    if (pr->b_src || pr->groups) atomic_store(pr->failed, 1); /* no B matrix to read unpacked */
    else tile_unpacked(pr, m0, m1, n0, n1);
    return;
  }
  const int64_t n_pad = ceil_div(pr->N, NR) * NR;
  if (pr->a_packed) {
    /* tiles of columns, A shared (all M rows, one block per K block): its
     * chunks for this K block made ready, the free ones packed here in
     * rotation from this tile's first one, then each B block multiplied with
     * all rows (whole columns of micro-panels per B micro-panel), in runs
     * of row panels of at most the A budget, each of which stays in L2
     * while it meets the whole B block (a prepacked A of many rows: a
     * convolution's weight) */
    const int64_t panels = ceil_div(pr->M, MR);
    int64_t run = isa->a_block_floats / (KC * MR);
    if (run < 1) run = 1;
    for (int64_t kb = 0; kb < kblocks; kb++) {
      int64_t pc = split_at(K, kblocks, kb), kc = split_at(K, kblocks, kb + 1) - pc;
      int flags = kblock_flags(pr, kb, kblocks);
      for (int64_t q = 0; sp && q < sp->job.chunks; q++)
        gemm_unit_ready(sp, kb, (pr->first_part + q) % sp->job.chunks, tmp);
      for (int64_t jc = n0; jc < n1; jc += NC) {
        int64_t nc = n1 - jc < NC ? n1 - jc : NC;
        const float *b = pr->b_packed ? pr->b_packed + pc * n_pad + jc * kc
                         : pr->b_ld   ? (const float *)pr->B.data + pc * pr->b_ld
                                      : Bp;
        if (!pr->b_packed && !pr->b_ld) pack_b_cols(pr, pc, kc, jc, nc, Bp, tmp);
        /* consecutive panels of the even split are the even split of
         * their own rows (pack_job) */
        for (int64_t p0 = pr->a_p0; p0 < pr->a_p1; p0 += run) {
          int64_t p1 = p0 + run < pr->a_p1 ? p0 + run : pr->a_p1;
          int64_t r0 = split_at(pr->M, panels, p0), r1 = split_at(pr->M, panels, p1);
          /* the first run of row panels reads a B in place from L3 or
           * memory, and asks for the next block's */
          const int64_t next_nc = p0 == pr->a_p0 && pr->b_ld ? (n1 - jc - nc < NC ? n1 - jc - nc : NC) : 0;
          macro_kernel(pr, pr->a_packed + pc * pr->M + r0 * kc, r0, r1 - r0, p1 - p0, b, jc, nc, kc, flags,
                       next_nc);
        }
      }
    }
    return;
  }
  if (pr->b_packed) {
    /* B packed whole: for each block of columns and K block, each A block
     * packed once and multiplied with all of the block's B; B's chunks (when
     * the tiles pack them) in rotation from this tile's first one */
    const int64_t first_block = b_chunk ? pr->first_part * b_chunk / NC % nblocks : 0;
    for (int64_t bi = 0; bi < nblocks; bi++) {
      int64_t jc = n0 + (first_block + bi) % nblocks * NC, nc = n1 - jc < NC ? n1 - jc : NC;
      int64_t parts = b_chunk ? ceil_div(nc, b_chunk) : 1, width = b_chunk ? b_chunk : nc;
      for (int64_t kb = 0; kb < kblocks; kb++) {
        int64_t pc = split_at(K, kblocks, kb), kc = split_at(K, kblocks, kb + 1) - pc;
        int flags = kblock_flags(pr, kb, kblocks);
        for (int64_t mb = 0; mb < mblocks; mb++) {
          int64_t ic = m0 + split_at(m, mblocks, mb), mc = m0 + split_at(m, mblocks, mb + 1) - ic;
          gemm_pack_a_block(isa, &pr->A, ic, mc, pc, kc, ceil_div(mc, MR), Ap, tmp);
          for (int64_t q = 0; q < parts; q++) {
            int64_t j0 = jc + (pr->first_part + q) % parts * width;
            int64_t j1 = j0 + width < jc + nc ? j0 + width : jc + nc;
            if (sp) gemm_unit_ready(sp, kb, j0 / b_chunk, tmp);
            macro_kernel(pr, Ap, ic, mc, ceil_div(mc, MR), pr->b_packed + pc * n_pad + j0 * kc, j0,
                         j1 - j0, kc, flags, 0);
          }
        }
      }
    }
    return;
  }
  /* each tile packs its own blocks */
  for (int64_t kb = 0; reuse_a && kb < kblocks; kb++) {
    int64_t pc = split_at(K, kblocks, kb), kc = split_at(K, kblocks, kb + 1) - pc;
    int flags = kblock_flags(pr, kb, kblocks);
    gemm_pack_a_block(isa, &pr->A, m0, m, pc, kc, ceil_div(m, MR), Ap, tmp);
    for (int64_t jc = n0; jc < n1; jc += NC) {
      int64_t nc = n1 - jc < NC ? n1 - jc : NC;
      gemm_pack_b_block(isa, &pr->B, pc, kc, jc, nc, Bp, tmp);
      macro_kernel(pr, Ap, m0, m, ceil_div(m, MR), Bp, jc, nc, kc, flags, 0);
    }
  }
  for (int64_t jc = n0; !reuse_a && jc < n1; jc += NC) {
    int64_t nc = n1 - jc < NC ? n1 - jc : NC;
    for (int64_t kb = 0; kb < kblocks; kb++) {
      int64_t pc = split_at(K, kblocks, kb), kc = split_at(K, kblocks, kb + 1) - pc;
      int flags = kblock_flags(pr, kb, kblocks);
      gemm_pack_b_block(isa, &pr->B, pc, kc, jc, nc, Bp, tmp);
      for (int64_t mb = 0; mb < mblocks; mb++) {
        int64_t ic = m0 + split_at(m, mblocks, mb), mc = m0 + split_at(m, mblocks, mb + 1) - ic;
        gemm_pack_a_block(isa, &pr->A, ic, mc, pc, kc, ceil_div(mc, MR), Ap, tmp);
        macro_kernel(pr, Ap, ic, mc, ceil_div(mc, MR), Bp, jc, nc, kc, flags, 0);
      }
    }
  }
}

/* ---------------------------------------------------------------- matrix-vector */

void gemm_tile_gemv(const gemm_problem *pr, int64_t o0, int64_t o1) {
  const gemm_isa *isa = pr->isa;
  const gemm_epilogue *ep = pr->ep;
  const int64_t K = pr->K, n = o1 - o0;
  const int row = pr->M == 1;
  /* the vector and the matrix: for a row of C, x = A's row and R = B */
  const mat_view *xv = row ? &pr->A : &pr->B, *Rv = row ? &pr->B : &pr->A;
  const float *x = view_at(xv, 0, 0);
  if (xv->dt != RLX_F32 || xv->ks != 1) {
    float *xb = gemm_thread_buf(GEMM_BUF_X, (size_t)K);
    if (!xb) goto unpacked;
    gemm_load_run(isa, x, xv->dt, xv->ks, xb, K);
    x = xb;
  }
  float *y = row ? pr->C + o0 : NULL;
  if (!row) {
    if (pr->ldc == 1) {
      y = pr->C + o0;
    } else if (!(y = gemm_thread_buf(GEMM_BUF_Y, (size_t)n))) {
      goto unpacked;
    }
  }
  const void *R = view_at(Rv, o0, 0);
  /* R (r, k) at r*rs + k*ks: k-strided rows are dot products */
  if (Rv->rs == 1) isa->gemv_rows(K, n, x, R, Rv->dt, Rv->ks, y);
  else isa->gemv_dots(K, n, x, R, Rv->dt, Rv->rs, y);
  if (row) {
    isa->epilogue(y, n, ep->bias ? ep->bias + o0 : NULL, 1, inner_act(ep), ep->alpha);
    if (has_rows(ep)) gemm_rows_post(isa, ep, pr->C, pr->ldc, 0, 1, o0, n);
  } else {
    isa->epilogue(y, n, ep->bias, 0, inner_act(ep), ep->alpha);
    if (y != pr->C + o0)
      for (int64_t i = 0; i < n; i++) pr->C[(o0 + i) * pr->ldc] = y[i];
    if (has_rows(ep)) gemm_rows_post(isa, ep, pr->C, pr->ldc, o0, n, 0, 1);
  }
  return;
unpacked:
  if (row) tile_unpacked(pr, 0, 1, o0, o1);
  else tile_unpacked(pr, o0, o1, 0, 1);
}
