/* test_limits — sizes that overflow, the largest tensor, the memory budget,
 * rlx_compile's options.
 *
 * usage: test_limits HOSTILE_DIR PYTHON REF_DIR WORK_DIR
 *
 *   - the checked size arithmetic (ir_size_add/mul, rlx_shape_numel,
 *     rlx_dtype_nbytes) against exact 128-bit arithmetic;
 *   - builders, rlx_set_input_shaped and graph text past RLX_MAX_TENSOR_BYTES
 *     fail with a status naming the op (never reach a kernel);
 *   - every graph of HOSTILE_DIR (its first line "# expect: STATUS WORD")
 *     parsed, compiled, bound and run under RLX_MEMORY_LIMIT_MB=1024 fails
 *     with STATUS and a message containing WORD;
 *   - rlx_llm_load of a tiny model (REF_DIR/llama_tiny.py writes it into
 *     WORK_DIR) with n_ctx 2^62 and 16777216 fails before allocating.
 */
#include "check.h"
#include "ref_script.h"
#include "ir/ir.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define P2(k) ((int64_t)1 << (k))

/* ---------------------------------------------------------------- arithmetic */

static int64_t want_sized(__int128 exact) {
  return exact > RLX_MAX_TENSOR_BYTES || exact <= -RLX_MAX_TENSOR_BYTES ? IR_SIZE_OVER : (int64_t)exact;
}

static void test_arithmetic(void) {
  const int64_t v[] = {0, 1, 2, 3, 1000, P2(20), P2(20) + 1, P2(39), P2(40) - 1, P2(40), P2(40) + 1,
                       P2(62), INT64_MAX, -1, -P2(40) + 1, -P2(40), -P2(40) - 1, INT64_MIN};
  const int n = (int)(sizeof v / sizeof v[0]);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      int64_t a = v[i], b = v[j];
      /* an operand out of range saturates even where the exact sum is small */
      int in = a <= RLX_MAX_TENSOR_BYTES && a > -RLX_MAX_TENSOR_BYTES && b <= RLX_MAX_TENSOR_BYTES &&
               b > -RLX_MAX_TENSOR_BYTES;
      int64_t want = in ? want_sized((__int128)a + b) : IR_SIZE_OVER;
      CHECK(ir_size_add(a, b) == want, "add %lld %lld: %lld, want %lld", (long long)a, (long long)b,
            (long long)ir_size_add(a, b), (long long)want);
      if (a < 0 || b < 0) {
        CHECK(ir_size_mul(a, b) == IR_SIZE_OVER, "mul of a negative %lld %lld", (long long)a, (long long)b);
        continue;
      }
      want = a == 0 || b == 0 ? 0 : want_sized((__int128)a * b);
      if (a > RLX_MAX_TENSOR_BYTES || b > RLX_MAX_TENSOR_BYTES) want = a == 0 || b == 0 ? 0 : IR_SIZE_OVER;
      CHECK(ir_size_mul(a, b) == want, "mul %lld %lld: %lld, want %lld", (long long)a, (long long)b,
            (long long)ir_size_mul(a, b), (long long)want);
    }
  /* rlx_shape_numel against the exact product, random shapes of mixed magnitudes */
  uint64_t r = 88172645463325252ull;
  for (int k = 0; k < 20000; k++) {
    int64_t dims[RLX_MAX_RANK];
    int rank = (int)(k % (RLX_MAX_RANK + 1));
    __int128 exact = 1;
    int big = 0;
    for (int i = 0; i < rank; i++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      int bits = (int)(r % 64);
      dims[i] = (int64_t)((r >> 8) & ((bits == 63 ? 0 : (uint64_t)1 << bits) - 1));
      big |= dims[i] > RLX_MAX_TENSOR_BYTES;
      if (exact > ((__int128)1 << 64)) exact = (__int128)1 << 64;  /* past every limit; keeps 128 bits */
      exact *= dims[i];
    }
    int has_zero = 0;
    for (int i = 0; i < rank; i++) has_zero |= dims[i] == 0;
    int64_t want = big ? -1 : has_zero ? 0 : exact > RLX_MAX_TENSOR_BYTES ? -1 : (int64_t)exact;
    int64_t got = rlx_shape_numel(rank, dims);
    CHECK(got == want, "numel case %d: %lld, want %lld", k, (long long)got, (long long)want);
    if (got >= 0) {
      size_t nb = rlx_dtype_nbytes(RLX_F64, got);
      CHECK(nb == (got * 8 > RLX_MAX_TENSOR_BYTES ? 0 : (size_t)got * 8), "f64 bytes of %lld: %zu", (long long)got, nb);
    }
  }
  CHECK(rlx_dtype_nbytes(RLX_F32, P2(62)) == 0, "2^62 f32 elements");
  CHECK(rlx_dtype_nbytes(RLX_U8, P2(40)) == (size_t)P2(40), "the limit itself");
  CHECK(rlx_dtype_nbytes(RLX_F32, P2(38)) == (size_t)P2(40), "2^38 f32");
  CHECK(rlx_dtype_nbytes(RLX_F32, P2(38) + 1) == 0, "past the limit");
}

/* ---------------------------------------------------------------- builders and binding */

static void test_builders(void) {
  rlx_graph *g = rlx_graph_new("limits");
  const int64_t huge[2] = {P2(62), 4};
  CHECK(rlx_iota(g, RLX_F32, 2, huge, 0) < 0, "Iota [2^62,4] accepted");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "Iota", "4611686018427387904", "RLX_MAX_TENSOR_BYTES");
  rlx_graph_free(g);

  g = rlx_graph_new("limits");
  const int64_t one4[2] = {1, 4};
  rlx_node x = rlx_input(g, "x", RLX_F32, 2, one4);
  CHECK(rlx_expand(g, x, 2, huge) < 0, "Expand to [2^62,4] accepted");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "Expand", "inputs: f32[1,4]");
  rlx_graph_free(g);

  g = rlx_graph_new("limits");
  x = rlx_input(g, "x", RLX_F32, 2, one4);
  const int64_t before[2] = {INT64_MAX - 1, 0}, after[2] = {2, 0};
  CHECK(rlx_pad(g, x, 2, before, after, 0) < 0, "Pad past int64 accepted");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "Pad");
  rlx_graph_free(g);

  g = rlx_graph_new("limits");
  const int64_t half[1] = {P2(39)};
  rlx_node parts[3] = {rlx_input(g, "a", RLX_U8, 1, half), rlx_input(g, "b", RLX_U8, 1, half),
                       rlx_input(g, "c", RLX_U8, 1, half)};
  CHECK(parts[2] >= 0, "2^39 bytes is a legal input: %s", rlx_last_error());
  CHECK(rlx_concat(g, 2, parts, 0) >= 0, "2^40 bytes is the limit, legal: %s", rlx_last_error());
  CHECK(rlx_concat(g, 3, parts, 0) < 0, "Concat past the limit accepted");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "Concat", "u8[549755813888]");
  rlx_graph_free(g);

  g = rlx_graph_new("limits");
  CHECK(rlx_input(g, "big", RLX_F32, 2, huge) < 0, "input [2^62,4] accepted");
  CHECK_ERR(rlx_graph_status(g), RLX_ERR_SHAPE, "rlx_input \"big\"", "4611686018427387904");
  rlx_graph_free(g);

  /* [S,4] bound to [2^62,4]: the byte count wraps to 0 unchecked, and a
   * 1-byte buffer then fed a Transpose of 2^64 bytes. */
  g = rlx_graph_new("limits");
  const int64_t s4[2] = {rlx_dim_sym(g, "S"), 4};
  x = rlx_input(g, "x", RLX_F32, 2, s4);
  const int64_t perm[2] = {1, 0};
  rlx_node y = rlx_transpose(g, x, 2, perm);
  rlx_graph_set_outputs(g, 1, &y);
  rlx_session *s = NULL;
  CHECK_ERR(rlx_compile(g, NULL, &s), RLX_OK, "");
  if (s) {
    const uint8_t byte = 0;
    CHECK_ERR(rlx_set_input_shaped(s, "x", &byte, 1, 2, huge), RLX_ERR_SHAPE, "\"x\"", "4611686018427387904");
    CHECK_ERR(rlx_set_input_shaped(s, "x", &byte, 0, 2, huge), RLX_ERR_SHAPE, "RLX_MAX_TENSOR_BYTES");
    const int64_t past[2] = {P2(38), 4};  /* 2^40 elements, 2^42 bytes */
    CHECK_ERR(rlx_set_input_shaped(s, "x", &byte, 0, 2, past), RLX_ERR_SHAPE, "f32[274877906944,4]");
    CHECK_ERR(rlx_run(s), RLX_ERR_INVALID, "never set");
    float four[4] = {1, 2, 3, 4}, out[4];
    const int64_t ok[2] = {1, 4};
    CHECK_ERR(rlx_set_input_shaped(s, "x", four, sizeof four, 2, ok), RLX_OK, "");
    CHECK_ERR(rlx_run(s), RLX_OK, "");
    CHECK_ERR(rlx_output(s, 0, out, sizeof out), RLX_OK, "");
    CHECK(out[3] == 4, "transpose of [1,4]");
  }
  rlx_session_free(s);
  rlx_graph_free(g);
}

/* ---------------------------------------------------------------- options and the budget */

static void test_options_and_budget(void) {
  unsetenv("RLX_MEMORY_LIMIT_MB");  /* the machine's own budget first */
  rlx_graph *g = rlx_graph_new("budget");
  /* 2^38 f32 = 1 TiB: a legal tensor no test machine has the memory for */
  const int64_t tib[1] = {P2(38)};
  rlx_node y = rlx_activation(g, RLX_ACT_RELU, rlx_iota(g, RLX_F32, 1, tib, 0));
  rlx_graph_set_outputs(g, 1, &y);
  rlx_session *s = NULL;
  CHECK_ERR(rlx_compile(g, NULL, &s), RLX_ERR_NOMEM, "arena", "1024.00 GiB", "memory");
  CHECK(!s, "a failed compile leaves no session");
  setenv("RLX_MEMORY_LIMIT_MB", "0", 1);
  rlx_graph *small = rlx_graph_new("small");
  const int64_t four[1] = {4};
  rlx_node z = rlx_iota(small, RLX_F32, 1, four, 0);
  rlx_graph_set_outputs(small, 1, &z);
  CHECK_ERR(rlx_compile(small, NULL, &s), RLX_ERR_NOMEM, "RLX_MEMORY_LIMIT_MB");
  unsetenv("RLX_MEMORY_LIMIT_MB");

  rlx_options bad_device = {(rlx_device)42, 0, 0, 0, NULL}, bad_threads = {RLX_DEVICE_CPU, -5, 0, 0, NULL},
              bad_flags = {RLX_DEVICE_CPU, 0, 0x100, 0, NULL};
  CHECK_ERR(rlx_compile(small, &bad_device, &s), RLX_ERR_INVALID, "device 42");
  CHECK_ERR(rlx_compile(small, &bad_threads, &s), RLX_ERR_INVALID, "threads -5");
  CHECK_ERR(rlx_compile(small, &bad_flags, &s), RLX_ERR_INVALID, "flags 0x100");
  /* a device index below 0, or of a GPU this machine lacks (every GPU in a
   * build without CUDA or a machine without one) */
  rlx_options bad_index = {RLX_DEVICE_CPU, 0, 0, -1, NULL}, far_gpu = {RLX_DEVICE_CUDA, 0, 0, 9999, NULL};
  CHECK_ERR(rlx_compile(small, &bad_index, &s), RLX_ERR_INVALID, "device_index -1");
  rlx_status far = rlx_compile(small, &far_gpu, &s);
  CHECK(far == RLX_ERR_UNSUPPORTED || far == RLX_ERR_DEVICE, "cuda:9999 refused (status %d: %s)", (int)far,
        rlx_last_error());
  CHECK(!s, "no session after a rejected option");
  /* RLX_DEVICE text that names no device leaves the request alone */
  setenv("RLX_DEVICE", "cuda:x", 1);
  rlx_options cpu = {RLX_DEVICE_CPU, 1, 0, 0, NULL};
  CHECK(rlx_compile(small, &cpu, &s) == RLX_OK && s, "RLX_DEVICE=cuda:x ignored: %s", rlx_last_error());
  rlx_session_free(s);
  s = NULL;
  unsetenv("RLX_DEVICE");
  rlx_graph_free(small);

  /* A param with a symbolic dim, the compile cache off: the message names
   * the param of the compiled graph, which must outlive it (fuzz_graph_run
   * found it read after the free). */
  setenv("RLX_COMPILE_CACHE", "0", 1);
  rlx_graph *symp = rlx_graph_new("symbolic_param");
  const int64_t s4[2] = {rlx_dim_sym(symp, "S"), 4};
  rlx_node w = rlx_param(symp, "w_sym", RLX_F32, 2, s4);
  rlx_graph_set_outputs(symp, 1, &w);
  CHECK_ERR(rlx_compile(symp, NULL, &s), RLX_ERR_UNSUPPORTED, "\"w_sym\" has a symbolic dim");
  rlx_graph_free(symp);
  unsetenv("RLX_COMPILE_CACHE");
  rlx_graph_free(g);
}

/* ---------------------------------------------------------------- the hostile graph corpus */

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return buf;
}

/* Parse, compile, bind (symbols to 2^62 with a 1-byte buffer), run. */
static rlx_status parse_compile_run(const char *text) {
  rlx_graph *g = NULL;
  rlx_session *s = NULL;
  rlx_status st = rlx_graph_from_text(text, &g);
  if (!st) st = rlx_compile(g, NULL, &s);
  static const uint8_t byte[1];
  for (int i = 0; !st && i < rlx_graph_num_inputs(g); i++) {
    rlx_node n = rlx_graph_input(g, i);
    rlx_dtype t;
    int64_t dims[RLX_MAX_RANK];
    int rank = rlx_node_type(g, n, &t, dims);
    for (int d = 0; d < rank; d++)
      if (rlx_dim_name(g, dims[d])) dims[d] = P2(62);
    st = rlx_set_input_shaped(s, rlx_node_name(g, n), byte, 1, rank, dims);
  }
  if (!st) st = rlx_run(s);
  rlx_session_free(s);
  rlx_graph_free(g);
  return st;
}

/* rlx_device_parse against the names it must take and the ones it must
 * refuse (the CLI's --device and RLX_DEVICE go through it). */
static void test_device_names(void) {
  static const struct { const char *text; rlx_device device; int index; } good[] = {
      {"auto", RLX_DEVICE_AUTO, 0}, {"cpu", RLX_DEVICE_CPU, 0},   {"cuda", RLX_DEVICE_CUDA, 0},
      {"cuda:0", RLX_DEVICE_CUDA, 0}, {"cuda:7", RLX_DEVICE_CUDA, 7}, {"cuda:1234", RLX_DEVICE_CUDA, 1234}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    rlx_device d = (rlx_device)-1;
    int index = -1;
    rlx_status st = rlx_device_parse(good[i].text, &d, &index);
    CHECK(st == RLX_OK && d == good[i].device && index == good[i].index, "\"%s\": status %d device %d index %d",
          good[i].text, (int)st, (int)d, index);
  }
  static const char *const bad[] = {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "cuda:12345", "cuda 1",
                                    "cpu:0", " cuda"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rlx_device d;
    int index;
    CHECK_ERR(rlx_device_parse(bad[i], &d, &index), RLX_ERR_INVALID, "is not auto, cpu, cuda or cuda:N");
  }
  rlx_device d;
  int index;
  CHECK_ERR(rlx_device_parse(NULL, &d, &index), RLX_ERR_INVALID, "NULL");
}

static void test_corpus(const char *dir) {
  DIR *d = opendir(dir);
  CHECK(d != NULL, "cannot open %s", dir);
  if (!d) return;
  setenv("RLX_MEMORY_LIMIT_MB", "1024", 1);
  int files = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".rlx")) continue;
    char path[1024], status[32], word[64];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    const char *text = read_text(path);
    CHECK(text && sscanf(text, "# expect: %31s %63s", status, word) == 2, "%s: no '# expect:' line", path);
    if (!text) continue;
    rlx_status st = parse_compile_run(text);
    CHECK(!strcmp(rlx_status_name(st), status) && strstr(rlx_last_error(), word),
          "%s: %s \"%s\", want %s with '%s'", e->d_name, rlx_status_name(st), rlx_last_error(), status, word);
    files++;
  }
  closedir(d);
  unsetenv("RLX_MEMORY_LIMIT_MB");
  CHECK(files >= 10, "only %d hostile graphs in %s", files, dir);
}

/* ---------------------------------------------------------------- the KV cache */

static void test_llm(const char *python, const char *ref_dir, const char *work_dir) {
  char path[1024];
  CHECK(run_ref_script(python, ref_dir, "llama_tiny.py", "--out \"%s\" > /dev/null", work_dir) == 0,
        "llama_tiny.py failed");
  snprintf(path, sizeof path, "%s/llama_f32.gguf", work_dir);
  rlx_model_file *f = NULL;
  CHECK_ERR(rlx_model_file_open(path, &f), RLX_OK, "");
  if (!f) return;
  rlx_llm *m = NULL;
  rlx_llm_options o = {{RLX_DEVICE_CPU, 1, 0, 0, NULL}, P2(62), NULL, NULL, RLX_F32, 0, 0, 0, 0, NULL};
  CHECK_ERR(rlx_llm_load(f, &o, &m), RLX_ERR_SHAPE, "n_ctx 4611686018427387904", "RLX_MAX_TENSOR_BYTES");
  CHECK(!m, "no model after a failed load");
  o.n_ctx = 16777216;  /* the issue's --ctx: 2^24 rows, GiBs even for a tiny model */
  setenv("RLX_MEMORY_LIMIT_MB", "64", 1);
  CHECK_ERR(rlx_llm_load(f, &o, &m), RLX_ERR_NOMEM, "KV cache", "n_ctx 16777216", "RLX_MEMORY_LIMIT_MB");
  unsetenv("RLX_MEMORY_LIMIT_MB");
  o.n_ctx = 256;
  CHECK_ERR(rlx_llm_load(f, &o, &m), RLX_OK, "");
  rlx_llm_info info;
  if (m) CHECK(rlx_llm_get_info(m, &info) == RLX_OK && info.n_ctx == 256, "n_ctx 256 loads");
  rlx_llm_free(m);
  rlx_model_file_close(f);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: test_limits HOSTILE_DIR PYTHON REF_DIR WORK_DIR\n");
    return 2;
  }
  test_arithmetic();
  test_builders();
  test_options_and_budget();
  test_device_names();
  test_corpus(argv[1]);
  test_llm(argv[2], argv[3], argv[4]);
  return check_report();
}
