#!/usr/bin/env bash
# megatron.sh RESHARD - the live Megatron-Core stages: Megatron-Core's own code (megatron-core 0.16.1,
# pinned by ci/torch_env.sh, with torch 2.15.0 on CPU) under reshard's harness, through the process
# protocol (docs/conformance.md, "Live Megatron-Core"). Bounded campaigns, then the planted bugs of
# each wrapper, which must be caught; for dist_checkpointing also the cross reads between Megatron's
# and reshard's checkpoints, which must pass, and fail when wrong values are planted.
#   RS_MCORE_SECONDS  seconds per p2p campaign (default 45)
#   RS_MCORE_CKPT_SECONDS  seconds of the ckpt campaign (default 45)
#   RS_MCORE_OUT      where reports, decline logs and failures go (default build/megatron)
#   RS_MCORE_BLOCKS   the blocks to run (default "p2p ckpt"; "ckpt-campaign", "ckpt-checks": a half of ckpt)
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
blocks=" ${RS_MCORE_BLOCKS:-p2p ckpt} "
want() { case "$blocks" in *" $1 "*) return 0 ;; esac; return 1; }

# ==== BEGIN p2p: Megatron-Core's resharding planner and executor (tools/megatron/p2p.py) ====
if want p2p; then
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
fi
# ==== END p2p ====

# ==== BEGIN ckpt: Megatron-Core's dist_checkpointing (tools/megatron/ckpt.py) ====
# conform --suite ckpt: each case's state dict saved with dist_checkpointing.save (torch_dist) on N
# gloo processes as ShardedTensors (a ShardedTensorFactory for some keys, a ShardedObject and a
# common entry on every rank) and loaded with dist_checkpointing.load on M processes in another
# layout, bit for bit against the oracle; what the backend declines or fails is logged by reason.
# Then each planted bug must make conform exit 1: wrong_slice and factory_merge (valid checkpoints
# of wrong values) through the oracle comparison ("!= oracle"), rename_key and drop_shard through
# Megatron's load / save refusing. Then the cross reads (tools/megatron/mcore_ckpt_cross.py), which
# must pass, and with --plant wrong_values must fail.
#   RS_MCORE_CKPT_SECONDS  the campaign's seconds (default 45)
# Its two halves can run apart: RS_MCORE_BLOCKS="ckpt-campaign" (the campaign) and "ckpt-checks" (the
# planted bugs and the cross reads); "ckpt" is both.
ck_campaign=0 ck_checks=0
if want ckpt || want ckpt-campaign; then ck_campaign=1; fi
if want ckpt || want ckpt-checks; then ck_checks=1; fi
if [ $ck_campaign = 1 ] || [ $ck_checks = 1 ]; then
ck_child="$py tools/megatron/ckpt.py"
ck_secs=${RS_MCORE_CKPT_SECONDS:-45}
if ! "$py" -c "import psutil" >/dev/null 2>&1; then
  # without it every torch_dist writer process fails and the save waits for ever (docs/conformance.md,
  # dist_checkpointing, finding 2): a broken environment, not a skip
  echo "FAIL: ckpt backend: psutil does not import in $py (ci/torch_env.sh installs it)"; fail=1
else
# TMPDIR: each case's checkpoint directory lives in memory where /dev/shm is writable
ck_tmp=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && ck_tmp=/dev/shm
if [ $ck_campaign = 1 ]; then
rm -rf "$out"/ckpt-declines.jsonl "$out"/ckpt-failures
note "ckpt backend: conform --suite ckpt, $ck_secs s"
t0=$SECONDS
TMPDIR=$ck_tmp nice "$reshard" conform --suite ckpt --fixtures none --backend "exec:$ck_child --log $out/ckpt-declines.jsonl" \
  --seconds "$ck_secs" --seed 1 --timeout 300 --shrink-runs 30 --shrink-seconds 60 --failures "$out/ckpt-failures" \
  --json "$out/ckpt.json" > "$out/ckpt.log" 2>&1
rc=$?
grep -E "^backend |^ckpt|FAIL" "$out/ckpt.log" | sed 's/^/   /'
"$py" - "$out/ckpt-declines.jsonl" "$out/ckpt.json" <<'PY'
import collections, json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()] if os.path.exists(sys.argv[1]) else []
rep = json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) else {}
dec = collections.Counter(r["message"].split(":")[0][:80] for r in rows if r["kind"] == "declined")
bad = collections.Counter(r["message"][:100] for r in rows if r["kind"] != "declined")
skip = rep.get("skip", 0)
print("   skipped %d: declined by the backend %d%s; left empty by the harness (Megatron-only parts stripped) %d"
      % (skip, sum(dec.values()), "".join(" (%s x%d)" % kv for kv in dec.most_common()), skip - sum(dec.values())))
if bad:
    print("   failed/pool errors: " + "; ".join("%s x%d" % kv for kv in bad.most_common(5)))
PY
echo "   exit $rc, $((SECONDS - t0)) s"
[ $rc = 0 ] || { echo "FAIL: Megatron-Core's dist_checkpointing under conform (log: $out/ckpt.log)"; fail=1; }
fi

if [ $ck_checks = 1 ]; then
rm -rf "$out"/ckpt-bug-* "$out"/ckpt-cross*
# planted bugs: "bug how": how = oracle (the failure must be a comparison with the oracle) or any
for check in "wrong_slice oracle" "factory_merge oracle" "rename_key any" "drop_shard any"; do
  set -- $check
  how=""; [ "$2" = oracle ] && how=" by the oracle comparison"
  note "planted bug $1 in the ckpt wrapper: must be caught$how"
  t0=$SECONDS
  TMPDIR=$ck_tmp nice "$reshard" conform --suite ckpt --fixtures none --backend "exec:$ck_child --bug $1" --cases 2 --seed 1 \
    --timeout 300 --shrink-runs 1 --shrink-seconds 20 --failures "$out/ckpt-bug-$1" > "$out/ckpt-bug-$1.log" 2>&1
  rc=$?
  grep -m1 -A1 -E "^FAIL" "$out/ckpt-bug-$1.log" | cut -c1-300 | sed 's/^/   /'
  if [ $rc != 1 ]; then echo "FAIL: planted bug $1 (ckpt) not caught (exit $rc)"; fail=1
  elif [ "$2" = oracle ] && ! grep -q "ckpt_load != oracle" "$out/ckpt-bug-$1.log"; then
    echo "FAIL: planted bug $1 (ckpt) failed the run, but not as bytes that differ from the oracle"; fail=1
  else echo "   caught (exit 1), $((SECONDS - t0)) s"; fi
done

note "ckpt cross reads: Megatron save -> reshard load, reshard save -> Megatron load (== oracle)"
t0=$SECONDS
nice "$py" tools/megatron/mcore_ckpt_cross.py --reshard "$reshard" --work "$out/ckpt-cross" > "$out/ckpt-cross.log" \
  2> "$out/ckpt-cross.err"
rc=$?
sed 's/^/   /' "$out/ckpt-cross.log" | cut -c1-220
echo "   exit $rc, $((SECONDS - t0)) s"
[ $rc = 0 ] || { echo "FAIL: cross reads (log: $out/ckpt-cross.log, $out/ckpt-cross.err)"; fail=1; }
note "ckpt cross reads with planted wrong values: every comparison with the oracle must fail"
t0=$SECONDS
nice "$py" tools/megatron/mcore_ckpt_cross.py --reshard "$reshard" --work "$out/ckpt-cross-plant" --layouts 1 \
  --plant wrong_values > "$out/ckpt-cross-plant.log" 2> "$out/ckpt-cross-plant.err"
rc=$?
n=$(grep -c "^FAIL .*== oracle" "$out/ckpt-cross-plant.log")
if [ $rc = 1 ] && [ "$n" = 2 ]; then echo "   caught: both reads differ from the oracle (exit 1), $((SECONDS - t0)) s"
else echo "FAIL: planted wrong values in the cross reads: exit $rc, $n of 2 reads reported as differing"; fail=1; fi
fi
fi
fi
# ==== END ckpt ====

exit $fail
