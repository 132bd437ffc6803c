/* test_train.c — training graphs: Assign's write-back (one run is one
 * step; a borrowed param is never written), rlx_train_graph's SGD (with
 * momentum, Nesterov, weight decay) and AdamW steps on a linear
 * regression against the same updates written out here in C, and the
 * argument errors. (Whole models against torch.optim: test_grad_torch.) */
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static rlx_graph *parse(const char *text) {
  rlx_graph *g = NULL;
  rlx_status st = rlx_graph_from_text(text, &g);
  CHECK(st == RLX_OK, "parse: %s", rlx_last_error());
  return g;
}

static rlx_session *compile(const rlx_graph *g) {
  rlx_session *s = NULL;
  rlx_options o = {RLX_DEVICE_CPU, 1, 0, 0, NULL};
  rlx_status st = rlx_compile(g, &o, &s);
  CHECK(st == RLX_OK, "compile: %s", rlx_last_error());
  return s;
}

/* p <- p + x each run; the output is the new value, the run reads the old. */
static void write_back(void) {
  rlx_graph *g = parse("graph \"wb\" {\n %0 = Param{name=\"p\"} : f32[3]\n %1 = Input{name=\"x\"} : f32[3]\n"
                       " %2 = Binary{op=add}(%0, %1)\n %3 = Assign(%0, %2)\n %4 = Binary{op=mul}(%0, %1)\n"
                       " outputs %3, %4\n}\n");
  rlx_session *s = g ? compile(g) : NULL;
  if (!s) return;
  const float p0[3] = {1, 2, 3}, x[3] = {0.5f, -1, 2};
  float got[3], prod[3];
  rlx_set_param_ref(s, "p", p0, sizeof p0); /* borrowed: the session copies before writing */
  rlx_set_input(s, "x", x, sizeof x);
  for (int step = 1; step <= 3; step++) {
    CHECK(rlx_run(s) == RLX_OK, "run %d: %s", step, rlx_last_error());
    rlx_output(s, 0, got, sizeof got);
    rlx_output(s, 1, prod, sizeof prod);
    for (int i = 0; i < 3; i++) {
      CHECK(got[i] == p0[i] + (float)step * x[i], "step %d: p[%d] = %g, want %g", step, i, got[i],
            p0[i] + (float)step * x[i]);
      /* the product read the param of this run, before its write-back */
      CHECK(prod[i] == (p0[i] + (float)(step - 1) * x[i]) * x[i], "step %d: p * x read the new p", step);
    }
  }
  CHECK(p0[0] == 1 && p0[1] == 2 && p0[2] == 3, "the borrowed buffer was written");
  /* setting the param again restarts from the new value */
  const float reset[3] = {0, 0, 0};
  rlx_set_param(s, "p", reset, sizeof reset);
  rlx_run(s);
  rlx_output(s, 0, got, sizeof got);
  CHECK(got[0] == 0.5f && got[1] == -1 && got[2] == 2, "after set_param: %g %g %g", got[0], got[1], got[2]);
  rlx_session_free(s);
  rlx_graph_free(g);
}

/* ---------------------------------------------------------------- linear regression */

enum { N = 8, D = 3 };

/* loss = mean((x w + b - y)^2); its gradient, written out. */
static double lin_loss_grad(const double *x, const double *y, const double *w, double b, double *gw, double *gb) {
  double loss = 0;
  memset(gw, 0, D * sizeof *gw);
  *gb = 0;
  for (int i = 0; i < N; i++) {
    double r = b - y[i];
    for (int j = 0; j < D; j++) r += x[i * D + j] * w[j];
    loss += r * r / N;
    for (int j = 0; j < D; j++) gw[j] += 2 * r * x[i * D + j] / N;
    *gb += 2 * r / N;
  }
  return loss;
}

static const char *LIN = "graph \"lin\" {\n %0 = Input{name=\"x\"} : f64[8,3]\n %1 = Input{name=\"y\"} : f64[8]\n"
                         " %2 = Param{name=\"w\"} : f64[3]\n %3 = Param{name=\"b\"} : f64[]\n"
                         " %4 = MatMul(%0, %2)\n %5 = Binary{op=add}(%4, %3)\n %6 = MseLoss(%5, %1)\n outputs %6\n}\n";

/* Runs `steps` steps of opt through rlx_train_graph and the same updates
 * in C (torch's formulas, as infer_optim.c states them); compares the
 * losses and the final params. */
static void linear_regression(const rlx_optimizer *opt, const char *what) {
  rlx_graph *g = parse(LIN), *tg = NULL;
  if (!g) return;
  rlx_node params[2] = {rlx_graph_param(g, 0), rlx_graph_param(g, 1)};
  rlx_status st = rlx_train_graph(g, rlx_graph_output(g, 0), 2, params, opt, &tg);
  CHECK(st == RLX_OK, "%s: rlx_train_graph: %s", what, rlx_last_error());
  rlx_session *s = tg ? compile(tg) : NULL;
  double x[N * D], y[N], w[D] = {0.3, -0.2, 0.1}, b = 0.05, zeros[2 * D] = {0};
  for (int i = 0; i < N * D; i++) x[i] = sin(1.7 * i + 0.3);
  for (int i = 0; i < N; i++) y[i] = cos(0.9 * i) + 0.5;
  /* the C reference state */
  double rw[D], rb = b, vw[D] = {0}, vb = 0, mw[D] = {0}, sw[D] = {0}, mb = 0, sb = 0;
  memcpy(rw, w, sizeof w);
  const float lr = opt->kind == RLX_OPTIM_SGD ? 0.1f : 0.05f;
  int64_t zero_step = 0;
  if (s) {
    rlx_set_input(s, "x", x, sizeof x);
    rlx_set_input(s, "y", y, sizeof y);
    rlx_set_param(s, "w", w, sizeof w);
    rlx_set_param(s, "b", &b, sizeof b);
    rlx_set_input(s, "lr", &lr, sizeof lr);
    if (opt->kind == RLX_OPTIM_SGD && opt->momentum > 0) {
      rlx_set_param(s, "w.velocity", zeros, D * sizeof(double));
      rlx_set_param(s, "b.velocity", zeros, sizeof(double));
    } else if (opt->kind == RLX_OPTIM_ADAMW) {
      rlx_set_param(s, "w.moments", zeros, 2 * D * sizeof(double));
      rlx_set_param(s, "b.moments", zeros, 2 * sizeof(double));
      rlx_set_param(s, "adamw.step", &zero_step, sizeof zero_step);
    }
  }
  double max_err = 0;
  for (int step = 1; s && step <= 6; step++) {
    double gw[D], gb, got;
    double want = lin_loss_grad(x, y, rw, rb, gw, &gb);
    st = rlx_run(s);
    CHECK(st == RLX_OK, "%s: run %d: %s", what, step, rlx_last_error());
    rlx_output(s, 0, &got, sizeof got);
    max_err = fmax(max_err, fabs(got - want));
    /* the reference step over (w, b) as one vector of D + 1 */
    double *pv[D + 1], *vel[D + 1], *m1[D + 1], *m2[D + 1], grad[D + 1];
    for (int j = 0; j <= D; j++) {
      pv[j] = j < D ? &rw[j] : &rb;
      vel[j] = j < D ? &vw[j] : &vb;
      m1[j] = j < D ? &mw[j] : &mb;
      m2[j] = j < D ? &sw[j] : &sb;
      grad[j] = j < D ? gw[j] : gb;
    }
    for (int j = 0; j <= D; j++) {
      double p = *pv[j], gr = grad[j];
      if (opt->kind == RLX_OPTIM_SGD) {
        gr += opt->weight_decay * p;
        if (opt->momentum > 0) {
          *vel[j] = opt->momentum * *vel[j] + gr;
          gr = opt->nesterov ? gr + opt->momentum * *vel[j] : *vel[j];
        }
        *pv[j] = p - lr * gr;
      } else {
        p *= 1 - lr * opt->weight_decay;
        *m1[j] = opt->beta1 * *m1[j] + (1 - opt->beta1) * gr;
        *m2[j] = opt->beta2 * *m2[j] + (1 - opt->beta2) * gr * gr;
        double mh = *m1[j] / (1 - pow(opt->beta1, step)), vh = *m2[j] / (1 - pow(opt->beta2, step));
        *pv[j] = p - lr * mh / (sqrt(vh) + opt->eps);
      }
    }
  }
  double fw[D], fb;
  if (s) {
    rlx_output(s, 1, fw, sizeof fw);
    rlx_output(s, 2, &fb, sizeof fb);
    for (int j = 0; j < D; j++) max_err = fmax(max_err, fabs(fw[j] - rw[j]));
    max_err = fmax(max_err, fabs(fb - rb));
  }
  CHECK(s && max_err < 1e-12, "%s: rlx and the reference differ by %g", what, max_err);
  rlx_session_free(s);
  rlx_graph_free(tg);
  rlx_graph_free(g);
}

static void train_errors(void) {
  rlx_graph *g = parse(LIN), *tg = NULL;
  if (!g) return;
  rlx_optimizer sgd = {RLX_OPTIM_SGD, 0, 0.9, 0, 0, 0, 0};
  rlx_node x = rlx_graph_input(g, 0), w = rlx_graph_param(g, 0), twice[2] = {w, w};
  CHECK_ERR(rlx_train_graph(g, rlx_graph_output(g, 0), 1, &x, &sgd, &tg), RLX_ERR_INVALID, "not a Param");
  CHECK_ERR(rlx_train_graph(g, rlx_graph_output(g, 0), 2, twice, &sgd, &tg), RLX_ERR_INVALID, "twice");
  CHECK_ERR(rlx_train_graph(g, rlx_graph_output(g, 0), 1, &w, NULL, &tg), RLX_ERR_INVALID, "NULL");
  rlx_optimizer bad = {(rlx_optim_kind)7, 0, 0, 0, 0, 0, 0};
  CHECK_ERR(rlx_train_graph(g, rlx_graph_output(g, 0), 1, &w, &bad, &tg), RLX_ERR_INVALID, "kind 7");
  rlx_optimizer nest = {RLX_OPTIM_SGD, 0, 0, 1, 0, 0, 0};
  CHECK_ERR(rlx_train_graph(g, rlx_graph_output(g, 0), 1, &w, &nest, &tg), RLX_ERR_INVALID, "nesterov");
  CHECK(tg == NULL, "no graph on failure");
  rlx_graph_free(g);
}

int main(void) {
  write_back();
  rlx_optimizer sgd = {RLX_OPTIM_SGD, 0, 0, 0, 0, 0, 0};
  linear_regression(&sgd, "sgd");
  rlx_optimizer momentum = {RLX_OPTIM_SGD, 0.01, 0.9, 0, 0, 0, 0};
  linear_regression(&momentum, "sgd momentum + weight decay");
  rlx_optimizer nesterov = {RLX_OPTIM_SGD, 0.001, 0.8, 1, 0, 0, 0};
  linear_regression(&nesterov, "sgd nesterov");
  rlx_optimizer adamw = {RLX_OPTIM_ADAMW, 0.01, 0, 0, 0.9, 0.999, 1e-8};
  linear_regression(&adamw, "adamw");
  train_errors();
  return check_report();
}
