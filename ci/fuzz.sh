#!/usr/bin/env bash
# fuzz.sh - builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined; the list is
# tests/fuzz/CMakeLists.txt's rs_fuzz_target lines) and runs each for a bounded time from its seed
# corpus (fixtures/fuzz/<target>/), failing on any crash, sanitizer report, leak or timeout. Crash
# inputs land in $RS_FUZZ_OUT (default out/fuzz/): copy each into fixtures/fuzz/<target>/ once
# fixed, so every build replays it from then on (ctest <target>_seeds).
# Environment: RS_FUZZ_SECONDS per target (default 25), RS_FUZZ_DIR build tree (build-fuzz),
# RS_FUZZ_ONLY="target ..." (or RS_FUZZ_TARGETS) runs a subset. RS_FUZZ_SEED (default 1) fixes
# libFuzzer's random seed, so a CI run explores the same inputs as the run that was checked here
# and RS_FUZZ_RUNS (default 150,000 inputs per target, RS_FUZZ_SECONDS a cap) bounds it by inputs, not
# time: a CI run replays exactly the sequence checked before commit. Set another seed or more runs to
# explore further (then keep each crash input as a seed once fixed).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
secs=${RS_FUZZ_SECONDS:-25}
dir=${RS_FUZZ_DIR:-$top/build-fuzz}
out=${RS_FUZZ_OUT:-$top/out/fuzz}
command -v clang >/dev/null || { echo "fuzz.sh: clang is required (ci/deps.sh installs it)"; exit 1; }
mkdir -p "$out"
t0=$(date +%s)
only=${RS_FUZZ_ONLY:-${RS_FUZZ_TARGETS:-}}
log="$out/build.log"
if ! { CC=clang cmake -S "$top" -B "$dir" -DRS_FUZZ=ON -DRS_WERROR=ON -DRS_WITH_CUDA=OFF -DRS_WITH_MPI=OFF \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$dir" -j2 --target rs_fuzz_all; } >"$log" 2>&1; then
  tail -n 40 "$log"; echo "fuzz.sh: build failed (log: $log)"; exit 1
fi
echo "== fuzz targets built in $(( $(date +%s) - t0 ))s"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
bad=0 n=0
# one line per target: NAME DICT SEED_DIR (written by tests/fuzz/CMakeLists.txt)
while read -r t dict seeds; do
  [ -n "$t" ] || continue
  if [ -n "$only" ] && ! echo " $only " | grep -q " $t "; then continue; fi
  n=$((n + 1))
  if [ ! -d "$seeds" ] || [ -z "$(ls -A "$seeds")" ]; then
    echo "== $t: no seed corpus in $seeds"; bad=$((bad + 1)); continue
  fi
  work="$dir/corpus/$t"   # grows while fuzzing; the seeds stay as committed
  mkdir -p "$work"
  echo "== $t: ${secs}s from $(ls "$seeds" | wc -l) seeds"
  # -fork is not used: one process, so a crash stops the run at once with its input saved
  if ! "$dir/tests/fuzz/$t" "$work" "$seeds" -dict="$dict" -seed="${RS_FUZZ_SEED:-1}" -runs="${RS_FUZZ_RUNS:-150000}" -max_total_time="$secs" -max_len=4096 \
       -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$out/$t-" >"$out/$t.log" 2>&1 </dev/null; then
    bad=$((bad + 1))
    grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$out/$t.log" | head -n 20
    echo "== $t: FAILED (log: $out/$t.log)"
  else
    grep -E "stat::number_of_executed_units|cov:" "$out/$t.log" | tail -n 2 | tr '\n' ' '; echo
  fi
done <"$dir/tests/fuzz/fuzz_targets.txt"
[ "$n" -gt 0 ] || { echo "fuzz.sh: no targets listed"; exit 1; }
[ $bad -eq 0 ] && echo "fuzz: 0 crashes in $n targets x ${secs}s ($(( $(date +%s) - t0 ))s in all)"
exit $bad
