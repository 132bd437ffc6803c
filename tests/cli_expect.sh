# cli_expect.sh — sourced by the tests/cli_*.sh scripts: a failure count
# and the check of one command's exit status and output.
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect RC NEEDLE CMD...: exit status RC and NEEDLE in stdout+stderr; the
# output is left in $expect_out for further checks.
expect() {
  local want=$1 needle=$2
  shift 2
  local rc
  expect_out=$("$@" 2>&1)
  rc=$?
  [ "$rc" = "$want" ] || fail "exit $rc (want $want): $*"$'\n'"$expect_out"
  grep -qF -- "$needle" <<<"$expect_out" || fail "no '$needle' in the output of: $*"$'\n'"$expect_out"
}
