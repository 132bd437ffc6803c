/* test_wordpiece.c — the encoder tokenizer (src/model/tokenizer_wordpiece.c,
 * tokenizer_unigram.c) against Hugging Face tokenizers: every case the
 * generator wrote must give exactly tokenizers' ids and type ids —
 * ref/wordpiece_ref.py: all-MiniLM-L6-v2's tokenizer.json and variants of
 * its normalizer, its vocab.txt; ref/unigram_ref.py: SentencePiece unigram
 * models as XLM-RoBERTa-style tokenizer.json files; single texts and pairs,
 * with and without truncation. Then hostile tokenizer.json texts get a
 * status and a message.
 *
 * usage: test_wordpiece PYTHON REF_DIR WORK_DIR [GENERATOR] (default
 * wordpiece_ref.py; exit 77: the generator's model package is missing) */
#include "check.h"
#include "ref_data.h"
#include "ref_script.h"
#include "model/wordpiece.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VARIANTS 8

typedef struct {
  const uint8_t *p, *end;
} reader;

static int rd_i32(reader *r, int32_t *v) {
  if (r->end - r->p < 4) return 0;
  memcpy(v, r->p, 4);
  r->p += 4;
  return 1;
}

static const char *rd_text(reader *r, int32_t *len) {
  if (!rd_i32(r, len) || *len < 0 || r->end - r->p < *len) return NULL;
  const char *s = (const char *)r->p;
  r->p += *len;
  return s;
}

static void check_parity(void) {
  wp_tokenizer *tok[MAX_VARIANTS] = {0};
  int n_variants = 0;
  for (int v = 0; v < MAX_VARIANTS; v++, n_variants++) {
    char name[64];
    size_t len;
    snprintf(name, sizeof name, "tok_%d.json", v);
    char *text = read_work(name, &len);
    rlx_status st;
    if (text) {
      st = wp_load_json(text, len, name, &tok[v]);
    } else {
      snprintf(name, sizeof name, "vocab_%d.txt", v);
      text = read_work(name, &len);
      if (!text) break;
      st = wp_load_vocab(text, len, name, 1, &tok[v]);
    }
    CHECK(st == RLX_OK, "%s: %s", name, rlx_last_error());
    free(text);
  }
  CHECK(n_variants > 0, "no tok_0.json or vocab_0.txt");
  size_t len;
  uint8_t *data = read_work("cases.bin", &len);
  CHECK(data != NULL, "no cases.bin");
  reader r = {data, data + len};
  int n_cases = 0, n_bad = 0, per_variant[MAX_VARIANTS] = {0};
  wp_ids o = {0};
  int32_t v, pair, max_len, alen, blen, n;
  while (data && r.p < r.end) {
    const char *a, *b;
    if (!rd_i32(&r, &v) || !rd_i32(&r, &pair) || !rd_i32(&r, &max_len) || !(a = rd_text(&r, &alen)) ||
        !(b = rd_text(&r, &blen)) || !rd_i32(&r, &n) || n < 0 || r.end - r.p < 8 * (int64_t)n || v < 0 ||
        v >= n_variants) {
      CHECK(0, "cases.bin is malformed at byte %td", r.p - data);
      break;
    }
    int32_t *ids = malloc(8 * (size_t)n + 8), *types = ids + n;  /* the file's ints are unaligned */
    memcpy(ids, r.p, 8 * (size_t)n);
    r.p += 8 * (size_t)n;
    n_cases++;
    per_variant[v]++;
    if (!tok[v]) {
      free(ids);
      continue;
    }
    rlx_status st = wp_encode(tok[v], a, (size_t)alen, pair ? b : NULL, (size_t)blen, 1, max_len, &o);
    int same = st == RLX_OK && o.n == n;
    for (int64_t i = 0; same && i < n; i++) same = o.ids[i] == ids[i] && o.types[i] == types[i];
    if (!same && n_bad++ < 8) {
      int64_t i = 0;
      while (i < n && i < o.n && o.ids[i] == ids[i]) i++;
      CHECK(0, "variant %d pair %d max_len %d text \"%.*s\": %lld ids (HF %d), first difference at %lld: %d (HF %d)",
            v, pair, max_len, alen > 80 ? 80 : alen, a, (long long)o.n, n, (long long)i, i < o.n ? o.ids[i] : -1,
            i < n ? ids[i] : -1);
    } else if (same) {
      check_passed++;
    }
    free(ids);
  }
  CHECK(n_bad == 0, "%d of %d cases differ from Hugging Face tokenizers", n_bad, n_cases);
  for (int i = 0; i < n_variants; i++) CHECK(per_variant[i] > 600, "variant %d: %d cases", i, per_variant[i]);
  printf("tokenizer: %d cases of %d variants against Hugging Face tokenizers, %d differ\n", n_cases, n_variants, n_bad);
  wp_ids_free(&o);
  free(data);
  for (int i = 0; i < n_variants; i++) wp_free(tok[i]);
}

/* Hostile or wrong tokenizer.json texts: a status and a message. */
static void check_bad(void) {
  static const struct {
    const char *json;
    rlx_status want;
    const char *needle;
  } cases[] = {
      {"", RLX_ERR_FORMAT, "unexpected end"},
      {"{\"model\": ", RLX_ERR_FORMAT, "unexpected end"},
      {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
       RLX_ERR_FORMAT, "nested too deeply"},
      {"{\"a\": \"\\x\"}", RLX_ERR_FORMAT, "bad escape"},
      {"{\"a\": \"\xff\"}", RLX_ERR_FORMAT, "invalid UTF-8"},
      {"{\"a\": 01}", RLX_ERR_FORMAT, "expected ','"},
      {"{\"a\": 1} x", RLX_ERR_FORMAT, "trailing"},
      {"{1: 2}", RLX_ERR_FORMAT, "key is not a string"},
      {"{\"a\": [1, 2}", RLX_ERR_FORMAT, "expected ','"},
      {"[]", RLX_ERR_FORMAT, "not a JSON object"},
      {"{}", RLX_ERR_FORMAT, "no \"model\""},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {}}}", RLX_ERR_UNSUPPORTED, "not WordPiece"},
      {"{\"model\": {\"vocab\": {\"a\": -1}}}", RLX_ERR_FORMAT, "not an integer"},
      {"{\"model\": {\"vocab\": {\"a\": 0, \"b\": 0}}}", RLX_ERR_FORMAT, "twice"},
      {"{\"model\": {\"vocab\": {\"a\": 0}}}", RLX_ERR_FORMAT, "unk_token"},
      {"{\"model\": {\"unk_token\": \"a\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": null}", RLX_ERR_UNSUPPORTED,
       "pre_tokenizer"},
      {"{\"model\": {\"unk_token\": \"a\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
       " \"added_tokens\": [{\"id\": 5, \"content\": \"x\"}]}",
       RLX_ERR_FORMAT, "added token"},
      {"{\"model\": {\"unk_token\": \"a\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
       " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"[X]\"}}]}}",
       RLX_ERR_FORMAT, "special token"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": {}}}", RLX_ERR_FORMAT, "[piece, score]"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}", RLX_ERR_FORMAT, "model.vocab[0]"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0], [\"a\", -1]]}}", RLX_ERR_FORMAT, "twice"},
      {"{\"model\": {\"type\": \"Unigram\", \"unk_id\": 2, \"vocab\": [[\"a\", 0]]}}", RLX_ERR_FORMAT, "unk_id"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"normalizer\": {\"type\": \"Precompiled\","
       " \"precompiled_charsmap\": \"AAAA!\"}}",
       RLX_ERR_FORMAT, "precompiled_charsmap"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"normalizer\": {\"type\": \"Precompiled\","
       " \"precompiled_charsmap\": \"/////wAAAAA=\"}}",
       RLX_ERR_FORMAT, "not base64 of a trie"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"normalizer\": {\"type\": \"Replace\","
       " \"pattern\": {\"Regex\": \"a|b\"}, \"content\": \"\"}}",
       RLX_ERR_UNSUPPORTED, "not supported"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"normalizer\": {\"type\": \"NFKC\"}}",
       RLX_ERR_UNSUPPORTED, "normalizer"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"pre_tokenizer\": {\"type\": \"Metaspace\","
       " \"replacement\": \"ab\"}}",
       RLX_ERR_FORMAT, "one character"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    wp_tokenizer *t = (wp_tokenizer *)1;
    CHECK_ERR(wp_load_json(cases[i].json, strlen(cases[i].json), "bad.json", &t), cases[i].want, cases[i].needle,
              "bad.json");
    CHECK(t == NULL, "case %zu: no tokenizer on failure", i);
  }
  /* a minimal good one: empty text, invalid UTF-8 and a pair still encode */
  const char *ok = "{\"model\": {\"unk_token\": \"[UNK]\", \"vocab\": {\"[UNK]\": 0, \"a\": 1, \"##b\": 2}},"
                   " \"normalizer\": {\"type\": \"BertNormalizer\"}, \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}";
  wp_tokenizer *t = NULL;
  CHECK(wp_load_json(ok, strlen(ok), "ok.json", &t) == RLX_OK, "%s", rlx_last_error());
  if (t) {
    wp_ids o = {0};
    CHECK(wp_encode(t, "", 0, NULL, 0, 1, 0, &o) == RLX_OK && o.n == 0, "empty text: %lld ids", (long long)o.n);
    CHECK(wp_encode(t, "ab \xff\xfe a", 8, "A", 1, 1, 0, &o) == RLX_OK && o.n == 4, "%lld ids", (long long)o.n);
    CHECK(o.n == 4 && o.ids[0] == 1 && o.ids[1] == 2 && o.ids[2] == 1 && o.ids[3] == 1 && o.types[3] == 1,
          "ids %d %d %d %d", o.ids[0], o.ids[1], o.ids[2], o.ids[3]);
    wp_ids_free(&o);
    wp_free(t);
  }
  /* a minimal Unigram one (ids as tokenizers gives them): bytes spelled out, unknown runs fused */
  const char *ug = "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"byte_fallback\": true, \"vocab\": [[\"<unk>\", 0],"
                   " [\"\\u2581a\", -1], [\"b\", -2], [\"<0xC3>\", 0], [\"<0xA9>\", 0]]},"
                   " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\"}}";
  t = NULL;
  CHECK(wp_load_json(ug, strlen(ug), "ug.json", &t) == RLX_OK, "%s", rlx_last_error());
  if (t) {
    wp_ids o = {0};
    CHECK(wp_encode(t, "", 0, NULL, 0, 1, 0, &o) == RLX_OK && o.n == 0, "empty text: %lld ids", (long long)o.n);
    CHECK(wp_encode(t, "ab\xc3\xa9", 4, NULL, 0, 0, 0, &o) == RLX_OK && o.n == 4, "%lld ids", (long long)o.n);
    CHECK(o.n == 4 && o.ids[0] == 1 && o.ids[1] == 2 && o.ids[2] == 3 && o.ids[3] == 4, "ids %d %d %d %d", o.ids[0],
          o.ids[1], o.ids[2], o.ids[3]);
    /* é, x, y and the invalid byte (U+FFFD) fuse into one unknown run, which has no byte spelling */
    CHECK(wp_encode(t, "ab\xc3\xa9xy\xff", 7, NULL, 0, 0, 0, &o) == RLX_OK && o.n == 3 && o.ids[2] == 0, "%lld ids",
          (long long)o.n);
    wp_ids_free(&o);
    wp_free(t);
  }
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: test_wordpiece PYTHON REF_DIR WORK_DIR [GENERATOR]\n");
    return 2;
  }
  work_dir = argv[3];
  const char *gen = argc > 4 ? argv[4] : "wordpiece_ref.py";
  const int rc = run_ref_script(argv[1], argv[2], gen, "\"%s\"", work_dir);
  check_bad();
  if (rc == REF_SKIP) {
    check_report();
    printf("SKIP: %s's model package is not installed\n", gen);
    return REF_SKIP;
  }
  CHECK(rc == 0, "%s failed (%d)", gen, rc);
  if (rc == 0) check_parity();
  return check_report();
}
