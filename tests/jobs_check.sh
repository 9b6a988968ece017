#!/usr/bin/env bash
# jobs_check.sh RESHARD SRC [MPIEXEC...] - `reshard check` on the campaign runner (props/runner.h):
#   1. --jobs 1 and --jobs 4 give the same --json report (timing keys removed), the same stdout
#      (the rate line removed) and the same saved failures, with a failing planted property when the
#      binary has planted bugs (RS_MUTANT=6: ref's empty-shard bug), else on a passing campaign;
#   2. --shard 1/3, 2/3, 3/3 merged by `reshard report merge` equal the unsharded runner object;
#   3. a --seconds campaign with --jobs 2 stops within about a second of its time;
#   4. with planted bugs compiled in: a worker that crashes (993), hangs (994) or runs out of memory
#      (995) on case 38 is reported as such (exit 1 naming the case / 4 / 3), the report is still
#      written for the crash, and no worker is left running.
# Planted bugs 991 (records added as they arrive) and 992 (shard K takes the wrong residue) make it
# fail (props/MUTANTS.md).
set -uo pipefail
R=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
strip() { # FILE: the JSON without its timing keys, the regress dir's name made neutral
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

# does this binary carry planted bugs? (a mutation build fails campaign seed 11 of ref bug 6 at once)
mut=0
if RS_MUTANT=6 "$R" check --cases 40 --seed 11 --quiet --regress-dir "$tmp/probe" >/dev/null 2>&1; then mut=0; else mut=1; fi
[ -n "${RS_MUTANT:-}" ] && mut=0 # run by ci/mutation.sh for 991/992: the inherited bug only
echo "planted bugs compiled in: $mut"
if [ $mut = 1 ]; then bug=(env RS_MUTANT=6); cases=2500; else bug=(env); cases=2500; fi

# ---- 1. the same result for every worker count ----
for j in 1 4; do
  "${bug[@]}" "$R" check --cases $cases --seed 11 --jobs $j --json "$tmp/j$j.json" --junit "$tmp/j$j.xml" \
    --regress-dir "$tmp/rg$j" > "$tmp/o$j.txt" 2>&1
  echo $? > "$tmp/rc$j"
done
[ "$(cat "$tmp/rc1")" = "$(cat "$tmp/rc4")" ] || bad "exit status differs: --jobs 1 $(cat "$tmp/rc1"), --jobs 4 $(cat "$tmp/rc4")"
if [ $mut = 1 ]; then
  [ "$(cat "$tmp/rc1")" = 1 ] || bad "planted bug 6 not caught (exit $(cat "$tmp/rc1"))"
  grep -q "^FAIL" "$tmp/o1.txt" || bad "no FAIL line with the planted bug"
fi
diff <(strip "$tmp/j1.json" "$tmp/rg1") <(strip "$tmp/j4.json" "$tmp/rg4") > "$tmp/d.txt" || { bad "--json differs between --jobs 1 and 4"; head -20 "$tmp/d.txt"; }
diff <(grep -v "cases/s\|cases in" "$tmp/o1.txt" | sed "s#$tmp/rg1#DIR#g") \
     <(grep -v "cases/s\|cases in" "$tmp/o4.txt" | sed "s#$tmp/rg4#DIR#g") > "$tmp/d2.txt" || { bad "stdout differs"; head -20 "$tmp/d2.txt"; }
diff -r "$tmp/rg1" "$tmp/rg4" >/dev/null 2>&1 || { [ ! -d "$tmp/rg1" ] && [ ! -d "$tmp/rg4" ]; } || bad "saved failures differ"
echo "1. --jobs 1 vs 4: exit $(cat "$tmp/rc1"), $(ls "$tmp/rg1" 2>/dev/null | wc -l) saved failure(s)"

# ---- 2. shards merged = the unsharded run ----
for k in 1 2 3; do
  "${bug[@]}" "$R" check --cases $cases --seed 11 --shard $k/3 --jobs 2 --json "$tmp/s$k.json" --regress-dir "$tmp/rgs" \
    > "$tmp/so$k.txt" 2>&1
done
"$R" report merge "$tmp/s1.json" "$tmp/s2.json" "$tmp/s3.json" --json "$tmp/merged.json" --junit "$tmp/merged.xml" > "$tmp/mo.txt" 2>&1
mrc=$?
[ "$mrc" = "$(cat "$tmp/rc1")" ] || bad "report merge exit $mrc, the unsharded run's $(cat "$tmp/rc1")"
python3 - "$tmp/j1.json" "$tmp/merged.json" "$tmp/rg1" "$tmp/rgs" <<'PY' || bad "merged runner object differs from the unsharded one"
import json, sys
a = json.load(open(sys.argv[1]))["runner"]; b = json.load(open(sys.argv[2]))["runner"]
def norm(d, path):
    d = json.loads(json.dumps(d).replace(path, "DIR"))
    for k in ("seconds", "shard", "jobs"): d.pop(k, None)
    return d
a, b = norm(a, sys.argv[3]), norm(b, sys.argv[4])
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k): print("  %s: %s\n  vs %s" % (k, str(a.get(k))[:200], str(b.get(k))[:200]))
    sys.exit(1)
PY
"$R" report merge "$tmp/s1.json" "$tmp/s2.json" > "$tmp/m2.txt" 2>&1
[ $? = 2 ] && grep -q "shard 3/3" "$tmp/m2.txt" || bad "a missing shard is not refused naming it"
"$R" report merge "$tmp/s1.json" "$tmp/s1.json" "$tmp/s3.json" > "$tmp/m3.txt" 2>&1
[ $? = 2 ] && grep -q "given twice" "$tmp/m3.txt" || bad "a shard given twice is not refused"
echo "2. 3 shards merged: exit $mrc"

# ---- 3. --seconds with workers ----
t0=$(date +%s.%N)
"$R" check --seconds 3 --seed 3 --jobs 2 --quiet --json "$tmp/t.json" > /dev/null 2>&1
t1=$(date +%s.%N)
el=$(python3 -c "print(round($t1 - $t0, 2))")
python3 -c "import sys; sys.exit(0 if $el < 5.5 else 1)" || bad "--seconds 3 --jobs 2 took $el s"
echo "3. --seconds 3 --jobs 2: $el s"

# ---- 4. crash, hang, out of memory of a worker (planted bugs only) ----
if [ $mut = 1 ]; then
  RS_MUTANT=993 timeout 120 "$R" check --cases 200 --seed 1 --jobs 3 --json "$tmp/c.json" --regress-dir "$tmp/rgc" > "$tmp/c.txt" 2>&1
  rc=$?
  { [ $rc = 1 ] && grep -q "FAIL crash: worker [0-9]* killed by signal 11.*case 38" "$tmp/c.txt" && [ -s "$tmp/c.json" ]; } ||
    { bad "a crashing worker: exit $rc"; tail -5 "$tmp/c.txt"; }
  python3 -c "import json,sys; r=json.load(open('$tmp/c.json'))['runner']; sys.exit(0 if r['crash_index']==37 and r['cases']==37 else 1)" ||
    bad "the crash's report does not say case index 37 after 37 cases"
  s0=$(date +%s)
  RS_MUTANT=994 timeout 120 "$R" check --cases 200 --seed 1 --jobs 3 --case-timeout 3 --quiet > "$tmp/h.txt" 2>&1
  rc=$?; s1=$(date +%s)
  { [ $rc = 4 ] && grep -q "hung: case 38" "$tmp/h.txt"; } || { bad "a hanging worker: exit $rc after $((s1 - s0)) s"; tail -3 "$tmp/h.txt"; }
  RS_MUTANT=995 timeout 120 "$R" check --cases 200 --seed 1 --jobs 3 --quiet > "$tmp/m.txt" 2>&1
  rc=$?
  { [ $rc = 3 ] && grep -q "out of memory.*case 38" "$tmp/m.txt"; } || { bad "a worker out of memory: exit $rc"; tail -3 "$tmp/m.txt"; }
  sleep 0.5
  if pgrep -f "$R check --cases 200 --seed 1" >/dev/null; then bad "workers left running"; pgrep -af "$R check"; fi
  echo "4. crash exit 1, hang exit 4 ($((s1 - s0)) s with --case-timeout 3), out of memory exit 3"
else
  echo "4. skipped: no planted bugs in this binary"
fi
[ $fail = 0 ] && echo "jobs_check: ok"
exit $fail
