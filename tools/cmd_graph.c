/* cmd_graph.c — `rlx graph check FILE` and `rlx graph run FILE`. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- random data */

static uint64_t rng_state = 1;

static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_uniform(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }

static double rng_normal(void) {
  double u = rng_uniform(), v = rng_uniform();
  return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* Element count (the library's checked arithmetic: -1 past RLX_MAX_TENSOR_BYTES). */
static int64_t numel_of(int rank, const int64_t *dims) { return rlx_shape_numel(rank, dims); }

/* Random values of a plain dtype: floats ~ N(0,1); integers in [0, 8)
 * (safe as indices of small tables); bools fair coins. */
static void fill_random(rlx_dtype t, void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double x = rng_normal();
    int64_t k = (int64_t)(rng_next() % 8);
    switch (t) {
    case RLX_F32: ((float *)p)[i] = (float)x; break;
    case RLX_F16: ((uint16_t *)p)[i] = rlx_f32_to_f16((float)x); break;
    case RLX_BF16: ((uint16_t *)p)[i] = rlx_f32_to_bf16((float)x); break;
    case RLX_F64: ((double *)p)[i] = x; break;
    case RLX_I8: ((int8_t *)p)[i] = (int8_t)k; break;
    case RLX_U8: ((uint8_t *)p)[i] = (uint8_t)k; break;
    case RLX_I32: ((int32_t *)p)[i] = (int32_t)k; break;
    case RLX_I64: ((int64_t *)p)[i] = k; break;
    case RLX_BOOL: ((uint8_t *)p)[i] = (uint8_t)(k & 1); break;
    default: break;
    }
  }
}

/* Random blocks of a GGUF block dtype: quantize random floats with rlx itself
 * (random bytes could hold NaN scales). */
static rlx_status random_blocks(rlx_dtype t, int rank, const int64_t *dims, void *dst, size_t nbytes) {
  int64_t n = numel_of(rank, dims);
  float *src = n < 0 ? NULL : malloc((size_t)(n ? n : 1) * sizeof *src);
  if (!src) return rlx_set_error(RLX_ERR_NOMEM, "rlx graph run: no memory for %lld random floats", (long long)n);
  fill_random(RLX_F32, src, n);
  rlx_graph *g = rlx_graph_new("random_blocks");
  rlx_node x = rlx_input(g, "x", RLX_F32, rank, dims);
  rlx_node q = rlx_quantize(g, x, t);
  rlx_graph_set_outputs(g, 1, &q);
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, NULL, &s);
  if (!st) st = rlx_set_input(s, "x", src, (size_t)n * sizeof *src);
  if (!st) st = rlx_run(s);
  if (!st) st = rlx_output(s, 0, dst, nbytes);
  rlx_session_free(s);
  rlx_graph_free(g);
  free(src);
  return st;
}

/* ---------------------------------------------------------------- output statistics */

static void print_dims(const rlx_graph *g, int rank, const int64_t *dims) {
  printf("[");
  for (int i = 0; i < rank; i++) {
    const char *sym = rlx_dim_name(g, dims[i]);
    char esc[256];
    if (sym) printf("%s%s", i ? "," : "", cli_escape(sym, esc, sizeof esc));
    else printf("%s%" PRId64, i ? "," : "", dims[i]);
  }
  printf("]");
}

static void print_stats(int index, rlx_dtype t, int rank, const int64_t *dims, const void *p) {
  int64_t n = numel_of(rank, dims);
  printf("output %d: %s", index, rlx_dtype_name(t));
  print_dims(NULL, rank, dims);
  if (rlx_dtype_is_block(t)) {
    printf("  (%zu bytes of blocks)\n", rlx_dtype_nbytes(t, n));
    return;
  }
  double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
  int64_t nonfinite = 0, finite = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = rlx_value_as_f64(t, p, i);
    if (!isfinite(v)) {
      nonfinite++;
      continue;
    }
    finite++;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    sum += v;
    sq += v * v;
  }
  double mean = finite ? sum / (double)finite : 0;
  double var = finite ? sq / (double)finite - mean * mean : 0;
  printf("  min %.6g  max %.6g  mean %.6g  std %.6g", finite ? lo : NAN, finite ? hi : NAN, mean,
         sqrt(var > 0 ? var : 0));
  if (nonfinite) printf("  non-finite %" PRId64, nonfinite);
  printf("\n  first:");
  for (int64_t i = 0; i < n && i < 8; i++) printf(" %.6g", rlx_value_as_f64(t, p, i));
  printf("%s\n", n > 8 ? " ..." : "");
}

/* ---------------------------------------------------------------- subcommands */

static rlx_status load_graph(const char *path, rlx_graph **g) {
  *g = NULL;
  char *text = cli_read_file(path, NULL);
  if (!text) return RLX_ERR_IO;
  rlx_status st = rlx_graph_from_text(text, g);
  free(text);
  return st;
}

static int graph_check(const char *path) {
  rlx_graph *g;
  rlx_status st = load_graph(path, &g);
  if (st == RLX_ERR_IO) return 1;
  if (st) return cli_fail(st, path);
  st = rlx_graph_verify(g);
  if (st) {
    rlx_graph_free(g);
    return cli_fail(st, path);
  }
  char *text = rlx_graph_to_text(g);
  if (!text) {
    rlx_graph_free(g);
    return cli_fail(rlx_set_error(RLX_ERR_NOMEM, "rlx graph check: out of memory printing the graph"), path);
  }
  /* "# ok" promises the printed text reads back: parse it again. */
  rlx_graph *again = NULL;
  st = rlx_graph_from_text(text, &again);
  rlx_graph_free(again);
  if (st) {
    free(text);
    rlx_graph_free(g);
    return cli_fail(st, "the graph as printed does not read back");
  }
  fputs(text, stdout);
  printf("# ok: %d nodes, %d inputs, %d params, %d outputs, hash %016" PRIx64 "\n", rlx_graph_num_nodes(g),
         rlx_graph_num_inputs(g), rlx_graph_num_params(g), rlx_graph_num_outputs(g), rlx_graph_hash(g));
  free(text);
  rlx_graph_free(g);
  return 0;
}

#define MAX_BINDS 32
typedef struct { const char *name; int64_t value; } bind_arg;

static int64_t bound_dim(const rlx_graph *g, int64_t d, const bind_arg *binds, int n_binds) {
  const char *sym = rlx_dim_name(g, d);
  if (!sym) return d;
  for (int i = 0; i < n_binds; i++)
    if (!strcmp(binds[i].name, sym)) return binds[i].value;
  return 4;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Binds every input and param of g in s to random data. */
static rlx_status bind_random(const rlx_graph *g, rlx_session *s, const bind_arg *binds, int n_binds) {
  for (int pass = 0; pass < 2; pass++) {
    /* one scan of the nodes (rlx_graph_input(g, i) scans too: a graph of
     * thousands of inputs would bind in quadratic time) */
    for (rlx_node n = 0; n < rlx_graph_num_nodes(g); n++) {
      if (strcmp(rlx_node_op_name(g, n), pass ? "Input" : "Param")) continue;
      rlx_dtype t;
      int64_t dims[RLX_MAX_RANK];
      int rank = rlx_node_type(g, n, &t, dims);
      for (int d = 0; d < rank; d++) dims[d] = bound_dim(g, dims[d], binds, n_binds);
      int64_t numel = numel_of(rank, dims);
      size_t nbytes = rlx_dtype_nbytes(t, numel);
      const char *name = rlx_node_name(g, n);
      if (numel < 0 || (nbytes == 0 && numel > 0)) {
        char shape[RLX_MAX_RANK * 24 + 2] = "[";
        for (int d = 0; d < rank; d++)
          snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%" PRId64, d ? "," : "", dims[d]);
        return rlx_set_error(RLX_ERR_SHAPE, "rlx graph run: %s \"%s\" bound as %s%s] is larger than the largest "
                             "tensor (RLX_MAX_TENSOR_BYTES, 2^40 elements or bytes)", pass ? "input" : "param", name,
                             rlx_dtype_name(t), shape);
      }
      void *buf = malloc(nbytes ? nbytes : 1);
      if (!buf)
        return rlx_set_error(RLX_ERR_NOMEM, "rlx graph run: no memory for %zu bytes of %s \"%s\"", nbytes,
                             pass ? "input" : "param", name);
      rlx_status st = RLX_OK;
      if (rlx_dtype_is_block(t)) st = random_blocks(t, rank, dims, buf, nbytes);
      else fill_random(t, buf, numel_of(rank, dims));
      if (!st)
        st = pass ? rlx_set_input_shaped(s, name, buf, nbytes, rank, dims) : rlx_set_param(s, name, buf, nbytes);
      free(buf);
      if (st) return st;
    }
  }
  return RLX_OK;
}

/* v as a whole decimal number in [lo, hi]; else a message naming the option and 0. */
static int parse_count(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    char esc[96];
    fprintf(stderr, "rlx graph run: %s: '%s' is not a whole number in %lld..%lld\n", opt, cli_escape(v, esc, sizeof esc),
            (long long)lo, (long long)hi);
    return 0;
  }
  *out = x;
  return 1;
}

static int graph_run(const char *path, int argc, char **argv) {
  bind_arg binds[MAX_BINDS];
  int n_binds = 0, runs = 1;
  rlx_options opt = {RLX_DEVICE_AUTO, 0, 0, 0, NULL};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int64_t num = 0;
    if (v && (!strcmp(a, "--runs") || !strcmp(a, "--threads") || !strcmp(a, "--bind"))) {
      const char *digits = strcmp(a, "--bind") ? v : strchr(v, '=') ? strchr(v, '=') + 1 : "";
      int64_t lo = !strcmp(a, "--runs"), hi = !strcmp(a, "--bind") ? RLX_MAX_TENSOR_BYTES : 1000000;
      if (!parse_count(a, digits, lo, hi, &num)) return 2;
    }
    if (!strcmp(a, "--seed") && v) rng_state = strtoull(v, NULL, 10), i++;
    else if (!strcmp(a, "--runs") && v) runs = (int)num, i++;
    else if (!strcmp(a, "--threads") && v) opt.threads = (int)num, i++;
    else if (!strcmp(a, "--bind") && v && strchr(v, '=') && n_binds < MAX_BINDS) {
      static char names[MAX_BINDS][65];
      const char *eq = strchr(v, '=');
      size_t len = (size_t)(eq - v) < 64 ? (size_t)(eq - v) : 64;
      memcpy(names[n_binds], v, len);
      names[n_binds][len] = 0;
      binds[n_binds].name = names[n_binds];
      binds[n_binds].value = num;
      n_binds++;
      i++;
    } else {
      fprintf(stderr, "rlx graph run: bad argument '%s' (try rlx --help)\n", a);
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  rlx_graph *g;
  rlx_status st = load_graph(path, &g);
  if (st == RLX_ERR_IO) return 1;
  if (st) return cli_fail(st, path);
  rlx_session *s = NULL;
  double t0 = now_s();
  st = rlx_compile(g, &opt, &s);
  double t_compile = now_s() - t0;
  if (!st) st = bind_random(g, s, binds, n_binds);
  double *times = malloc((size_t)runs * sizeof *times);
  if (!times && !st) st = rlx_set_error(RLX_ERR_NOMEM, "rlx graph run: no memory for %d timings", runs);
  for (int r = 0; !st && r < runs; r++) {
    t0 = now_s();
    st = rlx_run(s);
    times[r] = now_s() - t0;
  }
  int rc = 0;
  if (st) {
    rc = cli_fail(st, path);
  } else {
    qsort(times, (size_t)runs, sizeof *times, cmp_double);
    rlx_session_stats stats;
    rlx_session_get_stats(s, &stats);
    printf("graph %s: %d nodes; compile %.3f ms; run %.3f ms (median of %d); arena %zu bytes\n", path,
           rlx_graph_num_nodes(g), 1e3 * t_compile, 1e3 * times[runs / 2], runs, stats.arena_bytes);
    for (int i = 0; i < rlx_session_num_outputs(s) && !rc; i++) {
      rlx_dtype t;
      int64_t dims[RLX_MAX_RANK];
      int rank = rlx_output_type(s, i, &t, dims);
      size_t nbytes = rlx_dtype_nbytes(t, numel_of(rank, dims));
      void *buf = malloc(nbytes ? nbytes : 1);
      st = buf ? rlx_output(s, i, buf, nbytes)
               : rlx_set_error(RLX_ERR_NOMEM, "rlx graph run: no memory for %zu bytes of output %d", nbytes, i);
      if (st) rc = cli_fail(st, "output");
      else print_stats(i, t, rank, dims, buf);
      free(buf);
    }
  }
  free(times);
  rlx_session_free(s);
  rlx_graph_free(g);
  return rc;
}

int cmd_graph(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[0], "check") && argc == 2) return graph_check(argv[1]);
  if (argc >= 2 && !strcmp(argv[0], "run")) return graph_run(argv[1], argc - 2, argv + 2);
  fprintf(stderr, "usage: rlx graph check FILE | rlx graph run FILE [--seed N] [--bind SYM=N] [--runs N] "
                  "[--threads N]\n");
  return 2;
}
