/* test_grammar.c — GBNF grammars, JSON schemas compiled to them, and
 * sampling under them (rlx.h "constrained decoding").
 *
 * usage: test_grammar                        parser errors, matching
 *        test_grammar MODEL PYTHON CHECKER   sampling with MODEL's vocabulary
 *
 * Without arguments:
 *   - bad grammars get RLX_ERR_FORMAT naming what is wrong (and the line);
 *   - regular grammars against POSIX extended regular expressions (libc's
 *     regcomp, an independent matcher): hand-picked and random strings are
 *     whole sentences of the grammar exactly when the regex matches them
 *     whole; a recursive grammar and UTF-8 classes on chosen strings, a
 *     code point split across two byte runs included.
 * With a model (the SmolLM2 GGUF: its 49k byte-level BPE pieces), random
 * logits sampled under a grammar (temperature 1, several seeds):
 *   - every text of a regular grammar matches its regex (a prefix of it
 *     when the token budget ran out first);
 *   - JSON schemas (rlx_json_schema_to_gbnf): every finished text parses
 *     as JSON and validates against its schema with Python's jsonschema
 *     (CHECKER reads them back); some texts finish in the budget;
 *   - a grammar that allows nothing more than it has makes sampling fail
 *     with a status instead of leaving it. */
#include "check.h"
#include "rlx.h"

#include "model/grammar.h"
#include "model/json.h"

#include <locale.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- parsing */

static void check_errors(void) {
  static const struct { const char *gbnf, *needle; } bad[] = {
      {"root ::= \"a", "end of the grammar"},
      {"root ::= foo", "foo is used but not defined"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"a ::= \"x\"", "no rule root"},
      {"root ::= root \"a\" | \"b\"", "root is left recursive"},
      {"root ::= x\nx ::= y? root \"a\"\ny ::= \"b\"", "left recursive"},
      {"root ::= [b-a]", "backwards"},
      {"root ::= \"a\"{3,1}", "maximum is below"},
      {"root ::= \"a\"{2001}", "above 2000"},
      {"root ::= \"\\q\"", "unknown escape"},
      {"root ::= \"\\x4\"", "hex digits"},
      {"root ::= *", "without an item"},
      {"root \"a\"", "expecting ::="},
      {"root ::= (\"a\"", "expecting ')'"},
      {"root ::= []", "empty character class"},
      {"root ::= \"a\" ::=", "newline or the end"},
      {"root ::= \"a\"\n  b ::= [", "line 2"},
      {"root ::= \"a\"{1", "expecting '}'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    rlx_grammar *g = (rlx_grammar *)1;
    CHECK_ERR(rlx_grammar_new(bad[i].gbnf, NULL, NULL, &g), RLX_ERR_FORMAT, bad[i].needle);
    CHECK(g == NULL, "a failed grammar is NULL");
  }
  rlx_grammar *g = NULL;
  CHECK_ERR(rlx_grammar_new(NULL, NULL, NULL, &g), RLX_ERR_INVALID, "NULL");
  CHECK_ERR(rlx_grammar_new("top ::= \"a\"", "start", NULL, &g), RLX_ERR_FORMAT, "no rule start");
  CHECK_ERR(rlx_grammar_new("top ::= \"a\" # comment\n", "top", NULL, &g), RLX_OK, "");
  rlx_grammar_free(g);
}

/* ---------------------------------------------------------------- matching */

/* Whether text is a whole sentence of g (a fresh grammar each time). */
static int sentence(const char *gbnf, const char *text, size_t len) {
  rlx_grammar *g = NULL;
  if (rlx_grammar_new(gbnf, NULL, NULL, &g)) return -1;
  int ok = grammar_accept_bytes(g, text, len) == RLX_OK && rlx_grammar_complete(g);
  rlx_grammar_free(g);
  return ok;
}

/* Regular grammars, their regexes, a sentence and the alphabet its
 * mutations draw from. */
static const struct {
  const char *gbnf, *ere, *sentence, *alphabet;
} REGULAR[] = {
    {"root ::= [a-c]{2,4} \"-\" (\"x\" | \"yz\")+", "^[a-c]{2,4}-(x|yz)+$", "abc-xyzx", "abcdxyz-"},
    {"root ::= (\"ab\" | \"a\") \"c\"*", "^(ab|a)c*$", "abcc", "abc"},
    {"root ::= [^a]? \"b\" .", "^[^a]?b.$", "cbb", "abc\n"},
    {"root ::= w (\" \" w){0,2}\nw ::= [a-b]+ [0-9]?", "^[a-b]+[0-9]?( [a-b]+[0-9]?){0,2}$", "ab1 b a2", "ab1 "},
    {"root ::= \"\" | \"q\" root?", "^q*$", "qqq", "qr"},
};

static uint64_t rng_state = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void check_regular(void) {
  for (size_t c = 0; c < sizeof REGULAR / sizeof REGULAR[0]; c++) {
    regex_t re;
    CHECK(regcomp(&re, REGULAR[c].ere, REG_EXTENDED | REG_NOSUB) == 0, "regcomp %s", REGULAR[c].ere);
    int agree = 0, matched = 0, n = 4000;
    const size_t na = strlen(REGULAR[c].alphabet);
    for (int i = 0; i < n; i++) {
      /* the sentence with up to 3 random edits: a char replaced, inserted or dropped */
      char text[32];
      size_t len = strlen(REGULAR[c].sentence);
      memcpy(text, REGULAR[c].sentence, len);
      for (int edits = (int)(next_rand() % 4); edits > 0; edits--) {
        size_t at = len ? next_rand() % len : 0;
        char ch = REGULAR[c].alphabet[next_rand() % na];
        switch (next_rand() % 3) {
          case 0: if (len) text[at] = ch; break;
          case 1: memmove(text + at + 1, text + at, len - at), text[at] = ch, len++; break;
          default: if (len) memmove(text + at, text + at + 1, len - at - 1), len--;
        }
      }
      text[len] = 0;
      int want = regexec(&re, text, 0, NULL, 0) == 0, got = sentence(REGULAR[c].gbnf, text, len);
      matched += want;
      if (want == got) agree++;
      else if (agree + 5 > i) printf("  %s: \"%s\": grammar %d, regex %d\n", REGULAR[c].gbnf, text, got, want);
    }
    CHECK(agree == n, "%s: %d of %d random strings agree with %s", REGULAR[c].gbnf, agree, n, REGULAR[c].ere);
    CHECK(matched > n / 10 && matched < n, "%s: %d of %d strings matched", REGULAR[c].gbnf, matched, n);
    regfree(&re);
  }
  /* recursive (not regular) */
  const char *expr = "root ::= term (\"+\" term)*\nterm ::= [0-9]+ | \"(\" root \")\"";
  const char *yes[] = {"1", "1+2", "(1+2)+3", "((4))", "(1+(2+3))+45"}, *no[] = {"", "+", "(1", "1+", "(1+2))", "()"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) CHECK(sentence(expr, yes[i], strlen(yes[i])) == 1, "%s", yes[i]);
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) CHECK(sentence(expr, no[i], strlen(no[i])) == 0, "%s", no[i]);
  /* UTF-8 classes and escapes */
  const char *greek = "root ::= [\\u03B1-\\u03C9]+ \"!\" | \"\\U0001F600\"";
  CHECK(sentence(greek, "\xce\xb1\xce\xb2!", 5) == 1, "greek letters");
  CHECK(sentence(greek, "a!", 2) == 0, "latin is not greek");
  CHECK(sentence(greek, "\xf0\x9f\x98\x80", 4) == 1, "an escaped emoji");
  CHECK(sentence(greek, "\xce", 1) == 0, "half a code point is not a sentence");
  rlx_grammar *g = NULL;
  CHECK(rlx_grammar_new(greek, NULL, NULL, &g) == RLX_OK, "greek: %s", rlx_last_error());
  CHECK(g && grammar_accept_bytes(g, "\xce", 1) == RLX_OK, "a code point's first byte, alone");
  CHECK(g && grammar_accept_bytes(g, "\xb1!", 2) == RLX_OK && rlx_grammar_complete(g), "and the rest");
  CHECK(g && grammar_accept_bytes(g, "x", 1) == RLX_ERR_INVALID, "nothing after the end");
  rlx_grammar_free(g);
  g = NULL;
  CHECK(rlx_grammar_new(greek, NULL, NULL, &g) == RLX_OK, "greek");
  CHECK(g && grammar_accept_bytes(g, "\xe2\x82", 2) == RLX_ERR_INVALID, "a first byte no class takes");
  rlx_grammar_free(g);
}

/* ---------------------------------------------------------------- sampling */

/* text as a JSON string into f. */
static void put_json_string(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

typedef struct {
  char text[4096];
  size_t len;
  int finished;  /* the sampler picked an end-of-generation token */
} sample;

/* Up to max_tokens tokens drawn from random logits under grammar gbnf. */
static rlx_status generate(const rlx_tokenizer *tok, const char *gbnf, uint64_t seed, int max_tokens, sample *out) {
  const int64_t V = rlx_tokenizer_vocab_size(tok);
  rlx_grammar *g = NULL;
  rlx_sampler *s = NULL;
  float *logits = malloc((size_t)V * sizeof *logits);
  rlx_sampler_params p = rlx_sampler_default_params();
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  rlx_status st = logits ? rlx_grammar_new(gbnf, NULL, tok, &g) : RLX_ERR_NOMEM;
  if (st == RLX_OK) st = rlx_sampler_new(&p, V, &s);
  if (st == RLX_OK) st = rlx_sampler_set_grammar(s, g);
  out->len = 0;
  out->finished = 0;
  uint64_t x = seed * 2654435761u + 1;
  for (int i = 0; i < max_tokens && st == RLX_OK && !out->finished; i++) {
    for (int64_t v = 0; v < V; v++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      logits[v] = (float)((double)(x >> 11) * 0x1p-53 * 6.0);
      if (rlx_token_is_eog(tok, (int32_t)v)) logits[v] += 10.0f; /* ends soon where it may */
    }
    int32_t t = rlx_sampler_sample(s, logits);
    if (t < 0) {
      st = RLX_ERR_INVALID;
      break;
    }
    if (rlx_token_is_eog(tok, t)) {
      out->finished = 1;
      break;
    }
    size_t n = 0;
    st = rlx_token_to_piece(tok, t, 0, out->text + out->len, sizeof out->text - 1 - out->len, &n);
    out->len += n;
  }
  out->text[out->len] = 0;
  rlx_sampler_free(s);
  rlx_grammar_free(g);
  free(logits);
  return st;
}

static const char *const SCHEMAS[] = {
    NULL, /* json_object */
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 12}, \"age\": "
    "{\"type\": \"integer\"}, \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"b\", 3]}, "
    "\"maxItems\": 3}}, \"required\": [\"name\", \"age\"], \"additionalProperties\": false}",
    "{\"type\": \"array\", \"items\": {\"anyOf\": [{\"type\": \"number\"}, {\"type\": \"boolean\"}, {\"const\": null}]},"
    " \"minItems\": 1, \"maxItems\": 4}",
    "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"}, \"next\": "
    "{\"anyOf\": [{\"$ref\": \"#/$defs/node\"}, {\"type\": \"null\"}]}}, \"required\": [\"v\", \"next\"]}}, "
    "\"$ref\": \"#/$defs/node\"}",
    "{\"type\": \"object\", \"properties\": {\"x\": {\"type\": [\"string\", \"null\"]}, \"y\": {\"type\": "
    "\"boolean\"}}}",
};

static void check_sampling(const char *model, const char *python, const char *checker) {
  rlx_model_file *f = NULL;
  rlx_tokenizer *tok = NULL;
  rlx_status st = rlx_model_file_open(model, &f);
  if (st == RLX_OK) st = rlx_tokenizer_load(f, &tok);
  CHECK(st == RLX_OK, "%s: %s", model, rlx_last_error());
  if (st) return;
  /* regular grammars: the text matches, or is cut by the budget */
  for (size_t c = 0; c < sizeof REGULAR / sizeof REGULAR[0]; c++) {
    regex_t re;
    regcomp(&re, REGULAR[c].ere, REG_EXTENDED | REG_NOSUB);
    int ok = 0, finished = 0;
    for (uint64_t seed = 1; seed <= 6; seed++) {
      sample smp;
      st = generate(tok, REGULAR[c].gbnf, seed, 24, &smp);
      CHECK(st == RLX_OK, "%s: seed %d: %s", REGULAR[c].gbnf, (int)seed, rlx_last_error());
      int match = regexec(&re, smp.text, 0, NULL, 0) == 0;
      finished += smp.finished;
      if (smp.finished ? match : 1) ok++;
      else printf("  %s: \"%s\" does not match\n", REGULAR[c].ere, smp.text);
    }
    CHECK(ok == 6, "%s: %d of 6 texts match", REGULAR[c].ere, ok);
    CHECK(finished > 0, "%s: no text finished", REGULAR[c].ere);
    regfree(&re);
  }
  /* schemas: finished texts to the checker */
  char path[4096];
  snprintf(path, sizeof path, "%s", "grammar_samples.jsonl");
  FILE *out = fopen(path, "w");
  int finished = 0, total = 0;
  for (size_t c = 0; c < sizeof SCHEMAS / sizeof SCHEMAS[0] && out; c++) {
    char *gbnf = NULL;
    st = rlx_json_schema_to_gbnf(SCHEMAS[c], &gbnf);
    CHECK(st == RLX_OK, "schema %zu: %s", c, rlx_last_error());
    for (uint64_t seed = 1; seed <= 6 && gbnf; seed++, total++) {
      sample smp;
      st = generate(tok, gbnf, 100 * c + seed, 160, &smp);
      CHECK(st == RLX_OK, "schema %zu, seed %d: %s", c, (int)seed, rlx_last_error());
      json_doc d;
      if (!smp.finished) continue;
      finished++;
      CHECK(json_parse(smp.text, smp.len, "sample", &d) == RLX_OK, "schema %zu: \"%s\" is not JSON: %s", c, smp.text,
            rlx_last_error());
      json_free(&d);
      fputs("{\"schema\": ", out);
      if (SCHEMAS[c]) fputs(SCHEMAS[c], out);
      else fputs("{\"type\": \"object\"}", out);
      fputs(", \"text\": ", out);
      put_json_string(out, smp.text, smp.len);
      fputs("}\n", out);
    }
    free(gbnf);
  }
  if (out) fclose(out);
  printf("schemas: %d of %d texts finished in 160 tokens\n", finished, total);
  CHECK(finished >= total / 2, "only %d of %d texts finished", finished, total);
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", python, checker, path);
  CHECK(system(cmd) == 0, "%s: texts fail their schemas", cmd);

  /* a grammar whose sentence is done allows only the end; the end where
   * the vocabulary has no end token... is the EOS here: after it, nothing */
  rlx_grammar *g = NULL;
  CHECK(rlx_grammar_new("root ::= \"ab\"", NULL, tok, &g) == RLX_OK, "ab: %s", rlx_last_error());
  int32_t eos = rlx_token_eos(tok), ids[8];
  int64_t n = 0;
  CHECK(rlx_tokenize(tok, "ab", 2, 0, 0, ids, 8, &n) == RLX_OK && n >= 1, "tokenize ab");
  CHECK(g && !rlx_grammar_allows(g, eos), "the end before the sentence");
  for (int64_t i = 0; g && i < n; i++) CHECK(rlx_grammar_accept(g, ids[i]) == RLX_OK, "ab's token %lld", (long long)i);
  CHECK(g && rlx_grammar_complete(g) && rlx_grammar_allows(g, eos), "the end after it");
  CHECK(g && !rlx_grammar_allows(g, ids[0]), "nothing more");
  CHECK_ERR(rlx_grammar_accept(g, ids[0]), RLX_ERR_INVALID, "does not allow");
  rlx_grammar_free(g);
  rlx_tokenizer_free(tok);
  rlx_model_file_close(f);
}

int main(int argc, char **argv) {
  if (argc != 1 && argc != 4) {
    fprintf(stderr, "usage: %s [MODEL PYTHON CHECKER]\n", argv[0]);
    return 2;
  }
  /* code points for the regexes, as the grammars read them */
  if (!setlocale(LC_CTYPE, "C.UTF-8")) setlocale(LC_CTYPE, "en_US.UTF-8");
  if (argc == 4) {
    if (!*argv[1]) {
      printf("SKIP: no model\n");
      return 77;
    }
    check_sampling(argv[1], argv[2], argv[3]);
  } else {
    check_errors();
    check_regular();
  }
  return check_report();
}
