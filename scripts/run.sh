#!/usr/bin/env bash
# run.sh — build rlx and run the main job: generate text with a real LLM
# (SmolLM2-135M-Instruct, the default model, fetched once into the cache).
# Extra arguments go to `rlx generate` (e.g. -p "..." -n 128 --temp 0).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
bash scripts/fetch_model.sh >/dev/null
./build/rlx generate --chat -p "What is a compiler? Answer in two sentences." -n 64 --seed 1 "$@"
