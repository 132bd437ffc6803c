#!/usr/bin/env bash
# run.sh — build rlx and run the main job: compile and run an example graph.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/rlx graph run examples/mlp.rlx --bind S=8 --runs 5 "$@"
