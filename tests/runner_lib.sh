# runner_lib.sh - sourced by the campaign runner's tests (tests/jobs_*.sh, given RESHARD SRC
# [MPIEXEC...]): the reshard binary $R (an absolute path), the source tree $SRC, a scratch dir $T
# removed on exit (a script that sets its own EXIT trap removes $T there), the failure count $fails
# with bad(), and the comparisons every script makes: a verb run with --jobs 1 and --jobs N (or
# under --distribute), and --shard K/N runs merged by `reshard report merge`, must give the same
# report, failures and shrunk cases. The sourcing script ends with rl_finish NAME.
R=$(cd "$(dirname "${1:?usage: $(basename "$0") RESHARD SRC [MPIEXEC...]}")" && pwd)/$(basename "$1")
SRC=$(cd "${2:?usage: $(basename "$0") RESHARD SRC [MPIEXEC...]}" && pwd)
command -v python3 >/dev/null || { echo "skip: python3 is needed to compare the JSON reports"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); [ "${RS_TEST_FAIL_FAST:-0}" != 1 ] || exit 1; }
# rl_finish NAME: the verdict, the exit status (0 pass, 1 a check failed)
rl_finish() {
  [ "$fails" = 0 ] && { echo "$1: ok"; exit 0; }
  echo "$1: $fails check(s) failed"
  exit 1
}

# rl_strip FILE: the JSON report without its timing keys (the writer's key order kept)
rl_strip() {
  python3 - "$1" <<'PY'
import json, sys
TIMING = {"seconds", "cpu_seconds", "cases_per_second", "jobs"}
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x
print(json.dumps(clean(json.load(open(sys.argv[1]))), indent=1))
PY
}

# rl_run NAME CMD...: CMD (with its launcher and environment) in the folder $T/NAME, stdout and
# stderr in out.txt (err.txt instead with RL_STDERR=apart), the exit status in rc. Its flags name
# the folder's files: --json out.json --junit out.xml and a relative regress dir (reg), so that the
# saved paths of two runs compare equal
rl_run() {
  local d=$T/$1
  shift
  mkdir -p "$d"
  if [ "${RL_STDERR:-}" = apart ]; then
    (cd "$d" && "$@" >out.txt 2>err.txt </dev/null; echo $? >rc)
  else
    (cd "$d" && "$@" >out.txt 2>&1 </dev/null; echo $? >rc)
  fi
}
rl_rc() { cat "$T/$1/rc"; }

# rl_same A B WHAT: runs A and B gave the same exit status, --json report (timing keys removed),
# --junit file (time attributes removed), saved fixtures ($RL_SAVED, default reg; both absent is
# equal unless RL_SAVED_NEEDED=1) and console (out.txt without the lines matching $RL_TIMING_LINES,
# the rate and time lines: a script may set its own; not compared with RL_CONSOLE=no)
RL_TIMING_LINES='cases/s\|cases in'
rl_same() {
  local a=$T/$1 b=$T/$2 what=$3 s=${RL_SAVED:-reg}
  [ "$(cat "$a/rc")" = "$(cat "$b/rc")" ] ||
    { bad "$what: exit $(cat "$a/rc") vs $(cat "$b/rc")"; tail -n 3 "$b/out.txt"; return; }
  [ -f "$a/out.json" ] && [ -f "$b/out.json" ] || { bad "$what: no --json report"; return; }
  diff <(rl_strip "$a/out.json") <(rl_strip "$b/out.json") >"$T/d" || { bad "$what: --json differs"; head -20 "$T/d"; }
  if [ -f "$a/out.xml" ] || [ -f "$b/out.xml" ]; then
    diff <(sed 's/ time="[^"]*"//g' "$a/out.xml") <(sed 's/ time="[^"]*"//g' "$b/out.xml") >"$T/d" ||
      { bad "$what: --junit differs"; head -20 "$T/d"; }
  fi
  if [ -d "$a/$s" ] || [ -d "$b/$s" ] || [ "${RL_SAVED_NEEDED:-0}" = 1 ]; then
    diff -r "$a/$s" "$b/$s" >"$T/d" 2>&1 || { bad "$what: saved fixtures differ"; head -10 "$T/d"; }
  fi
  [ "${RL_CONSOLE:-}" = no ] && return
  diff <(grep -v "$RL_TIMING_LINES" "$a/out.txt") <(grep -v "$RL_TIMING_LINES" "$b/out.txt") >"$T/d" ||
    { bad "$what: the console differs"; head -20 "$T/d"; }
}

# rl_merged WHOLE WHAT SHARD...: `reshard report merge` of the shard runs' reports (into
# $T/WHOLE-m.json and .xml, its console $T/WHOLE-m.txt) exits as the unsharded run WHOLE did (and as its
# runner object's "failed" says), gives WHOLE's "runner" object, and each shard's report says its
# shard K/N
rl_merged() {
  local whole=$1 what=$2 files=() k=0 n mrc s
  shift 2
  n=$#
  for s in "$@"; do
    k=$((k + 1))
    files+=("$T/$s/out.json")
    grep -q "\"shard\":[[:space:]]*\"$k/$n\"" "$T/$s/out.json" || bad "$what: shard $k/$n's report does not say its shard"
  done
  "$R" report merge "${files[@]}" --json "$T/$whole-m.json" --junit "$T/$whole-m.xml" >"$T/$whole-m.txt" 2>&1
  mrc=$?
  [ "$mrc" = "$(rl_rc "$whole")" ] ||
    { bad "$what: report merge exit $mrc, the unsharded run's $(rl_rc "$whole")"; tail -n 3 "$T/$whole-m.txt"; }
  python3 - "$T/$whole/out.json" "$T/$whole-m.json" "$mrc" >"$T/d" <<'PY' || { bad "$what: merged runner object differs"; cat "$T/d"; }
import json, sys
a = json.load(open(sys.argv[1]))["runner"]
b = json.load(open(sys.argv[2]))["runner"]
if str(1 if a["failed"] else 0) != sys.argv[3]:
    print("report merge exit %s, the runner object's failed %s" % (sys.argv[3], a["failed"]))
    sys.exit(1)
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print(" ", k, json.dumps(a.get(k))[:300], "\n  vs", json.dumps(b.get(k))[:300])
    sys.exit(1)
PY
}

# rl_mutation_build ID OUT ARGS...: mut=1 when `RS_MUTANT=ID reshard ARGS...` fails (a build with
# -DRS_MUTATION=ON has the planted bug ID), its exit status in probe_rc and console in OUT; mut=0
# and probe_rc=skip when RS_MUTANT came from outside (ci/mutation.sh runs these scripts under the
# runner's own planted bugs, 991 and 992, which every run here must keep)
rl_mutation_build() {
  local id=$1 out=$2
  shift 2
  mut=0 probe_rc=skip
  if [ -z "${RS_MUTANT:-}" ]; then
    RS_MUTANT=$id "$R" "$@" >"$out" 2>&1 </dev/null
    probe_rc=$?
    [ $probe_rc = 0 ] || mut=1
  fi
  echo "planted bugs compiled in: $mut"
}

# rl_left WHAT PATTERN: no process whose command line matches PATTERN is running (zombies waiting
# for their reaper aside); those found are listed and killed
rl_left() {
  local p st n=0
  for p in $(pgrep -f -- "$2" 2>/dev/null); do
    st=$(awk '{sub(/.*\) /, ""); print $1}' "/proc/$p/stat" 2>/dev/null)
    case "$st" in "" | Z | X) ;; *) n=$((n + 1)) ;; esac
  done
  [ $n = 0 ] || { bad "$1: $n process(es) left running"; pgrep -af -- "$2"; pkill -KILL -f -- "$2"; }
}

# the mutation build's hooks (props/MUTANTS.md 993-995): a worker that crashes, hangs or runs out
# of memory on case 38. OUT names the run's files; ARGS: the verb and its flags (--jobs 3 included)
# rl_crash OUT ARGS...: exit 1 with a FAIL crash line naming case 38 twice (the worker's message and
# the verb's replay hint: ckpt check's hint once said case 37), the --json report written
# (crash_index 37 after 37 cases, failed)
rl_crash() {
  local o=$1 rc
  shift
  RS_MUTANT=993 timeout 120 "$R" "$@" --json "$o.json" --regress-dir "$o-rg" >"$o.txt" 2>&1 </dev/null
  rc=$?
  { [ $rc = 1 ] && grep -q "FAIL crash: worker [0-9] killed by signal 11.*case 38 (case 38 of seed" "$o.txt" && [ -s "$o.json" ]; } ||
    { bad "a crashing worker: exit $rc"; tail -n 5 "$o.txt"; }
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runner"]; sys.exit(0 if r["crash_index"] == 37 and r["cases"] == 37 and r["failed"] else 1)' \
    "$o.json" 2>/dev/null || bad "the crash's --json report does not say case index 37 after 37 cases"
}
# rl_hang OUT CASE_TIMEOUT ARGS...: exit 4 naming case 38 within 20 s (its time in hang_s); with
# RL_HANG_JSON=1 the --json report must be written too
rl_hang() {
  local o=$1 ct=$2 rc s0 el js=()
  shift 2
  [ "${RL_HANG_JSON:-0}" = 1 ] && js=(--json "$o.json")
  s0=$(date +%s)
  RS_MUTANT=994 timeout 120 "$R" "$@" --case-timeout "$ct" --quiet "${js[@]}" --regress-dir "$o-rg" >"$o.txt" 2>&1 </dev/null
  rc=$? el=$(($(date +%s) - s0))
  { [ $rc = 4 ] && grep -q "hung: case 38" "$o.txt" && { [ ${#js[@]} = 0 ] || [ -s "$o.json" ]; }; } ||
    { bad "a hanging worker: exit $rc after $el s"; tail -n 3 "$o.txt"; }
  [ $el -le 20 ] || bad "a hanging worker was reported after $el s (--case-timeout $ct)"
  hang_s=$el
}
# rl_oom OUT ARGS...: exit 3 naming case 38 (the message matches $RL_OOM_LINE)
RL_OOM_LINE='out of memory.*case 38'
rl_oom() {
  local o=$1 rc
  shift
  RS_MUTANT=995 timeout 120 "$R" "$@" --quiet --regress-dir "$o-rg" >"$o.txt" 2>&1 </dev/null
  rc=$?
  { [ $rc = 3 ] && grep -q "$RL_OOM_LINE" "$o.txt"; } || { bad "a worker out of memory: exit $rc"; tail -n 3 "$o.txt"; }
}
