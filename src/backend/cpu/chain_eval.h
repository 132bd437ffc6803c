/* chain_eval.h — elementwise chains in one pass over memory, in f32.
 *
 * A chain is the step list of an ElementwiseRegion (ir_chain: activations,
 * binaries, compares, casts whose operands are chain inputs or earlier
 * steps); Activation, Binary and Compare run as chains of one step. The
 * output is walked in blocks of up to CHAIN_BLOCK elements along its
 * (collapsed) innermost dim; every live step computes its block into an f32
 * buffer of the thread (an operand that is the same for the whole block —
 * a broadcast input — stays one value), and only the last step is stored:
 * no full-size temporary per step. Blocks are spread over the ctx's threads.
 *
 * Each step is rounded to its own dtype (F16 / BF16 steps are rounded after
 * computing in f32, BOOL steps hold 0 / 1), as the unfused ops would store
 * it. Chains that need more than f32 (F64 or integer steps or inputs) are
 * not supported here: cpu_chain_supported says so and the caller runs its
 * reference loop.
 */
#ifndef RLX_CPU_CHAIN_EVAL_H
#define RLX_CPU_CHAIN_EVAL_H

#include "cpu.h"

#define CHAIN_BLOCK 512

/* A chain bound to its inputs. ins[k] is chain input k; with up2x, input 0
 * is read through the resize_nearest_2x prologue (its dims 2 and 3 are
 * doubled: element (y, x) of a plane is (y/2, x/2) of the input). */
typedef struct {
  const ir_chain *chain;
  int n_ins;
  const cpu_tensor *const *ins;
  int up2x;
} cpu_chain;

/* 1 when every live step and input of c, and out_dtype, is F32, F16, BF16
 * or BOOL (casts between those), so cpu_chain_run can evaluate it. */
int cpu_chain_supported(const cpu_chain *c, rlx_dtype out_dtype);

/* Evaluates c at every element of out (out's dims: the broadcast of the
 * live inputs as the chain sees them, or a broadcast of that; out's dtype:
 * the last step's). RLX_ERR_NOMEM or RLX_OK. Precondition:
 * cpu_chain_supported(c, out->dtype). */
rlx_status cpu_chain_run(cpu_ctx *ctx, const cpu_chain *c, cpu_tensor *out);

#endif /* RLX_CPU_CHAIN_EVAL_H */
