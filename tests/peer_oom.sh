#!/usr/bin/env bash
# peer_oom.sh RESHARD [SOURCE_TREE] - out of memory on one process of an MPI run is out of memory on
# every process, at once: `reshard p2p run --impl opt --transport mpi` on 2 processes, the second
# under a virtual-memory limit it cannot hold its destination in. Both must exit 3 (out of memory,
# no verdict) within SLACK seconds, well before the --timeout T after which a waiting peer would
# give up with exit 4 (what happened before opt's executor agreed before the exchange).
# Skipped (exit 0, with a message) without mpirun, and under a sanitizer (its runtime cannot start
# under a memory limit).
set -u
bin=$1
T=120 SLACK=40
# the mutation self-test's form (a source tree as second argument): a planted hang costs T
[ -n "${2:-}" ] && T=20 SLACK=12
mpiexec=$(command -v mpirun || true)
[ -n "$mpiexec" ] || { echo "peer_oom: no MPI launcher: skipped"; exit 0; }
# a sanitizer's runtime cannot start under the limit: probe once, before any launcher
if (ulimit -v 1200000; "$bin" --help) 2>&1 | grep -q Sanitizer; then
  echo "peer_oom: a sanitizer build: skipped"; exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# w: 1 GiB of F32, S(0) on 2 ranks -> R: each destination is the whole GiB
printf '{"seed":1,"model":{"params":[{"name":"w","shape":[268435456],"dtype":"F32"}]},"src":{"meshes":[{"shape":[2],"ranks":[0,1]}],"params":{"w":{"mesh":0,"placements":["S(0)"]}}},"dst":{"meshes":[{"shape":[2],"ranks":[0,1]}],"params":{"w":{"mesh":0,"placements":["R"]}}}}\n' >"$work/big.json"
cat >"$work/rank.sh" <<'EOS'
#!/usr/bin/env bash
d=$1; shift
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
# rank 1: room for MPI and its half of the source, not for a 1 GiB destination
[ "$r" = 1 ] && ulimit -v 1200000
"$@" >/dev/null 2>"$d/err.$r"
echo "$? $(date +%s.%N)" >"$d/end.$r"
EOS
chmod +x "$work/rank.sh"
t0=$(date +%s.%N)
timeout 200 "$mpiexec" --enable-recovery --oversubscribe --allow-run-as-root -np 2 \
  "$work/rank.sh" "$work" "$bin" p2p run "$work/big.json" --impl opt --transport mpi --timeout $T >"$work/mpirun.log" 2>&1
if grep -q Sanitizer "$work"/err.* 2>/dev/null; then echo "peer_oom: a sanitizer build: skipped"; exit 0; fi
fail=0
for r in 0 1; do
  if [ ! -s "$work/end.$r" ]; then
    echo "peer_oom: FAIL: rank $r did not end: $(tail -n 3 "$work/mpirun.log")"; fail=1; continue
  fi
  read -r rc te <"$work/end.$r"
  el=$(echo "$te - $t0" | bc)
  if [ "$rc" -ne 3 ] || [ "$(echo "$el > $SLACK" | bc)" = 1 ]; then
    echo "peer_oom: FAIL: rank $r exit $rc after ${el}s (want 3 within ${SLACK}s): $(tail -n 2 "$work/err.$r")"; fail=1
  else
    echo "peer_oom: rank $r exit 3 after ${el}s: $(tail -n 1 "$work/err.$r")"
  fi
done
exit $fail
