/* elementwise_math.h — the scalar math of the elementwise ops (Activation,
 * Binary, Compare), shared by their CPU kernels (k_elementwise.c) and the
 * fused elementwise kernels, so a fused chain computes exactly what the
 * unfused ops do.
 *
 * Floats are computed in double (callers round to the storage dtype);
 * integers in int64 with wrapping arithmetic (callers wrap to the dtype
 * width with cpu_set_i). Semantics: OPS.md and the comments at the ops'
 * inference in src/ir/infer_elementwise.c.
 */
#ifndef RLX_CPU_ELEMENTWISE_MATH_H
#define RLX_CPU_ELEMENTWISE_MATH_H

#include "rlx.h"

#include <stdint.h>

/* act(x); alpha is leaky_relu's slope. RLX_ACT_NONE is the identity. */
double  cpu_act_apply(rlx_act act, double x, double alpha);
/* The integer activations: neg, abs, sign, square, relu (and none: x).
 * Other acts are not defined on integers (inference rejects them) and
 * return x. */
int64_t cpu_act_apply_i(rlx_act act, int64_t x);

double  cpu_binop_apply_f(rlx_binop op, double a, double b);
/* Wrapping add/sub/mul/pow; floor div and mod (0 for a zero divisor);
 * pow with a negative exponent: 0 unless the base is 1 or -1. On BOOL
 * (0/1) max and min are logical or / and. */
int64_t cpu_binop_apply_i(rlx_binop op, int64_t a, int64_t b);

/* 1 if `a op b` holds, else 0 (IEEE: NaN is unordered). */
int     cpu_cmp_apply(rlx_cmpop op, double a, double b);
/* Exact integer comparison (i64 values above 2^53 do not survive double). */
int     cpu_cmp_apply_i(rlx_cmpop op, int64_t a, int64_t b);

#endif /* RLX_CPU_ELEMENTWISE_MATH_H */
