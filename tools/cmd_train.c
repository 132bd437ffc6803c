/* cmd_train.c — `rlx train mnist`: trains a small CNN on MNIST with rlx's
 * own gradient graph (rlx_train_graph: one rlx_run is one optimizer step)
 * and reports per-epoch loss and test accuracy.
 *
 * The model: conv 5x5 (1 -> 8) + bias, relu, max pool 2, conv 5x5 (8 ->
 * 16) + bias, relu, max pool 2, linear 256 -> 10, cross-entropy. The data:
 * the four IDX files of MNIST (scripts/mnist_data.py writes them). */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IMG 28
#define CLASSES 10

typedef struct {
  const char *data_dir;
  int epochs, batch, eval_batch, threads, limit;
  double lr, weight_decay;
  rlx_optimizer opt;
  rlx_device device;
  int device_index;
  uint64_t seed;
} train_opts;

/* ---------------------------------------------------------------- IDX files */

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* An IDX file of unsigned bytes with `rank` dims (the trailing ones must
 * equal want[1..]); returns the data (past the header) and its count in
 * *count (dim 0), NULL after a message on stderr. *buf is what to free. */
static const unsigned char *read_idx(const char *dir, const char *name, int rank, const uint32_t *want,
                                     uint32_t *count, char **buf) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t len;
  *buf = cli_read_file(path, &len);
  if (!*buf) return NULL;
  const unsigned char *p = (const unsigned char *)*buf;
  size_t header = 4 + 4 * (size_t)rank;
  if (len < header || p[0] || p[1] || p[2] != 0x08 || p[3] != rank) {
    fprintf(stderr, "rlx: error: %s is not an IDX file of %d-dim unsigned bytes\n", path, rank);
    return NULL;
  }
  size_t items = be32(p + 4), per = 1;
  for (int i = 1; i < rank; i++) {
    if (be32(p + 4 + 4 * i) != want[i]) {
      fprintf(stderr, "rlx: error: %s: dim %d is %u, expected %u\n", path, i, be32(p + 4 + 4 * i), want[i]);
      return NULL;
    }
    per *= want[i];
  }
  if (len != header + items * per) {
    fprintf(stderr, "rlx: error: %s: %zu bytes, the header promises %zu\n", path, len, header + items * per);
    return NULL;
  }
  *count = (uint32_t)items;
  return p + header;
}

typedef struct {
  char *bufs[2];
  const unsigned char *images, *labels;
  uint32_t n;
} mnist_split;

static int load_split(const char *dir, const char *images, const char *labels, mnist_split *s) {
  const uint32_t img_dims[3] = {0, IMG, IMG}, lab_dims[1] = {0};
  uint32_t ni = 0, nl = 0;
  s->images = read_idx(dir, images, 3, img_dims, &ni, &s->bufs[0]);
  s->labels = s->images ? read_idx(dir, labels, 1, lab_dims, &nl, &s->bufs[1]) : NULL;
  if (!s->labels) return 0;
  if (ni != nl) {
    fprintf(stderr, "rlx: error: %s has %u images but %s %u labels\n", images, ni, labels, nl);
    return 0;
  }
  for (uint32_t i = 0; i < nl; i++)
    if (s->labels[i] >= CLASSES) {
      fprintf(stderr, "rlx: error: %s: label %u of item %u is not a digit\n", labels, s->labels[i], i);
      return 0;
    }
  s->n = ni;
  return 1;
}

/* ---------------------------------------------------------------- the model */

static uint64_t rng_state;

static double rng_uniform(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (double)((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct {
  const char *name;
  int rank;
  int64_t dims[4];
  int64_t fan_in;
} param_spec;

static const param_spec PARAMS[] = {
    {"conv1.w", 4, {8, 1, 5, 5}, 25},       {"conv1.b", 1, {8}, 25},    {"conv2.w", 4, {16, 8, 5, 5}, 200},
    {"conv2.b", 1, {16}, 200},              {"fc.w", 2, {256, CLASSES}, 256}, {"fc.b", 1, {CLASSES}, 256},
};
#define N_PARAMS ((int)(sizeof PARAMS / sizeof PARAMS[0]))

static int64_t spec_numel(const param_spec *p) {
  int64_t n = 1;
  for (int i = 0; i < p->rank; i++) n *= p->dims[i];
  return n;
}

/* The CNN over a batch; its outputs: the mean loss and the logits. */
static rlx_graph *build_model(int64_t batch, rlx_node *params) {
  rlx_graph *g = rlx_graph_new("mnist_cnn");
  int64_t xd[4] = {batch, 1, IMG, IMG};
  rlx_node x = rlx_input(g, "x", RLX_F32, 4, xd), t = rlx_input(g, "label", RLX_I32, 1, &batch);
  for (int i = 0; i < N_PARAMS; i++) params[i] = rlx_param(g, PARAMS[i].name, RLX_F32, PARAMS[i].rank, PARAMS[i].dims);
  rlx_conv_desc conv = {2, {1, 1}, {1, 1}, {0, 0}, {0, 0, 0, 0}, 1};
  rlx_pool_desc pool = {RLX_POOL_MAX, 2, {2, 2}, {2, 2}, {0, 0, 0, 0}, 0};
  rlx_node h = rlx_activation(g, RLX_ACT_RELU, rlx_conv(g, x, params[0], params[1], &conv));  /* [B, 8, 24, 24] */
  h = rlx_pool(g, h, &pool);                                                                 /* [B, 8, 12, 12] */
  h = rlx_activation(g, RLX_ACT_RELU, rlx_conv(g, h, params[2], params[3], &conv));          /* [B, 16, 8, 8] */
  h = rlx_pool(g, h, &pool);                                                                 /* [B, 16, 4, 4] */
  int64_t flat[2] = {batch, 256};
  rlx_node logits = rlx_add(g, rlx_matmul(g, rlx_reshape(g, h, 2, flat), params[4]), params[5]);
  rlx_node outs[2] = {rlx_cross_entropy(g, logits, t, -1, -100, 0.0), logits};
  rlx_graph_set_outputs(g, 2, outs);
  return g;
}

/* Batch `b` of the epoch's order: normalized pixels and labels. */
static void fill_batch(const mnist_split *d, const uint32_t *order, int64_t first, int64_t batch, float *x,
                       int32_t *labels) {
  for (int64_t i = 0; i < batch; i++) {
    uint32_t k = order ? order[first + i] : (uint32_t)(first + i);
    const unsigned char *img = d->images + (size_t)k * IMG * IMG;
    for (int j = 0; j < IMG * IMG; j++) x[i * IMG * IMG + j] = (float)((img[j] / 255.0 - 0.1307) / 0.3081);
    labels[i] = d->labels[k];
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "epoch 1/3 [=======>      ] 412/937  loss 0.2311  38.1 it/s" on stderr. */
static void progress(int epoch, int epochs, int64_t step, int64_t steps, double loss, double rate) {
  const int width = 30;
  int filled = (int)(width * step / (steps ? steps : 1));
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
  bar[width] = 0;
  fprintf(stderr, "\repoch %d/%d [%s] %lld/%lld  loss %.4f  %.1f it/s ", epoch, epochs, bar, (long long)step,
          (long long)steps, loss, rate);
  fflush(stderr);
}

/* Accuracy of the params on the test split, in batches of eval_batch. */
static rlx_status evaluate(rlx_session *eval, const mnist_split *test, int64_t eval_batch, float *x, int32_t *labels,
                           float *logits, double *accuracy) {
  int64_t correct = 0, seen = 0;
  for (int64_t first = 0; first + eval_batch <= test->n; first += eval_batch) {
    fill_batch(test, NULL, first, eval_batch, x, labels);
    rlx_status st = rlx_set_input(eval, "x", x, (size_t)eval_batch * IMG * IMG * sizeof *x);
    if (!st) st = rlx_set_input(eval, "label", labels, (size_t)eval_batch * sizeof *labels);
    if (!st) st = rlx_run(eval);
    if (!st) st = rlx_output(eval, 1, logits, (size_t)eval_batch * CLASSES * sizeof *logits);
    if (st) return st;
    for (int64_t i = 0; i < eval_batch; i++) {
      int best = 0;
      for (int c = 1; c < CLASSES; c++)
        if (logits[i * CLASSES + c] > logits[i * CLASSES + best]) best = c;
      correct += best == labels[i];
    }
    seen += eval_batch;
  }
  *accuracy = seen ? (double)correct / (double)seen : 0;
  return RLX_OK;
}

static int train_mnist(const train_opts *o) {
  mnist_split train = {{0}, 0, 0, 0}, test = {{0}, 0, 0, 0};
  int rc = 1;
  if (!load_split(o->data_dir, "train-images-idx3-ubyte", "train-labels-idx1-ubyte", &train) ||
      !load_split(o->data_dir, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", &test)) {
    fprintf(stderr, "rlx: the MNIST IDX files are written by: python3 scripts/mnist_data.py --out %s\n", o->data_dir);
    goto free_data;
  }
  if (o->limit > 0 && (uint32_t)o->limit < train.n) train.n = (uint32_t)o->limit;
  const int64_t B = o->batch, EB = o->eval_batch < (int64_t)test.n ? (int64_t)o->eval_batch : (int64_t)test.n;
  const int64_t steps = train.n / B;
  if (steps < 1 || EB < 1) {
    fprintf(stderr, "rlx: error: %u training images make no batch of %lld\n", train.n, (long long)B);
    goto free_data;
  }
  rlx_node params[N_PARAMS], eval_params[N_PARAMS];
  rlx_graph *model = build_model(B, params), *eval_model = build_model(EB, eval_params), *tg = NULL;
  rlx_session *s = NULL, *eval = NULL;
  float *x = malloc((size_t)(B > EB ? B : EB) * IMG * IMG * sizeof *x), *logits = malloc((size_t)EB * CLASSES * sizeof *logits);
  int32_t *labels = malloc((size_t)(B > EB ? B : EB) * sizeof *labels);
  uint32_t *order = malloc((size_t)train.n * sizeof *order);
  float *pbuf[N_PARAMS] = {0};
  rlx_options ro = {o->device, o->threads, 0, o->device_index, NULL};
  rlx_status st = rlx_graph_status(model);
  if (!st) st = rlx_graph_status(eval_model);
  if (!st) st = rlx_train_graph(model, rlx_graph_output(model, 0), N_PARAMS, params, &o->opt, &tg);
  if (!st) st = rlx_compile(tg, &ro, &s);
  if (!st) st = rlx_compile(eval_model, &ro, &eval);
  if (st) {
    rc = cli_fail(st, "building the model");
    goto done;
  }
  if (!x || !logits || !labels || !order) {
    rc = cli_fail(RLX_ERR_NOMEM, "allocating batches");
    goto done;
  }
  /* torch's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); state zeros */
  rng_state = o->seed;
  for (int i = 0; i < N_PARAMS && !st; i++) {
    int64_t n = spec_numel(&PARAMS[i]);
    if (!(pbuf[i] = malloc((size_t)n * sizeof(float)))) st = RLX_ERR_NOMEM;
    for (int64_t j = 0; pbuf[i] && j < n; j++)
      pbuf[i][j] = (float)((2 * rng_uniform() - 1) / sqrt((double)PARAMS[i].fan_in));
    if (!st) st = rlx_set_param(s, PARAMS[i].name, pbuf[i], (size_t)n * sizeof(float));
  }
  for (int i = 0; i < rlx_graph_num_params(tg) && !st; i++) {
    rlx_node id = rlx_graph_param(tg, i);
    const char *nm = rlx_node_name(tg, id);
    int is_model = 0;
    for (int k = 0; k < N_PARAMS; k++) is_model |= !strcmp(nm, PARAMS[k].name);
    if (is_model) continue;
    rlx_dtype t;
    int64_t dims[RLX_MAX_RANK], n = 1;
    int rank = rlx_node_type(tg, id, &t, dims);
    for (int d = 0; d < rank; d++) n *= dims[d];
    void *zeros = calloc(rlx_dtype_nbytes(t, n) + 1, 1);
    st = zeros ? rlx_set_param(s, nm, zeros, rlx_dtype_nbytes(t, n)) : RLX_ERR_NOMEM;
    free(zeros);
  }
  float lr = (float)o->lr;
  if (!st) st = rlx_set_input(s, "lr", &lr, sizeof lr);
  if (st) {
    rc = cli_fail(st, "setting the params");
    goto done;
  }
  int64_t n_weights = 0;
  for (int i = 0; i < N_PARAMS; i++) n_weights += spec_numel(&PARAMS[i]);
  printf("rlx train mnist: %u training, %u test images; CNN of %lld weights; %s, lr %g, batch %lld, %d epoch(s)\n",
         train.n, test.n, (long long)n_weights, o->opt.kind == RLX_OPTIM_ADAMW ? "AdamW" : "SGD", o->lr, (long long)B, o->epochs);
  int tty = isatty(fileno(stderr));
  double accuracy = 0;
  for (int epoch = 1; epoch <= o->epochs; epoch++) {
    for (uint32_t i = 0; i < train.n; i++) order[i] = i;
    for (uint32_t i = train.n - 1; i > 0; i--) { /* Fisher-Yates */
      uint32_t j = (uint32_t)(rng_uniform() * (i + 1));
      uint32_t tmp = order[i];
      order[i] = order[j], order[j] = tmp;
    }
    double t0 = now(), loss_sum = 0;
    for (int64_t step = 0; step < steps; step++) {
      fill_batch(&train, order, step * B, B, x, labels);
      st = rlx_set_input(s, "x", x, (size_t)B * IMG * IMG * sizeof *x);
      if (!st) st = rlx_set_input(s, "label", labels, (size_t)B * sizeof *labels);
      if (!st) st = rlx_run(s);
      float loss = 0;
      if (!st) st = rlx_output(s, 0, &loss, sizeof loss);
      if (st) {
        if (tty) fputc('\n', stderr);
        rc = cli_fail(st, "training step");
        goto done;
      }
      loss_sum += loss;
      if (tty ? (step % 10 == 9 || step + 1 == steps) : (step + 1) % (steps / 10 + 1) == 0 || step + 1 == steps)
        progress(epoch, o->epochs, step + 1, steps, loss_sum / (double)(step + 1), (double)(step + 1) / (now() - t0));
      if (!tty && ((step + 1) % (steps / 10 + 1) == 0 || step + 1 == steps)) fputc('\n', stderr);
    }
    if (tty) fputc('\n', stderr);
    double train_time = now() - t0;
    /* the params after the last step are outputs 1.. of the training graph */
    for (int i = 0; i < N_PARAMS && !st; i++) {
      size_t nb = (size_t)spec_numel(&PARAMS[i]) * sizeof(float);
      st = rlx_output(s, 1 + i, pbuf[i], nb);
      if (!st) st = rlx_set_param(eval, PARAMS[i].name, pbuf[i], nb);
    }
    if (!st) st = evaluate(eval, &test, EB, x, labels, logits, &accuracy);
    if (st) {
      rc = cli_fail(st, "evaluating");
      goto done;
    }
    printf("epoch %d/%d: train loss %.4f, test accuracy %.2f%% (%.1f s, %.1f ms/step)\n", epoch, o->epochs,
           loss_sum / (double)steps, 100 * accuracy, train_time, 1e3 * train_time / (double)steps);
    fflush(stdout);
  }
  rc = 0;
done:
  for (int i = 0; i < N_PARAMS; i++) free(pbuf[i]);
  free(x);
  free(logits);
  free(labels);
  free(order);
  rlx_session_free(s);
  rlx_session_free(eval);
  rlx_graph_free(tg);
  rlx_graph_free(model);
  rlx_graph_free(eval_model);
free_data:
  for (int i = 0; i < 2; i++) {
    free(train.bufs[i]);
    free(test.bufs[i]);
  }
  return rc;
}

/* ---------------------------------------------------------------- arguments */

static int parse_num(const char *flag, const char *v, double lo, double *out) {
  char *end;
  errno = 0;
  double d = v ? strtod(v, &end) : 0;
  if (!v || *end || errno || !(d >= lo)) {
    fprintf(stderr, "rlx train: %s needs a number >= %g\n", flag, lo);
    return 0;
  }
  *out = d;
  return 1;
}

int cmd_train(int argc, char **argv) {
  if (argc < 1 || strcmp(argv[0], "mnist")) {
    fprintf(stderr, "usage: rlx train mnist [--data DIR] [--epochs N] [--batch N] [--lr X] [--optimizer adamw|sgd]\n"
                    "                       [--weight-decay X] [--threads N] [--seed N] [--limit N] [--device cpu|cuda|cuda:N]\n");
    return 2;
  }
  static char default_dir[4096];
  const char *home = getenv("HOME");
  snprintf(default_dir, sizeof default_dir, "%s/.cache/rlx/mnist", home ? home : ".");
  train_opts o = {getenv("RLX_MNIST_DIR") ? getenv("RLX_MNIST_DIR") : default_dir, 3, 64, 1000, 0, 0, -1, 0,
                  {RLX_OPTIM_ADAMW, 0, 0, 0, 0.9, 0.999, 1e-8}, RLX_DEVICE_CPU, 0, 1};
  for (int i = 1; i < argc; i += 2) { /* every option takes a value */
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    double d;
    if (!strcmp(a, "--data") && v) {
      o.data_dir = v;
    } else if (!strcmp(a, "--optimizer") && v && (!strcmp(v, "adamw") || !strcmp(v, "sgd"))) {
      o.opt.kind = !strcmp(v, "sgd") ? RLX_OPTIM_SGD : RLX_OPTIM_ADAMW;
    } else if (!strcmp(a, "--device") && v && rlx_device_parse(v, &o.device, &o.device_index) == RLX_OK) {
    } else if (!strcmp(a, "--epochs") || !strcmp(a, "--batch") || !strcmp(a, "--threads") || !strcmp(a, "--seed") ||
               !strcmp(a, "--limit") || !strcmp(a, "--lr") || !strcmp(a, "--weight-decay")) {
      int integer = strcmp(a, "--lr") && strcmp(a, "--weight-decay");
      if (!parse_num(a, v, !strcmp(a, "--epochs") || !strcmp(a, "--batch") ? 1 : 0, &d)) return 2;
      if (integer && d != floor(d)) return fprintf(stderr, "rlx train: %s needs a whole number\n", a), 2;
      if (!strcmp(a, "--epochs")) o.epochs = (int)d;
      if (!strcmp(a, "--batch")) o.batch = (int)d;
      if (!strcmp(a, "--threads")) o.threads = (int)d;
      if (!strcmp(a, "--seed")) o.seed = (uint64_t)d;
      if (!strcmp(a, "--limit")) o.limit = (int)d;
      if (!strcmp(a, "--lr")) o.lr = d;
      if (!strcmp(a, "--weight-decay")) o.weight_decay = d;
    } else {
      fprintf(stderr, "rlx train: unknown or incomplete option '%s'\n", a);
      return 2;
    }
  }
  if (o.lr < 0) o.lr = o.opt.kind == RLX_OPTIM_ADAMW ? 2e-3 : 0.05;
  o.opt.weight_decay = o.weight_decay;
  if (o.opt.kind == RLX_OPTIM_SGD) o.opt.momentum = 0.9;
  return train_mnist(&o);
}
