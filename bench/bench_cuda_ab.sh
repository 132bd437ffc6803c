#!/usr/bin/env bash
# bench_cuda_ab.sh — on a machine with an NVIDIA GPU: a change's effect on
# the Llama-3-8B-shape decode step, the tree before it and after it built
# and timed in one call (the same card, the same minutes). The tree after
# is this one (build-device); the tree before is a copy of it with the
# files under BEFORE laid over it (BEFORE holds those files as they were,
# at their paths: `git show BASE:PATH` of each file the change touched).
# Then this tree's CUDA tests (TESTS: backend test binaries; CTESTS: a
# ctest -R regex), the copy bandwidth (the roofline's ceiling, as
# bench/bench_cuda.py measures it), and `bench_cuda decode WFMT 512 32 4096
# 32 8 14336 128256` of both trees, alternating, REPS times each. Logs go
# to $OUT; a table comes last. --bin DIR: no builds; the programs were
# built elsewhere for this machine (a call short of device time) and come
# xz-compressed in DIR: bench_cuda.before.xz, bench_cuda.xz and one TEST.xz
# a test (BEFORE is then not read; --ctests needs the builds).
#
#   bash bench/bench_cuda_ab.sh BEFORE [--budget SECONDS] [--wfmts=q4_0,q8_0,q4_k] [--reps=2]
#                               [--tests="test_cuda_quant ..."] [--ctests=REGEX] [--bin DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/rlx-cuda-out}
mkdir -p "$out"
before_files=$(cd "${1:?BEFORE: the files of the tree before}" && pwd) || exit 2
shift
budget=540 wfmts=q4_0,q8_0,q4_k reps=2 tests="test_cuda_quant test_cuda_decode" ctests= bin=
while [ $# -gt 0 ]; do
  case $1 in
    --budget) budget=$2; shift ;;
    --wfmts=*) wfmts=${1#--wfmts=} ;;
    --reps=*) reps=${1#--reps=} ;;
    --tests=*) tests=${1#--tests=} ;;
    --ctests=*) ctests=${1#--ctests=} ;;
    --bin) bin=$(cd "$2" && pwd); shift ;;
  esac
  shift
done
t_start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t_start) )); }
if ls .whl/*.whl >/dev/null 2>&1; then # the references' packages the image lacks (gguf)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
before=/tmp/rlx-before
rm -rf $before && mkdir -p $before
if [ -n "$bin" ]; then # the programs as built elsewhere, where the builds would put them
  mkdir -p build-device/tests $before/build-device
  unxz() { python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' "$1" "$2" && chmod +x "$2"; }
  unxz "$bin/bench_cuda.before.xz" $before/build-device/bench_cuda && unxz "$bin/bench_cuda.xz" build-device/bench_cuda || exit 1
  for t in $tests; do unxz "$bin/$t.xz" build-device/tests/$t || exit 1; done
  ctests=
else
tar --exclude=./build-device --exclude=./.whl -cf - . | tar -xf - -C $before
cp -r "$before_files"/. $before/
gen=""
command -v ninja >/dev/null && gen="-G Ninja"
build() { # DIR TARGETS...: configure and build DIR/build-device
  local dir=$1
  shift
  cmake -S "$dir" -B "$dir/build-device" $gen -DCMAKE_BUILD_TYPE=Release -DRLX_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" && cmake --build "$dir/build-device" -j"$(nproc)" --target "$@"
}
ct=""
[ -n "$ctests" ] && ct="test_cuda_parity test_cuda_llm op_parity"
build . bench_cuda $tests $ct >"$out/build_after.log" 2>&1 &
pa=$!
build $before bench_cuda >"$out/build_before.log" 2>&1 &
pb=$!
wait $pa || { grep -E -A3 "error" "$out/build_after.log" | head -40; exit 1; }
wait $pb || { grep -E -A3 "error" "$out/build_before.log" | head -40; exit 1; }
fi
echo "build: $(( $(date +%s) - t_start )) s"
status=0
for t in $tests; do
  timeout $(( $(left) > 30 ? $(left) : 30 )) build-device/tests/$t >"$out/$t.log" 2>&1 || status=1
  grep -E "FAIL|passed|failed|SKIP" "$out/$t.log" | head -20
  echo "$t: status $status at $(( $(date +%s) - t_start )) s"
done
copy_tbps=$(python3 - <<'EOF'
import torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
y = torch.empty_like(x)
for _ in range(3):
    y.copy_(x)
ms = []
for _ in range(7):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(20):
        y.copy_(x)
    b.record()
    b.synchronize()
    ms.append(a.elapsed_time(b) / 20)
print("%.4f" % (2 * x.numel() / (sorted(ms)[3] * 1e-3) / 1e12))
EOF
)
echo "copy bandwidth: $copy_tbps TB/s (read + write)" | tee "$out/copy.txt"
: >"$out/decode.txt"
for r in $(seq 1 "$reps"); do
  for wf in ${wfmts//,/ }; do
    for side in before after; do
      [ "$(left)" -gt 20 ] || break 3
      bin=build-device/bench_cuda
      [ $side = before ] && bin=$before/build-device/bench_cuda
      line=$(timeout "$(left)" $bin decode "$wf" 512 32 4096 32 8 14336 128256 2>>"$out/decode_err.log" | grep '^RESULT')
      echo "$side $wf $line" | tee -a "$out/decode.txt"
    done
  done
done
if [ -n "$ctests" ] && [ "$(left)" -gt 30 ]; then
  timeout "$(left)" ctest --test-dir build-device -R "$ctests" -j8 --output-on-failure >"$out/ctest.log" 2>&1 || status=1
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|FAIL" "$out/ctest.log" | head -40
fi
echo
echo "decode step, 8B shape, T 512: ms (each run), roofline ms = (weight + KV bytes) / $copy_tbps TB/s, fraction of it"
python3 - "$out/decode.txt" "$copy_tbps" <<'EOF'
import sys, statistics
runs, bw = {}, float(sys.argv[2]) * 1e12
for line in open(sys.argv[1]):
    f = line.split()
    kv = dict(x.split("=", 1) for x in f[2:] if "=" in x)
    if "ms" in kv:
        runs.setdefault((f[1], f[0]), []).append((float(kv["ms"]), float(kv["weight_bytes"]) + float(kv["kv_bytes"])))
for (wf, side), v in sorted(runs.items()):
    ms = statistics.median(m for m, _ in v)
    roof = v[0][1] / bw * 1e3
    print("%-5s %-6s %-24s median %.4f  roof %.4f  ratio %.3f" % (wf, side, " ".join("%.4f" % m for m, _ in v), ms, roof,
                                                                   roof / ms))
EOF
echo "total: $(( $(date +%s) - t_start )) s, status $status"
exit $status
