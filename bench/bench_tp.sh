#!/usr/bin/env bash
# bench_tp.sh — tensor parallelism on a machine of several GPUs (issue 26),
# in one go: build with CUDA, the CUDA tests (those needing two GPUs skip
# on fewer), then bench_tp on random-weight llama files of
# make_llama_gguf.py: the 8B shape in bf16 at TP1, TP2, TP4 (logits against
# TP1's, decode tokens/s against TP1's), and the 70B shape in bf16 at TP2
# and TP4 (no TP1: 140 GB fit no single GPU) with the fraction of the
# combined HBM roofline. Prints a table per file.
#
#   bash bench/bench_tp.sh [WORK_DIR] [--bw GB/s] [--skip-70b] [--skip-tests]
#
# --bw: one GPU's memory bandwidth (default: 3350 for an H100 SXM, 4800 for
# an H200, from nvidia-smi's name). NVLink multicast stays off.
set -euo pipefail
export NCCL_NVLS_ENABLE=0
root=$(cd "$(dirname "$0")/.." && pwd)
work=/tmp/rlx_tp
case ${1:-} in -* | "") ;; *) work=$1; shift ;; esac
bw="" skip70=0 skiptests=0
while [ $# -gt 0 ]; do
  case $1 in
  --bw) bw=$2; shift 2 ;;
  --skip-70b) skip70=1; shift ;;
  --skip-tests) skiptests=1; shift ;;
  -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) echo "bench_tp.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$work"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [ -z "$bw" ]; then
  case $name in *H200*) bw=4800 ;; *) bw=3350 ;; esac
fi
echo "GPUs: $gpus x $name, HBM $bw GB/s each; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
[ "$gpus" -ge 2 ] || { echo "bench_tp.sh: needs at least 2 GPUs (found $gpus)" >&2; exit 1; }

export PATH=/usr/local/cuda/bin:$PATH
cmake -S "$root" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DRLX_CUDA=ON >/dev/null
cmake --build "$work/build" -j"$(nproc)" >/dev/null
if [ "$skiptests" = 0 ]; then
  (cd "$work/build" && ctest -j4 -L cuda --output-on-failure | tail -n 5) || true
  (cd "$work/build" && ctest -R '^test_cuda_llm_tp$' --output-on-failure | tail -n 12) || true
  (cd "$work/build" && ctest -R "test_comm|test_bootstrap|test_llm_tp|parity_collective" --output-on-failure | tail -n 3) || true
fi

tps="1,2"
[ "$gpus" -ge 4 ] && tps="1,2,4"
f8="$work/llama8b_bf16.gguf"
[ -f "$f8" ] || python3 "$root/bench/make_llama_gguf.py" "$f8" --layers 32 --embd 4096 --heads 32 --heads-kv 8 \
  --ff 14336 --vocab 128256 --wtype bf16
echo "== 8B shape, bf16: TP ${tps} (relative to TP1)"
"$work/build/bench_tp" "$f8" --tp "$tps" --bw "$bw" --prompt 32 --gen 64
# two processes, one rank each, over the TCP bootstrap: the greedy tokens of one process of tp 2
echo "== 8B shape, bf16: 2 processes (--rank/--world/--master) against one process of --tp 2"
"$work/build/bench_tp" "$f8" --tp 2 --prompt 32 --gen 32 --bw "$bw" --dump "$work/tp2.tokens" | tail -n 1
port=$((29500 + RANDOM % 1000))
"$work/build/bench_tp" "$f8" --device cuda:1 --rank 1 --world 2 --master 127.0.0.1:$port --prompt 32 --gen 32 \
  >"$work/rank1.out" 2>&1 &
"$work/build/bench_tp" "$f8" --device cuda:0 --rank 0 --world 2 --master 127.0.0.1:$port --prompt 32 --gen 32 \
  --bw "$bw" --dump "$work/world2.tokens" | tail -n 1
wait || true
cmp -s "$work/tp2.tokens" "$work/world2.tokens" && echo "the same greedy tokens" ||
  { echo "DIFFERENT greedy tokens"; tail -n 3 "$work/rank1.out"; }
# a world of 2 whose rank 1 never starts: rank 0 must give up (RLX_ERR_DEVICE), not hang
echo "== a missing rank (60 s bootstrap timeout)"
timeout 120 "$work/build/bench_tp" "$f8" --device cuda:0 --rank 0 --world 2 --master 127.0.0.1:$((port + 1)) \
  --prompt 4 --gen 4 | tail -n 1 || true

free_gb=$(df -BG --output=avail "$work" | tail -n 1 | tr -dc 0-9)
if [ "$skip70" = 0 ] && [ ! -f "$work/llama70b_bf16.gguf" ] && [ "$free_gb" -lt 150 ]; then
  echo "== 70B shape skipped: its 141 GB file needs more than the $free_gb GB free in $work"
  skip70=1
fi
if [ "$skip70" = 0 ]; then
  f70="$work/llama70b_bf16.gguf"
  [ -f "$f70" ] || python3 "$root/bench/make_llama_gguf.py" "$f70" --layers 80 --embd 8192 --heads 64 \
    --heads-kv 8 --ff 28672 --vocab 128256 --wtype bf16
  t70="2"
  [ "$gpus" -ge 4 ] && t70="2,4"
  echo "== 70B shape, bf16: TP ${t70} (roofline: weight bytes a token over tp x $bw GB/s; ratios to TP2)"
  "$work/build/bench_tp" "$f70" --tp "$t70" --bw "$bw" --prompt 32 --gen 32
fi
