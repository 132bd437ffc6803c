/* qdot_avx2.c — the AVX2/FMA/F16C table of qdot.h (compiled with those
 * flags; reached only through qdot_best() after the CPU check). The kernels
 * are qdot_avx2_body.h's. */
#include "qdot.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define QDOT_VNNI 0
#define QDOT_TABLE_NAME "avx2"
#include "qdot_avx2_body.h"

const qdot_ops *const qdot_avx2 = &qdot_table;

#else

const qdot_ops *const qdot_avx2 = NULL;

#endif
