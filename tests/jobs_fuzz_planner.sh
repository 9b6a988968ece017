#!/usr/bin/env bash
# jobs_fuzz_planner.sh RESHARD SRC [MPIEXEC...] - `reshard fuzz-planner` on the campaign runner
# (props/runner.h):
#   1. --jobs 1 and --jobs 4 give the same --json report (timing keys removed), the same JUnit file,
#      the same stdout (the timing line removed) and the same saved failure, with planted-bug planners: the plug-in
#      that gathers where PyTorch zero-fills (--enumeration pytorch, 1,000 cases: the feature table
#      judged), the P2P side of the planted-bug plug-in (a transfer sent twice) and the Python exec
#      child with --bug (a dropped last step), both --kind redistribute and --kind p2p, and passing
#      plug-ins (ref's greedy, opt's P2P planner: the score tables and worst cases);
#   2. --shard K/N runs merged by `reshard report merge` equal the unsharded "runner" object (and
#      exit status), both kinds;
#   3. an exec planner with --jobs 4 runs one child per worker (plus the parent's own) and none is
#      left after fuzz-planner exits; a hello with "max_instances": 1 gets one worker (2: two), a
#      malformed one is refused; workers killed while their children plan (a crash: exit 1 naming
#      case 1, the report written) and workers hung past --case-timeout (exit 4) leave no child;
#   4. --seconds with workers stops within about a second of its time;
#   5. in a mutation build (-DRS_MUTATION=ON), hooks 993-995: a worker crashing, hanging or running
#      out of memory on case 38 gives exit 1 (report written, crash_index 37) / 4 / 3.
# Exit 77 (skip) without python3 (the reports are compared with it).
set -uo pipefail
. "$(dirname "$0")/runner_lib.sh" # the comparisons
lib=$(dirname "$R")/tests
[ -f "$lib/libplanner_bug.so" ] || { echo "skip: the planner plug-ins are not built ($lib)"; exit 77; }
mark="jobsfp$$" # in every exec child's command line: pgrep finds this test's children only
cleanup() { # children a failed check left behind, by their pids
  local p
  for p in $(cat "$T/all" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
RL_TIMING_LINES=' cases in ' # stdout's timing line
child="$SRC/tests/planner_child.py"

# ---- 1. the same result for every worker count ----
# same NAME EXPECTED_RC fuzz-planner-args...: --jobs 1 vs --jobs 4 (runs NAME1, NAME4)
same() {
  local name=$1 want=$2
  shift 2
  for j in 1 4; do
    rl_run "$name$j" "$R" fuzz-planner "$@" --jobs $j --quiet --json out.json --junit out.xml --regress-dir reg
  done
  local rc1
  rc1=$(rl_rc "${name}1")
  [ "$rc1" = "$want" ] || { bad "$name: --jobs 1 exit $rc1, expected $want"; tail -3 "$T/${name}1/out.txt"; }
  rl_same "${name}1" "${name}4" "$name: --jobs 1 vs 4"
  [ "$want" = 0 ] || [ -n "$(ls "$T/${name}1/reg" 2>/dev/null)" ] || bad "$name: no failure saved"
  echo "1. $name: --jobs 1 and 4 exit $rc1, $(ls "$T/${name}1/reg" 2>/dev/null | wc -l) saved failure(s)"
}
same gather 1 --planner "$lib/libplanner_gather.so" --enumeration pytorch --partial often --seed 2
python3 -c "
import json, sys
d = json.load(open('$T/gather1/out.json'))
r = d['runner']
ok = (d['failures'][0]['kind'] == 'wrong' and r['properties']['plans_match_oracle']['fail'] > 0
      and r['cases'] == 1000 and r['counters']['cases'] == 1000 and r['features']['zero_fill']['count'] > 0
      and r['judge_from'] == 1000 and r['features_missing'] == [] and [g['name'] for g in r['gates']] == ['decline_share', 'checked_some'])
sys.exit(0 if ok else 1)" || bad "gather: the report does not show the wrong plan, the judged feature table and both gates"
same p2p 1 --planner "$lib/libplanner_bug.so" --kind p2p --seed 5 --cases 300
same exec 1 --planner "exec:python3 $child --bug $mark" --seed 5 --cases 150
same execp2p 1 --planner "exec:python3 $child --bug --reshard $R $mark" --kind p2p --seed 3 --cases 40
same pass 0 --planner "$lib/libplanner_greedy.so" --seed 3 --cases 300
same p2ppass 0 --planner "$lib/libplanner_opt_p2p.so" --kind p2p --seed 3 --cases 200

# ---- 2. shards merged = the unsharded run ----
# merged NAME N fuzz-planner-args...: N shards of run NAME1's campaign
merged() {
  local name=$1 n=$2 shards=() k
  shift 2
  for k in $(seq 1 "$n"); do
    rl_run "$name-s$k" "$R" fuzz-planner "$@" --shard "$k/$n" --jobs 2 --quiet --json out.json --regress-dir reg
    shards+=("$name-s$k")
  done
  rl_merged "${name}1" "$name: $n shards merged" "${shards[@]}"
  echo "2. $name: $n shards merged"
}
merged gather 3 --planner "$lib/libplanner_gather.so" --enumeration pytorch --partial often --seed 2
merged p2p 2 --planner "$lib/libplanner_bug.so" --kind p2p --seed 5 --cases 300
merged p2ppass 2 --planner "$lib/libplanner_opt_p2p.so" --kind p2p --seed 3 --cases 200
merged pass 2 --planner "$lib/libplanner_greedy.so" --seed 3 --cases 300

# ---- 3. exec planners: one child per worker, none left behind ----
alive() { # PIDFILE: the pids in it still running (a zombie is dead: killed children of a killed
  local p n=0 # worker are reparented to a reaper that may take its time)
  for p in $(cat "$1" 2>/dev/null); do
    case "$(ps -o stat= -p "$p" 2>/dev/null)" in "" | Z*) ;; *) n=$((n + 1)) ;; esac
  done
  echo $n
}
started() { wc -l < "$1" 2>/dev/null | tr -d ' '; }
# every child writes its pid (sh's, which execs python) to the pid file when it starts
pids="$T/pids"
pre="echo \$\$ >> $pids; echo \$\$ >> $T/all; exec"
: > "$pids"
"$R" fuzz-planner --planner "exec:$pre python3 $child $mark" --seed 3 --cases 60 --jobs 4 --quiet \
  --regress-dir "$T/ex-rg" --json "$T/ex.json" > "$T/ex.txt" 2>&1
rc=$?
[ $rc = 0 ] || { bad "exec planner with --jobs 4: exit $rc"; tail -3 "$T/ex.txt"; }
[ "$(started "$pids")" = 5 ] || bad "exec planner with --jobs 4: $(started "$pids") children started, expected 5 (the parent's and one per worker)"
[ "$(alive "$pids")" = 0 ] || bad "exec planner with --jobs 4: $(alive "$pids") child(ren) left running"
rl_left "a child of this test" "$mark"
echo "3. exec planner --jobs 4: $(started "$pids") children started, $(alive "$pids") left"

# a planner that may run once (hello "max_instances": 1) gets one worker; 2: two; "x": refused
cat > "$T/inst.py" <<'PY'
import json, sys
inst = json.loads(sys.argv[1])
for line in sys.stdin:
    r = json.loads(line)
    if r["op"] == "hello":
        print(json.dumps({"ok": True, "version": 1, "name": "once", "capabilities": ["plan"], "max_instances": inst}), flush=True)
    elif r["op"] == "bye":
        break
    else:
        print(json.dumps({"id": r["id"], "ok": False, "unsupported": True, "message": "no"}), flush=True)
PY
for inst in 1 2; do
  : > "$pids"
  "$R" fuzz-planner --planner "exec:$pre python3 $T/inst.py $inst $mark" --cases 20 --jobs 4 \
    --quiet --regress-dir "$T/in-rg" --json "$T/in.json" > "$T/in.txt" 2>&1
  rc=$?
  want=$((inst == 1 ? 1 : inst + 1))
  { [ $rc = 1 ] && grep -q "at most $inst instance(s) at once (max_instances): --jobs 4 runs $inst worker(s)" "$T/in.txt" &&
    [ "$(started "$pids")" = $want ]; } ||
    { bad "max_instances $inst: exit $rc, $(started "$pids") children started (expected $want)"; head -3 "$T/in.txt"; }
  [ "$(alive "$pids")" = 0 ] || bad "max_instances $inst: $(alive "$pids") child(ren) left running"
done
"$R" fuzz-planner --planner "exec:python3 $T/inst.py '\"x\"' $mark" --cases 5 --jobs 4 --quiet > "$T/in.txt" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q "max_instances" "$T/in.txt"; } || bad "a malformed max_instances: exit $rc"
echo "3. max_instances 1 and 2: one and two workers; malformed: exit 2"

# workers killed (a crash) or hung while their children plan: no child outlives them
cat > "$T/hang.py" <<'PY'
import json, sys, time
busy = sys.argv[1]
for line in sys.stdin:
    r = json.loads(line)
    if r["op"] == "hello":
        print(json.dumps({"ok": True, "version": 1, "name": "hangs", "capabilities": ["plan"]}), flush=True)
    elif r["op"] == "bye":
        break
    else:
        open(busy, "a").write("x\n")
        time.sleep(3600)
PY
: > "$pids"
: > "$T/busy"
"$R" fuzz-planner --planner "exec:$pre python3 $T/hang.py $T/busy $mark" --cases 20 --jobs 2 \
  --timeout 600 --case-timeout 60 --quiet --regress-dir "$T/cr-rg" --json "$T/cr.json" > "$T/cr.txt" 2>&1 &
main=$!
for _ in $(seq 1 300); do [ "$(started "$T/busy")" -ge 2 ] && break; sleep 0.1; done
workers=$(ps -o pid=,comm= --ppid $main | awk '$2 == "reshard" {print $1}')
# SIGKILL: a sanitizer build's SIGSEGV handler would turn a SIGSEGV into an exit with status 1
[ -n "$workers" ] && kill -KILL $workers
wait $main
rc=$?
{ [ $rc = 1 ] && grep -q "FAIL crash: worker [0-9] killed by signal 9.*case 1" "$T/cr.txt" && [ -s "$T/cr.json" ]; } ||
  { bad "workers killed by SIGKILL: exit $rc (workers: $workers)"; tail -3 "$T/cr.txt"; }
sleep 0.3
[ "$(alive "$pids")" = 0 ] || bad "crashed workers: $(alive "$pids") child(ren) left running"
: > "$pids"
s0=$(date +%s)
"$R" fuzz-planner --planner "exec:$pre python3 $T/hang.py $T/busy $mark" --cases 20 --jobs 2 \
  --timeout 600 --case-timeout 2 --quiet --regress-dir "$T/cr-rg" > "$T/hg.txt" 2>&1
rc=$?
s1=$(date +%s)
{ [ $rc = 4 ] && grep -q "hung: case 1 " "$T/hg.txt"; } || { bad "workers hung: exit $rc after $((s1 - s0)) s"; tail -3 "$T/hg.txt"; }
sleep 0.3
[ "$(alive "$pids")" = 0 ] || bad "hung workers: $(alive "$pids") child(ren) left running"
rl_left "a child of this test" "$mark"
echo "3. workers crashed: exit 1 naming case 1; hung: exit 4 after $((s1 - s0)) s; no child left"

# ---- 4. --seconds with workers ----
t0=$(date +%s.%N)
"$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --seconds 3 --seed 3 --jobs 2 --quiet --max-decline-share 1 \
  --regress-dir "$T/t-rg" --json "$T/t.json" > /dev/null 2>&1
t1=$(date +%s.%N)
el=$(python3 -c "print(round($t1 - $t0, 2))")
python3 -c "import sys; sys.exit(0 if $el < 5.5 else 1)" || bad "--seconds 3 --jobs 2 took $el s"
echo "4. --seconds 3 --jobs 2: $el s"
# ---- 5. a mutation build's hooks (props/MUTANTS.md 993-995): case 38 crashes, hangs or runs out
# of memory in a worker (a release build ignores RS_MUTANT: the probe passes and this is skipped) ----
RS_MUTANT=995 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 60 --jobs 3 --quiet \
  --regress-dir "$T/probe" > "$T/probe.txt" 2>&1
if [ $? = 0 ]; then
  echo "5. skipped: no planted bugs in this binary"
else
  RL_OOM_LINE='out of memory at case 38' rl_oom "$T/m" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 60 --jobs 3
  rl_crash "$T/c" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 60 --jobs 3 --quiet
  rl_hang "$T/h" 2 fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 60 --jobs 3
  echo "5. planted: out of memory exit 3, crash exit 1 at case 38, hang exit 4"
fi
rl_finish jobs_fuzz_planner
