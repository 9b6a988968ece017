#!/usr/bin/env bash
# jobs_tp.sh RESHARD SRC [MPIEXEC...] - `reshard tp check` on the campaign runner (props/runner.h):
# the result must not depend on the worker count or the sharding.
#  1. one seed, 2,000 cases (the feature gate is judged) with --jobs 1 and --jobs 4: the --json
#     reports (timing keys removed), the JUnit files (time attributes removed), the saved shrunk
#     cases, the console (its rate lines removed) and the exit status are the same byte for byte;
#  2. the same with a planted bug (RS_MUTANT=866, a LayerNorm split on its features: first caught
#     at case 82 of seed 11) when the binary was built with -DRS_MUTATION=ON (skipped otherwise: a
#     release build has no TP planted bug to switch on): the campaign stops at its lowest failing
#     case whatever the workers ran past it, and with --keep-going counts every failure;
#  3. --shard 1/3, 2/3, 3/3 merged by `reshard report merge`: the merged "runner" object is the
#     unsharded one's (with the planted bug: --keep-going, since a campaign that stops at its first
#     failure stops each shard at the shard's own).
# Exit 0 pass, 1 a difference, 77 skipped (no python3 to compare the JSON). The comparisons are
# tests/runner_lib.sh's.
. "$(dirname "$0")/runner_lib.sh"

# run NAME ARGS...: tp check in $T/NAME
run() { rl_run "$1" "$R" tp check --quiet --json out.json --junit out.xml --regress-dir reg "${@:2}"; }
# shards NAME ARGS...: NAME-s1..3, --shard K/3 with --jobs 2
shards() { for k in 1 2 3; do run "$1-s$k" "${@:2}" --jobs 2 --shard "$k/3"; done; }

cases=${RS_JOBS_TP_CASES:-2000}
# 1. no failure: one seed, 1 and 4 workers (both implementations)
run a1 --seed 7 --cases "$cases" --jobs 1
run a4 --seed 7 --cases "$cases" --jobs 4
rl_same a1 a4 "--jobs 1 vs 4"
[ "$(rl_rc a1)" = 0 ] || bad "tp check --seed 7: exit $(rl_rc a1): $(tail -n 3 "$T/a1/out.txt")"
grep -q '"runner"' "$T/a1/out.json" || bad "the --json report has no runner object"
grep -q "\"cases\":$cases" "$T/a4/out.json" || bad "--jobs 4 did not report $cases cases"
# 3. shards merged
shards a1 --seed 7 --cases "$cases"
rl_merged a1 "--shard K/3 merged" a1-s1 a1-s2 a1-s3

# 2. a planted bug, when this binary has them (not when one came from outside)
rl_mutation_build 866 "$T/probe.txt" tp check --quiet --seed 11 --cases 200 --regress-dir "$T/probe"
case $probe_rc in
1)
  export RS_MUTANT=866
  run m1 --seed 11 --cases 600 --jobs 1
  run m4 --seed 11 --cases 600 --jobs 4
  [ "$(rl_rc m1)" = 1 ] || bad "RS_MUTANT=866: exit $(rl_rc m1), expected 1"
  rl_same m1 m4 "RS_MUTANT=866 --jobs 1 vs 4 (stops at the first failure)"
  grep -q 'first_fail_index' "$T/m1/out.json" || bad "RS_MUTANT=866: no first failing index in the runner object"
  ls "$T/m1/reg"/tp-*.json >/dev/null 2>&1 || bad "RS_MUTANT=866: no shrunk case saved"
  run k1 --seed 11 --cases 600 --jobs 1 --keep-going
  run k4 --seed 11 --cases 600 --jobs 4 --keep-going
  rl_same k1 k4 "RS_MUTANT=866 --keep-going --jobs 1 vs 4"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runner"]; sys.exit(0 if r["properties"]["tp"]["fail"] > 1 else 1)' \
    "$T/k1/out.json" || bad "RS_MUTANT=866 --keep-going: fewer than two failing cases (the comparison shows nothing)"
  shards k1 --seed 11 --cases 600 --keep-going
  rl_merged k1 "RS_MUTANT=866 --keep-going --shard K/3 merged" k1-s1 k1-s2 k1-s3
  unset RS_MUTANT
  # a worker that crashes (993), hangs (994) or runs out of memory (995) on case 38 (test hooks of
  # the mutation build): reported as such, the report still written, nobody left
  rl_crash "$T/c" tp check --seed 1 --cases 200 --jobs 3
  rl_hang "$T/h" 3 tp check --seed 1 --cases 200 --jobs 3
  rl_oom "$T/m" tp check --seed 1 --cases 200 --jobs 3
  sleep 0.5
  rl_left "the hooks' workers" "--regress-dir $T/"
  ;;
0) echo "note: not a -DRS_MUTATION=ON build: the planted-bug comparison is skipped" ;;
skip) echo "note: RS_MUTANT=$RS_MUTANT given: the planted-bug comparison is skipped" ;;
*) bad "RS_MUTANT=866 probe: $(tail -n 3 "$T/probe.txt")" ;;
esac

rl_finish jobs_tp
