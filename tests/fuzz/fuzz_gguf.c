/* fuzz_gguf — libFuzzer harness of the GGUF reader, seeded with
 * corpus_gguf/ (written by tests/ref/make_gguf_cases.py --corpus). */
#include "model_file_walk.h"
