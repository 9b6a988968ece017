#!/usr/bin/env bash
# mutation.sh RESHARD - the mutation self-test. Every planted bug listed in a */MUTANTS.md table
# (rows "| id | file | what it breaks | caught after | [run with] |") is switched on with RS_MUTANT=id
# and must be caught:
#   - by default through `reshard check` (--impl ref for ref/'s table, --impl opt for the others, so
#     the opt properties and the transport byte counts run too), seed 11, at most 2,000 cases,
#     stopping at the first failure: caught = exit 1 with a shrunk counterexample and its replay
#     command, or a failed feature-coverage check (a generator that stopped producing something);
#   - or, when the row's 5th column names a test binary (e.g. test_props_shrink), by that unit test
#     failing (harness code that no campaign can see fail on its own, like the shrinker);
#   - or, when it says mpi4, by `reshard check --transport mpi` under mpirun -np 4 (MPI transport).
# Prints, per mutant, the number of cases until caught (the JSON report's first_failure_case), then
# the kill rate and the median number of cases to catch one. Fails if any bug survives.
# The checkpoint bugs of ref/ckpt/MUTANTS.md (ids 300-349) run through `reshard ckpt check` the
# same way (their own block below).
# RS_MUTANT_CASES (default 2000) bounds each campaign; RS_MUTANT_ONLY="id id ..." runs a subset.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$1
tests=$(cd "$(dirname "$bin")" && pwd)/tests
max=${RS_MUTANT_CASES:-2000}
tmp=$(mktemp -d)
survived=0; caught=0; counts=()
t0=$(date +%s)
printf '%-5s %-6s %-8s %8s  %s\n' id table verdict cases "first failure"
for f in "$top"/*/MUTANTS.md; do
  [ -f "$f" ] || continue
  layer=$(basename "$(dirname "$f")")
  impl=opt
  [ "$layer" = ref ] && impl=ref
  # rows "| id | file | what | caught after | [runner] |": id and the optional 5th cell
  while IFS='|' read -r _ id _ _ _ runner _; do
    id=$(echo "$id" | tr -dc '0-9'); runner=$(echo "${runner:-}" | tr -d ' `')
    [ -n "$id" ] || continue
    if [ -n "${RS_MUTANT_ONLY:-}" ] && ! echo " $RS_MUTANT_ONLY " | grep -q " $id "; then continue; fi
    log="$tmp/m$id.log"
    if [ "$runner" = mpi4 ]; then
      # the MPI transport: 4 processes, one per rank (bugs only a real transport has)
      RS_MUTANT=$id mpirun --oversubscribe --allow-run-as-root -np 4 "$bin" check --impl opt --transport mpi \
        --seed 11 --cases "$max" --max-failures 1 --quiet --regress-dir "$tmp/reg$id" --json "$tmp/m$id.json" >"$log" 2>&1 </dev/null
      rc=$?
      n=$(grep -oE '"first_failure_case":[[:space:]]*[0-9]+' "$tmp/m$id.json" 2>/dev/null | grep -oE '[0-9]+$')
      if [ $rc -ne 0 ] && grep -qE "reshard replay|^FAIL" "$log"; then verdict=caught; else verdict=SURVIVED; n="-"; fi
      what="mpirun -np 4: $(grep -m1 -A1 -E '^FAIL' "$log" | tr '\n' ' ' | cut -c1-90)"
    elif [ -n "$runner" ]; then
      RS_MUTANT=$id "$tests/$runner" "$top" >"$log" 2>&1 </dev/null
      rc=$?
      if [ $rc -ne 0 ]; then verdict=caught; n="-"; else verdict=SURVIVED; n="-"; fi
      what="$runner failed: $(grep -m1 -E 'CHECK failed|FAIL' "$log" | cut -c1-90)"
    else
      RS_MUTANT=$id "$bin" check --impl "$impl" --seed 11 --cases "$max" --max-failures 1 --quiet \
        --regress-dir "$tmp/reg$id" --junit "$tmp/m$id.xml" --json "$tmp/m$id.json" >"$log" 2>&1 </dev/null
      rc=$?
      n=$(grep -oE '"first_failure_case":[[:space:]]*[0-9]+' "$tmp/m$id.json" 2>/dev/null | grep -oE '[0-9]+$')
      if [ $rc -eq 1 ] && grep -qE "reshard replay|FAIL feature coverage" "$log"; then
        verdict=caught
        what=$(grep -m1 -A1 -E '^FAIL' "$log" | tr '\n' ' ' | cut -c1-110)
      else
        verdict=SURVIVED; n="-"; what="exit $rc"
      fi
    fi
    if [ "$verdict" = caught ]; then
      caught=$((caught + 1))
      [ "$n" != "-" ] && [ -n "$n" ] && counts+=("$n")
    else
      survived=$((survived + 1))
      tail -n 5 "$log"
    fi
    printf '%-5s %-6s %-8s %8s  %s\n' "$id" "$layer" "$verdict" "${n:--}" "$what"
  done < <(grep -E '^\| *[0-9]+ *\|' "$f")
done

# ---- ckpt: planted checkpoint bugs (ids 300-349, ref/ckpt/MUTANTS.md) run through `reshard ckpt check` ----
if [ -f "$top/ref/ckpt/MUTANTS.md" ]; then
  for id in $(grep -oE '^\| *3[0-4][0-9] *\|' "$top/ref/ckpt/MUTANTS.md" | tr -dc '0-9\n'); do
    if [ -n "${RS_MUTANT_ONLY:-}" ] && ! echo " $RS_MUTANT_ONLY " | grep -q " $id "; then continue; fi
    log="$tmp/ckpt$id.log"
    RS_MUTANT=$id "$bin" ckpt check --seed 11 --cases "$max" --shrink-runs 200 --quiet --regress-dir "$tmp/ckreg$id" \
      >"$log" 2>&1 </dev/null
    rc=$?
    n=$(grep -m1 -oE '^FAIL [a-z_]+ \(case [0-9]+' "$log" | grep -oE '[0-9]+$')
    if [ $rc -eq 1 ] && grep -q "reshard ckpt replay" "$log"; then
      caught=$((caught + 1))
      [ -n "$n" ] && counts+=("$n")
      what=$(grep -m1 -A1 -E '^FAIL' "$log" | tr '\n' ' ' | cut -c1-110)
      printf '%-5s %-6s %-8s %8s  %s\n' "$id" ckpt caught "${n:--}" "$what"
    else
      survived=$((survived + 1))
      printf '%-5s %-6s %-8s %8s  %s\n' "$id" ckpt SURVIVED - "exit $rc"
      tail -n 5 "$log"
    fi
  done
fi
# ---- end ckpt ----

rm -rf "$tmp"
total=$((caught + survived))
median=-
if [ ${#counts[@]} -gt 0 ]; then
  median=$(printf '%s\n' "${counts[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
fi
echo "mutation self-test: $caught of $total caught (kill rate $(awk -v c=$caught -v t=$total 'BEGIN{printf "%.1f", t ? 100*c/t : 0}')%)," \
  "median $median cases to catch (over ${#counts[@]} campaign-caught mutants), $(( $(date +%s) - t0 )) s"
[ $survived -eq 0 ] && [ $caught -gt 0 ]
