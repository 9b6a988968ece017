"""reports_check.py - reads reshard's reports as their consumers do (tests/reports.sh).

  reports_check.py junit FILE pass|fail PROPERTY...
      FILE parsed by junitparser (the JUnit XML library CI plugins build on): counts in the suite
      header agree with its testcases; `pass`: no failure; `fail`: each PROPERTY has a failure whose
      message is non-empty and whose text holds "replay: <command> <fixture>" and the shrunk case,
      which parses as JSON and names the property; every other failure that carries a replay
      command carries a shrunk case that parses as JSON.
  reports_check.py png FILE pass|fail
      a browser screenshot: a PNG with many colours (not blank, not one colour); `fail` also wants
      the red of the differing-element marks.
"""
import json
import sys
import xml.etree.ElementTree as ET

from junitparser import Failure, JUnitXml, Skipped


def die(msg):
    print("reports_check: FAIL: " + msg)
    sys.exit(1)


def check_junit(path, want, props):
    ET.parse(path)  # well-formed XML, whatever junitparser tolerates
    xml = JUnitXml.fromfile(path)
    suites = list(xml) if isinstance(xml, JUnitXml) else [xml]
    if not suites:
        die(path + ": no testsuite")
    failures = {}
    for suite in suites:
        cases = list(suite)
        if suite.tests != len(cases):
            die("%s: tests=%s but %d testcases" % (path, suite.tests, len(cases)))
        nfail = nskip = 0
        for case in cases:
            if not case.name or not case.classname:
                die("%s: a testcase without name/classname" % path)
            for r in case.result:
                if isinstance(r, Failure):
                    nfail += 1
                    failures[case.name] = r
                elif isinstance(r, Skipped):
                    nskip += 1
        if suite.failures != nfail:
            die("%s: failures=%s but %d failing testcases" % (path, suite.failures, nfail))
        if suite.skipped is not None and suite.skipped != nskip:
            die("%s: skipped=%s but %d skipped testcases" % (path, suite.skipped, nskip))
    if want == "pass":
        if failures:
            die("%s: unexpected failures: %s" % (path, ", ".join(sorted(failures))))
        print("reports_check: %s: %d suite(s), no failure" % (path, len(suites)))
        return
    for name, f in failures.items():
        text = f.text or ""
        if text.startswith("replay: ") and name not in props:
            if "\nshrunk case:\n" not in text:
                die("%s: %s: a replay command without the shrunk case" % (path, name))
            json.loads(text.split("\nshrunk case:\n", 1)[1])
    for p in props:
        f = failures.get(p)
        if f is None:
            die("%s: no failure for %s (failures: %s)" % (path, p, ", ".join(sorted(failures)) or "none"))
        if not f.message:
            die("%s: %s: failure without a message" % (path, p))
        text = f.text or ""
        if not text.startswith("replay: reshard "):
            die("%s: %s: failure text does not start with the replay command: %r" % (path, p, text[:120]))
        if "\nshrunk case:\n" not in text:
            die("%s: %s: failure text lacks the shrunk case" % (path, p))
        case = json.loads(text.split("\nshrunk case:\n", 1)[1])
        if case.get("property") != p or "mesh" not in case:
            die("%s: %s: the shrunk case is not the failing property's: %r" % (path, p, case)[:300])
    print("reports_check: %s: %d failure(s) as expected (%s), each with its replay command and shrunk case"
          % (path, len(failures), ", ".join(props)))


def check_png(path, want):
    from PIL import Image

    img = Image.open(path).convert("RGB")
    w, h = img.size
    if w < 200 or h < 200:
        die("%s: %dx%d" % (path, w, h))
    colors = img.getcolors(maxcolors=1 << 20) or []
    if len(colors) < 8:
        die("%s: only %d colour(s): the page did not render" % (path, len(colors)))
    # the marks' red (#e00000 at 85% over a box colour); the page's dark-red headings (#b42318) and
    # their anti-aliased edges are not counted
    red = sum(n for n, (r, g, b) in colors if r >= 200 and g <= 60 and b <= 60)
    if want == "fail" and red < 50:
        die("%s: no differing-element marks (red pixels: %d)" % (path, red))
    print("reports_check: %s: %dx%d, %d colours, %d red pixels" % (path, w, h, len(colors), red))


def main(argv):
    if len(argv) >= 3 and argv[0] == "junit":
        check_junit(argv[1], argv[2], argv[3:])
    elif len(argv) == 3 and argv[0] == "png":
        check_png(argv[1], argv[2])
    else:
        die(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
