#!/usr/bin/env bash
# opt_copy_paths.sh RESHARD [SOURCE_TREE] - opt's streaming-store and slab copy paths on generated
# cases. Those paths normally start at 2 MiB views and 8 MiB batches, which no property campaign
# draws; RS_OPT_COPY_PATHS=small lowers their thresholds to a few bytes, so this campaign runs every
# local copy, pack and unpack of `reshard check --impl opt` through them (seed 11, RS_COPY_PATHS_CASES
# cases, default 2000) and fails with the campaign's shrunk counterexample on any wrong bit.
# ci/mutation.sh runs it for the planted bugs of those paths (opt/MUTANTS.md rows naming this script).
set -u
bin=$1
cases=${RS_COPY_PATHS_CASES:-2000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
RS_OPT_COPY_PATHS=small "$bin" check --impl opt --seed 11 --cases "$cases" --max-failures 1 --quiet \
  --regress-dir "$work/regressions" >"$work/log" 2>&1
rc=$?
tail -n 4 "$work/log"
if [ $rc -ne 0 ]; then
  grep -m2 -A1 -E '^FAIL' "$work/log"
  echo "opt_copy_paths: FAIL (exit $rc)"
  exit 1
fi
echo "opt_copy_paths: $cases cases through the streaming and slab copy paths passed"
