/* cmd_info.c — `rlx info MODEL.gguf|MODEL.safetensors [--full]`: the file's
 * layout, the model as rlx generate would build it (a GGUF), the bytes per
 * tensor type, its metadata (long strings and arrays abbreviated unless
 * --full) and its tensor table. */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SHORT_STRING 64   /* bytes of a string shown before "..." */
#define SHORT_ARRAY 5     /* elements of an array shown before "..." */

#define NAME_CAP 1024   /* bytes of an escaped key or tensor name shown */

static int full_output;

/* A string in double quotes: control bytes, quotes and invalid UTF-8
 * escaped; abbreviated past SHORT_STRING bytes. */
static void print_string(const char *s, size_t len) {
  size_t shown = !full_output && len > SHORT_STRING ? SHORT_STRING - 4 : len;
  putchar('"');
  cli_put_escaped(stdout, s, shown, 1);
  putchar('"');
  if (shown < len) printf("... (%zu bytes)", len);
}

/* The shortest form that reads back as the same f32 / f64. */
static void print_float(double d, int is_f32) {
  char buf[40];
  for (int prec = is_f32 ? 6 : 15;; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, d);
    double back = strtod(buf, NULL);
    if (prec >= (is_f32 ? 9 : 17) || (is_f32 ? (float)back == (float)d : back == d)) break;
  }
  fputs(buf, stdout);
}

static void print_value(const rlx_meta_value *v, int depth);

static void print_array(const rlx_meta_value *v, int depth) {
  uint64_t shown = !full_output && v->count > SHORT_ARRAY ? SHORT_ARRAY : v->count;
  /* Nested arrays show fewer elements: the line stays readable. */
  if (!full_output && depth > 0 && shown > 3) shown = 3;
  putchar('[');
  for (uint64_t i = 0; i < shown; i++) {
    rlx_meta_value e;
    if (i) fputs(", ", stdout);
    if (rlx_meta_elem(v, i, &e) == RLX_OK) print_value(&e, depth + 1);
    else fputs("?", stdout);
  }
  if (shown < v->count) printf("%s... %" PRIu64 " more", shown ? ", " : "", v->count - shown);
  putchar(']');
}

static void print_value(const rlx_meta_value *v, int depth) {
  const char *s;
  size_t len;
  int b;
  uint64_t u;
  int64_t i;
  double d;
  if (v->type == RLX_META_ARRAY) print_array(v, depth);
  else if (rlx_meta_as_string(v, &s, &len) == RLX_OK) print_string(s, len);
  else if (rlx_meta_as_bool(v, &b) == RLX_OK) fputs(b ? "true" : "false", stdout);
  else if (v->type == RLX_META_F32 || v->type == RLX_META_F64) {
    if (rlx_meta_as_f64(v, &d) == RLX_OK) print_float(d, v->type == RLX_META_F32);
  } else if (rlx_meta_as_u64(v, &u) == RLX_OK) printf("%" PRIu64, u);
  else if (rlx_meta_as_i64(v, &i) == RLX_OK) printf("%" PRId64, i);
  else fputs("?", stdout);
}

/* "u32", "string[49152]", "array[3]" */
static void type_label(const rlx_meta_value *v, char *buf, size_t cap) {
  if (v->type == RLX_META_ARRAY)
    snprintf(buf, cap, "%s[%" PRIu64 "]", rlx_meta_type_name(v->elem_type), v->count);
  else
    snprintf(buf, cap, "%s", rlx_meta_type_name(v->type));
}

static void shape_label(const rlx_file_tensor *t, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int d = 0; d < t->rank && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, d ? ", " : "", t->dims[d]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

static void print_bytes(uint64_t n) {
  printf("%" PRIu64 " bytes", n);
  if (n >= 1024 * 1024) printf(" (%.1f MiB)", (double)n / (1024.0 * 1024.0));
  else if (n >= 1024) printf(" (%.1f KiB)", (double)n / 1024.0);
}

/* The decoder rlx generate would build from a GGUF, or why it would not. */
static void print_model_info(const rlx_llm_info *m) {
  const rlx_llm_info mi = *m;
  char arch[sizeof mi.arch * 4];
  printf("  %s: %lld layers, embedding %lld, feed-forward %lld, %lld heads of %lld (%lld kv heads), vocab %lld\n",
         cli_escape(mi.arch, arch, sizeof arch), (long long)mi.n_layer, (long long)mi.n_embd, (long long)mi.n_ff,
         (long long)mi.n_head, (long long)mi.head_dim, (long long)mi.n_head_kv, (long long)mi.n_vocab);
  printf("  context: trained %lld; rlx generate's default %lld (KV cache %.1f MiB as f32, %.1f MiB as f16)\n",
         (long long)mi.n_ctx_train, (long long)mi.n_ctx, (double)mi.kv_cache_bytes / 1048576.0,
         (double)mi.kv_cache_bytes / 2097152.0);
  /* llama.cpp's default type is linear: with factor 1 it scales nothing */
  const int scaled = mi.rope_freq_scale != 1.0f || !strcmp(mi.rope_scaling, "yarn");
  printf("  rope: base %g, scaling %s", (double)mi.rope_base, scaled ? mi.rope_scaling : "none");
  if (scaled) printf(" (factor %g)", 1.0 / (double)mi.rope_freq_scale);
  printf("%s; rms epsilon %g\n", mi.rope_freq_factors ? ", frequency factors (rope_freqs.weight)" : "",
         (double)mi.norm_eps);
  printf("  weights used: ");
  print_bytes(mi.weight_bytes);
  putchar('\n');
}

static void print_model(const rlx_model_file *f) {
  rlx_llm_info mi;
  printf("\nmodel (as rlx generate builds it):\n");
  if (rlx_llm_describe(f, &mi) != RLX_OK) {
    char msg[4096];
    printf("  not runnable: %s\n", cli_escape(rlx_last_error(), msg, sizeof msg));
    return;
  }
  print_model_info(&mi);
}

static void print_metadata(const rlx_model_file *f) {
  const int64_t n_meta = rlx_meta_count(f);
  printf("\nmetadata (%" PRId64 " keys):\n", n_meta);
  size_t key_w = 0;
  for (int64_t i = 0; i < n_meta; i++) {
    char key[NAME_CAP];
    size_t l = strlen(cli_escape(rlx_meta_key(f, i, NULL), key, sizeof key));
    if (l > key_w) key_w = l;
  }
  if (key_w > 48) key_w = 48;
  for (int64_t i = 0; i < n_meta; i++) {
    rlx_meta_value v;
    char type[48], key[NAME_CAP];
    cli_escape(rlx_meta_key(f, i, &v), key, sizeof key);
    type_label(&v, type, sizeof type);
    printf("  %-*s  %-14s ", (int)key_w, key, type);
    print_value(&v, 0);
    putchar('\n');
  }
}

/* A Hugging Face decoder folder: the model rlx generate loads from it and
 * the GGUF metadata it is read as. */
static int print_folder(const char *path) {
  rlx_llm *m = NULL;
  rlx_llm_info mi;
  rlx_status st = rlx_llm_open(path, NULL, &m);
  if (!st) st = rlx_llm_get_info(m, &mi);
  if (st) {
    rlx_llm_free(m);
    return cli_fail(st, "info");
  }
  char name[NAME_CAP];
  printf("folder:      %s\n", cli_escape(path, name, sizeof name));
  printf("format:      Hugging Face (config.json, safetensors, tokenizer.json), read as GGUF metadata\n");
  printf("\nmodel (as rlx generate builds it):\n");
  print_model_info(&mi);
  print_metadata(rlx_llm_file(m));
  rlx_llm_free(m);
  return 0;
}

/* Tensor count and bytes per type, in order of first appearance. */
static void print_type_summary(const rlx_model_file *f, int64_t n_tensors) {
  enum { MAX_TYPES = 64 };
  const char *names[MAX_TYPES];
  int64_t count[MAX_TYPES];
  uint64_t bytes[MAX_TYPES];
  int n = 0;
  for (int64_t i = 0; i < n_tensors; i++) {
    rlx_file_tensor t;
    rlx_model_file_tensor(f, i, &t);
    int k = 0;
    while (k < n && strcmp(names[k], t.type_name)) k++;
    if (k == n) {
      if (n == MAX_TYPES) continue;
      names[n] = t.type_name, count[n] = 0, bytes[n] = 0, n++;
    }
    count[k]++, bytes[k] += t.nbytes;
  }
  printf("\ntensor types:\n");
  for (int k = 0; k < n; k++) {
    printf("  %-8s %6" PRId64 " tensors, ", names[k], count[k]);
    print_bytes(bytes[k]);
    putchar('\n');
  }
}

static int print_file(const char *path) {
  rlx_model_file *f = NULL;
  rlx_status st = rlx_model_file_open(path, &f);
  if (st) return cli_fail(st, "info");
  const int64_t n_tensors = rlx_model_file_num_tensors(f);
  int64_t unsupported = 0;
  uint64_t data_bytes = 0;
  size_t name_w = 4, type_w = 4, shape_w = 5;
  for (int64_t i = 0; i < n_tensors; i++) {
    rlx_file_tensor t;
    char shape[256];
    rlx_model_file_tensor(f, i, &t);
    unsupported += !t.supported;
    data_bytes += t.nbytes;
    shape_label(&t, shape, sizeof shape);
    char name[NAME_CAP];
    if (strlen(cli_escape(t.name, name, sizeof name)) > name_w) name_w = strlen(name);
    if (strlen(t.type_name) + !t.supported > type_w) type_w = strlen(t.type_name) + !t.supported;
    if (strlen(shape) > shape_w) shape_w = strlen(shape);
  }
  if (name_w > 60) name_w = 60;

  printf("file:        %s\n", path);
  printf("format:      %s", rlx_file_format_name(rlx_model_file_format(f)));
  if (rlx_model_file_format(f) == RLX_FILE_GGUF) printf(" v%u, little-endian", rlx_model_file_version(f));
  printf("\nsize:        ");
  print_bytes(rlx_model_file_size(f));
  printf("\nalignment:   %" PRIu64 "\n", rlx_model_file_alignment(f));
  printf("tensor data: from offset %" PRIu64 ", ", rlx_model_file_data_offset(f));
  print_bytes(data_bytes);
  printf(" in %" PRId64 " tensors", n_tensors);
  if (unsupported) printf(" (%" PRId64 " of a type rlx does not support, marked *)", unsupported);
  putchar('\n');
  if (rlx_model_file_format(f) == RLX_FILE_GGUF && rlx_meta_find(f, "general.architecture") >= 0) print_model(f);
  print_type_summary(f, n_tensors);
  print_metadata(f);

  printf("\ntensors (%" PRId64 "; shapes outermost first", n_tensors);
  if (rlx_model_file_format(f) == RLX_FILE_GGUF) printf(", i.e. GGUF's ne reversed");
  printf("):\n  %-6s %-*s  %-*s  %-*s  %12s  %12s\n", "#", (int)name_w, "name", (int)type_w, "type", (int)shape_w,
         "shape", "offset", "bytes");
  for (int64_t i = 0; i < n_tensors; i++) {
    rlx_file_tensor t;
    char shape[256], type[40], name[NAME_CAP];
    rlx_model_file_tensor(f, i, &t);
    cli_escape(t.name, name, sizeof name);
    shape_label(&t, shape, sizeof shape);
    snprintf(type, sizeof type, "%s%s", t.type_name, t.supported ? "" : "*");
    printf("  %-6" PRId64 " %-*s  %-*s  %-*s  %12" PRIu64 "  %12zu\n", i, (int)name_w, name, (int)type_w, type,
           (int)shape_w, shape, t.offset, t.nbytes);
  }
  if (unsupported) printf("  * a type rlx cannot compute with (the tensor is listed and its data located)\n");
  rlx_model_file_close(f);
  return 0;
}

static const char *usage =
    "usage: rlx info MODEL.gguf|MODEL.safetensors|FOLDER [--full]\n"
    "\n"
    "Prints a model file: its layout; for a GGUF of an architecture rlx generate\n"
    "runs (llama / SmolLM2, qwen2, qwen3), the model it builds (sizes, context,\n"
    "KV cache, RoPE scaling, weight memory) or why it cannot; the bytes per\n"
    "tensor type; every metadata key; the tensor table. A Hugging Face decoder\n"
    "folder: the model and the GGUF metadata rlx reads it as.\n"
    "\n"
    "  --full       print long strings and arrays whole (default: abbreviated)\n"
    "  -h, --help   print this help\n";

int cmd_info(int argc, char **argv) {
  const char *path = NULL;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      fputs(usage, stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--full")) full_output = 1;
    else if (!path && argv[i][0] != '-') path = argv[i];
    else {
      fprintf(stderr, "rlx info: unexpected argument '%s'\n%s", argv[i], usage);
      return 2;
    }
  }
  if (!path) {
    fputs(usage, stderr);
    return 2;
  }
  size_t len = strlen(path);
  if (len > 5 && !strcmp(path + len - 5, ".onnx")) return cmd_model_info(path);
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return print_folder(path);
  return print_file(path);
}
