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
#   - or, when it names a tests/*.sh script (e.g. cli_hostile.sh), by that script failing when given
#     the reshard binary and the source tree (bugs only the CLI shows: exit codes, replay's impl);
#     "conform.sh:4,7b" runs only those numbered parts of a script that has them (RS_TEST_PARTS);
#   - or, when it says mpi4, by `reshard check --transport mpi` under mpirun -np 4 (MPI transport;
#     mpi4cma: the same with RS_MPI_CMA_MIN=0, every node-peer message on the single-copy path);
#   - or, when it says features, by the feature-coverage check of a campaign that runs only the
#     cheap `boxes` property (a generator bug: no property can fail, only the coverage count).
# Every run is bounded by RS_MUTANT_TIMEOUT seconds (default 120; a run that times out survives).
# Prints, per mutant, the number of cases until caught (the JSON report's first_failure_case), then
# the kill rate and the median number of cases to catch one. Fails if any bug survives.
# RS_MUTANT_CASES (default 2000) bounds each campaign; RS_MUTANT_ONLY="id id ..." runs a subset,
# RS_MUTANT_SHARD=k/n the ids equal to k modulo n, RS_MUTANT_CLAIM=DIR the ids no other run sharing
# DIR has taken yet (a work queue: see skip_id);
# RS_MUTANT_ARGS adds generator flags to every campaign (e.g. the old generator's bounds
# "--max-mesh-dims 4 --max-tensor-dims 4 --max-numel 4096 --max-dim 40": which bugs survive them).
# Then the feature blocks below: core/tp/MUTANTS.md through `reshard tp check`,
# opt/p2p/MUTANTS.md through `reshard p2p check`, ref/ckpt/MUTANTS.md through `reshard ckpt check`,
# and opt/ckpt/MUTANTS.md through `reshard ckpt check --impl opt` (the ckpt_opt cross property).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$1
tests=$(cd "$(dirname "$bin")" && pwd)/tests
max=${RS_MUTANT_CASES:-2000}
limit=${RS_MUTANT_TIMEOUT:-120}
read -r -a extra <<<"${RS_MUTANT_ARGS:-}"
tmp=$(mktemp -d)
# skip_id ID: 0 when this run takes the planted bug ID (RS_MUTANT_ONLY lists ids; RS_MUTANT_SHARD=k/n
# takes the ids with ID % n == k, so ci/test.sh runs two shards at once, one per core)
skip_id() {
  if [ -n "${RS_MUTANT_ONLY:-}" ] && ! echo " $RS_MUTANT_ONLY " | grep -q " $1 "; then return 0; fi
  if [ -n "${RS_MUTANT_SHARD:-}" ] && [ $(( $1 % ${RS_MUTANT_SHARD#*/} )) -ne "${RS_MUTANT_SHARD%/*}" ]; then return 0; fi
  # RS_MUTANT_CLAIM=DIR: several runs of this script share the ids as a queue; each walks them in the
  # same order and takes an id by creating DIR/ID (mkdir is atomic), so a free run always takes the
  # next id and the runs end within one mutant's time of each other (ci/test.sh runs one per core)
  if [ -n "${RS_MUTANT_CLAIM:-}" ] && ! mkdir "$RS_MUTANT_CLAIM/$1" 2>/dev/null; then return 0; fi
  return 1
}
# the tests/*.sh runners stop at their first failing check (RS_TEST_FAIL_FAST=1, read by their
# fail functions): a planted bug is caught by one failure, the checks after it would only cost time
export RS_TEST_FAIL_FAST=1
survived=0; caught=0; counts=()
t0=$(date +%s)
printf '%-5s %-6s %-8s %8s %5s  %s\n' id table verdict cases s "first failure"
for f in "$top"/*/MUTANTS.md; do
  [ -f "$f" ] || continue
  layer=$(basename "$(dirname "$f")")
  impl=opt
  [ "$layer" = ref ] && impl=ref
  # rows "| id | file | what | caught after | [runner] |": id and the optional 5th cell
  while IFS='|' read -r _ id _ _ _ runner _; do
    id=$(echo "$id" | tr -dc '0-9'); runner=$(echo "${runner:-}" | tr -d ' `')
    [ -n "$id" ] || continue
    # "script.sh:4,7b": only those numbered parts of the script run (RS_TEST_PARTS; tests/conform.sh)
    parts=""
    case "$runner" in *.sh:*) parts=${runner#*.sh:}; parts=${parts//,/ }; runner=${runner%%:*} ;; esac
    if skip_id "$id"; then continue; fi
    log="$tmp/m$id.log"
    m0=$(date +%s)
    if [ "$runner" = mpi4 ] || [ "$runner" = mpi4cma ]; then
      # the MPI transport: 4 processes, one per rank (bugs only a real transport has); mpi4cma: every
      # message between node peers takes the single-copy path (RS_MPI_CMA_MIN=0)
      cma_min=${RS_MPI_CMA_MIN:-}; [ "$runner" = mpi4cma ] && cma_min=0
      RS_MPI_CMA_MIN=$cma_min RS_MUTANT=$id timeout "$limit" mpirun --oversubscribe --allow-run-as-root -np 4 "$bin" check --impl opt --transport mpi "${extra[@]}" \
        --seed 11 --cases "$max" --max-failures 1 --quiet --regress-dir "$tmp/reg$id" --json "$tmp/m$id.json" >"$log" 2>&1 </dev/null
      rc=$?
      n=$(grep -oE '"first_failure_case":[[:space:]]*[0-9]+' "$tmp/m$id.json" 2>/dev/null | grep -oE '[0-9]+$')
      if [ $rc -ne 0 ] && grep -qE "reshard replay|^FAIL" "$log"; then verdict=caught; else verdict=SURVIVED; n="-"; fi
      what="mpirun -np 4: $(grep -m1 -A1 -E '^FAIL' "$log" | tr '\n' ' ' | cut -c1-90)"
    elif [ "$runner" = features ]; then
      RS_MUTANT=$id timeout "$limit" "$bin" check --properties boxes "${extra[@]}" --seed 11 --cases "$max" --quiet \
        --regress-dir "$tmp/reg$id" --json "$tmp/m$id.json" >"$log" 2>&1 </dev/null
      rc=$?
      n=$(grep -oE '"first_failure_case":[[:space:]]*[0-9]+' "$tmp/m$id.json" 2>/dev/null | grep -oE '[0-9]+$')
      if [ $rc -eq 1 ] && grep -q "FAIL feature coverage" "$log"; then verdict=caught; else verdict=SURVIVED; n="-"; fi
      what=$(grep -m1 -E '^FAIL' "$log" | cut -c1-110)
    elif [ "${runner%.sh}" != "$runner" ]; then
      # a CLI script of tests/ (input-layer bugs only the CLI shows: exit codes, replay's impl)
      RS_TEST_PARTS=$parts RS_MUTANT=$id bash "$top/tests/$runner" "$bin" "$top" >"$log" 2>&1 </dev/null
      rc=$?
      if [ $rc -ne 0 ]; then verdict=caught; n="-"; else verdict=SURVIVED; n="-"; fi
      what="$runner failed: $(grep -m1 -E 'FAIL' "$log" | cut -c1-90)"
    elif [ -n "$runner" ]; then
      RS_MUTANT=$id timeout "$limit" "$tests/$runner" "$top" >"$log" 2>&1 </dev/null
      rc=$?
      if [ $rc -ne 0 ]; then verdict=caught; n="-"; else verdict=SURVIVED; n="-"; fi
      what="$runner failed: $(grep -m1 -E 'CHECK failed|FAIL|expected' "$log" | cut -c1-90)"
    else
      RS_MUTANT=$id timeout "$limit" "$bin" check --impl "$impl" "${extra[@]}" --seed 11 --cases "$max" --max-failures 1 --quiet \
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
    printf '%-5s %-6s %-8s %8s %5s  %s\n' "$id" "$layer" "$verdict" "${n:--}" "$(( $(date +%s) - m0 ))" "$what"
  done < <(grep -E '^\| *[0-9]+ *\|' "$f")
done

# ---- tensor-parallel styles (core/tp/MUTANTS.md) ----
# Their own campaign: `reshard tp check --impl both` (ref and opt), seed 11, at most
# RS_MUTANT_CASES cases (2,000), must fail with a shrunk counterexample and its replay command
# (`reshard tp run`); "cases" is the campaign's count at the first failure. RS_MUTANT_ONLY applies.
tpf="$top/core/tp/MUTANTS.md"
if [ -f "$tpf" ]; then
  for id in $(grep -oE '^\| *[0-9]+ *\|' "$tpf" | tr -dc '0-9\n'); do
    if skip_id "$id"; then continue; fi
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
# ---- cross-config resharding (reshard p2p): the planted bugs of opt/p2p/MUTANTS.md (ids 400-449) ----
# Each must make `reshard p2p check` (--impl ref for rows whose file is under ref/, opt otherwise;
# seed 11, at most RS_MUTANT_CASES cases) exit 1 with a shrunk model and its replay command.
# Prints the case number of the first failure ("caught after" in the table).
pmax=${RS_MUTANT_CASES:-2000}
while IFS='|' read -r _ id file _ _ _; do
  id=$(echo "$id" | tr -dc '0-9'); file=$(echo "$file" | tr -d ' `')
  [ -n "$id" ] || continue
  if skip_id "$id"; then continue; fi
  impl=opt
  case "$file" in ref/*) impl=ref ;; esac
  log="$tmp/p2p$id.log"
  RS_MUTANT=$id "$bin" p2p check --impl "$impl" --seed 11 --cases "$pmax" --quiet \
    --regress-dir "$tmp/p2preg$id" >"$log" 2>&1 </dev/null
  rc=$?
  n=$(grep -m1 -oE '^FAIL [a-z0-9_]+ \(case [0-9]+' "$log" | grep -oE '[0-9]+$')
  if [ $rc -eq 1 ] && grep -q "replay: reshard p2p run" "$log"; then
    caught=$((caught + 1))
    [ -n "$n" ] && counts+=("$n")
    printf 'mutant %-4s (p2p %s) caught after %s cases: %s\n' "$id" "$impl" "${n:-?}" \
      "$(grep -m1 -E '^FAIL' "$log" | cut -c1-140)"
  else
    survived=$((survived + 1))
    printf 'mutant %-4s (p2p %s) SURVIVED (exit %d)\n' "$id" "$impl" "$rc"
    tail -n 5 "$log"
  fi
done < <(grep -E '^\| *(4[0-4][0-9]|6[5-9][0-9]|9[01][0-9]|93[5-9]) *\|' "$top/opt/p2p/MUTANTS.md")
# ---- end of the p2p block ----
# ---- ckpt: planted checkpoint bugs (ids 300-349, ref/ckpt/MUTANTS.md) run through `reshard ckpt check` ----
if [ -f "$top/ref/ckpt/MUTANTS.md" ]; then
  for id in $(grep -oE '^\| *(3[0-4]|6[0-4])[0-9] *\|' "$top/ref/ckpt/MUTANTS.md" | tr -dc '0-9\n'); do
    if skip_id "$id"; then continue; fi
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
# ---- opt checkpoint mutants (opt/ckpt/MUTANTS.md): the ckpt_opt cross property must catch each ----
if [ -f "$top/opt/ckpt/MUTANTS.md" ]; then
  for id in $(grep -oE '^\| *[0-9]+ *\|' "$top/opt/ckpt/MUTANTS.md" | tr -dc '0-9\n'); do
    if skip_id "$id"; then continue; fi
    log="$tmp/c$id.log"
    dev=()
    if grep -E "^\| *$id *\|" "$top/opt/ckpt/MUTANTS.md" | grep -q RS_SIM_DEVICE; then dev=(--transport local-device); fi
    RS_SIM_DEVICE=${dev:+1} RS_MUTANT=$id "$bin" ckpt check --impl opt "${dev[@]}" --seed 11 --cases 600 --quiet \
      --regress-dir "$tmp/creg$id" --scratch "$tmp/cscratch$id" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 1 ] && grep -q "reshard ckpt replay" "$log"; then
      caught=$((caught + 1))
      printf 'mutant %-4s (ckpt opt) caught: %s\n' "$id" "$(grep -m1 -A1 'FAIL' "$log" | tail -n1 | cut -c1-150)"
    else
      survived=$((survived + 1))
      printf 'mutant %-4s (ckpt opt) SURVIVED (exit %d)\n' "$id" "$rc"
      tail -n 5 "$log"
    fi
  done
fi
# ---- end of the opt checkpoint mutants ----

rm -rf "$tmp"
total=$((caught + survived))
median=-
if [ ${#counts[@]} -gt 0 ]; then
  median=$(printf '%s\n' "${counts[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
fi
echo "mutation self-test: $caught of $total caught (kill rate $(awk -v c=$caught -v t=$total 'BEGIN{printf "%.1f", t ? 100*c/t : 0}')%)," \
  "median $median cases to catch (over ${#counts[@]} campaign-caught mutants), $(( $(date +%s) - t0 )) s"
[ $survived -eq 0 ] && [ $caught -gt 0 ]
