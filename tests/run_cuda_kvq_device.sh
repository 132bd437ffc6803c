#!/usr/bin/env bash
# run_cuda_kvq_device.sh — on a machine with an NVIDIA GPU: the LLM runtime
# of a server on CUDA (issue 24): quantized KV caches and batched decode.
# Runs, in this order (a call that runs out of time still brings back the
# first): test_cuda_llm_kvq (test_llm_kvq with every decoder on CUDA),
# test_cuda_batch (under RLX_QMATMUL_REF=1, as CTest runs it),
# bench_batch_decode --cuda on a Llama-3-8B shaped Q8_0 file of
# bench/make_llama_gguf.py with an f16 and a q8_0 cache at 1, 8 and 32
# sequences, test_cuda_batch once more without RLX_QMATMUL_REF (its
# numbers only), then the quant op-parity group on the device,
# test_cuda_attention, test_cuda_layout and test_cuda_llm. Logs go to $OUT
# when it is set (the device tool's output folder); a table last.
#
#   bash tests/run_cuda_kvq_device.sh [--bin DIR] [--budget SECONDS] [--no-bench]
#
# --bin DIR: the executables, built elsewhere for this machine (sm_90), in
# DIR or in DIR/bins.tar.xz; else they are built here (cmake, ninja).
# --budget: no new phase starts past this many seconds (default 540).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/rlx-cuda-out}
mkdir -p "$out"
bin="" budget=540 bench=1
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift ;;
    --budget) budget=$2; shift ;;
    --no-bench) bench=0 ;;
  esac
  shift
done
t_start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t_start) )); }
stamp() { echo "$1: $(( $(date +%s) - t_start )) s"; }
if ls .whl/*.whl >/dev/null 2>&1; then # gguf, for the references
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
if [ -n "$bin" ] && [ -f "$bin/bins.tar.xz" ]; then # Python's lzma: no xz program needed there
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$bin/bins.tar.xz" \
    /tmp/rlx-bins &&
    bin=/tmp/rlx-bins
elif [ -z "$bin" ]; then
  bin=build-device
  cmake -S . -B $bin -G Ninja -DCMAKE_BUILD_TYPE=Release -DRLX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
  cmake --build $bin -j"$(nproc)" --target test_llm_kvq test_cuda_batch test_cuda_llm test_cuda_attention \
    test_cuda_layout op_parity test_cuda_parity bench_batch_decode >"$out/build.log" 2>&1 ||
    { grep -E -A3 "error" "$out/build.log" | head -60; exit 1; }
  for t in test_llm_kvq test_cuda_batch test_cuda_llm test_cuda_attention test_cuda_layout test_cuda_parity \
    test_op_parity; do
    ln -sf "tests/$t" "$bin/$t"
  done
fi
stamp build
work=/tmp/rlx-kvq-work
mkdir -p $work
status=0
summary=()
run_test() { # NAME ENV... -- COMMAND...
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  if [ "$(left)" -lt 20 ]; then summary+=("$name: not run (budget)"); return; fi
  env "${envs[@]}" timeout "$(left)" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  [ $rc = 0 ] || status=1
  summary+=("$name: rc $rc")
  grep -E "FAIL|cache|together|passed|failed|SKIP|cuda - cpu" "$out/$name.log" | head -40
  stamp "$name (rc $rc)"
}
ref=tests/ref
run_test test_cuda_llm_kvq RLX_DEVICE=cuda RLX_QMATMUL_REF=1 -- "$bin/test_llm_kvq" python3 $ref $work/kvq
run_test test_cuda_batch RLX_QMATMUL_REF=1 -- "$bin/test_cuda_batch" python3 $ref $work/batch
if [ $bench = 1 ] && [ "$(left)" -gt 90 ]; then
  model=/tmp/llama-8b-shape-q8_0.gguf
  timeout "$(left)" python3 bench/make_llama_gguf.py $model --layers 32 --embd 4096 --heads 32 --heads-kv 8 \
    --ff 14336 --vocab 128256 --wtype q8_0 >"$out/make_gguf.log" 2>&1 || { tail -5 "$out/make_gguf.log"; status=1; }
  stamp make_gguf
  for cache in f16 q8_0; do
    [ "$(left)" -gt 30 ] || break
    timeout "$(left)" "$bin/bench_batch_decode" --cuda --cache-type $cache $model 4 128 64 3 1 8 32 \
      >"$out/bench_$cache.txt" 2>"$out/bench_$cache.err" || { tail -5 "$out/bench_$cache.err"; status=1; }
    stamp "bench $cache"
  done
fi
run_test test_cuda_batch_int RLX_QMATMUL_REF=0 -- "$bin/test_cuda_batch" python3 $ref $work/batch_int
[ -x "$bin/test_cuda_parity" ] &&
  run_test cuda_parity_quant RLX_QMATMUL_REF=1 -- "$bin/test_cuda_parity" "$bin/test_op_parity" python3 $ref quant \
    $work/parity_quant
run_test test_cuda_attention RLX_QMATMUL_REF=0 -- "$bin/test_cuda_attention"
run_test test_cuda_layout RLX_QMATMUL_REF=0 -- "$bin/test_cuda_layout"
run_test test_cuda_llm RLX_QMATMUL_REF=1 -- "$bin/test_cuda_llm" python3 $ref $work/llm
echo "== $(head -1 "$out/gpu.txt")"
for s in "${summary[@]}"; do echo "$s"; done
for cache in f16 q8_0; do # N, tokens/s of the median run (64 steps of N sequences)
  [ -s "$out/bench_$cache.txt" ] && python3 -c "
import statistics, sys
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) > 1:
        n = int(f[0])
        print('bench_batch_decode %s cache: N %3d  %8.1f tokens/s' % (sys.argv[2], n,
              n * 64 / statistics.median(map(float, f[1:]))))
" "$out/bench_$cache.txt" $cache
done
exit $status
