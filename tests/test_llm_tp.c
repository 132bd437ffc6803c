/* test_llm_tp.c — tensor parallelism of the decoder on the CPU
 * (rlx_llm_options.tp: ranks that are threads, AllReduce over a local
 * communicator): random-weight llama files of bench/make_llama_gguf.py in
 * f32, f16, q8_0 and q4_0, whose heads (8) and kv heads (4) divide by 4
 * and whose vocabulary (1001) does not, so the last rank's slice is
 * shorter. TP2 and TP4 against TP1 (the unsplit decoder, itself checked
 * against NumPy by test_llama): a prompt's logits and those of the greedy
 * steps after it (TP1's tokens fed to all) within 1e-3 of the row's
 * largest logit, and the same greedy token unless TP1's top two are closer
 * than the logits' difference. The cache's row moves (a prefix copied, a
 * context shift, state files saved by one tp and loaded by another) give
 * TP1's logits. Refused with a message: tp 3 (heads do not divide), a q4_0
 * split inside a block, several processes on the CPU. The quantized products run from x as given
 * (RLX_QMATMUL_REF=1, set by CTest): see tests/CMakeLists.txt. With "cuda"
 * as the last argument the ranks run on GPUs over NCCL (test_cuda_llm_tp;
 * exit 77, a skip, with fewer than 2). With --model FILE, a real model's
 * logits and greedy tokens at every tp of 2 to 4 that divides its heads
 * against TP1's (test_llm_tp_smollm2: SmolLM2-135M's 9 heads, 3 kv heads,
 * over 3 ranks). */
#include "check.h"
#include "ref_script.h"
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PROMPT 9
#define STEPS 8
#define VOCAB 1001   /* the random files' */

static const char *work_dir;
static const char *model_file;  /* --model: a real model instead of the random files */
static int64_t vocab = VOCAB;   /* of the file being checked */
static rlx_device device = RLX_DEVICE_CPU; /* "cuda" as the 4th argument: ranks on cuda:0, cuda:1, ... */

static const char *path_of(const char *name) {
  static char buf[4096];
  if (model_file) return model_file;
  snprintf(buf, sizeof buf, "%s/%s.gguf", work_dir, name);
  return buf;
}

static int make(const char *python, const char *bench, const char *name, const char *args) {
  return run_ref_script(python, bench, "make_llama_gguf.py", "\"%s\" %s > /dev/null", path_of(name), args) == 0;
}

static rlx_status load_seqs(const char *name, int tp, int32_t n_seq, rlx_llm **m) {
  rlx_llm_options o = {{device, 1, 0, 0, NULL}, 64, NULL, NULL, RLX_F32, n_seq, tp, 0, 0, NULL};
  return rlx_llm_open(path_of(name), &o, m);
}

static rlx_status load(const char *name, int tp, rlx_llm **m) { return load_seqs(name, tp, 1, m); }

/* The largest difference of two logit rows over the row's largest logit. */
static double rel_diff(const float *a, const float *b) {
  double scale = 0, diff = 0;
  for (int v = 0; v < vocab; v++) {
    scale = fmax(scale, fabs(a[v]));
    diff = fmax(diff, fabs((double)a[v] - b[v]));
  }
  return diff / scale;
}

/* The prompt's logits [PROMPT * V], then STEPS greedy steps' [STEPS * V]
 * fed `tokens` (NULL: its own argmax, written to greedy). */
static int run(const char *name, int tp, const int32_t *tokens, int32_t *greedy, float *logits) {
  rlx_llm *m = NULL;
  rlx_status st = load(name, tp, &m);
  CHECK(st == RLX_OK, "%s tp %d: load: %s", name, tp, rlx_last_error());
  if (st) return 0;
  int32_t prompt[PROMPT];
  for (int i = 0; i < PROMPT; i++) prompt[i] = (int32_t)((i * 379 + 11) % vocab);
  st = rlx_llm_eval(m, prompt, PROMPT, 1, logits);
  for (int s = 0; st == RLX_OK && s < STEPS; s++) {
    const float *last = logits + (size_t)(PROMPT - 1 + s) * vocab;
    int32_t best = 0;
    for (int v = 1; v < vocab; v++)
      if (last[v] > last[best]) best = v;
    if (greedy) greedy[s] = best;
    int32_t next = tokens ? tokens[s] : best;
    st = rlx_llm_eval(m, &next, 1, 0, logits + (size_t)(PROMPT + s) * vocab);
  }
  CHECK(st == RLX_OK, "%s tp %d: eval: %s", name, tp, rlx_last_error());
  rlx_llm_free(m);
  return st == RLX_OK;
}

/* Whether a CUDA session compiles on device d. */
static int gpu_there(int d) {
  rlx_graph *g = rlx_graph_new("probe");
  rlx_node x = rlx_input(g, "x", RLX_F32, 1, (const int64_t[]){4});
  rlx_node y = rlx_activation(g, RLX_ACT_RELU, x);
  rlx_graph_set_outputs(g, 1, &y);
  rlx_options o = {RLX_DEVICE_CUDA, 0, 0, d, NULL};
  rlx_session *s = NULL;
  rlx_status st = rlx_compile(g, &o, &s);
  rlx_session_free(s);
  rlx_graph_free(g);
  return st == RLX_OK;
}

/* TP1 against the tp of tps[0..n) on file `name`. */
static void check_file_tps(const char *name, const int *tps, int n) {
  const size_t rows = PROMPT + STEPS;
  float *ref = malloc(rows * vocab * sizeof *ref), *got = malloc(rows * vocab * sizeof *got);
  int32_t tokens[STEPS], greedy[STEPS];
  if (!ref || !got || !run(name, 1, NULL, tokens, ref)) {
    free(ref), free(got);
    return;
  }
  for (int k = 0; k < n; k++) {
    const int tp = tps[k];
    if (device == RLX_DEVICE_CUDA && !gpu_there(tp - 1)) continue;
    if (!run(name, tp, tokens, greedy, got)) continue;
    double worst = 0;
    int mismatches = 0;
    for (size_t r = 0; r < rows; r++) {
      const float *a = ref + r * vocab, *b = got + r * vocab;
      double scale = 0, diff = 0;
      for (int v = 0; v < vocab; v++) {
        scale = fmax(scale, fabs(a[v]));
        diff = fmax(diff, fabs((double)a[v] - b[v]));
      }
      worst = fmax(worst, diff / scale);
      /* the greedy token of the step this row decides (rows from PROMPT - 1 on) */
      if (r + 1 >= PROMPT && r + 1 - PROMPT < STEPS) {
        int s = (int)(r + 1 - PROMPT), top = tokens[s];
        double second = -INFINITY;
        for (int v = 0; v < vocab; v++)
          if (v != top) second = fmax(second, a[v]);
        if (greedy[s] != top && a[top] - second > 2 * diff) mismatches++;
      }
    }
    printf("%s tp %d: largest logit difference %.2e of the row's largest logit\n", name, tp, worst);
    CHECK(worst <= 1e-3, "%s tp %d: logits differ from tp 1 by %.3g of the row's largest", name, tp, worst);
    CHECK(mismatches == 0, "%s tp %d: %d greedy tokens differ from tp 1 without a near-tie", name, tp, mismatches);
  }
  free(ref), free(got);
}

static void check_file(const char *name) { check_file_tps(name, (const int[]){2, 4}, 2); }

/* A real model (--model FILE): TP1 against every tp of 2 to 4 its heads
 * and kv heads divide by. */
static int check_model(void) {
  rlx_model_file *f = NULL;
  rlx_llm_info info;
  if (rlx_model_file_open(model_file, &f) || rlx_llm_describe(f, &info)) {
    printf("FAIL: %s: %s\n", model_file, rlx_last_error());
    rlx_model_file_close(f);
    return 1;
  }
  rlx_model_file_close(f);
  vocab = info.n_vocab;
  int tps[3], n = 0;
  for (int tp = 2; tp <= 4; tp++)
    if (info.n_head % tp == 0 && info.n_head_kv % tp == 0 && info.n_ff % tp == 0) tps[n++] = tp;
  CHECK(n > 0, "%s: no tp of 2 to 4 divides %lld heads and %lld kv heads", model_file, (long long)info.n_head,
        (long long)info.n_head_kv);
  check_file_tps(info.arch, tps, n);
  return check_report();
}

static void check_refusals(void) {
  rlx_llm *m = NULL;
  CHECK_ERR(load("tp_f32", 3, &m), RLX_ERR_UNSUPPORTED, "head_count 8", "divide by 3");
  CHECK(m == NULL, "a refused load gives no decoder");
  CHECK_ERR(load("tp_f32", -1, &m), RLX_ERR_INVALID, "tp -1");
  /* ffn_down's 96 columns in halves of 48: inside a q4_0 block of 32 */
  CHECK_ERR(load("tp_ff96_q4_0", 2, &m), RLX_ERR_UNSUPPORTED, "ffn_down.weight", "block");
  rlx_llm_options o = {{RLX_DEVICE_CPU, 1, 0, 0, NULL}, 64, NULL, NULL, RLX_F32, 1, 2, 0, 2, "127.0.0.1:1"};
  CHECK_ERR(rlx_llm_open(path_of("tp_f32"), &o, &m), RLX_ERR_UNSUPPORTED, "need device cuda");
  o.tp = 4;
  CHECK_ERR(rlx_llm_open(path_of("tp_f32"), &o, &m), RLX_ERR_INVALID, "tp 4 differs from world 2");
}

/* The cache's host row moves on a split decoder (each rank holds its heads'
 * piece of a row) do what they do unsplit: a prefix shared into sequence 1,
 * a context shift of it (keys re-roped), a state file of TP2 loaded by TP1
 * and TP4 and one of TP1 by TP2; the next logits against TP1's. */
static void check_cache_moves(const char *name) {
  rlx_llm *m[3] = {NULL, NULL, NULL};
  const int tps[3] = {1, 2, 4};
  for (int i = 0; i < 3; i++)
    CHECK(load_seqs(name, tps[i], 2, &m[i]) == RLX_OK, "%s tp %d n_seq 2: %s", name, tps[i], rlx_last_error());
  if (!m[0] || !m[1] || !m[2]) {
    for (int i = 0; i < 3; i++) rlx_llm_free(m[i]);
    return;
  }
  rlx_llm_info info[3];
  for (int i = 0; i < 3; i++) rlx_llm_get_info(m[i], &info[i]);
  for (int i = 1; i < 3; i++)
    CHECK(info[i].kv_cache_bytes == info[0].kv_cache_bytes, "%s tp %d: a KV cache of %zu bytes; tp 1's is %zu", name,
          tps[i], info[i].kv_cache_bytes, info[0].kv_cache_bytes);
  int32_t prompt[PROMPT];
  for (int i = 0; i < PROMPT; i++) prompt[i] = (int32_t)((i * 211 + 5) % vocab);
  float *out = malloc(3 * vocab * sizeof *out);
  const int32_t tok = 17, seq1 = 1;
  const rlx_llm_batch one = {1, &tok, &seq1, NULL};
  for (int i = 0; i < 3; i++) {
    rlx_status st = rlx_llm_eval(m[i], prompt, PROMPT, 0, out + i * vocab);
    if (st == RLX_OK) st = rlx_llm_seq_copy(m[i], 0, 1, PROMPT);
    if (st == RLX_OK) st = rlx_llm_seq_shift(m[i], 1, 2, 3);
    if (st == RLX_OK) st = rlx_llm_decode(m[i], &one, out + i * vocab);
    CHECK(st == RLX_OK, "%s tp %d: copy, shift, decode: %s", name, tps[i], rlx_last_error());
  }
  for (int i = 1; i < 3; i++)
    CHECK(rel_diff(out, out + i * vocab) <= 1e-3, "%s tp %d after copy and shift: logits differ from tp 1 by %.3g",
          name, tps[i], rel_diff(out, out + i * vocab));
  /* state files across tp sizes: TP2's into TP1 and TP4, TP1's into TP2 */
  char from2[4200], from1[4200];
  snprintf(from2, sizeof from2, "%s/%s_tp2.state", work_dir, name);
  snprintf(from1, sizeof from1, "%s/%s_tp1.state", work_dir, name);
  CHECK(rlx_llm_seq_save(m[1], 0, from2) == RLX_OK, "tp 2 save: %s", rlx_last_error());
  CHECK(rlx_llm_seq_save(m[0], 0, from1) == RLX_OK, "tp 1 save: %s", rlx_last_error());
  const char *file[3] = {from2, from1, from2};
  const int32_t seq0 = 0;
  const rlx_llm_batch next = {1, &tok, &seq0, NULL};
  for (int i = 0; i < 3; i++) {
    rlx_status st = rlx_llm_seq_truncate(m[i], 0, 0);
    if (st == RLX_OK) st = rlx_llm_seq_load(m[i], 0, file[i]);
    if (st == RLX_OK) st = rlx_llm_decode(m[i], &next, out + i * vocab);
    CHECK(st == RLX_OK, "%s tp %d: load a state and decode: %s", name, tps[i], rlx_last_error());
  }
  for (int i = 1; i < 3; i++)
    CHECK(rel_diff(out, out + i * vocab) <= 1e-3, "%s tp %d after a state file: logits differ from tp 1 by %.3g",
          name, tps[i], rel_diff(out, out + i * vocab));
  free(out);
  for (int i = 0; i < 3; i++) rlx_llm_free(m[i]);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--model")) {
    model_file = argv[2];
    return check_model();
  }
  if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "cuda"))) {
    fprintf(stderr, "usage: %s PYTHON BENCH_DIR WORK_DIR [cuda] | --model FILE.gguf\n", argv[0]);
    return 2;
  }
  work_dir = argv[3];
  if (argc == 5) {
    device = RLX_DEVICE_CUDA;
    if (!gpu_there(1)) {
      printf("skipped: tensor parallelism on CUDA needs 2 GPUs\n");
      return 77;
    }
  }
  mkdir(work_dir, 0755);
  const char *shape = "--layers 2 --embd 256 --heads 8 --heads-kv 4 --ff 512 --vocab 1001";
  const char *types[] = {"f32", "f16", "q8_0", "q4_0"};
  char args[512], name[64];
  for (int i = 0; i < 4; i++) {
    snprintf(args, sizeof args, "%s --wtype %s", shape, types[i]);
    snprintf(name, sizeof name, "tp_%s", types[i]);
    if (make(argv[1], argv[2], name, args)) check_file(name);
    if (device == RLX_DEVICE_CPU && (i == 1 || i == 3)) check_cache_moves(name);
  }
  if (device == RLX_DEVICE_CPU && make(argv[1], argv[2], "tp_ff96_q4_0", "--layers 1 --embd 256 --heads 8 --heads-kv 4 --ff 96 --vocab 1001 "
           "--wtype q4_0"))
    check_refusals();
  return check_report();
}
