#!/usr/bin/env bash
# report_flags.sh RESHARD - every campaign verb, under each of its impls (and kinds), honours every
# report flag its --help lists: --json F (a JSON object whose "cases" is the number of cases run),
# --junit F (XML that parses, a <testsuite> with at least one <testcase>) and --report DIR (an HTML
# page in DIR). `ckpt check --impl opt --json F --junit G` used to write neither file, exit 0.
# The plug-ins come from the build tree (tests/libconform_opt_plugin.so, tests/libplanner_greedy.so,
# tests/libplanner_opt_p2p.so).
set -u
R=${1:?usage: report_flags.sh path/to/reshard}
. "$(dirname "$0")/cli_lib.sh"
R=$(cd "$(dirname "$R")" && pwd)/$(basename "$R")
L=$(dirname "$R")/tests
cd "$T" || exit 1
N=12
n=0

# run_one NAME VERB-WORDS -- CAMPAIGN ARGS: the verb's --help decides which report flags are given
run_one() {
  local name=$1; shift
  local verb=()
  while [ "$1" != -- ]; do verb+=("$1"); shift; done
  shift
  local help flags=() want=()
  help=$("$R" "${verb[@]}" --help 2>&1)
  grep -qE -- '--json F' <<<"$help" && { flags+=(--json "$T/$name.json"); want+=(json); }
  grep -qE -- '--junit F' <<<"$help" && { flags+=(--junit "$T/$name.xml"); want+=(junit); }
  grep -qE -- '--report DIR' <<<"$help" && { flags+=(--report "$T/$name.rep"); want+=(report); }
  [ ${#want[@]} -gt 0 ] || fail "$name: ${verb[*]} --help lists no report flag"
  "$R" "${verb[@]}" "$@" "${flags[@]}" >"$T/$name.out" 2>&1 </dev/null
  local rc=$?
  [ $rc -eq 0 ] || { fail "$name: ${verb[*]} $* exit $rc: $(tail -3 "$T/$name.out")"; return; }
  for w in "${want[@]}"; do
    case $w in
    json)
      python3 - "$T/$name.json" "$N" <<'EOF' || fail "$name: --json"
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, dict), "not an object"
c = d.get("cases")
assert isinstance(c, int) and c == int(sys.argv[2]), "cases %r, expected %s" % (c, sys.argv[2])
EOF
      ;;
    junit)
      python3 - "$T/$name.xml" <<'EOF' || fail "$name: --junit"
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot()
suites = [r] if r.tag == "testsuite" else r.findall("testsuite")
assert suites, "no <testsuite>"
assert sum(len(s.findall("testcase")) for s in suites) > 0, "no <testcase>"
EOF
      ;;
    report)
      ls "$T/$name.rep"/*.html >/dev/null 2>&1 || fail "$name: --report wrote no HTML page in $T/$name.rep"
      ;;
    esac
  done
  n=$((n + 1))
}

run_one check_ref check -- --seed 3 --cases $N --quiet --impl ref --regress-dir "$T/reg"
run_one check_opt check -- --seed 3 --cases $N --quiet --impl opt --regress-dir "$T/reg"
for impl in ref opt; do
  run_one p2p_$impl p2p check -- --seed 3 --cases $N --quiet --impl $impl --regress-dir "$T/reg"
done
for impl in ref opt both; do
  run_one tp_$impl tp check -- --seed 3 --cases $N --quiet --impl $impl --regress-dir "$T/reg"
  run_one ckpt_$impl ckpt check -- --seed 3 --cases $N --quiet --impl $impl --regress-dir "$T/reg" --scratch "$T/scr_$impl"
done
run_one conform conform -- --backend "$L/libconform_opt_plugin.so" --suite redistribute --cases $N --fixtures none \
  --quiet --failures "$T/cf"
run_one fuzz_redistribute fuzz-planner -- --planner "$L/libplanner_greedy.so" --seed 3 --cases $N --quiet \
  --regress-dir "$T/ff"
run_one fuzz_p2p fuzz-planner -- --planner "$L/libplanner_opt_p2p.so" --kind p2p --seed 3 --cases $N --quiet \
  --regress-dir "$T/ff"
[ $n -eq 13 ] || fail "$n of 13 campaigns wrote their reports"
[ $fails -eq 0 ] || exit 1
echo "report flags: ok ($n campaigns)"
