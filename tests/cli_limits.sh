#!/usr/bin/env bash
# cli_limits.sh RLX HOSTILE_DIR PYTHON REF_DIR WORK_DIR — sizes past the
# largest tensor and past the memory budget through the command line:
# a message naming what and a non-zero exit, never a crash, an OOM kill,
# an empty message or a "# ok" for a graph that cannot be built; and a
# metadata key of the wrong type named as such.
set -uo pipefail
rlx=$1 dir=$2 python=$3 ref=$4 work=$5
mkdir -p "$work"
# shellcheck source=cli_expect.sh
. "$(dirname "$0")/cli_expect.sh"
# Also never an empty message ("RLX_ERR_NOMEM: " and nothing after it).
expect_msg() {
  expect "$@"
  grep -q 'RLX_ERR_[A-Z]*: *$' <<<"$expect_out" && fail "an empty message from: ${*:3}"$'\n'"$expect_out"
}

export RLX_MEMORY_LIMIT_MB=1024
for f in "$dir"/*.rlx; do
  case $(basename "$f") in
    arena_16g.rlx|symbolic_2p62.rlx) ;;  # legal graphs: checked below
    *) expect_msg 1 "RLX_MAX_TENSOR_BYTES" "$rlx" graph check "$f"
       out=$("$rlx" graph check "$f" 2>&1); grep -q '^# ok' <<<"$out" && fail "# ok for $f" ;;
  esac
done
expect_msg 1 "RLX_ERR_NOMEM: cpu plan: the arena" "$rlx" graph run "$dir/arena_16g.rlx"
expect_msg 2 "--bind: '4611686018427387904' is not a whole number" "$rlx" graph run "$dir/symbolic_2p62.rlx" --bind S=4611686018427387904
expect_msg 2 "--bind: '9223372036854775808' is not" "$rlx" graph run "$dir/symbolic_2p62.rlx" --bind S=9223372036854775808
expect_msg 2 "--bind: '-3' is not" "$rlx" graph run "$dir/symbolic_2p62.rlx" --bind S=-3
expect_msg 2 "--threads: '-5' is not" "$rlx" graph run "$dir/symbolic_2p62.rlx" --threads -5
expect_msg 1 "input \"x\" bound as f32[1099511627776,4] is larger" "$rlx" graph run "$dir/symbolic_2p62.rlx" --bind S=1099511627776
expect_msg 1 "RLX_ERR_NOMEM: cpu plan: the arena" env RLX_MEMORY_LIMIT_MB=1 "$rlx" graph run "$dir/symbolic_2p62.rlx" --bind S=100000
expect_msg 0 "output 0: f32[4,3]" "$rlx" graph run "$dir/symbolic_2p62.rlx" --bind S=3

# rlx generate --ctx 16777216: the KV cache refused before it is allocated
"$python" "$ref/llama_tiny.py" --out "$work" > /dev/null || fail "llama_tiny.py"
expect_msg 1 "KV cache (n_ctx 16777216" "$rlx" generate -m "$work/llama_f32.gguf" --ctx 16777216 -n 1 -p hi

# a message says what is wrong: general.architecture present with another type
"$python" - "$work/arch_u32.gguf" <<'PY' || fail "writing arch_u32.gguf"
import struct, sys
key = b"general.architecture"  # GGUF v3, no tensors, one key of type u32 (4)
data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, 7)
open(sys.argv[1], "wb").write(data)
PY
expect_msg 1 "general.architecture is a u32, not a string" "$rlx" generate -m "$work/arch_u32.gguf" -p hi -n 1

[ "$fails" = 0 ] && echo "cli_limits: all passed" || echo "cli_limits: $fails failed"
[ "$fails" = 0 ]
