/* name_set.c — a set of a graph's named nodes, keyed by the name
 * (ir_name_set in ir.h): linear probing over node ids, grown at half full,
 * placed by the keyed hash (hash.h) so that no set of names is slow. */
#include "hash.h"
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static uint32_t name_hash(const char *s) { return (uint32_t)ir_hash_str(s); }

int ir_name_set_find(const ir_name_set *s, const rlx_graph *g, const char *name) {
  if (!s->cap) return -1;
  const uint32_t mask = (uint32_t)s->cap - 1;
  for (uint32_t h = name_hash(name) & mask;; h = (h + 1) & mask) {
    int slot = s->slots[h];
    if (!slot) return -1;
    if (!strcmp(g->nodes[slot - 1].a.name, name)) return slot - 1;
  }
}

static void insert(int *slots, int cap, const rlx_graph *g, rlx_node id) {
  const uint32_t mask = (uint32_t)cap - 1;
  uint32_t h = name_hash(g->nodes[id].a.name) & mask;
  while (slots[h]) h = (h + 1) & mask;
  slots[h] = id + 1;
}

int ir_name_set_add(ir_name_set *s, const rlx_graph *g, rlx_node id) {
  if (2 * (s->count + 1) > s->cap) {
    if (s->cap > INT32_MAX / 4) return -1;
    int cap = s->cap ? 2 * s->cap : 16;
    int *slots = calloc((size_t)cap, sizeof *slots);
    if (!slots) return -1;
    for (int i = 0; i < s->cap; i++)
      if (s->slots[i]) insert(slots, cap, g, s->slots[i] - 1);
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
  }
  insert(s->slots, s->cap, g, id);
  s->count++;
  return 0;
}

void ir_name_set_free(ir_name_set *s) {
  free(s->slots);
  memset(s, 0, sizeof *s);
}
