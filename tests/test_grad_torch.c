/* test_grad_torch.c — whole-model gradients (an MLP, a small CNN, a
 * 2-layer transformer, in f64 and f32) against PyTorch autograd, and a
 * few training steps of each (SGD with Nesterov momentum and weight
 * decay; AdamW) against torch.optim.
 *
 * usage: test_grad_torch PYTHON REF_DIR WORK_DIR
 *
 * Runs REF_DIR/torch_grad.py, which writes each model as an rlx graph
 * (output 0: the loss), its inputs and params, and torch's loss and
 * gradients w.r.t. every param, in the op-parity manifest format. Here:
 * rlx_grad of the loss w.r.t. the params (in manifest order), compile,
 * run, compare every output: max |rlx - torch| / max(max |torch|, 1e-3)
 * below 1e-9 (f64) or 1e-4 (f32); "train_*" cases go through
 * rlx_train_graph instead (run_case). Exits 77 (CTest: skipped) without torch. */
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref_data.h"
#include "ref_script.h"

#define MAX_ITEMS 96

typedef struct {
  char kind[8], name[128], dtype[16], file[512];
  int rank;
  int64_t dims[RLX_MAX_RANK];
} item;

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

/* The n elements of a t buffer as doubles. */
static double *as_f64(const void *p, rlx_dtype t, int64_t n) {
  double *v = malloc(((size_t)n + 1) * sizeof *v);
  for (int64_t i = 0; v && i < n; i++) v[i] = rlx_value_as_f64(t, p, i);
  return v;
}

/* Reads expected item i into doubles (NULL on a size mismatch). */
static double *expected_values(const item *it, int64_t *n) {
  rlx_dtype t = RLX_DTYPE_COUNT;  /* an unknown name: no bytes match */
  dtype_of(it->dtype, &t);
  *n = 1;
  for (int d = 0; d < it->rank; d++) *n *= it->dims[d];
  size_t len;
  void *raw = read_work(it->file, &len);
  double *v = raw && len == rlx_dtype_nbytes(t, *n) ? as_f64(raw, t, *n) : NULL;
  free(raw);
  return v;
}

/* Compares output k of s with expected item it; what names it. */
static void compare(rlx_session *s, int k, const item *it, const char *name, const char *what) {
  rlx_dtype t = RLX_DTYPE_COUNT;  /* an unknown name: no bytes match */
  dtype_of(it->dtype, &t);
  int64_t n;
  double *b = expected_values(it, &n), *a = NULL;
  size_t nb = rlx_dtype_nbytes(t, n);
  void *got = malloc(nb + 1);
  if (b && got && rlx_output(s, k, got, nb) == RLX_OK) a = as_f64(got, t, n);
  double err = INFINITY, bound = t == RLX_F64 ? 1e-9 : 1e-4;
  if (a && b) {
    double num = 0;
    for (int64_t j = 0; j < n; j++) num = fmax(num, fabs(a[j] - b[j]));
    err = num / fmax(max_abs(b, n), 1e-3); /* the floor: gradients that are 0 in exact math (a key bias) */
  }
  CHECK(err < bound, "%s: %s: relative error %.3g (bound %.0e)", name, what, err, bound);
  if (getenv("RLX_TEST_VERBOSE")) printf("%-24s %-16s %.3g\n", name, what, err);
  free(got);
  free(a);
  free(b);
}

/* Binds the case's inputs and params; zeros for optimizer state params
 * (those the case does not list). */
static rlx_status bind_case(rlx_session *s, const rlx_graph *g, const item *items, int n_items) {
  rlx_status st = RLX_OK;
  for (int i = 0; st == RLX_OK && i < n_items; i++) {
    if (!strcmp(items[i].kind, "expect")) continue;
    size_t len;
    void *data = read_work(items[i].file, &len);
    st = !data ? RLX_ERR_IO
         : !strcmp(items[i].kind, "param") ? rlx_set_param(s, items[i].name, data, len)
                                           : rlx_set_input(s, items[i].name, data, len);
    free(data);
  }
  for (int p = 0; st == RLX_OK && p < rlx_graph_num_params(g); p++) {
    rlx_node id = rlx_graph_param(g, p);
    const char *nm = rlx_node_name(g, id);
    int listed = 0;
    for (int i = 0; i < n_items; i++) listed |= !strcmp(items[i].kind, "param") && !strcmp(items[i].name, nm);
    if (listed) continue;
    rlx_dtype t;
    int64_t dims[RLX_MAX_RANK], n = 1;
    int rank = rlx_node_type(g, id, &t, dims);
    for (int d = 0; d < rank; d++) n *= dims[d];
    size_t nb = rlx_dtype_nbytes(t, n);
    void *zeros = calloc(nb + 1, 1);
    st = zeros ? rlx_set_param(s, nm, zeros, nb) : RLX_ERR_NOMEM;
    free(zeros);
  }
  return st;
}

/* The hyperparameters torch_grad.py trains with, by case name. */
#define TRAIN_STEPS 5
static int train_optimizer(const char *name, rlx_optimizer *opt, float *lr) {
  memset(opt, 0, sizeof *opt);
  if (!strncmp(name, "train_sgd_", 10)) {
    *opt = (rlx_optimizer){RLX_OPTIM_SGD, 0.01, 0.9, 1, 0, 0, 0};
    *lr = 0.1f;
    return 1;
  }
  if (!strncmp(name, "train_adamw_", 12)) {
    *opt = (rlx_optimizer){RLX_OPTIM_ADAMW, 0.01, 0, 0, 0.9, 0.999, 1e-8};
    *lr = 0.01f;
    return 1;
  }
  return 0;
}

/* A gradient case: rlx_grad's outputs (the loss, then d loss / d param)
 * against torch's. A training case: TRAIN_STEPS runs of rlx_train_graph's
 * graph, each loss and then the final params against torch.optim's. */
static void run_case(const char *name, const char *graph_file, item *items, int n_items) {
  char *text = read_work(graph_file, NULL);
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
  rlx_optimizer opt;
  float lr = 0;
  int train = train_optimizer(name, &opt, &lr);
  if (g) st = train ? rlx_train_graph(g, rlx_graph_output(g, 0), n_wrt, wrt, &opt, &gg)
                    : rlx_grad(g, rlx_graph_output(g, 0), n_wrt, wrt, &gg);
  CHECK(g && st == RLX_OK, "%s: %s: %s", name, train ? "rlx_train_graph" : "rlx_grad", rlx_last_error());
  rlx_options o = {RLX_DEVICE_CPU, 0, 0, 0, NULL};
  if (gg) st = rlx_compile(gg, &o, &s);
  CHECK(gg && st == RLX_OK, "%s: compile: %s", name, rlx_last_error());
  if (s) st = bind_case(s, gg, items, n_items);
  if (s && st == RLX_OK && train) st = rlx_set_input(s, "lr", &lr, sizeof lr);
  int k = 0, steps = train ? TRAIN_STEPS : 1;
  for (int step = 0; s && st == RLX_OK && step < steps; step++) {
    st = rlx_run(s);
    CHECK(st == RLX_OK, "%s: run %d: %s", name, step, rlx_last_error());
    while (st == RLX_OK && k < n_items && strcmp(items[k].kind, "expect")) k++;
    char what[64];
    snprintf(what, sizeof what, "loss of step %d", step + 1);
    if (st == RLX_OK && k < n_items) compare(s, 0, &items[k++], name, train ? what : "loss");
  }
  for (int p = 0; s && st == RLX_OK && p < n_wrt; p++) {
    while (k < n_items && strcmp(items[k].kind, "expect")) k++;
    CHECK(k < n_items, "%s: no expected value for %s", name, rlx_node_name(g, wrt[p]));
    if (k < n_items) compare(s, 1 + p, &items[k++], name, rlx_node_name(g, wrt[p]));
  }
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
  const int rc = run_ref_script(argv[1], argv[2], "torch_grad.py", "--out \"%s\"", argv[3]);
  if (rc == REF_SKIP) {
    printf("SKIP: torch is not installed\n");
    return REF_SKIP;
  }
  if (rc) return 1;
  char *man = read_work("manifest.txt", NULL);
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
  CHECK(cases == 12, "%d cases, expected 12", cases);
  return check_report();
}
