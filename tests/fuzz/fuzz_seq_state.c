/* fuzz_seq_state — libFuzzer harness of the sequence state reader
 * (rlx_llm_seq_load): the bytes are a state file, loaded into sequence 1
 * of a tiny Llama decoder (one layer, 8 wide, 4 tokens; a GGUF written in
 * memory once) whose sequence 0 holds two positions.
 *
 * A file that gets past the reader's checks must carry the model's
 * fingerprint and a checksum of its bytes, which random bytes never do;
 * so where the input starts with the magic, the harness writes the
 * model's fingerprint (bytes 8..16) and the FNV-1a of the rest (the last
 * 8 bytes) in, and the fuzzer explores what lies behind them: the sizes,
 * the tokens, the rows. A load that succeeds must leave sequence 1 at the
 * positions the file says and decodable; one that fails must leave it
 * empty and sequence 0 untouched. Any crash, leak, sanitizer report or
 * abort() is a bug. */
#include "gguf_build.h"
#include "rlx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define E 8
#define V 4

/* One f32 tensor's info (GGUF dims: fastest first) and where its data goes. */
static void tensor_info(gguf_build *b, const char *name, uint64_t rows, uint64_t cols, uint64_t *offset) {
  gb_str(b, name, strlen(name));
  gb_u32(b, rows > 1 ? 2 : 1);
  gb_u64(b, cols);
  if (rows > 1) gb_u64(b, rows);
  gb_u32(b, 0); /* F32 */
  gb_u64(b, *offset);
  *offset += (rows * cols * 4 + 31) / 32 * 32;
}

static const struct { const char *name; uint64_t rows, cols; } TENSORS[] = {
    {"token_embd.weight", V, E}, {"output_norm.weight", 1, E}, {"blk.0.attn_norm.weight", 1, E},
    {"blk.0.attn_q.weight", E, E}, {"blk.0.attn_k.weight", E / 2, E}, {"blk.0.attn_v.weight", E / 2, E},
    {"blk.0.attn_output.weight", E, E}, {"blk.0.ffn_norm.weight", 1, E}, {"blk.0.ffn_gate.weight", E, E},
    {"blk.0.ffn_up.weight", E, E}, {"blk.0.ffn_down.weight", E, E}};
#define N_TENSORS (sizeof TENSORS / sizeof TENSORS[0])

static gguf_build model_bytes;
static rlx_model_file *file;
static rlx_llm *llm;
static uint8_t fingerprint[8];
static char path[64];

/* The tiny model, its sequence 0, and the fingerprint of a state it saves. */
static int setup(void) {
  gguf_build *b = &model_bytes;
  gb_start(b);
  gb_kv_str(b, "general.architecture", "llama", 5);
  gb_kv_u32(b, "llama.block_count", 1);
  gb_kv_u32(b, "llama.embedding_length", E);
  gb_kv_u32(b, "llama.feed_forward_length", E);
  gb_kv_u32(b, "llama.attention.head_count", 2);
  gb_kv_u32(b, "llama.attention.head_count_kv", 1);
  gb_kv_u32(b, "llama.context_length", 16);
  gb_finish(b);
  memcpy(b->p + 8, &(uint64_t){N_TENSORS}, 8);
  uint64_t offset = 0;
  for (size_t i = 0; i < N_TENSORS; i++) tensor_info(b, TENSORS[i].name, TENSORS[i].rows, TENSORS[i].cols, &offset);
  while (b->n % 32) gb_put(b, "", 1);
  for (uint64_t i = 0; i < offset / 4; i++) {
    float w = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    gb_put(b, &w, 4);
  }
  snprintf(path, sizeof path, "/tmp/fuzz_seq_state.%d", (int)getpid());
  rlx_llm_options o = {{RLX_DEVICE_CPU, 1, 0, 0, NULL}, 16, NULL, NULL, RLX_F32, 2, 0, 0, 0, NULL};
  float logits[2 * V];
  int32_t toks[2] = {1, 3};
  if (b->failed || rlx_model_file_open_memory(b->p, b->n, &file) || rlx_llm_load(file, &o, &llm) ||
      rlx_llm_eval(llm, toks, 2, 1, logits) || rlx_llm_seq_save(llm, 0, path))
    abort();
  FILE *f = fopen(path, "rb");
  if (!f || fseek(f, 8, SEEK_SET) || fread(fingerprint, 1, 8, f) != 8) abort();
  fclose(f);
  return 1;
}

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) ready = setup();
  uint8_t *bytes = malloc(size ? size : 1);
  if (!bytes) return 0;
  memcpy(bytes, data, size);
  if (size >= 24 && !memcmp(bytes, "RLXSEQ01", 8)) {
    memcpy(bytes + 8, fingerprint, 8);
    uint64_t h = fnv1a(bytes, size - 8);
    for (int i = 0; i < 8; i++) bytes[size - 8 + i] = (uint8_t)(h >> (8 * i));
  }
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  fwrite(bytes, 1, size, f);
  fclose(f);
  free(bytes);
  const int64_t before = rlx_llm_seq_n_past(llm, 0);
  if (rlx_llm_seq_load(llm, 1, path) == RLX_OK) {
    float logits[V];
    int32_t tok = 2, seq = 1;
    rlx_llm_batch one = {1, &tok, &seq, NULL};
    if (rlx_llm_seq_n_past(llm, 1) < 16 && rlx_llm_decode(llm, &one, logits)) abort();
  } else if (rlx_llm_seq_n_past(llm, 1) != 0 || !rlx_last_error()[0]) {
    abort();
  }
  if (rlx_llm_seq_n_past(llm, 0) != before) abort();
  rlx_llm_seq_truncate(llm, 1, 0);
  return 0;
}
