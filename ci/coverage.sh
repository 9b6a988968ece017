#!/usr/bin/env bash
# coverage.sh BUILD_DIR - line coverage of core/ ref/ oracle/ props/ opt/ tools/ from a --coverage
# build that has run its tests; prints the per-directory figures, writes out/coverage.info, and
# fails when the total is below RS_COV_MIN percent (default 90). opt/cuda/ (kernels, or the stub
# when nvcc is absent) is left out: a CPU-only CI cannot execute it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bdir="$top/$1"
dirs="core ref oracle props opt tools"
mkdir -p "$top/out"
lcov --quiet --capture --directory "$bdir" --base-directory "$top" --output-file "$top/out/coverage.all.info" \
  --ignore-errors mismatch,gcov,source 2>/dev/null ||
  lcov --quiet --capture --directory "$bdir" --output-file "$top/out/coverage.all.info"
pats=()
for d in $dirs; do pats+=("$top/$d/*"); done
lcov --quiet --extract "$top/out/coverage.all.info" "${pats[@]}" --output-file "$top/out/coverage.sel.info"
lcov --quiet --remove "$top/out/coverage.sel.info" "$top/opt/cuda/*" --output-file "$top/out/coverage.info" \
  --ignore-errors unused 2>/dev/null ||
  lcov --quiet --remove "$top/out/coverage.sel.info" "$top/opt/cuda/*" --output-file "$top/out/coverage.info"
for d in $dirs; do
  lcov --quiet --extract "$top/out/coverage.info" "$top/$d/*" --output-file "$top/out/cov.$d.info" >/dev/null 2>&1 || true
  printf '%-7s ' "$d/"; lcov --summary "$top/out/cov.$d.info" 2>&1 | grep -E "lines" || echo "no data"
done
# ---- ckpt: the checkpoint layer's own line (its files are inside the directories above, so the
# total gate covers them) ----
lcov --quiet --extract "$top/out/coverage.info" "$top/core/ckpt/*" "$top/ref/ckpt/*" "$top/oracle/ckpt.c" \
  "$top/props/ckpt*" "$top/tools/cmd_ckpt.c" --output-file "$top/out/cov.ckpt.info" >/dev/null 2>&1 || true
printf '%-7s ' "ckpt"; lcov --summary "$top/out/cov.ckpt.info" 2>&1 | grep -E "lines" || echo "no data"
total=$(lcov --summary "$top/out/coverage.info" 2>&1 | grep -E "lines")
printf 'total   %s\n' "$total"
pct=$(echo "$total" | grep -oE '[0-9]+\.[0-9]+%' | head -1 | tr -d '%')
min=${RS_COV_MIN:-90}
if awk -v p="$pct" -v m="$min" 'BEGIN { exit !(p < m) }'; then
  echo "line coverage ${pct}% is below the ${min}% target"
  exit 1
fi
