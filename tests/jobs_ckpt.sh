#!/usr/bin/env bash
# jobs_ckpt.sh RESHARD SRC [MPIEXEC...] - `reshard ckpt check` on the campaign runner (props/runner.h),
# for the reference's campaign (--impl ref), opt's cross property (--impl opt) and both in one
# campaign (--impl both):
#   1. --jobs 1 and --jobs 4 give the same --json report (timing keys removed), the same stdout (the
#      rate lines removed) and the same saved fixtures, with a planted bug when the binary has them
#      (RS_MUTANT=304: ref saves a non-main replica too, four properties fail from cases 0 and 3;
#      RS_MUTANT=352: opt's direct load reads one request's hull; RS_MUTANT=305 under --impl both:
#      ref's strict return_all drops the missing keys), else on passing campaigns;
#   2. --shard 1/3, 2/3, 3/3 merged by `reshard report merge` equal the unsharded runner object;
#   3. a --seconds campaign with --jobs 2 stops within about a second of its time, and --scratch
#      holds nothing of the campaign afterwards (each worker worked in a directory of its own below
#      the campaign's);
#   4. with planted bugs compiled in: a worker that crashes (993), hangs (994) or runs out of memory
#      (995) on case 38 is reported as such (exit 1 naming the case / 4 / 3), the report is written,
#      no worker is left running and nothing is left in --scratch;
#   5. --jobs 2 with --transport mpi is a usage error (exit 2);
#   6. given an MPI launcher ($3...): --distribute on 2 ranks gives --jobs 1's report and fixtures.
set -uo pipefail
R=$1
SRC=$2
tmp=$(mktemp -d)
# the campaigns' --scratch: on tmpfs where there is one (a disk's fsyncs make every save slow)
scr=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$tmp" "$scr"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
strip() { # FILE DIR: the JSON without its timing keys, the regress dir's name made neutral
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in ("seconds", "cpu_seconds", "cases_per_second", "jobs")}
    if isinstance(x, list):
        return [clean(v) for v in x]
    if isinstance(x, str):
        return x.replace(sys.argv[2], "DIR")
    return x
print(json.dumps(clean(d), indent=1, sort_keys=True))
PY
}
# stdout without the lines that carry a rate or a time, the regress dir's name made neutral
console() { grep -v "cases/s\|cases (seed" "$1" | sed "s#$2#DIR#g"; }

# does this binary carry planted bugs? (a mutation build fails ref bug 305 by case 24 of seed 11)
mut=0
if RS_MUTANT=305 "$R" ckpt check --cases 40 --seed 11 --quiet --shrink-runs 5 --regress-dir "$tmp/probe" >/dev/null 2>&1; then
  mut=0
else
  mut=1
fi
[ -n "${RS_MUTANT:-}" ] && mut=0 # run by ci/mutation.sh for a runner bug (991/992): that bug only
echo "planted bugs compiled in: $mut"

# one campaign kind: NAME, the planted bug, the cases, then the flags
run_kind() {
  local name=$1 bugid=$2 cases=$3
  shift 3
  local bug=(env)
  [ $mut = 1 ] && bug=(env RS_MUTANT=$bugid)
  # ---- 1. the same result for every worker count ----
  for j in 1 4; do
    "${bug[@]}" "$R" ckpt check "$@" --cases $cases --seed 11 --jobs $j --shrink-runs 60 --json "$tmp/$name$j.json" \
      --junit "$tmp/$name$j.xml" --regress-dir "$tmp/${name}rg$j" --scratch "$scr" > "$tmp/${name}o$j.txt" 2>&1
    echo $? > "$tmp/${name}rc$j"
  done
  local rc1 rc4
  rc1=$(cat "$tmp/${name}rc1")
  rc4=$(cat "$tmp/${name}rc4")
  [ "$rc1" = "$rc4" ] || bad "$name: exit status differs: --jobs 1 $rc1, --jobs 4 $rc4"
  if [ $mut = 1 ]; then
    [ "$rc1" = 1 ] || bad "$name: planted bug $bugid not caught (exit $rc1)"
    grep -q "^FAIL" "$tmp/${name}o1.txt" && grep -q "replay: reshard ckpt replay" "$tmp/${name}o1.txt" ||
      bad "$name: no FAIL line with a replay command under planted bug $bugid"
  else
    [ "$rc1" = 0 ] || { bad "$name: the campaign failed (exit $rc1)"; tail -5 "$tmp/${name}o1.txt"; }
  fi
  diff <(strip "$tmp/${name}1.json" "$tmp/${name}rg1") <(strip "$tmp/${name}4.json" "$tmp/${name}rg4") > "$tmp/d.txt" ||
    { bad "$name: --json differs between --jobs 1 and 4"; head -20 "$tmp/d.txt"; }
  diff <(console "$tmp/${name}o1.txt" "$tmp/${name}rg1") <(console "$tmp/${name}o4.txt" "$tmp/${name}rg4") > "$tmp/d2.txt" ||
    { bad "$name: stdout differs between --jobs 1 and 4"; head -20 "$tmp/d2.txt"; }
  diff -r "$tmp/${name}rg1" "$tmp/${name}rg4" > "$tmp/d3.txt" 2>&1 || { [ ! -d "$tmp/${name}rg1" ] && [ ! -d "$tmp/${name}rg4" ]; } ||
    { bad "$name: saved fixtures differ"; head -10 "$tmp/d3.txt"; }
  local nfix
  nfix=$(ls "$tmp/${name}rg1" 2>/dev/null | wc -l)
  [ $mut = 1 ] && [ "$nfix" = 0 ] && bad "$name: no fixture saved under planted bug $bugid"
  for f in "$tmp/${name}rg1"/*.json; do # every saved fixture replays as failing
    [ -e "$f" ] || continue
    RS_MUTANT=$bugid "$R" ckpt replay "$f" > /dev/null 2>&1
    [ $? = 1 ] || bad "$name: fixture $(basename "$f") does not fail on replay"
  done
  echo "1. $name: --jobs 1 vs 4: exit $rc1, $nfix fixture(s), $(grep -c '^FAIL' "$tmp/${name}o1.txt") FAIL line(s) [${SECONDS} s]"

  # ---- 2. shards merged = the unsharded run ----
  for k in 1 2 3; do
    "${bug[@]}" "$R" ckpt check "$@" --cases $cases --seed 11 --shard $k/3 --jobs 2 --shrink-runs 60 --quiet \
      --json "$tmp/${name}s$k.json" --regress-dir "$tmp/${name}rgs" --scratch "$scr" > "$tmp/${name}so$k.txt" 2>&1
  done
  "$R" report merge "$tmp/${name}s1.json" "$tmp/${name}s2.json" "$tmp/${name}s3.json" --json "$tmp/${name}m.json" \
    > "$tmp/${name}mo.txt" 2>&1
  local mrc=$?
  # ckpt_opt alone stops at its first failure: a shard runs past the campaign's cut, so only the
  # merged verdict is compared there; every other campaign runs to its end and merges exactly
  [ "$mrc" = "$rc1" ] || { bad "$name: report merge exit $mrc, the unsharded run's $rc1"; tail -3 "$tmp/${name}mo.txt"; }
  if [ "$name" != opt ] || [ $mut = 0 ]; then
    python3 - "$tmp/${name}1.json" "$tmp/${name}m.json" "$tmp/${name}rg1" "$tmp/${name}rgs" <<'PY' ||
import json, sys
a = json.load(open(sys.argv[1]))["runner"]; b = json.load(open(sys.argv[2]))["runner"]
def norm(d, path):
    d = json.loads(json.dumps(d).replace(path, "DIR"))
    for k in ("seconds", "shard", "jobs"): d.pop(k, None)
    return d
a, b = norm(a, sys.argv[3]), norm(b, sys.argv[4])
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k): print("  %s: %s\n  vs %s" % (k, str(a.get(k))[:300], str(b.get(k))[:300]))
    sys.exit(1)
PY
      bad "$name: the merged runner object differs from the unsharded one"
  else
    python3 - "$tmp/${name}1.json" "$tmp/${name}m.json" "$tmp/${name}rg1" "$tmp/${name}rgs" <<'PY' ||
import json, sys
a = json.load(open(sys.argv[1]))["runner"]["properties"]["ckpt_opt"]
b = json.load(open(sys.argv[2]))["runner"]["properties"]["ckpt_opt"]
keys = ("first_fail_index", "message", "fixture")
a = [str(a.get(k)).replace(sys.argv[3], "DIR") for k in keys]
b = [str(b.get(k)).replace(sys.argv[4], "DIR") for k in keys]
if a != b:
    print("  %s\n  vs %s" % (a, b))
    sys.exit(1)
PY
      bad "$name: the merged first failure differs from the unsharded one"
  fi
  echo "2. $name: 3 shards merged: exit $mrc [${SECONDS} s]"
}

run_kind ref 304 121
run_kind opt 352 40 --impl opt
run_kind both 305 31 --impl both

# ---- 3. --seconds with workers; nothing left in --scratch ----
for impl in ref opt; do
  t0=$(date +%s.%N)
  "$R" ckpt check --impl $impl --seconds 3 --seed 3 --jobs 2 --quiet --scratch "$scr" --regress-dir "$tmp/rgt" \
    > "$tmp/t.txt" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  el=$(python3 -c "print(round($t1 - $t0, 2))")
  python3 -c "import sys; sys.exit(0 if $el < 5.5 else 1)" || bad "--impl $impl --seconds 3 --jobs 2 took $el s"
  [ $rc = 0 ] || [ $mut = 1 ] || { bad "--impl $impl --seconds 3 --jobs 2: exit $rc"; tail -3 "$tmp/t.txt"; }
  echo "3. --impl $impl --seconds 3 --jobs 2: $el s [${SECONDS} s]"
done
[ -z "$(ls -A "$scr" 2>/dev/null)" ] || bad "--scratch holds what a campaign left: $(ls -A "$scr" | head -5)"

# ---- 4. crash, hang, out of memory of a worker (planted bugs only) ----
if [ $mut = 1 ]; then
  RS_MUTANT=993 timeout 120 "$R" ckpt check --cases 100 --seed 1 --jobs 3 --json "$tmp/c.json" --regress-dir "$tmp/rgc" \
    --scratch "$scr" > "$tmp/c.txt" 2>&1
  rc=$?
  { [ $rc = 1 ] && grep -q "FAIL crash: worker [0-9]* killed by signal 11.*case 38" "$tmp/c.txt" && [ -s "$tmp/c.json" ]; } ||
    { bad "a crashing worker: exit $rc"; tail -5 "$tmp/c.txt"; }
  python3 -c "import json,sys; r=json.load(open('$tmp/c.json'))['runner']; sys.exit(0 if r['crash_index']==37 and r['cases']==37 and r['failed'] else 1)" ||
    bad "the crash's report does not say case index 37 after 37 cases"
  s0=$(date +%s)
  RS_MUTANT=994 timeout 120 "$R" ckpt check --impl opt --cases 100 --seed 1 --jobs 3 --case-timeout 3 --quiet \
    --scratch "$scr" --json "$tmp/h.json" > "$tmp/h.txt" 2>&1
  rc=$?
  s1=$(date +%s)
  { [ $rc = 4 ] && grep -q "hung: case 38" "$tmp/h.txt" && [ -s "$tmp/h.json" ]; } ||
    { bad "a hanging worker: exit $rc after $((s1 - s0)) s"; tail -3 "$tmp/h.txt"; }
  RS_MUTANT=995 timeout 120 "$R" ckpt check --cases 100 --seed 1 --jobs 3 --quiet --scratch "$scr" > "$tmp/m.txt" 2>&1
  rc=$?
  { [ $rc = 3 ] && grep -q "out of memory.*case 38" "$tmp/m.txt"; } || { bad "a worker out of memory: exit $rc"; tail -3 "$tmp/m.txt"; }
  sleep 0.5
  if pgrep -f "$R ckpt check --.*--seed 1 --jobs 3" >/dev/null; then
    bad "workers left running"
    pgrep -af "$R ckpt check"
  fi
  [ -z "$(ls -A "$scr" 2>/dev/null)" ] || bad "--scratch holds what a stopped campaign left: $(ls -A "$scr" | head -5)"
  echo "4. crash exit 1, hang exit 4 ($((s1 - s0)) s with --case-timeout 3), out of memory exit 3 [${SECONDS} s]"
else
  echo "4. skipped: no planted bugs in this binary (build with -DRS_MUTATION=ON) [${SECONDS} s]"
fi

# ---- 5. --jobs under --transport mpi ----
"$R" ckpt check --impl opt --transport mpi --jobs 2 --cases 1 > "$tmp/u.txt" 2>&1
rc=$?
{ [ $rc = 2 ] && grep -q -- "--jobs" "$tmp/u.txt"; } || bad "--jobs 2 --transport mpi: exit $rc, want a usage error naming --jobs"
echo "5. --jobs 2 --transport mpi: exit $rc [${SECONDS} s]"

# ---- 6. --distribute: two MPI ranks share the case range (when a launcher is given) ----
shift 2
if [ $# -gt 0 ] && [ -n "$1" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  dbug=(env)
  [ $mut = 1 ] && dbug=(env RS_MUTANT=304)
  timeout 300 "${dbug[@]}" "$@" -np 2 "$R" ckpt check --distribute --cases 121 --seed 11 --shrink-runs 60 \
    --json "$tmp/dist.json" --regress-dir "$tmp/rgd" --scratch "$scr" > "$tmp/dist.txt" 2>&1
  rc=$?
  if grep -qE "not available|built without MPI" "$tmp/dist.txt"; then
    echo "6. skipped: --distribute is not in this build [${SECONDS} s]"
  else
    want=$(cat "$tmp/refrc1")
    { [ $rc = "$want" ] || { [ "$want" = 1 ] && [ $rc != 0 ]; }; } || bad "--distribute: exit $rc, --jobs 1's $want"
    diff <(strip "$tmp/ref1.json" "$tmp/refrg1") <(strip "$tmp/dist.json" "$tmp/rgd") > "$tmp/d4.txt" ||
      { bad "--distribute: --json differs from --jobs 1's"; head -20 "$tmp/d4.txt"; }
    diff -r "$tmp/refrg1" "$tmp/rgd" > /dev/null 2>&1 || { [ ! -d "$tmp/refrg1" ] && [ ! -d "$tmp/rgd" ]; } ||
      bad "--distribute: saved fixtures differ from --jobs 1's"
    echo "6. --distribute on 2 ranks: exit $rc, the report and fixtures of --jobs 1 [${SECONDS} s]"
  fi
else
  echo "6. skipped: no MPI launcher given [${SECONDS} s]"
fi

[ $fail = 0 ] && echo "jobs_ckpt: ok"
exit $fail
