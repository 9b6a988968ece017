# cli_lib.sh - sourced by the CLI test scripts of tests/: a scratch dir $T removed on exit, a
# failure count, and the expectations every script checks (exit code, what stdout/stderr say).
# The sourcing script ends with its own verdict on $fails.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); [ "${RS_TEST_FAIL_FAST:-0}" != 1 ] || exit 1; }
# expect_rc WANT CMD...: runs CMD with stdout in $T/out and stderr in $T/err
expect_rc() {
  local want=$1; shift
  "$@" >"$T/out" 2>"$T/err"; local rc=$?
  [ "$rc" = "$want" ] || fail "exit $rc (want $want): $* :: $(head -c 300 "$T/out" "$T/err")"
}
expect_err() { grep -q -- "$1" "$T/err" || fail "stderr lacks '$1': $(head -c 300 "$T/err")"; }
expect_out() { grep -q -- "$1" "$T/out" || fail "stdout lacks '$1': $(head -c 300 "$T/out")"; }
