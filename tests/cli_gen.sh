#!/usr/bin/env bash
# cli_gen.sh - the generator's options on the CLI (shared by `reshard gen` and `reshard check`):
# each option narrows what is generated, a campaign judges feature coverage against the options
# it was given (a feature the options rule out is not required), bad values exit 2.
# Usage: cli_gen.sh path/to/reshard
set -u
R=${1:?usage: cli_gen.sh path/to/reshard}
. "$(dirname "$0")/cli_lib.sh"

# Narrowed: two dtypes, Partial(avg) only, default orders and rank lists, 2-d meshes.
"$R" gen --seed 5 --cases 400 --dtypes BF16,I8 --ops avg --partial often --orders default \
  --rank-lists none --max-mesh-dims 2 --max-tensor-dims 3 >"$T/narrow" || fail "gen narrowed: exit $?"
[ "$(wc -l <"$T/narrow")" = 400 ] || fail "gen narrowed: $(wc -l <"$T/narrow") lines, want 400"
grep -vqE '"dtype":"(BF16|I8)"' "$T/narrow" && fail "gen --dtypes BF16,I8 produced another dtype"
grep -qE 'P\((sum|min|max)\)' "$T/narrow" && fail "gen --ops avg produced another Partial op"
grep -q 'P(avg)' "$T/narrow" || fail "gen --partial often --ops avg produced no P(avg)"
grep -q '"mesh_dims":\[1,0\]' "$T/narrow" && fail "gen --orders default produced a non-default shard order"
grep -qE '"mesh":\{"shape":\[[0-9]+(,[0-9]+){2,}\]' "$T/narrow" && fail "gen --max-mesh-dims 2 produced a 3-d mesh"
# ... and without those options the same stream does produce them (the checks above can fail).
"$R" gen --seed 5 --cases 400 --dtypes BF16,I8 --ops avg --partial often --max-mesh-dims 2 \
  --max-tensor-dims 3 >"$T/orders" || fail "gen --orders any: exit $?"
grep -q '"mesh_dims":\[1,0\]' "$T/orders" || fail "gen --orders any produced no reordered 2-way split"
"$R" gen --seed 5 --cases 400 --max-mesh-dims 3 | grep -qE '"mesh":\{"shape":\[[0-9]+(,[0-9]+){2}\]' ||
  fail "gen --max-mesh-dims 3 produced no 3-d mesh"

# Widened: 6-d meshes and 8-d tensors appear by default; --partial none is copy-only.
"$R" gen --seed 5 --cases 400 >"$T/wide" || fail "gen default: exit $?"
grep -qE '"mesh":\{"shape":\[[0-9]+(,[0-9]+){5}\]' "$T/wide" || fail "gen: no 6-d mesh in 400 cases"
grep -qE '"tensor":\{"shape":\[[0-9]+(,[0-9]+){7}\]' "$T/wide" || fail "gen: no 8-d tensor in 400 cases"
"$R" gen --seed 5 --cases 400 --partial none >"$T/copy" || fail "gen --partial none: exit $?"
grep -q 'P(' "$T/copy" && fail "gen --partial none produced a Partial"

# --order-share: 0 gives exact values only, 100 order values for every Partial case.
"$R" gen --seed 5 --cases 300 --partial often --order-share 0 | grep -q '"values":"order"' &&
  fail "gen --order-share 0 produced order values"
"$R" gen --seed 5 --cases 300 --partial often --order-share 100 | grep -q '"values":"order"' ||
  fail "gen --order-share 100 produced no order values"

# The same seed and options give the same cases (gen's case i is check's case i).
"$R" gen --seed 5 --cases 50 --dtypes F16 >"$T/a"; "$R" gen --seed 5 --cases 50 --dtypes F16 >"$T/b"
cmp -s "$T/a" "$T/b" || fail "gen is not deterministic"

# A campaign narrowed to one dtype and one op requires only what its options allow.
"$R" check --seed 7 --cases 2000 --quiet --dtypes F64 --ops max --max-mesh-dims 3 --max-tensor-dims 2 \
  --regress-dir "$T/reg" --json "$T/c.json" --junit "$T/c.xml" >"$T/check" 2>&1 || fail "narrowed check: exit $? :: $(tail -3 "$T/check")"
grep -q '"features_missing":[[:space:]]*\[\]' "$T/c.json" || fail "narrowed check: features missing: $(grep -o '"features_missing".*' "$T/c.json" | head -c 200)"
grep -q 'dtype_F64\* 2000' "$T/check" || fail "narrowed check: not all 2000 cases F64"
grep -q '<testcase classname="reshard.props" name="feature_coverage"></testcase>' "$T/c.xml" ||
  fail "narrowed check: JUnit has no passed feature_coverage testcase"

# --properties runs only the named properties; feature coverage is still judged.
"$R" check --seed 3 --cases 20 --properties boxes,compare_sees --quiet --regress-dir "$T/reg" >"$T/props" 2>&1 ||
  fail "check --properties: exit $?"
[ "$(grep -cE '^(boxes|compare_sees) ' "$T/props")" = 2 ] && ! grep -qE '^(greedy_oracle|reject_bad) ' "$T/props" ||
  fail "check --properties boxes,compare_sees ran other properties: $(head -5 "$T/props")"
"$R" check --cases 1 --properties boxes,nope >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "check --properties nope: exit $rc, want 2"

# Bad values are usage errors (exit 2), never a crash or a silent default.
for args in "--dtypes F33" "--dtypes ," "--ops sum,mean" "--partial sometimes" "--orders random" \
  "--rank-lists some" "--max-mesh-dims 7" "--max-tensor-dims 9" "--max-dim 0" "--max-numel 1e9" \
  "--max-work -1" "--max-ranks 100000" "--max-dim" "--order-share 101"; do
  # shellcheck disable=SC2086
  "$R" gen --cases 1 $args >/dev/null 2>"$T/err"; rc=$?
  [ $rc = 2 ] || fail "gen $args: exit $rc, want 2"
  # shellcheck disable=SC2086
  "$R" check --cases 1 --quiet --regress-dir "$T/reg" $args >/dev/null 2>"$T/err"; rc=$?
  [ $rc = 2 ] || fail "check $args: exit $rc, want 2"
done

[ $fails = 0 ] && echo "cli_gen: all passed"
exit $((fails > 0))
