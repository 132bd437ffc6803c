/* ir.h — the internal IR: dtypes, shapes, the op table, nodes, graphs.
 *
 * The IR layer includes nothing of the rest of rlx. Every other layer reads
 * graphs through this header.
 */
#ifndef RLX_IR_H
#define RLX_IR_H

#include "rlx.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------- op table */

typedef enum {
#define RLX_OP(Id, min_in, max_in, n_out, cat, diff, attrs) RLX_OP_##Id,
#include "ops.def"
#undef RLX_OP
  RLX_OP_COUNT
} ir_op;

typedef enum { RLX_CAT_LEAF, RLX_CAT_ELEMENTWISE, RLX_CAT_LAYOUT, RLX_CAT_REDUCE,
               RLX_CAT_NORM, RLX_CAT_LINALG, RLX_CAT_ATTENTION, RLX_CAT_CONV,
               RLX_CAT_SIGNAL, RLX_CAT_QUANT, RLX_CAT_FUSED, RLX_CAT_LOSS,
               RLX_CAT_META, RLX_CAT_COLLECTIVE } ir_category;

typedef struct {
  const char *name;
  int min_inputs, max_inputs;   /* max -1: variadic */
  int n_outputs;
  ir_category category;
  int differentiable;
  const char *attrs;            /* space-separated attrs.def fields */
} ir_op_info;

extern const ir_op_info ir_ops[RLX_OP_COUNT];
int ir_op_from_name(const char *name, size_t len);   /* -1 if unknown */

/* ---------------------------------------------------------------- dims and shapes */

/* A dim is an int64: >= 0 is static; a symbolic dim is a token
 * IR_SYM_BASE - id (id indexes g->syms). -1 appears only in attrs
 * (Reshape's "infer this dim"). */
#define IR_SYM_BASE (-((int64_t)1 << 40))
static inline int     ir_dim_is_sym(int64_t d) { return d <= IR_SYM_BASE; }
/* Saturates for a malformed token far below IR_SYM_BASE (then >= n_syms: unknown). */
static inline int     ir_dim_sym_id(int64_t d) {
  int64_t id = IR_SYM_BASE - d;
  return id > INT32_MAX ? INT32_MAX : (int)id;
}
static inline int64_t ir_sym_dim(int id) { return IR_SYM_BASE - id; }

typedef struct { int rank; int64_t d[RLX_MAX_RANK]; } ir_shape;
typedef struct { rlx_dtype dtype; ir_shape shape; } ir_type;

/* ---------------------------------------------------------------- attributes */

typedef struct { int n; int64_t v[RLX_MAX_RANK]; } ir_ilist;
typedef struct { uint8_t *p; size_t n; } ir_bytes;
typedef struct { int n; rlx_region_step *s; } ir_chain;

typedef enum { IR_A_STR, IR_A_BYTES, IR_A_INT, IR_A_BOOL, IR_A_F64, IR_A_ENUM,
               IR_A_DTYPE, IR_A_DTYPE_OR_NONE, IR_A_ILIST, IR_A_DIMS, IR_A_CHAIN,
               IR_A_ENUMLIST } ir_attr_kind;

#define IR_ATTR_CTYPE_STR char *
#define IR_ATTR_CTYPE_BYTES ir_bytes
#define IR_ATTR_CTYPE_INT int64_t
#define IR_ATTR_CTYPE_BOOL int64_t
#define IR_ATTR_CTYPE_F64 double
#define IR_ATTR_CTYPE_ENUM int64_t
#define IR_ATTR_CTYPE_DTYPE int64_t
#define IR_ATTR_CTYPE_DTYPE_OR_NONE int64_t
#define IR_ATTR_CTYPE_ILIST ir_ilist
#define IR_ATTR_CTYPE_DIMS ir_ilist
#define IR_ATTR_CTYPE_CHAIN ir_chain
#define IR_ATTR_CTYPE_ENUMLIST ir_ilist

/* All attributes a node may carry; each op uses the fields ops.def names.
 * Heap-owned members (name, data, chain) belong to the node. */
typedef struct {
#define RLX_ATTR(field, key, kind, enames, def) IR_ATTR_CTYPE_##kind field;
#include "attrs.def"
#undef RLX_ATTR
} ir_attrs;

typedef enum {
#define RLX_ATTR(field, key, kind, enames, def) IR_ATTR_##field,
#include "attrs.def"
#undef RLX_ATTR
  IR_ATTR_COUNT
} ir_attr_id;

typedef struct {
  const char *field, *key;
  ir_attr_kind kind;
  const char *const *enum_names;   /* NULL-terminated, for ENUM / ENUMLIST */
  double def;
  size_t offset;                   /* offsetof(ir_attrs, field) */
} ir_attr_info;

extern const ir_attr_info ir_attr_table[IR_ATTR_COUNT];
extern const char *const ir_act_names[], *const ir_binop_names[], *const ir_cmpop_names[],
                  *const ir_reduce_names[], *const ir_mask_names[], *const ir_layout_names[],
                  *const ir_rope_mode_names[], *const ir_pool_names[], *const ir_resize_names[],
                  *const ir_prologue_names[];

/* Attribute ids an op uses, in text order; returns the count. */
int  ir_op_attr_ids(int op, ir_attr_id ids[IR_ATTR_COUNT]);
void ir_attrs_init_defaults(ir_attrs *a);          /* every field to its default */
int  ir_attrs_copy(ir_attrs *dst, const ir_attrs *src);  /* deep; 0 on NOMEM */
void ir_attrs_free(ir_attrs *a);
int  ir_enum_from_name(const char *const *names, const char *s, size_t len); /* -1 unknown */

/* ---------------------------------------------------------------- nodes and graphs */

#define IR_MAX_OUTPUTS 2

typedef struct {
  int op;                      /* ir_op */
  int id;                      /* index in g->nodes */
  int n_in;
  rlx_node *in;                /* heap, n_in entries, all < this node's id */
  int n_out;
  ir_type out[IR_MAX_OUTPUTS]; /* out[0] is "the" type of the node */
  ir_attrs a;
} ir_node;

typedef struct {
  char *name;                  /* NULL for an anonymous dim (a derived size) */
} ir_sym;

/* Named nodes of one graph by name (open addressing; the names stay in
 * the nodes): linear-time uniqueness checks of input and param names. */
typedef struct {
  int *slots;                  /* node id + 1; 0: empty */
  int cap, count;              /* cap: 0 or a power of two */
} ir_name_set;

int  ir_name_set_find(const ir_name_set *s, const rlx_graph *g, const char *name); /* node id or -1 */
int  ir_name_set_add(ir_name_set *s, const rlx_graph *g, rlx_node id);             /* 0, or -1: NOMEM */
void ir_name_set_free(ir_name_set *s);

struct rlx_graph {
  char *name;
  ir_node *nodes;
  int n_nodes, cap_nodes;
  rlx_node *outputs;
  int n_outputs;
  ir_sym *syms;
  int n_syms, cap_syms;
  /* Binding used while specializing (NULL: all symbolic): value per sym id
   * < n_sym_binding, -1 unbound. */
  const int64_t *sym_binding;
  int n_sym_binding;
  rlx_status err;              /* first builder error (sticky) */
  char errmsg[512];
  /* The named inputs and params among nodes [0, n_leaves_indexed), grown
   * as names are checked (graph.c): nodes are only ever appended. */
  ir_name_set leaf_names;
  int n_leaves_indexed;
};

/* Graph construction used by every builder: checks the inputs (sticky
 * errors, ids in range), fills a node, runs the op's shape inference, and
 * appends it. Takes ownership of the heap members of *attrs (freed on
 * failure too). Returns the new id or -1. */
rlx_node ir_add_node(rlx_graph *g, int op, int n_in, const rlx_node *in, ir_attrs *attrs);
/* The same for a leaf (Input, Param, Constant) whose type is declared. */
rlx_node ir_add_leaf(rlx_graph *g, int op, ir_attrs *attrs, const ir_type *t);

/* Record a builder error on g (first one wins) and in rlx_last_error().
 * The message is prefixed "OpName (node %d): ". Returns -1. */
int ir_fail(rlx_graph *g, const ir_node *n, rlx_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Type of input i of node n (reads g->nodes; valid during inference). */
static inline const ir_type *ir_in(const rlx_graph *g, const ir_node *n, int i) {
  return &g->nodes[n->in[i]].out[0];
}

/* ---------------------------------------------------------------- shape inference helpers */

/* Shape inference of one op: reads n->in / n->a, fills n->out[] and
 * n->n_out, or calls ir_fail() and returns -1. Also validates attributes
 * (ranges, axes) and normalizes them (negative axes). One per op, named
 * ir_infer_<Id>, implemented in src/ir/infer_*.c. */
#define RLX_OP(Id, min_in, max_in, n_out, cat, diff, attrs) \
  int ir_infer_##Id(rlx_graph *g, ir_node *n);
#include "ops.def"
#undef RLX_OP

/* Checked size arithmetic: the one set through which every dim, element
 * count and byte size is computed (shape inference, binding, planning, the
 * KV cache). A result (or an operand) outside (-RLX_MAX_TENSOR_BYTES,
 * RLX_MAX_TENSOR_BYTES] saturates to IR_SIZE_OVER, which every check of a
 * type rejects, so an overflow cannot wrap into a small size. */
#define IR_SIZE_OVER INT64_MAX
int64_t ir_size_add(int64_t a, int64_t b);
int64_t ir_size_mul(int64_t a, int64_t b);   /* operands >= 0 */
static inline int ir_size_ok(int64_t n) { return n >= 0 && n <= RLX_MAX_TENSOR_BYTES; }
/* Bytes of a static type; -1 if a dim is symbolic, IR_SIZE_OVER past the
 * limit or for a block type whose element count is not whole blocks. */
int64_t ir_type_nbytes(const ir_type *t);
/* 0 if every static dim, the element count and the bytes of t are within
 * RLX_MAX_TENSOR_BYTES; else -1 and a description ("dim 0 is 4611686018427387904",
 * "2^41 bytes") in why. */
int ir_type_check_size(const ir_type *t, char *why, size_t cap);

/* Resolve a dim through the graph's current binding (symbolic dims that
 * are bound become static). */
int64_t ir_dim_resolve(const rlx_graph *g, int64_t d);
/* A new anonymous symbolic dim (for a size derived from symbolic dims). */
int64_t ir_dim_anon(rlx_graph *g);
/* Dim arithmetic: static when both are static (and bound), else anonymous;
 * x*1 = x, x+0 = x. */
int64_t ir_dim_mul(rlx_graph *g, int64_t a, int64_t b);
int64_t ir_dim_add(rlx_graph *g, int64_t a, int64_t b);
/* Normalize axis (negative counts from the end) into [0, rank); -1 if out of range. */
int     ir_norm_axis(int64_t axis, int rank);
/* NumPy broadcasting of two shapes into *out. Returns 0 if incompatible.
 * A symbolic dim broadcasts with 1 and with the same symbol; a symbolic dim
 * against a static dim > 1 takes the static one (checked again at run time
 * when the graph is specialized). */
int     ir_broadcast(rlx_graph *g, const ir_shape *a, const ir_shape *b, ir_shape *out);
/* Element count; -1 if any dim is symbolic, IR_SIZE_OVER past the limit. */
int64_t ir_numel(const ir_shape *s);
int     ir_shape_eq(const ir_shape *a, const ir_shape *b);
int     ir_type_eq(const ir_type *a, const ir_type *b);
/* "[2,S,?]" into buf (returns buf); uses g for symbol names (g may be NULL). */
char   *ir_shape_str(const rlx_graph *g, const ir_shape *s, char *buf, size_t cap);
#define IR_SHAPE_STR_CAP 160
/* A node's type as the graph text prints it (text_print.c), "f32[2,S]" or
 * "(f32[2,1], i64[2,1])": a malloc'd string, NULL when out of memory. */
char   *ir_node_type_text(const rlx_graph *g, const ir_node *n);
/* ir_shape_str into a temporary that lives to the end of the enclosing
 * full expression: for messages, IR_SHAPE_S(g, &t->shape). */
#define IR_SHAPE_S(g, s) ir_shape_str((g), (s), (char[IR_SHAPE_STR_CAP]){0}, IR_SHAPE_STR_CAP)
/* Input 0 is a float type and inputs 1..count-1 have its dtype (else a
 * RLX_ERR_DTYPE naming both); returns 0 or -1. */
int     ir_require_float_inputs(rlx_graph *g, ir_node *n, int count);
/* Dims that must agree: equal, or either symbolic (checked again once the
 * graph is specialized to concrete sizes). Shapes: the same rank and every
 * dim so. */
int     ir_dims_compatible(int64_t a, int64_t b);
int     ir_shapes_compatible(const ir_shape *a, const ir_shape *b);

/* ---------------------------------------------------------------- dtypes */

typedef struct {
  const char *name;
  int size;          /* bytes per element (plain) or per block (block types) */
  int block;         /* elements per block; 1 for plain types */
  int is_float, is_int, is_block;
} ir_dtype_info;
extern const ir_dtype_info ir_dtypes[RLX_DTYPE_COUNT];
static inline int ir_dtype_valid(int64_t t) { return t >= 0 && t < RLX_DTYPE_COUNT; }
static inline int ir_is_float(int64_t t) { return ir_dtype_valid(t) && ir_dtypes[t].is_float; }
static inline int ir_is_int(int64_t t) { return ir_dtype_valid(t) && ir_dtypes[t].is_int; }
static inline int ir_is_block(int64_t t) { return ir_dtype_valid(t) && ir_dtypes[t].is_block; }
int ir_dtype_from_name(const char *s, size_t len);   /* -1 unknown */

/* Half-precision conversions (round to nearest even). */
float    ir_f16_to_f32(uint16_t h);
uint16_t ir_f32_to_f16(float f);
float    ir_bf16_to_f32(uint16_t h);
uint16_t ir_f32_to_bf16(float f);

/* ---------------------------------------------------------------- errors */

/* Set the thread-local last error; returns st. */
rlx_status rlx_set_error(rlx_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
rlx_status rlx_set_errorv(rlx_status st, const char *fmt, va_list ap);

/* ---------------------------------------------------------------- environment */

/* An on/off switch: fallback when unset or empty; off for an integer 0,
 * "off", "false" or "no" (any case); on for anything else. */
int ir_env_flag(const char *name, int fallback);
/* An integer switch: fallback when unset, empty or not a whole number. */
int64_t ir_env_int(const char *name, int64_t fallback);

/* The host memory one allocation may take (memory_budget.c): RLX_MEMORY_LIMIT_MB
 * if set, else the smaller of physical memory and the cgroup's limit;
 * *source names which. ir_memory_check: RLX_OK if bytes fit, else
 * RLX_ERR_NOMEM with a message naming what, the bytes and the budget. */
uint64_t   ir_memory_budget(const char **source);
rlx_status ir_memory_check(uint64_t bytes, const char *what);

/* ---------------------------------------------------------------- graph utilities */

/* Deep copy (for specialization, passes). NULL on NOMEM. */
rlx_graph *ir_graph_clone(const rlx_graph *g);
/* Re-run shape inference on every node of g with the binding (one value per
 * symbol, -1 for unbound), replacing the stored types. Fails with a status
 * on a shape error (the message names the node). */
rlx_status ir_graph_specialize(rlx_graph *g, const int64_t *binding);
/* Symbol id of a name, or -1 (create=1: make it). */
int ir_sym_lookup(rlx_graph *g, const char *name, size_t len, int create);

/* ---------------------------------------------------------------- rewriting (for passes) */

/* An empty graph with g's name and symbols (same ids, so dim tokens carry over). */
rlx_graph *ir_graph_new_like(const rlx_graph *g);
/* Copy node id of src into dst with the given inputs (ids in dst); attrs are
 * deep-copied and the type re-inferred. Returns the new id or -1. */
rlx_node   ir_copy_node(rlx_graph *dst, const rlx_graph *src, rlx_node id, const rlx_node *inputs);
/* The same with inputs mapped through map[src id] = dst id. */
rlx_node   ir_copy_node_mapped(rlx_graph *dst, const rlx_graph *src, rlx_node id, const rlx_node *map);
/* dst's outputs = map[src's outputs]. */
rlx_status ir_set_outputs_mapped(rlx_graph *dst, const rlx_graph *src, const rlx_node *map);
/* uses[i] = number of node inputs and graph outputs that read node i
 * (calloc'ed, caller frees; NULL on NOMEM). */
int       *ir_use_counts(const rlx_graph *g);

#endif /* RLX_IR_H */
