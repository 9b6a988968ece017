#!/usr/bin/env bash
# cli_forms.sh - the stable forms of the reshard CLI: exact JSON of layout and plan, exit codes
# (0 pass, 1 failure, 2 bad usage), run with fixture expectations, gen, check reports, replay.
# Usage: cli_forms.sh path/to/reshard
set -u
R=${1:?usage: cli_forms.sh path/to/reshard}
. "$(dirname "$0")/cli_lib.sh"

# layout: 18 over 4 is 5,5,5,3 (torch.chunk); each piece over 2: 5 -> 3,2 and 3 -> 2,1.
want='{"ranks":[{"rank":0,"coord":[0,0],"local_shape":[3,2],"global_offset":[0,0]},{"rank":1,"coord":[0,1],"local_shape":[2,2],"global_offset":[3,0]},{"rank":2,"coord":[1,0],"local_shape":[3,2],"global_offset":[5,0]},{"rank":3,"coord":[1,1],"local_shape":[2,2],"global_offset":[8,0]},{"rank":4,"coord":[2,0],"local_shape":[3,2],"global_offset":[10,0]},{"rank":5,"coord":[2,1],"local_shape":[2,2],"global_offset":[13,0]},{"rank":6,"coord":[3,0],"local_shape":[2,2],"global_offset":[15,0]},{"rank":7,"coord":[3,1],"local_shape":[1,2],"global_offset":[17,0]}]}'
got=$("$R" layout --mesh 4x2 --placements S0,S0 --shape 18x2 --json)
[ "$got" = "$want" ] || fail "layout 4x2 S0,S0 18x2: $got"

# Empty shards report offset = global size; rank list gives the world ranks.
want='{"ranks":[{"rank":3,"coord":[0],"local_shape":[2],"global_offset":[0]},{"rank":1,"coord":[1],"local_shape":[2],"global_offset":[2]},{"rank":2,"coord":[2],"local_shape":[1],"global_offset":[4]},{"rank":0,"coord":[3],"local_shape":[0],"global_offset":[5]}]}'
got=$("$R" layout --mesh 4 --ranks 3,1,2,0 --placements 'S(0)' --shape 5 --json)
[ "$got" = "$want" ] || fail "layout 4 S(0) 5 with ranks: $got"

# Shard order: mesh dim 1 splits first.
got=$("$R" layout --mesh 2x2 --placements S0,S0 --order 0:1,0 --shape 4 --json)
want='{"ranks":[{"rank":0,"coord":[0,0],"local_shape":[1],"global_offset":[0]},{"rank":1,"coord":[0,1],"local_shape":[1],"global_offset":[2]},{"rank":2,"coord":[1,0],"local_shape":[1],"global_offset":[1]},{"rank":3,"coord":[1,1],"local_shape":[1],"global_offset":[3]}]}'
[ "$got" = "$want" ] || fail "layout with --order 0:1,0: $got"
expect_rc 0 "$R" layout --mesh 4x2 --placements S0,S0 --shape 18x2

# plan: PyTorch's greedy unshards the nested S(0) from the inside out, then re-shards.
want='{"planner":"greedy","steps":[{"mesh_dim":2,"from":"S(0)","to":"R","collective":"all_gather"},{"mesh_dim":1,"from":"S(0)","to":"R","collective":"all_gather"},{"mesh_dim":0,"from":"S(0)","to":"R","collective":"all_gather"},{"mesh_dim":1,"from":"R","to":"S(0)","collective":"chunk"},{"mesh_dim":2,"from":"R","to":"S(0)","collective":"chunk"}],"trace":"S(0)[0]S(0)[1]S(0)[2]->S(0)[0]S(0)[1]R->S(0)RR->RRR->RS(0)R->RS(0)[0]S(0)[1]"}'
got=$("$R" plan --mesh 2x2x2 --shape 8x8x8 --src S0,S0,S0 --dst R,S0,S0 --json)
[ "$got" = "$want" ] || fail "plan 2x2x2: $got"
got=$("$R" plan --mesh 2x2x2 --shape 8x8x8 --src S0,S0,S0 --src-order 0:1,0,2 --dst R,S0,S0 --json)
case "$got" in '{"planner":"graph",'*'"trace":"S(0)[1]S(0)[0]S(0)[2]->'*) ;; *) fail "plan with --src-order: $got" ;; esac
got=$("$R" plan --mesh 4 --shape 8 --src 'P(sum)' --dst S0 --planner graph --json)
case "$got" in *'"collective":"reduce_scatter"'*) ;; *) fail "plan P->S: $got" ;; esac

# usage errors exit 2 and name the flag
expect_rc 2 "$R" layout --mesh 4x2 --placements S0 --shape 18x2
grep -q -- '--placements' "$T/err" || fail "error does not name --placements: $(cat "$T/err")"
expect_rc 2 "$R" layout --mesh 4x2 --placements S5,S0 --shape 18x2
expect_rc 2 "$R" layout --mesh 4xq --placements S0 --shape 18
grep -q -- '--mesh' "$T/err" || fail "error does not name --mesh: $(cat "$T/err")"
expect_rc 2 "$R" plan --mesh 4 --shape 8 --src S0 --dst 'P(sum)'
expect_rc 2 "$R" plan --mesh 4 --shape 8 --src S0 --dst R --planner fast
grep -q -- '--planner' "$T/err" || fail "error does not name --planner"
expect_rc 2 "$R" frobnicate
expect_rc 2 "$R" check --cases -3
expect_rc 2 "$R" check --bogus
expect_rc 0 "$R" --help
for c in layout plan run check replay gen; do expect_rc 0 "$R" $c --help; done

# run: a case, then fixture expectations (present keys are checked)
cat >"$T/case.json" <<'J'
{"name":"cli","mesh":{"shape":[2],"ranks":[0,1]},"tensor":{"shape":[5],"dtype":"F32"},
 "src":{"placements":["S(0)"]},"dst":{"placements":["R"]},"seed":7,"values":"bits"}
J
expect_rc 0 "$R" run "$T/case.json"
grep -q PASS "$T/out" || fail "run: no PASS"
sed 's/"values":"bits"/"values":"bits","expected":{"trace":"S(0)->R","collectives":{"all_gather":1},"ranks":[{"rank":1,"local_shape":[5],"global_offset":[0]}]}/' "$T/case.json" >"$T/fx.json"
expect_rc 0 "$R" run "$T/fx.json"
sed 's/"values":"bits"/"values":"bits","expected":{"trace":"S(0)->R->S(0)"}/' "$T/case.json" >"$T/fx2.json"
expect_rc 1 "$R" run "$T/fx2.json"
sed 's/"values":"bits"/"values":"bits","expected":{"ranks":[{"rank":0,"xxh3":"0000000000000000"}]}/' "$T/case.json" >"$T/fx3.json"
expect_rc 1 "$R" run "$T/fx3.json"
expect_rc 2 "$R" run "$T/missing.json"
echo '{"mesh":' >"$T/bad.json"
expect_rc 2 "$R" run "$T/bad.json"
expect_rc 2 "$R" run "$T/case.json" --impl fast

# gen: N JSON lines, deterministic in the seed
"$R" gen --seed 5 --cases 3 >"$T/g1" || fail "gen"
"$R" gen --seed 5 --cases 3 >"$T/g2"
[ "$(wc -l <"$T/g1")" = 3 ] || fail "gen: not 3 lines"
cmp -s "$T/g1" "$T/g2" || fail "gen: not deterministic"
head -1 "$T/g1" | grep -q '^{"name":"gen-5-0"' || fail "gen: first line $(head -c 80 "$T/g1")"

# check: exit 0 or 1 (ref may have bugs), reports written, rate printed
"$R" check --seed 3 --cases 300 --quiet --json "$T/s.json" --junit "$T/j.xml" --regress-dir "$T/reg" >"$T/out" 2>&1
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "check exit $rc"
grep -q 'cases/s' "$T/out" || fail "check: no rate"
grep -q '"cases":[[:space:]]*300' "$T/s.json" || fail "check --json: $(head -c 200 "$T/s.json")"
grep -q '<testsuite' "$T/j.xml" || fail "check --junit"

# replay: a saved case for a passing property exits 0; unknown property exits 2
sed 's/"values":"bits"/"values":"bits","property":"boxes","message":"x"/' "$T/case.json" >"$T/r.json"
expect_rc 0 "$R" replay "$T/r.json"
sed 's/"values":"bits"/"values":"bits","property":"nope"/' "$T/case.json" >"$T/r2.json"
expect_rc 2 "$R" replay "$T/r2.json"

if [ "$fails" -ne 0 ]; then
  echo "$fails check(s) failed" >&2
  exit 1
fi
echo ok
