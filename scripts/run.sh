#!/usr/bin/env bash
# run.sh — build rlx and run the main job: generate text with a real LLM
# (SmolLM2-135M-Instruct, the default model, fetched once into the cache).
# Extra arguments go to `rlx generate` (e.g. -p "..." -n 128 --temp 0).
#
# It builds only the rlx program and its library (in build/), with the
# CUDA backend when this machine has an NVIDIA GPU (nvidia-smi or
# /dev/nvidia0) or when RLX_CUDA=ON is in the environment (RLX_CUDA=OFF:
# never), and installs only what building and generating need.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "run.sh: $*" >&2; }

step "checking the build tools (scripts/deps.sh run)"
bash scripts/deps.sh run >&2

cuda=${RLX_CUDA:-}
if [ -z "$cuda" ]; then
  if [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; then
    cuda=AUTO why="a GPU is present: the CUDA backend is built if the CUDA toolkit is found"
  else
    cuda=OFF why="no GPU found: CPU only (RLX_CUDA=ON bash scripts/run.sh builds CUDA anyway)"
  fi
else
  why="RLX_CUDA=$cuda from the environment"
fi
step "configuring build/ (Release; $why)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRLX_CUDA="$cuda" >/dev/null

jobs=$(nproc)
step "building the rlx program and its library (cmake --build build --target rlx -j$jobs)"
cmake --build build --target rlx -j"$jobs" >&2  # stdout is for the generated text

step "finding the model (fetched once into ${XDG_CACHE_HOME:-~/.cache}/rlx, about 94 MiB)"
bash scripts/fetch_model.sh >/dev/null

step "generating: build/rlx generate --chat -p \"What is a compiler? ...\" -n 64 --seed 1 $*"
./build/rlx generate --chat -p "What is a compiler? Answer in two sentences." -n 64 --seed 1 "$@"
