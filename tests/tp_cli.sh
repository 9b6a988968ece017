#!/usr/bin/env bash
# tp_cli.sh - the stable forms of `reshard tp`: exit codes (0 pass, 1 a property failed, 2 bad usage
# or input, with a message naming the field), the exact JSON of `tp run --json` on a curated case,
# `tp gen` lines that `tp run` reads back, and the reports of `tp check`.
# Usage: tp_cli.sh path/to/reshard SOURCE_DIR
set -u
R=${1:?usage: tp_cli.sh path/to/reshard SOURCE_DIR}
S=${2:?usage: tp_cli.sh path/to/reshard SOURCE_DIR}
. "$(dirname "$0")/cli_lib.sh"
C="$S/fixtures/tp/curated"

# run: every curated case passes with both implementations and each alone
for f in "$C"/*.json; do
  for impl in both ref opt; do expect_rc 0 "$R" tp run "$f" --impl "$impl"; done
done

# the exact JSON of a sequence-parallel MLP with a loss-parallel head (TP 3, uneven head split 2,2,1):
# every rank's parameter shapes and xxh3 beside the output's
want='{"dtype":"F32","output":{"shape":[2,6,5],"placement":"S(2)","local":false,"local_shapes":[[2,6,2],[2,6,2],[2,6,1]],"digests":["fa061d5c17a7d652","0907506ace1b2044","9fb9bf34f3821fad"]},"modules":[{"path":"norm","weight":{"placement":"R","local_shapes":[[4],[4],[4]],"digests":["10da01c6f900f533","10da01c6f900f533","10da01c6f900f533"]},"output":"S(1)","output_local":false,"comm":{}},{"path":"fc1","weight":{"placement":"S(0)","local_shapes":[[2,4],[2,4],[2,4]],"digests":["91d472c0c9b55550","f3cae9ce5a51f428","6cc1dff7b51305f7"]},"bias":{"placement":"S(0)","local_shapes":[[2],[2],[2]],"digests":["f5260ce0a9303037","6f6fd9389ed1e9ec","5ec79549f7a89d51"]},"output":"S(2)","output_local":true,"comm":{"all_gather":1}},{"path":"fc2","weight":{"placement":"S(1)","local_shapes":[[4,2],[4,2],[4,2]],"digests":["2fb8fd1da1492b02","7c99f661b1f3b260","8293f56767e071f7"]},"bias":{"placement":"R","local_shapes":[[4],[4],[4]],"digests":["ae2970b5af65d4d7","ae2970b5af65d4d7","ae2970b5af65d4d7"]},"output":"S(1)","output_local":true,"comm":{"reduce_scatter":1}},{"path":"head","weight":{"placement":"S(0)","local_shapes":[[2,4],[2,4],[1,4]],"digests":["07d9d93ff13b6383","998ed81cf372f76c","9747740ebc2da588"]},"output":"S(2)","output_local":false,"comm":{"all_gather":1}}]}'
got=$("$R" tp run "$C/mlp_sp_loss_parallel_3.json" --impl ref --json)
[ "$got" = "$want" ] || fail "tp run --json mlp_sp_loss_parallel_3: $got"

# gen -> run: the generated cases read back and pass
"$R" tp gen --seed 5 --cases 20 > "$T/gen.jsonl" || fail "tp gen"
[ "$(wc -l < "$T/gen.jsonl")" = 20 ] || fail "tp gen --cases 20 gave $(wc -l < "$T/gen.jsonl") lines"
i=0
while IFS= read -r line; do
  i=$((i + 1)); printf '%s\n' "$line" > "$T/g$i.json"
  expect_rc 0 "$R" tp run "$T/g$i.json"
done < "$T/gen.jsonl"
"$R" tp gen --one-d --seed 5 --cases 10 | grep -q '"shape":\[[0-9]*,' && fail "tp gen --one-d printed a 2-d mesh"

# check: reports
expect_rc 0 "$R" tp check --cases 200 --seed 3 --junit "$T/tp.xml" --json "$T/tp.json" --regress-dir "$T/reg"
grep -q '<testsuite name="reshard.tp" tests="5" failures="0"' "$T/tp.xml" || fail "tp check --junit: $(head -c 300 "$T/tp.xml")"
grep -q '"cases":200,"pass":200,"fail":0' "$T/tp.json" || fail "tp check --json: $(head -c 300 "$T/tp.json")"
expect_rc 0 "$R" tp check --cases 100 --impl ref --quiet --regress-dir "$T/reg"
expect_rc 0 "$R" tp check --cases 100 --impl opt --max-ranks 4 --quiet --regress-dir "$T/reg"
# --seconds like every campaign: the same case stream as --cases, bounded by time
expect_rc 0 "$R" tp check --seconds 1 --seed 3 --json "$T/tps.json" --quiet --regress-dir "$T/reg"
grep -q '"seed":3,"cases":[1-9][0-9]*,' "$T/tps.json" || fail "tp check --seconds --json: $(head -c 200 "$T/tps.json")"
expect_rc 2 "$R" tp check --seconds 1 --cases 5
expect_rc 2 "$R" tp check --seconds 0

# bad usage and bad input: exit 2 with the field named
expect_rc 2 "$R" tp
expect_rc 2 "$R" tp frobnicate
expect_rc 2 "$R" tp run
expect_rc 2 "$R" tp run "$C/block_sp_2x2.json" --impl gpu
expect_rc 2 "$R" tp check --cases 0
expect_rc 2 "$R" tp check --max-ranks 0
expect_rc 2 "$R" tp check --bogus
expect_rc 2 "$R" tp gen --seed x
expect_rc 0 "$R" tp --help
bad() { # bad FIELD JSON: tp run refuses it with exit 2 and names FIELD
  printf '%s\n' "$2" > "$T/bad.json"
  "$R" tp run "$T/bad.json" >"$T/out" 2>"$T/err"; local rc=$?
  [ "$rc" = 2 ] || fail "exit $rc (want 2) for $2"
  grep -q -- "$1" "$T/err" || fail "message does not name '$1': $(cat "$T/err")"
}
bad 'mesh' '{"batch":1,"seq":1,"plan":[{"module":"norm","dim":2}]}'
bad 'case.batch' '{"mesh":{"shape":[2]},"batch":1.5,"seq":1,"plan":[{"module":"norm","dim":2}]}'
bad 'plan\[0\].module' '{"mesh":{"shape":[2]},"batch":1,"seq":1,"plan":[{"module":"conv","dim":2}]}'
bad 'plan\[0\].style' '{"mesh":{"shape":[2]},"batch":1,"seq":1,"plan":[{"module":"norm","dim":2,"style":"diagonal"}]}'
bad 'ColwiseParallel applies to Linear and Embedding' '{"mesh":{"shape":[2]},"batch":1,"seq":1,"plan":[{"path":"n","module":"norm","dim":2,"style":"colwise"}]}'
bad 'receives a DTensor' '{"mesh":{"shape":[2]},"batch":1,"seq":2,"input_layout":"S(1)","plan":[{"path":"n","module":"norm","dim":2,"style":"sequence"},{"path":"fc","module":"linear","in":2,"out":2}]}'
bad 'slice of the features' '{"mesh":{"shape":[2]},"batch":1,"seq":2,"input_layout":"S(2)","plan":[{"path":"n","module":"norm","dim":2}]}'
bad 'input_layouts declares' '{"mesh":{"shape":[2]},"batch":1,"seq":2,"input_layout":"R","plan":[{"path":"fc","module":"linear","in":2,"out":2,"style":"rowwise"}]}'
bad '2\^24' '{"mesh":{"shape":[2]},"batch":1,"seq":1,"vmax":1000,"plan":[{"path":"fc","module":"linear","in":100000,"out":1}]}'

[ $fails = 0 ] && echo ok
exit $((fails > 0))
