/* format_check.h — what the model-file tests share: reading their
 * generators' manifests (the grammar is in tests/ref/make_gguf_cases.py)
 * and checking a file against one: metadata values (recursively through
 * arrays), tensors (type, shape, offset, bytes in place, values through a
 * session), bad files (status + message, from a path and from memory),
 * every prefix of a valid file, `rlx info`. */
#ifndef RLX_FORMAT_CHECK_H
#define RLX_FORMAT_CHECK_H

#include "rlx.h"
#include "check.h"
#include "ref_data.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *rlx_bin;
static int manifest_files, manifest_bad_files;

/* ---------------------------------------------------------------- helpers */

/* Hex to bytes (in place into out, which needs strlen(hex)/2 + 1); "-" is
 * empty. Returns the length. */
static size_t unhex(const char *hex, char *out) {
  size_t n = 0;
  if (!strcmp(hex, "-")) hex = "";
  for (; hex[0] && hex[1]; hex += 2) {
    unsigned v;
    sscanf(hex, "%2x", &v);
    out[n++] = (char)v;
  }
  out[n] = 0;
  return n;
}

static int meta_type_of(const char *name, rlx_meta_type *t) {
  for (int i = 0; i < RLX_META_TYPE_COUNT; i++)
    if (!strcmp(rlx_meta_type_name((rlx_meta_type)i), name)) return *t = (rlx_meta_type)i, 1;
  return 0;
}

/* Output of a shell command (malloc'ed) and its exit status. */
static char *run_capture(const char *cmd, int *status) {
  *status = -1;
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, p)) > 0;) {
    n += got;
    if (cap - n - 1 == 0) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (buf) buf[n] = 0;
  return buf;
}

/* ---------------------------------------------------------------- metadata values */

static char *next_tok(char **cur) {
  char *s = *cur;
  while (*s == ' ') s++;
  if (!*s) return NULL;
  char *e = s;
  while (*e && *e != ' ') e++;
  if (*e) *e++ = 0;
  *cur = e;
  return s;
}

static int same_double(double got, double want) {
  if (isnan(want)) return isnan(got);
  return got == want && signbit(got) == signbit(want);
}

/* Checks value v of manifest type `type` against the tokens at *cur. */
static int check_value(const rlx_meta_value *v, const char *type, char **cur, const char *ctx) {
  rlx_meta_type want;
  if (!meta_type_of(type, &want)) {
    CHECK(0, "%s: bad manifest type %s", ctx, type);
    return 0;
  }
  if (v->type != want) {
    CHECK(0, "%s: type %s, want %s", ctx, rlx_meta_type_name(v->type), type);
    return 0;
  }
  char *tok = next_tok(cur);
  if (!tok) {
    CHECK(0, "%s: manifest value missing", ctx);
    return 0;
  }
  int ok = 1;
  if (want == RLX_META_ARRAY) {
    char *et = next_tok(cur), *cnt = next_tok(cur);
    rlx_meta_type elem;
    if (strcmp(tok, "[") || !et || !cnt || !meta_type_of(et, &elem)) {
      CHECK(0, "%s: bad manifest array", ctx);
      return 0;
    }
    uint64_t count = strtoull(cnt, NULL, 10);
    if (v->elem_type != elem || v->count != count) {
      CHECK(0, "%s: array of %s[%llu], want %s[%llu]", ctx, rlx_meta_type_name(v->elem_type),
            (unsigned long long)v->count, et, (unsigned long long)count);
      return 0;
    }
    for (uint64_t i = 0; i < count && ok; i++) {
      rlx_meta_value e;
      char ectx[256];
      snprintf(ectx, sizeof ectx, "%s[%llu]", ctx, (unsigned long long)i);
      rlx_status st = rlx_meta_elem(v, i, &e);
      CHECK(st == RLX_OK, "%s: rlx_meta_elem: %s", ectx, rlx_last_error());
      ok = st == RLX_OK && check_value(&e, et, cur, ectx);
    }
    tok = next_tok(cur);
    CHECK(ok && tok && !strcmp(tok, "]"), "%s: manifest array not closed", ctx);
    rlx_meta_value past;
    CHECK_ERR(rlx_meta_elem(v, count, &past), RLX_ERR_INVALID, "out of range");
    return ok;
  }
  switch (want) {
  case RLX_META_STRING: {
    if (strncmp(tok, "s:", 2)) {
      CHECK(0, "%s: manifest string %s", ctx, tok);
      return 0;
    }
    char *bytes = malloc(strlen(tok) / 2 + 1);
    size_t n = unhex(tok + 2, bytes);
    const char *s = NULL;
    size_t len = 0;
    rlx_status st = rlx_meta_as_string(v, &s, &len);
    ok = st == RLX_OK && len == n && !memcmp(s, bytes, n);
    CHECK(ok, "%s: string of %zu bytes differs (want %zu)", ctx, len, n);
    free(bytes);
    break;
  }
  case RLX_META_BOOL: {
    int b = -1;
    ok = rlx_meta_as_bool(v, &b) == RLX_OK && b == atoi(tok);
    CHECK(ok, "%s: bool %d, want %s", ctx, b, tok);
    break;
  }
  case RLX_META_F32: case RLX_META_F64: {
    double want_v = strtod(tok, NULL), got = 0;
    float got32 = 0;
    ok = rlx_meta_as_f64(v, &got) == RLX_OK && same_double(got, want_v);
    if (want == RLX_META_F32) ok = ok && rlx_meta_as_f32(v, &got32) == RLX_OK && same_double(got32, want_v);
    CHECK(ok, "%s: %.17g, want %s", ctx, got, tok);
    break;
  }
  case RLX_META_U8: case RLX_META_U16: case RLX_META_U32: case RLX_META_U64: {
    uint64_t want_v = strtoull(tok, NULL, 10), got = 0;
    ok = rlx_meta_as_u64(v, &got) == RLX_OK && got == want_v;
    if (ok && want_v <= UINT32_MAX) {
      uint32_t g32 = 0;
      ok = rlx_meta_as_u32(v, &g32) == RLX_OK && g32 == want_v;
    } else if (ok) {
      CHECK_ERR(rlx_meta_as_u32(v, NULL), RLX_ERR_DTYPE, "does not fit u32");
    }
    CHECK(ok, "%s: %llu, want %s", ctx, (unsigned long long)got, tok);
    break;
  }
  default: {  /* signed */
    int64_t want_v = strtoll(tok, NULL, 10), got = 0;
    ok = rlx_meta_as_i64(v, &got) == RLX_OK && got == want_v;
    if (ok && want_v >= INT32_MIN && want_v <= INT32_MAX) {
      int32_t g32 = 0;
      ok = rlx_meta_as_i32(v, &g32) == RLX_OK && g32 == want_v;
    }
    if (ok && want_v < 0) CHECK_ERR(rlx_meta_as_u64(v, NULL), RLX_ERR_DTYPE, "does not fit u64");
    CHECK(ok, "%s: %lld, want %s", ctx, (long long)got, tok);
    break;
  }
  }
  return ok;
}

/* ---------------------------------------------------------------- tensors */

/* The values of the first `rows` rows of t (all if rows <= 0) as float32
 * — dequantized for block dtypes, cast otherwise — computed by a session
 * that borrows the mapped bytes (rlx_set_param_ref, as a model builder
 * does, or copies them where they are not aligned to the element size),
 * against the reference values in expect_file. */
static void check_values(const rlx_file_tensor *t, int64_t rows, const char *expect_file, const char *ctx) {
  int64_t dims[RLX_MAX_RANK];
  int rank = t->rank;
  memcpy(dims, t->dims, sizeof dims);
  if (rows > 0) rank = 2, dims[0] = rows, dims[1] = t->dims[t->rank - 1];
  int64_t numel = 1;
  for (int d = 0; d < rank; d++) numel *= dims[d];
  size_t nbytes = rlx_dtype_nbytes(t->dtype, numel), want_len = 0;
  float *want = read_work(expect_file, &want_len), *got = malloc((size_t)numel * sizeof *got + 1);
  rlx_graph *g = rlx_graph_new("values");
  rlx_node w = rlx_param(g, "w", t->dtype, rank, dims);
  rlx_node y = rlx_dtype_is_block(t->dtype) ? rlx_dequantize(g, w) : rlx_cast(g, w, RLX_F32);
  rlx_graph_set_outputs(g, 1, &y);
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, NULL, &s);
  /* Borrowed when aligned to the element size, as a model builder does;
   * otherwise copied (kernels read plain dtypes as C arrays). */
  const size_t elem = rlx_dtype_is_block(t->dtype) ? 1 : rlx_dtype_nbytes(t->dtype, 1);
  const int aligned = (uintptr_t)t->data % elem == 0;
  if (!st) st = aligned ? rlx_set_param_ref(s, "w", t->data, nbytes) : rlx_set_param(s, "w", t->data, nbytes);
  if (!st) st = rlx_run(s);
  if (!st && numel) st = rlx_output(s, 0, got, (size_t)numel * sizeof *got);
  CHECK(st == RLX_OK, "%s: values: %s", ctx, rlx_last_error());
  CHECK(want && want_len == (size_t)numel * sizeof *want, "%s: reference %s has %zu bytes", ctx, expect_file,
        want_len);
  if (!st && want && want_len == (size_t)numel * sizeof *want) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < numel; i++) {
      /* Exact: ggml's dequantizers and gguf's NumPy ports do the same
       * float32 operations in the same order, and conversions to float32
       * round the same way. */
      if (!(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])))) {
        if (first < 0) first = i;
        bad++;
      }
    }
    CHECK(!bad, "%s: %lld of %lld values differ, first at %lld: %.9g vs %.9g", ctx, (long long)bad,
          (long long)numel, (long long)first, first >= 0 ? got[first] : 0, first >= 0 ? want[first] : 0);
  }
  rlx_session_free(s);
  rlx_graph_free(g);
  free(want);
  free(got);
}

/* "tensor NAMEHEX TYPENAME DTYPE RANK DIMS OFFSET NBYTES RAWFILE F32FILE" against tensor i. */
static void check_tensor(rlx_model_file *f, int64_t i, char *line, const char *file) {
  char namehex[512], type[32], dtype[16], dims_s[256], raw[256], values[256];
  int rank;
  unsigned long long offset, nbytes;
  if (sscanf(line, "%511s %31s %15s %d %255s %llu %llu %255s %255s", namehex, type, dtype, &rank, dims_s, &offset,
             &nbytes, raw, values) != 9) {
    CHECK(0, "%s: bad tensor line %s", file, line);
    return;
  }
  char name[256], ctx[400];
  unhex(namehex, name);
  snprintf(ctx, sizeof ctx, "%.64s: tensor %lld '%.200s'", file, (long long)i, name);
  rlx_file_tensor t, by_name;
  if (rlx_model_file_tensor(f, i, &t) != RLX_OK) {
    CHECK(0, "%s: %s", ctx, rlx_last_error());
    return;
  }
  CHECK(!strcmp(t.name, name), "%s: named '%s'", ctx, t.name);
  CHECK(rlx_model_file_find_tensor(f, name, &by_name) == RLX_OK && by_name.data == t.data, "%s: find: %s", ctx,
        rlx_last_error());
  CHECK(!strcmp(t.type_name, type), "%s: type %s, want %s", ctx, t.type_name, type);
  rlx_dtype want_dtype = RLX_DTYPE_COUNT;
  int supported = dtype_of(dtype, &want_dtype);
  CHECK(t.supported == supported && t.dtype == want_dtype, "%s: supported %d dtype %s, want %s", ctx, t.supported,
        rlx_dtype_name(t.dtype), dtype);
  int64_t numel = 1, want_dims[RLX_MAX_RANK] = {0};
  char *p = dims_s;
  for (int d = 0; d < rank && d < RLX_MAX_RANK; d++) {
    want_dims[d] = strtoll(p, &p, 10);
    numel *= want_dims[d];
    if (*p == ',') p++;
  }
  CHECK(t.rank == rank && !memcmp(t.dims, want_dims, sizeof(int64_t) * (size_t)rank) && t.numel == numel,
        "%s: rank %d dims [%lld, ...] numel %lld, want rank %d [%s]", ctx, t.rank, (long long)t.dims[0],
        (long long)t.numel, rank, dims_s);
  CHECK(t.offset == offset && t.nbytes == nbytes, "%s: offset %llu nbytes %zu, want %llu %llu", ctx,
        (unsigned long long)t.offset, t.nbytes, offset, nbytes);
  CHECK(t.offset % rlx_model_file_alignment(f) == 0, "%s: offset %llu not aligned", ctx, (unsigned long long)t.offset);
  if (t.supported) CHECK(rlx_dtype_nbytes(t.dtype, t.numel) == t.nbytes, "%s: nbytes disagrees with the dtype", ctx);
  size_t raw_len;
  char *want = read_work(raw, &raw_len);
  CHECK(want && raw_len == t.nbytes && (!raw_len || !memcmp(t.data, want, raw_len)), "%s: data differs", ctx);
  free(want);
  if (strcmp(values, "-")) check_values(&t, 0, values, ctx);
}

/* ---------------------------------------------------------------- manifest sections */

/* A "file NAME" block up to "end". */
static void check_file_block(char **save, const char *file) {
  rlx_model_file *f = NULL;
  rlx_status st = rlx_model_file_open(work_path(file), &f);
  CHECK(st == RLX_OK && f, "%s: open: %s", file, rlx_last_error());
  int64_t meta_i = 0, tensor_i = 0;
  for (char *line = strtok_r(NULL, "\n", save); line && strcmp(line, "end"); line = strtok_r(NULL, "\n", save)) {
    if (!f) continue;
    unsigned long long v;
    if (sscanf(line, "version %llu", &v) == 1)
      CHECK(rlx_model_file_version(f) == v, "%s: version %u, want %llu", file, rlx_model_file_version(f), v);
    else if (sscanf(line, "alignment %llu", &v) == 1)
      CHECK(rlx_model_file_alignment(f) == v, "%s: alignment %llu, want %llu", file,
            (unsigned long long)rlx_model_file_alignment(f), v);
    else if (sscanf(line, "data_offset %llu", &v) == 1)
      CHECK(rlx_model_file_data_offset(f) == v, "%s: data offset %llu, want %llu", file,
            (unsigned long long)rlx_model_file_data_offset(f), v);
    else if (sscanf(line, "n_meta %llu", &v) == 1)
      CHECK(rlx_meta_count(f) == (int64_t)v, "%s: %lld keys, want %llu", file, (long long)rlx_meta_count(f), v);
    else if (sscanf(line, "n_tensors %llu", &v) == 1)
      CHECK(rlx_model_file_num_tensors(f) == (int64_t)v, "%s: %lld tensors, want %llu", file,
            (long long)rlx_model_file_num_tensors(f), v);
    else if (!strncmp(line, "meta ", 5)) {
      char *cur = line + 5, *keyhex = next_tok(&cur), *type = next_tok(&cur);
      char key[4096], ctx[256];
      unhex(keyhex, key);
      snprintf(ctx, sizeof ctx, "%.64s: metadata %lld '%.128s'", file, (long long)meta_i, key);
      rlx_meta_value val;
      const char *k = rlx_meta_key(f, meta_i, &val);
      CHECK(k && !strcmp(k, key), "%s: key '%s'", ctx, k ? k : "(none)");
      CHECK(rlx_meta_find(f, key) == meta_i, "%s: find gives %lld", ctx, (long long)rlx_meta_find(f, key));
      if (k) check_value(&val, type, &cur, ctx);
      meta_i++;
    } else if (!strncmp(line, "tensor ", 7)) {
      check_tensor(f, tensor_i++, line + 7, file);
    } else {
      CHECK(0, "%s: bad manifest line %s", file, line);
    }
  }
  rlx_model_file_close(f);
}

static void check_bad(const char *line) {
  char file[256], status[64];
  int n = 0;
  if (sscanf(line, "%255s %63s %n", file, status, &n) != 2) {
    CHECK(0, "bad manifest line %s", line);
    return;
  }
  const char *needle = line + n;
  rlx_model_file *f = (rlx_model_file *)1;
  rlx_status st = rlx_model_file_open(work_path(file), &f);
  int ok = st != RLX_OK && !strcmp(rlx_status_name(st), status) && strstr(rlx_last_error(), needle) &&
           strstr(rlx_last_error(), file) && f == NULL;
  CHECK(ok, "%s: got %s \"%s\", want %s with \"%s\"", file, rlx_status_name(st), rlx_last_error(), status, needle);
  if (st == RLX_OK) rlx_model_file_close(f);
  /* The same bytes from memory. */
  size_t len;
  void *data = read_work(file, &len), *copy = malloc(len ? len : 1);
  if (data && copy) {
    memcpy(copy, data, len);
    st = rlx_model_file_open_memory(copy, len, &f);
    CHECK(!strcmp(rlx_status_name(st), status) && strstr(rlx_last_error(), needle), "%s from memory: %s %s", file,
          rlx_status_name(st), rlx_last_error());
    if (st == RLX_OK) rlx_model_file_close(f);
  }
  free(data);
  free(copy);
}

/* Every prefix shorter than valid_from fails with RLX_ERR_FORMAT; the
 * longer ones (cut inside the final padding) open. Each prefix is copied
 * into a heap block of exactly its size, so ASan reports any overread. */
static void check_truncations(const char *file, size_t valid_from) {
  size_t len;
  char *data = read_work(file, &len);
  if (!data) {
    CHECK(0, "%s: cannot read", file);
    return;
  }
  int64_t bad = 0;
  for (size_t k = 0; k <= len; k++) {
    char *copy = malloc(k ? k : 1);
    memcpy(copy, data, k);
    rlx_model_file *f = NULL;
    rlx_status st = rlx_model_file_open_memory(copy, k, &f);
    int want_ok = k >= valid_from;
    if (want_ok ? st != RLX_OK : st != RLX_ERR_FORMAT || !rlx_last_error()[0]) {
      if (bad++ < 5) CHECK(0, "%s cut at %zu: %s %s", file, k, rlx_status_name(st), rlx_last_error());
    }
    rlx_model_file_close(f);
    free(copy);
  }
  CHECK(!bad, "%s: %lld of %zu prefixes misjudged", file, (long long)bad, len + 1);
  free(data);
}

/* ---------------------------------------------------------------- rlx info */

/* `rlx info [options] path` exits 0 and prints every needle. */
static void check_info_with(const char *options, const char *path, const char *const *needles) {
  char cmd[2048];
  int status = -1;
  snprintf(cmd, sizeof cmd, "'%s' info %s '%s' 2>&1", rlx_bin, options, path);
  char *out = run_capture(cmd, &status);
  CHECK(out && status == 0, "rlx info %s: exit %d\n%s", path, status, out ? out : "");
  for (int i = 0; out && needles[i]; i++) CHECK(strstr(out, needles[i]), "rlx info %s: no \"%s\"", path, needles[i]);
  free(out);
}

static void check_info(const char *path, const char *const *needles) { check_info_with("", path, needles); }

/* ---------------------------------------------------------------- the driver */

/* usage: TEST PYTHON REF_DIR WORK_DIR RLX_BIN [ARG]: runs
 * REF_DIR/SCRIPT --out WORK_DIR [ARG], then every manifest line: "file",
 * "bad" and "truncate" here, the others through other_line (returns 0 for
 * a line it does not know). */
static int format_test_main(int argc, char **argv, const char *script,
                            int (*other_line)(char *line, char **save)) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR WORK_DIR RLX_BIN [ARG]\n", argv[0]);
    return 2;
  }
  work_dir = argv[3];
  rlx_bin = argv[4];
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && '%s' '%s/%s' --out '%s' %s", work_dir, argv[1], argv[2], script, work_dir,
           argc > 5 ? argv[5] : "");
  if (system(cmd) != 0) {
    fprintf(stderr, "generating the test files failed: %s\n", cmd);
    return 1;
  }
  char *man = read_work("manifest.txt", NULL);
  if (!man) {
    fprintf(stderr, "no manifest in %s\n", work_dir);
    return 1;
  }
  char *save = NULL;
  for (char *line = strtok_r(man, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char name[256];
    unsigned long long n;
    if (!strncmp(line, "file ", 5)) {
      snprintf(name, sizeof name, "%s", line + 5);
      check_file_block(&save, name);
      manifest_files++;
    } else if (!strncmp(line, "bad ", 4)) {
      check_bad(line + 4);
      manifest_bad_files++;
    } else if (sscanf(line, "truncate %255s %llu", name, &n) == 2) {
      check_truncations(name, (size_t)n);
    } else if (!other_line(line, &save)) {
      CHECK(0, "bad manifest line: %s", line);
    }
  }
  free(man);
  printf("%d valid files, %d bad files\n", manifest_files, manifest_bad_files);
  return 0;
}

#endif /* RLX_FORMAT_CHECK_H */
