#!/usr/bin/env bash
# builds.sh - the build matrix: a user's build type or compiler must never break the build, so the
# code is built warning-free (-DRS_WERROR=ON; -Werror is CI's choice, a user's build has it off):
#   gcc   Debug (-O0) and RelWithDebInfo (-O2): library + CLI (ci/test.sh builds every target at
#         these levels anyway: the coverage tree at -O0, the release tree at -O2);
#   gcc   Release (-O3): every target (library, CLI, tests, benchmarks), where GCC 12's
#         maybe-uninitialized warnings appear;
#   clang Release (-O3): every target, and its unit tests run.
# RS_BUILDS_FULL=1 builds every target everywhere and adds gcc -O1 and clang -O0.
# One tree at a time, 2 jobs, CUDA off (the CUDA build is ci/gpu.sh's). Trees go to
# $RS_BUILDS_DIR (default build-matrix/) and are removed after each one unless RS_KEEP_BUILDS=1.
# RS_BUILDS_NO_TESTS=1 only builds, and keeps the trees: ci/test.sh runs that in the background, at
# nice 19, while earlier stages wait on timeouts; its own later call then finds the trees built,
# runs the clang tree's tests and removes them.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
base=${RS_BUILDS_DIR:-$top/build-matrix}
t0=$(date +%s)
ok=0
one() { # one NAME CC BUILD_TYPE [extra cmake args...] ; RUN_TESTS=1 runs ctest, TARGETS="a b" limits the build
  local name=$1 cc=$2 bt=$3; shift 3
  local dir="$base/$name" log="$base/$name.log" s=$(date +%s)
  mkdir -p "$base"
  if ! command -v "$cc" >/dev/null; then echo "== $name: $cc not installed"; return 1; fi
  if ! { CC=$cc cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE="$bt" -DRS_WERROR=ON -DRS_WITH_CUDA=OFF "$@" &&
         cmake --build "$dir" -j2 ${TARGETS:+--target $TARGETS}; } >"$log" 2>&1; then
    grep -E "error|warning" "$log" | head -n 30 || tail -n 30 "$log"
    echo "== $name: build FAILED (log: $log)"
    return 1
  fi
  if [ "${RUN_TESTS:-0}" = 1 ] && [ "${RS_BUILDS_NO_TESTS:-0}" != 1 ]; then
    # (reports: the same pages the release and mutation trees already screenshot; label source: reads
    # only the source tree; label jobs: the runner's process tests, run by the release, ASan and
    # coverage trees)
    if ! (cd "$dir" && ctest -j2 --timeout 600 -E "^reports$" -LE "source|jobs" --output-on-failure >>"$log" 2>&1); then
      tail -n 40 "$log"
      echo "== $name: unit tests FAILED (log: $log)"
      return 1
    fi
  fi
  echo "== $name ($cc $bt $*${TARGETS:+, targets $TARGETS}): ok in $(( $(date +%s) - s ))s"
  [ "${RS_KEEP_BUILDS:-0}" = 1 ] || [ "${RS_BUILDS_NO_TESTS:-0}" = 1 ] || rm -rf "$dir"
  ok=$((ok + 1))
}
lib_cli="reshard"
[ "${RS_BUILDS_FULL:-0}" = 1 ] && lib_cli=""
TARGETS=$lib_cli one gcc-O0 gcc Debug
TARGETS=$lib_cli one gcc-O2 gcc RelWithDebInfo
one gcc-O3 gcc Release
RUN_TESTS=1 one clang-O3 clang Release
if [ "${RS_BUILDS_FULL:-0}" = 1 ]; then
  one gcc-O1 gcc None -DCMAKE_C_FLAGS=-O1
  one clang-O0 clang Debug
fi
want=4
[ "${RS_BUILDS_FULL:-0}" = 1 ] && want=6
echo "build matrix: $ok of $want builds warning-free in $(( $(date +%s) - t0 ))s"
[ "$ok" -eq "$want" ]
