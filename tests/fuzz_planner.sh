#!/usr/bin/env bash
# fuzz_planner.sh - `reshard fuzz-planner` against the example planner plug-ins of
# tests/planner_plugin.c and the exec children of tests/planner_child.py:
#   - ref's greedy and graph planners and opt's P2P planner, wrapped as plug-ins: pass, and score
#     as they must (a planner ties with itself; greedy loses to graph on seed cost somewhere; opt's
#     P2P plans sit on the lower bound);
#   - the planted-bug planner (plug-in and Python child): caught as a wrong plan, shrunk to at most
#     2 mesh dims, saved, and its replay command fails again; its P2P planner (one transfer sent
#     twice) caught as illegal;
#   - the illegal-plan planner: caught as illegal (never as wrong);
#   - the Python child's P2P side (ref's plans through the protocol): passes; with --bug caught;
#   - a child that crashes and answers garbage: those cases fail as errors, the campaign goes on;
#   - the generator: `reshard gen`'s cases, zero-fill drawn under --enumeration pytorch (a planner
#     that gathers instead is caught), the feature table judged; a planner declining every case
#     or more than --max-decline-share fails; shrinking drops structure first, says when its
#     budget ran out, and bounds a hanging planner by --shrink-seconds;
#   - bad usage: exit 2 naming the field.
# Usage: fuzz_planner.sh path/to/reshard SOURCE_DIR
set -u
R=${1:?usage: fuzz_planner.sh path/to/reshard SOURCE_DIR}
top=${2:?usage: fuzz_planner.sh path/to/reshard SOURCE_DIR}
. "$(dirname "$0")/cli_lib.sh"
lib=$(cd "$(dirname "$R")" && pwd)/tests
N=${RS_FUZZ_PLANNER_CASES:-400}
py=$(command -v python3 || true)

# jq-free JSON checks: `json FILE EXPR` evaluates a Python expression over the document d
json() {
  [ -n "$py" ] || return 0
  "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" ||
    fail "$1: not true: $2"
}

# --- plug-ins that must pass ---
for p in greedy graph; do
  expect_rc 0 "$R" fuzz-planner --planner "$lib/libplanner_$p.so" --seed 3 --cases "$N" --quiet \
    --regress-dir "$T/reg" --json "$T/$p.json" --junit "$T/$p.xml"
  expect_out "passed"
  json "$T/$p.json" "d['failed_cases'] == 0 and d['passed'] > 0"
  grep -q '<testsuite' "$T/$p.xml" || fail "$p: no JUnit testsuite"
done
# a planner ties with itself on every objective
for o in steps seed-cost pytorch-cost traffic; do
  json "$T/greedy.json" "d['score']['$o']['greedy']['win'] == 0 and d['score']['$o']['greedy']['loss'] == 0 and d['score']['$o']['greedy']['tie'] > 0"
  json "$T/graph.json" "d['score']['$o']['graph/seed']['win'] == 0 and d['score']['$o']['graph/seed']['loss'] == 0"
done
# the seed-cost graph planner minimises seed cost: greedy loses to it somewhere (greedy's wins are
# cases where graph has no path: it makes Partial only as P(sum))
json "$T/greedy.json" "d['score']['seed-cost']['graph/seed']['loss'] > 0"
json "$T/greedy.json" "d['lower_bound']['cases'] > 0 and d['lower_bound']['max_ratio'] >= 1"

expect_rc 0 "$R" fuzz-planner --planner "$lib/libplanner_opt_p2p.so" --kind p2p --seed 3 --cases "$N" --quiet \
  --regress-dir "$T/reg" --json "$T/p2p.json"
json "$T/p2p.json" "d['failed_cases'] == 0 and d['lower_bound']['at_bound'] == d['lower_bound']['cases'] > 0"
json "$T/p2p.json" "d['score']['traffic']['opt']['loss'] == 0 and d['score']['traffic']['opt']['win'] == 0"

# --- planted bugs: caught, shrunk, replayable ---
caught() { # caught KIND FAILURE SPEC [more fuzz-planner flags]
  local kind=$1 want=$2 spec=$3; shift 3
  rm -rf "$T/reg"
  expect_rc 1 "$R" fuzz-planner --planner "$spec" --kind "$kind" --seed 5 --cases "$N" --quiet \
    --regress-dir "$T/reg" --json "$T/bug.json" "$@"
  expect_out "FAIL $want plan"
  expect_out "replay: reshard fuzz-planner --planner"
  json "$T/bug.json" "[f['kind'] for f in d['failures']] == ['$want'] and not d['failures'][0]['shrink_lost']"
  local fx
  fx=$(ls "$T"/reg/*.json 2>/dev/null | head -1)
  [ -n "$fx" ] || { fail "$spec: no saved case"; return; }
  if [ "$kind" = redistribute ]; then json "$fx" "len(d['mesh']['shape']) <= 2"; fi
  expect_rc 1 "$R" fuzz-planner --planner "$spec" --kind "$kind" "$@" --case "$fx"
  expect_out "FAIL"
}
caught redistribute wrong "$lib/libplanner_bug.so"
caught p2p illegal "$lib/libplanner_bug.so"
caught redistribute illegal "$lib/libplanner_illegal.so"
if [ -n "$py" ]; then
  caught redistribute wrong "exec:$py $top/tests/planner_child.py --bug"
  expect_rc 0 "$R" fuzz-planner --planner "exec:$py $top/tests/planner_child.py" --seed 3 --cases 100 --quiet \
    --regress-dir "$T/reg"
  # the protocol's P2P side: the child answers with ref's P2P plans (ties with ref), or with one
  # transfer sent twice (--bug: illegal)
  Rabs=$(cd "$(dirname "$R")" && pwd)/$(basename "$R")
  expect_rc 0 "$R" fuzz-planner --planner "exec:$py $top/tests/planner_child.py --reshard $Rabs" --kind p2p \
    --seed 3 --cases 40 --quiet --regress-dir "$T/reg" --json "$T/pyp2p.json"
  json "$T/pyp2p.json" "d['passed'] == 40 and d['score']['traffic']['ref']['tie'] == 40"
  caught p2p illegal "exec:$py $top/tests/planner_child.py --bug --reshard $Rabs"
fi

# --- one rule for a step out of range: a step of the right shape whose mesh dim or shard dim lies
# outside the case (mesh_dim == the mesh's dim count, 6, -1, 1000, S(8), S(-9), S(200)) is
# `illegal`; only a step of another shape (S(x)) is `error` (garbage answer)
if [ -n "$py" ]; then
  cat >"$T/oor.py" <<'PY'
import json, sys
mode = sys.argv[1]
for line in sys.stdin:
    r = json.loads(line)
    if r["op"] == "hello":
        print(json.dumps({"ok": True, "version": 1, "name": "oor", "capabilities": ["plan"]}), flush=True)
        continue
    if r["op"] == "bye":
        break
    c = r["case"]
    step = {"mesh_dim": 0, "from": c["src"]["placements"][0], "to": "R"}
    if mode == "ndim": step["mesh_dim"] = len(c["mesh"]["shape"])
    elif mode.startswith("md"): step["mesh_dim"] = int(mode[2:])
    else: step["to"] = mode
    print(json.dumps({"id": r["id"], "ok": True, "steps": [step]}), flush=True)
PY
  for m in ndim md6 md-1 md1000 'S(8)' 'S(-9)' 'S(200)' 'S(x)'; do
    want=illegal
    [ "$m" = 'S(x)' ] && want=error
    expect_rc 1 "$R" fuzz-planner --planner "exec:$py $T/oor.py '$m'" --seed 1 --cases 20 --quiet \
      --regress-dir "$T/reg" --json "$T/oor.json"
    json "$T/oor.json" "[f['kind'] for f in d['failures']] == ['$want']"
  done
fi

# --- a child that crashes on some requests and answers garbage on others: those cases fail as
# `error`, the child is restarted, the campaign runs every case and exits 1
if [ -n "$py" ]; then
  cat >"$T/crashy.py" <<'PY'
import json, os, sys
n = 0
for line in sys.stdin:
    r = json.loads(line)
    if r["op"] == "hello":
        print(json.dumps({"ok": True, "version": 1, "name": "crashy", "capabilities": ["plan"]}), flush=True)
        continue
    if r["op"] == "bye":
        break
    n += 1
    if n % 5 == 2:
        os._exit(3)
    print("not json" if n % 5 == 4 else json.dumps({"id": r["id"], "ok": False, "unsupported": True, "message": "no"}), flush=True)
PY
  expect_rc 1 "$R" fuzz-planner --planner "exec:$py $T/crashy.py" --timeout 10 --seed 1 --cases 12 --quiet \
    --regress-dir "$T/reg" --json "$T/crashy.json"
  json "$T/crashy.json" "d['cases'] == 12 and d['failures'][0]['kind'] == 'error' and d['failed_cases'] >= 4"
fi

# --- the generator is `reshard gen`'s (one per feature, every verb): --enumeration pytorch draws
# every case on the pytorch enumeration, zero-fill S(d) -> P(sum) included, so the planner that
# meets zero-fill destinations by gathering only (example-gather-not-zero-fill) is caught within
# the default case count, and shrunk to one mesh dim; the feature table is judged (zero_fill among
# the required features, with its minimum count)
rm -rf "$T/reg"
expect_rc 1 "$R" fuzz-planner --planner "$lib/libplanner_gather.so" --enumeration pytorch --partial often --quiet \
  --regress-dir "$T/reg" --json "$T/gather.json"
expect_out "FAIL wrong plan"
json "$T/gather.json" "d['failures'][0]['kind'] == 'wrong' and d['features']['zero_fill'] > 0"
fx=$(ls "$T"/reg/*.json 2>/dev/null | head -1)
[ -n "$fx" ] && json "$fx" "len(d['mesh']['shape']) == 1 and d['enumeration'] == 'pytorch'"
expect_rc 0 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --enumeration pytorch --quiet --regress-dir "$T/reg" \
  --json "$T/zf.json"
json "$T/zf.json" "d['features_min']['zero_fill'] > 0 and d['features']['zero_fill'] >= d['features_min']['zero_fill'] and d['features_missing'] == []"
json "$T/zf.json" "d['features_min']['order_nondefault_2way'] > 0 and d['features']['enumeration_pytorch'] == d['cases']"
# fuzz-planner's case i is gen's case i (gen --enumeration pytorch): the same zero-fill count
if [ -n "$py" ]; then
  "$R" gen --seed 1 --cases 1000 --enumeration pytorch >"$T/gen.jsonl"
  n=$("$py" -c 'import json,sys
n=0
for l in open(sys.argv[1]):
    c=json.loads(l); s=c["src"]["placements"]; d=c["dst"]["placements"]
    n+=any(a.startswith("S") and b=="P(sum)" for a,b in zip(s,d))
print(n)' "$T/gen.jsonl")
  json "$T/zf.json" "d['features']['zero_fill'] == $n"
fi
# the seed enumeration draws no zero-fill case (and does not require one)
expect_rc 0 "$R" fuzz-planner --planner "$lib/libplanner_gather.so" --quiet --regress-dir "$T/reg" --json "$T/seed.json"
json "$T/seed.json" "d['features']['zero_fill'] == 0 and 'zero_fill' not in d['features_min']"

# --- a run must check something: a planner declining every case fails (both kinds), and one
# declining more than --max-decline-share of the cases fails (greedy declines ~6%)
if [ -n "$py" ]; then
  cat >"$T/decline.py" <<'PY'
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r["op"] == "hello":
        print(json.dumps({"ok": True, "version": 1, "name": "decliner", "capabilities": ["plan", "p2p_plan"]}), flush=True)
    elif r["op"] == "bye":
        break
    else:
        print(json.dumps({"id": r["id"], "ok": False, "unsupported": True, "message": "no"}), flush=True)
PY
  for k in redistribute p2p; do
    expect_rc 1 "$R" fuzz-planner --planner "exec:$py $T/decline.py" --kind $k --cases 30 --quiet --regress-dir "$T/reg" \
      --json "$T/decl.json" --junit "$T/decl.xml"
    expect_out "FAIL nothing checked"
    json "$T/decl.json" "d['nothing_checked'] and d['declined'] == 30"
    grep -q 'name="run_checks"><failure' "$T/decl.xml" || fail "$k: the decline failure is not in the JUnit report"
  done
fi
expect_rc 1 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --seed 3 --cases 200 --quiet --regress-dir "$T/reg" \
  --max-decline-share 0.01 --json "$T/share.json"
expect_out "over --max-decline-share 0.01"
json "$T/share.json" "d['decline_over'] and not d['nothing_checked'] and d['failures'] == []"
expect_rc 0 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --seed 3 --cases 200 --quiet --regress-dir "$T/reg" \
  --max-decline-share 0.5

# --- shrinking: structure first (the planted-bug planner needs 2 mesh dims: the shrunk case has
# exactly 2), the run budget said when used up, and a hanging planner's shrinking bounded by
# --shrink-seconds (each hung step costs its --timeout)
rm -rf "$T/reg"
expect_rc 1 "$R" fuzz-planner --planner "$lib/libplanner_bug.so" --seed 7 --cases 200 --quiet --regress-dir "$T/reg" \
  --json "$T/sb.json"
fx=$(ls "$T"/reg/*.json 2>/dev/null | head -1)
[ -n "$fx" ] && json "$fx" "len(d['mesh']['shape']) == 2 and len(d['tensor']['shape']) <= 1"
json "$T/sb.json" "not d['failures'][0]['shrink_budget_out']"
expect_rc 1 "$R" fuzz-planner --planner "$lib/libplanner_bug.so" --seed 7 --cases 200 --quiet --regress-dir "$T/reg" \
  --shrink-runs 5 --json "$T/sb5.json"
expect_out "shrink budget of 5 runs used up"
json "$T/sb5.json" "d['failures'][0]['shrink_budget_out'] and d['failures'][0]['shrink_runs'] == 5"
if [ -n "$py" ]; then
  cat >"$T/hang.py" <<'PY'
import json, sys, time
for line in sys.stdin:
    r = json.loads(line)
    if r["op"] == "hello":
        print(json.dumps({"ok": True, "version": 1, "name": "hangs-on-2d", "capabilities": ["plan"]}), flush=True)
    elif r["op"] == "bye":
        break
    elif len(r["case"]["mesh"]["shape"]) >= 2:
        time.sleep(3600)
    else:
        print(json.dumps({"id": r["id"], "ok": False, "unsupported": True, "message": "no"}), flush=True)
PY
  t0=$(date +%s)
  expect_rc 1 "$R" fuzz-planner --planner "exec:$py $T/hang.py" --timeout 0.5 --shrink-seconds 3 --seed 1 --cases 4 \
    --quiet --regress-dir "$T/reg" --json "$T/hang.json"
  t1=$(date +%s)
  expect_out "shrink time cap of 3 s reached"
  # unbounded, its shrinking would take up to 300 runs of a hung step and a child restart each
  [ $((t1 - t0)) -le 180 ] || fail "hanging planner: $((t1 - t0)) s (4 cases at --timeout 0.5, shrinking capped at 3 s)"
  json "$T/hang.json" "d['failures'][0]['shrink_budget_out']"
fi

# --- the finding on PyTorch's graph planner (docs/conformance.md, "Planner fuzzing"), kept as a
# regression: reshard's own graph planner (pytorch cost and enumeration) makes PyTorch's zero-fill
# plan, and the -0.0 at [0,1,32] sums to +0.0 with the filled zeros. The contract (section 7) now
# says so, and `reshard run` holds it with the campaigns' one zero-fill compare.
expect_rc 0 "$R" run "$top/fixtures/planner/zero-fill-negative-zero.json"

# --- bad usage: exit 2, naming the field ---
expect_rc 2 "$R" fuzz-planner --cases 3
expect_err "--planner"
expect_rc 2 "$R" fuzz-planner --planner "$T/missing.so" --cases 3
expect_err "--planner"
ln -s "$lib/libplanner_greedy.so" "$T/link.so"
expect_rc 2 "$R" fuzz-planner --planner "$T/link.so" --cases 3
expect_err "symbolic link"
head -c 1000 "$lib/libplanner_greedy.so" >"$T/cut.so"
expect_rc 2 "$R" fuzz-planner --planner "$T/cut.so" --cases 3
expect_err "truncated"
expect_rc 2 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --objective fastest
expect_err "--objective"
expect_rc 2 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --kind p2p --cases 3
expect_err "p2p_plan"
expect_rc 2 "$R" fuzz-planner --planner "$lib/libplanner_opt_p2p.so" --cases 3
expect_err "capability"
expect_rc 2 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --timeout 0
expect_err "--timeout"
expect_rc 2 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 3 --seconds 1
expect_err "--seconds"
expect_rc 2 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 3 --max-decline-share 1.5
expect_err "--max-decline-share"
expect_rc 2 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 3 --max-decline-share 50%
expect_err "--max-decline-share"
expect_rc 2 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 3 --shrink-runs -1
expect_err "--shrink-runs"
expect_rc 2 "$R" fuzz-planner --planner "$lib/libplanner_greedy.so" --cases 3 --shrink-seconds 0
expect_err "--shrink-seconds"

[ "$fails" -eq 0 ] && echo "fuzz_planner: all checks passed"
exit $((fails > 0))
