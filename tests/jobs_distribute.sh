#!/usr/bin/env bash
# jobs_distribute.sh RESHARD SRC [MPIEXEC] - `reshard check --distribute` under mpirun
# (props/runner_dist.c):
#   1. mpirun -np 2 and -np 3 give the same --json report (timing keys removed), the same JUnit file,
#      the same stdout (the rate line removed) and the same saved failures as --jobs 1, with a failing planted property
#      when the binary has planted bugs (RS_MUTANT=6: ref's empty-shard bug), else on a passing
#      campaign;
#   2. a --seconds campaign under -np 2 stops within about a second of its time;
#   3. a rank stopped with SIGSTOP, or killed with SIGKILL (mpirun --enable-recovery: the launcher
#      leaves the job to reshard), mid-run: rank 0 exits 4 within --timeout (+ slack) naming it;
#      rank 0 stopped: the other ranks exit 4 naming it; nothing hangs (every mpirun runs under
#      timeout);
#   4. with planted bugs compiled in: a case that runs out of memory (995) stops the campaign with
#      exit 3 naming case 38 and a case that hangs (994) ends in exit 4 within --timeout.
# Exit 77 (skipped) without an MPI launcher or in a reshard built without MPI.
set -uo pipefail
. "$(dirname "$0")/runner_lib.sh" # the comparisons
. "$(dirname "$0")/mpi_rank_lib.sh" # the rank wrapper of section 3
# Open MPI's own allocations live until exit: under a sanitizer build LeakSanitizer would turn every
# MPI rank's exit status into 1 (ci/test.sh runs the other MPI tests the same way)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPI=${3:-}
if [ -z "$MPI" ]; then
  echo "jobs_distribute: no MPI launcher given: skipped"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
T_OUT=3        # --timeout of the failure scenarios
SLACK=${RS_DIST_SLACK:-15} # a loaded 2-core machine: process start, polling, exit
mpi() { timeout 180 "$MPI" --oversubscribe "$@"; }

# a reshard without MPI refuses --distribute as a usage error (one "--distribute:" prefix)
out=$("$R" check --cases 1 --distribute 2>&1 </dev/null); rc=$?
if grep -q "built without MPI" <<<"$out"; then
  [ $rc = 2 ] && ! grep -q -- "--distribute: --distribute" <<<"$out" || bad "no-MPI refusal: exit $rc: $out"
  echo "jobs_distribute: this reshard has no MPI: skipped ($out)"
  [ $fails = 0 ] && exit 77
  exit 1
fi
"$R" check --cases 1 --distribute --jobs 2 >/dev/null 2>&1
[ $? = 2 ] || bad "--distribute with --jobs 2 is not a usage error"

rl_mutation_build 6 "$T/probe.txt" check --cases 40 --seed 11 --quiet --regress-dir "$T/probe"
if [ $mut = 1 ]; then bug=(env RS_MUTANT=6); mx=(-x RS_MUTANT=6); else bug=(env); mx=(); fi
cases=${RS_DIST_CASES:-1500}

# ---- 1. --jobs 1 and mpirun -np 2 / -np 3 --distribute: the same result ----
s0=$(date +%s.%N)
rl_run j1 "${bug[@]}" "$R" check --cases $cases --seed 11 --jobs 1 --json out.json --junit out.xml --regress-dir reg
s1=$(date +%s.%N)
for np in 2 3; do # stdout only: only rank 0 prints
  RL_STDERR=apart rl_run n$np mpi -np $np "${mx[@]}" "$R" check --cases $cases --seed 11 --distribute --json out.json \
    --junit out.xml --regress-dir reg
  date +%s.%N >"$T/tn$np"
done
echo "1. --jobs 1: $(python3 -c "print(round($s1 - $s0, 1))") s, exit $(rl_rc j1);" \
  "-np 2: $(python3 -c "print(round($(cat "$T/tn2") - $s1, 1))") s, exit $(rl_rc n2);" \
  "-np 3: $(python3 -c "print(round($(cat "$T/tn3") - $(cat "$T/tn2"), 1))") s, exit $(rl_rc n3)"
if [ $mut = 1 ]; then
  [ "$(rl_rc j1)" = 1 ] || bad "planted bug 6 not caught by --jobs 1 (exit $(rl_rc j1))"
  grep -q "^FAIL" "$T/j1/out.txt" || bad "no FAIL line with the planted bug"
fi
for np in 2 3; do
  rl_same j1 n$np "--jobs 1 vs -np $np"
  [ "$(rl_rc j1)" = "$(rl_rc n$np)" ] || tail -5 "$T/n$np/err.txt"
done
echo "   $(ls "$T/j1/reg" 2>/dev/null | wc -l) saved failure(s); reports equal unless a FAIL line says otherwise"

# ---- 2. --seconds under mpirun ----
t0=$(date +%s.%N)
mpi -np 2 "$R" check --seconds 3 --seed 3 --distribute --quiet --json "$T/t.json" >/dev/null 2>"$T/t.err"
rc=$?
el=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
[ $rc = 0 ] || { bad "--seconds 3 -np 2: exit $rc"; tail -3 "$T/t.err"; }
python3 -c "import sys; sys.exit(0 if $el < 3 + 6 else 1)" || bad "--seconds 3 -np 2 took $el s (mpirun's start included)"
echo "2. --seconds 3 -np 2: $el s with mpirun's start, $(python3 -c "import json; print(json.load(open('$T/t.json'))['runner']['cases'])" 2>/dev/null) cases"

# ---- 3. a rank stopped or killed mid-run ----
# each rank: its pid, its stderr and, when it ends, its exit code and the time
mpi_rank_wrapper "$T/rank.sh"
# scenario NAME SIGNAL VICTIM: 3 ranks of a long campaign; VICTIM gets SIGNAL once all ran for two
# seconds; rank 0 must end with exit 4 naming it (VICTIM 0: ranks 1 and 2 must, naming rank 0)
scenario() {
  local name=$1 sig=$2 victim=$3 d="$T/$1" np=3 r
  local reporters=0
  [ "$victim" = 0 ] && reporters="1 2"
  mkdir -p "$d"
  timeout 120 "$MPI" --enable-recovery --oversubscribe -np $np "$T/rank.sh" "$d" \
    "$R" check --seconds 100 --seed 5 --distribute --timeout $T_OUT --quiet --regress-dir "$d/rg" >"$d/mpirun.log" 2>&1 &
  local job=$! k=0
  while [ $k -lt 600 ] && [ "$(ls "$d"/pid.* 2>/dev/null | wc -l)" -lt $np ]; do sleep 0.1; k=$((k + 1)); done
  if [ $k -ge 600 ]; then bad "$name: the ranks did not start"; kill $job 2>/dev/null; return; fi
  sleep 2
  local vp ts
  vp=$(cat "$d/pid.$victim")
  ts=$(date +%s.%N)
  kill -s "$sig" "$vp"
  local deadline
  deadline=$(python3 -c "print($ts + $T_OUT + $SLACK)")
  for r in $reporters; do
    while [ ! -s "$d/end.$r" ] && python3 -c "import sys,time; sys.exit(0 if time.time() < $deadline else 1)"; do sleep 0.2; done
    if [ ! -s "$d/end.$r" ]; then
      bad "$name: rank $r still runs $((T_OUT + SLACK)) s after rank $victim got SIG$sig (hang)"
      continue
    fi
    local rc te el
    read -r rc te <"$d/end.$r"
    el=$(python3 -c "print(round($te - $ts, 1))")
    if [ "$rc" != 4 ] || ! grep -q "rank $victim .*the stalled or dead rank is $victim" "$d/err.$r"; then
      bad "$name: rank $r exit $rc after ${el}s: $(tail -n 2 "$d/err.$r")"
    else
      echo "3. $name: rank $r exit 4 ${el}s after SIG$sig to rank $victim: $(tail -n 1 "$d/err.$r")"
    fi
  done
  kill -CONT "$vp" 2>/dev/null
  for r in 0 1 2; do [ -s "$d/end.$r" ] || kill -9 "$(cat "$d/pid.$r")" 2>/dev/null; done
  wait $job 2>/dev/null
}
scenario stop STOP 2
scenario kill KILL 1
scenario stop0 STOP 0

# ---- 4. a case that runs out of memory or hangs (planted bugs only) ----
# Rank 0's own exit status is read from its wrapper: mpirun's is the first rank's to leave, and a
# follower told to stop may leave first (the order is the launcher's, not reshard's)
cat >"$T/rank_rc.sh" <<'EOS'
#!/usr/bin/env bash
d=$1; shift
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
"$@" 2>"$d/err.$r" >/dev/null
rc=$?
echo "$rc $(date +%s.%N)" >"$d/end.$r"
exit $rc
EOS
chmod +x "$T/rank_rc.sh"
if [ $mut = 1 ]; then
  mkdir -p "$T/oom" "$T/hang"
  RS_MUTANT=995 mpi -np 3 -x RS_MUTANT "$T/rank_rc.sh" "$T/oom" "$R" check --cases 300 --seed 1 --distribute --quiet \
    >"$T/m.txt" 2>&1
  rc=$(cut -d' ' -f1 "$T/oom/end.0" 2>/dev/null)
  { [ "$rc" = 3 ] && grep -q "out of memory.*case 38" "$T/oom/err.0"; } ||
    { bad "a case out of memory: rank 0 exit ${rc:-none}"; tail -3 "$T/oom/err.0" "$T/m.txt"; }
  s0=$(date +%s)
  RS_MUTANT=994 mpi -np 3 -x RS_MUTANT "$T/rank_rc.sh" "$T/hang" "$R" check --cases 300 --seed 1 --distribute \
    --timeout $T_OUT --quiet >"$T/h.txt" 2>&1
  s1=$(date +%s)
  rc=$(cut -d' ' -f1 "$T/hang/end.0" 2>/dev/null)
  { [ "$rc" = 4 ] && grep -q "the stalled or dead rank is" "$T/hang/err.0" && [ $((s1 - s0)) -le $((T_OUT + SLACK + 5)) ]; } ||
    { bad "a hanging case: rank 0 exit ${rc:-none} after $((s1 - s0)) s"; tail -3 "$T/hang/err.0" "$T/h.txt"; }
  echo "4. out of memory: rank 0 exit 3; a hanging case: rank 0 exit 4 after $((s1 - s0)) s (--timeout $T_OUT)"
else
  echo "4. skipped: no planted bugs in this binary"
fi
rl_finish jobs_distribute
