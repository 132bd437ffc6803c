/* serve_sched.c — the scheduler of rlx serve: --parallel slots (the
 * decoder's sequences), a queue of choices waiting for one, and one thread
 * that owns the decoder.
 *
 * Each turn of the thread hands queued choices to free slots, then runs
 * one batch (rlx_llm_decode: one read of the weights for all of them):
 * every busy slot's last sampled token, and pieces of the prompts still
 * to run (PREFILL_CHUNK tokens a turn in all, so a long prompt does not
 * stall the others' decoding); then it samples the next token of each
 * slot whose prompt is done. Each slot has its own sampler (and grammar).
 *
 * Prompt cache: a slot keeps its last sequence's positions after it ends.
 * A new choice goes to the free slot whose positions share the longest
 * prefix with its prompt (the system prompt, the earlier turns of a
 * chat); when another slot, busy or not, shares a longer one, those
 * positions are shared into it (rlx_llm_seq_copy: no rows recomputed).
 * Only the rest of the prompt is run. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFILL_CHUNK 256
/* Prompt rows run together at least (the cache's reuse and the chunks
 * leave no shorter run). With quantized weights a row's bits do not depend
 * on the rows beside it (rlx.h, rlx_llm_decode), but products of float
 * weights take a matrix-vector path for a few rows (F16/BF16: up to 8)
 * whose rounding differs from the GEMM's, and a prompt's greedy answer
 * would then depend on what the slot held before. */
#define PROMPT_MIN_RUN 16

typedef struct {
  int32_t seq;                 /* its sequence in the decoder */
  serve_chan *chan;            /* NULL: free */
  int choice;
  int64_t fed;                 /* prompt tokens in the decoder */
  int32_t next;                /* the sampled token to run next */
  rlx_sampler *smp;
  rlx_grammar *grammar;        /* the request's, or NULL */
  int64_t n_gen;
  char *text;                  /* the choice's text so far; sent: bytes handed to the channel */
  size_t len, cap, sent;
  int64_t row;                 /* this turn: its logits' row in the batch's, or -1 */
} slot;

typedef struct {
  serve_chan *chan;
  int choice;
} queued;

struct serve_sched {
  rlx_llm *llm;
  const rlx_tokenizer *tok;
  int n_slots;
  slot *slots;
  int64_t n_ctx, n_vocab;
  int32_t *b_token, *b_seq;    /* this turn's batch */
  int8_t *b_want;
  int64_t b_cap;
  float *logits;               /* n_slots rows of n_vocab */
  int first;                   /* the slot whose prompt goes first this turn (turns rotate) */
  pthread_t thread;
  int started;
  pthread_mutex_t mu;          /* the queue, stop and the stats */
  pthread_cond_t cv;
  queued *queue;
  int64_t n_queued, queue_cap;
  int stop;
  serve_sched_stats stats;
};

double serve_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- channels */

serve_chan *serve_chan_new(void) {
  serve_chan *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  c->refs = 1;
  c->t_submit = serve_now();
  return c;
}

void serve_chan_release(serve_chan *c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  int last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (!last) return;
  serve_gen *g = &c->gen;
  free(g->prompt);
  free((void *)g->sp.logit_bias);
  free(g->gbnf);
  for (int i = 0; i < g->n_stop; i++) free(g->stop[i]);
  for (int i = 0; i < c->n_choices; i++) free(c->choice[i].text);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

int serve_chan_done(const serve_chan *c) {
  if (c->error[0] || c->cancelled) return 1;
  for (int i = 0; i < c->n_choices; i++)
    if (!c->choice[i].finish) return 0;
  return 1;
}

/* Appends n bytes of text to a choice and, with finish, ends it. */
static void chan_emit(serve_chan *c, int choice, const char *text, size_t n, int64_t n_tokens, const char *finish) {
  pthread_mutex_lock(&c->mu);
  serve_choice *ch = &c->choice[choice];
  if (ch->len + n + 1 > ch->cap) {
    size_t cap = (ch->len + n + 1) * 2;
    char *t = realloc(ch->text, cap);
    if (!t) {
      snprintf(c->error, sizeof c->error, "out of memory for the text of choice %d", choice);
      n = 0;
    } else {
      ch->text = t, ch->cap = cap;
    }
  }
  if (n) memcpy(ch->text + ch->len, text, n);
  ch->len += n;
  if (ch->text) ch->text[ch->len] = 0;
  ch->n_tokens = n_tokens;
  if (finish) ch->finish = finish;
  if (!c->t_first) c->t_first = serve_now();
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static void chan_fail(serve_chan *c, const char *what, rlx_status st) {
  pthread_mutex_lock(&c->mu);
  if (!c->error[0]) snprintf(c->error, sizeof c->error, "%s: %s: %s", what, rlx_status_name(st), rlx_last_error());
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static void chan_cancel(serve_chan *c, int shutdown) {
  pthread_mutex_lock(&c->mu);
  c->cancelled = 1;
  c->shutdown |= shutdown;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* ---------------------------------------------------------------- slots */

static void slot_release(serve_sched *s, slot *sl) {
  sl->n_gen = 0;
  rlx_sampler_free(sl->smp);
  rlx_grammar_free(sl->grammar);
  sl->smp = NULL;
  sl->grammar = NULL;
  serve_chan_release(sl->chan);
  sl->chan = NULL;
  sl->len = sl->sent = 0;
  sl->row = -1;
  pthread_mutex_lock(&s->mu);
  s->stats.slots_busy--;
  pthread_mutex_unlock(&s->mu);
}

static int64_t common_prefix(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
  int64_t i = 0;
  while (i < na && i < nb && a[i] == b[i]) i++;
  return i;
}

/* The free slot whose positions share most with prompt (-1 if none is
 * free), and in *src the slot, any, that shares most. */
static int pick_slot(const serve_sched *s, const serve_gen *g, int64_t *shared, int *src, int64_t *src_shared) {
  int best = -1;
  *src = -1, *src_shared = 0;
  for (int i = 0; i < s->n_slots; i++) {
    const slot *sl = &s->slots[i];
    int64_t held = rlx_llm_seq_n_past(s->llm, sl->seq);
    int64_t n = common_prefix(rlx_llm_seq_tokens(s->llm, sl->seq), held, g->prompt, g->n_prompt);
    if (n > *src_shared) *src = i, *src_shared = n;
    if (sl->chan) continue;
    /* ties: the slot holding least, keeping longer caches for later */
    if (best < 0 || n > *shared ||
        (n == *shared && held < rlx_llm_seq_n_past(s->llm, s->slots[best].seq)))
      best = i, *shared = n;
  }
  return best;
}

/* Starts choice of c on slot sl (with the scheduler's lock held), its
 * prompt's first `shared` positions already in slot src's sequence. */
static rlx_status slot_start(serve_sched *s, slot *sl, serve_chan *c, int choice, int64_t shared, int src) {
  const serve_gen *g = &c->gen;
  int64_t keep = shared < g->n_prompt - PROMPT_MIN_RUN ? shared : g->n_prompt - PROMPT_MIN_RUN;
  if (keep < 0) keep = 0;
  rlx_status st = src >= 0 && s->slots[src].seq != sl->seq && keep > 0
                      ? rlx_llm_seq_copy(s->llm, s->slots[src].seq, sl->seq, keep)
                      : rlx_llm_seq_truncate(s->llm, sl->seq, keep);
  if (st) return st;
  sl->fed = keep;
  rlx_sampler_params sp = g->sp;
  sp.seed += (uint64_t)choice;
  if ((st = rlx_sampler_new(&sp, s->n_vocab, &sl->smp))) return st;
  for (int64_t i = 0; i < g->n_prompt; i++) rlx_sampler_accept(sl->smp, g->prompt[i]);
  /* after the prompt: the grammar follows what is sampled from here on */
  if (g->gbnf && ((st = rlx_grammar_new(g->gbnf, NULL, s->tok, &sl->grammar)) ||
                  (st = rlx_sampler_set_grammar(sl->smp, sl->grammar))))
    return st;
  sl->chan = c, sl->choice = choice;
  s->stats.slots_busy++;
  s->stats.prompt_tokens += g->n_prompt;
  s->stats.cached_tokens += keep;
  if (choice == 0) {
    pthread_mutex_lock(&c->mu);
    c->cached_tokens = keep;
    pthread_mutex_unlock(&c->mu);
  }
  return RLX_OK;
}

/* Hands queued choices to free slots (with the lock held). */
static void assign(serve_sched *s) {
  while (s->n_queued > 0) {
    queued q = s->queue[0];
    pthread_mutex_lock(&q.chan->mu);
    int cancelled = q.chan->cancelled;
    pthread_mutex_unlock(&q.chan->mu);
    int64_t shared = 0, src_shared = 0;
    int src = -1, i = cancelled ? -1 : pick_slot(s, &q.chan->gen, &shared, &src, &src_shared);
    if (!cancelled && i < 0) return;
    memmove(s->queue, s->queue + 1, (size_t)--s->n_queued * sizeof *s->queue);
    s->stats.requests_queued = s->n_queued;
    if (cancelled) {
      serve_chan_release(q.chan);
      continue;
    }
    if (src_shared <= shared) src = i; /* its own positions serve best */
    rlx_status st = slot_start(s, &s->slots[i], q.chan, q.choice, src == i ? shared : src_shared, src);
    if (st) {
      chan_fail(q.chan, "starting a sequence", st);
      rlx_sampler_free(s->slots[i].smp);
      rlx_grammar_free(s->slots[i].grammar);
      s->slots[i].smp = NULL;
      s->slots[i].grammar = NULL;
      rlx_llm_seq_truncate(s->llm, s->slots[i].seq, 0);
      serve_chan_release(q.chan);
    }
  }
}

/* Adds token t's text to the slot's and sends what is ready; returns the
 * finish reason when the sequence ends here, else NULL. */
static const char *take_token(serve_sched *s, slot *sl, int32_t t) {
  const serve_gen *g = &sl->chan->gen;
  sl->n_gen++;
  const char *finish = NULL;
  size_t ready = sl->len, stop_at = SIZE_MAX;
  if (!g->ignore_eos && rlx_token_is_eog(s->tok, t)) {
    finish = "stop";
  } else {
    size_t n = 0;
    rlx_token_to_piece(s->tok, t, 0, NULL, 0, &n);
    if (sl->len + n > sl->cap) {
      size_t cap = (sl->len + n) * 2 + 256;
      char *p = realloc(sl->text, cap);
      if (!p) return chan_fail(sl->chan, "the text", RLX_ERR_NOMEM), "stop";
      sl->text = p, sl->cap = cap;
    }
    if (n && rlx_token_to_piece(s->tok, t, 0, sl->text + sl->len, n, &n) == RLX_OK) sl->len += n;
    ready = serve_text_ready(sl->text, sl->len, sl->sent, g->stop, g->n_stop, &stop_at);
    if (stop_at != SIZE_MAX) finish = "stop";
    else if (g->max_tokens >= 0 && sl->n_gen >= g->max_tokens) finish = "length";
    else if (rlx_llm_seq_n_past(s->llm, sl->seq) >= s->n_ctx) finish = "length";
    if (finish && stop_at == SIZE_MAX) ready = sl->len; /* the held-back tail was no stop string */
  }
  chan_emit(sl->chan, sl->choice, sl->text + sl->sent, ready - sl->sent, sl->n_gen, finish);
  sl->sent = ready;
  pthread_mutex_lock(&s->mu);
  s->stats.completion_tokens++;
  pthread_mutex_unlock(&s->mu);
  return finish;
}

/* Adds n entries of slot sl to the batch (the last one's logits wanted if want). */
static void batch_add(serve_sched *s, int64_t *n, const slot *sl, const int32_t *tokens, int64_t k, int want) {
  for (int64_t i = 0; i < k; i++) {
    s->b_token[*n] = tokens[i];
    s->b_seq[*n] = sl->seq;
    s->b_want[(*n)++] = want && i == k - 1;
  }
}

/* The batch of this turn: busy slots' next tokens and prompt pieces. */
static int64_t build_batch(serve_sched *s) {
  int64_t n = 0, budget = PREFILL_CHUNK, rows = 0;
  for (int k = 0; k < s->n_slots; k++) {
    slot *sl = &s->slots[(s->first + k) % s->n_slots];
    sl->row = -1;
    if (!sl->chan) continue;
    pthread_mutex_lock(&sl->chan->mu);
    int cancelled = sl->chan->cancelled || sl->chan->error[0];
    pthread_mutex_unlock(&sl->chan->mu);
    if (cancelled) {
      slot_release(s, sl);
      continue;
    }
    const serve_gen *g = &sl->chan->gen;
    int64_t left = g->n_prompt - sl->fed;
    if (left == 0) {
      batch_add(s, &n, sl, &sl->next, 1, 1);
      sl->row = rows++;
      continue;
    }
    /* a piece of PROMPT_MIN_RUN rows at least, and no shorter rest */
    int64_t take = left <= budget + PROMPT_MIN_RUN ? left : budget;
    if (budget == 0 || (take < PROMPT_MIN_RUN && take < left)) continue;
    batch_add(s, &n, sl, g->prompt + sl->fed, take, sl->fed + take == g->n_prompt);
    if (sl->fed + take == g->n_prompt) sl->row = rows++;
    sl->fed += take;
    budget = budget > take ? budget - take : 0;
  }
  s->first = (s->first + 1) % s->n_slots;
  return n;
}

/* One turn: the batch, then a token sampled for each slot it gave logits. */
static void step(serve_sched *s) {
  int64_t n = build_batch(s);
  if (n == 0) return;
  rlx_llm_batch b = {n, s->b_token, s->b_seq, s->b_want};
  rlx_status st = rlx_llm_decode(s->llm, &b, s->logits);
  for (int i = 0; i < s->n_slots; i++) {
    slot *sl = &s->slots[i];
    if (!sl->chan || (sl->row < 0 && !st)) continue;
    if (st) { /* every sequence of the batch ends; their positions are forgotten */
      chan_fail(sl->chan, "decoding", st);
      rlx_llm_seq_truncate(s->llm, sl->seq, 0);
      slot_release(s, sl);
      continue;
    }
    int32_t t = rlx_sampler_sample(sl->smp, s->logits + sl->row * s->n_vocab);
    if (t < 0) {
      chan_fail(sl->chan, "sampling", RLX_ERR_INVALID);
      slot_release(s, sl);
    } else if (take_token(s, sl, t)) {
      slot_release(s, sl);
    } else {
      sl->next = t;
    }
  }
}

/* ---------------------------------------------------------------- the thread */

static void *sched_main(void *arg) {
  serve_sched *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (!s->stop && s->n_queued == 0 && s->stats.slots_busy == 0) pthread_cond_wait(&s->cv, &s->mu);
    if (s->stop) {
      pthread_mutex_unlock(&s->mu);
      break;
    }
    assign(s);
    pthread_mutex_unlock(&s->mu);
    double t0 = serve_now();
    step(s);
    pthread_mutex_lock(&s->mu);
    s->stats.decode_seconds += serve_now() - t0;
    pthread_mutex_unlock(&s->mu);
  }
  /* stopping: what runs and what waits is cancelled */
  for (int i = 0; i < s->n_slots; i++)
    if (s->slots[i].chan) {
      chan_cancel(s->slots[i].chan, 1);
      slot_release(s, &s->slots[i]);
    }
  pthread_mutex_lock(&s->mu);
  for (int64_t i = 0; i < s->n_queued; i++) {
    chan_cancel(s->queue[i].chan, 1);
    serve_chan_release(s->queue[i].chan);
  }
  s->n_queued = 0;
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

rlx_status serve_sched_submit(serve_sched *s, serve_chan *c) {
  pthread_mutex_lock(&s->mu);
  if (s->stop) {
    pthread_mutex_unlock(&s->mu);
    return rlx_set_error(RLX_ERR_INVALID, "the server is stopping");
  }
  if (s->n_queued + c->n_choices > s->queue_cap) {
    int64_t cap = (s->n_queued + c->n_choices) * 2;
    queued *q = realloc(s->queue, (size_t)cap * sizeof *q);
    if (!q) {
      pthread_mutex_unlock(&s->mu);
      return rlx_set_error(RLX_ERR_NOMEM, "out of memory for the queue");
    }
    s->queue = q, s->queue_cap = cap;
  }
  pthread_mutex_lock(&c->mu);
  c->refs += c->n_choices;
  pthread_mutex_unlock(&c->mu);
  for (int i = 0; i < c->n_choices; i++) s->queue[s->n_queued++] = (queued){c, i};
  s->stats.requests_queued = s->n_queued;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return RLX_OK;
}

void serve_sched_get_stats(serve_sched *s, serve_sched_stats *out) {
  pthread_mutex_lock(&s->mu);
  *out = s->stats;
  pthread_mutex_unlock(&s->mu);
}

int64_t serve_sched_n_ctx(const serve_sched *s) { return s->n_ctx; }

const rlx_model_file *serve_sched_file(const serve_sched *s) { return rlx_llm_file(s->llm); }

rlx_status serve_sched_new(const serve_opts *o, serve_sched **out) {
  *out = NULL;
  serve_sched *s = calloc(1, sizeof *s);
  if (!s || !(s->slots = calloc((size_t)o->parallel, sizeof *s->slots))) {
    free(s);
    return rlx_set_error(RLX_ERR_NOMEM, "out of memory for %d slots", o->parallel);
  }
  s->n_slots = o->parallel;
  s->stats.slots_total = o->parallel;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  rlx_llm_options lo = {.compile = {o->device, o->threads, 0, o->device_index, NULL}, .n_ctx = o->ctx / o->parallel,
                        .cache_type = o->cache_type, .n_seq = o->parallel, .tp = o->tp};
  rlx_status st = rlx_llm_open(o->model_path, &lo, &s->llm);
  if (!st) {
    s->n_ctx = rlx_llm_n_ctx(s->llm), s->n_vocab = rlx_llm_vocab_size(s->llm);
    s->b_cap = s->n_slots + PREFILL_CHUNK + PROMPT_MIN_RUN;
    s->b_token = malloc((size_t)s->b_cap * sizeof *s->b_token);
    s->b_seq = malloc((size_t)s->b_cap * sizeof *s->b_seq);
    s->b_want = malloc((size_t)s->b_cap);
    s->logits = malloc((size_t)s->n_slots * (size_t)s->n_vocab * sizeof *s->logits);
    if (!s->b_token || !s->b_seq || !s->b_want || !s->logits) st = rlx_set_error(RLX_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < s->n_slots && !st; i++) {
    slot *sl = &s->slots[i];
    sl->seq = i, sl->row = -1;
  }
  if (st) {
    serve_sched_free(s);
    return st;
  }
  *out = s;
  return RLX_OK;
}

rlx_status serve_sched_start(serve_sched *s, const rlx_tokenizer *tok) {
  s->tok = tok;
  if (pthread_create(&s->thread, NULL, sched_main, s) != 0)
    return rlx_set_error(RLX_ERR_INTERNAL, "cannot start the scheduler's thread");
  s->started = 1;
  return RLX_OK;
}

void serve_sched_stop(serve_sched *s) {
  if (!s || !s->started) return;
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL);
  s->started = 0;
}

void serve_sched_free(serve_sched *s) {
  if (!s) return;
  serve_sched_stop(s);
  for (int i = 0; i < s->n_slots; i++) {
    slot *sl = &s->slots[i];
    free(sl->text);
  }
  rlx_llm_free(s->llm);
  free(s->b_token);
  free(s->b_seq);
  free(s->b_want);
  free(s->logits);
  free(s->slots);
  free(s->queue);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
