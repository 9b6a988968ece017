#!/usr/bin/env bash
# jobs_conform.sh RESHARD SRC [MPIEXEC...] - `reshard conform --jobs N` (issue 26 item 4): each suite's
# campaign on the campaign runner (props/runner.h), each forked worker with a backend of its own.
#  1. one seed with --jobs 1 and --jobs 4, a planted bug in every suite: the --json reports (timing
#     keys removed), the JUnit files (time attributes removed), the saved shrunk failures and the exit
#     status are the same byte for byte, for a plug-in (bug=last_rank: all four suites), the same
#     plug-in served as a process (conform_serve_child) and a Python process (conform_child.py
#     --bug array_split), and for a Python child that crashes on some cases;
#  2. a process backend with --jobs 4 really runs 4 more children (one per worker, each logging its
#     pid); a backend whose hello (or ABI struct) says max_instances K gets min(4, K) workers and a
#     note; each worker's child gets the thread variables OMP/MKL/OPENBLAS_NUM_THREADS = cores / N
#     unless the user set them, conform's own child nothing (docs/conformance.md);
#  3. a worker's child killed by the test mid-run fails the case it ran (the campaign goes on), a
#     worker killed mid-run is reported as a crash (exit 1), a worker whose child hangs past
#     --case-timeout is reported hung (exit 4, reports written), --max-timeouts still stops the run;
#     after every run no backend process is left (pgrep on the test's own copy of each backend);
#  4. --shard 1/3, 2/3, 3/3 merged by `reshard report merge` give the unsharded "runner" object, with
#     the planted bug (redistribute, ckpt) and with the --max-skip-share gate failing (python).
# Exit 0 pass, 1 a difference, 77 skipped (no python3, or the test backends are not built). The
# comparisons are tests/runner_lib.sh's.
set -u
. "$(dirname "$0")/runner_lib.sh" # the comparisons
B=$(dirname "$R")/tests
[ -f "$B/libconform_opt_plugin.so" ] && [ -x "$B/conform_serve_child" ] ||
  { echo "skip: the conform test backends are not built ($B)"; exit 77; }
trap 'pkill -KILL -f "$T/" 2>/dev/null; rm -rf "$T"' EXIT
# the test's own copies: `pgrep -f "$T/"` finds exactly the backends this test started
cp "$SRC/tests/conform_child.py" "$T/conform_child.py"
cp "$B/conform_serve_child" "$T/conform_serve_child"
cp "$B/libconform_opt_plugin.so" "$T/libplugin.so"
PLUG=$T/libplugin.so
PY="python3 $T/conform_child.py"
SERVE=$T/conform_serve_child
# rl_same: the saved failures must be there; the console is not compared (notes differ by worker
# count), stderr is kept apart from out.txt
RL_SAVED=failures RL_SAVED_NEEDED=1 RL_CONSOLE=no RL_STDERR=apart
field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$T/$1/out.json"; }
# left WHAT: no backend process of this test may be running
left() { rl_left "$1: the backends after conform exited" "$T/"; }

# run NAME ARGS...: conform in $T/NAME (relative --failures: saved paths compare equal); every
# Python child started appends its pid to $T/NAME/pids
run() {
  rl_run "$1" env CONFORM_CHILD_PIDS="$T/$1/pids" timeout 120 "$R" conform --quiet --fixtures none --json out.json \
    --junit out.xml --failures failures "${@:2}"
  left "$1"
}
rc() { rl_rc "$1"; }
same() { rl_same "$@"; }
merged() { rl_merged "$1" "$2" "$1-s1" "$1-s2" "$1-s3"; }
shards() { # shards NAME ARGS...
  local n=$1
  shift
  for k in 1 2 3; do run "$n-s$k" --shard "$k/3" "$@"; done
}

# ---- 1. the same reports whatever --jobs is, with planted bugs ----
run plug1 --backend "$PLUG?bug=last_rank" --suite all --cases 40 --jobs 1
run plug4 --backend "$PLUG?bug=last_rank" --suite all --cases 40 --jobs 4
same plug1 plug4 "plug-in bug=last_rank --suite all"
[ "$(rc plug4)" = 1 ] || bad "plug-in bug=last_rank: exit $(rc plug4), expected 1"
for s in redistribute tp p2p ckpt; do
  [ "$(field plug4 "j['suites']['$s']['status']")" = failed ] || bad "plug-in bug=last_rank: suite $s not failed with --jobs 4"
done
[ "$(field plug4 "len(j['runners'])")" = 4 ] || bad "--suite all: not 4 runner objects"

run serve1 --backend "exec:$SERVE bug=last_rank" --suite all --cases 24 --jobs 1
run serve4 --backend "exec:$SERVE bug=last_rank" --suite all --cases 24 --jobs 4
same serve1 serve4 "process (conform_serve_child bug=last_rank) --suite all"
[ "$(rc serve4)" = 1 ] || bad "process bug=last_rank: exit $(rc serve4), expected 1"

run py1 --backend "exec:$PY --bug array_split" --suite redistribute --cases 60 --shrink-runs 100 --jobs 1
run py4 --backend "exec:$PY --bug array_split" --suite redistribute --cases 60 --shrink-runs 100 --jobs 4
same py1 py4 "python --bug array_split"
[ "$(rc py4)" = 1 ] || bad "python --bug array_split: exit $(rc py4), expected 1"
# 2. one child per worker: the same cases and shrinking, 4 more children
n1=$(wc -l <"$T/py1/pids") n4=$(wc -l <"$T/py4/pids")
[ $((n4 - n1)) = 4 ] || bad "--jobs 4: $n4 children started, $n1 with --jobs 1 (4 more expected: one per worker)"

# a child that crashes on some cases: those cases fail, per child, the same with 1 and 4 workers
run crash1 --backend "exec:$PY --crash" --suite redistribute --cases 30 --shrink-runs 4 --jobs 1
run crash4 --backend "exec:$PY --crash" --suite redistribute --cases 30 --shrink-runs 4 --jobs 4
same crash1 crash4 "python --crash"
grep -q "crashed" "$T/crash4/out.txt" || bad "--crash --jobs 4: not reported as a crash"
[ "$(field crash4 "j['suites']['redistribute']['pass']")" -gt 0 ] || bad "--crash --jobs 4: the campaign did not go on"

# 2b. max_instances: a backend that allows one instance runs one worker, with a note
CONFORM_CHILD_MAX_INSTANCES=1 run inst1 --backend "exec:$PY --bug array_split" --suite redistribute --cases 60 --shrink-runs 100 --jobs 4
grep -q "runs at most 1 instance(s) at once (max_instances): --jobs 4 runs 1 worker(s)" "$T/inst1/out.txt" ||
  bad "max_instances 1: no note"
[ "$(wc -l <"$T/inst1/pids")" = "$n1" ] || bad "max_instances 1: $(wc -l <"$T/inst1/pids") children, $n1 expected (one worker)"
same py1 inst1 "python max_instances 1 --jobs 4"
CONFORM_PLUGIN_MAX_INSTANCES=2 run pinst --backend "$PLUG?bug=last_rank" --suite all --cases 40 --jobs 4
grep -q "runs at most 2 instance(s) at once (max_instances): --jobs 4 runs 2 worker(s)" "$T/pinst/out.txt" ||
  bad "plug-in max_instances 2: no note"
same plug1 pinst "plug-in max_instances 2 --jobs 4"

# 2c. the thread variables (docs/conformance.md, "The child's environment"): with --jobs 2 each
# worker's child gets OMP/MKL/OPENBLAS_NUM_THREADS = max(1, cores / 2) where conform's environment
# sets none, conform's own child (the first started) gets nothing added, a value the user set is
# passed on unchanged. cores: the CPUs this process may use (what --jobs auto counts; nproc without
# the OMP variables, which it would read)
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
tw=$((cores / 2)); [ "$tw" -ge 1 ] || tw=1
unset OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS
threads_env() { # threads_env NAME WANT: the lines each child logged, in start order
  local got
  got=$(tr '\n' ';' <"$T/$1/env" 2>/dev/null)
  [ "$got" = "$2" ] || bad "thread variables ($1): children logged '$got', expected '$2'"
}
CONFORM_CHILD_ENV=$T/thr/env run thr --backend "exec:$PY" --suite redistribute --cases 20 --jobs 2
threads_env thr "OMP=- MKL=- OPENBLAS=-;OMP=$tw MKL=$tw OPENBLAS=$tw;OMP=$tw MKL=$tw OPENBLAS=$tw;"
OMP_NUM_THREADS=7 CONFORM_CHILD_ENV=$T/thr7/env run thr7 --backend "exec:$PY" --suite redistribute --cases 20 --jobs 2
threads_env thr7 "OMP=7 MKL=- OPENBLAS=-;OMP=7 MKL=$tw OPENBLAS=$tw;OMP=7 MKL=$tw OPENBLAS=$tw;"
CONFORM_CHILD_ENV=$T/thr1/env run thr1 --backend "exec:$PY" --suite redistribute --cases 20 --jobs 1
threads_env thr1 "OMP=- MKL=- OPENBLAS=-;"

# ---- 3. children and workers killed or hung mid-run ----
# a worker's child killed by the test: that case fails as a crash, the worker restarts its child
d=$T/killc
mkdir -p "$d"
(cd "$d" && CONFORM_CHILD_PIDS=$d/pids timeout 120 "$R" conform --quiet --fixtures none --json out.json --failures failures \
   --backend "exec:$PY" --suite redistribute --seconds 4 --shrink-runs 20 --jobs 4 >out.txt 2>&1 </dev/null; echo $? >rc) &
for _ in $(seq 200); do [ "$(wc -l 2>/dev/null <"$d/pids" || echo 0)" -ge 5 ] && break; sleep 0.05; done
sleep 1
kill -KILL "$(sed -n 5p "$d/pids")" 2>/dev/null || bad "killc: no fifth child to kill"
wait
left killc
[ "$(rc killc)" = 1 ] || bad "a killed child: exit $(rc killc), expected 1"
grep -q "crashed" "$d/out.txt" || bad "a killed child: not reported as crashed"
[ "$(field killc "j['suites']['redistribute']['pass']")" -gt 0 ] || bad "a killed child: the campaign did not go on"

# a worker killed by the test: reported as a crash of the case it ran, its child killed
d=$T/killw
mkdir -p "$d"
(cd "$d" && CONFORM_CHILD_PIDS=$d/pids timeout 120 "$R" conform --fixtures none --json out.json --failures failures \
   --backend "exec:$PY" --suite redistribute --seconds 8 --jobs 4 >out.txt 2>&1 </dev/null; echo $? >rc) &
sub=$!
for _ in $(seq 200); do [ "$(wc -l 2>/dev/null <"$d/pids" || echo 0)" -ge 5 ] && break; sleep 0.05; done
sleep 1
tmo=$(pgrep -P "$sub" -x timeout | head -1)
conform=$(pgrep -P "${tmo:-0}" | head -1)
worker=$(pgrep -P "${conform:-0}" -x reshard | head -1)
[ -n "$worker" ] && kill -KILL "$worker" || bad "killw: no worker to kill"
wait
left killw
[ "$(rc killw)" = 1 ] || bad "a killed worker: exit $(rc killw), expected 1"
grep -q "^FAIL crash: worker [0-9]* killed by signal 9" "$d/out.txt" || bad "a killed worker: no 'FAIL crash' line"
[ -f "$d/out.json" ] || bad "a killed worker: no --json report"

# a child that hangs past --case-timeout (its --timeout is longer): the worker is reported hung,
# exit 4, the reports written; the hung child (not ended by its worker) is killed by conform
run hang --backend "exec:$PY --hang" --suite redistribute --cases 40 --timeout 60 --case-timeout 2 --jobs 2
[ "$(rc hang)" = 4 ] || bad "a hung worker: exit $(rc hang), expected 4"
grep -q "hung" "$T/hang/out.txt" || bad "a hung worker: not reported hung"
[ -f "$T/hang/out.json" ] || bad "a hung worker: no --json report"

# --max-timeouts counts every worker's timeouts and stops the run
cat >"$T/hangall.py" <<'PY'
import json, sys, time
for line in sys.stdin:
    r = json.loads(line)
    if r["op"] == "hello":
        print(json.dumps({"ok": True, "version": 1, "name": "hangs", "capabilities": ["redistribute", "tp"]}), flush=True)
    elif r["op"] == "bye":
        break
    else:
        time.sleep(3600)
PY
run hangall --backend "exec:python3 $T/hangall.py" --suite redistribute,tp --cases 500 --timeout 0.5 --max-timeouts 4 \
  --shrink-seconds 2 --jobs 2
[ "$(rc hangall)" = 1 ] || bad "--max-timeouts with --jobs 2: exit $(rc hangall), expected 1"
[ "$(field hangall "j['stopped_on_timeouts']")" = True ] || bad "--max-timeouts with --jobs 2: the run was not stopped"
grep -q "not run: the backend timed out" "$T/hangall/out.txt" || bad "--max-timeouts with --jobs 2: the tp suite ran"

# ---- 4. shards merged = the unsharded runner object ----
run rd --backend "$PLUG?bug=dst_order" --suite redistribute --cases 90
shards rd --backend "$PLUG?bug=dst_order" --suite redistribute --cases 90 --jobs 2
merged rd "redistribute bug=dst_order, 3 shards"
run ck --backend "$PLUG?bug=last_rank" --suite ckpt --cases 30
shards ck --backend "$PLUG?bug=last_rank" --suite ckpt --cases 30
merged ck "ckpt bug=last_rank, 3 shards"
run sk --backend "exec:$PY" --suite redistribute --cases 60 --max-skip-share 0.25 --jobs 2
[ "$(field sk "'max_skip_share' in j['runner']['gates_failed']")" = True ] || bad "--max-skip-share 0.25: not a failed runner gate"
shards sk --backend "exec:$PY" --suite redistribute --cases 60 --max-skip-share 0.25
merged sk "python --max-skip-share 0.25, 3 shards"
grep -q "FAIL gate max_skip_share" "$T/sk-m.txt" || bad "report merge: the max_skip_share gate is not judged"

left "the end"
rl_finish jobs_conform
