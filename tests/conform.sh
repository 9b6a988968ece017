#!/usr/bin/env bash
# conform.sh RESHARD SRC - `reshard conform` against the example backends (docs/conformance.md):
# opt as a plug-in and as a separate C program passes; each planted-bug backend (plug-in, C
# program, Python program) is caught with a shrunk case whose replay command fails again; children
# that crash, hang, write garbage or answer another request's id fail those cases while the
# campaign goes on (exit 1); a backend lacking a capability is skipped, never passed; bad input is
# exit 2. A backend that executes any plan given (RS_BACKEND_P2P_ANY_PLAN) is held to reshard's opt
# and ref plans too; an ABI-1 plug-in of the older struct size, or a child that does not declare
# it, is handed none. Also the runner of conform/MUTANTS.md's planted bugs.
set -uo pipefail
bin=$1
src=$2
tests=$(cd "$(dirname "$bin")" && pwd)/tests
plugin=$tests/libconform_opt_plugin.so
child=$tests/conform_serve_child
py="python3 $src/tests/conform_child.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); [ "${RS_TEST_FAIL_FAST:-0}" != 1 ] || exit 1; }
# part N: whether numbered part N below runs (RS_TEST_PARTS="4 7b" runs only those: the mutation
# self-test names the part that catches each planted bug of conform/MUTANTS.md; default all)
part() { [ -z "${RS_TEST_PARTS:-}" ] || case " $RS_TEST_PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# conform OUT.json EXPECTED_RC ARGS...: run, keep the log, check the exit status
conform() {
  local json=$1 want=$2
  shift 2
  ${TMO:+timeout "$TMO"} "$bin" conform --json "$tmp/$json" --failures "$tmp/failures" "$@" >"$tmp/$json.log" 2>&1
  local rc=$?
  if [ "$rc" != "$want" ]; then
    fail "reshard conform $* exited $rc, expected $want"
    tail -n 20 "$tmp/$json.log"
  fi
}
# field FILE.json PYTHON-EXPR: a value of the JSON report (j is the parsed object)
field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$tmp/$1"; }
# suite_status FILE.json SUITE
status() { field "$1" "j['suites']['$2']['status']"; }
# the replay command of the first failure in a log, run: must exit 1 (it still fails)
replays() {
  local cmd
  cmd=$(grep -m1 -oE "replay: reshard conform .*" "$tmp/$1.log" | sed 's/^replay: reshard /"$bin" /')
  [ -n "$cmd" ] || { fail "$1: no replay command printed"; return; }
  eval "$cmd" >"$tmp/$1.replay" 2>&1
  [ $? = 1 ] || fail "$1: the replay command did not fail again: $cmd"
}
# the shrunk case of a log's first failure has at most N mesh dims
mesh_dims_at_most() {
  local f
  f=$(grep -m1 -oE "\-\-replay [^ ]+\.json" "$tmp/$1.log" | cut -d' ' -f2)
  [ -f "$f" ] || { fail "$1: no saved failure"; return; }
  local n
  n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['mesh']['shape']))" "$f")
  [ "$n" -le "$2" ] || fail "$1: shrunk case has $n mesh dims (at most $2 expected)"
}

# 1. opt as a plug-in: every implemented suite passes, campaigns and every corpus
if part 1; then
  conform opt.json 0 --backend "$plugin" --suite redistribute,tp,p2p --cases 300 --fixtures "$src/fixtures" --quiet
  conform optckpt.json 0 --backend "$plugin" --suite ckpt --cases 40 --fixtures "$src/fixtures" --quiet
  [ "$(status optckpt.json ckpt)" = passed ] || fail "opt plug-in: suite ckpt is $(status optckpt.json ckpt)"
  for s in redistribute tp p2p; do
    [ "$(status opt.json $s)" = passed ] || fail "opt plug-in: suite $s is $(status opt.json $s)"
  done
  [ "$(field opt.json "sum(1 for i in j['items'] if i['kind']=='fixture')")" -ge 8 ] || fail "opt plug-in: fixture files were not run"

  # nothing checked is never a pass: a backend lacking every chosen capability exits 1
  conform none.json 1 --backend "exec:$py" --suite tp,ckpt --cases 10 --fixtures none --quiet
  [ "$(status none.json ckpt)" = skipped ] || fail "python backend without ckpt: suite ckpt is $(status none.json ckpt)"
fi

# 2. opt served as a separate C program over the protocol: passes too
# (with the hand-made corpora only: the recorded ones are thousands of cases, run in-process above)
if part 2; then
  mkdir -p "$tmp/fx/tp" "$tmp/fx/p2p"
  cp -r "$src/fixtures/curated" "$tmp/fx/"
  cp -r "$src/fixtures/tp/curated" "$tmp/fx/tp/"
  cp "$src/fixtures/p2p/"*.json "$tmp/fx/p2p/"
  cp -r "$src/fixtures/ckpt" "$tmp/fx/"
  conform serve.json 0 --backend "exec:$child" --suite all --cases 40 --fixtures "$tmp/fx" --quiet
  [ "$(field serve.json "sum(1 for i in j['items'] if i['kind']=='fixture' and i['pass'] > 0)")" -ge 3 ] || fail "served: fixture files were not run"
fi

# 3. planted-bug plug-ins: caught, shrunk (redistribute: <= 2 mesh dims), the replay fails again
if part 3; then
  conform order.json 1 --backend "$plugin?bug=dst_order" --suite redistribute --cases 400 --fixtures none --quiet
  [ "$(status order.json redistribute)" = failed ] || fail "bug=dst_order: not caught"
  replays order.json
  mesh_dims_at_most order.json 2
  # integer sums that saturate instead of wrapping: caught by a default-size campaign (--cases 1000)
  # through the wrap values (int_sum_wraps), on an integer case
  conform sat.json 1 --backend "$plugin?bug=int_saturate" --suite redistribute --fixtures none --quiet
  [ "$(status sat.json redistribute)" = failed ] || fail "bug=int_saturate: not caught by a default-size campaign"
  grep -qE '"dtype":[[:space:]]*"(I32|I16|I8|U8)"' "$(grep -m1 -oE "\-\-replay [^ ]+\.json" "$tmp/sat.json.log" | cut -d' ' -f2)" 2>/dev/null \
    || fail "bug=int_saturate: the saved case is not an integer case"
  replays sat.json
  conform tpranks.json 1 --backend "$plugin?bug=tp_ranks" --suite tp --cases 300 --fixtures none --quiet
  [ "$(status tpranks.json tp)" = failed ] || fail "bug=tp_ranks: not caught"
  replays tpranks.json
  conform p2plast.json 1 --backend "$plugin?bug=last_rank" --suite p2p --cases 100 --fixtures none --quiet
  [ "$(status p2plast.json p2p)" = failed ] || fail "bug=last_rank (p2p plug-in): not caught"
  replays p2plast.json
  # the p2p campaign counts every case after its first failure, as redistribute does; its saved
  # failure is named for the property that ran
  [ "$(field p2plast.json "sum(j['suites']['p2p'][k] for k in ('pass','fail','skip'))")" = 100 ] || fail "p2p campaign: did not count all 100 cases"
  [ "$(field p2plast.json "j['suites']['p2p']['fail']")" -gt 1 ] || fail "p2p campaign: stopped counting at its first failure"
  grep -qE "replay [^ ]+/backend_p2p_oracle-[0-9a-f]+\.json" "$tmp/p2plast.json.log" || fail "p2p saved failure: not named backend_p2p_oracle-*"
fi

# 3b. plans handed to p2p_execute (RS_BACKEND_P2P_ANY_PLAN; the opt plug-in and its child declare
# it and passed 1. and 2. with reshard's opt plan and ref's plan given): bug=given_plan (a given
# plan's last transfer dropped, its own plan right) is caught naming the plan, as a plug-in and as
# a process; an ABI-1 plug-in built against the struct before p2p_flags, and a child whose hello
# lacks "p2p_any_plan", are handed no plan: the same bug never runs and the suite passes.
if part 3b; then
  conform given.json 1 --backend "$plugin?bug=given_plan" --suite p2p --cases 100 --fixtures none --quiet
  [ "$(status given.json p2p)" = failed ] || fail "bug=given_plan (plug-in): not caught"
  grep -q "p2p_execute of reshard's opt plan" "$tmp/given.json.log" || fail "bug=given_plan (plug-in): the failure does not name the plan"
  replays given.json
  conform givenx.json 1 --backend "exec:$child bug=given_plan" --suite p2p --cases 40 --fixtures none --quiet
  grep -q "p2p_execute of reshard's opt plan" "$tmp/givenx.json.log" || fail "bug=given_plan (process): not caught naming the plan"
  conform v1.json 0 --backend "$tests/libconform_opt_plugin_v1.so?bug=given_plan" --suite p2p --cases 100 --fixtures none --quiet
  [ "$(status v1.json p2p)" = passed ] || fail "ABI-1 plug-in (older struct_size): suite p2p is $(status v1.json p2p)"
  conform v1x.json 0 --backend "exec:$child abi=v1,bug=given_plan" --suite p2p --cases 40 --fixtures none --quiet
  [ "$(status v1x.json p2p)" = passed ] || fail "child without p2p_any_plan: suite p2p is $(status v1x.json p2p)"
fi

# 3c. templates sent to a backend that expands them (RS_BACKEND_P2P_TEMPLATES / "p2p_templates"; the
# opt plug-in and its child declare it): models made from a template arrive in template form and
# the count is reported; bug=template_ranks (a templated config's rank list reversed before the
# expansion) is caught as a plug-in and as a process; a child built against the older struct size
# (abi=v1) does not declare it and is sent only explicit models (the same bug never runs).
if part 3c; then
  conform tmpl.json 0 --backend "$plugin" --suite p2p --cases 100 --fixtures none
  grep -qE "p2p: [1-9][0-9]* model\(s\) sent in template form" "$tmp/tmpl.json.log" ||
    fail "templates: no model sent in template form to a backend that declares p2p_templates"
  conform tmplbug.json 1 --backend "$plugin?bug=template_ranks" --suite p2p --cases 100 --fixtures none --quiet
  [ "$(status tmplbug.json p2p)" = failed ] || fail "bug=template_ranks (plug-in): not caught"
  replays tmplbug.json
  conform tmplbugx.json 1 --backend "exec:$child bug=template_ranks" --suite p2p --cases 40 --fixtures none --quiet
  [ "$(status tmplbugx.json p2p)" = failed ] || fail "bug=template_ranks (process): not caught"
  conform tmplv1.json 0 --backend "exec:$child abi=v1,bug=template_ranks" --suite p2p --cases 40 --fixtures none --quiet
  [ "$(status tmplv1.json p2p)" = passed ] || fail "child without p2p_templates: suite p2p is $(status tmplv1.json p2p)"
  grep -q "sent in template form" "$tmp/tmplv1.json.log" && fail "child without p2p_templates: sent templates"
fi

# 4. planted-bug C program (off by one in the rank loop): caught in every suite
if part 4; then
  conform last.json 1 --backend "exec:$child bug=last_rank" --suite all --cases 40 --fixtures none --quiet
  for s in redistribute tp p2p ckpt; do
    [ "$(status last.json $s)" = failed ] || fail "bug=last_rank: suite $s is $(status last.json $s)"
  done
  replays last.json
  mesh_dims_at_most last.json 2
fi

# 5. a Python backend written from scratch: copy-only cases pass, Partial ones are skipped (never
# passed), a lacking capability is skipped
if part 5; then
  conform py.json 0 --backend "exec:$py" --suite redistribute,tp --cases 120 --fixtures none --quiet
  [ "$(field py.json "j['suites']['redistribute']['pass']")" -gt 0 ] || fail "python backend: nothing passed"
  [ "$(field py.json "j['suites']['redistribute']['skip']")" -gt 0 ] || fail "python backend: Partial cases were not skipped"
  [ "$(status py.json tp)" = skipped ] || fail "python backend without tp: suite tp is $(status py.json tp)"
fi

# 6. the Python backend's planted bug (numpy.array_split's uneven chunks): caught, shrunk
if part 6; then
  conform pybug.json 1 --backend "exec:$py --bug array_split" --suite redistribute --cases 200 --fixtures none --quiet --junit "$tmp/pybug.xml"
  replays pybug.json
  mesh_dims_at_most pybug.json 2
fi

# 6b. reports: the JUnit failure message carries the first differing element (as the console shows);
# the saved failure names the backend that ran (not "impl":"ref","transport":"local"); --replay
# writes --junit, --json and --report
if part 6b; then
  grep -qE 'message="backend vs oracle: [^"]*; rank [0-9]+ ' "$tmp/pybug.xml" || fail "junit: the failure message lacks the first differing element"
  saved=$(grep -m1 -oE "\-\-replay [^ ]+\.json" "$tmp/pybug.json.log" | cut -d' ' -f2)
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if 'impl' not in j and 'transport' not in j and 'array_split' in j.get('backend','') else 1)" "$saved" \
    || fail "saved redistribute failure: does not name the backend that ran ($saved)"
  "$bin" conform --backend "exec:$py --bug array_split" --replay "$saved" --junit "$tmp/rr.xml" --json "$tmp/rr.json" --report "$tmp/rr" >"$tmp/rr.log" 2>&1
  [ $? = 1 ] || fail "--replay of a failure: exit is not 1"
  grep -qE '<failure [^>]*message="backend vs oracle: [^"]*; rank' "$tmp/rr.xml" 2>/dev/null || fail "--replay: --junit not written (or without the failure)"
  [ "$(field rr.json "j['suites']['redistribute']['fail']")" = 1 ] || fail "--replay: --json not written (or without the failure)"
  grep -q "array_split" "$tmp/rr/conform.html" 2>/dev/null || fail "--replay: --report not written"
fi

# 7. children that crash, hang, write garbage, answer another id: those cases fail, the campaign
# goes on (other cases pass), exit 1
# (every child started appends its pid to pids.MODE: none may be left running after conform exits)
if part 7; then
  for m in crash hang garbage wrong-id stray half stray-late; do
    CONFORM_CHILD_PIDS="$tmp/pids.$m" conform "f$m.json" 1 --backend "exec:$py --$m" --suite redistribute --cases 16 --shrink-runs 8 --timeout 1 --fixtures none --quiet
    [ "$(field "f$m.json" "j['suites']['redistribute']['fail']")" -gt 0 ] || fail "--$m: no failure"
    [ "$(field "f$m.json" "j['suites']['redistribute']['pass']")" -gt 0 ] || fail "--$m: the campaign did not go on"
    while read -r pid; do
      st=$(awk '{sub(/.*\) /, ""); print $1}' "/proc/$pid/stat" 2>/dev/null)
      case "$st" in "" | Z | X) ;; *) fail "--$m: backend child $pid still running (state $st) after conform exited" ;; esac
    done <"$tmp/pids.$m"
  done
  grep -q "crashed" "$tmp/fcrash.json.log" || fail "--crash: not reported as a crash"
  grep -q "about to abort" "$tmp/fcrash.json.log" || fail "--crash: the child's stderr is not in the report"
  grep -q "timed out" "$tmp/fhang.json.log" || fail "--hang: not reported as a timeout"
  grep -q "not a JSON object" "$tmp/fgarbage.json.log" || fail "--garbage: not reported as garbage"
  grep -q "id of another request" "$tmp/fwrong-id.json.log" || fail "--wrong-id: not reported"
  # what arrived is named: both ids, and the answer's first bytes
  grep -qE "request id [0-9]+, answer id [0-9]+" "$tmp/fwrong-id.json.log" || fail "--wrong-id: the id that arrived is not named"
  grep -q "(answer: '{" "$tmp/fwrong-id.json.log" || fail "--wrong-id: the answer is not quoted"
  # a stray line after an answer fails the case it followed (its replay fails again; shrinking keeps it)
  grep -q "wrote more after its answer to request id" "$tmp/fstray.json.log" || fail "--stray: not reported as a stray line"
  grep -q "stray" "$tmp/fstray.json.log" || fail "--stray: the stray line is not quoted"
  grep -q "shrinking lost the failure" "$tmp/fstray.json.log" && fail "--stray: blamed on the wrong case (shrinking lost the failure)"
  replays fstray.json
  # one that comes later than the settle time is named as the previous request's
  grep -qE "previous request" "$tmp/fstray-late.json.log" || fail "--stray-late: not named as the previous request's"
  # half a line, then silence: said so, with the bytes
  grep -q "half a line and then went silent" "$tmp/fhalf.json.log" || fail "--half: reported as a plain timeout"
  grep -q '"loc' "$tmp/fhalf.json.log" || fail "--half: the half line is not quoted"
fi

# 7b. policy: a backend declining every Partial case (the copy-only child: about half the cases)
# fails under --max-skip-share; a backend that hangs on every case is stopped after --max-timeouts
# timed-out requests (the suites left fail as not run; the count is in the report), and the
# shrinking of a hang is bounded by --shrink-seconds
if part 7b; then
  conform skip.json 1 --backend "exec:$py" --suite redistribute --cases 200 --fixtures none --quiet --max-skip-share 0.25
  grep -q "over --max-skip-share 0.25" "$tmp/skip.json.log" || fail "--max-skip-share: not reported"
  conform skipok.json 0 --backend "exec:$py" --suite redistribute --cases 200 --fixtures none --quiet --max-skip-share 0.9
  cat >"$tmp/hangall.py" <<'PY'
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
  t0=$(date +%s)
  # bounded: a run that is not stopped (160 cases at 0.5 s would take 80 s) is killed at 60 s and fails
  TMO=60 conform hangall.json 1 --backend "exec:python3 $tmp/hangall.py" --suite redistribute,tp --cases 160 --fixtures none --quiet \
    --timeout 0.5 --max-timeouts 4 --shrink-seconds 2
  t1=$(date +%s)
  [ "$(field hangall.json "j['timeouts']")" = 4 ] || fail "--max-timeouts 4: $(field hangall.json "j['timeouts']") timeouts counted"
  [ "$(field hangall.json "j['stopped_on_timeouts']")" = True ] || fail "--max-timeouts: the run was not stopped"
  grep -q "backend timeouts: 4" "$tmp/hangall.json.log" || fail "--max-timeouts: the count is not in the summary"
  grep -q "not run: the backend timed out 4 times" "$tmp/hangall.json.log" || fail "--max-timeouts: the tp suite ran"
  # 160 cases at 0.5 s each would be 80 s: stopped after 4 (child restarts included), seconds
  [ $((t1 - t0)) -le 45 ] || fail "--max-timeouts: $((t1 - t0)) s"
fi

# 8. bad input: exit 2 before any case
if part 8; then
  bad() {
    "$bin" conform "$@" >"$tmp/bad.log" 2>&1
    local rc=$?
    [ $rc = 2 ] || fail "reshard conform $* exited $rc, expected 2: $(head -c 300 "$tmp/bad.log")"
  }
  bad --backend "$tmp/missing.so"
  echo "not an ELF file" >"$tmp/text.so"
  bad --backend "$tmp/text.so"
  ln -s "$plugin" "$tmp/link.so"
  bad --backend "$tmp/link.so"
  bad --backend "exec:$py --version 2"
  bad --backend "exec:exit 3"
  bad --backend "$plugin" --suite bogus
  bad --backend "$plugin" --cases 12abc
  bad --backend "$plugin" --cases 5 --seconds 1
  bad --backend "$plugin" --timeout -1
  bad --backend "$plugin" --max-skip-share 2
  bad --backend "$plugin" --max-skip-share -0.5
  bad --backend "$plugin" --max-timeouts x
  bad --backend "$plugin" --shrink-seconds 0
  bad --suite all
fi

if [ $fails -ne 0 ]; then
  echo "conform.sh: $fails check(s) failed"
  exit 1
fi
echo "conform.sh: ok"
