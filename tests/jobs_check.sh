#!/usr/bin/env bash
# jobs_check.sh RESHARD SRC [MPIEXEC...] - `reshard check` on the campaign runner (props/runner.h):
#   1. --jobs 1 and --jobs 4 give the same --json report (timing keys removed), the same JUnit file
#      (time attributes removed), the same stdout (the rate line removed) and the same saved
#      failures, with a failing planted property when the binary has planted bugs (RS_MUTANT=6:
#      ref's empty-shard bug), else on a passing campaign;
#   2. --shard 1/3, 2/3, 3/3 merged by `reshard report merge` equal the unsharded runner object;
#   3. a --seconds campaign with --jobs 2 stops within about a second of its time;
#   4. with planted bugs compiled in: a worker that crashes (993), hangs (994) or runs out of memory
#      (995) on case 38 is reported as such (exit 1 naming the case / 4 / 3), the report is still
#      written for the crash, and no worker is left running.
# Planted bugs 991 (records added as they arrive) and 992 (shard K takes the wrong residue) make it
# fail (props/MUTANTS.md).
set -uo pipefail
. "$(dirname "$0")/runner_lib.sh" # the comparisons

# does this binary carry planted bugs? (a mutation build fails campaign seed 11 of ref bug 6 at once)
rl_mutation_build 6 "$T/probe.txt" check --cases 40 --seed 11 --quiet --regress-dir "$T/probe"
if [ $mut = 1 ]; then bug=(env RS_MUTANT=6); else bug=(env); fi
cases=2500
# run NAME ARGS...: the campaign in $T/NAME
run() { rl_run "$1" "${bug[@]}" "$R" check --cases $cases --seed 11 --json out.json --junit out.xml --regress-dir reg "${@:2}"; }

# ---- 1. the same result for every worker count ----
run j1 --jobs 1
run j4 --jobs 4
rl_same j1 j4 "--jobs 1 vs 4"
if [ $mut = 1 ]; then
  [ "$(rl_rc j1)" = 1 ] || bad "planted bug 6 not caught (exit $(rl_rc j1))"
  grep -q "^FAIL" "$T/j1/out.txt" || bad "no FAIL line with the planted bug"
fi
echo "1. --jobs 1 vs 4: exit $(rl_rc j1), $(ls "$T/j1/reg" 2>/dev/null | wc -l) saved failure(s)"

# ---- 2. shards merged = the unsharded run ----
for k in 1 2 3; do run s$k --shard $k/3 --jobs 2; done
rl_merged j1 "3 shards merged" s1 s2 s3
"$R" report merge "$T/s1/out.json" "$T/s2/out.json" > "$T/m2.txt" 2>&1
[ $? = 2 ] && grep -q "shard 3/3" "$T/m2.txt" || bad "a missing shard is not refused naming it"
"$R" report merge "$T/s1/out.json" "$T/s1/out.json" "$T/s3/out.json" > "$T/m3.txt" 2>&1
[ $? = 2 ] && grep -q "given twice" "$T/m3.txt" || bad "a shard given twice is not refused"
echo "2. 3 shards merged"

# ---- 3. --seconds with workers ----
t0=$(date +%s.%N)
"$R" check --seconds 3 --seed 3 --jobs 2 --quiet --json "$T/t.json" > /dev/null 2>&1
t1=$(date +%s.%N)
el=$(python3 -c "print(round($t1 - $t0, 2))")
python3 -c "import sys; sys.exit(0 if $el < 5.5 else 1)" || bad "--seconds 3 --jobs 2 took $el s"
echo "3. --seconds 3 --jobs 2: $el s"

# ---- 4. crash, hang, out of memory of a worker (planted bugs only) ----
if [ $mut = 1 ]; then
  rl_crash "$T/c" check --cases 200 --seed 1 --jobs 3
  rl_hang "$T/h" 3 check --cases 200 --seed 1 --jobs 3
  rl_oom "$T/m" check --cases 200 --seed 1 --jobs 3
  sleep 0.5
  rl_left "the hooks' workers" "--regress-dir $T/"
  echo "4. crash exit 1, hang exit 4 ($hang_s s with --case-timeout 3), out of memory exit 3"
else
  echo "4. skipped: no planted bugs in this binary"
fi
rl_finish jobs_check
