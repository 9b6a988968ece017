#!/usr/bin/env bash
# replay_regressions.sh RESHARD DIR - every shrunk failure ever saved in DIR (fixtures/regressions)
# must pass now: each file is a bug this project found, kept as a fixture. Each is replayed the way
# it failed: `reshard replay` reads the file's "impl" and "transport" (an opt failure replays with
# opt; one found by an MPI campaign runs under mpirun with its "world_size" when mpirun exists).
set -u
bin=$1 dir=$2 n=0 bad=0
field() { sed -n "s/.*\"$1\":[[:space:]]*\"\\{0,1\\}\\([A-Za-z0-9_]*\\).*/\\1/p" "$2" | head -n 1; }
for f in "$dir"/*.json; do
  [ -e "$f" ] || continue
  n=$((n + 1))
  impl=$(field impl "$f"); transport=$(field transport "$f"); np=$(field world_size "$f")
  cmd=("$bin" replay "$f")
  if [ "$transport" = mpi ] && [ -n "$np" ] && command -v mpirun >/dev/null; then
    cmd=(mpirun --oversubscribe -np "$np" "$bin" replay "$f")
  fi
  if ! out=$("${cmd[@]}" 2>&1); then
    bad=$((bad + 1))
    echo "FAIL $f (impl ${impl:-default}, transport ${transport:-local})"
    echo "$out" | tail -n 5
  fi
done
echo "regressions: $n replayed, $bad failing"
[ "$n" -gt 0 ] && [ "$bad" -eq 0 ]
