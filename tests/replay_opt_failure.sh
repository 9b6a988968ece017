#!/usr/bin/env bash
# replay_opt_failure.sh RESHARD - a failure found under opt fails again on replay. With a planted opt
# bug on (RS_MUTANT=105: opt's schedule skips the local copy) a short opt campaign saves shrunk
# failures; `reshard replay FILE` must re-run each with opt (the file's "impl") and exit 1, and so
# must the regression script (tests/replay_regressions.sh) over that directory; with the bug off both
# pass. Before the fix, replay defaulted to ref, the opt properties SKIPped and replay said 0.
# Outside a mutation build (-DRS_MUTATION=ON) or without opt/ the planted bug does nothing: exit 77 (skipped).
set -u
R=${1:?usage: replay_opt_failure.sh path/to/reshard}
here=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/cli_lib.sh"
RS_MUTANT=105 "$R" check --impl opt --seed 1 --cases 300 --quiet --regress-dir "$T/reg" \
  >"$T/check.out" 2>&1 </dev/null
rc=$?
if [ "$rc" = 0 ] || ! ls "$T"/reg/*.json >/dev/null 2>&1; then
  echo "skipped: RS_MUTANT=105 changes nothing here (not a -DRS_MUTATION=ON build with opt/), exit $rc"
  exit 77
fi
n=0
for f in "$T"/reg/*.json; do
  n=$((n + 1))
  grep -Eq '"impl":[[:space:]]*"opt"' "$f" || fail "$f does not record impl opt"
  RS_MUTANT=105 "$R" replay "$f" >"$T/out" 2>&1; rc=$?
  [ "$rc" = 1 ] || fail "replay with the bug on: exit $rc (want 1): $(head -c 300 "$T/out")"
  grep -q '(opt): FAIL' "$T/out" || fail "replay did not run opt: $(head -c 300 "$T/out")"
  "$R" replay "$f" >"$T/out" 2>&1; rc=$?
  [ "$rc" = 0 ] || fail "replay with the bug off: exit $rc (want 0): $(head -c 300 "$T/out")"
done
RS_MUTANT=105 bash "$here/replay_regressions.sh" "$R" "$T/reg" >"$T/out" 2>&1 &&
  fail "replay_regressions.sh passes a saved opt failure with the bug on"
bash "$here/replay_regressions.sh" "$R" "$T/reg" >"$T/out" 2>&1 ||
  fail "replay_regressions.sh fails with the bug off: $(tail -n 3 "$T/out")"
if [ "$fails" -ne 0 ]; then
  echo "$fails check(s) failed" >&2
  exit 1
fi
echo "ok: $n saved opt failure(s) fail on replay with the bug and pass without"
