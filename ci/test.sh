#!/usr/bin/env bash
# test.sh - the README's test command: installs what is missing, builds, and runs every test:
#   1. release build (-Werror, CUDA when nvcc exists): ctest, the ref campaign (100,000 cases),
#      opt beside ref in-process (100,000) and under mpirun with 4 and 8 ranks (10,000 each);
#   2. ASan+UBSan build: ctest and a shorter campaign;
#   3. coverage + mutation build: ctest and a campaign for line coverage of core/ ref/ oracle/ props/ opt/ tools/
#      (lcov), then every planted bug must be caught by `reshard check`.
# Environment: RS_CASES (default 100000) scales the campaigns; RS_SKIP_SAN=1, RS_SKIP_COV=1 skip stages.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash ci/deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
CASES=${RS_CASES:-100000}
out="$top/out"
mkdir -p "$out"
t0=$(date +%s)
stage() { echo; echo "=== $* ($(( $(date +%s) - t0 ))s)"; }

stage "release build"
bash ci/build.sh build
R=build/reshard

stage "unit tests"
(cd build && ctest --output-on-failure -j2 --timeout 600)

stage "ref vs oracle campaign: $CASES cases"
$R check --seed 1 --cases "$CASES" --quiet --junit "$out/ref.junit.xml" --json "$out/ref.json" \
  --regress-dir "$out/regressions"

if $R check --help 2>&1 | grep -q -- "--impl"; then
  if $R check --impl opt --seed 2 --cases 100 --quiet >/dev/null 2>&1; then
    stage "opt vs ref vs oracle in-process: $CASES cases"
    $R check --impl opt --seed 2 --cases "$CASES" --quiet --junit "$out/opt.junit.xml" \
      --regress-dir "$out/regressions"
    for np in 4 8; do
      stage "opt over MPI, $np ranks"
      mpirun --oversubscribe -np "$np" $R check --impl opt --transport mpi --seed 3 \
        --cases $(( CASES / 10 )) --quiet --regress-dir "$out/regressions"
    done
  else
    echo "opt is not available in this build; skipping the opt campaigns"
  fi
fi

# ---- ckpt: distributed checkpoints (save N ranks / load M ranks, integrity under faults) ----
# ctest (above and in the ASan build below) already ran ckpt_cli, ckpt_torture (100 SIGKILLs) and
# test_ckpt_faults (1200 byte flips, 26 hostile checkpoints). Here: the property campaign (20,000
# cases at the default RS_CASES), a longer torture, and the safetensors interop test.
CKPT_CASES=$(( CASES / 5 ))
stage "ckpt: property campaign ($CKPT_CASES cases) beside the torture and the safetensors interop test"
# the campaign is single-threaded: it runs on one core while the other does the rest
$R ckpt check --seed 1 --cases "$CKPT_CASES" --quiet --regress-dir "$out/ckpt-regressions" \
  --junit "$out/ckpt.junit.xml" --json "$out/ckpt.json" >"$out/ckpt-check.log" 2>&1 &
ckpt_pid=$!
$R ckpt torture --kills 300 --seed 2
[ -x build/ckpt-venv/bin/python ] || python3 -m venv build/ckpt-venv
build/ckpt-venv/bin/python -c "import numpy, safetensors" 2>/dev/null ||
  build/ckpt-venv/bin/pip install -q numpy safetensors
bash tests/ckpt_interop.sh "$R" "$top" build/ckpt-venv/bin/python
ckpt_rc=0
wait "$ckpt_pid" || ckpt_rc=$?
cat "$out/ckpt-check.log"
[ "$ckpt_rc" -eq 0 ] || { echo "ckpt check failed (exit $ckpt_rc)"; exit 1; }
stage "ckpt: libFuzzer targets (metadata.json, safetensors header, state spec), ${RS_FUZZ_CKPT_SECONDS:-10}s each"
RS_FUZZ_TARGETS="fuzz_ckpt_metadata fuzz_ckpt_safetensors fuzz_ckpt_state_spec" \
  RS_FUZZ_SECONDS=${RS_FUZZ_CKPT_SECONDS:-10} bash ci/fuzz.sh
# ---- end ckpt ----

if [ "${RS_SKIP_SAN:-0}" != 1 ]; then
  stage "ASan+UBSan build"
  bash ci/build.sh build-asan -DRS_SANITIZE=ON -DRS_WITH_CUDA=OFF
  # Open MPI's own allocations are reported as leaks by LSan: MPI tests run without leak checks
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j2 --timeout 900 -E mpi)
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j2 --timeout 900 -R mpi)
  build-asan/reshard check --seed 4 --cases $(( CASES / 10 )) --quiet --regress-dir "$out/regressions"
  # ckpt under ASan+UBSan: a short checkpoint campaign (its ctest ran above)
  build-asan/reshard ckpt check --seed 4 --cases $(( CASES / 200 )) --quiet --regress-dir "$out/ckpt-regressions"
fi

if [ "${RS_SKIP_COV:-0}" != 1 ]; then
  stage "coverage + mutation build"
  bash ci/build.sh build-cov -DRS_COVERAGE=ON -DRS_MUTATION=ON -DRS_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
  (cd build-cov && ctest --output-on-failure -j2 --timeout 900 >/dev/null) || (cd build-cov && ctest --output-on-failure --timeout 900)
  build-cov/reshard check --seed 5 --cases $(( CASES / 4 )) --quiet --regress-dir "$out/regressions" \
    --junit "$out/cov.junit.xml" --json "$out/cov.json"
  build-cov/reshard check --impl opt --planner graph --seed 6 --cases 5000 --quiet --regress-dir "$out/regressions"
  for f in fixtures/curated/*.json; do build-cov/reshard run "$f" >/dev/null; done
  stage "mutation self-test"
  bash ci/mutation.sh build-cov/reshard
  stage "line coverage (unit tests, campaigns, fixtures, mutation runs)"
  bash ci/coverage.sh build-cov
fi
stage "all tests passed"
