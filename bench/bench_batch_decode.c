/* bench_batch_decode.c — batched decode through rlx_llm_decode, for
 * bench_batch_decode.py (not a test).
 *
 *   bench_batch_decode [--cpu-time | --cuda] [--cache-type T] MODEL.gguf THREADS PROMPT STEPS RUNS N [N ...]
 *
 * For each N: a decoder of N sequences (n_ctx PROMPT + STEPS + 1); each
 * sequence is prefilled alone with a distinct PROMPT-token prompt (so its
 * cells form one run in the KV pool, as a server's prefills do), then
 * STEPS decode steps run all N sequences in one batch, each fed its own
 * greedy (argmax) token: the decoded tokens' cells interleave. Each run
 * starts over (the sequences truncated to 0). Prints per N:
 * "N SEC_1 .. SEC_RUNS", the wall time of the STEPS decode steps of a run
 * (the prefills are not timed); with --cpu-time the process's CPU time
 * instead of the wall time (for 1-thread runs on a busy machine). With
 * --cuda the decoder runs on the GPU (THREADS: the CPU threads of any
 * fallback). --cache-type: the KV cache's type, f32, f16, bf16, q8_0 or
 * q4_0 (default f16 with --cuda, else f32). */
#include "bench_util.h"
#include "rlx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static rlx_device device = RLX_DEVICE_CPU;
static rlx_dtype cache_type = RLX_DTYPE_COUNT; /* RLX_DTYPE_COUNT: the device's default */

static int32_t argmax(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return (int32_t)best;
}

static int fail(const char *what) {
  fprintf(stderr, "bench_batch_decode: %s: %s\n", what, rlx_last_error());
  return 1;
}

/* Token i of sequence s's prompt, among V: spread over [500, V - 500),
 * clear of the special tokens at a large vocabulary's ends, or over all of
 * a vocabulary of 1000 or fewer (a test model's). */
static int32_t prompt_token(int64_t i, int32_t s, int64_t V) {
  const int64_t margin = V > 1000 ? 500 : 0;
  return (int32_t)((1000 + 7919 * (i + 1) + 104729 * (int64_t)s) % (V - 2 * margin) + margin);
}

/* One run: prefill every sequence, then time the decode steps. */
static int run(rlx_llm *m, int32_t n_seq, int64_t prompt, int64_t steps, double *sec) {
  const int64_t V = rlx_llm_vocab_size(m);
  int32_t *tok = malloc((size_t)(prompt > n_seq ? prompt : n_seq) * sizeof *tok);
  int32_t *seq = malloc((size_t)(prompt > n_seq ? prompt : n_seq) * sizeof *seq);
  int8_t *want = calloc((size_t)prompt, 1);
  float *logits = malloc((size_t)(V * n_seq) * sizeof *logits);
  int32_t *next = malloc((size_t)n_seq * sizeof *next);
  int rc = 1;
  if (!tok || !seq || !want || !logits || !next) {
    fprintf(stderr, "bench_batch_decode: out of memory\n");
    goto done;
  }
  want[prompt - 1] = 1;
  for (int32_t s = 0; s < n_seq; s++) {
    if (rlx_llm_seq_truncate(m, s, 0)) {
      fail("truncate");
      goto done;
    }
    for (int64_t i = 0; i < prompt; i++) {
      tok[i] = prompt_token(i, s, V);
      seq[i] = s;
    }
    rlx_llm_batch b = {prompt, tok, seq, want};
    if (rlx_llm_decode(m, &b, logits)) {
      fail("prefill");
      goto done;
    }
    next[s] = argmax(logits, V);
  }
  double t0 = bench_now();
  for (int64_t step = 0; step < steps; step++) {
    for (int32_t s = 0; s < n_seq; s++) tok[s] = next[s], seq[s] = s;
    rlx_llm_batch b = {n_seq, tok, seq, NULL};
    if (rlx_llm_decode(m, &b, logits)) {
      fail("decode");
      goto done;
    }
    for (int32_t s = 0; s < n_seq; s++) next[s] = argmax(logits + (size_t)s * V, V);
  }
  *sec = bench_now() - t0;
  rc = 0;
done:
  free(tok);
  free(seq);
  free(want);
  free(logits);
  free(next);
  return rc;
}

int main(int argc, char **argv) {
  for (; argc > 1 && strncmp(argv[1], "--", 2) == 0; argv++, argc--) {
    if (strcmp(argv[1], "--cpu-time") == 0) bench_clock = CLOCK_PROCESS_CPUTIME_ID;
    else if (strcmp(argv[1], "--cuda") == 0) device = RLX_DEVICE_CUDA;
    else if (strcmp(argv[1], "--cache-type") == 0 && argc > 2) {
      for (int t = 0; t < RLX_DTYPE_COUNT; t++)
        if (!strcmp(rlx_dtype_name((rlx_dtype)t), argv[2])) cache_type = (rlx_dtype)t;
      if (cache_type == RLX_DTYPE_COUNT) {
        fprintf(stderr, "bench_batch_decode: --cache-type %s is not a dtype\n", argv[2]);
        return 2;
      }
      argv++, argc--;
    } else break;
  }
  if (argc < 7) {
    fprintf(stderr, "usage: %s [--cpu-time | --cuda] [--cache-type T] MODEL.gguf THREADS PROMPT STEPS RUNS N [N ...]\n",
            argv[0]);
    return 2;
  }
  const int threads = atoi(argv[2]);
  const int64_t prompt = atoll(argv[3]), steps = atoll(argv[4]);
  const int runs = atoi(argv[5]);
  if (threads < 0 || prompt < 1 || steps < 1 || runs < 1) {
    fprintf(stderr, "bench_batch_decode: bad THREADS, PROMPT, STEPS or RUNS\n");
    return 2;
  }
  rlx_model_file *f;
  if (rlx_model_file_open(argv[1], &f)) return fail(argv[1]);
  int rc = 0;
  for (int a = 6; a < argc && !rc; a++) {
    const int32_t n_seq = atoi(argv[a]);
    rlx_llm_options o = {.compile = {.device = device, .threads = threads},
                         .n_ctx = prompt + steps + 1,
                         .cache_type = cache_type != RLX_DTYPE_COUNT ? cache_type
                                       : device == RLX_DEVICE_CUDA ? RLX_F16 : RLX_F32,
                         .n_seq = n_seq};
    rlx_llm *m;
    if (n_seq < 1 || rlx_llm_load(f, &o, &m)) {
      rc = fail("load");
      break;
    }
    double sec = 0;
    rc = run(m, n_seq, prompt, steps, &sec); /* warm-up: plans, packed weights */
    if (!rc) printf("%d", (int)n_seq);
    for (int r = 0; r < runs && !rc; r++) {
      rc = run(m, n_seq, prompt, steps, &sec);
      if (!rc) printf(" %.6f", sec);
    }
    printf("\n");
    rlx_llm_info info;
    if (!rc && device == RLX_DEVICE_CUDA && !rlx_llm_get_info(m, &info))
      fprintf(stderr, "N %d: %lld nodes on the CPU\n", (int)n_seq, (long long)info.fallback_nodes);
    fflush(stdout);
    rlx_llm_free(m);
  }
  rlx_model_file_close(f);
  return rc;
}
