#!/usr/bin/env bash
# test.sh - the README's test command: installs what is missing, builds, and runs every test:
#   1. release build (-Werror, CUDA when nvcc exists): ctest, the ref campaign (100,000 cases),
#      opt beside ref in-process (100,000) and under mpirun with 4 and 8 ranks (10,000 each);
#   2. ASan+UBSan build: ctest and a shorter campaign;
#   3. coverage + mutation build: ctest and a campaign for line coverage of core/ ref/ oracle/ props/ opt/ tools/
#      (lcov), then every planted bug must be caught by `reshard check`.
#   4. input robustness: the build matrix (gcc -O0/-O2/-O3, clang) and the libFuzzer targets.
# Environment: RS_CASES (default 100000) scales the campaigns; RS_SKIP_SAN=1, RS_SKIP_COV=1,
# RS_SKIP_ROBUST=1 skip stages.
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

if [ "${RS_SKIP_SAN:-0}" != 1 ]; then
  stage "ASan+UBSan build"
  bash ci/build.sh build-asan -DRS_SANITIZE=ON -DRS_WITH_CUDA=OFF
  # Open MPI's own allocations are reported as leaks by LSan: MPI tests run without leak checks
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j2 --timeout 900 -E mpi)
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -j2 --timeout 900 -R mpi)
  build-asan/reshard check --seed 4 --cases $(( CASES / 10 )) --quiet --regress-dir "$out/regressions"
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
# ---- input robustness (docs/cli-robustness.md): the build matrix and the fuzz targets ---------------
# Hostile-input, replay and --enumeration tests (test_hostile_input, cli_hostile, cli_enumeration,
# replay_opt_failure, fuzz_*_seeds) already ran in every ctest above; these two stages need their own
# trees. Budget: about 4 minutes on 2 cores (builds.sh ~2 min, fuzz.sh ~20 s build + 3 x 25 s).
# RS_SKIP_ROBUST=1 skips both; RS_FUZZ_SECONDS sets the time per fuzz target.
if [ "${RS_SKIP_ROBUST:-0}" != 1 ]; then
  stage "build matrix: gcc -O0/-O2 library+CLI, gcc -O3 and clang -O3 everything, clang's ctest"
  bash ci/builds.sh
  stage "fuzz: libFuzzer targets (case JSON, CLI text, expected blocks), ${RS_FUZZ_SECONDS:-25}s each"
  RS_FUZZ_OUT="$out/fuzz" bash ci/fuzz.sh
fi

stage "all tests passed"
