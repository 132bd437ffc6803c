/* qdot_avx512.c — the AVX-512 VNNI table of qdot.h: qdot_avx2_body.h's
 * kernels on 256-bit vectors with the u8 x s8 block sums as one vpdpbusd
 * (EVEX, AVX-512 VNNI + VL), the F16/BF16 dots on 512-bit vectors. Compiled with those flags; reached only
 * through qdot_best() after the CPU check (RLX_NO_AVX512=1 turns it off). */
#include "qdot.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX2__) && defined(__FMA__) && \
    defined(__F16C__)
#define QDOT_VNNI 1
#define QDOT_TABLE_NAME "avx512vnni"
#include "qdot_avx2_body.h"

const qdot_ops *const qdot_avx512_vnni = &qdot_table;

#else

const qdot_ops *const qdot_avx512_vnni = NULL;

#endif
