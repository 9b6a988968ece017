#!/usr/bin/env bash
# main.sh - the README's main job: installs what is missing, builds, and runs the property campaign
# of opt against ref against the oracle (one worker process per core, --jobs auto), falling back to ref against the oracle
# when opt is not built. Extra arguments go to `reshard check` (e.g. --seconds 600, --seed 9).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash ci/deps.sh
bash ci/build.sh build
if build/reshard check --impl opt --cases 1 --quiet >/dev/null 2>&1; then
  exec build/reshard check --impl opt --cases 100000 --jobs auto "$@"
fi
exec build/reshard check --cases 100000 --jobs auto "$@"
