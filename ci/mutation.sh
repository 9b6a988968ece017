#!/usr/bin/env bash
# mutation.sh RESHARD - the mutation self-test: for every planted bug listed in ref/MUTANTS.md and
# opt/MUTANTS.md (table rows "| id | ..."), `reshard check` run with RS_MUTANT=id must fail within
# 2,000 cases and print a shrunk counterexample with its replay command. Fails if any bug survives.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$1
tmp=$(mktemp -d)
survived=0; caught=0
for f in "$top/ref/MUTANTS.md" "$top/opt/MUTANTS.md"; do
  [ -f "$f" ] || continue
  impl=ref
  case "$f" in */opt/*) impl=opt ;; esac
  for id in $(grep -oE '^\| *[0-9]+ *\|' "$f" | tr -dc '0-9\n'); do
    log="$tmp/m$id.log"
    RS_MUTANT=$id "$bin" check --impl "$impl" --seed 11 --cases 2000 --quiet --regress-dir "$tmp/reg$id" \
      --junit "$tmp/m$id.xml" --json "$tmp/m$id.json" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 1 ] && grep -q "reshard replay" "$log"; then
      caught=$((caught + 1))
      printf 'mutant %-4s (%s) caught: %s\n' "$id" "$impl" "$(grep -m1 -iE 'fail' "$log" | cut -c1-150)"
    else
      survived=$((survived + 1))
      printf 'mutant %-4s (%s) SURVIVED (exit %d)\n' "$id" "$impl" "$rc"
      tail -n 5 "$log"
    fi
  done
done

# ---- tensor-parallel styles (core/tp/MUTANTS.md) ----
# Their own campaign: `reshard tp check --impl both` (ref and opt), seed 11, at most
# RS_MUTANT_CASES cases (2,000), must fail with a shrunk counterexample and its replay command
# (`reshard tp run`); "cases" is the campaign's count at the first failure. RS_MUTANT_ONLY applies.
tpf="$top/core/tp/MUTANTS.md"
if [ -f "$tpf" ]; then
  for id in $(grep -oE '^\| *[0-9]+ *\|' "$tpf" | tr -dc '0-9\n'); do
    if [ -n "${RS_MUTANT_ONLY:-}" ] && ! echo " $RS_MUTANT_ONLY " | grep -q " $id "; then continue; fi
    log="$tmp/tp$id.log"
    RS_MUTANT=$id "$bin" tp check --impl both --seed 11 --cases "${RS_MUTANT_CASES:-2000}" --quiet \
      --regress-dir "$tmp/tpreg$id" >"$log" 2>&1 </dev/null
    rc=$?
    n=$(grep -oE 'seed 11, [0-9]+ cases' "$log" | grep -oE '[0-9]+ cases' | grep -oE '[0-9]+')
    if [ $rc -eq 1 ] && grep -q "replay: reshard tp run" "$log"; then
      caught=$((caught + 1)); verdict=caught
      [ -n "$n" ] && counts+=("$n")
      what=$(grep -m1 '^FAIL' "$log" | cut -c1-110)
    else
      survived=$((survived + 1)); verdict=SURVIVED; n="-"; what="exit $rc"
      tail -n 5 "$log"
    fi
    printf '%-5s %-6s %-8s %8s  %s\n' "$id" tp "$verdict" "${n:--}" "$what"
  done
fi
rm -rf "$tmp"
echo "mutation self-test: $caught caught, $survived survived"
[ $survived -eq 0 ] && [ $caught -gt 0 ]
