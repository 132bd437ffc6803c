/* cpu_kernels.c — the CPU kernel table, one entry per op of ops.def. */
#include "cpu.h"

const cpu_kernel_fn cpu_kernels[RLX_OP_COUNT] = {
#define RLX_OP(Id, min_in, max_in, n_out, cat, diff, attrs) cpu_##Id,
#include "../../ir/ops.def"
#undef RLX_OP
};
