#!/usr/bin/env bash
# fuzz.sh - builds the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined; tests/fuzz/)
# and runs each for a bounded time from its seed corpus (fixtures/fuzz/<target>/), failing on any
# crash, sanitizer report, leak or timeout. Crash inputs land in $RS_FUZZ_OUT (default out/fuzz/):
# copy each into fixtures/fuzz/<target>/ once fixed, so it is replayed from then on.
# Environment: RS_FUZZ_SECONDS per target (default 35), RS_FUZZ_DIR build tree (build-fuzz),
# RS_FUZZ_TARGETS a subset of the targets.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
secs=${RS_FUZZ_SECONDS:-35}
dir=${RS_FUZZ_DIR:-$top/build-fuzz}
out=${RS_FUZZ_OUT:-$top/out/fuzz}
command -v clang >/dev/null || { echo "fuzz.sh: clang is required (ci/deps.sh installs it)"; exit 1; }
mkdir -p "$out"
# RS_FUZZ_TARGETS picks a subset (ci/test.sh runs the checkpoint targets in its ckpt block)
targets=${RS_FUZZ_TARGETS:-"fuzz_case_json fuzz_cli_text fuzz_expected fuzz_ckpt_metadata fuzz_ckpt_safetensors fuzz_ckpt_state_spec"}
log="$out/build.log"
if ! { CC=clang cmake -S "$top" -B "$dir" -DRS_FUZZ=ON -DRS_WERROR=ON -DRS_WITH_CUDA=OFF -DRS_WITH_MPI=OFF \
         -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$dir" -j2 --target $targets; } >"$log" 2>&1; then
  tail -n 40 "$log"; echo "fuzz.sh: build failed (log: $log)"; exit 1
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
bad=0
for t in $targets; do
  seeds="$top/fixtures/fuzz/$t"
  work="$dir/corpus/$t"   # grows while fuzzing; the seeds stay as committed
  mkdir -p "$work"
  dict="$top/tests/fuzz/json.dict"
  [ "$t" = fuzz_cli_text ] && dict="$top/tests/fuzz/text.dict"
  echo "== $t: ${secs}s from $(ls "$seeds" | wc -l) seeds"
  # -fork is not used: one process, so a crash stops the run at once with its input saved
  if ! "$dir/tests/fuzz/$t" "$work" "$seeds" -dict="$dict" -max_total_time="$secs" -max_len=4096 \
       -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$out/$t-" >"$out/$t.log" 2>&1; then
    bad=$((bad + 1))
    grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$out/$t.log" | head -n 20
    echo "== $t: FAILED (log: $out/$t.log)"
  else
    grep -E "stat::number_of_executed_units|cov:" "$out/$t.log" | tail -n 2 | tr '\n' ' '; echo
  fi
done
[ $bad -eq 0 ] && echo "fuzz: 0 crashes in $(echo $targets | wc -w) targets x ${secs}s"
exit $bad
