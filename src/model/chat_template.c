/* chat_template.c — the model's chat format for --chat. rlx runs no Jinja:
 * it recognizes the template family from marker strings in
 * tokenizer.chat_template (as llama.cpp does) and renders that family.
 *
 * The output leaves out the BOS token the template writes first: rlx_tokenize
 * with add_special adds it (writing it here as well would double it).
 * A chatml template that opens with a default system message when the
 * conversation has none (SmolLM2, Qwen 2) has it taken from its text. */
#include "ir/ir.h"
#include "rlx.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef enum { CHAT_CHATML, CHAT_LLAMA2, CHAT_MISTRAL, CHAT_LLAMA3, CHAT_ZEPHYR, CHAT_GEMMA, CHAT_PHI3 } chat_family;

typedef struct {
  char *buf;
  size_t cap, n;
} chat_out;

static void put(chat_out *o, const char *s, size_t len) {
  if (o->n < o->cap) memcpy(o->buf + o->n, s, len < o->cap - o->n ? len : o->cap - o->n);
  o->n += len;
}
static void puts_(chat_out *o, const char *s) { put(o, s, strlen(s)); }

/* s without leading and trailing whitespace (Jinja's trim / Python's strip). */
static void put_trimmed(chat_out *o, const char *s) {
  size_t a = 0, b = strlen(s);
  while (a < b && strchr(" \t\n\r\f\v", s[a])) a++;
  while (b > a && strchr(" \t\n\r\f\v", s[b - 1])) b--;
  put(o, s + a, b - a);
}

static const char *find(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (!memcmp(hay + i, needle, k)) return hay + i;
  return NULL;
}

/* The default system message of a chatml template: the text of the literal
 * '<|im_start|>system\n...<|im_end|>' written when messages[0] is not a
 * system message. Written unescaped into o when with is set; returns
 * whether there is one. */
static int chatml_default_system(const char *tpl, size_t n, chat_out *o) {
  if (!find(tpl, n, "!= 'system'") && !find(tpl, n, "!= \"system\"")) return 0;
  const char *a = find(tpl, n, "<|im_start|>system");
  if (!a) return 0;
  a += strlen("<|im_start|>system");
  if (*a == '\n') a++;
  else if (a[0] == '\\' && a[1] == 'n') a += 2;
  else return 0;
  const char *b = find(a, (size_t)(tpl + n - a), "<|im_end|>");
  if (!b) return 0;
  for (const char *p = a; p < b; p++) {
    if (*p == '\'' || *p == '"' || *p == '{' || *p == '}') return 0;  /* not one literal */
  }
  if (o) {
    for (const char *p = a; p < b; p++) {
      if (p[0] == '\\' && p + 1 < b) {
        char c = p[1] == 'n' ? '\n' : p[1] == 't' ? '\t' : p[1];
        put(o, &c, 1);
        p++;
      } else {
        put(o, p, 1);
      }
    }
  }
  return 1;
}

static int recognize(const char *tpl, size_t n, chat_family *fam) {
  if (find(tpl, n, "<|im_start|>")) *fam = CHAT_CHATML;
  else if (find(tpl, n, "<|start_header_id|>")) *fam = CHAT_LLAMA3;
  else if (find(tpl, n, "<start_of_turn>")) *fam = CHAT_GEMMA;
  else if (find(tpl, n, "<|end|>") && find(tpl, n, "<|user|>")) *fam = CHAT_PHI3;
  else if (find(tpl, n, "<|user|>")) *fam = CHAT_ZEPHYR;
  else if (find(tpl, n, "[INST]")) *fam = find(tpl, n, "<<SYS>>") ? CHAT_LLAMA2 : CHAT_MISTRAL;
  else return 0;
  return 1;
}

static int is_role(const rlx_chat_message *m, const char *role) { return !strcmp(m->role, role); }

static void put_rtrimmed(chat_out *o, const char *s) {
  size_t b = strlen(s);
  while (b > 0 && strchr(" \t\n\r\f\v", s[b - 1])) b--;
  put(o, s, b);
}

/* Llama 2: [INST] turns, each user turn after the first opening with <s>,
 * the system message in <<SYS>> at the start of the first (the template
 * strips the joined text, so the system text keeps its spaces and the
 * user's loses only the trailing ones).
 * Mistral: [INST] turns back to back, no system role (its text opens the
 * first user turn), contents as they are. */
static void render_inst(chat_out *o, const rlx_chat_message *m, int n, int llama2) {
  const char *system = NULL;
  int i = 0;
  if (n > 0 && is_role(&m[0], "system")) system = m[i++].content;
  int first = 1;
  for (; i < n; i++) {
    if (is_role(&m[i], "user")) {
      if (!llama2) {
        puts_(o, "[INST] ");
        if (first && system) { puts_(o, system); puts_(o, "\n\n"); }
        puts_(o, m[i].content);
      } else {
        if (!first) puts_(o, "<s>");
        puts_(o, "[INST] ");
        if (first && system) {
          puts_(o, "<<SYS>>\n");
          puts_(o, system);
          puts_(o, "\n<</SYS>>\n\n");
          put_rtrimmed(o, m[i].content);
        } else {
          put_trimmed(o, m[i].content);
        }
      }
      puts_(o, " [/INST]");
      first = 0;
    } else if (is_role(&m[i], "assistant")) {
      if (llama2) {
        puts_(o, " ");
        put_trimmed(o, m[i].content);
        puts_(o, " </s>");
      } else {
        puts_(o, m[i].content);
        puts_(o, "</s>");
      }
    }
  }
}

static void render(chat_out *o, chat_family fam, const char *tpl, size_t tn, const rlx_chat_message *m, int n,
                   int add_assistant) {
  switch (fam) {
  case CHAT_CHATML:
    if ((n == 0 || !is_role(&m[0], "system")) && chatml_default_system(tpl, tn, NULL)) {
      puts_(o, "<|im_start|>system\n");
      chatml_default_system(tpl, tn, o);
      puts_(o, "<|im_end|>\n");
    }
    for (int i = 0; i < n; i++) {
      puts_(o, "<|im_start|>");
      puts_(o, m[i].role);
      puts_(o, "\n");
      puts_(o, m[i].content);
      puts_(o, "<|im_end|>\n");
    }
    if (add_assistant) puts_(o, "<|im_start|>assistant\n");
    break;
  case CHAT_LLAMA3:
    for (int i = 0; i < n; i++) {
      puts_(o, "<|start_header_id|>");
      puts_(o, m[i].role);
      puts_(o, "<|end_header_id|>\n\n");
      put_trimmed(o, m[i].content);
      puts_(o, "<|eot_id|>");
    }
    if (add_assistant) puts_(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    break;
  case CHAT_GEMMA: {
    /* No system role: its text opens the first user turn. */
    const char *system = NULL;
    for (int i = 0; i < n; i++) {
      if (is_role(&m[i], "system")) { system = m[i].content; continue; }
      puts_(o, "<start_of_turn>");
      puts_(o, is_role(&m[i], "assistant") ? "model" : m[i].role);
      puts_(o, "\n");
      if (system && is_role(&m[i], "user")) {
        put_trimmed(o, system);
        puts_(o, "\n\n");
        system = NULL;
      }
      put_trimmed(o, m[i].content);
      puts_(o, "<end_of_turn>\n");
    }
    if (add_assistant) puts_(o, "<start_of_turn>model\n");
    break;
  }
  case CHAT_PHI3:
  case CHAT_ZEPHYR:
    for (int i = 0; i < n; i++) {
      puts_(o, "<|");
      puts_(o, m[i].role);
      puts_(o, "|>\n");
      puts_(o, m[i].content);
      puts_(o, fam == CHAT_PHI3 ? "<|end|>\n" : "</s>\n");
    }
    if (add_assistant) puts_(o, "<|assistant|>\n");
    break;
  case CHAT_LLAMA2:
  case CHAT_MISTRAL:
    render_inst(o, m, n, fam == CHAT_LLAMA2);
    break;
  }
}

rlx_status rlx_chat_apply_template(const rlx_model_file *f, const rlx_chat_message *msgs, int n_msgs,
                                   int add_assistant, char *buf, size_t cap, size_t *n_out) {
  if (!f || (!msgs && n_msgs) || n_msgs < 0 || (!buf && cap) || !n_out)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_chat_apply_template: NULL argument");
  for (int i = 0; i < n_msgs; i++)
    if (!msgs[i].role || !msgs[i].content)
      return rlx_set_error(RLX_ERR_INVALID, "rlx_chat_apply_template: message %d has a NULL role or content", i);
  const char *tpl;
  size_t tn;
  if (rlx_meta_get_string(f, "tokenizer.chat_template", &tpl, &tn) != RLX_OK)
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "chat template: the file has no tokenizer.chat_template");
  chat_family fam;
  if (!recognize(tpl, tn, &fam))
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "chat template: not one of the families rlx knows (chatml, llama-2, "
                                              "llama-3, mistral, zephyr, gemma, phi-3): %.60s...", tpl);
  chat_out o = {buf, cap, 0};
  render(&o, fam, tpl, tn, msgs, n_msgs, add_assistant);
  *n_out = o.n;
  if (o.n < cap) buf[o.n] = 0;
  if (o.n > cap)
    return rlx_set_error(RLX_ERR_INVALID, "rlx_chat_apply_template: %zu bytes do not fit in %zu", o.n, cap);
  return RLX_OK;
}
