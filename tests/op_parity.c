/* op_parity.c — op parity against NumPy references.
 *
 * usage: test_op_parity PYTHON REF_DIR GROUP WORK_DIR
 *
 * Runs REF_DIR/gen_cases.py for GROUP (it writes graphs, inputs and NumPy
 * expected outputs into WORK_DIR), then runs every case through rlx (text
 * form -> compile -> set params/inputs -> run) and compares each output
 * with the expected one: exact for integer, bool and block dtypes, within
 * |got - want| <= atol + rtol * |want| for floats (tolerances by dtype, or
 * the case's own). A case with "error STATUS" passes when parsing,
 * compiling, binding or running returns that status.
 */
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_data.h"

#define MAX_ITEMS 16

typedef struct {
  char name[128], dtype[16], file[512];
  int rank;
  int64_t dims[RLX_MAX_RANK];
  double atol, rtol;  /* < 0: default */
} item;

typedef struct {
  char name[256], graph[512], error[64];
  item inputs[MAX_ITEMS], params[MAX_ITEMS], expects[MAX_ITEMS];
  int n_inputs, n_params, n_expects;
} test_case;

static int parse_dims(const char *s, item *it) {
  it->rank = 0;
  if (!strcmp(s, "-")) return 1;
  while (*s) {
    if (it->rank == RLX_MAX_RANK) return 0;
    char *end;
    it->dims[it->rank++] = strtoll(s, &end, 10);
    if (end == s) return 0;
    s = *end == ',' ? end + 1 : end;
  }
  return 1;
}

/* Parses one "input|param|expect ..." line into it. */
static int parse_item(const char *line, int with_tol, item *it) {
  char dims[256], atol[64] = "-", rtol[64] = "-";
  int n;
  if (with_tol)
    n = sscanf(line, "%15s %255s %511s %63s %63s", it->dtype, dims, it->file, atol, rtol), it->name[0] = 0;
  else
    n = sscanf(line, "%127s %15s %255s %511s", it->name, it->dtype, dims, it->file);
  if (n < (with_tol ? 3 : 4)) return 0;
  it->atol = strcmp(atol, "-") ? atof(atol) : -1;
  it->rtol = strcmp(rtol, "-") ? atof(rtol) : -1;
  return parse_dims(dims, it);
}

static int64_t numel(const item *it) {
  int64_t n = 1;
  for (int i = 0; i < it->rank; i++) n *= it->dims[i];
  return n;
}

/* Compares output k; returns 1 if it matches, else prints why. */
static int compare(const test_case *c, int k, rlx_session *s) {
  const item *e = &c->expects[k];
  rlx_dtype want_t, got_t;
  int64_t got_dims[RLX_MAX_RANK];
  if (!dtype_of(e->dtype, &want_t)) {
    printf("FAIL %s: output %d: unknown dtype %s in manifest\n", c->name, k, e->dtype);
    return 0;
  }
  int rank = rlx_output_type(s, k, &got_t, got_dims);
  if (rank != e->rank || got_t != want_t || memcmp(got_dims, e->dims, sizeof(int64_t) * (size_t)rank)) {
    printf("FAIL %s: output %d is %s rank %d [", c->name, k, rlx_dtype_name(got_t), rank);
    for (int i = 0; i < rank; i++) printf("%s%lld", i ? "," : "", (long long)got_dims[i]);
    printf("], want %s [", e->dtype);
    for (int i = 0; i < e->rank; i++) printf("%s%lld", i ? "," : "", (long long)e->dims[i]);
    printf("]\n");
    return 0;
  }
  size_t want_len, nbytes = rlx_dtype_nbytes(want_t, numel(e));
  void *want = read_work(e->file, &want_len);
  void *got = malloc(nbytes ? nbytes : 1);
  int ok = 1;
  if (!want || !got || want_len != nbytes) {
    printf("FAIL %s: output %d: expected file %s missing or %zu bytes (want %zu)\n", c->name, k, e->file,
           want ? want_len : 0, nbytes);
    ok = 0;
  } else if (rlx_output(s, k, got, nbytes) != RLX_OK) {
    printf("FAIL %s: rlx_output %d: %s\n", c->name, k, rlx_last_error());
    ok = 0;
  } else if (rlx_dtype_is_block(want_t) || want_t == RLX_BOOL) {
    /* Bytes, for bools too: a true is stored as 1 (rlx_value_as_f64 reads any nonzero byte as 1). */
    if (memcmp(got, want, nbytes)) {
      size_t at = 0;
      while (((unsigned char *)got)[at] == ((unsigned char *)want)[at]) at++;
      printf("FAIL %s: output %d: %s bytes differ first at byte %zu\n", c->name, k, e->dtype, at);
      ok = 0;
    }
  } else {
    double atol, rtol;
    default_tolerance(want_t, &atol, &rtol);
    if (e->atol >= 0) atol = e->atol;
    if (e->rtol >= 0) rtol = e->rtol;
    int64_t n = numel(e), bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
      double g = rlx_value_as_f64(want_t, got, i), w = rlx_value_as_f64(want_t, want, i);
      int match;
      if (isnan(w) || isnan(g)) match = isnan(w) && isnan(g);
      else if (isinf(w) || isinf(g)) match = g == w;
      else match = fabs(g - w) <= atol + rtol * fabs(w);
      if (!match) {
        if (first < 0) first = i;
        bad++;
        double err = fabs(g - w);
        if (!(err <= worst)) worst = err;
      }
    }
    if (bad) {
      printf("FAIL %s: output %d: %lld of %lld values off (atol %g rtol %g); first at %lld: got %.9g want %.9g; "
             "max abs err %g\n", c->name, k, (long long)bad, (long long)n, atol, rtol, (long long)first,
             rlx_value_as_f64(want_t, got, first), rlx_value_as_f64(want_t, want, first), worst);
      ok = 0;
    }
  }
  free(want);
  free(got);
  return ok;
}

static rlx_status bind_items(rlx_session *s, const item *items, int n, int params, const char **culprit) {
  for (int i = 0; i < n; i++) {
    const item *it = &items[i];
    size_t len;
    void *data = read_work(it->file, &len);
    *culprit = it->name;
    if (!data) return RLX_ERR_IO;
    rlx_status st = params ? rlx_set_param(s, it->name, data, len)
                           : rlx_set_input_shaped(s, it->name, data, len, it->rank, it->dims);
    free(data);
    if (st) return st;
  }
  return RLX_OK;
}

/* Runs one case; returns 1 on pass. */
static int run_case(const test_case *c) {
  char *text = read_work(c->graph, NULL);
  if (!text) {
    printf("FAIL %s: cannot read %s\n", c->name, c->graph);
    return 0;
  }
  rlx_graph *g = NULL;
  rlx_session *s = NULL;
  const char *phase = "parse", *culprit = "";
  rlx_status st = rlx_graph_from_text(text, &g);
  free(text);
  if (!st) phase = "compile", st = rlx_compile(g, NULL, &s);
  if (!st) phase = "set_param", st = bind_items(s, c->params, c->n_params, 1, &culprit);
  if (!st) phase = "set_input", st = bind_items(s, c->inputs, c->n_inputs, 0, &culprit);
  if (!st) phase = "run", st = rlx_run(s);
  int ok;
  if (c->error[0]) {
    ok = st != RLX_OK && !strcmp(rlx_status_name(st), c->error);
    if (!ok)
      printf("FAIL %s: want %s, got %s at %s: %s\n", c->name, c->error, rlx_status_name(st), phase,
             st ? rlx_last_error() : "(no error)");
    else if (!rlx_last_error()[0]) {
      printf("FAIL %s: %s without a message\n", c->name, c->error);
      ok = 0;
    }
  } else if (st) {
    printf("FAIL %s: %s %s %s: %s\n", c->name, phase, culprit, rlx_status_name(st), rlx_last_error());
    ok = 0;
  } else {
    ok = 1;
    if (rlx_session_num_outputs(s) != c->n_expects) {
      printf("FAIL %s: %d outputs, want %d\n", c->name, rlx_session_num_outputs(s), c->n_expects);
      ok = 0;
    }
    for (int k = 0; ok && k < c->n_expects; k++) ok = compare(c, k, s);
  }
  rlx_session_free(s);
  rlx_graph_free(g);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s PYTHON REF_DIR GROUP WORK_DIR\n", argv[0]);
    return 2;
  }
  work_dir = argv[4];
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && '%s' '%s/gen_cases.py' --group '%s' --out '%s'", argv[4], argv[1], argv[2],
           argv[3], argv[4]);
  if (system(cmd) != 0) {
    fprintf(stderr, "reference generation failed: %s\n", cmd);
    return 1;
  }
  char *man = read_work("manifest.txt", NULL);
  if (!man) {
    fprintf(stderr, "no manifest in %s\n", argv[4]);
    return 1;
  }
  int passed = 0, failed = 0;
  test_case *c = calloc(1, sizeof *c);
  if (!c) return 1;
  char *save = NULL;
  for (char *line = strtok_r(man, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    int bad = 0;
    if (!strncmp(line, "case ", 5)) {
      memset(c, 0, sizeof *c);
      snprintf(c->name, sizeof c->name, "%s", line + 5);
    } else if (!strncmp(line, "graph ", 6)) {
      snprintf(c->graph, sizeof c->graph, "%s", line + 6);
    } else if (!strncmp(line, "input ", 6)) {
      bad = c->n_inputs == MAX_ITEMS || !parse_item(line + 6, 0, &c->inputs[c->n_inputs++]);
    } else if (!strncmp(line, "param ", 6)) {
      bad = c->n_params == MAX_ITEMS || !parse_item(line + 6, 0, &c->params[c->n_params++]);
    } else if (!strncmp(line, "expect ", 7)) {
      bad = c->n_expects == MAX_ITEMS || !parse_item(line + 7, 1, &c->expects[c->n_expects++]);
    } else if (!strncmp(line, "error ", 6)) {
      snprintf(c->error, sizeof c->error, "%s", line + 6);
    } else if (!strcmp(line, "end")) {
      if (run_case(c)) passed++;
      else failed++;
    } else {
      bad = 1;
    }
    if (bad) {
      printf("FAIL %s: bad manifest line: %s\n", c->name, line);
      failed++;
    }
  }
  free(c);
  free(man);
  printf("group %s: %d passed, %d failed\n", argv[3], passed, failed);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
