/* onnx.h — internals of the ONNX layer: the parsed model (reader.c), tensor
 * data (tensor_data.c), the op table (ops_*.c) and the importer (import.c)
 * behind the public rlx_model object (model.c).
 *
 * The reader decodes the protobuf wire format of onnx.proto by hand: no
 * dependency, every length, count and offset checked against the bytes
 * left, and it is fuzzed (tests/fuzz/fuzz_onnx.c). Everything it makes
 * lives in one arena owned by the model; strings are NUL-terminated copies;
 * tensor bytes stay in the mapped file where they can.
 */
#ifndef RLX_ONNX_H
#define RLX_ONNX_H

#include "../format/format.h"
#include "../ir/ir.h"

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- arena (reader.c) */

typedef struct ox_chunk ox_chunk;
typedef struct { ox_chunk *head; } ox_arena;
void *ox_alloc(ox_arena *a, size_t n);   /* zeroed, 16-aligned; NULL + NOMEM set */
void  ox_arena_free(ox_arena *a);

/* ---------------------------------------------------------------- the parsed model */

/* ONNX TensorProto.DataType codes. */
enum { OX_UNDEFINED = 0, OX_FLOAT = 1, OX_UINT8, OX_INT8, OX_UINT16, OX_INT16, OX_INT32,
       OX_INT64, OX_STRING, OX_BOOL, OX_FLOAT16, OX_DOUBLE, OX_UINT32, OX_UINT64,
       OX_COMPLEX64, OX_COMPLEX128, OX_BFLOAT16, OX_DTYPE_LAST = 26 };

#define OX_MAX_RANK 16

typedef struct {
  const char *name;
  int32_t data_type;
  int rank;
  int64_t dims[OX_MAX_RANK];
  int64_t numel;
  /* Resolved by ox_tensor_resolve: nbytes bytes of little-endian elements. */
  const void *data;
  size_t nbytes;
  /* Where the bytes are before resolving: raw_data in the file, a typed
   * field (its number; the message is scanned again to decode it), or
   * external data. */
  const uint8_t *raw;  size_t raw_len;  int has_raw;
  int typed_field;
  const uint8_t *msg;  size_t msg_len;  uint64_t msg_pos;  /* the TensorProto */
  int external;
  const char *location;
  int64_t ext_offset, ext_length;
} ox_tensor;

typedef struct ox_graph ox_graph;

enum { OX_ATTR_UNDEFINED, OX_ATTR_FLOAT, OX_ATTR_INT, OX_ATTR_STRING, OX_ATTR_TENSOR,
       OX_ATTR_GRAPH, OX_ATTR_FLOATS, OX_ATTR_INTS, OX_ATTR_STRINGS, OX_ATTR_TENSORS,
       OX_ATTR_GRAPHS };

typedef struct {
  const char *name;
  int type;
  double f;
  int64_t i;
  const char *s;  size_t s_len;
  ox_tensor *t;
  ox_graph *g;
  float *floats;        int64_t n_floats;
  int64_t *ints;        int64_t n_ints;
  const char **strings; int64_t n_strings;
  const char *ref_attr_name;   /* functions: refers to the caller's attribute */
} ox_attr;

typedef struct {
  const char *name, *op_type, *domain;
  const char **inputs;  int n_inputs;    /* "" = an omitted optional input */
  const char **outputs; int n_outputs;
  ox_attr *attrs;       int n_attrs;
} ox_node;

typedef struct {
  const char *name;
  int has_type;         /* a tensor type was given */
  int32_t elem_type;
  int has_shape;
  int rank;
  int64_t dims[OX_MAX_RANK];      /* -1: dim_param or unknown */
  const char *dim_params[OX_MAX_RANK];   /* NULL when not named */
} ox_value_info;

struct ox_graph {
  const char *name;
  ox_node *nodes;         int n_nodes;
  ox_tensor *inits;       int n_inits;
  ox_value_info *inputs;  int n_inputs;
  ox_value_info *outputs; int n_outputs;
  ox_value_info *vinfo;   int n_vinfo;
};

typedef struct { const char *domain; int64_t version; } ox_opset;

typedef struct {
  const char *name, *domain;
  const char **inputs;  int n_inputs;
  const char **outputs; int n_outputs;
  const char **attr_names; int n_attr_names;
  ox_node *nodes;       int n_nodes;
  ox_opset *opsets;     int n_opsets;
} ox_function;

typedef struct {
  int64_t ir_version;
  const char *producer_name, *producer_version, *domain;
  int64_t model_version;
  ox_opset *opsets;       int n_opsets;
  ox_graph *graph;
  ox_function *functions; int n_functions;
} ox_model;

/* Parses a ModelProto from size bytes (which must outlive the model).
 * name: for messages. On failure a status with "NAME: ONNX: offset N: ..."
 * set, and what was allocated stays in the arena. */
rlx_status ox_parse_model(ox_arena *a, const char *name, const uint8_t *data, size_t size,
                          ox_model *out);

/* The opset of a domain ("" and "ai.onnx" are the same); 0 when not imported. */
int64_t ox_opset_of(const ox_opset *opsets, int n, const char *domain);

/* ---------------------------------------------------------------- tensor data (tensor_data.c) */

/* External data files mapped for one model, and the folder they must lie in. */
typedef struct {
  const char *dir;            /* NULL: loaded from memory, external data refused */
  struct { char *path; fmt_mapping map; } *files;
  int n_files;
} ox_external;
void ox_external_free(ox_external *x);

/* rlx dtype of an ONNX data type; -1 when rlx has none. The narrow types
 * (float8, float4, 4- and 2-bit integers) are held as U8, one element a
 * byte with its bit pattern in the low bits (as ml_dtypes holds them);
 * tensor data packed two or four to a byte is unpacked (narrow.c
 * converts them). */
int ox_rlx_dtype(int32_t onnx_type);
int ox_is_narrow(int32_t onnx_type);
const char *ox_dtype_name(int32_t onnx_type);
/* Sets t->data / t->nbytes: raw_data in place, a typed field decoded into
 * the arena, or a range of an external file. Checks sizes and types. */
rlx_status ox_tensor_resolve(ox_arena *a, ox_external *x, const char *model_name, ox_tensor *t);
/* A resolved tensor's bytes aligned to its element size, to read as C
 * values: in place, or copied into the arena (NULL on NOMEM). */
const void *ox_aligned_data(ox_arena *a, const ox_tensor *t);

/* ---------------------------------------------------------------- import (import.c, ops_*.c) */

/* A value while importing: an rlx node, and where the importer knows it, its
 * contents (small integer tensors: shapes, axes, indices; and constants), so
 * shape computations fold at import. Symbolic dims in known ints are the
 * graph's dim tokens. */
typedef struct {
  rlx_node node;          /* -1: none yet (made from the known value on demand) */
  int known;              /* kv holds the values */
  rlx_dtype dtype;
  int rank;
  int64_t dims[RLX_MAX_RANK];
  int64_t *ints;          /* integer-typed known values (also bool) */
  double *reals;          /* float-typed known values */
  int64_t numel;
  /* Model inputs an unknown value is computed from (bit k: input k, the
   * first 64): the candidates to become value inputs when it must be known. */
  uint64_t deps;
  /* A narrow ONNX type (ox_is_narrow) the U8 bytes hold; 0: the type of
   * dtype. An op whose first input is narrow and whose output is U8 (the
   * data-movement ops) passes it on. */
  int32_t onnx_type;
} ox_value;

/* The contents of a model input imported as a known value (a value input:
 * docs/ONNX.md). rank -1: the declared shape. */
typedef struct {
  const void *data;       /* NULL: an ordinary input */
  size_t nbytes;
  int rank;
  const int64_t *dims;
} ox_input_value;

typedef struct ox_importer ox_importer;

/* One row of the op table: an op type of a domain, the first opset it
 * covers (rows of the same op from newest to oldest), and its importer. */
typedef struct {
  const char *op_type, *domain;
  int since;
  rlx_status (*run)(ox_importer *im, const ox_node *node);
} ox_op_row;

/* The table (ops.c) and lookup: NULL when no row covers (op, domain, opset). */
const ox_op_row *ox_find_op(const char *op_type, const char *domain, int64_t opset);

/* The importer's state (import.c). */
struct ox_importer {
  rlx_graph *g;
  ox_arena *arena;
  const ox_model *model;
  const char *model_name;
  int64_t opset;           /* default-domain opset */
  int n_bind;              /* symbolic dims fixed at load */
  const char *const *bind_names;
  const int64_t *bind_values;
  rlx_status err;          /* the status of the last ox_node_fail */
  int n_inputs;            /* model inputs: the length of values and want */
  const ox_input_value *values;   /* [model inputs] or NULL: inputs imported as known values */
  /* [model inputs] or NULL: the inputs whose contents (OX_WANT_CONTENTS)
   * or dims alone (OX_WANT_DIMS) the node being imported needed and did
   * not have. */
  unsigned char *want;
  int wanted;
  int64_t body_nodes;      /* subgraph nodes unrolled so far (ops_control.c bounds it) */
  /* Name -> value table (open addressing over names). */
  struct ox_slot { const char *name; ox_value v; } *slots;
  size_t cap, count;
};

/* The parsed ONNX model of an rlx_model (model.c). */
const ox_model *ox_model_of(const rlx_model *m);

/* Whether name is an initializer or a node output of g (so a graph input
 * of that name is no real input). */
int ox_is_defined(const ox_graph *g, const char *name);

/* Imports the model's main graph into g. */
rlx_status ox_import(ox_importer *im, ox_external *x);

/* One node: its op-table row, or the expansion of a model-local function
 * (functions.c); depth counts nested calls, index names unnamed calls. */
rlx_status ox_import_node(ox_importer *im, const ox_node *n, int depth, int index);

/* Helpers for the op functions. */
ox_value   *ox_lookup(ox_importer *im, const char *name);        /* NULL: undefined */
/* Input i of node as an rlx node (made from a known value if needed); -1
 * with a message when missing. */
rlx_node    ox_in(ox_importer *im, const ox_node *n, int i);
int         ox_has_in(const ox_node *n, int i);                  /* present and non-empty */
ox_value   *ox_in_value(ox_importer *im, const ox_node *n, int i);
/* Input i when its contents are known, else NULL (no message); the model
 * inputs it is computed from are noted in im->want (they may become value
 * inputs, and then it may fold). */
ox_value   *ox_in_known(ox_importer *im, const ox_node *n, int i);
/* Known integer contents of input i (shapes, axes...); NULL (no message)
 * when not known at import. */
const int64_t *ox_in_ints(ox_importer *im, const ox_node *n, int i, int64_t *count);
/* Whether known ints hold a symbolic dim: such an element is no number yet
 * (a bound, a count). The model inputs whose declared dims are those
 * symbols are noted in im->want (OX_WANT_DIMS): the graph is then built at
 * run with their dims bound, so the value folds. */
enum { OX_WANT_CONTENTS = 1, OX_WANT_DIMS = 2 };
int         ox_ints_sym(ox_importer *im, const int64_t *ints, int64_t count);
/* The end of the message of a refusal for want of a symbolic dim's value. */
#define OX_SYM_HINT "computed from a symbolic dim (bind it at load: --bind)"
rlx_status  ox_set_out(ox_importer *im, const ox_node *n, int i, rlx_node v);
rlx_status  ox_set_out_known(ox_importer *im, const ox_node *n, int i, rlx_dtype t, int rank,
                             const int64_t *dims, const int64_t *ints, const double *reals);
const ox_attr *ox_attr_get(const ox_node *n, const char *name);
int64_t     ox_attr_int(const ox_node *n, const char *name, int64_t dflt);
double      ox_attr_float(const ox_node *n, const char *name, double dflt);
const char *ox_attr_str(const ox_node *n, const char *name, const char *dflt);
/* A double as an int64, saturated (NaN: 0): values from files may be anything. */
static inline int64_t ox_f2i(double v) {
  return v != v ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
}
/* Element i of dst (dtype t): r for a float dtype, k (wrapped) for an integer. */
void        ox_store(rlx_dtype t, void *dst, int64_t i, double r, int64_t k);
/* A rank-0 constant v of x's dtype. */
rlx_node    ox_scalar_like(ox_importer *im, rlx_node x, double v);
rlx_node    ox_scalar(ox_importer *im, rlx_dtype t, double v);
/* A known value from tensor bytes (initializers, Constant) as output i. */
rlx_status  ox_known_from_tensor(ox_importer *im, const ox_node *n, int i, const ox_tensor *t);
/* The dim of a dim_param: its binding, else a symbolic dim of g. */
int64_t     ox_dim_of_param(rlx_graph *g, const char *param, int n_bind, const char *const *names,
                            const int64_t *values);
/* Fails naming the node: "NODE (OP, opset N): message"; sets im->err. */
rlx_status  ox_node_fail(ox_importer *im, const ox_node *n, rlx_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* The narrow types (narrow.c). The ONNX type of a value; x (U8 bytes of
 * a narrow type) as F32; x (any real type) as the bytes of a narrow type,
 * rounding to nearest even (float8 with saturate: out of range to the
 * largest finite value; float8e8m0 by round_mode "up", "down" or
 * "nearest"; the integer types truncate, out of range to 0). */
int32_t     ox_value_type(const ox_value *v);
rlx_node    ox_narrow_decode(ox_importer *im, rlx_node x, int32_t type);
rlx_node    ox_narrow_encode(ox_importer *im, rlx_node x, int32_t type, int saturate, const char *round_mode);
/* The range of a narrow integer type ([-8, 7] for int4); 0 for others. */
int         ox_narrow_int_range(int32_t type, double *lo, double *hi);
/* Integer q (in range) as the byte of narrow integer type: two's complement in the low bits. */
rlx_node    ox_narrow_int_bytes(ox_importer *im, rlx_node q, int32_t type);
/* ox_set_out of a value holding a narrow type. */
rlx_status  ox_set_out_typed(ox_importer *im, const ox_node *n, int i, rlx_node v, int32_t onnx_type);
/* Spatial attributes of Conv and the pools (ops_nn.c): kernel (given or
 * from w), strides, dilations and pads (auto_pad resolved against static
 * input dims); pad holds the nd begins, then the nd ends. */
#define OX_MAX_SPATIAL 3
typedef struct { int nd; int64_t k[OX_MAX_SPATIAL], s[OX_MAX_SPATIAL], d[OX_MAX_SPATIAL], pad[2 * OX_MAX_SPATIAL]; } ox_spatial;
rlx_status  ox_read_spatial(ox_importer *im, const ox_node *n, const int64_t *xdims, int xr, const int64_t *kernel,
                            int transpose, ox_spatial *sp);
/* Resize / Upsample on rlx's resize ops (ops_nn.c); RLX_ERR_UNSUPPORTED
 * where they do not apply (ops_resize.c then takes it). */
rlx_status  ox_op_resize(ox_importer *im, const ox_node *n);
/* The node status of a builder result: OK for id >= 0, else the graph's error named by node. */
rlx_status  ox_check(ox_importer *im, const ox_node *n, rlx_node v);
/* In an op function (im and n in scope): IN(i) is ox_in; NEED(v) returns
 * the node's error when v is missing. */
#define IN(i) ox_in(im, n, i)
#define NEED(v) do { if ((v) < 0) return im->err ? im->err : ox_check(im, n, -1); } while (0)

#endif /* RLX_ONNX_H */
