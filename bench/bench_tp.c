/* bench_tp.c — tensor parallelism of the decoder (driven by bench_tp.sh):
 * for each tp of a list, load MODEL split over tp ranks (threads; rank r
 * on device D + r), prefill a fixed prompt of token ids, then decode N
 * tokens greedily, fed TP1's tokens so every tp sees the same inputs.
 * Prints a row per tp: load seconds, the largest logit difference from
 * the first tp of the list (relative to each row's largest logit), greedy
 * tokens that differ, decode tokens/s (median of 3 passes), its ratio to
 * the first tp's, and the fraction of the HBM roofline (weight bytes read
 * per token over tp GPUs of --bw GB/s each).
 *
 *   bench_tp MODEL.gguf [--tp 1,2,4] [--device cuda|cpu] [--prompt 32]
 *            [--gen 64] [--bw 3350] [--ctx 512] [--dump FILE]
 *            [--rank R --world W --master ADDR:PORT]
 *
 * --dump: the greedy tokens of the last tp of the list, as text, into FILE.
 * --world: this process is one rank (tp W, the list ignored); rank 0
 * prints and dumps, the others only take part. */
#include "bench_util.h"
#include "rlx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [--tp 1,2,4] [--device cuda|cpu] [--prompt N] [--gen N] [--bw GB/s] "
            "[--ctx N]\n", argv[0]);
    return 2;
  }
  const char *model = argv[1], *tps = "1,2,4", *dev = "cuda", *dump = NULL, *master = NULL;
  int prompt = 32, gen = 64, ctx = 512, rank = 0, world = 0;
  double bw = 3350;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--tp")) tps = argv[i + 1];
    else if (!strcmp(argv[i], "--device")) dev = argv[i + 1];
    else if (!strcmp(argv[i], "--prompt")) prompt = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--gen")) gen = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--bw")) bw = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--ctx")) ctx = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--dump")) dump = argv[i + 1];
    else if (!strcmp(argv[i], "--rank")) rank = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--world")) world = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--master")) master = argv[i + 1];
    else {
      fprintf(stderr, "bench_tp: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  rlx_device device;
  int device_index;
  if (rlx_device_parse(dev, &device, &device_index) || prompt < 1 || gen < 1 || prompt + gen + 1 > ctx) {
    fprintf(stderr, "bench_tp: bad --device, --prompt, --gen or --ctx\n");
    return 2;
  }
  float *ref = NULL, *logits = NULL;
  int32_t *tokens = malloc((size_t)(prompt + gen) * sizeof *tokens);
  double ref_tps = 0;
  int64_t V = 0;
  const int quiet = world > 1 && rank > 0;
  if (!quiet)
    printf("%-4s %8s %14s %9s %12s %9s %10s\n", "tp", "load s", "max rel diff", "greedy≠", "decode t/s", "vs first",
           "roofline");
  char list[256];
  snprintf(list, sizeof list, "%d", world);
  if (world <= 1) snprintf(list, sizeof list, "%s", tps);
  int first = 1, rc = 0;
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","), first = 0) {
    const int tp = atoi(tok);
    rlx_llm_options o = {{device, 0, 0, device_index, NULL}, ctx, NULL, NULL, RLX_F32, 1, tp, rank, world, master};
    rlx_llm *m = NULL;
    double t0 = bench_now();
    if (rlx_llm_open(model, &o, &m)) {
      printf("%-4d load failed: %s\n", tp, rlx_last_error());
      rc = 1;
      continue;
    }
    double t_load = bench_now() - t0;
    rlx_llm_info info;
    rlx_llm_get_info(m, &info);
    if (!V) {
      V = info.n_vocab;
      ref = malloc((size_t)(gen + 1) * (size_t)V * sizeof *ref);
      logits = malloc((size_t)(gen + 1) * (size_t)V * sizeof *logits);
      for (int i = 0; i < prompt; i++) tokens[i] = (int32_t)((i * 7919 + 13) % V);
    }
    double best_rel = 0, pass_tps[3];
    int differ = 0;
    for (int pass = 0; pass < 3 && rc == 0; pass++) {
      rlx_llm_truncate(m, 0);
      rlx_status st = rlx_llm_eval(m, tokens, prompt, 0, logits);
      double t1 = bench_now();
      for (int s = 0; st == RLX_OK && s < gen; s++) {
        float *row = logits + (size_t)s * V, *next = row + V;
        int32_t arg = 0;
        for (int64_t v = 1; v < V; v++)
          if (row[v] > row[arg]) arg = (int32_t)v;
        if (first && pass == 0) tokens[prompt + s] = arg;
        else if (pass == 0 && arg != tokens[prompt + s]) differ++;
        st = rlx_llm_eval(m, &tokens[prompt + s], 1, 0, next);
      }
      pass_tps[pass] = gen / (bench_now() - t1);
      if (st) {
        printf("%-4d run failed: %s\n", tp, rlx_last_error());
        rc = 1;
        break;
      }
      if (pass == 0 && first) memcpy(ref, logits, (size_t)(gen + 1) * (size_t)V * sizeof *ref);
      if (pass == 0 && !first)
        for (int s = 0; s <= gen; s++) {
          double scale = 0, diff = 0;
          for (int64_t v = 0; v < V; v++) {
            scale = fmax(scale, fabs(ref[(size_t)s * V + v]));
            diff = fmax(diff, fabs((double)ref[(size_t)s * V + v] - logits[(size_t)s * V + v]));
          }
          best_rel = fmax(best_rel, diff / scale);
        }
    }
    if (rc == 0) {
      double tps_med = bench_median(pass_tps, 3);
      if (first) ref_tps = tps_med;
      /* a token reads every weight byte once, spread over tp GPUs */
      double roof = (double)info.weight_bytes * tps_med / (tp * bw * 1e9);
      if (!quiet)
        printf("%-4d %8.1f %14.2e %9d %12.1f %8.2fx %9.0f%%\n", tp, t_load, best_rel, differ, tps_med,
               tps_med / ref_tps, 100 * roof);
    }
    FILE *df = rc == 0 && dump && !quiet ? fopen(dump, "w") : NULL;
    if (df) {
      /* this tp's greedy tokens: the first's were its own, the others' counted in greedy≠ */
      for (int s = 0; s < gen; s++) {
        const float *row = logits + (size_t)s * V;
        int32_t arg = 0;
        for (int64_t v = 1; v < V; v++)
          if (row[v] > row[arg]) arg = (int32_t)v;
        fprintf(df, "%d\n", (int)arg);
      }
      fclose(df);
    }
    rlx_llm_free(m);
    fflush(stdout);
  }
  free(ref), free(logits), free(tokens);
  return rc;
}
