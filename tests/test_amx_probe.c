/* test_amx_probe.c — the AMX probes (cpu_amx_int8, cpu_amx_bf16) answer without
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

  const char *whyb = NULL;
  const int usable_bf16 = cpu_amx_bf16(&whyb);
  printf("AMX bf16: %s (%s)\n", usable_bf16 ? "yes" : "no", whyb ? whyb : "(no reason)");
  CHECK(whyb != NULL && whyb[0], "no reason given (bf16)");
  const char *whyb2 = NULL;
  CHECK(cpu_amx_bf16(&whyb2) == usable_bf16 && whyb2 == whyb, "a second call answers differently (bf16)");
  const int advertised_bf16 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 24) & 1) && ((d >> 22) & 1);
  printf("cpuid advertises AMX-TILE + AMX-BF16: %s\n", advertised_bf16 ? "yes" : "no");
  if (!advertised_bf16) CHECK(!usable_bf16, "usable although cpuid has no AMX-BF16");
  if (usable_bf16) CHECK(cpu_amx_bf16_tile_product_ok(), "the bf16 tile product is wrong in process");
  return check_report();
}
