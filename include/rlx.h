/* rlx.h — the one public header of rlx, a small ML compiler and runtime.
 *
 * Build a typed dataflow graph with the builders below, compile it into a
 * session, bind params and inputs, run, read outputs.
 *
 * Errors: every call that can fail returns an rlx_status (or, for builders,
 * a negative node id); rlx_last_error() holds the detail. Builder errors are
 * sticky: the first one is recorded in the graph, every later builder call
 * that receives a negative id returns one too, and rlx_graph_status() /
 * rlx_compile() report the first error. One check at the end of a chain of
 * builder calls is enough.
 *
 * Shapes are row-major, rank 0..RLX_MAX_RANK. Axes may be negative (counted
 * from the end). A dim may be symbolic: rlx_dim_sym(g, "S") returns a token
 * usable wherever a dim is taken; rlx_set_input_shaped() binds it at run time.
 *
 * Threads, object by object (a call not listed with an object reads only
 * its arguments and may run on any thread at any time):
 *   rlx_last_error     per thread: each thread sees its own last failure.
 *   rlx_graph          built by one thread at a time (builders, set_outputs,
 *                      rlx_graph_free); a finished graph that no thread
 *                      changes may be compiled, verified, printed, hashed or
 *                      differentiated by any number of threads at once.
 *   rlx_session        one thread at a time. rlx_run, rlx_set_input(_shaped),
 *                      rlx_set_param(_ref) and rlx_output claim the session
 *                      while they work: a call from another thread meanwhile
 *                      fails with RLX_ERR_INVALID ("in use by another thread")
 *                      and changes nothing. To run in parallel, compile one
 *                      session per thread: rlx_compile is thread-safe, and
 *                      sessions of one graph share its compiled form (the
 *                      compile cache) and the CPU thread pool safely.
 *                      rlx_session_free must not overlap any call on it.
 *   rlx_model_file     open and close by one thread; every other call only
 *                      reads, from any number of threads at once.
 *   rlx_tokenizer      load and free by one thread; tokenize, detokenize and
 *                      the token queries only read: any number of threads.
 *   rlx_llm, rlx_sampler, rlx_grammar
 *                      one thread at a time, not detected: give each thread
 *                      its own (rlx_llm_load of one open file is fine). All
 *                      sequences of one rlx_llm are decoded by its one
 *                      thread; a grammar's queries (rlx_grammar_allows)
 *                      use its scratch space, so they count as calls too.
 *   rlx_model          see its section.
 */
#ifndef RLX_H
#define RLX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_VERSION "0.1.0"
#define RLX_MAX_RANK 8
/* The largest tensor: no static dim, element count or byte size of any
 * tensor (a graph's node, a bound input, a KV cache) may exceed 2^40
 * (1 TiB). Builders, the text parser and the session reject a larger one
 * with RLX_ERR_SHAPE naming the op and the shapes; within it, every size
 * and index the kernels compute fits in 64 bits. */
#define RLX_MAX_TENSOR_BYTES ((int64_t)1 << 40)

/* ---------------------------------------------------------------- status */

typedef enum { RLX_OK = 0, RLX_ERR_INVALID, RLX_ERR_SHAPE, RLX_ERR_DTYPE,
               RLX_ERR_UNSUPPORTED, RLX_ERR_NOMEM, RLX_ERR_IO, RLX_ERR_FORMAT,
               RLX_ERR_DEVICE, RLX_ERR_INTERNAL } rlx_status;

const char *rlx_status_name(rlx_status s);
const char *rlx_last_error(void);      /* thread-local detail of the last failure */
const char *rlx_version(void);
/* The build and the machine, a few lines of text (static storage): the
 * version and git commit, the build type, CUDA and sanitizers, the CPU
 * features the kernels use and the CPU threads a session takes by
 * default. `rlx --version` prints it. */
const char *rlx_system_info(void);
/* The CPU threads a session compiled with rlx_options.threads = requested
 * runs on: requested, or (0) RLX_THREADS or every online core; at most
 * the thread pool's size. */
int rlx_cpu_threads(int requested);

/* ---------------------------------------------------------------- dtypes */

typedef enum { RLX_F32, RLX_F16, RLX_BF16, RLX_F64, RLX_I8, RLX_U8, RLX_I32,
               RLX_I64, RLX_BOOL, /* GGUF block types: */ RLX_Q4_0, RLX_Q4_1,
               RLX_Q5_0, RLX_Q5_1, RLX_Q8_0, RLX_Q2_K, RLX_Q3_K, RLX_Q4_K,
               RLX_Q5_K, RLX_Q6_K, RLX_Q8_K, /* more integers: */ RLX_I16,
               RLX_U16, RLX_U32, RLX_U64, RLX_DTYPE_COUNT } rlx_dtype;

const char *rlx_dtype_name(rlx_dtype t);     /* "f32", "q4_k", ... */
/* Bytes of a tensor of numel elements (block types: numel must be a whole
 * number of blocks; returns 0 otherwise, and when numel or the bytes
 * exceed RLX_MAX_TENSOR_BYTES). */
size_t rlx_dtype_nbytes(rlx_dtype t, int64_t numel);
/* Element count of a static shape; -1 when rank or a dim is negative or
 * the count exceeds RLX_MAX_TENSOR_BYTES (checked, no overflow). */
int64_t rlx_shape_numel(int rank, const int64_t *dims);
int    rlx_dtype_block_size(rlx_dtype t);    /* elements per block; 1 for plain types */
int    rlx_dtype_is_block(rlx_dtype t);      /* a GGUF block type */
/* IEEE half and bfloat16 conversions (round to nearest even). */
uint16_t rlx_f32_to_f16(float f);
float    rlx_f16_to_f32(uint16_t h);
uint16_t rlx_f32_to_bf16(float f);
float    rlx_bf16_to_f32(uint16_t h);
double   rlx_value_as_f64(rlx_dtype t, const void *data, int64_t i);  /* element i of a plain-dtype array (bool: 0 or 1); NaN for block dtypes */

/* ---------------------------------------------------------------- enums for op attributes */

typedef enum { RLX_ACT_NONE = 0, RLX_ACT_GELU, RLX_ACT_GELU_TANH, RLX_ACT_SILU,
               RLX_ACT_RELU, RLX_ACT_LEAKY_RELU, RLX_ACT_SIGMOID, RLX_ACT_TANH,
               RLX_ACT_EXP, RLX_ACT_LOG, RLX_ACT_SQRT, RLX_ACT_RSQRT, RLX_ACT_NEG,
               RLX_ACT_ABS, RLX_ACT_SIN, RLX_ACT_COS, RLX_ACT_ERF, RLX_ACT_SOFTPLUS,
               RLX_ACT_ROUND, RLX_ACT_SIGN, RLX_ACT_RECIPROCAL, RLX_ACT_SQUARE,
               RLX_ACT_COUNT } rlx_act;

typedef enum { RLX_BIN_ADD, RLX_BIN_SUB, RLX_BIN_MUL, RLX_BIN_DIV, RLX_BIN_POW,
               RLX_BIN_MAX, RLX_BIN_MIN, RLX_BIN_MOD, RLX_BIN_COUNT } rlx_binop;

typedef enum { RLX_CMP_EQ, RLX_CMP_NE, RLX_CMP_LT, RLX_CMP_LE, RLX_CMP_GT,
               RLX_CMP_GE, RLX_CMP_COUNT } rlx_cmpop;

typedef enum { RLX_REDUCE_SUM, RLX_REDUCE_MEAN, RLX_REDUCE_MAX, RLX_REDUCE_MIN,
               RLX_REDUCE_PROD, RLX_REDUCE_COUNT } rlx_reduce_op;

typedef enum { RLX_MASK_NONE, RLX_MASK_CAUSAL, RLX_MASK_SLIDING_WINDOW,
               RLX_MASK_CUSTOM, RLX_MASK_COUNT } rlx_mask_kind;

/* Attention layout of rank-4 q/k/v: [B, S, H, D] or [B, H, S, D].
 * Rank-3 q/k/v are always [B, S, H*D]. */
typedef enum { RLX_LAYOUT_BSHD, RLX_LAYOUT_BHSD, RLX_LAYOUT_COUNT } rlx_layout;

typedef enum { RLX_ROPE_NORMAL, RLX_ROPE_NEOX, RLX_ROPE_COUNT } rlx_rope_mode;
typedef enum { RLX_POOL_MAX, RLX_POOL_AVG, RLX_POOL_COUNT } rlx_pool_kind;
typedef enum { RLX_RESIZE_NEAREST, RLX_RESIZE_BILINEAR, RLX_RESIZE_COUNT } rlx_resize_mode;
typedef enum { RLX_PROLOGUE_NONE, RLX_PROLOGUE_RESIZE_NEAREST_2X,
               RLX_PROLOGUE_COUNT } rlx_prologue;

/* ---------------------------------------------------------------- graph */

typedef struct rlx_graph rlx_graph;
typedef int32_t rlx_node;                       /* node id; < 0 means invalid */

rlx_graph *rlx_graph_new(const char *name);
void       rlx_graph_free(rlx_graph *g);

/* A symbolic dim named `name` (the same name gives the same token). */
int64_t    rlx_dim_sym(rlx_graph *g, const char *name);

/* Leaves */
rlx_node rlx_input(rlx_graph *g, const char *name, rlx_dtype t, int rank, const int64_t *dims);
rlx_node rlx_param(rlx_graph *g, const char *name, rlx_dtype t, int rank, const int64_t *dims);
rlx_node rlx_constant(rlx_graph *g, rlx_dtype t, int rank, const int64_t *dims, const void *data);

/* Elementwise */
rlx_node rlx_activation(rlx_graph *g, rlx_act act, rlx_node x);
rlx_node rlx_leaky_relu(rlx_graph *g, rlx_node x, double alpha);
rlx_node rlx_binary(rlx_graph *g, rlx_binop op, rlx_node a, rlx_node b);
rlx_node rlx_add(rlx_graph *g, rlx_node a, rlx_node b);
rlx_node rlx_sub(rlx_graph *g, rlx_node a, rlx_node b);
rlx_node rlx_mul(rlx_graph *g, rlx_node a, rlx_node b);
rlx_node rlx_div(rlx_graph *g, rlx_node a, rlx_node b);
rlx_node rlx_pow(rlx_graph *g, rlx_node a, rlx_node b);
rlx_node rlx_max(rlx_graph *g, rlx_node a, rlx_node b);
rlx_node rlx_min(rlx_graph *g, rlx_node a, rlx_node b);
rlx_node rlx_mod(rlx_graph *g, rlx_node a, rlx_node b);
rlx_node rlx_compare(rlx_graph *g, rlx_cmpop op, rlx_node a, rlx_node b);
rlx_node rlx_where(rlx_graph *g, rlx_node cond, rlx_node a, rlx_node b);
rlx_node rlx_cast(rlx_graph *g, rlx_node x, rlx_dtype to);
rlx_node rlx_clamp(rlx_graph *g, rlx_node x, double lo, double hi);

/* Layout and data movement */
rlx_node rlx_reshape(rlx_graph *g, rlx_node x, int rank, const int64_t *dims);   /* one dim may be -1 */
rlx_node rlx_expand(rlx_graph *g, rlx_node x, int rank, const int64_t *dims);
rlx_node rlx_transpose(rlx_graph *g, rlx_node x, int rank, const int64_t *perm);
rlx_node rlx_narrow(rlx_graph *g, rlx_node x, int axis, int64_t start, int64_t len);
/* starts/ends/steps have rank(x) entries; negative starts/ends count from the end,
 * ends are clamped to the dim; steps > 0. */
rlx_node rlx_slice(rlx_graph *g, rlx_node x, int rank, const int64_t *starts,
                   const int64_t *ends, const int64_t *steps);
rlx_node rlx_concat(rlx_graph *g, int n, const rlx_node *xs, int axis);
rlx_node rlx_pad(rlx_graph *g, rlx_node x, int rank, const int64_t *before,
                 const int64_t *after, double value);
rlx_node rlx_gather(rlx_graph *g, rlx_node table, rlx_node idx, int axis);
rlx_node rlx_scatter_add(rlx_graph *g, rlx_node base, rlx_node idx, rlx_node upd, int axis);
rlx_node rlx_update_slice(rlx_graph *g, rlx_node x, rlx_node upd, rlx_node start, int axis);
rlx_node rlx_iota(rlx_graph *g, rlx_dtype t, int rank, const int64_t *dims, int axis);
rlx_node rlx_one_hot(rlx_graph *g, rlx_node idx, int64_t depth, rlx_dtype t);
rlx_node rlx_tri(rlx_graph *g, rlx_node x, int upper, int64_t k);
rlx_node rlx_stop_gradient(rlx_graph *g, rlx_node x);

/* Reductions and normalizers */
rlx_node rlx_reduce(rlx_graph *g, rlx_reduce_op op, rlx_node x, int naxes,
                    const int64_t *axes, int keep_dim);
rlx_node rlx_argmax(rlx_graph *g, rlx_node x, int axis, int keep_dim);
rlx_node rlx_argmin(rlx_graph *g, rlx_node x, int axis, int keep_dim);
rlx_node rlx_cumsum(rlx_graph *g, rlx_node x, int axis, int exclusive, int reverse);
/* TopK has two outputs: the returned node is the values; *indices (if not
 * NULL) receives the I64 indices node. */
rlx_node rlx_topk(rlx_graph *g, rlx_node x, int64_t k, int axis, rlx_node *indices);
rlx_node rlx_softmax(rlx_graph *g, rlx_node x, int axis);
rlx_node rlx_log_softmax(rlx_graph *g, rlx_node x, int axis);
rlx_node rlx_layer_norm(rlx_graph *g, rlx_node x, rlx_node gamma, rlx_node beta, int axis, double eps);
rlx_node rlx_rms_norm(rlx_graph *g, rlx_node x, rlx_node gamma, rlx_node beta, int axis, double eps);
rlx_node rlx_group_norm(rlx_graph *g, rlx_node x, rlx_node gamma, rlx_node beta, int64_t groups, double eps);
rlx_node rlx_batch_norm(rlx_graph *g, rlx_node x, rlx_node mean, rlx_node var,
                        rlx_node gamma, rlx_node beta, double eps);

/* Linear algebra */
rlx_node rlx_matmul(rlx_graph *g, rlx_node a, rlx_node b);       /* batched, broadcasting */

/* Attention and positions */
typedef struct {
  int num_heads, num_kv_heads, head_dim;
  rlx_mask_kind mask_kind;
  int window;              /* sliding_window only */
  double score_scale;      /* > 0 overrides 1/sqrt(head_dim) */
  double softcap;          /* > 0 enables softcap*tanh(s/softcap) */
  rlx_layout layout;       /* rank-4 q/k/v only */
} rlx_attention_desc;
/* mask: a node for RLX_MASK_CUSTOM, otherwise -1 */
rlx_node rlx_attention(rlx_graph *g, rlx_node q, rlx_node k, rlx_node v, rlx_node mask,
                       const rlx_attention_desc *d);

typedef struct {
  int head_dim, n_rot;
  rlx_rope_mode mode;
  double base, scale;
} rlx_rope_desc;
rlx_node rlx_rope(rlx_graph *g, rlx_node x, rlx_node pos, const rlx_rope_desc *d);
/* Precomputed tables: cos, sin of shape [S, n_rot/2] or [B, S, n_rot/2]. */
rlx_node rlx_rope_cos_sin(rlx_graph *g, rlx_node x, rlx_node cos, rlx_node sin,
                          const rlx_rope_desc *d);

/* Convolution, pooling, resizing */
typedef struct {
  int ndim;                    /* 1 or 2 spatial dims */
  int64_t stride[2], dilation[2], output_pad[2];
  int64_t pad[4];              /* [begin_0, begin_1, end_0, end_1] (1-D: [begin, end]) */
  int64_t groups;
} rlx_conv_desc;
/* bias may be -1 */
rlx_node rlx_conv(rlx_graph *g, rlx_node x, rlx_node w, rlx_node bias, const rlx_conv_desc *d);
rlx_node rlx_conv_transpose(rlx_graph *g, rlx_node x, rlx_node w, rlx_node bias,
                            const rlx_conv_desc *d);
typedef struct {
  rlx_pool_kind kind;
  int ndim;
  int64_t kernel[2], stride[2];
  int64_t pad[4];              /* as rlx_conv_desc.pad */
  int count_include_pad;
} rlx_pool_desc;
rlx_node rlx_pool(rlx_graph *g, rlx_node x, const rlx_pool_desc *d);
rlx_node rlx_resize_nearest2x(rlx_graph *g, rlx_node x);
rlx_node rlx_resize(rlx_graph *g, rlx_node x, rlx_resize_mode mode, int64_t out_h,
                    int64_t out_w, int align_corners);

/* Signal */
rlx_node rlx_fft(rlx_graph *g, rlx_node x, int inverse, int real, int64_t n, int axis);
typedef struct {
  int64_t n_fft, hop, n_mels, sample_rate;
  double f_min, f_max;
} rlx_logmel_desc;
rlx_node rlx_log_mel(rlx_graph *g, rlx_node audio, const rlx_logmel_desc *d);

/* Quantization (scheme: a GGUF block dtype) */
rlx_node rlx_dequant_matmul(rlx_graph *g, rlx_node x, rlx_node w);   /* scheme = dtype of w */
rlx_node rlx_quantize(rlx_graph *g, rlx_node x, rlx_dtype scheme);
rlx_node rlx_dequantize(rlx_graph *g, rlx_node x);                  /* -> F32 */
rlx_node rlx_fake_quantize(rlx_graph *g, rlx_node x, rlx_node scale, rlx_node zero_point,
                           int bits, int symmetric, int axis);

/* Fused ops (the fusion passes make these; they can also be built directly) */
rlx_node rlx_fused_matmul_bias_act(rlx_graph *g, rlx_node a, rlx_node w, rlx_node bias,
                                   rlx_act act, double alpha);
/* clamp(act(conv(x, w) + bias[c] + residual), lo, hi): a Conv with its
 * epilogue; residual may be -1 (none), act RLX_ACT_NONE and lo/hi
 * -INFINITY/INFINITY for no activation or clamp. */
rlx_node rlx_fused_conv(rlx_graph *g, rlx_node x, rlx_node w, rlx_node bias, rlx_node residual,
                        const rlx_conv_desc *d, rlx_act act, double alpha, double lo, double hi);
/* bias may be -1 */
rlx_node rlx_fused_residual_ln(rlx_graph *g, rlx_node x, rlx_node res, rlx_node bias,
                               rlx_node gamma, rlx_node beta, double eps);
rlx_node rlx_fused_residual_rms_norm(rlx_graph *g, rlx_node x, rlx_node res, rlx_node bias,
                                     rlx_node gamma, rlx_node beta, double eps);
/* cast_to: a dtype, or -1 for none */
rlx_node rlx_fused_swiglu(rlx_graph *g, rlx_node x, int cast_to);

/* One step of an elementwise region. Operands: k >= 0 is region input k,
 * k < 0 is the result of step -k-1 (an earlier step). */
typedef enum { RLX_STEP_ACT, RLX_STEP_BIN, RLX_STEP_CAST, RLX_STEP_CMP,
               RLX_STEP_COUNT } rlx_step_kind;
typedef struct {
  rlx_step_kind kind;
  int op;                /* rlx_act / rlx_binop / rlx_cmpop; unused for cast */
  int a, b;              /* b unused for act and cast */
  rlx_dtype to;          /* cast only */
  double alpha;          /* leaky_relu only */
} rlx_region_step;
rlx_node rlx_elementwise_region(rlx_graph *g, int n_in, const rlx_node *ins, int n_steps,
                                const rlx_region_step *steps, rlx_prologue prologue);
rlx_node rlx_batch_elementwise_region(rlx_graph *g, int n_in, const rlx_node *ins,
                                      int num_batch_inputs, int n_steps,
                                      const rlx_region_step *steps, rlx_prologue prologue);
/* transforms: n entries of rlx_prologue (today: RLX_PROLOGUE_RESIZE_NEAREST_2X) */
rlx_node rlx_transform_region(rlx_graph *g, rlx_node x, int n, const int *transforms);
/* cos, sin may be -1 (no rope); rope may be NULL when they are */
rlx_node rlx_fused_attention_block(rlx_graph *g, rlx_node x, rlx_node wq, rlx_node wk,
                                   rlx_node wv, rlx_node wo, rlx_node cos, rlx_node sin,
                                   const rlx_attention_desc *att, const rlx_rope_desc *rope);

/* Losses */
rlx_node rlx_cross_entropy(rlx_graph *g, rlx_node logits, rlx_node target, int axis,
                           int64_t ignore_index, double label_smoothing);
rlx_node rlx_mse_loss(rlx_graph *g, rlx_node a, rlx_node b);

/* Output `index` of a multi-output node (TopK: 0 values, 1 indices). */
rlx_node rlx_get_output(rlx_graph *g, rlx_node x, int index);

/* Graph-level */
rlx_status rlx_graph_set_outputs(rlx_graph *g, int n, const rlx_node *outs);
rlx_status rlx_graph_status(const rlx_graph *g);   /* first builder error, sticky */
rlx_status rlx_graph_verify(const rlx_graph *g);
char      *rlx_graph_to_text(const rlx_graph *g);  /* caller frees with free() */
rlx_status rlx_graph_from_text(const char *text, rlx_graph **out);
uint64_t   rlx_graph_hash(const rlx_graph *g);     /* of the canonical text without the graph name; stable across runs and machines */
int        rlx_graph_num_nodes(const rlx_graph *g);
/* Type of a node: returns its rank (or -1 for a bad id); dims may be NULL.
 * Symbolic dims come back as their tokens (see rlx_dim_name). */
int        rlx_node_type(const rlx_graph *g, rlx_node n, rlx_dtype *dtype, int64_t *dims);
const char *rlx_node_op_name(const rlx_graph *g, rlx_node n);   /* "MatMul"; NULL for a bad id */
const char *rlx_node_name(const rlx_graph *g, rlx_node n);      /* input/param name, else NULL */
/* Name of a symbolic dim token ("?" for a derived one); NULL for a static dim. */
const char *rlx_dim_name(const rlx_graph *g, int64_t dim);
/* The graph's inputs, params (in node order) and outputs. */
int        rlx_graph_num_inputs(const rlx_graph *g);
rlx_node   rlx_graph_input(const rlx_graph *g, int i);
int        rlx_graph_num_params(const rlx_graph *g);
rlx_node   rlx_graph_param(const rlx_graph *g, int i);
int        rlx_graph_num_outputs(const rlx_graph *g);
rlx_node   rlx_graph_output(const rlx_graph *g, int i);

/* ---------------------------------------------------------------- autodiff
 *
 * rlx differentiates its own graphs: the result of rlx_grad / rlx_jvp is an
 * ordinary graph (the forward nodes followed by derivative nodes), compiled,
 * fused and memory-planned like any other. Every op of the op table marked
 * differentiable has a rule; non-differentiable ops (Compare, ArgMax,
 * StopGradient, Quantize, ...) pass no derivative. Gradients of a node used
 * several times add up; gradients of broadcast operands are summed back.
 */

/* Reverse mode. *grad_graph gets every Input and Param of g (bound by the
 * same names) and the nodes the loss depends on, then the gradient nodes.
 * Its outputs: the loss, then d loss / d wrt[k] for k = 0 .. n_wrt-1, each
 * with wrt[k]'s type (zeros where the loss does not depend on it). loss is
 * a float node of one element (rank 0 or all dims 1); wrt[k] are float
 * nodes of g, usually Params or Inputs. A derivative a rule cannot express
 * (e.g. a Concat along a symbolic dim) is RLX_ERR_UNSUPPORTED. */
rlx_status rlx_grad(const rlx_graph *g, rlx_node loss, int n_wrt, const rlx_node *wrt,
                    rlx_graph **grad_graph);

/* Forward mode. primals are float Inputs or Params of g; each gets a
 * tangent Input named "<its name>.tangent" with its type, appended to
 * *jvp_graph after g's nodes. Outputs: g's outputs, then the tangent of each
 * output in order (the directional derivative along the bound tangents;
 * zeros of the output's type where it does not depend on a primal). A
 * Hessian-vector product is rlx_jvp of an rlx_grad graph. */
rlx_status rlx_jvp(const rlx_graph *g, int n_primals, const rlx_node *primals,
                   rlx_graph **jvp_graph);

/* GradientReversal: the identity forward; backward, the gradient times
 * -scale (the gradient reversal layer of domain-adversarial training). In
 * forward mode the tangent passes unchanged. */
rlx_node rlx_gradient_reversal(rlx_graph *g, rlx_node x, double scale);

/* ---------------------------------------------------------------- training
 *
 * A training graph is one optimizer step: a single rlx_run computes the
 * loss and the gradients, the optimizer ops compute the new params and
 * optimizer state, and Assign writes them back into the session's params,
 * which the next run reads.
 */

/* SgdStep: torch.optim.SGD without dampening, on one param:
 *   g = grad + weight_decay * param; velocity' = momentum * velocity + g;
 *   param' = param - lr * (nesterov ? g + momentum * velocity' : velocity')
 * (momentum 0: param - lr * g, velocity passes through). grad and velocity
 * have param's type, lr is a one-element float node. Returns param';
 * *new_velocity (may be NULL) gets velocity'. */
rlx_node rlx_sgd_step(rlx_graph *g, rlx_node param, rlx_node grad, rlx_node velocity, rlx_node lr,
                      double momentum, double weight_decay, int nesterov, rlx_node *new_velocity);
/* AdamWStep: torch.optim.AdamW on one param. moments is [2, param dims]
 * (first and second moment, zeros at first); step is the 1-based count of
 * this step (one element, float or integer). Returns param'; *new_moments
 * (may be NULL) gets moments'. */
rlx_node rlx_adamw_step(rlx_graph *g, rlx_node param, rlx_node grad, rlx_node moments, rlx_node lr,
                        rlx_node step, double beta1, double beta2, double eps, double weight_decay,
                        rlx_node *new_moments);
/* Assign: after each run, the Param param holds value (same type). The
 * Assign must be a graph output; a param is assigned at most once. */
rlx_node rlx_assign(rlx_graph *g, rlx_node param, rlx_node value);
/* AllReduce: the elementwise sum of x over the ranks of the session's
 * communicator (rlx_options.comm; none: x itself), the same bits on every
 * rank. x: f32, f16, bf16, f64, i32 or i64. */
rlx_node rlx_all_reduce(rlx_graph *g, rlx_node x);

typedef enum { RLX_OPTIM_SGD, RLX_OPTIM_ADAMW } rlx_optim_kind;
typedef struct {
  rlx_optim_kind kind;
  double weight_decay;
  double momentum;            /* SGD */
  int nesterov;               /* SGD */
  double beta1, beta2, eps;   /* AdamW (torch's defaults: 0.9, 0.999, 1e-8) */
} rlx_optimizer;

/* The training step of g: rlx_grad of loss w.r.t. params (float Params of
 * g), an optimizer step per param, and Assigns. New leaves:
 *   Input "lr" f32[]: the learning rate, bound before each run;
 *   the optimizer state, Params to set to zeros before the first step:
 *     SGD with momentum > 0: "<param>.velocity" (the param's type);
 *     AdamW: "<param>.moments" ([2, param dims]) and "adamw.step" (i64[],
 *     the number of steps taken).
 * Outputs: the loss, then each param's new value, then the new state. */
rlx_status rlx_train_graph(const rlx_graph *g, rlx_node loss, int n_params, const rlx_node *params,
                           const rlx_optimizer *opt, rlx_graph **train_graph);

/* ---------------------------------------------------------------- model files
 *
 * GGUF (versions 2 and 3, little-endian) and safetensors model files.
 *
 * rlx_model_file_open() memory-maps the file read-only (MAP_PRIVATE) and
 * validates its whole layout before it returns: every count, string length,
 * dim, size and offset is checked against the file size with overflow-safe
 * arithmetic, tensor data must lie inside the file without overlapping, and
 * names and keys must be unique. It reads no tensor data: RSS grows only by
 * the pages you touch. A malformed or hostile file gets RLX_ERR_FORMAT with
 * a message naming the file, the offset and what is wrong, never a crash. A
 * well-formed file rlx does not read gets RLX_ERR_UNSUPPORTED (big-endian
 * GGUF, GGUF v1 or a version above 3, a tensor of rank > RLX_MAX_RANK).
 *
 * Tensor data is used in place: rlx_file_tensor.data points into the
 * mapping (no copy), valid until rlx_model_file_close(). A model builder
 * passes it straight to rlx_set_param_ref(); free the session before
 * closing the file. Data is aligned to rlx_model_file_alignment() (GGUF:
 * general.alignment, default 32; safetensors promises nothing, though its
 * writers keep every tensor aligned to its element size). Kernels read
 * plain dtypes as C arrays: where data is not aligned to its element size
 * (a GGUF file aligned to 1 or 2, a hand-made safetensors file), copy it
 * with rlx_set_param() instead. Block dtypes are read bytewise.
 *
 * The file must not shrink while it is open: a read of a mapped page past
 * its new end is SIGBUS, which kills the process. Replace a model file by
 * writing a new one and renaming it over the old (the open file keeps the
 * old bytes); never truncate it or rewrite it in place. rlx_llm_eval calls
 * rlx_model_file_check before each run, so a shrink between runs is an
 * error; one during a run cannot be caught.
 *
 * Shapes are in rlx order, outermost first. GGUF lists its dims innermost
 * first (ne[0] is the row length), so they are reversed here: a GGUF tensor
 * with ne = [K, N] (N rows of K elements) has dims [N, K], which is exactly
 * the row-major layout of its bytes. Block dtypes (q4_0 ... q8_k) pack along
 * the last dim, which is a whole number of blocks.
 *
 * Tensor types: the GGML types F32 F16 BF16 F64 I8 I32 I64 Q4_0 Q4_1 Q5_0
 * Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K Q8_K and the safetensors dtypes F32 F16
 * BF16 F64 I8 U8 I32 I64 BOOL map to rlx dtypes. Other known types (GGML
 * IQ*, TQ*, Q8_1, I16, MXFP4, ...; safetensors U16, I16, U32, U64, F8_*,
 * C64, F4, F6_*) are listed with supported = 0: their size, offset and data
 * are still located and checked, so a file that has one still opens. A type
 * code or dtype name rlx does not know at all is RLX_ERR_FORMAT, since the
 * size of its data, and so the layout of the file, cannot be checked.
 *
 * Metadata: GGUF's typed key/value pairs; safetensors' "__metadata__" (all
 * strings). Keys, tensor names and top-level string values are
 * NUL-terminated copies owned by the file. Strings inside arrays point into
 * the mapping and are NOT NUL-terminated (e.g. the 49152 entries of
 * tokenizer.ggml.tokens): use their length. A value is read through an
 * rlx_meta_value handle; arrays (nested to any depth up to 8) give their
 * element type and count, and rlx_meta_elem() returns element i in O(1).
 * Lookups of a missing key return RLX_ERR_INVALID; a value of another type,
 * or one that does not fit the requested type, RLX_ERR_DTYPE. Integer
 * getters accept any integer type whose value fits (a u32 key read with
 * rlx_meta_get_i64 works); float getters accept floats and integers; bool
 * and string getters take only their own type.
 *
 * An open file is read-only: any number of threads may read it at once.
 * (As with any mapped file, shrinking it on disk while it is open makes
 * later reads of the lost pages fault.)
 *
 *   rlx_model_file *f;
 *   rlx_meta_value toks, tok;
 *   rlx_file_tensor w;
 *   const char *s;
 *   size_t len;
 *   if (rlx_model_file_open("model.gguf", &f)) die(rlx_last_error());
 *   rlx_meta_lookup(f, "tokenizer.ggml.tokens", &toks);    // string[n_vocab]
 *   for (uint64_t i = 0; i < toks.count; i++) {
 *     rlx_meta_elem(&toks, i, &tok);
 *     rlx_meta_as_string(&tok, &s, &len);                    // len bytes, in place
 *   }
 *   rlx_model_file_find_tensor(f, "blk.0.attn_q.weight", &w); // dims [n_out, n_in]
 *   rlx_node q = rlx_param(g, w.name, w.dtype, w.rank, w.dims);
 *   ... rlx_compile(g, &opt, &sess); rlx_set_param_ref(sess, w.name, w.data, w.nbytes);
 *   ... rlx_session_free(sess); rlx_model_file_close(f);
 */

typedef struct rlx_model_file rlx_model_file;

typedef enum { RLX_FILE_GGUF, RLX_FILE_SAFETENSORS } rlx_file_format;

/* Opens and validates a GGUF or safetensors file (told apart by content,
 * not by name). *out is NULL on failure. */
rlx_status rlx_model_file_open(const char *path, rlx_model_file **out);
/* The same over bytes in memory, which are borrowed (not copied): they must
 * stay valid and unchanged until the file is closed. */
rlx_status rlx_model_file_open_memory(const void *data, size_t size, rlx_model_file **out);
void       rlx_model_file_close(rlx_model_file *f);
/* RLX_ERR_IO, naming the file, if a mapped file is now shorter than when it
 * was opened (its tensor data can no longer be read); RLX_OK otherwise. */
rlx_status rlx_model_file_check(const rlx_model_file *f);

rlx_file_format rlx_model_file_format(const rlx_model_file *f);
const char *rlx_file_format_name(rlx_file_format format);   /* "GGUF", "safetensors" */
uint32_t   rlx_model_file_version(const rlx_model_file *f);     /* GGUF 2 or 3; safetensors 0 */
uint64_t   rlx_model_file_size(const rlx_model_file *f);        /* bytes */
uint64_t   rlx_model_file_data_offset(const rlx_model_file *f); /* where tensor data starts */
uint64_t   rlx_model_file_alignment(const rlx_model_file *f);   /* GGUF: general.alignment or 32; safetensors: 1 */

/* ---- tensors */

typedef struct {
  const char *name;            /* NUL-terminated, owned by the file */
  int supported;               /* 1: dtype is the rlx dtype of the data */
  rlx_dtype dtype;             /* RLX_DTYPE_COUNT when not supported */
  const char *type_name;       /* the file's name of the type: "Q4_K", "IQ2_XXS", "BF16" */
  int type_code;               /* GGUF: the GGML type id; safetensors: -1 */
  int rank;
  int64_t dims[RLX_MAX_RANK];  /* rlx order: outermost first (GGUF's ne reversed) */
  int64_t numel;
  uint64_t offset;             /* of the data, in bytes from the start of the file */
  size_t nbytes;
  const void *data;            /* into the mapping: never copied */
} rlx_file_tensor;

int64_t    rlx_model_file_num_tensors(const rlx_model_file *f);
/* Tensor i in file order (GGUF: tensor-info order; safetensors: header order). */
rlx_status rlx_model_file_tensor(const rlx_model_file *f, int64_t i, rlx_file_tensor *out);
/* By name; RLX_ERR_INVALID if there is none. */
rlx_status rlx_model_file_find_tensor(const rlx_model_file *f, const char *name, rlx_file_tensor *out);

/* ---- metadata */

/* The value types; the numbers are GGUF's own type codes. */
typedef enum { RLX_META_U8, RLX_META_I8, RLX_META_U16, RLX_META_I16, RLX_META_U32,
               RLX_META_I32, RLX_META_F32, RLX_META_BOOL, RLX_META_STRING, RLX_META_ARRAY,
               RLX_META_U64, RLX_META_I64, RLX_META_F64, RLX_META_TYPE_COUNT } rlx_meta_type;
const char *rlx_meta_type_name(rlx_meta_type t);   /* "u8", ..., "string", "array" */

/* A handle to one value: a key's value or an array element. Read the public
 * fields directly; the trailing ones belong to rlx. Valid while the file is
 * open. */
typedef struct {
  rlx_meta_type type;
  rlx_meta_type elem_type;     /* arrays: the type of every element; else RLX_META_TYPE_COUNT */
  uint64_t count;              /* arrays: the number of elements; otherwise 0 */
  const rlx_model_file *file_; /* private */
  const char *key_, *str_;     /* private */
  uint64_t pos_, aux_;         /* private */
} rlx_meta_value;

int64_t     rlx_meta_count(const rlx_model_file *f);
/* Key i (file order) and, if v is not NULL, its value; NULL for a bad i. */
const char *rlx_meta_key(const rlx_model_file *f, int64_t i, rlx_meta_value *v);
/* Index of key, or -1 if the file has no such key. */
int64_t     rlx_meta_find(const rlx_model_file *f, const char *key);
rlx_status  rlx_meta_lookup(const rlx_model_file *f, const char *key, rlx_meta_value *v);
/* Element i of an array value. */
rlx_status  rlx_meta_elem(const rlx_meta_value *array, uint64_t i, rlx_meta_value *elem);

/* Conversions of a value (see the rules above). *s is len bytes, NUL-
 * terminated for top-level strings only; len may be NULL. */
rlx_status rlx_meta_as_string(const rlx_meta_value *v, const char **s, size_t *len);
rlx_status rlx_meta_as_bool(const rlx_meta_value *v, int *out);
rlx_status rlx_meta_as_u32(const rlx_meta_value *v, uint32_t *out);
rlx_status rlx_meta_as_i32(const rlx_meta_value *v, int32_t *out);
rlx_status rlx_meta_as_u64(const rlx_meta_value *v, uint64_t *out);
rlx_status rlx_meta_as_i64(const rlx_meta_value *v, int64_t *out);
rlx_status rlx_meta_as_f32(const rlx_meta_value *v, float *out);
rlx_status rlx_meta_as_f64(const rlx_meta_value *v, double *out);

/* Lookup + conversion in one call, by key:
 *   uint32_t n_layer; st = rlx_meta_get_u32(f, "llama.block_count", &n_layer); */
rlx_status rlx_meta_get_string(const rlx_model_file *f, const char *key, const char **s, size_t *len);
rlx_status rlx_meta_get_bool(const rlx_model_file *f, const char *key, int *out);
rlx_status rlx_meta_get_u32(const rlx_model_file *f, const char *key, uint32_t *out);
rlx_status rlx_meta_get_i32(const rlx_model_file *f, const char *key, int32_t *out);
rlx_status rlx_meta_get_u64(const rlx_model_file *f, const char *key, uint64_t *out);
rlx_status rlx_meta_get_i64(const rlx_model_file *f, const char *key, int64_t *out);
rlx_status rlx_meta_get_f32(const rlx_model_file *f, const char *key, float *out);
rlx_status rlx_meta_get_f64(const rlx_model_file *f, const char *key, double *out);

/* ---------------------------------------------------------------- sessions */

typedef enum { RLX_DEVICE_AUTO, RLX_DEVICE_CPU, RLX_DEVICE_CUDA } rlx_device;
/* RLX_FLAG_NO_FUSE: no fusion passes (also RLX_FUSE=0 in the environment).
 * RLX_FLAG_NO_OPTIMIZE: no optimizing passes at all (folding, dead-code and
 * common-subexpression elimination, simplification, fusion): the graph runs
 * as built, op for op — a reference to compare the optimized graph with.
 * Legalization for the device still runs.
 * RLX_FLAG_BF16_MATH: a reduced-precision math mode, off by default (the
 * CPU's default products are exact: F32 activations times the weights'
 * values, summed in F32; the GPU's products of quantized weights already
 * round their activations, to 8 bits a block at decode and to BF16 at
 * prefill, as llama.cpp's CUDA backend does: RLX_QMATMUL_REF in
 * docs/ENVIRONMENT.md). With it, a product whose weights are BF16 may
 * round its activations to BF16 (nearest even) and multiply pairs on the CPU's BF16
 * dot-product instructions, at up to twice the F32 rate, as llama.cpp's
 * BF16 path does; the result moves by about 2^-9 of the terms' magnitude.
 * On the CPU it takes DequantMatMul of BF16 weights with more rows than
 * the decode's dot kernels serve (prefill) onto vdpbf16ps where the CPU
 * has AVX-512 BF16; the 1-row decode dots and the AMX BF16 tiles stay
 * exact, so prefill and decode differ by that rounding under the flag.
 * Elsewhere (other CPUs, other devices) it changes nothing. */
typedef enum { RLX_FLAG_NO_FUSE = 1, RLX_FLAG_NO_OPTIMIZE = 2, RLX_FLAG_BF16_MATH = 4 } rlx_flags;
/* ---- communicators (src/runtime/comm.c): the ranks an AllReduce sums over.
 * A session gets one through rlx_options.comm (NULL: a world of one, where
 * AllReduce is the identity). Every rank compiles its own graph with its own
 * communicator of the group and runs it; an AllReduce gives every rank the
 * sum over all ranks, the same bits on every rank. A collective waits for
 * every rank of the group: a rank that fails calls rlx_comm_abort, which
 * ends the others' pending and later collectives with RLX_ERR_DEVICE. */
typedef struct rlx_comm rlx_comm;
/* world communicators, comms[r] for rank r, of ranks that are threads of
 * this process, for the CPU backend: the ranks' buffers are read in place
 * and summed in rank order (a check of a split model, not a speed-up). */
rlx_status rlx_comm_new_local(int world, rlx_comm **comms);
/* world communicators over NCCL for ranks that are threads of this process,
 * rank r on CUDA device first_device + r. RLX_ERR_UNSUPPORTED without a
 * CUDA build or without libnccl.so.2 (opened at run time). Both NCCL
 * constructors run one AllReduce before they return, so the ranks are
 * connected (or the error is theirs). */
rlx_status rlx_comm_new_nccl_local(int world, int first_device, rlx_comm **comms);
/* This process as rank `rank` of `world` processes over NCCL, on CUDA
 * device `device`. master "host:port": rank 0 listens there and sends
 * NCCL's unique id to the other ranks over TCP; a rank that does not join
 * within timeout_ms (0: 60000) ends the others with RLX_ERR_DEVICE. */
rlx_status rlx_comm_new_nccl_rank(int rank, int world, const char *master, int device, int timeout_ms,
                                  rlx_comm **out);
int        rlx_comm_rank(const rlx_comm *c);
int        rlx_comm_world(const rlx_comm *c);
void       rlx_comm_abort(rlx_comm *c);
/* Frees one rank's communicator (a local group's memory with its last). */
void       rlx_comm_free(rlx_comm *c);

/* device_index: which GPU of RLX_DEVICE_CUDA ("cuda:N"; 0, the first, by
 * default); a session's params, plans and launches stay on that device.
 * comm: the communicator of the session's AllReduce nodes (NULL: none); it
 * must outlive the session. A CUDA session with an NCCL communicator runs
 * on the communicator's device (whatever device_index or RLX_DEVICE say). */
typedef struct {
  rlx_device device;
  int threads; /* 0 = all cores */
  unsigned flags;
  int device_index;
  rlx_comm *comm;
} rlx_options;
typedef struct rlx_session rlx_session;

/* Runs the pass pipeline (fold constants, dead-code and common-subexpression
 * elimination, simplification, fusion, legalization for the device) on g —
 * or finds its result in the compile cache below — and plans a static g.
 * Environment: RLX_TRACE=1 (what each pass changed, on stderr),
 * RLX_DUMP=<pass>[,<pass>...] or all (the graph after those passes: input
 * fold dce cse simplify fuse legalize), RLX_FUSE=0, RLX_OPTIMIZE=0 (as the
 * flags), RLX_DECOMPOSE_FUSED=1 (every fused op into primitives),
 * RLX_DISPATCH_REPORT=1 (per op kind: native / decomposed / fallback). */
rlx_status rlx_compile(const rlx_graph *g, const rlx_options *opt, rlx_session **out);
/* The device rlx_compile takes for a request: RLX_DEVICE (cpu, cuda or
 * cuda:N) in the environment overrides it, else `requested`
 * (RLX_DEVICE_AUTO runs on the CPU). For callers that build a graph
 * differently per device. */
rlx_device rlx_compile_device(rlx_device requested);
/* A device as the command line and RLX_DEVICE name it: "auto", "cpu",
 * "cuda" or "cuda:N" (N a device index, decimal) into *device and
 * *device_index (0 but for cuda:N). RLX_ERR_INVALID, with a message, for
 * any other text. Whether device N exists is rlx_compile's to check. */
rlx_status rlx_device_parse(const char *text, rlx_device *device, int *device_index);
rlx_status rlx_set_param(rlx_session *s, const char *name, const void *data, size_t nbytes);
/* Like rlx_set_param but borrows data (no copy): it must stay valid and
 * unchanged until the session is freed or the param is set again. For
 * memory-mapped model files. Data of a plain dtype must be aligned to its
 * element size (else RLX_ERR_INVALID: copy it with rlx_set_param). */
rlx_status rlx_set_param_ref(rlx_session *s, const char *name, const void *data, size_t nbytes);
rlx_status rlx_set_input(rlx_session *s, const char *name, const void *data, size_t nbytes);
/* Binds the symbolic dims of input `name` to the concrete dims given. */
rlx_status rlx_set_input_shaped(rlx_session *s, const char *name, const void *data,
                                size_t nbytes, int rank, const int64_t *dims);
rlx_status rlx_run(rlx_session *s);
rlx_status rlx_output(rlx_session *s, int index, void *dst, size_t nbytes);
/* Concrete type of output `index` after the last run (or the static type
 * before any run): returns the rank, or -1 for a bad index. */
int        rlx_output_type(rlx_session *s, int index, rlx_dtype *dtype, int64_t *dims);
int        rlx_session_num_outputs(const rlx_session *s);
void       rlx_session_free(rlx_session *s);

typedef struct {
  int64_t plans_built;     /* plans made (one per distinct shape binding) */
  int64_t plan_cache_hits; /* runs that reused a cached plan */
  int64_t runs;
  size_t  arena_bytes;     /* arena size of the current plan */
  /* Memory plan of the current plan. naive_bytes: what its intermediates
   * would take with a buffer each (no reuse, views or in-place);
   * peak_live_bytes: the largest sum of its buffers live at one node, a
   * lower bound of arena_bytes. views: nodes that name their input's bytes
   * (reshape, contiguous narrow, ...: no buffer, no copy); in_place:
   * elementwise nodes that write into the buffer of an input. */
  size_t  naive_bytes;
  size_t  peak_live_bytes;
  int64_t views;
  int64_t in_place;
  /* Compile cache (below): compile_cache_hit is 1 when rlx_compile found
   * the graph already compiled and ran no passes; plans_reused counts the
   * plans taken over from a freed session instead of being built (they are
   * not in plans_built). */
  int     compile_cache_hit;
  int64_t plans_reused;
  /* Params that Assign updated in the last run and that stay in device
   * memory (a KV cache, trained weights on the GPU) instead of being copied
   * to the session's host copy: that copy is refreshed only when a plan
   * of another shape binding runs next. */
  int64_t params_kept;
  /* Nodes of the current plan the device does not take, run on the CPU
   * between its segments (RLX_TRACE=1 names each and says why); 0 on the
   * CPU. */
  int64_t fallback_nodes;
  /* Kernel launches and library calls (cuBLASLt) a run of the current
   * plan issues on the device, all segments together: what fusion left
   * (a captured CUDA graph replays them); 0 on the CPU. */
  int64_t device_launches;
  /* Plans the session holds (at most 8: past that the least recently run
   * one waits in the compile cache's idle plans, as a freed session's do,
   * and is taken back from there if its shape binding comes again). */
  int64_t plans_held;
  /* Device memory of the params (and the weights folded from them) that
   * the current plan reads from its session's one copy; 0 on the CPU. */
  size_t  param_device_bytes;
  /* Host memory of the packed copies of weights (a product's operand
   * laid out for the CPU's kernels once, not per run) that the current
   * plan holds, shared with the session's other plans. */
  size_t  packed_bytes;
} rlx_session_stats;
rlx_status rlx_session_get_stats(const rlx_session *s, rlx_session_stats *out);

/* The compile cache: process-wide and bounded. rlx_compile of a graph
 * compiled before (equal nodes, attributes, constants, names and outputs;
 * the same device and flags) skips the passes and shares the optimized
 * graph; the plans of a freed session (one per shape binding and thread
 * count) wait there for the next session of that graph, so a second
 * compile costs a lookup. It holds at most 64 graphs with 256 MiB of
 * constants (least recently used go first; a graph with more is not
 * cached) and 256 MiB of idle plans (their arenas and packed weights);
 * a freed session whose params take more than 1 GiB of device memory
 * leaves no idle plans (they would keep its weights on the device). RLX_COMPILE_CACHE=0 turns it off,
 * RLX_COMPILE_CACHE=N holds N graphs; RLX_DUMP bypasses it (the passes
 * must run to be shown). Thread-safe. */
typedef struct {
  int64_t lookups;         /* rlx_compile calls that looked the graph up */
  int64_t hits;            /* ... and found it compiled */
  int64_t plans_reused;    /* plans handed from a freed session to a new one */
  int64_t evictions;       /* graphs dropped to stay within the bound */
  int     entries;         /* graphs held now */
  int     capacity;        /* the most it holds (0: off) */
  size_t  idle_plan_bytes; /* arena and packed-weight bytes of the idle plans held */
  size_t  graph_bytes;     /* constant bytes of the graphs held */
} rlx_compile_cache_stats;
rlx_status rlx_compile_cache_get_stats(rlx_compile_cache_stats *out);
/* Drops every graph and idle plan held (live sessions keep theirs). */
void       rlx_compile_cache_clear(void);

/* ------------------------------------------------- models (src/onnx/) */
/* A model file read as a graph plus its weights, in a format-neutral
 * object: today ONNX (told apart by content, not by name); other formats
 * (GGUF, Hugging Face folders) are meant to load through the same calls.
 *
 *   rlx_model *m;   rlx_session *s;
 *   if (rlx_model_load("resnet50.onnx", NULL, &m)) die(rlx_last_error());
 *   rlx_model_compile(m, NULL, &s);                 // weights already bound
 *   rlx_set_input(s, rlx_model_input_name(m, 0), x, nbytes);
 *   rlx_run(s);  rlx_output(s, 0, y, ybytes);
 *   rlx_session_free(s);  rlx_model_free(m);
 *
 * Loading reads and checks the whole file (every length, count and offset;
 * external data files, which must lie inside the model's folder) but builds
 * no graph: rlx_model_graph() and rlx_model_compile() import it on first
 * use, so a model with ops rlx cannot run still loads and can be described
 * (rlx_model_summary). An op rlx cannot import is RLX_ERR_UNSUPPORTED
 * naming the op type, domain, opset and node. Weights are used in place
 * from the mapped file where aligned (else copied once, owned by the
 * model): the model must outlive its sessions.
 *
 * Symbolic dims (ONNX dim_param) are symbolic dims of the graph; bind them
 * at run time with rlx_set_input_shaped, or at load time with bind_names /
 * bind_values, which also folds the shape computations that depend on them
 * (one graph per binding).
 *
 * Threads: load, free and the first rlx_model_graph/rlx_model_compile
 * must not race with other calls on the same model; after that the
 * queries and rlx_model_compile may be called from any number of threads.
 * Each session is used by one thread at a time, as any session. */
typedef struct rlx_model rlx_model;
typedef enum { RLX_MODEL_ONNX, RLX_MODEL_FORMAT_COUNT } rlx_model_format;
typedef struct {
  int n_bind;                       /* symbolic dims fixed at load (0: none) */
  const char *const *bind_names;    /* n_bind dim names (ONNX dim_param) */
  const int64_t *bind_values;       /* n_bind values > 0 */
} rlx_model_options;

/* opt may be NULL. *out is NULL on failure. */
rlx_status rlx_model_load(const char *path, const rlx_model_options *opt, rlx_model **out);
/* The same over bytes in memory, which are borrowed: they must stay valid
 * and unchanged until the model is freed. External data is refused (there
 * is no folder to read it from). */
rlx_status rlx_model_load_memory(const void *data, size_t size, const rlx_model_options *opt,
                                 rlx_model **out);
void       rlx_model_free(rlx_model *m);
rlx_model_format rlx_model_get_format(const rlx_model *m);
const char *rlx_model_format_name(rlx_model_format f);        /* "ONNX" */
/* The graph (imported on first call; owned by the model). Its Inputs are
 * the model's inputs, its Params the weights, named as in the file. */
rlx_status rlx_model_graph(rlx_model *m, const rlx_graph **out);
/* Compiles the graph and binds every param; opt may be NULL (defaults). */
rlx_status rlx_model_compile(rlx_model *m, const rlx_options *opt, rlx_session **out);
/* Inputs (those without a weight) and outputs, as the file declares them.
 * *_type returns the rank (-1 for a bad index); dtype RLX_DTYPE_COUNT is a
 * type rlx has no dtype for; dims may be NULL; a symbolic dim comes back as
 * its token, named by rlx_model_dim_name ("batch"), an unknown one as -1.
 * ONNX's float8, float4, int4/uint4 and int2/uint2 are RLX_U8: one
 * element a byte, its bit pattern in the low bits (as ml_dtypes holds them). */
int         rlx_model_num_inputs(const rlx_model *m);
int         rlx_model_num_outputs(const rlx_model *m);
const char *rlx_model_input_name(const rlx_model *m, int i);   /* NULL for a bad i */
const char *rlx_model_output_name(const rlx_model *m, int i);
int         rlx_model_input_type(const rlx_model *m, int i, rlx_dtype *dtype, int64_t *dims);
int         rlx_model_output_type(const rlx_model *m, int i, rlx_dtype *dtype, int64_t *dims);
const char *rlx_model_dim_name(const rlx_model *m, int64_t dim);  /* NULL for a static dim */
/* Value inputs: inputs whose contents the graph's shapes depend on (a
 * Reshape's shape, a Slice's starts, axes given as inputs). Such a model has
 * no single graph (rlx_model_graph fails); rlx_model_compile returns a
 * session that builds the graph at rlx_run, with the value inputs as
 * constants, once per distinct set of their contents (kept and reused).
 * 1 when input i is one; known after the first rlx_model_graph/compile. */
int         rlx_model_input_is_value(const rlx_model *m, int i);
/* Text: format, producer, opsets, inputs and outputs with shapes, a
 * histogram of op types, and each op type rlx cannot import (with why).
 * Caller frees with free(); NULL on allocation failure. */
char       *rlx_model_summary(const rlx_model *m);


/* ------------------------------------------------------ LLMs (src/model/) */
/* A tokenizer, a Llama-family decoder with its KV cache, and a sampler, all
 * read from a GGUF model file (which must stay open while they are used).
 *
 *   rlx_model_file *f;   rlx_tokenizer *tok;   rlx_llm *m;   rlx_sampler *smp;
 *   rlx_model_file_open("model.gguf", &f);
 *   rlx_tokenizer_load(f, &tok);
 *   rlx_llm_load(f, NULL, &m);
 *   rlx_tokenize(tok, "Hello", 5, 1, 0, ids, cap, &n);
 *   rlx_llm_eval(m, ids, n, 0, logits);             // prefill; logits of the last token
 *   rlx_sampler_params sp = rlx_sampler_default_params();
 *   rlx_sampler_new(&sp, rlx_llm_vocab_size(m), &smp);
 *   int32_t t = rlx_sampler_sample(smp, logits);     // then rlx_llm_eval(m, &t, 1, 0, logits) ...
 *
 * A Hugging Face folder (config.json, model.safetensors or its sharded
 * index, tokenizer.json, tokenizer_config.json, generation_config.json) of
 * a llama / mistral / qwen2 / qwen3 checkpoint loads with rlx_llm_open,
 * its F32/F16/BF16 weights used in place; rlx_llm_file(m) is then the
 * metadata convert_hf_to_gguf.py would write (tokenizer, chat template,
 * general.sampling.* defaults) for rlx_tokenizer_load and
 * rlx_chat_apply_template:
 *
 *   rlx_llm_open("Qwen3-0.6B", NULL, &m);            // or a .gguf path
 *   rlx_tokenizer_load(rlx_llm_file(m), &tok);
 */

/* ---- tokenizer (src/model/tokenizer*.c) */
typedef struct rlx_tokenizer rlx_tokenizer;
/* From the tokenizer.ggml.* metadata: model "gpt2" (byte-level BPE with
 * merges and the pre-tokenizer named by tokenizer.ggml.pre) or "llama"
 * (SentencePiece: scores, or merges applied by rank where the metadata
 * lists them; byte fallback). RLX_ERR_UNSUPPORTED for others. */
rlx_status rlx_tokenizer_load(const rlx_model_file *f, rlx_tokenizer **out);
void       rlx_tokenizer_free(rlx_tokenizer *t);
int32_t    rlx_tokenizer_vocab_size(const rlx_tokenizer *t);
/* Encodes len bytes of UTF-8. add_special: the BOS/EOS the metadata asks
 * for (tokenizer.ggml.add_bos_token / add_eos_token, the model's default
 * otherwise). parse_special: control tokens written in the text
 * ("<|im_start|>") become their ids; otherwise they are plain text.
 * *n_out is the number of ids; if it exceeds cap, nothing past cap is
 * written and the status is RLX_ERR_INVALID (call again with room). */
rlx_status rlx_tokenize(const rlx_tokenizer *t, const char *text, size_t len,
                        int add_special, int parse_special,
                        int32_t *ids, int64_t cap, int64_t *n_out);
/* The bytes token id stands for (byte-level / byte-fallback decoded; may be
 * part of a UTF-8 sequence). Control tokens give their text only when
 * render_special. *n_out as rlx_tokenize (bytes). */
rlx_status rlx_token_to_piece(const rlx_tokenizer *t, int32_t id, int render_special,
                              char *buf, size_t cap, size_t *n_out);
/* Decodes a whole sequence (SentencePiece drops the leading space of the
 * first piece, as Hugging Face does). NUL-terminated when it fits. */
rlx_status rlx_detokenize(const rlx_tokenizer *t, const int32_t *ids, int64_t n,
                          int render_special, char *buf, size_t cap, size_t *n_out);
int32_t    rlx_token_bos(const rlx_tokenizer *t);   /* -1 if none */
int32_t    rlx_token_eos(const rlx_tokenizer *t);   /* -1 if none */
/* End of generation: EOS, EOT, <|im_end|>, <|eot_id|>, ... */
int        rlx_token_is_eog(const rlx_tokenizer *t, int32_t id);

/* Chat template (tokenizer.chat_template): the known template families
 * (chatml, llama-2, llama-3, zephyr, gemma, phi-3, ...) are recognized from
 * the template text; RLX_ERR_UNSUPPORTED for an unknown one. add_assistant
 * appends the opening of the assistant's turn. Output as rlx_detokenize. */
typedef struct { const char *role; const char *content; } rlx_chat_message;
rlx_status rlx_chat_apply_template(const rlx_model_file *f, const rlx_chat_message *msgs,
                                   int n_msgs, int add_assistant,
                                   char *buf, size_t cap, size_t *n_out);

/* ---- decoder (src/model/llama*.c, kv_cache.c) */
typedef struct rlx_llm rlx_llm;
typedef struct {
  rlx_options compile;    /* device, threads, flags of the sessions */
  int64_t     n_ctx;      /* KV cache length; 0: the model's context_length, at most 4096 */
  /* Loading progress, frac in [0, 1]; NULL for none. */
  void      (*progress)(double frac, void *user);
  void       *progress_user;
  /* KV cache dtype: RLX_F32 (0, the default), RLX_F16 or RLX_BF16 (half the
   * memory; keys and values rounded to it, attention in it), RLX_Q8_0 or
   * RLX_Q4_0 (llama.cpp's -ctk/-ctv q8_0, q4_0: each head's K and V row
   * quantized as it is written, in blocks of 32 with an f16 scale, and
   * decoded to f32 for an f32 attention; head_dim a multiple of 32, else
   * RLX_ERR_UNSUPPORTED). */
  rlx_dtype   cache_type;
  /* Sequences decoded together (rlx_llm_decode); 0: 1. Each may reach
   * n_ctx positions: the KV pool holds n_seq * n_ctx rows (a server's
   * --ctx C --parallel N is n_ctx C / N, n_seq N). */
  int32_t     n_seq;
  /* Tensor parallelism (Megatron's split, docs/ARCHITECTURE.md): the
   * decoder's heads, feed-forward rows and vocabulary split over tp ranks
   * (0 or 1: none; n_head and n_head_kv must divide by it). In one process
   * the ranks are threads: rank r on CUDA device compile.device_index + r,
   * or all on the CPU (a check of the split, not a speed-up). */
  int32_t     tp;
  /* Several processes, one rank each (world > 1, tp 0 or world; CUDA
   * only): this process is rank `rank` of `world`, master "host:port" of
   * rank 0's bootstrap (NULL: the environment's MASTER_ADDR and
   * MASTER_PORT). Every rank gets the whole logits. */
  int32_t     rank, world;
  const char *master;
} rlx_llm_options;
typedef struct {
  char    arch[32];       /* general.architecture: llama, qwen2, qwen3, ... */
  int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
  int64_t n_ctx_train, n_ctx;
  float   rope_base, norm_eps;
  size_t  weight_bytes;   /* bytes of the mapped tensors used */
  size_t  kv_cache_bytes;
  rlx_dtype kv_cache_type;
  /* RoPE as computed: the scaling type ("none", "linear", "yarn"), its
   * frequency scale (1 / rope.scaling.factor), and whether the file has
   * per-rotation frequency factors (rope_freqs.weight: Llama 3.1+). */
  char    rope_scaling[8];
  float   rope_freq_scale;
  int     rope_freq_factors;
  /* Nodes of the decoder's last plan (run) that its device passes to the
   * CPU (rlx_session_stats.fallback_nodes; rlx_llm_get_info only, else 0). */
  int64_t fallback_nodes;
} rlx_llm_info;
/* Builds the decoder graph from the metadata (llama / SmolLM2, qwen2,
 * qwen3), compiles it through the normal pipeline and binds the weights in
 * place (no copy). opt may be NULL. */
rlx_status rlx_llm_load(const rlx_model_file *f, const rlx_llm_options *opt, rlx_llm **out);
/* A GGUF file or a Hugging Face folder by path, kept open by the decoder
 * until rlx_llm_free. */
rlx_status rlx_llm_open(const char *path, const rlx_llm_options *opt, rlx_llm **out);
/* The file the decoder reads its metadata from (a folder's: converted). */
const rlx_model_file *rlx_llm_file(const rlx_llm *m);
void       rlx_llm_free(rlx_llm *m);
rlx_status rlx_llm_get_info(const rlx_llm *m, rlx_llm_info *out);
/* The info rlx_llm_load would give with default options, from the metadata
 * and the tensor table alone (every tensor looked up and checked, nothing
 * compiled or allocated): whether and how rlx can run the file. */
rlx_status rlx_llm_describe(const rlx_model_file *f, rlx_llm_info *out);
int64_t    rlx_llm_vocab_size(const rlx_llm *m);
/* Runs n tokens at positions [n_past, n_past + n), appends their keys and
 * values to the cache and advances n_past. logits: n_vocab floats (the last
 * token), or n * n_vocab when all_logits. RLX_ERR_INVALID past n_ctx. */
rlx_status rlx_llm_eval(rlx_llm *m, const int32_t *tokens, int64_t n, int all_logits, float *logits);
int64_t    rlx_llm_n_past(const rlx_llm *m);
/* Forgets the cache after position n_past (0: start over). */
rlx_status rlx_llm_truncate(rlx_llm *m, int64_t n_past);
/* Plans built so far by all of the decoder's sessions (decode must not
 * re-plan per token). */
int64_t    rlx_llm_plans_built(const rlx_llm *m);

/* ---- several sequences in one decoder (src/model/llm_batch.c, kv_pool.c)
 * The KV pool is one set of cells shared by n_seq sequences (llama.cpp's
 * unified cache): each cell holds the K/V rows of one position and the set
 * of sequences that see it. A batch lists (token, sequence, want logits)
 * entries; each entry goes at its sequence's next position (entries of one
 * sequence in batch order), so one call can carry a prefill chunk of one
 * sequence and the decode tokens of others, and runs as one graph (one
 * read of the weights for all of them; a batch past 512 entries, or wider
 * than the largest run of free cells, runs in pieces). A query sees only
 * the cells of its own sequence at positions up to its own (the mask), so
 * a sequence's logits do not depend on what runs beside it. On the CPU
 * with quantized weights they are the bits of the sequence run alone,
 * however its prompt is cut into batches: a sequence's cells stay in the
 * order of its positions, the attention sums over its keys in that order
 * whatever cells lie between, and a quantized product rounds each
 * activation row on its own. Products of float weights meet a GEMM whose
 * blocking depends on the row count: equal up to float rounding there.
 * test_llm_batch checks the logits of sequences decoded together against
 * each alone: the same bits (Q8_0 weights), within 1e-4 of the largest
 * logit (float weights), and equal greedy tokens.
 *
 *   rlx_llm_options o = {.n_ctx = 2048, .n_seq = 4};
 *   int32_t tok[3] = {a0, b7, c9}, seq[3] = {0, 1, 2};
 *   rlx_llm_batch b = {3, tok, seq, NULL};          // all three logits
 *   rlx_llm_decode(m, &b, logits);                   // 3 * n_vocab floats
 *
 * Stop strings are matched by the caller (rlx serve matches them on the
 * detokenized text, across token boundaries), not here.
 * rlx_llm_eval, _n_past and _truncate work on sequence 0. */
typedef struct {
  int64_t        n;       /* entries */
  const int32_t *token;   /* [n] token ids */
  const int32_t *seq;     /* [n] sequence of each, in [0, n_seq); NULL: all 0 */
  /* [n] nonzero: this entry's logits are returned; NULL: every entry's */
  const int8_t  *logits;
} rlx_llm_batch;
/* Runs the batch: logits gets n_vocab floats per entry that asked, in
 * batch order. RLX_ERR_INVALID (nothing run) for a bad token or sequence,
 * or a sequence that would pass n_ctx (shift or truncate it first). */
rlx_status rlx_llm_decode(rlx_llm *m, const rlx_llm_batch *b, float *logits);
int32_t    rlx_llm_n_seq(const rlx_llm *m);
/* Per-row context of a sequence (rlx_llm_options.n_ctx). */
int64_t    rlx_llm_n_ctx(const rlx_llm *m);
/* Positions a sequence holds (its next position); 0 for a bad seq. */
int64_t    rlx_llm_seq_n_past(const rlx_llm *m, int32_t seq);
/* The tokens of those positions (n_past of them, valid until the next call
 * that changes the sequence); NULL for a bad seq. A prompt cache compares a
 * new prompt with them and keeps the common prefix (rlx_llm_seq_truncate or
 * rlx_llm_seq_copy). */
const int32_t *rlx_llm_seq_tokens(const rlx_llm *m, int32_t seq);
/* Forgets seq's positions from n_past on (0: the sequence is empty). */
rlx_status rlx_llm_seq_truncate(rlx_llm *m, int32_t seq, int64_t n_past);
/* dst (emptied first) shares src's first n positions: no rows are copied
 * or recomputed, both see the same cells until each writes its own. */
rlx_status rlx_llm_seq_copy(rlx_llm *m, int32_t src, int32_t dst, int64_t n);
/* Context shift (llama.cpp's rule, for a sequence at n_ctx): positions
 * [n_keep, n_keep + n_discard) are dropped and those after move down by
 * n_discard, their keys rotated to the new positions (re-roped; rows
 * shared with another sequence are copied first, so it keeps its own).
 * llama.cpp discards n_discard = (n_past - n_keep) / 2. It costs a copy of
 * the cache through the host, as state files do. On an error the sequence
 * keeps its first n_keep positions. */
rlx_status rlx_llm_seq_shift(rlx_llm *m, int32_t seq, int64_t n_keep, int64_t n_discard);
/* A sequence's state (its tokens and their K/V rows) to a file and back
 * (into seq, emptied first). A file of another model or cache type, one
 * longer than the context, or a damaged one (a checksum covers it) is
 * RLX_ERR_FORMAT and changes nothing. */
rlx_status rlx_llm_seq_save(rlx_llm *m, int32_t seq, const char *path);
rlx_status rlx_llm_seq_load(rlx_llm *m, int32_t seq, const char *path);

/* ---- sampler (src/model/sampler.c) */
typedef struct { int32_t token; float bias; } rlx_logit_bias;
typedef struct {
  float    temperature;     /* <= 0: greedy (argmax) */
  int32_t  top_k;           /* 0: off */
  float    top_p;           /* 1: off */
  float    min_p;           /* 0: off; keeps p >= min_p * p_max */
  float    repeat_penalty;  /* 1: off; llama.cpp's rule on the last repeat_last_n tokens */
  int32_t  repeat_last_n;
  uint64_t seed;            /* same seed, same logits: same tokens */
  /* OpenAI's penalties on the tokens among the last repeat_last_n accepted
   * ones (as llama.cpp): logit -= count * frequency_penalty +
   * (count > 0) * presence_penalty. 0: off. */
  float    frequency_penalty;
  float    presence_penalty;
  /* OpenAI's logit_bias: added to the logits before anything else
   * (-INFINITY bans a token). Copied by rlx_sampler_new. */
  int32_t  n_logit_bias;
  const rlx_logit_bias *logit_bias;
} rlx_sampler_params;
typedef struct rlx_sampler rlx_sampler;
rlx_sampler_params rlx_sampler_default_params(void);  /* temp 0.8, top_k 40, top_p 0.95, min_p 0.05, penalty 1, last 64, seed 0 */
rlx_status rlx_sampler_new(const rlx_sampler_params *p, int64_t n_vocab, rlx_sampler **out);
void       rlx_sampler_free(rlx_sampler *s);
/* Picks the next token from n_vocab logits (penalties from the tokens
 * accepted so far) and accepts it. */
int32_t    rlx_sampler_sample(rlx_sampler *s, const float *logits);
/* Records a token (e.g. the prompt's) for the repetition penalty. */
void       rlx_sampler_accept(rlx_sampler *s, int32_t token);

/* ---- constrained decoding (src/model/grammar*.c, json_schema.c)
 * A GBNF grammar (llama.cpp's format: rules `name ::= alternatives`,
 * "literals", [character classes] with ranges and ^, ( groups ), the
 * repetitions * + ? {m} {m,} {m,n}, # comments) matched over the bytes of
 * the vocabulary's token pieces. Set on a sampler, it removes every token
 * whose piece the grammar cannot continue with (end-of-generation tokens
 * only where the grammar may end), so what is sampled always follows it.
 * A grammar holds the parse state of one generation: one per request.
 * As llama.cpp, the sampler first draws from the unconstrained chain and
 * keeps the token when the grammar allows it, and masks the whole
 * vocabulary only otherwise (greedy picks the same token either way). */
typedef struct rlx_grammar rlx_grammar;
/* Parses gbnf (root: the start rule, NULL for "root") for tok's vocabulary
 * (borrowed: it must outlive the grammar; NULL: the grammar is only
 * parsed and checked). A syntax error, an undefined or twice-defined rule,
 * left recursion or no root rule is RLX_ERR_FORMAT naming it (and the
 * line and column of a syntax error). */
rlx_status rlx_grammar_new(const char *gbnf, const char *root, const rlx_tokenizer *tok, rlx_grammar **out);
void       rlx_grammar_free(rlx_grammar *g);
/* Whether the grammar, in its present state, takes token next. */
int        rlx_grammar_allows(const rlx_grammar *g, int32_t token);
/* Advances the state over token's piece; RLX_ERR_INVALID if it does not fit. */
rlx_status rlx_grammar_accept(rlx_grammar *g, int32_t token);
/* 1 when the text so far is a whole sentence of the grammar. */
int        rlx_grammar_complete(const rlx_grammar *g);
/* Constrains s's draws (NULL: no grammar); the sampler borrows g and
 * advances it with every token it samples (not with rlx_sampler_accept's:
 * a prompt is not grammar text). Sampling fails (-1) where the grammar
 * allows no token. */
rlx_status rlx_sampler_set_grammar(rlx_sampler *s, rlx_grammar *g);
/* A JSON schema (OpenAI's response_format json_schema: type, properties,
 * required, items, enum, const, anyOf/oneOf, $ref to $defs, min/maxItems,
 * string formats as plain strings) as GBNF text of a JSON value that
 * validates against it; NULL or "{}" gives any JSON object
 * (response_format json_object). *gbnf is freed with free(). A keyword
 * that would need more than GBNF can say is RLX_ERR_UNSUPPORTED naming it. */
rlx_status rlx_json_schema_to_gbnf(const char *schema, char **gbnf);

/* ------------------------------------------ text embeddings (src/model/bert.c) */
/* A BERT-family sentence encoder (BERT, RoBERTa: MiniLM, BGE, E5, GTE) from
 * a Hugging Face model folder: config.json, model.safetensors (or a sharded
 * model.safetensors.index.json; F32/F16/BF16 used in place), tokenizer.json
 * (or vocab.txt) and sentence-transformers' modules.json and
 * 1_Pooling/config.json for the pooling and normalization; or a GGUF file
 * as llama.cpp writes one (architectures bert and nomic-bert, float or
 * quantized, its pooling_type, L2-normalized). A batch of texts
 * runs as one graph, sorted by length and padded with a mask: a text's
 * embedding does not depend on its batch (to float rounding).
 *
 *   rlx_embedder *e;
 *   rlx_embedder_load("all-MiniLM-L6-v2", NULL, &e);
 *   float *out = malloc(n * rlx_embedder_dim(e) * sizeof *out);
 *   rlx_embed(e, texts, n, out);                      // n rows of dim floats
 *   rlx_embedder_free(e);
 */
typedef struct rlx_embedder rlx_embedder;
typedef enum { RLX_POOLING_MODEL = 0, RLX_POOLING_MEAN, RLX_POOLING_CLS, RLX_POOLING_LAST,
               RLX_POOLING_MAX, RLX_POOLING_COUNT } rlx_pooling;
typedef struct {
  rlx_options compile;    /* device, threads, flags of the session */
  rlx_pooling pooling;    /* RLX_POOLING_MODEL (0): as the folder says, else mean */
  int normalize;          /* 0: as the folder says; 1: L2-normalize; -1: do not */
  int64_t max_tokens;     /* truncation (special tokens included); 0: the model's */
  int batch;              /* texts per graph run; 0: 32 */
} rlx_embedder_options;
/* opt may be NULL. RLX_ERR_UNSUPPORTED for an architecture or tokenizer
 * rlx does not read; a config.json or tensor that is wrong or missing is
 * RLX_ERR_FORMAT / RLX_ERR_INVALID naming it. */
rlx_status rlx_embedder_load(const char *path, const rlx_embedder_options *opt, rlx_embedder **out);
void       rlx_embedder_free(rlx_embedder *e);
int64_t    rlx_embedder_dim(const rlx_embedder *e);
/* n NUL-terminated UTF-8 texts (invalid bytes read as U+FFFD; an empty text
 * is [CLS] [SEP]) into out: n rows of rlx_embedder_dim floats. */
rlx_status rlx_embed(rlx_embedder *e, const char *const *texts, int64_t n, float *out);
/* Cross-encoder scores (a sequence-classification head): one float per
 * (query, docs[i]) pair, the first logit, into scores. */
rlx_status rlx_rerank(rlx_embedder *e, const char *query, const char *const *docs, int64_t n, float *scores);
/* The token ids rlx_embed runs for a text (special tokens, truncation);
 * *n_out as rlx_tokenize. */
rlx_status rlx_embedder_tokenize(const rlx_embedder *e, const char *text, int32_t *ids, int64_t cap,
                                 int64_t *n_out);

#ifdef __cplusplus
}
#endif
#endif /* RLX_H */
