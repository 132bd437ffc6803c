#!/usr/bin/env bash
# run_cuda_device.sh — on a machine with an NVIDIA GPU: build rlx with the
# CUDA backend (cmake -DRLX_CUDA=ON), run the CUDA tests (label cuda: op
# parity of every group on the device, backend parity, replay vs op by op,
# params, hybrid), and, with --bench, the benchmarks (bench/bench_cuda.py).
# Logs go to $OUT when it is set (the device tool's output folder).
#
#   bash tests/run_cuda_device.sh [--bench] [--quick] [--profile] [--no-tests]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/rlx-cuda-out}
mkdir -p "$out"
bench=0 bench_flags="" tests=1
for a in "$@"; do
  case $a in
    --bench) bench=1 ;;
    --quick) bench_flags="$bench_flags --quick" ;;
    --profile) bench_flags="$bench_flags --profile" ;;
    --no-tests) tests=0 ;;
  esac
done
build=build-device
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
t0=$(date +%s)
cmake -S . -B $build $gen -DCMAKE_BUILD_TYPE=Release -DRLX_CUDA=ON >"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
cmake --build $build -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" | head -40; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
status=0
if [ $tests = 1 ]; then
  ctest --test-dir $build -L cuda -j4 --output-on-failure >"$out/ctest_cuda.log" 2>&1 || status=1
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|FAIL" "$out/ctest_cuda.log" | head -80
fi
if [ $bench = 1 ]; then
  PYTHONUNBUFFERED=1 python3 bench/bench_cuda.py $build/bench_cuda $bench_flags 2>&1 | tee "$out/bench.log"
fi
exit $status
