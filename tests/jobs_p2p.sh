#!/usr/bin/env bash
# jobs_p2p.sh RESHARD SRC [MPIEXEC...] - `reshard p2p check` on the campaign runner (props/runner.h):
# the result must not depend on the worker count or the sharding.
#  1. one seed with --jobs 1 and --jobs 4: the --json reports (timing keys removed), the JUnit files
#     (time attributes removed), the saved shrunk models, the console's FAIL lines and the exit
#     status are the same byte for byte; with --impl ref and --impl opt;
#  2. the same with a planted bug (RS_MUTANT=403, MXFP8 rounding: first caught at case 12, failing
#     again at later cases, so workers find failures above the first) when the binary was built
#     with -DRS_MUTATION=ON; skipped otherwise (a release build has no p2p planted bug to switch on);
#  3. --shard 1/3, 2/3, 3/3 merged by `reshard report merge`: the merged "runner" object is the
#     unsharded one's (the merge's own keys aside), also with the planted bug;
#  4. a worker hung on a case (the stall copy-service plug-in, when built) is reported within
#     --case-timeout, exit 4, no worker left behind.
# Exit 0 pass, 1 a difference, 77 skipped (no python3 to compare the JSON).
set -u
R=${1:?usage: jobs_p2p.sh RESHARD SRC [MPIEXEC...]}
R=$(cd "$(dirname "$R")" && pwd)/$(basename "$R") # the runs below work in their own folders
command -v python3 >/dev/null || { echo "skip: python3 is needed to compare the JSON reports"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# the report without wall-clock keys, keys sorted (the order is the writer's, kept by json_of)
canon() {
  python3 - "$1" <<'EOF'
import json, sys
TIMING = {"seconds", "cpu_seconds", "cases_per_second", "rate", "wall_seconds"}
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
with open(sys.argv[1]) as f:
    print(json.dumps(strip(json.load(f)), indent=1))
EOF
}

# run NAME ARGS...: p2p check in $T/NAME (relative --regress-dir, so saved paths compare equal)
run() {
  local d=$T/$1
  shift
  mkdir -p "$d"
  (cd "$d" && "$R" p2p check --quiet --json out.json --junit out.xml --regress-dir reg "$@" >out.txt 2>err.txt </dev/null
   echo $? >rc)
}

# same A B WHAT: the two runs' reports, fixtures, FAIL lines and exit status are equal
same() {
  local a=$T/$1 b=$T/$2 what=$3
  [ "$(cat "$a/rc")" = "$(cat "$b/rc")" ] || { fail "$what: exit $(cat "$a/rc") vs $(cat "$b/rc")"; return; }
  if [ -f "$a/out.json" ] || [ -f "$b/out.json" ]; then
    diff <(canon "$a/out.json") <(canon "$b/out.json") >"$T/d" || { fail "$what: --json differs"; head -20 "$T/d"; }
    diff <(sed 's/ time="[^"]*"//g' "$a/out.xml") <(sed 's/ time="[^"]*"//g' "$b/out.xml") >"$T/d" ||
      { fail "$what: --junit differs"; head -20 "$T/d"; }
  fi
  if [ -d "$a/reg" ] || [ -d "$b/reg" ]; then
    diff -r "$a/reg" "$b/reg" >"$T/d" 2>&1 || { fail "$what: saved models differ"; head -10 "$T/d"; }
  fi
  diff <(grep -E '^(FAIL|  )' "$a/out.txt") <(grep -E '^(FAIL|  )' "$b/out.txt") >"$T/d" ||
    { fail "$what: FAIL lines differ"; head -10 "$T/d"; }
}

# merged A WHAT: shards 1..3 of run A merged == A's runner object
merged() {
  local a=$1 what=$2
  "$R" report merge "$T/$a-s1/out.json" "$T/$a-s2/out.json" "$T/$a-s3/out.json" --json "$T/$a-m.json" >"$T/$a-m.txt" 2>&1
  local rc=$? want
  want=$(cat "$T/$a/rc")
  [ "$rc" = "$want" ] || fail "$what: report merge exit $rc, the unsharded run's $want ($(tail -n 3 "$T/$a-m.txt"))"
  python3 - "$T/$a/out.json" "$T/$a-m.json" >"$T/d" <<'EOF' || { fail "$what: merged runner object differs"; cat "$T/d"; }
import json, sys
a = json.load(open(sys.argv[1]))["runner"]
b = json.load(open(sys.argv[2]))["runner"]
for x in (a, b):
    x.pop("seconds", None)
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print(k, json.dumps(a.get(k))[:300], "!=", json.dumps(b.get(k))[:300])
    sys.exit(1)
EOF
  for k in 1 2 3; do
    grep -q "\"shard\":[[:space:]]*\"$k/3\"" "$T/$a-s$k/out.json" || fail "$what: shard $k/3's report does not say its shard"
  done
}

cases=${RS_JOBS_P2P_CASES:-125}
# 1. no failure: ref and opt, one seed, 1 and 4 workers
run ref1 --impl ref --seed 5 --cases "$cases" --jobs 1
run ref4 --impl ref --seed 5 --cases "$cases" --jobs 4
same ref1 ref4 "--impl ref --jobs 1 vs 4"
run opt1 --seed 5 --cases "$cases" --jobs 1
run opt4 --seed 5 --cases "$cases" --jobs 4
same opt1 opt4 "--impl opt --jobs 1 vs 4"
[ "$(cat "$T/opt1/rc")" = 0 ] || fail "p2p check --seed 5: exit $(cat "$T/opt1/rc"): $(tail -n 3 "$T/opt1/out.txt" "$T/opt1/err.txt")"
grep -q '"runner"' "$T/opt1/out.json" || fail "the --json report has no runner object"
grep -q "\"cases\":[[:space:]]*$cases" "$T/opt4/out.json" || fail "--jobs 4 did not report $cases cases"
# 3. shards merged
for k in 1 2 3; do run "opt1-s$k" --seed 5 --cases "$cases" --jobs 2 --shard "$k/3"; done
merged opt1 "--shard K/3 merged"

# 2. a planted bug, when this binary has them (not when one came from outside: ci/mutation.sh runs
#    this test with the runner's own planted bugs, 991 and 992, which every run here must keep)
prc=skip
if [ -z "${RS_MUTANT:-}" ]; then
  RS_MUTANT=403 "$R" p2p check --quiet --seed 11 --cases 14 --regress-dir "$T/probe" >"$T/probe.txt" 2>&1 </dev/null
  prc=$?
fi
case $prc in
1)
  export RS_MUTANT=403
  run mut1 --seed 11 --cases 60 --jobs 1
  run mut4 --seed 11 --cases 60 --jobs 4
  [ "$(cat "$T/mut1/rc")" = 1 ] || fail "RS_MUTANT=403: exit $(cat "$T/mut1/rc"), expected 1"
  same mut1 mut4 "RS_MUTANT=403 --jobs 1 vs 4"
  grep -q 'first_fail_index' "$T/mut1/out.json" || fail "RS_MUTANT=403: no first failing index in the runner object"
  ls "$T/mut1/reg"/p2p_opt_oracle-*.json >/dev/null 2>&1 || fail "RS_MUTANT=403: no shrunk model saved"
  for k in 1 2 3; do run "mut1-s$k" --seed 11 --cases 60 --jobs 2 --shard "$k/3"; done
  merged mut1 "RS_MUTANT=403 --shard K/3 merged"
  unset RS_MUTANT
  # a worker that crashes (993), hangs (994) or runs out of memory (995) on case 38 (test hooks of
  # the mutation build): reported as such, the report still written for the crash, nobody left
  RS_MUTANT=993 timeout 120 "$R" p2p check --seed 1 --cases 200 --jobs 3 --json "$T/c.json" --regress-dir "$T/rgc" \
    >"$T/c.txt" 2>&1 </dev/null
  rc=$?
  { [ $rc = 1 ] && grep -q "FAIL crash: worker [0-9]* killed by signal 11.*case 38" "$T/c.txt"; } ||
    fail "a crashing worker: exit $rc: $(tail -n 3 "$T/c.txt")"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runner"]; sys.exit(0 if r["crash_index"] == 37 and r["cases"] == 37 else 1)' \
    "$T/c.json" 2>/dev/null || fail "the crash's --json report does not say case index 37 after 37 cases"
  s0=$(date +%s)
  RS_MUTANT=994 timeout 120 "$R" p2p check --seed 1 --cases 200 --jobs 3 --case-timeout 3 --quiet --regress-dir "$T/rgh" \
    >"$T/h.txt" 2>&1 </dev/null
  rc=$? el=$(($(date +%s) - s0))
  { [ $rc = 4 ] && grep -q "hung: case 38" "$T/h.txt"; } || fail "a hanging worker: exit $rc after $el s: $(tail -n 3 "$T/h.txt")"
  [ $el -le 20 ] || fail "a hanging worker was reported after $el s (--case-timeout 3)"
  RS_MUTANT=995 timeout 120 "$R" p2p check --seed 1 --cases 200 --jobs 3 --quiet --regress-dir "$T/rgm" >"$T/m.txt" 2>&1 </dev/null
  rc=$?
  { [ $rc = 3 ] && grep -q "out of memory.*case 38" "$T/m.txt"; } || fail "a worker out of memory: exit $rc: $(tail -n 3 "$T/m.txt")"
  sleep 0.5
  pgrep -f -- "--regress-dir $T/rg" >/dev/null 2>&1 && fail "workers left running"
  ;;
0) echo "note: not a -DRS_MUTATION=ON build: the planted-bug comparison is skipped" ;;
skip) echo "note: RS_MUTANT=$RS_MUTANT given: the planted-bug comparison is skipped" ;;
*) fail "RS_MUTANT=403 probe: $(tail -n 3 "$T/probe.txt")" ;;
esac

# 4. a hung worker: the stall plug-in's run() never returns
stall=$(cd "$(dirname "$R")" && pwd)/tests/libstall_copy_plugin.so
if [ -f "$stall" ]; then
  t0=$(date +%s)
  "$R" p2p check --quiet --seed 1 --cases 8 --jobs 2 --case-timeout 2 --timeout 60 --copy-service "$stall" \
    --regress-dir "$T/stall" >"$T/stall.txt" 2>&1 </dev/null
  rc=$?
  el=$(($(date +%s) - t0))
  [ "$rc" = 4 ] || fail "a hung worker: exit $rc, expected 4: $(tail -n 3 "$T/stall.txt")"
  [ "$el" -le 20 ] || fail "a hung worker was reported after ${el} s (--case-timeout 2)"
  grep -q 'hung' "$T/stall.txt" || fail "a hung worker: the message does not say hung: $(tail -n 3 "$T/stall.txt")"
  sleep 0.2
  pgrep -f -- "$T/stall" >/dev/null 2>&1 && fail "a hung worker: workers left behind"
else
  echo "note: $stall not built: the hung-worker check is skipped"
fi

[ "$fails" = 0 ] && echo "jobs_p2p: pass" && exit 0
exit 1
