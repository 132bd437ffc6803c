/* gemm_prepack.h — the slots that keep a GEMM operand packed between
 * calls (gemm_prepack.c): what gemm.c asks of them. The public half
 * (gemm_prepack_new, _reset, _bytes, _other, ...) is in gemm.h. */
#ifndef RLX_GEMM_PREPACK_H
#define RLX_GEMM_PREPACK_H

#include "gemm_kernels.h"

/* What a slot's panels are packed from: the operand (its data, dtype,
 * layout), which of A (is_a: op(A)'s row panels, N its M) or B it is, and
 * the kernel variant whose panel layout they have. */
typedef struct {
  const gemm_isa *isa;
  const void *data;
  rlx_dtype dtype;
  int trans, is_a;
  int64_t ld, K, N;
} gemm_prepack_key;

/* 1 when packing was already attempted for key: *panels is then what p
 * holds (NULL: it failed or was over budget, pack per call); 0 when p holds
 * nothing for key. */
int gemm_prepack_lookup(gemm_prepack *p, const gemm_prepack_key *key, const float **panels);

/* Drops what p held and reserves `floats` floats of panels for key under
 * RLX_PREPACK_MAX_MB (p then holds them); NULL, with the attempt recorded,
 * where that is over budget or out of memory; NULL, p untouched, where
 * RLX_PREPACK is off. */
float *gemm_prepack_claim(gemm_prepack *p, const gemm_prepack_key *key, size_t floats);

/* Frees the panels of the last claim (they could not be packed); the
 * attempt stays recorded. */
void gemm_prepack_unclaim(gemm_prepack *p);

#endif /* RLX_GEMM_PREPACK_H */
