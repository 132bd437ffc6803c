/* fuzz_graph_run — libFuzzer harness that parses, compiles and runs graphs.
 *
 * The bytes are graph text (every op has a text form, so every op's shape
 * inference, passes and CPU kernel are reachable). A text that parses is
 * specialized with every symbol bound to SYM_VALUE and its sizes checked
 * against a small budget BEFORE anything is compiled (no tensor above
 * MAX_TENSOR_BYTES, all of them together below MAX_TOTAL_BYTES), so an
 * input cannot merely ask for a huge computation. Within the budget it is
 * compiled, every input and param bound to deterministic data (integers 0
 * or 1, usable as indices of any non-empty axis), run, and every output
 * read. Statuses are fine; a crash, leak, sanitizer report, hang or abort()
 * is a bug — in particular a graph whose sizes overflow must fail with a
 * status, never reach a kernel.
 */
#include "ir/ir.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SYM_VALUE 3
#define MAX_TENSOR_BYTES ((int64_t)1 << 16)
#define MAX_TOTAL_BYTES ((int64_t)1 << 22)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  setenv("RLX_THREADS", "1", 1);        /* one thread: reproducible, and fast */
  setenv("RLX_COMPILE_CACHE", "0", 1);  /* every input compiles afresh */
  return 0;
}

/* g specialized to SYM_VALUE: 1 if every type fits the budget (the
 * specialized copy into *spec, for the leaves' bound shapes). */
static int within_budget(const rlx_graph *g, rlx_graph **spec) {
  *spec = ir_graph_clone(g);
  if (!*spec) return 0;
  int64_t binding[64];
  if ((*spec)->n_syms > 64) return 0;
  for (int i = 0; i < (*spec)->n_syms; i++) binding[i] = SYM_VALUE;
  if (ir_graph_specialize(*spec, binding) != RLX_OK) return 0;
  int64_t total = 0;
  for (int i = 0; i < (*spec)->n_nodes; i++) {
    const ir_node *n = &(*spec)->nodes[i];
    for (int o = 0; o < n->n_out; o++) {
      int64_t b = ir_type_nbytes(&n->out[o]);
      if (b < 0 || b > MAX_TENSOR_BYTES) return 0;
      total += b;
    }
  }
  return total <= MAX_TOTAL_BYTES;
}

/* Deterministic data of t's bytes: small values, integers 0 or 1. */
static void fill(rlx_dtype t, uint8_t *p, size_t nbytes) {
  if (rlx_dtype_is_block(t)) {
    memset(p, 0, nbytes);  /* zero scales: finite blocks */
    return;
  }
  size_t es = rlx_dtype_nbytes(t, 1), n = es ? nbytes / es : 0;
  for (size_t i = 0; i < n; i++) {
    double v = (double)((int)(i * 7 % 11) - 5) / 4;
    int64_t k = (int64_t)(i % 2);
    switch (t) {
    case RLX_F32: ((float *)p)[i] = (float)v; break;
    case RLX_F16: ((uint16_t *)p)[i] = rlx_f32_to_f16((float)v); break;
    case RLX_BF16: ((uint16_t *)p)[i] = rlx_f32_to_bf16((float)v); break;
    case RLX_F64: ((double *)p)[i] = v; break;
    case RLX_I32: ((int32_t *)p)[i] = (int32_t)k; break;
    case RLX_I64: ((int64_t *)p)[i] = k; break;
    default: p[i] = (uint8_t)k; break;  /* i8, u8, bool */
    }
  }
}

static rlx_status bind_leaves(const rlx_graph *spec, rlx_session *s) {
  static uint8_t buf[MAX_TENSOR_BYTES];
  for (int i = 0; i < spec->n_nodes; i++) {
    const ir_node *n = &spec->nodes[i];
    if (n->op != RLX_OP_Input && n->op != RLX_OP_Param) continue;
    size_t nbytes = (size_t)ir_type_nbytes(&n->out[0]);
    fill(n->out[0].dtype, buf, nbytes);
    rlx_status st = n->op == RLX_OP_Param
                        ? rlx_set_param(s, n->a.name, buf, nbytes)
                        : rlx_set_input_shaped(s, n->a.name, buf, nbytes, n->out[0].shape.rank, n->out[0].shape.d);
    if (st) return st;
  }
  return RLX_OK;
}

static void compile_and_run(const rlx_graph *g, const rlx_graph *spec) {
  rlx_options opt = {RLX_DEVICE_CPU, 1, 0, 0, NULL};
  rlx_session *s = NULL;
  if (rlx_compile(g, &opt, &s) != RLX_OK) {
    if (s) abort();  /* a failed compile leaves *out NULL */
    return;
  }
  if (bind_leaves(spec, s) == RLX_OK && rlx_run(s) == RLX_OK) {
    static uint8_t out[MAX_TENSOR_BYTES];
    for (int i = 0; i < rlx_session_num_outputs(s); i++) {
      rlx_dtype t;
      int64_t dims[RLX_MAX_RANK];
      int rank = rlx_output_type(s, i, &t, dims);
      int64_t numel = rlx_shape_numel(rank, dims);
      size_t nbytes = rlx_dtype_nbytes(t, numel);
      if (rank < 0 || numel < 0 || nbytes > sizeof out) abort();  /* the budget held every type */
      if (rlx_output(s, i, out, nbytes) != RLX_OK) abort();
    }
  }
  rlx_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  rlx_graph *g = NULL, *spec = NULL;
  if (rlx_graph_from_text(text, &g) == RLX_OK && within_budget(g, &spec)) compile_and_run(g, spec);
  rlx_graph_free(spec);
  rlx_graph_free(g);
  free(text);
  return 0;
}
