/* fuzz_onnx — libFuzzer harness of the ONNX reader and importer: any bytes
 * loaded as a model from memory, then described and imported. Seeded with
 * corpus_onnx/ (small models written by tests/onnx/make_fuzz_corpus.py). */
#include <rlx.h>

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rlx_model *m;
  if (rlx_model_load_memory(data, size, NULL, &m) != RLX_OK) return 0;
  free(rlx_model_summary(m));
  for (int i = 0; i < rlx_model_num_inputs(m); i++) {
    int64_t dims[RLX_MAX_RANK];
    rlx_dtype t;
    rlx_model_input_type(m, i, &t, dims);
  }
  const rlx_graph *g;
  rlx_model_graph(m, &g);
  rlx_model_free(m);
  return 0;
}
