/* env.c — the one reading of on/off and integer environment switches (docs/ENVIRONMENT.md
 * lists them). */
#include "ir.h"

#include <errno.h>
#include <stdlib.h>
#include <strings.h>

int ir_env_flag(const char *name, int fallback) {
  const char *v = getenv(name);
  if (!v || !*v) return fallback;
  char *end;
  long n = strtol(v, &end, 10);
  if (*end == 0) return n != 0; /* an integer: "0", "00" off; "1", "2" on */
  static const char *const off[] = {"off", "false", "no"};
  for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
    if (!strcasecmp(v, off[i])) return 0;
  return 1;
}

int64_t ir_env_int(const char *name, int64_t fallback) {
  const char *v = getenv(name);
  if (!v || !*v) return fallback;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  return *end || errno ? fallback : (int64_t)n;
}
