#!/usr/bin/env bash
# symbols_check.sh LIBRLX_SO RLX_H — the shared library's dynamic symbol
# table is the API of rlx.h: every defined symbol starts with rlx_ and is a
# function declared in the header, and every function the header declares
# is there.
set -euo pipefail
lib=$1 header=$2
syms=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u)
decl=$(grep -oE '^[A-Za-z_][A-Za-z0-9_ *]*[ *]rlx_[a-z0-9_]+\(' "$header" |
       sed -E 's/.*[ *](rlx_[a-z0-9_]+)\($/\1/' | sort -u)
bad=$(printf '%s\n' "$syms" | grep -v '^rlx_' || true)
if [ -n "$bad" ]; then
  echo "symbols_check: $(printf '%s\n' "$bad" | wc -l) exported symbols without the rlx_ prefix:"
  printf '%s\n' "$bad" | head -n 50
  exit 1
fi
extra=$(comm -23 <(printf '%s\n' "$syms") <(printf '%s\n' "$decl"))
if [ -n "$extra" ]; then
  echo "symbols_check: exported but not declared in rlx.h:" $extra
  exit 1
fi
missing=$(comm -13 <(printf '%s\n' "$syms") <(printf '%s\n' "$decl"))
if [ -n "$missing" ]; then
  echo "symbols_check: declared in rlx.h but not exported (not defined?):" $missing
  exit 1
fi
echo "symbols_check: $(printf '%s\n' "$syms" | wc -l) symbols, exactly the functions of rlx.h"
