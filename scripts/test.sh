#!/usr/bin/env bash
# test.sh — build rlx and pass every test:
#   1. gcc Release build, the whole CTest suite (unit + op parity + CLI);
#      the Python package's pytest suite on that build's librlx.so;
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
#      (host code only: the CUDA backend is compiled in builds 1 and 4, and
#      its tests skip without a GPU, so nvcc is not run a third time);
#   3. a ThreadSanitizer build of the thread tests (tests/test_threads.c);
#   4. a clang build (-Werror clean) and a bounded libFuzzer run of every
#      harness under tests/fuzz (RLX_FUZZ_SECONDS each, default 30; the
#      harnesses share one ASan+UBSan+coverage build of the library, and
#      any sanitizer report fails the run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
jobs=$(nproc)

echo "== gcc release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build -j"$jobs" --output-on-failure

echo "== Python package tests (python/tests, on build/librlx.so)"
RLX_LIBRARY="$PWD/build/librlx.so" RLX_CLI="$PWD/build/rlx" python3 -m pytest -q -p no:cacheprovider python/tests
echo "== pip install . (its own build of librlx) and the graph tests on it"
rm -rf build-pip
python3 -m pip install -q --disable-pip-version-check --no-deps --target build-pip .
(unset RLX_LIBRARY; PYTHONPATH="$PWD/build-pip" python3 -m pytest -q -p no:cacheprovider python/tests/test_graph.py)

echo "== ASan + UBSan build and tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLX_SANITIZE=ON -DRLX_CUDA=OFF >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure

echo "== ThreadSanitizer build and the thread tests (sessions, communicators, ranks)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLX_TSAN=ON -DRLX_CUDA=OFF >/dev/null
cmake --build build-tsan -j"$jobs" --target test_threads test_comm test_llm_tp
TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan -R '^(test_threads|test_comm|test_llm_tp)$' --output-on-failure

echo "== clang build and fuzzing"
CC=clang cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=Release -DRLX_FUZZ=ON \
  -DRLX_FUZZ_SECONDS="${RLX_FUZZ_SECONDS:-30}" >/dev/null
cmake --build build-clang -j"$jobs"
UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-clang -j"$jobs" --output-on-failure -L "unit|fuzz"
