#!/usr/bin/env bash
# bench_pytorch.sh RESHARD TOP - `reshard bench pytorch`: the recorded times stand in (and the output
# says so) when no python with torch is given; a given python that cannot start PyTorch's planner is
# exit 2; the live path (a stand-in planner child speaking the planner protocol with "t_ns") times
# both sides over interleaved repetitions and compares the plans. Needs no torch.
set -u
R=${1:?usage: bench_pytorch.sh path/to/reshard TOP}
top=${2:?usage: bench_pytorch.sh path/to/reshard TOP}
. "$(dirname "$0")/cli_lib.sh"
fx="$top/fixtures/pytorch"
row='^graph +[0-9]+ +[0-9]+ +[0-9]+ +[0-9.]+ \[[0-9.]+, [0-9.]+\] +[0-9.]+ \[[0-9.]+, [0-9.]+\]'

expect_rc 0 "$R" bench pytorch --fixtures "$fx" --recorded --cases 40 --csv "$T"
expect_out "the times recorded in"
expect_out "live PyTorch not run: --recorded"
grep -qE "$row" "$T/out" || fail "no graph row: $(cat "$T/out")"
expect_out "single call (the headline): not measured (the recorded times are best of 3)"
[ "$(wc -l <"$T/bench_pytorch.csv")" -gt 40 ] || fail "csv: $(head -3 "$T/bench_pytorch.csv")"

# a given python that does not start the planner: an error naming the flag, no fallback
expect_rc 2 "$R" bench pytorch --fixtures "$fx" --python "$T/nonexistent" --cases 5
expect_err "--python"
RS_PYTHON="$T/nonexistent" expect_rc 2 "$R" bench pytorch --fixtures "$fx" --cases 5
expect_rc 2 "$R" bench pytorch --fixtures "$fx" --recorded --python python3
expect_rc 2 "$R" bench pytorch --fixtures "$fx" --reps 4; expect_err "--reps"

# the live path with a stand-in for PyTorch: planner.py's protocol, every plan answered empty in 1 ms
cat >"$T/stand_in.py" <<'P'
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "hello":
        out = {"ok": True, "version": 1, "name": "stand-in", "capabilities": ["plan"]}
    elif req["op"] == "bye":
        break
    else:
        out = {"id": req["id"], "ok": True, "steps": [], "t_ns": 1000000, "t_first_ns": 2000000}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
P
# bench pytorch runs "PYTHON tools/pytorch/planner.py --mode M --timing-calls 3": the stand-in
# python drops the script and runs stand_in.py
printf '#!/bin/sh\nexec python3 "%s"\n' "$T/stand_in.py" >"$T/python"
chmod +x "$T/python"
expect_rc 0 "$R" bench pytorch --fixtures "$fx" --python "$T/python" --cases 30 --csv "$T"
expect_out "PyTorch's side: live, stand-in"
grep -qE "$row" "$T/out" || fail "live: no graph row: $(cat "$T/out")"
grep -qE "plans: [0-9]+ of 30 identical" "$T/out" || fail "live: no plan comparison: $(cat "$T/out")"
# both timings, the single first call as the headline (the stand-in answers t_first_ns 2 ms, t_ns 1 ms)
expect_out "single call (the headline): each time is the first planning call"
expect_out "best of 3: each time is the least of 3 back-to-back calls"
grep -q ',single,' "$T/bench_pytorch.csv" && grep -q ',best3,' "$T/bench_pytorch.csv" || fail "csv: no single/best3 rows"
awk -F, '$3=="single" && $5!=2000000 {bad=1} $3=="best3" && $5!=1000000 {bad=1} END {exit bad}' "$T/bench_pytorch.csv" ||
  fail "csv: pytorch_ns is not t_first_ns (single) and t_ns (best3): $(head -5 "$T/bench_pytorch.csv")"
# a stand-in that crashes on every plan: those cases are left out and the first reason is said
printf 'import json, sys\nfor line in sys.stdin:\n    r = json.loads(line)\n    if r["op"] == "hello":\n        print(json.dumps({"ok": True, "version": 1, "name": "crash", "capabilities": ["plan"]}), flush=True)\n    else:\n        sys.exit(3)\n' >"$T/stand_in.py"
expect_rc 0 "$R" bench pytorch --fixtures "$fx" --python "$T/python" --cases 3 --timeout 20
expect_out "PyTorch declined or failed"

[ "$fails" = 0 ] || exit 1
echo "bench_pytorch: ok"
