#!/usr/bin/env bash
# megatron.sh RESHARD - the live Megatron-Core stages: Megatron-Core's own code (megatron-core 0.16.1,
# pinned by ci/torch_env.sh, with torch 2.15.0 on CPU) under reshard's harness, through the process
# protocol (docs/conformance.md, "Live Megatron-Core"). Bounded campaigns, then the planted bugs of
# each wrapper, which must be caught.
#   RS_MCORE_SECONDS  seconds per campaign (default 45)
#   RS_MCORE_OUT      where reports, decline logs and failures go (default build/megatron)
# Exit 0: every block passed; 1: a block failed; 77: megatron-core could not be installed (skipped,
# with a message). The megatron-core version is in every report (the backend's / planner's name).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: ci/megatron.sh RESHARD" >&2; exit 2; }
reshard=$(realpath "$1")
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
# RS_MCORE_PYTHON, when set, is used as it is (ci/test.sh sets it to the venv it made); else
# ci/torch_env.sh makes or reuses build/torch-venv.
if [ -n "${RS_MCORE_PYTHON:-}" ]; then
  py=$RS_MCORE_PYTHON
  "$py" -c "import megatron.core.resharding" >/dev/null 2>&1 && rc=0 || rc=77
else
  py=$(bash ci/torch_env.sh)
  rc=$?
fi
if [ $rc = 77 ]; then
  echo "skip: live Megatron-Core stages (megatron-core / torch could not be installed or do not import; see ci/torch_env.sh)"
  exit 77
fi
[ $rc = 0 ] || { echo "megatron.sh: ci/torch_env.sh failed ($rc)" >&2; exit 1; }
secs=${RS_MCORE_SECONDS:-45}
out=${RS_MCORE_OUT:-$top/build/megatron}
mkdir -p "$out"
fail=0
note() { echo "== megatron: $*"; }

# ==== BEGIN p2p: Megatron-Core's resharding planner and executor (tools/megatron/p2p.py) ====
# The planner role under fuzz-planner --kind p2p (exact cover, legal senders, traffic vs the lower
# bound) and the backend role under conform --suite p2p (Megatron's own plan and reshard's opt and
# ref plans executed with GlooCopyService on a gloo world, bit for bit against the oracle). Cases
# Megatron cannot express are declined (skipped) and counted by reason from the --log files.
# Then each planted bug (--bug drop_transfer, --bug wrong_slice) must make the harness exit 1.
p2p_child="$py tools/megatron/p2p.py"
summary_declines() {  # FILE: count the declined models of a --log file by reason
  [ -s "$1" ] && "$py" - "$1" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# one line per model: its p2p_plan (conform also sends the declined model's p2p_execute)
c = collections.Counter(r["reason"] for r in rows if r.get("op") == "p2p_plan")
print("   declined by reason: " + ", ".join("%s %d" % kv for kv in c.most_common()))
PY
  return 0
}
rm -f "$out"/p2p-*-declines.jsonl
note "p2p planner: fuzz-planner --kind p2p, $secs s"
t0=$SECONDS
# --max-decline-share 0.95: Megatron can hold about one generated model in ten (uneven sizes, MXFP8,
# multi-dim and reversed layouts are declined by reason, above); fuzz-planner's default 0.5 would
# fail the run for what the generator draws, not for what Megatron does
nice "$reshard" fuzz-planner --kind p2p --planner "exec:$p2p_child --role planner --log $out/p2p-planner-declines.jsonl" \
  --seconds "$secs" --seed 1 --timeout 300 --max-decline-share 0.95 --regress-dir "$out/p2p-planner-failures" --json "$out/p2p-planner.json" \
  > "$out/p2p-planner.log" 2>&1
rc=$?
grep -E "^fuzz-planner:|passed [0-9]|^FAIL|traffic vs" "$out/p2p-planner.log" | sed 's/^/   /'
summary_declines "$out/p2p-planner-declines.jsonl"
echo "   exit $rc, $((SECONDS - t0)) s"
[ $rc = 0 ] || { echo "FAIL: Megatron-Core's P2P planner under fuzz-planner (log: $out/p2p-planner.log)"; fail=1; }

note "p2p backend: conform --suite p2p, $secs s"
t0=$SECONDS
nice "$reshard" conform --suite p2p --backend "exec:$p2p_child --role backend --log $out/p2p-backend-declines.jsonl" \
  --seconds "$secs" --seed 1 --timeout 300 --failures "$out/p2p-backend-failures" --json "$out/p2p-backend.json" \
  > "$out/p2p-backend.log" 2>&1
rc=$?
grep -E "^backend |^p2p|FAIL" "$out/p2p-backend.log" | sed 's/^/   /'
summary_declines "$out/p2p-backend-declines.jsonl"
echo "   exit $rc, $((SECONDS - t0)) s"
[ $rc = 0 ] || { echo "FAIL: Megatron-Core's P2P executor under conform (log: $out/p2p-backend.log)"; fail=1; }

# planted bugs: fuzz-planner must fail the planner (drop_transfer: an element written 0 times,
# `illegal`), conform the backend (both bugs: bytes differ from the oracle)
for check in "planner drop_transfer" "backend drop_transfer" "backend wrong_slice"; do
  set -- $check
  note "planted bug $2 in the $1 wrapper: must be caught"
  if [ "$1" = planner ]; then
    nice "$reshard" fuzz-planner --kind p2p --planner "exec:$p2p_child --role planner --bug $2" --cases 300 --seed 2 \
      --timeout 300 --regress-dir "$out/p2p-bug-$1-$2" > "$out/p2p-bug-$1-$2.log" 2>&1
  else
    nice "$reshard" conform --suite p2p --backend "exec:$p2p_child --role backend --bug $2" --cases 300 --seed 1 \
      --fixtures none --timeout 300 --shrink-runs 50 --failures "$out/p2p-bug-$1-$2" > "$out/p2p-bug-$1-$2.log" 2>&1
  fi
  rc=$?
  grep -m2 -E "^FAIL|FAIL" "$out/p2p-bug-$1-$2.log" | sed 's/^/   /'
  if [ $rc = 1 ]; then echo "   caught (exit 1)"; else echo "FAIL: planted bug $2 ($1) not caught (exit $rc)"; fail=1; fi
done
# ==== END p2p ====

# ==== BEGIN ckpt: Megatron-Core's dist_checkpointing (tools/megatron/ckpt.py) ====
# conform --suite ckpt: each case's state dict saved with dist_checkpointing.save (torch_dist) on N
# gloo processes as ShardedTensors (a ShardedTensorFactory for some keys, a ShardedObject and a
# common entry on every rank) and loaded with dist_checkpointing.load on M processes in another
# layout, bit for bit against the oracle; declined cases counted by reason from the --log file.
# Then each planted bug (rename_key, wrong_slice, factory_merge) must make conform exit 1.
# Opt-in (RS_MCORE_CKPT=1), not yet part of CI: on the 2-core CI machine a worker's torch +
# megatron import and first save took minutes, the campaign has only reached 90 cases, and two of
# the three planted bugs are not yet shown caught by the oracle (docs/conformance.md, "dist_checkpointing").
if [ "${RS_MCORE_CKPT:-0}" != 1 ]; then
  note "ckpt backend: skipped (opt-in: RS_MCORE_CKPT=1; see docs/conformance.md, dist_checkpointing)"
else
ck_child="$py tools/megatron/ckpt.py"
ck_secs=${RS_MCORE_CKPT_SECONDS:-120}
rm -f "$out"/ckpt-declines.jsonl
note "ckpt backend: conform --suite ckpt, $ck_secs s"
t0=$SECONDS
nice "$reshard" conform --suite ckpt --fixtures none --backend "exec:$ck_child --log $out/ckpt-declines.jsonl" \
  --seconds "$ck_secs" --seed 1 --timeout 300 --shrink-runs 30 --failures "$out/ckpt-failures" \
  --json "$out/ckpt.json" > "$out/ckpt.log" 2>&1
rc=$?
grep -E "^backend |^ckpt|FAIL" "$out/ckpt.log" | sed 's/^/   /'
[ -s "$out/ckpt-declines.jsonl" ] && "$py" - "$out/ckpt-declines.jsonl" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
c = collections.Counter("%s: %s" % (r["kind"], r["message"].split(":")[-1].strip()[:60]) for r in rows)
print("   declined/failed by reason: " + "; ".join("%s x%d" % kv for kv in c.most_common()))
PY
echo "   exit $rc, $((SECONDS - t0)) s"
[ $rc = 0 ] || { echo "FAIL: Megatron-Core's dist_checkpointing under conform (log: $out/ckpt.log)"; fail=1; }

for bug in rename_key wrong_slice factory_merge; do
  note "planted bug $bug in the ckpt wrapper: must be caught"
  nice "$reshard" conform --suite ckpt --fixtures none --backend "exec:$ck_child --bug $bug" --cases 10 --seed 1 \
    --timeout 300 --shrink-runs 5 --failures "$out/ckpt-bug-$bug" > "$out/ckpt-bug-$bug.log" 2>&1
  rc=$?
  grep -m2 -E "FAIL" "$out/ckpt-bug-$bug.log" | sed 's/^/   /'
  if [ $rc = 1 ]; then echo "   caught (exit 1)"; else echo "FAIL: planted bug $bug (ckpt) not caught (exit $rc)"; fail=1; fi
done
fi
# ==== END ckpt ====

exit $fail
