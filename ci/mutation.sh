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

# ---- cross-config resharding (reshard p2p): the planted bugs of opt/p2p/MUTANTS.md (ids 400-449) ----
# Each must make `reshard p2p check` (--impl ref for rows whose file is under ref/, opt otherwise;
# seed 11, at most RS_MUTANT_CASES cases) exit 1 with a shrunk model and its replay command.
# Prints the case number of the first failure ("caught after" in the table).
pmax=${RS_MUTANT_CASES:-2000}
while IFS='|' read -r _ id file _ _ _; do
  id=$(echo "$id" | tr -dc '0-9'); file=$(echo "$file" | tr -d ' `')
  [ -n "$id" ] || continue
  if [ -n "${RS_MUTANT_ONLY:-}" ] && ! echo " $RS_MUTANT_ONLY " | grep -q " $id "; then continue; fi
  impl=opt
  case "$file" in ref/*) impl=ref ;; esac
  log="$tmp/p2p$id.log"
  RS_MUTANT=$id "$bin" p2p check --impl "$impl" --seed 11 --cases "$pmax" --quiet \
    --regress-dir "$tmp/p2preg$id" >"$log" 2>&1 </dev/null
  rc=$?
  n=$(grep -m1 -oE '^FAIL [a-z0-9_]+ \(case [0-9]+' "$log" | grep -oE '[0-9]+$')
  if [ $rc -eq 1 ] && grep -q "replay: reshard p2p run" "$log"; then
    caught=$((caught + 1))
    printf 'mutant %-4s (p2p %s) caught after %s cases: %s\n' "$id" "$impl" "${n:-?}" \
      "$(grep -m1 -E '^FAIL' "$log" | cut -c1-140)"
  else
    survived=$((survived + 1))
    printf 'mutant %-4s (p2p %s) SURVIVED (exit %d)\n' "$id" "$impl" "$rc"
    tail -n 5 "$log"
  fi
done < <(grep -E '^\| *4[0-4][0-9] *\|' "$top/opt/p2p/MUTANTS.md")
# ---- end of the p2p block ----
rm -rf "$tmp"
echo "mutation self-test: $caught caught, $survived survived"
[ $survived -eq 0 ] && [ $caught -gt 0 ]
