#!/usr/bin/env bash
# jobs_fuzz_planner.sh RESHARD SRC [MPIEXEC...] - `reshard fuzz-planner` on the campaign runner
# (props/runner.h):
#   1. --jobs 1 and --jobs 4 give the same --json report (timing keys removed), the same stdout
#      (the timing line removed) and the same saved failure, with planted-bug planners: the plug-in
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
R=$1
SRC=$2
command -v python3 >/dev/null || { echo "skip: no python3"; exit 77; }
lib=$(cd "$(dirname "$R")" && pwd)/tests
[ -f "$lib/libplanner_bug.so" ] || { echo "skip: the planner plug-ins are not built ($lib)"; exit 77; }
Rabs=$(cd "$(dirname "$R")" && pwd)/$(basename "$R")
tmp=$(mktemp -d)
mark="jobsfp$$" # in every exec child's command line: pgrep finds this test's children only
cleanup() { # children a failed check left behind, by their pids
  local p
  for p in $(cat "$tmp/all" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
strip() { # FILE DIR: the JSON without its timing keys, the regress dir's name made neutral
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in ("seconds", "cpu_seconds", "cases_per_second", "jobs")}
    if isinstance(x, list):
        return [clean(v) for v in x]
    if isinstance(x, str):
        return x.replace(sys.argv[2], "DIR")
    return x
print(json.dumps(clean(d), indent=1, sort_keys=True))
PY
}
child="$SRC/tests/planner_child.py"

# ---- 1. the same result for every worker count ----
# same NAME EXPECTED_RC fuzz-planner-args...: --jobs 1 vs --jobs 4
same() {
  local name=$1 want=$2
  shift 2
  for j in 1 4; do
    "$R" fuzz-planner "$@" --jobs $j --quiet --json "$tmp/$name$j.json" --regress-dir "$tmp/$name-rg$j" \
      > "$tmp/$name-o$j.txt" 2>&1
    echo $? > "$tmp/$name-rc$j"
  done
  local rc1 rc4
  rc1=$(cat "$tmp/$name-rc1") rc4=$(cat "$tmp/$name-rc4")
  [ "$rc1" = "$want" ] || { bad "$name: --jobs 1 exit $rc1, expected $want"; tail -3 "$tmp/$name-o1.txt"; }
  [ "$rc1" = "$rc4" ] || { bad "$name: exit status differs: --jobs 1 $rc1, --jobs 4 $rc4"; tail -3 "$tmp/$name-o4.txt"; }
  diff <(strip "$tmp/${name}1.json" "$tmp/$name-rg1") <(strip "$tmp/${name}4.json" "$tmp/$name-rg4") > "$tmp/d.txt" ||
    { bad "$name: --json differs between --jobs 1 and 4"; head -20 "$tmp/d.txt"; }
  diff <(grep -v " cases in " "$tmp/$name-o1.txt" | sed "s#$tmp/$name-rg1#DIR#g") \
       <(grep -v " cases in " "$tmp/$name-o4.txt" | sed "s#$tmp/$name-rg4#DIR#g") > "$tmp/d2.txt" ||
    { bad "$name: stdout differs"; head -20 "$tmp/d2.txt"; }
  diff -r "$tmp/$name-rg1" "$tmp/$name-rg4" > /dev/null 2>&1 || { [ ! -d "$tmp/$name-rg1" ] && [ ! -d "$tmp/$name-rg4" ]; } ||
    bad "$name: saved failures differ"
  [ "$want" = 0 ] || [ -n "$(ls "$tmp/$name-rg1" 2>/dev/null)" ] || bad "$name: no failure saved"
  echo "1. $name: --jobs 1 and 4 exit $rc1, $(ls "$tmp/$name-rg1" 2>/dev/null | wc -l) saved failure(s)"
}
same gather 1 --planner "$lib/libplanner_gather.so" --enumeration pytorch --partial often --seed 2
python3 -c "
import json, sys
d = json.load(open('$tmp/gather1.json'))
r = d['runner']
ok = (d['failures'][0]['kind'] == 'wrong' and r['properties']['plans_match_oracle']['fail'] > 0
      and r['cases'] == 1000 and r['counters']['cases'] == 1000 and r['features']['zero_fill']['count'] > 0
      and r['judge_from'] == 1000 and r['features_missing'] == [] and [g['name'] for g in r['gates']] == ['decline_share', 'checked_some'])
sys.exit(0 if ok else 1)" || bad "gather: the report does not show the wrong plan, the judged feature table and both gates"
same p2p 1 --planner "$lib/libplanner_bug.so" --kind p2p --seed 5 --cases 300
same exec 1 --planner "exec:python3 $child --bug $mark" --seed 5 --cases 150
same execp2p 1 --planner "exec:python3 $child --bug --reshard $Rabs $mark" --kind p2p --seed 3 --cases 40
same pass 0 --planner "$lib/libplanner_greedy.so" --seed 3 --cases 300
same p2ppass 0 --planner "$lib/libplanner_opt_p2p.so" --kind p2p --seed 3 --cases 200

# ---- 2. shards merged = the unsharded run ----
# merged NAME UNSHARDED_JSON UNSHARDED_DIR N fuzz-planner-args...
merged() {
  local name=$1 whole=$2 wdir=$3 n=$4 files=() k
  shift 4
  for k in $(seq 1 "$n"); do
    "$R" fuzz-planner "$@" --shard "$k/$n" --jobs 2 --quiet --json "$tmp/$name-s$k.json" \
      --regress-dir "$tmp/$name-rgs" > "$tmp/$name-so$k.txt" 2>&1
    files+=("$tmp/$name-s$k.json")
  done
  "$R" report merge "${files[@]}" --json "$tmp/$name-m.json" > "$tmp/$name-mo.txt" 2>&1
  local mrc=$? want
  want=$(python3 -c "import json; print(1 if json.load(open('$whole'))['runner']['failed'] else 0)")
  [ "$mrc" = "$want" ] || { bad "$name: report merge exit $mrc, the unsharded run failed=$want"; tail -3 "$tmp/$name-mo.txt"; }
  python3 - "$whole" "$tmp/$name-m.json" "$wdir" "$tmp/$name-rgs" <<'PY' || bad "$name: merged runner object differs from the unsharded one"
import json, sys
a = json.load(open(sys.argv[1]))["runner"]; b = json.load(open(sys.argv[2]))["runner"]
def norm(d, path):
    d = json.loads(json.dumps(d).replace(path, "DIR"))
    for k in ("seconds", "shard", "jobs"): d.pop(k, None)
    return d
a, b = norm(a, sys.argv[3]), norm(b, sys.argv[4])
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k): print("  %s: %s\n  vs %s" % (k, str(a.get(k))[:300], str(b.get(k))[:300]))
    sys.exit(1)
PY
  echo "2. $name: $n shards merged, exit $mrc"
}
merged gather "$tmp/gather1.json" "$tmp/gather-rg1" 3 --planner "$lib/libplanner_gather.so" --enumeration pytorch --partial often --seed 2
merged p2p "$tmp/p2p1.json" "$tmp/p2p-rg1" 2 --planner "$lib/libplanner_bug.so" --kind p2p --seed 5 --cases 300
merged p2ppass "$tmp/p2ppass1.json" "$tmp/p2ppass-rg1" 2 --planner "$lib/libplanner_opt_p2p.so" --kind p2p --seed 3 --cases 200
merged pass "$tmp/pass1.json" "$tmp/pass-rg1" 2 --planner "$lib/libplanner_greedy.so" --seed 3 --cases 300

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
pids="$tmp/pids"
pre="echo \$\$ >> $pids; echo \$\$ >> $tmp/all; exec"
: > "$pids"
"$R" fuzz-planner --planner "exec:$pre python3 $child $mark" --seed 3 --cases 60 --jobs 4 --quiet \
  --regress-dir "$tmp/ex-rg" --json "$tmp/ex.json" > "$tmp/ex.txt" 2>&1
rc=$?
[ $rc = 0 ] || { bad "exec planner with --jobs 4: exit $rc"; tail -3 "$tmp/ex.txt"; }
[ "$(started "$pids")" = 5 ] || bad "exec planner with --jobs 4: $(started "$pids") children started, expected 5 (the parent's and one per worker)"
[ "$(alive "$pids")" = 0 ] || bad "exec planner with --jobs 4: $(alive "$pids") child(ren) left running"
pgrep -f "$mark" > /dev/null && { bad "a child of this test is left running"; pgrep -af "$mark"; }
echo "3. exec planner --jobs 4: $(started "$pids") children started, $(alive "$pids") left"

# a planner that may run once (hello "max_instances": 1) gets one worker; 2: two; "x": refused
cat > "$tmp/inst.py" <<'PY'
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
  "$R" fuzz-planner --planner "exec:$pre python3 $tmp/inst.py $inst $mark" --cases 20 --jobs 4 \
    --quiet --regress-dir "$tmp/in-rg" --json "$tmp/in.json" > "$tmp/in.txt" 2>&1
  rc=$?
  want=$((inst == 1 ? 1 : inst + 1))
  { [ $rc = 1 ] && grep -q "at most $inst instance(s) at once (max_instances): --jobs 4 runs $inst worker(s)" "$tmp/in.txt" &&
    [ "$(started "$pids")" = $want ]; } ||
    { bad "max_instances $inst: exit $rc, $(started "$pids") children started (expected $want)"; head -3 "$tmp/in.txt"; }
  [ "$(alive "$pids")" = 0 ] || bad "max_instances $inst: $(alive "$pids") child(ren) left running"
done
"$R" fuzz-planner --planner "exec:python3 $tmp/inst.py '\"x\"' $mark" --cases 5 --jobs 4 --quiet > "$tmp/in.txt" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q "max_instances" "$tmp/in.txt"; } || bad "a malformed max_instances: exit $rc"
echo "3. max_instances 1 and 2: one and two workers; malformed: exit 2"

# workers killed (a crash) or hung while their children plan: no child outlives them
cat > "$tmp/hang.py" <<'PY'
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
: > "$tmp/busy"
"$R" fuzz-planner --planner "exec:$pre python3 $tmp/hang.py $tmp/busy $mark" --cases 20 --jobs 2 \
  --timeout 600 --case-timeout 60 --quiet --regress-dir "$tmp/cr-rg" --json "$tmp/cr.json" > "$tmp/cr.txt" 2>&1 &
main=$!
for _ in $(seq 1 300); do [ "$(started "$tmp/busy")" -ge 2 ] && break; sleep 0.1; done
workers=$(ps -o pid=,comm= --ppid $main | awk '$2 == "reshard" {print $1}')
[ -n "$workers" ] && kill -SEGV $workers
wait $main
rc=$?
{ [ $rc = 1 ] && grep -q "FAIL crash: worker [0-9] killed by signal 11.*case 1" "$tmp/cr.txt" && [ -s "$tmp/cr.json" ]; } ||
  { bad "workers killed by SIGSEGV: exit $rc (workers: $workers)"; tail -3 "$tmp/cr.txt"; }
sleep 0.3
[ "$(alive "$pids")" = 0 ] || bad "crashed workers: $(alive "$pids") child(ren) left running"
: > "$pids"
s0=$(date +%s)
"$R" fuzz-planner --planner "exec:$pre python3 $tmp/hang.py $tmp/busy $mark" --cases 20 --jobs 2 \
  --timeout 600 --case-timeout 2 --quiet --regress-dir "$tmp/cr-rg" > "$tmp/hg.txt" 2>&1
rc=$?
s1=$(date +%s)
{ [ $rc = 4 ] && grep -q "hung: case 1 " "$tmp/hg.txt"; } || { bad "workers hung: exit $rc after $((s1 - s0)) s"; tail -3 "$tmp/hg.txt"; }
sleep 0.3
[ "$(alive "$pids")" = 0 ] || bad "hung workers: $(alive "$pids") child(ren) left running"
pgrep -f "$mark" > /dev/null && { bad "a child of this test is left running"; pgrep -af "$mark"; }
echo "3. workers crashed: exit 1 naming case 1; hung: exit 4 after $((s1 - s0)) s; no child left"

# ---- 4. --seconds with workers ----
t0=$(date +%s.%N)
"$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --seconds 3 --seed 3 --jobs 2 --quiet --max-decline-share 1 \
  --regress-dir "$tmp/t-rg" --json "$tmp/t.json" > /dev/null 2>&1
t1=$(date +%s.%N)
el=$(python3 -c "print(round($t1 - $t0, 2))")
python3 -c "import sys; sys.exit(0 if $el < 5.5 else 1)" || bad "--seconds 3 --jobs 2 took $el s"
echo "4. --seconds 3 --jobs 2: $el s"
# ---- 5. a mutation build's hooks (props/MUTANTS.md 993-995): case 38 crashes, hangs or runs out
# of memory in a worker (a release build ignores RS_MUTANT: the probe passes and this is skipped) ----
RS_MUTANT=995 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 60 --jobs 3 --quiet \
  --regress-dir "$tmp/m-rg" > "$tmp/m.txt" 2>&1
rc=$?
if [ $rc = 0 ]; then
  echo "5. skipped: no planted bugs in this binary"
else
  { [ $rc = 3 ] && grep -q "out of memory at case 38" "$tmp/m.txt"; } || { bad "a worker out of memory: exit $rc"; tail -3 "$tmp/m.txt"; }
  RS_MUTANT=993 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 60 --jobs 3 --quiet \
    --regress-dir "$tmp/m-rg" --json "$tmp/mc.json" > "$tmp/m.txt" 2>&1
  rc=$?
  { [ $rc = 1 ] && grep -q "FAIL crash: worker [0-9] killed by signal 11.*case 38" "$tmp/m.txt" &&
    python3 -c "import json,sys; r=json.load(open('$tmp/mc.json'))['runner']; sys.exit(0 if r['crash_index']==37 and r['cases']==37 else 1)"; } ||
    { bad "a crashing worker: exit $rc"; tail -3 "$tmp/m.txt"; }
  RS_MUTANT=994 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 60 --jobs 3 --case-timeout 2 --quiet \
    --regress-dir "$tmp/m-rg" > "$tmp/m.txt" 2>&1
  rc=$?
  { [ $rc = 4 ] && grep -q "hung: case 38" "$tmp/m.txt"; } || { bad "a hanging worker: exit $rc"; tail -3 "$tmp/m.txt"; }
  echo "5. planted: out of memory exit 3, crash exit 1 at case 38, hang exit 4"
fi
[ $fail = 0 ] && echo "jobs_fuzz_planner: ok"
exit $fail
