/* test_amx_probe.c — the AMX probes (cpu_amx_int8, cpu_amx_bf16) answer without
 * crashing the process, agrees with cpuid where that says no, gives the
 * same answer twice, and where it says yes a tile product run here, in
 * process, is right (a wrong yes faults or fails this test). */
#include "backend/cpu/cpu_features.h"
#include "check.h"

#include <cpuid.h>

/* One probe: its answer, the cpuid bit of its AMX extension (leaf 7, edx;
 * AMX-TILE is bit 24) and its tile product. */
typedef struct {
  const char *name;
  int (*usable)(const char **why);
  int cpuid_bit;
  int (*product_ok)(void);
} amx_probe;

static void check_probe(const amx_probe *p) {
  const char *why = NULL;
  const int usable = p->usable(&why);
  printf("AMX %s: %s (%s)\n", p->name, usable ? "yes" : "no", why ? why : "(no reason)");
  CHECK(why != NULL && why[0], "%s: no reason given", p->name);
  const char *why2 = NULL;
  CHECK(p->usable(&why2) == usable && why2 == why, "%s: a second call answers differently", p->name);
  unsigned a, b, c, d;
  const int advertised = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 24) & 1) && ((d >> p->cpuid_bit) & 1);
  printf("cpuid advertises AMX-TILE + AMX-%s: %s\n", p->name, advertised ? "yes" : "no");
  if (!advertised) CHECK(!usable, "%s: usable although cpuid has no AMX", p->name);
  if (usable) CHECK(p->product_ok(), "%s: the tile product is wrong in process", p->name);
}

int main(void) {
  const amx_probe probes[] = {{"INT8", cpu_amx_int8, 25, cpu_amx_tile_product_ok},
                              {"BF16", cpu_amx_bf16, 22, cpu_amx_bf16_tile_product_ok}};
  for (int i = 0; i < 2; i++) check_probe(&probes[i]);
  return check_report();
}
