/* test_amx_probe.c — the AMX probe (cpu_amx_int8) answers without
 * crashing the process, agrees with cpuid where that says no, gives the
 * same answer twice, and where it says yes a tile product run here, in
 * process, is right (a wrong yes faults or fails this test). */
#include "backend/cpu/cpu_features.h"
#include "check.h"

#include <cpuid.h>

int main(void) {
  const char *why = NULL;
  const int usable = cpu_amx_int8(&why);
  printf("AMX int8: %s (%s)\n", usable ? "yes" : "no", why ? why : "(no reason)");
  CHECK(why != NULL && why[0], "no reason given");
  const char *why2 = NULL;
  CHECK(cpu_amx_int8(&why2) == usable && why2 == why, "a second call answers differently");
  unsigned a, b, c, d;
  const int advertised = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 24) & 1) && ((d >> 25) & 1);
  printf("cpuid advertises AMX-TILE + AMX-INT8: %s\n", advertised ? "yes" : "no");
  if (!advertised) CHECK(!usable, "usable although cpuid has no AMX");
  if (usable) CHECK(cpu_amx_tile_product_ok(), "the tile product is wrong in process");
  return check_report();
}
