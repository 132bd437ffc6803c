#!/usr/bin/env bash
# cli_hostile.sh RLX PYTHON WORK_DIR — rlx on hostile files
# (tests/ref/hostile_models.py writes them):
#   - rlx info prints a metadata key, a string value and a tensor name that
#     carry terminal control sequences escaped (\x1b...), never raw;
#   - rlx generate prints tokens longer than 256 bytes whole (greedy
#     output: "a" then pieces of the reference vocabulary);
#   - a vocabulary shorter than the embedding: a message, exit 1;
#   - generate -f of a file with a NUL byte: a message naming the offset,
#     exit 1 (not a prompt silently cut there).
set -uo pipefail
rlx=$1 python=$2 work=$3
mkdir -p "$work"
# shellcheck source=cli_expect.sh
. "$(dirname "$0")/cli_expect.sh"
"$python" "$(dirname "$0")/ref/hostile_models.py" --out "$work" || { echo "FAIL: hostile_models.py"; exit 1; }

"$rlx" info "$work/evil_names.gguf" >"$work/info.out" 2>&1 || fail "rlx info exited non-zero: $(cat "$work/info.out")"
if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$work/info.out"; then
  fail "rlx info printed control bytes: $(cat -v "$work/info.out")"
fi
for want in 'evil.\x1b]0;pwned\x07.key' '"value\x1b[31m"' 'junk\x1b[2J\x1b[H'; do
  grep -qF -- "$want" "$work/info.out" || fail "rlx info does not show $want escaped: $(cat -v "$work/info.out")"
done

"$rlx" generate -m "$work/long_tokens.gguf" -p a -n 3 --temp 0 --ignore-eos --threads 1 >"$work/gen.out" \
  2>"$work/gen.err" || fail "generate with long tokens exited non-zero: $(cat "$work/gen.err")"
"$python" - "$work/gen.out" "$work/long_tokens.pieces" <<'PY' || fail "generated text is not 'a' and 3 whole pieces"
import sys
out = open(sys.argv[1], "rb").read()
pieces = set(open(sys.argv[2], "rb").read().split(b"\n")[1:])
assert out.startswith(b"a") and out.endswith(b"\n"), out[:80]
body = out[1:-1]
chunks = [body[i:i + 300] for i in range(0, len(body), 300)]
assert len(body) == 900 and all(c in pieces for c in chunks), (len(body), body[:80])
PY

out=$("$rlx" generate -m "$work/short_vocab.gguf" -p a -n 1 2>&1)
rc=$?
[ $rc = 1 ] || fail "short vocabulary: exit $rc (want 1)"
grep -qF "tokenizer.ggml.tokens has 90 entries" <<<"$out" || fail "short vocabulary: no message: $out"

printf 'a\0b' >"$work/nul.txt"
out=$("$rlx" generate -m "$work/long_tokens.gguf" -f "$work/nul.txt" -n 1 2>&1)
rc=$?
[ $rc = 1 ] || fail "prompt file with a NUL byte: exit $rc (want 1)"
grep -qF "NUL byte at offset 1" <<<"$out" || fail "prompt file with a NUL byte: no message: $out"

[ $fails = 0 ] && echo "ok" || echo "$fails failures"
[ $fails = 0 ]
