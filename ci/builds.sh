#!/usr/bin/env bash
# builds.sh - the build matrix: a user's build type or compiler must never break the build, so the
# library, the CLI and the tests are built warning-free (-DRS_WERROR=ON) with
#   gcc   Debug (-O0), RelWithDebInfo (-O2), Release (-O3), and -O1 through CMAKE_C_FLAGS;
#   clang Debug (-O0) and Release (-O3), whose unit tests then run.
# One tree at a time, 2 jobs, CUDA off (the CUDA build is ci/gpu.sh's), benchmarks included since
# they are part of the default build. Trees go to $RS_BUILDS_DIR (default build-matrix/) and are
# removed after each one unless RS_KEEP_BUILDS=1.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
base=${RS_BUILDS_DIR:-$top/build-matrix}
t0=$(date +%s)
ok=0
one() { # one NAME CC BUILD_TYPE [extra cmake args...] ; RUN_TESTS=1 runs ctest
  local name=$1 cc=$2 bt=$3; shift 3
  local dir="$base/$name" log="$base/$name.log" s=$(date +%s)
  mkdir -p "$base"
  if ! command -v "$cc" >/dev/null; then echo "== $name: $cc not installed"; return 1; fi
  if ! { CC=$cc cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE="$bt" -DRS_WERROR=ON -DRS_WITH_CUDA=OFF "$@" &&
         cmake --build "$dir" -j2; } >"$log" 2>&1; then
    grep -E "error|warning" "$log" | head -n 30 || tail -n 30 "$log"
    echo "== $name: build FAILED (log: $log)"
    return 1
  fi
  if [ "${RUN_TESTS:-0}" = 1 ]; then
    if ! (cd "$dir" && ctest -j2 --timeout 600 --output-on-failure >>"$log" 2>&1); then
      tail -n 40 "$log"
      echo "== $name: unit tests FAILED (log: $log)"
      return 1
    fi
  fi
  echo "== $name ($cc $bt $*): ok in $(( $(date +%s) - s ))s"
  [ "${RS_KEEP_BUILDS:-0}" = 1 ] || rm -rf "$dir"
  ok=$((ok + 1))
}
one gcc-O0 gcc Debug
one gcc-O2 gcc RelWithDebInfo
one gcc-O3 gcc Release
one gcc-O1 gcc None -DCMAKE_C_FLAGS=-O1
RUN_TESTS=1 one clang-O3 clang Release
one clang-O0 clang Debug
echo "build matrix: $ok builds warning-free in $(( $(date +%s) - t0 ))s"
