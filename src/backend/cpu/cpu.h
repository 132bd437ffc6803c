/* cpu.h — the CPU backend's kernel interface and helpers.
 *
 * One kernel per op of ops.def, named cpu_<Id>, implemented in
 * src/backend/cpu/k_*.c. The runtime calls a kernel with concrete shapes:
 * every input and output is a dense row-major cpu_tensor whose buffer is
 * already allocated (outputs are not zeroed). A kernel reads the node's
 * attributes (n->a, already normalized by shape inference: axes are
 * non-negative), computes, and returns RLX_OK, or a status set through
 * rlx_set_error() naming the op and node (e.g. an out-of-range Gather
 * index). It never aborts on data.
 *
 * Kernels here are the reference: clear loops, exact semantics. F16/BF16
 * are computed in F32 or wider; F64 in F64; integer ops in int64.
 */
#ifndef RLX_CPU_H
#define RLX_CPU_H

#include "../../ir/ir.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
  void *data;
  rlx_dtype dtype;
  int rank;
  int64_t d[RLX_MAX_RANK];
  int64_t numel;
  size_t nbytes;
  /* A param or constant input whose data is unchanged since the slot was
   * last reset: where a GEMM may keep it packed between runs (gemm.h,
   * cpu_gemm_prepacked); NULL otherwise. */
  struct gemm_prepack *prepack;
  /* 1: a 2-D MatMul (or FusedMatMulBiasAct) operand B [K, N] whose data
   * are the row-major bytes of its transpose [N, K] (a weight's Transpose
   * that the plan reads through, cpu_backend.c); 0 for every other tensor. */
  int transposed;
} cpu_tensor;

/* Per-plan context: how many threads of the persistent pool a kernel may
 * use (cpu_pool.c). Kernels may be called with ctx NULL: run serially. */
typedef struct cpu_ctx cpu_ctx;
cpu_ctx *cpu_ctx_new(int threads);   /* threads <= 0: RLX_THREADS or all cores */
void     cpu_ctx_free(cpu_ctx *ctx);
int      cpu_ctx_threads(const cpu_ctx *ctx);
/* The communicator of the plan's AllReduce nodes (rlx_options.comm; NULL: none). */
void     cpu_ctx_set_comm(cpu_ctx *ctx, rlx_comm *comm);
rlx_comm *cpu_ctx_comm(const cpu_ctx *ctx);
/* The plan's rlx_options.flags (0 for a context of no plan): the kernels
 * read the math modes they allow (RLX_FLAG_BF16_MATH) here. */
void     cpu_ctx_set_flags(cpu_ctx *ctx, unsigned flags);
unsigned cpu_ctx_flags(const cpu_ctx *ctx);
int      cpu_hardware_threads(void);

/* Runs fn(arg, begin, end, thread) over chunks of [0, n) of at least
 * `grain` items on the pool (thread in [0, cpu_ctx_threads)); returns when
 * all are done. Serial when ctx is NULL, n <= grain, or called from a task. */
typedef void (*cpu_task_fn)(void *arg, int64_t begin, int64_t end, int thread);
void     cpu_parallel_for(cpu_ctx *ctx, int64_t n, int64_t grain, cpu_task_fn fn, void *arg);

typedef rlx_status (*cpu_kernel_fn)(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in,
                                    cpu_tensor *out);

#define RLX_OP(Id, min_in, max_in, n_out, cat, diff, attrs) \
  rlx_status cpu_##Id(cpu_ctx *ctx, const ir_node *n, const cpu_tensor *in, cpu_tensor *out);
#include "../../ir/ops.def"
#undef RLX_OP

extern const cpu_kernel_fn cpu_kernels[RLX_OP_COUNT];

/* Packs w, a DequantMatMul's weight [N, K], into slot now, as that
 * kernel's first run with the slot would (qpack.h): 1 when packed, 0 when
 * this CPU streams w's dtype unpacked or memory is short (the kernel then
 * does what it would have done). */
int cpu_dequant_prepack(cpu_ctx *ctx, struct gemm_prepack *slot, const cpu_tensor *w);

/* ---- element access with conversion (plain dtypes; slow, for reference loops) */

double  cpu_get(const cpu_tensor *t, int64_t i);          /* as double (bool: 0/1) */
/* Store v with conversion to t's dtype: float types round; integer types
 * truncate toward zero and saturate (NaN -> 0); BOOL is v != 0. */
void    cpu_set(cpu_tensor *t, int64_t i, double v);
int64_t cpu_get_i(const cpu_tensor *t, int64_t i);        /* integer/bool exact; floats truncate */
void    cpu_set_i(cpu_tensor *t, int64_t i, int64_t v);   /* wraps to the integer width */

/* Whole-tensor conversion: malloc'ed double array (NULL + RLX_ERR_NOMEM set). */
double    *cpu_load_f64(const cpu_tensor *t);
void       cpu_store_f64(cpu_tensor *t, const double *v);
float     *cpu_load_f32(const cpu_tensor *t);
void       cpu_store_f32(cpu_tensor *t, const float *v);

/* ---- index helpers */

/* Contiguous strides (in elements) of dims. */
void    cpu_strides(int rank, const int64_t *dims, int64_t *strides);
/* Strides of t aligned to an output of rank `rank`/`dims` under NumPy
 * broadcasting: leading missing dims and size-1 dims get stride 0. */
void    cpu_bcast_strides(const cpu_tensor *t, int rank, const int64_t *dims, int64_t *strides);
/* Offset of output flat index `flat` (over dims) in a tensor with `strides`. */
int64_t cpu_offset(int64_t flat, int rank, const int64_t *dims, const int64_t *strides);
void    cpu_unravel(int64_t flat, int rank, const int64_t *dims, int64_t *idx);

/* Outer/inner split around an axis: outer = prod(d[:axis]), len = d[axis],
 * inner = prod(d[axis+1:]). */
void    cpu_axis_split(const cpu_tensor *t, int axis, int64_t *outer, int64_t *len,
                       int64_t *inner);

#endif /* RLX_CPU_H */
