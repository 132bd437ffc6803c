/* test_grad_torch.c — whole-model gradients (an MLP, a small CNN, a
 * 2-layer transformer, in f64 and f32) against PyTorch autograd.
 *
 * usage: test_grad_torch PYTHON REF_DIR WORK_DIR
 *
 * Runs REF_DIR/torch_grad.py, which writes each model as an rlx graph
 * (output 0: the loss), its inputs and params, and torch's loss and
 * gradients w.r.t. every param, in the op-parity manifest format. Here:
 * rlx_grad of the loss w.r.t. the params (in manifest order), compile,
 * run, compare every output: max |rlx - torch| / max(max |torch|, 1e-3)
 * below 1e-9 (f64) or 1e-4 (f32). Exits 77 (CTest: skipped) without torch. */
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"

#define MAX_ITEMS 96

typedef struct {
  char kind[8], name[128], dtype[16], file[512];
  int rank;
  int64_t dims[RLX_MAX_RANK];
} item;

static const char *work_dir;

static void *read_file(const char *rel, size_t *len) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", work_dir, rel);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) buf[n] = 0;
  if (len) *len = (size_t)n;
  return buf;
}

static rlx_dtype dtype_of(const char *name) {
  for (int i = 0; i < RLX_DTYPE_COUNT; i++)
    if (!strcmp(rlx_dtype_name((rlx_dtype)i), name)) return (rlx_dtype)i;
  return RLX_DTYPE_COUNT;
}

/* "input|param NAME DTYPE DIMS FILE" or "expect DTYPE DIMS FILE ATOL RTOL". */
static int parse_item(const char *line, item *it) {
  char dims[256];
  memset(it, 0, sizeof *it);
  if (sscanf(line, "%7s", it->kind) != 1) return 0;
  int ok = !strcmp(it->kind, "expect") ? sscanf(line, "%*s %15s %255s %511s", it->dtype, dims, it->file) == 3
                                       : sscanf(line, "%*s %127s %15s %255s %511s", it->name, it->dtype, dims, it->file) == 4;
  if (!ok) return 0;
  if (strcmp(dims, "-"))
    for (char *p = dims; *p && it->rank < RLX_MAX_RANK;) {
      it->dims[it->rank++] = strtoll(p, &p, 10);
      if (*p == ',') p++;
    }
  return 1;
}

static double max_abs(const double *v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
  return m;
}

/* The bytes of an f32 / f64 buffer as doubles. */
static double *as_f64(const void *p, rlx_dtype t, int64_t n) {
  double *v = malloc(((size_t)n + 1) * sizeof *v);
  for (int64_t i = 0; v && i < n; i++) v[i] = t == RLX_F64 ? ((const double *)p)[i] : ((const float *)p)[i];
  return v;
}

static void run_case(const char *name, const char *graph_file, item *items, int n_items) {
  char *text = read_file(graph_file, NULL);
  rlx_graph *g = NULL, *gg = NULL;
  rlx_session *s = NULL;
  rlx_status st = text ? rlx_graph_from_text(text, &g) : RLX_ERR_IO;
  free(text);
  CHECK(st == RLX_OK, "%s: graph: %s", name, rlx_last_error());
  rlx_node wrt[MAX_ITEMS];
  int n_wrt = 0;
  for (int i = 0; g && i < n_items; i++)
    if (!strcmp(items[i].kind, "param"))
      for (int p = 0; p < rlx_graph_num_params(g); p++)
        if (!strcmp(rlx_node_name(g, rlx_graph_param(g, p)), items[i].name)) wrt[n_wrt++] = rlx_graph_param(g, p);
  if (g) st = rlx_grad(g, rlx_graph_output(g, 0), n_wrt, wrt, &gg);
  CHECK(g && st == RLX_OK, "%s: rlx_grad: %s", name, rlx_last_error());
  rlx_options o = {RLX_DEVICE_CPU, 0, 0};
  if (gg) st = rlx_compile(gg, &o, &s);
  CHECK(gg && st == RLX_OK, "%s: compile: %s", name, rlx_last_error());
  for (int i = 0; s && st == RLX_OK && i < n_items; i++) {
    if (!strcmp(items[i].kind, "expect")) continue;
    size_t len;
    void *data = read_file(items[i].file, &len);
    st = !data ? RLX_ERR_IO
         : !strcmp(items[i].kind, "param") ? rlx_set_param(s, items[i].name, data, len)
                                           : rlx_set_input(s, items[i].name, data, len);
    free(data);
  }
  if (s && st == RLX_OK) st = rlx_run(s);
  CHECK(s && st == RLX_OK, "%s: run: %s", name, rlx_last_error());
  int k = 0;
  for (int i = 0; s && st == RLX_OK && i < n_items; i++) {
    if (strcmp(items[i].kind, "expect")) continue;
    rlx_dtype t = dtype_of(items[i].dtype);
    int64_t n = 1;
    for (int d = 0; d < items[i].rank; d++) n *= items[i].dims[d];
    size_t len, nb = rlx_dtype_nbytes(t, n);
    void *want = read_file(items[i].file, &len), *got = malloc(nb + 1);
    int read = want && got && len == nb && rlx_output(s, k, got, nb) == RLX_OK;
    double *a = read ? as_f64(got, t, n) : NULL, *b = read ? as_f64(want, t, n) : NULL;
    double err = INFINITY, bound = t == RLX_F64 ? 1e-9 : 1e-4;
    if (a && b) {
      double num = 0;
      for (int64_t j = 0; j < n; j++) num = fmax(num, fabs(a[j] - b[j]));
      err = num / fmax(max_abs(b, n), 1e-3); /* the floor: gradients that are 0 in exact math (a key bias) */
    }
    CHECK(err < bound, "%s: %s: relative error %.3g (bound %.0e)", name,
          k == 0 ? "loss" : rlx_node_name(g, wrt[k - 1]), err, bound);
    if (getenv("RLX_TEST_VERBOSE")) printf("%-18s %-16s %.3g\n", name, k == 0 ? "loss" : rlx_node_name(g, wrt[k - 1]), err);
    free(want);
    free(got);
    free(a);
    free(b);
    k++;
  }
  CHECK(k == n_wrt + 1 || st != RLX_OK, "%s: %d expected outputs for %d params", name, k, n_wrt);
  rlx_session_free(s);
  rlx_graph_free(gg);
  rlx_graph_free(g);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR WORK_DIR\n", argv[0]);
    return 2;
  }
  work_dir = argv[3];
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "\"%s\" \"%s/torch_grad.py\" --out \"%s\"", argv[1], argv[2], argv[3]);
  int rc = system(cmd);
  if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
    printf("SKIP: torch is not installed\n");
    return 77;
  }
  if (rc != 0) {
    printf("FAIL: %s exited with %d\n", cmd, rc);
    return 1;
  }
  char *man = read_file("manifest.txt", NULL);
  CHECK(man != NULL, "no manifest in %s", work_dir);
  static item items[MAX_ITEMS];
  char name[256] = "", graph[512] = "";
  int n_items = 0, cases = 0;
  for (char *line = man ? strtok(man, "\n") : NULL; line; line = strtok(NULL, "\n")) {
    if (!strncmp(line, "case ", 5)) {
      snprintf(name, sizeof name, "%s", line + 5);
      n_items = 0;
    } else if (!strncmp(line, "graph ", 6)) {
      snprintf(graph, sizeof graph, "%s", line + 6);
    } else if (!strcmp(line, "end")) {
      run_case(name, graph, items, n_items);
      cases++;
    } else if (n_items < MAX_ITEMS) {
      CHECK(parse_item(line, &items[n_items]), "bad manifest line: %s", line);
      n_items++;
    }
  }
  free(man);
  CHECK(cases == 6, "%d cases, expected 6", cases);
  return check_report();
}
