#!/usr/bin/env bash
# bench_cuda_onnx.sh — on a machine with an NVIDIA GPU, PyTorch and
# onnxruntime: build rlx with the CUDA backend and cuDNN, run the CUDA tests
# of the spatial ops and the ONNX models, and time ResNet-50, BERT-base and
# MiniLM against PyTorch eager and torch.compile (bench_cuda_onnx.py).
# PyTorch compiles its models while rlx builds and times them once the
# build is done, so no timing shares the machine with a build. Logs go to
# $OUT when it is set.
#
#   bash bench/bench_cuda_onnx.sh [--budget SECONDS] [--runs N] [--no-tests] [--compile-budget SECONDS]
#                                 [--cudnn-include DIR] [--prebuilt DIR]
# --cudnn-include: cudnn.h's folder when neither the toolkit nor PyTorch's
# cuDNN wheel has one (the library still comes from either).
# --prebuilt: no build; DIR holds librlx.so.xz and test_cuda_spatial (linked
# against librlx.so, found beside it) built elsewhere for sm_90.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/rlx-cuda-onnx-out}
mkdir -p "$out"
budget=540 runs=50 tests=1 compile_budget=200 dnn_fallback= prebuilt=
while [ $# -gt 0 ]; do
  case $1 in
    --budget) budget=$2; shift ;;
    --runs) runs=$2; shift ;;
    --compile-budget) compile_budget=$2; shift ;;
    --no-tests) tests=0 ;;
    --prebuilt) prebuilt=$(cd "$2" && pwd); shift ;;
    --cudnn-include) dnn_fallback=$(cd "$2" && pwd); shift ;;
    -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "bench_cuda_onnx.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
t_start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t_start) )); }
build=build-device
models=/tmp/rlx-onnx-models
go=/tmp/rlx-onnx-go
rm -f $go
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
# cuDNN: the toolkit's, else the one PyTorch's wheels bring (its header and library)
dnn_inc=""
if [ ! -f /usr/local/cuda/include/cudnn.h ]; then
  dnn_inc=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'include'))" \
    2>/dev/null)
  [ -f "$dnn_inc/cudnn.h" ] || dnn_inc=$dnn_fallback
fi
if ! ldconfig -p | grep -q libcudnn.so.9; then
  dnn_lib=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
  [ -n "$dnn_lib" ] && export LD_LIBRARY_PATH=$dnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
echo "cudnn include: ${dnn_inc:-/usr/local/cuda/include}, LD_LIBRARY_PATH ${LD_LIBRARY_PATH:-}" | tee -a "$out/gpu.txt"
(python3 bench/make_onnx_models.py --out $models --models resnet50,bert,minilm &&
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 bench/bench_cuda_onnx.py torch --out "$out/torch.json" --go $go \
    --runs "$runs" --models-dir $models --compile-budget "$compile_budget") >"$out/torch.log" 2>&1 &
torch_pid=$!
if [ -n "$prebuilt" ]; then
  mkdir -p $build/tests
  python3 -c "import lzma, sys; open(sys.argv[2], 'wb').write(lzma.open(sys.argv[1]).read())" \
    "$prebuilt/librlx.so.xz" $build/librlx.so.0.1.0 || exit 1
  ln -sf librlx.so.0.1.0 $build/librlx.so.0.1 && ln -sf librlx.so.0.1.0 $build/librlx.so
  cp "$prebuilt/test_cuda_spatial" $build/tests/ && ln -sf ../librlx.so.0.1 $build/tests/librlx.so.0.1
  tests_parity=0
else
gen=""
command -v ninja >/dev/null && gen="-G Ninja"
cmake -S . -B $build $gen -DCMAKE_BUILD_TYPE=Release -DRLX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  ${dnn_inc:+-DRLX_CUDNN_INCLUDE_DIR=$dnn_inc} >"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
grep "cuDNN" "$out/cmake.log"
cmake --build $build -j"$(nproc)" --target rlx_shared test_cuda_spatial op_parity \
  >"$out/build.log" 2>&1 || { grep -E -A3 "error" "$out/build.log" | head -60; touch $go; exit 1; }
fi
echo "build: $(( $(date +%s) - t_start )) s"
# the tests while PyTorch compiles (its timings wait for them)
status=0
if [ $tests = 1 ]; then
  timeout "$(left)" $build/tests/test_cuda_spatial >"$out/test_cuda_spatial.log" 2>&1 || status=1
  grep -E "FAIL|passed|failed|SKIP" "$out/test_cuda_spatial.log" | head -30
  echo "test_cuda_spatial: status $status at $(( $(date +%s) - t_start )) s"
  # the small network (the timings below check the three models against onnxruntime too)
  timeout "$(left)" python3 tests/onnx/test_cuda_models.py $build/librlx.so 2>&1 | tee "$out/test_cuda_models.log" ||
    status=1
  echo "tests: status $status at $(( $(date +%s) - t_start )) s"
fi
touch $go
wait $torch_pid
torch_status=$?
echo "torch: done at $(( $(date +%s) - t_start )) s (status $torch_status)"
grep -E "compiled|failed|skipped|ms" "$out/torch.log" | tail -30
PYTHONUNBUFFERED=1 timeout "$(left)" python3 bench/bench_cuda_onnx.py rlx $build/librlx.so --torch "$out/torch.json" \
  --runs "$runs" --models-dir $models 2>&1 | tee "$out/bench.log" || status=1
if [ $tests = 1 ] && [ "${tests_parity:-1}" = 1 ] && [ "$(left)" -gt 20 ]; then   # the op-parity conv group (NumPy references) on the device
  mkdir -p $build/cuda_parity_conv
  RLX_DEVICE=cuda timeout "$(left)" $build/tests/test_op_parity python3 tests/ref conv $build/cuda_parity_conv \
    >"$out/cuda_parity_conv.log" 2>&1 || status=1
  tail -3 "$out/cuda_parity_conv.log"
fi
echo "done at $(( $(date +%s) - t_start )) s, status $status"
exit $status
