/* cmd_run.c — `rlx run MODEL.onnx`: run a model file on .npy or random
 * inputs, write its outputs as .npy, time it; and `rlx info MODEL.onnx`. */
#include "cli.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *usage =
    "usage: rlx run MODEL.onnx [-i NAME=FILE.npy]... [-o DIR] [--bind SYM=N]...\n"
    "               [--runs N] [--threads N] [--device cpu|cuda|cuda:N]\n"
    "  -i NAME=FILE.npy   an input's value (others: random data of their declared\n"
    "                     type; unbound symbolic dims are 1)\n"
    "  -o DIR             write each output to DIR/<output name>.npy (DIR is made\n"
    "                     if missing; characters\n"
    "                     other than letters, digits, '.', '_', '-' become '_')\n"
    "  --bind SYM=N       fix a symbolic dim at load (folds shape computations)\n"
    "  --runs N           run N times, print latency median/min/max (default 1)\n"
    "  --threads N        CPU threads (default: all cores)\n"
    "  --device cpu|cuda|cuda:N  (default cpu; cuda:N the GPU of index N)\n";

/* ---------------------------------------------------------------- .npy */

static const struct { const char *descr; rlx_dtype t; } npy_types[] = {
  {"<f4", RLX_F32}, {"<f2", RLX_F16}, {"<f8", RLX_F64}, {"|i1", RLX_I8}, {"|u1", RLX_U8},
  {"<i4", RLX_I32}, {"<i8", RLX_I64}, {"|b1", RLX_BOOL},
};

typedef struct { rlx_dtype t; int rank; int64_t dims[RLX_MAX_RANK]; char *buf; const void *data; size_t nbytes; } npy;

static rlx_status npy_read(const char *path, npy *a) {
  size_t len;
  memset(a, 0, sizeof *a);
  if (!(a->buf = cli_read_file(path, &len))) return rlx_set_error(RLX_ERR_IO, "%s: cannot read", path);
  const unsigned char *p = (const unsigned char *)a->buf;
  if (len < 10 || memcmp(p, "\x93NUMPY", 6)) return rlx_set_error(RLX_ERR_FORMAT, "%s: not a .npy file", path);
  size_t hl = p[6] == 1 ? (size_t)(p[8] | p[9] << 8) : len >= 12 ? (size_t)(p[8] | p[9] << 8 | p[10] << 16 | (size_t)p[11] << 24) : len;
  size_t off = p[6] == 1 ? 10 : 12;
  if (hl > len - off) return rlx_set_error(RLX_ERR_FORMAT, "%s: a header of %zu bytes past the end", path, hl);
  char hdr[1024];
  if (hl >= sizeof hdr) return rlx_set_error(RLX_ERR_FORMAT, "%s: a header of %zu bytes", path, hl);
  memcpy(hdr, p + off, hl);
  hdr[hl] = 0;
  const char *d = strstr(hdr, "'descr':"), *f = strstr(hdr, "'fortran_order':"), *s = strstr(hdr, "'shape':");
  if (!d || !f || !s) return rlx_set_error(RLX_ERR_FORMAT, "%s: a header without descr/fortran_order/shape", path);
  if (strncmp(f + 16, " False", 6)) return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: Fortran order", path);
  d = strchr(d + 8, '\'');
  int found = 0;
  for (size_t i = 0; d && i < sizeof npy_types / sizeof *npy_types; i++)
    if (!strncmp(d + 1, npy_types[i].descr, 3) && d[4] == '\'') a->t = npy_types[i].t, found = 1;
  if (!found) return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: an element type rlx does not read (%.12s)", path, d ? d : "?");
  s = strchr(s, '(');
  if (!s) return rlx_set_error(RLX_ERR_FORMAT, "%s: a bad shape", path);
  s++;
  int64_t numel = 1;
  while (*s && *s != ')') {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s) { s++; continue; }
    if (a->rank == RLX_MAX_RANK || v < 0 || (v && numel > INT64_MAX / v)) return rlx_set_error(RLX_ERR_FORMAT, "%s: a bad shape", path);
    a->dims[a->rank++] = v;
    numel *= v;
    s = end;
  }
  a->nbytes = rlx_dtype_nbytes(a->t, numel);
  if (a->nbytes != len - off - hl) return rlx_set_error(RLX_ERR_FORMAT, "%s: %zu data bytes for %lld elements", path, len - off - hl, (long long)numel);
  a->data = p + off + hl;
  return RLX_OK;
}

static rlx_status npy_write(const char *path, rlx_dtype t, int rank, const int64_t *dims, const void *data, size_t nbytes) {
  const char *descr = NULL;
  for (size_t i = 0; i < sizeof npy_types / sizeof *npy_types; i++)
    if (npy_types[i].t == t) descr = npy_types[i].descr;
  if (!descr) return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: dtype %s has no .npy type", path, rlx_dtype_name(t));
  char hdr[256];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < rank; i++) n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%lld,%s", (long long)dims[i], i + 1 < rank ? " " : "");
  n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
  int total = (10 + n + 1 + 63) / 64 * 64;   /* header padded with spaces, ending in \n */
  FILE *f = fopen(path, "wb");
  if (!f) return rlx_set_error(RLX_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)((total - 10) & 0xff), (unsigned char)((total - 10) >> 8)};
  fwrite(pre, 1, 10, f);
  fwrite(hdr, 1, (size_t)n, f);
  for (int i = 10 + n; i < total - 1; i++) fputc(' ', f);
  fputc('\n', f);
  fwrite(data, 1, nbytes, f);
  if (fclose(f)) return rlx_set_error(RLX_ERR_IO, "%s: cannot write", path);
  return RLX_OK;
}

/* ---------------------------------------------------------------- helpers */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static void fill_random(rlx_dtype t, void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double u = urand();
    switch (t) {
    case RLX_F32: ((float *)p)[i] = (float)(2 * u - 1); break;
    case RLX_F64: ((double *)p)[i] = 2 * u - 1; break;
    case RLX_F16: ((uint16_t *)p)[i] = rlx_f32_to_f16((float)(2 * u - 1)); break;
    case RLX_BF16: ((uint16_t *)p)[i] = rlx_f32_to_bf16((float)(2 * u - 1)); break;
    case RLX_I32: ((int32_t *)p)[i] = (int32_t)(u * 10); break;
    case RLX_I64: ((int64_t *)p)[i] = (int64_t)(u * 10); break;
    case RLX_BOOL: ((uint8_t *)p)[i] = u < 0.5; break;
    default: ((uint8_t *)p)[i] = (uint8_t)(u * 10); break;
    }
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define MAX_ARGS 64

int cmd_run(int argc, char **argv) {
  const char *path = NULL, *out_dir = NULL, *in_names[MAX_ARGS], *in_files[MAX_ARGS], *bind_names[MAX_ARGS];
  int64_t bind_values[MAX_ARGS];
  int n_in = 0, n_bind = 0, runs = 1;
  rlx_options opt = {.device = RLX_DEVICE_CPU};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return 0;
    }
    int takes = !strcmp(a, "-i") || !strcmp(a, "-o") || !strcmp(a, "--bind") || !strcmp(a, "--runs") ||
                !strcmp(a, "--threads") || !strcmp(a, "--device");
    if (takes && !v) {
      fprintf(stderr, "rlx run: %s needs a value\n%s", a, usage);
      return 2;
    }
    char *eq = v ? strchr(v, '=') : NULL;
    if ((!strcmp(a, "-i") || !strcmp(a, "--bind")) && (!eq || eq == v || n_in >= MAX_ARGS || n_bind >= MAX_ARGS)) {
      fprintf(stderr, "rlx run: %s wants NAME=VALUE (at most %d)\n", a, MAX_ARGS);
      return 2;
    }
    if (!strcmp(a, "-i")) *eq = 0, in_names[n_in] = v, in_files[n_in++] = eq + 1;
    else if (!strcmp(a, "--bind")) {
      *eq = 0;
      bind_names[n_bind] = v;
      bind_values[n_bind] = strtoll(eq + 1, NULL, 10);
      if (bind_values[n_bind++] <= 0) {
        fprintf(stderr, "rlx run: --bind %s needs a value > 0\n", v);
        return 2;
      }
    } else if (!strcmp(a, "-o")) out_dir = v;
    else if (!strcmp(a, "--runs")) runs = atoi(v);
    else if (!strcmp(a, "--threads")) opt.threads = atoi(v);
    else if (!strcmp(a, "--device")) {
      if (rlx_device_parse(v, &opt.device, &opt.device_index)) {
        fprintf(stderr, "rlx run: --device: %s\n", rlx_last_error());
        return 2;
      }
    } else if (!path && a[0] != '-') {
      path = a;
      continue;
    } else {
      fprintf(stderr, "rlx run: unexpected argument '%s'\n%s", a, usage);
      return 2;
    }
    i++;
  }
  if (!path || runs < 1) {
    fputs(usage, stderr);
    return 2;
  }
  rlx_model_options mo = {.n_bind = n_bind, .bind_names = bind_names, .bind_values = bind_values};
  rlx_model *m;
  rlx_session *s = NULL;
  rlx_status st = rlx_model_load(path, &mo, &m);
  if (st) return cli_fail(st, path);
  int rc = 0;
  npy arrays[MAX_ARGS];
  void *random_bufs[MAX_ARGS];
  int n_random = 0;
  memset(arrays, 0, sizeof arrays);
  if ((st = rlx_model_compile(m, &opt, &s))) {
    rc = cli_fail(st, path);
    goto done;
  }
  for (int i = 0; i < n_in; i++) {
    int found = 0;
    for (int k = 0; k < rlx_model_num_inputs(m); k++) found |= !strcmp(rlx_model_input_name(m, k), in_names[i]);
    if (!found) {
      rc = cli_fail(rlx_set_error(RLX_ERR_INVALID, "the model has no input named %s", in_names[i]), "-i");
      goto done;
    }
  }
  for (int k = 0; k < rlx_model_num_inputs(m) && k < MAX_ARGS; k++) {
    const char *name = rlx_model_input_name(m, k);
    int given = -1;
    for (int i = 0; i < n_in; i++)
      if (!strcmp(in_names[i], name)) given = i;
    rlx_dtype t;
    int64_t dims[RLX_MAX_RANK];
    int rank = rlx_model_input_type(m, k, &t, dims);
    if (given >= 0) {
      if ((st = npy_read(in_files[given], &arrays[given])) ||
          (st = rlx_set_input_shaped(s, name, arrays[given].data, arrays[given].nbytes, arrays[given].rank, arrays[given].dims))) {
        rc = cli_fail(st, in_files[given]);
        goto done;
      }
      continue;
    }
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) {
      if (dims[d] < 0) {   /* symbolic: its --bind value, else 1 */
        const char *sym = rlx_model_dim_name(m, dims[d]);
        int64_t val = 1;
        for (int b = 0; sym && b < n_bind; b++)
          if (!strcmp(bind_names[b], sym)) val = bind_values[b];
        dims[d] = val;
      }
      numel *= dims[d];
    }
    size_t nb = rlx_dtype_nbytes(t, numel);
    void *buf = malloc(nb ? nb : 1);
    if (!buf) {
      rc = cli_fail(rlx_set_error(RLX_ERR_NOMEM, "%zu bytes of random input", nb), name);
      goto done;
    }
    random_bufs[n_random++] = buf;
    fill_random(t, buf, numel);
    if ((st = rlx_set_input_shaped(s, name, buf, nb, rank, dims))) {
      rc = cli_fail(st, name);
      goto done;
    }
  }
  double *times = calloc((size_t)runs, sizeof *times);
  if (!times) {
    rc = cli_fail(rlx_set_error(RLX_ERR_NOMEM, "out of memory"), "--runs");
    goto done;
  }
  for (int r = 0; r < runs && !st; r++) {
    double t0 = now_ms();
    st = rlx_run(s);
    times[r] = now_ms() - t0;
  }
  if (st) {
    free(times);
    rc = cli_fail(st, path);
    goto done;
  }
  if (out_dir && mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
    free(times);
    rc = cli_fail(rlx_set_error(RLX_ERR_IO, "%s: cannot create: %s", out_dir, strerror(errno)), "-o");
    goto done;
  }
  qsort(times, (size_t)runs, sizeof *times, cmp_double);
  printf("%s: %d run%s, latency ms: median %.3f  min %.3f  max %.3f\n", path, runs, runs > 1 ? "s" : "",
         times[runs / 2], times[0], times[runs - 1]);
  free(times);
  for (int i = 0; i < rlx_session_num_outputs(s); i++) {
    rlx_dtype t;
    int64_t dims[RLX_MAX_RANK], numel = 1;
    int rank = rlx_output_type(s, i, &t, dims);
    for (int d = 0; d < rank; d++) numel *= dims[d];
    size_t nb = rlx_dtype_nbytes(t, numel);
    const char *name = rlx_model_output_name(m, i);
    printf("output ");
    cli_put_escaped(stdout, name ? name : "?", strlen(name ? name : "?"), 0);
    printf(": %s[", rlx_dtype_name(t));
    for (int d = 0; d < rank; d++) printf("%s%lld", d ? "," : "", (long long)dims[d]);
    printf("]\n");
    if (!out_dir) continue;
    void *buf = malloc(nb ? nb : 1);
    size_t plen = strlen(out_dir) + (name ? strlen(name) : 1) + 8;
    char *file = malloc(plen);
    if (!buf || !file) st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
    if (!st) st = rlx_output(s, i, buf, nb);
    if (!st) {
      int k = snprintf(file, plen, "%s/", out_dir);
      for (const char *c = name ? name : "_"; *c; c++) {
        int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-';
        file[k++] = ok ? *c : '_';
      }
      memcpy(file + k, ".npy", 5);
      st = npy_write(file, t, rank, dims, buf, nb);
    }
    free(buf);
    free(file);
    if (st) {
      rc = cli_fail(st, "-o");
      goto done;
    }
  }
done:
  for (int i = 0; i < n_in; i++) free(arrays[i].buf);
  for (int i = 0; i < n_random; i++) free(random_bufs[i]);
  rlx_session_free(s);
  rlx_model_free(m);
  return rc;
}

int cmd_model_info(const char *path) {
  rlx_model *m;
  rlx_status st = rlx_model_load(path, NULL, &m);
  if (st) return cli_fail(st, path);
  char *text = rlx_model_summary(m);
  int rc = 0;
  if (!text) rc = cli_fail(rlx_set_error(RLX_ERR_NOMEM, "out of memory"), path);
  else   /* names come from the file: escaped, line by line */
    for (const char *line = text, *nl; *line; line = nl + 1) {
      nl = strchr(line, '\n');
      if (!nl) nl = line + strlen(line) - 1;
      cli_put_escaped(stdout, line, (size_t)(nl - line) + (*nl != '\n'), 0);
      fputc('\n', stdout);
    }
  free(text);
  rlx_model_free(m);
  return rc;
}
