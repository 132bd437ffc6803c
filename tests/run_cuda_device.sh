#!/usr/bin/env bash
# run_cuda_device.sh — on a machine with an NVIDIA GPU: build rlx with the
# CUDA backend (cmake -DRLX_CUDA=ON, sm_90), run the CUDA tests (label cuda:
# the backend's tests first (test_cuda_<group>: the kernels' own parity,
# replay vs op by op, fusions, params, hybrid) — then op parity of every
# group on the device), and, with
# --bench, the benchmarks (bench/bench_cuda.py) between the two, so a call
# that runs out of time still brings back the numbers. Logs go to $OUT
# when it is set (the device tool's output folder).
#
#   bash tests/run_cuda_device.sh [--bench] [--quick] [--profile] [--no-tests]
#                                 [--only=gemm,gemv,attn,block,decode,decode8b] [--batches=1,2,4,8] [--no-compile]
#                                 [--budget SECONDS] [--kernels] [--tests=REGEX] [--llm-models=NAME-WTYPE,...]
# --kernels: also build bench/bench_cuda_kernels.cu (nvcc, beside the cmake
# build) and run it inside the benchmark (the decode products' kernels alone).
# --tests=REGEX: the backend's tests and the ctest cases matching REGEX only.
# --budget: stop starting new phases once this many seconds have passed
# (default 540: inside the device tool's 600 s limit per command).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/rlx-cuda-out}
mkdir -p "$out"
bench=0 bench_flags="" tests=1 budget=540 kernels=0 test_regex=
while [ $# -gt 0 ]; do
  case $1 in
    --bench) bench=1 ;;
    --quick | --profile | --no-compile | --only=* | --batches=* | --no-variants | --kernels-only=* | --llm-models=*)
      bench_flags="$bench_flags $1" ;;
    --no-tests) tests=0 ;;
    --kernels) kernels=1 ;;
    --tests=*) test_regex=${1#--tests=} ;;
    --budget) budget=$2; shift ;;
  esac
  shift
done
t_start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t_start) )); }
build=build-device
backend_tests="test_cuda_layout test_cuda_gemm test_cuda_quant test_cuda_attention test_cuda_decode test_cuda_params"
# Python packages the references need that the image lacks (gguf, for the
# quant group) travel as wheels in .whl (carried by the device tool).
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__, torch.cuda.get_device_name())" \
  2>&1 | tee -a "$out/gpu.txt"
gen=""
command -v ninja >/dev/null && gen="-G Ninja"
cmake -S . -B $build $gen -DCMAKE_BUILD_TYPE=Release -DRLX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" \
  >"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
if [ $kernels = 1 ]; then
  mkdir -p $build
  nvcc -O3 -std=c++17 -arch=sm_90 -Iinclude -Isrc bench/bench_cuda_kernels.cu -o $build/bench_cuda_kernels \
    >"$out/kernels_build.log" 2>&1 &
  kernels_pid=$!
  bench_flags="$bench_flags --kernels=$build/bench_cuda_kernels"
fi
# only what the cuda tests and the benchmark need
cmake --build $build -j"$(nproc)" --target bench_cuda $backend_tests test_cuda_parity test_cuda_llm op_parity rlx \
  >"$out/build.log" 2>&1 || { grep -E -A3 "error" "$out/build.log" | head -60; exit 1; }
if [ $kernels = 1 ]; then
  wait $kernels_pid || { tail -30 "$out/kernels_build.log"; exit 1; }
fi
echo "build: $(( $(date +%s) - t_start )) s"
status=0
if [ $tests = 1 ]; then
  for t in $backend_tests; do
    timeout $(( $(left) > 30 ? $(left) : 30 )) $build/tests/$t >"$out/$t.log" 2>&1 || status=1
    grep -E "FAIL|passed|failed|SKIP" "$out/$t.log" | head -40
    echo "$t: status $status at $(( $(date +%s) - t_start )) s"
  done
fi
if [ $bench = 1 ] && [ "$(left)" -gt 60 ]; then
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 bench/bench_cuda.py $build/bench_cuda $bench_flags 2>&1 | tee "$out/bench.log"
  echo "bench: done at $(( $(date +%s) - t_start )) s"
fi
if [ $tests = 1 ] && [ "$(left)" -gt 30 ]; then
  timeout "$(left)" ctest --test-dir $build -L cuda -E "^($(echo $backend_tests | tr ' ' '|'))\$" ${test_regex:+-R "$test_regex"} -j8 --output-on-failure \
    >"$out/ctest_cuda.log" 2>&1 || status=1
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|FAIL" "$out/ctest_cuda.log" | head -80
  # every test's own output (the LLM logits comparison's numbers among them)
  cp $build/Testing/Temporary/LastTest.log "$out/ctest_cuda_output.log" 2>/dev/null &&
    grep -E "cuda - cpu|SKIP" "$out/ctest_cuda_output.log" | head -20
  echo "ctest: done at $(( $(date +%s) - t_start )) s"
fi
exit $status
