/* fuzz_safetensors — libFuzzer harness of the safetensors reader, seeded
 * with corpus_safetensors/ (written by tests/ref/make_safetensors_cases.py
 * --corpus). */
#include "model_file_walk.h"
