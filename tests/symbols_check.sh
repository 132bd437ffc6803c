#!/usr/bin/env bash
# symbols_check.sh LIBRLX_SO — the shared library's dynamic symbol table
# holds the public API only: every defined symbol starts with rlx_, and the
# core calls of rlx.h are there.
set -euo pipefail
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '{print $NF}')
bad=$(printf '%s\n' "$syms" | grep -v '^rlx_' || true)
if [ -n "$bad" ]; then
  echo "symbols_check: $(printf '%s\n' "$bad" | wc -l) exported symbols without the rlx_ prefix:"
  printf '%s\n' "$bad" | head -n 50
  exit 1
fi
for want in rlx_graph_new rlx_compile rlx_run rlx_last_error rlx_llm_load; do
  printf '%s\n' "$syms" | grep -qx "$want" || { echo "symbols_check: $want is not exported"; exit 1; }
done
echo "symbols_check: $(printf '%s\n' "$syms" | wc -l) symbols, all rlx_"
