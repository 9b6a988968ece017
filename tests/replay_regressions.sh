#!/usr/bin/env bash
# replay_regressions.sh RESHARD DIR - every shrunk failure ever saved in DIR (fixtures/regressions)
# must pass now: each file is a bug this project found, kept as a fixture.
set -u
bin=$1 dir=$2 n=0 bad=0
for f in "$dir"/*.json; do
  [ -e "$f" ] || continue
  n=$((n + 1))
  if ! out=$("$bin" replay "$f" 2>&1); then
    bad=$((bad + 1))
    echo "FAIL $f"
    echo "$out" | tail -n 5
  fi
done
echo "regressions: $n replayed, $bad failing"
[ "$n" -gt 0 ] && [ "$bad" -eq 0 ]
