#!/usr/bin/env bash
# jobs_p2p.sh RESHARD SRC [MPIEXEC...] - `reshard p2p check` on the campaign runner (props/runner.h):
# the result must not depend on the worker count or the sharding.
#  1. one seed with --jobs 1 and --jobs 4: the --json reports (timing keys removed), the JUnit files
#     (time attributes removed), the saved shrunk models, the console (its rate lines removed) and
#     the exit status are the same byte for byte; with --impl ref and --impl opt;
#  2. the same with a planted bug (RS_MUTANT=403, MXFP8 rounding: first caught at case 12, failing
#     again at later cases, so workers find failures above the first) when the binary was built
#     with -DRS_MUTATION=ON; skipped otherwise (a release build has no p2p planted bug to switch on);
#  3. --shard 1/3, 2/3, 3/3 merged by `reshard report merge`: the merged "runner" object is the
#     unsharded one's, also with the planted bug;
#  4. a worker hung on a case (the stall copy-service plug-in, when built) is reported within
#     --case-timeout, exit 4, no worker left behind.
# Exit 0 pass, 1 a difference, 77 skipped (no python3 to compare the JSON). The comparisons are
# tests/runner_lib.sh's.
. "$(dirname "$0")/runner_lib.sh"

# run NAME ARGS...: p2p check in $T/NAME
run() { rl_run "$1" "$R" p2p check --quiet --json out.json --junit out.xml --regress-dir reg "${@:2}"; }
# shards NAME ARGS...: NAME-s1..3, --shard K/3 with --jobs 2
shards() { for k in 1 2 3; do run "$1-s$k" "${@:2}" --jobs 2 --shard "$k/3"; done; }

cases=${RS_JOBS_P2P_CASES:-125}
# 1. no failure: ref and opt, one seed, 1 and 4 workers
run ref1 --impl ref --seed 5 --cases "$cases" --jobs 1
run ref4 --impl ref --seed 5 --cases "$cases" --jobs 4
rl_same ref1 ref4 "--impl ref --jobs 1 vs 4"
run opt1 --seed 5 --cases "$cases" --jobs 1
run opt4 --seed 5 --cases "$cases" --jobs 4
rl_same opt1 opt4 "--impl opt --jobs 1 vs 4"
[ "$(rl_rc opt1)" = 0 ] || bad "p2p check --seed 5: exit $(rl_rc opt1): $(tail -n 3 "$T/opt1/out.txt")"
grep -q '"runner"' "$T/opt1/out.json" || bad "the --json report has no runner object"
grep -q "\"cases\":[[:space:]]*$cases" "$T/opt4/out.json" || bad "--jobs 4 did not report $cases cases"
# 3. shards merged
shards opt1 --seed 5 --cases "$cases"
rl_merged opt1 "--shard K/3 merged" opt1-s1 opt1-s2 opt1-s3

# 2. a planted bug, when this binary has them (not when one came from outside)
rl_mutation_build 403 "$T/probe.txt" p2p check --quiet --seed 11 --cases 14 --regress-dir "$T/probe"
case $probe_rc in
1)
  export RS_MUTANT=403
  run mut1 --seed 11 --cases 60 --jobs 1
  run mut4 --seed 11 --cases 60 --jobs 4
  [ "$(rl_rc mut1)" = 1 ] || bad "RS_MUTANT=403: exit $(rl_rc mut1), expected 1"
  rl_same mut1 mut4 "RS_MUTANT=403 --jobs 1 vs 4"
  grep -q 'first_fail_index' "$T/mut1/out.json" || bad "RS_MUTANT=403: no first failing index in the runner object"
  ls "$T/mut1/reg"/p2p_opt_oracle-*.json >/dev/null 2>&1 || bad "RS_MUTANT=403: no shrunk model saved"
  shards mut1 --seed 11 --cases 60
  rl_merged mut1 "RS_MUTANT=403 --shard K/3 merged" mut1-s1 mut1-s2 mut1-s3
  unset RS_MUTANT
  # a worker that crashes (993), hangs (994) or runs out of memory (995) on case 38 (test hooks of
  # the mutation build): reported as such, the report still written, nobody left
  rl_crash "$T/c" p2p check --seed 1 --cases 200 --jobs 3
  rl_hang "$T/h" 3 p2p check --seed 1 --cases 200 --jobs 3
  rl_oom "$T/m" p2p check --seed 1 --cases 200 --jobs 3
  sleep 0.5
  rl_left "the hooks' workers" "--regress-dir $T/"
  ;;
0) echo "note: not a -DRS_MUTATION=ON build: the planted-bug comparison is skipped" ;;
skip) echo "note: RS_MUTANT=$RS_MUTANT given: the planted-bug comparison is skipped" ;;
*) bad "RS_MUTANT=403 probe: $(tail -n 3 "$T/probe.txt")" ;;
esac

# 4. a hung worker: the stall plug-in's run() never returns
stall=$(cd "$(dirname "$R")" && pwd)/tests/libstall_copy_plugin.so
if [ -f "$stall" ]; then
  t0=$(date +%s)
  "$R" p2p check --quiet --seed 1 --cases 8 --jobs 2 --case-timeout 2 --timeout 60 --copy-service "$stall" \
    --regress-dir "$T/stall" >"$T/stall.txt" 2>&1 </dev/null
  rc=$?
  el=$(($(date +%s) - t0))
  [ "$rc" = 4 ] || bad "a hung worker: exit $rc, expected 4: $(tail -n 3 "$T/stall.txt")"
  [ "$el" -le 20 ] || bad "a hung worker was reported after ${el} s (--case-timeout 2)"
  grep -q 'hung' "$T/stall.txt" || bad "a hung worker: the message does not say hung: $(tail -n 3 "$T/stall.txt")"
  sleep 0.2
  rl_left "a hung worker" "$T/stall"
else
  echo "note: $stall not built: the hung-worker check is skipped"
fi

rl_finish jobs_p2p
