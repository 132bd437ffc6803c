#!/usr/bin/env bash
# bench_cuda_llama.sh — rlx against llama.cpp's CUDA backend on the same
# GGUF files, on a machine with an NVIDIA GPU: llama-bench -p 512 -n 128
# -fa 1 (all layers on the GPU, f16 KV cache) and bench_cuda pptg (the same
# two tests through rlx's LLM API, f16 KV cache) on random-weight files of
# the Llama-3-8B shape (bench/make_llama_gguf.py: bf16, q8_0, q4_0; Q4_K_M
# made from the bf16 file by llama-quantize, llama.cpp's own mix of Q4_K
# and Q6_K).
#
#   bash bench/bench_cuda_llama.sh build            llama.cpp into build-llama/
#   bash bench/bench_cuda_llama.sh models           the GGUF files into build-llama/models/
#   bash bench/bench_cuda_llama.sh run [TYPES]      both benchmarks (TYPES: bf16,q8_0,q4_K_M,q4_0)
#   bash bench/bench_cuda_llama.sh greedy FILE N PROMPT...
#                                  N greedy tokens of each prompt, llama-simple (all layers on the
#                                  GPU) and `rlx generate --device cuda --temp 0` (f16 KV cache both),
#                                  the texts compared: identical, or where they first differ
#   bash bench/bench_cuda_llama.sh pack DIR | unpack DIR   llama.cpp's binaries as <= 15 MB parts
#
# llama.cpp's source comes as a tarball in .llama-src/ (a llama.cpp tree
# at its top level; carried by the device tool, ignored by git). rlx's
# bench_cuda comes from tests/run_cuda_device.sh's build (build-device/).
set -uo pipefail
cd "$(dirname "$0")/.."
LB=build-llama
BENCH=build-device/bench_cuda
DIMS="--layers 32 --embd 4096 --heads 32 --heads-kv 8 --ff 14336 --vocab 128256"
export LD_LIBRARY_PATH=$PWD/$LB/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

case ${1:-} in
build)
  [ -x $LB/bin/llama-bench ] && [ -x $LB/bin/llama-quantize ] && [ -x $LB/bin/llama-simple ] && exit 0
  t0=$(date +%s)
  mkdir -p $LB/src && tar xzf .llama-src/*.tgz -C $LB/src || exit 1
  gen=""
  command -v ninja >/dev/null && gen="-G Ninja"
  cmake -S $LB/src/llama.cpp -B $LB $gen -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=ON || exit 1
  cmake --build $LB -j"$(nproc)" --target llama-bench llama-quantize llama-simple || exit 1
  echo "llama.cpp built in $(( $(date +%s) - t0 )) s"
  ;;
models)
  mkdir -p $LB/models
  for t in bf16 q8_0 q4_0; do
    [ -s $LB/models/8b-$t.gguf ] || python3 bench/make_llama_gguf.py $LB/models/8b-$t.gguf --wtype $t $DIMS || exit 1
  done
  ;;
quantize)
  [ -s $LB/models/8b-q4_K_M.gguf ] ||
    $LB/bin/llama-quantize $LB/models/8b-bf16.gguf $LB/models/8b-q4_K_M.gguf Q4_K_M "$(nproc)" >/dev/null || exit 1
  ;;
run)
  for t in $(echo "${2:-bf16,q8_0,q4_K_M,q4_0}" | tr , ' '); do
    m=$LB/models/8b-$t.gguf
    [ -s "$m" ] || { echo "$t: no $m"; continue; }
    echo "== $t ($(( $(stat -c %s "$m") / 1000000 )) MB)"
    $LB/bin/llama-bench -m "$m" -p 512 -n 128 -fa 1 -ngl 99 -r ${REPS:-5} -ctk f16 -ctv f16 -o md 2>/dev/null | grep -E "^\|"
    $BENCH pptg "$m" 512 128 f16
  done
  ;;
greedy)
  m=$2 n=$3
  shift 3
  for p in "$@"; do
    # both print the prompt, then the continuation
    a=$($LB/bin/llama-simple -m "$m" -n "$n" -ngl 99 "$p" 2>/dev/null)
    b=$(build-device/rlx generate -m "$m" -p "$p" -n "$n" --temp 0 --device cuda --cache-type f16 2>/dev/null)
    python3 - "$p" "$a" "$b" <<'PY'
import sys
p, a, b = sys.argv[1:]
b = b.rstrip("\n")
a = a.rstrip("\n")
a, b = (t[t.index(p) + len(p):] if p in t else t for t in (a, b))
k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
same = a == b
print(f"prompt {p!r}: {'identical' if same else f'first difference at character {k}'} ({len(a)} / {len(b)} characters)")
print(f"  llama.cpp: {a!r}")
print(f"  rlx:       {b!r}")
PY
  done
  ;;
pack)
  tar cf - -C $LB bin | xz -T0 -1 | split -b 15m - "$2/llama-bin.txz."
  ;;
unpack)
  [ -x $LB/bin/llama-bench ] || { mkdir -p $LB && cat "$2"/llama-bin.txz.* | xz -d | tar xf - -C $LB; }
  ;;
-h | --help)
  sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"
  ;;
*)
  echo "usage: bench_cuda_llama.sh build | models | quantize | run [TYPES] | greedy FILE N PROMPT... | pack DIR | unpack DIR" >&2
  exit 2
  ;;
esac
