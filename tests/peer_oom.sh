#!/usr/bin/env bash
# peer_oom.sh RESHARD [SOURCE_TREE] - out of memory on one process of an MPI run is out of memory on
# every process, at once. Two processes, the second under a virtual-memory limit too small for what
# it must hold: `p2p run --impl opt` of a 1 GiB S(0) -> R (its destination), `ckpt save` and `ckpt
# load --impl opt` of a 1 GiB state (its state dict). (A load whose process runs out later, building
# the oracle's expected state, exits 3 everywhere too: checked by hand with a limit of 2.1-2.3 GB,
# too narrow a window to pin here.) Every process must exit 3 (out of memory, no
# verdict) within SLACK seconds, well before the --timeout T after which a waiting peer would give
# up with exit 4 (what happened before the processes agreed: exit 4, or 1 for checkpoints).
# Skipped (exit 0, with a message) without mpirun, and under a sanitizer (its runtime cannot start
# under a memory limit).
set -u
bin=$1
T=120 SLACK=40
scenarios=${RS_PEER_OOM_SCENARIOS:-p2p-run ckpt-save ckpt-load}
# the mutation self-test's form (a source tree as second argument): a planted hang costs T
[ -n "${2:-}" ] && T=20 SLACK=12 scenarios=${RS_PEER_OOM_SCENARIOS:-p2p-run ckpt-save}
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
printf '{"world":2,"tensors":[{"key":"w","dtype":"F32","shape":[268435456],"seed":1,"mesh":[2],"placements":"S0"}]}\n' >"$work/state.json"
# the limits: a process of this binary under MPI starts in 300 MB (not in 200 MB); with 600 MB at
# most 400 MB are left for its own 512 MiB half of the state dict, with 1.2 GB not enough for the
# 1 GiB destination beside its source
cat >"$work/rank.sh" <<'EOS'
#!/usr/bin/env bash
d=$1 kb=$2; shift 2
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
[ "$r" = 1 ] && ulimit -v "$kb"
"$@" >/dev/null 2>"$d/err.$r"
echo "$? $(date +%s.%N)" >"$d/end.$r"
EOS
chmod +x "$work/rank.sh"
fail=0
# run NAME KB CMD...: 2 processes, the second limited to KB of virtual memory; both must exit 3
run() {
  local name=$1 kb=$2; shift 2
  local d="$work/$name"
  mkdir -p "$d"
  local t0; t0=$(date +%s.%N)
  timeout 200 "$mpiexec" --enable-recovery --oversubscribe --allow-run-as-root -np 2 \
    "$work/rank.sh" "$d" "$kb" "$bin" "$@" --timeout $T >"$d/mpirun.log" 2>&1
  for r in 0 1; do
    if [ ! -s "$d/end.$r" ]; then
      echo "peer_oom: FAIL: $name: rank $r did not end: $(tail -n 3 "$d/mpirun.log")"; fail=1; [ "${RS_TEST_FAIL_FAST:-0}" != 1 ] || exit 1; continue
    fi
    local rc te el
    read -r rc te <"$d/end.$r"
    el=$(echo "$te - $t0" | bc)
    if [ "$rc" -ne 3 ] || [ "$(echo "$el > $SLACK" | bc)" = 1 ]; then
      echo "peer_oom: FAIL: $name: rank $r exit $rc after ${el}s (want 3 within ${SLACK}s): $(tail -n 2 "$d/err.$r")"; fail=1; [ "${RS_TEST_FAIL_FAST:-0}" != 1 ] || exit 1
    else
      echo "peer_oom: $name: rank $r exit 3 after ${el}s: $(tail -n 1 "$d/err.$r")"
    fi
  done
}
for s in $scenarios; do
  case $s in
    p2p-run) run p2p-run 1200000 p2p run "$work/big.json" --impl opt --transport mpi ;;
    ckpt-save) run ckpt-save 600000 ckpt save "$work/state.json" --root "$work/ck" --step 1 --impl opt --transport mpi ;;
    ckpt-load)
      # a checkpoint to load first (no limit), then rank 1 cannot build its state dict
      if "$mpiexec" --oversubscribe --allow-run-as-root -np 2 "$bin" ckpt save "$work/state.json" --root "$work/ckl" \
           --step 1 --impl opt --transport mpi --timeout $T >"$work/save.log" 2>&1; then
        run ckpt-load 600000 ckpt load "$work/state.json" --root "$work/ckl" --impl opt --transport mpi
      else
        echo "peer_oom: FAIL: ckpt-load: the save before it failed: $(tail -n 2 "$work/save.log")"; fail=1; [ "${RS_TEST_FAIL_FAST:-0}" != 1 ] || exit 1
      fi ;;
    *) echo "peer_oom: unknown scenario '$s'"; exit 2 ;;
  esac
done
exit $fail
