#!/usr/bin/env bash
# coverage.sh BUILD_DIR - line coverage of spec/ ref/ oracle/ props/ from a --coverage build that has
# run its tests; prints the per-directory figures and writes out/coverage.info.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bdir="$top/$1"
mkdir -p "$top/out"
lcov --quiet --capture --directory "$bdir" --base-directory "$top" --output-file "$top/out/coverage.all.info" \
  --ignore-errors mismatch,gcov,source 2>/dev/null ||
  lcov --quiet --capture --directory "$bdir" --output-file "$top/out/coverage.all.info"
lcov --quiet --extract "$top/out/coverage.all.info" "$top/spec/*" "$top/ref/*" "$top/oracle/*" "$top/props/*" \
  --output-file "$top/out/coverage.info"
for d in spec ref oracle props; do
  lcov --quiet --extract "$top/out/coverage.info" "$top/$d/*" --output-file "$top/out/cov.$d.info" >/dev/null 2>&1 || true
  printf '%-7s ' "$d/"; lcov --summary "$top/out/cov.$d.info" 2>&1 | grep -E "lines" || echo "no data"
done
printf 'total   '; lcov --summary "$top/out/coverage.info" 2>&1 | grep -E "lines"
