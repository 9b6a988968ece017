#!/usr/bin/env bash
# peer_timeout.sh RESHARD FIXTURES_P2P STALL_PLUGIN [MPIEXEC] - no hang on a stalled or dead peer.
# (Also `peer_timeout.sh RESHARD SOURCE_TREE`, as ci/mutation.sh runs it: the plug-in is looked up
# next to the binary and mpirun on PATH.)
# A copy-service plug-in whose run() never returns, then (under MPI) a rank stopped with SIGSTOP and
# a rank killed with SIGKILL in the middle of `reshard check --transport mpi` and `reshard p2p check
# --transport mpi`: every surviving rank must exit 4 within --timeout (+ slack) with a message naming
# the rank it waited for. The launcher runs with --enable-recovery (Open MPI 4.x: a dead process does
# not abort the job), so what ends the survivors is reshard's own timeout, not mpirun.
set -u
bin=$1 fx=$2 plugin=${3:-} mpiexec=${4:-}
if [ -d "$fx/fixtures/p2p" ] && [ -z "$plugin" ]; then
  # the mutation self-test's form: one MPI scenario and less slack (a planted hang costs that long)
  fx=$fx/fixtures/p2p
  plugin=$(find "$(dirname "$bin")" -name 'libstall_copy_plugin.so' | head -n 1)
  mpiexec=$(command -v mpirun || true)
  : "${RS_PEER_TIMEOUT_SCENARIOS:=check-stall}" "${RS_PEER_TIMEOUT_SLACK:=10}"
fi
T=3       # --timeout of the runs
SLACK=${RS_PEER_TIMEOUT_SLACK:-20}  # a loaded 2-core CI machine: process start, polling backoff, exit
fail=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say() { echo "peer_timeout: $*"; }
bad() { say "FAIL: $*"; fail=1; [ "${RS_TEST_FAIL_FAST:-0}" != 1 ] || exit 1; }

# --timeout goes through the checked parser: exit 2 naming the flag
for v in 0 -1 abc 1e3 inf nan 1.5x "" 2000000; do
  out=$("$bin" check --impl opt --cases 1 --timeout "$v" 2>&1); rc=$?
  [ $rc -eq 2 ] && grep -q -- "--timeout" <<<"$out" || bad "--timeout '$v': exit $rc ($out)"
done

# a plug-in copy service that never returns: the local run ends with exit 4 after the timeout
t0=$(date +%s.%N)
out=$(timeout $((1 + SLACK)) "$bin" p2p run "$fx/dense_disjoint_train_to_infer.json" --copy-service "$plugin" --timeout 1 2>&1); rc=$?
el=$(echo "$(date +%s.%N) - $t0" | bc)
if [ $rc -ne 4 ] || ! grep -q "waited 1 s for rank" <<<"$out" || [ "$(echo "$el > 1 + $SLACK" | bc)" = 1 ]; then
  bad "stalled plug-in: exit $rc after ${el}s: $out"
else
  say "stalled plug-in: exit 4 after ${el}s"
fi

if [ -z "$mpiexec" ]; then
  say "no MPI launcher: the MPI scenarios are skipped"
  exit $fail
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# each rank: its pid, its stderr and, when it ends, its exit code and the time
. "$(dirname "$0")/mpi_rank_lib.sh"
mpi_rank_wrapper "$work/rank.sh"

# scenario NAME SIGNAL VERB...: 3 ranks, rank 2 gets SIGNAL once all run for a second
scenario() {
  local name=$1 sig=$2; shift 2
  local d="$work/$name" np=3 victim=2
  mkdir -p "$d"
  timeout 300 "$mpiexec" --enable-recovery --oversubscribe --allow-run-as-root -np $np \
    "$work/rank.sh" "$d" "$bin" "$@" --timeout $T --quiet >"$d/mpirun.log" 2>&1 &
  local job=$! k=0
  while [ $k -lt 600 ] && ! { [ -s "$d/pid.0" ] && [ -s "$d/pid.1" ] && [ -s "$d/pid.2" ]; }; do sleep 0.1; k=$((k+1)); done
  if [ $k -ge 600 ]; then bad "$name: the ranks did not start"; kill $job 2>/dev/null; return; fi
  sleep 1
  local vp; vp=$(cat "$d/pid.$victim")
  local ts; ts=$(date +%s.%N)
  kill -s "$sig" "$vp"
  # every survivor must end within T + SLACK of the signal
  local deadline; deadline=$(echo "$ts + $T + $SLACK" | bc)
  for r in 0 1; do
    while [ ! -s "$d/end.$r" ] && [ "$(echo "$(date +%s.%N) < $deadline" | bc)" = 1 ]; do sleep 0.2; done
    if [ ! -s "$d/end.$r" ]; then
      bad "$name: rank $r still runs $((T + SLACK)) s after rank $victim got SIG$sig (hang)"
      continue
    fi
    read -r rc te <"$d/end.$r"
    local el; el=$(echo "$te - $ts" | bc)
    # a survivor names the peer it waited for: the victim, or a survivor that was itself waiting
    # for the victim (under load rank 0 can be stuck behind rank 1, which waits for rank 2)
    local named; named=$(grep -o "for rank [0-9]*\|with rank [0-9]*" "$d/err.$r" | head -n 1 | grep -o "[0-9]*$")
    local via=""
    if [ -n "$named" ] && [ "$named" != "$victim" ] && [ "$named" != "$r" ] && [ -s "$d/err.$named" ] &&
       grep -q "for rank $victim\|with rank $victim" "$d/err.$named"; then via=$named; fi
    # a timeout follows the chain of waits: the message ends naming the rank that stopped answering
    local ends; ends=$(grep -o "the stalled or dead rank is [0-9]*" "$d/err.$r" | head -n 1 | grep -o "[0-9]*$")
    if [ "$rc" -ne 4 ] || { [ "$named" != "$victim" ] && [ -z "$via" ]; }; then
      bad "$name: rank $r exit $rc after ${el}s: $(tail -n 2 "$d/err.$r")"
    elif [ "$sig" = STOP ] && [ "$ends" != "$victim" ]; then
      bad "$name: rank $r does not end its message naming the stalled rank $victim: $(tail -n 1 "$d/err.$r")"
    else
      say "$name: rank $r exit 4 ${el}s after SIG$sig: $(tail -n 1 "$d/err.$r")"
    fi
  done
  for r in 0 1; do [ -s "$d/end.$r" ] || kill -9 "$(cat "$d/pid.$r")" 2>/dev/null; done
  kill -9 "$vp" 2>/dev/null
  kill -CONT "$vp" 2>/dev/null
  wait $job 2>/dev/null
}

# chain NAME NP VICTIM VERB...: the launcher's defaults (the job ends at the first exit 4, so only
# the first messages survive); rank VICTIM is stopped. Whatever rank's message survives, it must
# end naming VICTIM as the stalled rank, even when that rank waited for another one that waited
# for VICTIM (the chain of waits, docs/transports.md).
chain() {
  local name=$1 np=$2 victim=$3; shift 3
  local d="$work/$name"
  mkdir -p "$d"
  timeout 300 "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" \
    "$work/rank.sh" "$d" "$bin" "$@" --timeout $T --quiet >"$d/mpirun.log" 2>&1 &
  local job=$! k=0
  while [ $k -lt 600 ] && [ "$(ls "$d"/pid.* 2>/dev/null | wc -l)" -lt "$np" ]; do sleep 0.1; k=$((k+1)); done
  if [ $k -ge 600 ]; then bad "$name: the ranks did not start"; kill $job 2>/dev/null; return; fi
  sleep 2 # past MPI_Init and the world's start-up collectives (a blocking start-up has no timeout)
  local vp; vp=$(cat "$d/pid.$victim")
  local ts; ts=$(date +%s.%N)
  kill -STOP "$vp"
  local deadline; deadline=$(echo "$ts + $T + $SLACK" | bc)
  while kill -0 $job 2>/dev/null && [ "$(echo "$(date +%s.%N) < $deadline" | bc)" = 1 ]; do sleep 0.2; done
  if kill -0 $job 2>/dev/null; then bad "$name: the job still runs $((T + SLACK)) s after rank $victim stopped"; fi
  # every message of the ranks other than the victim (the victim itself may print after the
  # launcher's SIGCONT, which Open MPI sends before SIGTERM; a rank asking it then hears that it
  # did not run, and still names it)
  local said="" r
  for r in $(seq 0 $((np - 1))); do
    [ "$r" != "$victim" ] && [ -s "$d/err.$r" ] && said+=$(grep "waited" "$d/err.$r")$'\n'
  done
  said=$(grep . <<<"$said")
  local named; named=$(grep -o "the stalled or dead rank is [0-9]*" <<<"$said" | grep -o "[0-9]*$" | sort -u | tr '\n' ' ')
  if [ -z "$said" ] || [ "$named" != "$victim " ]; then
    bad "$name: the surviving messages do not end naming rank $victim: ${said:-none}"
  else
    say "$name: $(head -n 1 <<<"$said")"
  fi
  for p in "$d"/pid.*; do kill -9 "$(cat "$p")" 2>/dev/null; done
  kill -CONT "$vp" 2>/dev/null
  kill $job 2>/dev/null
  wait $job 2>/dev/null
}

# RS_PEER_TIMEOUT_SCENARIOS picks a subset (the sanitizer and coverage builds run one)
want=" ${RS_PEER_TIMEOUT_SCENARIOS:-check-stall check-dead p2p-stall chain-stall} "
[[ $want == *" check-stall "* ]] && scenario check-stall STOP check --impl opt --transport mpi --seconds 120
[[ $want == *" check-dead "* ]] && scenario check-dead KILL check --impl opt --transport mpi --seconds 120
[[ $want == *" p2p-stall "* ]] && scenario p2p-stall STOP p2p check --impl opt --transport mpi --seconds 120
[[ $want == *" chain-stall "* ]] && chain chain-stall 4 1 check --impl opt --transport mpi --seconds 120
exit $fail
