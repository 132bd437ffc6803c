#!/usr/bin/env bash
# deps.sh — install what building and testing rlx needs on a fresh machine
# (Debian packages and the Python packages the test references use).
# Safe to run again: it skips what is already there.
set -euo pipefail

need_apt=()
for tool in cmake gcc clang make; do
  command -v "$tool" >/dev/null 2>&1 || need_apt+=("$tool")
done
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "deps: installing ${need_apt[*]} with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

# numpy/scipy: op-parity references; gguf: the reference (de)quantizers.
if ! python3 -c "import numpy, scipy, gguf" >/dev/null 2>&1; then
  echo "deps: installing numpy scipy gguf with pip"
  python3 -m pip install -q --disable-pip-version-check numpy scipy gguf
fi
