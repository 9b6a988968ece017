#!/usr/bin/env bash
# layers.sh BUILD_DIR - the two implementations and the oracle are independent: every symbol that
# librs_ref.a, librs_opt.a or librs_oracle.a uses and does not define itself must come from
# librs_core.a or the system, never from one of the other two (docs/design.md, "Layers"). A shared
# helper belongs in core/, where test_* gives it an outside truth; a call across layers would make a
# bug in it invisible to the differential check.
set -uo pipefail
b=${1:?usage: layers.sh BUILD_DIR}
lib() { for f in "$b/lib$1.a" "$b/opt/lib$1.a"; do [ -f "$f" ] && { echo "$f"; return 0; }; done; return 1; }
defined() { nm -g --defined-only "$1" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u; }
undefined() { nm -g --undefined-only "$1" 2>/dev/null | awk '{ print $NF }' | sort -u; }
fail=0 checked=0
for a in rs_ref rs_opt rs_oracle; do
  la=$(lib "$a") || { [ "$a" = rs_opt ] && continue; echo "layers: lib$a.a not found under $b"; exit 2; }
  own=$(defined "$la")
  uses=$(comm -23 <(undefined "$la") <(echo "$own"))
  for o in rs_ref rs_opt rs_oracle; do
    [ "$o" = "$a" ] && continue
    lo=$(lib "$o") || continue
    # symbols core also defines are core's (a static library pulls the first definition it meets)
    cross=$(comm -12 <(echo "$uses") <(comm -23 <(defined "$lo") <(defined "$(lib rs_core)")))
    if [ -n "$cross" ]; then
      echo "layers: lib$a.a calls into lib$o.a (move what both need to core/):"
      echo "$cross" | sed 's/^/  /'
      fail=1
    fi
  done
  checked=$((checked + 1))
done
[ $checked -ge 2 ] || { echo "layers: fewer than two layers checked"; exit 2; }
[ $fail -eq 0 ] && echo "layers: $checked libraries use only core/ and the system"
exit $fail
