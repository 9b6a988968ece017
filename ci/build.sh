#!/usr/bin/env bash
# build.sh DIR [cmake options...] - configure and build one build tree (2 jobs); the log is shown
# only when the build fails.
set -euo pipefail
dir=$1; shift
top=$(cd "$(dirname "$0")/.." && pwd)
log="$top/$dir.build.log"
echo "== build $dir $*"
if ! { cmake -S "$top" -B "$top/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRS_WERROR=ON "$@" &&
       cmake --build "$top/$dir" -j2; } >"$log" 2>&1; then
  tail -n 60 "$log"
  echo "build $dir failed (full log: $log)"
  exit 1
fi
