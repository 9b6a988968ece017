#!/usr/bin/env bash
# mutation.sh RESHARD - the mutation self-test: for every planted bug listed in ref/MUTANTS.md and
# opt/MUTANTS.md (table rows "| id | ..."), `reshard check` run with RS_MUTANT=id must fail within
# 2,000 cases and print a shrunk counterexample with its replay command; the same for the
# checkpoint bugs of ref/ckpt/MUTANTS.md through `reshard ckpt check`. Fails if any bug survives.
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

# ---- ckpt: planted checkpoint bugs (ids 300-349, ref/ckpt/MUTANTS.md) run through `reshard ckpt check` ----
if [ -f "$top/ref/ckpt/MUTANTS.md" ]; then
  for id in $(grep -oE '^\| *3[0-4][0-9] *\|' "$top/ref/ckpt/MUTANTS.md" | tr -dc '0-9\n'); do
    log="$tmp/ckpt$id.log"
    RS_MUTANT=$id "$bin" ckpt check --seed 11 --cases 2000 --shrink-runs 200 --quiet --regress-dir "$tmp/ckreg$id" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 1 ] && grep -q "reshard ckpt replay" "$log"; then
      caught=$((caught + 1))
      printf 'mutant %-4s (ckpt) caught: %s\n' "$id" "$(grep -m1 -A1 '^FAIL' "$log" | tail -n 1 | cut -c1-150)"
    else
      survived=$((survived + 1))
      printf 'mutant %-4s (ckpt) SURVIVED (exit %d)\n' "$id" "$rc"
      tail -n 5 "$log"
    fi
  done
fi
# ---- end ckpt ----
# ---- opt checkpoint mutants (opt/ckpt/MUTANTS.md): the ckpt_opt cross property must catch each ----
if [ -f "$top/opt/ckpt/MUTANTS.md" ]; then
  for id in $(grep -oE '^\| *[0-9]+ *\|' "$top/opt/ckpt/MUTANTS.md" | tr -dc '0-9\n'); do
    log="$tmp/c$id.log"
    RS_MUTANT=$id "$bin" ckpt check --impl opt --seed 11 --cases 600 --quiet --regress-dir "$tmp/creg$id" \
      --scratch "$tmp/cscratch$id" >"$log" 2>&1
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
echo "mutation self-test: $caught caught, $survived survived"
[ $survived -eq 0 ] && [ $caught -gt 0 ]
