#!/usr/bin/env bash
# standalone.sh [SOURCE_DIR] - the repository stands alone: no file outside fixtures/ points to a
# directory beside the checkout or names upstream documents by private numbers instead of their
# own names, docs/contract.md keeps sections 1-12 (code comments cite them as "SPEC n"), and the
# relative links of the README and docs/ resolve.
set -uo pipefail
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 2
# The patterns are written so that this file does not match itself.
beside='\.\./shared'
numbered='seeds? 00[0-9]'
fail=0
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files() { git ls-files -z --cached --others --exclude-standard -- . ':!:fixtures/'; }
else
  files() { find . -type f -not -path './.git/*' -not -path './fixtures/*' -not -path './build*' \
                 -not -path './out/*' -print0; }
fi
hits=$(files | xargs -0 grep -I -n -i -E -e "$beside" -e "$numbered" -- 2>/dev/null)
if [ -n "$hits" ]; then
  echo "files outside fixtures/ must name upstream sources (no path beside the checkout, no numbered seeds):"
  echo "$hits"
  fail=1
fi
if [ ! -f docs/design.md ]; then
  echo "docs/design.md is missing"
  fail=1
fi
if [ ! -f docs/contract.md ]; then
  echo "docs/contract.md is missing"
  fail=1
else
  for n in $(seq 1 12); do
    if ! grep -q -E "^## $n\. " docs/contract.md; then
      echo "docs/contract.md lacks the heading of section $n (\"## $n. ...\")"
      fail=1
    fi
  done
fi
# Relative links of the README and docs/ lead to files of the checkout; a line that says a page is
# "(being written)" may link ahead to it.
# One awk pass prints "page<TAB>target" for every relative link (a per-line shell loop took 26 s).
links=$(awk '
  index($0, "(being written)") { next }
  { line = $0
    while (match(line, /\]\([^)#[:space:]]+/)) {
      t = substr(line, RSTART + 2, RLENGTH - 2); line = substr(line, RSTART + RLENGTH)
      if (t !~ /^(https?:\/\/|mailto:)/) print FILENAME "\t" t
    } }' README.md docs/*.md)
while IFS=$'\t' read -r md target; do
  [ -n "$md" ] || continue
  if [ ! -e "$(dirname "$md")/$target" ]; then
    echo "$md: broken link to $target"
    fail=1
  fi
done <<<"$links"
[ $fail -eq 0 ] && echo "standalone: ok"
exit $fail
