#!/usr/bin/env bash
# jobs_ckpt.sh RESHARD SRC [MPIEXEC...] - `reshard ckpt check` on the campaign runner (props/runner.h),
# for the reference's campaign (--impl ref), opt's cross property (--impl opt) and both in one
# campaign (--impl both):
#   1. --jobs 1 and --jobs 4 give the same --json report (timing keys removed), the same JUnit file,
#      the same stdout (the rate lines removed) and the same saved fixtures, with a planted bug when the binary has them
#      (RS_MUTANT=304: ref saves a non-main replica too, four properties fail from cases 0 and 3;
#      RS_MUTANT=352: opt's direct load reads one request's hull; RS_MUTANT=305 under --impl both:
#      ref's strict return_all drops the missing keys), else on passing campaigns;
#   2. --shard 1/3, 2/3, 3/3 merged by `reshard report merge` equal the unsharded runner object;
#   3. a --seconds campaign with --jobs 2 stops within about a second of its time, and --scratch
#      holds nothing of the campaign afterwards (each worker worked in a directory of its own below
#      the campaign's);
#   4. with planted bugs compiled in: a worker that crashes (993), hangs (994) or runs out of memory
#      (995) on case 38 is reported as such (exit 1 naming the case / 4 / 3), the report is written,
#      no worker is left running and nothing is left in --scratch;
#   5. --jobs 2 with --transport mpi is a usage error (exit 2);
#   6. given an MPI launcher ($3...): --distribute on 2 ranks gives --jobs 1's report and fixtures.
set -uo pipefail
. "$(dirname "$0")/runner_lib.sh" # the comparisons
# the campaigns' --scratch: on tmpfs where there is one (a disk's fsyncs make every save slow)
scr=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$T" "$scr"' EXIT
RL_TIMING_LINES='cases/s\|cases (seed' # stdout's lines that carry a rate or a time

# does this binary carry planted bugs? (a mutation build fails ref bug 305 by case 24 of seed 11)
rl_mutation_build 305 "$T/probe.txt" ckpt check --cases 40 --seed 11 --quiet --shrink-runs 5 --regress-dir "$T/probe"

# one campaign kind: NAME, the planted bug, the cases, then the flags
run_kind() {
  local name=$1 bugid=$2 cases=$3
  shift 3
  local bug=(env)
  [ $mut = 1 ] && bug=(env RS_MUTANT=$bugid)
  # ---- 1. the same result for every worker count ----
  for j in 1 4; do
    rl_run "$name$j" "${bug[@]}" "$R" ckpt check "$@" --cases $cases --seed 11 --jobs $j --shrink-runs 60 --json out.json \
      --junit out.xml --regress-dir reg --scratch "$scr"
  done
  rl_same "${name}1" "${name}4" "$name: --jobs 1 vs 4"
  local rc1
  rc1=$(rl_rc "${name}1")
  if [ $mut = 1 ]; then
    [ "$rc1" = 1 ] || bad "$name: planted bug $bugid not caught (exit $rc1)"
    grep -q "^FAIL" "$T/${name}1/out.txt" && grep -q "replay: reshard ckpt replay" "$T/${name}1/out.txt" ||
      bad "$name: no FAIL line with a replay command under planted bug $bugid"
  else
    [ "$rc1" = 0 ] || { bad "$name: the campaign failed (exit $rc1)"; tail -5 "$T/${name}1/out.txt"; }
  fi
  local nfix
  nfix=$(ls "$T/${name}1/reg" 2>/dev/null | wc -l)
  [ $mut = 1 ] && [ "$nfix" = 0 ] && bad "$name: no fixture saved under planted bug $bugid"
  for f in "$T/${name}1/reg"/*.json; do # every saved fixture replays as failing
    [ -e "$f" ] || continue
    RS_MUTANT=$bugid "$R" ckpt replay "$f" > /dev/null 2>&1
    [ $? = 1 ] || bad "$name: fixture $(basename "$f") does not fail on replay"
  done
  echo "1. $name: --jobs 1 vs 4: exit $rc1, $nfix fixture(s), $(grep -c '^FAIL' "$T/${name}1/out.txt") FAIL line(s) [${SECONDS} s]"

  # ---- 2. shards merged = the unsharded run ----
  for k in 1 2 3; do
    rl_run "${name}s$k" "${bug[@]}" "$R" ckpt check "$@" --cases $cases --seed 11 --shard $k/3 --jobs 2 --shrink-runs 60 --quiet \
      --json out.json --regress-dir reg --scratch "$scr"
  done
  # ckpt_opt alone stops at its first failure: a shard runs past the campaign's cut, so only the
  # merged verdict and first failure are compared there; every other campaign runs to its end and
  # merges exactly
  if [ "$name" != opt ] || [ $mut = 0 ]; then
    rl_merged "${name}1" "$name: 3 shards merged" "${name}s1" "${name}s2" "${name}s3"
  else
    "$R" report merge "$T/${name}s1/out.json" "$T/${name}s2/out.json" "$T/${name}s3/out.json" --json "$T/${name}m.json" \
      > "$T/${name}mo.txt" 2>&1
    local mrc=$?
    [ "$mrc" = "$rc1" ] || { bad "$name: report merge exit $mrc, the unsharded run's $rc1"; tail -3 "$T/${name}mo.txt"; }
    python3 - "$T/${name}1/out.json" "$T/${name}m.json" <<'PY' ||
import json, sys
a = json.load(open(sys.argv[1]))["runner"]["properties"]["ckpt_opt"]
b = json.load(open(sys.argv[2]))["runner"]["properties"]["ckpt_opt"]
keys = ("first_fail_index", "message", "fixture")
a = [str(a.get(k)) for k in keys]
b = [str(b.get(k)) for k in keys]
if a != b:
    print("  %s\n  vs %s" % (a, b))
    sys.exit(1)
PY
      bad "$name: the merged first failure differs from the unsharded one"
  fi
  echo "2. $name: 3 shards merged [${SECONDS} s]"
}

run_kind ref 304 121
run_kind opt 352 40 --impl opt
run_kind both 305 31 --impl both

# ---- 3. --seconds with workers; nothing left in --scratch ----
for impl in ref opt; do
  t0=$(date +%s.%N)
  "$R" ckpt check --impl $impl --seconds 3 --seed 3 --jobs 2 --quiet --scratch "$scr" --regress-dir "$T/rgt" \
    > "$T/t.txt" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  el=$(python3 -c "print(round($t1 - $t0, 2))")
  python3 -c "import sys; sys.exit(0 if $el < 5.5 else 1)" || bad "--impl $impl --seconds 3 --jobs 2 took $el s"
  [ $rc = 0 ] || [ $mut = 1 ] || { bad "--impl $impl --seconds 3 --jobs 2: exit $rc"; tail -3 "$T/t.txt"; }
  echo "3. --impl $impl --seconds 3 --jobs 2: $el s [${SECONDS} s]"
done
[ -z "$(ls -A "$scr" 2>/dev/null)" ] || bad "--scratch holds what a campaign left: $(ls -A "$scr" | head -5)"

# ---- 4. crash, hang, out of memory of a worker (planted bugs only) ----
if [ $mut = 1 ]; then
  rl_crash "$T/c" ckpt check --cases 100 --seed 1 --jobs 3 --scratch "$scr"
  RL_HANG_JSON=1 rl_hang "$T/h" 3 ckpt check --impl opt --cases 100 --seed 1 --jobs 3 --scratch "$scr"
  rl_oom "$T/m" ckpt check --cases 100 --seed 1 --jobs 3 --scratch "$scr"
  sleep 0.5
  rl_left "the hooks' workers" "--regress-dir $T/"
  [ -z "$(ls -A "$scr" 2>/dev/null)" ] || bad "--scratch holds what a stopped campaign left: $(ls -A "$scr" | head -5)"
  echo "4. crash exit 1, hang exit 4 ($hang_s s with --case-timeout 3), out of memory exit 3 [${SECONDS} s]"
else
  echo "4. skipped: no planted bugs in this binary (build with -DRS_MUTATION=ON) [${SECONDS} s]"
fi

# ---- 5. --jobs under --transport mpi ----
"$R" ckpt check --impl opt --transport mpi --jobs 2 --cases 1 > "$T/u.txt" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q -- "--jobs" "$T/u.txt"; } || bad "--jobs 2 --transport mpi: exit $rc, want a usage error naming --jobs"
echo "5. --jobs 2 --transport mpi: exit $rc [${SECONDS} s]"

# ---- 6. --distribute: two MPI ranks share the case range (when a launcher is given) ----
# (no leak checks under a sanitizer build: Open MPI's own allocations live until exit)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
shift 2
if [ $# -gt 0 ] && [ -n "$1" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  dbug=(env)
  [ $mut = 1 ] && dbug=(env RS_MUTANT=304)
  rl_run dist timeout 300 "${dbug[@]}" "$@" -np 2 "$R" ckpt check --distribute --cases 121 --seed 11 --shrink-runs 60 \
    --json out.json --regress-dir reg --scratch "$scr"
  rc=$(rl_rc dist)
  if grep -qE "not available|built without MPI" "$T/dist/out.txt"; then
    echo "6. skipped: --distribute is not in this build [${SECONDS} s]"
  else
    want=$(rl_rc ref1)
    { [ $rc = "$want" ] || { [ "$want" = 1 ] && [ $rc != 0 ]; }; } || bad "--distribute: exit $rc, --jobs 1's $want"
    diff <(rl_strip "$T/ref1/out.json") <(rl_strip "$T/dist/out.json") > "$T/d4.txt" ||
      { bad "--distribute: --json differs from --jobs 1's"; head -20 "$T/d4.txt"; }
    diff -r "$T/ref1/reg" "$T/dist/reg" > /dev/null 2>&1 || { [ ! -d "$T/ref1/reg" ] && [ ! -d "$T/dist/reg" ]; } ||
      bad "--distribute: saved fixtures differ from --jobs 1's"
    echo "6. --distribute on 2 ranks: exit $rc, the report and fixtures of --jobs 1 [${SECONDS} s]"
  fi
else
  echo "6. skipped: no MPI launcher given [${SECONDS} s]"
fi

rl_finish jobs_ckpt
