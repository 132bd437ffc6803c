/* memory_budget.c — the host memory one allocation may take (an arena, a
 * KV cache): checked before allocating, so that what cannot fit fails with
 * RLX_ERR_NOMEM and a message instead of being touched page by page until
 * the kernel's OOM killer ends the process. */
#include "ir.h"

#include <unistd.h>

/* A cgroup's memory limit (v2 memory.max, else v1), or UINT64_MAX. */
static uint64_t cgroup_limit(void) {
  static const char *const files[] = {"/sys/fs/cgroup/memory.max",
                                      "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    FILE *f = fopen(files[i], "r");
    if (!f) continue;
    unsigned long long v = 0;
    int ok = fscanf(f, "%llu", &v) == 1;  /* "max": no limit */
    fclose(f);
    if (ok && v > 0) return v;
  }
  return UINT64_MAX;
}

uint64_t ir_memory_budget(const char **source) {
  int64_t mb = ir_env_int("RLX_MEMORY_LIMIT_MB", -1);
  if (mb >= 0) {
    *source = "RLX_MEMORY_LIMIT_MB";
    return (uint64_t)mb > UINT64_MAX >> 20 ? UINT64_MAX : (uint64_t)mb << 20;
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
  uint64_t cg = cgroup_limit();
  *source = cg < phys ? "the cgroup's memory limit" : "physical memory";
  return cg < phys ? cg : phys;
}

rlx_status ir_memory_check(uint64_t bytes, const char *what) {
  const char *source = "";
  uint64_t budget = ir_memory_budget(&source);
  if (bytes <= budget) return RLX_OK;
  return rlx_set_error(RLX_ERR_NOMEM, "%s needs %.2f GiB (%llu bytes), more than %s allows (%.2f GiB); "
                       "set RLX_MEMORY_LIMIT_MB to change the limit", what, (double)bytes / (1u << 30),
                       (unsigned long long)bytes, source, (double)budget / (1u << 30));
}
