#!/usr/bin/env bash
# reports.sh RESHARD REPORT_DEMO SRC VENV_DIR [nobrowser] - the reports people read, read by real consumers:
#  - JUnit XML parsed with junitparser (PyPI) for a passing `reshard check` and a failing report
#    (tests/report_demo.c: a backend's wrong bytes through the campaign's writers; in a
#    -DRS_MUTATION=ON build also a real campaign with a planted ref bug, RS_MUTANT=2) and a failing
#    `reshard conform` against a planted-bug backend;
#  - the --report HTML pages opened in headless Chromium; the screenshots must show a rendered page
#    (many colours) and, for the failing pages, the red marks of the differing elements.
# Installs what is missing: a venv at VENV_DIR with junitparser and pillow (pip, PyPI), and Debian's
# chromium (apt-get). Exit 77 (skipped) only when chromium cannot be installed, after the JUnit checks.
set -u
R=${1:?usage: reports.sh RESHARD REPORT_DEMO SRC VENV_DIR}
DEMO=$2 S=$3 V=${RS_REPORTS_VENV:-$4} # ci/test.sh shares one venv between its build trees
. "$S/tests/cli_lib.sh"
PY="$V/bin/python"
if ! "$PY" -c "import junitparser, PIL" 2>/dev/null; then
  { [ -x "$PY" ] || python3 -m venv "$V"; } && "$V/bin/pip" install -q junitparser pillow >"$T/pip" 2>&1 ||
    { echo "FAIL: cannot install junitparser and pillow into $V: $(tail -3 "$T/pip")"; exit 1; }
fi
check() { "$PY" "$S/tests/reports_check.py" "$@" || fail "reports_check.py $*"; }

# 1. a passing campaign: JUnit and the page
expect_rc 0 "$R" check --seed 3 --cases 150 --quiet --junit "$T/pass.xml" --report "$T/pass" --regress-dir "$T/reg0"
check junit "$T/pass.xml" pass
[ -s "$T/pass/check.html" ] || fail "check --report wrote no $T/pass/check.html"
# 2. failing reports, whatever the build
"$DEMO" "$T/demo" >"$T/out" 2>&1 || fail "report_demo: $(cat "$T/out")"
check junit "$T/demo/demo.junit.xml" fail greedy_oracle
grep -q 'class="diff"' "$T/demo/html/demo.html" || fail "demo page marks no differing element"
grep -q 'class="ok">passed' "$T/pass/check.html" || fail "the passing page does not say passed"
pages=("$T/demo/html/demo.html:fail")
# 3. a planted ref bug (all-gather concatenates in reverse order) caught by a real campaign
RS_MUTANT=2 "$R" check --seed 1 --cases 300 --quiet --properties greedy_oracle,boxes --junit "$T/mut.xml" \
  --report "$T/mut" --regress-dir "$T/reg2" >"$T/mut.out" 2>&1 </dev/null
rc=$?
if [ "$rc" = 1 ]; then
  check junit "$T/mut.xml" fail greedy_oracle
  grep -q 'class="diff"' "$T/mut/check.html" || fail "RS_MUTANT=2 page marks no differing element"
  pages+=("$T/mut/check.html:fail")
elif [ "$rc" = 0 ]; then
  echo "note: RS_MUTANT=2 changes nothing here (not a -DRS_MUTATION=ON build): the planted-bug campaign is not run"
else
  fail "RS_MUTANT=2 check: exit $rc: $(tail -5 "$T/mut.out")"
fi

# 4. `reshard conform` against a planted-bug backend (tests/conform.sh's opt plug-in): its JUnit
#    (a testcase per property and per fixture file, each failure with `reshard conform --backend ..
#    --replay FILE` and the shrunk case) and its --report page (the shrunk case drawn, red marks)
plugin=$(cd "$(dirname "$R")" && pwd)/tests/libconform_opt_plugin.so
if [ -f "$plugin" ]; then
  expect_rc 1 "$R" conform --backend "$plugin?bug=dst_order" --suite redistribute,tp --cases 200 --quiet \
    --junit "$T/conform.xml" --failures "$T/cf1"
  check junit "$T/conform.xml" fail backend_oracle
  grep -q 'classname="reshard.conform.redistribute.fixture"' "$T/conform.xml" || fail "conform JUnit: no fixture-file testcase"
  grep -q 'replay: reshard conform --backend ' "$T/conform.xml" || fail "conform JUnit: no replay command"
  expect_rc 1 "$R" conform --backend "$plugin?bug=last_rank" --suite redistribute --cases 200 --fixtures none --quiet \
    --report "$T/cf" --failures "$T/cf2"
  grep -q 'class="diff"' "$T/cf/conform.html" || fail "conform page marks no differing element"
  grep -q -- '--replay ' "$T/cf/conform.html" || fail "conform page has no replay command"
  pages+=("$T/cf/conform.html:fail")
  # P2P and checkpoint failures: one parameter / tensor drawn as boxes (nothing marked red)
  expect_rc 1 "$R" conform --backend "$plugin?bug=last_rank" --suite p2p,ckpt --cases 10 --fixtures none --quiet \
    --report "$T/cfpc" --failures "$T/cf4"
  for w in "drawn: parameter" "drawn: tensor" "<svg"; do
    grep -q "$w" "$T/cfpc/conform.html" || fail "conform p2p,ckpt page lacks '$w'"
  done
  pages+=("$T/cfpc/conform.html:pass")
  # a backend lacking a capability (tests/conform_child.py has no tp): a passing JUnit with a skipped
  # testcase that says why
  expect_rc 0 "$R" conform --backend "exec:$PY $S/tests/conform_child.py" --suite redistribute,tp --cases 30 \
    --fixtures none --quiet --junit "$T/conform-skip.xml" --failures "$T/cf3"
  check junit "$T/conform-skip.xml" pass
  grep -q "<skipped message=\"the backend lacks the capability 'tp'\"/>" "$T/conform-skip.xml" ||
    fail "conform JUnit: the lacking capability is not a skipped testcase"
else
  echo "note: no $plugin (a build without opt): the conform reports are not checked"
fi

# 5. the pages in a real browser
if [ "${5:-browser}" = nobrowser ]; then
  [ "$fails" = 0 ] || exit 1
  echo "reports: JUnit read by junitparser; pages written (not opened: nobrowser)"
  exit 0
fi
CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } >"$T/apt" 2>&1
  CHROME=$(command -v chromium || true)
fi
if [ -z "$CHROME" ]; then
  [ "$fails" = 0 ] || exit 1
  echo "skipped: the JUnit checks passed, but chromium is not installed and apt-get could not install it"
  echo "  ($(tail -2 "$T/apt" | tr '\n' ' '))"
  exit 77
fi
for p in "${pages[@]}"; do
  page=${p%:*} want=${p##*:}
  png="$page.png"
  timeout 60 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$T/chrome" \
    --screenshot="$png" --window-size=1280,1400 "file://$page" >"$T/chrome.out" 2>&1 ||
    fail "chromium on $page: $(tail -3 "$T/chrome.out")"
  [ -s "$png" ] || { fail "chromium wrote no screenshot of $page"; continue; }
  check png "$png" "$want"
  [ -n "${RS_REPORTS_KEEP:-}" ] && cp "$png" "$RS_REPORTS_KEEP/" 2>/dev/null
done
[ "$fails" = 0 ] || exit 1
echo "reports: JUnit read by junitparser, ${#pages[@]} page(s) rendered by $(basename "$CHROME")"
