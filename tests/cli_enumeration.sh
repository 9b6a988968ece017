#!/usr/bin/env bash
# cli_enumeration.sh RESHARD TOP - `--enumeration seed|pytorch` on `run` and `plan`: current PyTorch's
# transitions plan what the seed enumeration cannot (R -> P(avg), S -> P(sum) by zero-fill), a
# zero-filling plan is held to the oracle by its sums over the zero-filled mesh dims, the choice is
# reported in --json, and a bad value is refused with exit 2.
set -u
R=${1:?usage: cli_enumeration.sh path/to/reshard TOP}
top=${2:?usage: cli_enumeration.sh path/to/reshard TOP}
. "$(dirname "$0")/cli_lib.sh"
# R -> P(max) is a legal step under both enumerations (SPEC 6; include/reshard/plan.h): the greedy
# planner emits it under seed, the seed graph search creates Partial only as P(sum) (no path), the
# pytorch one plans it; a run of the greedy plan is held to the oracle
for e in seed pytorch; do
  expect_rc 0 "$R" plan --mesh 2 --shape 4 --src R --dst 'P(max)' --planner greedy --enumeration $e
  grep -q '^trace: R->P(max)$' "$T/out" || fail "greedy R -> P(max) under $e: $(cat "$T/out")"
done
expect_rc 2 "$R" plan --mesh 2 --shape 4 --src R --dst 'P(max)' --planner graph
grep -q 'no path' "$T/err" || fail "seed graph R -> P(max): $(cat "$T/err")"
expect_rc 0 "$R" plan --mesh 2 --shape 4 --src R --dst 'P(max)' --planner graph --enumeration pytorch
grep -q '^trace: R->P(max)$' "$T/out" || fail "pytorch graph R -> P(max): $(cat "$T/out")"
cat >"$T/rmax.json" <<'J'
{"name":"rmax","mesh":{"shape":[2]},"tensor":{"shape":[4],"dtype":"F32"},"src":{"placements":["R"]},
 "dst":{"placements":["P(max)"]},"planner":"greedy"}
J
expect_rc 0 "$R" run "$T/rmax.json"
# PyTorch 2.15 plans this one (P(avg) from Replicate); the seed enumeration has no path
cat >"$T/avg.json" <<'J'
{"name":"avg","mesh":{"shape":[2,1,4]},"tensor":{"shape":[3],"dtype":"F32"},
 "src":{"placements":["S(0)","R","R"]},
 "dst":{"placements":["S(0)","P(avg)","S(0)"],"shard_order":[{"tensor_dim":0,"mesh_dims":[2,0]}]}}
J
expect_rc 1 "$R" run "$T/avg.json"
grep -q 'no path' "$T/out" || fail "seed enumeration: $(cat "$T/out")"
expect_rc 0 "$R" run "$T/avg.json" --enumeration pytorch --cost pytorch
grep -q '^plan: S(0)RR->S(0)P(avg)R->RP(avg)R->RP(avg)S(0)->S(0)\[1\]P(avg)S(0)\[0\]$' "$T/out" ||
  fail "pytorch enumeration trace: $(cat "$T/out")"
expect_rc 0 "$R" run "$T/avg.json" --enumeration pytorch --json
grep -q '"enumeration":"pytorch"' "$T/out" || fail "--json lacks the enumeration: $(cat "$T/out")"
expect_rc 2 "$R" run "$T/avg.json" --enumeration newest
grep -q -- --enumeration "$T/err" || fail "bad --enumeration not named: $(cat "$T/err")"
# "enumeration" in the case file, and its type checked
sed 's/"name":"avg"/"name":"avg","enumeration":"pytorch"/' "$T/avg.json" >"$T/avg2.json"
expect_rc 0 "$R" run "$T/avg2.json"
expect_rc 1 "$R" run "$T/avg2.json" --enumeration seed
sed 's/"name":"avg"/"name":"avg","enumeration":7/' "$T/avg.json" >"$T/avg3.json"
expect_rc 2 "$R" run "$T/avg3.json"
grep -q enumeration "$T/err" || fail "bad enumeration field not named: $(cat "$T/err")"
# S -> P(sum): an error of the seed contract, a zero-fill step under pytorch
expect_rc 2 "$R" plan --mesh 2 --shape 4 --src S0 --dst 'P(sum)'
expect_rc 0 "$R" plan --mesh 2 --shape 4 --src S0 --dst 'P(sum)' --enumeration pytorch --planner graph
grep -q 'shard_to_partial' "$T/out" || fail "plan: no zero-fill step: $(cat "$T/out")"
expect_rc 2 "$R" plan --mesh 2 --shape 4 --src S0 --dst 'P(max)' --enumeration pytorch
# a plan needs no values: a dtype too narrow for exact test values plans (PyTorch plans it); only
# commands that fill values refuse it
expect_rc 0 "$R" plan --mesh 2x16 --shape 4 --dtype I8 --src 'P(sum),P(sum)' --dst R,R
grep -q 'all_reduce' "$T/out" || fail "I8 plan: $(cat "$T/out")"
cat >"$T/i8.json" <<'J'
{"name":"i8","mesh":{"shape":[2,16]},"tensor":{"shape":[4],"dtype":"I8"},
 "src":{"placements":["P(sum)","P(sum)"]},"dst":{"placements":["R","R"]}}
J
expect_rc 2 "$R" run "$T/i8.json"
grep -q 'cannot hold exact values' "$T/err" || fail "I8 run: $(cat "$T/err")"
# 1-d equal layout: the seed's greedy planner emits a no-op step, PyTorch's none
expect_rc 0 "$R" plan --mesh 4 --shape 9 --src S0 --dst S0
grep -q '1 step' "$T/out" || fail "seed 1-d no-op: $(cat "$T/out")"
expect_rc 0 "$R" plan --mesh 4 --shape 9 --src S0 --dst S0 --enumeration pytorch
grep -q '0 steps' "$T/out" || fail "pytorch 1-d no-op: $(cat "$T/out")"
# recorded from PyTorch: digests equal for ref; the oracle compares sums where ref zero-fills
for f in "$top"/fixtures/curated/enum_pytorch_*.json; do
  expect_rc 0 "$R" run "$f"
done
zf="$top/fixtures/curated/enum_pytorch_zero_fill_3x2x2_S0RS0_to_S1PsumS1.json"
expect_rc 0 "$R" run "$zf" --json
grep -q '"oracle_summed_mesh_dims":\[1\]' "$T/out" || fail "zero-fill --json: $(head -c 400 "$T/out")"
expect_rc 1 "$R" run "$zf" --enumeration seed
# a saved failure of a pytorch-enumeration case replays under its enumeration (props compare the
# zero-filled sums too)
printf '{"mesh":{"shape":[2]},"tensor":{"shape":[4],"dtype":"F32"},"src":{"placements":["S(0)"]},"dst":{"placements":["P(sum)"]},"enumeration":"pytorch","seed":7,"property":"graph_oracle","message":"x","impl":"ref"}\n' >"$T/saved.json"
expect_rc 0 "$R" replay "$T/saved.json"
grep -q 'graph_oracle (ref): PASS' "$T/out" || fail "replay of a zero-fill case: $(cat "$T/out")"
# R -> P(avg): the graph property runs under the pytorch enumeration and SKIPs under seed
printf '{"mesh":{"shape":[2,2]},"tensor":{"shape":[4],"dtype":"F32"},"src":{"placements":["R","S(0)"]},"dst":{"placements":["P(avg)","S(0)"]},"enumeration":"pytorch","seed":7,"property":"graph_oracle","message":"x","impl":"ref"}\n' >"$T/avg_saved.json"
expect_rc 0 "$R" replay "$T/avg_saved.json"
grep -q 'graph_oracle (ref): PASS' "$T/out" || fail "replay of R -> P(avg): $(cat "$T/out")"
expect_rc 0 "$R" replay "$T/avg_saved.json" --enumeration seed
grep -q 'SKIP' "$T/out" || fail "seed replay of R -> P(avg) should SKIP: $(cat "$T/out")"
sed 's/"property":"graph_oracle"/"property":"plan_legal_graph"/' "$T/saved.json" >"$T/saved2.json"
expect_rc 0 "$R" replay "$T/saved2.json"

if [ "$fails" -ne 0 ]; then
  echo "$fails check(s) failed" >&2
  exit 1
fi
echo ok
