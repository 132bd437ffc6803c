/* dispatch_report.c — RLX_DISPATCH_REPORT=1: after compile, per op kind,
 * how many nodes the backend runs natively, how many fused nodes were
 * decomposed into primitives for it, and how many fall back to the CPU
 * (legalize.c counts them). One table on stderr, ops in ops.def order,
 * only the kinds present:
 *
 *   rlx: dispatch report for graph "mlp" on cpu (12 nodes)
 *     op                        native  decomposed  fallback
 *     MatMul                         2           0         0
 *     ...
 *     total                         12           0         0
 */
#include "runtime.h"

#include <stdio.h>

void rt_dispatch_report(const char *graph, const char *backend, const pass_dispatch_count *counts,
                        int from_cache) {
  pass_dispatch_count total = {0, 0, 0};
  for (int op = 0; op < RLX_OP_COUNT; op++) {
    total.native += counts[op].native;
    total.decomposed += counts[op].decomposed;
    total.fallback += counts[op].fallback;
  }
  fprintf(stderr, "rlx: dispatch report for graph \"%s\" on %s (%d nodes%s)\n", graph, backend,
          total.native + total.fallback, from_cache ? ", compiled before: from the compile cache" : "");
  fprintf(stderr, "  %-24s %8s %11s %9s\n", "op", "native", "decomposed", "fallback");
  for (int op = 0; op < RLX_OP_COUNT; op++) {
    const pass_dispatch_count *c = &counts[op];
    if (c->native || c->decomposed || c->fallback)
      fprintf(stderr, "  %-24s %8d %11d %9d\n", ir_ops[op].name, c->native, c->decomposed, c->fallback);
  }
  fprintf(stderr, "  %-24s %8d %11d %9d\n", "total", total.native, total.decomposed, total.fallback);
}
